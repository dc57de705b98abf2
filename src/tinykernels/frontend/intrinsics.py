"""What the frontend does with each built-in name: operators, ``math``, builtins and ``tk.*``.

A handler takes the running Lowerer and the ``ast.Call`` node and returns an IR value.
Constant folding lives here too, evaluated with NumPy so that it matches run time exactly.
"""
from __future__ import annotations

import ast
import builtins
import math
import operator

import numpy as np

from .. import dtypes as D
from .. import lang
from .. import random as tkrandom
from ..dtypes import Ty
from ..ir import nodes as N
from .values import DTypeVal, FuncBinding, PyObj, NoValue

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
          ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
          ast.BitXor: "^"}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}   # a op b == b FLIP[op] a
PYCMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
         "==": operator.eq, "!=": operator.ne}


# ----------------------------------------------------------------------------- folding

def wrap(v, t: Ty):
    """Wrap a Python int to ``t``'s width (weak ints are Python ints and do not wrap)."""
    if t.weak or not t.dtype.is_int or not isinstance(v, int):
        return v
    bits = t.dtype.bits
    v &= (1 << bits) - 1
    if t.dtype.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def fold_cast(value, d: D.DType):
    """The value of ``d(value)`` computed at compile time, or None to leave it to run time."""
    if d.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        # with ml_dtypes: rounded as the generated code rounds (to float32 first, then the
        # narrow type); without it, left to run time
        if D._mld is None or isinstance(value, bool):
            return None
        with np.errstate(all="ignore"):
            return float(np.array(np.float32(value)).astype(getattr(D._mld, d.name)))
    if d.kind == "b":
        return bool(value)
    with np.errstate(all="ignore"):
        if d.is_int:
            if isinstance(value, float):
                if not math.isfinite(value):
                    return None
                value = int(value)
            return wrap(int(value), Ty(d))
        return float(np.array(value, dtype=np.float64).astype(np.dtype(d.name)))


def fold_binop(op: str, a, b, t: Ty):
    """``a op b`` in type ``t``; None when it must stay a run-time operation."""
    try:
        if t.weak:
            if t.dtype.is_int and isinstance(a, int) and isinstance(b, int):
                if op in ("//", "%") and b == 0:
                    return None
                if op == "**" and b < 0:
                    return None
                if op in ("<<", ">>") and (b < 0 or b > 4096):
                    return None
                if op == "**" and b > 4096:
                    return None
                return _PYOPS[op](a, b)       # exact, like Python; the range is checked where it is used
            if t.dtype.is_float and op in ("+", "-", "*", "/", "**", "//", "%"):
                if op in ("/", "//", "%") and b == 0:
                    return None
                r = _PYOPS[op](float(a), float(b))
                return r if isinstance(r, float) else None
            if t.dtype.kind == "b" and op in ("and", "or", "&", "|", "^"):
                return bool(_PYOPS[op](a, b))
            return None
        if t.dtype.is_storage_only or op in ("and", "or"):
            return None
        nd = np.dtype(t.dtype.name)
        with np.errstate(all="ignore"):
            x, y = np.array(a).astype(nd), np.array(b).astype(nd)
            if op in ("//", "%") and t.dtype.is_int and y == 0:
                return None
            r = _NPOPS[op](x, y)
        return r.item() if r.dtype == nd else None
    except (ArithmeticError, ValueError, TypeError, KeyError):
        return None


_PYOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<<": operator.lshift,
          ">>": operator.rshift, "&": operator.and_, "|": operator.or_, "^": operator.xor,
          "and": lambda a, b: a and b, "or": lambda a, b: a or b}
_NPOPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
          "//": np.floor_divide, "%": np.remainder, "**": np.power, "<<": np.left_shift,
          ">>": np.right_shift, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}


# ----------------------------------------------------------------------------- helpers

def _args(lw, node, n=None, name=""):
    if n is not None and len(node.args) not in ((n,) if isinstance(n, int) else n):
        raise lw.err(node, f"{name}() takes {n} argument(s), got {len(node.args)}")
    return lw.in_order(list(node.args))          # Python's order; an atomic runs once


def _exprs(lw, node, n=None, name=""):
    return [lw.as_expr(v, a) for v, a in zip(_args(lw, node, n, name), node.args)]


def _float_arg(lw, e: N.Expr) -> N.Expr:
    """Math functions take floats: integers and bools become float64 (weak if they were)."""
    if e.ty.dtype.is_float:
        return e
    return lw.cast(e, Ty(lw.opts.default_float, e.ty.weak))


def _promote_all(lw, es):
    t = es[0].ty
    for e in es[1:]:
        t = D.promote(t, e.ty, lw.opts.default_float, lw.opts.default_int)
    return t, [lw.cast(e, t) for e in es]


def _math1(fn):
    def h(lw, node):
        (x,) = _exprs(lw, node, 1, fn)
        x = _float_arg(lw, x)
        return N.Call(x.ty, lw.loc(node), fn, [x])
    return h


def _math2(fn):
    def h(lw, node):
        es = [_float_arg(lw, e) for e in _exprs(lw, node, 2, fn)]
        t, es = _promote_all(lw, es)
        return N.Call(t, lw.loc(node), fn, es)
    return h


def _predicate(fn):
    def h(lw, node):
        (x,) = _exprs(lw, node, 1, fn)
        t = Ty(D.bool_, x.ty.weak)           # a Python float gives a Python bool
        if not x.ty.dtype.is_float:
            return N.Const(t, lw.loc(node), fn == "isfinite")
        return N.Call(t, lw.loc(node), fn, [x])
    return h


def _minmax(which):
    def h(lw, node):
        args = _args(lw, node)
        if len(args) == 1 and isinstance(args[0], tuple):
            # min/max of one tuple (`max(A.shape)`, `min(I)`), as Python takes an iterable
            if not args[0]:
                raise lw.err(node, f"{which}() of an empty tuple (Python: ValueError)")
            if len(args[0]) == 1:
                return lw.as_expr(args[0][0], node)
            es = [lw.as_expr(v, node) for v in args[0]]
        else:
            es = [lw.as_expr(v, a) for v, a in zip(args, node.args)]
        if len(es) < 2:
            raise lw.err(node, f"{which}() in kernels takes two or more numbers, or one tuple")
        t, es = _promote_all(lw, es)
        out = es[0]
        for e in es[1:]:
            out = N.Call(t, lw.loc(node), which, [out, e])
        return out
    return h


def _abs(lw, node):
    (x,) = _exprs(lw, node, 1, "abs")
    if x.ty.dtype.kind in "bu":
        return x
    return N.Call(x.ty, lw.loc(node), "abs", [x])


def _round(lw, node):
    es = _exprs(lw, node, 1, "round")
    x = es[0]
    if not x.ty.dtype.is_float:
        return x
    if isinstance(x, N.Const) and math.isfinite(x.value) and abs(x.value) < 2.0 ** 63:
        # folded (half to even, as rint): also keeps PoCL from folding (long)rint(c) wrongly
        return N.Const(lw.weak_int(), lw.loc(node), round(x.value))
    return lw.cast(N.Call(x.ty, lw.loc(node), "rint", [x]), lw.weak_int())


