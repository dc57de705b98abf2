"""Which kernels may make the C compiler permute vectors of doubles (for the ``gcc-slp-permute``
workaround, ``runtime/base.kernel_features``).

GCC 12.2 compiles some constant permutations of eight doubles wrongly (docs/cpu.md, "Flags").
Its vectorizers make a constant permutation when the lanes of a vector (items of the item loop,
a group's lanes, the unrolled iterations of a small loop) read or write elements in an order
other than the lanes' own: a reversed or strided index, ``(j + 1) % 8``, ``j ^ 1``, ``j // 2``,
constant positions of a small array. An index that moves one element per lane, in the lanes'
order, makes none: ``x[i + c]`` (stencils), ``x[j * n + i]`` or ``x[i * n + j]`` with ``n`` a
runtime stride (no constant permutation), ``a[j]`` of a private array in a flat kernel.
Not ``x[8 * i + j]``: the item loop's lanes are items, and that is an interleaved group GCC
transposes with permutations.

:func:`permuted_accesses` lists the accesses whose index is not provably such an index,
conservatively: any non-affine index (a ``%``, a ``//``, a load, a local assigned twice) counts.
:func:`computes_doubles` says whether a kernel has 64-bit float values at all, including those
the C prelude computes for float32 work (``exp``/``tanh``/``sigmoid`` of float32, normal random
numbers). A permutation may be of any element type at the load and still end up on doubles
(GCC's SLP pass may move a permutation through lane-wise operations, conversions among them:
not seen, a precaution), so the workaround goes to kernels with both.
"""
from __future__ import annotations

from collections import Counter

from ..ir import nodes as N

#: A coefficient known to be a non-constant value for the C compiler (a runtime stride or extent).
UNKNOWN = "unknown"
#: Functions whose float32 (and narrower) forms the C prelude evaluates in double.
#: (tk_exp_f32, tk_tanh_f32, sigmoid through exp; tk_rand_normal's log, sqrt and cos.) Narrow
#: floats convert through float32, but for float64 -> float16, a float64 value already.
DOUBLE_PRELUDE_FNS = frozenset({"exp", "tanh", "sigmoid", "rand_normal"})


def computes_doubles(k: N.Kernel) -> bool:
    """Whether the C of kernel ``k`` may compute with 64-bit floats (see the module docstring)."""
    for s in N.walk_stmts(k.body):
        arr = getattr(s, "array", None)
        if arr is not None and _double_type(arr.dtype):
            return True
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if (x.ty is not None and _double_type(x.ty.dtype) and not x.ty.weak) \
                        or (isinstance(x, (N.Load, N.Atomic)) and _double_type(x.array.dtype)) \
                        or (isinstance(x, N.Call) and x.fn in DOUBLE_PRELUDE_FNS):
                    return True
    return False


def _double_type(d) -> bool:
    return d is not None and d.is_float and d.bits == 64


def permuted_accesses(k: N.Kernel, grouped: bool = False) -> list:
    """The loads, stores and atomics of ``k`` whose index may not be in the lanes' order
    (``grouped``: ``k`` is compiled group by group, its items the lanes of a loop)."""
    counts = _assign_counts(k.body)
    defs = {s.var: s.value for s in N.walk_stmts(k.body) if isinstance(s, N.Assign) and counts[s.var] == 1}
    env = _Env(defs, {s.var for s in N.walk_stmts(k.body) if isinstance(s, N.For) and counts[s.var] == 0})
    out = []
    for s in N.walk_stmts(k.body):
        accesses = [(s.array, s.index)] if isinstance(s, N.Store) else []
        accesses += [(x.array, x.index) for e in N.stmt_exprs(s) for x in N.walk_expr(e)
                     if isinstance(x, (N.Load, N.Atomic))]
        out += [(arr, idx) for arr, idx in accesses if not in_lane_order(arr, idx, env, grouped)]
    return out


def _assign_counts(body) -> Counter:
    """How often each local is assigned (``for`` variables count as assigned by their loop only)."""
    c: Counter = Counter()
    for s in N.walk_stmts(body):
        if isinstance(s, N.Assign):
            c[s.var] += 1
        elif isinstance(s, N.Philox):
            c.update(s.outs)
        elif isinstance(s, N.Collective):
            c[s.dst] += 2            # a group-wide value: treated as unknown
    return c


class _Env:
    """The definitions an index is read through: locals assigned once, loop variables."""

    def __init__(self, defs: dict, loops: set):
        self.defs, self.loops = defs, loops


