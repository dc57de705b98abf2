"""Which reads of a local tile a CPU renderer may serve from a transposed copy of the tile.

A GPU-style transpose stages a block through local memory: one barrier segment writes
``tile[li, lj] = a[i, j]`` (a row-contiguous global read), the next reads ``tile[lj, li]``
into a contiguous global write. A CPU renderer that runs a segment's work items with the
last group dimension innermost (the lanes) makes that read strided by the tile's row
length: every output row is gathered with scalar loads. If the renderer transposes the
block of the tile that the segment reads once, in registers, before the segment (a
``localmem`` is one array per group, and nothing writes it while the segment runs), the
read becomes ``tileT[li, lj]``: unit stride along the lanes.

The pattern (``transposed_reads``), for a kernel with a 2-D workgroup ``(W0, W1)``:

* an item loop (a segment) reads a 2-D, contiguous ``localmem`` array ``tile`` of static
  shape ``(R, C)`` as ``tile[lj, li]``: the first index is exactly the local index along the
  last group dimension (``tk.index(tk.Local, ...)`` dimension 1, directly or through a local
  assigned once from it), the second exactly dimension 0. Any other index expression,
  including offsets or swapped roles, leaves that read alone;
* the segment neither stores to ``tile`` nor updates it atomically (the copy is made once,
  before the segment starts);
* the block is in bounds for every item, ``W1 <= R`` and ``W0 <= C``, and covers at least
  one full register block (``min(W0, W1) >= block_lanes(itemsize)``), so the copy is mostly
  shuffles rather than a scalar loop of the same cost as the reads it replaces.

The copy holds ``tile[r, c]`` for ``r < W1`` and ``c < W0`` at ``tileT[c, r]``, which is
every element such a read can reach; the values are moved bit for bit, so the results are
exactly the original kernel's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import nodes as N


def block_lanes(itemsize: int) -> int:
    """Rows (and columns) of the register block that transposes elements of ``itemsize``
    bytes: 16 (a 16 x 16 block of 4-byte elements is sixteen 64-byte vectors), 8 for 8-byte
    elements."""
    return 8 if itemsize >= 8 else 16


@dataclass
class TileTranspose:
    """One local array whose reads in one item loop come from a transposed copy."""
    array: N.ArrayInfo
    loads: list = field(default_factory=list)    # the Load nodes to redirect


def _local_dim(e: N.Expr, remat: dict, depth: int = 0):
    """The group dimension ``e`` is the local index of (``tk.index(tk.Local, ...)``), or None."""
    if isinstance(e, N.Var) and e.name in remat and depth < 8:
        return _local_dim(remat[e.name], remat, depth + 1)
    if isinstance(e, N.Cast) and e.a.ty.dtype.is_int and e.ty.dtype.is_int and e.ty.dtype.bits >= 32:
        return _local_dim(e.a, remat, depth + 1)
    if isinstance(e, N.Index) and e.kind == "local":
        return e.dim
    return None


def segment_transposes(body: list, remat: dict, workgroup: tuple) -> list:
    """The :class:`TileTranspose` of one item loop's ``body`` (see the module docstring)."""
    if len(workgroup) != 2:
        return []
    w0, w1 = workgroup
    written = {s.array.name for s in N.walk_stmts(body) if isinstance(s, N.Store)}
    written |= {e.array.name for e in N.walk_exprs(body) if isinstance(e, N.Atomic)}
    found: dict = {}
    for e in N.walk_exprs(body):
        if not isinstance(e, N.Load):
            continue
        a = e.array
        if (a.space != "local" or a.ndim != 2 or len(a.shape) != 2 or not a.contiguous
                or a.name in written or len(e.index) != 2):
            continue
        rows, cols = a.shape
        lanes = block_lanes(a.dtype.itemsize)
        if not (w1 <= rows and w0 <= cols and min(w0, w1) >= lanes):
            continue
        if _local_dim(e.index[0], remat) == 1 and _local_dim(e.index[1], remat) == 0:
            found.setdefault(a.name, TileTranspose(a)).loads.append(e)
    return list(found.values())


def transposed_reads(body: list, remat: dict, workgroup: tuple) -> dict:
    """ItemLoop label -> its :class:`TileTranspose` list, for every item loop in a grouped
    kernel's planned ``body`` (``passes.groups.GroupPlan.body``) that has one."""
    from .groups import ItemLoop
    out: dict = {}
    for s in N.walk_stmts(body):
        if isinstance(s, ItemLoop):
            found = segment_transposes(s.body, remat, workgroup)
            if found:
                out[s.label] = found
    return out
