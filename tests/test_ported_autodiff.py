"""Autodiff cases in the style of NVIDIA Warp's test_grad.py / test_adjoint, Taichi's test_ad_*.py
and Enzyme's tests, written against SPEC section 7. Every gradient is checked against central
finite differences of the primal program computed independently here (float64 where the backend
has it), every tangent against the same, on CPU, INTERP, INTERP:CHECK, CL and WEBGPU."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, dev, fdt, host  # noqa: F401

RNG = np.random.default_rng(2026)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def _loss(be, fn, args, seeds, dtypes):
    """sum(seed * final value) of the program ``fn`` run on fresh copies of ``args``."""
    dargs = [dev(a, be, dtypes[k]) if isinstance(a, np.ndarray) else a for k, a in enumerate(args)]
    fn(*dargs)
    return sum(float((host(dargs[k]) * s).sum()) for k, s in seeds.items())


def _dtypes_and_tolerances(be, args, dtypes):
    """Each argument's dtype (the backend's float unless given) and (eps, rtol, atol)."""
    dtypes = dtypes or {}
    dtypes = {k: dtypes.get(k, fdt(be)) for k in range(len(args))}
    return dtypes, ((1e-6, 1e-5, 1e-7) if be.supports_float64 else (1e-2, 3e-2, 3e-3))


def _wrap(be, args, shadow_values, duplicated, active, dtypes):
    """tk.Duplicated for the arrays in ``duplicated`` (shadows start from ``shadow_values`` or
    zeros), tk.Active for the scalars in ``active``, tk.Const for the rest; and the shadows."""
    wrapped, shadows = [], {}
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray) and k in duplicated:
            shadows[k] = dev(shadow_values.get(k, np.zeros(a.shape)), be, dtypes[k])
            wrapped.append(tk.Duplicated(dev(a, be, dtypes[k]), shadows[k]))
        elif k in active:
            wrapped.append(tk.Active(a))
        elif isinstance(a, np.ndarray):
            wrapped.append(tk.Const(dev(a, be, dtypes[k])))
        else:
            wrapped.append(tk.Const(a))
    return wrapped, shadows


def check_reverse(be, fn, args, seeds, wrt, active=(), dtypes=None):
    """Reverse mode of ``fn(*args)`` for the loss ``sum(seeds[k] * args[k])`` against central
    differences: array arguments in ``wrt`` (indices) get checked gradients, scalars in
    ``active`` are tk.Active. Arrays named in neither are tk.Const."""
    dtypes, (eps, rtol, atol) = _dtypes_and_tolerances(be, args, dtypes)
    wrapped, shadows = _wrap(be, args, seeds, set(wrt) | set(seeds), active, dtypes)
    got_scalars = tk.autodiff(tk.Reverse, fn, *wrapped)
    for k in wrt:
        g = host(shadows[k])
        fd = np.zeros(args[k].shape)
        for j in np.ndindex(args[k].shape):
            p, m = [list(args) for _ in range(2)]
            p[k], m[k] = args[k].copy(), args[k].copy()
            p[k][j] += eps
            m[k][j] -= eps
            fd[j] = (_loss(be, fn, p, seeds, dtypes) - _loss(be, fn, m, seeds, dtypes)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=rtol, atol=atol, err_msg=f"gradient of argument {k}")
    for n, k in enumerate(active):
        p, m = list(args), list(args)
        p[k], m[k] = args[k] + eps, args[k] - eps
        fd = (_loss(be, fn, p, seeds, dtypes) - _loss(be, fn, m, seeds, dtypes)) / (2 * eps)
        np.testing.assert_allclose(got_scalars[n], fd, rtol=rtol, atol=atol, err_msg=f"gradient of scalar {k}")
    return shadows, got_scalars


def check_forward(be, fn, args, tangents, outs, dtypes=None):
    """Forward mode: the tangents of the outputs ``outs`` along ``tangents`` (index -> array)
    against central differences of the primal program along the same direction."""
    dtypes, (eps, rtol, atol) = _dtypes_and_tolerances(be, args, dtypes)
    wrapped, shadows = _wrap(be, args, tangents, set(tangents) | set(outs), (), dtypes)
    tk.autodiff(tk.Forward, fn, *wrapped)

    def run(sign):
        a2 = [a.copy() + sign * eps * tangents[k] if k in tangents else (a.copy() if isinstance(a, np.ndarray) else a)
              for k, a in enumerate(args)]
        d = [dev(a, be, dtypes[k]) if isinstance(a, np.ndarray) else a for k, a in enumerate(a2)]
        fn(*d)
        return {k: host(d[k]) for k in outs}
    p, m = run(1), run(-1)
    for k in outs:
        np.testing.assert_allclose(host(shadows[k]), (p[k] - m[k]) / (2 * eps), rtol=rtol, atol=atol,
                                   err_msg=f"tangent of argument {k}")


# --- kernels ------------------------------------------------------------------------------------

@tk.kernel
def loop_sum(out, x: tk.Const, n):
    """one work item per output row sums a row of x with a data-independent loop (Warp test_for_loop_grad)"""
    i = tk.index()
    acc = 0.0
    for k in range(n):
        acc += math.sin(x[i, k]) * x[i, k]
    out[i] = acc


@tk.kernel
def nested_loop(out, x: tk.Const, n, m):
    i = tk.index()
    acc = 1.0
    for a in range(n):
        for b in range(a, m):
            acc = acc * 0.5 + x[i, b] * x[i, a]
    out[i] = acc


@tk.kernel
def while_newton(out, x: tk.Const, iters):
    """a while loop whose carried value is the iterate (Warp test_while_loop_grad)"""
    i = tk.index()
    y = x[i]
    k = 0
    while k < iters:
        y = 0.5 * (y + x[i] / y)
        k += 1
    out[i] = y


@tk.kernel
def early_return(out, x: tk.Const):
    i = tk.index()
    if x[i] < 0.0:
        out[i] = 2.0 * x[i]
        return
    out[i] = x[i] * x[i] * x[i]


@tk.kernel
def atomic_loss(loss, x: tk.Const, w):
    """loss = sum(w * x^2) with atomics (Warp's canonical loss kernel)"""
    i = tk.index()
    tk.atomic_add(loss, 0, w * x[i] * x[i])


@tk.func
def poly_and_deriv(x, a):
    return a * x * x + x, 2.0 * a * x + 1.0


@tk.func
def piecewise(x):
    if x > 0.5:
        return x * x
    return -x


@tk.kernel
def with_funcs(out, x: tk.Const, a):
    i = tk.index()
    p, d = poly_and_deriv(x[i], a)
    out[i] = p * d + piecewise(x[i])


@tk.kernel
def inplace_chain(a, b: tk.Const):
    """several in-place updates of the own element in one kernel (Taichi test_ad_basics)"""
    i = tk.index()
    a[i] = a[i] * b[i]
    a[i] += math.exp(a[i])
    a[i] /= 1.0 + b[i] * b[i]


@tk.kernel
def builtins_mix(out, x: tk.Const, y: tk.Const):
    i = tk.index()
    u = x[i]
    v = y[i]
    out[i] = (tk.fma(u, v, 0.25) + tk.sigmoid(u) * tk.rsqrt(v * v + 1.0) + min(u, v) * max(u, 0.1)
              + abs(u - v) + tk.clamp(u, -0.3, 0.3) + tk.select(u > v, u * v, u + v))


@tk.kernel
def math_mix(out, x: tk.Const, y: tk.Const):
    i = tk.index()
    u = x[i]
    v = y[i]
    out[i] = (math.atan2(u, v) + math.hypot(u, v) + math.pow(v, u) + math.log1p(v) + math.expm1(u)
              + math.tanh(u) * math.cosh(v) + math.sinh(u) + math.erf(u) + math.asin(u * 0.5) + math.acos(v * 0.5)
              + math.atan(u) + math.log2(v) + math.sqrt(v) + math.tan(u) + u ** 3 + v ** u
              + math.copysign(v, u) + math.fmod(v * 3.0, 0.7) + 1.0 / v)


@tk.kernel
def stencil2d(out, x: tk.Const, c):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = c * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1] - 4.0 * x[i, j]) * x[i, j]


