"""tinykernels kernels as PyTorch operators (``tinykernels.torch.torch_op``, SPEC section 11).

    import tinykernels.torch as tktorch
    saxpy_op = tktorch.torch_op(saxpy, outputs=["y"], name="mylib::saxpy")
    y = saxpy_op(y0, x, a=2.0)        # y0 is not modified; y is a new tensor

Each call of :func:`torch_op` defines ``ns::op`` with the kernel's own signature
(``torch.ops.ns.op(y0, x, a=2.0)``, ``torch.library.opcheck(op, args, kwargs)``), a
CompositeImplicitAutograd composite of three generic ``torch.library`` operators, defined
with the lower-level ``Library.define``/``impl`` route and Autograd kernels of their own (less
per-call overhead than ``torch.library.custom_op`` or ``register_autograd``, see
docs/torch.md), which the Python call uses directly: ``ns::op_kernel(Tensor[]
arrays, float[] floats, int[] ints, str key) -> Tensor[]``, ``ns::op_backward``, its
adjoint (tinykernels' own adjoint kernel, see docs/autodiff.md), and ``ns::op_jvp``, its
forward-mode derivative (the tangent kernel); the derivatives are not differentiable again.
An eager call with nothing for autograd to record runs the CPU implementation directly
(:func:`_eager_direct`). ``key`` carries the static part of a call (which parameters are scalars
given by keyword, constexpr values, ndrange, workgroup size), so the same operator serves
every call pattern. All three have fake implementations derived from the kernel's signature (the
outputs have the shapes and dtypes of the arrays that give their initial values), so they
trace under ``torch.compile(fullgraph=True)`` without graph breaks.

CPU tensors run on the CPU backend, zero-copy; CUDA tensors on the CUDA backend, on
``torch.cuda.current_stream()``.
"""
from __future__ import annotations

import ast
import ctypes
import re
import sys
import threading
from functools import partial

import numpy as np
import torch  # the real PyTorch: this module is tinykernels.torch (absolute imports only)
import torch.autograd.forward_ad as _fwad

from tinykernels import interop
from tinykernels.globalreads import stale
from tinykernels.array import _torch_host_view
from tinykernels.autodiff import _accesses, _is_float_array, adjoint
from tinykernels.backends import CPU
from tinykernels.errors import LaunchError
from tinykernels.kernel import Kernel
from tinykernels.runtime.base import RECORDERS
from tinykernels.tracebacks import api_boundary

__all__ = ["torch_op", "TorchOp"]

_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)$")
_LIBS: dict = {}           # explicit registry: qualified name -> TorchOp (keeps its Library alive)
_LIBS_LOCK = threading.Lock()


def _const_str(v) -> str:
    """A constexpr value as text the operator's key can carry (and :func:`_const_value` reads)."""
    if isinstance(v, (type, np.dtype)):
        return "dtype:" + np.dtype(v).name
    return repr(v.item() if isinstance(v, np.generic) else v)


def _const_value(s: str):
    return np.dtype(s[6:]).type if s.startswith("dtype:") else ast.literal_eval(s)


try:        # torch.library.opcheck(op, ...) accepts a CustomOpDef (reading its ._opoverload)
    from torch._library.custom_ops import CustomOpDef as _OpDefBase
except ImportError:     # pragma: no cover - older torch: opcheck takes op.default
    _OpDefBase = object


def _refuse_registration(what: str):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{self.name}: {what} is not supported on a tinykernels operator; torch_op "
                                  "registers its fake, autograd and vmap implementations itself (from the kernel)")
    method.__name__ = what
    return method


