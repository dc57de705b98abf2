"""tinykernels kernels inside JAX programs (``tinykernels.jax.jax_kernel``, SPEC section 11).

    import tinykernels.jax as tkjax
    f = tkjax.jax_kernel(saxpy, outputs=["y"])
    y = f(y0, x, a=2.0)               # eagerly, or inside jax.jit / jax.vmap / jax.grad

The forward call goes through XLA's FFI on the CPU: per specialization (dtypes, ranks,
shapes' 32-bit fit, constexprs, ndrange rank) the kernel's C is compiled together with a
generated FFI handler (:mod:`tinykernels.codegen.xla_ffi`) through the kernel disk cache,
and registered with ``jax.ffi.register_ffi_target``; a call is XLA calling that C function,
with no Python. Outputs are XLA's buffers, aliased to the arrays that give their initial
values (``input_output_aliases``).

``jax.grad``: a ``jax.custom_vjp`` whose backward runs tinykernels' adjoint kernel
(:func:`tinykernels.adjoint`) on the CPU through ``jax.pure_callback`` (the adjoint's tape
sizing is orchestrated in Python, so the backward is not an FFI call). ``jax.vmap``: the
batch is run sequentially (one kernel call per batch element), forward and backward.
Scalars are static (keyword Python numbers, baked into the call); they are not
differentiated.
"""
from __future__ import annotations

import ctypes
import hashlib
import threading
from functools import partial

import jax  # the real JAX: this module is tinykernels.jax (absolute imports only)
import jax.numpy as jnp
import numpy as np

from tinykernels import interop
from tinykernels.autodiff import _accesses, _is_float_array, adjoint
from tinykernels.backends import CPU
from tinykernels.errors import LaunchError
from tinykernels.kernel import Kernel, launch_checks
from tinykernels.runtime.launchcheck import check_launch

__all__ = ["jax_kernel", "JaxKernel"]

_TARGETS: dict = {}        # explicit cache: C source hash -> FFI target name (registered once per process)
_TARGETS_LOCK = threading.Lock()
_LIBS: list = []           # the loaded handler libraries (kept alive: XLA holds their function pointers)


def _ffi_module():
    ffi = getattr(jax, "ffi", None)
    if ffi is None or not hasattr(ffi, "ffi_call"):
        raise ImportError(f"tinykernels.jax needs jax >= 0.4.31 (jax.ffi); this is jax {jax.__version__}")
    return ffi


class _Call:
    """The static part of one call (hashable): the binding and the scalar values."""
    __slots__ = ("binding", "floats", "ints", "_h")

    def __init__(self, binding, floats, ints):
        self.binding, self.floats, self.ints = binding, tuple(floats), tuple(ints)
        self._h = hash((binding, self.floats, self.ints))

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, o) -> bool:
        return isinstance(o, _Call) and (self.binding, self.floats, self.ints) == (o.binding, o.floats, o.ints)


