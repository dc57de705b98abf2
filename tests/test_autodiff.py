"""Automatic differentiation, every case checked against central finite differences
(``tk.gradcheck``) or closed forms: the bug classes other kernel languages ship, stencils,
local-memory reductions, func chains, forward against reverse mode, and loud refusals."""
import math

import numpy as np
import pytest

import tinykernels as tk

CPU = tk.CPU()
RNG = np.random.default_rng(2024)


def D(x, seed=None):
    """A Duplicated float64 array with a zero (or given) shadow."""
    x = np.array(x, dtype=np.float64)
    return tk.Duplicated(x, np.zeros_like(x) if seed is None else np.array(seed, dtype=np.float64))


# --- dynamic loops with loop-carried values ---------------------------------------------------

@tk.kernel
def newton_sqrt(y, x: tk.Const, tol):
    i = tk.index()
    v = x[i]
    g = v                               # defined before the loop, carried through it
    steps = 0
    while abs(g * g - v) > tol * v and steps < 50:   # data-dependent trip count
        g = 0.5 * (g + v / g)
        steps += 1
    y[i] = g * 1.0 + 0.0 * steps        # used after the loop


def test_dynamic_while_loop_with_loop_carried_values():
    x = RNG.uniform(0.5, 30, 40)
    y = D(np.zeros(40), RNG.standard_normal(40))
    dx = D(x)
    tk.gradcheck(lambda y_, x_: newton_sqrt(CPU)(y_, x_, 1e-14, ndrange=40), y, dx, rtol=1e-5)
    # and the value: d sqrt(x) / dx = 1 / (2 sqrt(x))
    y2, dx2 = np.zeros(40), np.zeros(40)
    seed = np.ones(40)
    tk.autodiff(tk.Reverse, lambda a, b: newton_sqrt(CPU)(a, b, 1e-14, ndrange=40),
                tk.Duplicated(y2, seed.copy()), tk.Duplicated(x.copy(), dx2))
    np.testing.assert_allclose(dx2, 0.5 / np.sqrt(x), rtol=1e-7)


@tk.kernel
def grow(y, x: tk.Const):
    i = tk.index()
    g = x[i]
    while g < 20.0:                     # trip count depends on the data; values never converge
        g = g * 1.5 + math.sin(g) * x[i] * 0.1
    y[i] = g


def test_dynamic_while_loop_that_does_not_converge():
    x = RNG.uniform(1.0, 3.0, 30)
    tk.gradcheck(lambda y, x_: grow(CPU)(y, x_, ndrange=30), D(np.zeros(30), RNG.standard_normal(30)), D(x),
                 eps=1e-7, rtol=1e-5)


@tk.kernel
def series(y, x: tk.Const, n):
    i = tk.index()
    acc = 0.0
    term = 1.0
    for k in range(1, n):
        term = term * x[i] / k
        if k % 3 == 0:
            continue                    # continue inside a differentiated loop
        acc += term
        if acc > 50.0:
            break                       # break inside a differentiated loop
    y[i] = acc + term


def test_for_loop_with_break_and_continue():
    x = RNG.uniform(0.1, 4.0, 33)
    tk.gradcheck(lambda y, x_: series(CPU)(y, x_, 25, ndrange=33),
                 D(np.zeros(33), RNG.standard_normal(33)), D(x), rtol=1e-5)


# --- in-place updates --------------------------------------------------------------------------

@tk.kernel
def inplace(A, B: tk.Const):
    i = tk.index()
    A[i] *= A[i]
    A[i] /= B[i] + 2.0
    A[i] *= B[i]


def test_in_place_multiply_and_divide():
    a = RNG.standard_normal(50)
    b = RNG.uniform(0.5, 2.0, 50)
    tk.gradcheck(lambda A, B: inplace(CPU)(A, B, ndrange=50), D(a, RNG.standard_normal(50)), D(b), rtol=1e-5)
    A, dA = a.copy(), np.ones(50)
    tk.autodiff(tk.Reverse, lambda A_, B_: inplace(CPU)(A_, B_, ndrange=50), tk.Duplicated(A, dA), tk.Const(b))
    np.testing.assert_allclose(A, a * a / (b + 2) * b)               # primal result kept
    np.testing.assert_allclose(dA, 2 * a / (b + 2) * b)              # gradient wrt the old A


# --- across launches -------------------------------------------------------------------------------

@tk.kernel
def scale_into(B, A: tk.Const, s):
    i = tk.index()
    B[i] = A[i] * s


@tk.kernel
def overwrite(A, c):
    i = tk.index()
    A[i] = math.sin(A[i]) + c


