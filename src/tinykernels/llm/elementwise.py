"""Elementwise kernels: binary arithmetic with NumPy broadcasting (arrays of rank 1 to 4),
unary math, ``tanh_grad``, ``fill`` and ``cast``.

float16 / bfloat16 values compute in float32 and round once on store (the kernel language's
rule); float32 and float64 compute in their own type, rounded as NumPy rounds (no
contraction), so ``add/sub/mul/div`` equal NumPy's results bit for bit. Math functions may
differ from NumPy's in the last bits (the backend's libm).

Every kernel runs over the ndrange ``(n0 * n1, n2, n3)`` of the padded extents (``_index.grid3``):
a row is contiguous along its last axis, so the inner loop of the CPU backend is a unit-stride
loop, and the leading coordinates are the row's own (no division per element) up to rank 3.
"""
from __future__ import annotations

import math

import numpy as np

import tinykernels as tk

from . import _common as C
from ._index import grid3, ld4, ldb4, lead2, st4
from ._math import exp as _exp, use_poly

__all__ = ["add", "sub", "mul", "div", "pow", "tanh_grad", "exp", "log", "sin", "cos", "tanh", "sqrt",
           "rsqrt", "fill", "cast"]

# binary op codes (module-level ints are compile-time constants in kernels)
ADD, SUB, MUL, DIV, POW, TANH_GRAD, SWIGLU = 0, 1, 2, 3, 4, 5, 6
# the reversed ops of a scalar first operand (``2 - x``: the kernels compute op(x, 2) reversed)
RSUB, RDIV, RPOW = 7, 8, 9
# op -> the op that computes it with its operands swapped (add and mul commute exactly in IEEE)
REVERSED = {ADD: ADD, MUL: MUL, SUB: RSUB, DIV: RDIV, POW: RPOW}
# unary op codes
EXP, LOG, SIN, COS, TANH, SQRT, RSQRT, COPY = 0, 1, 2, 3, 4, 5, 6, 7


@tk.func
def _binop(x, y, op, poly):
    if op == ADD:
        return x + y
    elif op == SUB:
        return x - y
    elif op == MUL:
        return x * y
    elif op == DIV:
        return x / y
    elif op == POW:
        return x ** y
    elif op == RSUB:
        return y - x
    elif op == RDIV:
        return y / x
    elif op == RPOW:
        return y ** x
    elif op == TANH_GRAD:
        t = math.tanh(x)
        return (1 - t * t) * y
    else:
        if poly:
            return x * (1 / (1 + _exp(-x, poly))) * y
        return x * tk.sigmoid(x) * y


@tk.kernel
def _binary(out, a, b, sa, sb, op: tk.constexpr, a_last1: tk.constexpr, b_last1: tk.constexpr,
            b_scalar: tk.constexpr, scaled: tk.constexpr, poly: tk.constexpr):
    """out = op(a * sa, b * sb) with broadcasting (``*_last1``: that operand's last extent is 1;
    ``b_scalar``: b is a scalar argument; ``scaled``: apply sa/sb, in float32; ``poly``: the
    vectorizable float32 exp of ``_math``)."""
    t, c2, j = tk.index(tk.Global, tk.Cartesian)
    c0, c1 = lead2(out, t)
    x = ldb4(a, c0, c1, c2, 0 if a_last1 else j)
    if scaled:
        x = tk.float32(x) * sa
    if b_scalar:
        st4(out, c0, c1, c2, j, _binop(x, b, op, poly))
    else:
        y = ldb4(b, c0, c1, c2, 0 if b_last1 else j)
        if scaled:
            y = tk.float32(y) * sb
        st4(out, c0, c1, c2, j, _binop(x, y, op, poly))


