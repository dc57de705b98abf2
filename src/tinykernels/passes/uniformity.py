"""Which values are the same in every work item of a group, and where barriers may stand.

``tk.synchronize()`` and group collectives must be reached by every work item of a group,
so they may only sit under control flow whose conditions are uniform: built from kernel
arguments, constexprs, the group index, sizes, and locals derived from those.
"""
from __future__ import annotations


from ..errors import CompileError
from ..ir import nodes as N

_UNIFORM_INDEX = {"group", "group_linear", "ndrange", "ngroups", "groupsize"}


def defs(s) -> list:
    """The locals a statement assigns directly."""
    if isinstance(s, N.Assign):
        return [s.var]
    if isinstance(s, N.For):
        return [s.var]
    if isinstance(s, N.Philox):
        return list(s.outs)
    if isinstance(s, N.Collective):
        return [s.dst]
    return []


def is_uniform(e: N.Expr, uvars: set) -> bool:
    """Whether an expression has the same value in every work item of a group."""
    if isinstance(e, (N.Const, N.Arg, N.Shape)):
        return True
    if isinstance(e, N.Var):
        return e.name in uvars
    if isinstance(e, N.Index):
        return e.kind in _UNIFORM_INDEX
    if isinstance(e, (N.Load, N.Atomic)):
        return False
    if isinstance(e, N.Call) and e.fn == "uniform":
        return True
    return all(is_uniform(c, uvars) for c in N.child_exprs(e))


def _has_divergent_jump(body, uvars, all_funcs: bool = True, inner_exits: bool = True) -> bool:
    """A break/continue/exit under a non-uniform condition inside ``body`` (not in nested loops).
    ``all_funcs=False``: only exits of functions that hold a barrier (an early return skips
    the rest of its function only; that matters to barriers only when the function has one).
    ``inner_exits=False``: not the exits of functions inlined inside ``body`` (every item reaches
    such a function's end, so a loop's iteration goes on alike after it; what the function assigns
    after its exit is judged by its own FuncBlock)."""
    def visit(stmts, uniform, inner):
        for s in stmts:
            if isinstance(s, (N.Break, N.Continue)) and not uniform:
                return True
            if isinstance(s, N.FuncExit) and not uniform and (inner_exits or s.label not in inner):
                return True
            if isinstance(s, N.If):
                u = uniform and is_uniform(s.cond, uvars)
                if visit(s.body, u, inner) or visit(s.orelse, u, inner):
                    return True
            elif isinstance(s, N.FuncBlock) and (all_funcs or _contains_sync(s.body)):
                if visit(s.body, uniform, inner | {s.label}):
                    return True
        return False
    return visit(body, True, frozenset())


def uniform_vars(body: list, all_vars) -> set:
    """The locals whose every assignment is uniform and under uniform control (a fixed point)."""
    u = set(all_vars)
    while True:
        bad = set()

        def visit(stmts, ctl):
            for s in stmts:
                d = defs(s)
                if d:
                    ok = ctl
                    if isinstance(s, N.Assign):
                        ok = ok and is_uniform(s.value, u)
                    elif isinstance(s, N.For):
                        # a break under a non-uniform condition leaves the items with different
                        # values of the loop variable
                        ok = ok and all(is_uniform(x, u) for x in (s.start, s.stop, s.step)) \
                            and not _has_divergent_jump(s.body, u, inner_exits=False)
                    elif isinstance(s, N.Philox):
                        ok = ok and all(is_uniform(x, u) for x in s.args)
                    elif isinstance(s, N.Collective):
                        ok = ok and s.kind == "reduce"
                    if not ok:
                        bad.update(d)
                if isinstance(s, N.If):
                    c = ctl and is_uniform(s.cond, u)
                    visit(s.body, c)
                    visit(s.orelse, c)
                elif isinstance(s, (N.For, N.While)):
                    c = ctl and (is_uniform(s.cond, u) if isinstance(s, N.While) else
                                 all(is_uniform(x, u) for x in (s.start, s.stop, s.step)))
                    c = c and not _has_divergent_jump(s.body, u, inner_exits=False)
                    visit(s.body, c)
                elif isinstance(s, N.FuncBlock):      # (its own exits; those of functions it inlines end in it)
                    visit(s.body, ctl and not _has_divergent_jump(s.body, u, inner_exits=False))
        visit(body, True)
        if not (bad & u):
            return u
        u -= bad


def _error(loc: N.Loc, msg: str, kernel: str) -> CompileError:
    return N.error_at(msg, loc, kernel)


def _contains_sync(stmts) -> bool:
    return any(isinstance(s, (N.Barrier, N.Collective)) for s in N.walk_stmts(stmts))


def check_barriers(k: N.Kernel, u: set) -> None:
    """Raise CompileError for a barrier or collective that not every work item reaches."""
    def visit(stmts, why):
        for s in stmts:
            if isinstance(s, N.Assign) and isinstance(s.value, N.Call) and s.value.fn == "uniform" \
                    and why is not None:
                raise _error(s.loc, f"tk.uniform() is under non-uniform control flow (the condition on line "
                             f"{why.line} can differ between the work items of a group): every work item "
                             "must reach it", k.name)
            if isinstance(s, (N.Barrier, N.Collective)) and why is not None:
                what = "tk.synchronize()" if isinstance(s, N.Barrier) else f"tk.group_{s.kind.replace('ex', '')}()"
                raise _error(s.loc, f"{what} is under non-uniform control flow: the condition on line "
                             f"{why.line} can differ between the work items of a group, so not all of them "
                             "would reach the barrier", k.name)
            if isinstance(s, N.If):
                w = why if why is not None or is_uniform(s.cond, u) else s.loc
                visit(s.body, w)
                visit(s.orelse, w)
            elif isinstance(s, (N.For, N.While)):
                uni = is_uniform(s.cond, u) if isinstance(s, N.While) else all(
                    is_uniform(x, u) for x in (s.start, s.stop, s.step))
                w = why if why is not None or uni else s.loc
                if w is None and _contains_sync(s.body) and _has_divergent_jump(s.body, u, all_funcs=False):
                    jump = _first_divergent_jump(s.body, u)
                    what = "return" if isinstance(jump, N.FuncExit) else \
                        "while condition" if getattr(jump, "test", False) else "break/continue"
                    raise _error(jump.loc, f"this {what} depends on the work item, but its loop "
                                 "contains tk.synchronize(): every work item must run the same iterations", k.name)
                visit(s.body, w)
            elif isinstance(s, N.FuncBlock):
                visit(s.body, why)
    visit(k.body, None)


def _first_divergent_jump(stmts, u):
    """The first jump ``_has_divergent_jump(..., all_funcs=False)`` finds (the same walk)."""
    def visit(ss, uniform):
        for s in ss:
            if isinstance(s, (N.Break, N.Continue, N.FuncExit)) and not uniform:
                return s
            if isinstance(s, N.If):
                c = uniform and is_uniform(s.cond, u)
                r = visit(s.body, c) or visit(s.orelse, c)
                if r:
                    return r
            elif isinstance(s, N.FuncBlock) and _contains_sync(s.body):
                r = visit(s.body, uniform)
                if r:
                    return r
        return None
    return visit(stmts, True)
