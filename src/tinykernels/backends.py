"""Backends: which device a kernel runs on, how to name it, and what it can do.

A backend object is a light, hashable description (``tk.CPU(threads=4)``); backends that
compare equal share their streams and compiled kernels.
"""
from __future__ import annotations

import importlib
import os
from functools import lru_cache

from . import lang
from .argcheck import timeout_arg
from .errors import BackendUnavailable
from .runtime.base import Backend
from .runtime.cpu import CPU
from .tracebacks import api_boundary


def _gpu_unavailable(name: str, hint: str):
    class _Missing(Backend):
        def __init__(self, *a, **k):
            raise BackendUnavailable(f"{name} backend is not available: {hint}")

        @staticmethod
        def available() -> tuple[bool, str]:
            return False, hint
    _Missing.__name__ = _Missing.__qualname__ = name
    _Missing.name = name
    return _Missing



# The device backends' classes live in their runtime modules, imported on first use (a CPU
# user never pays for pyopencl, wgpu or the CUDA bindings' Python side): by name here, by
# attribute (``backends.OpenCL``, ``tk.OpenCL``) through the module ``__getattr__`` below.
_RUNTIME_CLASSES = {"OpenCL": ".runtime.opencl", "WebGPU": ".runtime.webgpu", "CUDA": ".runtime.cuda",
                    "JAX": ".runtime.jaxrt", "ROCm": ".runtime.rocm", "Metal": ".runtime.metal"}
_KINDS = {"CPU": CPU, "ROCM": "ROCm", "HIP": "ROCm", "AMD": "ROCm", "METAL": "Metal",
          "CL": "OpenCL", "OPENCL": "OpenCL", "WEBGPU": "WebGPU", "WGPU": "WebGPU",
          "CUDA": "CUDA", "GPU": "CUDA", "NV": "CUDA", "JAX": "JAX"}


def _runtime_class(name: str):
    """The backend class ``name`` (OpenCL, WebGPU, CUDA, ROCm), importing its runtime module once."""
    cls = globals().get(name)
    if cls is None:
        cls = getattr(importlib.import_module(_RUNTIME_CLASSES[name], __package__), name)
        globals()[name] = cls
    return cls


def __getattr__(name: str):
    if name in _RUNTIME_CLASSES:
        return _runtime_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
_ORDER = ("CUDA", "ROCm", "Metal", "OpenCL", "WebGPU", "CPU", "INTERP")


def _interpreter_class():
    try:
        from .runtime.interp import Interpreter  # provided by the interpreter backend
        return Interpreter
    except ImportError:
        return _gpu_unavailable("Interpreter", "the Python interpreter backend is not implemented yet in this release")


_INTERP_KINDS = ("INTERP", "INTERPRETER", "PYTHON")


def parse_dev(spec: str, source: bool = False) -> tuple[str, str]:
    """Split and check a DEV string: ``(class name, argument)``, e.g. ``("CUDA", "1")`` for
    ``"cuda:1"``, ``("Interpreter", "CHECK")``. An unknown kind is ``tk.BackendUnavailable``; a
    device number (thread count for CPU) that is not a non-negative (positive) integer is a
    ``ValueError``. WebGPU's argument (an adapter name) and, for ``source()``, ROCm's
    ``gfx...`` architecture are passed on as they are."""
    kind, _, arg = spec.strip().partition(":")
    k, arg = kind.upper(), arg.strip()
    if k in _INTERP_KINDS:
        if arg and arg.upper() != "CHECK":
            raise BackendUnavailable(f"unknown interpreter option {arg!r} in {spec!r}: use INTERP or INTERP:CHECK")
        return "Interpreter", arg.upper()
    cls = _KINDS.get(k)
    if cls is None:
        raise BackendUnavailable(
            f"unknown backend {spec!r}: expected one of CPU, CUDA[:n], ROCM[:n], METAL, CL, WEBGPU, INTERP, JAX[:n]")
    name = "CPU" if cls is CPU else cls
    if not arg or name == "WebGPU" or (source and name == "ROCm" and arg.lower().startswith("gfx")):
        return name, arg
    if name == "CPU" and (not arg.isdigit() or int(arg) < 1):
        raise ValueError(f"bad thread count {arg!r} in the DEV string {spec!r}: expected a positive integer "
                         f"(e.g. '{kind}:1')")
    if not arg.isdigit():
        raise ValueError(f"bad device number {arg!r} in the DEV string {spec!r}: expected a non-negative integer "
                         f"(e.g. '{kind}:1')")
    return name, arg