def _parsed(lw, node, conv):
    """``int("3")``, ``float("inf")``: a string constant converted at compile time, as Python
    converts it (a string that does not parse is Python's ValueError: a CompileError); None
    when the argument is no string."""
    if len(node.args) != 1 or node.keywords:
        return None
    a = lw.expr(node.args[0])
    if not (isinstance(a, PyObj) and isinstance(a.obj, str)):
        return None
    try:
        v = conv(a.obj)
    except ValueError as e:
        raise lw.err(node, f"{conv.__name__}(): {e}") from None
    t = lw.weak_int() if conv is int else Ty(lw.opts.default_float, True)
    return N.Const(t, lw.loc(node), v)


def _int(lw, node):
    c = _parsed(lw, node, int) if node.args and isinstance(node.args[0], ast.Constant) else None
    if c is not None:
        return c
    (x,) = _exprs(lw, node, 1, "int")
    return lw.cast(x, lw.weak_int(), explicit=True) if x.ty != lw.weak_int() else x


def _float(lw, node):
    c = _parsed(lw, node, float) if node.args and isinstance(node.args[0], ast.Constant) else None
    if c is not None:
        return c
    (x,) = _exprs(lw, node, 1, "float")
    return lw.cast(x, Ty(lw.opts.default_float, True))


def _bool(lw, node):
    (x,) = _exprs(lw, node, 1, "bool")
    return lw.strong_bool(lw.truth(x, node))


def _len(lw, node):
    (a,) = _args(lw, node, 1, "len")
    if isinstance(a, N.ArrayInfo):
        if a.ndim == 0:                      # NumPy: "len() of unsized object"
            raise lw.err(node, f"len() of the 0-d array '{a.label or a.name}': it has no first dimension "
                               f"(its .size is 1 and its .ndim 0)")
        return lw.shape_of(a, 0, lw.loc(node))
    if isinstance(a, tuple):
        return N.Const(lw.weak_int(), lw.loc(node), len(a))
    raise lw.err(node, "len() takes an array or a tuple in kernels")


def _range(lw, node):
    raise lw.err(node, "range() can only be used in 'for ... in range(...)'")


def _marker(lw, node, k, default):
    if k >= len(node.args):
        return default
    m = lw.resolve_py(node.args[k])
    if m not in (lang.Global, lang.Local, lang.Group, lang.Linear, lang.Cartesian):
        raise lw.err(node.args[k], "expected tk.Global, tk.Local, tk.Group, tk.Linear or tk.Cartesian")
    return m


def _index(lw, node):
    if len(node.args) > 2:
        raise lw.err(node, "tk.index() takes at most two arguments: (tk.Global|tk.Local|tk.Group, tk.Linear|tk.Cartesian)")
    space = _marker(lw, node, 0, lang.Global)
    form = _marker(lw, node, 1, lang.Linear)
    if space in (lang.Linear, lang.Cartesian) or form in (lang.Global, lang.Local, lang.Group):
        raise lw.err(node, "write tk.index(space, form), e.g. tk.index(tk.Global, tk.Cartesian)")
    base = {lang.Global: "global", lang.Local: "local", lang.Group: "group"}[space]
    loc, t = lw.loc(node), lw.weak_int()
    if form is lang.Linear:
        return N.Index(t, loc, base + "_linear")
    return tuple(N.Index(t, loc, base, d) for d in range(lw.opts.ndim))


def _geometry(kind):
    def h(lw, node):
        _args(lw, node, 0, kind)
        loc, t = lw.loc(node), lw.weak_int()
        if kind == "groupsize":
            return tuple(N.Const(t, loc, w) for w in lw.opts.workgroup)
        return tuple(N.Index(t, loc, kind, d) for d in range(lw.opts.ndim))
    return h


_SHAPE_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
              "//": lambda a, b: a // b if b else None, "%": lambda a, b: a % b if b else None,
              "<<": lambda a, b: a << b if 0 <= b < 64 else None, ">>": lambda a, b: a >> b if b >= 0 else None}


def compile_time_int(lw, x):
    """``x`` as a Const holding a Python int when it is known at compile time: constants,
    locals assigned once from constants (``lw.consts``) and integer arithmetic of those."""
    if isinstance(x, FuncBinding):
        x = N.Var(lw.weak_int(), N.NOLOC, x.var)
    if isinstance(x, N.Var):
        x = lw.consts.get(x.name, x)
    if isinstance(x, N.Const):
        return x
    if isinstance(x, N.Cast) and x.ty.dtype.is_int:
        inner = compile_time_int(lw, x.a)
        if isinstance(inner, N.Const) and isinstance(inner.value, int) and not isinstance(inner.value, bool):
            return N.Const(x.ty, x.loc, wrap(inner.value, x.ty))
    if isinstance(x, N.BinOp) and x.op in _SHAPE_OPS and x.ty.dtype.is_int:
        a, b = compile_time_int(lw, x.a), compile_time_int(lw, x.b)
        if isinstance(a, N.Const) and isinstance(b, N.Const) and isinstance(a.value, int) and isinstance(b.value, int):
            v = _SHAPE_OPS[x.op](a.value, b.value)
            if v is not None:
                return N.Const(x.ty, x.loc, wrap(v, x.ty))
    return x


def _static_shape(lw, node, v):
    """The shape of a localmem/private array: positive Python ints known at compile time."""
    vals = v if isinstance(v, tuple) else (v,)
    out = []
    for x in vals:
        x = compile_time_int(lw, x)
        if isinstance(x, N.Const) and isinstance(x.value, int) and not isinstance(x.value, bool):
            if x.value <= 0:
                raise lw.err(node, f"array dimensions must be positive, got {x.value}")
            out.append(x.value)
            continue
        if isinstance(x, N.Arg):
            raise lw.err(node, f"the shape must be integers known at compile time, but a dimension is the "
                         f"kernel argument '{x.name}', a value known only at run time: annotate it "
                         f"'{x.name}: tk.constexpr' (the kernel then compiles once per value of it)")
        if isinstance(x, N.Const):
            what = f"{x.value!r}, not an integer"
        elif isinstance(x, (N.Expr, FuncBinding)):
            what = "a value known only at run time (a kernel argument, an index, a loaded or reassigned local)"
        else:
            what = "not a number"
        raise lw.err(node, f"the shape must be integers known at compile time, but a dimension is {what}: "
                     "use literals, tk.constexpr arguments, tk.groupsize() (the workgroup size is fixed "
                     "when the kernel compiles) and arithmetic of those, or locals assigned once from them")
    return tuple(out)


