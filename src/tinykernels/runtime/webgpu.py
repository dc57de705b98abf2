"""The WebGPU runtime (``tk.WebGPU()``, ``DEV=WEBGPU``) on ``wgpu`` (wgpu-native).

One device per adapter, requested with the adapter's own limits (not WebGPU's conservative
defaults). Arrays live in storage buffers padded to 4 bytes; kernels are WGSL from
:mod:`tinykernels.codegen.wgsl`, with the scalar arguments, shapes and launch geometry in one
uniform buffer per launch. Pipelines are cached per specialization (in memory; wgpu has no
portable on-disk pipeline cache).

WebGPU has one queue per device, and it executes submissions in order. A stream is therefore
a logical ordering object: all streams of a device share its queue, so work is ordered
across streams too (``s.wait(ev)`` always holds already) and priorities have no effect.
Events complete when the GPU has finished the submission (a 4-byte buffer copied at the end
of it and mapped asynchronously).
"""
from __future__ import annotations

import threading
import sys
import weakref
from functools import lru_cache

import numpy as np

from .. import dtypes as D
from ..argcheck import int_arg
from .base import Backend, check_stream, python_ints_as_int32
from .hostarray import Array
from ..errors import BackendUnavailable, CompileError, LaunchError
from ..codegen.printrecords import PRINT_WORDS, format_prints
from .device import SourceTarget, DeviceArray, DeviceEvent, DeviceKernelInstance, c_strides, check_debug_info, compile_error_at, debug_flag, \
    group_plan, same_shape, tail, track_stream
from .streams import Event, check_recorded, stream_priority

_HINT = ("pip install 'tinykernels[webgpu]' (the wgpu package) and a Vulkan, Metal or D3D12 driver, "
         "e.g. Debian's mesa-vulkan-drivers for a CPU (lavapipe) device")
_SUPPORTED = ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "bfloat16",
              "float32", "float8_e4m3fn", "float8_e5m2")
_I32 = (-(1 << 31), (1 << 31) - 1)
_WANT_LIMITS = ("max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size", "max-buffer-size",
                "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
                "max-compute-workgroup-size-y", "max-compute-workgroup-size-z",
                "max-compute-workgroup-storage-size", "max-compute-workgroups-per-dimension",
                "max-uniform-buffer-binding-size", "max-bind-groups")


def _wgpu():
    try:
        import wgpu
    except ImportError as e:
        raise BackendUnavailable(f"the WebGPU backend needs the wgpu package: {_HINT} ({e})") from None
    return wgpu


@lru_cache(maxsize=None)
def _adapter(power: str):
    wgpu = _wgpu()
    try:
        a = wgpu.gpu.request_adapter_sync(power_preference=power)
    except Exception as e:  # noqa: BLE001 - wgpu-native raises plain RuntimeErrors
        raise BackendUnavailable(f"wgpu found no WebGPU adapter ({e}): {_HINT}") from None
    if a is None:
        raise BackendUnavailable(f"wgpu found no WebGPU adapter: {_HINT}")
    return a


@lru_cache(maxsize=None)
def _adapters() -> tuple:
    wgpu = _wgpu()
    try:
        return tuple(wgpu.gpu.enumerate_adapters_sync())
    except Exception:  # noqa: BLE001
        return ()


def _pick(device) -> tuple:
    """(cache key, adapter) for ``WebGPU(device)``."""
    if device is not None and not isinstance(device, str):
        device = int_arg("tk.WebGPU", "device", device, 0, "an adapter index (int), part of its name (str), "
                         "'high-performance' or 'low-power'")
    if device is None or device in ("high-performance", "low-power"):
        power = device or "high-performance"
        return ("power", power), _adapter(power)
    adapters = _adapters()
    names = [f"{a.info.get('device', '?')} ({a.info.get('backend_type', '?')})" for a in adapters]
    if isinstance(device, int) and not isinstance(device, bool):
        if 0 <= device < len(adapters):
            return ("index", device), adapters[device]
    elif isinstance(device, str):
        for k, n in enumerate(names):
            if device.lower() in n.lower():
                return ("index", k), adapters[k]
    raise BackendUnavailable(f"no WebGPU adapter matches {device!r}; found: {', '.join(names) or 'none'}")


