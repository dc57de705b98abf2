"""Automatic differentiation of kernels, as IR-to-IR transformations (every backend runs
the result unchanged).

**Reverse mode** (:func:`reverse_kernel`). Each work item runs a *forward sweep* (the kernel
itself, recording on a per-item tape what the reverse needs) and then a *reverse sweep*
(the statements in reverse order, propagating adjoints):

* locals assigned more than once, or in a loop, have their old value pushed before each
  assignment and popped back in reverse;
* a store to an array the kernel also reads pushes the element's old value, and the
  reverse sweep puts it back, so every load in the reverse sweep sees what the forward
  sweep saw (in-place updates such as ``A[i] *= A[i]`` are right);
* only *active* values get adjoint code: those that depend on a differentiated input and
  that a store into a differentiated array depends on (:mod:`.activity`); an accumulation
  adds nothing where the adjoint it scales is exactly 0 (``0 * inf`` would be NaN);
* ``if`` pushes which branch ran; loops push their trip count; the kernel is first
  rewritten without ``break``/``continue``/``return`` (:mod:`.structurize`);
* in kernels with barriers, values that are uniform across the group are never taped:
  the reverse sweep recomputes them by replaying the uniform statements, so barriers
  keep standing under uniform control flow, and they run in reverse order;
* a read ``A[idx]`` adds to the shadow ``dA[idx]`` plainly when ``idx`` is the work item's
  own index and atomically otherwise; a scalar argument's gradient is accumulated per
  item and written to a per-item array that the launcher sums (no atomics);
  :mod:`.adjoint_gather` then rewrites these (per-group sums, gather form of stencil reads,
  plain adds, no dead primal stores).

A tape whose size is known at compile time is indexed by the work item's linear index; a
data-dependent one is sized by a *count* variant of the kernel (``mode="count"``) that runs
the forward sweep and reports each item's tape length.

**Forward mode** (:func:`tangent_kernel`) carries a tangent beside every float value.

What cannot be differentiated correctly is a :class:`~tinykernels.errors.CompileError`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .. import dtypes as D
from ..dtypes import Ty
from ..errors import CompileError
from ..ir import nodes as N
from .activity import linear, nondiff_call, useful_values
from .overwrites import fixed_defs, row_owned_arrays
from .primal_values import PrimalValues
from .structurize import structurize
from .uniformity import defs, uniform_vars

B = Ty(D.bool_)


def _err(loc: N.Loc, msg: str, kernel: str) -> CompileError:
    return N.error_at(msg, loc, kernel)


def is_float(t: Ty) -> bool:
    return t.dtype.is_float


def shadow_dtype(dt):
    """The dtype of a reverse-mode shadow of an array of float dtype ``dt``: float32 for the
    narrow floats (float16, bfloat16, fp8), whose arithmetic computes in float32 anyway, ``dt``
    otherwise. A gradient accumulated in the narrow type rounds at every contribution: an
    element read 1000 times in a loop got a bfloat16 gradient of 256 (256 + 1 rounds back to
    256), and a few reads of one element were off by an ulp or more in fp8. The launcher
    widens the caller's narrow shadow into a float32 copy before the adjoint and rounds it
    back once after it (``autodiff.AdjointLauncher.launch``)."""
    return D.float32 if dt.is_float and dt.bits < 32 else dt


def adjoint_ty(t: Ty) -> Ty:
    """The type of the adjoint of a value of type ``t``: float32 for the narrow floats (as
    :func:`shadow_dtype`), so the contributions of several uses of a narrow value (``v = x[i]``
    used three times, ``x[i]`` widened by a cast) are summed in float32, not each rounded to
    the narrow type first."""
    return Ty(shadow_dtype(t.dtype)) if t.dtype.is_float and t.dtype.bits < 32 else t


def diff_params(k: N.Kernel) -> list:
    """Names of the parameters that get a shadow: float arrays and float scalars."""
    out = []
    for p in k.params:
        if p[0] == "array" and p[1].dtype.is_float:
            out.append(p[1].name)
        elif p[0] == "scalar" and p[2].dtype.is_float:
            out.append(p[1])
    return out


def own_partials_unit(e: N.Expr) -> bool:
    """Whether the chain rule through the operation ``e`` itself (not its operands) cannot turn
    a zero adjoint into NaN, so no zero-adjoint guard is needed at ``e`` (its operands'
    operations guard themselves): sums and differences (partials +-1), floor divisions, calls
    without derivatives, and a product whose factors are plain inputs (loads, arguments,
    constants and their sums and products: a partial there is infinite only where an input
    is, as in PyTorch and JAX). Calls (``exp``, ``pow``, ...), divisions and products with
    a computed local keep the guard: their partials overflow from finite inputs."""
    if isinstance(e, N.BinOp):
        if e.op in ("+", "-", "//"):
            return True
        return e.op == "*" and _plain(e.a) and _plain(e.b)
    return isinstance(e, N.Call) and linear(e)


def _plain(e: N.Expr) -> bool:
    """Built from loads, arguments and constants by +, -, * and casts only."""
    if isinstance(e, (N.Load, N.Arg, N.Const, N.Index, N.Shape)):
        return True
    if isinstance(e, N.Cast):
        return _plain(e.a)
    if isinstance(e, N.Unary):
        return e.op == "-" and _plain(e.a)
    return isinstance(e, N.BinOp) and e.op in ("+", "-", "*") and _plain(e.a) and _plain(e.b)


@dataclass
class TapePlan:
    """How big each work item's tape is: ``static`` (counts known at compile time) or not."""
    static: bool
    nf: int = 0
    ni: int = 0


# ----------------------------------------------------------------------------- IR helpers

class _B:
    """Small IR constructors bound to a location and a locals table."""

    def __init__(self, k: N.Kernel, locals_: dict):
        self.k, self.locals, self.n = k, locals_, 0
        self.loc = k.body[0].loc if k.body else N.NOLOC

    def fresh(self, base: str, ty: Ty) -> str:
        self.n += 1
        name = f"_ad{self.n}_{base}"
        self.locals[name] = ty
        return name

    def var(self, name) -> N.Var:
        return N.Var(self.locals[name], self.loc, name)

    def c(self, v, ty) -> N.Const:
        return N.Const(ty, self.loc, v)

    def op(self, o, a, b, ty=None) -> N.Expr:
        return N.BinOp(ty or a.ty, self.loc, o, a, b)

    def cmp(self, o, a, b) -> N.Expr:
        return N.Compare(B, self.loc, o, a, b)

    def call(self, fn, *args, ty=None) -> N.Expr:
        return N.Call(ty or args[0].ty, self.loc, fn, list(args))

    def cast(self, e, ty) -> N.Expr:
        return e if e.ty == ty else N.Cast(ty, e.loc, e)

    def assign(self, name, e) -> N.Stmt:
        return N.Assign(self.loc, name, self.cast(e, self.locals[name]))

    def neg(self, e) -> N.Expr:
        return N.Unary(e.ty, self.loc, "-", e)


# ----------------------------------------------------------------------------- analyses

def _assign_sites(stmts, in_loop=False, out=None) -> dict:
    """local -> (number of assignment sites, whether any is inside a loop)."""
    out = {} if out is None else out
    for s in stmts:
        for v in defs(s):
            n, loop = out.get(v, (0, False))
            out[v] = (n + 1, loop or in_loop)
        if isinstance(s, N.If):
            _assign_sites(s.body, in_loop, out)
            _assign_sites(s.orelse, in_loop, out)
        elif isinstance(s, (N.While, N.For)):
            _assign_sites(s.body, True, out)
    return out


def _loaded_arrays(stmts) -> set:
    out = set()
    for s in N.walk_stmts(stmts):
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if isinstance(x, (N.Load, N.Atomic)):
                    out.add(x.array.name)
    return out


def _single_defs(stmts, sites) -> dict:
    """Locals assigned exactly once, outside loops: name -> value expression."""
    out = {}
    for s in N.walk_stmts(stmts):
        if isinstance(s, N.Assign) and sites.get(s.var) == (1, False):
            out[s.var] = s.value
    return out


# ----------------------------------------------------------------------------- edge points

def _zero_of(b: _B, ty: Ty) -> N.Const:
    return b.c(0.0 if ty.dtype.is_float else 0, ty)


def _unless_zero(b: _B, x: N.Expr, v: N.Expr) -> N.Expr:
    """``0 if x == 0 else v`` (a derivative's value at a point where its formula is 0/0)."""
    return N.Select(v.ty, v.loc, b.cmp("==", x, _zero_of(b, x.ty)), _zero_of(b, v.ty), v)


def _unless_inf(b: _B, x: N.Expr, v: N.Expr) -> N.Expr:
    """``0 if x is infinite else v`` (a derivative whose limit is 0 where its formula is inf/inf)."""
    return N.Select(v.ty, v.loc, b.call("isinf", x, ty=B), _zero_of(b, v.ty), v)


