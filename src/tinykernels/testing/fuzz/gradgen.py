"""Autodiff cases (``Options.grad``): random *differentiable* float64 kernels for :mod:`.gradcheck`.

The general generator (:mod:`.gen`) produces every type and construct, most of them not
differentiable (integer arithmetic, casts, bit tricks, infinities and NaNs as inputs). An autodiff
case needs smooth float64 functions of its inputs, so it has its own small grammar, as fastmath
cases do (:mod:`.fastmath`): arithmetic (``/`` only by a value bounded away from zero), math
functions composed so that their arguments stay away from singular points (``log(a*a + 0.5)``,
``sqrt(a*a + 0.25)``, ``exp(tanh(a))`` ...), ``min``/``max``/``abs``/``select`` and ``if`` on data
(kinks and jumps, which the checker steps around by re-sampling), ``for`` loops accumulating loads
at data-dependent and loop-dependent indices, a ``while`` loop with a data-dependent trip count,
``tk.private`` arrays, ``@tk.func`` calls, ``tk.atomic_add`` into accumulator outputs, reads of one
input at several indices (the own index, own index plus a constant offset, modulo the extent,
gathered through an index array) and in-place updates of the own element (``io[i] = io[i] * ...``).

Argument roles: ``in`` (float64 inputs, read only), ``idx`` (int32 index array, not
differentiated), ``out`` (stored once per item), ``acc`` (``atomic_add`` targets), ``io`` (read and
updated in place at the item's own element) and the scalar ``w`` (``tk.Active``). With ``n`` the
ndrange, inputs have ``n + 2`` elements (``x[i + 2]`` is in bounds), outputs and in-place arrays
``n``, accumulators 3.

``unsafe_indices`` kernels (``Options.grad_unsafe``, decided by an RNG of their own so that the
other seeds keep their kernels): a 1-D to 3-D launch with a workgroup size that does not divide
the ndrange, so the items past it (which run every statement) push to the tape too. The kernel
guards itself: ``ok`` says whether the item is inside the ndrange, ``i`` is the item's linear
index clamped into it (every load through ``i`` is in bounds for every item, so the padded items
compute, loop and accumulate like the others), stores, in-place updates and reads of in-place
arrays are under ``if ok:`` (or ``a if ok else b``), and some loads use the raw index under the
guard. Outputs and in-place arrays have the ndrange's shape (stored at the item's coordinates).

Narrow cases (``Options.grad_narrow``, an RNG of their own too; mode :data:`NARROW_MODE`): the
same grammar with the float arrays float16 or bfloat16 (accumulators float32, the narrowest type
``tk.atomic_add`` takes), ``tk.private`` / ``tk.localmem`` of ``x0.dtype`` and loop counters cast
with ``x0.dtype(j)``, so that the kernel's source is generic: instantiated with float64 arrays it is
the oracle of :func:`.gradcheck.check_grad_narrow_case`.
"""
from __future__ import annotations

import math
import random

import numpy as np

from .case import ArgSpec, Case

GRAD_MODE = "grad"
NARROW_MODE = "grad-narrow"
_NARROW = ("float16", "bfloat16")

#: unary wrappers keeping every function away from its singular points: (template, feature)
_UNARY = [("math.sin({a})", "sin"), ("math.cos({a})", "cos"), ("math.tanh({a})", "tanh"),
          ("math.atan({a})", "atan"), ("math.exp(math.tanh({a}))", "exp"), ("math.log({a} * {a} + 0.5)", "log"),
          ("math.sqrt({a} * {a} + 0.25)", "sqrt"), ("math.log1p({a} * {a})", "log1p"),
          ("math.expm1(math.sin({a}))", "expm1"), ("math.erf({a})", "erf"), ("tk.sigmoid({a})", "sigmoid"),
          ("math.asinh({a})", "asinh"), ("math.sinh(math.tanh({a}))", "sinh"), ("math.cosh(math.sin({a}))", "cosh"),
          ("({a}) ** 2", "pow"), ("({a}) ** 3", "pow"), ("math.pow({a} * {a} + 1.0, 1.5)", "pow"),
          ("tk.rsqrt({a} * {a} + 1.0)", "rsqrt"), ("math.asin(math.tanh({a}) * 0.9)", "asin"),
          ("math.atanh(math.tanh({a}) * 0.9)", "atanh"), ("abs({a})", "kink"), ("-({a})", "neg")]
