"""Faster adjoints: rewrites of the kernel :func:`.autodiff.reverse_kernel` builds.

The reverse transformation adds the gradient of every read ``T[idx]`` into ``dT[idx]``,
atomically unless ``idx`` is the work item's own index. These passes remove that cost where
it is provably unnecessary, and the per-item scalar partial sums:

* **Single offset** (:func:`plain_single_offset_adds`): when a read-only array is read only at
  ``I + c`` with one constant offset ``c`` (``I`` the item's Cartesian index, or its linear
  index in 1-D), distinct items touch distinct elements, so the atomic adds become plain adds.
* **Gather form** (:func:`find_gathers`, :func:`without_accumulations`, :func:`gather_kernel`):
  when a read-only array ``T`` is read at several constant offsets ``I + c_k`` of a flat,
  loop-free kernel whose other arrays are write-only outputs (stored at most once, never
  read), the main adjoint leaves ``dT`` alone and a separate *gather* kernel computes it:
  launched over the bounding box of the elements ``J = I + c_k`` (so the ring outside an
  interior launch range gets its contributions too), each item ``J`` evaluates, for every
  ``c_k``, the part of the adjoint of the source item ``J - c_k`` that lands on ``J`` (the
  statements it needs, :func:`_slice`; when the item lies in the primal launch range, its
  ``if`` conditions re-evaluated there, its tape private); one plain add per element, no
  atomics. An interior kernel covers the box where every source item exists (no tests), a
  ring kernel the boxes around it (:func:`gather_boxes`). It runs before the main adjoint,
  which consumes the output shadows it reads.
* **Dead primal stores** (:func:`without_dead_stores`): a store to an array the kernel never
  reads is dead in the adjoint (nothing in it reads the value), so the adjoint writes only
  shadows and leaves primal memory as it found it.
* **Scalar gradients**: instead of one partial sum per work item, on the CPU
  (:func:`per_thread_partials`) each thread sums its items' partials in the flat loop (an
  OpenMP ``simd`` reduction, so the loop still vectorizes) and writes one per thread; on
  the other backends (:func:`reduce_scalar_partials`) each group reduces its items'
  partials (``group_reduce``) and writes one per group. The launcher adds those up (a sum
  in another order than per item: equal up to float rounding; deterministic for a given
  thread count or group size).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .. import dtypes as D
from ..dtypes import Ty
from ..ir import nodes as N
from .autodiff import _assign_sites, _single_defs

B = Ty(D.bool_)
TAPES = ("_tk_tape_f", "_tk_tape_i")
GATHER_INDEX_KINDS = {"global", "global_linear", "global_pos", "ndrange"}


@dataclass(frozen=True)
class Gather:
    """Array ``array`` (shadow ``shadow``) is read at ``offsets`` from the item's index:
    ``kind`` "cart" (one offset per dimension of the Cartesian index) or "lin" (1-D, the
    linear index)."""
    array: str
    shadow: str
    kind: str
    offsets: tuple


def gather_param_names() -> list:
    """Extra integer scalars of a gather kernel: the primal range's start, step and count in
    each of three dimensions (unused dimensions get 0, 1, 1)."""
    return [f"_tk_g{w}{d}" for d in range(3) for w in ("s", "t", "n")]


def ring_param_names() -> list:
    """Extra integer scalars of the ring gather kernel: per dimension, a cut and a jump:
    launch coordinates from the cut on are moved by the jump (one launch covers the two
    slabs on either side of the interior box)."""
    return [f"_tk_g{w}{d}" for d in range(3) for w in ("c", "j")]


def gather_args(geom: tuple) -> list:
    """The values of :func:`gather_param_names` for a launch's geometry 9-tuple."""
    return [v for d in range(3) for v in (geom[3 * d], geom[3 * d + 2], geom[3 * d + 1])]


# ----------------------------------------------------------------------------- analyses

def _resolve(e: N.Expr, single: dict, depth: int = 0):
    """(kind, dim, offset) when ``e`` is the item's index plus a constant, else None."""
    while isinstance(e, N.Cast) and e.ty.dtype.is_int and e.a.ty.dtype.is_int and e.ty.dtype.bits >= 32:
        e = e.a
    if isinstance(e, N.Var) and e.name in single and depth < 16:
        return _resolve(single[e.name], single, depth + 1)
    if isinstance(e, N.Index) and e.kind in ("global", "global_linear"):
        return ("cart" if e.kind == "global" else "lin", e.dim, 0)
    if isinstance(e, N.BinOp) and e.op in ("+", "-"):
        a, b = e.a, e.b
        if e.op == "+" and isinstance(a, N.Const) and not isinstance(b, N.Const):
            a, b = b, a
        if isinstance(b, N.Const) and isinstance(b.value, int) and not isinstance(b.value, bool):
            r = _resolve(a, single, depth + 1)
            if r is not None:
                return (r[0], r[1], r[2] + (b.value if e.op == "+" else -b.value))
    return None


def _offset(idx: list, ndim: int, single: dict):
    """(kind, offsets tuple) of an access index, or None when it is not a constant offset."""
    rs = [_resolve(i, single) for i in idx]
    if any(r is None for r in rs):
        return None
    if len(rs) == 1 and rs[0][0] == "lin" and ndim == 1:
        return "lin", (rs[0][2],)
    if len(rs) == ndim and all(r[0] == "cart" and r[1] == d for d, r in enumerate(rs)):
        return "cart", tuple(r[2] for r in rs)
    return None


def _shadow_names(k: N.Kernel) -> dict:
    """Primal array name -> its shadow array's name (float arrays that get a gradient)."""
    names = [p[1].name for p in k.params if p[0] == "array"]
    return {a: f"_d_{a}" for a in names if f"_d_{a}" in names}


def _accumulation(s: N.Stmt, shadow: str):
    """(index, gradient) when ``s`` adds to shadow array ``shadow`` (atomic or plain add)."""
    if isinstance(s, N.ExprStmt) and isinstance(s.expr, N.Atomic) and s.expr.array.name == shadow \
            and s.expr.op == "add":
        return s.expr.index, s.expr.args[0]
    if isinstance(s, N.Store) and s.array.name == shadow and isinstance(s.value, N.BinOp) and s.value.op == "+" \
            and isinstance(s.value.a, N.Load) and s.value.a.array.name == shadow:
        return s.index, s.value.b
    return None


@dataclass
class _Facts:
    loads: dict       # array -> list of Load index lists
    stores: dict      # array -> number of Store statements
    atomics: set      # arrays with atomics (as statements or values)
    kinds: set        # Index kinds used
    loops: bool
    other: bool       # barriers, collectives, local memory, prints


