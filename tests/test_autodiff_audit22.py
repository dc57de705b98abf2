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
NARROW_IDS = ["float16", "bfloat16", "e4m3fn", "e5m2"]


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    return tk.backend(request.param)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL'), scope="module")
def bcl(request):
    return tk.backend(request.param)


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


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_an_element_read_many_times_gets_the_whole_gradient(bcl, dt):
    """d/dx of sum_k x over 1000 trips is 1000 (exact in both types); the bfloat16 gradient was
    256 and a float16 one stalls at 2048 the same way (here 3000 trips)."""
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


@pytest.mark.parametrize("dt", NARROW, ids=NARROW_IDS)
def test_a_narrow_gradient_is_rounded_once(be, dt):
    """x[i] read twice and through a local used twice: the gradient is the float32 sum of the
    contributions rounded once to the shadow's dtype, added to what the shadow held. Each
    contribution was rounded to the narrow type before it was added (off by an ulp in
    float16 and bfloat16, by 0.125 at 0.75 in e5m2)."""
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


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_a_narrow_array_read_by_several_items_differentiates(bcl, dt):
    """w[k] is read by every item and x[idx[i], k] gathers rows: refused until adx22 (the
    narrow shadow had no atomics); now float32 atomics on the float32 copy. Against the float64
    gradient of the same (rounded) inputs; forward mode too."""
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


def test_tk_adjoint_with_float16_shadows_accumulates_into_them(be):
    """tk.adjoint launched by hand with float16 shadows: the float32 copy starts from the
    shadow's values, the output's seed is consumed (zeroed), the input's gradient added."""
    if not _supports(be, np.float16):
        pytest.skip("no float16 on this backend")
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
