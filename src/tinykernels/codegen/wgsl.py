"""WGSL (WebGPU Shading Language) from the IR, for ``tk.WebGPU()``.

WGSL is too far from C for the C-like renderer base (no pointers, no goto, no implicit
conversions, ``var``/``let``, ``select(f, t, c)``), so this is a renderer of its own. It keeps
the SIMT shape of :mod:`tinykernels.codegen.gpu`: every invocation runs the group-level
statements of the :mod:`tinykernels.passes.groups` plan (barriers, collectives, uniform
control flow) and the pieces between barriers under ``if (tk_active)``.

How WGSL's gaps are filled:

* **Types.** Values are ``bool``, ``i32``, ``u32`` or ``f32``. int8/int16 compute in ``i32``
  and are sign-extended after every wrapping operation, uint8/uint16 in ``u32`` masked;
  float16, bfloat16 and fp8 compute in ``f32``. Global arrays of 8- and 16-bit types (and
  bool) are packed into ``array<u32>`` words: loads extract and extend, stores update their
  lane with ``atomicAnd`` + ``atomicOr`` on ``array<atomic<u32>>`` so that neighbouring items
  writing other lanes of the same word never lose updates. Narrow floats convert in software,
  rounding to nearest even exactly as NumPy / ml_dtypes do. 64-bit types do not exist in WGSL:
  :func:`check_support` rejects them with a CompileError at the first line that uses one,
  except uint64 random keys (``tk.random.key``), carried as ``vec2<u32>`` (low, high) into
  the Philox intrinsics.
* **Control flow.** ``return`` in a flat kernel is ``return;``. Structured exits that C does
  with ``goto`` (early return of an inlined ``@tk.func``, ``return`` inside a piece of a
  grouped kernel) wrap their target in a one-pass ``loop { ...; break; }``, set a flag, and
  ``break`` out of every construct in between (``if (flag) { break; }`` after each).
* **Exact float arithmetic.** Mesa's NIR (Vulkan drivers such as lavapipe, RADV, ANV) may
  reassociate and fuse float operations that SPIR-V does not mark exact, and naga emits no
  ``NoContraction``. ``(x + 1e8) - 1e8`` would become ``x``. Every float ``+ - * /`` result is
  therefore passed through ``tk_x``, an OR with a run-time zero from the argument buffer that
  no compiler can see through, so results round exactly as NumPy's float32.
* **Math.** WGSL builtins are used where they are exact or nearly so (sqrt, floor, ceil,
  trunc, round, abs; sin, cos, tan after an exact Payne-Hanek argument reduction for
  |x| >= 8192); fma is emulated (lavapipe's builtin rounds the product first), except in a
  ``fastmath`` kernel (contraction allowed: the builtin); exp, log,
  log2, log10, log1p, expm1, the inverse trigonometric and hyperbolic functions, erf, erfc,
  pow, fmod and hypot are ports of the FreeBSD msun / musl single-precision functions
  (about 1 ulp), because the builtins of common drivers are far less accurate (lavapipe's
  log and atan2 are off by 1e-4).
* **Uniformity.** Group-level statements only read uniform values (workgroup id, the
  uniform argument buffer, constants and locals assigned only from those), so barriers sit
  in uniform control flow as WGSL requires.
"""
from __future__ import annotations

import math
import re

from .. import dtypes as D
from ..dtypes import DType, Ty
from ..errors import CompileError
from ..ir import nodes as N
from ..passes.groups import GroupPlan, ItemLoop
from .clike import mangle, oob_slots
from .printrecords import record as print_record

# --------------------------------------------------------------------------- type tables

UNSUPPORTED = ("int64", "uint64", "float64")
PACKED = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "float16": 16,
          "bfloat16": 16, "float8_e4m3fn": 8, "float8_e5m2": 8}
_LOAD_CONV = {"float16": "tk_f16_to_f32", "bfloat16": "tk_bf16_to_f32",
              "float8_e4m3fn": "tk_e4m3_to_f32", "float8_e5m2": "tk_e5m2_to_f32"}
_STORE_CONV = {"float16": "tk_f32_to_f16", "bfloat16": "tk_f32_to_bf16",
               "float8_e4m3fn": "tk_f32_to_e4m3", "float8_e5m2": "tk_f32_to_e5m2"}
_WHY = {"float64": "WGSL has no 64-bit floats (use float32; Python floats are float32 on WebGPU)",
        "int64": "WGSL has no 64-bit integers (use int32; Python ints are int32 on WebGPU)",
        "uint64": "WGSL has no 64-bit integers (use uint32; only tk.random keys may be uint64)"}


def ctype(t) -> str:
    """The WGSL type of a value of IR type/dtype ``t``."""
    d = t.dtype if isinstance(t, Ty) else t
    if d.kind == "b":
        return "bool"
    if d.is_float:
        return "f32"
    if d.bits == 64 and d.kind == "u":
        return "vec2<u32>"
    return "i32" if d.kind == "i" else "u32"


def _mask(bits: int) -> str:
    return f"0x{(1 << bits) - 1:x}u"


# --------------------------------------------------------------------------- the helper library

def _f(x: float) -> str:
    """A float32 constant as an exact WGSL hex literal."""
    import numpy as np
    v = float(np.float32(x))
    if v == 0:
        return "-0.0f" if math.copysign(1, v) < 0 else "0.0f"
    return v.hex() + "f"


_LIB: dict = {}


def _lib(name, deps, text):
    _LIB[name] = (tuple(deps), text.strip("\n") + "\n")


_lib("x", (), """
// tk_z is always 0 (read from the argument buffer): OR-ing it into a float's bits is opaque to
// every compiler, so no float operation is reassociated, fused or folded across tk_x.
var<private> tk_z: u32;
fn tk_x(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) | tk_z); }
// tk_y (XOR with tk_z) marks the left operand of a float + or -: a value NIR cannot merge with
// the right one (tk_x(tk_x(e)) collapses to tk_x(e), and CSE merges equal expressions), so
// e - e and e + -e are not folded to 0 (NaN for inf and NaN e). Its mask is tk_z << 1, not
// tk_z: a left operand that folds to an opaque zero (`select(bitcast<f32>(tk_z), 1.0f, false)`)
// would cancel with tk_z ^ tk_z to a literal +0.0, and NIR then folds 0.0 - e to -e (-0.0 for
// e = +0.0; fuzzer seed 88701127).
fn tk_y(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ (tk_z << 1u)); }
fn tk_nan() -> f32 { return bitcast<f32>(0x7fc00000u | tk_z); }
fn tk_inf() -> f32 { return bitcast<f32>(0x7f800000u | tk_z); }
fn tk_isnan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
fn tk_isinf(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) == 0x7f800000u; }
fn tk_isfinite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) < 0x7f800000u; }
fn tk_copysign(a: f32, b: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu) | (bitcast<u32>(b) & 0x80000000u));
}
""")

_lib("intdiv", (), """
// Python floor division and modulo: x // 0 == x % 0 == 0, MIN // -1 wraps (as NumPy)
fn tk_floordiv_i32(a: i32, b: i32) -> i32 {
    if (b == 0i) { return 0i; }
    if (b == -1i) { return 0i - a; }
    var q = a / b;
    if ((a % b) != 0i && ((a < 0i) != (b < 0i))) { q = q - 1i; }
    return q;
}
fn tk_mod_i32(a: i32, b: i32) -> i32 {
    if (b == 0i || b == -1i) { return 0i; }
    var r = a % b;
    if (r != 0i && ((r < 0i) != (b < 0i))) { r = r + b; }
    return r;
}
fn tk_floordiv_u32(a: u32, b: u32) -> u32 { if (b == 0u) { return 0u; } return a / b; }
fn tk_mod_u32(a: u32, b: u32) -> u32 { if (b == 0u) { return 0u; } return a % b; }
""")

_lib("ipow", (), """
// base ** e by squaring, wrapping; a negative exponent gives 1 / base ** -e truncated toward
// zero (1 for base 1, +-1 for base -1, else 0)
fn tk_ipow_u32(base: u32, e: u32) -> u32 {
    var r = 1u;
    var b = base;
    var n = e;
    loop {
        if (n == 0u) { break; }
        if ((n & 1u) != 0u) { r = r * b; }
        b = b * b;
        n = n >> 1u;
    }
    return r;
}
fn tk_ipow_i32(base: i32, e: i32) -> i32 {
    if (e < 0i) { return select(select(0i, select(1i, -1i, (e & 1i) != 0i), base == -1i), 1i, base == 1i); }
    return bitcast<i32>(tk_ipow_u32(bitcast<u32>(base), u32(e)));
}
""")

_lib("fmod", ("x",), """
// C fmodf, exact (integer long division of the significands, as musl)
fn tk_fmod(x: f32, y: f32) -> f32 {
    var uxi = bitcast<u32>(x);
    var uy = bitcast<u32>(y);
    var ex = i32((uxi >> 23u) & 0xffu);
    var ey = i32((uy >> 23u) & 0xffu);
    let sx = uxi & 0x80000000u;
    if ((uy << 1u) == 0u || (uy & 0x7fffffffu) > 0x7f800000u || ex == 0xff) { return tk_nan(); }
    if ((uxi << 1u) <= (uy << 1u)) {
        if ((uxi << 1u) == (uy << 1u)) { return bitcast<f32>(sx); }
        return x;
    }
    if (ex == 0i) {
        var i = uxi << 9u;
        loop { if ((i >> 31u) != 0u) { break; } ex = ex - 1i; i = i << 1u; }
        uxi = uxi << u32(1i - ex);
    } else {
        uxi = (uxi & 0x007fffffu) | 0x00800000u;
    }
    if (ey == 0i) {
        var i = uy << 9u;
        loop { if ((i >> 31u) != 0u) { break; } ey = ey - 1i; i = i << 1u; }
        uy = uy << u32(1i - ey);
    } else {
        uy = (uy & 0x007fffffu) | 0x00800000u;
    }
    loop {
        if (ex <= ey) { break; }
        let i = uxi - uy;
        if ((i >> 31u) == 0u) {
            if (i == 0u) { return bitcast<f32>(sx); }
            uxi = i;
        }
        uxi = uxi << 1u;
        ex = ex - 1i;
    }
    let i = uxi - uy;
    if ((i >> 31u) == 0u) {
        if (i == 0u) { return bitcast<f32>(sx); }
        uxi = i;
    }
    loop { if ((uxi >> 23u) != 0u) { break; } uxi = uxi << 1u; ex = ex - 1i; }
    if (ex > 0i) {
        uxi = (uxi - 0x00800000u) | (u32(ex) << 23u);
    } else {
        uxi = uxi >> u32(1i - ex);
    }
    return bitcast<f32>(uxi | sx);
}
""")

_lib("floatdiv", ("x", "fmod"), """
// NumPy's float floor_divide / remainder (npy_divmod)
fn tk_div(a: f32, b: f32) -> f32 {
    if (b == 0.0f) {
        if (a == 0.0f || tk_isnan(a)) { return tk_nan(); }
        return tk_copysign(tk_inf(), bitcast<f32>(bitcast<u32>(a) ^ (bitcast<u32>(b) & 0x80000000u)));
    }
    return tk_x(a / b);
}
fn tk_mod_f32(a: f32, b: f32) -> f32 {
    var m = tk_fmod(a, b);
    if (b == 0.0f) { return m; }
    if (!(m == 0.0f)) {
        if ((b < 0.0f) != (m < 0.0f)) { m = tk_x(m + b); }
    } else {
        m = tk_copysign(0.0f, b);
    }
    return m;
}
fn tk_floordiv_f32(a: f32, b: f32) -> f32 {
    if (b == 0.0f) { return tk_div(a, b); }
    let m = tk_fmod(a, b);
    var dv = tk_x(tk_x(a - m) / b);
    if (!(m == 0.0f)) {
        if ((b < 0.0f) != (m < 0.0f)) { dv = tk_x(dv - 1.0f); }
    }
    var fd: f32;
    if (!(dv == 0.0f)) {
        fd = floor(dv);
        if (tk_x(dv - fd) > 0.5f) { fd = tk_x(fd + 1.0f); }
    } else {
        fd = tk_copysign(0.0f, tk_div(a, b));
    }
    return fd;
}
""")

_lib("scalbn", ("x",), f"""
fn tk_scalbn(x: f32, n0: i32) -> f32 {{
    var y = x;
    var n = n0;
    if (n > 127i) {{
        y = tk_x(y * {_f(2.0**127)});
        n = n - 127i;
        if (n > 127i) {{ y = tk_x(y * {_f(2.0**127)}); n = n - 127i; if (n > 127i) {{ n = 127i; }} }}
    }} else if (n < -126i) {{
        y = tk_x(y * {_f(2.0**-102)});
        n = n + 102i;
        if (n < -126i) {{ y = tk_x(y * {_f(2.0**-102)}); n = n + 102i; if (n < -126i) {{ n = -126i; }} }}
    }}
    return tk_x(y * bitcast<f32>(u32(0x7fi + n) << 23u));
}}
""")

_lib("exp", ("x",), f"""
// expf (FreeBSD e_expf.c)
fn tk_exp(x0: f32) -> f32 {{
    var x = x0;
    let hx0 = bitcast<u32>(x);
    let neg = (hx0 >> 31u) != 0u;
    let hx = hx0 & 0x7fffffffu;
    if (hx >= 0x42b17218u) {{
        if (hx > 0x7f800000u) {{ return x; }}
        if (hx == 0x7f800000u) {{ return select(x, 0.0f, neg); }}
        if (x > {_f(8.8721679688e+01)}) {{ return tk_inf(); }}
        if (x < {_f(-1.0397208405e+02)}) {{ return 0.0f; }}
    }}
    var k = 0i;
    var hi = 0.0f;
    var lo = 0.0f;
    if (hx > 0x3eb17218u) {{
        if (hx < 0x3f851592u) {{
            if (!neg) {{ hi = tk_x(x - {_f(6.9314575195e-01)}); lo = {_f(1.4286067653e-06)}; k = 1i; }}
            else {{ hi = tk_x(x + {_f(6.9314575195e-01)}); lo = {_f(-1.4286067653e-06)}; k = -1i; }}
        }} else {{
            k = i32(tk_x(tk_x({_f(1.4426950216e+00)} * x) + select(0.5f, -0.5f, neg)));
            let t = f32(k);
            hi = tk_x(x - tk_x(t * {_f(6.9314575195e-01)}));
            lo = tk_x(t * {_f(1.4286067653e-06)});
        }}
        x = tk_x(hi - lo);
    }} else if (hx < 0x31800000u) {{
        return tk_x(1.0f + x);
    }}
    let t = tk_x(x * x);
    let c = tk_x(x - tk_x(t * tk_x({_f(1.6666625440e-1)} + tk_x(t * {_f(-2.7667332906e-3)}))));
    if (k == 0i) {{ return tk_x(1.0f - tk_x(tk_x(tk_x(x * c) / tk_x(c - 2.0f)) - x)); }}
    let y = tk_x(1.0f - tk_x(tk_x(lo - tk_x(tk_x(x * c) / tk_x(2.0f - c))) - hi));
    if (k >= -125i) {{
        if (k == 128i) {{ return tk_x(tk_x(y * 2.0f) * {_f(2.0**127)}); }}
        return tk_x(y * bitcast<f32>(u32(0x3f800000i + (k << 23u))));
    }}
    return tk_x(tk_x(y * bitcast<f32>(u32(0x3f800000i + ((k + 100i) << 23u)))) * {_f(2.0**-100)});
}}
""")

_lib("expm1", ("x",), f"""
// expm1f (FreeBSD s_expm1f.c)
fn tk_expm1(x0: f32) -> f32 {{
    var x = x0;
    let u = bitcast<u32>(x);
    let hx = u & 0x7fffffffu;
    let neg = (u >> 31u) != 0u;
    if (hx >= 0x4195b844u) {{
        if (hx > 0x7f800000u) {{ return x; }}
        if (neg) {{ return -1.0f; }}
        if (x > {_f(8.8721679688e+01)}) {{ return tk_inf(); }}
    }}
    var k = 0i;
    var hi: f32;
    var lo: f32;
    var c = 0.0f;
    if (hx > 0x3eb17218u) {{
        if (hx < 0x3f851592u) {{
            if (!neg) {{ hi = tk_x(x - {_f(6.9313812256e-01)}); lo = {_f(9.0580006145e-06)}; k = 1i; }}
            else {{ hi = tk_x(x + {_f(6.9313812256e-01)}); lo = {_f(-9.0580006145e-06)}; k = -1i; }}
        }} else {{
            k = i32(tk_x(tk_x({_f(1.4426950216e+00)} * x) + select(0.5f, -0.5f, neg)));
            let t = f32(k);
            hi = tk_x(x - tk_x(t * {_f(6.9313812256e-01)}));
            lo = tk_x(t * {_f(9.0580006145e-06)});
        }}
        x = tk_x(hi - lo);
        c = tk_x(tk_x(hi - x) - lo);
    }} else if (hx < 0x33000000u) {{
        return x;
    }}
    let hfx = tk_x(0.5f * x);
    let hxs = tk_x(x * hfx);
    let r1 = tk_x(1.0f + tk_x(hxs * tk_x({_f(-3.3333212137e-2)} + tk_x(hxs * {_f(1.5807170421e-3)}))));
    let t = tk_x(3.0f - tk_x(r1 * hfx));
    var e = tk_x(hxs * tk_x(tk_x(r1 - t) / tk_x(6.0f - tk_x(x * t))));
    if (k == 0i) {{ return tk_x(x - tk_x(tk_x(x * e) - hxs)); }}
    e = tk_x(tk_x(x * tk_x(e - c)) - c);
    e = tk_x(e - hxs);
    if (k == -1i) {{ return tk_x(tk_x(0.5f * tk_x(x - e)) - 0.5f); }}
    if (k == 1i) {{
        if (x < -0.25f) {{ return tk_x(-2.0f * tk_x(e - tk_x(x + 0.5f))); }}
        return tk_x(1.0f + tk_x(2.0f * tk_x(x - e)));
    }}
    let twopk = bitcast<f32>(u32(0x7fi + k) << 23u);
    if (k < 0i || k > 56i) {{
        var y = tk_x(tk_x(x - e) + 1.0f);
        if (k == 128i) {{ y = tk_x(tk_x(y * 2.0f) * {_f(2.0**127)}); }} else {{ y = tk_x(y * twopk); }}
        return tk_x(y - 1.0f);
    }}
    let um = bitcast<f32>(u32(0x7fi - k) << 23u);
    if (k < 23i) {{ return tk_x(tk_x(tk_x(x - e) + tk_x(1.0f - um)) * twopk); }}
    return tk_x(tk_x(tk_x(x - tk_x(e + um)) + 1.0f) * twopk);
}}
""")

