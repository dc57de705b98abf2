#!/usr/bin/env python3
"""The AVX-512 ``exp`` experiment of issue 12 (exp9): can a hand-written 16-lane float32 ``exp``,
correctly rounded like ``tk_exp_f32``, make the default kernels' vectorized loops faster?

    PYTHONPATH=src python3 benchmarks/bench_exp_simd.py              # timing, 41 interleaved rounds
    PYTHONPATH=src python3 benchmarks/bench_exp_simd.py --check      # every float32: same bits as tk_exp_f32
    PYTHONPATH=src python3 benchmarks/bench_exp_simd.py --quick      # smoke test

A C mock-up (one thread, ``y[i] = exp(x[i])`` over 64 Ki floats in L2), compiled with the CPU
backend's own flags (``runtime/compiler.py``), times these loops in interleaved rounds and prints
the median ns per element and the median of the per-round ratios to ``c``:

* ``c``: the default kernel's loop, ``tk_exp_f32`` (codegen/c.py ``_EXP_F32``) inlined and
  vectorized by the compiler (double evaluation, degree-8 polynomial, no table);
* ``avx512 inline``: the hand-written AVX-512 body (16-entry table of 2^(j/16) in two registers,
  looked up by ``vpermt2q``, degree-6 polynomial) in an intrinsics loop, constants in registers;
* ``avx512 reload``: the same loop with every vector register clobbered each iteration (an empty
  ``asm``), so the constants are loaded again each time, as a called function must;
* ``avx512 simd call``: the plain C loop calling a function declared
  ``__attribute__((simd("notinbranch")))`` whose AVX-512 variant ``_ZGVeN16v_`` is the same body
  (the libmvec mechanism): GCC's vectorizer calls it once per 16 elements;
* ``call floor``: the same, with a vector variant that returns its argument (the cost of the
  call and of the loop alone);
* ``gather table``: plain C with the table as a ``static const`` array, which GCC vectorizes
  with ``vgatherqpd``;

and softmax's exp pass over rows of 4096 (``e = exp(x - m)`` stored and summed in 16 lanes, as
the lanes shape sums), each checked for the default pass's bits (outputs and sums) first:

* ``pass c``: the default code, ``tk_exp_f32`` in the loop (the next two are ratios to it);
* ``pass strip-mined``: the loop split into blocks of 256 (the arguments stored, the inline
  AVX-512 body over them in place, then the sums): what a code generator could emit;
* ``pass intrinsics``: the whole pass written with intrinsics (a bound for that route).

``--check`` runs the vectorized ``simd call`` loop (its 16-lane calls, the 8-lane epilogue
variant and the scalar remainder), the intrinsics loop and the gather loop over every float32
bit pattern (or every ``--stride``-th) and over every array length 1 .. 64, and counts results
whose bits differ from ``tk_exp_f32`` (correctly rounded for every input,
``scripts/check_exp_f32.py``), NaN payloads included; it also counts the calls of the AVX-512
variant (compiled with ``-DTK_COUNT``) and fails if the loop never made one. Needs GCC (clang-15 does not call
``declare simd`` variants: the loop stays scalar) and AVX-512 (F, DQ); otherwise it says so
and exits 0. Under load, read the ratios, not the times.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tinykernels  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from tinykernels.codegen.c import _EXP_F32
from tinykernels.codegen.prelude import prelude
from tinykernels.runtime.compiler import toolchain

VARIANTS = ("c", "avx512 inline", "avx512 reload", "avx512 simd call", "call floor", "gather table",
            "pass c", "pass strip-mined", "pass intrinsics")

# e^x = 2^k T[j] (1 + p(r)), x = (16 k + j) ln2 / 16 + r, |r| <= ln2 / 32, in double (8 lanes per
# half of the 16 floats). t = x 16 / ln2 + 1.5 2^52 holds m = 16 k + j in its low bits: j indexes
# the table by vpermt2q (its low 4 bits), and t << 48 = (k << 52) + (j << 48), so the table holds
# the bits of 2^(j/16) minus j << 48 and one integer add gives 2^k T[j]. r by two FMAs with ln2/16
# split in two doubles. p(r) = r + r^2 q(r), q of degree 4 interpolating (e^r - 1 - r) / r^2 at the
# Chebyshev nodes of [-ln2/32, ln2/32] (mpmath, 60 digits; relative error 2^-55 after rounding the
# coefficients), the result s + s p rounded once to float32. x clamped to [-120, 120] by
# vminps/vmaxps with x as the second operand, so a NaN passes with its bits.
_BODY = r"""
#define TK_T16_LO 0x3feeab07dd485429, 0x3feebfdad5362a27, 0x3feedea64c123422, 0x3fef06fe0a31b715, \
                  0x3fef387a6e756238, 0x3fef72b83c7d517b, 0x3fefb5586cf9890f, 0x3ff0000000000000
