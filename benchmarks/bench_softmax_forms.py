#!/usr/bin/env python3
"""Where a softmax over rows spends its time on the CPU, and which code shapes would pay
(issues 12 and 13, smx11): C mock-ups of the generated code, timed against a copy loop.

    PYTHONPATH=src python3 benchmarks/bench_softmax_forms.py                 # 1 thread, 3 runs
    PYTHONPATH=src python3 benchmarks/bench_softmax_forms.py --threads 2 --runs 5
    PYTHONPATH=src python3 benchmarks/bench_softmax_forms.py --quick         # smoke test

Rows of 4096 float32 (``--rows``, default 2048: bench_llm's 64 MiB softmax; bench_kernels'
is 4096 rows), 64-byte aligned, compiled with the CPU backend's flags (``runtime/compiler.py``;
the ``fastmath`` part adds ``codegen/c.py: FASTMATH_CFLAGS`` and glibc's vector ``expf``
declarations, as a ``fastmath`` kernel does). Each executable times its variants in
interleaved rounds (best of 4 calls per round, process CPU time, so other jobs' time slices
do not count; their memory traffic still does) and prints the median ns per element (per
thread: CPU time / elements) and the median of the per-round ratios to the copy loop of the
same round. Every variant also runs with the exponential replaced by the identity
(``-DNOEXP``: the memory and loop structure alone). The executables run ``--runs`` times,
alternated; the table shows the median and the range over runs.

``llm.softmax``'s host kernel (``_softmax_rows_ro``: its ``exp_neg_f32``, 32 lanes):

* ``llm now``: the generated shape: a max pass, the exponentials into a private row (summed in
  32 lanes, the next row prefetched two lines per 32 elements), then the row scaled into a
  256-float buffer in L1 that is written with non-temporal stores;
* ``llm pipelined``: the same arithmetic, but the scaled, streamed stores of row ``r - 1``
  interleaved into row ``r``'s exponential pass, 32 floats (two lines) per step: the stores
  drain while the exponentials compute instead of in a burst after them (two private rows);
* ``llm pipelined call``: the same with each step's two lines written by an out-of-line
  function (as the generated code calls ``tk_stream_bytes``);
* ``llm pipelined 1K``: the pipeline as the kernel language can express it today (the fused
  loop a top-level ``range`` loop, so the CPU streams it in 1 KiB staged blocks, and the sum a
  separate 32-lane pass over the private row), with the next row prefetched per block;
* ``exp pass in L1``: the exponential pass alone over one cached row (the compute bound).

``bench_kernels``' ``fastmath`` softmax (libmvec ``_ZGVeN16v_expf``, sums reassociated):

* ``fast in place``: the benchmark kernel's form and the C reference's: exponentials stored into
  ``out``, then rescaled in place (ordinary stores: each output line is read for ownership);
* ``fast in place +pf``: the same with the next row prefetched during the exp and rescale
  passes (what the generated code adds, docs/cpu.md "Next-row prefetch");
* ``fast row + nt``: the exponentials in a private row, ``out`` written once with streamed
  stores (no read for ownership: smx10's row staging, by hand);
* ``fast pipelined``: that, pipelined as ``llm pipelined``;
* ``exp pass in L1``: the exponential pass alone (``expf``, store, sum) over one cached row.

``llm`` variants are checked bit for bit against ``llm now`` before timing (exit status 1 if
one differs). Under load read the ratios, not the times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tinykernels  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from tinykernels.codegen.c import FASTMATH_CFLAGS
from tinykernels.runtime.compiler import toolchain

_HEAD = r"""
#ifdef FAST
#define __FAST_MATH__ 1          /* glibc declares its vector expf only under __FAST_MATH__ */
#include <math.h>
#undef __FAST_MATH__
#else
#include <math.h>
#endif
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define L 4096
#define LANES 32
#define CHUNK int t = omp_get_thread_num(), nt = omp_get_num_threads(); \
    int64_t lo = R * t / nt, hi = R * (t + 1) / nt; (void)lo; (void)hi;
