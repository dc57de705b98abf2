"""The tiled transpose of bench_kernels.py on one CPU thread, timed with thread time.

A loaded machine delays a thread more than it slows it: `time.thread_time` (the CPU time of the
calling thread, which runs a one-thread launch itself) moves far less under other jobs than wall
time does. Each round times tinykernels, the C reference and the C copy loop (best of 3 calls
each) and takes their ratios within the round; the medians of the ratios are printed. For an A/B
of two trees, run it alternately with each tree first on PYTHONPATH (and its own TK_CACHE_DIR):

    PYTHONPATH=src python3 benchmarks/bench_transpose_cpu.py --rounds 15
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_kernels as B  # noqa: E402
import tinykernels as tk  # noqa: E402


def best_thread_time(f, calls: int = 3) -> float:
    """The shortest thread time of ``calls`` calls of ``f``."""
    best = float("inf")
    for _ in range(calls):
        t0 = time.thread_time()
        f()
        best = min(best, time.thread_time() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=4096, help="rows = columns of the float32 matrix (default 4096: 64 MiB moved)")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    n = args.size
    X = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    o, co, Xa = B.aligned_zeros((n, n)), B.aligned_zeros((n, n)), B.aligned_zeros((n, n))
    Xa[...] = X
    cp = np.empty_like(X)
    with tempfile.TemporaryDirectory() as td:
        lib = B.build_ref(Path(td))
        run, _ = B.tk_pair(B.transpose, tk.CPU(threads=1), [o, Xa], 0, X.shape, (B.TILE, B.TILE), (B.TILE,))
        fns = {"tk": run,
               "C": lambda: lib.ref_transpose(B.ptr(co), B.ptr(Xa), n, n, 1),
               "copy": lambda: lib.ref_copy(B.ptr(cp), B.ptr(X), X.size, 1)}
        for f in fns.values():
            f()
        if not ((o == X.T).all() and (co == X.T).all()):
            print("wrong result", file=sys.stderr)
            return 1
        t = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, f in fns.items():
                t[k].append(best_thread_time(f))
    t = {k: np.array(v) for k, v in t.items()}
    gbs = {k: 2 * X.nbytes / np.median(v) / 1e9 for k, v in t.items()}
    print(f"transpose {n} x {n} float32, one thread, thread time, {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"GB/s (medians): tk {gbs['tk']:.1f}, C reference {gbs['C']:.1f}, copy {gbs['copy']:.1f}")
    print(f"per-round ratios (medians): tk/C {np.median(t['C'] / t['tk']):.3f}, "
          f"tk/copy {np.median(t['copy'] / t['tk']):.3f}, C/copy {np.median(t['copy'] / t['C']):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