def _alloc(space):
    def h(lw, node):
        args = _args(lw, node, 2, f"tk.{'localmem' if space == 'local' else 'private'}")
        if not isinstance(args[0], DTypeVal):
            raise lw.err(node, "the first argument must be a dtype such as tk.float32 or A.dtype")
        shape = _static_shape(lw, node, args[1])
        lw.counter += 1
        info = N.ArrayInfo(f"_{space[0]}m{lw.counter}", args[0].dtype, len(shape), space, False, True, shape)
        lw.emit(N.AllocArray(lw.loc(node), info))
        return info
    return h


def _call_name(node) -> str:
    """``tk.print()`` for the call ``node``: names a call that returns no value in the error
    for using its result (``values.NoValue``)."""
    try:
        return f"{ast.unparse(node.func)}()"
    except Exception:  # noqa: BLE001 - only a name for a message
        return "this call"


def _synchronize(lw, node):
    if node.args:
        raise lw.err(node, "inside kernels tk.synchronize() takes no arguments (it is the workgroup barrier)")
    lw.emit(N.Barrier(lw.loc(node)))
    return NoValue(lw.loc(node), _call_name(node))


def _uniform(lw, node):
    """``tk.uniform(e)``: evaluated once per group (by its first work item) into a local that
    every item reads; backends run it as a group-level statement. Statements ``e`` emits (an
    inlined ``@tk.func``'s prints, stores, atomics) run in that work item only."""
    if len(node.args) != 1:
        raise lw.err(node, f"tk.uniform() takes 1 argument(s), got {len(node.args)}")
    stmts, x = lw.apart(node.args[0])
    c = compile_time_int(lw, x)
    if stmts:
        x = _in_evaluating_item(lw, node, stmts, x)
    name = lw.fresh("uniform")
    lw.assign_var(name, N.Call(x.ty, lw.loc(node), "uniform", [x]), node)
    if isinstance(c, N.Const):
        lw.consts[name] = c     # a constant is uniform: still a compile-time value (for shapes)
    return N.Var(lw.types[name], lw.loc(node), name)


def _in_evaluating_item(lw, node, stmts: list, x: N.Expr) -> N.Expr:
    """Emits ``stmts`` (what a ``tk.uniform`` argument ``x`` needs) guarded to run only in the
    work item that evaluates the uniform, the group's first running one (whose local index a
    uniform of the local index gives), and returns a local holding ``x`` there (zero in the
    other items, which never read it).

    A statement every item must reach (a barrier, a collective, a nested tk.uniform) cannot
    run in one item. A collective or tk.uniform at the argument's top level (written in it,
    ``tk.uniform(tk.group_reduce(v, op))``, ``tk.uniform(x[tk.uniform(j)])``, or at the top
    level of a @tk.func it calls) runs in every item with the rest of the statements, which is
    right without side effects; a barrier, one under a @tk.func's control flow, or one beside
    stores, atomics or prints is a CompileError (the interpreter disagreed on each: per-item
    values, or side effects once per group where the compiled code ran them in every item)."""
    held = [s for s in N.walk_stmts(stmts) if _reached_by_all(s)]
    if held:
        top = {id(s) for s in stmts}
        bad = next((s for s in held if id(s) not in top or isinstance(s, N.Barrier)), None)
        if bad is None and _has_effects(stmts):
            bad = held[0]
        if bad is None:
            lw.out.extend(stmts)
            return x
        what = ("tk.synchronize()" if isinstance(bad, N.Barrier) else
                f"tk.group_{'reduce' if bad.kind == 'reduce' else 'scan'}()" if isinstance(bad, N.Collective)
                else "tk.uniform()")
        raise lw.err(node, f"the argument of tk.uniform() reaches {what} (line {bad.loc.line}), which every work "
                           "item of the group must reach, but one work item evaluates the argument (a barrier, "
                           "a collective or tk.uniform() under a @tk.func's control flow, or beside stores, "
                           "atomics or prints, cannot be evaluated so): compute it before tk.uniform() (the "
                           "result of a collective or a tk.uniform() is uniform already)")
    loc, t = lw.loc(node), lw.weak_int()
    lid = N.Index(t, loc, "local_linear")
    who, val = lw.fresh("uniform_item"), lw.fresh("uniform_arg")
    lw.assign_var(who, N.Call(t, loc, "uniform", [lid]), node)
    lw.types[val] = x.ty
    lw.emit(N.Assign(loc, val, N.Const(x.ty, loc, False if x.ty.dtype.kind == "b" else 0)))
    is_who = N.Compare(Ty(D.bool_, False), loc, "==", lid, N.Var(lw.types[who], loc, who))
    lw.emit(N.If(loc, is_who, stmts + [N.Assign(loc, val, x)], []))
    return N.Var(x.ty, loc, val)


_NO_EFFECT = (N.Assign, N.If, N.For, N.While, N.Break, N.Continue, N.FuncBlock, N.FuncExit, N.Barrier,
              N.Collective, N.AllocArray)


def _has_effects(stmts: list) -> bool:
    """Whether ``stmts`` may store, update atomically or print (any other kind of statement counts)."""
    return any(not isinstance(s, _NO_EFFECT) for s in N.walk_stmts(stmts)) or \
        any(isinstance(e, N.Atomic) for e in N.walk_exprs(stmts))


def _reached_by_all(s) -> bool:
    return isinstance(s, (N.Barrier, N.Collective)) or (
        isinstance(s, N.Assign) and isinstance(s.value, N.Call) and s.value.fn == "uniform")


ATOMIC_TYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")


def _atomic(op):
    def h(lw, node):
        n = 4 if op == "cas" else 3
        args = _args(lw, node, n, f"tk.atomic_{op}")
        arr = args[0]
        if not isinstance(arr, N.ArrayInfo):
            raise lw.err(node, f"the first argument of tk.atomic_{op} must be an array")
        if arr.const:
            raise lw.err(node, f"cannot update '{arr.name}' atomically: it is read-only (tk.Const)")
        if arr.dtype.name not in ATOMIC_TYPES:
            raise lw.err(node, f"atomics on {arr.dtype.name} are not supported (use one of {', '.join(ATOMIC_TYPES)})")
        if op in ("and", "or", "xor") and arr.dtype.is_float:
            raise lw.err(node, f"tk.atomic_{op} needs an integer array, '{arr.name}' is {arr.dtype.name}")
        idx = lw.indices(arr, list(args[1]) if isinstance(args[1], tuple) else [args[1]], node)
        vals = [lw.cast(lw.as_expr(v, node), Ty(arr.dtype)) for v in args[2:]]
        if arr.space == "private":
            return _private_update(lw, node, op, arr, idx, vals)
        return N.Atomic(Ty(arr.dtype), lw.loc(node), op, arr, idx, vals)
    return h


_PRIVATE_OPS = {"add": "+", "sub": "-", "and": "&", "or": "|", "xor": "^"}


