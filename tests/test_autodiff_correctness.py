"""Autodiff is right or loud (issue 11): every case here was silently wrong once. Each runs on
every backend available (CPU, INTERP, CL, WEBGPU), in float64 where the backend has it and
float32 otherwise, and is checked against central finite differences or closed forms, or
expects the error that refuses it."""
import math
import warnings

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, dev, fdt, host  # noqa: F401

RNG = np.random.default_rng(11)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL', 'WEBGPU'), scope="module")
def be(request):
    return tk.backend(request.param)


def tol(be):
    return dict(rtol=1e-10, atol=1e-12) if be.supports_float64 else dict(rtol=2e-5, atol=1e-5)


@tk.kernel
def square_into(b, a: tk.Const):
    i = tk.index()
    b[i] = a[i] * a[i]


@tk.kernel
def fill(a, v):
    i = tk.index()
    a[i] = v


@tk.kernel
def scale(y, x: tk.Const, s):
    i = tk.index()
    y[i] = s * x[i]


@tk.kernel
def sin_inplace(a):
    i = tk.index()
    a[i] = math.sin(a[i])


# --- 1. values read by a launch and overwritten later ------------------------------------------

def test_a_value_overwritten_by_a_later_launch_is_differentiated_at_its_old_value(be):
    def f(a, b):
        square_into(be)(b, a, ndrange=3)       # reads a non-linearly ...
        fill(be)(a, 7.0, ndrange=3)            # ... then a is overwritten
    A, dA = dev([1, 2, 3], be), dev(np.zeros(3), be)
    B, dB = dev(np.zeros(3), be), dev(np.ones(3), be)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(A, dA), tk.Duplicated(B, dB))
    np.testing.assert_allclose(host(dA), [2, 4, 6], **tol(be))
    np.testing.assert_allclose(host(A), [7, 7, 7])           # primal results are put back
    np.testing.assert_allclose(host(B), [1, 4, 9])


def test_a_scalar_gradient_sees_values_overwritten_later(be):
    x0 = RNG.standard_normal(5)

    def f(y, x, s):
        scale(be)(y, x, s, ndrange=5)          # y = s * x
        fill(be)(x, 0.0, ndrange=5)            # x[:] = 0
    Y, X = dev(np.zeros(5), be), dev(x0, be)
    (ds,) = tk.autodiff(tk.Reverse, f, tk.Duplicated(Y, dev(np.ones(5), be)), tk.Duplicated(X, dev(np.zeros(5), be)),
                        tk.Active(1.5))
    np.testing.assert_allclose(ds, host(dev(x0, be)).sum(), **tol(be))


def test_overwritten_by_a_later_in_place_launch_and_a_host_copy(be):
    x0 = RNG.uniform(-1, 1, 6)

    def f(y, x, z):
        square_into(be)(y, x, ndrange=6)       # y = x^2
        sin_inplace(be)(x, ndrange=6)          # x = sin(x), in place
        square_into(be)(z, x, ndrange=6)       # z = sin(x)^2
        tk.copyto(x, z)                        # x = z (a host copy overwrites x again)
        sin_inplace(be)(x, ndrange=6)          # x = sin(z)
    X = dev(x0, be)
    seed = lambda: dev(RNG.standard_normal(6), be)  # noqa: E731
    args = (tk.Duplicated(dev(np.zeros(6), be), seed()), tk.Duplicated(X, seed()),
            tk.Duplicated(dev(np.zeros(6), be), seed()))
    tk.gradcheck(f, *args)


def test_programs_that_never_read_what_they_overwrite_take_no_copies(monkeypatch):
    import importlib
    ad = importlib.import_module("tinykernels.autodiff")
    cpu, taken, real = tk.CPU(), [], ad._copy
    monkeypatch.setattr(ad, "_copy", lambda a: taken.append(a) or real(a))

    def f(y, x, t):
        scale(cpu)(t, x, 2.0, ndrange=4)       # t written, never read before
        scale(cpu)(y, t, 3.0, ndrange=4)       # y written, never read
    y, t, dx = np.zeros(4), np.zeros(4), np.zeros(4)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(y, np.ones(4)), tk.Duplicated(np.ones(4), dx), tk.Const(t))
    assert taken == []
    np.testing.assert_allclose(y, 6.0)            # the results are the primal ones
    np.testing.assert_allclose(dx, 6.0)

    def g(y, x, t):                                # t written twice: its final value is kept
        scale(cpu)(t, x, 2.0, ndrange=4)
        scale(cpu)(t, x, 5.0, ndrange=2)
        scale(cpu)(y, t, 3.0, ndrange=4)
    y, t, dx = np.zeros(4), np.zeros(4), np.zeros(4)
    tk.autodiff(tk.Reverse, g, tk.Duplicated(y, np.ones(4)), tk.Duplicated(np.ones(4), dx), tk.Const(t))
    assert len(taken) == 1
    np.testing.assert_allclose(t, [5, 5, 2, 2])
    np.testing.assert_allclose(y, [15, 15, 6, 6])
    np.testing.assert_allclose(dx, [15, 15, 6, 6])


# --- 3. aliasing ----------------------------------------------------------------------------------------

@tk.kernel
def sq_plus_one(y, x):
    i = tk.index()
    y[i] = x[i] * x[i] + 1.0


def test_the_same_array_passed_twice_with_one_written_is_refused(be):
    A = dev([2.0, 3.0], be)
    with pytest.raises(tk.LaunchError, match="'y' and argument 'x' share memory"):
        tk.autodiff(tk.Reverse, lambda a: sq_plus_one(be)(a, a, ndrange=2), tk.Duplicated(A, dev([1.0, 1.0], be)))


