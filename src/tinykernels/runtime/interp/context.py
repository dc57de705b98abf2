"""The in-kernel language for the interpreter: ``tk.*`` bound to the running work item.

A :class:`KernelContext` is made for each launch. It knows the launch geometry, the group and
the work item being run (``ctx.group``, ``ctx.cur``; the scheduler switches them), and
provides what ``tk.index()``, ``tk.localmem()``, atomics, ``tk.print`` ... do for that item. It
also builds the globals the kernel's code runs with: a copy of the user's module globals where
the ``tinykernels`` module, ``math``, ``numpy``, ``tinykernels.random``, the individual names
imported from them and the builtins ``abs/min/max/round/int/float/bool/range`` are replaced
by the interpreter's versions (so ``tk.index()`` typed at a pdb prompt inside a kernel works too).
"""
from __future__ import annotations

import builtins
import math
import os
import sys
import types

import numpy as np

from ... import dtypes as D
from ... import lang
from ... import random as tkrandom
from . import ops as O
from ...ir.nodes import site_text
from .errors import KernelCheckError, ZeroStepError, site_loc, where_site
from .memory import KArray, RaceTracker, alloc
from .transform import RETURNED

RETURNED_VALUE = type("Returned", (), {"__repr__": lambda self: "<returned>"})()
COLLECTIVE_OPS = ("add", "mul", "min", "max", "and", "or")


def unravel(k: int, dims: tuple) -> tuple:
    out = []
    for d in reversed(dims):
        out.append(k % d)
        k //= d
    return tuple(reversed(out))


class Item:
    """One work item: its coordinates and, in lockstep kernels, its generator."""
    __slots__ = ("uid", "gl", "gpos", "l", "ll", "gr", "grl", "gen", "priv", "ucount", "send")

    def __init__(self):
        self.priv = self.ucount = self.gen = self.send = None


class Group:
    """One workgroup's shared state: local memory, tk.uniform values, barrier count."""
    __slots__ = ("grl", "gr", "epoch", "local", "uvals")

    def __init__(self, grl: int, gr: tuple):
        self.grl, self.gr, self.epoch = grl, gr, 0
        self.local: dict = {}
        self.uvals: dict = {}


def _host_dtype_types():
    out = []
    for name, pub in D.PUBLIC.items():
        if isinstance(pub, type):
            out.append(pub)
    return out


PDB_SKIP = ["tinykernels.runtime.*", "tinykernels.kernel", "tinykernels.backends", "tinykernels.array",
            "tinykernels.random", "numpy", "numpy.*", "ml_dtypes", "ml_dtypes.*"]


def start_pdb(frame):
    """``breakpoint()`` in a kernel: pdb on the work item's frame, skipping the interpreter's own
    frames when stepping. Returns the debugger, or None to let the builtin ``breakpoint()`` run a
    user-installed hook (``sys.breakpointhook`` or ``PYTHONBREAKPOINT``)."""
    if sys.breakpointhook is not sys.__breakpointhook__:
        return None
    env = os.environ.get("PYTHONBREAKPOINT")
    if env == "0":
        return False
    if env and env not in ("pdb.set_trace", "pdb"):
        return None
    import pdb
    dbg = pdb.Pdb(skip=PDB_SKIP)
    dbg.set_trace(frame)
    # No local tracing in the scheduler's frames: bdb would otherwise stop at the StopIteration
    # of a finishing work item there (its 'skip' does not cover exception events).
    f = frame.f_back
    while f is not None:
        if f.f_globals.get("__name__", "").startswith("tinykernels.runtime.interp"):
            f.f_trace = None
        f = f.f_back
    return dbg


class _Shim(types.ModuleType):
    """A module whose names default to a real module's."""

    def __init__(self, name: str, real):
        super().__init__(name, getattr(real, "__doc__", None))
        object.__setattr__(self, "_real", real)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_real"), name)


def _dtype_names():
    return {n: O.dtype_cast(pub) for n, pub in D.PUBLIC.items() if not isinstance(pub, D._MissingDType)}