def _hypot_partial(b: _B, p: N.Expr, q: N.Expr, h: N.Expr) -> N.Expr:
    """d hypot(p, q) / dp = p / h: 0 at (0, 0) (the minimum-norm subgradient) and its limit
    sign(p) where p alone is infinite (p / h is inf / inf there; NaN stays where both are)."""
    lim = N.Select(p.ty, p.loc, b.call("isinf", q, ty=B), b.op("/", p, h), b.call("copysign", b.c(1.0, p.ty), p))
    return N.Select(p.ty, p.loc, b.call("isinf", p, ty=B), lim, _unless_zero(b, h, b.op("/", p, h)))


def _sign(b: _B, x: N.Expr, ty: Ty) -> N.Expr:
    """d|x|/dx: -1, 0 at x == 0 (the minimum-norm subgradient, PyTorch's choice), 1."""
    zero = b.c(0.0, ty)
    return N.Select(ty, x.loc, b.cmp("<", x, zero), b.c(-1.0, ty),
                    N.Select(ty, x.loc, b.cmp(">", x, zero), b.c(1.0, ty), zero))


def pow_partials(b: _B, a: N.Expr, c: N.Expr, e: N.Expr) -> tuple:
    """(d a**c / d a, d a**c / d c or None for a constant exponent), with PyTorch's values at
    the edges: d/da is 0 for c == 0 (a**0 is constant, even at a == 0); d/dc is 0 at a == 0
    for c >= 0 (log(0) times 0**c). Negative bases give NaN for d/dc, like PyTorch."""
    one = b.c(1.0, e.ty)
    da = b.op("*", c, b.call("pow", a, b.op("-", c, one)))
    if isinstance(c, N.Const):
        return (b.c(0.0, e.ty) if c.value == 0 else da), None
    da = _unless_zero(b, c, da)
    dc = b.op("*", e, b.call("log", a))
    base0 = b.cmp("==", a, _zero_of(b, a.ty))
    dc = N.Select(e.ty, e.loc, base0, N.Select(e.ty, e.loc, b.cmp(">=", c, _zero_of(b, c.ty)), b.c(0.0, e.ty), dc),
                  dc)
    return da, dc


# ----------------------------------------------------------------------------- math partials

_UNARY_OF_RESULT = frozenset({"exp", "sqrt", "rsqrt", "tan"})
_UNARY = frozenset({"exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
                    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "sigmoid",
                    "abs", "fabs"})


def unary_partial(b: _B, fn: str, x: N.Expr, e, ty: Ty, bind=None) -> N.Expr:
    """d fn(x) / dx for a one-argument math function; ``e()`` is the value fn(x) (called only
    by the functions in ``_UNARY_OF_RESULT``, whose derivative is written with it); ``bind(v)``
    names a value the partial uses twice (a local; by default it is repeated)."""
    one = b.c(1.0, ty)
    sq = lambda v: b.op("*", v, v)  # noqa: E731
    if fn == "exp":
        return e()
    if fn == "expm1":
        return b.call("exp", x)
    if fn == "log":
        return b.op("/", one, x)
    if fn in ("log2", "log10"):
        return b.op("/", one, b.op("*", x, b.c(math.log(2 if fn == "log2" else 10), ty)))
    if fn == "log1p":
        return b.op("/", one, b.op("+", one, x))
    if fn == "sqrt":
        return b.op("/", b.c(0.5, ty), e())
    if fn == "rsqrt":
        # -rsqrt(x)**3 / 2 as -0.5 * (e / |x|): the sign of e**3 at -0.0 (rsqrt(-0) = -inf, its
        # derivative +inf, as torch and the adjoint of 1 / sqrt(x) give; e / x gave -inf)
        return b.op("*", b.c(-0.5, ty), b.op("/", e(), b.call("fabs", x)))
    if fn in ("sin", "cos", "sinh", "cosh"):
        d = b.call({"sin": "cos", "cos": "sin", "sinh": "cosh", "cosh": "sinh"}[fn], x)
        return b.neg(d) if fn == "cos" else d
    if fn == "tan":
        return b.op("+", one, sq(e()))
    # 1 - x**2 and x**2 - 1 as (1 - x) (1 + x) and (x - 1) (x + 1): the factors are exact near
    # |x| = 1 (Sterbenz), where x * x - 1 cancels its rounding into a relative error of about
    # eps / (1 - |x|) (6e-5 at x = 0.99988 in float32, 3e-10 at 1 - 7e-8 in float64)
    if fn in ("asin", "acos"):
        d = b.op("/", one, b.call("sqrt", b.op("*", b.op("-", one, x), b.op("+", one, x))))
        return b.neg(d) if fn == "acos" else d
    if fn == "atan":
        return b.op("/", one, b.op("+", one, sq(x)))
    if fn in ("tanh", "sigmoid"):
        # sech(x)**2 = 4 t / (1 + t)**2 with t = exp(-2 |x|), sigmoid' = t / (1 + t)**2 with t =
        # exp(-|x|): accurate to a few ulps everywhere. 1 - tanh(x)**2 and s (1 - s) cancel where the
        # function saturates (relative error eps / (1 - |tanh|), 0 where tanh rounds to 1: at
        # x = 19 tanh is 1 - 1 ulp on one backend and 1.0 on another, so their gradients were
        # 2e-16 and 0 where it is 1.25e-16; fuzz seed 89000520, adx20)
        t = b.call("exp", b.op("*", b.c(-2.0 if fn == "tanh" else -1.0, ty), b.call("fabs", x)))
        t = bind(t) if bind else t
        u = b.op("+", one, t)
        return b.op("/", b.op("*", b.c(4.0 if fn == "tanh" else 1.0, ty), t), b.op("*", u, u))
    # asinh' = 1 / hypot(x, 1) and acosh' = 1 / (sqrt(x - 1) sqrt(x + 1)): x * x overflowed for
    # |x| > 1.3e154 (1.8e19 in float32), a derivative of 0 where it is about 1 / |x| (adx20)
    if fn == "asinh":
        return b.op("/", one, b.call("hypot", x, one))
    if fn == "acosh":
        return b.op("/", one, b.op("*", b.call("sqrt", b.op("-", x, one)), b.call("sqrt", b.op("+", x, one))))
    if fn == "atanh":
        return b.op("/", one, b.op("*", b.op("-", one, x), b.op("+", one, x)))
    if fn in ("erf", "erfc"):
        c = (2 if fn == "erf" else -2) / math.sqrt(math.pi)
        return b.op("*", b.c(c, ty), b.call("exp", b.neg(sq(x))))
    return _sign(b, x, ty)     # abs, fabs


# ----------------------------------------------------------------------------- reverse mode

