"""Portable C helper functions ("prelude") that generated kernels call.

Each entry of :data:`SECTIONS` is a piece of C99 source text.  The text is
meant to be pasted verbatim into C, CUDA (NVRTC) and OpenCL sources, so it

* includes no headers and calls no libc function except ``<math.h>`` ones
  (the renderer provides ``<stdint.h>``/``<math.h>`` or equivalents, i.e. the
  fixed-width names ``int8_t`` ... ``uint64_t`` and the math functions);
* uses no GNU extensions, no hex float literals and no compound literals;
* declares every function ``TK_INLINE`` (``static inline`` unless the
  renderer defines it first, e.g. as ``static __device__ __forceinline__``);
* reinterprets float bits through unions only;
* puts everything that uses ``double`` under ``#ifndef TK_NO_F64`` so that
  targets without float64 (Metal, some OpenCL devices) can leave it out.

Use :func:`prelude` to assemble the sections a kernel needs.  Dependencies
(e.g. every section needs ``"base"``) are added automatically and the result
always comes out in one fixed order, so the text is deterministic.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["SECTIONS", "DEPENDS", "ORDER", "prelude"]

# --------------------------------------------------------------------------
# base: inline macro, bit casts and a round-to-nearest-even right shift.
# --------------------------------------------------------------------------
_BASE = r"""
/* ---- tinykernels prelude: base ---- */
#ifndef TK_INLINE
#define TK_INLINE static inline
#endif

TK_INLINE uint32_t tk_f32_bits(float f) {
    union { float f; uint32_t u; } c;
    c.f = f;
    return c.u;
}

TK_INLINE float tk_bits_f32(uint32_t u) {
    union { float f; uint32_t u; } c;
    c.u = u;
    return c.f;
}

/* Renderers for targets without double (e.g. Metal) define TK_NO_F64. */
#ifndef TK_NO_F64
TK_INLINE uint64_t tk_f64_bits(double d) {
    union { double d; uint64_t u; } c;
    c.d = d;
    return c.u;
}

TK_INLINE double tk_bits_f64(uint64_t u) {
    union { double d; uint64_t u; } c;
    c.u = u;
    return c.d;
}
#endif

/* tk.dot4_i8: c plus the dot product of the four signed bytes packed in a and in b (byte 0
   least significant), wrapping like CUDA's __dp4a (which the CUDA renderer uses instead). */
TK_INLINE int32_t tk_sbyte(uint32_t w, uint32_t k) {
    return (int32_t)(((w >> k) & 255u) ^ 128u) - 128;
}

TK_INLINE int32_t tk_dot4_i8(int32_t a, int32_t b, int32_t c) {
    uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
    int32_t s = tk_sbyte(ua, 0u) * tk_sbyte(ub, 0u) + tk_sbyte(ua, 8u) * tk_sbyte(ub, 8u)
              + tk_sbyte(ua, 16u) * tk_sbyte(ub, 16u) + tk_sbyte(ua, 24u) * tk_sbyte(ub, 24u);
    return (int32_t)((uint32_t)c + (uint32_t)s);
}

/* v >> s rounded to nearest, ties to even (1 <= s <= 31). */
TK_INLINE uint32_t tk_shr_rne_u32(uint32_t v, uint32_t s) {
    uint32_t q = v >> s;
    uint32_t rem = v & ((1u << s) - 1u);
    uint32_t hw = 1u << (s - 1u);
    if (rem > hw || (rem == hw && (q & 1u))) {
        q += 1u;
    }
    return q;
}
"""

# --------------------------------------------------------------------------
# half: IEEE binary16 <-> binary32, matching numpy bit for bit.
# --------------------------------------------------------------------------
_HALF = r"""
/* ---- tinykernels prelude: half (IEEE binary16) ---- */
/* The two conversions are branch-free (every case computed, the result selected), so a C
   compiler vectorizes the loops that call them; the selects are one deep (GCC if-converts no
   nesting). No float arithmetic on subnormal float32 values is needed for the result (slow on
   x86, flushed on some GPUs). */
/* binary16 bits -> float32 (exact; NaN payload kept, like numpy). Exponent and mantissa move
   to float32's places: rebiased for a normal half; for a subnormal one, m * 2^-24 is
   2^-14 * (1 + m/1024) - 2^-14 (exact); all-ones exponent: inf or NaN. */
