"""The NVIDIA CUDA runtime (``tk.CUDA(device=0)``, ``DEV=CUDA``, ``DEV=CUDA:1``).

Code generation (:mod:`tinykernels.codegen.cuda`) and compilation (:func:`compile_cuda`,
NVRTC through ``cuda.bindings.nvrtc``) need no GPU and are tested in CI on every machine
with NVRTC installed. Everything else here talks to the CUDA driver API through
``cuda.bindings.driver`` and needs an NVIDIA driver and device:

* one primary context per device (``cuDevicePrimaryCtxRetain``), made current on each
  thread that uses it;
* modules from cubins (``cuModuleLoadData``), one per generated source, kernels launched
  with ``cuLaunchKernel`` and a packed argument array (:func:`~tinykernels.codegen.cuda.param_layout`);
* device arrays (:class:`CUDAArray`) from ``cuMemAlloc``, copies with ``cuMemcpy*``;
  they export ``__cuda_array_interface__`` and DLPack, and PyTorch, CuPy and JAX arrays on
  the device are taken zero-copy;
* streams are ``cuStreamCreateWithPriority`` streams, events are CUDA events.

Compiled kernels are cached on disk under the CPU's cache directory
(``TK_CACHE_DIR``/cuda), keyed by the source, the NVRTC version, the architecture and
the options, written atomically.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
import weakref
from functools import lru_cache

import numpy as np

from .. import dtypes as D
from ..array import Array
from ..backends import Backend
from ..errors import BackendUnavailable, CompileError, LaunchError
from ..kernel import KernelInstance
from .device import DeviceArray, DeviceKernelInstance, arg_sig, c_strides, check_debug_info, debug_flag, fits32, \
    group_plan, is_host_array, same_shape, scalar_value, track_stream
from .streams import Event, completed_event

HINT = ("pip install 'tinykernels[cuda]' (cuda-bindings and nvidia-cuda-nvrtc; for a CUDA 12 driver "
        "(< 580): pip install 'cuda-bindings>=12.8,<13' nvidia-cuda-nvrtc-cu12) and an NVIDIA driver")
NVRTC_OPTIONS = ("--fmad=false",)       # no contraction into FMA: float results match NumPy's
STATS = {"compiles": 0, "disk_hits": 0}


# ----------------------------------------------------------------------------- bindings

def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise BackendUnavailable(f"the CUDA backend needs cuda-bindings: {HINT} ({e})") from None
    return nvrtc


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise BackendUnavailable(f"the CUDA backend needs cuda-bindings: {HINT} ({e})") from None
    return driver


def _ok(res, what: str):
    """Unwrap a ``(CUresult, *values)`` tuple of cuda.bindings, raising on an error code."""
    if isinstance(res, tuple):
        err, vals = res[0], res[1:]
    else:
        err, vals = res, ()
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {_errstr(err)}")
    return vals[0] if len(vals) == 1 else (vals if vals else None)


def _errstr(err) -> str:
    name = getattr(err, "name", str(err))
    try:
        r, s = _driver().cuGetErrorString(err)
        if int(r) == 0 and s:
            return f"{name}: {s.decode() if isinstance(s, bytes) else s}"
    except Exception:  # noqa: BLE001 - an error message must never raise
        pass
    return str(name)


# ----------------------------------------------------------------------------- NVRTC

@lru_cache(maxsize=None)
def nvrtc_version() -> tuple:
    """(major, minor) of the NVRTC library cuda-bindings loads."""
    nv = _nvrtc()
    try:
        res = nv.nvrtcVersion()
    except Exception as e:  # the library itself is missing (nvidia-cuda-nvrtc not installed)
        raise BackendUnavailable(f"NVRTC could not be loaded: {HINT} ({e})") from None
    major, minor = _nv_ok(res, "nvrtcVersion")
    return int(major), int(minor)


@lru_cache(maxsize=None)
def supported_archs() -> tuple:
    """The sm_XX numbers (e.g. 80, 90) this NVRTC can compile for."""
    try:
        return tuple(int(a) for a in _nv_ok(_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))
    except AttributeError:      # very old NVRTC
        return (75, 80, 86, 89, 90)


def nvrtc_available() -> tuple:
    """(True, version text) when NVRTC can compile here, else (False, why)."""
    try:
        major, minor = nvrtc_version()
    except BackendUnavailable as e:
        return False, str(e)
    return True, f"NVRTC {major}.{minor}"


def _nv_ok(res, what):
    err, vals = res[0], res[1:]
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {getattr(err, 'name', err)}")
    return vals[0] if len(vals) == 1 else vals


def normalize_arch(arch) -> str:
    """``sm_90`` / ``compute_90`` / ``90`` / ``(9, 0)`` -> ``sm_90`` or ``compute_90``."""
    if isinstance(arch, tuple):
        return f"sm_{arch[0]}{arch[1]}"
    s = str(arch).strip().lower()
    if s.isdigit():
        return f"sm_{s}"
    m = re.fullmatch(r"(sm|compute)_(\d+)([af]?)", s)
    if not m:
        raise ValueError(f"unknown CUDA architecture {arch!r}: expected e.g. 'sm_90' (cubin) or 'compute_90' (PTX)")
    return s


def cubin_path(source: str, arch: str, options=()) -> "os.PathLike":
    from .compiler import cache_dir
    major, minor = nvrtc_version()
    key = hashlib.sha256("\0".join([f"nvrtc-{major}.{minor}", arch, " ".join(options), source]).encode()).hexdigest()
    ext = "ptx" if arch.startswith("compute_") else "cubin"
    return cache_dir() / "cuda" / key[:2] / f"{key}.{ext}"


def compile_cuda(source: str, arch: str = "sm_90", name: str = "kernel", options=(), cache: bool = True) -> bytes:
    """Compile CUDA C++ with NVRTC: a cubin for ``sm_XX``, PTX for ``compute_XX``.

    Results are cached on disk (see :func:`cubin_path`). A compile error raises
    ``tk.CompileError`` with NVRTC's log, the Python line (from the ``#line`` directives)
    and the failing generated lines."""
    from .compiler import _atomic_write
    arch = normalize_arch(arch)
    opts = tuple(NVRTC_OPTIONS) + tuple(options)
    path = cubin_path(source, arch, opts) if cache else None
    if path is not None:
        try:
            data = path.read_bytes()
            STATS["disk_hits"] += 1
            return data
        except OSError:
            pass
    ok, log, data = _nvrtc_compile(source, arch, name, opts)
    if not ok:
        raise _compile_error(name, source, log, arch, opts)
    STATS["compiles"] += 1
    if path is not None:
        _atomic_write(path, data)
    return data


def _nvrtc_compile(source: str, arch: str, name: str, opts) -> tuple:
    """(ok, log, binary) of one NVRTC compile."""
    nv = _nvrtc()
    nvrtc_version()                      # a clear BackendUnavailable when the library is missing
    prog = _nv_ok(nv.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        args = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in opts]
        err, = nv.nvrtcCompileProgram(prog, len(args), args)
        size = _nv_ok(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        _nv_ok(nv.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.rstrip(b"\0").decode(errors="replace")
        if int(err) != 0:
            return False, log or getattr(err, "name", str(err)), b""
        if arch.startswith("compute_"):
            size = _nv_ok(nv.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            out = b" " * size
            _nv_ok(nv.nvrtcGetPTX(prog, out), "nvrtcGetPTX")
        else:
            size = _nv_ok(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            out = b" " * size
            _nv_ok(nv.nvrtcGetCUBIN(prog, out), "nvrtcGetCUBIN")
        return True, log, bytes(out)
    finally:
        nv.nvrtcDestroyProgram(prog)


def _compile_error(name: str, source: str, log: str, arch: str, opts) -> CompileError:
    """NVRTC's log, the Python line it points at, and the generated lines it rejected."""
    py = re.search(r'^(.*?\.py)\((\d+)\): (?:catastrophic )?error:\s*(.*)$', log, re.M)
    plain = re.sub(r'^#line .*$', "", source, flags=re.M)
    shown = ""
    if plain != source:
        _, log2, _ = _nvrtc_compile(plain, arch, name, opts)
    else:
        log2 = log
    m = re.search(rf'^{re.escape(name)}\.cu\((\d+)\): (?:catastrophic )?error', log2, re.M)
    if m:
        ln = int(m.group(1))
        lines = plain.splitlines()
        lo, hi = max(0, ln - 3), min(len(lines), ln + 2)
        shown = "\n".join(f"{'>' if k + 1 == ln else ' '} {k + 1:5d} | {lines[k]}" for k in range(lo, hi))
    msg = f"NVRTC rejected the generated CUDA code for kernel '{name}' ({arch})"
    if py:
        msg += f" (from {py.group(1)}:{py.group(2)}): {py.group(3)}"
    errors = [ln for ln in log.splitlines() if "error" in ln] or log.strip().splitlines()
    msg += ":\n" + "\n".join(errors[:10])
    if shown:
        msg += "\ngenerated source:\n" + shown
    return CompileError(msg, py.group(1) if py else None, int(py.group(2)) if py else None, 0, kernel=name)


