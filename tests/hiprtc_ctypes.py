"""A real hiprtc behind hip-python's calling convention, for tests without hip-python.

hip-python needs a ROCm 6+ install; Debian 12's ROCm 5.2 packages (``libamdhip64-5``, which
holds hiprtc, and ``libamd-comgr2``) compile HIP without a GPU. :class:`CtypesHiprtc` calls
that library through ctypes with the same signatures and ``(err, *values)`` results as
``hip.hiprtc``, so ``tinykernels.runtime.rocm.compile_hip`` can be tested against the real
runtime compiler.

hiprtc brings its own LLVM (through comgr), which aborts the process ("Option ... registered
more than once") when another LLVM is already loaded (PoCL, lavapipe). So the library is only
ever loaded in a child process: :func:`available` and :func:`compile_batch` run one.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]


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


_BATCH = r'''
import json, sys
import hiprtc_ctypes
from tinykernels import CompileError
from tinykernels.runtime import rocm as rt
jobs = json.load(open(sys.argv[1]))
if jobs == "version":
    lib = hiprtc_ctypes._lib()
    ok = lib is not None and hiprtc_ctypes.CtypesHiprtc().hiprtcVersion()
    print(json.dumps(None if not ok or ok[0] else list(ok[1:])))
    raise SystemExit
rt._bindings = lambda: (None, hiprtc_ctypes.CtypesHiprtc())
out = []
for j in jobs:
    r = {}
    try:
        image = rt.compile_hip(j["src"], j["arch"], j["name"], j.get("options", ()), cache=j.get("cache", True))
        r = {"ok": True, "magic": image[:4].hex()}
    except CompileError as e:
        r = {"ok": False, "error": str(e), "filename": e.filename, "line": e.line}
    except Exception as e:
        r = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    r.update(compiles=rt.STATS["compiles"], disk_hits=rt.STATS["disk_hits"])
    out.append(r)
print(json.dumps(out))
'''


def _run(jobs, tmp_dir: Path, cache_dir: Path | None = None):
    tmp_dir.mkdir(parents=True, exist_ok=True)
    path = tmp_dir / "hiprtc_jobs.json"
    path.write_text(json.dumps(jobs))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(_ROOT / "src"), str(_ROOT / "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    if cache_dir is not None:
        env["TK_CACHE_DIR"] = str(cache_dir)
    r = subprocess.run([sys.executable, "-c", _BATCH, str(path)], capture_output=True, text=True, env=env,
                       timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"the hiprtc child process failed ({r.returncode}): {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


@lru_cache(maxsize=None)
def available() -> tuple:
    """(True, version) when a hiprtc library can be loaded here, else (False, why)."""
    import tempfile
    try:
        v = _run("version", Path(tempfile.mkdtemp(prefix="tk-hiprtc-")))
    except Exception as e:  # noqa: BLE001
        return False, f"hiprtc could not be probed: {e}"
    if v is None:
        return False, "no libamdhip64 with hiprtc (Debian: apt-get install libamdhip64-5)"
    return True, f"hiprtc {v[0]}.{v[1]}"


def compile_batch(jobs: list, tmp_dir: Path, cache_dir: Path | None = None) -> list:
    """Compile each job (``{"src", "arch", "name"[, "options", "cache"]}``) with
    ``tinykernels.runtime.rocm.compile_hip`` on the real hiprtc, in a child process; one
    result per job: ``ok``, ``magic`` (the code object's first bytes) or ``error``,
    ``filename``, ``line``, and the runtime's compile/disk-hit counts after it."""
    return _run(jobs, tmp_dir, cache_dir)


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
