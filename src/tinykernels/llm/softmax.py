"""Softmax and sum along any axis of an array of rank 1 to 4.

The array is seen as ``(outer, L, inner)`` around the axis: each (outer, inner) position is
one *row* of ``L`` elements, handled by ``C.row_group(backend)`` work items (a plain loop on
the CPU and the interpreter, a workgroup with ``group_reduce`` elsewhere). Accumulation is
float32 for float32, float16 and bfloat16 (float64 for float64).
"""
from __future__ import annotations

import math

import numpy as np

import tinykernels as tk

from . import _common as C
from ._index import ld4, st4, unflat4
from ._math import exp_neg as _exp_neg, use_poly

LANES = C.LANES

__all__ = ["softmax", "sum"]


@tk.func
def at_axis(A, ax, c0, c1, c2, c3, l):
    """A at padded coordinates with coordinate ``ax`` (a constant) replaced by ``l``."""
    if ax == 0:
        return ld4(A, l, c1, c2, c3)
    elif ax == 1:
        return ld4(A, c0, l, c2, c3)
    elif ax == 2:
        return ld4(A, c0, c1, l, c3)
    else:
        return ld4(A, c0, c1, c2, l)


@tk.func
def put_axis(A, ax, c0, c1, c2, c3, l, v):
    if ax == 0:
        st4(A, l, c1, c2, c3, v)
    elif ax == 1:
        st4(A, c0, l, c2, c3, v)
    elif ax == 2:
        st4(A, c0, c1, l, c3, v)
    else:
        st4(A, c0, c1, c2, l, v)