def _private_update(lw, node, op: str, arr: N.ArrayInfo, idx: list, vals: list) -> N.Expr:
    """An atomic on a ``tk.private`` array: a plain read-modify-write returning the old value
    (nothing else can touch a work item's own memory; OpenCL, CUDA, HIP and Metal have no
    atomics on private memory, so every backend gets these statements). Index and operands are
    evaluated once, before the read; min/max keep the stored value when either is NaN (as the
    atomics do), compare-and-swap compares the bits (-0.0 != 0.0, a NaN matches its own bits)."""
    loc, t = lw.loc(node), Ty(arr.dtype)
    idx = [lw.as_expr(lw.snapshot(i, node), node) for i in idx]
    vals = [lw.as_expr(lw.snapshot(v, node), node) for v in vals]
    old = lw.as_expr(lw.snapshot(N.Load(t, loc, arr, idx), node), node)
    if op == "cas":
        same = N.Compare(Ty(D.bool_), loc, "==", old, vals[0])
        if arr.dtype.is_float:
            bits = Ty(D.uint32 if arr.dtype.bits == 32 else D.uint64)
            same = N.Compare(Ty(D.bool_), loc, "==", N.Call(bits, loc, "bitcast", [old]),
                             N.Call(bits, loc, "bitcast", [vals[0]]))
        lw.emit(N.If(loc, same, [N.Store(loc, arr, idx, vals[1])], []))
        return old
    if op in ("min", "max"):
        new = N.Call(t, loc, op, [old, vals[0]])
    elif op == "exchange":
        new = vals[0]
    else:
        new = lw.binop(_PRIVATE_OPS[op], old, vals[0], node)
    lw.emit(N.Store(loc, arr, idx, lw.cast(new, t)))
    return old


COLLECTIVE_OPS = ("add", "mul", "min", "max", "and", "or")


def _collective(kind):
    scan = kind == "scan"
    sig = "tk.group_scan(value, op, inclusive=True)" if scan else "tk.group_reduce(value, op)"

    def h(lw, node):
        if not 2 <= len(node.args) <= (3 if scan else 2):
            raise lw.err(node, f"{sig} takes {'2 or 3' if scan else 2} arguments, got {len(node.args)}")
        flag = node.args[2] if len(node.args) > 2 else None
        for kw in node.keywords:
            if not scan or kw.arg != "inclusive":
                raise lw.err(node, f"{sig}: unexpected keyword argument {kw.arg!r}")
            if flag is not None:
                raise lw.err(node, f"{sig}: inclusive given twice (by position and by keyword)")
            flag = kw.value
        v = lw.as_expr(lw.expr(node.args[0]), node)
        op = lw.expr(node.args[1])
        if not isinstance(op, PyObj) or op.obj not in COLLECTIVE_OPS:
            raise lw.err(node, f"op must be one of {', '.join(map(repr, COLLECTIVE_OPS))}")
        inclusive = True
        if flag is not None:
            c = lw.expr(flag)
            if not isinstance(c, N.Const):
                raise lw.err(node, "inclusive= must be a constant")
            inclusive = bool(c.value)
        if op.obj in ("and", "or") and v.ty.dtype.is_float:
            raise lw.err(node, f"op {op.obj!r} needs integers or bools")
        t = v.ty if v.ty.dtype.kind != "b" or op.obj in ("and", "or", "min", "max") else Ty(lw.opts.default_int)
        src, dst = lw.fresh("csrc"), lw.fresh("cdst")
        lw.assign_var(src, lw.cast(v, t), node)
        lw.types[dst] = t
        k = kind if kind == "reduce" or inclusive else "exscan"
        lw.emit(N.Collective(lw.loc(node), k, op.obj, dst, src, t))
        return N.Var(t, lw.loc(node), dst)
    return h


def _select(lw, node):
    c, a, b = _exprs(lw, node, 3, "tk.select")
    t, (a, b) = _promote_all(lw, [a, b])
    return N.Select(t, lw.loc(node), lw.truth(c, node), a, b)


def _fma(lw, node):
    es = [_float_arg(lw, e) for e in _exprs(lw, node, 3, "tk.fma")]
    t, es = _promote_all(lw, es)
    return N.Call(t, lw.loc(node), "fma", es)


def _dot4_i8(lw, node):
    """``tk.dot4_i8(a, b, acc)``: ``acc`` plus the dot product of the four signed bytes packed
    in each of ``a`` and ``b`` (byte 0 the least significant), int32 wrapping like CUDA's
    ``__dp4a``. The words are 32-bit integers (int32, uint32 or Python ints); the result int32."""
    es = _exprs(lw, node, 3, "tk.dot4_i8")
    for e, what in zip(es, ("a", "b", "acc")):
        d = e.ty.dtype
        if not (d.is_int and (e.ty.weak or d.bits == 32)):
            raise lw.err(node, f"tk.dot4_i8(a, b, acc) takes 32-bit integers (int32, uint32 or Python "
                         f"ints: four packed signed bytes in a and b), but {what} is {d.name}")
    t = Ty(D.int32)
    es = [lw.cast(e, t, explicit=True) for e in es]
    if all(isinstance(e, N.Const) for e in es):
        return N.Const(t, lw.loc(node), D.dot4_i8(*(e.value for e in es)))
    return N.Call(t, lw.loc(node), "dot4_i8", es)


def _const_int(lw, node, sig: str, v, what: str) -> int:
    """A compile-time integer argument (a literal or ``tk.constexpr``), else a CompileError."""
    v = v if isinstance(v, int) else lw.as_expr(v, node)
    if isinstance(v, N.Const):
        v = v.value
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise lw.err(node, f"{sig}: {what} must be a compile-time integer (a literal or tk.constexpr)")
    return int(v)


def _element_locals(lw, node, sig: str, arr, e, what: str, prefix: str) -> list:
    """The index ``e`` of an element of ``arr`` (an int, a tuple for more dimensions) as fresh
    int locals assigned before a block-level intrinsic (the block reads along the last one)."""
    idx = list(e) if isinstance(e, tuple) else [e]
    if len(idx) != arr.ndim:
        raise lw.err(node, f"{sig}: {what} must index an element of '{arr.name}' ({arr.ndim} index(es), "
                           f"a tuple for more than one); the bytes run along its last dimension")
    it = Ty(lw.opts.default_int)
    vs = []
    for x in idx:
        x = lw.as_expr(x, node)
        if not x.ty.dtype.is_int:
            raise lw.err(node, f"{sig}: {what} must be an integer index, got {x.ty}")
        v = lw.fresh(f"{prefix}{what}")
        lw.assign_var(v, lw.cast(x, it, explicit=True), node)
        vs.append(N.Var(it, lw.loc(node), v))
    return vs


BYTE_DOT_LANES = 4      # products per lane of tk.dot_i8 / tk.dot_u4i8
SCALE_GROUP = 8         # a scale read from a private float32 array of a multiple of this many


