"""Which global arrays a kernel both reads and overwrites across work items: the check that
makes differentiating such a kernel a :class:`~tinykernels.errors.CompileError`.

A derived kernel (adjoint or tangent) re-runs the kernel and restores every element a work
item overwrote from that item's own tape. That is exact when each item reads and writes
only its own element of an array it also writes (``A[i] *= A[i]``). When an item reads an
element that *another* item of the same launch may overwrite (``x[i] = x[(i + 1) % n]``)
the value it saw depends on the order the items ran in, which the reverse sweep cannot
know: such a kernel is refused, naming the line. Arrays that are only read, only written,
or only updated with ``atomic_add``/``atomic_sub`` whose results are unused, are fine.
"""
from __future__ import annotations

import linecache

from ..errors import CompileError
from ..ir import nodes as N
from .uniformity import defs


def _single_defs(stmts) -> dict:
    """Locals assigned exactly once and outside loops: name -> value expression."""
    count: dict = {}
    values: dict = {}

    def visit(ss, in_loop):
        for s in ss:
            for v in defs(s):
                count[v] = count.get(v, 0) + (2 if in_loop else 1)
                if isinstance(s, N.Assign):
                    values[v] = s.value
            for attr in ("body", "orelse"):
                sub = getattr(s, attr, None)
                if sub:
                    visit(sub, in_loop or isinstance(s, (N.While, N.For)))
    visit(stmts, False)
    return {v: e for v, e in values.items() if count.get(v) == 1}


def is_own_index(idx: list, ndim: int, single: dict) -> bool:
    """Whether the global index ``idx`` is provably the work item's own element: the linear
    global index, or the Cartesian global index with one coordinate per dimension (locals
    assigned once are followed to their values; integer casts are looked through)."""
    def resolve(e, depth=0):
        while depth < 16:
            if isinstance(e, N.Var) and e.name in single:
                e = single[e.name]
            elif isinstance(e, N.Cast) and e.ty.dtype.is_int and e.a.ty.dtype.is_int:
                e = e.a
            else:
                break
            depth += 1
        return e
    es = [resolve(i) for i in idx]
    if len(es) == 1 and isinstance(es[0], N.Index) and es[0].kind == "global_linear":
        return True
    return len(es) == ndim and all(isinstance(e, N.Index) and e.kind == "global" and e.dim == d
                                   for d, e in enumerate(es))


def _accesses(k: N.Kernel) -> list:
    """Every global array access: (kind, array name, index, loc, atomic result used)."""
    out = []
    for s in N.walk_stmts(k.body):
        top = s.expr if isinstance(s, N.ExprStmt) else None
        if isinstance(s, N.Store) and s.array.space == "global":
            out.append(("store", s.array.name, s.index, s.loc, False))
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if isinstance(x, N.Load) and x.array.space == "global":
                    out.append(("load", x.array.name, x.index, x.loc or s.loc, False))
                elif isinstance(x, N.Atomic) and x.array.space == "global":
                    out.append(("atomic", x.array.name, x.index, x.loc or s.loc, x is not top))
    return out


def check_overwrites(k: N.Kernel) -> None:
    """Raise CompileError if a work item of ``k`` may read a global element that another
    item of the same launch overwrites, or uses the result of an atomic (its value depends
    on the order of the items, and a derived kernel re-running it would get another)."""
    acc = _accesses(k)
    single = _single_defs(k.body)
    written = {name for kind, name, *_ in acc if kind in ("store", "atomic")}
    loaded = {name for kind, name, *_ in acc if kind == "load"}
    for kind, name, idx, loc, used in acc:
        if kind == "atomic" and used:
            raise _err(k, loc, f"the value returned by an atomic on '{name}' cannot be differentiated: it "
                       "depends on the order of the work items, which a derived kernel re-running the "
                       "kernel does not reproduce")
        if name not in written or name not in loaded:
            continue
        if kind == "atomic":
            raise _err(k, loc, f"'{name}' is both read and updated atomically in this kernel; a work item "
                       "may read a value other items are still changing, which cannot be differentiated "
                       "(accumulate into a separate array)")
        if not is_own_index(idx, k.ndim, single):
            what = "read" if kind == "load" else "written"
            raise _err(k, loc, f"'{name}' is both read and written in this kernel, and this element is {what} "
                       "at an index that is not provably the work item's own (tk.index() or the "
                       "Cartesian global index): another work item may overwrite what this one reads, so "
                       "the gradient would depend on the order of the work items. Write the result to "
                       "another array")


def _err(k: N.Kernel, loc: N.Loc, msg: str) -> CompileError:
    return CompileError(msg, loc.file, loc.line, loc.col, linecache.getline(loc.file, loc.line) or None, k.name)