_LG = (float.fromhex("0xaaaaaa.0p-24"), float.fromhex("0xccce13.0p-25"),
       float.fromhex("0x91e9ee.0p-25"), float.fromhex("0xf89e26.0p-26"))

_lib("log", ("x",), f"""
// logf (FreeBSD e_logf.c)
fn tk_log(x0: f32) -> f32 {{
    var x = x0;
    var ix = bitcast<i32>(x);
    var k = 0i;
    if (ix < 0x00800000i) {{
        if ((ix & 0x7fffffffi) == 0i) {{ return -tk_inf(); }}
        if (ix < 0i) {{ return tk_nan(); }}
        k = k - 25i;
        x = tk_x(x * {_f(2.0**25)});
        ix = bitcast<i32>(x);
    }}
    if (ix >= 0x7f800000i) {{ return x; }}
    k = k + ((ix >> 23u) - 127i);
    ix = ix & 0x007fffffi;
    let i = (ix + 0x4afb20i) & 0x800000i;
    x = bitcast<f32>(ix | (i ^ 0x3f800000i));
    k = k + (i >> 23u);
    let f = tk_x(x - 1.0f);
    let dk = f32(k);
    if ((0x007fffffi & (0x8000i + ix)) < 0xc000i) {{
        if (f == 0.0f) {{
            if (k == 0i) {{ return 0.0f; }}
            return tk_x(tk_x(dk * {_f(6.9313812256e-01)}) + tk_x(dk * {_f(9.0580006145e-06)}));
        }}
        let R = tk_x(tk_x(f * f) * tk_x(0.5f - tk_x({_f(1.0 / 3.0)} * f)));
        if (k == 0i) {{ return tk_x(f - R); }}
        return tk_x(tk_x(dk * {_f(6.9313812256e-01)}) - tk_x(tk_x(R - tk_x(dk * {_f(9.0580006145e-06)})) - f));
    }}
    let s = tk_x(f / tk_x(2.0f + f));
    let z = tk_x(s * s);
    let w = tk_x(z * z);
    let t1 = tk_x(w * tk_x({_f(_LG[1])} + tk_x(w * {_f(_LG[3])})));
    let t2 = tk_x(z * tk_x({_f(_LG[0])} + tk_x(w * {_f(_LG[2])})));
    let i2 = (ix - 0x30a3d0i) | (0x35c288i - ix);
    let R = tk_x(t2 + t1);
    if (i2 > 0i) {{
        let hfsq = tk_x(tk_x(0.5f * f) * f);
        if (k == 0i) {{ return tk_x(f - tk_x(hfsq - tk_x(s * tk_x(hfsq + R)))); }}
        return tk_x(tk_x(dk * {_f(6.9313812256e-01)}) - tk_x(tk_x(hfsq - tk_x(tk_x(s * tk_x(hfsq + R)) + tk_x(dk * {_f(9.0580006145e-06)}))) - f));
    }}
    if (k == 0i) {{ return tk_x(f - tk_x(s * tk_x(f - R))); }}
    return tk_x(tk_x(dk * {_f(6.9313812256e-01)}) - tk_x(tk_x(tk_x(s * tk_x(f - R)) - tk_x(dk * {_f(9.0580006145e-06)})) - f));
}}
""")

_lib("klog", ("x",), f"""
// __kernel_logf (FreeBSD k_logf.h) and the normalization shared by log2f / log10f
fn tk_klog(x: f32) -> f32 {{
    let ix0 = bitcast<i32>(x);
    let f = tk_x(x - 1.0f);
    if ((0x007fffffi & (0x8000i + ix0)) < 0xc000i) {{
        if (f == 0.0f) {{ return 0.0f; }}
        return tk_x(tk_x(f * f) * tk_x(tk_x({_f(1.0 / 3.0)} * f) - 0.5f));
    }}
    let s = tk_x(f / tk_x(2.0f + f));
    let z = tk_x(s * s);
    let ix = ix0 & 0x007fffffi;
    let w = tk_x(z * z);
    let t1 = tk_x(w * tk_x({_f(_LG[1])} + tk_x(w * {_f(_LG[3])})));
    let t2 = tk_x(z * tk_x({_f(_LG[0])} + tk_x(w * {_f(_LG[2])})));
    let i = (ix - 0x30a3d0i) | (0x35c288i - ix);
    let R = tk_x(t2 + t1);
    if (i > 0i) {{
        let hfsq = tk_x(tk_x(0.5f * f) * f);
        return tk_x(tk_x(s * tk_x(hfsq + R)) - hfsq);
    }}
    return tk_x(s * tk_x(R - f));
}}
// x = 2**k * m with m in [sqrt(2)/2, sqrt(2)); returns (m, k); x > 0 finite
fn tk_lognorm(x0: f32) -> vec2<f32> {{
    var x = x0;
    var hx = bitcast<i32>(x);
    var k = 0i;
    if (hx < 0x00800000i) {{ k = -25i; x = tk_x(x * {_f(2.0**25)}); hx = bitcast<i32>(x); }}
    k = k + ((hx >> 23u) - 127i);
    hx = hx & 0x007fffffi;
    let i = (hx + 0x4afb0di) & 0x800000i;
    k = k + (i >> 23u);
    return vec2<f32>(bitcast<f32>(hx | (i ^ 0x3f800000i)), f32(k));
}}
""")

_lib("log2", ("x", "klog"), f"""
// log2f (FreeBSD e_log2f.c)
fn tk_log2(x: f32) -> f32 {{
    let hx = bitcast<i32>(x);
    if ((hx & 0x7fffffffi) == 0i) {{ return -tk_inf(); }}
    if (hx < 0i) {{ return tk_nan(); }}
    if (hx >= 0x7f800000i) {{ return x; }}
    let mk = tk_lognorm(x);
    let f = tk_klog(mk.x);
    let y = tk_x(mk.x - 1.0f);
    let hi = bitcast<f32>(bitcast<u32>(y) & 0xfffff000u);
    let lo = tk_x(y - hi);
    return tk_x(tk_x(tk_x(tk_x(tk_x(y + f) * {_f(-1.7605285393e-04)}) + tk_x(tk_x(lo + f) * {_f(1.4428710938e+00)}))
        + tk_x(hi * {_f(1.4428710938e+00)})) + mk.y);
}}
""")

_lib("log10", ("x", "klog"), f"""
// log10f (FreeBSD e_log10f.c)
fn tk_log10(x: f32) -> f32 {{
    let hx = bitcast<i32>(x);
    if ((hx & 0x7fffffffi) == 0i) {{ return -tk_inf(); }}
    if (hx < 0i) {{ return tk_nan(); }}
    if (hx >= 0x7f800000i) {{ return x; }}
    let mk = tk_lognorm(x);
    let f = tk_klog(mk.x);
    let y = tk_x(mk.x - 1.0f);
    let hi = bitcast<f32>(bitcast<u32>(y) & 0xfffff000u);
    let lo = tk_x(y - hi);
    let z = tk_x(tk_x(tk_x(tk_x(mk.y * {_f(7.9034151668e-07)}) + tk_x(tk_x(y + f) * {_f(-3.1689971365e-05)}))
        + tk_x(tk_x(lo + f) * {_f(4.3432617188e-01)})) + tk_x(hi * {_f(4.3432617188e-01)}));
    return tk_x(z + tk_x(mk.y * {_f(3.0102920532e-01)}));
}}
""")

_lib("log1p", ("x",), f"""
// log1pf (FreeBSD s_log1pf.c)
fn tk_log1p(x: f32) -> f32 {{
    let hx = bitcast<i32>(x);
    let ax = hx & 0x7fffffffi;
    var k = 1i;
    var f = 0.0f;
    var c = 0.0f;
    var hu = 0i;
    if (hx < 0x3ed413d0i) {{
        if (ax >= 0x3f800000i) {{
            if (x == -1.0f) {{ return -tk_inf(); }}
            return tk_nan();
        }}
        if (ax < 0x38000000i) {{
            if (ax < 0x33800000i) {{ return x; }}
            return tk_x(x - tk_x(tk_x(x * x) * 0.5f));
        }}
        if (hx > 0i || hx <= bitcast<i32>(0xbe95f619u)) {{ k = 0i; f = x; hu = 1i; }}
    }}
    if (hx >= 0x7f800000i) {{ return x; }}
    if (k != 0i) {{
        var u: f32;
        if (hx < 0x5a000000i) {{
            u = tk_x(1.0f + x);
            hu = bitcast<i32>(u);
            k = (hu >> 23u) - 127i;
            c = select(tk_x(x - tk_x(u - 1.0f)), tk_x(1.0f - tk_x(u - x)), k > 0i);
            c = tk_x(c / u);
        }} else {{
            u = x;
            hu = bitcast<i32>(u);
            k = (hu >> 23u) - 127i;
            c = 0.0f;
        }}
        hu = hu & 0x007fffffi;
        if (hu < 0x3504f4i) {{
            u = bitcast<f32>(hu | 0x3f800000i);
        }} else {{
            k = k + 1i;
            u = bitcast<f32>(hu | 0x3f000000i);
            hu = (0x00800000i - hu) >> 2u;
        }}
        f = tk_x(u - 1.0f);
    }}
    let hfsq = tk_x(tk_x(0.5f * f) * f);
    let dk = f32(k);
    if (hu == 0i) {{
        if (f == 0.0f) {{
            if (k == 0i) {{ return 0.0f; }}
            c = tk_x(c + tk_x(dk * {_f(9.0580006145e-06)}));
            return tk_x(tk_x(dk * {_f(6.9313812256e-01)}) + c);
        }}
        let R = tk_x(hfsq * tk_x(1.0f - tk_x({_f(2.0 / 3.0)} * f)));
        if (k == 0i) {{ return tk_x(f - R); }}
        return tk_x(tk_x(dk * {_f(6.9313812256e-01)}) - tk_x(tk_x(R - tk_x(tk_x(dk * {_f(9.0580006145e-06)}) + c)) - f));
    }}
    let s = tk_x(f / tk_x(2.0f + f));
    let z = tk_x(s * s);
    var R = tk_x(z * {_f(1.4798198640e-01)});
    R = tk_x(z * tk_x({_f(1.5313838422e-01)} + R));
    R = tk_x(z * tk_x({_f(1.8183572590e-01)} + R));
    R = tk_x(z * tk_x({_f(2.2222198546e-01)} + R));
    R = tk_x(z * tk_x({_f(2.8571429849e-01)} + R));
    R = tk_x(z * tk_x({_f(4.0000000596e-01)} + R));
    R = tk_x(z * tk_x({_f(6.6666668653e-01)} + R));
    if (k == 0i) {{ return tk_x(f - tk_x(hfsq - tk_x(s * tk_x(hfsq + R)))); }}
    return tk_x(tk_x(dk * {_f(6.9313812256e-01)}) - tk_x(tk_x(hfsq - tk_x(tk_x(s * tk_x(hfsq + R)) + tk_x(tk_x(dk * {_f(9.0580006145e-06)}) + c))) - f));
}}
""")

_lib("atan", ("x",), f"""
// atanf (FreeBSD s_atanf.c)
fn tk_atan(x0: f32) -> f32 {{
    var x = x0;
    let hx = bitcast<i32>(x);
    let ix = hx & 0x7fffffffi;
    var id = -1i;
    if (ix >= 0x4c800000i) {{
        if (ix > 0x7f800000i) {{ return x; }}
        let z = tk_x({_f(1.5707962513e+00)} + {_f(7.5497894159e-08)});
        return select(z, -z, hx < 0i);
    }}
    if (ix < 0x3ee00000i) {{
        if (ix < 0x39800000i) {{ return x; }}
    }} else {{
        x = abs(x);
        if (ix < 0x3f980000i) {{
            if (ix < 0x3f300000i) {{ id = 0i; x = tk_x(tk_x(tk_x(2.0f * x) - 1.0f) / tk_x(2.0f + x)); }}
            else {{ id = 1i; x = tk_x(tk_x(x - 1.0f) / tk_x(x + 1.0f)); }}
        }} else {{
            if (ix < 0x401c0000i) {{ id = 2i; x = tk_x(tk_x(x - 1.5f) / tk_x(1.0f + tk_x(1.5f * x))); }}
            else {{ id = 3i; x = tk_x(-1.0f / x); }}
        }}
    }}
    let z = tk_x(x * x);
    let w = tk_x(z * z);
    let s1 = tk_x(z * tk_x({_f(3.3333328366e-01)} + tk_x(w * tk_x({_f(1.4253635705e-01)} + tk_x(w * {_f(6.1687607318e-02)})))));
    let s2 = tk_x(w * tk_x({_f(-1.9999158382e-01)} + tk_x(w * {_f(-1.0648017377e-01)})));
    if (id < 0i) {{ return tk_x(x - tk_x(x * tk_x(s1 + s2))); }}
    var hi: f32; var lo: f32;
    switch id {{
        case 0i: {{ hi = {_f(4.6364760399e-01)}; lo = {_f(5.0121582440e-09)}; }}
        case 1i: {{ hi = {_f(7.8539812565e-01)}; lo = {_f(3.7748947079e-08)}; }}
        case 2i: {{ hi = {_f(9.8279368877e-01)}; lo = {_f(3.4473217170e-08)}; }}
        default: {{ hi = {_f(1.5707962513e+00)}; lo = {_f(7.5497894159e-08)}; }}
    }}
    let zz = tk_x(hi - tk_x(tk_x(tk_x(x * tk_x(s1 + s2)) - lo) - x));
    return select(zz, -zz, hx < 0i);
}}
""")

_lib("atan2", ("x", "atan"), f"""
// atan2f (FreeBSD e_atan2f.c)
fn tk_atan2(y: f32, x: f32) -> f32 {{
    let pi = {_f(3.1415927410e+00)};
    let pi_lo = {_f(-8.7422776573e-08)};
    let pio2 = {_f(1.5707963705e+00)};
    let pio4 = {_f(7.8539818525e-01)};
    let hx = bitcast<i32>(x);
    let ix = hx & 0x7fffffffi;
    let hy = bitcast<i32>(y);
    let iy = hy & 0x7fffffffi;
    if (ix > 0x7f800000i || iy > 0x7f800000i) {{ return tk_nan(); }}
    if (hx == 0x3f800000i) {{ return tk_atan(y); }}
    let m = ((hy >> 31u) & 1i) | ((hx >> 30u) & 2i);
    if (iy == 0i) {{
        if (m == 0i || m == 1i) {{ return y; }}
        if (m == 2i) {{ return pi; }}
        return -pi;
    }}
    if (ix == 0i) {{ return select(pio2, -pio2, hy < 0i); }}
    if (ix == 0x7f800000i) {{
        if (iy == 0x7f800000i) {{
            if (m == 0i) {{ return pio4; }}
            if (m == 1i) {{ return -pio4; }}
            if (m == 2i) {{ return tk_x(3.0f * pio4); }}
            return tk_x(-3.0f * pio4);
        }}
        if (m == 0i) {{ return 0.0f; }}
        if (m == 1i) {{ return -0.0f; }}
        if (m == 2i) {{ return pi; }}
        return -pi;
    }}
    if (iy == 0x7f800000i) {{ return select(pio2, -pio2, hy < 0i); }}
    let k = (iy - ix) >> 23u;
    var z: f32;
    var mm = m;
    if (k > 26i) {{ z = tk_x(pio2 + tk_x(0.5f * pi_lo)); mm = mm & 1i; }}
    else if (k < -26i && hx < 0i) {{ z = 0.0f; }}
    else {{ z = tk_atan(abs(tk_x(y / x))); }}
    if (mm == 0i) {{ return z; }}
    if (mm == 1i) {{ return -z; }}
    if (mm == 2i) {{ return tk_x(pi - tk_x(z - pi_lo)); }}
    return tk_x(tk_x(z - pi_lo) - pi);
}}
""")

_ASIN_R = f"""tk_x(tk_x(z * tk_x({_f(1.6666586697e-01)} + tk_x(z * tk_x({_f(-4.2743422091e-02)} + tk_x(z * {_f(-8.6563630030e-03)}))))) / tk_x(1.0f + tk_x(z * {_f(-7.0662963390e-01)})))"""