@tk.kernel
def _unary(out, a, op: tk.constexpr, poly: tk.constexpr):
    """out = op(a), same shape; COPY converts to out's dtype."""
    t, c2, j = tk.index(tk.Global, tk.Cartesian)
    c0, c1 = lead2(out, t)
    x = ld4(a, c0, c1, c2, j)
    if op == EXP:
        st4(out, c0, c1, c2, j, _exp(x, poly))
    elif op == LOG:
        st4(out, c0, c1, c2, j, math.log(x))
    elif op == SIN:
        st4(out, c0, c1, c2, j, math.sin(x))
    elif op == COS:
        st4(out, c0, c1, c2, j, math.cos(x))
    elif op == TANH:
        st4(out, c0, c1, c2, j, math.tanh(x))
    elif op == SQRT:
        st4(out, c0, c1, c2, j, math.sqrt(x))
    elif op == RSQRT:
        st4(out, c0, c1, c2, j, 1 / math.sqrt(x))
    else:
        st4(out, c0, c1, c2, j, x)


# Flat shapes of _binary / _unary for the CPU backend, used when every array is C-contiguous
# with the output's shape and the output shares no memory with an input (_flat_views): the
# inputs are tk.Const and, the op being a compile-time constant of the kernel itself, the store
# is one top-level store of the item's own element, which the C renderer stages and writes
# with streaming stores when the output is large (passes/streaming.py): no read for ownership,
# a quarter less traffic for add, a third less for a copy or cast.

@tk.kernel
def _binary_flat(out, a: tk.Const, b: tk.Const, sa, sb, op: tk.constexpr, scaled: tk.constexpr,
                 poly: tk.constexpr):
    """out[i] = op(a[i] * sa, b[i] * sb) over 1-D views of same-shape arrays."""
    i = tk.index()
    x = a[i]
    y = b[i]
    if scaled:
        x = tk.float32(x) * sa
        y = tk.float32(y) * sb
    if op == ADD:
        out[i] = out.dtype(x + y)
    elif op == SUB:
        out[i] = out.dtype(x - y)
    elif op == MUL:
        out[i] = out.dtype(x * y)
    elif op == DIV:
        out[i] = out.dtype(x / y)
    else:
        out[i] = out.dtype(_binop(x, y, op, poly))


@tk.kernel
def _binary_flat_scalar(out, a: tk.Const, b, sa, op: tk.constexpr, scaled: tk.constexpr, poly: tk.constexpr):
    """out[i] = op(a[i] * sa, b) for a scalar b."""
    i = tk.index()
    x = a[i]
    if scaled:
        x = tk.float32(x) * sa
    if op == ADD:
        out[i] = out.dtype(x + b)
    elif op == SUB:
        out[i] = out.dtype(x - b)
    elif op == MUL:
        out[i] = out.dtype(x * b)
    elif op == DIV:
        out[i] = out.dtype(x / b)
    elif op == RSUB:
        out[i] = out.dtype(b - x)
    elif op == RDIV:
        out[i] = out.dtype(b / x)
    else:
        out[i] = out.dtype(_binop(x, b, op, poly))


@tk.kernel
def _unary_flat(out, a: tk.Const, op: tk.constexpr, poly: tk.constexpr):
    """out[i] = op(a[i]) over 1-D views (COPY converts to out's dtype)."""
    i = tk.index()
    x = a[i]
    if op == EXP:
        out[i] = out.dtype(_exp(x, poly))
    elif op == LOG:
        out[i] = out.dtype(math.log(x))
    elif op == SIN:
        out[i] = out.dtype(math.sin(x))
    elif op == COS:
        out[i] = out.dtype(math.cos(x))
    elif op == TANH:
        out[i] = out.dtype(math.tanh(x))
    elif op == SQRT:
        out[i] = out.dtype(math.sqrt(x))
    elif op == RSQRT:
        out[i] = out.dtype(1 / math.sqrt(x))
    else:
        out[i] = out.dtype(x)


