"""OpenCL C (1.2) from the shared SIMT scaffold: mostly tables of strings.

Fixed-width type names are typedefs, float16/bfloat16/fp8 are stored as integers and
converted in software (so they work on devices without ``cl_khr_fp16``), 64-bit atomics use
``cl_khr_int64_*_atomics``, and float atomics are compare-and-swap loops.
"""
from __future__ import annotations

from functools import lru_cache

from ..ir import nodes as N
from ..passes.groups import ItemLoop
from .clike import portable_helpers
from .gpu import GPURenderer
from .prelude import prelude

_HEADER = """\
typedef char int8_t; typedef uchar uint8_t; typedef short int16_t; typedef ushort uint16_t;
typedef int int32_t; typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;
#define INT64_C(x) (x##L)
#define UINT64_C(x) (x##UL)
#define INT8_MIN SCHAR_MIN
#define INT8_MAX SCHAR_MAX
#define INT16_MIN SHRT_MIN
#define INT16_MAX SHRT_MAX
#define INT32_MIN INT_MIN
#define INT32_MAX INT_MAX
#define INT64_MIN LONG_MIN
#define INT64_MAX LONG_MAX
#define UINT8_MAX UCHAR_MAX
#define UINT16_MAX USHRT_MAX
#define UINT32_MAX UINT_MAX
#define UINT64_MAX ULONG_MAX
#define TK_INLINE static inline
#define fmodf fmod
#define floorf floor
#define copysignf copysign
#define logf log
#define sqrtf sqrt
#define cosf cos
#define fabsf fabs
"""

_INT_ATOMIC = {"add": "add", "sub": "sub", "min": "min", "max": "max", "and": "and", "or": "or",
               "xor": "xor", "exchange": "xchg", "cas": "cmpxchg"}


@lru_cache(maxsize=None)
def _float_atomics(with_f64: bool) -> str:
    """Float atomics through compare-and-swap on the bits, for global and local memory."""
    out = []
    kinds = [("f32", "float", "uint", "as_float", "as_uint", "atomic_cmpxchg", "atomic_xchg")]
    if with_f64:
        kinds.append(("f64", "double", "ulong", "as_double", "as_ulong", "atom_cmpxchg", "atom_xchg"))
    for sfx, t, u, as_t, as_u, cmpxchg, xchg in kinds:
        for sp, space in (("g", "__global"), ("l", "__local")):
            q = f"volatile {space} {u} *q = (volatile {space} {u} *)p;"
            for op, expr in (("add", "o + v"), ("sub", "o - v"), ("min", "(v < o ? v : o)"),
                             ("max", "(v > o ? v : o)")):
                out.append(f"TK_INLINE {t} tk_atomic_{op}_{sfx}_{sp}(volatile {space} {t} *p, {t} v) {{ {q} "
                           f"{u} old = *q, prev; while (1) {{ {t} o = {as_t}(old); "
                           f"prev = {cmpxchg}(q, old, {as_u}({expr})); if (prev == old) return o; old = prev; }} }}")
            out.append(f"TK_INLINE {t} tk_atomic_exchange_{sfx}_{sp}(volatile {space} {t} *p, {t} v) {{ {q} "
                       f"return {as_t}({xchg}(q, {as_u}(v))); }}")
            out.append(f"TK_INLINE {t} tk_atomic_cas_{sfx}_{sp}(volatile {space} {t} *p, {t} e, {t} n) {{ {q} "
                       f"return {as_t}({cmpxchg}(q, {as_u}(e), {as_u}(n))); }}")
    return "\n".join(out) + "\n"


_DEBUG = """\
TK_INLINE int tk_oob(__global long *err, long line, long arr, int nd, long i0, long n0, long i1, long n1,
                     long i2, long n2) {
    if (i0 >= 0 && i0 < n0 && i1 >= 0 && i1 < n1 && i2 >= 0 && i2 < n2) return 1;
    if (atom_cmpxchg((volatile __global long *)err, 0L, 1L) == 0) {
        err[1] = line; err[2] = arr; err[3] = nd; err[4] = i0; err[5] = n0; err[6] = i1; err[7] = n1;
        err[8] = i2; err[9] = n2;
    }
    return 0;
}
"""


