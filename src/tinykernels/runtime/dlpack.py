"""DLPack through ctypes: exporting a device array as a capsule and reading one a consumer
hands us. Nothing here is CUDA-specific but the device type the caller passes; the CUDA
runtime (:mod:`.cuda`) uses it for ``CUDAArray.__dlpack__`` and ``tk.from_dlpack``.
"""
from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np

from .. import dtypes as D


def c_strides(shape: tuple, dtype) -> tuple:
    """The byte strides of a C-contiguous array of ``shape`` and ``dtype``."""
    st, acc = [], np.dtype(dtype).itemsize
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


# DLPack dtype codes (dlpack.h): kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool, kDLFloat8_*
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_DL_SPECIAL = {"bfloat16": (4, 16), "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8)}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensorVersioned))
_DLManagedTensorVersioned._fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                      ("deleter", _DELETER_V), ("flags", ctypes.c_uint64),
                                      ("dl_tensor", _DLTensor)]

_FLAG_READ_ONLY = 1           # DLPACK_FLAG_BITMASK_READ_ONLY of a versioned tensor
_FLAG_IS_COPIED = 2           # DLPACK_FLAG_BITMASK_IS_COPIED: the export owns a fresh copy
_EXPORTS: dict = {}            # explicit registry: id -> what an exported capsule keeps alive
_EXPORTS_LOCK = threading.Lock()
_CAPSULE_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
_CAPSULE_NAME_V = b"dltensor_versioned"
_USED_NAME_V = b"used_dltensor_versioned"
_FLOAT8_CODES = (10, 12)      # dtype codes that DLPack 1.1 added (kDLFloat8_e4m3fn, kDLFloat8_e5m2)
_CAPSULE_DTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _pyapi():
    api = ctypes.pythonapi
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DTOR]
    api.PyCapsule_IsValid.restype = ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_SetName.restype = ctypes.c_int
    api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return api


def _release(mt_ptr) -> None:
    """Drop what the export ``mt_ptr`` (either struct: ``manager_ctx`` is its registry key)
    keeps alive, the struct itself included."""
    try:
        _release_key(mt_ptr.contents.manager_ctx)
    except Exception:  # noqa: BLE001 - called from C
        pass


def _release_key(key: int) -> None:
    """Drop the export registered under ``key`` (its ``manager_ctx``)."""
    with _EXPORTS_LOCK:
        _EXPORTS.pop(key, None)


@functools.lru_cache(maxsize=None)
def _deleters() -> tuple:
    """(legacy, versioned) deleters of the tensors we export: the launcher extension's C
    functions, which stay valid when a consumer frees its view after Python has finalized
    (XLA does, at exit), else ctypes callbacks of :func:`_release`."""
    from . import launcher
    ext = launcher.get()
    d, dv = getattr(ext, "dlpack_deleter", None), getattr(ext, "dlpack_deleter_v", None)
    if not d or not dv:
        return _dl_deleter, _dl_deleter_v
    ext.register_dl_release(_release_key)
    return _DELETER(d), _DELETER_V(dv)


_dl_deleter = _DELETER(_release)
_dl_deleter_v = _DELETER_V(_release)


@_CAPSULE_DTOR
def _capsule_dtor(capsule_ptr):
    # an unconsumed capsule (still named "dltensor" / "dltensor_versioned") frees its tensor;
    # a consumed one was renamed "used_..." and the consumer calls the deleter itself
    try:
        obj = ctypes.cast(capsule_ptr, ctypes.py_object)
        api = _pyapi()
        for name, struct in ((_CAPSULE_NAME, _DLManagedTensor), (_CAPSULE_NAME_V, _DLManagedTensorVersioned)):
            if api.PyCapsule_IsValid(obj, name):
                _release(ctypes.cast(api.PyCapsule_GetPointer(obj, name), ctypes.POINTER(struct)))
    except Exception:  # noqa: BLE001 - called from C
        pass


def wants_versioned(max_version) -> bool:
    """Whether a consumer's ``__dlpack__(max_version=...)`` accepts a DLPack >= 1.0
    (versioned) capsule: ``max_version`` given with major version >= 1."""
    if max_version is None:
        return False
    try:
        return int(max_version[0]) >= 1
    except (TypeError, ValueError, IndexError):
        raise BufferError(f"__dlpack__: max_version must be a (major, minor) tuple, got {max_version!r}") from None


def _dl_dtype(dtype: np.dtype) -> tuple:
    d = D.from_any(dtype)
    if d is not None and d.name in _DL_SPECIAL:
        return _DL_SPECIAL[d.name]
    return _DL_CODES[dtype.kind], dtype.itemsize * 8


