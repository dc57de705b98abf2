"""``@tk.kernel`` and ``@tk.func``: instantiation, specialization and launch.

A :class:`Kernel` is instantiated for a backend (and optionally a static workgroup size);
the :class:`KernelInstance` compiles one specialization per argument signature and keeps
a per-instance table from signature to entry point, so that a repeated launch is a single
call into the launcher extension.
"""
from __future__ import annotations

import inspect

import numpy as np

from . import globalreads, lang
from .lang import Func
from .runtime.forksafe import ForkSafeLock
from .backends import Backend, backend as make_backend, parse_dev
from .runtime.base import (DEFAULT_WORKGROUP, GROUPED_FEATURES, RECORDERS, KernelInstance,  # noqa: F401
                           _check_debug, _norm_wg, bind_launch_args, expand_wg, launch_checks,
                           parse_ndrange)
from .runtime.cpu import CPU_STACK_ARRAYS, Compiled, CPUKernelInstance, check_cpu_memory  # noqa: F401
from .errors import LaunchError
from .runtime.hostarray import Array
from .runtime.streams import Event
from .tracebacks import api_boundary

# The kernel instances live in the runtime layer (runtime/base.py, runtime/cpu.py, ...); the
# names above are re-exported for the API (tk.KernelInstance) and code that imports them here.


def func(fn) -> Func:
    """Decorator: a device function callable from kernels."""
    _check_function(fn, "@tk.func")
    return Func(fn)


def _check_function(fn, what: str) -> None:
    """A TypeError when ``fn`` is not a Python function ``what`` (``@tk.kernel``, ``@tk.func``)
    can compile: another kernel or func, a class, a number (it was an AttributeError: no
    ``__name__``)."""
    if isinstance(fn, (Kernel, Func)):
        raise TypeError(f"{what} takes a Python function (def ...), got {fn!r}, which is already "
                        f"a {'@tk.kernel' if isinstance(fn, Kernel) else '@tk.func'}; apply one decorator, once")
    if not inspect.isfunction(inspect.unwrap(fn) if callable(fn) else fn):
        raise TypeError(f"{what} takes a Python function (def ...), got {type(fn).__name__}"
                        f"{' ' + repr(fn) if isinstance(fn, (int, float, str)) else ''}")


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


def _check_signature(fn) -> None:
    """A CompileError at the ``def`` for parameters a launch cannot bind (defaults, ``*args``,
    keyword-only, ``**kwargs``): raised when the kernel is defined, not as a misleading
    argument count at its first launch."""
    bad = [p for p in inspect.signature(fn).parameters.values()
           if p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty]
    if bad:
        import linecache
        from .errors import CompileError
        code = getattr(fn, "__code__", None)
        file, line = (code.co_filename, code.co_firstlineno) if code is not None else (None, None)
        while line is not None and linecache.getline(file, line).lstrip().startswith("@"):
            line += 1                   # the def, not its decorators
        raise CompileError("kernels take plain positional parameters only (no defaults, *args or **kwargs): "
                           + ", ".join(str(p) for p in bad), file, line, None,
                           (linecache.getline(file, line) or None) if line else None, kernel=fn.__name__)


