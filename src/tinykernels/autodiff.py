"""``tk.autodiff``, ``tk.adjoint`` and ``tk.gradcheck``: differentiating kernel launches.

``tk.autodiff(tk.Reverse, fn, *args)`` calls ``fn`` on the primal values and records every
kernel launch and ``tk.copyto`` it makes (copying, just before it is overwritten, any array a
recorded launch has read: copy-on-write). It then replays the adjoints in reverse order,
each on the memory state its launch saw, so a value that a later launch overwrote is still
right (write-after-read across launches), and finally puts the primal results back.
Shadows accumulate. ``tk.autodiff(tk.Forward, ...)``
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
from .array import Array, as_host_ndarray, asarray, copyto
from .errors import LaunchError
from .kernel import GROUPED_FEATURES, RECORDERS, Func, Kernel, parse_ndrange
from .passes import adjoint_gather as G
from .passes.autodiff import TapePlan, reverse_kernel, tangent_kernel
from .passes.overwrites import check_overwrites
from .runtime.launchplan import value_key
from .runtime.memspan import byte_span
from .tracebacks import api_boundary


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
        if not (_is_array(primal) or _is_float_scalar(primal) or isinstance(primal, (int, np.integer))):
            raise TypeError(f"tk.Duplicated: the primal must be an array (NumPy, tk.Array, torch, JAX, ...) or a "
                            f"float scalar, got {type(primal).__name__}"
                            + ("; convert a list with np.asarray" if isinstance(primal, (list, tuple)) else ""))
        _check_shadow(primal, shadow, "tk.Duplicated")
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

_FLOAT_DTYPES: dict = {}      # dtype or scalar type -> whether it is a float type


def _remembered(cache: dict, dt, pred) -> bool:
    """``pred`` of the kernel dtype of ``dt`` (False when it is none), remembered per dtype in
    ``cache``: ``D.from_any`` (NumPy's dtype name) is slow; an unhashable ``dt`` is not kept."""
    try:
        return cache[dt]
    except KeyError:
        pass
    except TypeError:
        t = D.from_any(dt)
        return t is not None and pred(t)
    t = D.from_any(dt)
    r = cache[dt] = t is not None and pred(t)
    return r


def _is_float_dtype(dt) -> bool:
    """Whether ``dt`` is one of the kernel language's float types: NumPy's kind ``"f"`` misses
    bfloat16 and the fp8 types (ml_dtypes' kind ``"V"``), whose arrays would then silently get
    no gradient. Remembered per dtype: ``tk.autodiff`` asks about 20 times per launch, and
    ``D.from_any`` made a third of its Python time per launch."""
    return _remembered(_FLOAT_DTYPES, dt, lambda t: t.is_float)


def _is_float_array(a) -> bool:
    return isinstance(a, (np.ndarray, Array)) and _is_float_dtype(a.dtype)


def _is_float_scalar(a) -> bool:
    return isinstance(a, float) or (isinstance(a, np.generic) and _is_float_dtype(type(a)))


def _host(a):
    h = as_host_ndarray(a)
    return h if h is not None else a


class DerivedKernel(Kernel):
    """The adjoint (``mode="reverse"``; ``"reverse_threads"``, ``"reverse_strip"``: other
    forms of scalar partials, see :func:`.adjoint_gather.speed_up`), tape-counting (``"count"``), tangent (``"tangent"``) or gather (``"gather:<array>"``,
    ``"gather_ring:<array>"``, ``"gather_in:<array>"``, see :mod:`.passes.adjoint_gather`)
    kernel of a kernel, for a fixed choice of differentiated parameters."""
    derived = True

    def __init__(self, primal: Kernel, mode: str, diff: tuple):
        self.primal, self.mode, self.diff = primal, mode, tuple(diff)
        self.fn = primal.fn
        self.name = f"{primal.name}_{mode}"
        self.unsafe_indices = primal.unsafe_indices
        self.fastmath = primal.fastmath
        params = []
        for name, kind in primal.params:
            params.append((name, kind))
            if name in self.diff:       # a tk.Const array's tangent is read only, not aliased either
                params.append((f"_d_{name}", "const" if mode == "tangent" and kind == "const" else "value"))
        if mode != "tangent":
            params += [("_tk_tape_f", "value"), ("_tk_tape_i", "value"), ("_tk_tape_off", "value")]
        if mode == "count":
            params.append(("_tk_counts", "value"))
        if G.gather_mode(mode) or mode.startswith("reverse_strip"):
            params += [(n, "value") for n in G.gather_param_names()]
        if (G.gather_mode(mode) or ("", ""))[1].startswith("ring"):
            params += [(n, "value") for n in G.ring_param_names()]
        self._check_names(params)
        self.params = params
        self.cmask = sum(1 << i for i, (_, k) in enumerate(params) if k == "constexpr")
        self._src = None
        self._instances = {}
        self._reads = []
        from .runtime.forksafe import ForkSafeLock
        self._lock = ForkSafeLock()

    def source_info(self):
        return self.primal.source_info()

    def _check_names(self, params) -> None:
        """A CompileError at the primal's parameter that has the name of a parameter this
        kernel adds (``_d_x``, the shadow of ``x``; ``_tk_tape_f``, ...): the generated code
        declared it twice, which the C or OpenCL compiler rejected with a message about
        generated code (until adx21)."""
        names = [n for n, _ in params]
        for name, _ in self.primal.params:
            if names.count(name) > 1 or name.startswith("_tk_"):
                src = self.primal.source_info()
                node = next((a for a in src.tree.args.args if a.arg == name), src.tree)
                what = (f"the shadow of '{name[3:]}'" if name.startswith("_d_") and name[3:] in self.diff
                        else "one of its own parameters")
                raise src.error(node, f"parameter '{name}' has the name that the derived ({self.mode}) "
                                "kernel gives " + what + "; rename the parameter to differentiate this kernel",
                                kernel=self.primal.name)

    def array_params(self) -> frozenset:
        """The primal's array parameters and their shadows (``_d_A``)."""
        p = self.primal.array_params()
        return p | {f"_d_{n}" for n in p}

    def lower_ir(self, src, specs, opts):
        from dataclasses import replace as dc_replace
        primal_specs = {n: specs[n] for n, _ in self.primal.params}
        ir = self.primal.lower_ir(src, primal_specs, dc_replace(opts, kernel_name=self.primal.name))
        check_overwrites(ir)       # a read another work item may overwrite: CompileError
        grouped = bool(ir.uses & GROUPED_FEATURES)
        if self.mode == "tangent":
            out = tangent_kernel(ir, self.diff)
            out.tape = TapePlan(True)
        else:
            out, plan = reverse_kernel(ir, self.diff, grouped, count=self.mode == "count",
                                       wide=opts.default_float == D.float64)
            gathers = ()
            scalars = {p[1] for p in ir.params if p[0] == "scalar"}
            pdts = {f"_d_{n}": specs[f"_d_{n}"].dtype for n in self.diff
                    if n in scalars and hasattr(specs.get(f"_d_{n}"), "dtype")}
            if self.mode.startswith("reverse"):      # faster shapes: passes/adjoint_gather.py
                out, gathers = G.speed_up(out, grouped, self.diff, self.mode[len("reverse"):].lstrip("_"), pdts)
            elif G.gather_mode(self.mode):
                array, variant = G.gather_mode(self.mode)
                out = G.gather_for(out, grouped, array, plan.nf, plan.ni, variant)
            partials = getattr(out, "partials", None)
            out = G.retype_partials(out, pdts)     # partials arrays: as passed (see _partial_dtype)
            out.tape, out.gathers, out.partials = plan, tuple(gathers), partials
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


def _diff_names(kernel: Kernel, args, host=_host) -> tuple:
    """The differentiable parameters of a launch with ``args``: its float arrays and float
    scalars (``host``: how to find an array's host view; a launch's ``_Memo.host``)."""
    return tuple(name for (name, kind), a in zip(kernel.params, args)
                 if kind != "constexpr" and (_is_float_array(host(a)) or _is_float_scalar(a)))


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
# (keyed by the instance itself, not its id(): a derived kernel replaced in _DERIVED frees its
# instances, and a new one at the same address must not find their plans)
_DEVICE_PLANS: dict = {}   # explicit cache, bounded: (adjoint instance, _device_plan_key) -> plan
_DEVICE_PLANS_MAX = 1024


def _device_plan_key(adj, args, ndrange, wg):
    """A key that fixes the specialization (so the plan) of the device-runtime instance
    ``adj`` for ``args`` without normalizing them, or None: every array argument a
    contiguous device array of ``adj``'s runtime (its type, dtype and shape; the shape fixes
    whether indices fit 32 bits), every other one a plain scalar (its type; a Python int
    whether it is >= 2**63; a constexpr its value), ``ndrange`` and ``wg`` hashable. Arrays
    of another device of the same runtime share the key: the launches that follow refuse
    them."""
    at = getattr(adj, "array_type", None)
    if at is None:
        return None
    parts = []
    for a, (_, kind) in zip(args, adj.kernel.params):
        t = type(a)
        if kind == "constexpr":
            if not isinstance(a, (bool, int, float, np.generic)):
                return None
            parts.append((t, a))
        elif isinstance(a, at):
            if not a.is_contiguous:
                return None
            parts.append((t, a.dtype, a.shape))
        elif t is int:
            parts.append((t, a >= 1 << 63))
        elif t is float or t is bool or isinstance(a, np.generic):
            parts.append((t,))
        else:
            return None
    if len(parts) != len(adj.kernel.params):
        return None
    key = (adj, tuple(parts), ndrange, wg)
    try:
        hash(key)
    except TypeError:
        return None
    return key


_SCRATCH_MAX = 64      # scratch arrays one AdjointLauncher keeps


class AdjointLauncher:
    """``tk.adjoint(kernel)(backend)``: launch with each differentiable argument followed by
    its shadow (a float scalar's shadow is a one-element float64 array that accumulates)."""

    def __init__(self, kernel: Kernel, backend, workgroupsize=None):
        from .backends import backend as make_backend
        self.kernel, self.backend, self.wg = kernel, make_backend(backend), workgroupsize
        self._scratch: dict = {}    # reused scratch arrays (partial sums, static tapes) by shape
        self._writes = None         # names of the parameters the kernel writes (found once)

    def scratch(self, tag, shape, dtype):
        key = (tag, shape, dtype)
        a = self._scratch.get(key)
        if a is None:
            if len(self._scratch) >= _SCRATCH_MAX:     # launches of ever new sizes: start over
                self._scratch.clear()
            a = self._scratch[key] = _dummy(self.backend, shape, dtype, empty=True)
        return a

    def split(self, args, named=None) -> tuple:
        """(primal args, {name: shadow}) from the interleaved argument list; parameters after
        the positional ones may come by keyword (``named``), as in a kernel launch, unless they
        are differentiable (they need their shadow after them)."""
        primal, shadows, it, read = [], {}, iter(args), []
        named = dict(named or {})
        what = f"adjoint of '{self.kernel.name}'"
        names = [n for n, _ in self.kernel.params]

        def layout() -> str:
            return (f"its arguments are {', '.join(names)}, each float array or float scalar followed by its "
                    f"shadow; the {len(args)} positional argument(s) given read as "
                    f"{', '.join(read) if read else 'nothing'}")
        for key in named:
            if key not in names:
                raise LaunchError(f"{what}: no argument '{key}' ({layout()})")
        for name, kind in self.kernel.params:
            try:
                a = next(it)
            except StopIteration:
                if name not in named:
                    raise LaunchError(f"{what}: missing argument '{name}' ({layout()})") from None
                a = named.pop(name)
                if kind != "constexpr" and (_is_float_array(_host(a)) or _is_float_scalar(a)):
                    raise LaunchError(f"{what}: argument '{name}' is differentiable, so it goes positionally, "
                                      f"followed by its shadow, not by keyword ({layout()})")
                primal.append(a)
                continue
            if name in named:
                raise LaunchError(f"{what}: argument '{name}' is given twice (by position and by keyword)")
            primal.append(a)
            read.append(name)
            if kind != "constexpr" and (_is_float_array(_host(a)) or _is_float_scalar(a)):
                try:
                    shadows[name] = next(it)
                except StopIteration:
                    raise LaunchError(f"{what}: missing the shadow of '{name}' ({layout()})") from None
                read.append(f"the shadow of '{name}'")
        rest = list(it)
        if rest:
            raise LaunchError(f"{what}: {len(rest)} argument(s) too many ({layout()})")
        return primal, shadows

    @api_boundary
    def __call__(self, *args, ndrange, workgroupsize=None, stream=None, **named):
        from .runtime.base import stream_mismatch
        why = stream_mismatch(stream, self.backend)
        if why is not None:           # as a kernel launch (it was ignored, a foreign stream too)
            raise LaunchError(f"adjoint of '{self.kernel.name}': {why}")
        primal, shadows = self.split(args, named)
        self.check(primal, shadows, ndrange, workgroupsize or self.wg)
        if stream is None:
            return self.launch(primal, shadows, ndrange, workgroupsize or self.wg, restore=None)
        # ordered within `stream` (SPEC 6): after the work queued on it before (the adjoint's
        # several launches and host steps run on the backend's default stream), and before the
        # work queued on it after, which waits for the returned event
        stream.synchronize()
        ev = self.launch(primal, shadows, ndrange, workgroupsize or self.wg, restore=None)
        stream.wait(ev)
        return ev

    def check(self, primal, shadows, ndrange, wg) -> None:
        """LaunchError unless every shadow matches its argument and no two arrays among the
        arguments and shadows share memory where one of them is written (a shadow always is)."""
        what = f"adjoint of '{self.kernel.name}'"
        if self._writes is None:
            self._writes = _accesses(self.kernel(self.backend, self.wg), primal, ndrange, wg)[1]
        named, memo = [], _Memo()
        for (name, _), a in zip(self.kernel.params, primal):
            if name not in shadows:
                if _is_array(a):
                    named.append((f"'{name}'", a, name in self._writes))
                continue
            s = shadows[name]
            if _is_array(a):
                _check_shadow(a, s, f"{what}: the shadow of '{name}'", LaunchError, disjoint=False, memo=memo)
                named += [(f"'{name}'", a, name in self._writes), (f"the shadow of '{name}'", s, True)]
            else:
                if not (_is_array(s) and _is_float_dtype(s.dtype) and math.prod(s.shape) == 1):
                    raise LaunchError(f"{what}: the shadow of '{name}' must be a one-element float array "
                                      f"(it accumulates the scalar's gradient), got "
                                      f"{type(s).__name__}{' of shape ' + str(tuple(s.shape)) if _is_array(s) else ''}")
                named.append((f"the shadow of '{name}'", s, True))
            _check_writable_shadow(s, f"{what}: the shadow of '{name}'", LaunchError)
        _check_disjoint(named, what, LaunchError, memo)

    def plan(self, adj, args, ndrange, wg) -> tuple:
        """(tape plan, gathers, scalar partials form) of the adjoint specialization for these
        arguments (cached)."""
        dkey = _device_plan_key(adj, args, ndrange, wg)
        if dkey is not None:
            p = _DEVICE_PLANS.get(dkey)
            if p is not None:
                return p
        L = getattr(adj, "_L", None)
        if L is not None and all(type(a) is np.ndarray or isinstance(a, (bool, int, float, np.generic))
                                 for a in args):
            # NumPy arrays and scalars are their own normalized form: the signature without
            # _prepare's checks (the launches that follow make them)
            geom, ndim, ranges, _ = parse_ndrange(ndrange, adj.name)
            wgs = adj._workgroup(ndim, wg)
            key = (adj, L.sig(adj._cmask, args, geom, ndim, 0, int(ranges)), wgs, ndim, ranges)
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
        key = (adj, sig, wgs, ndim, ranges)
        p = _PLANS.get(key) if key[1] is not None else None
        if p is None:
            ir = adj._ir(norm, geom, ndim, ranges, wgs)
            p = ir.tape, ir.gathers, getattr(ir, "partials", None)
            if key[1] is not None:
                _PLANS[key] = p
        if dkey is not None:
            if len(_DEVICE_PLANS) >= _DEVICE_PLANS_MAX:     # launches of ever new shapes: start over
                _DEVICE_PLANS.clear()
            _DEVICE_PLANS[dkey] = p
        return p

    def launch(self, primal, shadows, ndrange, wg, restore):
        """Run the adjoint; ``restore`` (if given) is called to reset primal memory after a
        tape-counting pass wrote to it."""
        diff = tuple(shadows)
        b = self.backend
        fdt, idt = _tape_dtypes(b)
        geom, ndim, ranges, total = parse_ndrange(ndrange, self.kernel.name)
        threads = getattr(b, "threads", 0) if getattr(b, "name", "") == "CPU" else 0
        mode = _main_mode(b, threads, geom, ndim)
        adj = derived(self.kernel, mode, diff)(b, self.wg)
        if total == 0:
            from .runtime.streams import completed_event
            return completed_event()
        full, partials, named, narrow = [], [], {}, []
        for (name, _), a in zip(self.kernel.params, primal):
            full.append(a)
            named[name] = a
            if name in shadows:
                if _is_float_scalar(a):       # partial sums (see below), added to the shadow afterwards
                    pdt = _partial_dtype(a, fdt, threads)
                    partials.append((shadows[name], name, len(full), pdt))
                    full.append(self.scratch(("dummy_p", np.dtype(pdt).name), 1, pdt))
                elif _is_narrow_float(shadows[name]):     # accumulated in float32 (shadow_dtype)
                    wide = _widened(shadows[name], b)
                    narrow.append((shadows[name], wide))
                    full.append(wide)
                else:
                    full.append(shadows[name])
        # placeholders, never read or written: a static tape needs no offsets, the counting
        # pass writes no tape
        tape = [self.scratch("dummy_f", 1, fdt), self.scratch("dummy_i", 1, idt), self.scratch("dummy_off", (1, 2), idt)]
        gargs = [idt(v) for v in G.gather_args(geom)]
        main_extra = gargs if mode.startswith("reverse_strip") else []   # the strip forms' geometry
        plan, gathers, form = self.plan(adj, tuple(full + tape + main_extra), ndrange, wg)
        main_ndrange = G.strip_ndrange(geom, ndim) if form == "strip" else ndrange
        if form == "strip":           # one per work item of the strip launch (passes/adjoint_gather.py)
            nparts = math.prod(len(r) for r in main_ndrange)
        elif form == "threads":       # one per thread
            nparts = threads
        else:                         # one per work group
            nparts = G.ngroups(geom, ndim, adj._workgroup(ndim, wg))
        # tape slots: one per work item of the ndrange; in an unsafe_indices kernel also one per
        # item past it in a partial last group (they push to the tape too: passes.autodiff.tape_slot)
        slots = total
        if self.kernel.unsafe_indices:
            wgt = adj._workgroup(ndim, wg)
            slots = G.ngroups(geom, ndim, wgt) * math.prod(wgt)
        bufs = []
        for shadow, name, i, pdt in partials:
            full[i] = self.scratch(("partial", name), nparts, pdt)
            bufs.append((shadow, full[i]))
        if form == "threads":         # threads that get no work write no partial
            for _, buf in bufs:
                buf[:] = 0.0
        if plan.static:
            tape = [self.scratch("tape_f", max(1, slots * plan.nf), fdt),
                    self.scratch("tape_i", max(1, slots * plan.ni), idt), tape[2]]
        else:
            counts = _dummy(b, (slots, 2), idt)
            if restore is None:    # called directly (tk.adjoint): undo the counting pass's writes here
                restore = _restorer(self.kernel, b, self.wg, primal, ndrange, wg)
            cnt = derived(self.kernel, "count", diff)(b, self.wg)
            cnt(*full, *tape, counts, ndrange=ndrange, workgroupsize=wg)
            b.synchronize()
            if restore is not None:
                restore()
            c = _host_copy(counts)
            off = np.zeros((slots, 2), idt)
            off[1:] = np.cumsum(c, axis=0)[:-1]
            sizes = c.sum(axis=0)
            tape = [_dummy(b, max(1, int(sizes[0])), fdt), _dummy(b, max(1, int(sizes[1])), idt),
                    off if getattr(b, "is_host", False) else asarray(off, backend=b)]
        # the gathers' groups: rows on CPU OpenCL devices, else the primal launch's (flat kernels)
        gwg = G.gather_workgroup(ndim, bool(getattr(b, "items_in_loops", False)), getattr(b, "max_workgroupsize", 1))
        for g in gathers:    # before the main adjoint, which consumes the output shadows they read
            for mode, box, jumps in G.gather_boxes(g, geom, tuple(named[g.array].shape), peel=bool(threads)):
                gk = derived(self.kernel, mode + g.array, diff)(b, self.wg if gwg is None else None)
                extra = [idt(v) for v in G.ring_args(jumps)] if jumps else []
                gk(*full, *tape, *gargs, *extra, ndrange=box, workgroupsize=wg if gwg is None else gwg)
        ev = adj(*full, *tape, *main_extra, ndrange=main_ndrange, workgroupsize=wg)
        for shadow, wide in narrow:    # round the float32 gradients back into the caller's shadows, once
            ev = _narrowed_into(shadow, wide, b) or ev
        if bufs and getattr(b, "is_host", False):
            b.synchronize()
            for shadow, buf in bufs:
                _add_scalar(shadow, float(_host_copy(buf).sum()))
        elif bufs:                     # summed on the device: no transfers, no waiting
            from ._autodiff_kernels import add_all
            ev = add_all(b, bufs, nparts)
        return ev


_LAUNCHER_TAG = object()     # inst._compiled key of the instance's AdjointLauncher


def _launcher_of(inst) -> AdjointLauncher:
    """The AdjointLauncher that replays the adjoints of ``inst``'s launches, kept beside its
    compiled code (``_forget`` drops it): its scratch arrays (dummies, partial sums, static
    tapes: about 8 allocations) are reused from one ``tk.autodiff`` call to the next, as
    ``tk.adjoint``'s launcher reuses them from one launch to the next."""
    la = inst._compiled.get(_LAUNCHER_TAG)
    if la is None:
        la = inst._compiled[_LAUNCHER_TAG] = AdjointLauncher(inst.kernel, inst.backend, inst.static_wg)
    return la


def _main_mode(backend, threads: int, geom: tuple, ndim: int) -> str:
    """The main adjoint's mode for a launch of geometry ``geom``: scalar partials per thread
    on the CPU backend, per strip of items elsewhere; each work item's strip contiguous where
    the runtime runs a group's work items as a loop on a CPU (``backend.items_in_loops``:
    PoCL), interleaved across work items otherwise (GPUs coalesce neighbouring work items'
    accesses); a "1" at the end when every step of the launch is 1 (the strip kernel then
    knows its items' stride). Where the driver bounds a work item's loop back edges
    (``backend.bounded_loops``: WebGPU, lavapipe stops at 65535) the strip form, which runs
    STRIP items' loops in one work item, would pass that bound 16 times sooner and silently
    drop the rest of the strip: there the partials are per work group ("reverse")."""
    if threads:
        return "reverse_threads"
    if getattr(backend, "bounded_loops", False):
        return "reverse"
    mode = "reverse_stripc" if getattr(backend, "items_in_loops", False) else "reverse_strip"
    return mode + "1" if all(geom[3 * d + 2] == 1 for d in range(ndim)) else mode


def _partial_dtype(value, fdt, threads: int):
    """The dtype of a float scalar's partial gradients: float32 for a float32 scalar on the
    device backends, whose strip form then accumulates its STRIP items in float32 (float64
    accumulators halve a vectorizer's width on float32 data: PoCL runs that adjoint about
    1.6x slower), the tape's float type otherwise. The partials are summed in float64
    (``_autodiff_kernels.add_partials``) where the device has it."""
    if not threads and isinstance(value, np.floating) and value.dtype == np.float32:
        return np.float32
    return fdt


def _restorer(kernel: Kernel, backend, static_wg, primal, ndrange, wg):
    """A function that puts back (as they are now) the arrays one launch of ``kernel`` with
    arguments ``primal`` writes: the counting pass runs the forward sweep, which stores."""
    written = _accesses(kernel(backend, static_wg), primal, ndrange, wg)[1]
    saved: dict = {}
    for (name, _), a in zip(kernel.params, primal):
        if name in written and id(a) not in saved:
            saved[id(a)] = (a, _copy(a))

    def restore() -> None:
        for a, copy in saved.values():
            _put(a, copy)
    return restore


_NARROW_DTYPES: dict = {}    # explicit cache: dtype -> whether it is a float narrower than float32


def _is_narrow_float(a) -> bool:
    """Whether ``a`` is an array of a float type narrower than float32 (float16, bfloat16,
    fp8): its reverse-mode shadow is float32 in the adjoint (``passes.autodiff.shadow_dtype``).
    Remembered per dtype (asked for every shadow of every adjoint launch)."""
    dt = getattr(a, "dtype", None)
    if dt is None:                   # only an array interface: its host view's
        dt = getattr(_host(a), "dtype", None)
        if dt is None:
            return False
    return _remembered(_NARROW_DTYPES, dt, lambda t: t.is_float and t.bits < 32)


def _widened(shadow, backend):
    """A float32 copy of the narrow shadow ``shadow``, where the adjoint accumulates (on the
    device, by a kernel: any array the backend takes, no transfer)."""
    if getattr(backend, "is_host", False):
        return np.asarray(_host(shadow)).astype(np.float32)
    from ._autodiff_kernels import convert
    shape = tuple(shadow.shape)
    wide = _dummy(backend, shape, np.float32, empty=True)
    convert(backend)(wide, shadow, ndrange=shape)
    return wide


def _narrowed_into(shadow, wide, backend) -> None:
    """``shadow[...] = wide``, rounded once to the shadow's dtype (host shadows after the
    backend has finished the adjoint; on the device a kernel queued after it)."""
    if getattr(backend, "is_host", False):
        backend.synchronize()
        h = _host(shadow)
        h[...] = wide.astype(h.dtype)
        return None
    from ._autodiff_kernels import convert
    return convert(backend)(shadow, wide, ndrange=tuple(shadow.shape))


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
    if not isinstance(kernel, Kernel):
        raise TypeError(f"tk.adjoint expects a @tk.kernel, got {type(kernel).__name__}"
                        + (" (a @tk.func is differentiated through the kernels that call it)"
                           if isinstance(kernel, Func) else ""))

    class _Adjoint:
        name = kernel.name

        def __call__(self, backend, workgroupsize=None):
            return AdjointLauncher(kernel, backend, workgroupsize)

        @api_boundary
        def launch(self, *args, ndrange=None, workgroupsize=None, stream=None, **named):
            """As ``kernel.launch``: on the backend the first array argument lives on."""
            from .array import get_backend
            from .backends import default_backend
            b = None
            for a in list(args) + list(named.values()):
                if not isinstance(a, (bool, int, float, np.generic)):
                    try:
                        b = get_backend(a)
                    except LaunchError as e:
                        raise LaunchError(f"adjoint of '{kernel.name}': {e}") from None
                    break
            if ndrange is None:
                raise LaunchError(f"adjoint of '{kernel.name}': ndrange= is missing (an int, or a tuple of 1 "
                                  "to 3 ints or ranges)")
            return self(b if b is not None else default_backend())(
                *args, ndrange=ndrange, workgroupsize=workgroupsize, stream=stream, **named)

        def __repr__(self):
            return f"<tk.adjoint of {kernel.name}>"
    return _Adjoint()


# ----------------------------------------------------------------------------- memory

def _span(a):
    """Where an array argument's elements lie: ``(memory, first byte, end byte)``, or None for
    a scalar or an empty array. Host arrays are byte ranges of the address space; a device
    array is its whole buffer (device arrays are never views)."""
    if type(a) is np.ndarray:         # the common case first: no isinstance chain
        return _host_span(a)
    if isinstance(a, Array) and a._host is None:
        buf = getattr(a, "buffer", None)
        if buf is not None:
            return (id(buf), 0, max(1, a.nbytes))
        try:
            lo = int(a.ptr)
        except (AttributeError, TypeError):
            return (id(a), 0, max(1, a.nbytes))
        return (a.backend, lo, lo + max(1, a.nbytes))
    h = _host(a) if not isinstance(a, _SCALAR_TYPES) else None
    return _host_span(h) if isinstance(h, np.ndarray) else None


def _host_span(h: np.ndarray):
    """:func:`_span` of a NumPy array."""
    if h.size == 0:
        return None
    lo = h.__array_interface__["data"][0]
    if h.flags.c_contiguous:
        return ("host", lo, lo + h.nbytes)
    return ("host",) + byte_span(lo, h.shape, h.strides, h.itemsize)


def _overlap(s, t) -> bool:
    """Whether two spans (from :func:`_span`) share a byte."""
    return s is not None and t is not None and s[0] == t[0] and s[1] < t[2] and t[1] < s[2]


def _layout(a) -> tuple:
    """(shape, byte strides, NumPy dtype) of an array argument (a NumPy array, a tk.Array, or
    any host array-like such as a CPU torch tensor)."""
    h = a if type(a) is np.ndarray else _host(a)
    if isinstance(h, np.ndarray):
        return h.shape, h.strides, h.dtype
    return tuple(a.shape), tuple(getattr(a, "strides", ())), np.dtype(a.dtype)


def _mem_key(a, span=None):
    """The identity of an array's memory and layout: two objects with the same key (a NumPy
    array and the tk.Array wrapping it, say) are the same array to autodiff."""
    span = span if span is not None else _span(a)
    shape, strides, dtype = _layout(a)
    return (span, tuple(shape), tuple(strides), dtype.str)


class _Memo:
    """The spans and memory keys of the arrays of one recorded launch (or of ``tk.autodiff``'s
    arguments), each found once: a launch's checks, copy-on-write and shadows asked about 20
    times per launch, each building the array's ``__array_interface__``. Only for the span
    of one step, in which no user code runs that could move, resize or free an array (the
    arguments keep the ids alive); nothing is kept from one launch to the next."""
    __slots__ = ("hosts", "spans", "keys")

    def __init__(self):
        self.hosts: dict = {}
        self.spans: dict = {}
        self.keys: dict = {}

    def host(self, a):
        """``_host(a)``: a host array's NumPy view (a CPU torch tensor's costs about 5 µs),
        else ``a`` itself (a device array, a scalar)."""
        if type(a) is np.ndarray:
            return a
        try:
            return self.hosts[id(a)]
        except KeyError:
            h = self.hosts[id(a)] = a if isinstance(a, _SCALAR_TYPES) else _host(a)
            return h

    def span(self, a):
        try:
            return self.spans[id(a)]
        except KeyError:
            s = self.spans[id(a)] = _span(self.host(a))
            return s

    def key(self, a):
        try:
            return self.keys[id(a)]
        except KeyError:
            k = self.keys[id(a)] = _mem_key(self.host(a), self.span(a))
            return k


_SCALAR_TYPES = (int, float, complex, bool, np.generic, str, bytes, type(None))


def _is_array(a) -> bool:
    return type(a) is np.ndarray or not isinstance(a, _SCALAR_TYPES) and hasattr(a, "shape") and hasattr(a, "dtype")


def _device_of(a):
    """'host' for arrays in host memory, else the array's backend."""
    return "host" if not (isinstance(a, Array) and a._host is None) else a.backend


def _check_shadow(primal, shadow, what: str, error=ValueError, disjoint: bool = True,
                  memo: _Memo | None = None) -> None:
    """Raise ``error`` unless ``shadow`` can be the shadow of ``primal`` (same dtype, shape and
    device for an array, and, with ``disjoint``, no shared memory; a float for a float
    scalar). ``memo``: the host views and spans found for the same step."""
    if _is_array(primal):
        if not _is_array(shadow):
            raise error(f"{what}: the shadow of an array must be an array of the same dtype and shape, "
                        f"got {type(shadow).__name__}")
        memo = memo or _Memo()
        (ps, _, pd), (ss, _, sd) = _layout(memo.host(primal)), _layout(memo.host(shadow))
        if sd != pd:
            raise error(f"{what}: the shadow has dtype {sd} but the array has dtype {pd}")
        if tuple(ss) != tuple(ps):
            raise error(f"{what}: the shadow has shape {tuple(ss)} but the array has shape {tuple(ps)}")
        dp, ds = _device_of(primal), _device_of(shadow)
        if dp != ds:
            where = lambda d: "host memory" if d == "host" else repr(d)  # noqa: E731
            raise error(f"{what}: the shadow lives in {where(ds)} but the array lives in {where(dp)}")
        if disjoint and _overlap(memo.span(primal), memo.span(shadow)):
            raise error(f"{what}: the shadow shares memory with the array")
    elif _is_float_scalar(primal) and not _is_float_scalar(shadow) and not isinstance(shadow, int):
        raise error(f"{what}: the tangent of a float scalar must be a float, got {type(shadow).__name__}")


def _check_writable_shadow(shadow, what: str, error=ValueError,
                           why: str = "reverse mode adds the gradient into it") -> None:
    """Raise ``error`` (``what`` names the shadow) if the array ``shadow``, which reverse mode
    writes (gradients are added into it, an output's seed is consumed), is read-only (a JAX
    array, a NumPy array with ``writeable=False``); found at the launch it was an error about
    an internal kernel's ``_d_<name>`` argument, after the primal had run."""
    h = _host(shadow)
    if isinstance(h, np.ndarray) and not h.flags.writeable:
        raise error(f"{what} is read-only (writeable=False, e.g. a JAX array), but {why}; pass a writeable "
                    "array (e.g. np.zeros_like(x))")


def _check_disjoint(named, what: str, error=ValueError, memo: _Memo | None = None) -> None:
    """Raise ``error`` naming the first two of ``named`` ((name, array, written) triples) that
    share memory where at least one of them is written."""
    span = memo.span if memo is not None else _span
    spans = [(n, span(a), w) for n, a, w in named]
    for k, (n1, s1, w1) in enumerate(spans):
        for n2, s2, w2 in spans[k + 1:]:
            if (w1 or w2) and _overlap(s1, s2):
                raise error(f"{what}: {n1} and {n2} share memory and "
                            f"{n1 if w1 else n2} is written; differentiating aliased arrays is not "
                            "supported (pass distinct arrays, e.g. a copy)")


# ----------------------------------------------------------------------------- recording

class _Record:
    """One recorded launch (``inst`` a kernel instance) or host copy (``inst`` None:
    ``args`` is ``(dst, src)``), with the snapshots of what it overwrote that earlier
    records read: ``snap`` is ``[(array, copy before the launch)]``."""
    __slots__ = ("inst", "args", "ndrange", "wg", "snap")

    def __init__(self, inst, args, ndrange, wg, snap):
        self.inst, self.args, self.ndrange, self.wg, self.snap = inst, args, ndrange, wg, snap


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


def _accesses(inst, args, ndrange, wg, host=None) -> tuple:
    """(names of the global arrays the kernel reads, names it writes); atomics do both.
    Found once per specialization (``KernelInstance.ir_fact``) and remembered per
    :func:`_access_key` beside it (``inst._compiled``, which ``_forget`` drops when a global
    the kernel folded in changes): a launch of a signature seen before skips ``_prepare``
    (about 20 µs of a tiny forward launch's 90). ``host``: how to find a host array's NumPy
    view (a launch's ``_Memo.host``; without it only NumPy arrays and host tk.Arrays are
    keyed)."""
    key = _access_key(inst, args, ndrange, wg, host)
    found = inst._compiled.get(key) if key is not None else None
    if found is None:
        norm, geom, ndim, ranges, total, wgs = inst._prepare(args, ndrange, wg)
        found = inst.ir_fact("accesses", _ir_accesses, norm, geom, ndim, ranges, wgs)
        if key is not None:
            inst._compiled[key] = found
    read, written = found
    return set(read), set(written)


_ACCESS_TAG = object()     # first entry of _access_key's keys (apart from ir_fact's)


def _access_key(inst, args, ndrange, wg, host=None):
    """A key that fixes what ``inst._prepare`` makes of ``args`` (so the specialization and
    its access sets), or None: every array argument a NumPy array or a host tk.Array (or, on
    a host backend with ``host`` given, any array ``host`` views as a NumPy array: a CPU
    torch tensor), keyed by its type and its view's dtype, shape, byte strides and alignment
    (everything ``_normalize`` checks and ``_specs`` and ``_fits32`` read); every scalar a
    bool, float, NumPy scalar (its type) or int (its type and whether it fits 32, 63 and 64
    bits: WebGPU refuses an int beyond 32); a constexpr its exact value; ``ndrange`` and
    ``wg`` hashable. A launch whose ``_prepare`` raises stores nothing, so each key's first
    launch raises what it always raised. Nothing about a data pointer is kept: the access
    sets do not depend on it."""
    params = inst.kernel.params
    on_host = host is not None and getattr(inst.backend, "is_host", False)
    if len(args) != len(params):
        return None
    parts = []
    try:
        for a, (_, kind) in zip(args, params):
            t = type(a)
            if kind == "constexpr":
                parts.append(value_key(a))
                continue
            if t is float or t is bool or isinstance(a, np.generic):
                parts.append(t)
                continue
            if t is int:
                parts.append((t, -(1 << 31) <= a < 1 << 31, a >= 1 << 63, a < -(1 << 63), a >= 1 << 64))
                continue
            if t is Array:
                h = a._host
            elif t is np.ndarray:
                h = a
            elif on_host and not isinstance(a, _SCALAR_TYPES):
                try:
                    h = host(a)
                except Exception:  # noqa: BLE001 - _prepare raises its LaunchError for it
                    return None
            else:
                return None
            if type(h) is not np.ndarray:
                return None
            parts.append((t, h.dtype, h.shape, h.strides, h.flags.aligned))
        key = (_ACCESS_TAG, tuple(parts), ndrange, wg)
        hash(key)
    except TypeError:                       # an unhashable constexpr, ndrange or workgroup size
        return None
    return key


def _ir_accesses(ir) -> tuple:
    """(frozenset of the global arrays ``ir`` reads, frozenset of those it writes)."""
    from .ir import nodes as N
    read, written = set(), set()
    for s in N.walk_stmts(ir.body):
        if isinstance(s, N.Store) and s.array.space == "global":
            written.add(s.array.name)
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if isinstance(x, N.Load) and x.array.space == "global":
                    read.add(x.array.name)
                elif isinstance(x, N.Atomic) and x.array.space == "global":
                    read.add(x.array.name)
                    written.add(x.array.name)
    return frozenset(read), frozenset(written)


def _settle(backend, stream) -> None:
    """Wait until ``stream`` (the backend's streams when None) has done what it was given,
    including its waits on other streams' events: a recorded launch's copy-on-write snapshots
    are taken on the host and must see what the launch will read (before audit17a a primal
    that another stream was still filling was snapshotted early: a wrong gradient)."""
    if stream is not None:
        stream.synchronize()
    else:
        backend.synchronize()


class _Recorder:
    """Records the launches (and host copies) of ``fn`` and replays their adjoints.

    Memory model: every record keeps a copy, taken just before it ran, of each array it
    overwrites that a record (itself included) has read: copy-on-write, so an array nobody
    reads before it is overwritten is never copied. Going backwards through the records and
    putting each one's copies back after its adjoint ran, every adjoint sees the memory its
    launch saw. Shadows are keyed by memory (see :func:`_mem_key`), so a NumPy array and a
    tk.Array wrapping it share one; a view that overlaps an array carrying gradients
    without being it is refused, since its gradient would be lost."""

    def __init__(self, mode, activities, memo: _Memo | None = None):
        memo = memo or _Memo()
        self.mode = mode
        self.records: list = []
        self.shadows: dict = {}       # memory key -> shadow
        self.tracked: list = []       # (span, key, name) of arrays that carry gradients
        self.reads: dict = {}         # memory key -> span, of every array a record has read
        self.written: dict = {}       # memory key -> [array, span, whether its final value is kept]
        self.keep: list = []          # keeps recorded arrays alive (keys stay valid)
        self.actives: list = []       # (value object, grad buffer per backend)
        self.tangents: dict = {}      # id(scalar) -> tangent (forward mode)
        for a in activities:
            if isinstance(a, Duplicated):
                if _is_float_scalar(a.primal):
                    self.tangents[id(a.primal)] = a.shadow
                elif _is_array(a.primal):
                    key = memo.key(a.primal)
                    self.shadows[key] = a.shadow
                    self.tracked.append((key[0], key, "a tk.Duplicated array"))
                self.keep.append(a.primal)
            elif isinstance(a, Active):
                self.actives.append([a.value, {}])
                self.keep.append(a.value)

    # --- during fn ---------------------------------------------------------------------

    def check_views(self, named, memo: _Memo | None = None) -> None:
        """Refuse a float array that overlaps an array carrying gradients without being it."""
        memo = memo or _Memo()
        for name, a in named:
            if not _is_float_array(memo.host(a)):
                continue
            key = memo.key(a)
            if key in self.shadows:
                continue
            for span, k, what in self.tracked:
                if _overlap(key[0], span) and k != key:
                    raise ValueError(f"tk.autodiff: {name} is a view that overlaps {what} without being "
                                     "that array (another shape, offset or stride): its gradient would be "
                                     "lost; pass the whole array and index it inside the kernel")

    def check_scalars(self, kernel_name, named) -> None:
        """Warn when a float argument equals a tk.Active value but is another object."""
        import warnings
        for name, a in named:
            if not _is_float_scalar(a):
                continue
            for value, _ in self.actives:
                if a is not value and a == value:
                    warnings.warn(f"tk.autodiff: kernel '{kernel_name}' argument '{name}' equals the tk.Active "
                                  f"value {value!r} but is another object, so it gets no gradient (Active "
                                  "scalars are tracked by identity: pass the very object fn received)",
                                  stacklevel=4)

    def before_write(self, reads: list, writes: list, memo: _Memo | None = None) -> list:
        """Copy-on-write: the snapshots a record needs of the arrays ``writes`` it overwrites
        (those that overlap anything read so far or by this record), then note its accesses."""
        memo = memo or _Memo()
        for a in reads:
            span = memo.span(a)
            if span is not None:
                self.reads.setdefault(memo.key(a), span)
        snap, seen = [], set()
        for a in writes:
            span = memo.span(a)
            key = memo.key(a)
            if key in seen or span is None:
                continue
            seen.add(key)
            copied = any(_overlap(span, r) for r in self.reads.values())
            if copied:
                snap.append((a, _copy(a)))
            self.note_write(a, span, key, copied)
            if _is_float_array(memo.host(a)) and all(k != key for _, k, _ in self.tracked):
                self.tracked.append((span, key, "an array written earlier in fn"))
        return snap

    def note_write(self, a, span, key, copied: bool) -> None:
        """Note that a record writes ``a``. Its final value must be kept (and put back after
        the reverse pass) when the reverse pass can leave it otherwise: when a snapshot of
        it is restored, or when another record also writes it (or memory overlapping it).
        An array written by one record only, never read before, ends the reverse pass as
        it was: the adjoint's forward sweep rewrites the same values."""
        entry = self.written.get(key)
        if entry is None:
            entry = self.written[key] = [a, span, copied]
        else:
            entry[2] = True
        entry[2] = entry[2] or copied
        for k, other in self.written.items():
            if k != key and _overlap(span, other[1]):
                other[2] = entry[2] = True

    def launch(self, inst, args, ndrange, workgroupsize, stream):
        RECORDERS.pop()               # launches made here run normally
        try:
            kernel, memo = inst.kernel, _Memo()
            read, written = _accesses(inst, args, ndrange, workgroupsize, memo.host)
            pa = [(n, a) for (n, kind), a in zip(kernel.params, args) if kind != "constexpr"]
            _check_disjoint([(f"argument '{n}'", a, n in written) for n, a in pa if _is_array(a)],
                            f"tk.autodiff: kernel '{kernel.name}'", LaunchError, memo)
            self.check_views([(f"kernel '{kernel.name}' argument '{n}'", a) for n, a in pa if _is_array(a)], memo)
            self.check_scalars(kernel.name, pa)
            if self.mode is Forward:
                return self.tangent_launch(inst, args, ndrange, workgroupsize, written, stream, memo)
            b = inst.backend
            _settle(b, stream)            # the snapshots read what the launch would read
            snap = self.before_write([a for n, a in pa if n in read and _is_array(a)],
                                     [a for n, a in pa if n in written and _is_array(a)], memo)
            self.keep.extend(args)
            self.records.append(_Record(inst, args, ndrange, workgroupsize, snap))
            ev = inst(*args, ndrange=ndrange, workgroupsize=workgroupsize, stream=stream)
            b.synchronize()
            return ev
        finally:
            RECORDERS.append(self)

    def copyto(self, dst, src, stream):
        """``tk.copyto(dst, src)`` inside fn: done now, and recorded (its adjoint moves the
        gradient of ``dst`` onto ``src``)."""
        RECORDERS.pop()
        try:
            if _is_array(src):
                _check_disjoint([("dst", dst, True), ("src", src, False)], "tk.copyto inside tk.autodiff")
            self.check_views([(f"tk.copyto {n}", a) for n, a in (("dst", dst), ("src", src)) if _is_array(a)])
            if self.mode is Forward:
                ev = copyto(dst, src, stream)
                ev.wait()
                if _is_float_array(_host(dst)):
                    t = np.broadcast_to(_host_copy(self.shadow(src, _backend_of(src))), tuple(dst.shape)) \
                        if _is_float_array(_host(src)) else np.zeros(dst.shape)
                    _put(self.shadow(dst, _backend_of(dst)), t.astype(np.dtype(dst.dtype)))
                return ev
            _settle(_backend_of(dst), stream)
            snap = self.before_write([src] if _is_array(src) else [], [dst])
            self.keep += [dst, src]
            self.records.append(_Record(None, (dst, src), None, None, snap))
            ev = copyto(dst, src, stream)
            ev.wait()
            return ev
        finally:
            RECORDERS.append(self)

    def shadow(self, a, backend, memo: _Memo | None = None):
        key = memo.key(a) if memo is not None else _mem_key(a)
        s = self.shadows.get(key)
        if s is None:
            s = self.shadows[key] = _zeros_like(_host(a) if not isinstance(a, Array) else a, backend)
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

    def carries_tangent(self, name: str, a, written: set, memo: _Memo) -> bool:
        """Whether a float argument has a tangent: a Duplicated array or scalar, an array an
        earlier tangent launch gave one (a temporary), or an array this launch writes. Others
        are constants: the tangent kernel leaves their terms out instead of multiplying a
        zero tangent by a partial that may be infinite or NaN (``x ** c`` at a negative ``x``)."""
        if _is_float_scalar(a):
            return id(a) in self.tangents
        return name in written or memo.key(a) in self.shadows

    def tangent_launch(self, inst, args, ndrange, wg, written: set, stream, memo: _Memo):
        """The tangent kernel in place of the launch, on the launch's stream: ordered after
        what that stream waits on (an event of another stream that fills a primal or a
        shadow; before audit17a it ran on no stream and raced with that work)."""
        kernel, b = inst.kernel, inst.backend
        names = set(_diff_names(kernel, args, memo.host))
        diff = tuple(n for (n, _), a in zip(kernel.params, args) if n in names and self.carries_tangent(n, a, written, memo))
        full = []
        for (name, _), a in zip(kernel.params, args):
            full.append(a)
            if name in diff:
                if _is_float_scalar(a):
                    full.append(type(a)(self.tangents.get(id(a), 0.0)))
                else:
                    full.append(self.shadow(a, b, memo))
                    if name in written:
                        _check_writable_shadow(full[-1], f"tk.autodiff: the tangent of argument '{name}' of "
                                               f"kernel '{kernel.name}'", LaunchError,
                                               "forward mode writes the tangent of what a kernel writes")
        ev = derived(kernel, "tangent", diff)(b, inst.static_wg)(*full, ndrange=ndrange, workgroupsize=wg,
                                                                 stream=stream)
        b.synchronize()
        return ev

    # --- after fn ------------------------------------------------------------------------

    def reverse(self) -> tuple:
        final = [(a, _copy(a)) for a, _, keep in self.written.values() if keep]
        try:
            for r in reversed(self.records):
                self.replay_adjoint(r)
        finally:
            for a, saved in final:
                _put(a, saved)
        grads = []
        for value, bufs in self.actives:
            grads.append(float(sum(_host_copy(buf)[0] for buf in bufs.values())))
        return tuple(grads)

    def replay_adjoint(self, r: _Record) -> None:
        def restore():
            for a, saved in r.snap:
                _put(a, saved)
        restore()
        if r.inst is None:
            self.replay_copy(*r.args)
            return
        inst = r.inst
        kernel, b = inst.kernel, inst.backend
        diff = _diff_names(kernel, r.args)
        shadows, seen, extra = {}, set(), []
        for (name, _), a in zip(kernel.params, r.args):
            if name in diff:
                s = self.scalar_shadow(a, b) if _is_float_scalar(a) else self.shadow(a, b)
                key = id(s)
                if key in seen:
                    # the same array (or Active scalar) as an earlier argument of this launch
                    # (only read-only arguments may share memory): a zero shadow of its own, added
                    # in after the launch. The adjoint kernel's shadows must not alias, as
                    # tk.adjoint's own check demands: it adds to a read-only argument's shadow
                    # plainly where items own their elements (A[i + 1] in one argument, B[i] in
                    # the other: items i and i + 1 both add to element i + 1, a lost update
                    # where they run at once), and its partial sums add scalars one by one.
                    # (float32 for a narrow float array: the adjoint accumulates in float32)
                    extra.append((s, _zeros_like(s, b, np.float32 if _is_narrow_float(s) else None)))
                    s = extra[-1][1]
                seen.add(id(s))
                shadows[name] = s
        _launcher_of(inst).launch(list(r.args), shadows, r.ndrange, r.wg, restore)
        for dst, own in extra:
            h = _host_copy(dst)
            h[...] = (h.astype(np.float64) + _host_copy(own)).astype(h.dtype)     # rounded once
            _put(dst, h)
        restore()                     # the adjoint's forward sweep rewrote what the launch wrote

    def replay_copy(self, dst, src) -> None:
        """Adjoint of ``dst[...] = src``: ``g = ddst; ddst = 0; dsrc += g``."""
        if not _is_float_array(_host(dst)):
            return
        dd = self.shadow(dst, _backend_of(dst))
        g = _host_copy(dd)
        _put(dd, np.zeros_like(g))
        if _is_array(src) and _is_float_array(_host(src)):
            ds = self.shadow(src, _backend_of(src))
            h = _host_copy(ds)
            # summed in float64 and rounded once to the shadow's dtype: NumPy sums a bfloat16
            # array in bfloat16, so a row broadcast over 3000 rows got the gradient 256, not
            # about 1500 (until adx22), and float16 was off by several ulps
            h[...] = (h.astype(np.float64) + _sum_to(g, h.shape)).astype(h.dtype)
            _put(ds, h)


def _sum_to(g: np.ndarray, shape: tuple) -> np.ndarray:
    """``g`` summed over the axes along which a ``shape`` array was broadcast to ``g``'s
    shape (the adjoint of NumPy broadcasting), in float64."""
    g = g.astype(np.float64)
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _backend_of(a):
    """The backend an array lives on (host arrays: the CPU)."""
    from .array import get_backend
    return get_backend(a)


@api_boundary
def autodiff(mode, fn, *args):
    """Differentiate ``fn(*primals)`` (see the module docstring). Reverse mode returns the
    gradients of the ``tk.Active`` arguments, in order; forward mode returns None.

    Raises ValueError for a shadow that does not match its array (dtype, shape, device),
    for Duplicated arrays or shadows that share memory, and (reverse mode) for a
    Duplicated float scalar (use tk.Active), and (forward mode) for a tk.Active scalar
    (its tangent is a tk.Duplicated(s, ds))."""
    if mode not in (Reverse, Forward):
        raise TypeError("the first argument of tk.autodiff must be tk.Reverse or tk.Forward")
    if not callable(fn):
        raise TypeError(f"tk.autodiff: fn must be callable (the function whose kernel launches are "
                        f"differentiated), got {type(fn).__name__}")
    if RECORDERS:
        raise NotImplementedError("tk.autodiff inside tk.autodiff (a derivative of a derivative) is not "
                                  "supported: the adjoint kernels have no adjoints of their own")
    primals, named, memo = [], [], _Memo()
    for k, a in enumerate(args):
        if isinstance(a, Duplicated):
            primals.append(a.primal)
            _check_shadow(a.primal, a.shadow, f"tk.autodiff: argument {k} (tk.Duplicated)", disjoint=False,
                          memo=memo)
            if mode is Reverse and not _is_array(a.primal):
                raise ValueError(f"tk.autodiff: argument {k}: in reverse mode tk.Duplicated takes an array "
                                 "and its shadow; a float scalar's gradient is asked for with tk.Active(s)")
            if mode is Reverse:
                _check_writable_shadow(a.shadow, f"tk.autodiff: argument {k} (tk.Duplicated): the shadow")
            if _is_array(a.primal):
                named += [(f"argument {k} (the array of a tk.Duplicated)", a.primal, True),
                          (f"argument {k} (the shadow of a tk.Duplicated)", a.shadow, True)]
        elif isinstance(a, (Active, lang.Const)):
            if isinstance(a, Active) and not _is_float_scalar(a.value):
                raise ValueError(f"tk.autodiff: argument {k}: tk.Active takes a float scalar, "
                                 f"got {type(a.value).__name__}")
            if isinstance(a, Active) and mode is Forward:
                raise ValueError(f"tk.autodiff: argument {k}: tk.Active asks for a gradient, which forward "
                                 "mode does not return; give the scalar's tangent with tk.Duplicated(s, ds), "
                                 "or pass tk.Const(s)")
            primals.append(a.value)
        else:
            primals.append(a)
    _check_disjoint(named, "tk.autodiff", memo=memo)
    rec = _Recorder(mode, args, memo)
    RECORDERS.append(rec)
    try:
        fn(*primals)
    finally:
        RECORDERS.remove(rec)
    if mode is Forward:
        return None
    return rec.reverse()


# ----------------------------------------------------------------------------- gradcheck

_GRADCHECK_DEFAULTS = {   # float size in bytes -> (eps, rtol, atol)
    8: (1e-6, 1e-4, 1e-6),
    4: (1e-3, 1e-2, 1e-3),
    2: (3e-2, 1e-1, 1e-2),
    1: (1e-1, 3e-1, 5e-2),
}


def gradcheck_defaults(args) -> tuple:
    """``(eps, rtol, atol)`` suiting the least precise float dtype among the Duplicated
    arrays and Active scalars of ``args``: float64 steps 1e-6 and compares to 1e-4, float32
    steps 1e-3 and compares to 1e-2 (a smaller step drowns in float32 rounding)."""
    sizes = [8]
    for a in args:
        if isinstance(a, Duplicated) and _is_array(a.primal) and _is_float_dtype(a.primal.dtype):
            sizes.append(np.dtype(a.primal.dtype).itemsize)
        elif isinstance(a, Active) and isinstance(a.value, np.generic):
            sizes.append(np.dtype(type(a.value)).itemsize)
    return _GRADCHECK_DEFAULTS[min(sizes)]


def _check_gradcheck_args(dups, acts, x0, s0) -> None:
    """A ``ValueError`` when the check would pass whatever the gradients are: no
    differentiable input (no float ``tk.Duplicated`` array, no ``tk.Active`` scalar), or no
    seed (every Duplicated shadow zero on entry, so the loss is identically 0)."""
    if not acts and not any(_is_float_dtype(x.dtype) for x in x0):
        raise ValueError("tk.gradcheck: nothing to check: no argument is a float tk.Duplicated array or a "
                         "tk.Active scalar (plain and tk.Const arguments are not differentiated)")
    if not any(_is_float_dtype(s.dtype) and np.any(s != 0) for s in s0):
        raise ValueError("tk.gradcheck: nothing to check: every tk.Duplicated shadow is zero on entry, so the "
                         "loss sum(shadow * output) is 0 whatever the gradients; seed the outputs' shadows "
                         "(e.g. tk.Duplicated(y, np.ones_like(y)))")


@api_boundary
def gradcheck(fn, *args, eps: float | None = None, rtol: float | None = None, atol: float | None = None,
              directions: int = 3, seed: int = 0) -> bool:
    """Check ``tk.autodiff(tk.Reverse, fn, *args)`` against central finite differences.

    The loss is ``sum(shadow0 * x_after)`` over every Duplicated array ``x`` whose shadow
    ``shadow0`` is nonzero on entry (the seeds); the inputs are every Duplicated array and
    Active scalar. Reverse mode gives the loss's gradient (the shadows after the call, and
    the returned scalar gradients); it is compared with central differences of the loss
    along ``directions`` random directions (the autodiff side uses the perturbations
    actually applied, after rounding to the arrays' dtypes). ``eps``, ``rtol`` and ``atol``
    left as None are chosen for the least precise float dtype (:func:`gradcheck_defaults`).
    The arguments' values are left as they were. Raises AssertionError with the numbers on
    a mismatch; returns True otherwise.
    """
    d_eps, d_rtol, d_atol = gradcheck_defaults(args)
    eps = d_eps if eps is None else eps
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    rng = np.random.default_rng(seed)
    dups = [a for a in args if isinstance(a, Duplicated)]
    acts = [a for a in args if isinstance(a, Active)]
    x0 = [_host_copy(d.primal) for d in dups]
    s0 = [_host_copy(d.shadow) for d in dups]
    _check_gradcheck_args(dups, acts, x0, s0)

    def primals(ds):
        out, k = [], 0
        for a in args:
            if isinstance(a, Duplicated):
                out.append(a.primal)
            elif isinstance(a, Active):
                out.append(type(a.value)(a.value + ds[k]))
                k += 1
            elif isinstance(a, lang.Const):
                out.append(a.value)
            else:
                out.append(a)
        return out

    def loss(da, ds) -> tuple:
        """(loss, perturbations of the arrays and scalars actually applied)."""
        applied = []
        for d, x, v in zip(dups, x0, da):
            xp = (x + v).astype(x.dtype)
            applied.append(xp.astype(np.float64) - x.astype(np.float64))
            _put(d.primal, xp)
        ps = primals(ds)
        ks = [float(p) - float(a.value) for p, a in zip((p for p, a in zip(ps, args) if isinstance(a, Active)), acts)]
        fn(*ps)
        return sum(float((_host_copy(d.primal).astype(np.float64) * s).sum()) for d, s in zip(dups, s0)), applied, ks

    work = [Duplicated(d.primal, _copy(d.shadow)) for d in dups]
    it = iter(work)
    g_act = autodiff(Reverse, fn, *[next(it) if isinstance(a, Duplicated) else a for a in args])
    g_arr = [_host_copy(w.shadow).astype(np.float64) for w in work]
    try:
        for _ in range(directions):
            va = [rng.standard_normal(x.shape) if _is_float_dtype(x.dtype) else np.zeros(x.shape) for x in x0]
            vs = list(rng.standard_normal(len(acts)))
            plus, pa, ps = loss([eps * v for v in va], [eps * v for v in vs])
            minus, ma, ms = loss([-eps * v for v in va], [-eps * v for v in vs])
            fd = (plus - minus) / (2 * eps)
            ad = (sum(float((g * (p - m)).sum()) for g, p, m in zip(g_arr, pa, ma))
                  + sum(g * (p - m) for g, p, m in zip(g_act, ps, ms))) / (2 * eps)
            if not abs(fd - ad) <= atol + rtol * abs(fd):
                raise AssertionError(f"gradcheck failed: central differences give {fd!r}, autodiff gives {ad!r} "
                                     f"(|difference| {abs(fd - ad):.3g} > tolerance {atol + rtol * abs(fd):.3g})")
    finally:
        for d, x in zip(dups, x0):
            _put(d.primal, x)
    return True