TK_INLINE float tk_f16_to_f32(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t a = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t e = a & 0x0f800000u;
    uint32_t sub = tk_f32_bits(tk_bits_f32(a | 0x38800000u) - 6.103515625e-05f);
    uint32_t r = e == 0u ? sub : a + 0x38000000u;
    r = e == 0x0f800000u ? (a | 0x7f800000u) : r;
    return tk_bits_f32(sign | r);
}

/* float32 -> binary16 bits, round to nearest even, overflow to inf.
   NaN keeps its top payload bits (quiet NaNs stay quiet; one whose kept bits are all zero
   becomes 0x7c01), like numpy. A normal half rounds by integer addition on the float's bits
   (ties to even: plus the lowest kept bit); a subnormal one by one float addition:
   |f| + 0.5 rounds |f| to a multiple of 2^-24, whose count is the difference of the bits. */
TK_INLINE uint16_t tk_f32_to_f16(float f) {
    uint32_t x = tk_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    uint32_t normal = (ax + 0x0fffu + ((ax >> 13) & 1u) - 0x38000000u) >> 13;
    uint32_t sub = tk_f32_bits(tk_bits_f32(ax) + 0.5f) - 0x3f000000u;
    uint32_t top = (ax & 0x7fffffu) >> 13;
    uint32_t nan = 0x7c00u | top | (uint32_t)(top == 0u);
    uint32_t r = ax < 0x38800000u ? sub : normal;   /* below 2^-14: subnormal (or zero) */
    r = ax >= 0x477ff000u ? 0x7c00u : r;            /* >= 65520 rounds to inf (also inf) */
    r = ax > 0x7f800000u ? nan : r;
    return (uint16_t)(sign | r);
}

#ifndef TK_NO_F64
/* binary64 -> binary16 rounded once: first to float32 rounding to odd (the sticky bit
   keeps what float32 drops), then to half to nearest even. */
TK_INLINE uint16_t tk_f64_to_f16(double d) {
    float f = (float)d;
    if ((double)f != d && f == f && f - f == 0.0f) {   /* inexact, finite */
        uint32_t u = tk_f32_bits(f);
        double ad = d < 0.0 ? -d : d, af = f < 0.0f ? -(double)f : (double)f;
        if (af > ad) {
            u -= 1u;                                     /* toward zero */
        }
        u |= 1u;                                         /* sticky */
        f = tk_bits_f32(u);
    }
    return tk_f32_to_f16(f);
}
#endif
"""

# --------------------------------------------------------------------------
# bf16: bfloat16 <-> float32, matching ml_dtypes.bfloat16.
# --------------------------------------------------------------------------
_BF16 = r"""
/* ---- tinykernels prelude: bf16 (bfloat16) ---- */
TK_INLINE float tk_bf16_to_f32(uint16_t b) {
    return tk_bits_f32((uint32_t)b << 16);
}

/* float32 -> bfloat16 bits, round to nearest even; NaN -> quiet NaN. */
TK_INLINE uint16_t tk_f32_to_bf16(float f) {
    uint32_t x = tk_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)(((x >> 16) & 0x8000u) | 0x7fc0u);
    }
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
"""

# --------------------------------------------------------------------------
# fp8: OCP float8 e4m3fn (no inf, NaN = S.1111.111) and e5m2 (IEEE-like),
# matching ml_dtypes.float8_e4m3fn / float8_e5m2 (non-saturating casts).
# --------------------------------------------------------------------------
_FP8 = r"""
/* ---- tinykernels prelude: fp8 (e4m3fn, e5m2) ---- */
TK_INLINE float tk_e4m3_to_f32(uint8_t b) {
    uint32_t sign = ((uint32_t)b & 0x80u) << 24;
    uint32_t e = ((uint32_t)b >> 3) & 0xfu;
    uint32_t m = (uint32_t)b & 0x7u;
    if (((uint32_t)b & 0x7fu) == 0x7fu) {
        return tk_bits_f32(sign | 0x7fc00000u);
    }
    if (e == 0u) {
        float v = (float)m * 0.001953125f;          /* m * 2^-9 */
        return tk_bits_f32(sign | tk_f32_bits(v));
    }
    return tk_bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

/* float32 -> e4m3fn, round to nearest even.  There is no infinity:
   inf, NaN and anything that rounds above 448 become NaN (0x7f | sign). */
TK_INLINE uint8_t tk_f32_to_e4m3(float f) {
    uint32_t x = tk_f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x43e80000u) {             /* > 464 (also inf, NaN) */
        return (uint8_t)(sign | 0x7fu);
    }
    if (ax >= 0x3c800000u) {            /* normal: >= 2^-6 */
        uint32_t r = ax + 0x7ffffu + ((ax >> 20) & 1u);
        return (uint8_t)(sign | ((r - 0x3c000000u) >> 20));
    }
    if (ax <= 0x3a800000u) {            /* <= 2^-10 rounds to zero */
        return (uint8_t)sign;
    }
    {                                   /* subnormal, unit 2^-9 */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        return (uint8_t)(sign | tk_shr_rne_u32(m, 141u - e));
    }
}

