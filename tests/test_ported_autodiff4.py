"""Fourth autodiff audit (SPEC 7, adx19): programs in the manner of Enzyme's integration tests
(insertion sort, a Taylor series, read-write-read of one element), Taichi's test_ad_*.py (a
Fibonacci recurrence with tuple swaps, frac, mutable locals in nested ifs, local accumulators
flushed with atomics, integer powers by repeated products) and NVIDIA Warp's test_grad*.py
(select with a poisoned unselected operand, 3-vector and 3x3 matrix math in @tk.func chains,
running max/min in a loop, an early return inside a loop of a func, integer casts in the
middle of a chain). Every gradient and tangent against float64 central differences of the
primal program (float32 with looser tolerances on WebGPU), on CPU, INTERP, INTERP:CHECK, CL and
WEBGPU."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, host  # noqa: F401
from test_ported_autodiff import check_forward, check_reverse

RNG = np.random.default_rng(4019)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def both_modes(be, fn, args, seeds, wrt, active=(), tangents=None, outs=None):
    """Reverse mode for ``wrt`` (and the Active scalars) and forward mode along random tangents
    of ``wrt``, each against central differences (integer arrays keep their dtype)."""
    dtypes = {k: a.dtype for k, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "i"}
    res = check_reverse(be, fn, args, seeds, wrt=wrt, active=active, dtypes=dtypes)
    tangents = tangents or {k: RNG.standard_normal(args[k].shape) for k in wrt}
    check_forward(be, fn, args, tangents, outs=outs or list(seeds), dtypes=dtypes)
    return res


# --- Enzyme's integration tests -------------------------------------------------------------------

@tk.kernel
def taylor_log(out, x: tk.Const, n):
    """Enzyme's taylorlog: sum_{k=1}^{n} x^k / k with the power kept in a local multiplied each
    trip (-log(1 - x) for |x| < 1)."""
    i = tk.index()
    p = 1.0
    s = 0.0
    for k in range(1, n + 1):
        p = p * x[i]
        s += p / float(k)
    out[i] = s


def test_taylor_series_with_a_power_accumulator(be):
    x = np.array([0.1, -0.4, 0.65, 0.3, -0.8])
    fn = lambda o, x_: taylor_log(be)(o, x_, 12, ndrange=5)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(5), x], {0: np.ones(5)}, wrt=[1])
    # d/dx sum x^k / k = sum_{k<12} x^k = (1 - x^12) / (1 - x)
    np.testing.assert_allclose(host(sh[1]), (1 - x ** 12) / (1 - x), rtol=1e-5)


@tk.kernel
def insertion_sort(out, x: tk.Const, n: tk.constexpr):
    """Enzyme's insertsort: each item sorts its row in a private array (data-dependent swaps in a
    while loop, an early exit through the condition) and weighs the sorted values by rank."""
    i = tk.index()
    p = tk.private(x.dtype, n)
    for k in range(n):
        p[k] = x[i, k]
    for k in range(1, n):
        j = k
        while j > 0 and p[j - 1] > p[j]:
            t = p[j]
            p[j] = p[j - 1]
            p[j - 1] = t
            j -= 1
    s = 0.0
    for k in range(n):
        s += float(k + 1) * p[k] * p[k]
    out[i] = s


def test_insertion_sort_routes_each_gradient_through_the_rank(be):
    x = RNG.permutation(np.linspace(-1.7, 1.9, 18)).reshape(3, 6)   # distinct: no ties
    fn = lambda o, x_: insertion_sort(be)(o, x_, 6, ndrange=3)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(3), x], {0: np.ones(3)}, wrt=[1])
    rank = np.argsort(np.argsort(x, axis=1), axis=1) + 1
    np.testing.assert_allclose(host(sh[1]), 2 * rank * x, rtol=1e-5)


@tk.kernel
def read_write_read(a, out, b: tk.Const):
    """Enzyme's readwriteread: an element read, overwritten with a function of itself, read again
    and overwritten again, with a second output computed in between."""
    i = tk.index()
    a[i] = a[i] * a[i] + b[i]
    out[i] = a[i] * math.sin(b[i])
    a[i] = a[i] * out[i] + math.exp(a[i] * 0.25)


def test_read_write_read_of_one_element(be):
    a, b = RNG.uniform(-1, 1, 6), RNG.uniform(-1, 1, 6)
    fn = lambda a_, o, b_: read_write_read(be)(a_, o, b_, ndrange=6)  # noqa: E731
    both_modes(be, fn, [a, np.zeros(6), b], {0: RNG.standard_normal(6), 1: RNG.standard_normal(6)}, wrt=[0, 2])


# --- Taichi's test_ad_*.py -------------------------------------------------------------------------

@tk.kernel
def fibonacci(out, x: tk.Const, y: tk.Const, w, n):
    """Taichi's test_ad_fibonacci: a two-term recurrence through a tuple swap in a loop."""
    i = tk.index()
    a = x[i]
    b = y[i]
    for k in range(n):
        a, b = b, a + b * w
    out[i] = a * b


