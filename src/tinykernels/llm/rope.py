"""Rotary position embeddings, NeoX/Llama style: the first ``rot`` dims of each head vector
are rotated as the pairs ``(x[j], x[j + rot/2])`` by the angle whose cosine and sine are
``cos[p, j]`` and ``sin[p, j]`` for the token's position ``p``; dims past ``rot`` are copied
(half-rotary, as in GPT-NeoX / Phi).

Arithmetic is float32 (``x1*c - x2*s`` and ``x2*c + x1*s``, each product rounded, no
contraction: what NumPy computes in float32) and rounds once on store; for float64 ``x`` it is
float64 (the kernels' constexpr ``T``, :func:`_common.compute_type`).

Positions outside the table (``p >= cos.shape[0]``, or ``p < 0`` from a negative device
counter) are an ``IndexError`` in debug mode; without it they give NaN in that token's
rotated dims (never a read outside the table).
"""
from __future__ import annotations

import math

import numpy as np

import tinykernels as tk

from . import _common as C
from ._index import dims4, ld4, rows3, st4

__all__ = ["rope", "rope_at"]


@tk.func
def angle(cos, sin, p, k, guard, T):
    """(cos, sin) of pair ``k`` at table row ``p`` as ``T`` (float32, or float64 for float64
    data; NaN outside the table when ``guard``: past its end, or before it from a negative
    position counter)."""
    c = T(math.nan)
    s = T(math.nan)
    if not guard or (p >= 0 and p < cos.shape[0]):
        c = T(cos[p, k])
        s = T(sin[p, k])
    return c, s


@tk.kernel
def _rope(out, x, cos, sin, pos, offset, use_pos: tk.constexpr, guard: tk.constexpr, T: tk.constexpr):
    """ndrange (rows of x, rot/2 + head_dim - rot): item k < rot/2 rotates pair k of its row,
    the others copy one of the unrotated dims (so the kernel may run in place)."""
    r, k = tk.index(tk.Global, tk.Cartesian)
    c0, c1, c2 = rows3(x, r)
    h = cos.shape[1]
    if k < h:
        p = c2 + offset
        if use_pos:
            p += pos[0]
        c, s = angle(cos, sin, p, k, guard, T)
        x1 = T(ld4(x, c0, c1, c2, k))
        x2 = T(ld4(x, c0, c1, c2, k + h))
        st4(out, c0, c1, c2, k, x1 * c - x2 * s)
        st4(out, c0, c1, c2, k + h, x2 * c + x1 * s)
    else:
        j = k + h
        st4(out, c0, c1, c2, j, ld4(x, c0, c1, c2, j))


@tk.kernel
def _rope_rows(out, x, cos, sin, pos, offset, use_pos: tk.constexpr, guard: tk.constexpr, T: tk.constexpr):
    """Host shape (CPU, interpreter): one work item per row of x, unit-stride loops over the
    pairs and over the copied dims (which the C compiler vectorizes; the item-per-element
    shape has a branch between rotating and copying in its inner loop). In place is fine:
    each pair is read before it is written."""
    r = tk.index()
    c0, c1, c2 = rows3(x, r)
    n0, n1, n2, D = dims4(x)
    h = cos.shape[1]
    p = c2 + offset
    if use_pos:
        p += pos[0]
    if not guard or (p >= 0 and p < cos.shape[0]):
        for k in range(h):
            c = T(cos[p, k])
            s = T(sin[p, k])
            x1 = T(ld4(x, c0, c1, c2, k))
            x2 = T(ld4(x, c0, c1, c2, k + h))
            st4(out, c0, c1, c2, k, x1 * c - x2 * s)
            st4(out, c0, c1, c2, k + h, x2 * c + x1 * s)
    else:
        for k in range(2 * h):
            st4(out, c0, c1, c2, k, T(math.nan))
    for j in range(2 * h, D):
        st4(out, c0, c1, c2, j, ld4(x, c0, c1, c2, j))


def check_tables(fn: str, x_shape: tuple, cos, sin, dt) -> int:
    """Validate rope tables against x's shape; returns rot/2."""
    C.require_array(cos, fn, "cos")
    C.require_array(sin, fn, "sin")
    cs = C.require_rank(cos, fn, "cos", 2, 2)
    C.require_shape(sin, fn, "sin", cs)
    ok = (np.dtype("float32"), dt)
    if C.dtype_of(cos) not in ok:                        # (messages only on failure: dtype names are slow)
        C.expected(fn, "cos", f"dtype {C.one_of(dict.fromkeys(map(str, ok)))} (float32 or x's)", f"dtype {C.dtype_of(cos)}")
    if C.dtype_of(sin) != C.dtype_of(cos):
        C.expected(fn, "sin", f"dtype {C.dtype_of(cos)} (cos's)", f"dtype {C.dtype_of(sin)}")
    h = cs[1]
    C.require(0 < 2 * h <= x_shape[-1], fn, "cos",
              f"expected shape (positions, 1..{x_shape[-1] // 2}) (x's head_dim {x_shape[-1]} / 2 at most), "
              f"got shape {C.shape_str(cs)}")
    return h


