"""Every tinykernels.llm kernel specialization renders as CUDA C++ that NVRTC compiles.

The llm functions run on the CPU (small inputs) with ``_common.launch`` recording each launch;
row-wise kernels run twice, with one item per row and with a workgroup per row (the GPU
shape), so both code shapes are captured. Each recorded launch is rendered for CUDA and
compiled for sm_80 (skipped where NVRTC is not installed)."""
import importlib

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from tinykernels.runtime import cuda as rt

NVRTC_OK, NVRTC_WHY = rt.nvrtc_available()
C = importlib.import_module("tinykernels.llm._common")
A = importlib.import_module("tinykernels.llm.attention")


def _exercise():
    ml = pytest.importorskip("ml_dtypes")
    r = np.random.default_rng(0)
    for dt in (np.float32, np.float16):
        x = r.standard_normal((2, 3, 8)).astype(dt)
        w = np.ones(8, dt)
        for f in (llm.add, llm.sub, llm.mul, llm.div, llm.pow, llm.tanh_grad, llm.swiglu):
            f(x, x[0])
        llm.add(x, 2.0)
        for f in (llm.exp, llm.log, llm.sin, llm.cos, llm.tanh, llm.sqrt, llm.rsqrt):
            f(x)
        llm.fill(x.copy(), 1.0)
        llm.cast(x, np.float32 if dt == np.float16 else np.float16)
        llm.rms_norm(x, w, return_scale=True)
        llm.rms_norm(x, w, residual=x)
        llm.rms_norm_add(x, w, x)
        cs = np.ones((3, 2), np.float32)
        llm.rope(x, cs, cs)
        llm.rope_at(x, cs, cs, np.zeros(1, np.int32))
        llm.qk_norm_rope(x, w, cs, cs)
        llm.softmax(x, 1)
        llm.softmax(x)
        llm.sum(x, 0)
        llm.argmax(x[0, 0])
        llm.transpose(x[0])
        llm.transpose(r.standard_normal((40, 36)).astype(dt))     # CPU: line-aligned tiles + edges
        llm.transpose(x, (2, 0, 1))
        llm.repeat(x, 2, 1)
        llm.gather(x[0], np.array([0, 1], np.int64))
        cache = np.zeros((2, 5, 8), dt)
        llm.kv_append(cache, x.astype(np.float32)[:, :1], np.zeros(1, np.int32))
        q4 = r.standard_normal((1, 4, 3, 8)).astype(dt)
        kv4 = r.standard_normal((1, 2, 5, 8)).astype(dt)
        for shape in ("rows", "tiles", "lanes"):      # every flash_attention code shape
            A.SHAPE = shape
            try:
                llm.flash_attention(q4, kv4, kv4)
                llm.flash_attention(q4, kv4, kv4, causal=True)
            finally:
                A.SHAPE = None
        for sp in (1, 2):
            llm.flash_decode(q4[:, :, 0], kv4, kv4, 3, splits=sp)
            llm.flash_decode(q4[:, :, 0], kv4, kv4, np.ones(1, np.int32), offset=1, splits=sp)
    f8 = np.ones((2, 8), ml.float8_e4m3fn)
    llm.fp8_add(f8, f8, 1.0, 2.0)
    llm.fp8_dequantize(f8, 0.5)
    llm.fp8_rms_norm(f8, np.ones(8, np.float16))
    layout = importlib.import_module("tinykernels.llm.layout")
    llm.argmax(np.zeros(layout.ARGMAX_CHUNK + 1, np.float32))      # the host's chunked shape
    c = np.zeros(1, np.int32)
    llm.counter_add(c)
    llm.counter_set(c)


@pytest.mark.skipif(not NVRTC_OK, reason=f"NVRTC unavailable: {NVRTC_WHY}")
def test_every_llm_kernel_compiles_with_nvrtc(monkeypatch):
    seen = {}
    real = C.launch

    def record(kernel, backend, args, ndrange, workgroupsize=None, stream=None):
        key = (kernel.__name__ if hasattr(kernel, "__name__") else repr(kernel),
               tuple((a.dtype.str, a.ndim) if hasattr(a, "ndim") and not isinstance(a, type) else repr(a)
                     for a in args),                # (a type: a compute-type constexpr, tk.float32)
               None if workgroupsize is None else tuple(np.atleast_1d(workgroupsize)))
        seen.setdefault(key, (kernel, args, ndrange, workgroupsize))
        return real(kernel, backend, args, ndrange, workgroupsize, stream)

    monkeypatch.setattr(C, "launch", record)
    for grp in (1, 64):
        monkeypatch.setattr(C, "ROW_GROUP", grp)
        _exercise()
    assert len(seen) > 60
    bad = []
    for key, (kernel, args, ndrange, wg) in seen.items():
        try:
            src = rt.cuda_source(kernel, *args, ndrange=ndrange, workgroupsize=wg)
            assert rt.compile_cuda(src, "sm_80", "k", cache=False)[:4] == b"\x7fELF"
        except Exception as e:          # collect every failure, report them together
            bad.append(f"{key}: {str(e)[:1500]}")
    assert not bad, "\n\n".join(bad[:5])
