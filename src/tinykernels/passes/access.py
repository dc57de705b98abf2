"""What a kernel does with its array arguments, for the checks a launch can afford.

:func:`analyze` walks a typed kernel once and returns an :class:`AccessInfo`:

* ``written``: the global arrays the kernel may store to or update atomically (anywhere,
  under any condition); a read-only (``writeable=False``) array must not be one of them.
* ``affine``: accesses every work item of the ndrange certainly performs, whose index in
  some array dimension is a work-item coordinate plus a constant (``A[i + 1]`` with
  ``i = tk.index()``) or a constant (``A[0]``, ``A[-1]``: no wrap-around). The launch compares the coordinate's extent with the array's shape:
  an access outside it is a certain out-of-bounds access, refused before the kernel runs.

"Certainly performs" is conservative: only statements in the kernel's straight-line
prefix count, i.e. before any ``if``/loop that may ``return``, not inside an ``if`` or a
loop, not in the unchosen side of ``a if c else b`` or ``x and y``; the coordinate must
come from a local assigned exactly once. In a kernel with ``unsafe_indices`` every work item
of every group runs every statement, the items past the ndrange in a partial last group too
(SPEC section 3): its facts carry the group size along their axis (``pad``), and the launch
checks the coordinate's extent over the ndrange padded to whole groups. (Its linear position in
more than one dimension is not checked: no fact.)
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from ..ir import nodes as N

COORD_KINDS = ("global_linear", "global", "global_pos")     # and "const": no coordinate


@dataclass(frozen=True)
class Affine:
    """``array[..., coordinate + offset, ...]`` in dimension ``dim``, done by every work item.
    ``kind``: ``global_linear`` (0-based linear position), ``global`` (absolute coordinate
    ``start + k * step`` of ndrange dimension ``axis``), ``global_pos`` (0-based ``k``) or
    ``const`` (no coordinate: the index is ``offset``, e.g. ``A[-1]``, which does not wrap)."""
    array: str
    dim: int
    kind: str
    axis: int
    offset: int
    site: str              # where: N.site_text of the access (its file, line and call chain)
    pad: int = 0           # unsafe_indices: the group size along the axis (the coordinate runs
                           # over the ndrange padded to whole groups); 0: the ndrange itself


@dataclass(frozen=True)
class AccessInfo:
    """The result of :func:`analyze` (stored with each compiled specialization)."""
    written: dict          # array name -> N.site_text of its first store or atomic
    affine: tuple          # Affine facts


def analyze(k: N.Kernel) -> AccessInfo:
    """Which global arrays ``k`` may write, and its certain affine accesses (see the module)."""
    written: dict = {}
    for s in N.walk_stmts(k.body):
        if isinstance(s, N.Store) and s.array.space == "global":
            if s.array.name not in written:
                written[s.array.name] = N.site_text(s.loc)
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if isinstance(x, N.Atomic) and x.array.space == "global":
                    if x.array.name not in written:
                        written[x.array.name] = N.site_text(x.loc)
    facts: list = []
    _scan(k.body, {}, _assignment_counts(k.body), facts)
    if k.unsafe_indices:
        facts = [p for f in facts if (p := _padded(f, k)) is not None]
    return AccessInfo(written, tuple(dict.fromkeys(facts)))


def _padded(f: Affine, k: N.Kernel) -> Affine | None:
    """Fact ``f`` of an ``unsafe_indices`` kernel, over the ndrange padded to whole groups
    (None: a linear position in more than one dimension, not checked)."""
    if f.kind == "const":
        return f
    if f.kind == "global_linear":
        return replace(f, pad=k.workgroup[0]) if k.ndim == 1 else None
    return replace(f, pad=k.workgroup[f.axis])


def _assignment_counts(body) -> Counter:
    c: Counter = Counter()
    for s in N.walk_stmts(body):
        if isinstance(s, (N.Assign, N.For)):
            c[s.var] += 1
        elif isinstance(s, N.Philox):
            c.update(s.outs)
        elif isinstance(s, N.Collective):
            c[s.dst] += 1
        else:
            for name in ("var", "dst"):
                v = getattr(s, name, None)
                if isinstance(v, str):
                    c[v] += 1
    return c


def _coord(e, env):
    """``(kind, axis, offset)`` when ``e`` is a work-item coordinate plus a constant, or an
    integer constant (kind ``const``, the constant as offset), else None."""
    if _int_const(e) is not None:
        return ("const", 0, e.value)
    if isinstance(e, N.Index):
        return (e.kind, e.dim, 0) if e.kind in COORD_KINDS else None
    if isinstance(e, N.Var):
        return env.get(e.name)
    if isinstance(e, N.Cast):
        d = e.ty.dtype
        return _coord(e.a, env) if d.kind == "i" and d.bits == 64 else None
    if isinstance(e, N.BinOp) and e.op in ("+", "-"):
        a, b = e.a, e.b
        if e.op == "+" and _int_const(a) is not None:
            a, b = b, a
        c, base = _int_const(b), _coord(a, env)
        if c is None or base is None:
            return None
        return base[0], base[1], base[2] + (c if e.op == "+" else -c)
    return None


def _int_const(e):
    if isinstance(e, N.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _certain_exprs(e):
    """The sub-expressions always evaluated when ``e`` is (not the unchosen side of a
    conditional expression or the short-circuited side of and/or)."""
    yield e
    if isinstance(e, N.Select):
        kids = [e.cond]
    elif isinstance(e, N.BinOp) and e.op in ("and", "or"):
        kids = [e.a]
    else:
        kids = N.child_exprs(e)
    for c in kids:
        yield from _certain_exprs(c)


def _record(exprs, env, facts) -> None:
    for top in exprs:
        for x in _certain_exprs(top):
            if isinstance(x, (N.Load, N.Atomic)):
                _record_access(x.array, x.index, x.loc, env, facts)


def _record_access(arr: N.ArrayInfo, index, loc, env, facts) -> None:
    if arr.space != "global" or len(index) != arr.ndim:
        return
    for d, ix in enumerate(index):
        c = _coord(ix, env)
        if c is not None:
            facts.append(Affine(arr.name, d, c[0], c[1], c[2], N.site_text(loc)))


def _exits(stmts) -> bool:
    """Whether a statement list may leave the kernel or the enclosing inlined function early."""
    return any(isinstance(s, (N.Return, N.FuncExit)) for s in N.walk_stmts(stmts))


def _scan(stmts, env, counts, facts) -> bool:
    """Record the certain accesses of a straight-line prefix; False where the scan stopped
    (what follows may not run for every work item)."""
    for s in stmts:
        if isinstance(s, N.Assign):
            _record([s.value], env, facts)
            if counts[s.var] == 1:
                c = _coord(s.value, env)
                if c is not None:
                    env[s.var] = c
        elif isinstance(s, N.Store):
            _record(list(s.index) + [s.value], env, facts)
            _record_access(s.array, s.index, s.loc, env, facts)
        elif isinstance(s, N.ExprStmt):
            _record([s.expr], env, facts)
        elif isinstance(s, (N.If, N.While, N.For)):
            _record(N.stmt_exprs(s), env, facts)
            if _exits(s.body) or _exits(getattr(s, "orelse", [])):
                return False
        elif isinstance(s, N.FuncBlock):
            _scan(s.body, env, counts, facts)       # a FuncExit jumps to the block's end
            if any(isinstance(x, N.Return) for x in N.walk_stmts(s.body)):
                return False
        elif isinstance(s, (N.Barrier, N.AllocArray)):
            continue
        else:
            return False
    return True


def alloc_bytes(k: N.Kernel, space: str, copies: dict | None = None) -> tuple:
    """``(bytes, loc of the largest)`` of the ``space`` (``local`` or ``private``) arrays the
    kernel allocates; ``copies``: array name -> how many instances exist at once (e.g. a
    private array kept per work item of a group), 1 when absent."""
    total, big, loc = 0, -1, None
    for s in N.walk_stmts(k.body):
        if isinstance(s, N.AllocArray) and s.array.space == space:
            n = s.array.dtype.itemsize * (copies or {}).get(s.array.name, 1)
            for x in s.array.shape:
                n *= x
            total += n
            if n > big:
                big, loc = n, s.loc
    return total, loc
