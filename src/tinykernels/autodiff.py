"""``tk.autodiff``, ``tk.adjoint`` and ``tk.gradcheck``: differentiating kernel launches.

``tk.autodiff(tk.Reverse, fn, *args)`` calls ``fn`` on the primal values and records every
kernel launch it makes (snapshotting the arrays each launch writes). It then replays the
launches' adjoints in reverse order, each on the memory state its launch saw, so a value
that a later launch overwrote is still right (write-after-read across launches), and
finally puts the primal results back. Shadows accumulate. ``tk.autodiff(tk.Forward, ...)``
runs each launch's tangent kernel instead, which computes primal and tangent together.

Arguments are wrapped in activities: ``tk.Duplicated(x, dx)`` (an array and its shadow, or
in forward mode a float and its tangent), ``tk.Active(s)`` (a float scalar whose gradient
is returned), ``tk.Const(v)`` (anything not differentiated). Arrays a launch uses that were
not passed as Duplicated (temporaries made inside ``fn``) get zero shadows of their own,
so gradients flow through them.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as D
from . import lang
from .array import Array, asarray, copyto
from .errors import LaunchError
from .kernel import GROUPED_FEATURES, RECORDERS, Kernel, parse_ndrange
from .passes import adjoint_gather as G
from .passes.autodiff import TapePlan, reverse_kernel, tangent_kernel


class _Mode:
    def __init__(self, name):
        self.name = name

    def __repr__(self) -> str:
        return f"tk.{self.name}"


Reverse, Forward = _Mode("Reverse"), _Mode("Forward")
Const = lang.Const


class Duplicated:
    """An argument and its shadow (reverse: gradient accumulator; forward: tangent)."""

    def __init__(self, primal, shadow):
        self.primal, self.shadow = primal, shadow

    def __repr__(self) -> str:
        return f"tk.Duplicated({type(self.primal).__name__}, {type(self.shadow).__name__})"


class Active:
    """A float scalar whose gradient ``tk.autodiff`` returns."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"tk.Active({self.value!r})"


# ----------------------------------------------------------------------------- derived kernels

def _is_float_array(a) -> bool:
    return isinstance(a, (np.ndarray, Array)) and np.dtype(a.dtype).kind == "f"


def _is_float_scalar(a) -> bool:
    return isinstance(a, float) or (isinstance(a, np.generic) and np.dtype(type(a)).kind == "f")


def _host(a):
    from .array import as_host_ndarray
    h = as_host_ndarray(a)
    return h if h is not None else a


class DerivedKernel(Kernel):
    """The adjoint (``mode="reverse"``; ``"reverse_threads"``, ``"reverse_strip"``: other
    forms of scalar partials, see :func:`.adjoint_gather.speed_up`), tape-counting (``"count"``), tangent (``"tangent"``) or gather (``"gather:<array>"``,
    ``"gather_ring:<array>"``, ``"gather_in:<array>"``, see :mod:`.passes.adjoint_gather`)
    kernel of a kernel, for a fixed choice of differentiated parameters."""

    def __init__(self, primal: Kernel, mode: str, diff: tuple):
        self.primal, self.mode, self.diff = primal, mode, tuple(diff)
        self.fn = primal.fn
        self.name = f"{primal.name}_{mode}"
        self.unsafe_indices = primal.unsafe_indices
        params = []
        for name, kind in primal.params:
            params.append((name, kind))
            if name in self.diff:
                params.append((f"_d_{name}", "value"))
        if mode != "tangent":
            params += [("_tk_tape_f", "value"), ("_tk_tape_i", "value"), ("_tk_tape_off", "value")]
        if mode == "count":
            params.append(("_tk_counts", "value"))
        if G.gather_mode(mode) or mode == "reverse_strip":
            params += [(n, "value") for n in G.gather_param_names()]
        if mode.startswith("gather_ring:"):
            params += [(n, "value") for n in G.ring_param_names()]
        self.params = params
        self.cmask = sum(1 << i for i, (_, k) in enumerate(params) if k == "constexpr")
        self._src = None
        self._instances = {}
        import threading
        self._lock = threading.Lock()

    def source_info(self):
        return self.primal.source_info()

    def lower_ir(self, src, specs, opts):
        from dataclasses import replace as dc_replace
        primal_specs = {n: specs[n] for n, _ in self.primal.params}
        ir = self.primal.lower_ir(src, primal_specs, dc_replace(opts, kernel_name=self.primal.name))
        grouped = bool(ir.uses & GROUPED_FEATURES)
        if self.mode == "tangent":
            out = tangent_kernel(ir, self.diff)
            out.tape = TapePlan(True)
        else:
            out, plan = reverse_kernel(ir, self.diff, grouped, count=self.mode == "count",
                                       wide=opts.default_float == D.float64)
            gathers = ()
            if self.mode.startswith("reverse"):      # faster shapes: passes/adjoint_gather.py
                out, gathers = G.speed_up(out, grouped, self.diff, self.mode[len("reverse"):].lstrip("_"))
            elif G.gather_mode(self.mode):
                array, variant = G.gather_mode(self.mode)
                out = G.gather_for(out, grouped, array, plan.nf, plan.ni, variant)
            out.tape, out.gathers = plan, tuple(gathers)
        for p in out.params:   # shadows take the layout of the arrays actually passed
            if p[0] == "array" and p[1].name in specs and hasattr(specs[p[1].name], "contiguous"):
                p[1].contiguous = specs[p[1].name].contiguous
        return out