def test_overlapping_views_passed_to_one_launch_are_refused():
    a = np.arange(6.0)
    with pytest.raises(tk.LaunchError, match="share memory"):
        tk.autodiff(tk.Reverse, lambda x: sq_plus_one(tk.CPU())(x[1:4], x[0:3], ndrange=3),
                    tk.Duplicated(a, np.zeros(6)))


def test_a_view_of_an_array_that_carries_gradients_is_refused():
    x = np.arange(6.0)
    with pytest.raises(ValueError, match="view that overlaps a tk.Duplicated array"):
        tk.autodiff(tk.Reverse, lambda y, x_: square_into(tk.CPU())(y, x_[1:4], ndrange=3),
                    tk.Duplicated(np.zeros(3), np.ones(3)), tk.Duplicated(x, np.zeros(6)))

    def f(y, x_):                              # a temporary written whole, then read through a view
        t = np.zeros(6)
        square_into(tk.CPU())(t, x_, ndrange=6)
        square_into(tk.CPU())(y, t[:3], ndrange=3)
    with pytest.raises(ValueError, match="view that overlaps an array written earlier"):
        tk.autodiff(tk.Reverse, f, tk.Duplicated(np.zeros(3), np.ones(3)), tk.Duplicated(x, np.zeros(6)))


def test_a_tk_array_wrapping_a_duplicated_numpy_array_shares_its_shadow():
    x0 = RNG.standard_normal(4)
    y, dy, x, dx = np.zeros(4), np.ones(4), x0.copy(), np.zeros(4)
    tk.autodiff(tk.Reverse, lambda y_, x_: square_into(tk.CPU())(tk.asarray(y_), tk.asarray(x_), ndrange=4),
                tk.Duplicated(y, dy), tk.Duplicated(x, dx))
    np.testing.assert_allclose(dx, 2 * x0)


def test_reading_the_same_array_through_two_arguments_is_fine(be):
    @tk.kernel
    def mul(y, a: tk.Const, b: tk.Const):
        i = tk.index()
        y[i] = a[i] * b[i]
    x0 = RNG.standard_normal(5)
    X, dX = dev(x0, be), dev(np.zeros(5), be)
    tk.autodiff(tk.Reverse, lambda y, x: mul(be)(y, x, x, ndrange=5),
                tk.Duplicated(dev(np.zeros(5), be), dev(np.ones(5), be)), tk.Duplicated(X, dX))
    np.testing.assert_allclose(host(dX), 2 * host(dev(x0, be)), **tol(be))


def test_duplicated_arrays_and_shadows_that_share_memory_are_refused():
    a, da = np.ones(4), np.zeros(4)
    f = lambda *xs: None  # noqa: E731
    with pytest.raises(ValueError, match="share memory"):
        tk.autodiff(tk.Reverse, f, tk.Duplicated(a, da), tk.Duplicated(a, np.zeros(4)))
    with pytest.raises(ValueError, match="share memory"):
        tk.autodiff(tk.Reverse, f, tk.Duplicated(a, da), tk.Duplicated(np.ones(4), da))
    with pytest.raises(ValueError, match="shadow shares memory with the array"):
        tk.Duplicated(a, a)


# --- 4. shadows checked against their arrays ------------------------------------------------------------

def test_a_shadow_of_the_wrong_dtype_shape_or_device_is_refused(be):
    a = dev(np.ones(8), be)
    with pytest.raises(ValueError, match="dtype"):
        tk.Duplicated(a, dev(np.zeros(8), be, np.float16))
    with pytest.raises(ValueError, match="shape"):
        tk.Duplicated(a, dev(np.zeros(3), be))
    if not be.is_host:
        with pytest.raises(ValueError, match="lives in host memory"):
            tk.Duplicated(a, np.zeros(8, fdt(be)))


def test_tk_adjoint_checks_shadows_too(be):
    x, y = dev(np.ones(8), be), dev(np.zeros(8), be)
    adj = tk.adjoint(scale)(be)
    with pytest.raises(tk.LaunchError, match="shadow of 'x'.*shape"):
        adj(y, dev(np.ones(8), be), x, dev(np.zeros(3), be), 2.0, dev(np.zeros(1), be), ndrange=8)
    with pytest.raises(tk.LaunchError, match="shadow of 'y'.*dtype"):
        adj(y, dev(np.ones(8), be, np.float16), x, dev(np.zeros(8), be), 2.0, dev(np.zeros(1), be), ndrange=8)
    with pytest.raises(tk.LaunchError, match="shadow of 's'"):
        adj(y, dev(np.ones(8), be), x, dev(np.zeros(8), be), 2.0, dev(np.zeros(3), be), ndrange=8)


def test_a_duplicated_scalar_in_reverse_mode_is_refused():
    with pytest.raises(ValueError, match="tk.Active"):
        tk.autodiff(tk.Reverse, lambda s: None, tk.Duplicated(1.5, 0.0))


def test_an_active_scalar_in_forward_mode_is_refused():
    """Forward mode returns no gradients: tk.Active there was silently taken as a constant
    (the user's scalar derivative was lost); the error names tk.Duplicated, which carries a
    scalar's tangent, and a tangent so given reaches the output."""
    y, x = np.zeros(3), np.arange(3.0)
    with pytest.raises(ValueError, match=r"argument 1: tk.Active .* forward .* tk.Duplicated\(s, ds\)"):
        tk.autodiff(tk.Forward, lambda y_, s, x_: scale(tk.CPU())(y_, x_, s, ndrange=3),
                    tk.Duplicated(y, np.zeros(3)), tk.Active(2.0), tk.Const(x))
    dy = np.zeros(3)
    tk.autodiff(tk.Forward, lambda y_, s, x_: scale(tk.CPU())(y_, x_, s, ndrange=3),
                tk.Duplicated(y, dy), tk.Duplicated(2.0, 1.0), tk.Const(x))
    np.testing.assert_allclose(dy, x)                  # d(s * x)/ds = x


