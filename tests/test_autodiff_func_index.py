"""In-place updates inside a @tk.func that receives the work item's index as a parameter and
is called in a loop (adx20). The func's parameter is a local assigned at every call, so the
cross-item check (passes/overwrites.py) refused ``for k in range(3): acc_into(out, i, v)`` as a
possibly cross-item write; it now follows the argument each call passes (always the item's own
index there) and differentiates it, while every call that can reach another item's element (an
offset index beside the own one, a gathered index, a loop variable, a parameter reassigned in
the func) stays refused. Gradients and tangents against float64 central differences."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params
from test_ported_autodiff import check_forward, check_reverse

RNG = np.random.default_rng(2020)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL'), scope="module")
def be(request):
    return tk.backend(request.param)


def both_modes(be, fn, args, seeds, wrt):
    check_reverse(be, fn, args, seeds, wrt=wrt)
    check_forward(be, fn, args, {k: RNG.standard_normal(args[k].shape) for k in wrt}, outs=list(seeds))


@tk.func
def acc_into(out, i, v):
    out[i] += v


@tk.func
def mix_into(out, i, v):
    """out[i] read twice and rewritten: the old value enters nonlinearly (the tape restores it)."""
    out[i] = out[i] * 0.5 + v * out[i]


@tk.func
def scale_twice(out, j, x, w):
    """A func that itself calls another in its own loop with the index it was given."""
    for m in range(2):
        mix_into(out, j, w * x[j])


@tk.kernel
def loop_acc(out, x: tk.Const, w: tk.Const):
    i = tk.index()
    for k in range(3):
        acc_into(out, i, x[i] * x[i] * w[k])
    out[i] = out[i] * x[i]


@tk.kernel
def loop_mix_nested(out, x: tk.Const, w: tk.Const):
    i = tk.index()
    for k in range(2):
        scale_twice(out, i, x, w[k])


@tk.func
def mix2(A, r, c, v):
    A[r, c] = A[r, c] * v + v


@tk.kernel
def loop_mix_2d(A, B: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    for k in range(2):
        mix2(A, i, j, B[i, j] * float(k + 1))
    A[i, j] *= B[i, j]


@tk.kernel
def loop_acc_offset(out, x: tk.Const, off):
    """Every access of out at i + off (a scalar argument): distinct items, distinct elements."""
    i = tk.index()
    for k in range(3):
        acc_into(out, i + off, x[i] * out[i + off])


@tk.kernel
def local_reassigned_same(out, x: tk.Const):
    """j assigned the item's index again on every trip: one value wherever read."""
    i = tk.index()
    for k in range(3):
        j = i
        out[j] = out[j] * x[i] + 1.0


def test_a_func_called_in_a_loop_with_the_own_index_differentiates(be):
    x, w = RNG.uniform(-1, 1, 6), RNG.uniform(-1, 1, 3)
    fn = lambda o, x_, w_: loop_acc(be)(o, x_, w_, ndrange=6)  # noqa: E731
    both_modes(be, fn, [RNG.standard_normal(6), x, w], {0: RNG.standard_normal(6)}, wrt=[0, 1, 2])


def test_nested_funcs_in_loops_pass_the_own_index_through(be):
    x, w = RNG.uniform(-1, 1, 5), RNG.uniform(-1, 1, 2)
    fn = lambda o, x_, w_: loop_mix_nested(be)(o, x_, w_, ndrange=5)  # noqa: E731
    both_modes(be, fn, [RNG.standard_normal(5), x, w], {0: RNG.standard_normal(5)}, wrt=[0, 1, 2])


def test_a_func_called_in_a_loop_with_the_cartesian_index_differentiates(be):
    fn = lambda A, B: loop_mix_2d(be)(A, B, ndrange=(3, 4))  # noqa: E731
    both_modes(be, fn, [RNG.standard_normal((3, 4)), RNG.uniform(-1, 1, (3, 4))],
               {0: RNG.standard_normal((3, 4))}, wrt=[0, 1])


def test_a_func_called_in_a_loop_at_one_shared_offset_differentiates(be):
    fn = lambda o, x_: loop_acc_offset(be)(o, x_, 2, ndrange=5)  # noqa: E731
    both_modes(be, fn, [RNG.standard_normal(7), RNG.uniform(-1, 1, 5)], {0: RNG.standard_normal(7)}, wrt=[0, 1])


