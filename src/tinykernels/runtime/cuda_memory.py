"""CUDA device memory: allocations and :class:`CUDAArray`.

A CUDAArray is an address in a device's global memory plus an interned
:class:`~tinykernels.runtime.arraylayout.ArrayLayout`: its own allocation
(``cuMemAlloc``, freed with the last array using it) or a zero-copy view of another
library's CUDA array (runtime/cuda.py adopts those). Any strides. It exports
``__cuda_array_interface__`` and DLPack.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .arraylayout import layout_of
from .cuda_context import CUDADevice
from .cuda_driver import checked, driver
from .cuda_streams import CUDAEvent
from .device import DeviceArray, c_strides
from .dlpack import _dlpack_capsule
from .hostarray import _DL_CUDA
from .memspan import byte_span


class Allocation:
    """Device memory from cuMemAlloc, freed when the last array using it goes."""
    __slots__ = ("ptr", "dev", "__weakref__")

    def __init__(self, dev: CUDADevice, nbytes: int):
        dev.activate()
        self.dev = dev
        self.ptr = int(checked(driver().cuMemAlloc(max(int(nbytes), 1)), "cuMemAlloc"))

    def __del__(self):
        try:
            self.dev.activate()
            driver().cuMemFree(driver().CUdeviceptr(self.ptr))
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass


class CUDAArray(DeviceArray):
    """An array in a CUDA device's global memory: its own allocation, or a zero-copy view
    of another library's CUDA array (PyTorch, CuPy, JAX...). Any strides."""
    __slots__ = ("_ptr", "_strides", "_owner", "_layout")

    def __init__(self, backend, ptr: int, shape, dtype, strides=None, owner=None):
        self._host = None
        self._backend = backend
        self._ptr = int(ptr)
        self._shape = tuple(int(n) for n in shape)
        self._dtype = np.dtype(dtype)
        self._strides = tuple(int(s) for s in strides) if strides is not None else c_strides(self._shape, self._dtype)
        self._owner = owner              # keeps the memory alive (an _Allocation or the foreign object)
        self._layout = layout_of(self._dtype, self._shape, self._strides, getattr(backend, "device", None))

    @classmethod
    def empty(cls, backend, shape, dtype) -> "CUDAArray":
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        alloc = Allocation(backend._dev, n)
        return cls(backend, alloc.ptr, shape, dt, None, alloc)

    def _dptr(self):
        return driver().CUdeviceptr(self._ptr)

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
        return byte_span(0, self._shape, self._strides, self._dtype.itemsize)

    def numpy(self) -> np.ndarray:
        """A host copy. It is ordered after work on the legacy default stream and every
        blocking stream (tinykernels' own); synchronize other libraries' streams first."""
        dev = self._backend._dev
        lo, hi = self._span()
        if hi - lo == 0:
            return np.empty(self._shape, self._dtype)
        raw = np.empty(hi - lo, np.uint8)
        dev.activate()
        checked(driver().cuMemcpyDtoH(raw.ctypes.data, driver().CUdeviceptr(self._ptr + lo), hi - lo), "cuMemcpyDtoH")
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
            checked(driver().cuStreamWaitEvent(driver().CUstream(int(stream)), ev.handle, 0), "cuStreamWaitEvent")
        return _dlpack_capsule(self)