#: Released buffer bytes after which an empty submission makes wgpu free them (it frees dropped
#: buffers only when the queue is maintained: without this, only at the next launch).
_RECLAIM_BYTES = 1 << 20


class _Device:
    """The wgpu device, its queue and pipeline cache (shared by equal backends)."""

    def __init__(self, adapter):
        lim = adapter.limits
        want = {k: lim[k] for k in _WANT_LIMITS if k in lim}
        self.adapter = adapter
        self.device = adapter.request_device_sync(required_limits=want)
        self.queue = self.device.queue
        self.limits = dict(self.device.limits)
        self.pipelines: dict = {}          # WGSL source -> (pipeline, bind group layout)
        self.lock = threading.RLock()
        self.streams = weakref.WeakSet()
        self.last = None                   # the event of the latest submission
        self._src4 = None
        self.dropped = 0                   # bytes of buffers released since the driver last reclaimed

    def reclaim(self, nbytes: int) -> None:
        """A buffer of ``nbytes`` was released: have wgpu free released buffers now (it does so
        only when the queue is maintained, i.e. at a submission) once enough have piled up.
        Buffers still used by pending work are freed by wgpu when that work completes."""
        self.dropped += nbytes
        if self.dropped < _RECLAIM_BYTES or not self.lock.acquire(blocking=False):
            return                         # (a thread holding the lock submits soon anyway)
        try:
            self.dropped = 0
            self.queue.submit([])
        finally:
            self.lock.release()

    def fence(self, encoder) -> "WGPUEvent":
        """An event for the work recorded in ``encoder`` (call just before submitting it)."""
        wgpu = _wgpu()
        U = wgpu.BufferUsage
        if self._src4 is None:
            self._src4 = self.device.create_buffer(size=4, usage=U.COPY_SRC)
        f = self.device.create_buffer(size=4, usage=U.MAP_READ | U.COPY_DST)
        encoder.copy_buffer_to_buffer(self._src4, 0, f, 0, 4)
        return WGPUEvent(f)

    def submit(self, encoder) -> "WGPUEvent":
        with self.lock:
            ev = self.fence(encoder)
            self.queue.submit([encoder.finish()])
            ev._start()
            self.last = ev
            return ev

    def wait_idle(self, timeout: float | None = None) -> None:
        ev = self.last
        if ev is not None:
            ev.wait(timeout)


_DEVICES: dict = {}
_DEVICES_LOCK = threading.Lock()


# bytes of tk.private arrays one work item may hold: WGSL's function address space (WGSL sets
# 8192 bytes, which browsers' WebGPU enforces; wgpu-native accepts more, but the shader compile
# time grows with the array: 64 KiB took 17 s on lavapipe, 400 KB did not finish in minutes)
PRIVATE_BYTES_MAX = 65536


def _check_private_memory(ir, name: str, device_name: str) -> None:
    """A CompileError at the largest tk.private's line when the kernel's private arrays exceed
    PRIVATE_BYTES_MAX per work item (4 bytes per element whatever the dtype, as for localmem)."""
    from ..ir import nodes as N
    total, big, loc = 0, -1, None
    for st in N.walk_stmts(ir.body):
        if isinstance(st, N.AllocArray) and st.array.space == "private":
            n = max(st.array.dtype.itemsize, 4)
            for x in st.array.shape:
                n *= x
            total += n
            if n > big:
                big, loc = n, st.loc
    if total > PRIVATE_BYTES_MAX:
        raise compile_error_at(f"the kernel's tk.private arrays need {total} bytes per work item but WebGPU "
                               f"({device_name}) allows {PRIVATE_BYTES_MAX} here (WGSL function variables, 4 bytes "
                               "per element; portable WebGPU allows 8192): use a global array (an argument) for "
                               "large scratch space", loc, name, ir.file)