@tk.func
def row_start(x, r, L, inner):
    """Padded coordinates of element 0 of row ``r`` (rows: the (outer, inner) positions)."""
    return unflat4(x, (r // inner) * (L * inner) + r % inner)


@tk.kernel
def _softmax(out, x, scale, L, inner, ax: tk.constexpr, T: tk.constexpr):
    r = tk.index(tk.Global, tk.Cartesian)[0]
    lid = tk.index(tk.Local, tk.Linear)
    W = tk.groupsize()[1]
    c0, c1, c2, c3 = row_start(x, r, L, inner)
    m = T(-math.inf)
    for l in range(lid, L, W):
        m = max(m, T(at_axis(x, ax, c0, c1, c2, c3, l)) * scale)
    if W > 1:
        m = tk.group_reduce(m, "max")
    s = T(0)
    for l in range(lid, L, W):
        s += math.exp(T(at_axis(x, ax, c0, c1, c2, c3, l)) * scale - m)
    if W > 1:
        s = tk.group_reduce(s, "add")
    for l in range(lid, L, W):
        put_axis(out, ax, c0, c1, c2, c3, l, math.exp(T(at_axis(x, ax, c0, c1, c2, c3, l)) * scale - m) / s)


SM_LANES = 32
"""Partial maxima and sums per row in the host softmax: 32 (two AVX-512 registers), not
``LANES``: GCC unrolls a 16-trip lane loop completely and then vectorized its maxima not at
all (16 scalar ``vmaxss`` per step) and kept its sums in memory (a store-to-load chain per
step); a 32-trip loop is vectorized as a loop, accumulators in registers."""


@tk.func
def lanes_max(acc, x, scale, L, ax, c0, c1, c2, c3, T):
    """The largest ``x * scale`` of the row at (c0, c1, c2, c3) along axis ``ax`` by one work
    item, in the ``SM_LANES`` partial maxima ``acc`` (lane ``j`` takes the elements ``l`` with
    ``l % SM_LANES == j``), combined in lane order; ``acc`` is left zeroed for the sums."""
    full = L - L % SM_LANES
    for j in range(SM_LANES):
        acc[j] = T(-math.inf)
    for l0 in range(0, full, SM_LANES):
        for j in range(SM_LANES):
            acc[j] = max(acc[j], T(at_axis(x, ax, c0, c1, c2, c3, l0 + j)) * scale)
    for l in range(full, L):
        acc[l - full] = max(acc[l - full], T(at_axis(x, ax, c0, c1, c2, c3, l)) * scale)
    m = T(-math.inf)
    for j in range(SM_LANES):
        m = max(m, acc[j])
    for j in range(SM_LANES):
        acc[j] = T(0)
    return m


@tk.kernel
def _softmax_lanes(out, x, scale, L, inner, ax: tk.constexpr, poly: tk.constexpr, stash: tk.constexpr,
                   T: tk.constexpr):
    """The host shape (CPU, interpreter): one work item per row, each pass over the row keeping
    ``SM_LANES`` partial results (lane ``j`` takes the elements ``l`` with
    ``l % SM_LANES == j``), a loop the C compiler vectorizes without reassociating anything.
    ``T``: the compute type (float32; float64 for float64 data, :func:`_common.compute_type`).
    ``stash``: ``out`` holds ``T``, so the second pass stores ``exp(x * scale - m)`` there
    and the third scales it in place instead of computing the exponential again. The third
    pass multiplies by ``1 / sum`` (one rounding more than a division, which was the slowest
    instruction of the loop)."""
    r = tk.index()
    c0, c1, c2, c3 = row_start(x, r, L, inner)
    full = L - L % SM_LANES
    acc = tk.private(T, (SM_LANES,))
    m = lanes_max(acc, x, scale, L, ax, c0, c1, c2, c3, T)
    for l0 in range(0, full, SM_LANES):
        for j in range(SM_LANES):
            e = _exp_neg(T(at_axis(x, ax, c0, c1, c2, c3, l0 + j)) * scale - m, poly)
            acc[j] += e
            if stash:
                put_axis(out, ax, c0, c1, c2, c3, l0 + j, e)
    for l in range(full, L):
        e = _exp_neg(T(at_axis(x, ax, c0, c1, c2, c3, l)) * scale - m, poly)
        acc[l - full] += e
        if stash:
            put_axis(out, ax, c0, c1, c2, c3, l, e)
    s = T(0)
    for j in range(SM_LANES):
        s += acc[j]
    inv = T(1) / s
    for l in range(L):
        if stash:
            e = T(at_axis(out, ax, c0, c1, c2, c3, l))
        else:
            e = _exp_neg(T(at_axis(x, ax, c0, c1, c2, c3, l)) * scale - m, poly)
        put_axis(out, ax, c0, c1, c2, c3, l, e * inv)


SM_ROW = 4096
"""The longest row whose exponentials :func:`_softmax_rows_ro` keeps in a private row (16 KiB
of float32 on a work item's stack, in L1/L2 between the passes)."""


@tk.kernel
def _softmax_rows_ro(out, x: tk.Const, scale, L, inner, poly: tk.constexpr, T: tk.constexpr):
    """:func:`_softmax_lanes` over the last axis (``inner == 1``) of rows of at most ``SM_ROW``
    elements when ``out`` shares no memory with ``x``: the exponentials wait in a private row
    instead of ``out``, ``x`` is read-only and ``out`` only written, so the CPU streams the
    third pass's stores (docs/cpu.md, "Streaming stores": stores in a loop over a row). The
    same arithmetic, so the same bits."""
    r = tk.index()
    c0, c1, c2, c3 = row_start(x, r, L, inner)
    full = L - L % SM_LANES
    acc = tk.private(T, (SM_LANES,))
    row = tk.private(T, (SM_ROW,))
    m = lanes_max(acc, x, scale, L, 3, c0, c1, c2, c3, T)
    for l0 in range(0, full, SM_LANES):
        for j in range(SM_LANES):
            e = _exp_neg(T(ld4(x, c0, c1, c2, l0 + j)) * scale - m, poly)
            acc[j] += e
            row[l0 + j] = e
    for l in range(full, L):
        e = _exp_neg(T(ld4(x, c0, c1, c2, l)) * scale - m, poly)
        acc[l - full] += e
        row[l] = e
    s = T(0)
    for j in range(SM_LANES):
        s += acc[j]
    inv = T(1) / s
    for l in range(L):
        st4(out, c0, c1, c2, l, row[l] * inv)


@tk.func
def sum_lanes(acc, out, x, r, L, inner, ax, A):
    """Row ``r``'s sum in the ``LANES`` partial sums ``acc`` of type ``A`` (as
    ``_softmax_lanes``), combined in lane order and stored in ``out``."""
    c0, c1, c2, c3 = row_start(x, r, L, inner)
    full = L - L % LANES
    for j in range(LANES):
        acc[j] = A(0)
    for l0 in range(0, full, LANES):
        for j in range(LANES):
            acc[j] += A(at_axis(x, ax, c0, c1, c2, c3, l0 + j))
    for l in range(full, L):
        acc[l - full] += A(at_axis(x, ax, c0, c1, c2, c3, l))
    s = acc[0]
    for j in range(1, LANES):
        s += acc[j]
    o0, o1, o2, o3 = unflat4(out, r)
    st4(out, o0, o1, o2, o3, s)


@tk.kernel
def _sum_lanes(out, x, L, inner, ax: tk.constexpr, A: tk.constexpr):
    """The host shape of :func:`_sum`: partial sums of type ``A`` (float32 for float32,
    float16 and bfloat16 ``x``; float64 for float64; int64 or uint64 for integers and bool:
    :func:`_sum_type`)."""
    sum_lanes(tk.private(A, (LANES,)), out, x, tk.index(), L, inner, ax, A)


@tk.kernel
def _sum(out, x, L, inner, ax: tk.constexpr, A: tk.constexpr):
    r = tk.index(tk.Global, tk.Cartesian)[0]
    lid = tk.index(tk.Local, tk.Linear)
    W = tk.groupsize()[1]
    c0, c1, c2, c3 = row_start(x, r, L, inner)
    acc = A(0)
    for l in range(lid, L, W):
        acc += A(at_axis(x, ax, c0, c1, c2, c3, l))
    if W > 1:
        acc = tk.group_reduce(acc, "add")
    if lid == 0:
        o0, o1, o2, o3 = unflat4(out, r)
        st4(out, o0, o1, o2, o3, acc)


def _sum_type(dt: np.dtype):
    """The accumulator type of a sum of ``dt`` data: :func:`_common.compute_type` for floats,
    the result's integer type (int64, uint64: :func:`_common.sum_type`) for the others."""
    return C.compute_type(dt) if dt.kind == "f" or dt.kind == "V" else C.sum_type(dt).type


def _axis(fn: str, axis, ndim: int) -> int:
    C.require(isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) and -ndim <= axis < ndim,
              fn, "axis", f"expected an int in [{-ndim}, {ndim}), got {axis!r}")
    return int(axis) % ndim


def _split(shape: tuple, axis: int) -> tuple:
    """(rows, L, inner, padded axis) of the (outer, L, inner) view around ``axis``."""
    inner = math.prod(shape[axis + 1:])          # Python ints (np.prod: microseconds per call)
    rows = math.prod(shape[:axis]) * inner
    return rows, shape[axis], inner, axis + 4 - len(shape)


def _sum_fast(x, axis, out, stream):
    """The host fast path of :func:`sum` (as ``elementwise._flat_fast``): host ``x`` and
    ``out=`` (``_common.host_args``; of ``x``'s float dtype and the reduced shape, at least
    1-D, sharing no memory with ``x``; or not given: ``_common.host_new``), an int
    ``axis``, the default stream, the one-item-per-row kernel; the same launch as the general
    path, which every other call takes. The result, or None where it does not apply."""
    host = C.host_args(out, x) if stream is None and type(axis) is int else None
    if host is None:
        return None
    backend, (ho, hx) = host
    shape, dt = hx.shape, hx.dtype
    nd = len(shape)
    if not 1 < nd <= C.MAX_RANK or not -nd <= axis < nd or dt not in C.FAST_FLOATS:
        return None
    ax = axis % nd
    oshape = shape[:ax] + shape[ax + 1:]
    rows, L, inner, ax4 = _split(shape, ax)
    if not rows or C.row_group(backend, L) != 1:
        return None
    res, ho = (out, ho) if ho is not None else C.host_new(x, oshape, dt)
    if ho.dtype is not dt or ho.shape != oshape or C.may_share_memory(ho, hx):
        return None
    _sum_lanes.instance(backend)(ho, hx, L, inner, ax4, C.COMPUTE_TYPES.get(dt, C.F32_TYPE), ndrange=rows)
    return res


def _softmax_fast(x, axis, scale, out) -> bool:
    """The host fast path of :func:`softmax` over the last axis (``_common.host_same``: host
    ``x`` and ``out=`` of one shape and float dtype, sharing no memory), an int ``axis`` and a
    float ``scale``, rows of at most ``SM_ROW``: the general path's ``_softmax_rows_ro``
    launch; ``out`` None: a new array like ``x``. The caller passes only calls with the
    default stream; the result, or None where it does not apply."""
    host = C.host_same(out, x) if type(axis) is int and type(scale) is float else None
    if host is None:
        return None
    backend, (ho, hx), res = host
    L = hx.shape[-1]
    if ho.dtype is not hx.dtype or not -hx.ndim <= axis < hx.ndim or axis % hx.ndim != hx.ndim - 1 or L > SM_ROW \
            or C.ROW_GROUP not in (None, 1):        # (row_group(backend) on the CPU, inline)
        return None
    _softmax_rows_ro.instance(backend)(ho, hx, scale, L, 1, use_poly(backend, hx.dtype), C.COMPUTE_TYPES.get(hx.dtype, C.F32_TYPE),
                                       ndrange=hx.size // L)
    return res


def softmax(x, axis: int = -1, scale: float = 1.0, out=None, stream=None):
    """``softmax(x * scale)`` along ``axis`` (x float32/float16/bfloat16/float64, rank 1 to 4):
    the maximum is subtracted first (numerically stable); float32 accumulation (float64 for a
    float64 ``x``)."""
    res = _softmax_fast(x, axis, scale, out) if stream is None else None
    if res is not None:
        return res
    fn = "softmax"
    C.require_array(x, fn, "x")
    backend = C.backend_of(fn, stream=stream, x=x, out=out)
    shape = C.require_rank(x, fn, "x")
    dt = C.require_float(x, fn, "x", backend)
    ax = _axis(fn, axis, len(shape))
    C.require(isinstance(scale, (int, float, np.integer, np.floating)) and not isinstance(scale, bool), fn,
              "scale", f"expected a Python float, got {type(scale).__name__}")
    out = C.output(out, fn, x, shape, dt, backend)
    rows, L, inner, ax4 = _split(shape, ax)
    T = C.compute_type(dt)
    if (L and backend.name in ("CPU", "INTERP") and C.row_group(backend, L) == 1 and inner == 1 and L <= SM_ROW
            and not C.shares_memory(out, x)):      # (a GPU's work item has no room for a private row)
        C.launch(_softmax_rows_ro, backend, (out, x, float(scale), L, inner, use_poly(backend, dt), T), rows,
                 stream=stream)
    elif L and C.row_group(backend, L) == 1:
        stash = C.dtype_of(out) == np.dtype(T)
        C.launch(_softmax_lanes, backend, (out, x, float(scale), L, inner, ax4, use_poly(backend, dt), stash, T),
                 rows, stream=stream)
    elif L:
        C.launch_rows(_softmax, backend, (out, x, float(scale), L, inner, ax4, T), rows, C.row_group(backend, L),
                      stream)
    return out


def sum(x, axis: int, out=None, stream=None):
    """The sum of ``x`` along ``axis``, of NumPy's ``np.sum`` dtype: a float ``x``'s own
    (float32 accumulation for 16- and 8-bit floats), int64 for bool and signed integers,
    uint64 for unsigned ones (wrapping modulo 2**64, as NumPy's; a backend without 64-bit
    integers, such as WebGPU, refuses those with an error naming ``x``)."""
    res = _sum_fast(x, axis, out, stream)
    if res is not None:
        return res
    fn = "sum"
    C.require_array(x, fn, "x")
    backend = C.backend_of(fn, stream=stream, x=x, out=out)
    shape = C.require_rank(x, fn, "x")
    dt = C.require_float(x, fn, "x", backend, C.FLOATS + C.FP8 + C.INTS)
    rt = C.sum_type(dt)
    if rt != dt and not backend.supports(rt.name):
        C.expected(fn, "x", f"a dtype whose sum {backend.name} can hold (NumPy sums dtype {dt} to {rt}, "
                   f"which {backend.name} lacks)", f"dtype {dt}")
    ax = _axis(fn, axis, len(shape))
    oshape = shape[:ax] + shape[ax + 1:]
    out = C.output(out, fn, x, oshape, rt, backend)
    A = _sum_type(dt)
    rows, L, inner, ax4 = _split(shape, ax)
    o = C.view(out, (1,)) if rows and not oshape else out
    if rows and C.row_group(backend, L) == 1:
        C.launch(_sum_lanes, backend, (o, x, L, inner, ax4, A), rows, stream=stream)
    elif rows:
        C.launch_rows(_sum, backend, (o, x, L, inner, ax4, A), rows, C.row_group(backend, L), stream)
    return out
