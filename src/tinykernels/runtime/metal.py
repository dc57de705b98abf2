"""The Metal runtime (``tk.Metal()``, ``DEV=METAL``) through pyobjc-framework-Metal. macOS only.

This module imports on every platform; PyObjC's ``Metal`` module is imported on first use, and
``tk.Metal.available()`` says why the backend is unavailable (not macOS, PyObjC missing, no
Metal device). It has been written against Apple's documented API and tested only against a
fake ``Metal`` module (tests/test_metal.py): nothing here has run on a Mac yet.

* **Compilation.** ``newLibraryWithSource:options:error:`` with fast math off (and
  ``MTLMathModeSafe`` where the OS has it), then one ``MTLComputePipelineState`` per distinct
  source, cached per device in memory. No disk cache of our own: Metal binary archives
  (``MTLBinaryArchive``) could hold pipelines across runs, but they are not written here
  because they cannot be tested without a Mac; the OS keeps its own cache of compiled
  shaders.
* **Memory.** Arrays are ``MTLResourceStorageModeShared`` buffers: on Apple silicon (unified
  memory) the host sees the same bytes, so ``numpy()`` waits for the device and copies, and
  ``host_view()`` is a zero-copy NumPy view.
* **Streams.** A stream is its own ``MTLCommandQueue``: command buffers of one queue run in
  order, queues run concurrently. Metal has no queue priorities, so a stream's priority is
  recorded and has no effect. ``stream.wait(event)`` encodes a wait on the event's
  ``MTLSharedEvent`` (one per queue, signalled with increasing values at every commit) into
  the stream's next command buffer; events complete with their command buffer.
* **Launch.** Scalars, shapes, strides and the geometry go in one struct at buffer index 0
  (``setBytes`` up to 4 KiB, else a buffer), arrays at 1 and up;
  ``dispatchThreadgroups:threadsPerThreadgroup:`` with ``ceil(n / wg)`` threadgroups per
  dimension.
"""
from __future__ import annotations

import collections
import sys
import threading
import weakref

import numpy as np

from .. import dtypes as D
from ..argcheck import int_arg
from ..errors import BackendUnavailable, CompileError, LaunchError
from .base import Backend, check_stream
from ..codegen.printrecords import PRINT_WORDS, format_prints
from .device import (SourceTarget, DeviceArray, DeviceEvent, DeviceKernelInstance, c_strides, check_debug_info, debug_flag, fits32,
                     group_plan, same_shape, scalar_value, tail, track_stream)
from .hostarray import Array
from .streams import Event, check_recorded, stream_priority

_HINT = "pip install pyobjc-framework-Metal, on macOS with a Metal GPU (Apple silicon, or an AMD/Intel Mac GPU)"
_SUPPORTED = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
              "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")
_SET_BYTES_LIMIT = 4096          # setBytes:length:atIndex: is for data up to 4 KiB
_SHARED = 0                      # MTLResourceStorageModeShared (<< MTLResourceStorageModeShift)
_COMPLETED = 4                   # MTLCommandBufferStatusCompleted
_ERROR = 5                       # MTLCommandBufferStatusError


def _metal():
    """PyObjC's Metal module (BackendUnavailable when it cannot be had here)."""
    if sys.platform != "darwin" and "Metal" not in sys.modules:
        raise BackendUnavailable(f"Metal needs macOS (this is {sys.platform}): {_HINT}")
    try:
        import Metal
    except ImportError as e:
        raise BackendUnavailable(f"the Metal backend needs PyObjC's Metal bindings: {_HINT} ({e})") from None
    return Metal


def _size(M, x: int, y: int, z: int):
    """An MTLSize (PyObjC also takes a (width, height, depth) tuple for the struct)."""
    make = getattr(M, "MTLSizeMake", None)
    return make(x, y, z) if make is not None else (x, y, z)


def _devices(M) -> list:
    try:
        devs = list(M.MTLCopyAllDevices() or [])
    except Exception:  # noqa: BLE001 - MTLCopyAllDevices is macOS only
        devs = []
    if not devs:
        d = M.MTLCreateSystemDefaultDevice()
        devs = [d] if d is not None else []
    return devs


