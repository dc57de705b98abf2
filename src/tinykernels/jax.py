"""tinykernels kernels inside JAX programs (``tinykernels.jax.jax_kernel``, SPEC section 11).

    import tinykernels.jax as tkjax
    f = tkjax.jax_kernel(saxpy, outputs=["y"])
    y = f(y0, x, a=2.0)               # eagerly, or inside jax.jit / jax.vmap / jax.grad

The forward call goes through XLA's FFI on the CPU: per specialization (dtypes, ranks,
shapes' 32-bit fit, constexprs, ndrange rank) the kernel's C is compiled together with a
generated FFI handler (:mod:`tinykernels.codegen.xla_ffi`) through the kernel disk cache,
and registered with ``jax.ffi.register_ffi_target``; a call is XLA calling that C function,
with no Python. Outputs are XLA's buffers: fresh ones for outputs the kernel fully
overwrites (unless ``inplace=True``), the others aliased to the arrays that give their
initial values (``input_output_aliases``).

``jax.grad``: a ``jax.custom_vjp`` whose backward runs tinykernels' adjoint kernel
(:func:`tinykernels.adjoint`) on the CPU through ``jax.pure_callback`` (the adjoint's tape
sizing is orchestrated in Python, so the backward is not an FFI call). With
``autodiff="jvp"``: a ``jax.custom_jvp`` through the tangent kernel, transposed into the
adjoint kernel for reverse mode. ``jax.vmap``: one launch over the batch folded into the
ndrange for elementwise kernels, else one per batch element (``custom_vmap``); derivatives
run per batch element. Scalars are static (keyword Python numbers, baked into the call);
they are not differentiated.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import threading
from functools import partial

import jax  # the real JAX: this module is tinykernels.jax (absolute imports only)
import jax.custom_batching
import jax.custom_derivatives
import jax.numpy as jnp
import numpy as np

from tinykernels import interop, jax_batching
from tinykernels.globalreads import stale
from tinykernels.autodiff import _accesses, _is_float_array, adjoint
from tinykernels.backends import CPU
from tinykernels.errors import LaunchError
from tinykernels.kernel import Kernel, launch_checks
from tinykernels.runtime.launchcheck import check_launch
from tinykernels.tracebacks import api_boundary

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

    def __init__(self, kernel: Kernel, outputs, ndrange=None, workgroupsize=None, backend: CPU | None = None,
                 autodiff: str = "vjp", inplace: bool = False):
        if autodiff not in ("vjp", "jvp"):
            raise ValueError(f"jax_kernel '{getattr(kernel, 'name', kernel)}': autodiff must be 'vjp' or 'jvp', "
                             f"got {autodiff!r}")
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
        self.autodiff = autodiff
        self.inplace = bool(inplace)
        # the primal as the derivative rules call it: differentiating it again (a second
        # order derivative) is refused by name instead of JAX's error about an FFI call
        self._rule_primal = jax.custom_jvp(self._primal, nondiff_argnums=(0,))
        self._rule_primal.defjvp(self._refuse_second_order)
        if autodiff == "vjp":
            self._fn = jax.custom_vjp(self._primal, nondiff_argnums=(0,))
            self._fn.defvjp(self._fwd, self._bwd)
        else:
            self._fn = jax.custom_jvp(self._primal, nondiff_argnums=(0,))
            self._fn.defjvp(self._jvp, symbolic_zeros=True)
            jax_batching.register()          # jax.vmap of its derivatives (vmap(grad), jacfwd)
        self._jitted: dict = {}      # _Call -> jax.jit of it (an eager call then costs one dispatch)
        self._vmappable: dict = {}   # _Call -> its FFI call as a custom_vmap function
        self._elementwise: dict = {}  # (binding, dtypes, rank) -> whether a vmap batch folds into the ndrange

    def __repr__(self) -> str:
        return f"<tinykernels.jax kernel {self.kernel.name}, outputs={list(self.outputs)}>"

    @api_boundary
    def __call__(self, *arrays, ndrange=None, workgroupsize=None, **scalars):
        """The outputs' new values (one array, or a tuple when there are several)."""
        if self.kernel._reads and stale(self.kernel._reads):     # a folded global was rebound
            self.kernel.globals_changed()
            for table in (self._targets, self._jitted, self._vmappable, self._elementwise):
                table.clear()
        b, floats, ints = interop.bind(self.kernel, self.outputs, len(arrays), scalars, self._what,
                                       self.ndrange if ndrange is None else ndrange,
                                       self.workgroupsize if workgroupsize is None else workgroupsize)
        # JAX arrays (and tracers) as they are: jnp.asarray of one costs about 10 us
        arrays = tuple(a if isinstance(a, jax.Array) else jnp.asarray(a) for a in arrays)
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
        return self._batchable(call)(*arrays)

    def _batchable(self, call: _Call):
        """The FFI call of ``call`` as a ``jax.custom_batching.custom_vmap`` function (cached)."""
        fn = self._vmappable.get(call)
        if fn is None:
            fn = jax.custom_batching.custom_vmap(partial(self._ffi, call))
            fn.def_vmap(partial(self._vmap_rule, call))
            self._vmappable[call] = fn
        return fn

    def _vmap_rule(self, call: _Call, axis_size: int, in_batched, *arrays):
        """``jax.vmap``: one launch over the batch folded into the ndrange's first dimension
        when the kernel is elementwise over arrays shaped like its ndrange (unbatched ones
        broadcast, see :func:`tinykernels.passes.overwrites.is_elementwise`), else one launch
        per batch element (``jax.lax.map``)."""
        b = call.binding
        shapes = [tuple(a.shape[1:]) if bat else tuple(a.shape) for a, bat in zip(arrays, in_batched)]
        nd = b.geometry(shapes)
        if interop.total_items(nd) and self._absorbs(b, shapes, [a.dtype for a in arrays], nd):
            shape = geom_shape(nd)
            flat = (axis_size * shape[0],) + shape[1:]
            args = [(a if bat else jnp.broadcast_to(a, (axis_size,) + shape)).reshape(flat)
                    for a, bat in zip(arrays, in_batched)]
            folded = _Call(dataclasses.replace(b, ndrange=flat), call.floats, call.ints)
            outs = self._batchable(folded)(*args)
            return tuple(o.reshape((axis_size,) + shape) for o in outs), tuple(True for _ in outs)

        def one(xs):
            it = iter(xs)
            return self._batchable(call)(*[next(it) if bat else a for a, bat in zip(arrays, in_batched)])
        outs = jax.lax.map(one, [a for a, bat in zip(arrays, in_batched) if bat])
        return tuple(outs), tuple(True for _ in outs)

    def _absorbs(self, b, shapes, dtypes, nd) -> bool:
        """Whether a batch folds into the ndrange: every array shaped like the ndrange, no
        explicit workgroup size, and the kernel elementwise (per dtypes and rank)."""
        from tinykernels.passes.overwrites import is_elementwise
        shape = geom_shape(nd)
        if b.workgroupsize is not None or any(s != shape for s in shapes):
            return False
        key = (b, tuple(str(d) for d in dtypes), len(shape))
        hit = self._elementwise.get(key)
        if hit is None:
            inst = self.kernel(self.backend)
            stand = [np.empty(s, np.dtype(d)) for s, d in zip(shapes, dtypes)]
            args = b.kernel_args(stand, [0.0] * len(b.kinds), [0] * len(b.kinds))
            norm, geom, ndim, ranges, _total, wg = inst._prepare(args, nd, None)
            hit = self._elementwise[key] = is_elementwise(inst._ir(norm, geom, ndim, ranges, wg))
        return hit

    def _ffi(self, call: _Call, *arrays):
        """The kernel through XLA's FFI (one call of the compiled handler)."""
        b = call.binding
        nd = b.geometry([a.shape for a in arrays])
        if interop.total_items(nd) == 0:
            return tuple(arrays[k] for k in b.outputs)
        target, geom, fresh = self._target(b, arrays, nd)
        ffi = _ffi_module()
        bits = []
        for kind, slot in zip(b.kinds, b.slots):
            if kind == "f":
                bits.append(int(np.float64(call.floats[slot]).view(np.int64)))
            elif kind in "ib":
                bits.append(call.ints[slot] - (1 << 64) if call.ints[slot] >= 1 << 63 else call.ints[slot])
        slots = np.array(list(geom) + bits + [self.backend.threads], dtype=np.int64)
        out_types = [jax.ShapeDtypeStruct(arrays[k].shape, arrays[k].dtype) for k in b.outputs]
        # an output the kernel fully overwrites gets a fresh buffer from XLA (unless inplace);
        # the others are aliased to their initial values (XLA copies them in, unless they are
        # donated or dead intermediates)
        aliases = {k: j for j, k in enumerate(b.outputs) if k not in fresh}
        f = ffi.ffi_call(target, out_types, input_output_aliases=aliases,
                         vmap_method="sequential")
        return tuple(f(*arrays, slots=slots))

    def _target(self, b, arrays, nd) -> tuple:
        """(FFI target name, geometry slots, positions of the outputs whose initial values
        the kernel never observes) of this specialization; compiles and registers it on
        first use."""
        key = (b, tuple((a.shape, str(a.dtype)) for a in arrays), nd)
        hit = self._targets.get(key)
        if hit is None:
            with self._lock:
                hit = self._targets.get(key)
                if hit is None:
                    hit = self._targets[key] = self._build(b, arrays, nd)
        return hit

    def _render_cpu(self, b, arrays, nd) -> tuple:
        """(C source: the kernel and its FFI handler, geometry slots, fresh outputs, the
        kernel's features for ``Toolchain.kernel_flags``: ``runtime.base.kernel_features``)."""
        from tinykernels.codegen.c import slot_layout
        from tinykernels.codegen.xla_ffi import render_handler
        from tinykernels.passes.overwrites import fully_overwritten
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
        overwritten = fully_overwritten(ir)
        arr = b.array_names()
        fresh = frozenset() if self.inplace else \
            frozenset(k for k in b.outputs if arr[k] in overwritten and tuple(arrays[k].shape) == geom_shape(nd))
        src, names = inst._render(ir, ranges)
        sources, q = self._sources(b)
        src += render_handler(self.kernel.name, slot_layout(ir), sources, len(arrays), len(b.outputs), q,
                              ir.debug, names, ir.sites,
                              fresh=[(b.outputs.index(k), np.dtype(arrays[k].dtype).itemsize) for k in sorted(fresh)])
        from tinykernels.runtime.base import kernel_features
        return src, geom, fresh, kernel_features(ir)

    def _build(self, b, arrays, nd) -> tuple:
        from tinykernels.codegen.xla_ffi import ENTRY
        from tinykernels.runtime.compiler import compile_library, toolchain
        ffi = _ffi_module()
        src, geom, fresh, uses = self._render_cpu(b, arrays, nd)
        path = compile_library(src, self.kernel.name,
                               extra_flags=(f"-I{ffi.include_dir()}", *toolchain().kernel_flags(uses)))
        digest = hashlib.sha256(src.encode()).hexdigest()[:20]
        with _TARGETS_LOCK:
            target = _TARGETS.get(digest)
            if target is None:
                lib = ctypes.CDLL(str(path))
                _LIBS.append(lib)
                target = f"tinykernels_{self.kernel.name}_{digest}"
                ffi.register_ffi_target(target, ffi.pycapsule(getattr(lib, ENTRY)), platform="cpu")
                _TARGETS[digest] = target
        return target, tuple(int(g) for g in geom), fresh

    def _sources(self, b) -> tuple:
        """(per parameter name: where its value is in the call frame, number of scalars)."""
        sources, q = {}, 0
        for name, kind, slot in zip(b.names, b.kinds, b.slots):
            if kind == "A":
                sources[name] = ("ret", b.outputs.index(slot)) if slot in b.outputs else ("arg", slot)
            elif kind != "c":
                sources[name] = ("scalar", q)
                q += 1
        return sources, q

    def _render_cuda(self, b, arrays, nd) -> str:
        """The host-C FFI handler that launches this specialization's CUDA kernel on XLA's
        stream (code generation only: it needs no GPU; see codegen/xla_ffi.py)."""
        from tinykernels.codegen.cuda import param_layout
        from tinykernels.codegen.xla_ffi import render_cuda_handler
        from tinykernels.runtime.cuda import CUDATarget, grid_dims
        inst = self.kernel(CUDATarget(debug=False))
        stand = [np.empty(a.shape, np.dtype(a.dtype)) for a in arrays]
        args = b.kernel_args(stand, [0.0] * len(b.kinds), [0] * len(b.kinds))
        norm, geom, ndim, ranges, _total, wg = inst._prepare(args, nd, b.workgroupsize)
        ir = inst._ir(norm, geom, ndim, ranges, wg)
        sources, q = self._sources(b)
        grid, block = grid_dims(geom, ndim, wg)
        return render_cuda_handler(self.kernel.name, param_layout(ir), sources, len(arrays), len(b.outputs), q,
                                   grid, block)

    def source(self, *arrays, platform: str = "cpu", ndrange=None, workgroupsize=None, **scalars) -> str:
        """The C of the FFI handler for this call (arrays or ``jax.ShapeDtypeStruct``s, as the
        call takes them): ``platform="cpu"``: the kernel's C with its handler, as compiled;
        ``"cuda"``: the host-C handler that launches the CUDA kernel on XLA's stream."""
        b, _floats, _ints = interop.bind(self.kernel, self.outputs, len(arrays), scalars, self._what,
                                         self.ndrange if ndrange is None else ndrange,
                                         self.workgroupsize if workgroupsize is None else workgroupsize)
        avals = [a if isinstance(a, jax.ShapeDtypeStruct) else jax.ShapeDtypeStruct(np.shape(a), jnp.asarray(a).dtype)
                 for a in arrays]
        interop.check_shapes(b, [a.shape for a in avals], self._what)
        nd = b.geometry([a.shape for a in avals])
        if platform == "cpu":
            return self._render_cpu(b, avals, nd)[0]
        if platform == "cuda":
            return self._render_cuda(b, avals, nd)
        raise ValueError(f"{self._what}: platform must be 'cpu' or 'cuda', got {platform!r}")

    # --- reverse mode: the adjoint kernel ------------------------------------------------------

    def _fwd(self, call: _Call, *arrays):
        return self._rule_primal(call, *arrays), arrays

    def _refuse_second_order(self, call: _Call, primals, tangents):
        """The JVP of a derivative rule's primal: only reached by a second-order derivative."""
        raise LaunchError(f"{self._what}: differentiating its derivative (jax.grad of jax.grad, jax.hessian, "
                          "jax.jacfwd of jax.jacrev) is not supported: the derivative comes from tinykernels' "
                          f"{'adjoint' if self.autodiff == 'vjp' else 'tangent'} kernel, which has no derivative "
                          "of its own; use jax.test_util.check_grads(..., order=1) and first-order transforms")

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

    # --- forward mode (autodiff="jvp"): the tangent kernel, transposed to the adjoint ---------

    def _jvp(self, call: _Call, primals, tangents):
        """``jax.custom_jvp`` rule: the primal through the FFI; the outputs' tangents through
        tinykernels' tangent kernel, as a ``linear_call`` whose transpose is the adjoint
        kernel (so reverse mode works by JAX's linearize-and-transpose)."""
        b = call.binding
        outs = self._rule_primal(call, *primals)
        # the linear arguments: float arrays whose tangents are not symbolic zeros (a
        # linear_call's linear operands must all be unknown when JAX transposes it)
        floats = [k for k in _float_positions(primals)
                  if not isinstance(tangents[k], jax.custom_derivatives.SymbolicZero)]
        fouts = [j for j, k in enumerate(b.outputs) if jnp.issubdtype(primals[k].dtype, jnp.floating)]
        lin = jax.custom_derivatives.linear_call(
            partial(self._tangent_call, call, floats, fouts), partial(self._transpose_call, call, floats, fouts),
            tuple(primals), tuple(tangents[k] for k in floats)) if floats and fouts else None
        it = iter(lin or ())
        tans = tuple((next(it) if lin is not None else jnp.zeros_like(o)) if j in fouts
                     else np.zeros(o.shape, jax.dtypes.float0) for j, o in enumerate(outs))
        return outs, tans

    def _tangent_call(self, call: _Call, floats, fouts, primals, tin):
        b = call.binding
        shapes = [jax.ShapeDtypeStruct(primals[b.outputs[j]].shape, primals[b.outputs[j]].dtype) for j in fouts]
        return tuple(jax.pure_callback(partial(self._host_tangent, call, floats, fouts), shapes, *primals, *tin,
                                       vmap_method="sequential"))

    def _transpose_call(self, call: _Call, floats, fouts, primals, cts):
        b = call.binding
        cts = [jnp.zeros_like(c) if type(c).__name__ == "Zero" or c is None else c for c in cts]
        full, it = [], iter(cts)
        for j, k in enumerate(b.outputs):
            full.append(next(it) if j in fouts else jnp.zeros(primals[k].shape, primals[k].dtype))
        shapes = [jax.ShapeDtypeStruct(primals[k].shape, primals[k].dtype) for k in floats]
        return tuple(jax.pure_callback(partial(self._host_adjoint, call, floats), shapes, *primals, *full,
                                       vmap_method="sequential"))

    def _host_tangent(self, call: _Call, floats, fouts, *host):
        """The float outputs' tangents: ``host`` holds the primal arrays, then the tangents of
        the float ones (NumPy arrays from ``jax.pure_callback``); tinykernels' forward mode
        (``tk.autodiff(tk.Forward, ...)``) runs the kernel's tangent kernel."""
        from tinykernels.autodiff import Duplicated, Forward, autodiff
        b = call.binding
        n = len(host) - len(floats)
        prim = [np.array(a, copy=True) for a in host[:n]]
        # the outputs and the arguments with tangents are Duplicated; the rest are constants,
        # whose (possibly infinite) partials the tangent kernel leaves out
        tans = {b.outputs[j]: np.zeros_like(prim[b.outputs[j]]) for j in fouts}
        tans.update((k, np.array(t, dtype=prim[k].dtype, copy=True)) for k, t in zip(floats, host[n:]))
        wrapped = [Duplicated(prim[k], tans[k]) if k in tans else prim[k] for k in range(n)]
        args = b.kernel_args(wrapped, call.floats, call.ints)
        nd = b.geometry([a.shape for a in prim])
        if interop.total_items(nd):
            inst = self.kernel(self.backend)
            autodiff(Forward, lambda *a: inst(*a, ndrange=nd, workgroupsize=b.workgroupsize), *args)
        return [tans[b.outputs[j]] for j in fouts]

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


