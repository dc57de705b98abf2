"""Metal Shading Language (MSL 2.3+) from the shared SIMT scaffold.

* **Arguments.** Arrays are ``device T *`` buffers (``const device T *`` for ``tk.Const``) at
  ``[[buffer(1)]]`` upward; every scalar (launch geometry, shapes, strides, scalar arguments)
  is a field of one ``constant tk_args &`` struct at ``[[buffer(0)]]``, so a kernel with many
  arrays stays within Metal's 31 buffer slots. :func:`arg_fields` gives the struct's fields
  in order (natural C alignment: the runtime packs it with a NumPy aligned struct dtype).
* **Geometry.** The ndrange's last dimension is the threadgroup's x
  (``[[thread_position_in_threadgroup]]``, ``[[threadgroup_position_in_grid]]``), so
  ``A[i, j]`` with ``j`` fastest is coalesced; the runtime dispatches ``ceil(n / wg)``
  threadgroups per dimension and items past the ndrange are masked.
* **No goto.** MSL has no ``goto``: an early ``return`` inside a piece of a grouped kernel and
  the exit of an inlined ``@tk.func`` leave a one-pass ``do { ... } while (false)`` with
  ``break``, setting a flag that every loop in between tests after its closing brace.
* **Types.** No ``double``: ``supports(float64)`` is False, the SPEC's float32 default applies
  to Python floats, and a kernel that uses float64 is a ``CompileError`` at its line. 64-bit
  integers are ``long``/``ulong``. float16/bfloat16/fp8 are stored as integers and converted
  in software (the portable prelude), bit for bit like NumPy / ml_dtypes.
* **Math.** Metal's overloaded functions, compiled with fast math off by the runtime; the
  ones MSL lacks (``log1p``, ``expm1``, ``erf``, ``erfc``, ``hypot``) are helpers here.
* **Atomics.** ``atomic_fetch_*_explicit`` (relaxed) on ``atomic_int``/``atomic_uint`` views of
  int32/uint32 elements, in device or threadgroup memory; float32 atomics are compare-and-swap
  loops on the bits (``atomic_float`` is Metal 3 only and has no min/max). Metal has no
  portable 64-bit atomics: a CompileError.
* **Collectives.** SIMD-group functions (``simd_sum``, ``simd_max``, ...,
  ``simd_prefix_inclusive_sum``, ``simd_shuffle_up``) within each SIMD-group, threadgroup
  memory across SIMD-groups; masked items contribute the operation's identity.
* ``tk.print``: MSL has no ``printf``, so each call appends a record to a ``tk_print`` buffer
  of 32-bit words (the format of :mod:`.printrecords`, shared with WebGPU), which the runtime
  formats as the CPU's printf does once the kernel is done.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import dtypes as D
from ..errors import CompileError
from ..ir import nodes as N
from .clike import mangle, portable_helpers
from .gpu import GPURenderer, _prod
from .prelude import prelude
from .printrecords import PRINT_WORDS, record as print_record

#: the largest number of [[buffer(n)]] arguments a Metal kernel may take (0 .. 30)
MAX_BUFFERS = 31

_HEADER = """\
#include <metal_stdlib>
using namespace metal;
#define TK_NO_F64 1
#define TK_INLINE static inline
#ifndef tk_threadgroup
#define tk_threadgroup threadgroup
#endif
#ifndef INT64_C
#define INT64_C(x) (x##L)
#endif
#ifndef UINT64_C
#define UINT64_C(x) (x##UL)
#endif
#define TK_I8_MIN (-128)
#define TK_I8_MAX 127
#define TK_I16_MIN (-32768)
#define TK_I16_MAX 32767
#define TK_I32_MIN (-2147483647 - 1)
#define TK_I32_MAX 2147483647
#define TK_I64_MIN (-INT64_C(9223372036854775807) - 1)
#define TK_I64_MAX INT64_C(9223372036854775807)
#define TK_U8_MAX 255
#define TK_U16_MAX 65535
#define TK_U32_MAX 4294967295u
#define TK_U64_MAX UINT64_C(18446744073709551615)
#undef INT8_MIN
#undef INT8_MAX
#undef INT16_MIN
#undef INT16_MAX
#undef INT32_MIN
#undef INT32_MAX
#undef INT64_MIN
#undef INT64_MAX
#undef UINT8_MAX
#undef UINT16_MAX
#undef UINT32_MAX
#undef UINT64_MAX
#define INT8_MIN TK_I8_MIN
#define INT8_MAX TK_I8_MAX
#define INT16_MIN TK_I16_MIN
#define INT16_MAX TK_I16_MAX
#define INT32_MIN TK_I32_MIN
#define INT32_MAX TK_I32_MAX
#define INT64_MIN TK_I64_MIN
#define INT64_MAX TK_I64_MAX
#define UINT8_MAX TK_U8_MAX
#define UINT16_MAX TK_U16_MAX
#define UINT32_MAX TK_U32_MAX
#define UINT64_MAX TK_U64_MAX
#undef INFINITY
#undef NAN
#define INFINITY as_type<float>(0x7f800000u)
#define NAN as_type<float>(0x7fc00000u)
#define fmodf fmod
#define floorf floor
#define copysignf copysign
#define logf log
#define sqrtf sqrt
#define cosf cos
#define fabsf fabs
"""

# Functions MSL does not have, in float32 (the coefficients of erf/erfc are FreeBSD's s_erff.c,
# as in the WGSL renderer).
_PP = (1.2837916613e-01, -3.2504209876e-01, -2.8481749818e-02, -5.7702702470e-03, -2.3763017452e-05)
_QQ = (1.0, 3.9791721106e-01, 6.5022252500e-02, 5.0813062117e-03, 1.3249473704e-04, -3.9602282413e-06)
_PA = (-2.3621185683e-03, 4.1485610604e-01, -3.7220788002e-01, 3.1834661961e-01, -1.1089469492e-01,
       3.5478305072e-02, -2.1663755178e-03)
_QA = (1.0, 1.0642088205e-01, 5.4039794207e-01, 7.1828655899e-02, 1.2617121637e-01, 1.3637083583e-02,
       1.1984500103e-02)
_RA = (-9.8649440333e-03, -6.9385856390e-01, -1.0558626175e+01, -6.2375331879e+01, -1.6239666748e+02,
       -1.8460508728e+02, -8.1287437439e+01, -9.8143291473e+00)
_SA = (1.0, 1.9651271820e+01, 1.3765776062e+02, 4.3456588745e+02, 6.4538726807e+02, 4.2900814819e+02,
       1.0863500214e+02, 6.5702495575e+00, -6.0424413532e-02)
_RB = (-9.8649431020e-03, -7.9928326607e-01, -1.7757955551e+01, -1.6063638306e+02, -6.3756646729e+02,
       -1.0250950928e+03, -4.8351919556e+02)
_SB = (1.0, 3.0338060379e+01, 3.2579251099e+02, 1.5367296143e+03, 3.1998581543e+03, 2.5530502930e+03,
       4.7452853394e+02, -2.2440952301e+01)


def _lit(x: float) -> str:
    """A float32 literal that round-trips (decimal: MSL is C++14, hex float literals are C++17)."""
    with np.errstate(over="ignore"):
        v = float(np.float32(x))
    if math.isnan(v):                    # the sign of a NaN shows in copysign
        return "(-NAN)" if math.copysign(1, v) < 0 else "NAN"
    if math.isinf(v):
        return "(-INFINITY)" if v < 0 else "INFINITY"
    s = f"{v:.9g}"
    if "e" not in s and "." not in s and "n" not in s:
        s += ".0"
    return s + "f"


def _poly(var: str, coefs) -> str:
    out = _lit(coefs[-1])
    for c in reversed(coefs[:-1]):
        out = f"({_lit(c)} + {var} * {out})"
    return out


@lru_cache(maxsize=None)
def _math() -> str:
    return f"""\
