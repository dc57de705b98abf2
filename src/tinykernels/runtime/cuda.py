"""The NVIDIA CUDA runtime (``tk.CUDA(device=0)``, ``DEV=CUDA``, ``DEV=CUDA:1``).

Code generation (:mod:`tinykernels.codegen.cuda`) and compilation (:func:`compile_cuda`,
NVRTC through ``cuda.bindings.nvrtc``) need no GPU and are tested in CI on every machine
with NVRTC installed. Everything else here talks to the CUDA driver API through
``cuda.bindings.driver`` and needs an NVIDIA driver and device:

* one primary context per device (``cuDevicePrimaryCtxRetain``), made current on each
  thread that uses it;
* modules from cubins (``cuModuleLoadData``), one per generated source, kernels launched
  with ``cuLaunchKernel`` and a packed argument array (:func:`~tinykernels.codegen.cuda.param_layout`),
  prepared once per argument layout and reused by later launches ("launch plans" below);
* device arrays (:class:`CUDAArray`) from ``cuMemAlloc``, copies with ``cuMemcpy*``;
  they export ``__cuda_array_interface__`` and DLPack, and PyTorch, CuPy and JAX arrays on
  the device are taken zero-copy;
* streams are ``cuStreamCreateWithPriority`` streams, events are CUDA events.

Compiled kernels are cached on disk under the CPU's cache directory
(``TK_CACHE_DIR``/cuda), keyed by the source, the NVRTC version, the architecture and
the options, written atomically and sealed (a damaged file is compiled again).
"""
from __future__ import annotations

import ctypes
import hashlib
import struct
import threading
import weakref
from functools import lru_cache

import numpy as np

from .. import dtypes as D
from .base import Backend
from .hostarray import _DL_CUDA, _DL_CUDA_MANAGED, Array
from ..tracebacks import USER_ERRORS, prepare as filtered
from ..errors import BackendUnavailable, CompileError, LaunchError
from .base import RECORDERS, KernelInstance
from .dlpack import _EXPORTS, _dlpack_capsule, _from_dlpack_capsule  # noqa: F401 (_EXPORTS: the tests count exports)
from .device import DeviceArray, DeviceEvent, DeviceKernelInstance, arg_sig, c_strides, check_debug_info, debug_flag, fits32, \
    group_plan, is_host_array, same_shape, scalar_value, track_stream
from .streams import Event, check_recorded, completed_event, deadline_of, poll_until

# NVRTC (compiling CUDA C++, no GPU needed) is runtime/nvrtc.py, as the CPU's C compiler is
# runtime/compiler.py; its names are re-exported here (tinykernels.runtime.cuda.compile_cuda).
from .nvrtc import (FASTMATH_NVRTC_OPTIONS, HINT, NVRTC_OPTIONS, STATS, choose_arch, compile_cuda,  # noqa: F401
                    cubin_path, normalize_arch, nvrtc_available, nvrtc_version, supported_archs)


# ----------------------------------------------------------------------------- bindings

_DRIVER = None              # cuda.bindings.driver once imported (a launch asks for it every time)


def _driver():
    global _DRIVER
    if _DRIVER is None:
        try:
            from cuda.bindings import driver
        except ImportError as e:
            raise BackendUnavailable(f"the CUDA backend needs cuda-bindings: {HINT} ({e})") from None
        _DRIVER = driver
    return _DRIVER


def _ok(res, what: str):
    """Unwrap a ``(CUresult, *values)`` tuple of cuda.bindings, raising on an error code."""
    if isinstance(res, tuple):
        err, vals = res[0], res[1:]
    else:
        err, vals = res, ()
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {_errstr(err)}")
    return vals[0] if len(vals) == 1 else (vals if vals else None)


_OK = (0,)                  # what a driver call returns on success (CUDA_SUCCESS compares equal to 0)


def _errstr(err) -> str:
    name = getattr(err, "name", str(err))
    try:
        r, s = _driver().cuGetErrorString(err)
        if int(r) == 0 and s:
            return f"{name}: {s.decode() if isinstance(s, bytes) else s}"
    except Exception:  # noqa: BLE001 - an error message must never raise
        pass
    return str(name)


# ----------------------------------------------------------------------------- devices

_TLS = threading.local()


