"""GGUF block-quantized weights: ``QTensor``, ``quantize`` and ``dequantize``.

The three formats, byte for byte as llama.cpp (ggml) stores them; a row of ``K`` weights is
``K // block`` consecutive blocks, little-endian, no padding:

* ``q4_0``: 32 weights in 18 bytes: ``d`` (float16), then 16 bytes ``qs``; weight ``j < 16``
  is the low nibble of ``qs[j]``, weight ``j + 16`` its high nibble; ``w = d * (q - 8)``.
* ``q8_0``: 32 weights in 34 bytes: ``d`` (float16), then 32 int8 ``qs``; ``w = d * q``.
* ``q4_k``: 256 weights in 144 bytes: ``d``, ``dmin`` (float16), 12 bytes of eight 6-bit
  sub-block scales and mins, then 128 bytes ``qs``. Sub-block ``s`` (32 weights) reads the low
  nibbles (even ``s``) or the high nibbles (odd ``s``) of ``qs[32 * (s // 2):][:32]``;
  ``w = (d * sc[s]) * q - dmin * m[s]``.

Dequantization runs as kernels on the data's backend (float16 scales are decoded from their
two bytes arithmetically, exactly); quantization runs in NumPy on the host (an offline step)
and puts the bytes on the input's backend.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import tinykernels as tk

from .. import array as _arr
from . import _common as C

__all__ = ["QTensor", "quantize", "dequantize", "QTYPES"]


@dataclass(frozen=True)
class QFormat:
    """A block format: ``block`` weights in ``block_bytes`` bytes; ``ggml_type`` is its
    ``GGMLQuantizationType`` number in GGUF files."""
    name: str
    block: int
    block_bytes: int
    ggml_type: int


QTYPES = {
    "q4_0": QFormat("q4_0", 32, 18, 2),
    "q8_0": QFormat("q8_0", 32, 34, 8),
    "q4_k": QFormat("q4_k", 256, 144, 12),
}


def qformat(qtype, fn: str = "QTensor", name: str = "qtype") -> QFormat:
    """The format named ``qtype`` (case-insensitive), or ``ValueError`` naming the argument."""
    key = str(qtype).lower() if isinstance(qtype, str) else None
    C.require(key in QTYPES, fn, name, f"expected a quantization type {C.one_of(repr(q) for q in QTYPES)}, got {qtype!r}")
    return QTYPES[key]


class QTensor:
    """A block-quantized [M, K] weight matrix: ``qtype`` (``"q4_0"``, ``"q8_0"``, ``"q4_k"``),
    ``shape`` (logical ``(M, K)``, ``K`` a multiple of the block size) and ``data``: uint8
    ``[M, K // block * block_bytes]`` on any backend, each row's blocks as GGUF stores them.
    ``QTensor(qtype, shape, data)`` wraps raw bytes without copying."""

    __slots__ = ("qtype", "shape", "data")

    def __init__(self, qtype: str, shape, data):
        fmt = qformat(qtype)
        C.require(isinstance(shape, (tuple, list)) and len(shape) == 2 and
                  all(C.is_int(n) and n >= 0 for n in shape),
                  "QTensor", "shape", f"expected (M, K) with non-negative ints, got {shape!r}")
        m, k = (int(n) for n in shape)
        C.require(k % fmt.block == 0, "QTensor", "shape",
                  f"expected a row length K that is a multiple of {fmt.name}'s block of {fmt.block}, got K = {k}")
        C.require_array(data, "QTensor", "data", "a uint8 array")
        C.require_dtype(data, "QTensor", "data", ["uint8"])
        C.require_shape(data, "QTensor", "data", (m, k // fmt.block * fmt.block_bytes))
        C.contiguous(data, "QTensor", "data")
        self.qtype, self.shape, self.data = fmt.name, (m, k), data

    @property
    def format(self) -> QFormat:
        return QTYPES[self.qtype]

    @property
    def backend(self):
        return _arr.get_backend(self.data)

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] // self.format.block * self.format.block_bytes

    def __repr__(self) -> str:
        return f"QTensor({self.qtype!r}, shape={self.shape}, backend={self.backend!r})"


# ----------------------------------------------------------------------------- kernel helpers

@tk.func
def half_at(data, r, i):
    """The IEEE float16 stored little-endian at ``data[r, i:i + 2]`` (uint8), as float32,
    exactly: the half's exponent and mantissa bits moved into a float32's (``<< 13``, the
    exponent rebased by ``112 << 23``; inf/NaN by twice that), the sign bit ORed in.
    A subnormal half (``m * 2**-24``) is decoded as ``(1 + m / 1024) * 2**-14 - 2**-14``,
    both exact normal floats, so no float32 subnormal appears (GPUs may flush them). Integer
    arithmetic on 0/1 flags, no select and no branch: a loop decoding one scale per block
    stays straight-line code (a select GCC turned into a branch on the scale's sign, a
    mispredicted jump per block)."""
    h = tk.int32(data[r, i]) | (tk.int32(data[r, i + 1]) << 8)
    em = h & 0x7FFF
    sub = tk.int32(em < 0x0400)
    big = tk.int32(em >= 0x7C00)
    bits = (em << 13) + 0x38000000 + big * 0x38000000 + (sub << 23)
    mag = tk.bitcast(bits, tk.float32) - tk.float32(sub) * tk.float32(6.103515625e-05)      # 2**-14
    return tk.bitcast(tk.bitcast(mag, tk.uint32) | (tk.uint32(h & 0x8000) << 16), tk.float32)


@tk.func
def half_at_host(data, r, i):
    """:func:`half_at` for the host backends (CPU, interpreter), bit for bit the same float32
    for every non-NaN pattern (a NaN for a NaN; a signaling one stays signaling), in fewer
    operations: the exponent and mantissa bits moved into a
    float32's (``<< 13``) scaled by ``2**112`` (exact: a subnormal half becomes a float32
    subnormal times a power of two, an exact normal), inf/NaN by ORing in the all-ones
    exponent (the product keeps the mantissa bits), the sign ORed in. Relies on IEEE
    subnormal arithmetic, which the host backends have and GPUs may not (they flush)."""
    h = tk.int32(data[r, i]) | (tk.int32(data[r, i + 1]) << 8)
    em = h & 0x7FFF
    mag = tk.bitcast(em << 13, tk.float32) * tk.float32(5.192296858534828e+33)        # 2**112
    big = tk.int32(em >= 0x7C00)
    return tk.bitcast(tk.bitcast(mag, tk.int32) | (big * 0x7F800000) | ((h & 0x8000) << 16), tk.float32)


@tk.func
def q4k_scale_min(data, r, base, s):
    """The 6-bit (scale, min) of sub-block ``s`` (0..7) of the Q4_K block at ``data[r, base]``:
    bytes 4..15 of the block pack eight scales and eight mins."""
    p = base + 4
    sc = 0
    mn = 0
    if s < 4:
        sc = tk.int32(data[r, p + s]) & 63
        mn = tk.int32(data[r, p + s + 4]) & 63
    else:
        sc = (tk.int32(data[r, p + s + 4]) & 15) | ((tk.int32(data[r, p + s - 4]) >> 6) << 4)
        mn = (tk.int32(data[r, p + s + 4]) >> 4) | ((tk.int32(data[r, p + s]) >> 6) << 4)
    return sc, mn


@tk.kernel
def _dequant_q4_0(out, data: tk.Const):
    """One work item per (row, block): 32 weights."""
    r, b = tk.index(tk.Global, tk.Cartesian)
    base = b * 18
    d = half_at(data, r, base)
    o = b * 32
    for j in range(16):
        q = tk.int32(data[r, base + 2 + j])
        out[r, o + j] = d * tk.float32((q & 15) - 8)
        out[r, o + j + 16] = d * tk.float32((q >> 4) - 8)


@tk.kernel
def _dequant_q8_0(out, data: tk.Const):
    """One work item per (row, block): 32 weights."""
    r, b = tk.index(tk.Global, tk.Cartesian)
    base = b * 34
    d = half_at(data, r, base)
    o = b * 32
    for j in range(32):
        q = tk.int32(data[r, base + 2 + j])
        out[r, o + j] = tk.float32(q - ((q & 128) << 1)) * d


@tk.func
def q4k_quarter(data, r, b, g):
    """Quarter ``g`` (64 weights: sub-blocks 2g and 2g + 1) of Q4_K block ``b`` of row ``r``:
    ``(d0, dm0, d1, dm1, first quant byte, first weight)``; weights are ``d0 * lo - dm0`` for the
    low nibbles and ``d1 * hi - dm1`` for the high ones."""
    base = b * 144
    d = half_at(data, r, base)
    dmin = half_at(data, r, base + 2)
    sc0, m0 = q4k_scale_min(data, r, base, 2 * g)
    sc1, m1 = q4k_scale_min(data, r, base, 2 * g + 1)
    return (d * tk.float32(sc0), dmin * tk.float32(m0), d * tk.float32(sc1), dmin * tk.float32(m1),
            base + 16 + 32 * g, b * 256 + 64 * g)


@tk.kernel
def _dequant_q4_k(out, data: tk.Const):
    """One work item per (row, 64 weights): sub-blocks 2g and 2g + 1 of a 256-weight block,
    the low and high nibbles of the same 32 bytes."""
    r, t = tk.index(tk.Global, tk.Cartesian)
    d0, dm0, d1, dm1, qb, o = q4k_quarter(data, r, t // 4, t % 4)
    for j in range(32):
        q = tk.int32(data[r, qb + j])
        out[r, o + j] = d0 * tk.float32(q & 15) - dm0
        out[r, o + j + 32] = d1 * tk.float32(q >> 4) - dm1


_DEQUANT = {"q4_0": (_dequant_q4_0, 1), "q8_0": (_dequant_q8_0, 1), "q4_k": (_dequant_q4_k, 4)}


def dequantize(qt: QTensor, out=None, stream=None):
    """The float32 ``[M, K]`` weights of ``qt``, on ``qt.data``'s backend, bit for bit what
    ``gguf.quants.dequantize`` (and ggml's reference dequantizers) compute."""
    C.require(isinstance(qt, QTensor), "dequantize", "qt", f"expected a QTensor, got {type(qt).__name__}")
    backend = C.backend_of("dequantize", stream=stream, qt=qt.data, out=out)
    out = C.output(out, "dequantize", qt.data, qt.shape, np.float32, backend, reads_across={"qt": qt.data})
    C.contiguous(out, "dequantize", "out")
    kern, per_block = _DEQUANT[qt.qtype]
    m, k = qt.shape
    if m and k:
        C.launch(kern, backend, (out, qt.data), (m, k // qt.format.block * per_block), stream=stream)
    return out


# ----------------------------------------------------------------------------- quantization (host)

def _f16_bytes(x: np.ndarray) -> np.ndarray:
    """float32 [n] -> the little-endian float16 bytes [n, 2] (round to nearest even)."""
    return x.astype("<f2").view(np.uint8).reshape(-1, 2)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C's roundf (ties away from zero), exactly, in x's dtype."""
    a = np.abs(x)
    f = np.floor(a)
    return np.copysign(f + (a - f >= 0.5), x)


def _quant_q8_0(blocks: np.ndarray) -> np.ndarray:
    amax = np.abs(blocks).max(axis=1)
    d = amax / np.float32(127)
    inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = _round_half_away(blocks * inv[:, None]).astype(np.int8)
    return np.concatenate([_f16_bytes(d), q.view(np.uint8)], axis=1)


def _quant_q4_0(blocks: np.ndarray) -> np.ndarray:
    # the signed value of largest magnitude (first on ties) maps to -8
    vmax = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=1)[:, None], axis=1)[:, 0]
    d = vmax / np.float32(-8)
    inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = np.trunc(blocks * inv[:, None] + np.float32(8.5)).astype(np.uint8).clip(0, 15)
    qs = q[:, :16] | (q[:, 16:] << np.uint8(4))
    return np.concatenate([_f16_bytes(d), qs], axis=1)


def _f16_at_least(x: np.ndarray) -> np.ndarray:
    """The smallest float16 >= x (x >= 0, finite in float16), as float32."""
    h = x.astype(np.float16)
    low = h.astype(np.float32) < x
    h[low] = np.nextafter(h[low], np.float16(np.inf))
    return h.astype(np.float32)


def _quant_q4_k(blocks: np.ndarray) -> np.ndarray:
    """Per 32-weight sub-block: ``m = max(0, -min(x))``, scale ``(max(x) + m) / 15``; the eight
    scales and mins become 6-bit multiples of ``d``/``dmin`` rounded up (float16 rounded up),
    so the sub-block's range stays covered and each weight is within half a step of its value."""
    n = blocks.shape[0]
    sub = blocks.reshape(n, 8, 32)
    mins = np.maximum(np.float32(0), -sub.min(axis=2))                 # [n, 8], >= 0
    scales = (sub.max(axis=2) + mins) / np.float32(15)                 # [n, 8], >= 0
    d, dmin = scales.max(axis=1) / np.float32(63), mins.max(axis=1) / np.float32(63)   # [n]
    top = np.float32(np.finfo(np.float16).max)
    C.require(bool((d <= top).all() and (dmin <= top).all()), "quantize", "w",
              f"values too large for q4_k's float16 scales d and dmin: a 32-weight sub-block may span "
              f"at most 15 * 63 * 65504 = {15 * 63 * 65504:.4g} and go down to -63 * 65504 = "
              f"{-63 * 65504:.4g}; got a span of {float(scales.max()) * 15:.4g} and a minimum of "
              f"{-float(mins.max()):.4g} (scale the weights down first)")
    d, dmin = _f16_at_least(d), _f16_at_least(dmin)
    sc = np.where(d[:, None] > 0, np.ceil(scales / d[:, None]), 0)
    mn = np.where(dmin[:, None] > 0, np.ceil(mins / dmin[:, None]), 0)
    sc = np.clip(sc, 0, 63).astype(np.uint8)
    mn = np.clip(mn, 0, 63).astype(np.uint8)
    step = d[:, None] * sc.astype(np.float32)                          # as the dequantizer computes
    off = dmin[:, None] * mn.astype(np.float32)
    q = np.where(step[:, :, None] > 0, (sub + off[:, :, None]) / step[:, :, None], 0)
    q = np.clip(_round_half_away(q.astype(np.float32)), 0, 15).astype(np.uint8)   # [n, 8, 32]
    packed = np.empty((n, 12), np.uint8)
    packed[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    packed[:, 4:8] = (mn[:, :4] & 63) | ((mn[:, 4:] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:] & 15) | ((mn[:, 4:] & 15) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << np.uint8(4))).reshape(n, 128)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), packed, qs], axis=1)


