"""Which global arrays a kernel both reads and overwrites across work items: the check that
makes differentiating such a kernel a :class:`~tinykernels.errors.CompileError`.

A derived kernel (adjoint or tangent) re-runs the kernel and restores every element a work
item overwrote from that item's own tape. That is exact when each item reads and writes
only its own element of an array it also writes (``A[i] *= A[i]``, or ``A[i + 1] *= 2`` when
every access of ``A`` uses the same offset), or only elements of its own row (``A[i, j]`` for
any ``j``, every access with the same leading coordinates). When an item reads an
element that *another* item of the same launch may overwrite (``x[i] = x[(i + 1) % n]``)
the value it saw depends on the order the items ran in, which the reverse sweep cannot
know: such a kernel is refused, naming the line. Arrays that are only read, only written,
or only updated with ``atomic_add``/``atomic_sub`` whose results are unused, are fine.
"""
from __future__ import annotations


from ..errors import CompileError
from ..ir import nodes as N
from .uniformity import defs


def fixed_defs(stmts) -> dict:
    """Locals with one value wherever they are read: name -> value expression. A local assigned
    exactly once and outside loops (any value), or one assigned at several places or in a loop
    where every assignment is the same expression of values fixed for the work item (see
    :func:`_fixed_key`): the parameter of a ``@tk.func`` called in a loop with the item's own
    index (``acc_into(out, i, v)``) is assigned at each call, always ``i``. A local that any
    other statement defines (a ``for`` variable, a Philox output, a collective's result) has
    none. Followed by :func:`_resolve` (these analyses' only way through locals)."""
    count: dict = {}
    values: dict = {}
    other: set = set()

    def visit(ss, in_loop):
        for s in ss:
            for v in defs(s):
                count[v] = count.get(v, 0) + (2 if in_loop else 1)
                if isinstance(s, N.Assign):
                    values.setdefault(v, []).append(s.value)
                else:
                    other.add(v)
            for attr in ("body", "orelse"):
                sub = getattr(s, attr, None)
                if sub:
                    visit(sub, in_loop or isinstance(s, (N.While, N.For)))
    visit(stmts, False)
    single = {v: vs[0] for v, vs in values.items() if count[v] == 1 and v not in other}
    multi = {v: vs for v, vs in values.items() if count[v] > 1 and v not in other}
    changed = True
    while changed:                   # a fixed local may be assigned from another fixed local
        changed = False
        for v, vs in list(multi.items()):
            keys = {_fixed_key(e, single) for e in vs}
            if len(keys) == 1 and None not in keys:
                single[v] = vs[0]
                del multi[v]
                changed = True
    return single


def _fixed_key(e, single: dict, depth: int = 0):
    """A structural key of ``e`` when it is an expression of values that never change within
    a work item (its indices, literals, scalar arguments, array shapes, and locals in
    ``single`` with such values) under integer arithmetic, casts and comparisons; else None.
    Two expressions with the same key have the same value wherever the item evaluates them."""
    if depth > 32:
        return None
    d = depth + 1
    if isinstance(e, N.Var):
        return _fixed_key(single[e.name], single, d) if e.name in single else None
    if isinstance(e, N.Const) and isinstance(e.value, (int, float, bool)):
        return ("c", e.ty.dtype.name, repr(e.value))      # repr: -0.0 is not 0.0
    if isinstance(e, N.Arg):
        return ("arg", e.name)
    if isinstance(e, N.Shape):
        return ("shape", e.array.name, e.dim)
    if isinstance(e, N.Index):
        return ("idx", e.kind, e.dim)
    if isinstance(e, (N.Cast, N.Unary)):
        a = _fixed_key(e.a, single, d)
        return None if a is None else (type(e).__name__, getattr(e, "op", ""), e.ty.dtype.name, a)
    if isinstance(e, (N.BinOp, N.Compare)):
        a, b = _fixed_key(e.a, single, d), _fixed_key(e.b, single, d)
        return None if a is None or b is None else (type(e).__name__, e.op, e.ty.dtype.name, a, b)
    return None


