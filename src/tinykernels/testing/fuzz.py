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
import re
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
}

#: Bugs the fuzzer found that are fixed (id -> (what it was, the fix)); each keeps a regression
#: test in tests/test_fuzz.py (marked ``# fixed: <id>``) and the generator produces its construct.
FIXED_BUGS = {
    'const-float-floordiv': ("`(False // -3.75) ** 0.5`: the compiler did not fold `//` and `%` of Python floats, so "
                             "the power had a run-time base and took the sqrt fast path (-0.0), while the "
                             "interpreter folded the whole constant expression as Python does (0.0)",
        "fixed: the compiler folds Python-float `//` and `%` too (frontend/intrinsics.py fold_binop), as the "
        "interpreter does"),
    'pocl-collective-loop': ("OpenCL on PoCL 3.1 (LLVM 15): a tk.group_reduce / tk.group_scan inside a for or while loop followed by any statement after the loop aborts the Python process at the first launch (pocl::ParallelRegion::Verify(): Assertion `Incoming edges to non-entry block!`): `for w in range(2): o[i, 1] = tk.group_reduce(s, 'add')` then `o[i, 0] = 7`",
        'worked around: for PoCL the OpenCL code has a barrier right after every loop that holds a barrier, collective or tk.uniform (codegen/opencl.py loop_exit_barrier); the loop is uniform, so every item reaches it'),
    'const-base-pow': ("`tk.float32(-0.0) ** 0.5` (constant base and exponent) is folded by the compiler with "
                       "NumPy's fast path (sqrt: -0.0) but used pow() on the interpreter (0.0)",
        "fixed: the interpreter's fold of a NumPy-typed `**` takes the constant-exponent fast paths (interp_ops.fold)"),
    'fma-inf-addend': ("tk.fma(a, b, c) with finite a, b whose product overflows float64 and an infinite c "
                       "gave NaN on the interpreter (inf + -inf) where fma's exact product plus -inf is -inf "
                       "(CPU): `tk.fma(s, s, -3.75 / 0)` with s = -1.8e308",
        'fixed: the interpreter returns c for a finite product plus an infinite or NaN c (interp_ops.fma)'),
    'weak-bool': ('comparisons of two Python scalars, `not`, `and`, `or`, `bool()` and Python bool values are Python bools (weak) on the interpreter but strong np.bool_ in the compiler (and a weak bool + weak bool is logical or there): `(i < 3) + (i < 5)` is 2 on INTERP, 1 on CPU, and `(i < 3) * 2 + x_int8` is int8 on INTERP but int64 on CPU',
        'fixed: comparisons of two weak operands (and math.isnan & co. of a Python float) give a weak bool in the compiler too, and Python bools compute as ints there (True + True == 2); `not`, `and`, `or`, `bool()` and chained comparisons give a strong bool on both (frontend/lower.py compare, interp_transform.py)'),
    'weak-int-fold': ('the compiler folds constant Python-int expressions exactly (arbitrary precision) where the language (and the interpreter) wraps every weak int operation to int64: `(2**62 * 4) // 8` is 2**61 on CPU, 0 on INTERP; `1 << 2**62` makes the compiler raise a bare MemoryError',
        "fixed: the interpreter evaluates what the compiler folds (literals, module-level numbers, constexprs and operators on them: interp_transform static) with Python's exact integer arithmetic (interp_ops.fold), so `(2**62 * 4) // 8` is 2**61 on both; run-time weak ints wrap in int64 on both"),
    'pow-fastpath': ("`x ** 2`, `x ** -1` and `x ** 0.5` on floats are x*x, 1/x and sqrt(x) in the compiler (NumPy's array fast paths, as language.md says) but C pow() on the interpreter (NumPy scalar power): about 1 in 2000 results differ in the last bit (`io[i] **= -1` with io = -0.2335961... gives -4.280892020642491 vs ...492), and x ** 0.5 differs for -0.0 (-0.0 vs 0.0) and -inf (nan vs inf)",
        "fixed: the interpreter takes NumPy's scalar-exponent fast paths (x*x, 1/x, sqrt) exactly where the compiler does, for a compile-time constant exponent (interp_transform static, interp_ops.op_powc); a run-time exponent is pow() on both, as NumPy's array ** array"),
    'f16-scalar-arg': ('a np.float16 scalar kernel argument computes as a NumPy float16 on the interpreter (rounded after every operation) instead of in float32 rounded on store: `o_f64[i] = x_u8[i] - h` with h = np.float16(-59.4) gives 77.375 on INTERP, 77.40625 on CPU',
        'fixed: the interpreter turns float16/bfloat16/fp8 scalar arguments into float32-computing narrow values (interpreter._scalar)'),
    'fp8-minmax-identity': ("tk.group_reduce / tk.group_scan with op 'min' or 'max' on float8_e4m3fn give NaN on the interpreter: the identity (+-inf) is not representable in e4m3fn (no infinities) and becomes NaN, which then wins every comparison; CPU and CL are right",
        "fixed: the interpreter's min/max identity of a narrow float is +-inf in float32 (interp_ops._identity)"),
    'ndrange-in-for': ("the C renderer names a for loop's trip count `tk_n<k>` (CLikeRenderer.s_For: self.fresh('n')), which shadows the ndrange extent `tk_n2`: `tk.ndrange()[2]` inside the first for loop of a kernel reads the loop's trip count (CPU and CL); in 3-D kernels with barriers / local memory a for loop run at group level also checks the per-item mask `tk_p2 < tk_n2` and computes the linear index with it, so items are skipped or get the wrong tk.index()",
        'fixed: loop trip counts get their own names (codegen/clike.py s_For)'),
    'tuple-swap': ("tuple assignment assigns element by element in the compiler: `a, b = b, a` makes both equal to the old b (frontend/lower.py s_Assign/assign_target read the right-hand side's variables after the first target was already stored); the interpreter swaps",
        'fixed: tuple assignment evaluates the whole right-hand side first (frontend/lower.py)'),
    'narrow-self-cast': ('an explicit cast to float16 / bfloat16 / fp8 of a value that already has that type (an unrounded float32 intermediate such as x_f16 * y_f16) is dropped by the compiler (frontend/lower.py Lowerer.cast returns e when e.ty == t), so `tk.float16(x * x)` and `v: tk.float16 = x * x` do not round (CPU and CL); the interpreter rounds, as language.md says',
        'fixed: an explicit narrow cast of a narrow intermediate rounds (frontend/lower.py cast)'),
    'fma-overflow': ("tk.fma on float64 / Python floats whose exact result overflows raises OverflowError ('integer division result too large for a float') on the interpreter (interp_ops.fma converts the exact Fraction with float()); CPU gives inf",
        "fixed: the interpreter's exact fma rounds an overflowing result to +-inf (interp_ops._to_float)"),
    'func-return-grouped': ("in a kernel with barriers or local memory (the group-by-group code shape), a `return` before the end of a @tk.func becomes a `goto` out of the per-item loop: only the group's first work item gets the function's results, the others read uninitialised values (CPU; nondeterministic output)",
        "fixed: a @tk.func's early return stays inside the per-item loop (passes/groups.py)"),
    'cl-const-nan': ('OpenCL on PoCL 3.1: operations the driver folds at compile time go wrong when a constant is NaN or infinite: exp, expm1, sinh, tanh and tk.sigmoid of a constant NaN (`math.tanh(tk.float32(math.nan))`) give 0.0, `tk.float8_e4m3fn(7) // 1e10` (7 // NaN) gives 0.0, `v = tk.float8_e5m2(1e10); v // (v / v)` gives -0.0 instead of NaN; the same operations on values loaded at run time are right',
        'worked around: for PoCL the OpenCL code passes NaN through exp/expm1/exp2/exp10/sinh/cosh/tanh and float // and % before the driver can fold them (codegen/opencl.py _nan_guards, prelude floatdiv under TK_POCL)'),
    'const-weak-mutation': ('a tk.constexpr Python int used once with a strong int64 operand (`tk.int64(5) + C`) becomes a strong int64 for the rest of the kernel: frontend/lower.py Lowerer.cast changes the type of the shared N.Const in place (`e.ty = t`), so `(x_int8 + C) * 100` no longer wraps in int8 (CPU and CL give 400 where NumPy and INTERP give -112)',
        'fixed: Lowerer.cast returns a new constant instead of retyping a shared one'),
    'fp8-int-operand': ('fp8 (float8_e4m3fn / float8_e5m2) combined with an int8/uint8 value: the compiler rounds the integer operand to the fp8 type (the promoted type), the interpreter converts it to float32 exactly: `x_fp8 + y_int8` with y = 17 gives 17 vs 18',
        'fixed: the interpreter converts an int8/uint8 operand to the promoted fp8 type, as NumPy and the compiler do (interp_ops._nbin)'),
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
        return D.Ty(D.bool_, True)        # a Python bool: weak
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
    if op in BITS and is_float(r):
        return None                      # e.g. int64 & uint64: NumPy has no integer loop for it
    if r == "bool" and op != "min":
        if op == "-":
            return None
        if op in ("<<", ">>", "**", "//", "%"):
            r = "int8"
    bug = None
    if r == "lbool" and op in ("+", "-", "*", "<<", ">>", "**", "//", "%"):
        r, bug = "pyint", "weak-bool"     # Python bools are ints: True + True == 2 (was a bug)
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
    view: object = None                         # pass value[..., ::view] (a strided array)


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
    own: str = ""              # local memory: the index of the element this item writes


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
        self.ct_names: list = []       # compile-time names (constexpr parameters)
        self.for_depth = 0             # for loops around the code being generated (funcs count as inside)
        self.in_loop_phase = False     # grouped kernels: inside a uniform loop

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
            v = self.pick(self.float_lits())
            return Ex(f"({v})" if v.startswith("-") else v, "pyfloat", True)
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
        cs = [v for v in self.visible() if v.ty == "pyint" and v.cval is not None and fits(v.cval, fit)
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
        ea, eb = self.operands(op, t, d, uni)
        code = f"({ea.code} {op} {eb.code})"
        cval = self.fold_check(code) if t == "pyint" else None
        return Ex(code, t, ea.uni and eb.uni, cval)

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
            return R if not fits(x, "pyint") else ("w", x)
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
            if op in ("//", "%") and y == 0 or op in ("**", "<<", ">>") and y < 0:
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
            return R if not fits(v, "pyint") else ("w", v)
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
        if src == t and t in NARROW:
            if "narrow-self-cast" in self.excl:
                src = "float64"
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
        elif not self.grouped or "func-return-grouped" not in self.excl:
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
        j = self.fresh("j")
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
        funcs, self.funcs = self.funcs, []          # no @tk.func calls in while conditions
        try:
            b = self.small_bound(False, 5)
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
        if self.grouped:
            self.features.add("bug:func-return-grouped")
        self.emit(f"if {self.cond(2).code}:")
        self.ind += 1
        self.emit("return " + ", ".join(self.expr(t, 2).code for t in rets))
        self.ind -= 1

    def s_callstmt(self, ctx):
        fs = self.callable_funcs()
        if not fs:
            raise _Retry
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

    def maybe_const(self, code: str) -> bool:
        """Whether the compiler might fold ``code`` to a constant (conservative: a compile-time
        Python int that does not fit is a CompileError where a run-time one converts)."""
        ct = {n for n, v in self.module_scope.items()} | set(self.ct_names)

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
        if e.ty == "pyint" and dt in INTS + ("bool",) and not (e.const and fits(e.cval, dt)) and \
                self.maybe_const(e.code):
            return f"{self.dtype_spelling(dt)}({e.code})"
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
            if fl:       # compared bit for bit: only values whose bits are the same everywhere (no NaN)
                exp = f"{a.name}[li, {k}]" if self.chance(0.6) else self.exact_float_value(a.dtype)
            else:
                exp = f"{a.name}[li, {k}]" if self.chance(0.6) else val()
            call = f"tk.atomic_cas({a.name}, {idx}, {exp}, {val()})"
        else:
            call = f"tk.atomic_{op}({a.name}, {idx}, {val()})"
        self.features.add("atomic-own")
        name = self.fresh("old")
        self.guarded([f"{name} = {call}"])
        if not self.unsafe:
            self.declare(Var(name, a.dtype, mutable=False))

    # --- device functions -------------------------------------------------------------------------

    def gen_func(self) -> None:
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
        rets = [self.any_type() for _ in range(self.pick([1, 1, 1, 2, 3]))]
        saved = (self.out, self.ind, self.scopes, self.arrays, self.in_func, self.stmts_left, self.for_depth)
        self.out, self.ind, self.in_func = [], 1, rets
        self.for_depth = 1                         # a call may sit in a loop
        self.scopes = [dict(self.module_scope)]
        self.arrays = {}
        for pn, (kind, ty) in zip(pnames, params):
            if kind == "array":
                dt, nd = ty
                self.arrays[pn] = Arr(pn, dt, (1,) * nd, "in",
                                      dim_code=tuple(f"len({pn})" if d == 0 else f"{pn}.shape[{d}]" for d in range(nd)))
            else:
                self.declare(Var(pn, ty, mutable=False))
        self.stmts_left = self.r.randint(0, 5)
        ctx = {"top": False}
        while self.stmts_left > 0:
            self.stmt(ctx)
        self.emit("return " + ", ".join(self.expr(t, 3).code for t in rets))
        body = self.out
        self.out, self.ind, self.scopes, self.arrays, self.in_func, self.stmts_left, self.for_depth = saved
        src = "@tk.func\n" + f"def {name}({', '.join(pnames)}):\n" + "\n".join(body) + "\n"
        self.funcs.append((name, params, rets, src))
        self.features.add("func")
        if len(rets) > 1:
            self.features.add("func-tuple")

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
        opts = [("rw", 4), ("flat", 3), ("collective", 2), ("uniform", 1)]
        if depth < 2:
            opts += [("loop", 2 if self.for_allowed() else 0), ("while", 1), ("uif", 1.5)]
        if depth == 0:
            opts += [("latomic", 1 if self.opts.atomics else 0), ("ret", 0.4 if not self.unsafe else 0)]
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
        elif k == "collective":
            if depth > 0 and "pocl-collective-loop" in self.excl and self.in_loop_phase:
                self.collective_guard_fallback()
            else:
                if depth > 0 and self.in_loop_phase:
                    self.features.add("bug:pocl-collective-loop")
                self.collective()
        elif k == "uniform":
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
            r = self.fresh("r")
            self.emit(f"for {r} in {hdr}:")
            self.scopes.append({r: Var(r, vt, uni=True, mutable=False)})
            self.ind += 1
            self.for_depth += 1
            saved, self.in_loop_phase = self.in_loop_phase, True
            self.uniform_jump()
            for _ in range(self.r.randint(1, 2)):
                self.phase(depth + 1)
            self.uniform_jump()
            self.in_loop_phase = saved
            self.for_depth -= 1
            self.ind -= 1
            self.scopes.pop()
        elif k == "while":
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
            self.scopes.pop()
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
        rt = "int64" if t in ("bool", "lbool") and op in ("add", "mul") else t
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
        self.emit("tk.synchronize()")
        la.readable = True
        self.arrays[la.name] = la
        self.features.add("local-atomic")
        t2 = self.fresh("t")
        self.emit(f"{t2} = {la.name}[{self.index_expr(str(m))}]")
        self.declare(Var(t2, t, mutable=False))
        self.store_var(t2, t)

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
        pre = self.r.randint(0, 4)
        ctx = {"loops": 0}
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
            from ..kernel import DEFAULT_WORKGROUP
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
                v = self.pick([0, 1, 2, 3, 5, 7, -4, 100, 2**40])
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
        # scalars and constexprs
        kscope = dict(self.module_scope)
        for _ in range(r.randint(0, 4)):
            name = self.fresh("s")
            k = r.random()
            if k < 0.3:
                v = self.pick(PYINT_LITS[:32]) if self.chance(0.5) else r.randint(-1000, 1000)
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
            kscope[name] = Var(name, ty, True, False)
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
                if a.role == "own" and a.dtype.startswith("float") and self.chance(0.5):
                    data = int_valued(a.dtype, math.prod(shape), self.nprng).reshape(shape)
                else:
                    data = random_values(a.dtype, math.prod(shape), self.nprng).reshape(shape)
                front.append(a.name)
                fspecs.append(ArgSpec(a.name, "array", data, a.role, tol=list(a.tol) or [0]))
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
        for f in self.funcs:
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
    ``fixed:<id>``."""
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


# ----------------------------------------------------------------------------- running a case

_GEN_DIR = os.environ.get("TK_FUZZ_DIR") or os.path.join(tempfile.gettempdir(), f"tinykernels_fuzz_{os.getuid()}")
_MODULES: dict = {}


def load_kernel(source: str, kname: str):
    """The kernel ``kname`` of module ``source``, written to a content-addressed file first (so that
    ``inspect`` finds its source and the compiled-kernel cache is reused across processes)."""
    key = hashlib.sha1(source.encode()).hexdigest()[:20]
    ns = _MODULES.get(key)
    if ns is None:
        os.makedirs(_GEN_DIR, exist_ok=True)
        path = os.path.join(_GEN_DIR, f"fz_{key}.py")
        if not os.path.exists(path):
            fd, tmp = tempfile.mkstemp(dir=_GEN_DIR, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        ns = {"__name__": f"tk_fuzz_{key}", "__file__": path}
        exec(compile(source, path, "exec"), ns)
        if len(_MODULES) > 64:
            _MODULES.clear()
        _MODULES[key] = ns
    return ns[kname]


def _is_nvrtc(spec) -> bool:
    return isinstance(spec, str) and spec.upper().startswith("NVRTC")


def nvrtc_compile_case(case: Case, spec: str = "NVRTC") -> None:
    """The compile-only target ``NVRTC`` / ``NVRTC:sm_80+sm_90``: render ``case`` as CUDA C++ and
    compile it with NVRTC for those architectures (sm_90 by default). Needs no GPU, so CI and
    machines without one still check the CUDA code generator on every generated kernel; the
    values are checked only where a GPU runs the ``CUDA`` backend."""
    from ..runtime.cuda import CUDATarget, compile_cuda
    archs = [a for a in spec.split(":", 1)[1].split("+") if a] if ":" in spec else ["sm_90"]
    k = getattr(case, "kernel", None) or load_kernel(case.source, case.kname)
    args, _ = make_args(case, None)
    t = CUDATarget()
    inst = k(t, case.static_wg) if case.static_wg is not None else k(t)
    src = inst.source(*args, ndrange=case.ndrange, workgroupsize=case.workgroupsize)
    for arch in archs:
        compile_cuda(src, arch, case.kname, cache=False)
    return None


def _backend(spec):
    import tinykernels as tk
    return tk.backend(spec) if isinstance(spec, str) else spec


def _constexpr_value(v):
    if isinstance(v, str) and v in D.BY_NAME:
        return D.PUBLIC[v]
    return v


def make_args(case: Case, backend) -> tuple:
    """Fresh arguments for one launch: (launch args, {name: host array or device array})."""
    import tinykernels as tk
    args, arrays = [], {}
    for s in case.args:
        if s.kind == "array":
            a = np.array(s.value, copy=True)
            if s.view:
                a = a[..., ::s.view]
            if not getattr(backend, "is_host", True):
                a = tk.asarray(np.ascontiguousarray(a), backend=backend)
            arrays[s.name] = a
            args.append(a)
        elif s.kind == "constexpr":
            args.append(_constexpr_value(s.value))
        else:
            args.append(s.value)
    return args, arrays


def run_case(case: Case, backend, kernel=None) -> dict:
    """Launch ``case`` on ``backend`` (an object or a DEV string); the output arrays (host copies)."""
    import tinykernels as tk
    b = _backend(backend)
    k = kernel if kernel is not None else getattr(case, "kernel", None) or load_kernel(case.source, case.kname)
    args, arrays = make_args(case, b)
    inst = k(b, case.static_wg) if case.static_wg is not None else k(b)
    with np.errstate(all="ignore"):
        ev = inst(*args, ndrange=case.ndrange, workgroupsize=case.workgroupsize)
        if ev is not None:
            ev.wait()
        tk.synchronize(b)
    out = {}
    for s in case.args:
        if s.kind == "array" and s.role in ("out", "io", "own", "acc"):
            a = arrays[s.name]
            out[s.name] = a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)
    return out


@dataclass
class Mismatch:
    """A disagreement between ``backend`` and the reference on one case."""
    seed: int
    backend: str
    kind: str                 # value, error (one side raised), ref-error (the reference raised), timeout
    array: str = ""
    where: list = field(default_factory=list)       # up to 5 (index, got, want)
    detail: str = ""
    tol: int = 0

    def __str__(self) -> str:
        if self.kind == "value":
            w = "; ".join(f"{i}: got {g} want {v}" for i, g, v in self.where)
            return f"seed {self.seed} {self.backend}: array '{self.array}' differs (tol {self.tol} ulp) at {w}"
        return f"seed {self.seed} {self.backend}: {self.kind}: {self.detail}"

    def signature(self) -> tuple:
        """What must stay the same while minimising: the array, or the error without its location."""
        if self.kind == "value":
            return ("value", self.array)
        first = self.detail.split("\n", 1)[0]
        first = re.sub(r"\S+\.py:\d+(:\d+)?:?", "", first)
        first = re.sub(r"kernel '\w+'", "kernel", first)
        first = re.sub(r"\(and .*", "", first)
        first = re.sub(r"-?\d+", "N", first)
        return (self.kind, first.strip())


def _ordered(a: np.ndarray) -> np.ndarray:
    """Float bits mapped to integers that are ordered like the values (+0 and -0 both to 0)."""
    nb = a.dtype.itemsize * 8
    u = a.view({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[nb]).astype(np.uint64)
    sign = (u >> np.uint64(nb - 1)) & np.uint64(1)
    mag = (u & np.uint64((1 << (nb - 1)) - 1)).astype(object)
    return np.where(sign.astype(bool), -mag, mag)


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a.astype(np.float64))


def compare_arrays(name: str, got: np.ndarray, want: np.ndarray, tol: list) -> list:
    """[(index, got, want)] of the elements that differ (``tol``: allowed ulps per last-axis slot)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return [((), f"{got.dtype}{got.shape}", f"{want.dtype}{want.shape}")]
    if got.dtype.kind in "biu" or got.dtype == np.bool_:
        bad = got.view(np.uint8).reshape(got.shape + (-1,)) != want.view(np.uint8).reshape(want.shape + (-1,))
        bad = bad.any(axis=-1)
    else:
        gb = got.view(np.uint8).reshape(got.shape + (-1,))
        wb = want.view(np.uint8).reshape(want.shape + (-1,))
        same_bits = (gb == wb).all(axis=-1)
        nan_both = _isnan(got) & _isnan(want)
        bad = ~(same_bits | nan_both)
        if bad.any() and any(tol) and got.ndim == 2:
            for j, tj in enumerate(tol[:got.shape[-1]]):
                if not tj or not bad[:, j].any():
                    continue
                g, w = got[:, j], want[:, j]
                if isinstance(tj, (tuple, list)):
                    tj, cdt = tj
                    g, w = g.astype(cdt), w.astype(cdt)
                dist = np.abs(_ordered(g) - _ordered(w))
                either_nan = _isnan(g) | _isnan(w)
                bad[:, j] &= either_nan | (dist > tj)
    idx = np.argwhere(bad)
    out = []
    for i in idx[:5]:
        i = tuple(int(x) for x in i)
        out.append((i, _fmt(got[i]), _fmt(want[i])))
    return out


def _fmt(v) -> str:
    if isinstance(v, (np.floating,)) or (hasattr(v, "dtype") and v.dtype.kind == "V"):
        return repr(float(v))
    if getattr(v, "dtype", None) is not None and v.dtype.name in NARROW_X:
        return repr(float(v))
    return repr(v.item() if hasattr(v, "item") else v)


def _err_text(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 2000 else s[:2000] + " ..."


def _check_errors():
    from ..runtime.interp_errors import KernelCheckError
    return KernelCheckError


def check_case(case: Case, backends=("CPU",), reference="INTERP") -> list:
    """Run ``case`` on the reference and every backend; the list of Mismatch (empty: all agree)."""
    out = []
    try:
        want = run_case(case, reference)
        ref_err = None
    except Exception as e:  # noqa: BLE001 - every failure is a finding
        want, ref_err = None, e
    for b in backends:
        bname = b if isinstance(b, str) else getattr(b, "name", repr(b))
        if ref_err is not None and isinstance(ref_err, (IndexError, _check_errors())):
            # the kernel itself is broken (out of bounds, a race): running it compiled is undefined
            out.append(Mismatch(case.seed, bname, "ref-error", detail=_err_text(ref_err)))
            continue
        try:
            got = nvrtc_compile_case(case, bname) if _is_nvrtc(bname) else run_case(case, b)
            err = None
        except Exception as e:  # noqa: BLE001
            got, err = None, e
        if ref_err is not None:
            out.append(Mismatch(case.seed, bname, "ref-error", detail=_err_text(ref_err) +
                                (f" (and {bname}: {_err_text(err)})" if err else "")))
            continue
        if err is not None:
            out.append(Mismatch(case.seed, bname, "error", detail=_err_text(err)))
            continue
        if got is None:                  # a compile-only target
            continue
        tols = {s.name: s.tol for s in case.args if s.kind == "array"}
        for name in want:
            where = compare_arrays(name, got[name], want[name], tols.get(name) or [0])
            if where:
                out.append(Mismatch(case.seed, bname, "value", name, where,
                                    tol=max((t[0] if isinstance(t, (tuple, list)) else t) for t in tols.get(name) or [0])))
    return out


# ----------------------------------------------------------------------------- minimising

_PROTECTED_AUG = ("w", "wr")


def _is_counter(node) -> bool:
    """``wN += 1``: the increment that bounds a generated while loop (never removed)."""
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        n = node.target.id
        return n.rstrip("0123456789") in _PROTECTED_AUG and n[-1:].isdigit()
    return False


def _stmt_lists(tree):
    """Every statement list of the module below module level (function bodies and nested blocks),
    in a stable order, as (owner node, field name)."""
    out = []
    for node in ast.walk(tree):
        for fld in ("body", "orelse"):
            lst = getattr(node, fld, None)
            if isinstance(lst, list) and lst and isinstance(lst[0], ast.stmt) and not isinstance(node, ast.Module):
                out.append((node, fld))
    return out


def _variants_delete(tree):
    """Sources with one statement removed (module-level functions and globals too)."""
    n_module = len(tree.body)
    for k in range(n_module):
        node = tree.body[k]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.FunctionDef) and node is tree.body[-1]:
            continue                                       # the kernel itself
        yield ("module", k)
    lists = _stmt_lists(tree)
    for li_, (owner, fld) in enumerate(lists):
        for k in range(len(getattr(owner, fld))):
            yield ("stmt", li_, fld, k)


def _apply_delete(src, site):
    tree = ast.parse(src)
    if site[0] == "module":
        del tree.body[site[1]]
        return ast.unparse(tree)
    lists = _stmt_lists(tree)
    _, li_, fld, k = site
    if li_ >= len(lists):
        return None
    owner, f = lists[li_]
    lst = getattr(owner, f)
    if k >= len(lst):
        return None
    st = lst[k]
    if _is_counter(st) or (isinstance(st, ast.Assign) and ast.unparse(st).startswith("li = ")):
        return None
    del lst[k]
    if not lst:
        if f == "orelse":
            setattr(owner, f, [])
        else:
            lst.append(ast.Pass())
    return ast.unparse(tree)


def _apply_unwrap(src, site):
    """Replace the compound statement at ``site`` by its body (or its else branch)."""
    tree = ast.parse(src)
    lists = _stmt_lists(tree)
    _, li_, fld, k, which = site
    if li_ >= len(lists):
        return None
    owner, f = lists[li_]
    lst = getattr(owner, f)
    if k >= len(lst):
        return None
    st = lst[k]
    if not isinstance(st, (ast.If, ast.For, ast.While)):
        return None
    repl = st.body if which == "body" else st.orelse
    if not repl:
        return None
    if isinstance(st, ast.While):
        repl = [s for s in repl if not _is_counter(s)]
    lst[k:k + 1] = repl or [ast.Pass()]
    return ast.unparse(tree)


def _expr_sites(tree):
    """Expression nodes that may be replaced by one of their operands (not in loop headers and
    while conditions, whose simplification could make a loop unbounded)."""
    banned = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.While):
            banned.update(id(n) for n in ast.walk(node.test))
        elif isinstance(node, ast.For):
            banned.update(id(n) for n in ast.walk(node.iter))
    out = []
    for node in ast.walk(tree):
        if id(node) in banned:
            continue
        if isinstance(node, (ast.BinOp, ast.BoolOp, ast.IfExp, ast.UnaryOp, ast.Compare, ast.Call)):
            out.append(node)
    return out


def _children(node):
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Compare):
        return [node.left] + list(node.comparators)
    if isinstance(node, ast.Call):
        return [a for a in node.args if not isinstance(a, ast.Constant) or not isinstance(a.value, str)]
    return []


