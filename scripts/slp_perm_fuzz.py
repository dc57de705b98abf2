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

``--forms all`` (f64narrow17) widens the generator beyond the classic one above (whose seeds the
docs cite): reads of the private or local array *or straight from the global array* at more
index forms (``j // 2``, ``j ^ 1``, interleaves and de-interleaves, strides 2..8 modulo n, a
constant index, ``j + 1``), stores at permuted positions (into the second array and into the
output), a flat form written out lane by lane with a constant index list (``b[0] = a[5] * a[2]``,
...), "mixed" kernels (float32 arrays, float64 private or local arrays: doubles inside a
float32 kernel), and "stream" kernels (one element per item over 78 items, so that the loop
vectorizer vectorizes the item loop: ``x[i + c]``, ``x[2 i + c]``, ``x[i ^ 1]``, ``x[i // 2]``,
reversed, an 8 x 9 transpose, ``x[i * k + c]`` with a runtime ``k``; stores at ``i``, reversed or
``i ^ 1``). Each kernel is also classified by the narrow rule (``runtime/base.py
kernel_features``: "permuted-doubles", which gets ``-mprefer-vector-width=256``); the summary
counts the flagged and unflagged kernels and the mismatches among each. With ``--flags ''`` every
mismatch must be among the flagged kernels (the rule misses none); with the toolchain's choice
there must be none.

    PYTHONPATH=src python3 scripts/slp_perm_fuzz.py --count 400 --seed 1000 --shape flat --flags ''
    PYTHONPATH=src python3 scripts/slp_perm_fuzz.py --count 1 --seed 1326 --flags=-fno-tree-slp-vectorize
    PYTHONPATH=src python3 scripts/slp_perm_fuzz.py --count 400 --seed 1000 --shape flat
    PYTHONPATH=src python3 scripts/slp_perm_fuzz.py --count 600 --seed 20000 --forms all --flags ''

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


FORMS = ("id", "rot", "rev", "stride", "xor", "revrot", "half", "pairswap", "interleave", "deinterleave",
         "stride2", "const", "shift")
BIJECTIVE = ("id", "rot", "rev", "stride", "xor", "revrot", "pairswap", "interleave", "deinterleave")


def wide_perm(rng: random.Random, n: int, kinds=FORMS) -> str:
    """An index expression in ``j`` over range(n) of the wide generator (``--forms all``);
    ``kinds`` limits it (BIJECTIVE: a permutation of range(n), for stores)."""
    kind = rng.choice(kinds)
    if kind in ("rot", "rev", "stride", "xor", "revrot", "id"):
        return perm_expr(random.Random(rng.random()), n) if kind != "id" else "j"
    if kind == "half":
        return "j // 2"
    if kind == "pairswap":
        return "j ^ 1"
    if kind == "interleave":
        return f"(j % 2) * {n // 2} + j // 2"
    if kind == "deinterleave":
        return f"(j * 2) % {n} + (j * 2) // {n}"
    if kind == "stride2":
        return f"(j * {rng.randint(2, 8)}) % {n}"
    if kind == "const":
        return str(rng.randrange(n))
    return f"(j + 1) % {n}"        # "shift": a rotation by one


STREAM_ITEMS = 78       # "stream" kernels: enough items for the loop vectorizer's 8-lane body and a tail (even: i ^ 1)
STREAM_FORMS = ("i + c", "i + c", "i + c", "2 * i + c", "3 * i + c", "i ^ 1", "i // 2", "rev", "(i % 8) * 9 + i // 8",
                "i * k + c")


def stream_index(rng: random.Random) -> str:
    """An index of x in the item ``i`` for "stream" kernels (x holds 4 * STREAM_ITEMS + 16 elements;
    ``k`` is a runtime argument, 1 or 2)."""
    form = rng.choice(STREAM_FORMS)
    c = rng.randrange(8)
    if form == "rev":
        return f"{STREAM_ITEMS - 1} - i + {c}"
    return form.replace("c", str(c))


@dataclass(frozen=True)
class WideShape:
    """One kernel of the wide generator."""
    kind: str           # "flat", "unrolled" (flat, written out lane by lane), "grouped" or "stream" (one
    #                     element per item, the item loop vectorized: x[i + c], x[2 i], x[i ^ 1], ...)
    mem: str            # where the reads come from: "private", "localmem" or "global"
    dtype: str          # "float64", "float32" or "mixed" (float32 arrays, float64 scratch)
    n: int
    reads: tuple        # index expressions in j of the reads (unrolled: tuples of constants)
    calls: tuple
    store: str          # index expression of the store into b (a permutation of range(n))
    out: str            # index expression of the output's store (a permutation)


def random_wide_shape(rng: random.Random, only: str | None) -> WideShape:
    kind = only or rng.choice(("flat", "flat", "unrolled", "grouped", "grouped", "stream"))
    if kind == "stream":
        k = rng.randint(1, 3)
        ordered = rng.random() < 0.3
        reads = tuple(f"i + {rng.randrange(8)}" if ordered else stream_index(rng) for _ in range(k + 2))
        out = "i" if ordered or rng.random() < 0.7 else rng.choice((f"{STREAM_ITEMS - 1} - i", "i ^ 1"))
        return WideShape("stream", "global", rng.choice(("float64", "float64", "float32", "mixed")), 8, reads,
                         tuple(rng.choice(CALLS) for _ in range(k)), "i", out)
    if kind == "flat" and only == "flat" and rng.random() < 0.25:
        kind = "unrolled"
    mem = rng.choice(("private", "global", "localmem") if kind == "grouped" else ("private", "global"))
    n = rng.choice((4, 8, 8, 16))
    k = rng.randint(1, 3)
    ordered = rng.random() < 0.25          # only reads in the lanes' order (what the narrow rule leaves alone)
    if kind == "unrolled":
        reads = tuple(tuple(j if ordered or rng.random() >= 0.7 else rng.randrange(n) for j in range(n))
                      for _ in range(k + 2))
    elif ordered:
        reads = tuple(rng.choice(("j", f"j + {rng.randint(1, n)}")) if mem == "global" else "j" for _ in range(k + 2))
    else:
        reads = tuple(wide_perm(rng, n) if mem != "global" or rng.random() < 0.8 else f"j + {rng.randint(1, n)}"
                      for _ in range(k + 2))
    calls = tuple(rng.choice(CALLS) for _ in range(k))
    store = wide_perm(rng, n, BIJECTIVE) if rng.random() < 0.3 and not ordered else "j"
    out = wide_perm(rng, n, BIJECTIVE) if rng.random() < 0.2 and not ordered else "j"
    return WideShape(kind, mem, rng.choice(("float64", "float64", "float32", "mixed")), n, reads, calls,
                     store, out)


def wide_source(s: WideShape) -> str:
    """The module text of the wide shape ``s``'s kernel ``k``."""
    head = ["import math", "import tinykernels as tk", "", "",
            "@tk.func", "def g(v):", "    return math.sin(v) * 0.5 + v", "", "", "@tk.kernel",
            "def k(o, x: tk.Const):"]
    scratch = "tk.float64" if s.dtype == "mixed" else "x.dtype"
    widen = (lambda v: f"tk.float64({v})") if s.dtype == "mixed" else (lambda v: v)
    narrow = (lambda v: f"tk.float32({v})") if s.dtype == "mixed" else (lambda v: v)
    if s.kind == "stream":
        reads = [widen(f"x[{r}]") for r in s.reads]
        lines = ["    i = tk.index()", f"    v = {reads[0]} * {reads[1]}"]
        lines += [f"    v += {call_expr(c, r)}" for c, r in zip(s.calls, reads[2:])]
        lines += [f"    o[{s.out}] = {narrow('v')}"]
        return "\n".join(head[:-1] + ["def k(o, x: tk.Const, k):"] + lines) + "\n"
    grouped_local = s.kind == "grouped" and s.mem == "localmem"
    base = "(i - j)" if grouped_local else f"i * {s.n}"

    def read(p) -> str:
        return widen(f"x[{base} + ({p})]") if s.mem == "global" else f"a[{p}]"

    def body(j: str, reads: list, target: str, indent: str) -> list:
        first = f"{reads[0]} * {reads[1]}"
        return [f"{indent}{target} = {first}"] + [f"{indent}{target} += {call_expr(c, r)}"
                                                  for c, r in zip(s.calls, reads[2:])]
    if grouped_local:
        lines = [f"    a = tk.localmem({scratch}, {s.n})", f"    b = tk.localmem({scratch}, {s.n})",
                 "    j = tk.index(tk.Local, tk.Linear)", "    i = tk.index()",
                 f"    a[j] = {widen('x[i]')} * {widen('x[i]')}", "    tk.synchronize()"]
        lines += body("j", [read(p) for p in s.reads], f"b[{s.store}]", "    ")
        lines += ["    tk.synchronize()", f"    o[(i - j) + {s.out}] = {narrow('b[j]')}"]
        return "\n".join(head + lines) + "\n"
    lines = [f"    a = tk.private({scratch}, {s.n})", f"    b = tk.private({scratch}, {s.n})"]
    if s.kind == "grouped":
        lines.insert(0, f"    sh = tk.localmem({scratch}, 1)")
    lines += ["    i = tk.index()", f"    for j in range({s.n}):",
              f"        a[j] = {widen(f'x[i * {s.n} + j]')} * {widen(f'x[i * {s.n} + j]')}"]
    if s.kind == "unrolled":
        for j in range(s.n):
            lines += body(str(j), [read(r[j]) for r in s.reads], f"b[{j}]", "    ")
    else:
        lines += [f"    for j in range({s.n}):"] + body("j", [read(p) for p in s.reads], f"b[{s.store}]", "        ")
    tail = " + sh[0] * 0.0" if s.kind == "grouped" else ""
    if s.kind == "grouped":
        lines += ["    sh[0] = a[0]", "    tk.synchronize()"]
    lines += [f"    for j in range({s.n}):", f"        o[i * {s.n} + {s.out}] = {narrow(f'b[j]{tail}')}"]
    return "\n".join(head + lines) + "\n"


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


RULE = {"flagged": None}     # the narrow rule's verdict on the last compiled kernel


def watch_rule() -> None:
    """Record, for each compiled kernel, whether the narrow rule (``kernel_features``: the feature
    "permuted-doubles") gives it the permutation workaround."""
    from tinykernels.runtime import cpu
    real = cpu.kernel_features

    def features(ir):
        f = real(ir)
        RULE["flagged"] = "permuted-doubles" in f
        return f
    cpu.kernel_features = features


def run_one(seed: int, only: str | None, forms: str = "classic") -> tuple:
    """Shape, source and the elements where the CPU and the interpreter differ (beyond 1e-12 relative
    and absolute in float64, 1e-5 in float32; infinities and NaNs must match) of seed ``seed``'s kernel."""
    import tinykernels as tk
    from tinykernels.testing.fuzz.basics import load_kernel
    rng = random.Random(seed)
    s = random_shape(rng, only) if forms == "classic" else random_wide_shape(rng, only)
    text = source(s) if forms == "classic" else wide_source(s)
    kern = load_kernel(text, "k")
    local = s.kind == "grouped" and s.mem == "localmem"
    stream = s.kind == "stream"
    items = STREAM_ITEMS if stream else 2 * s.n if local else 3
    size = items if local or stream else items * s.n
    dtype = "float32" if s.dtype == "mixed" else s.dtype
    room = 3 * STREAM_ITEMS + 16 if stream else 2 * s.n             # x[... + n], x[3 i + c]
    x = np.random.default_rng(seed).uniform(-1, 1, size + room).astype(dtype)
    extra = (1 + seed % 2,) if stream else ()                       # k of x[i * k + c]
    outs = []
    RULE["flagged"] = None
    for b in (tk.CPU(), tk.Interpreter()):
        o = np.zeros(size, dtype)
        inst = kern(b, s.n) if local else kern(b, 1) if s.kind == "grouped" else kern(b)
        inst(o, x, *extra, ndrange=items)
        outs.append(o.astype(np.float64))
    got, want = outs
    tol = 1e-12 if s.dtype == "float64" else 1e-5      # also absolute: sums of O(1) terms may cancel
    return s, text, np.flatnonzero(~np.isclose(got, want, rtol=tol, atol=tol, equal_nan=True)).tolist()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flags", default=None,
                   help="compile every kernel with these flags instead of the toolchain's miscompile workarounds "
                        "('' for none; default: the toolchain's choice)")
    p.add_argument("--shape", choices=("flat", "grouped", "stream"), default=None, help="only this kind of kernel "
                   "(stream: --forms all only)")
    p.add_argument("--show", action="store_true", help="print each mismatching kernel's source")
    p.add_argument("--forms", choices=("classic", "all"), default="classic",
                   help="the classic generator (the seeds docs/cpu.md cites) or the wide one")
    a = p.parse_args(argv)
    set_kernel_flags(a.flags)
    watch_rule()
    bad, flagged, bad_flagged = 0, 0, 0
    for seed in range(a.seed, a.seed + a.count):
        s, text, wrong = run_one(seed, a.shape, a.forms)
        flagged += bool(RULE["flagged"])
        if wrong:
            bad += 1
            bad_flagged += bool(RULE["flagged"])
            print(f"MISMATCH seed {seed} elements {wrong[:16]} rule={'flagged' if RULE['flagged'] else 'NOT flagged'} "
                  f"{s}", flush=True)
            if a.show:
                print(text)
        if (seed - a.seed + 1) % 250 == 0:
            print(f"... {seed - a.seed + 1} kernels, {bad} mismatches", flush=True)
    print(f"{a.count} kernels, {bad} mismatches (--flags {a.flags!r}, shape {a.shape or 'any'}, forms {a.forms}); "
          f"narrow rule: {flagged} flagged ({bad_flagged} of the mismatches), {a.count - flagged} not "
          f"({bad - bad_flagged} of the mismatches)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
