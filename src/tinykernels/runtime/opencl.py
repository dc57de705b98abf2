"""The OpenCL runtime (``tk.OpenCL()``, ``DEV=CL``) on ``pyopencl``.

One context per device; a stream is an in-order command queue; events are OpenCL events.
Programs are built once per specialization and cached in memory (the OpenCL driver keeps
its own binary cache on disk). PoCL on the CPU is what CI tests with.
"""
from __future__ import annotations

import collections
import threading
import weakref
from functools import lru_cache

import numpy as np

from .. import dtypes as D
from ..argcheck import int_arg
from .base import Backend, check_stream
from .hostarray import Array, staged
from .launchplan import value_key
from ..errors import BackendUnavailable, CompileError, LaunchError
from .device import SourceTarget, DeviceArray, DeviceEvent, DeviceKernelInstance, c_strides, check_debug_info, compile_error_at, debug_flag, \
    fits32, group_plan, same_shape, scalar_value, tail, track_stream
from .streams import Event, check_recorded, deadline_of, poll_until, stream_priority

_HINT = "pip install 'tinykernels[opencl]' (pyopencl) and an OpenCL driver, e.g. pip install pocl-binary-distribution"


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise BackendUnavailable(f"the OpenCL backend needs pyopencl: {_HINT} ({e})") from None
    return cl


@lru_cache(maxsize=None)
def _devices() -> tuple:
    cl = _cl()
    try:
        plats = cl.get_platforms()
    except cl.Error as e:
        raise BackendUnavailable(f"no OpenCL platform found ({e}): {_HINT}") from None
    return tuple((p, d) for p in plats for d in p.get_devices())


# @tk.kernel(fastmath=True): reassociation and contraction (no finite-math assumption)
FASTMATH_CL_OPTIONS = ("-cl-mad-enable", "-cl-no-signed-zeros", "-cl-unsafe-math-optimizations")


class _Device:
    """Context, default queue and program cache of one OpenCL device (shared by equal backends)."""

    def __init__(self, platform, device):
        cl = _cl()
        self.platform, self.device = platform, device
        self.ctx = cl.Context([device])
        self.queue = cl.CommandQueue(self.ctx, device)
        ext = device.extensions.split()
        self.fp64 = "cl_khr_fp64" in ext
        self.int64_atomics = "cl_khr_int64_base_atomics" in ext and "cl_khr_int64_extended_atomics" in ext
        self.programs: dict = {}
        # driver workarounds, as preprocessor definitions (see codegen/opencl.py, prelude.py)
        self.build_options = ["-cl-std=CL1.2", "-w"]
        if "Portable Computing Language" in platform.name:
            self.build_options.append("-DTK_POCL=1")
        self.streams = weakref.WeakSet()
        self.orphans = collections.deque()   # queues of dropped streams, until a synchronize finishes them
        self.lock = threading.Lock()


_DEVICES: dict = {}        # explicit cache: (platform index, device index) -> _Device
_DEVICES_LOCK = threading.Lock()


def _selector(name: str, value):
    """``OpenCL(platform=/device=)``: None, an index >= 0 or part of a name."""
    if value is None or isinstance(value, str):
        return value
    return int_arg("tk.OpenCL", name, value, 0, "an index (int) or part of a name (str)")


def _pick(platform, device) -> tuple:
    platform, device = _selector("platform", platform), _selector("device", device)
    devs = _devices()
    if not devs:
        raise BackendUnavailable(f"no OpenCL device found: {_HINT}")

    def match(value, obj, k):
        if value is None:
            return True
        if isinstance(value, int):
            return value == k
        return str(value).lower() in obj.name.lower()
    plats = []
    for p, _ in devs:
        if p not in plats:
            plats.append(p)
    for pi, p in enumerate(plats):
        if not match(platform, p, pi):
            continue
        for di, d in enumerate(x for q, x in devs if q == p):
            if match(device, d, di):
                return pi, di, p, d
    raise BackendUnavailable(f"no OpenCL device matches platform={platform!r} device={device!r}; "
                             f"found: {', '.join(f'{p.name}: {d.name}' for p, d in devs)}")