def test_fibonacci_recurrence_with_tuple_swaps(be):
    x, y = RNG.uniform(-1, 1, 5), RNG.uniform(-1, 1, 5)
    fn = lambda o, x_, y_, w: fibonacci(be)(o, x_, y_, w, 7, ndrange=5)  # noqa: E731
    both_modes(be, fn, [np.zeros(5), x, y, 0.9], {0: RNG.standard_normal(5)}, wrt=[1, 2], active=[3])


@tk.kernel
def frac_and_casts(out, x: tk.Const):
    """Taichi's test_ad_frac (x - floor(x) has gradient 1) and an int cast in the middle of a
    chain (a piecewise-constant factor: no gradient through it)."""
    i = tk.index()
    f = x[i] - math.floor(x[i])
    k = int(x[i] * 3.0 + 10.0)
    g = float(k % 4) + 0.5
    out[i] = f * f * g + math.sin(x[i] * g)


def test_frac_and_an_int_cast_mid_chain(be):
    x = np.array([0.31, -1.27, 2.55, 0.87, -0.42, 1.13])     # away from floor's and int's jumps
    fn = lambda o, x_: frac_and_casts(be)(o, x_, ndrange=6)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(6), x], {0: np.ones(6)}, wrt=[1])
    f = x - np.floor(x)
    g = ((x * 3 + 10).astype(int) % 4) + 0.5
    np.testing.assert_allclose(host(sh[1]), 2 * f * g + g * np.cos(x * g), rtol=1e-5)


@tk.kernel
def mutable_in_nested_ifs(out, x: tk.Const, y: tk.Const, n):
    """Taichi's test_ad_if_mutable / test_ad_if_nested: a local reassigned in both arms of nested
    ifs whose conditions read the local itself, inside a loop."""
    i = tk.index()
    v = x[i]
    for k in range(n):
        if v > 0.0:
            if v > y[i]:
                v = v * 0.5 - y[i]
            else:
                v = v * v + 0.25
        else:
            v = -v * y[i] + 0.1 * float(k)
    out[i] = v


def test_a_local_mutated_in_nested_ifs_inside_a_loop(be):
    x = np.array([0.9, -0.6, 0.37, 1.4, -1.1, 0.05])
    y = np.array([0.2, 0.7, -0.3, 0.55, 0.4, -0.9])
    fn = lambda o, x_, y_: mutable_in_nested_ifs(be)(o, x_, y_, 5, ndrange=6)  # noqa: E731
    both_modes(be, fn, [np.zeros(6), x, y], {0: RNG.standard_normal(6)}, wrt=[1, 2])


@tk.kernel
def local_sum_then_atomic(out, x: tk.Const, idx: tk.Const, w, n):
    """Taichi's test_ad_sum_local_atomic: a per-item local sum over a row, flushed into a shared
    bin with an atomic add (bins repeat), and an atomic into a total inside the loop."""
    i = tk.index()
    acc = 0.0
    for k in range(n):
        v = x[i, k] * w
        acc += v * v
        tk.atomic_add(out, 0, math.sin(v))
    tk.atomic_add(out, 1 + idx[i], acc)


