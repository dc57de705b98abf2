"""The CPU backend's float32 ``exp`` and ``tanh`` in default kernels (``tk_exp_f32``,
``tk_tanh_f32``, codegen/c.py): the float32 nearest to e^x and to tanh x (every float32 input is
checked by scripts/check_exp_f32.py, here a dense sample), inf/NaN/overflow/subnormal/underflow
and signed zeros right, and no call of the C library's scalar ``expf``/``tanhf`` left in the
loop, so that it vectorizes (softmax was bound by it)."""
import math
import platform
import subprocess

import numpy as np
import pytest

import tinykernels as tk


@tk.kernel
def exp_k(out, x: tk.Const):
    i = tk.index()
    out[i] = math.exp(x[i])


@tk.kernel
def tanh_k(out, x: tk.Const):
    i = tk.index()
    out[i] = math.tanh(x[i])


@tk.kernel
def sigmoid_k(out, x: tk.Const):
    i = tk.index()
    out[i] = tk.sigmoid(x[i])


@tk.kernel
def softmax_rows(out, X: tk.Const, D: tk.constexpr):
    """One group per row, a strided per-item loop: the lanes shape (exp inside a hoisted loop)."""
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    m = -math.inf
    for j in range(lid, D, n):
        m = max(m, X[row, j])
    m = tk.group_reduce(m, "max")
    s = 0.0
    for j in range(lid, D, n):
        e = math.exp(X[row, j] - m)
        out[row, j] = e
        s += e
    inv = 1.0 / tk.group_reduce(s, "add")
    for j in range(lid, D, n):
        out[row, j] *= inv


def _nearest_f32(x: np.ndarray, fn=np.exp):
    """(fn(x) rounded to float32 through float64, mask of the inputs whose fn(x) lies so close
    to a midpoint between two float32 values that float64 cannot decide the rounding)."""
    with np.errstate(all="ignore"):
        d = fn(x.astype(np.float64))
        f = d.astype(np.float32)
        up = np.nextafter(f, np.float32(np.inf)).astype(np.float64) - f
        dn = f - np.nextafter(f, np.float32(0)).astype(np.float64)
        ulp = np.where(np.abs(d) >= np.abs(f), np.abs(up), np.abs(dn))
        frac = np.abs(f.astype(np.float64) - d) / ulp
    near = np.isfinite(f) & (f != 0) & (frac > 0.5 - 1e-6)
    return f, near


@pytest.mark.parametrize("kernel,fn", [(exp_k, np.exp), (tanh_k, np.tanh)], ids=["exp", "tanh"])
def test_f32_function_is_correctly_rounded_on_a_dense_sample(kernel, fn):
    """Every 509th float32 bit pattern (8.4 million inputs: every exponent, both signs, NaNs)."""
    bits = np.arange(0, 2**32, 509, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    out = np.empty_like(x)
    kernel.launch(out, x, ndrange=x.size)
    want, near = _nearest_f32(x, fn)
    nan = np.isnan(x)
    assert np.isnan(out[nan]).all()
    ok = ~nan & ~near
    bad = np.flatnonzero(ok & (out != want))
    assert bad.size == 0, [(float(x[i]), float(out[i]), float(want[i])) for i in bad[:5]]
    # the few near-midpoint inputs: within half an ulp and a hair
    d = fn(x[near].astype(np.float64))
    assert (np.abs(out[near] - d) <= np.abs(np.spacing(out[near])) * (0.5 + 1e-6)).all()


def test_exp_f32_special_values():
    specials = [(0.0, 1.0), (-0.0, 1.0), (np.inf, np.inf), (-np.inf, 0.0), (1e-45, 1.0), (-1e-45, 1.0),
                (88.72283, 3.4027985e38),          # the largest finite result
                (88.72284, np.inf), (89.0, np.inf), (120.0, np.inf), (1e30, np.inf), (3e38, np.inf),
                (-87.33655, 1.1754907e-38),        # just below the smallest normal: a subnormal
                (-100.0, 3.7200760e-44), (-103.97, 1.4e-45), (-103.98, 0.0), (-120.0, 0.0), (-1e30, 0.0)]
    x = np.array([a for a, _ in specials], np.float32)
    out = np.empty_like(x)
    exp_k.launch(out, x, ndrange=x.size)
    want, _ = _nearest_f32(x)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_allclose(out, np.array([b for _, b in specials], np.float32), rtol=1e-6, atol=0)
    n = np.array([np.nan, -np.nan], np.float32)
    o = np.zeros_like(n)
    exp_k.launch(o, n, ndrange=2)
    assert np.isnan(o).all()


def _edges(*centres, width=300):
    """float32 bit patterns within ``width`` of each centre (wrapping mod 2^32)."""
    return np.unique(np.concatenate([(np.arange(-width, width + 1, dtype=np.int64) + c) % 2**32 for c in centres])).astype(np.uint32)


@pytest.mark.parametrize("kernel,fn,lim", [(exp_k, np.exp, 120.0), (tanh_k, np.tanh, 20.0)], ids=["exp", "tanh"])
def test_f32_clamp_edges_and_nan_bits(kernel, fn, lim):
    """The input clamp (tk_clamp_f32: integer adds and mins on the float's bits, rotated so that
    the NaNs of each sign escape the min) at every place its order changes: around +-0, the
    clamp limits, +-inf and the first and last NaN of each sign (where the rotation wraps). Every
    finite or infinite input gives the correctly rounded result, every NaN comes back with its
    own bits (quieted: the quiet bit set), sign and payload included."""
    lb = int(np.float32(lim).view(np.uint32))
    bits = _edges(0, 0x80000000, lb, lb | 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                  0x7FFFFFFF, 0xFFFFFFFF)
    x = bits.view(np.float32)
    out = np.empty_like(x)
    kernel.launch(out, x, ndrange=x.size)
    nan = np.isnan(x)
    assert nan.sum() > 1000 and (~nan).sum() > 1000
    np.testing.assert_array_equal(out.view(np.uint32)[nan], bits[nan] | np.uint32(0x00400000))
    want, near = _nearest_f32(x[~nan], fn)
    assert not near.any()
    np.testing.assert_array_equal(out[~nan], want)
    assert (np.signbit(out[~nan]) == np.signbit(want)).all()


def test_tanh_f32_special_values():
    x = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-30, -1e-30, 2.0**-12, 0.5, -0.5, 9.0, 9.1, -9.1, 20.0, 1e30,
                  np.inf, -np.inf, np.nan], np.float32)
    out = np.empty_like(x)
    tanh_k.launch(out, x, ndrange=x.size)
    want, _ = _nearest_f32(x, np.tanh)
    np.testing.assert_array_equal(out, want)
    assert (np.signbit(out) == np.signbit(x))[:-1].all()      # tanh(-0.0) is -0.0
    assert out[-4] == 1.0 and out[-2] == -1.0 and out[-5] == 1.0


