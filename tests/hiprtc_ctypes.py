"""A real hiprtc behind hip-python's calling convention, for tests without hip-python.

hip-python needs a ROCm 6+ install; Debian 12's ROCm 5.2 packages (``libamdhip64-5``, which
holds hiprtc, and ``libamd-comgr2``) compile HIP without a GPU. :class:`CtypesHiprtc` calls
that library through ctypes with the same signatures and ``(err, *values)`` results as
``hip.hiprtc``, so ``tinykernels.runtime.rocm.compile_hip`` can be tested against the real
runtime compiler (``monkeypatch.setattr(rt, "_bindings", lambda: (None, CtypesHiprtc()))``).
"""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=None)
def _lib():
    for name in ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", ctypes.util.find_library("amdhip64")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.hiprtcCompileProgram         # noqa: B018 - hiprtc is in libamdhip64 up to ROCm 5
            return lib
        except (OSError, AttributeError):
            continue
    return None


def available() -> tuple:
    """(True, version) when a hiprtc library can be loaded here, else (False, why)."""
    lib = _lib()
    if lib is None:
        return False, "no libamdhip64 with hiprtc (Debian: apt-get install libamdhip64-5)"
    ok, major, minor = CtypesHiprtc().hiprtcVersion()
    return (True, f"hiprtc {major}.{minor}") if ok == 0 else (False, f"hiprtcVersion failed ({ok})")


class CtypesHiprtc:
    """``hip.hiprtc``'s functions used by tinykernels, over the C library."""

    def __init__(self):
        self.lib = _lib()

    def hiprtcVersion(self):
        major, minor = ctypes.c_int(), ctypes.c_int()
        return self.lib.hiprtcVersion(ctypes.byref(major), ctypes.byref(minor)), major.value, minor.value

    def hiprtcCreateProgram(self, src: bytes, name: bytes, n: int, headers, names):
        prog = ctypes.c_void_p()
        err = self.lib.hiprtcCreateProgram(ctypes.byref(prog), src, name, 0, None, None)
        return err, prog

    def hiprtcCompileProgram(self, prog, n: int, opts):
        arr = (ctypes.c_char_p * max(n, 1))(*opts)
        return (self.lib.hiprtcCompileProgram(prog, n, arr),)

    def hiprtcGetProgramLogSize(self, prog):
        n = ctypes.c_size_t()
        return self.lib.hiprtcGetProgramLogSize(prog, ctypes.byref(n)), n.value

    def hiprtcGetProgramLog(self, prog, buf: bytearray):
        raw = (ctypes.c_char * len(buf)).from_buffer(buf)
        return (self.lib.hiprtcGetProgramLog(prog, raw),)

    def hiprtcGetCodeSize(self, prog):
        n = ctypes.c_size_t()
        return self.lib.hiprtcGetCodeSize(prog, ctypes.byref(n)), n.value

    def hiprtcGetCode(self, prog, buf: bytearray):
        raw = (ctypes.c_char * len(buf)).from_buffer(buf)
        return (self.lib.hiprtcGetCode(prog, raw),)

    def hiprtcDestroyProgram(self, prog):
        return (self.lib.hiprtcDestroyProgram(ctypes.byref(prog)),)
