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


@tk.func
def pow2_f32(k):
    """``2.0 ** k`` as float32, exactly, for an int32 ``k`` in [-96, 95]: ``2 ** (k mod 32)``
    from an integer shift, times ``2 ** (32 * (k >> 5))`` assembled from the bits of
    ``h = (k >> 5) + 3`` (0..5) by arithmetic, not selects (GCC merges a chain of selects into
    a many-way branch it does not vectorize). Each factor is exact: ``2**-96 + 4 * 2**30``
    rounds to ``2**32``, ``1 + 2**32`` to ``2**32``; every partial product is a normal power
    of two, so the products are exact in any order."""
    lo = tk.float32(tk.uint32(1) << tk.uint32(k & 31))
    h = (k >> 5) + 3
    f2 = tk.float32(h & 4) * tk.float32(1073741824.0) + tk.float32(1.2621774483536189e-29)  # 2**32 or 2**-96
    f0 = tk.float32(h & 1) * tk.float32(4294967296.0) + tk.float32(1.0)                    # 2**32 or 1
    f1 = tk.float32(h & 2) * tk.float32(9.223372036854776e+18) + tk.float32(1.0)           # 2**64 or 1
    return lo * (f2 * f0 * f1)


@tk.func
def exp_f32(x):
    """``e ** x`` of a float32 ``x``, vectorizable (see the module docstring).

    ``x = n * ln 2 + r`` (Cody-Waite: ``n * LN2_HI`` is exact), ``e ** r`` by a polynomial,
    times ``2 ** n`` built exactly. Shaped for the vectorizer: no ``floorf`` call (the floor
    of a positive value by truncation), no select (GCC would sink the work into one arm, where
    the float-to-int conversion may not be speculated), and the only clamps act on ``|x|`` (a
    clamp of ``x`` to a constant lets GCC thread a path on which everything after it is
    constant, and the loop no longer vectorizes). ``|x| <= 104``: ``e**-104 < 2**-150``
    gives 0; past 89 ``n`` stops at 128 and ``e**r >= 1`` overflows to inf. ``min`` returns
    its first argument when the comparison is false: ``xn`` (for ``n``) turns NaN into
    +-104, ``xr`` (for ``r``) keeps it, and it propagates to the result."""
    ax = abs(x)
    xn = math.copysign(min(tk.float32(104.0), ax), x)
    xr = math.copysign(min(ax, tk.float32(104.0)), x)
    ni = min(tk.int32(xn * tk.float32(LOG2E) + tk.float32(256.5)) - 256, 128)   # round(x / ln 2)
    n = tk.float32(ni)
    r = (xr - n * tk.float32(LN2_HI)) - n * tk.float32(LN2_LO)
    p = ((((tk.float32(P0) * r + tk.float32(P1)) * r + tk.float32(P2)) * r + tk.float32(P3)) * r
         + tk.float32(P4)) * r + tk.float32(P5)
    y = ((r * r) * p + r) + tk.float32(1.0)
    a = ni >> 1
    # y * 2**a is exact (a >= -75 keeps it normal); the second factor rounds once, to a
    # subnormal, a normal or inf
    return (y * pow2_f32(a)) * pow2_f32(ni - a)


@tk.func
def exp(x, poly):
    """``e ** x``: :func:`exp_f32` when ``poly`` (a compile-time flag, see :func:`use_poly`),
    else ``math.exp`` (the backend's function, in x's type)."""
    if poly:
        return exp_f32(tk.float32(x))
    else:
        return math.exp(x)


def use_poly(backend, dtype) -> bool:
    """Whether kernels on ``backend`` computing ``exp`` of ``dtype`` values use
    :func:`exp_f32`: on the CPU backend, for float32 arithmetic (float32 and the 16-bit
    floats, which compute in float32). GPU backends have fast hardware ``exp``; the
    interpreter keeps the reference ``math.exp``."""
    import numpy as np
    return backend.name == "CPU" and np.dtype(dtype).itemsize <= 4
