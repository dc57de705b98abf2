"""Getting argument slots into a compiled kernel: a small C extension, or ctypes.

:func:`get` returns an object with ``sig``, ``run``, ``fast``, ``prepare``, ``template`` and ``raw`` (see
``_launch.c``). The C extension is built once per machine, Python and NumPy version (into the
disk cache); where Python's headers are missing, a pure-Python version with ctypes does the
same, slower.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import compiler
from .launchplan import value_key
from .memspan import overlapping_axis

_SRC = Path(__file__).with_name("_launch.c")

#: The thread that forked this process (a forked child's only surviving thread), whose OpenMP
#: pool (GCC's libgomp) is broken: launches from it run on one thread, as _launch.c's FORK_SAFE.
_FORK_THREAD = [None]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _FORK_THREAD.__setitem__(0, threading.get_ident()))


def _build_extension():
    info = compiler.python_build_info()
    if not info["include"] or not (Path(info["include"]) / "Python.h").exists():
        return None
    tc = compiler.toolchain()
    src = _SRC.read_text()
    key = hashlib.sha256("\0".join([src, tc.identity, info["version"], info["numpy"],
                                    info["numpy_include"], info["suffix"]]).encode()).hexdigest()[:32]
    path = compiler.cache_dir() / "launch" / f"_tklaunch_{key}{info['suffix']}"
    if compiler.read_sealed(path) is None:         # missing, or damaged (truncated, corrupted): build it
        compiler.first_use_notice()
        flags = ["-O2", "-fPIC", "-shared", "-w", f"-I{info['include']}", f"-I{info['numpy_include']}"]
        path.parent.mkdir(parents=True, exist_ok=True)
        compiler.clean_stale_temporaries(path.parent)
        tmp = path.with_name(f"{compiler.temp_prefix()}{path.name}")
        try:
            r = compiler._run(list(tc.cmd) + flags + ["-o", str(tmp), str(_SRC)])
            if r.returncode != 0:
                return None
            compiler.seal_file(tmp)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
    loader = importlib.machinery.ExtensionFileLoader("_tklaunch", str(path))
    spec = importlib.util.spec_from_file_location("_tklaunch", str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


C_MAX_ARGS = 64        # _launch.c's MAX_ARGS: the most arguments the C extension packs


class PyLauncher:
    """The same protocol as the C extension, in Python with ctypes (the fallback)."""

    @staticmethod
    def _code(o, is_constexpr, fits):
        if is_constexpr:
            return ("C",) + value_key(o)
        if isinstance(o, np.ndarray):
            isz = o.itemsize
            if not o.flags.aligned or o.dtype.byteorder == ">" or any(s % isz for s in o.strides):
                return None
            if o.size >= 1 << 31:
                fits[0] = False
            return ("A", o.dtype.num, o.dtype.str, o.ndim, o.flags.c_contiguous, not o.flags.writeable,
                    overlapping_axis(o.shape, o.strides) is not None)
        if isinstance(o, bool):
            return ("b",)
        if type(o) is float:
            return ("f",)
        if type(o) is int:
            if -(1 << 63) <= o < (1 << 63):
                return ("i",)
            return ("J",) if 0 <= o < (1 << 64) else None
        if isinstance(o, np.generic) and (o.dtype.kind in "biuf"):
            return ("S", o.dtype.num)
        return None

    def sig(self, cmask, args, geom, ndim, wg, ranges):
        fits, codes = [True], []
        for i, a in enumerate(args):
            c = self._code(a, (cmask >> i) & 1, fits)
            if c is None:
                return None
            codes.append(c)
        if geom[1] * geom[4] * geom[7] >= 1 << 31:
            fits[0] = False
        return (tuple(codes), ndim, fits[0], ranges, wg)

    def run(self, fnptr, nthreads, cmask, args, geom):
        slots = list(geom)
        kinds = ["i"] * 9
        for i, o in enumerate(args):
            if (cmask >> i) & 1:
                continue
            if isinstance(o, np.ndarray):
                slots.append(o.ctypes.data)
                kinds.append("p")
                slots += list(o.shape) + [s // o.itemsize for s in o.strides]
                kinds += ["i"] * (2 * o.ndim)
            elif isinstance(o, (float, np.floating)):
                slots.append(float(o))
                kinds.append("f")
            else:
                v = int(o)
                if isinstance(o, np.unsignedinteger) and v >= 1 << 63:
                    v -= 1 << 64
                if (1 << 63) <= v < (1 << 64):
                    v -= 1 << 64
                if not -(1 << 63) <= v < (1 << 63):
                    raise OverflowError(f"argument {i}: Python int does not fit in 64 bits")
                slots.append(v)
                kinds.append("i")
        buf = (ctypes.c_int64 * len(slots))()
        for k, (v, kind) in enumerate(zip(slots, kinds)):
            if kind == "f":
                buf[k] = int.from_bytes(np.float64(v).tobytes(), "little", signed=True)
            else:
                buf[k] = v or 0
        _entry(fnptr)(buf, 1 if threading.get_ident() == _FORK_THREAD[0] else nthreads)   # see _launch.c: FORK_SAFE

    def fast(self, plans, cmask, nthreads, args, ndrange, wg):
        return None

    def prepare(self, plans, cmask, args, ndrange, wg):
        return None               # stream launches take the checked path

    def template(self, cmask, args, ndrange):
        return None               # no kept templates: raw() callers take the checked path

    def raw(self, entry, nthreads, vals):
        return False

    def register_host_array(self, t):
        pass

    def register_torch(self, types, strided, dtype, typenum, itemsize):
        pass


@lru_cache(maxsize=None)
def _entry(fnptr: int):
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)(fnptr)


@lru_cache(maxsize=None)
def _get(cache: str, force_py: bool):
    if not force_py:
        try:
            mod = _build_extension()
            if mod is not None:
                return mod
        except (OSError, ImportError):
            pass
    return PyLauncher()


def get():
    """The launcher for this process (``TK_PY_LAUNCHER=1`` forces the ctypes fallback)."""
    return _get(str(compiler.cache_dir()), os.environ.get("TK_PY_LAUNCHER", "0") == "1")


def note_torch(launcher, tensor, view) -> None:
    """Let ``launcher`` read CPU torch tensors of ``tensor``'s dtype itself, without a NumPy
    view: ``view`` is the NumPy view the checked path made of ``tensor`` (its type number and
    item size are what the extension then uses for tensors of that dtype, so a tensor and its
    view have the same specialization key). Only plain tensors (``torch.Tensor``,
    ``nn.Parameter``; not subclasses, which may override the accessors) of a dtype the checked
    path accepted. Called by checked launches only (a dict store in the extension)."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(view, np.ndarray):
        return
    types = (torch.Tensor, torch.nn.Parameter)
    if type(tensor) in types and view.dtype.isnative:
        launcher.register_torch(types, torch.strided, tensor.dtype, view.dtype.num, view.itemsize)
