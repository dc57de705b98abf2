"""``@tk.kernel`` and ``@tk.func``: instantiation, specialization and launch.

A :class:`Kernel` is instantiated for a backend (and optionally a static workgroup size);
the :class:`KernelInstance` compiles one specialization per argument signature and keeps
a per-instance table from signature to entry point, so that a repeated launch is a single
call into the launcher extension.
"""
from __future__ import annotations

import ctypes
import inspect
import threading
from dataclasses import dataclass

import numpy as np

from . import dtypes as D
from . import lang
from .backends import Backend, backend as make_backend
from .dtypes import Ty
from .errors import CompileError, LaunchError
from .runtime.launchcheck import check_launch, fast_plan
from .runtime.streams import Event, completed_event
from .tracebacks import USER_ERRORS, api_boundary, prepare as _filtered

DEFAULT_WORKGROUP = {1: (256,), 2: (16, 16), 3: (4, 8, 8)}
GROUPED_FEATURES = {"barrier", "localmem", "collective", "uniform"}   # need the group-by-group code shape
RECORDERS: list = []      # active tk.autodiff recordings (innermost last); launches go through them


class Func:
    """A device function (``@tk.func``), inlined into the kernels that call it."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self._src = None
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def source(self):
        if self._src is None:
            from .frontend import parse_function      # the compiler is imported on first use
            self._src = parse_function(self.fn)
        return self._src

    def __call__(self, *args):
        return self.fn(*args)  # plain Python call (used by the interpreter backend)

    def __repr__(self) -> str:
        return f"<tk.func {self.name}>"


def func(fn) -> Func:
    """Decorator: a device function callable from kernels."""
    return Func(fn)


def _param_kinds(fn) -> list:
    """(name, kind) for each parameter: kind in array-or-scalar, const, constexpr."""
    out = []
    for p in inspect.signature(fn).parameters.values():
        ann = p.annotation
        if isinstance(ann, str):
            tail = ann.rsplit(".", 1)[-1]
            ann = {"Const": lang.Const, "constexpr": lang.constexpr}.get(tail, ann)
        kind = "const" if ann is lang.Const else "constexpr" if ann is lang.constexpr else "value"
        out.append((p.name, kind))
    return out


class Kernel:
    """A kernel (``@tk.kernel``). Call it with a backend to get a launchable instance."""

    def __init__(self, fn, unsafe_indices: bool = False, fastmath: bool = False):
        self.fn = fn
        self.name = fn.__name__
        self.unsafe_indices = unsafe_indices
        self.fastmath = bool(fastmath)
        self.params = _param_kinds(fn)
        self.cmask = sum(1 << i for i, (_, k) in enumerate(self.params) if k == "constexpr")
        self._src = None
        self._instances: dict = {}
        self._lock = threading.Lock()
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def source_info(self):
        if self._src is None:
            from .frontend import parse_function      # the compiler is imported on first use
            self._src = parse_function(self.fn)
        return self._src

    def lower_ir(self, src, specs, opts):
        """Typed IR for one specialization (derived kernels, e.g. adjoints, transform it)."""
        from .frontend import lower_kernel
        return lower_kernel(src, specs, opts)

    def __repr__(self) -> str:
        return f"<tk.kernel {self.name}>"

    @api_boundary
    def __call__(self, backend, workgroupsize=None) -> "KernelInstance":
        """Instantiate for a backend (or DEV string), optionally with a static workgroup size."""
        b = make_backend(backend)
        wg = _norm_wg(workgroupsize, self.name) if workgroupsize is not None else None
        key = (b, wg)
        inst = self._instances.get(key)
        if inst is None:
            with self._lock:
                inst = self._instances.get(key)
                if inst is None:
                    inst = self._instances[key] = _instance_class(b)(self, b, wg)
        return inst

    @api_boundary
    def launch(self, *args, ndrange, workgroupsize=None, stream=None) -> Event:
        """Launch on the backend the array arguments live on."""
        from .array import get_backend
        b = None
        for a, (name, kind) in zip(args, self.params):
            if kind != "constexpr" and not isinstance(a, (bool, int, float, np.generic)):
                b = get_backend(a)
                break
        if b is None:
            from .backends import default_backend
            b = default_backend()
        return self(b)(*args, ndrange=ndrange, workgroupsize=workgroupsize, stream=stream)

    @api_boundary
    def source(self, backend, *args, ndrange, workgroupsize=None) -> str:
        """The complete generated source for these arguments (no device needed)."""
        if isinstance(backend, str) and backend.strip().partition(":")[0].upper() in ("CUDA", "GPU", "NV"):
            from .runtime.cuda import CUDATarget     # CUDA C++ needs no GPU, only its debug setting
            backend = CUDATarget()
        return self(make_backend(backend)).source(*args, ndrange=ndrange, workgroupsize=workgroupsize)


def kernel(fn=None, *, unsafe_indices: bool = False, fastmath: bool = False):
    """Decorator: ``@tk.kernel``, ``@tk.kernel(unsafe_indices=True)`` (no masking of work items
    past the ndrange), ``@tk.kernel(fastmath=True)`` (float operations of this kernel may be
    reassociated and contracted into FMAs: vectorized reductions, last bits may differ from
    NumPy; integer semantics are unchanged)."""
    if fn is None:
        return lambda f: Kernel(f, unsafe_indices, fastmath)
    return Kernel(fn, unsafe_indices, fastmath)


def _norm_wg(wg, name) -> int | tuple:
    """A validated workgroup size: an int stays an int (its shape depends on the ndrange's
    rank, see :func:`expand_wg`), a tuple or list becomes a tuple of ints."""
    t = (wg,) if isinstance(wg, (int, np.integer)) else tuple(wg) if isinstance(wg, (tuple, list)) else None
    if t is None or not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                                    and x > 0 for x in t):
        raise LaunchError(f"kernel '{name}': workgroupsize must be a positive int or a tuple of 1 to 3 "
                          f"positive ints, got {wg!r}")
    return int(wg) if isinstance(wg, (int, np.integer)) else tuple(int(x) for x in t)


def expand_wg(wg: int | tuple, ndim: int) -> tuple:
    """The workgroup shape for an ndrange of rank ``ndim``: an int ``n`` is ``n`` items along
    the last (fastest-varying, contiguous) dimension: ``(n,)``, ``(1, n)`` or ``(1, 1, n)``."""
    return (1,) * (ndim - 1) + (wg,) if isinstance(wg, int) else wg


def parse_ndrange(ndrange, name) -> tuple:
    """(geometry 9-tuple, ndim, ranges, total items) from an int, tuple of ints/ranges.

    ``ranges`` is 0 when every dimension starts at 0 with step 1, 1 when some start is
    offset (steps all 1), 2 when some step differs from 1: each is its own specialization,
    so the common cases keep unit-stride, vectorizable inner loops."""
    dims = ndrange if isinstance(ndrange, (tuple, list)) else (ndrange,)
    if not 1 <= len(dims) <= 3:
        raise LaunchError(f"kernel '{name}': ndrange must have 1 to 3 dimensions, got {ndrange!r}")
    geom, ranges, total = [0, 1, 1] * 3, 0, 1
    for d, x in enumerate(dims):
        if isinstance(x, range):
            start, count, step = x.start, len(x), x.step
            ranges = max(ranges, 2 if step != 1 else 1 if start != 0 else 0)
        elif isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            start, count, step = 0, int(x), 1
            if count < 0:
                raise LaunchError(f"kernel '{name}': ndrange dimension {d} is negative ({x})")
        else:
            raise LaunchError(f"kernel '{name}': ndrange dimensions must be ints or ranges, got {x!r}")
        geom[3 * d:3 * d + 3] = [start, count, step]
        total *= count
    return tuple(geom), len(dims), ranges, total


@dataclass
class Compiled:
    """One compiled specialization."""
    fnptr: int
    lib: object
    source: str
    array_names: list
    debug: bool
    file: str = ""
    checks: object = None     # runtime.launchcheck.LaunchChecks


_LIBS: dict = {}          # explicit cache: library path -> loaded library (shared by instances)
_LIBS_LOCK = threading.Lock()


class KernelInstance:
    """A kernel bound to a backend and (optionally) a static workgroup size."""

    def __init__(self, kernel: Kernel, backend: Backend, wg):
        self.kernel, self.backend, self.static_wg = kernel, backend, wg
        self.name = kernel.name
        self._plans: dict = {}        # signature -> entry point (fast path)
        self._compiled: dict = {}     # (signature, workgroup) -> Compiled
        self._lock = threading.Lock()
        from .runtime import launcher
        self._L = launcher.get()
        self._fast = self._L.fast
        self._cmask = kernel.cmask
        self._nthreads = getattr(backend, "threads", 1)

    def __repr__(self) -> str:
        return f"<{self.name} on {self.backend!r}{' wg=' + str(self.static_wg) if self.static_wg else ''}>"

    def __call__(self, *args, ndrange, workgroupsize=None, stream=None) -> Event:
        if RECORDERS:
            return RECORDERS[-1].launch(self, args, ndrange, workgroupsize, stream)
        if stream is None:
            r = self._fast(self._plans, self._cmask, self._nthreads, args, ndrange, workgroupsize)
            if r is True:
                return completed_event()
        try:
            return self._launch(args, ndrange, workgroupsize, stream)
        except USER_ERRORS as e:      # the user sees their launch line, not the compiler's frames
            raise _filtered(e)

    # --- the slow path: validate, normalise, specialise, compile ---------------------------

    def _prepare(self, args, ndrange, workgroupsize, normalize=None):
        """Validated ``(arguments, geometry, ndim, ranges, total items, workgroup)``;
        ``normalize``: how each argument is checked (default: ``self._normalize``)."""
        k = self.kernel
        normalize = normalize or self._normalize
        if len(args) != len(k.params):
            names = ", ".join(n for n, _ in k.params)
            raise LaunchError(f"kernel '{self.name}' takes {len(k.params)} argument(s) ({names}), got {len(args)}")
        geom, ndim, ranges, total = parse_ndrange(ndrange, self.name)
        wg = self._workgroup(ndim, workgroupsize)
        norm = tuple(normalize(a, name, kind) for a, (name, kind) in zip(args, k.params))
        return norm, geom, ndim, ranges, total, wg

    def _workgroup(self, ndim, workgroupsize):
        static = expand_wg(self.static_wg, ndim) if self.static_wg is not None else None
        if workgroupsize is not None and static is not None and \
                expand_wg(_norm_wg(workgroupsize, self.name), ndim) != static:
            raise LaunchError(f"kernel '{self.name}' was instantiated with workgroup size {self.static_wg}; "
                              f"launch got {workgroupsize!r}")
        wg = static or (expand_wg(_norm_wg(workgroupsize, self.name), ndim) if workgroupsize is not None else None)
        if wg is None:
            return DEFAULT_WORKGROUP[ndim]
        if len(wg) != ndim:
            raise LaunchError(f"kernel '{self.name}': workgroupsize {wg} has {len(wg)} dimension(s) but the "
                              f"ndrange has {ndim}")
        size = int(np.prod(wg))
        if size > self.backend.max_workgroupsize:
            raise LaunchError(f"kernel '{self.name}': workgroup of {size} items exceeds {self.backend.name}'s "
                              f"maximum of {self.backend.max_workgroupsize}")
        return wg

    def _normalize(self, a, name, kind):
        if kind == "constexpr":
            if not isinstance(a, (bool, int, float, np.generic, type, np.dtype)):
                raise LaunchError(f"kernel '{self.name}': constexpr argument '{name}' must be a bool, int, float "
                                  f"or dtype, got {type(a).__name__}")
            return a
        if isinstance(a, np.ndarray):
            arr = a
        elif isinstance(a, (bool, int, float)) or (isinstance(a, np.generic) and np.dtype(type(a)).kind in "biuf"):
            if type(a) is int and not -(1 << 63) <= a < (1 << 64):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' = {a} does not fit in 64 bits")
            return a
        else:
            from .array import as_host_ndarray
            try:
                arr = as_host_ndarray(a)
            except Exception as e:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' ({type(a).__name__}) cannot be used "
                                  f"on {self.backend.name}: {e}") from None
            if arr is None:
                raise LaunchError(_unusable_argument(self.name, name, a, self.backend))
        if D.from_any(arr.dtype) is None:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' has unsupported dtype {arr.dtype}")
        if arr.ndim == 0 or arr.ndim > 8:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' must have 1 to 8 dimensions, got {arr.ndim}")
        if not arr.flags.aligned or arr.dtype.byteorder == ">" or any(s % arr.itemsize for s in arr.strides):
            raise LaunchError(f"kernel '{self.name}': argument '{name}' is misaligned or byte-swapped; "
                              "pass np.ascontiguousarray(...) of it")
        return arr

    def _specs(self, args, wg):
        from .frontend import ArraySpec, ConstexprSpec, ScalarSpec
        out = {}
        df = D.float64 if self.backend.supports_float64 else D.float32
        from .array import Array
        for a, (name, kind) in zip(args, self.kernel.params):
            if kind == "constexpr":
                out[name] = ConstexprSpec(a)
            elif isinstance(a, np.ndarray):
                out[name] = ArraySpec(D.from_any(a.dtype), a.ndim, bool(a.flags.c_contiguous), kind == "const")
            elif isinstance(a, Array):   # a device array
                out[name] = ArraySpec(D.from_any(a.dtype), a.ndim, a.is_contiguous, kind == "const")
            elif isinstance(a, np.generic):          # NumPy scalars are strong (np.float64 too)
                out[name] = ScalarSpec(Ty(D.from_any(a.dtype)))
            elif isinstance(a, bool):
                out[name] = ScalarSpec(Ty(D.bool_, True))
            elif isinstance(a, int):   # a Python int: weak; one in [2**63, 2**64) is carried as uint64
                out[name] = ScalarSpec(Ty(D.int64 if a < (1 << 63) else D.uint64, True))
            elif isinstance(a, float):
                out[name] = ScalarSpec(Ty(df, True))
            if kind == "const" and name not in out or (kind == "const" and not isinstance(out[name], ArraySpec)):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is annotated tk.Const but is not an array")
        return out

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, idx32=_fits32(args, geom),
                           default_float=D.float64 if self.backend.supports_float64 else D.float32)

    def _lower(self, args, wg, **options):
        """The kernel's IR for these arguments; ``options``: the backend's LowerOptions fields
        besides the workgroup, ``unsafe_indices``, ``debug`` and the kernel name."""
        from .frontend import LowerOptions
        k = self.kernel
        src = k.source_info()
        opts = LowerOptions(workgroup=wg, unsafe_indices=k.unsafe_indices, fastmath=k.fastmath,
                            debug=self.backend.debug,
                            kernel_name=k.name, **options)
        try:
            return k.lower_ir(src, self._specs(args, wg), opts)
        except CompileError:
            raise
        except RecursionError:
            raise CompileError("the kernel is nested too deeply to compile", src.file, src.first_line,
                               kernel=k.name) from None

    @api_boundary
    def source(self, *args, ndrange, workgroupsize=None) -> str:
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        return self._render(self._ir(norm, geom, ndim, ranges, wg), ranges)[0]

    def _render(self, ir, ranges):
        from .codegen.c import render_c
        from .passes.groups import plan_groups
        from .passes.uniformity import check_barriers, uniform_vars
        u = uniform_vars(ir.body, ir.locals)
        check_barriers(ir, u)
        grouped = bool(ir.uses & GROUPED_FEATURES)
        plan = plan_groups(ir, u) if grouped else None
        check_cpu_memory(ir, plan)
        return render_c(ir, plan, ranges)

    def _compile(self, args, geom, ndim, ranges, wg) -> Compiled:
        from .codegen.c import FASTMATH_CFLAGS
        from .runtime.compiler import compile_library
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names = self._render(ir, ranges)
        path = compile_library(src, self.name, FASTMATH_CFLAGS if ir.fastmath else ())
        with _LIBS_LOCK:
            lib = _LIBS.get(path)
            if lib is None:
                lib = _LIBS[path] = ctypes.CDLL(str(path))
        fnptr = ctypes.cast(lib.tk_kernel, ctypes.c_void_p).value
        return Compiled(fnptr, lib, src, names, ir.debug, ir.file, launch_checks(self.kernel, ir, args))

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return completed_event()
        wgcode = 0 if workgroupsize is None else (int(workgroupsize) if isinstance(workgroupsize, (int, np.integer)) else -1)
        sig = self._L.sig(self._cmask, norm, geom, ndim, wgcode, int(ranges))
        if sig is None:
            raise LaunchError(f"kernel '{self.name}': an argument could not be passed to {self.backend.name}")
        ckey = (sig, wg)
        c = self._compiled.get(ckey)
        if c is None:
            with self._lock:
                c = self._compiled.get(ckey)
                if c is None:
                    c = self._compiled[ckey] = self._compile(norm, geom, ndim, ranges, wg)
        check_launch(self.name, c.checks, norm, geom, ndim)
        if not c.debug and wgcode >= 0 and sig not in self._plans:
            self._plans[sig] = fast_plan(c.fnptr, c.checks)
        run = self._L.run
        nthreads = self._nthreads

        def job():
            run(c.fnptr, nthreads, self._cmask, norm, geom)
            if c.debug:
                _check_debug(c, self.name)
        if stream is None:
            job()
            return completed_event()
        if getattr(stream, "backend", self.backend) != self.backend:
            raise LaunchError(f"kernel '{self.name}': the stream belongs to another backend")
        return stream.submit(job)


CPU_STACK_ARRAYS = 1 << 20   # bytes of tk.localmem / tk.private a CPU workgroup may have (on the stack)


def check_cpu_memory(ir, plan) -> None:
    """tk.localmem and tk.private arrays are stack arrays in the CPU's C (private ones per
    work item of a group when they live across a barrier): a CompileError at the largest
    one's line when they would need more than :data:`CPU_STACK_ARRAYS` bytes."""
    from .passes.access import alloc_bytes
    from .runtime.device import compile_error_at
    items = int(np.prod(ir.workgroup)) if plan is not None else 1
    copies = {name: items for name in (plan.item_private if plan is not None else ())}
    local, lloc = alloc_bytes(ir, "local")
    private, ploc = alloc_bytes(ir, "private", copies)
    if local + private > CPU_STACK_ARRAYS:
        loc = lloc if local >= private else ploc
        raise compile_error_at(f"the kernel's tk.localmem / tk.private arrays need {local + private} bytes per "
                               f"workgroup but the CPU backend allows {CPU_STACK_ARRAYS} (they live on the "
                               "stack); use a global array (an argument) for large scratch space", loc, ir.name)


