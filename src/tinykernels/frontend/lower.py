"""Python AST to typed IR.

One :class:`Lowerer` pass walks the kernel (inlining ``@tk.func`` calls) and emits IR with
every expression typed by NumPy 2's rules. A local's type is the promotion of everything
assigned to it, so the pass runs to a fixed point: each run starts from the local types the
previous run found, until they no longer change.
"""
from __future__ import annotations

import ast
import dataclasses
import builtins
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from .. import dtypes as D
from .. import globalreads, lang
from ..dtypes import Ty
from ..errors import CompileError
from ..ir import nodes as N
from ..passes.definite import check_definite_assignment
from . import intrinsics as I
from .source import FuncSource, parse_function
from .values import DTypeVal, FlowBound, FuncBinding, PyObj, NoValue

#: NumPy ufuncs that have a ``math`` counterpart kernels can call (the hint for ``np.exp``).
_MATH_NAMES = frozenset("exp log log2 log10 log1p expm1 sqrt sin cos tan arcsin arccos arctan arctan2 sinh cosh "
                        "tanh floor ceil trunc fabs copysign hypot isnan isinf isfinite fmod power".split())


# ----------------------------------------------------------------------------- specs

@dataclass(frozen=True)
class ArraySpec:
    dtype: D.DType
    ndim: int
    contiguous: bool = True
    const: bool = False


@dataclass(frozen=True)
class ScalarSpec:
    ty: Ty


@dataclass(frozen=True)
class ConstexprSpec:
    value: object


@dataclass(frozen=True)
class LowerOptions:
    ndim: int                     # ndrange rank
    workgroup: tuple              # static workgroup size
    default_float: D.DType = D.float64
    default_int: D.DType = D.int64        # int32 on backends without 64-bit integers (WebGPU)
    unsafe_indices: bool = False
    fastmath: bool = False                # float reassociation/contraction allowed (codegen flags only)
    debug: bool = False
    idx32: bool = False
    kernel_name: str = ""
    allow_breakpoint: bool = False        # the interpreter's frontend check: pdb on a work item


_UNSUPPORTED = {
    ast.Try: "'try' statements", ast.With: "'with' statements", ast.ClassDef: "class definitions",
    ast.FunctionDef: "nested function definitions", ast.Lambda: "lambdas", ast.Global: "'global' statements",
    ast.Nonlocal: "'nonlocal' statements", ast.Delete: "'del' statements", ast.Raise: "'raise' statements",
    ast.Import: "imports",
    ast.ImportFrom: "imports", ast.ListComp: "list comprehensions", ast.GeneratorExp: "generators",
    ast.DictComp: "dict comprehensions", ast.SetComp: "set comprehensions", ast.Dict: "dicts",
    ast.List: "lists", ast.Set: "sets", ast.Slice: "slices", ast.Starred: "'*' unpacking",
    ast.Yield: "'yield' expressions", ast.YieldFrom: "'yield from' expressions", ast.Await: "'await' expressions",
    ast.JoinedStr: "f-strings", ast.Assert: "'assert' statements",
    ast.AsyncFunctionDef: "async functions", ast.AsyncFor: "'async for' loops", ast.AsyncWith: "'async with' statements",
    ast.Match: "'match' statements", ast.NamedExpr: "assignment expressions (':=')",
}
# What to do instead, for the unsupported constructs beginners reach for.
_NO_GLOBAL = ("; a kernel cannot change Python variables: pass the value as an argument and write results "
              "into an array argument (module-level ints, floats, bools and dtypes can be read as constants)")
_HINTS = {ast.Global: _NO_GLOBAL, ast.Nonlocal: _NO_GLOBAL}
# Python's spelling of the operators a kernel does not support, for the error messages.
_OP_TEXT = {ast.MatMult: "'@' (matrix multiplication)", ast.Is: "'is'", ast.IsNot: "'is not'", ast.In: "'in'",
            ast.NotIn: "'not in'"}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = "'try' statements"


def _run_time(b) -> bool:
    """Whether a binding is a run-time local (or a tuple of them): its value flows through the IR,
    so binding it on some paths only is the definite-assignment check's business."""
    if isinstance(b, tuple):
        return all(_run_time(x) for x in b)
    return b is None or isinstance(b, FuncBinding)


def _same_binding(a, b) -> bool:
    """Whether two bindings of a name stand for the same value on every path."""
    if a is b:
        return True
    if isinstance(a, FuncBinding) and isinstance(b, FuncBinding):
        return a.var == b.var
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_binding(x, y) for x, y in zip(a, b))
    if isinstance(a, DTypeVal) and isinstance(b, DTypeVal):
        return a.dtype == b.dtype
    return isinstance(a, PyObj) and isinstance(b, PyObj) and a.obj is b.obj


class _Frame:
    """Name bindings of one function body (the kernel or an inlined ``@tk.func``)."""

    def __init__(self, src: FuncSource, prefix: str, local_names: set, call: N.Loc | None = None,
                 func: str = ""):
        self.src, self.prefix, self.local_names = src, prefix, local_names
        self.call, self.func = call, func        # an inlined func's call site and name
        self.const_names = _single_top_level_names(src.tree)
        self.bind: dict = {}
        self.ret_vars: list | None = None
        self.ret_shape = None                    # the returned value's tuple nesting (see _flatten)
        self.ret_label: str | None = None
        self.loop_depth = 0
        self.param_copy: dict = {}               # a reassigned kernel parameter -> its local copy


def func_source(func: lang.Func) -> FuncSource:
    """The parsed source of a ``@tk.func`` (parsed once, cached on the function object)."""
    if func._src is None:
        func._src = parse_function(func.fn)
    return func._src


def _assigned_names(fdef: ast.FunctionDef) -> set:
    names = set()
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _single_top_level_names(fdef: ast.FunctionDef) -> set:
    """Locals stored exactly once, by an assignment at the top level of the function body: when
    the value is a compile-time constant, shapes may use them (``N = tk.groupsize()[0]`` then
    ``tk.localmem(A.dtype, (N, N + 1))``)."""
    counts: dict = {}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    top = set()
    for s in fdef.body:
        targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(s, ast.AnnAssign) else []
        for t in targets:
            for node in ast.walk(t):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    top.add(node.id)
    params = {a.arg for a in fdef.args.args}
    return {n for n in top if counts[n] == 1 and n not in params}


def _holds(d: D.DType, r: D.DType) -> bool:
    """Whether integer (or bool) type ``d`` represents every value of integer type ``r``."""
    if not d.is_int:
        return False
    if r.kind == "b":
        return True
    if d.kind == "u":
        return r.kind == "u" and d.bits >= r.bits
    return d.bits > r.bits or (r.kind == "i" and d.bits == r.bits)


def _counts_exactly(var: D.DType, rng: D.DType, bounds) -> bool:
    """Whether a ``range`` loop of type ``rng`` may count in its variable's type ``var`` (the
    codegen does): every value of ``rng`` fits in ``var``, or the bounds are constants that do."""
    if var == rng or _holds(var, rng):
        return True
    return var.is_int and all(isinstance(b, N.Const) and isinstance(b.value, (int, np.integer))
                              and not isinstance(b.value, bool) and D.fits(int(b.value), var) for b in bounds)


