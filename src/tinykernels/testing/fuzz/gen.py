"""The random kernel generator: :class:`Gen` builds one well-typed kernel module (globals,
``@tk.func`` device functions and one ``@tk.kernel``) with its arguments and launch geometry from
a seed, keeping the reference semantics defined and order-independent (see the package
docstring); :func:`generate` is its entry point and :func:`cases` a hypothesis strategy of
generated cases.
"""
from __future__ import annotations

import ast
import dataclasses
import math
import random

import numpy as np

from ... import random as tkrandom
from .bugs import FIXED_BUGS
from .bytegen import ByteRuns
from .calls import Calls
from .case import ArgSpec, Arr, Case, Ex, Options, Var, _Retry
from .data import edge_values, int_valued, random_values
from .edges import Edges
from .fastmath import generate_fastmath, is_fastmath_seed
from .gradgen import generate_grad
from .hazards import Hazards
from .types import (ALL_TYPES, ATOMIC_TYPES, BINOPS, CMPS, FLOATS_ALL, FP8, INTS, NARROW, NARROW_X, PAIRS,
                     STRONG, WEAK, fits, float_max, int_range, is_float, is_int, np_dtype, promote)


# transcendental functions: (name, arity, allowed ulps in the computation type)
INEXACT_MATH = [("math.exp", 1, 4), ("math.log", 1, 4), ("math.log2", 1, 4), ("math.log10", 1, 4),
                ("math.log1p", 1, 4), ("math.expm1", 1, 4), ("math.sin", 1, 4), ("math.cos", 1, 4),
                ("math.tan", 1, 6), ("math.asin", 1, 4), ("math.acos", 1, 4), ("math.atan", 1, 6),
                ("math.sinh", 1, 4), ("math.cosh", 1, 4), ("math.tanh", 1, 6), ("math.asinh", 1, 4),
                ("math.acosh", 1, 4), ("math.atanh", 1, 6), ("math.erf", 1, 16), ("math.erfc", 1, 16),
                ("math.atan2", 2, 6), ("math.pow", 2, 16), ("math.hypot", 2, 4), ("tk.rsqrt", 1, 4),
                ("tk.sigmoid", 1, 8), ("**", 2, 16)]
INEXACT_ULPS = {n: u for n, _, u in INEXACT_MATH}

PYINT_LITS = [0, 1, 2, 3, 4, 5, 7, 8, 10, 13, 31, 32, 63, 64, 100, 127, 128, 255, 256, 1000, 65535, 65536,
              2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, -1, -2, -3, -5, -8, -100, -128, -129, -32768,
              -2**31, -2**40, -2**63]
PYFLOAT_LITS = ["0.0", "1.0", "-1.0", "0.5", "2.0", "0.1", "-3.75", "1e10", "1e-10", "3.0", "100.0", "-0.0",
                "1e300", "65504.0", "1e-40", "math.inf", "(-math.inf)", "math.nan", "math.pi", "0.25", "7.0"]


def _const_namespace() -> dict:
    """Python stand-ins for evaluating compile-time constant expressions (known bug cl-const-nan)."""
    import types
    tkns = types.SimpleNamespace()
    for t in STRONG:
        dt = np_dtype(t)
        setattr(tkns, t if t != "bool" else "bool_", (lambda dt: lambda x: np.array(x).astype(dt)[()])(dt))
    tkns.clamp = lambda x, lo, hi: min(max(x, lo), hi)
    tkns.select = lambda c, a, b: a if c else b
    tkns.fma = lambda a, b, c: a * b + c
    npns = types.SimpleNamespace(**{k: getattr(tkns, k) for k in vars(tkns) if k in STRONG or k == "bool_"})
    return {"tk": tkns, "np": npns, "math": math, "__builtins__": {"abs": abs, "min": min, "max": max,
            "int": int, "float": float, "bool": bool, "round": round}}


_CONST_NS = _const_namespace()


_SPECIAL_LITS = ("math.inf", "(-math.inf)", "math.nan", "1e300", "1e-40")


def _lit_fits(code: str, t: str) -> bool:
    """Whether the literal ``code`` converts to a finite value of float type ``t``."""
    try:
        v = float(eval(code, {"math": math}))                     # noqa: S307 - literals from our list
    except Exception:  # noqa: BLE001
        return False
    return math.isfinite(v) and abs(v) <= float_max(t)


WIDE = ("int64", "uint64", "float64")


def webgpu_options(opts: Options) -> Options:
    """``opts`` restricted to what WebGPU runs (docs/webgpu.md): no 64-bit dtypes (so no
    64-bit atomics), Python ints and floats weak int32 / float32 (``Gen.fits`` bounds Python-int
    constants and arguments to int32) and no ``tk.random`` (its keys are uint64 values, which
    WebGPU passes but cannot compute with). ``tk.print`` is kept as asked (``--print``): WebGPU
    prints through a buffer since audit spec19 (it had no printf)."""
    return dataclasses.replace(opts, profile="webgpu", rng=0.0, fastmath=0.0)


