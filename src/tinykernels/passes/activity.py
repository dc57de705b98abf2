"""Which values the reverse sweep needs adjoints for (the *useful* half of an activity
analysis, as in Enzyme and Warp).

A value gets an adjoint only if some output depends on it through differentiable data flow:
a store or atomic add/sub into a float array that has a shadow (a differentiated global
array, or a local/private array that is itself useful), a local assigned from it that is
useful, a group collective whose result is useful. Values used only in comparisons, branch
conditions, indices or integer casts, values no store reads (a dead local, a discarded
``@tk.func`` result, a loop's dead accumulator) are not useful: the reverse sweep emits no
adjoint code for them, so their partials (which may be infinite: ``exp(1000 * x)``) are never
multiplied by their zero adjoint (``0 * inf`` is NaN).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import nodes as N

#: Float functions whose derivative is zero (or which are not differentiable functions).
NONDIFF_CALLS = ("floor", "ceil", "trunc", "rint", "bitcast")


def nondiff_call(fn: str) -> bool:
    """Whether a float call contributes no derivative."""
    return fn in NONDIFF_CALLS or fn.startswith("rand_")


def diff_refs(e: N.Expr):
    """The leaves (Var, Arg, Load, Atomic) of the float expression ``e`` that the chain rule
    reaches: not indices, comparisons, select conditions or integer operands."""
    if not e.ty.dtype.is_float:
        return
    if isinstance(e, (N.Var, N.Arg, N.Load, N.Atomic)):
        yield e
    elif isinstance(e, N.Cast):
        yield from diff_refs(e.a)
    elif isinstance(e, N.Unary):
        if e.op == "-":
            yield from diff_refs(e.a)
    elif isinstance(e, N.Select):
        yield from diff_refs(e.a)
        yield from diff_refs(e.b)
    elif isinstance(e, N.BinOp):
        if e.op != "//":
            yield from diff_refs(e.a)
            yield from diff_refs(e.b)
    elif isinstance(e, N.Call):
        if not nondiff_call(e.fn):
            for a in e.args:
                yield from diff_refs(a)


@dataclass
class Useful:
    """Locals and local/private arrays whose adjoint can reach an output."""
    vars: set = field(default_factory=set)
    arrays: set = field(default_factory=set)


def useful_values(k: N.Kernel, diff: set) -> Useful:
    """A backward fixed point from the stores into shadowed arrays (see the module docstring)."""
    u = Useful()
    sinks = {p[1].name for p in k.params if p[0] == "array" and p[1].name in diff and p[1].dtype.is_float}

    def sink(a: N.ArrayInfo) -> bool:
        return a.dtype.is_float and (a.name in sinks if a.space == "global" else a.name in u.arrays)

    def mark(e) -> bool:
        changed = False
        for x in diff_refs(e):
            if isinstance(x, N.Var) and x.name not in u.vars:
                u.vars.add(x.name)
                changed = True
            elif isinstance(x, N.Load) and x.array.space != "global" and x.array.name not in u.arrays:
                u.arrays.add(x.array.name)
                changed = True
        return changed

    changed = True
    while changed:
        changed = False
        for s in N.walk_stmts(k.body):
            if isinstance(s, N.Assign) and s.var in u.vars:
                changed |= mark(s.value)
            elif isinstance(s, N.Store) and sink(s.array):
                changed |= mark(s.value)
            elif isinstance(s, N.ExprStmt) and isinstance(s.expr, N.Atomic) and s.expr.op in ("add", "sub") \
                    and sink(s.expr.array):
                changed |= mark(s.expr.args[0])
            elif isinstance(s, N.Collective) and s.dst in u.vars and s.src not in u.vars:
                u.vars.add(s.src)
                changed = True
    return u


def linear(e: N.Expr) -> bool:
    """Whether the chain rule through ``e`` multiplies its adjoint only by constants +-1 (sums,
    negations, casts, selects), so a zero adjoint stays zero without a guard."""
    if not e.ty.dtype.is_float or isinstance(e, (N.Var, N.Arg, N.Load, N.Const, N.Index, N.Shape)):
        return True
    if isinstance(e, N.Cast):
        return linear(e.a)
    if isinstance(e, N.Unary):
        return linear(e.a)
    if isinstance(e, N.Select):
        return linear(e.a) and linear(e.b)
    if isinstance(e, N.BinOp):
        return e.op in ("+", "-", "//") and linear(e.a) and linear(e.b)
    if isinstance(e, N.Call):
        return nondiff_call(e.fn)
    return False