#: Functions PoCL 3.1 folds wrongly when the argument is a compile-time NaN (exp(NaN) == 0, floor(NaN) == 0):
#: under ``TK_POCL`` (defined by the runtime for PoCL devices) they pass NaN through first.
_NAN_FOLDED = ("exp", "expm1", "exp2", "exp10", "sinh", "cosh", "tanh", "floor", "ceil", "trunc", "rint", "round")


#: PoCL 3.1 miscompiles ``rint`` of a constant it folds at or above 2**23 (float) / 2**52 (double):
#: whatever uses the result, the kernel's stores are dropped or it hangs (``(long)rint(1e10f)``,
#: ``rint(clamp(1e300, ...))``, ``rint(3e9f) > 0``). Such values are integers already, so
#: ``tk_rint`` returns them unchanged and never calls ``rint`` for them (bug pocl-const-rint-int64).
_INTEGRAL_FROM = {"float": "0x1p23f", "double": "0x1p52"}


#: PoCL 3.1's float ``tanh`` never returns 1: it gives 0.99999994 for every x from 9.0109 on and
#: for +inf (C99 and OpenCL say tanh(+-inf) is +-1), so ``1 - tanh(x)**2`` was 1.2e-7 instead of 0
#: there and ``llm.tanh_grad(inf, inf)`` inf instead of NaN. From this float on (the first whose
#: tanh rounds to 1) ``tk_tanh`` returns +-1 itself; PoCL's double ``tanh`` is right.
_TANH_ONE_FROM = "0x1.205968p+3f"


#: PoCL 3.1's ``log1p`` is wrong for tiny arguments, float and double: 0 for +-the smallest
#: subnormal (log1p(x) is x there), 3 subnormal steps for 3 and one step off near the
#: smallest normal. Below this magnitude log1p(x) rounds to x itself (|x|/2 is under half an
#: ulp of x, for either sign), so ``tk_log1p`` returns x; from it on PoCL's log1p agrees with
#: NumPy's to an ulp (tests/test_opencl.py scans every binade). Bug pocl-log1p-tiny.
_LOG1P_IS_X_BELOW = {"float": "0x1p-25f", "double": "0x1p-54"}
_TINY_FIXED = ("log1p",)


#: PoCL 3.1's ``printf`` reads a double passed for ``%g`` as a float: ``tk.print`` of 1e-40 printed
#: 9.99995e-41, 1e300 ``inf`` and 1e-310 ``0`` (fuzzer seed 49910003, fuzz16). ``%lg`` (C99: the
#: ``l`` does nothing for ``g``) makes it read the double; other drivers keep ``%g``. The renderer
#: splices the macro into the format string (``"x " TK_PRINT_G "\n"``, one literal after
#: concatenation). Bug pocl-printf-double.
_PRINT_G = {True: '#define TK_PRINT_G "%lg"', False: '#define TK_PRINT_G "%g"'}


@lru_cache(maxsize=None)
def _pocl_workarounds(with_f64: bool) -> str:
    """Driver workarounds, active under ``TK_POCL``: ``tk_<fn>`` NaN-passing wrappers (plain
    ``<fn>`` otherwise; ``tk_rint`` also passes values that are integral by magnitude, the float
    ``tk_tanh`` gives +-1 where tanh rounds to it), ``tk_log1p`` (x for tiny x) and the
    loop-exit barrier, ``TK_POCL_ZERO`` (the initializer of a grouped kernel's locals),
    ``TK_POCL_TRUE(p)`` (an unsafe_indices kernel's ``tk_in``: true, but per work item for
    PoCL, see ``OpenCLRenderer.unsafe_in``); ``TK_PRINT_G``, the printf conversion of a double."""
    out = ["#ifdef TK_POCL", "#define TK_POCL_BARRIER barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)",
           "#define TK_POCL_ZERO = 0", "#define TK_POCL_TRUE(p) ((p) >= 0)", _PRINT_G[True]]
    for fn in _NAN_FOLDED:
        for t in ("float", "double") if with_f64 else ("float",):
            keep = f"isnan(x) || fabs(x) >= {_INTEGRAL_FROM[t]}" if fn == "rint" else "isnan(x)"
            call = f"{fn}(x)"
            if fn == "tanh" and t == "float":
                call = f"fabs(x) >= {_TANH_ONE_FROM} ? copysign(1.0f, x) : tanh(x)"
            out.append(f"TK_INLINE {t} __attribute__((overloadable)) tk_{fn}({t} x) "
                       f"{{ return ({keep}) ? x : {call}; }}")
    for t in ("float", "double") if with_f64 else ("float",):
        out.append(f"TK_INLINE {t} __attribute__((overloadable)) tk_log1p({t} x) "
                   f"{{ return fabs(x) < {_LOG1P_IS_X_BELOW[t]} ? x : log1p(x); }}")
        # PoCL folds pow of constant NaNs wrongly: pow(1, NaN) dropped the kernel's stores (seed
        # 20000789), pow(NaN, NaN) gave 0. pow(1, y) and pow(x, 0) are 1, else a NaN gives NaN.
        out.append(f"TK_INLINE {t} __attribute__((overloadable)) tk_pow({t} x, {t} y) "
                   f"{{ return (x == ({t})1 || y == ({t})0) ? ({t})1 : (isnan(x) || isnan(y)) ? x + y : pow(x, y); }}")
    out += ["#else", "#define TK_POCL_BARRIER", "#define TK_POCL_ZERO", "#define TK_POCL_TRUE(p) true",
            "#define tk_pow pow", _PRINT_G[False]]
    out += [f"#define tk_{fn} {fn}" for fn in _NAN_FOLDED + _TINY_FIXED]
    out.append("#endif")
    return "\n".join(out) + "\n"


