"""Data movement and selection: ``argmax`` (1-D), ``gather`` (embedding lookup),
``transpose`` (2-D through local-memory tiles; any permutation up to rank 4) and ``repeat``."""
from __future__ import annotations

import math

import numpy as np

import tinykernels as tk

from . import _common as C
from ._index import dims4, grid3, ld4, lead2, rows3, st4

__all__ = ["argmax", "gather", "transpose", "repeat"]

TILE = 16


@tk.kernel
def _argmax(out, x, T: tk.constexpr, LOW: tk.constexpr):
    """One workgroup; each item scans a strided share, then three group reductions: the
    first NaN (NumPy returns it), else the maximum and the first index holding it. ``T``: the
    compared type and ``LOW`` its lowest value (:func:`_common.compare_type`: float32, float64
    for float64 ``x``, an integer type for integer and bool ``x``)."""
    lid = tk.index(tk.Local, tk.Linear)
    W = tk.groupsize()[0]
    N = x.shape[0]
    best = T(LOW)
    bi = tk.int32(N)
    nan_i = tk.int32(N)
    for j in range(lid, N, W):
        v = T(x[j])
        if v != v:
            nan_i = min(nan_i, tk.int32(j))
        elif v > best or bi == N:
            best = v
            bi = tk.int32(j)
    if W > 1:
        nan_i = tk.group_reduce(nan_i, "min")
        m = tk.group_reduce(best, "max")
        bi = tk.group_reduce(bi if best == m else tk.int32(N), "min")
    if lid == 0:
        out[0] = nan_i if nan_i < N else bi


ARGMAX_LANES = 16        # lanes of the host argmax (one AVX-512 register of float32)
ARGMAX_CHUNK = 1 << 16   # elements per work item of the host argmax (longer arrays: several items)


@tk.func
def argmax_range(x, lo, hi, NI, T, LOW):
    """The host argmax of ``x[lo:hi]`` (``lo < hi``) by one work item: ``(m, r, nan_i)``, its
    largest value, the first index holding it, and its first NaN's index (``NI`` if none).
    ``ARGMAX_LANES`` lanes, lane ``u`` scanning the elements ``(j - lo) % LANES == u`` in order
    with selects and min only (a loop the C compiler vectorizes): its largest value and first
    index of it, and its first NaN. A lane starts at its first element with the value ``LOW``
    (-inf; an integer type's smallest value): if that element is ``LOW`` it is the first one;
    if it is NaN, the NaN decides the result anyway. The lanes then combine: the first NaN,
    else the smallest index among the lanes holding the maximum."""
    L = ARGMAX_LANES
    best = tk.private(T, (L,))
    bi = tk.private(tk.int32, (L,))
    ni = tk.private(tk.int32, (L,))
    for u in range(L):
        best[u] = T(LOW)
        bi[u] = tk.select(lo + u < hi, tk.int32(lo + u), NI)
        ni[u] = NI
    full = lo + (hi - lo) - (hi - lo) % L
    for j0 in range(lo, full, L):
        for u in range(L):
            v = T(x[j0 + u])
            better = v > best[u]
            best[u] = tk.select(better, v, best[u])
            bi[u] = tk.select(better, tk.int32(j0 + u), bi[u])
            ni[u] = min(ni[u], tk.select(v != v, tk.int32(j0 + u), NI))
    for j in range(full, hi):
        u = j - full
        v = T(x[j])
        better = v > best[u]
        best[u] = tk.select(better, v, best[u])
        bi[u] = tk.select(better, tk.int32(j), bi[u])
        ni[u] = min(ni[u], tk.select(v != v, tk.int32(j), NI))
    nan_i = NI
    m = T(LOW)
    for u in range(L):
        nan_i = min(nan_i, ni[u])
        if bi[u] < NI:
            m = max(m, best[u])
    r = NI
    for u in range(L):
        if bi[u] < NI and best[u] == m:
            r = min(r, bi[u])
    return m, r, nan_i


