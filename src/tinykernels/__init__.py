"""tinykernels: write a compute kernel once in Python, run it on CPUs and GPUs.

    import tinykernels as tk

    @tk.kernel
    def saxpy(y, a, x: tk.Const):
        i = tk.index()
        y[i] = a * x[i] + y[i]

    saxpy(tk.CPU())(y, 2.0, x, ndrange=y.shape)

See SPEC.md for the contract and docs/ for the guides.
"""
# ruff: noqa: F401  (the public API is re-exported here)
import sys as _sys
import types as _types

from . import dtypes as _dtypes
from . import backends as _backends
from .errors import BackendUnavailable, CompileError, LaunchError, TinyKernelsError
from .lang import (Cartesian, Const, Global, Group, Linear, Local, atomic_add, atomic_and, atomic_cas,
                   atomic_exchange, atomic_max, atomic_min, atomic_or, atomic_sub, atomic_xor, clamp,
                   bitcast, constexpr, dot4_i8, dot_i8, dot_u4i8, fma, group_reduce, group_scan, groupsize, index, load_halves, load_i8, localmem, lookup_u4,
                   ndrange,
                   ngroups, private, rsqrt, select, sigmoid, uniform)
from .lang import print  # noqa: A004 - tk.print is the in-kernel print
from .backends import (CPU, Backend, backend, backends, default_backend,
                       available_devs as backends_available,
                       synchronize)
from .runtime.streams import Event, High, Low, Normal, Stream
from .array import Array, asarray, copyto, empty, from_blob, from_dlpack, full, get_backend, ones, zeros
from .kernel import Func, Kernel, KernelInstance, func, kernel
from . import random

__version__ = "0.1.0"

bool_ = _dtypes.PUBLIC["bool"]
int8, int16, int32, int64 = (_dtypes.PUBLIC[n] for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_dtypes.PUBLIC[n] for n in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (_dtypes.PUBLIC[n] for n in ("float16", "float32", "float64"))
bfloat16 = _dtypes.PUBLIC["bfloat16"]
float8_e4m3fn, float8_e5m2 = _dtypes.PUBLIC["float8_e4m3fn"], _dtypes.PUBLIC["float8_e5m2"]


# Imported on first use, so that ``import tinykernels`` stays light: the device runtimes
# (their classes live beside their runtime code), the interpreter and autodiff.
_LAZY = {
    "OpenCL": ("backends", "OpenCL"), "WebGPU": ("backends", "WebGPU"), "CUDA": ("backends", "CUDA"),
    "JAX": ("backends", "JAX"), "ROCm": ("backends", "ROCm"), "Metal": ("backends", "Metal"),
    "Interpreter": ("runtime.interp", "Interpreter"),
    **{n: ("runtime.interp", n) for n in ("DataRaceError", "DivergentBarrierError", "KernelCheckError",
                                               "KernelIndexError", "UninitializedReadError", "ZeroStepError")},
    **{n: ("autodiff", n) for n in ("Active", "Duplicated", "Forward", "Reverse", "adjoint", "autodiff",
                                    "gradcheck")},
}


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'tinykernels' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{where[0]}", __name__), where[1])
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))


class _Package(_types.ModuleType):
    """``tk.autodiff`` is the function, also after its submodule ``tinykernels.autodiff`` is
    imported (the import system then sets the package attribute to the module)."""

    def __setattr__(self, name: str, value) -> None:
        if name == "autodiff" and isinstance(value, _types.ModuleType):
            value = value.autodiff
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
