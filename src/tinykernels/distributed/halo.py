"""The halo exchange: one dimension after another, every array at once.

Along each dimension that has neighbours, every array's two send boxes (the ``halo``
planes just inside its halos) are packed into contiguous buffers on the exchange
stream, then one non-blocking receive and one send per box and neighbour are posted,
and after they complete the received buffers are unpacked into the halo boxes.
Dimensions go in order and each box spans the whole array in the dimensions not yet
exchanged and those already exchanged, so edge and corner halos come out right (a
corner value travels through the face exchanges of two dimensions).

Message tags: ``2 * k`` for array ``k``'s planes travelling to the right (into the
right neighbour's left halo), ``2 * k + 1`` to the left, so two messages between the
same pair of ranks (two ranks along a periodic dimension) never mix.

A staggered array (one plane longer or shorter than the grid's local extent along a
dimension, as ImplicitGlobalGrid's) sends and receives its own planes (:func:`planes`); one
shorter along a dimension has no halos there and is left alone along it.

A periodic dimension that has a single rank is its own neighbour on both sides: there
each send box is copied straight into the opposite halo by one kernel on the array's
own stream, without MPI and without host staging (:func:`self_exchange`).
"""
from __future__ import annotations

import time

from . import _mpi
from .topology import box_size, has_halo, recv_ranges, send_ranges


def halo_box(shape, d: int, r) -> tuple:
    """The box that is ``r`` along dimension ``d`` and everything along the others."""
    return tuple(r if k == d else (0, n) for k, n in enumerate(shape))


def planes(grid, A, d: int):
    """``((send_lo, send_hi), (recv_lo, recv_hi))``: the boxes array ``A`` sends and receives
    along dimension ``d`` (its own shape, so a staggered array's planes), or None when it has
    no halos there (an array shorter than the grid's local extent: ImplicitGlobalGrid's rule)."""
    n, size = grid.local_shape[d], A.shape[d]
    if not has_halo(n, size):
        return None
    (s_lo, s_hi), (r_lo, r_hi) = send_ranges(n, grid.halo, size), recv_ranges(size, grid.halo)
    return ((halo_box(A.shape, d, s_lo), halo_box(A.shape, d, s_hi)),
            (halo_box(A.shape, d, r_lo), halo_box(A.shape, d, r_hi)))


def exchange(grid, arrays, stagings, streams, delay_s: float = 0.0) -> float:
    """Exchange the halos of ``arrays`` (a list of validated arrays); returns seconds spent in MPI.

    ``stagings[k]``/``streams[k]`` are array ``k``'s :class:`Staging` and exchange stream;
    work queued earlier on those streams is finished first (by stream order). ``delay_s``
    emulates network time: the exchange sleeps that long after posting its messages.
    """
    MPI = grid._MPI
    comm = grid.comm
    t_mpi = 0.0
    unique_streams = list({id(s): s for s in streams}.values())
    for s in unique_streams:        # host backends pack on this thread: what the streams hold comes first
        if any(st.is_host for st, x in zip(stagings, streams) if x is s):
            s.synchronize()
    for d in range(grid.ndim):
        left, right = grid.neighbors[d]
        if left == MPI.PROC_NULL and right == MPI.PROC_NULL:
            continue
        boxes = [planes(grid, A, d) for A in arrays]
        if left == right == comm.rank:
            self_exchange(arrays, stagings, streams, d, boxes)
            for s in unique_streams:
                s.synchronize()
            continue
        sends = []          # (k, tag, neighbour, dev, host)
        for k, A in enumerate(arrays):
            if boxes[k] is None:
                continue
            st, stream = stagings[k], streams[k]
            (s_lo, s_hi), _ = boxes[k]
            if right != MPI.PROC_NULL:
                sends.append((k, 2 * k, right, *st.pack(A, s_hi, ("s", d, 1, k), stream)))
            if left != MPI.PROC_NULL:
                sends.append((k, 2 * k + 1, left, *st.pack(A, s_lo, ("s", d, 0, k), stream)))
        for s in unique_streams:
            s.synchronize()
        for k, _tag, _nb, dev, host in sends:
            stagings[k].to_host(dev, host, streams[k])
        t0 = time.perf_counter()
        reqs, recvs = [], []
        for k, A in enumerate(arrays):
            if boxes[k] is None:
                continue
            st = stagings[k]
            r_lo, r_hi = boxes[k][1]
            for tag, nb, box, side in ((2 * k, left, r_lo, 0), (2 * k + 1, right, r_hi, 1)):
                if nb == MPI.PROC_NULL:
                    continue
                dev, host = st.buffers(("r", d, side, k), A.dtype, box_size(box))
                reqs.append(comm.Irecv(_mpi.byte_spec(MPI, st.message(dev, host)), source=nb, tag=tag))
                recvs.append((k, box, dev, host))
        for k, tag, nb, dev, host in sends:
            reqs.append(comm.Isend(_mpi.byte_spec(MPI, stagings[k].message(dev, host)), dest=nb, tag=tag))
        if delay_s > 0:
            time.sleep(delay_s)
        MPI.Request.Waitall(reqs)
        t_mpi += time.perf_counter() - t0
        for k, box, dev, host in recvs:
            stagings[k].from_host(dev, host, streams[k])
            stagings[k].unpack(arrays[k], box, dev, streams[k])
        for s in unique_streams:
            s.synchronize()
    return t_mpi



def self_exchange(arrays, stagings, streams, d: int, boxes) -> None:
    """A periodic dimension with one rank: each send box goes into the opposite halo.

    What the right neighbour (this rank) would receive into its left halo is this rank's
    right send box, and the other way round; one kernel per box copies it straight into
    the halo on the array's own stream (no packed buffer, no MPI, no host round trip).
    ``boxes[k]`` is array ``k``'s :func:`planes` along ``d`` (None: not exchanged there).
    """
    for k, A in enumerate(arrays):
        if boxes[k] is None:
            continue
        (s_lo, s_hi), (r_lo, r_hi) = boxes[k]
        for src, dst in ((s_hi, r_lo), (s_lo, r_hi)):
            offsets = tuple(dst[j][0] - src[j][0] for j in range(len(src)))
            stagings[k].shift(A, src, offsets, streams[k])
