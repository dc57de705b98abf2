"""Shared by test_llm_quant.py and test_llm_matmul.py: the backends to run on, moving arrays
there, random valid blocks and an independent NumPy reference dequantizer."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from tinykernels.runtime.opencl import OpenCL
from tinykernels.runtime.webgpu import WebGPU

_CL_OK, _CL_WHY = OpenCL.available()
_WG_OK, _WG_WHY = WebGPU.available()

BACKENDS = [
    pytest.param("CPU", id="CPU"),
    pytest.param("INTERP", id="INTERP"),
    pytest.param("CL", id="CL", marks=pytest.mark.skipif(not _CL_OK, reason=f"OpenCL unavailable: {_CL_WHY}")),
    pytest.param("WEBGPU", id="WEBGPU", marks=pytest.mark.skipif(not _WG_OK, reason=f"WebGPU unavailable: {_WG_WHY}")),
]
QTYPES = ["q4_0", "q8_0", "q4_k"]


def to(be: str, x):
    """``x`` (NumPy) on backend ``be``: the NumPy array itself for the CPU."""
    return x if be == "CPU" else tk.asarray(np.ascontiguousarray(x), backend=tk.backend(be))


def to_q(be: str, q):
    return llm.QTensor(q.qtype, q.shape, to(be, np.asarray(q.data)))


def host(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.numpy()


def random_blocks(qtype: str, rows: int, nblocks: int, rng) -> np.ndarray:
    """Random bytes with finite float16 scales: every such byte string is a valid row."""
    fmt = llm.QTYPES[qtype]
    raw = rng.integers(0, 256, (rows, nblocks, fmt.block_bytes), dtype=np.uint8)
    for off in ((0, 2) if qtype == "q4_k" else (0,)):
        hi = raw[:, :, off + 1]
        bad = (hi & 0x7C) == 0x7C                       # exponent all ones: inf or NaN
        raw[:, :, off + 1] = np.where(bad, hi & 0xFB, hi)
    return raw.reshape(rows, nblocks * fmt.block_bytes)


def _f16(b: np.ndarray) -> np.ndarray:
    return b.copy().view("<f2").astype(np.float32)[..., 0]


def ref_dequantize(qtype: str, data: np.ndarray) -> np.ndarray:
    """float32 weights from GGUF block bytes, written from the format description (ggml's
    formulas, evaluated in float32 with the same operation order)."""
    fmt = llm.QTYPES[qtype]
    rows = data.shape[0]
    blk = data.reshape(-1, fmt.block_bytes)
    if qtype == "q8_0":
        d = _f16(blk[:, 0:2])
        return (blk[:, 2:].view(np.int8).astype(np.float32) * d[:, None]).reshape(rows, -1)
    if qtype == "q4_0":
        d = _f16(blk[:, 0:2])
        qs = blk[:, 2:].astype(np.int32)
        q = np.concatenate([qs & 15, qs >> 4], axis=1) - 8
        return (d[:, None] * q.astype(np.float32)).reshape(rows, -1)
    d, dmin = _f16(blk[:, 0:2]), _f16(blk[:, 2:4])
    s = blk[:, 4:16].astype(np.int32)
    out = np.empty((blk.shape[0], 256), np.float32)
    for sub in range(8):
        if sub < 4:
            sc, mn = s[:, sub] & 63, s[:, sub + 4] & 63
        else:
            sc = (s[:, sub + 4] & 15) | ((s[:, sub - 4] >> 6) << 4)
            mn = (s[:, sub + 4] >> 4) | ((s[:, sub] >> 6) << 4)
        qs = blk[:, 16 + 32 * (sub // 2):16 + 32 * (sub // 2) + 32].astype(np.int32)
        q = (qs >> 4) if sub % 2 else (qs & 15)
        scale = d * sc.astype(np.float32)
        off = dmin * mn.astype(np.float32)
        out[:, 32 * sub:32 * sub + 32] = scale[:, None] * q.astype(np.float32) - off[:, None]
    return out.reshape(rows, -1)