class Gen(ByteRuns, Hazards, Calls, Edges):
    """Generates one Case from a seed."""

    def __init__(self, seed: int, opts: Options | None = None):
        self.seed = seed
        self.opts = opts or Options()
        self.bits32 = self.opts.profile == "webgpu"
        self.r = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.excl = self.opts.exclude
        self.types = [t for t in STRONG if (self.opts.narrow_floats or t not in NARROW_X)
                      and not (self.bits32 and t in WIDE)]
        self.counter = 0
        self.scopes: list = [{}]
        self.arrays: dict = {}
        self.features: set = set()
        self.funcs: list = []          # (name, param types, return types, source)
        self.efuncs: list = []         # effect functions (hazards.py), called by hazard statements only
        self.big_args: list = []       # Python int arguments in [2**63, 2**64) (hazards.py)
        self.efunc_views: dict = {}    # effect function -> the output-slot views it stores into (hazards.py)
        self.wrapping = False          # generating a wrapper function (calls.py)
        self.effect_alias: dict = {}   # in a function: kernel array name -> its effect parameter (calls.py)
        self.func_pnames: dict = {}    # function -> parameter names (keyword calls, calls.py)
        self.func_defaults: dict = {}  # function -> {parameter index: default literal} (calls.py)
        self.func_lines: list = []
        self.global_lines: list = []
        self.stmts_left = self.opts.max_stmts
        self.in_func = None            # the function being generated (its return types)
        self.grouped = False
        self.unsafe = False
        self.valid_guard = None        # unsafe kernels: code of "this item is inside the ndrange"
        self.ct_names: list = []       # compile-time names (constexpr parameters)
        self.func_params: set = set()  # in a function: its scalar parameters (a call may pass a constant)
        self.for_depth = 0             # for loops around the code being generated (funcs count as inside)
        self.in_loop_phase = False     # grouped kernels: inside a uniform loop
        self.retired: dict = {}        # locals whose scope ended: name -> Var (their names may be reused)
        self.rng_key = ""              # the np.uint64 key argument of tk.random calls ("": none)
        self.trips: list = []          # trip-count scalar arguments (edges.py)
        self.pfuncs = None             # (writer, reader, dtype) of the private-array functions (edges.py)
        self.edge_fns: list = []       # their (name, params, rets, source) (edges.py; not in self.funcs)

    # --- small helpers --------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}{self.counter}"

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def allowed(self, bug) -> bool:
        return bug is None or bug not in self.excl

    def retire(self, scope: dict) -> None:
        """Remember the locals of a scope that ends: later loops may reuse their names. A name
        ever assigned per item stays non-uniform (the compiler's uniformity is per name)."""
        for n, v in scope.items():
            old = self.retired.get(n)
            self.retired[n] = v if old is None or old.uni or not v.uni else Var(n, v.ty, uni=False)

    def counter_name(self, base: str, t: str, uni_only: bool = False, item_only: bool = False) -> str:
        """A loop counter's name: usually fresh, sometimes an earlier local's of the same type
        (reused names across loops and barrier segments; ``uni_only``: only names whose every
        assignment was uniform, for counters that decide whether a barrier runs; ``item_only``:
        only names already assigned per item, for item-level counters, so that no name an
        earlier barrier condition used as uniform gains a per-item assignment)."""
        live = {v.name for v in self.visible()}
        cands = sorted(n for n, v in self.retired.items()
                       if v.ty == t and n.isidentifier() and n not in live and (v.uni or not uni_only)
                       and not (v.uni and item_only))     # (not "tu[0]": an element is no name)
        if cands and self.chance(0.6):
            self.features.add("reused-name")
            per_item = [n for n in cands if not self.retired[n].uni]
            if per_item and not uni_only and not item_only and self.chance(0.7):
                # a uniform loop taking a per-item name: the class of a bug where some work
                # items saw the counter stale (docs/fuzzing.md); its counter is traced
                self.features.add("reused-item-name")
                return self.pick(per_item)
            return self.pick(cands)
        return self.fresh(base)

    def declare(self, v: Var) -> Var:
        self.scopes[-1][v.name] = v
        return v

    def visible(self) -> list:
        out = {}
        for s in self.scopes:
            out.update(s)
        return list(out.values())

    def vars_of(self, t: str, uni: bool = False, mutable: bool = False) -> list:
        return [v for v in self.visible() if v.ty == t and (v.uni or not uni) and (v.mutable or not mutable)]

    def int_range(self, t: str) -> tuple:
        """``types.int_range``, with Python ints int32 in the WebGPU profile."""
        return int_range("int32" if t == "pyint" and self.bits32 else t)

    def fits(self, v: int, t: str) -> bool:
        """``types.fits``, with Python ints int32 in the WebGPU profile."""
        return fits(v, "int32" if t == "pyint" and self.bits32 else t)

    # --- literals ---------------------------------------------------------------------------

    def lit(self, t: str, fit: str | None = None) -> Ex:
        r = self.r
        if t == "pyint":
            if fit is None and self.bits32:
                fit = "pyint"
            cands = [v for v in PYINT_LITS if fit is None or self.fits(v, fit)]
            if fit is not None and fit != "pyint" and self.chance(0.3):
                lo, hi = self.int_range(fit)
                cands = [lo, hi, lo + 1, hi - 1] + cands
            v = self.pick(cands) if self.chance(0.8) else r.randint(-20, 20)
            if fit is not None and not self.fits(v, fit):
                v = 0
            return Ex(f"({v})" if v < 0 else str(v), "pyint", True, v)
        if t == "pyfloat":
            v = self.pick(self.float_lits())
            return Ex(f"({v})" if v.startswith("-") else v, "pyfloat", True)
        if t == "lbool":
            return Ex(self.pick(["True", "False"]), "lbool", True)
        ns = self.pick(["tk", "tk", "np"])
        if t == "bool":
            return Ex(f"{ns}.bool_({self.pick(['True', 'False', '0', '1', '2', '0.0'])})", t, True)
        if t in INTS:
            lo, hi = self.int_range(t)
            v = self.pick([0, 1, 2, 3, -1, 7, lo, hi, r.randint(-100, 100), r.randint(lo, hi)])
            if self.chance(0.1):
                v = self.pick([300, -129, 70000, 2**33 + 5][:3 if self.bits32 else 4])   # explicit casts wrap
            return Ex(f"{ns}.{t}({v})", t, True)
        if t in NARROW_X:
            ns = "tk"
        lits = self.float_lits() + ["3", "-7", "1000"]
        if "cl-const-nan" in self.excl:
            lits = [x for x in lits if _lit_fits(x, t)]
        return Ex(f"{ns}.{t}({self.pick(lits)})", t, True)

    def float_lits(self) -> list:
        if "cl-const-nan" in self.excl:
            return [x for x in PYFLOAT_LITS if x not in _SPECIAL_LITS]
        return PYFLOAT_LITS

    # --- leaves -------------------------------------------------------------------------------

    def leaf(self, t: str, uni: bool = False) -> Ex:
        opts = []
        vs = self.vars_of(t, uni)
        if t == "pyint" and "const-weak-mutation" in self.excl:
            vs = [v for v in vs if v.name not in self.ct_names]
        if vs:
            opts += [("var", 4)]
        loads = self.loadable(t) if not uni else []
        if loads:
            opts += [("load", 4)]
        if t == "pyint":
            opts += [("geom", 2)]
        opts += [("lit", 2)]
        kind = self.wchoice(opts)
        if kind == "var":
            v = self.pick(vs)
            return Ex(v.name, t, v.uni, v.cval)
        if kind == "load":
            return self.load(self.pick(loads))
        if kind == "geom":
            return self.geom(uni)
        return self.lit(t)

    def wchoice(self, opts):
        tot = sum(w for _, w in opts)
        x = self.r.random() * tot
        for k, w in opts:
            x -= w
            if x <= 0:
                return k
        return opts[-1][0]

    def geom(self, uni: bool) -> Ex:
        """A Python-int work-item quantity: sizes and indices."""
        ins = [a for a in self.arrays.values() if a.role == "in"]
        ndim = self.ndim
        opts = ["ndrange", "groupsize", "ngroups"]
        if ins:
            opts += ["len", "shape", "size", "ndim"]
        if not uni:
            opts += ["gcart", "lin"]
        if self.for_depth and "ndrange-in-for" in self.excl:
            opts.remove("ndrange")
        elif self.for_depth:
            self.features.add("bug:ndrange-in-for")
        k = self.pick(opts)
        d = self.r.randrange(ndim)
        if k == "ndrange":
            return Ex(f"tk.ndrange()[{d}]", "pyint", True)
        if k == "groupsize":
            return Ex(f"tk.groupsize()[{d}]", "pyint", True)
        if k == "ngroups":
            return Ex(f"tk.ngroups()[{d}]", "pyint", True)
        if k == "gcart":
            return Ex(f"tk.index(tk.Global, tk.Cartesian)[{d}]", "pyint")
        if k == "lin":
            return Ex(self.pick(["tk.index()", "tk.index(tk.Global, tk.Linear)", "tk.index(tk.Local, tk.Linear)"]),
                      "pyint")
        a = self.pick(ins)
        if k == "len":
            return Ex(f"len({a.name})", "pyint", True)
        if k == "shape":
            return Ex(f"{a.name}.shape[{self.r.randrange(len(a.shape))}]", "pyint", True)
        if k == "size":
            return Ex(f"{a.name}.size", "pyint", True)
        return Ex(f"{a.name}.ndim", "pyint", True)

    # --- arrays ---------------------------------------------------------------------------------

    def loadable(self, t: str) -> list:
        out = []
        for a in self.arrays.values():
            if a.dtype != t or not a.readable:
                continue
            if a.role in ("in", "local", "private"):
                out.append(a)
            elif a.role in ("out", "io", "own") and 0 in a.tol and not self.in_func and not self.unsafe:
                out.append(a)
        return out

    def index_expr(self, extent_code: str, uni: bool = False) -> str:
        """An int expression in [0, extent): something modulo the extent."""
        r = self.r
        k = r.random()
        if k < 0.35:
            e = self.expr("pyint", 1, uni)
            return f"({e.code}) % {extent_code}"
        if k < 0.55:
            t = self.pick([t for t in self.types if t in INTS] + ["bool"])
            e = self.expr(t, 1, uni)
            return f"int({e.code}) % {extent_code}"
        if k < 0.75 and not uni:
            return f"{self.item_lin()} % {extent_code}"
        if k < 0.85:
            return f"abs({self.expr('pyint', 1, uni).code}) % {extent_code}"
        v = self.vars_of("pyint", uni)
        if v:
            return f"{self.pick(v).name} % {extent_code}"
        return f"{r.randint(0, 50)} % {extent_code}"

    def item_lin(self) -> str:
        return "tk.index()" if self.in_func is not None else "li"

    def slot_index(self, a: Arr, k: int) -> str:
        return f"{a.name}[li, {k}]"

    def load(self, a: Arr, uni: bool = False) -> Ex:
        if a.role == "in":
            idx = ", ".join(self.index_expr(c, uni) for c in a.dim_code)
            return Ex(f"{a.name}[{idx}]", a.dtype)
        if a.role in ("local", "private"):
            idx = ", ".join(self.index_expr(c) for c in a.dim_code)
            return Ex(f"{a.name}[{idx}]", a.dtype)
        ks = [k for k, t in enumerate(a.tol) if t == 0]
        return Ex(self.slot_index(a, self.pick(ks)), a.dtype)

    # --- expressions ----------------------------------------------------------------------------

    def expr(self, t: str, d: int, uni: bool = False) -> Ex:
        """An exact (deterministic, bit-reproducible) expression of type ``t``, depth <= d."""
        if d <= 0 or self.chance(0.18):
            return self.leaf(t, uni)
        for _ in range(10):
            try:
                return self._expr(t, d, uni)
            except _Retry:
                continue
        return self.leaf(t, uni)

    def _expr(self, t: str, d: int, uni: bool) -> Ex:
        opts = [("leaf", 2), ("binop", 7), ("unary", 1), ("ternary", 1), ("call", 2), ("cast", 2)]
        if t in ("bool", "lbool"):
            opts += [("cmp", 6), ("pred", 1)]
        if t == "bool":               # and / or / not / bool() / chains give a strong bool
            opts += [("logic", 3), ("chain", 1)]
        if self.funcs and not uni and any(len(f[2]) == 1 and f[2][0] == t for f in self.funcs):
            opts.append(("func", 2))
        if t == "int32" and self.opts.bytes > 0:          # (only when asked: other seeds keep their kernels)
            opts.append(("dot4", 1))
        k = self.wchoice(opts)
        e = getattr(self, "x_" + k)(t, d, uni)
        if is_float(t) and "cl-const-nan" in self.excl and self.const_special(e.code):
            raise _Retry
        return e

    def const_special(self, code: str) -> bool:
        """Whether ``code`` is a compile-time float expression whose value is NaN or infinite (known
        bug cl-const-nan: the OpenCL driver folds those wrongly)."""
        if not self.maybe_const(code):
            return False
        if "**" in code or "<<" in code:
            return True                   # do not evaluate possibly huge Python ints; just avoid it
        ns = dict(_CONST_NS)
        for sc in self.scopes:
            for n, v in sc.items():
                if v.cval is not None and v.ty in ("pyint",):
                    ns[n] = v.cval
                elif v.ty == "dtype" and v.cval is not None:
                    ns[n] = _CONST_NS["tk"].__dict__[v.cval if v.cval != "bool" else "bool_"]
        ns["G_WG"] = self.wg
        code = code.replace("tk.groupsize()", "G_WG")
        import warnings
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                v = eval(code, ns)                                # noqa: S307 - our own generated code
            return not math.isfinite(float(v))
        except Exception:  # noqa: BLE001 - unknown names (run-time values), domain errors: be careful
            return True

    def x_leaf(self, t, d, uni):
        return self.leaf(t, uni)

    def const_pyint(self, fit: str, uni: bool = False) -> Ex:
        """A compile-time Python int that fits ``fit`` (a literal, constexpr or global)."""
        cs = [v for v in self.visible() if v.ty == "pyint" and v.cval is not None and self.fits(v.cval, fit)
              and (v.name not in self.ct_names or "const-weak-mutation" not in self.excl)]
        if cs and self.chance(0.3):
            if any(v.name in self.ct_names for v in cs):
                self.features.add("bug:const-weak-mutation")
            v = self.pick(cs)
            return Ex(v.name, "pyint", True, v.cval)
        return self.lit("pyint", fit)

    def operands(self, op: str, t: str, d: int, uni: bool):
        cands = [c for c in PAIRS.get((op, t), ())
                 if self.allowed(c[3]) and (c[0] in self.types or c[0] in WEAK or c[0] == "lbool")
                 and (c[1] in self.types or c[1] in WEAK or c[1] == "lbool")]
        if not cands:
            raise _Retry
        # favour same-type operands a little (the common case in real kernels)
        same = [c for c in cands if c[0] == t and c[1] == t]
        a, b, need, bug = self.pick(same) if same and self.chance(0.3) else self.pick(cands)
        if bug:
            self.features.add("bug:" + bug)
        ea = self.const_pyint(b, uni) if need == "a" else self.expr(a, d - 1, uni)
        eb = self.const_pyint(a, uni) if need == "b" else self.expr(b, d - 1, uni)
        return ea, eb

    def x_binop(self, t, d, uni):
        ops = [op for op in BINOPS if (op, t) in PAIRS]
        if not ops:
            raise _Retry
        op = self.pick(ops)
        if op == "**" and is_float(t):
            # pow is not correctly rounded: only exponents whose result is exact everywhere here
            # (the others are transcendental sinks, see inexact())
            ea = self.expr(t, d - 1, uni)
            exps = ["1", "0", "1.0", "0.0"]
            if "pow-fastpath" not in self.excl:
                exps += ["2", "(-1)", "2.0", "0.5"]
                self.features.add("bug:pow-fastpath")
            eb = Ex(self.pick(exps), "pyint")
            return Ex(f"({ea.code} ** {eb.code})", t, ea.uni)
        if op in ("+", "-") and t in ("float32", "float64", "pyfloat") and self.chance(0.35):
            return self.mul_add(op, t, d, uni)
        ea, eb = self.operands(op, t, d, uni)
        code = f"({ea.code} {op} {eb.code})"
        cval = self.fold_check(code) if t == "pyint" else None
        return Ex(code, t, ea.uni and eb.uni, cval)

    def mul_add(self, op: str, t: str, d: int, uni: bool) -> Ex:
        """``a*b + c``, ``a*b - c`` or ``c - a*b`` (same-type operands): the shape a compiler
        may contract into a fused multiply-add (the data has values that cancel, data.py)."""
        def operand() -> Ex:             # mostly run-time values: the compiler folds constants
            arrs = [x for x in self.loadable(t) if x.role == "in"] if not uni else []
            return self.load(self.pick(arrs)) if arrs and self.chance(0.7) else self.expr(t, max(d - 2, 0), uni)
        a, b, c = operand(), operand(), operand()
        prod = f"({a.code} * {b.code})"
        if op == "-" and self.chance(0.5):       # a*b - a*b: 0 (or NaN), or the product's rounding error
            return Ex(f"({prod} - {prod})", t, a.uni and b.uni)
        code = f"({prod} {op} {c.code})" if self.chance(0.5) else f"({c.code} {op} {prod})"
        return Ex(code, t, a.uni and b.uni and c.uni)

    _RISK = object()

    def fold_check(self, code: str):
        """The compile-time value of a Python-int expression (None if not constant). The compiler
        folds Python ints exactly where the language wraps to int64 (known bug weak-int-fold): a
        constant expression with an intermediate value outside int64 is avoided."""
        v = self.const_eval(ast.parse(code, mode="eval").body)
        if v is Gen._RISK:
            # a constant outside int64 (or possibly): a CompileError where it meets a run-time value
            raise _Retry
        return v[1] if v is not None and v[0] == "w" else None

    def const_eval(self, n):
        """What the compiler folds expression ``n`` to: None (a run-time value), ("w", int) a
        Python int, ("s",) a constant of a NumPy type (folded with wrap-around), ("c",) some other
        constant (a float or bool, or a Python int whose value is not tracked), or Gen._RISK when a
        Python-int fold leaves int64 (or might)."""
        R = Gen._RISK
        ev = self.const_eval
        if isinstance(n, ast.Constant):
            v = n.value
            return ("w", int(v)) if isinstance(v, (int, bool)) else ("c",)
        if isinstance(n, ast.Name):
            v = next((x for x in reversed(self.scopes) if n.id in x), {}).get(n.id)
            if v is None:
                return None
            if n.id in self.module_scope or n.id in self.ct_names:
                if v.ty == "pyint" and isinstance(v.cval, int):
                    return ("w", v.cval)
                return ("c",)
            return None
        if isinstance(n, ast.Attribute):
            if n.attr == "ndim" and isinstance(n.value, ast.Name):
                a = self.arrays.get(n.value.id)
                return ("w", len(a.shape)) if a is not None else ("c",)
            if isinstance(n.value, ast.Name) and n.value.id == "math":
                return ("c",)
            return None
        if isinstance(n, ast.Subscript):
            if isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "tk.groupsize" and \
                    isinstance(n.slice, ast.Constant):
                return ("w", self.wg[n.slice.value])
            return None
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            if v is None or v is R:
                return v
            if isinstance(n.op, ast.Not) or v[0] != "w":
                return ("s",) if v[0] == "s" else ("c",)
            x = -v[1] if isinstance(n.op, ast.USub) else ~v[1] if isinstance(n.op, ast.Invert) else v[1]
            return R if not self.fits(x, "pyint") else ("w", x)
        if isinstance(n, ast.IfExp):
            c, a, b = ev(n.test), ev(n.body), ev(n.orelse)
            if R in (c, a, b):
                return R
            if c is None:
                return None
            if c[0] != "w":
                return ("c",) if (a is not None or b is not None) else None
            return a if c[1] else b
        if isinstance(n, ast.Call):
            f = ast.unparse(n.func)
            if len(n.args) != 1:
                return None if f.startswith("f") or any(ev(a) is None for a in n.args) else ("c",)
            v = ev(n.args[0])
            if v is None or v is R:
                return v
            if f in ("int", "round"):
                return v if v[0] == "w" else ("c",)
            if f in ("abs", "float", "bool") or f.startswith(("math.", "tk.index", "tk.ndrange", "tk.ngroups", "len")):
                return None if f.startswith(("tk.index", "tk.ndrange", "tk.ngroups", "len")) else ("c",)
            return ("s",)                               # a dtype cast: a NumPy-typed constant
        if isinstance(n, ast.Compare) or isinstance(n, ast.BoolOp):
            parts = [ev(x) for x in ([n.left] + n.comparators if isinstance(n, ast.Compare) else n.values)]
            if R in parts:
                return R
            return ("c",) if all(x is not None for x in parts) else None
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            if R in (a, b):
                return R
            if a is None or b is None:
                return None
            if a[0] == "s" or b[0] == "s":
                return ("s",)
            if a[0] != "w" or b[0] != "w":
                # a Python int constant whose value is unknown here: assume the worst for growing ops
                if "w" in (a[0], b[0]) or "c" in (a[0], b[0]):
                    return R if isinstance(n.op, (ast.Pow, ast.LShift, ast.Mult, ast.Add, ast.Sub)) else ("c",)
                return ("c",)
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
                  ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}.get(type(n.op))
            if op is None:
                return ("c",)
            x, y = a[1], b[1]
            if op == "**" and y < 0:
                return R                 # Python's 2 ** -3: a float (0.125), no Python int (audit user23)
            if op in ("//", "%") and y == 0 or op in ("<<", ">>") and y < 0:
                return ("c",)                             # left to run time, but a constant-ish value
            if op == "<<" and x != 0 and (y >= 64 or x.bit_length() + y > 63):
                return R
            if op == "**" and y > 4096:
                return ("c",)
            if op == "**" and abs(x) > 1 and y * x.bit_length() > 64:
                return R
            import operator
            v = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
                 "%": operator.mod, "**": operator.pow, "<<": operator.lshift, ">>": operator.rshift,
                 "&": operator.and_, "|": operator.or_, "^": operator.xor}[op](x, y)
            return R if not self.fits(v, "pyint") else ("w", v)
        return None

    def pow_special(self, eb: Ex) -> bool:
        """``x ** 0.5`` (known bug pow-fastpath: special values) is avoided in transcendental sinks."""
        return "pow-fastpath" in self.excl and eb.code.strip("()") in ("0.5", "tk.float32(0.5)", "np.float32(0.5)",
                                                                  "tk.float64(0.5)", "np.float64(0.5)")

    def x_unary(self, t, d, uni):
        k = self.r.random()
        if t == "bool" and k < 0.5:
            e = self.expr(self.pick(list(self.types) + ["pyint", "pyfloat", "lbool"]), d - 1, uni)
            return Ex(f"(not {e.code})", t, e.uni)
        if t in ("bool", "lbool") or (is_int(t) and k < 0.4):
            e = self.expr(t, d - 1, uni)
            code = f"(~{e.code})"
            return Ex(code, t, e.uni, self.fold_check(code) if t == "pyint" else None)
        e = self.expr(t, d - 1, uni)
        if self.chance(0.05):
            return Ex(f"(+{e.code})", t, e.uni, e.cval)
        code = f"(-{e.code})"
        return Ex(code, t, e.uni, self.fold_check(code) if t == "pyint" else None)

    def cond(self, d: int, uni: bool = False) -> Ex:
        """A condition: a bool, or any number (its truth value)."""
        k = self.r.random()
        if k < 0.45:
            return self.expr("lbool", d, uni)
        if k < 0.75:
            return self.expr("bool", d, uni)
        return self.expr(self.pick(list(self.types) + ["pyint", "pyfloat"]), d, uni)

    def x_ternary(self, t, d, uni):
        c = self.cond(d - 1, uni)
        a, b = self.expr(t, d - 1, uni), self.expr(t, d - 1, uni)
        return Ex(f"({a.code} if {c.code} else {b.code})", t, a.uni and b.uni and c.uni)

    def cmp_types(self, t: str):
        pool = list(self.types) + ["pyint", "pyfloat", "lbool"]
        for _ in range(20):
            a, b = self.pick(pool), self.pick(pool)
            if self.chance(0.4):
                b = a
            strong = a in STRONG or b in STRONG
            if (t == "bool") != strong or (self.bits32 and promote(a, b) == "float64"):
                continue
            if ((a in FP8 and b in ("int8", "uint8")) or (b in FP8 and a in ("int8", "uint8"))):
                if "fp8-int-operand" in self.excl:
                    continue
                self.features.add("bug:fp8-int-operand")
            return a, b
        raise _Retry

    def x_cmp(self, t, d, uni):
        a, b = self.cmp_types(t)
        ea, eb = self.expr(a, d - 1, uni), self.expr(b, d - 1, uni)
        return Ex(f"({ea.code} {self.pick(CMPS)} {eb.code})", t, ea.uni and eb.uni)

    def x_chain(self, t, d, uni):
        a, b = self.cmp_types(self.pick(["bool", "lbool"]))
        c = self.pick([a, b])
        if ((c in FP8 and b in ("int8", "uint8")) or (b in FP8 and c in ("int8", "uint8"))) and \
                "fp8-int-operand" in self.excl:
            raise _Retry
        es = [self.expr(x, d - 1, uni) for x in (a, b, c)]
        return Ex(f"({es[0].code} {self.pick(CMPS)} {es[1].code} {self.pick(CMPS)} {es[2].code})", "bool",
                  all(e.uni for e in es))

    def x_logic(self, t, d, uni):
        k = self.r.random()
        if k < 0.25:
            e = self.expr(self.pick(list(self.types) + ["pyint", "pyfloat"]), d - 1, uni)
            return Ex(f"bool({e.code})", t, e.uni)
        es = [self.cond(d - 1, uni) for _ in range(self.r.randint(2, 3))]
        op = " and " if self.chance(0.5) else " or "
        return Ex("(" + op.join(e.code for e in es) + ")", t, all(e.uni for e in es))

    def x_pred(self, t, d, uni):
        fn = self.pick(["math.isnan", "math.isinf", "math.isfinite"])
        if t == "bool":
            ft = self.pick([x for x in self.types if is_float(x)])
        else:
            ft = self.pick(["pyfloat", "pyint"])
        e = self.expr(ft, d - 1, uni)
        return Ex(f"{fn}({e.code})", t, e.uni)

    def float_to_int(self, e: Ex, target: str, wrap: str) -> str:
        """``wrap(e)`` for a float ``e`` and integer target: NaN -> 0, clamped into range first (C
        leaves out-of-range conversions undefined; docs/debugging.md)."""
        bits = (32 if self.bits32 else 64) if target == "pyint" else int(np.dtype(np_dtype(target)).itemsize * 8)
        signed = target == "pyint" or target.startswith("int")
        k = bits - 2 if signed else bits - 1
        fm = float_max(e.ty)
        while k > 0 and 2.0 ** k > fm:
            k -= 1
        hi = f"{float(2 ** k)!r}"
        lo = f"-{hi}" if signed else "0.0"
        if self.chance(0.5):
            return f"{wrap}(tk.clamp({e.code}, {lo}, {hi}) if {e.code} == {e.code} else 0.0)"
        zero = "0" if wrap in ("int", "round") else f"{wrap}(0)"
        return f"({wrap}({e.code}) if ({e.code} == {e.code} and {lo} <= {e.code} <= {hi}) else {zero})"

    def dtype_spelling(self, t: str) -> str:
        """Ways to name a dtype in a kernel: tk.T, np.T, a dtype constexpr or global, A.dtype."""
        opts = [f"tk.{t if t != 'bool' else 'bool_'}"]
        if t not in NARROW_X:
            opts.append(f"np.{t if t != 'bool' else 'bool_'}")
        for v in self.visible():
            if v.ty == "dtype" and v.cval == t:
                opts += [v.name] * 2
        for a in self.arrays.values():
            if a.dtype == t and a.role in ("in", "local", "private"):
                opts.append(f"{a.name}.dtype")
        return self.pick(opts)

    def x_cast(self, t, d, uni):
        src = self.pick(list(self.types) + ["pyint", "pyfloat", "lbool"])
        if src == t and t in NARROW:
            if "narrow-self-cast" in self.excl:
                src = "float32" if self.bits32 else "float64"
            else:
                self.features.add("bug:narrow-self-cast")
        e = self.expr(src, d - 1, uni)
        if t == "pyint":
            if is_float(src):
                if self.chance(0.3):
                    return Ex(self.float_to_int(e, "pyint", "round"), t, e.uni)
                return Ex(self.float_to_int(e, "pyint", "int"), t, e.uni)
            if self.chance(0.2) and src == "pyint":
                return Ex(f"round({e.code})", t, e.uni, e.cval)      # round() of an int is the int itself
            return Ex(f"int({e.code})", t, e.uni, e.cval if src == "pyint" else None)
        if t == "pyfloat":
            return Ex(f"float({e.code})", t, e.uni)
        if t == "lbool":
            raise _Retry                  # bool(x) is a strong bool
        if t == "bool" and self.chance(0.3):
            return Ex(f"bool({e.code})", t, e.uni)
        name = self.dtype_spelling(t)
        if t in INTS and is_float(src):
            return Ex(self.float_to_int(e, t, name), t, e.uni)
        return Ex(f"{name}({e.code})", t, e.uni)

    def x_call(self, t, d, uni):
        k = self.r.random()
        if t == "lbool" or (t == "bool" and k < 0.5):
            return self.x_minmax(t, d, uni)
        if is_float(t) and k < 0.5:
            return self.float_fn(t, d, uni)
        if t == "pyint" and k < 0.2:
            return self.geom(uni)
        if k < 0.65:
            return self.x_minmax(t, d, uni)
        if k < 0.8:
            e = self.expr(t, d - 1, uni)
            if t == "pyint" and e.const and e.cval == -(1 << 63):
                raise _Retry
            return Ex(f"abs({e.code})", t, e.uni)
        if k < 0.9:
            return self.x_select(t, d, uni)
        return self.x_clamp(t, d, uni)

    def combine(self, t, d, uni, n):
        """``n`` expressions whose NEP 50 combination is ``t`` (arguments of min/max/select)."""
        cands = [c for c in PAIRS.get(("min", t), ()) if self.allowed(c[3])
                 and all(x in self.types or x in WEAK or x == "lbool" for x in c[:2])]
        if not cands:
            raise _Retry
        a, b, need, bug = self.pick(cands)
        if bug:
            self.features.add("bug:" + bug)
        out = []
        for k in range(n):
            side = a if k == 0 else b if k == 1 else t
            other = b if k == 0 else a
            if side == "pyint" and (other in INTS or t in INTS):
                out.append(self.const_pyint(t if t in INTS else other, uni))
            else:
                out.append(self.expr(side, d - 1, uni))
        return out

    def x_minmax(self, t, d, uni):
        es = self.combine(t, d, uni, self.r.choice([2, 2, 3]))
        fn = self.pick(["min", "max"])
        return Ex(f"{fn}({', '.join(e.code for e in es)})", t, all(e.uni for e in es))

    def x_select(self, t, d, uni):
        a, b = self.combine(t, d, uni, 2)
        c = self.cond(d - 1, uni)
        return Ex(f"tk.select({c.code}, {a.code}, {b.code})", t, a.uni and b.uni and c.uni)

    def x_clamp(self, t, d, uni):
        if t in ("bool", "lbool"):
            raise _Retry
        es = self.combine(t, d, uni, 3)
        return Ex(f"tk.clamp({es[0].code}, {es[1].code}, {es[2].code})", t, all(e.uni for e in es))

    def float_args(self, t: str, n: int, d: int, uni: bool) -> list:
        """Arguments of a math function computing in ``t`` (float64 also takes integers)."""
        out = []
        for _ in range(n):
            if t == "pyfloat":
                src = self.pick(["pyfloat", "pyfloat", "pyint"])
            elif t == "float64":
                src = self.pick(["float64", "float64", "pyfloat"] + [x for x in INTS if x in self.types])
            else:
                src = self.pick([t, t, "pyfloat"])
            out.append(self.expr(src, d - 1, uni))
        if not any(e.ty == t or (t == "float64" and e.ty in INTS) for e in out):
            out[0] = self.expr(t, d - 1, uni)
        return out

    def float_fn(self, t, d, uni):
        """Exactly rounded float functions (same bits everywhere)."""
        fn = self.pick(["math.floor", "math.ceil", "math.trunc", "math.fabs", "math.sqrt", "math.copysign",
                        "math.fmod", "tk.fma", "abs", "math.floor"])
        if fn == "tk.fma" and t in ("float64", "pyfloat"):
            if "fma-overflow" in self.excl:
                fn = "math.trunc"
            else:
                self.features.add("bug:fma-overflow")
        n = {"math.copysign": 2, "math.fmod": 2, "tk.fma": 3}.get(fn, 1)
        if fn == "abs":
            e = self.expr(t, d - 1, uni)
            return Ex(f"abs({e.code})", t, e.uni)
        es = self.float_args(t, n, d, uni)
        codes = [e.code for e in es]
        if fn == "math.copysign":
            # the sign of a NaN is not specified (0.0 % 0.0 is -nan on x86 NumPy, +nan in C):
            # copysign must not read it
            codes[1] = self.nan_free(es[1])
        return Ex(f"{fn}({', '.join(codes)})", t, all(e.uni for e in es))

    def nan_free(self, e: Ex) -> str:
        if not is_float(e.ty):
            return e.code
        one = "1.0" if e.ty == "pyfloat" else f"tk.{e.ty}(1)"
        return f"({e.code} if {e.code} == {e.code} else {one})"

    def callable_funcs(self, single=None):
        """The functions whose array parameters some input array here can fill."""
        ins = [(a.dtype, len(a.shape)) for a in self.arrays.values() if a.role == "in"]
        out = []
        for f in self.funcs:
            if single is not None and not (len(f[2]) == 1 and f[2][0] == single):
                continue
            if single is None and len(f[2]) < 2:
                continue
            if all(k != "array" or ty in ins for k, ty in f[1]):
                out.append(f)
        return out

    def x_func(self, t, d, uni):
        fs = self.callable_funcs(t)
        if not fs:
            raise _Retry
        name, params, rets, _ = self.pick(fs)
        return Ex(self.call_code(name, params, d), t)

    def func_arg(self, p, d) -> str:
        kind, ty = p
        if kind == "effect":                 # (hazards.py: the accumulator the function adds to)
            return self.effect_alias.get(ty, ty)
        if kind == "array":
            cands = [a for a in self.arrays.values() if a.role == "in" and a.dtype == ty[0] and len(a.shape) == ty[1]]
            return self.pick(cands).name
        return self.expr(ty, max(d - 1, 0)).code

    # --- transcendental functions (output sinks with a tolerance) --------------------------------

    def inexact(self):
        """(code, computation type, allowed ulps): one transcendental function of exact arguments."""
        for _ in range(8):
            code, t, ulps = self._inexact()
            args = ast.parse(code, mode="eval").body
            args = [args.left, args.right] if isinstance(args, ast.BinOp) else \
                args.args if isinstance(args, ast.Call) else [args]
            if any(self.maybe_const(ast.unparse(a)) for a in args):
                if "cl-const-nan" in self.excl:
                    continue               # a compile-time argument: possibly NaN (known bug cl-const-nan)
                self.features.add("bug:cl-const-nan")
            return code, t, ulps
        raise _Retry

    def _inexact(self):
        name, n, ulps = self.pick(INEXACT_MATH)
        t = self.pick([x for x in self.types if is_float(x)] + ["pyfloat"])
        if name == "**":
            a = self.expr(t, 2)
            b = self.expr(self.pick([t, "pyfloat", "pyint"]), 2)
            if self.pow_special(b):
                b = Ex("1.75", "pyfloat")
            return f"({a.code} ** {b.code})", t, ulps
        es = self.float_args(t, n, 2, False)
        if name == "math.pow" and "pow-fastpath" in self.excl and es[1].code in ("0.5",):
            es[1] = Ex("1.5", "pyfloat")
        if self.bits32 and name in ("math.sin", "math.cos", "math.tan"):
            self.features.add("bug:wgsl-trig-range")
        return f"{name}({', '.join(e.code for e in es)})", t, ulps

    # --- statements -------------------------------------------------------------------------------

    def emit(self, line: str) -> None:
        self.out.append("    " * self.ind + line)

    def block(self, n: int, ctx: dict, declare=(), body=None) -> None:
        """An indented block of about ``n`` statements in a new scope (``pass`` if empty)."""
        self.scopes.append({})
        for v in declare:
            self.declare(v)
        self.ind += 1
        start = len(self.out)
        if body is not None:
            body()
        else:
            for _ in range(n):
                if self.stmts_left <= 0:
                    break
                self.stmt(ctx)
        if len(self.out) == start:
            self.emit("pass")
        self.ind -= 1
        self.retire(self.scopes.pop())

    def castto(self, t: str, e: Ex) -> str:
        """Code of ``e`` converted to strong type ``t`` without undefined behaviour."""
        if e.ty == t:
            return e.code
        name = f"tk.{t if t != 'bool' else 'bool_'}"
        if t in INTS and is_float(e.ty):
            return self.float_to_int(e, t, name)
        return f"{name}({e.code})"

    def any_type(self, weak: bool = True) -> str:
        pool = list(self.types) + (["pyint", "pyfloat", "lbool"] if weak else [])
        return self.pick(pool)

    def stmt(self, ctx: dict) -> None:
        self.stmts_left -= 1
        f = self.in_func is not None
        loops = ctx.get("loops", 0)
        opts = [("assign", 7), ("reassign", 3), ("aug", 3), ("if", 3), ("tuple", 1), ("annot", 1), ("chain", 1),
                ("branch", 1)]
        if loops < 2 and ctx.get("depth", 0) < 3:
            opts += [("for", 2), ("while", 1)]
        if not f:
            opts += [("store", 7), ("io", 2)]
            if self.opts.inexact_math:
                opts.append(("sink", 2))
            if self.opts.atomics:
                opts += [("atomic", 1.5), ("own", 1)]
            if ctx.get("top"):
                opts.append(("private", 0.7))
            if any(a.role == "private" for a in self.arrays.values()):
                opts.append(("pstore", 1))
            if ctx.get("ret") and not self.grouped:
                opts.append(("ret", 0.3))
        elif not self.grouped or "func-return-grouped" not in self.excl:
            opts.append(("fret", 0.6))
        if ctx.get("in_loop"):
            opts += [("break", 1), ("continue", 0.7)]
        if any(len(fn[2]) > 1 for fn in self.funcs) and not f:
            opts.append(("callstmt", 1.5))
        if self.opts.rng > 0:                  # only when asked: the draws of other seeds stay the same
            opts.append(("rng", self.opts.rng))
        if self.opts.prints > 0 and not (f and self.unsafe):     # (a function has no validity guard)
            opts.append(("print", self.opts.prints * (4 if f else 1)))   # (functions have few statements)
        if self.opts.bytes > 0 and self.bytes_here(ctx):
            opts.append(("bytes", self.opts.bytes))
        if self.opts.hazards > 0 and self.hazard_here(ctx):
            opts.append(("hazard", self.opts.hazards))
        if self.opts.calls > 0:                # (calls.py; only when asked)
            opts += self.calls_stmts(ctx)
        if self.opts.edges > 0:                # (edges.py; only when asked)
            opts += self.edges_stmts(ctx)
        k = self.wchoice(opts)
        for _ in range(6):
            try:
                getattr(self, "s_" + k)(ctx)
                return
            except _Retry:
                k = "assign"

    def s_assign(self, ctx):
        t = self.any_type()
        e = self.expr(t, self.r.randint(1, 3))
        v = self.declare(Var(self.fresh("v"), t))
        self.emit(f"{v.name} = {e.code}")

    def s_branch(self, ctx):
        """A local assigned in every branch of an if/elif/else, then used: definitely assigned.
        (Dropping one branch's assignment must be a CompileError; tests/test_fuzz.py checks it.)"""
        self.branch_assign(lambda: self.cond(2), lambda t: self.expr(t, 2), 0.4)
        self.features.add("branch-assign")

    def branch_assign(self, cond, value, elif_p: float) -> tuple:
        """``if``/(``elif`` with probability ``elif_p``)/``else``, each branch assigning
        ``value(t)`` to one fresh local of a random type ``t``, declared after; returns (name, t)."""
        t = self.any_type()
        name = self.fresh("b")
        heads = [f"if {cond().code}:"]
        if self.chance(elif_p):
            heads.append(f"elif {cond().code}:")
        heads.append("else:")
        for h in heads:
            self.emit(h)
            self.ind += 1
            self.emit(f"{name} = {value(t).code}")
            self.ind -= 1
        self.declare(Var(name, t))
        return name, t

    def s_chain(self, ctx):
        t = self.any_type()
        e = self.expr(t, 2)
        a, b = self.fresh("v"), self.fresh("v")
        self.declare(Var(a, t))
        self.declare(Var(b, t))
        self.emit(f"{a} = {b} = {e.code}")

    def s_annot(self, ctx):
        t = self.pick([x for x in self.types])
        src = self.any_type()
        if t in INTS and is_float(src):
            src = "pyint"
        if src == t and t in NARROW:
            if "narrow-self-cast" in self.excl:
                src = "pyfloat"
            else:
                self.features.add("bug:narrow-self-cast")
        e = self.expr(src, 2)
        v = self.declare(Var(self.fresh("v"), t))
        self.emit(f"{v.name}: {self.dtype_spelling(t)} = {self.store_code(t, e)}")

    def s_reassign(self, ctx):
        vs = [v for v in self.visible() if v.mutable and v.ty in ALL_TYPES and not v.uni]
        if not vs:
            raise _Retry
        v = self.pick(vs)
        self.emit(f"{v.name} = {self.expr(v.ty, 2).code}")

    def s_aug(self, ctx):
        vs = [v for v in self.visible() if v.mutable and v.ty in ALL_TYPES and not v.uni]
        if not vs:
            raise _Retry
        v = self.pick(vs)
        cands = [(op, c) for op in BINOPS for c in PAIRS.get((op, v.ty), ()) if c[0] == v.ty and self.allowed(c[3])
                 and (c[1] in self.types or c[1] in WEAK or c[1] == "lbool")]
        if not cands:
            raise _Retry
        op, (a, b, need, bug) = self.pick(cands)
        eb = self.const_pyint(a) if need == "b" else self.expr(b, 2)
        if op == "**" and is_float(v.ty):
            eb = Ex(self.pick(["1", "0"] + ([] if "pow-fastpath" in self.excl else ["2", "(-1)"])), "pyint")
        if bug:
            self.features.add("bug:" + bug)
        self.emit(f"{v.name} {op}= {eb.code}")

    def s_tuple(self, ctx):
        vs = [v for v in self.visible() if v.mutable and v.ty in ALL_TYPES and not v.uni]
        pairs = [(a, b) for a in vs for b in vs if a.name < b.name and a.ty == b.ty]
        if pairs and self.chance(0.4):
            if "tuple-swap" in self.excl:
                raise _Retry
            self.features.add("bug:tuple-swap")
            a, b = self.pick(pairs)
            self.emit(f"{a.name}, {b.name} = {b.name}, {a.name}")
            return
        ts = [self.any_type() for _ in range(self.r.randint(2, 3))]
        es = [self.expr(t, 2) for t in ts]
        names = [self.fresh("v") for _ in ts]
        self.emit(f"{', '.join(names)} = {', '.join(e.code for e in es)}")
        for n, t in zip(names, ts):
            self.declare(Var(n, t))

    def s_if(self, ctx):
        sub = dict(ctx, depth=ctx.get("depth", 0) + 1, top=False)
        self.emit(f"if {self.cond(2).code}:")
        self.block(self.r.randint(1, 3), sub)
        for _ in range(self.r.choice([0, 0, 0, 1, 2])):
            self.emit(f"elif {self.cond(2).code}:")
            self.block(self.r.randint(1, 2), sub)
        if self.chance(0.5):
            self.emit("else:")
            self.block(self.r.randint(1, 2), sub)

    def small_bound(self, uni: bool = False, hi: int = 6) -> Ex:
        """A small non-negative Python int (a loop bound)."""
        k = self.r.random()
        cs = [v for v in self.visible() if v.ty == "pyint" and v.cval is not None and 0 <= v.cval <= hi]
        if k < 0.2 and cs:
            v = self.pick(cs)
            return Ex(v.name, "pyint", True, v.cval)
        if k < 0.55:
            v = self.r.randint(0, hi)
            return Ex(str(v), "pyint", True, v)
        if k < 0.8:
            e = self.expr("pyint", 1, uni)
            return Ex(f"({e.code}) % {hi + 1}", "pyint", e.uni)
        t = self.pick([x for x in self.types if x in INTS] or ["int32"])
        e = self.expr(t, 1, uni)
        return Ex(f"int({e.code}) % {hi}", "pyint", e.uni)

    def range_header(self, uni: bool = False):
        """(code, loop variable type, uniform) of ``range(...)`` with a few iterations at most."""
        r = self.r
        k = r.random()
        if k < 0.3:
            b = self.small_bound(uni)
            return f"range({b.code})", "pyint", b.uni
        if k < 0.5:
            a, b = self.small_bound(uni, 3), self.small_bound(uni)
            if self.chance(0.3):
                a = Ex(f"({-r.randint(1, 3)})", "pyint", True)
            return f"range({a.code}, {b.code})", "pyint", a.uni and b.uni
        if k < 0.65:
            a, b = self.small_bound(uni), self.small_bound(uni)
            s = r.choice([1, 2, 3, -1, -2, -3])
            return f"range({a.code}, {b.code}, {s if s > 0 else f'({s})'})", "pyint", a.uni and b.uni
        if k < 0.75:
            a, b = self.small_bound(uni), self.small_bound(uni)
            st = self.fresh("st")
            e = self.expr("pyint", 1, uni)
            sign = self.pick(["", "-"])
            self.emit(f"{st} = {sign}(({e.code}) % 3 + 1)")
            self.declare(Var(st, "pyint", e.uni, False))
            return f"range({a.code}, {b.code}, {st})", "pyint", a.uni and b.uni and e.uni
        ints = [x for x in self.types if x in INTS]
        t = self.pick(ints)
        ns = self.pick(["tk", "np"])
        lo, hi = self.int_range(t)
        if k < 0.9:
            a, b = r.randint(0, 3), r.randint(0, 6)
            s = r.choice([1, 2, -1]) if lo < 0 else r.choice([1, 2])
            if s < 0:
                a, b = b, a
            if self.chance(0.5):
                return f"range({ns}.{t}({b}))", t, True
            return f"range({ns}.{t}({a}), {ns}.{t}({b}), {ns}.{t}({s}))", t, True
        # near the end of the type: the counter must not wrap around
        if self.chance(0.5) or lo == 0:
            s = r.randint(1, 3)
            return f"range({ns}.{t}({hi - r.randint(0, 5)}), {ns}.{t}({hi}), {s})", t, True
        s = -r.randint(1, 3)
        return f"range({ns}.{t}({lo + r.randint(0, 5)}), {ns}.{t}({lo}), ({s}))", t, True

    def for_allowed(self) -> bool:
        if self.grouped and self.ndim == 3:
            if "ndrange-in-for" in self.excl:
                return False
            self.features.add("bug:ndrange-in-for")
        return True

    def s_for(self, ctx):
        if not self.for_allowed():
            raise _Retry
        hdr, vt, _ = self.range_header()
        j = self.counter_name("j", vt, item_only=True)
        self.emit(f"for {j} in {hdr}:")
        sub = dict(ctx, loops=ctx.get("loops", 0) + 1, in_loop=True, depth=ctx.get("depth", 0) + 1, top=False)
        self.for_depth += 1
        try:
            self.block(self.r.randint(1, 4), sub, declare=[Var(j, vt, mutable=False)])
        finally:
            self.for_depth -= 1

    def s_while(self, ctx):
        w = self.fresh("w")
        self.emit(f"{w} = 0")
        self.declare(Var(w, "pyint", mutable=False))
        calls = self.opts.hazards > 0          # @tk.func calls in while conditions: only with --hazards,
        funcs, self.funcs = self.funcs, (self.funcs if calls else [])  # so other seeds keep their kernels
        try:
            b = self.small_bound(False, 5)
            c = self.cond(1)
        finally:
            self.funcs = funcs
        singles = [f[2][0] for f in self.funcs if len(f[2]) == 1]
        if calls and singles and self.chance(0.3):  # a @tk.func call: it runs before every test
            try:
                c = self.x_func(self.pick(singles), 1, False)
            except _Retry:
                pass
        form = self.r.random()
        head = f"{w} < {b.code}" if form < 0.3 else f"{w} < {b.code} and {c.code}" if form < 0.7 else \
            f"{c.code} and {w} < {b.code}"
        if form >= 0.7 and "(" not in c.code[:1] and " " in c.code:
            head = f"({c.code}) and {w} < {b.code}"
        self.emit(f"while {head}:")
        sub = dict(ctx, loops=ctx.get("loops", 0) + 1, in_loop=True, depth=ctx.get("depth", 0) + 1, top=False)

        def body():
            self.emit(f"{w} += 1")
            for _ in range(self.r.randint(1, 3)):
                if self.stmts_left > 0:
                    self.stmt(sub)
        self.block(0, sub, body=body)

    def s_break(self, ctx):
        kw = "break"
        self.emit_guarded_jump(kw)

    def s_continue(self, ctx):
        self.emit_guarded_jump("continue")

    def emit_guarded_jump(self, kw):
        if self.chance(0.8):
            self.emit(f"if {self.cond(2).code}:")
            self.ind += 1
            self.emit(kw)
            self.ind -= 1
        else:
            self.emit(kw)

    def s_ret(self, ctx):
        self.emit(f"if {self.cond(2).code}:")
        self.ind += 1
        self.emit("return")
        self.ind -= 1

    def s_fret(self, ctx):
        rets = self.in_func
        if self.grouped:
            self.features.add("bug:func-return-grouped")
        self.emit(f"if {self.cond(2).code}:")
        self.ind += 1
        self.emit("return " + self.ret_code(rets, 2))
        self.ind -= 1

    def s_callstmt(self, ctx):
        fs = self.callable_funcs()
        if not fs:
            raise _Retry
        name, params, rets, _ = self.pick(fs)
        call = self.call_code(name, params, 2)
        if self.chance(0.6):
            names = [self.fresh("v") for _ in rets]
            self.emit(f"{', '.join(names)} = {call}")
            for n, t in zip(names, rets):
                self.declare(Var(n, t, mutable=False))
        else:
            tv = self.fresh("tu")
            self.emit(f"{tv} = {call}")
            for k, t in enumerate(rets):
                self.declare(Var(f"{tv}[{k}]", t, mutable=False))

    # --- stores ---------------------------------------------------------------------------------

    def per_item(self, role: str, accept) -> Arr:
        """A per-item output array (items x slots) of role out/io/own whose dtype ``accept``s."""
        cands = [a for a in self.arrays.values() if a.role == role and accept(a.dtype) and len(a.tol) < 14]
        limit = {"out": 3, "io": 2, "own": 2}[role]
        if cands and (self.chance(0.75) or sum(a.role == role for a in self.arrays.values()) >= limit):
            return self.pick(cands)
        if sum(a.role == role for a in self.arrays.values()) >= limit:
            raise _Retry
        pool = [t for t in (ATOMIC_TYPES if role == "own" else self.types) if accept(t) and t in self.types]
        if not pool:
            raise _Retry
        a = Arr(self.fresh({"out": "o", "io": "io", "own": "ow"}[role]), self.pick(pool), (), role)
        self.arrays[a.name] = a
        return a

    def guarded(self, lines: list) -> None:
        """Emit ``lines`` (per-item stores), under the validity guard in unsafe_indices kernels."""
        if self.unsafe:
            self.emit(f"if {self.valid_guard}:")
            self.ind += 1
        for ln in lines:
            self.emit(ln)
        if self.unsafe:
            self.ind -= 1

    def maybe_const(self, code: str) -> bool:
        """Whether the compiler might fold ``code`` to a constant (conservative: a compile-time
        Python int that does not fit is a CompileError where a run-time one converts)."""
        # a @tk.func's scalar parameter is the constant a call passes it (docs/language.md: a
        # parameter bound to a compile-time constant and not reassigned folds in the body; the
        # generator never reassigns them): int(p) stored into a uint16 was a CompileError for a
        # caller's tk.int64(7067838905617760850) (fuzz21, seed 90001520)
        ct = {n for n, v in self.module_scope.items()} | set(self.ct_names) | self.func_params

        def mc(n) -> bool:
            if isinstance(n, ast.Constant):
                return True
            if isinstance(n, ast.Name):
                return n.id in ct
            if isinstance(n, ast.Attribute):
                return n.attr in ("ndim", "pi", "inf", "nan", "e") or mc(n.value)
            if isinstance(n, ast.Subscript):
                v = n.value
                return isinstance(v, ast.Call) and ast.unparse(v.func) == "tk.groupsize"
            if isinstance(n, ast.Call):
                f = ast.unparse(n.func)
                if f in ("tk.index", "tk.ndrange", "tk.ngroups", "len") or f.startswith("f"):
                    return False
                if f in ("math.isnan", "math.isinf", "math.isfinite"):
                    return True           # of an integer operand they fold, whatever the operand
                return all(mc(a) for a in n.args)
            if isinstance(n, ast.BinOp):
                return mc(n.left) and mc(n.right)
            if isinstance(n, ast.UnaryOp):
                return mc(n.operand)
            if isinstance(n, ast.Compare):
                return mc(n.left) and all(mc(c) for c in n.comparators)
            if isinstance(n, ast.IfExp):
                return mc(n.test) and (mc(n.body) or mc(n.orelse))
            if isinstance(n, ast.BoolOp):
                return any(mc(v) for v in n.values)
            return True
        return mc(ast.parse(code, mode="eval").body)

    def store_code(self, dt: str, e: Ex) -> str:
        """``e`` for an implicit conversion to ``dt`` (store, atomic value): a Python int that may
        be a compile-time constant is cast explicitly (an explicit cast wraps)."""
        if e.ty == "pyint" and dt in INTS + ("bool",) and not (e.const and self.fits(e.cval, dt)) and \
                self.maybe_const(e.code):
            return f"{self.dtype_spelling(dt)}({e.code})"
        return e.code

    def s_store(self, ctx):
        t = self.any_type()
        if t in ("float32", "float64") and self.chance(0.5):        # the shape FMA contraction changes
            e = self.mul_add(self.pick(["+", "-"]), t, self.r.randint(1, 3), False)
        else:
            e = self.expr(t, self.r.randint(1, 4))
        a = self.per_item("out", (lambda d: d in FLOATS_ALL) if is_float(t) else (lambda d: True))
        k = len(a.tol)
        a.tol.append(0)
        self.guarded([f"{self.slot_index(a, k)} = {self.store_code(a.dtype, e)}"])

    def s_sink(self, ctx):
        code, comp, ulps = self.inexact()
        a = self.per_item("out", lambda d: d in FLOATS_ALL)
        k = len(a.tol)
        a.tol.append(store_ulps(ulps, comp, a.dtype))
        self.features.add("inexact")
        self.guarded([f"{self.slot_index(a, k)} = {code}"])

    def s_io(self, ctx):
        if self.unsafe:
            raise _Retry
        a = self.per_item("io", lambda d: True)
        if not a.tol or (self.chance(0.3) and len(a.tol) < 14):
            a.tol.append(0)
        k = self.r.randrange(len(a.tol))
        dt = a.dtype
        cands = [(op, c) for op in BINOPS for r_ in ALL_TYPES for c in PAIRS.get((op, r_), ())
                 if c[0] == dt and self.allowed(c[3]) and not (is_float(r_) and dt in INTS)
                 and not (self.bits32 and r_ in WIDE)
                 and (c[1] in self.types or c[1] in WEAK or c[1] == "lbool")]
        if not cands or self.chance(0.15):
            t = self.any_type() if not dt in INTS else self.pick([x for x in self.types if not is_float(x)] + ["pyint"])
            e = self.expr(t, 2)
            self.emit(f"{self.slot_index(a, k)} = {self.store_code(dt, e)}")
            return
        op, (_, b, need, bug) = self.pick(cands)
        eb = self.const_pyint(dt) if need == "b" else self.expr(b, 2)
        if op == "**" and (is_float(dt) or is_float(b)):
            if is_float(dt):
                eb = Ex(self.pick(["1", "0"] + ([] if "pow-fastpath" in self.excl else ["2", "(-1)"])), "pyint")
            else:
                raise _Retry
        if bug:
            self.features.add("bug:" + bug)
        self.features.add("io")
        self.emit(f"{self.slot_index(a, k)} {op}= {eb.code}")

    def s_private(self, ctx):
        t = self.pick(self.types)
        self.new_private(t, self.r.randint(1, 5))
        self.features.add("private")

    def new_private(self, t: str, n: int) -> Arr:
        """A 1-D ``tk.private`` array of ``n`` elements of ``t``, filled, readable from here on."""
        a = Arr(self.fresh("pv"), t, (n,), "private", dim_code=(str(n),), readable=False)
        m = self.fresh("m")
        self.emit(f"{a.name} = tk.private({self.dtype_spelling(t)}, ({n},))")
        self.emit(f"for {m} in range({n}):")
        self.scopes.append({m: Var(m, "pyint", mutable=False)})
        self.ind += 1
        self.emit(f"{a.name}[{m}] = {self.castto(t, self.expr(self.any_type(), 2))}")
        self.ind -= 1
        self.scopes.pop()
        a.readable = True
        self.arrays[a.name] = a
        return a

    def s_pstore(self, ctx):
        a = self.pick([a for a in self.arrays.values() if a.role == "private"])
        idx = ", ".join(self.index_expr(c) for c in a.dim_code)          # (2-D ones: calls.py)
        self.emit(f"{a.name}[{idx}] = {self.castto(a.dtype, self.expr(self.any_type(), 2))}")

    # --- random numbers and printing (Options.rng, Options.prints) --------------------------------

    def rng_word(self, t: str = "uint32") -> str:
        """An integer for a Philox key or counter word of type ``t``: any int type (the call
        converts it, wrapping), often the item's index; a Python int that may be a compile-time
        constant is cast explicitly (a constant that does not fit is a CompileError, seed 42003178)."""
        k = self.r.random()
        names = {v.name for v in self.visible()}
        if k < 0.3 and "li" in names:
            return self.pick(["li", "li + 1", "2 * li", "li * 65537"])
        if k < 0.45 and self.rng_key in names:
            return self.rng_key
        src = self.pick([x for x in self.types if x in INTS] + ["pyint", "bool", "lbool"])
        return self.store_code(t, self.expr(src, 1))

    def s_rng(self, ctx):
        """``tk.random``: Philox words, or bits/uniform/normal of (key, counter) (SPEC 8: the same
        numbers on every backend; ``normal`` bit-exact where the backend has float64)."""
        kind = self.pick(["philox", "bits", "uniform", "normal", "uniform", "normal"])
        self.features.add("rng-" + kind)
        if kind == "philox":
            names = [self.fresh("r") for _ in range(4)]
            self.emit(f"{', '.join(names)} = tk.random.philox4x32({', '.join(self.rng_word() for _ in range(6))})")
            for n in names:
                self.declare(Var(n, "uint32", mutable=False))
            if self.in_func is None:           # (in a @tk.func the words flow on as locals)
                for n in self.r.sample(names, self.r.randint(1, 4)):
                    self.store_var(n, "uint32")
            return
        key = self.rng_key if self.rng_key in {v.name for v in self.visible()} and self.chance(0.7) \
            else self.rng_word("uint64")
        n = self.fresh("r")
        t = "uint32" if kind == "bits" else "float32"
        self.emit(f"{n} = tk.random.{kind}({key}, {self.rng_word('uint64')})")
        self.declare(Var(n, t, mutable=False))
        if self.in_func is None:
            self.store_var(n, t)

    def s_print(self, ctx):
        """``tk.print`` of a tag, the item's index (in the kernel; a ``@tk.func`` prints its
        values only, once per call) and a few values; the runner compares the printed lines
        (sorted: groups run concurrently) with the reference's."""
        vals = [self.expr(self.pick(list(self.types) + ["pyint", "pyfloat", "lbool"]),
                          self.r.randint(1, 2)).code for _ in range(self.r.randint(0, 3))]
        tag = self.fresh("P")
        self.features.add("print")
        if self.in_func is not None:
            self.features.add("print-func")
            self.emit(f"tk.print({', '.join([repr(tag)] + vals)})")
            return
        self.guarded([f"tk.print({', '.join([repr(tag), 'li'] + vals)})"])

    # --- atomics --------------------------------------------------------------------------------

    def acc_array(self) -> Arr:
        accs = [a for a in self.arrays.values() if a.role == "acc"]
        if accs and (self.chance(0.6) or len(accs) >= 2):
            return self.pick(accs)
        t = self.pick([x for x in ATOMIC_TYPES if x in self.types])
        shape = (self.r.randint(1, 6),) if self.chance(0.7) else (self.r.randint(1, 3), self.r.randint(1, 3))
        a = Arr(self.fresh("acc"), t, shape, "acc", dim_code=tuple(str(n) for n in shape))
        # one family of commuting operations per array: the result cannot depend on the order
        fams = [("add", "sub"), ("min",), ("max",)]
        if not t.startswith("float"):
            fams += [("and",), ("or",), ("xor",)]
        a.own = ",".join(self.pick(fams))
        self.arrays[a.name] = a
        return a

    def exact_float_value(self, t: str, lo: int = -16, hi: int = 16, uni: bool = False) -> str:
        """An integer-valued float of type ``t`` (its sums are exact in any order)."""
        e = self.expr(self.pick(["pyint", "pyint"] + [x for x in self.types if x in INTS]), 1, uni)
        conv = "float" if t == "pyfloat" else f"tk.{t}"
        return f"{conv}(int({e.code}) % {hi - lo + 1} + ({lo}))"

    def int_value(self, t: str, d: int = 2) -> str:
        src = self.pick([x for x in self.types if x in INTS] + ["pyint", "bool", "lbool"])
        return self.store_code(t, self.expr(src, d))

    def s_atomic(self, ctx):
        a = self.acc_array()
        fl = a.dtype in ("float32", "float64")
        op = self.pick(a.own.split(","))
        idx = ", ".join(self.index_expr(c) for c in a.dim_code)
        if len(a.dim_code) > 1 or self.chance(0.2):
            idx = f"({idx})" if len(a.dim_code) > 1 else idx
        v = self.exact_float_value(a.dtype) if fl else self.int_value(a.dtype)
        self.features.add("atomic")
        self.guarded([f"tk.atomic_{op}({a.name}, {idx}, {v})"])

    def owned_atomic(self, arr: str, idx: str, elem: str, t: str) -> str:
        """A call of any atomic (exchange and compare-and-swap too) on the element ``elem``
        (``arr[idx]``) that only this item touches, so that its old value is defined."""
        fl = t in ("float32", "float64")
        op = self.pick(["add", "sub", "min", "max", "exchange", "cas"] + ([] if fl else ["and", "or", "xor"]))

        def val():
            return self.expr(self.pick([t, "pyfloat", t]), 2).code if fl else self.int_value(t)
        if op == "cas":      # compared bit for bit: only expected values whose bits agree everywhere (no NaN)
            exp = elem if self.chance(0.6) else (self.exact_float_value(t) if fl else val())
            return f"tk.atomic_cas({arr}, {idx}, {exp}, {val()})"
        return f"tk.atomic_{op}({arr}, {idx}, {val()})"

    def s_own(self, ctx):
        a = self.per_item("own", lambda d: d in ATOMIC_TYPES)
        if not a.tol or (self.chance(0.4) and len(a.tol) < 14):
            a.tol.append(0)
        k = self.r.randrange(len(a.tol))
        call = self.owned_atomic(a.name, f"(li, {k})", f"{a.name}[li, {k}]", a.dtype)
        self.features.add("atomic-own")
        name = self.fresh("old")
        self.guarded([f"{name} = {call}"])
        if not self.unsafe:
            self.declare(Var(name, a.dtype, mutable=False))

    # --- device functions -------------------------------------------------------------------------

    def gen_func(self, effect: list | None = None, rets: list | None = None) -> tuple:
        """A ``@tk.func`` (recorded in ``self.funcs``, or returned only when ``effect`` is given):
        scalar and array parameters, a few statements, returns of ``rets`` (drawn when None; an
        element may be a tuple of types, a nested tuple return). ``effect`` (hazards.py): the
        arrays (an accumulator, maybe a per-item output) the function takes as its last
        parameters and changes (``effect_stmts``)."""
        name = self.fresh("f")
        params = []
        pnames = []
        ins = [a for a in self.arrays.values() if a.role == "in"]
        for _ in range(self.r.randint(1, 3)):
            params.append(("scalar", self.any_type()))
            pnames.append(self.fresh("p"))
        if ins and self.chance(0.35):
            a = self.pick(ins)
            params.append(("array", (a.dtype, len(a.shape))))
            pnames.append(self.fresh("A"))
        for a in effect or ():
            params.append(("effect", a.name))
            pnames.append(self.fresh("E"))
        if rets is None:
            rets = [self.any_type() for _ in range(self.pick([1, 1, 1, 2, 3]))]
        dflt = self.default_params(params, pnames) if self.opts.calls > 0 else {}
        saved = (self.out, self.ind, self.scopes, self.arrays, self.in_func, self.stmts_left, self.for_depth,
                 self.effect_alias, self.func_params)
        self.func_params = {pn for pn, (kind, _) in zip(pnames, params) if kind == "scalar"}
        self.effect_alias = {a.name: pn for a, pn in zip(effect, pnames[-len(effect):])} if effect else {}
        self.out, self.ind, self.in_func = [], 1, rets
        self.for_depth = 1                         # a call may sit in a loop
        self.scopes = [dict(self.module_scope)]
        self.arrays = {}
        for pn, (kind, ty) in zip(pnames, params):
            if kind == "array":
                dt, nd = ty
                self.arrays[pn] = Arr(pn, dt, (1,) * nd, "in",
                                      dim_code=tuple(f"len({pn})" if d == 0 else f"{pn}.shape[{d}]" for d in range(nd)))
            elif kind == "scalar":
                self.declare(Var(pn, ty, mutable=False))
        self.stmts_left = self.r.randint(0, 5)
        ctx = {"top": False}
        at = self.r.randint(0, self.stmts_left) if effect is not None else None
        while self.stmts_left > 0 or at is not None:
            if at is not None and self.stmts_left <= at:          # (blocks take several statements)
                self.effect_stmts(pnames[-len(effect):], effect)
                at = None
            if self.stmts_left > 0:
                self.stmt(ctx)
        self.emit("return " + self.ret_code(rets, 3))
        body = self.out
        (self.out, self.ind, self.scopes, self.arrays, self.in_func, self.stmts_left, self.for_depth,
         self.effect_alias, self.func_params) = saved
        self.func_pnames[name], self.func_defaults[name] = pnames, dflt
        heads = [f"{pn}={dflt[k]}" if k in dflt else pn for k, pn in enumerate(pnames)]
        src = "@tk.func\n" + f"def {name}({', '.join(heads)}):\n" + "\n".join(body) + "\n"
        fn = (name, params, rets, src)
        if effect is None:
            self.funcs.append(fn)
            self.features.add("func")
            if len(rets) > 1:
                self.features.add("func-tuple")
        return fn

    def ret_code(self, rets: list, d: int) -> str:
        """The values of a ``return`` of types ``rets`` (a tuple element: a nested tuple)."""
        return ", ".join(f"({self.ret_code(list(t), d)})" if isinstance(t, tuple) else self.expr(t, d).code
                         for t in rets)

    # --- kernel bodies --------------------------------------------------------------------------

    def flat_body(self) -> None:
        ctx = {"top": True, "ret": True}
        while self.stmts_left > 0:
            self.stmt(ctx)

    def uni_cond(self) -> Ex:
        return self.cond(1, uni=True)

    def lm_write(self, lm: Arr) -> None:
        """``tk.synchronize(); lm[own] = value; tk.synchronize()`` (nobody reads while items write)."""
        self.emit("tk.synchronize()")
        lm.readable = False
        try:
            e = self.expr(self.any_type(), 2)
        finally:
            lm.readable = True
        lm.readable = False
        self.emit(f"{lm.name}[{lm.own}] = {self.castto(lm.dtype, e)}")
        lm.readable = True
        self.emit("tk.synchronize()")
        self.features.add("barrier")

    def phase(self, depth: int) -> None:
        """One stretch of a grouped kernel; barriers only under uniform control flow."""
        lms = [a for a in self.arrays.values() if a.role == "local" and not a.name.startswith("la")]
        opts = [("rw", 4), ("flat", 3), ("collective", 2), ("uniform", 1 + 2 * self.opts.hazards * bool(self.efuncs))]
        if depth < 2:
            opts += [("loop", 2 if self.for_allowed() else 0), ("while", 1), ("uif", 1.5)]
            if self.opts.calls > 0:                      # (calls.py; only when asked)
                opts.append(("uwhile", self.opts.calls))
        if depth == 0:
            opts += [("latomic", 1 if self.opts.atomics else 0), ("ret", 0.4 if not self.unsafe else 0),
                     ("lown", 0.6 if self.opts.atomics else 0)]
        k = self.wchoice(opts)
        if k == "rw":
            lm = self.pick(lms)
            t = self.fresh("t")
            self.emit(f"{t} = {self.load(lm).code}")
            self.declare(Var(t, lm.dtype))
            for _ in range(self.r.randint(0, 2)):
                self.stmt({"loops": 0})
            self.lm_write(lm)
        elif k == "flat":
            for _ in range(self.r.randint(1, 3)):
                self.stmt({"loops": 0})
        elif k == "lown":
            self.local_owned_atomics()
        elif k == "collective":
            if depth > 0 and "pocl-collective-loop" in self.excl and self.in_loop_phase:
                self.collective_guard_fallback()
            else:
                if depth > 0 and self.in_loop_phase:
                    self.features.add("bug:pocl-collective-loop")
                self.collective()
        elif k == "uniform":
            if self.single_efuncs() and self.chance(0.7):    # (hazards.py: effect calls, once per group)
                e = self.hazard_expr(2)
                t = e.ty
                self.features.add("uniform-effect")
            else:
                t = self.any_type()
                e = self.expr(t, 2)
            u = self.fresh("u")
            self.emit(f"{u} = tk.uniform({e.code})")
            self.declare(Var(u, t, uni=True, mutable=False))
            self.features.add("uniform")
            self.store_var(u, t)
        elif k == "loop":
            hdr, vt, _ = self.range_header(uni=True)
            if "range(" in hdr and not self.is_small_header(hdr):
                hdr = "range(2)"
            r = self.counter_name("r", vt)
            uni = r not in self.retired or self.retired[r].uni
            # Every work item folds the counter into a running value and stores it: a counter
            # that some items see stale (a reused per-item name, docs/fuzzing.md) shows up.
            trace = self.fresh("s") if (not uni or self.chance(0.3)) else None
            if trace:
                self.emit(f"{trace} = 0")
                self.declare(Var(trace, "pyint"))
                self.features.add("counter-trace")
            self.emit(f"for {r} in {hdr}:")
            self.scopes.append({r: Var(r, vt, uni=uni, mutable=False)})
            self.ind += 1
            self.for_depth += 1
            saved, self.in_loop_phase = self.in_loop_phase, True
            if trace:
                self.emit(f"{trace} = {trace} * 3 + int({r})")
            self.uniform_jump()
            for _ in range(self.r.randint(1, 2)):
                self.phase(depth + 1)
            self.uniform_jump()
            self.in_loop_phase = saved
            self.for_depth -= 1
            self.ind -= 1
            self.retire(self.scopes.pop())
            if trace:
                self.store_var(trace, "pyint")
        elif k == "while":
            # a fresh name: the compiler decides uniformity per name, and an earlier local whose
            # value was uniform may have been assigned under per-item control flow (a loop over
            # a per-item range), which makes the name non-uniform and the barrier a CompileError
            w = self.fresh("wr")
            self.emit(f"{w} = 0")
            b = self.small_bound(uni=True, hi=3)
            self.emit(f"while {w} < {b.code}:")
            self.scopes.append({w: Var(w, "pyint", uni=True, mutable=False)})
            self.ind += 1
            self.emit(f"{w} += 1")
            saved, self.in_loop_phase = self.in_loop_phase, True
            self.uniform_jump()
            self.phase(depth + 1)
            self.in_loop_phase = saved
            self.ind -= 1
            self.retire(self.scopes.pop())
        elif k == "uif":
            self.emit(f"if {self.uni_cond().code}:")
            self.scopes.append({})
            self.ind += 1
            self.phase(depth + 1)
            self.ind -= 1
            self.scopes.pop()
            if self.chance(0.5):
                self.emit("else:")
                self.scopes.append({})
                self.ind += 1
                self.phase(depth + 1)
                self.ind -= 1
                self.scopes.pop()
        elif k == "uwhile":
            self.uniform_while(depth)
        elif k == "latomic":
            self.local_atomics()
        elif k == "ret":
            self.emit(f"if {self.cond(2).code}:")
            self.ind += 1
            self.emit("return")
            self.ind -= 1
            self.features.add("return-before-barrier")

    @staticmethod
    def is_small_header(hdr: str) -> bool:
        return True

    def collective_guard_fallback(self) -> None:
        """Instead of a collective inside a loop (known bug pocl-collective-loop): a barrier phase."""
        lms = [a for a in self.arrays.values() if a.role == "local" and a.name.startswith("lm")]
        self.lm_write(self.pick(lms))

    def uniform_jump(self) -> None:
        if self.chance(0.2):
            self.emit(f"if {self.uni_cond().code}:")
            self.ind += 1
            self.emit(self.pick(["break", "continue"]))
            self.ind -= 1

    def store_var(self, name: str, t: str) -> None:
        try:
            a = self.per_item("out", (lambda d: d in FLOATS_ALL) if is_float(t) else (lambda d: True))
        except _Retry:
            return
        k = len(a.tol)
        a.tol.append(0)
        self.guarded([f"{self.slot_index(a, k)} = {self.store_code(a.dtype, Ex(name, t))}"])

    def collective(self) -> None:
        kind = self.pick(["reduce", "reduce", "scan"])
        t = self.pick([x for x in self.types] + ["pyint", "lbool"])
        if self.opts.calls > 0:                         # (calls.py: an effect function's type)
            t = self.collective_type(t)
        if t in ("bool", "lbool"):
            op = self.pick(["and", "or", "min", "max", "add", "mul"])
        elif is_float(t):
            op = self.pick(["add", "min", "max", "mul"])
            if t == "float8_e4m3fn" and op in ("min", "max"):
                if "fp8-minmax-identity" in self.excl:
                    op = "add"
                else:
                    self.features.add("bug:fp8-minmax-identity")
        else:
            op = self.pick(["add", "mul", "min", "max", "and", "or"])
        if is_float(t):
            if op == "mul":
                e = self.expr("pyint", 1)
                conv = f"tk.{t}"
                v = f"{conv}((int({e.code}) % 2 + 1) * (1 - 2 * (int({self.expr('pyint', 1).code}) % 2)))"
            elif op == "add" and t in ("float16",) + NARROW_X:
                v = self.exact_float_value(t, -2, 2)
            else:
                v = self.exact_float_value(t, -100, 100) if op != "add" else self.exact_float_value(t, -8, 8)
        else:
            v = self.expr(t, 2).code
        if self.opts.calls > 0:                         # (calls.py: an effect call, every item's runs)
            v = self.collective_arg(t, v)
        rt = ("int32" if self.bits32 else "int64") if t in ("bool", "lbool") and op in ("add", "mul") else t
        c = self.fresh("c")
        if kind == "reduce":
            call = f'tk.group_reduce({v}, "{op}")'
        else:
            inc = self.pick(["", ", inclusive=True", ", inclusive=False"])
            call = f'tk.group_scan({v}, "{op}"{inc})'
        self.emit(f"{c} = {call}")
        self.declare(Var(c, rt, mutable=False))
        self.features.add("collective")
        self.store_var(c, rt)

    def local_atomics(self) -> None:
        t = self.pick([x for x in ATOMIC_TYPES if x in self.types])
        m = self.r.randint(1, 5)
        la = Arr(self.fresh("la"), t, (m,), "local", dim_code=(str(m),), readable=False)
        self.emit(f"{la.name} = tk.localmem({self.dtype_spelling(t)}, ({m},))")
        q = self.fresh("q")
        self.emit("if ll == 0:")
        self.ind += 1
        self.emit(f"for {q} in range({m}):")
        self.ind += 1
        init = self.exact_float_value(t, -4, 4) if t.startswith("float") else f"tk.{t}({q} * 3 - 2)"
        self.emit(f"{la.name}[{q}] = {init}")
        self.ind -= 2
        self.emit("tk.synchronize()")
        fl = t.startswith("float")
        fams = [("add", "sub"), ("min",), ("max",)] + ([] if fl else [("and",), ("or",), ("xor",)])
        fam = self.pick(fams)
        for _ in range(self.r.randint(1, 3)):
            op = self.pick(fam)
            v = self.exact_float_value(t) if fl else self.int_value(t)
            self.emit(f"tk.atomic_{op}({la.name}, {self.index_expr(str(m))}, {v})")
        self.read_after_atomics(la, "local-atomic")

    def local_owned_atomics(self) -> None:
        """Atomics of every op (exchange and compare-and-swap too) on the element of a local array
        each item owns (its local index), their old values stored; then any element is read."""
        t = self.pick([x for x in ATOMIC_TYPES if x in self.types])
        la = Arr(self.fresh("la"), t, (math.prod(self.wg),), "local", dim_code=(self.wcode,), readable=False)
        fl = t.startswith("float")
        q = self.fresh("q")
        self.emit(f"{la.name} = tk.localmem({self.dtype_spelling(t)}, ({self.wcode},))")
        self.emit("if ll == 0:")
        self.emit(f"    for {q} in range({self.wcode}):")
        init = self.exact_float_value(t, -4, 4) if fl else f"tk.{t}({q} * 5 - 7)"
        self.emit(f"        {la.name}[{q}] = {init}")
        self.emit("tk.synchronize()")
        for _ in range(self.r.randint(1, 3)):
            old = self.fresh("old")
            self.emit(f"{old} = {self.owned_atomic(la.name, 'll', f'{la.name}[ll]', t)}")
            self.declare(Var(old, t, mutable=False))
            self.store_var(old, t)
        self.read_after_atomics(la, "local-atomic-own")

    def read_after_atomics(self, la: Arr, feature: str) -> None:
        """After a local array's atomics: a barrier, then every item reads one element and stores it."""
        self.emit("tk.synchronize()")
        la.readable = True
        self.arrays[la.name] = la
        self.features.add(feature)
        t2 = self.fresh("t")
        self.emit(f"{t2} = {la.name}[{self.index_expr(la.dim_code[0])}]")
        self.declare(Var(t2, la.dtype, mutable=False))
        self.store_var(t2, la.dtype)

    def grouped_body(self) -> None:
        wg = self.wg
        nd = self.ndim
        self.emit("ll = tk.index(tk.Local, tk.Linear)")
        self.emit("gl = tk.index(tk.Group, tk.Linear)")
        self.declare(Var("ll", "pyint", mutable=False))
        self.declare(Var("gl", "pyint", uni=True, mutable=False))
        wsize = math.prod(wg)
        k = self.r.random()
        if k < 0.3:
            wcode = str(wsize)
        elif k < 0.6 and self.wg_constexpr:
            wcode = self.wg_constexpr
        else:
            wcode = " * ".join(f"tk.groupsize()[{d}]" for d in range(nd))
        self.wcode = wcode
        if self.chance(0.3):                 # the group's coordinates: uniform values
            gcs = [self.fresh("gc") for _ in range(nd)]
            self.emit(f"{', '.join(gcs)}{',' if nd == 1 else ''} = tk.index(tk.Group, tk.Cartesian)")
            for n in gcs:
                self.declare(Var(n, "pyint", uni=True, mutable=False))
            self.features.add("group-cartesian")
        pre = self.r.randint(0, 4)
        ctx = {"loops": 0, "bytes_ok": True}      # (read only with Options.bytes: top level of the body)
        for _ in range(pre):
            self.stmt(ctx)
        nlm = self.r.choice([1, 1, 2])
        for _ in range(nlm):
            t = self.pick(self.types)
            cart = nd > 1 and self.chance(0.4)
            if cart:
                dims = tuple(f"tk.groupsize()[{d}]" if self.chance(0.5) else str(wg[d]) for d in range(nd))
                lm = Arr(self.fresh("lm"), t, tuple(wg), "local", dim_code=dims, readable=False)
                self.emit(f"{lm.name} = tk.localmem({self.dtype_spelling(t)}, ({', '.join(dims)},))")
                lc = self.fresh("lc")
                self.emit(f"{lc} = tk.index(tk.Local, tk.Cartesian)")
                lm.own = ", ".join(f"{lc}[{d}]" for d in range(nd))
            else:
                lm = Arr(self.fresh("lm"), t, (wsize,), "local", dim_code=(wcode,), readable=False)
                self.emit(f"{lm.name} = tk.localmem({self.dtype_spelling(t)}, ({wcode},))")
                lm.own = "ll"
            self.arrays[lm.name] = lm
            # the group's first item initialises every element (items past the ndrange never write)
            self.emit("if ll == 0:")
            self.ind += 1
            ms = [self.fresh("m") for _ in lm.dim_code]
            for d, (m, c) in enumerate(zip(ms, lm.dim_code)):
                self.emit(f"for {m} in range({c}):")
                self.ind += 1
            self.scopes.append({m: Var(m, "pyint", mutable=False) for m in ms})
            self.for_depth += 1
            e = self.expr(self.pick(["pyint", t]), 1)
            self.for_depth -= 1
            self.emit(f"{lm.name}[{', '.join(ms)}] = {self.castto(t, e)}")
            self.scopes.pop()
            self.ind -= 1 + len(ms)
        self.emit("tk.synchronize()")
        for lm in [a for a in self.arrays.values() if a.role == "local"]:
            lm.readable = True
        for lm in [a for a in self.arrays.values() if a.role == "local"]:
            self.lm_write(lm)
        self.features.add("localmem")
        for _ in range(self.r.randint(1, 3)):
            self.phase(0)
        for lm in [a for a in self.arrays.values() if a.role == "local" and a.name.startswith("lm")]:
            t = self.fresh("t")
            self.emit(f"{t} = {self.load(lm).code}")
            self.declare(Var(t, lm.dtype, mutable=False))
            self.store_var(t, lm.dtype)
        ctx = {"loops": 0}
        while self.stmts_left > 0:
            self.stmt(ctx)

    # --- the whole case ---------------------------------------------------------------------------

    def geometry(self) -> None:
        r = self.r
        mx = self.opts.max_items
        self.ndim = nd = r.choice([1, 1, 1, 2, 2, 3])
        if nd == 1:
            counts = [r.randint(1, mx) if self.chance(0.8) else r.randint(1, 8)]
        elif nd == 2:
            counts = [r.randint(1, 10), r.randint(1, 10)]
        else:
            counts = [r.randint(1, 5), r.randint(1, 4), r.randint(1, 5)]
        while math.prod(counts) > mx:
            counts[counts.index(max(counts))] -= 1
        self.counts = counts
        dims = []
        offset = False
        for c in counts:
            if self.chance(0.2):
                start, step = r.randint(-3, 6), r.choice([1, 1, 2, 3, -1, -2])
                dims.append(range(start, start + c * step, step))
                offset = True
            else:
                dims.append(c)
        self.offset = offset
        self.ndrange = dims[0] if nd == 1 and self.chance(0.6) else tuple(dims)
        if nd == 1:
            wgs = [(w,) for w in (1, 2, 3, 4, 5, 7, 8, 16, 32, 64)]
        elif nd == 2:
            wgs = [(a, b) for a in (1, 2, 3, 4) for b in (1, 2, 4, 5, 8)]
        else:
            wgs = [(a, b, c) for a in (1, 2) for b in (1, 2, 3) for c in (1, 2, 4)]
        self.wg = self.pick(wgs)
        k = r.random()
        self.static_wg = self.launch_wg = None
        if self.grouped or k < 0.6:
            if self.chance(0.5):
                self.static_wg = self.wg if (nd > 1 or self.chance(0.5)) else self.wg[0]
            else:
                self.launch_wg = self.wg if (nd > 1 or self.chance(0.5)) else self.wg[0]
        else:
            from ...kernel import DEFAULT_WORKGROUP
            self.wg = DEFAULT_WORKGROUP[nd]

    def generate(self) -> Case:
        r = self.r
        o = self.opts
        self.grouped = self.chance(o.grouped)
        self.geometry()
        self.unsafe = self.grouped and self.ndim == 1 and self.chance(0.2)
        self.n_items = math.prod(self.counts)
        self.module_scope: dict = {}
        self.out, self.ind = [], 1
        # module globals (compile-time constants)
        for _ in range(r.randint(0, 3)):
            g = self.fresh("G")
            k = r.random()
            if k < 0.4:
                v = self.pick([0, 1, 2, 3, 5, 7, -4, 100, 2**40][:8 if self.bits32 else 9])
                self.global_lines.append(f"{g} = {v}")
                self.module_scope[g] = Var(g, "pyint", True, False, v)
            elif k < 0.6:
                v = self.pick(["0.75", "-2.5", "1e-3", "3.0"])
                self.global_lines.append(f"{g} = {v}")
                self.module_scope[g] = Var(g, "pyfloat", True, False)
            elif k < 0.75:
                v = self.pick(["True", "False"])
                self.global_lines.append(f"{g} = {v}")
                self.module_scope[g] = Var(g, "lbool", True, False)
            else:
                t = self.pick(self.types)
                self.global_lines.append(f"{g} = tk.{t if t != 'bool' else 'bool_'}")
                self.module_scope[g] = Var(g, "dtype", True, False, t)
        # inputs
        params, specs = [], []
        for _ in range(r.randint(1, 4)):
            t = self.pick(self.types)
            name = self.fresh("x")
            if self.chance(0.75):
                shape = (r.randint(1, 33),)
            else:
                shape = (r.randint(1, 6), r.randint(1, 6))
            dim = tuple(f"len({name})" if d == 0 and self.chance(0.5) else f"{name}.shape[{d}]"
                        for d in range(len(shape)))
            self.arrays[name] = Arr(name, t, shape, "in", dim_code=dim)
            data = random_values(t, math.prod(shape), self.nprng).reshape(shape)
            view = None
            if self.chance(0.15):                  # a strided view: the kernel is specialised for it
                view = r.choice([2, 3])
                big = random_values(t, math.prod(shape) * view, self.nprng).reshape(shape[:-1] + (shape[-1] * view,))
                big[..., ::view] = data
                data = big
            const = self.chance(0.8)
            params.append(f"{name}: tk.Const" if const else name)
            specs.append(ArgSpec(name, "array", data, "in", const, view=view))
        if o.bytes > 0 and self.chance(0.8):           # byte runs (bytegen.py): only when asked
            self.byte_args(params, specs)
        # scalars and constexprs
        kscope = dict(self.module_scope)
        for _ in range(r.randint(0, 4)):
            name = self.fresh("s")
            k = r.random()
            if k < 0.3:
                v = self.pick([x for x in PYINT_LITS[:32] if self.fits(x, "pyint")]) if self.chance(0.5) \
                    else r.randint(-1000, 1000)
                ty = "pyint"
            elif k < 0.5:
                v = float(self.pick(edge_values("pyfloat")))
                ty = "pyfloat"
            elif k < 0.6:
                v = self.chance(0.5)
                ty = "lbool"
            else:
                ty = self.pick([t for t in STRONG if t not in NARROW_X and
                                (t != "float16" or "f16-scalar-arg" not in self.excl)])
                if ty == "float16":
                    self.features.add("bug:f16-scalar-arg")
                v = random_values(ty, 1, self.nprng)[0]
            params.append(name)
            specs.append(ArgSpec(name, "scalar", v))
            # --params: an argument the body may assign to like any local (so no longer uniform);
            # every compiled backend read a stale copy of one assigned in a loop (adx21)
            mutable = o.params > 0 and ty in STRONG and self.chance(o.params)
            kscope[name] = Var(name, ty, not mutable, mutable)
            if mutable:
                self.features.add("param-assign")
        self.rng_key = ""
        if o.rng > 0 and self.chance(0.7):              # a host-made key, as SPEC 8 uses them
            self.rng_key = self.fresh("key")
            params.append(self.rng_key)
            specs.append(ArgSpec(self.rng_key, "scalar", tkrandom.key(r.randrange(1 << 32))))
            kscope[self.rng_key] = Var(self.rng_key, "uint64", True, False)
        if o.hazards > 0:                               # (only when asked: other seeds keep their kernels)
            self.hazard_args(params, specs, kscope)
        if o.edges > 0:
            self.edge_args(params, specs, kscope)
        self.wg_constexpr = None
        for _ in range(r.randint(0, 2) + (1 if self.grouped else 0)):
            name = self.fresh("C")
            k = r.random()
            if self.grouped and self.wg_constexpr is None:
                v = math.prod(self.wg)
                self.wg_constexpr = name
                kscope[name] = Var(name, "pyint", True, False, v)
            elif k < 0.6:
                v = r.randint(0, 6)
                kscope[name] = Var(name, "pyint", True, False, v)
            elif k < 0.8:
                v = self.pick(self.types)
                kscope[name] = Var(name, "dtype", True, False, v)
            else:
                v = self.chance(0.5)
                kscope[name] = Var(name, "lbool", True, False)
            params.append(f"{name}: tk.constexpr")
            specs.append(ArgSpec(name, "constexpr", v))
            self.ct_names.append(name)
        # device functions
        if o.funcs:
            for _ in range(self.pick([0, 0, 1, 1, 2, 3])):
                self.scopes = [dict(self.module_scope)]
                self.gen_func()
        if (o.hazards > 0 or o.calls > 0) and not self.unsafe:
            self.hazard_funcs()
        if o.calls > 0 and not self.unsafe:
            self.wrapper_funcs()
        if o.edges > 0 and self.chance(0.6):
            self.edge_funcs()
        # the kernel
        self.scopes = [kscope]
        self.emit("li = tk.index()")
        self.declare(Var("li", "pyint", mutable=False))
        if self.unsafe:
            self.valid_guard = "vd"
            self.emit("vd = li < tk.ndrange()[0]")
        if not self.grouped and self.ndim > 1 and self.chance(0.3):
            names = [self.fresh("g") for _ in range(self.ndim)]
            self.emit(f"{', '.join(names)} = tk.index(tk.Global, tk.Cartesian)")
            for n in names:
                self.declare(Var(n, "pyint", mutable=False))
        self.stmts_left = r.randint(o.max_stmts // 3, o.max_stmts)
        if self.grouped:
            self.grouped_body()
        else:
            self.flat_body()
        for _ in range(20):
            if any(a.role == "out" and a.tol for a in self.arrays.values()):
                break
            try:
                self.s_store({})
            except _Retry:
                pass
        cart = None
        if not self.grouped and not self.offset and self.chance(0.25):
            cart = self.fresh("oc")
            cart_t = self.pick(self.types)
            e = self.expr(cart_t if not is_float(cart_t) else self.pick([cart_t, "pyint"]), 2)
            self.emit(f"{cart}[tk.index(tk.Global, tk.Cartesian)] = {self.store_code(cart_t, e)}")
            self.features.add("cartesian-store")
        kname = f"k{self.seed & 0xffffffff:x}"
        # per-item arrays and accumulators become parameters in front
        front, fspecs = [], []
        n = self.n_items
        for a in self.arrays.values():
            if a.role in ("out", "io", "own"):
                shape = (n, max(len(a.tol), 1))
                view = None
                if o.strided_outputs > 0 and self.chance(o.strided_outputs):   # the kernel must skip the gaps
                    view = r.choice([2, 3])
                    shape = (n, shape[1] * view)
                if a.role == "own" and a.dtype.startswith("float") and self.chance(0.5):
                    data = int_valued(a.dtype, math.prod(shape), self.nprng).reshape(shape)
                else:
                    data = random_values(a.dtype, math.prod(shape), self.nprng).reshape(shape)
                front.append(a.name)
                fspecs.append(ArgSpec(a.name, "array", data, a.role, tol=list(a.tol) or [0], view=view))
            elif a.role == "acc":
                data = int_valued(a.dtype, math.prod(a.shape), self.nprng).reshape(a.shape)
                front.append(a.name)
                fspecs.append(ArgSpec(a.name, "array", data, "acc", tol=[0] * a.shape[-1]))
        if cart:
            data = random_values(cart_t, n, self.nprng).reshape(tuple(self.counts))
        order = list(range(len(front) + len(params)))
        allp, alls = front + params, fspecs + specs
        if cart:
            allp.append(cart)
            alls.append(ArgSpec(cart, "array", data, "out", tol=[0] * self.counts[-1]))
            order.append(len(order))
        r.shuffle(order)
        allp = [allp[i] for i in order]
        alls = [alls[i] for i in order]
        deco = "@tk.kernel(unsafe_indices=True)" if self.unsafe else "@tk.kernel"
        lines = ["import math", "import numpy as np", "import tinykernels as tk", ""]
        lines += self.global_lines + ([""] if self.global_lines else [])
        for f in self.funcs + self.efuncs + self.edge_fns:
            lines += ["", f[3].rstrip("\n"), ""]
        lines += ["", deco, f"def {kname}({', '.join(allp)}):"] + self.out
        source = "\n".join(lines) + "\n"
        feats = set(self.features)
        feats.add(f"ndim{self.ndim}")
        if self.offset:
            feats.add("ndrange-offset")
        if self.grouped:
            feats.add("grouped")
        if self.unsafe:
            feats.add("unsafe_indices")
        if any(s.view for s in alls if s.kind == "array"):
            feats.add("strided")
        if any(s.view for s in alls if s.kind == "array" and s.role != "in"):
            feats.add("strided-output")
        if self.n_items % math.prod(self.wg) and (self.static_wg or self.launch_wg):
            feats.add("partial-group")
        return Case(self.seed, source, kname, alls, self.ndrange, self.launch_wg, self.static_wg, self.unsafe, feats)



MANT = {"float16": 10, "bfloat16": 7, "float8_e4m3fn": 3, "float8_e5m2": 2, "float32": 23, "float64": 52,
        "pyfloat": 52}


def store_ulps(ulps: int, comp: str, store: str):
    """The tolerance of a function computed in ``comp`` with ``ulps`` error and stored into an
    array of ``store``: an int (ulps of ``store``), or (ulps, dtype) to compare after converting
    both sides to the (narrower, exactly representing) computation type."""
    c = "float64" if comp in ("float64", "pyfloat") else "float32"   # the narrow types compute in float32
    if MANT[store] < MANT[c]:
        return 1                                 # the rounding on store may go either way
    if store == c:
        return ulps
    return (ulps, c)


def generate(seed: int, opts: Options | None = None) -> Case:
    """The case of ``seed`` (deterministic). Its ``features`` name the constructs of open bugs
    ``bug:<id>`` (only when ``opts.exclude`` lets them through) and those of fixed ones
    ``fixed:<id>``. A fraction ``opts.fastmath`` of the seeds make a fastmath case instead
    (:mod:`.fastmath`)."""
    if opts is not None and opts.grad:
        return generate_grad(seed, opts.grad_local, opts.grad_unsafe, opts.grad_narrow)
    if is_fastmath_seed(seed, opts or Options()):
        return generate_fastmath(seed)
    case = Gen(seed, opts).generate()
    case.features = {("fixed:" + f[4:]) if f.startswith("bug:") and f[4:] in FIXED_BUGS else f
                     for f in case.features}
    return case


def cases(opts: Options | None = None):
    """A `hypothesis <https://hypothesis.readthedocs.io>`_ strategy of generated cases, for
    ``@given(fuzz.cases())`` property tests. Hypothesis picks the seeds (and replays failing ones
    from its database); a seed has no structure to shrink, so minimise a failing case with
    :func:`minimize`, which deletes statements and simplifies expressions of the kernel itself."""
    from hypothesis import strategies as st
    return st.integers(min_value=0, max_value=2 ** 31 - 1).map(lambda seed: generate(seed, opts))