def launch_checks(kernel: Kernel, ir, norm):
    """The launch checks of one compiled specialization (read-only and aliased arguments,
    certain out-of-bounds accesses; see :mod:`tinykernels.runtime.launchcheck`)."""
    from .passes.access import analyze
    from .runtime.launchcheck import plan_checks
    return plan_checks(kernel.params, analyze(ir), norm, ir.file, ir.debug)


def _check_debug(c: Compiled, name: str) -> None:
    buf = (ctypes.c_int64 * 12)()
    c.lib.tk_get_error(buf)
    if buf[0]:
        c.lib.tk_clear_error()
        line, arr, nd = buf[1], buf[2], buf[3]
        idx = tuple(buf[4 + 2 * d] for d in range(nd))
        shape = tuple(buf[5 + 2 * d] for d in range(nd))
        aname = c.array_names[arr] if 0 <= arr < len(c.array_names) else "?"
        aname = aname if not aname.startswith("_") else "local/private array"
        raise IndexError(f"kernel '{name}' at {c.file}:{line}: index {idx if nd > 1 else idx[0]} is out of "
                         f"bounds for array '{aname}' with shape {shape}")


def _fits32(args, geom) -> bool:
    if geom[1] * geom[4] * geom[7] >= 1 << 31:
        return False
    for a in args:
        if isinstance(a, np.ndarray):
            span = sum(abs(s // a.itemsize) * max(n - 1, 0) for s, n in zip(a.strides, a.shape))
            if a.size >= 1 << 31 or span >= 1 << 31:
                return False
    return True


def _unusable_argument(kernel: str, name: str, a, backend: Backend) -> str:
    """The message for an argument this host backend cannot take: where an array of another
    backend lives and how to bring it here, else what types are accepted."""
    from .array import Array
    if isinstance(a, Array):
        return (f"kernel '{kernel}': argument '{name}' is an array on {a.backend!r}, but the kernel runs on "
                f"{backend!r}: run the kernel there ({kernel}({name}.backend)) or copy the array here "
                f"(tk.asarray({name}.numpy(), backend=...), or {name}.numpy() for a NumPy copy)")
    return (f"kernel '{kernel}': argument '{name}' has unsupported type {type(a).__name__} (expected an "
            "array (a tk.Array, a NumPy array, a CPU torch tensor, anything exporting DLPack or "
            "__array_interface__), a bool, int or float)")


def _instance_class(b: Backend):
    return getattr(b, "instance_class", KernelInstance)
