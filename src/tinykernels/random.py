"""Counter-based random numbers (host side).

tinykernels uses a *stateless* random-number scheme built on the Philox4x32-10
block cipher (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
SC'11):

* A **key** is a ``np.uint64``.  Make one from any Python int with
  :func:`key` (the seed is mixed with splitmix64, so nearby seeds give
  unrelated keys).  Derive independent sub-keys with :func:`split`.
* A **counter** is any uint64 (typically the element index).  The pair
  ``(key, counter)`` is encrypted with Philox: the key supplies the two key
  words (``k0`` = low 32 bits, ``k1`` = high 32 bits), the counter the first two
  counter words (``c0`` = low, ``c1`` = high) with ``c2 = c3 = 0``.
* :func:`bits` returns the first output word ``x``; :func:`uniform` returns
  ``(x >> 8) * 2**-24`` (float32 in ``[0, 1)``); :func:`normal` applies
  Box-Muller in float32 to words ``x`` and ``y``.

There is no generator state: the same ``(key, counter)`` always gives the same
number, on the host and inside kernels, where ``tk.random.bits/uniform/normal``
compile to the C helpers ``tk_rand_bits/uniform/normal`` of the ``philox``
prelude section.  ``bits`` and ``uniform`` are bit-identical between the two;
``normal`` agrees to within float32 rounding of the libm functions.  To draw
several streams, give every stream its own key (via :func:`split`) or its own
counter range; never reuse a ``(key, counter)`` pair for unrelated draws.

:func:`split` uses counters ``(i_lo, i_hi, 0x5eed, 0)``; since the draw
functions always use ``c2 = 0`` the two never overlap.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

__all__ = ["philox4x32", "key", "split", "bits", "uniform", "normal"]

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint32(0x9E3779B9)
_W1 = np.uint32(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_SPLIT_DOMAIN = 0x5EED
_MASK64 = (1 << 64) - 1
_TWO_PI_F32 = np.float32(6.2831853071795864769)
_INV_2_24 = np.float32(2.0**-24)


def _u32(v: Any, what: str = "tk.random.philox4x32: a word") -> np.ndarray:
    """Convert ints / int arrays to uint32 (wrapping modulo 2**32); ``what`` names the argument."""
    if isinstance(v, int):
        return np.asarray(v & 0xFFFFFFFF, dtype=np.uint32)
    a = np.asarray(v)
    if a.dtype == np.uint32:
        return a
    if a.dtype.kind in "iub":
        return a.astype(np.uint32)
    if a.dtype == object:
        return np.vectorize(lambda x: int(x) & 0xFFFFFFFF, otypes=[np.uint32])(a)
    raise TypeError(f"{what} must be an integer or an integer array, got dtype {a.dtype}")


def _u64(v: Any, what: str) -> np.ndarray:
    """Convert ints / int arrays to uint64 (wrapping modulo 2**64); ``what`` names the argument."""
    if isinstance(v, int):
        return np.asarray(v & _MASK64, dtype=np.uint64)
    a = np.asarray(v)
    if a.dtype == np.uint64:
        return a
    if a.dtype.kind in "iub":
        return a.astype(np.uint64)
    if a.dtype == object:
        return np.vectorize(lambda x: int(x) & _MASK64, otypes=[np.uint64])(a)
    raise TypeError(f"{what} must be an integer or an integer array, got dtype {a.dtype}")


def _out(a: np.ndarray) -> Any:
    """Return numpy scalars for 0-d results, arrays otherwise."""
    return a[()] if a.ndim == 0 else a


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on uint32 counter words ``c0..c3`` and key words ``k0, k1``.

    Vectorised with broadcasting; returns four uint32 arrays (or numpy
    scalars for scalar inputs), the same as the C ``tk_philox4x32``.
    """
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(*(_u32(v) for v in (c0, c1, c2, c3, k0, k1)))
    c0, c1, c2, c3 = (c.astype(np.uint32) for c in (c0, c1, c2, c3))
    k0 = k0.astype(np.uint32)
    k1 = k1.astype(np.uint32)
    with np.errstate(over="ignore"):
        for i in range(10):
            if i:
                k0 = k0 + _W0
                k1 = k1 + _W1
            p0 = c0.astype(np.uint64) * _M0
            p1 = c2.astype(np.uint64) * _M1
            n0 = (p1 >> _SHIFT32).astype(np.uint32) ^ c1 ^ k0
            n2 = (p0 >> _SHIFT32).astype(np.uint32) ^ c3 ^ k1
            c1 = (p1 & _MASK32).astype(np.uint32)
            c3 = (p0 & _MASK32).astype(np.uint32)
            c0, c2 = n0, n2
    return _out(c0), _out(c1), _out(c2), _out(c3)


