"""Metal.jl's test/device/intrinsics/math.jl ("unique float math" and "edge-case semantics
match Julia"), ported test by test: acosh of 1 + [0, rand], rsqrt against 1 / sqrt, fract as
``x - floor(x)`` against ``mod(x, 1)``, sincos, clamp of randn to [-0.6, 0.6], ``x ^ y`` with
float and with integer exponents (issue 552: -1, 0, 1, 2, 3 and random ones), log1p from just
above -1, erf, erfc, expm1 over [-88, 88], and "Comparisons with π and ℯ": a float32 (or
float16) rounded down from π compares below π, one rounded up above it; then the edge cases
Metal's intrinsics get differently from Julia: sign of NaN/±Inf/±0, min/max with NaN and signed
zeros, clamp of NaN and ±Inf, round of the ties. float32 and float16; CPU, INTERP, CL and WEBGPU
(each backend has its own math and its own rendering of float16); the reference is NumPy /
Python, exactly where SPEC makes the operation exact, else within a few ulps.

Where SPEC differs from upstream (ported as SPEC reads):

* A Python float meeting a float32 value is weak (NEP 50): ``f32 > math.pi`` compares in
  float32, where Julia compares exactly, so ``Float32(π, RoundUp) > π`` is False here (both
  round to the same float32), as NumPy gives. The port checks NumPy's answers (and that
  rounding down gives a smaller float32).
* Found here and fixed: on backends without float64 (WebGPU, Metal) a Python float constant is
  a weak float32 that kept its Python value, so a comparison folded at compile time against a
  float32 constant (``tk.float32(3.1415927) > math.pi``) compared the unrounded value: True on
  WebGPU, False on every other backend and in NumPy. ``Lowerer.cast`` now rounds a float
  constant whose type becomes strong (test_constant_comparison_rounds_the_weak_float, which
  also runs on ``CPU32``, the CPU lowered with WebGPU's 32-bit Python scalars).
* Found while checking that fix, and fixed: on WebGPU ``sqrt(a) * sqrt(a)`` (two calls of
  one value, which NIR merges) gave ``a`` (2.0 for a = 2, NumPy 1.9999999), an inexact
  algebraic rewrite of lavapipe's compiler; the WGSL renderer now makes sqrt's result opaque,
  and ``tk.rsqrt``'s divisor (test_sqrt_times_sqrt_is_the_rounded_product, on every backend).
* No ``sign``, ``fract``, ``powr``, ``nextafter``, ``erfinv`` or ``sincos``: sign is written
  with ``tk.select``/comparisons (NaN gives NaN, ±0 keep their sign, as Julia's), fract as
  ``x - math.floor(x)``, sincos as two calls; nextafter and erfinv are not ported.
* ``min``/``max`` are Python's builtins (docs/language.md): with a NaN operand the result
  depends on the order and ``min(0.0, -0.0)`` is the first; Julia propagates the NaN and
  orders the zeros. The port checks Python's results.
* ``tk.clamp`` is checked against NumPy's ``np.clip`` (NaN stays NaN, ±Inf clip to the
  bounds), which is also Julia's ``clamp`` on these inputs.
* ``round(x)`` returns an int (Python's, half to even): the ties of the edge-case test are
  checked as ints."""
import math

import numpy as np
import pytest

from autodiff_helpers import backend_params, get, put

import tinykernels as tk

FLOATS = [np.float32, np.float16]


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def launch(be, k, *args, outs=1, **kw):
    """the first ``outs`` arrays (the kernel's outputs) after the launch"""
    dev = [put(be, a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    k(be)(*dev, **kw)
    tk.synchronize(be)
    return [get(d) for d, a in zip(dev, args) if isinstance(a, np.ndarray)][:outs]


def close(got, want, dt, ulps=4):
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64),
                               rtol=ulps * np.finfo(dt).eps, atol=ulps * np.finfo(dt).eps)


