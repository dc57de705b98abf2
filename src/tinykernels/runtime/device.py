"""What the device runtimes (OpenCL, WebGPU, CUDA) share: launch bookkeeping and small helpers.

:class:`DeviceKernelInstance` is the base of their kernel instances: no host launcher fast
path, a compile cache per instance keyed by the arguments' signatures (:func:`arg_sig`),
device-array checks on the arguments, and the debug-error readback (:class:`HostErr`).
:class:`DeviceArray` is the base of their arrays. The functions are pure but for
:func:`track_stream`; each runtime keeps its own code generation, memory, queues and
launch in its own module.
"""
from __future__ import annotations

import re
from typing import TypeVar

import numpy as np

from .. import dtypes as D
from .forksafe import ForkSafeLock
from .hostarray import _DL_CPU, Array, _is_torch
from ..argcheck import debug_flag  # noqa: F401 (re-exported: the runtimes import it from here)
from ..globalreads import stale
from ..dtypes import Ty
from ..errors import CompileError, LaunchError
from ..ir.nodes import Loc, error_at
from ..tracebacks import USER_ERRORS, prepare as filtered
from .base import GROUPED_FEATURES, RECORDERS, Backend, KernelInstance, _check_debug, bind_launch_args, launch_checks
from .dlpack import c_strides  # noqa: F401 (re-exported: the runtimes import it from here)
from .launchcheck import check_launch
from .launchplan import value_key
from .streams import Event, deadline_of, poll_until

S = TypeVar("S")


def same_shape(a, b) -> None:
    """tk.copyto's shape check: ValueError unless ``a`` (dst) and ``b`` (src) have one shape."""
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"tk.copyto: shape mismatch: dst has shape {tuple(a.shape)}, src has shape {tuple(b.shape)}")


def track_stream(dev, stream: S) -> S:
    """Register a new stream with its device's ``streams`` (under ``dev.lock``); returns it."""
    with dev.lock:
        dev.streams.add(stream)
    return stream


class SourceTarget(Backend):
    """A backend that only renders source (``kernel.source(dev, ...)`` on a machine without the
    runtime or a device, SPEC 1); subclasses set ``name``, ``dev`` and the device limits. It
    cannot launch."""
    is_host = False
    can_launch = False

    def __init__(self, debug: bool | None = None):
        self.debug = debug_flag(debug, self)

    def key(self) -> tuple:
        return (f"{self.dev}-source", self.debug)

    def __repr__(self) -> str:
        module = type(self).__module__.replace("tinykernels.", "tk.", 1)
        return f"{module}.{type(self).__name__}(debug={self.debug})"

    @staticmethod
    def available() -> tuple:
        return False, "a code-generation target only"

    def supports(self, dtype) -> bool:
        return D.queried(dtype) is not None


class DeviceArray(Array):
    """Base of the device runtimes' arrays: the shape and dtype are kept in the object's
    own slots (no host NumPy array stands behind it)."""
    __slots__ = ("_dtype", "_shape")

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    def _host_capsule(self, dl_device, copy, max_version):
        """The DLPack export of a host copy when the consumer asks for host memory
        (``dl_device=(kDLCPU, 0)``) and allows a copy (``copy`` True or None: the producer
        copies, as the DLPack standard has it); None when it asks for no host memory;
        ``BufferError`` when it forbids the copy (``copy=False``)."""
        if dl_device is None or tuple(dl_device) != (_DL_CPU, 0):
            return None
        if copy is False:
            raise BufferError(f"tk.Array.__dlpack__: the array is in {self._backend.name} device memory; "
                              "exporting it to the CPU needs a copy, which copy=False forbids")
        from .dlpack import mark_copied
        host = np.ascontiguousarray(self.numpy())       # a fresh host copy: is-copied
        return mark_copied(Array(host, self._backend).__dlpack__(max_version=max_version))

    def _export_host_only(self, why: str, dl_device, copy, max_version):
        """``__dlpack__`` of a runtime whose buffers cannot be exported: a host copy when the
        consumer asks for one (:meth:`_host_capsule`), else ``BufferError(why)``."""
        cap = self._host_capsule(dl_device, copy, max_version)
        if cap is None:
            raise BufferError(why)
        return cap


