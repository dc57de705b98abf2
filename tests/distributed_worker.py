"""Run under mpiexec by tests/test_distributed.py (not a test module itself).

    mpiexec -n 4 python tests/distributed_worker.py --backend CPU [--cases stencils|errors|all]

``stencils``: for a 2-D and a 3-D stencil, periodic and not, halo 1 and 2, float32,
float64 and int32, a few steps with ``update_halo`` and with ``hide_communication`` on
every rank; rank 0 gathers the global result and checks it equals, bit for bit, the same
steps on one rank (a grid on ``MPI.COMM_SELF``), and NumPy's. ``errors``: bad arguments
raise clear errors on every rank (no hang). Rank 0 prints ``OK``/``FAIL`` lines; the exit
status is 1 when anything failed.
"""
from __future__ import annotations

import argparse
import sys
import traceback

import numpy as np

import tinykernels as tk
from mpi4py import MPI
from tinykernels.distributed import GlobalGrid, local_shape_for
from tinykernels.distributed.topology import owned_range

C = 0.0625


@tk.kernel
def fstencil2(T2, T: tk.Const, h: int):
    """Radius-h float stencil with a corner term (so corner halos matter)."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    s = T[i - h, j] + T[i + h, j] + T[i, j - h] + T[i, j + h] + T[i - h, j - h]
    T2[i, j] = T[i, j] + C * (s - 5.0 * T[i, j])


@tk.kernel
def fstencil3(T2, T: tk.Const, h: int):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    s = (T[i - h, j, k] + T[i + h, j, k] + T[i, j - h, k] + T[i, j + h, k] + T[i, j, k - h] + T[i, j, k + h]
         + T[i - h, j - h, k - h] + T[i + h, j, k - h])
    T2[i, j, k] = T[i, j, k] + C * (s - 8.0 * T[i, j, k])


@tk.kernel
def fstencil1(T2, T: tk.Const, h: int):
    (i,) = tk.index(tk.Global, tk.Cartesian)
    T2[i] = T[i] + C * (T[i - h] + T[i + h] - 2.0 * T[i])


@tk.kernel
def istencil1(T2, T: tk.Const, h: int):
    (i,) = tk.index(tk.Global, tk.Cartesian)
    T2[i] = (3 * T[i] + T[i - h] + T[i + h]) % 65521


@tk.kernel
def istencil2(T2, T: tk.Const, h: int):
    i, j = tk.index(tk.Global, tk.Cartesian)
    s = T[i - h, j] + T[i + h, j] + T[i, j - h] + T[i, j + h] + T[i - h, j - h]
    T2[i, j] = (3 * T[i, j] + s) % 65521


@tk.kernel
def istencil3(T2, T: tk.Const, h: int):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    s = (T[i - h, j, k] + T[i + h, j, k] + T[i, j - h, k] + T[i, j + h, k] + T[i, j, k - h] + T[i, j, k + h]
         + T[i - h, j - h, k - h] + T[i + h, j, k - h])
    T2[i, j, k] = (3 * T[i, j, k] + s) % 65521


def offsets(ndim: int, h: int):
    """The stencils' neighbour offsets, in the kernels' order."""
    if ndim == 1:
        return [(-h,), (h,)]
    if ndim == 2:
        return [(-h, 0), (h, 0), (0, -h), (0, h), (-h, -h)]
    return [(-h, 0, 0), (h, 0, 0), (0, -h, 0), (0, h, 0), (0, 0, -h), (0, 0, h), (-h, -h, -h), (h, 0, -h)]


def numpy_step(T: np.ndarray, h: int, periodic: bool) -> np.ndarray:
    """One step of the stencils in NumPy on a global array."""
    offs = offsets(T.ndim, h)
    if periodic:
        nb = [np.roll(T, tuple(-o for o in off), axis=tuple(range(T.ndim))) for off in offs]
        core, out_idx = T, (Ellipsis,)
    else:
        out_idx = tuple(slice(h, n - h) for n in T.shape)
        core = T[out_idx]
        nb = [T[tuple(slice(h + o, n - h + o) for o, n in zip(off, T.shape))] for off in offs]
    s = nb[0]
    for x in nb[1:]:
        s = s + x
    out = T.copy()
    if T.dtype.kind == "i":
        out[out_idx] = (3 * core + s) % 65521
    else:
        out[out_idx] = core + T.dtype.type(C) * (s - T.dtype.type(len(offs)) * core)
    return out


def simulate(comm, backend, G0: np.ndarray, h: int, periodic: bool, hide: bool, steps: int, dims=None):
    """``steps`` steps on a grid over ``comm``; the gathered global result on its rank 0."""
    per = (periodic,) * G0.ndim
    d = MPI.Compute_dims(comm.Get_size(), list(dims) if dims else [0] * G0.ndim)
    with GlobalGrid(local_shape_for(G0.shape, h, d, per), halo=h, dims=d, periodic=periodic, comm=comm) as grid:
        return _simulate(grid, backend, G0, h, hide, steps)


def _simulate(grid, backend, G0, h, hide, steps):
    local = grid.local_part(G0)
    T, T2 = tk.asarray(local.copy(), backend=backend), tk.asarray(local.copy(), backend=backend)
    kern = {(1, "f"): fstencil1, (1, "i"): istencil1, (2, "f"): fstencil2, (3, "f"): fstencil3, (2, "i"): istencil2, (3, "i"): istencil3}[
        (G0.ndim, G0.dtype.kind)](backend)
    region = tuple(range(h, n - h) for n in grid.local_shape)
    for _ in range(steps):
        if hide:
            grid.hide_communication(2 * h, lambda nd, s, T=T, T2=T2: kern(T2, T, h, ndrange=nd, stream=s), T2)
        else:
            kern(T2, T, h, ndrange=region)
            grid.update_halo(T2)
        T, T2 = T2, T
    return grid.gather(T)


def initial(shape, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(0, 65521, size=shape).astype(dtype)
    return rng.random(shape).astype(dtype)


def stencil_cases(backend):
    dtypes = [np.float32, np.float64, np.int32] if backend.supports_float64 else [np.float32, np.int32]
    for ndim in (2, 3):
        for periodic in (False, True):
            for h in (1, 2):
                for dt in dtypes:
                    inner = (12, 12) if ndim == 2 else (12, 4, 8)
                    shape = tuple(n if periodic else n + 2 * h for n in inner)
                    yield ndim, periodic, h, np.dtype(dt), shape, None
    # 1-D, and explicit dims: every rank along the last dimension
    yield 1, False, 2, np.dtype(np.float32), (28,), None
    yield 1, True, 1, np.dtype(np.int32), (24,), None
    yield 3, False, 1, np.dtype(np.float32), (6, 6, 14), (1, 1, 0)
    yield 2, True, 1, np.dtype(np.int32), (12, 6), (0, 1)


def run_stencils(backend, log) -> bool:
    world = MPI.COMM_WORLD
    ok = True
    for seed, (ndim, periodic, h, dt, shape, dims) in enumerate(stencil_cases(backend)):
        name = (f"{ndim}-D {'periodic' if periodic else 'not periodic'} halo {h} {dt.name} global {shape}"
                + (f" dims {dims}" if dims else ""))
        G0 = initial(shape, dt, seed)
        steps = 3
        try:
            got = {hide: simulate(world, backend, G0, h, periodic, hide, steps, dims) for hide in (False, True)}
            if world.rank == 0:
                ref = simulate(MPI.COMM_SELF, backend, G0, h, periodic, False, steps)
                npref = G0
                for _ in range(steps):
                    npref = numpy_step(npref, h, periodic)
                problems = [f"{'hide_communication' if hide else 'update_halo'} differs from one rank at "
                            f"{int(np.sum(got[hide] != ref))} points"
                            for hide in (False, True) if not np.array_equal(got[hide], ref)]
                if dt.kind == "i" and not np.array_equal(ref, npref):
                    problems.append("one rank differs from NumPy")
                if dt.kind == "f" and not np.allclose(ref, npref, rtol=1e-5 if dt == np.float32 else 1e-12):
                    problems.append("one rank differs from NumPy")
                ok &= not problems
                log(("FAIL " if problems else "OK ") + name + (": " + "; ".join(problems) if problems else ""))
        except Exception:
            ok = False
            log(f"FAIL {name}: exception on rank {world.rank}\n{traceback.format_exc()}", all_ranks=True)
            world.Abort(1)
    return ok


def run_exchange(backend, log) -> bool:
    """update_halo on several arrays of different dtypes at once: every halo point ends up equal to
    the global array's value there (the halos start out zeroed), on every rank."""
    world = MPI.COMM_WORLD
    ok = True
    dts = [d for d in ("float16", "uint8", "bool", "int64", "float64", "int16") if backend.supports(d)]
    for ndim, periodic, h in ((2, True, 1), (3, False, 2), (3, True, 1)):
        d = MPI.Compute_dims(world.size, [0] * ndim)
        inner = (12, 8, 4)[:ndim]
        gshape = tuple(n if periodic else n + 2 * h for n in inner)
        grid = GlobalGrid(local_shape_for(gshape, h, d, (periodic,) * ndim), halo=h, periodic=periodic)
        rng = np.random.default_rng(ndim)
        globals_ = [(rng.random(gshape) * 100).astype(dt) for dt in dts]
        wanted = [grid.local_part(G) for G in globals_]
        arrays = []
        for w in wanted:
            start = w.copy()
            owned = tuple(slice(*owned_range(n, h, c, m, periodic))
                          for n, c, m in zip(grid.local_shape, grid.coords, grid.dims))
            start[...] = 0
            start[owned] = w[owned]                 # only the rank's own points are known
            arrays.append(tk.asarray(start, backend=backend))
        grid.update_halo(*arrays)
        bad = [dt for dt, A, w in zip(dts, arrays, wanted) if not np.array_equal(A.numpy(), w)]
        bad = world.allgather(bad)
        name = f"update_halo of {', '.join(dts)} at once, {ndim}-D {'periodic' if periodic else 'not periodic'} halo {h}"
        problems = [f"rank {r}: {b}" for r, b in enumerate(bad) if b]
        ok &= not problems
        log(("FAIL " if problems else "OK ") + name + (": wrong halos of " + "; ".join(problems) if problems else ""))
    return ok