def _dlpack_capsule(a, max_version=None, *, copied: bool = False):
    """A DLPack capsule of the device array ``a`` (on its ``__dlpack_device__``: CUDA, ROCm):
    versioned ("dltensor_versioned", DLPack 1.x; ``copied``: the is-copied flag) when the
    consumer's ``max_version`` allows it, else legacy ("dltensor")."""
    versioned = wants_versioned(max_version)
    mt = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
    nd = len(a.shape)
    shape = (ctypes.c_int64 * max(nd, 1))(*a.shape)
    strides = (ctypes.c_int64 * max(nd, 1))(*[s // a.dtype.itemsize for s in a.strides])
    code, bits = _dl_dtype(a.dtype)
    mt.dl_tensor.data = a.ptr
    mt.dl_tensor.device = _DLDevice(*a.__dlpack_device__())
    mt.dl_tensor.ndim = nd
    mt.dl_tensor.dtype = _DLDataType(code, bits, 1)
    mt.dl_tensor.shape = shape
    mt.dl_tensor.strides = strides
    mt.dl_tensor.byte_offset = 0
    key = ctypes.addressof(mt)
    mt.manager_ctx = key
    if versioned:
        mt.version = _DLPackVersion(1, 1 if code in _FLOAT8_CODES else 0)
        mt.flags = _FLAG_IS_COPIED if copied else 0
        mt.deleter = _deleters()[1]
    else:
        mt.deleter = _deleters()[0]
    with _EXPORTS_LOCK:
        _EXPORTS[key] = (mt, shape, strides, a)
    return _new_capsule(key, _CAPSULE_NAME_V if versioned else _CAPSULE_NAME)


def _new_capsule(ptr: int, name: bytes):
    """A capsule of the DLPack struct at ``ptr`` whose destructor is C code: the launcher
    extension's ``dlpack_capsule_dtor`` (it saves the interpreter's error state around the
    deleter, so a consumer that fails keeps its own error; a Python destructor would make
    it SystemError). Without the extension (the ctypes launcher), the ctypes destructor."""
    c = _c_capsule_new()
    if c is None:
        return _pyapi().PyCapsule_New(ptr, name, _capsule_dtor)
    new, dtor = c
    return new(ptr, name, dtor)


@functools.lru_cache(maxsize=None)
def _c_capsule_new() -> tuple | None:
    """(PyCapsule_New taking the destructor as an address, the launcher extension's
    destructor address), looked up once; None with the ctypes launcher."""
    from . import launcher
    dtor = getattr(launcher.get(), "dlpack_capsule_dtor", None)
    if not dtor:
        return None
    proto = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return proto(ctypes.cast(ctypes.pythonapi.PyCapsule_New, ctypes.c_void_p).value), dtor


class _DLImport:
    """Keeps a consumed DLPack tensor alive; calls its deleter when the last view goes."""

    def __init__(self, mt, deleter, source):
        self.mt, self.deleter, self.source = mt, deleter, source

    def __del__(self):
        try:
            if self.deleter:
                self.deleter(self.mt)
        except Exception:  # noqa: BLE001
            pass


MAX_VERSION = (1, 1)           # the newest DLPack this module reads (1.1: the float8 codes)


def take_capsule(obj, stream=None):
    """``obj.__dlpack__`` as a DLPack 1.x consumer (``max_version``, so a producer that
    supports it hands a versioned capsule), falling back to the older signatures of
    exporters that predate the keyword (and ``stream``, when one is given)."""
    kw = {} if stream is None else {"stream": stream}
    try:
        return obj.__dlpack__(max_version=MAX_VERSION, **kw)
    except TypeError:                  # an exporter older than DLPack 1.0's keywords
        pass
    try:
        return obj.__dlpack__(**kw)
    except TypeError:
        if not kw:
            raise
        return obj.__dlpack__()


def _from_dlpack_capsule(capsule, source):
    """(ptr, shape, strides in bytes, numpy dtype, device tuple, owner) of a DLPack capsule."""
    api = _pyapi()
    versioned = bool(api.PyCapsule_IsValid(capsule, _CAPSULE_NAME_V))
    if versioned:
        p = api.PyCapsule_GetPointer(capsule, _CAPSULE_NAME_V)
        mt = ctypes.cast(p, ctypes.POINTER(_DLManagedTensorVersioned))
        if mt.contents.version.major > 1:
            raise BufferError(f"the DLPack tensor has version {mt.contents.version.major}."
                              f"{mt.contents.version.minor}; only 1.x is supported")
        t = mt.contents.dl_tensor
        deleter = mt.contents.deleter
        api.PyCapsule_SetName(capsule, _USED_NAME_V)
    elif api.PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        p = api.PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
        mt = ctypes.cast(p, ctypes.POINTER(_DLManagedTensor))
        t = mt.contents.dl_tensor
        deleter = mt.contents.deleter
        api.PyCapsule_SetName(capsule, _USED_NAME)
    else:
        raise ValueError("not a DLPack capsule")
    owner = _DLImport(mt, deleter, source)
    # as NumPy's importer: a legacy tensor cannot say it may be written, so it is read-only
    owner.readonly = not versioned or bool(mt.contents.flags & _FLAG_READ_ONLY)
    nd = t.ndim
    shape = tuple(t.shape[k] for k in range(nd))
    dtype = _np_from_dl(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    item = dtype.itemsize
    strides = tuple(t.strides[k] * item for k in range(nd)) if t.strides else c_strides(shape, dtype)
    return (t.data or 0) + t.byte_offset, shape, strides, dtype, (t.device.device_type, t.device.device_id), owner


def special_dtype(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one DLPack codes but NumPy's DLPack exporter and importer refuse
    (bfloat16, the float8 types: NumPy holds them through ml_dtypes)."""
    d = D.from_any(dtype)
    return d is not None and d.name in _DL_SPECIAL


class _HostView:
    """An ``__array_interface__`` over imported host memory that keeps the DLPack tensor alive
    (``np.asarray`` of it has it as its base)."""

    def __init__(self, ptr: int, shape: tuple, strides: tuple, typestr: str, readonly: bool, owner):
        self.__array_interface__ = {"data": (ptr, readonly), "shape": shape, "strides": strides,
                                    "typestr": typestr, "version": 3}
        self.owner = owner


def host_from_dlpack(obj) -> np.ndarray:
    """A zero-copy NumPy view of ``obj``, a DLPack exporter in host memory, read through this
    module's own importer, which also knows bfloat16 and float8 (NumPy's ``np.from_dlpack``
    refuses them). The view is read-only, as NumPy's, unless a versioned (DLPack 1.x) tensor
    says it may be written."""
    capsule = take_capsule(obj)
    ptr, shape, strides, dtype, dev, owner = _from_dlpack_capsule(capsule, obj)
    if dev[0] not in (1, 3, 11):       # kDLCPU, kDLCUDAHost, kDLROCMHost
        raise BufferError(f"the tensor is on DLPack device type {dev[0]}, not in host memory")
    as_uint = np.dtype(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else dtype
    size = int(np.prod(shape, dtype=np.int64))
    view = _HostView(ptr if size else 0, shape, strides if size else None, as_uint.str, owner.readonly, owner)
    return np.asarray(view).view(dtype)


def relabel_capsule(capsule, dtype: np.dtype):
    """``capsule``, NumPy's DLPack export (legacy or versioned) of an array's bits as unsigned
    integers of the same width, relabelled in place as ``dtype`` (bfloat16, float8: the types
    NumPy's exporter refuses). Relabelling NumPy's capsule rather than building one keeps its
    C destructor: a capsule whose destructor is Python code (a ctypes callback) would clear
    the error of a consumer that refuses the dtype and drops the capsule (NumPy's
    ``np.from_dlpack`` then fails with SystemError instead of its own error)."""
    code, bits = _dl_dtype(dtype)
    api = _pyapi()
    for name, struct in ((_CAPSULE_NAME_V, _DLManagedTensorVersioned), (_CAPSULE_NAME, _DLManagedTensor)):
        if api.PyCapsule_IsValid(capsule, name):
            mt = ctypes.cast(api.PyCapsule_GetPointer(capsule, name), ctypes.POINTER(struct)).contents
            assert mt.dl_tensor.dtype.bits == bits and mt.dl_tensor.dtype.code == 1   # kDLUInt
            mt.dl_tensor.dtype.code = code
            if name == _CAPSULE_NAME_V and code in _FLOAT8_CODES and mt.version.minor < 1:
                mt.version.minor = 1       # the float8 codes are DLPack 1.1's
            return capsule
    raise BufferError("NumPy's DLPack exporter returned something that is not a DLPack capsule")


def mark_copied(capsule):
    """``capsule`` with DLPack's is-copied flag set when it is versioned (a legacy capsule has
    no flags): for an export of a fresh copy the consumer alone owns."""
    api = _pyapi()
    if api.PyCapsule_IsValid(capsule, _CAPSULE_NAME_V):
        p = api.PyCapsule_GetPointer(capsule, _CAPSULE_NAME_V)
        ctypes.cast(p, ctypes.POINTER(_DLManagedTensorVersioned)).contents.flags |= _FLAG_IS_COPIED
    return capsule


def _np_from_dl(code, bits, lanes) -> np.dtype:
    if lanes != 1:
        raise ValueError("DLPack tensors with vector lanes are not supported")
    for name, (c, b) in _DL_SPECIAL.items():
        if (c, b) == (code, bits):
            return D.to_numpy(D.BY_NAME[name])
    kind = {0: "i", 1: "u", 2: "f", 6: "b"}.get(code)
    if kind is None:
        raise ValueError(f"unsupported DLPack dtype code {code}")
    return np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{bits // 8}")