def _resolve(e, single: dict, depth: int = 0):
    """Follow locals assigned once to their values and look through integer casts."""
    while depth < 16:
        if isinstance(e, N.Var) and e.name in single:
            e = single[e.name]
        elif isinstance(e, N.Cast) and e.ty.dtype.is_int and e.a.ty.dtype.is_int:
            e = e.a
        else:
            break
        depth += 1
    return e


def _launch_constant(e, single: dict):
    """A key for an integer that is the same for every work item of a launch (a literal or a
    scalar argument, or a sum/difference of those), else None."""
    e = _resolve(e, single)
    if isinstance(e, N.Const) and isinstance(e.value, (int, bool)):
        return ("c", int(e.value))
    if isinstance(e, N.Arg):
        return ("arg", e.name)
    if isinstance(e, N.BinOp) and e.op in ("+", "-"):
        a, b = _launch_constant(e.a, single), _launch_constant(e.b, single)
        if a is not None and b is not None:
            return (e.op, a, b)
    return None


def _coordinate(e, single: dict):
    """``(index kind, dim, offset key)`` when ``e`` is a work item's own global coordinate
    (linear or Cartesian) plus an offset that is the same for every item, else None."""
    e = _resolve(e, single)
    if isinstance(e, N.Index) and e.kind in ("global_linear", "global"):
        return (e.kind, e.dim, ("c", 0))
    if isinstance(e, N.BinOp) and e.op in ("+", "-"):
        for own, other, sign in ((e.a, e.b, e.op), (e.b, e.a, "+" if e.op == "+" else None)):
            if sign is None:
                continue             # c - i is not i plus a constant
            base = _coordinate(own, single)
            off = _launch_constant(other, single)
            if base is not None and off is not None:
                return (base[0], base[1], (sign, base[2], off))
    return None


def own_element_key(idx: list, ndim: int, single: dict):
    """A key for an index that maps work items one to one onto elements: the linear global
    index, or one Cartesian global coordinate per dimension, each plus an offset that is the
    same for every work item (``A[i + 1]``, ``A[i, j - k]``). Two accesses with the same key
    touch the same element in the same work item and never another item's. None otherwise."""
    cs = [_coordinate(i, single) for i in idx]
    if any(c is None for c in cs):
        return None
    if len(cs) == 1 and cs[0][0] == "global_linear":
        return tuple(cs)
    if len(cs) == ndim and all(c[0] == "global" and c[1] == d for d, c in enumerate(cs)):
        return tuple(cs)
    return None


def own_row_key(idx: list, ndim: int, single: dict):
    """A key for the block of elements an index selects by its leading coordinates when those
    map work items one to one onto blocks: the linear global index first (``A[i, j]`` with ``i =
    tk.index()``: item ``i`` owns row ``i``), or the launch's Cartesian coordinates as the first
    ``ndim`` (``A[i, j, k]`` in a 2-D launch), each plus an offset the same for every item; the
    coordinates after them are free (a loop variable, a gathered value). Distinct items touch
    distinct blocks, so accesses with one key never reach another item's element. A full
    :func:`own_element_key` is the special case without free coordinates. None otherwise."""
    if not idx:
        return None
    first = _coordinate(idx[0], single)
    if first is not None and first[0] == "global_linear":
        return (first,)
    if len(idx) < ndim:
        return None
    cs = [_coordinate(i, single) for i in idx[:ndim]]
    if all(c is not None and c[0] == "global" and c[1] == d for d, c in enumerate(cs)):
        return tuple(cs)
    return None


def row_owned_arrays(k: N.Kernel, single: dict) -> frozenset:
    """Global arrays every access of which (load, store, atomic) has one and the same
    :func:`own_row_key`: each work item touches only its own block of elements (``x[i, j]``
    for any ``j`` with ``i = tk.index()``, or ``x[i + 1, j]`` everywhere), which no other item
    reads or writes. The adjoint then adds into such an array's shadow without atomics.
    ``x[i, j]`` beside ``x[i + 1, j]`` (two keys), ``x[idx[i], j]`` or ``x[i // 2, j]`` (no key:
    several items share the row) are not."""
    keys: dict = {}
    for _kind, name, idx, _loc, _used in _accesses(k):
        key = own_row_key(idx, k.ndim, single)
        if keys.setdefault(name, key) != key or key is None:
            keys[name] = None
    return frozenset(n for n, key in keys.items() if key is not None)