class Kernel:
    """A kernel (``@tk.kernel``). Call it with a backend to get a launchable instance."""
    derived = False       # True for kernels made from another one's IR (autodiff): no Python source to run

    def __init__(self, fn, unsafe_indices: bool = False, fastmath: bool = False):
        _check_function(fn, "@tk.kernel")
        self.fn = fn
        self.name = fn.__name__
        self.unsafe_indices = unsafe_indices
        self.fastmath = bool(fastmath)
        _check_signature(fn)
        self.params = _param_kinds(fn)
        self.cmask = sum(1 << i for i, (_, k) in enumerate(self.params) if k == "constexpr")
        self._src = None
        self._array_params = None
        self._instances: dict = {}    # (backend, wg) -> instance; id(backend) -> (backend, instance)
        self._lock = ForkSafeLock()
        self._reads: list = []     # globalreads: (where, key, value) the compiled code folded in
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        # the function's identity, as functools.wraps gives it (help(), logging, Numba's dispatchers)
        self.__name__, self.__qualname__ = fn.__name__, fn.__qualname__
        self.__module__ = fn.__module__

    def source_info(self):
        if self._src is None:
            from .frontend import parse_function      # the compiler is imported on first use
            self._src = parse_function(self.fn)
        return self._src

    def array_params(self) -> frozenset:
        """The parameters the kernel uses as arrays (frontend.source.array_params): a 0-d
        array passed for one of them is an array (``A[()]``), elsewhere its scalar value."""
        if self._array_params is None:
            from .frontend.source import array_params
            self._array_params = array_params(self.source_info())
        return self._array_params

    def lower_ir(self, src, specs, opts):
        """Typed IR for one specialization (derived kernels, e.g. adjoints, transform it)."""
        from .frontend import lower_kernel
        return lower_kernel(src, specs, opts)

    def note_reads(self, reads) -> None:
        """Keep the globals a specialization's lowering read (``globalreads.recording``). One
        read before with another value means the other specializations hold a stale value
        (lowered without a launch, e.g. ``source()``): they are dropped."""
        with self._lock:
            known = {(id(r[3]), r[1]): r[2] for r in self._reads}
            for r in reads:
                old = known.get((id(r[3]), r[1]), globalreads.MISSING)
                if old is globalreads.MISSING:
                    self._reads.append(r)
                elif not globalreads.same(old, r[2]):
                    self._forget_locked()
                    self._reads.extend(reads)
                    return

    def globals_changed(self) -> None:
        """A global or closure variable the compiled code folded in was rebound (the launch
        fast paths check ``globalreads.stale``): drop every compiled specialization on every
        backend, so the next launch compiles with the new values."""
        with self._lock:
            if globalreads.stale(self._reads):
                self._forget_locked()

    def _forget_locked(self) -> None:
        self._reads.clear()
        self._array_params = None
        for key, inst in list(self._instances.items()):
            if type(key) is not int:          # the id(backend) entries hold (backend, instance) of the same instances
                inst._forget()

    def __repr__(self) -> str:
        return f"<tk.kernel {self.name}>"

    @api_boundary
    def __call__(self, backend, workgroupsize=None, *launch_args, **launch_kw) -> "KernelInstance":
        """Instantiate for a backend (or DEV string), optionally with a static workgroup size."""
        if launch_args or launch_kw or not isinstance(backend, (str, Backend)):
            raise TypeError(f"kernel '{self.name}' is instantiated on a backend, then launched: "
                            f"{self.name}(backend)(arguments..., ndrange=...), or {self.name}.launch(arguments..., "
                            f"ndrange=...) to take the backend from the arrays; got {self.name}("
                            f"{type(backend).__name__}{', ...' if launch_args or workgroupsize is not None else ''}"
                            f"{''.join(', ' + k + '=...' for k in launch_kw)})")
        if workgroupsize is None:
            hit = self._instances.get(id(backend))
            if hit is not None:
                return hit[1]
        b = make_backend(backend)
        wg = _norm_wg(workgroupsize, self.name) if workgroupsize is not None else None
        key = (b, wg)
        inst = self._instances.get(key)
        if inst is None:
            with self._lock:
                inst = self._instances.get(key)
                if inst is None:
                    inst = self._instances[key] = _instance_class(b)(self, b, wg)
        if wg is None and b is backend:
            if len(self._instances) >= 512:        # many short-lived backend objects: forget them
                for k in [k for k in self._instances if type(k) is int]:
                    self._instances.pop(k, None)
            self._instances[id(b)] = (b, inst)
        return inst

    def instance(self, backend: Backend) -> "KernelInstance":
        """``self(backend)`` for a backend object (no static workgroup size), found by the
        object's identity in the kernel's one instance table (an ``id(backend)`` entry beside
        the ``(backend, wg)`` one): one dict lookup and no Python frame beyond this one, where
        ``self(backend)`` hashes and compares the backend's ``key()`` tuple (Python frames that
        cost tens of microseconds when a large kernel has just evicted them from the caches:
        docs/llm.md, "Host time per call"). The llm functions' launches call this; the entry
        keeps the backend alive, so its id is not reused while it is there, and clearing
        ``_instances`` clears both kinds of entry."""
        hit = self._instances.get(id(backend))
        return hit[1] if hit is not None else self(backend)

    @api_boundary
    def launch(self, *args, ndrange=None, workgroupsize=None, stream=None, **named) -> Event:
        """Launch on the backend the array arguments live on (arguments by position or name)."""
        from .array import get_backend
        if named or ndrange is None:
            args = bind_launch_args(self.name, self.params, args, named, ndrange)
        b = None
        for a, (name, kind) in zip(args, self.params):
            if kind != "constexpr" and not isinstance(a, (bool, int, float, np.generic)):
                try:
                    b = get_backend(a)
                except LaunchError as e:         # (a list, None, a tensor on no backend)
                    raise LaunchError(f"kernel '{self.name}': argument '{name}': {e}") from None
                break
        if b is None:
            from .backends import default_backend
            b = default_backend()
        return self(b)(*args, ndrange=ndrange, workgroupsize=workgroupsize, stream=stream)

    @api_boundary
    def source(self, backend, *args, ndrange=None, workgroupsize=None, **named) -> str:
        """The complete generated source for these arguments (no device needed; ``"ROCm"``
        renders for gfx90a, ``"ROCm:gfx1100"`` for that architecture)."""
        if named or ndrange is None:
            args = bind_launch_args(self.name, self.params, args, named, ndrange)
        if isinstance(backend, str):
            backend = _source_target(backend)
        b = make_backend(backend)
        args = tuple(_source_stand_in(a, b) for a in args)
        return self(b).source(*args, ndrange=ndrange, workgroupsize=workgroupsize)


