"""SPEC section 12 read as a stranger (and an ImplicitGlobalGrid user) would, under
``mpiexec -n N`` (tests/test_spec_audit19_dist.py). ``python spec_audit19_dist_worker.py
CASE...``; each case prints ``OK <case>`` on rank 0; ``ALL OK`` at the end."""
import sys

import numpy as np
from mpi4py import MPI

import tinykernels as tk
from tinykernels.distributed import GlobalGrid

WORLD = MPI.COMM_WORLD
RANK, NPROCS = WORLD.Get_rank(), WORLD.Get_size()


def raises(exc, fn, match=""):
    try:
        fn()
    except exc as e:
        assert match in str(e), (match, str(e))
        return str(e)
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


def case_defaults():
    """GlobalGrid(local_shape): halo 1, no periodic dimension, every rank in the grid, the
    global size of ImplicitGlobalGrid (dims * (n - 2) + 2, overlap 2)."""
    with GlobalGrid((6, 5, 4)) as g:
        assert g.halo == 1 and g.periodic == (False, False, False) and g.ndim == 3
        assert int(np.prod(g.dims)) == NPROCS and g.nprocs == NPROCS and g.rank == g.comm.Get_rank()
        assert all(0 <= c < m for c, m in zip(g.coords, g.dims))
        assert g.global_shape == tuple(m * (n - 2) + 2 for m, n in zip(g.dims, (6, 5, 4)))
        for d in range(3):
            left, right = g.neighbors[d]
            assert (left == MPI.PROC_NULL) == (g.coords[d] == 0)
            assert (right == MPI.PROC_NULL) == (g.coords[d] == g.dims[d] - 1)
    with GlobalGrid((6, 6), periodic=(True, False)) as g:
        assert g.global_shape == (g.dims[0] * 4, g.dims[1] * 4 + 2)
        assert MPI.PROC_NULL not in g.neighbors[0]


def case_igg_coordinates():
    """One rank, periodic along z: ImplicitGlobalGrid's x_g / y_g / z_g known values for a
    5x5x5 grid and arrays on cells, faces (+1), doubly extended (+2) and inner corners (-2/-1),
    lx = 8; positions wrapped and not."""
    assert NPROCS == 1
    nx = ny = nz = 5
    with GlobalGrid((nx, ny, nz), dims=(1, 1, 1), periodic=(False, False, True)) as g:
        assert g.global_shape == (5, 5, 3)
        dx, dy, dz = (8 / (n - 1) for n in g.global_shape)
        P, Vx, Vz = (nx, ny, nz), np.zeros((nx + 1, ny, nz)), (nx, ny, nz + 1)
        A, Sxz = (nx + 2, ny, nz + 2), (nx - 2, ny - 1, nz - 2)
        want = {  # (x, y, z, z not wrapped)
            "P": (P, [0, 2, 4, 6, 8], [0, 2, 4, 6, 8], [8, 0, 4, 8, 0], [-4, 0, 4, 8, 12]),
            "Vx": (Vx, [-1, 1, 3, 5, 7, 9], [0, 2, 4, 6, 8], [8, 0, 4, 8, 0], [-4, 0, 4, 8, 12]),
            "Vz": (Vz, [0, 2, 4, 6, 8], [0, 2, 4, 6, 8], [6, -2, 2, 6, -2, 2], [-6, -2, 2, 6, 10, 14]),
            "A": (A, [-2, 0, 2, 4, 6, 8, 10], [0, 2, 4, 6, 8], [4, 8, 0, 4, 8, 0, 4], [-8, -4, 0, 4, 8, 12, 16]),
            "Sxz": (Sxz, [2, 4, 6], [1, 3, 5, 7], [0, 4, 8], [0, 4, 8]),
        }
        for name, (arr, x, y, z, zu) in want.items():
            got = (g.global_coordinates(0, dx, arr).tolist(), g.global_coordinates(1, dy, arr).tolist(),
                   g.global_coordinates(2, dz, arr).tolist(),
                   g.global_coordinates(2, dz, arr, wrap_periodic=False).tolist())
            assert got == (x, y, z, zu), (name, got)
        assert g.global_coordinates(0, 0.5, origin=-1.0).tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0]
        # ImplicitGlobalGrid's nx_g(A), ny_g(A), nz_g(A): an array or its shape
        for arr, want_g in ((P, (5, 5, 3)), (Vx, (6, 5, 3)), (Vz, (5, 5, 4)), (A, (7, 5, 5)), (Sxz, (3, 4, 1))):
            assert g.array_global_shape(arr) == want_g, (arr, g.array_global_shape(arr))
        assert g.array_global_shape(np.zeros(A)) == (7, 5, 5)
        raises(ValueError, lambda: g.array_global_shape((5, 5)), "not a 3-D shape")
        raises(TypeError, lambda: g.array_global_shape((5.0, 5, 5)), "expected a shape")
        # the global indices of a face array run on past the grid's
        assert g.global_indices(0, Vx).tolist() == [0, 1, 2, 3, 4, 5]
        assert g.global_indices(2, Vz).tolist() == [2, 0, 1, 2, 0, 1]
        assert g.global_index(5, 0, Vx) == 5
        raises(IndexError, lambda: g.global_index(5, 0), "out of range")
        raises(ValueError, lambda: g.global_coordinates(0, dx, (5, 5)), "3-D array or shape")
        raises(TypeError, lambda: g.global_coordinates(0, "1"), "dx must be a number")