def _facts(k: N.Kernel) -> _Facts:
    f = _Facts({}, {}, set(), set(), False, False)
    for s in N.walk_stmts(k.body):
        if isinstance(s, N.Store):
            f.stores[s.array.name] = f.stores.get(s.array.name, 0) + 1
        elif isinstance(s, (N.While, N.For)):
            f.loops = True
        elif isinstance(s, (N.Barrier, N.Collective, N.Print, N.FuncBlock)):
            f.other = True
        elif isinstance(s, N.AllocArray) and s.array.space != "private":
            f.other = True
    for e in N.walk_exprs(k.body):
        if isinstance(e, N.Load):
            f.loads.setdefault(e.array.name, []).append(e.index)
        elif isinstance(e, N.Atomic):
            f.atomics.add(e.array.name)
        elif isinstance(e, N.Index):
            f.kinds.add(e.kind)
    return f


def _array_offsets(k: N.Kernel, single: dict, name: str):
    """(kind, sorted distinct offsets) of every read of ``name``, or None."""
    found = set()
    for idx in _facts_loads(k, name):
        o = _offset(idx, k.ndim, single)
        if o is None:
            return None
        found.add(o)
    kinds = {o[0] for o in found}
    if len(kinds) != 1:
        return None
    return kinds.pop(), tuple(sorted(o[1] for o in found))


def _facts_loads(k: N.Kernel, name: str) -> list:
    return [e.index for e in N.walk_exprs(k.body) if isinstance(e, N.Load) and e.array.name == name]


def _candidates(k: N.Kernel):
    """(facts, single defs, {array: (kind, offsets)}) for read-only arrays whose gradient is
    added atomically and which are read only at constant offsets."""
    f = _facts(k)
    single = _single_defs(k.body, _assign_sites(k.body))
    out = {}
    for a, sh in _shadow_names(k).items():
        if a in f.stores or a in f.atomics or sh not in f.atomics:
            continue
        if any(s.array.name == sh for s in N.walk_stmts(k.body) if isinstance(s, N.Store)
               and _accumulation(s, sh) is None):
            continue
        o = _array_offsets(k, single, a)
        if o is not None:
            out[a] = o
    return f, single, out


def _path_stores(stmts) -> dict:
    """Array -> the most Store statements to it on one path through ``stmts`` (no loops)."""
    out: dict = {}
    for s in stmts:
        if isinstance(s, N.Store):
            out[s.array.name] = out.get(s.array.name, 0) + 1
        elif isinstance(s, N.If):
            a, b = _path_stores(s.body), _path_stores(s.orelse)
            for name in set(a) | set(b):
                out[name] = out.get(name, 0) + max(a.get(name, 0), b.get(name, 0))
        elif isinstance(s, (N.While, N.For, N.FuncBlock)):
            for name, n in _path_stores(s.body).items():
                out[name] = out.get(name, 0) + n * (2 if not isinstance(s, N.FuncBlock) else 1)
    return out


def _map_stmts(stmts, fn) -> list:
    """Rebuild a statement list: ``fn(s)`` gives the replacement list of a leaf statement."""
    out = []
    for s in stmts:
        if isinstance(s, N.If):
            out.append(N.If(s.loc, s.cond, _map_stmts(s.body, fn), _map_stmts(s.orelse, fn)))
        elif isinstance(s, (N.While, N.For, N.FuncBlock)):
            out.append(replace(s, body=_map_stmts(s.body, fn)))
        else:
            out += fn(s)
    return out


# ----------------------------------------------------------------------------- main-kernel rewrites

def plain_single_offset_adds(k: N.Kernel) -> N.Kernel:
    """Atomic adds into the shadow of an array read at one constant offset become plain adds."""
    _, _, cands = _candidates(k)
    single = {f"_d_{a}" for a, (_, offs) in cands.items() if len(offs) == 1}
    if not single:
        return k

    def fn(s):
        if isinstance(s, N.ExprStmt) and isinstance(s.expr, N.Atomic) and s.expr.array.name in single:
            e = s.expr
            old = N.Load(e.ty, s.loc, e.array, e.index)
            return [N.Store(s.loc, e.array, e.index, N.BinOp(e.ty, s.loc, "+", old, e.args[0]))]
        return [s]
    return replace(k, body=_map_stmts(k.body, fn))


def find_gathers(k: N.Kernel, grouped: bool) -> list:
    """The arrays whose shadows a gather kernel computes (see the module docstring)."""
    if grouped:
        return []
    f, _, cands = _candidates(k)
    multi = {a: o for a, o in cands.items() if len(o[1]) > 1}
    if not multi or f.loops or f.other or not f.kinds <= GATHER_INDEX_KINDS:
        return []
    shadows = set(_shadow_names(k).values())
    primal_atomics = {a for a in f.atomics if a not in shadows}
    if primal_atomics:
        return []
    for a, n in _path_stores(k.body).items():
        if a in shadows or a in TAPES or a.startswith("_d_"):
            continue
        if n > 1 or a in f.loads:     # outputs must be write-only, stored at most once per item
            return []
    return [Gather(a, f"_d_{a}", kind, offs) for a, (kind, offs) in sorted(multi.items())]


def without_accumulations(k: N.Kernel, gathers: list) -> N.Kernel:
    """The main adjoint without the adds into the gathered shadows."""
    names = {g.shadow for g in gathers}
    if not names:
        return k

    def fn(s):
        return [] if any(_accumulation(s, n) is not None for n in names) else [s]
    return replace(k, body=_map_stmts(k.body, fn))


def without_dead_stores(k: N.Kernel, primal: set) -> N.Kernel:
    """Drop stores and atomics (value unused) to primal arrays in ``primal`` that nothing reads."""
    f = _facts(k)
    read = set(f.loads)
    used_atomics = set()          # an atomic whose value is used reads the array
    for s in N.walk_stmts(k.body):
        for e in N.stmt_exprs(s):
            if isinstance(s, N.ExprStmt) and e is s.expr:
                continue
            used_atomics |= {x.array.name for x in N.walk_expr(e) if isinstance(x, N.Atomic)}
    dead = {a for a in primal if a not in read and a not in used_atomics}
    if not dead:
        return k

    def fn(s):
        if isinstance(s, N.Store) and s.array.space == "global" and s.array.name in dead:
            return []
        if isinstance(s, N.ExprStmt) and isinstance(s.expr, N.Atomic) and s.expr.array.name in dead:
            return []
        return [s]
    return replace(k, body=_map_stmts(k.body, fn))


