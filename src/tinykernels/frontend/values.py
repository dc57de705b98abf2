"""The frontend's compile-time values besides IR expressions: what a name or call can stand
for while a kernel is lowered (shared by ``lower.py`` and ``intrinsics.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as D
from ..dtypes import Ty
from ..ir import nodes as N


@dataclass
class DTypeVal:
    dtype: D.DType


@dataclass
class PyObj:
    obj: object


@dataclass
class FuncBinding:
    """A scalar parameter of an inlined function or a kernel-level local (``at``: the Name
    node of a read, for error locations)."""
    var: str
    at: object = None


@dataclass
class FlowBound:
    """A name that an ``if``/``else`` branch or a loop body bound to a compile-time value (an
    array, a dtype, a Python object) that not every path to here agrees on: reading it is a
    CompileError (``lower.Lowerer.flow_merge``)."""
    name: str
    loc: N.Loc


class NoValue(N.Expr):
    """The result of a call that returns nothing (a @tk.func without ``return value``,
    ``tk.print``, ``tk.synchronize``, ...); ``what`` names the call for the CompileError when
    the result is used as a value (``lower.Lowerer.as_expr``)."""

    def __init__(self, loc, what: str = "this call"):
        super().__init__(Ty(D.bool_), loc)
        self.what = what
