"""Integer floor division and modulo that a flat kernel's CPU row loop can hoist.

A flat kernel on the CPU runs each row of its ndrange as one loop over the position along
the last dimension. Python-semantics ``a // b`` and ``a % b`` (helper functions with sign
branches; x86 has no vector integer division) inside that loop keep GCC and Clang from
vectorizing it. When the divisor ``b`` is the same for the whole row and the dividend ``a``
is the position plus terms that are the same for the whole row (``i // C``, ``(i + k) % C``
with ``i = tk.index()``), the quotient is constant over runs of consecutive positions and
the remainder rises by one per position within a run. The C renderer then splits the row
into those runs, computes quotient and remainder once per run with the same helpers, and
gives the items ``q`` and ``r0 + (position - run start)``: the loop over a run has no
division and vectorizes. The results are exactly those of the helpers.

This module only finds the divisions (``row_divisions``); the run lengths are computed in
the C renderer (``codegen/c.py``), including the wrap of the 64-bit dividend.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import nodes as N

_INVARIANT_INDEX = ("ndrange", "groupsize", "ngroups")


@dataclass
class RowDivision:
    """``a // b`` and ``a % b`` for one (dividend, divisor) pair: ``ops`` are the IR nodes
    computing them; ``a`` and ``b`` have their locals replaced by the values they hold, so
    they can be evaluated outside the item; ``step`` is 1 when ``a`` is one more at the next
    position of the row, 0 when it is the same for the whole row."""
    a: N.Expr
    b: N.Expr
    step: int
    ops: list


def _is_i64(e: N.Expr) -> bool:
    d = e.ty.dtype if e.ty is not None else None
    return d is not None and d.kind == "i" and d.bits == 64


def row_invariant_defs(body: list) -> dict:
    """Locals assigned exactly once in the kernel, by a top-level statement (so every read
    sees that one value), to their value."""
    counts: dict = {}
    for s in N.walk_stmts(body):
        if isinstance(s, N.Assign):
            counts[s.var] = counts.get(s.var, 0) + 1
        elif isinstance(s, N.Philox):
            for v in s.outs:
                counts[v] = counts.get(v, 0) + 2
        elif isinstance(s, N.Collective):
            counts[s.dst] = counts.get(s.dst, 0) + 2
        elif isinstance(s, N.For):
            counts[s.var] = counts.get(s.var, 0) + 2
    return {s.var: s.value for s in body if isinstance(s, N.Assign) and counts.get(s.var) == 1}


def row_step(e: N.Expr, defs: dict, ndim: int, ranges: int, seen: frozenset = frozenset(),
             fixed: frozenset = frozenset()) -> int | None:
    """How much ``e`` grows from one position of a flat kernel's row to the next: 0 (the same
    in the whole row), another int, or None (unknown, or not a pure function of the position
    and row-invariant values: loads, atomics, calls). Sums and multiples count only in 64-bit
    integer arithmetic (narrower may wrap between positions). ``ranges`` as in the C renderer
    (2: the ndrange has steps, so the last coordinate moves by the step). ``fixed``: locals
    known to hold the same value in the whole row (the loads of ``row_loads``)."""
    def c(x):
        if isinstance(x, (N.Const, N.Arg, N.Shape)):
            return 0
        if isinstance(x, N.Var):
            if x.name in fixed:
                return 0
            if x.name not in defs or x.name in seen:
                return None
            return row_step(defs[x.name], defs, ndim, ranges, seen | {x.name}, fixed)
        if isinstance(x, N.Index):
            last = x.dim == ndim - 1
            if x.kind == "global_linear":
                return 1
            if x.kind == "global_pos":
                return 1 if last else 0
            if x.kind == "global":
                return (1 if ranges < 2 else None) if last else 0
            return 0 if x.kind in _INVARIANT_INDEX else None
        if isinstance(x, (N.Load, N.Atomic, N.Call)):
            return None
        parts = [c(y) for y in N.child_exprs(x)]
        if any(p is None for p in parts):
            return None
        if not any(parts):
            return 0
        if not _is_i64(x):
            return None         # narrower arithmetic may wrap between positions
        if isinstance(x, N.BinOp) and x.op in ("+", "-"):
            return parts[0] + parts[1] if x.op == "+" else parts[0] - parts[1]
        if isinstance(x, N.BinOp) and x.op == "*":
            for p, other in ((parts[0], x.b), (parts[1], x.a)):
                if p and isinstance(other, N.Const) and isinstance(other.value, int):
                    return p * other.value
            return None
        if isinstance(x, N.Unary) and x.op == "-":
            return -parts[0]
        if isinstance(x, N.Cast) and _is_i64(x.a):
            return parts[0]
        return None
    return c(e)


def substitute(e: N.Expr, defs: dict) -> N.Expr:
    """``e`` with its locals (all in ``defs``) replaced by their values, recursively."""
    if isinstance(e, N.Var):
        return substitute(defs[e.name], defs)
    if isinstance(e, (N.BinOp, N.Compare)):
        return replace(e, a=substitute(e.a, defs), b=substitute(e.b, defs))
    if isinstance(e, (N.Unary, N.Cast)):
        return replace(e, a=substitute(e.a, defs))
    if isinstance(e, N.Load):
        return replace(e, index=[substitute(i, defs) for i in e.index])
    if isinstance(e, N.Select):
        return replace(e, cond=substitute(e.cond, defs), a=substitute(e.a, defs), b=substitute(e.b, defs))
    return e


def row_divisions(k: N.Kernel, ranges: int, key) -> list:
    """The int64 ``//`` and ``%`` of flat kernel ``k`` whose divisor is the same in a whole
    row and whose dividend grows by one per position (or is the same in the whole row), as
    ``RowDivision`` entries, one per distinct pair (``key(expr)``: the text that identifies
    an expression, the C renderer's rendering). Empty unless at least one dividend grows with
    the position (a row of constant quotients needs no runs), and in debug kernels."""
    if k.debug:
        return []
    defs = row_invariant_defs(k.body)
    found: dict = {}
    for s in N.walk_stmts(k.body):
        for root in N.stmt_exprs(s):
            for e in N.walk_expr(root):
                if not (isinstance(e, N.BinOp) and e.op in ("//", "%") and _is_i64(e)
                        and _is_i64(e.a) and _is_i64(e.b)):
                    continue
                step = row_step(e.a, defs, k.ndim, ranges)
                if step not in (0, 1) or row_step(e.b, defs, k.ndim, ranges) != 0:
                    continue
                a, b = substitute(e.a, defs), substitute(e.b, defs)
                ident = (key(a), key(b))
                if ident not in found:
                    found[ident] = RowDivision(a, b, step, [])
                found[ident].ops.append(e)
    divs = list(found.values())
    return divs if any(d.step == 1 for d in divs) else []


def _may_exit(s: N.Stmt) -> bool:
    """Whether statement ``s`` may end the item before the statements after it run."""
    return any(isinstance(t, N.Return) for t in N.walk_stmts([s]))


def row_loads(k: N.Kernel, ranges: int) -> list:
    """Loads that a flat kernel's CPU row loop may do once per row instead of once per item:
    ``(load, hoistable)`` pairs, where ``load`` is the value of a top-level assignment
    ``t = A[...]`` (possibly cast) that every item runs (no statement before it may end the
    item), ``A`` is a read-only (``tk.Const``) global array, and every index is the same for
    the whole row (``row_step`` 0); ``hoistable`` is the same load with the locals of its
    indices replaced by their values, to be evaluated before the row's items. An embedding
    gather's ``t = idx[n]`` is one: loaded per item, the C compiler could not tell that it
    does not change along the row and gathered every element of the copied row. Returned as
    ``(var, load, hoistable)`` triples (``var``: the local assigned). Empty in debug kernels
    (their loads are bounds-checked where the program reads them)."""
    if k.debug:
        return []
    defs = row_invariant_defs(k.body)
    found = []
    for s in k.body:
        if _may_exit(s):
            break
        if not (isinstance(s, N.Assign) and s.var in defs):
            continue
        v = s.value
        while isinstance(v, N.Cast):
            v = v.a
        if (isinstance(v, N.Load) and v.array.space == "global" and v.array.const
                and all(row_step(i, defs, k.ndim, ranges) == 0 for i in v.index)):
            found.append((s.var, v, substitute(v, defs)))
    return found