def is_own_index(idx: list, ndim: int, single: dict) -> bool:
    """Whether the global index ``idx`` is provably the work item's own element (no offset)."""
    key = own_element_key(idx, ndim, single)
    return key is not None and all(c[2] == ("c", 0) for c in key)


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
    single = fixed_defs(k.body)
    written = {name for kind, name, *_ in acc if kind in ("store", "atomic")}
    loaded = {name for kind, name, *_ in acc if kind == "load"}
    keys: dict = {}           # array read and written -> the element (row) key of its first access
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
        key = own_row_key(idx, k.ndim, single)
        first = keys.setdefault(name, key)
        if key is None or key != first:
            what = "read" if kind == "load" else "written"
            raise _err(k, loc, f"'{name}' is both read and written in this kernel, and this element is {what} "
                       "at an index that is not provably in the element or row every other access of it in "
                       "this work item uses (leading coordinates the work item's own tk.index() or Cartesian "
                       "global index, plus the same constant offset everywhere): another work item may "
                       "overwrite what this one reads, so the gradient would depend on the order of the "
                       "work items. Write the result to another array")


def _err(k: N.Kernel, loc: N.Loc, msg: str) -> CompileError:
    return N.error_at(msg, loc, k.name)


def fully_overwritten(k: N.Kernel) -> frozenset:
    """Global arrays whose initial values a launch never observes when its ndrange equals
    the array's shape: every work item stores to its own element (its Cartesian global
    coordinates, or the linear global index in 1-D), at the kernel's top level before
    anything can end the item, and no access reads the array. Used by the framework
    wrappers (tinykernels.jax / .torch) to give such an output a fresh buffer instead of a
    copy of its initial value."""
    single = fixed_defs(k.body)
    stored = set()
    for s in k.body:
        if isinstance(s, N.Store) and s.array.space == "global" and len(s.index) == s.array.ndim == k.ndim \
                and is_own_index(s.index, k.ndim, single):
            stored.add(s.array.name)
        if any(isinstance(x, N.Return) for x in N.walk_stmts([s])):
            break                    # a work item may end here: later stores are not certain
    for kind, name, _idx, _loc, _used in _accesses(k):
        if kind != "store":
            stored.discard(name)     # read (or atomically updated): the initial value matters
    return frozenset(stored)


_NOT_ELEMENTWISE = frozenset({"barrier", "localmem", "collective", "uniform", "groupindex", "atomic", "print"})


def is_elementwise(k: N.Kernel) -> bool:
    """Whether each work item touches only its own element of every global array (no offset;
    the array's rank equal to the ndrange's, or the linear index in 1-D) and uses its
    position for nothing else: no arithmetic or condition on the index, no array shapes,
    no group features, atomics or prints. A launch of such a kernel over arrays shaped like
    its ndrange then equals launches over any partition of those elements, so the framework
    wrappers fold a ``vmap`` batch dimension into the ndrange (one launch)."""
    if k.uses & _NOT_ELEMENTWISE:
        return False
    single = fixed_defs(k.body)
    positions = {v for v, e in single.items() if isinstance(_resolve(e, single), N.Index)}

    def own(array, idx) -> bool:
        return len(idx) == array.ndim and (array.ndim == k.ndim or len(idx) == 1) and \
            is_own_index(idx, k.ndim, single)

    def ok(e) -> bool:
        if isinstance(e, (N.Index, N.Shape)) or (isinstance(e, N.Var) and e.name in positions):
            return False
        if isinstance(e, (N.Load, N.Atomic)) and e.array.space == "global":
            if not own(e.array, e.index):
                return False
            return all(ok(a) for a in getattr(e, "args", ()))
        return all(ok(c) for c in N.child_exprs(e))

    for s in N.walk_stmts(k.body):
        if isinstance(s, N.Assign) and s.var in positions:
            continue                 # the definition of a position variable
        if isinstance(s, N.Store) and s.array.space == "global":
            if not own(s.array, s.index) or not ok(s.value):
                return False
            continue
        if not all(ok(e) for e in N.stmt_exprs(s)):
            return False
    return True
