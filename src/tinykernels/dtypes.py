"""Scalar types of the kernel language and NumPy 2 (NEP 50) type promotion.

Public dtypes are NumPy's scalar types where NumPy has them (so ``np.dtype(tk.float32)``
and ``a.dtype == tk.float32`` just work) and ``ml_dtypes`` types for bfloat16 and fp8 when
that package is installed. Inside the compiler every type is a :class:`DType`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:  # optional: host arrays of bfloat16 / fp8
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    _mld = None


@dataclass(frozen=True)
class DType:
    """A scalar type inside the compiler: ``kind`` is b (bool), i, u or f."""
    name: str
    kind: str
    bits: int

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_storage_only(self) -> bool:
        """float16, bfloat16 and fp8 compute in float32 and round on store."""
        return self.kind == "f" and self.name not in ("float32", "float64")

    def __repr__(self) -> str:
        return f"tk.{self.name}"


bool_ = DType("bool", "b", 8)
int8, int16, int32, int64 = (DType(f"int{b}", "i", b) for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (DType(f"uint{b}", "u", b) for b in (8, 16, 32, 64))
float16, float32, float64 = DType("float16", "f", 16), DType("float32", "f", 32), DType("float64", "f", 64)
bfloat16 = DType("bfloat16", "f", 16)
float8_e4m3fn, float8_e5m2 = DType("float8_e4m3fn", "f", 8), DType("float8_e5m2", "f", 8)

ALL = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
       float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2)
BY_NAME = {d.name: d for d in ALL}


def unsupported(dtype) -> str:
    """What to say of an array of a NumPy ``dtype`` no kernel takes: the dtypes kernels take
    and how to convert."""
    how = "x.real and x.imag as two arrays" if np.dtype(dtype).kind == "c" else "x.astype(np.float32), say"
    return (f"unsupported dtype {dtype} (kernels take arrays of bool, int8..int64, uint8..uint64, float16, "
            f"bfloat16, float32, float64, float8_e4m3fn, float8_e5m2): pass {how}")


class _MissingDType:
    """Stand-in for a public dtype whose host representation needs ``ml_dtypes``."""

    def __init__(self, name: str):
        self.__name__ = self.name = name

    def __repr__(self) -> str:
        return f"tk.{self.name}"

    def __call__(self, *a, **k):
        raise TypeError(f"host values of {self.name} need ml_dtypes: pip install ml_dtypes")


def _public(name: str):
    if hasattr(np, name) and name != "bool":
        return getattr(np, name)
    if name == "bool":
        return np.bool_
    if _mld is not None and hasattr(_mld, name):
        return getattr(_mld, name)
    return _MissingDType(name)


PUBLIC = {d.name: _public(d.name) for d in ALL}


def from_any(obj) -> DType | None:
    """Map a public dtype, NumPy dtype or scalar type, torch dtype, or a DType to a DType (None if
    not a dtype)."""
    if isinstance(obj, DType):
        return obj
    if isinstance(obj, _MissingDType):
        return BY_NAME[obj.name]
    if obj is bool:
        return bool_
    if obj is int:
        return int64
    if obj is float:
        return float64
    try:
        hit = _FROM_ANY.get(obj)
    except TypeError:                 # unhashable
        hit = None
    if hit is not None:
        return hit
    t = type(obj)
    if t.__name__ == "dtype" and t.__module__ == "torch":     # torch.float16 -> float16
        return BY_NAME.get(str(obj).rpartition(".")[2])
    try:
        name = np.dtype(obj).name
    except TypeError:
        return None
    d = BY_NAME.get(name)
    if d is not None and isinstance(obj, (str, np.dtype)):
        _FROM_ANY[obj] = d            # only hits are kept: a name NumPy learns later still maps
    return d


def queried(obj) -> DType | None:
    """:func:`from_any` for a capability query (``backend.supports(dtype)``): None for a dtype
    tinykernels has no type for (``complex64``: not supported); a TypeError for a name that is
    no dtype at all (a misspelt ``"float46"``), which a False would report as unsupported."""
    d = from_any(obj)
    if d is None and isinstance(obj, str) and obj not in BY_NAME:    # (bfloat16 without ml_dtypes: False)
        try:
            np.dtype(obj)
        except TypeError:
            raise TypeError(f"{obj!r} is not a dtype name (tinykernels' dtypes: {', '.join(BY_NAME)})") from None
    return d


# from_any's answers for names and NumPy dtypes (resolving one through NumPy, ``np.dtype(x).name``,
# costs microseconds, and every llm call and launch resolves a few)
_FROM_ANY: dict = {}


def to_numpy(d: DType) -> np.dtype:
    """The NumPy dtype of host arrays holding ``d`` (needs ml_dtypes for bfloat16 and fp8)."""
    pub = PUBLIC[d.name]
    if isinstance(pub, _MissingDType):
        raise TypeError(f"host arrays of {d.name} need ml_dtypes: pip install ml_dtypes")
    return np.dtype(pub)


# ----------------------------------------------------------------------------- promotion

_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}


@dataclass(frozen=True)
class Ty:
    """A value's type: a DType plus NEP 50 weakness (Python literals and Python scalars)."""
    dtype: DType
    weak: bool = False

    def __repr__(self) -> str:
        return f"{'weak ' if self.weak else ''}{self.dtype.name}"


