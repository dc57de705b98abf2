#!/usr/bin/env python3
"""GPU-style kernels on the CPU: tinykernels CPU vs PoCL vs hand-written C + OpenMP vs PyTorch.

    PYTHONPATH=src python3 benchmarks/bench_kernels.py            # >= 64 MiB per kernel (full)
    PYTHONPATH=src python3 benchmarks/bench_kernels.py --quick    # small sizes, smoke test
    PYTHONPATH=src python3 benchmarks/bench_kernels.py --threads 1
    PYTHONPATH=src python3 benchmarks/bench_kernels.py --only matmul,transpose   # some rows only

Kernels (float32 unless said otherwise), written the way one writes them for a GPU:

* row sum, row max: one workgroup of 64 per row, ``for j in range(lid, D, WG)`` + ``group_reduce``
* RMSNorm, softmax over rows: the same shape, two or three passes over the row; softmax also
  as a ``fastmath`` kernel (vectorized ``exp``) against a C reference built with ``-ffast-math``
* transpose through a local-memory tile (16 x 17)
* tiled matmul with local-memory tiles (GFLOP/s and the ratio to NumPy's BLAS)
* histogram (256 bins, int32 keys): a local histogram with ``atomic_add``, merged into the
  global one with ``atomic_add``
* prefix sum: ``group_scan`` per tile with a running carry, the tile totals scanned by one
  group with the same kernel, then an offset pass; also as a ``fastmath`` kernel (SIMD scans)
* Q4_0 GEMV (ggml block layout): ``tinykernels.llm.matmul(llm.quantize(w, "q4_0"), x)``, and a
  plain kernel written here GPU-style (one group per row)

Columns: tinykernels CPU, tinykernels on PoCL, a hand-written C + OpenMP version (vectorizable
loops, ``#pragma omp simd reduction`` where it reassociates; compiled with tinykernels' own
compiler and flags), PyTorch CPU where an op exists. Every implementation is checked against
NumPy (float64 where it matters) before it is timed; the script exits 1 on a wrong result.

Bandwidth is T_eff: the bytes a kernel must move at least (each input read once, each output
written once; re-reads of a row that fits in cache are not counted) over the time, in GB/s.
``/memcpy`` is T_eff of tinykernels CPU as a fraction of the copy reference, a C + OpenMP copy
loop over the same number of bytes with the same thread count (multi-threaded like every
kernel here; the same measurement as ``bench_cpu.py``'s C-ref copy column). Times are the best
per-call time of interleaved rounds (A B C A B C ...) lasting at least ``--min-time`` seconds.
Numbers taken while other processes load the machine are only meaningful as ratios within
one run (the script prints the load average).
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    import tinykernels as tk
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk
from tinykernels import llm
from tinykernels.runtime.compiler import toolchain

WG = 64
TILE = 16
NBINS = 256
SCAN_PER = 64            # prefix sum: elements per work item and tile (tile = WG * SCAN_PER)


# ----------------------------------------------------------------------------- tinykernels kernels

@tk.kernel
def rowsum(out, X: tk.Const, D: tk.constexpr):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    acc = 0.0
    for j in range(lid, D, tk.groupsize()[0]):
        acc += X[row, j]
    tot = tk.group_reduce(acc, "add")
    if lid == 0:
        out[row] = tot


@tk.kernel
def rowmax(out, X: tk.Const, D: tk.constexpr):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    m = -math.inf
    for j in range(lid, D, tk.groupsize()[0]):
        m = max(m, X[row, j])
    tot = tk.group_reduce(m, "max")
    if lid == 0:
        out[row] = tot


@tk.kernel
def rmsnorm(out, X: tk.Const, w: tk.Const, D: tk.constexpr, eps):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    acc = 0.0
    for j in range(lid, D, n):
        x = X[row, j]
        acc += x * x
    tot = tk.group_reduce(acc, "add")
    scale = 1.0 / math.sqrt(tot / D + eps)
    for j in range(lid, D, n):
        out[row, j] = X[row, j] * scale * w[j]


@tk.kernel
def softmax(out, X: tk.Const, D: tk.constexpr):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    m = -math.inf
    for j in range(lid, D, n):
        m = max(m, X[row, j])
    m = tk.group_reduce(m, "max")
    s = 0.0
    for j in range(lid, D, n):      # one exp per element, as the C reference (and PyTorch) do
        e = math.exp(X[row, j] - m)
        out[row, j] = e
        s += e
    inv = 1.0 / tk.group_reduce(s, "add")
    for j in range(lid, D, n):      # each item rescales the elements it wrote itself
        out[row, j] *= inv


softmax_fast = tk.kernel(fastmath=True)(softmax.fn)


@tk.kernel
def transpose(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    out[gj * T + li, gi * T + lj] = tile[lj, li]


@tk.kernel
def matmul(C, A: tk.Const, B: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    As = tk.localmem(A.dtype, (T, T))
    Bs = tk.localmem(B.dtype, (T, T))
    acc = tk.private(C.dtype, (1,))
    acc[0] = 0.0
    for t0 in range(0, A.shape[1], T):
        As[li, lj] = A[i, t0 + lj]
        Bs[li, lj] = B[t0 + li, j]
        tk.synchronize()
        for q in range(T):
            acc[0] += As[li, q] * Bs[q, lj]
        tk.synchronize()
    C[i, j] = acc[0]


@tk.kernel
def histogram(hist, keys: tk.Const, NB: tk.constexpr):
    g = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    lh = tk.localmem(tk.int32, (NB,))
    for b in range(lid, NB, n):
        lh[b] = 0
    tk.synchronize()
    for i in range(g, keys.shape[0], tk.ndrange()[0]):
        tk.atomic_add(lh, keys[i], 1)
    tk.synchronize()
    for b in range(lid, NB, n):
        tk.atomic_add(hist, b, lh[b])


@tk.kernel
def zero_i32(a):
    a[tk.index()] = 0


@tk.kernel
def scan_tiles(out, totals, x: tk.Const, PER: tk.constexpr):
    """Inclusive prefix sum of each tile of ``groupsize * PER`` elements; tile totals out."""
    grp = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    base = grp * n * PER
    carry = tk.float32(0)
    for k in range(PER):
        i = base + k * n + lid
        v = x[i]
        out[i] = carry + tk.group_scan(v, "add")
        carry += tk.group_reduce(v, "add")
    if lid == 0:
        totals[grp] = carry


scan_tiles_fast = tk.kernel(fastmath=True)(scan_tiles.fn)


@tk.kernel
def add_offsets(out, incl: tk.Const, TILE_N: tk.constexpr):
    i = tk.index()
    t = i // TILE_N
    if t > 0:
        out[i] += incl[t - 1]


@tk.func
def f16_at(data, r, i):
    """The little-endian IEEE half at ``data[r, i:i + 2]`` as float32 (normal and subnormal)."""
    h = tk.int32(data[r, i]) | (tk.int32(data[r, i + 1]) << 8)
    e = (h >> 10) & 31
    m = h & 1023
    v = tk.float32(m) * 5.9604644775390625e-08
    if e > 0:
        v = tk.float32(m | 1024) * tk.float32(1 << e) * 2.98023223876953125e-08
    return -v if (h & 0x8000) != 0 else v


@tk.kernel
def q4_0_gemv(out, data: tk.Const, x: tk.Const):
    r = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    acc = tk.float32(0)
    for b in range(lid, data.shape[1] // 18, tk.groupsize()[0]):
        d = f16_at(data, r, b * 18)
        for j in range(16):
            q = tk.int32(data[r, b * 18 + 2 + j])
            acc += d * tk.float32((q & 15) - 8) * x[b * 32 + j] + d * tk.float32((q >> 4) - 8) * x[b * 32 + j + 16]
    s = tk.group_reduce(acc, "add")
    if lid == 0:
        out[r] = s


# ----------------------------------------------------------------------------- hand-written C + OpenMP

C_REF = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>

void ref_copy(float *restrict d, const float *restrict s, int64_t n, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
}
void ref_rowsum(float *restrict out, const float *restrict X, int64_t R, int64_t D, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t r = 0; r < R; ++r) { float acc = 0;
        #pragma omp simd reduction(+:acc)
        for (int64_t j = 0; j < D; ++j) acc += X[r * D + j];
        out[r] = acc; }
}
void ref_rowmax(float *restrict out, const float *restrict X, int64_t R, int64_t D, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t r = 0; r < R; ++r) { float m = -INFINITY;
        #pragma omp simd reduction(max:m)
        for (int64_t j = 0; j < D; ++j) m = X[r * D + j] > m ? X[r * D + j] : m;
        out[r] = m; }
}
/* RMSNorm: an output larger than the last-level cache (32 MiB here) is written with
   non-temporal stores (no read for ownership), as a C programmer tuning for bandwidth would:
   a row's lines from its first whole cache line on, the partial lines at its ends stored
   directly (AVX-512 or AVX; plain stores elsewhere). */
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif
#define REF_STREAM_BYTES ((int64_t)32 << 20)
void ref_rmsnorm(float *restrict out, const float *restrict X, const float *restrict w, int64_t R,
                 int64_t D, float eps, int nt) {
    const int stream = R * D * (int64_t)sizeof(float) >= REF_STREAM_BYTES;
    #pragma omp parallel num_threads(nt)
    {
    #pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < R; ++r) { float acc = 0;
        const float *x = X + r * D; float *o = out + r * D;
        #pragma omp simd reduction(+:acc)
        for (int64_t j = 0; j < D; ++j) acc += x[j] * x[j];
        float s = 1.0f / sqrtf(acc / D + eps);
        int64_t j = 0;
#if defined(__AVX512F__) || defined(__AVX__)
        if (stream && ((uintptr_t)o & 3) == 0) {
#if defined(__AVX512F__)
            enum { V = 16 };
#else
            enum { V = 8 };
#endif
            int64_t head = (int64_t)((64 - ((uintptr_t)o & 63)) & 63) / 4;
            if (head > D) head = D;
            for (; j < head; ++j) o[j] = x[j] * s * w[j];
            for (; j + V <= D; j += V) {
#if defined(__AVX512F__)
                __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), _mm512_set1_ps(s)), _mm512_loadu_ps(w + j));
                _mm512_stream_ps(o + j, v);
#else
                __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(s)), _mm256_loadu_ps(w + j));
                _mm256_stream_ps(o + j, v);
#endif
            }
        }
#endif
        #pragma omp simd
        for (int64_t jj = j; jj < D; ++jj) o[jj] = x[jj] * s * w[jj]; }
#if defined(__AVX512F__) || defined(__AVX__)
    if (stream) _mm_sfence();       /* each thread orders its own streaming stores */
#endif
    }
}
void ref_softmax(float *restrict out, const float *restrict X, int64_t R, int64_t D, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t r = 0; r < R; ++r) { const float *x = X + r * D; float *o = out + r * D;
        float m = -INFINITY, s = 0;
        #pragma omp simd reduction(max:m)
        for (int64_t j = 0; j < D; ++j) m = x[j] > m ? x[j] : m;
        #pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < D; ++j) { o[j] = expf(x[j] - m); s += o[j]; }
        float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t j = 0; j < D; ++j) o[j] *= inv; }
}
/* transpose: 16 x 16 tiles, a band of 16 input rows per step across all columns (16 sequential
   read streams for the prefetchers). With AVX-512 and an output whose tile rows start cache
   lines: each tile transposed in registers (unpack / shuffle network) and its 16 rows written
   with non-temporal stores (whole lines: no read for ownership). Otherwise the tile goes
   through a buffer (contiguous loads) and its rows are gathered from it. */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline void tr16_stream(const float *a, int64_t lda, float *o, int64_t ldo) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(a + i * lda);
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]); }
    for (int i = 0; i < 4; ++i) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE); }
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD); }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD); }
    for (int i = 0; i < 16; ++i) _mm512_stream_ps(o + i * ldo, r[i]);
}
#endif
void ref_transpose(float *restrict out, const float *restrict a, int64_t R, int64_t C, int nt) {
#if defined(__AVX512F__)
    if (((uintptr_t)out & 63) == 0 && R % 16 == 0 && C % 16 == 0) {
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i0 = 0; i0 < R; i0 += 16)
            for (int64_t j0 = 0; j0 < C; j0 += 16) tr16_stream(a + i0 * C + j0, C, out + j0 * R + i0, R);
        _mm_sfence();
        return;
    }
#endif
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i0 = 0; i0 < R; i0 += 16)
        for (int64_t j0 = 0; j0 < C; j0 += 16) {
            const int64_t ni = R - i0 < 16 ? R - i0 : 16, nj = C - j0 < 16 ? C - j0 : 16;
            float t[16][16];
            for (int64_t i = 0; i < ni; ++i)
                for (int64_t j = 0; j < nj; ++j) t[i][j] = a[(i0 + i) * C + j0 + j];
            for (int64_t j = 0; j < nj; ++j)
                for (int64_t i = 0; i < ni; ++i) out[(j0 + j) * R + i0 + i] = t[i][j];
        }
}
void ref_matmul(float *restrict Cm, const float *restrict A, const float *restrict B, int64_t n, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) Cm[i * n + j] = 0;
        for (int64_t k = 0; k < n; ++k) { float a = A[i * n + k];
            #pragma omp simd
            for (int64_t j = 0; j < n; ++j) Cm[i * n + j] += a * B[k * n + j]; } }
}
void ref_histogram(int32_t *restrict hist, const int32_t *restrict keys, int64_t n, int nt) {
    memset(hist, 0, 256 * sizeof(int32_t));
    #pragma omp parallel num_threads(nt)
    { int32_t h[256] = {0};
      #pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) h[keys[i]]++;
      for (int b = 0; b < 256; ++b) if (h[b]) {
          #pragma omp atomic
          hist[b] += h[b]; } }
}
/* two passes: each thread sums its chunk, then scans it starting from the sum of the chunks before */
void ref_scan(float *restrict out, const float *restrict x, int64_t n, int nt) {
    float part[1024];
    #pragma omp parallel num_threads(nt)
    { int t = omp_get_thread_num(), T = omp_get_num_threads();
      int64_t lo = n * t / T, hi = n * (t + 1) / T; float s = 0;
      #pragma omp simd reduction(+:s)
      for (int64_t i = lo; i < hi; ++i) s += x[i];
      part[t] = s;
      #pragma omp barrier
      float c = 0;
      for (int u = 0; u < t; ++u) c += part[u];
      for (int64_t i = lo; i < hi; ++i) { c += x[i]; out[i] = c; } }
}
static inline float f16(const uint8_t *p) {
    int h = p[0] | (p[1] << 8), e = (h >> 10) & 31, m = h & 1023;
    float v = e ? ldexpf((float)(m | 1024), e - 25) : ldexpf((float)m, -24);
    return (h & 0x8000) ? -v : v;
}
void ref_q4_0_gemv(float *restrict out, const uint8_t *restrict W, const float *restrict x,
                   int64_t M, int64_t K, int nt) {
    int64_t nb = K / 32;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t r = 0; r < M; ++r) { float acc = 0;
        for (int64_t b = 0; b < nb; ++b) { const uint8_t *blk = W + (r * nb + b) * 18;
            const float *xb = x + b * 32; float s = 0;
            #pragma omp simd reduction(+:s)
            for (int j = 0; j < 16; ++j)
                s += (float)((blk[2 + j] & 15) - 8) * xb[j] + (float)((blk[2 + j] >> 4) - 8) * xb[j + 16];
            acc += f16(blk) * s; }
        out[r] = acc; }
}
"""

