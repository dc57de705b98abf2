"""``tk.Array`` and the array constructors (host memory for now).

A :class:`Array` pairs memory with the backend it lives on. On host backends (``tk.CPU()``,
the interpreter) the memory is a NumPy array, ``self._host``, of any strides: every host
operation is zero-copy NumPy (``a.numpy()`` is that very array, and writes through it are
seen by kernels). A device backend (GPU) will subclass :class:`Array`, set ``_host = None``
and override the storage-specific members (``shape``, ``dtype``, ``strides``, ``ptr``,
``numpy``, ``__dlpack__``, ``__dlpack_device__``); the size helpers, ``__len__`` and
``__repr__`` here only use ``shape``/``dtype``/``numpy()``.

Asynchronous work: kernels and ``copyto(..., stream=s)`` run on stream worker threads, so
an array read or written on the host (``numpy()``, ``__array__``, ``__dlpack__``...) must
first be synchronized with the streams that use it; nothing here waits implicitly.
"""
from __future__ import annotations

import ctypes
import operator
import os

import numpy as np

from . import dtypes as _dt
from .errors import LaunchError
from .runtime.hostarray import (staged, _DL_CUDA, _DL_CUDA_MANAGED, _DL_HOST_TYPES, _NP2, _SCALARS, Array,  # noqa: F401
                                _dl_device, _dl_name, _is_torch, _torch_host_view, as_host_ndarray,
                                check_torch_lazy_view, host_from_dlpack)
from .tracebacks import api_boundary

__all__ = ["Array", "zeros", "ones", "empty", "full", "asarray", "copyto", "from_dlpack",
           "from_blob", "get_backend", "as_host_ndarray"]

float32 = np.float32                     # the default dtype of the constructors

# ------------------------------------------------------------------------------ helpers

_cpu_cache: dict = {}

# The process environment as os.environ keeps it (CPython: a dict of encoded names and values,
# updated by os.environ[...] = ... and monkeypatch.setenv), and the two names _cpu reads,
# encoded once. One dict lookup per name instead of os.environ.get's Python frames (Mapping.get,
# __getitem__, encodekey, decode): every llm call on NumPy arrays reads them, and right after a
# large kernel has swept the caches each such frame costs microseconds of cache misses
# (docs/llm.md, "Host time right after a large kernel"). Other Pythons: os.environ.get.
_ENV_DATA = getattr(os.environ, "_data", None)
try:
    _ENV_KEYS = (os.environ.encodekey("TK_NUM_THREADS"), os.environ.encodekey("TK_DEBUG"))
except AttributeError:
    _ENV_DATA = None


def _cpu_env() -> tuple:
    """The values of ``TK_NUM_THREADS`` and ``TK_DEBUG`` (None when unset), as a cache key."""
    if type(_ENV_DATA) is dict:
        return _ENV_DATA.get(_ENV_KEYS[0]), _ENV_DATA.get(_ENV_KEYS[1])
    return os.environ.get("TK_NUM_THREADS"), os.environ.get("TK_DEBUG")


def _cpu():
    """``tk.CPU()`` with default settings. Cached per value of the environment variables its
    defaults read (constructing one calls os.cpu_count(), several microseconds)."""
    env = _cpu_env()
    b = _cpu_cache.get(env)
    if b is None:
        from .backends import CPU
        b = _cpu_cache[env] = CPU()
    return b


def _resolve_backend(backend, what: str = "backend"):
    """None: the default backend; a DEV string or a backend; anything else a TypeError naming
    the argument ``what``."""
    if backend is None:
        from .backends import default_backend
        return default_backend()
    from .backends import Backend, backend as _make
    if not isinstance(backend, (str, Backend)):
        raise TypeError(f"{what}= must be a backend (tk.CPU(), ...) or a DEV string, got {type(backend).__name__}")
    return _make(backend)


def _require_host(backend, what: str):
    if not getattr(backend, "is_host", False):
        name = getattr(backend, "name", type(backend).__name__)
        raise NotImplementedError(f"{what} on the {name} backend is not implemented yet: "
                                  "only host backends (tk.CPU()) hold arrays in this release")