_DERIVED: dict = {}    # explicit cache: (kernel, mode, diff) -> DerivedKernel


def derived(kernel: Kernel, mode: str, diff: tuple) -> DerivedKernel:
    key = (id(kernel), mode, diff)
    d = _DERIVED.get(key)
    if d is None or d.primal is not kernel:
        d = _DERIVED[key] = DerivedKernel(kernel, mode, diff)
    return d


def _diff_names(kernel: Kernel, args) -> tuple:
    return tuple(name for (name, kind), a in zip(kernel.params, args)
                 if kind != "constexpr" and (_is_float_array(_host(a)) or _is_float_scalar(a)))


def _zeros_like(a, backend, dtype=None):
    from .array import zeros
    dt = dtype or np.dtype(a.dtype)
    if getattr(backend, "is_host", False):
        return np.zeros(a.shape, dt)
    return zeros(a.shape, dt, backend=backend)


def _dummy(backend, shape, dtype, empty: bool = False):
    from .array import empty as tk_empty, zeros
    if getattr(backend, "is_host", False):
        return (np.empty if empty else np.zeros)(shape, dtype)
    return (tk_empty if empty else zeros)(shape, dtype, backend=backend)


def _tape_dtypes(backend) -> tuple:
    """Tape and partial-sum dtypes: 64-bit, or 32-bit where the backend has no float64."""
    return (np.float64, np.int64) if getattr(backend, "supports_float64", True) else (np.float32, np.int32)


_PLANS: dict = {}     # explicit cache: (adjoint instance, signature, ...) -> TapePlan


