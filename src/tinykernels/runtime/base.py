"""What every backend's runtime builds on: the :class:`Backend` base class, the
:class:`KernelInstance` base (argument validation, specialization specs, lowering), launch
geometry, and the list of active ``tk.autodiff`` recorders.

This is the bottom of the runtime layer: the runtimes (``cpu``, ``device`` and the device
runtimes, ``interp``) derive from these classes, and the API layer (``kernel.py``,
``backends.py``, ``array.py``, ``autodiff.py``) re-exports them; nothing here imports the
API layer (docs/architecture.md, tests/test_layers.py).
"""
from __future__ import annotations

import ctypes

import numpy as np

from .. import dtypes as D, globalreads
from ..dtypes import Ty
from ..errors import CompileError, LaunchError
from .forksafe import ForkSafeLock
from ..ir import nodes as N
from ..tracebacks import api_boundary
from .compiler import SCOPE_FEATURES
from .hostarray import Array, _is_torch, as_host_ndarray
from .launchplan import value_key
from .streams import Event

DEFAULT_WORKGROUP = {1: (256,), 2: (16, 16), 3: (4, 8, 8)}
GROUPED_FEATURES = SCOPE_FEATURES["grouped"]     # need the group-by-group code shape


def kernel_features(ir: N.Kernel) -> frozenset:
    """The features of the kernel ``ir`` as compiled (after every pass) for the C compiler's
    scoped flags (``Toolchain.kernel_flags``): its ``uses``, and "permuted-doubles" where it
    computes with 64-bit floats (float64 values, autodiff's float64 partial sums of a float32
    kernel, the prelude's double evaluations) and has an access whose index may not follow the
    vector lanes' order (``passes.permuted_access``): the C compiler may then permute vectors
    of doubles."""
    from ..passes.permuted_access import computes_doubles, permuted_accesses
    permuted = computes_doubles(ir) and bool(permuted_accesses(ir, bool(ir.uses & GROUPED_FEATURES)))
    return frozenset(ir.uses) | ({"permuted-doubles"} if permuted else frozenset())


RECORDERS: list = []      # active tk.autodiff recordings (innermost last); launches go through them

_STREAMS: dict = {}            # explicit cache: backend key -> StreamSet
_STREAMS_LOCK = ForkSafeLock()


