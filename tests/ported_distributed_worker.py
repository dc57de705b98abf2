"""ImplicitGlobalGrid.jl-style checks of tinykernels.distributed (SPEC section 12), run under
``mpiexec -n N`` by tests/test_ported_distributed.py. Every rank fills its local arrays with
the *global coordinates* of their points (computed here from the ImplicitGlobalGrid overlap
rule, independently of the grid's own helpers), wipes the planes a neighbour owns, exchanges
halos and checks that every point holds its own coordinate again; then gathers onto every
rank in turn and checks the global array is the coordinate array. Staggered arrays (one plane
longer or shorter along a dimension, as ImplicitGlobalGrid's) are exchanged together with
unstaggered ones and gathered the same way. Prints ``OK`` on success."""
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


def staggered_coordinates(grid, shape, dtype):
    """The global coordinate of every point of a staggered array of ``shape`` (ImplicitGlobalGrid:
    local ``i`` is global ``c * (n - 2h) + i`` whatever the staggering; the global extent is ``s``
    longer where not periodic), and that global array."""
    h, gsh, idx = grid.halo, [], []
    for n, m, c, p, k in zip(grid.local_shape, grid.dims, grid.coords, grid.periodic, shape):
        G = m * (n - 2 * h) + (0 if p else 2 * h + (k - n))
        g = c * (n - 2 * h) + np.arange(k)
        idx.append((g - h) % G if p else g)
        gsh.append(G)
    lin = np.ravel_multi_index(np.ix_(*idx), gsh)
    return lin.astype(dtype), np.arange(int(np.prod(gsh))).reshape(gsh).astype(dtype)


def wipe_staggered_halos(A, grid):
    """-1 in every halo plane a neighbour fills, along the dimensions where ``A`` has halos
    (its extent at least the grid's local one)"""
    h = grid.halo
    for d in range(grid.ndim):
        m, c, p = grid.dims[d], grid.coords[d], grid.periodic[d]
        if A.shape[d] < grid.local_shape[d]:
            continue
        lo = [slice(None)] * grid.ndim
        hi = [slice(None)] * grid.ndim
        lo[d], hi[d] = slice(0, h), slice(A.shape[d] - h, A.shape[d])
        if p or c > 0:
            A[tuple(lo)] = -1
        if p or c < m - 1:
            A[tuple(hi)] = -1


def staggered_case(comm, local, h, dims, periodic, shapes, where, fails):
    """update_halo of arrays of several staggerings at once (+1, -1, 0 along each dimension),
    then gather of each (where no periodic dimension is staggered)"""
    with GlobalGrid(local, halo=h, dims=dims, periodic=periodic, comm=comm) as grid:
        arrays, wants = [], []
        for shape in shapes:
            want, _ = staggered_coordinates(grid, shape, np.float64)
            A = want.copy()
            wipe_staggered_halos(A, grid)
            arrays.append(as_backend(A, where))
            wants.append(want)
        grid.update_halo(*arrays)
        for A, want in zip(arrays, wants):
            got = to_host(A)
            if not np.array_equal(got, want):
                bad = np.argwhere(got != want)
                fails.append(f"staggered update_halo {got.shape} of {local} h={h} dims={grid.dims} "
                             f"periodic={grid.periodic} {where}: rank {grid.rank}: {len(bad)} wrong, first at {bad[0]}")
        for A in arrays:
            shape = tuple(A.shape)
            if any(p and k != n for k, n, p in zip(shape, grid.local_shape, grid.periodic)):
                continue
            _, full = staggered_coordinates(grid, shape, np.float64)
            if tuple(grid.array_global_shape(shape)) != full.shape:
                fails.append(f"array_global_shape {shape}: {grid.array_global_shape(shape)} != {full.shape}")
            G = grid.gather(A, root=grid.nprocs - 1)
            if grid.rank == grid.nprocs - 1 and (G is None or not np.array_equal(G, full)):
                fails.append(f"staggered gather {shape} of {local} h={h} dims={grid.dims} {where}")
            elif grid.rank != grid.nprocs - 1 and G is not None:
                fails.append("staggered gather: a rank that is not root got an array")


