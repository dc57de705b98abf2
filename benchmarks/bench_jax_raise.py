#!/usr/bin/env python3
"""A stencil raised into JAX vs the compiled CPU backend vs the same stencil in plain jax.numpy.

    PYTHONPATH=src python3 benchmarks/bench_jax_raise.py            # full (< ~1 min)
    PYTHONPATH=src python3 benchmarks/bench_jax_raise.py --quick    # smoke test (< 30 s)

One 2-D diffusion step (5-point stencil, float32, fixed boundary) on an n x n grid, three ways:

* ``raised``: ``tinykernels.jax.raise_kernel`` of the kernel, under ``jax.jit`` (the kernel's IR
  lowered to JAX operations: gathers and a scatter on the flattened grid, fused by XLA);
* ``tk CPU``: the same kernel compiled to C with OpenMP (tinykernels' CPU backend), NumPy arrays;
* ``jnp``: the stencil written with jax.numpy slices, under ``jax.jit``.

Every route's result is checked against NumPy once before it is timed (exit 1 on a mismatch;
floats within a few ulp: XLA contracts a * b + c into FMA where the CPU has it, docs/jax.md).
The table gives microseconds per step and Mcells/s. Run it on an idle machine.
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


@tk.kernel
def diffuse(out, u: tk.Const, a):
    i, j = tk.index(tk.Global, tk.Cartesian)
    nx, ny = u.shape[0], u.shape[1]
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        out[i, j] = u[i, j]
    else:
        out[i, j] = u[i, j] + a * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


def numpy_step(u: np.ndarray, a: float) -> np.ndarray:
    out = u.copy()
    c = u[1:-1, 1:-1]
    out[1:-1, 1:-1] = c + np.float32(a) * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - np.float32(4) * c)
    return out


def best_of(fn, calls: int, repeats: int) -> float:
    """Best seconds per call over ``repeats`` batches of ``calls`` calls."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls)
    return best


def routes(n: int, a: float) -> dict:
    """name -> (call one step, the step's result as NumPy)."""
    import jax
    import jax.numpy as jnp

    import tinykernels.jax as tkjax
    u0 = np.random.default_rng(0).random((n, n), dtype=np.float32)
    out = {}

    raised = tkjax.raise_kernel(diffuse, outputs=["out"])
    f = jax.jit(lambda o, u: raised(o, u, a=a))
    ju, jo = jnp.asarray(u0), jnp.zeros((n, n), jnp.float32)
    out["raised (jax.jit)"] = (lambda: f(jo, ju).block_until_ready(), lambda: np.asarray(f(jo, ju)))

    k = diffuse(tk.CPU())
    hu, ho = u0.copy(), np.zeros_like(u0)

    def cpu():
        k(ho, hu, a, ndrange=(n, n))
        return ho
    out["tk CPU (C + OpenMP)"] = (cpu, lambda: cpu().copy())

    def jnp_step(u):
        c = u[1:-1, 1:-1]
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
        return u.at[1:-1, 1:-1].set(c + a * lap)
    g = jax.jit(jnp_step)
    out["jnp slices (jax.jit)"] = (lambda: g(ju).block_until_ready(), lambda: np.asarray(g(ju)))
    return out, u0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small grids, few repeats (a smoke test)")
    args = p.parse_args()
    try:
        import jax  # noqa: F401
    except ImportError:
        print("jax is not installed: nothing to compare (pip install jax)")
        return 0
    sizes = [128, 512] if args.quick else [256, 1024, 4096]
    calls, repeats = (5, 2) if args.quick else (20, 5)
    a = 0.2
    rows, ok = [], True
    for n in sizes:
        rs, u0 = routes(n, a)
        ref = numpy_step(u0, a)
        for name, (call, result) in rs.items():
            got = result()
            if not np.allclose(got, ref, rtol=1e-6, atol=1e-6):
                print(f"MISMATCH: {name} at n={n}: max |diff| {np.abs(got - ref).max()}")
                ok = False
                continue
            t = best_of(call, calls, repeats)
            rows.append((n, name, t * 1e6, n * n / t / 1e6))
    print(f"{'n':>6}  {'route':<22} {'us/step':>10} {'Mcells/s':>10}")
    for n, name, us, mc in rows:
        print(f"{n:>6}  {name:<22} {us:>10.1f} {mc:>10.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
