"""What every ``tinykernels.llm`` function shares: finding the backend of its arguments,
validating shapes and dtypes with errors that name the argument, allocating or checking
``out=``, and launching.

The wrappers stay thin: validate, allocate, launch one or a few kernels, return ``out``.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from .. import array as _arr
from ..argcheck import is_int  # noqa: F401 (the llm functions' int check: a bool is no int)
from ..backends import Backend
from ..errors import LaunchError
from ..runtime.base import stream_mismatch

ArrayLike = Any          # NumPy array, tk.Array, torch tensor, DLPack / array-interface object


_ARRAY_TYPES = frozenset((np.ndarray, _arr.Array))


def is_array(x) -> bool:
    """True for anything a kernel takes as an array argument (not a Python/NumPy scalar)."""
    if type(x) in _ARRAY_TYPES:       # the common case first (called a few times per llm call)
        return True
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


class StreamError(LaunchError, ValueError):
    """An llm function's ``stream=`` that cannot order work on its arrays' backend: a
    ``tk.LaunchError`` (as a kernel's bad ``stream=``) and a ``ValueError`` (as every other bad
    llm argument), naming the llm function and the argument."""


class PlacementError(LaunchError, ValueError):
    """An llm function's array argument that lives where no tinykernels backend is (a torch
    tensor on the ``meta`` device, ...): ``tk.get_backend``'s ``tk.LaunchError``, and a
    ``ValueError`` as every other bad llm argument, naming the llm function and the argument."""


def backend_of(fn: str, *, stream=None, **arrays) -> Backend:
    """The one backend all the named array arguments live on (None values are skipped);
    ``ValueError`` naming the arguments when they live on different backends. ``stream``
    (the call's ``stream=``) must be one of that backend's streams, checked here before any
    allocation or launch: a :class:`StreamError` naming ``llm.fn`` and ``stream``, not one
    naming an internal kernel."""
    found = None
    for name, a in arrays.items():
        if a is None or not is_array(a):
            continue
        try:
            b = _arr.get_backend(a)
        except LaunchError as e:
            raise PlacementError(f"llm.{fn}: argument '{name}': {e}") from None
        if found is None:
            found = (name, b)
        elif b != found[1]:
            raise ValueError(f"llm.{fn}: argument '{name}': expected an array on the backend of argument "
                             f"'{found[0]}' ({found[1]!r}), got one on {b!r}; move them to one backend "
                             "(tk.asarray(x, backend=...))")
    if found is None:
        raise ValueError(f"llm.{fn}: arguments {', '.join(repr(n) for n in arrays)}: expected at least "
                         "one array, got none")
    why = stream_mismatch(stream, found[1])
    if why is not None:
        raise StreamError(f"llm.{fn}: argument 'stream': {why}")
    return found[1]


def require(cond: bool, fn: str, name: str, what: str) -> None:
    """``ValueError('llm.fn: argument name: what')`` unless ``cond``. The one grammar of every
    llm argument error: ``what`` reads "expected <what was expected>, got <what was given>"."""
    if not cond:
        raise ValueError(f"llm.{fn}: argument '{name}': {what}")


def expected(fn: str, name: str, want: str, got: str) -> None:
    """Raise ``ValueError('llm.fn: argument name: expected want, got got')``."""
    require(False, fn, name, f"expected {want}, got {got}")


def shape_str(shape: tuple) -> str:
    """A shape as Python writes a tuple (``(4,)``, ``()``), ``None`` entries as ``*``."""
    items = ["*" if w is None else str(int(w)) for w in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def one_of(names) -> str:
    """``'a, b or c'``."""
    names = [str(n) for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


@lru_cache(maxsize=None)
def _dtypes(allowed: tuple) -> tuple:
    """``allowed`` (NumPy dtypes or names) as NumPy dtypes, computed once per tuple (building
    them was about half the host time of a small llm call)."""
    return tuple(np.dtype(a) for a in allowed)


def require_dtype(x, fn: str, name: str, allowed) -> np.dtype:
    """``x``'s dtype, which must be one of ``allowed`` (NumPy dtypes or names)."""
    dt = dtype_of(x)
    try:
        ok = _dtypes(tuple(allowed))
    except TypeError:                 # an unhashable entry: convert this once
        ok = tuple(np.dtype(a) for a in allowed)
    if dt not in ok:                  # the message only on failure (formatting dtypes is slow)
        expected(fn, name, f"dtype {one_of(ok)}", f"dtype {dt}")
    return dt


def scalar_value(x, stream=None) -> float:
    """The value of the 0-d array ``x`` as a Python float (exact for every float dtype); a
    device array is read back after the work queued on ``stream``."""
    h = _arr.as_host_ndarray(x)
    if h is None:
        if stream is not None:
            stream.synchronize()
        h = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    return float(h.astype(np.float64))


def int_value(fn: str, name: str, value, dt: np.dtype) -> int:
    """The scalar ``value`` as stored in an integer or bool array of dtype ``dt``: floats
    truncate toward zero and bools are 0/1, as ``np.full`` stores them; NaN, infinities and
    values out of ``dt``'s range are a ``ValueError`` naming the argument (NumPy refuses an
    out-of-range Python int too), not a wrapped or arbitrary value."""
    if dt.kind == "b":
        return int(bool(value))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            expected(fn, name, f"a finite value for a {dt} array", repr(value))
    v, info = int(value), np.iinfo(dt)
    if not info.min <= v <= info.max:
        expected(fn, name, f"a value in {dt}'s range {info.min} to {info.max}", repr(value))
    return v


def require_shape(x, fn: str, name: str, shape: tuple) -> None:
    """``x`` has exactly ``shape`` (``None`` entries match any extent)."""
    s = shape_of(x)
    if s == shape:                    # the common case, without formatting a message
        return
    ok = len(s) == len(shape) and all(w is None or int(w) == g for w, g in zip(shape, s))
    if not ok:
        expected(fn, name, f"shape {shape_str(shape)}", f"shape {shape_str(s)}")


def contiguous(x, fn: str, name: str) -> None:
    """Kernels that index a flat view need C-contiguous arrays."""
    h = _arr.as_host_ndarray(x)
    ok = h.flags.c_contiguous if h is not None else getattr(x, "is_contiguous", True)
    if callable(ok):
        ok = ok()
    if not ok:
        expected(fn, name, "a C-contiguous array", "a strided view (pass np.ascontiguousarray(...))")


def contiguous_input(x):
    """An input array as a C-contiguous array of the same kind: ``x`` itself when it already
    is one, else a contiguous copy (a transposed or sliced NumPy array, a strided torch
    tensor or ``tk.Array`` view). Only for arrays the call reads: an ``out`` must be
    contiguous itself (:func:`contiguous`), since writing a copy would not reach it."""
    h = _arr.as_host_ndarray(x)
    if h is not None:
        if h.flags.c_contiguous:
            return x
        if _arr._is_torch(x):
            return x.contiguous()
        if isinstance(x, _arr.Array):
            return _arr.asarray(np.ascontiguousarray(h), backend=_arr.get_backend(x))
        return np.ascontiguousarray(h)
    ok = getattr(x, "is_contiguous", None)          # a device torch tensor
    if callable(ok) and not ok():
        return x.contiguous()
    return x


def host_flat(x, dtype=None) -> np.ndarray | None:
    """A 1-D NumPy view of the C-contiguous host array ``x`` (its bits seen as ``dtype`` when
    given, of the same item size), or None (a device or strided array)."""
    h = _arr.as_host_ndarray(x)
    if h is None or not h.flags.c_contiguous:
        return None
    h = h.reshape(-1)
    return h.view(dtype) if dtype is not None else h


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


def output(out, fn: str, ref, shape: tuple, dtype, backend: Backend, name: str = "out",
           reads: dict | None = None, reads_across: dict | None = None):
    """``out`` checked against ``shape``/``dtype``/``backend``, or a new array like ``ref``.

    ``reads`` names the arrays the call reads (default ``{"x": ref}``): an ``out`` that overlaps
    one of them without being the very same view is refused (each work item would read
    elements that others overwrite: a race whose result depends on the schedule).
    ``reads_across`` names arrays whose elements other work items read (a table, a matrix, a
    permuted input): any overlap with them is refused, the same view included."""
    if out is None:
        return new_like(ref, tuple(shape), dtype, backend)
    require_array(out, fn, name)
    require_shape(out, fn, name, tuple(shape))
    if dtype_of(out) != dtype:        # (messages formatted only on failure: dtype names are slow)
        expected(fn, name, f"dtype {np.dtype(dtype)}", f"dtype {dtype_of(out)}")
    if _arr.get_backend(out) != backend:
        expected(fn, name, f"an array on {backend!r}", f"one on {_arr.get_backend(out)!r}")
    for arg, x in (reads if reads is not None else {"x": ref}).items():
        if is_array(x) and partly_overlaps(out, x):
            raise ValueError(f"llm.{fn}: argument '{name}': expected argument '{arg}' itself (in-place use "
                             f"passes the same view) or an array disjoint from it, got one that overlaps "
                             f"argument '{arg}'; pass a copy of '{arg}' otherwise")
    for arg, x in (reads_across or {}).items():
        if is_array(x) and shares_memory(out, x):
            raise ValueError(f"llm.{fn}: argument '{name}': expected an array sharing no memory with argument "
                             f"'{arg}' (other work items read it while '{name}' is written), got one that shares "
                             f"memory with argument '{arg}'; pass a copy of '{arg}' or another '{name}'")
    return out


def shares_memory(a, b) -> bool:
    """Whether host arrays ``a`` and ``b`` share memory; device arrays: whether they are the
    same array (device arrays have no views)."""
    ha, hb = _arr.as_host_ndarray(a), _arr.as_host_ndarray(b)
    if ha is None or hb is None:
        return a is b
    return ha.size > 0 and hb.size > 0 and np.may_share_memory(ha, hb) and np.shares_memory(ha, hb)


def partly_overlaps(a, b) -> bool:
    """Whether host arrays ``a`` and ``b`` share memory without being the same view (same
    address, shape, strides and item size). Device arrays have no views: False."""
    ha, hb = _arr.as_host_ndarray(a), _arr.as_host_ndarray(b)
    if ha is None or hb is None or ha.size == 0 or hb.size == 0 or not np.may_share_memory(ha, hb):
        return False
    same = (ha.__array_interface__["data"][0] == hb.__array_interface__["data"][0] and ha.shape == hb.shape
            and ha.strides == hb.strides and ha.itemsize == hb.itemsize)
    return not same and np.shares_memory(ha, hb)


CONTRACT_BACKENDS = frozenset(("WEBGPU",))
"""Backends where :func:`contracted` gives a kernel's ``fastmath`` twin: those whose
``fastmath`` only allows contraction (WebGPU: ``tk.fma`` becomes the WGSL ``fma`` builtin,
one instruction, instead of the correctly rounded emulation of about 130; nothing else
changes in its WGSL). Elsewhere ``fastmath`` also reassociates (the CPU, OpenCL), which the
library's CPU code shapes are not written for, or changes nothing the kernels need (CUDA's
``tk.fma`` is the hardware's already). Empty: every llm kernel exact (tests compare both)."""

_TWINS: dict = {}


def contracted(kernel, backend: Backend):
    """``kernel``, or on a backend of :data:`CONTRACT_BACKENDS` its ``fastmath`` twin (the
    same function compiled with ``@tk.kernel(fastmath=True)``, made once). Only for kernels
    whose documented accuracy is a tolerance on float sums taken in another order than
    NumPy's anyway (attention's dot products and ``p @ V``), never for those documented bit
    for bit (elementwise, casts, RoPE, fp8, quantization, copies) or decided by comparisons
    (argmax): docs/llm.md, "Exact and contracted kernels"."""
    if backend.name not in CONTRACT_BACKENDS:
        return kernel
    twin = _TWINS.get(kernel)
    if twin is None:
        from ..kernel import Kernel
        twin = _TWINS[kernel] = Kernel(kernel.fn, kernel.unsafe_indices, fastmath=True)
    return twin


def launch(kernel, backend: Backend, args: tuple, ndrange, workgroupsize=None, stream=None):
    """Launch ``kernel`` on ``backend`` (a static workgroup size when given) and return its event."""
    inst = kernel(backend, workgroupsize) if workgroupsize is not None else kernel.instance(backend)
    return inst(*args, ndrange=ndrange, stream=stream)


def host_args(*arrays) -> tuple | None:
    """``(backend, NumPy arrays)`` for the llm functions' host fast paths: every argument a
    plain ``np.ndarray`` or a CPU torch tensor of a NumPy dtype (on ``tk.CPU()`` with the
    environment's defaults, as ``tk.get_backend`` puts them; a tensor as its zero-copy NumPy
    view, bfloat16 and fp8 through ml_dtypes as ``tk.as_host_ndarray`` views them) or a host
    ``tk.Array`` (its NumPy array), all on one CPU backend; else None (the
    general path decides). The first argument may be None (an ``out=`` not given): it stays
    None, for the caller to allocate with :func:`host_new` once its checks pass. Only C-level
    type tests and attribute reads: a cold Python frame costs microseconds right after a
    large kernel (see ``Kernel.instance``)."""
    found, plain, hosts = None, False, []
    for a in arrays:
        t = type(a)
        if t is np.ndarray:
            plain = True
        elif t is _arr.Array and a._host is not None:
            if found is None:
                found = a.backend
            elif a.backend is not found:
                return None
            a = a._host
        elif t.__name__ == "Tensor" and t.__module__ == "torch" and a.is_cpu:   # (is_cpu: 10x device.type)
            plain = True                    # (detach where needed: as the general path's host view;
            if a.dtype in _torch_dtypes():
                a = a.numpy() if not a.requires_grad else a.detach().numpy()
            elif a.dtype in _torch_ml_dtypes():                     # bfloat16 and fp8: ml_dtypes)
                a = _arr.as_host_ndarray(a)
            else:                           # (complex, quantized, ...: the general path's errors)
                return None
        elif a is not None or hosts:        # (None: only an out not given, first)
            return None
        hosts.append(a)
    if found is None:
        found = _arr._cpu()
    elif plain and found is not _arr._cpu() and found != _arr._cpu():
        return None
    return (found, hosts) if found.name == "CPU" else None


def host_new(ref, shape: tuple, dtype: np.dtype) -> tuple:
    """``(result, its NumPy array)``: a new C-contiguous output of ``shape``/``dtype`` for a
    host fast path whose ``out=`` was not given, of the kind of the argument ``ref`` that
    :func:`host_args` accepted (as :func:`new_like` on the general path): a NumPy array, a
    host ``tk.Array`` on ``ref``'s backend, or a CPU torch tensor over a new NumPy array
    (``torch.from_numpy``: zero-copy, and 2x faster than ``torch.empty`` and its ``.numpy()``
    view)."""
    t, h = type(ref), np.empty(shape, dtype)
    if t is np.ndarray:
        return h, h
    if t is _arr.Array:
        return _arr.Array(h, ref._backend), h
    import torch
    return torch.from_numpy(h), h


@lru_cache(maxsize=1)
def _torch_dtypes() -> frozenset:
    """The torch dtypes whose tensors ``Tensor.numpy()`` views as NumPy arrays of the same
    dtype (bfloat16 and fp8 are viewed through ml_dtypes: ``tk.as_host_ndarray``)."""
    import torch
    return frozenset((torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.uint8,
                      torch.int8, torch.int16, torch.bool))


@lru_cache(maxsize=1)
def _torch_ml_dtypes() -> frozenset:
    """The torch dtypes ``tk.as_host_ndarray`` views through ml_dtypes (those torch has)."""
    import torch
    names = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
    return frozenset(getattr(torch, n) for n in names if hasattr(torch, n))


# np.may_share_memory without its __array_function__ dispatch (a Python frame per call; the
# arguments here are plain ndarrays, which no override concerns)
may_share_memory = _may_share_memory = getattr(np.may_share_memory, "_implementation", np.may_share_memory)


def host_same(out, *inputs, inplace: bool = False, dtype: np.dtype | None = None) -> tuple | None:
    """The shared test of the llm functions' host fast paths: ``(backend, (out, *inputs) as
    NumPy arrays, result)`` when every argument is a host array on one CPU backend
    (:func:`host_args`), all of one shape (rank 1 to 4, not empty), C-contiguous, the inputs
    of one float dtype of :data:`FAST_FLOATS` (``out``'s dtype is the caller's to check: a
    cast differs) and ``out`` sharing no memory with an input (``inplace``: unless the input
    is the very array ``out``, for kernels that may run in place; that input's slot then
    holds ``out``'s own NumPy array, so ``x is arrays[0]`` tells, for torch tensors too).
    ``out`` None: ``result`` is a new array of the inputs' shape and ``dtype`` (default: their
    dtype) of the kind of the first input (:func:`host_new`, as the general path allocates);
    else ``result`` is ``out``. None otherwise, and the caller takes its general path, which
    checks everything and launches the same kernel with the same arguments wherever this
    applies. It exists for the host time of a call right after a large kernel: each Python
    frame and lookup of the general path's checks is then a chain of cache misses, 240-285 us
    per call against torch's 100-170 (docs/llm.md, "Host time right after a large kernel")."""
    host = host_args(out, *inputs)
    if host is None:
        return None
    arrays = host[1]
    o, x0 = arrays[0], arrays[1]
    s, dt = x0.shape, x0.dtype
    if not 0 < len(s) <= MAX_RANK or not x0.size or dt not in FAST_FLOATS:
        return None
    if o is None:
        for x in arrays[1:]:
            if x.shape != s or x.dtype is not dt or not x.flags.c_contiguous:
                return None
        res, arrays[0] = host_new(inputs[0], s, dt if dtype is None else dtype)
        return host[0], arrays, res
    if o.shape != s or not o.flags.c_contiguous:
        return None
    for i in range(1, len(arrays)):   # (disjoint() inline: one frame less per call)
        x = arrays[i]
        if x.shape != s or x.dtype is not dt or not x.flags.c_contiguous:
            return None
        if _may_share_memory(o, x):
            if not (inplace and inputs[i - 1] is out):
                return None
            arrays[i] = o
    return host[0], arrays, out


def disjoint(out: np.ndarray, *inputs: np.ndarray) -> bool:
    """Whether the NumPy array ``out`` shares no memory with any of ``inputs`` (their byte
    ranges: a conservative test, as the flat kernels' ``tk.Const`` inputs need)."""
    for x in inputs:
        if _may_share_memory(out, x):
            return False
    return True


FAST_FLOATS = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))
"""The float dtypes of the host fast paths (every host backend supports them)."""

