"""Scalar semantics of the interpreter backend: what one operation on one value gives.

Kernel code runs as ordinary Python on NumPy scalars (array loads), Python ints (indices,
``int()``, shapes) and Python floats, so most of NEP 50 happens by itself. This module holds
the places where plain Python or NumPy differ from SPEC.md and docs/language.md; the code
transformer (:mod:`.transform`) routes the matching operators and calls here:

* Python ints are the compiler's *weak int64*: ``+ - * << ** neg`` wrap to 64 bits; one in
  [2**63, 2**64) (a literal, a Python int argument) and every result of an operation on two
  Python ints one of which is such (a :class:`U64`) is its *weak uint64*: computed modulo 2**64;
* integer ``//`` and ``%`` by zero give 0, float ones NaN/inf (never ZeroDivisionError);
* ``int ** negative`` gives 0, ``<<``/``>>`` past the width give NumPy's 0 / -1;
* casts (``tk.int8(x)``, stores) follow C conversions (ints wrap, floats truncate);
* float16 / bfloat16 / fp8 compute in float32 and round on store or explicit cast;
* ``math.*`` on a float32 uses the float32 function and returns the argument's float type;
* ``abs/min/max/round/int/float/bool/range`` give the compiler's types;
* ``tk.print`` formats like the C backend (``%g`` floats, decimal ints, bools as 0/1);
* ``tk.random`` computes exactly what :mod:`tinykernels.random` computes on the host.
"""
from __future__ import annotations

import builtins
import math
import operator
import types
from fractions import Fraction

import numpy as np

from ... import dtypes as D

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_I64MIN, _I64MAX = -(1 << 63), (1 << 63) - 1
_PYNUM = (bool, int, float)   # (and U64, defined below: a weak uint64)


def wrap64(v: int) -> int:
    """A Python int wrapped to int64 (two's complement)."""
    v &= _M64
    return v - (1 << 64) if v > _I64MAX else v