class Lowerer:
    """One typing pass over a kernel; see :func:`lower_kernel`."""

    def __init__(self, kernel_src: FuncSource, specs: dict, opts: LowerOptions, local_types: dict):
        self.ksrc, self.specs, self.opts = kernel_src, specs, opts
        self.prev = local_types            # types found by the previous pass
        self.types: dict = {}              # types assigned in this pass
        self.read_before: dict = {}        # locals read with no type yet -> their Loc
        self.counter = 0
        self.stack: list = []              # frames
        self.out: list = []                # current statement list
        self.uses: set = set()
        self.params: list = []
        self.calls: list = []              # func call stack, for recursion
        self.names: dict = {}              # IR local -> the user's name (for error messages)
        self.consts: dict = {}             # IR local -> its compile-time constant value (see note_const)

    # --- errors and helpers ---------------------------------------------------------

    @property
    def frame(self) -> _Frame:
        return self.stack[-1]

    def err(self, node, msg) -> CompileError:
        return self.frame.src.error(node, msg + N.call_chain(self.loc(node)), kernel=self.opts.kernel_name)

    def loc(self, node) -> N.Loc:
        """``node``'s location; in an inlined func, with the call site that inlined it."""
        loc = self.frame.src.loc(node)
        return loc if self.frame.call is None else dataclasses.replace(loc, caller=self.frame.call, func=self.frame.func)

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"_t{self.counter}_{base}"

    def emit(self, stmt) -> None:
        self.out.append(stmt)

    def block(self, stmts) -> list:
        saved, self.out = self.out, []
        self.stmts(stmts)
        body, self.out = self.out, saved
        return body

    def stmts(self, stmts) -> None:
        """Lower ``stmts`` into the current block, in order, up to the first one that leaves the
        block unconditionally (a ``return``, ``break`` or ``continue`` written there, or in a
        branch a compile-time condition chose, which s_If lowers into this block): Python never
        runs the statements after it, so they are not compiled, as the untaken side of a constant
        ``if`` is not (they may be code that cannot compile for this specialization). Until
        port23 they were lowered and then dropped, so an error in them (a float ``|``, an
        ``"or"`` reduction of floats after ``if op == 0: return ...`` in a func) failed the kernel."""
        for s in stmts:
            self.stmt(s)
            if self.out and isinstance(self.out[-1], _LEAVES_BLOCK):
                return

    def weak_float(self) -> Ty:
        return Ty(self.opts.default_float, True)

    def weak_int(self) -> Ty:
        return Ty(self.opts.default_int, True)

    @staticmethod
    def py_int(e: N.Const) -> bool:
        """Whether constant ``e`` is a Python int (weak; its N.Const type follows its value)."""
        return e.ty.weak and e.ty.dtype.is_int and type(e.value) is int

    # --- entry ------------------------------------------------------------------------

    def run(self) -> list:
        src = self.ksrc
        fdef = src.tree
        frame = _Frame(src, "", _assigned_names(fdef))
        self.stack.append(frame)
        args = fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.err(fdef, "kernels take plain positional parameters only (no defaults, *args or **kwargs)")
        for a in args.args:
            spec = self.specs[a.arg]
            dt = self.param_dtype(a)
            if isinstance(spec, ArraySpec):
                self.check_array_annotation(a, dt, spec.dtype)
                info = N.ArrayInfo(a.arg, spec.dtype, spec.ndim, "global", spec.const, spec.contiguous)
                frame.bind[a.arg] = info
                self.params.append(("array", info))
            elif isinstance(spec, ScalarSpec):
                arg = N.Arg(spec.ty, self.loc(a), a.arg)
                if a.arg in frame.local_names or dt is not None:
                    # a reassigned or dtype-annotated parameter becomes a local copy; `n: tk.int32`
                    # casts the argument, as the annotated assignment `n: tk.int32 = n` does
                    v = frame.param_copy[a.arg] = self.fresh(a.arg)
                    self.names[v] = a.arg
                    frame.bind[a.arg] = FuncBinding(v)
                    self.assign_var(v, arg if dt is None else self.cast(arg, Ty(dt), explicit=True), a)
                else:
                    frame.bind[a.arg] = arg
                self.params.append(("scalar", a.arg, spec.ty))
            else:
                frame.bind[a.arg] = self.py_value(spec.value, a)
                self.params.append(("constexpr", a.arg, spec.value))
        self.stmts(fdef.body)
        return self.out

    def param_dtype(self, a: ast.arg):
        """The dtype a kernel or @tk.func parameter is annotated with (``n: tk.int32``), else
        None (no annotation, ``tk.Const``, ``tk.constexpr`` or any other Python hint)."""
        if a.annotation is None:
            return None
        try:
            ann = self.expr(a.annotation)
        except CompileError:
            return None
        return ann.dtype if isinstance(ann, DTypeVal) else None

    def check_array_annotation(self, a: ast.arg, dt, got) -> None:
        """An array passed for a parameter annotated with a dtype must have that dtype."""
        if dt is not None and dt != got:
            raise self.err(a, f"parameter '{a.arg}' is annotated {dt.name} but receives an array "
                              f"of {got.name}; pass a {dt.name} array or remove the annotation")

    # --- locals -------------------------------------------------------------------------

    def var_ty(self, name: str, node) -> Ty:
        t = self.types.get(name) or self.prev.get(name)
        if t is None:
            self.read_before.setdefault(name, self.loc(node))
            return self.weak_int()
        return self.prev.get(name, t)

    def assign_var(self, name: str, value: N.Expr, node) -> None:
        if isinstance(value, NoValue):          # y = f() for a @tk.func f without a return value
            self.as_expr(value, node)
        old = self.types.get(name)
        t = value.ty if old is None else D.promote(old, value.ty, self.opts.default_float, self.opts.default_int)
        if old is not None and old.dtype.kind != "b" and t.dtype.kind == "b":
            t = old
        self.types[name] = t
        final = self.prev.get(name, t)
        self.emit(N.Assign(self.loc(node), name, self.cast(value, final)))

    def local_name(self, pyname: str) -> str:
        """The IR name of a local. Every name the compiler makes up starts with ``_`` (``_t3_x``,
        a func's ``_f2_f_x``, structurize's ``_s1_it``, autodiff's ``_ad4_g`` and ``_d_x``), so
        a local whose Python name starts with ``_`` gets ``_py`` in front (after a func's
        prefix too, whose own names the compiler makes up after it): a kernel with a local
        ``_s1_it`` or ``_d_v`` shared the variable of a loop's iterator or of ``v``'s adjoint
        until adx21 (a wrong gradient)."""
        copy = self.frame.param_copy.get(pyname)
        if copy is not None:     # the parameter's local copy: `n -= 1` in a loop wrote a local `n`
            return copy          # while the loop's condition read the copy (until adx21: no end)
        return self.frame.prefix + (f"_py{pyname}" if pyname.startswith("_") else pyname)

    # --- statements ---------------------------------------------------------------------

    def stmt(self, s) -> None:
        t = type(s)
        if t in _UNSUPPORTED:
            raise self.err(s, f"{_UNSUPPORTED[t]} are not supported in kernels{_HINTS.get(t, '')}")
        meth = getattr(self, "s_" + t.__name__, None)
        if meth is None:
            raise self.err(s, f"{t.__name__} statements are not supported in kernels")
        meth(s)

    def s_Pass(self, s):
        pass

    def s_Expr(self, s):
        if isinstance(s.value, ast.Constant):
            return  # a docstring, or `...` as a placeholder body: a no-op, as in Python
        v = self.expr(s.value, stmt=True)
        if isinstance(v, N.Expr) and not isinstance(v, (N.Const, N.Var, N.Arg, NoValue)):
            self.emit(N.ExprStmt(self.loc(s), v))

    def s_Assign(self, s):
        value = self.expr(s.value)
        for target in s.targets:
            self.assign_target(target, value, s)

    def s_AnnAssign(self, s):
        if s.value is None:
            raise self.err(s, "a declaration needs a value: write 'x: tk.float32 = 0'")
        ann = self.expr(s.annotation)
        value = self.expr(s.value)
        if isinstance(ann, DTypeVal):
            # `v: T = x` is `v = T(x)`: an explicit cast (wraps, rounds narrow intermediates)
            value = self.cast(self.as_expr(value, s.value), Ty(ann.dtype), explicit=True)
        self.assign_target(s.target, value, s)

    def s_AugAssign(self, s):
        op = I.BINOPS.get(type(s.op))
        if op is None:
            raise self.err(s, f"operator {_OP_TEXT.get(type(s.op), type(s.op).__name__)} is not supported in kernels")
        if isinstance(s.target, ast.Name):
            cur = self.expr(ast.Name(id=s.target.id, ctx=ast.Load(), lineno=s.lineno, col_offset=s.col_offset))
            self.assign_target(s.target, self.binop(op, cur, self.expr(s.value), s), s)
        elif isinstance(s.target, ast.Subscript):
            arr, idx = self.subscript_parts(s.target)
            cur = self.load(arr, idx, s.target)
            self.store(arr, idx, self.binop(op, cur, self.expr(s.value), s), s)
        else:
            raise self.err(s, "augmented assignment needs a name or an array element")

    def assign_target(self, target, value, node) -> None:
        if isinstance(target, ast.Name):
            self.bind_name(target.id, value, node)
        elif isinstance(target, ast.Tuple):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.err(node, f"cannot unpack into {len(target.elts)} names: the value is "
                               f"{'a tuple of ' + str(len(value)) if isinstance(value, tuple) else 'not a tuple'}")
            # evaluate the whole right-hand side first (``a, b = b, a`` swaps)
            value = tuple(self.snapshot(v, node) for v in value)
            for t, v in zip(target.elts, value):
                self.assign_target(t, v, node)
        elif isinstance(target, ast.Subscript):
            # Python evaluates the value before the target's index: an index with side effects
            # (a @tk.func's stores, an atomic) runs after the value has read memory
            out, mark = self.out, len(self.out)
            arr, idx = self.subscript_parts(target)
            if self.out is out and I._has_effects(self.out[mark:]) and _reads_memory(value):
                (value,) = self.hoist_reads(mark, [value], node)
            self.store(arr, idx, value, node)
        elif isinstance(target, ast.Attribute):
            raise self.err(target, "cannot assign to an attribute in a kernel")
        else:
            raise self.err(target, f"cannot assign to {type(target).__name__}")

    def in_order(self, nodes: list) -> list:
        """The operands ``nodes`` lowered left to right with Python's evaluation order kept:
        an operand with side effects (an atomic, or the stores, atomics and prints of an inlined
        @tk.func) runs after the operands before it have read memory, and exactly once. So
        before such an operand's statements, the operands before it that read arrays are copied
        to temporaries, and an operand that holds an atomic is itself copied to one (a renderer
        may repeat an operand's text: a shift's count, a chained comparison's middle operand;
        until port20, ``0 <= tk.atomic_add(c, 0, 2) < 1`` ran the atomic twice on the compiled
        backends, and ``c[0] + f(c)`` read ``c[0]`` after ``f``'s stores)."""
        vals = []
        for n in nodes:
            vals, v = self.then(vals, n)
            vals.append(v)
        return vals

    def then(self, before: list, n) -> tuple[list, object]:
        """One step of :meth:`in_order`: the operand ``n`` lowered after the values ``before``,
        and ``before`` again (copied to temporaries where ``n`` has side effects)."""
        out, mark = self.out, len(self.out)
        v = self.expr(n)
        emitted = self.out is out and I._has_effects(self.out[mark:])
        atomic = _holds_atomic(v)
        if (emitted or atomic) and any(_reads_memory(x) for x in before):
            before = self.hoist_reads(mark, before, n)
        if atomic:
            v = self.read_now(v, n)
        return before, v

    def hoist_reads(self, mark: int, values: list, node) -> list:
        """``values`` read into temporaries placed before the statements emitted since ``mark``
        (an operand's side effects), which then follow them."""
        pending = self.out[mark:]
        del self.out[mark:]
        values = [self.read_now(x, node) for x in values]
        self.out.extend(pending)
        return values

    def read_now(self, v, node):
        """``v`` with its array reads and atomics evaluated here, into temporaries (tuples element
        by element); anything else as it is."""
        if isinstance(v, tuple):
            return tuple(self.read_now(x, node) for x in v)
        if _reads_memory(v):
            return self.snapshot(v, node)
        return v

    def snapshot(self, v, node):
        """A value that later assignments cannot change: locals and loads go to a temporary."""
        if isinstance(v, FuncBinding) or (isinstance(v, N.Expr) and not isinstance(v, (N.Const, N.Arg, N.Index))):
            e = self.as_expr(v, node)
            t = self.fresh("tup")
            self.assign_var(t, e, node)
            c = I.compile_time_int(self, e)
            if isinstance(c, N.Const):     # a temporary assigned once: keep a known value known
                self.consts[t] = c
            return FuncBinding(t)
        return v

    def bind_name(self, name: str, value, node) -> None:
        fr = self.frame
        if isinstance(value, FuncBinding):
            value = self.as_expr(value, node)
        if isinstance(value, tuple):
            parts = []
            for k, v in enumerate(value):
                if isinstance(v, FuncBinding):
                    v = self.as_expr(v, node)
                if isinstance(v, N.Expr):
                    # not `name_k`, which a local of that name held too (until adx21)
                    vn = f"{self.frame.prefix}_tp{k}_{name}"
                    self.names[vn] = f"{name}[{k}]"
                    self.assign_var(vn, v, node)
                    self.note_const(name, vn, v)
                    parts.append(FuncBinding(vn))
                else:
                    parts.append(v)
            fr.bind[name] = tuple(parts)
        elif isinstance(value, (N.ArrayInfo, DTypeVal, PyObj)):
            if isinstance(value, N.ArrayInfo) and value.space != "global" and not value.label:
                value.label = name          # what debug messages call `s = tk.localmem(...)`
            fr.bind[name] = value
        elif isinstance(value, N.Expr):
            vn = self.local_name(name)
            self.names[vn] = name
            self.assign_var(vn, value, node)
            self.note_const(name, vn, value)
            fr.bind[name] = FuncBinding(vn)
        else:
            raise self.err(node, f"cannot assign {type(value).__name__} to a local")

    def note_const(self, name: str, vn: str, value: N.Expr) -> None:
        """Remember the value of a local assigned once, at the top level of its function, with
        a compile-time constant: shapes of localmem/private arrays may use it."""
        if name in self.frame.const_names:
            c = I.compile_time_int(self, value)
            if isinstance(c, N.Const):
                self.consts[vn] = c

    def s_If(self, s):
        cond = self.truth(self.expr(s.test), s.test)
        if isinstance(cond, N.Const):  # a compile-time condition: only the taken branch exists
            self.stmts(s.body if cond.value else s.orelse)
            return
        bind = self.frame.bind
        before = dict(bind)
        body = self.block(s.body)
        after_body = dict(bind)
        bind.clear()
        bind.update(before)                     # the else branch starts from the bindings before the if
        orelse = self.block(s.orelse)
        self.flow_merge([after_body, dict(bind)], s)
        self.emit(N.If(self.loc(s), cond, body, orelse))

    def flow_merge(self, branches: list, s) -> None:
        """The frame's bindings after an ``if`` (``branches``: the bindings at the end of each
        branch) or a loop (the bindings before it and at the end of its body). Arrays, dtypes and
        Python objects are bound when the kernel compiles, not at run time: a name that the paths
        bind to different ones (``p = tk.private(...)`` in a branch or a loop body, ``a = y`` on one
        path only) becomes a ``FlowBound``, whose reads are a CompileError (they read garbage in C,
        or the array bound last, where Python reads the one the path bound)."""
        bind = self.frame.bind
        bind.clear()
        for name in dict.fromkeys(n for br in branches for n in br):
            vals = [br.get(name) for br in branches]
            if all(_same_binding(vals[0], v) for v in vals[1:]) or all(_run_time(v) for v in vals):
                v = next((v for v in reversed(vals) if v is not None), None)
                if v is not None:
                    bind[name] = v
            else:
                bind[name] = FlowBound(name, self.loc(s))

    def loop_body(self, s) -> list:
        """A loop's body, lowered once for every iteration: a name bound to an array, dtype or
        Python object before the loop and rebound in the body would be the new one in later
        iterations (a CompileError); one first bound in the body cannot be read after the loop."""
        bind = self.frame.bind
        before = dict(bind)
        self.frame.loop_depth += 1
        body = self.block(s.body)
        self.frame.loop_depth -= 1
        for name, v in bind.items():
            old = before.get(name)
            if old is not None and not _run_time(old) and not _same_binding(old, v):
                raise self.err(s, f"'{name}' is bound to an array, dtype or Python object before this loop and "
                               "rebound inside it: the loop body is compiled once, so every iteration would "
                               "see one binding; use another name inside the loop")
        self.flow_merge([before, dict(bind)], s)
        return body

    def s_For(self, s):
        if s.orelse:
            raise self.err(s, "'for ... else' is not supported in kernels")
        it = s.iter
        if not (isinstance(it, ast.Call) and self.resolve_py(it.func) is builtins.range):
            raise self.err(s.iter, "kernels only loop over range(...)")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.err(s.iter, "range() takes 1 to 3 positional arguments")
        vals = [self.as_expr(self.expr(a), a) for a in it.args]
        for v, a in zip(vals, it.args):
            if not (v.ty.dtype.is_int or v.ty.dtype.kind == "b"):
                raise self.err(a, f"range() needs integers, got {v.ty}")
        if len(vals) == 1:
            vals = [N.Const(self.weak_int(), self.loc(s), 0), vals[0]]
        if len(vals) == 2:
            vals.append(N.Const(self.weak_int(), self.loc(s), 1))
        if isinstance(vals[2], N.Const) and vals[2].value == 0:
            raise self.err(s.iter, "range() step must not be zero")
        t = vals[0].ty
        for v in vals[1:]:
            t = D.promote(t, v.ty, self.opts.default_float, self.opts.default_int)
        start, stop, step = (self.cast(v, t) for v in vals)
        if not isinstance(s.target, ast.Name):
            raise self.err(s.target, "the loop variable must be a single name")
        name = self.local_name(s.target.id)
        self.names[name] = s.target.id
        old = self.types.get(name)
        self.types[name] = t if old is None else D.promote(old, t, self.opts.default_float, self.opts.default_int)
        final = self.prev.get(name, self.types[name])
        self.frame.bind[s.target.id] = FuncBinding(name)
        body = self.loop_body(s)
        loc = self.loc(s)
        if not _counts_exactly(final.dtype, t.dtype, (start, stop, step)):
            # the variable's type (the promotion of everything assigned to it, e.g. uint8 from an
            # earlier loop) is not range()'s: count in range()'s type, so the trip count is
            # Python's, and assign the variable each value converted (fuzz18 'for-var-retyped')
            ctr = self.fresh("for")
            self.types[ctr] = t
            body = [N.Assign(loc, name, self.cast(N.Var(t, loc, ctr), final))] + body
            name = ctr
        self.emit(N.For(loc, name, start, stop, step, body))

    def s_While(self, s):
        if s.orelse:
            raise self.err(s, "'while ... else' is not supported in kernels")
        saved, self.out = self.out, []
        cond = self.truth(self.expr(s.test), s.test)
        test, self.out = self.out, saved
        if not test and isinstance(cond, N.Const) and not cond.value:
            return      # `while <false constant>:` never runs its body, which is not compiled (as an if's)
        body = self.loop_body(s)
        loc = self.loc(s)
        if test:
            # the condition emitted statements (a @tk.func's body, an atomic, a chain's copy):
            # ``while True: <test>; if not cond: break; <body>``, so they run once per test and
            # a ``continue`` tests again
            leave = N.If(loc, N.Unary(Ty(D.bool_), loc, "not", self.strong_bool(cond)), [N.Break(loc, True)])
            body, cond = test + [leave] + body, N.Const(Ty(D.bool_), loc, True)
        self.emit(N.While(loc, cond, body))

    def s_Break(self, s):
        self.emit(N.Break(self.loc(s)))

    def s_Continue(self, s):
        self.emit(N.Continue(self.loc(s)))

    def s_Return(self, s):
        fr = self.frame
        # `return None` is a bare `return`, as in Python (until port20 a CompileError: in a kernel
        # "kernels cannot return a value", in a @tk.func "a value of type NoneType ...")
        given = None if isinstance(s.value, ast.Constant) and s.value.value is None else s.value
        if len(self.stack) == 1:
            if given is not None:
                raise self.err(s, "kernels cannot return a value; write results into an array")
            self.emit(N.Return(self.loc(s)))
            return
        value = self.expr(given) if given is not None else None
        if isinstance(value, NoValue):          # `return g(x)` of a g that returns nothing: g runs, then
            value = None                        # a bare return (Python returns None)
        vals, shape = _flatten(value) if value is not None else ([], ())
        if fr.ret_vars is None:
            fr.ret_vars = [self.fresh(f"ret{k}") for k in range(len(vals))]
            fr.ret_shape = shape
        if len(vals) != len(fr.ret_vars) or shape != fr.ret_shape:
            raise self.err(s, "every return of a @tk.func must return the same number of values")
        for name, v in zip(fr.ret_vars, vals):
            self.assign_var(name, self.as_expr(v, s), s)
        self.emit(N.FuncExit(self.loc(s), fr.ret_label))

    # --- stores and loads -----------------------------------------------------------------

    def subscript_parts(self, node):
        arr = self.expr(node.value)
        if not isinstance(arr, N.ArrayInfo):
            raise self.err(node, "only arrays can be indexed here")
        if isinstance(node.slice, ast.Slice) or (isinstance(node.slice, ast.Tuple) and
                                                 any(isinstance(e, ast.Slice) for e in node.slice.elts)):
            raise self.err(node, "slicing is not supported in kernels; index single elements")
        idx = self.expr(node.slice)
        idx = list(idx) if isinstance(idx, tuple) else [idx]
        return arr, self.indices(arr, idx, node)

    def indices(self, arr, idx: list, node) -> list:
        """The index values ``idx`` of an element of ``arr`` (a subscript, an atomic's index)
        as expressions: one per dimension, each an integer (or bool)."""
        # an atomic in an index runs once, before the access (a debug build's bounds check
        # repeats the index)
        idx = [self.as_expr(self.read_now(i, node) if _holds_atomic(i) else i, node) for i in idx]
        if len(idx) != arr.ndim:
            raise self.err(node, f"array '{arr.name}' has {arr.ndim} dimension(s) but {len(idx)} index(es) were given")
        for i in idx:
            if not (i.ty.dtype.is_int or i.ty.dtype.kind == "b"):
                raise self.err(node, f"array indices must be integers, got {i.ty}")
        return idx

    def load(self, arr, idx, node):
        return N.Load(Ty(arr.dtype), self.loc(node), arr, idx)

    def store(self, arr, idx, value, node) -> None:
        if arr.const:
            raise self.err(node, f"cannot write to '{arr.name}': it is read-only (tk.Const)")
        v = self.as_expr(value, node)
        self.emit(N.Store(self.loc(node), arr, idx, self.cast(v, Ty(arr.dtype))))

    # --- expressions -------------------------------------------------------------------------

    def as_expr(self, v, node) -> N.Expr:
        if isinstance(v, NoValue):
            raise self.err(node, f"{v.what} returns no value, so its result cannot be used here")
        if isinstance(v, N.Expr):
            return v
        if isinstance(v, FuncBinding):
            return N.Var(self.var_ty(v.var, node), self.loc(v.at if v.at is not None else node), v.var)
        if isinstance(v, N.ArrayInfo):
            raise self.err(node, f"array '{v.name}' used where a number is expected")
        if isinstance(v, tuple):
            raise self.err(node, "a tuple was used where a number is expected")
        if isinstance(v, DTypeVal):
            raise self.err(node, f"dtype {v.dtype.name} used where a number is expected")
        raise self.err(node, f"{getattr(v, 'obj', v)!r} cannot be used as a value in a kernel")

    def err_at(self, loc: N.Loc, msg: str) -> CompileError:
        return N.error_at(msg, loc, self.opts.kernel_name)

    def cast(self, e: N.Expr, t: Ty, explicit: bool = False) -> N.Expr:
        """``e`` converted to ``t``; an implicit conversion of a Python int that does not fit is
        an error (as NumPy's OverflowError), an explicit one (``tk.int8(200)``) wraps."""
        if not explicit and isinstance(e, N.Const) and e.ty.weak and e.ty.dtype.is_int and t.dtype.is_int \
                and isinstance(e.value, int) and not isinstance(e.value, bool):
            target = t.dtype if not t.weak else D.int64
            if not D.fits(e.value, target) and not (t.weak and D.fits(e.value, D.uint64)):
                raise self.err_at(e.loc, f"Python integer {e.value} is out of bounds for {target.name}")
        if explicit and t.dtype.is_storage_only and t.dtype == e.ty.dtype and not isinstance(e, (N.Load, N.Const)):
            return N.Cast(t, e.loc, e)      # tk.float16(x * y): the float32 intermediate rounds here
        if e.ty == t:
            return e
        if e.ty.dtype == t.dtype:
            if isinstance(e, N.Const):
                # a new node: constants may be shared. A weak float constant of a narrower type
                # than float64 (a Python float on a backend without float64: a weak float32)
                # still holds its Python value; the typed constant holds the rounded one, or a
                # comparison folded against it compares the unrounded value (port22: on WebGPU
                # tk.float32(3.1415927) > math.pi folded to True, NumPy: False)
                v = e.value
                if e.ty.weak and t.dtype.is_float and t.dtype != D.float64 and isinstance(v, float):
                    folded = I.fold_cast(v, t.dtype)
                    v = v if folded is None else folded
                return N.Const(t, e.loc, v)
            return N.Cast(t, e.loc, e)
        if isinstance(e, N.Const):
            folded = I.fold_cast(e.value, t.dtype)
            if folded is not None:
                return N.Const(t, e.loc, folded)
        return N.Cast(t, e.loc, e)

    @staticmethod
    def strong_bool(e: N.Expr) -> N.Expr:
        """``e`` (a bool) as a strong bool: ``and``/``or``/``not`` never give Python bools."""
        return dataclasses.replace(e, ty=Ty(D.bool_)) if e.ty.weak else e

    def truth(self, v, node) -> N.Expr:
        e = self.as_expr(v, node)
        if e.ty.dtype.kind == "b":
            return e
        if isinstance(e, N.Const):
            return N.Const(Ty(D.bool_), e.loc, bool(e.value))
        zero = N.Const(e.ty, e.loc, 0)
        return N.Compare(Ty(D.bool_), e.loc, "!=", e, zero)

    def expr(self, node, stmt=False):
        t = type(node)
        if t in _UNSUPPORTED:
            raise self.err(node, f"{_UNSUPPORTED[t]} are not supported in kernels")
        meth = getattr(self, "e_" + t.__name__, None)
        if meth is None:
            raise self.err(node, f"{t.__name__} expressions are not supported in kernels")
        return meth(node)

    def e_Constant(self, node):
        v = node.value
        return self.py_value(v, node)

    def py_value(self, v, node):
        loc = self.loc(node)
        if isinstance(v, (bool, np.bool_)):
            return N.Const(Ty(D.bool_, isinstance(v, bool)), loc, bool(v))
        if isinstance(v, int):
            return N.Const(self.weak_int(), loc, v)
        if isinstance(v, float):
            return N.Const(self.weak_float(), loc, v)
        if isinstance(v, np.generic):
            d = D.from_any(v.dtype)
            if d is not None:
                return N.Const(Ty(d), loc, v.item())
        if isinstance(v, str):
            return PyObj(v)
        if isinstance(v, tuple):
            return tuple(self.py_value(x, node) for x in v)
        d = D.from_any(v) if isinstance(v, (type, np.dtype, D.DType, D._MissingDType)) else None
        if d is not None:
            return DTypeVal(d)
        raise self.err(node, f"a value of type {type(v).__name__} cannot be used in a kernel")

    def e_Name(self, node):
        name = node.id
        for fr in (self.frame,):
            if name in fr.bind:
                b = fr.bind[name]
                if isinstance(b, FlowBound):
                    raise self.err(node, f"'{name}' is bound to an array, dtype or Python object inside an "
                                   f"if/else branch or loop body (line {b.loc.line}) that not every path to here "
                                   "goes through, or differently on different paths: such values are fixed when "
                                   "the kernel compiles; bind it once, before the if/loop, at the level where it "
                                   "is used")
                return FuncBinding(b.var, node) if isinstance(b, FuncBinding) else b
            if name in fr.local_names:
                vn = self.local_name(name)
                if vn not in self.types and fr.loop_depth == 0:
                    raise self.err(node, f"local variable '{name}' is used before it is assigned")
                return FuncBinding(vn, node) if (vn in self.types or vn in self.prev) else self._unbound(node, name)
        return self.global_value(node, name)

    def _unbound(self, node, name):
        vn = self.local_name(name)
        self.read_before.setdefault(vn, self.loc(node))
        return FuncBinding(vn, node)

    def lookup_global(self, name):
        fn = self.frame.src.fn
        closure = getattr(fn, "__closure__", None)
        code = getattr(fn, "__code__", None)
        if closure and code and name in code.co_freevars:
            cell = closure[code.co_freevars.index(name)]
            try:
                value = cell.cell_contents
            except ValueError:
                return False, None
            _note_read(cell, None, value)
            return True, value
        g = getattr(fn, "__globals__", {})
        if name in g:
            _note_read(g, name, g[name])
            return True, g[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None

    def no_array(self, node, obj):
        """``obj`` (a global, a module's attribute), or a CompileError when it is an array:
        arrays are arguments, never compile-time constants (not even their shape or size)."""
        if not isinstance(obj, (type, np.generic)) and (isinstance(obj, np.ndarray) or hasattr(obj, "__array_interface__")
                                          or hasattr(obj, "__dlpack__")):
            what = "NumPy array" if isinstance(obj, np.ndarray) else f"array ({type(obj).__name__})"
            raise self.err(node, f"a global {what} cannot be used in a kernel (globals must be ints, floats, "
                                 "bools or dtypes); pass the array as an argument")
        return obj

    def global_value(self, node, name):
        found, obj = self.lookup_global(name)
        if not found:
            raise self.err(node, f"name '{name}' is not defined")
        self.no_array(node, obj)
        if isinstance(obj, (bool, int, float, np.generic, tuple)) and not isinstance(obj, type):
            return self.py_value(obj, node)      # (a tuple of them: indexed with constants, unpacked)
        d = D.from_any(obj) if isinstance(obj, (type, np.dtype, D.DType, D._MissingDType)) and obj not in (int, float, bool) else None
        if d is not None:
            return DTypeVal(d)
        return PyObj(obj)

    def resolve_py(self, node):
        """The Python object an expression like ``tk.random.uniform`` names, or None."""
        try:
            if isinstance(node, ast.Name):
                if node.id in self.frame.bind or node.id in self.frame.local_names:
                    b = self.frame.bind.get(node.id)
                    return b.obj if isinstance(b, PyObj) else None
                found, obj = self.lookup_global(node.id)
                return obj if found else None
            if isinstance(node, ast.Attribute):
                base = self.resolve_py(node.value)
                return getattr(base, node.attr, None) if base is not None else None
        except Exception:
            return None
        return None

    def e_Attribute(self, node):
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, N.ArrayInfo):
            return self.array_attr(base, attr, node)
        if isinstance(base, PyObj):
            if not hasattr(base.obj, attr):
                raise self.err(node, f"{getattr(base.obj, '__name__', base.obj)!r} has no attribute '{attr}'")
            obj = self.no_array(node, getattr(base.obj, attr))
            if isinstance(base.obj, ModuleType) and base.obj.__name__.partition(".")[0] not in _FIXED_MODULES:
                _note_read(vars(base.obj), attr, obj)      # cfg.BLOCK of a user's module: checked too
            if isinstance(obj, (bool, int, float)) and not isinstance(obj, type):
                return self.py_value(obj, node)
            d = D.from_any(obj) if isinstance(obj, (type, np.dtype, D.DType, D._MissingDType)) and obj not in (int, float, bool) else None
            return DTypeVal(d) if d is not None else PyObj(obj)
        if isinstance(base, DTypeVal) and attr in ("itemsize",):
            return N.Const(self.weak_int(), self.loc(node), base.dtype.itemsize)
        raise self.err(node, f"attribute '{attr}' is not supported here")

    def array_attr(self, arr, attr, node):
        loc = self.loc(node)
        if attr == "shape":
            return tuple(self.shape_of(arr, k, loc) for k in range(arr.ndim))
        if attr == "ndim":
            return N.Const(self.weak_int(), loc, arr.ndim)
        if attr == "dtype":
            return DTypeVal(arr.dtype)
        if attr == "size":
            parts = [self.shape_of(arr, k, loc) for k in range(arr.ndim)]
            v = parts[0] if parts else N.Const(self.weak_int(), loc, 1)
            for p in parts[1:]:
                v = self.binop("*", v, p, node)
            return v
        raise self.err(node, f"arrays have no attribute '{attr}' in kernels (use shape, ndim, size, dtype)")

    def shape_of(self, arr, k, loc):
        if arr.space != "global":
            return N.Const(self.weak_int(), loc, arr.shape[k])
        return N.Shape(self.weak_int(), loc, arr, k)

    def e_Subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base, tuple) and isinstance(node.slice, ast.Slice):
            # a constant slice of a tuple (`n, m = A.shape[-2:]`), as Python slices it
            parts = []
            for part in (node.slice.lower, node.slice.upper, node.slice.step):
                v = None if part is None else self.expr(part)
                if v is not None and not (isinstance(v, N.Const) and isinstance(v.value, int)
                                          and not isinstance(v.value, bool)):
                    raise self.err(node, "a tuple can only be sliced with constant integers (A.shape[1:], I[-2:])")
                parts.append(None if v is None else v.value)
            if parts[2] == 0:
                raise self.err(node, "slice step cannot be zero")
            return base[slice(*parts)]
        if isinstance(base, tuple):
            k = self.expr(node.slice)
            if not (isinstance(k, N.Const) and isinstance(k.value, int)):
                raise self.err(node, "tuples can only be indexed with a constant integer")
            try:
                return base[k.value]
            except IndexError:
                raise self.err(node, f"tuple index {k.value} out of range (length {len(base)})") from None
        arr, idx = self.subscript_parts(node)
        return self.load(arr, idx, node)

    def e_Tuple(self, node):
        return tuple(self.in_order(list(node.elts)))

    def e_BinOp(self, node):
        op = I.BINOPS.get(type(node.op))
        if op is None:
            raise self.err(node, f"operator {_OP_TEXT.get(type(node.op), type(node.op).__name__)} is not supported "
                                 "in kernels")
        return self.binop(op, *self.in_order([node.left, node.right]), node)

    def binop(self, op, a, b, node) -> N.Expr:
        a, b = self.as_expr(a, node), self.as_expr(b, node)
        df = self.opts.default_float
        if op in ("<<", ">>", "&", "|", "^"):
            t = D.promote(a.ty, b.ty, df, self.opts.default_int)
            if t.dtype.is_float:
                raise self.err(node, f"operator {op} needs integers, got {a.ty} and {b.ty}")
        elif op == "/":
            t = D.true_divide_type(D.promote(a.ty, b.ty, df, self.opts.default_int), df)
        else:
            t = D.promote(a.ty, b.ty, df, self.opts.default_int)
        if t.dtype.kind == "b":
            if op == "-" and not t.weak:
                raise self.err(node, "'-' is not defined for bools (as in NumPy); use ^ or 'a != b'")
            if t.weak and op in ("+", "-", "*", "<<", ">>", "**", "//", "%"):
                t = Ty(self.opts.default_int, True)          # Python bools are ints: True + True == 2
            elif op in ("<<", ">>", "**", "//", "%"):
                t = Ty(D.int8)             # NumPy has no bool loop for these: bools compute as int8
        if isinstance(a, N.Const) and isinstance(b, N.Const) and t.weak and t.dtype.is_int:
            if op == "**" and isinstance(b.value, int) and b.value < 0 and isinstance(a.value, int):
                # two Python ints: Python's `2 ** -3` is the float 0.125 (`x[i] + 10 ** -6` adds
                # 1e-6; until audit user23 both were the run-time integer power: 0)
                try:
                    return N.Const(self.weak_float(), self.loc(node), float(a.value ** b.value))
                except (ArithmeticError, ValueError) as e:
                    raise self.err(node, f"{a.value} ** {b.value} in a constant expression: {e} "
                                         "(constants fold with Python's arithmetic)") from None
            v = I.fold_binop(op, a.value, b.value, t)      # Python ints: exact, any size
            if v is not None:      # a Python int, typed by its value (2**64 - 2**63 is a weak int64)
                return N.Const(self.weak_int(), self.loc(node), v)
        if op == "**" and t.dtype.is_float and isinstance(b, N.Const) and \
                (not isinstance(a, N.Const) or t.dtype.is_storage_only):     # (narrow constants do not fold)
            fast = self.fast_power(a, b, t, node)            # NumPy's fast paths for scalar exponents
            if fast is not None:
                return fast
        self.check_weak_fits(a, t, node)
        self.check_weak_fits(b, t, node)
        ca, cb = self.cast(a, t), self.cast(b, t)
        if isinstance(ca, N.Const) and isinstance(cb, N.Const):
            v = I.fold_binop(op, ca.value, cb.value, t)
            if v is not None:
                return N.Const(t, self.loc(node), v)
        return N.BinOp(t, self.loc(node), op, ca, cb)

    def fast_power(self, a, b, t, node):
        """``a ** c`` for c in (-1, 0, 0.5, 1, 2) as NumPy computes it (reciprocal, ones, sqrt,
        identity, square) rather than through pow()."""
        c, loc = b.value, self.loc(node)
        x = self.cast(a, t)
        if c == 2:
            return N.BinOp(t, loc, "*", x, x)
        if c == 1:
            return x
        if c == 0:
            return N.Const(t, loc, 1.0)
        if c == -1:
            return N.BinOp(t, loc, "/", N.Const(t, loc, 1.0), x)
        if c == 0.5:
            return N.Call(t, loc, "sqrt", [x])
        return None

    def check_weak_fits(self, e, t: Ty, node):
        if isinstance(e, N.Const) and e.ty.weak and not t.weak and t.dtype.is_int and isinstance(e.value, int) \
                and not isinstance(e.value, bool) and not D.fits(e.value, t.dtype):
            raise self.err(node, f"Python integer {e.value} is out of bounds for {t.dtype.name}")

    def e_UnaryOp(self, node):
        v = self.as_expr(self.expr(node.operand), node)
        loc = self.loc(node)
        if isinstance(node.op, ast.Not):
            c = self.truth(v, node)
            if isinstance(c, N.Const):
                return N.Const(Ty(D.bool_), loc, not c.value)
            return N.Unary(Ty(D.bool_), loc, "not", c)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            if v.ty.dtype.kind == "b":
                raise self.err(node, "unary '-' is not defined for bools (as in NumPy); use 'not' or ~")
            if isinstance(v, N.Const):    # (a Python int stays exact, typed by its value: -2**63 is an int64)
                return N.Const(self.weak_int() if self.py_int(v) else v.ty, loc, I.wrap(-v.value, v.ty))
            return N.Unary(v.ty, loc, "-", v)
        if isinstance(node.op, ast.Invert):
            if v.ty.dtype.is_float:
                raise self.err(node, "operator ~ needs an integer or bool")
            if v.ty.dtype.kind == "b":
                return N.Unary(v.ty, loc, "not", v)
            if isinstance(v, N.Const):
                return N.Const(self.weak_int() if self.py_int(v) else v.ty, loc, I.wrap(~v.value, v.ty))
            return N.Unary(v.ty, loc, "~", v)
        raise self.err(node, "unsupported unary operator")

    def e_BoolOp(self, node):
        op = "and" if isinstance(node.op, ast.And) else "or"
        loc = self.loc(node)
        out = self.strong_bool(self.truth(self.expr(node.values[0]), node.values[0]))
        for vn in node.values[1:]:
            if isinstance(out, N.Const):
                if out.value if op == "and" else not out.value:
                    out = self.strong_bool(self.truth(self.expr(vn), vn))
                continue                      # else short-circuited: vn is not evaluated, nor compiled
            stmts, v = self.apart_truth(vn)
            if stmts:                         # vn runs statements: only when it is evaluated (Python's short circuit)
                t = self.fresh("boolop")
                self.types[t] = Ty(D.bool_)
                self.emit(N.Assign(loc, t, out))
                tv = N.Var(Ty(D.bool_), loc, t)
                self.emit(N.If(loc, tv if op == "and" else N.Unary(Ty(D.bool_), loc, "not", tv),
                               stmts + [N.Assign(loc, t, v)]))
                out = N.Var(Ty(D.bool_), loc, t)
                continue
            out = N.BinOp(Ty(D.bool_), loc, op, out, v)
        return out

    def apart_truth(self, node) -> tuple[list, N.Expr]:
        """``apart`` for an operand of ``and``/``or``: its statements and its strong bool."""
        saved, self.out = self.out, []
        v = self.strong_bool(self.truth(self.expr(node), node))
        stmts, self.out = self.out, saved
        return stmts, v

    def e_Compare(self, node):
        """``a < b < c`` is ``a < b and b < c`` with ``b`` evaluated once and, as in Python,
        ``c`` evaluated (its func's stores, atomics, prints run) only when ``a < b`` holds."""
        ops = []
        for opnode in node.ops:
            op = I.CMPOPS.get(type(opnode))
            if op is None:
                raise self.err(node, f"comparison {_OP_TEXT.get(type(opnode), type(opnode).__name__)} is not supported "
                                     "in kernels (compare numbers with ==, !=, <, <=, >, >=)")
            ops.append(op)
        left = self.expr(node.left)
        if isinstance(left, DTypeVal):
            return self.compare_dtypes(left, ops, node)
        left = self.as_expr(left, node)
        return self.chain(left, ops, node.comparators, node)

    def compare_dtypes(self, left: DTypeVal, ops: list, node) -> N.Expr:
        """``x.dtype == tk.float16``, ``x.dtype != y.dtype``: dtypes are compile-time constants
        (SPEC 3), so the comparison is a constant bool and an ``if`` on it keeps one branch
        (one kernel serving every dtype). Only ``==`` and ``!=``, against dtypes (``tk.float32``,
        ``np.float32``, another array's ``.dtype``)."""
        value = True
        for op, rnode in zip(ops, node.comparators):
            right = self.expr(rnode)
            if op not in ("==", "!="):
                raise self.err(node, f"dtypes compare with == and != only, not {op}")
            if not isinstance(right, DTypeVal):
                raise self.err(rnode, f"a dtype ({left.dtype.name}) is compared with something that is not a dtype "
                                      "(compare x.dtype with tk.float32, np.float32 or another array's .dtype)")
            value = value and ((left.dtype == right.dtype) == (op == "=="))
            left = right
        return N.Const(Ty(D.bool_, True), self.loc(node), value)

    def chain(self, left, ops: list, rnodes: list, node) -> N.Expr:
        """The comparison chain ``left ops[0] rnodes[0] ops[1] rnodes[1] ...``: its tail after
        the first comparison runs (statements included) only where that comparison holds."""
        (left,), right = self.then([left], rnodes[0])     # Python's order; an atomic runs once
        left, right = self.as_expr(left, node), self.as_expr(right, rnodes[0])
        first = self.compare(ops[0], left, right, node)
        if len(ops) == 1:
            return first
        first, loc = self.strong_bool(first), self.loc(node)      # a chain gives a strong bool
        if isinstance(first, N.Const) and not first.value:
            return first                      # short-circuited: the tail is not evaluated
        if self.calls_with_effects(rnodes[1:]):
            right = self.as_expr(self.snapshot(right, rnodes[0]), rnodes[0])   # read before the tail's calls
        saved, self.out = self.out, []
        rest = self.strong_bool(self.chain(right, ops[1:], rnodes[1:], node))
        stmts, self.out = self.out, saved
        if isinstance(first, N.Const):        # True: the chain is its tail
            self.out.extend(stmts)
            return rest
        if not stmts:
            return N.BinOp(Ty(D.bool_), loc, "and", first, rest)
        t = self.fresh("chain")
        self.types[t] = Ty(D.bool_)
        self.emit(N.Assign(loc, t, first))
        self.emit(N.If(loc, N.Var(Ty(D.bool_), loc, t), stmts + [N.Assign(loc, t, rest)]))
        return N.Var(Ty(D.bool_), loc, t)

    def calls_with_effects(self, nodes) -> bool:
        """Whether the expressions ``nodes`` call a @tk.func, an atomic or tk.print (calls that
        may store); pure calls (``abs``, ``len``, ``math.*``, casts) do not count, so a chain
        of them needs no snapshot statement (a temporary the chain's middle operand is copied to)."""
        for r in nodes:
            for n in ast.walk(r):
                if isinstance(n, ast.Call):
                    fn = self.resolve_py(n.func)
                    if isinstance(fn, lang.Func) or str(getattr(fn, "__name__", "")).startswith(("atomic_", "print")):
                        return True
        return False

    def compare(self, op, a, b, node) -> N.Expr:
        """``a op b`` exactly, as NumPy 2 compares: mixed signed/unsigned 64-bit integers and
        Python ints outside the other operand's range compare by value, never wrapped. Two
        weak operands (Python scalars) give a weak bool (a Python bool), anything else a bool."""
        loc, BT = self.loc(node), Ty(D.bool_, a.ty.weak and b.ty.weak)
        da, db = a.ty.dtype, b.ty.dtype
        for x, y, x_right in ((a, b, False), (b, a, True)):
            if isinstance(x, N.Const) and x.ty.weak and da.is_int and db.is_int and isinstance(x.value, int) \
                    and not (y.ty.weak and isinstance(y, N.Const)) and not D.fits(x.value, y.ty.dtype):
                # the Python int lies outside the range of y's type (also a Python int's: int64, or
                # uint64 for one >= 2**63): the answer does not depend on y (``y OP x``)
                o = op if x_right else I.FLIP[op]
                above = x.value > 0
                return N.Const(BT, loc, {"<": above, "<=": above, ">": not above, ">=": not above,
                                         "==": False, "!=": True}[o])
        weak_const = (isinstance(a, N.Const) and a.ty.weak) or (isinstance(b, N.Const) and b.ty.weak)
        if da.is_int and db.is_int and not weak_const and \
                any(x.ty.weak and x.ty.dtype.name == "uint64" for x in (a, b)):
            # a Python int >= 2**63 (weak uint64) against any integer: by value, never wrapped to int64
            if "i" in (da.kind, db.kind):
                s_, u_, o = (a, b, op) if da.kind == "i" else (b, a, I.FLIP[op])
                return self.mixed_compare(o, self.cast(s_, Ty(D.int64)), self.cast(u_, Ty(D.uint64)), loc, BT)
            return N.Compare(BT, loc, op, self.cast(a, Ty(D.uint64)), self.cast(b, Ty(D.uint64)))
        if da.is_int and db.is_int and not weak_const and (a.ty.weak != b.ty.weak or {da.kind, db.kind} == {"i", "u"}):
            strong64 = not a.ty.weak and not b.ty.weak and {da.name, db.name} == {"int64", "uint64"}
            weak_u64 = (a.ty.weak and db.name == "uint64") or (b.ty.weak and da.name == "uint64")
            if strong64 or weak_u64:
                signed_left = a.ty.weak or da.kind == "i"
                s_, u_, o = (a, b, op) if signed_left else (b, a, I.FLIP[op])
                return self.mixed_compare(o, self.cast(s_, Ty(D.int64)), self.cast(u_, Ty(D.uint64)), loc, BT)
            if a.ty.weak != b.ty.weak:    # a Python int against a narrower integer type: compare in int64
                a, b = self.cast(a, Ty(D.int64)), self.cast(b, Ty(D.int64))
        t = D.promote(a.ty, b.ty, self.opts.default_float, self.opts.default_int)
        if t.dtype != D.promote(a.ty, b.ty).dtype and not isinstance(a, N.Const) and not isinstance(b, N.Const):
            for i_, f_, o in ((a, b, op), (b, a, I.FLIP[op])):
                if i_.ty.dtype.is_int and not i_.ty.weak and f_.ty.dtype.is_float and t.dtype == D.float32 \
                        and i_.ty.dtype.bits > 24:                   # float32 holds the integers up to 2**24
                    return self.int_float_compare(o, i_, self.cast(f_, t), loc)
        a, b = self.cast(a, t), self.cast(b, t)
        if isinstance(a, N.Const) and isinstance(b, N.Const):
            return N.Const(BT, loc, bool(I.PYCMP[op](a.value, b.value)))
        return N.Compare(BT, loc, op, a, b)

    def int_float_compare(self, op, i_, f_, loc) -> N.Expr:
        """Integer ``i_`` op float ``f_`` exactly, where NumPy compares in float64 but this backend
        has none (WebGPU, Metal: float32, which does not hold every int32). Rounding is monotonic,
        so where ``float(i_) != f_`` their order is the answer; where they are equal ``f_`` is an
        integer in the type's range, or one past its maximum (then ``i_ < f_``)."""
        BT, ft = Ty(D.bool_), f_.ty
        fi = self.cast(i_, ft)
        limit = N.Const(ft, loc, float(2 ** (i_.ty.dtype.bits - (i_.ty.dtype.kind == "i"))))
        past = N.Const(BT, loc, op in ("<", "<=", "!="))
        as_int = N.Compare(BT, loc, op, i_, N.Cast(i_.ty, loc, f_))
        tie = N.Select(BT, loc, N.Compare(BT, loc, ">=", f_, limit), past, as_int)
        return N.Select(BT, loc, N.Compare(BT, loc, "!=", fi, f_), N.Compare(BT, loc, op, fi, f_), tie)

    def mixed_compare(self, op, s_, u_, loc, bt: Ty) -> N.Expr:
        """int64 ``s_`` op uint64 ``u_``, exactly, of type ``bt`` (a weak bool when both operands
        were Python scalars, as compare() says: a Python int >= 2**63 is one too)."""
        BT = Ty(D.bool_)
        neg = N.Compare(BT, loc, "<", s_, N.Const(Ty(D.int64), loc, 0))
        nonneg = N.Compare(BT, loc, ">=", s_, N.Const(Ty(D.int64), loc, 0))
        as_u = N.Compare(BT, loc, op, N.Cast(Ty(D.uint64), loc, s_), u_)
        if op in ("<", "<=", "!="):
            return N.BinOp(bt, loc, "or", neg, as_u)
        return N.BinOp(bt, loc, "and", nonneg, as_u)

    def apart(self, node) -> tuple[list, N.Expr]:
        """``node`` lowered on its own: the statements it emitted (an inlined ``@tk.func``'s
        body, a collective, ...) and its value. A conditional part of an expression runs them
        only when it is evaluated, as Python does."""
        saved, self.out = self.out, []
        v = self.as_expr(self.expr(node), node)
        stmts, self.out = self.out, saved
        return stmts, v

    def e_IfExp(self, node):
        c = self.truth(self.expr(node.test), node.test)
        if isinstance(c, N.Const):
            # a compile-time condition: only the chosen side exists, as for an ``if`` statement
            # (Python never evaluates the other, so it may be one that would not compile here,
            # such as a uint64 operation in the branch a constexpr rules out)
            return self.expr(node.body if c.value else node.orelse)
        (sa, a), (sb, b) = self.apart(node.body), self.apart(node.orelse)
        t = D.promote(a.ty, b.ty, self.opts.default_float, self.opts.default_int)
        loc = self.loc(node)
        if not sa and not sb:
            return N.Select(t, loc, c, self.cast(a, t), self.cast(b, t))
        # a side emitted statements (a func's stores, prints, atomics, loads it guards): only the
        # chosen side may run them, so the expression becomes an if statement into a temporary
        v = self.fresh("ifexp")
        self.types[v] = t
        self.emit(N.If(loc, c, sa + [N.Assign(loc, v, self.cast(a, t))], sb + [N.Assign(loc, v, self.cast(b, t))]))
        return N.Var(t, loc, v)

    def e_Call(self, node):
        if node.keywords:           # only these check their keywords themselves; the rest take none
            fn = self.resolve_py(node.func)
            if fn not in (lang.group_reduce, lang.group_scan, lang.dot_i8, lang.dot_u4i8, lang.load_halves,
                          lang.lookup_u4, lang.load_i8) \
                    and not isinstance(fn, lang.Func):
                raise self.err(node, "keyword arguments are not supported in kernel calls")
        fobj = self.expr(node.func)
        if isinstance(fobj, DTypeVal):
            if len(node.args) != 1:
                raise self.err(node, f"{fobj.dtype.name}() takes one argument")
            v = self.as_expr(self.expr(node.args[0]), node)
            return self.cast(v, Ty(fobj.dtype), explicit=True)
        if not isinstance(fobj, PyObj):
            raise self.err(node, "this is not callable in a kernel")
        fn = fobj.obj
        if isinstance(fn, lang.Func):
            return self.inline(fn, node)
        handler = I.handler_for(fn)
        if handler is None:
            name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
            hint = " (decorate it with @tk.func to call it from kernels)" if callable(fn) and hasattr(fn, "__code__") else ""
            if not hint and getattr(fn, "__module__", None) in ("numpy", "numpy._core.umath") \
                    and fn.__name__ in _MATH_NAMES:
                m = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "power": "pow"}.get(
                    fn.__name__, fn.__name__)
                hint = f" (NumPy functions work on whole arrays; in a kernel use math.{m} on a value)"
            elif not hint and getattr(fn, "__module__", "") and str(getattr(fn, "__module__", "")).startswith("numpy"):
                hint = " (NumPy functions work on whole arrays, not inside kernels: see docs/language.md for the math functions)"
            if not hint and type(fn).__name__ == "Kernel" and hasattr(fn, "unsafe_indices"):
                # (kernel.py is above the frontend: recognised by its type's name)
                hint = (" (a @tk.kernel is launched from the host, never called from a kernel: write the shared "
                        "code as a @tk.func and call that)")
            raise self.err(node, f"cannot call '{name}' in a kernel{hint}")
        return handler(self, node)

    # --- @tk.func inlining ------------------------------------------------------------------

    def bind_call(self, func, fdef, node) -> tuple:
        """``(parameter names, argument nodes, argument values)`` of a call of a @tk.func, bound
        as Python binds them: by position, by keyword, else the parameter's default value (a
        compile-time constant). Arguments are lowered in the order they are written."""
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise self.err(node, f"@tk.func '{func.name}' may only have plain parameters (with or without "
                                 "defaults; no *args, **kwargs or keyword-only ones)")
        params = [p.arg for p in a.args]
        dvals = getattr(func.fn, "__defaults__", None) or ()
        defaults = dict(zip(params[len(params) - len(dvals):], dvals))
        if len(node.args) > len(params):
            raise self.err(node, f"@tk.func '{func.name}' takes {len(params)} argument(s), got {len(node.args)}")
        given = dict(zip(params, zip(node.args, self.in_order(list(node.args)))))
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err(node, "**kwargs are not supported in kernel calls")
            if kw.arg not in params:
                raise self.err(node, f"@tk.func '{func.name}' has no parameter '{kw.arg}' "
                                     f"(its parameters: {', '.join(params)})")
            if kw.arg in given:
                raise self.err(node, f"@tk.func '{func.name}' got two values for parameter '{kw.arg}'")
            given[kw.arg] = (kw.value, self.expr(kw.value))
        missing = [p for p in params if p not in given and p not in defaults]
        if missing:
            raise self.err(node, f"@tk.func '{func.name}' takes {len(params)} argument(s) ({', '.join(params)}); "
                                 f"missing {', '.join(repr(p) for p in missing)}")
        pairs = [given[p] if p in given else (node, self.py_value(defaults[p], node)) for p in params]
        return params, [n for n, _ in pairs], [v for _, v in pairs]

    def inline(self, func, node):
        if func in self.calls:
            raise self.err(node, f"recursive call of @tk.func '{func.name}' (recursion is not supported)")
        src = func_source(func)
        fdef = src.tree
        params, argnodes, argvals = self.bind_call(func, fdef, node)
        self.counter += 1
        prefix = f"_f{self.counter}_{func.name}_"
        fr = _Frame(src, prefix, _assigned_names(fdef), self.loc(node), func.name)
        fr.ret_label = f"{prefix}end"
        self.stack.append(fr)
        self.calls.append(func)
        try:
            for p, v, a, parg in zip(params, argvals, argnodes, fdef.args.args):
                dt = self.param_dtype(parg)
                if isinstance(v, N.ArrayInfo):
                    self.check_array_annotation(parg, dt, v.dtype)
                elif dt is not None and not isinstance(v, (DTypeVal, PyObj, tuple)):
                    v = self.cast(self.as_expr(v, a), Ty(dt), explicit=True)   # `t: tk.float32` casts
                if isinstance(v, (N.ArrayInfo, DTypeVal, PyObj)):
                    fr.bind[p] = v
                elif isinstance(v, N.Const) and p not in fr.local_names:
                    fr.bind[p] = v      # a compile-time constant (a constexpr, a literal) stays one in
                    #                     the func, as in the kernel: its ifs fold, dead branches vanish
                elif isinstance(v, tuple):
                    self.bind_name(p, v, a)
                else:
                    self.bind_name(p, self.as_expr(v, a), a)
            body = self.block(fdef.body)
        finally:
            self.stack.pop()
            self.calls.pop()
        # a return at the func's top level (written there, or in a branch a constant condition
        # folded) ends the body: what follows is dead, and no jump is needed
        end = next((k for k, s in enumerate(body) if isinstance(s, N.FuncExit) and s.label == fr.ret_label),
                   None)
        if end is not None:
            del body[end:]
        if any(isinstance(s, N.FuncExit) for s in N.walk_stmts(body)):
            self.emit(N.FuncBlock(self.loc(node), fr.ret_label, body))
        else:
            self.out.extend(body)
        if not fr.ret_vars:
            return NoValue(self.loc(node), f"@tk.func '{func.name}'")
        for v in fr.ret_vars:
            self.names[v] = f"@func:{func.name}"
        return _unflatten(iter(FuncBinding(v) for v in fr.ret_vars), fr.ret_shape)


