#!/usr/bin/env python3
"""flash_decode on the host, A/B in one process: another tree's ``llm/attention.py`` (``--old``,
e.g. ``git show main:src/tinykernels/llm/attention.py > /tmp/attention_old.py``) against this
tree's, alternately in every round; medians of the rounds. Made for loaded machines: only the
ratios within one run mean anything.

* ``kernel``: the ``_fd_part`` kernel alone, one pass over the whole cache (the ``splits=1``
  launch), timed by the calling thread's CPU time (run it with ``TK_NUM_THREADS=1``);
* ``call``: the whole ``flash_decode`` call (chunks and merge as each tree chooses them), wall
  time and the process's CPU time (all threads).

    PYTHONPATH=src TK_NUM_THREADS=1 python benchmarks/bench_flash_decode_ab.py --old /tmp/attention_old.py
    PYTHONPATH=src TK_NUM_THREADS=2 OMP_WAIT_POLICY=passive python benchmarks/bench_flash_decode_ab.py \\
        --old /tmp/attention_old.py --what call --lens 8192
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time

import numpy as np

import tinykernels.llm  # noqa: F401  (the package the copy's relative imports resolve in)
from tinykernels.llm import _common as C
from tinykernels.llm import attention as NEW
from tinykernels.llm._math import use_poly


def load_old(path: str):
    """The other tree's attention module, loaded beside this one (its own kernels)."""
    spec = importlib.util.spec_from_file_location("tinykernels.llm._attention_ab_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel_run(mod, q, kc, vc, out):
    """One ``_fd_part`` launch over all keys (one pass, normalized rows into ``out``)."""
    be = C.backend_of("bench", q=q)
    _, H, D = q.shape
    L = kc.shape[2]
    G = NEW._heads_per_item(be, H // kc.shape[1], D)
    args = (out, out, out, q, kc, vc, q, L, 1 / np.sqrt(D), L, False, True, D, G, use_poly(be, np.float32))
    return lambda: C.launch(mod._fd_part, be, args, (H // G, 1))


def timed(f, n: int, clock) -> float:
    ts = []
    for _ in range(n):
        t0 = clock()
        f()
        ts.append(clock() - t0)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="path of the other tree's llm/attention.py")
    ap.add_argument("--what", choices=("kernel", "call"), default="kernel")
    ap.add_argument("--lens", type=int, nargs="+", default=[64, 512, 8192], help="cache lengths (all keys visible)")
    ap.add_argument("--heads", default="32,8,128", help="query heads, KV heads, head_dim")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    old = load_old(args.old)
    H, KH, D = (int(x) for x in args.heads.split(","))
    rng = np.random.default_rng(0)
    for L in args.lens:
        q = rng.standard_normal((1, H, D)).astype(np.float32)
        kc, vc = (rng.standard_normal((1, KH, L, D)).astype(np.float32) for _ in range(2))
        outs = [np.empty_like(q), np.empty_like(q)]
        if args.what == "kernel":
            fs = [kernel_run(m, q, kc, vc, o) for m, o in zip((old, NEW), outs)]
        else:
            fs = [lambda m=m, o=o: m.flash_decode(q, kc, vc, L, out=o) for m, o in zip((old, NEW), outs)]
        n = max(5, int(4e8 // kc.nbytes))
        for f in fs:
            f()
        ratios, cpu_ratios = [], []
        for r in range(args.rounds):
            if args.what == "kernel":
                a, b = (timed(f, n, time.thread_time) for f in fs)
                ratios.append(b / a)
                print(f"  L={L} round {r}: old {a * 1e6:.0f} us, new {b * 1e6:.0f} us ({2 * kc.nbytes / b / 1e9:.1f} GB/s),"
                      f" load {os.getloadavg()[0]:.1f}")
            else:
                (a, ac), (b, bc) = ((timed(f, n, time.perf_counter), timed(f, n, time.process_time)) for f in fs)
                ratios.append(b / a)
                cpu_ratios.append(bc / ac)
                print(f"  L={L} round {r}: old {a * 1e3:.2f} ms (cpu {ac * 1e3:.2f}), new {b * 1e3:.2f} ms "
                      f"(cpu {bc * 1e3:.2f}), load {os.getloadavg()[0]:.1f}")
        diff = float(np.abs(outs[0] - outs[1]).max())
        extra = f", process cpu {statistics.median(cpu_ratios):.2f}" if cpu_ratios else ""
        print(f"L={L} {H}/{KH} heads x {D}, {args.what}: new/old time {statistics.median(ratios):.2f}{extra}"
              f" (max |new - old| {diff:.2g})")


if __name__ == "__main__":
    main()