class JaxKernel:
    """A kernel as a JAX function; call it like the kernel (SPEC section 11)."""

    def __init__(self, kernel: Kernel, outputs, ndrange=None, workgroupsize=None, backend: CPU | None = None):
        self.kernel = kernel
        self.outputs = interop.check_outputs(kernel, outputs)
        self.ndrange, self.workgroupsize = ndrange, workgroupsize
        if backend is not None and not isinstance(backend, CPU):
            raise LaunchError(f"jax_kernel '{kernel.name}': backend must be a tk.CPU (JAX's CPU platform), "
                              f"got {backend!r}")
        self.backend = backend or CPU()
        self._what = f"jax_kernel '{kernel.name}'"
        self._targets: dict = {}     # (binding, array avals) -> (target name, scalar kinds)
        self._lock = threading.Lock()
        self._fn = jax.custom_vjp(self._primal, nondiff_argnums=(0,))
        self._fn.defvjp(self._fwd, self._bwd)
        self._jitted: dict = {}      # _Call -> jax.jit of it (an eager call then costs one dispatch)

    def __repr__(self) -> str:
        return f"<tinykernels.jax kernel {self.kernel.name}, outputs={list(self.outputs)}>"

    def __call__(self, *arrays, ndrange=None, workgroupsize=None, **scalars):
        """The outputs' new values (one array, or a tuple when there are several)."""
        b, floats, ints = interop.bind(self.kernel, self.outputs, len(arrays), scalars, self._what,
                                       self.ndrange if ndrange is None else ndrange,
                                       self.workgroupsize if workgroupsize is None else workgroupsize)
        arrays = tuple(jnp.asarray(a) for a in arrays)
        for n, a in zip(b.array_names(), arrays):
            if a.ndim == 0:
                raise LaunchError(f"{self._what}: argument '{n}' is 0-d; kernels take arrays of 1 to 8 "
                                  "dimensions (scalars go by keyword)")
        interop.check_shapes(b, [a.shape for a in arrays], self._what)
        call = _Call(b, floats, ints)
        fn = self._jitted.get(call)
        if fn is None:
            fn = self._jitted[call] = jax.jit(partial(self._fn, call))
        outs = fn(*arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # --- forward: XLA FFI --------------------------------------------------------------------

    def _primal(self, call: _Call, *arrays):
        b = call.binding
        nd = b.geometry([a.shape for a in arrays])
        if interop.total_items(nd) == 0:
            return tuple(arrays[k] for k in b.outputs)
        target, geom = self._target(b, arrays, nd)
        ffi = _ffi_module()
        bits = []
        for kind, slot in zip(b.kinds, b.slots):
            if kind == "f":
                bits.append(int(np.float64(call.floats[slot]).view(np.int64)))
            elif kind in "ib":
                bits.append(call.ints[slot] - (1 << 64) if call.ints[slot] >= 1 << 63 else call.ints[slot])
        slots = np.array(list(geom) + bits + [self.backend.threads], dtype=np.int64)
        out_types = [jax.ShapeDtypeStruct(arrays[k].shape, arrays[k].dtype) for k in b.outputs]
        f = ffi.ffi_call(target, out_types, input_output_aliases={k: j for j, k in enumerate(b.outputs)},
                         vmap_method="sequential")
        return tuple(f(*arrays, slots=slots))

    def _target(self, b, arrays, nd) -> tuple:
        """(FFI target name, geometry slots) of this specialization; compiles and registers
        it on first use."""
        key = (b, tuple((a.shape, str(a.dtype)) for a in arrays), nd)
        hit = self._targets.get(key)
        if hit is None:
            with self._lock:
                hit = self._targets.get(key)
                if hit is None:
                    hit = self._targets[key] = self._build(b, arrays, nd)
        return hit

    def _build(self, b, arrays, nd) -> tuple:
        from tinykernels.codegen.c import slot_layout
        from tinykernels.codegen.xla_ffi import ENTRY, render_handler
        from tinykernels.runtime.compiler import compile_library
        ffi = _ffi_module()
        inst = self.kernel(self.backend)
        # NumPy stand-ins with the arrays' shapes and dtypes (pages never touched): the
        # specialization, its launch checks and its write set, exactly as a direct launch
        stand = [np.empty(a.shape, np.dtype(a.dtype)) for a in arrays]
        args = b.kernel_args(stand, [0.0] * len(b.kinds), [0] * len(b.kinds))
        norm, geom, ndim, ranges, total, wg = inst._prepare(args, nd, b.workgroupsize)
        ir = inst._ir(norm, geom, ndim, ranges, wg)
        check_launch(self.kernel.name, launch_checks(self.kernel, ir, norm), norm, geom, ndim)
        written = _accesses(inst, args, nd, b.workgroupsize)[1]
        extra = sorted(n for n in written if n not in self.outputs)
        if extra:
            raise LaunchError(f"{self._what}: the kernel writes {extra}, which "
                              f"{'is' if len(extra) == 1 else 'are'} not among outputs={list(self.outputs)}; "
                              "list every array the kernel writes as an output")
        src, names = inst._render(ir, ranges)
        sources, q = {}, 0
        for name, kind, slot in zip(b.names, b.kinds, b.slots):
            if kind == "A":
                sources[name] = ("ret", b.outputs.index(slot)) if slot in b.outputs else ("arg", slot)
            elif kind != "c":
                sources[name] = ("scalar", q)
                q += 1
        src += render_handler(self.kernel.name, slot_layout(ir), sources, len(arrays), len(b.outputs), q,
                              ir.debug, names, ir.file)
        path = compile_library(src, self.kernel.name, extra_flags=(f"-I{ffi.include_dir()}",))
        digest = hashlib.sha256(src.encode()).hexdigest()[:20]
        with _TARGETS_LOCK:
            target = _TARGETS.get(digest)
            if target is None:
                lib = ctypes.CDLL(str(path))
                _LIBS.append(lib)
                target = f"tinykernels_{self.kernel.name}_{digest}"
                ffi.register_ffi_target(target, ffi.pycapsule(getattr(lib, ENTRY)), platform="cpu")
                _TARGETS[digest] = target
        return target, tuple(int(g) for g in geom)

    # --- reverse mode: the adjoint kernel ------------------------------------------------------

    def _fwd(self, call: _Call, *arrays):
        return self._primal(call, *arrays), arrays

    def _bwd(self, call: _Call, arrays, cts):
        b = call.binding
        floats = [k for k, a in enumerate(arrays) if jnp.issubdtype(a.dtype, jnp.floating)]
        shapes = [jax.ShapeDtypeStruct(arrays[k].shape, arrays[k].dtype) for k in floats]
        cts = [jnp.zeros_like(arrays[k]) if type(c).__name__ == "Zero" else c for k, c in zip(b.outputs, cts)]
        grads = jax.pure_callback(partial(self._host_adjoint, call, floats), shapes, *arrays, *cts,
                                  vmap_method="sequential") if floats else []
        out, it = [], iter(grads)
        for k, a in enumerate(arrays):
            out.append(next(it) if k in floats else np.zeros(a.shape, jax.dtypes.float0))
        return tuple(out)

    def _host_adjoint(self, call: _Call, floats, *host):
        """The gradients of the float arrays: ``host`` holds the primal arrays, then the
        outputs' cotangents (NumPy arrays from ``jax.pure_callback``)."""
        b = call.binding
        n = len(host) - len(b.outputs)
        prim = [np.array(a, copy=True) for a in host[:n]]
        cts = dict(zip(b.outputs, host[n:]))
        shadows = [np.array(cts[k], dtype=a.dtype, copy=True) if k in cts else np.zeros_like(a) for k, a in
                   enumerate(prim)]
        pargs = b.kernel_args(prim, call.floats, call.ints)
        sargs = b.kernel_args(shadows, call.floats, call.ints)
        full = []
        for kind, p, s in zip(b.kinds, pargs, sargs):
            full.append(p)
            if kind == "A" and _is_float_array(p):
                full.append(s)
            elif kind == "f":            # scalars are static: their gradient is dropped
                full.append(np.zeros(1))
        nd = b.geometry([a.shape for a in prim])
        if interop.total_items(nd):
            adjoint(self.kernel)(self.backend)(*full, ndrange=nd, workgroupsize=b.workgroupsize)
        return [shadows[k] for k in floats]


def jax_kernel(kernel: Kernel, outputs, ndrange=None, workgroupsize=None, backend: CPU | None = None) -> JaxKernel:
    """``kernel`` as a JAX function (SPEC section 11), for ``jax.jit``, ``jax.vmap`` and ``jax.grad``.

    ``outputs``: the names of the array parameters the kernel writes. Call the result with
    the kernel's array arguments positionally (the outputs' initial values among them) and
    its scalars and constexprs by keyword (static Python values); ``ndrange`` (default: the
    first output's shape) and ``workgroupsize`` may be given here or per call. It returns
    the outputs' new values (a tuple when there are several). ``backend``: a ``tk.CPU``
    (threads, debug mode); default ``tk.CPU()``."""
    return JaxKernel(kernel, outputs, ndrange, workgroupsize, backend)


# The other route of SPEC section 11: the kernel lowered to JAX operations (tinykernels.jax_raise).
from tinykernels.jax_raise import RaisedKernel, raise_kernel  # noqa: E402

__all__ += ["raise_kernel", "RaisedKernel"]
