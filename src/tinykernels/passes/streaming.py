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
  updates atomically and stores nowhere else, and the kernel reads no writable global
  array and has no global atomics at all (the partial cache line at the end of a streamed
  run is held back until the next run continues it or the thread's work ends);
* after the first staged store, the item reads no writable global array, runs no atomic
  and prints nothing, and stores only to staged arrays (a writable array may alias the
  output: a later read of it must not see memory the delayed store has not written yet).

Reads by *other* work items of what an item wrote are data races in the language, as on
GPUs, and need no care.

Staging costs a store, a load and the streamed store per element. A kernel that computes
so much per byte it moves that it is not memory-bound gains nothing from the saved read for
ownership and pays that cost (:func:`compute_heavy`), so its stores stay ordinary.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..dtypes import DType
from ..ir import nodes as N
from .rowdiv import row_invariant_defs, row_step, substitute


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
    return {v: e for v, e in row_invariant_defs(body).items() if isinstance(e, N.Index)}


def write_only_arrays(k: N.Kernel) -> set:
    """Global, writable, contiguous arrays that ``k`` stores in exactly one place and never
    reads or updates atomically: candidates for streaming stores. None at all when the
    kernel reads any writable global array or has global atomics: a streamed output's last
    partial cache line may be written as late as the end of the thread's share of the
    launch, which only such a read (of an aliasing array) could observe."""
    stores: dict = {}
    touched: set = set()
    arrays: dict = {}
    for s in N.walk_stmts(k.body):
        if isinstance(s, N.Store):
            stores[s.array.name] = stores.get(s.array.name, 0) + 1
            arrays[s.array.name] = s.array
    for e in N.walk_exprs(k.body):
        if isinstance(e, (N.Load, N.Atomic)):
            touched.add(e.array.name)
        if isinstance(e, N.Atomic) and e.array.space == "global":
            return set()        # atomics may order or publish the stores
        if isinstance(e, N.Load) and e.array.space == "global" and not e.array.const:
            return set()        # a writable array may alias an output: it must see every store
    return {n for n, a in arrays.items()
            if a.space == "global" and not a.const and a.contiguous and n not in touched and stores[n] == 1}


def unobservable_after(rest: list, names: set) -> bool:
    """Whether a store to one of ``names`` may be delayed past statements ``rest`` of the same
    work item: they read no writable global array (it may alias the output), run no atomic,
    print nothing and store to no other global array."""
    for s in N.walk_stmts(rest):
        if isinstance(s, N.Print) or (isinstance(s, N.Store) and s.array.space == "global"
                                      and s.array.name not in names):
            return False
    for e in N.walk_exprs(rest):
        if isinstance(e, N.Atomic) or (isinstance(e, N.Load) and e.array.space == "global"
                                       and not e.array.const):
            return False
    return True


def lane_coef(e: N.Expr, ndim: int, ranges: int, uniform: set, remat: dict, lane_vars: dict,
              dim: int | None = None):
    """How expression ``e`` changes from one work item to the next along the last group
    dimension (the lanes of the CPU's lanes shape): 0 (the same in every lane), 1 (one more
    per lane), another int, or None (unknown). ``uniform``: group-level locals; ``remat``:
    locals recomputed from the item's geometry; ``lane_vars``: variables of loops hoisted
    out of the lanes, to ``(start, step)`` of a per-item range or None for a uniform one.
    ``dim``: the group dimension to step instead of the last one (the linear indices then
    count as unknown)."""
    lane = ndim - 1 if dim is None else dim
    def c(x):
        if isinstance(x, (N.Const, N.Arg, N.Shape)):
            return 0
        if isinstance(x, N.Var):
            if x.name in lane_vars:
                rng = lane_vars[x.name]
                if rng is None:
                    return 0
                start, step = c(rng[0]), c(rng[1])
                return start if step == 0 else None
            if x.name in uniform:
                return 0
            if x.name in remat:
                return c(remat[x.name])
            return None
        if isinstance(x, N.Index):
            last = x.dim == lane
            if x.kind in ("local_linear", "global_linear"):
                return 1 if lane == ndim - 1 else None
            if x.kind in ("local", "global_pos"):
                return 1 if last else 0
            if x.kind == "global":
                return (1 if ranges < 2 else None) if last else 0
            return 0        # group, ndrange, groupsize, ngroups, group_linear
        if isinstance(x, N.BinOp) and x.op in ("+", "-", "*"):
            a, b = c(x.a), c(x.b)
            if a is None or b is None:
                return None
            if (a or b) and not (x.ty is not None and x.ty.dtype.kind in "iu" and x.ty.dtype.bits == 64):
                return None     # narrower arithmetic may wrap between lanes
            if x.op == "+":
                return a + b
            if x.op == "-":
                return a - b
            if a == 0 and b == 0:
                return 0
            if a == 0 and isinstance(x.a, N.Const) and isinstance(x.a.value, int):
                return b * x.a.value
            if b == 0 and isinstance(x.b, N.Const) and isinstance(x.b.value, int):
                return a * x.b.value
            return None
        if isinstance(x, N.Cast):
            inner = c(x.a)
            if inner == 0:
                return 0
            return inner if x.ty.dtype.kind in "iu" and x.ty.dtype.bits == 64 else None
        if isinstance(x, (N.Load, N.Atomic)):
            return None
        return 0 if all(c(y) == 0 for y in N.child_exprs(x)) else None
    return c(e)


# Arithmetic per byte that a flat kernel's loads and stores move above which staging its
# stores does not pay (measured idle, 2 threads, 64 MiB, 2026-11-25: llm.exp's polynomial, 26
# operations per 8 bytes, 2.07 ms streamed against 1.54 ms not; swiglu, 31 per 12 bytes, 1.45
# against 1.41; add, 1 per 12 bytes, level at 64 MiB and ahead at 256 MiB).
COMPUTE_HEAVY_OPS_PER_BYTE = 1.5
# A call of a transcendental function counts as this many operations (a vector polynomial;
# sqrt is one instruction and counts as one).
TRANSCENDENTAL_OPS = 20
_CHEAP_CALLS = frozenset({"min", "max", "abs", "fabs", "fma", "bitcast", "floor", "ceil", "trunc", "round", "sqrt",
                          "copysign", "select", "clamp"})


def _itemsize(a: N.ArrayInfo) -> int:
    """Bytes per element of ``a`` (its dtype a DType, or a NumPy scalar type in hand-built IR)."""
    return a.dtype.itemsize if isinstance(a.dtype, DType) else np.dtype(a.dtype).itemsize


def compute_heavy(k: N.Kernel) -> bool:
    """Whether flat kernel ``k`` does more than ``COMPUTE_HEAVY_OPS_PER_BYTE`` operations per
    byte its loads and stores name (each counted once per item, cache reuse ignored)."""
    ops = moved = 0
    for e in N.walk_exprs(k.body):
        if isinstance(e, N.Call):
            ops += 1 if e.fn in _CHEAP_CALLS else TRANSCENDENTAL_OPS
        elif isinstance(e, (N.BinOp, N.Unary, N.Select, N.Compare)):
            ops += 1
        elif isinstance(e, N.Load):
            moved += _itemsize(e.array)
    moved += sum(_itemsize(s.array) for s in N.walk_stmts(k.body) if isinstance(s, N.Store))
    return ops > COMPUTE_HEAVY_OPS_PER_BYTE * max(moved, 1)


def streamed_stores(k: N.Kernel, ranges: int) -> list:
    """The top-level stores of flat kernel ``k`` that may be staged and streamed (see the
    module docstring), in program order, each as ``(store, index)`` with the index's locals
    replaced by the geometry they hold; ``ranges`` as in the C renderer (0: plain ndrange,
    1: offsets, 2: offsets and steps)."""
    body = k.body
    if k.debug or getattr(k, "item_sums", ()) or compute_heavy(k):
        return []
    if any(isinstance(s, (N.Return, N.FuncExit, N.Barrier, N.Collective)) for s in N.walk_stmts(body)):
        return []
    defs = _geometry_defs(body)
    candidates = write_only_arrays(k)
    picked = [s for s in body if isinstance(s, N.Store) and s.array.name in candidates
              and len(s.index) == s.array.ndim
              and all(_unit_stride(e, defs, k.ndim, ranges, d, s.array.ndim) for d, e in enumerate(s.index))]
    if not picked:
        return []
    first = next(i for i, s in enumerate(body) if s is picked[0])
    if not unobservable_after(body[first + 1:], {s.array.name for s in picked}):
        return []
    return [(s, [defs.get(e.name, e) if isinstance(e, N.Var) else e for e in s.index]) for s in picked]


_RAW_COPY_KINDS = "iuf"      # loaded and stored unchanged (not bool, not 8/16-bit floats)


def _raw_copy(load: N.Load, store: N.Store) -> bool:
    d = store.array.dtype
    return load.array.dtype == d and d.kind in _RAW_COPY_KINDS and not (d.kind == "f" and d.bits < 32)


def _loaded(e: N.Expr, defs: dict):
    """The load whose value ``e`` is (directly, through locals assigned once, or through
    conversions to the load's own dtype), else None."""
    while True:
        if isinstance(e, N.Var) and e.name in defs:
            e = defs[e.name]
        elif isinstance(e, N.Cast) and isinstance(e.a, (N.Load, N.Var, N.Cast)):
            inner = _loaded(e.a, defs)
            return inner if inner is not None and inner.ty.dtype == e.ty.dtype else None
        else:
            return e if isinstance(e, N.Load) else None


def _table_lookup(store: N.Store, defs: dict):
    """``(byte_load, table)`` when ``store`` writes ``table[b]`` unchanged for a uint8 load ``b``
    (through an integer conversion): ``table`` a read-only, contiguous, 1-D global array of
    the store's 16-bit integer dtype; else None."""
    d = store.array.dtype
    tab = _loaded(store.value, defs)
    if d.kind not in "iu" or d.bits != 16 or tab is None or tab.array.dtype != d or len(tab.index) != 1:
        return None
    t = tab.array
    if not (t.space == "global" and t.const and t.contiguous and t.ndim == 1):
        return None
    idx = tab.index[0]
    while isinstance(idx, N.Var) and idx.name in defs:
        idx = defs[idx.name]
    if isinstance(idx, N.Cast) and idx.ty.dtype.kind in "iu" and idx.ty.dtype.bits >= 16:
        idx = idx.a
    while isinstance(idx, N.Var) and idx.name in defs:
        idx = defs[idx.name]
    if not (isinstance(idx, N.Load) and idx.array.dtype.name == "uint8"):
        return None
    return idx, t


def _copied_load(store: N.Store, defs: dict):
    """``(load, kind, table)`` when ``store`` writes a load unchanged (``"copy"``: integer,
    float32 or float64, same dtype), a float32 load rounded to float16 (``"f16"``) or the entry
    of a 16-bit table at a uint8 load (``"lut16"``, ``table`` the table's array; else None),
    else None."""
    v, d, table = store.value, store.array.dtype, None
    if d.name == "float16" and isinstance(v, N.Cast) and v.ty.dtype == d:
        load, kind = _loaded(v.a, defs), "f16"
        if load is None or load.array.dtype.name != "float32":
            return None
    elif (found := _table_lookup(store, defs)) is not None:
        (load, table), kind = found, "lut16"
    else:
        load, kind = _loaded(v, defs), "copy"
        if load is None or not _raw_copy(load, store):
            return None
    a = load.array
    ok = a.space == "global" and a.const and a.contiguous and len(load.index) == a.ndim >= 1
    return (load, kind, table) if ok else None


def copy_sources(k: N.Kernel, ranges: int, streams: list, fixed: frozenset) -> dict | None:
    """When flat kernel ``k`` only copies or converts: ``id(store) -> (source, kind, table)`` for
    each of its ``streams`` (``streamed_stores``): ``source`` is the load whose value the store
    writes, with its locals replaced by their values (evaluated at a block's first position,
    it is the address of the block's source run); ``kind`` is ``"copy"`` (the value unchanged:
    integer, float32, float64), ``"f16"`` (a float32 value rounded to float16) or ``"lut16"``
    (the entry of the 16-bit ``table`` at a uint8 value; None for the other kinds), the same
    for all. None otherwise. The load must be of a read-only, contiguous global array at an address one
    element further per position along the row (the last index grows by one, the others are
    fixed for the row; ``fixed``: locals loaded once per row, ``rowdiv.row_loads``), and every
    other top-level statement an assignment without side effects (no atomic, no call), so
    that a block of items is exactly a copy (or a conversion) of contiguous memory, which the
    CPU does from the source without running the items (a gather of rows: the items' loop
    into the staging buffer and the streaming pass over it cost more than ordinary stores;
    a cast: the items only moved float32 values into the buffer that F16C then rounds; a
    byte-indexed table: AVX-512 looks up 32 bytes at a time in a table held in registers)."""
    if not streams:
        return None
    picked = {id(s) for s, _ in streams}
    defs = row_invariant_defs(k.body)
    out = {}
    for st in k.body:
        if isinstance(st, N.Store) and id(st) in picked:
            found = _copied_load(st, defs)
            if found is None:
                return None
            load, kind, table = found
            *outer, last = load.index
            if (any(row_step(e, defs, k.ndim, ranges, fixed=fixed) != 0 for e in outer)
                    or row_step(last, defs, k.ndim, ranges, fixed=fixed) != 1):
                return None
            out[id(st)] = (substitute(load, defs), kind, table)
        elif not isinstance(st, N.Assign) or any(isinstance(e, (N.Atomic, N.Call)) for e in N.walk_expr(st.value)):
            return None
    return out if len({kind for _, kind, _ in out.values()}) == 1 else None


def _assign_counts(body: list) -> dict:
    """How often each local is assigned in ``body`` (a loop variable counts twice)."""
    counts: dict = {}
    for s in N.walk_stmts(body):
        names = [s.var] if isinstance(s, N.Assign) else [s.var, s.var] if isinstance(s, N.For) else \
            list(s.outs) * 2 if isinstance(s, N.Philox) else [s.dst] * 2 if isinstance(s, N.Collective) else []
        for v in names:
            counts[v] = counts.get(v, 0) + 1
    return counts


def _assigned_in(body: list) -> set:
    """The locals that statements of ``body`` assign (loop variables included)."""
    return {s.var for s in N.walk_stmts(body) if isinstance(s, (N.Assign, N.For))} | \
        {v for s in N.walk_stmts(body) if isinstance(s, N.Philox) for v in s.outs} | \
        {s.dst for s in N.walk_stmts(body) if isinstance(s, N.Collective)}


def _pure(e: N.Expr) -> bool:
    return not any(isinstance(x, (N.Load, N.Atomic, N.Call)) for x in N.walk_expr(e))


def _loop_coef(e: N.Expr, var: str, inner: set):
    """How ``e`` grows per iteration of the loop over ``var``: 0 (the same in the whole loop: no
    local assigned in the loop), 1 (``var`` plus loop-invariant terms, 64-bit integers), or
    None."""
    if isinstance(e, N.Var):
        return 1 if e.name == var else (None if e.name in inner else 0)
    if isinstance(e, (N.Const, N.Arg, N.Shape, N.Index)):
        return 0
    if isinstance(e, N.BinOp) and e.op in ("+", "-"):
        a, b = _loop_coef(e.a, var, inner), _loop_coef(e.b, var, inner)
        if a is None or b is None:
            return None
        if (a or b) and not (e.ty is not None and e.ty.dtype.kind in "iu" and e.ty.dtype.bits == 64):
            return None
        r = a + b if e.op == "+" else a - b
        return r if r in (0, 1) else None
    if isinstance(e, N.Cast):
        a = _loop_coef(e.a, var, inner)
        return a if a == 0 or (a == 1 and e.ty.dtype.kind in "iu" and e.ty.dtype.bits == 64) else None
    return 0 if all(_loop_coef(x, var, inner) == 0 for x in N.child_exprs(e)) else None


def _loop_store_index(loop: N.For, store: N.Store, counts: dict):
    """The index of ``store`` (a top-level statement of ``loop.body``) with the locals the loop
    body assigns once before it replaced by their values, when its last index is the loop
    variable plus loop-invariant terms and the others are loop-invariant; else None."""
    inner = _assigned_in(loop.body)
    defs = {}
    for s in loop.body:
        if s is store:
            break
        if isinstance(s, N.Assign) and counts.get(s.var) == 1 and _pure(s.value):
            defs[s.var] = s.value

    def resolve(e, seen=frozenset()):
        if isinstance(e, N.Var) and e.name in defs and e.name not in seen:
            return resolve(defs[e.name], seen | {e.name})
        if isinstance(e, N.Var) or not N.child_exprs(e):
            return e
        if isinstance(e, (N.BinOp, N.Compare)):
            return replace(e, a=resolve(e.a, seen), b=resolve(e.b, seen))
        if isinstance(e, N.Cast):
            return replace(e, a=resolve(e.a, seen))
        return e
    index = [resolve(e) for e in store.index]
    *lead, last = index
    if not all(_pure(e) and _loop_coef(e, loop.var, inner) == 0 for e in lead):
        return None
    if not _pure(last) or _loop_coef(last, loop.var, inner) != 1:
        return None
    return index


def _runs_through(body: list) -> bool:
    """Whether every iteration of a loop with ``body`` runs to its end: no ``break``,
    ``continue`` or ``return``, and every inlined function's early exit lands inside it."""
    stmts = list(N.walk_stmts(body))
    blocks = {s.label for s in stmts if isinstance(s, N.FuncBlock)}
    return not any(isinstance(s, (N.Break, N.Continue, N.Return))
                   or (isinstance(s, N.FuncExit) and s.label not in blocks) for s in stmts)


def loop_streams(k: N.Kernel) -> dict:
    """The stores of flat kernel ``k`` that may stream from inside a loop over a row: ``id(loop)
    -> [(store, index)]``, for top-level ``range`` loops of step 1 (no ``break``/``continue``,
    the variable not reassigned) whose body stores, as a top-level statement (every
    iteration), to a write-only output (``write_only_arrays``) at the loop variable plus
    loop-invariant terms along its last axis (contiguous: consecutive iterations write
    consecutive elements) with the other indices loop-invariant; ``index`` with the locals the
    loop body assigns before the store replaced by their values (pure expressions of the
    loop variable and of values fixed in the loop). As for ``streamed_stores``, nothing from
    the first such loop on may observe the delayed stores (``unobservable_after``), every
    iteration runs to the end of the loop's body (``_runs_through``: an inlined function's
    early exit inside it is fine), and the kernel has no barriers or collectives. The C renderer runs such a loop in
    blocks, each staged in L1 and streamed (the host row kernels of ``tinykernels.llm``:
    RMSNorm's output, softmax's)."""
    body = k.body
    if k.debug or getattr(k, "item_sums", ()):
        return {}
    if any(isinstance(s, (N.Barrier, N.Collective)) for s in N.walk_stmts(body)):
        return {}
    candidates = write_only_arrays(k)
    if not candidates:
        return {}
    counts = _assign_counts(body)
    found: dict = {}
    first = None
    for i, loop in enumerate(body):
        if not (isinstance(loop, N.For) and isinstance(loop.step, N.Const) and loop.step.value == 1
                and loop.var not in _assigned_in(loop.body)):
            continue
        if not _runs_through(loop.body):
            continue
        picked = []
        for s in loop.body:
            if isinstance(s, N.Store) and s.array.name in candidates and len(s.index) == s.array.ndim:
                index = _loop_store_index(loop, s, counts)
                if index is not None:
                    picked.append((s, index))
        if picked:
            found[id(loop)] = picked
            first = i if first is None else first
    if not found:
        return {}
    names = {s.array.name for picked in found.values() for s, _ in picked}
    if not unobservable_after(body[first:], names):
        return {}
    return found