@tk.kernel
def unary_math(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    o[0, i] = math.acosh(y[i])
    o[1, i] = tk.rsqrt(x[i])
    o[2, i] = x[i] - math.floor(x[i])
    o[3, i] = math.sin(x[i])
    o[4, i] = math.cos(x[i])


def test_unique_float_math(be):
    """acosh of 1 + [0, rand(3)], rsqrt against 1 ./ sqrt, fract against mod(x, 1) (including
    -0.0 and negative values), sin and cos (sincos)"""
    rng = np.random.default_rng(552)
    for dt in FLOATS:
        x = np.concatenate([[0.25, 1.5], rng.random(2) + 0.05]).astype(dt)
        y = (np.concatenate([[0.0], rng.random(3)]) + 1).astype(dt)
        (o,) = launch(be, unary_math, np.zeros((5, 4), dt), x, y, ndrange=4)
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        close(o[0], np.arccosh(y64), dt)
        close(o[1], 1 / np.sqrt(x64), dt)
        close(o[3], np.sin(x64), dt)
        close(o[4], np.cos(x64), dt)
        f = np.array([0.0, -0.0, 0.7, -0.7], dt)
        (o,) = launch(be, unary_math, np.zeros((5, 4), dt), f, y, ndrange=4)
        np.testing.assert_array_equal(o[2], np.mod(f.astype(np.float64), 1).astype(dt))


@tk.kernel
def clamp_k(o, x: tk.Const, lo: tk.Const, hi: tk.Const):
    i = tk.index()
    o[i] = tk.clamp(x[i], lo[i], hi[i])


def test_clamp(be):
    """clamp.(randn, -0.6, 0.6) exactly, and the edge cases NaN, ±Inf, inside, outside (np.clip)"""
    rng = np.random.default_rng(7)
    for dt in FLOATS:
        for x, lo, hi in ((rng.standard_normal(4).astype(dt), dt(-0.6), dt(0.6)),
                          (np.array([np.nan, np.inf, -np.inf, 0.5, -0.5, 2, -2], dt), dt(-1), dt(1))):
            n = len(x)
            (o,) = launch(be, clamp_k, np.zeros(n, dt), x, np.full(n, lo, dt), np.full(n, hi, dt), ndrange=n)
            want = np.clip(x, lo, hi)
            assert o.tobytes() == want.tobytes(), (o, want)


@tk.kernel
def pow_k(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    o[i] = x[i] ** y[i]


def test_pow_float_and_integer_exponents(be):
    """``x ^ y`` with rand exponents, and with integer exponents -1, 0, 1, 2, 3 and rand(-10:10)
    (issue 552): the result is stored in the base's type"""
    rng = np.random.default_rng(552)
    for dt in FLOATS:
        x, y = (rng.random(4) + 0.05).astype(dt), rng.random(4).astype(dt)
        (o,) = launch(be, pow_k, np.zeros(4, dt), x, y, ndrange=4)
        close(o, x.astype(np.float64) ** y.astype(np.float64), dt)
        e = np.array([-1, 0, 1, 2, 3, *rng.integers(-10, 11, 4)], np.int32)
        b = (rng.random(len(e)) + 0.5).astype(dt)
        (o,) = launch(be, pow_k, np.zeros(len(e), dt), b, e, ndrange=len(e))
        close(o, b.astype(np.float64) ** e, dt)


@tk.kernel
def special_k(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[0, i] = math.log1p(a[i])
    o[1, i] = math.erf(b[i])
    o[2, i] = 1.0 - math.erf(c[i]) if c[i] < 0 else math.erfc(c[i])
    o[3, i] = math.expm1(a[i] * 8.8)


def test_log1p_erf_erfc_expm1(be):
    """log1p over LinRange(nextfloat(-1), 10, 20), erf of upstream's 7 points (padded), erfc
    over LinRange(nextfloat(-3), 3, 20), expm1 over [-88, 88] (here [-8.8, 88] for float32 and
    the values float16 holds)"""
    for dt in FLOATS:
        a = np.linspace(np.nextafter(np.float32(-1), np.float32(0)), 10, 20).astype(dt)
        b = np.resize(np.array([-1.0, -0.5, 0.0, 1.0e-3, 1.0, 2.0, 5.5], dt), 20)
        c = np.linspace(np.nextafter(np.float32(-3), np.float32(0)), 3, 20).astype(dt)
        (o,) = launch(be, special_k, np.zeros((4, 20), dt), a, b, c, ndrange=20)
        a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
        with np.errstate(divide="ignore"):   # float16(nextfloat(-1f0)) is -1: log1p gives -inf
            close(o[0], np.log1p(a64), dt, ulps=8)
        close(o[1], [math.erf(v) for v in b64], dt, ulps=16)
        close(o[2], [math.erfc(v) for v in c64], dt, ulps=16)
        with np.errstate(over="ignore"):       # a * 8.8 is a float32 product (float16: in float32)
            want = np.expm1((a.astype(np.float32) * np.float32(8.8)).astype(np.float64))
        with np.errstate(over="ignore"):
            ok = np.isfinite(want.astype(dt))
        close(o[3][ok], want[ok], dt, ulps=8)


@tk.kernel
def irrational_cmp(res, down, up):
    """Julia's "Comparisons with π and ℯ" (a Float32 rounded down, one rounded up)"""
    res[0] = down < math.pi
    res[1] = up > math.pi
    res[2] = not (down > math.pi)
    res[3] = not (up < math.pi)
    res[4] = down < up
    res[5] = tk.float32(3.1415927) > math.pi          # float32(pi) rounded up, as a constant
    res[6] = tk.float32(3.1415925) < math.pi          # rounded down
    res[7] = tk.float32(3.1415927) == math.pi
    res[8] = tk.float32(2.7182817) < math.e
    res[9] = tk.float32(2.718282) > math.e


def numpy_irrational(down, up):
    pi32 = np.float32(3.1415927)
    return np.array([down < math.pi, up > math.pi, not (down > math.pi), not (up < math.pi), down < up,
                     pi32 > math.pi, np.float32(3.1415925) < math.pi, pi32 == math.pi,
                     np.float32(2.7182817) < math.e, np.float32(2.718282) > math.e])


def test_comparisons_with_pi_and_e(be):
    """upstream's four comparisons for π (rounded down 3.1415925, up 3.1415927) as NumPy 2
    makes them (the Python float is weak: a float32 comparison), and the same with constants
    folded at compile time"""
    down, up = np.float32(3.1415925), np.float32(3.1415927)
    (res,) = launch(be, irrational_cmp, np.zeros(10, np.bool_), down, up, ndrange=1)
    want = numpy_irrational(down, up)
    np.testing.assert_array_equal(res, want)
    assert want[0] and want[4] and not want[1]        # NEP 50: up rounds to the same float32 as pi


@pytest.mark.parametrize("dev", ["CPU32", "WEBGPU"])
def test_constant_comparison_rounds_the_weak_float(dev):
    """the finding: on a backend without float64 a Python float constant is a weak float32;
    compared at compile time with a float32 constant it kept its Python value, so
    ``tk.float32(3.1415927) > math.pi`` folded to True (NumPy: False) and ``==`` to False.
    CPU32 is the CPU with WebGPU's lowering of Python scalars, so this runs without WebGPU."""
    if dev == "CPU32":
        if not tk.CPU.available()[0]:
            pytest.skip("no C compiler for the CPU backend")
        from tinykernels.testing.fuzz.weak32 import CPU32
        be = CPU32()
    else:
        ok, why = tk.backends().get("WebGPU", (False, "unknown"))
        if not ok:
            pytest.skip(f"WebGPU: {why}")
        be = tk.WebGPU()
    down, up = np.float32(3.1415925), np.float32(3.1415927)
    (res,) = launch(be, irrational_cmp, np.zeros(10, np.bool_), down, up, ndrange=1)
    np.testing.assert_array_equal(res, numpy_irrational(down, up))


@tk.kernel
def edge_k(s, lo, hi, r, x: tk.Const, y: tk.Const):
    i = tk.index()
    v = x[i]
    s[i] = tk.select(math.isnan(v), v, tk.select(v > 0, x.dtype(1), tk.select(v < 0, x.dtype(-1), v)))
    lo[i] = min(x[i], y[i])
    hi[i] = max(x[i], y[i])
    r[i] = round(x[i])


def test_edge_case_semantics(be):
    """sign of NaN, ±Inf, ±0, ±1.5 (Julia: NaN, ±1, ±0, ±1); min/max over upstream's NaN/±0/±Inf
    pairs, as Python's builtins; round of the ties ±0.5 .. ±3.5 (half to even)"""
    for dt in FLOATS:
        x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -1.5, np.nan, -0.0], dt)
        y = np.array([1, np.nan, 1, -0.0, 0.0, np.nan, -np.inf, np.nan, 0.0], dt)
        n = len(x)
        s, lo, hi, _ = launch(be, edge_k, np.zeros(n, dt), np.zeros(n, dt), np.zeros(n, dt),
                              np.zeros(n, np.int32), x, y, ndrange=n, outs=4)
        assert s.tobytes() == np.where(x == 0, x, np.sign(x)).astype(dt).tobytes()   # Julia's: ±0 keep their sign
        want_lo = np.array([min(a, b) for a, b in zip(x.tolist(), y.tolist())], dt)
        want_hi = np.array([max(a, b) for a, b in zip(x.tolist(), y.tolist())], dt)
        assert lo.tobytes() == want_lo.tobytes() and hi.tobytes() == want_hi.tobytes()
        t = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5], dt)
        _, _, _, r = launch(be, edge_k, np.zeros(8, dt), np.zeros(8, dt), np.zeros(8, dt),
                            np.zeros(8, np.int32), t, t, ndrange=8, outs=4)
        np.testing.assert_array_equal(r, [round(v) for v in t.tolist()])


