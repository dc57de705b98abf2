"""Turning a kernel's Python source into code the interpreter runs, one work item per call.

The kernel (and every ``@tk.func`` it reaches) is re-parsed from its source and rewritten:

* ``tk.synchronize()`` becomes ``(yield SITE)`` and ``tk.group_reduce/group_scan(v, op)``
  ``(yield request)``, so a work item is a generator that stops at every barrier and
  collective; the scheduler advances all items of a group to the same stop (lockstep). A
  ``@tk.func`` that (transitively) contains one is a generator too, called with ``yield from``.
  Kernels without barriers stay plain functions.
* ``tk.uniform(e)`` becomes ``(uget(SITE) if uhas(SITE) else uput(SITE, e))``: the first work
  item of the group evaluates ``e``, the others take its value.
* arithmetic operators whose Python meaning differs from the kernel language's (``+ - * / //
  % ** << >>``, unary ``-`` and ``~``, ``and``/``or``) call the helpers of :mod:`.ops`;
  ``x: T = v`` casts; ``breakpoint()`` opens pdb on the work item's frame.
* ``@tk.func`` calls are bound to the rewritten functions.

The rewritten tree keeps the user's line and column numbers and is compiled with the user's
file name, so tracebacks, ``breakpoint()`` and pdb show the user's source. Only the code
object is cached; :mod:`.context` binds it to per-launch globals (the in-kernel ``tk``,
``math`` and builtins) with ``types.FunctionType``.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import os
import textwrap
import threading
from dataclasses import dataclass, field

import numpy as np

from ... import dtypes as D
from ... import lang
from ...errors import CompileError

# placeholders the rewritten code uses (inserted into every per-launch globals dict)
BINOP_HELPERS = {ast.Add: "__tk_add", ast.Sub: "__tk_sub", ast.Mult: "__tk_mul", ast.Div: "__tk_truediv",
                 ast.FloorDiv: "__tk_floordiv", ast.Mod: "__tk_mod", ast.Pow: "__tk_pow",
                 ast.LShift: "__tk_lshift", ast.RShift: "__tk_rshift", ast.BitAnd: "__tk_and", ast.BitOr: "__tk_or",
                 ast.BitXor: "__tk_xor"}
FOLD_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>"}
RETURNED = "__TK_RETURNED"           # value of an explicit ``return`` in a (generator) kernel

# where each yield point is: site id (a str) -> (file, line, text)
SITES: dict = {}
_site_ids = itertools.count(1)
_func_ids = itertools.count(1)


@dataclass(eq=False)
class Transformed:
    """A kernel or @tk.func ready to be bound to per-launch globals."""
    fn: object                       # the user's function
    code: object                     # the rewritten code object
    is_gen: bool                     # a generator (contains barriers or collectives)
    funcs: dict = field(default_factory=dict)   # placeholder name -> Transformed of a @tk.func
    placeholder: str = ""
    keep: tuple = ()                 # the closure contents the cache key refers to by id
    gdeps: tuple = ()                # (module globals, name, object) the rewriting resolved a name to


def _fresh(t: Transformed) -> bool:
    """Whether every global name the rewriting of ``t`` (and of the @tk.funcs it calls)
    resolved still names the same object: a rebound one (a @tk.func replaced, a global that
    picks a branch) makes the rewritten code stale, as it makes the compiled backends' code."""
    return all(g.get(name, _MISSING) is obj for g, name, obj in t.gdeps) and all(map(_fresh, t.funcs.values()))


_MISSING = object()


_CACHE: dict = {}                    # (code object, kernel?) -> Transformed
_LOCK = threading.RLock()
_ACTIVE: list = []                   # functions being transformed (recursion check)


def _closure_ids(fn) -> tuple:
    out = []
    for c in fn.__closure__ or ():
        try:
            out.append(id(c.cell_contents))
        except ValueError:
            out.append(None)
    return tuple(out)