def _apply_expr(src, k, c):
    tree = ast.parse(src)
    sites = _expr_sites(tree)
    if k >= len(sites):
        return None
    node = sites[k]
    ch = _children(node)
    if c >= len(ch):
        return None
    repl = ch[c]
    for parent in ast.walk(tree):
        for fld, val in ast.iter_fields(parent):
            if val is node:
                setattr(parent, fld, repl)
                return ast.unparse(tree)
            if isinstance(val, list):
                for i, x in enumerate(val):
                    if x is node:
                        val[i] = repl
                        return ast.unparse(tree)
    return None


def _crash_text(stderr: str) -> str:
    """The line of a crashed run's stderr that names the failure (an assertion, a signal)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Assertion" in ln or "Error" in ln or "error" in ln or "fault" in ln:
            return re.sub(r"\d+", "N", ln.strip())[:200]
    return re.sub(r"\d+", "N", lines[-1].strip())[:200] if lines else ""


def _isolated_signatures(case: Case, backend, reference, timeout: float) -> list:
    """The mismatch signatures of ``case`` checked in a fresh Python process (a crash or a hang of
    the driver cannot take the caller down): [("crash", text)] / [("timeout", "")] when it dies."""
    import json
    import subprocess
    bname = backend if isinstance(backend, str) else getattr(backend, "dev", "CPU")
    with tempfile.TemporaryDirectory() as d:
        path = write_reproducer(case, os.path.join(d, "cand.py"), (), [bname], reference)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        code = ("import sys; from tinykernels.testing.fuzz import _print_signatures; "
                "_print_signatures(sys.argv[1], sys.argv[2], sys.argv[3])")
        try:
            r = subprocess.run([sys.executable, "-c", code, path, bname, reference], capture_output=True,
                               text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [("timeout", "")]
    if r.returncode != 0:
        return [("crash", _crash_text(r.stderr))]
    return [tuple(json.loads(ln[4:])) for ln in r.stdout.splitlines() if ln.startswith("SIG\t")]


def _print_signatures(path: str, backend: str, reference: str) -> None:
    import json
    ns = {"__name__": "tk_fuzz_candidate", "__file__": path}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    kname = next(n for n, v in ns.items() if type(v).__name__ == "Kernel")
    import warnings
    warnings.simplefilter("ignore")
    for m in check_case(case_from_namespace(ns, kname), [backend], reference):
        print("SIG\t" + json.dumps(list(m.signature())), flush=True)


def minimize(case: Case, backend="CPU", reference="INTERP", signature=None, budget_s: float = 60.0,
             log=None, isolate=None) -> Case:
    """A smaller case (statements deleted, blocks unwrapped, expressions replaced by operands) that
    still shows the same kind of disagreement (``Mismatch.signature``). ``isolate`` (default: for
    crashes, hangs and device backends) checks each candidate in a subprocess."""
    t0 = time.time()
    if signature is None:
        ms = check_case(case, [backend], reference)
        if not ms:
            return case
        signature = ms[0].signature()
    if signature[0] != "ref-error" and reference in ("INTERP", "interp"):
        # candidates must stay free of races and uninitialised reads: check mode rejects them
        reference = "INTERP:CHECK"
    if isolate is None:
        isolate = signature[0] in ("crash", "timeout") or (
            not _is_nvrtc(backend) and not getattr(_backend(backend), "is_host", True))

    def interesting_isolated(src):
        """Crashes, hangs and device backends: check the candidate in a subprocess."""
        c = dataclasses.replace(case, source=src + "\n")
        return signature in _isolated_signatures(c, backend, reference, 60.0)

    def interesting(src):
        if src is None or time.time() - t0 > budget_s:
            return False
        if isolate:
            return interesting_isolated(src)
        c = dataclasses.replace(case, source=src + "\n")
        for _ in range(2):        # twice: a flaky disagreement (uninitialised memory) must not lead astray
            try:
                ms = check_case(c, [backend], reference)
            except Exception:  # noqa: BLE001
                return False
            if not any(m.signature() == signature for m in ms):
                return False
        return True

    src = case.source
    tries = 0
    changed = True
    while changed and time.time() - t0 < budget_s:
        changed = False
        # 1. delete statements
        tree = ast.parse(src)
        sites = list(_variants_delete(tree))
        i = 0
        while i < len(sites) and time.time() - t0 < budget_s:
            cand = _apply_delete(src, sites[i])
            tries += 1
            if cand is not None and cand != src and interesting(cand):
                src = cand
                changed = True
                sites = list(_variants_delete(ast.parse(src)))
                continue
            i += 1
        # 2. unwrap if/for/while
        tree = ast.parse(src)
        lists = _stmt_lists(tree)
        sites = [("stmt", li_, fld, k, w) for li_, (o, fld) in enumerate(lists)
                 for k in range(len(getattr(o, fld))) for w in ("body", "orelse")]
        for site in sites:
            if time.time() - t0 > budget_s:
                break
            cand = _apply_unwrap(src, site)
            if cand is not None and interesting(cand):
                src = cand
                changed = True
                break
        # 3. replace expressions by their operands
        k = 0
        while time.time() - t0 < budget_s:
            sites = _expr_sites(ast.parse(src))
            if k >= len(sites):
                break
            done = False
            for c in range(len(_children(sites[k]))):
                cand = _apply_expr(src, k, c)
                tries += 1
                if cand is not None and cand != src and interesting(cand):
                    src = cand
                    changed = done = True
                    break
            if not done:
                k += 1
    if log:
        log(f"minimised seed {case.seed} in {time.time() - t0:.1f}s ({tries} candidates)")
    return dataclasses.replace(case, source=src + "\n")


# ----------------------------------------------------------------------------- reproducers

def _encode_array(a: np.ndarray) -> str:
    name = D.from_any(a.dtype).name
    return f"_arr({name!r}, {tuple(a.shape)!r}, {a.tobytes().hex()!r})"


def _encode_scalar(v) -> str:
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        return f"float.fromhex({v.hex()!r})" if math.isfinite(v) else f"float({repr(v)!r})"
    if isinstance(v, np.generic):
        return f"_scalar({np.dtype(type(v)).name!r}, {np.array(v).tobytes().hex()!r})"
    return repr(v)


def _arr(name, shape, hexdata):
    """Decode an array written by :func:`write_reproducer`."""
    return np.frombuffer(bytes.fromhex(hexdata), dtype=np_dtype(name)).reshape(shape).copy()


def _scalar(name, hexdata):
    return np.frombuffer(bytes.fromhex(hexdata), dtype=np.dtype(name))[0]


def case_args_code(case: Case) -> str:
    lines = ["ARGS = ["]
    for s in case.args:
        if s.kind == "array":
            val = _encode_array(np.asarray(s.value))
        elif s.kind == "scalar":
            val = _encode_scalar(s.value)
        else:
            val = repr(s.value)
        lines.append(f"    ({s.name!r}, {s.kind!r}, {val}, {s.role!r}, {s.const!r}, {s.tol!r}, {s.view!r}),")
    lines.append("]")
    return "\n".join(lines)


def write_reproducer(case: Case, path: str, mismatches=(), backends=("CPU",), reference="INTERP") -> str:
    """A standalone script: the kernel module, its arguments, and a main that runs it on the
    backends and the reference and exits 1 while they disagree."""
    doc = "\n".join(str(m) for m in mismatches) or "(no mismatch recorded)"
    text = (f'"""tinykernels fuzz reproducer: seed {case.seed}.\n\n{textwrap.indent(doc, "    ")}\n\n'
            f'Run it with tinykernels importable (exit status 1 while the backends disagree):\n'
            f'    PYTHONPATH=src python3 {os.path.basename(path)}\n"""\n')
    text += case.source.rstrip("\n") + "\n\n\n"
    text += "# --- arguments and launch (generated) ---------------------------------------------\n"
    text += "from tinykernels.testing.fuzz import _arr, _scalar, reproduce  # noqa: E402\n\n"
    text += case_args_code(case) + "\n"
    text += f"NDRANGE = {case.ndrange!r}\nWORKGROUPSIZE = {case.workgroupsize!r}\nSTATIC_WG = {case.static_wg!r}\n"
    text += f"SEED = {case.seed!r}\nBACKENDS = {list(backends)!r}\nREFERENCE = {reference!r}\n\n"
    text += f'if __name__ == "__main__":\n    raise SystemExit(reproduce(globals(), {case.kname!r}))\n'
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def case_from_namespace(ns: dict, kname: str) -> Case:
    """The Case of a reproducer module (its ARGS / NDRANGE / ... and its own kernel)."""
    args = [ArgSpec(n, k, v, role, const, list(tol), view) for n, k, v, role, const, tol, view in ns["ARGS"]]
    c = Case(ns.get("SEED", 0), "", kname, args, ns["NDRANGE"], ns["WORKGROUPSIZE"], ns["STATIC_WG"])
    c.kernel = ns[kname]
    return c


