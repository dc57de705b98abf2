"""In which order a CPU launch of a 2-D/3-D grid may visit its groups.

The order of groups is unspecified in the language; a CPU renderer picks one for the caches.
By default it walks blocks of groups (``codegen/c.py: group_walk``): a thread's consecutive
groups touch a compact 2-D region, so a kernel that re-reads its neighbours' data in loops
(a tiled matmul reads the same rows of ``A`` and columns of ``B`` from every group of a
block row / column) finds it in cache, and a kernel writing columns with ordinary stores
writes runs of lines into each output row.

When a launch streams its outputs (non-temporal stores of whole lines: nothing is written
into the cache, so the write side has no locality to keep) and the kernel has no loop (every
work item reads a fixed handful of elements: no group reads what a group further away in
the grid reads), the only locality left is the reads': walking the groups row-major makes
each of a group row's input rows one long sequential stream, which the hardware prefetchers
follow, instead of runs of a block's width (8 groups: 8 lines per input row for a 16 x 16
float32 transpose tile), after which each stream starts again cold.
"""
from __future__ import annotations

from ..ir import nodes as N


def rows_first_when_streamed(k: N.Kernel) -> bool:
    """Whether a launch of grouped kernel ``k`` that streams its outputs walks its groups
    row-major rather than in blocks: a 2-D/3-D grid and no ``for``/``while`` loop anywhere
    in the body (inlined functions included)."""
    return k.ndim >= 2 and not any(isinstance(s, (N.For, N.While)) for s in N.walk_stmts(k.body))