def check_counter(fn: str, name: str, c) -> None:
    """A device-resident position counter: an int32 array of one element."""
    C.require(C.is_array(c), fn, name, f"expected an int32 array of shape (1,), got {type(c).__name__}")
    C.require_dtype(c, fn, name, ("int32",))
    C.require_shape(c, fn, name, (1,))


_I32 = np.dtype(np.int32)
_F32 = np.dtype(np.float32)


def _rope_fast(x, cos, sin, pos, offset, out) -> bool:
    """The host fast path of :func:`rope`/:func:`rope_at` (as ``_common.host_same``): host
    arrays on one CPU backend (``_common.host_args``), ``x`` and ``out`` C-contiguous of one
    shape (rank 2 to 4, not empty) and float dtype, ``out`` the very array ``x`` (in place)
    or sharing no memory with it, neither with ``cos``/``sin`` (2-D, one dtype: float32 or
    x's, 0 < 2 * rot/2 <= head_dim, enough positions for ``offset``), an int32 [1] counter,
    an int ``offset >= 0``: the general path's ``_rope_rows`` launch; ``out`` None: a new
    array like ``x`` (``_common.host_new``). The caller passes only calls with the default
    stream; the result, or None where it does not apply."""
    if type(offset) is not int or offset < 0:
        return None
    host = C.host_args(out, x, cos, sin) if pos is None else C.host_args(out, x, cos, sin, pos)
    if host is None:
        return None
    backend, (ho, hx, hc, hs, *hp) = host
    s, dt = hx.shape, hx.dtype
    if not 2 <= len(s) <= C.MAX_RANK or not hx.size or dt not in C.FAST_FLOATS or not hx.flags.c_contiguous \
            or hc.ndim != 2 or hs.shape != hc.shape or hs.dtype is not hc.dtype or hc.dtype not in (_F32, dt) \
            or not 0 < 2 * hc.shape[1] <= s[-1] or C.ROW_GROUP not in (None, 1):
        return None
    if (hp and (hp[0].dtype != _I32 or hp[0].shape != (1,))) or (not hp and offset + s[-2] > hc.shape[0]):
        return None
    res, ho = (out, ho) if ho is not None else C.host_new(x, s, dt)
    if ho.shape != s or ho.dtype is not dt or not ho.flags.c_contiguous:
        return None
    if out is x:                      # in place (the very array; for torch, its own new view)
        hx = ho
    if (ho is not hx and C.may_share_memory(ho, hx)) or C.may_share_memory(ho, hc) or C.may_share_memory(ho, hs):
        return None
    _rope_rows.instance(backend)(ho, hx, hc, hs, hp[0] if hp else hc, offset, bool(hp), not C.is_debug(backend),
                                 C.COMPUTE_TYPES.get(dt, C.F32_TYPE), ndrange=hx.size // s[-1])
    return res


def _rope_call(fn, x, cos, sin, pos, offset, out, stream):
    res = _rope_fast(x, cos, sin, pos, offset, out) if stream is None else None
    if res is not None:
        return res
    C.require_array(x, fn, "x")
    backend = C.backend_of(fn, stream=stream, x=x, cos=cos, sin=sin, pos_counter=pos, out=out)
    shape = C.require_rank(x, fn, "x", 2)
    dt = C.require_float(x, fn, "x", backend)
    h = check_tables(fn, shape, cos, sin, dt)
    C.require(C.is_int(offset) and offset >= 0, fn, "offset",
              f"expected an int >= 0, got {offset!r}")
    if pos is None:
        C.require(offset + shape[-2] <= C.shape_of(cos)[0], fn, "cos",
                  f"expected at least {offset + shape[-2]} positions (offset {offset} + {shape[-2]}), "
                  f"got shape {C.shape_str(C.shape_of(cos))}")
    else:
        check_counter(fn, "pos_counter", pos)
    out = C.output(out, fn, x, shape, dt, backend, reads_across={"cos": cos, "sin": sin})
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    args = (out, x, cos, sin, cos if pos is None else pos, int(offset), pos is not None, not C.is_debug(backend),
            C.compute_type(dt))
    if rows and C.row_group(backend, shape[-1]) == 1:
        C.launch(_rope_rows, backend, args, rows, stream=stream)
    elif rows:
        C.launch(_rope, backend, args, (rows, shape[-1] - h), stream=stream)
    return out


def rope(x, cos, sin, offset: int = 0, out=None, stream=None):
    """Rotate ``x`` [..., seq, head_dim] (rank 2 to 4): token ``t`` uses table row
    ``offset + t`` of ``cos``/``sin`` [positions, rot/2] (float32 or x's dtype; a longer table
    is fine). ``out=x`` rotates in place."""
    return _rope_call("rope", x, cos, sin, None, offset, out, stream)


def rope_at(x, cos, sin, pos_counter, offset: int = 0, out=None, stream=None):
    """:func:`rope` with the position read on the device: token ``t`` uses table row
    ``pos_counter[0] + offset + t`` (``pos_counter``: int32 [1], e.g. the KV-cache counter of
    :mod:`.kvcache`), so a decode step needs no host round trip."""
    return _rope_call("rope_at", x, cos, sin, pos_counter, offset, out, stream)
