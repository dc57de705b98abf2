"""The AMD ROCm runtime (``tk.ROCm(device=0)``, ``DEV=ROCm``, ``DEV=HIP:1``) on ``hip-python``.

Code generation (:mod:`tinykernels.codegen.hip`) needs no GPU: ``kernel.source("ROCm", ...)``
renders for :class:`ROCmTarget` (``gfx90a`` unless told). Everything else goes through the
``hip-python`` bindings (``from hip import hip, hiprtc``, imported on first use) and needs
an AMD GPU with ROCm; it has not been run on one by this project's CI, which compiles the
generated code with clang for gfx90a and gfx1100 instead (tests/test_rocm.py):

* hiprtc compiles each generated source for the device's ``gcnArchName`` (e.g.
  ``gfx90a:sramecc+:xnack-``), with ``-ffp-contract=off`` (float results match NumPy's;
  ``@tk.kernel(fastmath=True)`` allows contraction); code objects are cached on disk under
  ``TK_CACHE_DIR``/rocm, keyed by the source, the hiprtc version, the architecture and the
  options, written atomically and sealed (the CPU's cache helpers);
* ``hipModuleLoadData`` loads them; launches pass the arguments as one buffer in the
  kernel's ABI layout (each parameter at its natural alignment: :func:`arg_buffer`) through
  ``hipModuleLaunchKernel``'s ``extra`` (``HIP_LAUNCH_PARAM_BUFFER_POINTER``);
* device arrays (:class:`ROCmArray`) from ``hipMalloc``; they export DLPack with
  ``kDLROCM`` and take other libraries' ROCm tensors (PyTorch for ROCm...) zero-copy;
* streams are ``hipStreamCreateWithPriority`` streams (tk.High: the greatest priority),
  events are HIP events.

What HIP has in common with CUDA's driver API is written once in the generic modules this
one subclasses or calls: ``driverbackend.py`` (the backend's copies, streams and
synchronization, the device registry, module loading, launch checks), ``drivermemory.py``
(arrays), ``driverstream.py`` (streams, events), ``paramblock.py`` (argument values and
the packed buffer) and ``compiler.cached_binary`` (the disk cache).
"""
from __future__ import annotations

import ctypes
import hashlib
import collections
import threading
import weakref
from functools import lru_cache

import numpy as np

from .. import dtypes as D
from ..codegen.hip import DEFAULT_ARCH, wave_size
from ..errors import BackendUnavailable, CompileError, LaunchError
from .base import Backend, KernelInstance
from .device import DeviceKernelInstance, arg_sig, check_debug_info, check_device_array, clang_log_error, \
    debug_flag, fits32, group_plan, is_host_array
from .dlpack import _from_dlpack_capsule, take_capsule
from .driverbackend import DriverBackend, check_grid, check_stream, kernel_function, shared_device
from .drivermemory import DriverAllocation, DriverArray
from .driverstream import DriverEvent, DriverStream
from .paramblock import NP_PARAM as _NP_PARAM, arg_buffer, arg_offsets, bind_args, grid_dims  # noqa: F401
from .streams import Event, completed_event

HINT = ("install ROCm and the hip-python release matching it (e.g. pip install 'hip-python~=6.4.0' for "
        "ROCm 6.4; see docs/rocm.md)")
HIPRTC_OPTIONS = ("-O3", "-ffp-contract=off")       # no contraction into FMA: float results match NumPy's
FASTMATH_HIPRTC_OPTIONS = ("-ffp-contract=fast",)  # @tk.kernel(fastmath=True)
DL_ROCM = 10                                        # DLPack's kDLROCM
STATS = {"compiles": 0, "disk_hits": 0}
_NOT_READY = 600                                    # hipErrorNotReady
# hipModuleLaunchKernel's ``extra`` protocol (HIP_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END)
_PARAM_BUFFER_POINTER, _PARAM_BUFFER_SIZE, _PARAM_END = 1, 2, 3


# ----------------------------------------------------------------------------- bindings

