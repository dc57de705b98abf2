"""The NVIDIA CUDA runtime (``tk.CUDA(device=0)``, ``DEV=CUDA``, ``DEV=CUDA:1``).

Code generation (:mod:`tinykernels.codegen.cuda`) and compilation (:func:`compile_cuda`,
NVRTC through ``cuda.bindings.nvrtc``) need no GPU and are tested in CI on every machine
with NVRTC installed. Everything else here talks to the CUDA driver API through
``cuda.bindings.driver`` and needs an NVIDIA driver and device:

* one primary context per device (``cuDevicePrimaryCtxRetain``), made current on each
  thread that uses it;
* modules from cubins (``cuModuleLoadData``), one per generated source, kernels launched
  with ``cuLaunchKernel`` and a packed argument array (:func:`~tinykernels.codegen.cuda.param_layout`),
  prepared once per argument layout and reused by later launches ("launch plans" in
  ``cuda_launch.py``);
* device arrays (:class:`CUDAArray`) from ``cuMemAlloc``, copies with ``cuMemcpy*``;
  they export ``__cuda_array_interface__`` and DLPack, and PyTorch, CuPy and JAX arrays on
  the device are taken zero-copy;
* streams are ``cuStreamCreateWithPriority`` streams, events are CUDA events.

Compiled kernels are cached on disk under the CPU's cache directory
(``TK_CACHE_DIR``/cuda), keyed by the source, the NVRTC version, the architecture and
the options, written atomically and sealed (a damaged file is compiled again).

The runtime is split by idea; this module is the backend's entry (what ``tk.CUDA`` and
``DEV=CUDA`` load) and re-exports the names of the others:

* ``cuda_driver.py``: loading ``cuda.bindings.driver``, its error codes, cuInit, probing;
* ``cuda_context.py``: one primary context per device, its limits and module cache;
* ``cuda_memory.py``: allocations and :class:`CUDAArray`;
* ``cuda_streams.py``: :class:`CUDAStream` and :class:`CUDAEvent` (pooled handles), on
  ``driverstream.py``'s generic stream and event;
* ``cuda_launch.py``: :class:`CUDAKernelInstance`: compiling, loading, launch plans;
* ``nvrtc.py`` (compiling, no GPU needed) and ``dlpack.py`` (DLPack capsules);
* generic pieces any driver-API runtime can use: ``arraylayout.py`` (interned array
  layouts), ``paramblock.py`` (the ``kernelParams`` argument block), ``launchplan.py``
  (exact cache keys of launch plans).

What is not CUDA-specific is shared with the ROCm runtime: ``driverbackend.py`` (the
backend's copies, streams and synchronization, device registry, module loading and launch
checks), ``drivermemory.py`` (allocations and arrays) and ``driverstream.py`` (streams and
events).

This module holds the backend objects (:class:`CUDA`, the device-less :class:`CUDATarget`)
and the adoption of other libraries' CUDA arrays, which needs them.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Backend
from .cuda_context import availability, device_for
from .cuda_driver import checked, driver, init_driver
from .cuda_launch import CUDAKernelInstance
from .cuda_memory import CUDAArray
from .cuda_streams import CUDAEvent, CUDAStream
from .device import SourceTarget, debug_flag
from .dlpack import _EXPORTS, _from_dlpack_capsule, take_capsule  # noqa: F401 (_EXPORTS: the tests count exports)
from .driverbackend import DriverBackend
from .hostarray import _DL_CUDA, _DL_CUDA_MANAGED

# Re-exported: the names of the runtime's other modules that callers reach through this one
# (tinykernels.runtime.cuda.compile_cuda, .pack_params, ...).
from .cuda_driver import driver as _driver  # noqa: F401 (tinykernels.torch wraps torch's streams with it)
from .nvrtc import (FASTMATH_NVRTC_OPTIONS, HINT, NVRTC_OPTIONS, STATS, choose_arch, compile_cuda,  # noqa: F401
                    cubin_path, normalize_arch, nvrtc_available, nvrtc_version, supported_archs)
from .paramblock import bind_args, grid_dims, pack_params  # noqa: F401


# ----------------------------------------------------------------------------- backend

class CUDA(DriverBackend):
    """An NVIDIA GPU through the CUDA driver API; kernels are compiled with NVRTC.

    ``device``: the device ordinal. ``debug``: bounds-check every array access (also
    ``TK_DEBUG=1``)."""
    name = "CUDA"
    dev = "CUDA"
    can_launch = True
    array_type = CUDAArray
    stream_type = CUDAStream
    event_type = CUDAEvent

    @staticmethod
    def _device_for(ordinal: int):
        return device_for(ordinal)

    @property
    def arch(self) -> str:
        """What kernels are compiled for: ``sm_XY`` (cubin) or ``compute_XY`` (PTX)."""
        return self._dev.arch

    def __repr__(self) -> str:
        return f"tk.CUDA(device={self.device}{', debug=True' if self.debug else ''}) # {self.device_name}"

    @staticmethod
    def available() -> tuple:
        """(True, what) when device 0 can run kernels, else (False, why). Creates no context."""
        return availability()

    def adopt_array(self, obj) -> CUDAArray | None:
        """``obj`` as a CUDAArray of this device's backend when it is a CUDA array (see
        :func:`as_cuda_array`), else None."""
        return as_cuda_array(obj, self)

    # --- what DriverBackend asks of the driver -----------------------------------------------

    @staticmethod
    def _adopt(obj) -> CUDAArray | None:
        return as_cuda_array(obj)             # a torch/CuPy/JAX array on a CUDA device

    @staticmethod
    def _htod(ptr: int, host: int, nbytes: int) -> None:
        checked(driver().cuMemcpyHtoD(driver().CUdeviceptr(ptr), host, nbytes), "cuMemcpyHtoD")

    @staticmethod
    def _copy_dtod(dst: CUDAArray, src: CUDAArray, h_stream) -> None:
        checked(driver().cuMemcpyDtoDAsync(dst._dptr(), src._dptr(), src.nbytes, h_stream), "cuMemcpyDtoDAsync")

    @staticmethod
    def _copy_htod(dst: CUDAArray, h: np.ndarray, stream, h_stream) -> None:
        # pageable host memory: the call returns once the data is staged, so h may go
        checked(driver().cuMemcpyHtoDAsync(dst._dptr(), h.ctypes.data, h.nbytes, h_stream), "cuMemcpyHtoDAsync")

    @staticmethod
    def _device_synchronize() -> None:
        checked(driver().cuCtxSynchronize(), "cuCtxSynchronize")

    instance_class = None   # set below


class CUDATarget(SourceTarget):
    """What the code generator needs to know about CUDA, with no device: used by
    ``kernel.source("CUDA", ...)`` on machines without a GPU. It cannot launch."""
    name = "CUDA"
    dev = "CUDA"
    supports_float64 = True
    max_workgroupsize = 1024

    @staticmethod
    def adopt_array(obj) -> CUDAArray | None:
        """``obj`` as a CUDAArray when it is a CUDA array (of its own device's backend)."""
        return as_cuda_array(obj)

    instance_class = None   # set below


def cuda_source(kernel, *args, ndrange, workgroupsize=None, debug=None) -> str:
    """The CUDA C++ translation unit of ``kernel`` for these arguments, on any machine.

    Arrays may be NumPy arrays (only their dtype, rank, layout and size matter), CUDA
    arrays, or any array the CUDA backend accepts."""
    return kernel(CUDATarget(debug)).source(*args, ndrange=ndrange, workgroupsize=workgroupsize)
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
    drv = driver()
    init_driver()
    if not ptr:
        return 0
    return int(checked(drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
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
            checked(driver().cuStreamSynchronize(driver().CUstream(int(st))), "cuStreamSynchronize")
        b = _backend_for(backend, _pointer_device(ptr))
        return CUDAArray(b, ptr, shape, dt, strides, obj)
    if hasattr(obj, "__dlpack__") and hasattr(type(obj), "__dlpack_device__"):
        t, i = obj.__dlpack_device__()
        if int(t) not in (_DL_CUDA, _DL_CUDA_MANAGED):
            return None
        b = _backend_for(backend, int(i))        # BackendUnavailable before the capsule is taken
        cap = take_capsule(obj, stream=1)   # ordered with the legacy default stream
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

CUDA.instance_class = CUDAKernelInstance
CUDATarget.instance_class = CUDAKernelInstance