class _Reverse:
    def __init__(self, k: N.Kernel, diff: set, grouped: bool, count: bool, wide: bool = True):
        # tapes, cursors and partial sums: 64-bit, or 32-bit on backends without 64-bit types
        fd, idt = (D.float64, D.int64) if wide else (D.float32, D.int32)
        self.F, self.I = Ty(fd), Ty(idt)
        self.TAPE_F = N.ArrayInfo("_tk_tape_f", fd, 1)
        self.TAPE_I = N.ArrayInfo("_tk_tape_i", idt, 1)
        self.TAPE_OFF = N.ArrayInfo("_tk_tape_off", idt, 2, const=True)
        self.COUNTS = N.ArrayInfo("_tk_counts", idt, 2)
        self.TAPE_PARAMS = (self.TAPE_F, self.TAPE_I, self.TAPE_OFF)
        self.k0 = k
        self.k = structurize(k)
        self.locals = dict(self.k.locals)
        self.b = _B(self.k, self.locals)
        self.diff, self.grouped, self.count = set(diff), grouped, count
        self.sites = _assign_sites(self.k.body)
        # uniform integers (loop counters, sizes) are recomputed, never taped; uniform floats
        # may depend on differentiated arguments, so they are taped like any other value
        self.uniform = {v for v in uniform_vars(self.k.body, self.k.locals)
                        if not self.k.locals[v].dtype.is_float} if grouped else set()
        self.pushed = {v for v, (n, loop) in self.sites.items() if (n > 1 or loop) and v not in self.uniform}
        self.loaded = _loaded_arrays(self.k.body)
        # locals with one value wherever read (the index a @tk.func called in a loop receives)
        self.single = fixed_defs(self.k.body)
        # global arrays whose every access is in the item's own row: their shadows take plain adds
        self.row_owned = row_owned_arrays(self.k, self.single)
        # activity: adjoints only for values that depend on a differentiated input (active) and
        # that some output depends on (useful); the others get no adjoint code at all
        self.useful = useful_values(self.k, self.diff)
        self.active_vars, self.active_arrays = active_values(self.k, self.diff)
        self.arrays = {p[1].name: p[1] for p in self.k.params if p[0] == "array"}
        self.shadow: dict = {}      # array name -> shadow ArrayInfo
        self.allocs: list = []      # shadow local/private declarations
        self.zero: list = []        # statements zeroing shadow local/private arrays
        self.scalar_acc: dict = {}  # scalar param -> accumulator local
        self.static = True          # tape size known at compile time
        self.nf = self.ni = 0       # static pushes per item (max over paths)
        self.cf = self.b.fresh("cf", self.I)
        self.ci = self.b.fresh("ci", self.I)
        self.dvars: dict = {}
        self.snap_n = 0
        # the primal values the partials of one statement need
        self.pv = PrimalValues(self.b, uniform_vars(self.k.body, self.k.locals))
        self.live = None                 # the zero-adjoint guard of the operation at hand (bp)

    # --- errors ---------------------------------------------------------------------

    def fail(self, loc, msg):
        raise _err(loc, msg, self.k.name)

    # --- shadows ----------------------------------------------------------------------

    def dvar(self, x: str) -> str:
        d = self.dvars.get(x)
        if d is None:
            d = self.dvars[x] = f"_d_{x}"
            self.locals[d] = adjoint_ty(self.locals[x])
        return d

    def shadow_of(self, a: N.ArrayInfo) -> N.ArrayInfo | None:
        if not a.dtype.is_float:
            return None
        if a.space == "global":
            if a.name not in self.diff:
                return None
            return self.shadow.setdefault(a.name, N.ArrayInfo(f"_d_{a.name}", shadow_dtype(a.dtype), a.ndim,
                                                              "global", False, a.contiguous))
        sh = self.shadow.get(a.name)
        if sh is None:
            size = math.prod(a.shape)
            sh = self.shadow[a.name] = N.ArrayInfo(f"_d{a.name}", shadow_dtype(a.dtype), 1, a.space, False, True,
                                                   (size,))
            self.allocs.append(N.AllocArray(self.b.loc, sh))
            self.zero += self.zero_array(sh)
        return sh

    def zero_array(self, sh: N.ArrayInfo) -> list:
        b = self.b
        e = b.fresh("z", self.I)
        size = sh.shape[0]
        if sh.space == "local":
            wg = math.prod(self.k.workgroup)
            start, step = N.Index(Ty(self.I.dtype, True), b.loc, "local_linear"), b.c(wg, self.I)
        else:
            start, step = b.c(0, self.I), b.c(1, self.I)
        return [b.assign(e, start),
                N.While(b.loc, b.cmp("<", b.var(e), b.c(size, self.I)),
                        [N.Store(b.loc, sh, [b.var(e)], b.c(0.0, Ty(sh.dtype))),
                         b.assign(e, b.op("+", b.var(e), step))])]

    def shadow_index(self, a: N.ArrayInfo, idx: list) -> list:
        if a.space == "global":
            return idx
        b, off = self.b, None
        for k, i in enumerate(idx):
            i = b.cast(i, self.I)
            off = i if off is None else b.op("+", b.op("*", off, b.c(a.shape[k], self.I)), i)
        return [off]

    def own_index(self, a: N.ArrayInfo, idx: list) -> bool:
        """Whether ``idx`` is provably this work item's own element (no other item touches it)."""
        def resolve(e, depth=0):
            while isinstance(e, N.Var) and e.name in self.single and depth < 8:
                e, depth = self.single[e.name], depth + 1
            while isinstance(e, N.Cast) and e.ty.dtype.is_int and e.a.ty.dtype.is_int:
                e = e.a
            return e
        es = [resolve(i) for i in idx]
        if a.space == "private":
            return True
        lin, cart = ("global_linear", "global") if a.space == "global" else ("local_linear", "local")
        if len(es) == 1 and isinstance(es[0], N.Index) and es[0].kind == lin:
            return True
        return (len(es) == self.k.ndim and
                all(isinstance(e, N.Index) and e.kind == cart and e.dim == d for d, e in enumerate(es)))

    def accumulate(self, a: N.ArrayInfo, idx: list, g: N.Expr, loc, out: list) -> None:
        sh = self.shadow_of(a)
        if sh is None:
            return
        sidx = self.shadow_index(a, idx)
        g = self.guarded(self.b.cast(g, Ty(sh.dtype)), out)
        if self.own_index(a, idx) or a.space == "global" and a.name in self.row_owned:
            out.append(N.Store(loc, sh, sidx, self.b.op("+", N.Load(Ty(sh.dtype), loc, sh, sidx), g)))
        elif sh.dtype.name in ("float32", "float64"):
            out.append(N.ExprStmt(loc, N.Atomic(Ty(sh.dtype), loc, "add", sh, sidx, [g])))
        else:
            self.fail(loc, f"the gradient of '{a.name}' ({a.dtype.name}) may be read by several work items "
                      "and would need atomic adds, which this dtype does not have; use float32 or float64")

    # --- tape ---------------------------------------------------------------------------

    def kind(self, t: Ty) -> str:
        return "f" if t.dtype.is_float else "i"

    def push(self, e: N.Expr, loc) -> list:
        b = self.b
        cur, tape, ty = (self.cf, self.TAPE_F, self.F) if self.kind(e.ty) == "f" else (self.ci, self.TAPE_I, self.I)
        inc = b.assign(cur, b.op("+", b.var(cur), b.c(1, self.I)))
        if self.count:
            return [inc]
        return [N.Store(loc, tape, [b.var(cur)], b.cast(e, ty)), inc]

    def pop(self, name: str, loc) -> list:
        return self.pop_into(lambda v: self.b.assign(name, v), self.locals[name], loc)

    def pop_into(self, make, ty: Ty, loc) -> list:
        b = self.b
        cur, tape, tty = (self.cf, self.TAPE_F, self.F) if self.kind(ty) == "f" else (self.ci, self.TAPE_I, self.I)
        dec = b.assign(cur, b.op("-", b.var(cur), b.c(1, self.I)))
        val = N.Load(tty, loc, tape, [b.var(cur)])
        return [dec, make(b.cast(val, ty))]

    # --- forward sweep ------------------------------------------------------------------

    def fwd(self, stmts, depth_loop=False) -> tuple:
        """(statements, static float pushes, static int pushes)."""
        out, nf, ni = [], 0, 0
        for s in stmts:
            loc = s.loc
            if isinstance(s, N.Assign):
                if s.var in self.pushed:
                    t = self.locals[s.var]
                    out += self.push(N.Var(t, loc, s.var), loc)
                    nf, ni = (nf + 1, ni) if self.kind(t) == "f" else (nf, ni + 1)
                out.append(s)
            elif isinstance(s, N.Philox):
                for o in s.outs:
                    if o in self.pushed:
                        out += self.push(N.Var(self.locals[o], loc, o), loc)
                        ni += 1
                out.append(s)
            elif isinstance(s, N.Store):
                if s.array.name in self.loaded or s.array.space != "global":
                    old = N.Load(Ty(s.array.dtype), loc, s.array, s.index)
                    out += self.push(old, loc)
                    nf, ni = (nf + 1, ni) if s.array.dtype.is_float else (nf, ni + 1)
                out.append(s)
            elif isinstance(s, N.If):
                a, af, ai = self.fwd(s.body, depth_loop)
                c, cf, ci = self.fwd(s.orelse, depth_loop)
                if self.is_uniform_stmt(s):
                    out.append(N.If(loc, s.cond, a, c))
                    nf, ni = nf + max(af, cf), ni + max(ai, ci)
                else:
                    one, zero = self.b.c(1, self.I), self.b.c(0, self.I)
                    out.append(N.If(loc, s.cond, a + self.push(one, loc), c + self.push(zero, loc)))
                    nf, ni = nf + max(af, cf), ni + max(ai, ci) + 1
            elif isinstance(s, N.While):
                body, bf, bi = self.fwd(s.body, True)
                if bf or bi:
                    self.static = False
                if self.is_uniform_stmt(s):
                    out.append(N.While(loc, s.cond, body))
                else:
                    n = self.b.fresh("trips", self.I)
                    inc = self.b.assign(n, self.b.op("+", self.b.var(n), self.b.c(1, self.I)))
                    out += [self.b.assign(n, self.b.c(0, self.I)), N.While(loc, s.cond, [inc] + body)]
                    out += self.push(self.b.var(n), loc)
                    ni += 1
            elif isinstance(s, N.Collective):
                check_collective(s, self.k.name)
                if s.dst in self.pushed:
                    out += self.push(N.Var(self.locals[s.dst], loc, s.dst), loc)
                    nf += 1
                out.append(s)
            elif isinstance(s, N.Print):
                continue
            elif isinstance(s, N.ExprStmt):
                self.check_atomic(s.expr, loc)
                out.append(s)
            elif isinstance(s, N.AllocArray) and not self.count:
                # declared at the top of the adjoint: the reverse sweep reads the array (restored
                # from the tape) outside the block that declared it (a tk.private in an `if` or a
                # loop body was out of scope there, and the C compiler rejected the adjoint)
                if all(a.array.name != s.array.name for a in self.allocs):
                    self.allocs.insert(0, s)
            else:
                out.append(s)
        return out, nf, ni

    def check_atomic(self, e, loc) -> None:
        if isinstance(e, N.Atomic) and e.array.dtype.is_float and e.op not in ("add", "sub"):
            self.fail(loc, f"atomic_{e.op} on floats cannot be differentiated correctly "
                      "(its result depends on the order of the work items)")

    def is_uniform_stmt(self, s) -> bool:
        """A group-level if/while of a kernel with barriers (its condition is uniform)."""
        if not self.grouped:
            return False
        from .uniformity import is_uniform
        return is_uniform(s.cond, self.uniform)

    # --- uniform replay (kernels with barriers) -------------------------------------------

    def uniform_assigned(self, stmts) -> set:
        return {v for s in N.walk_stmts(stmts) for v in defs(s) if v in self.uniform}

    def replay(self, stmts) -> list:
        """The uniform statements of ``stmts`` (re-running them recomputes uniform values)."""
        out = []
        for s in stmts:
            if isinstance(s, N.Assign) and s.var in self.uniform:
                out.append(s)
            elif isinstance(s, N.If) and self.uniform_assigned([s]) and self.is_uniform_stmt(s):
                out.append(N.If(s.loc, s.cond, self.replay(s.body), self.replay(s.orelse)))
            elif isinstance(s, N.While) and self.uniform_assigned([s]) and self.is_uniform_stmt(s):
                out.append(N.While(s.loc, s.cond, self.replay(s.body)))
        return out

    def snapshot(self, names) -> dict:
        snap = {}
        for x in sorted(names):
            self.snap_n += 1
            snap[x] = self.b.fresh(f"snap_{x}", self.locals[x])
        return snap

    def save(self, snap) -> list:
        return [self.b.assign(s, self.b.var(x)) for x, s in snap.items()]

    def restore(self, snap) -> list:
        return [self.b.assign(x, self.b.var(s)) for x, s in snap.items()]

    # --- reverse sweep ----------------------------------------------------------------------

    def rev_block(self, stmts, snap: dict) -> list:
        """Reverse of ``stmts``; on entry the uniform values are those at the block's end and
        ``snap`` holds those at its start (kernels with barriers only)."""
        out = []
        touched = self.uniform_assigned(stmts)
        for k in range(len(stmts) - 1, -1, -1):
            s = stmts[k]
            moves = bool(touched and self.uniform_assigned([s]))
            if moves:   # uniform values before s: the block start plus a replay of what precedes s
                out += self.restore(snap) + self.replay(stmts[:k])
            out += self.rev(s, moves)
            if moves and isinstance(s, (N.If, N.While)):
                out += self.restore(snap) + self.replay(stmts[:k])
        return out

    def rev(self, s, uniform_moves: bool) -> list:
        b, loc, out = self.b, s.loc, []
        if isinstance(s, N.Assign):
            t = self.locals[s.var]
            g = None
            if is_float(t) and s.var not in self.uniform and s.var in self.useful.vars and s.var in self.active_vars:
                g = b.fresh("g", adjoint_ty(t))
                d = self.dvar(s.var)
                out += [b.assign(g, b.var(d)), b.assign(d, b.c(0.0, adjoint_ty(t)))]
            if s.var in self.pushed:
                out += self.pop(s.var, loc)
            if g is not None:
                self.bp_nonzero(s.value, g, out)
            return out
        if isinstance(s, N.Philox):
            for o in reversed(s.outs):
                if o in self.pushed:
                    out += self.pop(o, loc)
            return out
        if isinstance(s, N.Store):
            a = s.array
            sh = self.shadow_of(a) if a.space == "global" or a.name in self.useful.arrays else None
            g = None
            if sh is not None:
                g = b.fresh("g", Ty(sh.dtype))
                sidx = self.shadow_index(a, s.index)
                out += [b.assign(g, N.Load(Ty(sh.dtype), loc, sh, sidx)),
                        N.Store(loc, sh, sidx, b.c(0.0, Ty(sh.dtype)))]
            if a.name in self.loaded or a.space != "global":
                out += self.pop_into(lambda v: N.Store(loc, a, s.index, v), Ty(a.dtype), loc)
            if g is not None:
                self.bp_nonzero(s.value, g, out)
            return out
        if isinstance(s, N.ExprStmt):
            e = s.expr
            if isinstance(e, N.Atomic) and e.array.dtype.is_float:
                if e.array.space != "global" and e.array.name not in self.useful.arrays:
                    return out
                sh = self.shadow_of(e.array)
                if sh is not None:
                    g = b.fresh("g", Ty(sh.dtype))
                    load = N.Load(Ty(sh.dtype), loc, sh, self.shadow_index(e.array, e.index))
                    out.append(b.assign(g, load if e.op == "add" else b.neg(load)))
                    self.bp_nonzero(e.args[0], g, out)
            return out
        if isinstance(s, N.If):
            if self.is_uniform_stmt(s):
                branches = []
                for blk in (s.body, s.orelse):
                    snap = self.snapshot(self.uniform_assigned(blk))
                    branches.append(self.save(snap) + self.replay(blk) + self.rev_block(blk, snap))
                return [N.If(loc, s.cond, *branches)]
            taken = b.fresh("taken", self.I)
            out += self.pop(taken, loc)
            return out + [N.If(loc, b.cmp("!=", b.var(taken), b.c(0, self.I)),
                               self.rev_block(s.body, {}), self.rev_block(s.orelse, {}))]
        if isinstance(s, N.While):
            return self.rev_while(s)
        if isinstance(s, N.Barrier):
            return [N.Barrier(loc)]
        if isinstance(s, N.Collective):
            return self.rev_collective(s)
        return []

    def rev_collective(self, s: N.Collective) -> list:
        """``dst = group_reduce/scan(src, op)`` backwards, every item of the group taking part
        (the forward's control flow there is uniform): ``d src_j`` is the sum of ``d dst_i`` over
        the items whose result includes ``src_j``: all of them for a sum, ``i >= j`` for an
        inclusive scan (the total minus the exclusive scan of ``d dst``), ``i > j`` for an
        exclusive one (the total minus the inclusive scan); for a min/max, the total shared
        evenly by the items whose ``src`` is the extreme."""
        b, loc, t = self.b, s.loc, adjoint_ty(s.ty)
        g, total = b.fresh("g", t), b.fresh("gsum", t)
        d = self.dvar(s.dst)
        out = [b.assign(g, b.var(d)), b.assign(d, b.c(0.0, t))]
        out.append(N.Collective(loc, "reduce", "add", total, g, t))
        inc = b.var(total)
        if s.op in ("min", "max"):     # the items holding the extreme share the sum of d dst evenly
            tie = b.cmp("==", b.var(s.src), b.cast(b.var(s.dst), self.locals[s.src]))
            ties = tie_sums(b, loc, t, tie, b.c(1.0, t))     # ends in m = count / count
            count = ties[-1].value.b
            out += ties[:-1]
            # the share is computed here, while `dst` still holds this reduction's result: the
            # pop below restores its previous value (a min/max in a loop), and a `tie` evaluated
            # after it compared with the previous trip's extreme (until adx21)
            share = b.fresh("gshare", t)
            out.append(b.assign(share, N.Select(t, loc, tie, b.op("/", inc, count), b.c(0.0, t))))
            inc = b.var(share)
        if s.dst in self.pushed:
            out += self.pop(s.dst, loc)
        if s.kind != "reduce":
            before = b.fresh("gscan", t)
            out.append(N.Collective(loc, "exscan" if s.kind == "scan" else "scan", "add", before, g, t))
            inc = b.op("-", inc, b.var(before))
        ds = self.dvar(s.src)
        out.append(b.assign(ds, b.op("+", b.var(ds), b.cast(inc, adjoint_ty(self.locals[s.src])))))
        return out

    def rev_while(self, s: N.While) -> list:
        b, loc = self.b, s.loc
        if not self.is_uniform_stmt(s):
            n = b.fresh("rtrips", self.I)
            dec = b.assign(n, b.op("-", b.var(n), b.c(1, self.I)))
            return self.pop(n, loc) + [N.While(loc, b.cmp(">", b.var(n), b.c(0, self.I)),
                                               [dec] + self.rev_block(s.body, {}))]
        # a uniform loop (it may contain barriers): recount and replay instead of taping
        entry = self.snapshot(self.uniform_assigned([s]))
        n, k, j = b.fresh("n", self.I), b.fresh("k", self.I), b.fresh("j", self.I)
        inc = lambda v: b.assign(v, b.op("+", b.var(v), b.c(1, self.I)))  # noqa: E731
        body_snap = self.snapshot(self.uniform_assigned(s.body))
        out = self.save(entry) + [b.assign(n, b.c(0, self.I)),
                                  N.While(loc, s.cond, [inc(n)] + self.replay(s.body))]
        to_iteration = self.restore(entry) + [
            b.assign(j, b.c(0, self.I)),
            N.While(loc, b.cmp("<", b.var(j), b.var(k)), [inc(j)] + self.replay(s.body))]
        body = ([b.assign(k, b.op("-", b.var(k), b.c(1, self.I)))] + to_iteration + self.save(body_snap)
                + self.replay(s.body) + self.rev_block(s.body, body_snap))
        return out + [b.assign(k, b.var(n)), N.While(loc, b.cmp(">", b.var(k), b.c(0, self.I)), body)]

    # --- expressions ---------------------------------------------------------------------------

    def is_active(self, e: N.Expr) -> bool:
        """Whether ``e``'s value may depend on a differentiated input."""
        for x in N.walk_expr(e):
            if isinstance(x, N.Var) and x.name in self.active_vars or isinstance(x, N.Arg) and x.name in self.diff:
                return True
            if isinstance(x, (N.Load, N.Atomic)) and x.array.name in self.active_arrays:
                return True
        return False

    def bp_nonzero(self, e: N.Expr, g: str, out: list) -> None:
        """:meth:`bp` of the adjoint in local ``g``: every operation's chain rule contributes
        nothing where its adjoint is exactly 0 (:meth:`guarded`): a live value's adjoint is 0
        on the paths where no output uses it (the unchosen operand of a select, min or max
        written as its own statement) or where its consumer saturates, and its partials may be
        infinite there (``exp(1000 * x)``): ``0 * inf`` would be NaN."""
        self.pv.reset()
        self.live = None
        self.bp(e, self.b.var(g), out)

    def val(self, e: N.Expr, out: list) -> N.Expr:
        """The primal value ``e`` for a derivative formula: a named local (:mod:`.primal_values`)."""
        return self.pv.val(e, out)

    def guarded(self, t: N.Expr, out: list) -> N.Expr:
        """The term ``t`` added to an adjoint, scalar accumulator or shadow element, as ``t if
        live else 0`` under the enclosing operations' zero-adjoint guard (:attr:`live`); ``t`` is
        computed into a local first, so the select is a blend, not a branch around the term."""
        if self.live is None:
            return t
        if isinstance(t, N.Cast):       # inside the widening (acc + (double)(g * c) stays that shape)
            return replace(t, a=self.guarded(t.a, out))
        return N.Select(t.ty, t.loc, self.live, self.bind(t, out), _zero_of(self.b, t.ty))

    def conjoin(self, cond: N.Expr, out: list) -> N.Expr:
        """The guard inside an operation guarded by ``cond``: ``cond``, and the enclosing guard.
        One local per guarded operation (a term under k guarded operations was wrapped in k
        selects, one per level, which grew quadratically in a chain of them)."""
        if self.live is None:
            return cond
        v = self.b.fresh("live", B)
        out.append(self.b.assign(v, N.BinOp(B, cond.loc, "and", self.live, cond)))
        return self.b.var(v)

    def bp(self, e: N.Expr, g: N.Expr, out: list) -> None:
        """Statements adding ``g * d e / d inputs`` to the adjoints of e's inputs (nothing for
        the inputs that do not depend on a differentiated argument)."""
        if not is_float(e.ty) or not self.is_active(e):
            return
        b, loc = self.b, e.loc
        if isinstance(e, (N.Const, N.Index, N.Shape)):
            return
        if isinstance(e, N.Var):
            if e.name in self.uniform:
                return  # uniform values do not depend on per-item data
            d = self.dvar(e.name)
            out.append(b.assign(d, b.op("+", b.var(d), self.guarded(b.cast(g, adjoint_ty(e.ty)), out))))
            return
        if isinstance(e, N.Arg):
            acc = self.scalar_acc.get(e.name)
            if acc is None and e.name in self.diff:
                acc = self.scalar_acc[e.name] = b.fresh(f"dacc_{e.name}", self.F)
            if acc is not None:
                out.append(b.assign(acc, b.op("+", b.var(acc), self.guarded(b.cast(g, self.F), out))))
            return
        if isinstance(e, N.Load):
            self.accumulate(e.array, e.index, g, loc, out)
            return
        g = self.bind(g, out)
        if isinstance(e, N.Cast):
            if is_float(e.a.ty):
                self.bp(e.a, b.cast(g, adjoint_ty(e.a.ty)), out)
            return
        if isinstance(e, N.Unary):
            if e.op == "-":
                self.bp(e.a, b.neg(g), out)
            return
        if isinstance(e, N.Select):
            ta, tb = [], []
            with self.pv.branch(e, True):
                self.bp(e.a, g, ta)
            with self.pv.branch(e, False):
                self.bp(e.b, g, tb)
            if ta or tb:
                out.append(N.If(loc, e.cond, ta, tb))
            return
        if isinstance(e, (N.BinOp, N.Call)):
            body: list = []
            outer = self.live
            if isinstance(g, N.Var) and not own_partials_unit(e):
                # a zero adjoint contributes nothing, whatever the partials: the adjoint of an
                # overflowing operand whose consumer saturates (tanh(pow(a, b)) with pow = inf:
                # tanh' = 0) is 0, and 0 * inf would be NaN
                self.live = self.conjoin(b.cmp("!=", g, b.c(0.0, g.ty)), body)
            n = len(body)
            try:
                (self.bp_binop if isinstance(e, N.BinOp) else self.bp_call)(e, g, body)
            finally:
                self.live = outer
            if len(body) > n:
                out += body
            return
        if isinstance(e, N.Atomic):
            self.fail(loc, f"the value returned by atomic_{e.op} on a float array cannot be differentiated")
        self.fail(loc, f"cannot differentiate {type(e).__name__}")

    def bind(self, g: N.Expr, out: list) -> N.Expr:
        if isinstance(g, (N.Var, N.Const)):
            return g
        t = self.b.fresh("g", g.ty)
        out.append(self.b.assign(t, g))
        return self.b.var(t)

    def bp_binop(self, e: N.BinOp, g, out) -> None:
        b, a, c = self.b, e.a, e.b
        op = e.op
        if op == "+":
            self.bp(a, g, out)
            self.bp(c, g, out)
        elif op == "-":
            self.bp(a, g, out)
            self.bp(c, b.neg(g), out)
        elif op == "*":
            va, vc = self.val(a, out), self.val(c, out)
            self.bp(a, b.op("*", g, vc), out)
            self.bp(c, b.op("*", g, va), out)
        elif op == "/":
            vc = self.val(c, out)
            self.bp(a, b.op("/", g, vc), out)
            if self.is_active(c):
                self.bp(c, b.neg(b.op("/", b.op("*", g, self.val(e, out)), vc)), out)
        elif op == "**":
            self.bp_pow(a, c, e, g, out)
        elif op == "%":
            self.bp(a, g, out)
            if self.is_active(c):
                va, vc = self.val(a, out), self.val(c, out)
                self.bp(c, b.neg(b.op("*", g, b.call("floor", b.op("/", va, vc)))), out)
        elif op == "//":
            return
        else:
            self.fail(e.loc, f"operator {op} on floats cannot be differentiated")

    def bp_pow(self, a, c, e, g, out) -> None:
        dc_needed = not isinstance(c, N.Const) and self.is_active(c)    # d/dc is the only one using e
        da, dc = pow_partials(self.b, self.val(a, out), self.val(c, out), self.val(e, out) if dc_needed else e)
        self.bp(a, self.b.op("*", g, da), out)
        if dc is not None:
            self.bp(c, self.b.op("*", g, dc), out)

    def bp_call(self, e: N.Call, g, out) -> None:
        b, fn, x = self.b, e.fn, e.args[0]
        one = b.c(1.0, e.ty)
        if fn in _UNARY:
            if not self.is_active(x):
                return
            vx = self.val(x, out)
            ve = (lambda: self.val(e, out)) if fn in _UNARY_OF_RESULT else None
            self.bp(x, b.op("*", g, unary_partial(b, fn, vx, ve, e.ty, lambda v: self.bind(v, out))), out)
        elif nondiff_call(fn):
            return           # (a bit cast to a float: its bits, not a differentiable function)
        elif fn == "uniform":
            self.fail(e.loc, "tk.uniform() of a float cannot be differentiated (its value is the first work "
                      "item's)")
        elif fn == "pow":
            self.bp_pow(x, e.args[1], e, g, out)
        elif fn == "atan2":          # at (0, 0): 0 (PyTorch's choice)
            # x / (x² + y²) as (x / h) / h with h = hypot(x, y): the squares underflow to 0 for
            # tiny arguments (1e-30 in float32: a derivative of 0 for 5e29) and overflow for large ones
            y_, x_ = e.args
            vy, vx = self.val(y_, out), self.val(x_, out)
            # (x / h) / h is NaN where an argument is infinite (inf / inf); both partials are at
            # most 1 / h in magnitude, so their value there is the limit 0 (gradgen seed 85000131)
            h = self.bind(b.call("hypot", vx, vy), out)
            flat = lambda v: _unless_inf(b, h, _unless_zero(b, h, v))     # noqa: E731
            self.bp(y_, flat(b.op("*", g, b.op("/", b.op("/", vx, h), h))), out)
            self.bp(x_, flat(b.neg(b.op("*", g, b.op("/", b.op("/", vy, h), h)))), out)
        elif fn == "hypot":          # at (0, 0): 0, the minimum-norm subgradient
            p, q = e.args
            vp, vq, ve = self.val(p, out), self.val(q, out), self.val(e, out)
            self.bp(p, b.op("*", g, _hypot_partial(b, vp, vq, ve)), out)
            self.bp(q, b.op("*", g, _hypot_partial(b, vq, vp, ve)), out)
        elif fn == "fma":
            p, q, r = e.args
            vp, vq = self.val(p, out), self.val(q, out)
            self.bp(p, b.op("*", g, vq), out)
            self.bp(q, b.op("*", g, vp), out)
            self.bp(r, g, out)
        elif fn in ("min", "max"):
            self.bp_minmax(e, g, out)
        elif fn == "copysign":       # at p == 0: 0 (PyTorch's choice)
            p, q = e.args
            vp, vq = self.val(p, out), self.val(q, out)
            same = b.cmp("==", b.call("copysign", one, vp), b.call("copysign", one, vq))
            sign = N.Select(e.ty, e.loc, same, one, b.c(-1.0, e.ty))
            self.bp(p, b.op("*", g, _unless_zero(b, vp, sign)), out)
        elif fn == "fmod":
            p, q = e.args
            self.bp(p, g, out)
            if self.is_active(q):
                vp, vq = self.val(p, out), self.val(q, out)
                self.bp(q, b.neg(b.op("*", g, b.call("trunc", b.op("/", vp, vq)))), out)
        else:
            self.fail(e.loc, f"{fn}() cannot be differentiated")

    def bp_minmax(self, e: N.Call, g, out) -> None:
        """min/max: the adjoint goes to the chosen operand; a tie splits it evenly (PyTorch,
        JAX), except for tk.clamp, where it goes to the clamped value (PyTorch, Warp). Each
        operand's chain rule is written once, under the condition where it receives anything
        (written in two branches, the tie's and its own, it doubled with every nested min/max)."""
        b, (p, q) = self.b, e.args
        vp, vq = self.val(p, out), self.val(q, out)
        pick_q = b.cmp("<" if e.fn == "min" else ">", vq, vp)
        tp, tq = [], []
        if e.clamp:
            with self.pv.nested():
                self.bp(p, g, tp)
            with self.pv.nested():
                self.bp(q, g, tq)
            if tp or tq:
                out.append(N.If(e.loc, pick_q, tq, tp))
            return
        tie = b.cmp("==", vp, vq)
        h = b.op("*", g, b.c(0.5, e.ty))
        with self.pv.nested():
            self.bp(p, N.Select(e.ty, e.loc, tie, h, g), tp)
        with self.pv.nested():
            self.bp(q, N.Select(e.ty, e.loc, pick_q, g, h), tq)
        if tp:
            out.append(N.If(e.loc, pick_q, [], tp))
        if tq:
            out.append(N.If(e.loc, N.BinOp(B, e.loc, "or", pick_q, tie), tq, []))

    # --- the whole kernel ---------------------------------------------------------------------

    def build(self) -> tuple:
        b = self.b
        fwd, nf, ni = self.fwd(self.k.body)
        self.nf, self.ni = nf, ni
        gl = tape_slot(self.k, self.I, b.loc)
        if self.static:
            init = [b.assign(self.cf, b.op("*", gl, b.c(nf, self.I))), b.assign(self.ci, b.op("*", gl, b.c(ni, self.I)))]
        elif self.count:
            init = [b.assign(self.cf, b.c(0, self.I)), b.assign(self.ci, b.c(0, self.I))]
        else:
            init = [b.assign(self.cf, N.Load(self.I, b.loc, self.TAPE_OFF, [gl, b.c(0, self.I)])),
                    b.assign(self.ci, N.Load(self.I, b.loc, self.TAPE_OFF, [gl, b.c(1, self.I)]))]
        if self.count:
            tail = [N.Store(b.loc, self.COUNTS, [gl, b.c(0, self.I)], b.var(self.cf)),
                    N.Store(b.loc, self.COUNTS, [gl, b.c(1, self.I)], b.var(self.ci))]
            body = init + fwd + tail
            return self.finish(body, []), TapePlan(self.static, nf, ni)
        rev = self.rev_block(self.k.body, {})
        # every differentiated scalar gets a partial from every item, zero where nothing flows
        # into it: the launcher's partials arrays are scratch memory, never cleared (a kernel
        # not using ``w``, or using it only in integer code, left garbage in w's gradient)
        for p in self.k.params:
            if p[0] == "scalar" and p[1] in self.diff and p[1] not in self.scalar_acc:
                self.scalar_acc[p[1]] = b.fresh(f"dacc_{p[1]}", self.F)
        # adjoints start at zero; shadow local memory is zeroed by the group before the reverse sweep
        zero_d = [b.assign(d, b.c(0.0, self.locals[d])) for d in sorted(self.dvars.values())]
        zero_d += [b.assign(a, b.c(0.0, self.F)) for a in self.scalar_acc.values()]
        zero_arrays = list(self.zero)
        if any(a.array.space == "local" for a in self.allocs):
            zero_arrays.append(N.Barrier(b.loc))
        # a scalar's gradient: one partial sum per work item (summed by the launcher), no atomics
        flush = [N.Store(b.loc, self.scalar_shadow(p), [gl], b.var(acc)) for p, acc in self.scalar_acc.items()]
        body = list(self.allocs) + init + fwd + zero_d + zero_arrays + rev + flush
        return self.finish(body, []), TapePlan(self.static, nf, ni)

    def scalar_shadow(self, p: str) -> N.ArrayInfo:
        """Per-work-item partial gradients of scalar ``p`` (the launcher sums them)."""
        return N.ArrayInfo(f"_d_{p}", self.F.dtype, 1)

    def finish(self, body, _) -> N.Kernel:
        params = []
        for p in self.k.params:
            params.append(p)
            if p[0] == "array" and p[1].name in self.diff:
                a = p[1]
                params.append(("array", self.shadow.get(a.name) or N.ArrayInfo(
                    f"_d_{a.name}", shadow_dtype(a.dtype), a.ndim, "global", False, a.contiguous)))
            elif p[0] == "scalar" and p[1] in self.diff:
                params.append(("array", self.scalar_shadow(p[1])))
        if self.count:
            params += [("array", a) for a in self.TAPE_PARAMS] + [("array", self.COUNTS)]
        else:
            params += [("array", a) for a in self.TAPE_PARAMS]
        k = replace(self.k, body=body, locals=self.locals, params=params, name=self.k.name)
        k.uses = set(self.k.uses) | {"atomic"}
        if self.k.unsafe_indices and self.k.ndim > 1:       # tape_slot's group and local indices
            k.uses.add("groupindex")
        return k