def _bindings():
    """(hip, hiprtc) modules of hip-python; BackendUnavailable when they are missing."""
    try:
        from hip import hip, hiprtc
    except ImportError as e:
        raise BackendUnavailable(f"the ROCm backend needs hip-python: {HINT} ({e})") from None
    except Exception as e:  # noqa: BLE001 - the bindings load libamdhip64 at import
        raise BackendUnavailable(f"hip-python could not load the HIP runtime ({e}): {HINT}") from None
    return hip, hiprtc


def _hip():
    return _bindings()[0]


def _hiprtc():
    return _bindings()[1]


def _errstr(err) -> str:
    try:
        s = _hip().hipGetErrorString(err)
        s = s[-1] if isinstance(s, tuple) else s
        return (s.decode(errors="replace") if isinstance(s, bytes) else str(s)) + f" ({int(err)})"
    except Exception:  # noqa: BLE001
        return str(getattr(err, "name", err))


def _ok(res, what: str):
    """The values of a hip-python call (``(err, *values)``), or RuntimeError naming the call."""
    err, vals = (res[0], res[1:]) if isinstance(res, tuple) else (res, ())
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {_errstr(err)}")
    return vals[0] if len(vals) == 1 else (vals or None)


# ----------------------------------------------------------------------------- hiprtc

@lru_cache(maxsize=None)
def hiprtc_version() -> tuple:
    """(major, minor) of the hiprtc library hip-python loads."""
    rtc = _hiprtc()
    try:
        major, minor = _ok(rtc.hiprtcVersion(), "hiprtcVersion")
    except RuntimeError as e:
        raise BackendUnavailable(f"hiprtc could not be used: {e}") from None
    return int(major), int(minor)


def code_object_path(source: str, arch: str, options=()):
    """Where the code object of ``source`` compiled for ``arch`` with ``options`` is cached."""
    from .compiler import cache_dir
    major, minor = hiprtc_version()
    key = hashlib.sha256("\0".join([f"hiprtc-{major}.{minor}", arch, " ".join(options), source]).encode()).hexdigest()
    return cache_dir() / "rocm" / key[:2] / f"{key}.hsaco"


def hiprtc_options(arch: str, options=()) -> tuple:
    """The hiprtc options: the architecture, then the defaults that ``options`` do not override."""
    options = tuple(options)
    contract = any(o.startswith("-ffp-contract=") for o in options)
    base = tuple(o for o in HIPRTC_OPTIONS if not (contract and o.startswith("-ffp-contract=")))
    return (f"--offload-arch={arch}",) + base + options


def compile_hip(source: str, arch: str, name: str = "kernel", options=(), cache: bool = True) -> bytes:
    """Compile HIP C++ with hiprtc to a code object for ``arch`` (a gcnArchName), cached on
    disk (:func:`code_object_path`). A compile error raises ``tk.CompileError`` with the log."""
    from .compiler import cached_binary
    opts = hiprtc_options(arch, options)

    def build() -> bytes:
        ok, log, data = _hiprtc_compile(source, name, opts)
        if not ok:
            raise _compile_error(name, source, log, arch)
        return data
    return cached_binary(code_object_path(source, arch, opts) if cache else None, STATS, build)


