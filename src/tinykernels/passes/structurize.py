"""Jump elimination: ``break``, ``continue``, early ``return`` and ``@tk.func`` exits become
flags, and ``for`` loops become ``while`` loops with an explicit counter.

The result has only ``if`` and ``while`` as control flow, which is what the autodiff pass
needs to reverse a kernel (and what a language without ``goto``, such as WGSL, needs).
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtypes as D
from ..dtypes import Ty
from ..ir import nodes as N

_B = Ty(D.bool_)


def _const(v, ty, loc):
    return N.Const(ty, loc, v)


def _not(e: N.Expr) -> N.Expr:
    return N.Unary(_B, e.loc, "not", e)


def _and(a: N.Expr, b: N.Expr) -> N.Expr:
    return N.BinOp(_B, a.loc, "and", a, b)


def _var(name, ty, loc):
    return N.Var(ty, loc, name)


class _Flags:
    """Fresh flag variables; ``locals`` collects their types."""

    def __init__(self, locals_: dict):
        self.locals = locals_
        self.n = 0

    def new(self, base: str, ty: Ty = _B) -> str:
        self.n += 1
        name = f"_s{self.n}_{base}"
        self.locals[name] = ty
        return name


def _jumps(stmts, kinds) -> bool:
    """Whether a jump of one of ``kinds`` occurs in ``stmts`` (not inside nested loops for
    break/continue)."""
    for s in stmts:
        if isinstance(s, kinds):
            return True
        if isinstance(s, (N.For, N.While)):
            if N.Return in kinds and any(isinstance(x, N.Return) for x in N.walk_stmts(s.body)):
                return True
            if N.FuncExit in kinds and any(isinstance(x, N.FuncExit) for x in N.walk_stmts(s.body)):
                return True
            continue
        if _jumps(list(getattr(s, "body", [])) + list(getattr(s, "orelse", [])), kinds):
            return True
    return False


def structurize(k: N.Kernel) -> N.Kernel:
    """A copy of ``k`` without break/continue/return/FuncExit and with for loops as whiles."""
    locals_ = dict(k.locals)
    fl = _Flags(locals_)
    ret = fl.new("ret") if any(isinstance(s, N.Return) for s in N.walk_stmts(k.body)) else None
    loc = k.body[0].loc if k.body else N.NOLOC
    body = _block(k.body, fl, {"ret": ret, "brk": None, "cnt": None, "exits": {}})
    if ret:
        body = [N.Assign(loc, ret, _const(False, _B, loc))] + body
    return replace(k, body=body, locals=locals_)


def _flag_test(ctx) -> N.Expr | None:
    """The condition under which execution continues (no pending jump)."""
    conds = []
    for key in ("ret", "brk", "cnt"):
        if ctx[key]:
            conds.append(ctx[key])
    conds += list(ctx["exits"].values())
    return conds


def _guard(rest: list, flags: list, loc) -> list:
    if not rest or not flags:
        return rest
    cond = None
    for f in flags:
        c = _not(_var(f, _B, loc))
        cond = c if cond is None else _and(cond, c)
    return [N.If(loc, cond, rest, [])]


def _block(stmts, fl, ctx) -> list:
    out = []
    for idx, s in enumerate(stmts):
        new = _stmt(s, fl, ctx)
        out.extend(new)
        if _may_jump(s, ctx):
            rest = _block(stmts[idx + 1:], fl, ctx)
            out.extend(_guard(rest, _flag_test(ctx), s.loc))
            return out
    return out


def _may_jump(s, ctx) -> bool:
    """Whether executing ``s`` may leave a jump pending in this context."""
    kinds = (N.Return, N.FuncExit) + ((N.Break,) if ctx["brk"] else ()) + ((N.Continue,) if ctx["cnt"] else ())
    if isinstance(s, kinds):
        return True
    if isinstance(s, (N.For, N.While)):
        return _jumps(s.body, (N.Return, N.FuncExit))
    return _jumps(list(getattr(s, "body", [])) + list(getattr(s, "orelse", [])), kinds)


def _set(flag, loc) -> N.Stmt:
    return N.Assign(loc, flag, _const(True, _B, loc))


def _stmt(s, fl, ctx) -> list:
    loc = s.loc
    if isinstance(s, N.Return):
        return [_set(ctx["ret"], loc)]
    if isinstance(s, N.Break):
        return [_set(ctx["brk"], loc)]
    if isinstance(s, N.Continue):
        return [_set(ctx["cnt"], loc)]
    if isinstance(s, N.FuncExit):
        return [_set(ctx["exits"][s.label], loc)]
    if isinstance(s, N.If):
        return [N.If(loc, s.cond, _block(s.body, fl, ctx), _block(s.orelse, fl, ctx))]
    if isinstance(s, N.FuncBlock):
        flag = fl.new("exit")
        inner = dict(ctx, exits=dict(ctx["exits"], **{s.label: flag}))
        return [N.Assign(loc, flag, _const(False, _B, loc))] + _block(s.body, fl, inner)
    if isinstance(s, N.For):
        return _for(s, fl, ctx)
    if isinstance(s, N.While):
        return _while(loc, s.cond, s.body, [], fl, ctx)
    return [s]


def _while(loc, cond, body, step, fl, ctx) -> list:
    """``while cond: body; step`` with break/continue/return turned into flags."""
    has_brk = _jumps(body, (N.Break,))
    has_cnt = _jumps(body, (N.Continue,))
    brk = fl.new("brk") if has_brk else None
    cnt = fl.new("cnt") if has_cnt else None
    inner = dict(ctx, brk=brk, cnt=cnt)
    pre = []
    if brk:
        pre.append(N.Assign(loc, brk, _const(False, _B, loc)))
    new_body = []
    if cnt:
        new_body.append(N.Assign(loc, cnt, _const(False, _B, loc)))
    new_body += _block(body, fl, inner)
    if step:
        # the loop step runs after a continue too, but not after a break or a return
        stop = [f for f in (brk, ctx["ret"], *ctx["exits"].values()) if f]
        new_body += _guard(step, stop, loc)
    full = cond
    for f in (brk, ctx["ret"], *ctx["exits"].values()):
        if f and (f == brk or _jumps(body, (N.Return, N.FuncExit))):
            full = _and(_not(_var(f, _B, loc)), full)
    return pre + [N.While(loc, full, new_body)]


def _for(s: N.For, fl, ctx) -> list:
    """``for v in range(a, b, c)``: a hidden counter, bounds evaluated once, v assigned each time."""
    loc = s.loc
    t = s.start.ty
    it, stop, step = fl.new("it", t), fl.new("stop", t), fl.new("step", t)
    pre = [N.Assign(loc, stop, s.stop), N.Assign(loc, step, s.step), N.Assign(loc, it, s.start)]
    vi, vstop, vstep = _var(it, t, loc), _var(stop, t, loc), _var(step, t, loc)
    if isinstance(s.step, N.Const):
        cond = N.Compare(_B, loc, "<" if s.step.value > 0 else ">", vi, vstop)
    else:
        zero = _const(0, t, loc)
        cond = N.Select(_B, loc, N.Compare(_B, loc, ">", vstep, zero),
                        N.Compare(_B, loc, "<", vi, vstop), N.Compare(_B, loc, ">", vi, vstop))
    body = [N.Assign(loc, s.var, vi)] + list(s.body)
    incr = [N.Assign(loc, it, N.BinOp(t, loc, "+", vi, vstep))]
    return pre + _while(loc, cond, body, incr, fl, ctx)