@tk.kernel
def gather_scatter(out, x: tk.Const, idx: tk.Const):
    """data-dependent gather; duplicates in idx accumulate the gradient"""
    i = tk.index()
    out[i] = x[idx[i]] * x[idx[i]] + x[i]


@tk.kernel
def int_args(out, x: tk.Const, n, off):
    i = tk.index()
    out[i] = x[i] * n + float(off) * x[i] * x[i] + float(i)


@tk.kernel
def private_scan(out, x: tk.Const, n: tk.constexpr):
    """a private array filled and read back in loops"""
    i = tk.index()
    p = tk.private(x.dtype, n)
    for k in range(n):
        p[k] = x[i, k] * (k + 1.0)
    acc = 0.0
    for k in range(n):
        acc = acc * p[k] + p[n - 1 - k]
    out[i] = acc


@tk.kernel
def local_reduce(out, x: tk.Const):
    tmp = tk.localmem(x.dtype, 8)
    l = tk.index(tk.Local, tk.Linear)
    g = tk.index(tk.Group, tk.Linear)
    i = tk.index()
    tmp[l] = x[i] * x[i]
    tk.synchronize()
    s = 8 // 2
    while s > 0:
        if l < s:
            tmp[l] += tmp[l + s]
        tk.synchronize()
        s = s // 2
    if l == 0:
        out[g] = math.sqrt(tmp[0])


@tk.kernel
def break_continue(out, x: tk.Const, n):
    i = tk.index()
    acc = 0.0
    for k in range(n):
        v = x[i, k]
        if v < -1.0:
            continue
        if acc > 3.0:
            break
        acc += v * v
    out[i] = acc


# --- tests --------------------------------------------------------------------------------------

def test_loop_reduction_per_item(be):
    x = RNG.standard_normal((3, 5))
    fn = lambda o, x_: loop_sum(be)(o, x_, 5, ndrange=3)  # noqa: E731
    check_reverse(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])
    check_forward(be, fn, [np.zeros(3), x], {1: RNG.standard_normal((3, 5))}, outs=[0])


