"""CUDA C++ for NVRTC from the shared SIMT scaffold: mostly tables of strings.

The translation unit includes no header (NVRTC has no ``<stdint.h>`` by default): the
fixed-width integer names, their limits and ``INT64_C``/``UINT64_C`` are defined here, and
the math functions (``expf``, ``exp``, ...) are CUDA's built-in device functions. The
kernel is ``extern "C" __global__ void tk_kernel(...)`` so the runtime finds it by name.

* geometry: the ndrange's LAST dimension is ``threadIdx.x``/``blockIdx.x`` (coalesced
  ``A[i, j]`` with ``j`` fastest); the runtime launches exactly ``ceil(n / wg)`` blocks per
  dimension, so ``gridDim`` is the number of groups;
* index arithmetic: ``tk_idx`` is ``int`` when the specialization's ``idx32`` flag says that
  every index fits in 32 bits (then the extents, shapes and strides are passed as 32-bit
  ints too), else ``long long``;
* ``tk.Const`` arrays are ``const T *__restrict__`` (read-only data path);
* ``localmem`` is ``__shared__``, ``tk.synchronize()`` is ``__syncthreads()``;
* atomics are CUDA's native ``atomicAdd/Sub/Min/Max/And/Or/Xor/Exch/CAS`` where the
  hardware has them for the type; compare-and-swap loops only for float min/max (and
  double add below sm_60);
* ``group_reduce``/``group_scan``: warp shuffles within each warp, shared memory across
  warps; masked work items contribute the operation's identity;
* float16/bfloat16/fp8 are stored as integers and converted in software (the portable
  prelude), so results match NumPy/ml_dtypes bit for bit on every architecture.

:func:`param_layout` describes the kernel's parameters in order, for the runtime that
packs the argument buffer.
"""
from __future__ import annotations

import re
from functools import lru_cache

from ..ir import nodes as N
from .clike import mangle, portable_helpers
from .gpu import GPURenderer, _prod
from .prelude import prelude

WARP = 32

_HEADER = """\
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t;
#define INT64_C(x) (x##LL)
#define UINT64_C(x) (x##ULL)
#define INT8_MIN (-128)
#define INT8_MAX 127
#define INT16_MIN (-32768)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-INT64_C(9223372036854775807) - 1)
#define INT64_MAX INT64_C(9223372036854775807)
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295u
#define UINT64_MAX UINT64_C(18446744073709551615)
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#define TK_INLINE static __device__ __forceinline__
"""

# integer atomics CUDA has natively, by IR op: (function, how the value is passed)
_NATIVE = {"add": "atomicAdd", "sub": "atomicSub", "min": "atomicMin", "max": "atomicMax",
           "and": "atomicAnd", "or": "atomicOr", "xor": "atomicXor", "exchange": "atomicExch"}


@lru_cache(maxsize=None)
def _float_atomics(native_f64_add: str = "__CUDA_ARCH__ >= 600") -> str:
    """Float atomics CUDA lacks, as compare-and-swap loops on the bits (global and shared
    memory alike: CUDA's atomics take generic pointers). ``native_f64_add``: the
    preprocessor condition under which ``atomicAdd(double *, double)`` exists (HIP: always)."""
    out = []
    for sfx, t, u, to_t, to_u in (("f32", "float", "unsigned int", "__uint_as_float", "__float_as_uint"),
                                  ("f64", "double", "unsigned long long", "__longlong_as_double",
                                   "(unsigned long long)__double_as_longlong")):
        q = f"{u} *q = ({u} *)p;"
        for op, cond, expr in (("min", "v < o", "v"), ("max", "v > o", "v")):
            # only a value that changes the cell is written: v < o (resp. >) means the min is v
            out.append(f"TK_INLINE {t} tk_atomic_{op}_{sfx}({t} *p, {t} v) {{ {q} {u} old = *q; "
                       f"while (1) {{ {t} o = {to_t}(old); if (!({cond})) return o; "
                       f"{u} prev = atomicCAS(q, old, {to_u}({expr})); if (prev == old) return o; old = prev; }} }}")
        out.append(f"TK_INLINE {t} tk_atomic_cas_{sfx}({t} *p, {t} e, {t} n) {{ {q} "
                   f"return {to_t}(atomicCAS(q, {to_u}(e), {to_u}(n))); }}")
        out.append(f"TK_INLINE {t} tk_atomic_exchange_{sfx}({t} *p, {t} v) {{ {q} "
                   f"return {to_t}(atomicExch(q, {to_u}(v))); }}")
    out.append("TK_INLINE double tk_atomic_add_f64(double *p, double v) {\n"
               f"#if {native_f64_add}\n    return atomicAdd(p, v);\n#else\n"
               "    unsigned long long *q = (unsigned long long *)p; unsigned long long old = *q, prev;\n"
               "    while (1) { double o = __longlong_as_double(old); prev = atomicCAS(q, old, "
               "(unsigned long long)__double_as_longlong(o + v)); if (prev == old) return o; old = prev; }\n"
               "#endif\n}")
    return "\n".join(out) + "\n"