class OpenCL(Backend):
    """An OpenCL device. ``platform`` / ``device``: index or part of the name (default: first)."""
    name = "CL"
    dev = "CL"
    is_host = False

    def __init__(self, platform=None, device=None, debug: bool | None = None):
        pi, di, p, d = _pick(platform, device)
        self.platform_index, self.device_index = pi, di
        self.debug = debug_flag(debug, self)
        with _DEVICES_LOCK:
            dev = _DEVICES.get((pi, di))
            if dev is None:
                dev = _DEVICES[(pi, di)] = _Device(p, d)
        self._dev = dev
        self.supports_float64 = dev.fp64
        self.max_workgroupsize = int(d.max_work_group_size)
        # a CPU device (PoCL) runs a work group's items as a vectorized loop: autodiff then
        # gives each work item contiguous items (see passes/adjoint_gather.py, strip form)
        self.items_in_loops = bool(d.type & _cl().device_type.CPU)

    @property
    def device_name(self) -> str:
        return self._dev.device.name.strip()

    def key(self) -> tuple:
        return ("CL", self.platform_index, self.device_index, self.debug)

    def __repr__(self) -> str:
        return f"tk.OpenCL(platform={self.platform_index}, device={self.device_index}) # {self.device_name}"

    @staticmethod
    def available() -> tuple:
        try:
            devs = _devices()
        except BackendUnavailable as e:
            return False, str(e)
        if not devs:
            return False, f"pyopencl found no device: {_HINT}"
        p, d = devs[0]
        return True, f"{p.name.strip()}: {d.name.strip()} ({d.version.strip()})"

    def supports(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and (d != D.float64 or self.supports_float64)

    def supports_atomic(self, dtype) -> bool:
        d = D.queried(dtype)
        if d is None or not super().supports_atomic(d):
            return False
        if d.bits == 64:
            return self._dev.int64_atomics and (d != D.float64 or self.supports_float64)
        return True

    # --- memory -----------------------------------------------------------------------------

    def array_from_host(self, h: np.ndarray) -> "CLArray":
        if h.dtype == np.float64 and not self.supports_float64:
            raise TypeError(f"{self.device_name} has no float64 (cl_khr_fp64); use float32")
        return CLArray(self, np.require(h, requirements="C"))

    def copy(self, dst, src, stream=None):
        cl = _cl()
        q = stream.queue if stream is not None else self._dev.queue
        if isinstance(dst, CLArray) and isinstance(src, CLArray) and dst.dtype == src.dtype:
            same_shape(dst, src)
            if not src.nbytes:
                return CLEvent(None)
            if dst.buffer == src.buffer:        # onto itself: nothing to copy (OpenCL refuses the
                ev = cl.enqueue_marker(q)       # overlap, MEM_COPY_OVERLAP); ordered in the queue
            else:
                ev = cl.enqueue_copy(q, dst.buffer, src.buffer, byte_count=src.nbytes)
        elif isinstance(dst, CLArray):          # from the host, or another dtype: converted on the host
            if isinstance(src, CLArray):
                q.finish()                      # (src.numpy() reads through the default queue)
            host = np.asarray(src.numpy() if isinstance(src, (Array, CLArray)) else src)
            same_shape(dst, host)
            h = np.ascontiguousarray(host.astype(dst.dtype, casting="same_kind", copy=False))
            if not h.nbytes:
                return CLEvent(None)
            if stream is not None and not isinstance(src, CLArray):
                h = staged(h, host)             # host memory: the caller may change it once this returns
            ev = cl.enqueue_copy(q, dst.buffer, h, is_blocking=stream is None)
        else:
            from .hostarray import as_host_ndarray
            h = as_host_ndarray(dst)
            same_shape(h, src)
            tmp = np.empty(src.shape, src.dtype)
            if tmp.nbytes:
                cl.enqueue_copy(q, tmp, src.buffer, is_blocking=True)
            np.copyto(h, tmp, casting="same_kind")
            return CLEvent(None)
        if stream is None:
            ev.wait()
        return CLEvent(ev)

    # --- streams ------------------------------------------------------------------------------

    def stream(self, priority: int = 0) -> "CLStream":
        s = track_stream(self._dev, CLStream(self, stream_priority(priority)))
        weakref.finalize(s, _orphan_queue, self._dev, s.queue).atexit = False
        return s

    def synchronize(self, timeout: float | None = None) -> None:
        dev = self._dev
        orphans = list(dev.orphans)
        queues = [dev.queue] + [s.queue for s in list(dev.streams)] + orphans
        if timeout is None:
            for q in queues:
                q.finish()
        else:
            _finish_within(queues, timeout, repr(self))
        for q in orphans:
            try:
                dev.orphans.remove(q)
            except ValueError:          # finished and dropped by _orphan_queue meanwhile
                pass

    instance_class = None   # set below


class CLArray(DeviceArray):
    """An array in an OpenCL device's global memory (always C-contiguous)."""
    __slots__ = ("buffer",)

    def __init__(self, backend: OpenCL, h: np.ndarray):
        cl = _cl()
        self._host = None
        self._backend = backend
        self._shape, self._dtype = tuple(h.shape), h.dtype
        mf = cl.mem_flags
        nbytes = max(h.nbytes, 1)
        dev = backend._dev.device
        limit = int(dev.max_mem_alloc_size)
        if nbytes > limit:
            raise MemoryError(f"an array of {h.nbytes} bytes exceeds {backend.device_name}'s largest allocation "
                              f"of {limit} bytes (CL_DEVICE_MAX_MEM_ALLOC_SIZE)")
        try:
            if h.nbytes:
                self.buffer = cl.Buffer(backend._dev.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=h)
            else:
                self.buffer = cl.Buffer(backend._dev.ctx, mf.READ_WRITE, size=nbytes)
        except (cl.Error, MemoryError) as e:
            raise MemoryError(f"could not allocate an array of {h.nbytes} bytes on {backend.device_name} "
                              f"({int(dev.global_mem_size)} bytes of global memory): {e}") from None

    @property
    def strides(self):
        return c_strides(self._shape, self._dtype)

    @property
    def ptr(self) -> int:
        return int(self.buffer.int_ptr)

    @property
    def is_contiguous(self) -> bool:
        return True

    def numpy(self) -> np.ndarray:
        """A host copy (waits for the default queue; synchronize streams that write it first)."""
        cl = _cl()
        h = np.empty(self._shape, self._dtype)
        if h.nbytes:
            cl.enqueue_copy(self._backend._dev.queue, h, self.buffer, is_blocking=True)
        return h

    @property
    def __array_interface__(self):
        raise AttributeError("a tk.Array on an OpenCL device has no host address; use .numpy()")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """No export of the device buffer; a host copy for ``dl_device=(kDLCPU, 0)``."""
        return self._export_host_only("OpenCL buffers cannot be exported through DLPack; use .numpy()"
                                      " (or __dlpack__(dl_device=(1, 0)), a host copy)", dl_device, copy, max_version)

    def __dlpack_device__(self):
        return (4, self._backend.device_index)


class CLEvent(DeviceEvent):
    """An OpenCL event (None: already complete)."""
    __slots__ = ("_cl_event",)

    def __init__(self, ev):
        super().__init__()
        self._cl_event = ev

    def done(self) -> bool:
        if self._cl_event is None:
            return True
        cl = _cl()
        return self._cl_event.command_execution_status == cl.command_execution_status.COMPLETE

    def wait(self, timeout=None) -> None:
        if self._cl_event is None:
            return
        if timeout is None:
            self._cl_event.wait()
        else:
            self._wait_done(timeout)

    def __repr__(self) -> str:
        return f"<tk.Event (OpenCL) {'done' if self.done() else 'pending'}>"


def _orphan_queue(dev, queue) -> None:
    """A dropped stream's queue may still hold work, which ``tk.synchronize(backend)`` must wait
    for (as CUDA completes the work of a destroyed stream, and as the CPU's synchronize waits for
    a dropped stream's jobs): it is kept in ``dev.orphans`` until a synchronize has finished it
    (until audit spec19 it was forgotten with the stream, and synchronize returned while its
    kernels ran). Beyond 32 such queues the oldest are finished here (idle by then, as a rule).
    A finalizer runs whenever the garbage collector does, even while this thread holds
    ``dev.lock``: so no lock here, only the deque's atomic operations."""
    try:
        queue.flush()
    except Exception:  # noqa: BLE001 - a finalizer must not raise; synchronize finishes it anyway
        pass
    dev.orphans.append(queue)
    while len(dev.orphans) > 32:
        try:
            dev.orphans.popleft().finish()
        except IndexError:              # a synchronize emptied it meanwhile
            break


class CLStream:
    """An in-order OpenCL command queue. Priorities are recorded; PoCL and most drivers
    ignore them (``cl_khr_priority_hints`` is used where the device offers it)."""

    def __init__(self, backend: OpenCL, priority: int = 0):
        cl = _cl()
        self.backend, self.priority = backend, priority
        props = None
        if "cl_khr_priority_hints" in backend._dev.device.extensions:
            level = {1: 1 << 0, 0: 1 << 1, -1: 1 << 2}.get(max(-1, min(1, priority)))
            props = [0x1096, level, 0]            # CL_QUEUE_PRIORITY_KHR
        try:
            self.queue = cl.CommandQueue(backend._dev.ctx, backend._dev.device, properties=props) if props \
                else cl.CommandQueue(backend._dev.ctx, backend._dev.device)
        except Exception:
            self.queue = cl.CommandQueue(backend._dev.ctx, backend._dev.device)

    def __repr__(self) -> str:
        return f"<tk.Stream (OpenCL) priority={self.priority}>"

    def wait(self, event) -> None:
        cl = _cl()
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait expects a tk.Event, got {type(event).__name__}")
        check_recorded(event, "Stream.wait")
        ev = getattr(event, "_cl_event", None)
        if ev is not None:
            cl.enqueue_marker(self.queue, wait_for=[ev])
        else:
            event.wait()            # another backend's event: wait on the host, raising its unreported error (docs: streams)

    def synchronize(self, timeout: float | None = None) -> None:
        if timeout is None:
            self.queue.finish()
        else:
            _finish_within([self.queue], timeout, "the OpenCL stream")

    def submit(self, fn) -> Event:
        self.queue.finish()
        fn()
        return CLEvent(None)


class CLKernelInstance(DeviceKernelInstance):
    """A kernel on an OpenCL device: OpenCL C from the shared renderer, built with pyopencl."""
    array_type = CLArray
    label = "OpenCL"

    def _key(self, norm, geom, ndim, ranges, wg) -> tuple:
        return super()._key(norm, geom, ndim, ranges, wg) + (fits32(norm, geom, CLArray),)

    def _forget(self) -> None:
        super()._forget()
        self._relaunch = None          # the repeated-launch memo holds the old program

    def _ir(self, args, geom, ndim, ranges, wg):
        # 32-bit indices only when the OpenCL arrays' sizes and spans fit (as the key says)
        df = D.float64 if self.backend.supports_float64 else D.float32
        return self._lower(args, wg, ndim=ndim, default_float=df, idx32=fits32(args, geom, CLArray))

    def _render(self, ir, ranges):
        from ..codegen.opencl import render_opencl
        _check_capabilities(ir, self.backend)
        return render_opencl(ir, group_plan(ir), ranges, self.backend.supports_float64)

    def _build(self, args, geom, ndim, ranges, wg):
        cl = _cl()
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names = self._render(ir, ranges)
        dev = self.backend._dev
        _check_local_memory(ir, self.backend)
        with dev.lock:
            prog = dev.programs.get(src)
            if prog is None:
                try:
                    opts = dev.build_options + (list(FASTMATH_CL_OPTIONS) if ir.fastmath else [])
                    prog = cl.Program(dev.ctx, src).build(options=opts)
                except cl.Error as e:
                    raise CompileError(f"the OpenCL compiler rejected the generated code for kernel "
                                       f"'{self.name}':\n{tail(str(e))}", ir.file, None, kernel=self.name) from None
                dev.programs[src] = prog
        # retrieved once per build; its argument types are declared at the first launch
        return cl.Kernel(prog, "tk_kernel"), ir, names, _ArgTypes()

    @staticmethod
    def _set_args(kern, types: "_ArgTypes", values: list) -> None:
        """``kern.set_args(*values)``, with the scalar types declared once per specialization
        (``types``, kept with it in the build cache): without them pyopencl tries each NumPy
        scalar as a buffer first and catches the error, about 10 us per argument (0.5 ms for
        an adjoint kernel's 50-70 values, more than PoCL's enqueue); with them it packs the
        scalars directly (a few us in all). A specialization's value list has the same
        layout at every launch."""
        if types.fast is None:
            cl = _cl()
            dts = [None if isinstance(v, cl.MemoryObjectHolder) else
                   np.dtype(type(v)) if isinstance(v, np.generic) else np.dtype(object) for v in values]
            fast = all(d is None or d.kind in "iuf" for d in dts)      # else pyopencl's own checks
            if fast:
                kern.set_scalar_arg_dtypes(dts)
            types.fast = fast
        kern.set_args(*values)

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        cl = _cl()
        check_stream(self.name, stream, self.backend)
        memo = getattr(self, "_relaunch", None)
        if memo is not None and memo.same(args, ndrange, workgroupsize):
            return memo.enqueue(cl, self, args, stream)
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return CLEvent(None)
        kern, ir, names, types = self._specialize(norm, geom, ndim, ranges, wg)
        self._check_args(ir, norm, geom, ndim)
        values = []
        for d in range(ndim):
            values += [np.int64(geom[3 * d]), np.int64(geom[3 * d + 1]), np.int64(geom[3 * d + 2])]
        for p, a in zip(ir.params, norm):
            if p[0] == "array":
                values.append(a.buffer)
                values += [np.int64(n) for n in a.shape]
                values += [np.int64(s // a.dtype.itemsize) for s in a.strides]
            elif p[0] == "scalar":
                values.append(scalar_value(a, p[2]))
        err = None
        if ir.debug:
            err = cl.Buffer(self.backend._dev.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                            hostbuf=np.zeros(12, np.int64))
            values.append(err)
        self._set_args(kern, types, values)
        counts = [geom[3 * d + 1] for d in range(ndim)]
        gsize = tuple(-(-counts[d] // wg[d]) * wg[d] for d in reversed(range(ndim)))
        lsize = tuple(reversed(wg))
        _check_geometry(self.name, gsize, lsize, self.backend._dev.device)
        q = stream.queue if stream is not None else self.backend._dev.queue
        ev = cl.enqueue_nd_range_kernel(q, kern, gsize, lsize)
        memo = _Relaunch.of(args, ndrange, workgroupsize, kern, values, gsize, lsize) if err is None else None
        self._relaunch = memo
        self._args_set = getattr(self, "_args_set", {})
        self._args_set[id(kern)] = memo          # whose values the kernel object holds now
        if err is not None:
            ev.wait()
            info = np.empty(12, np.int64)
            cl.enqueue_copy(q, info, err, is_blocking=True)
            check_debug_info(info, names, ir.sites, self.name)
        return CLEvent(ev)


class _Relaunch:
    """The last launch of a kernel instance, to repeat without its host work: a launch with
    the very same device arrays (by identity, held weakly), equal scalars (same type and
    value), ndrange and workgroup size has the same validation, specialization, launch
    checks and argument values, so it only enqueues again (setting the values again only
    when another launch of the same specialization set its own since). A debug launch, or
    one with an argument that is neither a device array nor a Python or NumPy number (whose
    value could change under the same identity), is not kept."""
    __slots__ = ("refs", "ndrange", "wg", "kern", "values", "bufs", "gsize", "lsize")

    @classmethod
    def of(cls, args, ndrange, wg, kern, values, gsize, lsize):
        refs, bufs = [], []
        for a in args:
            if isinstance(a, CLArray):
                refs.append(weakref.ref(a))
            elif type(a) in (bool, int, float) or isinstance(a, np.generic):
                refs.append(a)
            else:
                return None
        vals = list(values)
        for pos, v in enumerate(vals):      # no strong references to the arrays' memory
            if isinstance(v, _cl().MemoryObjectHolder):
                owner = next((i for i, a in enumerate(args) if isinstance(a, CLArray) and a.buffer is v), None)
                if owner is None:
                    return None
                vals[pos] = None
                bufs.append((pos, owner))
        m = cls()
        m.refs, m.ndrange, m.wg, m.kern, m.values, m.bufs = refs, ndrange, wg, kern, vals, bufs
        m.gsize, m.lsize = gsize, lsize
        return m

    def same(self, args, ndrange, wg) -> bool:
        """Whether a launch with these arguments is this one again."""
        if not _same_value(ndrange, self.ndrange) or not _same_value(wg, self.wg) or len(args) != len(self.refs):
            return False
        for a, r in zip(args, self.refs):
            if type(r) is weakref.ref:
                if r() is not a:
                    return False
            elif type(a) is not type(r) or value_key(a) != value_key(r):    # -0.0 is not 0.0
                return False
        return True

    def enqueue(self, cl, inst, args, stream) -> "CLEvent":
        kern = self.kern
        if inst._args_set.get(id(kern)) is not self:       # another launch set its values since
            vals = list(self.values)
            for pos, owner in self.bufs:
                vals[pos] = args[owner].buffer
            kern.set_args(*vals)
            inst._args_set[id(kern)] = self
        q = stream.queue if stream is not None else inst.backend._dev.queue
        return CLEvent(cl.enqueue_nd_range_kernel(q, kern, self.gsize, self.lsize))


def _same_value(a, b) -> bool:
    """Whether a launch's ``ndrange`` or ``workgroupsize`` is the remembered one: equal and of
    the same types, through tuples and lists, so that ``8.0`` or ``True`` (which the full path
    rejects) never pass for ``8``, and a NumPy value is never compared by broadcasting
    (``np.int64(8) != ()`` is an empty array, whose truth value raises)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b if isinstance(a, (int, range, np.integer)) else a is b


class _ArgTypes:
    """Whether a specialization's kernel has its scalar argument types declared (``fast``:
    None before its first launch, then True, or False where pyopencl's generic path is
    kept: a value that is neither a buffer nor a NumPy number)."""
    __slots__ = ("fast",)

    def __init__(self) -> None:
        self.fast = None


MAX_GROUPS_PER_DIM = (1 << 32) - 1    # PoCL dies (SIGILL) beyond this; GPU drivers allow less


def _check_geometry(name: str, gsize: tuple, lsize: tuple, device) -> None:
    """A LaunchError when an NDRange exceeds what the device can index: per dimension (in
    OpenCL's order, fastest first) the work-item sizes, the number of workgroups, and the
    global size and total in the device's size_t (CL_DEVICE_ADDRESS_BITS)."""
    top = 1 << int(device.address_bits)
    sizes = list(device.max_work_item_sizes)
    total = 1
    for d, (g, l) in enumerate(zip(gsize, lsize)):
        tk_dim = len(gsize) - 1 - d                    # the ndrange dimension (last is fastest)
        if l > sizes[d]:
            raise LaunchError(f"kernel '{name}': a workgroup of {l} items along ndrange dimension {tk_dim} exceeds "
                              f"the device's limit of {sizes[d]} (CL_DEVICE_MAX_WORK_ITEM_SIZES)")
        if g // l > MAX_GROUPS_PER_DIM:
            raise LaunchError(f"kernel '{name}': {g // l} workgroups along ndrange dimension {tk_dim} exceed the "
                              f"OpenCL limit of {MAX_GROUPS_PER_DIM}; use a larger workgroup or split the launch")
        total *= g
    if total >= top:
        raise LaunchError(f"kernel '{name}': {total} work items exceed what the device's {top.bit_length() - 1}-bit "
                          "size_t can count (CL_DEVICE_ADDRESS_BITS); split the launch")


def _check_local_memory(ir, backend) -> None:
    """A CompileError at the largest tk.localmem's line when the kernel's local arrays exceed
    the device's CL_DEVICE_LOCAL_MEM_SIZE."""
    from ..passes.access import alloc_bytes
    need, loc = alloc_bytes(ir, "local")
    limit = int(backend._dev.device.local_mem_size)
    if need > limit:
        raise compile_error_at(f"the kernel's tk.localmem arrays need {need} bytes but {backend.device_name} has "
                               f"{limit} bytes of local memory (CL_DEVICE_LOCAL_MEM_SIZE)", loc, ir.name, ir.file)


def _finish_within(queues, timeout: float, what: str) -> None:
    """``finish()`` for each queue, but ``TimeoutError`` once ``timeout`` seconds have passed."""
    cl = _cl()
    deadline = deadline_of(timeout)
    for q in queues:
        marker = cl.enqueue_marker(q)
        q.flush()
        if not poll_until(lambda: marker.command_execution_status == cl.command_execution_status.COMPLETE,
                          deadline):
            raise TimeoutError(f"{what}: work still running after {timeout} s")


def _check_capabilities(ir, backend) -> None:
    """A kernel that needs float64 on a device without it is a CompileError at its line."""
    if backend.supports_float64:
        return
    from ..ir import nodes as N
    for s in N.walk_stmts(ir.body):
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if x.ty.dtype == D.float64 and not x.ty.weak:
                    raise compile_error_at(f"float64 is not supported on {backend.device_name} (no cl_khr_fp64)",
                                           x.loc, ir.name)


class OpenCLTarget(SourceTarget):
    """What the OpenCL C generator needs, with no OpenCL runtime: ``kernel.source("CL", ...)``
    on a machine without pyopencl or a device (SPEC 1: any machine). It assumes a device with
    cl_khr_fp64 and 64-bit atomics, and cannot launch."""
    name = "CL"
    dev = "CL"
    supports_float64 = True
    max_workgroupsize = 256
    items_in_loops = False


OpenCL.instance_class = CLKernelInstance
OpenCLTarget.instance_class = CLKernelInstance
