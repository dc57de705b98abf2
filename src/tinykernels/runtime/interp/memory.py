"""Memory as kernels see it in the interpreter: arrays, atomics and check-mode tracking.

:class:`KArray` wraps a NumPy array (a kernel argument, a group's ``tk.localmem`` or an
item's ``tk.private``): every access is bounds-checked (never a negative wrap-around), loads
give NumPy scalars (:class:`.ops.Narrow` values for float16 / bfloat16 / fp8) and stores convert like the
C backend. :class:`CheckedArray` additionally reports, through :class:`RaceTracker`, data races
(two work items, at least one writing, not both atomic, with no barrier or atomic
synchronization between them) and reads of local / private memory nothing has written.
"""
from __future__ import annotations

import numpy as np

from ...errors import CompileError, LaunchError
from ...ir.nodes import site_text
from .errors import DataRaceError, KernelIndexError, UninitializedReadError, site_loc, where, where_site
from ..launchcheck import overlap_message, readonly_message
from ..memspan import overlapping_axis
from .ops import DTypeCast, cast, dtype_cast, store_value

ATOMIC_TYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")

#: while True, float32 atomic add/sub flush subnormal operands and results to zero of the same
#: sign, as PTX ``atom.add.f32`` does on NVIDIA GPUs (docs/cuda.md): the differential fuzzer's
#: model of that hardware (``testing.fuzz.run.ftz_f32_atomics``), never the reference semantics
FTZ_F32_ATOMICS = False
_F32_TINY = np.float32(np.finfo(np.float32).tiny)


def _ftz32(x):
    """``x`` (a float32) with a subnormal flushed to zero of its sign."""
    return np.float32(np.copysign(np.float32(0), x)) if 0 < abs(x) < _F32_TINY else x


class KArray:
    """A kernel's view of an array (see the module docstring)."""
    __slots__ = ("_a", "shape", "ndim", "size", "dtype", "_dc", "_name", "_ctx", "_n0", "_t", "_conv",
                 "_const", "space", "_fast", "_locked")

    def __init__(self, a: np.ndarray, name: str, ctx, space: str = "global", const: bool = False):
        self._a = a
        self.shape = tuple(int(n) for n in a.shape)
        self.ndim = a.ndim
        self.size = int(a.size)
        self._dc = dtype_cast(a.dtype)
        self.dtype = self._dc
        self._name = name
        self._ctx = ctx
        self._n0 = self.shape[0] if a.ndim == 1 else -1
        self._t = self._dc.type
        self._conv = self._dc.compute if self._dc.storage else None
        self._const = const
        self.space = space
        # stores and atomics fail: tk.Const, read-only, or elements sharing memory (a stride 0)
        self._locked = const or not a.flags.writeable or overlapping_axis(a.shape, a.strides) is not None
        self._fast = not self._locked and not self._dc.storage

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<{self.space} array '{self._name}' {self._dc.name}{list(self.shape)}>"

    def numpy(self) -> np.ndarray:
        """The underlying NumPy array (for inspection in a debugger)."""
        return self._a

    # --- element access ----------------------------------------------------------------

    def __getitem__(self, i):
        if type(i) is int and 0 <= i < self._n0:
            v = self._a[i]
        else:
            v = self._a[self._index(i)]
        return v if self._conv is None else self._conv(v)

    def __setitem__(self, i, v):
        if self._fast and type(i) is int and 0 <= i < self._n0:
            self._a[i] = v if type(v) is self._t else store_value(v, self._dc)
            return
        t = self._index(i)
        if self._locked:
            self._const_error()
        self._a[t] = store_value(v, self._dc)

    def _index(self, idx) -> tuple:
        """The index as a tuple of in-bounds Python ints (else KernelIndexError)."""
        if type(idx) is not tuple:
            idx = (idx,)
        if len(idx) != self.ndim:
            self._ctx.raise_error(KernelIndexError, f"array '{self._name}' has {self.ndim} dimension(s) but "
                                  f"{len(idx)} index(es) were given")
        out = []
        bad = False
        for v, n in zip(idx, self.shape):
            if type(v) is not int:
                if isinstance(v, (np.integer, np.bool_, int)):       # (int: also a weak uint64, ops.U64)
                    v = int(v)
                else:
                    self._ctx.raise_error(KernelIndexError, f"array indices must be integers, got "
                                          f"{type(v).__name__} ({v!r}) for array '{self._name}'")
            if not 0 <= v < n:
                bad = True
            out.append(v)
        if bad:
            shown = out[0] if len(out) == 1 else tuple(out)
            self._ctx.raise_error(KernelIndexError, f"index {shown} is out of bounds for {self.describe()} with "
                                  f"shape {self.shape}")
        return tuple(out)

    def describe(self) -> str:
        return f"array '{self._name}'" if self.space == "global" else f"{self.space} array '{self._name}'"

    def _const_error(self):
        file, line = where()
        if not self._const:          # a read-only or self-overlapping array passed where the kernel writes
            if not self._a.flags.writeable:
                raise LaunchError(readonly_message(self._ctx.kernel_name, self._name, f"{file}:{line}"))
            raise LaunchError(overlap_message(self._ctx.kernel_name, self._name, self._a, f"{file}:{line}"))
        raise CompileError(f"cannot write to '{self._name}': it is read-only (tk.Const)", file, line,
                           kernel=self._ctx.kernel_name)

    # --- atomics --------------------------------------------------------------------------

    def _atomic(self, op: str, idx, vals):
        if self._locked:
            self._const_error()
        if self._dc.name not in ATOMIC_TYPES or (op in ("and", "or", "xor") and self._dc.kind == "f"):
            file, line = where()
            raise CompileError(f"tk.atomic_{op} is not supported on {self._dc.name} (array '{self._name}'); "
                               f"atomics need one of {', '.join(ATOMIC_TYPES)}"
                               f"{' and integers for and/or/xor' if op in ('and', 'or', 'xor') else ''}",
                               file, line, kernel=self._ctx.kernel_name)
        t = self._index(idx)
        self._track(t, "a")
        a, dc = self._a, self._dc
        old = a[t]
        if op == "cas":
            exp, new = cast(vals[0], dc), cast(vals[1], dc)
            if old == exp if dc.kind != "f" else old.tobytes() == exp.tobytes():
                a[t] = new
            return old
        v = cast(vals[0], dc)
        if FTZ_F32_ATOMICS and op in ("add", "sub") and dc.name == "float32":
            with np.errstate(all="ignore"):
                new = _ftz32(_ftz32(old) + _ftz32(v) if op == "add" else _ftz32(old) - _ftz32(v))
        elif op == "add":
            new = old + v
        elif op == "sub":
            new = old - v
        elif op == "min":
            new = v if v < old else old
        elif op == "max":
            new = v if v > old else old
        elif op == "and":
            new = old & v
        elif op == "or":
            new = old | v
        elif op == "xor":
            new = old ^ v
        else:  # exchange
            new = v
        a[t] = new
        return old

    def _track(self, t, kind):
        pass


