"""Second autodiff audit (SPEC 7) in the manner of Warp's test_grad / test_grad_customs, Taichi's
test_ad_if / test_ad_for / test_ad_math_func, Enzyme's integration tests and JAX's jvp/vjp
consistency checks: kinks and ties (the documented subgradients, and forward mode agreeing with
reverse mode there: J v == v^T J), ``**`` with int and float exponents, run-time trip counts,
funcs called twice, local memory over several phases, int casts, launches on streams.
Gradients against float64 central differences, on CPU, INTERP, INTERP:CHECK, CL and WEBGPU."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, dev, fdt, host  # noqa: F401
from test_ported_autodiff import check_forward, check_reverse

RNG = np.random.default_rng(1616)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def jvp_vjp(be, fn, args, outs, ins):
    """<s, J t> from forward mode and <J^T s, t> from reverse mode, for random tangents t of the
    arrays ``ins`` and random seeds s of the arrays ``outs`` (JAX's jvp/vjp transposition check)."""
    t = {k: RNG.standard_normal(args[k].shape) for k in ins}
    s = {k: RNG.standard_normal(args[k].shape) for k in outs}

    def run(mode, start):
        shadows = {k: dev(start.get(k, np.zeros(args[k].shape)), be) for k in set(ins) | set(outs)}
        tk.autodiff(mode, fn, *[tk.Duplicated(dev(a, be), shadows[k]) if k in shadows
                                else tk.Const(dev(a, be, a.dtype if a.dtype.kind in "iu" else None)
                                              if isinstance(a, np.ndarray) else a)
                                for k, a in enumerate(args)])
        return shadows
    fwd, rev = run(tk.Forward, t), run(tk.Reverse, s)
    return (sum(float((host(fwd[k]) * s[k]).sum()) for k in outs),
            sum(float((host(rev[k]) * t[k]).sum()) for k in ins))


# --- kinks and ties --------------------------------------------------------------------------

@tk.kernel
def kinks(out, x: tk.Const, y: tk.Const, lo, hi):
    i = tk.index()
    u = x[i]
    v = y[i]
    out[i, 0] = max(u, v)
    out[i, 1] = min(u, v)
    out[i, 2] = abs(u)
    out[i, 3] = tk.clamp(u, lo, hi)
    out[i, 4] = u if u > v else v
    out[i, 5] = tk.select(u >= v, u, v)
    out[i, 6] = math.fabs(u - v)
    out[i, 7] = max(u, 0.0)


def kink_want(x, y, lo, hi):
    """The documented derivatives (d/dx, d/dy) of each column at these points."""
    tie = x == y
    dx = np.stack([np.where(tie, .5, x > y), np.where(tie, .5, x < y), np.sign(x),
                   (x >= lo) & (x <= hi), x > y, x >= y, np.sign(x - y), np.where(x == 0, .5, x > 0)], 1)
    dy = np.stack([np.where(tie, .5, y > x), np.where(tie, .5, y < x), 0 * x, 0 * x, ~(x > y), ~(x >= y),
                   -np.sign(x - y), 0 * x], 1)
    return dx.astype(float), dy.astype(float)


def test_kinks_and_ties_take_the_documented_subgradient_in_both_modes(be):
    """ties of max/min share half, abs at 0 gives 0, clamp at a bound gives all to x, the
    ternary and tk.select route by their condition; forward mode's tangent is the same linear
    map (a tie's tangent is the mean of both tangents), so J v == v^T J holds at the kinks too"""
    x = np.array([0.5, -0.25, 0.0, 1.0, -1.0, 0.75, 2.0])
    y = np.array([0.5, -0.25, 0.0, 0.3, -1.0, 1.5, 2.0])
    lo, hi = -1.0, 1.0
    fn = lambda o, x_, y_: kinks(be)(o, x_, y_, lo, hi, ndrange=7)  # noqa: E731
    wdx, wdy = kink_want(x, y, lo, hi)
    for col in range(8):
        seed = np.zeros((7, 8))
        seed[:, col] = 1.0
        dO, dX, dY = dev(seed, be), dev(np.zeros(7), be), dev(np.zeros(7), be)
        tk.autodiff(tk.Reverse, fn, tk.Duplicated(dev(np.zeros((7, 8)), be), dO), tk.Duplicated(dev(x, be), dX),
                    tk.Duplicated(dev(y, be), dY))
        np.testing.assert_array_equal(host(dX), wdx[:, col], err_msg=f"d/dx column {col}")
        np.testing.assert_array_equal(host(dY), wdy[:, col], err_msg=f"d/dy column {col}")
        for tx, ty in ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0)):
            dO = dev(np.zeros((7, 8)), be)
            tk.autodiff(tk.Forward, fn, tk.Duplicated(dev(np.zeros((7, 8)), be), dO),
                        tk.Duplicated(dev(x, be), dev(np.full(7, tx), be)),
                        tk.Duplicated(dev(y, be), dev(np.full(7, ty), be)))
            np.testing.assert_array_equal(host(dO)[:, col], tx * wdx[:, col] + ty * wdy[:, col],
                                          err_msg=f"tangent of column {col} along ({tx}, {ty})")


