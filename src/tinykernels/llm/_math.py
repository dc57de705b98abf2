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
def pow2_f32(m):
    """``2.0 ** m`` as float32, exactly, for an int32 ``m`` in [-128, 127], from integer
    shifts and exact products only (the language has no bit casts): ``2 ** (m mod 32)`` from
    a shift, times ``G ** 8`` where ``G = 2 ** (4 * (m >> 5))`` also comes from a shift (every
    square is an exact power of two; ``2**-128`` is a subnormal, still exact). No selects
    (GCC merges a chain of selects into a many-way branch it does not vectorize), and every
    shift count is masked with ``& 31`` so the C code has no range test around the shift."""
    lo = tk.float32(tk.uint32(1) << tk.uint32(m & 31))
    g = tk.float32(tk.uint32(1) << tk.uint32((((m >> 5) + 4) << 2) & 31)) * tk.float32(1.52587890625e-05)   # * 2**-16
    g = g * g
    g = g * g
    return lo * (g * g)


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
    # 2**ni = 2**e * 2**mm with mm in the normal exponents [-126, 127] and e in [-24, 1]:
    # y * 2**e is exact (a normal float), the second product rounds once (to a subnormal, a
    # normal or inf)
    mm = min(max(ni, -126), 127)
    e = ni - mm
    y = y * (tk.float32(tk.uint32(1) << tk.uint32((e + 24) & 31)) * tk.float32(5.9604644775390625e-08))   # 2**e
    return y * pow2_f32(mm)

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