class _Device:
    """Primary context, attributes and module cache of one device (shared by equal backends)."""

    def __init__(self, ordinal: int):
        drv = _driver()
        A = drv.CUdevice_attribute
        self.ordinal = ordinal
        self.handle = _ok(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = _ok(drv.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        self.activate()

        def attr(a):
            return int(_ok(drv.cuDeviceGetAttribute(a, self.handle), "cuDeviceGetAttribute"))
        self.name, self.cc, self.driver_version = _probe(ordinal)
        self.max_threads = attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        self.max_grid = (attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                         attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))
        self.max_block = (attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                          attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z))
        lo, hi = _ok(drv.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange")
        self.prio_least, self.prio_greatest = int(lo), int(hi)
        self.arch = choose_arch(self.cc, self.driver_version)
        self.modules: dict = {}           # source -> (module, function)
        self.lock = threading.Lock()
        self.streams = weakref.WeakSet()
        self.null = drv.CUstream(0)       # the legacy default stream (orders with every blocking stream)
        self.event_flags = int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        self.events: list = []            # CUevent handles of collected CUDAEvents, recorded again (_record)

    def activate(self) -> None:
        """Make the primary context current on this thread (once per thread)."""
        cur = getattr(_TLS, "ctx", None)
        if cur is not self:
            _ok(_driver().cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
            _TLS.ctx = self


_DEVICES: dict = {}          # explicit cache: ordinal -> _Device
_DEVICES_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _init() -> int:
    """cuInit once; the number of devices (raises BackendUnavailable with the reason)."""
    try:
        drv = _driver()
    except BackendUnavailable:
        raise
    try:
        err, = drv.cuInit(0)
    except Exception as e:  # noqa: BLE001 - cuda-bindings raises when libcuda.so is missing
        raise BackendUnavailable(f"no NVIDIA driver found (libcuda could not be loaded: {e}); "
                                 "install the NVIDIA driver to use the CUDA backend") from None
    if int(err) != 0:
        raise BackendUnavailable(f"the CUDA driver failed to initialize ({_errstr(err)}): "
                                 "no usable NVIDIA GPU, or the driver is not loaded")
    n = int(_ok(drv.cuDeviceGetCount(), "cuDeviceGetCount"))
    if n == 0:
        raise BackendUnavailable("the NVIDIA driver found no CUDA device")
    return n


def _probe(ordinal: int) -> tuple:
    """(name, compute capability, driver version) of a device, without a context."""
    drv = _driver()
    A = drv.CUdevice_attribute
    h = _ok(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    cc = tuple(int(_ok(drv.cuDeviceGetAttribute(a, h), "cuDeviceGetAttribute"))
               for a in (A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                         A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    name = _ok(drv.cuDeviceGetName(256, h), "cuDeviceGetName")
    name = (name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)).strip()
    return name, cc, int(_ok(drv.cuDriverGetVersion(), "cuDriverGetVersion"))


def _device(ordinal: int) -> _Device:
    n = _init()
    if not 0 <= ordinal < n:
        raise BackendUnavailable(f"CUDA device {ordinal} does not exist: this machine has {n} device(s)")
    with _DEVICES_LOCK:
        dev = _DEVICES.get(ordinal)
        if dev is None:
            try:
                dev = _DEVICES[ordinal] = _Device(ordinal)
            except RuntimeError as e:
                raise BackendUnavailable(f"CUDA device {ordinal} cannot be used: {e}") from None
    return dev


# ----------------------------------------------------------------------------- backend

class CUDA(Backend):
    """An NVIDIA GPU through the CUDA driver API; kernels are compiled with NVRTC.

    ``device``: the device ordinal. ``debug``: bounds-check every array access (also
    ``TK_DEBUG=1``)."""
    name = "CUDA"
    dev = "CUDA"
    is_host = False
    supports_float64 = True

    def __init__(self, device: int = 0, debug: bool | None = None):
        self.device = int(device)
        self.debug = debug_flag(debug)
        self._dev = _device(self.device)
        self.max_workgroupsize = self._dev.max_threads

    @property
    def device_name(self) -> str:
        return self._dev.name

    @property
    def arch(self) -> str:
        """What kernels are compiled for: ``sm_XY`` (cubin) or ``compute_XY`` (PTX)."""
        return self._dev.arch

    def key(self) -> tuple:
        return ("CUDA", self.device, self.debug)

    def __repr__(self) -> str:
        return f"tk.CUDA(device={self.device}{', debug=True' if self.debug else ''}) # {self.device_name}"

    @staticmethod
    def available() -> tuple:
        """(True, what) when device 0 can run kernels, else (False, why). Creates no context."""
        try:
            n = _init()
            ok, nv = nvrtc_available()
            if not ok:
                return False, nv
            name, cc, v = _probe(0)
            arch = choose_arch(cc, v)
        except BackendUnavailable as e:
            return False, str(e)
        except Exception as e:  # noqa: BLE001 - a probe never raises
            return False, f"CUDA probe failed: {e}"
        return True, (f"{name} (sm_{cc[0]}{cc[1]}), {n} device(s), driver CUDA {v // 1000}."
                      f"{v % 1000 // 10}, {nv}, compiling for {arch}")

    def supports(self, dtype) -> bool:
        return D.from_any(dtype) is not None

    # --- memory -----------------------------------------------------------------------------

    def array_from_host(self, h: np.ndarray) -> "CUDAArray":
        h = np.require(h, requirements="C")
        a = CUDAArray.empty(self, h.shape, h.dtype)
        if h.nbytes:
            self._dev.activate()
            _ok(_driver().cuMemcpyHtoD(a._dptr(), h.ctypes.data, h.nbytes), "cuMemcpyHtoD")
        return a

    def copy(self, dst, src, stream=None):
        """tk.copyto with a CUDA array on either side (device<->device, host->device, device->host)."""
        drv = _driver()
        self._dev.activate()
        h_stream = stream.handle if stream is not None else self._dev.null
        if not isinstance(src, (CUDAArray, np.ndarray)) and not (isinstance(src, Array) and src._host is not None):
            src = as_cuda_array(src) or src           # a torch/CuPy/JAX array on a CUDA device: no host trip
        if isinstance(dst, CUDAArray) and isinstance(src, CUDAArray):
            if src.backend.device != dst.backend.device:
                raise ValueError(f"tk.copyto: src is on CUDA:{src.backend.device}, dst on CUDA:{dst.backend.device}")
            same_shape(dst, src)
            if dst.dtype != src.dtype or not dst.is_contiguous or not src.is_contiguous:
                raise TypeError("tk.copyto between CUDA arrays needs the same dtype and contiguous arrays")
            if src.nbytes:
                _ok(drv.cuMemcpyDtoDAsync(dst._dptr(), src._dptr(), src.nbytes, h_stream), "cuMemcpyDtoDAsync")
        elif isinstance(dst, CUDAArray):
            from .hostarray import as_host_ndarray
            h = as_host_ndarray(src) if not isinstance(src, Array) else src.numpy()
            h = np.ascontiguousarray(np.asarray(src) if h is None else h, dtype=dst.dtype)
            same_shape(dst, h)
            if not dst.is_contiguous:
                raise TypeError("tk.copyto into a non-contiguous CUDA array is not supported")
            if h.nbytes:
                # pageable host memory: the call returns once the data is staged, so h may go
                _ok(drv.cuMemcpyHtoDAsync(dst._dptr(), h.ctypes.data, h.nbytes, h_stream), "cuMemcpyHtoDAsync")
        else:
            from .hostarray import as_host_ndarray
            h = as_host_ndarray(dst)
            if h is None:
                raise TypeError(f"tk.copyto: dst must be a tk.Array or a host array, got {type(dst).__name__}")
            same_shape(h, src)
            if stream is not None:
                stream.synchronize()
            np.copyto(h, src.numpy(), casting="same_kind")
            return completed_event()
        ev = CUDAEvent.record(self._dev, h_stream)
        if stream is None:                    # tk.copyto without a stream is done when it returns
            ev.wait()
        return ev

    # --- streams ------------------------------------------------------------------------------

    def stream(self, priority: int = 0) -> "CUDAStream":
        return track_stream(self._dev, CUDAStream(self, priority))

    def synchronize(self, timeout: float | None = None) -> None:
        self._dev.activate()
        if timeout is None:
            _ok(_driver().cuCtxSynchronize(), "cuCtxSynchronize")
            return
        with self._dev.lock:
            streams = [s.handle for s in list(self._dev.streams)]
        _finish_within(self._dev, [self._dev.null] + streams, timeout, repr(self))

    instance_class = None   # set below


class CUDATarget(Backend):
    """What the code generator needs to know about CUDA, with no device: used by
    ``kernel.source("CUDA", ...)`` on machines without a GPU. It cannot launch."""
    name = "CUDA"
    dev = "CUDA"
    is_host = False
    supports_float64 = True
    max_workgroupsize = 1024

    def __init__(self, debug: bool | None = None):
        self.debug = debug_flag(debug)

    def key(self) -> tuple:
        return ("CUDA-source", self.debug)

    def __repr__(self) -> str:
        return f"tk.runtime.cuda.CUDATarget(debug={self.debug})"

    @staticmethod
    def available() -> tuple:
        return False, "a code-generation target only"

    def supports(self, dtype) -> bool:
        return D.from_any(dtype) is not None

    instance_class = None   # set below


def cuda_source(kernel, *args, ndrange, workgroupsize=None, debug=None) -> str:
    """The CUDA C++ translation unit of ``kernel`` for these arguments, on any machine.

    Arrays may be NumPy arrays (only their dtype, rank, layout and size matter), CUDA
    arrays, or any array the CUDA backend accepts."""
    return kernel(CUDATarget(debug)).source(*args, ndrange=ndrange, workgroupsize=workgroupsize)


# ----------------------------------------------------------------------------- arrays

class _Allocation:
    """Device memory from cuMemAlloc, freed when the last array using it goes."""
    __slots__ = ("ptr", "dev", "__weakref__")

    def __init__(self, dev: _Device, nbytes: int):
        dev.activate()
        self.dev = dev
        self.ptr = int(_ok(_driver().cuMemAlloc(max(int(nbytes), 1)), "cuMemAlloc"))

    def __del__(self):
        try:
            self.dev.activate()
            _driver().cuMemFree(_driver().CUdeviceptr(self.ptr))
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass


class _Layout:
    """What a launch needs to know about an array besides its address: dtype, shape, strides
    and device. One object per distinct layout (:func:`_layout_of`), so a launch's cache key
    holds it and compares it by identity (see :class:`CUDAKernelInstance`)."""
    __slots__ = ("dtype", "shape", "strides", "device", "sig", "fits32", "usable")

    def __init__(self, dtype: np.dtype, shape: tuple, strides: tuple, device):
        self.dtype, self.shape, self.strides, self.device = dtype, shape, strides, device
        size = 1
        for n in shape:
            size *= n
        contiguous = strides == c_strides(shape, dtype) or size <= 1
        self.sig = ("A", dtype.str, len(shape), contiguous)        # arg_sig(..., layout=True)
        item = dtype.itemsize
        if item == 0:                 # not a dtype kernels take (_normalize says so)
            self.fits32 = self.usable = False
            return
        self.fits32 = size < 1 << 31 and sum(abs(s // item) * max(n - 1, 0) for s, n in zip(strides, shape)) < 1 << 31
        # what CUDAKernelInstance._normalize checks of a kernel argument (it raises the errors)
        self.usable = D.from_any(dtype) is not None and 1 <= len(shape) <= 8 and not any(s % item for s in strides)


_LAYOUTS: dict = {}            # explicit cache: (dtype, shape, strides, device) -> _Layout
_MAX_LAYOUTS = 4096


def _layout_of(dtype: np.dtype, shape: tuple, strides: tuple, device) -> _Layout:
    key = (dtype, shape, strides, device)
    lay = _LAYOUTS.get(key)
    if lay is None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:     # only a cache: arrays keep their own _Layout
            _LAYOUTS.clear()
        lay = _LAYOUTS.setdefault(key, _Layout(dtype, shape, strides, device))
    return lay


class CUDAArray(DeviceArray):
    """An array in a CUDA device's global memory: its own allocation, or a zero-copy view
    of another library's CUDA array (PyTorch, CuPy, JAX...). Any strides."""
    __slots__ = ("_ptr", "_strides", "_owner", "_layout")

    def __init__(self, backend: CUDA, ptr: int, shape, dtype, strides=None, owner=None):
        self._host = None
        self._backend = backend
        self._ptr = int(ptr)
        self._shape = tuple(int(n) for n in shape)
        self._dtype = np.dtype(dtype)
        self._strides = tuple(int(s) for s in strides) if strides is not None else c_strides(self._shape, self._dtype)
        self._owner = owner              # keeps the memory alive (an _Allocation or the foreign object)
        self._layout = _layout_of(self._dtype, self._shape, self._strides, getattr(backend, "device", None))

    @classmethod
    def empty(cls, backend: CUDA, shape, dtype) -> "CUDAArray":
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        alloc = _Allocation(backend._dev, n)
        return cls(backend, alloc.ptr, shape, dt, None, alloc)

    def _dptr(self):
        return _driver().CUdeviceptr(self._ptr)

    @property
    def strides(self):
        return self._strides

    @property
    def ptr(self) -> int:
        return self._ptr

    @property
    def is_contiguous(self) -> bool:
        return self._strides == c_strides(self._shape, self._dtype) or self.size <= 1

    def _span(self) -> tuple:
        """(lowest, highest + itemsize) byte offsets the elements occupy, relative to ptr."""
        lo = hi = 0
        if self.size == 0:
            return 0, 0
        for n, s in zip(self._shape, self._strides):
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        return lo, hi + self._dtype.itemsize

    def numpy(self) -> np.ndarray:
        """A host copy. It is ordered after work on the legacy default stream and every
        blocking stream (tinykernels' own); synchronize other libraries' streams first."""
        dev = self._backend._dev
        lo, hi = self._span()
        if hi - lo == 0:
            return np.empty(self._shape, self._dtype)
        raw = np.empty(hi - lo, np.uint8)
        dev.activate()
        _ok(_driver().cuMemcpyDtoH(raw.ctypes.data, _driver().CUdeviceptr(self._ptr + lo), hi - lo), "cuMemcpyDtoH")
        view = np.ndarray(self._shape, self._dtype, buffer=raw, offset=-lo, strides=self._strides)
        return np.ascontiguousarray(view)

    @property
    def __array_interface__(self):
        raise AttributeError("a tk.Array on a CUDA device has no host address; use .numpy()")

    @property
    def __cuda_array_interface__(self) -> dict:
        d = D.from_any(self._dtype)
        typestr = self._dtype.str
        if d is not None and d.is_storage_only:          # bf16/fp8: raw bits ('<u2' / '|u1')
            typestr = np.dtype(f"u{self._dtype.itemsize}").str
        return {"shape": self._shape, "typestr": typestr, "data": (self._ptr, False), "version": 3,
                "strides": None if self.is_contiguous else self._strides, "stream": 1}

    def __dlpack_device__(self):
        return (_DL_CUDA, self._backend.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule (``dltensor``) of this memory, no copy. ``stream``: the
        consumer's stream; work queued on the legacy default stream is ordered before it."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"tk.Array on CUDA:{self._backend.device} cannot be exported to device {dl_device}")
        if copy:
            raise BufferError("tk.Array.__dlpack__(copy=True) is not supported")
        if stream is not None and stream not in (1, 2) and stream != -1:
            ev = CUDAEvent.record(self._backend._dev, self._backend._dev.null)
            _ok(_driver().cuStreamWaitEvent(_driver().CUstream(int(stream)), ev.handle, 0), "cuStreamWaitEvent")
        return _dlpack_capsule(self)


# --- foreign CUDA arrays (PyTorch, CuPy, JAX, anything with the CUDA array interface) --------

def device_of(obj) -> int | None:
    """The CUDA device ordinal ``obj`` lives on, or None if it is not a CUDA array."""
    if isinstance(obj, CUDAArray):
        return obj.backend.device
    mod = type(obj).__module__
    if mod.startswith("torch") and hasattr(obj, "device") and hasattr(obj, "data_ptr"):
        if obj.device.type != "cuda":
            return None
        return obj.device.index or 0
    if hasattr(type(obj), "__dlpack_device__"):
        try:
            t, i = obj.__dlpack_device__()
        except Exception:  # noqa: BLE001
            t = None
        if t is not None:
            return int(i) if int(t) in (_DL_CUDA, _DL_CUDA_MANAGED) else None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _pointer_device(cai["data"][0])
    return None


def _pointer_device(ptr: int) -> int:
    drv = _driver()
    _init()
    if not ptr:
        return 0
    return int(_ok(drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                             drv.CUdeviceptr(ptr)), "cuPointerGetAttribute"))


def backend_of(obj) -> CUDA | None:
    """``tk.CUDA(n)`` for an array on CUDA device n, else None (for tk.get_backend)."""
    n = device_of(obj)
    return None if n is None else CUDA(n)


def as_cuda_array(obj, backend: CUDA | None = None) -> CUDAArray | None:
    """A zero-copy CUDAArray view of a CUDA array of another library, or None if ``obj``
    is not one. PyTorch tensors (every dtype, bfloat16 and fp8 too), CuPy/Numba arrays
    (``__cuda_array_interface__``) and DLPack exporters on a CUDA device are accepted."""
    if isinstance(obj, CUDAArray):
        return obj
    mod = type(obj).__module__
    if mod.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "device"):
        if obj.device.type != "cuda":
            return None
        name = str(obj.dtype).rpartition(".")[2]
        d = D.BY_NAME.get({"bool": "bool"}.get(name, name))
        if d is None:
            raise TypeError(f"torch dtype {obj.dtype} is not supported by tinykernels")
        dt = D.to_numpy(d)
        b = _backend_for(backend, obj.device.index or 0)
        return CUDAArray(b, obj.data_ptr(), tuple(obj.shape), dt,
                         tuple(s * dt.itemsize for s in obj.stride()), obj)
    cai = getattr(obj, "__cuda_array_interface__", None) if not isinstance(obj, np.ndarray) else None
    if cai is not None:
        ptr = int(cai["data"][0] or 0)
        dt = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = tuple(cai["strides"]) if cai.get("strides") else None
        st = cai.get("stream")
        if st not in (None, 1, 2) and st:            # the producer's stream: finish its work first
            _ok(_driver().cuStreamSynchronize(_driver().CUstream(int(st))), "cuStreamSynchronize")
        b = _backend_for(backend, _pointer_device(ptr))
        return CUDAArray(b, ptr, shape, dt, strides, obj)
    if hasattr(obj, "__dlpack__") and hasattr(type(obj), "__dlpack_device__"):
        t, i = obj.__dlpack_device__()
        if int(t) not in (_DL_CUDA, _DL_CUDA_MANAGED):
            return None
        b = _backend_for(backend, int(i))        # BackendUnavailable before the capsule is taken
        try:
            cap = obj.__dlpack__(stream=1)       # ordered with the legacy default stream
        except TypeError:
            cap = obj.__dlpack__()
        ptr, shape, strides, dt, dev, owner = _from_dlpack_capsule(cap, obj)
        return CUDAArray(b, ptr, shape, dt, strides, owner)
    return None


def _backend_for(backend, ordinal: int) -> CUDA:
    """``backend`` when it is that device, else the device's own backend (so that a launch
    can tell an array on another device)."""
    if isinstance(backend, CUDA) and backend.device == ordinal:
        return backend
    return CUDA(ordinal)


def from_dlpack(x) -> CUDAArray:
    """tk.from_dlpack for a tensor on a CUDA device (zero-copy)."""
    a = as_cuda_array(x)
    if a is None:
        raise ValueError(f"{type(x).__name__} is not on a CUDA device")
    return a


# ----------------------------------------------------------------------------- events, streams

class CUDAEvent(DeviceEvent):
    """A CUDA event recorded on a stream (None: already complete)."""
    __slots__ = ("handle", "_dev")

    def __init__(self, handle, dev=None):
        super().__init__()
        self.handle, self._dev = handle, dev

    @classmethod
    def record(cls, dev: _Device, h_stream) -> "CUDAEvent":
        dev.activate()
        return _record(_driver(), dev, h_stream)

    def done(self) -> bool:
        if self.handle is None:
            return True
        self._dev.activate()
        err, = _driver().cuEventQuery(self.handle)
        if int(err) == 0:
            return True
        if int(err) == int(_driver().CUresult.CUDA_ERROR_NOT_READY):
            return False
        raise RuntimeError(f"cuEventQuery failed: {_errstr(err)}")

    def wait(self, timeout=None) -> None:
        if self.handle is None:
            return
        if timeout is not None:
            self._wait_done(timeout)
            return
        self._dev.activate()
        _ok(_driver().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def __del__(self):
        # the handle goes back to its device's pool (nothing can wait on this event any more;
        # recording it again overwrites its state), or is destroyed when the pool is full
        try:
            h = self.handle
            if h is not None:
                pool = self._dev.events if self._dev is not None else None
                if pool is not None and len(pool) < _EVENT_POOL:
                    pool.append(h)
                else:
                    _driver().cuEventDestroy(h)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<tk.Event (CUDA) {'done' if self.done() else 'pending'}>"


_EVENT_POOL = 256            # CUevent handles kept per device for reuse


def _finish_within(dev: _Device, handles, timeout: float, what: str) -> None:
    """Wait for the work queued so far on each stream, but ``TimeoutError`` after ``timeout`` s:
    an event recorded on each, polled."""
    deadline = deadline_of(timeout)
    for h in handles:
        ev = CUDAEvent.record(dev, h)
        if not poll_until(ev.done, deadline):
            raise TimeoutError(f"{what}: work still running after {timeout} s")


def _record(drv, dev: _Device, h_stream) -> CUDAEvent:
    """A CUDAEvent recorded on ``h_stream`` (the context current): a pooled handle or a new one."""
    try:
        ev = dev.events.pop()
    except IndexError:
        ev = _ok(drv.cuEventCreate(dev.event_flags), "cuEventCreate")
    res = drv.cuEventRecord(ev, h_stream)
    if res != _OK:
        dev.events.append(ev)
        _ok(res, "cuEventRecord")
    return _new_event(ev, dev)


_HELD = threading.Lock()      # every CUDAEvent's Event._lock: held for good, as a fresh
_HELD.acquire()               # Event's is until its job finishes (a CUDAEvent has no job)
_object_new = object.__new__


def _new_event(handle, dev: _Device) -> CUDAEvent:
    """``CUDAEvent(handle, dev)`` without the calls: the fields Event.__init__ sets, with the
    shared held lock (a launch makes one event; tests check the fields match)."""
    ev = _object_new(CUDAEvent)
    ev._lock, ev._done, ev._exc, ev._tb, ev._waited, ev._synced, ev._state, ev._seq = \
        _HELD, False, None, None, False, False, None, 0
    ev.handle, ev._dev = handle, dev
    return ev


class CUDAStream:
    """A CUDA stream. ``priority``: tk.High (> 0) is the device's greatest stream priority;
    tk.Normal and tk.Low are its least, the default streams' (CUDA has none below)."""

    def __init__(self, backend: CUDA, priority: int = 0):
        drv = _driver()
        dev = backend._dev
        self.backend, self.priority = backend, priority
        cuda_prio = dev.prio_greatest if priority > 0 else dev.prio_least
        dev.activate()
        # flags 0: a blocking stream, ordered with the legacy default stream (so .numpy() sees its work)
        self.handle = _ok(drv.cuStreamCreateWithPriority(0, cuda_prio), "cuStreamCreateWithPriority")
        self.cuda_priority = cuda_prio

    def wait(self, event) -> None:
        """Later work on this stream waits for ``event`` (on the device, not the host)."""
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        if isinstance(event, CUDAEvent) and event.handle is not None:
            self.backend._dev.activate()
            _ok(_driver().cuStreamWaitEvent(self.handle, event.handle, 0), "cuStreamWaitEvent")
        elif not event.done():
            event.wait()

    def synchronize(self, timeout: float | None = None) -> None:
        self.backend._dev.activate()
        if timeout is None:
            _ok(_driver().cuStreamSynchronize(self.handle), "cuStreamSynchronize")
        else:
            _finish_within(self.backend._dev, [self.handle], timeout, "the CUDA stream")

    def submit(self, fn) -> Event:
        """Run a host function in stream order (after the stream's queued work)."""
        self.synchronize()
        fn()
        return completed_event()

    def __del__(self):
        try:
            _driver().cuStreamDestroy(self.handle)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<tk.Stream (CUDA:{self.backend.device}) priority={self.priority}>"


# ----------------------------------------------------------------------------- kernels

_NP_PARAM = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
             "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float32": np.float32,
             "float64": np.float64, "ptr": np.uint64}


def pack_params(layout: list, values: dict, geom, err_ptr: int = 0) -> tuple:
    """The argument block of cuLaunchKernel: (buffer of 8-byte slots, array of pointers to
    them). ``values``: kernel argument by IR parameter name (see :func:`bind_args`).

    Debug launches use it; other launches go through a launch plan, which must write these
    bytes (the tests compare them)."""
    buf = np.zeros(max(len(layout), 1), np.uint64)
    raw = buf.view(np.uint8)
    for i, (kind, det, ct) in enumerate(layout):
        if kind == "start":
            v = geom[3 * det]
        elif kind == "count":
            v = geom[3 * det + 1]
        elif kind == "step":
            v = geom[3 * det + 2]
        elif kind == "ptr":
            v = values[det.name].ptr
        elif kind == "shape":
            v = values[det[0].name].shape[det[1]]
        elif kind == "stride":
            a = values[det[0].name]
            v = a.strides[det[1]] // a.dtype.itemsize
        elif kind == "scalar":
            v = scalar_value(values[det[0]], det[1])
        else:  # err
            v = err_ptr
        b = np.asarray(v).astype(_NP_PARAM[ct]).tobytes()
        raw[8 * i:8 * i + len(b)] = np.frombuffer(b, np.uint8)
    ptrs = (np.arange(len(buf), dtype=np.uint64) * np.uint64(8)) + np.uint64(buf.ctypes.data)
    return buf, ptrs


def bind_args(ir, norm) -> dict:
    """Kernel arguments by IR parameter name (arrays: ArrayInfo.name, scalars: their name)."""
    out = {}
    for p, a in zip(ir.params, norm):
        if p[0] == "array":
            out[p[1].name] = a
        elif p[0] == "scalar":
            out[p[1]] = a
    return out


def grid_dims(geom, ndim: int, wg: tuple) -> tuple:
    """(grid, block) in hardware order (x first): the last ndrange dimension is x."""
    grid, block = [1, 1, 1], [1, 1, 1]
    for d in range(ndim):
        hw = ndim - 1 - d
        count = geom[3 * d + 1]
        grid[hw] = -(-count // wg[d])
        block[hw] = wg[d]
    return tuple(grid), tuple(block)


def _fits32(args, geom, wg) -> bool:
    """Whether every index of the launch fits in a 32-bit int (with the padding to whole
    workgroups, so even masked items' positions do not overflow): :func:`fits32` of the
    arrays, with a CUDAArray's part computed once per layout."""
    return (fits32([a for a in args if isinstance(a, np.ndarray)], geom, np.ndarray, wg)
            and all(a._layout.fits32 for a in args if isinstance(a, CUDAArray)))


# ----------------------------------------------------------------------------- launch plans
#
# A launch costs the driver a few microseconds; its Python side must cost less. The first
# launch of a kind (see CUDAKernelInstance) takes the full path: check and normalize the
# arguments, find or compile the specialization, check the grid. It leaves behind
#
# * a geometry (_Geo) per (ndrange, workgroupsize): the grid and block, the start/count/step
#   values of the kernel's first parameters, and a token standing for what the compiled
#   code depends on (ndim, ranges, workgroup, whether the padded ndrange fits 32 bits);
# * a plan per (geometry token, argument keys): an argument key is the array's _Layout
#   (interned: dtype, shape, strides, device), the scalar's type, or a constexpr's
#   (type, value). The plan is a launcher function with a preallocated argument block:
#   8-byte slots, the array shapes and strides written once, and a struct that writes the
#   geometry, the array addresses and the scalars into the first slots at each launch; the
#   kernelParams pointer array (its int address goes to cuLaunchKernel) is built once too;
# * a fast function for the kernel's argument pattern (array / scalar / constexpr at each
#   position) that turns a launch's arguments into the plan key with attribute reads only.
#
# A repeated launch is then the fast function, two dict lookups and the plan: a struct
# pack_into, cuLaunchKernel and the event. Whatever the key cannot vouch for takes the full
# path: other argument kinds (foreign arrays, host arrays), a Python int that does not fit
# int64 (the pack raises, the full path keys it as uint64), ndranges whose key is not exact
# (floats, bools, lists, ranges of one element), another stream's backend object, debug
# mode. The launcher functions are generated from two small templates (indices and fixed
# expressions only) and compiled once per distinct text.

_WG_KEY = object()            # geometry keys that include a workgroup size start with this
_WIDE_INT = object()          # plan-key entry of a Python int in [2**63, 2**64) (passed as uint64)
_MAX_CACHED = 1024            # geometries / plans kept per kernel instance (then the cache restarts)
_StructError = struct.error
_FMT = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H", "uint32": "I",
        "uint64": "Q", "float32": "f", "float64": "d", "ptr": "Q"}


class _Geo:
    """A launch geometry of one kernel instance (see above)."""
    __slots__ = ("token", "slots", "dims")

    def __init__(self, token, slots: tuple, dims: tuple):
        self.token, self.slots, self.dims = token, slots, dims


def _exact_int(x):
    """``x`` as an int when it is an int or a NumPy integer (not a bool), else None."""
    c = x.__class__
    if c is int:
        return x
    if c is not bool and isinstance(x, np.integer):
        return int(x)
    return None


def _geo_key(ndrange, workgroupsize):
    """A cache key of (ndrange, workgroupsize) equal to another's only when both give the same
    geometry, or None (1.0 == 1 == True as dict keys, and equal ranges of 0 or 1 elements may
    differ in start and step: such launches take the full path)."""
    if ndrange.__class__ is tuple:
        parts = []
        for x in ndrange:
            if x.__class__ is range:
                if len(x) < 2:
                    return None
                parts.append(x)
            else:
                v = _exact_int(x)
                if v is None:
                    return None
                parts.append(v)
        nd = tuple(parts)
    elif ndrange.__class__ is range:
        if len(ndrange) < 2:
            return None
        nd = ndrange
    else:
        nd = _exact_int(ndrange)
        if nd is None:
            return None
    if workgroupsize is None:
        return nd
    if workgroupsize.__class__ is tuple:
        wg = tuple(_exact_int(x) for x in workgroupsize)
        if None in wg:
            return None
    else:
        wg = _exact_int(workgroupsize)
        if wg is None:
            return None
    return (_WG_KEY, nd, wg)


def _slot(ct: str) -> str:
    """The struct format of one 8-byte parameter slot holding a value of C type ``ct``."""
    size = np.dtype(_NP_PARAM[ct]).itemsize
    return _FMT[ct] + (f"{8 - size}x" if size < 8 else "")


def _f32_bytes(a) -> bytes:
    return np.float32(a).tobytes()


def _scalar_slot(a, ty, ct: str) -> tuple:
    """(struct format of the slot, converter or None) for scalar argument ``a`` of a parameter
    of IR type ``ty`` and C type ``ct``; the bytes are pack_params' (scalar_value, then ct).
    No converter: struct packs ``a`` itself, exactly (a float as float64, an int as int64 or
    uint64, a bool or np.bool_ as one byte 0/1, a NumPy integer as its own type)."""
    c = a.__class__
    if (c is float and ct == "float64") or (c is int and ct in ("int64", "uint64")):
        return _slot(ct), None
    if c is bool and ct == "uint8":
        return "?7x", None
    if isinstance(a, np.generic):
        dt = a.dtype
        if dt.kind == "b" and ct == "uint8":
            return "?7x", None
        if dt.name == ct and (dt.kind in "iu" or ct == "float64"):
            return _slot(ct), None
        if dt.name == ct == "float32":       # its own bytes (a float32 NaN keeps its payload)
            return "4s4x", c.tobytes
        if ty.dtype.is_storage_only and ct == "float32":
            return "4s4x", _f32_bytes
    size = np.dtype(_NP_PARAM[ct]).itemsize   # anything else: pack_params' own conversion

    def convert(v, ty=ty, np_t=_NP_PARAM[ct]):
        return np.asarray(scalar_value(v, ty)).astype(np_t).tobytes()
    return f"{size}s" + (f"{8 - size}x" if size < 8 else ""), convert


_PLAN_SRC = """\
def make(pack_into, buf, fn, addr, dev, lock, what{convs}):
    events = dev.events
    def launch(geo, h{args}):
        with lock:                      # one argument block per plan: one launch at a time
            try:
                pack_into(buf, 0, *geo.slots{values})
            except _StructError:        # e.g. an int beyond int64: the full path decides
                return None
            drv = _driver()
            if getattr(_TLS, "ctx", None) is not dev:
                dev.activate()
            res = drv.cuLaunchKernel(fn, *geo.dims, 0, h, addr, 0)
        if res != _OK:
            _ok(res, what)
        try:                            # _record, inlined
            ev = events.pop()
        except IndexError:
            ev = _ok(drv.cuEventCreate(dev.event_flags), "cuEventCreate")
        res = drv.cuEventRecord(ev, h)
        if res != _OK:
            events.append(ev)
            _ok(res, "cuEventRecord")
        return _new_event(ev, dev)
    return launch
"""

_FAST_SRC = """\
def make(geos, plans, backend, null, geo_key):
    def fast(args, ndrange, workgroupsize, stream):
        if stream is None:
            h = null
        elif stream.__class__ is CUDAStream and stream.backend is backend:
            h = stream.handle
        else:
            return None
        try:
            {unpack} = args
            geo = geos[ndrange if workgroupsize is None and ndrange.__class__ is int
                       else geo_key(ndrange, workgroupsize)]
            plan = plans[geo.token, {keys}]
        except Exception:               # no plan for these arguments: the full path
            return None
        return plan(geo, h{args})
    return fast
"""


@lru_cache(maxsize=256)
def _generated(src: str):
    """The ``make`` function of a launcher template (compiled once per distinct text)."""
    ns: dict = {}
    exec(compile(src, f"<tinykernels.runtime.cuda launcher {hashlib.sha1(src.encode()).hexdigest()[:8]}>",
                 "exec"), globals(), ns)
    return ns["make"]


def _no_fast(args, ndrange, workgroupsize, stream):
    return None


class CUDAKernelInstance(DeviceKernelInstance):
    """A kernel on a CUDA device (or, on a CUDATarget, only its source).

    A launch first tries ``self._fast`` (see "launch plans" above), then the full path
    (:meth:`_launch`), which builds what the fast one needs."""
    array_type = CUDAArray
    label = "CUDA"

    def __init__(self, kernel, backend, wg) -> None:
        super().__init__(kernel, backend, wg)
        self._geos: dict = {}           # _geo_key -> _Geo
        self._plans: dict = {}          # (geometry token, argument keys...) -> launcher
        self._tokens: dict = {}         # (ndim, ranges, wg, fits32) -> geometry token
        self._fast = _no_fast           # the fast function of the first eligible argument pattern
        self._pattern = None

    def __call__(self, *args, ndrange, workgroupsize=None, stream=None) -> Event:
        if RECORDERS:                   # inside tk.autodiff: the recorder launches (and replays) it
            return RECORDERS[-1].launch(self, args, ndrange, workgroupsize, stream)
        try:
            ev = self._fast(args, ndrange, workgroupsize, stream)
            if ev is None:
                ev = self._launch(args, ndrange, workgroupsize, stream)
        except USER_ERRORS as e:      # the user sees their launch line, not the compiler's frames
            raise filtered(e)
        return ev

    def _normalize(self, a, name, kind):
        # replaces DeviceKernelInstance's: CUDA also takes other libraries' CUDA arrays, and a
        # CUDATarget host arrays; the generic checks are KernelInstance's
        if kind == "constexpr" or isinstance(a, (bool, int, float, np.generic)):
            return KernelInstance._normalize(self, a, name, kind)
        if isinstance(self.backend, CUDATarget) and isinstance(a, (np.ndarray, CUDAArray)):
            return a if isinstance(a, CUDAArray) else KernelInstance._normalize(self, a, name, kind)
        try:
            dev = as_cuda_array(a, self.backend if isinstance(self.backend, CUDA) else None)
        except (BackendUnavailable, TypeError, ValueError) as e:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' cannot be used on CUDA: {e}") from None
        if dev is not None:
            if isinstance(self.backend, CUDA) and dev.backend.device != self.backend.device:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is on CUDA:{dev.backend.device}, "
                                  f"not on {self.backend!r}")
            if dev._layout.usable:           # the checks below, passed once for this layout
                return dev
            if D.from_any(dev.dtype) is None:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' has unsupported dtype {dev.dtype}")
            if dev.ndim == 0 or dev.ndim > 8:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' must have 1 to 8 dimensions")
            if any(s % dev.dtype.itemsize for s in dev.strides):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' has strides that are not a "
                                  "multiple of its item size")
            return dev
        if isinstance(self.backend, CUDATarget):
            return KernelInstance._normalize(self, a, name, kind)
        if is_host_array(a):
            raise self._host_array_error(name)
        return KernelInstance._normalize(self, a, name, kind)

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, default_float=D.float64, idx32=_fits32(args, geom, wg))

    def _render(self, ir, ranges):
        from ..codegen.cuda import render_cuda
        return render_cuda(ir, group_plan(ir), ranges)

    def _sig(self, a, kind: str) -> tuple:
        # CUDA arrays may be strided; a Python int >= 2**63 is carried as uint64
        if kind != "constexpr" and isinstance(a, CUDAArray):
            return a._layout.sig                     # arg_sig's, computed once per layout
        return arg_sig(a, kind, CUDAArray, layout=True, wide_ints=True)

    def _key(self, norm, geom, ndim, ranges, wg) -> tuple:
        return super()._key(norm, geom, ndim, ranges, wg) + (_fits32(norm, geom, wg),)

    def _build(self, args, geom, ndim, ranges, wg):
        from ..codegen.cuda import param_layout
        drv = _driver()
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names = self._render(ir, ranges)
        dev = self.backend._dev
        with dev.lock:
            entry = dev.modules.get(src)
            if entry is None:
                image = compile_cuda(src, dev.arch, self.name, FASTMATH_NVRTC_OPTIONS if ir.fastmath else ())
                dev.activate()
                try:
                    mod = _ok(drv.cuModuleLoadData(image), "cuModuleLoadData")
                except RuntimeError as e:
                    raise CompileError(f"the CUDA driver could not load the compiled kernel '{self.name}' "
                                       f"({dev.arch}): {e}", ir.file, None, kernel=self.name) from None
                fn = _ok(drv.cuModuleGetFunction(mod, b"tk_kernel"), "cuModuleGetFunction")
                entry = dev.modules[src] = (mod, fn)
        return entry[1], ir, names, param_layout(ir)

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        """The full path: every check, then the launch through a plan (built and cached here),
        or, in debug mode, with an error buffer and :func:`pack_params`."""
        if not isinstance(self.backend, CUDA):
            raise BackendUnavailable("a CUDATarget only generates source; launch on tk.CUDA()")
        drv = _driver()
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return completed_event()
        fn, ir, names, layout = self._specialize(norm, geom, ndim, ranges, wg)
        dev = self.backend._dev
        grid, block = grid_dims(geom, ndim, wg)
        for k in range(3):
            if grid[k] > dev.max_grid[k]:
                raise LaunchError(f"kernel '{self.name}': {grid[k]} workgroups along hardware axis "
                                  f"{'xyz'[k]} exceed the device's limit of {dev.max_grid[k]}; use a larger "
                                  "workgroup in that dimension or put the largest dimension last")
        self._check_args(ir, norm, geom, ndim)
        if stream is not None and (not isinstance(stream, CUDAStream) or stream.backend != self.backend):
            raise LaunchError(f"kernel '{self.name}': the stream belongs to another backend")
        if not ir.debug:
            h_stream = stream.handle if stream is not None else dev.null
            geo = self._geometry(ndrange, workgroupsize, geom, ndim, ranges, wg, grid + block)
            plan = self._plan(geo, fn, ir, layout, args, norm)
            ev = plan(geo, h_stream, *norm) if plan is not None else None
            if ev is not None:
                return ev
        err = CUDAArray.empty(self.backend, (12,), np.int64) if ir.debug else None
        if err is not None:
            _ok(drv.cuMemsetD8(err._dptr(), 0, 96), "cuMemsetD8")
        buf, ptrs = pack_params(layout, bind_args(ir, norm), geom, err.ptr if err is not None else 0)
        h_stream = stream.handle if stream is not None else dev.null
        dev.activate()
        _ok(drv.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, h_stream,
                               int(ptrs.ctypes.data), 0), f"cuLaunchKernel of '{self.name}'")
        del buf, ptrs                           # the driver copied the arguments
        ev = CUDAEvent.record(dev, h_stream)
        if err is not None:
            ev.wait()
            check_debug_info(err.numpy(), names, ir.file, self.name)
        return ev

    # --- launch plans (see above) ----------------------------------------------------------

    def _geometry(self, ndrange, workgroupsize, geom, ndim, ranges, wg, dims) -> _Geo:
        """The _Geo of a checked launch geometry, cached when its key is exact."""
        gkey = _geo_key(ndrange, workgroupsize)
        geo = self._geos.get(gkey) if gkey is not None else None
        if geo is None:
            tkey = (ndim, ranges, wg, fits32((), geom, (), wg))
            token = self._tokens.get(tkey)
            if token is None:
                token = self._tokens.setdefault(tkey, object())
            geo = _Geo(token, tuple(geom[:3 * ndim]), tuple(dims))
            if gkey is not None:
                if len(self._geos) >= _MAX_CACHED:
                    self._geos.clear()
                self._geos[gkey] = geo
        return geo

    def _plan(self, geo: _Geo, fn, ir, layout, args, norm):
        """The launcher of these (normalized, checked) arguments, built once per plan key;
        None when the arguments have no key (then the caller packs with pack_params)."""
        key = [geo.token]
        try:
            for a, (_, kind) in zip(norm, self.kernel.params):
                if kind == "constexpr":
                    k = (a.__class__, a)
                    hash(k)
                elif isinstance(a, CUDAArray):
                    k = a._layout
                elif a.__class__ is int and a >= 1 << 63:
                    k = _WIDE_INT
                else:
                    k = a.__class__
                key.append(k)
        except TypeError:               # an unhashable constexpr
            return None
        key = tuple(key)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._build_plan(fn, ir, layout, norm)
            if plan is None:
                return None
            if len(self._plans) >= _MAX_CACHED:
                self._plans.clear()
            self._plans[key] = plan
        if self._pattern is None:
            self._install_fast(args, norm)
        return plan

    def _build_plan(self, fn, ir, layout, norm):
        """A launcher for ``layout`` (see :func:`pack_params`, whose bytes it writes): the
        argument block and kernelParams array, the shape/stride slots filled in now."""
        pos, nargs = {}, len(norm)
        for i, (p, a) in enumerate(zip(ir.params, norm)):
            if p[0] == "array":
                pos[p[1].name] = i
            elif p[0] == "scalar":
                pos[p[1]] = i
        fmts, values, convs, dyn, const = [], [], {}, [], []
        try:
            for j, (kind, det, ct) in enumerate(layout):
                if kind in ("start", "count", "step"):
                    if j != len(dyn):        # the geometry comes first, in order
                        return None
                    fmts.append(_slot(ct))
                    dyn.append(j)
                elif kind == "ptr":
                    i = pos[det.name]
                    fmts.append("Q")
                    values.append(f"a{i}._ptr")
                    dyn.append(j)
                elif kind == "scalar":
                    i = pos[det[0]]
                    fmt, conv = _scalar_slot(norm[i], det[1], ct)
                    fmts.append(fmt)
                    if conv is None:
                        values.append(f"a{i}")
                    else:
                        convs[f"c{i}"] = conv
                        values.append(f"c{i}(a{i})")
                    dyn.append(j)
                elif kind in ("shape", "stride"):
                    const.append(j)
                else:                        # "err" (debug) and anything unknown
                    return None
        except KeyError:
            return None
        st = struct.Struct("<" + "".join(fmts))
        n = len(layout)
        slot_of = {j: k for k, j in enumerate(dyn + const)}
        buf = (ctypes.c_uint64 * n)()
        base = ctypes.addressof(buf)
        bound = bind_args(ir, norm)
        for j in const:
            kind, det, ct = layout[j]
            a = bound[det[0].name]
            v = a.shape[det[1]] if kind == "shape" else a.strides[det[1]] // a.dtype.itemsize
            b = np.asarray(v).astype(_NP_PARAM[ct]).tobytes()
            ctypes.memmove(base + 8 * slot_of[j], b, len(b))
        params = (ctypes.c_void_p * n)(*[base + 8 * slot_of[j] for j in range(n)])
        src = _PLAN_SRC.format(convs="".join(f", {c}" for c in convs),
                               args="".join(f", a{i}" for i in range(nargs)),
                               values="".join(f", {v}" for v in values))
        launch = _generated(src)(st.pack_into, buf, fn, ctypes.addressof(params), self.backend._dev,
                                 threading.Lock(), f"cuLaunchKernel of '{self.name}'", *convs.values())
        launch.keep = (buf, params)          # the argument block lives as long as the launcher
        return launch

    def _install_fast(self, args, norm) -> None:
        """Install the fast function for this launch's argument pattern (the first pattern
        whose arguments need no normalizing: CUDAArrays, Python and NumPy scalars)."""
        keys = []
        for i, (a, n, (_, kind)) in enumerate(zip(args, norm, self.kernel.params)):
            if kind == "constexpr":
                keys.append(f"(a{i}.__class__, a{i})")
            elif a is not n:
                return
            elif isinstance(a, CUDAArray):
                keys.append(f"a{i}._layout")
            elif (a.__class__ in (float, bool) or (a.__class__ is int and a < 1 << 63)
                  or (isinstance(a, np.generic) and a.dtype.kind in "biuf")):
                keys.append(f"a{i}.__class__")
            else:
                return
        if len(args) != len(norm):
            return
        nargs = len(args)
        src = _FAST_SRC.format(unpack="".join(f"a{i}, " for i in range(nargs)).rstrip() or "()",
                               keys="".join(f"{k}, " for k in keys).rstrip(),
                               args="".join(f", a{i}" for i in range(nargs)))
        with self._lock:
            if self._pattern is None:
                self._fast = _generated(src)(self._geos, self._plans, self.backend, self.backend._dev.null,
                                             _geo_key)
                self._pattern = tuple(keys)


CUDA.instance_class = CUDAKernelInstance
CUDATarget.instance_class = CUDAKernelInstance