class AdjointLauncher:
    """``tk.adjoint(kernel)(backend)``: launch with each differentiable argument followed by
    its shadow (a float scalar's shadow is a one-element float64 array that accumulates)."""

    def __init__(self, kernel: Kernel, backend, workgroupsize=None):
        from .backends import backend as make_backend
        self.kernel, self.backend, self.wg = kernel, make_backend(backend), workgroupsize
        self._scratch: dict = {}    # reused scratch arrays (partial sums, static tapes) by shape

    def scratch(self, tag, shape, dtype):
        key = (tag, shape, np.dtype(dtype))
        a = self._scratch.get(key)
        if a is None:
            a = self._scratch[key] = _dummy(self.backend, shape, dtype, empty=True)
        return a

    def split(self, args) -> tuple:
        """(primal args, {name: shadow}) from the interleaved argument list."""
        primal, shadows, it = [], {}, iter(args)
        for name, kind in self.kernel.params:
            try:
                a = next(it)
            except StopIteration:
                raise LaunchError(f"adjoint of '{self.kernel.name}': missing argument '{name}'") from None
            primal.append(a)
            if kind != "constexpr" and (_is_float_array(_host(a)) or _is_float_scalar(a)):
                try:
                    shadows[name] = next(it)
                except StopIteration:
                    raise LaunchError(f"adjoint of '{self.kernel.name}': missing the shadow of '{name}'") from None
        rest = list(it)
        if rest:
            raise LaunchError(f"adjoint of '{self.kernel.name}': {len(rest)} argument(s) too many")
        return primal, shadows

    def __call__(self, *args, ndrange, workgroupsize=None, stream=None):
        primal, shadows = self.split(args)
        return self.launch(primal, shadows, ndrange, workgroupsize or self.wg, restore=None)

    def plan(self, adj, args, ndrange, wg) -> tuple:
        """(tape plan, gathers, scalar partials form) of the adjoint specialization for these
        arguments (cached)."""
        L = getattr(adj, "_L", None)
        if L is not None and all(type(a) is np.ndarray or isinstance(a, (bool, int, float, np.generic))
                                 for a in args):
            # NumPy arrays and scalars are their own normalized form: the signature without
            # _prepare's checks (the launches that follow make them)
            geom, ndim, ranges, _ = parse_ndrange(ndrange, adj.name)
            wgs = adj._workgroup(ndim, wg)
            key = (id(adj), L.sig(adj._cmask, args, geom, ndim, 0, int(ranges)), wgs, ndim, ranges)
            p = _PLANS.get(key)
            if p is not None:
                return p
        norm, geom, ndim, ranges, total, wgs = adj._prepare(args, ndrange, wg)
        if L is not None:                      # the CPU launcher's signature
            sig = L.sig(adj._cmask, norm, geom, ndim, 0, int(ranges))
        elif hasattr(adj, "_key"):             # device runtimes: their compile-cache key
            sig = adj._key(norm, geom, ndim, ranges, wgs)
        else:
            sig = None
        key = (id(adj), sig, wgs, ndim, ranges)
        p = _PLANS.get(key) if key[1] is not None else None
        if p is None:
            ir = adj._ir(norm, geom, ndim, ranges, wgs)
            p = ir.tape, ir.gathers, getattr(ir, "partials", None)
            if key[1] is not None:
                _PLANS[key] = p
        return p

    def launch(self, primal, shadows, ndrange, wg, restore):
        """Run the adjoint; ``restore`` (if given) is called to reset primal memory after a
        tape-counting pass wrote to it."""
        diff = tuple(shadows)
        b = self.backend
        fdt, idt = _tape_dtypes(b)
        geom, ndim, ranges, total = parse_ndrange(ndrange, self.kernel.name)
        threads = getattr(b, "threads", 0) if getattr(b, "name", "") == "CPU" else 0
        adj = derived(self.kernel, "reverse_threads" if threads else "reverse_strip", diff)(b, self.wg)
        if total == 0:
            from .runtime.streams import completed_event
            return completed_event()
        full, partials, named = [], [], {}
        for (name, _), a in zip(self.kernel.params, primal):
            full.append(a)
            named[name] = a
            if name in shadows:
                if _is_float_scalar(a):       # partial sums (see below), added to the shadow afterwards
                    partials.append((shadows[name], name, len(full)))
                    full.append(self.scratch("dummy_f", 1, fdt))
                else:
                    full.append(shadows[name])
        # placeholders, never read or written: a static tape needs no offsets, the counting
        # pass writes no tape
        tape = [self.scratch("dummy_f", 1, fdt), self.scratch("dummy_i", 1, idt), self.scratch("dummy_off", (1, 2), idt)]
        gargs = [idt(v) for v in G.gather_args(geom)]
        main_extra = [] if threads else gargs
        plan, gathers, form = self.plan(adj, tuple(full + tape + main_extra), ndrange, wg)
        main_ndrange = G.strip_ndrange(geom, ndim) if form == "strip" else ndrange
        if form == "strip":           # one per work item of the strip launch (passes/adjoint_gather.py)
            nparts = math.prod(len(r) for r in main_ndrange)
        elif form == "threads":       # one per thread
            nparts = threads
        else:                         # one per work group
            nparts = G.ngroups(geom, ndim, adj._workgroup(ndim, wg))
        bufs = []
        for shadow, name, i in partials:
            full[i] = self.scratch(("partial", name), nparts, fdt)
            bufs.append((shadow, full[i]))
        if form == "threads":         # threads that get no work write no partial
            for _, buf in bufs:
                buf[:] = 0.0
        if plan.static:
            tape = [self.scratch("tape_f", max(1, total * plan.nf), fdt),
                    self.scratch("tape_i", max(1, total * plan.ni), idt), tape[2]]
        else:
            counts = _dummy(b, (total, 2), idt)
            if restore is None:    # called directly (tk.adjoint): undo the counting pass's writes here
                restore = _restorer(self.kernel, b, self.wg, primal, ndrange, wg)
            cnt = derived(self.kernel, "count", diff)(b, self.wg)
            cnt(*full, *tape, counts, ndrange=ndrange, workgroupsize=wg)
            b.synchronize()
            if restore is not None:
                restore()
            c = _host_copy(counts)
            off = np.zeros((total, 2), idt)
            off[1:] = np.cumsum(c, axis=0)[:-1]
            sizes = c.sum(axis=0)
            tape = [_dummy(b, max(1, int(sizes[0])), fdt), _dummy(b, max(1, int(sizes[1])), idt),
                    off if getattr(b, "is_host", False) else asarray(off, backend=b)]
        for g in gathers:    # before the main adjoint, which consumes the output shadows they read
            for mode, box, jumps in G.gather_boxes(g, geom, tuple(named[g.array].shape)):
                gk = derived(self.kernel, mode + g.array, diff)(b, self.wg)
                extra = [idt(v) for v in G.ring_args(jumps)] if jumps else []
                gk(*full, *tape, *gargs, *extra, ndrange=box, workgroupsize=wg)
        ev = adj(*full, *tape, *main_extra, ndrange=main_ndrange, workgroupsize=wg)
        if bufs and getattr(b, "is_host", False):
            b.synchronize()
            for shadow, buf in bufs:
                _add_scalar(shadow, float(_host_copy(buf).sum()))
        elif bufs:                     # summed on the device: no transfers, no waiting
            from ._autodiff_kernels import add_all
            ev = add_all(b, bufs, nparts)
        return ev