_DTYPES = _dtype_names()


def _numpy_shim():
    m = _Shim("numpy", np)
    for n, c in _DTYPES.items():
        setattr(m, "bool_" if n == "bool" else n, c)
    m.bool = _DTYPES["bool"]
    return m


def _random_shim():
    m = _Shim("tinykernels.random", tkrandom)
    m.philox4x32 = O.philox4x32
    m.uniform = O.rand_uniform
    m.normal = O.rand_normal
    m.bits = O.rand_bits
    return m


NUMPY = _numpy_shim()
RANDOM = _random_shim()
BUILTINS = {"abs": O.tk_abs, "min": O.tk_min, "max": O.tk_max, "round": O.tk_round, "int": O.tk_int,
            "float": O.tk_float, "bool": O.tk_bool, "range": O.tk_range}
HELPERS = {"__tk_add": O.op_add, "__tk_sub": O.op_sub, "__tk_mul": O.op_mul, "__tk_truediv": O.op_truediv,
           "__tk_floordiv": O.op_floordiv, "__tk_mod": O.op_mod, "__tk_pow": O.op_pow, "__tk_powc": O.op_powc, "__tk_fold": O.fold,
           "__tk_lshift": O.op_lshift, "__tk_rshift": O.op_rshift, "__tk_neg": O.op_neg, "__tk_inv": O.op_inv,
           "__tk_and": O.op_and, "__tk_or": O.op_or, "__tk_xor": O.op_xor,
           "__tk_truth": builtins.bool, "__tk_bool": np.bool_, "__tk_augitem": O.aug_item, "__tk_annot": O.annotate, "__tk_annot_param": O.annotate_param,
           RETURNED: RETURNED_VALUE}


def _static_replacements() -> dict:
    r = {id(math): O.MATH, id(np): NUMPY, id(tkrandom): RANDOM,
         id(tkrandom.philox4x32): O.philox4x32, id(tkrandom.uniform): O.rand_uniform,
         id(tkrandom.normal): O.rand_normal, id(tkrandom.bits): O.rand_bits}
    for f, g in O.MATH_BY_FUNC.items():
        r[id(f)] = g
    for t in _host_dtype_types():
        r[id(t)] = O.dtype_cast(t)
    for name in ("select", "rsqrt", "fma", "clamp", "sigmoid", "dot4_i8", "dot_i8", "dot_u4i8", "load_halves", "lookup_u4", "load_i8", "bitcast"):
        r[id(getattr(lang, name))] = getattr(O, name)
    return r


_STATIC = _static_replacements()