def test_write_after_read_across_launches():
    a = RNG.standard_normal(30)

    def f(A, B, s):
        scale_into(CPU)(B, A, s, ndrange=30)       # reads A ...
        overwrite(CPU)(A, 1.0, ndrange=30)         # ... which the next launch overwrites
        scale_into(CPU)(B, A, s, ndrange=30)       # and B is written twice
    A, B = D(a, RNG.standard_normal(30)), D(np.zeros(30), RNG.standard_normal(30))
    tk.gradcheck(f, A, B, tk.Active(0.7), rtol=1e-5)


def test_temporaries_made_inside_fn_carry_gradients():
    a = RNG.standard_normal(20)

    def f(A, out):
        tmp = np.zeros(20)                          # a temporary: it gets a shadow of its own
        scale_into(CPU)(tmp, A, 3.0, ndrange=20)
        overwrite(CPU)(tmp, 0.5, ndrange=20)
        scale_into(CPU)(out, tmp, 2.0, ndrange=20)
    A, out = D(a), D(np.zeros(20), np.ones(20))
    tk.autodiff(tk.Reverse, f, A, out)
    np.testing.assert_allclose(A.shadow, 2 * np.cos(3 * a) * 3, rtol=1e-12)


# --- scalar gradients ---------------------------------------------------------------------------

@tk.kernel
def poly(y, x: tk.Const, a, b):
    i = tk.index()
    y[i] = a * x[i] * x[i] + math.exp(b * x[i])


def test_scalar_gradients_are_returned():
    x = RNG.uniform(-1, 1, 64)
    w = RNG.standard_normal(64)
    y = D(np.zeros(64), w)
    ga, gb = tk.autodiff(tk.Reverse, lambda y_, x_, a, b: poly(CPU)(y_, x_, a, b, ndrange=64),
                         y, tk.Const(x), tk.Active(1.5), tk.Active(-0.3))
    np.testing.assert_allclose(ga, (w * x * x).sum(), rtol=1e-12)
    np.testing.assert_allclose(gb, (w * x * np.exp(-0.3 * x)).sum(), rtol=1e-12)


# --- stencils, funcs, local memory ---------------------------------------------------------------

@tk.kernel
def diffuse(T2, T: tk.Const, lam):
    i, j = tk.index(tk.Global, tk.Cartesian)
    T2[i, j] = T[i, j] + lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1] + T[i, j + 1] - 4.0 * T[i, j])


def test_2d_stencil_with_neighbour_reads():
    T = RNG.standard_normal((12, 14))
    f = lambda T2, T_, lam: diffuse(CPU)(T2, T_, lam, ndrange=(range(1, 11), range(1, 13)))  # noqa: E731
    tk.gradcheck(f, D(np.zeros((12, 14)), RNG.standard_normal((12, 14))), D(T), tk.Active(0.2), rtol=1e-6)


@tk.func
def soft(v, t):
    return v / (1.0 + abs(v) / t)


@tk.func
def chain(v, t):
    w = soft(v, t) * soft(v * v, t)
    if w > 0:
        return math.tanh(w), w
    return math.atan(w), -w


@tk.kernel
def use_chain(y, x: tk.Const, t):
    i = tk.index()
    a, b = chain(x[i], t)
    y[i] = a + 0.5 * b


def test_func_chains():
    x = RNG.standard_normal(45)
    tk.gradcheck(lambda y, x_, t: use_chain(CPU)(y, x_, t, ndrange=45),
                 D(np.zeros(45), RNG.standard_normal(45)), D(x), tk.Active(1.3), rtol=1e-5)


@tk.kernel
def local_reduce(out, x: tk.Const, WG: tk.constexpr):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float64, (WG,))
    buf[lid] = math.sin(x[tk.index()]) * x[tk.index()]
    tk.synchronize()
    s = WG // 2
    while s > 0:
        if lid < s:
            buf[lid] = buf[lid] * 0.5 + buf[lid + s] * buf[lid + s]
        tk.synchronize()
        s //= 2
    if lid == 0:
        out[tk.index(tk.Group, tk.Linear)] = buf[0]


@pytest.mark.parametrize("wg", [8, 32])
def test_local_memory_reduction_with_barriers_in_a_loop(wg):
    x = RNG.uniform(-1, 1, wg * 5)
    tk.gradcheck(lambda o, x_: local_reduce(CPU, wg)(o, x_, wg, ndrange=x.size),
                 D(np.zeros(5), RNG.standard_normal(5)), D(x), rtol=1e-5)


@tk.kernel
def accumulate(total, x: tk.Const):
    i = tk.index()
    tk.atomic_add(total, i % 3, x[i] * x[i])


def test_atomic_add_differentiates():
    x = RNG.standard_normal(60)
    tk.gradcheck(lambda t, x_: accumulate(CPU)(t, x_, ndrange=60), D(np.zeros(3), [1.0, -2.0, 0.5]), D(x))


# --- forward mode ----------------------------------------------------------------------------------

