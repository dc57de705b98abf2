#!/usr/bin/env python3
"""Benchmark of tinykernels.distributed: hidden communication and the cost of update_halo.

    mpiexec -n 4 python benchmarks/bench_distributed.py              # CPU, 3-D diffusion, 64^3 per rank
    mpiexec -n 2 python benchmarks/bench_distributed.py --quick      # smoke test (seconds)
    python benchmarks/bench_distributed.py --backend CL              # one rank: the overhead part only matters

Reports, from one run (the 3-D diffusion of ``python -m tinykernels diffusion3d``):

1. the step time with ``update_halo`` after each step (sequential) and with
   ``hide_communication`` (overlapped), the exchange alone, and the fraction of the exchange
   hidden, ``(sequential - overlapped) / exchange`` (target >= 0.8). On one machine the ranks
   talk through shared memory in microseconds, so a network delay is injected
   (``GlobalGrid(simulated_latency=...)``: each exchanged dimension waits that long after posting
   its messages); ``--delay auto`` (default) makes the whole exchange about half a step.
2. the overhead of ``update_halo`` at one rank (rank 0 on ``MPI.COMM_SELF``), relative to the
   step alone (target <= 5%): not periodic (nothing to exchange; the cost of the call) and
   periodic (the rank is its own neighbour: a local copy of its planes, no MPI).

Exit status 1 if the overlapped result differs from the sequential one. Timings need an idle
machine with at least one core per rank; PASS/MISS marks are informational.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402

import tinykernels as tk  # noqa: E402
from tinykernels.distributed import GlobalGrid, diffusion3d  # noqa: E402


def step_time(grid, backend, n, steps, exchange: bool) -> float:
    """Seconds per diffusion step on ``grid`` (one rank), with or without ``update_halo``."""
    k = diffusion3d.diffusion_step(backend)
    T0 = diffusion3d.initial_field(grid, np.float64 if backend.supports_float64 else np.float32)
    T, T2 = tk.asarray(T0.copy(), backend=backend), tk.asarray(T0.copy(), backend=backend)
    region = tuple(range(1, m - 1) for m in grid.local_shape)
    best = float("inf")
    for rep in range(4):                         # the first is the warm-up; best of the rest
        t0 = time.perf_counter()
        for _ in range(1 if rep == 0 else steps):
            k(T2, T, 1.0, 1e-3, 1.0, ndrange=region)
            if exchange:
                grid.update_halo(T2)
            T, T2 = T2, T
        tk.synchronize(backend)
        if rep:
            best = min(best, (time.perf_counter() - t0) / steps)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default=None, metavar="DEV", help="backend (default: DEV, else the first available)")
    p.add_argument("--local-size", type=int, default=None, metavar="N", help="N^3 per rank (default 160, 24 --quick)")
    p.add_argument("--steps", type=int, default=None, help="steps per measurement (default 20, 5 with --quick)")
    p.add_argument("--delay", default="auto", metavar="S|auto",
                   help="injected latency per exchanged dimension, seconds (default auto: exchange ~ half a step)")
    p.add_argument("--quick", action="store_true", help="small and short: checks that it runs")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON (rank 0)")
    a = p.parse_args(argv)
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    n = a.local_size or (24 if a.quick else 160)   # 64^3: a step too short to hide anything behind
    steps = a.steps or (5 if a.quick else 20)
    backend = diffusion3d.cpu_share(tk.default_backend() if a.backend is None else tk.backend(a.backend))

    # 2. one rank: the step alone, and with update_halo (not periodic, periodic)
    one = {}
    if world.rank == 0:
        for periodic in (False, True):
            g = GlobalGrid((n, n, n), periodic=periodic, comm=MPI.COMM_SELF)
            t0, t1 = step_time(g, backend, n, steps, False), step_time(g, backend, n, steps, True)
            one["periodic" if periodic else "not periodic"] = (t0, t1, (t1 - t0) / t0)
    t_step = world.bcast(one["not periodic"][0] if world.rank == 0 else None, root=0)

    # 1. all ranks: sequential, overlapped, exchange alone, with the injected delay
    grid_dims = GlobalGrid((n, n, n)).dims
    exchanged = max(1, sum(d > 1 for d in grid_dims))
    delay = 0.5 * t_step / exchanged if a.delay == "auto" else float(a.delay)
    args = argparse.Namespace(backend=a.backend, local_size=n, steps=steps, boundary_width=(2, 2, 8),
                              delay=delay, dims=None, periodic=False)
    buf = __import__("io").StringIO()
    stats = diffusion3d.run(args, out=buf)
    if world.rank != 0:
        return 0 if stats["same"] else 1

    print(f"tinykernels.distributed benchmark: {world.size} ranks, {n}^3 per rank, {steps} steps, "
          f"{stats['backend']}, {stats['dtype']}")
    print(buf.getvalue().rstrip())
    print()
    mark = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    print(f"{'measurement':<44} {'ms/step':>10}")
    print(f"{'step + update_halo (sequential)':<44} {stats['t_sequential'] * 1e3:10.3f}")
    print(f"{'hide_communication (overlapped)':<44} {stats['t_overlapped'] * 1e3:10.3f}")
    print(f"{'update_halo alone (injected ' + format(delay * 1e3, '.3g') + ' ms/dim)':<44} "
          f"{stats['t_exchange'] * 1e3:10.3f}")
    print(f"fraction of the exchange hidden: {stats['hidden']:.2f}  (target >= 0.8: {mark(stats['hidden'] >= 0.8)})")
    print()
    print(f"{'one rank':<16} {'step ms':>10} {'+update_halo ms':>16} {'overhead':>9}")
    for name, (t0, t1, ov) in one.items():
        print(f"{name:<16} {t0 * 1e3:10.3f} {t1 * 1e3:16.3f} {ov * 100:8.1f}%"
              + (f"  (target <= 5%: {mark(ov <= 0.05)})" if name == "not periodic" else ""))
    if a.json:
        Path(a.json).write_text(json.dumps(dict(stats, delay=delay, one_rank=one), indent=1, default=str))
    return 0 if stats["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
