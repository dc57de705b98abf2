"""Grid-stride prefetch for the CPU: which reads of a strided loop to prefetch ahead.

The grid-stride loop of CUDA/Warp/Numba code, ``for i in range(g, n, tk.ndrange()[0])``,
makes each group of a grouped CPU kernel (its loop hoisted out of the item loop: the lanes
shape) read a few bytes of every ``ndrange * itemsize`` bytes: a stride of kilobytes, across
pages, that the hardware prefetchers do not follow, so every iteration waits for DRAM. The
addresses are known, though: the same index with the loop variable ``d`` steps further. This
pass finds the reads of such a loop whose address is affine in its variable; the C renderer
(``codegen/c.py``, lanes pieces only) prefetches each of them ``d`` iterations ahead when, at
run time, consecutive iterations are far apart (at least 1 KiB, and at least twice what the
group reads per iteration). A prefetch is a hint: it never changes results.

A loop qualifies when its step is known only at run time (``tk.ndrange()[0]``, an argument, a
shape): not a constant, directly or through a local assigned once (``n = tk.groupsize()[0]``).
Constant steps are the strip-mined and ``range(lid, D, WG)`` loops, which sweep their rows
contiguously (the hardware follows them; every loop of ``tinykernels.llm`` has one). A
read qualifies when it loads a global array, sits in the loop (not in a nested loop), each index is loop-invariant or affine in the loop variable (``+``,
``-``, ``*`` by an invariant, integer casts), at least one index uses the variable, and the
other locals it reads are not assigned in the loop. At most ``MAX_READS`` reads per loop.
"""
from __future__ import annotations

from ..ir import nodes as N
from .prefetch import assign_counts, expr_key
from .uniformity import defs

MAX_READS = 4


def constant_locals(body: list) -> dict:
    """Locals assigned once in ``body``, from a constant: name -> value."""
    counts = assign_counts(body)
    return {s.var: s.value.value for s in N.walk_stmts(body)
            if isinstance(s, N.Assign) and counts.get(s.var) == 1 and isinstance(s.value, N.Const)}


def strided_step(s: N.For, consts: dict | None = None) -> bool:
    """Whether loop ``s`` may stride far: its step is not a constant, directly or through a
    local of ``consts`` (the kernel's :func:`constant_locals`)."""
    step = s.step
    return not (isinstance(step, N.Const) or (isinstance(step, N.Var) and step.name in (consts or {})))


def _affine(e: N.Expr, var: str, fixed) -> bool | None:
    """True: ``e`` is affine in ``var`` and uses it; False: it does not use ``var`` and is
    loop-invariant (``fixed(name)`` for its other locals); None: neither."""
    if isinstance(e, N.Var):
        return True if e.name == var else (False if fixed(e.name) else None)
    if isinstance(e, (N.Const, N.Arg, N.Shape, N.Index)):
        return False
    if isinstance(e, N.Cast):
        a = _affine(e.a, var, fixed)
        return a if not a or e.ty.dtype.kind in "iu" else None
    if isinstance(e, N.Unary) and e.op == "-":
        return _affine(e.a, var, fixed)
    if isinstance(e, N.BinOp) and e.op in ("+", "-", "*"):
        a, b = _affine(e.a, var, fixed), _affine(e.b, var, fixed)
        if a is None or b is None or (e.op == "*" and a and b):
            return None
        return a or b
    if any(isinstance(x, (N.Load, N.Atomic, N.Call)) or (isinstance(x, N.Var) and (x.name == var or not fixed(x.name)))
           for x in N.walk_expr(e)):
        return None
    return False


def _direct_loads(stmts: list):
    """Loads of ``stmts`` outside nested loops."""
    for s in stmts:
        for e in N.stmt_exprs(s):
            yield from (x for x in N.walk_expr(e) if isinstance(x, N.Load))
        if isinstance(s, (N.For, N.While)):
            continue
        for attr in ("body", "orelse"):
            yield from _direct_loads(getattr(s, attr, None) or [])


def strided_reads(s: N.For, fixed=lambda name: True, consts: dict | None = None) -> list:
    """The loads of loop ``s`` to prefetch ahead (deduplicated by array and index), per the
    module's rules; ``fixed(name)``: whether the renderer can read local ``name`` where the
    prefetch is issued (besides not being assigned in the loop); ``consts`` as for
    :func:`strided_step`."""
    if not strided_step(s, consts):
        return []
    assigned = {v for t in N.walk_stmts(s.body) for v in defs(t)}
    ok = lambda name: name not in assigned and name != s.var and fixed(name)
    found, keys = [], []
    for e in _direct_loads(s.body):
        if e.array.space != "global":
            continue
        kinds = [_affine(i, s.var, ok) for i in e.index]
        if None in kinds or not any(kinds):
            continue
        key = (e.array.name, tuple(expr_key(i) for i in e.index))
        if key not in keys:         # (a list: keys hold ArrayInfos, which do not hash)
            keys.append(key)
            found.append(e)
    return found[:MAX_READS]