def test_a_local_reassigned_the_own_index_in_a_loop_differentiates(be):
    fn = lambda o, x_: local_reassigned_same(be)(o, x_, ndrange=5)  # noqa: E731
    both_modes(be, fn, [RNG.standard_normal(5), RNG.uniform(-1, 1, 5)], {0: RNG.standard_normal(5)}, wrt=[0, 1])


def test_the_reverse_sweep_adds_the_own_elements_gradient_without_atomics():
    """The adjoint's own-element test follows the same locals: dout[i] is a plain add."""
    from tinykernels.autodiff import derived
    z = np.zeros(4)
    src = derived(loop_acc, "reverse", ("out", "x")).source(
        "CPU", z, z, z, z, np.zeros(3), np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64), ndrange=4)
    body = src[src.index("a__d_out = "):]
    assert "a__d_out[" in body and "tk_atomic_add_f64(&a__d_out" not in body


# --- what stays refused ------------------------------------------------------------------------

@tk.func
def shift_acc(out, i, n, v):
    """The parameter reassigned inside the func: item n - 2 and item n - 1 both write out[n - 1]."""
    if i + 1 < n:
        i = i + 1
    out[i] += v


@tk.kernel
def own_and_next(out, x: tk.Const):
    i = tk.index()
    for k in range(2):
        acc_into(out, i, x[i])
        acc_into(out, i + 1, x[i])


@tk.kernel
def gathered(out, x: tk.Const, idx: tk.Const):
    i = tk.index()
    for k in range(2):
        acc_into(out, idx[i], x[i])


@tk.kernel
def by_loop_variable(out, x: tk.Const):
    i = tk.index()
    for k in range(2):
        acc_into(out, k, x[i])


@tk.kernel
def own_plus_loop_variable(out, x: tk.Const):
    i = tk.index()
    for k in range(2):
        acc_into(out, i + k, x[i])


@tk.kernel
def reassigned_in_func(out, x: tk.Const, n):
    i = tk.index()
    for k in range(2):
        shift_acc(out, i, n, x[i])


@tk.kernel
def local_changes_between_trips(out, x: tk.Const):
    i = tk.index()
    j = i
    for k in range(2):
        out[j] += x[i]
        j = i + 1


@tk.kernel
def read_own_write_via_func_next(out, x: tk.Const):
    i = tk.index()
    for k in range(2):
        acc_into(out, i + 1, x[i] * out[i])


REFUSED = [
    (own_and_next, lambda k, be, o, x: k(be)(o, x, ndrange=4), "out[i] += v"),
    (gathered, lambda k, be, o, x: k(be)(o, x, np.array([1, 0, 3, 2], np.int32), ndrange=4), "out[i] += v"),
    (by_loop_variable, lambda k, be, o, x: k(be)(o, x, ndrange=4), "out[i] += v"),
    (own_plus_loop_variable, lambda k, be, o, x: k(be)(o, x, ndrange=4), "out[i] += v"),
    (reassigned_in_func, lambda k, be, o, x: k(be)(o, x, 4, ndrange=4), "out[i] += v"),
    (local_changes_between_trips, lambda k, be, o, x: k(be)(o, x, ndrange=4), "out[j] += x[i]"),
    (read_own_write_via_func_next, lambda k, be, o, x: k(be)(o, x, ndrange=4), "out[i]"),
]


@pytest.mark.parametrize("kernel, call, line", REFUSED, ids=[r[0].name for r in REFUSED])
@pytest.mark.parametrize("mode", [tk.Reverse, tk.Forward], ids=["reverse", "forward"])
def test_calls_that_may_reach_another_items_element_stay_refused(kernel, call, line, mode):
    be = tk.CPU()
    with pytest.raises(tk.CompileError, match="'out' is both read and written") as e:
        tk.autodiff(mode, lambda o, x: call(kernel, be, o, x),
                    tk.Duplicated(np.zeros(5), np.ones(5)), tk.Duplicated(np.ones(4), np.zeros(4)))
    assert line in str(e.value)