class Backend:
    """Base class: a device and its settings."""
    name = "?"
    dev = "?"                     # the DEV string that makes this kind of backend
    is_host = False
    supports_float64 = True
    max_workgroupsize = 1024
    debug = False
    items_in_loops = False        # a work group's items run as a (vectorized) loop on a CPU (PoCL)
    bounded_loops = False         # the driver may stop a work item's loops after a fixed count of
                                  # back edges (lavapipe: 65535, docs/webgpu.md): generated code
                                  # must not pack several items' loops into one work item

    def key(self) -> tuple:
        """Everything that identifies the device and settings (equality, caches)."""
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return isinstance(other, Backend) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def supports(self, dtype) -> bool:
        """Whether arrays of ``dtype`` can be stored and computed with."""
        return D.queried(dtype) is not None

    def supports_atomic(self, dtype) -> bool:
        d = D.queried(dtype)
        return d is not None and d.name in ("int32", "uint32", "int64", "uint64", "float32", "float64")

    def _stream_set(self):
        from .streams import StreamSet
        k = self.key()
        with _STREAMS_LOCK:
            s = _STREAMS.get(k)
            if s is None:
                s = _STREAMS[k] = StreamSet()
            return s

    def stream(self, priority: int = 0):
        """A new stream (``tk.High``, ``tk.Normal``, ``tk.Low`` or an int priority)."""
        s = self._stream_set().stream(priority)
        s.backend = self
        return s

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait for all work submitted to this device's streams (``TimeoutError`` if some is
        still running after ``timeout`` seconds)."""
        with _STREAMS_LOCK:
            s = _STREAMS.get(self.key())
        if s is not None:
            s.synchronize(timeout)


def _norm_wg(wg, name) -> int | tuple:
    """A validated workgroup size: an int stays an int (its shape depends on the ndrange's
    rank, see :func:`expand_wg`), a tuple or list becomes a tuple of ints."""
    t = (wg,) if isinstance(wg, (int, np.integer)) else tuple(wg) if isinstance(wg, (tuple, list)) else None
    if t is None or not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                                    and x > 0 for x in t):
        raise LaunchError(f"kernel '{name}': workgroupsize must be a positive int or a tuple of 1 to 3 "
                          f"positive ints, got {wg!r}")
    return int(wg) if isinstance(wg, (int, np.integer)) else tuple(int(x) for x in t)


def expand_wg(wg: int | tuple, ndim: int) -> tuple:
    """The workgroup shape for an ndrange of rank ``ndim``: an int ``n`` is ``n`` items along
    the last (fastest-varying, contiguous) dimension: ``(n,)``, ``(1, n)`` or ``(1, 1, n)``."""
    return (1,) * (ndim - 1) + (wg,) if isinstance(wg, int) else wg


def bind_launch_args(name: str, params, args: tuple, named: dict, ndrange) -> tuple:
    """The positional arguments of a launch that passes some by keyword (bound by parameter
    name, as in a Python call); a LaunchError naming the kernel for an unknown or repeated
    name, or a missing ``ndrange=``."""
    if ndrange is None:
        raise LaunchError(f"kernel '{name}': ndrange= is missing (an int, or a tuple of 1 to 3 ints or ranges)")
    if not named:
        return args
    first = len(args)
    if first + len(named) == len(params):     # the usual call: the rest of the parameters, each once
        try:
            return tuple(args) + tuple([named[p[0]] for p in params[first:]])
        except KeyError:                      # some name unknown or given twice: say which below
            pass
    names = [n for n, _ in params]
    if len(args) > len(names):
        raise LaunchError(f"kernel '{name}' takes {len(names)} argument(s) ({', '.join(names)}), got {len(args)} "
                          f"positional and {len(named)} by keyword")
    for key in named:
        if key not in names:
            raise LaunchError(f"kernel '{name}' has no argument '{key}' (its arguments: {', '.join(names)})")
        if names.index(key) < len(args):
            raise LaunchError(f"kernel '{name}': argument '{key}' is given twice (by position and by keyword)")
    missing = [n for n in names[len(args):] if n not in named]
    if missing:
        raise LaunchError(f"kernel '{name}': argument(s) {', '.join(repr(n) for n in missing)} missing "
                          f"(its arguments: {', '.join(names)})")
    return tuple(args) + tuple(named[n] for n in names[len(args):])


def parse_ndrange(ndrange, name) -> tuple:
    """(geometry 9-tuple, ndim, ranges, total items) from an int, tuple of ints/ranges.

    ``ranges`` is 0 when every dimension starts at 0 with step 1, 1 when some start is
    offset (steps all 1), 2 when some step differs from 1: each is its own specialization,
    so the common cases keep unit-stride, vectorizable inner loops."""
    dims = ndrange if isinstance(ndrange, (tuple, list)) else (ndrange,)
    if not 1 <= len(dims) <= 3:
        raise LaunchError(f"kernel '{name}': ndrange must have 1 to 3 dimensions, got {ndrange!r}")
    geom, ranges, total = [0, 1, 1] * 3, 0, 1
    for d, x in enumerate(dims):
        if isinstance(x, range):
            start, count, step = x.start, len(x), x.step
            ranges = max(ranges, 2 if step != 1 else 1 if start != 0 else 0)
        elif isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            start, count, step = 0, int(x), 1
            if count < 0:
                raise LaunchError(f"kernel '{name}': ndrange dimension {d} is negative ({x})")
        elif x is ndrange and hasattr(x, "shape") and hasattr(x, "tolist") and not isinstance(x, np.generic):
            # a whole NumPy array / tensor of sizes (np.array(A.shape)): said so, not "a dimension"
            raise LaunchError(f"kernel '{name}': ndrange must be an int or a tuple of 1 to 3 ints or ranges, got "
                              f"a {type(x).__name__} {x!r}: pass "
                              + ("int(ndrange)" if getattr(x, "ndim", 1) == 0 else "tuple(int(n) for n in ndrange)"))
        else:
            raise LaunchError(f"kernel '{name}': ndrange dimensions must be ints or ranges, got {x!r}")
        last = start + max(count - 1, 0) * step
        if min(start, step, last) < -2**63 or max(start, step, last, count) >= 2**63:   # (per launch: no calls)
            raise LaunchError(f"kernel '{name}': ndrange dimension {d} ({x!r}) does not fit in 64 bits "
                              "(its coordinates and size must be int64)")
        geom[3 * d:3 * d + 3] = [start, count, step]
        total *= count
    if total >= 2**63:
        raise LaunchError(f"kernel '{name}': ndrange {ndrange!r} has {total} work items, more than 2**63 - 1")
    return tuple(geom), len(dims), ranges, total


def launch_checks(kernel, ir, norm):
    """The launch checks of one compiled specialization (read-only and aliased arguments,
    certain out-of-bounds accesses; see :mod:`tinykernels.runtime.launchcheck`)."""
    from ..passes.access import analyze
    from .launchcheck import plan_checks
    return plan_checks(kernel.params, analyze(ir), norm, ir.debug)


def _check_debug(c, name: str) -> None:
    buf = (ctypes.c_int64 * 12)()
    c.lib.tk_get_error(buf)
    if buf[0]:
        c.lib.tk_clear_error()
        site, arr, nd = buf[1], buf[2], buf[3] % N.OOB_UNSIGNED
        for d in range(3):                  # a u32 index that a 32-bit slot holds as negative
            if buf[3] // N.OOB_UNSIGNED >> d & 1 and buf[4 + 2 * d] < 0:
                buf[4 + 2 * d] += 1 << 32
        where = f"kernel '{name}' at {N.site_text(c.sites[site]) if 0 <= site < len(c.sites) else '?'}"
        if arr == -1:       # codegen clike/wgsl zero_step_check
            raise ValueError(f"{where}: range() step is zero (the loop runs no iteration outside check and debug mode)")
        what = N.debug_phrase(c.array_names[arr]) if 0 <= arr < len(c.array_names) else "array '?'"
        if nd > 15:         # more than three dimensions: the buffer holds axes 0, 1 and the bad one
            nd, axis = nd & 15, nd >> 4
            axis = next((d for d in (0, 1) if not 0 <= buf[4 + 2 * d] < buf[5 + 2 * d]), axis)
            i, n = buf[4 + 2 * min(axis, 2)], buf[5 + 2 * min(axis, 2)]
            raise IndexError(f"{where}: index {i} along axis {axis} of a {nd}-dimensional index is out of "
                             f"bounds for {what}, whose extent along axis {axis} is {n}")
        idx = tuple(buf[4 + 2 * d] for d in range(nd))
        shape = tuple(buf[5 + 2 * d] for d in range(nd))
        raise IndexError(f"{where}: index {idx if nd > 1 else idx[0]} is out of "
                         f"bounds for {what} with shape {shape}")


def _fits32(args, geom) -> bool:
    if geom[1] * geom[4] * geom[7] >= 1 << 31:
        return False
    for a in args:
        if isinstance(a, np.ndarray):
            span = sum(abs(s // a.itemsize) * max(n - 1, 0) for s, n in zip(a.strides, a.shape))
            if a.size >= 1 << 31 or span >= 1 << 31:
                return False
    return True


def stream_mismatch(stream, backend: Backend) -> str | None:
    """Why ``stream`` cannot order work on ``backend`` (None when it can): it must be a stream
    ``backend.stream()`` made (backends that compare equal share streams); on a host backend
    a plain ``tk.Stream()`` serves too. The caller raises its error with this text."""
    if stream is None:
        return None
    owner = getattr(stream, "backend", None)
    if owner is backend:
        return None
    from .streams import Stream
    if owner is None and isinstance(stream, Stream) and backend.is_host:
        return None
    if owner is None or not callable(getattr(stream, "synchronize", None)):
        return f"stream= must be a stream of {backend!r} (backend.stream()), got {type(stream).__name__}"
    if owner != backend:
        return f"the stream belongs to another backend ({owner!r}), not to {backend!r}"
    return None


def check_stream(kernel: str, stream, backend: Backend) -> None:
    """``tk.LaunchError`` naming the kernel when ``stream`` is not one of ``backend``'s."""
    why = stream_mismatch(stream, backend)
    if why is not None:
        raise LaunchError(f"kernel '{kernel}': {why}")