FAST_DTYPE_OF = {**{d: d for d in FAST_FLOATS}, **{d.type: d for d in FAST_FLOATS}}
"""A dtype of :data:`FAST_FLOATS` given as itself or as its NumPy scalar type -> the dtype."""


# ----------------------------------------------------------------------------- shared policy

FLOATS = ("float32", "float16", "bfloat16", "float64")
"""The float dtypes the arithmetic families take (each also subject to ``backend.supports``)."""

MAX_RANK = 4

COMPUTE_TYPES = {np.dtype(np.float64): np.float64}
"""dtype -> its compute type where that is not float32 (:func:`compute_type`); the host fast
paths look it up directly (``COMPUTE_TYPES.get(dt, F32_TYPE)``: no Python frame)."""

F32_TYPE = np.float32
"""``tk.float32`` (the same object: tinykernels' scalar types are NumPy's)."""


def compute_type(dt: np.dtype):
    """The type the row-wise kernels (norms, softmax, RoPE, argmax) compute and accumulate in
    for data of dtype ``dt``, passed to them as a constexpr ``T``: ``tk.float64`` for float64
    data, else ``tk.float32`` (float32, float16, bfloat16: SPEC's float32 accumulation).
    float64 data computed in float32 came back as float64 arrays with float32's precision (a
    relative error of 2e-7, RoPE 5e-6), which a NumPy user's float64 reference notices."""
    return COMPUTE_TYPES.get(np.dtype(dt), F32_TYPE)