class _Stream:
    """One MTLCommandQueue, its shared event and the last committed command buffer."""

    def __init__(self, dev: "_Device", priority: int = 0):
        self.dev, self.priority = dev, priority
        self.queue = dev.device.newCommandQueue()
        self.event = dev.device.newSharedEvent()
        self.value = 0
        self.last = None
        self.waits: list = []        # (shared event, value) to wait for in the next command buffer
        self.lock = threading.Lock()

    def command_buffer(self):
        cb = self.queue.commandBuffer()
        waits, self.waits = self.waits, []
        for ev, v in waits:
            cb.encodeWaitForEvent_value_(ev, v)
        return cb

    def commit(self, cb) -> "MetalEvent":
        self.value += 1
        cb.encodeSignalEvent_value_(self.event, self.value)
        cb.commit()
        ev = MetalEvent(cb, self.event, self.value)
        self.last = ev
        return ev


class _Device:
    """A Metal device, its default queue and pipeline cache (shared by equal backends)."""

    def __init__(self, device):
        self.device = device
        self.lock = threading.RLock()
        self.pipelines: dict = {}            # MSL source -> MTLComputePipelineState
        self.streams = weakref.WeakSet()
        self.orphans = collections.deque()   # queues of dropped streams, until a synchronize waits for them
        self.default = _Stream(self)

    def all_streams(self) -> list:
        return [self.default] + [s._s for s in list(self.streams)] + list(self.orphans)

    def forget_finished(self, done: list) -> None:
        """Drop the orphaned queues in ``done`` (a synchronize has waited for their work)."""
        for q in done:
            try:
                self.orphans.remove(q)
            except ValueError:       # not an orphan, or finished and dropped meanwhile
                pass


def _orphan_queue(dev: _Device, queue: _Stream) -> None:
    """A dropped stream's queue may still hold work that ``tk.synchronize(backend)`` must wait for
    (as the CPU's and OpenCL's synchronize do): it is kept in ``dev.orphans`` until a synchronize
    has waited for it (before audit19 it was forgotten with the stream and synchronize returned
    while its command buffers ran). Beyond 32 such queues the oldest are waited for here. A
    finalizer runs whenever the garbage collector does: no lock, only the deque's atomic operations."""
    dev.orphans.append(queue)
    while len(dev.orphans) > 32:
        try:
            q = dev.orphans.popleft()
        except IndexError:           # a synchronize emptied it meanwhile
            break
        if q.last is not None:
            try:
                q.last.wait()
            except Exception:  # noqa: BLE001 - a finalizer must not raise; the error was the launch's
                pass


_DEVICES: dict = {}
_DEVICES_LOCK = threading.Lock()