# --- powers ---------------------------------------------------------------------------------

@tk.kernel
def powers(out, x: tk.Const, y: tk.Const, n):
    i = tk.index()
    u = x[i]
    v = y[i]
    out[i, 0] = u ** 2
    out[i, 1] = u ** 3
    out[i, 2] = u ** n
    out[i, 3] = u ** 0
    out[i, 4] = u ** -2
    out[i, 5] = u ** 2.0
    out[i, 6] = v ** u
    out[i, 7] = math.pow(u, 2)


def test_integer_and_float_exponents_at_negative_and_zero_bases(be):
    """x ** k for int k is differentiable at negative x (d/dx = k x^(k-1)), x ** 0 has d/dx 0
    even at 0, v ** u at v == 0 has d/du 0 (PyTorch's convention, docs/autodiff.md)"""
    x = np.array([-1.5, -0.5, 0.0, 0.75, 2.0, -2.0])
    y = np.array([0.0, 0.5, 1.5, 0.0, 3.0, 0.7])
    fn = lambda o, x_, y_: powers(be)(o, x_, y_, 3, ndrange=6)  # noqa: E731
    seed = np.ones((6, 8))
    dO, dX, dY = dev(seed, be), dev(np.zeros(6), be), dev(np.zeros(6), be)
    tk.autodiff(tk.Reverse, fn, tk.Duplicated(dev(np.zeros((6, 8)), be), dO), tk.Duplicated(dev(x, be), dX),
                tk.Duplicated(dev(y, be), dY))
    with np.errstate(divide="ignore", invalid="ignore"):
        # columns 4 (x ** -2) and 6 (v ** u at u with v == 0) are checked where finite
        want_dx = (2 * x + 3 * x ** 2 + 3 * x ** 2 + 0 + np.where(x == 0, np.inf, -2 * x ** -3) + 2 * x
                   + np.where(y > 0, np.log(np.where(y > 0, y, 1)) * y ** x, np.where(x > 0, 0, np.nan)) + 2 * x)
    got = host(dX)
    ok = np.isfinite(want_dx)
    np.testing.assert_allclose(got[ok], want_dx[ok], rtol=1e-5)
    # x ** 0 and pow(x, 2) at x == 0 contribute nothing: only -2 x^-3 is infinite there
    assert np.isinf(got[2]) or np.isnan(got[2])
    # d/dy of y ** x: x y^(x-1), 0 at y == 0 for x > 1; inf for 0 < x < 1; here x[3] = .75 at y = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        want_dy = x * y ** (x - 1)
    np.testing.assert_allclose(host(dY)[[1, 2, 4, 5]], want_dy[[1, 2, 4, 5]], rtol=1e-5)
    assert host(dY)[3] == np.inf


@tk.kernel
def powers_at(out, x: tk.Const, y: tk.Const, n):
    i = tk.index()
    out[i] = x[i] ** 2 + x[i] ** n + x[i] ** -3 + x[i] ** 1.5 * 0.0 + math.pow(y[i], x[i]) + y[i] ** 2.5


