"""The type names the generator works with: the strong dtypes (``bool``, the ints, the floats, the
narrow floats where ml_dtypes is installed) and the generator-only weak kinds (``pyint``,
``pyfloat``, ``lbool``), their promotion through :mod:`tinykernels.dtypes`, integer ranges and
float limits, the operator tables, and :data:`PAIRS`: for each operator and result type, the
operand types that produce it.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as D

try:
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - without ml_dtypes the narrow floats are not generated
    _mld = None


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