_lib("acos", ("x",), f"""
// acosf (FreeBSD e_acosf.c)
fn tk_acos(x: f32) -> f32 {{
    let pio2_hi = {_f(1.5707962513e+00)};
    let pio2_lo = {_f(7.5497894159e-08)};
    let hx = bitcast<i32>(x);
    let ix = hx & 0x7fffffffi;
    if (ix >= 0x3f800000i) {{
        if (ix == 0x3f800000i) {{
            if (hx > 0i) {{ return 0.0f; }}
            return tk_x({_f(3.1415925026e+00)} + tk_x(2.0f * pio2_lo));
        }}
        return tk_nan();
    }}
    if (ix < 0x3f000000i) {{
        if (ix <= 0x32800000i) {{ return tk_x(pio2_hi + pio2_lo); }}
        let z = tk_x(x * x);
        let r = {_ASIN_R};
        return tk_x(pio2_hi - tk_x(x - tk_x(pio2_lo - tk_x(x * r))));
    }} else if (hx < 0i) {{
        let z = tk_x(tk_x(1.0f + x) * 0.5f);
        let s = sqrt(z);
        let r = {_ASIN_R};
        let w = tk_x(tk_x(r * s) - pio2_lo);
        return tk_x({_f(3.1415925026e+00)} - tk_x(2.0f * tk_x(s + w)));
    }}
    let z = tk_x(tk_x(1.0f - x) * 0.5f);
    let s = sqrt(z);
    let df = bitcast<f32>(bitcast<u32>(s) & 0xfffff000u);
    let c = tk_x(tk_x(z - tk_x(df * df)) / tk_x(s + df));
    let r = {_ASIN_R};
    let w = tk_x(tk_x(r * s) + c);
    return tk_x(2.0f * tk_x(df + w));
}}
""")