FP8 = ("float8_e4m3fn", "float8_e5m2")
"""The 8-bit float dtypes (ml_dtypes'), which the reductions (``argmax``, ``sum``) also take,
as NumPy does: compared / accumulated in float32."""

INTS = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
"""The integer dtypes (and bool) the reductions (``argmax``, ``sum``) take, as NumPy's do."""

_COMPARE_TYPES = {np.dtype(d): (np.int32 if d in ("bool", "int8", "uint8", "int16", "uint16") else np.dtype(d).type)
                  for d in INTS}


def compare_type(dt: np.dtype) -> tuple:
    """``(T, lowest)``: the type :func:`layout.argmax` compares elements of dtype ``dt`` in,
    and its smallest value (the start of a running maximum): :func:`compute_type` and -inf
    for floats; for integers their own type (int32 for bool and those narrower than 32 bits,
    whose values it holds exactly) and its smallest integer."""
    dt = np.dtype(dt)
    t = _COMPARE_TYPES.get(dt)
    if t is None:
        return compute_type(dt), -math.inf
    return t, int(np.iinfo(t).min)


def sum_type(dt: np.dtype) -> np.dtype:
    """The dtype of :func:`softmax.sum`'s result for data of dtype ``dt``, NumPy's (``np.sum``
    on this platform): a float dtype itself; int64 for bool and signed integers, uint64 for
    unsigned ones (NumPy's default integer promotion of a sum, which wraps modulo 2**64)."""
    dt = np.dtype(dt)
    if dt.kind == "b" or dt.kind == "i":
        return np.dtype(np.int64)
    if dt.kind == "u":
        return np.dtype(np.uint64)
    return dt


