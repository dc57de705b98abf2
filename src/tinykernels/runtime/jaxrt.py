"""The JAX backend: ``tk.JAX()`` (``DEV=JAX``) runs kernels raised into JAX operations.

A kernel specialization is lowered as for every backend, then raised
(:mod:`tinykernels.codegen.jaxraise`) into a function of JAX arrays vectorized over the work
items, compiled once per argument signature, launch geometry and integer and bool scalar values with
``jax.jit`` and run on JAX's default device (or ``tk.JAX(device=n)``: ``jax.devices()[n]``).
Arrays (:class:`JaxArray`) hold a JAX array; a launch replaces the arrays it writes with the
function's results (a functional update), so a ``tk.Array`` keeps its identity across
launches. The same raised function is what :func:`tinykernels.jax.raise_kernel` returns,
for use inside JAX programs.

64-bit types: the raised code runs under ``jax.enable_x64(True)``, so int64/uint64/float64
arrays and values are exact whatever ``jax_enable_x64`` says (docs/jax.md).
"""
from __future__ import annotations

import importlib.util

import numpy as np

from .. import dtypes as D
from ..argcheck import int_arg
from ..globalreads import stale
from ..errors import BackendUnavailable, LaunchError
from ..tracebacks import USER_ERRORS, prepare as filtered
from .base import RECORDERS, Backend, KernelInstance, bind_launch_args, check_stream
from .hostarray import Array, staged
from .device import DeviceArray, c_strides, is_host_array, same_shape
from .launchplan import value_key
from .streams import Event, completed_event


def _jax():
    import jax
    return jax


class JAX(Backend):
    """Kernels raised into JAX operations (any device XLA supports), vectorized over the
    work items. ``device``: an index into ``jax.devices()`` (default: JAX's default device)."""
    name = "JAX"
    dev = "JAX"
    is_host = False
    supports_float64 = True
    max_workgroupsize = 1024

    def __init__(self, device: int | None = None):
        ok, why = self.available()
        if not ok:          # as the other backends: refused when made, not at the first launch
            raise BackendUnavailable(f"the JAX backend needs jax: pip install 'tinykernels[jax]' ({why})")
        self.device = None if device is None else int_arg("tk.JAX", "device", device, 0)
        if self.device is not None:          # a device that does not exist is unavailable, as tk.OpenCL(device=1)
            n = len(_jax().devices())        # and tk.CUDA(1) are (it was a LaunchError at the first allocation)
            if self.device >= n:
                raise BackendUnavailable(f"tk.JAX(device={self.device}): JAX has {n} device(s) "
                                         f"({_jax().default_backend()}); use an index below {n}")

    def key(self) -> tuple:
        return ("JAX", self.device)

    def __repr__(self) -> str:
        return "tk.JAX()" if self.device is None else f"tk.JAX(device={self.device})"

    @staticmethod
    def available() -> tuple[bool, str]:
        if importlib.util.find_spec("jax") is None:
            return False, "jax is not installed: pip install jax"
        return True, "kernels raised into JAX operations (jax.jit on JAX's default device)"

    def supports(self, dtype) -> bool:
        return D.queried(dtype) is not None

    def jax_device(self):
        """The JAX device arrays are placed on (None: JAX's default)."""
        if self.device is None:
            return None
        devs = _jax().devices()
        if not 0 <= self.device < len(devs):
            raise LaunchError(f"tk.JAX(device={self.device}): JAX has {len(devs)} device(s)")
        return devs[self.device]

    def array_from_host(self, h: np.ndarray) -> "JaxArray":
        return JaxArray(self, _put(self, np.ascontiguousarray(h)))

    def copy(self, dst, src, stream=None) -> Event:
        host = None
        if isinstance(dst, JaxArray) and not isinstance(src, JaxArray):
            host = np.asarray(src.numpy() if isinstance(src, Array) else src)
            same_shape(dst, host)
            if stream is not None:       # host memory: read before returning (the caller may change it)
                host = staged(host, host)

        def job():
            if isinstance(dst, JaxArray):
                if isinstance(src, JaxArray):
                    same_shape(dst, src)
                    with _jax().enable_x64(True):
                        dst._data = src._data.astype(dst.dtype)
                else:
                    dst._data = _put(self, host.astype(dst.dtype, copy=False))
            else:
                from .hostarray import as_host_ndarray
                h = as_host_ndarray(dst)
                same_shape(h, src)
                np.copyto(h, src.numpy(), casting="same_kind")
        if stream is None:
            job()
            return completed_event()
        return stream.submit(job)