def reproduce(ns: dict, kname: str, backends=None, reference=None, verbose: bool = True) -> int:
    """Run a reproducer's case; print each disagreement; 1 if any, else 0."""
    c = case_from_namespace(ns, kname)
    ms = check_case(c, backends or ns.get("BACKENDS", ["CPU"]), reference or ns.get("REFERENCE", "INTERP"))
    for m in ms:
        if verbose:
            print(m)
    if verbose and not ms:
        print("all backends agree with the reference")
    return 1 if ms else 0


# ----------------------------------------------------------------------------- the driver

@dataclass
class Summary:
    count: int = 0
    mismatches: list = field(default_factory=list)      # [Mismatch]
    reproducers: list = field(default_factory=list)     # paths
    features: dict = field(default_factory=dict)        # feature -> number of cases
    seconds: float = 0.0
    timeouts: int = 0

    def line(self) -> str:
        return (f"{self.count} kernels, {len(self.mismatches)} mismatches "
                f"({len({m.seed for m in self.mismatches})} seeds), {self.timeouts} timeouts, "
                f"{self.seconds:.1f}s ({self.count / max(self.seconds, 1e-9):.1f} kernels/s)")


def _one(seed, backends, reference, opts, out_dir, do_min, min_budget, notify=None) -> dict:
    """Generate, check and (on a disagreement) minimise and save one seed; a plain dict result."""
    t0 = time.time()
    try:
        case = generate(seed, opts)
    except Exception as e:  # noqa: BLE001 - a generator crash is a fuzzer bug, report it
        m = Mismatch(seed, "generator", "generator-error", detail=_err_text(e) + "\n" + traceback.format_exc())
        return {"seed": seed, "mismatches": [m], "features": [], "seconds": time.time() - t0, "repro": []}
    ms = check_case(case, backends, reference)
    repro = []
    if ms and out_dir:
        if notify:
            notify()
        path = os.path.join(out_dir, f"seed{seed}.py")
        write_reproducer(case, path, ms, backends, reference)
        repro.append(path)
        if do_min:
            by_backend = {}
            for m in ms:
                by_backend.setdefault(m.backend, m)
            m = next(iter(by_backend.values()))
            bspec = next((b for b in backends if (b if isinstance(b, str) else b.name) == m.backend), backends[0])
            if m.kind not in ("timeout", "generator-error"):
                small = minimize(case, bspec, reference, m.signature(), min_budget)
                ms2 = check_case(small, [bspec], reference)
                if ms2:
                    p2 = os.path.join(out_dir, f"seed{seed}_min.py")
                    write_reproducer(small, p2, ms2, [bspec], reference)
                    repro.append(p2)
    return {"seed": seed, "mismatches": ms, "features": sorted(case.features), "seconds": time.time() - t0,
            "repro": repro}