def test_nested_loops_with_a_triangular_range(be):
    x = RNG.uniform(-1, 1, (2, 4))
    fn = lambda o, x_: nested_loop(be)(o, x_, 3, 4, ndrange=2)  # noqa: E731
    check_reverse(be, fn, [np.zeros(2), x], {0: np.array([1.0, -2.0])}, wrt=[1])
    check_forward(be, fn, [np.zeros(2), x], {1: RNG.standard_normal((2, 4))}, outs=[0])


def test_while_loop_iterate(be):
    x = RNG.uniform(0.5, 3, 6)
    fn = lambda o, x_: while_newton(be)(o, x_, 4, ndrange=6)  # noqa: E731
    check_reverse(be, fn, [np.zeros(6), x], {0: RNG.standard_normal(6)}, wrt=[1])
    check_forward(be, fn, [np.zeros(6), x], {1: RNG.standard_normal(6)}, outs=[0])


def test_early_return_takes_the_branch_each_item_took(be):
    x = np.array([-1.5, 0.3, 2.0, -0.2, 1.1])
    fn = lambda o, x_: early_return(be)(o, x_, ndrange=5)  # noqa: E731
    sh, _ = check_reverse(be, fn, [np.zeros(5), x], {0: np.ones(5)}, wrt=[1])
    np.testing.assert_allclose(host(sh[1]), np.where(x < 0, 2.0, 3 * x * x), rtol=1e-5)
    check_forward(be, fn, [np.zeros(5), x], {1: RNG.standard_normal(5)}, outs=[0])


def test_atomic_loss_and_active_weight(be):
    x = RNG.standard_normal(37)
    fn = lambda l, x_, w: atomic_loss(be)(l, x_, w, ndrange=37)  # noqa: E731
    sh, (dw,) = check_reverse(be, fn, [np.zeros(1), x, 0.7], {0: np.ones(1)}, wrt=[1], active=[2])
    np.testing.assert_allclose(host(sh[1]), 1.4 * host(dev(x, be)), rtol=1e-5)
    check_forward(be, fn, [np.zeros(1), x, 0.7], {1: RNG.standard_normal(37)}, outs=[0])


def test_funcs_returning_tuples_and_early_returns(be):
    x = np.array([0.1, 0.7, 0.45, 0.9, -0.3])
    fn = lambda o, x_, a: with_funcs(be)(o, x_, a, ndrange=5)  # noqa: E731
    check_reverse(be, fn, [np.zeros(5), x, 1.3], {0: RNG.standard_normal(5)}, wrt=[1], active=[2])
    check_forward(be, fn, [np.zeros(5), x, 1.3], {1: RNG.standard_normal(5)}, outs=[0])


def test_several_in_place_updates_of_one_element(be):
    a, b = RNG.uniform(-1, 1, 7), RNG.uniform(-1, 1, 7)
    fn = lambda a_, b_: inplace_chain(be)(a_, b_, ndrange=7)  # noqa: E731
    check_reverse(be, fn, [a, b], {0: RNG.standard_normal(7)}, wrt=[0, 1])
    check_forward(be, fn, [a, b], {0: RNG.standard_normal(7), 1: RNG.standard_normal(7)}, outs=[0])


def test_builtins(be):
    # points away from the kinks of min/max/abs/clamp/select
    x = np.array([0.2, -0.7, 1.3, 0.05, -0.1])
    y = np.array([0.9, -0.2, 0.4, 1.7, -1.2])
    fn = lambda o, x_, y_: builtins_mix(be)(o, x_, y_, ndrange=5)  # noqa: E731
    check_reverse(be, fn, [np.zeros(5), x, y], {0: RNG.standard_normal(5)}, wrt=[1, 2])
    check_forward(be, fn, [np.zeros(5), x, y], {1: RNG.standard_normal(5), 2: RNG.standard_normal(5)}, outs=[0])


def test_math_functions(be):
    x = np.array([0.2, -0.7, 1.3, 0.05, -0.4])
    y = np.array([0.9, 0.3, 1.45, 1.7, 0.6])
    fn = lambda o, x_, y_: math_mix(be)(o, x_, y_, ndrange=5)  # noqa: E731
    check_reverse(be, fn, [np.zeros(5), x, y], {0: RNG.standard_normal(5)}, wrt=[1, 2])
    check_forward(be, fn, [np.zeros(5), x, y], {1: RNG.standard_normal(5), 2: RNG.standard_normal(5)}, outs=[0])


def test_stencil_on_an_interior_range(be):
    x = RNG.standard_normal((5, 6))
    fn = lambda o, x_, c: stencil2d(be)(o, x_, c, ndrange=(range(1, 4), range(1, 5)))  # noqa: E731
    seed = np.zeros((5, 6))
    seed[1:4, 1:5] = RNG.standard_normal((3, 4))
    check_reverse(be, fn, [np.zeros((5, 6)), x, 0.3], {0: seed}, wrt=[1], active=[2])
    check_forward(be, fn, [np.zeros((5, 6)), x, 0.3], {1: RNG.standard_normal((5, 6))}, outs=[0])


def test_gather_with_repeated_indices_accumulates(be):
    x = RNG.standard_normal(6)
    idx = np.array([0, 3, 3, 5, 0, 0], dtype=np.int32)
    fn = lambda o, x_, i_: gather_scatter(be)(o, x_, i_, ndrange=6)  # noqa: E731
    check_reverse(be, fn, [np.zeros(6), x, idx], {0: RNG.standard_normal(6)}, wrt=[1], dtypes={2: np.int32})
    check_forward(be, fn, [np.zeros(6), x, idx], {1: RNG.standard_normal(6)}, outs=[0], dtypes={2: np.int32})