def _flat_views(backend, out, *inputs):
    """1-D NumPy views of ``out`` and ``inputs`` (same shapes) for the flat CPU kernels, or
    None: another backend, an array that is not a C-contiguous host array, or an output
    that shares memory with an input (in place: a tk.Const input must not alias, so those
    calls take the general kernel)."""
    if backend.name != "CPU":
        return None
    views = [C.host_flat(x) for x in (out, *inputs)]
    if any(v is None for v in views):
        return None
    lo = views[0].__array_interface__["data"][0]
    hi = lo + views[0].nbytes
    for v in views[1:]:          # contiguous: the byte ranges overlap exactly when memory is shared
        vlo = v.__array_interface__["data"][0]
        if vlo < hi and lo < vlo + v.nbytes:
            return None
    return views


@tk.kernel
def _fill(out, value):
    t, c2, j = tk.index(tk.Global, tk.Cartesian)
    c0, c1 = lead2(out, t)
    st4(out, c0, c1, c2, j, value)


def _is_scalar(v) -> bool:
    """A scalar operand: a Python or NumPy int, float or bool (NumPy's ``x + True`` adds 1)."""
    return isinstance(v, (int, float, np.integer, np.floating, np.bool_))


def float_operand(fn: str, name: str, v):
    """The scalar ``v`` as a float array's kernels take it: a bool as 0/1, an int of int64's
    range unchanged (the kernel converts it, rounding once), a larger int as the nearest
    float (NumPy's conversion of a weak Python int: ``x + 10**30``); an int beyond float64's
    range is a ``ValueError`` naming the argument (NumPy: ``OverflowError``), not the launch
    error of a 64-bit kernel argument. A NumPy scalar counts as the Python scalar of its
    value (as torch takes it): its dtype does not promote the array's (``np.float64(0.1)``
    with a float32 array is 0.1 rounded once, a float32 result, on every backend, WebGPU too)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int) and not -(1 << 63) <= v < (1 << 63):
        try:
            return float(v)
        except OverflowError:
            C.require(False, fn, name, f"an int of {v.bit_length()} bits is too large for a float")
    return v


def binary(fn: str, op: int, a, b, out=None, stream=None, *, scales=None, out_dtype=None,
           allowed=C.FLOATS, names: tuple = ("a", "b")):
    """Launch the broadcasting binary kernel; ``scales=(sa, sb)`` dequantizes both operands
    (in float32) first; ``names``: the caller's names of ``a`` and ``b``, for its errors.
    A scalar ``a`` with an array ``b`` (``2 - x``, as NumPy and torch) launches the reversed
    op with the operands swapped, for the ops of ``REVERSED``.
    Shared with the activations and fp8 families."""
    if op in REVERSED and scales is None and _is_scalar(a) and C.is_array(b):
        a, b, op, names = b, a, REVERSED[op], names[::-1]
    na, nb = names
    C.require_array(a, fn, na)
    backend = C.backend_of(fn, stream=stream, **{na: a, nb: b}, out=out)
    sa_shape = C.require_rank(a, fn, na, lo=0)
    dt = C.require_float(a, fn, na, backend, allowed)
    a0 = a                                               # the caller's a: out's model, a read
    if not sa_shape:                                     # a 0-d a broadcasts (NumPy): launched
        a, sa_shape = C.view(a, (1,)), (1,)              # through a one-element view
    b_array = C.is_array(b)
    if b_array and C.dtype_of(b) != dt:                  # (the message only on failure: slow)
        C.expected(fn, nb, f"dtype {dt} ({na}'s)", f"dtype {C.dtype_of(b)}")
    if b_array and len(C.shape_of(b)) == 0:              # a 0-d array broadcasts as its value
        b, b_array = C.scalar_value(b, stream), False
    if b_array:
        sb_shape = C.require_rank(b, fn, nb)
        try:
            shape = sa_shape if sa_shape == sb_shape else np.broadcast_shapes(sa_shape, sb_shape)
        except ValueError:
            raise ValueError(f"llm.{fn}: argument '{nb}': expected a shape that broadcasts with {na}'s "
                             f"{C.shape_str(sa_shape)}, got shape {C.shape_str(sb_shape)}") from None
        b_last1 = sb_shape[-1] == 1 and shape[-1] != 1
    else:
        C.require(_is_scalar(b), fn, nb, f"expected an array or a Python scalar, got {C.given(b)}")
        shape, sb_shape, b_last1 = sa_shape, None, False
        b = float_operand(fn, nb, b)
        b = float(b) if scales is not None else b
    a_last1 = sa_shape[-1] == 1 and shape[-1] != 1
    odt = np.dtype(out_dtype) if out_dtype is not None else dt
    res_shape = () if a is not a0 and sb_shape is None else shape     # 0-d op scalar: 0-d
    res = out = C.output(out, fn, a0, res_shape, odt, backend, reads={na: a0, nb: b})
    if 0 in shape:
        return res
    if res_shape != shape:
        out = C.view(out, shape)
    sa, sb = (float(scales[0]), float(scales[1])) if scales is not None else (1.0, 1.0)
    poly = op == SWIGLU and use_poly(backend, dt)
    if sa_shape == shape and (sb_shape is None or sb_shape == shape):
        flat = _flat_views(backend, out, a) if sb_shape is None else _flat_views(backend, out, a, b)
        if flat is not None and sb_shape is None:
            C.launch(_binary_flat_scalar, backend, (flat[0], flat[1], b, sa, op, scales is not None, poly),
                     flat[0].size, stream=stream)
            return res
        if flat is not None:
            C.launch(_binary_flat, backend, (*flat, sa, sb, op, scales is not None, poly), flat[0].size,
                     stream=stream)
            return res
    C.launch(_binary, backend, (out, a, b, sa, sb, op, a_last1, b_last1, sb_shape is None, scales is not None,
                                     op == SWIGLU and use_poly(backend, dt)),
             grid3(shape), stream=stream)
    return res


def _flat_fast(out, *inputs, dtype=None) -> tuple | None:
    """``(backend, arrays, in place, result)`` for the flat kernels' fast paths:
    ``_common.host_same`` (``out`` may be the very array of an input, or None: a new array of
    ``dtype``, default the inputs'); the arrays as 1-D views (the flat kernels' arguments),
    or as they are when ``out`` is an input (then the general kernel runs, as on the general
    path: a flat kernel's ``tk.Const`` inputs must not alias its output); or None."""
    host = C.host_same(out, *inputs, inplace=True, dtype=dtype)
    if host is None:
        return None
    backend, arrays, res = host
    for x in arrays[1:]:              # (a loop, not any(): a generator is one more Python frame)
        if x is arrays[0]:
            return backend, tuple(arrays), True, res
    return backend, (tuple(arrays) if arrays[0].ndim == 1 else tuple(v.reshape(-1) for v in arrays)), False, res


def _binary_fast(op: int, a, b, out, stream):
    """``out = a op b`` through :func:`_flat_fast` (add, sub, mul, div, swiglu of same-shape
    arrays, ``out=`` given or not, in place or not, default stream): the result, or None
    where it does not apply."""
    fast = _flat_fast(out, a, b) if stream is None else None
    if fast is None or fast[1][0].dtype is not fast[1][1].dtype:
        return None
    backend, arrays, inplace, res = fast
    poly = op == SWIGLU and use_poly(backend, arrays[1].dtype)
    if inplace:
        _binary.instance(backend)(*arrays, 1.0, 1.0, op, False, False, False, False, poly,
                                  ndrange=grid3(arrays[0].shape))
    else:
        _binary_flat.instance(backend)(*arrays, 1.0, 1.0, op, False, poly, ndrange=arrays[0].size)
    return res


def _unary_fast(op: int, x, out, stream, dtype=None):
    """``out = op(x)`` through :func:`_flat_fast`; with ``dtype`` (a cast: ``op`` is ``COPY``)
    ``out``'s dtype must be it (a NumPy dtype or scalar type; names take the general path),
    else ``x``'s. The result, or None where it does not apply."""
    if stream is not None:
        return None
    if dtype is not None and out is None:
        dtype = C.FAST_DTYPE_OF.get(dtype)       # (a NumPy float dtype or its scalar type)
        if dtype is None:
            return None
    fast = _flat_fast(out, x, dtype=dtype)
    if fast is None:
        return None
    backend, arrays, inplace, res = fast
    odt, idt = arrays[0].dtype, arrays[1].dtype
    if odt not in C.FAST_FLOATS or not (odt is idt if dtype is None else (dtype is odt or dtype is odt.type)):
        return None
    poly = op == EXP and use_poly(backend, idt)
    if inplace:
        _unary.instance(backend)(*arrays, op, poly, ndrange=grid3(arrays[0].shape))
    else:
        _unary_flat.instance(backend)(*arrays, op, poly, ndrange=arrays[0].size)
    return res


def _unary_call(fn: str, op: int, x, out=None, stream=None):
    res = _unary_fast(op, x, out, stream)
    if res is not None:
        return res
    C.require_array(x, fn, "x")
    backend = C.backend_of(fn, stream=stream, x=x, out=out)
    shape = C.require_rank(x, fn, "x", lo=0)
    dt = C.require_float(x, fn, "x", backend)
    out = C.output(out, fn, x, shape, dt, backend)
    _launch_unary(backend, out, x, op, op == EXP and use_poly(backend, dt), stream)
    return out


def _launch_unary(backend, out, x, op: int, poly: bool, stream) -> None:
    """Launch ``out = op(x)`` (same shapes, rank 0 to 4): the flat kernel where it applies;
    a 0-d pair (NumPy) through one-element views; nothing for an empty shape."""
    shape = C.shape_of(x)
    if not shape:
        x, out, shape = C.view(x, (1,)), C.view(out, (1,)), (1,)
    if 0 in shape:
        return
    flat = _flat_views(backend, out, x)
    if flat is not None:
        C.launch(_unary_flat, backend, (*flat, op, poly), flat[0].size, stream=stream)
    else:
        C.launch(_unary, backend, (out, x, op, poly), grid3(shape), stream=stream)


def add(a, b, out=None, stream=None):
    """``a + b``; ``a`` and ``b`` arrays (NumPy broadcasting, rank <= 4), or one of them a
    Python or NumPy scalar (the result has the array's dtype)."""
    res = _binary_fast(ADD, a, b, out, stream)
    if res is not None:
        return res
    return binary("add", ADD, a, b, out, stream)


def sub(a, b, out=None, stream=None):
    """``a - b`` (broadcasting as :func:`add`)."""
    res = _binary_fast(SUB, a, b, out, stream)
    if res is not None:
        return res
    return binary("sub", SUB, a, b, out, stream)


def mul(a, b, out=None, stream=None):
    """``a * b`` (broadcasting as :func:`add`)."""
    res = _binary_fast(MUL, a, b, out, stream)
    if res is not None:
        return res
    return binary("mul", MUL, a, b, out, stream)


def div(a, b, out=None, stream=None):
    """``a / b`` (broadcasting as :func:`add`)."""
    res = _binary_fast(DIV, a, b, out, stream)
    if res is not None:
        return res
    return binary("div", DIV, a, b, out, stream)


def pow(x, y, out=None, stream=None):
    """``x ** y``; arrays (broadcasting as :func:`add`) or one of them a Python scalar.

    A scalar exponent 2, 0.5 or -1 is computed as NumPy's ``np.power`` (and torch's
    ``pow``) compute it: ``x * x``, ``sqrt(x)``, ``1 / x``, each correctly rounded (bit for
    bit NumPy's; the C library's ``powf`` is not: it rounded ``(1 + 2**-12) ** 2``, a tie, up),
    with their results at -0.0 and -inf (``(-0.0) ** 0.5`` is -0.0, ``(-inf) ** 0.5`` NaN)."""
    if C.is_array(x) and _is_scalar(y) and not isinstance(y, (bool, np.bool_)) and abs(y) <= 2:
        v = float(y)
        if v == 2.0:
            return binary("pow", MUL, x, x, out, stream, names=("x", "x"))
        if v == 0.5:
            return _unary_call("pow", SQRT, x, out, stream)
        if v == -1.0:
            return binary("pow", RDIV, x, 1, out, stream, names=("x", "y"))
    return binary("pow", POW, x, y, out, stream, names=("x", "y"))


def tanh_grad(x, g, out=None, stream=None):
    """``(1 - tanh(x)**2) * g``: the gradient of tanh at ``x`` applied to ``g``."""
    return binary("tanh_grad", TANH_GRAD, x, g, out, stream, names=("x", "g"))


def exp(x, out=None, stream=None):
    """``e ** x`` elementwise."""
    return _unary_call("exp", EXP, x, out, stream)


def log(x, out=None, stream=None):
    """Natural logarithm elementwise."""
    return _unary_call("log", LOG, x, out, stream)


def sin(x, out=None, stream=None):
    """Sine elementwise."""
    return _unary_call("sin", SIN, x, out, stream)


def cos(x, out=None, stream=None):
    """Cosine elementwise."""
    return _unary_call("cos", COS, x, out, stream)


def tanh(x, out=None, stream=None):
    """Hyperbolic tangent elementwise."""
    return _unary_call("tanh", TANH, x, out, stream)


def sqrt(x, out=None, stream=None):
    """Square root elementwise."""
    return _unary_call("sqrt", SQRT, x, out, stream)


def rsqrt(x, out=None, stream=None):
    """``1 / sqrt(x)`` elementwise (a correctly rounded division by the square root, as
    NumPy's ``1 / np.sqrt(x)``; not a hardware approximation)."""
    return _unary_call("rsqrt", RSQRT, x, out, stream)


def fill(x, value, stream=None):
    """Set every element of ``x`` to ``value`` (rounded to x's dtype) in place; returns ``x``."""
    C.require_array(x, "fill", "x")
    C.require(_is_scalar(value), "fill", "value",
              f"expected a Python scalar, got {C.given(value)}")
    backend = C.backend_of("fill", stream=stream, x=x)
    shape = C.require_rank(x, "fill", "x", lo=0)
    dt = C.dtype_of(x)
    C.require_supported(backend, dt, "fill", "x")
    if 0 not in shape:
        v = C.int_value("fill", "value", value, dt) if dt.kind in "iub" else \
            float(float_operand("fill", "value", value))                    # ml_dtypes: 'V'
        xs, shape = (x, shape) if shape else (C.view(x, (1,)), (1,))     # 0-d: a one-element view
        C.launch(_fill, backend, (xs, v), grid3(shape), stream=stream)
    return x


CAST_DTYPES = ("float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2")


def cast(x, dtype, out=None, stream=None):
    """``x`` converted to ``dtype`` (any pair of float32, float16, bfloat16, float64 and the
    fp8 storage types that the backend supports; rounding to nearest even, as NumPy/ml_dtypes)."""
    res = _unary_fast(COPY, x, out, stream, dtype)
    if res is not None:
        return res
    C.require_array(x, "cast", "x")
    backend = C.backend_of("cast", stream=stream, x=x, out=out)
    shape = C.require_rank(x, "cast", "x", lo=0)
    C.require_float(x, "cast", "x", backend, CAST_DTYPES)
    target = C.np_dtype(getattr(dtype, "name", dtype) if not isinstance(dtype, np.dtype) else dtype.name)
    C.require(target is not None and target.name in CAST_DTYPES, "cast", "dtype",
              f"expected one of {C.one_of(CAST_DTYPES)}, got {dtype!r}")
    C.require(backend.supports(target.name), "cast", "dtype", f"expected a dtype {backend!r} supports, got {target}")
    out = C.output(out, "cast", x, shape, target, backend)
    _launch_unary(backend, out, x, COPY, False, stream)
    return out