TK_INLINE float tk_log1p(float x) {{      /* log(1+x) with the rounding error of 1+x corrected */
    float u = 1.0f + x;
    if (u == 1.0f) return x;
    if (isinf(u) || u <= 0.0f) return log(u);
    return log(u) * (x / (u - 1.0f));
}}
TK_INLINE float tk_expm1(float x) {{      /* exp(x)-1 with the rounding error of exp corrected */
    if (fabs(x) < 1e-5f) return x + 0.5f * x * x;
    float u = exp(x);
    if (u == 1.0f) return x;
    float um1 = u - 1.0f;
    if (um1 == -1.0f) return -1.0f;
    if (isinf(u)) return u;
    return um1 * (x / log(u));
}}
TK_INLINE float tk_hypot(float x, float y) {{
    float a = fabs(x), b = fabs(y);
    if (isinf(a) || isinf(b)) return INFINITY;
    if (isnan(a) || isnan(b)) return NAN;
    if (a < b) {{ float t = a; a = b; b = t; }}
    if (b == 0.0f) return a;
    float s = 1.0f;
    if (a > {_lit(2.0**60)}) {{ s = {_lit(2.0**70)}; a *= {_lit(2.0**-70)}; b *= {_lit(2.0**-70)}; }}
    else if (a < {_lit(2.0**-60)}) {{ s = {_lit(2.0**-100)}; a *= {_lit(2.0**100)}; b *= {_lit(2.0**100)}; }}
    return sqrt(a * a + b * b) * s;
}}
TK_INLINE float tk_erf_small(float x) {{ float z = x * x; return {_poly("z", _PP)} / {_poly("z", _QQ)}; }}
TK_INLINE float tk_erf_mid(float x) {{ float s = fabs(x) - 1.0f; return {_poly("s", _PA)} / {_poly("s", _QA)}; }}
TK_INLINE float tk_erfc_tail(float x0) {{
    float x = fabs(x0), s = 1.0f / (x * x), R, S;
    if (as_type<int>(x) < 0x4036db6e) {{ R = {_poly("s", _RA)}; S = {_poly("s", _SA)}; }}
    else {{ R = {_poly("s", _RB)}; S = {_poly("s", _SB)}; }}
    float z = as_type<float>(as_type<uint>(x) & 0xffffe000u);
    return exp(-z * z - 0.5625f) * exp((z - x) * (z + x) + R / S) / x;
}}
TK_INLINE float tk_erf(float x) {{
    int hx = as_type<int>(x), ix = hx & 0x7fffffff;
    if (ix >= 0x7f800000) return ix > 0x7f800000 ? x : (hx < 0 ? -1.0f : 1.0f);
    if (ix < 0x3f580000) return ix < 0x31800000 ? x + {_lit(1.2837916613e-01)} * x : x + x * tk_erf_small(x);
    if (ix < 0x3fa00000) {{ float v = {_lit(8.4506291151e-01)} + tk_erf_mid(x); return hx < 0 ? -v : v; }}
    if (ix >= 0x40c00000) return hx < 0 ? -1.0f : 1.0f;
    float v = 1.0f - tk_erfc_tail(x);
    return hx < 0 ? -v : v;
}}
TK_INLINE float tk_erfc(float x) {{
    int hx = as_type<int>(x), ix = hx & 0x7fffffff;
    if (ix >= 0x7f800000) return ix > 0x7f800000 ? x : (hx < 0 ? 2.0f : 0.0f);
    if (ix < 0x3f580000) {{
        if (ix < 0x23800000) return 1.0f - x;
        float y = tk_erf_small(x);
        if (hx < 0x3e800000) return 1.0f - (x + x * y);
        return 0.5f - (x * y + (x - 0.5f));
    }}
    if (ix < 0x3fa00000) {{
        float pq = tk_erf_mid(x);
        return hx >= 0 ? (1.0f - {_lit(8.4506291151e-01)}) - pq : 1.0f + ({_lit(8.4506291151e-01)} + pq);
    }}
    if (ix < 0x41e00000) {{
        if (hx < 0 && ix >= 0x40c00000) return 2.0f;
        float r = tk_erfc_tail(x);
        return hx > 0 ? r : 2.0f - r;
    }}
    return hx < 0 ? 2.0f : 0.0f;
}}
"""


#: MSL's atomic functions by IR op (int32/uint32)
_INT_ATOMIC = {"add": "atomic_fetch_add_explicit", "sub": "atomic_fetch_sub_explicit",
               "min": "atomic_fetch_min_explicit", "max": "atomic_fetch_max_explicit",
               "and": "atomic_fetch_and_explicit", "or": "atomic_fetch_or_explicit",
               "xor": "atomic_fetch_xor_explicit", "exchange": "atomic_exchange_explicit"}


@lru_cache(maxsize=None)
def _atomics() -> str:
    """Compare-and-swap (returning the old value) for int32/uint32, and float32 atomics as
    compare-and-swap loops on the bits; for device (``_g``) and threadgroup (``_l``) memory."""
    out = []
    for sp, space in (("g", "device"), ("l", "threadgroup")):
        for sfx, t, at in (("i32", "int", "atomic_int"), ("u32", "uint", "atomic_uint")):
            out.append(f"TK_INLINE {t} tk_atomic_cas_{sfx}_{sp}(volatile {space} {at} *p, {t} e, {t} n) {{ "
                       f"{t} x = e; while (!atomic_compare_exchange_weak_explicit(p, &x, n, memory_order_relaxed, "
                       f"memory_order_relaxed)) {{ if (x != e) return x; x = e; }} return e; }}")
        q = f"volatile {space} atomic_uint *q = (volatile {space} atomic_uint *)p;"
        for op, expr in (("add", "o + v"), ("sub", "o - v"), ("min", "(v < o ? v : o)"),
                         ("max", "(v > o ? v : o)"), ("exchange", "v")):
            out.append(f"TK_INLINE float tk_atomic_{op}_f32_{sp}({space} float *p, float v) {{ {q} "
                       f"uint old = atomic_load_explicit(q, memory_order_relaxed); while (true) {{ "
                       f"float o = as_type<float>(old); "
                       f"if (atomic_compare_exchange_weak_explicit(q, &old, as_type<uint>({expr}), "
                       f"memory_order_relaxed, memory_order_relaxed)) return o; }} }}")
        out.append(f"TK_INLINE float tk_atomic_cas_f32_{sp}({space} float *p, float e, float n) {{ {q} "
                   f"uint x = as_type<uint>(e); while (!atomic_compare_exchange_weak_explicit(q, &x, as_type<uint>(n), "
                   f"memory_order_relaxed, memory_order_relaxed)) {{ if (x != as_type<uint>(e)) "
                   f"return as_type<float>(x); x = as_type<uint>(e); }} return e; }}")
    return "\n".join(out) + "\n"


_DEBUG = """\
TK_INLINE int tk_oob(device long *err, long line, long arr, int nd, long i0, long n0, long i1, long n1,
                     long i2, long n2) {
    if (i0 >= 0 && i0 < n0 && i1 >= 0 && i1 < n1 && i2 >= 0 && i2 < n2) return 1;
    int zero = 0;
    if (atomic_compare_exchange_weak_explicit((device atomic_int *)err, &zero, 1, memory_order_relaxed,
                                              memory_order_relaxed)) {
        err[1] = line; err[2] = arr; err[3] = nd; err[4] = i0; err[5] = n0; err[6] = i1; err[7] = n1;
        err[8] = i2; err[9] = n2;
    }
    return 0;
}
"""

#: the SIMD-group reductions of MSL, by IR op, and the types they take (besides float)
_SIMD_REDUCE = {"add": "simd_sum", "mul": "simd_product", "min": "simd_min", "max": "simd_max",
                "and": "simd_and", "or": "simd_or"}


def _error(k: N.Kernel, msg: str, loc) -> CompileError:
    """A CompileError at ``loc`` (with its source line), or in the kernel's file."""
    return N.error_at(msg, loc, k.name, k.file)


