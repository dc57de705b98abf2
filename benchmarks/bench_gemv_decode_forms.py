#!/usr/bin/env python3
"""The exact q4_0 host GEMV's block loop in C (issue 13, gemv17, q4x18): what the per-chunk
decode of the float16 block scales and the next-row prefetch cost, which decode shapes would
pay, and two rows per call (the kernels' form since q4x18).

    PYTHONPATH=src python3 benchmarks/bench_gemv_decode_forms.py               # L2: 128 rows, 1 thread
    PYTHONPATH=src python3 benchmarks/bench_gemv_decode_forms.py --rows 29127 --threads 2 --rounds 15
    PYTHONPATH=src python3 benchmarks/bench_gemv_decode_forms.py --quick       # smoke test

Rows of K = 4096 weights (128 Q4_0 blocks, 2304 bytes; ``--rows`` 128 keeps them in L2, 29127
is bench_llm's 64 MiB), random bytes with finite scales, compiled with the CPU backend's
compiler and flags (``runtime/compiler.py``). Every variant is the kernel's block arithmetic
(``matmul.q4_0_block_dot``: ``vpmovzxbd``, two ``vpermps``, ``vpsrld``, a multiply and two FMAs,
the even blocks of a chunk into one register of lanes and the odd ones into another) and the
kernel's loop shape (``matmul.gemv_rows``: whole chunks in pairs, the scales decoded one chunk
ahead into two arrays by turns, read as ``{1to16}`` broadcasts); they differ in how the scales
are decoded and prefetched:

* ``kernel``: as the generated code: eight 16-bit loads inserted into a vector, one ``vcvtph2ps``
  and the NaN fix-up (``tk_load_halves``) per chunk of 8; the next row prefetched, 3 lines per
  block pair in the second chunk of each pair (as ``tk_pf_step``);
* ``no prefetch``, ``prefetch 2nd lines``: the same without the prefetch / every second line;
* ``vbmi gather``: the eight halves by two masked 64-byte loads and one ``vpermt2b``;
* ``gpr gather``: the eight halves assembled in two general registers, two vector moves;
* ``chunks of 16``: the kernel's decode twice per chunk of 16 blocks;
* ``16, vbmi, zmm``: chunks of 16, two VBMI gathers, one 512-bit conversion and a mask-register
  fix-up;
* ``no decode``: the scales read from a float array prepared beforehand (the floor);
* ``two rows``: the kernel's loop (and decode) for rows ``r`` and ``r + 1`` in one call, each
  block's ``x`` loaded once for both, the next pair's two rows prefetched (the kernel's form
  since issue 13's q4x18: ``matmul.gemv_row_pair``); odd row counts end with ``kernel``.

Each executable alternates the variants per round (thread CPU time per pass, OpenMP threads
summed) and prints the median ns per block and the median of the per-round ratios to
``kernel``; the sums of all variants must be equal bit for bit (exit status 1 otherwise).
Needs AVX-512 with VBMI and F16C (else nothing is measured).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tinykernels.runtime.compiler import toolchain  # noqa: E402

_C = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define NB 128
#define BB 18
#define RB (NB * BB)

static inline __attribute__((always_inline)) void fix8(float *o, __m128i v) {
    __m256 f = _mm256_cvtph_ps(v);
    __m256i q = _mm256_andnot_si256(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 13), _mm256_set1_epi32(0x400000));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    _mm256_storeu_ps(o, _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_and_si256(q, nan), _mm256_castps_si256(f))));
}
static inline __attribute__((always_inline)) __m128i words8(const uint8_t *p) {
    uint16_t h[8];
    for (int k = 0; k < 8; ++k) memcpy(&h[k], p + k * BB, 2);
    return _mm_set_epi16((short)h[7], (short)h[6], (short)h[5], (short)h[4], (short)h[3], (short)h[2], (short)h[1], (short)h[0]);
}
static inline __attribute__((always_inline)) __m128i vbmi8(const uint8_t *p) {
    const int need = 7 * BB + 2;
    const __mmask64 m0 = need >= 64 ? ~0ULL : ((1ULL << need) - 1), m1 = need <= 64 ? 0 : ((1ULL << (need - 64)) - 1);
    const __m128i ix = _mm_add_epi16(_mm_mullo_epi16(_mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7), _mm_set1_epi16(BB * 257)), _mm_set1_epi16(0x100));
    return _mm512_castsi512_si128(_mm512_permutex2var_epi8(_mm512_maskz_loadu_epi8(m0, p), _mm512_castsi128_si512(ix), _mm512_maskz_loadu_epi8(m1, p + 64)));
}
static inline __attribute__((always_inline)) __m128i gpr8(const uint8_t *p) {
    uint64_t lo = 0, hi = 0; uint16_t h;
    for (int k = 0; k < 4; ++k) { memcpy(&h, p + k * BB, 2); lo |= (uint64_t)h << (16 * k); }
    for (int k = 0; k < 4; ++k) { memcpy(&h, p + (k + 4) * BB, 2); hi |= (uint64_t)h << (16 * k); }
    return _mm_insert_epi64(_mm_cvtsi64_si128((long long)lo), (long long)hi, 1);
}
static float *g_sc; static const uint8_t *g_w;
static inline __attribute__((always_inline)) void dec_kernel(float *o, const uint8_t *p) { fix8(o, words8(p)); }
static inline __attribute__((always_inline)) void dec_vbmi(float *o, const uint8_t *p) { fix8(o, vbmi8(p)); }
static inline __attribute__((always_inline)) void dec_gpr(float *o, const uint8_t *p) { fix8(o, gpr8(p)); }
static inline __attribute__((always_inline)) void dec_none(float *o, const uint8_t *p) {
    size_t i = (size_t)(p - g_w) / BB; _mm256_storeu_ps(o, _mm256_loadu_ps(g_sc + i));
}
static inline __attribute__((always_inline)) void dec_kernel16(float *o, const uint8_t *p) { dec_kernel(o, p); dec_kernel(o + 8, p + 8 * BB); }
static inline __attribute__((always_inline)) void dec_vbmi16(float *o, const uint8_t *p) {
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(vbmi8(p)), vbmi8(p + 8 * BB), 1);
    __m512i f = _mm512_castps_si512(_mm512_cvtph_ps(v));
    __m512i q = _mm512_andnot_si512(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 13), _mm512_set1_epi32(0x400000));
    __mmask16 nan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(f), _mm512_castsi512_ps(f), _CMP_UNORD_Q);
    _mm512_storeu_ps(o, _mm512_castsi512_ps(_mm512_mask_andnot_epi32(f, nan, q, f)));
}
static inline __attribute__((always_inline)) void block(__m512 *acc, const uint8_t *p, const float *x, float d, __m512 tab) {
    __m512i i = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 2)));
    __m512 s = _mm512_mul_ps(_mm512_permutexvar_ps(i, tab), _mm512_loadu_ps(x));
    s = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(i, 4), tab), _mm512_loadu_ps(x + 16), s);
    *acc = _mm512_fmadd_ps(_mm512_set1_ps(d), s, *acc);
}
/* one row: chunks of C blocks in pairs, scales one chunk ahead in da/db; the next row `next`
   prefetched PER lines (STEP bytes apart) per block pair in each pair's second chunk */
#define ROW(NAME, DEC, C, PF, PER, STEP) \
__attribute__((noinline)) static float NAME(const uint8_t *row, const uint8_t *next, const float *x) { \
    const __m512 tab = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7); \
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(); \
    float da[C], db[C]; const char *pf = (const char *)next, *pe = (const char *)next + RB; \
    DEC(da, row); \
    for (int b0 = 0; b0 < NB; b0 += 2 * C) { \
        DEC(db, row + (b0 + C) * BB); \
        for (int t = 0; t < C; t += 2) { \
            block(&a0, row + (b0 + t) * BB, x + (b0 + t) * 32, da[t], tab); \
            block(&a1, row + (b0 + t + 1) * BB, x + (b0 + t + 1) * 32, da[t + 1], tab); } \
        if (b0 + 2 * C < NB) DEC(da, row + (b0 + 2 * C) * BB); \
        for (int t = 0; t < C; t += 2) { \
            if (PF) for (int k = 0; k < PER && pf < pe; ++k, pf += STEP) __builtin_prefetch(pf, 0, 2); \
            block(&a0, row + (b0 + C + t) * BB, x + (b0 + C + t) * 32, db[t], tab); \
            block(&a1, row + (b0 + C + t + 1) * BB, x + (b0 + C + t + 1) * 32, db[t + 1], tab); } \
    } \
    float r[32]; _mm512_storeu_ps(r, a0); _mm512_storeu_ps(r + 16, a1); \
    float s = 0; for (int j = 0; j < 32; ++j) s += r[j]; return s; }
ROW(v_kernel, dec_kernel, 8, 1, 3, 64)
ROW(v_nopf, dec_kernel, 8, 0, 3, 64)
ROW(v_pf2nd, dec_kernel, 8, 1, 2, 128)
ROW(v_vbmi, dec_vbmi, 8, 1, 3, 64)
ROW(v_gpr, dec_gpr, 8, 1, 3, 64)
ROW(v_k16, dec_kernel16, 16, 1, 3, 64)
ROW(v_vbmi16, dec_vbmi16, 16, 1, 3, 64)
ROW(v_none, dec_none, 8, 1, 3, 64)
static inline __attribute__((always_inline)) void block2(__m512 *acc, __m512 *acc2, const uint8_t *p, const uint8_t *p2,
                                                         const float *x, float d, float d2, __m512 tab) {
    __m512 xl = _mm512_loadu_ps(x), xh = _mm512_loadu_ps(x + 16);
    __m512i i = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 2)));
    __m512i i2 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p2 + 2)));
    __m512 s = _mm512_mul_ps(_mm512_permutexvar_ps(i, tab), xl), s2 = _mm512_mul_ps(_mm512_permutexvar_ps(i2, tab), xl);
    s = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(i, 4), tab), xh, s);
    s2 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(i2, 4), tab), xh, s2);
    *acc = _mm512_fmadd_ps(_mm512_set1_ps(d), s, *acc);
    *acc2 = _mm512_fmadd_ps(_mm512_set1_ps(d2), s2, *acc2);
}
static inline __attribute__((always_inline)) void pf3(const char **pf, const char *pe) {
    for (int k = 0; k < 3 && *pf < pe; ++k, *pf += 64) __builtin_prefetch(*pf, 0, 2);
}
/* rows `row` and `row + RB` in one pass (chunks of 8 in pairs, both rows' scales one chunk
   ahead), the next pair `next` (2 rows) prefetched: 3 lines of each row per block pair */
__attribute__((noinline)) static void v_two(const uint8_t *row, const uint8_t *next, const float *x, float *o) {
    const __m512 tab = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    const uint8_t *row2 = row + RB;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    float da[8], db[8], ea[8], eb[8];
    const char *pf = (const char *)next, *pe = pf + RB, *pf2 = pe, *pe2 = pe + RB;
    dec_kernel(da, row); dec_kernel(ea, row2);
    for (int b0 = 0; b0 < NB; b0 += 16) {
        dec_kernel(db, row + (b0 + 8) * BB); dec_kernel(eb, row2 + (b0 + 8) * BB);
        for (int t = 0; t < 8; t += 2) {
            block2(&a0, &c0, row + (b0 + t) * BB, row2 + (b0 + t) * BB, x + (b0 + t) * 32, da[t], ea[t], tab);
            block2(&a1, &c1, row + (b0 + t + 1) * BB, row2 + (b0 + t + 1) * BB, x + (b0 + t + 1) * 32, da[t + 1], ea[t + 1], tab); }
        if (b0 + 16 < NB) { dec_kernel(da, row + (b0 + 16) * BB); dec_kernel(ea, row2 + (b0 + 16) * BB); }
        for (int t = 0; t < 8; t += 2) {
            pf3(&pf, pe); pf3(&pf2, pe2);
            block2(&a0, &c0, row + (b0 + 8 + t) * BB, row2 + (b0 + 8 + t) * BB, x + (b0 + 8 + t) * 32, db[t], eb[t], tab);
            block2(&a1, &c1, row + (b0 + 9 + t) * BB, row2 + (b0 + 9 + t) * BB, x + (b0 + 9 + t) * 32, db[t + 1], eb[t + 1], tab); }
    }
    float r[32], s = 0, s2 = 0;
    _mm512_storeu_ps(r, a0); _mm512_storeu_ps(r + 16, a1); for (int j = 0; j < 32; ++j) s += r[j];
    _mm512_storeu_ps(r, c0); _mm512_storeu_ps(r + 16, c1); for (int j = 0; j < 32; ++j) s2 += r[j];
    o[0] = s; o[1] = s2;
}
typedef float (*rowfn)(const uint8_t *, const uint8_t *, const float *);
static const rowfn FS[] = {v_kernel, v_nopf, v_pf2nd, v_vbmi, v_gpr, v_k16, v_vbmi16, v_none, 0};
static const char *NAMES[] = {"kernel", "no prefetch", "prefetch 2nd lines", "vbmi gather", "gpr gather",
                              "chunks of 16", "16, vbmi, zmm", "no decode", "two rows"};
#define NF 9
#define TWO 8   /* FS index of "two rows" (pass_two) */
static double tcpu(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double pass(rowfn f, const uint8_t *w, const float *x, float *out, int rows) {
    double c = 0;
    #pragma omp parallel reduction(+:c)
    {
        double t0 = tcpu();
        #pragma omp for schedule(static)
        for (int r = 0; r < rows; ++r) out[r] = f(w + (size_t)r * RB, w + (size_t)(r + 1 < rows ? r + 1 : r) * RB, x);
        c += tcpu() - t0;
    }
    return c;
}
static double pass_two(const uint8_t *w, const float *x, float *out, int rows) {
    double c = 0;
    #pragma omp parallel reduction(+:c)
    {
        double t0 = tcpu();
        #pragma omp for schedule(static)
        for (int i = 0; i < rows / 2; ++i)
            v_two(w + (size_t)2 * i * RB, w + (size_t)(2 * i + 3 < rows ? 2 * i + 2 : 2 * i) * RB, x, out + 2 * i);
        c += tcpu() - t0;
    }
    if (rows % 2) out[rows - 1] = v_kernel(w + (size_t)(rows - 1) * RB, w + (size_t)(rows - 1) * RB, x);
    return c;
}
static double run(int f, const uint8_t *w, const float *x, float *out, int rows) {
    return f == TWO ? pass_two(w, x, out, rows) : pass(FS[f], w, x, out, rows);
}
int main(int argc, char **argv) {
    int rows = atoi(argv[1]), rounds = atoi(argv[2]);
    uint8_t *w = aligned_alloc(64, ((size_t)rows * RB + 127) / 64 * 64 + 64);
    float *x = aligned_alloc(64, NB * 32 * 4), *out = malloc(rows * 4), *ref = malloc(rows * 4);
    double *t = malloc(sizeof(double) * NF * rounds), *q = malloc(sizeof(double) * NF * rounds), tmp[4096];
    srand(1);
    for (size_t i = 0; i < (size_t)rows * RB; ++i) w[i] = (uint8_t)rand();
    for (size_t b = 0; b < (size_t)rows * NB; ++b) { uint16_t h = (uint16_t)(0x2000 + (rand() & 0x7ff)); memcpy(w + b * BB, &h, 2); }
    g_w = w; g_sc = malloc(((size_t)rows * NB + 16) * 4);
    for (size_t b = 0; b < (size_t)rows * NB; ++b) { uint16_t h; memcpy(&h, w + b * BB, 2); g_sc[b] = _cvtsh_ss(h); }
    for (int i = 0; i < NB * 32; ++i) x[i] = rand() / (float)RAND_MAX - 0.5f;
    int same = 1;
    pass(FS[0], w, x, ref, rows);
    for (int f = 1; f < NF; ++f) { run(f, w, x, out, rows); same &= memcmp(out, ref, rows * 4) == 0; }
    for (int k = 0; k < rounds; ++k)
        for (int f0 = 0; f0 < NF; ++f0) { int f = (f0 + k) % NF; t[f * rounds + k] = run(f, w, x, out, rows) / ((double)rows * NB) * 1e9; }
    printf("same %d\n", same);
    for (int f = 0; f < NF; ++f) {
        for (int k = 0; k < rounds; ++k) { q[k] = t[f * rounds + k] / t[k]; tmp[k] = t[f * rounds + k]; }
        qsort(tmp, rounds, sizeof(double), cmp); qsort(q, rounds, sizeof(double), cmp);
        printf("%s\t%.4f\t%.4f\t%.4f\t%.4f\n", NAMES[f], tmp[rounds / 2], q[rounds / 2], q[0], q[rounds - 1]);
    }
    return 0;
}
"""