LANES = 16
"""Partial results per row in the host (one work item per row) shapes of the row-wise
reductions: lane ``j`` takes the elements ``l`` with ``l % LANES == j``, so the inner loop
over the lanes is one SIMD register of float32 (AVX-512; two with AVX2) that the C compiler
vectorizes without reassociating a sum. The lanes are combined in order at the end."""

# Row-wise reductions: the number of work items that share one row. ``None``: by backend
# (one item per row on the CPU and the interpreter, where a plain loop over the row is
# fastest; a workgroup per row elsewhere). Tests set it to force one shape everywhere.
ROW_GROUP: int | None = None


def np_dtype(name) -> np.dtype | None:
    """The NumPy dtype of a dtype name (``None`` where NumPy cannot hold it, e.g. bfloat16
    without ml_dtypes); remembered per name."""
    try:
        return _np_dtype(name)
    except TypeError:                 # unhashable: look it up uncached
        return _np_dtype.__wrapped__(name)


@lru_cache(maxsize=None)
def _np_dtype(name) -> np.dtype | None:
    from .. import dtypes as D
    t = D.from_any(name)
    try:
        return D.to_numpy(t) if t is not None else None
    except (TypeError, ImportError, ValueError):
        return None


@lru_cache(maxsize=None)
def _float_dtypes(allowed: tuple) -> tuple:
    """The NumPy dtypes of the names ``allowed`` that NumPy can hold."""
    return tuple(d for d in (np_dtype(a) for a in allowed) if d is not None)


