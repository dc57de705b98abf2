"""NVRTC in a child process, for processes that also run an LLVM-based driver.

NVRTC carries its own copy of LLVM. Compiling with it in a process that also compiles
OpenCL with PoCL (or Vulkan shaders with lavapipe, both LLVM-based) breaks the other
compiler: PoCL then folds constant NaNs wrongly or crashes, whichever of the two compiled
first. :func:`compile_isolated` therefore runs NVRTC in one long-lived child process
(started on first use, restarted if it dies), talking over pipes: a compile costs a
round trip, not a process start.

The child runs ``python -m tinykernels.runtime.nvrtc``, whose main calls :func:`serve`: it
reads length-prefixed pickled ``(source, arch, name, options)`` requests from stdin and
answers ``(ok, log, binary)``, or ``("error", text)`` when the request itself failed.
"""
from __future__ import annotations

import importlib.util
import os
import pickle
import struct
import subprocess
import sys
import threading

_LOCK = threading.Lock()
_CHILD: list = []          # explicit cache: the running worker process, if any


def isolation_wanted() -> bool:
    """Whether NVRTC should run in the child process: ``TK_NVRTC_ISOLATE=1``/``0`` decides;
    by default, when PoCL or lavapipe could run in this process (pyopencl or wgpu installed)."""
    v = os.environ.get("TK_NVRTC_ISOLATE", "").strip()
    if v in ("0", "1"):
        return v == "1"
    return any(importlib.util.find_spec(m) is not None for m in ("pyopencl", "wgpu"))


def _send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack("<Q", len(data)) + data)
    f.flush()


def _recv(f):
    head = f.read(8)
    if len(head) < 8:
        raise EOFError("the NVRTC worker process ended")
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(f.read(n))


def _child() -> subprocess.Popen:
    if _CHILD and _CHILD[0].poll() is None:
        return _CHILD[0]
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    p = subprocess.Popen([sys.executable, "-m", "tinykernels.runtime.nvrtc"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)
    _CHILD[:] = [p]
    return p


def compile_isolated(source: str, arch: str, name: str, opts) -> tuple:
    """``(ok, log, binary)`` of one NVRTC compile in the worker process."""
    with _LOCK:
        for attempt in (0, 1):           # a worker that died (killed, crashed) is started again once
            p = _child()
            try:
                _send(p.stdin, (source, arch, name, tuple(opts)))
                out = _recv(p.stdout)
                break
            except (EOFError, BrokenPipeError, OSError) as e:
                p.kill()
                _CHILD.clear()
                if attempt:
                    raise RuntimeError(f"the NVRTC worker process failed while compiling '{name}' ({e})") from None
    if out[0] == "error":
        raise RuntimeError(f"NVRTC in the worker process: {out[1]}")
    return out


def serve(compile_one) -> None:
    """The worker's loop: ``compile_one(source, arch, name, options)`` for each request."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr            # nothing else may write into the reply pipe
    while True:
        try:
            req = _recv(inp)
        except EOFError:
            return
        try:
            res = compile_one(*req)
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
            res = ("error", f"{type(e).__name__}: {e}")
        _send(out, res)