def test_sigmoid_and_narrow_floats_use_it():
    """tk.sigmoid is 1 / (1 + exp(-x)) over the same exp; float16 exp computes in float32 and
    rounds once more (within one float16 ulp)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(20000) * 20).astype(np.float32)
    o = np.empty_like(x)
    sigmoid_k.launch(o, x, ndrange=x.size)
    e, _ = _nearest_f32(-x)
    np.testing.assert_array_equal(o, np.float32(1) / (np.float32(1) + e))
    h = (rng.standard_normal(5000) * 4).astype(np.float16)
    oh = np.empty_like(h)
    exp_k.launch(oh, h, ndrange=h.size)
    with np.errstate(over="ignore"):
        want = np.exp(h.astype(np.float64)).astype(np.float16)
    ulps = np.abs(oh.view(np.int16).astype(np.int32) - want.view(np.int16).astype(np.int32))
    assert ulps.max() <= 1


def test_softmax_in_the_lanes_shape_matches_float64():
    rng = np.random.default_rng(8)
    X = (rng.standard_normal((9, 1000)) * 5).astype(np.float32)
    out = np.empty_like(X)
    softmax_rows.launch(out, X, 1000, ndrange=9 * 64, workgroupsize=64)
    x64 = X.astype(np.float64)
    want = np.exp(x64 - x64.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=0)
    src = softmax_rows.source("CPU", out, X, 1000, ndrange=9 * 64, workgroupsize=64)
    assert "tk_exp_f32(" in src and "expf(" not in src.split("tk_exp_f32(float")[1].split("\n}\n", 1)[1]


def _undefined_symbols(kernel, *args, n) -> list:
    """The dynamic symbols the kernel's compiled library imports (names without versions)."""
    from tinykernels.runtime.compiler import compile_library
    lib = compile_library(kernel.source("CPU", *args, ndrange=n), "tk_test_exp")
    out = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True).stdout
    return [line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()]


@pytest.mark.skipif(platform.system() != "Linux", reason="checks the library's dynamic symbols with nm")
def test_default_exp_calls_no_scalar_libm_function():
    """The default kernel's exp and tanh are inline code (which GCC and Clang vectorize), not a call of the
    C library's expf per element; a fastmath kernel still calls the C library (libmvec's SIMD
    expf on glibc, faster than tk_exp_f32)."""
    x = np.zeros(4096, np.float32)
    for kernel, names in ((exp_k, ("expf", "exp")), (tanh_k, ("tanhf", "tanh"))):
        syms = _undefined_symbols(kernel, np.zeros_like(x), x, n=x.size)
        assert not set(names) & set(syms), syms
    fast = tk.kernel(fastmath=True)(exp_k.fn)
    assert "tk_exp_f32(a_x" not in fast.source("CPU", np.zeros_like(x), x, ndrange=x.size)
    syms = _undefined_symbols(fast, np.zeros_like(x), x, n=x.size)       # (the check sees imports)
    assert any(s == "expf" or s.endswith("_expf") for s in syms), syms