#: statements after which nothing in the same block runs (``Lowerer.stmts`` stops there)
_LEAVES_BLOCK = (N.Return, N.FuncExit, N.Break, N.Continue)


def _holds_atomic(v) -> bool:
    """Whether the lowered value ``v`` (a tuple element by element) evaluates an atomic."""
    if isinstance(v, tuple):
        return any(_holds_atomic(x) for x in v)
    return isinstance(v, N.Expr) and any(isinstance(x, N.Atomic) for x in N.walk_expr(v))


def _reads_memory(v) -> bool:
    """Whether evaluating the lowered value ``v`` reads an array (or updates one atomically):
    what a later operand's stores could change."""
    if isinstance(v, tuple):
        return any(_reads_memory(x) for x in v)
    return isinstance(v, N.Expr) and any(isinstance(x, (N.Load, N.Atomic)) for x in N.walk_expr(v))


def _flatten(value) -> tuple[list, object]:
    """A returned value's leaves and its nesting: None for one value, a tuple of the parts'
    nestings for a tuple (``return (a, b), c`` returns three values, shaped ((None, None), None))."""
    if not isinstance(value, tuple):
        return [value], None
    parts = [_flatten(v) for v in value]
    return [leaf for leaves, _ in parts for leaf in leaves], tuple(sh for _, sh in parts)


