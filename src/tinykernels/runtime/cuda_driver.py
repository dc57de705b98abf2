"""The CUDA driver API through ``cuda.bindings.driver``: loading it, its error codes, cuInit.

Every CUDA runtime module reaches the driver through :func:`driver`, which imports the
bindings once (``BackendUnavailable`` with the install hint when they are missing). The
tests replace the bindings with a fake by setting this module's ``_DRIVER``.
"""
from __future__ import annotations

from functools import lru_cache

from ..errors import BackendUnavailable
from .nvrtc import HINT

_DRIVER = None              # cuda.bindings.driver once imported (a launch asks for it every time)

SUCCESS = (0,)              # what a driver call returns on success (CUDA_SUCCESS compares equal to 0)


def driver():
    """The ``cuda.bindings.driver`` module (imported on first use)."""
    global _DRIVER
    if _DRIVER is None:
        try:
            from cuda.bindings import driver as drv
        except ImportError as e:
            raise BackendUnavailable(f"the CUDA backend needs cuda-bindings: {HINT} ({e})") from None
        _DRIVER = drv
    return _DRIVER


def checked(res, what: str):
    """Unwrap a ``(CUresult, *values)`` tuple of cuda.bindings, raising on an error code."""
    if isinstance(res, tuple):
        err, vals = res[0], res[1:]
    else:
        err, vals = res, ()
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {error_string(err)}")
    return vals[0] if len(vals) == 1 else (vals if vals else None)


def error_string(err) -> str:
    """``NAME: description`` of a CUresult (never raises)."""
    name = getattr(err, "name", str(err))
    try:
        r, s = driver().cuGetErrorString(err)
        if int(r) == 0 and s:
            return f"{name}: {s.decode() if isinstance(s, bytes) else s}"
    except Exception:  # noqa: BLE001 - an error message must never raise
        pass
    return str(name)


@lru_cache(maxsize=None)
def init_driver() -> int:
    """cuInit once; the number of devices (raises BackendUnavailable with the reason)."""
    drv = driver()
    try:
        err, = drv.cuInit(0)
    except Exception as e:  # noqa: BLE001 - cuda-bindings raises when libcuda.so is missing
        raise BackendUnavailable(f"no NVIDIA driver found (libcuda could not be loaded: {e}); "
                                 "install the NVIDIA driver to use the CUDA backend") from None
    if int(err) != 0:
        raise BackendUnavailable(f"the CUDA driver failed to initialize ({error_string(err)}): "
                                 "no usable NVIDIA GPU, or the driver is not loaded")
    n = int(checked(drv.cuDeviceGetCount(), "cuDeviceGetCount"))
    if n == 0:
        raise BackendUnavailable("the NVIDIA driver found no CUDA device")
    return n


def probe_device(ordinal: int) -> tuple:
    """(name, compute capability, driver version) of a device, without a context."""
    drv = driver()
    A = drv.CUdevice_attribute
    h = checked(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    cc = tuple(int(checked(drv.cuDeviceGetAttribute(a, h), "cuDeviceGetAttribute"))
               for a in (A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                         A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    name = checked(drv.cuDeviceGetName(256, h), "cuDeviceGetName")
    name = (name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)).strip()
    return name, cc, int(checked(drv.cuDriverGetVersion(), "cuDriverGetVersion"))