def _put(backend: JAX, h: np.ndarray):
    jax = _jax()
    with jax.enable_x64(True):
        dev = backend.jax_device()
        return jax.device_put(h, dev) if dev is not None else jax.numpy.asarray(h)


class JaxArray(DeviceArray):
    """A tk.Array holding a JAX array (C-contiguous; launches replace ``_data``)."""
    __slots__ = ("_data",)

    def __init__(self, backend: JAX, data):
        self._host = None
        self._backend = backend
        self._data = data
        self._shape, self._dtype = tuple(data.shape), np.dtype(data.dtype)

    @property
    def jax(self):
        """The current JAX array (immutable: a later launch that writes this tk.Array replaces it)."""
        return self._data

    @property
    def strides(self):
        return c_strides(self._shape, self._dtype)

    @property
    def ptr(self) -> int:
        raise AttributeError("a tk.Array on the JAX backend has no address; use .numpy() or .jax")

    @property
    def is_contiguous(self) -> bool:
        return True

    def numpy(self) -> np.ndarray:
        """A host copy."""
        return np.array(self._data)

    @property
    def __array_interface__(self):
        raise AttributeError("a tk.Array on the JAX backend has no host address; use .numpy()")

    def __dlpack__(self, **kw):
        return self._data.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()


class JaxKernelInstance(KernelInstance):
    """A kernel on the JAX backend: one jitted raised function per argument signature,
    geometry and scalar values."""

    def __init__(self, kernel, backend, wg) -> None:
        super().__init__(kernel, backend, wg)
        self._raised: dict = {}

    def _forget(self) -> None:
        super()._forget()
        self._raised.clear()

    def __call__(self, *args, ndrange=None, workgroupsize=None, stream=None, **named) -> Event:
        if self._reads and stale(self._reads):     # a global the compiled code folded in changed
            self.kernel.globals_changed()
        if named or ndrange is None:
            args = bind_launch_args(self.name, self.kernel.params, args, named, ndrange)
        if RECORDERS:
            return RECORDERS[-1].launch(self, args, ndrange, workgroupsize, stream)
        try:
            return self._launch(args, ndrange, workgroupsize, stream)
        except USER_ERRORS as e:
            raise filtered(e)

    def _normalize(self, a, name, kind):
        if isinstance(a, JaxArray):
            if a.backend != self.backend:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is on {a.backend!r}, "
                                  f"not on {self.backend!r}")
            return a
        if kind != "constexpr" and is_host_array(a):
            raise LaunchError(f"kernel '{self.name}': argument '{name}' is a host array; the JAX backend "
                              "needs its arrays: tk.asarray(x, backend=tk.JAX())")
        return super()._normalize(a, name, kind)

    def raised(self, norm, geom, ndim, ranges, wg):
        """The :class:`~tinykernels.codegen.jaxraise.Raised` kernel of this specialization
        (lowered and checked once per argument signature)."""
        key = (tuple(_sig(a, kind) for a, (_, kind) in zip(norm, self.kernel.params)), ndim, wg)
        r = self._raised.get(key)
        if r is None:
            with self._lock:
                r = self._raised.get(key)
                if r is None:
                    r = self._raised[key] = raise_ir(self._ir(norm, geom, ndim, ranges, wg))
        return r

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        from .launchcheck import check_launch
        from .base import launch_checks
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return completed_event()
        r = self.raised(norm, geom, ndim, ranges, wg)
        if not hasattr(r, "checks"):
            r.checks = launch_checks(self.kernel, r.k, norm)
        check_launch(self.name, r.checks, norm, geom, ndim)
        arrays = [(name, a) for a, (name, kind) in zip(norm, self.kernel.params) if isinstance(a, JaxArray)]
        scalars = tuple((name, type(a).__name__, a) for a, (name, kind) in zip(norm, self.kernel.params)
                        if kind != "constexpr" and not isinstance(a, JaxArray))
        # float scalars are arguments of the jitted function: a constant divisor is folded by XLA
        # into a multiplication by its reciprocal (x / 1e-40 gave 7e40 for 7, NumPy 7.000000000000001e40)
        traced = [(n, np.float64(v) if isinstance(v, float) else v) for n, _, v in scalars if _is_float(v)]
        static = tuple((n, t, value_key(v)) for n, t, v in scalars if not _is_float(v))
        fkey = (tuple((n, a.shape, a.dtype.str) for n, a in arrays), geom, ndim, wg, static,
                tuple((n, np.asarray(v).dtype.str) for n, v in traced))
        fn = r.jitted.get(fkey)
        if fn is None:
            fn = r.jitted[fkey] = _jit(r, [n for n, _ in arrays], [n for n, _ in traced],
                                       dict((n, v) for n, _, v in scalars if not _is_float(v)),
                                       geometry(geom, ndim, wg, self.kernel.unsafe_indices))
        by_name = dict(arrays)

        def job():
            outs = fn(*[a._data for _, a in arrays], *[v for _, v in traced])
            for name, val in outs.items():
                by_name[name]._data = val
        if stream is None:
            job()
            return completed_event()
        check_stream(self.name, stream, self.backend)
        return stream.submit(job)

    def source(self, *args, ndrange, workgroupsize=None) -> str:
        raise NotImplementedError(f"kernel '{self.name}': the JAX backend generates no source (it raises the IR "
                                  "into JAX operations); use jax.jit(...).lower(...).as_text() on "
                                  "tinykernels.jax.raise_kernel for the StableHLO")