class WebGPU(Backend):
    """A WebGPU device through wgpu.

    ``device``: None or "high-performance" (the default adapter), "low-power", an index into
    ``wgpu.gpu.enumerate_adapters_sync()`` or part of an adapter's name (``tk.backend("WEBGPU:1")``).
    ``debug``: bounds-check every array access (also ``TK_DEBUG=1``)."""
    name = "WEBGPU"
    dev = "WEBGPU"
    is_host = False
    supports_float64 = False
    bounded_loops = True          # lavapipe's 65535 back edges per work item (docs/webgpu.md)

    def __init__(self, device=None, debug: bool | None = None):
        self.debug = debug_flag(debug, self)
        key, a = _pick(device)
        self._key = key
        with _DEVICES_LOCK:
            dev = _DEVICES.get(key)
            if dev is None:
                try:
                    dev = _DEVICES[key] = _Device(a)
                except Exception as e:  # noqa: BLE001
                    raise BackendUnavailable(f"could not open the WebGPU device ({e}): {_HINT}") from None
        self._dev = dev
        lim = dev.limits
        self.max_workgroupsize = int(min(lim.get("max-compute-invocations-per-workgroup", 256),
                                         lim.get("max-compute-workgroup-size-x", 256)))

    @property
    def device_name(self) -> str:
        info = self._dev.adapter.info
        return str(info.get("device") or info.get("description") or "WebGPU device")

    @property
    def limits(self) -> dict:
        """The device limits (WebGPU names, e.g. ``max-storage-buffer-binding-size``)."""
        return dict(self._dev.limits)

    def key(self) -> tuple:
        return ("WEBGPU",) + self._key + (self.debug,)

    def __repr__(self) -> str:
        args = [] if self._key == ("power", "high-performance") else [repr(self._key[1])]
        if self.debug:
            args.append("debug=True")
        return f"tk.WebGPU({', '.join(args)}) # {self.device_name}"

    @staticmethod
    def available() -> tuple:
        try:
            a = _adapter("high-performance")
        except BackendUnavailable as e:
            return False, str(e)
        info = a.info
        return True, (f"wgpu: {info.get('device', '?')} ({info.get('backend_type', '?')}, "
                      f"{info.get('adapter_type', '?')})")

    def supports(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and d.name in _SUPPORTED

    def supports_atomic(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and d.name in ("int32", "uint32", "float32")

    # --- memory -------------------------------------------------------------------------------

    def _check_dtype(self, dt) -> None:
        d = D.from_any(dt)
        if d is None or d.name not in _SUPPORTED:
            name = d.name if d is not None else str(dt)
            raise TypeError(f"WebGPU has no {name} (WGSL has no 64-bit types): convert the array first, "
                            f"e.g. x.astype(np.{'float32' if name == 'float64' else name.replace('64', '32')})")

    def array_from_host(self, h: np.ndarray) -> "WGPUArray":
        self._check_dtype(h.dtype)
        return WGPUArray(self, np.require(h, requirements="C"))

    def copy(self, dst, src, stream=None):
        dev = self._dev
        wgpu = _wgpu()
        if isinstance(dst, WGPUArray) and isinstance(src, WGPUArray) and dst.dtype == src.dtype:
            same_shape(dst, src)
            enc = dev.device.create_command_encoder()
            if src.nbytes and src.buffer is not dst.buffer:     # onto itself: nothing to copy
                enc.copy_buffer_to_buffer(src.buffer, 0, dst.buffer, 0, src.buffer.size)
            ev = dev.submit(enc)
        elif isinstance(dst, WGPUArray):
            h = src.numpy() if isinstance(src, Array) else np.asarray(src)
            same_shape(dst, h)
            if not np.can_cast(h.dtype, dst.dtype, casting="same_kind"):
                raise TypeError(f"tk.copyto: cannot cast {h.dtype} to {dst.dtype} (same_kind casting)")
            h = np.ascontiguousarray(h, dst.dtype)
            with dev.lock:
                if h.nbytes:
                    dev.queue.write_buffer(dst.buffer, 0, _padded(h))
                ev = dev.submit(dev.device.create_command_encoder())
        else:
            from .hostarray import as_host_ndarray
            h = as_host_ndarray(dst)
            if h is None:
                raise TypeError(f"tk.copyto: dst must be a tk.Array or a host array, got {type(dst).__name__}")
            same_shape(h, src)
            np.copyto(h, src.numpy(), casting="same_kind")
            return WGPUEvent(None)
        del wgpu
        if stream is None:
            ev.wait()
        else:
            stream._last = ev
        return ev

    # --- streams ------------------------------------------------------------------------------

    def stream(self, priority: int = 0) -> "WGPUStream":
        return track_stream(self._dev, WGPUStream(self, stream_priority(priority)))

    def synchronize(self, timeout: float | None = None) -> None:
        self._dev.wait_idle(timeout)

    instance_class = None   # set below


def _padded(h: np.ndarray):
    """The bytes of ``h`` padded to a multiple of 4 (WebGPU copies whole words)."""
    b = h.reshape(-1).view(np.uint8)
    pad = (-b.size) % 4
    return np.concatenate([b, np.zeros(pad, np.uint8)]) if pad else b


class WGPUArray(DeviceArray):
    """An array in a WebGPU storage buffer (always C-contiguous; the buffer is padded to 4 bytes)."""
    __slots__ = ("buffer",)

    def __init__(self, backend: WebGPU, h: np.ndarray):
        wgpu = _wgpu()
        self._host = None
        self._backend = backend
        self._shape, self._dtype = tuple(h.shape), h.dtype
        size = max(4, (h.nbytes + 3) // 4 * 4)
        dev = backend._dev
        limit = min(dev.limits.get("max-storage-buffer-binding-size", 1 << 27),
                    dev.limits.get("max-buffer-size", 1 << 28))
        if size > limit:
            raise MemoryError(f"an array of {h.nbytes} bytes exceeds the WebGPU device's "
                              f"max-storage-buffer-binding-size of {limit} bytes ({backend.device_name})")
        U = wgpu.BufferUsage
        usage = U.STORAGE | U.COPY_SRC | U.COPY_DST
        if h.nbytes:
            self.buffer = dev.device.create_buffer_with_data(data=_padded(h), usage=usage)
        else:
            self.buffer = dev.device.create_buffer(size=size, usage=usage)

    @property
    def strides(self):
        return c_strides(self._shape, self._dtype)

    def __del__(self):
        try:
            buf = self.buffer
        except AttributeError:             # __init__ failed before allocating
            return
        try:
            size = buf.size
            self.buffer = None
            del buf                        # wgpu releases it (if nothing else holds the GPUBuffer)
            self._backend._dev.reclaim(size)
        except Exception:  # noqa: BLE001 - never raise from a finalizer (e.g. at interpreter exit)
            pass

    @property
    def ptr(self) -> int:
        raise AttributeError("a tk.Array on a WebGPU device has no address")

    @property
    def is_contiguous(self) -> bool:
        return True

    def numpy(self) -> np.ndarray:
        """A host copy. It waits for all work queued on the device (one queue for all streams)."""
        n = int(np.prod(self._shape)) * self._dtype.itemsize
        if n == 0:
            return np.empty(self._shape, self._dtype)
        dev = self._backend._dev
        with dev.lock:
            data = dev.queue.read_buffer(self.buffer, 0, self.buffer.size)
        return np.frombuffer(data, np.uint8)[:n].copy().view(self._dtype).reshape(self._shape)

    @property
    def __array_interface__(self):
        raise AttributeError("a tk.Array on a WebGPU device has no host address; use .numpy()")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """No export of the device buffer; a host copy for ``dl_device=(kDLCPU, 0)``."""
        return self._export_host_only("WebGPU buffers cannot be exported through DLPack; use .numpy()"
                                      " (or __dlpack__(dl_device=(1, 0)), a host copy)", dl_device, copy, max_version)

    def __dlpack_device__(self):
        return (15, 0)          # kDLWebGPU


class WGPUEvent(DeviceEvent):
    """Completion of a WebGPU submission (None: already complete)."""
    __slots__ = ("_fence", "_promise")

    def __init__(self, fence):
        super().__init__()
        self._fence = fence
        self._promise = None

    def _start(self) -> None:
        if self._fence is not None:
            self._promise = self._fence.map_async("READ")

    def done(self) -> bool:
        p = self._promise
        if self._fence is None:
            return True
        if p is None:
            return False
        ev = getattr(p, "_thread_event", None)
        return ev.is_set() if ev is not None else getattr(p, "_state", "pending") != "pending"

    def wait(self, timeout=None) -> None:
        p = self._promise
        if p is not None:
            if timeout is not None:
                self._wait_done(timeout)
            p.sync_wait()
            self._promise = None
            self._fence = None

    def __repr__(self) -> str:
        return f"<tk.Event (WebGPU) {'done' if self.done() else 'pending'}>"


class WGPUStream:
    """An ordering of work on a WebGPU device. WebGPU has one queue per device, so every stream
    submits to it: work is ordered within a stream (and across streams, in submission order).
    Priorities are recorded and have no effect."""

    def __init__(self, backend: WebGPU, priority: int = 0):
        self.backend, self.priority = backend, priority
        self._last = None

    def wait(self, event) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        if not isinstance(event, WGPUEvent):
            event.wait()        # another backend's event: wait on the host, raising its unreported error (docs: streams)
        # a WebGPU event: already ordered before anything submitted later to the one queue

    def synchronize(self, timeout: float | None = None) -> None:
        ev = self._last
        if ev is not None:
            ev.wait(timeout)

    def submit(self, fn) -> Event:
        self.synchronize()
        fn()
        return WGPUEvent(None)

    def __repr__(self) -> str:
        return f"<tk.Stream (WebGPU) priority={self.priority}>"


class WGPUKernelInstance(DeviceKernelInstance):
    """A kernel on a WebGPU device: WGSL from :mod:`tinykernels.codegen.wgsl`, run with wgpu."""
    array_type = WGPUArray
    label = "WebGPU"

    def _normalize(self, a, name, kind):
        # Python ints are int32 here (an int is no array, so this check may come first)
        if kind != "constexpr" and isinstance(a, int) and not isinstance(a, bool) and not _I32[0] <= a <= _I32[1]:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' = {a} does not fit in 32 bits "
                              "(Python ints are int32 on WebGPU; a tk.random key is passed as the "
                              "np.uint64 that tk.random.key/split return)")
        return super()._normalize(a, name, kind)

    def _specs(self, args, wg):
        return python_ints_as_int32(super()._specs(args, wg), args, self.kernel.params)

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, default_float=D.float32, default_int=D.int32, idx32=True)

    def _render(self, ir, ranges):
        from ..codegen.wgsl import render_wgsl
        return render_wgsl(ir, group_plan(ir), ranges)

    def _build(self, args, geom, ndim, ranges, wg):
        wgpu = _wgpu()
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, layout, names, (wg_bytes, loc), prints = self._render(ir, ranges)
        dev = self.backend._dev
        wg_limit = dev.limits.get("max-compute-workgroup-storage-size", 16384)
        if wg_bytes > wg_limit:
            raise compile_error_at(f"the kernel needs {wg_bytes} bytes of workgroup memory (tk.localmem, group "
                                   f"collectives) but {self.backend.device_name} has {wg_limit} "
                                   "(max-compute-workgroup-storage-size; localmem elements take 4 bytes on WebGPU)",
                                   loc, self.name, ir.file)
        _check_private_memory(ir, self.name, self.backend.device_name)
        narrays = sum(1 for p in ir.params if p[0] == "array") + (1 if ir.debug else 0) + (1 if prints else 0)
        limit = dev.limits.get("max-storage-buffers-per-shader-stage", 8)
        if narrays > limit:
            raise CompileError(f"kernel '{self.name}' binds {narrays} storage buffers but "
                               f"{self.backend.device_name} allows {limit} per shader stage", ir.file, None,
                               kernel=self.name)
        with dev.lock:
            entry = dev.pipelines.get(src)
            if entry is None:
                try:
                    module = dev.device.create_shader_module(code=src)
                    B = wgpu.BufferBindingType
                    vis = wgpu.ShaderStage.COMPUTE
                    entries = [{"binding": 0, "visibility": vis, "buffer": {"type": B.uniform}}]
                    entries += [{"binding": b, "visibility": vis, "buffer": {"type": B.storage}}
                                for b in range(1, narrays + 1)]
                    bgl = dev.device.create_bind_group_layout(entries=entries)
                    pl = dev.device.create_pipeline_layout(bind_group_layouts=[bgl])
                    pipe = dev.device.create_compute_pipeline(layout=pl, compute={"module": module,
                                                                                  "entry_point": "tk_main"})
                except Exception as e:  # noqa: BLE001 - naga / wgpu validation errors
                    why = _explain(str(e.args[0]) if e.args else str(e), src)
                    raise CompileError(f"WebGPU rejected the generated WGSL for kernel '{self.name}':\n{why}",
                                       ir.file, None, kernel=self.name) from None
                entry = dev.pipelines[src] = (pipe, bgl)
        return entry[0], entry[1], ir, layout, names, prints

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        wgpu = _wgpu()
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return WGPUEvent(None)
        _check_geometry(self.name, geom, ndim, wg)
        pipe, bgl, ir, layout, names, prints = self._specialize(norm, geom, ndim, ranges, wg)
        self._check_args(ir, norm, geom, ndim)
        check_stream(self.name, stream, self.backend)
        dev = self.backend._dev
        d = dev.device
        U = wgpu.BufferUsage
        byname = {p[1].name if p[0] == "array" else p[1]: a for p, a in zip(ir.params, norm)}
        ubuf = d.create_buffer_with_data(data=_pack_args(layout, geom, byname), usage=U.UNIFORM)
        entries = [{"binding": 0, "resource": {"buffer": ubuf, "offset": 0, "size": ubuf.size}}]
        b = 1
        for p, a in zip(ir.params, norm):
            if p[0] == "array":
                entries.append({"binding": b, "resource": {"buffer": a.buffer, "offset": 0, "size": a.buffer.size}})
                b += 1
        err = None
        if ir.debug:
            err = d.create_buffer_with_data(data=np.zeros(12, np.int32).tobytes(),
                                            usage=U.STORAGE | U.COPY_SRC)
            entries.append({"binding": b, "resource": {"buffer": err, "offset": 0, "size": err.size}})
            b += 1
        pbuf = None
        if prints:
            pbuf = d.create_buffer_with_data(data=np.zeros(PRINT_WORDS, np.uint32).tobytes(),
                                             usage=U.STORAGE | U.COPY_SRC)
            entries.append({"binding": b, "resource": {"buffer": pbuf, "offset": 0, "size": pbuf.size}})
        bg = d.create_bind_group(layout=bgl, entries=entries)
        groups = 1
        for dd in range(ndim):
            groups *= -(-geom[3 * dd + 1] // wg[dd])
        maxdim = int(dev.limits.get("max-compute-workgroups-per-dimension", 65535))
        gx = min(groups, maxdim)
        gy = -(-groups // gx)
        if gy > maxdim:
            raise LaunchError(f"kernel '{self.name}': {groups} workgroups exceed the device's limit")
        enc = d.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        cp.set_bind_group(0, bg)
        cp.dispatch_workgroups(gx, gy, 1)
        cp.end()
        ev = dev.submit(enc)
        if stream is not None:
            stream._last = ev
        if pbuf is not None:                 # the printed lines, once the kernel is done (as debug mode waits)
            with dev.lock:
                words = np.frombuffer(dev.queue.read_buffer(pbuf), np.uint32)
            text = format_prints(words, prints)
            if text:
                sys.stdout.write(text)
                sys.stdout.flush()
        if err is not None:
            with dev.lock:
                info = np.frombuffer(dev.queue.read_buffer(err), np.int32).astype(np.int64)
            check_debug_info(info, names, ir.sites, self.name)
        return ev


def _check_geometry(name, geom, ndim, wg) -> None:
    """Every index must fit in i32: extents, range starts and ends, the total item count."""
    total = 1
    for d in range(ndim):
        start, count, step = geom[3 * d:3 * d + 3]
        total *= count
        last = start + (count - 1) * step
        padded = -(-count // wg[d]) * wg[d]
        if not (_I32[0] <= start <= _I32[1] and _I32[0] <= last <= _I32[1] and padded < 1 << 31
                and _I32[0] <= step <= _I32[1]):
            raise LaunchError(f"kernel '{name}': ndrange dimension {d} does not fit in 32-bit indices "
                              "(WebGPU has no 64-bit integers)")
    if total >= 1 << 31:
        raise LaunchError(f"kernel '{name}': {total} work items do not fit in 32-bit indices (WebGPU)")


def _pack_args(layout, geom, byname) -> bytes:
    """The uniform argument struct: 4-byte fields in layout order, padded to 16 bytes."""
    vals = []
    for _, t, src in layout:
        kind = src[0]
        if kind == "geom":
            v = geom[src[1]]
        elif kind == "zero":
            v = 0
        elif kind == "shape":
            v = byname[src[1]].shape[src[2]]
        elif kind == "stride":
            a = byname[src[1]]
            v = a.strides[src[2]] // a.dtype.itemsize
        else:
            _, name, ty, part = src
            v = byname[name]
            dt = ty.dtype
            if dt == D.uint64:
                v = (int(v) >> (32 * part)) & 0xffffffff
            elif dt.kind == "b":
                v = 1 if v else 0
            elif dt.is_float:
                v = float(v)
            else:
                v = int(np.array(v).astype(D.to_numpy(dt))[()])
        if t == "f32":
            vals.append(np.array(v, np.float32).view(np.uint32))
        elif t == "i32":
            vals.append(np.array(v, np.int64).astype(np.int32).view(np.uint32))
        else:
            vals.append(np.uint32(int(v) & 0xffffffff))
    words = np.array(vals, np.uint32)
    pad = (-words.size) % 4
    return np.concatenate([words, np.zeros(pad, np.uint32)]).tobytes()


def _explain(msg: str, src: str) -> str:
    """A naga error with the Python line that produced the failing WGSL line, when it can tell."""
    import re
    lines = src.splitlines()
    out = tail(msg, 25).splitlines()
    m = re.search(r":(\d+):(\d+)", msg) or re.search(r"wgsl:(\d+)", msg)
    if m:
        n = int(m.group(1))
        for k in range(min(n, len(lines)) - 1, -1, -1):
            c = lines[k].strip()
            if c.startswith("// ") and ":" in c and not c.startswith("// tinykernels"):
                out.append(f"(generated from {c[3:]})")
                break
    return "\n".join(out)


class WebGPUTarget(SourceTarget):
    """What the WGSL generator needs, with no wgpu or adapter: ``kernel.source("WEBGPU", ...)``
    on any machine (SPEC 1). It cannot launch."""
    name = "WEBGPU"
    dev = "WEBGPU"
    supports_float64 = False
    max_workgroupsize = 256

    supports = WebGPU.supports
    supports_atomic = WebGPU.supports_atomic


WebGPU.instance_class = WGPUKernelInstance
WebGPUTarget.instance_class = WGPUKernelInstance
