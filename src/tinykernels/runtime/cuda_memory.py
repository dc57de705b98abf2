"""CUDA device memory: allocations and :class:`CUDAArray`.

A CUDAArray is an address in a device's global memory plus an interned
:class:`~tinykernels.runtime.arraylayout.ArrayLayout`: its own allocation
(``cuMemAlloc``, freed with the last array using it) or a zero-copy view of another
library's CUDA array (runtime/cuda.py adopts those). Any strides. It exports
``__cuda_array_interface__`` and DLPack. What CUDA shares with HIP is in
runtime/drivermemory.py.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .arraylayout import layout_of
from .cuda_driver import checked, driver
from .cuda_streams import CUDAEvent
from .drivermemory import DriverAllocation, DriverArray
from .hostarray import _DL_CUDA


class Allocation(DriverAllocation):
    """Device memory from cuMemAlloc, freed when the last array using it goes."""
    __slots__ = ()

    @staticmethod
    def _malloc(nbytes: int) -> int:
        return checked(driver().cuMemAlloc(nbytes), "cuMemAlloc")

    def _free(self, ptr: int) -> None:
        drv = self.dev.drv
        drv.cuMemFree(drv.CUdeviceptr(ptr))


class CUDAArray(DriverArray):
    """An array in a CUDA device's global memory: its own allocation, or a zero-copy view
    of another library's CUDA array (PyTorch, CuPy, JAX...). Any strides."""
    __slots__ = ("_layout",)
    label = "CUDA"
    dl_device_type = _DL_CUDA
    allocation = Allocation
    dlpack_ordered = (1, 2, -1)          # the legacy and per-thread default streams, and "no sync"

    def __init__(self, backend, ptr: int, shape, dtype, strides=None, owner=None):
        super().__init__(backend, ptr, shape, dtype, strides, owner)
        self._layout = layout_of(self._dtype, self._shape, self._strides, getattr(backend, "device", None))

    def _dptr(self):
        return driver().CUdeviceptr(self._ptr)

    def _to_host(self, dst: int, src: int, nbytes: int) -> None:
        checked(driver().cuMemcpyDtoH(dst, driver().CUdeviceptr(src), nbytes), "cuMemcpyDtoH")

    def _consumer_waits(self, stream: int) -> None:
        ev = CUDAEvent.record(self._backend._dev, self._backend._dev.null)
        checked(driver().cuStreamWaitEvent(driver().CUstream(stream), ev.handle, 0), "cuStreamWaitEvent")

    @property
    def __cuda_array_interface__(self) -> dict:
        d = D.from_any(self._dtype)
        typestr = self._dtype.str
        if d is not None and d.is_storage_only:          # bf16/fp8: raw bits ('<u2' / '|u1')
            typestr = np.dtype(f"u{self._dtype.itemsize}").str
        return {"shape": self._shape, "typestr": typestr, "data": (self._ptr, False), "version": 3,
                "strides": None if self.is_contiguous else self._strides, "stream": 1}