def _scale_element(lw, node, sig: str, se):
    """``(array, [index local])`` when a float form's ``scale`` is an element of a 1-D private
    float32 array whose length is a multiple of ``SCALE_GROUP`` (e.g. a chunk's block scales),
    else None: the C backend then takes the scale out of that array's group of eight as a
    vector (one permute) instead of extracting and broadcasting a scalar (same value)."""
    arr = se.array if isinstance(se, N.Load) else None
    if (arr is None or arr.space != "private" or arr.ndim != 1 or arr.dtype.name != "float32"
            or not arr.shape or int(arr.shape[0]) % SCALE_GROUP or not arr.contiguous):
        return None
    return arr, _element_locals(lw, node, sig, arr, tuple(se.index), "s", "bd")


def _args_and_keywords(lw, node, sig: str, lo: int, hi: int, names: tuple) -> tuple[list, dict]:
    """The lowered positional arguments (``lo`` to ``hi`` of them) and keyword arguments (only
    ``names``, each once) of a call to the intrinsic ``sig``; a CompileError otherwise."""
    if not lo <= len(node.args) <= hi:
        many = f"{lo} or {hi}" if hi == lo + 1 else f"{lo} to {hi}"
        raise lw.err(node, f"{sig} takes {many} arguments, got {len(node.args)}")
    args = lw.in_order(list(node.args))
    kws = {}
    for kw in node.keywords:
        if kw.arg not in names or kw.arg in kws:
            raise lw.err(node, f"{sig}: unexpected keyword argument {kw.arg!r}")
        kws[kw.arg] = lw.expr(kw.value)
    return args, kws


def _byte_dot(kind):
    """``tk.dot_i8(out, a, i, b, j, n, scale=None)`` /
    ``tk.dot_u4i8(out, a, i, b, j, n, scale=None, zero=0)``, both with ``start=None``: ``n``
    byte products summed four at a time into lanes (lane ``l``: the products of values ``4l .. 4l + 3``, exact in int32).
    ``dot_i8``: value ``k`` is the byte after ``a[i]`` by ``k`` (along the last dimension) as
    a signed byte (int8 or uint8 arrays, reinterpreted), ``n`` a multiple of 32. ``dot_u4i8``:
    ``n`` is 32 and the 16 bytes from ``a[i]`` hold 4-bit values, value ``k < 16`` the low
    nibble of byte ``k`` and value ``k + 16`` its high nibble (the GGUF q4_0 layout), minus
    ``zero`` (a compile-time int, 0..15). The other operand is ``b``'s bytes from ``b[j]``,
    signed. An int32 ``out`` receives the lanes (``out[l] = lane``, no ``scale``); a float32
    ``out`` accumulates them: ``out[l] = fma(float32(lane), scale, out[l])``. ``start=(c, k)``
    (an int32 array and an index): lane ``l`` starts at ``c[k + l]`` instead of 0, e.g. the
    ``-zero * b`` lanes computed once for many calls on the same ``b``.

    Lowered to the reference loop (a marked block: every backend runs it); the C renderer
    replaces the block by its SIMD code (VNNI ``vpdpbusd`` or AVX2)."""
    name = f"tk.{'dot_i8' if kind == 'i8' else 'dot_u4i8'}"
    sig = f"{name}(out, a, i, b, j, n, scale=None{', zero=0' if kind == 'u4i8' else ''}, start=None)"

    def h(lw, node):
        args, kws = _args_and_keywords(lw, node, sig, 6, 7 if kind == "i8" else 8,
                                       ("scale", "start") if kind == "i8" else ("scale", "zero", "start"))
        out, a, i, b, j, n = args[:6]
        scale = args[6] if len(args) > 6 else kws.get("scale")
        zero = args[7] if len(args) > 7 else kws.get("zero", 0)
        for arr, what in ((out, "out"), (a, "a"), (b, "b")):
            if not isinstance(arr, N.ArrayInfo) or (what == "out" and arr.ndim != 1):
                raise lw.err(node, f"{sig}: {what} must be {'a 1-D array' if what == 'out' else 'an array'}")
        if out.dtype.name not in ("int32", "float32"):
            raise lw.err(node, f"{sig}: out must be an int32 array (the lanes) or a float32 one (scaled "
                               f"accumulation), '{out.name}' is {out.dtype.name}")
        if (out.dtype.name == "float32") != (scale is not None):
            raise lw.err(node, f"{sig}: a float32 out needs scale= (out[l] = fma(lane, scale, out[l])), an "
                               f"int32 out takes no scale")
        if out.const:
            raise lw.err(node, f"cannot write to '{out.name}': it is read-only (tk.Const)")
        for arr, what in ((a, "a"), (b, "b")):
            if arr.dtype.name not in ("int8", "uint8"):
                raise lw.err(node, f"{sig}: {what} must be an int8 or uint8 array (bytes), "
                                   f"'{arr.name}' is {arr.dtype.name}")
        n, zero = (_const_int(lw, node, sig, v, what) for v, what in ((n, "n"), (zero, "zero")))
        if kind == "i8" and (n <= 0 or n % 32):
            raise lw.err(node, f"tk.dot_i8: n must be a positive multiple of 32, got {n}")
        if kind == "u4i8" and n != 32:
            raise lw.err(node, f"tk.dot_u4i8: n must be 32 (one block of 16 bytes), got {n}")
        if not 0 <= zero <= 15:
            raise lw.err(node, f"tk.dot_u4i8: zero must be in 0..15, got {zero}")
        lanes = n // BYTE_DOT_LANES
        if out.space == "private" and out.shape and int(out.shape[0]) < lanes:
            raise lw.err(node, f"{sig}: out '{out.name}' has {out.shape[0]} elements, the {n} products "
                               f"need {lanes} lanes")
        loc = lw.loc(node)
        it = Ty(lw.opts.default_int)
        base = [_element_locals(lw, node, sig, arr, e, what, "bd") for arr, e, what in ((a, i, "i"), (b, j, "j"))]
        start = kws.get("start")
        if start is not None:
            if not (isinstance(start, tuple) and len(start) == 2 and isinstance(start[0], N.ArrayInfo)
                    and start[0].ndim == 1 and start[0].dtype.name == "int32"):
                raise lw.err(node, f"{sig}: start must be (c, k), c a 1-D int32 array (lane l starts at c[k + l])")
            start = (start[0], _element_locals(lw, node, sig, start[0], start[1], "k", "bd"))
        f32 = Ty(D.float32)
        scale_at = None
        if scale is not None:
            se = lw.as_expr(scale, node)
            if not (se.ty.dtype.is_float or se.ty.dtype.is_int):
                raise lw.err(node, f"{sig}: scale must be a number, got {se.ty}")
            scale_at = _scale_element(lw, node, sig, se)
            sv = lw.fresh("bds")
            lw.assign_var(sv, lw.cast(se, f32, explicit=True), node)
            scale = N.Var(f32, loc, sv)
        lv = lw.fresh("bdl")
        lw.types[lv] = it
        l_ = N.Var(it, loc, lv)
        i32 = Ty(D.int32)

        def c(v):
            return N.Const(it, loc, v)

        def c32(v):
            return N.Const(i32, loc, v)

        def at(arr, start, off):
            k = N.BinOp(it, loc, "+", start[-1], N.BinOp(it, loc, "+", N.BinOp(it, loc, "*", l_, c(4)), c(off)))
            return N.Cast(i32, loc, N.Load(Ty(arr.dtype), loc, arr, start[:-1] + [k]))

        def signed(arr, start, off):        # the byte as int8, on integers every backend has
            x = at(arr, start, off)
            if arr.dtype.name == "int8":
                return x
            return N.BinOp(i32, loc, "-", x, N.BinOp(i32, loc, "<<", N.BinOp(i32, loc, "&", x, c32(128)), c32(1)))

        def lane(terms, first=0):
            acc = terms[0]
            if start is not None:
                k = N.BinOp(it, loc, "+", start[1][0], N.BinOp(it, loc, "+", l_, c(first)))
                acc = N.BinOp(i32, loc, "+", N.Load(i32, loc, start[0], [k]), acc)
            for t in terms[1:]:
                acc = N.BinOp(i32, loc, "+", acc, t)
            return acc

        def store(idx, value):
            if scale is None:
                return N.Store(loc, out, [idx], value)
            cur = N.Load(f32, loc, out, [idx])
            return N.Store(loc, out, [idx], N.Call(f32, loc, "fma", [N.Cast(f32, loc, value), scale, cur]))

        ia, jb = base
        if kind == "i8":
            body = [store(l_, lane([N.BinOp(i32, loc, "*", signed(a, ia, t), signed(b, jb, t)) for t in range(4)]))]
            stop = lanes
        else:
            def nib(t, hi):
                x = N.BinOp(i32, loc, "&", at(a, ia, t), c32(255))
                if hi:
                    x = N.BinOp(i32, loc, ">>", x, c32(4))
                x = N.BinOp(i32, loc, "&", x, c32(15))
                return N.BinOp(i32, loc, "-", x, c32(zero)) if zero else x
            jhi = jb[:-1] + [N.BinOp(it, loc, "+", jb[-1], c(16))]
            body = [store(l_, lane([N.BinOp(i32, loc, "*", nib(t, False), signed(b, jb, t)) for t in range(4)])),
                    store(N.BinOp(it, loc, "+", l_, c(4)),
                          lane([N.BinOp(i32, loc, "*", nib(t, True), signed(b, jhi, t)) for t in range(4)], 4))]
            stop = 4
        loop = N.For(loc, lv, c(0), c(stop), c(1), body)
        info = N.ByteDot(kind, out, a, ia, b, jb, n, scale, zero, start, scale_at)
        lw.emit(N.FuncBlock(loc, lw.fresh("bytedot"), [loop], info))
        return NoValue(loc, _call_name(node))
    return h