def _np_dtype(dtype) -> np.dtype:
    """The NumPy dtype of host arrays of ``dtype`` (tk dtype, NumPy dtype/type or name)."""
    if dtype is None:
        return np.dtype(np.float32)
    d = _dt.from_any(dtype)
    if d is None:
        raise TypeError(f"unsupported dtype {dtype!r}: expected one of tk.bool_, tk.int8..int64, "
                        "tk.uint8..uint64, tk.float16, tk.bfloat16, tk.float32, tk.float64, "
                        "tk.float8_e4m3fn, tk.float8_e5m2 (or the matching NumPy dtype)")
    return _dt.to_numpy(d)


def _check_supported(h: np.ndarray, what: str) -> None:
    if _dt.from_any(h.dtype) is None:
        raise TypeError(f"{what}: arrays of dtype {h.dtype} are not supported by tinykernels "
                        "(supported: bool, int8..int64, uint8..uint64, float16, bfloat16, "
                        "float32, float64, float8_e4m3fn, float8_e5m2)")


def _shape(shape) -> tuple[int, ...]:
    try:
        items = (shape,) if isinstance(shape, (int, np.integer, np.bool_)) else tuple(shape)
        if any(isinstance(s, (bool, np.bool_)) for s in items):
            raise TypeError                           # True is no extent (NumPy takes it as 1)
        dims = tuple(operator.index(s) for s in items)
    except TypeError:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in dims):
        raise ValueError(f"negative dimension in shape {dims}")
    return dims


# ------------------------------------------------------------------------------ constructors

def _on(backend, h: np.ndarray) -> Array:
    """``h`` as an Array of ``backend``: wrapped on host backends, uploaded on devices."""
    if getattr(backend, "is_host", False):
        return Array(h, backend)
    upload = getattr(backend, "array_from_host", None)
    if upload is None:
        _require_host(backend, "arrays")
    return upload(h)


def _cuda_backend_of(obj, where: str, error=LaunchError):
    """tk.CUDA(n) for an array on CUDA device n (``error`` when that backend is unavailable)."""
    from .errors import BackendUnavailable
    from .runtime.cuda import backend_of
    try:
        return backend_of(obj)
    except BackendUnavailable as e:
        raise error(f"the {type(obj).__name__} lives on {where}, but the CUDA backend is not available: {e}") \
            from None


_DL_ROCM = 10                  # DLPack's kDLROCM (PyTorch for ROCm, CuPy on AMD...)


def _rocm_backend_of(obj, ordinal: int, where: str, error=LaunchError):
    """tk.ROCm(n) for an array on ROCm device n (``error`` when that backend is unavailable)."""
    from .errors import BackendUnavailable
    from .runtime.rocm import ROCm
    try:
        return ROCm(ordinal)
    except BackendUnavailable as e:
        raise error(f"the {type(obj).__name__} lives on {where}, but the ROCm backend is not available: {e}") \
            from None


def _torch_is_hip() -> bool:
    """Whether the loaded torch is a ROCm build (its "cuda" devices are AMD GPUs)."""
    import sys
    t = sys.modules.get("torch")
    return bool(t is not None and getattr(getattr(t, "version", None), "hip", None))


def _is_device(a) -> bool:
    return isinstance(a, Array) and a._host is None


def _new(fill: str, shape, dtype, backend, value=None) -> Array:
    backend = _resolve_backend(backend)
    dims, dt = _shape(shape), _np_dtype(dtype)
    if fill == "zeros":
        h = np.zeros(dims, dt)
    elif fill == "ones":
        h = np.ones(dims, dt)
    elif fill == "empty":
        h = np.empty(dims, dt)
    else:
        h = np.full(dims, value, dt)
    return _on(backend, h)


def zeros(shape, dtype=float32, backend=None) -> Array:
    """A new array of zeros. ``shape``: int or tuple; ``backend=None``: the default backend."""
    return _new("zeros", shape, dtype, backend)