def _source_stand_in(a, b: Backend):
    """For ``source()``: a tk.Array on another device than ``b`` (an OpenCL array rendered for
    CUDA) stands in as a host array of its dtype, shape and strides, which are all that shape the
    code; nothing is read or copied. It was a LaunchError naming the renderer's internal target
    class ("the kernel runs on tk.runtime.cuda.CUDATarget(debug=False)")."""
    if isinstance(a, Array) and a._host is None and a.backend != b:
        return np.lib.stride_tricks.as_strided(np.empty(1, a.dtype), a.shape, a.strides, writeable=False) \
            if a.size else np.empty(a.shape, a.dtype)
    return a


def _source_target(dev: str):
    """For ``source()``: the device-free renderer target of a GPU DEV string (CUDA C++, HIP
    C++ and MSL need no device; OpenCL C and WGSL where pyopencl / wgpu or the device is
    missing), else the DEV string itself."""
    kind, rest = parse_dev(dev, source=True)      # a bad DEV string fails as in tk.backend
    if kind == "CUDA":
        from .runtime.cuda import CUDATarget
        return CUDATarget()
    if kind == "ROCm":
        from .runtime.rocm import ROCmTarget       # gfx90a, or "ROCm:gfx1100" for that architecture
        return ROCmTarget(rest) if rest.lower().startswith("gfx") else ROCmTarget()
    if kind == "Metal":
        from .runtime.metal import MetalTarget
        return MetalTarget()
    if kind == "OpenCL" and not rest:              # no pyopencl or no device: render for a generic one
        from .runtime.opencl import OpenCL, OpenCLTarget
        return dev if OpenCL.available()[0] else OpenCLTarget()
    if kind == "WebGPU" and not rest:
        from .runtime.webgpu import WebGPU, WebGPUTarget
        return dev if WebGPU.available()[0] else WebGPUTarget()
    return dev


def kernel(fn=None, *, unsafe_indices: bool = False, fastmath: bool = False):
    """Decorator: ``@tk.kernel``, ``@tk.kernel(unsafe_indices=True)`` (no masking of work items
    past the ndrange), ``@tk.kernel(fastmath=True)`` (float operations of this kernel may be
    reassociated and contracted into FMAs: vectorized reductions, last bits may differ from
    NumPy; integer semantics are unchanged)."""
    from .argcheck import flag_arg         # fastmath="no" was quietly true
    unsafe_indices = flag_arg("tk.kernel", "unsafe_indices", unsafe_indices)
    fastmath = flag_arg("tk.kernel", "fastmath", fastmath)
    if fn is None:
        return lambda f: Kernel(f, unsafe_indices, fastmath)
    return Kernel(fn, unsafe_indices, fastmath)


def _instance_class(b: Backend):
    """The kernel-instance class of a backend (its runtime's; the CPU's by default)."""
    return getattr(b, "instance_class", CPUKernelInstance)