def test_local_accumulators_flushed_with_atomics(be):
    x = RNG.uniform(-1, 1, (7, 4))
    idx = np.array([0, 2, 0, 1, 2, 2, 0], dtype=np.int32)
    fn = lambda o, x_, i_, w: local_sum_then_atomic(be)(o, x_, i_, w, 4, ndrange=7)  # noqa: E731
    both_modes(be, fn, [np.zeros(4), x, idx, 1.3], {0: RNG.standard_normal(4)}, wrt=[1], active=[3])


@tk.kernel
def int_power(out, x: tk.Const, n):
    """Taichi's test_ad_power: x^n as n products, and x^-n by division in the same loop."""
    i = tk.index()
    s = 1.0
    r = 1.0
    for k in range(n):
        s *= x[i]
        r /= x[i]
    out[i] = s + 0.5 * r


def test_integer_power_by_repeated_products(be):
    x = np.array([0.7, -1.2, 1.5, -0.55, 0.95])
    fn = lambda o, x_: int_power(be)(o, x_, 5, ndrange=5)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(5), x], {0: np.ones(5)}, wrt=[1])
    np.testing.assert_allclose(host(sh[1]), 5 * x ** 4 - 2.5 * x ** -6, rtol=1e-5)


# --- NVIDIA Warp's test_grad*.py -------------------------------------------------------------------

@tk.kernel
def poisoned_select(out, x: tk.Const):
    """Warp's select/where adjoint: the unselected operand is NaN or inf (sqrt or log of a
    negative number, an overflowing exp); the gradient must come from the selected one only."""
    i = tk.index()
    v = x[i]
    a = tk.select(v > 0.0, math.sqrt(v), v * v)
    b = math.log(v) if v > 0.0 else -v
    c = tk.select(v < 0.8, v * 3.0, math.log(v - 0.8) + 2.0)     # log of a negative below 0.8
    out[i] = a + b * c


def test_select_with_a_poisoned_unselected_operand(be):
    x = np.array([0.3, -0.7, 1.4, -0.05, 1.1, 2.0])    # log(v - 0.8) well away from its pole
    fn = lambda o, x_: poisoned_select(be)(o, x_, ndrange=6)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(6), x], {0: np.ones(6)}, wrt=[1])
    assert np.all(np.isfinite(host(sh[1])))


@tk.func
def dot3(ax, ay, az, bx, by, bz):
    return ax * bx + ay * by + az * bz


@tk.func
def cross3(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@tk.func
def normalize3(ax, ay, az):
    r = math.sqrt(dot3(ax, ay, az, ax, ay, az))
    return ax / r, ay / r, az / r


@tk.kernel
def vec3_math(out, a: tk.Const, b: tk.Const):
    """Warp's test_3d_math_grad / test_vector_math_grad: length of the cross product of a
    normalized vector with another, plus a dot product, through a chain of @tk.funcs."""
    i = tk.index()
    nx, ny, nz = normalize3(a[i, 0], a[i, 1], a[i, 2])
    cx, cy, cz = cross3(nx, ny, nz, b[i, 0], b[i, 1], b[i, 2])
    out[i] = math.sqrt(dot3(cx, cy, cz, cx, cy, cz)) + dot3(nx, ny, nz, b[i, 0], b[i, 1], b[i, 2]) ** 2


def test_vector_math_through_a_chain_of_funcs(be):
    a, b = RNG.uniform(-1, 1, (5, 3)), RNG.uniform(-1, 1, (5, 3))
    fn = lambda o, a_, b_: vec3_math(be)(o, a_, b_, ndrange=5)  # noqa: E731
    both_modes(be, fn, [np.zeros(5), a, b], {0: RNG.standard_normal(5)}, wrt=[1, 2])


@tk.func
def det2(a, b, c, d):
    return a * d - b * c


@tk.kernel
def mat33(out, m: tk.Const):
    """Warp's mat33 gradients: determinant by cofactors and one entry of the inverse (adjugate
    over determinant), each item its own 3x3 matrix."""
    i = tk.index()
    c00 = det2(m[i, 1, 1], m[i, 1, 2], m[i, 2, 1], m[i, 2, 2])
    c01 = -det2(m[i, 1, 0], m[i, 1, 2], m[i, 2, 0], m[i, 2, 2])
    c02 = det2(m[i, 1, 0], m[i, 1, 1], m[i, 2, 0], m[i, 2, 1])
    det = m[i, 0, 0] * c00 + m[i, 0, 1] * c01 + m[i, 0, 2] * c02
    inv10 = c01 / det                      # (adj M)[1][0] = cofactor (0, 1)
    out[i] = det * det + inv10


def test_determinant_and_inverse_of_3x3_matrices(be):
    m = RNG.uniform(-1, 1, (4, 3, 3)) + 2.0 * np.eye(3)     # well away from singular
    fn = lambda o, m_: mat33(be)(o, m_, ndrange=4)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(4), m], {0: np.ones(4)}, wrt=[1])
    det = np.linalg.det(m)
    inv = np.linalg.inv(m)
    # d det / dM = det M^-T; d inv[1,0] / dM_jk = -inv[1,j] inv[k,0]
    want = 2 * det[:, None, None] ** 2 * np.transpose(inv, (0, 2, 1)) - inv[:, 1, :, None] * inv[:, None, :, 0]
    np.testing.assert_allclose(host(sh[1]), want, rtol=1e-5, atol=1e-7)