@tk.kernel
def _argmax_lanes(out, x: tk.Const, T: tk.constexpr, LOW: tk.constexpr):
    """Host shape of :func:`_argmax` (CPU, interpreter) for one chunk: one work item."""
    NI = tk.int32(x.shape[0])
    m, r, nan_i = argmax_range(x, 0, x.shape[0], NI, T, LOW)
    out[0] = nan_i if nan_i < NI else r


@tk.kernel
def _argmax_chunks(cm, ci, cn, x: tk.Const, T: tk.constexpr, LOW: tk.constexpr):
    """Host argmax of a long ``x``: work item ``c`` takes ``x[c * ARGMAX_CHUNK:][:ARGMAX_CHUNK]``
    (the items run on all threads; one item scanned the whole array on one thread) and
    writes its maximum, first index of it and first NaN to ``cm``, ``ci``, ``cn``."""
    c = tk.index()
    N = x.shape[0]
    lo = c * ARGMAX_CHUNK
    m, r, nan_i = argmax_range(x, lo, min(lo + ARGMAX_CHUNK, N), tk.int32(N), T, LOW)
    cm[c] = m
    ci[c] = r
    cn[c] = nan_i


@tk.kernel
def _argmax_combine(out, cm: tk.Const, ci: tk.Const, cn: tk.Const, N, T: tk.constexpr, LOW: tk.constexpr):
    """The chunks' results in order, as the lanes combine: the first NaN, else the first
    index among the chunks holding the maximum."""
    nan_i = tk.int32(N)
    m = T(LOW)
    for c in range(cm.shape[0]):
        nan_i = min(nan_i, cn[c])
        m = max(m, cm[c])
    r = tk.int32(N)
    for c in range(cm.shape[0]):
        if cm[c] == m:
            r = min(r, ci[c])
    out[0] = nan_i if nan_i < N else r


@tk.kernel
def _gather(out, table: tk.Const, idx: tk.Const, guard: tk.constexpr):
    n, j = tk.index(tk.Global, tk.Cartesian)
    t = idx[n]
    if guard and (t < 0 or t >= table.shape[0]):
        out[n, j] = out.dtype(0)
    else:
        out[n, j] = table[t, j]


@tk.kernel
def _gather_copy(out, table: tk.Const, idx: tk.Const, guard: tk.constexpr):
    """CPU shape of :func:`_gather` for large outputs: one work item per element, a plain copy
    (an index outside the table reads row 0; :func:`_gather_zero` then clears those rows), so
    the CPU loads ``idx[n]`` once per row and streams each row straight from the table
    (docs/cpu.md: streaming stores)."""
    n, j = tk.index(tk.Global, tk.Cartesian)
    t = idx[n]
    if guard:
        out[n, j] = table[tk.select(t >= 0 and t < table.shape[0], t, 0), j]
    else:
        out[n, j] = table[t, j]


@tk.kernel
def _gather_zero(out, table: tk.Const, idx: tk.Const):
    """The rows of ``out`` whose index is outside the table, zeroed (after :func:`_gather_copy`)."""
    n = tk.index()
    t = idx[n]
    if t < 0 or t >= table.shape[0]:
        for j in range(out.shape[1]):
            out[n, j] = out.dtype(0)


COPY_MIN_BYTES = 4 << 20    # CPU: outputs from this size take _gather_copy (two launches when not debug)


@tk.kernel
def _gather_rows(out, table: tk.Const, idx: tk.Const, guard: tk.constexpr):
    """Host shape of :func:`_gather` (CPU, interpreter): one work item per output row, the
    index test once per row and a unit-stride copy loop the C compiler vectorizes."""
    n = tk.index()
    t = idx[n]
    if guard and (t < 0 or t >= table.shape[0]):
        for j in range(out.shape[1]):
            out[n, j] = out.dtype(0)
    else:
        for j in range(out.shape[1]):
            out[n, j] = table[t, j]


