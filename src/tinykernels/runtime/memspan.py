"""Which memory an array argument can reach: byte spans and overlap tests.

A strided array reaches bytes in ``[lo, hi)`` where ``lo`` is its data address plus every
negative stride times ``(n - 1)`` and ``hi`` the address plus every positive one, plus the
item size. Two arrays *may* alias when their spans intersect: cheap and conservative
(interleaved views such as ``x[0::2]`` and ``x[1::2]`` intersect without sharing an element;
:func:`may_alias` asks NumPy for an exact answer on host arrays before saying so).

Device arrays: OpenCL and WebGPU arrays own a whole buffer (no views), so two of them alias
exactly when they share the buffer object; CUDA arrays have device addresses, compared like
host addresses. Used by the launch checks (``tk.Const`` arguments must not alias the others)
and meant for autodiff's checks too.
"""
from __future__ import annotations

import numpy as np


def byte_span(ptr: int, shape, strides, itemsize: int) -> tuple[int, int]:
    """The half-open byte range ``[lo, hi)`` an array of ``shape`` and byte ``strides`` at
    address ``ptr`` reaches; ``(ptr, ptr)`` (empty) when it has no element."""
    lo = hi = ptr
    for n, s in zip(shape, strides):
        if n == 0:
            return ptr, ptr
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + itemsize


def overlapping_axis(shape, strides) -> int | None:
    """The first axis along which an array's elements share memory (stride 0 over an extent
    above 1: ``np.broadcast_to``, ``torch.expand``), else None. As torch's internal-overlap
    test, only the certain case: a kernel writing to such an array would race (the CPU) or
    keep one item's value (the interpreter), so a written one is refused. An empty array shares
    nothing."""
    if 0 in shape:
        return None                                  # no element at all
    return next((d for d, (n, s) in enumerate(zip(shape, strides)) if s == 0 and n > 1), None)


def spans_overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two half-open byte spans share a byte (empty spans share none)."""
    return a[0] < a[1] and b[0] < b[1] and a[0] < b[1] and b[0] < a[1]


def _host_span(a: np.ndarray) -> tuple[int, int]:
    return byte_span(a.__array_interface__["data"][0], a.shape, a.strides, a.itemsize)


def may_alias(a, b) -> bool:
    """Whether two kernel array arguments (NumPy arrays, or device arrays of one backend)
    may share memory. Host arrays: their spans intersect and NumPy cannot prove them
    disjoint (within a bounded amount of work). Device arrays: the same buffer object
    (OpenCL, WebGPU), or intersecting spans of device addresses (CUDA)."""
    if a is b:
        return a.size > 0
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if not spans_overlap(_host_span(a), _host_span(b)):
            return False
        try:
            return bool(np.shares_memory(a, b, max_work=10000))
        except np.exceptions.TooHardError:
            return True
    buf_a, buf_b = getattr(a, "buffer", None), getattr(b, "buffer", None)
    if buf_a is not None or buf_b is not None:
        return buf_a is buf_b and a.size > 0 and b.size > 0
    try:
        sa = byte_span(int(a.ptr), a.shape, a.strides, a.dtype.itemsize)
        sb = byte_span(int(b.ptr), b.shape, b.strides, b.dtype.itemsize)
    except (AttributeError, TypeError):
        return False
    return spans_overlap(sa, sb)
