"""The interpreter backend: ``tk.Interpreter()`` (``DEV=INTERP``) and its check mode
``tk.Interpreter(check=True)`` (``DEV=INTERP:CHECK``).

It runs the user's own Python code, one work item at a time, and is the reference semantics
the compiled backends are compared against (SPEC.md, docs/language.md). Because it is your
code running, ``breakpoint()`` / pdb inside a kernel stop on your lines with the work item's
locals, and tracebacks point at your source.

How a launch runs (see docs/debugging.md for the user's view):

* :mod:`.transform` rewrites the kernel and the ``@tk.func`` functions it calls: barriers
  and group collectives become ``yield`` points (so a work item is a generator), ``tk.uniform``
  takes the group's first item's value, and the operators whose Python meaning differs from the
  kernel language's call :mod:`.ops`.
* :mod:`.context` binds that code to per-launch globals in which ``tk``, ``math``, ``numpy``
  and a few builtins are the interpreter's, tied to the work item being run.
* Groups run one after the other. Without barriers each item runs to completion in local order;
  with barriers the scheduler below steps every item of the group to its next barrier or
  collective (lockstep), checks that they all reached the same one, then lets them continue.
  Items past the ndrange run nothing (unless ``unsafe_indices=True``) and do not take part in
  collectives; an item that ``return``\\ s is done and the others go on synchronizing.
* :mod:`.memory` wraps every array: bounds checks always (``IndexError``), and in check
  mode race and uninitialized-read detection.
"""
from __future__ import annotations

import threading

import numpy as np

from ... import dtypes as D
from ...errors import CompileError, LaunchError
from ..base import RECORDERS, Backend, KernelInstance, bind_launch_args, check_stream
from .errors import (DataRaceError, DivergentBarrierError, KernelCheckError, KernelIndexError,
                     UninitializedReadError, ZeroStepError)
from .context import RETURNED_VALUE, Group, Item, KernelContext, unravel
from .memory import make_array
from .ops import cast, collective, dtype_cast
from .transform import SITES, transform
from ..streams import Event, completed_event
from ...globalreads import stale
from ...tracebacks import USER_ERRORS, prepare

__all__ = ["Interpreter", "InterpreterKernelInstance", "KernelCheckError", "KernelIndexError",
           "UninitializedReadError", "DataRaceError", "DivergentBarrierError", "ZeroStepError", "run_kernel"]