#define TK_T16_HI 0x3fefa4afa2a490da, 0x3fef5818dcfba487, 0x3fef199bdd85529c, 0x3feee89f995ad3ad, \
                  0x3feec49182a3f090, 0x3feeace5422aa0db, 0x3feea11473eb0187, 0x3feea09e667f3bcd
static inline __attribute__((always_inline)) __m512d tk_exp8_f64(__m512d x, __m512i tlo, __m512i thi) {
    const __m512d sh = _mm512_set1_pd(0x1.8p52);
    __m512d t = _mm512_fmadd_pd(x, _mm512_set1_pd(0x1.71547652b82fep+4), sh);
    __m512d m = _mm512_sub_pd(t, sh);
    __m512d r = _mm512_fmadd_pd(m, _mm512_set1_pd(-0x1.62e42fefa39efp-5), x);
    r = _mm512_fmadd_pd(m, _mm512_set1_pd(-0x1.abc9e3b39803fp-60), r);
    __m512i tb = _mm512_castpd_si512(t);
    __m512i tj = _mm512_permutex2var_epi64(tlo, tb, thi);
    __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(tj, _mm512_slli_epi64(tb, 48)));
    __m512d q = _mm512_fmadd_pd(_mm512_set1_pd(0x1.6c17bb51f236dp-10), r, _mm512_set1_pd(0x1.11120af701debp-7));
    q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(0x1.55555555194d2p-5));
    q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(0x1.55555554dd44dp-3));
    q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(0.5));
    __m512d p = _mm512_fmadd_pd(_mm512_mul_pd(r, r), q, r);
    return _mm512_fmadd_pd(s, p, s);
}
static inline __attribute__((always_inline)) __m512 tk_exp16_body(__m512 x) {
    const __m512i tlo = _mm512_set_epi64(TK_T16_LO), thi = _mm512_set_epi64(TK_T16_HI);
    x = _mm512_max_ps(_mm512_set1_ps(-120.0f), _mm512_min_ps(_mm512_set1_ps(120.0f), x));
    __m256 lo = _mm512_cvtpd_ps(tk_exp8_f64(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), tlo, thi));
    __m256 hi = _mm512_cvtpd_ps(tk_exp8_f64(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)), tlo, thi));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
static const uint64_t tk_exp_tab[16] = {0x3ff0000000000000, 0x3fefb5586cf9890f, 0x3fef72b83c7d517b,
    0x3fef387a6e756238, 0x3fef06fe0a31b715, 0x3feedea64c123422, 0x3feebfdad5362a27, 0x3feeab07dd485429,
    0x3feea09e667f3bcd, 0x3feea11473eb0187, 0x3feeace5422aa0db, 0x3feec49182a3f090, 0x3feee89f995ad3ad,
    0x3fef199bdd85529c, 0x3fef5818dcfba487, 0x3fefa4afa2a490da};
