"""Locks that a forked child gets back unlocked.

A fork keeps only the thread that forked. A lock another thread held at that moment (a
kernel's compile lock, held for the seconds a compile takes) stays locked in the child
forever, so the child's next compile of that kernel hung. :class:`ForkSafeLock` is a
``threading.Lock`` that every forked child replaces with a fresh one (as CPython's own
``threading`` does for its internal locks). Used where the runtime holds a lock across slow
work; the forking thread itself never forks while holding one of these.

Python's own per-module import locks have the same problem: the runtime imports its
compiler lazily, at the first launch, and a child forked while another thread was in the
middle of that import waited forever on the module's lock. Before a fork, the forking thread
therefore waits (up to ``_IMPORT_WAIT_S``) for other threads' imports of tinykernels modules
to finish, as CPython itself waits for its global import lock.
"""
from __future__ import annotations

import os
import threading
import time
import weakref

_ALL: "weakref.WeakSet[ForkSafeLock]" = weakref.WeakSet()


class ForkSafeLock:
    """``threading.Lock``'s context-manager and acquire/release interface; unlocked in a forked child."""
    __slots__ = ("_lock", "__weakref__")

    def __init__(self):
        self._lock = threading.Lock()
        _ALL.add(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc) -> None:
        self._lock.release()


_IMPORT_WAIT_S = 10.0


def _import_in_flight(me: int) -> bool:
    """Whether another thread holds the import lock of a tinykernels module (CPython's
    ``importlib._bootstrap`` keeps them in ``_module_locks``; elsewhere: never)."""
    try:
        from importlib import _bootstrap
        refs = list(_bootstrap._module_locks.items())
    except (ImportError, AttributeError):
        return False
    for name, ref in refs:
        if name != "tinykernels" and not name.startswith("tinykernels."):
            continue
        owner = getattr(ref(), "owner", None)
        if owner is not None and owner != me:
            return True
    return False


def _finish_imports_before_fork() -> None:
    me = threading.get_ident()
    deadline = time.monotonic() + _IMPORT_WAIT_S
    while _import_in_flight(me) and time.monotonic() < deadline:
        time.sleep(0.002)


def _after_fork_in_child() -> None:
    for lk in list(_ALL):
        lk._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_imports_before_fork, after_in_child=_after_fork_in_child)