def is_host_array(a) -> bool:
    """Whether a kernel argument is an array in host memory (or an array exporter), not a scalar."""
    if _is_torch(a):
        return a.device.type == "cpu"               # (a tensor on a GPU or 'meta' is not in host memory)
    if isinstance(a, Array):
        return a._host is not None                  # (another device backend's array is not either)
    return ((isinstance(a, np.ndarray) or hasattr(a, "__array_interface__") or hasattr(a, "__dlpack__"))
            and not isinstance(a, np.generic))


def arg_sig(a, kind: str, array_type: type, *, layout: bool = False) -> tuple:
    """The part of a compile-cache key one normalized argument contributes.

    ``array_type``: the runtime's device array class. ``layout``: an array's key also says
    whether it is contiguous (CUDA arrays may have any strides). A Python int's key says
    whether it is >= 2**63: such an int is a weak uint64, the others weak int64, on every
    backend (OpenCL and Metal keyed on the type alone, so 2**63 after 1 reused the int64
    build and passed -2**63)."""
    if kind == "constexpr":
        return ("C",) + value_key(a)
    if isinstance(a, array_type):
        return ("A", a.dtype.str, a.ndim, a.is_contiguous) if layout else ("A", a.dtype.str, a.ndim)
    if isinstance(a, np.generic):
        return ("S", a.dtype.str)
    return (type(a).__name__, a >= 1 << 63 if isinstance(a, int) and not isinstance(a, bool) else None)