_QUANT = {"q4_0": _quant_q4_0, "q8_0": _quant_q8_0, "q4_k": _quant_q4_k}


def _host(x) -> np.ndarray:
    """``x``'s values as a NumPy array (a view for host arrays, a copy from a device)."""
    h = _arr.as_host_ndarray(x)
    if h is None:
        h = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    return h


def quantize(w, qtype: str) -> QTensor:
    """Quantize float weights ``w`` [M, K] (``K`` a multiple of the block size) to ``qtype``.

    ``w`` is float32, or float16/bfloat16 (taken at its exact float32 values, as
    ``gguf.quants.quantize`` and ggml's ``cpy`` from F16 take them). ``q4_0`` and ``q8_0`` are
    bit for bit ggml's reference quantizers (and ``gguf.quants.quantize``). ``q4_k`` uses a
    simple range quantizer (not ggml's iterative search): every weight is within half a
    quantization step of its dequantized value. Runs in NumPy on the host; the bytes go back
    to ``w``'s backend, in an array of ``w``'s kind (NumPy in, NumPy out; torch in, torch out;
    ``tk.Array`` in, ``tk.Array`` out)."""
    fmt = qformat(qtype, "quantize")
    C.require_array(w, "quantize", "w")
    C.require_dtype(w, "quantize", "w", C._float_dtypes(("float32", "float16", "bfloat16")))
    s = C.shape_of(w)
    C.require(len(s) == 2, "quantize", "w", f"expected a 2-D [M, K] array, got shape {s}")
    C.require(s[1] % fmt.block == 0, "quantize", "w",
              f"expected a row length K that is a multiple of {fmt.name}'s block of {fmt.block}, got K = {s[1]}")
    backend = C.backend_of("quantize", w=w)
    h = np.ascontiguousarray(_host(w), dtype=np.float32)
    C.require(bool(np.isfinite(h).all()), "quantize", "w", "expected finite values, got NaN or infinity")
    m, k = s
    blocks = h.reshape(-1, fmt.block)
    with np.errstate(all="ignore"):     # zero, subnormal and huge blocks: 1/d, float16 overflow,
        data = (_QUANT[fmt.name](blocks).reshape(m, k // fmt.block * fmt.block_bytes)  # as GGUF
                if blocks.size else np.zeros((m, k // fmt.block * fmt.block_bytes), np.uint8))
    if _arr._is_torch(w):                # torch in, torch out (on w's device)
        import torch
        data = torch.from_numpy(np.ascontiguousarray(data)).to(w.device)
    elif not isinstance(w, np.ndarray):
        data = _arr.asarray(np.ascontiguousarray(data), backend=backend)
    return QTensor(fmt.name, (m, k), data)
