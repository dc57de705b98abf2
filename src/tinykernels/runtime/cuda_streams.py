"""CUDA streams and events.

Streams are ``cuStreamCreateWithPriority`` streams (blocking: ordered with the legacy
default stream, so ``.numpy()`` sees their work); events are CUDA events without timing,
whose handles go back to their device's pool when the event is collected and are recorded
again by later launches (:func:`record_event`).
"""
from __future__ import annotations

import threading

from .cuda_context import CUDADevice
from .cuda_driver import SUCCESS, checked, driver, error_string
from .device import DeviceEvent
from .streams import Event, check_recorded, completed_event, deadline_of, poll_until

EVENT_POOL = 256             # CUevent handles kept per device for reuse


class CUDAEvent(DeviceEvent):
    """A CUDA event recorded on a stream (None: already complete)."""
    __slots__ = ("handle", "_dev")

    def __init__(self, handle, dev=None):
        super().__init__()
        self.handle, self._dev = handle, dev

    @classmethod
    def record(cls, dev: CUDADevice, h_stream) -> "CUDAEvent":
        dev.activate()
        return record_event(driver(), dev, h_stream)

    def done(self) -> bool:
        if self.handle is None:
            return True
        self._dev.activate()
        err, = driver().cuEventQuery(self.handle)
        if int(err) == 0:
            return True
        if int(err) == int(driver().CUresult.CUDA_ERROR_NOT_READY):
            return False
        raise RuntimeError(f"cuEventQuery failed: {error_string(err)}")

    def wait(self, timeout=None) -> None:
        if self.handle is None:
            return
        if timeout is not None:
            self._wait_done(timeout)
            return
        self._dev.activate()
        checked(driver().cuEventSynchronize(self.handle), "cuEventSynchronize")

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
                    driver().cuEventDestroy(h)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<tk.Event (CUDA) {'done' if self.done() else 'pending'}>"



def finish_within(dev: CUDADevice, handles, timeout: float, what: str) -> None:
    """Wait for the work queued so far on each stream, but ``TimeoutError`` after ``timeout`` s:
    an event recorded on each, polled."""
    deadline = deadline_of(timeout)
    for h in handles:
        ev = CUDAEvent.record(dev, h)
        if not poll_until(ev.done, deadline):
            raise TimeoutError(f"{what}: work still running after {timeout} s")


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


class CUDAStream:
    """A CUDA stream. ``priority``: tk.High (> 0) is the device's greatest stream priority;
    tk.Normal and tk.Low are its least, the default streams' (CUDA has none below)."""

    def __init__(self, backend, priority: int = 0):
        drv = driver()
        dev = backend._dev
        self.backend, self.priority = backend, priority
        cuda_prio = dev.prio_greatest if priority > 0 else dev.prio_least
        dev.activate()
        # flags 0: a blocking stream, ordered with the legacy default stream (so .numpy() sees its work)
        self.handle = checked(drv.cuStreamCreateWithPriority(0, cuda_prio), "cuStreamCreateWithPriority")
        self.cuda_priority = cuda_prio

    def wait(self, event) -> None:
        """Later work on this stream waits for ``event`` (on the device, not the host)."""
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        if isinstance(event, CUDAEvent) and event.handle is not None:
            self.backend._dev.activate()
            checked(driver().cuStreamWaitEvent(self.handle, event.handle, 0), "cuStreamWaitEvent")
        elif not event.done():
            event.wait()

    def synchronize(self, timeout: float | None = None) -> None:
        self.backend._dev.activate()
        if timeout is None:
            checked(driver().cuStreamSynchronize(self.handle), "cuStreamSynchronize")
        else:
            finish_within(self.backend._dev, [self.handle], timeout, "the CUDA stream")

    def submit(self, fn) -> Event:
        """Run a host function in stream order (after the stream's queued work)."""
        self.synchronize()
        fn()
        return completed_event()

    def __del__(self):
        try:
            driver().cuStreamDestroy(self.handle)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<tk.Stream (CUDA:{self.backend.device}) priority={self.priority}>"