def test_integer_scalar_arguments_are_constants(be):
    x = RNG.standard_normal(4)
    fn = lambda o, x_, n, off: int_args(be)(o, x_, n, off, ndrange=4)  # noqa: E731
    check_reverse(be, fn, [np.zeros(4), x, 3, -2], {0: np.ones(4)}, wrt=[1])
    check_forward(be, fn, [np.zeros(4), x, 3, -2], {1: np.ones(4)}, outs=[0])


def test_private_arrays_in_loops(be):
    x = RNG.uniform(-1, 1, (3, 4))
    fn = lambda o, x_: private_scan(be)(o, x_, 4, ndrange=3)  # noqa: E731
    check_reverse(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])
    check_forward(be, fn, [np.zeros(3), x], {1: RNG.standard_normal((3, 4))}, outs=[0])


def test_local_memory_tree_reduction(be):
    x = RNG.uniform(0.5, 1.5, 16)
    fn = lambda o, x_: local_reduce(be, 8)(o, x_, ndrange=16)  # noqa: E731
    check_reverse(be, fn, [np.zeros(2), x], {0: np.array([0.5, -1.5])}, wrt=[1])
    check_forward(be, fn, [np.zeros(2), x], {1: RNG.standard_normal(16)}, outs=[0])


def test_break_and_continue_in_a_data_dependent_loop(be):
    x = np.array([[0.5, -2.0, 1.0, 1.5, 0.3], [1.8, 0.1, -0.4, 0.9, -1.2], [-3.0, 0.2, 0.3, 0.4, 0.5]])
    fn = lambda o, x_: break_continue(be)(o, x_, 5, ndrange=3)  # noqa: E731
    check_reverse(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])
    check_forward(be, fn, [np.zeros(3), x], {1: RNG.standard_normal((3, 5))}, outs=[0])


# --- accumulation, zeroing, several launches --------------------------------------------------

def test_gradients_accumulate_into_nonzero_shadows(be):
    x = RNG.standard_normal(5)
    prior = RNG.standard_normal(5)
    dx = dev(prior, be)
    dy = dev(np.ones(5), be)
    tk.autodiff(tk.Reverse, lambda o, x_: early_return(be)(o, x_, ndrange=5),
                tk.Duplicated(dev(np.zeros(5), be), dy), tk.Duplicated(dev(x, be), dx))
    xs = host(dev(x, be))
    np.testing.assert_allclose(host(dx), prior + np.where(xs < 0, 2.0, 3 * xs * xs), rtol=1e-5, atol=1e-6)
    # the overwritten output's seed is consumed
    np.testing.assert_array_equal(host(dy), 0.0)


def test_an_output_written_by_atomics_keeps_its_seed(be):
    """atomic_add adds to the output: d loss / d loss_old is the seed itself, so it stays."""
    x = RNG.standard_normal(8)
    dl = dev([2.0], be)
    dx = dev(np.zeros(8), be)
    tk.autodiff(tk.Reverse, lambda l, x_: atomic_loss(be)(l, x_, 1.0, ndrange=8),
                tk.Duplicated(dev([5.0], be), dl), tk.Duplicated(dev(x, be), dx))
    np.testing.assert_allclose(host(dl), [2.0])
    np.testing.assert_allclose(host(dx), 4.0 * host(dev(x, be)), rtol=1e-5)


def test_one_kernel_launched_twice_on_a_chain(be):
    """y = f(f(x)) through a temporary: the adjoints run in reverse order"""
    x = RNG.uniform(-1, 1, 5)

    def fn(y, x_):
        t = dev(np.zeros(5), be)
        early_return(be)(t, x_, ndrange=5)
        early_return(be)(y, t, ndrange=5)
    check_reverse(be, fn, [np.zeros(5), x], {0: RNG.standard_normal(5)}, wrt=[1])
    check_forward(be, fn, [np.zeros(5), x], {1: RNG.standard_normal(5)}, outs=[0])


def test_a_scalar_active_in_several_launches_sums_its_gradient(be):
    x = RNG.standard_normal(6)

    def fn(l, x_, w):
        atomic_loss(be)(l, x_, w, ndrange=6)
        atomic_loss(be)(l, x_, w, ndrange=3)
    check_reverse(be, fn, [np.zeros(1), x, 0.4], {0: np.ones(1)}, wrt=[1], active=[2])