class Metal(Backend):
    """A Metal GPU (macOS). ``device``: an index into ``MTLCopyAllDevices()`` (default: the
    system default device). ``debug``: bounds-check every array access (also ``TK_DEBUG=1``).
    No float64 (Metal has no double): Python floats are float32 here."""
    name = "Metal"
    dev = "METAL"
    is_host = False
    supports_float64 = False

    def __init__(self, device: int = 0, debug: bool | None = None):
        M = _metal()
        self.debug = debug_flag(debug, self)
        self.index = int_arg("tk.Metal", "device", device, 0)
        with _DEVICES_LOCK:
            dev = _DEVICES.get(self.index)
            if dev is None:
                devs = _devices(M)
                if not 0 <= self.index < len(devs):
                    raise BackendUnavailable(f"no Metal device {self.index}: found {len(devs)}")
                dev = _DEVICES[self.index] = _Device(devs[self.index])
        self._dev = dev
        try:
            self.max_workgroupsize = int(dev.device.maxThreadsPerThreadgroup().width)
        except Exception:  # noqa: BLE001
            self.max_workgroupsize = 1024

    @property
    def device_name(self) -> str:
        return str(self._dev.device.name())

    def key(self) -> tuple:
        return ("METAL", self.index, self.debug)

    def __repr__(self) -> str:
        args = [str(self.index)] if self.index else []
        if self.debug:
            args.append("debug=True")
        return f"tk.Metal({', '.join(args)}) # {self.device_name}"

    @staticmethod
    def available() -> tuple:
        try:
            M = _metal()
            devs = _devices(M)
        except BackendUnavailable as e:
            return False, str(e)
        except Exception as e:  # noqa: BLE001
            return False, f"Metal could not be initialized ({e}): {_HINT}"
        if not devs:
            return False, f"no Metal device found: {_HINT}"
        return True, f"Metal: {devs[0].name()}"

    def supports(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and d.name in _SUPPORTED

    def supports_atomic(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and d.name in ("int32", "uint32", "float32")

    # --- memory ---------------------------------------------------------------------------------

    def _check_dtype(self, dt) -> None:
        d = D.from_any(dt)
        if d is None or d.name not in _SUPPORTED:
            name = d.name if d is not None else str(dt)
            raise TypeError(f"Metal has no {name} (no double on Metal GPUs): convert the array first, "
                            f"e.g. x.astype(np.float32)")

    def array_from_host(self, h: np.ndarray) -> "MetalArray":
        self._check_dtype(h.dtype)
        a = MetalArray.empty(self, h.shape, h.dtype)
        if h.size:
            np.copyto(a.host_view(), h)
        return a

    def copy(self, dst, src, stream=None):
        if isinstance(dst, MetalArray) and isinstance(src, MetalArray) and dst.dtype == src.dtype:
            same_shape(dst, src)
            s = stream._s if stream is not None else self._dev.default
            with s.lock:
                cb = s.command_buffer()
                if src.nbytes and src.buffer is not dst.buffer:     # onto itself: nothing to copy
                    blit = cb.blitCommandEncoder()
                    blit.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
                        src.buffer, 0, dst.buffer, 0, src.nbytes)
                    blit.endEncoding()
                ev = s.commit(cb)
            if stream is None:
                ev.wait()
            return ev
        if isinstance(dst, MetalArray):
            h = src.numpy() if isinstance(src, Array) else np.asarray(src)
            same_shape(dst, h)
            if not np.can_cast(h.dtype, dst.dtype, casting="same_kind"):
                raise TypeError(f"tk.copyto: cannot cast {h.dtype} to {dst.dtype} (same_kind casting)")
            self.synchronize()             # the device may still read or write the buffer
            if h.size:
                np.copyto(dst.host_view(), h, casting="same_kind")
            return MetalEvent(None)
        from .hostarray import as_host_ndarray
        h = as_host_ndarray(dst)
        if h is None:
            raise TypeError(f"tk.copyto: dst must be a tk.Array or a host array, got {type(dst).__name__}")
        same_shape(h, src)
        np.copyto(h, src.numpy(), casting="same_kind")
        return MetalEvent(None)

    # --- streams ------------------------------------------------------------------------------

    def stream(self, priority: int = 0) -> "MetalStream":
        s = track_stream(self._dev, MetalStream(self, stream_priority(priority)))
        weakref.finalize(s, _orphan_queue, self._dev, s._s).atexit = False
        return s

    def synchronize(self, timeout: float | None = None) -> None:
        queues = self._dev.all_streams()
        for q in queues:
            ev = q.last
            if ev is not None:
                ev.wait(timeout)
        self._dev.forget_finished(queues)

    instance_class = None   # set below


class MetalTarget(SourceTarget):
    """What the code generator needs to know about Metal, with no device: used by
    ``kernel.source("Metal", ...)`` on any machine. It cannot launch."""
    name = "Metal"
    dev = "METAL"
    supports_float64 = False
    max_workgroupsize = 1024

    def supports(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and d.name in _SUPPORTED

    def supports_atomic(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and d.name in ("int32", "uint32", "float32")

    instance_class = None   # set below


def metal_source(kernel, *args, ndrange, workgroupsize=None, debug=None) -> str:
    """The MSL source of ``kernel`` for these arguments, on any machine (NumPy arrays stand in
    for Metal arrays: only their dtype, rank and size matter)."""
    return kernel(MetalTarget(debug)).source(*args, ndrange=ndrange, workgroupsize=workgroupsize)


# ----------------------------------------------------------------------------- arrays

class MetalArray(DeviceArray):
    """An array in a shared-storage MTLBuffer (C-contiguous)."""
    __slots__ = ("buffer", "_view")

    def __init__(self, backend: Metal, buffer, shape, dtype):
        self._host = None
        self._backend = backend
        self._shape, self._dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        self.buffer = buffer
        self._view = None

    @classmethod
    def empty(cls, backend: Metal, shape, dtype) -> "MetalArray":
        dt = np.dtype(dtype)
        backend._check_dtype(dt)
        n = int(np.prod(shape)) * dt.itemsize
        buf = backend._dev.device.newBufferWithLength_options_(max(n, 16), _SHARED)
        if buf is None:
            raise MemoryError(f"Metal could not allocate {n} bytes on {backend.device_name}")
        return cls(backend, buf, shape, dt)

    @property
    def strides(self):
        return c_strides(self._shape, self._dtype)

    @property
    def is_contiguous(self) -> bool:
        return True

    @property
    def ptr(self) -> int:
        raise AttributeError("a tk.Array on Metal has no device address; use host_view() on Apple silicon")

    def host_view(self) -> np.ndarray:
        """A zero-copy NumPy view of the shared buffer (no synchronization: wait for the work that
        writes it first, e.g. ``tk.synchronize(backend)``)."""
        if self._view is None:
            n = int(np.prod(self._shape)) * self._dtype.itemsize
            if n == 0:
                return np.empty(self._shape, self._dtype)
            mem = self.buffer.contents().as_buffer(self.buffer.length())
            self._view = np.frombuffer(mem, np.uint8, count=n).view(self._dtype).reshape(self._shape)
        return self._view

    def numpy(self) -> np.ndarray:
        """A host copy, after all work queued on the device."""
        self._backend.synchronize()
        return np.array(self.host_view(), copy=True)

    @property
    def __array_interface__(self):
        raise AttributeError("a tk.Array on Metal is no host array; use .numpy() (a copy) or .host_view()")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """No export of the device buffer; a host copy for ``dl_device=(kDLCPU, 0)``."""
        return self._export_host_only("Metal buffers are not exported through DLPack; use .numpy() or .host_view()"
                                      " (or __dlpack__(dl_device=(1, 0)), a host copy)", dl_device, copy, max_version)

    def __dlpack_device__(self):
        return (8, 0)          # kDLMetal


# ----------------------------------------------------------------------------- events, streams

class MetalEvent(DeviceEvent):
    """Completion of a command buffer (None: already complete)."""
    __slots__ = ("_cb", "_sev", "_value")

    def __init__(self, cb, sev=None, value: int = 0):
        super().__init__()
        self._cb, self._sev, self._value = cb, sev, value

    def done(self) -> bool:
        cb = self._cb
        return cb is None or int(cb.status()) >= _COMPLETED

    def wait(self, timeout=None) -> None:
        cb = self._cb
        if cb is None:
            return
        if timeout is not None:
            self._wait_done(timeout)
        cb.waitUntilCompleted()
        if int(cb.status()) == _ERROR:
            err = cb.error()
            raise LaunchError(f"a Metal command buffer failed: {err.localizedDescription() if err else 'error'}")

    def __repr__(self) -> str:
        return f"<tk.Event (Metal) {'done' if self.done() else 'pending'}>"


class MetalStream:
    """A stream: its own MTLCommandQueue. Priorities are recorded; Metal has none for queues."""

    def __init__(self, backend: Metal, priority: int = 0):
        self.backend, self.priority = backend, priority
        self._s = _Stream(backend._dev, priority)

    def wait(self, event) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        if isinstance(event, MetalEvent):
            if event._sev is not None and not event.done():
                with self._s.lock:
                    self._s.waits.append((event._sev, event._value))
        else:
            event.wait()               # another backend's event: wait on the host, raising its unreported error (docs: streams)

    def synchronize(self, timeout: float | None = None) -> None:
        ev = self._s.last
        if ev is not None:
            ev.wait(timeout)

    def submit(self, fn) -> Event:
        self.synchronize()
        fn()
        return MetalEvent(None)

    def __repr__(self) -> str:
        return f"<tk.Stream (Metal) priority={self.priority}>"


# ----------------------------------------------------------------------------- kernels

def pack_args(fields: list, geom, byname: dict) -> bytes:
    """The ``tk_args`` struct's bytes: the fields of :func:`codegen.metal.arg_fields` with C
    alignment (NumPy's aligned struct layout is the C layout Metal uses)."""
    from ..codegen.metal import NUMPY_OF
    if not fields:
        return bytes(4)
    dt = np.dtype([(name, NUMPY_OF[c]) for name, c, _ in fields], align=True)
    rec = np.zeros((), dt)
    for name, c, src in fields:
        kind = src[0]
        if kind in ("start", "count", "step"):
            v = geom[3 * src[1] + ("start", "count", "step").index(kind)]
        elif kind == "shape":
            v = byname[src[1].name].shape[src[2]]
        elif kind == "stride":
            a = byname[src[1].name]
            v = a.strides[src[2]] // a.dtype.itemsize
        else:
            v = scalar_value(byname[src[1]], src[2])
        rec[name] = v
    return rec.tobytes()


def _compile(M, dev: _Device, src: str, kernel: str, file: str):
    """The pipeline of ``src`` on ``dev`` (compiled once per device and source)."""
    with dev.lock:
        pso = dev.pipelines.get(src)
        if pso is not None:
            return pso
        opts = M.MTLCompileOptions.new()
        opts.setFastMathEnabled_(False)        # SPEC: no fast math (IEEE results, no reassociation)
        if hasattr(opts, "setMathMode_") and hasattr(M, "MTLMathModeSafe"):
            opts.setMathMode_(M.MTLMathModeSafe)
        lib, err = dev.device.newLibraryWithSource_options_error_(src, opts, None)
        if lib is None:
            log = str(err.localizedDescription()) if err is not None else "unknown error"
            raise CompileError(f"the Metal compiler rejected the generated source of kernel '{kernel}':\n"
                               f"{tail(log, 25)}", file, None, kernel=kernel)
        fn = lib.newFunctionWithName_("tk_kernel")
        pso, err = dev.device.newComputePipelineStateWithFunction_error_(fn, None)
        if pso is None:
            log = str(err.localizedDescription()) if err is not None else "unknown error"
            raise CompileError(f"Metal could not make a pipeline for kernel '{kernel}': {log}", file, None,
                               kernel=kernel)
        dev.pipelines[src] = pso
        return pso


class MetalKernelInstance(DeviceKernelInstance):
    """A kernel on a Metal device: MSL from :mod:`tinykernels.codegen.metal`."""
    array_type = MetalArray
    label = "Metal"

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, default_float=D.float32, idx32=fits32(args, geom, MetalArray, wg))

    def _render(self, ir, ranges):
        from ..codegen.metal import render_metal
        return render_metal(ir, group_plan(ir), ranges)

    def _build(self, args, geom, ndim, ranges, wg):
        from ..codegen.metal import arg_fields
        M = _metal()
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names, prints = self._render(ir, ranges)
        pso = _compile(M, self.backend._dev, src, self.name, ir.file)
        size = int(np.prod(wg))
        limit = int(pso.maxTotalThreadsPerThreadgroup())
        if size > limit:
            raise LaunchError(f"kernel '{self.name}': a workgroup of {size} items exceeds this kernel's limit of "
                              f"{limit} on {self.backend.device_name} (maxTotalThreadsPerThreadgroup)")
        return pso, ir, arg_fields(ir), names, prints

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        if not isinstance(self.backend, Metal):
            raise LaunchError(f"kernel '{self.name}': {self.backend!r} only generates source; launch on tk.Metal()")
        M = _metal()
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return MetalEvent(None)
        pso, ir, fields, names, prints = self._specialize(norm, geom, ndim, ranges, wg)
        self._check_args(ir, norm, geom, ndim)
        check_stream(self.name, stream, self.backend)
        dev = self.backend._dev
        byname = {p[1].name if p[0] == "array" else p[1]: a for p, a in zip(ir.params, norm)}
        data = pack_args(fields, geom, byname)
        err = None
        if ir.debug:
            err = MetalArray.empty(self.backend, (12,), np.int64)
            err.host_view()[:] = 0
        pbuf = None
        if prints:                          # the tk.print records (codegen.printrecords)
            pbuf = MetalArray.empty(self.backend, (PRINT_WORDS,), np.uint32)
            pbuf.host_view()[:] = 0          # (a record that does not fit leaves its first word 0)
        groups = [1, 1, 1]
        threads = [1, 1, 1]
        for d in range(ndim):
            hw = ndim - 1 - d              # the last ndrange dimension is x
            groups[hw] = -(-geom[3 * d + 1] // wg[d])
            threads[hw] = wg[d]
        s = stream._s if stream is not None else dev.default
        with s.lock:
            cb = s.command_buffer()
            enc = cb.computeCommandEncoder()
            enc.setComputePipelineState_(pso)
            if len(data) <= _SET_BYTES_LIMIT:
                enc.setBytes_length_atIndex_(data, len(data), 0)
            else:
                argbuf = dev.device.newBufferWithBytes_length_options_(data, len(data), _SHARED)
                enc.setBuffer_offset_atIndex_(argbuf, 0, 0)
            b = 1
            for p, a in zip(ir.params, norm):
                if p[0] == "array":
                    enc.setBuffer_offset_atIndex_(a.buffer, 0, b)
                    b += 1
            if err is not None:
                enc.setBuffer_offset_atIndex_(err.buffer, 0, b)
                b += 1
            if pbuf is not None:
                enc.setBuffer_offset_atIndex_(pbuf.buffer, 0, b)
            enc.dispatchThreadgroups_threadsPerThreadgroup_(_size(M, *groups), _size(M, *threads))
            enc.endEncoding()
            ev = s.commit(cb)
        if pbuf is not None:                 # the printed lines, once the kernel is done (as debug mode waits)
            ev.wait()
            text = format_prints(pbuf.host_view(), prints, "Metal")
            if text:
                sys.stdout.write(text)
                sys.stdout.flush()
        if err is not None:
            ev.wait()
            check_debug_info(err.host_view(), names, ir.sites, self.name)
        return ev


Metal.instance_class = MetalKernelInstance
MetalTarget.instance_class = MetalKernelInstance
