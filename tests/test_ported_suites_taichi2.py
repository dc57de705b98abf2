"""Taichi's tests/python/test_ndrange.py ported test by test: Taichi's ``for i, j in
ti.ndrange((4, 10), (3, t))`` struct-for is a launch over ``ndrange=(range(4, 10), range(3,
t))`` (SPEC 2: a dimension may be a Python ``range``; ``tk.index(tk.Global, tk.Cartesian)``
gives the absolute coordinates, ``tk.index(tk.Global, tk.Linear)`` the 0-based position within
the ranges), ``ti.grouped`` is the Cartesian index as a tuple ``I`` (``A[I]`` accepts it), and a
nested ``ti.ndrange`` inside a kernel is nested ``for`` loops. Every case on CPU, INTERP, CL and
WEBGPU (the ranged launch's offsets are rendered by each backend); exact against NumPy.

Where SPEC differs from upstream (ported as SPEC reads):

* ``ti.ndrange`` takes ``(begin, end)`` pairs; a Python ``range`` also takes a step, which
  SPEC allows (``start + k * step``): upstream's "three arguments" error is here a launch
  over ``range(1, 2, 3)`` (one item, at 1), and the port checks steps of 3 and -2.
* A range whose start is past its end is empty, as in Taichi: the launch runs nothing (SPEC 2:
  a zero-sized dimension is no error), counted with an atomic.
* Non-integer bounds: Python's ``range(1.1, 10.5)`` is a TypeError before any launch; an
  ndrange dimension that is a float is a ``tk.LaunchError`` naming it (Taichi: TaichiTypeError).
* NumPy integers are accepted as bounds (``range(np.int64(0), np.int32(10))``), as upstream.
* Taichi's "dimension error" (two loop variables over a 1-D ndrange) is unpacking the
  Cartesian index into the wrong number of names: a ``tk.CompileError``.
* Taichi kernels return values; here the results are stored into arrays. No fields, matrices
  or ``ti.static`` unrolling (``test_static_grouped_static``'s inner 2 x 3 loop is two plain
  constant loops)."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, get, put  # noqa: F401 - anybe: a fixture


def launch(be, k, *args, **kw):
    dev = [put(be, a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    k(be)(*dev, **kw)
    tk.synchronize(be)
    return [get(d) for d, a in zip(dev, args) if isinstance(a, np.ndarray)]


@tk.kernel
def fill1(x):
    i = tk.index(tk.Global, tk.Cartesian)[0]
    x[i] = i


def test_1d(anybe):
    """test_1d: x[i] = i over (4, 10) of a 16-element field; the rest stays 0"""
    (x,) = launch(anybe, fill1, np.zeros(16, np.float32), ndrange=(range(4, 10),))
    want = np.where((np.arange(16) >= 4) & (np.arange(16) < 10), np.arange(16), 0)
    np.testing.assert_array_equal(x, want)


@tk.kernel
def fill2(x):
    i, j = tk.index(tk.Global, tk.Cartesian)
    val = i + j * 10
    x[i, j] = val


@tk.kernel
def fill3(x):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    x[i, j, k] = i + j * 10 + k * 100


def test_2d_and_3d(anybe):
    """test_2d ((4, 10) x (3, t) with t = 8) and test_3d ((4, 10) x (3, 8) x 17)"""
    t = 8
    (x,) = launch(anybe, fill2, np.zeros((16, 32), np.float32), ndrange=(range(4, 10), range(3, t)))
    i, j = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    np.testing.assert_array_equal(x, np.where((4 <= i) & (i < 10) & (3 <= j) & (j < 8), i + j * 10, 0))
    (x,) = launch(anybe, fill3, np.zeros((16, 32, 24), np.float32), ndrange=(range(4, 10), range(3, 8), 17))
    i, j, k = np.meshgrid(np.arange(16), np.arange(32), np.arange(24), indexing="ij")
    inside = (4 <= i) & (i < 10) & (3 <= j) & (j < 8) & (k < 17)
    np.testing.assert_array_equal(x, np.where(inside, i + j * 10 + k * 100, 0))


@tk.kernel
def grouped3(x):
    I = tk.index(tk.Global, tk.Cartesian)  # noqa: E741 - upstream's name
    x[I] = I[0] + I[1] + I[2]


@tk.kernel
def loops3(y):
    for i in range(0, 3):
        for j in range(1, 4):
            for k in range(2, 5):
                y[i, j, k] = i + j + k


def test_tensor_based_3d(anybe):
    """test_tensor_based_3d: a grouped index over (0, 3) x (1, 4) x (2, 5) equals three nested
    loops over the same bounds"""
    lower, upper = (0, 1, 2), (3, 4, 5)
    (x,) = launch(anybe, grouped3, np.zeros((6, 6, 6), np.int32),
                  ndrange=tuple(range(lo, hi) for lo, hi in zip(lower, upper)))
    (y,) = launch(anybe, loops3, np.zeros((6, 6, 6), np.int32), ndrange=1)
    np.testing.assert_array_equal(x, y)
    assert x.sum() > 0


@tk.kernel
def grouped_static(x):
    I = tk.index(tk.Global, tk.Cartesian)  # noqa: E741 - upstream's name
    x[I] = I[0] + I[1] * 10 + I[2] * 100


def test_static_grouped(anybe):
    """test_static_grouped: (4, 5) x (3, 5) x 5"""
    (x,) = launch(anybe, grouped_static, np.zeros((16, 32, 8), np.float32), ndrange=(range(4, 5), range(3, 5), 5))
    i, j, k = np.meshgrid(np.arange(16), np.arange(32), np.arange(8), indexing="ij")
    inside = (4 <= i) & (i < 5) & (3 <= j) & (j < 5) & (k < 5)
    np.testing.assert_array_equal(x, np.where(inside, i + j * 10 + k * 100, 0))


@tk.kernel
def static_grouped_static(x):
    i, j = tk.index(tk.Global, tk.Cartesian)
    for k in range(2):
        for m in range(3):
            x[i, j, k, m] = k + m * 10 + i + j * 4


def test_static_grouped_static(anybe):
    """test_static_grouped_static: a (16, 4) launch, each item filling its 2 x 3 matrix"""
    (x,) = launch(anybe, static_grouped_static, np.zeros((16, 4, 2, 3), np.float32), ndrange=(16, 4))
    i, j, k, m = np.meshgrid(*(np.arange(s) for s in (16, 4, 2, 3)), indexing="ij")
    np.testing.assert_array_equal(x, k + m * 10 + i + j * 4)


@tk.kernel
def init_eye(A):
    i, j = tk.index(tk.Global, tk.Cartesian)
    if i == j:
        A[i, j] = 1


@tk.kernel
def index_floordiv(A):
    i, j = tk.index(tk.Global, tk.Cartesian)
    if i // 2 == 0:
        A[i, j] = i


def test_field_init_eye_and_index_floordiv(anybe):
    """test_field_init_eye (#1824) and test_ndrange_index_floordiv (#1829)"""
    n = 32
    (A,) = launch(anybe, init_eye, np.zeros((n, n), np.float32), ndrange=(n, n))
    np.testing.assert_array_equal(A, np.eye(n, dtype=np.float32))
    n = 10
    (A,) = launch(anybe, index_floordiv, np.zeros((n, n), np.float32), ndrange=(n, n))
    i = np.arange(n)[:, None] + np.zeros((1, n))
    np.testing.assert_array_equal(A, np.where(i // 2 == 0, i, 0))


@tk.kernel
def nested(A, n):
    i, j = tk.index(tk.Global, tk.Cartesian)
    for k in range(n):
        for m in range(n):
            A[i, j, k, m] = i * n ** 3 + j * n ** 2 + k * n + m


def test_nested_ndrange(anybe):
    """test_nested_ndrange (#1829): an inner ndrange(n, n) as two loops, into a 4-D array"""
    n = 2
    (A,) = launch(anybe, nested, np.zeros((n,) * 4, np.int32), n, ndrange=(n, n))
    np.testing.assert_array_equal(A.ravel(), np.arange(n ** 4))


@tk.kernel
def bounded(A, n):
    i, j = tk.index(tk.Global, tk.Cartesian)
    r = i * n + j + 1
    A[i, j] = r


def test_ndrange_bounds_from_values(anybe):
    """test_ndrange_ast_transform: bounds read from values (u = 3, v = 2) of a 4 x 4 array"""
    n, u, v = 4, 3, 2
    (A,) = launch(anybe, bounded, np.zeros((n, n), np.int32), n, ndrange=(u, v))
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(A, np.where((i < u) & (j < v), i * n + j + 1, 0))


@tk.kernel
def grouped_sum(ret, cnt):
    I = tk.index(tk.Global, tk.Cartesian)  # noqa: E741 - upstream's name
    tk.atomic_add(ret, 0, I[0] + I[1] + I[2])
    tk.atomic_add(cnt, 0, 1)


def test_grouped_ndrange_star_and_empty_ranges(anybe):
    """test_grouped_ndrange_star (ndrange(*[[1, 3]] * 3): the sum of the coordinates is 36) and
    test_ndrange_start_greater_than_end (200 items for (0, 10) x (0, 20), none when either
    range runs backwards)"""
    ret, cnt = launch(anybe, grouped_sum, np.zeros(1, np.int32), np.zeros(1, np.int32),
                      ndrange=tuple(range(*b) for b in [[1, 3]] * 3))
    assert ret[0] == 36 and cnt[0] == 8
    for (i1, i2, j1, j2), want in (((0, 10, 0, 20), 200), ((0, 10, 20, 0), 0), ((10, 0, 0, 20), 0),
                                   ((10, 0, 20, 0), 0)):
        _, cnt = launch(anybe, grouped_sum, np.zeros(1, np.int32), np.zeros(1, np.int32),
                        ndrange=(range(i1, i2), range(j1, j2), 1))
        assert cnt[0] == want


@tk.kernel
def coords_and_linear(c, lin):
    i, j = tk.index(tk.Global, tk.Cartesian)
    p = tk.index(tk.Global, tk.Linear)
    c[p, 0] = i
    c[p, 1] = j
    lin[p] = p


@pytest.mark.parametrize("r0,r1", [(range(1, 2, 3), range(4)), (range(1, 10, 3), range(9, 0, -2)),
                                   (range(np.int64(0), np.int32(10)), range(2))],
                         ids=["three-arguments", "steps", "numpy-ints"])
def test_ranges_with_steps_and_numpy_bounds(anybe, r0, r1):
    """test_ndrange_three_arguments (a (1, 2, 3) range: here a step, one coordinate) and
    test_ndrange_should_accept_numpy_integer; the Cartesian index is start + k * step and the
    linear index the row-major position within the ranges"""
    n = len(r0) * len(r1)
    c, lin = launch(anybe, coords_and_linear, np.full((n, 2), -99, np.int32), np.full(n, -1, np.int32),
                    ndrange=(r0, r1))
    want = np.array([(a, b) for a in r0 for b in r1], np.int32)
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(lin, np.arange(n))


def test_ndrange_non_integer_arguments(anybe):
    """test_ndrange_non_integer_arguments: a float bound (Python refuses range(1.1, 10.5) itself;
    a float ndrange dimension is a LaunchError naming the ndrange)"""
    with pytest.raises(TypeError):
        range(1.1, 10.5)
    with pytest.raises(tk.LaunchError, match="ndrange"):
        fill1(anybe)(put(anybe, np.zeros(16, np.float32)), ndrange=(10.5,))


@tk.kernel
def wrong_unpack(x):
    i, j = tk.index(tk.Global, tk.Cartesian)
    x[i] = j


def test_dimension_error(anybe):
    """test_dimension_error: two names for the index of a 1-D launch is a CompileError"""
    with pytest.raises(tk.CompileError) as ei:
        wrong_unpack(anybe)(put(anybe, np.zeros(4, np.float32)), ndrange=4)
    assert "test_ported_suites_taichi2.py" in str(ei.value)