def ones(shape, dtype=float32, backend=None) -> Array:
    """A new array of ones."""
    return _new("ones", shape, dtype, backend)


def empty(shape, dtype=float32, backend=None) -> Array:
    """A new array with unspecified contents."""
    return _new("empty", shape, dtype, backend)


def full(shape, fill_value, dtype=float32, backend=None) -> Array:
    """A new array with every element set to ``fill_value`` (converted to ``dtype``)."""
    return _new("full", shape, dtype, backend, fill_value)


@api_boundary
def asarray(obj, backend=None, *, dtype=None) -> Array:
    """A ``tk.Array`` of ``obj``: an Array, NumPy array, list, torch tensor, or anything
    exporting ``__array_interface__`` or DLPack.

    Zero-copy whenever ``obj`` already lives in host memory and the target is a host
    backend; dtypes of arrays are kept (lists take NumPy's inferred dtype), in the
    machine's byte order (a byte-swapped array, e.g. ``'>f4'`` on a little-endian host, is
    converted: kernels and devices read native values). An Array already on ``backend``
    (or any Array when ``backend`` is None) is returned as is.

    ``dtype`` (keyword only: the second positional argument is the backend) converts as
    ``np.asarray(obj, dtype)`` does (a copy when the dtype differs, NumPy's casting); ``None``
    keeps the dtype.
    """
    if backend is not None and not isinstance(backend, str) and not hasattr(backend, "is_host") \
            and _dt.from_any(backend) is not None:
        raise TypeError(f"tk.asarray(obj, backend=None, *, dtype=None): the second argument is the backend, "
                        f"got the dtype {backend!r}; pass it as dtype=")
    if dtype is None:
        return _asarray(obj, backend)
    want = _np_dtype(dtype)
    if isinstance(obj, (list, tuple, *_SCALARS)):
        obj = np.asarray(obj, dtype=want)        # NumPy's conversion of the values themselves
    else:                                        # converted on the host, before any upload (an int64
        h = obj.numpy() if isinstance(obj, Array) else as_host_ndarray(obj)   # array to int8 on WebGPU)
        if h is not None and h.dtype != want:
            obj = h.astype(want)
    a = _asarray(obj, backend)
    if a.dtype == want:
        return a
    return _on(a.backend, a.numpy().astype(want))


def _asarray(obj, backend) -> Array:
    if isinstance(obj, Array) and (backend is None or obj.backend == _resolve_backend(backend)):
        return obj
    if _is_torch(obj):
        check_torch_lazy_view(obj, "tk.asarray")
    backend = _resolve_backend(backend)
    if getattr(backend, "dev", None) == "CUDA" and not isinstance(obj, (np.ndarray, list, tuple, *_SCALARS)) \
            and not (isinstance(obj, Array) and obj._host is not None):
        from .runtime.cuda import as_cuda_array
        dev = as_cuda_array(obj, backend)        # already on a CUDA device: zero-copy
        if dev is not None:
            if dev.backend != backend:
                raise ValueError(f"tk.asarray: the {type(obj).__name__} is on CUDA:{dev.backend.device}, "
                                 f"not on {backend!r}")
            return dev
    if getattr(backend, "dev", None) == "ROCM" and not isinstance(obj, (np.ndarray, list, tuple, *_SCALARS)) \
            and not isinstance(obj, Array):
        from .runtime.rocm import as_rocm_array
        dev = as_rocm_array(obj, backend)        # already on a ROCm device: zero-copy
        if dev is not None:
            if dev.backend != backend:
                raise ValueError(f"tk.asarray: the {type(obj).__name__} is on ROCm:{dev.backend.device}, "
                                 f"not on {backend!r}")
            return dev
    if isinstance(obj, Array):
        h = obj.numpy()                          # another backend's array: its host copy
    else:
        h = as_host_ndarray(obj)
        if h is None:
            if _is_torch(obj):                   # a torch tensor on a device: copy it to the host
                if obj.device.type == "meta":
                    raise ValueError("tk.asarray: the tensor is on torch's 'meta' device and has no data")
                h = as_host_ndarray(obj.detach().cpu())
            else:
                dev = _dl_device(obj) if hasattr(obj, "__dlpack__") else None
                if dev is not None and dev[0] not in _DL_HOST_TYPES:
                    raise ValueError(f"tk.asarray: the {type(obj).__name__} lives on DLPack device "
                                     f"{_dl_name(dev)}, not in host memory; move it to the host first")
                if dev is None and hasattr(obj, "__cuda_array_interface__") and \
                        not hasattr(obj, "__array_interface__"):
                    raise ValueError(f"tk.asarray: the {type(obj).__name__} lives in CUDA device memory "
                                     f"(__cuda_array_interface__), not in host memory, and {backend!r} is not "
                                     "a CUDA backend; use backend=tk.CUDA() or move it to the host first")
                h = np.asarray(obj)              # lists, tuples, scalars, __array__ objects
                if isinstance(obj, (list, tuple, int, float)):
                    h = _narrow_inferred(h, backend)
    if not h.dtype.isnative:                     # '>f4' on a little-endian host: native values
        h = h.astype(h.dtype.newbyteorder("="))
    _check_supported(h, "tk.asarray")
    return _on(backend, h)


