#!/usr/bin/env python3
"""Size and C compile time of derived kernels for chains of n operations.

    PYTHONPATH=src python3 benchmarks/bench_adjoint_size.py                 # n = 10, 20, 40, 80
    PYTHONPATH=src python3 benchmarks/bench_adjoint_size.py --n 10 40 --no-compile

For each chain kind (a Horner polynomial, nested math calls, a product of n factors, a
``@tk.func`` holding a polynomial called in a loop, nested min/max) and length ``n``, the kernel is written to a
module in a temporary directory (kernels must live in files), and the CPU C source of the
primal kernel, its adjoint (``tk.adjoint``, reverse mode) and its tangent (``tk.Forward``) is
generated. Printed: the source sizes in bytes (the adjoint's and tangent's growth beyond the
primal's, which holds the C preamble they share) and the time GCC (tinykernels' own compiler
and flags, ``toolchain()``) takes for each source, outside the disk cache. The adjoint of a
chain whose partials repeat their primal operands grows quadratically in ``n``; one with every
primal value in a named local grows linearly. Before timing, the adjoint's and the tangent's
results are checked against central float64 finite differences (exit 1 on a mismatch).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    import tinykernels as tk
except ImportError:          # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk
from tinykernels.autodiff import derived
from tinykernels.runtime.compiler import toolchain

KINDS = ("poly", "calls", "product", "func_loop", "minmax")
CALLS = ("math.sin", "math.tanh", "math.atan")


def chain_source(kind: str, n: int) -> str:
    """A module defining kernel ``k(y, x)`` whose value is a chain of ``n`` operations."""
    head = "import math\nimport tinykernels as tk\n\n\n"
    if kind == "poly":           # Horner: ((x * c0 + c1) * x + c2) * x ...
        e = "x[i]"
        for j in range(n):
            e = f"({e} * x[i] + {0.1 + 0.01 * j!r})"
        return head + f"@tk.kernel\ndef k(y, x):\n    i = tk.index()\n    y[i] = {e}\n"
    if kind == "calls":          # sin(tanh(atan(sin(... x ...))))
        e = "x[i]"
        for j in range(n):
            e = f"{CALLS[j % len(CALLS)]}({e})"
        return head + f"@tk.kernel\ndef k(y, x):\n    i = tk.index()\n    y[i] = {e}\n"
    if kind == "product":        # (x + c0) * (x + c1) * ... : every factor's partial is a product
        e = " * ".join(f"(x[i] + {0.5 + 0.01 * j!r})" for j in range(n))
        return head + f"@tk.kernel\ndef k(y, x):\n    i = tk.index()\n    y[i] = {e}\n"
    if kind == "func_loop":      # a polynomial of n steps in a @tk.func, called 3 times in a loop
        e = "v"
        for j in range(n):
            e = f"({e} * w + {0.1 + 0.01 * j!r})"
        return (head + f"@tk.func\ndef step(v, w):\n    return math.sin({e})\n\n\n"
                "@tk.kernel\ndef k(y, x):\n    i = tk.index()\n    v = x[i]\n"
                "    for _ in range(3):\n        v = step(v, x[i])\n    y[i] = v\n")
    if kind == "minmax":         # max(min(max(x, x * c0), x * c1) ...): nested selections
        e = "x[i]"
        for j in range(n):
            e = f"{('min', 'max')[j % 2]}({e}, x[i] * {0.5 + 0.01 * j!r})"
        return head + f"@tk.kernel\ndef k(y, x):\n    i = tk.index()\n    y[i] = {e}\n"
    raise ValueError(f"kind: {kind!r}")


def load_kernel(path: Path, kind: str, n: int):
    path.write_text(chain_source(kind, n))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k


def sources(k, m: int = 8) -> tuple:
    """(primal, adjoint, tangent) CPU C source for float64 arrays of ``m`` elements."""
    z = np.zeros(m)
    primal = k.source("CPU", z, z, ndrange=m)
    adjoint = derived(k, "reverse", ("y", "x")).source(
        "CPU", z, z, z, z, np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64), ndrange=m)
    tangent = derived(k, "tangent", ("y", "x")).source("CPU", z, z, z, z, ndrange=m)
    return primal, adjoint, tangent


def compile_seconds(src: str, tmp: Path) -> float:
    """Wall time of one GCC run on ``src`` with tinykernels' flags (no cache)."""
    tc = toolchain()
    c, so = tmp / "k.c", tmp / "k.so"
    c.write_text(src)
    t0 = time.perf_counter()
    r = subprocess.run(list(tc.cmd) + list(tc.flags) + ["-o", str(so), str(c), "-lm"], capture_output=True,
                       text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"compile failed:\n{r.stderr[:2000]}")
    return dt


def check(k, kind: str, n: int) -> None:
    """Reverse and forward mode against central float64 finite differences."""
    rng = np.random.default_rng(n)
    m = 16
    lo, hi = (0.6, 1.0) if kind in ("poly", "func_loop") else (-1.0, 1.0)
    x, u, v = rng.uniform(lo, hi, m), rng.standard_normal(m), rng.standard_normal(m)
    cpu = tk.CPU()
    kk = k(cpu)

    def f(xx):
        y = np.zeros(m)
        kk(y, xx, ndrange=m)
        return y
    h = 1e-6
    fd = (f(x + h * v) - f(x - h * v)) / (2 * h)
    dx = np.zeros(m)
    tk.autodiff(tk.Reverse, lambda a, b: kk(a, b, ndrange=m), tk.Duplicated(np.zeros(m), u.copy()),
                tk.Duplicated(x.copy(), dx))
    dy = np.zeros(m)
    tk.autodiff(tk.Forward, lambda a, b: kk(a, b, ndrange=m), tk.Duplicated(np.zeros(m), dy),
                tk.Duplicated(x.copy(), v.copy()))
    scale = np.abs(fd).max() + 1e-300
    if not (np.allclose(dy, fd, rtol=1e-5, atol=1e-6 * scale)
            and np.isclose(u @ fd, dx @ v, rtol=1e-5, atol=1e-6 * scale * np.abs(u).sum())):
        raise SystemExit(f"{kind} n={n}: gradients disagree with finite differences")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10, 20, 40, 80])
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--no-compile", action="store_true", help="sizes only")
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; compiler: "
          f"{' '.join(toolchain().cmd)} {' '.join(toolchain().flags)}")
    print(f"{'kind':<10s} {'n':>4s} {'primal B':>9s} {'adjoint+B':>10s} {'tangent+B':>10s}"
          + ("" if args.no_compile else f" {'cc primal s':>11s} {'cc adjoint s':>12s} {'cc tangent s':>12s}"))
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        sys.path.insert(0, td)
        for kind in args.kinds:
            for n in args.n:
                k = load_kernel(tmp / f"chain_{kind}_{n}.py", kind, n)
                check(k, kind, n)
                p, a, t = sources(k)
                line = f"{kind:<10s} {n:4d} {len(p):9d} {len(a) - len(p):10d} {len(t) - len(p):10d}"
                if not args.no_compile:
                    line += "".join(f" {compile_seconds(s, tmp):{w}.2f}" for s, w in ((p, 11), (a, 12), (t, 12)))
                print(line, flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