def key(seed: int) -> np.uint64:
    """Derive a well-mixed key from any Python int seed (splitmix64 of seed mod 2**64).
    A seed that is not an integer (``1.5``, ``True``) is a TypeError, as in NumPy's ``default_rng``
    (which refuses floats; a bool is no seed either)."""
    try:
        if isinstance(seed, (bool, np.bool_)):
            raise TypeError                               # True is no seed
        seed = operator.index(seed)
    except TypeError:
        raise TypeError(f"tk.random.key: the seed must be an int, got {type(seed).__name__} {seed!r}") from None
    z = (seed + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return np.uint64(z ^ (z >> 31))


def _key_words(k, fn: str) -> tuple[np.ndarray, np.ndarray]:
    k = _u64(k, f"tk.random.{fn}: the key")
    return (k & _MASK32).astype(np.uint32), (k >> _SHIFT32).astype(np.uint32)


def split(k, n: int) -> np.ndarray:
    """Return ``n`` new uint64 keys derived from key ``k``.

    Key ``i`` is the first 64 bits of Philox(counter = (i_lo, i_hi, 0x5eed, 0),
    key = k).  The keys are distinct from each other and from ``k`` except with
    probability about ``n**2 / 2**65``.
    """
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"tk.random.split: n must be an int, got {type(n).__name__} {n!r}") from None
    if n < 0:
        raise ValueError(f"tk.random.split: n must be non-negative, got {n}")
    if np.ndim(k) != 0:
        raise ValueError(f"tk.random.split: the key must be a single key, got an array of shape {np.shape(k)}")
    k0, k1 = _key_words(k, "split")
    i = np.arange(n, dtype=np.uint64)
    x, y, _, _ = philox4x32((i & _MASK32).astype(np.uint32), (i >> _SHIFT32).astype(np.uint32),
                            _SPLIT_DOMAIN, 0, k0, k1)
    x = np.asarray(x, dtype=np.uint32).astype(np.uint64)
    y = np.asarray(y, dtype=np.uint32).astype(np.uint64)
    return (y << _SHIFT32) | x


def _block(k, counter, fn: str):
    k0, k1 = _key_words(k, fn)
    c = _u64(counter, f"tk.random.{fn}: the counter")
    return philox4x32((c & _MASK32).astype(np.uint32), (c >> _SHIFT32).astype(np.uint32), 0, 0, k0, k1)


def bits(k, counter):
    """32 random bits (uint32) for each counter; same as C ``tk_rand_bits``."""
    x, _, _, _ = _block(k, counter, "bits")
    return x


def uniform(k, counter):
    """Uniform float32 in [0, 1) for each counter; same as C ``tk_rand_uniform``."""
    x = np.asarray(_block(k, counter, "uniform")[0])
    return _out((x >> np.uint32(8)).astype(np.float32) * _INV_2_24)


def normal(k, counter):
    """Standard-normal float32 for each counter; matches C ``tk_rand_normal``.

    Each float32 libm step (logf, sqrtf, cosf) is evaluated in float64 and
    rounded to float32, i.e. as by a correctly rounded libm.
    """
    x, y, _, _ = _block(k, counter, "normal")
    x = np.asarray(x)
    y = np.asarray(y)
    u1 = ((x >> np.uint32(8)) + np.uint32(1)).astype(np.float32) * _INV_2_24
    u2 = (y >> np.uint32(8)).astype(np.float32) * _INV_2_24
    lg = np.log(u1.astype(np.float64)).astype(np.float32)
    r = np.sqrt((np.float32(-2.0) * lg).astype(np.float64)).astype(np.float32)
    ang = (_TWO_PI_F32 * u2).astype(np.float32)
    c = np.cos(ang.astype(np.float64)).astype(np.float32)
    return _out((r * c).astype(np.float32))