def test_strided_views_as_duplicated_arrays():
    """non-contiguous NumPy views (a column, a reversed array) carry gradients on the CPU"""
    cpu = tk.CPU()
    base = RNG.standard_normal((6, 4))
    x = base[:, 1]                       # stride 32 bytes
    y = np.zeros((6, 2))[:, 0]
    dy = np.ones((6, 3))[::-1, 2]         # negative stride
    dx = np.zeros((6, 2))[:, 1]
    tk.autodiff(tk.Reverse, lambda o, x_: early_return(cpu)(o, x_, ndrange=6),
                tk.Duplicated(y, dy), tk.Duplicated(x, dx))
    np.testing.assert_allclose(dx, np.where(x < 0, 2.0, 3 * x * x), rtol=1e-12)
    np.testing.assert_allclose(y, np.where(x < 0, 2 * x, x ** 3), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_narrow_float_arrays_get_gradients(be, dtype):
    if dtype == np.float16 and not be.supports(tk.float16):
        pytest.skip("no float16 on this backend")
    x = np.array([0.5, -1.0, 0.25, 2.0], dtype=dtype)
    dx = dev(np.zeros(4), be, dtype)
    y = dev(np.zeros(4), be, dtype)
    tk.autodiff(tk.Reverse, lambda o, x_: early_return(be)(o, x_, ndrange=4),
                tk.Duplicated(y, dev(np.ones(4), be, dtype)), tk.Duplicated(dev(x, be, dtype), dx))
    xs = x.astype(np.float64)
    np.testing.assert_allclose(host(dx), np.where(xs < 0, 2.0, 3 * xs * xs), rtol=1e-3)
    assert (dx.numpy() if isinstance(dx, tk.Array) else dx).dtype == dtype


# --- second batch: reversed loops, returns inside loops, steps, 2-D scalars, masking ----------

@tk.kernel
def reversed_loop_return(out, x: tk.Const, n):
    i = tk.index()
    acc = 1.0
    for k in range(n - 1, -1, -1):
        acc = acc * x[i, k] + 0.1
        if acc > 4.0:
            out[i] = acc * acc
            return
    out[i] = acc


@tk.kernel
def product(out, x: tk.Const, n):
    i = tk.index()
    p = 1.0
    for k in range(n):
        p *= x[i, k]
    out[i] = p


@tk.kernel
def scaled2d(y, x: tk.Const, s, t):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[i, j] = s * x[i, j] * x[i, j] + math.sin(t * x[i, j])


@tk.kernel
def masked_group_sum(out, x: tk.Const, s, n):
    tmp = tk.localmem(x.dtype, 8)
    l = tk.index(tk.Local, tk.Linear)
    g = tk.index(tk.Group, tk.Linear)
    i = tk.index()
    tmp[l] = s * x[i]
    tk.synchronize()
    if l == 0:
        acc = 0.0
        for k in range(min(8, n - g * 8)):      # masked items wrote nothing
            acc += tmp[k] * tmp[k]
        out[g] = acc


def test_reversed_loop_with_a_return_inside(be):
    x = np.array([[1.5, 2.0, 0.5, 1.1], [0.2, 0.4, 0.3, 0.9], [3.0, 1.9, 0.1, 0.8]])
    fn = lambda o, x_: reversed_loop_return(be)(o, x_, 4, ndrange=3)  # noqa: E731
    check_reverse(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])
    check_forward(be, fn, [np.zeros(3), x], {1: RNG.standard_normal((3, 4))}, outs=[0])


def test_product_through_a_zero_factor(be):
    """d prod / d x_k with an exact zero among the factors (a division-based adjoint gives NaN)"""
    x = np.array([[0.5, 0.0, 2.0, -1.5], [1.0, 2.0, 3.0, 0.0]])
    fn = lambda o, x_: product(be)(o, x_, 4, ndrange=2)  # noqa: E731
    sh, _ = check_reverse(be, fn, [np.zeros(2), x], {0: np.ones(2)}, wrt=[1])
    assert np.isfinite(host(sh[1])).all()


def test_active_scalars_over_a_2d_range_with_steps(be):
    x = RNG.uniform(-1, 1, (7, 9))
    nd = (range(1, 7, 2), range(0, 9, 4))
    seed = np.zeros((7, 9))
    seed[1::2, 0::4] = RNG.standard_normal((3, 3))
    fn = lambda y, x_, s, t: scaled2d(be)(y, x_, s, t, ndrange=nd)  # noqa: E731
    check_reverse(be, fn, [np.zeros((7, 9)), x, 0.8, 1.7], {0: seed}, wrt=[1], active=[2, 3])


def test_active_scalar_over_many_items_not_a_multiple_of_the_strip(be):
    x = RNG.uniform(-1, 1, (13, 37))
    fn = lambda y, x_, s, t: scaled2d(be)(y, x_, s, t, ndrange=(13, 37))  # noqa: E731
    seed = RNG.standard_normal((13, 37))
    sh = {0: dev(seed, be), 1: dev(np.zeros((13, 37)), be)}
    ds, dt = tk.autodiff(tk.Reverse, fn, tk.Duplicated(dev(np.zeros((13, 37)), be), sh[0]),
                         tk.Duplicated(dev(x, be), sh[1]), tk.Active(0.8), tk.Active(1.7))
    xs = host(dev(x, be))
    rtol = 1e-10 if be.supports_float64 else 1e-4
    np.testing.assert_allclose(ds, (seed * xs * xs).sum(), rtol=rtol)
    np.testing.assert_allclose(dt, (seed * xs * np.cos(1.7 * xs)).sum(), rtol=rtol)


def test_masked_items_of_a_partial_group_add_nothing(be):
    """ndrange 13 with groups of 8: the three masked items of the last group take part in the
    barriers but contribute nothing to the gradient of x or of the scalar"""
    x = RNG.uniform(-1, 1, 16)
    fn = lambda o, x_, s: masked_group_sum(be, 8)(o, x_, s, 13, ndrange=13)  # noqa: E731
    sh, (ds,) = check_reverse(be, fn, [np.zeros(2), x, 1.3], {0: np.array([0.7, -1.1])}, wrt=[1], active=[2])
    np.testing.assert_array_equal(host(sh[1])[13:], 0.0)