@tk.kernel(unsafe_indices=True)
def _transpose2d(out, x: tk.Const):
    """out = x.T through a (TILE, TILE + 1) tile: both the read and the write are along rows."""
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(x.dtype, (TILE, TILE + 1))
    i = gi * TILE + li
    j = gj * TILE + lj
    if i < x.shape[0] and j < x.shape[1]:
        tile[li, lj] = x[i, j]
    tk.synchronize()
    oi = gj * TILE + li
    oj = gi * TILE + lj
    if oi < out.shape[0] and oj < out.shape[1]:
        out[oi, oj] = tile[lj, li]


@tk.kernel
def _transpose_block(out, x: tk.Const, i0, i1, j0, j1):
    """Host shape of :func:`_transpose2d` (interpreter; the CPU's partial tiles) for the rows
    ``i0:i1`` and columns ``j0:j1`` of ``x``: one work item per (TILE, TILE) tile of that
    rectangle, copied directly (no local memory, no barrier): the tile's source rows and
    its destination rows stay in the L1 cache while it is copied."""
    ti, tj = tk.index(tk.Global, tk.Cartesian)
    a = i0 + ti * TILE
    b = j0 + tj * TILE
    ni = min(TILE, i1 - a)
    nj = min(TILE, j1 - b)
    for jj in range(nj):
        for ii in range(ni):
            out[b + jj, a + ii] = x[a + ii, b + jj]


@tk.kernel
def _transpose_lines(out, x: tk.Const, r0):
    """CPU shape of :func:`_transpose2d` for whole tiles, the first at row ``r0`` of ``x``:
    the work items of a group run as SIMD lanes, and each row of the tile they write
    (``out[gj * TILE + li, r0 + gi * TILE + lj]``, TILE elements, one cache line of
    float32) streams with a non-temporal store where it starts a cache line, which the
    host makes every row do by its choice of ``r0`` (docs/cpu.md, streaming stores)."""
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(x.dtype, (TILE, TILE + 1))
    tile[li, lj] = x[r0 + gi * TILE + li, gj * TILE + lj]
    tk.synchronize()
    out[gj * TILE + li, r0 + gi * TILE + lj] = tile[lj, li]


@tk.kernel
def _transpose_edges(out, x: tk.Const, r0, r1, c1):
    """The part of ``x`` that :func:`_transpose_lines` leaves (its tiles cover the rows
    ``r0:r1`` and columns ``:c1``), as :func:`_transpose_block` in one launch: one work item
    per tile of the rows ``:r0``, then of the rows ``r1:``, then of the columns ``c1:`` of
    the rows ``r0:r1``."""
    t = tk.index()
    R = x.shape[0]
    Cn = x.shape[1]
    nc = (Cn + TILE - 1) // TILE
    top = (r0 + TILE - 1) // TILE * nc
    bottom = (R - r1 + TILE - 1) // TILE * nc
    i0 = r0
    i1 = r1
    j0 = c1
    u = t - top - bottom
    w = 1
    if t < top:
        i0 = 0
        i1 = r0
        j0 = 0
        u = t
        w = nc
    elif t < top + bottom:
        i0 = r1
        i1 = R
        j0 = 0
        u = t - top
        w = nc
    a = i0 + u // w * TILE
    b = j0 + u % w * TILE
    ni = min(TILE, i1 - a)
    nj = min(TILE, Cn - b)
    for jj in range(nj):
        for ii in range(ni):
            out[b + jj, a + ii] = x[a + ii, b + jj]


