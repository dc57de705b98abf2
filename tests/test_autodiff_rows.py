"""Row-owned arrays in reverse mode (adx21): an item that reads (or reads and rewrites) only its
own row of an array (``x[i, j]`` for any ``j``, ``i = tk.index()``, the same leading
coordinates in every access) gets that array's gradient added without atomics, since no other
item touches the row; reads that may share a row with other items (``x[idx[i], j]``,
``x[i // 2, j]``, ``x[i, j]`` beside ``x[i + 1, j]``) keep the atomic adds. Gradients against
float64 central differences along random directions (CPU, INTERP, and INTERP:CHECK, which
reports a data race if a plain add were wrong), and the adjoint's C checked for which shadows
are updated atomically."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params
from tinykernels.autodiff import derived

RNG = np.random.default_rng(2121)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK'), scope="module")
def be(request):
    return tk.backend(request.param)


@tk.kernel
def rmsnorm(out, x: tk.Const, w: tk.Const, D: int):
    i = tk.index()
    ss = 0.0
    for j in range(D):
        ss += x[i, j] * x[i, j]
    r = 1.0 / math.sqrt(ss / D + 1e-6)
    for j in range(D):
        out[i, j] = x[i, j] * r * w[j]


@tk.kernel
def rms_only(out, x: tk.Const, D: int):
    i = tk.index()
    ss = 0.0
    for j in range(D):
        ss += x[i, j] * x[i, j]
    r = 1.0 / math.sqrt(ss / D + 1e-6)
    for j in range(D):
        out[i, j] = x[i, j] * r


@tk.kernel
def row_inplace(A, D: int):
    """the row is read and rewritten in place"""
    i = tk.index()
    s = 0.0
    for j in range(D):
        s += A[i, j] * A[i, j]
    for j in range(D):
        A[i, j] = A[i, j] * math.tanh(s)


@tk.kernel
def row_shifted(out, x: tk.Const, D: int):
    """every access at row i + 1: still one row per item"""
    i = tk.index()
    for j in range(D):
        out[i, j] = x[i + 1, j] * x[i + 1, (j + 1) % D]


@tk.kernel
def rows_2d(out, x: tk.Const, K: int):
    """a 2-D launch: item (i, j) owns x[i, j, :]"""
    i, j = tk.index(tk.Global, tk.Cartesian)
    s = 0.0
    for k in range(K):
        s += math.sin(x[i, j, k]) * x[i, j, k]
    out[i, j] = s


@tk.kernel
def gathered_rows(out, x: tk.Const, idx: tk.Const, D: int):
    """rows picked by a gathered index: several items read one row (atomics needed)"""
    i = tk.index()
    for j in range(D):
        out[i, j] = x[idx[i], j] * x[idx[i], j]


@tk.kernel
def halved_rows(out, x: tk.Const, D: int):
    """items 2k and 2k + 1 both read row k (atomics needed)"""
    i = tk.index()
    for j in range(D):
        out[i, j] = math.exp(x[i // 2, j]) * x[i, j]


@tk.kernel
def neighbour_rows(out, x: tk.Const, D: int):
    """rows i and i + 1: each row read by two items (atomics needed)"""
    i = tk.index()
    for j in range(D):
        out[i, j] = x[i, j] * x[i + 1, j]


def directional(be, kernel, args, diff, ndrange, dtype=np.float64):
    """Reverse mode's <J^T s, t> against central differences of sum(s * F(X + h t)) for two
    random directions ``t`` (every array in ``diff`` perturbed, seeded with ``s``)."""
    h = 1e-6

    def put(a):
        a = np.array(a, dtype=dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
        return a if be.is_host or not isinstance(a, np.ndarray) else tk.asarray(a, backend=be)

    def back(a):
        return np.array(a.numpy() if isinstance(a, tk.Array) else a, dtype=np.float64)

    def launch(*xs):
        kernel(be)(*xs, ndrange=ndrange)

    for _ in range(2):
        s = {k: RNG.standard_normal(args[k].shape) for k in diff}
        t = {k: RNG.standard_normal(args[k].shape) for k in diff}

        def loss(sign):
            xs = [put(a + sign * h * t[k]) if k in t else put(a) for k, a in enumerate(args)]
            launch(*xs)
            return sum(float((s[k] * back(xs[k])).sum()) for k in diff)
        fd = (loss(1) - loss(-1)) / (2 * h)
        shadows = {k: put(s[k]) for k in diff}
        tk.autodiff(tk.Reverse, launch, *[tk.Duplicated(put(a), shadows[k]) if k in diff else tk.Const(put(a))
                                          for k, a in enumerate(args)])
        got = sum(float((back(shadows[k]) * t[k]).sum()) for k in diff)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


N, D = 6, 5


def test_rmsnorm_rows(be):
    directional(be, rmsnorm, [np.zeros((N, D)), RNG.standard_normal((N, D)), RNG.standard_normal(D), D],
                [0, 1, 2], N)


def test_a_row_rewritten_in_place(be):
    directional(be, row_inplace, [RNG.uniform(-0.6, 0.6, (N, D)), D], [0], N)


def test_rows_at_a_constant_offset(be):
    directional(be, row_shifted, [np.zeros((N, D)), RNG.standard_normal((N + 1, D)), D], [0, 1], N)


def test_rows_of_a_2d_launch(be):
    directional(be, rows_2d, [np.zeros((3, 4)), RNG.standard_normal((3, 4, 5)), 5], [0, 1], (3, 4))


def test_rows_shared_by_items_keep_atomics(be):
    idx = np.array([2, 0, 2, 2, 1, 0], np.int32)         # repeated rows: the adds must not be lost
    directional(be, gathered_rows, [np.zeros((N, D)), RNG.standard_normal((3, D)), idx, D], [0, 1], N)
    directional(be, halved_rows, [np.zeros((N, D)), RNG.standard_normal((N, D)), D], [0, 1], N)
    directional(be, neighbour_rows, [np.zeros((N, D)), RNG.standard_normal((N + 1, D)), D], [0, 1], N)


def _atomic_shadows(kernel, names, args, ndrange) -> set:
    """The shadows the CPU adjoint of ``kernel`` updates with atomic adds."""
    src = derived(kernel, "reverse", names).source(
        "CPU", *args, np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64), ndrange=ndrange)
    return {n for n in names if f"tk_atomic_add_f64(&a__d_{n}[" in src}


def test_which_shadows_take_atomic_adds():
    z, zr, w = np.zeros((N, D)), np.zeros((N + 1, D)), np.zeros(D)
    # w[j] is read by every item: its gradient stays atomic; x's rows are the items' own
    assert _atomic_shadows(rmsnorm, ("out", "x", "w"), (z, z, z, z, w, w, D), N) == {"w"}
    assert _atomic_shadows(row_inplace, ("A",), (z, z, D), N) == set()
    assert _atomic_shadows(row_shifted, ("out", "x"), (z, z, zr, zr, D), N) == set()
    idx = np.zeros(N, np.int32)
    assert _atomic_shadows(gathered_rows, ("out", "x"), (z, z, z, z, idx, D), N) == {"x"}
    assert _atomic_shadows(halved_rows, ("out", "x"), (z, z, z, z, D), N) == {"x"}
    assert _atomic_shadows(neighbour_rows, ("out", "x"), (z, z, zr, zr, D), N) == {"x"}


@pytest.mark.skipif(not tk.CPU.available()[0], reason="no C compiler for the CPU backend")
@pytest.mark.parametrize("dt", [np.float16, np.float32])
def test_narrow_float_rows_differentiate(dt):
    """A float16 row read in a loop was refused (its shadow would have needed atomic adds,
    which float16 does not have); its own row needs none. Against the float64 gradient."""
    cpu = tk.CPU()
    x = RNG.uniform(-1, 1, (N, D))
    seed = RNG.standard_normal((N, D))
    grads = {}
    for t in (dt, np.float64):
        dx = np.zeros((N, D), t)
        tk.autodiff(tk.Reverse, lambda o, x_: rms_only(cpu)(o, x_, D, ndrange=N),
                    tk.Duplicated(np.zeros((N, D), t), seed.astype(t)), tk.Duplicated(x.astype(t), dx))
        grads[t] = dx.astype(np.float64)
    tol = 3e-2 if dt == np.float16 else 1e-5
    np.testing.assert_allclose(grads[dt], grads[np.float64], rtol=tol, atol=tol)