def _restorer(kernel: Kernel, backend, static_wg, primal, ndrange, wg):
    """A function that puts back (as they are now) the arrays one launch of ``kernel`` with
    arguments ``primal`` writes: the counting pass runs the forward sweep, which stores."""
    written = _written_params(kernel(backend, static_wg), primal, ndrange, wg)
    saved: dict = {}
    for (name, _), a in zip(kernel.params, primal):
        if name in written and id(a) not in saved:
            saved[id(a)] = (a, _copy(a))

    def restore() -> None:
        for a, copy in saved.values():
            _put(a, copy)
    return restore


def _add_scalar(shadow, value: float) -> None:
    """``shadow[0] += value`` for a one-element host or device array."""
    if isinstance(shadow, Array) and shadow._host is None:
        h = shadow.numpy()
        h[0] += value
        copyto(shadow, h)
    else:
        _host(shadow)[0] += value


def _host_copy(a) -> np.ndarray:
    return np.array(a.numpy() if isinstance(a, Array) else a)


def adjoint(kernel: Kernel):
    """The adjoint kernel of ``kernel``: ``tk.adjoint(k)(backend)(A, dA, x, dx, ..., ndrange=...)``.

    Each differentiable argument (a float array or float scalar) is followed by its shadow;
    the adjoint adds the gradient of ``sum(dOut * out)`` to the input shadows and consumes
    the output shadows (sets them to zero where the kernel overwrote the value).
    """
    class _Adjoint:
        def __call__(self, backend, workgroupsize=None):
            return AdjointLauncher(kernel, backend, workgroupsize)

        def __repr__(self):
            return f"<tk.adjoint of {kernel.name}>"
    return _Adjoint()


# ----------------------------------------------------------------------------- recording

class _Record:
    __slots__ = ("inst", "args", "ndrange", "wg", "snap", "written")

    def __init__(self, inst, args, ndrange, wg, snap, written):
        self.inst, self.args, self.ndrange, self.wg, self.snap, self.written = inst, args, ndrange, wg, snap, written


def _copy(a):
    if isinstance(a, Array) and a._host is None:
        c = _zeros_like(a, a.backend)
        copyto(c, a)
        return c
    return np.array(_host(a), copy=True)


def _put(dst, src) -> None:
    if isinstance(dst, Array) and dst._host is None:
        copyto(dst, src)
    else:
        np.copyto(_host(dst), _host(src))


