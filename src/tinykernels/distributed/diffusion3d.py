"""3-D heat diffusion on an implicit global grid (the ImplicitGlobalGrid.jl example).

    mpiexec -n 4 python -m tinykernels diffusion3d --local-size 64 --steps 50

Every rank holds a ``local_size``-cubed block of the temperature (halos included) of a
global Gaussian blob with fixed (Dirichlet) outer boundaries. The run is timed three
ways from the same start: ``steps`` steps each followed by ``update_halo`` (sequential),
the same steps with ``hide_communication`` (overlapped), and ``steps`` halo exchanges
alone. Each rank prints its time per step and effective memory throughput ``T_eff``
(2 arrays read or written per step, as in ImplicitGlobalGrid's example); rank 0 prints
the fraction of the exchange time that the overlap hid,
``(t_sequential - t_overlapped) / t_exchange``, clipped to [0, 1], and checks that both
ways gave the same field, bit for bit.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tinykernels as tk

from . import _mpi

LAM = 1.0
DT_FACTOR = 1.0 / 6.1          # dt = dx^2 / (6.1 lam): stable for the 7-point stencil


@tk.kernel
def diffusion_step(T2, T: tk.Const, lam, dt, dx2):
    """One explicit Euler step of dT/dt = lam * laplacian(T) on the points of the ndrange."""
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    lap = (T[i - 1, j, k] + T[i + 1, j, k] + T[i, j - 1, k] + T[i, j + 1, k] + T[i, j, k - 1] + T[i, j, k + 1]
           - 6.0 * T[i, j, k]) / dx2
    T2[i, j, k] = T[i, j, k] + dt * lam * lap


def parse_widths(text: str) -> tuple[int, ...]:
    """``"8"`` or ``"2,2,8"``: boundary widths (one for all dimensions, or one each)."""
    w = tuple(int(x) for x in text.split(","))
    if len(w) not in (1, 3):
        raise argparse.ArgumentTypeError(f"expected 1 or 3 comma-separated ints, got {text!r}")
    return w * 3 if len(w) == 1 else w


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (shared by ``python -m tinykernels diffusion3d`` and the benchmark)."""
    p.add_argument("--backend", metavar="DEV", default=None,
                   help="backend to run on, e.g. CPU, CL (default: the DEV variable, else the first available)")
    p.add_argument("--local-size", type=int, default=64, metavar="N",
                   help="local grid of N^3 points per rank, halos included (default 64)")
    p.add_argument("--steps", type=int, default=50, help="time steps per measurement (default 50)")
    p.add_argument("--boundary-width", type=parse_widths, default=(2, 2, 8), metavar="W[,W,W]",
                   help="boundary slabs of hide_communication (default 2,2,8: wider along the contiguous last "
                        "dimension)")
    p.add_argument("--delay", type=float, default=0.0, metavar="S",
                   help="emulated network latency per halo exchange, in seconds (default 0)")
    p.add_argument("--dims", default=None, metavar="D,D,D",
                   help="ranks per dimension (default: chosen by MPI_Dims_create)")
    p.add_argument("--periodic", action="store_true", help="periodic in all dimensions")