@tk.kernel
def sqrt_products(o, x: tk.Const):
    i = tk.index()
    s = math.sqrt(x[i])
    t = math.sqrt(x[i])
    o[0, i] = s * t
    o[1, i] = math.sqrt(s) * math.sqrt(s)
    o[2, i] = tk.rsqrt(x[i])
    o[3, i] = x[i] / math.sqrt(x[i])


def test_sqrt_times_sqrt_is_the_rounded_product(be):
    """found while checking the constant-comparison fix above: on WebGPU sqrt(a) * sqrt(a) (two
    calls, which NIR merges) gave a itself (2.0 for a = 2, NumPy 1.9999999), lavapipe's inexact
    algebraic rewrite; the WGSL renderer now makes sqrt's result opaque (tk_x), as it does for
    the other exactly rounded operations. Every result against NumPy's float32 bits"""
    rng = np.random.default_rng(2)
    x = np.concatenate([[2.0, 3.0, 5.0, 7.0, 1e30, 1e-30], rng.random(58) * 10 + 0.01]).astype(np.float32)
    (o,) = launch(be, sqrt_products, np.zeros((4, len(x)), np.float32), x, ndrange=len(x))
    s = np.sqrt(x)
    want = np.stack([s * s, np.sqrt(s) * np.sqrt(s), np.float32(1) / s, x / s])
    assert o.tobytes() == want.tobytes(), np.argwhere(o != want)[:4]
