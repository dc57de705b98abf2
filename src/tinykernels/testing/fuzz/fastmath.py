"""Fastmath cases: kernels compiled with ``@tk.kernel(fastmath=True)``, compared with a tolerance.

A fastmath kernel may be reassociated and contracted into FMAs by the compiler, so its float
results legitimately differ from the interpreter's (which runs it exactly as written, the
reference) in the last bits, and by more where terms cancel. The tolerance is the classical
bound for any evaluation order of an expression made of ``+``, ``-``, ``*`` (each operation
rounding with relative error at most ``u``, an FMA rounding once):

    |got - want| <= 2 * gamma_k * mag + k * tiny,    gamma_k = k * u / (1 - k * u)

``mag`` is the same expression evaluated on absolute values with every subtraction turned into
an addition (the sum of the absolute values of all terms); ``k`` bounds the number of float
operations on any path from an input to the output (every operation the item executes for that
output, loops counted with their trip counts, group collectives with the group size), so that
any reassociated tree of them has depth at most ``k``: both the reference and the compiled
result are within ``gamma_k * mag`` of the exact value, hence the factor 2; ``tiny`` is the dtype's smallest normal
number (underflow). The generator writes a second kernel, ``<name>_mag``, with the same
structure computing ``mag`` (on absolute values of the inputs, ``+`` for ``-``, ``max`` of the
magnitudes for ``max``), which the reference runs alongside the kernel; the output slot's
tolerance in :class:`ArgSpec` ``tol`` is ``("fm", k)``.

So that a last-bit difference can never change anything else, float values of a fastmath case
flow only into float outputs: no comparisons, branches, casts to integers or indices computed
from floats. Integer work (an int32 recurrence with wrapping) goes to an integer output that is
compared bit for bit: fastmath never changes integer semantics. Division, square roots and
transcendental functions are not generated (their error is not bounded by ``mag``).
"""
from __future__ import annotations

import math
import random

import numpy as np

from .case import ArgSpec, Case, Options

FM_TAG = "fm"
BOUND = 1e12        # no product of operands that may exceed this (float32 overflows at 3.4e38)


def fm_tolerance(got: np.ndarray, want: np.ndarray, mag: np.ndarray, k: int) -> np.ndarray:
    """Elementwise: does ``got`` agree with ``want`` within the fastmath bound (see module doc)?
    NaN agrees only with NaN."""
    dt = np.dtype(want.dtype)
    ku = k * float(np.finfo(dt).eps) / 2
    gamma = ku / (1.0 - ku) if ku < 0.5 else math.inf
    tiny = float(np.finfo(dt).tiny)
    g, w, m = (np.asarray(x, dtype=np.float64) for x in (got, want, mag))
    with np.errstate(all="ignore"):
        ok = np.abs(g - w) <= 2.0 * gamma * np.abs(m) + k * tiny
        ok |= (g == w)                                   # equal infinities
    return ok | (np.isnan(g) & np.isnan(w))