def case_coordinates_across_ranks():
    """Every rank's x coordinates of its cells and faces, gathered: the global grid's
    coordinates 0, dx, 2 dx, ... (cells) and -dx/2, dx/2, ... (faces), on any number of ranks."""
    n, dx = 6, 0.25
    with GlobalGrid((n, 5), dims=(NPROCS, 1)) as g:
        nx_g = g.global_shape[0]
        X = np.repeat(g.global_coordinates(0, dx)[:, None], 5, axis=1)
        Vx = np.repeat(g.global_coordinates(0, dx, (n + 1, 5))[:, None], 5, axis=1)
        Y = np.repeat(g.global_coordinates(1, dx)[None, :], n, axis=0)
        GX, GV, GY = g.gather(X), g.gather(Vx), g.gather(Y)
        if RANK == 0:
            assert GX.shape == (nx_g, 5) and GV.shape == (nx_g + 1, 5)
            np.testing.assert_array_equal(GX[:, 0], np.arange(nx_g) * dx)
            np.testing.assert_array_equal(GV[:, 0], (np.arange(nx_g + 1) - 0.5) * dx)
            np.testing.assert_array_equal(GY[0], np.arange(5) * dx)
        # local_part is gather's inverse, staggered arrays too
        Gx = np.arange(nx_g * 5, dtype=np.float64).reshape(nx_g, 5)
        Gv = np.arange((nx_g + 1) * 5, dtype=np.float64).reshape(nx_g + 1, 5)
        lx, lv = g.local_part(Gx), g.local_part(Gv)
        assert lx.shape == (n, 5) and lv.shape == (n + 1, 5)
        back_x, back_v = g.gather(lx), g.gather(lv)
        if RANK == 0:
            np.testing.assert_array_equal(back_x, Gx)
            np.testing.assert_array_equal(back_v, Gv)
        raises(ValueError, lambda: g.local_part(np.zeros((nx_g, 5, 1))), "global shape")
    with GlobalGrid((n, 5), dims=(NPROCS, 1), periodic=(True, False)) as g:
        raises(ValueError, lambda: g.local_part(np.zeros((g.global_shape[0] + 1, 5))), "non-periodic")


def case_update_several_fields():
    """update_halo on several fields at once (float64 cells, int32 faces, float32 cells on a
    tk.Array), periodic along y: the halos receive the neighbours' values of the same global
    points (filled from global_indices), the inner points are untouched."""
    n = (7, 6)
    with GlobalGrid(n, periodic=(False, True)) as g:
        G = g.global_shape
        ix, iy = g.global_indices(0), g.global_indices(1)
        ivx = g.global_indices(0, (n[0] + 1, n[1]))
        P = (ix[:, None] * 1000 + iy[None, :]).astype(np.float64)
        Vx = (ivx[:, None] * 1000 + iy[None, :]).astype(np.int32)
        T = tk.asarray((ix[:, None] * 1000 + iy[None, :]).astype(np.float32))
        want = [P.copy(), Vx.copy(), T.numpy().copy()]
        arrays = [P, Vx, T.numpy()]
        for X in arrays:                      # wipe every halo a neighbour (or the wrap) fills
            if g.coords[0] > 0:
                X[0] = -7
            if g.coords[0] < g.dims[0] - 1:
                X[-1] = -7
            X[:, 0] = X[:, -1] = -7
        g.update_halo(P, Vx, T)
        for X, W in zip((P, Vx, T.numpy()), want):
            np.testing.assert_array_equal(X, W)
        assert G == (g.dims[0] * 5 + 2, g.dims[1] * 4)