@lru_cache(maxsize=None)
def _conversions() -> str:
    """``tk_f2{i,u}{32,64}_f{32,64}``: float to integer without undefined behaviour: PTX's
    ``cvt.rzi`` in inline assembly (truncation toward zero; a value beyond the range saturates)
    and a NaN gives 0. A C cast is undefined for a NaN or an out-of-range value (LLVM's
    ``fptosi`` gives poison), so NVVM dropped the guard in front of it:
    ``int32(v if v == v else 0.0)`` with a NaN ``v`` converted the NaN (seed 97001945);
    CUDA's ``__double2int_rz`` is the same ``fptosi`` to NVVM and does not help, and explicit
    range tests in C cost three compares and branches per conversion. The 8/16-bit types
    convert through int32 and wrap, as the CPU does.

    ``tk_neg_i16`` / ``tk_abs16_i16``: int16 negation and ``abs`` that ptxas 13.0 compiles
    correctly. It drops the sign extension after ``neg.s16`` and ``abs.s16``, so ``int32(-x)``
    of an int16 -32768 was 32768 (seed 97001581); the select, computed as an int, keeps NVVM
    from emitting either instruction. (What NVVM itself turns into a negation, such as
    ``~x + 1``, still meets the bug.)"""
    out = []
    for dst in ("int32", "uint32", "int64", "uint64"):
        bits = int(dst[-2:])
        r = "r" if bits == 32 else "l"
        for sfx, t, f in (("f32", "float", "f"), ("f64", "double", "d")):
            name = f"tk_f2{'u' if dst[0] == 'u' else 'i'}{bits}_{sfx}"
            cvt = f"cvt.rzi.{'u' if dst[0] == 'u' else 's'}{bits}.{sfx}"
            out.append(f"TK_INLINE {dst}_t {name}({t} x) {{ {dst}_t v; asm(\"{cvt} %0, %1;\" : \"={r}\"(v) : "
                       f"\"{f}\"(x)); return x != x ? ({dst}_t)0 : v; }}")
    # c ? a : b of two constants, one of them a zero, selected as bits in inline PTX: ptxas turns a
    # selp.f32 of a zero and +-1.0 into FSET.BF / I2F, which give +0.0 where the zero was -0.0
    # (seed 97001365), and NVVM folds any C spelling of the bit select back into that selp.f32
    for sfx, t, u, r, to_t, to_u in (("f32", "float", "unsigned int", "r", "__uint_as_float", "__float_as_uint"),
                                     ("f64", "double", "unsigned long long", "l", "__longlong_as_double",
                                      "(unsigned long long)__double_as_longlong")):
        b = sfx[1:]
        out.append(f"TK_INLINE {t} tk_selz_{sfx}(bool c, {t} a, {t} b) {{ {u} v; "
                   f"asm(\"{{ .reg .pred p; setp.ne.u32 p, %3, 0; selp.b{b} %0, %1, %2, p; }}\" : \"={r}\"(v) : "
                   f"\"{r}\"(({u}){to_u}(a)), \"{r}\"(({u}){to_u}(b)), \"r\"((unsigned int)c)); return {to_t}(v); }}")
    # the int16 value of -x, as an int: narrowed to int16_t, NVVM folds the select back into neg.s16
    out.append("TK_INLINE int32_t tk_neg_i16(int16_t x) { return x == INT16_MIN ? (int32_t)x : -(int32_t)x; }")
    out.append("TK_INLINE int32_t tk_abs16_i16(int16_t x) { return x == INT16_MIN ? (int32_t)x : "
               "x < 0 ? -(int32_t)x : (int32_t)x; }")                      # abs.s16: the same ptxas bug
    return "\n".join(out) + "\n"


