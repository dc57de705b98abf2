"""NVIDIA Warp's warp/tests/ test_arithmetic.py (unary and binary operators of every scalar type,
the special functions, float -> int rounding, smoothstep/lerp and clamp with their gradients),
test_math.py (powers of two, erf/erfc and their gradients),
test_rounding.py (its golden table), test_codegen.py (renames, in-place updates, static and
dynamic ranges, while, pass, break/continue, a static loop's variable reused after the loop, a
``return`` that skips an atomic, a conditional expression that runs one side) and test_bool.py
(bool identities, a bool constant), ported test by test as tinykernels kernels. Exact against
NumPy / Python where SPEC makes it exact, tolerances from the upstream test for the
transcendental functions, gradients through ``tk.autodiff`` against the upstream's analytic
derivatives. CPU and INTERP for what does not depend on the backend; CL and WEBGPU too for
the rounding table and ``%``/``fmod``/``//`` signs, where renderers differ.

Where SPEC differs from upstream (ported as SPEC reads):

* ``wp.mod`` is C's truncated remainder; tinykernels' ``%`` is Python's floor remainder
  (SPEC 3), so the port checks ``%`` against ``np.mod`` and ``math.fmod`` (floats) against
  upstream's truncated formula.
* ``wp.round`` rounds half away from zero; ``round(x)`` here is Python's (half to even, an
  int), which is ``wp.rint``'s column of the golden table; the half-away column is written in
  the kernel as ``math.copysign(math.floor(abs(x) + 0.5), x)`` and checked against the table.
  ``wp.frac`` is ``x - math.trunc(x)``.
* No ``wp.sign``/``wp.step``/``wp.nonzero``/``wp.lerp``/``wp.smoothstep``/``wp.cbrt``/
  ``wp.log10``: written with ``tk.select``, comparisons and ``@tk.func``s (``log10`` as
  ``log(x) / log(10)``; ``cbrt`` is not ported).
* ``wp.expect_eq`` has no counterpart: each value is stored and compared on the host.
* No vectors, matrices, quaternions, structs or ``wp.constant`` (a module-level number is a
  compile-time constant), no kernel return values (a ``return`` with a value in a kernel is
  a CompileError, tested elsewhere)."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, be, run  # noqa: F401 - be, anybe: fixtures

RNG = np.random.default_rng(123)
FLOATS = [np.float16, np.float32, np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
TOL = {np.float16: 5e-3, np.float32: 1e-6, np.float64: 1e-8}



def randvals(shape, dtype):
    """Upstream's ``randvals``: small random values of ``dtype`` (non-negative for unsigned)."""
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "u":
        return RNG.integers(1, 5, shape).astype(dtype)
    return RNG.integers(-5, 6, shape).astype(dtype)


def close(got, want, dtype):
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64),
                               rtol=TOL.get(dtype, 0), atol=TOL.get(dtype, 0))


# --- test_arithmetic.py: unary and binary ops -------------------------------------------------

@tk.kernel
def check_unary(inputs: tk.Const, outputs):
    for i in range(10):
        i0 = inputs[0, i]
        i2 = inputs[2, i]
        i4 = inputs[4, i]
        two = outputs.dtype(2)
        outputs[0, i] = two * (+i0)
        outputs[1, i] = two * (-inputs[1, i])
        outputs[2, i] = two * tk.select(i2 < 0, outputs.dtype(-1), outputs.dtype(1))   # wp.sign
        outputs[3, i] = two * abs(inputs[3, i])
        outputs[4, i] = two * tk.select(i4 < 0, outputs.dtype(1), outputs.dtype(0))    # wp.step
        outputs[5, i] = two * (i0 != 0)                                                # wp.nonzero


@pytest.mark.parametrize("dtype", SIGNED + FLOATS)
def test_unary_ops(be, dtype):
    if np.dtype(dtype).kind == "f":
        x = RNG.standard_normal((6, 10)).astype(dtype)
    else:
        x = RNG.integers(-2, 3, (6, 10)).astype(dtype)
    out = run(be, check_unary, x, np.zeros_like(x), ndrange=1)[-1]
    close(out[0], 2 * x[0], dtype)
    close(out[1], -2 * x[1], dtype)
    want = 2 * np.sign(x[2])
    want[want == 0] = 2
    close(out[2], want, dtype)
    close(out[3], 2 * np.abs(x[3]), dtype)
    close(out[4], 2 * (1 - np.heaviside(x[4], 1)), dtype)
    close(out[5], 2 * (x[0] != 0), dtype)


