"""Traceback filtering: a user sees their own frames and the located message, not the
compiler's stack (the idea of JAX's traceback filtering).

Errors a user can act on (``tk.CompileError``, ``tk.LaunchError``, ``tk.BackendUnavailable``,
and ``IndexError``/check-mode errors raised for a kernel) leave the library through an API
boundary (:func:`api_boundary`, or :func:`reraise_filtered` in hot paths). There the frames of
tinykernels' own modules are cut from the traceback, and a note says how to see them:
``TK_TRACEBACK_FILTERING=off`` keeps the whole traceback (for bug reports). Internal errors
(any other exception) are never filtered.
"""
from __future__ import annotations

import functools
import os
import types

from .errors import TinyKernelsError

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
NOTE = ("(tinykernels' internal frames were hidden from this traceback; set "
        "TK_TRACEBACK_FILTERING=off to see them)")


def filtering_enabled() -> bool:
    """False when ``TK_TRACEBACK_FILTERING`` is ``off``/``0``/``false``/``no``."""
    return os.environ.get("TK_TRACEBACK_FILTERING", "on").strip().lower() not in ("off", "0", "false", "no")


def _is_internal(frame) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(_PKG_DIR)


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the frames of tinykernels' own modules (order kept)."""
    kept = []
    while tb is not None:
        if not _is_internal(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


USER_ERRORS = (TinyKernelsError, IndexError)


def prepare(e: BaseException) -> BaseException:
    """Filter ``e``'s traceback in place (when enabled); returns ``e``, for
    ``except USER_ERRORS as e: raise prepare(e)`` at an API boundary (free when nothing is
    raised, so it fits the launch fast path)."""
    if not filtering_enabled():
        return e
    e.with_traceback(filter_traceback(e.__traceback__))
    if getattr(e, "_tk_filtered", False):   # an inner boundary filtered it: cut the frames added since
        return e
    e._tk_filtered = True
    e.__cause__ = None
    e.__suppress_context__ = True          # "during handling of ..." is the compiler's business
    if hasattr(e, "add_note"):
        e.add_note(NOTE)
    return e


def api_boundary(fn):
    """Decorator for public entry points: user-facing errors leave with a filtered traceback."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as e:
            raise prepare(e)
    return wrapper