def _load_halves(lw, node):
    """``tk.load_halves(out, a, i, n, stride=2)``: ``n`` IEEE float16 values stored
    little-endian in the bytes of ``a`` (int8 or uint8), value ``t`` in the two bytes from
    ``stride * t`` after ``a[i]`` along the last dimension, exactly as float32 into the 1-D
    float32 ``out[0 .. n - 1]`` (``n`` and ``stride`` compile-time integers, ``stride >= 2``).

    Lowered to the reference loop (``out[t] = float32(bitcast(uint16(bytes), float16))``, a
    marked block every backend runs); the C renderer replaces it by F16C code (eight
    ``vcvtph2ps`` conversions at a time) where the target has it."""
    sig = "tk.load_halves(out, a, i, n, stride=2)"
    args, kws = _args_and_keywords(lw, node, sig, 4, 5, ("stride",))
    out, a, i, n = args[:4]
    stride = args[4] if len(args) > 4 else kws.get("stride", 2)
    if not isinstance(out, N.ArrayInfo) or out.ndim != 1 or out.dtype.name != "float32":
        raise lw.err(node, f"{sig}: out must be a 1-D float32 array")
    if out.const:
        raise lw.err(node, f"cannot write to '{out.name}': it is read-only (tk.Const)")
    if not isinstance(a, N.ArrayInfo) or a.dtype.name not in ("int8", "uint8"):
        raise lw.err(node, f"{sig}: a must be an int8 or uint8 array (the halves' bytes)")
    n, stride = (_const_int(lw, node, sig, v, what) for v, what in ((n, "n"), (stride, "stride")))
    if n <= 0:
        raise lw.err(node, f"{sig}: n must be positive, got {n}")
    if stride < 2:
        raise lw.err(node, f"{sig}: stride must be at least 2 (bytes per half), got {stride}")
    if out.space == "private" and out.shape and int(out.shape[0]) < n:
        raise lw.err(node, f"{sig}: out '{out.name}' has {out.shape[0]} elements, fewer than n = {n}")
    loc = lw.loc(node)
    it, i32 = Ty(lw.opts.default_int), Ty(D.int32)
    ia = _element_locals(lw, node, sig, a, i, "i", "hl")
    tv = lw.fresh("hlt")
    lw.types[tv] = it
    t_ = N.Var(it, loc, tv)

    def byte(off):
        k = N.BinOp(it, loc, "+", ia[-1], N.BinOp(it, loc, "+", N.BinOp(it, loc, "*", t_, N.Const(it, loc, stride)),
                                                  N.Const(it, loc, off)))
        return N.BinOp(i32, loc, "&", N.Cast(i32, loc, N.Load(Ty(a.dtype), loc, a, ia[:-1] + [k])), N.Const(i32, loc, 255))

    h = N.BinOp(i32, loc, "|", byte(0), N.BinOp(i32, loc, "<<", byte(1), N.Const(i32, loc, 8)))
    half = N.Call(Ty(D.float16), loc, "bitcast", [lw.cast(h, Ty(D.uint16), explicit=True)])
    body = [N.Store(loc, out, [t_], lw.cast(half, Ty(D.float32), explicit=True))]
    loop = N.For(loc, tv, N.Const(it, loc, 0), N.Const(it, loc, n), N.Const(it, loc, 1), body)
    lw.emit(N.FuncBlock(loc, lw.fresh("halves"), [loop], N.HalfLoad(out, a, ia, n, stride)))
    return NoValue(loc, _call_name(node))