class InterpreterKernelInstance(KernelInstance):
    """A kernel bound to the interpreter: validates arguments like the compiled backends, then
    runs the kernel's Python code (no compilation, no source)."""

    def __init__(self, kernel, backend, wg):
        self.kernel, self.backend, self.static_wg = kernel, backend, wg
        self.name = kernel.name
        self._plans: dict = {}
        self._compiled: dict = {}
        self._lock = threading.Lock()
        self._cmask = kernel.cmask
        self._reads = kernel._reads
        self._nthreads = 1

    def __call__(self, *args, ndrange=None, workgroupsize=None, stream=None, **named) -> Event:
        if named or ndrange is None:
            args = bind_launch_args(self.name, self.kernel.params, args, named, ndrange)
        if RECORDERS:                                   # inside tk.autodiff: it records, then launches
            return RECORDERS[-1].launch(self, args, ndrange, workgroupsize, stream)
        try:
            return self._launch(args, ndrange, workgroupsize, stream)
        except USER_ERRORS as e:      # the user sees their launch line (and kernel), not the compiler's frames
            raise prepare(e)

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        if _is_derived(self.kernel):
            return self._launch_derived(args, ndrange, workgroupsize, stream)
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        for a, (name, kind) in zip(norm, self.kernel.params):
            if kind == "const" and not isinstance(a, np.ndarray):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is annotated tk.Const but is not an array")
            if isinstance(a, np.ndarray) and not self.backend.supports(a.dtype):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' has dtype {a.dtype}, which "
                                  f"{self.backend.name} cannot use here (pip install ml_dtypes)")
        self._frontend_check(norm, ndim, wg)
        if total == 0:
            return completed_event()
        kernel, check = self.kernel, self.backend.check

        def job():
            run_kernel(kernel, norm, geom, ndim, wg, check)
        if stream is None:
            job()
            return completed_event()
        check_stream(self.name, stream, self.backend)
        return stream.submit(job)

    def _frontend_check(self, norm, ndim, wg) -> None:
        """Lower the kernel with the compiled backends' frontend, once per argument signature
        and workgroup size, so that what they reject (unsupported Python, unknown names,
        maybe-unassigned locals, ...) raises the same located CompileError here."""
        if self._reads and stale(self._reads):   # a global the check folded in was rebound: check again
            self.kernel.globals_changed()
        specs = self._specs(norm, wg)
        key = (tuple(specs.items()), ndim, wg)
        try:
            if key in self._compiled:
                return
        except TypeError:          # an unhashable constexpr: check every launch
            key = None
        ir = self._lower(norm, wg, ndim=ndim, allow_breakpoint=True)
        _check_barriers(ir)
        _check_local_memory(ir)
        if key is not None:
            with self._lock:
                self._compiled[key] = True

    def _launch_derived(self, args, ndrange, workgroupsize, stream) -> Event:
        """Kernels derived from the IR (tk.autodiff adjoints and tangents) have no Python source
        to run: they run on the CPU backend, bounds-checked, on the same host arrays."""
        from ..cpu import CPU
        ok, why = CPU.available()
        if not ok:
            raise NotImplementedError(f"kernel '{self.name}' exists only as compiler IR (a tk.autodiff "
                                      f"derivative); the interpreter runs it on the CPU backend, which is "
                                      f"not available here: {why}")
        inst = self.kernel(CPU(threads=1, debug=True), self.static_wg)
        if stream is None:
            return inst(*args, ndrange=ndrange, workgroupsize=workgroupsize)
        check_stream(self.name, stream, self.backend)
        return stream.submit(lambda: inst(*args, ndrange=ndrange, workgroupsize=workgroupsize))

    def source(self, *args, ndrange=None, workgroupsize=None) -> str:
        raise NotImplementedError(
            f"kernel '{self.name}': the interpreter generates no source, it runs your Python function "
            "directly; for generated code use kernel.source('CPU', ...)")


def _check_barriers(ir) -> None:
    """The compiled backends' static check (SPEC section 3): a ``tk.synchronize()``, group
    collective or ``tk.uniform`` under control flow that depends on the work item is a
    CompileError naming its line here too, not only a DivergentBarrierError at run time."""
    from ...passes.uniformity import check_barriers, uniform_vars
    check_barriers(ir, uniform_vars(ir.body, ir.locals))


INTERP_LOCAL_MEMORY = 1 << 20     # bytes of tk.localmem per workgroup: the CPU backend's limit


def _check_local_memory(ir) -> None:
    """The compiled backends refuse a kernel whose ``tk.localmem`` arrays exceed the device's
    local memory; the interpreter has no device, so it holds kernels to the CPU backend's
    limit (:data:`INTERP_LOCAL_MEMORY`, also PoCL's), a CompileError at the largest one's line,
    so that what runs here runs on the CPU too."""
    from ...passes.access import alloc_bytes
    from ..device import compile_error_at
    need, loc = alloc_bytes(ir, "local")
    if need > INTERP_LOCAL_MEMORY:
        raise compile_error_at(f"the kernel's tk.localmem arrays need {need} bytes per workgroup but the "
                               f"interpreter allows {INTERP_LOCAL_MEMORY}, as the CPU backend does; use a global "
                               "array (an argument) for large scratch space", loc, ir.name, ir.file)