def choose_arch(cc: tuple, driver_version: int | None = None) -> str:
    """What to compile for a device of compute capability ``cc``: its own cubin when this
    NVRTC knows the architecture; PTX for the newest architecture it knows when the device
    is newer (the driver JIT-compiles it, which needs a driver at least as new as NVRTC)."""
    want = cc[0] * 10 + cc[1]
    archs = supported_archs()
    if driver_version is not None and nvrtc_version()[0] > driver_version // 1000:
        major, minor = nvrtc_version()
        raise BackendUnavailable(
            f"NVRTC {major}.{minor} makes code for CUDA {major} drivers, but this driver supports CUDA "
            f"{driver_version // 1000}.{driver_version % 1000 // 10}: upgrade the NVIDIA driver, or install the "
            f"CUDA {driver_version // 1000} packages: pip install 'cuda-bindings>={driver_version // 1000},"
            f"<{driver_version // 1000 + 1}' nvidia-cuda-nvrtc-cu{driver_version // 1000}")
    if want in archs:
        return f"sm_{want}"
    older = [a for a in archs if a <= want]
    if not older:
        major, minor = nvrtc_version()
        raise BackendUnavailable(f"NVRTC {major}.{minor} cannot compile for sm_{want} (it supports "
                                 f"sm_{min(archs)} to sm_{max(archs)}); for older GPUs install NVRTC 12: "
                                 "pip install nvidia-cuda-nvrtc-cu12 'cuda-bindings>=12.8,<13'")
    if driver_version is not None:
        nv = nvrtc_version()
        if (driver_version // 1000, driver_version % 1000 // 10) < nv:
            raise BackendUnavailable(
                f"sm_{want} is newer than NVRTC {nv[0]}.{nv[1]} knows, and its PTX cannot be JIT-compiled by "
                f"this driver (CUDA {driver_version // 1000}.{driver_version % 1000 // 10}): upgrade "
                "nvidia-cuda-nvrtc to a version that supports this GPU")
    return f"compute_{max(older)}"


# ----------------------------------------------------------------------------- devices

_TLS = threading.local()


class _Device:
    """Primary context, attributes and module cache of one device (shared by equal backends)."""

    def __init__(self, ordinal: int):
        drv = _driver()
        A = drv.CUdevice_attribute
        self.ordinal = ordinal
        self.handle = _ok(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = _ok(drv.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        self.activate()

        def attr(a):
            return int(_ok(drv.cuDeviceGetAttribute(a, self.handle), "cuDeviceGetAttribute"))
        self.name, self.cc, self.driver_version = _probe(ordinal)
        self.max_threads = attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        self.max_grid = (attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                         attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))
        self.max_block = (attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                          attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z))
        lo, hi = _ok(drv.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange")
        self.prio_least, self.prio_greatest = int(lo), int(hi)
        self.arch = choose_arch(self.cc, self.driver_version)
        self.modules: dict = {}           # source -> (module, function)
        self.lock = threading.Lock()
        self.streams = weakref.WeakSet()
        self.null = drv.CUstream(0)       # the legacy default stream (orders with every blocking stream)

    def activate(self) -> None:
        """Make the primary context current on this thread (once per thread)."""
        cur = getattr(_TLS, "ctx", None)
        if cur is not self:
            _ok(_driver().cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
            _TLS.ctx = self


_DEVICES: dict = {}          # explicit cache: ordinal -> _Device
_DEVICES_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _init() -> int:
    """cuInit once; the number of devices (raises BackendUnavailable with the reason)."""
    try:
        drv = _driver()
    except BackendUnavailable:
        raise
    try:
        err, = drv.cuInit(0)
    except Exception as e:  # noqa: BLE001 - cuda-bindings raises when libcuda.so is missing
        raise BackendUnavailable(f"no NVIDIA driver found (libcuda could not be loaded: {e}); "
                                 "install the NVIDIA driver to use the CUDA backend") from None
    if int(err) != 0:
        raise BackendUnavailable(f"the CUDA driver failed to initialize ({_errstr(err)}): "
                                 "no usable NVIDIA GPU, or the driver is not loaded")
    n = int(_ok(drv.cuDeviceGetCount(), "cuDeviceGetCount"))
    if n == 0:
        raise BackendUnavailable("the NVIDIA driver found no CUDA device")
    return n


def _probe(ordinal: int) -> tuple:
    """(name, compute capability, driver version) of a device, without a context."""
    drv = _driver()
    A = drv.CUdevice_attribute
    h = _ok(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    cc = tuple(int(_ok(drv.cuDeviceGetAttribute(a, h), "cuDeviceGetAttribute"))
               for a in (A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                         A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    name = _ok(drv.cuDeviceGetName(256, h), "cuDeviceGetName")
    name = (name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)).strip()
    return name, cc, int(_ok(drv.cuDriverGetVersion(), "cuDriverGetVersion"))


def _device(ordinal: int) -> _Device:
    n = _init()
    if not 0 <= ordinal < n:
        raise BackendUnavailable(f"CUDA device {ordinal} does not exist: this machine has {n} device(s)")
    with _DEVICES_LOCK:
        dev = _DEVICES.get(ordinal)
        if dev is None:
            try:
                dev = _DEVICES[ordinal] = _Device(ordinal)
            except RuntimeError as e:
                raise BackendUnavailable(f"CUDA device {ordinal} cannot be used: {e}") from None
    return dev


# ----------------------------------------------------------------------------- backend

class CUDA(Backend):
    """An NVIDIA GPU through the CUDA driver API; kernels are compiled with NVRTC.

    ``device``: the device ordinal. ``debug``: bounds-check every array access (also
    ``TK_DEBUG=1``)."""
    name = "CUDA"
    dev = "CUDA"
    is_host = False
    supports_float64 = True

    def __init__(self, device: int = 0, debug: bool | None = None):
        self.device = int(device)
        self.debug = debug_flag(debug)
        self._dev = _device(self.device)
        self.max_workgroupsize = self._dev.max_threads

    @property
    def device_name(self) -> str:
        return self._dev.name

    @property
    def arch(self) -> str:
        """What kernels are compiled for: ``sm_XY`` (cubin) or ``compute_XY`` (PTX)."""
        return self._dev.arch

    def key(self) -> tuple:
        return ("CUDA", self.device, self.debug)

    def __repr__(self) -> str:
        return f"tk.CUDA(device={self.device}{', debug=True' if self.debug else ''}) # {self.device_name}"

    @staticmethod
    def available() -> tuple:
        """(True, what) when device 0 can run kernels, else (False, why). Creates no context."""
        try:
            n = _init()
            ok, nv = nvrtc_available()
            if not ok:
                return False, nv
            name, cc, v = _probe(0)
            arch = choose_arch(cc, v)
        except BackendUnavailable as e:
            return False, str(e)
        except Exception as e:  # noqa: BLE001 - a probe never raises
            return False, f"CUDA probe failed: {e}"
        return True, (f"{name} (sm_{cc[0]}{cc[1]}), {n} device(s), driver CUDA {v // 1000}."
                      f"{v % 1000 // 10}, {nv}, compiling for {arch}")

    def supports(self, dtype) -> bool:
        return D.from_any(dtype) is not None

    # --- memory -----------------------------------------------------------------------------

    def array_from_host(self, h: np.ndarray) -> "CUDAArray":
        h = np.ascontiguousarray(h)
        a = CUDAArray.empty(self, h.shape, h.dtype)
        if h.nbytes:
            self._dev.activate()
            _ok(_driver().cuMemcpyHtoD(a._dptr(), h.ctypes.data, h.nbytes), "cuMemcpyHtoD")
        return a

    def copy(self, dst, src, stream=None):
        """tk.copyto with a CUDA array on either side (device<->device, host->device, device->host)."""
        drv = _driver()
        self._dev.activate()
        h_stream = stream.handle if stream is not None else self._dev.null
        if not isinstance(src, (CUDAArray, np.ndarray)) and not (isinstance(src, Array) and src._host is not None):
            src = as_cuda_array(src) or src           # a torch/CuPy/JAX array on a CUDA device: no host trip
        if isinstance(dst, CUDAArray) and isinstance(src, CUDAArray):
            if src.backend.device != dst.backend.device:
                raise ValueError(f"tk.copyto: src is on CUDA:{src.backend.device}, dst on CUDA:{dst.backend.device}")
            same_shape(dst, src)
            if dst.dtype != src.dtype or not dst.is_contiguous or not src.is_contiguous:
                raise TypeError("tk.copyto between CUDA arrays needs the same dtype and contiguous arrays")
            if src.nbytes:
                _ok(drv.cuMemcpyDtoDAsync(dst._dptr(), src._dptr(), src.nbytes, h_stream), "cuMemcpyDtoDAsync")
        elif isinstance(dst, CUDAArray):
            from ..array import as_host_ndarray
            h = as_host_ndarray(src) if not isinstance(src, Array) else src.numpy()
            h = np.ascontiguousarray(np.asarray(src) if h is None else h, dtype=dst.dtype)
            same_shape(dst, h)
            if not dst.is_contiguous:
                raise TypeError("tk.copyto into a non-contiguous CUDA array is not supported")
            if h.nbytes:
                # pageable host memory: the call returns once the data is staged, so h may go
                _ok(drv.cuMemcpyHtoDAsync(dst._dptr(), h.ctypes.data, h.nbytes, h_stream), "cuMemcpyHtoDAsync")
        else:
            from ..array import as_host_ndarray
            h = as_host_ndarray(dst)
            if h is None:
                raise TypeError(f"tk.copyto: dst must be a tk.Array or a host array, got {type(dst).__name__}")
            same_shape(h, src)
            if stream is not None:
                stream.synchronize()
            np.copyto(h, src.numpy(), casting="same_kind")
            return completed_event()
        ev = CUDAEvent.record(self._dev, h_stream)
        if stream is None:                    # tk.copyto without a stream is done when it returns
            ev.wait()
        return ev

    # --- streams ------------------------------------------------------------------------------

    def stream(self, priority: int = 0) -> "CUDAStream":
        return track_stream(self._dev, CUDAStream(self, priority))

    def synchronize(self) -> None:
        self._dev.activate()
        _ok(_driver().cuCtxSynchronize(), "cuCtxSynchronize")

    instance_class = None   # set below


class CUDATarget(Backend):
    """What the code generator needs to know about CUDA, with no device: used by
    ``kernel.source("CUDA", ...)`` on machines without a GPU. It cannot launch."""
    name = "CUDA"
    dev = "CUDA"
    is_host = False
    supports_float64 = True
    max_workgroupsize = 1024

    def __init__(self, debug: bool | None = None):
        self.debug = debug_flag(debug)

    def key(self) -> tuple:
        return ("CUDA-source", self.debug)

    def __repr__(self) -> str:
        return f"tk.runtime.cuda.CUDATarget(debug={self.debug})"

    @staticmethod
    def available() -> tuple:
        return False, "a code-generation target only"

    def supports(self, dtype) -> bool:
        return D.from_any(dtype) is not None

    instance_class = None   # set below


def cuda_source(kernel, *args, ndrange, workgroupsize=None, debug=None) -> str:
    """The CUDA C++ translation unit of ``kernel`` for these arguments, on any machine.

    Arrays may be NumPy arrays (only their dtype, rank, layout and size matter), CUDA
    arrays, or any array the CUDA backend accepts."""
    return kernel(CUDATarget(debug)).source(*args, ndrange=ndrange, workgroupsize=workgroupsize)


# ----------------------------------------------------------------------------- arrays

class _Allocation:
    """Device memory from cuMemAlloc, freed when the last array using it goes."""
    __slots__ = ("ptr", "dev", "__weakref__")

    def __init__(self, dev: _Device, nbytes: int):
        dev.activate()
        self.dev = dev
        self.ptr = int(_ok(_driver().cuMemAlloc(max(int(nbytes), 1)), "cuMemAlloc"))

    def __del__(self):
        try:
            self.dev.activate()
            _driver().cuMemFree(_driver().CUdeviceptr(self.ptr))
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass


_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
# DLPack dtype codes (dlpack.h): kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool, kDLFloat8_*
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_DL_SPECIAL = {"bfloat16": (4, 16), "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8)}


class CUDAArray(DeviceArray):
    """An array in a CUDA device's global memory: its own allocation, or a zero-copy view
    of another library's CUDA array (PyTorch, CuPy, JAX...). Any strides."""
    __slots__ = ("_ptr", "_strides", "_owner")

    def __init__(self, backend: CUDA, ptr: int, shape, dtype, strides=None, owner=None):
        self._host = None
        self._backend = backend
        self._ptr = int(ptr)
        self._shape = tuple(int(n) for n in shape)
        self._dtype = np.dtype(dtype)
        self._strides = tuple(int(s) for s in strides) if strides is not None else c_strides(self._shape, self._dtype)
        self._owner = owner              # keeps the memory alive (an _Allocation or the foreign object)

    @classmethod
    def empty(cls, backend: CUDA, shape, dtype) -> "CUDAArray":
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        alloc = _Allocation(backend._dev, n)
        return cls(backend, alloc.ptr, shape, dt, None, alloc)

    def _dptr(self):
        return _driver().CUdeviceptr(self._ptr)

    @property
    def strides(self):
        return self._strides

    @property
    def ptr(self) -> int:
        return self._ptr

    @property
    def is_contiguous(self) -> bool:
        return self._strides == c_strides(self._shape, self._dtype) or self.size <= 1

    def _span(self) -> tuple:
        """(lowest, highest + itemsize) byte offsets the elements occupy, relative to ptr."""
        lo = hi = 0
        if self.size == 0:
            return 0, 0
        for n, s in zip(self._shape, self._strides):
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        return lo, hi + self._dtype.itemsize

    def numpy(self) -> np.ndarray:
        """A host copy. It is ordered after work on the legacy default stream and every
        blocking stream (tinykernels' own); synchronize other libraries' streams first."""
        dev = self._backend._dev
        lo, hi = self._span()
        if hi - lo == 0:
            return np.empty(self._shape, self._dtype)
        raw = np.empty(hi - lo, np.uint8)
        dev.activate()
        _ok(_driver().cuMemcpyDtoH(raw.ctypes.data, _driver().CUdeviceptr(self._ptr + lo), hi - lo), "cuMemcpyDtoH")
        view = np.ndarray(self._shape, self._dtype, buffer=raw, offset=-lo, strides=self._strides)
        return np.ascontiguousarray(view)

    @property
    def __array_interface__(self):
        raise AttributeError("a tk.Array on a CUDA device has no host address; use .numpy()")

    @property
    def __cuda_array_interface__(self) -> dict:
        d = D.from_any(self._dtype)
        typestr = self._dtype.str
        if d is not None and d.is_storage_only:          # bf16/fp8: raw bits ('<u2' / '|u1')
            typestr = np.dtype(f"u{self._dtype.itemsize}").str
        return {"shape": self._shape, "typestr": typestr, "data": (self._ptr, False), "version": 3,
                "strides": None if self.is_contiguous else self._strides, "stream": 1}

    def __dlpack_device__(self):
        return (_DL_CUDA, self._backend.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule (``dltensor``) of this memory, no copy. ``stream``: the
        consumer's stream; work queued on the legacy default stream is ordered before it."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"tk.Array on CUDA:{self._backend.device} cannot be exported to device {dl_device}")
        if copy:
            raise BufferError("tk.Array.__dlpack__(copy=True) is not supported")
        if stream is not None and stream not in (1, 2) and stream != -1:
            ev = CUDAEvent.record(self._backend._dev, self._backend._dev.null)
            _ok(_driver().cuStreamWaitEvent(_driver().CUstream(int(stream)), ev.handle, 0), "cuStreamWaitEvent")
        return _dlpack_capsule(self)


# --- DLPack (export and import) through ctypes ---------------------------------------------

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


def _dlpack_capsule(a: CUDAArray):
    mt = _DLManagedTensor()
    nd = len(a.shape)
    shape = (ctypes.c_int64 * max(nd, 1))(*a.shape)
    strides = (ctypes.c_int64 * max(nd, 1))(*[s // a.dtype.itemsize for s in a.strides])
    code, bits = _dl_dtype(a.dtype)
    mt.dl_tensor.data = a.ptr
    mt.dl_tensor.device = _DLDevice(_DL_CUDA, a.backend.device)
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


# --- foreign CUDA arrays (PyTorch, CuPy, JAX, anything with the CUDA array interface) --------

def device_of(obj) -> int | None:
    """The CUDA device ordinal ``obj`` lives on, or None if it is not a CUDA array."""
    if isinstance(obj, CUDAArray):
        return obj.backend.device
    mod = type(obj).__module__
    if mod.startswith("torch") and hasattr(obj, "device") and hasattr(obj, "data_ptr"):
        if obj.device.type != "cuda":
            return None
        return obj.device.index or 0
    if hasattr(type(obj), "__dlpack_device__"):
        try:
            t, i = obj.__dlpack_device__()
        except Exception:  # noqa: BLE001
            t = None
        if t is not None:
            return int(i) if int(t) in (_DL_CUDA, _DL_CUDA_MANAGED) else None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _pointer_device(cai["data"][0])
    return None


def _pointer_device(ptr: int) -> int:
    drv = _driver()
    _init()
    if not ptr:
        return 0
    return int(_ok(drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                             drv.CUdeviceptr(ptr)), "cuPointerGetAttribute"))


def backend_of(obj) -> CUDA | None:
    """``tk.CUDA(n)`` for an array on CUDA device n, else None (for tk.get_backend)."""
    n = device_of(obj)
    return None if n is None else CUDA(n)


def as_cuda_array(obj, backend: CUDA | None = None) -> CUDAArray | None:
    """A zero-copy CUDAArray view of a CUDA array of another library, or None if ``obj``
    is not one. PyTorch tensors (every dtype, bfloat16 and fp8 too), CuPy/Numba arrays
    (``__cuda_array_interface__``) and DLPack exporters on a CUDA device are accepted."""
    if isinstance(obj, CUDAArray):
        return obj
    mod = type(obj).__module__
    if mod.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "device"):
        if obj.device.type != "cuda":
            return None
        name = str(obj.dtype).rpartition(".")[2]
        d = D.BY_NAME.get({"bool": "bool"}.get(name, name))
        if d is None:
            raise TypeError(f"torch dtype {obj.dtype} is not supported by tinykernels")
        dt = D.to_numpy(d)
        b = _backend_for(backend, obj.device.index or 0)
        return CUDAArray(b, obj.data_ptr(), tuple(obj.shape), dt,
                         tuple(s * dt.itemsize for s in obj.stride()), obj)
    cai = getattr(obj, "__cuda_array_interface__", None) if not isinstance(obj, np.ndarray) else None
    if cai is not None:
        ptr = int(cai["data"][0] or 0)
        dt = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = tuple(cai["strides"]) if cai.get("strides") else None
        st = cai.get("stream")
        if st not in (None, 1, 2) and st:            # the producer's stream: finish its work first
            _ok(_driver().cuStreamSynchronize(_driver().CUstream(int(st))), "cuStreamSynchronize")
        b = _backend_for(backend, _pointer_device(ptr))
        return CUDAArray(b, ptr, shape, dt, strides, obj)
    if hasattr(obj, "__dlpack__") and hasattr(type(obj), "__dlpack_device__"):
        t, i = obj.__dlpack_device__()
        if int(t) not in (_DL_CUDA, _DL_CUDA_MANAGED):
            return None
        b = _backend_for(backend, int(i))        # BackendUnavailable before the capsule is taken
        try:
            cap = obj.__dlpack__(stream=1)       # ordered with the legacy default stream
        except TypeError:
            cap = obj.__dlpack__()
        ptr, shape, strides, dt, dev, owner = _from_dlpack_capsule(cap, obj)
        return CUDAArray(b, ptr, shape, dt, strides, owner)
    return None


def _backend_for(backend, ordinal: int) -> CUDA:
    """``backend`` when it is that device, else the device's own backend (so that a launch
    can tell an array on another device)."""
    if isinstance(backend, CUDA) and backend.device == ordinal:
        return backend
    return CUDA(ordinal)


def from_dlpack(x) -> CUDAArray:
    """tk.from_dlpack for a tensor on a CUDA device (zero-copy)."""
    a = as_cuda_array(x)
    if a is None:
        raise ValueError(f"{type(x).__name__} is not on a CUDA device")
    return a


# ----------------------------------------------------------------------------- events, streams

class CUDAEvent(Event):
    """A CUDA event recorded on a stream (None: already complete)."""
    __slots__ = ("handle", "_dev")

    def __init__(self, handle, dev=None):
        super().__init__()
        self.handle, self._dev = handle, dev

    @classmethod
    def record(cls, dev: _Device, h_stream) -> "CUDAEvent":
        drv = _driver()
        dev.activate()
        ev = _ok(drv.cuEventCreate(int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
        _ok(drv.cuEventRecord(ev, h_stream), "cuEventRecord")
        return cls(ev, dev)

    def done(self) -> bool:
        if self.handle is None:
            return True
        self._dev.activate()
        err, = _driver().cuEventQuery(self.handle)
        if int(err) == 0:
            return True
        if int(err) == int(_driver().CUresult.CUDA_ERROR_NOT_READY):
            return False
        raise RuntimeError(f"cuEventQuery failed: {_errstr(err)}")

    def wait(self, timeout=None) -> None:
        if self.handle is not None:
            self._dev.activate()
            _ok(_driver().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def __del__(self):
        try:
            if self.handle is not None:
                _driver().cuEventDestroy(self.handle)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<tk.Event (CUDA) {'done' if self.done() else 'pending'}>"


class CUDAStream:
    """A CUDA stream. ``priority``: tk.High (> 0) is the device's greatest stream priority;
    tk.Normal and tk.Low are its least, the default streams' (CUDA has none below)."""

    def __init__(self, backend: CUDA, priority: int = 0):
        drv = _driver()
        dev = backend._dev
        self.backend, self.priority = backend, priority
        cuda_prio = dev.prio_greatest if priority > 0 else dev.prio_least
        dev.activate()
        # flags 0: a blocking stream, ordered with the legacy default stream (so .numpy() sees its work)
        self.handle = _ok(drv.cuStreamCreateWithPriority(0, cuda_prio), "cuStreamCreateWithPriority")
        self.cuda_priority = cuda_prio

    def wait(self, event) -> None:
        """Later work on this stream waits for ``event`` (on the device, not the host)."""
        if isinstance(event, CUDAEvent) and event.handle is not None:
            self.backend._dev.activate()
            _ok(_driver().cuStreamWaitEvent(self.handle, event.handle, 0), "cuStreamWaitEvent")
        elif not event.done():
            event.wait()

    def synchronize(self) -> None:
        self.backend._dev.activate()
        _ok(_driver().cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def submit(self, fn) -> Event:
        """Run a host function in stream order (after the stream's queued work)."""
        self.synchronize()
        fn()
        return completed_event()

    def __del__(self):
        try:
            _driver().cuStreamDestroy(self.handle)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<tk.Stream (CUDA:{self.backend.device}) priority={self.priority}>"


# ----------------------------------------------------------------------------- kernels

_NP_PARAM = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
             "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float32": np.float32,
             "float64": np.float64, "ptr": np.uint64}


def pack_params(layout: list, values: dict, geom, err_ptr: int = 0) -> tuple:
    """The argument block of cuLaunchKernel: (buffer of 8-byte slots, array of pointers to
    them). ``values``: kernel argument by IR parameter name (see :func:`bind_args`)."""
    buf = np.zeros(max(len(layout), 1), np.uint64)
    raw = buf.view(np.uint8)
    for i, (kind, det, ct) in enumerate(layout):
        if kind == "start":
            v = geom[3 * det]
        elif kind == "count":
            v = geom[3 * det + 1]
        elif kind == "step":
            v = geom[3 * det + 2]
        elif kind == "ptr":
            v = values[det.name].ptr
        elif kind == "shape":
            v = values[det[0].name].shape[det[1]]
        elif kind == "stride":
            a = values[det[0].name]
            v = a.strides[det[1]] // a.dtype.itemsize
        elif kind == "scalar":
            v = scalar_value(values[det[0]], det[1])
        else:  # err
            v = err_ptr
        b = np.asarray(v).astype(_NP_PARAM[ct]).tobytes()
        raw[8 * i:8 * i + len(b)] = np.frombuffer(b, np.uint8)
    ptrs = (np.arange(len(buf), dtype=np.uint64) * np.uint64(8)) + np.uint64(buf.ctypes.data)
    return buf, ptrs


def bind_args(ir, norm) -> dict:
    """Kernel arguments by IR parameter name (arrays: ArrayInfo.name, scalars: their name)."""
    out = {}
    for p, a in zip(ir.params, norm):
        if p[0] == "array":
            out[p[1].name] = a
        elif p[0] == "scalar":
            out[p[1]] = a
    return out


def grid_dims(geom, ndim: int, wg: tuple) -> tuple:
    """(grid, block) in hardware order (x first): the last ndrange dimension is x."""
    grid, block = [1, 1, 1], [1, 1, 1]
    for d in range(ndim):
        hw = ndim - 1 - d
        count = geom[3 * d + 1]
        grid[hw] = -(-count // wg[d])
        block[hw] = wg[d]
    return tuple(grid), tuple(block)


def _fits32(args, geom, wg) -> bool:
    """Whether every index of the launch fits in a 32-bit int (with the padding to whole
    workgroups, so even masked items' positions do not overflow)."""
    return fits32(args, geom, (np.ndarray, CUDAArray), wg)


class CUDAKernelInstance(DeviceKernelInstance):
    """A kernel on a CUDA device (or, on a CUDATarget, only its source)."""
    array_type = CUDAArray
    label = "CUDA"

    def _normalize(self, a, name, kind):
        # replaces DeviceKernelInstance's: CUDA also takes other libraries' CUDA arrays, and a
        # CUDATarget host arrays; the generic checks are KernelInstance's
        if kind == "constexpr" or isinstance(a, (bool, int, float, np.generic)):
            return KernelInstance._normalize(self, a, name, kind)
        if isinstance(self.backend, CUDATarget) and isinstance(a, (np.ndarray, CUDAArray)):
            return a if isinstance(a, CUDAArray) else KernelInstance._normalize(self, a, name, kind)
        try:
            dev = as_cuda_array(a, self.backend if isinstance(self.backend, CUDA) else None)
        except (BackendUnavailable, TypeError, ValueError) as e:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' cannot be used on CUDA: {e}") from None
        if dev is not None:
            if isinstance(self.backend, CUDA) and dev.backend.device != self.backend.device:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is on CUDA:{dev.backend.device}, "
                                  f"not on {self.backend!r}")
            if D.from_any(dev.dtype) is None:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' has unsupported dtype {dev.dtype}")
            if dev.ndim == 0 or dev.ndim > 8:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' must have 1 to 8 dimensions")
            if any(s % dev.dtype.itemsize for s in dev.strides):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' has strides that are not a "
                                  "multiple of its item size")
            return dev
        if isinstance(self.backend, CUDATarget):
            return KernelInstance._normalize(self, a, name, kind)
        if is_host_array(a):
            raise self._host_array_error(name)
        return KernelInstance._normalize(self, a, name, kind)

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, default_float=D.float64, idx32=_fits32(args, geom, wg))

    def _render(self, ir, ranges):
        from ..codegen.cuda import render_cuda
        return render_cuda(ir, group_plan(ir), ranges)

    def _sig(self, a, kind: str) -> tuple:
        # CUDA arrays may be strided; a Python int >= 2**63 is carried as uint64
        return arg_sig(a, kind, CUDAArray, layout=True, wide_ints=True)

    def _key(self, norm, geom, ndim, ranges, wg) -> tuple:
        return super()._key(norm, geom, ndim, ranges, wg) + (_fits32(norm, geom, wg),)

    def _build(self, args, geom, ndim, ranges, wg):
        from ..codegen.cuda import param_layout
        drv = _driver()
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names = self._render(ir, ranges)
        dev = self.backend._dev
        with dev.lock:
            entry = dev.modules.get(src)
            if entry is None:
                image = compile_cuda(src, dev.arch, self.name)
                dev.activate()
                try:
                    mod = _ok(drv.cuModuleLoadData(image), "cuModuleLoadData")
                except RuntimeError as e:
                    raise CompileError(f"the CUDA driver could not load the compiled kernel '{self.name}' "
                                       f"({dev.arch}): {e}", ir.file, None, kernel=self.name) from None
                fn = _ok(drv.cuModuleGetFunction(mod, b"tk_kernel"), "cuModuleGetFunction")
                entry = dev.modules[src] = (mod, fn)
        return entry[1], ir, names, param_layout(ir)

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        if not isinstance(self.backend, CUDA):
            raise BackendUnavailable("a CUDATarget only generates source; launch on tk.CUDA()")
        drv = _driver()
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return completed_event()
        fn, ir, names, layout = self._specialize(norm, geom, ndim, ranges, wg)
        dev = self.backend._dev
        grid, block = grid_dims(geom, ndim, wg)
        for k in range(3):
            if grid[k] > dev.max_grid[k]:
                raise LaunchError(f"kernel '{self.name}': {grid[k]} workgroups along hardware axis "
                                  f"{'xyz'[k]} exceed the device's limit of {dev.max_grid[k]}; use a larger "
                                  "workgroup in that dimension or put the largest dimension last")
        if stream is not None and (not isinstance(stream, CUDAStream) or stream.backend != self.backend):
            raise LaunchError(f"kernel '{self.name}': the stream belongs to another backend")
        err = CUDAArray.empty(self.backend, (12,), np.int64) if ir.debug else None
        if err is not None:
            _ok(drv.cuMemsetD8(err._dptr(), 0, 96), "cuMemsetD8")
        buf, ptrs = pack_params(layout, bind_args(ir, norm), geom, err.ptr if err is not None else 0)
        h_stream = stream.handle if stream is not None else dev.null
        dev.activate()
        _ok(drv.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, h_stream,
                               int(ptrs.ctypes.data), 0), f"cuLaunchKernel of '{self.name}'")
        del buf, ptrs                           # the driver copied the arguments
        ev = CUDAEvent.record(dev, h_stream)
        if err is not None:
            ev.wait()
            check_debug_info(err.numpy(), names, ir.file, self.name)
        return ev


CUDA.instance_class = CUDAKernelInstance
CUDATarget.instance_class = CUDAKernelInstance