def test_powers_against_central_differences_in_both_modes(be):
    # x ** 1.5 at a negative x is NaN (times 0.0 still NaN): positive bases here, negative ones below
    xp = np.array([1.5, 0.5, 0.75, 2.0])
    y = np.array([0.5, 1.5, 3.0, 0.7])
    fn = lambda o, x_, y_: powers_at(be)(o, x_, y_, 4, ndrange=4)  # noqa: E731
    check_reverse(be, fn, [np.zeros(4), xp, y], {0: RNG.standard_normal(4)}, wrt=[1, 2])
    check_forward(be, fn, [np.zeros(4), xp, y], {1: RNG.standard_normal(4), 2: RNG.standard_normal(4)}, outs=[0])


@tk.kernel
def int_powers(out, x: tk.Const, n):
    i = tk.index()
    out[i] = x[i] ** n + x[i] ** 2 * x[i] ** 3 + (-x[i]) ** 3


def test_integer_powers_of_negative_bases_in_both_modes(be):
    x = np.array([-1.5, -0.5, -2.0, -0.25, 0.6])
    fn = lambda o, x_: int_powers(be)(o, x_, 5, ndrange=5)  # noqa: E731
    check_reverse(be, fn, [np.zeros(5), x], {0: RNG.standard_normal(5)}, wrt=[1])
    check_forward(be, fn, [np.zeros(5), x], {1: RNG.standard_normal(5)}, outs=[0])


# --- control flow with run-time trip counts, funcs called twice ---------------------------------

@tk.func
def damp(v, x):
    """early return inside a func called from a loop"""
    if v > 2.0:
        return v * 0.5
    return v * x + math.sin(v)


@tk.kernel
def data_trip_counts(out, x: tk.Const, counts: tk.Const):
    i = tk.index()
    v = x[i]
    for k in range(counts[i]):
        v = damp(v, x[i]) + damp(x[i], 0.5)
        if v < -1.0:
            continue
        if k > 4:
            break
    out[i] = v


def test_loops_with_trip_counts_read_from_an_array(be):
    x = np.array([0.3, -0.8, 1.1, 0.45, 1.9, -0.1])
    c = np.array([0, 1, 3, 7, 2, 5], np.int32)
    fn = lambda o, x_, c_: data_trip_counts(be)(o, x_, c_, ndrange=6)  # noqa: E731
    dt = {2: np.int32}
    check_reverse(be, fn, [np.zeros(6), x, c], {0: RNG.standard_normal(6)}, wrt=[1], dtypes=dt)
    check_forward(be, fn, [np.zeros(6), x, c], {1: RNG.standard_normal(6)}, outs=[0], dtypes=dt)


@tk.kernel
def converge(out, x: tk.Const, tol):
    """a while loop whose condition is the differentiated value itself (Warp's while-loop grad)"""
    i = tk.index()
    v = x[i]
    while v > tol:
        v = v * 0.5 + 0.01 * x[i] * x[i]
    s = 0.0
    k = 0
    while True:
        s += v * float(k + 1)
        k += 1
        if k >= 3:
            break
    out[i] = s


def test_while_loops_with_data_dependent_conditions_and_while_true(be):
    x = np.array([0.05, 0.5, 1.7, 2.2, 0.9])      # fixed points 0.02 x^2 below tol; no trip count near a jump
    fn = lambda o, x_: converge(be)(o, x_, 0.2, ndrange=5)  # noqa: E731
    check_reverse(be, fn, [np.zeros(5), x], {0: RNG.standard_normal(5)}, wrt=[1])
    check_forward(be, fn, [np.zeros(5), x], {1: RNG.standard_normal(5)}, outs=[0])


@tk.func
def pair(a, b):
    return a * b, a - b * b


@tk.kernel
def func_twice(out, x: tk.Const, y: tk.Const, w):
    i = tk.index()
    p, q = pair(x[i], y[i])
    r, s = pair(q, p * w)
    out[i] = r + s * s + pair(w, x[i])[1]


def test_a_func_called_twice_with_tuple_returns(be):
    x, y = RNG.standard_normal(5), RNG.standard_normal(5)
    fn = lambda o, x_, y_, w: func_twice(be)(o, x_, y_, w, ndrange=5)  # noqa: E731
    check_reverse(be, fn, [np.zeros(5), x, y, 0.6], {0: RNG.standard_normal(5)}, wrt=[1, 2], active=[3])
    check_forward(be, fn, [np.zeros(5), x, y, 0.6], {1: RNG.standard_normal(5), 2: RNG.standard_normal(5)},
                  outs=[0])