class Interpreter(Backend):
    """Runs kernels as Python, work items of a group in lockstep: the reference semantics.

    ``check=True`` (``DEV=INTERP:CHECK``) also reports data races, reads of uninitialized
    local memory and divergent barriers, naming the kernel, the line and the work items.
    Slow (microseconds per work item): for debugging and testing, not for speed. Every array
    access is bounds-checked whatever ``debug`` says (an ``IndexError`` naming the kernel, the
    line, the index and the shape); ``debug`` is accepted, and reported, as on the other
    backends (``debug=None``: ``TK_DEBUG``)."""
    name = "INTERP"
    dev = "INTERP"
    is_host = True
    supports_float64 = True
    max_workgroupsize = 1024
    instance_class = InterpreterKernelInstance

    def __init__(self, check: bool = False, debug: bool | None = None):
        from ...argcheck import flag_arg
        from ..device import debug_flag
        self.check = flag_arg("tk.Interpreter", "check", check)
        self.debug = debug_flag(debug, self)

    def key(self) -> tuple:
        return ("INTERP", self.check)

    def __repr__(self) -> str:
        return "tk.Interpreter(check=True)" if self.check else "tk.Interpreter()"

    def supports(self, dtype) -> bool:
        d = D.queried(dtype)
        if d is None:
            return False
        if d.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            return D._mld is not None
        return True

    @staticmethod
    def available() -> tuple:
        return True, "Python interpreter (reference semantics, pdb-debuggable; INTERP:CHECK finds races)"


# ----------------------------------------------------------------------------- running a launch

def run_kernel(kernel, norm, geom, ndim, wg, check: bool) -> None:
    """Run one launch of ``kernel`` on validated arguments (``KernelInstance._prepare``)."""
    ctx = KernelContext(kernel.name, geom, ndim, wg, kernel.unsafe_indices, check)
    tr = transform(kernel.fn, kernel=True)
    ctx.kcode = tr.code
    args = [make_array(a, name, ctx, const=(kind == "const")) if isinstance(a, np.ndarray) else
            _constexpr(a) if kind == "constexpr" else _scalar(a)
            for a, (name, kind) in zip(norm, kernel.params)]
    _check_const_aliasing(kernel, norm)      # every launch, as on the compiled backends
    fn = ctx.instantiate(tr)
    try:
        with np.errstate(all="ignore"):
            if tr.is_gen:
                _run_lockstep(ctx, fn, args)
            elif ndim == 1:
                _run_flat_1d(ctx, fn, args)
            else:
                _run_flat(ctx, fn, args)
    except (KernelCheckError, CompileError) as e:
        _trim_traceback(e)
        raise
    finally:
        if ctx.debuggers:
            ctx.end_debugging()


def _trim_traceback(e: BaseException) -> None:
    """End the traceback of an error the interpreter found at the user's line that caused it
    (drop the interpreter's own frames below it)."""
    last_user = None
    tb = e.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        if not name.startswith("tinykernels.runtime.interp"):
            last_user = tb
        tb = tb.tb_next
    if last_user is not None and last_user.tb_frame.f_code.co_filename != __file__:
        last_user.tb_next = None


def _is_derived(kernel) -> bool:
    """Whether a kernel is made from another one's IR (not from its own Python function)."""
    return bool(getattr(kernel, "derived", False))


def _scalar(a):
    """A scalar argument as kernels compute with it: float16 / bfloat16 / fp8 NumPy scalars
    become :class:`.ops.Narrow` values (float32 arithmetic, rounded on store), like
    loads from arrays of those types."""
    if isinstance(a, np.generic) and not isinstance(a, (np.bool_, np.integer, np.float32, np.float64)):
        try:
            dc = dtype_cast(type(a))
        except TypeError:
            return a
        if dc.storage:
            return cast(a, dc)
    return a


def _constexpr(a):
    """A dtype passed as a constexpr becomes the kernel's dtype (whose call casts like C)."""
    if isinstance(a, (type, np.dtype)) and D.from_any(a) is not None and a not in (bool, int, float):
        try:
            return dtype_cast(a)
        except TypeError:
            return a
    return a


def _run_flat_1d(ctx: KernelContext, fn, args) -> None:
    it = Item()
    ctx.cur = it
    n, w = ctx.counts[0], ctx.wg[0]
    s0, st0 = ctx.starts[0], ctx.steps[0]
    lc = ctx.lcoords
    unsafe = ctx.unsafe
    for g in range(ctx.total_groups):
        grp = ctx.group = Group(g, (g,))
        gr = grp.gr
        base = g * w
        for ll in range(w if unsafe else min(w, n - base)):
            p = base + ll
            it.gl, it.gpos, it.l, it.ll, it.gr, it.grl, it.uid = p, (s0 + p * st0,), lc[ll], ll, gr, g, p
            it.priv = it.ucount = None
            fn(*args)


