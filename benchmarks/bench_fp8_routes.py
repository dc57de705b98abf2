#!/usr/bin/env python3
"""fp8_dequantize's two CPU routes, interleaved in one process: the arithmetic kernel
(``_dequant_bits``) and the table route (``_dequant_lookup``: with AVX-512BW the table in
registers, ``tk_lut16_block``), beside ``np.copyto`` of the same bytes (3 per element, one
thread) and torch's float8 -> float32 -> float16, in every round; medians of the rounds.
Made for loaded machines: only the ratios within one run mean anything.

    PYTHONPATH=src TK_NUM_THREADS=2 python benchmarks/bench_fp8_routes.py --mib 64 --rounds 15
    TK_CPU_LUT16=c ...      # the table route's plain C loop instead of the register table
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from tinykernels import llm
from tinykernels.llm import fp8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=64, help="traffic in MiB (3 bytes per element)")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import ml_dtypes
    try:
        import torch
    except ImportError:
        torch = None
    n = int(args.mib * (1 << 20)) // 3
    x = np.random.default_rng(0).standard_normal(n).astype(ml_dtypes.float8_e4m3fn)
    y = np.empty(n, np.float16)
    src = np.random.default_rng(1).integers(0, 255, 3 * n, dtype=np.uint8)
    dst = np.empty_like(src)
    want = (x.astype(np.float32) * np.float32(0.5)).astype(np.float16).view(np.uint16)

    def route(lookup_min):
        def run():
            fp8.LOOKUP_MIN = lookup_min
            llm.fp8_dequantize(x, 0.5, out=y)
        return run

    runs = {"arith": route(1 << 62), "table": route(1), "copy": lambda: np.copyto(dst, src)}
    if torch is not None and hasattr(torch, "float8_e4m3fn"):
        torch.set_num_threads(int(os.environ.get("TK_NUM_THREADS", os.cpu_count())))
        tx = torch.from_numpy(x.view(np.uint8)).view(torch.float8_e4m3fn)
        runs["torch"] = lambda: torch.mul(tx.float(), 0.5).half()
    for name in ("arith", "table"):
        y[:] = 0
        runs[name]()
        assert np.array_equal(y.view(np.uint16), want), name
    times = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, f in runs.items():
            f()
            t = time.perf_counter()
            f()
            f()
            times[k].append((time.perf_counter() - t) / 2)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"fp8_dequantize n={n} ({args.mib:g} MiB moved), TK_NUM_THREADS={os.environ.get('TK_NUM_THREADS')}, "
          f"TK_CPU_LUT16={os.environ.get('TK_CPU_LUT16', '(auto)')}, load average {os.getloadavg()[0]:.1f}")
    print("  median ms: " + "  ".join(f"{k} {v:.3f}" for k, v in med.items()))
    print(f"  table / arith {med['table'] / med['arith']:.2f}; of the copy: arith {med['copy'] / med['arith']:.2f}, "
          f"table {med['copy'] / med['table']:.2f}")
    fp8.LOOKUP_MIN = None


if __name__ == "__main__":
    main()