_NO_F64 = "Metal has no float64 (double); use float32 (Python floats are float32 on Metal)"


def _first_use(k: N.Kernel, name: str):
    """The Loc of the first statement that uses array or scalar argument ``name`` (its load,
    store or atomic; its read), so that an unsupported argument is reported at a line as WebGPU
    reports it (until user22 Metal named only the file); None when the body never uses it."""
    for s in N.walk_stmts(k.body):
        if getattr(s, "array", None) is not None and s.array.name == name:
            return s.loc
        for e in N.stmt_exprs(s):
            for x in N.walk_expr(e):
                if (isinstance(x, (N.Load, N.Atomic)) and x.array.name == name) or \
                        (isinstance(x, N.Arg) and getattr(x, "name", None) == name):
                    return x.loc if x.loc is not None else s.loc
    return None


def check_support(k: N.Kernel) -> None:
    """Raise CompileError at the first use of what Metal lacks: float64 (values, arrays,
    locals) and atomics other than int32/uint32/float32."""
    for p in k.params:
        if p[0] == "array" and p[1].dtype == D.float64:
            raise _error(k, f"array '{p[1].name}' is float64: {_NO_F64}", _first_use(k, p[1].name))
        if p[0] == "scalar" and p[2].dtype == D.float64:
            raise _error(k, f"argument '{p[1]}' is float64: {_NO_F64} (pass a Python float or np.float32)",
                         _first_use(k, p[1]))

    def expr(e) -> None:
        for x in N.walk_expr(e):
            if x.ty is not None and x.ty.dtype == D.float64:
                raise _error(k, _NO_F64, x.loc)
            if isinstance(x, N.Atomic) and x.array.dtype.name not in ("int32", "uint32", "float32"):
                raise _error(k, f"Metal has no atomics on {x.array.dtype.name} (int32, uint32 and float32 only)",
                             x.loc)

    for s in N.walk_stmts(k.body):
        if isinstance(s, N.AllocArray) and s.array.dtype == D.float64:
            raise _error(k, f"{s.array.space} array of float64: {_NO_F64}", s.loc)
        if isinstance(s, N.Collective) and s.ty.dtype == D.float64:
            raise _error(k, _NO_F64, s.loc)
        if isinstance(s, (N.Assign, N.For)) and k.locals.get(s.var) is not None \
                and k.locals[s.var].dtype == D.float64:
            raise _error(k, f"local '{s.var}' is float64: {_NO_F64}", s.loc)
        for e in N.stmt_exprs(s):
            expr(e)
    for v, t in k.locals.items():
        if t.dtype == D.float64:
            raise _error(k, f"local '{v}' is float64: {_NO_F64}", None)