def _written_params(inst, args, ndrange, wg) -> set:
    from .ir import nodes as N
    norm, geom, ndim, ranges, total, wgs = inst._prepare(args, ndrange, wg)
    ir = inst._ir(norm, geom, ndim, ranges, wgs)
    out = set()
    for s in N.walk_stmts(ir.body):
        if isinstance(s, N.Store) and s.array.space == "global":
            out.add(s.array.name)
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if isinstance(x, N.Atomic) and x.array.space == "global":
                    out.add(x.array.name)
    return out


class _Recorder:
    def __init__(self, mode, activities):
        self.mode = mode
        self.records: list = []
        self.shadows: dict = {}       # id(array) -> shadow
        self.keep: list = []          # keeps recorded arrays alive (ids stay valid)
        self.actives: list = []       # (value object, grad buffer per backend)
        self.tangents: dict = {}      # id(scalar) -> tangent (forward mode)
        for a in activities:
            if isinstance(a, Duplicated):
                if _is_float_scalar(a.primal):
                    self.tangents[id(a.primal)] = a.shadow
                else:
                    self.shadows[id(a.primal)] = a.shadow
                self.keep.append(a.primal)
            elif isinstance(a, Active):
                self.actives.append([a.value, {}])
                self.keep.append(a.value)

    # --- during fn ---------------------------------------------------------------------

    def launch(self, inst, args, ndrange, workgroupsize, stream):
        RECORDERS.pop()               # launches made here run normally
        try:
            if self.mode is Forward:
                return self.tangent_launch(inst, args, ndrange, workgroupsize)
            b = inst.backend
            written = _written_params(inst, args, ndrange, workgroupsize)
            snap = {}
            for (name, _), a in zip(inst.kernel.params, args):
                if name in written and id(a) not in snap:
                    snap[id(a)] = (a, _copy(a))
            self.keep.extend(args)
            self.records.append(_Record(inst, args, ndrange, workgroupsize, snap, written))
            ev = inst(*args, ndrange=ndrange, workgroupsize=workgroupsize, stream=stream)
            b.synchronize()
            return ev
        finally:
            RECORDERS.append(self)

    def shadow(self, a, backend):
        s = self.shadows.get(id(a))
        if s is None:
            s = self.shadows[id(a)] = _zeros_like(_host(a) if not isinstance(a, Array) else a, backend)
            self.keep.append(a)
        return s

    def scalar_shadow(self, value, backend):
        for entry in self.actives:
            if entry[0] is value:
                buf = entry[1].get(backend)
                if buf is None:
                    buf = entry[1][backend] = _dummy(backend, 1, _tape_dtypes(backend)[0])
                return buf
        return _dummy(backend, 1, _tape_dtypes(backend)[0])

    def tangent_launch(self, inst, args, ndrange, wg):
        kernel, b = inst.kernel, inst.backend
        diff = _diff_names(kernel, args)
        full = []
        for (name, _), a in zip(kernel.params, args):
            full.append(a)
            if name in diff:
                if _is_float_scalar(a):
                    full.append(type(a)(self.tangents.get(id(a), 0.0)))
                else:
                    full.append(self.shadow(a, b))
        ev = derived(kernel, "tangent", diff)(b, inst.static_wg)(*full, ndrange=ndrange, workgroupsize=wg)
        b.synchronize()
        return ev

    # --- after fn ------------------------------------------------------------------------

    def reverse(self) -> tuple:
        final = {}
        for r in self.records:
            for k, (a, _) in r.snap.items():
                final.setdefault(k, (a, None))
        final = {k: (a, _copy(a)) for k, (a, _) in final.items()}
        try:
            for r in reversed(self.records):
                self.replay_adjoint(r)
        finally:
            for a, saved in final.values():
                _put(a, saved)
        grads = []
        for value, bufs in self.actives:
            grads.append(float(sum(_host_copy(buf)[0] for buf in bufs.values())))
        return tuple(grads)

    def replay_adjoint(self, r: _Record) -> None:
        inst = r.inst
        kernel, b = inst.kernel, inst.backend

        def restore():
            for a, saved in r.snap.values():
                _put(a, saved)
        restore()
        diff = _diff_names(kernel, r.args)
        shadows = {}
        for (name, _), a in zip(kernel.params, r.args):
            if name in diff:
                shadows[name] = self.scalar_shadow(a, b) if _is_float_scalar(a) else self.shadow(a, b)
        AdjointLauncher(kernel, b, inst.static_wg).launch(list(r.args), shadows, r.ndrange, r.wg, restore)


