"""Fifth autodiff audit (SPEC 7, adx20): gradient cases not in the earlier ported files.

- In the manner of JAX's tests/lax_autodiff_test.py (check_grads of each elementwise op at
  chosen points): every one-argument math function in a column of its own, each at points that
  stress its derivative (expm1/log1p near 0, erf/erfc in the tails, asin/acos/atanh near +-1,
  acosh near 1), against closed forms evaluated exactly; atan2 in all four quadrants and on both
  sides of the branch cut; pow with negative bases and integral exponents from an array; both
  remainders (`%` and fmod) in all four sign combinations; division by tiny and huge divisors in
  forward mode; select chains with three-way ties.
- Taichi's test_ad_for / test_ad_if: array reads at indices a Fibonacci recurrence produces,
  static and data-dependent inner loops in one outer loop, a thousand-trip loop, and branches on
  a loop-carried value that switch between trips.
- Enzyme's integration tests: Euler steps of a small ODE in a private array (integrateexp), a
  cosine series with a running factorial (mycos), and a sum that stops at a threshold (sumtil).

Both modes against closed forms or float64 central differences of the primal program, on CPU and
INTERP (float32 on the CPU where the point is float32 rounding)."""
import math
from decimal import Decimal, localcontext
from fractions import Fraction as F

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, host
from test_ported_autodiff import check_forward, check_reverse

RNG = np.random.default_rng(5020)


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    return tk.backend(request.param)


def both_modes(be, fn, args, seeds, wrt, tangents=None):
    dtypes = {k: a.dtype for k, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "i"}
    res = check_reverse(be, fn, args, seeds, wrt=wrt, dtypes=dtypes)
    tangents = tangents or {k: RNG.standard_normal(args[k].shape) for k in wrt}
    check_forward(be, fn, args, tangents, outs=list(seeds), dtypes=dtypes)
    return res


def rev_and_fwd(be, fn, out_shape, x, dtype=np.float64):
    """(reverse-mode d/dx with unit seeds, forward-mode tangent along unit tangents) of an
    elementwise program ``fn(out, x)``: both are the derivative of each output element by its
    own input."""
    dx = np.zeros(x.shape, dtype)
    tk.autodiff(tk.Reverse, fn, tk.Duplicated(np.zeros(out_shape, dtype), np.ones(out_shape, dtype)),
                tk.Duplicated(x.astype(dtype), dx))
    do = np.zeros(out_shape, dtype)
    tk.autodiff(tk.Forward, fn, tk.Duplicated(np.zeros(out_shape, dtype), do),
                tk.Duplicated(x.astype(dtype), np.ones(x.shape, dtype)))
    return dx, do


# --- one-argument math functions (JAX lax_autodiff_test's check_grads points) -----------------------