def build(d: str) -> str:
    """The executable, with the CPU backend's compiler and flags (OpenMP included)."""
    tc = toolchain()
    src, exe = os.path.join(d, "gemv_forms.c"), os.path.join(d, "gemv_forms")
    Path(src).write_text(_C)
    flags = [f for f in tc.flags if f != "-shared"]
    subprocess.run(list(tc.cmd) + flags + ["-o", exe, src, "-lm"], check=True)
    return exe


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: 16 rows, 3 rounds")
    ap.add_argument("--rows", type=int, default=128, help="rows of 128 Q4_0 blocks (default 128: in L2; 29127: 64 MiB)")
    ap.add_argument("--threads", type=int, default=1, help="OpenMP threads (default 1)")
    ap.add_argument("--rounds", type=int, default=41, help="interleaved rounds (default 41)")
    a = ap.parse_args(argv)
    rows, rounds = (16, 3) if a.quick else (a.rows, a.rounds)
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if not all(f in flags for f in ("avx512f", "avx512bw", "avx512vbmi", "f16c")):
        print("bench_gemv_decode_forms: needs AVX-512 (F, BW, VBMI) and F16C; nothing measured")
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "OMP_WAIT_POLICY": "passive"}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([build(d), str(rows), str(rounds)], check=True, capture_output=True, text=True,
                             env=env).stdout.splitlines()
    print(f"exact q4_0 GEMV block loop, C forms: {rows} rows of 128 blocks ({rows * 2304 / 2**20:.1f} MiB), "
          f"{a.threads} thread(s), {rounds} interleaved rounds; load average {load0:.2f} -> "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"  {'variant':<20} {'ns/block':>8} {'/kernel':>8}  {'range of /kernel':>16}")
    for line in out[1:]:
        name, ns, ratio, lo, hi = line.split("\t")
        print(f"  {name:<20} {float(ns):8.3f} {float(ratio):8.3f}  {float(lo):7.3f}-{float(hi):.3f}")
    same = out[0] == "same 1"
    print("  all variants' sums equal bit for bit" if same else "  MISMATCH: a variant's sums differ")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