@lru_cache(maxsize=None)
def _shuffles() -> str:
    """Overloads of the warp shuffles for every compute type (CUDA's take 32/64-bit values)."""
    out = []
    native = ["int", "unsigned int", "long long", "unsigned long long", "float", "double"]
    narrow = [("bool", "int"), ("int8_t", "int"), ("uint8_t", "unsigned int"), ("int16_t", "int"),
              ("uint16_t", "unsigned int")]
    for fn in ("down", "up", "idx"):
        cu = {"down": "__shfl_down_sync", "up": "__shfl_up_sync", "idx": "__shfl_sync"}[fn]
        for t in native:
            out.append(f"TK_INLINE {t} tk_shfl_{fn}(unsigned int m, {t} v, int o) {{ return {cu}(m, v, o); }}")
        for t, w in narrow:
            out.append(f"TK_INLINE {t} tk_shfl_{fn}(unsigned int m, {t} v, int o) "
                       f"{{ return ({t}){cu}(m, ({w})v, o); }}")
    return "\n".join(out) + "\n"


_DEBUG = """\
TK_INLINE int tk_oob(unsigned long long *err, long long line, long long arr, int nd, long long i0, long long n0,
                     long long i1, long long n1, long long i2, long long n2) {
    if (i0 >= 0 && i0 < n0 && i1 >= 0 && i1 < n1 && i2 >= 0 && i2 < n2) return 1;
    if (atomicCAS(err, 0ull, 1ull) == 0ull) {
        err[1] = (unsigned long long)line; err[2] = (unsigned long long)arr; err[3] = (unsigned long long)nd;
        err[4] = (unsigned long long)i0; err[5] = (unsigned long long)n0; err[6] = (unsigned long long)i1;
        err[7] = (unsigned long long)n1; err[8] = (unsigned long long)i2; err[9] = (unsigned long long)n2;
        __threadfence_system();
    }
    return 0;
}
"""


def _sub(comb: str, a: str, b: str) -> str:
    """The combine expression of ``acc`` and ``x`` (see collective_parts) applied to a, b."""
    s = re.sub(r"\bacc\b", "\x00A", comb)
    s = re.sub(r"\bx\b", "\x00B", s)
    return s.replace("\x00A", a).replace("\x00B", b)