class KernelContext:
    """Per-launch state and the ``tk.*`` functions of the work item being run."""

    def __init__(self, kernel_name: str, geom: tuple, ndim: int, wg: tuple, unsafe: bool, check: bool):
        self.kernel_name = kernel_name
        self.ndim = ndim
        self.starts = tuple(int(geom[3 * d]) for d in range(ndim))
        self.counts = tuple(int(geom[3 * d + 1]) for d in range(ndim))
        self.steps = tuple(int(geom[3 * d + 2]) for d in range(ndim))
        self.wg = tuple(wg)
        self.wgsize = math.prod(wg)
        self.ngroups_t = tuple((n + w - 1) // w for n, w in zip(self.counts, self.wg))
        self.total_groups = math.prod(self.ngroups_t)
        self.unsafe = unsafe
        self.check = check
        self.tracker = RaceTracker(self) if check else None
        self.lcoords = [unravel(ll, self.wg) for ll in range(self.wgsize)]
        self.cur: Item | None = None
        self.group: Group | None = None
        self.kcode = None
        self._gcache: dict = {}
        self._fcache: dict = {}
        self.debuggers: list = []
        self._repl = self._replacements()

    # --- geometry ----------------------------------------------------------------------

    def set_item(self, it: Item, grp: Group, ll: int) -> bool:
        """Fill ``it`` with the coordinates of local item ``ll`` of ``grp``; False if it lies past
        the ndrange (and indices are masked)."""
        l = self.lcoords[ll]
        p = tuple(g * w + x for g, w, x in zip(grp.gr, self.wg, l))
        inside = all(q < n for q, n in zip(p, self.counts))
        if not inside and not self.unsafe:
            return False
        gl = 0
        for q, n in zip(p, self.counts):
            gl = gl * n + q
        it.gl, it.l, it.ll, it.gr, it.grl = gl, l, ll, grp.gr, grp.grl
        it.gpos = tuple(s + q * st for s, q, st in zip(self.starts, p, self.steps))
        it.uid = grp.grl * self.wgsize + ll
        it.priv = it.ucount = None
        return True

    def group_has_masked_items(self) -> bool:
        """Whether the current group has work items past the ndrange that are masked (they run
        no statement between barriers: section 3 of SPEC), for the hints of check mode."""
        grp = self.group
        if self.unsafe or grp is None:
            return False
        return any((g + 1) * w > n for g, w, n in zip(grp.gr, self.wg, self.counts))

    def describe_uid(self, uid: int) -> str:
        grl, ll = divmod(uid, self.wgsize)
        gr = unravel(grl, self.ngroups_t)
        l = self.lcoords[ll]
        p = tuple(g * w + x for g, w, x in zip(gr, self.wg, l))
        gl = 0
        for q, n in zip(p, self.counts):
            gl = gl * n + q
        past = "" if all(q < n for q, n in zip(p, self.counts)) else ", past the ndrange"
        if self.ndim == 1:
            return f"work item {gl} (group {grl}, local {ll}{past})"
        gpos = tuple(s + q * st for s, q, st in zip(self.starts, p, self.steps))
        return f"work item {gl} (global {gpos}, group {gr}, local {l}{past})"

    def describe_items(self, uids) -> str:
        uids = list(uids)
        if len(uids) <= 3:
            return " and ".join(self.describe_uid(u) for u in uids) if len(uids) <= 2 else \
                ", ".join(self.describe_uid(u) for u in uids)
        return f"{len(uids)} work items: {self.describe_uid(uids[0])}, ..., {self.describe_uid(uids[-1])}"

    def raise_error(self, cls, msg: str, items=None, file=None, line=None, site=None):
        """Raise ``cls`` at ``file:line`` (``site``: that place as an error names it, with
        its call chain), by default where the user's code is running."""
        if file is None:
            loc = site_loc(where_site())
            file, line, site = loc.file, loc.line, site_text(loc)
        if items is None:
            items = (self.cur.uid,) if self.cur is not None else ()
            if items:
                msg += f" [{self.describe_uid(items[0])}]"
        text = f"kernel '{self.kernel_name}' at {site or f'{file}:{line}'}: {msg}"
        if isinstance(cls, type) and issubclass(cls, KernelCheckError):
            raise cls(text, self.kernel_name, file, line, tuple(self._item_tuple(u) for u in items))
        raise cls(text)

    def range(self, *args):
        """``range()`` as the compiled loops run it: a run-time step of zero runs no iteration,
        and is a ZeroStepError naming the line in check mode (the compiled backends' debug mode
        reports it too)."""
        if len(args) == 3 and args[2] == 0:
            if self.check:
                self.raise_error(ZeroStepError, "range() step is zero (the loop runs no iteration outside "
                                                "check and debug mode)")
            return ()
        return O.tk_range(*args)

    def _item_tuple(self, uid):
        grl, ll = divmod(uid, self.wgsize)
        gr, l = unravel(grl, self.ngroups_t), self.lcoords[ll]
        p = tuple(g * w + x for g, w, x in zip(gr, self.wg, l))
        gl = 0
        for q, n in zip(p, self.counts):
            gl = gl * n + q
        return gl, (gr if self.ndim > 1 else grl), (l if self.ndim > 1 else ll)

    # --- tk.* -----------------------------------------------------------------------------

    def index(self, space=lang.Global, form=lang.Linear):
        it = self.cur
        if space is lang.Global:
            if form is lang.Linear:
                return it.gl
            if form is lang.Cartesian:
                return it.gpos
        elif space is lang.Local:
            if form is lang.Linear:
                return it.ll
            if form is lang.Cartesian:
                return it.l
        elif space is lang.Group:
            if form is lang.Linear:
                return it.grl
            if form is lang.Cartesian:
                return it.gr
        raise TypeError("tk.index(space, form): space is tk.Global, tk.Local or tk.Group and form "
                        f"tk.Linear or tk.Cartesian, got {space!r}, {form!r}")

    def ndrange(self):
        return self.counts

    def groupsize(self):
        return self.wg

    def ngroups(self):
        return self.ngroups_t

    def _site_key(self):
        f = sys._getframe(2)
        key = []
        while f is not None:
            key.append((f.f_code, f.f_lasti))
            if f.f_code is self.kcode:
                break
            f = f.f_back
        return tuple(key)

    def localmem(self, dtype, shape, _tk_name=None):
        key = self._site_key()
        loc = self.group.local
        a = loc.get(key)
        if a is None:
            a = loc[key] = alloc(self, dtype, shape, _tk_name or "localmem", "local")
        return a

    def private(self, dtype, shape, _tk_name=None):
        key = self._site_key()
        it = self.cur
        if it.priv is None:
            it.priv = {}
        a = it.priv.get(key)
        if a is None:
            a = it.priv[key] = alloc(self, dtype, shape, _tk_name or "private", "private")
        return a

    def uniform(self, v):
        return v          # reached only through an alias the rewriter could not see

    def uhas(self, site) -> bool:
        it = self.cur
        n = it.ucount.get(site, 0) if it.ucount else 0
        return (site, n) in self.group.uvals

    def uget(self, site):
        it = self.cur
        if it.ucount is None:
            it.ucount = {}
        n = it.ucount.get(site, 0)
        it.ucount[site] = n + 1
        return self.group.uvals[(site, n)]

    def uput(self, site, v):
        it = self.cur
        if it.ucount is None:
            it.ucount = {}
        n = it.ucount.get(site, 0)
        it.ucount[site] = n + 1
        self.group.uvals[(site, n)] = v
        return v

    def breakpoint(self) -> bool:
        """``breakpoint()`` (rewritten to ``__tk_breakpoint() or breakpoint()``)."""
        dbg = start_pdb(sys._getframe(1))
        if dbg:
            self.debuggers.append(dbg)
        return dbg is not None

    def end_debugging(self) -> None:
        """At the end of a launch, a debugger still stepping stops at the caller's next line (as
        after returning from a function) instead of tracing on without a place to stop."""
        for dbg in self.debuggers:
            if sys.gettrace() == dbg.trace_dispatch and not dbg.quitting:
                dbg.set_step()
        self.debuggers.clear()

    def print(self, *args, **kwargs):
        sys.stdout.write(O.format_print(args) + "\n")

    def synchronize(self, b=None):
        if b is not None:
            return lang.INTRINSICS["synchronize"](b)     # the host function tk.synchronize
        raise RuntimeError("tk.synchronize() must be called by name (tk.synchronize()) in the kernel or a "
                           "@tk.func it calls, so the interpreter can make it a barrier")

    def _collective_stub(self, *a, **k):
        raise RuntimeError("tk.group_reduce/group_scan must be called by name in the kernel or a @tk.func it "
                           "calls, so the interpreter can run the group's items up to it together")

    def _request(self, kind, site, v, op, inclusive=True):
        if op not in COLLECTIVE_OPS:
            self.raise_error(ValueError, f"tk.group_{kind}: op must be one of {', '.join(map(repr, COLLECTIVE_OPS))}, "
                             f"got {op!r}")
        return (kind, site, v, op, bool(inclusive))

    def reduce_req(self, site, v, op):
        return self._request("reduce", site, v, op)

    def scan_req(self, site, v, op, inclusive=True):
        return self._request("scan", site, v, op, inclusive)

    def _atomic(self, op):
        def f(A, idx, *vals):
            if not isinstance(A, KArray):
                raise TypeError(f"the first argument of tk.atomic_{op} must be an array, got {type(A).__name__}")
            if len(vals) != (2 if op == "cas" else 1):
                raise TypeError(f"tk.atomic_{op} takes {4 if op == 'cas' else 3} arguments")
            return A._atomic(op, idx, vals)
        f.__name__ = f"atomic_{op}"
        return f

    # --- globals for the kernel's code ------------------------------------------------------

    def _replacements(self) -> dict:
        tinykernels = sys.modules["tinykernels"]   # the package kernels call tk (loaded: it launched us)
        tk = _Shim("tinykernels", tinykernels)
        fns = {"index": self.index, "ndrange": self.ndrange, "groupsize": self.groupsize,
               "ngroups": self.ngroups, "localmem": self.localmem, "private": self.private,
               "uniform": self.uniform, "group_reduce": self._collective_stub,
               "group_scan": self._collective_stub, "print": self.print, "synchronize": self.synchronize,
               "select": O.select, "rsqrt": O.rsqrt, "fma": O.fma, "clamp": O.clamp, "sigmoid": O.sigmoid,
               "dot4_i8": O.dot4_i8, "dot_i8": O.dot_i8, "dot_u4i8": O.dot_u4i8,
               "load_halves": O.load_halves, "lookup_u4": O.lookup_u4, "load_i8": O.load_i8,
               "bitcast": O.bitcast}
        for op in lang.ATOMIC_OPS:
            fns[f"atomic_{op}"] = self._atomic(op)
        for k, v in fns.items():
            setattr(tk, k, v)
        for k, v in _DTYPES.items():
            setattr(tk, "bool_" if k == "bool" else k, v)
        tk.random = RANDOM
        self.tk = tk
        r = dict(_STATIC)
        r[id(tinykernels)] = tk
        for host in lang.INTRINSICS.values():      # tk.synchronize: defined by the API layer
            r[id(host)] = fns[lang.intrinsic_name(host)]
        for k, v in fns.items():
            orig = getattr(lang, k, None)
            if orig is not None:
                r[id(orig)] = v
        helpers = dict(HELPERS)
        helpers.update({"__tk_breakpoint": self.breakpoint,
                        "__tk_reduce_req": self.reduce_req, "__tk_scan_req": self.scan_req,
                        "__tk_uhas": self.uhas, "__tk_uget": self.uget, "__tk_uput": self.uput})
        self.helpers = helpers
        return r

    def globals_for(self, g: dict) -> dict:
        """The globals a kernel / func from a module with globals ``g`` runs with (per launch)."""
        d = self._gcache.get(id(g))
        if d is not None:
            return d
        d = dict(g)
        repl = self._repl
        for k, v in g.items():
            r = repl.get(id(v))
            if r is not None:
                d[k] = r
        for k, v in BUILTINS.items():
            if k not in g:
                d[k] = self.range if k == "range" else v
        d.update(self.helpers)
        self._gcache[id(g)] = d
        return d

    def instantiate(self, tr):
        """A callable of the rewritten code bound to this launch's globals."""
        f = self._fcache.get(id(tr))
        if f is not None:
            return f
        fn = tr.fn
        g = self.globals_for(fn.__globals__)
        for ph, sub in tr.funcs.items():
            g[ph] = self.instantiate(sub)
        closure = None
        if tr.code.co_freevars:
            cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
            out = []
            for name in tr.code.co_freevars:
                c = cells[name]
                try:
                    r = self._repl.get(id(c.cell_contents))
                except ValueError:
                    r = None
                out.append(types.CellType(r) if r is not None else c)
            closure = tuple(out)
        f = types.FunctionType(tr.code, g, fn.__name__, fn.__defaults__, closure)
        self._fcache[id(tr)] = f
        return f
