#!/usr/bin/env python3
"""float32 ``exp`` throughput on the CPU, in isolation: a flat kernel ``y[i] = exp(x[i])`` over
an array that stays in the L2 cache, one thread, beside NumPy's float32 ``np.exp``.

    PYTHONPATH=src python3 benchmarks/bench_exp.py            # 64 Ki elements, 2 s per row
    PYTHONPATH=src python3 benchmarks/bench_exp.py --quick    # smoke test

Rows (each checked against NumPy in float64 before it is timed):

* ``default``: a default kernel's ``math.exp``, ``tk_exp_f32`` (codegen/c.py: correctly
  rounded, evaluated in double);
* ``fastmath``: the same kernel with ``@tk.kernel(fastmath=True)`` (glibc's libmvec
  ``expf``, at most a few ulp);
* ``llm exp_f32``: the kernel-language ``exp_f32`` of ``tinykernels.llm`` (``llm/_math.py``,
  float32 arithmetic, within 1 ulp), in the same flat kernel (``llm.exp`` itself adds tens of
  microseconds of Python per call);
* ``numpy``: ``np.exp(x, out=y)`` on float32.

Printed: ns per element and G exp/s per core (best of interleaved rounds), and the bound
that softmax puts on ``exp``: one ``exp`` per element and 8 bytes of T_eff per element, so
reaching ``--target`` (default 0.7) of a copy running at ``--copy-gbs`` GB/s on
``--cores`` cores takes at least ``target * copy_gbs / 8 / cores`` G exp/s per core, if
nothing else took any time. Under load, read the numbers as ratios within one run.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

try:
    import tinykernels as tk
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk
from tinykernels.llm._math import exp_f32


@tk.kernel
def exp_default(y, x: tk.Const):
    i = tk.index()
    y[i] = math.exp(x[i])


exp_fast = tk.kernel(fastmath=True)(exp_default.fn)


@tk.kernel
def exp_llm(y, x: tk.Const):
    i = tk.index()
    y[i] = exp_f32(x[i])


def softmax_bound(target: float, copy_gbs: float, cores: int) -> float:
    """G exp/s per core that softmax needs to reach ``target`` of a ``copy_gbs`` copy on
    ``cores`` cores (8 bytes of T_eff per element, one exp per element)."""
    return target * copy_gbs / 8.0 / cores


def best_times(fns: dict, min_time: float, batch: int) -> dict:
    """Best time per call of each function, in interleaved rounds of ``batch`` calls."""
    best = {k: math.inf for k in fns}
    for f in fns.values():
        f()
    t_end = time.perf_counter() + min_time
    while True:
        for k, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(batch):
                f()
            best[k] = min(best[k], (time.perf_counter() - t0) / batch)
        if time.perf_counter() > t_end:
            return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: short timing")
    ap.add_argument("--n", type=int, default=1 << 16, help="elements (default 64 Ki: 512 KiB in and out)")
    ap.add_argument("--min-time", type=float, default=None, help="seconds of timing (default 2, 0.2 with --quick)")
    ap.add_argument("--copy-gbs", type=float, default=75.0, help="copy bandwidth for the softmax bound (GB/s)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores for the softmax bound")
    ap.add_argument("--target", type=float, default=0.7, help="fraction of the copy for the softmax bound")
    a = ap.parse_args(argv)
    min_time = a.min_time if a.min_time is not None else (0.2 if a.quick else 2.0)
    cpu = tk.CPU(threads=1)
    x = np.random.default_rng(0).uniform(-10.0, 0.0, a.n).astype(np.float32)
    want = np.exp(x.astype(np.float64))
    outs = {k: np.empty_like(x) for k in ("default", "fastmath", "llm exp_f32", "numpy")}
    kd, kf, kl = exp_default(cpu), exp_fast(cpu), exp_llm(cpu)
    fns = {
        "default": lambda: kd(outs["default"], x, ndrange=a.n),
        "fastmath": lambda: kf(outs["fastmath"], x, ndrange=a.n),
        "llm exp_f32": lambda: kl(outs["llm exp_f32"], x, ndrange=a.n),
        "numpy": lambda: np.exp(x, out=outs["numpy"]),
    }
    for k, f in fns.items():
        f()
        err = np.max(np.abs(outs[k] - want) / want)
        if not err < 1e-6:
            print(f"{k}: wrong result (relative error {err:.3g})")
            return 1
    print(f"float32 exp, {a.n} elements in L2, one thread; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    t = best_times(fns, min_time, max(1, (1 << 22) // a.n))
    for k, v in t.items():
        print(f"  {k:<12} {v / a.n * 1e9:6.3f} ns/element  {a.n / v / 1e9:6.2f} G exp/s per core")
    print(f"softmax at {a.target:g} of a {a.copy_gbs:g} GB/s copy on {a.cores} cores needs >= "
          f"{softmax_bound(a.target, a.copy_gbs, a.cores):.2f} G exp/s per core for the exp alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