# ----------------------------------------------------------------------------- check mode

class CheckedArray(KArray):
    """A KArray that reports races and uninitialized reads (``tk.Interpreter(check=True)``)."""
    __slots__ = ("_written", "_base", "_strides", "_tw", "_tr", "_serial", "_tracked")

    def __init__(self, a, name, ctx, space="global", const=False):
        super().__init__(a, name, ctx, space, const)
        self._written = np.zeros(a.size, np.bool_) if space != "global" else None
        self._strides = tuple(int(s) for s in a.strides)
        self._tracked = not const and space != "private"
        if space == "global":
            self._base = int(a.__array_interface__["data"][0])
            self._tw, self._tr = ctx.tracker.writes, ctx.tracker.reads
            self._serial = None
        else:
            self._base = 0
            self._tw, self._tr = {}, {}
            self._serial = ctx.tracker.new_serial()

    def __getitem__(self, i):
        t = self._index(i)
        self._track(t, "r")
        v = self._a[t]
        return v if self._conv is None else self._conv(v)

    def __setitem__(self, i, v):
        t = self._index(i)
        if self._locked:
            self._const_error()
        self._track(t, "w")
        self._a[t] = store_value(v, self._dc)

    def _flat(self, t) -> int:
        f = 0
        for v, n in zip(t, self.shape):
            f = f * n + v
        return f

    def _track(self, t, kind):
        if self._written is not None:
            f = self._flat(t)
            if kind == "w":
                self._written[f] = True
            else:
                if not self._written[f]:
                    self._uninit(t)
                if kind == "a":
                    self._written[f] = True
        if not self._tracked:
            return
        off = self._base
        for v, s in zip(t, self._strides):
            off += v * s
        self._ctx.tracker.access(self, t, off, kind, self._tw, self._tr,
                                 off if self._serial is None else (self._serial, off))

    def _uninit(self, t):
        shown = t[0] if len(t) == 1 else t
        if self.space == "local":
            msg = (f"reads {self.describe()} element {shown}, which no work item of the group has "
                   "written yet (local memory starts uninitialized; if another work item writes it, a "
                   "tk.synchronize() must come between the write and this read)")
            if self._ctx.group_has_masked_items():
                msg += ("; this group has work items past the ndrange, which run no statement between "
                        "barriers, so the slots they would fill stay unwritten: guard the loads yourself "
                        "and launch with @tk.kernel(unsafe_indices=True), or make the ndrange a multiple "
                        "of the workgroup size")
        else:
            msg = f"reads {self.describe()} element {shown} before writing it (private memory starts uninitialized)"
        self._ctx.raise_error(UninitializedReadError, msg)


