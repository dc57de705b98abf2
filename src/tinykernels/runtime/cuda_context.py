"""CUDA devices: one primary context per device, made current per thread, and its limits.

A :class:`CUDADevice` is shared by every ``tk.CUDA(n)`` of one ordinal: the context, the
attributes a launch checks (block and grid limits, stream priorities), the architecture
kernels are compiled for, the loaded modules and the pool of event handles.
"""
from __future__ import annotations

import collections
import threading
import weakref

from ..errors import BackendUnavailable
from .cuda_driver import checked, driver, init_driver, probe_device
from .driverbackend import shared_device
from .nvrtc import choose_arch, nvrtc_available

CURRENT = threading.local()    # .ctx: the CUDADevice whose context is current on this thread


class CUDADevice:
    """Primary context, attributes and module cache of one device (shared by equal backends)."""

    def __init__(self, ordinal: int):
        drv = driver()
        A = drv.CUdevice_attribute
        self.drv = drv                    # the bindings this context belongs to (frees and activations
        self.ordinal = ordinal            # from __del__, whenever they run, use these)
        self.handle = checked(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = checked(drv.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        self.activate()

        def attr(a):
            return int(checked(drv.cuDeviceGetAttribute(a, self.handle), "cuDeviceGetAttribute"))
        self.name, self.cc, self.driver_version = probe_device(ordinal)
        self.max_threads = attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        self.max_grid = (attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                         attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))
        self.max_block = (attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                          attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z))
        lo, hi = checked(drv.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange")
        self.prio_least, self.prio_greatest = int(lo), int(hi)
        self.arch = choose_arch(self.cc, self.driver_version)
        self.modules: dict = {}           # source -> (module, function)
        self.lock = threading.Lock()
        self.streams = weakref.WeakSet()
        self.orphans = collections.deque()   # events recorded on dropped streams (driverstream.orphan_work)
        self.null = drv.CUstream(0)       # the legacy default stream (orders with every blocking stream)
        self.event_flags = int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        self.events: list = []            # CUevent handles of collected CUDAEvents, recorded again

    def activate(self) -> None:
        """Make the primary context current on this thread (once per thread)."""
        cur = getattr(CURRENT, "ctx", None)
        if cur is not self:
            checked(self.drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
            CURRENT.ctx = self


_DEVICES: dict = {}          # explicit cache: ordinal -> CUDADevice
_DEVICES_LOCK = threading.Lock()


def device_for(ordinal: int) -> CUDADevice:
    """The shared :class:`CUDADevice` of ``ordinal`` (BackendUnavailable when it cannot be used)."""
    return shared_device(_DEVICES, _DEVICES_LOCK, ordinal, init_driver(), CUDADevice, "CUDA")


def availability() -> tuple:
    """(True, what) when device 0 can run kernels, else (False, why). Creates no context."""
    try:
        n = init_driver()
        ok, nv = nvrtc_available()
        if not ok:
            return False, nv
        name, cc, v = probe_device(0)
        arch = choose_arch(cc, v)
    except BackendUnavailable as e:
        return False, str(e)
    except Exception as e:  # noqa: BLE001 - a probe never raises
        return False, f"CUDA probe failed: {e}"
    return True, (f"{name} (sm_{cc[0]}{cc[1]}), {n} device(s), driver CUDA {v // 1000}."
                  f"{v % 1000 // 10}, {nv}, compiling for {arch}")
