"""KV-cache writes and device-resident position counters, so a decode step never reads a
position back to the host.

A counter is an int32 array of shape (1,) on the device (:func:`new_counter`);
:func:`kv_append` writes new rows at the position it holds, :func:`counter_add` advances it
and :func:`counter_set` resets it, all as kernels ordered on the stream.
"""
from __future__ import annotations

import numpy as np

import tinykernels as tk

from ..codegen.c import SERIAL_CUTOFF_LOOPS
from . import _common as C
from ._index import dims4, ld4, rows3, st4
from .rope import check_counter

__all__ = ["kv_append", "new_counter", "counter_add", "counter_set"]


@tk.kernel
def _append(cache, rows, pos, guard: tk.constexpr):
    """cache[..., pos[0] + t, j] = rows[..., t, j] (converted to the cache's dtype); a position
    outside the cache is dropped when ``guard`` (else the store's bounds check reports it)."""
    r, j = tk.index(tk.Global, tk.Cartesian)
    c0, c1, c2 = rows3(rows, r)
    p = c2 + pos[0]
    if not guard or (p >= 0 and p < cache.shape[cache.ndim - 2]):
        st4(cache, c0, c1, p, j, ld4(rows, c0, c1, c2, j))


@tk.kernel
def _append_rows(cache, rows, pos, guard: tk.constexpr):
    """Host shape of :func:`_append` (CPU, interpreter): one work item per row, the position
    test once per row and a unit-stride copy loop the C compiler vectorizes. The ndrange is
    the rows' three padded leading extents, so a row's coordinates are the work item's own
    (a flat row index took two integer divisions per row: 10% of an in-cache copy)."""
    c0, c1, c2 = tk.index(tk.Global, tk.Cartesian)
    n0, n1, n2, D = dims4(rows)
    p = c2 + pos[0]
    if not guard or (p >= 0 and p < cache.shape[cache.ndim - 2]):
        for j in range(D):
            st4(cache, c0, c1, p, j, ld4(rows, c0, c1, c2, j))


@tk.kernel
def _append_split(cache, rows, pos, guard: tk.constexpr, chunk):
    """:func:`_append_rows` for a few long rows: work item ``(r, k)`` copies elements
    ``k * chunk`` to ``(k + 1) * chunk - 1`` of row ``r``, so one long row (a 64 MiB single
    token of a wide cache) spreads over the threads instead of running on one."""
    r, k = tk.index(tk.Global, tk.Cartesian)
    c0, c1, c2 = rows3(rows, r)
    n0, n1, n2, D = dims4(rows)
    p = c2 + pos[0]
    if not guard or (p >= 0 and p < cache.shape[cache.ndim - 2]):
        lo = k * chunk
        for j in range(lo, min(lo + chunk, D)):
            st4(cache, c0, c1, p, j, ld4(rows, c0, c1, c2, j))


SPLIT_MIN_BYTES = 64 << 10
"""The least bytes of a row piece :func:`_append_split` gives one work item."""


