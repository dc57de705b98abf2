"""Locks that a forked child gets back unlocked.

A fork keeps only the thread that forked. A lock another thread held at that moment (a
kernel's compile lock, held for the seconds a compile takes) stays locked in the child
forever, so the child's next compile of that kernel hung. :class:`ForkSafeLock` is a
``threading.Lock`` that every forked child replaces with a fresh one (as CPython's own
``threading`` does for its internal locks). Used where the runtime holds a lock across slow
work; the forking thread itself never forks while holding one of these.
"""
from __future__ import annotations

import os
import threading
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


def _after_fork_in_child() -> None:
    for lk in list(_ALL):
        lk._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
