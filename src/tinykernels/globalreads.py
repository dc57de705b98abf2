"""The module globals and closure variables a kernel's compiled code folded in, and the
check at launch that they still hold those values.

Lowering reads a global or closure variable that is a number, a NumPy scalar, a tuple of
them, a string, a dtype or a ``@tk.func`` as a compile-time constant: its value is in the
generated code. While a specialization is lowered, :func:`recording` collects every such
read (:func:`note`, called by the frontend, for kernels and the ``@tk.func`` bodies they
inline); the kernel keeps them (``Kernel.note_reads``) and every launch of a compiled
backend calls :func:`stale` first, which compares each value with the variable's current
one (an identity test; equality only when the object changed), so that rebinding a global
recompiles the kernel instead of running the old value, as the interpreter (which runs the
Python function) always did. Used by the frontend and the runtimes alike; imports neither.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from functools import partial
from contextvars import ContextVar

import numpy as np

MISSING = object()                 # a name no longer bound / an empty closure cell
_SINK: ContextVar = ContextVar("tk_global_reads", default=None)


@contextmanager
def recording():
    """Collect the reads of the lowering done inside the ``with``: yields a dict
    ``(id(where), key) -> read``, a read being ``(get, key, value, where)`` (see :func:`note`)."""
    reads: dict = {}
    token = _SINK.set(reads)
    try:
        yield reads
    finally:
        _SINK.reset(token)


def _cell_get(cell, key, default):
    try:
        return cell.cell_contents
    except ValueError:
        return default


def note(where, key, value) -> None:
    """Record that lowering folded ``value``, read from ``where``: a module's globals dict
    (``key`` the name) or a closure cell (``key`` None). A no-op outside :func:`recording`.
    The read keeps ``get``, with ``get(key, MISSING)`` the variable's value now: the dict's
    bound ``get`` (no Python frame at launch), for a cell a partial of :func:`_cell_get`."""
    sink = _SINK.get()
    if sink is not None:
        get = where.get if key is not None else partial(_cell_get, where)
        sink.setdefault((id(where), key), (get, key, value, where))


def same(a, b) -> bool:
    """Whether ``b`` compiles to the same code as ``a``: equal values of one type (so 1 and
    1.0, 0.0 and -0.0 differ; NaN equals NaN), tuples element by element."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, (float, np.floating)):
        if a != a:
            return b != b
        return bool(a == b) and math.copysign(1.0, a) == math.copysign(1.0, b)
    try:
        return bool(a == b)
    except Exception:                 # (an object whose == is not a bool)
        return False


def stale(reads: list) -> bool:
    """Whether one of ``reads`` no longer holds its value: one identity test per read (the
    launch fast paths call it), :func:`same` only for a variable bound to a new object, whose
    equal value then replaces the recorded one (``N = 4.0`` run again: the next check is an
    identity test again)."""
    for get, key, value, _ in reads:
        if get(key, MISSING) is not value:
            return _changed(reads)
    return False


def _changed(reads: list) -> bool:
    for i, (get, key, value, where) in enumerate(reads):
        cur = get(key, MISSING)
        if cur is not value:
            if not same(value, cur):
                return True
            reads[i] = (get, key, cur, where)
    return False