def _byte_run(lw, node, sig: str, table: bool):
    """The checked arguments of ``tk.lookup_u4(out, table, a, i, n, scale=None)`` (``table``)
    or ``tk.load_i8(out, a, i, n, scale=None)``: ``(out, table or None, a, [index locals], n,
    scale as a float32 Var or None)``; ``out`` receives ``2 n`` (lookup) or ``n`` values."""
    npos = 5 if table else 4
    args, kws = _args_and_keywords(lw, node, sig, npos, npos + 1, ("scale",))
    out, tab, a, i, n = args[:5] if table else [args[0], None] + args[1:4]
    scale = args[npos] if len(args) > npos else kws.get("scale")
    for arr, what in ((out, "out"), (tab, "table")):
        if (arr is not None or what == "out") and (not isinstance(arr, N.ArrayInfo) or arr.ndim != 1
                                                   or arr.dtype.name != "float32"):
            raise lw.err(node, f"{sig}: {what} must be a 1-D float32 array")
    if out.const:
        raise lw.err(node, f"cannot write to '{out.name}': it is read-only (tk.Const)")
    if not isinstance(a, N.ArrayInfo) or a.dtype.name not in ("int8", "uint8"):
        raise lw.err(node, f"{sig}: a must be an int8 or uint8 array (the values' bytes)")
    n = _const_int(lw, node, sig, n, "n")
    if n <= 0:
        raise lw.err(node, f"{sig}: n must be positive (bytes), got {n}")
    want = 2 * n if table else n
    if out.space == "private" and out.shape and int(out.shape[0]) < want:
        raise lw.err(node, f"{sig}: out '{out.name}' has {out.shape[0]} elements, fewer than "
                           f"{'2 n' if table else 'n'} = {want}")
    if tab is not None and tab.space == "private" and tab.shape and int(tab.shape[0]) < 16:
        raise lw.err(node, f"{sig}: table '{tab.name}' has {tab.shape[0]} elements, fewer than 16")
    ia = _element_locals(lw, node, sig, a, i, "i", "br")
    if scale is not None:
        f32 = Ty(D.float32)
        se = lw.as_expr(scale, node)
        if not (se.ty.dtype.is_float or se.ty.dtype.is_int):
            raise lw.err(node, f"{sig}: scale must be a number, got {se.ty}")
        sv = lw.fresh("brs")
        lw.assign_var(sv, lw.cast(se, f32, explicit=True), node)
        scale = N.Var(f32, lw.loc(node), sv)
    return out, tab, a, ia, n, scale


def _byte_run_block(lw, node, label: str, n: int, stores, info):
    """Emit the marked reference block ``for k in range(n): stores(k, byte_k)`` (``byte_k``
    a function giving a fresh int32 expression of byte ``k``'s value, 0..255)."""
    loc = lw.loc(node)
    it, i32 = Ty(lw.opts.default_int), Ty(D.int32)
    kv = lw.fresh("brk")
    lw.types[kv] = it
    k_ = N.Var(it, loc, kv)

    def byte():
        k = N.BinOp(it, loc, "+", info.i[-1], k_)
        return N.BinOp(i32, loc, "&", N.Cast(i32, loc, N.Load(Ty(info.a.dtype), loc, info.a, info.i[:-1] + [k])),
                       N.Const(i32, loc, 255))

    loop = N.For(loc, kv, N.Const(it, loc, 0), N.Const(it, loc, n), N.Const(it, loc, 1), stores(k_, byte))
    lw.emit(N.FuncBlock(loc, lw.fresh(label), [loop], info))
    return NoValue(loc, _call_name(node))


def _scaled(loc, v, scale):
    """``v`` times the float32 local ``scale`` (a fresh Var), or ``v`` when there is none."""
    return v if scale is None else N.BinOp(v.ty, loc, "*", v, N.Var(scale.ty, loc, scale.name))


def _lookup_u4(lw, node):
    """``tk.lookup_u4(out, table, a, i, n, scale=None)``: the ``2 n`` 4-bit values in the ``n``
    bytes from ``a[i]`` (int8 or uint8, along the last dimension; value ``k < n`` the low nibble
    of byte ``k``, value ``k + n`` its high nibble: the GGUF Q4_0 layout at ``n = 16``), each
    replaced by ``table[value]`` (a 1-D float32 array of at least 16 elements), times ``scale``
    (float32, one rounding) when given, into the 1-D float32 ``out[0 .. 2 n - 1]``.

    Lowered to the reference loop (a marked block every backend runs); the C renderer replaces
    it by permutes of the (scaled) table in vector registers (AVX-512 ``vpermps``, AVX2 two
    ``vpermps`` and a blend)."""
    out, tab, a, ia, n, scale = _byte_run(lw, node, "tk.lookup_u4(out, table, a, i, n, scale=None)", True)
    loc = lw.loc(node)
    it, i32, f32 = Ty(lw.opts.default_int), Ty(D.int32), Ty(D.float32)

    def entry(nib):
        return _scaled(loc, N.Load(f32, loc, tab, [N.Cast(it, loc, nib)]), scale)

    def stores(k_, byte):
        return [N.Store(loc, out, [k_], entry(N.BinOp(i32, loc, "&", byte(), N.Const(i32, loc, 15)))),
                N.Store(loc, out, [N.BinOp(it, loc, "+", k_, N.Const(it, loc, n))],
                        entry(N.BinOp(i32, loc, ">>", byte(), N.Const(i32, loc, 4))))]

    return _byte_run_block(lw, node, "nibbles", n, stores, N.NibbleLookup(out, tab, a, ia, n, scale))


def _load_i8(lw, node):
    """``tk.load_i8(out, a, i, n, scale=None)``: the ``n`` bytes from ``a[i]`` (int8 or uint8,
    along the last dimension) as signed 8-bit integers converted to float32, times ``scale``
    (float32, one rounding) when given, into the 1-D float32 ``out[0 .. n - 1]``.

    Lowered to the reference loop (a marked block every backend runs); the C renderer replaces
    it by one sign extension straight to 32 bits, a conversion and a multiply per 16 values
    (AVX-512; AVX2 per 8), where GCC's own loop widens through 16 bits in halves."""
    out, _, a, ia, n, scale = _byte_run(lw, node, "tk.load_i8(out, a, i, n, scale=None)", False)
    loc = lw.loc(node)
    i32, f32 = Ty(D.int32), Ty(D.float32)

    def stores(k_, byte):
        b = byte()
        signed = N.BinOp(i32, loc, "-", b, N.BinOp(i32, loc, "<<", N.BinOp(i32, loc, "&", byte(), N.Const(i32, loc, 128)),
                                                    N.Const(i32, loc, 1)))
        return [N.Store(loc, out, [k_], _scaled(loc, N.Cast(f32, loc, signed), scale))]

    return _byte_run_block(lw, node, "bytes", n, stores, N.ByteLoad(out, a, ia, n, scale))