def _narrow_inferred(h: np.ndarray, backend) -> np.ndarray:
    """A list's or Python number's inferred float64 (int64) as float32 (int32, where every
    value fits) on a backend without 64-bit types (WebGPU, Metal): NumPy chose the width,
    not the caller, as for a kernel's Python float arguments there (SPEC 4)."""
    narrow = {np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32}.get(h.dtype)
    if narrow is None or backend.supports(h.dtype):
        return h
    if narrow is np.int32 and h.size and (h.min() < -2**31 or h.max() >= 2**31):
        return h                                 # (refused by the backend, naming the dtype)
    return h.astype(narrow)


def _copy_dtype(x) -> np.dtype | None:
    """The NumPy dtype of a tk.copyto operand (an array's, or NumPy's for a list or scalar);
    None where it cannot be told without touching a foreign device (the backend checks)."""
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    h = as_host_ndarray(x)
    if h is not None:
        return h.dtype
    if isinstance(x, (list, tuple, *_SCALARS)):
        return np.asarray(x).dtype
    return None


def _is_array_like(x) -> bool:
    """Whether ``x`` may hold array memory (a tk.Array, or an object exporting DLPack, the
    CUDA or NumPy array interface); lists, tuples and scalars are values, not memory."""
    if isinstance(x, Array):
        return True
    if isinstance(x, (list, tuple, *_SCALARS)):
        return False
    return any(hasattr(x, a) for a in ("__dlpack__", "__cuda_array_interface__", "__array_interface__"))


def _shape_or_none(x) -> tuple | None:
    """The shape of a tk.copyto operand (NumPy's for a list or scalar); None if unknown."""
    shp = getattr(x, "shape", None)
    if shp is not None:
        try:
            return tuple(int(n) for n in shp)
        except TypeError:
            return None
    if isinstance(x, (list, tuple, *_SCALARS)):
        return np.shape(x)
    return None


def _broadcast_source(src, sshape: tuple, dshape: tuple, stream):
    """``src`` as a host array broadcast to ``dshape`` (NumPy's rules, as ``np.copyto``), or a
    ``ValueError`` naming both shapes. A device ``src`` is read back first, after the work
    queued on ``stream`` (as a converting copy is)."""
    try:
        ok = np.broadcast_shapes(sshape, dshape) == dshape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"tk.copyto: shape mismatch: dst has shape {dshape}, src has shape {sshape}, "
                         "which does not broadcast to it")
    if _is_device(src):
        from .runtime.base import stream_mismatch
        why = stream_mismatch(stream, src.backend)
        if why is not None:
            raise ValueError(f"tk.copyto: {why}")
        if stream is not None:
            stream.synchronize()
        h = src.numpy()
    else:
        h = as_host_ndarray(src)
        if h is None:
            h = np.asarray(src)
    return np.broadcast_to(h, dshape)