@tk.kernel
def running_extrema(out, x: tk.Const, n):
    """Warp's max/min reductions in a loop: the running max and min of a row in locals; the
    gradient goes to the arg max and arg min alone."""
    i = tk.index()
    hi = x[i, 0]
    lo = x[i, 0]
    for k in range(1, n):
        hi = max(hi, x[i, k])
        lo = min(x[i, k], lo)
    out[i] = hi * hi - 2.0 * lo


def test_running_max_and_min_in_a_loop(be):
    x = RNG.permutation(np.linspace(-2, 2, 24)).reshape(4, 6)     # distinct: no ties
    fn = lambda o, x_: running_extrema(be)(o, x_, 6, ndrange=4)  # noqa: E731
    sh, _ = both_modes(be, fn, [np.zeros(4), x], {0: np.ones(4)}, wrt=[1])
    want = np.zeros_like(x)
    r = np.arange(4)
    want[r, x.argmax(1)] += 2 * x.max(1)
    want[r, x.argmin(1)] -= 2.0
    np.testing.assert_allclose(host(sh[1]), want, rtol=1e-5, atol=1e-7)


@tk.func
def first_crossing(x0, step, n):
    """The value where a stepped sequence first exceeds 1, returned from inside the loop."""
    v = x0
    for k in range(n):
        v = v + step * v * v
        if v > 1.0:
            return v * 2.0
    return v


@tk.kernel
def func_with_early_return_in_a_loop(out, x: tk.Const, s):
    i = tk.index()
    out[i] = first_crossing(x[i], s, 8) + first_crossing(x[i] * 0.5, s * 2.0, 3)


def test_early_return_from_a_loop_inside_a_func(be):
    # crossings at every trip count, the same within +-0.03 of x and s (float32's step is 1e-2)
    x = np.array([0.05, 0.47, 0.64, 0.85, 1.23])
    fn = lambda o, x_, s: func_with_early_return_in_a_loop(be)(o, x_, s, ndrange=5)  # noqa: E731
    both_modes(be, fn, [np.zeros(5), x, 0.6], {0: RNG.standard_normal(5)}, wrt=[1], active=[2])


@tk.kernel
def cast_chain(out, x: tk.Const, table: tk.Const):
    """An integer cast in the middle of a float chain: the cast's input gets no gradient through
    it, the table value it selects does, and the chain continues after it."""
    i = tk.index()
    u = math.tanh(x[i]) * 4.0
    k = int(u + 4.0)                       # 0..7
    t = table[k] * u
    m = float(k) * 0.25 + t
    out[i] = m * math.exp(-u * u * 0.1) + float(int(m * 2.0)) * x[i]


def test_an_int_cast_in_the_middle_of_a_chain(be):
    # both casts keep their values within +-0.03 of x and of the table (float32's step is 1e-2)
    x = np.array([0.15, -0.6, 1.1, -1.3, 0.45, 1.8, -0.2])
    table = np.linspace(0.113, 0.813, 8)
    fn = lambda o, x_, t_: cast_chain(be)(o, x_, t_, ndrange=7)  # noqa: E731
    both_modes(be, fn, [np.zeros(7), x, table], {0: RNG.standard_normal(7)}, wrt=[1, 2])