TK_INLINE float tk_e5m2_to_f32(uint8_t b) {
    uint32_t sign = ((uint32_t)b & 0x80u) << 24;
    uint32_t e = ((uint32_t)b >> 2) & 0x1fu;
    uint32_t m = (uint32_t)b & 0x3u;
    if (e == 0x1fu) {
        return tk_bits_f32(sign | (m ? 0x7fc00000u : 0x7f800000u));
    }
    if (e == 0u) {
        float v = (float)m * 1.52587890625e-05f;    /* m * 2^-16 */
        return tk_bits_f32(sign | tk_f32_bits(v));
    }
    return tk_bits_f32(sign | ((e + 112u) << 23) | (m << 21));
}

/* float32 -> e5m2, round to nearest even, overflow to inf, NaN -> 0x7e. */
TK_INLINE uint8_t tk_f32_to_e5m2(float f) {
    uint32_t x = tk_f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        return (uint8_t)(sign | 0x7eu);
    }
    if (ax >= 0x47700000u) {            /* >= 61440 rounds to inf */
        return (uint8_t)(sign | 0x7cu);
    }
    if (ax >= 0x38800000u) {            /* normal: >= 2^-14 */
        uint32_t r = ax + 0xfffffu + ((ax >> 21) & 1u);
        return (uint8_t)(sign | ((r - 0x38000000u) >> 21));
    }
    if (ax <= 0x37000000u) {            /* <= 2^-17 rounds to zero */
        return (uint8_t)sign;
    }
    {                                   /* subnormal, unit 2^-16 */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        return (uint8_t)(sign | tk_shr_rne_u32(m, 134u - e));
    }
}
"""

# --------------------------------------------------------------------------
# intdiv: Python/NumPy floor division and modulo for integers.
# --------------------------------------------------------------------------
_INT_TYPES = [
    ("i8", "int8_t", "uint8_t", True),
    ("i16", "int16_t", "uint16_t", True),
    ("i32", "int32_t", "uint32_t", True),
    ("i64", "int64_t", "uint64_t", True),
    ("u8", "uint8_t", "uint8_t", False),
    ("u16", "uint16_t", "uint16_t", False),
    ("u32", "uint32_t", "uint32_t", False),
    ("u64", "uint64_t", "uint64_t", False),
]

_SIGNED_DIV = """
TK_INLINE {t} tk_floordiv_{s}({t} a, {t} b) {{
    {t} q;
    if (b == 0) {{
        return 0;
    }}
    if (b == -1) {{                      /* -a without overflow; MIN // -1 == MIN */
        return ({t})({u})(({u})0 - ({u})a);
    }}
    q = ({t})(a / b);
    if (({t})(a % b) != 0 && ((a < 0) != (b < 0))) {{
        q = ({t})(q - 1);
    }}
    return q;
}}

TK_INLINE {t} tk_mod_{s}({t} a, {t} b) {{
    {t} r;
    if (b == 0 || b == -1) {{
        return 0;
    }}
    r = ({t})(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) {{
        r = ({t})(r + b);
    }}
    return r;
}}
"""

_UNSIGNED_DIV = """
TK_INLINE {t} tk_floordiv_{s}({t} a, {t} b) {{
    return b == 0 ? ({t})0 : ({t})(a / b);
}}

