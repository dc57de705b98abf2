"""Errors the interpreter backend finds while running a kernel.

Every message names the kernel, the Python ``file:line`` and the work items involved (their
global linear index and their group / local position). Out-of-bounds accesses are raised in
every mode (as :class:`KernelIndexError`, an ``IndexError``, like the compiled backends' debug
mode); the others only with ``tk.Interpreter(check=True)`` (``DEV=INTERP:CHECK``), except a
divergent barrier, which the lockstep scheduler always notices.
"""
from __future__ import annotations

import os
import sys

from ...errors import TinyKernelsError
from ...ir.nodes import Loc


class KernelCheckError(TinyKernelsError):
    """A bug the interpreter found while running a kernel (base class).

    Attributes: ``kernel`` (name), ``file`` and ``line`` (where it happened), ``items`` (the
    work items involved, as ``(global linear index, group, local)`` tuples)."""

    def __init__(self, message: str, kernel: str = "", file: str = "", line: int = 0, items=()):
        super().__init__(message)
        self.kernel, self.file, self.line, self.items = kernel, file, line, tuple(items)


class KernelIndexError(KernelCheckError, IndexError):
    """An array index out of bounds (also raised without check mode)."""


class UninitializedReadError(KernelCheckError):
    """A read of local (or private) memory that nothing has written."""


class DataRaceError(KernelCheckError):
    """Two work items touch one element, at least one writing, with nothing ordering them."""


class DivergentBarrierError(KernelCheckError):
    """The work items of a group do not all reach the same barrier or collective."""


class ZeroStepError(KernelCheckError, ValueError):
    """A ``range()`` loop whose run-time step is zero (check mode; it runs no iteration otherwise)."""


for _cls in (KernelCheckError, KernelIndexError, UninitializedReadError, DataRaceError, DivergentBarrierError,
             ZeroStepError):
    _cls.__module__ = "tinykernels.runtime.interp"     # where they are documented

_HERE = os.path.dirname(os.path.abspath(__file__))


def _ours(filename: str) -> bool:
    return os.path.dirname(os.path.abspath(filename)) == _HERE      # a module of this package


_IS_OURS: dict = {}


def user_frame(depth: int = 1):
    """The innermost frame that is the user's code (kernel or @tk.func), not the interpreter's."""
    f = sys._getframe(depth)
    while f is not None:
        fn = f.f_code.co_filename
        o = _IS_OURS.get(fn)
        if o is None:
            o = _IS_OURS[fn] = _ours(fn)
        if not o:
            return f
        f = f.f_back
    return None


_PKG = os.path.dirname(_HERE)[:-len("runtime")]          # .../tinykernels/
_LANG = os.path.join(_PKG, "lang.py")                   # tk.func's __call__: a plain Python call


_IN_PKG: dict = {}


def _caller(f):
    """The user frame that called the user frame ``f`` (a kernel calling a @tk.func, through
    tk.func's ``__call__``), or None where the interpreter or a launch called it."""
    g = f.f_back
    while g is not None and g.f_code.co_filename == _LANG:
        g = g.f_back
    if g is None:
        return None
    fn = g.f_code.co_filename
    ours = _IN_PKG.get(fn)
    if ours is None:
        ours = _IN_PKG[fn] = os.path.abspath(fn).startswith(_PKG)
    return None if ours else g


def frame_site(f) -> tuple:
    """``(file, line, func, caller's site or None)`` of the user frame ``f``: where it is, with
    the call chain of the @tk.funcs it is in (plain tuples: check mode records one per access;
    :func:`site_loc` makes the Loc an error names)."""
    g = _caller(f)
    code = f.f_code
    return (code.co_filename, f.f_lineno, "", None) if g is None else \
        (code.co_filename, f.f_lineno, code.co_name, frame_site(g))


def site_loc(site: tuple) -> Loc:
    """The Loc of a :func:`frame_site` (``ir.nodes.site_text`` names its file, line and chain)."""
    file, line, func, caller = site
    return Loc(file, line, caller=None if caller is None else site_loc(caller), func=func)


def where_site(depth: int = 1) -> tuple:
    """:func:`where` as a :func:`frame_site`, with its call chain."""
    f = user_frame(depth + 1)
    return ("<unknown>", 0, "", None) if f is None else frame_site(f)


def where(depth: int = 1) -> tuple:
    """(file, line) of the user's code that is running (the innermost frame outside the
    interpreter; ``depth`` only says where to start looking)."""
    f = user_frame(depth + 1)
    if f is None:
        return "<unknown>", 0
    return f.f_code.co_filename, f.f_lineno