_BINARY = [("({a} + {b})", "arith"), ("({a} - {b})", "arith"), ("({a} * {b})", "arith"),
           ("({a} / ({b} * {b} + 1.0))", "div"), ("max({a}, {b})", "kink"), ("min({a}, {b})", "kink"),
           ("math.hypot({a}, {b} + 2.0)", "hypot"), ("math.atan2({a}, {b} * {b} + 1.0)", "atan2"),
           ("tk.fma({a}, {b}, 0.5)", "fma"), ("math.pow({a} * {a} + 0.5, {b} * 0.5)", "pow")]
_LITS = ("0.5", "1.5", "-2.0", "0.25", "3.0", "-0.75")


class _GradGen:
    """One differentiable kernel module (source lines built statement by statement)."""

    def __init__(self, seed: int, local: float = 0.0, unsafe: float = 0.0, narrow: float = 0.0):
        self.seed = seed
        # narrow cases (Options.grad_narrow): an RNG of their own, so that the other seeds keep
        # their kernels; their source names no float type (x0.dtype), so float64 arrays give the oracle
        nr = random.Random(seed ^ 0x4A770)
        self.narrow = nr.choice(_NARROW) if nr.random() < narrow else ""
        self.fdt = "x0.dtype" if self.narrow else "tk.float64"      # private and local arrays
        self.fcast = "x0.dtype" if self.narrow else "float"         # loop counters as floats
        # grouped kernels (Options.grad_local) are decided by an RNG of their own, so that with
        # the option off (the default) every seed keeps its kernel
        gr = random.Random(seed ^ 0x10CA1)
        self.wg = gr.choice((2, 4, 8)) if gr.random() < local else 0
        self.groups = gr.randint(1, 3)
        # unsafe_indices kernels (Options.grad_unsafe): an RNG of their own too
        ur = random.Random(seed ^ 0x5AFE1)
        self.unsafe = ur.random() < unsafe
        self.own = "i"                 # the item's own element of outputs / in-place arrays
        self.raw = "i"                 # its unclamped linear index (valid under ``ok`` only)
        if self.unsafe:
            self.ndim, self.wgs, self.ext = _unsafe_geometry(ur)
            self.wg = math.prod(self.wgs) if self.wg else 0      # local memory: one slot per item
        self.r = random.Random(seed ^ 0x6AD0F)
        self.nprng = np.random.default_rng(seed ^ 0x6AD0F)
        self.body: list = []
        self.funcs: list = []          # (name, arity) of the @tk.func helpers
        self.func_src: list = []
        self.ins = [f"x{k}" for k in range(self.r.randint(1, 3))]
        self.outs = [f"y{k}" for k in range(self.r.randint(1, 2))]
        self.accs = [f"acc{k}" for k in range(self.r.randint(0, 1))]
        self.ios = [f"io{k}" for k in range(self.r.randint(0, 1))]
        self.locals: list = []         # float locals in scope
        self.extra: list = []          # loads/values valid only inside the current block (loop vars)
        self.features: set = set()
        self.count = 0
        self.stmts_left = self.r.randint(4, 12)

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def emit(self, line: str, ind: int) -> None:
        self.body.append("    " * ind + line)

    # --- expressions ------------------------------------------------------------------------

    def load(self) -> str:
        """A read of an input (or of an in-place array's own element) at one of several indices."""
        r = self.r
        if self.ios and r.random() < 0.15:
            self.features.add("io-read")
            if self.unsafe:     # another item updates the clamped element: only the own one, guarded
                return f"({r.choice(self.ios)}[{self.own}] if ok else {r.choice(_LITS)})"
            return f"{r.choice(self.ios)}[i]"
        x = r.choice(self.ins)
        if self.unsafe and r.random() < 0.2:
            self.features.add("guarded-read")
            return f"({x}[{self.raw}{r.choice(('', ' + 1', ' + 2'))}] if ok else {r.choice(_LITS)})"
        k = r.random()
        if k < 0.35:
            return f"{x}[i]"
        if k < 0.55:
            self.features.add("offset-read")
            return f"{x}[i + {r.randint(1, 2)}]"
        if k < 0.75:
            self.features.add("mod-read")
            return f"{x}[(i + {r.randint(1, 5)}) % n]"
        self.features.add("gather")
        return f"{x}[idx[i]]"

    def leaf(self, locals_ok: bool = True) -> str:
        r = self.r
        k = r.random()
        if self.extra and k < 0.3:
            return r.choice(self.extra)
        if locals_ok and self.locals and k < 0.55:
            return r.choice(self.locals)
        if k < 0.62:
            self.features.add("scalar")
            return "w"
        if k < 0.68:
            return r.choice(_LITS)
        return self.load()

    def expr(self, d: int) -> str:
        r = self.r
        if d <= 0 or r.random() < 0.25:
            return self.leaf()
        k = r.random()
        if k < 0.35:
            t, f = r.choice(_UNARY)
            self.features.add(f)
            a = self.expr(d - 1)
            return t.format(a=a)
        if k < 0.85:
            t, f = r.choice(_BINARY)
            self.features.add(f)
            return t.format(a=self.expr(d - 1), b=self.expr(d - 1))
        if k < 0.93 and self.funcs:
            name, arity = r.choice(self.funcs)
            self.features.add("func")
            return f"{name}({', '.join(self.expr(d - 1) for _ in range(arity))})"
        self.features.add("select")
        return f"({self.expr(d - 1)} if {self.cond(d - 1)} else {self.expr(d - 1)})"

    def cond(self, d: int) -> str:
        r = self.r
        if r.random() < 0.2:
            return f"idx[i] % 2 == {r.randint(0, 1)}"            # an integer condition: no kink at all
        return f"{self.expr(d)} {r.choice(('<', '>', '<=', '>='))} {self.expr(max(d - 1, 0))}"

    # --- statements -------------------------------------------------------------------------

    def block(self, ind: int, n: int) -> None:
        saved = list(self.locals)
        for _ in range(n):
            self.stmt(ind)
        self.locals = saved

    def stmt(self, ind: int) -> None:
        r = self.r
        self.stmts_left -= 1
        k = r.random()
        deep = ind < 4 and self.stmts_left > 0
        if k < 0.28 or not self.locals:
            v = self.fresh("v")
            self.emit(f"{v} = {self.expr(3)}", ind)
            self.locals.append(v)
        elif k < 0.40:
            v = r.choice(self.locals)
            op = r.choice(("+=", "-=", "*=", "="))
            rhs = self.expr(2)
            if op == "*=":
                rhs = f"math.tanh({rhs})"       # keep repeated products bounded
            self.emit(f"{v} {op} {rhs}", ind)
            self.features.add("reassign")
        elif k < 0.52 and deep:
            self.features.add("if")
            v = r.choice(self.locals)
            self.emit(f"if {self.cond(2)}:", ind)
            self.emit(f"{v} = {self.expr(2)}", ind + 1)
            self.block(ind + 1, r.randint(0, 2))
            if r.random() < 0.6:
                self.emit("else:", ind)
                self.emit(f"{v} = {self.expr(2)}", ind + 1)
        elif k < 0.64 and deep:
            self.s_for(ind)
        elif k < 0.70 and deep:
            self.s_while(ind)
        elif k < 0.78 and deep:
            self.s_private(ind)
        elif k < 0.88 and self.accs:
            self.features.add("atomic")
            a = r.choice(self.accs)
            j = r.choice(("i % 3", "0", "idx[i] % 3", "(i + 1) % 3"))
            self.emit(f"tk.atomic_add({a}, {j}, {self.expr(2)})", ind)
        elif self.unsafe and deep and r.random() < 0.3:
            self.features.add("guarded-block")
            self.emit("if ok:", ind)
            self.block(ind + 1, r.randint(1, 2))
        elif self.ios:
            self.features.add("io-update")
            a, o = r.choice(self.ios), self.own
            if self.unsafe:
                self.emit("if ok:", ind)
                ind += 1
            self.emit(f"{a}[{o}] = {a}[{o}] * {self.expr(1)} + {self.expr(2)}", ind)
        else:
            v = self.fresh("v")
            self.emit(f"{v} = {self.expr(2)}", ind)
            self.locals.append(v)

    def acc_local(self, ind: int) -> str:
        """A float local to accumulate into (a new one, initialised to a value, when there is none)."""
        if self.locals and self.r.random() < 0.7:
            return self.r.choice(self.locals)
        v = self.fresh("s")
        self.emit(f"{v} = {self.leaf()}", ind)
        self.locals.append(v)
        return v

    def s_for(self, ind: int) -> None:
        r, j, s = self.r, self.fresh("j"), self.acc_local(ind)
        hi = r.choice(("3", "4", "idx[i] % 4 + 1", "2"))
        self.features.add("for")
        self.emit(f"for {j} in range({hi}):", ind)
        x = r.choice(self.ins)
        self.extra = [f"{x}[(i + {j}) % n]", f"{x}[({j} * 3 + idx[i]) % n]", f"{self.fcast}({j})"]
        self.emit(f"{s} = {s} * {r.choice(('0.5', '0.75', '1.0'))} + {self.expr(2)}", ind + 1)
        self.block(ind + 1, r.randint(0, 1))
        self.extra = []

    def s_while(self, ind: int) -> None:
        r, c, s = self.r, self.fresh("c"), self.acc_local(ind)
        self.features.add("while")
        self.emit(f"{c} = 0", ind)
        self.emit(f"while {c} < idx[i] % 3 + {r.randint(0, 2)}:", ind)
        self.extra = [f"{r.choice(self.ins)}[({c} + i) % n]"]
        self.emit(f"{s} = {s} * 0.5 + {self.expr(2)}", ind + 1)
        self.emit(f"{c} += 1", ind + 1)
        self.extra = []

    def s_private(self, ind: int) -> None:
        r, p, m = self.r, self.fresh("p"), self.fresh("m")
        size = r.randint(2, 4)
        self.features.add("private")
        self.emit(f"{p} = tk.private({self.fdt}, ({size},))", ind)
        self.emit(f"for {m} in range({size}):", ind)
        self.extra = [f"{r.choice(self.ins)}[(i + {m}) % n]", f"{self.fcast}({m})"]
        self.emit(f"{p}[{m}] = {self.expr(2)}", ind + 1)
        self.extra = []
        v = self.fresh("v")
        rd = r.choice((f"{p}[0] * {p}[{size - 1}]", f"{p}[idx[i] % {size}]", f"{p}[1] + {p}[0]"))
        self.emit(f"{v} = {rd}", ind)
        self.locals.append(v)

    def local_memory(self) -> None:
        """Local memory written by every item, read at a neighbour's element after a barrier,
        and a group sum (the ndrange is a multiple of the group size, or the kernel is
        unsafe_indices: every element is written)."""
        wg, lm, v = self.wg, self.fresh("lm"), self.fresh("v")
        self.features |= {"localmem", "barrier"}
        self.emit("l = tk.index(tk.Local, tk.Linear)", 1)
        self.emit(f"{lm} = tk.localmem({self.fdt}, ({wg},))", 1)
        self.emit(f"{lm}[l] = {self.expr(2)}", 1)
        self.emit("tk.synchronize()", 1)
        self.emit(f"{v} = {lm}[(l + {self.r.randint(1, wg)}) % {wg}] * {self.r.choice(_LITS)} + {lm}[l]", 1)
        self.locals.append(v)
        if self.r.random() < 0.5:
            t = self.fresh("v")
            self.features.add("group_reduce")
            op = self.r.choice(("add", "max"))
            self.emit(f"{t} = tk.group_reduce({self.expr(2)}, {op!r})", 1)
            self.locals.append(t)

    # --- the module -------------------------------------------------------------------------

    def gen_func(self) -> None:
        name, arity = f"g{len(self.funcs)}", self.r.randint(1, 3)
        params = [f"a{k}" for k in range(arity)]
        saved = (self.locals, self.extra, self.ins, self.ios)
        # inside a function only its parameters exist: no arrays, no w
        self.locals, self.extra = params, []
        lines = []
        for k in range(self.r.randint(0, 2)):
            t = f"t{k}"
            e = self.fn_expr(2)
            lines.append(f"    {t} = {e}")
            self.locals = self.locals + [t]
        lines.append(f"    return {self.fn_expr(2)}")
        self.locals, self.extra, self.ins, self.ios = saved
        self.func_src.append("@tk.func\n" + f"def {name}({', '.join(params)}):\n" + "\n".join(lines) + "\n")
        self.funcs.append((name, arity))

    def fn_expr(self, d: int) -> str:
        """An expression of a function's parameters (and locals) only."""
        r = self.r
        if d <= 0 or r.random() < 0.3:
            return r.choice(self.locals) if r.random() < 0.85 else r.choice(_LITS)
        if r.random() < 0.4:
            t, f = r.choice(_UNARY)
            self.features.add(f)
            return t.format(a=self.fn_expr(d - 1))
        t, f = r.choice(_BINARY)
        self.features.add(f)
        return t.format(a=self.fn_expr(d - 1), b=self.fn_expr(d - 1))

    def generate(self) -> Case:
        r = self.r
        for _ in range(r.choice((0, 0, 1, 2))):
            self.gen_func()
        if self.unsafe:
            n = math.prod(self.ext)
            self.prologue_unsafe()
        else:
            n = r.randint(3, 24) if not self.wg else self.wg * self.groups
            self.emit("i = tk.index()", 1)
            self.emit("n = y0.shape[0]", 1)
        if self.wg:
            self.local_memory()
        while self.stmts_left > 0:
            self.stmt(1)
        if self.unsafe:
            self.emit("if ok:", 1)
        for y in self.outs:
            self.emit(f"{y}[{self.own}] = {self.expr(3)}", 2 if self.unsafe else 1)
        kname = f"kgrad{self.seed}"
        params = self.outs + self.accs + self.ios + self.ins + ["idx", "w"]
        deco = "@tk.kernel(unsafe_indices=True)" if self.unsafe else "@tk.kernel"
        src = ("import math\n\nimport tinykernels as tk\n\n\n" + "\n\n".join(self.func_src) +
               ("\n\n" if self.func_src else "") + f"{deco}\ndef {kname}({', '.join(params)}):\n" +
               "\n".join(self.body) + "\n")
        vals = lambda m: self.nprng.uniform(-1.5, 1.5, m)   # noqa: E731
        shape = tuple(self.ext) if self.unsafe and self.ndim > 1 else n    # outputs, in-place arrays
        args = ([ArgSpec(y, "array", vals(shape), "out") for y in self.outs] +
                [ArgSpec(a, "array", vals(3), "acc") for a in self.accs] +
                [ArgSpec(a, "array", vals(shape), "io") for a in self.ios] +
                [ArgSpec(x, "array", vals(n + 2), "in") for x in self.ins] +
                [ArgSpec("idx", "array", self.nprng.integers(0, n, n).astype(np.int32), "in", const=True),
                 ArgSpec("w", "scalar", float(self.nprng.uniform(0.5, 1.5)))])
        if self.narrow:
            args = _narrowed(args, self.narrow)
            self.features |= {"narrow", f"narrow-{self.narrow}"}
        if self.unsafe:
            nd, wg = (n, self.wgs[0]) if self.ndim == 1 else (tuple(self.ext), tuple(self.wgs))
            self.features |= {"unsafe_indices", "partial-group", f"unsafe-{self.ndim}d"}
            case = Case(self.seed, src, kname, args, nd, workgroupsize=wg, unsafe=True,
                        features=self.features | {"grad"})
        else:
            case = Case(self.seed, src, kname, args, n, workgroupsize=self.wg or None, features=self.features | {"grad"})
        case.mode = NARROW_MODE if self.narrow else GRAD_MODE
        return case

    def prologue_unsafe(self) -> None:
        """The index lines of an unsafe_indices kernel: ``ok`` (inside the ndrange), ``i`` (the
        linear index clamped into it), ``n`` (the ndrange's item count), ``own`` / ``raw``."""
        if self.ndim == 1:
            self.emit("gi = tk.index()", 1)
            self.emit("n = y0.shape[0]", 1)
            self.emit("ok = gi < n", 1)
            self.emit("i = min(gi, n - 1)", 1)
            self.own = self.raw = "gi"
            return
        qs = [f"q{d}" for d in range(self.ndim)]
        ns = [f"n{d}" for d in range(self.ndim)]
        self.emit(f"{', '.join(qs)} = tk.index(tk.Global, tk.Cartesian)", 1)
        for d in range(self.ndim):
            self.emit(f"{ns[d]} = y0.shape[{d}]", 1)
        self.emit(f"n = {' * '.join(ns)}", 1)
        self.emit(f"ok = {' and '.join(f'{q} < {m}' for q, m in zip(qs, ns))}", 1)
        lin = f"min({qs[0]}, {ns[0]} - 1)"
        raw = qs[0]
        for d in range(1, self.ndim):
            lin = f"({lin}) * {ns[d]} + min({qs[d]}, {ns[d]} - 1)" if d > 1 else f"{lin} * {ns[d]} + min({qs[d]}, {ns[d]} - 1)"
            raw = f"({raw}) * {ns[d]} + {qs[d]}" if d > 1 else f"{raw} * {ns[d]} + {qs[d]}"
        self.emit(f"i = {lin}", 1)
        self.own, self.raw = ", ".join(qs), f"({raw})"


