"""Packing halo planes into contiguous buffers, with tinykernels kernels.

A box of an array (a tuple of index ranges, one per dimension) is copied into a 1-D
buffer in row-major order by :data:`pack_box` and back by :data:`unpack_box`; the
kernels are launched on the box's ranges, so ``tk.index(tk.Global, tk.Cartesian)`` is
the array index and ``tk.index()`` the position in the buffer. They serve every dtype,
rank (1-3) and backend.

:class:`Staging` holds, per array backend, the buffers a message goes through: on host
backends the packed buffer itself is handed to MPI; on device backends it is copied to
a host buffer first (and back after receiving), unless the MPI library is CUDA-aware
and the array is on CUDA, where the device buffer goes to MPI directly.
"""
from __future__ import annotations

import numpy as np

import tinykernels as tk

from .topology import Range, box_size


@tk.kernel
def pack_box(buf, A: tk.Const):
    """``buf[k] = A[I]`` for the k-th point ``I`` of the ndrange (the box), row-major."""
    buf[tk.index()] = A[tk.index(tk.Global, tk.Cartesian)]


@tk.kernel
def unpack_box(A, buf: tk.Const):
    """``A[I] = buf[k]``: the inverse of :data:`pack_box`."""
    A[tk.index(tk.Global, tk.Cartesian)] = buf[tk.index()]


@tk.kernel
def shift_box1(A, o0: int):
    """``A[i + o0] = A[i]`` over the ndrange (a box whose image does not overlap it)."""
    (i,) = tk.index(tk.Global, tk.Cartesian)
    A[i + o0] = A[i]


@tk.kernel
def shift_box2(A, o0: int, o1: int):
    """The 2-D :data:`shift_box1`."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    A[i + o0, j + o1] = A[i, j]


@tk.kernel
def shift_box3(A, o0: int, o1: int, o2: int):
    """The 3-D :data:`shift_box1`."""
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    A[i + o0, j + o1, k + o2] = A[i, j, k]


SHIFT_BOX = {1: shift_box1, 2: shift_box2, 3: shift_box3}


def ndrange_of(box: tuple[Range, ...]) -> tuple[range, ...]:
    """The box as a launch ndrange."""
    return tuple(range(a, b) for a, b in box)


class Staging:
    """The buffers and kernels of one backend (reused across calls, grown on demand)."""

    def __init__(self, backend, cuda_aware: bool):
        self.backend = backend
        self.is_host = bool(getattr(backend, "is_host", False))
        self.direct = self.is_host or (cuda_aware and getattr(backend, "name", "") == "CUDA")
        self._pack = pack_box(backend)
        self._unpack = unpack_box(backend)
        self._shift = {r: k(backend) for r, k in SHIFT_BOX.items()}
        self._bufs: dict = {}

    def buffers(self, key, dtype, n: int):
        """``(device buffer, host buffer or None)`` of ``n`` elements of ``dtype`` for slot ``key``."""
        k = (key, np.dtype(dtype).str, n)
        b = self._bufs.get(k)
        if b is None:
            dev = tk.empty((max(n, 1),), dtype, backend=self.backend)
            if self.is_host:
                dev = dev.numpy()      # a NumPy array: the launcher's fast path, and MPI's buffer
            host = None if self.direct else np.empty(max(n, 1), dtype)
            b = self._bufs[k] = (dev, host)
        return b

    def pack(self, A, box, key, stream):
        """Queue the packing of ``A[box]`` on ``stream``; returns the buffers.

        On host backends the kernel runs right away on the calling thread (the caller has
        finished ``stream`` first): no hand-off to a stream's worker thread and back.
        """
        dev, host = self.buffers(key, A.dtype, box_size(box))
        self._pack(dev, A, ndrange=ndrange_of(box), stream=None if self.is_host else stream)
        return dev, host

    def message(self, dev, host):
        """The buffer MPI sends from or receives into (call after the stream finished)."""
        return dev if self.direct else host

    def to_host(self, dev, host, stream) -> None:
        """Device -> host staging copy of a packed buffer (blocking; no-op when direct)."""
        if not self.direct:
            tk.copyto(host, dev, stream=stream).wait()      # MPI reads it next

    def from_host(self, dev, host, stream) -> None:
        """Host -> device staging copy of a received buffer (queued on ``stream``)."""
        if not self.direct:
            tk.copyto(dev, host, stream=stream)

    def unpack(self, A, box, dev, stream) -> None:
        """Queue the unpacking of ``dev`` into ``A[box]`` on ``stream`` (host backends: run it now)."""
        self._unpack(A, dev, ndrange=ndrange_of(box), stream=None if self.is_host else stream)

    def shift(self, A, box, offsets, stream) -> None:
        """Queue ``A[box + offsets] = A[box]`` on ``stream`` (host backends: run it now).

        One kernel copies straight from the send box into the halo box (no packed buffer):
        the local periodic exchange. The two boxes must not overlap.
        """
        self._shift[A.ndim](A, *offsets, ndrange=ndrange_of(box), stream=None if self.is_host else stream)