@api_boundary
def backend(spec) -> Backend:
    """Make a backend from a DEV string (``"CPU"``, ``"CUDA:1"``, ``"CL"``, ``"INTERP"``) or return a backend as is."""
    if isinstance(spec, Backend):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"expected a backend or a DEV string, got {type(spec).__name__}")
    name, arg = parse_dev(spec)
    if name == "Interpreter":
        return _interpreter_class()(check=True) if arg else _interpreter_class()()
    if name == "CPU":
        return CPU(threads=int(arg)) if arg else CPU()
    cls = _runtime_class(name)
    if name == "WebGPU":
        return cls(int(arg) if arg.isdigit() else arg) if arg else cls()
    if name == "OpenCL":
        return cls(device=int(arg)) if arg else cls()
    return cls(int(arg)) if arg else cls()


@lru_cache(maxsize=None)
def _default_from_env(dev: str | None) -> Backend:
    if dev:
        try:
            return backend(dev)
        except (BackendUnavailable, ValueError) as e:   # say where the string came from
            raise type(e)(f"the DEV environment variable ({dev!r}): {e}") from None
    for cls in (_runtime_class("CUDA"), _runtime_class("ROCm"), _runtime_class("Metal")):
        if cls.available()[0]:
            return cls()
    return CPU()


def default_backend() -> Backend:
    """The backend named by ``DEV``, else the first available of CUDA, ROCm, Metal, CPU. A DEV
    of only spaces is unset, as an empty one is (tk.backend strips the spaces around a name;
    ``DEV=" "`` was "unknown backend ' '")."""
    return _default_from_env((os.environ.get("DEV") or "").strip() or None)


class BackendInfo(dict):
    """``tk.backends()``: name -> (available, detail); prints as a table."""

    def __str__(self) -> str:
        w = max(len(k) for k in self)
        return "\n".join(f"{k:<{w}}  {'yes' if ok else 'no '}  {why}" for k, (ok, why) in self.items())


DEV_NAMES = {"CUDA": "CUDA", "ROCm": "ROCM", "Metal": "METAL", "OpenCL": "CL", "WebGPU": "WEBGPU",
             "CPU": "CPU", "INTERP": "INTERP", "JAX": "JAX"}


def available_devs() -> list:
    """DEV strings of the backends available here (what CI passes to the conformance suite)."""
    return [DEV_NAMES[k] for k, (ok, _) in backends().items() if ok]


def backends() -> BackendInfo:
    """What is available on this machine and, for the rest, why not and how to get it."""
    info = BackendInfo()
    for name in ("CUDA", "ROCm", "Metal", "OpenCL", "WebGPU", "CPU", "INTERP", "JAX"):
        try:
            cls = (_runtime_class(name) if name in _RUNTIME_CLASSES else
                   _interpreter_class() if name == "INTERP" else globals()[name])
            info[name] = cls.available()
        except Exception as e:  # a probe must never break the listing
            info[name] = (False, f"probe failed: {e}")
    return info


@lang.intrinsic("synchronize")     # in a kernel: the workgroup barrier
def synchronize(b: Backend | str | None = None, timeout: float | None = None) -> None:
    """Wait for all outstanding work on a backend (a backend or a DEV string, as
    :func:`backend` takes; default: the default backend).

    With ``timeout`` (seconds), raise ``TimeoutError`` if work is still running by then (it
    keeps running; call again to wait more)."""
    if b is None:
        b = default_backend()
    elif isinstance(b, str) or not callable(getattr(b, "synchronize", None)):
        b = backend(b)                # a DEV string; anything else: TypeError naming its type
    timeout_arg("synchronize", timeout)   # a bad timeout is an error even when nothing is pending
    b.synchronize(timeout)