@tk.kernel
def unary_columns(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = math.exp(x[i, 0])
    o[i, 1] = math.expm1(x[i, 1])
    o[i, 2] = math.log(x[i, 2])
    o[i, 3] = math.log1p(x[i, 3])
    o[i, 4] = math.log2(x[i, 4])
    o[i, 5] = math.log10(x[i, 5])
    o[i, 6] = math.erf(x[i, 6])
    o[i, 7] = math.erfc(x[i, 7])
    o[i, 8] = math.asin(x[i, 8])
    o[i, 9] = math.acos(x[i, 9])
    o[i, 10] = math.atanh(x[i, 10])
    o[i, 11] = math.acosh(x[i, 11])
    o[i, 12] = math.asinh(x[i, 12])
    o[i, 13] = math.atan(x[i, 13])
    o[i, 14] = math.sinh(x[i, 14])
    o[i, 15] = math.cosh(x[i, 15])
    o[i, 16] = math.tan(x[i, 16])
    o[i, 17] = math.cos(x[i, 17])


# four points per function; near +-1 the digits are arbitrary (0.99999991234, not 1 - 2**-k),
# so that x * x rounds
UNARY_POINTS = np.array([
    [-30.0, -1e-9, 0.7, 40.0],                               # exp
    [-1e-10, 3e-8, -20.0, 2.5],                              # expm1
    [1e-300, 0.3, 1.0, 1e10],                                # log
    [-0.99999912345, -1e-12, 7e-9, 50.0],                    # log1p
    [1e-5, 0.5, 3.0, 1e8],                                   # log2
    [2e-7, 0.25, 10.0, 4e12],                                # log10
    [-3.0, -1e-5, 0.5, 5.5],                                 # erf
    [-2.0, 0.0, 1.5, 20.0],                                  # erfc
    [-0.99999991234, -0.3, 0.999876543, 0.999999987654],     # asin
    [-0.999999987654, 0.2, 0.9999123457, 0.99999991234],     # acos
    [-0.9999999876543, -0.5, 0.9987654321, 0.99999991234],   # atanh
    [1.00000001234, 1.000123457, 1.5, 1e200],                # acosh
    [-3e160, -0.5, 1e-8, 1e200],                             # asinh
    [-1e4, -0.3, 1e-9, 2.0],                                 # atan
    [-5.0, -1e-7, 0.4, 30.0],                                # sinh
    [-5.0, 0.0, 0.4, 30.0],                                  # cosh
    [-1.5, -0.2, 1.0, 1.57],                                 # tan
    [-3.0, 0.0, 1.5707, 2.5],                                # cos
]).T


def _inverse_want(fn, x) -> float:
    """d fn / dx of an inverse function at the float ``x``, in 40 decimal digits (no rounding of
    x * x, no overflow), rounded once."""
    with localcontext() as ctx:
        ctx.prec = 40
        X = Decimal(float(x))
        d = {"asin": lambda: 1 / (1 - X * X).sqrt(), "acos": lambda: -1 / (1 - X * X).sqrt(),
             "atanh": lambda: 1 / (1 - X * X), "acosh": lambda: 1 / (X * X - 1).sqrt(),
             "asinh": lambda: 1 / (X * X + 1).sqrt()}[fn]
        return float(d())


def _unary_want(col, x):
    """The derivative of column ``col``'s function at the float64 ``x``, correct to about 1 ulp."""
    X = F(x)
    if col in (8, 9, 10, 11, 12):
        return _inverse_want(["asin", "acos", "atanh", "acosh", "asinh"][col - 8], x)
    return [math.exp, math.exp, lambda v: 1 / v, lambda v: float(1 / (1 + X)), lambda v: 1 / (v * math.log(2)),
            lambda v: 1 / (v * math.log(10)), lambda v: 2 / math.sqrt(math.pi) * math.exp(-v * v),
            lambda v: -2 / math.sqrt(math.pi) * math.exp(-v * v), None, None, None, None, None,
            lambda v: 1 / (1 + v * v), math.cosh, math.sinh,
            lambda v: 1 / math.cos(v) ** 2, lambda v: -math.sin(v)][col](x)


def test_each_math_function_at_its_hard_points_in_both_modes(be):
    """The derivative of each function alone (one column each, so nothing cancels or hides a
    wrong term), in both modes, within a few ulps of the exact value; asin, acos, atanh and
    acosh near |x| = 1 had 1 - x * x (x * x - 1), whose rounding cancelled into relative errors
    of 1e-10 at these points (float64; 6e-5 in float32, below), and asinh and acosh squared x,
    a derivative of 0 at 1e200 (where it is 1e-200), before adx20."""
    x = UNARY_POINTS
    n, m = x.shape
    fn = lambda o, x_: unary_columns(be)(o, x_, ndrange=n)  # noqa: E731
    dx, do = rev_and_fwd(be, fn, (n, m), x)
    want = np.array([[_unary_want(c, x[r, c]) for c in range(m)] for r in range(n)])
    for c in range(m):
        np.testing.assert_allclose(dx[:, c], want[:, c], rtol=4e-15, err_msg=f"reverse, column {c}")
        np.testing.assert_allclose(do[:, c], want[:, c], rtol=4e-15, err_msg=f"forward, column {c}")


@tk.kernel
def inverse_columns(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = math.asin(x[i, 0])
    o[i, 1] = math.acos(x[i, 1])
    o[i, 2] = math.atanh(x[i, 2])
    o[i, 3] = math.acosh(x[i, 3])
    o[i, 4] = math.asinh(x[i, 4])
    o[i, 5] = math.acosh(x[i, 5])


def test_inverse_functions_near_one_and_at_huge_arguments_in_float32():
    """float32 has 24 bits: 1 - x * x at x = 0.99987654 keeps about 11 of them (a relative error
    of 6e-5 in the derivative before adx20); (1 - x)(1 + x) keeps all. x * x overflows float32
    above 1.8e19: asinh's and acosh's derivatives at 1e20 were 0 (they are 1e-20)."""
    x = np.array([[0.99987654, -0.9993712, 0.99987654, 1.0001234, 1e20, 3e19],
                  [-0.99971234, 0.99971234, -0.9993712, 1.00471234, -2e25, 1e30]], np.float32)
    fn = lambda o, x_: inverse_columns(tk.CPU())(o, x_, ndrange=2)  # noqa: E731
    dx, do = rev_and_fwd(tk.CPU(), fn, (2, 6), x, np.float32)
    fns = ["asin", "acos", "atanh", "acosh", "asinh", "acosh"]
    want = np.array([[_inverse_want(fns[c], v) for c, v in enumerate(row)] for row in x])
    np.testing.assert_allclose(dx, want, rtol=5e-7)
    np.testing.assert_allclose(do, want, rtol=5e-7)


# --- two-argument operations ---------------------------------------------------------------------

@tk.kernel
def binary_columns(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    o[i, 0] = math.atan2(x[i], y[i])
    o[i, 1] = math.fmod(x[i], y[i])
    o[i, 2] = x[i] % y[i]
    o[i, 3] = math.hypot(x[i], y[i])


def test_atan2_remainders_and_hypot_in_all_four_quadrants(be):
    """atan2 in each quadrant and just above and below the negative x axis (its branch cut: the
    value jumps by 2 pi there, the derivative does not), fmod and % with every sign combination
    (d/dy is -trunc(x / y) and -floor(x / y)), hypot; one x of 3e-200, where x * x underflows."""
    x = np.array([0.7, 0.7, -0.7, -0.7, 1e-3, -1e-3, 2.3, -2.3, 3e-200])
    y = np.array([1.3, -1.3, 1.3, -1.3, -2.0, -2.0, -0.9, 0.9, 1.7])
    n = len(x)
    fn = lambda o, x_, y_: binary_columns(be)(o, x_, y_, ndrange=n)  # noqa: E731
    r2 = x * x + y * y
    want_dx = np.stack([y / r2, np.ones(n), np.ones(n), x / np.sqrt(r2)], 1)
    want_dy = np.stack([-x / r2, -np.trunc(x / y), -np.floor(x / y), y / np.sqrt(r2)], 1)
    for col in range(4):
        seed = np.zeros((n, 4))
        seed[:, col] = 1.0
        dx, dy = np.zeros(n), np.zeros(n)
        args = [tk.Duplicated(np.zeros((n, 4)), seed), tk.Duplicated(x.copy(), dx), tk.Duplicated(y.copy(), dy)]
        tk.autodiff(tk.Reverse, fn, *args)
        np.testing.assert_allclose(dx, want_dx[:, col], rtol=1e-14, atol=1e-300, err_msg=f"d/dx column {col}")
        np.testing.assert_allclose(dy, want_dy[:, col], rtol=1e-14, atol=1e-300, err_msg=f"d/dy column {col}")
    # forward mode and central differences along random directions, at the points more than 1e-4
    # from a jump of fmod or % and from atan2's cut (not 3e-200: the step of 1e-6 crosses 0)
    fn8 = lambda o, x_, y_: binary_columns(be)(o, x_, y_, ndrange=8)  # noqa: E731
    both_modes(be, fn8, [np.zeros((8, 4)), x[:8], y[:8]], {0: RNG.standard_normal((8, 4))}, wrt=[1, 2])


@tk.kernel
def neg_base_powers(o, x: tk.Const, c: tk.Const, n):
    i = tk.index()
    o[i] = math.pow(x[i], c[i]) + x[i] ** c[i] * 0.5 + x[i] ** n + (x[i] * 0.5) ** (n - 5)


def test_pow_of_negative_bases_with_integral_exponents_from_an_array(be):
    """x ** c with c a tk.Const array of integral floats (0, 1, 2, 3, -1, -2, 5): finite at negative
    x, d/dx = c x**(c - 1), in both modes (the exponent carries no tangent, so its NaN partial
    log(x) x**c at a negative base is left out); and integer exponents n and n - 5 < 0."""
    x = np.array([-1.5, -0.5, -2.0, -0.8, -1.25, -3.0, 0.6])
    c = np.array([3.0, 2.0, -1.0, -2.0, 5.0, 0.0, 1.0])
    k = len(x)
    fn = lambda o, x_, c_: neg_base_powers(be)(o, x_, c_, 3, ndrange=k)  # noqa: E731
    sh, _ = check_reverse(be, fn, [np.zeros(k), x, c], {0: np.ones(k)}, wrt=[1])
    check_forward(be, fn, [np.zeros(k), x, c], {1: RNG.standard_normal(k)}, outs=[0])
    want = 1.5 * c * x ** (c - 1) + 3 * x ** 2 + 0.5 * -2 * (0.5 * x) ** -3
    np.testing.assert_allclose(host(sh[1]), want, rtol=1e-9)


@tk.kernel
def quotient(o, a: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = a[i] / c[i]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_division_by_tiny_and_huge_divisors_in_forward_mode(be, dtype):
    """d(a / c) = (da - (a / c) dc) / c. The tangent was (da c - a dc) / (c c), whose c * c
    underflows to 0 below 1e-154 (float64; 1e-19 in float32): a NaN or infinite tangent where
    the derivative is finite, and digits lost in the subnormals (reverse mode, -(g (a / c)) / c,
    was right). Exact rationals decide."""
    if dtype == np.float64:
        a, c = np.array([2e-170, 3e-160, -5e-200, 1.5, 1e150]), np.array([1e-170, 1e-160, 4e-200, 3e-10, 2e150])
    else:
        a, c = np.array([2e-23, 3e-20, -5e-25, 1.5, 1e18]), np.array([1e-23, 1e-20, 4e-25, 3e-10, 2e18])
    a, c = a.astype(dtype), c.astype(dtype)
    ta, tc = np.array([0.0, 1.0, -0.5, 2.0, 1.0], dtype), np.array([1.0, 1.0, 0.25, -1.0, 3.0], dtype)
    k = len(a)
    fn = lambda o, a_, c_: quotient(be)(o, a_, c_, ndrange=k)  # noqa: E731
    do = np.zeros(k, dtype)
    tk.autodiff(tk.Forward, fn, tk.Duplicated(np.zeros(k, dtype), do), tk.Duplicated(a.copy(), ta.copy()),
                tk.Duplicated(c.copy(), tc.copy()))
    want = np.array([float(F(float(t)) / F(float(q)) - F(float(s)) * F(float(p)) / F(float(q)) ** 2)
                     for p, q, t, s in zip(a, c, ta, tc)])
    np.testing.assert_allclose(do, want, rtol=4 * np.finfo(dtype).eps)
    da, dc = np.zeros(k, dtype), np.zeros(k, dtype)
    tk.autodiff(tk.Reverse, fn, tk.Duplicated(np.zeros(k, dtype), np.ones(k, dtype)), tk.Duplicated(a.copy(), da),
                tk.Duplicated(c.copy(), dc))
    np.testing.assert_allclose(da * ta + dc * tc, want, rtol=8 * np.finfo(dtype).eps)


@tk.kernel
def select_ties(o, x: tk.Const, y: tk.Const, z: tk.Const):
    i = tk.index()
    a, b, c = x[i], y[i], z[i]
    m = tk.select(a >= b, a, b)                 # ties to a
    o[i, 0] = tk.select(m >= c, m, c)           # a three-way max by selects: ties to the first
    o[i, 1] = a if a > b else (b if b > c else c)
    o[i, 2] = tk.select(a == b, a * b, a + b)
    o[i, 3] = max(max(a, b), c)                 # max ties split in halves at each level


def test_select_chains_with_three_way_ties(be):
    """Selects route the whole adjoint to the operand their condition picks, ties included (a
    three-way tie of the select-max goes all to x; of the ternary chain all to z); max splits a
    tie in halves at each level (x, y, z get 1/4, 1/4, 1/2 at a three-way tie)."""
    x = np.array([1.0, 1.0, 1.0, 0.5, 2.0, -1.0])
    y = np.array([1.0, 1.0, 0.5, 1.0, 2.0, -1.0])
    z = np.array([1.0, 0.5, 1.0, 1.0, 0.0, -1.0])
    n = len(x)
    fn = lambda o, *a: select_ties(be)(o, *a, ndrange=n)  # noqa: E731
    # derivatives (d/dx, d/dy, d/dz) per column, from the rules above
    sel = np.array([[1, 0, 0], [1, 0, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0], [1, 0, 0]], float)
    tern = np.array([[0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 1]], float)
    eq = np.stack([np.where(x == y, y, 1.0), np.where(x == y, x, 1.0), 0 * x], 1)
    mx = np.array([[.25, .25, .5], [.5, .5, 0], [.5, 0, .5], [0, .5, .5], [.5, .5, 0], [.25, .25, .5]])
    want = [sel, tern, eq, mx]
    for col in range(4):
        seed = np.zeros((n, 4))
        seed[:, col] = 1.0
        sh = [np.zeros(n) for _ in range(3)]
        tk.autodiff(tk.Reverse, fn, tk.Duplicated(np.zeros((n, 4)), seed),
                    *[tk.Duplicated(v.copy(), s) for v, s in zip((x, y, z), sh)])
        np.testing.assert_array_equal(np.stack(sh, 1), want[col], err_msg=f"reverse, column {col}")
        for t in np.eye(3):
            do = np.zeros((n, 4))
            tk.autodiff(tk.Forward, fn, tk.Duplicated(np.zeros((n, 4)), do),
                        *[tk.Duplicated(v.copy(), np.full(n, tv)) for v, tv in zip((x, y, z), t)])
            np.testing.assert_array_equal(do[:, col], want[col] @ t, err_msg=f"forward, column {col}, {t}")


# --- Taichi's test_ad_for / test_ad_if ---------------------------------------------------------------

@tk.kernel
def fibonacci_index(out, x: tk.Const, n):
    """Taichi's test_ad_fibonacci_index: reads at indices a Fibonacci recurrence (mod the length)
    produces, so several trips and several items read (and add gradient to) one element."""
    i = tk.index()
    f = i % 7
    g = 1
    s = 0.0
    for k in range(n):
        f, g = g, (f + g) % 7
        s += x[f] * x[g] * float(k + 1)
    out[i] = s


def test_reads_at_indices_a_recurrence_produces(be):
    fn = lambda o, x_: fibonacci_index(be)(o, x_, 6, ndrange=5)  # noqa: E731
    both_modes(be, fn, [np.zeros(5), RNG.uniform(-1, 1, 7)], {0: RNG.standard_normal(5)}, wrt=[1])


@tk.kernel
def mixed_inner_loops(out, x: tk.Const, counts: tk.Const, n):
    """Taichi's test_mixed_inner_loops: a static and a data-dependent inner loop in one outer loop,
    both updating the same local."""
    i = tk.index()
    s = x[i, 0]
    for a in range(n):
        for b in range(3):
            s = s * 0.75 + math.sin(x[i, b] * s)
        for b in range(counts[i]):
            s = s + x[i, b] * x[i, a] * 0.5
    out[i] = s


def test_static_and_data_dependent_inner_loops(be):
    x = RNG.uniform(-1, 1, (4, 4))
    counts = np.array([0, 2, 4, 1], np.int32)
    fn = lambda o, x_, c: mixed_inner_loops(be)(o, x_, c, 3, ndrange=4)  # noqa: E731
    both_modes(be, fn, [np.zeros(4), x, counts], {0: RNG.standard_normal(4)}, wrt=[1])


@tk.kernel
def long_loop(out, x: tk.Const, n):
    """Taichi's test_large_for_loops: a thousand trips of a contraction (the tape holds every trip)."""
    i = tk.index()
    v = x[i]
    for k in range(n):
        v = math.sin(v) * 0.9 + x[i] * 0.1
    out[i] = v


def test_a_thousand_trip_loop(be):
    fn = lambda o, x_: long_loop(be)(o, x_, 1000, ndrange=3)  # noqa: E731
    both_modes(be, fn, [np.zeros(3), np.array([0.3, -1.2, 2.0])], {0: np.ones(3)}, wrt=[1])


@tk.kernel
def switching_branches(out, aux, x: tk.Const, n):
    """Taichi's test_ad_if in a loop: the branch depends on a loop-carried value, so it changes
    between trips; each branch also adds into a different output."""
    i = tk.index()
    v = x[i]
    for k in range(n):
        if v > 0.0:
            v = v * v - 0.8
            out[i] += v
        else:
            v = math.exp(v) - 0.5
            aux[i] += v * x[i]
    out[i] += v


def test_branches_on_a_loop_carried_value(be):
    x = np.array([0.9, -0.4, 0.2, 1.3, -1.1])     # every trip's v is more than 1e-3 from 0
    fn = lambda o, a, x_: switching_branches(be)(o, a, x_, 5, ndrange=5)  # noqa: E731
    both_modes(be, fn, [np.zeros(5), np.zeros(5), x], {0: RNG.standard_normal(5), 1: RNG.standard_normal(5)},
               wrt=[0, 1, 2])


# --- Enzyme's integration tests ----------------------------------------------------------------------

@tk.kernel
def integrate_exp(out, y0: tk.Const, rate: tk.Const, steps, dt):
    """Enzyme's integrateexp: explicit Euler steps of y' = -rate y on a 3-vector kept in a private
    array, coupled to its neighbour."""
    i = tk.index()
    y = tk.private(y0.dtype, 3)
    for j in range(3):
        y[j] = y0[i, j]
    for t in range(steps):
        for j in range(3):
            y[j] = y[j] - dt * rate[j] * y[j] + dt * 0.1 * y[(j + 1) % 3]
    out[i] = y[0] + 2.0 * y[1] + 3.0 * y[2]


def test_euler_steps_in_a_private_array(be):
    y0, rate = RNG.uniform(-1, 1, (3, 3)), np.array([0.5, 1.5, 2.5])
    fn = lambda o, y, r: integrate_exp(be)(o, y, r, 20, 0.05, ndrange=3)  # noqa: E731
    both_modes(be, fn, [np.zeros(3), y0, rate], {0: RNG.standard_normal(3)}, wrt=[1, 2])


@tk.kernel
def my_cos(out, x: tk.Const, terms):
    """Enzyme's mycos: the cosine's series with the power and the factorial carried between
    trips and the sign alternating."""
    i = tk.index()
    s = 0.0
    p = 1.0
    fact = 1.0
    sign = 1.0
    for k in range(terms):
        s += sign * p / fact
        p = p * x[i] * x[i]
        fact = fact * float(2 * k + 1) * float(2 * k + 2)
        sign = -sign
    out[i] = s


def test_cosine_series_with_a_running_factorial(be):
    x = np.array([0.3, -1.1, 2.0, 0.0])
    fn = lambda o, x_: my_cos(be)(o, x_, 14, ndrange=4)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(4), x], {0: np.ones(4)}, wrt=[1])
    np.testing.assert_allclose(host(sh[1]), -np.sin(x), rtol=1e-9, atol=1e-12)


@tk.kernel
def sum_until(out, x: tk.Const, limit, n):
    """Enzyme's sumtil: add a row's elements until the running sum passes a limit."""
    i = tk.index()
    s = 0.0
    k = 0
    while k < n:
        s += x[i, k] * x[i, k]
        if s > limit:
            break
        k += 1
    out[i] = s * float(k + 1)


def test_a_sum_that_stops_at_a_threshold(be):
    # each row's running sums keep more than 1e-3 from the limit, so the trip count is locally constant
    x = np.array([[0.5, 0.5, 0.5, 0.5], [1.2, 0.1, 0.3, 0.2], [0.1, 0.2, 0.1, 0.3]])
    fn = lambda o, x_: sum_until(be)(o, x_, 0.9, 4, ndrange=3)  # noqa: E731
    both_modes(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])


# --- rows a work item owns (Enzyme's rwrloop) ----------------------------------------------------

@tk.kernel
def rwr_loop(A, out, x: tk.Const, m):
    """Enzyme's rwrloop: each item reads and rewrites the elements of its own row of A in a loop
    (the column is the loop variable), the running sum read back after each write."""
    i = tk.index()
    s = 0.0
    for j in range(m):
        A[i, j] = A[i, j] * A[i, j] * x[i] + s * 0.25
        s += A[i, j]
    out[i] = s


@tk.kernel
def sort_own_row(A, w: tk.Const, m):
    """Each item sorts its own row of A in place (swaps at data-dependent columns), then weighs
    the sorted row."""
    i = tk.index()
    for k in range(1, m):
        j = k
        while j > 0 and A[i, j - 1] > A[i, j]:
            t = A[i, j]
            A[i, j] = A[i, j - 1]
            A[i, j - 1] = t
            j -= 1
    for k in range(m):
        A[i, k] = A[i, k] * w[k]


def test_read_write_read_in_a_loop_over_the_items_own_row(be):
    """The cross-item check took only whole-element indices (A[i], A[i, j] in a 2-D launch), so
    these were refused before adx20; an item that touches only its own row (leading coordinate
    its own index, the rest free) cannot reach another item's element."""
    fn = lambda A, o, x_: rwr_loop(be)(A, o, x_, 4, ndrange=3)  # noqa: E731
    both_modes(be, fn, [RNG.uniform(-1, 1, (3, 4)), np.zeros(3), RNG.uniform(-1, 1, 3)],
               {0: RNG.standard_normal((3, 4)), 1: RNG.standard_normal(3)}, wrt=[0, 2])


def test_sorting_the_items_own_row_in_place(be):
    A = RNG.permutation(np.linspace(-1.5, 1.9, 15)).reshape(3, 5)     # distinct: no ties
    fn = lambda A_, w: sort_own_row(be)(A_, w, 5, ndrange=3)  # noqa: E731
    sh, _ = both_modes(be, fn, [A, RNG.uniform(0.5, 1.5, 5)], {0: RNG.standard_normal((3, 5))}, wrt=[0, 1])


@tk.kernel
def next_row(A, m):
    i = tk.index()
    for j in range(m):
        A[i, j] = A[i, j] * A[i + 1, j]


@tk.kernel
def shared_row_2d(A):
    i, j = tk.index(tk.Global, tk.Cartesian)
    for k in range(3):
        A[i, k] = A[i, k] * 2.0 + A[i, j]


def test_rows_other_items_also_touch_stay_refused():
    """Row i read from row i + 1 (1-D launch); row i touched by every item (i, j) of a 2-D launch."""
    be = tk.CPU()
    for call, line in ((lambda A: next_row(be)(A, 3, ndrange=2), "A[i + 1, j]"),
                       (lambda A: shared_row_2d(be)(A, ndrange=(3, 3)), "A[i, j]")):
        with pytest.raises(tk.CompileError, match="'A' is both read and written") as e:
            tk.autodiff(tk.Reverse, call, tk.Duplicated(np.ones((3, 3)), np.ones((3, 3))))
        assert line in str(e.value)
