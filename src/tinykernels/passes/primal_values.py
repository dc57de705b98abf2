"""Named primal values for derivative formulas (reverse mode's partials).

A partial derivative refers to primal values: ``d (a * b) / d a`` is ``b``, ``d tanh(u) / d u``
is ``1 - tanh(u)**2``. Rendered as expressions, a chain of ``n`` operations in one statement
repeats each operand in every partial above it, so the adjoint's source grows as ``n**2``
(``sin(tanh(atan(... x ...)))``, Horner polynomials, long products). Here, as in NVIDIA Warp's
codegen, every primal value a formula needs is computed once into a named local (an SSA
value of the replay), and the formulas refer to the locals: the source grows as ``n``.

:meth:`PrimalValues.val` names a value the first time a formula asks for it, and with it every
float operation below it (post-order, so each operation is written once); later requests get
the local. Names are scoped like the statements that compute them: a value computed under a
condition (a select's branch) is visible only in blocks under the same condition
(:meth:`branch`, :meth:`nested`). A select's value is an ``if`` on its condition, so only the
chosen branch is evaluated, as in the primal (the other may read out of bounds). The arithmetic
is the primal's, operation for operation, as in the inlined formulas (docs/autodiff.md: the
gradients compared bit for bit with them).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

from ..ir import nodes as N
from .uniformity import is_uniform

_LEAVES = (N.Var, N.Const, N.Arg, N.Load, N.Index, N.Shape)


def is_leaf(e: N.Expr) -> bool:
    """Cheap to repeat: a variable, constant, argument, load, index or shape, or a cast or
    negation of one."""
    while isinstance(e, (N.Cast, N.Unary)):
        e = e.a
    return isinstance(e, _LEAVES)


def _has_side_effects(e: N.Expr) -> bool:
    return any(isinstance(x, N.Atomic) for x in N.walk_expr(e))


class PrimalValues:
    """The named values of one statement's expression (:meth:`reset` before each statement:
    the values belong to the program state in which the statement ran). ``b`` makes locals:
    ``fresh(base, ty) -> name``, ``var(name)``, ``assign(name, expr)``. Values uniform across
    a group (built from arguments, constants and the ``uniform`` locals only) stay inline: a
    uniform assignment is group-level code in a grouped kernel (passes/groups.py), which would
    split the item loop there and store the adjoints live across it per work item (the 2-D
    diffusion adjoint's ``dt * lam``, whose per-group scalar sums make it grouped)."""

    def __init__(self, b, uniform: set):
        self.b, self.uniform = b, uniform
        self.scope: dict = {}     # id(node) -> (node, Var, {which: scope entries of the branch})

    def reset(self) -> None:
        self.scope = {}

    def val(self, e: N.Expr, out: list) -> N.Expr:
        """``e``'s value: itself when cheap to repeat (or not a float, or with side effects),
        else a local computed by statements appended to ``out`` on the first request."""
        if not e.ty.dtype.is_float or is_leaf(e) or is_uniform(e, self.uniform):
            return e
        hit = self.scope.get(id(e))
        if hit is not None:
            return hit[1]
        if not isinstance(e, (N.BinOp, N.Unary, N.Cast, N.Call, N.Select)) or _has_side_effects(e):
            return e
        branches = {}
        if isinstance(e, N.Select):
            value, branches = self._select(e, out)
        else:
            value = self._rebuilt(e, out)
        name = self.b.fresh("v", e.ty)
        out.append(self.b.assign(name, value))
        var = self.b.var(name)
        self.scope[id(e)] = (e, var, branches)
        return var

    def _rebuilt(self, e: N.Expr, out: list) -> N.Expr:
        """``e`` with its float operands replaced by their values (named first)."""
        if isinstance(e, N.BinOp):
            return replace(e, a=self.val(e.a, out), b=self.val(e.b, out))
        if isinstance(e, (N.Unary, N.Cast)):
            return replace(e, a=self.val(e.a, out))
        return replace(e, args=[self.val(x, out) for x in e.args])

    def _select(self, e: N.Select, out: list) -> tuple:
        """(value, branch scopes) of a select: a plain select of its operands when neither
        needs statements, else a local set by an ``if`` on the condition whose branches name
        what the chosen operand needs."""
        stmts, values, scopes, outer = [], [], {}, self.scope
        for which, x in ((True, e.a), (False, e.b)):
            with self.nested() as inner:
                body: list = []
                values.append(self.val(x, body))
                stmts.append(body)
                scopes[which] = {k: v for k, v in inner().items() if k not in outer}
        if not stmts[0] and not stmts[1]:
            return replace(e, a=values[0], b=values[1]), {}
        name = self.b.fresh("v", e.ty)
        out.append(N.If(e.loc, e.cond, stmts[0] + [self.b.assign(name, values[0])],
                        stmts[1] + [self.b.assign(name, values[1])]))
        return self.b.var(name), scopes

    @contextmanager
    def nested(self):
        """A block under a condition: values named inside are forgotten after it. Yields a
        function returning the scope inside."""
        outer = self.scope
        self.scope = dict(outer)
        try:
            yield lambda: self.scope
        finally:
            self.scope = outer

    @contextmanager
    def branch(self, e: N.Select, which: bool):
        """A block that runs where select ``e`` chose operand ``which`` (True: ``e.a``): the
        values named for that operand when ``e`` itself was named are visible in it."""
        with self.nested():
            hit = self.scope.get(id(e))
            if hit is not None:
                self.scope.update(hit[2].get(which, {}))
            yield