# --- local memory over several phases ---------------------------------------------------------

@tk.kernel
def phases(out, x: tk.Const):
    a = tk.localmem(x.dtype, 8)
    b = tk.localmem(x.dtype, 8)
    l = tk.index(tk.Local, tk.Linear)
    i = tk.index()
    a[l] = x[i] * x[i]
    tk.synchronize()
    b[l] = a[(l + 1) % 8] * a[l] + math.sin(a[7 - l])
    tk.synchronize()
    a[l] = b[7 - l] * x[i] + a[l]
    tk.synchronize()
    for k in range(2):
        b[l] = b[l] * a[(l + k + 3) % 8]
        tk.synchronize()
    out[i] = b[l] + a[(l + 2) % 8]


def test_local_memory_rewritten_over_several_barrier_phases(be):
    x = RNG.uniform(-1, 1, 16)
    fn = lambda o, x_: phases(be, 8)(o, x_, ndrange=16)  # noqa: E731
    check_reverse(be, fn, [np.zeros(16), x], {0: RNG.standard_normal(16)}, wrt=[1])
    check_forward(be, fn, [np.zeros(16), x], {1: RNG.standard_normal(16)}, outs=[0])


# --- int casts, overwritten values, several launches -------------------------------------------

@tk.kernel
def int_casts(out, x: tk.Const, t: tk.Const):
    i = tk.index()
    k = int(x[i] * 2.0 + 4.0)
    f = float(k) * x[i]
    out[i] = f + t[k] * x[i] + float(x[i]) * 0.5 + float(int(t[i])) * t[i]


def test_int_casts_inside_differentiated_code(be):
    """int(x) is piecewise constant (zero gradient) and a data-dependent index into t"""
    x = np.array([0.3, -0.8, 1.1, 0.45, -1.6, 0.1])     # away from int()'s jumps
    t = np.array([1.5, -2.25, 0.5, 3.75, 2.3, -1.4, 0.25, 4.5, 1.2])     # no integers: int()'s jumps
    fn = lambda o, x_, t_: int_casts(be)(o, x_, t_, ndrange=6)  # noqa: E731
    check_reverse(be, fn, [np.zeros(6), x, t], {0: RNG.standard_normal(6)}, wrt=[1, 2])
    check_forward(be, fn, [np.zeros(6), x, t], {1: RNG.standard_normal(6), 2: RNG.standard_normal(9)}, outs=[0])


@tk.kernel
def overwrite_twice(a, x: tk.Const, n):
    i = tk.index()
    a[i] = a[i] * a[i] + x[i]
    a[i] = math.sin(a[i]) * x[i]
    v = a[i]
    for k in range(n):
        v = v * x[i] + math.cos(v)
        v = v - 0.1 * v * v
    a[i] = v


def test_an_element_and_a_local_overwritten_repeatedly(be):
    a, x = RNG.uniform(-1, 1, 5), RNG.uniform(-1, 1, 5)
    fn = lambda a_, x_: overwrite_twice(be)(a_, x_, 3, ndrange=5)  # noqa: E731
    check_reverse(be, fn, [a, x], {0: RNG.standard_normal(5)}, wrt=[0, 1])
    check_forward(be, fn, [a, x], {0: RNG.standard_normal(5), 1: RNG.standard_normal(5)}, outs=[0])


@tk.kernel
def axpy(y, x: tk.Const, s):
    i = tk.index()
    y[i] += s * x[i] * x[i]


def test_one_kernel_launched_twice_into_the_same_output_on_a_stream(be):
    """y += s x^2 twice (once on a stream, once on the default queue): the shadows of x and
    the scalar gradient collect both launches"""
    x = RNG.standard_normal(9)
    st = be.stream()

    def fn(y, x_, s):
        axpy(be)(y, x_, s, ndrange=9, stream=st)
        st.synchronize()                 # (else the two launches race on y)
        axpy(be)(y, x_, s, ndrange=9)
    sh, (ds,) = check_reverse(be, fn, [RNG.standard_normal(9), x, 0.7], {0: RNG.standard_normal(9)}, wrt=[0, 1],
                              active=[2])
    check_forward(be, fn, [RNG.standard_normal(9), x, 0.7], {0: RNG.standard_normal(9), 1: RNG.standard_normal(9)},
                  outs=[0])


