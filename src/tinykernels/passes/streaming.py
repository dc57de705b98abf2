"""Which stores of a flat kernel may become streaming (non-temporal) stores on the CPU.

A flat kernel's work items run in order of their position along the ndrange's last
dimension. A store ``out[i]`` whose index is the item's own position (unit stride along
that loop) and that every item executes writes one contiguous run of ``out`` per row, which
the CPU backend can stage in a small buffer and write with non-temporal stores: a large
output then costs two memory transfers per cache line (no read for ownership) instead of
three. The C renderer decides at run time whether the output is large enough.

Staging delays the store to the end of a block of items, so it is only allowed where no
work item could observe the difference:

* the store is a top-level statement of the body (every item executes it once, so the run
  is fully covered) and the body has no early exit (``return``, an inlined function's
  early exit);
* the array is a global, contiguous, writable argument that the kernel never reads, never
  updates atomically and stores nowhere else;
* after the first staged store, the item reads no writable global array, runs no atomic
  and prints nothing, and stores only to staged arrays (a writable array may alias the
  output: a later read of it must not see memory the delayed store has not written yet).

Reads by *other* work items of what an item wrote are data races in the language, as on
GPUs, and need no care.
"""
from __future__ import annotations

from ..ir import nodes as N


def _unit_stride(e: N.Expr, defs: dict, ndim: int, ranges: int, k: int, arr_ndim: int) -> bool:
    """Whether index expression ``e`` (dimension ``k`` of an ``arr_ndim``-D store) is the
    item's own coordinate, so consecutive items along the last dimension store
    consecutive elements."""
    if isinstance(e, N.Var) and e.name in defs:
        e = defs[e.name]
    if not isinstance(e, N.Index):
        return False
    if arr_ndim == 1 and k == 0 and e.kind == "global_linear":
        return True
    if arr_ndim != ndim or e.dim != k:
        return False
    if e.kind == "global_pos":
        return True
    return e.kind == "global" and ranges < 2       # ranges == 2: a step between items


def _geometry_defs(body: list) -> dict:
    """Locals assigned exactly once in the kernel, at top level, from the item's geometry."""
    counts: dict = {}
    for s in N.walk_stmts(body):
        if isinstance(s, N.Assign):
            counts[s.var] = counts.get(s.var, 0) + 1
        elif isinstance(s, N.Philox):
            for v in s.outs:
                counts[v] = counts.get(v, 0) + 2
        elif isinstance(s, N.Collective):
            counts[s.dst] = counts.get(s.dst, 0) + 2
        elif isinstance(s, N.For):
            counts[s.var] = counts.get(s.var, 0) + 2
    return {s.var: s.value for s in body
            if isinstance(s, N.Assign) and counts.get(s.var) == 1 and isinstance(s.value, N.Index)}


def _exprs(stmts):
    for s in N.walk_stmts(stmts):
        for e in N.stmt_exprs(s):
            yield from N.walk_expr(e)


def streamed_stores(k: N.Kernel, ranges: int) -> list:
    """The top-level stores of flat kernel ``k`` that may be staged and streamed (see the
    module docstring), in program order, each as ``(store, index)`` with the index's locals
    replaced by the geometry they hold; ``ranges`` as in the C renderer (0: plain ndrange,
    1: offsets, 2: offsets and steps)."""
    body = k.body
    if k.debug or getattr(k, "item_sums", ()):
        return []
    if any(isinstance(s, (N.Return, N.FuncExit, N.Barrier, N.Collective)) for s in N.walk_stmts(body)):
        return []
    stores: dict = {}       # array name -> number of stores
    touched: set = set()    # arrays loaded or updated atomically
    for s in N.walk_stmts(body):
        if isinstance(s, N.Store):
            stores[s.array.name] = stores.get(s.array.name, 0) + 1
    for e in _exprs(body):
        if isinstance(e, (N.Load, N.Atomic)):
            touched.add(e.array.name)
    defs = _geometry_defs(body)
    picked = []
    for s in body:
        if not isinstance(s, N.Store):
            continue
        a = s.array
        if (a.space != "global" or a.const or not a.contiguous or a.name in touched
                or stores[a.name] != 1 or len(s.index) != a.ndim
                or not all(_unit_stride(e, defs, k.ndim, ranges, d, a.ndim) for d, e in enumerate(s.index))):
            continue
        picked.append(s)
    if not picked:
        return []
    first = next(i for i, s in enumerate(body) if s is picked[0])
    names = {s.array.name for s in picked}
    rest = body[first + 1:]
    for s in N.walk_stmts(rest):
        if isinstance(s, N.Print) or (isinstance(s, N.Store) and s.array.space == "global"
                                      and s.array.name not in names):
            return []
    for e in _exprs(rest):
        if isinstance(e, N.Atomic) or (isinstance(e, N.Load) and e.array.space == "global"
                                       and not e.array.const):
            return []
    return [(s, [defs.get(e.name, e) if isinstance(e, N.Var) else e for e in s.index]) for s in picked]