def _check_host_dst(d: np.ndarray) -> None:
    """ValueError when host array ``d`` cannot be copied into: read-only, or elements that
    share memory (a stride 0: ``torch.expand``; the copy would keep one element's value, where
    torch's ``copy_`` refuses)."""
    from .runtime.memspan import overlapping_axis
    if not d.flags.writeable:
        raise ValueError("tk.copyto: dst is read-only")
    ax = overlapping_axis(d.shape, d.strides)
    if ax is not None:
        raise ValueError(f"tk.copyto: dst has elements that share memory (stride 0 along its dimension {ax} of "
                         f"extent {d.shape[ax]}: a broadcast or expanded view); copy into a contiguous array")


def _check_host_copy_stream(stream, dst, src) -> None:
    """A copy between host arrays queued on ``stream``: a ValueError unless it is a stream of
    the backend of the tk.Array among them (``dst``'s first), as a launch's stream must be; with
    only NumPy arrays (no backend) any backend's stream or a plain ``tk.Stream()`` orders it.
    A number or a str was an AttributeError ("'int' object has no attribute 'submit'")."""
    from .runtime.base import stream_mismatch
    owner = next((a.backend for a in (dst, src) if isinstance(a, Array)), None)
    if owner is not None:
        why = stream_mismatch(stream, owner)
    elif callable(getattr(stream, "submit", None)) and callable(getattr(stream, "synchronize", None)):
        why = None
    else:
        why = f"stream= must be a stream (backend.stream() or tk.Stream()), got {type(stream).__name__}"
    if why is not None:
        raise ValueError(f"tk.copyto: {why}")


@api_boundary
def copyto(dst, src, stream=None):
    """Copy ``src`` into ``dst``, broadcasting ``src`` to ``dst``'s shape with NumPy's rules
    (a scalar or 0-d array fills ``dst``), values cast with NumPy's ``same_kind`` rule, as
    ``np.copyto``. Returns a :class:`tk.Event`.

    ``stream=None``: the copy is done before returning (it does not wait for work queued
    on streams; synchronize those first) and a completed event is returned. Otherwise the
    copy is queued on ``stream``, ordered with its other work, and its event returned: a
    ``src`` in host memory that is not the backend's array (NumPy, a scalar) is read before
    returning (it may be changed at once, as CUDA's copies from pageable memory), an array of
    the backend in stream order; a host ``dst`` is filled by the time the stream is synchronized.
    Inside ``tk.autodiff`` the copy is recorded and differentiated (it completes before
    returning).
    """
    from .runtime.base import RECORDERS
    if RECORDERS:                        # inside tk.autodiff: recorded (and differentiated)
        return RECORDERS[-1].copyto(dst, src, stream)
    from .runtime.streams import completed_event
    for name, a in (("dst", dst), ("src", src)):
        if _is_torch(a):                       # a lazy negated/conjugated view: named here, not as "torch tensor"
            check_torch_lazy_view(a, f"tk.copyto: {name}")
    pageable = not isinstance(src, Array)      # host memory that is not a backend's array
    d = None if _is_device(dst) else as_host_ndarray(dst)
    if d is None and not _is_array_like(dst):  # before the shapes: a str or a list has one too
        raise TypeError(f"tk.copyto: dst must be an array (a tk.Array, a NumPy array, a tensor), "
                        f"got {type(dst).__name__}")
    dshape, sshape = _shape_or_none(dst), _shape_or_none(src)
    if dshape is not None and sshape is not None and sshape != dshape:
        src = _broadcast_source(src, sshape, dshape, stream)
    if d is not None:
        _check_host_dst(d)
    if _is_device(dst) or _is_device(src):
        dev = dst if _is_device(dst) else src
        sdt, ddt = _copy_dtype(src), _copy_dtype(dst)
        if sdt is not None and ddt is not None and not np.can_cast(sdt, ddt, casting="same_kind"):
            raise TypeError(f"tk.copyto: cannot cast {sdt} to {ddt} (same_kind casting)")
        from .runtime.base import stream_mismatch
        why = stream_mismatch(stream, dev.backend)
        if why is not None:
            raise ValueError(f"tk.copyto: {why}")
        return dev.backend.copy(dst, src, stream)
    s = as_host_ndarray(src)
    if s is None:
        s = np.asarray(src)
    if s.shape != d.shape:
        raise ValueError(f"tk.copyto: shape mismatch: dst has shape {d.shape}, src has shape {s.shape}")
    if not np.can_cast(s.dtype, d.dtype, casting="same_kind"):
        raise TypeError(f"tk.copyto: cannot cast {s.dtype} to {d.dtype} (same_kind casting)")
    if stream is None:
        np.copyto(d, s, casting="same_kind")
        return completed_event()
    _check_host_copy_stream(stream, dst, src)
    if pageable:                          # read before returning: the caller may change it then
        s = staged(s, s)
    return stream.submit(lambda: np.copyto(d, s, casting="same_kind"))