def transform(fn, kernel: bool) -> Transformed:
    """The rewritten code of ``fn`` (cached per code object and closure contents: which
    ``@tk.func`` a call names can depend on a closure variable)."""
    key = (fn.__code__, kernel, _closure_ids(fn))
    t = _CACHE.get(key)
    if t is not None and _fresh(t):
        return t
    with _LOCK:
        t = _CACHE.get(key)
        if t is None or not _fresh(t):
            t = _transform(fn, kernel)
            t.keep = tuple(c.cell_contents for c in fn.__closure__ or () if _has_contents(c))
            _CACHE[key] = t
        return t


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _param_cast(a: ast.arg, rw) -> ast.stmt | None:
    """``n = __tk_annot_param(T, n)`` for a parameter annotated with anything but
    ``tk.constexpr``/``tk.Const``: a dtype annotation casts a scalar argument, as the compiler does."""
    if a.annotation is None or rw.resolve(a.annotation) in (None, lang.constexpr, lang.Const):
        return None
    call = ast.Call(ast.Name("__tk_annot_param", ast.Load()), [a.annotation, ast.Name(a.arg, ast.Load())], [])
    stmt = ast.Assign([ast.Name(a.arg, ast.Store())], call)
    return ast.fix_missing_locations(ast.copy_location(stmt, a))


def _transform(fn, kernel: bool) -> Transformed:
    if fn.__code__ in _ACTIVE:
        raise CompileError(f"recursive call of @tk.func '{fn.__name__}' (recursion is not supported)",
                           fn.__code__.co_filename, fn.__code__.co_firstlineno)
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        # no source (defined with exec): run the code as it is; barriers then cannot be used
        return Transformed(fn, fn.__code__, False, {}, f"__tk_func_{next(_func_ids)}")
    _ACTIVE.append(fn.__code__)
    try:
        text = "".join(lines)
        indent = len(lines[0]) - len(lines[0].lstrip())
        mod = ast.parse(textwrap.dedent(text))
        fdef = next(n for n in mod.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        ast.increment_lineno(mod, start - 1)
        if indent:
            for node in ast.walk(mod):
                if hasattr(node, "col_offset"):
                    node.col_offset += indent
                    if getattr(node, "end_col_offset", None) is not None:
                        node.end_col_offset += indent
        rw = _Rewriter(fn, fdef, kernel, fn.__code__.co_filename)
        fdef.decorator_list = []
        fdef.returns = None
        prologue = [_param_cast(a, rw) for a in fdef.args.args]
        for a in fdef.args.args + fdef.args.posonlyargs + fdef.args.kwonlyargs:
            a.annotation = None
        fdef.body = [rw.visit(s) for s in fdef.body]
        fdef.body = [s for s in prologue if s is not None] + [s for s in fdef.body if s is not None] or [ast.Pass()]
        code = _compile(fn, fdef)
        return Transformed(fn, code, rw.is_gen, rw.funcs, f"__tk_func_{next(_func_ids)}",
                           gdeps=tuple(rw.gdeps.values()))
    finally:
        _ACTIVE.pop()


def _compile(fn, fdef: ast.FunctionDef):
    """Compile the rewritten def inside a wrapper that makes the original free variables free
    variables again (so closures work), and return the inner code object."""
    free = list(fn.__code__.co_freevars)
    outer = ast.FunctionDef(
        name="__tk_outer__",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in free], vararg=None,
                           kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None)
    ast.copy_location(outer, fdef)
    for n in ast.walk(outer.body[1]):
        ast.copy_location(n, fdef)
    for a in outer.args.args:
        ast.copy_location(a, fdef)
    module = ast.Module(body=[outer], type_ignores=[])
    ast.fix_missing_locations(module)
    mcode = compile(module, fn.__code__.co_filename, "exec", dont_inherit=True)
    ocode = next(c for c in mcode.co_consts if hasattr(c, "co_code") and c.co_name == "__tk_outer__")
    icode = next(c for c in ocode.co_consts if hasattr(c, "co_code") and c.co_name == fdef.name)
    try:
        icode = icode.replace(co_qualname=fn.__qualname__)
    except (TypeError, ValueError):
        pass
    return icode