# --- harder control flow and memory -----------------------------------------------------------------

@tk.kernel
def inplace_in_a_loop(out, x: tk.Const, n):
    """Warp's test_grad in-place accumulation: the item's own output element read and rewritten
    every trip of a loop (the tape keeps each old value)."""
    i = tk.index()
    for k in range(n):
        out[i] = out[i] * x[i, k] + math.sin(out[i])
        if out[i] > 0.5:
            out[i] -= 0.25 * x[i, k]


def test_an_output_element_rewritten_every_trip_of_a_loop(be):
    out0, x = RNG.uniform(-1, 1, 5), RNG.uniform(-1, 1, (5, 4))
    fn = lambda o, x_: inplace_in_a_loop(be)(o, x_, 4, ndrange=5)  # noqa: E731
    both_modes(be, fn, [out0, x], {0: RNG.standard_normal(5)}, wrt=[0, 1])


@tk.kernel
def nested_reset(out, x: tk.Const, n):
    """Warp's test_for_loop_nested_for_grad: an inner accumulator reset at each outer trip,
    squared into the outer one."""
    i = tk.index()
    s = 0.0
    for a in range(n):
        t = 0.0
        for b in range(n):
            t += x[i, b] * x[i, a] + float(b - a) * 0.1
        s += t * t * 0.5
    out[i] = s


def test_an_inner_accumulator_reset_every_outer_trip(be):
    x = RNG.uniform(-1, 1, (3, 4))
    fn = lambda o, x_: nested_reset(be)(o, x_, 4, ndrange=3)  # noqa: E731
    both_modes(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])


@tk.kernel
def private_scatter(out, x: tk.Const, idx: tk.Const, n):
    """A private array updated at data-dependent slots and read at others within one loop."""
    i = tk.index()
    p = tk.private(x.dtype, 4)
    for k in range(4):
        p[k] = 0.5 + 0.1 * float(k)
    for k in range(n):
        j = idx[i, k] % 4
        p[j] += x[i, k] * p[(j + 1) % 4]
        p[(j + 2) % 4] = p[(j + 2) % 4] * math.cos(x[i, k])
    out[i] = p[0] * p[1] + p[2] * p[3]


def test_a_private_array_updated_at_data_dependent_slots(be):
    x = RNG.uniform(-1, 1, (4, 6))
    idx = RNG.integers(0, 9, (4, 6)).astype(np.int32)
    fn = lambda o, x_, i_: private_scatter(be)(o, x_, i_, 6, ndrange=4)  # noqa: E731
    both_modes(be, fn, [np.zeros(4), x, idx], {0: RNG.standard_normal(4)}, wrt=[1])


@tk.kernel
def while_true_mixed(out, x: tk.Const, n):
    """while True with a continue and a break on a float condition, a local carried through."""
    i = tk.index()
    v = x[i, 0]
    k = 0
    while True:
        k += 1
        if k >= n:
            break
        if x[i, k] < -0.5:
            continue
        v = v * 0.8 + x[i, k] * math.exp(-v * v)
        if v > 1.2:
            break
    out[i] = v * v


def test_while_true_with_continue_and_a_float_break(be):
    x = np.array([[0.3, 0.9, -0.7, 1.2, 0.5, 0.8], [1.1, 0.95, 0.9, 0.6, -0.8, 0.7],
                  [-0.2, -0.9, 0.4, -0.6, 0.3, 0.2]])
    fn = lambda o, x_: while_true_mixed(be)(o, x_, 6, ndrange=3)  # noqa: E731
    both_modes(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])


@tk.kernel
def select_on_the_counter(out, x: tk.Const, n):
    """Taichi's test_ad_if on the loop counter: a select whose operands both read the local it
    overwrites."""
    i = tk.index()
    v = x[i]
    for k in range(n):
        v = tk.select(k % 2 == 0, v * x[i] + 0.1, v + math.sin(v))
        v = v if k % 3 != 1 else -v
    out[i] = v


def test_a_select_on_the_loop_counter_overwriting_its_operand(be):
    x = RNG.uniform(-1, 1, 6)
    fn = lambda o, x_: select_on_the_counter(be)(o, x_, 5, ndrange=6)  # noqa: E731
    both_modes(be, fn, [np.zeros(6), x], {0: RNG.standard_normal(6)}, wrt=[1])