def fits32(args, geom, array_types, wg: tuple | None = None, spans: bool = True) -> bool:
    """Whether a launch's indices fit in 32-bit ints.

    The work items: with ``wg``, each dimension padded to whole workgroups (so even masked
    items' positions fit); without, the ndrange's three counts. The arguments that are
    ``array_types``: their size and, with ``spans``, the element span their strides reach."""
    if wg is None:
        items = geom[1] * geom[4] * geom[7]
    else:
        items = 1
        for d in range(len(wg)):
            items *= -(-geom[3 * d + 1] // wg[d]) * wg[d]
    if items >= 1 << 31:
        return False
    for a in args:
        if isinstance(a, array_types):
            if a.size >= 1 << 31:
                return False
            if spans:
                item = a.dtype.itemsize
                if sum(abs(s // item) * max(n - 1, 0) for s, n in zip(a.strides, a.shape)) >= 1 << 31:
                    return False
    return True


def scalar_value(a, ty: Ty):
    """A scalar argument as the NumPy scalar the kernel parameter of type ``ty`` takes
    (bool as uint8, storage-only floats (bf16, fp8) as float32)."""
    d = ty.dtype
    if d.kind == "b":
        return np.uint8(bool(a))
    if d.is_storage_only:
        return np.float32(a)
    return np.array(a).astype(D.to_numpy(d))[()]


def tail(text: str, n: int = 30) -> str:
    """The last ``n`` non-blank lines of a compiler log."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def clang_log_error(msg: str, log: str, kernel: str) -> CompileError:
    """A CompileError from clang's diagnostics ``log`` (hiprtc's and clang's own): ``msg``,
    the Python line the ``#line`` directives point at and its first error, then up to ten
    lines of the log that name an error."""
    py = re.search(r'^(.*?\.py):(\d+):\d+: (?:fatal )?error:\s*(.*)$', log, re.M)
    if py:
        msg += f" (from {py.group(1)}:{py.group(2)}): {py.group(3)}"
    errors = [ln for ln in log.splitlines() if "error" in ln] or log.strip().splitlines()
    return CompileError(msg + ":\n" + "\n".join(errors[:10]), py.group(1) if py else None,
                        int(py.group(2)) if py else None, 0, kernel=kernel)


def compile_error_at(msg: str, loc: Loc | None, kernel: str, file: str | None = None) -> CompileError:
    """A CompileError at an IR location ``loc`` (with its source line), or in ``file`` when
    ``loc`` is None: a kernel asks for what the device does not have."""
    return error_at(msg, loc, kernel, file)


def group_plan(ir):
    """Check where the kernel's barriers stand; its group plan when it uses group features
    (barriers, local memory, collectives), else None (the renderers' second argument)."""
    from ..passes.groups import plan_groups
    from ..passes.uniformity import check_barriers, uniform_vars
    u = uniform_vars(ir.body, ir.locals)
    check_barriers(ir, u)
    grouped = bool(ir.uses & GROUPED_FEATURES)
    return plan_groups(ir, u) if grouped else None


class HostErr:
    """Adapts a copied-back error buffer to the CPU's debug-error reporter (it reads
    ``c.lib.tk_get_error``, ``c.array_names`` and ``c.sites`` of a compiled CPU kernel)."""

    def __init__(self, info, names: list, sites: list) -> None:
        self.array_names, self.sites = names, sites
        self.lib = self
        self._info = info

    def tk_get_error(self, buf) -> None:
        for k in range(12):
            buf[k] = int(self._info[k])

    def tk_clear_error(self) -> None:
        pass


def check_device_array(kernel: str, name: str, a) -> None:
    """LaunchError when the device array ``a`` passed as argument ``name`` has a dtype
    tinykernels does not know, more than 8 dimensions, or strides that are not a multiple of
    its item size. (A 0-d array is an array of one element, as on every backend.)"""
    if D.from_any(a.dtype) is None:
        raise LaunchError(f"kernel '{kernel}': argument '{name}' has {D.unsupported(a.dtype)}")
    if a.ndim > 8:
        raise LaunchError(f"kernel '{kernel}': argument '{name}' has {a.ndim} dimensions; at most 8 are supported")
    if any(s % a.dtype.itemsize for s in a.strides):
        raise LaunchError(f"kernel '{kernel}': argument '{name}' has strides that are not a multiple "
                          "of its item size")


def check_debug_info(info, names: list, sites: list, kernel: str) -> None:
    """Raise the IndexError a debug kernel recorded in its copied-back error buffer ``info``
    (12 integers; ``info[0]`` set when an access was out of bounds, ``info[1]`` its index in
    ``sites``, the kernel IR's ``sites``)."""
    if info[0]:
        _check_debug(HostErr(info, names, sites), kernel)


class DeviceKernelInstance(KernelInstance):
    """A kernel on a device runtime. Subclasses set :attr:`array_type` and :attr:`label` and
    implement ``_render``, ``_build`` (what :meth:`_specialize` caches) and ``_launch``."""

    array_type: type = DeviceArray    # the runtime's device array class
    label: str = "device"             # the backend in messages: "the OpenCL backend needs device arrays"

    def __init__(self, kernel, backend, wg) -> None:
        self.kernel, self.backend, self.static_wg = kernel, backend, wg
        self.name = kernel.name
        self._compiled: dict = {}
        self._checks: dict = {}           # id(ir) of a specialization -> its LaunchChecks
        self._lock = ForkSafeLock()
        self._cmask = kernel.cmask
        self._reads = kernel._reads

    def _forget(self) -> None:
        super()._forget()
        self._checks.clear()

    def __call__(self, *args, ndrange=None, workgroupsize=None, stream=None, **named) -> Event:
        if self._reads and stale(self._reads):     # a global the compiled code folded in changed
            self.kernel.globals_changed()
        if named or ndrange is None:
            args = bind_launch_args(self.name, self.kernel.params, args, named, ndrange)
        if RECORDERS:                   # inside tk.autodiff: the recorder launches (and replays) it
            return RECORDERS[-1].launch(self, args, ndrange, workgroupsize, stream)
        try:
            return self._launch(args, ndrange, workgroupsize, stream)
        except USER_ERRORS as e:      # the user sees their launch line, not the compiler's frames
            raise filtered(e)

    def _normalize(self, a, name: str, kind: str):
        """A device array of this backend as it is; a host array is refused; the rest as on the CPU."""
        if isinstance(a, self.array_type):
            if a.backend != self.backend:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is on {a.backend!r}, "
                                  f"not on {self.backend!r}")
            return a
        if kind != "constexpr" and is_host_array(a) and \
                (getattr(a, "ndim", None) != 0 or self._zero_d_is_array(name, kind)):
            raise self._host_array_error(name)      # (a 0-d host array is a scalar argument, unless indexed)
        return super()._normalize(a, name, kind)

    def source(self, *args, ndrange, workgroupsize=None) -> str:
        """The generated source for these arguments; host arrays stand in for device arrays
        (only their dtype, rank and layout matter; nothing is copied to the device)."""
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize, self._normalize_for_source)
        return self._render(self._ir(norm, geom, ndim, ranges, wg), ranges)[0]

    def _normalize_for_source(self, a, name: str, kind: str):
        if kind != "constexpr" and not isinstance(a, self.array_type) and is_host_array(a):
            return KernelInstance._normalize(self, a, name, kind)
        return self._normalize(a, name, kind)

    def _host_array_error(self, name: str) -> LaunchError:
        """The error for a host array passed where this backend needs a device array."""
        return LaunchError(f"kernel '{self.name}': argument '{name}' is a host array; the {self.label} backend "
                           "needs device arrays: tk.asarray(x, backend=...)")

    def _sig(self, a, kind: str) -> tuple:
        """One argument's part of the compile-cache key (see :func:`arg_sig`)."""
        return arg_sig(a, kind, self.array_type)

    def _key(self, norm, geom, ndim, ranges, wg) -> tuple:
        """The compile-cache key of a launch."""
        return (tuple(self._sig(a, kind) for a, (_, kind) in zip(norm, self.kernel.params)), ndim, ranges, wg)

    def _check_args(self, ir, norm, geom, ndim) -> None:
        """The launch checks (:mod:`.launchcheck`: aliased tk.Const arrays, certain
        out-of-bounds accesses) of the specialization ``ir`` on this launch's arguments."""
        checks = self._checks.get(id(ir))
        if checks is None:
            checks = self._checks[id(ir)] = launch_checks(self.kernel, ir, norm)
        check_launch(self.name, checks, norm, geom, ndim)

    def _specialize(self, norm, geom, ndim, ranges, wg) -> tuple:
        """What ``_build`` returns for this launch's key: built once (under the lock), then cached."""
        key = self._key(norm, geom, ndim, ranges, wg)
        entry = self._compiled.get(key)
        if entry is None:
            with self._lock:
                entry = self._compiled.get(key)
                if entry is None:
                    entry = self._compiled[key] = self._build(norm, geom, ndim, ranges, wg)
        return entry


class DeviceEvent(Event):
    """An event that completes on a device, not by a host job: ``done()`` and ``wait()`` ask
    the device. ``_block`` (what host streams and ``tk.synchronize`` wait with) uses them, so
    a host stream can wait for a device event (``Stream.wait``)."""
    __slots__ = ()

    def _recorded(self) -> bool:
        return True                  # made by a launch or a copy: it completes

    def _block(self, timeout: float | None = None) -> bool:
        if timeout is None:
            self.wait()
            return True
        return poll_until(self.done, deadline_of(timeout))

    def _wait_done(self, timeout: float | None) -> None:
        """For a runtime's ``wait(timeout)``: poll ``done()``; ``TimeoutError`` past ``timeout``."""
        if not poll_until(self.done, deadline_of(timeout)):
            raise TimeoutError(f"{self!r} did not complete within {timeout} s (it is still running)")
