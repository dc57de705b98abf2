"""CUDA kernel instances: compiling and loading modules, checking and launching.

Compilation is NVRTC's (runtime/nvrtc.py, disk cache); the cubin of each distinct source is
loaded once per device (``cuModuleLoadData``, the device's ``modules``). A launch goes
through ``cuLaunchKernel`` with the argument block of runtime/paramblock.py.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import threading
from functools import lru_cache

import numpy as np

from .. import dtypes as D
from ..globalreads import stale
from ..errors import BackendUnavailable, LaunchError
from ..tracebacks import USER_ERRORS, prepare as filtered
from .base import RECORDERS, KernelInstance, bind_launch_args
from .cuda_context import CURRENT  # noqa: F401 (CURRENT, SUCCESS, new_event: used by the launcher templates)
from .cuda_driver import SUCCESS, checked, driver  # noqa: F401
from .cuda_memory import CUDAArray
from .cuda_streams import CUDAEvent, CUDAStream, new_event  # noqa: F401
from .device import DeviceKernelInstance, arg_sig, check_debug_info, check_device_array, fits32, group_plan, \
    is_host_array
from .driverbackend import check_grid, check_stream, kernel_function
from .launchplan import MAX_CACHED, Geo, geo_key, plan_key, value_key
from .nvrtc import FASTMATH_NVRTC_OPTIONS, compile_cuda
from .paramblock import bind_args, grid_dims, pack_params, prepare_block
from .streams import Event, completed_event


def _fits32(args, geom, wg) -> bool:
    """Whether every index of the launch fits in a 32-bit int (with the padding to whole
    workgroups, so even masked items' positions do not overflow): :func:`fits32` of the
    arrays, with a CUDAArray's part computed once per layout."""
    return (fits32([a for a in args if isinstance(a, np.ndarray)], geom, np.ndarray, wg)
            and all(a._layout.fits32 for a in args if isinstance(a, CUDAArray)))


# ----------------------------------------------------------------------------- launch plans
#
# A launch costs the driver a few microseconds; its Python side must cost less. The first
# launch of a kind (see CUDAKernelInstance) takes the full path: check and normalize the
# arguments, find or compile the specialization, check the grid. It leaves behind
#
# * a geometry (launchplan.Geo) per (ndrange, workgroupsize): the grid and block, the start/count/step
#   values of the kernel's first parameters, and a token standing for what the compiled
#   code depends on (ndim, ranges, workgroup, whether the padded ndrange fits 32 bits);
# * a plan per (geometry token, argument keys): an argument key is the array's ArrayLayout
#   (interned: dtype, shape, strides, device), the scalar's type, or a constexpr's
#   (type, exact value: launchplan.value_key). The plan is a launcher function with a preallocated argument block:
#   8-byte slots, the array shapes and strides written once, and a struct that writes the
#   geometry, the array addresses and the scalars into the first slots at each launch; the
#   kernelParams pointer array (its int address goes to cuLaunchKernel) is built once too;
# * a fast function for the kernel's argument pattern (array / scalar / constexpr at each
#   position) that turns a launch's arguments into the plan key with attribute reads only.
#
# A repeated launch is then the fast function, two dict lookups and the plan: a struct
# pack_into, cuLaunchKernel and the event. Whatever the key cannot vouch for takes the full
# path: other argument kinds (foreign arrays, host arrays), a Python int that does not fit
# int64 (the pack raises, the full path keys it as uint64), ndranges whose key is not exact
# (floats, bools, lists, ranges of one element), another stream's backend object, debug
# mode. The launcher functions are generated from two small templates (indices and fixed
# expressions only) and compiled once per distinct text.

_StructError = struct.error

_PLAN_SRC = """\
def make(pack_into, buf, fn, addr, dev, lock, what{convs}):
    events = dev.events
    def launch(geo, h{args}):
        with lock:                      # one argument block per plan: one launch at a time
            try:
                pack_into(buf, 0, *geo.slots{values})
            except _StructError:        # e.g. an int beyond int64: the full path decides
                return None
            drv = driver()
            if getattr(CURRENT, "ctx", None) is not dev:
                dev.activate()
            res = drv.cuLaunchKernel(fn, *geo.dims, 0, h, addr, 0)
        if res != SUCCESS:
            checked(res, what)
        try:                            # record_event, inlined
            ev = events.pop()
        except IndexError:
            ev = checked(drv.cuEventCreate(dev.event_flags), "cuEventCreate")
        res = drv.cuEventRecord(ev, h)
        if res != SUCCESS:
            events.append(ev)
            checked(res, "cuEventRecord")
        return new_event(ev, dev)
    return launch
"""

_FAST_SRC = """\
def make(geos, plans, backend, null, geo_key):
    def fast(args, ndrange, workgroupsize, stream):
        if stream is None:
            h = null
        elif stream.__class__ is CUDAStream and stream.backend is backend:
            h = stream.handle
        else:
            return None
        try:
            {unpack} = args
            geo = geos[ndrange if workgroupsize is None and ndrange.__class__ is int
                       else geo_key(ndrange, workgroupsize)]
            plan = plans[geo.token, {keys}]
        except Exception:               # no plan for these arguments: the full path
            return None
        return plan(geo, h{args})
    return fast
"""


@lru_cache(maxsize=256)
def _generated(src: str):
    """The ``make`` function of a launcher template (compiled once per distinct text)."""
    ns: dict = {}
    exec(compile(src, f"<tinykernels.runtime.cuda_launch launcher {hashlib.sha1(src.encode()).hexdigest()[:8]}>",
                 "exec"), globals(), ns)
    return ns["make"]


def _no_fast(args, ndrange, workgroupsize, stream):
    return None


def _requested_items() -> int:
    """``TK_CUDA_ITEMS``: work items per thread of flat 1-D kernels (experimental, default 1;
    read when a kernel is compiled: set it before the first launch)."""
    try:
        return max(1, int(os.environ.get("TK_CUDA_ITEMS", "1")))
    except ValueError:
        return 1


class CUDAKernelInstance(DeviceKernelInstance):
    """A kernel on a CUDA device (or, on a CUDATarget, only its source).

    What differs between the two backends is asked of the backend, not of its class (this
    module sits below runtime/cuda.py): ``can_launch`` and ``adopt_array`` (another
    library's CUDA array as a CUDAArray). A launch first tries ``self._fast`` (see "launch plans" above), then the full path
    (:meth:`_launch`), which builds what the fast one needs."""
    array_type = CUDAArray
    label = "CUDA"

    def __init__(self, kernel, backend, wg) -> None:
        super().__init__(kernel, backend, wg)
        self._geos: dict = {}           # launchplan.geo_key -> launchplan.Geo
        self._plans: dict = {}          # (geometry token, argument keys...) -> launcher
        self._tokens: dict = {}         # (ndim, ranges, wg, fits32) -> geometry token
        self._fast = _no_fast           # the fast function of the first eligible argument pattern
        self._pattern = None
        self._items: dict = {}          # id(ir) of a specialization -> work items per thread

    def __call__(self, *args, ndrange=None, workgroupsize=None, stream=None, **named) -> Event:
        if self._reads and stale(self._reads):     # a global the compiled code folded in changed
            self.kernel.globals_changed()
        if named or ndrange is None:
            args = bind_launch_args(self.name, self.kernel.params, args, named, ndrange)
        if RECORDERS:                   # inside tk.autodiff: the recorder launches (and replays) it
            return RECORDERS[-1].launch(self, args, ndrange, workgroupsize, stream)
        try:
            ev = self._fast(args, ndrange, workgroupsize, stream)
            if ev is None:
                ev = self._launch(args, ndrange, workgroupsize, stream)
        except USER_ERRORS as e:      # the user sees their launch line, not the compiler's frames
            raise filtered(e)
        return ev

    def _normalize(self, a, name, kind):
        # replaces DeviceKernelInstance's: CUDA also takes other libraries' CUDA arrays, and a
        # CUDATarget host arrays; the generic checks are KernelInstance's
        if kind == "constexpr" or isinstance(a, (bool, int, float, np.generic)):
            return KernelInstance._normalize(self, a, name, kind)
        launches = self.backend.can_launch
        if not launches and isinstance(a, (np.ndarray, CUDAArray)):
            return a if isinstance(a, CUDAArray) else KernelInstance._normalize(self, a, name, kind)
        try:
            dev = self.backend.adopt_array(a)
        except (BackendUnavailable, TypeError, ValueError) as e:
            raise LaunchError(f"kernel '{self.name}': argument '{name}' cannot be used on CUDA: {e}") from None
        if dev is not None:
            if launches and dev.backend.device != self.backend.device:
                raise LaunchError(f"kernel '{self.name}': argument '{name}' is on CUDA:{dev.backend.device}, "
                                  f"not on {self.backend!r}")
            if not dev._layout.usable:       # else these checks passed once for this layout
                check_device_array(self.name, name, dev)
            return dev
        if not launches:
            return KernelInstance._normalize(self, a, name, kind)
        if is_host_array(a):
            raise self._host_array_error(name)
        return KernelInstance._normalize(self, a, name, kind)

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, default_float=D.float64, idx32=_fits32(args, geom, wg))

    def _render(self, ir, ranges):
        from ..codegen.cuda import items_per_thread, render_cuda
        plan = group_plan(ir)
        items = items_per_thread(ir, plan, _requested_items())
        self._items[id(ir)] = items
        return render_cuda(ir, plan, ranges, items)

    def _sig(self, a, kind: str) -> tuple:
        # CUDA arrays may be strided; a Python int >= 2**63 is carried as uint64
        if kind != "constexpr" and isinstance(a, CUDAArray):
            return a._layout.sig                     # arg_sig's, computed once per layout
        return arg_sig(a, kind, CUDAArray, layout=True)

    def _key(self, norm, geom, ndim, ranges, wg) -> tuple:
        return super()._key(norm, geom, ndim, ranges, wg) + (_fits32(norm, geom, wg),)

    def _build(self, args, geom, ndim, ranges, wg):
        from ..codegen.cuda import param_layout
        drv = driver()
        ir = self._ir(args, geom, ndim, ranges, wg)
        src, names = self._render(ir, ranges)
        dev = self.backend._dev
        fn = kernel_function(dev, src, lambda: compile_cuda(src, dev.arch, self.name,
                                                            FASTMATH_NVRTC_OPTIONS if ir.fastmath else ()),
                             lambda image: checked(drv.cuModuleLoadData(image), "cuModuleLoadData"),
                             lambda mod: checked(drv.cuModuleGetFunction(mod, b"tk_kernel"), "cuModuleGetFunction"),
                             "CUDA driver", self.name, ir.file)
        return fn, ir, names, param_layout(ir)

    def _launch(self, args, ndrange, workgroupsize, stream) -> Event:
        """The full path: every check, then the launch through a plan (built and cached here),
        or, in debug mode, with an error buffer and :func:`pack_params`."""
        if not self.backend.can_launch:
            raise BackendUnavailable("a CUDATarget only generates source; launch on tk.CUDA()")
        drv = driver()
        norm, geom, ndim, ranges, total, wg = self._prepare(args, ndrange, workgroupsize)
        if total == 0:
            return completed_event()
        fn, ir, names, layout = self._specialize(norm, geom, ndim, ranges, wg)
        dev = self.backend._dev
        grid, block = grid_dims(geom, ndim, wg)
        items = self._items.get(id(ir), 1)
        if items > 1:                           # each thread runs `items` work items (x only)
            grid = (-(-grid[0] // items),) + grid[1:]
        check_grid(self.name, grid, dev.max_grid)
        self._check_args(ir, norm, geom, ndim)
        check_stream(self.name, stream, CUDAStream, self.backend)
        if not ir.debug:
            h_stream = stream.handle if stream is not None else dev.null
            geo = self._geometry(ndrange, workgroupsize, geom, ndim, ranges, wg, grid + block)
            plan = self._plan(geo, fn, ir, layout, args, norm)
            ev = plan(geo, h_stream, *norm) if plan is not None else None
            if ev is not None:
                return ev
        err = CUDAArray.empty(self.backend, (12,), np.int64) if ir.debug else None
        if err is not None:
            checked(drv.cuMemsetD8(err._dptr(), 0, 96), "cuMemsetD8")
        buf, ptrs = pack_params(layout, bind_args(ir, norm), geom, err.ptr if err is not None else 0)
        h_stream = stream.handle if stream is not None else dev.null
        dev.activate()
        checked(drv.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, h_stream,
                                   int(ptrs.ctypes.data), 0), f"cuLaunchKernel of '{self.name}'")
        del buf, ptrs                           # the driver copied the arguments
        ev = CUDAEvent.record(dev, h_stream)
        if err is not None:
            ev.wait()
            check_debug_info(err.numpy(), names, ir.sites, self.name)
        return ev

    # --- launch plans (see above) ----------------------------------------------------------

    def _geometry(self, ndrange, workgroupsize, geom, ndim, ranges, wg, dims) -> Geo:
        """The Geo of a checked launch geometry, cached when its key is exact."""
        gkey = geo_key(ndrange, workgroupsize)
        geo = self._geos.get(gkey) if gkey is not None else None
        if geo is None:
            tkey = (ndim, ranges, wg, fits32((), geom, (), wg))
            token = self._tokens.get(tkey)
            if token is None:
                token = self._tokens.setdefault(tkey, object())
            geo = Geo(token, tuple(geom[:3 * ndim]), tuple(dims))
            if gkey is not None:
                if len(self._geos) >= MAX_CACHED:
                    self._geos.clear()
                self._geos[gkey] = geo
        return geo

    def _plan(self, geo: Geo, fn, ir, layout, args, norm):
        """The launcher of these (normalized, checked) arguments, built once per plan key;
        None when the arguments have no key (then the caller packs with pack_params)."""
        key = plan_key(geo.token, norm, self.kernel.params, CUDAArray)
        if key is None:                 # an unhashable constexpr
            return None
        plan = self._plans.get(key)
        if plan is None:
            plan = self._build_plan(fn, ir, layout, norm)
            if plan is None:
                return None
            if len(self._plans) >= MAX_CACHED:
                self._plans.clear()
            self._plans[key] = plan
        if self._pattern is None:
            self._install_fast(args, norm)
        return plan

    def _build_plan(self, fn, ir, layout, norm):
        """A launcher for ``layout`` (see :func:`pack_params`, whose bytes it writes): the
        argument block and kernelParams array, the shape/stride slots filled in now."""
        block = prepare_block(layout, ir, norm)
        if block is None:
            return None
        nargs = len(norm)
        src = _PLAN_SRC.format(convs="".join(f", {c}" for c in block.convs),
                               args="".join(f", a{i}" for i in range(nargs)),
                               values="".join(f", {v}" for v in block.values))
        launch = _generated(src)(block.struct.pack_into, block.buf, fn, ctypes.addressof(block.params),
                                 self.backend._dev, threading.Lock(), f"cuLaunchKernel of '{self.name}'",
                                 *block.convs.values())
        launch.keep = (block.buf, block.params)          # the argument block lives as long as the launcher
        return launch

    def _install_fast(self, args, norm) -> None:
        """Install the fast function for this launch's argument pattern (the first pattern
        whose arguments need no normalizing: CUDAArrays, Python and NumPy scalars)."""
        keys = []
        for i, (a, n, (_, kind)) in enumerate(zip(args, norm, self.kernel.params)):
            if kind == "constexpr":
                keys.append(f"value_key(a{i})")          # as plan_key: 0.0 and -0.0 apart
            elif a is not n:
                return
            elif isinstance(a, CUDAArray):
                keys.append(f"a{i}._layout")
            elif (a.__class__ in (float, bool) or (a.__class__ is int and a < 1 << 63)
                  or (isinstance(a, np.generic) and a.dtype.kind in "biuf")):
                keys.append(f"a{i}.__class__")
            else:
                return
        if len(args) != len(norm):
            return
        nargs = len(args)
        src = _FAST_SRC.format(unpack="".join(f"a{i}, " for i in range(nargs)).rstrip() or "()",
                               keys="".join(f"{k}, " for k in keys).rstrip(),
                               args="".join(f", a{i}" for i in range(nargs)))
        with self._lock:
            if self._pattern is None:
                self._fast = _generated(src)(self._geos, self._plans, self.backend, self.backend._dev.null,
                                             geo_key)
                self._pattern = tuple(keys)

