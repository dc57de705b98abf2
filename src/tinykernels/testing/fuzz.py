"""Differential fuzzing of tinykernels: random kernels, compiled backends against the interpreter.

The generator (:func:`generate`) builds a random, well-typed kernel module (source text: a few
``@tk.func`` device functions and one ``@tk.kernel``) plus its arguments and launch geometry from
a seed; everything is reproducible from ``(seed, Options)``. The runner (:func:`run_case`,
:func:`check_case`) writes the module to a content-addressed file (so ``inspect`` finds the
source and the disk cache of compiled kernels is reused), launches it on every requested backend
and on the reference (``tk.Interpreter()``), and compares every output element: integers and
bools bit for bit, floats bit for bit (NaN equals NaN) except where the generator marked an
output slot as the result of a transcendental function, which gets an ulp tolerance (see
``docs/fuzzing.md``). A disagreement is minimised (:func:`minimize`, statement deletion and
expression simplification on the Python AST, keeping the same kind of disagreement) and written
as a standalone reproducer script (:func:`write_reproducer`). :func:`fuzz` drives many seeds in
parallel worker processes, with a per-case timeout.

Kernels are generated so that the reference semantics are defined and order-independent: every
loop is bounded, array indices are taken modulo the extent, float-to-int conversions are clamped
into range (NaN mapped to 0), each work item writes only its own output elements, local memory is
initialised by the group's first item before anyone reads it, atomics are commutative on shared
elements (floats only with integer values, whose sums are exact) and free to return their old
value only on elements a single item owns, and group reductions/scans of floats only see values
whose combination is exact in any order. Constructs the documentation lists as differences
between the interpreter and the compiler (docs/debugging.md) are not generated, and constructs
that exposed a known bug (:data:`KNOWN_BUGS`) are excluded unless ``Options.exclude`` drops them.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import io
import math
import os
import random
import sys
import tempfile
import textwrap
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as D

try:
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - without ml_dtypes the narrow floats are not generated
    _mld = None

# ----------------------------------------------------------------------------- known bugs

#: Bugs the fuzzer found (id -> description). The generator avoids the construct of every id in
#: ``Options.exclude`` (all of them by default) so that long runs keep finding *new* problems;
#: tests/test_fuzz.py holds a strict-xfail regression test for each.
KNOWN_BUGS = {
    "weak-bool": "comparisons of two Python scalars, `not`, `and`, `or`, `bool()` and Python bool values "
                 "are Python bools (weak) on the interpreter but strong np.bool_ in the compiler (and a weak "
                 "bool + weak bool is logical or there): `(i < 3) + (i < 5)` is 2 on INTERP, 1 on CPU, and "
                 "`(i < 3) * 2 + x_int8` is int8 on INTERP but int64 on CPU",
    "weak-int-fold": "the compiler folds constant Python-int expressions exactly (arbitrary precision) where "
                     "the language (and the interpreter) wraps every weak int operation to int64: "
                     "`(2**62 * 4) // 8` is 2**61 on CPU, 0 on INTERP",
    "pow-half": "`x ** 0.5` is sqrt(x) in the compiler (NumPy's array fast path, as language.md says) but "
                "pow(x, 0.5) on the interpreter (NumPy scalar power): -0.0 -> -0.0 vs 0.0, -inf -> nan vs inf",
    "fp8-int-operand": "fp8 (float8_e4m3fn / float8_e5m2) combined with an int8/uint8 value: the compiler "
                       "rounds the integer operand to the fp8 type (the promoted type), the interpreter "
                       "converts it to float32 exactly: `x_fp8 + y_int8` with y = 17 gives 17 vs 18",
}


# ----------------------------------------------------------------------------- types

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("float16", "float32", "float64")
NARROW_X = ("bfloat16", "float8_e4m3fn", "float8_e5m2") if _mld is not None else ()
FLOATS_ALL = FLOATS + NARROW_X
STRONG = ("bool",) + INTS + FLOATS_ALL
# generator-only type names: Python ints (weak int64), Python floats (weak float64), and
# "logical bools": results of comparisons / not / and / or / bool() and Python bools
WEAK = ("pyint", "pyfloat")
ALL_TYPES = STRONG + WEAK + ("lbool",)
ATOMIC_TYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
NARROW = ("float16",) + NARROW_X            # compute in float32, round on store
FP8 = ("float8_e4m3fn", "float8_e5m2")


def is_float(t: str) -> bool:
    return t in FLOATS_ALL or t == "pyfloat"


def is_int(t: str) -> bool:
    return t in INTS or t == "pyint"


def is_boolish(t: str) -> bool:
    return t in ("bool", "lbool")


def np_dtype(t: str) -> np.dtype:
    return D.to_numpy(D.BY_NAME[t])


def _ty(t: str) -> D.Ty:
    if t == "pyint":
        return D.Ty(D.int64, True)
    if t == "pyfloat":
        return D.Ty(D.float64, True)
    if t == "lbool":
        return D.Ty(D.bool_, False)
    return D.Ty(D.BY_NAME[t], False)


def _from_ty(T: D.Ty) -> str:
    if T.weak:
        return {"i": "pyint", "f": "pyfloat", "b": "lbool"}[T.dtype.kind]
    return T.dtype.name


def promote(a: str, b: str) -> str:
    return _from_ty(D.promote(_ty(a), _ty(b)))


def int_range(t: str) -> tuple:
    if t == "pyint":
        return -(1 << 63), (1 << 63) - 1
    info = np.iinfo(np_dtype(t))
    return int(info.min), int(info.max)


def fits(v: int, t: str) -> bool:
    if t in ("bool", "lbool"):
        return v in (0, 1)
    lo, hi = int_range(t)
    return lo <= v <= hi


def float_max(t: str) -> float:
    if t == "pyfloat":
        return float(np.finfo(np.float64).max)
    if t in ("float16", "float32", "float64"):
        return float(np.finfo(np_dtype(t)).max)
    return float(_mld.finfo(np_dtype(t)).max)


ARITH = ("+", "-", "*", "/", "//", "%", "**")
BITS = ("&", "|", "^", "<<", ">>")
BINOPS = ARITH + BITS
CMPS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass
class Options:
    """What the generator may produce. Everything is on by default; ``exclude`` lists the
    :data:`KNOWN_BUGS` whose constructs are avoided."""
    exclude: frozenset = frozenset(KNOWN_BUGS)
    narrow_floats: bool = True            # bfloat16 / fp8 (needs ml_dtypes)
    grouped: float = 0.35                 # probability of a kernel with local memory / barriers / collectives
    funcs: bool = True
    atomics: bool = True
    inexact_math: bool = True             # transcendental functions (compared with an ulp tolerance)
    max_items: int = 96                   # work items per launch (the interpreter runs them in Python)
    max_stmts: int = 28                   # statements per kernel body (roughly)

    def key(self) -> str:
        d = dataclasses.asdict(self)
        d["exclude"] = sorted(self.exclude)
        return repr(sorted(d.items()))


def _pair(op: str, a: str, b: str):
    """``a op b`` as the generator sees it: None if never generated, else (result type, which
    operand must be a constant Python int that fits the other's type ("a", "b" or None), the
    KNOWN_BUGS id whose construct this is or None). ``op`` "min" stands for min/max/clamp/select."""
    fa, fb = is_float(a), is_float(b)
    if op in BITS and (fa or fb):
        return None
    la, lb = a == "lbool", b == "lbool"
    r = promote(a, b)
    if op == "/":
        r = _from_ty(D.true_divide_type(_ty(r)))
    if r == "bool" and op != "min":
        if op == "-":
            return None
        if op in ("<<", ">>", "**", "//", "%"):
            r = "int8"
    bug = None
    if la and lb and op in ("&", "|", "^", "min"):
        r = "lbool"
    elif la or lb:
        other = b if la else a
        if other in WEAK or other == "lbool":
            bug = "weak-bool"
    if (a in FP8 and b in ("int8", "uint8")) or (b in FP8 and a in ("int8", "uint8")):
        bug = bug or "fp8-int-operand"
    need = "a" if (a == "pyint" and b in INTS) else "b" if (b == "pyint" and a in INTS) else None
    return r, need, bug


def _build_pairs():
    """table[(op, result)] -> [(a, b, need, bug)]: the operand types of ``a op b`` giving ``result``."""
    table: dict = {}
    for op in BINOPS + ("min",):
        for a in ALL_TYPES:
            for b in ALL_TYPES:
                res = _pair(op, a, b)
                if res is not None:
                    r, need, bug = res
                    table.setdefault((op, r), []).append((a, b, need, bug))
    return table


PAIRS = _build_pairs()


# ----------------------------------------------------------------------------- input data

def edge_values(t: str) -> list:
    """Values every array of type ``t`` draws from besides random ones."""
    if t == "bool":
        return [False, True]
    if t in INTS:
        lo, hi = int_range(t)
        return sorted({0, 1, 2, 3, 7, lo, hi, lo + 1, hi - 1, hi // 2, lo // 2} |
                      ({-1, -2, -7, -3} if lo < 0 else set()))
    inf = math.inf
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, 100.0, 1e-3, inf, -inf, math.nan]
    if t in ("float32", "float64", "pyfloat"):
        fi = np.finfo(np.float32 if t == "float32" else np.float64)
        vals += [float(fi.max), -float(fi.max), float(fi.tiny), float(fi.tiny) / 4, 1e10, -1e-10, 16777217.0]
    return vals


def random_values(t: str, n: int, rng: np.random.Generator, edges: bool = True) -> np.ndarray:
    """``n`` values of type ``t`` (a NumPy array): a mix of edge values and random ones."""
    dt = np_dtype(t)
    if t == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if t in INTS:
        lo, hi = int_range(t)
        kind = rng.integers(0, 4, n)
        small = rng.integers(max(lo, -20), min(hi, 20) + 1, n)
        full = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if t != "uint64" else np.uint64)
        ev = np.array(edge_values(t), dtype=object)
        edge = ev[rng.integers(0, len(ev), n)]
        out = np.empty(n, dtype=object)
        for k in range(n):
            out[k] = int(small[k] if kind[k] < 2 else full[k] if kind[k] == 2 else edge[k])
        return np.array([int(v) for v in out], dtype=object).astype(dt)
    kind = rng.integers(0, 5, n)
    small = np.round(rng.normal(0, 4, n) * 4) / 4                # exact quarter values
    wide = rng.normal(0, 1, n) * 10.0 ** rng.integers(-6, 7, n)
    ints = rng.integers(-50, 51, n).astype(np.float64)
    ev = np.array(edge_values(t), dtype=np.float64)
    edge = ev[rng.integers(0, len(ev), n)] if edges else ints
    out = np.where(kind == 0, small, np.where(kind == 1, wide, np.where(kind == 2, ints, edge)))
    with np.errstate(all="ignore"):
        if t in NARROW:
            return out.astype(np.float32).astype(dt)
        return out.astype(dt)


def int_valued(t: str, n: int, rng: np.random.Generator, lo: int = -20, hi: int = 20) -> np.ndarray:
    """Small integer values of type ``t`` (exact in every float type)."""
    lo = max(lo, int_range(t)[0]) if t in INTS else lo
    return rng.integers(lo, hi + 1, n).astype(np_dtype(t))


# ----------------------------------------------------------------------------- the case

@dataclass
class ArgSpec:
    """One kernel argument: ``kind`` is "array" (with ``value`` the initial NumPy array, ``const``
    for tk.Const inputs, ``role`` in/out/io/own/acc), "scalar" (a Python or NumPy scalar) or
    "constexpr" (a Python int/bool or a dtype name in ``value``)."""
    name: str
    kind: str
    value: object
    role: str = ""
    const: bool = False
    tol: list = field(default_factory=list)     # per last-axis slot: allowed ulps (0: exact)


@dataclass
class Case:
    """A generated kernel with its arguments and launch geometry (all from ``seed``)."""
    seed: int
    source: str                 # the module: imports, globals, @tk.func defs and the @tk.kernel
    kname: str
    args: list                  # [ArgSpec]
    ndrange: object             # int, tuple of ints / ranges
    workgroupsize: object = None   # launch workgroupsize= (or None)
    static_wg: object = None       # kernel(backend, static_wg)
    unsafe: bool = False
    features: set = field(default_factory=set)

    def describe(self) -> str:
        return (f"seed {self.seed}: kernel {self.kname} ndrange={self.ndrange!r} workgroupsize={self.workgroupsize!r} "
                f"static_wg={self.static_wg!r} unsafe={self.unsafe} features={sorted(self.features)}")


# ----------------------------------------------------------------------------- the generator

@dataclass
class Var:
    name: str
    ty: str
    uni: bool = False          # uniform across the work group (usable in barrier conditions)
    mutable: bool = True
    cval: object = None        # compile-time value (constexprs, globals)


@dataclass
class Arr:
    name: str
    dtype: str
    shape: tuple               # for in/local/private arrays; per-item arrays are (items, len(tol))
    role: str                  # in, out, io, own, acc, local, private
    tol: list = field(default_factory=list)
    readable: bool = True      # local memory: only between the barriers that follow a write phase
    dim_code: tuple = ()       # code of each extent (len(x), x.shape[1], a constexpr ...)


@dataclass
class Ex:
    code: str
    ty: str
    uni: bool = False
    cval: object = None        # value when a compile-time constant Python int

    @property
    def const(self) -> bool:
        return self.cval is not None


class _Retry(Exception):
    pass


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


class Gen:
    """Generates one Case from a seed."""

    def __init__(self, seed: int, opts: Options | None = None):
        self.seed = seed
        self.opts = opts or Options()
        self.r = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.excl = self.opts.exclude
        self.types = [t for t in STRONG if self.opts.narrow_floats or t not in NARROW_X]
        self.counter = 0
        self.scopes: list = [{}]
        self.arrays: dict = {}
        self.features: set = set()
        self.funcs: list = []          # (name, param types, return types, source)
        self.func_lines: list = []
        self.global_lines: list = []
        self.stmts_left = self.opts.max_stmts
        self.in_func = None            # the function being generated (its return types)
        self.grouped = False
        self.unsafe = False
        self.valid_guard = None        # unsafe kernels: code of "this item is inside the ndrange"
        self.scalar_args: list = []
        self.constexpr_args: list = []

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

    # --- literals ---------------------------------------------------------------------------

    def lit(self, t: str, fit: str | None = None) -> Ex:
        r = self.r
        if t == "pyint":
            cands = [v for v in PYINT_LITS if fit is None or fits(v, fit)]
            if fit is not None and fit != "pyint" and self.chance(0.3):
                lo, hi = int_range(fit)
                cands = [lo, hi, lo + 1, hi - 1] + cands
            v = self.pick(cands) if self.chance(0.8) else r.randint(-20, 20)
            if fit is not None and not fits(v, fit):
                v = 0
            return Ex(f"({v})" if v < 0 else str(v), "pyint", True, v)
        if t == "pyfloat":
            return Ex(self.pick(PYFLOAT_LITS), "pyfloat", True)
        if t == "lbool":
            return Ex(self.pick(["True", "False"]), "lbool", True)
        ns = self.pick(["tk", "tk", "np"])
        if t == "bool":
            return Ex(f"{ns}.bool_({self.pick(['True', 'False', '0', '1', '2', '0.0'])})", t, True)
        if t in INTS:
            lo, hi = int_range(t)
            v = self.pick([0, 1, 2, 3, -1, 7, lo, hi, r.randint(-100, 100), r.randint(lo, hi)])
            if self.chance(0.1):
                v = self.pick([300, -129, 70000, 2**33 + 5])   # explicit casts wrap
            return Ex(f"{ns}.{t}({v})", t, True)
        if t in NARROW_X:
            ns = "tk"
        return Ex(f"{ns}.{t}({self.pick(PYFLOAT_LITS[:14] + ['3', '-7', '1000'])})", t, True)

    # --- leaves -------------------------------------------------------------------------------

    def leaf(self, t: str, uni: bool = False) -> Ex:
        opts = []
        vs = self.vars_of(t, uni)
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
            elif a.role in ("out", "io", "own") and a.tol and not self.in_func:
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
        return "li"

    def slot_index(self, a: Arr, k: int) -> str:
        return f"{a.name}[li, {k}]"

    def load(self, a: Arr, uni: bool = False) -> Ex:
        if a.role == "in":
            idx = ", ".join(self.index_expr(c, uni) for c in a.dim_code)
            return Ex(f"{a.name}[{idx}]", a.dtype)
        if a.role in ("local", "private"):
            idx = ", ".join(self.index_expr(c) for c in a.dim_code)
            return Ex(f"{a.name}[{idx}]", a.dtype)
        k = self.r.randrange(len(a.tol))
        return Ex(self.slot_index(a, k), a.dtype)

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
            opts += [("cmp", 6)]
        if t == "lbool":
            opts += [("logic", 3), ("pred", 1), ("chain", 1)]
        if t == "bool":
            opts += [("pred", 1)]
        if self.funcs and not uni and any(len(f[2]) == 1 and f[2][0] == t for f in self.funcs):
            opts.append(("func", 2))
        k = self.wchoice(opts)
        return getattr(self, "x_" + k)(t, d, uni)

    def x_leaf(self, t, d, uni):
        return self.leaf(t, uni)

    def const_pyint(self, fit: str, uni: bool = False) -> Ex:
        """A compile-time Python int that fits ``fit`` (a literal, constexpr or global)."""
        cs = [v for v in self.visible() if v.ty == "pyint" and v.cval is not None and fits(v.cval, fit)]
        if cs and self.chance(0.3):
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
        ea, eb = self.operands(op, t, d, uni)
        cval = None
        if ea.ty == "pyint" and eb.ty == "pyint" and ea.const and eb.const:
            cval = self.fold_pyint(op, ea.cval, eb.cval)
        if op == "**" and is_float(t) and self.pow_special(eb):
            raise _Retry
        return Ex(f"({ea.code} {op} {eb.code})", t, ea.uni and eb.uni, cval)

    def pow_special(self, eb: Ex) -> bool:
        """``x ** 0.5`` (known bug pow-half) is avoided; other exponents are fine."""
        return "pow-half" in self.excl and eb.code.strip("()") in ("0.5", "tk.float32(0.5)", "np.float32(0.5)",
                                                                  "tk.float64(0.5)", "np.float64(0.5)")

    def fold_pyint(self, op, a, b):
        """The constant the compiler folds ``a op b`` (Python ints) to, or None if it leaves it to run
        time; a folding that differs from int64 wrap-around is the known bug weak-int-fold."""
        from ..frontend import intrinsics as I
        exact = I.fold_binop(op, a, b, D.Ty(D.int64, True))
        if exact is None or isinstance(exact, float) or op == "/":
            return None
        wrapped = _wrap_op(op, a, b)
        if exact != wrapped:
            if "weak-int-fold" in self.excl:
                raise _Retry
            self.features.add("bug:weak-int-fold")
        return exact

    def x_unary(self, t, d, uni):
        k = self.r.random()
        if t == "lbool":
            if k < 0.6:
                e = self.expr(self.pick(list(self.types) + ["pyint", "pyfloat", "lbool"]), d - 1, uni)
                return Ex(f"(not {e.code})", t, e.uni)
            e = self.expr("lbool", d - 1, uni)
            return Ex(f"(~{e.code})", t, e.uni)
        if t == "bool" or (is_int(t) and k < 0.4):
            e = self.expr(t, d - 1, uni)
            cval = None
            if e.const:
                cval = ~e.cval
            return Ex(f"(~{e.code})", t, e.uni, cval)
        e = self.expr(t, d - 1, uni)
        cval = None
        if e.const:
            cval = -e.cval
            if not fits(cval, "pyint"):
                if "weak-int-fold" in self.excl:
                    raise _Retry
                self.features.add("bug:weak-int-fold")
        if self.chance(0.05):
            return Ex(f"(+{e.code})", t, e.uni, e.cval)
        return Ex(f"(-{e.code})", t, e.uni, cval)

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
            if (t == "bool") != strong:
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
        return Ex(f"({es[0].code} {self.pick(CMPS)} {es[1].code} {self.pick(CMPS)} {es[2].code})", "lbool",
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
        bits = 64 if target == "pyint" else int(np.dtype(np_dtype(target)).itemsize * 8)
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
        e = self.expr(src, d - 1, uni)
        if t == "pyint":
            if is_float(src):
                if self.chance(0.3):
                    return Ex(self.float_to_int(e, "pyint", "round"), t, e.uni)
                return Ex(self.float_to_int(e, "pyint", "int"), t, e.uni)
            if self.chance(0.2):
                return Ex(f"round({e.code})", t, e.uni, e.cval if src == "pyint" else None)
            return Ex(f"int({e.code})", t, e.uni, e.cval if src == "pyint" else None)
        if t == "pyfloat":
            return Ex(f"float({e.code})", t, e.uni)
        if t == "lbool":
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
            return Ex(f"abs({e.code})", t, e.uni, abs(e.cval) if e.const else None)
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
        n = {"math.copysign": 2, "math.fmod": 2, "tk.fma": 3}.get(fn, 1)
        if fn == "abs":
            e = self.expr(t, d - 1, uni)
            return Ex(f"abs({e.code})", t, e.uni)
        es = self.float_args(t, n, d, uni)
        return Ex(f"{fn}({', '.join(e.code for e in es)})", t, all(e.uni for e in es))

    def x_func(self, t, d, uni):
        fs = [f for f in self.funcs if len(f[2]) == 1 and f[2][0] == t]
        name, params, rets, _ = self.pick(fs)
        return Ex(f"{name}({', '.join(self.func_arg(p, d) for p in params)})", t)

    def func_arg(self, p, d) -> str:
        kind, ty = p
        if kind == "array":
            cands = [a for a in self.arrays.values() if a.role == "in" and a.dtype == ty[0] and len(a.shape) == ty[1]]
            return self.pick(cands).name
        return self.expr(ty, max(d - 1, 0)).code

    # --- transcendental functions (output sinks with a tolerance) --------------------------------

    def inexact(self):
        """(code, computation type, allowed ulps): one transcendental function of exact arguments."""
        name, n, ulps = self.pick(INEXACT_MATH)
        t = self.pick([x for x in self.types if is_float(x)] + ["pyfloat"])
        if name == "**":
            a = self.expr(t, 2)
            b = self.expr(self.pick([t, "pyfloat", "pyint"]), 2)
            if self.pow_special(b):
                b = Ex("1.75", "pyfloat")
            return f"({a.code} ** {b.code})", t, ulps
        es = self.float_args(t, n, 2, False)
        if name == "math.pow" and "pow-half" in self.excl and es[1].code in ("0.5",):
            es[1] = Ex("1.5", "pyfloat")
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
        self.scopes.pop()

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
        opts = [("assign", 7), ("reassign", 3), ("aug", 3), ("if", 3), ("tuple", 1), ("annot", 1), ("chain", 1)]
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
        else:
            opts.append(("fret", 0.6))
        if ctx.get("in_loop"):
            opts += [("break", 1), ("continue", 0.7)]
        if any(len(fn[2]) > 1 for fn in self.funcs) and not f:
            opts.append(("callstmt", 1.5))
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
        if t in INTS and src == "pyint":
            e = self.expr("pyint", 2)
            if e.const and not fits(e.cval, t):
                e = self.lit("pyint", t)
        else:
            e = self.expr(src, 2)
        v = self.declare(Var(self.fresh("v"), t))
        self.emit(f"{v.name}: {self.dtype_spelling(t)} = {e.code}")

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
        if op == "**" and is_float(v.ty) and self.pow_special(eb):
            raise _Retry
        if bug:
            self.features.add("bug:" + bug)
        self.emit(f"{v.name} {op}= {eb.code}")

    def s_tuple(self, ctx):
        vs = [v for v in self.visible() if v.mutable and v.ty in ALL_TYPES and not v.uni]
        pairs = [(a, b) for a in vs for b in vs if a.name < b.name and a.ty == b.ty]
        if pairs and self.chance(0.4):
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
        lo, hi = int_range(t)
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

    def s_for(self, ctx):
        hdr, vt, _ = self.range_header()
        j = self.fresh("j")
        self.emit(f"for {j} in {hdr}:")
        sub = dict(ctx, loops=ctx.get("loops", 0) + 1, in_loop=True, depth=ctx.get("depth", 0) + 1, top=False)
        self.block(self.r.randint(1, 4), sub, declare=[Var(j, vt, mutable=False)])

    def s_while(self, ctx):
        w = self.fresh("w")
        self.emit(f"{w} = 0")
        self.declare(Var(w, "pyint", mutable=False))
        b = self.small_bound(False, 5)
        funcs, self.funcs = self.funcs, []          # no calls in while conditions
        try:
            c = self.cond(1)
        finally:
            self.funcs = funcs
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
        self.emit(f"if {self.cond(2).code}:")
        self.ind += 1
        self.emit("return " + ", ".join(self.expr(t, 2).code for t in rets))
        self.ind -= 1

    def s_callstmt(self, ctx):
        fs = [f for f in self.funcs if len(f[2]) > 1]
        name, params, rets, _ = self.pick(fs)
        call = f"{name}({', '.join(self.func_arg(p, 2) for p in params)})"
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

    def store_code(self, dt: str, e: Ex) -> str:
        if e.ty == "pyint" and dt in INTS + ("bool",) and (e.const or self.chance(0.5)):
            return f"{self.dtype_spelling(dt)}({e.code})"          # an explicit cast wraps
        return e.code

    def s_store(self, ctx):
        t = self.any_type()
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
                 and (c[1] in self.types or c[1] in WEAK or c[1] == "lbool")]
        if not cands or self.chance(0.15):
            t = self.any_type() if not dt in INTS else self.pick([x for x in self.types if not is_float(x)] + ["pyint"])
            e = self.expr(t, 2)
            self.emit(f"{self.slot_index(a, k)} = {self.store_code(dt, e)}")
            return
        op, (_, b, need, bug) = self.pick(cands)
        eb = self.const_pyint(dt) if need == "b" else self.expr(b, 2)
        if op == "**" and is_float(dt) and self.pow_special(eb):
            raise _Retry
        if bug:
            self.features.add("bug:" + bug)
        self.features.add("io")
        self.emit(f"{self.slot_index(a, k)} {op}= {eb.code}")

    def s_private(self, ctx):
        t = self.pick(self.types)
        n = self.r.randint(1, 5)
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
        self.features.add("private")

    def s_pstore(self, ctx):
        a = self.pick([a for a in self.arrays.values() if a.role == "private"])
        idx = self.index_expr(a.dim_code[0])
        self.emit(f"{a.name}[{idx}] = {self.castto(a.dtype, self.expr(self.any_type(), 2))}")

    # --- atomics --------------------------------------------------------------------------------

    def acc_array(self) -> Arr:
        accs = [a for a in self.arrays.values() if a.role == "acc"]
        if accs and (self.chance(0.6) or len(accs) >= 2):
            return self.pick(accs)
        t = self.pick([x for x in ATOMIC_TYPES if x in self.types])
        shape = (self.r.randint(1, 6),) if self.chance(0.7) else (self.r.randint(1, 3), self.r.randint(1, 3))
        a = Arr(self.fresh("acc"), t, shape, "acc", dim_code=tuple(str(n) for n in shape))
        self.arrays[a.name] = a
        return a

    def exact_float_value(self, t: str, lo: int = -16, hi: int = 16, uni: bool = False) -> str:
        """An integer-valued float of type ``t`` (its sums are exact in any order)."""
        e = self.expr(self.pick(["pyint", "pyint"] + [x for x in self.types if x in INTS]), 1, uni)
        conv = "float" if t == "pyfloat" else f"tk.{t}"
        return f"{conv}(int({e.code}) % {hi - lo + 1} + ({lo}))"

    def int_value(self, t: str, d: int = 2) -> str:
        src = self.pick([x for x in self.types if x in INTS] + ["pyint", "bool", "lbool"])
        e = self.expr(src, d)
        if src == "pyint" and e.const and not fits(e.cval, t):
            return f"tk.{t}({e.code})"
        return e.code

    def s_atomic(self, ctx):
        a = self.acc_array()
        fl = a.dtype in ("float32", "float64")
        op = self.pick(["add", "sub", "min", "max"] if fl else ["add", "sub", "min", "max", "and", "or", "xor"])
        idx = ", ".join(self.index_expr(c) for c in a.dim_code)
        if len(a.dim_code) > 1 or self.chance(0.2):
            idx = f"({idx})" if len(a.dim_code) > 1 else idx
        v = self.exact_float_value(a.dtype) if fl else self.int_value(a.dtype)
        self.features.add("atomic")
        self.guarded([f"tk.atomic_{op}({a.name}, {idx}, {v})"])

    def s_own(self, ctx):
        a = self.per_item("own", lambda d: d in ATOMIC_TYPES)
        fl = a.dtype in ("float32", "float64")
        if not a.tol or (self.chance(0.4) and len(a.tol) < 14):
            a.tol.append(0)
        k = self.r.randrange(len(a.tol))
        op = self.pick(["add", "sub", "min", "max", "exchange", "cas"] + ([] if fl else ["and", "or", "xor"]))

        def val():
            if fl:
                return self.expr(self.pick([a.dtype, "pyfloat", a.dtype]), 2).code
            return self.int_value(a.dtype)
        idx = f"(li, {k})"
        if op == "cas":
            exp = f"{a.name}[li, {k}]" if self.chance(0.6) else val()
            call = f"tk.atomic_cas({a.name}, {idx}, {exp}, {val()})"
        else:
            call = f"tk.atomic_{op}({a.name}, {idx}, {val()})"
        self.features.add("atomic-own")
        name = self.fresh("old")
        self.guarded([f"{name} = {call}"])
        if not self.unsafe:
            self.declare(Var(name, a.dtype, mutable=False))