class OpenCLRenderer(GPURenderer):
    """OpenCL C for ``tk.OpenCL()``."""
    oob_prefix = "tk_err, "

    def unsafe_in(self) -> str:
        """``tk_in`` of an unsafe_indices kernel (every padded item runs): true, but under PoCL a
        per-item test that is always true (``tk_p0 >= 0``). With the constant, every
        ``if (tk_active)`` block folded away and PoCL 3.1 (its uniformity analysis: the blocks'
        code was then under uniform control) miscounted a per-item loop nested in another: three
        items of a group advanced their tape index as far as one of them did. The adjoint of seed
        95000058 (--grad --grad-unsafe) popped its tape past the item's start, read a trip count
        of 2**35 and ran for hours (gradfz22's timeout; bug pocl-unsafe-uniform-item-loops).
        A test of a kernel argument (uniform) hung the same way; -cl-opt-disable or a volatile
        read of the loop's bound computed right."""
        return "TK_POCL_TRUE(tk_p0)"

    def __init__(self, kernel, plan, ranges, fp64: bool = True):
        super().__init__(kernel, plan, ranges)
        self.fp64 = fp64
        # a double's conversion is TK_PRINT_G (%lg under TK_POCL: bug pocl-printf-double), spliced
        # into the format literal
        self.print_formats = {"f": ('" TK_PRINT_G "' if fp64 else "%g", "double" if fp64 else "float"),
                              "u": ("%lu", "ulong"), "i": ("%ld", "long")}

    def math_name(self, fn: str, d) -> str:
        # OpenCL's math functions are overloaded on float and double
        return "tk_" + fn if fn in _NAN_FOLDED or fn in _TINY_FIXED or fn == "pow" else fn

    def atomic(self, e: N.Atomic) -> str:
        d = e.array.dtype
        ref = f"&{self.element(e.array, e.index)}"
        args = ", ".join(self.expr(a) for a in e.args)
        if d.is_float:
            sp = "l" if e.array.space == "local" else "g"
            call = f"tk_atomic_{e.op}_{self.fsuffix(d)}_{sp}({ref}, {args})"
        else:
            prefix = "atom_" if d.bits == 64 else "atomic_"
            call = f"{prefix}{_INT_ATOMIC[e.op]}({ref}, {args})"
        chk = self.bounds_check(e.array, e.index, e.loc)
        return f"({chk} ? {call} : ({self.ctype(e.ty)})0)" if chk else call

    # PoCL 3.1 mishandles control flow that holds a barrier: a loop with a barrier that more
    # code follows aborts its compiler (ParallelRegion::Verify: "Incoming edges to non-entry
    # block!"), and in an `if` holding a barrier, masked-off work items ran an atomic guarded by
    # `if (tk_active)`. A barrier before such an `if` or loop and after it avoids both (under
    # TK_POCL only). The statement is uniform (it holds a barrier): every work item gets there.
    # Every other group-level (uniform) loop of a grouped kernel is fenced too: in a kernel that
    # holds a barrier, PoCL puts a barrier of its own at the start and the end of each innermost
    # loop whose trip count is uniform (its implicit-loop-barriers pass), and in a partial group
    # of a workgroup one item wide in OpenCL's x (reqd_work_group_size(1, 4, 1)) an
    # `if (tk_active)` atomic between such a loop and the explicit barrier before or after it ran
    # once more per group: after a `while` with per-item code in it (bug
    # pocl-uniform-loop-item-code, seed 90000533), and before a `for` without any (bug
    # pocl-loop-barrier-partial-group, seed 90002214). With the fences no per-item code lies
    # between PoCL's loop barriers and ours. The loop is group-level: every work item gets there.

    def s_If(self, s):
        self.fenced(s.body + (s.orelse or []), self.split_if, s)

    def split_if(self, s) -> None:
        """The ``if``; one with an ``else`` that holds a barrier is two ``if``s on the condition's
        value (it is uniform): PoCL 3.1 lost the stores after the barrier of the branch that held
        one, the other holding none, in a partial group (bug pocl-barrier-one-branch)."""
        if not (s.orelse and self.holds_barrier(s.body + s.orelse)):
            return super().s_If(s)
        self.split_ifs = getattr(self, "split_ifs", 0) + 1
        c = f"tk_if{self.split_ifs}"
        self.w(f"const bool {c} = {self.expr(s.cond)};")
        for k, (cond, branch) in enumerate(((c, s.body), (f"!{c}", s.orelse))):
            if k:
                self.w("TK_POCL_BARRIER;")             # (each if fenced, as fenced() does)
            self.w(f"if ({cond}) {{")
            self.block(branch)
            self.w("}")

    def s_For(self, s):
        self.fenced(s.body, super().s_For, s, loop=True)

    def s_While(self, s):
        self.fenced(s.body, super().s_While, s, loop=True)

    def fenced(self, stmts, render, s, loop: bool = False) -> None:
        """``render(s)``, between two TK_POCL_BARRIERs when group-level ``stmts`` hold a barrier,
        or (``loop``) when ``s`` is a group-level loop of a grouped kernel."""
        group_loop = loop and self.group_level()
        guard = self.holds_barrier(stmts) or group_loop
        if guard:
            self.w("TK_POCL_BARRIER;")
        self.group_loops = getattr(self, "group_loops", 0) + group_loop
        render(s)
        self.group_loops -= group_loop
        if guard:
            self.w("TK_POCL_BARRIER;")

    # PoCL 3.1 lost the stores of a per-item block in a group-level loop that holds a barrier:
    # in `while (1) { barrier; if (wr >= 3) break; wr++; if (tk_active) { if (v != 0) io[p] = 5;
    # v = 0; o[p] = 43; } }` the single active item of a partial group (workgroup 8, 81 items)
    # never stored o[p] (fuzz seed 94000222; cut down by hand to that OpenCL C; a barrier after
    # the block, or v volatile, gives the right stores). Every per-item block in a group-level
    # loop of a grouped kernel is followed by a TK_POCL_BARRIER (the block's end is group-level:
    # every work item gets there). Bug pocl-loop-item-block-lost-store.
    def s_ItemLoop(self, s: ItemLoop):
        super().s_ItemLoop(s)
        if getattr(self, "group_loops", 0):
            self.w("TK_POCL_BARRIER;")

    def group_level(self) -> bool:
        """Whether the statement being rendered is group-level code of a grouped kernel (outside
        every per-item ``if (tk_active)`` region)."""
        return self.plan is not None and self.item_label is None

    def holds_barrier(self, stmts) -> bool:
        """Whether group-level code ``stmts`` holds a barrier, collective or tk.uniform, or a
        group-level loop (which fenced() puts between barriers: an `if` holding one is fenced and
        split as for a barrier, since PoCL lost the stores after a fence in one branch of an
        if/else in a partial group, fuzz seed 91000360)."""
        return self.plan is not None and (any(
            isinstance(x, (N.Barrier, N.Collective)) or
            (isinstance(x, N.Assign) and isinstance(x.value, N.Call) and x.value.fn == "uniform")
            for x in N.walk_stmts(stmts)) or (self.group_level() and (
                _holds_group_loop(stmts) or _holds_group_exit(stmts) or
                (getattr(self, "group_loops", 0) and _holds_item_block(stmts)))))

    # PoCL 3.1 adds a barrier of its own to each innermost loop with a uniform trip count in a
    # kernel that holds a barrier (its implicit-loop-barriers pass), and its work-item loop pass
    # then aborted the process ("Could not find a dominating alternative variable.") where a
    # local that only active items assign (`if (tk_active)`, so undefined on the inactive path)
    # was assigned in such a loop and read after it (fuzz seed 90001921). Every local of a
    # grouped kernel starts at 0 under TK_POCL, so no value is undefined; the 0 is never read
    # (a local is assigned on every path to a read of it: definite assignment, docs/language.md).
    # Bug pocl-undef-local-loop-barrier.
    def local_init(self) -> str:
        return " TK_POCL_ZERO" if self.plan is not None else ""

    def workgroup_attribute(self) -> str:
        wg = list(reversed(self.k.workgroup)) + [1] * (3 - self.k.ndim)
        return f" __attribute__((reqd_work_group_size({wg[0]}, {wg[1]}, {wg[2]})))"

    def render(self) -> str:
        k = self.k
        body = self.body()
        # no a*b+c -> fma (SPEC section 1: no fast-math), unless @tk.kernel(fastmath=True)
        head = [f"#pragma OPENCL FP_CONTRACT {'ON' if k.fastmath else 'OFF'}"]
        if self.fp64:
            head.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        else:
            head.append("#define TK_NO_F64 1")
        head += ["#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable",
                 "#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable", _HEADER,
                 f"typedef {'int' if k.idx32 else 'long'} tk_idx;",
                 prelude(["base", "half", "bf16", "fp8", "intdiv", "floatdiv", "ipow", "philox"]),
                 portable_helpers(self.fp64), _pocl_workarounds(self.fp64), _float_atomics(self.fp64), _DEBUG if k.debug else ""]
        return "\n".join(head) + "\n" + "\n".join(body) + "\n"