def _sub(comb: str, a: str, b: str) -> str:
    from .cuda import _sub as sub
    return sub(comb, a, b)


class MetalRenderer(GPURenderer):
    """Metal Shading Language for ``tk.Metal()``."""
    kernel_qualifier = "kernel void"
    global_space = "device "
    local_space = "tk_threadgroup "      # kernel-scope threadgroup declarations (see _HEADER)
    barrier_stmt = "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);"
    oob_prefix = "tk_err, "
    storage_types = dict(GPURenderer.storage_types, float64="double")

    def __init__(self, kernel: N.Kernel, plan, ranges: int):
        super().__init__(kernel, plan, ranges)
        self.scopes: list = []
        self.flags: list = []
        self.prints: list = []              # tk.print sites in render order (printrecords.record)

    # --- what Metal does not have -------------------------------------------------------------

    def _refuse(self, msg: str, loc) -> CompileError:
        return _error(self.k, msg, loc)

    def s_Print(self, s):
        """``tk.print``: one record in the ``tk_print`` buffer (:mod:`.printrecords`): reserve the
        words with an atomic add on word 0, then store the site's number and the values' words
        (a record that does not fit is not written; the count still grows)."""
        temps = []

        def value_words(kind: str, p) -> list:
            e = self.expr(p)
            if kind == "b":
                return [f"(({e}) ? 1u : 0u)"]
            if kind == "f":
                return [f"as_type<uint>((float)({e}))"]
            if kind in ("U", "I"):
                v = self.fresh("pv")
                temps.append(f"ulong {v} = (ulong)({e});")
                return [f"(uint){v}", f"(uint)({v} >> 32)"]
            return [f"(uint)({e})"]
        site, words = print_record(s.parts, value_words)
        self.prints.append(site)
        site = len(self.prints) - 1
        n = 1 + len(words)
        t = self.fresh("pr")
        self.w("{ " + " ".join(temps))
        self.w(f"  uint {t} = atomic_fetch_add_explicit((volatile device atomic_uint *)tk_print, {n}u, "
               f"memory_order_relaxed) + 1u;")
        self.w(f"  if ({t} <= {PRINT_WORDS - n}u) {{")
        self.w(f"    tk_print[{t}] = {site + 1}u;")
        for j, wexpr in enumerate(words):
            self.w(f"    tk_print[{t} + {j + 1}u] = {wexpr};")
        self.w("  } }")

    # --- constants and math ---------------------------------------------------------------------

    def const(self, value, t):
        d = t.dtype
        if d.is_float:
            v = float(value)
            if v == 0:
                return "-0.0f" if math.copysign(1, v) < 0 else "0.0f"
            return _lit(v)
        return super().const(value, t)

    def math_name(self, fn: str, d) -> str:
        if fn in ("log1p", "expm1", "erf", "erfc", "hypot"):
            return "tk_" + fn
        return fn                                   # MSL's math functions are overloaded

    # --- parameters: one constant struct and the array buffers ---------------------------------

    def params(self) -> list:
        out = ["constant tk_args &tk_a [[buffer(0)]]"]
        b = 1
        for p in self.k.params:
            if p[0] == "array":
                a = p[1]
                const = "const " if a.const else ""
                out.append(f"{const}device {self.stype(a.dtype)} *a_{mangle(a.name)} [[buffer({b})]]")
                b += 1
        if self.k.debug:
            out.append(f"device long *tk_err [[buffer({b})]]")
            b += 1
        if has_prints(self.k):
            out.append(f"device uint *tk_print [[buffer({b})]]")
            b += 1
        if b > MAX_BUFFERS:
            raise CompileError(f"kernel '{self.k.name}' needs {b} Metal buffer arguments but Metal allows "
                               f"{MAX_BUFFERS} (arrays, plus one for the scalars)", self.k.file, None,
                               kernel=self.k.name)
        out += ["uint3 tk_tid [[thread_position_in_threadgroup]]",
                "uint3 tk_tgid [[threadgroup_position_in_grid]]",
                "uint3 tk_ntg [[threadgroups_per_grid]]"]
        if any(isinstance(s, N.Collective) for s in N.walk_stmts(self.k.body)):
            out += ["uint tk_lane [[thread_index_in_simdgroup]]",
                    "uint tk_sg [[simdgroup_index_in_threadgroup]]",
                    "uint tk_sw [[threads_per_simdgroup]]"]
        return out

    def struct(self) -> str:
        fields = [f"    {c} {name};" for name, c, _ in arg_fields(self.k, self)]
        return "struct tk_args {\n" + "\n".join(fields or ["    int tk_unused;"]) + "\n};\n"

    def scalar_unpack(self) -> None:
        for p in self.k.params:
            if p[0] == "array":
                a = p[1]
                name = f"a_{mangle(a.name)}"
                for d in range(a.ndim):
                    self.w(f"const tk_idx {name}_sh{d} = tk_a.{name}_sh{d}; (void){name}_sh{d};")
                    self.w(f"const tk_idx {name}_st{d} = tk_a.{name}_st{d}; (void){name}_st{d};")
            elif p[0] == "scalar":
                n = self.arg(p[1])
                self.w(f"const {self.ctype(p[2])} {n} = ({self.ctype(p[2])})tk_a.{n}_in;")

    def param_type(self, ty) -> str:
        return "uint8_t" if ty.dtype.kind == "b" else self.ctype(ty)

    # --- geometry: the last ndrange dimension on x ------------------------------------------------

    def geometry(self) -> None:
        for d in range(self.k.ndim):
            self.w(f"const long tk_s{d} = tk_a.tk_s{d}, tk_st{d} = tk_a.tk_st{d}; const tk_idx tk_n{d} = tk_a.tk_n{d};")
            self.w(f"(void)tk_s{d}; (void)tk_st{d};")
        self.builtin_geometry("tk_tid", "tk_tgid", "tk_ntg", "long")

    def workgroup_attribute(self) -> str:
        return ""

    # --- atomics -------------------------------------------------------------------------------

    def atomic(self, e: N.Atomic) -> str:
        d = e.array.dtype
        sp, space = ("l", "threadgroup") if e.array.space == "local" else ("g", "device")
        elem = f"&{self.element(e.array, e.index)}"
        args = [f"({self.ctype(d)})({self.expr(a)})" for a in e.args]
        if d.name in ("int32", "uint32"):
            at = "atomic_int" if d.kind == "i" else "atomic_uint"
            ptr = f"(volatile {space} {at} *){elem}"
            if e.op == "cas":
                call = f"tk_atomic_cas_{self.fsuffix(d)}_{sp}({ptr}, {args[0]}, {args[1]})"
            else:
                call = f"{_INT_ATOMIC[e.op]}({ptr}, {args[0]}, memory_order_relaxed)"
        elif d.name == "float32":
            call = f"tk_atomic_{e.op}_f32_{sp}({elem}, {', '.join(args)})"
        else:
            raise self._refuse(f"Metal has no atomics on {d.name} (int32, uint32 and float32 only)", e.loc)
        chk = self.bounds_check(e.array, e.index, e.loc)
        return f"({chk} ? {call} : ({self.ctype(e.ty)})0)" if chk else call

    # --- control flow without goto ---------------------------------------------------------------

    def _open(self, kind: str, label=None) -> dict:
        sc = {"kind": kind, "label": label, "crossing": []}
        self.scopes.append(sc)
        return sc

    def _close(self, sc: dict) -> None:
        """After a construct's closing brace: leave the enclosing constructs too, for every exit
        that went through this one."""
        self.scopes.pop()
        for target in sc["crossing"]:
            self.w(f"if ({self._flag(target)}) break;")
            if self.scopes and self.scopes[-1] is not target and target not in self.scopes[-1]["crossing"]:
                self.scopes[-1]["crossing"].append(target)

    @staticmethod
    def _flag(target: dict) -> str:
        return "!tk_active" if target["kind"] == "item" else f"tk_fx_{mangle(target['label'])}"

    def _exit_to(self, target: dict) -> None:
        inner = self.scopes[-1]
        if target["kind"] == "item":
            self.w("tk_active = false;")
        elif inner is not target:
            self.w(f"{self._flag(target)} = true;")
        if inner is not target and target not in inner["crossing"]:
            inner["crossing"].append(target)
        self.w("break;")

    def s_Return(self, s):
        target = next((sc for sc in reversed(self.scopes) if sc["kind"] == "item"), None)
        if self.plan is None or target is None:
            self.w("return;")
        else:
            self._exit_to(target)

    def s_FuncExit(self, s):
        self._exit_to(next(sc for sc in reversed(self.scopes) if sc["kind"] == "func" and sc["label"] == s.label))

    def s_FuncBlock(self, s):
        flag = f"tk_fx_{mangle(s.label)}"
        if flag not in self.flags:
            self.flags.append(flag)
        self.w(f"{flag} = false;")
        self.w("do {")
        sc = self._open("func", s.label)
        self.block(s.body)
        self.w("} while (false);")
        self._close(sc)

    def s_ItemLoop(self, s):
        exits = any(isinstance(x, (N.Return, N.FuncExit)) for x in N.walk_stmts(s.body))
        self.w("if (tk_active) {")
        if exits:
            self.depth += 1
            self.w("do {")
            sc = self._open("item", s.label)
            self.block(s.body)
            self.w("} while (false);")
            self._close(sc)
            self.depth -= 1
        else:
            self.block(s.body)
        self.w("}")

    def s_For(self, s):
        sc = self._open("loop")
        super().s_For(s)
        self._close(sc)

    def s_While(self, s):
        sc = self._open("loop")
        super().s_While(s)
        self._close(sc)

    # --- group collectives: SIMD-group functions, threadgroup memory across SIMD-groups --------

    def _simd_type(self, t: str) -> bool:
        return t in ("float", "int32_t", "uint32_t")

    def s_Collective(self, s: N.Collective):
        t = self.ctype(s.ty)
        scr = self.scratch.setdefault(t, f"tk_scr{len(self.scratch)}")
        wg = _prod(self.k.workgroup)
        ident, comb = self.collective_parts(s)
        ident = f"(({t})({ident}))"
        dst = self.var(s.dst)
        native = self._simd_type(t) and s.op in _SIMD_REDUCE and not (s.op == "mul" and t != "float") \
            and not (s.op in ("and", "or") and t == "float")       # simd_and/simd_or: integers only
        wrap = t == "int32_t" and s.op in ("add", "mul")      # signed wrap-around: in uint
        self.w("{")
        self.depth += 1
        self.w(f"const uint tk_nsg = ({wg}u + tk_sw - 1u) / tk_sw;")
        self.w(f"const uint tk_wn = min(tk_sw, {wg}u - tk_sg * tk_sw); (void)tk_wn;")
        self.w(f"{t} acc = tk_active ? ({t})({self.var(s.src)}) : {ident};")
        if s.kind == "reduce":
            if native:
                fn = _SIMD_REDUCE[s.op]
                self.w(f"acc = ({t}){fn}((uint32_t)acc);" if wrap else f"acc = {fn}(acc);")
            else:
                self._scan_in_simdgroup(t, comb)
                self.w("acc = tk_shfl(acc, tk_wn - 1u);")
            self.w(f"if (tk_lane == 0u) {scr}[tk_sg] = acc;")
            self.w(self.barrier_stmt)
            self.w(f"if (tk_ll == 0) {{ {t} y = {scr}[0]; for (uint k = 1u; k < tk_nsg; ++k) {{ {t} x = {scr}[k]; "
                   f"y = {_sub(comb, 'y', 'x')}; }} {scr}[{wg}] = y; }}")
            self.w(self.barrier_stmt)
            self.w(f"{dst} = {scr}[{wg}];")
            self.w(self.barrier_stmt)
        else:
            if native and s.op == "add" and s.kind == "scan":
                self.w("acc = (int32_t)simd_prefix_inclusive_sum((uint32_t)acc);" if wrap
                       else "acc = simd_prefix_inclusive_sum(acc);")
            elif native and s.op == "mul" and s.kind == "scan":
                self.w("acc = simd_prefix_inclusive_product(acc);")
            else:
                self._scan_in_simdgroup(t, comb)
            res = "acc"
            if s.kind == "exscan":
                self.w(f"{t} ex = tk_shfl_up(acc, 1u); if (tk_lane == 0u) ex = {ident};")
                res = "ex"
            self.w(f"if (tk_lane == tk_wn - 1u) {scr}[tk_sg] = acc;")
            self.w(self.barrier_stmt)
            self.w(f"if (tk_ll == 0) {{ {t} y = {ident}; for (uint k = 0u; k < tk_nsg; ++k) {{ {t} x = {scr}[k]; "
                   f"{scr}[k] = y; y = {_sub(comb, 'y', 'x')}; }} }}")
            self.w(self.barrier_stmt)
            self.w(f"{{ {t} x = {scr}[tk_sg]; {dst} = {_sub(comb, 'x', res)}; }}")
            self.w(self.barrier_stmt)
        self.depth -= 1
        self.w("}")

    def _scan_in_simdgroup(self, t: str, comb: str) -> None:
        """Inclusive scan of ``acc`` over the lanes of each SIMD-group (Hillis-Steele)."""
        self.w(f"for (uint o = 1u; o < tk_sw; o <<= 1) {{ {t} x = tk_shfl_up(acc, o); "
               f"if (tk_lane >= o) acc = {_sub(comb, 'x', 'acc')}; }}")

    def collective_parts(self, s: N.Collective) -> tuple:
        ident, comb = super().collective_parts(s)
        u = {"int32": "uint32_t", "int64": "uint64_t"}.get(s.ty.dtype.name)
        if u and s.op in ("add", "mul"):
            op = "+" if s.op == "add" else "*"
            comb = f"(({self.ctype(s.ty)})(({u})acc {op} ({u})x))"
        return ident, comb

    # --- whole translation unit ---------------------------------------------------------------------

    def render(self) -> str:
        k = self.k
        check_support(k)
        body = self.body()
        text = "\n".join(body)
        if "tk_act[" not in text.replace("bool tk_act[", ""):       # the scaffold's mask array is unused
            body = [ln for ln in body if not ln.strip().startswith(f"{self.local_space}bool tk_act[")]
        if self.flags:
            at = next(i for i, ln in enumerate(body) if ln.strip().startswith("bool tk_active") or
                      ln.strip() == "if (!tk_in) return;")
            body[at:at] = [f"    bool {f} = false;" for f in self.flags]
        uses_coll = any(isinstance(s, N.Collective) for s in N.walk_stmts(k.body))
        fm = " (fastmath)" if k.fastmath else ""
        head = [f"/* tinykernels: Metal Shading Language, kernel {k.name}{fm} */", _HEADER,
                f"typedef {'int' if k.idx32 else 'long'} tk_idx;", _prelude(),
                portable_helpers(False), _math(), _atomics(), _shuffles() if uses_coll else "",
                _DEBUG if k.debug else "", self.struct()]
        return "\n".join(head) + "\n" + "\n".join(body) + "\n"