# --- 5. host-side copies ---------------------------------------------------------------------------------

def test_tk_copyto_inside_fn_is_differentiated(be):
    x0 = RNG.standard_normal(5)

    def f(y, x):
        z = dev(np.zeros(5), be)
        tk.copyto(z, x)                        # z = x
        square_into(be)(y, z, ndrange=5)       # y = z^2 ...
        tk.copyto(z, y)                        # ... z = y overwrites what the launch read
        scale(be)(y, z, 0.5, ndrange=5)        # y = x^2 / 2 ... plus x through z
    Y, X, dX = dev(np.zeros(5), be), dev(x0, be), dev(np.zeros(5), be)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(Y, dev(np.ones(5), be)), tk.Duplicated(X, dX))
    np.testing.assert_allclose(host(dX), host(dev(x0, be)), **tol(be))      # d(x^2/2)/dx = x
    np.testing.assert_allclose(host(Y), 0.5 * host(dev(x0, be)) ** 2, **tol(be))


def test_tk_copyto_in_forward_mode_carries_the_tangent(be):
    x0, v = RNG.standard_normal(4), RNG.standard_normal(4)

    def f(y, x):
        z = dev(np.zeros(4), be)
        tk.copyto(z, x)
        square_into(be)(y, z, ndrange=4)
    Y, dY = dev(np.zeros(4), be), dev(np.zeros(4), be)
    tk.autodiff(tk.Forward, f, tk.Duplicated(Y, dY), tk.Duplicated(dev(x0, be), dev(v, be)))
    np.testing.assert_allclose(host(dY), 2 * host(dev(x0, be)) * host(dev(v, be)), **tol(be))


@tk.kernel
def square2d(b, a: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    b[i, j] = a[i, j] * a[i, j]


def test_broadcasting_tk_copyto_sums_the_gradient_back(be):
    """z (2, 3) = x (3,) broadcast, y = z^2: dL/dx sums over the broadcast rows (2 * 2x); a
    0-d source gets the sum over everything; forward mode broadcasts the tangent."""
    x0, v = RNG.standard_normal(3), RNG.standard_normal(3)

    def f(y, x):
        z = dev(np.zeros((2, 3)), be)
        tk.copyto(z, x)
        square2d(be)(y, z, ndrange=(2, 3))
    Y, dX = dev(np.zeros((2, 3)), be), dev(np.zeros(3), be)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(Y, dev(np.ones((2, 3)), be)), tk.Duplicated(dev(x0, be), dX))
    np.testing.assert_allclose(host(dX), 4 * host(dev(x0, be)), **tol(be))
    s0, dS = dev(np.array(0.7), be), dev(np.array(0.0), be)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(dev(np.zeros((2, 3)), be), dev(np.ones((2, 3)), be)),
                tk.Duplicated(s0, dS))
    np.testing.assert_allclose(host(dS), 6 * 2 * host(s0), **tol(be))
    Y, dY = dev(np.zeros((2, 3)), be), dev(np.zeros((2, 3)), be)
    tk.autodiff(tk.Forward, f, tk.Duplicated(Y, dY), tk.Duplicated(dev(x0, be), dev(v, be)))
    np.testing.assert_allclose(host(dY), np.broadcast_to(2 * host(dev(x0, be)) * host(dev(v, be)), (2, 3)),
                               **tol(be))


def test_copyto_from_a_view_of_a_differentiated_array_is_refused():
    x = np.arange(6.0)
    with pytest.raises(ValueError, match="view"):
        tk.autodiff(tk.Reverse, lambda x_: tk.copyto(np.zeros(3), x_[:3]), tk.Duplicated(x, np.zeros(6)))


# --- 7. Active scalars passed on as new objects ----------------------------------------------------

def test_an_active_value_passed_as_another_object_warns(be):
    x = dev(np.ones(4), be)

    def f(y, s):
        scale(be)(y, x, s * 1.0, ndrange=4)      # a new float object: no gradient
    with pytest.warns(UserWarning, match="tracked by identity"):
        (g,) = tk.autodiff(tk.Reverse, f, tk.Duplicated(dev(np.zeros(4), be), dev(np.ones(4), be)), tk.Active(0.75))
    assert g == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = tk.autodiff(tk.Reverse, lambda y, s: scale(be)(y, x, s, ndrange=4),
                           tk.Duplicated(dev(np.zeros(4), be), dev(np.ones(4), be)), tk.Active(0.75))
    assert g == 4.0


# --- gradcheck in float32 ------------------------------------------------------------------------------

def test_gradcheck_picks_a_step_for_float32(be):
    x0 = RNG.uniform(-1, 1, 64).astype(np.float32)

    def f(y, x):
        square_into(be)(y, x, ndrange=64)
        sin_inplace(be)(y, ndrange=64)
    args = (tk.Duplicated(dev(np.zeros(64), be, np.float32), dev(RNG.standard_normal(64), be, np.float32)),
            tk.Duplicated(dev(x0, be, np.float32), dev(np.zeros(64), be, np.float32)))
    assert tk.gradcheck(f, *args)
    with pytest.raises(AssertionError):                   # the old default step fails falsely
        tk.gradcheck(f, *args, eps=1e-6, rtol=1e-4, atol=1e-6)


# --- 2. reads of elements other work items overwrite in the same launch ---------------------------