@api_boundary
def from_dlpack(x, *, device=None, copy: bool | None = None) -> Array:
    """Wrap an object exporting DLPack (``__dlpack__``) without copying.

    Host memory (and CUDA/ROCm device memory with those backends): a tensor on another
    device raises ``ValueError``. ``copy=True`` returns a copy on the same backend instead
    (the array API's ``from_dlpack(x, copy=True)``); ``copy=False`` and ``None`` never copy.
    ``device`` (the array API's keyword: a backend or a DEV string; None: where ``x`` lives)
    places the result there: a copy unless it is where ``x`` is (refused with ``copy=False``).
    """
    if device is not None:
        target, view = _resolve_backend(device, "device"), from_dlpack(x, copy=copy)
        if view.backend == target:
            return view
        if copy is False:
            raise ValueError(f"tk.from_dlpack: the {type(x).__name__} is on {view.backend!r}, not on "
                             f"device={target!r}, and copy=False forbids moving it")
        return asarray(view, backend=target)
    if copy:
        view = from_dlpack(x)
        if view._host is not None:
            return Array(np.array(view._host, copy=True), view.backend)
        return asarray(view.numpy(), backend=view.backend)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"tk.from_dlpack expects an object with __dlpack__ (a DLPack exporter), "
                        f"got {type(x).__name__}")
    if isinstance(x, Array) and x._host is not None:
        return Array(x._host, x.backend)
    if _is_torch(x):
        check_torch_lazy_view(x, "tk.from_dlpack")
    dev = _dl_device(x)
    if dev is not None and dev[0] in (_DL_CUDA, _DL_CUDA_MANAGED):
        _cuda_backend_of(x, f"DLPack device {_dl_name(dev)}", ValueError)
        from .runtime.cuda import from_dlpack as _cuda_from_dlpack
        return _cuda_from_dlpack(x)               # a zero-copy view on the CUDA device
    if dev is not None and dev[0] == _DL_ROCM:
        _rocm_backend_of(x, int(dev[1]), f"DLPack device {_dl_name(dev)}", ValueError)
        from .runtime.rocm import from_dlpack as _rocm_from_dlpack
        return _rocm_from_dlpack(x)               # a zero-copy view on the ROCm device
    if dev is not None and dev[0] not in _DL_HOST_TYPES:
        raise ValueError(f"tk.from_dlpack: the {type(x).__name__} lives on DLPack device "
                         f"{_dl_name(dev)}; only host memory (CPU) can be wrapped in this release "
                         "(move it to the host first, e.g. tensor.cpu())")
    try:
        h = host_from_dlpack(x)
    except BufferError as e:
        raise ValueError(f"tk.from_dlpack: cannot wrap the {type(x).__name__} without copying: {e}") from e
    _check_supported(h, "tk.from_dlpack")
    return Array(h, _cpu())


