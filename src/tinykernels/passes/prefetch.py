"""Next-row prefetch for the CPU's row kernels: which rows the next group (or work item) reads.

A GPU-style row kernel (one workgroup per row, ``X[row, j]`` with ``row = tk.index(tk.Group,
tk.Linear)``; or a flat kernel with one work item per row and strip-mined loops over it) reads
its row from DRAM in a first pass that computes little (a sum of squares, a maximum), then
computes on the row in cache (the scaling of RMSNorm, the exponentials of softmax) while no
memory moves; the next group's row is fetched only when that group starts. Its address is
known, though: the same expression of the group id, with the id one higher. This pass finds
those rows; the C renderer (``codegen/c.py``) points a cursor at each when a group (item)
starts and spreads software prefetches of it over the iterations of the later passes (a few
lines per iteration, not one burst), so the next row arrives while this one computes.

A load qualifies when its array is a global argument of rank >= 2 that the kernel never
writes, its leading indices (all but the last) are pure functions of the group (item) id and
values that are the same for the whole group (arguments, shapes, constants, locals holding
such values), at least one of them depends on the id, it sits in a loop, and its last index
is not such a value (it moves along the row). A prefetch is a hint: it never changes results;
the renderer issues it only for rows inside the array's bounds.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..ir import nodes as N
from .uniformity import defs

_FIXED_INDEX = ("ndrange", "groupsize", "ngroups")


@dataclass
class NextRow:
    """One array row the next group (item) reads: ``lead`` are the row's leading indices, with
    the id replaced by the next id (locals replaced by their values)."""
    array: N.ArrayInfo
    lead: list


def id_kinds(grouped: bool, ndim: int):
    """A predicate: whether an ``N.Index`` is the id that the next group (item) has one higher
    (the group's linear id or last coordinate; a flat kernel's item index along its row)."""
    def is_id(x: N.Index) -> bool:
        if grouped:
            return x.kind == "group_linear" or (x.kind == "group" and x.dim == ndim - 1)
        return x.kind == "global_linear" or (x.kind in ("global", "global_pos") and x.dim == ndim - 1)
    return is_id


def assign_counts(body: list) -> dict:
    """How often each local is assigned in the kernel (loops, collectives, Philox: many)."""
    counts: dict = {}
    for s in N.walk_stmts(body):
        for v in defs(s):
            counts[v] = counts.get(v, 0) + (1 if isinstance(s, N.Assign) else 2)
    return counts


def resolve(e: N.Expr, env: dict) -> N.Expr | None:
    """``e`` with its locals replaced by the values they hold (``env``: local -> resolved value,
    or None when unknown), or None when it is not a pure function of geometry, arguments,
    shapes and constants (loads, atomics, calls, unknown locals)."""
    if isinstance(e, N.Var):
        return env.get(e.name)
    if isinstance(e, (N.Load, N.Atomic, N.Call)):
        return None
    if isinstance(e, (N.Const, N.Arg, N.Shape, N.Index)):
        return e
    if isinstance(e, (N.BinOp, N.Compare)):
        a, b = resolve(e.a, env), resolve(e.b, env)
        return None if a is None or b is None else replace(e, a=a, b=b)
    if isinstance(e, (N.Unary, N.Cast)):
        a = resolve(e.a, env)
        return None if a is None else replace(e, a=a)
    if isinstance(e, N.Select):
        parts = [resolve(x, env) for x in (e.cond, e.a, e.b)]
        return None if None in parts else replace(e, cond=parts[0], a=parts[1], b=parts[2])
    return None


_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _known(cond: N.Expr | None) -> bool | None:
    """The value of an ``if`` condition fixed at compile time (a constant, or a comparison of
    constants, as a ``constexpr`` mode makes), else None: the branch that never runs is not
    searched for rows."""
    if isinstance(cond, N.Const):
        return bool(cond.value)
    if isinstance(cond, N.Compare) and isinstance(cond.a, N.Const) and isinstance(cond.b, N.Const) \
            and cond.op in _COMPARE:
        return bool(_COMPARE[cond.op](cond.a.value, cond.b.value))
    return None


def _row_loads(body: list):
    """``(load, env, in_loop)`` for every load of the kernel, ``env`` the values the locals
    hold where it is evaluated: a local assigned in straight-line code (top level, inlined
    functions without conditional exits) holds its last value there; one assigned once in the
    kernel holds its value everywhere after; any other is unknown inside and after the
    statement that assigns it."""
    counts = assign_counts(body)
    env: dict = {}
    out: list = []

    def visit(stmts, ctl: bool, loop: bool) -> None:
        for s in stmts:
            for e in N.stmt_exprs(s):
                out.extend((x, dict(env), loop) for x in N.walk_expr(e) if isinstance(x, N.Load))
            if isinstance(s, N.Assign):
                env[s.var] = resolve(s.value, env) if not ctl or counts.get(s.var) == 1 else None
            elif isinstance(s, N.FuncBlock):
                exits = any(isinstance(t, N.FuncExit) for t in N.walk_stmts(s.body))
                visit(s.body, ctl or exits, loop)
            else:
                inner = {v for t in N.walk_stmts([s]) for v in defs(t)}
                env.update({v: None for v in inner if counts.get(v) != 1 or not isinstance(s, N.If)})
                for v in defs(s):
                    env[v] = None
                sub = isinstance(s, (N.For, N.While))
                live = _known(resolve(s.cond, env)) if isinstance(s, N.If) else None
                for attr in ("body", "orelse"):
                    if live is None or live == (attr == "body"):
                        visit(getattr(s, attr, None) or [], True, loop or sub)
    visit(body, False, False)
    return out


def bump(e: N.Expr, is_id) -> N.Expr:
    """``e`` with every id replaced by ``id + 1``."""
    if isinstance(e, N.Index):
        return N.BinOp(e.ty, e.loc, "+", e, N.Const(e.ty, e.loc, 1)) if is_id(e) else e
    if isinstance(e, (N.BinOp, N.Compare)):
        return replace(e, a=bump(e.a, is_id), b=bump(e.b, is_id))
    if isinstance(e, (N.Unary, N.Cast)):
        return replace(e, a=bump(e.a, is_id))
    if isinstance(e, N.Select):
        return replace(e, cond=bump(e.cond, is_id), a=bump(e.a, is_id), b=bump(e.b, is_id))
    return e


def _uses_id(e: N.Expr, is_id) -> bool:
    return any(isinstance(x, N.Index) and is_id(x) for x in N.walk_expr(e))


def _row_fixed(e: N.Expr, grouped: bool, ndim: int, is_id) -> bool:
    """Whether a resolved expression is the same in every item of a group (flat: of a row of
    the ndrange) apart from its ids: no local index, no item coordinate along the row."""
    def ok(x: N.Index) -> bool:
        if is_id(x) or x.kind in _FIXED_INDEX:
            return True
        if grouped:
            return x.kind == "group"
        return x.kind in ("global", "global_pos") and x.dim < ndim - 1
    return all(ok(x) for x in N.walk_expr(e) if isinstance(x, N.Index))


def next_rows(k: N.Kernel, grouped: bool, ranges: int) -> list:
    """The rows (deduplicated) the next group (item) of ``k`` reads, per the module's rules.
    Empty for debug kernels (their loads are checked where the program makes them) and for
    flat kernels over a stepped ndrange (``ranges == 2``: the next item is not ``id + 1``)."""
    if k.debug or (not grouped and ranges == 2):
        return []
    is_id = id_kinds(grouped, k.ndim)
    stored = {s.array.name for s in N.walk_stmts(k.body) if isinstance(s, N.Store)}
    stored |= {e.array.name for e in N.walk_exprs(k.body) if isinstance(e, N.Atomic)}
    found: list = []
    for e, env, in_loop in _row_loads(k.body):
        if not (in_loop and e.array.space == "global" and e.array.ndim >= 2 and e.array.name not in stored):
            continue
        lead = [resolve(i, env) for i in e.index[:-1]]
        if None in lead or not any(_uses_id(i, is_id) for i in lead) \
                or not all(_row_fixed(i, grouped, k.ndim, is_id) for i in lead):
            continue
        if resolve(e.index[-1], env) is not None:
            continue        # the last index does not move along the loop: not a row
        row = NextRow(e.array, [bump(i, is_id) for i in lead])
        if all(row_key(row) != row_key(f) for f in found):
            found.append(row)
    return found


def expr_key(e):
    """``e``'s structure without source locations and with casts to its operand's own type
    dropped: two loads of one row from different lines (an inlined ``@tk.func``'s, whose row
    index is a cast of the caller's) have the same key."""
    if isinstance(e, N.Cast) and e.ty.dtype == e.a.ty.dtype:
        return expr_key(e.a)
    if not isinstance(e, N.Expr):
        return e
    return (type(e).__name__,) + tuple(expr_key(getattr(e, f.name)) if isinstance(getattr(e, f.name), N.Expr)
                                       else getattr(e, f.name) for f in fields(e) if f.name != "loc")


def row_key(row: NextRow) -> tuple:
    """What makes two :class:`NextRow` the same row (one prefetch cursor for both)."""
    return (row.array.name, tuple(expr_key(i) for i in row.lead))


def reads_rows(stmts: list, rows: list) -> bool:
    """Whether ``stmts`` load from an array of ``rows`` (a loop that should step the prefetch)."""
    names = {r.array.name for r in rows}
    return any(isinstance(e, N.Load) and e.array.name in names for e in N.walk_exprs(stmts))


def has_loop(stmts: list) -> bool:
    return any(isinstance(s, (N.For, N.While)) for s in N.walk_stmts(stmts))