@tk.kernel
def shift_double(x):
    i = tk.index()
    x[i] = x[(i + 1) % x.shape[0]] * 2.0


@tk.kernel
def scatter_inplace(x, idx: tk.Const):
    i = tk.index()
    x[idx[i]] = x[i] * x[i]


@tk.kernel
def read_and_accumulate(t, x: tk.Const):
    i = tk.index()
    tk.atomic_add(t, 0, x[i] * t[1])


@tk.kernel
def compact(out, count, x: tk.Const):
    i = tk.index()
    if x[i] > 0.0:
        slot = tk.atomic_add(count, 0, 1)
        out[slot] = x[i] * x[i]


@tk.kernel
def own_inplace_2d(A, B: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    r = i
    A[r, j] = A[i, j] * B[i, j]
    A[i, j] *= A[r, j]


def test_a_read_that_other_work_items_overwrite_is_refused(be):
    X = dev(np.arange(4.0), be)
    for mode in (tk.Reverse, tk.Forward):
        with pytest.raises(tk.CompileError, match="'x' is both read and written") as e:
            tk.autodiff(mode, lambda x: shift_double(be)(x, ndrange=4), tk.Duplicated(X, dev(np.ones(4), be)))
        assert "x[(i + 1) % x.shape[0]]" in str(e.value)          # the user's line


def test_a_scattered_in_place_write_is_refused(be):
    idx = dev([1, 0, 3, 2], be, np.int32)
    with pytest.raises(tk.CompileError, match="written at an index that is not provably"):
        tk.autodiff(tk.Reverse, lambda x: scatter_inplace(be)(x, idx, ndrange=4),
                    tk.Duplicated(dev(np.arange(4.0), be), dev(np.ones(4), be)))


def test_an_array_read_and_updated_atomically_is_refused(be):
    with pytest.raises(tk.CompileError, match="both read and updated atomically"):
        tk.autodiff(tk.Reverse, lambda t, x: read_and_accumulate(be)(t, x, ndrange=4),
                    tk.Duplicated(dev(np.ones(2), be), dev(np.ones(2), be)),
                    tk.Duplicated(dev(np.ones(4), be), dev(np.zeros(4), be)))


def test_using_the_result_of_an_integer_atomic_is_refused(be):
    with pytest.raises(tk.CompileError, match="value returned by an atomic on 'count'"):
        tk.autodiff(tk.Reverse, lambda o, c, x: compact(be)(o, c, x, ndrange=4),
                    tk.Duplicated(dev(np.zeros(4), be), dev(np.ones(4), be)), tk.Const(dev([0], be, np.int32)),
                    tk.Duplicated(dev([1.0, -1, 2, 3], be), dev(np.zeros(4), be)))


def test_own_element_in_place_updates_still_differentiate(be):
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    tk.gradcheck(lambda A, B: own_inplace_2d(be)(A, B, ndrange=(3, 4)),
                 tk.Duplicated(dev(a, be), dev(RNG.standard_normal((3, 4)), be)),
                 tk.Duplicated(dev(b, be), dev(np.zeros((3, 4)), be)))


@tk.kernel
def shifted_inplace(A, B: tk.Const, k):
    i = tk.index()
    A[i + k] = A[i + k] * B[i] + B[i]


@tk.kernel
def shift_mismatch(A):
    i = tk.index()
    A[i + 1] = A[i] * 2.0


def test_in_place_updates_at_one_shared_offset_differentiate(be):
    """Every access of A at i + k (the same offset, a literal or a scalar argument): one to one."""
    a, b = RNG.standard_normal(9), RNG.standard_normal(6)
    tk.gradcheck(lambda A, B: shifted_inplace(be)(A, B, 2, ndrange=6),
                 tk.Duplicated(dev(a, be), dev(RNG.standard_normal(9), be)),
                 tk.Duplicated(dev(b, be), dev(np.zeros(6), be)))


def test_in_place_accesses_at_different_offsets_are_refused(be):
    with pytest.raises(tk.CompileError, match="'A' is both read and written"):
        tk.autodiff(tk.Reverse, lambda A: shift_mismatch(be)(A, ndrange=3),
                    tk.Duplicated(dev(np.arange(4.0), be), dev(np.ones(4), be)))


# --- 6. math adjoints at their edge points (PyTorch's values; see docs/autodiff.md) ------------------

@tk.kernel
def edges2(out, x: tk.Const, y: tk.Const, op: tk.constexpr):
    i = tk.index()
    a, b = x[i], y[i]
    if op == 0:
        out[i] = a ** b
    elif op == 1:
        out[i] = math.pow(a, b)
    elif op == 2:
        out[i] = max(a, b)
    elif op == 3:
        out[i] = min(a, b)
    elif op == 4:
        out[i] = math.hypot(a, b)
    elif op == 5:
        out[i] = math.atan2(a, b)
    elif op == 6:
        out[i] = math.copysign(a, b)
    elif op == 7:
        out[i] = abs(a) + 0.0 * b
    elif op == 8:
        out[i] = a ** 0.0 + a ** 1.0 + 0.0 * b
    elif op == 9:
        out[i] = math.sqrt(a) + 0.0 * b
    elif op == 10:
        out[i] = tk.clamp(a, b, 0.75)
    elif op == 11:
        out[i] = tk.clamp(a, -1.0, b)
    elif op == 12:
        out[i] = tk.rsqrt(a) + 0.0 * b


EDGES = [  # (op, x, y, d/dx, d/dy) -- the values torch.autograd gives
    (0, 0.0, 2.0, 0.0, 0.0), (0, 0.0, 0.0, 0.0, 0.0), (0, 0.0, 0.5, math.inf, 0.0), (0, -2.0, 3.0, 12.0, math.nan),
    (0, 2.0, 3.0, 12.0, 8 * math.log(2)),
    (1, 0.0, 2.0, 0.0, 0.0), (1, 0.0, 0.0, 0.0, 0.0), (1, -2.0, 2.0, -4.0, math.nan),
    (2, 1.0, 1.0, 0.5, 0.5), (2, 1.0, 2.0, 0.0, 1.0), (3, 1.0, 1.0, 0.5, 0.5), (3, 1.0, 2.0, 1.0, 0.0),
    (4, 0.0, 0.0, 0.0, 0.0), (4, 3.0, 4.0, 0.6, 0.8),
    (5, 0.0, 0.0, 0.0, 0.0), (5, 1.0, 1.0, 0.5, -0.5),
    (6, 0.0, -1.0, 0.0, 0.0), (6, 2.0, -1.0, -1.0, 0.0),
    (7, 0.0, 1.0, 0.0, 0.0), (7, -3.0, 1.0, -1.0, 0.0),
    (8, 0.0, 1.0, 1.0, 0.0), (8, -2.0, 1.0, 1.0, 0.0),
    (9, 0.0, 1.0, math.inf, 0.0), (9, 4.0, 1.0, 0.25, 0.0),
    # tk.clamp(x, lo, hi): at x == lo or x == hi the derivative is the clamped value's, 1 (torch.clamp,
    # Warp's clamp; not half, as min(max(...)) written out gives)
    (10, 0.25, 0.25, 1.0, 0.0), (10, 0.75, 0.25, 1.0, 0.0), (10, 0.1, 0.25, 0.0, 1.0), (10, 0.9, 0.25, 0.0, 0.0),
    (10, 0.5, 0.25, 1.0, 0.0), (11, 0.5, 0.5, 1.0, 0.0), (11, 0.6, 0.5, 0.0, 1.0), (11, -1.0, 0.5, 1.0, 0.0),
    # rsqrt: -rsqrt(x)**3 / 2; at -0.0 rsqrt is -inf and the derivative +inf (torch's x.rsqrt()
    # backward, JAX's grad of 1 / sqrt(x), and this library's adjoint of 1 / math.sqrt(x)); it gave -inf
    (12, 0.0, 1.0, -math.inf, 0.0), (12, -0.0, 1.0, math.inf, 0.0), (12, 4.0, 1.0, -1 / 16, 0.0),
]


def _exact_partials(op, x, y):
    """(d/dx, d/dy) of hypot (op 4) or atan2 (op 5) at the floats x, y, from exact rationals
    rounded once (no intermediate underflow or overflow)."""
    from fractions import Fraction as F
    X, Y = F(x), F(y)
    n2 = X * X + Y * Y
    if op == 5:                         # atan2(x, y): d/dx = y / (x² + y²), d/dy = -x / (x² + y²)
        return tuple(_round(v) for v in (Y / n2, -X / n2))
    h = math.hypot(x, y)                # Python's hypot: scaled, correctly rounded in float64
    return x / h, y / h                 # hypot: x / h, y / h (the quotients are <= 1: no range issue)


def _round(v) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


TINY = [(1e-30, 1e-30), (3e-30, -2e-30), (1e-40, 2e-40), (-1e-42, 7e-43), (1e20, 1e20), (-3e19, 2e19)]
TINY64 = [(1e-300, 1e-300), (3e-310, -2e-310), (1e-160, 1e-160), (1e200, -1e200)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2_and_hypot_adjoints_do_not_underflow_at_tiny_arguments(be, dtype):
    """The adjoints at tiny and huge arguments against exact derivatives: atan2's was
    x / (x² + y²), whose squares underflow to 0 for 1e-30 in float32 (a derivative of 0 where
    it is 5e29) and overflow for 1e20; now (x / h) / h with h = hypot(x, y). hypot's (x / h)
    had no squares. With subnormal arguments, h = hypot(x, y) is itself a subnormal, exact to
    its spacing only: the tolerance is that relative spacing (the primal's own precision)."""
    if dtype == np.float64 and not be.supports_float64:
        pytest.skip("no float64 on this backend")
    points = TINY + (TINY64 if dtype == np.float64 else [])
    for op in (4, 5):
        for x, y in points:
            x, y = float(dtype(x)), float(dtype(y))
            dX, dY = dev([0.0], be, dtype), dev([0.0], be, dtype)
            tk.autodiff(tk.Reverse, lambda o, x_, y_: edges2(be)(o, x_, y_, op, ndrange=1),
                        tk.Duplicated(dev([0.0], be, dtype), dev([1.0], be, dtype)),
                        tk.Duplicated(dev([x], be, dtype), dX), tk.Duplicated(dev([y], be, dtype), dY))
            with np.errstate(over="ignore"):            # 1 / (2 * 1e-42): inf in float32, as the exact value
                want = [float(dtype(w)) for w in _exact_partials(op, x, y)]
            spacing = 2 * float(np.finfo(dtype).smallest_subnormal) / math.hypot(x, y)
            np.testing.assert_allclose([host(dX)[0], host(dY)[0]], want, rtol=max(2e-6, spacing),
                                       err_msg=f"op {op} at ({x}, {y}) {np.dtype(dtype)}")


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_math_adjoints_at_edge_points(be, mode):
    ok = []
    for op, x, y, gx, gy in EDGES:
        if op in (0, 1) and x < 0 and be.name == "WEBGPU":
            continue                   # WGSL's pow is undefined for negative bases (the primal too)
        X, Y = dev([x], be), dev([y], be)
        if mode == "reverse":
            dX, dY = dev([0.0], be), dev([0.0], be)
            tk.autodiff(tk.Reverse, lambda o, x_, y_: edges2(be)(o, x_, y_, op, ndrange=1),
                        tk.Duplicated(dev([0.0], be), dev([1.0], be)), tk.Duplicated(X, dX), tk.Duplicated(Y, dY))
            got = (host(dX)[0], host(dY)[0])
        else:
            got = []
            for tx, ty in ((1.0, 0.0), (0.0, 1.0)):
                dO = dev([0.0], be)
                tk.autodiff(tk.Forward, lambda o, x_, y_: edges2(be)(o, x_, y_, op, ndrange=1),
                            tk.Duplicated(dev([0.0], be), dO), tk.Duplicated(dev([x], be), dev([tx], be)),
                            tk.Duplicated(dev([y], be), dev([ty], be)))
                got.append(host(dO)[0])
        # forward: t_x * d/dx + t_y * d/dy, a product 0 where the tangent is 0 (even times an
        # infinite partial: torch.func.jvp gives NaN there), as reverse mode skips zero adjoints
        want = (gx, gy)
        ok.append(((op, x, y), got, want))
    for point, got, want in ok:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12, err_msg=f"op {point}")


def test_torch_cpu_tensors_as_duplicated_arrays():
    torch = pytest.importorskip("torch")
    x0 = RNG.standard_normal(6)
    x, dx = torch.tensor(x0), torch.zeros(6, dtype=torch.float64)
    y, dy = torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64)
    tk.autodiff(tk.Reverse, lambda y_, x_: square_into(tk.CPU())(y_, x_, ndrange=6), tk.Duplicated(y, dy),
                tk.Duplicated(x, dx))
    np.testing.assert_allclose(dx.numpy(), 2 * x0)
    with pytest.raises(ValueError, match="dtype"):
        tk.Duplicated(x, torch.zeros(6, dtype=torch.float32))


