"""Autodiff audit adx22: gradients of narrow float arrays (float16, bfloat16, fp8), and the
by-hand audit's cases (a user porting from Warp / Enzyme / JAX) kept as regressions.

Narrow shadows: until adx22 the adjoint accumulated a narrow array's gradient in its own
dtype, rounding at every contribution: a bfloat16 element read 1000 times in a loop got the
gradient 256 (256 + 1 rounds back to 256 in bfloat16), on every backend, and a few reads of
one element were an ulp or more off (fp8: 0.875 where the gradient rounds to 0.75). The
adjoint now accumulates in float32 (``passes.autodiff.shadow_dtype``/``adjoint_ty``) and the
launcher rounds into the caller's shadow once; a narrow array read by several work items,
refused until then (no float16 atomics), takes float32 atomics on that copy."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, put
from test_ported_autodiff import check_forward, check_reverse

ml_dtypes = pytest.importorskip("ml_dtypes")
NARROW = [np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    return tk.backend(request.param)


def cases(*pairs):
    """pytest parameters (backend DEV string, dtype), skipped where the backend is missing: the
    fix is in the IR and the launcher, so every dtype runs on the CPU and one elsewhere."""
    out = []
    for dev, dt in pairs:
        (bp,) = backend_params(dev)
        out.append(pytest.param(dev, dt, id=f"{dev}-{np.dtype(dt).name}", marks=bp.marks))
    return out


def _supports(be, dt) -> bool:
    t = {np.dtype(np.float16): tk.float16, np.dtype(ml_dtypes.bfloat16): tk.bfloat16,
         np.dtype(ml_dtypes.float8_e4m3fn): tk.float8_e4m3fn, np.dtype(ml_dtypes.float8_e5m2): tk.float8_e5m2}
    return be.supports(t[np.dtype(dt)])


# --- narrow shadows --------------------------------------------------------------------------

@tk.kernel
def read_often(y, x: tk.Const, n: int):
    i = tk.index()
    acc = tk.float32(0.0)
    for k in range(n):
        acc += x[i] * 1.0
    y[i] = acc


@tk.kernel
def read_often_row(y, x: tk.Const, n: int):
    i = tk.index()
    acc = tk.float32(0.0)
    for k in range(n):
        acc += x[i, 1] * 1.0
    y[i] = acc


@pytest.mark.parametrize("dev,dt", cases(("CPU", np.float16), ("CPU", ml_dtypes.bfloat16),
                                          ("INTERP", ml_dtypes.bfloat16), ("CL", ml_dtypes.bfloat16)))
def test_an_element_read_many_times_gets_the_whole_gradient(dev, dt):
    """d/dx of sum_k x over 1000 trips is 1000 (exact in both types); the bfloat16 gradient was
    256 and a float16 one stalls at 2048 the same way (here 3000 trips)."""
    bcl = tk.backend(dev)
    if not _supports(bcl, dt):
        pytest.skip(f"no {np.dtype(dt).name} on this backend")
    n = 3000 if dt == np.float16 else 1000
    for k, shape in ((read_often, (4,)), (read_often_row, (4, 2))):
        dx = put(bcl, np.zeros(shape, dt))
        tk.autodiff(tk.Reverse, lambda y, x_: k(bcl)(y, x_, n, ndrange=4),
                    tk.Duplicated(put(bcl, np.zeros(4, np.float32)), put(bcl, np.ones(4, np.float32))),
                    tk.Duplicated(put(bcl, np.ones(shape, dt)), dx))
        want = np.full(4, float(n)) if len(shape) == 1 else np.array([[0.0, n]] * 4)
        np.testing.assert_array_equal(get(dx).astype(np.float64), want)


@tk.kernel
def two_reads(y, x: tk.Const, w: tk.Const, s: float):
    i = tk.index()
    v = x[i]
    y[i] = v * w[i] * s + math.sin(x[i]) * 0.5 + v * v


@pytest.mark.parametrize("dev,dt", cases(*[("CPU", t) for t in NARROW], ("INTERP", ml_dtypes.bfloat16)))
def test_a_narrow_gradient_is_rounded_once(dev, dt):
    """x[i] read twice and through a local used twice: the gradient is the float32 sum of the
    contributions rounded once to the shadow's dtype, added to what the shadow held. Each
    contribution was rounded to the narrow type before it was added (off by an ulp in
    float16 and bfloat16, by 0.125 at 0.75 in e5m2)."""
    be = tk.backend(dev)
    if not _supports(be, dt):
        pytest.skip(f"no {np.dtype(dt).name} on this backend")
    rng = np.random.default_rng(2201)
    n = 64
    x = rng.uniform(-1, 1, n).astype(dt)
    w = rng.standard_normal(n)
    before = rng.uniform(-1, 1, n).astype(dt)
    dx = before.copy()
    tk.autodiff(tk.Reverse, lambda y, x_, w_: two_reads(be)(y, x_, w_, 0.6, ndrange=n),
                tk.Duplicated(np.zeros(n), np.ones(n)), tk.Duplicated(x, dx), tk.Const(w))
    xs = x.astype(np.float64)
    grad = w * 0.6 + np.cos(xs.astype(np.float32)).astype(np.float64) * 0.5 + 2 * xs
    want = (before.astype(np.float64) + grad).astype(np.float32).astype(dt).astype(np.float64)
    got = dx.astype(np.float64)
    # float32 sums in another order than NumPy's: equal but where the exact sum lies next to a
    # rounding boundary of the narrow type (then one ulp of it)
    ulp = np.abs(want) * {2: 2.0 ** -10, 1: 2.0 ** -3}[np.dtype(dt).itemsize] if np.dtype(dt) != ml_dtypes.bfloat16 \
        else np.abs(want) * 2.0 ** -7
    if np.dtype(dt) == ml_dtypes.float8_e5m2:
        ulp = np.abs(want) * 2.0 ** -2
    assert np.mean(got == want) > 0.9
    assert np.all(np.abs(got - want) <= ulp + 1e-12)


@tk.kernel
def shared_weight(y, x: tk.Const, w: tk.Const, idx: tk.Const, n: int):
    i = tk.index()
    acc = tk.float32(0.0)
    for k in range(n):
        acc += x[i, k] * w[k] + x[idx[i], k] * 0.5
    y[i] = acc * acc


@pytest.mark.parametrize("dev,dt", cases(("CPU", np.float16), ("CPU", ml_dtypes.bfloat16), ("CL", np.float16)))
def test_a_narrow_array_read_by_several_items_differentiates(dev, dt):
    """w[k] is read by every item and x[idx[i], k] gathers rows: refused until adx22 (the
    narrow shadow had no atomics); now float32 atomics on the float32 copy. Against the float64
    gradient of the same (rounded) inputs."""
    bcl = tk.backend(dev)
    if not _supports(bcl, dt):
        pytest.skip(f"no {np.dtype(dt).name} on this backend")
    rng = np.random.default_rng(2202)
    n, m = 6, 4
    x = rng.uniform(-1, 1, (n, m)).astype(dt)
    w = rng.uniform(-1, 1, m).astype(dt)
    idx = np.array([0, 0, 3, 5, 5, 5], np.int32)
    seed = rng.standard_normal(n).astype(np.float32)
    dx, dw = put(bcl, np.zeros((n, m), dt)), put(bcl, np.zeros(m, dt))
    tk.autodiff(tk.Reverse, lambda y, x_, w_: shared_weight(bcl)(y, x_, w_, put(bcl, idx), m, ndrange=n),
                tk.Duplicated(put(bcl, np.zeros(n, np.float32)), put(bcl, seed)),
                tk.Duplicated(put(bcl, x), dx), tk.Duplicated(put(bcl, w), dw))
    xs, ws, sd = x.astype(np.float64), w.astype(np.float64), seed.astype(np.float64)
    acc = xs @ ws + 0.5 * xs[idx].sum(1)
    g = 2 * acc * sd
    want_x = np.outer(g, ws)
    np.add.at(want_x, idx, 0.5 * g[:, None])
    want_w = xs.T @ g
    tol = 2 ** -7 if dt == ml_dtypes.bfloat16 else 2 ** -10
    np.testing.assert_allclose(get(dx).astype(np.float64), want_x, rtol=2 * tol, atol=2 * tol * np.abs(want_x).max())
    np.testing.assert_allclose(get(dw).astype(np.float64), want_w, rtol=2 * tol, atol=2 * tol * np.abs(want_w).max())


@pytest.mark.skipif(not tk.CPU.available()[0], reason="no C compiler for the CPU backend")
def test_tk_adjoint_with_float16_shadows_accumulates_into_them():
    """tk.adjoint launched by hand with float16 shadows: the float32 copy starts from the
    shadow's values, the output's seed is consumed (zeroed), the input's gradient added."""
    be = tk.CPU()
    x = np.array([0.5, -1.0, 2.0, 0.25], np.float16)
    dx = np.array([1.0, 2.0, -1.0, 0.5], np.float16)
    y, dy = np.zeros(4, np.float16), np.array([1.0, 0.5, 2.0, -1.0], np.float16)
    w = np.ones(4)
    tk.adjoint(two_reads)(be)(y, dy, x, dx, w, np.zeros(4), 1.0, np.zeros(1), ndrange=4)
    xs = x.astype(np.float64)
    grad = (1.0 + np.cos(xs.astype(np.float32)).astype(np.float64) * 0.5 + 2 * xs) * np.array([1.0, 0.5, 2.0, -1.0])
    want = (np.array([1.0, 2.0, -1.0, 0.5]) + grad).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=2 ** -10)
    np.testing.assert_array_equal(dy, np.zeros(4, np.float16))


