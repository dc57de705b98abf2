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
def _softmax(out, x, scale, L, inner, ax: tk.constexpr):
    r = tk.index(tk.Global, tk.Cartesian)[0]
    lid = tk.index(tk.Local, tk.Linear)
    W = tk.groupsize()[1]
    c0, c1, c2, c3 = row_start(x, r, L, inner)
    m = tk.float32(-math.inf)
    for l in range(lid, L, W):
        m = max(m, tk.float32(at_axis(x, ax, c0, c1, c2, c3, l)) * scale)
    if W > 1:
        m = tk.group_reduce(m, "max")
    s = tk.float32(0)
    for l in range(lid, L, W):
        s += math.exp(tk.float32(at_axis(x, ax, c0, c1, c2, c3, l)) * scale - m)
    if W > 1:
        s = tk.group_reduce(s, "add")
    for l in range(lid, L, W):
        put_axis(out, ax, c0, c1, c2, c3, l, math.exp(tk.float32(at_axis(x, ax, c0, c1, c2, c3, l)) * scale - m) / s)


@tk.kernel
def _sum(out, x, L, inner, ax: tk.constexpr):
    r = tk.index(tk.Global, tk.Cartesian)[0]
    lid = tk.index(tk.Local, tk.Linear)
    W = tk.groupsize()[1]
    c0, c1, c2, c3 = row_start(x, r, L, inner)
    acc = tk.float32(0) + x.dtype(0)
    for l in range(lid, L, W):
        acc += at_axis(x, ax, c0, c1, c2, c3, l)
    if W > 1:
        acc = tk.group_reduce(acc, "add")
    if lid == 0:
        o0, o1, o2, o3 = unflat4(out, r)
        st4(out, o0, o1, o2, o3, acc)


def _axis(fn: str, axis, ndim: int) -> int:
    C.require(isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) and -ndim <= axis < ndim,
              fn, "axis", f"expected an int in [{-ndim}, {ndim}), got {axis!r}")
    return int(axis) % ndim


def _split(shape: tuple, axis: int) -> tuple:
    """(rows, L, inner, padded axis) of the (outer, L, inner) view around ``axis``."""
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    rows = int(np.prod(shape[:axis], dtype=np.int64)) * inner
    return rows, shape[axis], inner, axis + 4 - len(shape)


def softmax(x, axis: int = -1, scale: float = 1.0, out=None, stream=None):
    """``softmax(x * scale)`` along ``axis`` (x float32/float16/bfloat16/float64, rank 1 to 4):
    the maximum is subtracted first (numerically stable); float32 accumulation."""
    fn = "softmax"
    C.require(C.is_array(x), fn, "x", f"expected an array, got {type(x).__name__}")
    backend = C.backend_of(fn, x=x, out=out)
    shape = C.require_rank(x, fn, "x")
    dt = C.require_float(x, fn, "x", backend)
    ax = _axis(fn, axis, len(shape))
    C.require(isinstance(scale, (int, float, np.integer, np.floating)) and not isinstance(scale, bool), fn,
              "scale", f"expected a Python float, got {type(scale).__name__}")
    out = C.output(out, fn, x, shape, dt, backend)
    rows, L, inner, ax4 = _split(shape, ax)
    if L:
        C.launch_rows(_softmax, backend, (out, x, float(scale), L, inner, ax4), rows, C.row_group(backend, L), stream)
    return out


def sum(x, axis: int, out=None, stream=None):
    """The sum of ``x`` along ``axis`` (x's dtype; float32 accumulation for 16-bit floats)."""
    fn = "sum"
    C.require(C.is_array(x), fn, "x", f"expected an array, got {type(x).__name__}")
    backend = C.backend_of(fn, x=x, out=out)
    shape = C.require_rank(x, fn, "x")
    dt = C.require_float(x, fn, "x", backend)
    ax = _axis(fn, axis, len(shape))
    oshape = shape[:ax] + shape[ax + 1:]
    out = C.output(out, fn, x, oshape, dt, backend)
    rows, L, inner, ax4 = _split(shape, ax)
    if rows:
        o = C.view(out, (1,)) if not oshape else out
        C.launch_rows(_sum, backend, (o, x, L, inner, ax4), rows, C.row_group(backend, L), stream)
    return out
