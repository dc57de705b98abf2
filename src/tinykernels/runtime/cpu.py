"""The CPU backend's runtime: the ``tk.CPU`` backend class and its kernel instance.

A launch's first call of an argument signature lowers the kernel, renders C
(``codegen.c``), compiles it with the system compiler (``runtime.compiler``, disk cache) and
stores the entry point in the instance's table; every later launch is one call into the
launcher extension (``runtime.launcher``), which finds the entry point and calls it.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..argcheck import debug_flag, int_arg
from .forksafe import ForkSafeLock
from ..globalreads import MISSING
from ..tracebacks import USER_ERRORS, prepare as _filtered
from ..errors import LaunchError
from .base import (RECORDERS, GROUPED_FEATURES, Backend, KernelInstance, bind_launch_args, check_stream, stream_mismatch,
                   kernel_features, launch_checks, _check_debug)
from .hostarray import Array as HostArray, _is_torch
from .launchcheck import check_launch, fast_plan
from .launcher import note_torch
from .streams import Event, completed_event


class CPU(Backend):
    """Multi-threaded CPU: kernels are compiled to C with the system compiler and OpenMP.

    ``threads``: number of threads a launch uses (default: all cores, or ``TK_NUM_THREADS``).
    ``debug``: bounds-check every array access (also ``TK_DEBUG=1``).
    """
    name = "CPU"
    dev = "CPU"
    is_host = True

    def __init__(self, threads: int | None = None, debug: bool | None = None):
        if threads is None:
            threads = int(os.environ.get("TK_NUM_THREADS", "0")) or (os.cpu_count() or 1)
        self.threads = int_arg("tk.CPU", "threads", threads, 1)
        self.debug = debug_flag(debug, self)

    def key(self) -> tuple:
        return ("CPU", self.threads, self.debug)

    def __repr__(self) -> str:
        return f"tk.CPU(threads={self.threads}{', debug=True' if self.debug else ''})"

    @staticmethod
    def available() -> tuple[bool, str]:
        from .compiler import find_compiler
        cc = find_compiler()
        if cc is None:
            return False, "no C compiler found: install gcc or clang, or set CC"
        return True, f"C compiler {' '.join(cc)}"


@dataclass
class Compiled:
    """One compiled specialization."""
    fnptr: int
    lib: object
    source: str
    array_names: list
    debug: bool
    sites: list = None        # debug mode: the IR's Locs that the error buffer numbers (Kernel.sites)
    checks: object = None     # runtime.launchcheck.LaunchChecks


_LIBS: dict = {}          # explicit cache: library path -> loaded library (shared by instances)
_LIBS_LOCK = ForkSafeLock()


class CPUKernelInstance(KernelInstance):
    """A kernel on the CPU backend: C compiled with the system compiler, one entry point per
    argument signature in a table the launcher extension calls directly."""

    def __init__(self, kernel, backend: Backend, wg):
        super().__init__(kernel, backend, wg)
        self._plans: dict = {}        # signature -> entry point (fast path)
        from . import launcher
        self._L = launcher.get()
        if len(kernel.params) > launcher.C_MAX_ARGS and not isinstance(self._L, launcher.PyLauncher):
            # the C launcher packs at most 64 arguments (_launch.c MAX_ARGS, a 64-bit constexpr
            # mask): a kernel with more launches through the ctypes launcher, on the checked path
            # (it was a LaunchError "an argument could not be passed to CPU")
            self._L = launcher.PyLauncher()
        self._L.register_host_array(HostArray)   # it reads a host tk.Array's NumPy array itself
        self._fast = self._L.fast
        self._nthreads = getattr(backend, "threads", 1)

    def __call__(self, *args, ndrange=None, workgroupsize=None, stream=None, **named) -> Event:
        if self._reads:                     # a global the compiled code folded in was rebound?
            for get, key, value, _ in self._reads:   # (globalreads.stale inlined: no Python frame)
                if get(key, MISSING) is not value:
                    self.kernel.globals_changed()
                    break
        if named or ndrange is None:
            args = bind_launch_args(self.name, self.kernel.params, args, named, ndrange)
        if RECORDERS:
            return RECORDERS[-1].launch(self, args, ndrange, workgroupsize, stream)
        if stream is None:
            # NumPy arrays, host tk.Arrays and CPU torch tensors (of a dtype a checked launch
            # registered) are read by the launcher itself: one call, no Python per argument
            if self._fast(self._plans, self._cmask, self._nthreads, args, ndrange, workgroupsize) is True:
                return completed_event()
        elif stream_mismatch(stream, self.backend) is None:
            # the same lookup and checks now, the slots packed now; the job only calls the kernel
            r = self._L.prepare(self._plans, self._cmask, args, ndrange, workgroupsize)
            if type(r) is tuple:
                return stream.submit(partial(_run_entry, self._L.raw, r[0], self._nthreads, args))
        try:
            return self._launch(args, ndrange, workgroupsize, stream)
        except USER_ERRORS as e:      # the user sees their launch line, not the compiler's frames
            raise _filtered(e)

    def _unpassable(self, norm) -> str:
        """The error for a launch the launcher cannot encode, naming the first argument it refuses."""
        from .launcher import PyLauncher
        for a, (name, kind) in zip(norm, self.kernel.params):
            if PyLauncher._code(a, kind == "constexpr", [True]) is None:
                return (f"kernel '{self.name}': argument '{name}' ({type(a).__name__}) could not be passed to "
                        f"{self.backend.name}")
        return f"kernel '{self.name}': an argument could not be passed to {self.backend.name}"

    def _render(self, ir, ranges):
        from ..codegen.c import render_c
        from ..passes.groups import plan_groups
        from ..passes.uniformity import check_barriers, uniform_vars
        u = uniform_vars(ir.body, ir.locals)
        check_barriers(ir, u)
        # an unsafe_indices kernel runs every item of every group, the items past the ndrange
        # in a partial last group included (SPEC section 3): only the grouped shape has them
        # (the flat shape loops over the ndrange's items; until gradfz22 such kernels without a
        # barrier or local memory ran no padded item on the CPU, while the interpreter and the
        # GPUs ran them, and their tk.autodiff adjoints lost the padded items' contributions)
        grouped = bool(ir.uses & GROUPED_FEATURES) or ir.unsafe_indices
        plan = plan_groups(ir, u) if grouped else None
        check_cpu_memory(ir, plan)
        return render_c(ir, plan, ranges)

    def _compile(self, args, geom, ndim, ranges, wg) -> Compiled:
        from ..codegen.c import FASTMATH_CFLAGS
        from .compiler import compile_library, toolchain
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names = self._render(ir, ranges)
        extra = (FASTMATH_CFLAGS if ir.fastmath else ()) + toolchain().kernel_flags(kernel_features(ir))
        path = compile_library(src, self.name, extra)
        with _LIBS_LOCK:
            lib = _LIBS.get(path)
            if lib is None:
                lib = _LIBS[path] = ctypes.CDLL(str(path))
        fnptr = ctypes.cast(lib.tk_kernel, ctypes.c_void_p).value
        return Compiled(fnptr, lib, src, names, ir.debug, ir.sites, launch_checks(self.kernel, ir, args))

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        for a, n in zip(args, norm):
            if n is not a and _is_torch(a):
                note_torch(self._L, a, n)      # later launches read such tensors in the launcher
        if total == 0:
            return completed_event()
        wgcode = 0 if workgroupsize is None else (int(workgroupsize) if isinstance(workgroupsize, (int, np.integer)) else -1)
        sig = self._L.sig(self._cmask, norm, geom, ndim, wgcode, int(ranges))
        if sig is None:
            raise LaunchError(self._unpassable(norm))
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
        check_stream(self.name, stream, self.backend)
        return stream.submit(job)


CPU.instance_class = CPUKernelInstance


def _run_entry(raw, entry: bytes, nthreads: int, args: tuple) -> None:
    """A stream job of a launch the launcher prepared (``prepare``: key, plan and checks at
    submit time, the slots packed then); ``args`` keeps its arrays alive until it ran."""
    if raw(entry, nthreads, ()) is not True:     # an entry without patches or pairs always runs
        raise LaunchError(f"internal error: a prepared launch was refused ({len(args)} arguments)")


CPU_STACK_ARRAYS = 1 << 20   # bytes of tk.localmem / tk.private a CPU workgroup may have (on the stack)


def check_cpu_memory(ir, plan) -> None:
    """tk.localmem and tk.private arrays are stack arrays in the CPU's C (private ones per
    work item of a group when they live across a barrier): a CompileError at the largest
    one's line when they would need more than :data:`CPU_STACK_ARRAYS` bytes."""
    from ..passes.access import alloc_bytes
    from .device import compile_error_at
    items = int(np.prod(ir.workgroup)) if plan is not None else 1
    copies = {name: items for name in (plan.item_private if plan is not None else ())}
    local, lloc = alloc_bytes(ir, "local")
    private, ploc = alloc_bytes(ir, "private", copies)
    if local + private > CPU_STACK_ARRAYS:
        loc = lloc if local >= private else ploc
        raise compile_error_at(f"the kernel's tk.localmem / tk.private arrays need {local + private} bytes per "
                               f"workgroup but the CPU backend allows {CPU_STACK_ARRAYS} (they live on the "
                               "stack); use a global array (an argument) for large scratch space", loc, ir.name)
