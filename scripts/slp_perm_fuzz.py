#!/usr/bin/env python3
"""Targeted fuzzing of GCC's vectorized permutations (the ``gcc-slp-permute`` miscompile):
kernels that read a small array (``tk.private`` or ``tk.localmem``; float64 or float32; 4, 8 or
16 elements) at constant permutations of the loop or item index (identity, rotated, reversed,
strided, xor-gathered), mix the reads with calls (math.sin/exp/floor/fmod, a ``@tk.func``) and
store back, in flat kernels (loops over ``j`` with constant trip counts) and grouped ones (one
item per element, barriers). Each kernel runs on the CPU and the interpreter and the outputs are
compared. ``--flags`` compiles every kernel with the given flags instead of the toolchain's
miscompile workarounds (``''``: none, ``=-fno-tree-slp-vectorize``, ``=-mprefer-vector-width=256``),
so that one seed range answers which flag choice is right.

    PYTHONPATH=src python3 scripts/slp_perm_fuzz.py --count 400 --seed 1000 --shape flat --flags ''
    PYTHONPATH=src python3 scripts/slp_perm_fuzz.py --count 1 --seed 1326 --flags=-fno-tree-slp-vectorize
    PYTHONPATH=src python3 scripts/slp_perm_fuzz.py --count 400 --seed 1000 --shape flat

Prints one line per mismatching kernel (seed, shape, the kernel's source with --show) and a
summary; exit status 1 when any kernel mismatched. docs/cpu.md "Flags" has the results.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import numpy as np  # noqa: E402

WORKAROUNDS = ("-fno-tree-slp-vectorize", "-mprefer-vector-width=256")     # runtime/compiler.py _NATIVE_PROBES
CALLS = ("sin", "exp", "floor", "fmod", "func", "none")


@dataclass(frozen=True)
class Shape:
    """One generated kernel's shape."""
    kind: str           # "flat" (tk.private, loops over j) or "grouped" (tk.localmem or tk.private, items)
    mem: str            # "private" or "localmem"
    dtype: str          # "float64" or "float32"
    n: int              # the array's length (4, 8, 16): also the loop's trip count or the group's size
    perms: tuple        # index expressions (in "j") of the reads
    calls: tuple        # the call applied to each extra read ("none": a plain product)
    inplace: bool       # the results are stored back into the array read (flat kernels only)


def perm_expr(rng: random.Random, n: int) -> str:
    """A constant permutation of ``j`` in range(n)."""
    kind = rng.choice(("id", "rot", "rev", "stride", "xor", "revrot"))
    if kind == "rot":
        return f"(j + {rng.randrange(1, n)}) % {n}"
    if kind == "rev":
        return f"{n - 1} - j"
    if kind == "stride":
        return f"(j * {rng.choice([s for s in (3, 5, 7) if s < n] or [3])}) % {n}"
    if kind == "xor":
        return f"j ^ {rng.randrange(1, n)}"
    if kind == "revrot":
        return f"({n - 1} - j + {rng.randrange(1, n)}) % {n}"
    return "j"


def call_expr(call: str, read: str) -> str:
    """``read`` passed through ``call``."""
    return {"sin": f"math.sin({read})", "exp": f"math.exp({read})", "floor": f"math.floor({read} * 3.0)",
            "fmod": f"math.fmod({read}, 0.37)", "func": f"g({read})", "none": f"({read} * {read})"}[call]


def random_shape(rng: random.Random, only: str | None) -> Shape:
    kind = only or rng.choice(("flat", "grouped"))
    mem = "private" if kind == "flat" else rng.choice(("localmem", "localmem", "private"))
    n = rng.choice((4, 8, 16))
    k = rng.randint(1, 3)
    perms = tuple(perm_expr(rng, n) for _ in range(k + 2))
    calls = tuple(rng.choice(CALLS) for _ in range(k))
    return Shape(kind, mem, rng.choice(("float64", "float32")), n, perms, calls,
                 kind == "flat" and rng.random() < 0.3)


