"""The ``tk.Array`` class and the zero-copy host views of array-likes.

A :class:`Array` pairs memory with the backend it lives on. On host backends (``tk.CPU()``,
the interpreter) the memory is a NumPy array, ``self._host``, of any strides: every host
operation is zero-copy NumPy (``a.numpy()`` is that very array, and writes through it are
seen by kernels). A device runtime subclasses :class:`Array` (``runtime.device.DeviceArray``),
sets ``_host = None`` and overrides the storage-specific members (``shape``, ``dtype``,
``strides``, ``ptr``, ``numpy``, ``__dlpack__``, ``__dlpack_device__``); the size helpers,
``__len__`` and ``__repr__`` here only use ``shape``/``dtype``/``numpy()``.

It lives in the runtime layer, below the API (``tinykernels.array`` re-exports it with the
constructors), so that the runtimes can derive from it without importing the API layer.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes as _dt

# DLPack device types (dlpack.h) whose memory the host CPU can address directly.
_DL_CPU, _DL_CUDA_HOST, _DL_ROCM_HOST = 1, 3, 11
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
_DL_HOST_TYPES = (_DL_CPU, _DL_CUDA_HOST, _DL_ROCM_HOST)
_DL_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDAHost", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
             10: "ROCm", 11: "ROCmHost", 12: "ExtDev", 13: "CUDAManaged", 14: "oneAPI",
             15: "WebGPU", 16: "Hexagon", 17: "MAIA"}

# torch dtypes NumPy cannot hold natively: reinterpret through an integer view (ml_dtypes).
_TORCH_VIEWS = {"bfloat16": ("int16", "bfloat16"), "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
                "float8_e5m2": ("uint8", "float8_e5m2")}

_NP2 = int(np.__version__.split(".")[0]) >= 2

_SCALARS = (int, float, bool, complex, np.generic, str, bytes, type(None))



def _dl_device(obj) -> tuple[int, int] | None:
    f = getattr(type(obj), "__dlpack_device__", None)
    if f is None:
        return None
    dev = f(obj)
    return int(dev[0]), int(dev[1])


def _dl_name(dev) -> str:
    return f"{_DL_NAMES.get(dev[0], f'device type {dev[0]}')}:{dev[1]}"


def _is_torch(obj) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "detach") and hasattr(obj, "device")


def check_torch_lazy_view(t, what: str) -> None:
    """ValueError for a torch tensor whose memory does not hold its values: a negated view
    (``x.neg()`` of a conjugate, ``torch._neg_view``) or a lazily conjugated one
    (``x.conj()``). torch's DLPack export hands out such memory as it is, without the sign
    (``np.from_dlpack`` then reads the negatives), so a zero-copy view would be wrong."""
    for flag, fix in (("is_neg", "resolve_neg"), ("is_conj", "resolve_conj")):
        test = getattr(t, flag, None)
        if test is not None and test():
            raise ValueError(f"{what}: the tensor is a lazy {'negated' if flag == 'is_neg' else 'conjugated'} view "
                             f"(tensor.{flag}() is True): its memory does not hold its values; pass "
                             f"tensor.{fix}() (a copy with the values)")


def _torch_host_view(t) -> np.ndarray | None:
    """Zero-copy NumPy view of a CPU torch tensor (None if it is not in host memory)."""
    if t.device.type != "cpu":
        return None
    check_torch_lazy_view(t, "torch tensor")
    t = t.detach()                           # a view; lets tensors that require grad through
    name = str(t.dtype).rpartition(".")[2]
    via = _TORCH_VIEWS.get(name)
    if via is not None:
        import torch
        npd = _dt.to_numpy(_dt.BY_NAME[via[1]])            # TypeError without ml_dtypes
        return t.view(getattr(torch, via[0])).numpy().view(npd)
    return t.numpy()


# ------------------------------------------------------------------------------ Array

class Array:
    """An n-dimensional array on a backend's device (host memory: a NumPy array, any strides).

    Make one with :func:`zeros`, :func:`ones`, :func:`empty`, :func:`full`, :func:`asarray`,
    :func:`from_dlpack` or :func:`from_blob`. ``dtype`` is a NumPy dtype, so
    ``a.dtype == tk.float32`` holds; ``strides`` are in bytes, as in NumPy.
    """
    __slots__ = ("_host", "_backend", "__weakref__")

    def __init__(self, host: np.ndarray, backend):
        if not isinstance(host, np.ndarray):
            raise TypeError(f"tk.Array wraps a numpy.ndarray, got {type(host).__name__}; "
                            "use tk.asarray(...) to convert other objects")
        self._host = host
        self._backend = backend

    # -- storage-specific (a device subclass overrides these) ------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._host.shape

    @property
    def dtype(self) -> np.dtype:
        return self._host.dtype

    @property
    def strides(self) -> tuple[int, ...]:
        """Bytes to step in each dimension (NumPy's convention)."""
        return self._host.strides

    @property
    def ptr(self) -> int:
        """Address of element ``[0, ..., 0]``."""
        return self._host.__array_interface__["data"][0]

    @property
    def is_contiguous(self) -> bool:
        """Whether the elements are densely packed in row-major (C) order."""
        return self._host.flags.c_contiguous

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array: on host backends the underlying array itself (zero-copy)."""
        return self._host

    @property
    def __array_interface__(self) -> dict:
        return self._host.__array_interface__

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        h = self.numpy()
        if dtype is not None and np.dtype(dtype) != h.dtype:
            if copy is False:
                raise ValueError(f"converting a tk.Array of {h.dtype} to {np.dtype(dtype)} needs a copy")
            return h.astype(dtype)
        return h.copy() if copy else h

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export as a DLPack capsule (NumPy's exporter; host memory, so ``stream`` must be None):
        versioned (DLPack 1.x, with the read-only and is-copied flags) when ``max_version``
        allows it, else legacy. bfloat16 and float8, which NumPy's exporter refuses, go out
        as NumPy's export of their bits relabelled with their DLPack type code."""
        h = self._host
        from .dlpack import relabel_capsule, special_dtype, wants_versioned
        special = special_dtype(h.dtype)
        if special:
            if not h.flags.writeable and not copy and not wants_versioned(max_version):
                raise BufferError("tk.Array.__dlpack__: cannot export a read-only array to a DLPack < 1.0 "
                                  "consumer, which cannot be told it is read-only (copy=True copies it)")
            h = h.view(f"u{h.dtype.itemsize}")
        if max_version is None and dl_device is None and copy is None:
            cap = h.__dlpack__(stream=stream)         # also works with NumPy < 2.1
        else:
            cap = h.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        return relabel_capsule(cap, self._host.dtype) if special else cap

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._host.__dlpack_device__()

    # -- generic ---------------------------------------------------------------------
    @property
    def backend(self):
        return self._backend

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per element (NumPy's ``ndarray.itemsize``)."""
        return self.dtype.itemsize

    def copy(self) -> "Array":
        """A new array of the same values, dtype and shape on the same backend (C-contiguous),
        as ``ndarray.copy()``; it waits for nothing queued on streams (synchronize first)."""
        return self._backend_array(np.array(self.numpy(), order="C", copy=True))

    def astype(self, dtype) -> "Array":
        """A new array of these values converted to ``dtype`` (a tk or NumPy dtype) on the same
        backend, as ``ndarray.astype`` converts (C casting: NumPy's unsafe casting); always a copy."""
        from .. import dtypes as _dt
        d = _dt.from_any(dtype)
        if d is None:
            raise TypeError(f"tk.Array.astype: unsupported dtype {dtype!r}: expected a tk dtype (tk.float32, ...) "
                            "or the matching NumPy dtype")
        return self._backend_array(np.asarray(self.numpy()).astype(_dt.to_numpy(d)))

    def _backend_array(self, h: np.ndarray) -> "Array":
        """``h`` (a new host array) as an Array of this array's backend."""
        b = self._backend
        if getattr(b, "is_host", False):
            return Array(h, b)
        return b.array_from_host(h)

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tk.Array")
        return shape[0]

    # --- one-element arrays as Python scalars (NumPy's rules): int(llm.argmax(x)) -------------

    def item(self):
        """The value of a one-element array as a Python scalar (``ndarray.item()``)."""
        return self.numpy().item()

    def __int__(self) -> int:
        return int(self.numpy())

    def __float__(self) -> float:
        return float(self.numpy())

    def __complex__(self) -> complex:
        return complex(self.numpy())

    def __index__(self) -> int:
        return operator.index(self.numpy())

    def __bool__(self) -> bool:
        """A 0-d array is its value's truth, as in NumPy; other arrays are true when not empty."""
        if not self.shape:
            return bool(self.numpy())
        return self.shape[0] != 0

    def __repr__(self) -> str:
        prefix = "tk.Array("
        try:
            body = np.array2string(self.numpy(), separator=", ", prefix=prefix, threshold=100)
        except Exception:  # noqa: BLE001 - a repr must not fail (e.g. data not readable)
            body = f"<shape={self.shape}>"
        backend = repr(self._backend).split(" # ", 1)[0]   # not "tk.OpenCL(...) # device name)": the ")" in the comment
        return f"{prefix}{body}, dtype={self.dtype.name}, backend={backend})"


def as_host_ndarray(obj) -> np.ndarray | None:
    """The zero-copy NumPy view of a host array-like, or None if ``obj`` is not a host array.

    Handles tk.Array (its ``_host``; None for device arrays), NumPy arrays (subclasses are
    viewed as plain ndarray), CPU torch tensors (also bfloat16/fp8 via ml_dtypes, and
    tensors that require grad), ``__array_interface__`` objects and DLPack exporters in
    host memory. Never copies. NumPy and Python scalars are not arrays (None).
    """
    t = type(obj)
    if t is Array:
        return obj._host
    if t is np.ndarray:
        return obj
    if isinstance(obj, _SCALARS):
        return None
    if isinstance(obj, Array):
        return obj._host
    if isinstance(obj, np.ndarray):
        return obj.view(np.ndarray)
    if _is_torch(obj):
        return _torch_host_view(obj)
    if hasattr(obj, "__array_interface__"):
        return np.asarray(obj, copy=False) if _NP2 else np.asarray(obj)
    if hasattr(obj, "__dlpack__"):
        dev = _dl_device(obj)
        if dev is not None and dev[0] in _DL_HOST_TYPES:
            return host_from_dlpack(obj)
    return None


def host_from_dlpack(obj) -> np.ndarray:
    """``np.from_dlpack(obj)`` for a DLPack exporter in host memory, also for bfloat16 and
    float8 tensors (which NumPy's importer refuses: then read through our own importer)."""
    try:
        return np.from_dlpack(obj)
    except BufferError:
        raise
    except (RuntimeError, TypeError, ValueError, SystemError) as e:   # SystemError: NumPy 2.x given a
        from .dlpack import host_from_dlpack as own                    # legacy bfloat16 capsule
        try:
            return own(obj)
        except Exception:  # noqa: BLE001 - ours could not read it either: NumPy's reason stands
            raise e from None


def staged(h: np.ndarray, source: np.ndarray) -> np.ndarray:
    """What an asynchronous copy from pageable host memory reads: ``h`` itself when it is
    already a private copy, else a copy of it made now, so that the caller may change
    ``source`` as soon as ``tk.copyto(..., stream=s)`` returns (as CUDA's
    ``cudaMemcpyAsync`` from pageable memory, CuPy and torch's ``non_blocking`` copies do)."""
    return np.array(h, copy=True) if np.may_share_memory(h, source) else h