@lru_cache(maxsize=None)
def dtype_name(dt: np.dtype) -> str:
    """``dt.name``, remembered per dtype (NumPy computes it in Python on every access)."""
    return dt.name


def require_supported(backend: Backend, dt: np.dtype, fn: str, name: str) -> None:
    """``ValueError`` naming the argument unless ``backend`` supports arrays of ``dt``."""
    if not backend.supports(dtype_name(dt)):
        expected(fn, name, f"a dtype {backend!r} supports", f"dtype {dt}")


def require_float(x, fn: str, name: str, backend: Backend, allowed=FLOATS) -> np.dtype:
    """``x``'s dtype, one of ``allowed`` and supported by ``backend``."""
    dt = require_dtype(x, fn, name, _float_dtypes(tuple(allowed)))
    require_supported(backend, dt, fn, name)
    return dt


def require_rank(x, fn: str, name: str, lo: int = 1, hi: int = MAX_RANK) -> tuple:
    """``x``'s shape, of rank ``lo`` to ``hi``."""
    s = shape_of(x)
    if not lo <= len(s) <= hi:
        expected(fn, name, f"a {lo}-D array" if lo == hi else f"a {lo}-D to {hi}-D array", f"shape {shape_str(s)}")
    return s


def given(x) -> str:
    """What a non-array argument is, for a message: its type, and its value when short."""
    r = repr(x)
    return f"{type(x).__name__} {r}" if len(r) <= 40 and not isinstance(x, (list, tuple, dict)) else type(x).__name__