_SIGS = {
    "ref_copy": "ppLi", "ref_rowsum": "ppLLi", "ref_rowmax": "ppLLi", "ref_rmsnorm": "pppLLfi",
    "ref_softmax": "ppLLi", "ref_transpose": "ppLLi", "ref_matmul": "pppLi", "ref_histogram": "ppLi",
    "ref_scan": "ppLi", "ref_q4_0_gemv": "pppLLi",
}
_CT = {"p": ctypes.c_void_p, "L": ctypes.c_int64, "i": ctypes.c_int, "f": ctypes.c_float}


def build_ref(tmp: Path, extra_flags: tuple = ()):
    """The C reference, compiled with tinykernels' compiler and kernel flags (as bench_cpu.py),
    plus ``extra_flags`` (``-ffast-math`` for the references of fastmath kernels)."""
    tc = toolchain()
    tag = "fast" if extra_flags else "exact"
    src, so = tmp / f"ref_{tag}.c", tmp / f"ref_{tag}.so"
    src.write_text(C_REF)
    cmd = list(tc.cmd) + list(tc.flags) + list(extra_flags) + ["-o", str(so), str(src), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("building the C reference failed:\n" + " ".join(cmd) + "\n" + r.stderr)
    lib = ctypes.CDLL(str(so))
    for name, sig in _SIGS.items():
        f = getattr(lib, name)
        f.argtypes = [_CT[c] for c in sig]
        f.restype = None
    return lib


def ptr(a) -> int:
    return a.ctypes.data


# ----------------------------------------------------------------------------- timing

def measure(fns: dict, min_time: float, min_reps: int, rounds: int = 3) -> dict:
    """Best per-call time of each callable: one warm-up call each, then ``rounds`` interleaved
    rounds (A B C A B C ...), each call timed alone, for >= min_time s and >= min_reps calls."""
    for f in fns.values():
        f()
    samples = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t_end = time.perf_counter() + min_time / rounds
            n = 0
            while n < max(1, min_reps // rounds) or time.perf_counter() < t_end:
                t0 = time.perf_counter()
                f()
                samples[k].append(time.perf_counter() - t0)
                n += 1
    return {k: min(v) for k, v in samples.items()}


def q4_0_dequant_np(data: np.ndarray, k: int) -> np.ndarray:
    """NumPy decoding of ggml Q4_0 rows (written independently of tinykernels.llm)."""
    blk = data.reshape(data.shape[0], k // 32, 18)
    d = blk[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float64)
    qs = blk[:, :, 2:].astype(np.int64)
    q = np.concatenate([(qs & 15) - 8, (qs >> 4) - 8], axis=2)
    return (d[:, :, None] * q).reshape(data.shape[0], k)


# ----------------------------------------------------------------------------- the benchmark

class Bench:
    """Runs the rows: checks every implementation against NumPy, then times them together."""

    COLS = ("tk CPU", "tk PoCL", "C ref", "torch")

    def __init__(self, args, lib, nt):
        self.args, self.lib, self.nt = args, lib, nt
        self.bad = 0
        self.memcpy_gbs = None
        self.copy_run, self.copy_bytes = None, 0     # the copy reference, timed again in every GB/s row
        self.rows = []

    def check(self, kernel, impl, got, want, rtol, atol) -> bool:
        got = np.asarray(got, dtype=np.float64)
        if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
            err = np.max(np.abs(got - want)) if got.shape == want.shape else f"shape {got.shape}"
            print(f"WRONG RESULT: {kernel} / {impl} (max abs error {err})")
            self.bad += 1
            return False
        return True

    def wanted(self, kernel) -> bool:
        """Whether ``--only`` selects this row (all rows without it)."""
        sel = [x.strip().lower() for x in self.args.only.split(",") if x.strip()]
        return not sel or any(kernel.lower().startswith(x) for x in sel)

    def row(self, kernel, nbytes, impls: dict, want, rtol, atol=0.0, unit="GB/s", work=None):
        """impls: column -> (run, result); ``work``: bytes (GB/s) or flops (GFLOP/s) per call."""
        if not self.wanted(kernel):
            return {}
        ok = {}
        for col, (run, res) in impls.items():
            run()
            if self.check(kernel, col, res(), want, rtol, atol):
                ok[col] = run
        copy = {"copy": self.copy_run} if self.copy_run is not None and unit == "GB/s" else {}
        times = measure({**ok, **copy}, self.args.min_time, self.args.min_reps)
        work = nbytes if work is None else work
        rate = {c: work / t / 1e9 for c, t in times.items() if c != "copy"}
        if copy:        # the copy reference timed in this row's interleaved rounds
            rate["copy"] = self.copy_bytes / times["copy"] / 1e9
        self.rows.append((kernel, unit, rate))
        self.print_row(kernel, unit, rate)
        return rate

    def header(self):
        print(f"{'kernel':<22} " + " ".join(f"{c:>8}" for c in self.COLS)
              + f" {'tk/C':>6} {'copy':>7} {'/memcpy':>8}")

    def print_row(self, kernel, unit, rate):
        cells = " ".join(f"{rate[c]:8.2f}" if c in rate else f"{'n/a':>8}" for c in self.COLS)
        t, c = rate.get("tk CPU"), rate.get("C ref")
        ratio = f"{t / c:6.2f}" if t and c else f"{'':>6}"
        ref = rate.get("copy") or (self.memcpy_gbs if unit == "GB/s" else None)
        cp = f"{rate['copy']:7.2f}" if "copy" in rate else f"{'':>7}"
        mc = f"{t / ref:8.2f}" if t and ref else f"{'':>8}"
        print(f"{kernel + ' ' + unit:<22} {cells} {ratio} {cp} {mc}", flush=True)


def aligned_zeros(shape: tuple, dtype=np.float32) -> np.ndarray:
    """A zeroed C-contiguous array whose data starts a 64-byte cache line."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    buf = np.zeros(n + 64, np.uint8)
    start = (-buf.ctypes.data) % 64
    return buf[start:start + n].view(dtype).reshape(shape)


def tk_pair(kernel_fn, backend, args_np, outs_idx, ndrange, wgs, consts=()):
    """(run, result) for a tinykernels launch on ``backend``: device copies of the arrays,
    ``outs_idx`` the position of the output whose value is checked."""
    host = isinstance(backend, tk.CPU)
    dev = [tk.asarray(a, backend=backend) if isinstance(a, np.ndarray) and not host else a for a in args_np]
    k = kernel_fn(backend, wgs)

    def run():
        k(*dev, *consts, ndrange=ndrange)
        tk.synchronize(backend)

    def res():
        o = dev[outs_idx]
        return o if isinstance(o, np.ndarray) else o.numpy()
    return run, res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--threads", type=int, default=0, help="threads for every column (default: all cores)")
    ap.add_argument("--min-time", type=float, default=None, help="seconds of timed calls per implementation")
    ap.add_argument("--min-reps", type=int, default=None)
    ap.add_argument("--only", default="", help="comma-separated kernels to run (e.g. 'matmul,transpose'; "
                    "names as in the first column, matched by prefix, case-insensitive)")
    args = ap.parse_args()
    nt = args.threads or os.cpu_count() or 1
    if args.min_time is None:
        args.min_time = 0.3 if args.quick else 2.0
    if args.min_reps is None:
        args.min_reps = 6 if args.quick else 15
    R, D = (512, 2048) if args.quick else (4096, 4096)          # 4 MiB / 64 MiB of float32
    NM = 128 if args.quick else 1024
    NH = (1 << 20) if args.quick else (1 << 24)                  # histogram keys, prefix sum length
    QM, QK = (512, 2048) if args.quick else (16384, 8192)        # Q4_0 weights: 0.56 / 72 MiB

    cpu = tk.CPU(threads=nt)
    cl = tk.backend("CL") if tk.backends().get("OpenCL", (False,))[0] else None
    try:
        import torch
        torch.set_num_threads(nt)
    except ImportError:
        torch = None
    print(f"threads {nt}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
          "(under load, read the columns as ratios within this run)")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((R, D)).astype(np.float32)
    X64 = X.astype(np.float64)
    w = rng.standard_normal(D).astype(np.float32)
    ndr_rows = R * WG
    with tempfile.TemporaryDirectory() as td:
        lib = build_ref(Path(td))
        lib_fast = build_ref(Path(td), ("-ffast-math",))
        b = Bench(args, lib, nt)

        # copy reference (the /memcpy denominator): same bytes as X, read once and written once
        cp = np.empty_like(X)

        def copy_gbs():
            t = measure({"copy": lambda: lib.ref_copy(ptr(cp), ptr(X), X.size, nt)}, args.min_time, args.min_reps)
            return 2 * X.nbytes / t["copy"] / 1e9
        b.memcpy_gbs = copy_gbs()
        b.copy_run, b.copy_bytes = (lambda: lib.ref_copy(ptr(cp), ptr(X), X.size, nt)), 2 * X.nbytes
        print(f"\ncopy reference (C + OpenMP copy loop, {nt} threads), {X.nbytes / 2**20:.0f} MiB read + "
              f"written: {b.memcpy_gbs:.2f} GB/s\n")
        b.header()

        def with_cl(impls, fn, args_np, oi, ndrange, wgs, consts=()):
            impls["tk CPU"] = tk_pair(fn, cpu, args_np, oi, ndrange, wgs, consts)
            if cl is not None:
                impls["tk PoCL"] = tk_pair(fn, cl, [a.copy() if isinstance(a, np.ndarray) else a
                                                    for a in args_np], oi, ndrange, wgs, consts)
            return impls

        def c_pair(call, out):
            return (lambda: call(), lambda: out)

        # row sum / row max
        for name, kfn, cfn, want, tfn in (
                ("row sum", rowsum, lib.ref_rowsum, X64.sum(1), (lambda t: t.sum(1))),
                ("row max", rowmax, lib.ref_rowmax, X64.max(1), (lambda t: t.amax(1)))):
            o, co = np.zeros(R, np.float32), np.zeros(R, np.float32)
            impls = with_cl({}, kfn, [o, X], 0, ndr_rows, WG, (D,))
            impls["C ref"] = c_pair(lambda cfn=cfn, co=co: cfn(ptr(co), ptr(X), R, D, nt), co)
            if torch is not None:
                tX = torch.from_numpy(X)
                impls["torch"] = (lambda tfn=tfn, tX=tX: tfn(tX), lambda tfn=tfn, tX=tX: tfn(tX).numpy())
            b.row(name, X.nbytes, impls, want, 1e-4, 1e-3)

        # RMSNorm
        want = X64 / np.sqrt((X64 ** 2).mean(1, keepdims=True) + 1e-5) * w
        o, co = np.zeros_like(X), np.zeros_like(X)
        impls = with_cl({}, rmsnorm, [o, X, w], 0, ndr_rows, WG, (D, 1e-5))
        impls["C ref"] = c_pair(lambda: lib.ref_rmsnorm(ptr(co), ptr(X), ptr(w), R, D, 1e-5, nt), co)
        if torch is not None and hasattr(torch.nn.functional, "rms_norm"):
            tX, tw = torch.from_numpy(X), torch.from_numpy(w)
            f = lambda: torch.nn.functional.rms_norm(tX, (D,), tw, 1e-5)   # noqa: E731
            impls["torch"] = (f, lambda: f().numpy())
        b.row("RMSNorm", 2 * X.nbytes, impls, want, 1e-4, 1e-4)

        # softmax
        e = np.exp(X64 - X64.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
        o, co = np.zeros_like(X), np.zeros_like(X)
        impls = with_cl({}, softmax, [o, X], 0, ndr_rows, WG, (D,))
        impls["C ref"] = c_pair(lambda: lib.ref_softmax(ptr(co), ptr(X), R, D, nt), co)
        if torch is not None:
            tX = torch.from_numpy(X)
            impls["torch"] = (lambda: torch.softmax(tX, 1), lambda: torch.softmax(tX, 1).numpy())
        b.row("softmax", 2 * X.nbytes, impls, want, 1e-4, 1e-7)

        # softmax, fastmath: exp through the C library's SIMD variants (libmvec with glibc);
        # the C reference compiled with -ffast-math, as a C programmer would for the same
        o, co = np.zeros_like(X), np.zeros_like(X)
        impls = with_cl({}, softmax_fast, [o, X], 0, ndr_rows, WG, (D,))
        impls["C ref"] = c_pair(lambda: lib_fast.ref_softmax(ptr(co), ptr(X), R, D, nt), co)
        b.row("softmax fastmath", 2 * X.nbytes, impls, want, 1e-4, 1e-7)

        # transpose through a local tile; every column gets 64-byte aligned arrays, as a C
        # programmer allocates them (NumPy's large arrays start 16 bytes into a line), so a
        # tile row of 16 float32 is one whole cache line
        o, co, Xa = aligned_zeros((D, R)), aligned_zeros((D, R)), aligned_zeros((R, D))
        Xa[...] = X
        impls = with_cl({}, transpose, [o, Xa], 0, X.shape, (TILE, TILE), (TILE,))
        impls["C ref"] = c_pair(lambda: lib.ref_transpose(ptr(co), ptr(Xa), R, D, nt), co)
        if torch is not None:
            tX = torch.from_numpy(Xa)
            impls["torch"] = (lambda: tX.t().contiguous(), lambda: tX.t().contiguous().numpy())
        b.row("transpose", 2 * X.nbytes, impls, X64.T, 0, 0)

        # histogram with atomics
        keys = rng.integers(0, NBINS, NH, dtype=np.int32)
        want = np.bincount(keys, minlength=NBINS).astype(np.float64)
        groups = 8 * WG * max(1, nt)
        h, ch = np.zeros(NBINS, np.int32), np.zeros(NBINS, np.int32)
        impls = {}
        for col, be in (("tk CPU", cpu), ("tk PoCL", cl)):
            if be is None:
                continue
            hd, kd = (h.copy(), keys) if be is cpu else (tk.asarray(h, backend=be), tk.asarray(keys, backend=be))
            kh = histogram(be, WG)

            def run(kh=kh, hd=hd, kd=kd, be=be):
                zero_i32(be)(hd, ndrange=NBINS)
                kh(hd, kd, NBINS, ndrange=groups)
                tk.synchronize(be)
            impls[col] = (run, lambda hd=hd: hd if isinstance(hd, np.ndarray) else hd.numpy())
        impls["C ref"] = c_pair(lambda: lib.ref_histogram(ptr(ch), ptr(keys), NH, nt), ch)
        if torch is not None:
            tk_ = torch.from_numpy(keys)
            impls["torch"] = (lambda: torch.bincount(tk_, minlength=NBINS),
                              lambda: torch.bincount(tk_, minlength=NBINS).numpy())
        b.row("histogram", keys.nbytes, impls, want, 0, 0)

        # prefix sum with group_scan: tiles, then the tile totals (one group), then offsets
        # 0 or 1/8: every partial sum (<= 2**21) is exact in float32, so every summation order
        # (tiles, threads, SIMD scans, the C reference's single chain) gives the same bits and the
        # check is exact; with random floats a one-thread float32 running sum over 16M elements
        # drifts past any fixed tolerance (the C reference was reported wrong with --threads 1)
        xs = (rng.random(NH) < 0.5).astype(np.float32) * np.float32(0.125)
        want = np.cumsum(xs.astype(np.float64))
        tile_n = WG * SCAN_PER
        ntiles = NH // tile_n
        per2 = ntiles // WG
        # (twice: a default kernel, whose float group_scan is a sequential chain bit-exact with
        # the interpreter, and a fastmath one, whose scans are SIMD scans; C ref with -ffast-math)
        for label, scan_k, clib in (("prefix sum", scan_tiles, lib), ("prefix sum fastmath", scan_tiles_fast, lib_fast)):
            impls = {}
            for col, be in (("tk CPU", cpu), ("tk PoCL", cl)):
                if be is None:
                    continue
                arrs = [np.zeros(NH, np.float32), np.zeros(ntiles, np.float32), np.zeros(ntiles, np.float32),
                        np.zeros(1, np.float32), xs]
                od, td_, ti, tt, xd = arrs if be is cpu else [tk.asarray(a, backend=be) for a in arrs]
                k1, k3 = scan_k(be, WG), add_offsets(be)

                def run(k1=k1, k3=k3, od=od, td_=td_, ti=ti, tt=tt, xd=xd, be=be):
                    k1(od, td_, xd, SCAN_PER, ndrange=ntiles * WG)
                    k1(ti, tt, td_, per2, ndrange=WG)
                    k3(od, ti, tile_n, ndrange=NH)
                    tk.synchronize(be)
                impls[col] = (run, lambda od=od: od if isinstance(od, np.ndarray) else od.numpy())
            cs = np.zeros(NH, np.float32)
            impls["C ref"] = c_pair(lambda cs=cs, clib=clib: clib.ref_scan(ptr(cs), ptr(xs), NH, nt), cs)
            if torch is not None:
                tx = torch.from_numpy(xs)
                impls["torch"] = (lambda: torch.cumsum(tx, 0), lambda: torch.cumsum(tx, 0).numpy())
            b.row(label, 2 * xs.nbytes, impls, want, 0, 0)

        # Q4_0 GEMV: tinykernels.llm.matmul and the plain one-group-per-row kernel
        if b.wanted("Q4_0"):
            W = rng.standard_normal((QM, QK)).astype(np.float32)
            qt = llm.quantize(W, "q4_0")
            xq = rng.standard_normal(QK).astype(np.float32)
            want = q4_0_dequant_np(qt.data, QK) @ xq.astype(np.float64)
            tol = 1e-4 * np.abs(q4_0_dequant_np(qt.data, QK)) @ np.abs(xq.astype(np.float64))
            impls = {}
            for col, be in (("tk CPU", cpu), ("tk PoCL", cl)):
                if be is None:
                    continue
                q = qt if be is cpu else llm.quantize(tk.asarray(W, backend=be), "q4_0")
                xd = xq if be is cpu else tk.asarray(xq, backend=be)
                od = np.zeros(QM, np.float32) if be is cpu else tk.asarray(np.zeros(QM, np.float32), backend=be)

                def run(q=q, xd=xd, od=od, be=be):
                    llm.matmul(q, xd, out=od)
                    tk.synchronize(be)
                impls[col] = (run, lambda od=od: od if isinstance(od, np.ndarray) else od.numpy())
            cq = np.zeros(QM, np.float32)
            impls["C ref"] = c_pair(lambda: lib.ref_q4_0_gemv(ptr(cq), ptr(qt.data), ptr(xq), QM, QK, nt), cq)
            qbytes = qt.data.nbytes
            b.row("Q4_0 llm", qbytes, impls, want, 0, tol)
            impls = with_cl({"C ref": impls["C ref"]}, q4_0_gemv, [np.zeros(QM, np.float32), qt.data, xq], 0,
                            QM * WG, WG)
            b.row("Q4_0 kernel", qbytes, impls, want, 0, tol)

        # tiled matmul (GFLOP/s; ratio to NumPy's BLAS)
        A = rng.standard_normal((NM, NM)).astype(np.float32)
        B = rng.standard_normal((NM, NM)).astype(np.float32)
        want = A.astype(np.float64) @ B
        cm = np.zeros((NM, NM), np.float32)
        impls = with_cl({}, matmul, [np.zeros((NM, NM), np.float32), A, B], 0, (NM, NM), (TILE, TILE), (TILE,))
        impls["C ref"] = c_pair(lambda: lib.ref_matmul(ptr(cm), ptr(A), ptr(B), NM, nt), cm)
        impls["NumPy BLAS"] = (lambda: A @ B, lambda: A @ B)
        flop = 2.0 * NM ** 3
        print()
        rate = b.row(f"matmul {NM}", 0, impls, want, 1e-4, 1e-3, unit="GFLOP/s", work=flop)
        if "NumPy BLAS" in rate and "tk CPU" in rate:
            blas = rate["NumPy BLAS"]
            print(f"  NumPy BLAS {blas:.2f} GFLOP/s; tk CPU / BLAS {rate['tk CPU'] / blas:.3f}")

        again = copy_gbs()
        print(f"\ncopy reference measured again at the end: {again:.2f} GB/s (start: {b.memcpy_gbs:.2f}); "
              "a large difference means the machine was disturbed")

    peers = [p for p in ("numba", "taichi", "warp") if importlib.util.find_spec(p) is not None]
    print("\nGB/s rows: T_eff, the bytes each kernel must move (inputs read once, outputs written once) / time;"
          f"\n  copy = the copy reference ({nt} threads) timed again in the row's own interleaved rounds (the"
          "\n  host's bandwidth can change during a run); /memcpy = tk CPU T_eff / that copy."
          f"\n  Row kernels: {R} x {D} float32;"
          f"\n  histogram and prefix sum: {NH} elements; Q4_0: [{QM}, {QK}] weights ({QM * QK // 32 * 18 / 2**20:.1f} MiB, "
          "GB/s of weights).")
    print("  torch: n/a where PyTorch has no such op (Q4_0) or is not installed.")
    print("  Numba / Taichi / Warp: " + (", ".join(peers) + " installed but not benchmarked here"
                                         if peers else "not installed, so no columns (this script installs nothing)"))
    return 1 if b.bad else 0


if __name__ == "__main__":
    sys.exit(main())