def per_thread_partials(k: N.Kernel, scalar_shadows: set) -> N.Kernel:
    """The top-level stores ``dS[global_linear] = acc`` are dropped and listed in the
    kernel's ``item_sums`` (``(acc, dS)`` pairs): the CPU's flat loop sums ``acc`` over each
    thread's items and stores the sum to ``dS[thread]`` (:meth:`.codegen.c.CRenderer.item_sums`)."""
    body, sums = [], []
    for s in k.body:
        if isinstance(s, N.Store) and s.array.name in scalar_shadows and isinstance(s.value, N.Var):
            sums.append((s.value.name, s.array))
        else:
            body.append(s)
    if not sums:
        return k
    out = replace(k, body=body)
    out.item_sums = tuple(sums)
    return out


STRIP = 16            # work items of the primal launch per work item of a strip-form adjoint
STRIP_UNROLL = 96     # statements of an item's adjoint up to which the strip is unrolled


def strip_ndrange(geom: tuple, ndim: int) -> tuple:
    """The ndrange of a strip-form adjoint (:func:`strip_scalar_partials`) for the primal
    launch ``geom``: the same in every dimension but the last, whose ``n`` items become
    ``ceil(n / STRIP)`` positions."""
    out = []
    for d in range(ndim):
        start, count, step = geom[3 * d:3 * d + 3]
        out.append(range(-(-count // STRIP)) if d == ndim - 1 else range(start, start + count * step, step))
    return tuple(out)


def strip_scalar_partials(k: N.Kernel, scalar_shadows: set, partial_dtypes: dict | None = None,
                          contiguous: bool = False, unit_steps: bool = False):
    """One partial gradient per STRIP items, without group collectives (the kernel stays
    flat, and vectorizers that map work items to SIMD lanes, like PoCL's, keep working):
    work item ``w`` of a launch over :func:`strip_ndrange` runs the adjoint of the items at
    last-dimension positions ``w, w + W, ..., w + (STRIP - 1) W`` (``W`` that launch's last
    extent: neighbouring work items take neighbouring items, as GPUs coalesce), or with
    ``contiguous`` the positions ``STRIP w, ..., STRIP w + STRIP - 1`` (for runtimes that run
    a group's work items as a vectorized loop on a CPU, like PoCL: there the interleaved
    strips read each array as STRIP streams at once: triad's adjoint kernel 1.6-2x slower);
    its scalar accumulators summed across them and stored to ``dS[its global_linear]``. The
    primal geometry comes in :func:`gather_param_names`; ``unit_steps``: the primal launch's
    steps are all 1, so an item's last coordinate is ``start + position`` (with a step from
    the arguments, its stride is unknown to the compiler: PoCL gathers every load). None
    when the kernel uses other geometry than its global index, position, linear index and
    extent."""
    f = _facts(k)
    if not f.kinds <= GATHER_INDEX_KINDS:
        return None
    flush = [s for s in k.body if isinstance(s, N.Store) and s.array.name in scalar_shadows
             and isinstance(s.value, N.Var)]
    accs = {s.value.name for s in flush}
    inits = [s for s in k.body if isinstance(s, N.Assign) and s.var in accs and isinstance(s.value, N.Const)]
    if not flush or {s.var for s in inits} != accs or len(inits) != len(accs):
        return None
    loc = flush[0].loc
    locs = dict(k.locals)
    it = Ty(_tape_dtype(k, 1))
    last = k.ndim - 1
    arg = lambda w, d: N.Arg(it, loc, f"_tk_g{w}{d}")  # noqa: E731
    c = lambda v: N.Const(it, loc, v)  # noqa: E731
    op = lambda o, a, b: N.BinOp(a.ty, loc, o, a, b)  # noqa: E731
    pos, ctr = "_tk_spos", "_tk_sk"
    locs[pos], locs[ctr] = it, it
    vpos, vctr = N.Var(it, loc, pos), N.Var(it, loc, ctr)

    def sub(e):
        if isinstance(e, N.Index) and (e.kind == "global_linear" or e.dim == last):
            if e.kind == "global":
                v = op("+", arg("s", last), vpos if unit_steps else op("*", vpos, arg("t", last)))
            elif e.kind == "global_pos":
                v = vpos
            elif e.kind == "ndrange":
                v = arg("n", last)
            else:
                v = vpos
                if last:
                    lin = N.Index(it, loc, "global_pos", 0)
                    for d in range(1, last):
                        lin = op("+", op("*", lin, arg("n", d)), N.Index(it, loc, "global_pos", d))
                    v = op("+", op("*", lin, arg("n", last)), vpos)
            return v if e.ty.dtype == it.dtype else N.Cast(e.ty, e.loc, v)
        kids = N.child_exprs(e)
        return _rebuild(e, [sub(x) for x in kids]) if kids else e

    def fn(s):
        if any(s is x for x in flush) or any(s is x for x in inits):
            return []
        if isinstance(s, N.Assign):
            return [N.Assign(s.loc, s.var, sub(s.value))]
        if isinstance(s, N.Store):
            return [N.Store(s.loc, s.array, [sub(i) for i in s.index], sub(s.value))]
        if isinstance(s, N.ExprStmt):
            return [N.ExprStmt(s.loc, sub(s.expr))]
        if isinstance(s, N.Philox):
            return [N.Philox(s.loc, s.outs, [sub(x) for x in s.args])]
        return [s]
    item = _sub_conds(_map_stmts(k.body, fn), sub)
    item = [x for x in item if not (isinstance(x, N.AllocArray))]
    allocs = [x for x in k.body if isinstance(x, N.AllocArray)]
    width = N.Index(it, loc, "ndrange", last)
    targets = {s.value.name: (partial_dtypes or {}).get(s.array.name, s.array.dtype) for s in flush}
    narrow = _narrow_accumulators(item, targets, locs)
    if narrow:
        item = _map_stmts(item, lambda s: [_narrowed(s, narrow)])
        inits = [N.Assign(s.loc, s.var, N.Const(narrow[s.var], s.loc, 0.0)) if s.var in narrow else s
                 for s in inits]
        flush = [N.Store(s.loc, s.array, s.index, N.Var(narrow[s.value.name], s.loc, s.value.name))
                 if s.value.name in narrow else s for s in flush]

    def one(m):
        gpos = N.Index(it, loc, "global_pos", last)
        first = op("+", op("*", gpos, c(STRIP)), m) if contiguous else op("+", gpos, op("*", m, width))
        return [N.Assign(loc, pos, first),
                N.If(loc, N.Compare(B, loc, "<", vpos, arg("n", last)), item)]
    body = allocs + inits
    if sum(1 for _ in N.walk_stmts(item)) <= STRIP_UNROLL:     # unrolled: SIMD-lane vectorizers
        for m in range(STRIP):                                 # (PoCL) keep the items in lanes
            body += one(c(m))
    else:
        inc = N.Assign(loc, ctr, op("+", vctr, c(1)))
        body += [N.Assign(loc, ctr, c(0)), N.While(loc, N.Compare(B, loc, "<", vctr, c(STRIP)), one(vctr) + [inc])]
    gl = N.Index(it, loc, "global_linear")
    body += [N.Store(s.loc, s.array, [gl], s.value) for s in flush]
    return replace(k, body=body, locals=locs, params=list(k.params) + _gather_params(k))


def _narrow_accumulators(item: list, targets: dict, locs: dict) -> dict:
    """{accumulator: float32 type} for the scalar accumulators of a strip-form item whose
    partials array (``targets``: accumulator -> its dtype) is float32 and which only ever add
    float32 values widened to float64 (``acc = acc + (double)(g * c)`` on float32 data): the
    strip sums its STRIP items in float32 (rounding near 1e-6 relative) and stores float32,
    so the kernel has no float64 left to halve the vector width; the launcher sums the
    partials in float64. ``locs`` gets the new types."""
    f32 = Ty(D.float32)
    found, bad = {}, set()
    for s in N.walk_stmts(item):
        own = None
        if isinstance(s, N.Assign) and s.var in targets:
            v = s.value
            if (isinstance(v, N.BinOp) and v.op == "+" and isinstance(v.a, N.Var) and v.a.name == s.var
                    and isinstance(v.b, N.Cast) and v.b.a.ty == f32):
                found[s.var], own = f32, v.a
            else:
                bad.add(s.var)
        for e in N.stmt_exprs(s):              # read anywhere but in its own update: keep it wide
            bad |= {x.name for x in N.walk_expr(e) if isinstance(x, N.Var) and x.name in targets and x is not own}
    out = {a: t for a, t in found.items() if a not in bad and targets[a] == D.float32}
    locs.update(out)
    return out


def retype_partials(k: N.Kernel, dtypes: dict) -> N.Kernel:
    """The kernel with each scalar shadow (the per-work-item, -thread or -group partial
    gradients) of ``dtypes`` (name -> dtype of the array the launcher passes) declared with
    that dtype, its stores converting to it where their value has another."""
    params, change = [], {}
    for p in k.params:
        if p[0] == "array" and p[1].name in dtypes and p[1].dtype != dtypes[p[1].name]:
            p = ("array", replace(p[1], dtype=dtypes[p[1].name]))
            change[p[1].name] = p[1]
        params.append(p)
    if not change:
        return k

    def fn(s):
        if isinstance(s, N.Store) and s.array.name in change:
            a = change[s.array.name]
            v = s.value if s.value.ty.dtype == a.dtype else N.Cast(Ty(a.dtype), s.loc, s.value)
            return [N.Store(s.loc, a, s.index, v)]
        return [s]
    out = replace(k, body=_map_stmts(k.body, fn), params=params)
    for attr in ("tape", "gathers", "partials", "item_sums"):
        if hasattr(k, attr):
            setattr(out, attr, getattr(k, attr))
    return out


def _narrowed(s: N.Stmt, narrow: dict) -> N.Stmt:
    """An accumulator update of :func:`_narrow_accumulators` without its widening."""
    if isinstance(s, N.Assign) and s.var in narrow:
        t = narrow[s.var]
        return N.Assign(s.loc, s.var, N.BinOp(t, s.loc, "+", N.Var(t, s.loc, s.var), s.value.b.a))
    return s


def _gather_params(k: N.Kernel) -> list:
    """The IR parameters of :func:`gather_param_names` (integers of the tape's width)."""
    it = Ty(_tape_dtype(k, 1))
    return [("scalar", p, it) for p in gather_param_names()]


def reduce_scalar_partials(k: N.Kernel, scalar_shadows: set) -> N.Kernel:
    """One partial gradient per group instead of per item: the top-level stores
    ``dS[global_linear] = acc`` become ``r = group_reduce(acc, add)`` and a store of ``r`` to
    ``dS[group_linear]`` by the group's first item."""
    body, locs = [], dict(k.locals)
    n = 0
    for s in k.body:
        if isinstance(s, N.Store) and s.array.name in scalar_shadows and isinstance(s.value, N.Var):
            n += 1
            t = s.value.ty
            dst = f"_tk_red{n}"
            locs[dst] = t
            it = Ty(_tape_dtype(k, 1))
            lid = N.Index(it, s.loc, "local_linear")
            first = N.Compare(B, s.loc, "==", lid, N.Const(it, s.loc, 0))
            body += [N.Collective(s.loc, "reduce", "add", dst, s.value.name, t),
                     N.If(s.loc, first, [N.Store(s.loc, s.array, [N.Index(it, s.loc, "group_linear")],
                                                 N.Var(t, s.loc, dst))])]
        else:
            body.append(s)
    if not n:
        return k
    out = replace(k, body=body, locals=locs)
    out.uses = set(k.uses) | {"collective"}
    return out


# ----------------------------------------------------------------------------- the gather kernel

def gather_kernel(k: N.Kernel, g: Gather, nf: int, ni: int, variant: str = "") -> N.Kernel:
    """The kernel that adds ``dT[J] += sum_k contribution of item J - c_k`` for ``g`` (``k``
    is the adjoint before :func:`without_accumulations`; ``nf``/``ni`` its static tape).

    For each offset it keeps only the statements the contribution through that read needs
    (:func:`_slice`: for a linear stencil, one load of the output shadow times a constant).
    ``variant`` (see :data:`GATHER_VARIANTS`): "in" runs only where every source item
    ``J - c_k`` is in the primal launch range (see :func:`gather_boxes`), so it tests
    nothing and its loop vectorizes; "ring" (steps 1) clamps each source item into the
    launch range and masks the contribution of a clamped one with a select (no branches,
    so GPU-style vectorizers such as PoCL's keep it vectorized); "ring<d>" is "ring" for the
    slabs of dimension ``d`` (:func:`gather_boxes`), whose coordinates after ``d`` lie in
    the interior box: only the first ``d + 1`` are clamped and only coordinate ``d`` is moved
    by the jump, so the last one, along which the loop runs, indexes contiguous elements (in
    "ring0" a loop GCC vectorizes); "ringT" is "ring" for the slabs of the last
    dimension, launched with its last two dimensions swapped (launch dimension ``ndim - 2``
    gives the element's last coordinate and the other way round): their few elements per
    row become the outer loop, the rows the inner one; "" (any step) tests that each source
    item exists. A "P" appended ("inP", "ring0P", "ring1P": the CPU's peeled 3-D form, see
    :func:`gather_boxes`) makes the body one ``If``: the variant's body where the last
    coordinate lies in the interior's range, else the same with the last coordinate clamped
    and masked too (``Kernel.peel_last`` names the range for the C renderer)."""
    peel = variant.endswith("P")
    base = variant[:-1] if peel else variant
    interior, ring = base == "in", base.startswith("ring")
    loc = k.body[0].loc if k.body else N.NOLOC
    locs = dict(k.locals)
    ndim = k.ndim
    clamped = int(base[4:]) if base[4:].isdigit() else ndim - 1    # ring kernels: the last clamped dim
    clamps = set(range(clamped + 1)) if ring else set()            # the coordinates clamped and masked
    it = Ty(_tape_dtype(k, 1))         # int64, or int32 on backends without 64-bit integers
    params = list(k.params) + [("scalar", p, it) for p in gather_param_names()
                               + (ring_param_names() if ring else [])]
    arg = lambda w, d: N.Arg(it, loc, f"_tk_g{w}{d}")  # noqa: E731
    c = lambda v, t=it: N.Const(t, loc, v)  # noqa: E731
    var = lambda name: N.Var(locs[name], loc, name)  # noqa: E731
    op = lambda o, a, b: N.BinOp(a.ty, loc, o, a, b)  # noqa: E731
    cmp = lambda o, a, b: N.Compare(B, loc, o, a, b)  # noqa: E731

    def fresh(name, t):
        locs[name] = t
        return name

    sh = next(p[1] for p in k.params if p[0] == "array" and p[1].name == g.shadow)
    st = Ty(sh.dtype)
    acc = fresh("_tk_gacc", st)
    tf = N.ArrayInfo("_tk_ptape_f", _tape_dtype(k, 0), 1, "private", False, True, (max(1, nf),))
    ti = N.ArrayInfo("_tk_ptape_i", _tape_dtype(k, 1), 1, "private", False, True, (max(1, ni),))
    cursors = {e.index[0].name for e in N.walk_exprs(k.body) if isinstance(e, N.Load) and e.array.name in TAPES
               and isinstance(e.index[0], N.Var)}
    cursors |= {s.index[0].name for s in N.walk_stmts(k.body) if isinstance(s, N.Store)
                and s.array.name in TAPES and isinstance(s.index[0], N.Var)}
    pos = [fresh(f"_tk_gpos{d}", it) for d in range(ndim)]
    crd = [fresh(f"_tk_gcrd{d}", it) for d in range(ndim)]
    lin = fresh("_tk_glin", it)
    ok = fresh("_tk_gok", B)
    part = fresh("_tk_gpart", st)
    raw = [fresh(f"_tk_graw{d}", it) for d in range(ndim)]
    jv = [fresh(f"_tk_gj{d}", it) for d in range(ndim)]

    def elem(d):
        """Coordinate ``d`` of this item's element J (the ring kernel's jump applied)."""
        return var(jv[d]) if ring else N.Index(it, loc, "global", d)

    def sub_expr(e):
        """The expression with the work-item geometry of the source item."""
        if isinstance(e, N.Index):
            if e.kind == "global":
                v = var(crd[e.dim])
            elif e.kind == "global_pos":
                v = var(pos[e.dim])
            elif e.kind == "global_linear":
                v = var(lin)
            elif e.kind == "ndrange":
                v = arg("n", e.dim)
            else:
                raise AssertionError(e.kind)
            return v if e.ty.dtype == it.dtype else N.Cast(e.ty, e.loc, v)
        if isinstance(e, N.Load) and e.array.name in TAPES:
            return N.Load(e.ty, e.loc, tf if e.array.name == TAPES[0] else ti, [sub_expr(i) for i in e.index])
        kids = N.child_exprs(e)
        if not kids:
            return e
        return _rebuild(e, [sub_expr(x) for x in kids])

    def body_for(off, into) -> list:
        def fn(s):
            a = _accumulation(s, g.shadow)
            if a is not None:
                idx, grad = a
                o = _offset(idx, ndim, single)
                if o is not None and o[1] == off:
                    return [N.Assign(s.loc, into, op("+", var(into), _cast(sub_expr(grad), st)))]
                return []
            if isinstance(s, N.Store):
                if s.array.name in TAPES:
                    arr = tf if s.array.name == TAPES[0] else ti
                    return [N.Store(s.loc, arr, [sub_expr(i) for i in s.index], sub_expr(s.value))]
                return []            # outputs and other shadows: not this kernel's business
            if isinstance(s, N.ExprStmt):
                return []
            if isinstance(s, N.Assign):
                if s.var in cursors and any(isinstance(x, N.Index) for x in N.walk_expr(s.value)):
                    return [N.Assign(s.loc, s.var, c(0, locs[s.var]))]   # private tape from 0
                return [N.Assign(s.loc, s.var, sub_expr(s.value))]
            if isinstance(s, N.Philox):
                return [N.Philox(s.loc, s.outs, [sub_expr(x) for x in s.args])]
            return [s]
        inner = _map_stmts(k.body, fn)
        return _sub_conds(inner, sub_expr)

    def geometry(off, clamps) -> tuple:
        """(statements setting the source item's geometry, its existence test or None);
        ``clamps``: the coordinates clamped into the range and masked (ring kernels and
        peeled edges; the others lie in the interior's range there)."""
        masking = bool(clamps)
        setup, test = [], None
        for d in range(ndim):
            j = elem(d)
            if masking and d not in clamps:              # the interior's range: every source exists
                setup += [N.Assign(loc, crd[d], op("-", j, c(off[d]))),
                          N.Assign(loc, pos[d], op("-", var(crd[d]), arg("s", d)))]
                continue
            if masking:                      # clamped into the range; the test masks
                q = op("-", j, c(off[d])) if g.kind == "lin" else op("-", op("-", j, c(off[d])), arg("s", d))
                top = op("-", arg("n", d), c(1))
                setup += [N.Assign(loc, raw[d], q),
                          N.Assign(loc, pos[d], N.Select(it, loc, cmp("<", var(raw[d]), c(0)), c(0), N.Select(
                              it, loc, cmp(">", var(raw[d]), top), top, var(raw[d])))),
                          N.Assign(loc, crd[d], op("+", arg("s", d), op("*", var(pos[d]), arg("t", d)))
                                   if g.kind == "lin" else op("+", arg("s", d), var(pos[d])))]
                test = (test or []) + [cmp("==", var(raw[d]), var(pos[d]))]     # a list: see below
                continue
            if g.kind == "lin":
                setup += [N.Assign(loc, pos[d], op("-", j, c(off[0]))),
                          N.Assign(loc, crd[d], op("+", arg("s", 0), op("*", var(pos[d]), arg("t", 0))))]
                exact = None
            elif interior:                                             # steps are 1 here
                setup += [N.Assign(loc, crd[d], op("-", j, c(off[d]))),
                          N.Assign(loc, pos[d], op("-", var(crd[d]), arg("s", d)))]
                exact = None
            else:
                q = op("-", op("-", j, c(off[d])), arg("s", d))        # J - c - start
                setup += [N.Assign(loc, pos[d], N.Select(it, loc, cmp("==", arg("t", d), c(1)), q,
                                                         op("//", q, arg("t", d)))),
                          N.Assign(loc, crd[d], op("-", j, c(off[d])))]
                exact = cmp("==", op("*", var(pos[d]), arg("t", d)), q)
            if interior:
                continue
            inside = N.BinOp(B, loc, "and", cmp(">=", var(pos[d]), c(0)), cmp("<", var(pos[d]), arg("n", d)))
            cond = inside if exact is None else N.BinOp(B, loc, "and", exact, inside)
            test = cond if test is None else N.BinOp(B, loc, "and", test, cond)
        lin_e = var(pos[0])
        for d in range(1, ndim):
            lin_e = op("+", op("*", lin_e, arg("n", d)), var(pos[d]))
        return setup + [N.Assign(loc, lin, lin_e)], test

    single = _single_defs(k.body, _assign_sites(k.body))
    own = [elem(d) for d in range(len(g.offsets[0]) if g.kind == "cart" else 1)]

    def build(clamps) -> list:
        """The whole body for one clamp set: per offset the contribution (masked where a
        coordinate is clamped), then one add into the element's shadow."""
        body = [N.AllocArray(loc, tf), N.AllocArray(loc, ti), N.Assign(loc, acc, c(0.0, st))]
        if ring:
            swap = {ndim - 1: ndim - 2, ndim - 2: ndim - 1} if base == "ringT" else {}
            for d in range(ndim):
                x = N.Index(it, loc, "global", swap.get(d, d))
                if base != "ring" and d == clamped:   # only the slab dimension jumps: the
                    x = op("+", x, N.Select(it, loc, cmp(">=", x, arg("c", d)), arg("j", d), c(0)))
                body.append(N.Assign(loc, jv[d], x))  # others stay plain (contiguous rows)
        for off in g.offsets:
            setup, test = geometry(off, clamps)
            if test is None:
                body += setup + body_for(off, acc)
            elif clamps:
                body += setup + [N.Assign(loc, part, c(0.0, st))] + body_for(off, part) + \
                    [N.Assign(loc, acc, op("+", var(acc), _masked(var(part), test)))]
            else:
                body += setup + [N.Assign(loc, ok, test), N.If(loc, var(ok), body_for(off, acc))]
        body, _ = _slice(body, {acc})
        return body + [N.Store(loc, sh, own, N.BinOp(st, loc, "+", N.Load(st, loc, sh, own), var(acc)))]

    peel_last = None
    if not peel:
        body = build(clamps)
    else:                   # one If: the last coordinate inside the interior's range or not
        last = ndim - 1
        lo = op("+", arg("s", last), c(max(o[last] for o in g.offsets)))
        hi = op("+", op("+", arg("s", last), arg("n", last)), c(min(o[last] for o in g.offsets)))
        x = N.Index(it, loc, "global", last)
        cond = N.BinOp(B, loc, "and", cmp(">=", x, lo), cmp("<", x, hi))
        body, peel_last = [N.If(loc, cond, build(clamps), build(clamps | {last}))], (lo, hi)
    out = replace(k, body=body, locals=locs, params=params, name=k.name, peel_last=peel_last)
    out.uses = (set(k.uses) - {"atomic"}) | {"private"}
    return out


def _masked(value: N.Expr, conds: list) -> N.Expr:
    """``value`` where every condition of ``conds`` holds, else +0.0, without a branch or a
    select of the float: the value's bits ANDed with a mask of all ones or zeros (nested
    integer selects; exactly ``value`` or +0.0, NaN and inf included). A select of the
    float (``c ? part : 0.0``) lets GCC sink the loads ``part`` needs under the condition,
    and the masked loads it makes of them keep the ring loops from vectorizing; one "and"
    of the conditions would be "&&" in C, a branch."""
    t, loc = value.ty, value.loc
    if t.dtype.bits not in (32, 64):          # no such shadows today (narrow floats' are float32)
        for cond in conds:
            value = N.Select(t, loc, cond, value, N.Const(t, loc, 0.0))
        return value
    ut = Ty(D.uint64 if t.dtype.bits == 64 else D.uint32)
    ones, zero = N.Const(ut, loc, (1 << t.dtype.bits) - 1), N.Const(ut, loc, 0)
    mask = ones
    for cond in conds:
        mask = N.Select(ut, loc, cond, mask, zero)
    bits = N.BinOp(ut, loc, "&", N.Call(ut, loc, "bitcast", [value]), mask)
    return N.Call(t, loc, "bitcast", [bits])


def _uses(exprs) -> set:
    """Locals and private arrays an expression list reads."""
    out = set()
    for e in exprs:
        for x in N.walk_expr(e):
            if isinstance(x, N.Var):
                out.add(x.name)
            elif isinstance(x, N.Load) and x.array.space == "private":
                out.add(x.array.name)
    return out


def _slice(stmts, live: set) -> tuple:
    """(the statements of the loop-free ``stmts`` that the values ``live`` (locals, private
    arrays) at its end depend on, what is live at its start): a backward dead-code pass."""
    out = []
    for s in reversed(stmts):
        if isinstance(s, N.Assign):
            if s.var in live:
                live = (live - {s.var}) | _uses([s.value])
                out.append(s)
        elif isinstance(s, N.Philox):
            if live & set(s.outs):
                live = (live - set(s.outs)) | _uses(s.args)
                out.append(s)
        elif isinstance(s, N.Store) and s.array.space == "private":
            if s.array.name in live:
                live = live | _uses(list(s.index) + [s.value])
                out.append(s)
        elif isinstance(s, N.If):
            a, la = _slice(s.body, live)
            b, lb = _slice(s.orelse, live)
            if a or b:
                out.append(N.If(s.loc, s.cond, a, b))
                live = la | lb | _uses([s.cond])
        elif isinstance(s, N.AllocArray):
            if s.array.name in live:
                out.append(s)
        else:
            raise AssertionError(f"gather kernel: unexpected {type(s).__name__}")
    out.reverse()
    return out, live


def _tape_dtype(k: N.Kernel, which: int):
    name = TAPES[which]
    return next(p[1].dtype for p in k.params if p[0] == "array" and p[1].name == name)


def _cast(e: N.Expr, t: Ty) -> N.Expr:
    return e if e.ty == t else N.Cast(t, e.loc, e)


def _rebuild(e: N.Expr, kids: list) -> N.Expr:
    """``e`` with new direct sub-expressions (in :func:`nodes.child_exprs` order)."""
    if isinstance(e, N.Load):
        return replace(e, index=kids)
    if isinstance(e, (N.BinOp, N.Compare)):
        return replace(e, a=kids[0], b=kids[1])
    if isinstance(e, (N.Unary, N.Cast)):
        return replace(e, a=kids[0])
    if isinstance(e, N.Select):
        return replace(e, cond=kids[0], a=kids[1], b=kids[2])
    if isinstance(e, N.Call):
        return replace(e, args=kids)
    if isinstance(e, N.Atomic):
        n = len(e.index)
        return replace(e, index=kids[:n], args=kids[n:])
    raise AssertionError(type(e).__name__)


def _sub_conds(stmts, sub) -> list:
    """Substitute the geometry in the conditions of ifs and whiles (leaf statements are
    done already)."""
    out = []
    for s in stmts:
        if isinstance(s, N.If):
            out.append(N.If(s.loc, sub(s.cond), _sub_conds(s.body, sub), _sub_conds(s.orelse, sub)))
        elif isinstance(s, N.While):
            out.append(N.While(s.loc, sub(s.cond), _sub_conds(s.body, sub)))
        elif isinstance(s, N.FuncBlock):
            out.append(replace(s, body=_sub_conds(s.body, sub)))
        else:
            out.append(s)
    return out


def footprint(g: Gather, geom: tuple, shape: tuple):
    """The ndrange (a tuple of ranges) of element coordinates the gather kernel covers: the
    bounding box of ``I + c_k`` over the primal launch ``geom``, clipped to the array; None
    when empty."""
    box = []
    for d in range(len(g.offsets[0])):
        start, count, step = geom[3 * d:3 * d + 3]
        if count <= 0:
            return None
        if g.kind == "lin":
            lo, hi = 0, count - 1
        else:
            last = start + (count - 1) * step
            lo, hi = min(start, last), max(start, last)
        lo += min(o[d] for o in g.offsets)
        hi += max(o[d] for o in g.offsets)
        lo, hi = max(lo, 0), min(hi, shape[d] - 1)
        if hi < lo:
            return None
        box.append(range(lo, hi + 1))
    return tuple(box)


GATHER_VARIANTS = {"gather:": "", "gather_ring:": "ring", "gather_ring0:": "ring0",     # mode prefix -> variant
                   "gather_ring1:": "ring1", "gather_ringT:": "ringT", "gather_in:": "in",
                   "gather_inP:": "inP", "gather_ring0P:": "ring0P", "gather_ring1P:": "ring1P"}


def gather_boxes(g: Gather, geom: tuple, shape: tuple, peel: bool = False) -> list:
    """[(mode prefix, box, jumps)]: the :func:`footprint` split into the box where every
    source item ``J - c_k`` is in the primal launch range, run by the interior gather kernel
    ("gather_in:"), and around it, per dimension, the slabs below and above it, run by the
    ring kernels in one launch per dimension ``d`` whose box is the two slabs side by side
    (the elements outside the interior in dimension ``d`` and inside it in every later
    dimension, any in the earlier ones: "gather_ring<d>:", which clamps only the first
    ``d + 1`` coordinates, so the contiguous last one is never clamped but in the last
    dimension's slabs): ``jumps`` (per dimension, :func:`ring_param_names`' cut and jump,
    None for the other kernels) moves the coordinates of the upper one. The slabs of the
    last dimension are a few elements of every row: in 3-D their launch ("gather_ringT:")
    has the last two dimensions of the box swapped, so that the loop over rows is the inner
    one (the rows' few elements in loops of their own, with neighbours a plane apart, cost
    as much as the interior gather; in 2-D they are cheaper than rows walked across; the
    ``jumps`` stay per element dimension). When the interior is
    empty, one generic ring launch ("gather_ring:") over the footprint. With a step other than 1, the
    checked kernel ("gather:") over the whole footprint. (Clamping in the interior kernel
    instead of separate boxes makes compilers mask its loads, and GCC then does not
    vectorize it.)

    ``peel`` (the CPU, whose C renderer splits a row's loop at the interior's bounds, see
    ``Kernel.peel_last``; Cartesian reads in 3-D): the boxes take the footprint's whole
    extent in the last dimension, and their kernels ("gather_inP:", "gather_ring<d>P:")
    clamp the last coordinate only in the row's first and last few elements, run by loops
    of their own beside the row's vectorized interior, whose cache lines they share; no
    launch for the last dimension's slabs (the "gather_ringT:" launch reads each of its
    elements' neighbours from memory a row apart: 0.3-0.5x the forward kernel's time on
    one thread against 0.1-0.15x peeled, 64 MiB). In 2-D, where a row has thousands of
    elements, the slabs' own launch costs 0.02x, less than splitting every row (0.1-0.2x),
    so ``peel`` is ignored."""
    box = footprint(g, geom, shape)
    if box is None:
        return []
    if g.kind == "cart" and any(geom[3 * d + 2] != 1 for d in range(len(box))):
        return [("gather:", box, None)]
    inner = []
    for d, r in enumerate(box):
        start, count = geom[3 * d:3 * d + 2]
        lo, hi = start + max(o[d] for o in g.offsets), start + count - 1 + min(o[d] for o in g.offsets)
        if g.kind == "lin":                       # positions, whatever the start and step
            lo, hi = lo - start, hi - start
        lo, hi = max(lo, r.start), min(hi, r.stop - 1)
        if hi < lo:
            return [("gather_ring:", box, _no_jumps(box))]
        inner.append(range(lo, hi + 1))
    if peel and g.kind == "cart" and len(box) >= 3:
        inner[-1] = box[-1]
    else:
        peel = False
    out = [("gather_inP:" if peel else "gather_in:", tuple(inner), None)]
    for d in range(len(box) - 1 if peel else len(box)):
        below, above = inner[d].start - box[d].start, box[d].stop - inner[d].stop
        if below + above:
            jumps = list(_no_jumps(box))
            jumps[d] = (box[d].start + below, inner[d].stop - (box[d].start + below))
            both = range(box[d].start, box[d].start + below + above)
            ring = list(box[:d]) + [both] + list(inner[d + 1:])
            if peel:
                out.append((f"gather_ring{d}P:", tuple(ring), tuple(jumps)))
            elif d == len(box) - 1 and d > 1:                # 3-D: launched transposed (see above)
                ring[d - 1], ring[d] = ring[d], ring[d - 1]
                out.append(("gather_ringT:", tuple(ring), tuple(jumps)))
            else:
                out.append((f"gather_ring{d}:", tuple(ring), tuple(jumps)))
    return out


GATHER_ROW = 64       # work items of a gather launch's group on a CPU OpenCL device: a row segment


def gather_workgroup(ndim: int, items_in_loops: bool, max_wg: int):
    """The work-group shape of the gather launches (:func:`gather_boxes`), or None for the
    primal launch's. A gather kernel is flat and uses no group index, so its groups can take
    any shape: on a runtime that runs a group's work items as a loop on a CPU
    (``items_in_loops``: PoCL), in 2-D and 3-D, a group is one segment of ``GATHER_ROW``
    consecutive elements of a row, ``(1, ..., 1, 64)``: PoCL then streams each row of the
    shadows in one vectorized loop. With the default 3-D groups ``(4, 8, 8)`` (rows of 8
    elements, 32 of them a group) the 3-D interior gather took 18-21 ms of process time
    where it takes 8-11 with rows of 64 (64 MiB of forward traffic, PoCL 3.1, loaded
    2-core machine; the forward kernel 11-12 ms); in 2-D (default ``(16, 16)``) it changed
    little (10.2 -> 9.4 ms)."""
    if not items_in_loops or ndim < 2:
        return None
    return (1,) * (ndim - 1) + (max(1, min(GATHER_ROW, int(max_wg))),)


def _no_jumps(box: tuple) -> tuple:
    """(cut, jump) pairs that move nothing: the cut past the box (fits the index type)."""
    return tuple((box[d].stop if d < len(box) else 1, 0) for d in range(3))


def ring_args(jumps: tuple) -> list:
    """The values of :func:`ring_param_names` from :func:`gather_boxes`' jumps."""
    return [v for cj in jumps for v in cj]


def gather_mode(mode: str):
    """(array, variant) of a gather kernel's mode string (a prefix of
    :data:`GATHER_VARIANTS` and the array's name), or None."""
    for prefix, variant in GATHER_VARIANTS.items():
        if mode.startswith(prefix):
            return mode[len(prefix):], variant
    return None


def ngroups(geom: tuple, ndim: int, wg: tuple) -> int:
    """Number of work groups of a launch (the per-group partial sums' length)."""
    return max(1, math.prod(-(-geom[3 * d + 1] // wg[d]) for d in range(ndim)))


def speed_up(adj: N.Kernel, grouped: bool, diff, form: str = "", partial_dtypes: dict | None = None) -> tuple:
    """(main adjoint, gathers): the rewrites of this module applied to the adjoint ``adj``
    that :func:`.autodiff.reverse_kernel` built for the parameters ``diff``. ``form``: how
    scalar partials are summed in a flat kernel: "threads" (the CPU: one per thread),
    "strip" (one per work item of a launch over :func:`strip_ndrange`; the kernel then
    takes :func:`gather_param_names`, used or not), "stripc" (the same with each work
    item's items contiguous, see :func:`strip_scalar_partials`), either with a "1" appended
    (the primal launch's steps are all 1) or "" (one per work group, as kernels
    with barriers always do). The main adjoint's ``partials`` says which it got (None
    without scalar gradients). ``partial_dtypes``: the dtype of each scalar shadow's partials
    array as passed (see :func:`retype_partials`; float32 ones let the strip form sum in
    float32)."""
    # an unsafe_indices kernel's items past the ndrange run too (their tape slots are not
    # global linear indices, see autodiff.tape_slot): no gathers (they visit the items of the
    # ndrange only) and no strip form (it runs the ndrange's items only)
    unsafe = adj.unsafe_indices
    gathers = [] if unsafe else find_gathers(adj, grouped)
    k = without_accumulations(adj, gathers)
    k = plain_single_offset_adds(k)
    shadows = set(_shadow_names(adj).values())
    primal = {p[1].name for p in adj.params if p[0] == "array" and p[1].space == "global"
              and p[1].name not in shadows and p[1].name not in TAPES and not p[1].name.startswith("_tk_")
              and p[1].name not in {f"_d_{x}" for x in diff}}
    k = without_dead_stores(k, primal)
    scalars = {f"_d_{p[1]}" for p in adj.params if p[0] == "scalar" and p[1] in set(diff)}
    strip = form in ("strip", "stripc", "strip1", "stripc1")
    stripped = None if unsafe else strip_scalar_partials(k, scalars, partial_dtypes or {}, form.startswith("stripc"),
                                     form.endswith("1")) if strip and scalars and not grouped else None
    if not scalars:
        partials = None
    elif form == "threads" and not grouped and not unsafe:
        # (not in an unsafe_indices kernel: the CPU runs those in the grouped code shape, which
        # has no per-thread slot; their partials are per work group)
        k, partials = per_thread_partials(k, scalars), "threads"
    elif stripped is not None:
        k, partials = stripped, "strip"
    else:
        k, partials = reduce_scalar_partials(k, scalars), "groups"
    if strip and partials != "strip":     # the geometry parameters, unused
        k = replace(k, params=list(k.params) + _gather_params(k))
    k.partials = partials
    return k, gathers


def gather_for(adj: N.Kernel, grouped: bool, array: str, nf: int, ni: int, variant: str = "") -> N.Kernel:
    """The gather kernel of ``array`` for the adjoint ``adj`` (see :func:`speed_up`)."""
    for g in find_gathers(adj, grouped):
        if g.array == array:
            return gather_kernel(adj, g, nf, ni, variant)
    raise AssertionError(f"no gather adjoint for '{array}'")