@tk.kernel
def sin_times(y, x: tk.Const, w: tk.Const):
    i = tk.index()
    y[i] = math.sin(x[i]) * w[i]


def test_bfloat16_arrays_get_gradients():
    """bfloat16 (and fp8) host arrays are NumPy kind 'V' (ml_dtypes): they were taken for
    non-float arrays and silently got zero gradients, in tk.autodiff and through torch_op and
    jax_kernel. Against float64 closed forms, at bfloat16 precision."""
    torch = pytest.importorskip("torch")
    x0, w0 = np.linspace(0.1, 0.9, 8), np.linspace(0.5, 0.2, 8)
    x, w = torch.tensor(x0, dtype=torch.bfloat16), torch.tensor(w0, dtype=torch.bfloat16)
    dx, dw = torch.zeros(8, dtype=torch.bfloat16), torch.zeros(8, dtype=torch.bfloat16)
    tk.autodiff(tk.Reverse, lambda a, b, c: sin_times(tk.CPU())(a, b, c, ndrange=8),
                tk.Duplicated(torch.zeros(8, dtype=torch.bfloat16), torch.ones(8, dtype=torch.bfloat16)),
                tk.Duplicated(x, dx), tk.Duplicated(w, dw))
    xb, wb = x.double().numpy(), w.double().numpy()
    np.testing.assert_allclose(dx.double().numpy(), np.cos(xb) * wb, rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(dw.double().numpy(), np.sin(xb), rtol=1e-2, atol=1e-3)
    import tinykernels.torch as tkt
    op = tkt.torch_op(sin_times, outputs=["y"], name="tk_test_ad::sin_times_bf16")
    xr = x.clone().requires_grad_(True)
    op(torch.zeros(8, dtype=torch.bfloat16), xr, w).float().sum().backward()
    np.testing.assert_allclose(xr.grad.double().numpy(), np.cos(xb) * wb, rtol=1e-2, atol=1e-3)


def test_tk_adjoint_refuses_aliasing_but_not_shared_reads(be):
    @tk.kernel
    def mul(y, a: tk.Const, b: tk.Const):
        i = tk.index()
        y[i] = a[i] * b[i]
    x0 = RNG.standard_normal(4)
    x, y = dev(x0, be), dev(np.zeros(4), be)
    dxa, dxb = dev(np.zeros(4), be), dev(np.zeros(4), be)
    tk.adjoint(mul)(be)(y, dev(np.ones(4), be), x, dxa, x, dxb, ndrange=4)     # x read twice: fine
    np.testing.assert_allclose(host(dxa) + host(dxb), 2 * host(dev(x0, be)), **tol(be))
    with pytest.raises(tk.LaunchError, match="'y' and 'a' share memory and 'y' is written"):
        tk.adjoint(mul)(be)(x, dev(np.ones(4), be), x, dxa, dev(x0, be), dxb, ndrange=4)
    with pytest.raises(tk.LaunchError, match="share memory"):
        tk.adjoint(mul)(be)(y, dxa, x, dxa, x, dxb, ndrange=4)              # one array as two shadows


# --- 7. forward mode leaves out operands that carry no tangent -------------------------------------

@tk.kernel
def const_operands(out, x: tk.Const, c: tk.Const, op: tk.constexpr):
    i = tk.index()
    e = c[i] * 1.0                     # a local computed from a constant array: no tangent
    if op == 0:
        out[i] = x[i] ** c[i]          # d/dc is NaN at x < 0, and c has no tangent
    elif op == 1:
        out[i] = x[i] ** e
    elif op == 2:
        out[i] = 2.0 ** x[i]           # d/d(base) is inf at a large x, and 2.0 has no tangent
    elif op == 3:
        out[i] = math.pow(e, x[i]) + x[i] / e


def test_forward_mode_ignores_infinite_partials_of_constant_operands(be):
    """The tangent of ``x ** c`` for a constant ``c`` is ``t_x * c * x**(c-1)``: the partial in
    ``c`` (NaN for a negative ``x``, inf for ``2.0 ** x`` at a large ``x``) must not be multiplied
    by ``c``'s absent tangent (0 * NaN = NaN), as torch.func.jvp and jax.jvp leave it out. Reverse
    mode never had the problem; both are compared with the closed forms."""
    big = 1000.0 if be.supports_float64 else 100.0
    cases = [(0, [-2.0, -0.5, 3.0], [3.0, 2.0, 2.0], lambda x, c: c * x ** (c - 1)),
             (1, [-2.0, -0.5, 3.0], [3.0, 2.0, 2.0], lambda x, c: c * x ** (c - 1)),
             (2, [big, 1.0, -3.0], [1.0, 1.0, 1.0], lambda x, c: 2.0 ** x * math.log(2.0)),
             (3, [0.5, 1.5, 2.0], [-2.0, -3.0, 0.0], lambda x, c: c ** x * np.log(c + 0j).real + 1 / c)]
    for op, x0, c0, deriv in cases:
        if op == 3:
            c0 = [-2.0, -3.0, 4.0]
        with np.errstate(all="ignore"):
            want = deriv(np.array(x0), np.array(c0))
        if op == 3:                    # pow(negative, x): d/dx = pow * log(negative) = NaN, as in PyTorch
            want[:2] = np.nan
        n = len(x0)
        dO = dev(np.zeros(n), be)
        tk.autodiff(tk.Forward, lambda o, x_, c_: const_operands(be)(o, x_, c_, op, ndrange=n),
                    tk.Duplicated(dev(np.zeros(n), be), dO), tk.Duplicated(dev(x0, be), dev(np.ones(n), be)),
                    tk.Const(dev(c0, be)))
        dX = dev(np.zeros(n), be)
        tk.autodiff(tk.Reverse, lambda o, x_, c_: const_operands(be)(o, x_, c_, op, ndrange=n),
                    tk.Duplicated(dev(np.zeros(n), be), dev(np.ones(n), be)), tk.Duplicated(dev(x0, be), dX),
                    tk.Const(dev(c0, be)))
        for mode, got in (("forward", host(dO)), ("reverse", host(dX))):
            np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"op {op}, {mode} mode")


