"""Streams and events for host (CPU) execution.

A :class:`Stream` is an ordered queue of jobs (plain Python callables; for the CPU
backend they call compiled C code that releases the GIL). Each stream has ONE
dedicated daemon worker thread, started lazily by the first :meth:`Stream.submit`,
that runs the stream's jobs strictly in submission order. Different streams run
concurrently with each other and with the Python thread that submitted the work.
:meth:`Stream.submit` returns an :class:`Event` that completes when its job has run.

Errors
    A job that raises does NOT poison its stream. (This is deliberately unlike CUDA's
    "sticky" errors, where one fault makes every later call on the context fail.) The
    worker survives, the job's Event completes with the exception, and the later jobs
    of the stream still run (they may see whatever the failed job left half-written).
    The exception is reported

    * by :meth:`Event.wait` on that job's event, once (the first call raises; later calls
      return normally), and
    * by the next :meth:`Stream.synchronize` of the stream (or :meth:`StreamSet.synchronize`,
      i.e. ``tk.synchronize(backend)``), once, unless :meth:`Event.wait` already raised it.
      If several jobs failed since the last synchronize, the first one's error is raised
      (the others stay available through their events).

    The exception raised is the job's original exception object (so ``except IndexError``
    works for debug-mode bounds errors), re-raised with the traceback it had in the worker
    (the ``wait()``/``synchronize()`` frame on top, then the frames of the job) and, on
    Python 3.11+, a note naming the stream and the job number.
    Waiting for another stream's event (:meth:`Stream.wait`) orders work but does not
    carry that event's error over to the waiting stream.

Timeouts and unrecorded events
    ``Event.wait(timeout=None)``, ``Stream.synchronize(timeout=None)`` and
    ``tk.synchronize(backend, timeout=None)`` (on every backend) wait at most ``timeout``
    seconds when it is given and then raise ``TimeoutError`` (as ``concurrent.futures`` does);
    the work keeps running. An Event made with ``tk.Event()`` marks no work (only launches,
    copies and :meth:`Stream.submit` return recorded events): waiting on it, or
    ``Stream.wait`` with it, raises ``RuntimeError`` at once instead of blocking forever.

Priorities (``High = 1``, ``Normal = 0``, ``Low = -1``; any int is accepted)
    On the CPU a priority is a hint to the operating system scheduler; it never reorders
    jobs, preempts a running job, or changes results. It only matters when the machine's
    cores are oversubscribed, e.g. two streams running multi-threaded kernels at once.
    On Linux, when a stream's worker thread starts it sets its own nice value with
    ``os.setpriority(os.PRIO_PROCESS, native_thread_id, nice)``, relative to the nice
    value ``base`` of the process's main thread:

    * priority < 0 (``Low``): nice ``base + 10`` (at most 19), so the Linux scheduler gives
      the thread a much smaller CPU share than normal threads when they compete;
    * priority == 0 (``Normal``): nice ``base``;
    * priority > 0 (``High``): nice ``base - 5`` when the process may raise priorities
      (root, ``CAP_SYS_NICE`` or ``RLIMIT_NICE``); otherwise it silently stays ``base``.

    (A worker starts with the nice value of the thread whose submit started it; if that
    is higher than the target, e.g. a Normal stream first used from a Low stream's job,
    and the process may not lower nice values, the worker keeps the inherited value.)

    Nice values are per thread on Linux and are inherited by threads created afterwards
    from that thread. With GCC's libgomp the OpenMP team a worker thread starts for its
    parallel kernels is created by (and kept for) that worker, so the kernel's threads
    inherit the stream's nice value too; with other OpenMP runtimes only the dispatching
    worker thread is guaranteed to be affected. On other operating systems the priority
    is recorded (``stream.priority``) and has no effect.

Threads and lifetime
    Worker threads are daemon threads (they never keep the interpreter alive at exit;
    work still queued at exit is abandoned, so synchronize before exiting). A worker
    holds no reference to its :class:`Stream`: when the stream object is garbage
    collected a stop marker is queued behind any pending jobs (they still run, and
    ``StreamSet.synchronize`` still waits for them), and then the thread ends. A worker
    idle for ``IDLE_EXIT_S`` seconds also ends; the next submit starts a new one. So a
    program may create any number of streams; only streams with work pending or done
    recently hold a thread. A worker drops each job (its closure, so the arrays of a launch)
    before completing its Event: once ``wait()`` or ``synchronize()`` returns, the stream
    holds no reference to that work's arguments.
"""
from __future__ import annotations

