"""DLPack through ctypes: exporting a device array as a capsule and reading one a consumer
hands us. Nothing here is CUDA-specific but the device type the caller passes; the CUDA
runtime (:mod:`.cuda`) uses it for ``CUDAArray.__dlpack__`` and ``tk.from_dlpack``.
"""
from __future__ import annotations

import ctypes
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
_EXPORTS: dict = {}            # explicit registry: id -> what an exported capsule keeps alive
_EXPORTS_LOCK = threading.Lock()
_CAPSULE_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
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


@_DELETER
def _dl_deleter(mt_ptr):
    try:
        key = mt_ptr.contents.manager_ctx
        with _EXPORTS_LOCK:
            _EXPORTS.pop(key, None)
    except Exception:  # noqa: BLE001 - called from C
        pass


@_CAPSULE_DTOR
def _capsule_dtor(capsule_ptr):
    # an unconsumed capsule (still named "dltensor") frees its tensor; a consumed one was
    # renamed "used_dltensor" and the consumer calls the deleter itself
    try:
        obj = ctypes.cast(capsule_ptr, ctypes.py_object)
        api = _pyapi()
        if api.PyCapsule_IsValid(obj, _CAPSULE_NAME):
            p = api.PyCapsule_GetPointer(obj, _CAPSULE_NAME)
            mt = ctypes.cast(p, ctypes.POINTER(_DLManagedTensor))
            _dl_deleter(mt)
    except Exception:  # noqa: BLE001 - called from C
        pass


def _dl_dtype(dtype: np.dtype) -> tuple:
    d = D.from_any(dtype)
    if d is not None and d.name in _DL_SPECIAL:
        return _DL_SPECIAL[d.name]
    return _DL_CODES[dtype.kind], dtype.itemsize * 8


def _dlpack_capsule(a):
    """A DLPack capsule of the device array ``a`` (on its ``__dlpack_device__``: CUDA, ROCm)."""
    mt = _DLManagedTensor()
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
    mt.deleter = _dl_deleter
    with _EXPORTS_LOCK:
        _EXPORTS[key] = (mt, shape, strides, a)
    return _pyapi().PyCapsule_New(key, _CAPSULE_NAME, _capsule_dtor)


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


def _from_dlpack_capsule(capsule, source):
    """(ptr, shape, strides in bytes, numpy dtype, device tuple, owner) of a DLPack capsule."""
    api = _pyapi()
    versioned = bool(api.PyCapsule_IsValid(capsule, b"dltensor_versioned"))
    if versioned:
        p = api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        mt = ctypes.cast(p, ctypes.POINTER(_DLManagedTensorVersioned))
        t = mt.contents.dl_tensor
        deleter = mt.contents.deleter
        api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
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
    try:
        capsule = obj.__dlpack__(max_version=(1, 0))
    except TypeError:                  # an exporter older than DLPack 1.0's keywords
        capsule = obj.__dlpack__()
    ptr, shape, strides, dtype, dev, owner = _from_dlpack_capsule(capsule, obj)
    if dev[0] not in (1, 3, 11):       # kDLCPU, kDLCUDAHost, kDLROCMHost
        raise BufferError(f"the tensor is on DLPack device type {dev[0]}, not in host memory")
    as_uint = np.dtype(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else dtype
    size = int(np.prod(shape, dtype=np.int64))
    view = _HostView(ptr if size else 0, shape, strides if size else None, as_uint.str, owner.readonly, owner)
    return np.asarray(view).view(dtype)


def host_capsule(a) -> object:
    """A DLPack capsule (legacy, device kDLCPU) of the host ``tk.Array`` ``a``, for the dtypes
    NumPy's exporter refuses (:func:`special_dtype`); the capsule keeps ``a`` alive."""
    return _dlpack_capsule(a)


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