def tape_slot(k: N.Kernel, ity: Ty, loc) -> N.Expr:
    """The work item's slot in the tape, the tape offsets, the counts and the per-item scalar
    partials: its global linear index, except in an ``unsafe_indices`` kernel, where the items
    past the ndrange in a partial last group run every statement too (tape pushes included):
    there the slot is ``group_linear * items_per_group + local_linear``, unique over the padded
    grid (the launcher sizes those arrays by the padded grid's items). In 1-D this equals the
    global linear index (kept as it is); in 2-D/3-D a padded item's global linear index is another item's (``i * n1 + j``
    with ``j >= n1``), and in 1-D it ran past the arrays: the tape was written out of bounds
    (a CPU crash, ``munmap_chunk(): invalid pointer``; user22)."""
    t = Ty(ity.dtype, True)
    if not k.unsafe_indices or k.ndim == 1:
        return N.Index(t, loc, "global_linear")
    size = N.Index(t, loc, "groupsize", 0)
    for d in range(1, k.ndim):
        size = N.BinOp(t, loc, "*", size, N.Index(t, loc, "groupsize", d))
    return N.BinOp(t, loc, "+", N.BinOp(t, loc, "*", N.Index(t, loc, "group_linear"), size),
                   N.Index(t, loc, "local_linear"))