class TorchOp(_OpDefBase):
    """A kernel registered as a PyTorch operator; call it like the kernel (SPEC section 11).

    ``torch.ops.ns.op`` (also ``op.default``) is the same operator with the kernel's signature
    as its schema; ``torch.library.opcheck(op, args, kwargs)`` checks it. The class derives
    from torch's ``CustomOpDef`` only for ``opcheck``'s sake: the registration methods
    (``register_fake``, ``register_autograd``, ...) are refused."""
    for _m in ("register_kernel", "register_fake", "register_effect", "register_torch_dispatch",
               "register_autograd", "register_vmap", "register_autocast", "set_kernel_enabled"):
        locals()[_m] = _refuse_registration(_m)
    del _m

    def __init__(self, kernel: Kernel, outputs, name: str, ndrange=None, workgroupsize=None):
        self.kernel = kernel
        self.outputs = interop.check_outputs(kernel, outputs)
        m = _NAME.match(name) if isinstance(name, str) else None
        if m is None:
            raise ValueError(f"torch_op: name must look like 'namespace::opname', got {name!r}")
        self.name = name
        self.ns, self.opname = m.groups()
        self._namespace, self._name = self.ns, self.opname     # CustomOpDef's names (its _qualname)
        self.ndrange, self.workgroupsize = ndrange, workgroupsize
        self._names = tuple(n for n, _ in kernel.params)
        self._constexprs = frozenset(n for n, k in kernel.params if k == "constexpr")
        self._plans: dict = {}          # (key, number of arrays) -> _Plan
        self._checked: set = set()      # signatures whose writes were checked against the outputs
        self._keymemo: dict = {}        # eager call pattern -> (key, scalar spec), see _eager_key
        self._cpu = CPU()
        from tinykernels.runtime import launcher
        self._launcher = launcher.get()
        self._define()

    def __repr__(self) -> str:
        return f"<tinykernels.torch op {self.name} of {self.kernel.name}, outputs={list(self.outputs)}>"

    # --- registration -------------------------------------------------------------------

    def _define(self) -> None:
        with _LIBS_LOCK:
            if self.name in _LIBS:
                raise ValueError(f"torch_op: an operator named {self.name!r} is already registered (by "
                                 f"{_LIBS[self.name]!r}); choose another name")
            lib = torch.library.Library(self.ns, "FRAGMENT")
            # ns::op: the kernel's own signature (what torch.ops.ns.op and torch.library.opcheck
            # are called with); ns::op_kernel: the generic operator it decomposes into
            fwd, bwd, jvp = self.opname + "_kernel", self.opname + "_backward", self.opname + "_jvp"
            try:
                lib.define(self._natural_schema())
                lib.define(f"{fwd}(Tensor[] arrays, float[] floats, int[] ints, str key) -> Tensor[]")
                lib.define(f"{bwd}(Tensor[] arrays, Tensor[] grads, float[] floats, int[] ints, str key) "
                           "-> Tensor[]")
                lib.define(f"{jvp}(Tensor[] arrays, Tensor?[] tangents, float[] floats, int[] ints, str key) "
                           "-> Tensor[]")
            except RuntimeError as e:
                raise ValueError(f"torch_op: cannot define {self.name!r}: {e}") from None
            # a composite of the generic operator: autograd, fake tensors, torch.compile and
            # torch.vmap are the generic operator's
            lib.impl(self.opname, self._natural, "CompositeImplicitAutograd")
            lib.impl(self.opname, self._natural, "FuncTorchBatchedDecomposition")   # torch.vmap: decomposed too
            for dk in ("CPU", "CUDA"):
                lib.impl(fwd, self._forward, dk)
                lib.impl(bwd, self._backward, dk)
                lib.impl(jvp, self._tangent, dk)
            # autograd: our own Python kernels at the Autograd key (cheaper per call than
            # torch.library.register_autograd's generic wrapper, see docs/torch.md)
            lib.impl(fwd, self._autograd_forward, "Autograd", with_keyset=True)
            lib.impl(bwd, self._autograd_backward_op, "Autograd", with_keyset=True)
            lib.impl(jvp, self._autograd_tangent_op, "Autograd", with_keyset=True)
            torch.library.register_fake(f"{self.ns}::{fwd}", self._forward_fake, lib=lib)
            torch.library.register_fake(f"{self.ns}::{bwd}", self._backward_fake, lib=lib)
            torch.library.register_fake(f"{self.ns}::{jvp}", self._tangent_fake, lib=lib)
            self._lib = lib
            ops = getattr(torch.ops, self.ns)
            self.default = getattr(ops, self.opname).default
            self._op = getattr(ops, fwd).default
            self._op_bwd = getattr(ops, bwd).default
            self._op_jvp = getattr(ops, jvp).default
            # torch.vmap of each (also of the derivatives: torch.func.jacrev/jacfwd, batched
            # gradients): one call per batch element
            for name, op, n_lists, shapes in ((fwd, self._op, 1, self._out_templates),
                                              (bwd, self._op_bwd, 2, lambda key, arrays: arrays),
                                              (jvp, self._op_jvp, 2, self._out_templates)):
                torch.library.register_vmap(f"{self.ns}::{name}", partial(_vmap_per_element, op, n_lists, shapes),
                                            lib=lib)
            _LIBS[self.name] = self

    def _natural_schema(self) -> str:
        """``ns::op``'s schema, from the kernel's signature: the parameters it uses as arrays
        (``tk.Const``, indexed in its body, or an output) as positional tensors in the kernel's order, its
        scalars and constexprs as keyword-only ``Scalar`` arguments, then the optional
        ``ndrange`` and ``workgroupsize`` (lists of ints); it returns the outputs, in the order
        of ``outputs``."""
        used = self.kernel.array_params()
        arrays = [n for n, k in self.kernel.params
                  if k == "const" or (k == "value" and (n in used or n in self.outputs))]
        args = [f"Tensor {n}" for n in arrays] + ["*"]
        args += [f"Scalar {n}" for n, _ in self.kernel.params if n not in arrays]
        args += ["SymInt[]? ndrange=None", "SymInt[]? workgroupsize=None"]
        ret = "Tensor" if len(self.outputs) == 1 else "(" + ", ".join(["Tensor"] * len(self.outputs)) + ")"
        return f"{self.opname}({', '.join(args)}) -> {ret}"

    def _natural(self, *arrays, ndrange=None, workgroupsize=None, **scalars):
        """``ns::op``'s implementation (CompositeImplicitAutograd): the generic operator,
        called from inside the dispatcher (so not through :meth:`__call__`'s eager or
        ``torch.func`` routes); autograd, fake tensors, torch.compile and vmap see that one."""
        nd = self.ndrange if ndrange is None else tuple(ndrange)
        wg = self.workgroupsize if workgroupsize is None else tuple(workgroupsize)
        key, floats, ints = self._key(scalars, nd, wg)
        outs = self._op(list(arrays), floats, ints, key)
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def _opoverload(self):
        """The ``ns::op`` overload (``torch.library.opcheck(op, args, kwargs)`` reads it)."""
        return self.default

    # --- the call -----------------------------------------------------------------------

    def _follow_globals(self) -> None:
        """A global the kernel folds in was rebound (globalreads): its compiled code, and the
        plans here that hold it, are dropped."""
        if self.kernel._reads and stale(self.kernel._reads):
            self.kernel.globals_changed()
            self._plans.clear()
            self._checked.clear()

    @api_boundary
    def __call__(self, *arrays, ndrange=None, workgroupsize=None, **scalars):
        """The outputs' new values (one tensor, or a tuple when there are several)."""
        self._follow_globals()
        nd = self.ndrange if ndrange is None else ndrange
        wg = self.workgroupsize if workgroupsize is None else workgroupsize
        if _eager_direct(arrays):       # what the dispatcher would run, without its overhead
            key, floats, ints = self._eager_key(scalars, nd, wg)
            outs = self._eager(arrays, floats, ints, key)
        else:
            key, floats, ints = self._key(scalars, nd, wg)
            for k, a in enumerate(arrays):
                if not isinstance(a, torch.Tensor):
                    self._not_a_tensor(k, a, scalars)
            if torch._C._are_functorch_transforms_active() and not torch.compiler.is_compiling():
                # torch.func, eagerly: autograd.Function's own route (under torch.compile, the
                # operator's vmap rule traces; see docs/torch.md)
                outs = _Grad.apply(_Static(self, floats, ints, key), *arrays)
            else:
                outs = self._op(list(arrays), floats, ints, key)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _not_a_tensor(self, k: int, a, scalars: dict):
        """The LaunchError for positional argument ``k`` that is not a tensor, naming its parameter."""
        names = [n for n in self._names if n not in scalars]
        which = f"'{names[k]}'" if k < len(names) else f"{k + 1}"
        raise LaunchError(f"op {self.name}: argument {which} must be a torch.Tensor (the operator takes tensors "
                          f"positionally, scalars by keyword), got {type(a).__name__}; convert it with "
                          "torch.as_tensor(...)")

    def _eager_key(self, kw: dict, ndrange, workgroupsize) -> tuple:
        """:meth:`_key` of an eager call, remembered per call pattern (the keyword names in
        call order, ndrange, workgroup size; at most :data:`_KEY_MEMO` patterns): a repeated
        pattern whose scalars are Python floats, ints and bools of the same kinds, and whose
        constexprs have the same values, only collects the scalars."""
        # ndrange / workgroup size by their text unless None or an int (8.0 == 8, but the key
        # of 8.0 is refused by bind)
        mk = (tuple(kw), ndrange if ndrange is None or type(ndrange) is int else repr(ndrange),
              workgroupsize if workgroupsize is None or type(workgroupsize) is int else repr(workgroupsize))
        m = self._keymemo.get(mk)
        if m is not None:
            floats, ints = [], []
            for name, kind, c in m[1]:
                v = kw[name]
                t = type(v)
                if kind == "f" and t is float:
                    floats.append(v)
                elif kind == "i" and t is int:
                    ints.append(v)
                elif kind == "b" and t is bool:
                    ints.append(int(v))
                elif not (kind == "c" and t is type(c) and v == c):
                    break
            else:
                return m[0], floats, ints
        r = self._key(kw, ndrange, workgroupsize)
        spec = []
        for name in self._names:
            if name in kw:
                v = kw[name]
                kind = "c" if name in self._constexprs else {float: "f", int: "i", bool: "b"}.get(type(v))
                if kind is None:           # a NumPy scalar: converted by _key each call
                    return r
                spec.append((name, kind, v if kind == "c" else None))
        if len(self._keymemo) < _KEY_MEMO:
            self._keymemo[mk] = (r[0], tuple(spec))
        return r

    def _key(self, kw: dict, ndrange, workgroupsize) -> tuple:
        """(key, floats, ints): plain string and list operations only, so that TorchDynamo
        traces this without a graph break."""
        parts, floats, ints = [], [], []
        for name in self._names:
            if name not in kw:
                continue
            v = kw[name]
            if name in self._constexprs:
                parts.append("c:" + name + "=" + _const_str(v))
            elif isinstance(v, (bool, np.bool_)):
                parts.append("b:" + name)
                ints.append(int(v))
            elif isinstance(v, (int, np.integer)):
                parts.append("i:" + name)
                ints.append(int(v))
            elif isinstance(v, (float, np.floating)):
                parts.append("f:" + name)
                floats.append(float(v))
            else:
                raise LaunchError(f"op {self.name}: keyword argument '{name}' must be a Python scalar (tensors go "
                                  f"positionally, in the kernel's order), got {type(v).__name__}")
        for name in kw:
            if name not in self._names:
                raise LaunchError(f"op {self.name}: unknown keyword argument '{name}'; the kernel's parameters "
                                  f"are {', '.join(self._names)}")
        parts.append("nd=" + _geometry_text(ndrange))
        parts.append("wg=" + _geometry_text(workgroupsize))
        return ";".join(parts), floats, ints

    def _binding(self, key: str, n_arrays: int) -> interop.Binding:
        return self._plan(key, n_arrays).binding

    def _plan(self, key: str, n_arrays: int) -> "_Plan":
        """The per-signature plan of a call pattern (parsed from ``key`` once)."""
        p = self._plans.get((key, n_arrays))
        if p is None:
            kw, nd, wg = {}, None, None
            for part in key.split(";"):
                if part.startswith("nd="):
                    nd = self._geometry("ndrange", part[3:])
                elif part.startswith("wg="):
                    wg = self._geometry("workgroupsize", part[3:])
                else:
                    kind, _, rest = part.partition(":")
                    name, _, val = rest.partition("=")
                    kw[name] = {"f": 0.0, "i": 0, "b": False}.get(kind) if kind != "c" else _const_value(val)
            b = interop.bind(self.kernel, self.outputs, n_arrays, kw, f"op {self.name}", nd, wg)[0]
            p = self._plans[(key, n_arrays)] = _Plan(b)
        return p

    def _geometry(self, name: str, text: str):
        """The ndrange or workgroup size a key holds (:func:`_geometry_text`); one that is no
        literal (nor a ``range`` of int literals) is a LaunchError naming the argument, not ast's error."""
        try:
            return _geometry_value(ast.parse(text, mode="eval").body)
        except (ValueError, SyntaxError):
            raise LaunchError(f"op {self.name}: {name} must be an int, a range or a tuple of them, "
                              f"got {text}") from None

    # --- implementations ------------------------------------------------------------------

    def _check_arrays(self, b: interop.Binding, arrays) -> None:
        names = b.array_names()
        for n, a in zip(names, arrays):
            if not isinstance(a, torch.Tensor):
                raise LaunchError(f"op {self.name}: argument '{n}' must be a tensor, got {type(a).__name__}")
        dev = arrays[0].device
        for n, a in zip(names, arrays):
            if a.device != dev:
                raise LaunchError(f"op {self.name}: argument '{n}' is on {a.device} but '{names[0]}' is on {dev}")
        interop.check_shapes(b, [tuple(a.shape) for a in arrays], f"op {self.name}")

    def _target(self, device):
        """(backend, stream, array converter) for tensors on ``device``."""
        if device.type == "cpu":
            return self._cpu, None, _host_view
        if device.type == "cuda":
            return _cuda_target(device)
        raise LaunchError(f"op {self.name}: tensors on {device.type} are not supported (CPU and CUDA are)")

    def _check_writes(self, b, inst, args, nd) -> None:
        """LaunchError when the kernel writes an array that is not among the outputs (the
        operator is functional: it must not modify its inputs)."""
        sig = (b, tuple((getattr(a, "dtype", None), getattr(a, "ndim", None)) for a in args))
        if sig in self._checked:
            return
        written = _accesses(inst, args, nd, b.workgroupsize)[1]
        out_names = set(self.outputs)
        extra = sorted(n for n in written if n not in out_names)
        if extra:
            raise LaunchError(f"op {self.name}: kernel '{self.kernel.name}' writes {extra}, which "
                              f"{'is' if len(extra) == 1 else 'are'} not among outputs={list(self.outputs)}; "
                              "list every array the kernel writes as an output")
        self._checked.add(sig)

    def _forward(self, arrays, floats, ints, key):
        """The CPU/CUDA implementation: clone the outputs' initial values and run the kernel
        on the clones. The CPU hot path is one call into the launcher extension with a plan
        whose signature already passed every check (write set, launch checks)."""
        self._follow_globals()            # (the dispatcher's calls come here directly)
        p = self._plans.get((key, len(arrays))) or self._plan(key, len(arrays))
        b = p.binding
        cpu = not RECORDERS
        for t in arrays:
            cpu = cpu and t.is_cpu
        if not cpu:
            self._check_arrays(b, arrays)
        if b.ndrange is None:
            nd = tuple(arrays[b.outputs[0]].shape)
            if not 0 < len(nd) <= 3:
                self._check_arrays(b, arrays)          # raises: 0-d or more than 3 dimensions
        else:
            nd = b.ndrange
        work = list(arrays)
        outs = []
        for k in b.outputs:
            t = arrays[k]
            if cpu and t.nbytes >= _LARGE:              # see _large_output
                t = self._large_output(p, k, arrays, floats, ints, nd)
            else:
                t = t.clone(memory_format=torch.contiguous_format)
            work[k] = t
            outs.append(t)
        if not cpu:
            self._launch_general(b, work, floats, ints, nd)
            return outs
        args = p.args([_host_view(t) for t in work], floats, ints)
        if not interop.total_items(nd):
            return outs
        inst = p.inst or self._instance(p)
        r = inst._fast(p.checked, inst._cmask, inst._nthreads, args, nd, b.workgroupsize)
        if r is not True:
            self._launch_slow(p, inst, args, nd, r)
        return outs

    def _eager(self, arrays, floats, ints, key):
        """The CPU implementation of an eager call (see :func:`_eager_direct`). Tensors whose
        metadata (shape, strides, dtype of each) ran before launch from that launch's kept
        slots with only the data pointers and scalars patched in (``_raw``, one call into the
        launcher; no NumPy views); everything else, and a kept launch whose per-call checks
        (alignment, aliasing) fail, takes :meth:`_forward`, which checks and raises."""
        p = self._plans.get((key, len(arrays))) or self._plan(key, len(arrays))
        meta = tuple([(t.shape, t.stride(), t.dtype) for t in arrays])
        e = p.raw.get(meta)
        if e is None:
            outs = self._forward(list(arrays), floats, ints, key)
            if not RECORDERS and len(p.raw) < _RAW_MAX:     # full: new metadata takes _forward
                p.raw[meta] = self._raw_entry(p, arrays, floats, ints)
            return outs
        if e is False or RECORDERS:
            return self._forward(list(arrays), floats, ints, key)
        work = list(arrays)
        outs = []
        for k, mode in e.alloc:
            t = arrays[k]
            t = torch.empty_like(t) if mode == _EMPTY else t.clone() if mode == _CLONE else \
                self._large_output(p, k, arrays, floats, ints, e.nd)
            work[k] = t
            outs.append(t)
        if self._launcher.raw(e.words, e.nthreads, (*[t.data_ptr() for t in work], *floats, *ints)) is True:
            return outs
        return self._forward(list(arrays), floats, ints, key)

    def _raw_entry(self, p: "_Plan", arrays, floats, ints):
        """The kept launch of a call whose tensors have ``arrays``' metadata (a :class:`_Raw`),
        or False when such calls must take the checked path (an output's initial value not
        contiguous, a launch the fast path does not take: debug mode, a workgroup size that is
        not an int, an empty ndrange)."""
        b = p.binding
        nd = tuple(arrays[b.outputs[0]].shape) if b.ndrange is None else b.ndrange
        if not interop.total_items(nd) or not all(arrays[k].is_contiguous() for k in b.outputs):
            return False
        inst = p.inst or self._instance(p)
        fresh = self._overwritten(p, arrays, floats, ints, nd) \
            if (nd if isinstance(nd, tuple) else (nd,)) == tuple(arrays[b.outputs[0]].shape) else frozenset()
        alloc, work = [], list(arrays)
        for k in b.outputs:
            t = arrays[k]
            mode = _LARGE_OUT if t.nbytes >= _LARGE else _EMPTY if k in fresh else _CLONE
            alloc.append((k, mode))
            # a stand-in with the metadata the output will have (clone() keeps empty_like's)
            work[k] = torch.empty(t.shape, dtype=t.dtype) if mode == _LARGE_OUT else torch.empty_like(t)
        L = self._launcher
        args = p.args([_host_view(t) for t in work], floats, ints)
        sig = L.fast({}, inst._cmask, inst._nthreads, args, nd, b.workgroupsize)   # {}: the key, no launch
        plan = p.checked.get(sig) if isinstance(sig, bytes) else None   # passed every check
        tpl = L.template(inst._cmask, args, nd) if plan is not None else None
        if tpl is None:
            return False
        slots, starts = tpl
        if isinstance(plan, bytes):
            w = np.frombuffer(plan, np.int64)
            fnptr, pairs = int(w[0]), [(int(w[2 + 2 * q]), int(w[3 + 2 * q])) for q in range(int(w[1]))]
        else:
            fnptr, pairs = plan, []
        n_arr, n_f = len(work), len(floats)
        base = {"A": 0, "f": n_arr, "i": n_arr + n_f, "b": n_arr + n_f}
        kind = {"A": 0, "f": 1, "i": 2, "b": 3}
        patches = []
        for pos, (k, s) in enumerate(zip(b.kinds, b.slots)):
            if k != "c":
                patches += [base[k] + s, starts[pos], kind[k], work[s].element_size() if k == "A" else 1]
        spans = []
        for i, j in pairs:
            si, sj = b.slots[i], b.slots[j]
            spans += [si, *_byte_span(work[si]), sj, *_byte_span(work[sj])]
        words = [fnptr - (1 << 64) if fnptr >= 1 << 63 else fnptr, len(slots) // 8]
        words = np.concatenate([np.array(words, np.int64), np.frombuffer(slots, np.int64),
                                np.array([len(patches) // 4, *patches, len(pairs), *spans], np.int64)])
        return _Raw(words.tobytes(), tuple(alloc), nd, inst._nthreads)

    def _large_output(self, p: "_Plan", k: int, arrays, floats, ints, nd):
        """A large output's buffer: a fresh tensor whose pages the kernel (or the copy) touches
        first, advised to use huge pages (4 KiB page faults cost more than the copy); the
        initial value is copied in only when the kernel may observe it (see
        :func:`tinykernels.passes.overwrites.fully_overwritten`)."""
        t = arrays[k]
        out = _fresh_like(t)
        if not ((nd if isinstance(nd, tuple) else (nd,)) == tuple(t.shape)
                and k in self._overwritten(p, arrays, floats, ints, nd)):
            out.copy_(t)
        return out

    def _overwritten(self, p: "_Plan", arrays, floats, ints, nd) -> frozenset:
        """Positions of the outputs whose initial values this specialization never observes
        (per dtypes and ranks; the initial values stand in for the outputs)."""
        from tinykernels.passes.overwrites import fully_overwritten
        sig = tuple((t.dtype, t.dim()) for t in arrays)
        hit = p.fresh.get(sig)
        if hit is None:
            b = p.binding
            inst = p.inst or self._instance(p)
            args = list(p.args([_host_view(t) for t in arrays], floats, ints))
            try:
                norm, geom, ndim, ranges, _total, wg = inst._prepare(args, nd, b.workgroupsize)
            except LaunchError:      # e.g. an initial value aliasing an input: copy (the launch decides)
                return frozenset()
            names = fully_overwritten(inst._ir(norm, geom, ndim, ranges, wg))
            arr = b.array_names()
            hit = p.fresh[sig] = frozenset(k for k in b.outputs if arr[k] in names)
        return hit

    def _instance(self, p: "_Plan"):
        p.inst = self.kernel(self._cpu)
        return p.inst

    def _launch_slow(self, p: "_Plan", inst, args, nd, sig) -> None:
        """A signature's first launch (or one whose fast checks failed): the full checks,
        then the launch; then the instance's fast plan for ``sig`` (the launcher's key, or
        None) is adopted, so the next call of this signature is one launcher call."""
        self._check_writes(p.binding, inst, list(args), nd)
        inst(*args, ndrange=nd, workgroupsize=p.binding.workgroupsize)
        if isinstance(sig, bytes) and sig in inst._plans:
            p.checked[sig] = inst._plans[sig]

    def _launch_general(self, b, work, floats, ints, nd) -> None:
        """Any device, or under a tk.autodiff recording: the ordinary checked launch."""
        backend, stream, conv = self._target(work[0].device)
        args = b.kernel_args([conv(t) for t in work], floats, ints)
        inst = self.kernel(backend)
        self._check_writes(b, inst, args, nd)
        if interop.total_items(nd):
            inst(*args, ndrange=nd, workgroupsize=b.workgroupsize, stream=stream)

    def _out_templates(self, key, arrays) -> list:
        """The arrays that give the outputs' shapes and dtypes in a call with these arrays."""
        return [arrays[k] for k in self._binding(key, len(arrays)).outputs]

    def _forward_fake(self, arrays, floats, ints, key):
        b = self._binding(key, len(arrays))
        self._check_arrays(b, arrays)
        return [torch.empty_like(arrays[k], memory_format=torch.contiguous_format) for k in b.outputs]

    def _backward(self, arrays, grads, floats, ints, key):
        """Gradients for every array (zeros for non-float ones) from the outputs' gradients,
        through the kernel's adjoint: ``arrays`` are the operator's inputs (the outputs'
        initial values among them)."""
        b = self._binding(key, len(arrays))
        backend, stream, conv = self._target(arrays[0].device)
        outs = dict(zip(b.outputs, grads))
        prim = [a.contiguous().clone() if k in outs else a.contiguous() for k, a in enumerate(arrays)]
        shadows = []
        for k, a in enumerate(prim):
            if not a.is_floating_point():
                shadows.append(torch.zeros_like(a))
            elif k in outs:
                shadows.append(outs[k].to(a.dtype).contiguous().clone())
            else:
                shadows.append(torch.zeros_like(a, memory_format=torch.contiguous_format))
        pargs = b.kernel_args([conv(t) for t in prim], floats, ints)
        sargs = b.kernel_args([conv(t) for t in shadows], floats, ints)
        full = []
        for kind, p, s in zip(b.kinds, pargs, sargs):
            full.append(p)
            if kind == "A" and _is_float_array(p):
                full.append(s)
            elif kind == "f":       # scalars are not differentiated through the operator
                full.append(_scalar_shadow(backend))
        nd = b.geometry([tuple(a.shape) for a in arrays])
        if interop.total_items(nd):
            adjoint(self.kernel)(backend)(*full, ndrange=nd, workgroupsize=b.workgroupsize,
                                          stream=stream)
        return shadows

    def _backward_fake(self, arrays, grads, floats, ints, key):
        return [torch.empty_like(a, memory_format=torch.contiguous_format) for a in arrays]

    def _tangent(self, arrays, tangents, floats, ints, key):
        """The outputs' tangents (forward mode) through tinykernels' tangent kernel
        (``tk.autodiff(tk.Forward, ...)``, see docs/autodiff.md): ``arrays`` are the operator's
        inputs, ``tangents`` theirs (None: held constant, as JAX's symbolic zeros are; an
        output's initial value's tangent seeds the output's). Non-float outputs get zeros."""
        from tinykernels.autodiff import Duplicated, Forward, autodiff
        b = self._binding(key, len(arrays))
        backend, stream, conv = self._target(arrays[0].device)
        prim = [a.contiguous().clone() if k in b.outputs else a.contiguous() for k, a in enumerate(arrays)]
        tans = {k: torch.zeros_like(prim[k]) for k in b.outputs if prim[k].is_floating_point()}
        for k, t in enumerate(tangents):
            if t is not None and prim[k].is_floating_point():
                tans[k] = t.to(prim[k].dtype).contiguous().clone()
        wrapped = [Duplicated(conv(p), conv(tans[k])) if k in tans else conv(p) for k, p in enumerate(prim)]
        args = b.kernel_args(wrapped, floats, ints)
        nd = b.geometry([tuple(a.shape) for a in arrays])
        if interop.total_items(nd):
            inst = self.kernel(backend)
            autodiff(Forward, lambda *a: inst(*a, ndrange=nd, workgroupsize=b.workgroupsize, stream=stream), *args)
        return [tans[k] if k in tans else torch.zeros_like(prim[k]) for k in b.outputs]

    def _tangent_fake(self, arrays, tangents, floats, ints, key):
        b = self._binding(key, len(arrays))
        return [torch.empty_like(arrays[k], memory_format=torch.contiguous_format) for k in b.outputs]

    # --- autograd ----------------------------------------------------------------------------

    def _autograd_forward(self, keyset, arrays, floats, ints, key):
        """The operator's Autograd kernel: recorded through :class:`_Grad` when autograd may
        record the call (:func:`_may_record`), else straight to the device implementation."""
        if _may_record(arrays):
            if torch._C._are_functorch_transforms_active():
                raise LaunchError(f"op {self.name}: torch.func transforms that differentiate (grad, vjp, jacrev, jvp, "
                                  "jacfwd) reach the operator only through its Python wrapper, eagerly: not under "
                                  f"torch.compile and not through torch.ops.{self.ns}.{self.opname}; use them without "
                                  "torch.compile, or torch.autograd (backward, autograd.grad) under torch.compile")
            # the single-level apply: inside the dispatcher, torch.func's route
            # (custom_function_call) finds no kernel; a torch.func transform calls _Grad.apply
            # before dispatching (__call__)
            return list(_apply_here(_Grad, _Static(self, floats, ints, key, keyset), *arrays))
        with torch._C._AutoDispatchBelowAutograd():
            return self._op.redispatch(keyset & torch._C._after_autograd_keyset, arrays, floats, ints, key)

    def _autograd_backward_op(self, keyset, arrays, grads, floats, ints, key):
        """The backward operator's Autograd kernel (see :meth:`_autograd_derivative`)."""
        return self._autograd_derivative(self._op_bwd, keyset, arrays, grads, floats, ints, key)

    def _autograd_tangent_op(self, keyset, arrays, tangents, floats, ints, key):
        """The forward-mode operator's Autograd kernel (see :meth:`_autograd_derivative`)."""
        return self._autograd_derivative(self._op_jvp, keyset, arrays, tangents, floats, ints, key)

    def _autograd_derivative(self, op, keyset, arrays, more, floats, ints, key):
        """A derivative operator's Autograd kernel: its results are not differentiable again;
        differentiating through them (double backward, forward over reverse, forward over
        forward) raises :class:`_NoDoubleBackward`'s error instead of giving silently wrong
        (zero) higher derivatives. Under ``torch.func``, :class:`_Grad` guards its results."""
        with torch._C._AutoDispatchBelowAutograd():
            res = op.redispatch(keyset & torch._C._after_autograd_keyset, arrays, more, floats, ints, key)
        if not torch._C._are_functorch_transforms_active():
            res = _guard(self.name, res, [t for t in (*arrays, *more) if t is not None])
        return res


_RAW_MAX = 1024                         # kept launches per call pattern (one per tensor metadata)
_KEY_MEMO = 64                          # eager call patterns remembered per operator (_eager_key)
_EMPTY, _CLONE, _LARGE_OUT = 0, 1, 2     # how _Raw allocates an output (see TorchOp._raw_entry)


def _geometry_text(v) -> str:
    """An ndrange or workgroup size as the text the operator's key holds (read back by
    :meth:`TorchOp._geometry`): NumPy integers as Python ints, a ``range`` as
    ``range(start, stop, step)``, anything else by its repr, for ``interop.bind`` to check.
    Plain string operations, so that TorchDynamo traces it without a graph break."""
    if isinstance(v, range):
        return f"range({v.start}, {v.stop}, {v.step})"
    if isinstance(v, (tuple, list)):
        return "(" + "".join(_geometry_text(d) + ", " for d in v) + ")"
    if type(v) is not bool and isinstance(v, (int, np.integer, torch.SymInt)):
        # f-strings, not repr(): under torch.compile a size computed from a shape is symbolic
        # (dynamic shapes, also after an automatic recompile); formatting specializes it (a
        # guard: a new value recompiles), where repr() was Dynamo's "repr_impl not
        # implemented" (audit17a)
        return f"{int(v)}"
    return repr(v)


def _geometry_value(node: ast.expr):
    """The value of a :func:`_geometry_text` (a parsed expression): literals, tuples and
    ``range(...)`` of int literals; ValueError for anything else."""
    if isinstance(node, ast.Tuple):
        return tuple(_geometry_value(e) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and not node.keywords:
        args = [ast.literal_eval(a) for a in node.args]
        if 1 <= len(args) <= 3 and all(type(a) is int for a in args):
            return range(*args)
        raise ValueError("range of non-ints")
    return ast.literal_eval(node)


class _Raw:
    """A kept launch of an eager call pattern (see :meth:`TorchOp._eager`): the launcher's
    ``raw`` entry (``_launch.c``), how each output is allocated, the ndrange and threads."""
    __slots__ = ("words", "alloc", "nd", "nthreads")

    def __init__(self, words: bytes, alloc: tuple, nd, nthreads: int):
        self.words, self.alloc, self.nd, self.nthreads = words, alloc, nd, nthreads


def _byte_span(t) -> tuple:
    """The bytes [lo, hi) a tensor reaches, relative to its data pointer ((0, 0) when empty)."""
    if t.numel() == 0:
        return 0, 0
    lo = hi = 0
    for n, st in zip(t.shape, t.stride()):
        if st < 0:
            lo += st * (n - 1)
        else:
            hi += st * (n - 1)
    return lo * t.element_size(), (hi + 1) * t.element_size()


class _Plan:
    """What a call pattern (the operator's ``key`` and number of arrays) needs per call."""
    __slots__ = ("binding", "template", "inst", "checked", "fresh", "raw")

    def __init__(self, binding: interop.Binding):
        self.binding = binding
        consts = dict(binding.consts)
        self.template = tuple((k, s, consts.get(n)) for n, k, s in zip(binding.names, binding.kinds, binding.slots))
        self.inst = None            # the CPU kernel instance (made on first use)
        self.checked: dict = {}     # launcher signature -> fast plan, for signatures that passed the checks
        self.fresh: dict = {}       # (dtype, rank) per array -> outputs the kernel fully overwrites
        self.raw: dict = {}         # (shape, stride, dtype) per tensor -> _Raw, or False (checked path)

    def args(self, views, floats, ints) -> tuple:
        """The kernel's arguments (a tuple, as the launcher takes them)."""
        return tuple([views[s] if k == "A" else floats[s] if k == "f" else ints[s] if k == "i"
                      else bool(ints[s]) if k == "b" else c for k, s, c in self.template])


def _eager_direct(arrays) -> bool:
    """Whether an eager call may run the operator's CPU implementation directly: plain CPU
    tensors, no gradient to record, and nothing that intercepts operators (torch.compile
    tracing, torch function / dispatch modes such as FakeTensorMode, functorch transforms,
    the profiler, TorchScript tracing, a forward-mode AD level), no lazily negated view (``is_neg()``, e.g. the
    ``.imag`` of a conjugate: the dispatcher materializes it) and only dense (strided)
    tensors (the dispatcher refuses sparse and MKL-DNN ones). Otherwise the call goes
    through the dispatcher."""
    if torch.compiler.is_compiling():
        return False
    C = torch._C
    if (C._len_torch_function_stack() or C._len_torch_dispatch_stack() or C._are_functorch_transforms_active()
            or C._autograd._profiler_enabled() or C._get_tracing_state() is not None or _fwad._current_level >= 0):
        return False
    strided = torch.strided
    if C.is_grad_enabled():
        for t in arrays:
            if type(t) is not torch.Tensor or not t.is_cpu or t.requires_grad or t.is_neg() or t.layout is not strided:
                return False
    else:
        for t in arrays:
            if type(t) is not torch.Tensor or not t.is_cpu or t.is_neg() or t.layout is not strided:
                return False
    return True


class _Static:
    """The static part of a call (one pytree leaf, so that torch.func's generated vmap rule
    sees one non-tensor input, not lists of scalars): the operator, scalars and key, and the
    dispatch key set when the Autograd kernel made it (the forward then redispatches below
    autograd instead of a second trip through the dispatcher: 4 to 5 us per recorded call)."""
    __slots__ = ("op", "floats", "ints", "key", "keyset")

    def __init__(self, op: TorchOp, floats, ints, key: str, keyset=None):
        self.op, self.floats, self.ints, self.key, self.keyset = op, floats, ints, key, keyset


class _Grad(torch.autograd.Function):
    """Autograd of ``ns::op_kernel``: the backward is ``ns::op_backward`` (the adjoint kernel), the
    forward-mode derivative ``ns::op_jvp`` (the tangent kernel). Written with
    ``setup_context`` and a generated vmap rule, so the ``torch.func`` transforms (``grad``,
    ``vjp``, ``jacrev``, ``jvp``, ``jacfwd``, ``vmap`` of them) run it: each overload has a
    vmap rule of its own (:func:`_vmap_per_element`)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(static, *arrays):
        op = static.op
        if static.keyset is not None:       # from the Autograd kernel: below autograd, directly
            with torch._C._AutoDispatchBelowAutograd():
                return tuple(op._op.redispatch(static.keyset & torch._C._after_autograd_keyset, list(arrays),
                                               static.floats, static.ints, static.key))
        # (torch.func: grad mode is off in here, the Autograd kernel redispatches below autograd)
        return tuple(op._op(list(arrays), static.floats, static.ints, static.key))

    @staticmethod
    def setup_context(ctx, inputs, output):
        static, *arrays = inputs
        ctx.save_for_backward(*arrays)
        ctx.save_for_forward(*arrays)
        ctx.op, ctx.floats, ctx.ints, ctx.key = static.op, static.floats, static.ints, static.key

    @staticmethod
    def backward(ctx, *grads):
        op, arrays = ctx.op, ctx.saved_tensors
        b = op._binding(ctx.key, len(arrays))
        g = [torch.zeros_like(arrays[k], memory_format=torch.contiguous_format) if gr is None else gr
             for k, gr in zip(b.outputs, grads)]
        res = op._op_bwd(list(arrays), g, ctx.floats, ctx.ints, ctx.key)
        if torch._C._are_functorch_transforms_active():   # torch.func.grad of torch.func.grad: refused
            res = _guard(op.name, res, [*arrays, *g], _NoDoubleBackward.apply)
        return (None,) + tuple(r if a.is_floating_point() else None for r, a in zip(res, arrays))

    @staticmethod
    def jvp(ctx, *tangents):
        op, arrays = ctx.op, ctx.saved_tensors
        b = op._binding(ctx.key, len(arrays))
        tans = list(tangents[1:])
        res = op._op_jvp(list(arrays), tans, ctx.floats, ctx.ints, ctx.key)
        if torch._C._are_functorch_transforms_active():   # torch.func.jacfwd of torch.func.jacfwd: refused
            res = _guard(op.name, res, [t for t in (*arrays, *tans) if t is not None], _NoDoubleBackward.apply)
        return tuple(r if arrays[k].is_floating_point() else None for r, k in zip(res, b.outputs))


def _guard(name: str, res, inputs, apply=None) -> list:
    """A derivative operator's results ``res``, through :class:`_NoDoubleBackward` (connected
    to ``inputs``) when autograd could differentiate them; ``apply``: how to apply it
    (default :func:`_apply_here`, inside the dispatcher; ``_NoDoubleBackward.apply`` under
    ``torch.func``, where the guard is needed whatever the inputs say)."""
    if apply is None:
        if not ((torch.is_grad_enabled() and any(t.requires_grad for t in inputs)) or _forward_ad_active()):
            return res
        return list(_apply_here(_NoDoubleBackward, name, len(res), *res, *inputs))
    return list(apply(name, len(res), *res, *inputs))


def _apply_here(fn, *args):
    """``fn.apply(*args)`` recorded at the current autograd level (the single-level apply),
    for calls inside the dispatcher: there, ``torch.autograd.Function.apply``'s route for
    ``torch.func`` transforms (``custom_function_call``) finds no kernel or asks for
    ``setup_context``; the transforms reach :class:`_Grad` through ``TorchOp.__call__``."""
    return super(torch.autograd.Function, fn).apply(*args)


def _forward_ad_active() -> bool:
    """Whether a forward-mode AD level (``torch.autograd.forward_ad.dual_level``) or a
    ``torch.func`` transform is active: a call's inputs may then carry tangents that autograd
    must see (they were dropped silently, a zero tangent, before audit17a)."""
    return (_fwad._current_level >= 0 and torch._C._is_fwd_grad_enabled()) \
        or torch._C._are_functorch_transforms_active()


def _may_record(arrays) -> bool:
    """Whether autograd may record a call: an input requires grad (with grad mode on), or
    forward-mode AD or a ``torch.func`` transform is active."""
    if torch.is_grad_enabled():
        for t in arrays:
            if t.requires_grad:
                return True
    return _forward_ad_active()


def _vmap_per_element(op, n_lists: int, templates, info, in_dims, *args):
    """``torch.vmap`` of an overload whose first ``n_lists`` arguments are tensor lists (the
    last argument is the key): the overload once per batch element (the batched tensors'
    slices, the others as they are), each result stacked along dimension 0. An empty batch
    gives empty results shaped like ``templates(key, unbatched arrays)``."""
    lists = args[:n_lists]
    dims = [d if d is not None else [None] * len(lst) for lst, d in zip(lists, in_dims[:n_lists])]

    def element(i):
        return [[t if t is None or d is None else t.select(d, i) for t, d in zip(lst, ds)]
                for lst, ds in zip(lists, dims)]
    per = [op(*element(i), *args[n_lists:]) for i in range(info.batch_size)]
    if per:
        outs = [torch.stack([p[j] for p in per]) for j in range(len(per[0]))]
    else:
        unbatched = [a if d is None else a.new_empty(a.shape[:d] + a.shape[d + 1:])
                     for a, d in zip(lists[0], dims[0])]
        outs = [t.new_empty((0, *t.shape)) for t in templates(args[-1], unbatched)]
    return outs, [0] * len(outs)


class _NoDoubleBackward(torch.autograd.Function):
    """Identity on the gradients ``ns::op_backward`` returns (the first ``n`` tensors),
    connected to its inputs (the rest); differentiating it raises. Written with
    ``setup_context`` so that ``torch.func.grad`` of ``torch.func.grad`` reaches the error."""
    generate_vmap_rule = True

    @staticmethod
    def forward(name, n, *tensors):
        return tuple(r.view_as(r) for r in tensors[:n])

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.name = inputs[0]

    @staticmethod
    def backward(ctx, *grads):
        raise LaunchError(_no_second_order(ctx.name))

    @staticmethod
    def jvp(ctx, *tangents):
        raise LaunchError(_no_second_order(ctx.name))


def _no_second_order(name: str) -> str:
    return (f"op {name}: double backward (differentiating its derivative, e.g. after backward(create_graph=True), "
            "torch.func.grad of torch.func.grad, hessians, jacfwd of jacrev or of jacfwd) is not supported: the "
            "derivatives come from tinykernels' adjoint and tangent kernels, which have no derivatives themselves")


_NUMPY_DTYPES = frozenset([torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16,
                           torch.int8, torch.uint8, torch.bool])


def _host_view(t):
    """A zero-copy NumPy view of a CPU tensor (bfloat16 and fp8 through ml_dtypes); a lazily
    conjugated or negated view (``is_conj()``/``is_neg()``) is materialized first (a copy:
    only inputs can be such views, the outputs are new tensors)."""
    if t.is_neg() or t.is_conj():
        t = t.resolve_conj().resolve_neg()
    if t.dtype in _NUMPY_DTYPES:
        return t.detach().numpy() if t.requires_grad else t.numpy()
    return _torch_host_view(t)


_LARGE = 1 << 20             # bytes from which an output gets a fresh, huge-page-advised buffer


def _fresh_like(t):
    """An uninitialized contiguous CPU tensor like ``t`` whose 2 MiB-aligned interior is
    advised to use transparent huge pages (Linux; elsewhere a plain ``torch.empty``), as
    NumPy does for large arrays: first-touch page faults then cost a few hundred times
    fewer kernel entries."""
    out = torch.empty(t.shape, dtype=t.dtype)
    _advise_huge_pages(out.data_ptr(), out.nbytes)
    return out


def _advise_huge_pages(ptr: int, nbytes: int) -> None:
    madvise = _madvise()
    if madvise is None:
        return
    lo = (ptr + (1 << 21) - 1) & ~((1 << 21) - 1)
    hi = (ptr + nbytes) & ~((1 << 21) - 1)
    if hi > lo:
        madvise(lo, hi - lo, 14)            # MADV_HUGEPAGE; failure (THP off) is harmless


_MADVISE: list = []


def _madvise():
    """libc's madvise through ctypes (Linux only), looked up once; None elsewhere."""
    if not _MADVISE:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).madvise
                fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _MADVISE.append(fn)
    return _MADVISE[0]


def _scalar_shadow(backend):
    from tinykernels.autodiff import _dummy
    return _dummy(backend, 1, np.float64 if getattr(backend, "supports_float64", True) else np.float32)


def _cuda_target(device):
    """The CUDA backend for a torch device, PyTorch's current stream (borrowed, never
    destroyed by tinykernels) and the identity conversion (the CUDA runtime takes torch's
    CUDA tensors zero-copy)."""
    from tinykernels.backends import CUDA
    from tinykernels.runtime.cuda import CUDAStream, _driver
    backend = CUDA(device.index if device.index is not None else torch.cuda.current_device())

    class _TorchStream(CUDAStream):
        def __init__(self, handle):           # wraps torch's stream; no cuStreamCreate
            self.backend, self.priority, self.native_priority = backend, 0, 0   # (cuda_priority reads it)
            self.handle = _driver().CUstream(handle)

        def __del__(self):                    # torch owns the stream
            pass

    return backend, _TorchStream(torch.cuda.current_stream(device).cuda_stream), lambda t: t.detach()


def torch_op(kernel: Kernel, outputs, name: str, ndrange=None, workgroupsize=None) -> TorchOp:
    """Register ``kernel`` as the PyTorch operator ``name`` (``"namespace::opname"``).

    ``outputs``: the names of the array parameters the kernel writes. Call the result with
    the kernel's array arguments positionally (the outputs' initial values among them) and
    its scalars and constexprs by keyword; ``ndrange`` (default: the first output's shape; a
    dimension may be a Python ``range``, as in a direct launch) and ``workgroupsize`` may be
    given here or per call. It returns the outputs' new values
    (a tuple when there are several) and leaves its inputs unchanged; gradients flow to the
    float tensors through the kernel's adjoint (not to scalars)."""
    return TorchOp(kernel, outputs, name, ndrange, workgroupsize)