def test_forward_mode_tangents_reach_temporaries_and_copies(be):
    """The tangent kernels differentiate only arguments that carry a tangent; a temporary made
    inside fn gets one from the launch that writes it, and a tk.copyto passes it on."""
    x0, c0 = np.array([1.5, 2.0, 0.5]), np.array([2.0, 3.0, 0.5])
    tx = np.array([1.0, 0.5, -1.0])

    def f(z, x_, c_):
        t, t2 = dev(np.zeros(3), be), dev(np.zeros(3), be)
        square_into(be)(t, x_, ndrange=3)
        tk.copyto(t2, t)
        const_operands(be)(z, t2, c_, 0, ndrange=3)
    dZ = dev(np.zeros(3), be)
    tk.autodiff(tk.Forward, f, tk.Duplicated(dev(np.zeros(3), be), dZ), tk.Duplicated(dev(x0, be), dev(tx, be)),
                tk.Const(dev(c0, be)))
    y = x0 * x0
    np.testing.assert_allclose(host(dZ), c0 * y ** (c0 - 1) * 2 * x0 * tx, **tol(be))


# --- 8. group collectives: float sums, scans and min/max ------------------------------------------

@tk.kernel
def collectives(y, x: tk.Const, op: tk.constexpr, n):
    i = tk.index()
    v = math.exp(x[i]) if op < 4 else x[i]
    if op == 0:
        s = tk.group_reduce(v, "add")
    elif op == 1:
        s = tk.group_scan(v, "add")
    elif op == 2:
        s = tk.group_scan(v, "add", inclusive=False)
    elif op == 3:
        s = v
        for k in range(n):             # reduced again and again: the results are taped
            s = tk.group_reduce(s * 0.5, "add") + x[i] * s
    elif op == 4:
        s = tk.group_reduce(v * 2.0, "max")
    elif op == 5:
        s = tk.group_reduce(v * 2.0, "min")
    else:
        s = v
        for k in range(n):             # a min/max reduced again and again: its results are taped
            if op == 6:
                m = tk.group_reduce(s, "max")
            else:
                m = tk.group_reduce(s, "min")
            s = s * m + x[i]
    y[i] = s * math.sin(x[i])