@tk.kernel
def scaled_copy(y, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[i, j] = x[i, j] * 1.0


@pytest.mark.parametrize("dev,dt", cases(("CPU", ml_dtypes.bfloat16), ("CPU", np.float16), ("CPU", np.float32),
                                          ("CL", ml_dtypes.bfloat16)))
def test_a_broadcast_copy_sums_its_gradient_in_float64(dev, dt):
    """tk.copyto(tmp, row) broadcasts a (1, 4) row over 3000 rows: the row's gradient is the sum
    of the 3000 rows' gradients, rounded once. NumPy summed the bfloat16 shadow in bfloat16 (256
    where the sum is about 1500; float16 a few ulps off, float32 about 1e-3)."""
    be = tk.backend(dev)
    if np.dtype(dt).itemsize < 4 and not _supports(be, dt):
        pytest.skip(f"no {np.dtype(dt).name} on this backend")
    rng = np.random.default_rng(2207)
    rows = 3000
    seed = rng.uniform(0, 1, (rows, 4)).astype(np.float32)
    tmp = put(be, np.zeros((rows, 4), dt))
    dsrc = put(be, np.zeros((1, 4), dt))

    def fn(y, src):
        tk.copyto(tmp, src)
        scaled_copy(be)(y, tmp, ndrange=(rows, 4))
    tk.autodiff(tk.Reverse, fn, tk.Duplicated(put(be, np.zeros((rows, 4), np.float32)), put(be, seed)),
                tk.Duplicated(put(be, np.ones((1, 4), dt)), dsrc))
    want = seed.astype(np.float64).sum(0, keepdims=True).astype(dt)
    np.testing.assert_array_equal(get(dsrc), want)


@tk.kernel
def two_params(y, a: tk.Const, b: tk.Const, n: int):
    i = tk.index()
    acc = tk.float32(0.0)
    for k in range(n):
        acc += a[i] * 1.0 + b[i] * 0.5
    y[i] = acc


@pytest.mark.skipif(not tk.CPU.available()[0], reason="no C compiler for the CPU backend")
def test_a_narrow_array_passed_to_two_parameters():
    """The second parameter's shadow (a zero shadow of its own, added in after the launch) is
    float32 for a narrow array, and the sum is rounded once: 1000 * 1 + 1000 * 0.5."""
    be = tk.CPU()
    for dt in (np.float16, ml_dtypes.bfloat16):
        x, dx = np.ones(4, dt), np.zeros(4, dt)
        tk.autodiff(tk.Reverse, lambda y, x_: two_params(be)(y, x_, x_, 1000, ndrange=4),
                    tk.Duplicated(np.zeros(4, np.float32), np.ones(4, np.float32)), tk.Duplicated(x, dx))
        np.testing.assert_array_equal(dx, np.full(4, 1500.0).astype(dt))


@tk.kernel
def private_half(y, x: tk.Const, n: int):
    i = tk.index()
    p = tk.private(tk.float16, 4)
    for k in range(4):
        p[k] = x[i] * float(k + 1)
    acc = tk.float32(0.0)
    for k in range(n):
        acc += p[k % 4] * 0.5
        p[(k + 1) % 4] = p[k % 4] * 0.5 + p[(k + 1) % 4] * 0.5
    y[i] = acc


@pytest.mark.skipif(not tk.CPU.available()[0], reason="no C compiler for the CPU backend")
def test_a_float16_private_array_in_a_long_loop():
    """The shadow of a float16 tk.private is float32 too: the recurrence is linear in x, so the
    gradient is its value at x = 1 in exact arithmetic, 659.32 (659.21875 with the shadow in
    float16, until adx22)."""
    p, acc = [1.0, 2.0, 3.0, 4.0], 0.0
    for k in range(600):
        acc += p[k % 4] * 0.5
        p[(k + 1) % 4] = p[k % 4] * 0.5 + p[(k + 1) % 4] * 0.5
    dx = np.zeros(4)
    tk.autodiff(tk.Reverse, lambda y, x_: private_half(tk.CPU())(y, x_, 600, ndrange=4),
                tk.Duplicated(np.zeros(4, np.float32), np.ones(4, np.float32)),
                tk.Duplicated(np.array([0.5, 0.25, 1.0, 0.75]), dx))
    np.testing.assert_allclose(dx, acc, rtol=1e-6)


# --- the by-hand audit's cases (both modes against float64 central differences) --------------

def both_modes(be, fn, args, seeds, wrt, active=(), seed=0):
    dtypes = {k: a.dtype for k, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "i"}
    res = check_reverse(be, fn, args, seeds, wrt=wrt, active=active, dtypes=dtypes)
    rng = np.random.default_rng(seed)
    check_forward(be, fn, args, {k: rng.standard_normal(args[k].shape) for k in wrt}, outs=list(seeds), dtypes=dtypes)
    return res


@tk.kernel
def while_nested_break(y, x: tk.Const, lim: tk.Const):
    i = tk.index()
    acc = x[i]
    k = 0
    while True:
        j = 0
        while j < 4:
            acc = acc * 1.1 + x[i] * 0.1
            j += 1
            if acc > lim[i]:
                break
        k += 1
        if acc > lim[i] or k > 5:
            break
        if k % 2 == 0:
            continue
        acc = acc + math.sin(x[i])
    y[i] = acc


@tk.kernel
def loop_early_return(y, x: tk.Const, nb: tk.Const, m: int):
    i = tk.index()
    acc = 1.0
    for a in range(nb[i]):
        for b in range(a, m):
            acc = acc * 0.9 + x[i, b] * math.sin(x[i, a])
            if acc > 2.5:
                y[i] = acc * acc
                return
    y[i] = -acc


def test_data_dependent_loops_with_break_continue_and_return(be):
    rng = np.random.default_rng(2203)
    x = rng.random(6) + 0.1
    lim = np.array([1.0, 2.0, 3.0, 5.0, 0.5, 8.0])
    both_modes(be, lambda y, x_, l_: while_nested_break(be)(y, x_, l_, ndrange=6),
               [np.zeros(6), x, lim], {0: rng.standard_normal(6)}, wrt=[1])
    x2 = rng.random((6, 5)) * 1.2
    nb = np.array([0, 1, 2, 3, 4, 5], np.int32)
    both_modes(be, lambda y, x_, n_: loop_early_return(be)(y, x_, n_, 5, ndrange=6),
               [np.zeros(6), x2, nb], {0: rng.standard_normal(6)}, wrt=[1])


@tk.kernel
def ties(y, x: tk.Const, z: tk.Const):
    i = tk.index()
    y[i] = (max(x[i], z[i]) * 3.0 + min(x[i], z[i]) * 5.0 + abs(x[i] - z[i])
            + tk.clamp(x[i], 0.0, z[i]) * 7.0 + abs(x[i]) * 11.0)


def test_ties_follow_the_documented_conventions(be):
    """docs/autodiff.md, edge points: max/min share a tie, abs' is 0 at 0, clamp gives x all
    at a bound (lo == hi == x included); forward mode uses the same partials."""
    x = np.array([0.5, 0.0, 0.0, 0.2])
    z = np.array([0.5, 0.0, 0.4, 0.3])
    dx, dz = np.zeros(4), np.zeros(4)
    tk.autodiff(tk.Reverse, lambda y, a, b: ties(be)(y, a, b, ndrange=4),
                tk.Duplicated(np.zeros(4), np.ones(4)), tk.Duplicated(x.copy(), dx), tk.Duplicated(z.copy(), dz))
    # x == z == 0.5: 1.5 + 2.5 + 0 + 7 (x at hi) + 11; x == z == 0: the same but abs(0)' = 0;
    # x = 0 < z: min all to x, abs(x - z)' = -1, clamp at lo: 7; no tie at 0.2 < 0.3
    np.testing.assert_array_equal(dx, [22.0, 11.0, 5.0 - 1.0 + 7.0, 5.0 - 1.0 + 7.0 + 11.0])
    np.testing.assert_array_equal(dz, [4.0, 4.0, 3.0 + 1.0, 3.0 + 1.0])
    for t in ((np.ones(4), np.zeros(4)), (np.zeros(4), np.ones(4))):
        ty = np.zeros(4)
        tk.autodiff(tk.Forward, lambda y, a, b: ties(be)(y, a, b, ndrange=4),
                    tk.Duplicated(np.zeros(4), ty), tk.Duplicated(x.copy(), t[0].copy()), tk.Duplicated(z.copy(), t[1].copy()))
        np.testing.assert_array_equal(ty, dx if t[0][0] else dz)


@tk.kernel
def linear_and_cartesian(y, x: tk.Const):
    p = tk.index()
    (c,) = tk.index(tk.Global, tk.Cartesian)
    y[p] = x[c + 1] * x[c - 1] + math.sin(x[c]) * x[p]


def test_linear_and_cartesian_indices_of_a_range_launch(be):
    """tk.index() is the 0-based position, the Cartesian index the absolute coordinate: x[c]
    and x[p] are other elements in a range launch (neither the gather form nor a plain add
    may take them for the same one)."""
    rng = np.random.default_rng(2204)
    for r in (range(2, 8), range(1, 9, 3)):
        both_modes(be, lambda y, x_: linear_and_cartesian(be)(y, x_, ndrange=r),
                   [np.zeros(10), rng.standard_normal(10)], {0: rng.standard_normal(10)}, wrt=[1])


@tk.kernel
def jacobi_local(y, x: tk.Const, n: int, s: float):
    i = tk.index()
    l = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float64, 8)
    buf[l] = x[i]
    tk.synchronize()
    for it in range(n):
        left = buf[l - 1] if l > 0 else 0.0
        right = buf[l + 1] if l < 7 else 0.0
        t = math.sin(left) * right + buf[l] * s
        tk.synchronize()
        buf[l] = t * buf[l] + x[i]
        tk.synchronize()
    y[i] = buf[l] * buf[7 - l]