# --- third batch: zeroing semantics checked as gradients of the outputs' initial values -------

@tk.kernel
def conditional_store(y, x: tk.Const):
    i = tk.index()
    if x[i] > 0.0:
        y[i] = x[i] * x[i]


@tk.kernel
def store_twice(y, x: tk.Const, b):
    i = tk.index()
    y[i] = x[i] + 1.0
    y[i] = y[i] * b * y[i]


@tk.kernel
def accumulate(y, x: tk.Const):
    i = tk.index()
    y[i] += math.exp(x[i]) * y[i]


@tk.kernel
def noisy(y, x: tk.Const, key):
    i = tk.index()
    y[i] = x[i] * tk.random.uniform(key, i) + x[i] * x[i]


def test_an_output_stored_only_by_some_items_keeps_the_other_seeds(be):
    """d loss / d y_old is the seed where no item stored, zero where one did"""
    x = np.array([0.5, -0.3, 1.2, -2.0, 0.1])
    fn = lambda y, x_: conditional_store(be)(y, x_, ndrange=5)  # noqa: E731
    seed = RNG.standard_normal(5)
    sh, _ = check_reverse(be, fn, [RNG.standard_normal(5), x], {0: seed}, wrt=[0, 1])
    np.testing.assert_allclose(host(sh[0]), np.where(x > 0, 0.0, host(dev(seed, be))))
    check_forward(be, fn, [RNG.standard_normal(5), x], {0: RNG.standard_normal(5), 1: RNG.standard_normal(5)},
                  outs=[0])


def test_an_output_stored_twice_in_one_kernel(be):
    x = RNG.standard_normal(6)
    fn = lambda y, x_, b: store_twice(be)(y, x_, b, ndrange=6)  # noqa: E731
    check_reverse(be, fn, [RNG.standard_normal(6), x, 0.6], {0: RNG.standard_normal(6)}, wrt=[0, 1], active=[2])


def test_an_accumulating_output_passes_its_seed_through(be):
    x = RNG.uniform(-1, 1, 6)
    fn = lambda y, x_: accumulate(be)(y, x_, ndrange=6)  # noqa: E731
    check_reverse(be, fn, [RNG.standard_normal(6), x], {0: RNG.standard_normal(6)}, wrt=[0, 1])
    check_forward(be, fn, [RNG.standard_normal(6), x], {0: RNG.standard_normal(6), 1: RNG.standard_normal(6)},
                  outs=[0])


def test_an_output_overwritten_by_a_later_launch_has_no_gradient_from_the_first(be):
    x, z = RNG.standard_normal(5), RNG.standard_normal(5)

    def fn(y, x_, z_):
        early_return(be)(y, x_, ndrange=5)
        early_return(be)(y, z_, ndrange=5)
    sh, _ = check_reverse(be, fn, [np.zeros(5), x, z], {0: RNG.standard_normal(5)}, wrt=[0, 1, 2])
    np.testing.assert_array_equal(host(sh[1]), 0.0)


def test_random_numbers_are_constants_to_the_gradient(be):
    key = tk.random.key(7)
    x = RNG.standard_normal(9)
    fn = lambda y, x_, kk: noisy(be)(y, x_, kk, ndrange=9)  # noqa: E731
    check_reverse(be, fn, [np.zeros(9), x, key], {0: RNG.standard_normal(9)}, wrt=[1])
    check_forward(be, fn, [np.zeros(9), x, key], {1: RNG.standard_normal(9)}, outs=[0])


def test_a_duplicated_scalar_carries_its_tangent_in_forward_mode(be):
    x = RNG.standard_normal(7)
    X, dX = dev(x.reshape(1, 7), be), dev(np.zeros((1, 7)), be)
    Y, dY = dev(np.zeros((1, 7)), be), dev(np.zeros((1, 7)), be)
    tk.autodiff(tk.Forward, lambda y_, x_, s, t: scaled2d(be)(y_, x_, s, t, ndrange=(1, 7)),
                tk.Duplicated(Y, dY), tk.Duplicated(X, dX), tk.Duplicated(0.5, 2.0), tk.Duplicated(1.5, -1.0))
    xs = host(X)
    want = 2.0 * xs * xs - 1.0 * xs * np.cos(1.5 * xs)
    np.testing.assert_allclose(host(dY), want, rtol=1e-5 if be.supports_float64 else 1e-4, atol=1e-6)


def test_active_integer_scalars_are_refused():
    with pytest.raises((ValueError, TypeError), match="(?i)float"):
        tk.autodiff(tk.Reverse, lambda y, x, s: scaled2d(tk.CPU())(y, x, s, 1.0, ndrange=(1, 2)),
                    tk.Duplicated(np.zeros((1, 2)), np.ones((1, 2))), tk.Const(np.ones((1, 2))), tk.Active(3))


# --- fourth batch: other atomics, local atomics, fastmath, unsafe indices, 3-D, float16 scalars --