def _append_shape(backend, rs: tuple, itemsize: int) -> tuple:
    """``(kernel, extra arguments, ndrange)`` of the host shape for rows of shape ``rs``:
    :func:`_append_rows` (one item per row), or :func:`_append_split` on several threads
    when there are fewer rows than a launch needs to leave the calling thread (the CPU
    runs a loop kernel of under ``SERIAL_CUTOFF_LOOPS`` items serially) and the rows hold
    that many pieces of ``SPLIT_MIN_BYTES``: a single 64 MiB row ran on one thread."""
    n = 1
    for e in rs[:-1]:
        n *= e
    if getattr(backend, "threads", 1) < 2 or n >= SERIAL_CUTOFF_LOOPS:
        return _append_rows, (), ((1, 1, 1) + rs)[-4:-1]     # (the rows' padded leading extents)
    parts = min(-(-SERIAL_CUTOFF_LOOPS // n), rs[-1] * itemsize // SPLIT_MIN_BYTES)
    chunk = (-(-rs[-1] // parts) + 63) // 64 * 64 if parts > 1 else rs[-1]   # (whole cache lines)
    pieces = -(-rs[-1] // chunk)
    if n * pieces < SERIAL_CUTOFF_LOOPS:
        return _append_rows, (), ((1, 1, 1) + rs)[-4:-1]
    return _append_split, (chunk,), (n, pieces)


@tk.kernel
def _counter(c, v, add: tk.constexpr):
    if add:
        c[0] += v
    else:
        c[0] = v


def new_counter(value: int = 0, backend=None, like=None):
    """A device-resident int32 counter [1] holding ``value``, on ``backend`` (or ``like``'s
    backend and kind: NumPy, torch or tk.Array)."""
    value = _int("new_counter", "value", value)
    if like is not None:
        backend = C.backend_of("new_counter", like=like)
        c = C.new_like(like, (1,), np.int32, backend)
        counter_set(c, value)
        return c
    return tk.full((1,), value, np.int32, backend=backend)


def _int(fn: str, name: str, v) -> int:
    C.require(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and -(1 << 31) <= v < (1 << 31),
              fn, name, f"expected an int32 value, got {v!r}")
    return int(v)


def counter_add(counter, n: int = 1, stream=None):
    """``counter[0] += n`` on the device; returns ``counter``."""
    host = C.host_args(counter) if stream is None and type(n) is int and -(1 << 31) <= n < (1 << 31) else None
    if host is not None and host[1][0].dtype == _I32 and host[1][0].shape == (1,):
        _counter.instance(host[0])(host[1][0], np.int32(n), True, ndrange=1)     # (the host fast path)
        return counter
    check_counter("counter_add", "counter", counter)
    backend = C.backend_of("counter_add", stream=stream, counter=counter)
    C.launch(_counter, backend, (counter, np.int32(_int("counter_add", "n", n)), True), 1, stream=stream)
    return counter


def counter_set(counter, value: int = 0, stream=None):
    """``counter[0] = value`` on the device (``value=0``: reset); returns ``counter``."""
    check_counter("counter_set", "counter", counter)
    backend = C.backend_of("counter_set", stream=stream, counter=counter)
    C.launch(_counter, backend, (counter, np.int32(_int("counter_set", "value", value)), False), 1, stream=stream)
    return counter


KV_DTYPES = ("float32", "float16", "bfloat16")

_I32 = np.dtype(np.int32)
_FAST_KV = (np.dtype(np.float32), np.dtype(np.float16))


def _append_fast(cache, rows, counter, stream) -> bool:
    """The host fast path of :func:`kv_append` (as ``elementwise._flat_fast``): host arrays
    (``_common.host_args``), float32/float16 ``cache`` and ``rows`` of fitting shapes (no empty
    extent), an int32 counter of shape (1,), the default stream and the one-item-per-row
    kernel; the same launch as the general path, which every other call takes. False where it
    does not apply."""
    host = C.host_args(cache, rows, counter) if stream is None and cache is not None else None
    if host is None:
        return False
    backend, (hc, hr, hn) = host
    cs, rs = hc.shape, hr.shape
    if not (2 <= len(rs) == len(cs) <= C.MAX_RANK and rs[:-2] == cs[:-2] and rs[-1] == cs[-1] and hr.size
            and hc.dtype in _FAST_KV and hr.dtype in _FAST_KV and hn.dtype == _I32 and hn.shape == (1,)):
        return False
    if C.row_group(backend, rs[-1]) != 1:
        return False
    kernel, extra, nd = _append_shape(backend, rs, hc.itemsize)
    kernel.instance(backend)(hc, hr, hn, not C.is_debug(backend), *extra, ndrange=nd)
    return True


def kv_append(cache, rows, counter, stream=None):
    """Write ``rows`` [..., n, D] into ``cache`` [..., max_len, D] (same leading extents) at
    positions ``counter[0] .. counter[0] + n - 1`` along the second-to-last axis, converting
    to the cache's dtype (float32 -> float32, float32 -> float16, ...). Positions outside
    ``0 .. max_len - 1`` (past the end, or negative from a counter set below 0 or wrapped
    past 2**31 - 1) are dropped (an ``IndexError`` in debug mode). The counter is not advanced:
    call :func:`counter_add` once all layers have appended. Returns ``cache``."""
    if _append_fast(cache, rows, counter, stream):
        return cache
    fn = "kv_append"
    backend = C.backend_of(fn, stream=stream, cache=cache, rows=rows, counter=counter)
    for name, a in (("cache", cache), ("rows", rows)):
        C.require_array(a, fn, name)
        C.require_float(a, fn, name, backend, KV_DTYPES)
    cs = C.require_rank(cache, fn, "cache", 2)
    rs = C.require_rank(rows, fn, "rows", 2)
    C.require(len(rs) == len(cs) and rs[:-2] == cs[:-2] and rs[-1] == cs[-1], fn, "rows",
              f"expected shape {C.shape_str(cs[:-2] + (None, cs[-1]))} (the cache's {C.shape_str(cs)} with "
              f"any row count), got shape {C.shape_str(rs)}")
    check_counter(fn, "counter", counter)
    n = int(np.prod(rs[:-1], dtype=np.int64))
    args = (cache, rows, counter, not C.is_debug(backend))
    if n and rs[-1] and C.row_group(backend, rs[-1]) == 1:
        kernel, extra, nd = _append_shape(backend, rs, C.dtype_of(cache).itemsize)
        C.launch(kernel, backend, args + extra, nd, stream=stream)
    elif n and rs[-1]:
        C.launch(_append, backend, args, (n, rs[-1]), stream=stream)
    return cache