@tk.kernel
def velocities(Vx, Vy, Txy, P: tk.Const, c, h: int):
    """A staggered step (ImplicitGlobalGrid's acoustic-wave layout): Vx on x faces (nx + 1, ny),
    Vy on y faces (nx, ny + 1), Txy on nodes (nx + 1, ny + 1), from P on cells (nx, ny); each
    array updated on its own points but the halos (ParallelStencil's @inn)."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    if i < Vx.shape[0] - h and j < Vx.shape[1] - h:
        Vx[i, j] = Vx[i, j] + c * (P[i, j] - P[i - 1, j])
    if i < Vy.shape[0] - h and j < Vy.shape[1] - h:
        Vy[i, j] = Vy[i, j] + c * (P[i, j] - P[i, j - 1])
    if i < Txy.shape[0] - h and j < Txy.shape[1] - h:
        Txy[i, j] = 0.5 * Txy[i, j] + c * (P[i, j] - P[i - 1, j - 1])


@tk.kernel
def pressure(P, Vx: tk.Const, Vy: tk.Const, Txy: tk.Const, c):
    i, j = tk.index(tk.Global, tk.Cartesian)
    P[i, j] = P[i, j] + c * (Vx[i + 1, j] - Vx[i, j] + Vy[i, j + 1] - Vy[i, j]) + 0.25 * (Txy[i + 1, j + 1] - Txy[i, j])


def staggered_local(grid, G, shape):
    """The local part of shape ``shape`` of global array ``G`` (the coordinates of
    :func:`staggered_coordinates`: periodic dimensions wrap modulo the grid's global size)."""
    idx = []
    for n, c, p, k, gs in zip(grid.local_shape, grid.coords, grid.periodic, shape, grid.global_shape):
        g = c * (n - 2 * grid.halo) + np.arange(k)
        idx.append((g - grid.halo) % gs if p else g)
    return G[np.ix_(*idx)].copy()


def staggered_wave(comm, gshape, dims, periodic, hide, where, steps=3):
    """``steps`` steps of the staggered wave on a grid over ``comm`` (halo 1): velocities and
    Txy exchanged together (hide_communication with staggered arrays, or the step on the
    whole region and update_halo), then P. The gathered arrays on the last rank (the
    staggered ones only where no periodic dimension is staggered)."""
    h = 1
    d = MPI.Compute_dims(comm.Get_size(), list(dims) if dims else [0, 0])
    from tinykernels.distributed import local_shape_for
    local = local_shape_for(gshape, h, d, periodic)
    with GlobalGrid(local, halo=h, dims=d, periodic=periodic, comm=comm) as grid:
        rng = np.random.default_rng(7)
        stag = {"P": (0, 0), "Vx": (1, 0), "Vy": (0, 1), "Txy": (1, 1)}
        fields = {}
        for name, s in stag.items():
            G = rng.standard_normal(tuple(g + (0 if p else k) for g, p, k in zip(grid.global_shape, periodic, s)))
            fields[name] = as_backend(staggered_local(grid, G, tuple(n + k for n, k in zip(local, s))), where)
        P, Vx, Vy, Txy = (fields[k] for k in ("P", "Vx", "Vy", "Txy"))
        be = tk.get_backend(P)
        kv, kp = velocities(be), pressure(be)
        whole_v = tuple(range(h, n + 1 - h) for n in local)      # the longest arrays' points but the halos
        whole_p = tuple(range(h, n - h) for n in local)
        for _ in range(steps):
            if hide:
                grid.hide_communication((2, 3), lambda nd, st: kv(Vx, Vy, Txy, P, 0.3, h, ndrange=nd, stream=st),
                                        Vx, Vy, Txy)
                grid.hide_communication(2, lambda nd, st: kp(P, Vx, Vy, Txy, 0.2, ndrange=nd, stream=st), P)
            else:
                kv(Vx, Vy, Txy, P, 0.3, h, ndrange=whole_v)
                grid.update_halo(Vx, Vy, Txy)
                kp(P, Vx, Vy, Txy, 0.2, ndrange=whole_p)
                grid.update_halo(P)
        root = grid.nprocs - 1
        out = {}
        for name, s in stag.items():
            if not any(p and k for p, k in zip(periodic, s)):
                out[name] = grid.gather(fields[name], root=root)
        return out if grid.rank == root else None


def staggered_hide_case(comm, gshape, dims, periodic, where, fails):
    """hide_communication of staggered arrays, bit for bit against the same steps on one rank
    (a grid on MPI.COMM_SELF) and against update_halo on this grid"""
    got = {hide: staggered_wave(comm, gshape, dims, periodic, hide, where) for hide in (False, True)}
    if comm.Get_rank() == comm.Get_size() - 1:
        ref = staggered_wave(MPI.COMM_SELF, gshape, None, periodic, False, where)
        for hide in (False, True):
            for name, want in ref.items():
                if not np.array_equal(got[hide][name], want):
                    fails.append(f"staggered {'hide_communication' if hide else 'update_halo'} {name} of global "
                                 f"{gshape} dims={dims} periodic={periodic} {where}: "
                                 f"{int(np.sum(got[hide][name] != want))} points differ from one rank")
        if len(ref) < 4 and periodic == (False, False):
            fails.append("staggered wave: a gather was left out")


def staggered_errors(comm, fails):
    """shapes ImplicitGlobalGrid refuses, refused with a ValueError naming the argument; a
    gather root or boundary width that is not an int, a TypeError naming it"""
    for periodic, err in (("yes", TypeError), (2, ValueError), ((1, 2), ValueError)):   # bool() took them
        try:
            GlobalGrid((7, 8), halo=1, periodic=periodic, comm=comm).free()
            fails.append(f"GlobalGrid accepted periodic={periodic!r}")
        except err as e:
            if "periodic must be a bool or 0/1" not in str(e):
                fails.append(f"periodic={periodic!r}: {e}")
    with GlobalGrid((7, 8), halo=1, periodic=(1, 0), comm=comm) as grid:        # ImplicitGlobalGrid's 0/1
        if grid.periodic != (True, False):
            fails.append(f"periodic=(1, 0) gave {grid.periodic}")
    with GlobalGrid((7, 8), halo=1, periodic=(True, False), comm=comm) as grid:
        for args, what in ((((7, 8), (5, 8)), "argument 2 has shape \\(5, 8\\)"),
                           (((6, 7),), "no halo"), (((7, 8, 1),), "argument 1 has shape")):
            try:
                grid.update_halo(*[np.zeros(s) for s in args])
                fails.append(f"update_halo accepted shapes {args}")
            except ValueError as e:
                import re
                if not re.search(what, str(e)):
                    fails.append(f"update_halo {args}: {e}")
        for shape, what in (((8, 8), "periodic"),):
            try:
                grid.gather(np.zeros(shape))
                fails.append(f"gather accepted {shape}")
            except ValueError as e:
                if what not in str(e):
                    fails.append(f"gather {shape}: {e}")
        for root in (1.0, True, None):          # int() would take 1.0 and True as rank 1
            try:
                grid.gather(np.zeros((7, 8)), root=root)
                fails.append(f"gather accepted root={root!r}")
            except TypeError as e:
                if "gather: root must be an integer" not in str(e):
                    fails.append(f"gather root={root!r}: {e}")
        for width in (1.5, True, (1, 2.0)):       # int() would truncate 1.5 and take True as 1
            try:
                grid.hide_communication(width, lambda nd, st: None, np.zeros((7, 8)))
                fails.append(f"hide_communication accepted boundary_width={width!r}")
            except TypeError as e:
                if "hide_communication: boundary_width must be an int" not in str(e):
                    fails.append(f"hide_communication boundary_width={width!r}: {e}")
        try:        # a staggered array's send planes reach one plane further: halo + 1 along dim 0
            grid.hide_communication(1, lambda nd, st: None, np.zeros((8, 8)))
            fails.append("hide_communication accepted boundary_width 1 for an array staggered by +1")
        except ValueError as e:
            if "boundary_width[0] = 1" not in str(e) or "staggering (1" not in str(e):
                fails.append(f"hide_communication: {e}")
        try:
            grid.hide_communication(2, lambda nd, st: None, np.zeros((7, 8)), np.zeros((9, 8)))
            fails.append("hide_communication accepted an array staggered by +2 with boundary_width 2")
        except ValueError as e:
            if "at least 3 planes" not in str(e):
                fails.append(f"hide_communication: {e}")


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
        for periodic in (False, True):
            staggered_case(comm, (9,), 1, None, periodic, [(10,), (9,)], where, fails)
            for dims in dims_2d:
                staggered_case(comm, (7, 8), 1, dims, (False, periodic), [(8, 8), (7, 9), (6, 9), (8, 7)], where, fails)
                staggered_case(comm, (10, 9), 2, dims, (periodic, periodic), [(11, 9), (8, 10), (10, 7)], where, fails)
            staggered_case(comm, (6, 7, 8), 1, dims_3d[1 if n > 1 else 0], (False, periodic, False),
                           [(7, 7, 8), (6, 8, 9), (5, 7, 9), (7, 6, 7)], where, fails)
        for periodic in ((False, False), (True, False), (False, True)):
            for dims in dims_2d:
                staggered_hide_case(comm, tuple(12 if p else 14 for p in periodic), dims, periodic, where, fails)
    staggered_errors(comm, fails)
    every = comm.allgather(fails)
    if comm.Get_rank() == 0:
        flat = list(itertools.chain.from_iterable(every))
        print("\n".join(flat[:20]) if flat else "OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
