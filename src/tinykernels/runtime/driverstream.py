"""Streams and events of a driver-API runtime (generic: CUDA's driver API, HIP).

Both APIs have the same model: priority streams that are blocking (ordered with the
device's default stream, so ``.numpy()`` sees their work), events recorded on a stream
and queried or waited on, and a stream that waits for an event on the device. A runtime
subclasses :class:`DriverEvent` and :class:`DriverStream` with its calls (``_query``,
``_synchronize``, ``_create`` ...); what the classes do with them is written once here.
The device object they take (``dev``) has ``activate()``, ``prio_least`` and
``prio_greatest``.
"""
from __future__ import annotations

from .device import DeviceEvent
from .streams import Event, check_recorded, completed_event, deadline_of, poll_until


def stream_priority(priority: int, least: int, greatest: int) -> int:
    """The native priority of a stream of tinykernels ``priority``: tk.High (> 0) is the
    device's greatest; tk.Normal and tk.Low are its least, the default streams' (neither API
    has one below)."""
    return greatest if priority > 0 else least


def finish_within(event_class, dev, handles, timeout: float, what: str) -> None:
    """Wait for the work queued so far on each stream of ``handles``, but ``TimeoutError``
    after ``timeout`` s: an event (``event_class.record``) recorded on each, polled."""
    deadline = deadline_of(timeout)
    for h in handles:
        if not poll_until(event_class.record(dev, h).done, deadline):
            raise TimeoutError(f"{what}: work still running after {timeout} s")


def orphan_work(dev, event_class, handle) -> None:
    """Before a dropped stream is destroyed (its queued work still completes, as both APIs
    document), record an event on it in ``dev.orphans`` (a deque: appended without a lock, since
    this runs in ``__del__``, whenever the garbage collector does), so that
    ``tk.synchronize(backend, timeout=)`` waits for that work too (the device-wide synchronize
    without a timeout does anyway). Beyond 64, the oldest finished ones are forgotten."""
    orphans = dev.orphans
    orphans.append(event_class.record(dev, handle))
    while len(orphans) > 64 and orphans[0].done():
        forget_orphans(dev, [orphans[0]])


def finish_orphans_within(dev, deadline, timeout: float, what: str) -> None:
    """Poll the events of dropped streams' work (``orphan_work``) until ``deadline``."""
    orphans = list(dev.orphans)
    for ev in orphans:
        if not poll_until(ev.done, deadline):
            raise TimeoutError(f"{what}: work still running after {timeout} s")
    forget_orphans(dev, orphans)


def forget_orphans(dev, done) -> None:
    """Drop the events in ``done`` from ``dev.orphans`` (their work has finished)."""
    for ev in done:
        try:
            dev.orphans.remove(ev)
        except ValueError:         # another thread forgot it first
            pass


class DriverEvent(DeviceEvent):
    """An event of a driver API recorded on a stream (``handle`` None: already complete).
    Subclasses: ``label``, ``record(dev, h_stream)``, ``_query()`` (done?) and
    ``_synchronize()`` (block until done)."""
    __slots__ = ()
    label = "?"

    def __init__(self, handle, dev=None):
        super().__init__()
        self.handle, self._dev = handle, dev

    def done(self) -> bool:
        return self.handle is None or self._query()

    def wait(self, timeout=None) -> None:
        if self.handle is None:
            return
        if timeout is not None:
            self._wait_done(timeout)
            return
        self._synchronize()

    def __repr__(self) -> str:
        return f"<tk.Event ({self.label}) {'done' if self.done() else 'pending'}>"


class DriverStream:
    """A blocking stream of a driver API, of priority ``priority`` (:func:`stream_priority`;
    ``native_priority``: the API's number). Subclasses: ``label``, ``event_class`` and the
    calls ``_create(native_priority)``, ``_wait_event(handle)``, ``_synchronize()``,
    ``_destroy()``."""
    label = "?"
    event_class: type = DriverEvent

    def __init__(self, backend, priority: int = 0):
        dev = backend._dev
        self.backend, self.priority = backend, priority
        self.native_priority = stream_priority(priority, dev.prio_least, dev.prio_greatest)
        dev.activate()
        self.handle = self._create(self.native_priority)

    def wait(self, event) -> None:
        """Later work on this stream waits for ``event`` (on the device, not the host)."""
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        if isinstance(event, self.event_class) and event.handle is not None:
            self.backend._dev.activate()
            self._wait_event(event.handle)
        else:
            event.wait()            # another backend's event: wait on the host, raising its unreported error (docs: streams)

    def synchronize(self, timeout: float | None = None) -> None:
        self.backend._dev.activate()
        if timeout is None:
            self._synchronize()
        else:
            finish_within(self.event_class, self.backend._dev, [self.handle], timeout, f"the {self.label} stream")

    def submit(self, fn) -> Event:
        """Run a host function in stream order (after the stream's queued work)."""
        self.synchronize()
        fn()
        return completed_event()

    def __del__(self):
        try:
            orphan_work(self.backend._dev, self.event_class, self.handle)
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass
        try:
            self._destroy()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass

    def __repr__(self) -> str:
        return f"<tk.Stream ({self.label}:{self.backend.device}) priority={self.priority}>"
