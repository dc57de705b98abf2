"""What a generated test case is: :class:`Options` (what the generator may produce),
:class:`ArgSpec` and :class:`Case` (a kernel module's source with its arguments and launch
geometry, everything reproducible from ``(seed, Options)``), and the generator's typed building
blocks :class:`Var`, :class:`Arr` and :class:`Ex`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .bugs import KNOWN_BUGS


@dataclass
class Options:
    """What the generator may produce. Everything is on by default; ``exclude`` lists the
    :data:`KNOWN_BUGS` whose constructs are avoided."""
    exclude: frozenset = frozenset(KNOWN_BUGS)
    narrow_floats: bool = True            # bfloat16 / fp8 (needs ml_dtypes)
    grouped: float = 0.35                 # probability of a kernel with local memory / barriers / collectives
    funcs: bool = True
    atomics: bool = True
    inexact_math: bool = True             # transcendental functions (compared with an ulp tolerance)
    max_items: int = 96                   # work items per launch (the interpreter runs them in Python)
    max_stmts: int = 28                   # statements per kernel body (roughly)
    fastmath: float = 0.1                 # fraction of seeds that make a fastmath case (fastmath.py)
    strided_outputs: float = 0.15         # probability that an output array is a [..., ::2 or 3] view
    rng: float = 0.0                      # weight of tk.random statements (SPEC 8: bit-exact everywhere)
    prints: float = 0.0                   # weight of tk.print statements (their output compared as text)
    bytes: float = 0.0                    # weight of byte-run statements (tk.load_i8, lookup_u4, load_halves, dot_i8, dot_u4i8)
    hazards: float = 0.0                  # weight of side-effect hazards (hazards.py: effect funcs, big int arguments)
    calls: float = 0.0                    # weight of calls.py's constructs (effects in funcs/collectives, int edges)
    edges: float = 0.0                    # weight of edges.py's constructs (trip-count arguments, private arrays in funcs, wraps)
    params: float = 0.0                   # probability that a scalar argument of a NumPy type is a local the kernel may reassign
    grad: bool = False                    # autodiff cases only (gradgen.py: differentiable float64 kernels)
    grad_local: float = 0.0               # autodiff cases: probability of local memory, a barrier, group_reduce
    grad_unsafe: float = 0.0              # autodiff cases: probability of an unsafe_indices kernel with partial groups
    grad_narrow: float = 0.0              # autodiff cases: probability of float16/bfloat16 arrays (gradcheck's float64 oracle)
    profile: str = "full"                 # "webgpu": only what WebGPU runs (gen.WEBGPU_PROFILE)

    def key(self) -> str:
        d = dataclasses.asdict(self)
        d["exclude"] = sorted(self.exclude)
        return repr(sorted(d.items()))


@dataclass
class ArgSpec:
    """One kernel argument: ``kind`` is "array" (with ``value`` the initial NumPy array, ``const``
    for tk.Const inputs, ``role`` in/out/io/own/acc), "scalar" (a Python or NumPy scalar) or
    "constexpr" (a Python int/bool or a dtype name in ``value``)."""
    name: str
    kind: str
    value: object
    role: str = ""
    const: bool = False
    tol: list = field(default_factory=list)     # per last-axis slot: allowed ulps (0: exact)
    view: object = None                         # pass value[..., ::view] (a strided array)


@dataclass
class Case:
    """A generated kernel with its arguments and launch geometry (all from ``seed``)."""
    seed: int
    source: str                 # the module: imports, globals, @tk.func defs and the @tk.kernel
    kname: str
    args: list                  # [ArgSpec]
    ndrange: object             # int, tuple of ints / ranges
    workgroupsize: object = None   # launch workgroupsize= (or None)
    static_wg: object = None       # kernel(backend, static_wg)
    unsafe: bool = False
    features: set = field(default_factory=set)
    mag_kname: str = ""            # fastmath cases: the kernel computing the tolerance's magnitudes
    mode: str = ""                 # "grad" / "grad-narrow": an autodiff case (gradgen.py), checked by gradcheck.py

    def describe(self) -> str:
        return (f"seed {self.seed}: kernel {self.kname} ndrange={self.ndrange!r} workgroupsize={self.workgroupsize!r} "
                f"static_wg={self.static_wg!r} unsafe={self.unsafe} features={sorted(self.features)}")


@dataclass
class Var:
    name: str
    ty: str
    uni: bool = False          # uniform across the work group (usable in barrier conditions)
    mutable: bool = True
    cval: object = None        # compile-time value (constexprs, globals)


@dataclass
class Arr:
    name: str
    dtype: str
    shape: tuple               # for in/local/private arrays; per-item arrays are (items, len(tol))
    role: str                  # in, out, io, own, acc, local, private
    tol: list = field(default_factory=list)
    readable: bool = True      # local memory: only between the barriers that follow a write phase
    dim_code: tuple = ()       # code of each extent (len(x), x.shape[1], a constexpr ...)
    own: str = ""              # local memory: the index of the element this item writes


@dataclass
class Ex:
    code: str
    ty: str
    uni: bool = False
    cval: object = None        # value when a compile-time constant Python int

    @property
    def const(self) -> bool:
        return self.cval is not None


class _Retry(Exception):
    """A generator step gave up in this spot; the caller draws another (gen.py, bytegen.py)."""