typedef void fn(float *, const float *, int64_t);
static inline void stream_block(float *dst, const float *src, int n) {   /* dst 64-byte aligned */
    for (int j = 0; j < n; j += 16) _mm512_stream_ps(dst + j, _mm512_load_ps(src + j));
}
static inline void pf_lines(const char *p, int n) { for (int k = 0; k < n; ++k) __builtin_prefetch(p + 64 * k, 0, 2); }
static void copy(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { int t = omp_get_thread_num(), nt = omp_get_num_threads(); int64_t n = R * L, lo = n * t / nt, hi = n * (t + 1) / nt;
      for (int64_t i = lo; i < hi; ++i) out[i] = x[i]; }
}
"""

_LLM = r"""
static inline float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline int32_t fbits(float f) { int32_t u; memcpy(&u, &f, 4); return u; }
static inline float exp_neg(float x) {          /* llm/_math.py exp_neg_f32, as generated */
    float xc = -104.0f > x ? -104.0f : x;
    float t = fmaf(xc, 0x1.715476p+0f, 0x1.8p+23f);
    int32_t ni = fbits(t) - 1262485504;
    float n = (float)ni;
    float r = fmaf(n, 0x1.bd0106p-13f, fmaf(n, -0x1.63p-1f, xc));
    float p = fmaf(fmaf(fmaf(fmaf(fmaf(0x1.a0d2cep-13f, r, 0x1.6e879cp-10f), r, 0x1.111210p-7f), r,
                                0x1.555382p-5f), r, 0x1.555554p-3f), r, 0x1.0p-1f);
    float y = fmaf(r * r, p, r) + 1.0f;
    int32_t e1 = ni >> 1;
    return (y * bitsf((uint32_t)(e1 + 127) << 23)) * bitsf((uint32_t)(ni - e1 + 127) << 23);
}
#ifdef NOEXP
#define EXP(v) (v)
#else
#define EXP(v) exp_neg(v)
#endif
static inline float row_max(const float *x, float scale) {
    float acc[LANES];
    for (int j = 0; j < LANES; ++j) acc[j] = -INFINITY;
    for (int l0 = 0; l0 < L; l0 += LANES)
        for (int j = 0; j < LANES; ++j) { float v = x[l0 + j] * scale; acc[j] = v > acc[j] ? v : acc[j]; }
    float m = -INFINITY;
    for (int j = 0; j < LANES; ++j) m = acc[j] > m ? acc[j] : m;
    return m;
}
static inline float lanes_sum(const float *row) {
    float acc[LANES];
    for (int j = 0; j < LANES; ++j) acc[j] = 0;
    for (int l0 = 0; l0 < L; l0 += LANES)
        for (int j = 0; j < LANES; ++j) acc[j] += row[l0 + j];
    float s = 0;
    for (int j = 0; j < LANES; ++j) s += acc[j];
    return s;
}
/* row[l] = exp(x * scale - m), the sum in 32 lanes; the next row nx prefetched 2 lines per step */
static inline float exp_pass(float *restrict row, const float *restrict x, float scale, float m, const char *nx) {
    float acc[LANES];
    for (int j = 0; j < LANES; ++j) acc[j] = 0;
    for (int l0 = 0; l0 < L; l0 += LANES) {
        if (nx) pf_lines(nx + 2 * l0 / LANES * 64, 2);
        for (int j = 0; j < LANES; ++j) { float e = EXP(x[l0 + j] * scale - m); acc[j] += e; row[l0 + j] = e; }
    }
    float s = 0;
    for (int j = 0; j < LANES; ++j) s += acc[j];
    return s;
}
static void llm_now(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      float row[L] __attribute__((aligned(64))), stage[256] __attribute__((aligned(64)));
      for (int64_t r = lo; r < hi; ++r) {
          const float *xr = x + r * L; float *o = out + r * L;
          float m = row_max(xr, 1.0f);
          float inv = 1.0f / exp_pass(row, xr, 1.0f, m, r + 1 < R ? (const char *)(xr + L) : 0);
          for (int b = 0; b < L; b += 256) {
              for (int j = 0; j < 256; ++j) stage[j] = row[b + j] * inv;
              stream_block(o + b, stage, 256);
          }
      }
      _mm_sfence(); }
}
__attribute__((noinline)) static void stream_call(float *dst, const float *src, int n) { stream_block(dst, src, n); }
/* call: each step's lines written by the out-of-line stream_call (as tk_stream_bytes is) */
static inline void llm_pipe_impl(float *out, const float *x, int64_t R, int call) {
    #pragma omp parallel
    { CHUNK
      float rows[2][L] __attribute__((aligned(64))), stage[LANES] __attribute__((aligned(64)));
      float pinv = 0;
      for (int64_t r = lo; r < hi; ++r) {
          float *prev = rows[(r - 1) & 1], *row = rows[r & 1], *po = out + (r - 1) * L;
          const float *xr = x + r * L;
          const char *nx = r + 1 < R ? (const char *)(xr + L) : 0;
          float m = row_max(xr, 1.0f), acc[LANES];
          for (int j = 0; j < LANES; ++j) acc[j] = 0;
          for (int l0 = 0; l0 < L; l0 += LANES) {
              if (nx) pf_lines(nx + 2 * l0 / LANES * 64, 2);
              for (int j = 0; j < LANES; ++j) { float e = EXP(xr[l0 + j] - m); acc[j] += e; row[l0 + j] = e; }
              if (r > lo) {
                  for (int j = 0; j < LANES; ++j) stage[j] = prev[l0 + j] * pinv;
                  if (call) stream_call(po + l0, stage, LANES); else stream_block(po + l0, stage, LANES);
              }
          }
          float s = 0;
          for (int j = 0; j < LANES; ++j) s += acc[j];
          pinv = 1.0f / s;
      }
      if (hi > lo) {
          float *prev = rows[(hi - 1) & 1], *po = out + (hi - 1) * L;
          for (int b = 0; b < L; b += LANES) {
              for (int j = 0; j < LANES; ++j) stage[j] = prev[b + j] * pinv;
              if (call) stream_call(po + b, stage, LANES); else stream_block(po + b, stage, LANES);
          }
      }
      _mm_sfence(); }
}
static void llm_pipe(float *out, const float *x, int64_t R) { llm_pipe_impl(out, x, R, 0); }
static void llm_pipe_call(float *out, const float *x, int64_t R) { llm_pipe_impl(out, x, R, 1); }
static void llm_pipe1k(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      float rows[2][L] __attribute__((aligned(64))), stage[256] __attribute__((aligned(64)));
      float pinv = 0;
      for (int64_t r = lo; r < hi; ++r) {
          float *prev = rows[(r - 1) & 1], *row = rows[r & 1], *po = out + (r - 1) * L;
          const float *xr = x + r * L;
          const char *nx = r + 1 < R ? (const char *)(xr + L) : 0;
          float m = row_max(xr, 1.0f);
          for (int b = 0; b < L; b += 256) {
              if (nx) pf_lines(nx + 4 * b, 16);
              if (r > lo) {
                  for (int j = 0; j < 256; ++j) { row[b + j] = EXP(xr[b + j] - m); stage[j] = prev[b + j] * pinv; }
                  stream_block(po + b, stage, 256);
              } else
                  for (int j = 0; j < 256; ++j) row[b + j] = EXP(xr[b + j] - m);
          }
          pinv = 1.0f / lanes_sum(row);
      }
      if (hi > lo) {
          float *prev = rows[(hi - 1) & 1], *po = out + (hi - 1) * L;
          for (int b = 0; b < L; b += 256) {
              for (int j = 0; j < 256; ++j) stage[j] = prev[b + j] * pinv;
              stream_block(po + b, stage, 256);
          }
      }
      _mm_sfence(); }
}
static void llm_exp_l1(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      float row[L] __attribute__((aligned(64))), s = 0;
      for (int64_t r = lo; r < hi; ++r) s += exp_pass(row, x, 1.0f, 0.5f, 0) + row[r & (L - 1)];
      out[lo * L] = s; }
}
static struct { const char *name; fn *f; } V[] = {{"copy loop", copy}, {"llm now", llm_now},
    {"llm pipelined", llm_pipe}, {"llm pipelined call", llm_pipe_call}, {"llm pipelined 1K", llm_pipe1k}, {"exp pass in L1", llm_exp_l1}};