def _hiprtc_compile(source: str, name: str, opts) -> tuple:
    """(ok, log, code object) of one hiprtc compile."""
    rtc = _hiprtc()
    hiprtc_version()
    prog = _ok(rtc.hiprtcCreateProgram(source.encode(), f"{name}.hip".encode(), 0, [], []), "hiprtcCreateProgram")
    try:
        args = [o.encode() for o in opts]
        res = rtc.hiprtcCompileProgram(prog, len(args), args)
        err = res[0] if isinstance(res, tuple) else res
        size = int(_ok(rtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize"))
        buf = bytearray(max(size, 1))
        _ok(rtc.hiprtcGetProgramLog(prog, buf), "hiprtcGetProgramLog")
        log = bytes(buf).rstrip(b"\0").decode(errors="replace")
        if int(err) != 0:
            return False, log or str(getattr(err, "name", err)), b""
        size = int(_ok(rtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize"))
        code = bytearray(size)
        _ok(rtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
        return True, log, bytes(code)
    finally:
        rtc.hiprtcDestroyProgram(prog)


def _compile_error(name: str, source: str, log: str, arch: str) -> CompileError:
    """hiprtc's log (clang's diagnostics), the Python line its ``#line`` directives point at."""
    return clang_log_error(f"hiprtc rejected the generated HIP code for kernel '{name}' ({arch})", log, name)


# ----------------------------------------------------------------------------- devices

_TLS = threading.local()


class _Device:
    """Properties, module cache, streams and events of one device (shared by equal backends)."""

    def __init__(self, ordinal: int):
        hip = _hip()
        self.ordinal = ordinal
        self.activate()
        p = _properties(ordinal)
        self.name = _text(p.name)
        self.arch = _text(p.gcnArchName) or DEFAULT_ARCH
        self.wave = int(getattr(p, "warpSize", 0) or wave_size(self.arch))
        self.max_threads = int(p.maxThreadsPerBlock)
        self.max_grid = tuple(int(n) for n in list(p.maxGridSize)[:3])
        least, greatest = _ok(hip.hipDeviceGetStreamPriorityRange(), "hipDeviceGetStreamPriorityRange")
        self.prio_least, self.prio_greatest = int(least), int(greatest)
        self.modules: dict = {}           # source -> (module, function)
        self.lock = threading.Lock()
        self.streams = weakref.WeakSet()
        self.orphans = collections.deque()   # events recorded on dropped streams (driverstream.orphan_work)
        self.null = None                  # the default (null) stream

    def activate(self) -> None:
        """Make this device current on this thread (once per thread)."""
        if getattr(_TLS, "dev", None) is not self:
            _ok(_hip().hipSetDevice(self.ordinal), "hipSetDevice")
            _TLS.dev = self


def _text(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).split(b"\0", 1)[0].decode(errors="replace")
    return str(v).strip()


def _properties(ordinal: int):
    hip = _hip()
    props = hip.hipDeviceProp_t()
    _ok(hip.hipGetDeviceProperties(props, ordinal), "hipGetDeviceProperties")
    return props


_DEVICES: dict = {}
_DEVICES_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _init() -> int:
    """The number of HIP devices (raises BackendUnavailable with the reason)."""
    hip = _hip()
    try:
        res = hip.hipGetDeviceCount()
    except Exception as e:  # noqa: BLE001
        raise BackendUnavailable(f"the HIP runtime could not be initialized ({e}): {HINT}") from None
    err = res[0] if isinstance(res, tuple) else res
    if int(err) != 0:
        raise BackendUnavailable(f"no usable AMD GPU: hipGetDeviceCount failed ({_errstr(err)})")
    n = int(res[1])
    if n == 0:
        raise BackendUnavailable("the HIP runtime found no AMD GPU")
    return n


def _device(ordinal: int) -> _Device:
    return shared_device(_DEVICES, _DEVICES_LOCK, ordinal, _init(), _Device, "ROCm")


# ----------------------------------------------------------------------------- backends

class ROCm(DriverBackend):
    """An AMD GPU through the HIP runtime; kernels are compiled with hiprtc.

    ``device``: the device ordinal. ``debug``: bounds-check every array access (also
    ``TK_DEBUG=1``)."""
    name = "ROCm"
    dev = "ROCM"

    @staticmethod
    def _device_for(ordinal: int) -> _Device:
        return _device(ordinal)

    @property
    def arch(self) -> str:
        """The gcnArchName kernels are compiled for (``gfx90a:sramecc+:xnack-``)."""
        return self._dev.arch

    @property
    def wave(self) -> int:
        """Lanes per wavefront (64 on CDNA/GCN, 32 on RDNA)."""
        return self._dev.wave

    def __repr__(self) -> str:
        return f"tk.ROCm(device={self.device}{', debug=True' if self.debug else ''}) # {self.device_name} ({self.arch})"

    @staticmethod
    def available() -> tuple:
        """(True, what) when device 0 can run kernels, else (False, why)."""
        try:
            n = _init()
            major, minor = hiprtc_version()
            p = _properties(0)
        except BackendUnavailable as e:
            return False, str(e)
        except Exception as e:  # noqa: BLE001 - a probe never raises
            return False, f"ROCm probe failed: {e}"
        return True, f"{_text(p.name)} ({_text(p.gcnArchName)}), {n} device(s), hiprtc {major}.{minor}"

    # --- what DriverBackend asks of the HIP runtime ------------------------------------------

    @staticmethod
    def _adopt(obj) -> "ROCmArray | None":
        return as_rocm_array(obj)             # e.g. a PyTorch for ROCm tensor

    @staticmethod
    def _htod(ptr: int, host: int, nbytes: int) -> None:
        _ok(_hip().hipMemcpyHtoD(ptr, host, nbytes), "hipMemcpyHtoD")

    @staticmethod
    def _copy_dtod(dst, src, h_stream) -> None:
        _ok(_hip().hipMemcpyDtoDAsync(dst.ptr, src.ptr, src.nbytes, h_stream), "hipMemcpyDtoDAsync")

    @staticmethod
    def _copy_htod(dst, h: np.ndarray, stream, h_stream) -> None:
        if stream is not None:
            stream.synchronize()
        _ok(_hip().hipMemcpyHtoD(dst.ptr, h.ctypes.data, h.nbytes), "hipMemcpyHtoD")   # h may go after

    @staticmethod
    def _device_synchronize() -> None:
        _ok(_hip().hipDeviceSynchronize(), "hipDeviceSynchronize")

    instance_class = None   # set below


class ROCmTarget(Backend):
    """What the code generator needs to know about an AMD GPU, with no device: used by
    ``kernel.source("ROCm", ...)``. ``arch``: the gfx architecture (its wavefront size
    shapes the collectives). It cannot launch."""
    name = "ROCm"
    dev = "ROCM"
    is_host = False
    supports_float64 = True
    max_workgroupsize = 1024

    def __init__(self, arch: str = DEFAULT_ARCH, debug: bool | None = None):
        self.wave = wave_size(arch)          # ValueError for an unknown architecture
        self.arch = str(arch)
        self.debug = debug_flag(debug, self)

    def key(self) -> tuple:
        return ("ROCm-source", self.arch, self.debug)

    def __repr__(self) -> str:
        return f"tk.runtime.rocm.ROCmTarget(arch={self.arch!r}, debug={self.debug})"

    @staticmethod
    def available() -> tuple:
        return False, "a code-generation target only"

    def supports(self, dtype) -> bool:
        return D.queried(dtype) is not None

    instance_class = None   # set below


def hip_source(kernel, *args, ndrange, workgroupsize=None, arch: str = DEFAULT_ARCH, debug=None) -> str:
    """The HIP C++ translation unit of ``kernel`` for these arguments and ``arch``, on any machine."""
    return kernel(ROCmTarget(arch, debug)).source(*args, ndrange=ndrange, workgroupsize=workgroupsize)


# ----------------------------------------------------------------------------- arrays

class _Allocation(DriverAllocation):
    """Device memory from hipMalloc, freed when the last array using it goes."""
    __slots__ = ()

    @staticmethod
    def _malloc(nbytes: int) -> int:
        return _ok(_hip().hipMalloc(nbytes), "hipMalloc")

    @staticmethod
    def _free(ptr: int) -> None:
        _hip().hipFree(ptr)


class ROCmArray(DriverArray):
    """An array in an AMD GPU's memory: its own allocation, or a zero-copy view of another
    library's ROCm tensor (through DLPack, ``kDLROCM``). Any strides."""
    __slots__ = ()
    label = "ROCm"
    dl_device_type = DL_ROCM
    allocation = _Allocation
    dlpack_ordered = (0, 1, 2, -1)       # the null stream (0, and CUDA's names 1, 2), and "no sync"

    def _to_host(self, dst: int, src: int, nbytes: int) -> None:
        _ok(_hip().hipMemcpyDtoH(dst, src, nbytes), "hipMemcpyDtoH")

    def _consumer_waits(self, stream: int) -> None:
        ev = ROCmEvent.record(self._backend._dev, self._backend._dev.null)
        _ok(_hip().hipStreamWaitEvent(stream, ev.handle, 0), "hipStreamWaitEvent")


def as_rocm_array(obj, backend: ROCm | None = None) -> ROCmArray | None:
    """A zero-copy ROCmArray view of another library's ROCm tensor (any DLPack exporter on
    a ``kDLROCM`` device, e.g. a PyTorch for ROCm tensor), or None if ``obj`` is not one."""
    if isinstance(obj, ROCmArray):
        return obj
    if isinstance(obj, np.ndarray) or not (hasattr(obj, "__dlpack__") and hasattr(type(obj), "__dlpack_device__")):
        return None
    t, i = obj.__dlpack_device__()
    if int(t) != DL_ROCM:
        return None
    b = backend if isinstance(backend, ROCm) and backend.device == int(i) else ROCm(int(i))
    cap = take_capsule(obj, stream=0)   # ordered with the null stream
    ptr, shape, strides, dt, dev, owner = _from_dlpack_capsule(cap, obj)
    return ROCmArray(b, ptr, shape, dt, strides, owner)


def from_dlpack(x) -> ROCmArray:
    """tk.from_dlpack for a tensor on a ROCm device (zero-copy)."""
    a = as_rocm_array(x)
    if a is None:
        raise ValueError(f"{type(x).__name__} is not on a ROCm device")
    return a


# ----------------------------------------------------------------------------- events, streams

class ROCmEvent(DriverEvent):
    """A HIP event recorded on a stream."""
    __slots__ = ("handle", "_dev")
    label = "ROCm"

    @classmethod
    def record(cls, dev: _Device, h_stream) -> "ROCmEvent":
        hip = _hip()
        dev.activate()
        ev = _ok(hip.hipEventCreateWithFlags(2), "hipEventCreateWithFlags")      # hipEventDisableTiming
        _ok(hip.hipEventRecord(ev, h_stream), "hipEventRecord")
        return cls(ev, dev)

    def _query(self) -> bool:
        res = _hip().hipEventQuery(self.handle)
        err = int(res[0] if isinstance(res, tuple) else res)
        if err == 0:
            return True
        if err == _NOT_READY:
            return False
        raise RuntimeError(f"hipEventQuery failed: {_errstr(err)}")

    def _synchronize(self) -> None:
        _ok(_hip().hipEventSynchronize(self.handle), "hipEventSynchronize")

    def __del__(self):
        try:
            _hip().hipEventDestroy(self.handle)
        except Exception:  # noqa: BLE001
            pass


class ROCmStream(DriverStream):
    """A HIP stream (``hipStreamCreateWithPriority``, flags 0: a blocking stream, ordered with
    the null stream). ``priority``: tk.High (> 0) is the device's greatest stream priority;
    tk.Normal and tk.Low are its least, the default streams'."""
    label = "ROCm"
    event_class = ROCmEvent

    @property
    def hip_priority(self) -> int:
        return self.native_priority

    def _create(self, native_priority: int):
        return _ok(_hip().hipStreamCreateWithPriority(0, native_priority), "hipStreamCreateWithPriority")

    def _wait_event(self, handle) -> None:
        _ok(_hip().hipStreamWaitEvent(self.handle, handle, 0), "hipStreamWaitEvent")

    def _synchronize(self) -> None:
        _ok(_hip().hipStreamSynchronize(self.handle), "hipStreamSynchronize")

    def _destroy(self) -> None:
        _hip().hipStreamDestroy(self.handle)


# ----------------------------------------------------------------------------- arguments

def launch_config(buf: bytearray) -> tuple:
    """hipModuleLaunchKernel's ``extra``: (the address of the ``void *[5]`` array
    {BUFFER_POINTER, &buf, BUFFER_SIZE, &size, END}, what keeps it and ``buf`` alive)."""
    data = (ctypes.c_char * len(buf)).from_buffer(buf)
    size = ctypes.c_size_t(len(buf))
    cfg = (ctypes.c_void_p * 5)(_PARAM_BUFFER_POINTER, ctypes.addressof(data), _PARAM_BUFFER_SIZE,
                                ctypes.addressof(size), _PARAM_END)
    return ctypes.addressof(cfg), (cfg, data, size)


# ----------------------------------------------------------------------------- kernels

class ROCmKernelInstance(DeviceKernelInstance):
    """A kernel on an AMD GPU (or, on a ROCmTarget, only its source)."""
    array_type = ROCmArray
    label = "ROCm"

    def _normalize(self, a, name, kind):
        if kind == "constexpr" or isinstance(a, (bool, int, float, np.generic)):
            return KernelInstance._normalize(self, a, name, kind)
        if isinstance(self.backend, ROCmTarget) and isinstance(a, np.ndarray):
            return KernelInstance._normalize(self, a, name, kind)
        try:
            dev = as_rocm_array(a, self.backend if isinstance(self.backend, ROCm) else None)
        except (BackendUnavailable, TypeError, ValueError) as e:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' cannot be used on ROCm: {e}") from None
        if dev is None:
            if is_host_array(a) and not isinstance(self.backend, ROCmTarget):
                raise self._host_array_error(name)
            return KernelInstance._normalize(self, a, name, kind)
        if isinstance(self.backend, ROCm) and dev.backend.device != self.backend.device:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' is on ROCm:{dev.backend.device}, "
                              f"not on {self.backend!r}")
        check_device_array(self.name, name, dev)
        return dev

    def _fits32(self, args, geom, wg) -> bool:
        return fits32(args, geom, (np.ndarray, ROCmArray), wg)

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, default_float=D.float64, idx32=self._fits32(args, geom, wg))

    def _render(self, ir, ranges):
        from ..codegen.hip import render_hip
        return render_hip(ir, group_plan(ir), ranges, self.backend.wave)

    def _sig(self, a, kind: str) -> tuple:
        return arg_sig(a, kind, ROCmArray, layout=True)

    def _key(self, norm, geom, ndim, ranges, wg) -> tuple:
        return super()._key(norm, geom, ndim, ranges, wg) + (self._fits32(norm, geom, wg),)

    def _build(self, args, geom, ndim, ranges, wg):
        from ..codegen.hip import param_layout
        hip = _hip()
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names = self._render(ir, ranges)
        dev = self.backend._dev
        fn = kernel_function(dev, src, lambda: compile_hip(src, dev.arch, self.name,
                                                           FASTMATH_HIPRTC_OPTIONS if ir.fastmath else ()),
                             lambda image: _ok(hip.hipModuleLoadData(image), "hipModuleLoadData"),
                             lambda mod: _ok(hip.hipModuleGetFunction(mod, b"tk_kernel"), "hipModuleGetFunction"),
                             "HIP runtime", self.name, ir.file)
        return fn, ir, names, param_layout(ir)

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        if not isinstance(self.backend, ROCm):
            raise BackendUnavailable("a ROCmTarget only generates source; launch on tk.ROCm()")
        hip = _hip()
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return completed_event()
        fn, ir, names, layout = self._specialize(norm, geom, ndim, ranges, wg)
        dev = self.backend._dev
        grid, block = grid_dims(geom, ndim, wg)
        check_grid(self.name, grid, dev.max_grid)
        self._check_args(ir, norm, geom, ndim)
        check_stream(self.name, stream, ROCmStream, self.backend)
        h_stream = stream.handle if stream is not None else dev.null
        err = None
        if ir.debug:
            err = ROCmArray.empty(self.backend, (12,), np.int64)
            _ok(hip.hipMemset(err.ptr, 0, 96), "hipMemset")
        buf = arg_buffer(layout, bind_args(ir, norm), geom, err.ptr if err is not None else 0)
        cfg, keep = launch_config(buf)
        dev.activate()
        _ok(hip.hipModuleLaunchKernel(fn, *grid, *block, 0, h_stream, None, cfg),
            f"hipModuleLaunchKernel of '{self.name}'")
        del cfg, keep, buf                   # the runtime copied the arguments
        ev = ROCmEvent.record(dev, h_stream)
        if err is not None:
            ev.wait()
            check_debug_info(err.numpy(), names, ir.sites, self.name)
        return ev


ROCm.array_type, ROCm.stream_type, ROCm.event_type = ROCmArray, ROCmStream, ROCmEvent
ROCm.instance_class = ROCmKernelInstance
ROCmTarget.instance_class = ROCmKernelInstance