def _line_shift(out, dt: np.dtype, rows: int) -> int:
    """The first row of ``x`` whose column of the transposed output ``out`` (host memory,
    ``rows`` elements per row) starts a 64-byte cache line, so that tiles from there write
    whole lines (0 when ``out`` is not on the host, or its rows are not whole lines)."""
    h = C._arr.as_host_ndarray(out)
    if h is None or (rows * dt.itemsize) % 64 or dt.itemsize > 64:
        return 0
    addr = h.__array_interface__["data"][0]
    if addr % dt.itemsize:
        return 0
    return (-addr) % 64 // dt.itemsize % TILE


def _transpose_cpu(out, x, dt: np.dtype, backend, stream) -> None:
    """``out = x.T`` on the CPU: whole tiles by :func:`_transpose_lines`, aligned so their
    output rows start cache lines; the rows before and after them and the last partial
    column of tiles by :func:`_transpose_edges`."""
    R, Cn = C.shape_of(x)
    r0 = min(_line_shift(out, dt, R), R)
    ni, nj = (R - r0) // TILE, Cn // TILE
    if ni == 0 or nj == 0:
        r0, ni, nj = 0, 0, 0
    r1, c1 = r0 + ni * TILE, nj * TILE
    if ni:
        C.launch(_transpose_lines, backend, (out, x, r0), (ni * TILE, nj * TILE), (TILE, TILE), stream)
    nc = -(-Cn // TILE)
    edges = (-(-r0 // TILE) + -(-(R - r1) // TILE)) * nc + (-(-(r1 - r0) // TILE) if c1 < Cn else 0)
    if edges:       # one launch: under load every extra launch waits for a descheduled thread
        C.launch(_transpose_edges, backend, (out, x, r0, r1, c1), edges, stream=stream)


@tk.func
def pick(k, c0, c1, c2, c3):
    if k == 0:
        return c0
    elif k == 1:
        return c1
    elif k == 2:
        return c2
    else:
        return c3


@tk.kernel
def _permute(out, x: tk.Const, i0: tk.constexpr, i1: tk.constexpr, i2: tk.constexpr, i3: tk.constexpr):
    """out[c] = x[c'] with x's padded coordinate d equal to out's coordinate i_d."""
    t, c2, j = tk.index(tk.Global, tk.Cartesian)
    c0, c1 = lead2(out, t)
    v = ld4(x, pick(i0, c0, c1, c2, j), pick(i1, c0, c1, c2, j), pick(i2, c0, c1, c2, j), pick(i3, c0, c1, c2, j))
    st4(out, c0, c1, c2, j, v)


@tk.kernel
def _repeat(out, x: tk.Const, reps, ax: tk.constexpr):
    t, c2, j = tk.index(tk.Global, tk.Cartesian)
    c0, c1 = lead2(out, t)
    if ax == 0:
        v = ld4(x, c0 // reps, c1, c2, j)
    elif ax == 1:
        v = ld4(x, c0, c1 // reps, c2, j)
    elif ax == 2:
        v = ld4(x, c0, c1, c2 // reps, j)
    else:
        v = ld4(x, c0, c1, c2, j // reps)
    st4(out, c0, c1, c2, j, v)


@tk.kernel
def _repeat_rows(out, x: tk.Const, reps, ax: tk.constexpr):
    """Host shape of :func:`_repeat` for a leading axis (``ax < 3``): one work item per output
    row, its source row found once, then a unit-stride copy loop."""
    r = tk.index()
    c0, c1, c2 = rows3(out, r)
    n0, n1, n2, D = dims4(out)
    if ax == 0:
        c0 = c0 // reps
    elif ax == 1:
        c1 = c1 // reps
    else:
        c2 = c2 // reps
    o0, o1, o2 = rows3(out, r)
    for j in range(D):
        st4(out, o0, o1, o2, j, ld4(x, c0, c1, c2, j))


def _grid(shape):
    return (int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1]))


_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _argmax_fast(x, out) -> bool:
    """The host fast path of :func:`argmax` (as ``_common.host_same``): host ``x`` [n] (a
    float dtype, 0 < n <= ARGMAX_CHUNK) and ``out`` (int32, 0-d) on one CPU backend, not
    sharing memory: the general path's ``_argmax_lanes`` launch; ``out`` None: a new one like
    ``x`` (``_common.host_new``). The caller passes only calls with the default stream;
    the result, or None where it does not apply."""
    host = C.host_args(out, x)
    if host is None:
        return None
    backend, (ho, hx) = host
    if hx.ndim != 1 or not 0 < hx.size <= ARGMAX_CHUNK or hx.dtype not in C.FAST_FLOATS \
            or C.ROW_GROUP not in (None, 1):
        return None
    res, ho = (out, ho) if ho is not None else C.host_new(x, (), _INDEX_DTYPES[0])
    if ho.shape or ho.dtype != _INDEX_DTYPES[0] or C.may_share_memory(ho, hx):
        return None
    T = C.COMPUTE_TYPES.get(hx.dtype, C.F32_TYPE)
    _argmax_lanes.instance(backend)(ho.reshape(1), hx, T, -math.inf, ndrange=1)
    return res


def argmax(x, out=None, stream=None):
    """The index of the largest element of the 1-D array ``x``, as an int32 0-d array: the
    first one on ties, and the first NaN if there is one (as NumPy). ``x``: any float
    (float8 too), integer or bool dtype the backend supports (floats compared in float32,
    float64 as float64; integers in their own type, those narrower than 32 bits and bool as
    int32: :func:`_common.compare_type`)."""
    res = _argmax_fast(x, out) if stream is None else None
    if res is not None:
        return res
    fn = "argmax"
    C.require_array(x, fn, "x")
    backend = C.backend_of(fn, stream=stream, x=x, out=out)
    (n,) = C.require_rank(x, fn, "x", 1, 1)
    T, LOW = C.compare_type(C.require_float(x, fn, "x", backend, C.FLOATS + C.FP8 + C.INTS))
    C.require(n > 0, fn, "x", "expected a non-empty array (argmax of an empty sequence), got shape (0,)")
    out = C.output(out, fn, x, (), np.int32, backend)
    W = C.row_group(backend, n)
    if W == 1 and n <= ARGMAX_CHUNK:
        C.launch(_argmax_lanes, backend, (C.view(out, (1,)), x, T, LOW), 1, stream=stream)
    elif W == 1:
        nc = -(-n // ARGMAX_CHUNK)
        cm, ci, cn = (C.new_like(x, (nc,), dt, backend) for dt in (T, np.int32, np.int32))
        C.launch(_argmax_chunks, backend, (cm, ci, cn, x, T, LOW), nc, stream=stream)
        C.launch(_argmax_combine, backend, (C.view(out, (1,)), cm, ci, cn, n, T, LOW), 1, stream=stream)
    else:
        C.launch(_argmax, backend, (C.view(out, (1,)), x, T, LOW), W, W, stream)
    return out


def _gather_fast(table, indices, out) -> bool:
    """The host fast path of :func:`gather` for small outputs (under ``COPY_MIN_BYTES``; the
    larger ones are a copy per row, where the host time does not matter): host ``table`` [V,
    D] of a float dtype, ``indices`` [N] int32/int64 and ``out`` [N, D] of table's dtype on
    one CPU backend, ``out`` C-contiguous sharing no memory with them: the general path's
    ``_gather_rows`` launch; ``out`` None: a new one like ``table`` (``_common.host_new``).
    The caller passes only calls with the default stream; the result, or None where it does
    not apply."""
    host = C.host_args(out, table, indices)
    if host is None:
        return None
    backend, (ho, ht, hi) = host
    if ht.ndim != 2 or hi.ndim != 1 or ht.dtype not in C.FAST_FLOATS or hi.dtype not in _INDEX_DTYPES \
            or not hi.shape[0] * ht.shape[1] or hi.shape[0] * ht.shape[1] * ht.itemsize >= COPY_MIN_BYTES \
            or C.ROW_GROUP not in (None, 1):
        return None
    oshape = (hi.shape[0], ht.shape[1])
    res, ho = (out, ho) if ho is not None else C.host_new(table, oshape, ht.dtype)
    if ho.shape != oshape or ho.dtype is not ht.dtype or ho.nbytes >= COPY_MIN_BYTES or not ho.flags.c_contiguous \
            or C.may_share_memory(ho, ht) or C.may_share_memory(ho, hi):
        return None
    _gather_rows.instance(backend)(ho, ht, hi, not C.is_debug(backend), ndrange=hi.shape[0])
    return res


def gather(table, indices, out=None, stream=None):
    """``table[indices]``: rows of ``table`` [V, D] at ``indices`` (int32 or int64 [N]) ->
    [N, D]. An index outside [0, V) is an ``IndexError`` in debug mode; otherwise its output
    row is zero (never a read outside the table)."""
    res = _gather_fast(table, indices, out) if stream is None else None
    if res is not None:
        return res
    fn = "gather"
    backend = C.backend_of(fn, stream=stream, table=table, indices=indices, out=out)
    C.require_array(table, fn, "table")
    C.require_array(indices, fn, "indices")
    V, D = C.require_rank(table, fn, "table", 2, 2)
    (N,) = C.require_rank(indices, fn, "indices", 1, 1)
    idt = C.require_dtype(indices, fn, "indices", ("int32", "int64"))
    C.require_supported(backend, idt, fn, "indices")
    dt = C.dtype_of(table)
    C.require_supported(backend, dt, fn, "table")
    out = C.output(out, fn, table, (N, D), dt, backend, reads_across={"table": table, "indices": indices})
    if N and D:
        guard = not C.is_debug(backend)
        args = (out, table, indices, guard)
        if backend.name == "CPU" and V and N * D * np.dtype(dt).itemsize >= COPY_MIN_BYTES:
            C.launch(_gather_copy, backend, args, (N, D), stream=stream)
            if guard:
                C.launch(_gather_zero, backend, (out, table, indices), N, stream=stream)
        elif C.row_group(backend, D) == 1:
            C.launch(_gather_rows, backend, args, N, stream=stream)
        else:
            C.launch(_gather, backend, args, (N, D), stream=stream)
    return out


def _transpose_fast(x, axes, out):
    """The host fast path of the 2-D :func:`transpose` (as ``_common.host_same``): host ``x``
    [R, C] of a float dtype (any strides, not empty) and ``out`` [C, R] of its dtype,
    C-contiguous, sharing no memory with it (or not given: a new one like ``x``), on one CPU
    backend, ``axes`` None or (1, 0): the general path's ``_transpose_cpu``. The caller passes
    only calls with the default stream; the result, or None where it does not apply."""
    host = C.host_args(out, x) if (axes is None or type(axes) is tuple and axes == (1, 0)
                                   and type(axes[0]) is int and type(axes[1]) is int) \
        and C.ROW_GROUP is None else None
    if host is None:
        return None
    backend, (ho, hx) = host
    if hx.ndim != 2 or not hx.size or hx.dtype not in C.FAST_FLOATS:
        return None
    oshape = hx.shape[::-1]
    res, ho = (out, ho) if ho is not None else C.host_new(x, oshape, hx.dtype)
    if ho.shape != oshape or ho.dtype is not hx.dtype or not ho.flags.c_contiguous or C.may_share_memory(ho, hx):
        return None
    _transpose_cpu(ho, hx, hx.dtype, backend, None)
    return res


def transpose(x, axes=None, out=None, stream=None):
    """``np.transpose(x, axes)`` for rank 1 to 4 (``axes=None`` reverses them), written to a
    new C-contiguous array; a 2-D transpose moves (16, 16) tiles through local memory."""
    res = _transpose_fast(x, axes, out) if stream is None else None
    if res is not None:
        return res
    fn = "transpose"
    C.require_array(x, fn, "x")
    backend = C.backend_of(fn, stream=stream, x=x, out=out)
    shape = C.require_rank(x, fn, "x")
    dt = C.dtype_of(x)
    C.require_supported(backend, dt, fn, "x")
    n = len(shape)
    axes = tuple(range(n))[::-1] if axes is None else axes
    if isinstance(axes, np.ndarray) and axes.ndim == 1:        # NumPy takes an array of axes too
        axes = tuple(axes.tolist())
    ok = isinstance(axes, (tuple, list)) and all(C.is_int(a) for a in axes)
    C.require(ok and sorted(int(a) % n if -n <= a < n else -1 for a in axes) == list(range(n)), fn, "axes",
              f"expected a permutation of the {n} axes, got {axes!r}")
    axes = tuple(int(a) % n for a in axes)
    oshape = tuple(shape[a] for a in axes)
    out = C.output(out, fn, x, oshape, dt, backend, reads_across={"x": x})
    if 0 in shape:
        return out
    if axes == (1, 0) and backend.name == "CPU" and C.ROW_GROUP is None:
        _transpose_cpu(out, x, dt, backend, stream)
    elif axes == (1, 0) and C.row_group(backend, shape[1]) == 1:
        args = (out, x, 0, shape[0], 0, shape[1])
        C.launch(_transpose_block, backend, args, (-(-shape[0] // TILE), -(-shape[1] // TILE)), stream=stream)
    elif axes == (1, 0):
        grid = (-(-shape[0] // TILE) * TILE, -(-shape[1] // TILE) * TILE)
        C.launch(_transpose2d, backend, (out, x), grid, (TILE, TILE), stream)
    else:
        pad = 4 - n
        axes4 = tuple(range(pad)) + tuple(a + pad for a in axes)
        inv = [0] * 4
        for i, a in enumerate(axes4):
            inv[a] = i
        C.launch(_permute, backend, (out, x, *inv), grid3(oshape), stream=stream)
    return out


def repeat(x, repeats: int, axis=None, out=None, stream=None):
    """``np.repeat(x, repeats, axis)`` with an int ``repeats`` >= 0 (rank 1 to 4; ``axis=None``
    repeats the elements of ``x`` flattened in C order into a 1-D result, as NumPy does, for
    ``x`` of rank 0 to 4)."""
    fn = "repeat"
    C.require_array(x, fn, "x")
    backend = C.backend_of(fn, stream=stream, x=x, out=out)
    shape = C.require_rank(x, fn, "x", lo=0 if axis is None else 1)
    dt = C.dtype_of(x)
    C.require_supported(backend, dt, fn, "x")
    C.require(isinstance(repeats, (int, np.integer)) and not isinstance(repeats, bool) and repeats >= 0, fn,
              "repeats", f"expected an int >= 0, got {repeats!r}")
    x_in = x
    if axis is None:
        if len(shape) != 1:          # NumPy: the C-order flattening (a copy for a strided view)
            shape = (math.prod(shape),)
            x = C.view(C.contiguous_input(x), shape)
        axis = 0
    n = len(shape)
    C.require(C.is_int(axis) and -n <= axis < n, fn, "axis",
              f"expected an int in [{-n}, {n}), got {axis!r}")
    axis = int(axis) % n
    oshape = shape[:axis] + (shape[axis] * int(repeats),) + shape[axis + 1:]
    out = C.output(out, fn, x_in, oshape, dt, backend, reads_across={"x": x_in})
    if 0 not in oshape:
        ax4 = axis + 4 - n
        if ax4 < 3 and C.row_group(backend, oshape[-1]) == 1:
            C.launch(_repeat_rows, backend, (out, x, int(repeats), ax4), _grid(oshape)[0], stream=stream)
        else:
            C.launch(_repeat, backend, (out, x, int(repeats), ax4), grid3(oshape), stream=stream)
    return out