TK_INLINE {t} tk_mod_{s}({t} a, {t} b) {{
    return b == 0 ? ({t})0 : ({t})(a % b);
}}
"""


def _intdiv() -> str:
    parts = [
        "\n/* ---- tinykernels prelude: intdiv ---- */\n"
        "/* Floor division / modulo with Python semantics (the sign of a % b\n"
        "   follows b).  Like NumPy: x // 0 == 0, x % 0 == 0, MIN // -1 == MIN\n"
        "   (wraps), MIN % -1 == 0.  No undefined behaviour. */\n"
    ]
    for s, t, u, signed in _INT_TYPES:
        tmpl = _SIGNED_DIV if signed else _UNSIGNED_DIV
        parts.append(tmpl.format(s=s, t=t, u=u))
    return "".join(parts)


# --------------------------------------------------------------------------
# floatdiv: numpy's npy_divmod algorithm (floor_divide / remainder).
# --------------------------------------------------------------------------
_FLOATDIV_T = """
TK_INLINE {t} tk_mod_{s}({t} a, {t} b) {{
    {t} mod;
#ifdef TK_POCL
    if (isnan(a) || isnan(b)) {{
        return a + b;                   /* PoCL folds fmod of a constant NaN wrongly */
    }}
#endif
    mod = fmod{f}(a, b);
    if (b == 0) {{
        return mod;                     /* NaN */
    }}
    if (mod != 0) {{
        if ((b < 0) != (mod < 0)) {{
            mod += b;
        }}
    }} else {{
        mod = copysign{f}(({t})0, b);
    }}
    return mod;
}}

TK_INLINE {t} tk_floordiv_{s}({t} a, {t} b) {{
    {t} mod, div, floordiv;
#ifdef TK_POCL
    if (isnan(a) || isnan(b)) {{
        return a + b;                   /* PoCL folds fmod of a constant NaN wrongly */
    }}
#endif
    if (b == 0) {{
        return a / b;                   /* +-inf or NaN */
    }}
    mod = fmod{f}(a, b);
    div = (a - mod) / b;
    if (mod != 0) {{
        if ((b < 0) != (mod < 0)) {{
            div -= ({t})1;
        }}
    }}
    if (div != 0) {{
        floordiv = floor{f}(div);
        if (div - floordiv > ({t})0.5) {{
            floordiv += ({t})1;
        }}
    }} else {{
        floordiv = copysign{f}(({t})0, a / b);
    }}
    return floordiv;
}}
"""


def _floatdiv() -> str:
    return (
        "\n/* ---- tinykernels prelude: floatdiv ---- */\n"
        "/* Python-style float floor division and modulo, computed exactly like\n"
        "   numpy's floor_divide / remainder (fmod-based, quotient snapped to an\n"
        "   integer).  x // 0 == x / 0, x % 0 == NaN. */\n"
        + _FLOATDIV_T.format(s="f32", t="float", f="f")
        + "\n#ifndef TK_NO_F64"
        + _FLOATDIV_T.format(s="f64", t="double", f="")
        + "#endif\n"
    )


# --------------------------------------------------------------------------
# ipow: integer power by squaring.
# --------------------------------------------------------------------------
_IPOW_T = """
TK_INLINE {t} tk_ipow_{s}({t} base, {t} e) {{
    {u} r = 1u;
    {u} b = ({u})base;
    {u} n;{negcheck}
    n = ({u})e;
    while (n != 0u) {{
        if (n & 1u) {{
            r *= b;
        }}
        b *= b;
        n >>= 1;
    }}
    return ({t})r;
}}
"""


def _ipow() -> str:
    parts = [
        "\n/* ---- tinykernels prelude: ipow ---- */\n"
        "/* base ** e by squaring, wrapping modulo 2^bits (computed unsigned).\n"
        "   0 ** 0 == 1.  A negative exponent gives 1 / base ** -e truncated toward\n"
        "   zero: 1 for base 1, +-1 for base -1, else 0 (NumPy raises instead;\n"
        "   kernels cannot raise). */\n"
    ]
    for s, t, u in [("i32", "int32_t", "uint32_t"), ("i64", "int64_t", "uint64_t"),
                    ("u32", "uint32_t", "uint32_t"), ("u64", "uint64_t", "uint64_t")]:
        negcheck = ("\n    if (e < 0) {\n        return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;\n    }") if s.startswith("i") else ""
        parts.append(_IPOW_T.format(s=s, t=t, u=u, negcheck=negcheck))
    return "".join(parts)


# --------------------------------------------------------------------------
# philox: counter-based RNG (Philox4x32-10) and the tk.random primitives.
# --------------------------------------------------------------------------
_PHILOX = r"""
/* ---- tinykernels prelude: philox ---- */
/* Philox4x32-10 (Salmon et al., SC'11).  Keys and counters of the random
   API are uint64: k0/c0 = low 32 bits, k1/c1 = high 32 bits, c2 = c3 = 0.
   Must stay bit-identical to tinykernels/random.py. */