def linear_form(e: N.Expr, env: _Env, seen: frozenset = frozenset()) -> dict | None:
    """``e`` as {symbol: coefficient} (symbol "" the constant term; coefficients int or UNKNOWN),
    symbols the varying values (``("index", kind, dim)``, ``("loop", var)``); values the same
    for every lane (arguments, shapes) fold into the constant term as UNKNOWN. None: not affine
    in the varying values."""
    if isinstance(e, N.Const):
        return {"": int(e.value)} if isinstance(e.value, (int, bool)) or float(e.value).is_integer() else None
    if isinstance(e, (N.Arg, N.Shape)):
        return {"": UNKNOWN}
    if isinstance(e, N.Index):
        if e.kind in ("ndrange", "groupsize", "ngroups"):
            return {"": UNKNOWN}
        return {("index", e.kind, e.dim): 1}
    if isinstance(e, N.Var):
        if e.name in env.loops:
            return {("loop", e.name): 1}
        if e.name in env.defs and e.name not in seen:
            return linear_form(env.defs[e.name], env, seen | {e.name})
        return None
    if isinstance(e, N.Cast):
        return linear_form(e.a, env, seen) if e.ty.dtype.is_int else None
    if isinstance(e, N.Unary) and e.op == "-":
        a = linear_form(e.a, env, seen)
        return None if a is None else _scale(a, -1)
    if isinstance(e, N.BinOp) and e.op in ("+", "-", "*"):
        a, b = linear_form(e.a, env, seen), linear_form(e.b, env, seen)
        if a is None or b is None:
            return None
        if e.op == "+":
            return _add(a, b)
        if e.op == "-":
            return _add(a, _scale(b, -1))
        if _uniform(a) or _uniform(b):
            (c, f) = (a[""] if a else 0, b) if _uniform(a) else (b[""] if b else 0, a)
            return _scale(f, c)
        return None
    if _uniform_expr(e, env, seen):
        return {"": UNKNOWN}
    return None


def _uniform(f: dict) -> bool:
    return all(k == "" for k in f)


def _uniform_expr(e: N.Expr, env: _Env, seen: frozenset) -> bool:
    """Whether ``e`` is the same for every lane: made of constants, arguments and shapes only."""
    if isinstance(e, (N.Load, N.Atomic, N.Index)):
        return False
    if isinstance(e, N.Var):
        return e.name in env.defs and e.name not in env.loops and e.name not in seen \
            and _uniform_expr(env.defs[e.name], env, seen | {e.name})
    return all(_uniform_expr(c, env, seen) for c in N.child_exprs(e))


def _mul(a, b):
    if a == 0 or b == 0:
        return 0
    return UNKNOWN if UNKNOWN in (a, b) else a * b


def _plus(a, b):
    return UNKNOWN if UNKNOWN in (a, b) else a + b


def _scale(f: dict, c) -> dict:
    return {k: v for k, v in ((k, _mul(v, c)) for k, v in f.items()) if v != 0}


def _add(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _plus(out.get(k, 0), v)
    return {k: v for k, v in out.items() if v != 0}


def flat_form(arr: N.ArrayInfo, index: list, env: _Env) -> dict | None:
    """The linear form of the element offset of ``arr[index]``: a local or private array's
    static shape gives constant strides, a global array's outer dimensions unknown ones."""
    total: dict = {}
    stride = 1
    for d in range(len(index) - 1, -1, -1):
        f = linear_form(index[d], env)
        if f is None:
            return None
        total = _add(total, _scale(f, stride))
        static = arr.space != "global" and len(arr.shape) == len(index) and isinstance(arr.shape[d], int)
        stride = _mul(stride, arr.shape[d]) if static else UNKNOWN
    return total


def in_lane_order(arr: N.ArrayInfo, index: list, env: _Env, grouped: bool = False) -> bool:
    """Whether ``arr[index]`` reads or writes, lane by lane, elements in the lanes' own order.

    Global arrays (memory the compiler cannot scalarize): every varying value has coefficient 1
    (any constant offset: ``x[i + 1]``) or an unknown one (a runtime stride: no constant
    permutation). A constant coefficient does not count as in order, whatever it is with: the
    item loop's lanes are items, so ``x[8 * i + j]`` over the unrolled ``j`` is an interleaved
    group of eight, which GCC loads as eight vectors and transposes (vpermt2pd, vpermpd).
    Local arrays: ``a[l]`` (one element of its own per lane, no offset) or a one-element array.
    Private arrays: the same in a flat kernel; in a grouped kernel (``grouped``) only a
    one-element array, as the lanes loop keeps each item's private array at a stride. A
    constant index into a longer array counts as permuted (elements of several lanes read by
    position)."""
    f = flat_form(arr, index, env)
    if f is None:
        return False
    varying = {k: v for k, v in f.items() if k != ""}
    if arr.space == "global":
        return all(c == 1 or c == UNKNOWN for c in varying.values())
    size = 1
    for n in arr.shape:
        size = size * n if isinstance(n, int) and size is not None else None
    if size == 1:
        return True
    if grouped and arr.space == "private":
        return False
    return f.get("", 0) == 0 and len(varying) == 1 and next(iter(varying.values())) == 1