def reverse_kernel(k: N.Kernel, diff, grouped: bool, count: bool = False, wide: bool = True) -> tuple:
    """The adjoint (or, with ``count``, the tape-counting) kernel of ``k`` and its TapePlan;
    ``wide=False`` keeps tapes and partial sums in 32 bits (backends without float64/int64)."""
    return _Reverse(k, set(diff), grouped, count, wide).build()


# ----------------------------------------------------------------------------- forward mode

class _Tangent:
    def __init__(self, k: N.Kernel, diff: set):
        self.k, self.diff = k, set(diff)
        self.locals = dict(k.locals)
        self.b = _B(k, self.locals)
        self.tan: dict = {}
        self.shadow: dict = {}
        self.active_vars, self.active_arrays = active_values(k, self.diff)
        self.pre: list = []     # statements computing the bound tangents and partials of the statement at hand
        self.pv = PrimalValues(self.b, uniform_vars(k.body, k.locals))   # the primal values its partials
        # need, named in self.pre

    def tvar(self, x: str) -> str:
        t = self.tan.get(x)
        if t is None:
            t = self.tan[x] = f"_t_{x}"
            self.locals[t] = self.locals[x]
        return t

    def shadow_of(self, a: N.ArrayInfo):
        if not a.dtype.is_float or (a.space == "global" and a.name not in self.diff):
            return None
        return self.shadow.setdefault(a.name, N.ArrayInfo(f"_d_{a.name}" if a.space == "global" else f"_t{a.name}",
                                                          a.dtype, a.ndim, a.space, a.const, a.contiguous, a.shape))

    def zero(self, t: Ty) -> N.Expr:
        return self.b.c(0.0, t)

    def bind(self, e: N.Expr) -> N.Expr:
        """``e`` computed once into a fresh local (appended to :attr:`pre`), for a tangent or
        partial used more than once: a nested expression inlined at every use doubles per
        level (a 6-deep expression made a 117 KB tangent kernel that GCC took minutes on)."""
        leaves = (N.Var, N.Const, N.Arg, N.Load)
        if isinstance(e, leaves) or isinstance(e, N.Cast) and isinstance(e.a, leaves):
            return e
        v = self.b.fresh("t", e.ty)
        self.pre.append(self.b.assign(v, e))
        return self.b.var(v)

    def t_of(self, e: N.Expr) -> N.Expr:
        """:meth:`t` of ``e`` with the statements it needs placed before the statement at hand."""
        self.pre = []
        self.pv.reset()
        return self.t(e)

    def val(self, e: N.Expr) -> N.Expr:
        """The primal value ``e`` for a partial: a named local computed in :attr:`pre`."""
        return self.pv.val(e, self.pre)

    def t(self, e: N.Expr) -> N.Expr:
        """The tangent of a float expression."""
        b = self.b
        if not is_float(e.ty) or isinstance(e, (N.Const, N.Index, N.Shape)):
            return self.zero(e.ty)
        if isinstance(e, N.Var):
            return b.var(self.tvar(e.name)) if e.name in self.active_vars else self.zero(e.ty)
        if isinstance(e, N.Arg):
            return N.Arg(e.ty, e.loc, f"_d_{e.name}") if e.name in self.diff else self.zero(e.ty)
        if isinstance(e, N.Load):
            sh = self.shadow_of(e.array)
            active = sh is not None and e.array.name in self.active_arrays
            return N.Load(e.ty, e.loc, sh, e.index) if active else self.zero(e.ty)
        if isinstance(e, N.Cast):
            ta = self.t(e.a) if is_float(e.a.ty) else self.zero(e.ty)
            return self.zero(e.ty) if _no_tangent(ta) else b.cast(ta, e.ty)
        if isinstance(e, N.Unary):
            ta = self.t(e.a) if e.op == "-" else self.zero(e.ty)
            return ta if _no_tangent(ta) else b.neg(ta)
        if isinstance(e, N.Select):
            return self.t_select(e)
        if isinstance(e, (N.BinOp, N.Call)):
            return self.via_partials(e)
        raise _err(e.loc, f"cannot differentiate {type(e).__name__}", self.k.name)

    def t_select(self, e: N.Select) -> N.Expr:
        """A select's tangent; when a branch's tangent needs statements of its own they run
        under an ``if`` on the condition, as the primal evaluates only the chosen operand."""
        outer = self.pre
        self.pre = []
        with self.pv.branch(e, True):
            ta, pa = self.t(e.a), self.pre
        self.pre = []
        with self.pv.branch(e, False):
            tb, pb = self.t(e.b), self.pre
        self.pre = outer
        if _no_tangent(ta) and _no_tangent(tb):
            return self.zero(e.ty)
        if not pa and not pb:
            return N.Select(e.ty, e.loc, e.cond, ta, tb)
        v = self.b.fresh("t", e.ty)
        outer.append(N.If(e.loc, e.cond, pa + [self.b.assign(v, ta)], pb + [self.b.assign(v, tb)]))
        return self.b.var(v)

    def via_partials(self, e) -> N.Expr:
        """Tangent of an operation from its partial derivatives."""
        b = self.b
        if isinstance(e, N.BinOp):
            a, c = e.a, e.b
            ta, tc = self.t(a), self.t(c)
            if e.op in ("+", "-", "*", "/", "**", "%") and _no_tangent(ta) and _no_tangent(tc):
                return self.zero(e.ty)
            if e.op == "+":
                return tc if _no_tangent(ta) else ta if _no_tangent(tc) else b.op("+", ta, tc)
            if e.op == "-":
                return b.neg(tc) if _no_tangent(ta) else ta if _no_tangent(tc) else b.op("-", ta, tc)
            if e.op == "*":
                return self.terms(e.ty, [(ta, None if _no_tangent(ta) else self.val(c)),
                                         (tc, None if _no_tangent(tc) else self.val(a))])
            if e.op == "/":
                if _no_tangent(tc):
                    return b.op("/", ta, self.val(c))
                # (ta - (a / c) tc) / c, reverse mode's -(g (a / c)) / c (Warp's adjoint): the
                # quotient rule's (ta c - a tc) / (c c) squared c, which underflowed to 0 for
                # |c| < 1e-154 (an inf or NaN tangent, |c| < 1e-19 in float32) and lost digits
                # in the subnormals (adx20)
                return b.op("/", self.terms(e.ty, [(ta, None), (tc, b.neg(self.val(e)))]), self.val(c))
            if e.op == "**":
                dc_needed = not isinstance(c, N.Const) and not _no_tangent(tc)
                da, dc = pow_partials(b, self.val(a), self.val(c), self.val(e) if dc_needed else e)
                return self.terms(e.ty, [(ta, da)] + ([] if dc is None else [(tc, dc)]))
            if e.op == "%":
                dc = None if _no_tangent(tc) else b.neg(b.call("floor", b.op("/", self.val(a), self.val(c))))
                return self.terms(e.ty, [(ta, None), (tc, dc)])
            if e.op == "//":
                return self.zero(e.ty)
            raise _err(e.loc, f"operator {e.op} on floats cannot be differentiated", self.k.name)
        if e.fn in ("min", "max"):   # a tie: the mean of both tangents, as in reverse mode
            p, q = e.args
            tp, tq = self.t(p), self.t(q)
            if _no_tangent(tp) and _no_tangent(tq):
                return self.zero(e.ty)
            tp, tq = self.bind(tp), self.bind(tq)
            p, q = self.val(p), self.val(q)
            if e.clamp:
                return N.Select(e.ty, e.loc, b.cmp("<" if e.fn == "min" else ">", q, p), tq, tp)
            tie = N.Select(e.ty, e.loc, b.cmp("==", p, q), b.op("*", b.op("+", tp, tq), b.c(0.5, e.ty)), tp)
            return N.Select(e.ty, e.loc, b.cmp("<" if e.fn == "min" else ">", q, p), tq, tie)
        # calls: collect (argument, partial) pairs with the reverse-mode rules on a unit seed
        rev = _PartialCollector(self, e)
        return self.terms(e.ty, [(self.t(arg), partial) for arg, partial in rev.pairs()])

    def terms(self, ty: Ty, pairs) -> N.Expr:
        """``sum(tangent * partial)`` over the pairs (a partial of ``None`` is 1), leaving out
        the operands that have no tangent: a constant's partial may be infinite or NaN
        (``2.0 ** x`` at a large ``x``, ``x ** c`` at a negative ``x`` for a constant array
        ``c``), and it must not turn the tangent into NaN (``torch.func.jvp`` and ``jax.jvp``
        leave such operands out too)."""
        b = self.b
        out = [b.cast(t, ty) if p is None else self.times(b.cast(t, ty), p) for t, p in pairs if not _no_tangent(t)]
        if not out:
            return self.zero(ty)
        r = out[0]
        for x in out[1:]:
            r = b.op("+", r, x)
        return r

    def times(self, t: N.Expr, p: N.Expr) -> N.Expr:
        """``t * p``, 0 where the tangent ``t`` or the partial ``p`` is exactly 0: a zero
        tangent times an infinite partial, or the infinite tangent of an overflowed operand
        times the zero partial of its saturated consumer (``tanh(pow(a, b))`` with pow = inf),
        must not be NaN (reverse mode skips zero adjoints the same way).

        Branch free: ``(m ? t : 0) * (m ? p : 0)`` with ``m = t != 0 && p != 0`` selects the
        operands and multiplies unconditionally, the same value bit for bit as ``m ? t * p :
        0`` (+0 where not ``m``). The product inside the select was a conditional,
        possibly trapping multiply that GCC vectorized only as an AVX-512 masked multiply,
        and whose nested selects on a loop-invariant condition it did not vectorize at all
        (the 2-D stencil's tangent kernel ran scalar, 7x its primal)."""
        b = self.b
        zero = b.c(0.0, t.ty)
        t = self.bind(t)
        m = b.cmp("!=", t, zero)
        if not (isinstance(p, N.Const) and p.value != 0):
            p = self.bind(p)
            m = N.BinOp(B, t.loc, "and", m, b.cmp("!=", p, zero))
        return b.op("*", N.Select(t.ty, t.loc, m, t, zero), N.Select(t.ty, t.loc, m, p, zero))

    def stmts(self, ss) -> list:
        out = []
        for s in ss:
            out += self.stmt(s)
        return out

    def stmt(self, s) -> list:
        b, loc = self.b, s.loc
        if isinstance(s, N.Assign):
            if is_float(self.locals[s.var]):
                tv = self.t_of(s.value)
                return self.pre + [b.assign(self.tvar(s.var), tv), s]
            return [s]
        if isinstance(s, N.Store):
            sh = self.shadow_of(s.array)
            if sh is not None:
                tv = self.t_of(s.value)
                return self.pre + [N.Store(loc, sh, s.index, b.cast(tv, Ty(s.array.dtype))), s]
            return [s]
        if isinstance(s, N.ExprStmt) and isinstance(s.expr, N.Atomic) and s.expr.array.dtype.is_float:
            e = s.expr
            if e.op not in ("add", "sub"):
                raise _err(loc, f"atomic_{e.op} on floats cannot be differentiated correctly", self.k.name)
            sh = self.shadow_of(e.array)
            if sh is not None:
                tv = self.t_of(e.args[0])
                return self.pre + [N.ExprStmt(loc, N.Atomic(e.ty, loc, e.op, sh, e.index, [tv])), s]
            return [s]
        if isinstance(s, N.If):
            return [N.If(loc, s.cond, self.stmts(s.body), self.stmts(s.orelse))]
        if isinstance(s, N.While):
            return [N.While(loc, s.cond, self.stmts(s.body))]
        if isinstance(s, N.For):
            return [N.For(loc, s.var, s.start, s.stop, s.step, self.stmts(s.body))]
        if isinstance(s, N.FuncBlock):
            return [N.FuncBlock(loc, s.label, self.stmts(s.body))]
        if isinstance(s, N.AllocArray):
            sh = self.shadow_of(s.array)
            return [s] + ([N.AllocArray(loc, sh)] if sh is not None else [])
        if isinstance(s, N.Collective):
            check_collective(s, self.k.name)
            if s.op == "add":                   # a sum is linear: its tangent is the sum of the tangents
                return [N.Collective(loc, s.kind, s.op, self.tvar(s.dst), self.tvar(s.src), s.ty), s]
            tie = b.cmp("==", b.var(s.src), b.cast(b.var(s.dst), self.locals[s.src]))
            ts = tie_sums(b, loc, s.ty, tie, b.var(self.tvar(s.src)))   # min/max: the mean of the tied tangents
            return [s] + ts[:-1] + [b.assign(self.tvar(s.dst), ts[-1].value)]
        return [s]

    def build(self) -> N.Kernel:
        body = self.stmts(self.k.body)
        params = []
        for p in self.k.params:
            params.append(p)
            if p[0] == "array" and p[1].name in self.diff:
                params.append(("array", self.shadow_of(p[1])))
            elif p[0] == "scalar" and p[1] in self.diff:
                params.append(("scalar", f"_d_{p[1]}", p[2]))
        return replace(self.k, body=body, locals=self.locals, params=params)