def require_array(x, fn: str, name: str, what: str = "an array") -> None:
    """``x`` is an array argument (NumPy, ``tk.Array``, torch, DLPack), not a scalar or a list."""
    if not is_array(x):
        expected(fn, name, what, given(x))


def row_group(backend: Backend, n: int = 1 << 30) -> int:
    """Work items per row for a row-wise reduction over rows of ``n`` elements."""
    if ROW_GROUP is not None:
        return ROW_GROUP
    if backend.name in ("CPU", "INTERP"):
        return 1
    w = 32
    while w < 256 and w < n:
        w *= 2
    return min(w, int(backend.max_workgroupsize))


def launch_rows(kernel, backend: Backend, args: tuple, rows: int, group: int, stream=None):
    """Launch a row-wise kernel: ``rows`` rows of ``group`` items each (ndrange (rows, group))."""
    if rows == 0:
        return None
    return launch(kernel, backend, args, (rows, group), (1, group), stream)


def is_debug(backend: Backend) -> bool:
    """Whether ``backend`` bounds-checks every access (debug mode)."""
    return bool(getattr(backend, "debug", False))


def view(x, shape: tuple):
    """``x`` (C-contiguous) seen with another ``shape`` of the same size, sharing memory.

    The llm kernels address arrays of rank 1 to 4 and tk.Array has no reshape, so 0-d
    results are launched through a one-element view. NumPy and torch reshape; a device array is a copy of the
    handle with the new shape (its buffer is shared)."""
    shape = tuple(int(n) for n in shape)
    if isinstance(x, np.ndarray):
        return x.reshape(shape)
    if _arr._is_torch(x):
        return x.view(shape)
    h = getattr(x, "_host", None)
    if h is not None:
        return _arr.Array(h.reshape(shape), x.backend)
    if hasattr(x, "_ptr") and hasattr(x, "_owner"):       # CUDA: a view over the same pointer
        return type(x)(x.backend, x._ptr, shape, x.dtype, None, x)
    import copy
    v = copy.copy(x)
    object.__setattr__(v, "_shape", shape)
    if hasattr(v, "_strides"):
        from ..runtime.device import c_strides
        object.__setattr__(v, "_strides", c_strides(shape, v.dtype))
    return v