def autodiff(mode, fn, *args):
    """Differentiate ``fn(*primals)`` (see the module docstring). Reverse mode returns the
    gradients of the ``tk.Active`` arguments, in order; forward mode returns None."""
    if mode not in (Reverse, Forward):
        raise TypeError("the first argument of tk.autodiff must be tk.Reverse or tk.Forward")
    primals = []
    for a in args:
        if isinstance(a, Duplicated):
            primals.append(a.primal)
        elif isinstance(a, (Active, lang.Const)):
            primals.append(a.value)
        else:
            primals.append(a)
    rec = _Recorder(mode, args)
    RECORDERS.append(rec)
    try:
        fn(*primals)
    finally:
        RECORDERS.remove(rec)
    if mode is Forward:
        return None
    return rec.reverse()


# ----------------------------------------------------------------------------- gradcheck

def gradcheck(fn, *args, eps: float = 1e-6, rtol: float = 1e-4, atol: float = 1e-6,
              directions: int = 3, seed: int = 0) -> bool:
    """Check ``tk.autodiff(tk.Reverse, fn, *args)`` against central finite differences.

    The loss is ``sum(shadow0 * x_after)`` over every Duplicated array ``x`` whose shadow
    ``shadow0`` is nonzero on entry (the seeds); the inputs are every Duplicated array and
    Active scalar. Reverse mode gives the loss's gradient (the shadows after the call, and
    the returned scalar gradients); it is compared with central differences of the loss
    along ``directions`` random directions. The arguments' values are left as they were.
    Raises AssertionError with the numbers on a mismatch; returns True otherwise.
    """
    rng = np.random.default_rng(seed)
    dups = [a for a in args if isinstance(a, Duplicated)]
    acts = [a for a in args if isinstance(a, Active)]
    x0 = [_host_copy(d.primal) for d in dups]
    s0 = [_host_copy(d.shadow) for d in dups]

    def primals(da=None, ds=None):
        out, k = [], 0
        for a in args:
            if isinstance(a, Duplicated):
                out.append(a.primal)
            elif isinstance(a, Active):
                out.append(type(a.value)(a.value + (ds[k] if ds else 0.0)))
                k += 1
            elif isinstance(a, lang.Const):
                out.append(a.value)
            else:
                out.append(a)
        return out

    def loss(da, ds) -> float:
        for d, x, v in zip(dups, x0, da):
            _put(d.primal, (x + v).astype(x.dtype))
        fn(*primals(da, ds))
        return sum(float((_host_copy(d.primal).astype(np.float64) * s).sum()) for d, s in zip(dups, s0))

    work = [Duplicated(d.primal, _copy(d.shadow)) for d in dups]
    it = iter(work)
    g_act = autodiff(Reverse, fn, *[next(it) if isinstance(a, Duplicated) else a for a in args])
    g_arr = [_host_copy(w.shadow).astype(np.float64) for w in work]
    try:
        for _ in range(directions):
            va = [rng.standard_normal(x.shape) if x.dtype.kind == "f" else np.zeros(x.shape) for x in x0]
            vs = list(rng.standard_normal(len(acts)))
            plus = loss([eps * v for v in va], [eps * v for v in vs])
            minus = loss([-eps * v for v in va], [-eps * v for v in vs])
            fd = (plus - minus) / (2 * eps)
            ad = sum(float((g * v).sum()) for g, v in zip(g_arr, va)) + sum(g * v for g, v in zip(g_act, vs))
            if not abs(fd - ad) <= atol + rtol * abs(fd):
                raise AssertionError(f"gradcheck failed: central differences give {fd!r}, autodiff gives {ad!r} "
                                     f"(|difference| {abs(fd - ad):.3g} > tolerance {atol + rtol * abs(fd):.3g})")
    finally:
        for d, x in zip(dups, x0):
            _put(d.primal, x)
    return True