def _float_positions(arrays) -> list:
    return [k for k, a in enumerate(arrays) if jnp.issubdtype(a.dtype, jnp.floating)]


def geom_shape(nd) -> tuple:
    """An ndrange as a shape tuple (a range dimension stays a range, so no array has that
    shape: such a launch neither folds a vmap batch nor gets a fresh output)."""
    return tuple(nd) if isinstance(nd, tuple) else (nd,)


def jax_kernel(kernel: Kernel, outputs, ndrange=None, workgroupsize=None, backend: CPU | None = None,
               autodiff: str = "vjp", inplace: bool = False) -> JaxKernel:
    """``kernel`` as a JAX function (SPEC section 11), for ``jax.jit``, ``jax.vmap`` and ``jax.grad``.

    ``outputs``: the names of the array parameters the kernel writes. Call the result with
    the kernel's array arguments positionally (the outputs' initial values among them) and
    its scalars and constexprs by keyword (static Python values); ``ndrange`` (default: the
    first output's shape; a dimension may be a Python ``range``, as in a direct launch) and
    ``workgroupsize`` may be given here or per call. It returns the outputs' new values (a
    tuple when there are several). ``backend``: a ``tk.CPU`` (threads, debug mode); default
    ``tk.CPU()``.

    ``autodiff``: ``"vjp"`` (default) differentiates in reverse mode through the adjoint
    kernel (``jax.custom_vjp``: ``jax.grad``, also under ``jax.vmap``; JAX refuses
    ``jax.jvp``); ``"jvp"`` in forward mode through the tangent kernel (``jax.custom_jvp``:
    ``jax.jvp`` and ``jax.grad`` by transposing the tangent kernel into the
    adjoint kernel; ``jax.vmap`` of either, ``jax.jacfwd`` and ``jax.jacrev`` through
    :mod:`tinykernels.jax_batching`'s rule for the ``linear_call`` that pairs the two kernels).

    ``inplace``: every output is written into the buffer of its initial value
    (``input_output_aliases``), also one the kernel fully overwrites (which by default gets a
    fresh buffer). Use it when the initial values are donated (``jax.jit(...,
    donate_argnums=...)``): XLA then places the result in the donated buffer, and a fresh
    output would cost a copy into it; without donation XLA copies the initial value first."""
    return JaxKernel(kernel, outputs, ndrange, workgroupsize, backend, autodiff, inplace)


# The other route of SPEC section 11: the kernel lowered to JAX operations (tinykernels.jax_raise).
from tinykernels.jax_raise import RaisedKernel, raise_kernel  # noqa: E402

__all__ += ["raise_kernel", "RaisedKernel"]