def source(s: Shape) -> str:
    """The module text of shape ``s``'s kernel ``k`` (and its ``@tk.func`` g)."""
    head = ["import math", "import tinykernels as tk", "", "",
            "@tk.func", "def g(v):", "    return math.sin(v) * 0.5 + v", "", "", "@tk.kernel",
            "def k(o, x: tk.Const):"]
    reads = [f"a[{p}]" for p in s.perms]
    first = f"{reads[0]} * {reads[1]}"
    extra = [call_expr(c, r) for c, r in zip(s.calls, reads[2:])]
    if s.kind == "flat":
        out = "a" if s.inplace else "b"
        body = ["    i = tk.index()", f"    a = tk.private(x.dtype, {s.n})", f"    b = tk.private(x.dtype, {s.n})",
                f"    for j in range({s.n}):", f"        a[j] = x[i * {s.n} + j] * x[i * {s.n} + j]",
                f"    for j in range({s.n}):", f"        {out}[j] = {first}"]
        body += [f"        {out}[j] += {e}" for e in extra]
        body += [f"    for j in range({s.n}):", f"        o[i * {s.n} + j] = {out}[j]"]
        return "\n".join(head + body) + "\n"
    arrays = (f"    a = tk.localmem(x.dtype, {s.n})", f"    b = tk.localmem(x.dtype, {s.n})") \
        if s.mem == "localmem" else ("    s = tk.localmem(x.dtype, 1)",
                                     f"    a = tk.private(x.dtype, {s.n})", f"    b = tk.private(x.dtype, {s.n})")
    if s.mem == "localmem":     # one item per element, the reads after a barrier
        body = [*arrays, "    j = tk.index(tk.Local, tk.Linear)", "    i = tk.index()",
                "    a[j] = x[i] * x[i]", "    tk.synchronize()", f"    b[j] = {first}"]
        body += [f"    b[j] += {e}" for e in extra]
        body += ["    tk.synchronize()", "    o[i] = b[j]"]
        return "\n".join(head + body) + "\n"
    body = [*arrays, "    i = tk.index()", f"    for j in range({s.n}):",         # per-item private arrays
            f"        a[j] = x[i * {s.n} + j] * x[i * {s.n} + j]", f"    for j in range({s.n}):",
            f"        b[j] = {first}"]
    body += [f"        b[j] += {e}" for e in extra]
    body += ["    s[0] = a[0]", "    tk.synchronize()",
             f"    for j in range({s.n}):", f"        o[i * {s.n} + j] = b[j] + s[0] * 0.0"]
    return "\n".join(head + body) + "\n"


def set_kernel_flags(flags: str | None) -> None:
    """Compile every kernel with ``flags`` (a space-separated string) in place of the toolchain's
    miscompile workarounds (the probes' flags, for all kernels and for grouped ones); None: keep
    the toolchain's own choice."""
    import dataclasses
    from tinykernels.runtime import compiler
    if flags is None:
        return
    tc = compiler.toolchain()
    drop = set(WORKAROUNDS)
    patched = dataclasses.replace(tc, flags=tuple(f for f in tc.flags if f not in drop) + tuple(flags.split()),
                                  scoped_flags=())
    compiler.toolchain = lambda: patched


def run_one(seed: int, only: str | None) -> tuple[Shape, str, list]:
    """Shape, source and the elements where the CPU and the interpreter differ (beyond 1e-12 relative
    in float64, 1e-5 in float32; infinities and NaNs must match) of seed ``seed``'s kernel."""
    import tinykernels as tk
    from tinykernels.testing.fuzz.basics import load_kernel
    rng = random.Random(seed)
    s = random_shape(rng, only)
    text = source(s)
    kern = load_kernel(text, "k")
    items = 2 * s.n if s.kind == "grouped" and s.mem == "localmem" else 3
    size = items if s.kind == "grouped" and s.mem == "localmem" else items * s.n
    x = np.random.default_rng(seed).uniform(-1, 1, size).astype(s.dtype)
    outs = []
    for b in (tk.CPU(), tk.Interpreter()):
        o = np.zeros(size, s.dtype)
        inst = kern(b, s.n) if s.kind == "grouped" and s.mem == "localmem" else \
            kern(b, 1) if s.kind == "grouped" else kern(b)
        inst(o, x, ndrange=items)
        outs.append(o.astype(np.float64))
    got, want = outs
    tol = 1e-12 if s.dtype == "float64" else 1e-5
    return s, text, np.flatnonzero(~np.isclose(got, want, rtol=tol, atol=0, equal_nan=True)).tolist()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flags", default=None,
                   help="compile every kernel with these flags instead of the toolchain's miscompile workarounds "
                        "('' for none; default: the toolchain's choice)")
    p.add_argument("--shape", choices=("flat", "grouped"), default=None, help="only this kind of kernel")
    p.add_argument("--show", action="store_true", help="print each mismatching kernel's source")
    a = p.parse_args(argv)
    set_kernel_flags(a.flags)
    bad = 0
    for seed in range(a.seed, a.seed + a.count):
        s, text, wrong = run_one(seed, a.shape)
        if wrong:
            bad += 1
            print(f"MISMATCH seed {seed} elements {wrong[:16]} {s}", flush=True)
            if a.show:
                print(text)
    print(f"{a.count} kernels, {bad} mismatches (--flags {a.flags!r}, shape {a.shape or 'any'})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