def wrap_bits(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    if signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


class U64(int):
    """A Python int of the compiler's weak uint64 type, in [0, 2**64): the result of an operation
    on two Python ints one of which is a weak uint64 (a plain int in [2**63, 2**64) is one by its
    value; ``s - (2**64 - 6)`` is a weak uint64 5, so ``5 - 10`` after it is 2**64 - 5). NumPy
    would take an int subclass for a strong int64/uint64: :func:`_plain` turns it back into an
    int before it meets a NumPy value."""
    __slots__ = ()


def _isint(v) -> bool:
    t = type(v)
    return t is int or t is bool or t is U64


def is_u64(v) -> bool:
    """Whether ``v`` is a weak uint64: a U64, or a Python int in [2**63, 2**64)."""
    t = type(v)
    return t is U64 or (t is int and v > _I64MAX)


def _plain(v):
    return int(v) if type(v) is U64 else v


def _u64_op(ufn):
    """A binary operator whose two Python-int operands compute as ``ufn`` on their uint64 values
    (each taken modulo 2**64, as the compiled code converts them to uint64) when one of them is
    a weak uint64; a U64 meeting anything else is a plain Python int there."""
    def deco(fn):
        def op(a, b):
            if is_u64(a) or is_u64(b):
                if _isint(a) and _isint(b):
                    r = ufn(int(a) & _M64, int(b) & _M64)
                    return U64(r & _M64) if type(r) is int else r
                a, b = _plain(a), _plain(b)
            return fn(a, b)
        op.__name__, op.__doc__ = fn.__name__, fn.__doc__
        return op
    return deco


# ----------------------------------------------------------------------------- dtypes and casts

class DTypeCast:
    """A kernel dtype (``tk.float32``, ``A.dtype``): calling it casts with C conversion rules.

    Compares equal to the NumPy dtype / scalar type it stands for, and ``np.dtype(obj)`` works,
    so ``A.dtype == tk.float32`` and ``tk.localmem(A.dtype, ...)`` behave as in the compiler."""
    __slots__ = ("dtype", "type", "name", "kind", "bits", "storage", "compute")

    def __init__(self, npdtype: np.dtype):
        self.dtype = np.dtype(npdtype)
        self.type = self.dtype.type
        d = D.from_any(self.dtype)
        self.name = d.name if d is not None else self.dtype.name
        self.kind = d.kind if d is not None else self.dtype.kind
        self.bits = d.bits if d is not None else self.dtype.itemsize * 8
        self.storage = bool(d is not None and d.is_storage_only)
        # type of the values kernels compute with (loads, casts): a Narrow class for the
        # storage-only floats, else the NumPy scalar type
        self.compute = _narrow_class(self) if self.storage else self.type

    def __call__(self, v):
        return cast(v, self)

    def __eq__(self, other):
        if isinstance(other, DTypeCast):
            return self.dtype == other.dtype
        try:
            return self.dtype == np.dtype(other)
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return hash(self.dtype)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def __name__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"tk.{self.name}"


_CASTS: dict = {}


def dtype_cast(obj) -> DTypeCast:
    """The DTypeCast of a public dtype, NumPy dtype or scalar type (TypeError if not a dtype)."""
    if isinstance(obj, DTypeCast):
        return obj
    if isinstance(obj, type) and issubclass(obj, Narrow):
        return obj.dc
    c = _CASTS.get(obj) if isinstance(obj, (type, np.dtype)) else None
    if c is not None:
        return c
    d = D.from_any(obj) if not isinstance(obj, (bool, int, float)) or isinstance(obj, type) else None
    if d is None:
        raise TypeError(f"expected a dtype such as tk.float32 or A.dtype, got {obj!r}")
    npd = D.to_numpy(d)
    c = _CASTS.get(npd)
    if c is None:
        c = _CASTS[npd] = DTypeCast(npd)
    if isinstance(obj, (type, np.dtype)):
        _CASTS[obj] = c
    return c


def cast(v, dc: DTypeCast):
    """``dc(v)``: the value converted like a C cast to the kernel type (strong NumPy scalar,
    or a :class:`Narrow` value for float16 / bfloat16 / fp8)."""
    k = dc.kind
    if isinstance(v, Narrow):
        v = v.v
    if k == "b":
        return np.bool_(v != 0)
    if k in "iu":
        if _isint(v):
            return dc.type(wrap_bits(int(v), dc.bits, k == "i"))
        if type(v) is float:
            v = np.float64(v)
        if isinstance(v, np.generic):
            return v.astype(dc.dtype)
        return dc.type(v)
    if dc.storage:  # round through the narrow type, compute in float32
        return dc.compute(_narrow(v, dc).astype(np.float32))
    if _isint(v) and not (_I64MIN <= v <= _M64):
        v = float(v)
    return dc.type(v)


def _narrow(v, dc: DTypeCast):
    """The non-Narrow value ``v`` rounded to the storage-only ``dc`` as the C backends do: a
    float64 to float16 directly (rounded once, C's ``tk_f64_to_f16``), anything else through
    float32."""
    if dc.name == "float16" and (type(v) is float or type(v) is np.float64):
        return np.float64(v).astype(dc.dtype)
    return np.float32(float(v) if _isint(v) else v).astype(dc.dtype)


def store_value(v, dc: DTypeCast):
    """The value to put into a NumPy array of ``dc`` so that it holds what C would store."""
    if dc.storage:
        if isinstance(v, Narrow):
            return v.v
        if dc.name == "float16" and (type(v) is float or type(v) is np.float64):
            return _narrow(v, dc)
        return np.float32(float(v) if _isint(v) else v) if type(v) is not np.float32 else v
    return cast(v, dc)


# ----------------------------------------------------------------------------- narrow floats

class Narrow:
    """A float16 / bfloat16 / fp8 value (the type of loads from such arrays and of casts such
    as ``tk.float16(x)``): it computes in float32 (``.v``) and is rounded to its type only when
    stored or cast, as in the compiled backends. It keeps its type through arithmetic, so a weak
    Python literal combined with it is first converted to the narrow type (NEP 50), and a
    wider strong type (``float32``, ``int32`` ...) promotes it like NumPy does."""
    __slots__ = ("v",)
    __array_ufunc__ = None            # NumPy scalars defer to our reflected operators
    dc = None                         # DTypeCast of the narrow type (per subclass)
    dc_d = None                       # its DType

    def __init__(self, v):
        self.v = v if type(v) is np.float32 else np.float32(v)

    def __float__(self):
        return float(self.v)

    def __int__(self):
        return to_int(self.v)

    def __bool__(self):
        return bool(self.v)

    def __hash__(self):
        return hash(float(self.v))

    def __repr__(self):
        return f"{self.dc.name}({float(self.v)!r})"

    def __neg__(self):
        return type(self)(-self.v)

    def __pos__(self):
        return self

    def __abs__(self):
        return type(self)(abs(self.v))

    def __round__(self, *nd):
        return round(self.v, *nd)

    @property
    def dtype(self):
        return self.dc


def _weak_to_narrow(x, cls):
    """A Python literal converted to a narrow type (rounded), as a float32."""
    return cast(x, cls.dc).v


def _nbin(a, b, fn):
    """``fn(a, b)`` where ``a`` or ``b`` is Narrow: NEP 50 promotion, float32 arithmetic."""
    na, nb = isinstance(a, Narrow), isinstance(b, Narrow)
    if na and nb:
        cls = promote_types(type(a), type(b))
        av, bv = a.v, b.v
    else:
        n, o = (a, b) if na else (b, a)
        to = type(o)
        if to is U64:
            o, to = int(o), int
        if to is float or to is int or to is bool:
            cls = type(n)
            ov = _weak_to_narrow(o, cls)
        elif isinstance(o, np.generic):
            cls = promote_types(type(n), to)
            if not (isinstance(cls, type) and issubclass(cls, Narrow)):
                nv = cls(n.v)
                return fn(nv, cls(o)) if na else fn(cls(o), nv)
            ov = cast(o, cls.dc).v        # NumPy converts the operand to the promoted (narrow) type
        else:
            return NotImplemented
        av, bv = (n.v, ov) if na else (ov, n.v)
    r = fn(av, bv)
    if isinstance(r, np.floating):
        if isinstance(cls, type) and issubclass(cls, Narrow):
            return cls(r)
        return cls(r) if cls is not np.float32 else r
    return r


def _narrow_ops():
    import operator as op
    fns = {"add": op.add, "sub": op.sub, "mul": op.mul, "truediv": op.truediv,
           "floordiv": op.floordiv, "mod": op.mod, "pow": lambda a, b: _scalar_pow(a, b)}
    for name, fn in fns.items():
        setattr(Narrow, f"__{name}__", lambda self, o, fn=fn: _nbin(self, o, fn))
        setattr(Narrow, f"__r{name}__", lambda self, o, fn=fn: _nbin(o, self, fn))
    for name, fn in {"lt": op.lt, "le": op.le, "gt": op.gt, "ge": op.ge, "eq": op.eq, "ne": op.ne}.items():
        setattr(Narrow, f"__{name}__", lambda self, o, fn=fn: _nbin(self, o, fn))


_narrow_ops()
_NARROW: dict = {}


def _narrow_class(dc: DTypeCast):
    cls = _NARROW.get(dc.name)
    if cls is None:
        cls = _NARROW[dc.name] = type(f"{dc.name}_value", (Narrow,), {"__slots__": (), "dc": dc,
                                                                       "dc_d": D.BY_NAME[dc.name]})
    return cls


# ----------------------------------------------------------------------------- type promotion

_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}
_PROMO: dict = {}