def _run_flat(ctx: KernelContext, fn, args) -> None:
    it = Item()
    ctx.cur = it
    for g in range(ctx.total_groups):
        grp = ctx.group = Group(g, unravel(g, ctx.ngroups_t))
        for ll in range(ctx.wgsize):
            if ctx.set_item(it, grp, ll):
                fn(*args)


def _run_lockstep(ctx: KernelContext, fn, args) -> None:
    for g in range(ctx.total_groups):
        grp = ctx.group = Group(g, unravel(g, ctx.ngroups_t))
        items = []
        for ll in range(ctx.wgsize):
            it = Item()
            if ctx.set_item(it, grp, ll):
                items.append(it)
        for it in items:
            ctx.cur = it
            it.gen = fn(*args)
        alive = items
        while alive:
            arrived, fell_off = [], []
            for it in alive:
                ctx.cur = it
                try:
                    req = it.gen.send(it.send)
                except StopIteration as e:
                    if e.value is not RETURNED_VALUE:
                        fell_off.append(it)
                    continue
                arrived.append((it, req))
            if not arrived:
                break
            _synchronize(ctx, grp, arrived, fell_off)
            alive = [it for it, _ in arrived]


def _where_key(it: Item, req) -> tuple:
    """Which barrier / collective an item stopped at: its site and, inside @tk.func calls,
    the call sites leading there."""
    site = req if type(req) is str else req[1]
    path = []
    g = it.gen
    sub = g.gi_yieldfrom
    while sub is not None:
        path.append(g.gi_frame.f_lasti)
        g, sub = sub, getattr(sub, "gi_yieldfrom", None)
    return site, tuple(path)


def _site_text(site: int) -> str:
    file, line, text = SITES.get(site, ("?", 0, "?"))
    return f"{text} at {file}:{line}"


def _synchronize(ctx: KernelContext, grp: Group, arrived: list, fell_off: list) -> None:
    keys = [_where_key(it, req) for it, req in arrived]
    if fell_off or any(k != keys[0] for k in keys):
        by_key: dict = {}
        for (it, _), k in zip(arrived, keys):
            by_key.setdefault(k, []).append(it.uid)
        parts = [f"{ctx.describe_items(uids)} {'is' if len(uids) == 1 else 'are'} at {_site_text(k[0])}"
                 for k, uids in by_key.items()]
        if fell_off:
            uids = [it.uid for it in fell_off]
            parts.append(f"{ctx.describe_items(uids)} finished the kernel without reaching "
                         f"{'it' if len(by_key) == 1 else 'them'}")
        file, line, _ = SITES.get(keys[0][0], ("?", 0, ""))
        where = "a different call of the same @tk.func" if len(by_key) > 1 and \
            len({k[0] for k in by_key}) == 1 else ""
        msg = (f"divergent barrier in workgroup {grp.gr if ctx.ndim > 1 else grp.grl}: "
               + "; ".join(parts) + (f" ({where})" if where else "")
               + ". Every work item of a group must reach the same tk.synchronize() / group "
               "collective (an explicit 'return' ends an item; falling off the end does not excuse it)")
        uids = [it.uid for it, _ in arrived] + [it.uid for it in fell_off]
        ctx.raise_error(DivergentBarrierError, msg, items=uids, file=file, line=line)
    first = arrived[0][1]
    grp.epoch += 1                      # a barrier (or collective) orders the group's memory accesses
    if type(first) is str:
        for it, _ in arrived:
            it.send = None
        return
    kind, _, _, op, inclusive = first
    results = collective(kind, op, [req[2] for _, req in arrived], inclusive)
    for (it, _), r in zip(arrived, results):
        it.send = r


def _check_const_aliasing(kernel, norm) -> None:
    from ..launchcheck import LaunchChecks, alias_pairs, check_launch
    check_launch(kernel.name, LaunchChecks((), alias_pairs(kernel.params, norm), ()), norm, (), 0)