class _PartialCollector:
    """(argument, d call / d argument) pairs of a math call, from the reverse-mode rules."""

    def __init__(self, tangent: _Tangent, e: N.Call):
        self.t, self.e = tangent, e

    def pairs(self):
        e = self.e
        rv = _Reverse.__new__(_Reverse)
        rv.b, rv.uniform, rv.diff, rv.k = self.t.b, set(), self.t.diff, self.t.k
        rv.active_vars, rv.active_arrays = self.t.active_vars, self.t.active_arrays
        rv.scalar_acc, rv.dvars, rv.locals = {}, {}, self.t.locals
        found = []

        def collect(arg, g, out):
            found.append((arg, g))
        rv.bp = collect                      # the rules call bp(argument, partial * seed)
        rv.bind = lambda g, out: g
        rv.val = lambda x, out: self.t.val(x)    # named in the tangent's statements
        seed = self.t.b.c(1.0, e.ty)
        _Reverse.bp_call(rv, e, seed, [])
        return [(a, g) for a, g in found if is_float(a.ty)]


def check_collective(s: N.Collective, kernel: str) -> None:
    """Group collectives differentiate as float sums (``group_reduce``/``group_scan`` with
    ``"add"``); the others are a CompileError."""
    if not s.ty.dtype.is_float:
        raise _err(s.loc, f"group_{'reduce' if s.kind == 'reduce' else 'scan'} of an integer cannot be "
                   "differentiated yet (only float sums can); compute it with tk.localmem and tk.synchronize()",
                   kernel)
    if not (s.op == "add" or s.op in ("min", "max") and s.kind == "reduce"):
        raise _err(s.loc, f"group_{'reduce' if s.kind == 'reduce' else 'scan'} with op {s.op!r} cannot be "
                   "differentiated yet (group_reduce with \"add\", \"min\" or \"max\" and group_scan with \"add\" "
                   "can); write it with tk.localmem and tk.synchronize()", kernel)