def cpu_share(backend):
    """On the CPU backend without TK_NUM_THREADS: the cores divided among the ranks on this node
    (ranks that each start one OpenMP thread per core would fight over the cores)."""
    import os
    MPI = _mpi.mpi()
    if getattr(backend, "name", "") != "CPU" or os.environ.get("TK_NUM_THREADS"):
        return backend
    node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return tk.CPU(threads=max(1, (os.cpu_count() or 1) // node.Get_size()))
    finally:
        node.Free()


def initial_field(grid, dtype) -> np.ndarray:
    """This rank's block of a Gaussian blob centred in the global domain (unit cube)."""
    axes = []
    for d in range(3):
        n_g = grid.global_shape[d]
        x = grid.global_indices(d) / (n_g - 1) - 0.5
        axes.append(np.exp(-(x / 0.1) ** 2))
    return (axes[0][:, None, None] * axes[1][None, :, None] * axes[2][None, None, :]).astype(dtype)


def run(args, out=sys.stdout) -> dict:
    """Run the three measurements; print per-rank lines and rank 0's summary; return rank 0's numbers."""
    from .grid import GlobalGrid
    MPI = _mpi.mpi()

    backend = cpu_share(tk.default_backend() if args.backend is None else tk.backend(args.backend))
    dtype = np.dtype(np.float64 if backend.supports_float64 else np.float32)
    dims = None if args.dims is None else [int(x) for x in args.dims.split(",")]
    n = args.local_size
    grid = GlobalGrid((n, n, n), halo=1, dims=dims, periodic=args.periodic, simulated_latency=args.delay)
    dx = 1.0 / (grid.global_shape[0] - 1)
    lam, dt, dx2 = LAM, dx * dx * DT_FACTOR / LAM, dx * dx
    T0 = initial_field(grid, dtype)
    k = diffusion_step(backend)
    region = tuple(range(1, m - 1) for m in grid.local_shape)

    def fresh():
        T, T2 = tk.asarray(T0.copy(), backend=backend), tk.asarray(T0.copy(), backend=backend)
        return T, T2

    def sequential(T, T2, steps):
        for _ in range(steps):
            k(T2, T, lam, dt, dx2, ndrange=region)
            grid.update_halo(T2)
            T, T2 = T2, T
        return T

    def overlapped(T, T2, steps):
        for _ in range(steps):
            grid.hide_communication(args.boundary_width,
                                    lambda nd, s, T=T, T2=T2: k(T2, T, lam, dt, dx2, ndrange=nd, stream=s), T2)
            T, T2 = T2, T
        return T

    def exchange_only(T, T2, steps):
        for _ in range(steps):
            grid.update_halo(T2)
        return T

    def timed(fn, steps):
        T, T2 = fresh()
        fn(T, T2, 1)                       # warm-up: compiles the kernels, allocates the buffers
        T, T2 = fresh()
        grid.comm.Barrier()
        t0 = time.perf_counter()
        T = fn(T, T2, steps)
        tk.synchronize(backend)
        t = (time.perf_counter() - t0) / steps
        return t, grid.comm.allreduce(t, op=MPI.MAX), T

    my_seq, t_seq, T_seq = timed(sequential, args.steps)
    my_hide, t_hide, T_hide = timed(overlapped, args.steps)
    _, t_comm, _ = timed(exchange_only, args.steps)
    same = np.array_equal(np.asarray(T_seq.numpy() if isinstance(T_seq, tk.Array) else T_seq),
                          np.asarray(T_hide.numpy() if isinstance(T_hide, tk.Array) else T_hide))
    same = grid.comm.allreduce(same, op=MPI.LAND)
    hidden = 0.0 if t_comm <= 0 else min(1.0, max(0.0, (t_seq - t_hide) / t_comm))
    a_eff = 2 * n ** 3 * dtype.itemsize           # read T, write T2 once per step
    line = (f"rank {grid.rank} coords {grid.coords}: {my_hide * 1e3:8.3f} ms/step overlapped, "
            f"{my_seq * 1e3:8.3f} ms/step sequential, T_eff = {a_eff / my_hide / 1e9:6.2f} GB/s")
    lines = grid.comm.gather(line, root=0)          # printed by rank 0, in rank order
    stats = dict(nprocs=grid.nprocs, dims=grid.dims, global_shape=grid.global_shape, t_sequential=t_seq,
                 t_overlapped=t_hide, t_exchange=t_comm, hidden=hidden, same=same,
                 t_eff_gbs=a_eff / t_hide / 1e9, backend=repr(backend), dtype=dtype.name)
    if grid.rank == 0:
        print("\n".join(lines), file=out)
        print(f"{grid.nprocs} ranks, dims {grid.dims}, global grid {grid.global_shape} {dtype.name} on "
              f"{backend!r}; halo exchange {t_comm * 1e3:.3f} ms (emulated latency {args.delay * 1e3:g} ms)",
              file=out)
        print(f"communication hidden: {hidden:.2f} of the exchange time "
              f"((sequential - overlapped) / exchange); overlapped result equals sequential: "
              f"{'yes' if same else 'NO'}", file=out, flush=True)
    grid.free()
    return stats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tinykernels diffusion3d", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    stats = run(args)
    return 0 if stats["same"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