@tk.kernel
def atomic_sub_loss(loss, x: tk.Const):
    i = tk.index()
    tk.atomic_sub(loss, 0, x[i] * x[i])


@tk.kernel
def local_atomic_sum(out, x: tk.Const):
    acc = tk.localmem(x.dtype, 1)
    l = tk.index(tk.Local, tk.Linear)
    g = tk.index(tk.Group, tk.Linear)
    if l == 0:
        acc[0] = 0.0
    tk.synchronize()
    tk.atomic_add(acc, 0, math.sin(x[tk.index()]))
    tk.synchronize()
    if l == 0:
        out[g] = acc[0] * acc[0]


@tk.kernel(fastmath=True)
def fast_norm(y, x: tk.Const, n):
    i = tk.index()
    s = 0.0
    for k in range(n):
        s += x[i, k] * x[i, k]
    y[i] = math.sqrt(s)


@tk.kernel(unsafe_indices=True)
def guarded_cube(y, x: tk.Const, n):
    i = tk.index()
    if i < n:
        y[i] = x[i] * x[i] * x[i]


@tk.kernel
def cartesian3(y, x: tk.Const, mode: tk.constexpr):
    I = tk.index(tk.Global, tk.Cartesian)
    if mode == 1:
        y[I] = x[I] * x[I] * float(x.shape[2]) + math.cos(x[I])
    else:
        y[I] = x[I]


def test_atomic_sub_differentiates(be):
    x = RNG.standard_normal(11)
    fn = lambda l, x_: atomic_sub_loss(be)(l, x_, ndrange=11)  # noqa: E731
    check_reverse(be, fn, [np.zeros(1), x], {0: np.array([1.5])}, wrt=[0, 1])
    check_forward(be, fn, [np.zeros(1), x], {1: RNG.standard_normal(11)}, outs=[0])


def test_atomic_add_on_local_memory_between_barriers(be):
    if not be.supports_atomic(fdt(be)):
        pytest.skip(f"no {np.dtype(fdt(be)).name} atomics on {be.name}")
    x = RNG.uniform(-1, 1, 8)
    fn = lambda o, x_: local_atomic_sum(be, 4)(o, x_, ndrange=8)  # noqa: E731
    check_reverse(be, fn, [np.zeros(2), x], {0: np.array([1.0, -0.5])}, wrt=[1])
    check_forward(be, fn, [np.zeros(2), x], {1: RNG.standard_normal(8)}, outs=[0])


def test_fastmath_kernels_differentiate(be):
    x = RNG.uniform(0.2, 1, (3, 5))
    fn = lambda y, x_: fast_norm(be)(y, x_, 5, ndrange=3)  # noqa: E731
    check_reverse(be, fn, [np.zeros(3), x], {0: RNG.standard_normal(3)}, wrt=[1])


def test_unsafe_indices_kernels_that_guard_themselves(be):
    x = RNG.standard_normal(8)
    fn = lambda y, x_: guarded_cube(be, 4)(y, x_, 6, ndrange=8)  # noqa: E731
    sh, _ = check_reverse(be, fn, [np.zeros(8), x], {0: RNG.standard_normal(8)}, wrt=[0, 1])
    np.testing.assert_array_equal(host(sh[1])[6:], 0.0)


def test_three_dimensional_cartesian_index_tuples(be):
    x = RNG.standard_normal((2, 3, 4))
    fn = lambda y, x_: cartesian3(be)(y, x_, 1, ndrange=(2, 3, 4))  # noqa: E731
    check_reverse(be, fn, [np.zeros((2, 3, 4)), x], {0: RNG.standard_normal((2, 3, 4))}, wrt=[1])
    check_forward(be, fn, [np.zeros((2, 3, 4)), x], {1: RNG.standard_normal((2, 3, 4))}, outs=[0])


def test_float16_arrays_with_an_active_scalar_and_forward_tangents(be):
    if not be.supports(tk.float16):
        pytest.skip("no float16 on this backend")
    x = np.array([0.5, 1.0, 1.5, 2.0, -0.5, 0.25, 0.75, 1.25], np.float16)
    h16 = lambda a: dev(a, be, np.float16)  # noqa: E731
    dx = h16(np.zeros(8))
    (ds,) = tk.autodiff(tk.Reverse, lambda y, x_, s: scale_f16(be)(y, x_, s, ndrange=8),
                        tk.Duplicated(h16(np.zeros(8)), h16(np.ones(8))), tk.Duplicated(h16(x), dx),
                        tk.Active(np.float16(2.0)))
    np.testing.assert_allclose(ds, x.astype(np.float64).sum(), rtol=1e-3)
    np.testing.assert_array_equal(host(dx), 2.0)
    dy = h16(np.zeros(8))
    tk.autodiff(tk.Forward, lambda y, x_, s: scale_f16(be)(y, x_, s, ndrange=8),
                tk.Duplicated(h16(np.zeros(8)), dy), tk.Duplicated(h16(x), h16(np.ones(8))),
                tk.Duplicated(np.float16(2.0), np.float16(1.0)))
    np.testing.assert_allclose(host(dy), 2.0 + x.astype(np.float64), rtol=1e-3)


@tk.kernel
def scale_f16(y, x: tk.Const, s):
    i = tk.index()
    y[i] = x[i] * s