def run_torch(log) -> bool:
    """update_halo and gather of CPU torch tensors (zero-copy: the tensors themselves get the
    halos); they failed with 'Cannot interpret torch.float64 as a data type' on several ranks."""
    try:
        import torch
    except ImportError:
        log("OK update_halo of torch tensors (skipped: no torch)")
        return True
    world = MPI.COMM_WORLD
    ok = True
    for ndim, periodic, h in ((2, False, 1), (3, True, 2)):
        d = MPI.Compute_dims(world.size, [0] * ndim)
        inner = (12, 6, 6)[:ndim]
        gshape = tuple(n if periodic else n + 2 * h for n in inner)
        with GlobalGrid(local_shape_for(gshape, h, d, (periodic,) * ndim), halo=h, periodic=periodic) as grid:
            G = np.random.default_rng(ndim).random(gshape)
            want = grid.local_part(G)
            owned = tuple(slice(*owned_range(n, h, c, m, periodic))
                          for n, c, m in zip(grid.local_shape, grid.coords, grid.dims))
            T = torch.zeros(grid.local_shape, dtype=torch.float64)
            T[owned] = torch.from_numpy(want[owned])
            grid.update_halo(T)
            good = bool(world.allreduce(np.array_equal(T.numpy(), want), op=MPI.LAND))
            got = grid.gather(T)
            good &= world.rank != 0 or np.array_equal(got, G)
            good = bool(world.allreduce(good, op=MPI.LAND))
        ok &= good
        log(("OK " if good else "FAIL ") + f"update_halo of torch tensors, {ndim}-D halo {h}, and gather")
    return ok


