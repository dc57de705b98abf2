#!/usr/bin/env python3
"""tinykernels inside JAX and PyTorch: per-call overhead and large-kernel throughput.

    PYTHONPATH=src python3 benchmarks/bench_interop.py            # full (< ~2 min)
    PYTHONPATH=src python3 benchmarks/bench_interop.py --quick    # smoke test (< 30 s)

1. Overhead: a tiny kernel (16 float32 elements) per call, through a direct tinykernels launch
   (NumPy arrays), ``tinykernels.jax.jax_kernel`` under ``jax.jit`` (XLA's FFI) and eagerly,
   and ``tinykernels.torch.torch_op`` (eager, with and without autograd recording).
2. Throughput: a triad (``y[i] = x[i] + s * z[i]``, float32, 3 arrays of N elements) through
   each route, in GB/s of the kernel's own traffic. The torch operator is functional: it
   clones the output's initial value first (extra traffic, counted against it); under
   ``jax.jit`` with the output donated, XLA hands its buffer to the kernel, no copy.

Every route's result is checked against NumPy once before it is timed (exit 1 on a mismatch).
Targets (informational, PASS/MISS): <= 6 us per call through JAX's FFI, <= 8 us through
PyTorch; large kernels within 1.1x of the direct launch. Run it on an idle machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

try:
    import tinykernels as tk
except ImportError:          # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk

T_JAX_US, T_TORCH_US, T_RATIO = 6.0, 8.0, 1.1


@tk.kernel
def triad(y, x: tk.Const, z: tk.Const, s):
    i = tk.index()
    y[i] = x[i] + s * z[i]


def best_of(fn, calls: int, repeats: int, sync=lambda r: None) -> float:
    """Best seconds per call over ``repeats`` batches of ``calls`` calls."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            r = fn()
        sync(r)
        best = min(best, (time.perf_counter() - t) / calls)
    return best


def routes(n: int) -> dict:
    """name -> (call, sync, result-as-NumPy) for a triad on n elements."""
    rng = np.random.default_rng(0)
    x, z = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    inst = triad(tk.CPU())
    out = {"direct tinykernels": (lambda: inst(y, x, z, 2.0, ndrange=n), lambda r: None, lambda: y)}
    try:
        import jax
        import tinykernels.jax as tkjax
        f = tkjax.jax_kernel(triad, outputs=["y"])
        jx, jz, jy = jax.numpy.asarray(x), jax.numpy.asarray(z), jax.numpy.zeros(n, np.float32)
        jf = jax.jit(lambda a, b, c: f(a, b, c, s=2.0))
        holder = [jax.numpy.zeros(n, np.float32)]    # donated each call: not jy

        def donated():
            holder[0] = jd(holder[0], jx, jz)
            return holder[0]
        jd = jax.jit(lambda a, b, c: f(a, b, c, s=2.0), donate_argnums=0)
        sync = lambda r: r.block_until_ready()  # noqa: E731
        out["jax.jit (FFI)"] = (lambda: jf(jy, jx, jz), sync, lambda: np.asarray(jf(jy, jx, jz)))
        out["jax.jit (FFI), donated"] = (donated, sync, lambda: np.asarray(donated()))
        out["jax eager"] = (lambda: f(jy, jx, jz, s=2.0), sync, lambda: np.asarray(f(jy, jx, jz, s=2.0)))
    except ImportError as e:
        print(f"# JAX routes skipped: {e}")
    try:
        import torch
        import tinykernels.torch as tktorch
        name = f"tkbench::triad_{n}"
        op = tktorch._LIBS.get(name) or tktorch.torch_op(triad, outputs=["y"], name=name)
        tx, tz, ty = torch.from_numpy(x), torch.from_numpy(z), torch.zeros(n)

        def no_grad():
            with torch.no_grad():
                return op(ty, tx, tz, s=2.0)
        out["torch_op"] = (lambda: op(ty, tx, tz, s=2.0), lambda r: None, lambda: op(ty, tx, tz, s=2.0).numpy())
        out["torch_op, no_grad"] = (no_grad, lambda r: None, lambda: no_grad().numpy())
    except ImportError as e:
        print(f"# PyTorch routes skipped: {e}")
    return out


def check(rs: dict, n: int) -> bool:
    rng = np.random.default_rng(0)
    x, z = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    want = x + np.float32(2.0) * z
    ok = True
    for name, (call, sync, result) in rs.items():
        call()
        try:
            np.testing.assert_allclose(result(), want, rtol=1e-6, atol=1e-6)
        except AssertionError as e:
            print(f"WRONG RESULT: {name}: {e}")
            ok = False
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: fewer calls, smaller arrays")
    a = ap.parse_args()
    calls, reps = (300, 3) if a.quick else (5000, 7)
    big = (1 << 20) if a.quick else (1 << 25)

    print("## 1. per-call overhead, tiny kernel (16 float32 elements)")
    rs = routes(16)
    ok = check(rs, 16)
    base = None
    print(f"{'route':28s} {'us/call':>9s}  target")
    for name, (call, sync, _) in rs.items():
        us = best_of(call, calls, reps, sync) * 1e6
        base = us if base is None else base
        target = T_JAX_US if name.startswith("jax.jit") else T_TORCH_US if name.startswith("torch") else None
        tgt = "" if target is None else f"<= {target:.0f} us {'PASS' if us <= target else 'MISS'}"
        print(f"{name:28s} {us:9.2f}  {tgt}")

    print(f"\n## 2. throughput, triad on {big} float32 elements ({3 * 4 * big / 2**20:.0f} MiB of traffic)")
    rs = routes(big)
    ok = check(rs, big) and ok
    direct = None
    print(f"{'route':28s} {'ms/call':>9s} {'GB/s':>8s}  vs direct")
    for name, (call, sync, _) in rs.items():
        s = best_of(call, 3 if a.quick else 20, reps, sync)
        direct = s if direct is None else direct
        ratio = s / direct
        print(f"{name:28s} {s * 1e3:9.3f} {3 * 4 * big / s / 1e9:8.2f}  {ratio:5.2f}x "
              f"{'PASS' if ratio <= T_RATIO else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