@tk.func
def record(trace, i, k, v):
    trace[i, k] = v * v
    return v * 0.5


@tk.kernel
def func_writes_an_array(out, trace, x: tk.Const, n):
    """A @tk.func that stores into an output array (another element each call) and returns a
    value the caller chains on."""
    i = tk.index()
    v = x[i]
    for k in range(n):
        v = record(trace, i, k, v) + math.sin(v)
    out[i] = v


def test_a_func_that_stores_into_an_output_array(be):
    x = RNG.uniform(-1, 1, 5)
    fn = lambda o, t, x_: func_writes_an_array(be)(o, t, x_, 3, ndrange=5)  # noqa: E731
    both_modes(be, fn, [np.zeros(5), np.zeros((5, 3)), x],
               {0: RNG.standard_normal(5), 1: RNG.standard_normal((5, 3))}, wrt=[2])


# --- gather-form stencils with branches, collectives over partial groups, two-operand math ---------

@tk.kernel
def branchy_stencil(y, z, x: tk.Const, c: tk.Const):
    """Stencils whose reads of x sit in both arms of an if on x itself, in a ternary, and beside
    another read-only array read at offsets (the gather form re-evaluates each neighbour's ifs)."""
    (i,) = tk.index(tk.Global, tk.Cartesian)
    if x[i] > 0.0:
        y[i] = x[i - 1] * x[i + 1] + c[i - 1]
    else:
        y[i] = math.sin(x[i + 2]) * c[i + 1]
    z[i] = (x[i - 1] if x[i] > x[i + 1] else x[i + 1] * 2.0) * c[i]