def _kind(t) -> str:
    if t is bool:
        return "b"
    if t is U64:
        return "u"
    if t is int:
        return "i"
    if t is float:
        return "f"
    if isinstance(t, type) and issubclass(t, Narrow):
        return "f"
    return np.dtype(t).kind


def _dt(t) -> D.DType:
    return t.dc_d if isinstance(t, type) and issubclass(t, Narrow) else D.from_any(t)


def _from_dt(d: D.DType):
    if d.is_storage_only:
        return dtype_cast(D.to_numpy(d)).compute
    return np.dtype(d.name).type


def promote_types(ta, tb):
    """NEP 50 result type of two value types (Python types are weak; Narrow classes stand for
    float16 / bfloat16 / fp8)."""
    key = (ta, tb)
    r = _PROMO.get(key)
    if r is not None:
        return r
    wa, wb = ta in _PYNUM or ta is U64, tb in _PYNUM or tb is U64
    if wa and wb:
        r = ta if _RANK[_kind(ta)] >= _RANK[_kind(tb)] else tb
        if r is not float and U64 in (ta, tb):
            r = U64                     # two Python ints, one a weak uint64 (either side)
    elif wa or wb:
        w, s = (ta, tb) if wa else (tb, ta)
        kw, ks = _kind(w), _kind(s)
        if _RANK[kw] <= _RANK[ks]:
            r = s
        elif kw == "f":
            r = s if ks == "f" else np.float64
        else:
            r = np.int64
    else:
        r = _from_dt(D._strong(_dt(ta), _dt(tb)))
    _PROMO[key] = r
    return r


def to_type(v, t):
    """``v`` converted to value type ``t`` (a Python or NumPy scalar type)."""
    if type(v) is t:
        return v
    if t is int:
        return to_int(v)
    if t is U64:
        return U64(int(v) & _M64)
    if t is float:
        return float(v)
    if t is bool:
        return bool(v)
    return cast(v, dtype_cast(t))


def common(values):
    """Every value converted to their common (promoted) type."""
    t = type(values[0])
    for v in values[1:]:
        if type(v) is not t:
            t = promote_types(t, type(v))
    if t is int and any(is_u64(v) for v in values):
        t = U64                 # Python ints, one in [2**63, 2**64): a weak uint64 (by its value)
    return [to_type(v, t) for v in values], t


# ----------------------------------------------------------------------------- operators

def _weak_int_wrapped(a, b):
    """``(a, b)`` with a Python int operand that does not fit the NumPy integer it meets
    converted to that integer's type, wrapping (two's complement); None when neither is such.
    NumPy raises OverflowError there (NEP 50); the compiled backends hold a run-time Python
    int (a scalar argument, ``int(x)``) as an int64 and convert it to the other operand's type,
    so ``x_uint8 + v`` with ``v = 300`` adds 44, as the kernel language defines."""
    if type(a) is int and isinstance(b, np.integer):
        return b.dtype.type(wrap_bits(a, 8 * b.dtype.itemsize, b.dtype.kind == "i")), b
    if type(b) is int and isinstance(a, np.integer):
        return a, a.dtype.type(wrap_bits(b, 8 * a.dtype.itemsize, a.dtype.kind == "i"))
    return None


def _int_op(fn):
    """``fn(a, b)``, with the operands of :func:`_weak_int_wrapped` when NumPy refuses them."""
    def op(a, b):
        try:
            return fn(a, b)
        except OverflowError:
            ab = _weak_int_wrapped(a, b)
            if ab is None:
                raise
            return fn(*ab)
    op.__name__, op.__doc__ = fn.__name__, fn.__doc__
    return op


@_u64_op(operator.add)
@_int_op
def op_add(a, b):
    r = a + b
    if type(r) is int and not _I64MIN <= r <= _I64MAX:
        return wrap64(r)
    return r


@_u64_op(operator.sub)
@_int_op
def op_sub(a, b):
    r = a - b
    if type(r) is int and not _I64MIN <= r <= _I64MAX:
        return wrap64(r)
    return r


@_u64_op(operator.mul)
@_int_op
def op_mul(a, b):
    r = a * b
    if type(r) is int and not _I64MIN <= r <= _I64MAX:
        return wrap64(r)
    return r


@_u64_op(operator.and_)
@_int_op
def op_and(a, b):
    return a & b


@_u64_op(operator.or_)
@_int_op
def op_or(a, b):
    return a | b


@_u64_op(operator.xor)
@_int_op
def op_xor(a, b):
    return a ^ b


def op_truediv(a, b):
    a, b = _plain(a), _plain(b)        # each converted to float64 by its value, as compiled
    ta, tb = type(a), type(b)
    if ta in _PYNUM and tb in _PYNUM:
        fa, fb = float(a), float(b)
        if fb == 0.0:
            return float(np.float64(fa) / np.float64(fb))
        return fa / fb
    return a / b