JAX.instance_class = JaxKernelInstance


def _sig(a, kind):
    if kind == "constexpr":
        return ("C",) + value_key(a)
    if isinstance(a, (JaxArray, np.ndarray)):
        return ("A", a.dtype.str, a.ndim)
    if isinstance(a, np.generic):
        return ("S", a.dtype.str)
    if isinstance(a, int) and not isinstance(a, bool):
        return ("int", a >= 1 << 63)
    return (type(a).__name__,)


def raise_ir(ir):
    """Check where the kernel's barriers stand and raise its IR (a ``Raised`` with a jit cache)."""
    from ..codegen.jaxraise import Raised
    from ..passes.uniformity import check_barriers, uniform_vars
    u = uniform_vars(ir.body, ir.locals)
    check_barriers(ir, u)
    r = Raised(ir, u)
    r.jitted = {}
    return r


def geometry(geom, ndim, wg, unsafe: bool):
    """The raised code's :class:`~tinykernels.codegen.jaxraise.Geometry` of a launch."""
    from ..codegen.jaxraise import Geometry
    starts = [geom[3 * d] for d in range(ndim)]
    counts = [geom[3 * d + 1] for d in range(ndim)]
    steps = [geom[3 * d + 2] for d in range(ndim)]
    return Geometry(counts, starts, steps, wg, unsafe)


def _is_float(v) -> bool:
    return isinstance(v, (float, np.floating))


def _jit(r, names: list, traced_names: list, scalars: dict, g):
    """``r`` under ``jax.jit`` for one launch's array names, the names of the scalars passed as
    arguments (after the arrays), the other scalars' values and the geometry."""
    jax = _jax()

    def f(*values):
        arrays, traced = values[:len(names)], values[len(names):]
        return r.run(dict(zip(names, arrays)), {**scalars, **dict(zip(traced_names, traced))}, g)
    jf = jax.jit(f)

    def call(*arrays):
        with jax.enable_x64(True):
            return jf(*arrays)
    return call