def _two_over_pi_words(n: int) -> list:
    """The first ``32 n`` fraction bits of 2/pi as u32 words (most significant first), exactly:
    pi from Machin's formula in integer arithmetic, with 64 guard bits."""
    g = 32 * n + 64
    one = 1 << g

    def atan_inv(k: int) -> int:                 # atan(1/k) * 2**g
        s, t, i = 0, one // k, 0
        while t:
            s += -(t // (2 * i + 1)) if i % 2 else t // (2 * i + 1)
            t //= k * k
            i += 1
        return s
    pi = 16 * atan_inv(5) - 4 * atan_inv(239)
    v = (2 << (g + 32 * n)) // pi                # 2/pi * 2**(32 n)
    return [(v >> (32 * (n - 1 - j))) & 0xffffffff for j in range(n)]


#: |x| from which sin/cos/tan reduce their argument exactly before calling the builtin (25/32,
#: just below pi/4): lavapipe's builtins reduce with pi/2 to about 32 bits, so next to a zero of
#: sin/cos (x near k pi/2) their results lost relative accuracy already from k = 3 (cos(3 pi/2)
#: 6 ulp off, 688 ulp near 2238; docs/webgpu.md). Below it they are within an ulp.
_TRIG_REDUCE_FROM = 0.78125


def _f32_bits(v: float) -> int:
    import numpy as np
    return int(np.float32(v).view(np.uint32))


def _c3(v: float) -> tuple:
    """``v`` as c1 + c2 + c3: c1 and c2 of 12 significant bits (their products with 12-bit
    integers are exact in float32), c3 the float32 nearest to the rest."""
    import numpy as np
    e = math.frexp(v)[1]
    c1 = math.floor(v * 2.0 ** (12 - e)) * 2.0 ** (e - 12)
    c2 = math.floor((v - c1) * 2.0 ** (24 - e)) * 2.0 ** (e - 24)
    return c1, c2, float(np.float32(v - c1 - c2))


_PIO2 = _c3(math.pi / 2)          # (math.pi is pi to 53 bits: c3 carries 24 of them past c1 + c2)
_2OPI = ", ".join(f"0x{w:08x}u" for w in _two_over_pi_words(8))

_lib("trig", ("x",), f"""
// sin/cos/tan of any float32: the builtins for |x| < {_TRIG_REDUCE_FROM:g}; beyond, an exact argument
// reduction x = (q + f) * pi/2, |f| <= 1/2 (Payne-Hanek in u32 arithmetic, 224 bits of 2/pi),
// then the builtins of r = f * pi/2 (|r| <= pi/4, where they are exact) by the quadrant q
fn tk_mul32(a: u32, b: u32) -> vec2<u32> {{   // a * b as (low word, high word)
    let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
    let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}}
fn tk_2opi_bits(k: i32) -> u32 {{   // the 32 bits of 2/pi of weights 2^-k .. 2^-(k+31) (k <= 0: zeros)
    var t = array<u32, 8>({_2OPI});
    let j = (k - 1i) >> 5u;
    let s = u32((k - 1i) & 31i);
    var a = 0u;
    var b = 0u;
    if (j >= 0i && j < 8i) {{ a = t[j]; }}
    if (j >= -1i && j < 7i) {{ b = t[j + 1i]; }}
    if (s == 0u) {{ return a; }}
    return (a << s) | (b >> (32u - s));
}}
fn tk_rem_pio2(ax: f32) -> vec2<f32> {{   // ax finite, >= 0.5: (r, q mod 4)
    let u = bitcast<u32>(ax);
    let e = i32(u >> 23u) - 150i;                 // ax = m * 2^e
    let m = (u & 0x7fffffu) | 0x800000u;
    let w0 = tk_2opi_bits(e - 1i);
    let w1 = tk_2opi_bits(e + 31i);
    let w2 = tk_2opi_bits(e + 63i);
    // the low 96 bits of m * (w0 w1 w2): 2^94 is the unit, bits 95..94 the quadrant (higher
    // bits are multiples of 4 quarter turns), bits 93..0 the fraction
    let p2 = tk_mul32(m, w2);
    let p1 = tk_mul32(m, w1);
    let r1 = p2.y + p1.x;
    let r0 = p1.y + m * w0 + select(0u, 1u, r1 < p1.x);
    var q = r0 >> 30u;
    var h = (r0 << 2u) | (r1 >> 30u);
    var l = (r1 << 2u) | (p2.x >> 30u);
    var t = p2.x << 2u;
    let neg = (h >> 31u) != 0u;
    if (neg) {{                                   // f >= 1/2: the next quadrant, f - 1
        q = q + 1u;
        h = ~h; l = ~l; t = ~t;
        t = t + 1u;
        if (t == 0u) {{ l = l + 1u; if (l == 0u) {{ h = h + 1u; }} }}
    }}
    var sh = 0i;
    if (h == 0u) {{ h = l; l = t; t = 0u; sh = 32i; }}
    let z = countLeadingZeros(h);
    if (z != 0u && z != 32u) {{
        h = (h << z) | (l >> (32u - z));
        l = (l << z) | (t >> (32u - z));
    }}
    // |f| = 2^-(z + sh) * (h + l 2^-32) 2^-32, h normalised: three float pieces (12, 12, 32 bits)
    let f1 = f32(h >> 20u);
    let f2 = f32((h >> 8u) & 0xfffu);
    let f3 = f32(((h & 0xffu) << 24u) | (l >> 8u));
    let c1 = {_f(_PIO2[0] * 2.0 ** -12)}; let c2 = {_f(_PIO2[1] * 2.0 ** -12)}; let c3 = {_f(_PIO2[2] * 2.0 ** -12)};
    let lo = tk_x(tk_x(tk_x(f2 * {_f(_PIO2[1] * 2.0 ** -24)}) + tk_x(f1 * c3)) + tk_x(f3 * {_f(_PIO2[0] * 2.0 ** -56)}));
    let mid = tk_x(tk_x(f1 * c2) + tk_x(f2 * {_f(_PIO2[0] * 2.0 ** -24)}));
    let r = ldexp(tk_x(tk_x(f1 * c1) + tk_x(mid + lo)), -i32(z) - sh);
    return vec2<f32>(select(r, -r, neg), f32(q & 3u));
}}
fn tk_trig_big(x: f32) -> bool {{ let u = bitcast<u32>(x) & 0x7fffffffu; return u >= {_f32_bits(_TRIG_REDUCE_FROM)}u && u < 0x7f800000u; }}
fn tk_sin(x: f32) -> f32 {{
    if (!tk_trig_big(x)) {{ return sin(x); }}
    let rq = tk_rem_pio2(abs(x));
    let q = u32(rq.y);
    var s = sin(rq.x);
    if ((q & 1u) != 0u) {{ s = cos(rq.x); }}
    if ((q >= 2u) != (x < 0.0f)) {{ s = -s; }}
    return s;
}}
fn tk_cos(x: f32) -> f32 {{
    if (!tk_trig_big(x)) {{ return cos(x); }}
    let rq = tk_rem_pio2(abs(x));
    let q = u32(rq.y);
    var c = cos(rq.x);
    if ((q & 1u) != 0u) {{ c = sin(rq.x); }}
    if (q == 1u || q == 2u) {{ c = -c; }}
    return c;
}}
fn tk_tan(x: f32) -> f32 {{
    if (!tk_trig_big(x)) {{ return tan(x); }}
    let rq = tk_rem_pio2(abs(x));
    var t = tan(rq.x);
    if ((u32(rq.y) & 1u) != 0u) {{ t = tk_x(-1.0f / t); }}
    return select(t, -t, x < 0.0f);
}}
""")

_lib("asin", ("x",), f"""
// asinf (FreeBSD e_asinf.c; |x| >= 0.5 through 2*asin(sqrt((1-|x|)/2)) in two parts)
fn tk_asin(x: f32) -> f32 {{
    let hx = bitcast<i32>(x);
    let ix = hx & 0x7fffffffi;
    if (ix >= 0x3f800000i) {{
        if (ix == 0x3f800000i) {{ return tk_x(x * {_f(1.5707963705e+00)}); }}
        return tk_nan();
    }}
    if (ix < 0x3f000000i) {{
        if (ix < 0x39800000i) {{ return x; }}
        let z = tk_x(x * x);
        let r = {_ASIN_R};
        return tk_x(x + tk_x(x * r));
    }}
    let z = tk_x(tk_x(1.0f - abs(x)) * 0.5f);
    let s = sqrt(z);
    let df = bitcast<f32>(bitcast<u32>(s) & 0xfffff000u);
    let c = tk_x(tk_x(z - tk_x(df * df)) / tk_x(s + df));
    let r = {_ASIN_R};
    let w = tk_x(tk_x(r * s) + c);
    let t = tk_x(tk_x({_f(1.5707962513e+00)} - tk_x(2.0f * df)) - tk_x(tk_x(2.0f * w) - {_f(7.5497894159e-08)}));
    return select(t, -t, hx < 0i);
}}
""")

_lib("tanh", ("x", "expm1"), """
// tanhf (FreeBSD s_tanhf.c)
fn tk_tanh(x: f32) -> f32 {
    let jx = bitcast<i32>(x);
    let ix = jx & 0x7fffffffi;
    if (ix >= 0x7f800000i) {
        if (ix > 0x7f800000i) { return x; }
        return select(1.0f, -1.0f, jx < 0i);
    }
    var z: f32;
    if (ix < 0x41100000i) {
        if (ix < 0x39800000i) { return x; }
        if (ix >= 0x3f800000i) {
            let t = tk_expm1(tk_x(2.0f * abs(x)));
            z = tk_x(1.0f - tk_x(2.0f / tk_x(t + 2.0f)));
        } else {
            let t = tk_expm1(tk_x(-2.0f * abs(x)));
            z = tk_x(-t / tk_x(t + 2.0f));
        }
    } else {
        z = 1.0f;
    }
    return select(z, -z, jx < 0i);
}
""")

_lib("sinh", ("x", "expm1", "exp"), """
// sinhf (FreeBSD e_sinhf.c)
fn tk_sinh(x: f32) -> f32 {
    let jx = bitcast<i32>(x);
    let ix = jx & 0x7fffffffi;
    if (ix >= 0x7f800000i) { return x; }
    let h = select(0.5f, -0.5f, jx < 0i);
    let a = abs(x);
    if (ix < 0x41100000i) {
        if (ix < 0x39800000i) { return x; }
        let t = tk_expm1(a);
        if (ix < 0x3f800000i) { return tk_x(h * tk_x(tk_x(2.0f * t) - tk_x(tk_x(t * t) / tk_x(t + 1.0f)))); }
        return tk_x(h * tk_x(t + tk_x(t / tk_x(t + 1.0f))));
    }
    if (ix < 0x42b17217i) { return tk_x(h * tk_exp(a)); }
    let e = tk_exp(tk_x(0.5f * a));
    return tk_x(tk_x(h * e) * e);
}
""")

_lib("cosh", ("x", "expm1", "exp"), """
// coshf (FreeBSD e_coshf.c)
fn tk_cosh(x: f32) -> f32 {
    let a = abs(x);
    let ix = bitcast<i32>(a);
    if (ix >= 0x7f800000i) { return a; }
    if (ix < 0x3eb17218i) {
        if (ix < 0x39800000i) { return 1.0f; }
        let t = tk_expm1(a);
        let w = tk_x(1.0f + t);
        return tk_x(1.0f + tk_x(tk_x(t * t) / tk_x(w + w)));
    }
    if (ix < 0x41100000i) {
        let t = tk_exp(a);
        return tk_x(tk_x(0.5f * t) + tk_x(0.5f / t));
    }
    if (ix < 0x42b17217i) { return tk_x(0.5f * tk_exp(a)); }
    let e = tk_exp(tk_x(0.5f * a));
    return tk_x(tk_x(0.5f * e) * e);
}
""")

_lib("asinh", ("x", "log", "log1p"), f"""
// asinhf (musl)
fn tk_asinh(x: f32) -> f32 {{
    let u = bitcast<u32>(x);
    let i = u & 0x7fffffffu;
    let a = bitcast<f32>(i);
    var y: f32;
    if (i >= 0x7f800000u) {{ return x; }}
    if (i >= 0x45800000u) {{
        y = tk_x(tk_log(a) + {_f(0.693147180559945309417232121458176568)});
    }} else if (i >= 0x40000000u) {{
        y = tk_log(tk_x(tk_x(2.0f * a) + tk_x(1.0f / tk_x(sqrt(tk_x(tk_x(a * a) + 1.0f)) + a))));
    }} else if (i >= 0x39800000u) {{
        let aa = tk_x(a * a);
        y = tk_log1p(tk_x(a + tk_x(aa / tk_x(sqrt(tk_x(aa + 1.0f)) + 1.0f))));
    }} else {{
        y = a;
    }}
    return select(y, -y, (u >> 31u) != 0u);
}}
""")

_lib("acosh", ("x", "log", "log1p"), f"""
// acoshf (musl)
fn tk_acosh(x: f32) -> f32 {{
    let u = bitcast<u32>(x);
    let a = u & 0x7fffffffu;
    if ((u >> 31u) != 0u || x < 1.0f) {{ return tk_nan(); }}
    if (a >= 0x7f800000u) {{ return x; }}
    if (a < 0x40000000u) {{
        let t = tk_x(x - 1.0f);
        return tk_log1p(tk_x(t + sqrt(tk_x(tk_x(t * t) + tk_x(2.0f * t)))));
    }}
    if (a < 0x45800000u) {{
        return tk_log(tk_x(tk_x(2.0f * x) - tk_x(1.0f / tk_x(x + sqrt(tk_x(tk_x(x * x) - 1.0f))))));
    }}
    return tk_x(tk_log(x) + {_f(0.693147180559945309417232121458176568)});
}}
""")

_lib("atanh", ("x", "log1p"), """
// atanhf (musl)
fn tk_atanh(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    let i = u & 0x7fffffffu;
    var y = bitcast<f32>(i);
    if (i > 0x3f800000u) { return tk_nan(); }
    if (i == 0x3f800000u) { y = tk_inf(); }
    else if (i < 0x3f000000u) {
        if (i >= 0x32000000u) {
            y = tk_x(0.5f * tk_log1p(tk_x(tk_x(2.0f * y) + tk_x(tk_x(tk_x(2.0f * y) * y) / tk_x(1.0f - y)))));
        }
    } else {
        y = tk_x(0.5f * tk_log1p(tk_x(2.0f * tk_x(y / tk_x(1.0f - y)))));
    }
    return select(y, -y, (u >> 31u) != 0u);
}
""")


def _poly(var: str, coefs) -> str:
    """Horner form c0 + v*(c1 + v*(...)) with every step exact (tk_x)."""
    out = _f(coefs[-1])
    for c in reversed(coefs[:-1]):
        out = f"tk_x({_f(c)} + tk_x({var} * {out}))"
    return out


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

_lib("erf", ("x", "exp"), f"""
// erff / erfcf (FreeBSD s_erff.c)
fn tk_erf_small(x: f32) -> f32 {{   // erf(x)/x - 1 for |x| < 0.84375
    let z = tk_x(x * x);
    return tk_x({_poly("z", _PP)} / {_poly("z", _QQ)});
}}
fn tk_erf_mid(x: f32) -> f32 {{     // erf(|x|) - erx for 0.84375 <= |x| < 1.25
    let s = tk_x(abs(x) - 1.0f);
    return tk_x({_poly("s", _PA)} / {_poly("s", _QA)});
}}
fn tk_erfc_tail(x0: f32) -> f32 {{  // erfc(|x|) for 1.25 <= |x| < 28
    let x = abs(x0);
    let s = tk_x(1.0f / tk_x(x * x));
    var R: f32;
    var S: f32;
    if (bitcast<i32>(x) < 0x4036db6ei) {{ R = {_poly("s", _RA)}; S = {_poly("s", _SA)}; }}
    else {{ R = {_poly("s", _RB)}; S = {_poly("s", _SB)}; }}
    let z = bitcast<f32>(bitcast<u32>(x) & 0xffffe000u);
    let r = tk_x(tk_exp(tk_x(tk_x(-z * z) - 0.5625f)) * tk_exp(tk_x(tk_x(tk_x(z - x) * tk_x(z + x)) + tk_x(R / S))));
    return tk_x(r / x);
}}
fn tk_erf(x: f32) -> f32 {{
    let hx = bitcast<i32>(x);
    let ix = hx & 0x7fffffffi;
    if (ix >= 0x7f800000i) {{
        if (ix > 0x7f800000i) {{ return x; }}
        return select(1.0f, -1.0f, hx < 0i);
    }}
    if (ix < 0x3f580000i) {{
        if (ix < 0x31800000i) {{ return tk_x(x + tk_x({_f(1.2837916613e-01)} * x)); }}
        return tk_x(x + tk_x(x * tk_erf_small(x)));
    }}
    if (ix < 0x3fa00000i) {{
        let v = tk_x({_f(8.4506291151e-01)} + tk_erf_mid(x));
        return select(v, -v, hx < 0i);
    }}
    if (ix >= 0x40c00000i) {{ return select(1.0f, -1.0f, hx < 0i); }}
    let v = tk_x(1.0f - tk_erfc_tail(x));
    return select(v, -v, hx < 0i);
}}
fn tk_erfc(x: f32) -> f32 {{
    let hx = bitcast<i32>(x);
    let ix = hx & 0x7fffffffi;
    if (ix >= 0x7f800000i) {{
        if (ix > 0x7f800000i) {{ return x; }}
        return select(0.0f, 2.0f, hx < 0i);
    }}
    if (ix < 0x3f580000i) {{
        if (ix < 0x23800000i) {{ return tk_x(1.0f - x); }}
        let y = tk_erf_small(x);
        if (hx < 0x3e800000i) {{ return tk_x(1.0f - tk_x(x + tk_x(x * y))); }}
        return tk_x(0.5f - tk_x(tk_x(x * y) + tk_x(x - 0.5f)));
    }}
    if (ix < 0x3fa00000i) {{
        let pq = tk_erf_mid(x);
        if (hx >= 0i) {{ return tk_x(tk_x(1.0f - {_f(8.4506291151e-01)}) - pq); }}
        return tk_x(1.0f + tk_x({_f(8.4506291151e-01)} + pq));
    }}
    if (ix < 0x41e00000i) {{
        if (hx < 0i && ix >= 0x40c00000i) {{ return 2.0f; }}
        let r = tk_erfc_tail(x);
        if (hx > 0i) {{ return r; }}
        return tk_x(2.0f - r);
    }}
    return select(0.0f, 2.0f, hx < 0i);
}}
""")

_lib("hypot", ("x",), f"""
fn tk_hypot(x: f32, y: f32) -> f32 {{
    var a = abs(x);
    var b = abs(y);
    if (tk_isinf(a) || tk_isinf(b)) {{ return tk_inf(); }}
    if (tk_isnan(a) || tk_isnan(b)) {{ return tk_nan(); }}
    if (a < b) {{ let t = a; a = b; b = t; }}
    if (b == 0.0f) {{ return a; }}
    var s = 1.0f;
    if (a > {_f(2.0**60)}) {{ s = {_f(2.0**70)}; a = tk_x(a * {_f(2.0**-70)}); b = tk_x(b * {_f(2.0**-70)}); }}
    else if (a < {_f(2.0**-60)}) {{ s = {_f(2.0**-100)}; a = tk_x(a * {_f(2.0**100)}); b = tk_x(b * {_f(2.0**100)}); }}
    return tk_x(sqrt(tk_x(tk_x(a * a) + tk_x(b * b))) * s);
}}
""")

_lib("fma", ("x",), f"""
// tk.fma rounded once (the WGSL fma builtin may round a * b first: lavapipe's does), in f32
// and u32 arithmetic only. Boldo and Melquiond's emulation (IEEE TC 2008) on a and b scaled to
// [1, 2) and c scaled alike (a sticky 2^-60 when far below the product), so no intermediate
// under- or overflows: P = a b = p + e exactly (p the f32 product; e from the low 32 bits of
// the 48-bit integer product), c + p = s + t exactly (TwoSum), v = t + e rounded to odd,
// y = s + v rounded to nearest = the exact result rounded to 24 bits. Its exponent is then
// moved back in the bits (inf past the range). A result below 2^-126 is rounded again, to the
// multiples of 2^-149, from y and the sign of the exact x - y (x is on y's side of every
// midpoint of that grid except y itself: x - y decides only there). No frexp/ldexp (WGSL leaves
// them undefined out of range).
fn tk_fma_unpack(u: u32) -> vec2<i32> {{       // |f| = m 2^(E - 23), m in [2^23, 2^24), for u != 0
    let f = u & 0x7fffffu;
    let eb = i32(u >> 23u);
    let sh = countLeadingZeros(f) - 8u;          // subnormal f: normalized
    return select(vec2<i32>(i32(f | 0x800000u), eb - 127i), vec2<i32>(i32(f << sh), -126i - i32(sh)), eb == 0i);
}}
fn tk_fma(a: f32, b: f32, c: f32) -> f32 {{
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let uc = bitcast<u32>(c);
    let aa = ua & 0x7fffffffu;
    let ab = ub & 0x7fffffffu;
    let ac = uc & 0x7fffffffu;
    if (aa >= 0x7f800000u || ab >= 0x7f800000u || aa == 0u || ab == 0u) {{
        return tk_x(tk_y(tk_x(a * b)) + c);          // inf, NaN or zero product: exact as it is
    }}
    if (ac >= 0x7f800000u) {{ return c; }}           // finite a b (it cannot overflow) + inf/NaN
    if (ac == 0u) {{ return tk_x(a * b); }}          // + 0: a * b rounded once, the product's sign
    let na = tk_fma_unpack(aa);
    let nb = tk_fma_unpack(ab);
    let nc = tk_fma_unpack(ac);
    let ex = na.y + nb.y;                          // a b = P 2^ex, P = ma mb in [1, 4)
    let ec = nc.y - ex;                            // c = cs 2^ex, cs in [2^ec, 2^(ec + 1))
    if (ec > 60i) {{ return c; }}                    // |a b| < 2^-36 ulp(c): c is the result
    let sp = (ua ^ ub) & 0x80000000u;
    let ma = bitcast<f32>((u32(na.x) & 0x7fffffu) | 0x3f800000u);
    let mb = bitcast<f32>((u32(nb.x) & 0x7fffffu) | 0x3f800000u);
    let cs = bitcast<f32>((uc & 0x80000000u) | select((u32(ec + 127i) << 23u) | (u32(nc.x) & 0x7fffffu),
                                                     0x21800000u, ec < -60i));   // (2^-60: sticky)
    let pm = tk_x(ma * mb);
    let up = bitcast<u32>(pm);
    let pl = ((up & 0x7fffffu) | 0x800000u) << ((up >> 23u) - 104u);    // low 32 bits of pm 2^46
    let em = tk_x(tk_x(f32(bitcast<i32>(u32(na.x) * u32(nb.x) - pl))) * {_f(2.0**-46)});   // P - pm
    let p = bitcast<f32>(up ^ sp);
    let e = bitcast<f32>(bitcast<u32>(em) ^ sp);
    let s = tk_x(tk_y(cs) + p);                    // TwoSum(cs, p)
    let bs = tk_x(tk_y(s) - cs);
    let t = tk_x(tk_y(tk_x(tk_y(cs) - tk_x(tk_y(s) - bs))) + tk_x(tk_y(p) - bs));
    let v = tk_x(tk_y(t) + e);                     // TwoSum(t, e)
    let bv = tk_x(tk_y(v) - t);
    let ve = tk_x(tk_y(tk_x(tk_y(t) - tk_x(tk_y(v) - bv))) + tk_x(tk_y(e) - bv));
    let vu = bitcast<u32>(v);
    var vo = vu;
    if (ve != 0.0f && (vu & 1u) == 0u) {{           // inexact and even: round to odd
        vo = select(vu - 1u, vu + 1u, (ve > 0.0f) == (v > 0.0f));
    }}
    let y = tk_x(tk_y(s) + bitcast<f32>(vo));
    let uy = bitcast<u32>(y);
    let ay = uy & 0x7fffffffu;
    let er = i32(ay >> 23u) - 127i + ex;           // the result's exponent
    if (ay == 0u) {{ return y; }}                    // an exact 0 (+0: c = -a b)
    if (er >= -126i) {{
        return bitcast<f32>(select(uy + (bitcast<u32>(ex) << 23u), (uy & 0x80000000u) | 0x7f800000u, er > 127i));
    }}
    // below 2^-126: x - y = w + d, w = s + vo - y (exact: TwoSum), d = t + e - vo. d != 0 only
    // when vo is odd and |d| < ulp(vo), and vo < 2 ulp(s) then (no cancellation in c + p, else
    // t = 0 and v = e exactly), so y cannot hold vo's last bit: w != 0, |w| >= ulp(vo) > |d|.
    // x - y has w's sign.
    let by = tk_x(tk_y(y) - s);
    let rs = tk_x(tk_y(tk_x(tk_y(s) - tk_x(tk_y(y) - by))) + tk_x(tk_y(bitcast<f32>(vo)) - by));
    let sh = u32(-126i - er);                      // >= 1 bits of y below 2^-149
    let my = (ay & 0x7fffffu) | 0x800000u;
    var r = 0u;
    if (sh <= 24u) {{
        let q = my >> sh;
        let rem = my & ((1u << sh) - 1u);
        let half = 1u << (sh - 1u);
        let tie = rem == half && ((rs != 0.0f && (rs > 0.0f) == (y > 0.0f)) || (rs == 0.0f && (q & 1u) == 1u));
        r = q + select(0u, 1u, rem > half || tie);
    }}
    return bitcast<f32>((uy & 0x80000000u) | r);
}}
""")

_lib("pow", ("x", "scalbn"), f"""
// powf (FreeBSD e_powf.c)
fn tk_trunc12(v: f32) -> f32 {{ return bitcast<f32>(bitcast<u32>(v) & 0xfffff000u); }}
// a zero with the sign of s, in bits: the driver folded `sn * 0.0` to +0.0, so pow(-x, odd)
// that underflows gave +0.0 (NumPy -0.0)
fn tk_signed_zero(s: f32) -> f32 {{ return bitcast<f32>(bitcast<u32>(s) & 0x80000000u); }}
fn tk_pow(x: f32, y: f32) -> f32 {{
    let hx = bitcast<i32>(x);
    let hy = bitcast<i32>(y);
    var ix = hx & 0x7fffffffi;
    let iy = hy & 0x7fffffffi;
    if (iy == 0i) {{ return 1.0f; }}
    if (hx == 0x3f800000i) {{ return 1.0f; }}
    if (ix > 0x7f800000i || iy > 0x7f800000i) {{ return tk_nan(); }}
    var yisint = 0i;
    if (hx < 0i) {{
        if (iy >= 0x4b800000i) {{ yisint = 2i; }}
        else if (iy >= 0x3f800000i) {{
            let k = (iy >> 23u) - 0x7fi;
            let j = iy >> u32(23i - k);
            if ((j << u32(23i - k)) == iy) {{ yisint = 2i - (j & 1i); }}
        }}
    }}
    if (iy == 0x7f800000i) {{
        if (ix == 0x3f800000i) {{ return 1.0f; }}
        if (ix > 0x3f800000i) {{ return select(0.0f, y, hy >= 0i); }}
        return select(0.0f, -y, hy < 0i);
    }}
    if (iy == 0x3f800000i) {{
        if (hy < 0i) {{ return tk_x(1.0f / x); }}
        return x;
    }}
    if (hy == 0x40000000i) {{ return tk_x(x * x); }}
    if (hy == 0x3f000000i && hx >= 0i) {{ return sqrt(x); }}
    var ax = abs(x);
    if (ix == 0x7f800000i || ix == 0i || ix == 0x3f800000i) {{
        var z = ax;
        if (hy < 0i) {{ if (ix == 0i) {{ z = tk_inf(); }} else {{ z = tk_x(1.0f / z); }} }}
        if (hx < 0i) {{
            if (((ix - 0x3f800000i) | yisint) == 0i) {{ z = tk_nan(); }}
            else if (yisint == 1i) {{ z = -z; }}
        }}
        return z;
    }}
    let n0 = i32(bitcast<u32>(hx) >> 31u) - 1i;
    if ((n0 | yisint) == 0i) {{ return tk_nan(); }}
    var sn = 1.0f;
    if ((n0 | (yisint - 1i)) == 0i) {{ sn = -1.0f; }}
    var t1: f32;
    var t2: f32;
    if (iy > 0x4d000000i) {{
        if (ix < 0x3f7ffff8i) {{ return select(tk_signed_zero(sn), tk_x(sn * tk_inf()), hy < 0i); }}
        if (ix > 0x3f800007i) {{ return select(tk_signed_zero(sn), tk_x(sn * tk_inf()), hy > 0i); }}
        let t = tk_x(ax - 1.0f);
        let w = tk_x(tk_x(t * t) * tk_x(0.5f - tk_x(t * tk_x({_f(0.333333333333)} - tk_x(t * 0.25f)))));
        let u = tk_x({_f(1.4426879883e+00)} * t);
        let v = tk_x(tk_x(t * {_f(7.0526075433e-06)}) - tk_x(w * {_f(1.4426950216e+00)}));
        t1 = tk_trunc12(tk_x(u + v));
        t2 = tk_x(v - tk_x(t1 - u));
    }} else {{
        var n = 0i;
        if (ix < 0x00800000i) {{ ax = tk_x(ax * {_f(2.0**24)}); n = n - 24i; ix = bitcast<i32>(ax); }}
        n = n + ((ix >> 23u) - 0x7fi);
        let j = ix & 0x007fffffi;
        ix = j | 0x3f800000i;
        var k = 0i;
        if (j <= 0x1cc471i) {{ k = 0i; }}
        else if (j < 0x5db3d7i) {{ k = 1i; }}
        else {{ k = 0i; n = n + 1i; ix = ix - 0x00800000i; }}
        ax = bitcast<f32>(ix);
        let bp = select(1.0f, 1.5f, k == 1i);
        let dp_h = select(0.0f, {_f(5.84960938e-01)}, k == 1i);
        let dp_l = select(0.0f, {_f(1.56322085e-06)}, k == 1i);
        let u = tk_x(ax - bp);
        let v = tk_x(1.0f / tk_x(ax + bp));
        let s = tk_x(u * v);
        let s_h = tk_trunc12(s);
        var t_h = bitcast<f32>((((ix >> 1u) & bitcast<i32>(0xfffff000u)) | 0x20000000i) + 0x00400000i + (k << 21u));
        let t_l = tk_x(ax - tk_x(t_h - bp));
        let s_l = tk_x(v * tk_x(tk_x(u - tk_x(s_h * t_h)) - tk_x(s_h * t_l)));
        var s2 = tk_x(s * s);
        var r = tk_x(tk_x(s2 * s2) * {_poly("s2", (6.0000002384e-01, 4.2857143283e-01, 3.3333334327e-01, 2.7272811532e-01, 2.3066075146e-01, 2.0697501302e-01))});
        r = tk_x(r + tk_x(s_l * tk_x(s_h + s)));
        s2 = tk_x(s_h * s_h);
        t_h = tk_trunc12(tk_x(tk_x(3.0f + s2) + r));
        let t_l2 = tk_x(r - tk_x(tk_x(t_h - 3.0f) - s2));
        let u2 = tk_x(s_h * t_h);
        let v2 = tk_x(tk_x(s_l * t_h) + tk_x(t_l2 * s));
        let p_h = tk_trunc12(tk_x(u2 + v2));
        let p_l = tk_x(v2 - tk_x(p_h - u2));
        let z_h = tk_x({_f(9.6191406250e-01)} * p_h);
        let z_l = tk_x(tk_x(tk_x({_f(-1.1736857402e-04)} * p_h) + tk_x(p_l * {_f(9.6179670095e-01)})) + dp_l);
        let t = f32(n);
        t1 = tk_trunc12(tk_x(tk_x(tk_x(z_h + z_l) + dp_h) + t));
        t2 = tk_x(z_l - tk_x(tk_x(tk_x(t1 - t) - dp_h) - z_h));
    }}
    let y1 = tk_trunc12(y);
    let p_l = tk_x(tk_x(tk_x(y - y1) * t1) + tk_x(y * t2));
    var p_h = tk_x(y1 * t1);
    let z = tk_x(p_l + p_h);
    let j = bitcast<i32>(z);
    if (j > 0x43000000i) {{ return tk_x(sn * tk_inf()); }}
    else if (j == 0x43000000i) {{ if (tk_x(p_l + {_f(4.2995665694e-08)}) > tk_x(z - p_h)) {{ return tk_x(sn * tk_inf()); }} }}
    else if ((j & 0x7fffffffi) > 0x43160000i) {{ return tk_signed_zero(sn); }}
    else if (j == bitcast<i32>(0xc3160000u)) {{ if (p_l <= tk_x(z - p_h)) {{ return tk_signed_zero(sn); }} }}
    let i = j & 0x7fffffffi;
    var k = (i >> 23u) - 0x7fi;
    var n = 0i;
    if (i > 0x3f000000i) {{
        n = j + (0x00800000i >> u32(k + 1i));
        k = ((n & 0x7fffffffi) >> 23u) - 0x7fi;
        let t = bitcast<f32>(n & ~(0x007fffffi >> u32(k)));
        n = ((n & 0x007fffffi) | 0x00800000i) >> u32(23i - k);
        if (j < 0i) {{ n = -n; }}
        p_h = tk_x(p_h - t);
    }}
    let t = bitcast<f32>(bitcast<u32>(tk_x(p_l + p_h)) & 0xffff8000u);
    let u = tk_x(t * {_f(6.93145752e-01)});
    let v = tk_x(tk_x(tk_x(p_l - tk_x(t - p_h)) * {_f(6.9314718246e-01)}) + tk_x(t * {_f(1.42860654e-06)}));
    var zz = tk_x(u + v);
    let w = tk_x(v - tk_x(zz - u));
    let tt = tk_x(zz * zz);
    let tp = {_poly("tt", (1.6666667163e-01, -2.7777778450e-03, 6.6137559770e-05, -1.6533901999e-06, 4.1381369442e-08))};
    let t1b = tk_x(zz - tk_x(tt * tp));
    let r = tk_x(tk_x(tk_x(zz * t1b) / tk_x(t1b - 2.0f)) - tk_x(w + tk_x(zz * w)));
    zz = tk_x(1.0f - tk_x(r - zz));
    var jj = bitcast<i32>(zz);
    jj = jj + (n << 23u);
    if ((jj >> 23u) <= 0i) {{ zz = tk_scalbn(zz, n); }} else {{ zz = bitcast<f32>(jj); }}
    return tk_x(sn * zz);
}}
""")

_lib("half", (), """
// binary16 <-> float32, bit-exact with NumPy (round to nearest even, NaN payload kept)
fn tk_shr_rne(v: u32, s: u32) -> u32 {
    var q = v >> s;
    let rem = v & ((1u << s) - 1u);
    let hw = 1u << (s - 1u);
    if (rem > hw || (rem == hw && (q & 1u) != 0u)) { q = q + 1u; }
    return q;
}
fn tk_f16_to_f32(h: u32) -> f32 {
    let sg = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0x1fu) { return bitcast<f32>(sg | 0x7f800000u | (m << 13u)); }
    if (e == 0u) { return bitcast<f32>(sg | bitcast<u32>(f32(m) * 5.9604644775390625e-08f)); }
    return bitcast<f32>(sg | ((e + 112u) << 23u) | (m << 13u));
}
fn tk_f32_to_f16(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sg = (x >> 16u) & 0x8000u;
    let ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) { return sg | 0x7c00u; }
        var r = 0x7c00u | ((ax & 0x7fffffu) >> 13u);
        if (r == 0x7c00u) { r = 0x7c01u; }
        return sg | r;
    }
    if (ax >= 0x477ff000u) { return sg | 0x7c00u; }
    if (ax >= 0x38800000u) {
        let r = ax + 0x0fffu + ((ax >> 13u) & 1u);
        return sg | ((r - 0x38000000u) >> 13u);
    }
    if (ax <= 0x33000000u) { return sg; }
    let e = ax >> 23u;
    let m = (ax & 0x7fffffu) | 0x800000u;
    return sg | tk_shr_rne(m, 126u - e);
}
""")

_lib("bf16", (), """
// bfloat16 <-> float32 (round to nearest even; NaN -> quiet NaN), as ml_dtypes
fn tk_bf16_to_f32(b: u32) -> f32 { return bitcast<f32>(b << 16u); }
fn tk_f32_to_bf16(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) { return ((x >> 16u) & 0x8000u) | 0x7fc0u; }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}
""")

_lib("fp8", ("half",), """
// float8 e4m3fn / e5m2 <-> float32 (round to nearest even), as ml_dtypes
fn tk_e4m3_to_f32(b: u32) -> f32 {
    let sg = (b & 0x80u) << 24u;
    let e = (b >> 3u) & 0xfu;
    let m = b & 0x7u;
    if ((b & 0x7fu) == 0x7fu) { return bitcast<f32>(sg | 0x7fc00000u); }
    if (e == 0u) { return bitcast<f32>(sg | bitcast<u32>(f32(m) * 0.001953125f)); }
    return bitcast<f32>(sg | ((e + 120u) << 23u) | (m << 20u));
}
fn tk_f32_to_e4m3(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sg = (x >> 24u) & 0x80u;
    let ax = x & 0x7fffffffu;
    if (ax > 0x43e80000u) { return sg | 0x7fu; }
    if (ax >= 0x3c800000u) {
        let r = ax + 0x7ffffu + ((ax >> 20u) & 1u);
        return sg | ((r - 0x3c000000u) >> 20u);
    }
    if (ax <= 0x3a800000u) { return sg; }
    let e = ax >> 23u;
    let m = (ax & 0x7fffffu) | 0x800000u;
    return sg | tk_shr_rne(m, 141u - e);
}
fn tk_e5m2_to_f32(b: u32) -> f32 {
    let sg = (b & 0x80u) << 24u;
    let e = (b >> 2u) & 0x1fu;
    let m = b & 0x3u;
    if (e == 0x1fu) { return bitcast<f32>(sg | select(0x7f800000u, 0x7fc00000u, m != 0u)); }
    if (e == 0u) { return bitcast<f32>(sg | bitcast<u32>(f32(m) * 1.52587890625e-05f)); }
    return bitcast<f32>(sg | ((e + 112u) << 23u) | (m << 21u));
}
fn tk_f32_to_e5m2(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sg = (x >> 24u) & 0x80u;
    let ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) { return sg | 0x7eu; }
    if (ax >= 0x47700000u) { return sg | 0x7cu; }
    if (ax >= 0x38800000u) {
        let r = ax + 0xfffffu + ((ax >> 21u) & 1u);
        return sg | ((r - 0x38000000u) >> 21u);
    }
    if (ax <= 0x37000000u) { return sg; }
    let e = ax >> 23u;
    let m = (ax & 0x7fffffu) | 0x800000u;
    return sg | tk_shr_rne(m, 134u - e);
}
""")

_lib("philox", ("log",), """
// Philox4x32-10 (bit-identical to tinykernels/random.py); keys and counters are vec2<u32> (lo, hi)
fn tk_mulhilo(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>(a * b, a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
fn tk_philox(c0_: u32, c1_: u32, c2_: u32, c3_: u32, k0_: u32, k1_: u32) -> vec4<u32> {
    var c0 = c0_; var c1 = c1_; var c2 = c2_; var c3 = c3_; var k0 = k0_; var k1 = k1_;
    for (var i = 0i; i < 10i; i = i + 1i) {
        if (i > 0i) { k0 = k0 + 0x9e3779b9u; k1 = k1 + 0xbb67ae85u; }
        let p0 = tk_mulhilo(0xd2511f53u, c0);
        let p1 = tk_mulhilo(0xcd9e8d57u, c2);
        let n0 = p1.y ^ c1 ^ k0;
        let n2 = p0.y ^ c3 ^ k1;
        c1 = p1.x;
        c3 = p0.x;
        c0 = n0;
        c2 = n2;
    }
    return vec4<u32>(c0, c1, c2, c3);
}
fn tk_rand_bits(key: vec2<u32>, ctr: vec2<u32>) -> u32 {
    return tk_philox(ctr.x, ctr.y, 0u, 0u, key.x, key.y).x;
}
fn tk_rand_uniform(key: vec2<u32>, ctr: vec2<u32>) -> f32 {
    return f32(tk_rand_bits(key, ctr) >> 8u) * 5.9604644775390625e-08f;
}
fn tk_rand_normal(key: vec2<u32>, ctr: vec2<u32>) -> f32 {
    let r = tk_philox(ctr.x, ctr.y, 0u, 0u, key.x, key.y);
    let u1 = f32((r.x >> 8u) + 1u) * 5.9604644775390625e-08f;
    let u2 = f32(r.y >> 8u) * 5.9604644775390625e-08f;
    return tk_x(sqrt(tk_x(-2.0f * tk_log(u1))) * cos(tk_x(6.2831853071795864769f * u2)));
}
""")


def library(names) -> str:
    """The WGSL text of helper sections ``names`` and their dependencies, in a fixed order."""
    want: list = []

    def add(n):
        if n in want:
            return
        for d in _LIB[n][0]:
            add(d)
        want.append(n)
    for n in sorted(names):
        add(n)
    order = list(_LIB)
    return "".join(_LIB[n][1] for n in sorted(want, key=order.index))


#: WGSL text that repeats for free (a name, a literal, the opaque zero)
_ATOM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|-?[0-9][0-9a-fA-FxXpP.+-]*[iuf]?|bitcast<f32>\(tk_z\)")


# functions: IR name -> (helper function, library section); the rest are WGSL builtins
_SOFT = {"exp": ("tk_exp", "exp"), "log": ("tk_log", "log"), "log2": ("tk_log2", "log2"),
         "log10": ("tk_log10", "log10"), "log1p": ("tk_log1p", "log1p"), "expm1": ("tk_expm1", "expm1"),
         "asin": ("tk_asin", "asin"), "acos": ("tk_acos", "acos"), "atan": ("tk_atan", "atan"),
         "atan2": ("tk_atan2", "atan2"), "sinh": ("tk_sinh", "sinh"), "cosh": ("tk_cosh", "cosh"),
         "tanh": ("tk_tanh", "tanh"), "asinh": ("tk_asinh", "asinh"), "acosh": ("tk_acosh", "acosh"),
         "atanh": ("tk_atanh", "atanh"), "erf": ("tk_erf", "erf"), "erfc": ("tk_erfc", "erf"),
         "pow": ("tk_pow", "pow"), "hypot": ("tk_hypot", "hypot"), "fmod": ("tk_fmod", "fmod"),
         "copysign": ("tk_copysign", "x"), "sin": ("tk_sin", "trig"), "cos": ("tk_cos", "trig"),
         "tan": ("tk_tan", "trig"), "fma": ("tk_fma", "fma")}
_BUILTIN = {"sqrt": "sqrt", "floor": "floor", "ceil": "ceil",
            "trunc": "trunc", "fabs": "abs", "rint": "round"}


# --------------------------------------------------------------------------- capability check

def _error(loc: N.Loc, msg: str, kernel: str) -> CompileError:
    return N.error_at(msg, loc, kernel)


def _unsupported(d: DType, loc: N.Loc, kernel: str, what: str = "") -> CompileError:
    return _error(loc, f"{d.name}{what} is not supported on WebGPU: {_WHY[d.name]}", kernel)


def narrow64(e):
    """The <= 32-bit integer (or bool) expression whose value the int64 expression ``e`` holds,
    or None. The frontend widens mixed comparisons to int64 (exact for Python ints on 64-bit
    backends); on WebGPU such a comparison is done exactly in 32 bits instead."""
    if isinstance(e, N.Cast) and e.ty.dtype == D.int64:
        src = e.a.ty.dtype
        if src.kind == "b" or (src.is_int and src.bits <= 32):
            return e.a
    if isinstance(e, N.Const) and e.ty.dtype == D.int64 and isinstance(e.value, int):
        if -(1 << 31) <= e.value < (1 << 31):
            return N.Const(Ty(D.int32), e.loc, int(e.value))
        if 0 <= e.value < (1 << 32):
            return N.Const(Ty(D.uint32), e.loc, int(e.value))
    return None


def _narrow_compare(e):
    """(a, b) of an int64 comparison that can be done exactly in 32 bits, or None."""
    if isinstance(e, N.Compare) and e.a.ty.dtype == D.int64 and e.b.ty.dtype == D.int64:
        a, b = narrow64(e.a), narrow64(e.b)
        if a is not None and b is not None:
            return a, b
    return None


def check_support(k: N.Kernel) -> None:
    """Raise CompileError at the first use of what WGSL lacks: 64-bit types (except uint64
    random keys, which travel as two 32-bit words)."""
    u64_vars = {v for v, t in k.locals.items() if t.dtype == D.uint64}

    def u64_ok(e) -> None:
        """``e`` is used as a uint64 value: only keys, counters and copies of them."""
        if isinstance(e, (N.Arg, N.Const)) or (isinstance(e, N.Var) and e.name in u64_vars):
            return
        if isinstance(e, N.Cast) and e.a.ty.dtype.bits <= 32 and not e.a.ty.dtype.is_float:
            expr(e.a)
            return
        if isinstance(e, N.Cast) and e.a.ty.dtype == D.uint64:
            u64_ok(e.a)
            return
        if isinstance(e, N.Select):
            expr(e.cond)
            u64_ok(e.a)
            u64_ok(e.b)
            return
        raise _unsupported(e.ty.dtype, e.loc, k.name, " arithmetic")

    def expr(e) -> None:
        if isinstance(e, N.Call) and e.fn.startswith("rand_"):
            for a in e.args:
                if a.ty.dtype == D.uint64:
                    u64_ok(a)
                else:
                    expr(a)
            return
        if isinstance(e, N.Cast) and e.a.ty.dtype == D.uint64 and e.ty.dtype.bits <= 32 \
                and not e.ty.dtype.is_float:
            u64_ok(e.a)         # the low word of a key
            return
        nc = _narrow_compare(e)
        if nc is not None:
            expr(nc[0])
            expr(nc[1])
            return
        if isinstance(e, (N.Load, N.Atomic)) and e.array.dtype.name in UNSUPPORTED:
            raise _unsupported(e.array.dtype, e.loc, k.name, f" array '{e.array.name}'")
        if e.ty.dtype.name in UNSUPPORTED:
            raise _unsupported(e.ty.dtype, e.loc, k.name)
        for c in N.child_exprs(e):
            expr(c)

    for s in N.walk_stmts(k.body):
        if isinstance(s, N.Print):            # printed through the tk_print buffer (WGSLRenderer.s_Print)
            for p in s.parts:
                if not isinstance(p, str):
                    (u64_ok if p.ty.dtype == D.uint64 else expr)(p)
            continue
        if isinstance(s, N.AllocArray) and s.array.dtype.name in UNSUPPORTED:
            raise _unsupported(s.array.dtype, s.loc, k.name, f" {s.array.space} array")
        if isinstance(s, N.Collective) and s.ty.dtype.name in UNSUPPORTED:
            raise _unsupported(s.ty.dtype, s.loc, k.name)
        if isinstance(s, N.Store) and s.array.dtype.name in UNSUPPORTED:
            raise _unsupported(s.array.dtype, s.loc, k.name, f" array '{s.array.name}'")
        if isinstance(s, N.Assign) and s.var in u64_vars:
            u64_ok(s.value)
            continue
        if isinstance(s, N.For) and k.locals.get(s.var, Ty(D.int32)).dtype.name in UNSUPPORTED:
            raise _unsupported(k.locals[s.var].dtype, s.loc, k.name)
        for e in N.stmt_exprs(s):
            expr(e)


# --------------------------------------------------------------------------- the renderer


def _constant_outside(a: N.ArrayInfo, idx: list) -> bool:
    """Whether every index is an integer constant and one is negative, or past the extent of
    a fixed-size (local or private) array."""
    if not all(isinstance(i, N.Const) and isinstance(i.value, int) and not isinstance(i.value, bool) for i in idx):
        return False
    return any(i.value < 0 or (a.space != "global" and k < len(a.shape) and i.value >= a.shape[k])
               for k, i in enumerate(idx))

def _const_tree(e: N.Expr) -> bool:
    """Whether ``e`` is computed from constants only (a compiler can fold it)."""
    if isinstance(e, N.Const):
        return True
    if isinstance(e, (N.BinOp, N.Unary, N.Compare, N.Select, N.Cast)) or (isinstance(e, N.Call) and e.args):
        return all(_const_tree(c) for c in N.child_exprs(e))
    return False


class _Scope:
    """A construct that ``break`` leaves: a user loop, or the one-pass loop wrapped around an
    inlined function (``func``) or an item piece (``item``)."""

    def __init__(self, kind: str, label=None):
        self.kind, self.label = kind, label
        self.crossing: list = []       # exit targets that left through this construct


class WGSLRenderer:
    """WGSL source of one specialized kernel (see the module docstring)."""

    def __init__(self, kernel: N.Kernel, plan: GroupPlan | None, ranges: int, exact: bool = True):
        self.k, self.plan, self.ranges, self.exact = kernel, plan, ranges, exact
        self.lines: list = []
        self.depth = 1
        self.tmp = 0
        self.last_line = None
        self.libs: set = {"x"}
        self.pre: list = []                 # statements an expression needs first
        self.prints: list = []              # tk.print sites: (texts, value kinds), numbered in order
        self.scopes: list = []
        self.item = None                    # the ItemLoop being rendered
        self.scratch: dict = {}             # collective scratch: WGSL type -> name
        self.array_ids: list = []           # debug mode: array names by id
        self.flags: set = set()
        self.wg = _prod(kernel.workgroup)
        self.atomic_arrays, self.stored_arrays = set(), set()
        for s in N.walk_stmts(kernel.body):
            if isinstance(s, N.Store):
                self.stored_arrays.add(s.array.name)
            for e in N.stmt_exprs(s):
                for x in N.walk_expr(e):
                    if isinstance(x, N.Atomic):
                        self.atomic_arrays.add(x.array.name)
        self.args_layout: list = []         # (field, wgsl type, what) of the uniform argument struct
        self.workgroup_bytes = 0            # workgroup memory the module declares
        self.local_loc = None               # where the first localmem is allocated

    # --- small pieces ---------------------------------------------------------------------

    def w(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def flush(self) -> None:
        for ln in self.pre:
            self.w(ln)
        self.pre = []

    def fresh(self, base="t") -> str:
        self.tmp += 1
        return f"tk_{base}{self.tmp}"

    def once(self, a: str, c: str) -> str:
        """``a`` (of WGSL type ``c``) where the rendering uses it more than once: a name or
        literal as it is, anything else bound to a ``let`` first. Repeating an expression's text
        repeats its work, and each repeat of a call inlines the helper again: a float -> u32
        conversion of a clamp of ``a // b`` held 12 copies of tk_floordiv_f32 (4 loops each),
        which lavapipe took minutes to compile (fuzzer seed 46400086)."""
        if _ATOM.fullmatch(a):
            return a
        t = self.fresh("v")
        self.pre.append(f"let {t}: {c} = {a};")
        return t

    def at(self, loc) -> None:
        if loc is not None and loc.line and loc.line != self.last_line:
            self.w(f"// {loc.file}:{loc.line}")
            self.last_line = loc.line

    def var(self, name: str) -> str:
        return f"v_{mangle(name)}"

    def arg(self, name: str) -> str:
        return f"p_{mangle(name)}"

    def array_name(self, a: N.ArrayInfo) -> str:
        return f"a_{mangle(a.name)}"

    def x(self, text: str) -> str:
        """An exactly rounded float result (see tk_x)."""
        return f"tk_x({text})" if self.exact else f"({text})"

    # --- constants --------------------------------------------------------------------------

    def const(self, value, t: Ty, loc=None) -> str:
        d = t.dtype
        if d.kind == "b":
            return "true" if value else "false"
        if d.is_int:
            v = int(value)
            if d == D.uint64:
                v &= (1 << 64) - 1
                return f"vec2<u32>({v & 0xffffffff}u, {v >> 32}u)"
            if d.kind == "u":
                if t.weak and not 0 <= v < 1 << 32:
                    raise _error(loc or N.NOLOC, f"the integer {v} does not fit in 32 bits (WebGPU has no "
                                 "64-bit integers)", self.k.name)
                return f"{v & 0xffffffff}u"
            if not -(1 << 31) <= v < (1 << 31):
                if t.weak:
                    raise _error(loc or N.NOLOC, f"the integer {v} does not fit in 32 bits (WebGPU has no "
                                 "64-bit integers; Python ints are int32 here)", self.k.name)
                v = (v + (1 << 31)) % (1 << 32) - (1 << 31)
            if v == -(1 << 31):
                return "(-2147483647i - 1i)"
            return f"{v}i" if v >= 0 else f"({v}i)"
        v = float(value)
        if math.isnan(v):                # the sign of a NaN shows in copysign
            return "(-tk_nan())" if math.copysign(1, v) < 0 else "tk_nan()"
        if math.isinf(v):
            return "tk_inf()" if v > 0 else "(-tk_inf())"
        import numpy as np
        with np.errstate(over="ignore"):
            f32 = float(np.float32(v))
        if math.isinf(f32):
            return "tk_inf()" if v > 0 else "(-tk_inf())"
        if f32 == 0:       # opaque: Mesa's NIR folds x * 0.0 to 0.0 (NaN, inf) and x + 0.0 to x (-0.0)
            return "bitcast<f32>(tk_z)" if math.copysign(1.0, f32) > 0 else "bitcast<f32>(0x80000000u | tk_z)"
        return _f(f32) if math.copysign(1.0, f32) > 0 else f"({_f(f32)})"

    # --- expressions ------------------------------------------------------------------------

    def expr(self, e: N.Expr) -> str:
        if isinstance(e, N.Const) or getattr(self, "_in_const_tree", False) or ctype(e.ty) != "f32" \
                or not _const_tree(e):
            return getattr(self, "e_" + type(e).__name__)(e)
        # a float computed from constants only (f32(ipow(1, -8)), an f16 round trip of one): naga
        # and NIR fold it, and NIR then folds x * 0.0 to 0.0 and x + -0.0 to x as for a literal
        # zero (see const); made opaque where it is made, wherever it goes (fuzzer 44001178)
        self._in_const_tree = True
        try:
            return f"tk_x({getattr(self, 'e_' + type(e).__name__)(e)})"
        finally:
            self._in_const_tree = False

    def e_Const(self, e):
        return self.const(e.value, e.ty, e.loc)

    def e_Var(self, e):
        return self.var(e.name)

    def e_Arg(self, e):
        return self.arg(e.name)

    def e_Shape(self, e):
        a = e.array
        return f"tk_a.{self.array_name(a)}_sh{e.dim}" if a.space == "global" else f"{a.shape[e.dim]}i"

    def e_Index(self, e):
        d = e.dim
        if e.kind == "groupsize":
            return f"{self.k.workgroup[d]}i"
        return {"global_linear": "tk_gl", "global": f"tk_g{d}", "global_pos": f"tk_p{d}",
                "local_linear": "tk_ll", "local": f"tk_l{d}", "group_linear": "tk_grl",
                "group": f"tk_gr{d}", "ndrange": f"tk_n{d}", "ngroups": f"tk_ng{d}"}[e.kind]

    def wrap(self, d: DType, text: str) -> str:
        """Wrap an i32/u32 result to an 8- or 16-bit type (no-op for 32-bit types)."""
        if d.is_int and d.bits < 32:
            if d.kind == "i":       # (OR tk_z: naga rejects a constant << that overflows i32)
                sh = 32 - d.bits
                return f"(((({text}) | bitcast<i32>(tk_z)) << {sh}u) >> {sh}u)"
            return f"(({text}) & {_mask(d.bits)})"
        return f"({text})"

    def as_i32(self, e: N.Expr) -> str:
        """An index value as i32."""
        c = ctype(e.ty)
        s = self.expr(e)
        if c == "i32":
            return s
        if c == "bool":
            return f"select(0i, 1i, {s})"
        if c == "vec2<u32>":
            return f"i32(({s}).x)"
        return f"i32({s})"

    def e_BinOp(self, e):
        op, d = e.op, e.ty.dtype
        if op in ("and", "or"):
            return self.logic(e)
        a, b = self.expr(e.a), self.expr(e.b)
        c = ctype(e.ty)
        if c == "f32":
            if isinstance(e.a, N.Const) and isinstance(e.b, N.Const):
                # keep WGSL from constant-folding (1.0 / 0.0 is an error there); tk_y for + and -:
                # tk_x(tk_nan()) + -tk_nan() was folded to 0 (NaN + -NaN, e - e: see tk_y), so a
                # chained comparison with it ran its second call (fuzzer seed 90100752)
                a = f"tk_y({a})" if op in ("+", "-") else f"tk_x({a})"
            elif isinstance(e.b, N.Const) and e.b.value == 0:
                b = f"tk_x({b})"           # x + 0.0 and x * 0.0 are not x and 0.0 for -0.0, inf, NaN
            elif isinstance(e.a, N.Const) and e.a.value == 0:
                a = f"tk_x({a})"
            elif op in ("+", "-"):
                a = f"tk_y({a})"           # e - e, e + -e: NaN for inf and NaN e (see tk_y)
            elif a == b and op == "/":
                a = f"tk_x({a})"           # x / x is NaN for 0, inf and NaN: keep compilers from folding it
            if op in ("+", "-", "*"):
                return self.x(f"{a} {op} {b}")
            if op == "/":         # an opaque divisor: NIR folded x / 0.0 (a constant) to NaN
                return self.x(f"{a} / {b if b.startswith('tk_x(') else f'tk_x({b})'}")
            if op in ("//", "%"):
                self.libs.add("floatdiv")
                return f"tk_{'floordiv' if op == '//' else 'mod'}_f32({a}, {b})"
            if op == "**":
                self.libs.add("pow")
                return f"tk_pow({a}, {b})"
            raise AssertionError(op)
        if c == "bool":
            if op in ("&", "|"):
                return f"({a} {op} {b})"
            if op in ("^", "-"):
                return f"({a} != {b})"
            if op == "+":
                return f"({a} || {b})"
            if op in ("*", "//"):
                return f"({a} && {b})"
            if op == "%":
                return "false"
            raise _error(e.loc, f"operator {op} is not supported on bools", self.k.name)
        # integers (i32 for signed, u32 for unsigned; narrow types wrapped after the operation)
        if op in ("+", "-", "*"):
            return self.wrap(d, f"{a} {op} {b}")
        if op in ("//", "%"):
            self.libs.add("intdiv")
            return self.wrap(d, f"tk_{'floordiv' if op == '//' else 'mod'}_{c}({a}, {b})")
        if op == "**":
            self.libs.add("ipow")
            return self.wrap(d, f"tk_ipow_{c}({a}, {b})")
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("<<", ">>"):
            return self.shift(e, a, b, c)
        raise AssertionError(op)

    def shift(self, e, a, b, c) -> str:
        d = e.ty.dtype
        zero, neg = ("0i", f"select(0i, -1i, {a} < 0i)") if c == "i32" else ("0u", "0u")
        if isinstance(e.b, N.Const):
            n = int(e.b.value)
            if 0 <= n < d.bits:
                if e.op == "<<" and d.bits == 32:     # (OR tk_z: naga rejects a constant << that
                    z = "bitcast<i32>(tk_z)" if c == "i32" else "tk_z"   # overflows, abs(2147483647i) << 1u)
                    return f"(({a} | {z}) << {n}u)"
                return self.wrap(d, f"{a} << {n}u") if e.op == "<<" else f"({a} >> {n}u)"
            return zero if e.op == "<<" else neg
        # (the amount ORs tk_z: select() evaluates both sides, and naga rejects a constant
        # amount >= 32 even in the side the guard does not take; the value and the amount are
        # each used twice, so each is computed once)
        a, b = self.once(a, c), self.once(b, c)
        zero, neg = ("0i", f"select(0i, -1i, {a} < 0i)") if c == "i32" else ("0u", "0u")
        bu = f"(u32({b}) | tk_z)" if c == "i32" else f"({b} | tk_z)"
        ok = f"({b} >= 0i && {b} < {d.bits}i)" if c == "i32" else f"({b} < {d.bits}u)"
        if e.op == "<<":
            return f"select({zero}, {self.wrap(d, f'{a} << {bu}')}, {ok})"
        return f"select({neg}, ({a} >> {bu}), {ok})"

    def logic(self, e):
        """Short-circuit and/or (WGSL's && and || short-circuit too, unless the right side
        needs statements of its own)."""
        a = self.expr(e.a)
        saved, self.pre = self.pre, []
        b = self.expr(e.b)
        pre_b, self.pre = self.pre, saved
        if not pre_b:
            return f"({a} {'&&' if e.op == 'and' else '||'} {b})"
        t = self.fresh("sc")
        self.pre.append(f"var {t}: bool = {a};")
        self.pre.append(f"if ({t if e.op == 'and' else '!' + t}) {{")
        self.pre += ["    " + ln for ln in pre_b] + [f"    {t} = {b};", "}"]
        return t

    def e_Unary(self, e):
        a = self.expr(e.a)
        c = ctype(e.ty)
        if e.op == "not":
            return f"(!{a})"
        if e.op == "-":
            if c == "f32":
                return f"(-{a})"
            if c == "u32":
                return self.wrap(e.ty.dtype, f"0u - {a}")
            return self.wrap(e.ty.dtype, f"0i - {a}")
        if e.op == "~":
            return self.wrap(e.ty.dtype, f"~{a}") if c == "u32" else f"(~{a})"
        raise AssertionError(e.op)

    def e_Compare(self, e):
        nc = _narrow_compare(e)
        if nc is not None:
            return self.compare32(e.op, *nc)
        a, b = self.expr(e.a), self.expr(e.b)
        c = ctype(e.a.ty)
        if c == "bool" and e.op not in ("==", "!="):
            a, b = f"select(0i, 1i, {a})", f"select(0i, 1i, {b})"
        elif c == "f32":
            a = f"tk_x({a})" if self.exact else a    # compilers fold `a op a`; v != v is a NaN test
            if e.op == "!=":            # naga emits an ordered !=, false for NaN; IEEE's is true
                return f"(!({a} == {b}))"
        return f"({a} {e.op} {b})"

    def compare32(self, op: str, x: N.Expr, y: N.Expr) -> str:
        """``x op y`` on the values of two <= 32-bit integers of any signedness, exactly."""
        def val(e):
            c = ctype(e.ty)
            s = self.expr(e)
            if c == "bool":
                return "i32", f"select(0i, 1i, {s})"
            if c == "u32" and e.ty.dtype.bits < 32:
                return "i32", f"i32({s})"
            return c, s
        (cx, sx), (cy, sy) = val(x), val(y)
        if cx == cy:
            return f"({sx} {op} {sy})"
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
        if cx == "u32":                  # make it signed op unsigned
            sx, sy, op = sy, sx, flip[op]
        neg = "true" if op in ("<", "<=", "!=") else "false"     # a negative value vs any unsigned
        sx = self.once(sx, "i32")                                  # (used twice)
        return f"select((bitcast<u32>({sx}) {op} {sy}), {neg}, {sx} < 0i)"

    def e_Select(self, e):
        cond = self.expr(e.cond)
        saved, self.pre = self.pre, []
        a = self.expr(e.a)
        pre_a, self.pre = self.pre, []
        b = self.expr(e.b)
        pre_b, self.pre = self.pre, saved
        if not pre_a and not pre_b:
            return f"select({b}, {a}, {cond})"
        t = self.fresh("sel")
        self.pre.append(f"var {t}: {ctype(e.ty)};")
        self.pre.append(f"if ({cond}) {{")
        self.pre += ["    " + ln for ln in pre_a] + [f"    {t} = {a};", "} else {"]
        self.pre += ["    " + ln for ln in pre_b] + [f"    {t} = {b};", "}"]
        return t

    def e_Cast(self, e):
        src, dst = e.a.ty.dtype, e.ty.dtype
        if dst == D.uint64:
            return self.u64(e)
        if src == D.uint64:
            if dst.kind == "b":
                return f"any({self.u64(e.a)} != vec2<u32>(0u, 0u))"
            v = f"({self.u64(e.a)}).x"
            return self.int_from_u32(dst, v)
        return self.cast_str(self.expr(e.a), src, dst)

    def cast_str(self, a: str, src: DType, dst: DType) -> str:
        """The WGSL of converting the value ``a`` of type ``src`` to ``dst`` (32-bit types). A
        narrow float (float16, bfloat16, fp8) computes in f32: a cast to one rounds even from
        its own type (``tk.float16(h * 3.0)``), as on the other backends."""
        if src == dst and not dst.is_storage_only:
            return a
        cs, cd = ctype(src), ctype(dst)
        if dst.kind == "b":
            zero = {"f32": "0.0f", "i32": "0i", "u32": "0u", "bool": "false"}[cs]
            if cs == "f32":
                return f"(!({a} == 0.0f))"     # NaN is true (WGSL's float != is ordered)
            return a if cs == "bool" else f"({a} != {zero})"
        if cs == "bool":
            one = {"f32": "1.0f", "i32": "1i", "u32": "1u"}[cd]
            zero = {"f32": self.const(0.0, Ty(D.float32)), "i32": "0i", "u32": "0u"}[cd]   # (opaque 0.0)
            return f"select({zero}, {one}, {a})"
        if cd == "f32":
            # an int converted to float is opaque: NIR propagates an int local's constant through
            # the conversion and then folds x * 0.0 to 0.0 (fuzzer seeds 46400370, 46400384); and
            # the int ORs tk_z, else lavapipe folds f32(i32(round(x))) to round(x), -0.0 for
            # round(-0.3) where the int 0 converts to +0.0 (fuzz18 seed 82000361)
            z = "bitcast<i32>(tk_z)" if cs == "i32" else "tk_z"
            v = a if cs == "f32" else (f"tk_x(f32(({a}) | {z}))" if self.exact else f"f32({a})")
            if dst.is_storage_only:      # an explicit cast rounds to the narrow type
                self.libs.add(_lib_of(dst))
                return f"{_LOAD_CONV[dst.name]}({_STORE_CONV[dst.name]}({v}))"
            return v
        if cs == "f32":                  # float -> int truncates (through i32 like C on x86)
            if cd == "i32":
                return self.wrap(dst, f"i32({a})")
            if dst.bits == 32:
                a = self.once(a, "f32")
                return f"select(u32({a}), bitcast<u32>(i32({a})), {a} < 0.0f)"
            return self.wrap(dst, f"bitcast<u32>(i32({a}))")
        if cs == cd:                     # i32 -> narrower signed, u32 -> narrower unsigned
            return self.wrap(dst, a) if dst.bits < src.bits else a
        if cd == "u32":
            return self.wrap(dst, f"bitcast<u32>({a})")
        return self.wrap(dst, f"bitcast<i32>({a})")

    def int_from_u32(self, dst: DType, v: str) -> str:
        if dst.kind == "u":
            return self.wrap(dst, v)
        return self.wrap(dst, f"bitcast<i32>({v})")

    def u64(self, e) -> str:
        """A uint64 value (a random key or counter) as vec2<u32>(low, high)."""
        if isinstance(e, N.Const):
            return self.const(e.value, Ty(D.uint64))
        if isinstance(e, (N.Arg, N.Var)):
            return self.expr(e)
        if isinstance(e, N.Select):
            return f"select({self.u64(e.b)}, {self.u64(e.a)}, {self.expr(e.cond)})"
        if isinstance(e, N.Cast):
            src = e.a.ty.dtype
            if src == D.uint64:
                return self.u64(e.a)
            a = self.expr(e.a)
            c = ctype(src)
            if c == "bool":
                return f"vec2<u32>(select(0u, 1u, {a}), 0u)"
            if c == "i32":
                a = self.once(a, "i32")
                return f"vec2<u32>(bitcast<u32>({a}), select(0u, 0xffffffffu, {a} < 0i))"
            if c == "u32":
                return f"vec2<u32>({a}, 0u)"
        raise _unsupported(D.uint64, e.loc, self.k.name, " arithmetic")

    def e_Call(self, e):
        fn, d = e.fn, e.ty.dtype
        if fn.startswith("rand_"):
            self.libs.add("philox")
            return f"tk_{fn}({', '.join(self.u64(a) for a in e.args)})"
        args = [self.expr(a) for a in e.args]
        if fn == "uniform":
            return f"({args[0]})"
        if fn in ("isnan", "isinf", "isfinite"):
            return f"tk_{fn}({args[0]})"
        if fn in ("min", "max"):
            a, b = args
            cmp = "<" if fn == "min" else ">"
            if ctype(e.ty) == "bool":
                return f"({a} {'&&' if fn == 'min' else '||'} {b})"
            a, b = self.once(a, ctype(e.ty)), self.once(b, ctype(e.ty))
            return f"select({a}, {b}, {b} {cmp} {a})"
        if fn == "bitcast":
            return self.bitcast(e.args[0], d, args[0])
        if fn == "dot4_i8":     # i32 words; the accumulation wraps (in u32)
            a, b, c = args
            return (f"bitcast<i32>(bitcast<u32>({c}) + bitcast<u32>(dot4I8Packed(bitcast<u32>({a}), "
                    f"bitcast<u32>({b}))))")
        if fn == "abs" and ctype(e.ty) != "f32":
            return self.wrap(d, f"abs({args[0]})")
        args = [f"tk_x({s})" if isinstance(x, N.Const) else s for s, x in zip(args, e.args)]
        if fn == "rsqrt":                   # an opaque divisor: NIR turns 1 / sqrt(x) into rsq
            return self.x(f"1.0f / {self.x(f'sqrt({args[0]})')}")
        if fn == "sqrt":
            # an opaque result: NIR rewrites sqrt(a) * sqrt(a) (the same value, also from two
            # calls it merges) to a, which is not the rounded product (port22: 2.0 for a = 2.0,
            # NumPy 1.9999999)
            return self.x(f"sqrt({args[0]})")
        if fn == "sigmoid":
            self.libs.add("exp")
            return self.x(f"1.0f / {self.x(f'1.0f + tk_exp(-{args[0]})')}")
        if fn == "abs":
            return f"abs({args[0]})"
        if fn == "fma" and self.k.fastmath:      # contraction allowed: one instruction (docs/webgpu.md)
            return f"fma({', '.join(args)})"
        if fn in _SOFT:
            name, lib = _SOFT[fn]
            self.libs.add(lib)
            return f"{name}({', '.join(args)})"
        if fn in _BUILTIN:
            return f"{_BUILTIN[fn]}({', '.join(args)})"
        raise _error(e.loc, f"math function '{fn}' is not available on WebGPU", self.k.name)

    def bitcast(self, x: N.Expr, dst: DType, a: str) -> str:
        """``tk.bitcast`` of the value ``a`` (expression ``x``) to ``dst``, through its bits as a
        u32 (8/16-bit types: the low bits)."""
        src = x.ty.dtype
        if src.bits > 32 or dst.bits > 32:
            raise _unsupported(src if src.bits > 32 else dst, x.loc, self.k.name, "")
        if isinstance(x, N.Const):
            a = f"({a} | {'tk_z' if ctype(src) == 'u32' else 'bitcast<i32>(tk_z)'})" if src.is_int else f"tk_x({a})"
        if src.is_storage_only:
            self.libs.add(_lib_of(src))
            bits = f"{_STORE_CONV[src.name]}({a})"
        elif ctype(src) == "u32":
            bits = a
        elif src.bits == 32:
            bits = f"bitcast<u32>({a})"
        else:
            bits = f"(bitcast<u32>({a}) & {_mask(src.bits)})"
        if dst.is_storage_only:
            self.libs.add(_lib_of(dst))
            return f"{_LOAD_CONV[dst.name]}({bits})"
        if ctype(dst) == "u32":
            return bits
        return self.wrap(dst, f"bitcast<{ctype(dst)}>({bits})")

    # --- arrays -------------------------------------------------------------------------------

    def offset(self, a: N.ArrayInfo, idx: list) -> str:
        parts = [self.as_i32(i) for i in idx]
        if not parts:
            return "0i"
        if _constant_outside(a, idx):
            # naga refuses a constant index it can see is outside the array (negative, or past
            # a fixed-size array) even where it never runs (`if n > 8: A[-1] = ...`): made
            # opaque as in tk_x, so that such a kernel compiles as on the other backends (and
            # the launch checks or debug mode report the access where it does run)
            parts = [f"({p} | bitcast<i32>(tk_z))" for p in parts]
        if a.contiguous:
            off = parts[0]
            for k in range(1, len(parts)):
                sh = f"tk_a.{self.array_name(a)}_sh{k}" if a.space == "global" else f"{a.shape[k]}i"
                off = f"({off}) * {sh} + {parts[k]}"
            return off
        return " + ".join(f"({p}) * tk_a.{self.array_name(a)}_st{k}" for k, p in enumerate(parts))

    def is_atomic(self, a: N.ArrayInfo) -> bool:
        """Whether the array is declared with atomic elements."""
        if a.space == "private":
            return False
        if a.name in self.atomic_arrays:
            return True
        return a.space == "global" and a.dtype.name in PACKED and a.name in self.stored_arrays

    def elem_type(self, a: N.ArrayInfo) -> str:
        d = a.dtype
        if a.space == "global" and d.name in PACKED:
            base = "u32"
        elif d.kind == "b":
            base = "u32"
        else:
            base = ctype(d)
        if self.is_atomic(a):
            return "atomic<u32>" if base == "f32" else f"atomic<{base}>"
        return base

    def bounds_check(self, a: N.ArrayInfo, idx: list, loc: N.Loc):
        if not self.k.debug:
            return None
        if N.debug_name(a) not in self.array_ids:
            self.array_ids.append(N.debug_name(a))
        ix = [f"({self.as_i32(i)})" for i in idx]
        ns = [f"tk_a.{self.array_name(a)}_sh{k}" if a.space == "global" else f"{a.shape[k]}i"
              for k in range(len(idx))]
        parts, nd = oob_slots(ix, ns, "0i", "1i", lambda i, n: f"({i} >= 0i && {i} < {n})",
                              lambda c, x, y: f"select({y}, {x}, {c})")
        nd = nd.replace(" + 16 * ", "i + 16i * ") if len(idx) > 3 else f"{nd}i"
        uns = [ctype(i.ty) == "u32" for i in idx]     # a u32 index past 2**31 reaches tk_oob negative:
        mask = uns[0] + 2 * (len(uns) > 1 and uns[1]) + 4 * (len(uns) > 2 and all(uns[2:]))
        if mask:                                      # the host adds 2**32 back (runtime.base)
            nd = f"{nd} + {N.OOB_UNSIGNED * mask}i"
        return f"tk_oob({N.site_id(self.k, loc)}i, {self.array_ids.index(N.debug_name(a))}i, {nd}, {', '.join(parts)})"

    def load(self, a: N.ArrayInfo, off: str) -> str:
        name, d = self.array_name(a), a.dtype
        if a.space == "global" and d.name in PACKED:
            if d.name in _LOAD_CONV:
                self.libs.add(_lib_of(d))
            return f"tk_ld_{name}({off})"
        ref = f"{name}[{off}]"
        v = f"atomicLoad(&{ref})" if self.is_atomic(a) else ref
        if d.kind == "b":
            return f"({v} != 0u)"
        if d == D.float32 and self.is_atomic(a):
            return f"bitcast<f32>({v})"
        return v

    def e_Load(self, e):
        a = e.array
        chk = self.bounds_check(a, e.index, e.loc)
        if chk:
            off = self.fresh("i")
            self.pre.append(f"let {off} = {self.offset(a, e.index)};")
            ok = self.fresh("ok")
            self.pre.append(f"let {ok} = {chk};")
            zero = {"f32": "0.0f", "i32": "0i", "u32": "0u", "bool": "false"}[ctype(e.ty)]
            return f"select({zero}, {self.load(a, off)}, {ok})"
        return self.load(a, self.offset(a, e.index))

    def s_Store(self, s):
        a, d = s.array, s.array.dtype
        v = self.expr(s.value)
        off = self.offset(a, s.index)
        chk = self.bounds_check(a, s.index, s.loc)
        name = self.array_name(a)
        if a.space == "global" and d.name in PACKED:
            if d.name in _STORE_CONV:
                self.libs.add(_lib_of(d))
            stmt = f"tk_st_{name}({off}, {v});"
        else:
            if d.kind == "b":
                v = f"select(0u, 1u, {v})"
            elif d.is_storage_only:     # local/private narrow floats hold rounded f32 values
                self.libs.add(_lib_of(d))
                v = f"{_LOAD_CONV[d.name]}({_STORE_CONV[d.name]}({v}))"
            ref = f"{name}[{off}]"
            if self.is_atomic(a):
                stmt = f"atomicStore(&{ref}, {'bitcast<u32>(' + v + ')' if d == D.float32 else v});"
            else:
                stmt = f"{ref} = {v};"
        self.flush()
        self.w(f"if ({chk}) {{ {stmt} }}" if chk else stmt)

    def e_Atomic(self, e):
        a, d = e.array, e.array.dtype
        off = self.fresh("i")
        self.pre.append(f"let {off} = {self.offset(a, e.index)};")
        vals = [self.expr(x) for x in e.args]
        chk = self.bounds_check(a, e.index, e.loc)
        ref = f"&{self.array_name(a)}[{off}]"
        t = ctype(e.ty)
        res = self.fresh("at")
        body = []
        if a.space == "private":        # private to the item: a plain read-modify-write
            cur = self.load(a, off)
            nv = {"add": "c + v0", "sub": "c - v0", "min": "select(c, v0, v0 < c)", "max": "select(c, v0, v0 > c)",
                  "and": "c & v0", "or": "c | v0", "xor": "c ^ v0", "exchange": "v0",
                  "cas": "select(c, v1, c == v0)"}[e.op]
            if t == "f32" and e.op in ("add", "sub"):
                nv = f"tk_x({nv})"
            body += [f"let c = {cur};", f"let v0 = {vals[0]};"]
            if e.op == "cas":
                body.append(f"let v1 = {vals[1]};")
            body += [f"{self.array_name(a)}[{off}] = {nv};", f"{res} = c;"]
            body = ["{"] + ["    " + ln for ln in body] + ["}"]
        elif d == D.float32:
            bits = [f"bitcast<u32>({v})" for v in vals]
            if e.op == "exchange":
                body.append(f"{res} = bitcast<f32>(atomicExchange({ref}, {bits[0]}));")
            elif e.op == "cas":
                body += self.cas_loop(ref, bits[0], bits[1], res, "bitcast<f32>")
            else:
                nv = {"add": f"tk_x(o + {vals[0]})", "sub": f"tk_x(o - {vals[0]})",
                      "min": f"select(o, {vals[0]}, {vals[0]} < o)",
                      "max": f"select(o, {vals[0]}, {vals[0]} > o)"}[e.op]
                old = self.fresh("o")
                body += [f"var {old} = atomicLoad({ref});", "loop {",
                         f"    let o = bitcast<f32>({old});",
                         f"    let r = atomicCompareExchangeWeak({ref}, {old}, bitcast<u32>({nv}));",
                         "    if (r.exchanged) { break; }", f"    {old} = r.old_value;", "}",
                         f"{res} = bitcast<f32>({old});"]
        elif e.op == "cas":
            body += self.cas_loop(ref, vals[0], vals[1], res, "")
        else:
            fn = {"add": "atomicAdd", "sub": "atomicSub", "min": "atomicMin", "max": "atomicMax",
                  "and": "atomicAnd", "or": "atomicOr", "xor": "atomicXor",
                  "exchange": "atomicExchange"}[e.op]
            body.append(f"{res} = {fn}({ref}, {vals[0]});")
        self.pre.append(f"var {res}: {t};")
        if chk:
            self.pre.append(f"if ({chk}) {{")
            self.pre += ["    " + ln for ln in body] + ["}"]
        else:
            self.pre += body
        return res

    def cas_loop(self, ref, expected, new, res, conv) -> list:
        """A strong compare-and-swap from WGSL's weak one (retry while it failed spuriously)."""
        ex, nw = self.fresh("e"), self.fresh("n")
        return [f"let {ex} = {expected};", f"let {nw} = {new};", "loop {",
                f"    let r = atomicCompareExchangeWeak({ref}, {ex}, {nw});",
                f"    if (r.exchanged || r.old_value != {ex}) {{ {res} = {conv}(r.old_value); break; }}", "}"]

    # --- statements -----------------------------------------------------------------------------

    def stmts(self, ss) -> None:
        for s in ss:
            self.stmt(s)

    def stmt(self, s) -> None:
        if not isinstance(s, (N.FuncBlock, ItemLoop)):
            self.at(s.loc)
        getattr(self, "s_" + type(s).__name__)(s)

    def block(self, body) -> None:
        self.depth += 1
        self.last_line = None
        self.stmts(body)
        self.depth -= 1
        self.last_line = None

    def s_Assign(self, s):
        t = self.k.locals.get(s.var)
        v = s.value
        if self.plan is not None and isinstance(v, N.Call) and v.fn == "uniform" and self.item is None:
            # tk.uniform: the group's first work item evaluates it, workgroup memory broadcasts it
            c = ctype(t)
            st = "u32" if c == "bool" else c
            scr = self.scratch.setdefault(st, f"tk_scr{len(self.scratch)}")
            if self.plan.needs_done:       # after a return: the first item still running
                self.w("tk_act[tk_ll] = select(0u, 1u, tk_active);")
                self.w("workgroupBarrier();")
                self.w("{")
                self.w("var tk_f = 0i;")
                self.w(f"loop {{ if (tk_f >= {self.wg}i || tk_act[tk_f] != 0u) {{ break; }} tk_f = tk_f + 1i; }}")
                self.w("if (tk_ll == tk_f) {")
            else:
                self.w("if (tk_ll == 0i) {")
            self.depth += 1
            val = self.expr(v.args[0])
            self.flush()
            self.w(f"{scr}[0] = {'select(0u, 1u, ' + val + ')' if c == 'bool' else val};")
            self.depth -= 1
            self.w("}")
            if self.plan.needs_done:
                self.w("}")
            self.w("workgroupBarrier();")
            self.w(f"{self.var(s.var)} = {scr}[0]{' != 0u' if c == 'bool' else ''};")
            self.w("workgroupBarrier();")
            return
        v = self.u64(s.value) if t is not None and t.dtype == D.uint64 else self.expr(s.value)
        self.flush()
        self.w(f"{self.var(s.var)} = {v};")

    def s_ExprStmt(self, s):
        v = self.expr(s.expr)
        self.flush()
        self.w(f"_ = {v};")

    def s_If(self, s):
        c = self.expr(s.cond)
        self.flush()
        self.w(f"if ({c}) {{")
        self.block(s.body)
        if s.orelse:
            self.w("} else {")
            self.block(s.orelse)
        self.w("}")

    # structured exits ---------------------------------------------------------------------

    def open_scope(self, kind, label=None) -> _Scope:
        sc = _Scope(kind, label)
        self.scopes.append(sc)
        return sc

    def close_scope(self, sc: _Scope) -> None:
        """After the construct's closing brace: leave the enclosing constructs too, for every exit
        that went through this one."""
        self.scopes.pop()
        for target in sc.crossing:
            self.w(f"if ({self.exit_flag(target)}) {{ break; }}")
            if self.scopes and self.scopes[-1] is not target:
                if target not in self.scopes[-1].crossing:
                    self.scopes[-1].crossing.append(target)

    def exit_flag(self, target: _Scope) -> str:
        return "!tk_active" if target.kind == "item" else f"tk_fx_{mangle(target.label)}"

    def exit_to(self, target: _Scope) -> None:
        inner = self.scopes[-1]
        if target.kind == "item":
            self.w("tk_active = false;")
        else:
            self.flags.add(self.exit_flag(target))
            if inner is not target:
                self.w(f"{self.exit_flag(target)} = true;")
        if inner is not target and target not in inner.crossing:
            inner.crossing.append(target)
        self.w("break;")

    def s_Return(self, s):
        if self.plan is None:
            self.w("return;")
            return
        target = next((sc for sc in reversed(self.scopes) if sc.kind == "item"), None)
        if target is None:      # cannot happen: returns are item-level statements
            self.w("tk_active = false;")
            return
        self.exit_to(target)

    def s_FuncExit(self, s):
        target = next(sc for sc in reversed(self.scopes) if sc.kind == "func" and sc.label == s.label)
        self.exit_to(target)

    def s_FuncBlock(self, s):
        flag = f"tk_fx_{mangle(s.label)}"
        self.flags.add(flag)
        self.w(f"{flag} = false;")
        self.w("loop {")
        sc = self.open_scope("func", s.label)
        self.block(s.body)
        self.w("    break;")
        self.w("}")
        self.close_scope(sc)

    def s_Break(self, s):
        self.w("break;")

    def s_Continue(self, s):
        self.w("continue;")

    def s_For(self, s):
        """``for v in range(start, stop, step)``: a u32 trip count computed once in the range's
        type (no overflow near the end of the type) and ``v = start + k * step``."""
        t = self.k.locals.get(s.var)
        rd = s.start.ty.dtype                 # the range's type (start, stop and step share it)
        rt = ctype(rd)
        if rt == "bool":
            rd, rt = D.int32, "i32"
        n = self.fresh("for")
        vals = [self.expr(x) if ctype(x.ty) == rt else f"{rt}({self.expr(x)})" for x in (s.start, s.stop, s.step)]
        self.flush()
        start, stop, step = f"{n}_start", f"{n}_stop", f"{n}_step"
        self.w(f"{{ let {start}: {rt} = {vals[0]}; let {stop}: {rt} = {vals[1]}; let {step}: {rt} = {vals[2]};")
        trip = f"{n}_trip"
        self.w(f"var {trip}: u32 = 0u;")
        sign = (1 if s.step.value > 0 else -1) if isinstance(s.step, N.Const) else 0
        if rt == "u32":
            self.w(f"if ({stop} > {start} && {step} != 0u) {{ {trip} = ({stop} - {start} - 1u) / {step} + 1u; }}")
        else:
            up = (f"if ({stop} > {start}) {{ {trip} = (bitcast<u32>({stop} - {start}) - 1u) / "
                  f"bitcast<u32>({step}) + 1u; }}")
            down = (f"if ({start} > {stop}) {{ {trip} = (bitcast<u32>({start} - {stop}) - 1u) / "
                    f"(0u - bitcast<u32>({step})) + 1u; }}")
            if sign > 0:
                self.w(up)
            elif sign < 0:
                self.w(down)
            else:
                self.w(f"if ({step} > 0i) {{ {up} }} else if ({step} < 0i) {{ {down} }}")
        if sign == 0 and self.k.debug:          # a run-time zero step: reported (it runs no iteration)
            self.w(f"if ({step} == {rt}(0)) {{ _ = tk_oob({N.site_id(self.k, s.loc)}i, -1i, 1i, 0i, 0i, 0i, 1i, 0i, 1i); }}")
        k = f"{n}_k"
        self.w(f"for (var {k}: u32 = 0u; {k} < {trip}; {k} = {k} + 1u) {{")
        self.depth += 1
        kk = k if rt == "u32" else f"bitcast<i32>({k})"
        value = f"{start} + {kk} * {step}"
        if t is not None and t.dtype != rd:
            value = self.cast_str(f"({value})", rd, t.dtype)
        self.w(f"{self.var(s.var)} = {value};")
        self.depth -= 1
        sc = self.open_scope("loop")
        self.block(s.body)
        self.w("}")
        self.close_scope(sc)
        self.w("}")

    def s_While(self, s):
        self.w("loop {")
        sc = self.open_scope("loop")
        self.depth += 1
        c = self.expr(s.cond)
        self.flush()
        self.w(f"if (!({c})) {{ break; }}")
        self.depth -= 1
        self.block(s.body)
        self.w("}")
        self.close_scope(sc)

    # group-level statements -----------------------------------------------------------------

    def s_Barrier(self, s):
        self.w("storageBarrier(); workgroupBarrier();")

    def s_AllocArray(self, s):
        pass        # declared at module scope (workgroup) or at the top of the entry point (private)

    def s_ItemLoop(self, s: ItemLoop):
        exits = any(isinstance(x, (N.Return, N.FuncExit)) for x in N.walk_stmts(s.body))
        self.w("if (tk_active) {")
        saved = self.item
        self.item = s
        if exits:
            self.depth += 1
            self.w("loop {")
            sc = self.open_scope("item", s.label)
            self.block(s.body)
            self.w("    break;")
            self.w("}")
            self.close_scope(sc)
            self.depth -= 1
        else:
            self.block(s.body)
        self.item = saved
        self.w("}")

    def s_Collective(self, s: N.Collective):
        t = ctype(s.ty)
        st = "u32" if t == "bool" else t
        scr = self.scratch.setdefault(st, f"tk_scr{len(self.scratch)}")
        wg = self.wg
        d = s.ty.dtype
        lo, hi = _limits(d)
        ident = {"add": "0", "mul": "1", "or": "0", "and": "1", "min": hi, "max": lo}[s.op]
        if t == "bool":
            ident = {"add": "0u", "mul": "1u", "or": "0u", "and": "1u", "min": "1u", "max": "0u"}[s.op]
            comb = {"and": "acc & x", "or": "acc | x", "min": "acc & x", "max": "acc | x",
                    "add": "acc | x", "mul": "acc & x"}[s.op]
        else:
            if s.op == "and":           # all ones
                ident = "(-1i)" if t == "i32" else f"{(1 << d.bits) - 1}u"
            elif s.op in ("add", "mul", "or"):
                ident = self.const(int(ident), Ty(d)) if t != "f32" else self.const(float(ident), Ty(d))
            ar = {"add": "acc + x", "mul": "acc * x"}
            if s.op in ar:
                comb = self.x(ar[s.op]) if t == "f32" else self.wrap(d, ar[s.op])
            else:
                comb = {"and": "acc & x", "or": "acc | x", "min": "select(acc, x, x < acc)",
                        "max": "select(acc, x, x > acc)"}[s.op]
        step = {"reduce": f"acc = {comb};", "scan": f"acc = {comb}; {scr}[k] = acc;",
                "exscan": f"{scr}[k] = acc; acc = {comb};"}[s.kind]
        src = self.var(s.src)
        self.w(f"{scr}[tk_ll] = {'select(0u, 1u, ' + src + ')' if t == 'bool' else src}; "
               f"tk_act[tk_ll] = select(0u, 1u, tk_active);")
        self.w("workgroupBarrier();")
        self.w(f"if (tk_ll == 0i) {{ var acc: {st} = {ident};")
        self.w(f"    for (var k = 0i; k < {wg}i; k = k + 1i) {{ if (tk_act[k] == 0u) {{ continue; }} "
               f"let x = {scr}[k]; {step} }}")
        self.w(f"    {scr}[{wg}] = acc; }}")
        self.w("workgroupBarrier();")
        val = f"{scr}[{wg if s.kind == 'reduce' else 'tk_ll'}]"
        self.w(f"{self.var(s.dst)} = {'(' + val + ' != 0u)' if t == 'bool' else val};")
        self.w("workgroupBarrier();")

    def s_Philox(self, s):
        self.libs.add("philox")
        args = [self.expr(a) for a in s.args]
        self.flush()
        t = self.fresh("ph")
        self.w(f"{{ let {t} = tk_philox({', '.join(args)});")
        self.w("  " + " ".join(f"{self.var(o)} = {t}.{c};" for o, c in zip(s.outs, "xyzw")) + " }")

    def s_Print(self, s):
        """``tk.print``: WGSL has no printf, so a call appends a record to the ``tk_print`` buffer
        (the format: :mod:`.printrecords`); the runtime formats the records as the CPU's printf
        does once the kernel is done. A uint64 key is its two words."""
        def value_words(kind: str, p) -> list:
            e = self.expr(p)
            if kind == "b":
                return [f"select(0u, 1u, {e})"]
            if kind == "f":
                return [f"bitcast<u32>(f32({e}))"]
            if kind in ("U", "I"):
                v = self.once(e, "vec2<u32>")
                return [f"{v}.x", f"{v}.y"]
            return [f"u32({e})"] if kind == "u" else [f"bitcast<u32>(i32({e}))"]
        site, words = print_record(s.parts, value_words)
        self.flush()
        self.prints.append(site)
        site = len(self.prints) - 1
        n = 1 + len(words)
        t = self.fresh("pr")
        self.w(f"{{ let {t} = atomicAdd(&tk_print[0], {n}u) + 1u;")
        self.w(f"  if ({t} + {n}u <= arrayLength(&tk_print)) {{")
        self.w(f"    atomicStore(&tk_print[{t}], {site + 1}u);")     # 0: a record that did not fit
        for j, wexpr in enumerate(words):
            self.w(f"    atomicStore(&tk_print[{t} + {j + 1}u], {wexpr});")
        self.w("  } }")

    # --- the whole module -------------------------------------------------------------------------

    def params_layout(self) -> list:
        """The fields of the uniform argument struct: (name, WGSL type, source) where source is
        ("geom", index into the 9-slot geometry), ("zero",), ("shape", array, dim),
        ("stride", array, dim) or ("scalar", name, Ty, part)."""
        out = []
        for d in range(self.k.ndim):
            out += [(f"tk_s{d}", "i32", ("geom", 3 * d)), (f"tk_n{d}", "i32", ("geom", 3 * d + 1)),
                    (f"tk_st{d}", "i32", ("geom", 3 * d + 2))]
        out.append(("tk_zero", "u32", ("zero",)))
        for p in self.k.params:
            if p[0] == "array":
                a = p[1]
                out += [(f"{self.array_name(a)}_sh{d}", "i32", ("shape", a.name, d)) for d in range(a.ndim)]
                if not a.contiguous:
                    out += [(f"{self.array_name(a)}_st{d}", "i32", ("stride", a.name, d)) for d in range(a.ndim)]
            elif p[0] == "scalar":
                _, name, ty = p
                if ty.dtype == D.uint64:
                    out += [(f"{self.arg(name)}_lo", "u32", ("scalar", name, ty, 0)),
                            (f"{self.arg(name)}_hi", "u32", ("scalar", name, ty, 1))]
                else:
                    c = ctype(ty)
                    out.append((self.arg(name), "u32" if c == "bool" else c, ("scalar", name, ty, 0)))
        return out

    def geometry(self) -> None:
        k, wg = self.k, self.k.workgroup
        n = k.ndim
        self.w("tk_z = tk_a.tk_zero;")
        self.w("let tk_ll: i32 = i32(tk_lii);")
        for d in range(n):
            inner = _prod(wg[d + 1:])
            loc = f"tk_ll / {inner}i" if inner > 1 else "tk_ll"
            self.w(f"let tk_l{d}: i32 = ({loc}) % {wg[d]}i;" if d > 0 else f"let tk_l{d}: i32 = {loc};")
            self.w(f"let tk_n{d}: i32 = tk_a.tk_n{d};")
            self.w(f"let tk_ng{d}: i32 = (tk_n{d} + {wg[d] - 1}i) / {wg[d]}i;")
        total = " * ".join(f"tk_ng{d}" for d in range(n))
        self.w("let tk_graw: u32 = tk_wid.x + tk_nwg.x * (tk_wid.y + tk_nwg.y * tk_wid.z);")
        self.w(f"if (tk_graw >= u32({total})) {{ return; }}      // padding groups of a folded dispatch")
        self.w("let tk_grl: i32 = i32(tk_graw);")
        for d in range(n):
            inner = " * ".join(f"tk_ng{e}" for e in range(d + 1, n))
            g = f"tk_grl / ({inner})" if inner else "tk_grl"
            self.w(f"let tk_gr{d}: i32 = ({g}) % tk_ng{d};" if d > 0 else f"let tk_gr{d}: i32 = {g};")
            self.w(f"let tk_p{d}: i32 = tk_gr{d} * {wg[d]}i + tk_l{d};")
            if self.ranges == 2:
                self.w(f"let tk_g{d}: i32 = tk_a.tk_s{d} + tk_p{d} * tk_a.tk_st{d};")
            elif self.ranges == 1:
                self.w(f"let tk_g{d}: i32 = tk_a.tk_s{d} + tk_p{d};")
            else:
                self.w(f"let tk_g{d}: i32 = tk_p{d};")
        lin = "tk_p0"
        for d in range(1, n):
            lin = f"({lin}) * tk_n{d} + tk_p{d}"
        self.w(f"let tk_gl: i32 = {lin};")
        inr = " && ".join(f"tk_p{d} < tk_n{d}" for d in range(n))
        self.w(f"let tk_in: bool = {'true' if k.unsafe_indices else inr};")

    def packed_helpers(self, a: N.ArrayInfo) -> list:
        d, name = a.dtype, self.array_name(a)
        bits = PACKED[d.name]
        per = 32 // bits
        lg = {4: 2, 2: 1}[per]
        atomic = self.is_atomic(a)
        word = f"atomicLoad(&{name}[u32(i) >> {lg}u])" if atomic else f"{name}[u32(i) >> {lg}u]"
        ct = ctype(d)
        if d.kind == "b":
            conv, back = "b != 0u", "select(0u, 1u, v)"
        elif d.name in _LOAD_CONV:      # (the helpers exist for every packed array, used or not)
            conv, back = f"{_LOAD_CONV[d.name]}(b)", f"{_STORE_CONV[d.name]}(v)"
            self.libs.add(_lib_of(d))
        elif d.kind == "i":
            conv, back = f"(bitcast<i32>(b) << {32 - bits}u) >> {32 - bits}u", "bitcast<u32>(v)"
        else:
            conv, back = "b", "v"
        out = [f"fn tk_ld_{name}(i: i32) -> {ct} {{",
               f"    let b = ({word} >> ((u32(i) & {per - 1}u) * {bits}u)) & {_mask(bits)};",
               f"    return {conv};", "}"]
        if a.name in self.stored_arrays:
            out += [f"fn tk_st_{name}(i: i32, v: {ct}) {{",
                    f"    let sh = (u32(i) & {per - 1}u) * {bits}u;",
                    f"    let w = u32(i) >> {lg}u;",
                    f"    atomicAnd(&{name}[w], ~({_mask(bits)} << sh));",
                    f"    atomicOr(&{name}[w], (({back}) & {_mask(bits)}) << sh);", "}"]
        return out

    def render(self) -> str:
        k = self.k
        check_support(k)
        # the entry point's body first: it decides which helpers are needed
        self.lines = []
        self.depth = 1
        self.geometry()
        for p in k.params:
            if p[0] == "scalar":
                _, name, ty = p
                c = ctype(ty)
                if ty.dtype == D.uint64:
                    v = f"vec2<u32>(tk_a.{self.arg(name)}_lo, tk_a.{self.arg(name)}_hi)"
                elif c == "bool":
                    v = f"tk_a.{self.arg(name)} != 0u"
                else:
                    v = f"tk_a.{self.arg(name)}"
                self.w(f"let {self.arg(name)}: {c} = {v};")
        local_decls = []
        for s in N.walk_stmts(k.body):
            if isinstance(s, N.AllocArray):
                a = s.array
                decl = f"{self.array_name(a)}: array<{self.elem_type(a)}, {_prod(a.shape)}>;"
                if a.space == "local":
                    local_decls.append(f"var<workgroup> {decl}")
                    self.workgroup_bytes += 4 * _prod(a.shape)
                    self.local_loc = self.local_loc or s.loc
                else:
                    self.w(f"var {decl}")
        for v in sorted(k.locals):
            self.w(f"var {self.var(v)}: {ctype(k.locals[v])};")
        flags_at = len(self.lines)
        self.last_line = None
        if self.plan is None:
            self.w("if (!tk_in) { return; }")
            self.stmts(k.body)
        else:
            self.w("var tk_active: bool = tk_in;")
            self.stmts(self.plan.body)
        self.lines[flags_at:flags_at] = [f"    var {f}: bool = false;" for f in sorted(self.flags)]
        body = self.lines

        head = [f"// tinykernels: kernel '{k.name}' for WebGPU (WGSL)"]
        layout = self.params_layout()
        self.args_layout = layout
        head.append("struct TkArgs {")
        head += [f"    {name}: {t}," for name, t, _ in layout]
        head.append("}")
        head.append("@group(0) @binding(0) var<uniform> tk_a: TkArgs;")
        binding = 1
        arrays = [p[1] for p in k.params if p[0] == "array"]
        for a in arrays:
            head.append(f"@group(0) @binding({binding}) var<storage, read_write> {self.array_name(a)}: "
                        f"array<{self.elem_type(a)}>;")
            binding += 1
        if k.debug:
            head.append(f"@group(0) @binding({binding}) var<storage, read_write> tk_err: array<atomic<i32>>;")
            binding += 1
        if self.prints:
            head.append(f"@group(0) @binding({binding}) var<storage, read_write> tk_print: array<atomic<u32>>;")
        head += local_decls
        for t, name in self.scratch.items():
            head.append(f"var<workgroup> {name}: array<{t}, {self.wg + 1}>;")
        if self.scratch:
            head.append(f"var<workgroup> tk_act: array<u32, {self.wg}>;")
            self.workgroup_bytes += 4 * (self.wg + 1) * len(self.scratch) + 4 * self.wg
        helpers = []
        for a in arrays:
            if a.dtype.name in PACKED:
                helpers += self.packed_helpers(a)
        if k.debug:
            helpers += _DEBUG.strip("\n").splitlines()
        return ("\n".join(head) + "\n" + library(self.libs) + "\n".join(helpers) + "\n\n"
                f"@compute @workgroup_size({self.wg})\n"
                "fn tk_main(@builtin(local_invocation_index) tk_lii: u32, @builtin(workgroup_id) tk_wid: vec3<u32>,\n"
                "           @builtin(num_workgroups) tk_nwg: vec3<u32>) {\n"
                + "\n".join(body) + "\n}\n")


_DEBUG = """
fn tk_oob(line: i32, arr: i32, nd: i32, i0: i32, n0: i32, i1: i32, n1: i32, i2: i32, n2: i32) -> bool {
    if (i0 >= 0i && i0 < n0 && i1 >= 0i && i1 < n1 && i2 >= 0i && i2 < n2) { return true; }
    loop {
        let r = atomicCompareExchangeWeak(&tk_err[0], 0i, 1i);
        if (r.exchanged) {
            atomicStore(&tk_err[1], line); atomicStore(&tk_err[2], arr); atomicStore(&tk_err[3], nd);
            atomicStore(&tk_err[4], i0); atomicStore(&tk_err[5], n0); atomicStore(&tk_err[6], i1);
            atomicStore(&tk_err[7], n1); atomicStore(&tk_err[8], i2); atomicStore(&tk_err[9], n2);
            break;
        }
        if (r.old_value != 0i) { break; }
    }
    return false;
}
"""


def _lib_of(d: DType) -> str:
    return {"float16": "half", "bfloat16": "bf16", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}[d.name]


def _limits(d: DType) -> tuple:
    """(lowest, highest) of a type as WGSL literals (identities of max / min reductions)."""
    if d.is_float:
        return "(-tk_inf())", "tk_inf()"
    if d.kind == "b":
        return "false", "true"
    if d.kind == "u":
        return "0u", f"{(1 << d.bits) - 1}u"
    lo = -(1 << (d.bits - 1))
    return ("(-2147483647i - 1i)" if d.bits == 32 else f"({lo}i)"), f"{(1 << (d.bits - 1)) - 1}i"


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def render_wgsl(kernel: N.Kernel, plan: GroupPlan | None, ranges: int) -> tuple:
    """(WGSL source, uniform argument layout, debug array-name table, (workgroup memory bytes,
    location of the first localmem), tk.print sites) of a specialized kernel."""
    r = WGSLRenderer(kernel, plan, ranges)
    src = r.render()
    return src, r.args_layout, list(r.array_ids), (r.workgroup_bytes, r.local_loc), r.prints
