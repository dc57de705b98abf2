"""Math device functions the ``tinykernels.llm`` kernels use on the CPU, where the C
library's scalar ``expf`` (one call per element) keeps a loop from vectorizing.

``exp_f32`` is branch-free float32 and integer arithmetic (no calls, no table), so GCC and
Clang vectorize the loops that use it. It is accurate to 1 ulp of float32 over the whole
range (subnormal results rounded once, overflow to ``inf``, ``-inf`` to 0, NaN kept),
checked against NumPy in ``tests/test_llm_math.py``. GPU backends keep ``math.exp``
(hardware instructions): the kernels choose with a compile-time flag (``poly_exp``).
"""
from __future__ import annotations

import math

import tinykernels as tk

LOG2E = 1.44269504088896341
LN2_HI = 0.693359375               # 9 significant bits: n * LN2_HI is exact for |n| < 2**15
LN2_LO = -2.12194440e-4            # ln 2 - LN2_HI
# e**r = 1 + r + r*r * P(r) on |r| <= ln(2) / 2 (the minimax coefficients of Cephes' expf)
P0 = 1.9875691500e-4
P1 = 1.3981999507e-3
P2 = 8.3334519073e-3
P3 = 4.1665795894e-2
P4 = 1.6666665459e-1
P5 = 5.0000001201e-1
ROUND = 12582912.0             # 1.5 * 2**23: x + ROUND rounds x to an integer (|x| < 2**22)
ROUND_BITS = 0x4B400000          # the bits of ROUND as a float32


@tk.func
def pow2_f32(m):
    """``2.0 ** m`` as float32, exactly, for an int32 ``m`` in [-126, 127] (a normal float):
    its exponent bits, ``m + 127``, read as a float."""
    return tk.bitcast(tk.uint32(m + 127) << 23, tk.float32)


@tk.func
def _exp_reduced(xc):
    """``(n, e ** r)`` for a clamped float32 ``xc = n * ln 2 + r``: ``n = round(xc / ln 2)`` as
    an int32, taken from the bits of ``xc / ln 2 + ROUND``; ``r`` by Cody-Waite (``n * LN2_HI``
    exact); ``e ** r`` by the polynomial, every multiply-add a ``tk.fma``. The shared core of
    :func:`exp_f32` and :func:`exp_neg_f32`, which differ only in the clamps and in how they
    build ``2 ** n``."""
    t = tk.fma(xc, tk.float32(LOG2E), tk.float32(ROUND))
    ni = tk.bitcast(t, tk.int32) - ROUND_BITS       # round(x / ln 2), from the bits
    n = tk.float32(ni)
    r = tk.fma(n, tk.float32(-LN2_LO), tk.fma(n, tk.float32(-LN2_HI), xc))
    p = tk.fma(tk.fma(tk.fma(tk.fma(tk.fma(tk.float32(P0), r, tk.float32(P1)), r, tk.float32(P2)), r,
                                    tk.float32(P3)), r, tk.float32(P4)), r, tk.float32(P5))
    return ni, tk.fma(r * r, p, r) + tk.float32(1.0)


@tk.func
def exp_f32(x):
    """``e ** x`` of a float32 ``x``, vectorizable (see the module docstring). Powers of two
    come from their exponent bits (:func:`pow2_f32`).

    ``x = n * ln 2 + r`` (Cody-Waite: ``n * LN2_HI`` is exact), ``e ** r`` by a polynomial,
    times ``2 ** n`` built exactly. Every multiply-add is a ``tk.fma`` (one rounding: about
    half the instructions of separate products and sums, and no less accurate). ``n`` is
    rounded to nearest by adding ``ROUND`` (1.5 * 2**23): its integer is the sum's bits less
    ROUND's, with no float-to-int conversion (a NaN converted to an int would be undefined C),
    and no ``(t - ROUND)`` that the reassociation of a ``fastmath`` kernel could fold to ``t``.
    ``x`` is clamped to [-104, 104] with ``max``/``min`` taking ``x`` first: they return
    their first argument when the comparison is false, so a NaN is kept and propagates to
    the result. ``e**-104 < 2**-150`` gives 0; past 89 ``n`` exceeds 128 and
    the result overflows to inf."""
    xc = min(max(x, tk.float32(-104.0)), tk.float32(104.0))
    ni, y = _exp_reduced(xc)
    # 2**ni = 2**e * 2**mm with mm in the normal exponents [-126, 127] and e in [-24, 23]:
    # y * 2**e is exact (a normal float; inf past the float range, where the result is inf
    # anyway), the second product rounds once (to a subnormal, a normal or inf)
    mm = min(max(ni, -126), 127)
    e = ni - mm
    y = y * pow2_f32(e)
    return y * pow2_f32(mm)


