"""Raising a kernel's IR into JAX: every work item at once, as array operations.

:class:`Raised` turns a lowered kernel (:class:`~tinykernels.ir.nodes.Kernel`) into a pure
function of JAX arrays, vectorized over the work items of the whole launch (SIMT to SIMD):

* work item ``u`` of the launch is lane ``u`` of every per-item value; lanes are ordered
  group by group (``u = group_linear * groupsize + local_linear``), so a group is a row of
  the ``(groups, groupsize)`` view;
* ``if`` / ternaries / early exits become masks and ``jnp.where``; a ``range`` loop with a
  trip count known when tracing becomes ``lax.fori_loop`` (a ``scan``: reverse-mode
  differentiable), a loop whose trip count varies between items or is traced becomes
  ``lax.while_loop`` with a per-item mask; loops whose condition stays a tracing-time
  constant are unrolled in Python;
* array reads are gathers and stores scatters (``.at[].set``) on flattened arrays;
  statement atomics ``add/sub/min/max`` are ``.at[].add/min/max``; an atomic whose old value
  is used (and ``and/or/xor/exchange``) is serialized in lane order with a segmented scan
  (a valid order of the atomics);
* statements run in lockstep (every lane finishes one statement before the next starts),
  so a barrier is a no-op; ``tk.localmem`` arrays have a leading groups axis and
  ``tk.private`` ones a leading items axis; ``group_reduce``/``group_scan`` reduce or scan
  along the group axis (float sums sequentially, in local order, like the CPU backend);
* values keep the IR's types (NumPy 2 promotion, wrapping integers, Python floor division):
  the function runs under ``jax.enable_x64(True)``, so 64-bit arithmetic is exact whatever
  the user's ``jax_enable_x64`` says.

What cannot be raised faithfully is a located :class:`~tinykernels.errors.CompileError`
(:func:`check_raisable`). JAX is imported on first use only.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..dtypes import Ty
from ..errors import CompileError
from ..ir import nodes as N
from ..passes.uniformity import defs, is_uniform

UNROLL_LIMIT = 64          # a loop whose condition is a tracing-time constant unrolls up to this many times


def _jax():
    import jax
    return jax


def _jnp():
    import jax.numpy as jnp
    return jnp


# ----------------------------------------------------------------------------- checks

def _error(msg: str, loc: N.Loc, kernel: str) -> CompileError:
    return N.error_at(msg, loc, kernel)


def _invariant_vars(k: N.Kernel, uvars: set) -> set:
    """Locals with the same value in every item of a group: the uniform ones, plus those
    assigned only at the kernel's top level from invariant expressions (loads at invariant
    indices included: every item reads the same element)."""
    count: dict = {}
    for s in N.walk_stmts(k.body):
        for v in defs(s):
            count[v] = count.get(v, 0) + 1
    inv = set(uvars)
    changed = True
    while changed:
        changed = False
        for s in k.body:
            if isinstance(s, N.Assign) and s.var not in inv and count.get(s.var) == 1 \
                    and _invariant(s.value, inv):
                inv.add(s.var)
                changed = True
    return inv


def _invariant(e: N.Expr, inv: set) -> bool:
    if isinstance(e, N.Load):
        return all(_invariant(i, inv) for i in e.index)
    if isinstance(e, N.Atomic):
        return False
    if not N.child_exprs(e):
        return is_uniform(e, inv)
    return all(_invariant(c, inv) for c in N.child_exprs(e))


def check_raisable(k: N.Kernel, uvars: set) -> None:
    """Raise a located CompileError for what the lowering cannot reproduce faithfully: an
    atomic inside a ternary or a short-circuit operand (the vectorized code evaluates both
    sides), and a store that every item of a group makes to one element of a global or
    local array with item-dependent values (the result would depend on the order of the
    racing stores)."""
    inv = _invariant_vars(k, uvars)

    def exprs(e, conditional=False):
        if isinstance(e, N.Atomic):
            if conditional:
                raise _error("an atomic inside a ternary or an 'and'/'or' operand cannot be raised into JAX "
                             "(the vectorized code evaluates both sides); use an if statement", e.loc, k.name)
        if isinstance(e, N.Select):
            exprs(e.cond, conditional)
            exprs(e.a, True)
            exprs(e.b, True)
            return
        if isinstance(e, N.BinOp) and e.op in ("and", "or"):
            exprs(e.a, conditional)
            exprs(e.b, True)
            return
        for c in N.child_exprs(e):
            exprs(c, conditional)

    for s in N.walk_stmts(k.body):
        for e in N.stmt_exprs(s):
            exprs(e)
    for s in k.body:                      # unconditional stores of the whole group
        if isinstance(s, N.Store) and s.array.space != "private" and all(_invariant(i, inv) for i in s.index) \
                and not _invariant(s.value, inv):
            raise _error(f"every work item stores a different value into the same element of "
                         f"'{s.array.name}': the result depends on the order of these racing stores, "
                         "which raise_kernel cannot reproduce; guard the store (e.g. 'if lid == 0:') or "
                         "make the value the same for every item", s.loc, k.name)


# ----------------------------------------------------------------------------- values

def _is_traced(v) -> bool:
    return not isinstance(v, (np.ndarray, np.generic, bool, int, float))


def _xp(*vals):
    """NumPy while every value is concrete (keeps tracing-time constants constant), else jax.numpy."""
    return _jnp() if any(_is_traced(v) for v in vals) else np


def _np_dtype(d: D.DType):
    """The NumPy/JAX dtype values of IR type ``d`` are computed in (bool, float32 for narrow floats)."""
    if d.kind == "b":
        return np.dtype(bool)
    if d.is_storage_only:
        return np.dtype(np.float32)
    return np.dtype(D.to_numpy(d))


def _storage_dtype(d: D.DType):
    if d.kind == "b":
        return np.dtype(bool)
    return np.dtype(D.to_numpy(d))


def _astype(v, dt):
    """``v`` as dtype ``dt`` (C conversion semantics for the ordinary cases)."""
    dt = np.dtype(dt)
    if getattr(v, "dtype", None) == dt:
        return v
    if _is_traced(v):
        if v.dtype == bool and dt.kind == "f":
            return _bool_to_float(v, dt)
        return v.astype(dt)
    with np.errstate(all="ignore"):
        return np.asarray(v).astype(dt)[()] if np.ndim(v) == 0 else np.asarray(v).astype(dt)


def _bool_to_float(v, dt: np.dtype):
    """A traced bool as float ``dt``, through the bits of 1.0: XLA's simplifier rewrites
    ``convert(pred) * x`` to ``select(pred, x, 0)``, which gives 0 for ``False * -1.0`` (NumPy:
    -0.0) and ``False * inf`` (NaN); it does not see through a bitcast."""
    from jax import lax
    ut = np.dtype(f"uint{dt.itemsize * 8}")
    one = np.ones((), dt).view(ut)
    return lax.bitcast_convert_type(v.astype(ut) * one, dt)


def _const(value, t: Ty):
    d = t.dtype
    dt = _np_dtype(d)
    if d.kind == "b":
        return np.bool_(bool(value))
    if d.is_int:
        bits = d.bits
        v = int(value) & ((1 << bits) - 1)
        if d.kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        return np.array(v).astype(dt)[()] if bits < 64 else (np.int64(v) if d.kind == "i" else np.uint64(v))
    return dt.type(float(value))


def _where(m, a, b):
    if isinstance(m, (bool, np.bool_)) or (not _is_traced(m) and np.ndim(m) == 0):
        return a if bool(m) else b
    xp = _xp(m, a, b)
    return xp.where(m, a, b)


def _m_and(a, b):
    if _is_false(a) or _is_false(b):
        return np.bool_(False)
    if _is_true(a):
        return b
    if _is_true(b):
        return a
    return _xp(a, b).logical_and(a, b)


def _m_or(a, b):
    if _is_true(a) or _is_true(b):
        return np.bool_(True)
    if _is_false(a):
        return b
    if _is_false(b):
        return a
    return _xp(a, b).logical_or(a, b)


def _m_not(a):
    if _is_traced(a):
        return _jnp().logical_not(a)
    return np.logical_not(a)


def _is_false(m) -> bool:
    return not _is_traced(m) and not np.any(m)


def _is_true(m) -> bool:
    return not _is_traced(m) and bool(np.all(m))


def _grad_in_lanes(v, active):
    """A float value read under the mask ``active``, differentiated only in the active lanes.

    Masked-out lanes (an ``if`` not taken, items past the ndrange) still compute, on values
    the kernel never sees there (locals are 0 in lanes that never assigned them), and their
    results are dropped by ``where``; but their cotangent, 0, times an infinite partial there
    (``1 / s`` at ``s == 0``, ``sqrt`` at 0) is NaN, which a load's transposed gather added
    into a real array element (a softmax row's ``x[0, 0]`` had a NaN gradient). Each read
    passes through ``where(active, v, stop_gradient(v))``: the same value, and the select's
    transpose zeroes the masked-out lanes' cotangents (JAX's "double where")."""
    if _is_true(active) or not _is_traced(v) or np.dtype(v.dtype).kind != "f":
        return v
    if np.ndim(v) not in (0, np.ndim(active)) or (np.ndim(v) and np.shape(v) != np.shape(active)):
        return v
    import jax
    return _jnp().where(active, v, jax.lax.stop_gradient(v))


# ----------------------------------------------------------------------------- the launch geometry

class Geometry:
    """The launch's lanes: ``counts``/``starts``/``steps`` per dimension (as in the 9-slot
    geometry), the workgroup shape ``wg``; per-lane coordinates as NumPy arrays."""

    def __init__(self, counts, starts, steps, wg, unsafe: bool):
        self.ndim = len(counts)
        self.counts, self.starts, self.steps, self.wg = tuple(counts), tuple(starts), tuple(steps), tuple(wg)
        self.ngroups = tuple(-(-c // w) for c, w in zip(counts, wg))
        self.L = math.prod(wg)
        self.G = math.prod(self.ngroups)
        self.N = self.G * self.L
        u = np.arange(self.N, dtype=np.int64)
        self.group_linear, self.local_linear = u // self.L, u % self.L
        self.group = np.unravel_index(self.group_linear, self.ngroups) if self.N else [u] * self.ndim
        self.local = np.unravel_index(self.local_linear, self.wg) if self.N else [u] * self.ndim
        self.pos = [self.group[d] * wg[d] + self.local[d] for d in range(self.ndim)]
        valid = np.ones(self.N, bool)
        for d in range(self.ndim):
            valid &= self.pos[d] < counts[d]
        self.valid = valid
        lin = np.zeros(self.N, np.int64)
        for d in range(self.ndim):
            lin = lin * counts[d] + self.pos[d]
        self.global_linear = lin
        self.active = np.bool_(True) if unsafe or valid.all() else valid

    def index(self, kind: str, dim: int):
        if kind == "global_linear":
            return self.global_linear
        if kind == "global":
            return self.starts[dim] + self.pos[dim] * self.steps[dim]
        if kind == "global_pos":
            return self.pos[dim]
        if kind == "local_linear":
            return self.local_linear
        if kind == "local":
            return self.local[dim]
        if kind == "group_linear":
            return self.group_linear
        if kind == "group":
            return self.group[dim]
        if kind == "ndrange":
            return np.int64(self.counts[dim])
        if kind == "groupsize":
            return np.int64(self.wg[dim])
        if kind == "ngroups":
            return np.int64(self.ngroups[dim])
        raise NotImplementedError(kind)


# ----------------------------------------------------------------------------- the raised function

class Raised:
    """A kernel specialization raised into JAX; call :meth:`run` with the arrays (by
    parameter name, JAX arrays of the specialization's shapes and dtypes), the scalars (by
    name) and a :class:`Geometry`; it returns the arrays the kernel writes."""

    def __init__(self, k: N.Kernel, uvars: set):
        check_raisable(k, uvars)
        self.k = k
        self.written = _written_arrays(k)

    def run(self, arrays: dict, scalars: dict, geom: Geometry) -> dict:
        jax = _jax()
        with jax.enable_x64(True):
            return _Run(self, arrays, scalars, geom).result()


def _written_arrays(k: N.Kernel) -> list:
    out = []
    for s in N.walk_stmts(k.body):
        names = []
        if isinstance(s, N.Store):
            names.append(s.array)
        for e in N.stmt_exprs(s):
            names += [x.array for x in N.walk_expr(e) if isinstance(x, N.Atomic)]
        for a in names:
            if a.space == "global" and a.name not in out:
                out.append(a.name)
    return out


def _modified(stmts) -> tuple:
    """(locals assigned, arrays written) anywhere in ``stmts``."""
    vs, arrs = set(), set()
    for s in N.walk_stmts(stmts):
        vs.update(defs(s))
        if isinstance(s, N.Collective):
            vs.add(s.dst)
        if isinstance(s, N.For):
            vs.add(s.var)
        if isinstance(s, N.Store):
            arrs.add(s.array.name)
        for e in N.stmt_exprs(s):
            arrs.update(x.array.name for x in N.walk_expr(e) if isinstance(x, N.Atomic))
    return vs, arrs


class _Run:
    """One tracing of a kernel: the state (``st``: locals ``v:``, flat arrays ``a:``,
    jump masks ``m:``) and the statement walk."""

    def __init__(self, raised: Raised, arrays: dict, scalars: dict, geom: Geometry):
        jnp = _jnp()
        self.k, self.g = raised.k, geom
        self.shapes: dict = {}
        self.st: dict = {}
        self.loop_id = 0
        self.scalars = {}
        for p in self.k.params:
            if p[0] == "scalar":
                _, name, t = p
                self.scalars[name] = _const(scalars[name], t) if not _is_traced(scalars[name]) else \
                    _astype(scalars[name], _np_dtype(t.dtype))
        for p in self.k.params:
            if p[0] == "array":
                a = p[1]
                x = jnp.asarray(arrays[a.name])
                self.shapes[a.name] = tuple(x.shape)
                self.st["a:" + a.name] = x.reshape(-1)
        for s in N.walk_stmts(self.k.body):        # local and private arrays exist from the start
            if isinstance(s, N.AllocArray) and "a:" + s.array.name not in self.st:
                a = s.array
                size = math.prod(a.shape)
                rows = geom.G if a.space == "local" else geom.N
                self.st["a:" + a.name] = jnp.zeros(rows * size, _storage_dtype(a.dtype))
                self.shapes[a.name] = tuple(a.shape)
        self.block(self.k.body, geom.active)

    def result(self) -> dict:
        return {name: self.st["a:" + name].reshape(self.shapes[name]) for name in _written_arrays(self.k)}

    # --- statements --------------------------------------------------------------------

    def block(self, stmts, active):
        for s in stmts:
            if _is_false(active):
                return active
            active = getattr(self, "s_" + type(s).__name__)(s, active)
        return active

    def set_var(self, name: str, val, active) -> None:
        t = self.k.locals.get(name)
        if t is not None:
            val = _astype(val, _np_dtype(t.dtype))
        key = "v:" + name
        if _is_true(active):
            self.st[key] = val
            return
        old = self.st.get(key)
        self.st[key] = _where(active, val, _zeros_like_val(val) if old is None else old)

    def s_Assign(self, s, active):
        self.set_var(s.var, self.ev(s.value, active), active)
        return active

    def s_Store(self, s, active):
        a = s.array
        off = self.offset(a, s.index, active)
        val = self.ev(s.value, active)
        val = self.to_storage(val, a.dtype)
        key = "a:" + a.name
        flat = self.st[key]
        jnp = _jnp()
        size = flat.shape[0]
        off = self.valid_offset(off, size, active)
        if np.ndim(off) == 0 and not _is_traced(off):
            if int(off) < size:
                self.st[key] = flat.at[int(off)].set(val)
            return active
        off, val = jnp.broadcast_arrays(jnp.asarray(off), jnp.asarray(val, dtype=flat.dtype))
        self.st[key] = flat.at[off].set(val, mode="drop")
        return active

    def s_ExprStmt(self, s, active):
        e = s.expr
        if isinstance(e, N.Atomic):
            self.atomic(e, active, used=False)
        else:
            self.ev(e, active)
        return active

    def s_If(self, s, active):
        c = self.ev(s.cond, active)
        if not _is_traced(c) and np.ndim(c) == 0:
            return self.block(s.body if bool(c) else s.orelse, active)
        ct, cf = _m_and(active, c), _m_and(active, _m_not(c))
        a1 = self.block(s.body, ct) if not _is_false(ct) else ct
        a2 = self.block(s.orelse, cf) if not _is_false(cf) else cf
        return _m_or(a1, a2)

    def s_Return(self, s, active):
        return np.bool_(False)

    def s_Break(self, s, active):
        key = self.brk
        self.st[key] = _m_or(self.st[key], active)
        return np.bool_(False)

    def s_Continue(self, s, active):
        key = self.cnt
        self.st[key] = _m_or(self.st[key], active)
        return np.bool_(False)

    def s_FuncBlock(self, s, active):
        key = "m:exit:" + s.label
        self.st[key] = np.bool_(False)
        after = self.block(s.body, active)
        return _m_or(after, self.st.pop(key))

    def s_FuncExit(self, s, active):
        key = "m:exit:" + s.label
        self.st[key] = _m_or(self.st[key], active)
        return np.bool_(False)

    def s_Barrier(self, s, active):
        return active             # lockstep: every lane finished the statements before it

    def s_AllocArray(self, s, active):
        return active             # allocated up front (see __init__)

    def s_Philox(self, s, active):
        vals = [_astype(self.ev(a, active), np.uint32) for a in s.args]
        outs = philox4x32(*vals)
        for name, v in zip(s.outs, outs):
            self.set_var(name, v, active)
        return active

    def s_Print(self, s, active):
        jax, jnp = _jax(), _jnp()
        parts = [p if isinstance(p, str) else self.ev(p, active) for p in s.parts]
        vals = [jnp.broadcast_to(jnp.asarray(p), (self.g.N,)) for p in parts if not isinstance(p, str)]
        mask = jnp.broadcast_to(jnp.asarray(active), (self.g.N,))

        def host(m, *vs):
            for u in np.flatnonzero(np.asarray(m)):
                it = iter(vs)
                print(" ".join(p if isinstance(p, str) else _fmt(np.asarray(next(it))[u]) for p in parts))
        jax.debug.callback(host, mask, *vals)
        return active

    def s_Collective(self, s, active):
        jnp = _jnp()
        g = self.g
        src = self.st.get("v:" + s.src)
        dt = _np_dtype(s.ty.dtype)
        src = jnp.broadcast_to(jnp.asarray(_astype(src, dt)), (g.N,)).reshape(g.G, g.L)
        mask = jnp.broadcast_to(jnp.asarray(active), (g.N,)).reshape(g.G, g.L)
        ident = _identity(s.op, dt)
        x = jnp.where(mask, src, ident)
        res = group_collective(x, s.op, s.kind, dt).reshape(g.N)
        self.set_var(s.dst, res, active)
        return active

    # --- loops ---------------------------------------------------------------------------

    def s_While(self, s, active):
        return self.loop(s, s.body, active, cond=lambda act: self.ev(s.cond, act), for_=None)

    def s_For(self, s, active):
        t = self.k.locals.get(s.var) or s.start.ty
        vt = _np_dtype(t.dtype)
        start, stop, step = (_astype(self.ev(x, active), vt) for x in (s.start, s.stop, s.step))
        n = _trips(start, stop, step, isinstance(s.step, N.Const) and s.step.value > 0,
                   isinstance(s.step, N.Const) and s.step.value < 0)
        return self.loop(s, s.body, active, cond=None, for_=(s.var, start, step, n, vt))

    def loop(self, s, body, active, cond, for_):
        """A loop under a per-lane mask: ``cond(active)`` (while) or the ``for_`` counter."""
        jax, jnp = _jax(), _jnp()
        self.loop_id += 1
        lid = self.loop_id
        brk, cnt = f"m:brk:{lid}", f"m:cnt:{lid}"
        outer = (getattr(self, "brk", None), getattr(self, "cnt", None))
        self.brk, self.cnt = brk, cnt
        # loop state: 'l:la' lanes still looping, 'l:out' lanes that left, 'l:k' the for counter
        st = self.st
        st[f"l:la:{lid}"], st[f"l:out:{lid}"] = active, np.bool_(False)
        if for_ is not None:
            st[f"l:k:{lid}"] = np.uint64(0)

        def step():
            la = st[f"l:la:{lid}"]
            if for_ is not None:
                var, start, stp, n, vt = for_
                k = st[f"l:k:{lid}"]
                c = _xp(k, n).less(k, n)
                with np.errstate(all="ignore"):
                    val = _astype(_astype(start, np.uint64) + k * _astype(stp, np.uint64), vt)
            else:
                c = cond(la)
            run = _m_and(la, c)
            st[f"l:out:{lid}"] = _m_or(st[f"l:out:{lid}"], _m_and(la, _m_not(c)))
            st[brk], st[cnt] = np.bool_(False), np.bool_(False)
            if for_ is not None and not _is_false(run):
                self.set_var(for_[0], val, run)
            after = self.block(body, run) if not _is_false(run) else run
            st[f"l:out:{lid}"] = _m_or(st[f"l:out:{lid}"], st[brk])
            st[f"l:la:{lid}"] = _m_or(after, st[cnt])
            if for_ is not None:
                with np.errstate(all="ignore"):
                    st[f"l:k:{lid}"] = st[f"l:k:{lid}"] + np.uint64(1)
            del st[brk], st[cnt]

        try:
            n = for_[3] if for_ is not None else None
            if for_ is not None and not _is_traced(n) and np.ndim(n) == 0 and int(n) > UNROLL_LIMIT // 8:
                self.fori(step, lid, body, int(n), for_)
            else:
                unrolled = 0
                while True:
                    la = st[f"l:la:{lid}"]
                    if _is_false(la):
                        break
                    probe = self._probe(for_, cond, lid)
                    if probe is None or unrolled >= UNROLL_LIMIT:
                        self.while_(step, lid, body, for_, cond)
                        break
                    if _is_false(_m_and(la, probe)):
                        st[f"l:out:{lid}"] = _m_or(st[f"l:out:{lid}"], la)
                        break
                    step()
                    unrolled += 1
            return _m_or(st.pop(f"l:out:{lid}"), st[f"l:la:{lid}"])
        finally:
            st.pop(f"l:la:{lid}", None)
            st.pop(f"l:k:{lid}", None)
            self.brk, self.cnt = outer

    def _probe(self, for_, cond, lid):
        """The loop condition if it is a tracing-time constant now, else None."""
        st = self.st
        if for_ is not None:
            k, n = st[f"l:k:{lid}"], for_[3]
            if _is_traced(k) or _is_traced(n):
                return None
            return np.less(k, n)
        la = st[f"l:la:{lid}"]
        if _is_traced(la):
            return None
        saved = dict(st)
        c = cond(la)
        if st.keys() != saved.keys() or any(st[x] is not saved[x] for x in st):
            st.clear()
            st.update(saved)
            return None         # evaluating it changed the state (an atomic): not a probe
        return None if _is_traced(c) else c

    def _carry_keys(self, body, lid, for_=None) -> list:
        vs, arrs = _modified(body)
        if for_ is not None:
            vs.add(for_[0])
        for v in vs:
            if "v:" + v not in self.st:
                t = self.k.locals.get(v)
                if t is not None:
                    self.st["v:" + v] = np.zeros((), _np_dtype(t.dtype))[()]
        keys = [key for key in self.st if key.startswith(("m:", "l:")) or
                (key.startswith("v:") and key[2:] in vs) or (key.startswith("a:") and key[2:] in arrs)]
        return keys

    def _to_carry(self, keys):
        jnp = _jnp()
        out = {}
        for key in keys:
            v = self.st[key]
            if key.startswith("a:") or (key.startswith("l:k:") and np.ndim(v) == 0):
                out[key] = jnp.asarray(v)
            else:
                out[key] = jnp.broadcast_to(jnp.asarray(v), (self.g.N,))
        return out

    def fori(self, step, lid, body, n: int, for_):
        jax = _jax()
        keys = self._carry_keys(body, lid, for_)
        carry0 = self._to_carry(keys)

        def f(_, carry):
            self.st.update(carry)
            step()
            return self._to_carry(keys)
        self.st.update(jax.lax.fori_loop(0, n, f, carry0))

    def while_(self, step, lid, body, for_, cond):
        jax, jnp = _jax(), _jnp()
        keys = self._carry_keys(body, lid, for_)
        carry0 = self._to_carry(keys)

        def c(carry):
            self.st.update(carry)
            la = carry[f"l:la:{lid}"]
            return jnp.any(la)

        def f(carry):
            self.st.update(carry)
            step()
            return self._to_carry(keys)
        self.st.update(jax.lax.while_loop(c, f, carry0))

    # --- expressions -----------------------------------------------------------------------

    def ev(self, e: N.Expr, active):
        return getattr(self, "e_" + type(e).__name__)(e, active)

    def e_Const(self, e, active):
        return _const(e.value, e.ty)

    def e_Var(self, e, active):
        v = self.st.get("v:" + e.name)
        if v is None:                  # read before any lane assigned it (masked-out lanes only)
            return np.zeros((), _np_dtype(e.ty.dtype))[()]
        return _grad_in_lanes(_astype(v, _np_dtype(e.ty.dtype)), active)

    def e_Arg(self, e, active):
        return _astype(self.scalars[e.name], _np_dtype(e.ty.dtype))

    def e_Shape(self, e, active):
        return _astype(np.int64(self.shapes[e.array.name][e.dim]), _np_dtype(e.ty.dtype))

    def e_Index(self, e, active):
        return _astype(self.g.index(e.kind, e.dim), _np_dtype(e.ty.dtype))

    def offset(self, a: N.ArrayInfo, idx: list, active):
        """The element offset of ``a[idx]`` in the flattened array (int64 per lane); lanes
        of local arrays add their group's block, of private arrays their item's block."""
        shape = self.shapes[a.name]
        off = None
        bad = np.bool_(False)
        for k, i in enumerate(idx):
            v = _astype(self.ev(i, active), np.int64)
            xp = _xp(v, bad)
            bad = xp.logical_or(bad, xp.logical_or(v < 0, v >= shape[k]))
            off = v if off is None else off * np.int64(shape[k]) + v
        if off is None:
            off = np.int64(0)
        size = math.prod(shape)
        if a.space == "local":
            off = off + self.g.group_linear * np.int64(size)
        elif a.space == "private":
            off = off + np.arange(self.g.N, dtype=np.int64) * np.int64(size)
        total = self.st["a:" + a.name].shape[0]
        return _where(bad, np.int64(total), off) if not _is_false(bad) else off

    @staticmethod
    def valid_offset(off, size, active):
        """Masked-out lanes point past the end (their scatter is dropped)."""
        if _is_true(active):
            return off
        return _where(active, off, np.int64(size))

    def to_storage(self, val, d: D.DType):
        return _astype(val, _storage_dtype(d))

    def e_Load(self, e, active):
        a = e.array
        flat = self.st["a:" + a.name]
        off = self.offset(a, e.index, active)
        jnp = _jnp()
        v = flat.at[jnp.asarray(off)].get(mode="fill", fill_value=0)
        return _grad_in_lanes(_astype(v, _np_dtype(e.ty.dtype)), active)

    def e_BinOp(self, e, active):
        d = e.ty.dtype
        dt = _np_dtype(d)
        a = _astype(self.ev(e.a, active), dt)
        if e.op in ("<<", ">>"):
            b = self.ev(e.b, active)
            return _shift(e.op, a, b, d)
        b = _astype(self.ev(e.b, active), dt)
        return binop(e.op, a, b, d)

    def e_Unary(self, e, active):
        a = _astype(self.ev(e.a, active), _np_dtype(e.ty.dtype))
        xp = _xp(a)
        if e.op == "not":
            return xp.logical_not(a)
        if e.op == "~":
            return xp.logical_not(a) if e.ty.dtype.kind == "b" else xp.invert(a)
        with np.errstate(all="ignore"):
            return xp.negative(a) if e.ty.dtype.kind != "b" else a

    def e_Compare(self, e, active):
        a, b = self.ev(e.a, active), self.ev(e.b, active)
        ta, tb = e.a.ty.dtype, e.b.ty.dtype
        if ta != tb:
            common = np.promote_types(_np_dtype(ta), _np_dtype(tb))
            a, b = _astype(a, common), _astype(b, common)
        xp = _xp(a, b)
        fn = {"<": xp.less, "<=": xp.less_equal, ">": xp.greater, ">=": xp.greater_equal,
              "==": xp.equal, "!=": xp.not_equal}[e.op]
        return fn(a, b)

    def e_Select(self, e, active):
        c = self.ev(e.cond, active)
        dt = _np_dtype(e.ty.dtype)
        if not _is_traced(c) and np.ndim(c) == 0:
            return _astype(self.ev(e.a if bool(c) else e.b, active), dt)
        return _where(c, _astype(self.ev(e.a, _m_and(active, c)), dt),
                      _astype(self.ev(e.b, _m_and(active, _m_not(c))), dt))

    def e_Cast(self, e, active):
        src, dst = e.a.ty.dtype, e.ty.dtype
        a = self.ev(e.a, active)
        if dst.kind == "b":
            return _xp(a).not_equal(a, 0)
        if dst.is_storage_only:
            narrow = _storage_dtype(dst)
            return _astype(_astype(a, narrow), np.float32)
        return _astype(a, _np_dtype(dst))

    def e_Call(self, e, active):
        args = [self.ev(a, active) for a in e.args]
        if e.fn == "uniform":
            return self.first_of_group(args[0])
        if e.fn == "bitcast":
            return bitcast(args[0], e.args[0].ty.dtype, e.ty.dtype)
        return call(e.fn, args, e.ty.dtype)

    def first_of_group(self, v):
        """``tk.uniform``: every lane takes its group's first item's value."""
        if np.ndim(v) == 0:
            return v
        g = self.g
        xp = _xp(v)
        return xp.repeat(v.reshape(g.G, g.L)[:, 0], g.L)

    def e_Atomic(self, e, active):
        return self.atomic(e, active, used=True)

    def atomic(self, e: N.Atomic, active, used: bool):
        jnp = _jnp()
        a = e.array
        key = "a:" + a.name
        flat = self.st[key]
        size = flat.shape[0]
        dt = _np_dtype(a.dtype)
        off = self.valid_offset(self.offset(a, e.index, active), size, active)
        vals = [jnp.broadcast_to(jnp.asarray(_astype(self.ev(x, active), dt)), (self.g.N,)) for x in e.args]
        off = jnp.broadcast_to(jnp.asarray(off), (self.g.N,))
        if e.op == "cas":
            new, old = serial_cas(flat, off, vals[0], vals[1])
            self.st[key] = new
            return old
        val = vals[0]
        if not used and e.op in ("add", "sub", "min", "max"):
            if e.op == "add":
                self.st[key] = flat.at[off].add(val.astype(flat.dtype), mode="drop")
            elif e.op == "sub":
                self.st[key] = flat.at[off].add((-val).astype(flat.dtype), mode="drop")
            else:
                self.st[key] = getattr(flat.at[off], e.op)(val.astype(flat.dtype), mode="drop")
            return None
        new, old = serial_atomic(flat, off, val, e.op)
        self.st[key] = new
        return old


def _zeros_like_val(v):
    if _is_traced(v):
        return _jnp().zeros_like(v)
    return np.zeros_like(v)


def _fmt(v) -> str:
    if isinstance(v, (np.floating, float)):
        return f"{float(v):g}"
    if isinstance(v, np.bool_):
        return str(int(v))
    return str(int(v))


def _trips(start, stop, step, up: bool, down: bool):
    """The trip count of ``range(start, stop, step)`` as uint64 (the C renderer's formula)."""
    xp = _xp(start, stop, step)
    with np.errstate(all="ignore"):
        s, e, p = (_astype(x, np.uint64) for x in (start, stop, step))
        one = np.uint64(1)
        upn = xp.where(stop > start, (e - s - one) // xp.where(p == 0, one, p) + one, np.uint64(0))
        dn = xp.where(start > stop, (s - e - one) // xp.where(p == 0, one, np.uint64(0) - p) + one,
                      np.uint64(0))
        if up:
            r = upn
        elif down:
            r = dn
        else:
            r = xp.where(step > 0, upn, xp.where(step < 0, dn, np.uint64(0)))    # a zero step: none
    return r[()] if not _is_traced(r) and np.ndim(r) == 0 else r


# ----------------------------------------------------------------------------- operators

def _shift(op, a, b, d: D.DType):
    xp = _xp(a, b)
    bits = d.bits
    b64 = _astype(b, np.int64)
    ok = xp.logical_and(b64 >= 0, b64 < bits)
    sh = _astype(xp.where(ok, b64, 0), a.dtype if hasattr(a, "dtype") else np.int64)
    with np.errstate(all="ignore"):
        if op == "<<":
            return xp.where(ok, xp.left_shift(a, sh), _zero(a))
        fill = xp.where(a < 0, _astype(-1, a.dtype), _zero(a)) if d.kind == "i" else _zero(a)
        return xp.where(ok, xp.right_shift(a, sh), fill)


def _zero(a):
    return np.zeros((), a.dtype)[()]


def _opaque(a, b):
    """Float operands as XLA may not fold: a tracing-time constant beside a traced value goes
    through ``lax.optimization_barrier``, else XLA's algebraic simplifier reassociates
    ``(x + c1) - c2`` into ``x + (c1 - c2)`` (not what NumPy rounds)."""
    ta, tb = _is_traced(a), _is_traced(b)
    if ta == tb:
        return a, b
    barrier = _jax().lax.optimization_barrier
    return (a, barrier(_jnp().asarray(b))) if ta else (barrier(_jnp().asarray(a)), b)


def binop(op: str, a, b, d: D.DType):
    """``a op b`` on values already of the result type ``d`` (tinykernels' semantics)."""
    if d.is_float and op in ("+", "-", "*", "/", "//", "%"):
        a, b = _opaque(a, b)
        if op in ("/", "//", "%") and np.ndim(b) == 0 and np.ndim(a) > 0:
            # XLA turns a / broadcast(b) into a * broadcast(1 / b) (not what NumPy rounds; float
            # `//` and `%` divide too: until audit17b 1.8e308 // 7 was an ulp off)
            jnp = _jnp()
            b = _jax().lax.optimization_barrier(jnp.broadcast_to(jnp.asarray(b), jnp.shape(a)))
    xp = _xp(a, b)
    with np.errstate(all="ignore"):
        if d.kind == "b":
            if op in ("and", "&", "*"):
                return xp.logical_and(a, b)
            if op in ("or", "|", "+"):
                return xp.logical_or(a, b)
            if op == "^":
                return xp.logical_xor(a, b)
            if op in ("//", "%"):
                r = binop(op, _astype(a, np.int8), _astype(b, np.int8), D.int8)
                return _astype(r, bool)
            if op == "**":
                return xp.logical_or(a, xp.logical_not(b))
        if op in ("and", "or"):
            return (xp.logical_and if op == "and" else xp.logical_or)(a, b)
        if op == "+":
            return xp.add(a, b)
        if op == "-":
            return xp.subtract(a, b)
        if op == "*":
            return xp.multiply(a, b)
        if op == "/":
            return xp.true_divide(a, b)
        if op == "&":
            return xp.bitwise_and(a, b)
        if op == "|":
            return xp.bitwise_or(a, b)
        if op == "^":
            return xp.bitwise_xor(a, b)
        if op in ("//", "%"):
            if d.is_float:
                return _float_divmod(op, a, b)
            zero, one = _zero(a), _astype(1, a.dtype)
            bad = b == zero
            if d.kind == "i":
                neg1 = b == _astype(-1, a.dtype)
                bad = xp.logical_or(bad, neg1)
            bs = xp.where(bad, one, b)
            if op == "//":
                q = xp.floor_divide(a, bs)
                if d.kind == "i":
                    q = xp.where(neg1, xp.subtract(zero, a), q)
                return xp.where(b == zero, zero, q)
            return xp.where(bad, zero, xp.remainder(a, bs))
        if op == "**":
            if d.is_float:
                return xp.power(a, b)
            return _ipow(a, b, d)
    raise NotImplementedError(op)


def _float_divmod(op: str, a, b):
    """Float ``//`` / ``%``: NumPy's npy_divmod (the prelude's tk_floordiv / tk_mod)."""
    xp = _xp(a, b)
    dt = np.dtype(a.dtype)
    zero, one, half = (_astype(v, dt) for v in (0, 1, 0.5))
    with np.errstate(all="ignore"):
        mod = xp.fmod(a, b)
        fix = xp.logical_and(mod != zero, (b < zero) != (mod < zero))
        if op == "%":
            m = xp.where(mod != zero, xp.where(fix, mod + b, mod), xp.copysign(zero, b))
            return xp.where(b == zero, mod, m)
        div = (a - mod) / b
        div = xp.where(fix, div - one, div)
        fl = xp.floor(div)
        fl = xp.where(div - fl > half, fl + one, fl)
        q = xp.where(div != zero, fl, xp.copysign(zero, a / b))
        return xp.where(b == zero, a / b, q)


def _ipow(a, b, d: D.DType):
    xp = _xp(a, b)
    u = np.dtype(f"uint{max(d.bits, 32)}")
    r = _astype(np.ones((), u), u)
    base = _astype(a, u)
    n = _astype(b, u)
    with np.errstate(all="ignore"):
        for _ in range(max(d.bits, 32)):
            r = xp.where((n & u.type(1)) != 0, r * base, r)
            base = base * base
            n = n >> u.type(1)
    out = _astype(r, _np_dtype(d))
    if d.kind == "i":           # 1 / a ** -b truncated toward zero: 1, +-1 for a = -1, else 0
        one = _astype(np.ones((), _np_dtype(d)), _np_dtype(d))
        neg = xp.where(a == 1, one, xp.where(a == -1, xp.where((b & 1) != 0, -one, one), _zero(out)))
        out = xp.where(b < 0, neg, out)
    return out


def _sqrt(x):
    """``sqrt`` as XLA may not rewrite: ``a / sqrt(b)`` would become ``a * rsqrt(b)``, which
    is not correctly rounded; ``copysign(|sqrt(b)|, b)`` is the same value but no such pattern."""
    if not _is_traced(x):
        return np.sqrt(x)
    jnp = _jnp()
    return jnp.copysign(jnp.abs(jnp.sqrt(x)), x)


_MATH = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
         "atanh": "arctanh", "atan2": "arctan2", "pow": "power", "fabs": "abs"}


def bitcast(v, src: D.DType, dst: D.DType):
    """``tk.bitcast``: the bits of ``v`` (values of ``src``; narrow floats held as float32 and
    rounded to their type first) as ``dst``."""
    s_np = _storage_dtype(src) if src.is_storage_only else _np_dtype(src)
    d_np = _storage_dtype(dst) if dst.is_storage_only else _np_dtype(dst)
    v = _astype(v, s_np)
    if _is_traced(v) or not isinstance(v, (np.ndarray, np.generic)):
        from jax import lax
        r = lax.bitcast_convert_type(v, d_np)
    else:
        r = np.asarray(v).view(d_np)
        r = r[()] if r.ndim == 0 else r
    return _astype(r, np.float32) if dst.is_storage_only else r


def call(fn: str, args: list, d: D.DType):
    """A math or helper function on values (``d``: the result type)."""
    xp = _xp(*args)
    dt = _np_dtype(d)
    with np.errstate(all="ignore"):
        if fn == "uniform":
            return args[0]
        if fn.startswith("rand_"):
            return rand(fn[5:], _astype(args[0], np.uint64), _astype(args[1], np.uint64))
        if fn in ("isnan", "isinf", "isfinite"):
            return getattr(xp, fn)(args[0])
        args = [_astype(x, dt) for x in args]
        if fn == "dot4_i8":          # int32 words: each byte sign-extended by two shifts
            a, b, acc = args
            for s in (24, 16, 8, 0):
                acc = acc + ((a << s) >> 24) * ((b << s) >> 24)
            return acc
        if fn in ("min", "max"):
            a, b = args
            return xp.where(b < a, b, a) if fn == "min" else xp.where(b > a, b, a)
        if fn == "abs":
            return xp.abs(args[0])
        if fn == "rsqrt":
            return _astype(1, dt) / _sqrt(args[0])
        if fn == "sigmoid":
            one = _astype(1, dt)
            return one / (one + xp.exp(-args[0]))
        if fn == "rint":
            return xp.round(args[0])
        if fn == "fma":
            a, b, c = args
            if dt == np.float32:      # exact product in float64, one rounding of the sum: fused for f32
                return _astype(_astype(a, np.float64) * _astype(b, np.float64) + _astype(c, np.float64), dt)
            return a * b + c
        if fn in ("erf", "erfc"):
            from jax.scipy import special
            return getattr(special, fn)(args[0])
        if fn == "sqrt":
            return _sqrt(args[0])
        if fn == "hypot" and xp is not np:
            return _hypot(*args)
        if fn in ("sinh", "cosh") and xp is not np:
            return _sinh_cosh(fn, args[0])
        name = _MATH.get(fn, fn)
        return getattr(xp, name)(*args)


def _hypot(a, b):
    """``hypot``: ``jnp.hypot``'s formula (``hi * sqrt(1 + (lo / hi)^2)``, inf if either is
    inf), with ``hi``/``lo`` chosen by one select instead of ``maximum``/``minimum``: XLA's
    algebraic simplifier miscompiled the jitted JVP of ``jnp.hypot``'s ``maximum``/``minimum``
    tie-splitting selects in a raised kernel (gradgen seed 85000126: one lane's tangent 0
    where finite differences give 0.16; correct without jit or with algsimp disabled)."""
    jnp = _jnp()
    x, y = jnp.abs(a), jnp.abs(b)
    swap = y > x
    hi, lo = jnp.where(swap, y, x), jnp.where(swap, x, y)
    one = jnp.ones_like(hi)
    # hi == 0: hi + lo is 0, or NaN where the other argument is (then hi was not chosen by a NaN test)
    r = jnp.where(hi == 0, hi + lo, hi * jnp.sqrt(one + jnp.square(lo / jnp.where(hi == 0, one, hi))))
    return jnp.where(jnp.isposinf(x) | jnp.isposinf(y), jnp.full_like(r, np.inf), r)


def _sinh_cosh(fn: str, x):
    """``sinh``/``cosh``: XLA's are far off for large arguments (cosh(710.0) 300 ulp, sinh(88.0)
    float32 12 ulp); above 2 in magnitude they are (e^|x| -+ e^-|x|) / 2 with e^|x| = h * h,
    h = e^(|x| / 2), computed as (h / 2) * h so that it overflows only where the result does."""
    jnp = _jnp()
    ax = jnp.abs(x)
    h = jnp.exp(ax * _astype(0.5, x.dtype))
    half = _astype(0.5, x.dtype)
    tail = half / (h * h)
    big = (half * h) * h + (tail if fn == "cosh" else -tail)
    if fn == "sinh":
        return jnp.where(ax > 2, jnp.copysign(big, x), jnp.sinh(x))
    return jnp.where(ax > 2, big, jnp.cosh(x))


def _identity(op: str, dt):
    dt = np.dtype(dt)
    if op == "add" or op == "or":
        return np.zeros((), dt)[()]
    if op == "mul":
        return np.ones((), dt)[()]
    if op == "and":
        return np.bool_(True) if dt.kind == "b" else np.array(-1).astype(dt)[()]
    if dt.kind == "f":
        return dt.type(np.inf if op == "min" else -np.inf)
    if dt.kind == "b":
        return np.bool_(op == "min")
    info = np.iinfo(dt)
    return dt.type(info.max if op == "min" else info.min)


def _combine(op: str, a, b):
    jnp = _jnp()
    if op == "add":
        return jnp.logical_or(a, b) if a.dtype == bool else a + b
    if op == "mul":
        return jnp.logical_and(a, b) if a.dtype == bool else a * b
    if op == "min":
        return jnp.where(b < a, b, a)
    if op == "max":
        return jnp.where(b > a, b, a)
    if op == "and":
        return jnp.logical_and(a, b) if a.dtype == bool else a & b
    if op == "or":
        return jnp.logical_or(a, b) if a.dtype == bool else a | b
    if op == "xor":
        return jnp.logical_xor(a, b) if a.dtype == bool else a ^ b
    if op == "exchange":
        return b
    raise NotImplementedError(op)


def group_collective(x, op: str, kind: str, dt):
    """Reduce or scan ``x`` (groups, items) along the items axis, in local order: float sums
    and products sequentially (bit for bit the CPU backend's loop), the rest by any order."""
    jax, jnp = _jax(), _jnp()
    ident = _identity(op, dt)
    if kind == "reduce" and np.dtype(dt).kind in "iu" and op in ("add", "mul", "min", "max"):
        red = {"add": jnp.sum, "mul": jnp.prod, "min": jnp.min, "max": jnp.max}[op]
        r = red(x, axis=1, dtype=dt) if op in ("add", "mul") else red(x, axis=1)
        return jnp.broadcast_to(r[:, None], x.shape)

    def f(acc, xi):
        new = _combine(op, acc, xi)
        return new, (new, acc)
    acc0 = jnp.full((x.shape[0],), ident, dt)
    last, (incl, excl) = jax.lax.scan(f, acc0, x.T)
    if kind == "reduce":
        return jnp.broadcast_to(last[:, None], x.shape)
    return (incl if kind == "scan" else excl).T


def serial_atomic(flat, off, val, op: str):
    """Atomics of every lane applied in lane order: (the new array, each lane's old value).
    Lanes are sorted by offset (stably), a segmented inclusive scan combines each element's
    values, and each lane's old value is the element's value combined with the lanes
    before it. Lanes whose offset is out of range (masked) change nothing."""
    jax, jnp = _jax(), _jnp()
    size = flat.shape[0]
    order = jnp.argsort(off, stable=True)
    so, sv = off[order], val[order]
    first = jnp.concatenate([jnp.ones((1,), bool), so[1:] != so[:-1]])
    last = jnp.concatenate([so[1:] != so[:-1], jnp.ones((1,), bool)])
    scan_op = "add" if op == "sub" else op

    def comb(p, q):
        fp, vp = p
        fq, vq = q
        return jnp.logical_or(fp, fq), jnp.where(fq, vq, _combine(scan_op, vp, vq))
    _, incl = jax.lax.associative_scan(comb, (first, sv))
    base = flat.at[so].get(mode="fill", fill_value=0).astype(sv.dtype)
    prev = jnp.concatenate([incl[:1], incl[:-1]])

    def apply(b, acc):
        return b - acc if op == "sub" else _combine(op, b, acc)
    old_s = jnp.where(first, base, apply(base, prev))
    final = apply(base, incl)
    new = flat.at[jnp.where(last, so, size)].set(final.astype(flat.dtype), mode="drop")
    old = jnp.zeros_like(sv).at[order].set(old_s)
    return new, old


def serial_cas(flat, off, expected, new):
    """``atomic_cas`` of every lane in lane order (each element's lanes one after another,
    comparing bit patterns as the C backend does): (the new array, each lane's old value)."""
    jax, jnp = _jax(), _jnp()
    size = flat.shape[0]
    order = jnp.argsort(off, stable=True)
    so, se, sn = off[order], expected[order], new[order]
    first = jnp.concatenate([jnp.ones((1,), bool), so[1:] != so[:-1]])
    last = jnp.concatenate([so[1:] != so[:-1], jnp.ones((1,), bool)])
    base = flat.at[so].get(mode="fill", fill_value=0).astype(se.dtype)
    bits = np.dtype(f"uint{se.dtype.itemsize * 8}") if se.dtype.kind == "f" else None

    def same(a, b):
        if bits is None:
            return a == b
        return jax.lax.bitcast_convert_type(a, bits) == jax.lax.bitcast_convert_type(b, bits)

    def f(cur, xs):
        fst, b, ex, nw = xs
        cur = jnp.where(fst, b, cur)
        return jnp.where(same(cur, ex), nw, cur), cur
    _, old_s = jax.lax.scan(f, base[0], (first, base, se, sn))
    after = jnp.where(same(old_s, se), sn, old_s)
    out = flat.at[jnp.where(last, so, size)].set(after.astype(flat.dtype), mode="drop")
    return out, jnp.zeros_like(se).at[order].set(old_s)


# ----------------------------------------------------------------------------- random numbers

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85


def _mulhilo(a, m: int):
    """(high, low) 32-bit words of the 64-bit product ``a * m`` in uint32 arithmetic
    (16-bit halves: no 64-bit multiply is needed)."""
    u = np.uint32
    with np.errstate(all="ignore"):
        lo = a * u(m)
        a_lo, a_hi = a & u(0xFFFF), a >> u(16)
        m_lo, m_hi = u(m & 0xFFFF), u(m >> 16)
        ll, lh, hl, hh = a_lo * m_lo, a_lo * m_hi, a_hi * m_lo, a_hi * m_hi
        mid = (ll >> u(16)) + (lh & u(0xFFFF)) + (hl & u(0xFFFF))
        hi = hh + (lh >> u(16)) + (hl >> u(16)) + (mid >> u(16))
    return hi, lo


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 in uint32 arithmetic (bit for bit the C ``tk_philox4x32``)."""
    u = np.uint32
    with np.errstate(all="ignore"):
        for i in range(10):
            if i:
                k0 = k0 + u(_W0)
                k1 = k1 + u(_W1)
            h0, l0 = _mulhilo(c0, _M0)
            h1, l1 = _mulhilo(c2, _M1)
            c0, c1, c2, c3 = h1 ^ c1 ^ k0, l1, h0 ^ c3 ^ k1, l0
    return c0, c1, c2, c3


def rand(kind: str, key, counter):
    """``tk.random.bits/uniform/normal(key, counter)`` on uint64 values."""
    xp = _xp(key, counter)
    u = np.uint32
    lo32 = np.uint64(0xFFFFFFFF)
    k0, k1 = _astype(key & lo32, u), _astype(key >> np.uint64(32), u)
    c0, c1 = _astype(counter & lo32, u), _astype(counter >> np.uint64(32), u)
    zero = _astype(xp.zeros_like(c0), u)
    x, y, _, _ = philox4x32(c0, c1, zero, zero, k0, k1)
    scale = np.float32(5.9604644775390625e-08)
    if kind == "bits":
        return x
    if kind == "uniform":
        return _astype(x >> u(8), np.float32) * scale
    u1 = _astype((x >> u(8)) + u(1), np.float32) * scale
    u2 = _astype(y >> u(8), np.float32) * scale
    return xp.sqrt(np.float32(-2.0) * xp.log(u1)) * xp.cos(np.float32(6.2831853071795864769) * u2)