import operator
import os
import queue
import sys
import threading
import time
import weakref
from typing import Callable

__all__ = ["High", "Normal", "Low", "Event", "Stream", "StreamSet", "completed_event"]

High = 1
Normal = 0
Low = -1


def stream_priority(priority) -> int:
    """``priority`` as every backend's ``stream(priority=)`` takes it: ``tk.High``,
    ``tk.Normal``, ``tk.Low`` or any int (NumPy ints too); anything else (a float, a string,
    None) is a ``TypeError``."""
    try:
        return operator.index(priority)
    except TypeError:
        raise TypeError("stream priority must be an int (tk.High, tk.Normal, tk.Low), "
                        f"got {priority!r}") from None

#: Seconds of idleness after which a stream's worker thread ends (restarted on demand).
IDLE_EXIT_S = 30.0

_STOP = object()                     # queue marker: the stream is gone, end the worker
_IS_LINUX = sys.platform.startswith("linux")
_report_lock = threading.Lock()      # "report once" bookkeeping (error paths only)


def _add_note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note"):     # Python 3.11+
        exc.add_note(note)


def _reraise(exc: BaseException, tb) -> None:
    try:
        raise exc.with_traceback(tb)     # the caller's frame on top of the job's own frames
    finally:
        exc = tb = None                  # no reference cycle through this frame


def check_recorded(event: "Event", what: str) -> None:
    """Raise ``RuntimeError`` when ``event`` marks no work (``tk.Event()``): waiting on it would
    block forever."""
    if not event._recorded():
        raise RuntimeError(f"{what}: {event!r} was never recorded, so it would never complete (a tk.Event "
                           "made directly marks no work; wait on the event a launch, tk.copyto(..., stream=s) "
                           "or Stream.submit returns)")


def deadline_of(timeout: float | None) -> float | None:
    """The ``time.monotonic()`` deadline of a ``timeout`` in seconds (None: none)."""
    return None if timeout is None else time.monotonic() + max(0.0, float(timeout))


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (never negative; None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def poll_until(ready: Callable[[], bool], deadline: float | None, interval: float = 1e-4) -> bool:
    """Call ``ready()`` until it is true (True) or ``deadline`` passes (False)."""
    while not ready():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(interval)
        interval = min(interval * 2, 0.01)
    return True


class Event:
    """Marks the completion of one job (or of work that already ran, see :func:`completed_event`).

    ``done()`` is True once the job finished, successfully or not. ``wait(timeout=None)``
    blocks until then and raises the job's exception the first time it is called on this
    event (see the module docstring); it raises ``TimeoutError`` if ``timeout`` seconds
    pass first. Events come from launches, copies and :meth:`Stream.submit`; one made with
    ``tk.Event()`` marks no work, and waiting on it raises ``RuntimeError``.
    """
    __slots__ = ("_lock", "_done", "_exc", "_tb", "_waited", "_synced", "_state", "_seq", "__weakref__")

    def __init__(self, _state: "_StreamState | None" = None, _seq: int = 0):
        self._lock = threading.Lock()
        self._lock.acquire()         # released (for good) when the job completes
        self._done = False
        self._exc: BaseException | None = None
        self._tb = None
        self._waited = False         # the exception was raised by Event.wait
        self._synced = False         # ... or by a synchronize
        self._state = _state
        self._seq = _seq

    # -- completion (called by the worker) ----------------------------------------
    def _finish(self, exc: BaseException | None = None, tb=None) -> None:
        if exc is not None:
            self._exc, self._tb = exc, tb if tb is not None else exc.__traceback__
        self._done = True
        self._lock.release()

    def _recorded(self) -> bool:
        """Whether this event marks work that will complete (False for a bare ``tk.Event()``)."""
        return self._done or self._state is not None

    def _block(self, timeout: float | None = None) -> bool:
        """Wait for completion without reporting errors; False on timeout."""
        if self._done:
            return True
        check_recorded(self, "Event.wait")
        st = self._state
        if st is not None and st.worker_ident == threading.get_ident():
            raise RuntimeError(f"deadlock: a job of {st.label()} waits for {self!r}, "
                               "a later job of the same stream")
        if timeout is None:
            ok = self._lock.acquire()
        else:
            ok = self._lock.acquire(True, max(0.0, float(timeout)))
        if ok:
            self._lock.release()
        return ok

    # -- public -------------------------------------------------------------------
    def done(self) -> bool:
        """True when the job has finished (successfully or with an error). Never blocks."""
        return self._done

    def wait(self, timeout: float | None = None) -> None:
        """Block until the job has finished; raise its exception (the first time only).

        Raises ``TimeoutError`` if the job is still running after ``timeout`` seconds.
        """
        if not self._block(timeout):
            raise TimeoutError(f"{self!r} did not complete within {timeout} s (it is still running)")
        if self._exc is None:
            return
        with _report_lock:
            if self._waited:
                return
            self._waited = True
        _reraise(self._exc, self._tb)

    def __repr__(self) -> str:
        where = f" {self._state.label()} job #{self._seq}" if self._state is not None else ""
        if not self._done:
            status = "pending"
        elif self._exc is not None:
            status = f"failed: {type(self._exc).__name__}: {self._exc}"
        else:
            status = "done"
        return f"<tk.Event{where} {status}>"


_COMPLETED = Event()
_COMPLETED._finish()


def completed_event() -> Event:
    """An already-completed Event, for work that ran synchronously (a shared instance)."""
    return _COMPLETED


class _StreamState:
    """What a stream shares with its worker thread (the worker never references the Stream)."""
    __slots__ = ("name", "priority", "queue", "lock", "thread", "worker_ident", "seq", "last",
                 "failed", "__weakref__")

    def __init__(self, name: str, priority: int):
        self.name = name
        self.priority = priority
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()           # submit / worker start and stop / bookkeeping
        self.thread: threading.Thread | None = None
        self.worker_ident: int | None = None
        self.seq = 0
        self.last: Event | None = None         # the newest job's event
        self.failed: list[Event] = []          # failed jobs since the last synchronize

    def label(self) -> str:
        return f"stream {self.name!r}" if self.name else f"stream@{id(self):x}"


def _apply_priority(priority: int) -> None:
    """Set this (worker) thread's nice value from the stream priority; Linux only."""
    if not _IS_LINUX or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())   # main thread's nice (its tid == pid)
        current = os.getpriority(os.PRIO_PROCESS, tid)        # inherited from the submitting thread
    except OSError:
        return
    if priority < 0:
        target = min(19, base + 10)
    elif priority > 0:
        target = max(-20, base - 5)
    else:
        target = base
    if target == current:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, tid, target)
    except OSError:                  # PermissionError: may not raise priority
        if target < base < current:  # at least undo an inherited lower priority, if allowed
            try:
                os.setpriority(os.PRIO_PROCESS, tid, base)
            except OSError:
                pass