# --- SPEC 8: random numbers ----------------------------------------------------------------------

@tk.kernel
def draw_all(U, N, B, W, key, base):
    i = tk.index()
    c = base + i
    U[i] = tk.random.uniform(key, c)
    N[i] = tk.random.normal(key, c)
    B[i] = tk.random.bits(key, c)
    a, b, cc, d = tk.random.philox4x32(i, 7, 0, 0, 3, 5)
    W[i] = a ^ b ^ cc ^ d


RAND_BACKENDS = backend_params('CPU', 'INTERP', 'CL', 'WEBGPU', 'CUDA')


@pytest.mark.parametrize("devname", RAND_BACKENDS)
def test_draws_match_the_host_past_32_bit_counters_and_for_split_keys(devname):
    """counters >= 2**32 use the high counter word (Random123's c1), split keys draw other
    streams; bits/uniform/philox are the host's bit for bit everywhere, normal too where the
    backend has float64 (else to float32 rounding of libm, docs/language.md)"""
    b = tk.backend(devname)
    n = 512
    for key in [tk.random.key(3)] + list(tk.random.split(tk.random.key(3), 2)):
        # WGSL has no 64-bit integers: counters there stay below 2**31 (a CompileError otherwise)
        for base in (0, 2**31 - 1000) if devname == "WEBGPU" else (0, 2**32 - 100, 2**40 + 3):
            U, N = tk.zeros(n, tk.float32, backend=b), tk.zeros(n, tk.float32, backend=b)
            B, W = tk.zeros(n, tk.uint32, backend=b), tk.zeros(n, tk.uint32, backend=b)
            draw_all(b)(U, N, B, W, key, base, ndrange=n).wait()
            c = np.arange(n, dtype=np.uint64) + np.uint64(base)
            assert np.array_equal(B.numpy(), tk.random.bits(key, c))
            assert np.array_equal(U.numpy(), tk.random.uniform(key, c))
            words = tk.random.philox4x32(np.arange(n), 7, 0, 0, 3, 5)
            assert np.array_equal(W.numpy(), words[0] ^ words[1] ^ words[2] ^ words[3])
            if b.supports_float64:
                assert np.array_equal(N.numpy(), tk.random.normal(key, c))
            else:
                np.testing.assert_allclose(N.numpy(), tk.random.normal(key, c), rtol=1e-5, atol=1e-5)


def test_uniform_stays_below_one_and_normal_has_standard_moments():
    """Numba test_random style: the largest word gives the largest float below 1.0 (never 1.0,
    as a float32 division of a 32-bit word would round to), and 2**20 normals have mean 0,
    variance 1, skewness 0 and kurtosis 3 within their sampling error"""
    assert float(np.float32(0xFFFFFF00 >> 8) * np.float32(2.0 ** -24)) == 1.0 - 2.0 ** -24
    k = tk.random.key(99)
    u = tk.random.uniform(k, np.arange(2**20))
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 4 * (1 / 12 / 2**20) ** .5
    z = tk.random.normal(k, np.arange(2**20)).astype(np.float64)
    se = 2**-10
    assert abs(z.mean()) < 5 * se and abs(z.var() - 1) < 5 * 2**.5 * se
    assert abs(((z - z.mean()) ** 3).mean()) < 5 * 6**.5 * se
    assert abs(((z - z.mean()) ** 4).mean() - 3) < 5 * 24**.5 * se
    a, b = tk.random.split(k, 2)
    assert abs(np.corrcoef(tk.random.normal(a, np.arange(4096)), tk.random.normal(b, np.arange(4096)))[0, 1]) < 0.07