@api_boundary
def from_blob(ptr: int, shape, dtype, backend, strides=None) -> Array:
    """Wrap foreign memory at address ``ptr`` without copying.

    ``strides`` are in bytes (default: C-contiguous) and may be negative; ``ptr`` is the
    address of element ``[0, ..., 0]``. The caller must keep the memory alive, and not
    free it, for as long as the Array (or any view of it) is used: it is not tracked.
    """
    backend = _resolve_backend(backend)
    _require_host(backend, "tk.from_blob")
    if isinstance(ptr, ctypes.c_void_p):
        ptr = ptr.value or 0
    try:
        ptr = operator.index(ptr)
    except TypeError:
        raise TypeError(f"tk.from_blob: ptr must be an int address, got {type(ptr).__name__}") from None
    dims, dt = _shape(shape), _np_dtype(dtype)
    if strides is None:
        st, acc = [], dt.itemsize
        for n in reversed(dims):
            st.append(acc)
            acc *= max(n, 1)
        strides = tuple(reversed(st))
    else:
        strides = tuple(operator.index(s) for s in strides)
        if len(strides) != len(dims):
            raise ValueError(f"tk.from_blob: strides {strides} do not match shape {dims}")
    empty_ = any(n == 0 for n in dims)
    lo = hi = 0
    if not empty_:
        for n, s in zip(dims, strides):
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        hi += dt.itemsize
        if ptr <= 0:
            raise ValueError(f"tk.from_blob: invalid address {ptr:#x}")
    span = hi - lo
    buf = (ctypes.c_char * span).from_address(ptr + lo) if span else bytearray(0)
    h = np.ndarray(dims, dtype=dt, buffer=buf, offset=-lo, strides=strides if not empty_ else None)
    return Array(h, backend)


# ------------------------------------------------------------------------------ queries

def get_backend(obj):
    """The backend an array lives on: a tk.Array's own; ``tk.CPU()`` for NumPy arrays,
    CPU torch tensors, ``__array_interface__`` objects and CPU DLPack exporters.
    Raises ``tk.LaunchError`` for anything else."""
    if isinstance(obj, Array):
        return obj.backend
    if isinstance(obj, np.ndarray):
        return _cpu()
    if not isinstance(obj, _SCALARS):
        if _is_torch(obj):
            if obj.device.type == "cpu":
                return _cpu()
            if obj.device.type == "cuda" and _torch_is_hip():       # PyTorch for ROCm names AMD GPUs "cuda"
                return _rocm_backend_of(obj, obj.device.index or 0, f"{obj.device} (ROCm)")
            if obj.device.type == "cuda":
                return _cuda_backend_of(obj, str(obj.device))
            raise LaunchError(f"no tinykernels backend for a torch tensor on {obj.device} in this release")
        if hasattr(obj, "__dlpack__"):
            dev = _dl_device(obj)
            if dev is not None and dev[0] in _DL_HOST_TYPES:
                return _cpu()
            if dev is not None and dev[0] in (_DL_CUDA, _DL_CUDA_MANAGED):
                return _cuda_backend_of(obj, f"DLPack device {_dl_name(dev)}")
            if dev is not None and dev[0] == _DL_ROCM:
                return _rocm_backend_of(obj, int(dev[1]), f"DLPack device {_dl_name(dev)}")
            if dev is not None:
                raise LaunchError(f"no tinykernels backend for a {type(obj).__name__} on DLPack device "
                                  f"{_dl_name(dev)} in this release")
        if hasattr(obj, "__array_interface__"):
            return _cpu()
        if hasattr(obj, "__cuda_array_interface__"):
            return _cuda_backend_of(obj, "a CUDA device")
    raise LaunchError(f"cannot tell which device a {type(obj).__module__}.{type(obj).__qualname__} "
                      "lives on: expected a tk.Array, a NumPy array, a torch tensor, or an object "
                      "exporting __dlpack__ or __array_interface__")
