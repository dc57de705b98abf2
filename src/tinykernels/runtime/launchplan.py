"""Cache keys of launch plans (generic: any runtime that caches per-launch work).

A launch whose Python side must cost less than the driver's few microseconds is prepared
once per *geometry* and *argument keys* and then replayed (runtime/cuda_launch.py explains
the CUDA plans). This module holds the keys, which must be exact: two launches share a key
only when every value the prepared launch depends on is the same.

* :func:`geo_key` of ``(ndrange, workgroupsize)``, or None when the values cannot be keyed
  exactly (floats, bools, lists, ranges of fewer than two elements);
* a :class:`Geo` per key: the values of the kernel's geometry parameters, the grid and
  block, and a token standing for what the compiled code depends on;
* :func:`plan_key`: the geometry token plus one entry per argument (an array's interned
  layout, a scalar's type, a constexpr's type and exact value: :func:`value_key`).
"""
from __future__ import annotations

import struct

import numpy as np

WG_KEY = object()             # geometry keys that include a workgroup size start with this
WIDE_INT = object()           # plan-key entry of a Python int in [2**63, 2**64) (passed as uint64)
MAX_CACHED = 1024             # geometries / plans kept per kernel instance (then the cache restarts)


def value_key(value) -> tuple:
    """The cache-key entry of a ``tk.constexpr`` value (or of any scalar a cache compares): its
    type and its exact value. Equal values of one type can compile (or run) differently (``0.0 == -0.0``, but ``1 / c`` and
    ``copysign`` tell them apart), so a float keys on its bits; a hash is no key at all
    (``hash(-1) == hash(-2)``: the CPU launcher's key of hashes reused one's build for the
    other). TypeError for an unhashable value."""
    if isinstance(value, float):             # float, its subclasses, np.float64
        k = (type(value), struct.pack("<d", value))
    elif isinstance(value, np.floating):
        k = (type(value), value.tobytes())
    else:
        k = (type(value), value)
    hash(k)
    return k


class Geo:
    """A launch geometry of one kernel instance: ``token`` (what the code depends on),
    ``slots`` (the geometry parameters' values), ``dims`` (grid + block)."""
    __slots__ = ("token", "slots", "dims")

    def __init__(self, token, slots: tuple, dims: tuple):
        self.token, self.slots, self.dims = token, slots, dims


def exact_int(x):
    """``x`` as an int when it is an int or a NumPy integer (not a bool), else None."""
    c = x.__class__
    if c is int:
        return x
    if c is not bool and isinstance(x, np.integer):
        return int(x)
    return None


def geo_key(ndrange, workgroupsize):
    """A cache key of (ndrange, workgroupsize) equal to another's only when both give the same
    geometry, or None (1.0 == 1 == True as dict keys, and equal ranges of 0 or 1 elements may
    differ in start and step: such launches take the full path)."""
    if ndrange.__class__ is tuple:
        parts = []
        for x in ndrange:
            if x.__class__ is range:
                if len(x) < 2:
                    return None
                parts.append(x)
            else:
                v = exact_int(x)
                if v is None:
                    return None
                parts.append(v)
        nd = tuple(parts)
    elif ndrange.__class__ is range:
        if len(ndrange) < 2:
            return None
        nd = ndrange
    else:
        nd = exact_int(ndrange)
        if nd is None:
            return None
    if workgroupsize is None:
        return nd
    if workgroupsize.__class__ is tuple:
        wg = tuple(exact_int(x) for x in workgroupsize)
        if None in wg:
            return None
    else:
        wg = exact_int(workgroupsize)
        if wg is None:
            return None
    return (WG_KEY, nd, wg)


def plan_key(token, norm, params, array_type: type) -> tuple | None:
    """The plan key of these normalized arguments (``params``: the kernel's (name, kind)
    pairs; arrays of ``array_type`` key on their ``_layout``), or None when an argument has
    no key (an unhashable constexpr)."""
    key = [token]
    try:
        for a, (_, kind) in zip(norm, params):
            if kind == "constexpr":
                k = value_key(a)
            elif isinstance(a, array_type):
                k = a._layout
            elif a.__class__ is int and a >= 1 << 63:
                k = WIDE_INT
            else:
                k = a.__class__
            key.append(k)
    except TypeError:
        return None
    return tuple(key)
