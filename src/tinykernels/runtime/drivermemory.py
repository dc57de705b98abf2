"""Device memory of a driver-API runtime (generic: CUDA's driver API, HIP): allocations
freed with the last array using them, and the arrays themselves.

A :class:`DriverArray` is an address in a device's global memory, a shape, a dtype and
byte strides (any: views of other libraries' tensors keep theirs); it owns an
:class:`DriverAllocation` or holds the foreign object alive, copies itself to the host and
exports DLPack. A runtime subclasses both with its calls (``_malloc``/``_free``,
``_to_host``, ``_consumer_waits``) and its names (``label``, ``dl_device_type``).
"""
from __future__ import annotations

import numpy as np

from .device import DeviceArray, c_strides
from .dlpack import _dlpack_capsule
from .memspan import byte_span


class DriverAllocation:
    """Device memory of ``nbytes`` (at least 1) on ``dev``, freed when the last array using it
    goes. Subclasses: ``_malloc(nbytes) -> address`` and ``_free(address)``."""
    __slots__ = ("ptr", "dev", "__weakref__")

    def __init__(self, dev, nbytes: int):
        dev.activate()
        self.dev = dev
        self.ptr = int(self._malloc(max(int(nbytes), 1)))

    def __del__(self):
        try:
            self.dev.activate()
            self._free(self.ptr)
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass


class DriverArray(DeviceArray):
    """An array in a device's global memory: its own allocation (:meth:`empty`), or a
    zero-copy view of another library's device array (``owner`` keeps it alive). Any strides.

    Subclasses set ``label`` (``"CUDA"``), ``dl_device_type`` (DLPack's device type),
    ``allocation`` (their :class:`DriverAllocation`), ``dlpack_ordered`` (the DLPack
    ``stream`` values that are already ordered with the default stream) and define
    ``_to_host(dst_address, src_address, nbytes)`` and ``_consumer_waits(stream)`` (the
    consumer's stream waits for the work queued on the default stream)."""
    __slots__ = ("_ptr", "_strides", "_owner")
    label = "?"
    dl_device_type = 0
    allocation = DriverAllocation
    dlpack_ordered: tuple = ()

    def __init__(self, backend, ptr: int, shape, dtype, strides=None, owner=None):
        self._host = None
        self._backend = backend
        self._ptr = int(ptr)
        self._shape = tuple(int(n) for n in shape)
        self._dtype = np.dtype(dtype)
        self._strides = tuple(int(s) for s in strides) if strides is not None else c_strides(self._shape, self._dtype)
        self._owner = owner              # keeps the memory alive (an allocation or the foreign object)

    @classmethod
    def empty(cls, backend, shape, dtype):
        dt = np.dtype(dtype)
        alloc = cls.allocation(backend._dev, int(np.prod(shape)) * dt.itemsize)
        return cls(backend, alloc.ptr, shape, dt, None, alloc)

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
        """A host copy. It is ordered after work on the default stream and every blocking
        stream (tinykernels' own); synchronize other libraries' streams first."""
        lo, hi = self._span()
        if hi - lo == 0:
            return np.empty(self._shape, self._dtype)
        raw = np.empty(hi - lo, np.uint8)
        self._backend._dev.activate()
        self._to_host(raw.ctypes.data, self._ptr + lo, hi - lo)
        view = np.ndarray(self._shape, self._dtype, buffer=raw, offset=-lo, strides=self._strides)
        return view.copy()                  # (np.ascontiguousarray would make a 0-d array 1-d)

    @property
    def __array_interface__(self):
        raise AttributeError(f"a tk.Array on a {self.label} device has no host address; use .numpy()")

    def __dlpack_device__(self):
        return (self.dl_device_type, self._backend.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this memory (``copy=True``: of a new copy on the same device,
        made before returning; ``dl_device=(kDLCPU, 0)``: of a host copy). ``stream``: the
        consumer's stream; work queued on the default stream is ordered before it."""
        cap = self._host_capsule(dl_device, copy, max_version)
        if cap is not None:
            return cap
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"tk.Array on {self.label}:{self._backend.device} cannot be exported to "
                              f"device {dl_device}")
        src = self
        if copy:
            src = type(self).empty(self._backend, self._shape, self._dtype)
            self._backend.copy(src, self if self.is_contiguous else self.numpy())   # done when it returns
        if stream is not None and stream not in self.dlpack_ordered:
            src._consumer_waits(int(stream))
        return _dlpack_capsule(src, max_version, copied=bool(copy))