def test_forward_mode_agrees_with_reverse_mode():
    x = RNG.standard_normal(45)
    v = RNG.standard_normal(45)            # tangent direction
    w = RNG.standard_normal(45)            # output weights
    # JVP: y_dot = J v
    y, ydot = np.zeros(45), np.zeros(45)
    tk.autodiff(tk.Forward, lambda y_, x_, t: use_chain(CPU)(y_, x_, t, ndrange=45),
                tk.Duplicated(y, ydot), tk.Duplicated(x.copy(), v.copy()), tk.Const(1.3))
    # VJP: x_bar = J^T w
    y2, xbar = np.zeros(45), np.zeros(45)
    tk.autodiff(tk.Reverse, lambda y_, x_, t: use_chain(CPU)(y_, x_, t, ndrange=45),
                tk.Duplicated(y2, w.copy()), tk.Duplicated(x.copy(), xbar), tk.Const(1.3))
    np.testing.assert_allclose(y, y2)
    np.testing.assert_allclose(w @ ydot, xbar @ v, rtol=1e-10)


def test_forward_mode_through_loops_and_local_memory():
    x = RNG.uniform(-1, 1, 64)
    v = RNG.standard_normal(64)
    out, dout = np.zeros(2), np.zeros(2)
    tk.autodiff(tk.Forward, lambda o, x_: local_reduce(CPU, 32)(o, x_, 32, ndrange=64),
                tk.Duplicated(out, dout), tk.Duplicated(x.copy(), v))
    h = 1e-6

    def f(xx):
        o = np.zeros(2)
        local_reduce(CPU, 32)(o, xx, 32, ndrange=64)
        return o
    np.testing.assert_allclose(dout, (f(x + h * v) - f(x - h * v)) / (2 * h), rtol=1e-6)


# --- tk.adjoint ------------------------------------------------------------------------------------

def test_adjoint_kernel_by_hand():
    x = RNG.standard_normal(16)
    y, dy = np.zeros(16), np.ones(16)
    dx, da = np.zeros(16), np.zeros(1)
    tk.adjoint(scale_into)(CPU)(y, dy, x, dx, 2.5, da, ndrange=16)
    np.testing.assert_allclose(dx, np.full(16, 2.5))
    np.testing.assert_allclose(da[0], x.sum())
    assert (dy == 0).all()                       # the output's shadow was consumed
    with pytest.raises(tk.LaunchError, match="shadow"):
        tk.adjoint(scale_into)(CPU)(y, dy, x, dx, 2.5, ndrange=16)


# --- integers and loud refusals ---------------------------------------------------------------------

@tk.kernel
def with_ints(y, x: tk.Const, idx: tk.Const):
    i = tk.index()
    k = idx[i] * 2 + int(x[i] > 0)
    y[i] = x[i] * k


def test_integer_values_have_zero_gradient():
    x = RNG.standard_normal(20)
    idx = np.arange(20, dtype=np.int32)
    tk.gradcheck(lambda y, x_, i_: with_ints(CPU)(y, x_, i_, ndrange=20),
                 D(np.zeros(20), np.ones(20)), D(x), tk.Const(idx))


def test_float_atomic_max_is_refused():
    @tk.kernel
    def mx(m, x: tk.Const):
        tk.atomic_max(m, 0, x[tk.index()])
    with pytest.raises(tk.CompileError, match="atomic_max"):
        tk.autodiff(tk.Reverse, lambda m, x: mx(CPU)(m, x, ndrange=4), D(np.zeros(1), [1.0]), D(np.ones(4)))


def test_group_collectives_without_a_derivative_rule_are_refused():
    """Float group sums, scans and min/max differentiate (test_autodiff_correctness.py); a product,
    a max-scan and an integer collective are a CompileError in both modes."""
    @tk.kernel
    def red(o, x: tk.Const, op: tk.constexpr):
        i = tk.index()
        if op == 0:
            o[i] = tk.group_reduce(x[i], "mul")
        elif op == 1:
            o[i] = tk.group_scan(x[i], "max")
        else:
            o[i] = x[i] * tk.group_reduce(int(x[i]), "add")
    for op, msg in ((0, "op 'mul'"), (1, "op 'max'"), (2, "of an integer")):
        for mode in (tk.Reverse, tk.Forward):
            with pytest.raises(tk.CompileError, match=msg):
                tk.autodiff(mode, lambda o, x: red(CPU, 4)(o, x, op, ndrange=4), D(np.zeros(4), np.ones(4)),
                            D(np.ones(4)))


def test_gradcheck_catches_a_wrong_gradient():
    # a kernel whose adjoint is right, checked against a wrong loss: gradcheck must fail
    x = RNG.standard_normal(8)

    def f(y, x_):
        scale_into(CPU)(y, x_, 2.0, ndrange=8)
        y += 1e-3 * x_ ** 2          # a host-side change autodiff cannot see
    with pytest.raises(AssertionError, match="gradcheck failed"):
        tk.gradcheck(f, D(np.zeros(8), np.ones(8)), D(x), rtol=1e-7, atol=1e-9)


