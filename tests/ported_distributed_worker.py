"""ImplicitGlobalGrid.jl-style checks of tinykernels.distributed (SPEC section 12), run under
``mpiexec -n N`` by tests/test_ported_distributed.py. Every rank fills its local arrays with
the *global coordinates* of their points (computed here from the ImplicitGlobalGrid overlap
rule, independently of the grid's own helpers), wipes the planes a neighbour owns, exchanges
halos and checks that every point holds its own coordinate again; then gathers onto every
rank in turn and checks the global array is the coordinate array. Prints ``OK`` on success."""
import itertools
import sys

import numpy as np
from mpi4py import MPI

import tinykernels as tk
from tinykernels.distributed import GlobalGrid


def expected_global_shape(n, h, dims, periodic):
    return tuple(m * (k - 2 * h) + (0 if p else 2 * h) for k, m, p in zip(n, dims, periodic))


def coords_of(n, h, coords, dims, periodic, gshape):
    """global index along each dim of every local position (ImplicitGlobalGrid's overlap rule)"""
    out = []
    for k, c, m, p, G in zip(n, coords, dims, periodic, gshape):
        g = c * (k - 2 * h) + np.arange(k)
        out.append((g - h) % G if p else g)
    return out


def coordinate_array(grid, dtype):
    gshape = expected_global_shape(grid.local_shape, grid.halo, grid.dims, grid.periodic)
    assert tuple(grid.global_shape) == gshape, (grid.global_shape, gshape)
    idx = coords_of(grid.local_shape, grid.halo, grid.coords, grid.dims, grid.periodic, gshape)
    lin = np.ravel_multi_index(np.ix_(*idx), gshape)
    return lin.astype(dtype), np.arange(int(np.prod(gshape))).reshape(gshape).astype(dtype)


def wipe_received_planes(A, grid):
    """-1 in every halo plane that a neighbour (or this rank, periodic on one rank) fills"""
    h = grid.halo
    for d in range(grid.ndim):
        m, c, p = grid.dims[d], grid.coords[d], grid.periodic[d]
        lo = [slice(None)] * grid.ndim
        hi = [slice(None)] * grid.ndim
        lo[d], hi[d] = slice(0, h), slice(A.shape[d] - h, A.shape[d])
        if p or c > 0:
            A[tuple(lo)] = -1
        if p or c < m - 1:
            A[tuple(hi)] = -1


def as_backend(A, name):
    return A if name == "numpy" else tk.asarray(A, backend=tk.backend(name))


def to_host(A):
    return A.numpy() if isinstance(A, tk.Array) else np.asarray(A)


def case(comm, local, h, dims, periodic, dtypes, where, fails):
    with GlobalGrid(local, halo=h, dims=dims, periodic=periodic, comm=comm) as grid:
        assert grid.nprocs == comm.Get_size() and grid.rank == comm.Get_rank()
        assert int(np.prod(grid.dims)) == grid.nprocs
        arrays, wants = [], []
        for dt in dtypes:
            want, _ = coordinate_array(grid, dt)
            A = want.copy()
            wipe_received_planes(A, grid)
            arrays.append(as_backend(A, where))
            wants.append(want)
        grid.update_halo(*arrays)
        for A, want, dt in zip(arrays, wants, dtypes):
            got = to_host(A)
            if not np.array_equal(got, want):
                bad = np.argwhere(got != want)
                fails.append(f"update_halo {local} h={h} dims={grid.dims} periodic={periodic} {np.dtype(dt).name} "
                             f"{where}: rank {grid.rank} coords {grid.coords}: {len(bad)} wrong, first at {bad[0]}")
        for root in range(grid.nprocs):
            G = grid.gather(arrays[0], root=root)
            _, full = coordinate_array(grid, dtypes[0])
            if grid.rank == root:
                if G is None or G.shape != full.shape or not np.array_equal(G, full):
                    fails.append(f"gather root={root} {local} h={h} dims={grid.dims} periodic={periodic} {where}")
            elif G is not None:
                fails.append(f"gather root={root}: rank {grid.rank} got an array")


def main():
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    where_all = sys.argv[1:] or ["numpy"]
    fails = []
    dims_2d = [None, (n, 1), (1, n)]
    dims_3d = [None, (1, 1, n), (1, n, 1)]
    for where in where_all:
        for periodic in (False, True):
            case(comm, (9,), 1, None, periodic, [np.float64, np.int32], where, fails)
            case(comm, (12,), 2, None, periodic, [np.float32], where, fails)
            for dims in dims_2d:
                case(comm, (7, 8), 1, dims, (periodic, False), [np.float64, np.int64, np.float32], where, fails)
                case(comm, (10, 9), 2, dims, (False, periodic), [np.float64], where, fails)
            for dims in dims_3d:
                case(comm, (6, 7, 8), 1, dims, (periodic,) * 3, [np.float64, np.int16], where, fails)
            case(comm, (8, 9, 10), 2, None, (periodic, not periodic, periodic), [np.float64], where, fails)
    every = comm.allgather(fails)
    if comm.Get_rank() == 0:
        flat = list(itertools.chain.from_iterable(every))
        print("\n".join(flat[:20]) if flat else "OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
