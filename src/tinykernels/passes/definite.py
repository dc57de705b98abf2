"""Definite assignment: every read of a local must be preceded by an assignment on every path.

Python raises ``UnboundLocalError`` when a local assigned only on some paths is read on
another; compiled code would read garbage. This must-analysis walks the structured IR once
(if/else, for/while with break/continue, kernel returns, inlined ``@tk.func`` bodies and
their early returns) with the set of locals assigned on every path, and raises a located
CompileError at the first read outside it. A loop body may run zero times, so what it
assigns is not definitely assigned after it, unless the trip count is a positive constant
(``range(4)``) or the loop is ``while True`` (left only through ``break``).
"""
from __future__ import annotations


from ..errors import CompileError
from ..ir import nodes as N
from .uniformity import defs

_UNREACHABLE = None      # the state after return/break/continue: every local counts as assigned


def _meet(states):
    live = [s for s in states if s is not _UNREACHABLE]
    if not live:
        return _UNREACHABLE
    out = live[0]
    for s in live[1:]:
        out = out & s
    return out


def _runs_at_least_once(s) -> bool:
    if isinstance(s, N.While):
        return isinstance(s.cond, N.Const) and bool(s.cond.value)
    vals = (s.start, s.stop, s.step)
    if not all(isinstance(v, N.Const) and isinstance(v.value, int) for v in vals) or s.step.value == 0:
        return False
    return len(range(s.start.value, s.stop.value, s.step.value)) > 0


class _Walk:
    def __init__(self, names: dict, kernel: str):
        self.names, self.kernel = names, kernel
        self.loops: list = []        # (breaks, continues) state lists of the enclosing loops
        self.exits: dict = {}        # FuncBlock label -> states at its FuncExits

    def error(self, var: N.Var) -> CompileError:
        shown = self.names.get(var.name, var.name)
        if shown.startswith("@func:"):
            msg = (f"the result of @tk.func '{shown[6:]}' is used here, but the function does not "
                   "return a value on every path")
        else:
            msg = (f"'{shown}' may be used before it is assigned: some path reaches this read without "
                   "assigning it (assign it before the if/loop, or in every branch)")
        loc = var.loc
        return N.error_at(msg, loc, self.kernel)

    def read(self, e: N.Expr, st) -> None:
        if st is _UNREACHABLE:
            return
        for x in N.walk_expr(e):
            if isinstance(x, N.Var) and x.name not in st:
                raise self.error(x)

    def block(self, stmts, st):
        for s in stmts:
            if st is _UNREACHABLE:
                return st
            st = self.stmt(s, st)
        return st

    def loop(self, s, st, entry):
        self.loops.append(([], []))
        end = self.block(s.body, entry)
        breaks, conts = self.loops.pop()
        after_iter = _meet([end] + conts)
        if _runs_at_least_once(s):
            return _meet(breaks + ([after_iter] if isinstance(s, N.For) else []))
        return _meet([st, after_iter] + breaks)

    def stmt(self, s, st):
        if isinstance(s, N.If):
            self.read(s.cond, st)
            return _meet([self.block(s.body, st), self.block(s.orelse, st)])
        if isinstance(s, N.For):
            for e in (s.start, s.stop, s.step):
                self.read(e, st)
            return self.loop(s, st, st | {s.var})
        if isinstance(s, N.While):
            self.read(s.cond, st)
            return self.loop(s, st, st)
        if isinstance(s, (N.Break, N.Continue)):
            self.loops[-1][0 if isinstance(s, N.Break) else 1].append(st)
            return _UNREACHABLE
        if isinstance(s, N.Return):
            return _UNREACHABLE
        if isinstance(s, N.FuncBlock):
            self.exits[s.label] = []
            end = self.block(s.body, st)
            return _meet([end] + self.exits.pop(s.label))
        if isinstance(s, N.FuncExit):
            self.exits.setdefault(s.label, []).append(st)
            return _UNREACHABLE
        if isinstance(s, N.Collective) and s.src not in st:
            raise self.error(N.Var(s.ty, s.loc, s.src))
        for e in N.stmt_exprs(s):
            self.read(e, st)
        d = defs(s)
        return st | set(d) if d else st


def check_definite_assignment(body: list, names: dict, kernel: str) -> None:
    """Raise CompileError at the first read of a local that is not assigned on every path to
    it. ``names`` maps IR local names to what the user wrote (``@func:NAME`` for the result
    of an inlined ``@tk.func``)."""
    _Walk(names, kernel).block(body, frozenset())
