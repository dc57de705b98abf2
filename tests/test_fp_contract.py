"""No backend contracts ``a*b + c`` into a fused multiply-add (SPEC section 1: no fast-math
rewrites): results must equal NumPy's bit for bit, on inputs where the product cancels
against the addend (so the rounding of the product, which an FMA skips, decides the result).
"""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels.runtime import cuda as rt_cuda

N = 100_000


def _backends():
    out = [pytest.param("CPU", id="CPU"), pytest.param("INTERP", id="INTERP")]
    info = tk.backends()
    for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
        ok, why = info[name]
        out.append(pytest.param(dev, id=dev, marks=pytest.mark.skipif(not ok, reason=f"{name}: {why}")))
    return out


@tk.kernel
def add_mul(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = a[i] + b[i] * c[i]


@tk.kernel
def mul_sub(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = a[i] * b[i] - c[i]


@tk.kernel
def sub_mul(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = c[i] - a[i] * b[i]


@tk.kernel
def mixed(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = a[i] * b[i] + c[i]          # a, c float64, b float32


def cancelling(dtype, n=N, seed=0):
    """b, c random; a = -(b*c) rounded, half of them moved by one ulp: a + b*c is 0 or one ulp
    in NumPy, while a fused multiply-add returns the product's rounding error instead."""
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(n).astype(dtype)
    c = rng.standard_normal(n).astype(dtype)
    a = -(b * c)
    away = np.where(rng.random(n) < 0.5, np.inf, -np.inf).astype(dtype)
    a = np.where(rng.random(n) < 0.5, a, np.nextafter(a, away))
    return a, b, c


def fused_f32(a, b, c):
    """What an FMA gives for float32 a + b*c (the product is exact in float64)."""
    return (a.astype(np.float64) + b.astype(np.float64) * c).astype(np.float32)


CASES = {  # kernel, reference, its (a, b, c) inputs
    "add_mul": (add_mul, lambda a, b, c: a + b * c, lambda d: cancelling(d)),
    "mul_sub": (mul_sub, lambda a, b, c: a * b - c, lambda d: (lambda x: (x[1], x[2], -x[0]))(cancelling(d))),
    "sub_mul": (sub_mul, lambda a, b, c: c - a * b, lambda d: (lambda x: (x[1], x[2], -x[0]))(cancelling(d))),
}


def _run(dev, kern, host_args, out_dtype):
    b = tk.backend(dev)
    args = [tk.asarray(x, backend=b) for x in host_args]
    o = tk.zeros(host_args[0].shape, out_dtype, backend=b)
    kern(b)(o, *args, ndrange=o.shape[0])
    tk.synchronize(b)
    return o.numpy()


@pytest.mark.parametrize("dev", _backends())
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_multiply_add_is_not_fused(dev, case, dtype):
    b = tk.backend(dev)
    if not b.supports(dtype):
        pytest.skip(f"{dev} has no {np.dtype(dtype).name}")
    kern, ref, make = CASES[case]
    n = N if dev != "INTERP" else 2000
    a, x, y = (v[:n] for v in make(dtype))
    want = ref(a, x, y)
    if dtype == np.float32 and case == "add_mul":    # the inputs are ones where an FMA shows
        assert (fused_f32(a, x, y) != want).mean() > 0.5
    got = _run(dev, kern, [a, x, y], dtype)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    bad = np.flatnonzero(got.view(bits) != want.view(bits))
    assert bad.size == 0, f"{bad.size} of {n} results differ from NumPy's, e.g. {got[bad[0]]!r} != {want[bad[0]]!r}"


@pytest.mark.parametrize("dev", _backends())
def test_mixed_float32_float64_multiply_add_is_not_fused(dev):
    b = tk.backend(dev)
    if not b.supports(np.float64):
        pytest.skip(f"{dev} has no float64")
    n = N if dev != "INTERP" else 2000
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n)                              # float64
    y = rng.standard_normal(n).astype(np.float32)           # promoted to float64 by x
    c = -(x * y) * (1 + rng.integers(-4, 5, n) * 2.0 ** -52)
    got = _run(dev, mixed, [x, y, c], np.float64)
    want = x * y + c
    np.testing.assert_array_equal(got, want)


def test_opencl_source_turns_contraction_off():
    ok, why = tk.backends()["OpenCL"]
    if not ok:
        pytest.skip(why)
    cl = tk.backend("CL")
    z = tk.zeros(4, tk.float32, backend=cl)
    src = add_mul.source(cl, z, z, z, z, ndrange=4)
    assert "#pragma OPENCL FP_CONTRACT OFF" in src


NVRTC_OK, NVRTC_WHY = rt_cuda.nvrtc_available()


@pytest.mark.skipif(not NVRTC_OK, reason=f"NVRTC unavailable: {NVRTC_WHY}")
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_nvrtc_ptx_has_no_fma_for_multiply_add(dtype):
    for kern in (add_mul, mul_sub, sub_mul):
        z = np.zeros(8, dtype)
        src = rt_cuda.cuda_source(kern, z, z, z, z, ndrange=8)
        ptx = rt_cuda.compile_cuda(src, "compute_80", kern.name, cache=False).decode()
        assert "fma.rn" not in ptx, f"{kern.name}: NVRTC fused a*b+c into an FMA"
        assert "mul.rn" in ptx and ("add.rn" in ptx or "sub.rn" in ptx)
