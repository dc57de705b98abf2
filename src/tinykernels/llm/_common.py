"""What every ``tinykernels.llm`` function shares: finding the backend of its arguments,
validating shapes and dtypes with errors that name the argument, allocating or checking
``out=``, and launching.

The wrappers stay thin: validate, allocate, launch one or a few kernels, return ``out``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import array as _arr
from ..backends import Backend

ArrayLike = Any          # NumPy array, tk.Array, torch tensor, DLPack / array-interface object


def is_array(x) -> bool:
    """True for anything a kernel takes as an array argument (not a Python/NumPy scalar)."""
    if isinstance(x, (bool, int, float, complex, np.generic, str, bytes, type(None))):
        return False
    return isinstance(x, (np.ndarray, _arr.Array)) or hasattr(x, "__dlpack__") or \
        hasattr(x, "__array_interface__") or hasattr(x, "__cuda_array_interface__")


def shape_of(x) -> tuple:
    return tuple(int(n) for n in x.shape)


def dtype_of(x) -> np.dtype:
    """The NumPy dtype of an array argument (torch tensors through their host view or name)."""
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    h = _arr.as_host_ndarray(x)
    if h is not None:
        return h.dtype
    name = str(dt).replace("torch.", "")
    from .. import dtypes as D
    t = D.from_any(name)
    if t is None:
        raise ValueError(f"unsupported array dtype {dt!r}")
    return np.dtype(t.np)


def backend_of(fn: str, **arrays) -> Backend:
    """The one backend all the named array arguments live on (None values are skipped);
    ``ValueError`` naming the arguments when they live on different backends."""
    found = None
    for name, a in arrays.items():
        if a is None or not is_array(a):
            continue
        b = _arr.get_backend(a)
        if found is None:
            found = (name, b)
        elif b != found[1]:
            raise ValueError(f"llm.{fn}: '{name}' is on {b!r} but '{found[0]}' is on {found[1]!r}; "
                             "move them to one backend (tk.asarray(x, backend=...))")
    if found is None:
        raise ValueError(f"llm.{fn}: needs at least one array argument")
    return found[1]


def require(cond: bool, fn: str, name: str, what: str) -> None:
    """``ValueError('llm.fn: argument name: what')`` unless ``cond``."""
    if not cond:
        raise ValueError(f"llm.{fn}: argument '{name}': {what}")


def require_dtype(x, fn: str, name: str, allowed) -> np.dtype:
    """``x``'s dtype, which must be one of ``allowed`` (NumPy dtypes or names)."""
    dt = dtype_of(x)
    ok = tuple(np.dtype(a) for a in allowed)
    require(dt in ok, fn, name, f"dtype {dt} is not supported (expected {', '.join(str(o) for o in ok)})")
    return dt


def require_shape(x, fn: str, name: str, shape: tuple) -> None:
    """``x`` has exactly ``shape`` (``None`` entries match any extent)."""
    s = shape_of(x)
    ok = len(s) == len(shape) and all(w is None or int(w) == g for w, g in zip(shape, s))
    want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
    require(ok, fn, name, f"shape {s} does not match the expected {want}")


def contiguous(x, fn: str, name: str) -> None:
    """Kernels that index a flat view need C-contiguous arrays."""
    h = _arr.as_host_ndarray(x)
    ok = h.flags.c_contiguous if h is not None else getattr(x, "is_contiguous", True)
    if callable(ok):
        ok = ok()
    require(bool(ok), fn, name, "must be C-contiguous (np.ascontiguousarray)")


def new_like(ref, shape: tuple, dtype, backend: Backend):
    """A new array of ``shape``/``dtype`` of the same kind as ``ref``: a NumPy array for NumPy,
    a torch tensor for torch, else a ``tk.Array`` on ``backend``."""
    dtype = np.dtype(dtype)
    if isinstance(ref, np.ndarray):
        return np.empty(shape, dtype)
    if _arr._is_torch(ref):
        import torch
        tdt = getattr(torch, dtype.name, None)
        if tdt is not None:
            return torch.empty(shape, dtype=tdt, device=ref.device)
    return _arr.empty(shape, dtype, backend=backend)


def output(out, fn: str, ref, shape: tuple, dtype, backend: Backend, name: str = "out"):
    """``out`` checked against ``shape``/``dtype``/``backend``, or a new array like ``ref``."""
    if out is None:
        return new_like(ref, tuple(shape), dtype, backend)
    require(is_array(out), fn, name, f"expected an array, got {type(out).__name__}")
    require_shape(out, fn, name, tuple(shape))
    require(dtype_of(out) == np.dtype(dtype), fn, name, f"dtype {dtype_of(out)} should be {np.dtype(dtype)}")
    require(_arr.get_backend(out) == backend, fn, name, f"is on {_arr.get_backend(out)!r}, expected {backend!r}")
    return out


def launch(kernel, backend: Backend, args: tuple, ndrange, workgroupsize=None, stream=None):
    """Launch ``kernel`` on ``backend`` (a static workgroup size when given) and return its event."""
    inst = kernel(backend, workgroupsize) if workgroupsize is not None else kernel(backend)
    return inst(*args, ndrange=ndrange, stream=stream)