class RaceTracker:
    """Last writer and readers of every element touched in a launch (check mode).

    Two accesses by different work items, at least one a plain (non-atomic) write, race unless
    they are ordered: by a barrier (same group, earlier barrier interval) or by atomics (the
    earlier item did an atomic on some location after its access, and the later item did an
    atomic on the same location after that and before its access: lock, flag and ticket
    patterns). A plain read and an atomic do not race (the read sees some value the atomics
    left: the compare-and-swap loop's first read); a plain write and an atomic do. Global memory
    is tracked by address, so aliased arguments are seen; each group's local memory by its own
    tables."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.writes: dict = {}
        self.reads: dict = {}
        self.atomics: dict = {}       # uid -> [(seq, location)]
        self.seq = 0
        self.serial = 0

    def new_serial(self) -> int:
        self.serial += 1
        return self.serial

    def access(self, arr, t, off, kind, W, R, loc):
        ctx = self.ctx
        it = ctx.cur
        uid = it.uid
        self.seq += 1
        seq = self.seq
        at = where_site()
        rec = (uid, it.grl, ctx.group.epoch, seq, at[0], at[1], kind, at)
        w = W.get(off)
        if kind == "r":
            if w is not None and w[0] != uid and w[6] != "a" and not self._ordered(w, rec):
                self._race(arr, t, w, rec)
            r = R.get(off)
            if r is None:
                R[off] = rec
            elif type(r) is tuple:
                R[off] = rec if r[0] == uid else {r[0]: r, uid: rec}
            else:
                r[uid] = rec
            return
        if w is not None and w[0] != uid and not (kind == "a" and w[6] == "a") and not self._ordered(w, rec):
            self._race(arr, t, w, rec)
        r = R.pop(off, None)
        if r is not None and kind != "a":
            for q in (r.values() if type(r) is dict else (r,)):
                if q[0] != uid and not self._ordered(q, rec):
                    self._race(arr, t, q, rec)
        W[off] = rec
        if kind == "a":
            self.atomics.setdefault(uid, []).append((seq, loc))

    def _ordered(self, prev, now) -> bool:
        if prev[1] == now[1] and prev[2] < now[2]:
            return True                                   # a barrier of their group between them
        ya = self.atomics.get(prev[0])
        xa = self.atomics.get(now[0])
        if not ya or not xa:
            return False
        for s1, l1 in ya:
            if s1 >= prev[3]:
                for s2, l2 in xa:
                    if s2 > s1 and l2 == l1:
                        return True
        return False

    def _race(self, arr, t, prev, now):
        ctx = self.ctx
        shown = t[0] if len(t) == 1 else t
        verb = {"r": "read", "w": "wrote", "a": "atomically updated"}
        now_verb = {"r": "reads", "w": "writes", "a": "atomically updates"}
        why = ("with no tk.synchronize() between them" if prev[1] == now[1] else
               "from different workgroups, which only atomics may share within a launch")
        msg = (f"data race on {arr.describe()} element {shown}: {ctx.describe_uid(prev[0])} "
               f"{verb[prev[6]]} it at {site_text(site_loc(prev[7]))} and {ctx.describe_uid(now[0])} "
               f"{now_verb[now[6]]} it at {site_text(site_loc(now[7]))}, {why}")
        ctx.raise_error(DataRaceError, msg, items=(prev[0], now[0]), file=now[4], line=now[5],
                        site=site_text(site_loc(now[7])))


def make_array(a: np.ndarray, name: str, ctx, space: str = "global", const: bool = False) -> KArray:
    cls = CheckedArray if ctx.check else KArray
    return cls(a, name, ctx, space, const)


def alloc(ctx, dtype, shape, name: str, space: str) -> KArray:
    """A new zero-filled local or private array."""
    dc = dtype if isinstance(dtype, DTypeCast) else dtype_cast(dtype)
    dims = shape if isinstance(shape, tuple) else (shape,)
    dims = tuple(int(n) for n in dims)
    if not dims or any(n <= 0 for n in dims):
        ctx.raise_error(ValueError, f"tk.{'localmem' if space == 'local' else 'private'} needs a shape of "
                        f"positive ints, got {shape!r}")
    return make_array(np.zeros(dims, dc.dtype), name, ctx, space)