def _unsafe_geometry(ur: random.Random) -> tuple:
    """(ndim, workgroup shape, ndrange extents) of an unsafe_indices case: at least one extent
    is no multiple of its workgroup extent (a partial group), at most 48 items in the padded grid
    (the interpreter runs them in Python)."""
    nd = ur.choice((1, 1, 2, 3))
    while True:
        wgs = [ur.choice((2, 4, 8))] if nd == 1 else [ur.choice((1, 2, 4)) for _ in range(nd)]
        if not 2 <= math.prod(wgs) <= 16:
            continue
        ext = [ur.randint(1, 2 * w + 1) for w in wgs]
        d = ur.choice([k for k in range(nd) if wgs[k] > 1])
        ext[d] = wgs[d] * ur.randint(0, 2) + ur.randint(1, wgs[d] - 1)
        padded = math.prod(-(-e // w) * w for e, w in zip(ext, wgs))
        if padded <= 48 and math.prod(ext) >= 2:
            return nd, wgs, ext


def _narrowed(args: list, dtype: str) -> list:
    """The float arrays of ``args`` rounded to ``dtype`` (accumulators to float32)."""
    from .types import np_dtype
    out = []
    for a in args:
        if a.kind == "array" and np.asarray(a.value).dtype == np.float64:
            a = ArgSpec(a.name, a.kind, np.asarray(a.value).astype(np_dtype("float32" if a.role == "acc" else dtype)),
                        a.role, a.const)
        out.append(a)
    return out


def generate_grad(seed: int, local: float = 0.0, unsafe: float = 0.0, narrow: float = 0.0) -> Case:
    """The autodiff case of ``seed`` (deterministic); ``local``: the probability of a kernel with
    local memory, a barrier and a group reduction; ``unsafe``: of an ``unsafe_indices`` kernel
    with partial work groups (1-D to 3-D); ``narrow``: of float16 / bfloat16 arrays (mode
    :data:`NARROW_MODE`)."""
    return _GradGen(seed, local, unsafe, narrow).generate()


__all__ = ["GRAD_MODE", "NARROW_MODE", "generate_grad"]