@pytest.mark.parametrize("op", range(8))
def test_group_collectives_differentiate(be, op):
    """group_reduce/group_scan: reverse mode against finite differences, forward mode against
    reverse mode, with a partial last group (7 items in groups of 4: the items past the ndrange
    take part in the collectives but must add nothing). Ops 6 and 7, a min/max reduced in a
    loop: until adx21 the reverse sweep found the items holding the extreme by comparing each
    item's value with the result after popping the result's previous value from the tape, so
    every trip but the first gave the extreme's holder no gradient (the ones after the first)."""
    f = lambda y, x_: collectives(be, 4)(y, x_, op, 3, ndrange=7)   # noqa: E731
    x0 = RNG.permutation(np.linspace(0.1, 0.9, 7))   # spaced: no finite-difference step changes a min/max
    seed = RNG.standard_normal(7)
    eps, rt = (1e-6, 1e-5) if be.supports_float64 else (1e-2, 2e-2)
    tk.gradcheck(f, tk.Duplicated(dev(np.zeros(7), be), dev(seed, be)), tk.Duplicated(dev(x0, be), dev(np.zeros(7), be)),
                 eps=eps, rtol=rt, atol=rt * 1e-2)
    dX = dev(np.zeros(7), be)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(dev(np.zeros(7), be), dev(seed, be)), tk.Duplicated(dev(x0, be), dX))
    v = RNG.standard_normal(7)
    dY = dev(np.zeros(7), be)
    tk.autodiff(tk.Forward, f, tk.Duplicated(dev(np.zeros(7), be), dY), tk.Duplicated(dev(x0, be), dev(v, be)))
    np.testing.assert_allclose(np.dot(seed, host(dY)), np.dot(host(dX), v), rtol=1e-9 if be.supports_float64 else 1e-4)