typedef struct { uint32_t x, y, z, w; } tk_u32x4;

TK_INLINE tk_u32x4 tk_philox4x32(uint32_t c0, uint32_t c1, uint32_t c2,
                                 uint32_t c3, uint32_t k0, uint32_t k1) {
    tk_u32x4 r;
    int i;
    for (i = 0; i < 10; i++) {
        uint64_t p0, p1;
        uint32_t n0, n2;
        if (i > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        p0 = (uint64_t)0xD2511F53u * (uint64_t)c0;
        p1 = (uint64_t)0xCD9E8D57u * (uint64_t)c2;
        n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    r.x = c0;
    r.y = c1;
    r.z = c2;
    r.w = c3;
    return r;
}

TK_INLINE tk_u32x4 tk_rand_block(uint64_t key, uint64_t counter) {
    return tk_philox4x32((uint32_t)counter, (uint32_t)(counter >> 32), 0u, 0u,
                         (uint32_t)key, (uint32_t)(key >> 32));
}

/* 32 random bits. */
TK_INLINE uint32_t tk_rand_bits(uint64_t key, uint64_t counter) {
    return tk_rand_block(key, counter).x;
}

/* Uniform float32 in [0, 1): (x >> 8) * 2^-24. */
TK_INLINE float tk_rand_uniform(uint64_t key, uint64_t counter) {
    return (float)(tk_rand_bits(key, counter) >> 8) * 5.9604644775390625e-08f;
}

/* Standard normal float32 (Box-Muller on words x and y), the host's tk.random.normal bit for
   bit: each float32 step (log, sqrt, cos) is the double function rounded once to float, as a
   correctly rounded float32 libm gives it (logf/cosf of C, OpenCL and CUDA may be an ulp off,
   and differ between backends). Without double (TK_NO_F64) the float32 functions. */
TK_INLINE float tk_rand_normal(uint64_t key, uint64_t counter) {
    tk_u32x4 r = tk_rand_block(key, counter);
    float u1 = (float)((r.x >> 8) + 1u) * 5.9604644775390625e-08f;   /* (0, 1] */
    float u2 = (float)(r.y >> 8) * 5.9604644775390625e-08f;          /* [0, 1) */
    float ang = 6.2831853071795864769f * u2;
#ifndef TK_NO_F64
    float lg = (float)log((double)u1);
    float rad = (float)sqrt((double)(-2.0f * lg));
    return rad * (float)cos((double)ang);
#else
    return sqrtf(-2.0f * logf(u1)) * cosf(ang);
#endif
}
"""

#: Section name -> C source text.
SECTIONS: dict[str, str] = {
    "base": _BASE,
    "half": _HALF,
    "bf16": _BF16,
    "fp8": _FP8,
    "intdiv": _intdiv(),
    "floatdiv": _floatdiv(),
    "ipow": _ipow(),
    "philox": _PHILOX,
}

#: Output order of sections (dependencies always come first).
ORDER: tuple[str, ...] = ("base", "half", "bf16", "fp8", "intdiv", "floatdiv", "ipow", "philox")

#: Section -> sections it needs (added automatically by :func:`prelude`).
DEPENDS: dict[str, tuple[str, ...]] = {name: (() if name == "base" else ("base",)) for name in ORDER}


def prelude(names: Iterable[str]) -> str:
    """Return the C text of the requested sections plus their dependencies.

    Sections appear once each, in the fixed order :data:`ORDER`.  An unknown
    name raises ``KeyError``.
    """
    if isinstance(names, str):
        names = [names]
    wanted: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name not in SECTIONS:
            raise KeyError(name)
        if name not in wanted:
            wanted.add(name)
            stack.extend(DEPENDS[name])
    return "".join(SECTIONS[n] for n in ORDER if n in wanted)