@tk.func
def exp_neg_f32(x):
    """``e ** x`` of a float32 ``x <= 0`` (or -inf, or NaN: kept), as :func:`exp_f32` (the
    same reduction and polynomial, within 1 ulp, subnormal results rounded once) with less
    work for the exponentials of a softmax, whose arguments ``x - max`` are never positive:
    only the lower clamp, and ``2 ** n`` (n in [-150, 0]) as two normal powers ``2 ** e1 *
    2 ** e2`` with ``e1 = n >> 1`` (``y * 2 ** e1`` is exact, the second product rounds
    once), no integer clamps. Positive ``x`` is also right up to 176 (inf past 88.7); beyond,
    undefined."""
    xc = max(x, tk.float32(-104.0))
    ni, y = _exp_reduced(xc)
    e1 = ni >> 1
    return (y * pow2_f32(e1)) * pow2_f32(ni - e1)


@tk.func
def f16_bits(f):
    """The IEEE binary16 bits (an int32 in [0, 65535]) of the float32 ``f`` rounded to nearest
    even, bit for bit NumPy's ``astype(float16)`` (overflow to inf, NaN keeps its top payload
    bits and stays NaN), branch-free: selects between integer results only, so loops over it
    vectorize. Normal halves round by integer addition on the float's bits; subnormal ones by
    one float addition: ``|f| + 0.5`` rounds ``|f|`` to a multiple of ``2**-24`` (the unit of
    half subnormals), whose count is the difference of the bits."""
    x = tk.bitcast(tk.float32(f), tk.int32)
    sign = (x >> 16) & 0x8000
    ax = x & 0x7FFFFFFF
    normal = ((ax + 0x0FFF + ((ax >> 13) & 1)) - 0x38000000) >> 13
    sub = tk.bitcast(tk.bitcast(ax, tk.float32) + tk.float32(0.5), tk.int32) - 0x3F000000
    top = (ax & 0x7FFFFF) >> 13
    nan = 0x7C00 | top | tk.int32(top == 0)      # a NaN whose kept payload bits are 0: 0x7C01
    h = tk.select(ax < 0x38800000, sub, normal)   # (selects one deep: GCC if-converts no nesting)
    h = tk.select(ax >= 0x477FF000, 0x7C00, h)
    h = tk.select(ax > 0x7F800000, nan, h)
    return sign | h


@tk.func
def e4m3_value(b):
    """The float32 value of the fp8 e4m3fn byte ``b`` (an integer 0..255), exactly, branch-free
    and without subnormal float arithmetic (slow on x86): the exponent and mantissa bits moved
    to a float32's places, the exponent rebiased (+120); a subnormal ``m * 2**-9`` is
    ``2**-6 * (1 + m/8) - 2**-6``; ``S.1111.111`` is NaN."""
    q = tk.int32(b)
    normal = ((q & 0x7F) << 20) + (120 << 23)
    sub = tk.bitcast(tk.bitcast((121 << 23) | ((q & 7) << 20), tk.float32) - tk.float32(0.015625), tk.int32)
    bits = tk.select((q & 0x78) == 0, sub, normal)
    bits = tk.select((q & 0x7F) == 0x7F, 0x7FC00000, bits)
    return tk.bitcast(bits | ((q & 0x80) << 24), tk.float32)


@tk.func
def exp(x, poly):
    """``e ** x``: :func:`exp_f32` when ``poly`` (a compile-time flag, see :func:`use_poly`),
    else ``math.exp`` (the backend's function, in x's type)."""
    if poly:
        return exp_f32(tk.float32(x))
    else:
        return math.exp(x)


@tk.func
def exp_neg(x, poly):
    """``e ** x`` for ``x <= 0`` (-inf, NaN): :func:`exp_neg_f32` when ``poly``, else
    ``math.exp``."""
    if poly:
        return exp_neg_f32(tk.float32(x))
    else:
        return math.exp(x)


def use_poly(backend, dtype) -> bool:
    """Whether kernels on ``backend`` computing ``exp`` of ``dtype`` values use
    :func:`exp_f32`: on the CPU backend, for float32 arithmetic (float32 and the 16-bit
    floats, which compute in float32). GPU backends have fast hardware ``exp``; the
    interpreter keeps the reference ``math.exp``."""
    import numpy as np
    return backend.name == "CPU" and np.dtype(dtype).itemsize <= 4