class _FmGen:
    """One fastmath kernel: value and magnitude code generated side by side."""

    def __init__(self, seed: int):
        self.seed = seed
        self.r = random.Random(seed ^ 0x5F3759DF)
        self.nprng = np.random.default_rng(seed ^ 0x5F3759DF)
        self.val: list = []            # kernel body lines
        self.mag: list = []            # magnitude kernel body lines
        self.locals: list = []         # (name, ops, bound) of float locals
        self.slots: list = []          # ops bound per output slot
        self.feats: set = set()

    def emit(self, v: str, m: str | None = None, ind: int = 1) -> None:
        self.val.append("    " * ind + v)
        self.mag.append("    " * ind + (v if m is None else m))

    def leaf(self, extra: list):
        """(value code, magnitude code, ops, bound on the absolute value) of an operand."""
        r = self.r
        k = r.random()
        if extra and k < 0.35:
            return r.choice(extra)
        if self.locals and k < 0.55:
            n, ops, bnd = r.choice(self.locals)
            return n, n, ops, bnd
        if k < 0.75:
            c = r.randrange(self.K)
            return f"X[i, {c}]", f"abs(X[i, {c}])", 0, 2.0
        if k < 0.85:
            return "s", "abs(s)", 0, 2.0
        c = r.choice(["0.5", "1.5", "-0.75", "3.0", "-2.0", "0.1", "1.0"])
        return c, c.lstrip("-"), 0, abs(float(c))

    def expr(self, d: int, extra: list = ()):
        r = self.r
        if d <= 0 or r.random() < 0.25:
            return self.leaf(list(extra))
        kind = r.random()
        a = self.expr(d - 1, extra)
        if kind < 0.1:
            return f"(-{a[0]})", a[1], a[2], a[3]
        if kind < 0.15:
            return f"abs({a[0]})", a[1], a[2], a[3]
        b = self.expr(d - 1, extra)
        if kind < 0.22:
            return f"max({a[0]}, {b[0]})", f"max({a[1]}, {b[1]})", max(a[2], b[2]), max(a[3], b[3])
        mul_ok = a[3] * b[3] <= BOUND         # products stay far from overflow (values, not errors)
        if kind < 0.35:                     # a contraction candidate, written out
            c = self.expr(d - 1, extra)
            op = r.choice(["+", "-"])
            m = "*" if mul_ok else "+"
            return (f"({a[0]} {m} {b[0]} {op} {c[0]})", f"({a[1]} {m} {b[1]} + {c[1]})",
                    a[2] + b[2] + c[2] + 2, (a[3] * b[3] if mul_ok else a[3] + b[3]) + c[3])
        op = r.choice(["+", "-", "*", "+", "*"] if mul_ok else ["+", "-"])
        return (f"({a[0]} {op} {b[0]})", f"({a[1]} {'*' if op == '*' else '+'} {b[1]})", a[2] + b[2] + 1,
                a[3] * b[3] if op == "*" else a[3] + b[3])

    def store(self, e) -> None:
        k = len(self.slots)
        self.emit(f"out[i, {k}] = {e[0]}", f"out[i, {k}] = {e[1]}")
        self.slots.append(max(1, e[2]))

    def local(self, e) -> None:
        n = f"v{len(self.locals)}"
        self.emit(f"{n} = {e[0]}", f"{n} = {e[1]}")
        self.locals.append((n, e[2], e[3]))

    def loop(self) -> None:
        """An accumulation over the shared vector Y: a plain sum, a difference, or Horner-like."""
        r = self.r
        L = self.L
        n = f"acc{len(self.locals)}"
        init = self.expr(1)
        self.emit(f"{n} = {init[0]}", f"{n} = {init[1]}")
        if self.grouped and r.random() < 0.7:
            hdr, trips = f"for j in range(lid, {L}, tk.groupsize()[0]):", -(-L // self.wg)
        else:
            hdr, trips = f"for j in range({L}):", L
        self.emit(hdr)
        yj = ("Y[j]", "abs(Y[j])", 0, 2.0)
        xj = (f"X[i, j % {self.K}]", f"abs(X[i, j % {self.K}])", 0, 2.0)
        body = self.expr(2, [yj, xj])
        form = r.random()
        if form < 0.5:
            self.emit(f"{n} += {body[0]}", f"{n} += {body[1]}", 2)
            per = body[2] + 1
        elif form < 0.75:
            self.emit(f"{n} -= {body[0]}", f"{n} += {body[1]}", 2)
            per = body[2] + 1
        else:
            c = r.choice(["0.5", "-0.75", "1.0", "0.25"])
            self.emit(f"{n} = {n} * {c} + {body[0]}", f"{n} = {n} * {c.lstrip('-')} + {body[1]}", 2)
            per = body[2] + 2
        ops = init[2] + trips * per
        bnd = init[3] + trips * body[3]        # Horner's |c| <= 1 keeps it below this too
        if self.grouped:            # a prefix's error is bounded by the prefix of the magnitudes
            op = r.choice(["add", "add", "max", "scan", "exscan", "min"])
            call = {"scan": 'tk.group_scan({}, "add")', "exscan": 'tk.group_scan({}, "add", inclusive=False)',
                    "min": 'tk.group_reduce({}, "min")'}.get(op, f'tk.group_reduce({{}}, "{op}")')
            mcall = {"min": 'tk.group_reduce({}, "max")'}.get(op, call)      # |min| <= max of |.|
            self.emit(f"{n} = " + call.format(n), f"{n} = " + mcall.format(n))
            ops += self.wg if op in ("add", "scan", "exscan") else 0
            bnd *= self.wg if op in ("add", "scan", "exscan") else 1
            self.feats.add("scan" if "scan" in op else "reduce")
        self.locals.append((n, ops, bnd))

    def generate(self) -> Case:
        r = self.r
        self.dtype = r.choice(["float32", "float32", "float64"])
        self.grouped = r.random() < 0.5
        self.wg = r.choice([4, 8, 16, 32])
        self.K = r.randint(1, 6)
        self.L = r.randint(1, 24)
        n_items = self.wg * r.randint(1, 3) if self.grouped else r.randint(1, 64)
        self.emit("i = tk.index()")
        if self.grouped:
            self.emit("lid = tk.index(tk.Local, tk.Linear)")
        self.emit(f"ia = tk.int32({r.randint(-9, 9)})")
        for _ in range(r.randint(2, 6)):
            k = r.random()
            if k < 0.4:
                self.loop()
            elif k < 0.7:
                self.local(self.expr(3))
            else:
                self.store(self.expr(3))
        if self.grouped or r.random() < 0.5:
            self.loop()
        for n, ops, bnd in list(self.locals[-2:]):     # the last two locals reach an output
            e = self.expr(1)
            op = r.choice(["+", "-", "*"] if bnd * e[3] <= BOUND else ["+", "-"])
            self.store((f"({n} {op} {e[0]})", f"({n} {'*' if op == '*' else '+'} {e[1]})", ops + e[2] + 1))
        mul = r.choice([3, 5, 1103515245])
        self.emit(f"for j in range({self.L}):")
        self.emit(f"ia = ia * {mul} + tk.int32(j) - {r.randint(0, 7)}", ind=2)
        self.emit("iout[i, 0] = ia")
        kname = f"fm{self.seed & 0xffffffff:x}"
        sig = "out, iout, X: tk.Const, Y: tk.Const, s"
        lines = ["import math", "import numpy as np", "import tinykernels as tk", "", "",
                 "@tk.kernel(fastmath=True)", f"def {kname}({sig}):"] + self.val
        lines += ["", "", "@tk.kernel", f"def {kname}_mag({sig}):"] + self.mag
        source = "\n".join(lines) + "\n"
        npdt = np.dtype(self.dtype)
        uni = lambda *shape: self.nprng.uniform(-2.0, 2.0, shape).astype(npdt)   # noqa: E731
        out = np.zeros((n_items, max(1, len(self.slots))), npdt)
        args = [ArgSpec("out", "array", out, "out", tol=[(FM_TAG, k) for k in self.slots] or [0]),
                ArgSpec("iout", "array", np.zeros((n_items, 1), np.int32), "out", tol=[0]),
                ArgSpec("X", "array", uni(n_items, self.K), "in", const=True),
                ArgSpec("Y", "array", uni(self.L), "in", const=True),
                ArgSpec("s", "scalar", npdt.type(self.nprng.uniform(-2.0, 2.0)))]
        feats = {"fastmath", "grouped" if self.grouped else "flat", self.dtype} | self.feats
        if self.grouped:
            feats.add("collective")
        static = self.grouped and r.random() < 0.5
        return Case(self.seed, source, kname, args, n_items,
                    self.wg if self.grouped and not static else None, self.wg if static else None,
                    features=feats, mag_kname=f"{kname}_mag")


def generate_fastmath(seed: int) -> Case:
    """The fastmath case of ``seed`` (deterministic)."""
    return _FmGen(seed).generate()


def is_fastmath_seed(seed: int, opts: Options) -> bool:
    """Whether ``seed`` makes a fastmath case (a fraction ``opts.fastmath`` of the seeds, drawn
    from the seed alone so that ``generate`` stays a function of ``(seed, opts)``)."""
    return opts.fastmath > 0 and random.Random(seed * 2654435761 + 97).random() < opts.fastmath


__all__ = ["FM_TAG", "fm_tolerance", "generate_fastmath", "is_fastmath_seed"]
