"""IR nodes: typed expressions and structured statements, each with a source location.

Expressions carry a :class:`~tinykernels.dtypes.Ty`. Arrays are not values: loads, stores
and atomics name an :class:`ArrayInfo`. Control flow is structured (if, for, while, break,
continue, return); ``FuncExit`` jumps to the end of an inlined ``@tk.func`` body.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import DType, Ty, weak_int_ty
from ..errors import CompileError


@dataclass(frozen=True)
class Loc:
    """A position in the user's Python source; in an inlined ``@tk.func``, ``func`` names the
    function and ``caller`` is the location of its call (itself in a func or the kernel)."""
    file: str
    line: int
    col: int = 0
    caller: Loc | None = None
    func: str = ""


NOLOC = Loc("<tinykernels>", 0, 0)


def call_chain(loc: Loc) -> str:
    """The call sites that led to ``loc`` when it is in an inlined ``@tk.func`` (empty in the
    kernel's own body): `` (in @tk.func 'f', called at k.py:11)``, outermost last."""
    parts = []
    while loc.caller is not None:
        parts.append(f"in @tk.func '{loc.func}', called at {loc.caller.file}:{loc.caller.line}")
        loc = loc.caller
    return f" ({'; '.join(parts)})" if parts else ""


def site_text(loc: Loc) -> str:
    """``file:line`` of ``loc``, followed by its call chain: what an error message names."""
    return f"{loc.file}:{loc.line}{call_chain(loc)}"


def error_at(msg: str, loc: Loc | None, kernel: str | None, file: str | None = None) -> CompileError:
    """A CompileError at ``loc`` with its source line (in an inlined ``@tk.func``: its file and
    line, the call chain after the message), or in ``file`` where ``loc`` has no line."""
    if loc is None or not loc.line:
        return CompileError(msg, file if file is not None or loc is None else loc.file, None, None, None,
                            kernel=kernel)
    return CompileError(msg + call_chain(loc), loc.file, loc.line, loc.col,
                        linecache.getline(loc.file, loc.line) or None, kernel=kernel)


def site_id(k: Kernel, loc: Loc) -> int:
    """The number a debug kernel records for an access at ``loc``: its index in ``k.sites``
    (added on first use; passes share the list, so the host decodes it from the IR it holds)."""
    try:
        return k.sites.index(loc)
    except ValueError:
        k.sites.append(loc)
        return len(k.sites) - 1


@dataclass
class ArrayInfo:
    """An array visible in the kernel: an argument, ``localmem`` or ``private``."""
    name: str
    dtype: DType
    ndim: int
    space: str = "global"        # global | local | private
    const: bool = False
    contiguous: bool = True
    shape: tuple = ()            # static shape for local / private arrays
    label: str = field(default="", compare=False)   # local / private: the kernel's variable name


def debug_name(a: ArrayInfo) -> str:
    """An array's entry in the debug-mode table of array names: a global array's parameter
    name; a local or private array's ``@<space> array '<variable>'`` (``@``, which no Python
    name holds, marks it; :func:`debug_phrase` turns either into the phrase an IndexError names)."""
    if a.space == "global":
        return a.name
    return f"@{a.space} array" + (f" '{a.label}'" if a.label else "")


OOB_UNSIGNED = 256   # debug buffers' ``nd`` word: bit ``OOB_UNSIGNED << d`` marks slot d's index as a
#                      32-bit unsigned value stored in a signed 32-bit slot (WebGPU)


def debug_phrase(name: str) -> str:
    """The words an out-of-bounds message uses for a :func:`debug_name` entry:
    ``array 'a'`` or ``local array 's'``."""
    return name[1:] if name.startswith("@") else f"array '{name}'"


# ----------------------------------------------------------------------------- expressions

@dataclass
class Expr:
    ty: Ty
    loc: Loc


@dataclass
class Const(Expr):
    value: Any

    def __post_init__(self):
        # a Python int's run-time type follows its value (docs/language.md, "Python ints"): one
        # in [2**63, 2**64) is a weak uint64 wherever it was made (a literal, a folded constant)
        if self.ty is not None and self.ty.weak and self.ty.dtype.kind == "i" and type(self.value) is int:
            self.ty = weak_int_ty(self.value, self.ty)


@dataclass
class Var(Expr):
    name: str


@dataclass
class Arg(Expr):
    """A scalar kernel argument."""
    name: str


@dataclass
class Load(Expr):
    array: ArrayInfo
    index: list


@dataclass
class Shape(Expr):
    """``A.shape[dim]`` of an array argument (a runtime value)."""
    array: ArrayInfo
    dim: int


@dataclass
class BinOp(Expr):
    op: str        # + - * / // % ** << >> & | ^ and or
    a: Expr
    b: Expr


@dataclass
class Unary(Expr):
    op: str        # - ~ not
    a: Expr


@dataclass
class Compare(Expr):
    op: str        # < <= > >= == !=
    a: Expr
    b: Expr


@dataclass
class Select(Expr):
    """``a if cond else b`` (only the chosen side is evaluated)."""
    cond: Expr
    a: Expr
    b: Expr


@dataclass
class Cast(Expr):
    a: Expr


@dataclass
class Call(Expr):
    """A math or helper function: ``fn`` is a language-neutral name such as ``exp``. ``clamp``
    marks the ``min``/``max`` that ``tk.clamp`` is made of: their derivative gives a tie to the
    clamped value (PyTorch's and Warp's ``clamp``), not half to each argument."""
    fn: str
    args: list
    clamp: bool = False


@dataclass
class Index(Expr):
    """Work-item geometry: ``kind`` in global_linear, global (abs coordinate), global_pos
    (0-based position in the ndrange), local_linear, local, group_linear, group, ndrange,
    groupsize, ngroups; ``dim`` selects a dimension where it applies."""
    kind: str
    dim: int = 0


@dataclass
class Atomic(Expr):
    op: str        # add sub min max and or xor exchange cas
    array: ArrayInfo
    index: list
    args: list


# ----------------------------------------------------------------------------- statements

@dataclass
class Stmt:
    loc: Loc


@dataclass
class Assign(Stmt):
    var: str
    value: Expr


@dataclass
class Store(Stmt):
    array: ArrayInfo
    index: list
    value: Expr


@dataclass
class ExprStmt(Stmt):
    expr: Expr


@dataclass
class If(Stmt):
    cond: Expr
    body: list
    orelse: list = field(default_factory=list)


@dataclass
class For(Stmt):
    """``for var in range(start, stop, step)``; the counter is hidden, ``var`` is assigned."""
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: list


@dataclass
class While(Stmt):
    cond: Expr
    body: list


@dataclass
class Break(Stmt):
    #: the break of ``while True: <test>; if not cond: break`` (a while condition with statements)
    test: bool = False


@dataclass
class Continue(Stmt):
    pass


@dataclass
class Return(Stmt):
    """Return from the kernel (this work item is done)."""


@dataclass
class FuncBlock(Stmt):
    """The inlined body of a ``@tk.func``; ``FuncExit`` jumps past its end.

    ``intrinsic`` (a :class:`ByteDot`, :class:`HalfLoad`, :class:`NibbleLookup` or :class:`ByteLoad`, else None) marks a body that is the reference
    expansion of a block-level intrinsic: a renderer may replace the whole block by its own
    lowering of it; every other pass and renderer runs the body. A pass that rebuilds the
    block without the field falls back to the body, which is always correct."""
    label: str
    body: list
    intrinsic: Any = None


@dataclass
class ByteDot:
    """``tk.dot_i8`` / ``tk.dot_u4i8``: ``n`` byte products of ``a`` from ``i`` and ``b`` from
    ``j`` summed in groups of four into the int32 lanes ``out[0 .. n / 4 - 1]``. ``i`` and
    ``j`` are lists of locals (an element's index, assigned before the block; the bytes run
    along the last dimension); ``kind`` is ``i8`` (signed bytes times
    signed bytes) or ``u4i8`` (``n / 2`` bytes of 4-bit unsigned values times signed bytes)."""
    kind: str
    out: ArrayInfo
    a: ArrayInfo
    i: list
    b: ArrayInfo
    j: list
    n: int
    scale: Any = None     # a float32 local: out is float32, out[l] = fma(float32(lane), scale, out[l])
    zero: int = 0         # u4i8: subtracted from each 4-bit value
    start: Any = None     # (int32 ArrayInfo, [index local]): lane l starts at c[k + l], else 0
    scale_at: Any = None  # (private float32 ArrayInfo, [index local]) when scale was read from it, else None


@dataclass
class HalfLoad:
    """``tk.load_halves``: ``n`` IEEE float16 values stored little-endian in the bytes of ``a``,
    value ``t`` in the two bytes ``stride * t`` elements after ``a[i]`` along the last
    dimension, exactly as float32 into ``out[0 .. n - 1]``. ``i`` is a list of locals (an
    element's index, assigned before the block)."""
    out: ArrayInfo
    a: ArrayInfo
    i: list
    n: int
    stride: int


@dataclass
class NibbleLookup:
    """``tk.lookup_u4``: the ``2 n`` 4-bit values in the ``n`` bytes from ``a[i]`` along the
    last dimension (value ``k < n`` the low nibble of byte ``k``, value ``k + n`` its high
    nibble), each replaced by ``table[value]`` (times ``scale``, a float32 local, when not
    None) into ``out[0 .. 2 n - 1]``. ``i`` is a list of locals (assigned before the block)."""
    out: ArrayInfo
    table: ArrayInfo
    a: ArrayInfo
    i: list
    n: int
    scale: Any = None


@dataclass
class ByteLoad:
    """``tk.load_i8``: the ``n`` bytes from ``a[i]`` along the last dimension as signed 8-bit
    integers converted to float32 (times ``scale``, a float32 local, when not None) into
    ``out[0 .. n - 1]``. ``i`` is a list of locals (assigned before the block)."""
    out: ArrayInfo
    a: ArrayInfo
    i: list
    n: int
    scale: Any = None


@dataclass
class FuncExit(Stmt):
    label: str


@dataclass
class Barrier(Stmt):
    pass


@dataclass
class AllocArray(Stmt):
    """Declare a ``localmem`` (shared by the group) or ``private`` array."""
    array: ArrayInfo


@dataclass
class Philox(Stmt):
    """Four Philox4x32-10 words into the uint32 locals ``outs``."""
    outs: list
    args: list


@dataclass
class Collective(Stmt):
    """``dst = group_reduce/scan(src, op)`` over the work items of the group."""
    kind: str      # reduce | scan | exscan
    op: str
    dst: str
    src: str
    ty: Ty


@dataclass
class Print(Stmt):
    parts: list    # str or Expr


@dataclass
class Kernel:
    """A fully typed, specialized kernel ready for passes and code generation."""
    name: str
    params: list                     # ("array", ArrayInfo) | ("scalar", name, Ty)
    body: list
    locals: dict                     # name -> Ty
    ndim: int                        # ndrange rank
    workgroup: tuple                 # static workgroup size
    unsafe_indices: bool = False
    idx32: bool = False
    debug: bool = False
    file: str = ""
    uses: set = field(default_factory=set)   # feature flags: barrier, localmem, collective, print, atomic, ...
    fastmath: bool = False           # @tk.kernel(fastmath=True): float reassociation and contraction allowed
    # (lo, hi) expressions: the body is one If whose condition is lo <= the last global
    # coordinate < hi; a renderer may run that range and the rest as separate loops
    peel_last: tuple | None = None
    sites: list = field(default_factory=list)   # debug mode: the Locs a kernel's error buffer numbers


def walk_stmts(stmts):
    """Yield every statement, depth first."""
    for s in stmts:
        yield s
        for attr in ("body", "orelse"):
            sub = getattr(s, attr, None)
            if sub:
                yield from walk_stmts(sub)


def child_exprs(e):
    """The direct sub-expressions of an expression."""
    if isinstance(e, (Load,)):
        return list(e.index)
    if isinstance(e, (BinOp, Compare)):
        return [e.a, e.b]
    if isinstance(e, (Unary, Cast)):
        return [e.a]
    if isinstance(e, Select):
        return [e.cond, e.a, e.b]
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Atomic):
        return list(e.index) + list(e.args)
    return []


def walk_expr(e):
    yield e
    for c in child_exprs(e):
        yield from walk_expr(c)


def stmt_exprs(s):
    """The expressions a statement evaluates directly (not in nested statements)."""
    if isinstance(s, Assign):
        return [s.value]
    if isinstance(s, Store):
        return list(s.index) + [s.value]
    if isinstance(s, ExprStmt):
        return [s.expr]
    if isinstance(s, (If, While)):
        return [s.cond]
    if isinstance(s, For):
        return [s.start, s.stop, s.step]
    if isinstance(s, Philox):
        return list(s.args)
    if isinstance(s, Print):
        return [p for p in s.parts if isinstance(p, Expr)]
    return []


def walk_exprs(stmts):
    """Yield every expression the statements evaluate, nested statements and sub-expressions
    included, depth first."""
    for s in walk_stmts(stmts):
        for e in stmt_exprs(s):
            yield from walk_expr(e)
