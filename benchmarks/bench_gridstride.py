"""Grid-stride prefetch on the CPU (docs/cpu.md "Grid-stride loops"): bench_kernels.py's
histogram over 64 MiB of int32 keys, groups of 64, at several grid sizes (the loop's step is
the ndrange), with the prefetch on (the default) and off (``TK_CPU_GRIDSTRIDE_BYTES=2**40``).

The switch is read once per compiled library, so each setting runs in its own process; the
processes alternate (on, off, on, off, ...) so that a change of the machine's load hits both.
One thread by default, timed with ``time.thread_time`` (the other jobs' time slices do not
count), best of a few calls per process, ns per key; the medians over the rounds are printed
with the load average.

    python benchmarks/bench_gridstride.py [--rounds 3] [--ndranges 64,512,1024,16384] [--threads 1]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

OFF = str(1 << 40)


def measure(ndranges, threads: int, calls: int) -> None:
    """In this process: ns per key of each ndrange, one line each (``nd value``)."""
    import numpy as np

    import tinykernels as tk
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_kernels as bk

    n = 1 << 24
    keys = np.random.default_rng(0).integers(0, 256, n, dtype=np.int32)
    want = np.bincount(keys, minlength=256)
    cpu = tk.CPU(threads=threads)
    kern, zero = bk.histogram(cpu, 64), bk.zero_i32(cpu)
    clock = time.thread_time if threads == 1 else time.perf_counter
    h = np.zeros(256, np.int32)
    for nd in ndranges:
        best = float("inf")
        for _ in range(calls):
            zero(h, ndrange=256)
            t0 = clock()
            kern(h, keys, 256, ndrange=nd)
            best = min(best, clock() - t0)
        if not (h == want).all():
            raise SystemExit(f"wrong histogram at ndrange {nd}")
        print(nd, best / n * 1e9, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ndranges", default="64,512,1024,16384")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    nds = [int(x) for x in args.ndranges.split(",")]
    if args.child:
        measure(nds, args.threads, args.calls)
        return
    res: dict = {}
    loads = []
    for r in range(args.rounds):
        for label, value in (("on", os.environ.get("TK_CPU_GRIDSTRIDE_BYTES", "")), ("off", OFF)):
            env = dict(os.environ, TK_CPU_GRIDSTRIDE_BYTES=value)
            out = subprocess.run([sys.executable, __file__, "--child", "--ndranges", args.ndranges,
                                  "--threads", str(args.threads), "--calls", str(args.calls)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            loads.append(os.getloadavg()[0])
            for line in out.strip().splitlines():
                nd, v = line.split()
                res.setdefault((int(nd), label), []).append(float(v))
    print(f"histogram, 64 MiB of int32 keys, groups of 64, {args.threads} thread(s), ns/key "
          f"(medians of {args.rounds} alternated rounds; load average {min(loads):.1f}-{max(loads):.1f})")
    print(f"{'ndrange':>8} {'step':>9} {'prefetch on':>12} {'off':>8} {'off/on':>7}")
    for nd in nds:
        on, off = statistics.median(res[nd, "on"]), statistics.median(res[nd, "off"])
        print(f"{nd:>8} {nd * 4:>7} B {on:>12.3f} {off:>8.3f} {off / on:>7.2f}")


if __name__ == "__main__":
    main()
