"""``tinykernels.jax.raise_kernel``: a kernel raised into JAX operations (SPEC section 11).

    import tinykernels.jax as tkjax
    g = tkjax.raise_kernel(saxpy, outputs=["y"])
    y = g(y0, x, a=2.0)            # eagerly, or under jax.jit / vmap / grad / jvp / sharding

Unlike :func:`tinykernels.jax.jax_kernel` (the compiled C kernel called through XLA's FFI),
the kernel's IR is lowered to JAX operations vectorized over the work items
(:mod:`tinykernels.codegen.jaxraise`): XLA compiles and fuses it for whatever device the
arrays live on, shards it, and JAX differentiates it (``jax.grad``, ``jax.jvp``) and batches
it (``jax.vmap``) like any JAX code. The function is pure: the outputs' new values are
returned. Same calling convention as ``jax_kernel`` (:mod:`tinykernels.interop`): arrays
positionally in the kernel's order, scalars and constexprs by keyword (static values, not
differentiated), ``ndrange=`` (default: the first output's shape; ints or Python ``range``
dimensions, as a direct launch) and ``workgroupsize=``.
"""
from __future__ import annotations

import threading

import jax.numpy as jnp  # the real JAX (absolute import)
import numpy as np

from tinykernels import interop
from tinykernels.errors import LaunchError
from tinykernels.kernel import Kernel, launch_checks
from tinykernels.runtime.base import KernelInstance
from tinykernels.runtime.jaxrt import JAX, geometry
from tinykernels.runtime.launchcheck import check_launch
from tinykernels.tracebacks import api_boundary

__all__ = ["raise_kernel", "RaisedKernel"]


class RaisedKernel:
    """A kernel as a pure JAX function built from JAX operations; call it like the kernel
    (SPEC section 11)."""

    def __init__(self, kernel: Kernel, outputs, ndrange=None, workgroupsize=None):
        self.kernel = kernel
        self.outputs = interop.check_outputs(kernel, outputs)
        self.ndrange, self.workgroupsize = ndrange, workgroupsize
        self._what = f"raise_kernel '{kernel.name}'"
        self._fns: dict = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<tinykernels.jax raised kernel {self.kernel.name}, outputs={list(self.outputs)}>"

    @api_boundary
    def __call__(self, *arrays, ndrange=None, workgroupsize=None, **scalars):
        """The outputs' new values (one array, or a tuple when there are several)."""
        b, floats, ints = interop.bind(self.kernel, self.outputs, len(arrays), scalars, self._what,
                                       self.ndrange if ndrange is None else ndrange,
                                       self.workgroupsize if workgroupsize is None else workgroupsize)
        arrays = tuple(a if hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, np.ndarray)
                       else jnp.asarray(a) for a in arrays)
        for n, a in zip(b.array_names(), arrays):
            if len(a.shape) == 0:
                raise LaunchError(f"{self._what}: argument '{n}' is 0-d; kernels take arrays of 1 to 8 "
                                  "dimensions (scalars go by keyword)")
        interop.check_shapes(b, [a.shape for a in arrays], self._what)
        nd = b.geometry([a.shape for a in arrays])
        if interop.total_items(nd) == 0:
            outs = tuple(arrays[k] for k in b.outputs)
        else:
            outs = self._function(b, floats, ints, arrays, nd)(*arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _function(self, b, floats, ints, arrays, nd):
        key = (b, tuple(floats), tuple(ints), tuple((tuple(a.shape), np.dtype(a.dtype).str) for a in arrays), nd)
        fn = self._fns.get(key)
        if fn is None:
            with self._lock:
                fn = self._fns.get(key)
                if fn is None:
                    fn = self._fns[key] = self._build(b, floats, ints, arrays, nd)
        return fn

    def _build(self, b, floats, ints, arrays, nd):
        inst = self.kernel(JAX())
        # NumPy stand-ins with the arrays' shapes and dtypes (pages never touched): the
        # specialization and its launch checks, exactly as a direct launch
        stand = [np.empty(a.shape, np.dtype(a.dtype)) for a in arrays]
        args = b.kernel_args(stand, floats, ints)
        norm, geom, ndim, ranges, total, wg = inst._prepare(
            args, nd, b.workgroupsize, lambda a, name, kind: KernelInstance._normalize(inst, a, name, kind))
        r = inst.raised(norm, geom, ndim, ranges, wg)
        check_launch(self.kernel.name, launch_checks(self.kernel, r.k, norm), norm, geom, ndim)
        names = b.array_names()
        out_names = [names[k] for k in b.outputs]
        extra = sorted(n for n in r.written if n not in out_names)
        if extra:
            raise LaunchError(f"{self._what}: the kernel writes {extra}, which "
                              f"{'is' if len(extra) == 1 else 'are'} not among outputs={list(self.outputs)}; "
                              "list every array the kernel writes as an output")
        scalars = {name: a for a, (name, kind) in zip(args, self.kernel.params)
                   if kind != "constexpr" and not isinstance(a, np.ndarray)}
        g = geometry(geom, ndim, wg, self.kernel.unsafe_indices)

        def fn(*arrs):
            res = r.run(dict(zip(names, arrs)), scalars, g)
            return tuple(res.get(n, arrs[k]) for n, k in zip(out_names, b.outputs))
        return fn


def raise_kernel(kernel: Kernel, outputs, ndrange=None, workgroupsize=None) -> RaisedKernel:
    """``kernel`` lowered to JAX operations (SPEC section 11): a pure function for ``jax.jit``,
    ``jax.vmap``, ``jax.grad`` / ``jax.jvp`` and ``jax.sharding``, on any device XLA runs on.

    ``outputs``: the names of the array parameters the kernel writes. Call the result with
    the kernel's array arguments positionally (the outputs' initial values among them) and
    its scalars and constexprs by keyword (static values); ``ndrange`` (default: the first
    output's shape; a dimension may be a Python ``range``) and ``workgroupsize`` here or per
    call. Returns the outputs' new values (a tuple when there are several). What cannot be
    raised faithfully (``atomic_cas``, racing stores of different values to one element, ...)
    is a ``tk.CompileError`` naming the line."""
    return RaisedKernel(kernel, outputs, ndrange, workgroupsize)