@pytest.mark.parametrize("case", ["trip_counts", "func_twice", "phases", "overwrite"])
def test_forward_and_reverse_mode_are_transposes(be, case):
    """<s, J t> == <J^T s, t> for the kernels above (exact up to rounding: no finite differences)"""
    x = RNG.uniform(-1, 1, 16)
    fn, args, outs, ins = {
        "trip_counts": (lambda o, x_, c: data_trip_counts(be)(o, x_, c, ndrange=16),
                        [np.zeros(16), x, (np.arange(16) % 7).astype(np.int32)], [0], [1]),
        "func_twice": (lambda o, x_, y, w: func_twice(be)(o, x_, y, w, ndrange=16),
                       [np.zeros(16), x, x[::-1].copy(), 0.3], [0], [1, 2]),
        "phases": (lambda o, x_: phases(be, 8)(o, x_, ndrange=16), [np.zeros(16), x], [0], [1]),
        "overwrite": (lambda a, x_: overwrite_twice(be)(a, x_, 3, ndrange=16), [x[::-1].copy(), x], [0], [0, 1]),
    }[case]
    jv, vj = jvp_vjp(be, fn, args, outs, ins)
    np.testing.assert_allclose(jv, vj, rtol=1e-9 if be.supports_float64 else 1e-4)


@tk.kernel
def edge_math(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    o[i, 0] = math.sqrt(x[i])
    o[i, 1] = math.log(x[i])
    o[i, 2] = math.fmod(x[i], y[i])
    o[i, 3] = math.copysign(x[i], y[i])
    o[i, 4] = math.atan2(x[i], y[i])
    o[i, 5] = math.hypot(x[i], y[i])
    o[i, 6] = x[i] ** y[i]


def test_sqrt_log_fmod_copysign_atan2_hypot_pow_at_zero_in_both_modes(be):
    """sqrt and log at 0 give inf, fmod's d/dy is -trunc(x / y), copysign at 0 gives 0, atan2 and
    hypot at (0, 0) give 0 (docs/autodiff.md), 0 ** negative gives -inf in both slots (PyTorch's
    pow backward); the tangent along (1, 1) is d/dx + d/dy, the same numbers in forward mode"""
    x, y = np.array([0.0, 0.0, 2.5]), np.array([0.0, -1.5, 0.7])
    r2 = np.where(x * x + y * y > 0, x * x + y * y, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        want_dx = np.stack([0.5 / np.sqrt(x), 1 / x, np.ones(3), np.where(x == 0, 0.0, np.sign(x) * np.sign(y)),
                            y / r2, x / np.sqrt(r2), np.where(y == 0, 0.0, y * x ** (y - 1))], 1)
        want_dy = np.stack([0 * x, 0 * x, -np.trunc(x / y), 0 * x, -x / r2, np.where(r2 > 0, y, 0) / np.sqrt(r2) *
                            (x * x + y * y > 0), np.where(x > 0, np.log(np.where(x > 0, x, 1)) * x ** y,
                                                          np.where(y >= 0, 0.0, -np.inf))], 1)
    rtol = 1e-12 if be.supports_float64 else 1e-6
    for col in range(7):
        seed = np.zeros((3, 7))
        seed[:, col] = 1.0
        dx, dy = dev(np.zeros(3), be), dev(np.zeros(3), be)
        fn = lambda o, a, c: edge_math(be)(o, a, c, ndrange=3)  # noqa: E731
        tk.autodiff(tk.Reverse, fn, tk.Duplicated(dev(np.zeros((3, 7)), be), dev(seed, be)),
                    tk.Duplicated(dev(x, be), dx), tk.Duplicated(dev(y, be), dy))
        np.testing.assert_allclose(host(dx), want_dx[:, col], rtol=rtol, err_msg=f"d/dx column {col}")
        np.testing.assert_allclose(host(dy), want_dy[:, col], rtol=rtol, err_msg=f"d/dy column {col}")
        do = dev(np.zeros((3, 7)), be)
        tk.autodiff(tk.Forward, fn, tk.Duplicated(dev(np.zeros((3, 7)), be), do),
                    tk.Duplicated(dev(x, be), dev(np.ones(3), be)), tk.Duplicated(dev(y, be), dev(np.ones(3), be)))
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(host(do)[:, col], want_dx[:, col] + want_dy[:, col], rtol=rtol,
                                       err_msg=f"tangent of column {col}")