def _unflatten(leaves, shape):
    """The inverse of :func:`_flatten`: the values of ``leaves`` (an iterator) nested as ``shape``."""
    return next(leaves) if shape is None else tuple(_unflatten(leaves, sh) for sh in shape)


_FIXED_MODULES = frozenset({"tinykernels", "math", "numpy", "builtins", "cmath", "operator"})   # attributes never rebound


def _note_read(where, key, value) -> None:
    """A global or closure variable the code may fold in: recorded for the launch-time check
    (globalreads); modules (``tk``, ``math``) are not, their attributes are read as constants."""
    if not isinstance(value, ModuleType):
        globalreads.note(where, key, value)


def lower_kernel(src: FuncSource, specs: dict, opts: LowerOptions) -> N.Kernel:
    """Type and lower a kernel for one specialization; raises CompileError on user errors."""
    types: dict = {}
    for _ in range(12):
        lw = Lowerer(src, specs, opts, types)
        body = lw.run()
        new = dict(lw.types)
        if new == types:
            break
        types = new
    else:
        raise CompileError("the types of local variables do not settle; add explicit casts",
                           src.file, src.first_line, 0, kernel=opts.kernel_name)
    missing = {k: v for k, v in lw.read_before.items() if k not in types}
    if missing:
        name, loc = next(iter(missing.items()))
        raise N.error_at(f"local variable '{name.split('_', 3)[-1] if name.startswith('_f') else name}' "
                         "is used before it is assigned", loc, opts.kernel_name)
    check_definite_assignment(body, lw.names, opts.kernel_name)
    k = N.Kernel(opts.kernel_name, lw.params, body, types, opts.ndim, tuple(opts.workgroup),
                 opts.unsafe_indices, opts.idx32, opts.debug, src.file, lw.uses, opts.fastmath)
    _feature_scan(k)
    return k


def _feature_scan(k: N.Kernel) -> None:
    for s in N.walk_stmts(k.body):
        if isinstance(s, N.Barrier):
            k.uses.add("barrier")
        elif isinstance(s, N.AllocArray):
            k.uses.add("localmem" if s.array.space == "local" else "private")
        elif isinstance(s, N.Collective):
            k.uses.add("collective")
        elif isinstance(s, N.Print):
            k.uses.add("print")
        elif isinstance(s, N.Return):
            k.uses.add("return")
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if isinstance(x, N.Index) and x.kind.startswith(("local", "group")):
                    k.uses.add("groupindex")
                elif isinstance(x, N.Call) and x.fn == "uniform":
                    k.uses.add("uniform")
                elif isinstance(x, N.Atomic):
                    k.uses.add("atomic")