# --- tk.adjoint's calling convention ------------------------------------------------------------

@tk.kernel
def mixed_args(y, x: tk.Const, idx: tk.Const, n, s, flag: tk.constexpr):
    i = tk.index()
    v = x[idx[i]] * s * n
    if flag:
        v = v * x[i]
    y[i] = v


def test_adjoint_by_hand_with_integer_arrays_int_scalars_and_keywords(be):
    """ints and constexprs take no shadow; non-differentiable parameters after the positional
    ones may go by keyword, as in a kernel launch (that was a TypeError)"""
    x = np.array([0.5, 1.0, 1.5, 2.0])
    idx = dev([3, 2, 1, 0], be, np.int32)
    adj = tk.adjoint(mixed_args)(be)
    xs = host(dev(x, be))
    for kw in (dict(), dict(flag=True)):
        dx, ds = dev(np.zeros(4), be), dev(np.zeros(1), be)
        pos = (dev(np.zeros(4), be), dev(np.ones(4), be), dev(x, be), dx, idx, 3, 0.5, ds) + (() if kw else (True,))
        adj(*pos, ndrange=4, **kw)
        np.testing.assert_allclose(host(dx), 1.5 * 2 * xs[::-1], rtol=1e-6)
        np.testing.assert_allclose(host(ds), 3 * (xs[::-1] * xs).sum(), rtol=1e-6)


def test_adjoint_argument_errors_show_how_the_arguments_were_read():
    cpu = tk.CPU()
    adj = tk.adjoint(mixed_args)(cpu)
    x, idx, ds = np.ones(4), np.arange(4, dtype=np.int32), np.zeros(1)
    with pytest.raises(tk.LaunchError, match=r"missing argument 'flag' \(its arguments are y, x, idx, n, s, flag, "
                                             r"each float array or float scalar followed by its shadow; the 8 "
                                             r"positional argument\(s\) given read as y, the shadow of 'y', x, "
                                             r"the shadow of 'x', idx, n, the shadow of 'n', s\)"):
        adj(np.zeros(4), np.ones(4), x, idx, 3, 0.5, ds, True, ndrange=4)       # the shadow of x forgotten
    with pytest.raises(tk.LaunchError, match=r"2 argument\(s\) too many"):
        adj(np.zeros(4), np.ones(4), x, np.zeros(4), idx, np.zeros(4, np.int32), 3, 0.5, ds, True, ndrange=4)
    with pytest.raises(tk.LaunchError, match="argument 's' is differentiable, so it goes positionally"):
        adj(np.zeros(4), np.ones(4), x, np.zeros(4), idx, 3, s=0.5, flag=True, ndrange=4)
    with pytest.raises(tk.LaunchError, match="no argument 'flg'"):
        adj(np.zeros(4), np.ones(4), x, np.zeros(4), idx, 3, 0.5, ds, flg=True, ndrange=4)
    with pytest.raises(tk.LaunchError, match="argument 'flag' is given twice"):
        adj(np.zeros(4), np.ones(4), x, np.zeros(4), idx, 3, 0.5, ds, True, flag=True, ndrange=4)


def test_read_only_shadows_are_refused_up_front_in_reverse_mode():
    """a read-only shadow (a JAX array, writeable=False) was found only at the adjoint's launch,
    after the primal ran, as an error about argument '_d_x' of kernel 'sq_reverse_threads'"""
    cpu = tk.CPU()
    ran = []

    def fn(y, x_):
        ran.append(1)
        early_return(cpu)(y, x_, ndrange=4)
    ro = np.zeros(4)
    ro.flags.writeable = False
    for k, args in ((1, (tk.Duplicated(np.zeros(4), np.ones(4)), tk.Duplicated(np.ones(4), ro))),
                    (0, (tk.Duplicated(np.zeros(4), ro), tk.Duplicated(np.ones(4), np.zeros(4))))):
        with pytest.raises(ValueError, match=rf"tk.autodiff: argument {k} \(tk.Duplicated\): the shadow is read-only"):
            tk.autodiff(tk.Reverse, fn, *args)
    assert ran == []
    with pytest.raises(tk.LaunchError, match=r"adjoint of 'early_return': the shadow of 'x' is read-only"):
        tk.adjoint(early_return)(cpu)(np.zeros(4), np.ones(4), np.ones(4), ro, ndrange=4)
    # forward mode only reads an input's tangent: a read-only one is fine
    dy = np.zeros(4)
    tk.autodiff(tk.Forward, fn, tk.Duplicated(np.zeros(4), dy), tk.Duplicated(np.ones(4), np.ones(4)[:]))
    dx_ro = np.ones(4)
    dx_ro.flags.writeable = False
    dy = np.zeros(4)
    tk.autodiff(tk.Forward, fn, tk.Duplicated(np.zeros(4), dy), tk.Duplicated(np.ones(4), dx_ro))
    np.testing.assert_array_equal(dy, 3.0)
    # ... but the tangent of an output is written
    with pytest.raises(tk.LaunchError, match="tk.autodiff: the tangent of argument 'out' of kernel 'early_return' is "
                                             "read-only"):
        tk.autodiff(tk.Forward, fn, tk.Duplicated(np.zeros(4), ro), tk.Duplicated(np.ones(4), np.ones(4)))
