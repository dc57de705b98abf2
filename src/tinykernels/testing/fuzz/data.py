"""Input values for generated kernels: :func:`edge_values` (zeros, extremes, infinities, NaN and
other values that tend to expose bugs), :func:`random_values` (a mix of edge values and random
ones of a type), :func:`cancelling_values` (factors and negated rounded products, so that
``a*b + c`` cancels and a fused multiply-add would show) and :func:`int_valued` (small
integers, exact in every float type).
"""
from __future__ import annotations

import math

import numpy as np

from .types import INTS, NARROW, int_range, np_dtype


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


#: Factors with full mantissas (their products round in every float type).
_FACTORS = (0.1, 1.0 / 3.0, 1.7)


def cancelling_values(t: str) -> np.ndarray:
    """Values of float type ``t`` for which ``a*b + c`` cancels: the factors ``x``, ``-x`` and the
    products ``-(x*y)`` rounded to ``t``, exact and one ulp either side. Without contraction
    ``c + a*b`` is then 0 or one ulp of the product; a fused multiply-add returns the product's
    rounding error instead."""
    dt = np.dtype(np.float32 if t in NARROW else np.float64 if t == "pyfloat" else np_dtype(t))
    xs = np.array(_FACTORS, dtype=np.float64).astype(dt)
    p = np.array([-(x * y) for i, x in enumerate(xs) for y in xs[i:]], dtype=dt)
    up, down = np.nextafter(p, np.array(np.inf, dt)), np.nextafter(p, np.array(-np.inf, dt))
    return np.concatenate([xs, -xs, p, up, down]).astype(dt)


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
    kind = rng.integers(0, 7, n)
    small = np.round(rng.normal(0, 4, n) * 4) / 4                # exact quarter values
    wide = rng.normal(0, 1, n) * 10.0 ** rng.integers(-6, 7, n)
    ints = rng.integers(-50, 51, n).astype(np.float64)
    unit = rng.normal(0, 1, n)             # full mantissas of one magnitude: products round, sums keep bits
    cv = cancelling_values(t).astype(np.float64)
    cancel = cv[rng.integers(0, len(cv), n)]
    ev = np.array(edge_values(t), dtype=np.float64)
    edge = ev[rng.integers(0, len(ev), n)] if edges else ints
    out = np.select([kind == 0, kind == 1, kind == 2, kind == 3, kind == 4], [small, wide, ints, unit, cancel], edge)
    with np.errstate(all="ignore"):
        if t in NARROW:
            return out.astype(np.float32).astype(dt)
        return out.astype(dt)


def int_valued(t: str, n: int, rng: np.random.Generator, lo: int = -20, hi: int = 20) -> np.ndarray:
    """Small integer values of type ``t`` (exact in every float type)."""
    lo = max(lo, int_range(t)[0]) if t in INTS else lo
    return rng.integers(lo, hi + 1, n).astype(np_dtype(t))