"""

_FASTMATH = r"""
#ifdef NOEXP
#define EXP(v) (v)
#else
#define EXP(v) expf(v)
#endif
static inline float rmax(const float *x) {
    float m = -INFINITY;
    #pragma omp simd reduction(max:m)
    for (int j = 0; j < L; ++j) m = x[j] > m ? x[j] : m;
    return m;
}
static void f_inplace(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      for (int64_t r = lo; r < hi; ++r) {
          const float *xr = x + r * L; float *o = out + r * L;
          float m = rmax(xr), s = 0;
          #pragma omp simd reduction(+:s)
          for (int j = 0; j < L; ++j) { o[j] = EXP(xr[j] - m); s += o[j]; }
          float inv = 1.0f / s;
          #pragma omp simd
          for (int j = 0; j < L; ++j) o[j] *= inv;
      } }
}
static void f_inplace_pf(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      for (int64_t r = lo; r < hi; ++r) {
          const float *xr = x + r * L; float *o = out + r * L;
          const char *nx = r + 1 < R ? (const char *)(xr + L) : 0;
          float m = rmax(xr), s = 0;
          for (int b = 0, i = 0; b < L; b += 256, ++i) {       /* 12 lines per block: lines 0..191 */
              if (nx) pf_lines(nx + 64 * 12 * i, 12);
              #pragma omp simd reduction(+:s)
              for (int j = b; j < b + 256; ++j) { o[j] = EXP(xr[j] - m); s += o[j]; }
          }
          float inv = 1.0f / s;
          for (int b = 0, i = 0; b < L; b += 256, ++i) {       /* 4 lines per block: lines 192..255 */
              if (nx) pf_lines(nx + 64 * (192 + 4 * i), 4);
              #pragma omp simd
              for (int j = b; j < b + 256; ++j) o[j] *= inv;
          }
      } }
}
static void f_row_nt(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      float row[L] __attribute__((aligned(64)));
      for (int64_t r = lo; r < hi; ++r) {
          const float *xr = x + r * L; float *o = out + r * L;
          float m = rmax(xr), s = 0;
          #pragma omp simd reduction(+:s)
          for (int j = 0; j < L; ++j) { row[j] = EXP(xr[j] - m); s += row[j]; }
          __m512 v = _mm512_set1_ps(1.0f / s);
          for (int j = 0; j < L; j += 16) _mm512_stream_ps(o + j, _mm512_mul_ps(_mm512_load_ps(row + j), v));
      }
      _mm_sfence(); }
}
static void f_pipe(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      float rows[2][L] __attribute__((aligned(64))), pinv = 0;
      for (int64_t r = lo; r < hi; ++r) {
          const float *xr = x + r * L; float *row = rows[r & 1], *prev = rows[(r - 1) & 1], *po = out + (r - 1) * L;
          const char *nx = r + 1 < R ? (const char *)(xr + L) : 0;
          float m = rmax(xr), s = 0;
          __m512 v = _mm512_set1_ps(pinv);
          for (int b = 0; b < L; b += 32) {
              if (nx) pf_lines(nx + 4 * b, 2);
              #pragma omp simd reduction(+:s)
              for (int j = b; j < b + 32; ++j) { row[j] = EXP(xr[j] - m); s += row[j]; }
              if (r > lo) {
                  _mm512_stream_ps(po + b, _mm512_mul_ps(_mm512_load_ps(prev + b), v));
                  _mm512_stream_ps(po + b + 16, _mm512_mul_ps(_mm512_load_ps(prev + b + 16), v));
              }
          }
          pinv = 1.0f / s;
      }
      if (hi > lo) {
          float *po = out + (hi - 1) * L, *prev = rows[(hi - 1) & 1];
          __m512 v = _mm512_set1_ps(pinv);
          for (int j = 0; j < L; j += 16) _mm512_stream_ps(po + j, _mm512_mul_ps(_mm512_load_ps(prev + j), v));
      }
      _mm_sfence(); }
}
static void f_exp_l1(float *out, const float *x, int64_t R) {
    #pragma omp parallel
    { CHUNK
      float row[L] __attribute__((aligned(64))), acc = 0;
      for (int64_t r = lo; r < hi; ++r) {
          float s = 0;
          #pragma omp simd reduction(+:s)
          for (int j = 0; j < L; ++j) { row[j] = EXP(x[j] - 0.5f); s += row[j]; }
          acc += s + row[r & (L - 1)];
      }
      out[lo * L] = acc; }
}
static struct { const char *name; fn *f; } V[] = {{"copy loop", copy}, {"fast in place", f_inplace},
    {"fast in place +pf", f_inplace_pf}, {"fast row + nt", f_row_nt}, {"fast pipelined", f_pipe},
    {"exp pass in L1", f_exp_l1}};