@tk.kernel
def parity_stencil_2d(y, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    if (i + j) % 2 == 0:
        y[i, j] = x[i - 1, j] * x[i, j + 1]
    else:
        y[i, j] = math.exp(x[i + 1, j - 1]) - x[i, j]


def test_stencils_with_branches_over_ranges_with_steps(be):
    n = 12
    # x's values 1/6 apart and none near 0: the finite differences (float32's step on WebGPU)
    # must not cross the branches on x[i] > 0 and x[i] > x[i + 1]
    x, c = (RNG.permutation(n) - (n - 1) / 2) / (n / 2), RNG.uniform(-1, 1, n)
    for nd in (range(1, n - 2), range(2, n - 3, 3)):
        fn = lambda y, z, x_, c_: branchy_stencil(be)(y, z, x_, c_, ndrange=nd)  # noqa: E731
        both_modes(be, fn, [RNG.standard_normal(n), RNG.standard_normal(n), x, c],
                   {0: RNG.standard_normal(n), 1: RNG.standard_normal(n)}, wrt=[2, 3])
    X = RNG.uniform(-1, 1, (7, 8))
    for nd in ((range(1, 6), range(1, 7)), (range(1, 6, 2), range(2, 7))):
        fn = lambda y, x_: parity_stencil_2d(be)(y, x_, ndrange=nd)  # noqa: E731
        both_modes(be, fn, [RNG.standard_normal((7, 8)), X], {0: RNG.standard_normal((7, 8))}, wrt=[1])


@tk.kernel
def collectives(y, x: tk.Const, n):
    """group_reduce (add, max, min) and group_scan (exclusive, inclusive) of active values,
    also inside a loop that carries a local through them."""
    i = tk.index()
    v = math.sin(x[i]) * x[i]
    s = tk.group_reduce(v, "add")
    m = tk.group_reduce(v * 1.5, "max")
    lo = tk.group_reduce(x[i] * x[i], "min")
    c = tk.group_scan(v, "add", inclusive=False)
    acc = 0.0
    for k in range(n):
        u = x[i] * float(k + 1) + acc * 0.1
        acc += tk.group_reduce(u * u, "add") * 0.01 + tk.group_scan(u, "add", inclusive=True) * 0.1
    y[i] = s * v + m * m - lo + c * x[i] + acc


def test_collectives_over_partial_groups(be):
    # the last group partial (masked items add nothing); each group's max and min well apart from
    # the runner-up (float32's finite-difference step is 1e-2)
    xs = np.array([0.9, -0.35, 0.55, 0.15, -0.75, 0.4, -0.6, 0.25, 0.7, -0.2, 0.05, -0.95, 0.3])
    for n, wg in ((13, 8), (7, 4)):
        x = xs[:n]
        fn = lambda y, x_: collectives(be)(y, x_, 3, ndrange=n, workgroupsize=wg)  # noqa: E731
        both_modes(be, fn, [np.zeros(n), x], {0: RNG.standard_normal(n)}, wrt=[1])


@tk.kernel
def two_operand_math(y, a: tk.Const, b: tk.Const):
    """fmod and % with both operands active (d/db = -trunc(a/b), -floor(a/b)), floor division
    (no gradient), clamp with active bounds, copysign, and powers with both operands active."""
    i = tk.index()
    y[i] = (math.fmod(a[i] * 3.7, b[i]) + (a[i] * 2.3) % b[i] + (-a[i] * 1.9) % b[i]
            + (a[i] // b[i]) * a[i] + tk.clamp(a[i], b[i] - 1.0, b[i]) * 2.0
            + math.copysign(a[i] * b[i], b[i] - a[i]) + abs(a[i]) ** b[i] + abs(b[i]) ** -a[i]
            + 2.0 ** a[i] + a[i] ** 3.0 + b[i] ** -2)


def test_two_operand_math_with_both_operands_active(be):
    # every jump of fmod, %, //, clamp and copysign more than 0.04 away in a and in b (float32's
    # finite-difference step is 1e-2)
    a = np.array([-1.42, 1.36, -0.59, 0.5, -0.46, 0.35])
    b = np.array([1.17, -0.93, 0.83, 0.71, -0.67, 0.53])
    fn = lambda y, a_, b_: two_operand_math(be)(y, a_, b_, ndrange=6)  # noqa: E731
    both_modes(be, fn, [np.zeros(6), a, b], {0: RNG.standard_normal(6)}, wrt=[1, 2])


# --- one array passed to two read-only parameters ---------------------------------------------------

@tk.kernel
def two_views(y, a: tk.Const, b: tk.Const, s, t):
    """a read at an offset, b at the own index: with a and b the same array, items i and i + 1
    both add to element i + 1 of its gradient."""
    i = tk.index()
    y[i] = y[i] * a[i + 1] * b[i] * s + t * a[i + 1]


def test_an_array_passed_to_two_read_only_parameters(be, monkeypatch):
    """The adjoint kernel adds to a read-only argument's shadow plainly where items own their
    elements (a[i + 1]: every read of a at the same offset) and the strips' partial sums add the
    scalars one by one; with one array (or one tk.Active scalar) behind two parameters, the
    replay passed the one shadow twice, so items i (through a) and i + 1 (through b) updated one
    element at once: a lost update wherever they run concurrently (GPU lanes; tk.adjoint itself
    refuses aliased shadows). Each parameter now gets a shadow of its own, summed after the
    launch: the launch never sees two shadows sharing memory, and the gradient is the sum."""
    import importlib
    ad = importlib.import_module("tinykernels.autodiff")
    seen = []
    launch = ad.AdjointLauncher.launch

    def spy(self, primal, shadows, *rest):
        ptrs = [s.__array_interface__["data"][0] if isinstance(s, np.ndarray) else id(s)
                for s in shadows.values()]
        seen.append(len(set(ptrs)) == len(ptrs))
        return launch(self, primal, shadows, *rest)
    monkeypatch.setattr(ad.AdjointLauncher, "launch", spy)
    n = 9
    x, y0 = RNG.uniform(0.5, 1.5, n + 1), RNG.uniform(0.5, 1.5, n)
    fn = lambda y, x_, w: two_views(be)(y, x_, x_, w, w, ndrange=n)  # noqa: E731
    sh, (dw,) = check_reverse(be, fn, [y0, x, 0.7], {0: RNG.standard_normal(n)}, wrt=[0, 1], active=[2])
    assert seen and all(seen), seen
    check_forward(be, fn, [y0, x, 0.7], {0: RNG.standard_normal(n), 1: RNG.standard_normal(n + 1)}, outs=[0])