def _worker(state: _StreamState) -> None:
    state.worker_ident = threading.get_ident()
    _apply_priority(state.priority)
    q = state.queue
    me = threading.current_thread()
    while True:
        try:
            item = q.get(timeout=IDLE_EXIT_S)
        except queue.Empty:
            with state.lock:
                if q.empty():        # no submit can be in flight while we hold the lock
                    state.thread = None
                    state.worker_ident = None
                    return
            continue
        if item is _STOP:
            with state.lock:
                if state.thread is me:
                    state.thread = None
                    state.worker_ident = None
            return
        fn, ev = item
        item = None
        exc = tb = None
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - the worker must survive anything a job raises
            _add_note(e, f"(raised by job #{ev._seq} on tinykernels {state.label()}, "
                         f"priority {state.priority}; reported by Event.wait / synchronize)")
            exc, tb = e, e.__traceback__
            if tb is not None and tb.tb_frame.f_code is _worker.__code__ and tb.tb_next is not None:
                tb = tb.tb_next      # start the reported traceback at the job, not in this loop
            with state.lock:
                state.failed.append(ev)
        # Drop the job (its closure holds the launch's arrays) BEFORE the event completes: once
        # a waiter is released, its thread may drop its own references and exit; a torch tensor
        # whose last reference this worker then dropped would be freed here during interpreter
        # shutdown, and torch's deallocator, releasing the GIL, aborted the process
        # ("terminate called without an active exception").
        fn = None
        ev._finish(exc, tb)
        ev = exc = tb = None


def _synchronize(st: _StreamState, deadline: float | None = None) -> None:
    """Wait for everything submitted to ``st`` so far (``TimeoutError`` past ``deadline``);
    raise its first unreported error."""
    with st.lock:
        last = st.last
    if last is not None and not last._done:
        if st.worker_ident == threading.get_ident():
            raise RuntimeError(f"deadlock: a job of {st.label()} called synchronize() on its own stream")
        if not last._block(remaining(deadline)):
            raise TimeoutError(f"{st.label()}: job #{last._seq} (and any before it) did not complete within "
                               "the timeout (the work is still running)")
    if not st.failed:
        return
    with st.lock:
        failed, st.failed = st.failed, []
    first = None
    with _report_lock:
        for ev in failed:
            if not ev._waited and not ev._synced:
                ev._synced = True
                first = ev
                break
    if first is not None:
        _reraise(first._exc, first._tb)


