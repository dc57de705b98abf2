"""DLPack through ctypes: exporting a device array as a capsule and reading one a consumer
hands us. Nothing here is CUDA-specific but the device type the caller passes; the CUDA
runtime (:mod:`.cuda`) uses it for ``CUDAArray.__dlpack__`` and ``tk.from_dlpack``.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from .. import dtypes as D
from .device import c_strides


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
    if api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
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
    nd = t.ndim
    shape = tuple(t.shape[k] for k in range(nd))
    dtype = _np_from_dl(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    item = dtype.itemsize
    strides = tuple(t.strides[k] * item for k in range(nd)) if t.strides else c_strides(shape, dtype)
    return (t.data or 0) + t.byte_offset, shape, strides, dtype, (t.device.device_type, t.device.device_id), owner


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
