#!/usr/bin/env python3
"""tinykernels inside JAX and PyTorch: per-call overhead and large-kernel throughput.

    PYTHONPATH=src python3 benchmarks/bench_interop.py            # full (< ~2 min)
    PYTHONPATH=src python3 benchmarks/bench_interop.py --quick    # smoke test (< 30 s)

1. Overhead: a tiny kernel (16 float32 elements) per call, through a direct tinykernels launch
   (NumPy arrays), ``tinykernels.jax.jax_kernel`` under ``jax.jit`` (XLA's FFI) and eagerly,
   and ``tinykernels.torch.torch_op`` (eager, with and without autograd recording).
2. Throughput: a triad (``y[i] = x[i] + s * z[i]``, float32, 3 arrays of N elements) through
   each route, in GB/s of the kernel's own traffic, with the minor page faults per call. The
   table says what each route includes: the direct launch writes a preallocated, warm output;
   "direct, fresh output" writes a new NumPy array per call (what a functional route must
   pay for a new buffer: the operating system zeroes its pages on first touch); the kernel
   overwrites every element of ``y`` without reading it, so both wrappers give it a fresh
   (huge-page advised) buffer and copy no initial value. Donated under ``jax.jit``, XLA must
   return the result in the donated buffer: a fresh output is then copied into it, while
   ``jax_kernel(..., inplace=True)`` writes it directly. See docs/jax.md and docs/torch.md
   for the allocator settings that make fresh buffers reuse freed memory.
3. The PyTorch dispatch floor: a trivial operator (returns its first input) through
   ``torch.library.custom_op`` and through ``Library.define``/``impl`` with a Python Autograd
   kernel (the route ``torch_op`` uses), with no kernel behind either, and ``torch.add`` of
   two 16-element tensors (a built-in operator).

Every route's result is checked against NumPy once before it is timed (exit 1 on a mismatch).
Times are medians of repeated batches of calls (each batch after a warm-up call).
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
    import resource           # minor page faults per call (POSIX)
except ImportError:
    resource = None

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


def median_of(fn, calls: int, repeats: int, sync=lambda r: None) -> tuple:
    """(median seconds per call over ``repeats`` batches of ``calls`` calls, minor page faults
    per call in the median batch)."""
    sync(fn())
    runs = []
    for _ in range(repeats):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0
        t = time.perf_counter()
        for _ in range(calls):
            r = fn()
        sync(r)
        dt = (time.perf_counter() - t) / calls
        f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0
        runs.append((dt, (f1 - f0) / calls))
        r = None
    runs.sort()
    return runs[len(runs) // 2]


# route name -> what its time includes (section 2's table)
INCLUDES = {
    "direct tinykernels": "kernel; preallocated warm output",
    "direct, fresh output": "kernel; new np.empty output (page faults)",
    "jax.jit (FFI)": "kernel; fresh XLA output (no copy)",
    "jax.jit (FFI), donated": "kernel; fresh output + XLA copy into donated",
    "jax.jit (FFI), donated, inplace": "kernel in the donated buffer",
    "jax eager": "jax.jit route + eager dispatch",
    "torch_op": "kernel; fresh tensor (no copy)",
    "torch_op, no_grad": "as torch_op, under torch.no_grad()",
}


def routes(n: int) -> dict:
    """name -> (call, sync, result-as-NumPy) for a triad on n elements."""
    rng = np.random.default_rng(0)
    x, z = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    inst = triad(tk.CPU())

    def fresh():
        o = np.empty(n, np.float32)
        inst(o, x, z, 2.0, ndrange=n)
        return o
    out = {"direct tinykernels": (lambda: inst(y, x, z, 2.0, ndrange=n), lambda r: None, lambda: y),
           "direct, fresh output": (fresh, lambda r: None, fresh)}
    try:
        import jax
        import tinykernels.jax as tkjax
        f = tkjax.jax_kernel(triad, outputs=["y"])
        fi = tkjax.jax_kernel(triad, outputs=["y"], inplace=True)
        jx, jz, jy = jax.numpy.asarray(x), jax.numpy.asarray(z), jax.numpy.zeros(n, np.float32)
        jf = jax.jit(lambda a, b, c: f(a, b, c, s=2.0))

        def donating(g):
            jd = jax.jit(lambda a, b, c: g(a, b, c, s=2.0), donate_argnums=0)
            holder = [jax.numpy.zeros(n, np.float32)]    # donated each call: not jy

            def call():
                holder[0] = jd(holder[0], jx, jz)
                return holder[0]
            return call
        donated, donated_inplace = donating(f), donating(fi)
        sync = lambda r: r.block_until_ready()  # noqa: E731
        out["jax.jit (FFI)"] = (lambda: jf(jy, jx, jz), sync, lambda: np.asarray(jf(jy, jx, jz)))
        out["jax.jit (FFI), donated"] = (donated, sync, lambda: np.asarray(donated()))
        out["jax.jit (FFI), donated, inplace"] = (donated_inplace, sync, lambda: np.asarray(donated_inplace()))
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
    print(f"{'route':32s} {'us/call':>9s} {'vs direct':>9s}  target")
    for name, (call, sync, _) in rs.items():
        us = median_of(call, calls, reps, sync)[0] * 1e6
        base = us if base is None else base
        target = T_JAX_US if name.startswith("jax.jit") else T_TORCH_US if name.startswith("torch") else None
        tgt = "" if target is None else f"<= {target:.0f} us {'PASS' if us <= target else 'MISS'}"
        print(f"{name:32s} {us:9.2f} {us / base:8.1f}x  {tgt}")

    print(f"\n## 2. throughput, triad on {big} float32 elements ({3 * 4 * big / 2**20:.0f} MiB of traffic)")
    rs = routes(big)
    ok = check(rs, big) and ok
    direct = fresh = None
    print(f"{'route':32s} {'ms/call':>8s} {'GB/s':>7s} {'faults':>7s} {'vs direct':>9s} {'vs fresh':>8s}  includes")
    for name, (call, sync, _) in rs.items():
        s, faults = median_of(call, 3 if a.quick else 10, reps, sync)
        direct = s if direct is None else direct
        fresh = s if fresh is None and name == "direct, fresh output" else fresh
        ratio = s / direct
        vs_fresh = f"{s / fresh:7.2f}x" if fresh else f"{'':8s}"
        print(f"{name:32s} {s * 1e3:8.3f} {3 * 4 * big / s / 1e9:7.2f} {faults:7.0f} {ratio:8.2f}x {vs_fresh}  "
              f"{INCLUDES.get(name, '')}{'' if name.startswith('direct') else ' PASS' if ratio <= T_RATIO else ' MISS'}")

    floor = dispatch_floor()
    if floor:
        print("\n## 3. PyTorch dispatch floor: a trivial operator, no kernel")
        print(f"{'route':40s} {'us/call':>9s}")
        for name, call in floor.items():
            print(f"{name:40s} {median_of(call, calls, reps)[0] * 1e6:9.2f}")
    return 0 if ok else 1


def dispatch_floor() -> dict:
    """name -> call of a trivial operator per registration route ({} without PyTorch)."""
    try:
        import torch
    except ImportError:
        return {}
    ns = "tkbench_floor"
    if not hasattr(dispatch_floor, "lib"):
        lib = dispatch_floor.lib = torch.library.Library(ns, "FRAGMENT")
        schema = "(Tensor[] arrays, float[] floats, int[] ints, str key) -> Tensor[]"
        lib.define("lib" + schema)
        lib.impl("lib", lambda arrays, floats, ints, key: [arrays[0]], "CPU")
        below = torch._C._after_autograd_keyset

        def autograd(keyset, arrays, floats, ints, key):
            with torch._C._AutoDispatchBelowAutograd():
                return torch.ops.tkbench_floor.lib.default.redispatch(keyset & below, arrays, floats, ints, key)
        lib.impl("lib", autograd, "Autograd", with_keyset=True)

        @torch.library.custom_op(f"{ns}::custom", mutates_args=(), schema=schema)
        def custom(arrays: list[torch.Tensor], floats: list[float], ints: list[int], key: str) -> list[torch.Tensor]:
            return [arrays[0].clone()]
        dispatch_floor.custom = custom
    x = torch.zeros(16)
    lib_op, custom_op = getattr(torch.ops, ns).lib.default, getattr(torch.ops, ns).custom.default
    return {"Library.define/impl + Autograd kernel": lambda: lib_op([x], [2.0], [], "k"),
            "torch.library.custom_op": lambda: custom_op([x], [2.0], [], "k"),
            "torch.add (built-in operator)": lambda: torch.add(x, x)}


if __name__ == "__main__":
    sys.exit(main())