def test_local_memory_overwritten_in_a_loop_with_barriers(be):
    rng = np.random.default_rng(2205)
    both_modes(be, lambda y, x_, s: jacobi_local(be, 8)(y, x_, 3, s, ndrange=16),
               [np.zeros(16), rng.standard_normal(16) * 0.5, 0.5], {0: rng.standard_normal(16)}, wrt=[1], active=[2])


@tk.kernel
def private_scatter(y, x: tk.Const):
    i = tk.index()
    p = tk.private(tk.float64, 4)
    for k in range(4):
        p[k] = 0.0
    for k in range(6):
        j = int(x[i] * 7.0 + float(k)) % 4
        p[j] = p[j] + x[i] * float(k + 1)
        p[(j + 1) % 4] = p[j] * p[(j + 1) % 4] * 0.5 + 1.0
    y[i] = p[0] + p[1] * 2.0 + p[2] * 3.0 + p[3] * 4.0


def test_a_private_array_at_loaded_indices(be):
    """A private array indexed by a value computed from the data (tape of its overwritten
    elements in a loop)."""
    rng = np.random.default_rng(2206)
    x = np.array([0.03, 0.2, 0.33, 0.55, 0.71, 0.9])
    both_modes(be, lambda y, x_: private_scatter(be)(y, x_, ndrange=6), [np.zeros(6), x], {0: rng.standard_normal(6)},
               wrt=[1])