@tk.kernel
def check_binary_ops(in1: tk.Const, in2: tk.Const, outputs):
    for i in range(10):
        two = outputs.dtype(2)
        outputs[0, i] = two * (in1[0, i] * in2[0, i])
        outputs[1, i] = two * (in1[1, i] // in2[1, i])
        outputs[2, i] = two * (in1[2, i] + in2[2, i])
        outputs[3, i] = two * (in1[3, i] - in2[3, i])
        outputs[4, i] = two * (in1[4, i] % in2[4, i])
        outputs[5, i] = two * min(in1[5, i], in2[5, i])
        outputs[6, i] = two * max(in1[6, i], in2[6, i])
        outputs[7, i] = two * (in1[7, i] // in2[7, i])


@tk.kernel
def check_float_div(in1: tk.Const, in2: tk.Const, outputs):
    for i in range(10):
        outputs[0, i] = outputs.dtype(2) * (in1[0, i] / in2[0, i])
        outputs[1, i] = outputs.dtype(2) * math.fmod(in1[1, i], in2[1, i])


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED + FLOATS)
def test_binary_ops(be, dtype):
    """Exact for integers; ``//`` and ``%`` are NumPy's floor_divide / mod (upstream's
    ``wp.mod`` is truncated: see the header), and for floats ``/`` and ``math.fmod``
    against upstream's truncated formula."""
    v1 = randvals((8, 10), dtype)
    v2 = v1 + randvals((8, 10), dtype) if np.dtype(dtype).kind == "u" else np.abs(randvals((8, 10), dtype))
    v2[v2 == 0] = 1
    out = run(be, check_binary_ops, v1, v2, np.zeros_like(v1), ndrange=1)[-1]
    with np.errstate(all="ignore"):
        want = [v1[0] * v2[0], np.floor_divide(v1[1], v2[1]), v1[2] + v2[2], v1[3] - v2[3],
                np.mod(v1[4], v2[4]), np.minimum(v1[5], v2[5]), np.maximum(v1[6], v2[6]),
                np.floor_divide(v1[7], v2[7])]
        want = [(dtype(2) * w).astype(dtype) for w in want]
    for r in range(8):
        if np.dtype(dtype).kind == "f" and dtype is not np.float16:
            np.testing.assert_array_equal(out[r], want[r], err_msg=f"row {r}")
        else:
            close(out[r], want[r], dtype)
    if np.dtype(dtype).kind == "f":
        out = run(be, check_float_div, v1, v2, np.zeros_like(v1), ndrange=1)[-1]
        close(out[0], 2 * v1[0] / v2[0], dtype)
        close(out[1], 2 * (v1[1] - v2[1] * np.sign(v1[1]) * np.floor(np.abs(v1[1]) / v2[1])), dtype)


@tk.kernel
def mod_signs(q, r, f, a: tk.Const, b: tk.Const):
    i = tk.index()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    f[i] = math.fmod(a[i], b[i])


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_mod_and_floordiv_signs(anybe, dtype):
    """Every sign combination (warp's test_mod idea): ``//``/``%`` floor as NumPy's, fmod
    truncates as C's; every backend, since each renders them differently."""
    a = np.array([7, -7, 7, -7, 6, -6, 0, 1, -1, 5, -5, 3], dtype)
    b = np.array([3, 3, -3, -3, 3, -3, 4, -4, 4, 1, -1, 7], dtype)
    q, r, f, _, _ = run(anybe, mod_signs, np.zeros_like(a), np.zeros_like(a), np.zeros_like(a), a, b, ndrange=a.size)
    np.testing.assert_array_equal(q, np.floor_divide(a, b))
    np.testing.assert_array_equal(r, np.mod(a, b))
    np.testing.assert_array_equal(f, np.fmod(a, b))
    if dtype is np.float32:     # the signs of zero remainders: NumPy's and C's
        np.testing.assert_array_equal(np.signbit(r), np.signbit(np.mod(a, b)))
        np.testing.assert_array_equal(np.signbit(f), np.signbit(np.fmod(a, b)))


# --- test_arithmetic.py: special functions ----------------------------------------------------

@tk.kernel
def check_special_funcs(x: tk.Const, out):
    for i in range(10):
        two = out.dtype(2)
        out[0, i] = two * math.log(x[0, i])
        out[1, i] = two * math.log2(x[1, i])
        out[2, i] = two * (math.log(x[2, i]) / math.log(10.0))
        out[3, i] = two * math.exp(x[3, i])
        out[4, i] = two * math.atan(x[4, i])
        out[5, i] = two * math.sin(x[5, i])
        out[6, i] = two * math.cos(x[6, i])
        out[7, i] = two * math.sqrt(x[7, i])
        out[8, i] = two * math.tan(x[8, i])
        out[9, i] = two * math.sinh(x[9, i])
        out[10, i] = two * math.cosh(x[10, i])
        out[11, i] = two * math.tanh(x[11, i])
        out[12, i] = two * math.acos(x[12, i])
        out[13, i] = two * math.asin(x[13, i])


@pytest.mark.parametrize("dtype", FLOATS)
def test_special_funcs(be, dtype):
    x = np.abs(RNG.standard_normal((14, 10))).astype(dtype)
    x[12:] = np.clip(x[12:], -0.9, 0.9)
    out = run(be, check_special_funcs, x, np.zeros_like(x), ndrange=1)[-1]
    xd = x.astype(np.float64)
    fns = [np.log, np.log2, np.log10, np.exp, np.arctan, np.sin, np.cos, np.sqrt, np.tan, np.sinh,
           np.cosh, np.tanh, np.arccos, np.arcsin]
    tol = {np.float16: 1e-2, np.float32: 2e-6, np.float64: 1e-12}[dtype]
    for r, fn in enumerate(fns):
        np.testing.assert_allclose(out[r].astype(np.float64), 2 * fn(xd[r]), rtol=tol, atol=tol,
                                   err_msg=fn.__name__)


@tk.kernel
def check_special_funcs_2arg(in1: tk.Const, in2: tk.Const, out):
    for i in range(10):
        out[0, i] = out.dtype(2) * math.pow(in1[0, i], in2[0, i])
        out[1, i] = out.dtype(2) * math.atan2(in1[1, i], in2[1, i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_funcs_2arg_and_gradients(be, dtype):
    """Values and the upstream's analytic gradients of pow and atan2 (reverse mode)."""
    in1 = np.abs(RNG.standard_normal((2, 10))).astype(dtype) + dtype(0.1)
    in2 = RNG.standard_normal((2, 10)).astype(dtype)
    out = run(be, check_special_funcs_2arg, in1, in2, np.zeros_like(in1), ndrange=1)[-1]
    a, b = in1.astype(np.float64), in2.astype(np.float64)
    tol = {np.float32: 1e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(out[0], 2 * np.power(a[0], b[0]), rtol=tol)
    np.testing.assert_allclose(out[1], 2 * np.arctan2(a[1], b[1]), rtol=tol, atol=tol)
    d1, d2 = np.zeros_like(in1), np.zeros_like(in2)
    k = check_special_funcs_2arg(be)
    tk.autodiff(tk.Reverse, lambda x, y, o: k(x, y, o, ndrange=1), tk.Duplicated(in1.copy(), d1),
                tk.Duplicated(in2.copy(), d2), tk.Duplicated(np.zeros_like(in1), np.ones_like(in1)))
    np.testing.assert_allclose(d1[0], 2 * b[0] * np.power(a[0], b[0] - 1), rtol=5 * tol)
    np.testing.assert_allclose(d2[0], 2 * np.power(a[0], b[0]) * np.log(a[0]), rtol=5 * tol, atol=tol)
    np.testing.assert_allclose(d1[1], 2 * b[1] / (a[1] ** 2 + b[1] ** 2), rtol=5 * tol, atol=tol)
    np.testing.assert_allclose(d2[1], -2 * a[1] / (a[1] ** 2 + b[1] ** 2), rtol=5 * tol, atol=tol)


# --- test_math.py: power-of-two pow, erf/erfc with gradients -----------------------------------

@tk.kernel
def power_of_two_pow(exponent: tk.Const, out_f):
    i = tk.index()
    e = exponent[i]
    out_f[0, i] = out_f.dtype(0.5) ** out_f.dtype(e)
    out_f[1, i] = out_f.dtype(2.0) ** out_f.dtype(e)


def test_power_of_two_pow(anybe):
    """test_power_of_two_pow_cpu (0.5 ** 4 and 2 ** 4), widened to the exponents where the
    result is subnormal, underflows or overflows: exact, as NumPy (a power of two is
    representable or rounds to 0 / inf)."""
    for dt in (np.float32, np.float64):
        if not anybe.supports(np.dtype(dt)):
            continue
        lo, hi = (-160, 130) if dt == np.float32 else (-1080, 1030)
        e = np.array([4, 0, 1, -1, 10, -126, -127, -149, -150, 127, 128, lo, hi, -1022, -1074, 1023], np.int32)
        out = run(anybe, power_of_two_pow, e, np.zeros((2, e.size), dt), ndrange=e.size)[-1]
        with np.errstate(over="ignore", under="ignore"):
            np.testing.assert_array_equal(out[0], np.power(dt(0.5), e.astype(dt)))
            np.testing.assert_array_equal(out[1], np.power(dt(2.0), e.astype(dt)))


@tk.kernel
def erf_kernel(x: tk.Const, out):
    i = tk.index()
    if i == 0:
        out[i] = math.erf(x[i])
    elif i == 1:
        out[i] = math.erfc(x[i])


def test_erf_math_with_gradients(be):
    """test_erf_math's erf and erfc of 0.123 and their gradients (upstream's known values;
    erfinv/erfcinv have no counterpart). float16 computes in float32 and rounds on store."""
    want, dwant = [0.13809388, 0.86190612], [1.11143641, -1.11143641]
    for dt, tol in ((np.float16, 1e-3), (np.float32, 1e-6), (np.float64, 1e-6)):
        x = np.full(2, 0.123, dt)
        out = run(be, erf_kernel, x, np.zeros(2, dt), ndrange=2)[-1]
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)
        if dt == np.float16:
            continue
        dx = np.zeros_like(x)
        k = erf_kernel(be)
        tk.autodiff(tk.Reverse, lambda a, o: k(a, o, ndrange=2), tk.Duplicated(x.copy(), dx),
                    tk.Duplicated(np.zeros_like(x), np.ones_like(x)))
        np.testing.assert_allclose(dx, dwant, rtol=tol, atol=tol)


# --- test_rounding.py: the golden table, and test_arithmetic's float_to_int --------------------

@tk.kernel
def rounding(x: tk.Const, x_round, x_rint, x_trunc, x_cast, x_floor, x_ceil, x_frac):
    i = tk.index()
    v = x[i]
    x_round[i] = math.copysign(math.floor(abs(v) + 0.5), v)    # wp.round: half away from zero
    x_rint[i] = round(v)                                       # wp.rint: half to even
    x_trunc[i] = math.trunc(v)
    x_cast[i] = float(int(v))
    x_floor[i] = math.floor(v)
    x_ceil[i] = math.ceil(v)
    x_frac[i] = v - math.trunc(v)                              # wp.frac


NX = np.array([4.9, 4.5, 4.1, 3.9, 3.5, 3.1, 2.9, 2.5, 2.1, 1.9, 1.5, 1.1, 0.9, 0.5, 0.1, -0.1, -0.5, -0.9,
               -1.1, -1.5, -1.9, -2.1, -2.5, -2.9, -3.1, -3.5, -3.9, -4.1, -4.5, -4.9], np.float32)
# upstream's golden columns: round, rint, trunc, cast, floor, ceil (frac is x - trunc)
GOLDEN = np.array([
    [5, 5, 4, 4, 4, 5], [5, 4, 4, 4, 4, 5], [4, 4, 4, 4, 4, 5], [4, 4, 3, 3, 3, 4], [4, 4, 3, 3, 3, 4],
    [3, 3, 3, 3, 3, 4], [3, 3, 2, 2, 2, 3], [3, 2, 2, 2, 2, 3], [2, 2, 2, 2, 2, 3], [2, 2, 1, 1, 1, 2],
    [2, 2, 1, 1, 1, 2], [1, 1, 1, 1, 1, 2], [1, 1, 0, 0, 0, 1], [1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1],
    [-0., -0., -0., 0, -1, -0.], [-1, -0., -0., 0, -1, -0.], [-1, -1, -0., 0, -1, -0.],
    [-1, -1, -1, -1, -2, -1], [-2, -2, -1, -1, -2, -1], [-2, -2, -1, -1, -2, -1], [-2, -2, -2, -2, -3, -2],
    [-3, -2, -2, -2, -3, -2], [-3, -3, -2, -2, -3, -2], [-3, -3, -3, -3, -4, -3], [-4, -4, -3, -3, -4, -3],
    [-4, -4, -3, -3, -4, -3], [-4, -4, -4, -4, -5, -4], [-5, -4, -4, -4, -5, -4], [-5, -5, -4, -4, -5, -4],
], np.float32)


def test_rounding_golden_table(anybe):
    """Bit for bit, signs of zero included: ``round(x)`` gives an int, so -0.4 rounds to
    +0 (``wp.rint`` keeps -0.0 in a float); the other columns keep the float's sign."""
    n = NX.size
    outs = run(anybe, rounding, NX, *[np.zeros(n, np.float32) for _ in range(7)], ndrange=n)[1:]
    want = GOLDEN.T.copy()
    want[1] = np.where(want[1] == 0, 0.0, want[1])         # round() returns an int: +0
    for col, (got, w) in enumerate(zip(outs[:6], want)):
        np.testing.assert_array_equal(got, w, err_msg=f"column {col}")
        np.testing.assert_array_equal(np.signbit(got), np.signbit(w), err_msg=f"column {col} sign")
    np.testing.assert_allclose(outs[6], np.modf(NX)[0], atol=1e-6)
    np.testing.assert_array_equal(outs[6], NX - np.trunc(NX))


@tk.kernel
def float_to_int(x: tk.Const, out):
    for i in range(10):
        out[0, i] = round(x[0, i])
        out[1, i] = math.trunc(x[1, i])
        out[2, i] = math.floor(x[2, i])
        out[3, i] = math.ceil(x[3, i])
        out[4, i] = x[4, i] - math.trunc(x[4, i])


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_to_int_and_zero_gradients(be, dtype):
    """Bit for bit against NumPy; and the gradients of the piecewise-constant ones are zero
    while frac's is one (upstream: all zero; ``frac`` is ``x - trunc(x)`` here)."""
    x = RNG.standard_normal((5, 10)).astype(dtype) * dtype(3)
    out = run(be, float_to_int, x, np.zeros_like(x), ndrange=1)[-1]
    with np.errstate(all="ignore"):
        want = [np.round(x[0]), np.trunc(x[1]), np.floor(x[2]), np.ceil(x[3]), np.modf(x[4])[0]]
    for r in range(4):
        np.testing.assert_array_equal(out[r], want[r] + 0, err_msg=f"row {r}")   # +0: round's int
    close(out[4], want[4], dtype)
    if dtype is np.float16:
        return
    dx = np.zeros_like(x)
    k = float_to_int(be)
    tk.autodiff(tk.Reverse, lambda a, o: k(a, o, ndrange=1), tk.Duplicated(x.copy(), dx),
                tk.Duplicated(np.zeros_like(x), np.ones_like(x)))
    np.testing.assert_array_equal(dx[:4], 0)
    np.testing.assert_array_equal(dx[4], 1)


# --- test_arithmetic.py: smoothstep, lerp, clamp ------------------------------------------------

@tk.func
def smoothstep(e0, e1, t):
    x = tk.clamp((t - e0) / (e1 - e0), 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


@tk.func
def lerp(a, b, t):
    return a * (1.0 - t) + b * t


@tk.kernel
def check_interp(in1: tk.Const, in2: tk.Const, in3: tk.Const, out):
    for i in range(10):
        out[0, i] = 2.0 * smoothstep(in1[0, i], in2[0, i], in3[0, i])
        out[1, i] = 2.0 * lerp(in1[1, i], in2[1, i], in3[1, i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_smoothstep_and_lerp_with_gradients(be, dtype):
    """Values, and reverse-mode gradients against upstream's analytic derivatives (zero where
    the clamp saturates)."""
    e0 = RNG.standard_normal((2, 10)).astype(dtype)
    e1 = (e0 + RNG.standard_normal((2, 10)).astype(dtype) + dtype(0.1))
    e1 = np.where(e1 > e0 + dtype(0.05), e1, e0 + dtype(1)).astype(dtype)
    t = RNG.standard_normal((2, 10)).astype(dtype)
    out = run(be, check_interp, e0, e1, t, np.zeros_like(e0), ndrange=1)[-1]
    a, b, tt = e0.astype(np.float64), e1.astype(np.float64), t.astype(np.float64)
    x = np.clip((tt[0] - a[0]) / (b[0] - a[0]), 0, 1)
    tol = {np.float32: 5e-6, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(out[0], 2 * x * x * (3 - 2 * x), rtol=tol, atol=tol)
    np.testing.assert_allclose(out[1], 2 * (a[1] * (1 - tt[1]) + b[1] * tt[1]), rtol=tol, atol=tol)
    g = [np.zeros_like(e0) for _ in range(3)]
    k = check_interp(be)
    tk.autodiff(tk.Reverse, lambda p, q, r, o: k(p, q, r, o, ndrange=1),
                *[tk.Duplicated(v.copy(), gv) for v, gv in zip((e0, e1, t), g)],
                tk.Duplicated(np.zeros_like(e0), np.ones_like(e0)))
    inside = (x > 0) & (x < 1)
    dydx = 6 * x * (1 - x)
    w = b[0] - a[0]
    np.testing.assert_allclose(g[0][0], np.where(inside, 2 * dydx * (tt[0] - b[0]) / w ** 2, 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g[1][0], np.where(inside, 2 * dydx * (a[0] - tt[0]) / w ** 2, 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g[2][0], np.where(inside, 2 * dydx / w, 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g[0][1], 2 * (1 - tt[1]), rtol=tol, atol=tol)
    np.testing.assert_allclose(g[1][1], 2 * tt[1], rtol=tol, atol=tol)
    np.testing.assert_allclose(g[2][1], 2 * (b[1] - a[1]), rtol=tol, atol=tol)


@tk.kernel
def check_clamp(in1: tk.Const, in2: tk.Const, in3: tk.Const, out):
    i = tk.index()
    out[i] = out.dtype(2) * tk.clamp(in1[i], in2[i], in3[i])


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED + FLOATS)
def test_clamp(be, dtype):
    x = randvals(100, dtype)
    lo = randvals(100, dtype)
    hi = (lo + np.abs(randvals(100, dtype))).astype(dtype)
    out = run(be, check_clamp, x, lo, hi, np.zeros_like(x), ndrange=100)[-1]
    with np.errstate(all="ignore"):
        close(out, (dtype(2) * np.clip(x, lo, hi)).astype(dtype), dtype)
    if dtype in (np.float32, np.float64):
        g = [np.zeros_like(x) for _ in range(3)]
        k = check_clamp(be)
        tk.autodiff(tk.Reverse, lambda p, q, r, o: k(p, q, r, o, ndrange=100),
                    *[tk.Duplicated(v.copy(), gv) for v, gv in zip((x, lo, hi), g)],
                    tk.Duplicated(np.zeros_like(x), np.ones_like(x)))
        below, above = x < lo, x > hi
        np.testing.assert_array_equal(g[0], np.where(~below & ~above, 2, 0))
        np.testing.assert_array_equal(g[1], np.where(below, 2, 0))
        np.testing.assert_array_equal(g[2], np.where(above, 2, 0))


# --- test_codegen.py -------------------------------------------------------------------------

LOWER, UPPER, STEP, N3 = -3, 3, 2, 3


@tk.kernel
def codegen_static(out):
    a = 0
    b = 1
    a = b
    a = 2
    out[0] = a                      # test_rename
    out[1] = b
    c = 1.0
    c += 2.0
    out[2] = c                      # test_inplace
    f0 = 1.0
    f1 = f0
    f1 = f1 + 2.0
    out[3] = f1                     # test_reassign
    out[4] = f0
    s = 0
    for i in range(UPPER):
        s += i
    out[5] = s                      # test_range_constant: 3
    s = 0
    for i in range(LOWER, UPPER):
        s += i
    out[6] = s                      # -3
    s = 0
    for i in range(LOWER, UPPER, STEP):
        s += i
    out[7] = s                      # -3
    a = 0
    for i in range(0, 10):
        if i > 5:
            a = i
            break
    out[8] = a                      # test_break_unroll: 6
    a = 0
    while a < 10:
        if a > 5:
            break
        a += 1
    out[9] = a                      # test_break_while: 6
    a = 0
    total = 0
    while True:
        total += a
        a += 1
        if a >= 5:
            break
    out[10] = a                     # test_break_while_true: 5
    out[11] = total                 # 10
    total = 0
    i = 0
    while True:
        j = 0
        while True:
            total += 1
            j += 1
            if j >= 3:
                break
        i += 1
        if i >= 4:
            break
    out[12] = total                 # test_break_while_true_nested: 12
    a = 0
    for i in range(0, 10):
        if i == 5:
            continue
        a += 1
    out[13] = a                     # test_continue_unroll: 9
    idx = 1
    batch = 100
    t = 0.0
    for _ in range(4 * idx, min(4 * idx + 4, batch)):
        t += 1.0
    for _ in range(4 * idx, min(4 * idx, tk.index() + 1000)):
        t += 1.0
    out[14] = t                     # test_range_expression: 4 (8 upstream, which runs each twice)


STATIC_WANT = [2, 1, 3, 3, 1, 3, -3, -3, 6, 6, 5, 10, 12, 9, 4]


def test_codegen_static(be):
    out = run(be, codegen_static, np.zeros(15, np.float64), ndrange=1)[-1]
    np.testing.assert_array_equal(out, STATIC_WANT)


@tk.kernel
def codegen_dynamic(out, n, start, end, step, m):
    f0 = int(0.0)
    f1 = int(1.0)
    for _i in range(0, n):
        f = f0 + f1
        f0 = f1
        f1 = f
    out[0] = f1                     # test_dynamic_for_rename: 89 for n = 10
    a = float(0.0)
    for _i in range(0, n):
        a += 1.0
    out[1] = a                      # test_dynamic_for_inplace
    a = 0
    for _i in range(end):
        a = a + 1
    b = 0
    for _i in range(start, end):
        b = b + 1
    c = 0
    for _i in range(start, end * step, step):
        c = c + 1
    d = 0
    for _i in range(end * step, start, -step):
        d = d + 1
    out[2] = a                      # test_range_dynamic_sum
    out[3] = b
    out[4] = c
    out[5] = d
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for _i in range(n):
        s1 = s1 + 1.0
        s3 = s3 + 1.0
        for _j in range(n):
            s2 = s2 + 1.0
            s3 = s3 + 1.0
        s3 = s3 + 1.0
    out[6] = s1                     # test_range_dynamic_nested
    out[7] = s2
    out[8] = s3
    i = 0
    while i < n:
        i = i + 1
    out[9] = i                      # test_while
    i = 0
    while i < n:
        if False:
            pass
        else:
            i = i + 1
    out[10] = i                     # test_pass
    a = 0
    for _i in range(0, n):
        if a == 5:
            break
        a += 1
    out[11] = a                     # test_break: 5
    a = 0
    for i in range(0, n):
        if i > 5:
            a = 1
            break
    out[12] = a                     # test_break_early: 1
    a = 0
    for i in range(0, n):
        if i == 6:
            a = 1
            break
        if i == 5:
            a = 2
            break
        if i == 7:
            a = 3
            break
    out[13] = a                     # test_break_multiple: 2
    a = 0
    for i in range(0, n):
        if i == 5:
            continue
        a += 1
    out[14] = a                     # test_continue: n - 1
    s = 0
    for _i in range(N3):
        for _k in range(m):
            for _j in range(N3):
                s += 1
    out[15] = s                     # test_range_constant_dynamic_nested: N * m * N


@pytest.mark.parametrize("start,end,step", [(2, 10, 3), (0, 10, 1), (5, 3, 2), (-4, 6, 4)])
def test_codegen_dynamic(be, start, end, step):
    n, m = 10, 4
    out = run(be, codegen_dynamic, np.zeros(16, np.float64), n, start, end, step, m, ndrange=1)[-1]
    want = [89, n, len(range(end)), len(range(start, end)), len(range(start, end * step, step)),
            len(range(end * step, start, -step)), n, n * n, n * n + 2 * n, n, n, 5, 1, 2, n - 1, N3 * m * N3]
    np.testing.assert_array_equal(out, want)


@tk.kernel
def range_dynamic(result, start, end, step):
    output = 0
    for i in range(start, end, step):
        result[output] = i
        output += 1


@pytest.mark.parametrize("start,end,step", [(0, 10, 1), (10, 0, -1), (-3, 12, 4), (7, -8, -5), (3, 3, 1), (3, 0, 1)])
def test_range_dynamic(be, start, end, step):
    want = list(range(start, end, step))
    out = run(be, range_dynamic, np.full(20, -99, np.int32), start, end, step, ndrange=1)[-1]
    np.testing.assert_array_equal(out[:len(want)], want)
    assert (out[len(want):] == -99).all()


@tk.kernel
def for_iter_reuse(out, n):
    acc = 0
    for i in range(2):
        acc = acc + i
    i = 0
    while i < 3:
        acc = acc + 10
        i = i + 1
    out[0] = acc                    # for_iter_reused_redeclared_while: 31
    s = 0
    for i in range(2):
        s = s + i
    i = 0
    k = 0
    while k < 3:
        i += 1
        k += 1
    out[1] = i                      # for_iter_reused_augassign: 3
    acc = 0
    for i in range(2):
        acc = acc + i
    for i in range(n):
        acc = acc + i
    out[2] = acc                    # for_iter_reused_dynamic_for: 4 for n = 3
    acc = 0
    for i in range(3):
        acc = acc + i
    for d in range(n):
        i = d * 2
        acc = acc + i
    out[3] = acc                    # for_iter_reused_reassign_in_dynamic_loop: 9
    s = 0
    for j in range(2):
        s = s + j
    k = 0
    while k < 3:
        j = j + 1
        k = k + 1
    out[4] = j                      # for_iter_mutated_reuse_self_ref: 4
    for j2 in range(2):
        s = s + j2
    k = 0
    while k < 3:
        j2 += 1
        k += 1
    out[5] = j2                     # for_iter_mutated_reuse_augassign: 4
    for j3 in range(2):
        s = s + j3
    k = 0
    while k < 3:
        tmp = j3
        j3 = tmp + 1
        k = k + 1
    out[6] = j3                     # for_iter_mutated_reuse_indirect: 4


def test_for_iter_reused_after_a_static_loop(be):
    """A constant-trip loop's variable holds its last value after the loop (Python's rule,
    docs/language.md) and is an ordinary loop-carried local afterwards."""
    out = run(be, for_iter_reuse, np.zeros(7, np.int32), 3, ndrange=1)[-1]
    np.testing.assert_array_equal(out, [31, 3, 4, 9, 4, 4, 4])


@tk.kernel
def conditional_return_or_sum(result):
    tid = tk.index()
    if tid < 256:
        return
    tk.atomic_add(result, 0, 1)


@tk.kernel
def conditional_ifexp(x, result):
    tk.atomic_add(result, 0, 1) if x > 0.0 else tk.atomic_add(result, 1, 1)


def test_return_in_kernel_and_ifexp_one_branch(anybe):
    r = run(anybe, conditional_return_or_sum, np.zeros(1, np.int32), ndrange=1024)[-1]
    assert r[0] == 1024 - 256
    r = run(anybe, conditional_ifexp, 1.0, np.zeros(2, np.int32), ndrange=1)[-1]
    np.testing.assert_array_equal(r, [1, 0])
    r = run(anybe, conditional_ifexp, -1.0, np.zeros(2, np.int32), ndrange=1)[-1]
    np.testing.assert_array_equal(r, [0, 1])


# --- test_bool.py ----------------------------------------------------------------------------

TRUE_CONSTANT = True


@tk.func
def identity_function(input_bool, plain_bool):
    return input_bool and plain_bool


@tk.kernel
def identity_test(data):
    i = tk.index()
    data[i] = data[i] and True
    data[i] = data[i] and tk.bool_(True)
    data[i] = data[i] and not False
    data[i] = data[i] and not tk.bool_(False)
    data[i] = identity_function(data[i], True)
    if data[i]:
        data[i] = True
    else:
        data[i] = False
    if not data[i]:
        data[i] = False
    else:
        data[i] = True
    if data[i] and True:
        data[i] = True
    else:
        data[i] = False
    if data[i] or False:
        data[i] = True
    else:
        data[i] = False
    data[i] = tk.select(data[i], True, False)


@tk.kernel
def check_compile_constant(result):
    if TRUE_CONSTANT:
        result[0] = TRUE_CONSTANT
    else:
        result[0] = False


def test_bool_identity_ops_and_constant(be):
    x = RNG.random(10) > 0.5
    out = run(be, identity_test, x, ndrange=10)[-1]
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, x)
    for dt in (np.bool_, np.int32):
        out = run(be, check_compile_constant, np.zeros(1, dt), ndrange=1)[-1]
        assert out[0] == 1