def _strong(a: DType, b: DType) -> DType:
    if a == b:
        return a
    sa, sb = a.is_storage_only and a.bits < 32, b.is_storage_only and b.bits < 32
    if sa and sb:            # two different narrow floats meet in float32 (as with ml_dtypes)
        return float32
    if sa or sb:
        nf, other = (a, b) if sa else (b, a)
        if other.is_float:   # float32 / float64
            return other
        if other.kind == "b" or other.bits <= 8:
            return nf        # like NumPy's float16 with int8: the narrow float holds them
        return float32 if other.bits <= 16 else float64
    return from_any(np.result_type(np.dtype(a.name), np.dtype(b.name)))


def promote(a: Ty, b: Ty, default_float: DType = float64, default_int: DType = int64) -> Ty:
    """NEP 50: the result type of a binary operation on ``a`` and ``b``; ``default_float`` is
    what Python floats (and results NumPy would give in float64) are on this backend."""
    if a.weak and b.weak:
        ra, rb = _KIND_RANK[a.dtype.kind], _KIND_RANK[b.dtype.kind]
        if ra == rb == 1 and uint64 in (a.dtype, b.dtype):
            return Ty(uint64, True)    # two Python ints, one >= 2**63: uint64, whichever is left
        return Ty(a.dtype if ra >= rb else b.dtype, True)
    if a.weak or b.weak:
        w, s = (a, b) if a.weak else (b, a)
        if _KIND_RANK[w.dtype.kind] <= _KIND_RANK[s.dtype.kind]:
            return Ty(s.dtype)
        # the weak value's kind is higher: its default type of that kind
        if w.dtype.kind == "f":
            return Ty(s.dtype if s.dtype.is_float else default_float)
        return Ty(default_int)  # bool with a Python int
    d = _strong(a.dtype, b.dtype)
    # without float64 (default_float float32: WebGPU, Metal) NumPy's float64 results (int32
    # with float32, as when a local holds an int32 and later `v / 2`) are float32, as `/` is
    return Ty(default_float if d == float64 and default_float.bits < 64 else d)


def weak_int_ty(value: int, t: Ty) -> Ty:
    """The type of a Python int ``value`` held at run time, ``t`` being the backend's weak int
    (int64; int32 on WebGPU): a weak uint64 for a value in [2**63, 2**64), as NumPy makes
    ``np.asarray(2**63)`` a uint64 and as a Python int argument of that value is typed."""
    if (1 << 63) <= value < (1 << 64):
        return Ty(uint64, True)
    return t


def true_divide_type(t: Ty, default_float: DType = float64) -> Ty:
    """Result type of ``/``: float operands keep their type; integers and bools give the
    default float (float64), as NumPy's true_divide has only float loops."""
    if t.dtype.is_float:
        return t
    return Ty(default_float, t.weak)


def fits(value: int, d: DType) -> bool:
    """Whether a Python int is representable in integer type ``d``."""
    if d.kind == "b":
        return value in (0, 1)
    if d.kind == "u":
        return 0 <= value < (1 << d.bits)
    return -(1 << (d.bits - 1)) <= value < (1 << (d.bits - 1))


def dot4_i8(a: int, b: int, acc: int) -> int:
    """The value of ``tk.dot4_i8(a, b, acc)`` on Python ints: ``acc`` plus the dot product of the
    four signed bytes of ``a`` and of ``b`` (byte 0 the least significant), wrapped to int32."""
    sb = [(((a >> s) & 255) ^ 128) - 128 for s in (0, 8, 16, 24)]
    tb = [(((b >> s) & 255) ^ 128) - 128 for s in (0, 8, 16, 24)]
    v = (acc + sum(x * y for x, y in zip(sb, tb))) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v