def _stop(q: queue.SimpleQueue) -> None:
    q.put(_STOP)


class Stream:
    """An in-order queue of host jobs run by one dedicated worker thread.

    ``submit(fn)`` enqueues ``fn()`` and returns its :class:`Event`; ``wait(event)`` makes
    later jobs wait for an event (of any stream) without blocking the caller;
    ``synchronize()`` blocks until all submitted work is done and raises the first error
    not yet reported (see the module docstring for error, priority and thread semantics).
    """

    def __init__(self, priority: int = Normal, name: str = ""):
        priority = stream_priority(priority)
        self._state = _StreamState(str(name), priority)
        weakref.finalize(self, _stop, self._state.queue).atexit = False

    @property
    def priority(self) -> int:
        return self._state.priority

    @property
    def name(self) -> str:
        return self._state.name

    def submit(self, fn: Callable[[], None]) -> Event:
        """Enqueue ``fn()`` behind this stream's earlier jobs; returns the job's Event."""
        if not callable(fn):
            raise TypeError(f"Stream.submit expects a callable, got {type(fn).__name__}")
        st = self._state
        with st.lock:
            st.seq += 1
            ev = Event(st, st.seq)
            st.queue.put((fn, ev))
            st.last = ev
            if st.thread is None:
                t = threading.Thread(target=_worker, args=(st,), daemon=True, name=f"tk-{st.label()}")
                st.thread = t
                t.start()
        return ev

    def wait(self, event: Event) -> None:
        """Make this stream's later jobs wait until ``event`` has completed. Never blocks.

        The event's error, if any, is not carried over: it is reported by the event and
        by its own stream.
        """
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        if event._done or event._state is self._state:
            return                   # already complete, or an earlier job of this very stream
        self.submit(event._block)

    def synchronize(self, timeout: float | None = None) -> None:
        """Block until all work submitted so far has finished; raise the first unreported error.

        Raises ``TimeoutError`` if the work is still running after ``timeout`` seconds."""
        _synchronize(self._state, deadline_of(timeout))

    def query(self) -> bool:
        """True when every job submitted so far has finished (never blocks)."""
        last = self._state.last
        return last is None or last._done

    def __repr__(self) -> str:
        st = self._state
        return f"<tk.Stream {st.label()} priority={st.priority} {'idle' if self.query() else 'busy'}>"


class StreamSet:
    """All streams of one device. ``stream()`` makes one; ``synchronize()`` waits for all.

    Streams are registered weakly: a stream nobody references any more is forgotten once
    its worker has run the jobs still queued on it (until then ``synchronize()`` still
    waits for them). ``default`` is a Normal-priority stream the set keeps alive, for
    callers that want one. Thread-safe.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._states: weakref.WeakSet[_StreamState] = weakref.WeakSet()
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        self._default: Stream | None = None

    def stream(self, priority: int = Normal, name: str = "") -> Stream:
        """Create and register a new stream."""
        s = Stream(priority, name)
        with self._lock:
            self._states.add(s._state)
            self._streams.add(s)
        return s

    @property
    def default(self) -> Stream:
        """A Normal-priority stream named "default", created on first use and kept alive."""
        with self._lock:
            s = self._default
        if s is None:
            s = self.stream(Normal, "default")
            with self._lock:
                if self._default is None:
                    self._default = s
                s = self._default
        return s

    def streams(self) -> list[Stream]:
        """The live (still referenced) streams."""
        with self._lock:
            return list(self._streams)

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait for all work on every stream of the set; then raise the first unreported error.

        Raises ``TimeoutError`` if some work is still running after ``timeout`` seconds."""
        deadline = deadline_of(timeout)
        with self._lock:
            states = list(self._states)
        first: BaseException | None = None
        for st in states:
            try:
                _synchronize(st, deadline)
            except BaseException as e:  # noqa: BLE001 - finish waiting for the others first
                if first is None:
                    first = e
        if first is not None:
            try:
                raise first
            finally:
                first = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._streams)

    def __repr__(self) -> str:
        return f"<tk.StreamSet of {len(self)} streams>"
