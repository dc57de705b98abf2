"""The backend side of a driver-API runtime (generic: CUDA's driver API, HIP).

Both runtimes keep one shared device object per ordinal (:func:`shared_device`; it has
``activate()``, ``lock``, ``modules``, ``streams``, ``null``, ``max_threads``,
``max_grid`` and ``arch``), load each generated source's module once per device
(:func:`kernel_function`), check a launch's grid and stream the same way
(:func:`check_grid`, :func:`check_stream`), and copy between host and device memory with
the same rules (:class:`DriverBackend`). A runtime subclasses :class:`DriverBackend` with
its array, stream and event classes and its copy calls.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..argcheck import int_arg
from ..errors import BackendUnavailable, CompileError, LaunchError
from .base import Backend
from .device import debug_flag, same_shape, track_stream
from .driverstream import finish_orphans_within, finish_within, forget_orphans
from .hostarray import Array, as_host_ndarray
from .streams import completed_event, deadline_of, stream_priority


def shared_device(devices: dict, lock, ordinal: int, count: int, make, label: str):
    """The device object of ``ordinal`` in ``devices`` (made by ``make(ordinal)`` the first
    time, under ``lock``); BackendUnavailable when there is no such device or it cannot be
    used (``make`` raised RuntimeError). ``count``: the devices the runtime found."""
    if not 0 <= ordinal < count:
        raise BackendUnavailable(f"{label} device {ordinal} does not exist: this machine has {count} device(s)")
    with lock:
        dev = devices.get(ordinal)
        if dev is None:
            try:
                dev = devices[ordinal] = make(ordinal)
            except RuntimeError as e:
                raise BackendUnavailable(f"{label} device {ordinal} cannot be used: {e}") from None
    return dev


def kernel_function(dev, src: str, compile, load, get_function, what: str, name: str, file):
    """The ``tk_kernel`` function of generated source ``src`` on ``dev``: compiled
    (``compile()``, the image) and loaded (``load(image)``, then ``get_function(module)``)
    once per device and source. A module the driver (``what``) refuses is a CompileError."""
    with dev.lock:
        entry = dev.modules.get(src)
        if entry is None:
            image = compile()
            dev.activate()
            try:
                mod = load(image)
            except RuntimeError as e:
                raise CompileError(f"the {what} could not load the compiled kernel '{name}' ({dev.arch}): {e}",
                                   file, None, kernel=name) from None
            entry = dev.modules[src] = (mod, get_function(mod))
    return entry[1]


def check_grid(name: str, grid: tuple, max_grid: tuple) -> None:
    """LaunchError when the grid has more workgroups along a hardware axis than the device allows."""
    for k in range(3):
        if grid[k] > max_grid[k]:
            raise LaunchError(f"kernel '{name}': {grid[k]} workgroups along hardware axis "
                              f"{'xyz'[k]} exceed the device's limit of {max_grid[k]}; use a larger "
                              "workgroup in that dimension or put the largest dimension last")


def check_stream(name: str, stream, stream_type: type, backend) -> None:
    """LaunchError when ``stream`` (None: the default stream) is not one of ``backend``'s."""
    if stream is not None and (not isinstance(stream, stream_type) or stream.backend != backend):
        raise LaunchError(f"kernel '{name}': the stream belongs to another backend")