def _unaligned_argument(kernel: str, name: str, arr) -> str:
    """The LaunchError message for a host array the kernel cannot address element by element:
    byte-swapped, misaligned, or with strides that are not whole elements; with a fix that works
    (``np.ascontiguousarray`` keeps the byte order, and the alignment of a contiguous array)."""
    if not arr.dtype.isnative:
        return (f"kernel '{kernel}': argument '{name}' has byte-swapped dtype {arr.dtype.str} (non-native byte "
                f"order); pass a native-order copy: np.array(x, dtype=x.dtype.newbyteorder('='))")
    why = ("is not aligned to its {0}-byte elements" if arr.flags.aligned is False and
           not any(s % arr.itemsize for s in arr.strides) else "has strides {1} that are not multiples of its "
           "{0}-byte elements").format(arr.itemsize, arr.strides)
    return f"kernel '{kernel}': argument '{name}' {why}; pass an aligned copy (x.copy())"


def _unusable_argument(kernel: str, name: str, a, backend: Backend) -> str:
    """The message for an argument this host backend cannot take: where an array of another
    backend lives and how to bring it here, else what types are accepted."""
    if isinstance(a, Array):
        return (f"kernel '{kernel}': argument '{name}' is an array on {a.backend!r}, but the kernel runs on "
                f"{backend!r}: run the kernel there ({kernel}({name}.backend)) or copy the array here "
                f"(tk.asarray({name}.numpy(), backend=...), or {name}.numpy() for a NumPy copy)")
    dev = getattr(a, "device", None)
    if _is_torch(a) and getattr(dev, "type", "cpu") != "cpu":
        return (f"kernel '{kernel}': argument '{name}' is a torch tensor on {dev}, but the kernel runs on "
                f"{backend!r}: move it there (tensor.cpu() for a host backend)")
    if hasattr(a, "__cuda_array_interface__") and not hasattr(a, "__array_interface__"):
        return (f"kernel '{kernel}': argument '{name}' ({type(a).__name__}) is in CUDA device memory "
                f"(__cuda_array_interface__), but the kernel runs on {backend!r}: launch it on tk.CUDA() "
                "or copy the array to the host first")
    hint = f": make it an array first, e.g. np.asarray({name}, np.float32)" if isinstance(a, (list, tuple)) else ""
    if isinstance(a, np.generic) and D.from_any(a.dtype) is not None:   # an ml_dtypes bfloat16 / float8 scalar
        return (f"kernel '{kernel}': argument '{name}' is a {a.dtype.name} scalar: arrays of {a.dtype.name} are "
                f"kernel arguments, but scalars are bools, ints and floats (Python's or NumPy's): pass "
                f"np.float32({name}) (exact), or a 0-d {a.dtype.name} array the kernel reads with {name}[()]")
    return (f"kernel '{kernel}': argument '{name}' has unsupported type {type(a).__name__} (expected an "
            "array (a tk.Array, a NumPy array, a CPU torch tensor, anything exporting DLPack or "
            f"__array_interface__), a bool, int or float){hint}")