/* the same computation in scalar C (the table from memory: GCC vectorizes it with gathers) */
static inline float tk_exp_gather(float xf) {
    double x = (double)tk_bits_f32(tk_clamp_f32(tk_f32_bits(xf), 0x42f00000u));
    double t = __builtin_fma(x, 0x1.71547652b82fep+4, 0x1.8p52), m = t - 0x1.8p52;
    double r = __builtin_fma(m, -0x1.62e42fefa39efp-5, x);
    r = __builtin_fma(m, -0x1.abc9e3b39803fp-60, r);
    uint64_t tb = tk_f64_bits(t);
    double s = tk_bits_f64(tk_exp_tab[tb & 15] + (tb << 48));
    double q = __builtin_fma(0x1.6c17bb51f236dp-10, r, 0x1.11120af701debp-7);
    q = __builtin_fma(q, r, 0x1.55555555194d2p-5);
    q = __builtin_fma(q, r, 0x1.55555554dd44dp-3);
    q = __builtin_fma(q, r, 0.5);
    return (float)__builtin_fma(s, __builtin_fma(r * r, q, r), s);
}
"""

# a function f declared simd, its scalar symbol an alias of a static C function and its vector
# variants (SSE, AVX, AVX2 and AVX-512 ABIs: the vectorizer may pick a narrower one for an
# epilogue) the 16-lane body on the widened argument
_SIMD_FN = r"""
__attribute__((simd("notinbranch"), const, nothrow)) float NAME(float);
__attribute__((used)) static float NAME_scalar(float x) { return SCALAR; }
__asm__(".set NAME, NAME_scalar");
#define H __attribute__((visibility("hidden")))
H __m512 _ZGVeN16v_NAME(__m512 x) { TK_COUNT_CALL; return VECTOR; }
H __m256 _ZGVdN8v_NAME(__m256 x) { return _mm512_castps512_ps256(_ZGVeN16v_NAME(_mm512_castps256_ps512(x))); }
H __m256 _ZGVcN8v_NAME(__m256 x) { return _mm512_castps512_ps256(_ZGVeN16v_NAME(_mm512_castps256_ps512(x))); }
H __m128 _ZGVbN4v_NAME(__m128 x) { return _mm512_castps512_ps128(_ZGVeN16v_NAME(_mm512_castps128_ps512(x))); }
#undef H
"""

_HARNESS = r"""
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <time.h>
%(prelude)s
%(exp)s
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
static long tk_vcalls;                 /* 16-lane calls, counted when compiled with -DTK_COUNT */
#ifdef TK_COUNT
#define TK_COUNT_CALL (++tk_vcalls)
#else
#define TK_COUNT_CALL ((void)0)
#endif
%(body)s
%(simd_exp)s
%(simd_id)s
typedef void loop_fn(float *restrict, const float *restrict, long);
#define NOI __attribute__((noinline))
NOI void l_c(float *restrict y, const float *restrict x, long n) { for (long i = 0; i < n; i++) y[i] = tk_exp_f32(x[i]); }
NOI void l_inline(float *restrict y, const float *restrict x, long n) {
    long i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, tk_exp16_body(_mm512_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = tk_exp_f32(x[i]);
}
NOI void l_reload(float *restrict y, const float *restrict x, long n) {
    for (long i = 0; i + 16 <= n; i += 16) {
        __asm__ volatile("" ::: %(clobbers)s);
        _mm512_storeu_ps(y + i, tk_exp16_body(_mm512_loadu_ps(x + i)));
    }
}
NOI void l_call(float *restrict y, const float *restrict x, long n) { for (long i = 0; i < n; i++) y[i] = tk_expv_f32(x[i]); }
NOI void l_floor(float *restrict y, const float *restrict x, long n) { for (long i = 0; i < n; i++) y[i] = tk_idv_f32(x[i]); }
NOI void l_gather(float *restrict y, const float *restrict x, long n) { for (long i = 0; i < n; i++) y[i] = tk_exp_gather(x[i]); }
/* softmax's exp pass over a row (e = exp(x - m), stored, summed in 16 lanes, the lanes shape's
   per-lane sums; sum[0] is m, sum[1..16] the lanes): the default code, the loop strip-mined so
   that the inline AVX-512 body runs over blocks of 256 arguments stored in y, and the whole pass
   written with intrinsics */
NOI void p_c(float *restrict y, const float *restrict x, long n, float *sum) {
    float acc[16] = {0};
    for (long i = 0; i < n; i += 16)
        for (int l = 0; l < 16; l++) { float e = tk_exp_f32(x[i + l] - sum[0]); y[i + l] = e; acc[l] += e; }
    for (int l = 0; l < 16; l++) sum[1 + l] = acc[l];
}
NOI void p_strip(float *restrict y, const float *restrict x, long n, float *sum) {
    float acc[16] = {0};
    for (long b = 0; b < n; b += 256) {
        for (long i = b; i < b + 256; i++) y[i] = x[i] - sum[0];
        for (long i = b; i < b + 256; i += 16) _mm512_storeu_ps(y + i, tk_exp16_body(_mm512_loadu_ps(y + i)));
        for (long i = b; i < b + 256; i += 16)
            for (int l = 0; l < 16; l++) acc[l] += y[i + l];
    }
    for (int l = 0; l < 16; l++) sum[1 + l] = acc[l];
}
NOI void p_fused(float *restrict y, const float *restrict x, long n, float *sum) {
    __m512 acc = _mm512_setzero_ps(), m = _mm512_set1_ps(sum[0]);
    for (long i = 0; i < n; i += 16) {
        __m512 e = tk_exp16_body(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(y + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    _mm512_storeu_ps(sum + 1, acc);
}
typedef void pass_fn(float *restrict, const float *restrict, long, float *);
enum { ROW = 4096 };
/* pass f over the n inputs as rows of ROW floats (m = -1) */
static void rows(pass_fn *f, float *restrict y, const float *restrict x, long n, float *sum) {
    for (long r = 0; r + ROW <= n; r += ROW) { sum[0] = -1.0f; f(y + r, x + r, ROW, sum); }
}
NOI void l_pc(float *restrict y, const float *restrict x, long n) { float s[17]; rows(p_c, y, x, n, s); }
NOI void l_pstrip(float *restrict y, const float *restrict x, long n) { float s[17]; rows(p_strip, y, x, n, s); }
NOI void l_pfused(float *restrict y, const float *restrict x, long n) { float s[17]; rows(p_fused, y, x, n, s); }
/* whether pass f gives p_c's bits (the outputs and the 16 lane sums) on every row */
static int same_pass(pass_fn *f, const float *x, float *y, float *w, long n) {
    int same = 1;
    for (long r = 0; r + ROW <= n; r += ROW) {
        float s[17] = {-1.0f}, t[17] = {-1.0f};
        p_c(w, x + r, ROW, s);
        f(y, x + r, ROW, t);
        same &= !memcmp(w, y, 4 * ROW) && !memcmp(s, t, sizeof s);
    }
    return same;
}
static loop_fn *const loops[] = {l_c, l_inline, l_reload, l_call, l_floor, l_gather, l_pc, l_pstrip, l_pfused};
enum { NV = sizeof loops / sizeof loops[0], NE = 6 };     /* loops[NE..]: the softmax pass */
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmpd(const void *a, const void *b) { double u = *(const double *)a, v = *(const double *)b; return u < v ? -1 : u > v; }
static long diffs(loop_fn *f, const float *x, float *y, const float *want, long n) {
    long bad = 0;
    f(y, x, n);
    for (long i = 0; i < n; i++) bad += tk_f32_bits(y[i]) != tk_f32_bits(want[i]);
    return bad;
}
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "check")) {       /* check STRIDE: bits against tk_exp_f32 */
        enum { B = 1 << 16 };
        static float x[B], y[B], want[B];
        uint64_t stride = strtoull(argv[2], 0, 10);
        long n = 0, bad[3] = {0, 0, 0};
        loop_fn *checked[3] = {l_call, l_inline, l_gather};
        for (uint64_t v = 0; v < 0x100000000ull;) {
            long m = 0;
            for (; m < B && v < 0x100000000ull; ++m, v += stride) x[m] = tk_bits_f32((uint32_t)v);
            for (long i = 0; i < m; i++) want[i] = tk_exp_f32(x[i]);
            for (int c = 0; c < 3; c++) bad[c] += diffs(checked[c], x, y, want, m);
            n += m;
        }
        for (long len = 1; len <= 64; len++)          /* every remainder of the vectorized loops */
            for (int c = 0; c < 3; c++) bad[c] += diffs(checked[c], x + 3, y + 1, want + 3, len);
        printf("check %%ld %%ld %%ld %%ld %%ld\n", n, tk_vcalls, bad[0], bad[1], bad[2]);
        return 0;
    }
    long n = strtol(argv[2], 0, 10), rounds = strtol(argv[3], 0, 10), reps = strtol(argv[4], 0, 10);
    float *x = aligned_alloc(64, 4 * n + 64), *y = aligned_alloc(64, 4 * n + 64);
    for (long i = 0; i < n; i++) x[i] = -20.0f + 40.0f * (float)((i * 2654435761u) %% 100000u) / 100000.0f;
    float *w = aligned_alloc(64, 4 * ROW);
    printf("same %%d %%d\n", same_pass(p_strip, x, y, w, n), same_pass(p_fused, x, y, w, n));
    double *t = malloc(sizeof(double) * NV * rounds), *ratio = malloc(sizeof(double) * NV * rounds);
    for (long k = 0; k < rounds; k++)
        for (int v = 0; v < NV; v++) {
            int u = (int)((v + k) %% NV);                 /* a different order each round */
            double t0 = now();
            for (long q = 0; q < reps; q++) loops[u](y, x, n);
            t[u * rounds + k] = (now() - t0) / reps / n * 1e9;
        }
    for (int v = 0; v < NV; v++)
        for (long k = 0; k < rounds; k++) ratio[v * rounds + k] = t[v * rounds + k] / t[(v < NE ? 0 : NE) * rounds + k];
    for (int v = 0; v < NV; v++) {
        qsort(t + v * rounds, rounds, 8, cmpd);
        qsort(ratio + v * rounds, rounds, 8, cmpd);
        printf("time %%d %%.4f %%.4f\n", v, t[v * rounds + rounds / 2], ratio[v * rounds + rounds / 2]);
    }
    return 0;
}
#else
int main(void) { puts("unsupported"); return 0; }
#endif
"""


def source() -> str:
    """The mock-up's C translation unit."""
    simd = lambda name, scalar, vector: (_SIMD_FN.replace("SCALAR", scalar).replace("VECTOR", vector)
                                         .replace("NAME", name))
    return _HARNESS % {
        "prelude": prelude(["base"]), "exp": _EXP_F32, "body": _BODY,
        "simd_exp": simd("tk_expv_f32", "tk_exp_f32(x)", "tk_exp16_body(x)"),
        "simd_id": simd("tk_idv_f32", "x", "x"),
        "clobbers": ", ".join(f'"xmm{i}"' for i in range(32)),
    }


def build(d: str, extra: tuple = ()) -> str:
    """Compile the mock-up with the CPU backend's compiler and flags (an executable, not a
    library), plus ``extra``."""
    tc = toolchain()
    src, exe = os.path.join(d, "m.c"), os.path.join(d, "m")
    Path(src).write_text(source())
    flags = [f for f in tc.flags if f != "-shared"]
    subprocess.run(list(tc.cmd) + flags + list(extra) + ["-o", exe, src, "-lm"], check=True)
    return exe


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 short rounds")
    ap.add_argument("--n", type=int, default=1 << 16, help="elements (default 64 Ki, in L2)")
    ap.add_argument("--rounds", type=int, default=41, help="interleaved rounds (medians are printed)")
    ap.add_argument("--check", action="store_true", help="compare every float32 with tk_exp_f32 instead of timing")
    ap.add_argument("--stride", type=int, default=1, help="with --check: every N-th float32 bit pattern")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        exe = build(d, ("-DTK_COUNT",) if a.check else ())
        if a.check:
            args = ["check", str(a.stride)]
        else:
            if a.n % 4096:
                ap.error("--n must be a multiple of 4096 (the softmax pass's rows)")
            rounds, reps = (3, 2) if a.quick else (a.rounds, max(1, (1 << 21) // a.n))
            args = ["time", str(a.n), str(rounds), str(reps)]
        out = subprocess.run([exe, *args], check=True, capture_output=True, text=True).stdout
    if out.strip() == "unsupported":
        print("bench_exp_simd: needs GCC and AVX-512 (F, DQ) on x86-64; nothing measured")
        return 0
    if a.check:
        _, n, calls, *bad = out.split()
        print(f"  the vectorized loop called the AVX-512 variant {calls} times")
        for name, b in zip(("avx512 simd call", "avx512 inline", "gather table"), bad):
            print(f"  {name:<17} {n} inputs and lengths 1..64: {b} results differ from tk_exp_f32")
        return 1 if any(int(b) for b in bad) or int(calls) == 0 else 0
    print(f"y = exp(x), {a.n} float32 in L2, one thread, medians of {rounds} interleaved rounds; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    lines = out.splitlines()
    for line in lines[1:]:
        _, v, ns, ratio = line.split()
        if int(v) == 6:
            print("softmax's exp pass, rows of 4096 (e = exp(x - m) stored and summed in 16 lanes):")
        ref = "c" if int(v) < 6 else "pass c"
        print(f"  {VARIANTS[int(v)]:<17} {float(ns):6.3f} ns/element  {float(ratio):5.3f} of {ref}")
    if lines[0].split()[1:] != ["1", "1"]:
        print("the strip-mined or intrinsics pass differs from the default pass's bits")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