def tie_sums(b: _B, loc, t: Ty, tie: N.Expr, v: N.Expr) -> list:
    """Statements ending in ``m = (sum of v over the group's items where tie) / (their number)``,
    the derivative of a group min/max (ties share evenly, as ``max(a, b)`` does); ``v`` is
    evaluated by every item, the collectives run in every item."""
    sel, one = b.fresh("tiev", t), b.fresh("tie1", t)
    tot, cn, m = b.fresh("tiesum", t), b.fresh("tien", t), b.fresh("tiemean", t)
    zero = b.c(0.0, t)
    return [b.assign(sel, N.Select(t, loc, tie, b.cast(v, t), zero)), b.assign(one, N.Select(t, loc, tie, b.c(1.0, t), zero)),
            N.Collective(loc, "reduce", "add", tot, sel, t), N.Collective(loc, "reduce", "add", cn, one, t),
            b.assign(m, b.op("/", b.var(tot), b.var(cn)))]


def _no_tangent(t: N.Expr) -> bool:
    """Whether a tangent is the structural zero of a value that depends on no differentiated
    input (not a tangent that happens to be zero at run time)."""
    return isinstance(t, N.Const) and t.value == 0


def active_values(k: N.Kernel, diff: set) -> tuple:
    """(locals, arrays) whose values may depend on the differentiated arguments ``diff``: the
    float arrays and scalars in ``diff``, and by a fixed point every local assigned (or group
    reduced or scanned), and every local or private array stored or atomically updated, from an
    expression reading one of them."""
    arrays = {p[1].name for p in k.params if p[0] == "array" and p[1].name in diff}
    scalars = {p[1] for p in k.params if p[0] == "scalar" and p[1] in diff}
    vars_: set = set()

    def active(e) -> bool:
        for x in N.walk_expr(e):
            if isinstance(x, N.Var) and x.name in vars_ or isinstance(x, N.Arg) and x.name in scalars:
                return True
            if isinstance(x, (N.Load, N.Atomic)) and x.array.name in arrays:
                return True
        return False
    changed = True
    while changed:
        changed = False
        for s in N.walk_stmts(k.body):
            if isinstance(s, N.Assign) and s.var not in vars_ and active(s.value):
                vars_.add(s.var)
                changed = True
            elif isinstance(s, N.Collective) and s.dst not in vars_ and s.src in vars_:
                vars_.add(s.dst)
                changed = True
            elif isinstance(s, (N.Store, N.ExprStmt)):
                target = s.array if isinstance(s, N.Store) else getattr(s.expr, "array", None)
                if target is not None and target.name not in arrays and target.space != "global" \
                        and any(active(x) for x in N.stmt_exprs(s)):
                    arrays.add(target.name)
                    changed = True
    return vars_, arrays


def tangent_kernel(k: N.Kernel, diff) -> N.Kernel:
    """The forward-mode (JVP) kernel: every float value carries a tangent."""
    return _Tangent(k, set(diff)).build()