@_u64_op(lambda a, b: a // b if b else 0)
@_int_op
def op_floordiv(a, b):
    try:
        r = a // b
    except ZeroDivisionError:          # only Python scalars raise
        if type(a) is float or type(b) is float:
            return float(np.float64(a) // np.float64(b))
        return 0
    if type(r) is int and not _I64MIN <= r <= _I64MAX:
        return wrap64(r)
    return r


@_u64_op(lambda a, b: a % b if b else 0)
@_int_op
def op_mod(a, b):
    try:
        return a % b
    except ZeroDivisionError:
        if type(a) is float or type(b) is float:
            return float(np.float64(a) % np.float64(b))
        return 0


def _neg_inf_pow(a, b, r):
    """``r`` (a power ``a ** b`` NumPy computed) as C99 (IEEE 754) pow gives it where NumPy's
    scalar power differs (its array loops and every C backend's pow agree with C99):
    pow(-inf, y) = +inf for y > 0 not an integer (NumPy: NaN), and pow(-0, y) = +0 for y > 0
    not an odd integer (NumPy takes sqrt(-0) = -0 for y = 0.5)."""
    if isinstance(r, np.floating):
        if np.isnan(r) and np.isneginf(a) and b > 0:
            return type(r)(np.inf)
        if r == 0 and np.signbit(r) and a == 0 and b > 0 and not (np.isfinite(b) and np.fmod(b, 2) == 1):
            return type(r)(0.0)
    return r


def c_pow(a, b):
    """``math.pow`` of float scalars: NumPy's power, pow(-inf, y) as C99."""
    with np.errstate(all="ignore"):
        return _neg_inf_pow(a, b, np.power(a, b))


def _scalar_pow(a, b):
    """``a ** b`` of float scalars: NumPy's scalar power (C pow), pow(-inf, y) as C99."""
    with np.errstate(all="ignore"):
        return _neg_inf_pow(a, b, a ** b)


def _neg_int_pow(a: int, b: int) -> int:
    """Integer ``a ** b`` for ``b < 0``: ``1 / a ** -b`` truncated toward zero (1 for a = 1,
    +-1 for a = -1, else 0), as every backend computes it (NumPy raises instead)."""
    return 1 if a == 1 else (-1 if b & 1 else 1) if a == -1 else 0


@_u64_op(lambda a, b: pow(a, b, 1 << 64))
@_int_op
def op_pow(a, b):
    ta, tb = type(a), type(b)
    if ta in _PYNUM and tb in _PYNUM:
        if (ta is int or ta is bool) and (tb is int or tb is bool):
            if b < 0:
                return _neg_int_pow(a, b)
            return wrap64(pow(a, b, 1 << 64))
        return float(_scalar_pow(np.float64(a), np.float64(b)))
    if isinstance(a, Narrow) or isinstance(b, Narrow):
        return a ** b
    if isinstance(a, np.floating) or isinstance(b, np.floating):
        return _scalar_pow(a, b)
    try:
        return a ** b
    except ValueError:                 # NumPy: integers to negative integer powers
        return np.result_type(a, b).type(_neg_int_pow(int(a), int(b)))   # the promoted type (a bool base too)


def _fast_pow(x, y):
    """Float ``x ** y`` with NumPy's fast paths: square, reciprocal, sqrt for y = 2, -1, 0.5."""
    if y == 2:
        return x * x
    if y == -1:
        return type(x)(1) / x
    if y == 0.5:
        return np.sqrt(x)
    return x ** y


def op_powc(a, b):
    """``a ** c`` with a compile-time constant exponent ``c``: floats take NumPy's fast paths
    for a scalar exponent (``x ** 2`` is ``x * x``, ``x ** -1`` is ``1 / x``, ``x ** 0.5`` is
    ``sqrt(x)``), as the compiler does; everything else is :func:`op_pow`."""
    r = op_pow(a, b)
    if not (isinstance(b, (int, float, np.number)) and b in (2, -1, 0.5)):
        return r
    if isinstance(a, Narrow) or isinstance(b, Narrow):
        return _nbin(a, b, _fast_pow)
    if isinstance(r, np.floating):
        t = type(r)
        return _fast_pow(t(a), t(b))
    if type(r) is float:
        return float(_fast_pow(np.float64(a), np.float64(b)))
    return r


def fold(op: str, a, b):
    """``a op b`` of two compile-time constants, exactly as the compiler folds it: Python ints
    with Python's exact arithmetic (``2**70`` is 2**70, not wrapped), Python floats with
    Python's float arithmetic; anything else as at run time."""
    ta, tb = type(a), type(b)
    if ta in _PYNUM and tb in _PYNUM:
        if ta is not float and tb is not float and op == "**" and b < 0:
            return float(a ** b)             # Python's 2 ** -3 is 0.125 (the compiler folds it so)
        if ta is not float and tb is not float and op != "/":
            if not ((op in ("//", "%") and b == 0) or (op == "**" and not 0 <= b <= 4096)
                    or (op in ("<<", ">>") and not 0 <= b <= 4096)):
                return _PYOPS[op](a, b)
        elif op in ("+", "-", "*", "/", "**", "//", "%"):
            try:
                r = _PYOPS[op](float(a), float(b))
            except ArithmeticError:          # 0.0 ** -1, x / 0.0, overflow: left to run time
                r = None
            if type(r) is float:
                return r
    if op == "**":
        return op_powc(a, b)                  # a constant exponent: NumPy's fast paths
    return _RUNTIME_OPS[op](a, b)


@_u64_op(lambda a, b: a << b if b < 64 else 0)
@_int_op
def op_lshift(a, b):
    if _isint(a) and _isint(b):
        if 0 <= b < 64:
            r = a << b
            return wrap64(r) if not _I64MIN <= r <= _I64MAX else r
        return 0
    return a << b


@_u64_op(lambda a, b: a >> b if b < 64 else 0)
@_int_op
def op_rshift(a, b):
    if _isint(a) and _isint(b):
        if 0 <= b < 64:
            return a >> b
        return -1 if a < 0 else 0
    return a >> b


def op_neg(a):
    if is_u64(a):
        return U64(-a & _M64)
    r = -a
    if type(r) is int and not _I64MIN <= r <= _I64MAX:
        return wrap64(r)
    return r


def op_inv(a):
    if type(a) is bool:
        return not a
    if is_u64(a):
        return U64(~a & _M64)
    r = ~a
    if type(r) is int and not _I64MIN <= r <= _I64MAX:
        return wrap64(r)
    return r


_PYOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<<": operator.lshift,
          ">>": operator.rshift}
_RUNTIME_OPS = {"+": op_add, "-": op_sub, "*": op_mul, "/": op_truediv, "//": op_floordiv, "%": op_mod,
                "**": op_pow, "<<": op_lshift, ">>": op_rshift, "&": op_and, "|": op_or, "^": op_xor}


def aug_item(container, index, value, op):
    """``container[index] op= value`` evaluating container and index once."""
    container[index] = op(container[index], value)


def annotate(ann, value):
    """``x: T = value``: a dtype annotation casts."""
    if isinstance(ann, DTypeCast):
        return ann(value)
    try:
        return dtype_cast(ann)(value)
    except TypeError:
        return value


def annotate_param(ann, value):
    """A parameter annotated with a dtype (``n: tk.int32``): a scalar argument is cast; an array
    is passed as is (the frontend check refuses one of another dtype)."""
    if hasattr(value, "shape") and not isinstance(value, np.generic):
        return value
    return annotate(ann, value)


# ----------------------------------------------------------------------------- builtins

def to_int(x) -> int:
    """``int(x)``: a weak int64 (Python int), converted like a C cast."""
    t = type(x)
    if t is int or t is U64:
        return int(x) if _I64MIN <= x <= _I64MAX else wrap64(int(x))
    if t is bool:
        return int(x)
    if isinstance(x, Narrow):
        x = x.v
    if t is float or isinstance(x, np.floating):
        f = float(x)
        if f == f and -9.2e18 < f < 9.2e18:
            return int(f)
        return int(np.float64(f).astype(np.int64))
    if isinstance(x, (np.integer, np.bool_)):
        return wrap64(int(x))
    return builtins.int(x)


def tk_int(*args, **kw):
    if len(args) == 1 and not kw and not isinstance(args[0], str):
        return to_int(args[0])
    return builtins.int(*args, **kw)


def tk_float(*args):
    if len(args) == 1 and is_u64(args[0]):
        return float(int(args[0]))          # a weak uint64 converts by its value
    if len(args) == 1 and _isint(args[0]) and not _I64MIN <= args[0] <= _I64MAX:
        return float(wrap64(args[0]))
    return builtins.float(*args)


def tk_bool(*args):
    """``bool(x)``: a (strong) bool, as in the compiler."""
    return np.bool_(builtins.bool(*args))


def tk_abs(x):
    t = type(x)
    if is_u64(x):
        return U64(x)                      # unsigned: itself
    if t is int:
        r = abs(x)
        return r if r <= _I64MAX else wrap64(r)
    if t is bool or t is np.bool_ or isinstance(x, np.unsignedinteger):
        return x
    return abs(x)          # Narrow.__abs__ keeps the narrow type


def tk_round(x, *nd):
    if nd:
        return builtins.round(x, *nd)
    if isinstance(x, Narrow):
        x = x.v
    if isinstance(x, (float, np.floating)):
        return to_int(np.rint(x))
    return x


def _minmax(args, better):
    if len(args) < 2:
        return None
    if all(_isint(a) for a in args) and any(is_u64(a) for a in args):
        args = [U64(int(a) & _M64) for a in args]      # compared in uint64, as the compiler does
    r = args[0]
    t = type(r)
    same = True
    for b in args[1:]:
        if better(b, r):
            r = b
        if type(b) is not t:
            same = False
    if same:
        return r
    for b in args[1:]:
        if type(b) is not t:
            t = promote_types(t, type(b))
    return to_type(r, t)


def _one_tuple(args: tuple) -> tuple:
    """``min(t)``/``max(t)`` of one tuple: its elements, promoted together as the compiler
    promotes ``min(a, b, c)``."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], tuple) and len(args[0]) >= 2 else args


def tk_min(*args, **kw):
    args = _one_tuple(args)
    if len(args) < 2 or kw:
        return builtins.min(*args, **kw)
    return _minmax(args, lambda b, a: b < a)


def tk_max(*args, **kw):
    args = _one_tuple(args)
    if len(args) < 2 or kw:
        return builtins.max(*args, **kw)
    return _minmax(args, lambda b, a: b > a)


def tk_range(*args):
    if all(type(a) is int for a in args):
        return range(*args)
    _, t = common(list(args))
    if t is U64:              # bounds of a weak uint64 range: their uint64 values
        return (U64(k) for k in range(*(builtins.int(a) & _M64 if k < 2 else builtins.int(a)
                                         for k, a in enumerate(args))))
    r = range(*(builtins.int(a) for a in args))
    if t is int or t is bool:
        return r
    conv = dtype_cast(t)
    return (conv(k) for k in r)


def select(c, a, b):
    (a, b), _ = common([a, b])
    return a if c else b


def clamp(x, lo, hi):
    (x, lo, hi), _ = common([x, lo, hi])
    r = lo if lo > x else x        # C: max(x, lo) = lo > x ? lo : x
    return hi if hi < r else r     # min(r, hi)


def dot4_i8(a, b, acc):
    """``tk.dot4_i8``: ``acc`` plus the dot product of the signed bytes of ``a`` and ``b``
    (int32, wrapping)."""
    return np.int32(D.dot4_i8(int(a), int(b), int(acc)))


def _at(arr, idx, k):
    """Element ``k`` after index ``idx`` (an int, or a tuple: along the last dimension)."""
    if isinstance(idx, tuple):
        return arr[idx[:-1] + (int(idx[-1]) + k,)]
    return arr[int(idx) + k]


def _sbyte(v) -> int:
    v = int(v) & 255
    return v - 256 if v >= 128 else v


def _put_lane(out, lane, value, scale):
    if scale is None:
        out[lane] = np.int32(value)
    else:
        out[lane] = fma(np.float32(value), np.float32(scale), out[lane])


def _start(start, lane) -> int:
    """The value lane ``lane`` starts at: ``c[k + lane]`` for ``start=(c, k)``, else 0."""
    return 0 if start is None else int(start[0][int(start[1]) + lane])


def dot_i8(out, a, i, b, j, n, scale=None, start=None):
    """``tk.dot_i8``: lane ``l`` = the sum of the signed bytes ``a[i + k] * b[j + k]`` for ``k``
    in ``4l .. 4l + 3`` (plus ``c[k + l]`` with ``start=(c, k)``), stored in ``out[l]`` (int32),
    or ``out[l] = fma(lane, scale, out[l])``."""
    for lane in range(int(n) // 4):
        _put_lane(out, lane, _start(start, lane) + sum(_sbyte(_at(a, i, k)) * _sbyte(_at(b, j, k))
                                                       for k in range(4 * lane, 4 * lane + 4)), scale)


def dot_u4i8(out, a, i, b, j, n, scale=None, zero=0, start=None):
    """``tk.dot_u4i8``: as ``dot_i8`` with value ``k`` the nibble of byte ``a[i + k % 16]`` (low
    for ``k < 16``, high above) minus ``zero``, times the signed byte ``b[j + k]``."""
    half = int(n) // 2
    for lane in range(int(n) // 4):
        s = _start(start, lane)
        for k in range(4 * lane, 4 * lane + 4):
            byte = int(_at(a, i, k % half)) & 255
            s += ((byte >> 4 if k >= half else byte & 15) - int(zero)) * _sbyte(_at(b, j, k))
        _put_lane(out, lane, s, scale)


def load_halves(out, a, i, n, stride=2):
    """``tk.load_halves``: ``out[t]`` = the float16 stored little-endian in the bytes
    ``stride * t`` and ``stride * t + 1`` after ``a[i]``, as float32 (NumPy's exact conversion)."""
    for t in range(int(n)):
        k = int(stride) * t
        h = (int(_at(a, i, k)) & 255) | (int(_at(a, i, k + 1)) & 255) << 8
        out[t] = np.array(h, np.uint16).view(np.float16).astype(np.float32)


def lookup_u4(out, table, a, i, n, scale=None):
    """``tk.lookup_u4``: ``out[k] = table[low nibble of byte k]``, ``out[k + n] = table[its high
    nibble]`` for the ``n`` bytes after ``a[i]`` (times ``scale`` in float32 when given)."""
    n = int(n)
    s = None if scale is None else np.float32(scale)
    for k in range(n):
        byte = int(_at(a, i, k)) & 255
        for o, v in ((k, byte & 15), (k + n, byte >> 4)):
            t = np.float32(table[v])
            out[o] = t if s is None else np.float32(t * s)


def load_i8(out, a, i, n, scale=None):
    """``tk.load_i8``: ``out[k]`` = the byte ``k`` after ``a[i]`` as a signed 8-bit integer, as
    float32 (times ``scale`` in float32 when given)."""
    s = None if scale is None else np.float32(scale)
    for k in range(int(n)):
        v = np.float32(_sbyte(_at(a, i, k)))
        out[k] = v if s is None else np.float32(v * s)


def bitcast(v, dtype):
    """``tk.bitcast(v, dtype)``: ``v``'s bits as ``dtype`` (a narrow float rounded to its type
    first; a Python int taken as an unsigned integer of ``dtype``'s size)."""
    dc = dtype_cast(dtype)
    if isinstance(v, Narrow):
        a = np.array(v.v).astype(type(v).dc.dtype)
    elif _isint(v) and not isinstance(v, np.generic):
        a = np.array(wrap_bits(int(v), dc.bits, False), dtype=np.dtype(f"u{dc.itemsize}"))
    else:
        a = np.array(v)
    if a.dtype.itemsize != dc.itemsize or a.dtype.kind == "b" or dc.kind == "b":
        raise TypeError(f"tk.bitcast from {a.dtype} to {dc.name}: the sizes must be equal (and not bool)")
    r = a.view(dc.dtype)[()]
    return dc.compute(np.float32(r)) if dc.storage else r


# ----------------------------------------------------------------------------- math

def float_arg(x):
    """Math functions take floats: ints and bools become float64 (weak if they were)."""
    t = type(x)
    if t is float or t is np.float32 or t is np.float64 or isinstance(x, Narrow):
        return x
    if t is int or t is bool or t is U64:
        return float(x) if _I64MIN <= x <= _M64 else float(wrap64(x))
    if isinstance(x, np.floating):          # float16 & co. compute in float32
        return np.float32(x)
    if isinstance(x, (np.integer, np.bool_)):
        return np.float64(x)
    raise TypeError(f"a math function needs a number, got {type(x).__name__}")


def _math1(npfn):
    def f(x):
        x = float_arg(x)
        if type(x) is float:
            return float(npfn(np.float64(x)))
        if isinstance(x, Narrow):               # the float32 function, the narrow type
            return type(x)(npfn(x.v))
        return npfn(x)
    f.__name__ = getattr(npfn, "__name__", "f")
    return f


def _erf_np(pyfn):
    def g(x):
        return type(x)(pyfn(float(x)))
    return g


def _math2(npfn):
    def f(a, b):
        a, b = float_arg(a), float_arg(b)
        if type(a) is float and type(b) is float:
            return float(npfn(np.float64(a), np.float64(b)))
        if isinstance(a, Narrow) or isinstance(b, Narrow):
            return _nbin(a, b, npfn)
        return npfn(a, b)
    f.__name__ = getattr(npfn, "__name__", "f")
    return f


def _pred(npfn, const):
    def f(x):
        if _isint(x):
            return const
        if isinstance(x, (np.integer, np.bool_)):
            return np.bool_(const)
        if type(x) is float:
            return bool(npfn(x))
        return npfn(x.v if isinstance(x, Narrow) else x)
    return f


_MATH1 = {"exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
          "expm1": np.expm1, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
          "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
          "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
          "erf": _erf_np(math.erf), "erfc": _erf_np(math.erfc), "floor": np.floor, "ceil": np.ceil,
          "trunc": np.trunc, "fabs": np.fabs}
_MATH2 = {"atan2": np.arctan2, "pow": c_pow, "copysign": np.copysign, "hypot": np.hypot,
          "fmod": np.fmod}


def _make_math():
    m = types.ModuleType("math", "math functions with the kernel language's float32/float64 semantics")
    for k, v in vars(math).items():
        if not k.startswith("__"):
            setattr(m, k, v)
    for k, v in _MATH1.items():
        setattr(m, k, _math1(v))
    for k, v in _MATH2.items():
        setattr(m, k, _math2(v))
    m.isnan = _pred(np.isnan, False)
    m.isinf = _pred(np.isinf, False)
    m.isfinite = _pred(np.isfinite, True)
    log1 = m.log

    def log(x, *base):
        if base:
            return op_truediv(log1(x), log1(base[0]))
        return log1(x)
    m.log = log
    return m


MATH = _make_math()
MATH_BY_FUNC = {getattr(math, k): getattr(MATH, k) for k in list(_MATH1) + list(_MATH2) +
                ["isnan", "isinf", "isfinite"] if hasattr(math, k)}


def rsqrt(x):
    x = float_arg(x)
    if type(x) is float:
        return float(1.0 / np.sqrt(np.float64(x)))
    if isinstance(x, Narrow):
        return type(x)(np.float32(1) / np.sqrt(x.v))
    return type(x)(1) / np.sqrt(x)


def sigmoid(x):
    x = float_arg(x)
    if type(x) is float:
        return float(1.0 / (1.0 + np.exp(np.float64(-x))))
    if isinstance(x, Narrow):
        one = np.float32(1)
        return type(x)(one / (one + np.exp(-x.v)))
    one = type(x)(1)
    return one / (one + np.exp(-x))


def _to_float(exact: Fraction) -> float:
    """The float64 nearest to an exact rational; +-inf beyond float64's range."""
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


_F32_OVERFLOW = Fraction(2) ** 128      # where float32's exponent would continue past FLT_MAX


def _f32_value(f: np.float32) -> Fraction:
    """The exact value of a float32; +-inf stands for +-2**128, the neighbour of FLT_MAX under an
    unbounded exponent (IEEE 754 rounds to infinity what rounds there)."""
    if np.isinf(f):
        return _F32_OVERFLOW if f > 0 else -_F32_OVERFLOW
    return Fraction(float(f))


def _round_f32(exact: Fraction) -> np.float32:
    """Correctly rounded float32 of an exact rational (no double rounding)."""
    r64 = _to_float(exact)
    f = np.float32(r64)
    if Fraction(r64) == exact or not np.isfinite(f):
        return f
    lo, hi = (np.nextafter(f, np.float32(-np.inf)), f) if Fraction(float(f)) > exact else \
        (f, np.nextafter(f, np.float32(np.inf)))
    dlo, dhi = exact - _f32_value(lo), _f32_value(hi) - exact
    if dlo != dhi:
        return lo if dlo < dhi else hi
    return lo if (lo.view(np.uint32) & 1) == 0 else hi


def fma(a, b, c):
    """``a * b + c`` rounded once, in the arguments' promoted type (narrow floats: float32)."""
    (a, b, c), t = common([float_arg(a), float_arg(b), float_arg(c)])
    narrow = isinstance(t, type) and issubclass(t, Narrow)
    if narrow:
        a, b, c = a.v, b.v, c.v
    fa, fb, fc = float(a), float(b), float(c)
    if not (math.isfinite(fa) and math.isfinite(fb) and math.isfinite(fc)):
        # an exact finite product (it does not overflow inside fma) plus inf/nan is c
        r = c if math.isfinite(fa) and math.isfinite(fb) else a * b + c
    else:
        exact = Fraction(fa) * Fraction(fb) + Fraction(fc)
        if exact == 0:
            r = a * b + c                      # signed zeros as the hardware gives them
        elif t is np.float32 or narrow:
            r = _round_f32(exact)
        else:
            r = _to_float(exact)
    if narrow:
        return t(np.float32(r))
    return r if t is float else t(r)


# ----------------------------------------------------------------------------- print

def format_value(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        return " ".join(format_value(x) for x in v)
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (float, np.floating, Narrow)):
        return "%g" % float(v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return str(v)


def format_print(args) -> str:
    return " ".join(format_value(a) for a in args)


# ----------------------------------------------------------------------------- random

_F32_2M24 = 2.0 ** -24
_TWO_PI_F32 = float(np.float32(6.2831853071795864769))


def _u32(v) -> int:
    if isinstance(v, (float, np.floating)):
        v = to_int(v)
    return builtins.int(v) & _M32


def _u64(v) -> int:
    if isinstance(v, (float, np.floating)):
        v = to_int(v)
    return builtins.int(v) & _M64


_SCHEDULES: dict = {}


def _schedule(k0: int, k1: int) -> tuple:
    """The ten round keys of Philox4x32-10 for key words (k0, k1) (cached)."""
    ks = _SCHEDULES.get((k0, k1))
    if ks is None:
        out, a, b = [], k0, k1
        for _ in range(10):
            out.append((a, b))
            a, b = (a + 0x9E3779B9) & _M32, (b + 0xBB67AE85) & _M32
        if len(_SCHEDULES) > 4096:
            _SCHEDULES.clear()
        ks = _SCHEDULES[(k0, k1)] = tuple(out)
    return ks


def philox_words(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on Python ints (the same as :func:`tinykernels.random.philox4x32`)."""
    for k0, k1 in _schedule(k0, k1):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0), p1 & _M32, ((p0 >> 32) ^ c3 ^ k1), p0 & _M32
    return c0, c1, c2, c3


def philox4x32(c0, c1, c2, c3, k0, k1):
    r = philox_words(_u32(c0), _u32(c1), _u32(c2), _u32(c3), _u32(k0), _u32(k1))
    return tuple(np.uint32(x) for x in r)


_LAST_BLOCK = (None, None, None)       # uniform(key, i) and normal(key, i) share one block


def _block(key, counter):
    k, c = _u64(key), _u64(counter)
    last = _LAST_BLOCK
    if last[0] == k and last[1] == c:
        return last[2]
    r = philox_words(c & _M32, c >> 32, 0, 0, k & _M32, k >> 32)
    globals()["_LAST_BLOCK"] = (k, c, r)
    return r


def rand_bits(key, counter):
    return np.uint32(_block(key, counter)[0])


def rand_uniform(key, counter):
    return np.float32((_block(key, counter)[0] >> 8) * _F32_2M24)


def rand_normal(key, counter):
    x, y, _, _ = _block(key, counter)
    u1 = ((x >> 8) + 1) * _F32_2M24                      # exact in float32
    u2 = (y >> 8) * _F32_2M24
    lg = np.float32(np.log(np.float64(u1)))
    r = np.float32(np.sqrt(np.float64(np.float32(-2.0) * lg)))
    ang = np.float32(_TWO_PI_F32 * u2)
    c = np.float32(np.cos(np.float64(ang)))
    return np.float32(r * c)


# ----------------------------------------------------------------------------- collectives

def _identity(op: str, t):
    if op in ("add", "or"):
        return to_type(0, t)
    if op == "mul":
        return to_type(1, t)
    if op == "and":
        return to_type(True, t) if t in (bool, np.bool_) else to_type(-1, t)   # all bits set
    kind = _kind(t)
    if kind == "f":
        inf = math.inf if op == "min" else -math.inf
        if isinstance(t, type) and issubclass(t, Narrow):
            return t(np.float32(inf))      # computed in float32: +-inf even where the type has none
        return to_type(inf, t)
    if kind == "b":
        return to_type(op == "min", t)
    if t is int:
        return _I64MAX if op == "min" else _I64MIN
    info = np.iinfo(t)
    return t(info.max if op == "min" else info.min)


def collective(kind: str, op: str, values: list, inclusive: bool = True) -> list:
    """``tk.group_reduce`` (kind "reduce") or ``tk.group_scan`` over the values of a group's
    participating items, in local order: the result for each item. Accumulates from the
    identity, left to right, in the values' promoted type (bools count as int64 for add/mul)."""
    vals, t = common(values)
    if t in (bool, np.bool_) and op in ("add", "mul"):
        vals, t = [np.int64(v) for v in vals], np.int64
    if op in ("and", "or") and _kind(t) == "f":
        raise TypeError(f"group op {op!r} needs integers or bools, got {np.dtype(t).name}")
    logical = t in (bool, np.bool_)
    if op == "add":
        comb = op_add
    elif op == "mul":
        comb = op_mul
    elif op == "min":
        def comb(a, x):
            return x if x < a else a
    elif op == "max":
        def comb(a, x):
            return x if x > a else a
    elif op == "and":
        def comb(a, x):
            return (a and x) if logical else a & x
    else:
        def comb(a, x):
            return (a or x) if logical else a | x
    acc = _identity(op, t)
    if kind == "reduce":
        for x in vals:
            acc = comb(acc, x)
        if logical:
            acc = t(acc)
        return [acc] * len(vals)
    out = []
    for x in vals:
        if inclusive:
            acc = comb(acc, x)
            out.append(t(acc) if logical else acc)
        else:
            out.append(t(acc) if logical else acc)
            acc = comb(acc, x)
    return out