def case_complex_and_other_dtypes():
    """"Any dtype (the messages are bytes)": complex64/complex128 NumPy arrays, a complex CPU
    torch tensor and datetime64 exchanged in one call, periodic and not, and gathered. Before
    fw19 a complex array was a TypeError from the packing buffer on some ranks only (the others
    went on: a hang in a real run)."""
    for periodic in (True, False):
        with GlobalGrid((7, 5, 6), periodic=periodic) as g:
            lin = np.ravel_multi_index(np.ix_(*[g.global_indices(d) for d in range(3)]), g.global_shape)
            fields = [(lin + 1j * (lin + 0.5)).astype(np.complex64), (lin - 2j * lin).astype(np.complex128),
                      lin.astype(np.int64).astype("datetime64[s]")]
            try:
                import torch
                fields.append(torch.from_numpy((3j * lin + 1).astype(np.complex128)))
            except ImportError:
                pass
            hosts = [np.asarray(f) if not hasattr(f, "numpy") else f.numpy() for f in fields]
            refs = [h.copy() for h in hosts]
            for X in hosts:                       # zero (the epoch for datetime64) every received plane
                for d in range(3):
                    sl = [slice(None)] * 3
                    if periodic or g.coords[d] > 0:
                        sl[d] = 0
                        X[tuple(sl)] = np.zeros((), X.dtype)
                    if periodic or g.coords[d] < g.dims[d] - 1:
                        sl[d] = -1
                        X[tuple(sl)] = np.zeros((), X.dtype)
            if periodic or NPROCS > 1:         # something to receive
                assert not any(np.array_equal(X, R) for X, R in zip(hosts, refs))
            g.update_halo(*fields)
            for X, R in zip(hosts, refs):
                np.testing.assert_array_equal(X, R)
            G = g.gather(hosts[1])
            if RANK == 0:
                assert G.dtype == np.complex128
                np.testing.assert_array_equal(G, (lambda k: k - 2j * k)(np.arange(np.prod(g.global_shape))
                                                                     .reshape(g.global_shape)))
            raises(TypeError, lambda: g.update_halo(np.zeros((7, 5, 6), np.longdouble)), "cannot be exchanged")


def case_thin_dimension():
    """A 2-D problem written as 3-D (nz = 1): the chosen split never splits z (as
    ImplicitGlobalGrid's nz == 1 gives dimz = 1), and its halos are exchanged along x, y."""
    with GlobalGrid((6, 6, 1)) as g:
        assert g.dims[2] == 1 and int(np.prod(g.dims)) == NPROCS and g.global_shape[2] == 1
        A = np.full((6, 6, 1), float(RANK))
        g.update_halo(A)
    with GlobalGrid((2, 8)) as g:                  # 2 < 3 * halo points along x: x is not split
        assert g.dims == (1, NPROCS)
    if NPROCS > 1:
        raises(ValueError, lambda: GlobalGrid((2, 2)), "not split")
        raises(ValueError, lambda: GlobalGrid((6, 6, 1), dims=(1, 1, NPROCS)), "too small for halo")


def case_select_device():
    """ImplicitGlobalGrid's select_device: the node-local rank's GPU as a backend, or a clear
    error on every rank (no GPU; more ranks on the node than devices)."""
    with GlobalGrid((3, 4, 5)) as g:
        local = WORLD.Split_type(MPI.COMM_TYPE_SHARED, key=RANK)
        me_l, n_l = local.Get_rank(), local.Get_size()
        local.Free()
        if tk.CUDA.available()[0]:
            b = g.select_device()
            assert isinstance(b, tk.CUDA) and b.device == me_l
        elif not tk.ROCm.available()[0]:
            raises(tk.BackendUnavailable, lambda: g.select_device(), "no GPU to select")
            raises(tk.BackendUnavailable, lambda: g.select_device("CUDA"), "no GPU to select")
        raises(ValueError, lambda: g.select_device("none"), "device_type must be")
        raises(TypeError, lambda: g.select_device(0), "must be a string")
        if tk.OpenCL.available()[0]:
            import pyopencl as cl
            n_dev = len(cl.get_platforms()[0].get_devices())
            if n_l <= n_dev:
                b = g.select_device("OpenCL")
                assert isinstance(b, tk.OpenCL) and b.device_index == me_l
            else:                                  # every rank raises, not only the ones without a device
                raises(tk.BackendUnavailable, lambda: g.select_device("OpenCL"), "at most one rank per device")


def case_errors_and_free():
    g = GlobalGrid((6, 6))
    raises(ValueError, lambda: g.update_halo(np.zeros((6, 6, 6))), "argument 1 has shape (6, 6, 6)")
    raises(ValueError, lambda: g.update_halo(np.zeros((6, 6)), np.zeros((3, 6))), "argument 2 has shape (3, 6)")
    raises(TypeError, lambda: g.update_halo(), "no arrays given")
    raises(ValueError, lambda: g.gather(np.zeros((6, 6)), root=NPROCS), "not a rank of the grid")
    raises(TypeError, lambda: GlobalGrid((6.0, 6)), "expected an int")
    raises(ValueError, lambda: GlobalGrid((6, 6), dims=(NPROCS + 1, 1)), "do not fit")
    g.free()
    g.free()                                         # twice: nothing more to release
    raises(RuntimeError, lambda: g.update_halo(np.zeros((6, 6))), "the grid was freed")
    raises(RuntimeError, lambda: g.select_device(), "the grid was freed")


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    for name in sys.argv[1:]:
        CASES[name]()
        WORLD.Barrier()
        if RANK == 0:
            print("OK", name, flush=True)
    if RANK == 0:
        print("ALL OK", flush=True)