def _holds_at_group_level(stmts, kinds) -> bool:
    """Whether group-level statements ``stmts`` hold a node of type ``kinds`` outside their
    per-item regions (an ItemLoop among ``kinds`` is found itself)."""
    for s in stmts:
        if isinstance(s, kinds):
            return True
        if not isinstance(s, ItemLoop) and any(_holds_at_group_level(getattr(s, a, None) or [], kinds)
                                               for a in ("body", "orelse")):
            return True
    return False


def _holds_group_loop(stmts) -> bool:
    """Whether group-level statements ``stmts`` hold a loop outside their per-item regions."""
    return _holds_at_group_level(stmts, (N.For, N.While))


def _holds_group_exit(stmts) -> bool:
    """Whether group-level statements ``stmts`` hold a ``break``, ``continue`` or ``return``
    outside their per-item regions. PoCL 3.1 aborted the process ("Incoming edges to non-entry
    block!", ParallelRegion::Verify) on a loop with two exits between the same two barriers:
    `while (1) { if (c) { ...; barrier; ... } barrier; if (!c) break; wr++; if (s5 & 1) break;
    if (tk_active) o[p] += 2; barrier; }` (fuzz seed 91000615, cut down by hand; a barrier
    before the second break compiles). An `if` holding a group-level exit is fenced and split
    as one holding a barrier, so each exit lies between barriers of its own. Bug
    pocl-loop-two-exits-abort. A return out of an inlined function with barriers (a FuncExit,
    a goto to the function's end, at group level since cpu-func-exit-in-item-loop) is such an
    exit too."""
    return _holds_at_group_level(stmts, (N.Break, N.Continue, N.Return, N.FuncExit))


def _holds_item_block(stmts) -> bool:
    """Whether group-level statements ``stmts`` hold a per-item region (which s_ItemLoop follows
    with a TK_POCL_BARRIER inside a group-level loop: an `if` holding one is fenced and split)."""
    return _holds_at_group_level(stmts, ItemLoop)


def render_opencl(kernel: N.Kernel, plan, ranges: int, fp64: bool = True) -> tuple:
    """OpenCL C source of a specialized kernel, and the debug array-name table."""
    r = OpenCLRenderer(kernel, plan, ranges, fp64)
    return r.render(), list(r.array_ids)
