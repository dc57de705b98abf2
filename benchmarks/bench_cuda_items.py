#!/usr/bin/env python3
"""Work items per CUDA thread (TK_CUDA_ITEMS, experimental) against T_eff of copy and triad.

    PYTHONPATH=src python3 benchmarks/bench_cuda_items.py            # items 1, 2, 4, 8; 1 GiB moved
    PYTHONPATH=src python3 benchmarks/bench_cuda_items.py --mb 256 --items 1 4

Each setting runs in its own process (the variable is read when a kernel is compiled). T_eff =
bytes that must move / best time per launch (batches of async launches + 1 synchronize), as a
fraction of PyTorch's device-to-device copy measured in this process. Every result is checked
against NumPy once; a wrong one exits 1.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MiB = 1 << 20


def best_time(launch, sync, rounds: int = 5, batch: int = 20) -> float:
    launch()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(batch):
            launch()
        sync()
        best = min(best, (time.perf_counter() - t0) / batch)
    return best


def child(mb: int, backend: str) -> dict:
    """GB/s of copy and triad (float32, float64) on ``backend`` with this process's TK_CUDA_ITEMS."""
    sys.path.insert(0, str(HERE))
    import tinykernels as tk
    from kernels import tk_copy, tk_triad
    b = tk.backend(backend)
    rng = np.random.default_rng(0)
    out = {}
    for dt in (np.float32, np.float64):
        for name, k, narr in (("copy", tk_copy, 2), ("triad", tk_triad, 3)):
            n = mb * MiB // (narr * np.dtype(dt).itemsize)
            ins = [rng.random(n).astype(dt) for _ in range(narr - 1)]
            din = [tk.asarray(x, backend=b) for x in ins]
            o = tk.asarray(np.full(n, np.nan, dt), backend=b)
            args = (o, *din) if name == "copy" else (o, *din, dt(2.5))
            k(b)(*args, ndrange=n)
            want = ins[0] if name == "copy" else ins[0] + dt(2.5) * ins[1]
            np.testing.assert_allclose(o.numpy(), want, rtol=1e-6)
            t = best_time(lambda: k(b)(*args, ndrange=n), b.synchronize)
            out[f"{name} {np.dtype(dt).name}"] = narr * n * np.dtype(dt).itemsize / t / 1e9
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024, help="MiB moved per launch (default 1024)")
    ap.add_argument("--items", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--backend", default="CUDA", help="CUDA (default); CPU for a dry run of the script")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.mb, a.backend)))
        return 0
    import torch
    dev = "cuda" if a.backend.startswith("CUDA") else "cpu"
    src = torch.rand(a.mb * MiB // 8, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    memcpy = 2 * src.numel() * 4 / best_time(lambda: dst.copy_(src), sync) / 1e9
    rows = {}
    for items in a.items:
        env = dict(os.environ, TK_CUDA_ITEMS=str(items))
        r = subprocess.run([sys.executable, __file__, "--child", "--mb", str(a.mb), "--backend", a.backend], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout, r.stderr, file=sys.stderr)
            return 1
        rows[items] = json.loads(r.stdout.strip().splitlines()[-1])
    cases = list(next(iter(rows.values())))
    print(f"T_eff GB/s at {a.mb} MiB moved; memcpy (torch copy_) {memcpy:.0f} GB/s; ratio to it in ()")
    print(f"{'TK_CUDA_ITEMS':>14} " + " ".join(f"{c:>20}" for c in cases))
    for items, r in rows.items():
        print(f"{items:>14} " + " ".join(f"{r[c]:>11.0f} ({r[c] / memcpy:5.3f})" for c in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