class DriverBackend(Backend):
    """A GPU of a driver-API runtime: ``device`` (the ordinal), ``debug`` (bounds-check every
    array access; also ``TK_DEBUG=1``).

    Subclasses set ``name``, ``array_type``, ``stream_type``, ``event_type`` and define
    ``_device_for(ordinal)``, ``_adopt(obj)`` (another library's array on such a device as
    an ``array_type``, or None), ``_htod(address, host_address, nbytes)`` (a synchronous
    host-to-device copy), ``_copy_dtod(dst, src, h_stream)``, ``_copy_htod(dst, h, stream,
    h_stream)`` (``tk.copyto`` from the host: when ``h`` may be released) and
    ``_device_synchronize()``."""
    is_host = False
    supports_float64 = True
    array_type: type = None
    stream_type: type = None
    event_type: type = None

    def __init__(self, device: int = 0, debug: bool | None = None):
        self.device = int_arg(f"tk.{type(self).__name__}", "device", device, 0)
        self.debug = debug_flag(debug, self)
        self._dev = self._device_for(self.device)
        self.max_workgroupsize = self._dev.max_threads

    @property
    def device_name(self) -> str:
        return self._dev.name

    def key(self) -> tuple:
        return (self.name, self.device, self.debug)

    def supports(self, dtype) -> bool:
        return D.queried(dtype) is not None

    # --- memory -----------------------------------------------------------------------------

    def array_from_host(self, h: np.ndarray):
        h = np.require(h, requirements="C")
        a = self.array_type.empty(self, h.shape, h.dtype)
        if h.nbytes:
            self._dev.activate()
            self._htod(a.ptr, h.ctypes.data, h.nbytes)
        return a

    def copy(self, dst, src, stream=None):
        """tk.copyto with an array of this runtime on either side (device<->device,
        host->device, device->host)."""
        A, label = self.array_type, self.name
        self._dev.activate()
        h_stream = stream.handle if stream is not None else self._dev.null
        if not isinstance(src, (A, np.ndarray)) and not (isinstance(src, Array) and src._host is not None):
            src = self._adopt(src) or src           # another library's device array: no host trip
        if isinstance(dst, A) and isinstance(src, A):
            if src.backend.device != dst.backend.device:
                raise ValueError(f"tk.copyto: src is on {label}:{src.backend.device}, "
                                 f"dst on {label}:{dst.backend.device}")
            same_shape(dst, src)
        if isinstance(dst, A) and isinstance(src, A) and dst.dtype == src.dtype and \
                dst.is_contiguous and src.is_contiguous:
            if src.nbytes and src.ptr != dst.ptr:                # onto itself: nothing to copy
                self._copy_dtod(dst, src, h_stream)
        elif isinstance(dst, A):        # from the host; or another dtype or a strided source: through the host, as OpenCL
            h = as_host_ndarray(src) if not isinstance(src, Array) else src.numpy()
            h = np.ascontiguousarray(np.asarray(src) if h is None else h, dtype=dst.dtype)
            same_shape(dst, h)
            if not dst.is_contiguous:
                raise TypeError(f"tk.copyto into a non-contiguous {label} array is not supported")
            if h.nbytes:
                self._copy_htod(dst, h, stream, h_stream)
        else:
            h = as_host_ndarray(dst)
            if h is None:
                raise TypeError(f"tk.copyto: dst must be a tk.Array or a host array, got {type(dst).__name__}")
            same_shape(h, src)
            if stream is not None:
                stream.synchronize()
            np.copyto(h, src.numpy(), casting="same_kind")
            return completed_event()
        ev = self.event_type.record(self._dev, h_stream)
        if stream is None:                    # tk.copyto without a stream is done when it returns
            ev.wait()
        return ev

    # --- streams ------------------------------------------------------------------------------

    def stream(self, priority: int = 0):
        return track_stream(self._dev, self.stream_type(self, stream_priority(priority)))

    def synchronize(self, timeout: float | None = None) -> None:
        self._dev.activate()
        if timeout is None:
            orphans = list(self._dev.orphans)
            self._device_synchronize()                 # the whole device: dropped streams' work too
            forget_orphans(self._dev, orphans)
            return
        with self._dev.lock:
            streams = [s.handle for s in list(self._dev.streams)]
        deadline = deadline_of(timeout)
        finish_within(self.event_type, self._dev, [self._dev.null] + streams, timeout, repr(self))
        finish_orphans_within(self._dev, deadline, timeout, repr(self))