def expect(log, name: str, exc_type, fn, needle: str) -> bool:
    try:
        fn()
    except exc_type as e:
        if needle in str(e):
            log(f"OK {name}")
            return True
        log(f"FAIL {name}: message {str(e)!r} lacks {needle!r}")
        return False
    except Exception as e:
        log(f"FAIL {name}: {type(e).__name__}: {e}")
        return False
    log(f"FAIL {name}: no error")
    return False


def run_errors(backend, log) -> bool:
    n = MPI.COMM_WORLD.Get_size()
    grid = GlobalGrid((8, 8), halo=1)
    good = np.zeros((8, 8))
    with GlobalGrid((8, 8), halo=1) as freed:
        pass
    checks = [
        ("halo not an int", TypeError, lambda: GlobalGrid((8, 8), halo=1.5), "halo: expected an int"),
        ("local_shape not ints", TypeError, lambda: GlobalGrid((8.5, 8)), "local_shape: expected an int"),
        ("too small for the halo", ValueError, lambda: GlobalGrid((5, 8), halo=2, periodic=True), "3 * halo"),
        ("dims that do not fit", ValueError, lambda: GlobalGrid((8, 8), dims=(n + 1, 1)), "do not fit"),
        ("wrong shape", ValueError, lambda: grid.update_halo(good, np.zeros((8, 6))), "argument 2 has shape (8, 6)"),
        ("wrong rank", ValueError, lambda: grid.update_halo(good, np.zeros((8, 8, 1))), "argument 2 has shape (8, 8, 1)"),
        ("not an array", TypeError, lambda: grid.update_halo(good, 3.0), "argument 2"),
        ("same array twice", ValueError, lambda: grid.update_halo(good, good), "same array"),
        ("read-only", ValueError, lambda: grid.update_halo(np.broadcast_to(good, (8, 8))), "read-only"),
        ("boundary narrower than halo", ValueError,
         lambda: GlobalGrid((9, 9), halo=2, periodic=True).hide_communication(1, lambda nd, s: None, np.zeros((9, 9))),
         "less than the halo"),
        ("step not callable", TypeError, lambda: grid.hide_communication(1, None, good), "callable"),
        ("gather root", ValueError, lambda: grid.gather(good, root=n), "root"),
        ("freed grid", RuntimeError, lambda: freed.update_halo(good), "was freed"),
    ]
    ok = all([expect(log, name, et, fn, needle) for name, et, fn, needle in checks])
    # ranks that disagree on the grid's shape get an error on every rank, not a hang
    shape = (8, 8) if MPI.COMM_WORLD.rank == 0 else (8, 10)
    if n > 1:
        ok &= expect(log, "ranks disagree", ValueError, lambda: GlobalGrid(shape), "ranks disagree")
        # one rank's arguments are invalid: the others raise too instead of waiting for it
        small = (8, 8) if MPI.COMM_WORLD.rank == 0 else (2, 8)
        ok &= expect(log, "one rank rejects its arguments", ValueError,
                     lambda: GlobalGrid(small, dims=(n, 1)),
                     "rank 1 rejected its arguments" if MPI.COMM_WORLD.rank == 0 else "too small for halo")
    return ok


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="CPU")
    p.add_argument("--cases", default="all", choices=("stencils", "errors", "all"))
    a = p.parse_args()
    backend = tk.backend(a.backend)
    rank = MPI.COMM_WORLD.rank

    def log(msg: str, all_ranks: bool = False) -> None:
        if rank == 0 or all_ranks:
            print(msg, flush=True)

    ok = True
    if a.cases in ("errors", "all"):
        ok &= run_errors(backend, log)
    if a.cases in ("stencils", "all"):
        ok &= run_exchange(backend, log)
        if backend == tk.CPU():
            ok &= run_torch(log)
        ok &= run_stencils(backend, log)
    ok = MPI.COMM_WORLD.allreduce(ok, op=MPI.LAND)
    log("ALL OK" if ok else "SOME FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