"""

_MAIN = r"""
static double now(void) { struct timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    int64_t R = atoll(argv[1]); int rounds = atoi(argv[2]), nv = sizeof V / sizeof V[0];
    float *x = aligned_alloc(64, R * L * 4), *o = aligned_alloc(64, R * L * 4), *o2 = aligned_alloc(64, R * L * 4);
    srand(1);
    for (int64_t i = 0; i < R * L; ++i) x[i] = (rand() / (float)RAND_MAX - 0.5f) * 8;
    memset(o, 0, R * L * 4); memset(o2, 0, R * L * 4);
    int same = 1;
#ifndef FAST
    V[1].f(o, x, R);
    for (int v = 2; v < nv - 1; ++v) { V[v].f(o2, x, R); same &= memcmp(o, o2, R * L * 4) == 0; }
#endif
    printf("same %d\n", same);
    double *ts = calloc(nv * rounds, sizeof(double));
    for (int k = 0; k < rounds; ++k)
        for (int v = 0; v < nv; ++v) {
            double best = 1e9;
            for (int rep = 0; rep < 4; ++rep) { double t0 = now(); V[v].f(o, x, R); double t = now() - t0; if (t < best) best = t; }
            ts[v * rounds + k] = best;
        }
    for (int v = 0; v < nv; ++v) {
        double r[rounds], t[rounds];
        for (int k = 0; k < rounds; ++k) { r[k] = ts[v * rounds + k] / ts[k]; t[k] = ts[v * rounds + k]; }
        qsort(r, rounds, sizeof(double), cmpd); qsort(t, rounds, sizeof(double), cmpd);
        printf("%s\t%.4f\t%.4f\n", V[v].name, t[rounds / 2] * 1e9 / (R * L), r[rounds / 2]);
    }
    return 0;
}
"""


def build(d: str, fast: bool, noexp: bool) -> str:
    """One executable: the ``llm`` or the ``fastmath`` variants, with the CPU backend's compiler
    and flags (plus ``FASTMATH_CFLAGS`` for ``fast``), the exponential replaced by the identity
    with ``noexp``."""
    tc = toolchain()
    name = ("fast" if fast else "llm") + ("_noexp" if noexp else "")
    src, exe = os.path.join(d, name + ".c"), os.path.join(d, name)
    Path(src).write_text(("#define FAST 1\n" if fast else "") + _HEAD + (_FASTMATH if fast else _LLM) + _MAIN)
    flags = [f for f in tc.flags if f != "-shared"] + (list(FASTMATH_CFLAGS) if fast else [])
    subprocess.run(list(tc.cmd) + flags + (["-DNOEXP"] if noexp else []) + ["-o", exe, src, "-lm"], check=True)
    return exe


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: 64 rows, 3 rounds, 1 run")
    ap.add_argument("--rows", type=int, default=2048, help="rows of 4096 float32 (default 2048: 32 MiB each way)")
    ap.add_argument("--threads", type=int, default=1, help="OpenMP threads (default 1)")
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds per run")
    ap.add_argument("--runs", type=int, default=3, help="runs of each executable, alternated")
    a = ap.parse_args(argv)
    rows, rounds, runs = (64, 3, 1) if a.quick else (a.rows, a.rounds, a.runs)
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists() or "avx512f" not in cpuinfo.read_text():
        print("bench_softmax_forms: needs AVX-512 (the streamed stores are AVX-512 intrinsics); nothing measured")
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "OMP_WAIT_POLICY": "passive"}
    load0 = os.getloadavg()[0]
    results: dict = {}       # (exe, variant) -> [(ns, ratio), ...]
    ok = True
    with tempfile.TemporaryDirectory() as d:
        exes = [(fast, noexp, build(d, fast, noexp)) for fast in (False, True) for noexp in (False, True)]
        for _ in range(runs):
            for fast, noexp, exe in exes:
                out = subprocess.run([exe, str(rows), str(rounds)], check=True, capture_output=True, text=True,
                                     env=env).stdout.splitlines()
                ok &= out[0] == "same 1"
                for line in out[1:]:
                    name, ns, ratio = line.split("\t")
                    results.setdefault((fast, noexp, name), []).append((float(ns), float(ratio)))
    print(f"softmax forms: {rows} rows of 4096 float32, {a.threads} thread(s), {runs} run(s) of {rounds} interleaved "
          f"rounds; load average {load0:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"  {'variant':<20} {'ns/elem':>8} {'/copy':>6}  {'range of /copy':>14}   {'no exp ns':>9} {'/copy':>6}")
    for fast in (False, True):
        print("  llm.softmax host kernel (exp_neg_f32):" if not fast else "  bench_kernels fastmath softmax (libmvec):")
        for (f, noexp, name), vals in results.items():
            if f != fast or noexp:
                continue
            ns = statistics.median(v[0] for v in vals)
            rs = [v[1] for v in vals]
            bare = results.get((fast, True, name), [])
            bns = statistics.median(v[0] for v in bare) if bare else float("nan")
            brs = statistics.median(v[1] for v in bare) if bare else float("nan")
            print(f"  {name:<20} {ns:8.3f} {statistics.median(rs):6.3f}  {min(rs):6.3f}-{max(rs):6.3f}   "
                  f"{bns:9.3f} {brs:6.3f}")
    if not ok:
        print("an llm variant's output differs from llm now's bits")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
