"""Checks of the plain Python arguments of public constructors and factories (backends,
streams, array allocation, random keys, timeouts): a ``TypeError`` for a value of the wrong
type and a ``ValueError`` for one out of range, each naming the function and the argument.

A flag must be a bool (``debug="no"`` is not quietly true) and a count an int that is not a
bool (``True`` is no thread count); NumPy's ``bool_`` and integer scalars count as such.
"""
from __future__ import annotations

import math
import operator
import os

import numpy as np


def is_int(value) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def int_arg(owner: str, name: str, value, lo: int | None = None, what: str = "an int") -> int:
    """``value`` as an int (anything with ``__index__`` but a bool), at least ``lo`` when given;
    ``what`` is what the TypeError says was expected."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: argument '{name}': expected {what}, got bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{owner}: argument '{name}': expected {what}, got "
                        f"{type(value).__name__} {value!r}") from None
    if lo is not None and v < lo:
        raise ValueError(f"{owner}: argument '{name}': expected an int >= {lo}, got {v}")
    return v


def flag_arg(owner: str, name: str, value) -> bool:
    """``value`` as a bool; it must be one (``True``/``False`` or a NumPy bool)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: argument '{name}': expected a bool (True or False), got "
                        f"{type(value).__name__} {value!r}")
    return bool(value)


def debug_flag(debug, backend=None) -> bool:
    """A backend's ``debug`` argument (a bool), or ``TK_DEBUG`` from the environment when None."""
    if debug is None:
        return bool(int(os.environ.get("TK_DEBUG", "0") or 0))
    return flag_arg(f"tk.{type(backend).__name__}" if backend is not None else "backend", "debug", debug)


def timeout_arg(owner: str, value) -> float | None:
    """A ``timeout=`` in seconds: None (no limit) or a real number that is not NaN."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: argument 'timeout': expected seconds (a number) or None, got "
                        f"{type(value).__name__} {value!r}")
    if math.isnan(value):
        raise ValueError(f"{owner}: argument 'timeout': expected seconds (a number) or None, got nan")
    return float(value)
