"""The in-kernel language: names that only have meaning inside ``@tk.kernel`` / ``@tk.func``.

The compiler recognises these objects by identity; calling them from ordinary Python
raises a clear error (except on the ``tk.Interpreter()`` backend, which runs kernels in Python).
"""
from __future__ import annotations


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"tk.{self.name}"


Global, Local, Group = _Marker("Global"), _Marker("Local"), _Marker("Group")
Linear, Cartesian = _Marker("Linear"), _Marker("Cartesian")


class Const:
    """Annotation ``A: tk.Const``: the array is read-only and not aliased (``const restrict``).

    ``tk.Const(x)`` is also the autodiff activity of an argument that is not differentiated.
    """

    def __init__(self, value=None):
        self.value = value

    def __repr__(self) -> str:
        return f"tk.Const({self.value!r})"


class constexpr:
    """Annotation ``x: tk.constexpr``: the value is baked into the compiled kernel."""


class Func:
    """A device function (``@tk.func``), inlined into the kernels that call it.

    The frontend recognises it by type and parses ``fn`` (caching the result in ``_src``);
    called from ordinary Python (the interpreter backend) it runs ``fn``."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self._src = None          # the frontend's parsed source, filled on first inlining
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        # the function's identity, as functools.wraps gives it (help(), logging, Numba's dispatchers)
        self.__name__, self.__qualname__ = fn.__name__, fn.__qualname__
        self.__module__ = fn.__module__

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)  # plain Python call (used by the interpreter backend)

    def __repr__(self) -> str:
        return f"<tk.func {self.name}>"


INTRINSICS: dict = {}     # name -> a host function that is also an in-kernel intrinsic


def intrinsic(name: str):
    """Decorator: the host function (defined in a higher layer, e.g. ``tk.synchronize``) is
    also the in-kernel intrinsic ``name``; the compiler and the interpreter recognise it by
    :func:`intrinsic_name`, so they never import the layer that defines it."""
    def mark(fn):
        fn.__tk_intrinsic__ = name
        INTRINSICS[name] = fn
        return fn
    return mark


def intrinsic_name(obj) -> str | None:
    """The intrinsic ``obj`` stands for in a kernel (see :func:`intrinsic`), or None."""
    try:
        name = obj.__tk_intrinsic__
    except Exception:  # noqa: BLE001 - any object may appear in a kernel's call position
        return None
    return name if isinstance(name, str) and INTRINSICS.get(name) is obj else None


def _kernel_only(name: str):
    def f(*args, **kwargs):
        raise RuntimeError(f"tk.{name}() can only be used inside a @tk.kernel or @tk.func")
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"In-kernel intrinsic ``tk.{name}`` (see SPEC section 3)."
    return f


index = _kernel_only("index")
ndrange = _kernel_only("ndrange")
groupsize = _kernel_only("groupsize")
ngroups = _kernel_only("ngroups")
localmem = _kernel_only("localmem")
private = _kernel_only("private")
uniform = _kernel_only("uniform")
group_reduce = _kernel_only("group_reduce")
group_scan = _kernel_only("group_scan")
select = _kernel_only("select")
rsqrt = _kernel_only("rsqrt")
fma = _kernel_only("fma")
clamp = _kernel_only("clamp")
sigmoid = _kernel_only("sigmoid")
dot4_i8 = _kernel_only("dot4_i8")
dot_i8 = _kernel_only("dot_i8")
dot_u4i8 = _kernel_only("dot_u4i8")
load_halves = _kernel_only("load_halves")
lookup_u4 = _kernel_only("lookup_u4")
load_i8 = _kernel_only("load_i8")
bitcast = _kernel_only("bitcast")
print = _kernel_only("print")  # noqa: A001 - mirrors KernelAbstractions' @print

ATOMIC_OPS = ("add", "sub", "min", "max", "and", "or", "xor", "exchange", "cas")
atomic_add = _kernel_only("atomic_add")
atomic_sub = _kernel_only("atomic_sub")
atomic_min = _kernel_only("atomic_min")
atomic_max = _kernel_only("atomic_max")
atomic_and = _kernel_only("atomic_and")
atomic_or = _kernel_only("atomic_or")
atomic_xor = _kernel_only("atomic_xor")
atomic_exchange = _kernel_only("atomic_exchange")
atomic_cas = _kernel_only("atomic_cas")