_UNION_BITS = ("union { float f; uint32_t u; } c;\n    c.f = f;\n    return c.u;",
               "union { float f; uint32_t u; } c;\n    c.u = u;\n    return c.f;")


@lru_cache(maxsize=None)
def _prelude() -> str:
    """The portable prelude, with its float bit casts through ``as_type`` (MSL's bit cast)
    instead of unions."""
    text = prelude(["base", "half", "bf16", "fp8", "intdiv", "floatdiv", "ipow", "philox"])
    for old, new in zip(_UNION_BITS, ("return as_type<uint32_t>(f);", "return as_type<float>(u);")):
        if old not in text:
            raise AssertionError("the prelude's bit casts changed: update codegen/metal.py")
        text = text.replace(old, new)
    return text


@lru_cache(maxsize=None)
def _shuffles() -> str:
    """``tk_shfl``/``tk_shfl_up`` for every compute type: MSL's shuffles take 32-bit and
    smaller scalars; 64-bit values go as two 32-bit halves, bool as uint."""
    out = []
    for fn, msl in (("tk_shfl", "simd_shuffle"), ("tk_shfl_up", "simd_shuffle_up")):
        for t in ("int", "uint", "float", "short", "ushort", "char", "uchar"):
            out.append(f"TK_INLINE {t} {fn}({t} v, uint o) {{ return {msl}(v, (ushort)o); }}")
        out.append(f"TK_INLINE bool {fn}(bool v, uint o) {{ return {msl}((uint)v, (ushort)o) != 0u; }}")
        for t, u in (("long", "ulong"), ("ulong", "ulong")):
            out.append(f"TK_INLINE {t} {fn}({t} v, uint o) {{ ulong w = (ulong)v; "
                       f"uint lo = {msl}((uint)w, (ushort)o), hi = {msl}((uint)(w >> 32), (ushort)o); "
                       f"return ({t})(((ulong)hi << 32) | (ulong)lo); }}")
    return "\n".join(out) + "\n"


