"""Streams and events for host (CPU) execution.

A :class:`Stream` is an ordered queue of jobs (plain Python callables; for the CPU
backend they call compiled C code that releases the GIL). Each stream has ONE
dedicated daemon worker thread, started lazily by the first :meth:`Stream.submit`,
that runs the stream's jobs strictly in submission order. Different streams run
concurrently with each other and with the Python thread that submitted the work.
:meth:`Stream.submit` returns an :class:`Event` that completes when its job has run.

Errors
    A job that raises stops the work that depends on it until its error is reported (as
    Warp and CuPy raise an asynchronous error at the next synchronize; unlike CUDA's
    "sticky" errors, the stream is usable again afterwards). The worker survives and the
    job's Event completes with the exception; then

    * the later jobs of the same stream, submitted before the error was reported, do not
      run (they would read whatever the failed job left half-written): each one's Event
      completes with a ``tk.LaunchError`` "did not run" whose ``__cause__`` is the error;
    * a stream that waits for the failed job's event (:meth:`Stream.wait` called before
      the error was reported) is stopped the same way: its waiting job fails with a ``tk.LaunchError`` caused by the error, and its
      later jobs do not run until that error is reported on the waiting stream;
    * work submitted after the error was reported (by ``Event.wait`` on the failed job, or
      a synchronize of its stream) runs: a reported error is handled and stops nothing more
      (waiting for its event then only orders work).

    The exception is reported

    * by :meth:`Event.wait` on that job's event, once (the first call raises; later calls
      return normally), and
    * by the next :meth:`Stream.synchronize` of the stream (or :meth:`StreamSet.synchronize`,
      i.e. ``tk.synchronize(backend)``), once, unless :meth:`Event.wait` already raised it.
      If several jobs failed since the last synchronize, the first one's error is raised
      (the others stay available through their events).
      ``tk.synchronize(backend)`` raises one error of all its streams', a job's own error rather
      than a "did not run" / "waited for a failed event" ``LaunchError`` it caused on another
      stream (that one's ``__cause__``), whatever order it visits the streams in.

    The exception raised is the job's original exception object (so ``except IndexError``
    works for debug-mode bounds errors), re-raised with the traceback it had in the worker
    (the ``wait()``/``synchronize()`` frame on top, then the frames of the job) and, on
    Python 3.11+, a note naming the stream and the job number.
    A "did not run" event reports its own ``LaunchError`` the same way (``Event.wait``, or
    the synchronize of its stream when nothing failed before it there).

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

Fork
    A forked child has only the thread that forked. Every stream gets a fresh queue, lock
    and (lazily started) worker there; the jobs queued or running at the fork never complete
    in the child, so their events complete with a ``tk.LaunchError`` (reported by
    ``Event.wait`` and by the stream's next synchronize, once); new work runs.
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

import numpy as np

from ..argcheck import timeout_arg
from ..errors import LaunchError
from .forksafe import ForkSafeLock

__all__ = ["High", "Normal", "Low", "Event", "Stream", "StreamSet", "completed_event"]

High = 1
Normal = 0
Low = -1


def stream_priority(priority) -> int:
    """``priority`` as every backend's ``stream(priority=)`` takes it: ``tk.High``,
    ``tk.Normal``, ``tk.Low`` or any int (NumPy ints too); anything else (a float, a string,
    None) is a ``TypeError``."""
    if not isinstance(priority, (bool, np.bool_)):
        try:
            return operator.index(priority)
        except TypeError:
            pass
    raise TypeError("stream(): argument 'priority': expected an int (tk.High, tk.Normal, tk.Low), "
                    f"got {type(priority).__name__} {priority!r}")

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
    timeout = timeout_arg("synchronize", timeout)
    return None if timeout is None else time.monotonic() + max(0.0, timeout)


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
        if st is not None and self._seq <= st.lost_upto:
            self._finish(_lost_at_fork(st, self._seq))
            return True
        if st is not None and st.worker_ident == threading.get_ident():
            raise RuntimeError(f"deadlock: a job of {st.label()} waits for {self!r}, "
                               "a later job of the same stream")
        if timeout is None:
            ok = self._lock.acquire()
        else:
            ok = self._lock.acquire(True, max(0.0, timeout_arg("Event.wait", timeout)))
        if ok:
            self._lock.release()
        return ok

    # -- public -------------------------------------------------------------------
    def done(self) -> bool:
        """True when the job has finished (successfully or with an error). Never blocks."""
        if self._done:
            return True
        st = self._state
        return st is not None and self._seq <= st.lost_upto and self._block(0)   # pending at a fork: failed

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
        _reported(self)
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
                 "failed", "stopped_by", "stopped_until", "lost_upto", "__weakref__")

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
        self.stopped_by: Event | None = None   # the failed job whose later jobs do not run ...
        self.stopped_until: int | None = None  # ... up to this job number (None: until reported)
        self.lost_upto = 0                     # jobs up to this number were pending at a fork (a child)

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
            _check_not_stopped(state, ev)
            fn()
        except _NotRun as e:
            exc = e.error
            with state.lock:
                state.failed.append(ev)
        except BaseException as e:  # noqa: BLE001 - the worker must survive anything a job raises
            _add_note(e, f"(raised by job #{ev._seq} on tinykernels {state.label()}, "
                         f"priority {state.priority}; reported by Event.wait / synchronize)")
            exc, tb = e, e.__traceback__
            if tb is not None and tb.tb_frame.f_code is _worker.__code__ and tb.tb_next is not None:
                tb = tb.tb_next      # start the reported traceback at the job, not in this loop
            with state.lock:
                state.failed.append(ev)
                state.stopped_by, state.stopped_until = ev, None
        # Drop the job (its closure holds the launch's arrays) BEFORE the event completes: once
        # a waiter is released, its thread may drop its own references and exit; a torch tensor
        # whose last reference this worker then dropped would be freed here during interpreter
        # shutdown, and torch's deallocator, releasing the GIL, aborted the process
        # ("terminate called without an active exception").
        fn = None
        ev._finish(exc, tb)
        ev = exc = tb = None


class _NotRun(Exception):
    """Raised in the worker instead of running a job that a reported-later failure stops."""

    def __init__(self, error: LaunchError):
        super().__init__()
        self.error = error


def _check_not_stopped(st: _StreamState, ev: Event) -> None:
    """``_NotRun`` when an earlier failed job of ``st`` stops job ``ev`` (see the module
    docstring); a job submitted after that failure was reported ends the stop. Only the
    worker sets ``stopped_by``, so it reads it without the lock (no cost per job)."""
    if st.stopped_by is None:
        return
    with st.lock:
        bad = st.stopped_by
        if st.stopped_until is not None and ev._seq > st.stopped_until:
            st.stopped_by = st.stopped_until = None
            return
    cause = bad._exc
    err = LaunchError(f"{st.label()} job #{ev._seq} did not run: job #{bad._seq} of the stream failed before it "
                      f"({type(cause).__name__}: {cause}); its error is reported by Event.wait or synchronize, "
                      "after which new work runs again")
    err.__cause__ = cause
    raise _NotRun(err)


def _reported(ev: Event) -> None:
    """``ev``'s error has just been raised to the user: it stops its stream's jobs up to the
    newest one submitted now, not the ones submitted later."""
    st = ev._state
    if st is None:
        return
    with st.lock:
        if st.stopped_by is ev and st.stopped_until is None:
            st.stopped_until = st.seq


def _failed_unreported(ev: Event) -> BaseException | None:
    """The error of the completed ``ev`` when it failed and has not been reported, else None."""
    exc = getattr(ev, "_exc", None)
    if exc is None or getattr(ev, "_waited", False) or getattr(ev, "_synced", False):
        return None
    return exc


def _waited_for(ev: Event) -> None:
    """The job :meth:`Stream.wait` queues (while ``ev``'s error, if any, was unreported):
    block until ``ev`` completes; a ``LaunchError`` caused by its error when it failed."""
    ev._block()
    cause = getattr(ev, "_exc", None)
    if cause is not None:
        raise LaunchError(f"waited for {ev!r}, which failed: the work queued behind this wait does not run "
                          "until that error is reported (Event.wait or synchronize)") from cause


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
        _reported(first)
        _reraise(first._exc, first._tb)


def _consequence(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``LaunchError`` this module raised because of another job's error
    (its ``__cause__``): work that did not run, or a wait for a failed event."""
    return isinstance(exc, LaunchError) and exc.__cause__ is not None


def _stop(st: _StreamState) -> None:
    st.queue.put(_STOP)


_ALL_STATES: "weakref.WeakSet[_StreamState]" = weakref.WeakSet()   # every stream's state (for fork)
_ALL_LOCK = threading.Lock()


def _lost_at_fork(st: _StreamState, seq: int) -> LaunchError:
    return LaunchError(f"{st.label()} job #{seq} was still queued or running when the process forked: a forked "
                       "child has none of its parent's worker threads, so that work never completes in the "
                       "child and what it writes is undefined there (synchronize before forking)")


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: give every stream a fresh queue, lock and
    (lazily started) worker, so new work runs; the jobs pending at the fork complete with a
    ``LaunchError`` (``Event.wait``, and the stream's next synchronize, report it) instead of
    waiting forever for a worker that does not exist here."""
    global _ALL_LOCK, _report_lock
    _ALL_LOCK = threading.Lock()
    _report_lock = threading.Lock()
    for st in list(_ALL_STATES):
        st.lock = threading.Lock()
        st.queue = queue.SimpleQueue()
        st.thread = None
        st.worker_ident = None
        last = st.last
        if last is not None and not last._done:
            st.lost_upto = st.seq
            last._finish(_lost_at_fork(st, last._seq))
            st.failed.append(last)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
        weakref.finalize(self, _stop, self._state).atexit = False
        with _ALL_LOCK:
            _ALL_STATES.add(self._state)

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

        When ``event``'s job fails and its error was not reported before this call, this
        stream's later jobs do not run (see the module docstring, Errors).
        """
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        if event._state is self._state or (event._done and _failed_unreported(event) is None):
            return                   # an earlier job of this very stream, or already complete and fine
        self.submit(lambda: _waited_for(event))

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
        self._lock = ForkSafeLock()
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
        """Wait for all work on every stream of the set; then raise the first unreported error,
        preferring a job's own error to a stream's "waited for a failed event" / "did not run"
        error caused by it (streams are visited in no particular order).

        Raises ``TimeoutError`` if some work is still running after ``timeout`` seconds."""
        deadline = deadline_of(timeout)
        with self._lock:
            states = list(self._states)
        first: BaseException | None = None
        for st in states:
            try:
                _synchronize(st, deadline)
            except BaseException as e:  # noqa: BLE001 - finish waiting for the others first
                if first is None or (_consequence(first) and not _consequence(e)):
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