def test_gradcheck_refuses_a_check_that_cannot_fail():
    # with no differentiable input, or with every seed zero (loss identically 0), gradcheck
    # returned True whatever the gradients were; even this wrong one passed:
    x = RNG.standard_normal(8)

    def f(y, x_):
        scale_into(CPU)(y, x_, 2.0, ndrange=8)
        y *= 3                         # invisible to autodiff
    with pytest.raises(ValueError, match="every tk.Duplicated shadow is zero on entry"):
        tk.gradcheck(f, D(np.zeros(8), np.zeros(8)), D(x))
    with pytest.raises(ValueError, match="no argument is a float tk.Duplicated array or a tk.Active"):
        tk.gradcheck(f, np.zeros(8), tk.Const(x))
    with pytest.raises(ValueError, match="no argument is a float tk.Duplicated"):
        tk.gradcheck(lambda y, x_: None, tk.Duplicated(np.zeros(8, np.int64), np.ones(8, np.int64)), np.arange(8))
    with pytest.raises(AssertionError, match="gradcheck failed"):
        tk.gradcheck(f, D(np.zeros(8), np.ones(8)), D(x))
    assert tk.gradcheck(lambda y, x_: scale_into(CPU)(y, x_, 2.0, ndrange=8), D(np.zeros(8), np.ones(8)), D(x))


def test_api_misuse_is_a_clear_error():
    """tk.adjoint of a non-kernel (a plain function, a @tk.func) and a non-callable fn are
    TypeErrors saying what was expected (they were AttributeErrors, or an adjoint object that
    failed later); tk.autodiff inside tk.autodiff is refused up front instead of a CompileError
    about the adjoint's tape arrays."""
    with pytest.raises(TypeError, match="expects a @tk.kernel, got function"):
        tk.adjoint(lambda x: x)
    with pytest.raises(TypeError, match="@tk.func is differentiated through the kernels"):
        tk.adjoint(tk.func(lambda x: x))
    with pytest.raises(TypeError, match="fn must be callable"):
        tk.autodiff(tk.Reverse, 3, D([1.0]))
    x, y = D(RNG.standard_normal(4)), D(np.zeros(4), np.ones(4))

    def inner(yy, xx, a):
        tk.autodiff(tk.Reverse, lambda *p: scale_into(CPU)(*p, ndrange=4), D(np.zeros(4), np.ones(4)),
                    D(xx), tk.Active(a))

    with pytest.raises(NotImplementedError, match="inside tk.autodiff"):
        tk.autodiff(tk.Reverse, inner, y, x, tk.Active(2.0))
    # the failed call left no recording behind
    assert tk.autodiff(tk.Reverse, lambda *p: scale_into(CPU)(*p, ndrange=4), y, x, tk.Active(2.0))[0] != 0


@tk.func
def _step_size(g, x):
    if g > 10.0:                        # a func with statements, called in the while condition
        return g * 0.0 + 1.0
    return math.sin(g) * x + 2.0


@tk.kernel
def grow_func_cond(y, x: tk.Const):
    i = tk.index()
    g = x[i]
    k = 0
    while g < 30.0 - _step_size(g, x[i]) and k < 40:   # statements in the condition, a value in it too
        g = g * 1.5 + math.sin(g) * x[i] * 0.1
        k += 1
        if g > 25.0:
            continue                    # tests the condition (and runs its func) again
        g = g + 0.5 * x[i]
    y[i] = g


def test_while_loop_whose_condition_runs_a_func():
    """The condition's statements run before every test (``while True: ...; if not c: break``):
    both modes against finite differences (and forward against reverse)."""
    x = RNG.uniform(1.0, 3.0, 30)
    tk.gradcheck(lambda y, x_: grow_func_cond(CPU)(y, x_, ndrange=30), D(np.zeros(30), RNG.standard_normal(30)),
                 D(x), eps=1e-7, rtol=1e-5)
    run = lambda y, x_: grow_func_cond(CPU)(y, x_, ndrange=30)  # noqa: E731
    dx = np.zeros(30)
    tk.autodiff(tk.Reverse, run, tk.Duplicated(np.zeros(30), np.ones(30)), tk.Duplicated(x.copy(), dx))
    dy = np.zeros(30)                   # elementwise: both modes give the diagonal
    tk.autodiff(tk.Forward, run, tk.Duplicated(np.zeros(30), dy), tk.Duplicated(x.copy(), np.ones(30)))
    np.testing.assert_allclose(dy, dx, rtol=1e-12)
    assert np.all(dx != 0.0)