def _bitcast(lw, node):
    """``tk.bitcast(x, dtype)``: the bits of ``x`` read as ``dtype`` (same size; not bool). A
    float16/bfloat16/fp8 value (float32 inside a kernel) is rounded to its type first, as on
    store; a Python int is taken as an unsigned integer of ``dtype``'s size."""
    args = _args(lw, node, 2, "tk.bitcast")
    if not isinstance(args[1], DTypeVal):
        raise lw.err(node, "tk.bitcast(x, dtype): the second argument must be a dtype such as tk.int32")
    dst = args[1].dtype
    x = lw.as_expr(args[0], node.args[0])
    src = x.ty.dtype
    if dst.kind == "b" or src.kind == "b":
        raise lw.err(node, "tk.bitcast does not take or give bool")
    if x.ty.weak:
        if not src.is_int:
            raise lw.err(node, "tk.bitcast of a Python float: its size is not fixed; cast it first, "
                         "e.g. tk.bitcast(tk.float32(x), tk.uint32)")
        src = D.from_any(np.dtype(f"u{dst.itemsize}"))
        x = lw.cast(x, Ty(src), explicit=True)
    if src.bits != dst.bits:
        raise lw.err(node, f"tk.bitcast from {src.name} ({src.bits} bits) to {dst.name} ({dst.bits} bits): "
                     "the sizes must be equal")
    if src == dst:
        return x
    if src.is_int and dst.is_int:
        return lw.cast(x, Ty(dst), explicit=True)      # a same-size integer cast keeps the bits
    if isinstance(x, N.Const) and D.to_numpy(src) is not None and D.to_numpy(dst) is not None \
            and not src.is_storage_only and not dst.is_storage_only:
        with np.errstate(all="ignore"):
            v = np.array(x.value).astype(D.to_numpy(src)).view(D.to_numpy(dst))[()]
        if not (dst.is_float and np.isnan(v)):           # NaN payloads stay with run time
            return N.Const(Ty(dst), lw.loc(node), v.item())
    return N.Call(Ty(dst), lw.loc(node), "bitcast", [x])


def _clamp(lw, node):
    es = _exprs(lw, node, 3, "tk.clamp")
    t, (x, lo, hi) = _promote_all(lw, es)
    loc = lw.loc(node)
    return N.Call(t, loc, "min", [N.Call(t, loc, "max", [x, lo], clamp=True), hi], clamp=True)


def _print(lw, node):
    parts = []
    for a in node.args:
        v = lw.expr(a)
        if isinstance(v, PyObj) and isinstance(v.obj, str):
            parts.append(v.obj)
        elif isinstance(v, tuple):
            parts.extend(lw.as_expr(x, a) for x in v)
        else:
            parts.append(lw.as_expr(v, a))
    lw.emit(N.Print(lw.loc(node), parts))
    return NoValue(lw.loc(node), _call_name(node))


def _integer_words(lw, node, es, fn: str, what) -> None:
    """The words of a random function must be integers (or bools), as the host functions of
    the same names require (a TypeError there): a float key or counter was truncated to an
    integer silently, so ``uniform(key, x[i])`` drew the same number for 0.2 and 0.7."""
    for k, (e, a) in enumerate(zip(es, node.args)):
        if e.ty.dtype.is_float:
            raise lw.err(a, f"tk.random.{fn}: {what(k)} must be an integer (as on the host), got "
                            f"{'a Python float' if e.ty.weak else e.ty.dtype.name}")


def _philox(lw, node):
    es = _exprs(lw, node, 6, "tk.random.philox4x32")
    _integer_words(lw, node, es, "philox4x32", lambda k: f"word {('c0', 'c1', 'c2', 'c3', 'k0', 'k1')[k]}")
    es = [lw.cast(e, Ty(D.uint32)) for e in es]
    name = lw.fresh("philox")
    outs = [f"{name}_{k}" for k in range(4)]
    for o in outs:
        lw.types[o] = Ty(D.uint32)
    lw.emit(N.Philox(lw.loc(node), outs, es))
    return tuple(N.Var(Ty(D.uint32), lw.loc(node), o) for o in outs)


def _rand(fn, t):
    def h(lw, node):
        key, ctr = _exprs(lw, node, 2, f"tk.random.{fn}")
        _integer_words(lw, node, (key, ctr), fn, lambda k: ("the key", "the counter")[k])
        return N.Call(Ty(t), lw.loc(node), "rand_" + fn, [lw.cast(key, Ty(D.uint64)), lw.cast(ctr, Ty(D.uint64))])
    return h


MATH1 = ("exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "asin", "acos",
         "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "floor", "ceil",
         "trunc", "fabs")
MATH2 = ("atan2", "pow", "copysign", "hypot", "fmod")

def _log(lw, node):
    """``math.log(x)``, and Python's ``math.log(x, base)``: ``log(x) / log(base)``, as CPython
    computes it (and the interpreter does); each log is the argument's float function."""
    if len(node.args) != 2:
        return _math1("log")(lw, node)
    x, b = (_float_arg(lw, e) for e in _exprs(lw, node, 2, "log"))
    loc = lw.loc(node)
    return lw.binop("/", N.Call(x.ty, loc, "log", [x]), N.Call(b.ty, loc, "log", [b]), node)


_HANDLERS = {}
for _n in MATH1:
    _HANDLERS[getattr(math, _n)] = _math1(_n)
_HANDLERS[math.log] = _log
for _n in MATH2:
    _HANDLERS[getattr(math, _n)] = _math2(_n)
for _n in ("isnan", "isinf", "isfinite"):
    _HANDLERS[getattr(math, _n)] = _predicate(_n)
def _breakpoint(lw, node):
    """``breakpoint()``: pdb on the work item, on the interpreter only."""
    if not lw.opts.allow_breakpoint:
        raise lw.err(node, "breakpoint() works only on tk.Interpreter() (pdb on a work item); "
                     "remove it, or run the kernel with tk.Interpreter() to debug it")
    _args(lw, node, 0, "breakpoint")
    return NoValue(lw.loc(node), _call_name(node))


_HANDLERS.update({
    builtins.breakpoint: _breakpoint,
    builtins.abs: _abs, builtins.min: _minmax("min"), builtins.max: _minmax("max"),
    builtins.round: _round, builtins.int: _int, builtins.float: _float, builtins.bool: _bool,
    builtins.len: _len, builtins.range: _range,
    lang.index: _index, lang.ndrange: _geometry("ndrange"), lang.groupsize: _geometry("groupsize"),
    lang.ngroups: _geometry("ngroups"), lang.localmem: _alloc("local"), lang.private: _alloc("private"),
    lang.uniform: _uniform, lang.group_reduce: _collective("reduce"), lang.group_scan: _collective("scan"),
    lang.select: _select, lang.rsqrt: _math1("rsqrt"), lang.fma: _fma, lang.clamp: _clamp, lang.dot4_i8: _dot4_i8, lang.dot_i8: _byte_dot("i8"),
    lang.dot_u4i8: _byte_dot("u4i8"), lang.load_halves: _load_halves, lang.lookup_u4: _lookup_u4, lang.load_i8: _load_i8,
    lang.bitcast: _bitcast,
    lang.sigmoid: _math1("sigmoid"), lang.print: _print,
    tkrandom.philox4x32: _philox, tkrandom.uniform: _rand("uniform", D.float32),
    tkrandom.normal: _rand("normal", D.float32), tkrandom.bits: _rand("bits", D.uint32),
})
for _op in lang.ATOMIC_OPS:
    _HANDLERS[getattr(lang, f"atomic_{_op}")] = _atomic(_op)


def handler_for(fn):
    """The handler of a callable used in a kernel, or None."""
    if lang.intrinsic_name(fn) == "synchronize":
        return _synchronize
    try:
        return _HANDLERS.get(fn)
    except TypeError:  # unhashable
        return None
