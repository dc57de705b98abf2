"""CUDA streams and events.

Streams are ``cuStreamCreateWithPriority`` streams (blocking: ordered with the legacy
default stream, so ``.numpy()`` sees their work); events are CUDA events without timing,
whose handles go back to their device's pool when the event is collected and are recorded
again by later launches (:func:`record_event`). What CUDA shares with HIP is in
runtime/driverstream.py.
"""
from __future__ import annotations

import threading

from .cuda_context import CUDADevice
from .cuda_driver import SUCCESS, checked, driver, error_string
from .driverstream import DriverEvent, DriverStream, finish_within as _finish_within

EVENT_POOL = 256             # CUevent handles kept per device for reuse


class CUDAEvent(DriverEvent):
    """A CUDA event recorded on a stream (None: already complete)."""
    __slots__ = ("handle", "_dev")
    label = "CUDA"

    @classmethod
    def record(cls, dev: CUDADevice, h_stream) -> "CUDAEvent":
        dev.activate()
        return record_event(dev.drv, dev, h_stream)

    def _query(self) -> bool:
        self._dev.activate()
        drv = self._dev.drv
        err, = drv.cuEventQuery(self.handle)
        if int(err) == 0:
            return True
        if int(err) == int(drv.CUresult.CUDA_ERROR_NOT_READY):
            return False
        raise RuntimeError(f"cuEventQuery failed: {error_string(err)}")

    def _synchronize(self) -> None:
        self._dev.activate()
        checked(self._dev.drv.cuEventSynchronize(self.handle), "cuEventSynchronize")

    def __del__(self):
        # the handle goes back to its device's pool (nothing can wait on this event any more;
        # recording it again overwrites its state), or is destroyed when the pool is full
        try:
            h = self.handle
            if h is not None:
                pool = self._dev.events if self._dev is not None else None
                if pool is not None and len(pool) < EVENT_POOL:
                    pool.append(h)
                else:
                    (self._dev.drv if self._dev is not None else driver()).cuEventDestroy(h)
        except Exception:  # noqa: BLE001
            pass


def finish_within(dev: CUDADevice, handles, timeout: float, what: str) -> None:
    """Wait for the work queued so far on each stream, but ``TimeoutError`` after ``timeout`` s
    (:func:`~tinykernels.runtime.driverstream.finish_within` with CUDA events)."""
    _finish_within(CUDAEvent, dev, handles, timeout, what)


def record_event(drv, dev: CUDADevice, h_stream) -> CUDAEvent:
    """A CUDAEvent recorded on ``h_stream`` (the context current): a pooled handle or a new one."""
    try:
        ev = dev.events.pop()
    except IndexError:
        ev = checked(drv.cuEventCreate(dev.event_flags), "cuEventCreate")
    res = drv.cuEventRecord(ev, h_stream)
    if res != SUCCESS:
        dev.events.append(ev)
        checked(res, "cuEventRecord")
    return new_event(ev, dev)


_HELD = threading.Lock()      # every CUDAEvent's Event._lock: held for good, as a fresh
_HELD.acquire()               # Event's is until its job finishes (a CUDAEvent has no job)
_object_new = object.__new__


def new_event(handle, dev: CUDADevice) -> CUDAEvent:
    """``CUDAEvent(handle, dev)`` without the calls: the fields Event.__init__ sets, with the
    shared held lock (a launch makes one event; tests check the fields match)."""
    ev = _object_new(CUDAEvent)
    ev._lock, ev._done, ev._exc, ev._tb, ev._waited, ev._synced, ev._state, ev._seq = \
        _HELD, False, None, None, False, False, None, 0
    ev.handle, ev._dev = handle, dev
    return ev


class CUDAStream(DriverStream):
    """A CUDA stream (``cuStreamCreateWithPriority``, flags 0: a blocking stream, ordered with
    the legacy default stream, so .numpy() sees its work). ``priority``: tk.High (> 0) is the
    device's greatest stream priority; tk.Normal and tk.Low are its least, the default
    streams' (CUDA has none below)."""
    label = "CUDA"
    event_class = CUDAEvent

    @property
    def cuda_priority(self) -> int:
        return self.native_priority

    def _create(self, native_priority: int):
        return checked(driver().cuStreamCreateWithPriority(0, native_priority), "cuStreamCreateWithPriority")

    def _wait_event(self, handle) -> None:
        checked(self.backend._dev.drv.cuStreamWaitEvent(self.handle, handle, 0), "cuStreamWaitEvent")

    def _synchronize(self) -> None:
        checked(self.backend._dev.drv.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def _destroy(self) -> None:
        self.backend._dev.drv.cuStreamDestroy(self.handle)