def python_ints_as_int32(specs: dict, args, params) -> dict:
    """``specs`` with every Python int argument a weak int32 scalar, as on backends whose
    Python ints are 32-bit (WebGPU; the fuzzer's CPU reference for it)."""
    from ..frontend import ScalarSpec
    for a, (name, kind) in zip(args, params):
        if kind != "constexpr" and isinstance(a, int) and not isinstance(a, bool):
            specs[name] = ScalarSpec(Ty(D.int32, True))
    return specs


class KernelInstance:
    """A kernel bound to a backend and (optionally) a static workgroup size: what every
    backend's instance shares (argument validation, specialization specs, lowering).
    Each runtime derives its own (``runtime.cpu.CPUKernelInstance``, ...), which compiles
    and launches."""

    def __init__(self, kernel, backend: Backend, wg):
        self.kernel, self.backend, self.static_wg = kernel, backend, wg
        self.name = kernel.name
        self._compiled: dict = {}
        self._lock = ForkSafeLock()       # held while compiling (runtime/forksafe.py)
        self._cmask = kernel.cmask
        self._reads = kernel._reads       # the globals its code folded in: checked by every launch

    def __repr__(self) -> str:
        return f"<{self.name} on {self.backend!r}{' wg=' + str(self.static_wg) if self.static_wg else ''}>"

    def __call__(self, *args, ndrange=None, workgroupsize=None, stream=None, **named) -> Event:
        """Launch (asynchronously) over ``ndrange``; arguments by position or by name."""
        raise NotImplementedError

    def _forget(self) -> None:
        """Drop the compiled specializations (a global they folded in changed); runtimes with
        more tables (fast-path plans, launch checks) extend it."""
        self._compiled.clear()
        plans = getattr(self, "_plans", None)
        if plans is not None:
            plans.clear()

    # --- the slow path: validate, normalise, specialise, compile ---------------------------

    def _prepare(self, args, ndrange, workgroupsize, normalize=None):
        """Validated ``(arguments, geometry, ndim, ranges, total items, workgroup)``;
        ``normalize``: how each argument is checked (default: ``self._normalize``)."""
        k = self.kernel
        normalize = normalize or self._normalize
        if len(args) != len(k.params):
            names = ", ".join(n for n, _ in k.params)
            raise LaunchError(f"kernel '{self.name}' takes {len(k.params)} argument(s) ({names}), got {len(args)}")
        geom, ndim, ranges, total = parse_ndrange(ndrange, self.name)
        wg = self._workgroup(ndim, workgroupsize)
        norm = tuple(normalize(a, name, kind) for a, (name, kind) in zip(args, k.params))
        return norm, geom, ndim, ranges, total, wg

    def _workgroup(self, ndim, workgroupsize):
        static = expand_wg(self.static_wg, ndim) if self.static_wg is not None else None
        if workgroupsize is not None and static is not None and \
                expand_wg(_norm_wg(workgroupsize, self.name), ndim) != static:
            raise LaunchError(f"kernel '{self.name}' was instantiated with workgroup size {self.static_wg}; "
                              f"launch got {workgroupsize!r}")
        wg = static or (expand_wg(_norm_wg(workgroupsize, self.name), ndim) if workgroupsize is not None else None)
        if wg is None:
            return DEFAULT_WORKGROUP[ndim]
        if len(wg) != ndim:
            raise LaunchError(f"kernel '{self.name}': workgroupsize {wg} has {len(wg)} dimension(s) but the "
                              f"ndrange has {ndim}")
        size = int(np.prod(wg))
        if size > self.backend.max_workgroupsize:
            raise LaunchError(f"kernel '{self.name}': workgroup of {size} items exceeds {self.backend.name}'s "
                              f"maximum of {self.backend.max_workgroupsize}")
        return wg

    def _normalize(self, a, name, kind):
        if kind == "constexpr":
            if not isinstance(a, (bool, int, float, np.generic, type, np.dtype)):
                raise LaunchError(f"kernel '{self.name}': constexpr argument '{name}' must be a bool, int, float "
                                  f"or dtype, got {type(a).__name__}")
            return a
        if isinstance(a, np.ndarray):
            arr = a
        elif isinstance(a, (bool, int, float)) or (isinstance(a, np.generic) and np.dtype(type(a)).kind in "biuf"):
            if type(a) not in (bool, int, float) and not isinstance(a, np.generic):
                a = float(a) if isinstance(a, float) else int(a)     # a subclass (IntEnum, ...): its value
            if type(a) is int and not -(1 << 63) <= a < (1 << 64):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' = {a} does not fit in 64 bits")
            if isinstance(a, np.generic) and D.from_any(a.dtype) is None:    # np.longdouble
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is a scalar of unsupported dtype "
                                  f"{a.dtype} (pass float(x) or a NumPy scalar of a supported dtype)")
            return a
        else:
            try:
                arr = as_host_ndarray(a)
            except Exception as e:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' ({type(a).__name__}) cannot be used "
                                  f"on {self.backend.name}: {e}") from None
            if arr is None:
                raise LaunchError(_unusable_argument(self.name, name, a, self.backend))
        if D.from_any(arr.dtype) is None:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' has {D.unsupported(arr.dtype)}")
        if arr.ndim == 0 and arr.dtype.kind in "biuf" and not self._zero_d_is_array(name, kind):
            return arr[()]          # a 0-d array (np.array(2.0), torch.tensor(2.0)): its NumPy scalar (strong)
        if arr.ndim > 8:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' must have 0 to 8 dimensions, got {arr.ndim}")
        if not arr.flags.aligned or not arr.dtype.isnative or any(s % arr.itemsize for s in arr.strides):
            raise LaunchError(_unaligned_argument(self.name, name, arr))
        return arr

    def _zero_d_is_array(self, name: str, kind: str) -> bool:
        """Whether a 0-d array passed for parameter ``name`` stays an array: a ``tk.Const``
        one, or one the kernel uses as an array (``A[()] = v``); otherwise it is a scalar."""
        if kind == "const":
            return True
        array_params = getattr(self.kernel, "array_params", None)
        return array_params is not None and name in array_params()

    def _specs(self, args, wg):
        from ..frontend import ArraySpec, ConstexprSpec, ScalarSpec
        out = {}
        df = D.float64 if self.backend.supports_float64 else D.float32
        for a, (name, kind) in zip(args, self.kernel.params):
            if kind == "constexpr":
                out[name] = ConstexprSpec(a)
            elif isinstance(a, np.ndarray):
                out[name] = ArraySpec(D.from_any(a.dtype), a.ndim, bool(a.flags.c_contiguous), kind == "const")
            elif isinstance(a, Array):   # a device array
                out[name] = ArraySpec(D.from_any(a.dtype), a.ndim, a.is_contiguous, kind == "const")
            elif isinstance(a, np.generic):          # NumPy scalars are strong (np.float64 too)
                out[name] = ScalarSpec(Ty(D.from_any(a.dtype)))
            elif isinstance(a, bool):
                out[name] = ScalarSpec(Ty(D.bool_, True))
            elif isinstance(a, int):   # a Python int: weak; one in [2**63, 2**64) is carried as uint64
                out[name] = ScalarSpec(Ty(D.int64 if a < (1 << 63) else D.uint64, True))
            elif isinstance(a, float):
                out[name] = ScalarSpec(Ty(df, True))
            if kind == "const" and name not in out or (kind == "const" and not isinstance(out[name], ArraySpec)):
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is annotated tk.Const but is not an array")
        return out

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, idx32=_fits32(args, geom),
                           default_float=D.float64 if self.backend.supports_float64 else D.float32)

    def ir_fact(self, name: str, fact, args, geom, ndim, ranges, wg):
        """``fact(ir)`` of this launch's specialization (``name`` tells facts apart): computed
        once per specialization and kept with the compiled code, which ``_forget`` drops when
        a global the kernel folded in changes. ``tk.autodiff`` asks every launch which arrays
        the kernel reads and writes; lowering the kernel again for it cost about 1 ms per
        launch of the 2-D stencil."""
        from ..frontend import ConstexprSpec
        specs = self._specs(args, wg)
        try:        # a constexpr's exact value: 1 == 1.0 == True and 0.0 == -0.0 compile apart
            key = ("fact", name, tuple((n, s, value_key(s.value) if isinstance(s, ConstexprSpec) else None)
                                       for n, s in specs.items()), ndim, wg, _fits32(args, geom))
            value = self._compiled.get(key)
        except TypeError:            # an unhashable constexpr value: not cached
            return fact(self._ir(args, geom, ndim, ranges, wg))
        if value is None:
            value = self._compiled[key] = fact(self._ir(args, geom, ndim, ranges, wg))
        return value

    def _lower(self, args, wg, **options):
        """The kernel's IR for these arguments; ``options``: the backend's LowerOptions fields
        besides the workgroup, ``unsafe_indices``, ``debug`` and the kernel name."""
        from ..frontend import LowerOptions
        k = self.kernel
        src = k.source_info()
        opts = LowerOptions(workgroup=wg, unsafe_indices=k.unsafe_indices, fastmath=k.fastmath,
                            debug=self.backend.debug,
                            kernel_name=k.name, **options)
        try:
            with globalreads.recording() as reads:
                ir = k.lower_ir(src, self._specs(args, wg), opts)
            k.note_reads(list(reads.values()))
            return ir
        except CompileError:
            raise
        except RecursionError:
            raise CompileError("the kernel is nested too deeply to compile (every binary operator nests one level, "
                               "so a sum of a few hundred terms in one expression is that deep: split it into "
                               "statements, e.g. acc += ... per term or per group of terms)", src.file,
                               src.first_line, kernel=k.name) from None

    @api_boundary
    def source(self, *args, ndrange, workgroupsize=None) -> str:
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        return self._render(self._ir(norm, geom, ndim, ranges, wg), ranges)[0]