def arg_fields(k: N.Kernel, r: MetalRenderer | None = None) -> list:
    """The fields of the ``tk_args`` struct in order, as (field name, MSL type, source) with
    source one of ("start" | "count" | "step", dim), ("shape" | "stride", ArrayInfo, dim),
    ("scalar", name, Ty). ``tk_idx`` fields are int32 when ``k.idx32`` else int64."""
    idx = "int" if k.idx32 else "long"
    r = r or MetalRenderer(k, None, 0)
    out = []
    for d in range(k.ndim):
        out += [(f"tk_s{d}", "long", ("start", d)), (f"tk_n{d}", idx, ("count", d)),
                (f"tk_st{d}", "long", ("step", d))]
    for p in k.params:
        if p[0] == "array":
            a = p[1]
            name = f"a_{mangle(a.name)}"
            out += [(f"{name}_sh{d}", idx, ("shape", a, d)) for d in range(a.ndim)]
            out += [(f"{name}_st{d}", idx, ("stride", a, d)) for d in range(a.ndim)]
        elif p[0] == "scalar":
            out.append((f"{r.arg(p[1])}_in", r.param_type(p[2]), ("scalar", p[1], p[2])))
    return out


#: MSL scalar type -> NumPy dtype (the host side of the tk_args struct)
NUMPY_OF = {"long": np.int64, "int": np.int32, "float": np.float32, "uint8_t": np.uint8, "int8_t": np.int8,
            "int16_t": np.int16, "uint16_t": np.uint16, "int32_t": np.int32, "uint32_t": np.uint32,
            "int64_t": np.int64, "uint64_t": np.uint64}


def has_prints(k: N.Kernel) -> bool:
    """Whether the kernel calls ``tk.print`` (it then takes the ``tk_print`` buffer after the
    arrays and the debug buffer)."""
    return any(isinstance(s, N.Print) for s in N.walk_stmts(k.body))


def render_metal(kernel: N.Kernel, plan, ranges: int) -> tuple:
    """MSL source of a specialized kernel, the debug array-name table and the ``tk.print``
    sites (:mod:`.printrecords`)."""
    r = MetalRenderer(kernel, plan, ranges)
    return r.render(), list(r.array_ids), r.prints


__all__ = ["MetalRenderer", "render_metal", "has_prints", "arg_fields", "MAX_BUFFERS", "NUMPY_OF"]