def test_group_max_ties_share_the_gradient(be):
    """Two items hold the group's maximum: each gets half of the sum of the seeds, as max(a, b)
    at a tie gives half to each argument."""
    x0 = [1.0, 3.0, 3.0, 2.0]
    f = lambda y, x_: collectives(be, 4)(y, x_, 4, 0, ndrange=4)   # noqa: E731   y = max(2x) * sin(x)
    dX = dev(np.zeros(4), be)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(dev(np.zeros(4), be), dev(np.ones(4), be)), tk.Duplicated(dev(x0, be), dX))
    x = np.array(x0)
    want = 6.0 * np.cos(x) + np.array([0, 1.0, 1.0, 0]) * np.sin(x).sum()     # d max(2x) / dx_j = 2 * 1/2 at the ties
    np.testing.assert_allclose(host(dX), want, **tol(be))


@pytest.mark.parametrize("primal", [[1.0, 2.0], (1.0,), "x", None, {"a": 1}])
def test_duplicated_refuses_a_primal_that_is_neither_array_nor_scalar(primal):
    """A list primal used to be accepted and fail only at the launch, far from the mistake."""
    with pytest.raises(TypeError, match="tk.Duplicated: the primal must be an array"):
        tk.Duplicated(primal, [0.0, 0.0])


@tk.kernel
def inf_adjoint(o, x: tk.Const, op: tk.constexpr, inner: tk.constexpr):
    i = tk.index()
    v = x[i]
    r = v
    if op == 0:
        r = math.floor(v)
    elif op == 1:
        r = v ** 0
    elif op == 2:
        r = v * 0.0
    elif op == 3:
        r = abs(v)
    elif op == 4:
        r = v * v
    elif op == 5:
        r = min(v, 5.0)
    elif op == 6:
        r = math.trunc(v)
    elif op == 7:
        r = v - v
    elif op == 8:
        r = math.copysign(2.0, v)
    elif op == 9:
        r = math.sqrt(v)
    elif op == 10:
        r = 7.0 if v > 0 else v
    elif op == 11:
        r = math.exp(v * 0.0)
    o[i] = math.exp(80.0 + r) if inner else r      # exp(80 + r) overflows: an infinite adjoint inside


def _torch_inf_adjoint(torch, op, inner, x, dtype):
    f = [torch.floor, lambda v: v ** 0, lambda v: v * 0.0, torch.abs, lambda v: v * v,
         lambda v: torch.clamp(v, max=5.0), torch.trunc, lambda v: v - v,
         lambda v: torch.copysign(torch.full_like(v, 2.0), v), torch.sqrt,
         lambda v: torch.where(v > 0, torch.full_like(v, 7.0), v), lambda v: torch.exp(v * 0.0)][op]
    xt = torch.tensor(x, dtype=dtype, requires_grad=True)
    r = f(xt)
    if inner:
        torch.exp(80.0 + r).backward(torch.ones_like(xt))
    else:
        r.backward(torch.full_like(xt, math.inf))
    return np.zeros_like(x) if xt.grad is None else xt.grad.double().numpy()


@pytest.mark.parametrize("inner", [False, True], ids=["inf-seed", "inf-inside"])
def test_an_infinite_adjoint_times_a_zero_partial_is_what_torch_gives(be, inner):
    """An infinite adjoint (the seed, or exp overflowing after the operation) meets partials of
    exactly 0: where PyTorch gives a finite gradient (floor, trunc, x ** 0, copysign's sign
    operand: no partial at all; min and select route the adjoint to the chosen operand) so does
    reverse mode; where PyTorch multiplies inf by 0 (x * 0.0, x - x, abs and x * x at 0, exp of
    x * 0.0) both give NaN (docs/autodiff.md)."""
    torch = pytest.importorskip("torch")
    dt = fdt(be)
    x = np.array([0.0, 2.5, -1.5, 7.0, 9.0], dt)
    bad = []
    for op in range(12):
        dX = dev(np.zeros(5), be)
        seed = dev(np.ones(5) if inner else np.full(5, np.inf), be)
        with np.errstate(all="ignore"):
            tk.autodiff(tk.Reverse, lambda o, x_: inf_adjoint(be)(o, x_, op, inner, ndrange=5),
                        tk.Duplicated(dev(np.zeros(5), be), seed), tk.Duplicated(dev(x, be), dX))
        with np.errstate(all="ignore"):
            want = _torch_inf_adjoint(torch, op, inner, x, torch.float64 if dt == np.float64 else torch.float32)
        got = host(dX)
        fin = np.isfinite(want)              # NaN and inf where torch has them; exp's rounding in float32
        if not (np.array_equal(got[~fin], want[~fin], equal_nan=True) and np.isfinite(got[fin]).all()
                and np.allclose(got[fin], want[fin], rtol=1e-5, atol=0)):
            bad.append(f"op {op}: {got.tolist()} != torch {want.tolist()}")
    assert not bad, "; ".join(bad)