class CUDARenderer(GPURenderer):
    """CUDA C++ (NVRTC) for ``tk.CUDA()``."""
    dot4_i8_fn = "tk_dp4a"
    kernel_qualifier = 'extern "C" __global__ void'
    global_space = ""
    local_space = "__shared__ "
    barrier_stmt = "__syncthreads();"
    oob_prefix = "tk_err, "
    print_formats = {"f": ("%g", "double"), "u": ("%llu", "unsigned long long"), "i": ("%lld", "long long")}
    warp = WARP                      # lanes per warp in the collectives (HIP: the wavefront, 64 or 32)
    mask_type = "unsigned int"       # the type of the lane masks the shuffles take

    #: CUDA's device printf takes at most 32 arguments after the format (more print garbage)
    printf_max_args = 32

    def __init__(self, kernel: N.Kernel, plan, ranges: int, items: int = 1):
        super().__init__(kernel, plan, ranges)
        self.items = items              # work items per thread (items_per_thread)

    def body(self) -> list:
        return super().body() if self.items == 1 else self.coarse_body()

    def coarse_body(self) -> list:
        """The kernel of a flat 1-D kernel whose threads run ``items`` work items each: a block
        covers ``items`` consecutive groups (virtual groups: tk.index(tk.Group) and the linear
        ids are the one-item-per-thread ones). One work item is a lambda (its locals fresh, a
        return ends it, the labels of inlined funcs once); a block entirely inside the ndrange
        calls it unrolled without bounds checks, so the loads of its items can be issued
        together, the last block checks each."""
        k, K, W = self.k, self.items, self.k.workgroup[0]
        self.lines, self.depth = [], 0
        self.w(f"{self.kernel_qualifier}{self.workgroup_attribute()} tk_kernel({', '.join(self.params())}) {{")
        self.depth = 1
        self.w(f"const tk_idx tk_l0 = (tk_idx)threadIdx.x, tk_ng0 = (tk_n0 + {W - 1}) / {W};")
        self.scalar_unpack()
        self.w("auto tk_item = [&](const tk_idx tk_gr0, const tk_idx tk_p0) {")
        self.depth += 1
        if self.ranges == 2:
            self.w("const long long tk_g0 = tk_s0 + (long long)tk_p0 * tk_st0;")
        elif self.ranges == 1:
            self.w("const long long tk_g0 = tk_s0 + (long long)tk_p0;")
        else:
            self.w("const tk_idx tk_g0 = tk_p0;")
        self.w("const tk_idx tk_gl = tk_p0, tk_ll = tk_l0, tk_grl = tk_gr0; const bool tk_in = true;")
        self.w("(void)tk_gl; (void)tk_ll; (void)tk_grl; (void)tk_in; (void)tk_ng0; (void)tk_g0;")
        for st in N.walk_stmts(k.body):
            if isinstance(st, N.AllocArray):
                self.w(f"{self.stype(st.array.dtype)} {self.array_ptr(st.array)}[{_prod(st.array.shape)}];")
        for v in sorted(k.locals):
            self.w(f"{self.ctype(k.locals[v])} {self.var(v)}{self.local_init()};")
        self.last_line = None
        self.stmts(k.body)
        self.depth -= 1
        self.w("};")
        first = f"((long long)blockIdx.x * {K} + tk_u) * {W} + (long long)tk_l0"
        self.w(f"if (((long long)blockIdx.x + 1) * {K * W} <= (long long)tk_n0) {{")
        self.w("    #pragma unroll")
        self.w(f"    for (int tk_u = 0; tk_u < {K}; ++tk_u) tk_item((tk_idx)blockIdx.x * {K} + tk_u, (tk_idx)({first}));")
        self.w("} else {")
        self.w(f"    for (int tk_u = 0; tk_u < {K}; ++tk_u) {{")
        self.w(f"        const long long tk_pw = {first};")
        self.w("        if (tk_pw >= (long long)tk_n0) break;")
        self.w(f"        tk_item((tk_idx)blockIdx.x * {K} + tk_u, (tk_idx)tk_pw);")
        self.w("    }")
        self.w("}")
        self.depth = 0
        self.w("}")
        return self.lines

    def print_call(self, fmt: str, args: list) -> None:
        """``printf`` calls of at most :attr:`printf_max_args` values each; the newline ends the
        last (a ``tk.print`` of more values is not one atomic write: other items' lines may
        land between its pieces)."""
        n = self.printf_max_args
        if len(args) <= n:
            return super().print_call(fmt, args)
        cuts = [m.start() for m in re.finditer(r"%%|%[a-z]+", fmt) if m.group() != "%%"]
        for c in range(0, len(args), n):
            lo = 0 if c == 0 else cuts[c]
            hi = cuts[c + n] if c + n < len(args) else len(fmt)
            end = "" if c + n < len(args) else "\\n"
            self.w(f'printf("{fmt[lo:hi]}{end}"{"".join(", " + a for a in args[c:c + n])});')

    def math_name(self, fn: str, d) -> str:
        name = super().math_name(fn, d)
        return "tk_" + name if fn in ("pow", "hypot") else name      # see _LIBM

    def lane_mask(self, n: int) -> str:
        """The literal mask of the ``n`` lowest lanes."""
        return f"{hex((1 << n) - 1)}u"

    # --- parameters (the runtime packs them in this order: see param_layout) ---------------

    def params(self) -> list:
        out = []
        for d in range(self.k.ndim):
            out += [f"long long tk_s{d}", f"tk_idx tk_n{d}", f"long long tk_st{d}"]
        for p in self.k.params:
            if p[0] == "array":
                a = p[1]
                name = f"a_{mangle(a.name)}"
                if a.const:
                    out.append(f"const {self.stype(a.dtype)} *__restrict__ {name}")
                else:
                    out.append(f"{self.stype(a.dtype)} *{name}")
                out += [f"tk_idx {name}_sh{d}" for d in range(a.ndim)]
                out += [f"tk_idx {name}_st{d}" for d in range(a.ndim)]
            elif p[0] == "scalar":
                out.append(f"{self.param_type(p[2])} {self.arg(p[1])}_in")
        if self.k.debug:
            out.append("unsigned long long *tk_err")
        return out

    def param_type(self, ty) -> str:
        return "uint8_t" if ty.dtype.kind == "b" else self.ctype(ty)

    # --- conversions and int16 negation (see _conversions) -----------------------------------

    safe_conversions = True          # HIP (clang, no ptxas) keeps the plain C of the base renderer

    def e_Cast(self, e):
        src, dst = e.a.ty.dtype, e.ty.dtype
        if self.safe_conversions and src.is_float and dst.kind in "iu":
            sfx = "f32" if self.compute_dtype(src).bits == 32 else "f64"
            wide = dst.name if dst.bits >= 32 else "int32"
            call = f"tk_f2{'u' if wide[0] == 'u' else 'i'}{wide[-2:]}_{sfx}({self.expr(e.a)})"
            return call if dst.bits >= 32 else f"(({self.ctype(e.ty)})({call}))"
        return super().e_Cast(e)

    def e_Select(self, e):
        d = e.ty.dtype
        consts = [x for x in (e.a, e.b) if isinstance(x, N.Const) and isinstance(x.value, (int, float))]
        if self.safe_conversions and d.is_float and len(consts) == 2 and any(x.value == 0 for x in consts):
            return f"tk_selz_{self.fsuffix(d)}({self.expr(e.cond)}, {self.expr(e.a)}, {self.expr(e.b)})"
        return super().e_Select(e)

    def e_Call(self, e):
        if self.safe_conversions and e.fn == "abs" and e.ty.dtype.name == "int16":
            return f"tk_abs16_i16({self.expr(e.args[0])})"
        return super().e_Call(e)

    def e_Unary(self, e):
        if self.safe_conversions and e.op == "-" and e.ty.dtype.name == "int16":
            return f"tk_neg_i16({self.expr(e.a)})"
        return super().e_Unary(e)

    def e_BinOp(self, e):
        if self.safe_conversions and e.ty.dtype.name == "int16":
            if e.op == "-" and isinstance(e.a, N.Const) and e.a.value == 0:
                return f"tk_neg_i16({self.expr(e.b)})"             # 0 - x is a negation to NVVM
            if e.op == "*":
                for c, x in ((e.a, e.b), (e.b, e.a)):
                    if isinstance(c, N.Const) and c.value == -1:
                        return f"tk_neg_i16({self.expr(x)})"
        return super().e_BinOp(e)

    # --- geometry: the last ndrange dimension on x -------------------------------------------

    def geometry(self) -> None:
        self.builtin_geometry("threadIdx", "blockIdx", "gridDim", "long long")

    def workgroup_attribute(self) -> str:
        return f" __launch_bounds__({_prod(self.k.workgroup)})"

    # --- atomics -------------------------------------------------------------------------------

    def atomic(self, e: N.Atomic) -> str:
        t = self.ctype(e.ty)
        elem = self.element(e.array, e.index)
        args = [f"({self.ctype(e.array.dtype)})({self.expr(a)})" for a in e.args]
        call = self.atomic_call(e, elem, args)
        chk = self.bounds_check(e.array, e.index, e.loc)
        return f"({chk} ? {call} : ({t})0)" if chk else call

    def atomic_call(self, e: N.Atomic, elem: str, args: list) -> str:
        """The atomic operation ``e`` on the element ``elem`` with the converted ``args``."""
        d = e.array.dtype
        t = self.ctype(e.ty)
        op = e.op
        if d.name in ("int32", "uint32"):
            call = f"atomicCAS(&{elem}, {args[0]}, {args[1]})" if op == "cas" else f"{_NATIVE[op]}(&{elem}, {args[0]})"
        elif d.name in ("int64", "uint64"):
            u = "unsigned long long"
            ref = f"({u} *)&{elem}"
            if op == "cas":
                call = f"atomicCAS({ref}, ({u}){args[0]}, ({u}){args[1]})"
            elif op == "sub":                      # no 64-bit atomicSub: add the two's complement
                call = f"atomicAdd({ref}, ({u})0 - ({u}){args[0]})"
            elif op in ("min", "max"):             # signedness matters: the long long overloads (sm_35+)
                cast = "long long" if d.kind == "i" else u
                call = f"{_NATIVE[op]}(({cast} *)&{elem}, ({cast}){args[0]})"
            else:
                call = f"{_NATIVE[op]}({ref}, ({u}){args[0]})"
            call = f"(({t})({call}))"
        elif d.name == "float32":
            if op == "add":
                call = f"atomicAdd(&{elem}, {args[0]})"
            elif op == "sub":                      # o + (-v) == o - v exactly in IEEE arithmetic
                call = f"atomicAdd(&{elem}, -({args[0]}))"
            elif op == "exchange":
                call = f"atomicExch(&{elem}, {args[0]})"
            else:
                call = f"tk_atomic_{op}_f32(&{elem}, {', '.join(args)})"
        elif d.name == "float64":
            if op == "sub":
                call = f"tk_atomic_add_f64(&{elem}, -({args[0]}))"
            else:
                call = f"tk_atomic_{op}_f64(&{elem}, {', '.join(args)})"
        else:  # the frontend refuses atomics on other dtypes; keep the error at compile time
            raise NotImplementedError(f"CUDA has no atomics on {d.name}")
        return call

    # --- group collectives: warp shuffles, then shared memory across warps -----------------

    def collective_parts(self, s: N.Collective) -> tuple:
        """As the base, with signed 32/64-bit add and mul wrapping through unsigned (signed
        overflow is undefined behaviour in CUDA C++; Python's integers here wrap)."""
        ident, comb = super().collective_parts(s)
        u = {"int32": "uint32_t", "int64": "uint64_t"}.get(s.ty.dtype.name)
        if u and s.op in ("add", "mul"):
            op = "+" if s.op == "add" else "*"
            comb = f"(({self.ctype(s.ty)})(({u})acc {op} ({u})x))"
        return ident, comb

    def s_Collective(self, s: N.Collective):
        t = self.ctype(s.ty)
        scr = self.scratch.setdefault(t, f"tk_scr{len(self.scratch)}")
        wg = _prod(self.k.workgroup)
        W = self.warp
        nw = -(-wg // W)
        last = wg - W * (nw - 1)                   # lanes of the last (maybe partial) warp
        ident, comb = self.collective_parts(s)
        ident = f"(({t})({ident}))"
        full = self.lane_mask(W)
        wmask = full if last == W else f"(tk_warp == {nw - 1} ? {self.lane_mask(last)} : {full})"
        wn = str(W) if last == W else f"(tk_warp == {nw - 1} ? {last} : {W})"
        width = min(wg, W)
        top = 1 << (width - 1).bit_length() - 1 if width > 1 else 0   # largest power of 2 < width
        self.w("{")
        self.depth += 1
        self.w(f"const int tk_lane = (int)(tk_ll & {W - 1}), tk_warp = (int)(tk_ll >> {W.bit_length() - 1}); "
               "(void)tk_warp;")
        self.w(f"const {self.mask_type} tk_wm = {wmask}; const int tk_wn = {wn}; (void)tk_wn;")
        first = f"({t})({self.var(s.src)})"
        if s.op in ("min", "max") and s.ty.dtype.is_float:     # a NaN operand changes nothing (as the
            first = _sub(comb, ident, first)                  # CPU's ident-first fold): fold it in
        self.w(f"{t} acc = tk_active ? {first} : {ident};")
        dst = self.var(s.dst)
        if s.kind == "reduce":
            if top:
                self.w(f"for (int o = {top}; o > 0; o >>= 1) {{ {t} x = tk_shfl_down(tk_wm, acc, o); "
                       f"if (tk_lane + o < tk_wn) acc = {comb}; }}")
            if nw == 1:
                self.w(f"{dst} = tk_shfl_idx(tk_wm, acc, 0);")
            else:
                top2 = 1 << (nw - 1).bit_length() - 1 if nw > 1 else 0
                self.w(f"if (tk_lane == 0) {scr}[tk_warp] = acc;")
                self.w(self.barrier_stmt)
                self.w(f"if (tk_warp == 0) {{ acc = tk_lane < {nw} ? {scr}[tk_lane] : {ident};")
                self.w(f"    for (int o = {top2}; o > 0; o >>= 1) {{ {t} x = tk_shfl_down({full}, acc, o); "
                       f"if (tk_lane + o < {nw}) acc = {comb}; }}")
                self.w(f"    if (tk_lane == 0) {scr}[{nw}] = acc; }}")
                self.w(self.barrier_stmt)
                self.w(f"{dst} = {scr}[{nw}];")
                self.w(self.barrier_stmt)
        else:
            if width > 1:
                self.w(f"for (int o = 1; o < {width}; o <<= 1) {{ {t} x = tk_shfl_up(tk_wm, acc, o); "
                       f"if (tk_lane >= o) acc = {_sub(comb, 'x', 'acc')}; }}")
            res = "acc"
            if s.kind == "exscan":
                self.w(f"{t} ex = tk_shfl_up(tk_wm, acc, 1); if (tk_lane == 0) ex = {ident};")
                res = "ex"
            if nw > 1:
                self.w(f"if (tk_lane == tk_wn - 1) {scr}[tk_warp] = acc;")
                self.w(self.barrier_stmt)
                self.w(f"if (tk_warp == 0) {{ {t} y = tk_lane < {nw} ? {scr}[tk_lane] : {ident};")
                self.w(f"    for (int o = 1; o < {nw}; o <<= 1) {{ {t} x = tk_shfl_up({full}, y, o); "
                       f"if (tk_lane >= o) y = {_sub(comb, 'x', 'y')}; }}")
                self.w(f"    if (tk_lane < {nw}) {scr}[tk_lane] = y; }}")
                self.w(self.barrier_stmt)
                self.w(f"if (tk_warp > 0) {{ {t} x = {scr}[tk_warp - 1]; {res} = {_sub(comb, 'x', res)}; }}")
                self.w(f"{dst} = {res};")
                self.w(self.barrier_stmt)
            else:
                self.w(f"{dst} = {res};")
        self.depth -= 1
        self.w("}")

    # --- whole translation unit -------------------------------------------------------------------

    def render(self) -> str:
        k = self.k
        body = self.body()
        text = "\n".join(body)
        if "tk_act[" not in text.replace("bool tk_act[", ""):       # the scaffold's mask array is unused here
            body = [ln for ln in body if not ln.strip().startswith(f"{self.local_space}bool tk_act[")]
        uses_coll = any(isinstance(s, N.Collective) for s in N.walk_stmts(k.body))
        return "\n".join(self.preamble(uses_coll)) + "\n" + "\n".join(body) + "\n"

    def preamble(self, uses_coll: bool) -> list:
        """The translation unit's text before the kernel: types, prelude, atomics, shuffles."""
        k = self.k
        fm = " (fastmath: compile with --fmad=true)" if k.fastmath else ""
        return [f"/* tinykernels: CUDA C++ for NVRTC, kernel {k.name}{fm} */", _HEADER,
                f"typedef {'int' if k.idx32 else 'long long'} tk_idx;",
                prelude(["base", "half", "bf16", "fp8", "intdiv", "floatdiv", "ipow", "philox"]), _DP4A, _LIBM,
                portable_helpers(True), _float_atomics(), _conversions(),
                _shuffles() if uses_coll else "",
                _DEBUG if k.debug else ""]


# libdevice's pow and hypot where they differ from NumPy's on an H200 (CUDA 13.0): pow is within
# its documented 2 ulp but not exact for a power of two raised to an integer (0.5 ** 4 gave
# 0.0625 - 1 ulp; NumPy, C and every other backend give the exact power); hypot(1, DBL_MAX) gave
# inf (a spurious overflow; so did hypot(0.25, DBL_MAX / 4)): computed as a * sqrt(1 + (b/a)^2) then.
_LIBM = r"""
TK_INLINE double tk_pow(double x, double y) {
    int e;
    if (x > 0.0 && frexp(x, &e) == 0.5 && y == rint(y) && fabs(y) < 4096.0)
        return ldexp(1.0, (int)((double)(e - 1) * y));          /* exact (or 0 / inf, as pow) */
    return pow(x, y);
}
TK_INLINE float tk_powf(float x, float y) {
    int e;
    if (x > 0.0f && frexpf(x, &e) == 0.5f && y == rintf(y) && fabsf(y) < 4096.0f)
        return ldexpf(1.0f, (int)((float)(e - 1) * y));
    return powf(x, y);
}
TK_INLINE double tk_hypot(double x, double y) {
    double h = hypot(x, y);
    if (isinf(h) && !isinf(x) && !isinf(y)) {                   /* a spurious overflow: a * sqrt(1 + r^2) */
        double a = fabs(x), b = fabs(y), t = a < b ? a : b;
        a = a < b ? b : a;
        t /= a;
        h = a * sqrt(1.0 + t * t);
    }
    return h;
}
TK_INLINE float tk_hypotf(float x, float y) {
    float h = hypotf(x, y);
    if (isinf(h) && !isinf(x) && !isinf(y)) {
        float a = fabsf(x), b = fabsf(y), t = a < b ? a : b;
        a = a < b ? b : a;
        t /= a;
        h = a * sqrtf(1.0f + t * t);
    }
    return h;
}
"""

# tk.dot4_i8 on CUDA: the dp4a instruction (sm_61 and newer), else the prelude's code
_DP4A = r"""
TK_INLINE int32_t tk_dp4a(int32_t a, int32_t b, int32_t c) {
#if __CUDA_ARCH__ >= 610
    return __dp4a(a, b, c);
#else
    return tk_dot4_i8(a, b, c);
#endif
}
"""


def param_layout(k: N.Kernel) -> list:
    """The kernel's parameters in order, as (kind, detail, C type) with kind one of
    ``start``/``count``/``step`` (detail: dimension), ``ptr`` (detail: ArrayInfo), ``shape``/
    ``stride`` (detail: (ArrayInfo, dim)), ``scalar`` (detail: (name, Ty)), ``err``.
    ``tk_idx`` entries are int32 when ``k.idx32`` else int64."""
    idx = "int32" if k.idx32 else "int64"
    out = []
    for d in range(k.ndim):
        out += [("start", d, "int64"), ("count", d, idx), ("step", d, "int64")]
    for p in k.params:
        if p[0] == "array":
            a = p[1]
            out.append(("ptr", a, "ptr"))
            out += [("shape", (a, d), idx) for d in range(a.ndim)]
            out += [("stride", (a, d), idx) for d in range(a.ndim)]
        elif p[0] == "scalar":
            dt = p[2].dtype
            c = "uint8" if dt.kind == "b" else ("float32" if dt.is_storage_only else dt.name)
            out.append(("scalar", (p[1], p[2]), c))
    if k.debug:
        out.append(("err", None, "ptr"))
    return out


def items_per_thread(kernel: N.Kernel, plan, requested: int) -> int:
    """The work items each CUDA thread runs: ``requested`` (``TK_CUDA_ITEMS``, experimental)
    for a flat 1-D kernel (no barrier, collective or local memory; not debug or
    unsafe_indices), else 1."""
    if requested <= 1 or plan is not None or kernel.ndim != 1 or kernel.debug or kernel.unsafe_indices:
        return 1
    if any(isinstance(s, N.AllocArray) and s.array.space == "local" for s in N.walk_stmts(kernel.body)):
        return 1
    return requested


def render_cuda(kernel: N.Kernel, plan, ranges: int, items: int = 1) -> tuple:
    """CUDA C++ source of a specialized kernel, and the debug array-name table (``items``: work
    items per thread, see :func:`items_per_thread`)."""
    r = CUDARenderer(kernel, plan, ranges, items)
    return r.render(), list(r.array_ids)


__all__ = ["CUDARenderer", "render_cuda", "param_layout", "items_per_thread"]