def _worker(conn, backends, reference, opts, out_dir, do_min, min_budget):
    import warnings
    warnings.simplefilter("ignore")
    try:
        while True:
            seed = conn.recv()
            if seed is None:
                break
            res = _one(seed, backends, reference, opts, out_dir, do_min, min_budget,
                       notify=lambda: conn.send(("minimizing", seed)))
            conn.send(("done", res))
    except (EOFError, KeyboardInterrupt):
        pass


def fuzz(seeds, backends=("CPU",), reference="INTERP", jobs: int = 1, out_dir=None, opts: Options | None = None,
         minimize_found: bool = True, timeout: float = 120.0, min_budget: float = 120.0, log=None,
         progress_every: float = 30.0, recycle: int = 300) -> Summary:
    """Check every seed of ``seeds``; ``jobs`` > 1 runs worker processes (each case with a
    ``timeout``, recycled every ``recycle`` cases). Mismatches are saved to ``out_dir``."""
    opts = opts or Options()
    seeds = list(seeds)
    summ = Summary()
    t0 = time.time()
    last = [t0]

    def record(res):
        if out_dir and any(m.kind in ("crash", "timeout") for m in res["mismatches"]):
            try:          # the worker died with the case: save it from here (regenerated from its seed)
                path = os.path.join(out_dir, f"seed{res['seed']}.py")
                write_reproducer(generate(res["seed"], opts), path, res["mismatches"], backends, reference)
                res["repro"] = [path]
            except Exception:  # noqa: BLE001
                pass
        summ.count += 1
        summ.mismatches.extend(res["mismatches"])
        summ.reproducers.extend(res["repro"])
        for f in res["features"]:
            summ.features[f] = summ.features.get(f, 0) + 1
        for m in res["mismatches"]:
            if log:
                log(f"MISMATCH {m}")
        now = time.time()
        if log and now - last[0] >= progress_every:
            last[0] = now
            summ.seconds = now - t0
            log(f"[{now - t0:7.0f}s] {summ.line()}")

    if jobs <= 1:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in seeds:
                record(_one(s, backends, reference, opts, out_dir, minimize_found, min_budget))
        summ.seconds = time.time() - t0
        return summ

    import multiprocessing as mp
    from multiprocessing.connection import wait
    # fork is cheap, but an OpenCL driver (PoCL's threads) does not survive it: spawn then
    host_only = all(str(b).upper().split(":")[0] in ("CPU", "INTERP") for b in backends)
    ctx = mp.get_context("fork" if host_only and sys.platform.startswith("linux") else "spawn")
    pending = list(reversed(seeds))
    workers = {}          # conn -> [process, seed or None, deadline, cases run]

    def start():
        a, b = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(b, tuple(backends), reference, opts, out_dir, minimize_found,
                                              min_budget), daemon=True)
        p.start()
        b.close()
        workers[a] = [p, None, 0.0, 0]
        return a

    def feed(conn):
        w = workers[conn]
        if w[3] >= recycle:
            stop(conn)
            conn = start()
            w = workers[conn]
        if pending:
            s = pending.pop()
            conn.send(s)
            w[1], w[2] = s, time.time() + timeout
            w[3] += 1
        else:
            w[1] = None

    def stop(conn, kill=False):
        p = workers.pop(conn)[0]
        try:
            if kill:
                p.kill()
            else:
                conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        p.join(5)
        if p.is_alive():
            p.kill()
        conn.close()

    for _ in range(min(jobs, len(seeds))):
        feed(start())
    while any(w[1] is not None for w in workers.values()):
        busy = [c for c, w in workers.items() if w[1] is not None]
        ready = wait(busy, timeout=1.0)
        for conn in ready:
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                w = workers[conn]
                seed = w[1]
                record({"seed": seed, "mismatches": [Mismatch(seed, ",".join(map(str, backends)), "crash",
                        detail=f"worker process died (exit code {w[0].exitcode})")], "features": [],
                        "seconds": 0.0, "repro": []})
                stop(conn, kill=True)
                feed(start())
                continue
            if kind == "minimizing":
                workers[conn][2] = time.time() + timeout + min_budget * 4
                continue
            record(payload)
            feed(conn)
        now = time.time()
        for conn, w in list(workers.items()):
            if w[1] is not None and now > w[2]:
                seed = w[1]
                summ.timeouts += 1
                record({"seed": seed, "mismatches": [Mismatch(seed, ",".join(map(str, backends)), "timeout",
                        detail=f"no result after {timeout:.0f}s")], "features": [], "seconds": timeout,
                        "repro": []})
                stop(conn, kill=True)
                feed(start())
    for conn in list(workers):
        stop(conn)
    summ.seconds = time.time() - t0
    return summ