def _local_names(fdef) -> set:
    names = {a.arg for a in fdef.args.args + fdef.args.posonlyargs + fdef.args.kwonlyargs}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _call(name: str, args, node, keywords=()):
    f = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)
    return ast.copy_location(ast.Call(func=f, args=list(args), keywords=list(keywords)), node)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, fn, fdef, kernel: bool, filename: str):
        self.fn, self.fdef, self.kernel, self.file = fn, fdef, kernel, filename
        self.gdeps: dict = {}            # name -> (globals, name, object): what resolve() read
        self.locals = _local_names(fdef)
        self.const_params: set = set()
        code = fn.__code__
        self.cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        self.is_gen = False
        self.funcs: dict = {}
        self.const_params = self.constexprs()

    # --- static resolution of what a call names -----------------------------------------

    def resolve(self, node):
        try:
            if isinstance(node, ast.Name):
                if node.id in self.locals:
                    return None
                if node.id in self.cells:
                    return self.cells[node.id].cell_contents
                g = self.fn.__globals__
                if node.id in g:
                    self.gdeps[node.id] = (g, node.id, g[node.id])
                    return g[node.id]
                return getattr(builtins, node.id, None)
            if isinstance(node, ast.Attribute):
                base = self.resolve(node.value)
                return getattr(base, node.attr, None) if base is not None else None
        except Exception:  # noqa: BLE001 - anything unresolvable is left to run time
            return None
        return None

    # --- compile-time constants (what the compiler folds) -----------------------------------

    def constexprs(self) -> set:
        if not self.kernel:
            return set()
        out = set()
        for a in self.fdef.args.args:
            if a.annotation is not None and self.resolve(a.annotation) is lang.constexpr:
                out.add(a.arg)
        return out

    def static(self, node) -> bool:
        """Whether the compiler folds ``node`` to a constant: literals, module-level and closure
        numbers, constexpr arguments, and operators and dtype casts of those. Their Python ints
        are exact (``2**70``) and a constant float exponent takes NumPy's fast paths."""
        if isinstance(node, ast.Constant):
            return type(node.value) in (bool, int, float)
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return node.id in self.const_params
            return isinstance(self.resolve(node), (bool, int, float, np.bool_, np.integer, np.floating))
        if isinstance(node, ast.Attribute):
            if node.attr == "ndim" and isinstance(node.value, ast.Name) and node.value.id in self.locals:
                return True                  # an array's rank
            return isinstance(self.resolve(node), (bool, int, float))
        if isinstance(node, ast.Subscript):  # tk.groupsize()[k]: the compiler specializes on it
            v = node.value
            return (isinstance(v, ast.Call) and self.resolve(v.func) is lang.groupsize and not v.args
                    and isinstance(node.slice, ast.Constant))
        if isinstance(node, ast.UnaryOp):
            return not isinstance(node.op, ast.Not) and self.static(node.operand)
        if isinstance(node, ast.BinOp):
            return self.static(node.left) and self.static(node.right)
        if isinstance(node, ast.IfExp):
            return self.static(node.test) and self.static(node.body) and self.static(node.orelse)
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            f = self.resolve(node.func)
            if f in (int, float, bool, round):
                return self.static(node.args[0])
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr == "dtype" and isinstance(fn.value, ast.Name) \
                    and fn.value.id in self.locals:
                return self.static(node.args[0])     # A.dtype(c): a folded cast
            d = D.from_any(f) if isinstance(f, type) and f not in (bool, int, float) else None
            if d is not None and (D._mld is not None or d.name not in ("bfloat16", "float8_e4m3fn", "float8_e5m2")):
                return self.static(node.args[0])   # (the compiler folds bf16/fp8 casts with ml_dtypes)
        return False

    def site(self, node, text: str) -> ast.Constant:
        """A unique, readable id of a barrier / collective / uniform (pdb shows it as the
        value a work item "returns" when it stops at a barrier)."""
        s = f"{text} at {os.path.basename(self.file)}:{node.lineno} [site {next(_site_ids)}]"
        SITES[s] = (self.file, node.lineno, text)
        return ast.copy_location(ast.Constant(value=s), node)

    # --- calls ---------------------------------------------------------------------------

    def visit_Call(self, node):
        target = self.resolve(node.func)
        node = self.generic_visit(node)
        if target is None:
            return node
        if lang.intrinsic_name(target) == "synchronize" and not node.args and not node.keywords:
            self.is_gen = True
            return ast.copy_location(ast.Yield(value=self.site(node, "tk.synchronize()")), node)
        if target is lang.group_reduce or target is lang.group_scan:
            self.is_gen = True
            kind = "reduce" if target is lang.group_reduce else "scan"
            req = _call(f"__tk_{kind}_req", [self.site(node, f"tk.group_{kind}()")] + node.args, node,
                        node.keywords)
            return ast.copy_location(ast.Yield(value=req), node)
        if target is lang.uniform and len(node.args) == 1 and not node.keywords:
            s = self.site(node, "tk.uniform()")
            return ast.copy_location(ast.IfExp(test=_call("__tk_uhas", [s], node),
                                               body=_call("__tk_uget", [s], node),
                                               orelse=_call("__tk_uput", [s, node.args[0]], node)), node)
        if isinstance(target, lang.Func):
            sub = transform(target.fn, kernel=False)
            self.funcs[sub.placeholder] = sub
            node.func = ast.copy_location(ast.Name(id=sub.placeholder, ctx=ast.Load()), node.func)
            if sub.is_gen:
                self.is_gen = True
                return ast.copy_location(ast.YieldFrom(value=node), node)
            return node
        if target is builtins.breakpoint and not node.args and not node.keywords:
            return ast.copy_location(ast.BoolOp(op=ast.Or(), values=[_call("__tk_breakpoint", [], node), node]),
                                     node)
        return node

    def visit_Assign(self, node):
        v = node.value
        if (isinstance(v, ast.Call) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and self.resolve(v.func) in (lang.localmem, lang.private)
                and not any(k.arg == "_tk_name" for k in v.keywords)):
            name = ast.copy_location(ast.Constant(value=node.targets[0].id), v)
            v.keywords.append(ast.copy_location(ast.keyword(arg="_tk_name", value=name), v))
        return self.generic_visit(node)

    # --- operators -----------------------------------------------------------------------

    def visit_BinOp(self, node):
        const_l, const_r = self.static(node.left), self.static(node.right)
        node = self.generic_visit(node)
        h = BINOP_HELPERS.get(type(node.op))
        if h is None:
            return node
        if const_l and const_r and type(node.op) in FOLD_OPS:      # folded by the compiler: exact
            op = ast.copy_location(ast.Constant(value=FOLD_OPS[type(node.op)]), node)
            return _call("__tk_fold", [op, node.left, node.right], node)
        if const_r and isinstance(node.op, ast.Pow):
            h = "__tk_powc"
        return _call(h, [node.left, node.right], node)

    def visit_UnaryOp(self, node):
        const = self.static(node.operand)
        node = self.generic_visit(node)
        if isinstance(node.op, ast.USub):
            o = node.operand
            if isinstance(o, ast.Constant) and type(o.value) in (int, float):
                return ast.copy_location(ast.Constant(value=-o.value), node)
            if const:
                return node                  # a folded constant: exact (Python ints do not wrap)
            return _call("__tk_neg", [o], node)
        if isinstance(node.op, ast.Invert):
            return _call("__tk_inv", [node.operand], node)
        if isinstance(node.op, ast.Not):
            return _call("__tk_bool", [node], node)        # `not` gives a (strong) bool
        return node

    def visit_Compare(self, node):
        node = self.generic_visit(node)
        if len(node.ops) > 1:
            return _call("__tk_bool", [node], node)        # a chain is an `and`: a (strong) bool
        return node

    def visit_BoolOp(self, node):
        node = self.generic_visit(node)
        node.values = [_call("__tk_truth", [v], v) for v in node.values]
        return _call("__tk_bool", [node], node)            # `and`/`or` give a (strong) bool

    def visit_AugAssign(self, node):
        const_r = self.static(node.value)
        node = self.generic_visit(node)
        h = BINOP_HELPERS.get(type(node.op))
        t = node.target
        if h is None:
            return node
        if const_r and isinstance(node.op, ast.Pow):
            h = "__tk_powc"            # as for ``x ** c``: NumPy's fast paths (``x **= 2`` is x * x)
        if isinstance(t, ast.Name):
            load = ast.copy_location(ast.Name(id=t.id, ctx=ast.Load()), t)
            return ast.copy_location(ast.Assign(targets=[t], value=_call(h, [load, node.value], node)), node)
        if isinstance(t, ast.Subscript) and (isinstance(node.op, ast.Pow) or not const_r):
            # a run-time Python int operand that does not fit the element type wraps (ops.py)
            return ast.copy_location(ast.Expr(value=_call("__tk_augitem", [
                t.value, t.slice, node.value, ast.copy_location(ast.Name(id=h, ctx=ast.Load()), node)], node)),
                node)
        return node          # A[i] op= c on NumPy scalars: NumPy's own semantics are the kernel's

    def visit_AnnAssign(self, node):
        node = self.generic_visit(node)
        if node.value is None:
            return None
        value = _call("__tk_annot", [node.annotation, node.value], node)
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)

    def visit_Return(self, node):
        node = self.generic_visit(node)
        if self.kernel and node.value is None:
            node.value = ast.copy_location(ast.Name(id=RETURNED, ctx=ast.Load()), node)
        return node

    def visit_FunctionDef(self, node):
        return node          # nested definitions are not kernel code (the compiler rejects them)

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef
