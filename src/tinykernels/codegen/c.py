"""C for the multi-threaded CPU backend.

Two shapes of generated code:

* **flat** (no barrier, no local memory, no collective): one loop over the ndrange, split
  into contiguous chunks across OpenMP threads, with the last dimension innermost so the
  compiler can vectorize it;
* **grouped**: one OpenMP iteration per workgroup; the kernel body is split at its barriers
  (:mod:`tinykernels.passes.groups`) and every piece between barriers is a loop over the
  group's work items.

Entry point: ``void tk_kernel(const tk_slot *a, int nthreads)``; the argument slots are
described by :func:`slot_layout`.
"""
from __future__ import annotations

from functools import lru_cache

from ..dtypes import Ty
from ..ir import nodes as N
from ..passes.grouporder import rows_first_when_streamed
from ..passes.gridstride import MAX_READS, constant_locals, strided_reads
from ..passes.groups import GroupPlan, ItemLoop, has_lane_loop, lane_loop
from ..passes.prefetch import has_loop, next_rows, reads_rows
from ..passes.rowdiv import row_divisions, row_loads
from ..passes.streaming import (copy_sources, lane_coef, loop_streams, streamed_stores, unobservable_after,
                                write_only_arrays)
from ..passes.tiletranspose import block_lanes, transposed_reads
from ..passes.uniformity import defs, is_uniform
from .clike import TYPES, CLikeRenderer, mangle, portable_helpers
from .prelude import prelude

GEOMETRY_SLOTS = 9          # (start, count, step) for 3 dimensions
# @tk.kernel(fastmath=True): reassociation (vectorized float reductions) and contraction into
# FMA for that kernel's translation unit only; no -ffinite-math-only (inf/NaN keep working)
# and nothing that touches integer arithmetic.
FASTMATH_CFLAGS = ("-ffp-contract=fast", "-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math")
SERIAL_CUTOFF = 4096        # work items below which a launch stays on the calling thread
SERIAL_CUTOFF_LOOPS = 64    # the same for kernels whose work items run a long loop
SHORT_LOOP = 16             # a loop of at most this many (constant) trips is not a long loop
STREAM_BLOCK_BYTES = 4096   # a flat kernel's streamed block: output bytes per block of items
STREAM_RUN_BYTES = 256      # the same for a streamed launch that computes into the staging buffer



def _long_loop(s: N.Stmt) -> bool:
    """A ``while``, or a ``for`` whose trip count is not a small compile-time constant."""
    if isinstance(s, N.While):
        return True
    if not isinstance(s, N.For):
        return False
    if not all(isinstance(e, N.Const) for e in (s.start, s.stop, s.step)) or s.step.value == 0:
        return True
    return len(range(int(s.start.value), int(s.stop.value), int(s.step.value))) > SHORT_LOOP


def serial_cutoff(k: N.Kernel) -> int:
    """Work items below which a flat launch runs on the calling thread. A kernel whose items
    each run a long loop (a row of a GEMV, a row reduction) does enough work per item that a
    few dozen items already pay for starting the threads."""
    return SERIAL_CUTOFF_LOOPS if any(_long_loop(s) for s in N.walk_stmts(k.body)) else SERIAL_CUTOFF


def staged_runs(copies: dict | None) -> bool:
    """Whether a streamed flat launch computes each block into the staging buffer (its items,
    or ``tk_f16_block``'s rounding: ``copies`` is ``copy_sources``'s answer) and so takes
    blocks of ``STREAM_RUN_BYTES``: computing 4 KB and then streaming it out made the loads
    and the non-temporal stores alternate in bursts (a 256 MiB add: 1.1-1.5x torch's time,
    against 0.5-1.0x with 256-byte blocks; loaded machine, docs/cpu.md). A copy streams from
    its source line by line anyway, and a table lookup loads its table into registers per
    block, so those keep ``STREAM_BLOCK_BYTES``. So do rows shorter than a block (a 3-D
    stencil's rows of 2 KB): a row is then at most one block, and shorter ones only add
    per-block work (the call of ``tk_stream_bytes``, the loop's setup); the 256 MiB 3-D
    diffusion forward took 0.8-1.4x its time with them, median 1.14 (seven alternate
    processes, loaded, one thread)."""
    return copies is None or next(iter(copies.values()))[1] == "f16"


_HEADER = """\
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10)
#define TK_OMP_INSCAN 1   /* OpenMP 5.0 scan reductions (GCC >= 10, clang >= 12) */
#endif
#endif
typedef union { int64_t i; double f; void *p; } tk_slot;
"""

# A fastmath kernel's <math.h> declares glibc's SIMD variants of the math functions (libmvec:
# expf as _ZGVdN8v_expf, ...), so that a loop calling exp/log/sin/... vectorizes. glibc
# declares them exactly for the functions its libmvec has, but only when __FAST_MATH__ is
# defined (as -ffast-math does, which would also assume finite values). Defined here around
# <math.h> alone, it changes nothing else there (math_errhandling). Other C libraries and
# compilers without the declarations keep the scalar calls.
_FASTMATH_MATH_H = """\
#if defined(__GLIBC__) && !defined(__FAST_MATH__)
#define __FAST_MATH__ 1   /* fastmath: glibc declares its SIMD math variants (libmvec) */
#include <math.h>
#undef __FAST_MATH__
#else
#include <math.h>
#endif
"""


def _env_bytes_fn(name: str, var: str, fallback: str) -> str:
    """C: ``int64_t name(void)``, a byte count read once per library: the environment variable
    ``var`` when it is a positive number, else what the C lines ``fallback`` leave in ``t``.
    Declared ``const`` (every call returns the same value), so GCC hoists the call out of the
    loop over groups once the group is inlined there (``tk_group``)."""
    return (f"__attribute__((noinline, const)) static int64_t {name}(void) {{\n"
            "    static int64_t cached = 0;\n"
            "    int64_t t = __atomic_load_n(&cached, __ATOMIC_RELAXED);\n"
            "    if (t) return t;\n"
            f"    const char *env = getenv(\"{var}\");\n"
            "    if (env && *env) t = strtoll(env, 0, 10);\n"
            f"{fallback}"
            "    __atomic_store_n(&cached, t, __ATOMIC_RELAXED);\n"
            "    return t;\n"
            "}\n")


# Streaming (non-temporal) stores of a flat kernel's large outputs (passes/streaming.py): the
# items of a block store into a small buffer in L1 (a loop GCC vectorizes), which is then
# written out with non-temporal stores on x86 (whole aligned 64-byte lines; the partial lines at
# either end with ordinary stores), so a line of a large output is not read before it is
# overwritten. Other targets copy the buffer with memcpy. tk_stream_threshold: outputs of at
# least this many bytes per launch stream (TK_CPU_STREAM_BYTES, else the last-level cache size).
_DIV_RUN = """\
/* The end of the run of positions s, s + 1, ... (before e) over which a // b keeps its value
   (passes/rowdiv.py): the dividend a (at s) grows by one per position, r = a % b (Python's).
   b > 0: the remainder climbs to b - 1; b < 0: to 0; b == 0: one position (a % 0 stays 0);
   and a must not wrap past INT64_MAX inside the run. */
TK_INLINE int64_t tk_div_run(int64_t s, int64_t e, int64_t a, int64_t b, int64_t r) {
    int64_t n = e - s;
    if (b > 0) { if (b - r < n) n = b - r; }
    else if (b < 0) { if (-r < n) n = 1 - r; }
    else n = 1;
    if (a > 0 && n - 1 > INT64_MAX - a) n = INT64_MAX - a + 1;
    return s + n;
}
"""

# Next-row prefetch (passes/prefetch.py): a cursor over the bytes of a row the next group (or
# work item) reads, advanced by a few lines per iteration of the loops that read the current
# row. tk_pf_min_bytes: only arrays of at least this many bytes (TK_CPU_PREFETCH_BYTES, else
# 2 MiB: a core's L2 here is 1 MiB, and rows of smaller arrays are likely in cache already).
_PREFETCH = """\
#include <stdlib.h>
typedef struct { const char *p, *e; uint64_t per; } tk_pf;
""" + _env_bytes_fn("tk_pf_min_bytes", "TK_CPU_PREFETCH_BYTES", """\
    if (t <= 0) t = (int64_t)2 << 20;
""") + """\
/* The row from element x to element y (either order: negative strides), itemsize bytes each;
   nothing when !on. */
TK_INLINE void tk_pf_row(tk_pf *f, int on, const void *x, const void *y, int64_t itemsize) {
    const char *a = (const char *)x, *b = (const char *)y;
    if (a > b) { const char *t = a; a = b; b = t; }
    f->p = on ? (const char *)((uintptr_t)a & ~(uintptr_t)63) : 0;
    f->e = on ? b + itemsize : 0;
    f->per = 0;
}
/* A loop of `trips` iterations starts, the first of `loops` that will step the cursor: spread
   its share of what is left of the row (1 / loops) over its iterations, at most TK_PF_PER
   lines per iteration (a short loop, such as a row's remainder, gets a few lines, not a burst). */
#define TK_PF_PER 4
TK_INLINE void tk_pf_plan(tk_pf *f, uint64_t trips, uint64_t loops) {
    const uint64_t lines = f->p < f->e ? (uint64_t)(f->e - f->p + 63) / 64 : 0;
    const uint64_t share = loops ? (lines + loops - 1) / loops : 0;
    const uint64_t per = trips ? (share + trips - 1) / trips : 0;
    f->per = per < TK_PF_PER ? per : TK_PF_PER;
}
/* One iteration: prefetch its share of lines (into L2: the current row stays in L1). */
TK_INLINE void tk_pf_step(tk_pf *f) {
    for (uint64_t k = 0; k < f->per && f->p < f->e; ++k, f->p += 64) __builtin_prefetch(f->p, 0, 2);
}
"""

# Grid-stride prefetch (passes/gridstride.py): a strided loop's reads, fetched a few iterations
# ahead when consecutive iterations are far apart (the hardware prefetchers do not follow).
# tk_gs_min_bytes: the smallest step that prefetches (TK_CPU_GRIDSTRIDE_BYTES, else 1 KiB).
_GRIDSTRIDE = """\
#include <stdlib.h>
""" + _env_bytes_fn("tk_gs_min_bytes", "TK_CPU_GRIDSTRIDE_BYTES", """\
    if (t <= 0) t = 1024;
""") + """\
/* Whether a read at x (iteration 0) and y (iteration 1), the group reading span bytes of it per
   iteration, strides far enough to prefetch: 512-byte steps over 256-byte spans the hardware
   follows, 1 KiB ones it does not (measured, docs/cpu.md "Grid-stride loops"). */
TK_INLINE int tk_gs_far(const void *x, const void *y, int64_t span) {
    const uintptr_t a = (uintptr_t)x, b = (uintptr_t)y, d = a > b ? a - b : b - a;
    return d >= (uint64_t)tk_gs_min_bytes() && d >= 2 * (uint64_t)span;
}
/* The bytes from x to y (either order) that a group reads of one read per iteration. */
TK_INLINE int64_t tk_gs_span(const void *x, const void *y, int64_t itemsize) {
    const uintptr_t a = (uintptr_t)x, b = (uintptr_t)y;
    return (int64_t)(a > b ? a - b : b - a) + itemsize;
}
/* How many iterations ahead to prefetch when an iteration reads `bytes`: about 4 KiB in flight
   (at least 2, at most 32 iterations). */
TK_INLINE uint64_t tk_gs_dist(int64_t bytes) {
    const int64_t lines = (bytes + 63) / 64, d = 64 / (lines > 0 ? lines : 1);
    return (uint64_t)(d < 2 ? 2 : d > 32 ? 32 : d);
}
/* Prefetch (into L2) the lines from x to y, either order; a range over 1 KiB (a read that is not
   contiguous across the group) only at its ends. */
TK_INLINE void tk_gs_fetch(const void *x, const void *y) {
    uintptr_t a = (uintptr_t)x, b = (uintptr_t)y;
    if (a > b) { const uintptr_t t = a; a = b; b = t; }
    if (b - a > 1024) { __builtin_prefetch(x, 0, 2); __builtin_prefetch(y, 0, 2); return; }
    for (a &= ~(uintptr_t)63; a <= b; a += 64) __builtin_prefetch((const void *)a, 0, 2);
}
"""

_STREAM = """\
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#define TK_STREAM_BLOCK 4096
""" + _env_bytes_fn("tk_stream_threshold", "TK_CPU_STREAM_BYTES", """\
    if (t <= 0) {   /* Linux: the last-level cache one core shares (sysconf may report the package's) */
        FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
        long kb = 0; char unit = 0;
        if (f) { if (fscanf(f, "%ld%c", &kb, &unit) >= 1) t = (int64_t)kb << (unit == 'M' ? 20 : 10); fclose(f); }
    }
#if defined(_SC_LEVEL3_CACHE_SIZE)
    if (t <= 0) t = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (t <= 0) t = (int64_t)32 << 20;
""") + """\
/* A streamed run of an output: whole 64-byte lines with non-temporal stores; the partial line
   at its end waits in tk_pend until the next run continues it (then it streams as a whole
   line) or tk_pend_flush writes it with ordinary stores; a partial line at the start of a run
   that does not continue the pending one is written with ordinary stores. */
typedef struct { char *at; int64_t have; char buf[64] __attribute__((aligned(64))); } tk_pend;
/* compiler builtins rather than <immintrin.h>, whose parsing alone costs about 0.1 s a kernel */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__AVX512BW__)
typedef char tk_v64qi __attribute__((vector_size(64)));
#endif
static inline void tk_copy_small(char *d, const char *s, int64_t n) {   /* 0 <= n < 64 */
    if (n <= 0) return;     /* an empty masked store still costs (AMD: it may read the line) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__AVX512BW__)
    const unsigned long long m = (1ULL << n) - 1;     /* masked moves: no library call per partial line */
    __builtin_ia32_storedquqi512_mask(d, __builtin_ia32_loaddquqi512_mask(s, (tk_v64qi){0}, m), m);
#else
    memcpy(d, s, (size_t)n);
#endif
}
__attribute__((noinline)) static void tk_pend_flush_line(tk_pend *p) {
    tk_copy_small(p->at, p->buf, p->have);
    p->have = 0;
}
/* inline test: a group or chunk that left nothing pending (or never used its tk_pend) makes no call */
static inline void tk_pend_flush(tk_pend *p) { if (p->have) tk_pend_flush_line(p); }
typedef long long tk_v2di __attribute__((vector_size(16)));
static inline void tk_stream_line(char *d, const char *s) {    /* d: 64-byte aligned */
#if defined(__clang__) && defined(__SSE2__)
    for (int j = 0; j < 64; j += 16) {
        tk_v2di v; memcpy(&v, s + j, 16); __builtin_nontemporal_store(v, (tk_v2di *)(d + j));
    }
#elif defined(__GNUC__) && defined(__AVX512F__)
    typedef long long tk_v8di __attribute__((vector_size(64)));
    tk_v8di v; memcpy(&v, s, 64); __builtin_ia32_movntdq512((tk_v8di *)d, v);
#elif defined(__GNUC__) && defined(__AVX__)
    typedef long long tk_v4di __attribute__((vector_size(32)));
    tk_v4di v0, v1; memcpy(&v0, s, 32); memcpy(&v1, s + 32, 32);
    __builtin_ia32_movntdq256((tk_v4di *)d, v0); __builtin_ia32_movntdq256((tk_v4di *)(d + 32), v1);
#elif defined(__GNUC__) && defined(__SSE2__)
    for (int j = 0; j < 64; j += 16) {
        tk_v2di v; memcpy(&v, s + j, 16); __builtin_ia32_movntdq((tk_v2di *)(d + j), v);
    }
#else
    memcpy(d, s, 64);
#endif
}
static inline void tk_stream_lines(char *d, const char *s, int nlines) {   /* d: 64-byte aligned */
    for (int j = 0; j < nlines; ++j) tk_stream_line(d + 64 * j, s + 64 * j);
}
__attribute__((noinline)) static void tk_stream_any(tk_pend *p, void *dst, const void *src, int64_t n) {
    char *d = (char *)dst; const char *s = (const char *)src;
    if (p->have && d == p->at + p->have) {          /* continues the pending line */
        int64_t k = 64 - ((int64_t)((uintptr_t)d & 63));
        if (k > n) k = n;
        tk_copy_small(p->buf + p->have, s, k);
        p->have += k; d += k; s += k; n -= k;
        if (((uintptr_t)d & 63) != 0) return;
        tk_stream_line(p->at, p->buf);              /* p->at starts a line: see below */
        p->have = 0;
    } else {
        tk_pend_flush(p);
        int64_t head = (int64_t)((64 - ((uintptr_t)d & 63)) & 63);
        if (head > n) head = n;
        tk_copy_small(d, s, head); d += head; s += head; n -= head;
    }
    for (; n >= 64; n -= 64, d += 64, s += 64) tk_stream_line(d, s);
    if (n) { p->at = d; p->have = n; tk_copy_small(p->buf, s, n); }   /* d starts a line here */
}
/* tk_stream_bytes: with AVX-512, a run of whole 64-byte blocks (a lanes run of a group row, a
   block of a flat kernel's items) that continues the pending line at a 4-byte multiple k of a
   line (an output that does not start a cache line, such as NumPy's 16-byte aligned arrays)
   streams each line put together in registers from the end of the previous 64 bytes and the
   start of the next (one two-source permute), and keeps its last k bytes pending; anything
   else goes through tk_stream_any, whose partial-line copies through tk_pend.buf are small
   stores that the next 64-byte load cannot forward from. One out-of-line function: inlined
   at the call sites it cost 10-30 ms more cc1 time per kernel, and measured no faster. */
__attribute__((noinline)) static void tk_stream_bytes(tk_pend *p, void *dst, const void *src, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
    const uintptr_t off = (uintptr_t)dst & 63;
    if ((n & 63) == 0 && n && (off & 3) == 0 && p->have && (char *)dst == p->at + p->have) {
        typedef int tk_v16si __attribute__((vector_size(64)));
        const int k = (int)(off >> 2);      /* 32-bit words pending in p->buf[0..k) */
        const tk_v16si i = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
        /* (a, b) -> a[16 - k ..] then b[.. 16 - k); the first line takes p->buf[0..k) */
        const tk_v16si next = i + (16 - k), first = i + ((i >= k) & (16 - k)), rot = next & 15;
        const char *s = (const char *)src; char *d = p->at;
        tk_v16si prev, cur, line;
        memcpy(&prev, p->buf, 64); memcpy(&cur, s, 64);
        line = __builtin_shuffle(prev, cur, first);
        tk_stream_line(d, (const char *)&line);
        for (int64_t j = 64; j < n; j += 64) {
            prev = cur; memcpy(&cur, s + j, 64);
            line = __builtin_shuffle(prev, cur, next);
            tk_stream_line(d + j, (const char *)&line);
        }
        cur = __builtin_shuffle(cur, rot);      /* the last k words to p->buf[0..k) */
        memcpy(p->buf, &cur, 64);
        p->at = d + n;
        return;
    }
#endif
    tk_stream_any(p, dst, src, n);
}
static inline void tk_stream_fence(void) {
#if defined(__SSE2__)
    __builtin_ia32_sfence();
#endif
}
/* A block of float32 values, rounded to float16 bits (tk_f32_to_f16's bits): with F16C, eight
   at a time by the hardware conversion (vcvtps2ph, round to nearest even; sixteen with
   AVX-512F), except that a NaN keeps its payload as numpy does (the hardware quiets a
   signaling NaN), so a group with a NaN is redone in software; else the software conversion
   (a loop GCC vectorizes). With AVX-512 the NaN test is one unordered compare of the group
   with itself into a mask register (vcmpps, predicate 3 = _CMP_UNORD_Q; it only sets MXCSR's
   sticky invalid flag for a signaling NaN, as any float compare does), not an integer and,
   compare and test: 0.100 -> 0.074 ns per element in L2 (one thread, C). */
__attribute__((noinline)) static void tk_f16_block(uint16_t *restrict d, const float *restrict s, int64_t n) {
    int64_t j = 0;
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
    typedef float tk_v16sf __attribute__((vector_size(64)));
    typedef short tk_v16hi __attribute__((vector_size(32)));
    for (; j + 16 <= n; j += 16) {
        tk_v16sf f; memcpy(&f, s + j, 64);
        tk_v16hi h = __builtin_ia32_vcvtps2ph512_mask(f, 0, (tk_v16hi){0}, (unsigned short)-1);
        memcpy(d + j, &h, 32);
        if (__builtin_ia32_cmpps512_mask(f, f, 3, (unsigned short)-1, 4))
            for (int64_t k = j; k < j + 16; ++k) d[k] = tk_f32_to_f16(s[k]);
    }
#endif
#if defined(__F16C__) && defined(__GNUC__)
    typedef float tk_v8sf __attribute__((vector_size(32)));
    typedef int tk_v8si __attribute__((vector_size(32)));
    typedef short tk_v8hi __attribute__((vector_size(16)));
    for (; j + 8 <= n; j += 8) {
        tk_v8sf f; tk_v8si x; memcpy(&f, s + j, 32); memcpy(&x, s + j, 32);
        tk_v8hi h = __builtin_ia32_vcvtps2ph256(f, 0);
        tk_v8si nan = (x & 0x7fffffff) > 0x7f800000;
        memcpy(d + j, &h, 16);
        if (__builtin_ia32_movmskps256((tk_v8sf)nan))
            for (int64_t k = j; k < j + 8; ++k) d[k] = tk_f32_to_f16(s[k]);
    }
#endif
    for (; j < n; ++j) d[j] = tk_f32_to_f16(s[j]);
}
"""


def fastmath_header() -> str:
    """The translation unit's includes for a ``fastmath`` kernel: as :data:`_HEADER`, with
    ``<math.h>`` declaring the C library's SIMD math variants where it has them."""
    return _HEADER.replace("#include <math.h>\n", _FASTMATH_MATH_H, 1)


@lru_cache(maxsize=None)
def _c_helpers() -> str:
    """GNU C atomics (compare-and-swap loops for floats and for min/max) on global memory, and
    the same operations as plain read-modify-writes (``tk_plain_*``) for local and private
    arrays: a group's work items run on one thread, one after another, so nothing else can
    touch its local memory meanwhile.

    Memory order: the arithmetic ones (add, sub, min, max, and, or, xor: counters and
    histograms) are relaxed, as on GPUs (they order nothing but themselves); exchange and
    compare-and-swap, which programs use as locks and flags, acquire and release."""
    out = []
    rel, ar = "__ATOMIC_RELAXED", "__ATOMIC_ACQ_REL"
    for sfx in ("i32", "u32", "i64", "u64", "f32", "f64"):
        t = TYPES[sfx]
        out.append(f"TK_INLINE {t} tk_atomic_cas_{sfx}({t} *p, {t} e, {t} n) {{ "
                   f"__atomic_compare_exchange(p, &e, &n, 0, {ar}, __ATOMIC_ACQUIRE); return e; }}")
        out.append(f"TK_INLINE {t} tk_atomic_exchange_{sfx}({t} *p, {t} v) {{ {t} r; "
                   f"__atomic_exchange(p, &v, &r, {ar}); return r; }}")
        # compare-and-swap compares the bits (as __atomic_compare_exchange does: -0.0 != 0.0, NaN == NaN)
        out.append(f"TK_INLINE {t} tk_plain_cas_{sfx}({t} *p, {t} e, {t} n) {{ {t} o = *p; "
                   f"if (!__builtin_memcmp(&o, &e, sizeof o)) *p = n; return o; }}")
        out.append(f"TK_INLINE {t} tk_plain_exchange_{sfx}({t} *p, {t} v) {{ {t} o = *p; *p = v; return o; }}")
        ops = [("min", "v < o ? v : o"), ("max", "v > o ? v : o"), ("add", "o + v"), ("sub", "o - v")]
        if sfx[0] != "f":
            ops += [("and", "o & v"), ("or", "o | v"), ("xor", "o ^ v")]
        for op, expr in ops:
            out.append(f"TK_INLINE {t} tk_plain_{op}_{sfx}({t} *p, {t} v) {{ {t} o = *p; *p = {expr}; return o; }}")
            if sfx[0] != "f" and op not in ("min", "max"):
                out.append(f"TK_INLINE {t} tk_atomic_{op}_{sfx}({t} *p, {t} v) {{ "
                           f"return __atomic_fetch_{op}(p, v, {rel}); }}")
                continue
            out.append(f"TK_INLINE {t} tk_atomic_{op}_{sfx}({t} *p, {t} v) {{ {t} o, n; "
                       f"__atomic_load(p, &o, {rel}); do {{ n = {expr}; }} while "
                       f"(!__atomic_compare_exchange(p, &o, &n, 1, {rel}, {rel})); return o; }}")
    return "\n".join(out) + "\n"


# tk_lut16_block (passes/streaming.py copy_sources, kind "lut16"), rendered when a kernel uses it
_LUT16 = r"""
/* A block of 16-bit table entries at byte indices, d[j] = t[s[j]] (passes/streaming.py,
   "lut16": fp8 dequantization through the table of its 256 results). With AVX-512BW and a
   table of at least 256 entries, the table lives in eight zmm registers and 32 bytes are
   looked up at a time: four two-register word permutes (vpermi2w, index bits 0-5) and two
   selections by bits 6 and 7 (GCC does not generate this from the table load, it gathers);
   else (or TK_CPU_LUT16=c) the plain loop. */
#if defined(__AVX512BW__) && defined(__GNUC__) && !defined(__clang__)
static int tk_lut16_simd = 1;
__attribute__((constructor)) static void tk_lut16_init(void) {
    const char *cap = getenv("TK_CPU_LUT16");
    tk_lut16_simd = !(cap && !strcmp(cap, "c"));
}
#endif
__attribute__((noinline)) static void tk_lut16_block(uint16_t *restrict d, const uint8_t *restrict s,
                                                     const uint16_t *restrict t, int64_t nt, int64_t n) {
    int64_t j = 0;
#if defined(__AVX512BW__) && defined(__GNUC__) && !defined(__clang__)
    if (nt >= 256 && tk_lut16_simd) {
        typedef unsigned short tk_v32hu __attribute__((vector_size(64)));
        typedef unsigned char tk_v32qu __attribute__((vector_size(32)));
        tk_v32hu w[8];
        memcpy(w, t, 512);
        for (; j + 32 <= n; j += 32) {
            tk_v32qu b; memcpy(&b, s + j, 32);
            tk_v32hu i = __builtin_convertvector(b, tk_v32hu);
            tk_v32hu r0 = __builtin_shuffle(w[0], w[1], i), r1 = __builtin_shuffle(w[2], w[3], i);
            tk_v32hu r2 = __builtin_shuffle(w[4], w[5], i), r3 = __builtin_shuffle(w[6], w[7], i);
            tk_v32hu m6 = (tk_v32hu)((i & 0x40) != 0), m7 = (tk_v32hu)((i & 0x80) != 0);
            tk_v32hu lo = r0 ^ ((r0 ^ r1) & m6), hi = r2 ^ ((r2 ^ r3) & m6);
            tk_v32hu r = lo ^ ((lo ^ hi) & m7);
            memcpy(d + j, &r, 64);
        }
    }
#endif
    (void)nt;
    for (; j < n; ++j) d[j] = t[s[j]];
}
"""

_DEBUG = """\
static int64_t tk_err[12];
static int tk_err_lock;
static const char *tk_err_array;
void tk_get_error(int64_t *out) { for (int k = 0; k < 12; ++k) out[k] = tk_err[k]; }
void tk_clear_error(void) { tk_err[0] = 0; }
/* keeps the failure of the first work item in index order (the smallest linear index `item`),
   whichever thread meets its own first: the report does not depend on scheduling */
static int tk_oob(int64_t item, int64_t line, int64_t arr, int nd, int64_t i0, int64_t n0, int64_t i1,
                  int64_t n1, int64_t i2, int64_t n2) {
    if (i0 >= 0 && i0 < n0 && i1 >= 0 && i1 < n1 && i2 >= 0 && i2 < n2) return 1;
    while (__atomic_exchange_n(&tk_err_lock, 1, __ATOMIC_ACQUIRE)) { }
    if (!tk_err[0] || item < tk_err[10]) {
        tk_err[0] = 1; tk_err[1] = line; tk_err[2] = arr; tk_err[3] = nd;
        tk_err[4] = i0; tk_err[5] = n0; tk_err[6] = i1; tk_err[7] = n1; tk_err[8] = i2; tk_err[9] = n2;
        tk_err[10] = item;
    }
    __atomic_store_n(&tk_err_lock, 0, __ATOMIC_RELEASE);
    return 0;
}
"""


# exp and tanh of float32 in default kernels: ``tk_exp_f32``/``tk_tanh_f32``, instead of the
# C library's scalar expf/tanhf
# (one call per element keeps a loop from vectorizing: softmax ran at 0.17 of memcpy). Plain
# C that GCC and Clang vectorize: double arithmetic, bit tricks, no table, no branch.
#   x = k ln2 + r, k = round(x / ln2) (1.5 * 2^52 added and subtracted), |r| <= ln2 / 2,
#   r = (x - k LN2_HI) - k LN2_LO: LN2_HI has 42 significant bits, so k LN2_HI is exact;
#   e^r = 1 + r + r^2 q(r), q of degree 8 interpolating (e^r - 1 - r) / r^2 at the Chebyshev
#   nodes of [-ln2/2, ln2/2] (computed with mpmath, 60 digits; relative error 2^-49.6 after
#   rounding the coefficients to double), e^x = e^r * 2^k with 2^k built in the exponent
#   field, the result rounded once to float32.
# x is clamped to [-120, 120] in the float's bits first (e^120 is inf in float32 and e^-120 is 0,
# and 2^k stays a normal double) with four integer operations and no comparison GCC could turn
# into a branch (tk_clamp_f32: a NaN keeps its bits, so it propagates). The loop's time follows
# its vector instruction count (docs/cpu.md): the earlier six-instruction clamp cost a tenth more.
# Overflow to inf, subnormal results and underflow to 0 come out of the one rounding to float32.
# tanh from the same parts (tk_tanh_f32, below).
# Accuracy, checked over every float32 input (scripts/check_exp_f32.py): correctly rounded
# (the float32 nearest to e^x, to tanh x) for all of them, both with FMA (where the target has it) and
# without, so the two compile to different code but give the same bits. Not for fastmath
# translation units: -fassociative-math would fold the 1.5 * 2^52 rounding away.
_EXP_F32 = r"""
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define TK_EXP_FMA(a, b, c) __builtin_fma(a, b, c)
#else
#define TK_EXP_FMA(a, b, c) ((a) * (b) + (c))
#endif
/* e^x = s (1 + p) for |x| <= 120 (a double; NaN propagates through p): s = 2^k, p = r + r^2 q(r).
   t's low bits hold k + 1023 (the bias added with the rounding constant), so 2^k is one shift;
   k * LN2_HI is exact (42 + 8 bits), so the first reduction step rounds once with or without FMA */
TK_INLINE double tk_exp_parts(double x, double *s) {
    double t = TK_EXP_FMA(x, 0x1.71547652b82fep+0, 0x1.8p+52 + 1023.0);   /* round(x / ln2) + 1023 + 1.5 * 2^52 */
    double k = t - (0x1.8p+52 + 1023.0);
    double r = TK_EXP_FMA(k, -0x1.62e42fefa3800p-1, x);
    double q = 0x1.28803926c8ea8p-22;
    r = TK_EXP_FMA(k, -0x1.ef35793c76730p-45, r);
    *s = tk_bits_f64(tk_f64_bits(t) << 52);                     /* 2^k: k + 1023 in the exponent field */
    q = TK_EXP_FMA(q, r, 0x1.72c720b2e07bfp-19);
    q = TK_EXP_FMA(q, r, 0x1.a019c9ab213aap-16);
    q = TK_EXP_FMA(q, r, 0x1.a019adabfb6abp-13);
    q = TK_EXP_FMA(q, r, 0x1.6c16c1738ecf7p-10);
    q = TK_EXP_FMA(q, r, 0x1.1111111c45d5bp-7);
    q = TK_EXP_FMA(q, r, 0x1.5555555554cb8p-5);
    q = TK_EXP_FMA(q, r, 0x1.5555555553b7dp-3);
    q = TK_EXP_FMA(q, r, 0x1p-1);
    return TK_EXP_FMA(r * r, q, r);
}
/* the float with bits u clamped to [-L, L] (l: L's bits, L > 0), a NaN keeping its bits. Adding
   0x7fffff moves the NaNs of each sign below the rest in the order of the next min: the positive
   NaNs wrap to negative int32 (a signed min with L's rotated bits leaves them and clamps the
   positive numbers), the negative NaNs wrap to small unsigned values (an unsigned min with -L's
   rotated bits leaves them and everything positive, and clamps the negative numbers); subtracting
   0x7fffff undoes the rotation. Four vector instructions for 16 floats. */
TK_INLINE uint32_t tk_clamp_f32(uint32_t u, uint32_t l) {
    int32_t w = (int32_t)(u + 0x7fffffu), lp = (int32_t)(l + 0x7fffffu);
    uint32_t a = (uint32_t)(w < lp ? w : lp), ln = (l | 0x80000000u) + 0x7fffffu;
    return (a < ln ? a : ln) - 0x7fffffu;
}
TK_INLINE float tk_exp_f32(float xf) {
    double s, p = tk_exp_parts((double)tk_bits_f32(tk_clamp_f32(tk_f32_bits(xf), 0x42f00000u)), &s);
    return (float)TK_EXP_FMA(p, s, s);     /* = s * round(1 + p): s is a power of two, |x| <= 120 above */
}
/* tanh |x| = e / (e + 2) with e = e^(2|x|) - 1 = (s - 1) + s p (s - 1 is exact; no cancellation
   for small |x|, where s = 1), the sign put back; |x| clamped to 20 (tanh is 1 in float32 from
   about 9.01). */
TK_INLINE float tk_tanh_f32(float xf) {
    uint32_t u = tk_f32_bits(xf);
    double s, a = (double)tk_bits_f32(tk_clamp_f32(u & 0x7fffffffu, 0x41a00000u));
    double p = tk_exp_parts(a + a, &s);
    double e = (s - 1.0) + s * p;
    return tk_bits_f32(tk_f32_bits((float)(e / (e + 2.0))) | (u & 0x80000000u));
}
"""


# tk.dot_i8 / tk.dot_u4i8 (a ByteDot block): 32 byte products into eight int32 lanes per step,
# lane l the sum of products 4l .. 4l + 3, exact (from c[l] when start= gives c, else from 0); the _acc forms then do out[l] =
# fma(float(lane), s, out[l]) on the eight floats as one vector (a loop of them keeps out in a
# register). Levels: 2 = AVX-512 VNNI (vpdpbusd on ymm, as inline assembly: the compiler probe
# may have turned the compiler's own VNNI code generation off, see runtime/compiler.py), 1 =
# AVX2 (vpmaddubsw / vpmaddwd), 0 = scalar C lanes; TK_CPU_BYTEDOT=c|avx2|vnni caps it (tests).
# Without AVX2: plain C only. A -march=native library is compiled with -DTK_BYTEDOT_LEVEL
# (runtime/compiler.py): the level is then a constant, so only its code is emitted (no branch
# per call) and calls sharing an operand share its work; otherwise it is chosen once when the
# library is loaded.
_BYTEDOT = r"""
static inline __attribute__((always_inline)) void tk_bd_lanes_c(int32_t *o, const void *pa, const void *pb,
                                                              int u4, int zero, const int32_t *c) {
    const uint8_t *a = (const uint8_t *)pa;
    const int8_t *b = (const int8_t *)pb;
    for (int l = 0; l < 8; l++) {
        int32_t s = c ? c[l] : 0;
        for (int t = 0; t < 4; t++) {
            int k = 4 * l + t;
            int32_t v = u4 ? (int32_t)(k < 16 ? a[k] & 15 : a[k - 16] >> 4) - zero : (int32_t)(int8_t)a[k];
            s += v * (int32_t)b[k];
        }
        o[l] = s;
    }
}
#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#define TK_BYTEDOT_SIMD 1
#ifdef TK_BYTEDOT_LEVEL
#define tk_bytedot_level TK_BYTEDOT_LEVEL
#else
static int tk_bytedot_level = 1;
__attribute__((constructor)) static void tk_bytedot_init(void) {
    const char *cap = getenv("TK_CPU_BYTEDOT");
    __builtin_cpu_init();
    int lv = (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")) ? 2 : 1;
    if (cap && !strcmp(cap, "c")) lv = 0;
    else if (cap && !strcmp(cap, "avx2") && lv > 1) lv = 1;
    tk_bytedot_level = lv;
}
#endif
static inline __attribute__((always_inline)) __m256i tk_dpbusd(__m256i acc, __m256i u, __m256i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));     /* acc += u8 x s8, 4 per lane */
    return acc;
}
/* the eight lanes of 32 signed x 32 signed bytes: VNNI as (a + 128) * b - 128 * b (exact for
   every byte value); AVX2 through int16 (vpmaddubsw would saturate at -128 x -128) */
static inline __attribute__((always_inline)) __m256i tk_bd_start(const int32_t *c) {
    return c ? _mm256_loadu_si256((const __m256i *)c) : _mm256_setzero_si256();
}
static inline __attribute__((always_inline)) __m256i tk_bd_i8(const void *pa, const void *pb, int lv, const int32_t *c) {
    if (lv == 0) {
        int32_t t[8];
        tk_bd_lanes_c(t, pa, pb, 0, 0, c);
        return _mm256_loadu_si256((const __m256i *)t);
    }
    __m256i a = _mm256_loadu_si256((const __m256i *)pa), b = _mm256_loadu_si256((const __m256i *)pb);
    if (lv == 2) {       /* the sum starts at -128 * (b's four bytes): shared by calls on the same b */
        __m256i k = _mm256_set1_epi8((char)0x80), z = _mm256_setzero_si256();
        return tk_dpbusd(_mm256_sub_epi32(tk_bd_start(c), tk_dpbusd(z, k, b)), _mm256_xor_si256(a, k), b);
    }
    __m256i p0 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(a)),
                                   _mm256_cvtepi8_epi16(_mm256_castsi256_si128(b)));
    __m256i p1 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(a, 1)),
                                   _mm256_cvtepi8_epi16(_mm256_extracti128_si256(b, 1)));
    __m256i r = _mm256_permute4x64_epi64(_mm256_hadd_epi32(p0, p1), 0xD8);
    return c ? _mm256_add_epi32(r, tk_bd_start(c)) : r;
}
/* 16 bytes of 4-bit values minus zero (value k < 16 the low nibble of byte k, k + 16 its high
   one) times 32 signed bytes */
static inline __attribute__((always_inline)) __m256i tk_bd_u4(const void *pa, const void *pb, int zero, int lv,
                                                              const int32_t *c) {
    if (lv == 0) {
        int32_t t[8];
        tk_bd_lanes_c(t, pa, pb, 1, zero, c);
        return _mm256_loadu_si256((const __m256i *)t);
    }
    __m128i q = _mm_loadu_si128((const __m128i *)pa);
#if defined(__GFNI__) && !defined(TK_NO_GFNI)
    /* [q & 15, q >> 4] per byte as one affine bit transform of [q, q]: the low half's matrix
       keeps bits 0..3, the high half's moves bits 4..7 down (a broadcast load and one
       vgf2p8affineqb for a shift, an insert and an and) */
    __m256i u = _mm256_gf2p8affine_epi64_epi8(_mm256_broadcastsi128_si256(q),
                                              _mm256_set_epi64x(0x1020408000000000LL, 0x1020408000000000LL,
                                                                0x0102040800000000LL, 0x0102040800000000LL), 0);
#else
    __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
#endif
    __m256i x = _mm256_loadu_si256((const __m256i *)pb);
    if (lv == 2) {       /* the sum starts at -zero * (x's four bytes): shared by calls on the same x */
        __m256i z = _mm256_setzero_si256(), c0 = tk_bd_start(c);
        return tk_dpbusd(zero ? _mm256_sub_epi32(c0, tk_dpbusd(z, _mm256_set1_epi8((char)zero), x)) : c0, u, x);
    }
    __m256i p = _mm256_maddubs_epi16(u, x);                 /* |pair| <= 2 * 15 * 128: exact */
    if (zero)
        p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8((char)zero), x));
    __m256i r = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    return c ? _mm256_add_epi32(r, tk_bd_start(c)) : r;
}
/* the float forms' scale in every lane: a value, or element k of a private float32 array of 8m
   floats, permuted out of its group of eight (one vpermps; an extract and a broadcast cost two
   or three instructions per call, most of a q4_0 block's scale work) */
typedef __m256 tk_bd_scale_t;
#define TK_BD_SCALE(v) _mm256_set1_ps(v)
static inline __attribute__((always_inline)) __m256 TK_BD_SCALE_AT(const float *p, int64_t k) {
    return _mm256_permutevar8x32_ps(_mm256_loadu_ps(p + (k & ~(int64_t)7)), _mm256_set1_epi32((int)(k & 7)));
}
static inline __attribute__((always_inline)) void tk_bd_acc(float *o, __m256i lanes, __m256 s) {
    _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), s, _mm256_loadu_ps(o)));
}
static inline __attribute__((always_inline)) void tk_dot_i8(int32_t *o, const void *pa, const void *pb, int n,
                                                          const int32_t *c) {
    int lv = tk_bytedot_level;
    for (int k = 0; k < n; k += 32)
        _mm256_storeu_si256((__m256i *)(o + k / 4), tk_bd_i8((const int8_t *)pa + k, (const int8_t *)pb + k, lv,
                                                             c ? c + k / 4 : 0));
}
static inline __attribute__((always_inline)) void tk_dot_i8_acc(float *o, const void *pa, const void *pb, int n,
                                                              const int32_t *c, tk_bd_scale_t s) {
    int lv = tk_bytedot_level;
    for (int k = 0; k < n; k += 32)
        tk_bd_acc(o + k / 4, tk_bd_i8((const int8_t *)pa + k, (const int8_t *)pb + k, lv, c ? c + k / 4 : 0), s);
}
static inline __attribute__((always_inline)) void tk_dot_u4i8(int32_t *o, const void *pa, const void *pb, int zero,
                                                            const int32_t *c) {
    _mm256_storeu_si256((__m256i *)o, tk_bd_u4(pa, pb, zero, tk_bytedot_level, c));
}
static inline __attribute__((always_inline)) void tk_dot_u4i8_acc(float *o, const void *pa, const void *pb, int zero,
                                                                const int32_t *c, tk_bd_scale_t s) {
    tk_bd_acc(o, tk_bd_u4(pa, pb, zero, tk_bytedot_level, c), s);
}
#else
typedef float tk_bd_scale_t;
#define TK_BD_SCALE(v) (v)
#define TK_BD_SCALE_AT(p, k) ((p)[k])
static inline void tk_dot_i8(int32_t *o, const void *pa, const void *pb, int n, const int32_t *c) {
    for (int k = 0; k < n; k += 32)
        tk_bd_lanes_c(o + k / 4, (const int8_t *)pa + k, (const int8_t *)pb + k, 0, 0, c ? c + k / 4 : 0);
}
static inline void tk_bd_acc_c(float *o, const void *pa, const void *pb, int u4, int zero, const int32_t *c, float s) {
    int32_t t[8];
    tk_bd_lanes_c(t, pa, pb, u4, zero, c);
    for (int l = 0; l < 8; l++) o[l] = __builtin_fmaf((float)t[l], s, o[l]);
}
static inline void tk_dot_i8_acc(float *o, const void *pa, const void *pb, int n, const int32_t *c, float s) {
    for (int k = 0; k < n; k += 32)
        tk_bd_acc_c(o + k / 4, (const int8_t *)pa + k, (const int8_t *)pb + k, 0, 0, c ? c + k / 4 : 0, s);
}
static inline void tk_dot_u4i8(int32_t *o, const void *pa, const void *pb, int zero, const int32_t *c) {
    tk_bd_lanes_c(o, pa, pb, 1, zero, c);
}
static inline void tk_dot_u4i8_acc(float *o, const void *pa, const void *pb, int zero, const int32_t *c, float s) {
    tk_bd_acc_c(o, pa, pb, 1, zero, c, s);
}
#endif
"""


# tk.load_halves (a HalfLoad block): n float16 values at a byte stride from p, exactly as
# float32 (NumPy's conversion, tk_f16_to_f32's bits). With F16C eight at a time: eight 16-bit
# loads into one vector and one vcvtph2ps (exact for every half; the scalar software decode is
# ~20 instructions per value). The hardware quiets a signaling NaN where NumPy keeps it, so the
# float's quiet bit is set back to the half's (bit 9 << 13) in the NaN lanes. The rest (n % 8,
# or no F16C) in software.
_HALVES = r"""
#include <string.h>
#if defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
#endif
static inline __attribute__((always_inline)) void tk_load_halves(float *o, const void *pa, int64_t n, int64_t s) {
    const uint8_t *p = (const uint8_t *)pa;
    int64_t t = 0;
#if defined(__F16C__) && defined(__AVX2__)
    for (; t + 8 <= n; t += 8) {
        uint16_t h[8];
        for (int k = 0; k < 8; ++k) memcpy(&h[k], p + (t + k) * s, 2);
        __m128i v = _mm_set_epi16((short)h[7], (short)h[6], (short)h[5], (short)h[4],
                                  (short)h[3], (short)h[2], (short)h[1], (short)h[0]);
        __m256 f = _mm256_cvtph_ps(v);
        __m256i q = _mm256_andnot_si256(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 13), _mm256_set1_epi32(0x400000));
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        _mm256_storeu_ps(o + t, _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_and_si256(q, nan), _mm256_castps_si256(f))));
    }
#endif
    for (; t < n; ++t) o[t] = tk_f16_to_f32((uint16_t)(p[t * s] | (p[t * s + 1] << 8)));
}
"""

# tk.lookup_u4 (a NibbleLookup block) and tk.load_i8 (a ByteLoad block). lookup_u4: the 2n 4-bit values of n bytes (value k < n the low
# nibble of byte k, k + n its high nibble), each replaced by tab[value] (times s when sc: the
# table is scaled once, the same products as scaling each entry looked up). With AVX-512F the
# 16-entry table is one zmm register and 16 values are one vpmovzxbd and one vpermps (which
# reads the index's low four bits, so the low nibbles need no mask; the high ones one shift);
# with AVX2 the table is two ymm halves, each permuted by the low three bits and blended on
# bit 3. The level follows TK_BYTEDOT_LEVEL where it is defined (TK_CPU_BYTEDOT=c|avx2 caps
# it, for tests); the rest (n % 16, n % 8) and targets without AVX2 in plain C. load_i8: n
# signed bytes as float32 (times s when sc): one vpmovsxbd straight to 32 bits, a vcvtdq2ps
# and a vmulps per 16 values (AVX2 per 8), where GCC's own loop over int8 widens through 16-bit
# halves (vpmovsxbw, vextracti128, vpmovsxwd) in 256-bit registers.
_BYTE_RUNS = r"""
#if defined(__x86_64__) && defined(__AVX512F__) && (!defined(TK_BYTEDOT_LEVEL) || TK_BYTEDOT_LEVEL >= 2)
#define TK_NIB_LEVEL 2
#elif defined(__x86_64__) && defined(__AVX2__) && (!defined(TK_BYTEDOT_LEVEL) || TK_BYTEDOT_LEVEL >= 1)
#define TK_NIB_LEVEL 1
#else
#define TK_NIB_LEVEL 0
#endif
#if TK_NIB_LEVEL
#include <immintrin.h>
#endif
#if TK_NIB_LEVEL == 1
static inline __attribute__((always_inline)) __m256 tk_nib8(__m256 lo, __m256 hi, __m256i i) {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, i), _mm256_permutevar8x32_ps(hi, i),
                            _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)));
}
#endif
static inline __attribute__((always_inline)) void tk_lookup_u4(float *o, const float *tab, const void *pa, int64_t n,
                                                               int sc, float s) {
    const uint8_t *p = (const uint8_t *)pa;
    int64_t k = 0;
#if TK_NIB_LEVEL == 2
    __m512 t = _mm512_loadu_ps(tab);
    if (sc) t = _mm512_mul_ps(t, _mm512_set1_ps(s));
    for (; k + 16 <= n; k += 16) {
        __m512i i = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + k)));
        _mm512_storeu_ps(o + k, _mm512_permutexvar_ps(i, t));
        _mm512_storeu_ps(o + n + k, _mm512_permutexvar_ps(_mm512_srli_epi32(i, 4), t));
    }
#elif TK_NIB_LEVEL == 1
    __m256 lo = _mm256_loadu_ps(tab), hi = _mm256_loadu_ps(tab + 8);
    if (sc) {
        lo = _mm256_mul_ps(lo, _mm256_set1_ps(s));
        hi = _mm256_mul_ps(hi, _mm256_set1_ps(s));
    }
    for (; k + 8 <= n; k += 8) {
        __m256i i = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + k)));
        _mm256_storeu_ps(o + k, tk_nib8(lo, hi, i));
        _mm256_storeu_ps(o + n + k, tk_nib8(lo, hi, _mm256_srli_epi32(i, 4)));
    }
#endif
    for (; k < n; ++k) {
        o[k] = sc ? tab[p[k] & 15] * s : tab[p[k] & 15];
        o[n + k] = sc ? tab[p[k] >> 4] * s : tab[p[k] >> 4];
    }
}
static inline __attribute__((always_inline)) void tk_load_i8(float *o, const void *pa, int64_t n, int sc, float s) {
    const int8_t *p = (const int8_t *)pa;
    int64_t k = 0;
#if TK_NIB_LEVEL == 2
    for (; k + 16 <= n; k += 16) {
        __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + k))));
        _mm512_storeu_ps(o + k, sc ? _mm512_mul_ps(v, _mm512_set1_ps(s)) : v);
    }
#elif TK_NIB_LEVEL == 1
    for (; k + 8 <= n; k += 8) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + k))));
        _mm256_storeu_ps(o + k, sc ? _mm256_mul_ps(v, _mm256_set1_ps(s)) : v);
    }
#endif
    for (; k < n; ++k) o[k] = sc ? (float)p[k] * s : (float)p[k];
}
"""

def slot_layout(k: N.Kernel) -> list:
    """(param, first slot) for every runtime parameter, after the geometry slots."""
    out, pos = [], GEOMETRY_SLOTS
    for p in k.params:
        if p[0] == "array":
            out.append((p, pos))
            pos += 1 + 2 * p[1].ndim
        elif p[0] == "scalar":
            out.append((p, pos))
            pos += 1
    return out


class CRenderer(CLikeRenderer):
    """The CPU's C: OpenMP threads over chunks of work items or over workgroups."""

    oob_prefix = "tk_gl, "      # debug mode: the work item, to report the first bad one in index order

    def __init__(self, kernel: N.Kernel, plan: GroupPlan | None, ranges: int):
        super().__init__(kernel)
        self.plan = plan            # None: the flat path
        self.ranges = ranges        # 0: plain ndrange, 1: offset starts, 2: offsets and steps
        self.in_item = False        # rendering inside an item loop (grouped path)
        self.lut16 = False          # a block of table lookups was rendered: include _LUT16
        self.byte_dots = False      # a tk.dot_i8 / tk.dot_u4i8 was lowered: include _BYTEDOT
        self.half_loads = False     # a tk.load_halves was lowered: include _HALVES
        self.byte_runs = False      # a tk.lookup_u4 / tk.load_i8 was lowered: include _BYTE_RUNS
        self.item_label = None
        self.next_label = "tk_next"  # flat path: where a return jumps (the end of the item)
        self.var_over: dict = {}    # lanes shape: local -> the C name holding its value in this item
        self.lane_stack: list = []  # lanes shape: emitters of per-item loop variables, outermost first
        self.lane_outer = False     # lanes shape: the group's outer dimensions are bound by enclosing loops
        self.staged: dict = {}      # flat path: id(Store) -> its staging buffer (streaming stores)
        self.loop_streams: dict = {}    # flat path: id(For) -> its streamed stores (loop_streams)
        # flat path: the divisions computed once per run of a row (passes/rowdiv.py), and while
        # an item loop over such a run is rendered, id(BinOp) -> the C expression of its value
        self.div_values: dict = {}
        self.row_divs = row_divisions(kernel, ranges, self.expr) if plan is None else []
        # flat path: the loads done once per row (passes/rowdiv.py: row_loads), and while the
        # row's items are rendered, id(Load) -> the C variable holding its value
        self.row_loads = row_loads(kernel, ranges) if plan is None else []
        self.load_values: dict = {}
        # grouped path, lanes pieces: arrays that may stream; a C condition under which every
        # valid lane runs the current lanes loop unmasked (None: unknown); hoisted loop vars
        self.write_only = (write_only_arrays(kernel) if plan is not None and not plan.needs_done
                           and not kernel.debug else set())
        self.lane_full = None
        self.lane_vars: dict = {}
        self.stream_arrays: set = set()     # arrays some lanes run streams (grouped path)
        # grouped path: id(group_reduce) -> the group_scan whose last item already holds its result
        self.scan_totals = scan_totals(plan.body, plan.item_vars) if plan is not None and not plan.needs_done else {}
        # grouped path: ItemLoop label -> the local tiles it reads transposed (passes/tiletranspose.py);
        # while such a loop is rendered, id(Load) -> (C name of the transposed copy, its row length)
        self.tile_tr = transposed_reads(plan.body, plan.remat, kernel.workgroup) if plan is not None else {}
        self.tr_loads: dict = {}
        self.tr_sizes: set = set()          # element sizes whose tk_tile_tr helper the unit needs
        self.tr_streams: set = set()        # ... and whose tk_tile_tr<size>_nt (streamed_tile_copy)
        # the rows the next group (flat: item) reads, prefetched while this one computes
        # (passes/prefetch.py); cursors tk_pf<N>, stepped by the loops that read those arrays
        self.pf_rows = next_rows(kernel, plan is not None, ranges)
        self.pf_left = 0                    # loops that will step the cursors, from here to the end
        self.pf_first = False               # the next stepping loop is the first over the row
        self.gridstride = False             # a strided loop prefetches ahead: include _GRIDSTRIDE
        self.gs_consts = constant_locals(kernel.body)   # (loops whose step is such a local are not strided)

    # --- names ---------------------------------------------------------------------------

    def math_name(self, fn: str, d) -> str:
        """``exp`` and ``tanh`` of float32 (and of the narrow floats, computed in float32) in a
        default kernel are the translation unit's vectorizable, correctly rounded
        ``tk_exp_f32``/``tk_tanh_f32``; a ``fastmath`` kernel keeps ``expf``/``tanhf``, which
        glibc's libmvec vectorizes faster (and less accurately)."""
        if fn in ("exp", "tanh") and not self.k.fastmath and self.compute_dtype(d).name == "float32":
            return f"tk_{fn}_f32"
        return super().math_name(fn, d)

    def var(self, name: str) -> str:
        if name in self.var_over:
            return self.var_over[name]
        if self.plan is not None and self.in_item and name in self.plan.remat:
            return f"({self.expr(self.plan.remat[name])})"
        return self.stored_var(name)

    def stored_var(self, name: str) -> str:
        """Where a local is stored (its per-item slot inside an item loop)."""
        v = f"v_{mangle(name)}"
        if self.plan is not None and name in self.plan.item_vars:
            return f"{v}[{'tk_lid' if self.in_item else '0'}]"
        return v

    def array_ptr(self, a: N.ArrayInfo) -> str:
        p = f"a_{mangle(a.name)}"
        if a.space == "private" and self.plan is not None and a.name in self.plan.item_private:
            return f"{p}[{'tk_lid' if self.in_item else '0'}]"
        return p

    # --- atomics and debug checks -------------------------------------------------------------

    def atomic(self, e: N.Atomic) -> str:
        sfx = self.fsuffix(e.array.dtype)
        ref = f"&{self.element(e.array, e.index)}"
        # local and private memory belong to one group, whose items run on one thread
        kind = "plain" if e.array.space in ("local", "private") else "atomic"
        call = f"tk_{kind}_{e.op}_{sfx}({ref}, {', '.join(self.expr(a) for a in e.args)})"
        chk = self.bounds_check(e.array, e.index, e.loc)
        return f"({chk} ? {call} : ({self.ctype(e.ty)})0)" if chk else call

    def print_call(self, fmt, args):
        super().print_call(fmt, args)
        self.w("fflush(stdout);")

    def scale_args(self, scale) -> str:
        """The ``sc, s`` arguments of the byte-run helpers: ``0, 0.0f`` without a scale."""
        return "0, 0.0f" if scale is None else f"1, {self.expr(scale)}"

    def s_FuncBlock(self, s):
        """A ``tk.dot_i8``/``tk.dot_u4i8`` block becomes one call of the SIMD helpers
        (``_BYTEDOT``), a ``tk.load_halves`` block one of ``tk_load_halves``; debug kernels (bounds checks) and strided arrays run the reference loop."""
        bd = s.intrinsic
        if isinstance(bd, N.HalfLoad) and not self.k.debug and bd.a.contiguous and bd.out.contiguous:
            self.half_loads = True
            zero = [N.Const(bd.i[-1].ty, s.loc, 0)]
            self.at(s.loc)
            self.w(f"tk_load_halves(&{self.element(bd.out, zero)}, &{self.element(bd.a, bd.i)}, {bd.n}, {bd.stride});")
            return
        lookup = isinstance(bd, N.NibbleLookup)
        if (lookup or isinstance(bd, N.ByteLoad)) and not self.k.debug and bd.a.contiguous \
                and bd.out.contiguous and (not lookup or bd.table.contiguous):
            self.byte_runs = True
            zero = [N.Const(bd.i[-1].ty, s.loc, 0)]
            table = f"&{self.element(bd.table, zero)}, " if lookup else ""
            self.at(s.loc)
            self.w(f"tk_{'lookup_u4' if lookup else 'load_i8'}(&{self.element(bd.out, zero)}, {table}"
                   f"&{self.element(bd.a, bd.i)}, {bd.n}, {self.scale_args(bd.scale)});")
            return
        if isinstance(bd, N.ByteDot) and not self.k.debug and bd.a.contiguous and bd.b.contiguous \
                and bd.out.contiguous and (bd.start is None or bd.start[0].contiguous):
            self.byte_dots = True
            zero = [N.Const(bd.i[-1].ty, s.loc, 0)]
            fn = ("tk_dot_i8" if bd.kind == "i8" else "tk_dot_u4i8") + ("" if bd.scale is None else "_acc")
            args = [f"&{self.element(bd.out, zero)}", f"&{self.element(bd.a, bd.i)}",
                    f"&{self.element(bd.b, bd.j)}", str(bd.n if bd.kind == "i8" else bd.zero),
                    "0" if bd.start is None else f"&{self.element(*bd.start)}"]
            if bd.scale_at is not None:
                args.append(f"TK_BD_SCALE_AT(&{self.element(bd.scale_at[0], zero)}, {self.expr(bd.scale_at[1][0])})")
            elif bd.scale is not None:
                args.append(f"TK_BD_SCALE({self.expr(bd.scale)})")
            self.at(s.loc)
            self.w(f"{fn}({', '.join(args)});")
            return
        super().s_FuncBlock(s)

    # --- statements specific to the grouped path -----------------------------------------------

    def e_BinOp(self, e):
        hoisted = self.div_values.get(id(e))
        return hoisted if hoisted is not None else super().e_BinOp(e)

    def e_Load(self, e):
        hoisted = self.load_values.get(id(e))
        return hoisted if hoisted is not None else super().e_Load(e)

    def s_Assign(self, s):
        v = s.value
        if (self.plan is not None and self.plan.needs_done and not self.in_item
                and isinstance(v, N.Call) and v.fn == "uniform"):
            self.uniform_first_live(s)
            return
        if self.plan is not None and s.var in self.plan.unstored:
            return      # every read recomputes it (GroupPlan.remat)
        self.w(f"{self.stored_var(s.var)} = {self.expr(s.value)};")

    def uniform_first_live(self, s) -> None:
        """``tk.uniform`` in a kernel with item-level returns: evaluated by the group's first
        work item that is still running (in the ndrange and not returned), as the interpreter
        does; by nobody when every item has returned."""
        k = self.k
        wg = k.workgroup
        n = _prod(wg)
        live = ["!tk_done[tk_q]"] + ([] if k.unsafe_indices else [self.in_range_expr()])
        self.w(f"{{ tk_idx tk_lid = {n};")
        self.depth += 1
        self.w(f"for (tk_idx tk_q = 0; tk_q < {n}; ++tk_q) {{")
        self.local_coords("tk_q", indent="    ")
        self.w(f"    if ({' && '.join(live)}) {{ tk_lid = tk_q; break; }}")
        self.w("}")
        self.w(f"if (tk_lid < {n}) {{")
        self.depth += 1
        self.local_coords("tk_lid")
        for d in range(k.ndim):
            self.w(f"const int64_t tk_p{d} = tk_gr{d} * {wg[d]} + tk_l{d};")
        self.global_coords()
        saved = self.in_item
        self.in_item = True
        self.w(f"{self.stored_var(s.var) if s.var in self.plan.item_vars else self.var(s.var)} = "
               f"{self.expr(s.value)};")
        self.in_item = saved
        self.depth -= 1
        self.w("}")
        self.depth -= 1
        self.w("}")

    def s_Store(self, s):
        buf = self.staged.get(id(s))
        if buf is None:
            super().s_Store(s)
        elif isinstance(buf, tuple):        # a float32 staging buffer of a float16 output
            self.w(f"{buf[0]} = (float)({self.expr(buf[1])});")
        else:
            self.w(f"{buf} = {self.stored_value(s.array, s.value)};")

    def s_Return(self, s):
        if self.plan is None:
            self.w(f"goto {self.next_label};")
        elif self.in_item:
            self.w(f"tk_done[tk_lid] = 1; goto {self.item_label}_end;")
        else:
            self.w("goto tk_group_end;")

    def s_Barrier(self, s):
        self.w("/* barrier */")

    def s_AllocArray(self, s):
        a = s.array
        if a.space == "private" and self.plan is not None and a.name in self.plan.item_private:
            return  # declared per work item at group scope
        pitch = line_pitch(a)
        if pitch is None:
            super().s_AllocArray(s)
        else:                       # rows padded to whole cache lines, the first one aligned
            self.w(f"{self.stype(a.dtype)} {self.array_ptr(a)}[{a.shape[0] * pitch}] __attribute__((aligned(64)));")

    def offset(self, a: N.ArrayInfo, idx: list) -> str:
        pitch = line_pitch(a)
        if pitch is None or len(idx) != 2:
            return super().offset(a, idx)
        return f"((tk_idx)({self.expr(idx[0])})) * {pitch} + (tk_idx)({self.expr(idx[1])})"

    def s_ItemLoop(self, s: ItemLoop):
        found = self.tile_tr.get(s.label)
        if not found:
            self.piece(s)
            return
        # a tile this piece reads as tile[lj, li]: transpose the block it reads once, in
        # registers, into a copy read as copy[li, lj] (unit stride along the lanes)
        w0, w1 = self.k.workgroup
        self.w(f"/* {s.label}: transposed tile reads */ {{")
        self.depth += 1
        for n, t in enumerate(found):
            a = t.array
            name = f"{s.label}_tr{n}"
            size = a.dtype.itemsize
            self.tr_sizes.add(size)
            self.w(f"{self.stype(a.dtype)} {name}[{w0 * w1}] __attribute__((aligned(64)));")
            # the tile in memory first: without this GCC forwards a full group's (unrolled)
            # stores of the tile into the transpose's loads element by element, building
            # each row vector from 16 scalar loads of the global input (slower than no copy)
            self.w(f"__asm__ __volatile__(\"\" : : \"r\"({self.array_ptr(a)}) : \"memory\");")
        fused = self.streamed_tile_copy(s, found)
        if fused is not None:
            self.w("} else {")
            self.depth += 1
        for n, t in enumerate(found):
            a, name = t.array, f"{s.label}_tr{n}"
            self.w(f"tk_tile_tr{a.dtype.itemsize}({name}, {w1}, {self.array_ptr(a)}, "
                   f"{line_pitch(a) or a.shape[1]}, tk_nv1, tk_nv0);")
            for ld in t.loads:
                self.tr_loads[id(ld)] = (name, w1)
        self.piece(s)
        if fused is not None:
            self.depth -= 1
            self.w("}")
        for t in found:
            for ld in t.loads:
                self.tr_loads.pop(id(ld), None)
        self.depth -= 1
        self.w("}")

    def streamed_tile_copy(self, s: ItemLoop, found: list):
        """A piece that only stores the transposed tile read to a streamed output,
        ``out[gj * T + li, gi * T + lj] = tile[lj, li]`` (a transpose's second half): the
        register transpose writes the output rows itself with non-temporal stores
        (``tk_tile_tr<size>_nt``), with no copy in memory and no staged row in between.
        Renders the test and that branch, opening the ``if`` whose ``else`` the caller
        renders (the copy and the piece as before), and returns the store; None (nothing
        rendered) unless: one tile, read once, the piece one streamed store of exactly that
        read (same type), whole register blocks of 64-byte rows (float32, float64), the
        address affine in both local indices. At run time: a streamed launch, a full group,
        the first row and the row step multiples of 64 bytes (docs/cpu.md, "Transposed tile
        reads")."""
        k = self.k
        if len(found) != 1 or len(found[0].loads) != 1 or len(s.body) != 1 or k.debug:
            return None
        t, st = found[0], s.body[0]
        a, size = t.array, t.array.dtype.itemsize
        lanes = block_lanes(size)
        if not (isinstance(st, N.Store) and st.value is t.loads[0] and st.array.dtype == a.dtype
                and lanes * size == 64 and all(w % lanes == 0 for w in k.workgroup)):
            return None
        self.lane_full, self.lane_outer = "1", True
        streams = self.lane_streams(s.body) if self.write_only else []
        self.lane_full, self.lane_outer = None, False
        if streams != [st] or any(lane_coef(e, k.ndim, self.ranges, self.plan.group_vars, self.plan.remat,
                                            self.lane_vars, dim=0) is None for e in st.index):
            return None
        self.stream_arrays.add(st.array.name)
        self.tr_streams.add(size)
        w0, w1 = k.workgroup
        self.w("char *tk_trow0, *tk_trow1;")
        for row in (0, 1):      # the row of local index 0 and of 1 (the address is affine in it)
            self.w("{")
            self.depth += 1
            self.w(f"const int64_t tk_l0 = {row}, tk_l1 = 0;")
            self.item_geometry(range(k.ndim))
            self.global_coords()
            saved, self.in_item = self.in_item, True
            self.w(f"tk_trow{row} = (char *)&{self.element(st.array, st.index)};")
            self.in_item = saved
            self.depth -= 1
            self.w("}")
        self.w("const int64_t tk_trs = tk_trow1 - tk_trow0;")
        self.w(f"if (tk_stream && tk_nv0 == {w0} && tk_nv1 == {w1} && (((uintptr_t)tk_trow0 | (uintptr_t)tk_trs) & 63) == 0) {{")
        self.w(f"    tk_tile_tr{size}_nt(tk_trow0, tk_trs / {size}, {self.array_ptr(a)}, {line_pitch(a) or a.shape[1]}, "
               f"{w1}, {w0});")
        return st

    def load_ref(self, e: N.Load) -> str:
        tr = self.tr_loads.get(id(e))
        if tr is None:
            return super().load_ref(e)
        name, ld = tr
        return f"{name}[(tk_idx)({self.expr(e.index[1])}) * {ld} + (tk_idx)({self.expr(e.index[0])})]"

    def piece(self, s: ItemLoop):
        """One piece between barriers: the lanes shape, the streaming item-outer shape or the
        item-outer shape (docs/cpu.md)."""
        k, plan = self.k, self.plan
        if s.label in plan.lanes:
            # outer dimensions of the group outside the hoisted loops, the last one innermost:
            # per-item state of one row of the group stays small (registers, for a tile's
            # accumulators) while the row still vectorizes
            self.w(f"/* {s.label}: work items as lanes */ {{")
            self.depth += 1
            if k.ndim > 1:
                self.item_loop_head(range(k.ndim - 1))
                self.depth += 1
            self.lane_outer = k.ndim > 1
            self.lane_full = "1"
            self.lanes_block(s.body, None)
            self.lane_full = None
            self.lane_outer = False
            if k.ndim > 1:
                self.depth -= 1
                self.w("}")
            self.depth -= 1
            self.w("}")
            return
        if self.item_outer_streaming(s):
            return
        self.item_loop_head(range(k.ndim))
        self.depth += 1
        self.item_geometry(range(k.ndim))
        if plan.needs_done:
            self.w("if (tk_done[tk_lid]) continue;")
        self.global_coords()
        for v in sorted(plan.loop_vars.get(s.label, ())):
            self.w(f"{self.ctype(k.locals[v])} v_{mangle(v)};")
        saved = self.in_item, self.item_label
        self.in_item, self.item_label = True, s.label
        self.last_line = None
        self.stmts(s.body)
        self.in_item, self.item_label = saved
        self.w(f"{s.label}_end: ;")
        self.depth -= 1
        self.w("}")

    def item_outer_streaming(self, s: ItemLoop) -> bool:
        """An item-outer piece (no loop to hoist) with a store that may stream (a transpose's
        ``out[gj * T + li, gi * T + lj] = tile[lj, li]``): rendered as one lanes run, the
        last group dimension innermost as in the item-outer shape, so that each row of the
        group's stores is staged and streamed. False (nothing rendered) otherwise."""
        k = self.k
        if not self.write_only or any(isinstance(x, (N.Return, N.Print, N.FuncBlock, N.FuncExit))
                                      for x in N.walk_stmts(s.body)):
            return False
        self.lane_full, self.lane_outer = "1", k.ndim > 1
        streams = self.lane_streams(s.body)
        if streams:
            self.w(f"/* {s.label}: streaming stores */ {{")
            self.depth += 1
            if k.ndim > 1:
                self.item_loop_head(range(k.ndim - 1))
                self.depth += 1
            self.lanes_streaming(s.body, None, streams, sorted(self.plan.loop_vars.get(s.label, ())))
            if k.ndim > 1:
                self.depth -= 1
                self.w("}")
            self.depth -= 1
            self.w("}")
        self.lane_full, self.lane_outer = None, False
        return bool(streams)

    # --- the lanes shape (see docs/cpu.md) -------------------------------------------------------

    def lanes_block(self, stmts, mask) -> None:
        """Render item-level ``stmts`` with the work items innermost: runs of plain statements
        become one loop over the items; hoistable ``for`` loops and ``if``s around them run at
        group level, per-item differences become the ``mask`` (a C condition on ``tk_lid``)."""
        run: list = []

        def flush():
            if run:
                body = list(run)
                streams = self.lane_streams(body)
                if streams:
                    self.lanes_streaming(body, mask, streams)
                else:
                    self.lane_items(mask, lambda: self.stmts(body))
                run.clear()
        for s in stmts:
            if lane_loop(s):
                flush()
                self.at(s.loc)
                self.lanes_for(s, mask)
            elif isinstance(s, N.If) and (has_lane_loop(s.body) or has_lane_loop(s.orelse)):
                flush()
                self.at(s.loc)
                self.lanes_if(s, mask)
            else:
                run.append(s)
        flush()

    def item_loop_head(self, dims, lanes: bool = False) -> None:
        """``for`` headers over the valid work items of the group in dimensions ``dims`` (the
        last dimension innermost): bounds instead of a per-item range test, no division.
        ``lanes``: the innermost loop is the one to vectorize, and it must stay a loop until
        the vectorizer sees it: GCC otherwise unrolls a full group's constant trip count
        first and then vectorizes the hoisted loop around it instead (a tiled matmul's
        ``for q in range(T)`` over a 16-wide row: 6x slower). See :func:`lanes_unroll`."""
        dims = list(dims)
        for d in dims:
            if lanes and d == dims[-1]:
                self.w(f"#pragma GCC unroll {lanes_unroll(self.k.workgroup[d])}")
            self.w(f"for (int64_t tk_l{d} = 0; tk_l{d} < tk_nv{d}; ++tk_l{d})")
        self.w("{")

    def lid_expr(self) -> str:
        """The linear local index from the per-dimension ``tk_l<d>`` (last dimension fastest)."""
        lin = "tk_l0"
        for d in range(1, self.k.ndim):
            lin = f"({lin}) * {self.k.workgroup[d]} + tk_l{d}"
        return lin

    def item_geometry(self, dims) -> None:
        """The current work item's linear local index and positions, inside item loops over
        ``dims`` (the other dimensions' ``tk_l<d>`` are bound by enclosing loops)."""
        k = self.k
        wg = k.workgroup
        self.w(f"const tk_idx tk_lid = {self.lid_expr()}; const int64_t tk_ll = tk_lid; (void)tk_ll;")
        for d in range(k.ndim):
            self.w(f"const int64_t tk_p{d} = tk_gr{d} * {wg[d]} + tk_l{d};")

    def lane_items(self, mask, emit) -> None:
        """One loop over the group's valid work items (the last dimension innermost, bounds
        instead of a per-item range test), skipping items where ``mask`` is false. Inside a
        lanes piece of a multi-dimensional group the outer dimensions are already bound
        (:meth:`s_ItemLoop`): only the last one is a loop here."""
        k = self.k
        dims = range(k.ndim - 1 if self.lane_outer else 0, k.ndim)
        self.item_loop_head(dims, lanes=True)
        self.depth += 1
        self.item_geometry(dims)
        self.global_coords()
        saved = self.in_item, self.item_label
        self.in_item = True
        if self.plan.needs_done:        # returned in an earlier (item-outer) piece
            self.w("if (tk_done[tk_lid]) continue;")
        if mask:
            self.w(f"if (!({mask})) continue;")
        for fn in self.lane_stack:
            fn()
        self.last_line = None
        emit()
        self.in_item, self.item_label = saved
        self.depth -= 1
        self.w("}")

    def _written_outside(self, loop) -> set:
        """Locals read anywhere in the kernel outside ``loop`` (a loop variable's last value)."""
        out: set = set()

        def visit(stmts):
            for s in stmts:
                if s is loop or (isinstance(s, N.For) and s.var == loop.var):
                    continue    # (another loop over the same name assigns it before reading it)
                for e in N.stmt_exprs(s):
                    out.update(x.name for x in N.walk_expr(e) if isinstance(x, N.Var))
                if isinstance(s, N.Collective):
                    out.add(s.src)
                visit(getattr(s, "body", []) or [])
                visit(getattr(s, "orelse", []) or [])
        visit(self.k.body)
        return out

    def lanes_for(self, s: N.For, mask) -> None:
        """A loop hoisted out of the item loop. A uniform range is one group-level loop; a
        per-item range (``range(lid, n, WG)``) runs the largest trip count of the group with
        per-item trip counts as the mask, and no mask while every item is still running."""
        t = self.k.locals.get(s.var)
        ct = self.ctype(t) if t is not None else "int64_t"
        u = self.plan.group_vars
        n = self.fresh("l")
        tt = f"{n}_t"
        assigned = {v for x in N.walk_stmts(s.body) for v in defs(x)}
        wb = s.var in self._written_outside(s) and s.var not in u     # its last value is read later

        def trips(start, stop, step):
            up = f"({stop} > {start} ? ((uint64_t){stop} - (uint64_t){start} - 1u) / (uint64_t){step} + 1u : 0u)"
            down = (f"({start} > {stop} ? ((uint64_t){start} - (uint64_t){stop} - 1u) / "
                    f"((uint64_t)0 - (uint64_t){step}) + 1u : 0u)")
            if isinstance(s.step, N.Const):
                return up if s.step.value > 0 else down
            return f"({step} > 0 ? {up} : {down})"

        if all(is_uniform(e, u) for e in (s.start, s.stop, s.step)):
            self.w(f"{{ const {ct} {n}_s = {self.expr(s.start)}; const {ct} {n}_e = {self.expr(s.stop)}; "
                   f"const {ct} {n}_p = {self.expr(s.step)};")
            self.w(f"  const uint64_t {n}_n = {trips(f'{n}_s', f'{n}_e', f'{n}_p')};")
            pf = self.prefetch_plan(s, f"{n}_n")
            gs = self.lanes_stride_start(s, f"{n}_n", lambda at: f"({ct})((uint64_t){n}_s + ({at}) * (uint64_t){n}_p)",
                                         ct, tt)
            self.w(f"  for (uint64_t {tt} = 0; {tt} < {n}_n; ++{tt}) {{")
            self.depth += 1
            self.prefetch_step(pf)
            if gs is not None:
                self.stride_step(*gs)
            self.w(f"const {ct} {n}_v = ({ct})((uint64_t){n}_s + {tt} * (uint64_t){n}_p);")
            saved_lv = self.lane_vars.get(s.var, False)
            self.lane_vars[s.var] = None
            if s.var in u:
                self.w(f"{self.stored_var(s.var)} = {n}_v;")
                self.lanes_block(s.body, mask)
            else:
                self.with_lane_var(s.var, f"{n}_v", None, wb, lambda: self.lanes_block(s.body, mask))
            self._restore_lane_var(s.var, saved_lv)
            self.depth -= 1
            self.w("}}")
            return
        wg = _prod(self.k.workgroup)
        # start/step recomputed in every item loop when nothing in the body can change them
        # (keeps `lid + t * WG` affine for the compiler), else stored per item
        inline = all(not any(isinstance(x, (N.Load, N.Atomic, N.Call)) or
                             (isinstance(x, N.Var) and x.name in assigned) for x in N.walk_expr(e))
                     for e in (s.start, s.step))
        self.w(f"{{ uint64_t {n}_tr[{wg}]; uint64_t {n}_lo = UINT64_MAX, {n}_hi = 0;")
        if not inline:
            self.w(f"  {ct} {n}_st[{wg}], {n}_sp[{wg}];")

        def prologue():
            self.w(f"uint64_t {n}_c = 0;")
            self.w(f"if ({mask or 1}) {{")
            self.w(f"    const {ct} {n}_s = {self.expr(s.start)}; const {ct} {n}_e = {self.expr(s.stop)}; "
                   f"const {ct} {n}_p = {self.expr(s.step)};")
            self.w(f"    {n}_c = {trips(f'{n}_s', f'{n}_e', f'{n}_p')};")
            if not inline:
                self.w(f"    {n}_st[tk_lid] = {n}_s; {n}_sp[tk_lid] = {n}_p;")
            self.w(f"    {n}_lo = {n}_c < {n}_lo ? {n}_c : {n}_lo; {n}_hi = {n}_c > {n}_hi ? {n}_c : {n}_hi;")
            self.w("}")
            self.w(f"{n}_tr[tk_lid] = {n}_c;")
        self.lane_items(None, prologue)
        pf = self.prefetch_plan(s, f"{n}_hi")
        gs = None
        if inline:
            gs = self.lanes_stride_start(
                s, f"{n}_hi", lambda at: f"({ct})((uint64_t)({self.expr(s.start)}) + ({at}) * (uint64_t)({self.expr(s.step)}))",
                ct, tt)
        self.w(f"  for (uint64_t {tt} = 0; {tt} < {n}_hi; ++{tt}) {{")
        self.depth += 1
        self.prefetch_step(pf)
        if gs is not None:
            self.stride_step(*gs)
        self.w(f"const int {n}_full = {tt} < {n}_lo; (void){n}_full;")
        inner = f"{tt} < {n}_tr[tk_lid]"
        sub_mask = f"({n}_full || {inner})" if mask is None else inner
        if inline:
            value = lambda: f"({ct})((uint64_t)({self.expr(s.start)}) + {tt} * (uint64_t)({self.expr(s.step)}))"
        else:
            value = lambda: f"({ct})((uint64_t){n}_st[tk_lid] + {tt} * (uint64_t){n}_sp[tk_lid])"
        saved_lv = self.lane_vars.get(s.var, False)
        if inline:
            self.lane_vars[s.var] = (s.start, s.step)
        else:       # start and step stored per item: nothing known about the lanes
            self.lane_vars.pop(s.var, None)
        saved_full = self.lane_full
        self.lane_full = f"{n}_full" if mask is None and saved_full == "1" else None
        self.with_lane_var(s.var, f"{n}_v", (ct, value), wb, lambda: self.lanes_block(s.body, sub_mask))
        self.lane_full = saved_full
        self._restore_lane_var(s.var, saved_lv)
        self.depth -= 1
        self.w("}}")

    def _restore_lane_var(self, var, saved) -> None:
        if saved is False:
            self.lane_vars.pop(var, None)
        else:
            self.lane_vars[var] = saved

    @staticmethod
    def pend(a: N.ArrayInfo) -> str:
        """The pending partial cache line of streamed output ``a`` (see ``_STREAM``)."""
        return f"tk_pend_{mangle(a.name)}"

    def lane_streams(self, body: list) -> list:
        """Stores of a lanes run (plain statements, one loop over the lanes) that may stream:
        a write-only output (passes/streaming.py) at an address one element further per lane,
        stored by every lane (a top-level statement of a run whose lanes all run, see
        ``lane_full``) with nothing after it that could observe the delay."""
        k = self.k
        if not self.write_only or self.lane_full is None:
            return []
        out = []
        for s in body:
            if not (isinstance(s, N.Store) and s.array.name in self.write_only
                    and len(s.index) == s.array.ndim):
                continue
            coefs = [lane_coef(e, k.ndim, self.ranges, self.plan.group_vars, self.plan.remat,
                               self.lane_vars) for e in s.index]
            # a row of the group covers at least 4 cache lines, or whole lines (a 16-wide
            # tile of float32 is one line), which stream only where they are line-aligned
            # (see ``short_row``): a short misaligned row would be all partial lines
            row = k.workgroup[-1] * s.array.dtype.itemsize
            if coefs[-1] == 1 and all(c == 0 for c in coefs[:-1]) and (row >= 256 or row % 64 == 0):
                out.append(s)
        if out:
            first = next(i for i, s in enumerate(body) if s is out[0])
            if not unobservable_after(body[first + 1:], {s.array.name for s in out}):
                return []
        return out

    def lanes_streaming(self, body: list, mask, streams: list, decls=()) -> None:
        """A lanes run whose ``streams`` store into per-lane buffers, written to the outputs
        with streaming stores after the loop (one contiguous run of the group's valid lanes
        each), when the outputs are large and every lane runs; the plain loop otherwise."""
        k = self.k
        last = k.ndim - 1
        width = k.workgroup[last]
        self.stream_arrays.update(s.array.name for s in streams)
        on = "tk_on" + self.fresh("s")
        self.w("{")
        self.depth += 1
        self.w(f"const int {on} = tk_stream && ({self.lane_full});")
        for n, s in enumerate(streams):
            t = self.stype(s.array.dtype)
            self.w(f"{t} tk_stage{n}[{width}] __attribute__((aligned(64))); {t} *tk_out{n}, *restrict tk_dst{n};")
            self.w(f"int tk_on{n};")
        # the outputs' addresses at lane 0 of this row of the group
        self.w("{")
        self.depth += 1
        dims = range(k.ndim - 1 if self.lane_outer else 0, k.ndim)
        for d in dims:
            self.w(f"const int64_t tk_l{d} = 0;")
        self.item_geometry(dims)
        self.global_coords()
        saved = self.in_item
        self.in_item = True
        for fn in self.lane_stack:
            fn()
        for n, s in enumerate(streams):
            self.w(f"tk_out{n} = &{self.element(s.array, s.index)};")
            # a short row streams whole (all its lanes run) from a line's start, inline
            whole = (f" && tk_nv{last} == {width} && ((uintptr_t)tk_out{n} & 63) == 0"
                     if short_row(width, s.array) else "")
            self.w(f"tk_on{n} = {on}{whole};")
            self.w(f"tk_dst{n} = tk_on{n} ? tk_stage{n} : tk_out{n};")
        self.in_item = saved
        self.depth -= 1
        self.w("}")
        self.staged = {id(s): f"tk_dst{n}[tk_l{last}]" for n, s in enumerate(streams)}
        self.lane_items(mask, lambda: self.declared(decls, body))
        self.staged = {}
        for n, s in enumerate(streams):
            if short_row(width, s.array):
                self.w(f"if (tk_on{n}) tk_stream_lines((char *)tk_out{n}, (const char *)tk_stage{n}, "
                       f"{width * s.array.dtype.itemsize // 64});")
                continue
            self.w(f"if (tk_on{n}) tk_stream_bytes(&{self.pend(s.array)}, tk_out{n}, tk_stage{n}, "
                   f"tk_nv{last} * (int64_t)sizeof(tk_stage{n}[0]));")
        self.depth -= 1
        self.w("}")

    def declared(self, names, body) -> None:
        """``body`` inside an item loop, after declaring the item's own locals ``names``."""
        for v in names:
            self.w(f"{self.ctype(self.k.locals[v])} v_{mangle(v)};")
        self.stmts(body)

    def with_lane_var(self, var, cname, decl, write_back, emit) -> None:
        """Render ``emit`` with ``var`` read from ``cname`` (the body never assigns it, see
        :func:`lane_loop`); ``decl`` = (C type, value maker) declares it at the top of every
        item loop; ``write_back`` also stores it per item."""
        def prologue():
            if decl is not None:
                self.w(f"const {decl[0]} {cname} = {decl[1]()};")
            if write_back:
                self.w(f"{self.stored_var(var)} = {cname};")
        self.lane_stack.append(prologue)
        saved = self.var_over.get(var)
        self.var_over[var] = cname
        try:
            emit()
        finally:
            self.lane_stack.pop()
            if saved is None:
                self.var_over.pop(var, None)
            else:
                self.var_over[var] = saved

    def lanes_if(self, s: N.If, mask) -> None:
        """An ``if`` around hoisted loops: a uniform condition stays a group-level ``if``; a
        per-item one is evaluated once per item into a flag that joins the mask."""
        if is_uniform(s.cond, self.plan.group_vars) and not any(
                isinstance(x, N.Var) and x.name in self.var_over for x in N.walk_expr(s.cond)):
            self.w(f"if ({self.expr(s.cond)}) {{")
            self.depth += 1
            self.lanes_block(s.body, mask)
            self.depth -= 1
            if s.orelse:
                self.w("} else {")
                self.depth += 1
                self.lanes_block(s.orelse, mask)
                self.depth -= 1
            self.w("}")
            return
        c = self.fresh("c")
        self.w(f"{{ bool {c}[{_prod(self.k.workgroup)}];")
        self.lane_items(mask, lambda: self.w(f"{c}[tk_lid] = {self.expr(s.cond)};"))
        both = (lambda m: m if mask is None else f"({mask}) && {m}")
        saved_full, self.lane_full = self.lane_full, None
        self.lanes_block(s.body, both(f"{c}[tk_lid]"))
        if s.orelse:
            self.lanes_block(s.orelse, both(f"!{c}[tk_lid]"))
        self.lane_full = saved_full
        self.w("}")

    def s_Collective(self, s: N.Collective):
        if id(s) in self.scan_totals:
            self.total_from_scan(s, self.scan_totals[id(s)])
            return
        red = simd_reduction_op(s, self.k.fastmath)
        if red is not None and not self.plan.needs_done and (s.kind == "reduce" or self.k.ndim == 1):
            self.simd_collective(s, red)
            return
        t = self.ctype(s.ty)
        ident, comb = self.collective_parts(s)
        k, plan = self.k, self.plan
        src = f"v_{mangle(s.src)}" + ("[tk_lid]" if s.src in self.plan.item_vars else "")
        self.w(f"{{ {t} acc = ({t}){ident};")
        self.depth += 1
        self.item_loop_head(range(k.ndim))      # the valid items in local order
        self.depth -= 1
        self.w(f"    const tk_idx tk_lid = {self.lid_expr()};")
        if plan.needs_done:
            self.w("    if (tk_done[tk_lid]) continue;")
        self.w(f"    {t} x = {src};")
        dst = f"v_{mangle(s.dst)}"
        if s.kind == "reduce":
            self.w(f"    acc = {comb};")
            self.w("  }")
            if s.dst in self.plan.item_vars:
                self.w(f"  for (tk_idx tk_lid = 0; tk_lid < {_prod(k.workgroup)}; ++tk_lid) {dst}[tk_lid] = acc; }}")
            else:
                self.w(f"  {dst} = acc; }}")
        else:
            store = f"{dst}[tk_lid]" if s.dst in self.plan.item_vars else dst
            if s.kind == "scan":
                self.w(f"    acc = {comb}; {store} = acc;")
            else:
                self.w(f"    {store} = acc; acc = {comb};")
            self.w("  } }")

    def total_from_scan(self, s: N.Collective, scan: N.Collective) -> None:
        """``group_reduce(v, op)`` right after ``group_scan(v, op)`` (see :func:`scan_totals`):
        the group's last valid item's inclusive scan is the reduction (its exclusive scan
        combined with its own ``v``): the same chain of operations in the same order, so
        the same bits, without a second pass over the items."""
        t = self.ctype(s.ty)
        _, comb = self.collective_parts(s)
        k = self.k
        last = "(tk_nv0 - 1)"
        for d in range(1, k.ndim):
            last = f"({last}) * {k.workgroup[d]} + (tk_nv{d} - 1)"
        src = f"v_{mangle(s.src)}" + ("[tk_lid]" if s.src in self.plan.item_vars else "")
        dst = f"v_{mangle(s.dst)}"
        self.w(f"{{ const tk_idx tk_lid = {last}; /* group_reduce: the last item's group_scan */")
        self.w(f"  {t} acc = v_{mangle(scan.dst)}[tk_lid];")
        if scan.kind == "exscan":
            self.w(f"  {{ {t} x = {src}; acc = {comb}; }}")
        if s.dst in self.plan.item_vars:
            self.w(f"  for (tk_idx tk_i = 0; tk_i < {_prod(k.workgroup)}; ++tk_i) {dst}[tk_i] = acc; }}")
        else:
            self.w(f"  {dst} = acc; }}")

    def simd_collective(self, s: N.Collective, red: str) -> None:
        """A collective as an ``omp simd`` horizontal operation over the valid items (``tk_nv``
        per dimension, local order): a reduction (``reduction(op:acc)``, the innermost dimension
        vectorized) or, in 1-D groups, a scan (``reduction(inscan, op:acc)``). Only where the
        result cannot depend on the order (see :func:`simd_reduction_op`)."""
        t = self.ctype(s.ty)
        ident, comb = self.collective_parts(s)
        k = self.k
        wg = k.workgroup
        src = f"v_{mangle(s.src)}" + ("[tk_lid]" if s.src in self.plan.item_vars else "")
        dst = f"v_{mangle(s.dst)}"
        self.w(f"{{ {t} acc = ({t}){ident};")
        self.depth += 1
        for d in range(k.ndim - 1):
            self.w(f"for (int64_t tk_l{d} = 0; tk_l{d} < tk_nv{d}; ++tk_l{d})")
        last = k.ndim - 1
        lin = "tk_l0"
        for d in range(1, k.ndim):
            lin = f"({lin}) * {wg[d]} + tk_l{d}"
        scan = s.kind != "reduce"
        self.w("#ifdef TK_OMP_INSCAN" if scan else "#ifdef _OPENMP")
        self.w(f"#pragma omp simd reduction({'inscan, ' if scan else ''}{red}:acc)")
        self.w("#endif")
        self.w(f"for (int64_t tk_l{last} = 0; tk_l{last} < tk_nv{last}; ++tk_l{last}) {{")
        lid = f"const tk_idx tk_lid = {lin};"
        combine = f"    {{ {lid} {t} x = {src}; acc = {comb}; }}"
        store = f"    {{ {lid} {dst}[tk_lid] = acc; }}" if s.dst in self.plan.item_vars else f"    {dst} = acc;"
        if not scan:
            self.w(combine)
        else:           # OpenMP's inscan form: an input phase and a scan phase around the directive
            inclusive = s.kind == "scan"
            self.w(combine if inclusive else store)
            self.w("#ifdef TK_OMP_INSCAN")
            self.w(f"    #pragma omp scan {'inclusive' if inclusive else 'exclusive'}(acc)")
            self.w("#endif")
            self.w(store if inclusive else combine)
        self.w("}")
        if not scan:
            if s.dst in self.plan.item_vars:
                self.w(f"for (tk_idx tk_lid = 0; tk_lid < {_prod(wg)}; ++tk_lid) {dst}[tk_lid] = acc;")
            else:
                self.w(f"{dst} = acc;")
        self.depth -= 1
        self.w("}")

    def in_range_expr(self) -> str:
        k = self.k
        return " && ".join(f"(tk_gr{d} * {k.workgroup[d]} + tk_l{d}) < tk_n{d}" for d in range(k.ndim))

    # --- geometry ------------------------------------------------------------------------------

    def local_coords(self, lid: str, indent: str = "") -> None:
        wg = self.k.workgroup
        rem = lid
        for d in range(self.k.ndim):
            inner = _prod(wg[d + 1:])
            self.w(f"{indent}const int64_t tk_l{d} = ({rem}) / {inner} % {wg[d]};" if inner > 1
                   else f"{indent}const int64_t tk_l{d} = ({rem}) % {wg[d]};")
        self.w(f"{indent}const int64_t tk_ll = {lid}; (void)tk_ll;")

    def global_coords(self) -> None:
        """Absolute coordinates and the global linear index from the positions tk_p<d>."""
        k = self.k
        for d in range(k.ndim):
            if self.ranges == 2:
                self.w(f"const int64_t tk_g{d} = tk_s{d} + tk_p{d} * tk_st{d}; (void)tk_g{d};")
            elif self.ranges == 1:
                self.w(f"const int64_t tk_g{d} = tk_s{d} + tk_p{d}; (void)tk_g{d};")
            else:
                self.w(f"const int64_t tk_g{d} = tk_p{d}; (void)tk_g{d};")
        lin = "tk_p0"
        for d in range(1, k.ndim):
            lin = f"({lin}) * tk_n{d} + tk_p{d}"
        self.w(f"const int64_t tk_gl = {lin}; (void)tk_gl;")

    def unpack(self) -> None:
        """Geometry and arguments from the slot array."""
        k = self.k
        for d in range(k.ndim):
            self.w(f"const int64_t tk_s{d} = a[{3 * d}].i, tk_n{d} = a[{3 * d + 1}].i, "
                   f"tk_st{d} = a[{3 * d + 2}].i; (void)tk_s{d}; (void)tk_st{d};")
            self.w(f"const int64_t tk_ng{d} = (tk_n{d} + {k.workgroup[d] - 1}) / {k.workgroup[d]}; (void)tk_ng{d};")
        for p, slot in slot_layout(k):
            if p[0] == "array":
                a = p[1]
                name = f"a_{mangle(a.name)}"
                qual = "const " if a.const else ""
                restrict = " restrict" if a.const else ""
                self.w(f"{qual}{self.stype(a.dtype)} *{restrict} {name} = ({qual}{self.stype(a.dtype)} *)a[{slot}].p;")
                for d in range(a.ndim):
                    self.w(f"const tk_idx {name}_sh{d} = (tk_idx)a[{slot + 1 + d}].i; (void){name}_sh{d};")
                    if not a.contiguous:
                        self.w(f"const tk_idx {name}_st{d} = (tk_idx)a[{slot + 1 + a.ndim + d}].i;")
            else:
                _, name, ty = p
                field = "f" if ty.dtype.is_float else "i"
                self.w(f"const {self.ctype(ty)} {self.arg(name)} = ({self.ctype(ty)})a[{slot}].{field};")

    def declare_locals(self, names, per_item: bool = False) -> None:
        size = f"[{_prod(self.k.workgroup)}]" if per_item else ""
        for v in sorted(names):
            t = self.k.locals.get(v)
            if t is not None:
                self.w(f"{self.ctype(t)} v_{mangle(v)}{size};")

    # --- whole translation unit ---------------------------------------------------------------

    def render(self) -> str:
        k = self.k
        body_lines = self.render_flat() if self.plan is None else self.render_grouped()
        # 64-bit addressing even when every extent fits in 32 bits: on x86-64 and AArch64
        # it is free, and GCC does not vectorize loops whose int64 indices are narrowed.
        fm = ["/* fastmath: compiled with " + " ".join(FASTMATH_CFLAGS) + " */"] if k.fastmath else []
        head = fm + [fastmath_header() if k.fastmath else _HEADER, "typedef int64_t tk_idx;",
                _prelude(),
                portable_helpers(), _c_helpers(), _BYTEDOT if self.byte_dots else "",
                _HALVES if self.half_loads else "", _BYTE_RUNS if self.byte_runs else "", "" if k.fastmath else _EXP_F32,
                _DEBUG if k.debug else "", (_STREAM + (_LUT16 if self.lut16 else "")) if self.stream_arrays else "", _DIV_RUN if self.row_divs else "",
                (_PREFETCH if self.pf_rows else "") + (_GRIDSTRIDE if self.gridstride else ""),
                (_SHUFFLE if self.tr_sizes else "") + "".join(tile_transpose_helper(n) for n in sorted(self.tr_sizes))
                + "".join(tile_transpose_helper(n, True) for n in sorted(self.tr_streams))]
        return "\n".join(head) + "\n" + "\n".join(body_lines) + "\n"

    def render_flat(self) -> list:
        k = self.k
        self.lines = []
        self.w("")
        self.depth = 0
        self.w("static void tk_chunk(const tk_slot *a, int64_t lo, int64_t hi, int tk_t) {")
        self.depth = 1
        self.unpack()
        sums = self.item_sums()
        for n, (_, arr) in enumerate(sums):
            self.w(f"{self.stype(arr.dtype)} tk_sum{n} = 0;")
        last = k.ndim - 1
        # the first row's coordinates by division, the next rows' by counting (short rows
        # would otherwise pay a few 64-bit divisions each)
        self.w("if (lo >= hi) return;")
        peel = self.peel_bounds()
        # a peeled row (three loops) or per-item sums keep plain stores
        streams = [] if peel is not None or sums else streamed_stores(k, self.ranges)
        self.stream_arrays.update(s.array.name for s, _ in streams)
        self.loop_streams = {} if streams or peel is not None or sums else loop_streams(k)
        if self.loop_streams:
            looped = {s.array.name: s.array for picked in self.loop_streams.values() for s, _ in picked}
            self.stream_arrays.update(looped)
            size = self.streamed_bytes(lambda n, d: f"a_{mangle(n)}_sh{d}")
            self.w(f"const int tk_stream = {size} >= tk_stream_threshold();")
            for a in looped.values():
                self.w(f"tk_pend {self.pend(a)}; {self.pend(a)}.have = 0;")
        if streams:
            per_item = sum(s.array.dtype.itemsize for s, _ in streams)
            total = " * ".join(f"tk_n{d}" for d in range(k.ndim))
            narrow = min(s.array.dtype.itemsize for s, _ in streams)
            # large outputs only (small ones stay in cache for the next kernel), rows of at
            # least a few lines (else most stores would be the partial lines at the ends)
            self.w(f"const int tk_stream = ({total}) * {per_item} >= tk_stream_threshold()"
                   f" && tk_n{last} * {narrow} >= 256;")
            for s, _ in streams:
                self.w(f"tk_pend {self.pend(s.array)}; {self.pend(s.array)}.have = 0;")
        self.w("int64_t q = lo;")
        self.w(f"int64_t tk_row = lo / tk_n{last}, c0 = lo - tk_row * tk_n{last};")
        if k.ndim == 3:
            self.w("int64_t tk_r0 = tk_row / tk_n1, tk_r1 = tk_row % tk_n1;")
        self.w("while (q < hi) {")
        self.depth += 1
        self.w(f"const int64_t c1 = (hi - q) < (tk_n{last} - c0) ? c0 + (hi - q) : tk_n{last};")
        if k.ndim == 3:
            self.w("const int64_t tk_p0 = tk_r0, tk_p1 = tk_r1;")
        elif k.ndim == 2:
            self.w("const int64_t tk_p0 = tk_row;")
        self.hoist_row_loads()
        if streams:
            self.flat_streaming(streams)
        elif peel is None:
            self.item_loop("c0", "c1", k.body, "tk_next", sums)
        else:               # the row split at the If's bounds: each loop runs one branch
            lo, hi = peel
            start = f"tk_s{last}" if self.ranges == 1 else "0"
            a, b = f"{lo} - {start}", f"{hi} - {start}"        # positions, clipped to the row's part
            self.w(f"const int64_t tk_pa = {a} < c0 ? c0 : ({a} > c1 ? c1 : {a});")
            self.w(f"const int64_t tk_pb = {b} < tk_pa ? tk_pa : ({b} > c1 ? c1 : {b});")
            self.item_loop("c0", "tk_pa", k.body[0].orelse, "tk_next", sums)
            self.item_loop("tk_pa", "tk_pb", k.body[0].body, "tk_next_in", sums)
            self.item_loop("tk_pb", "c1", k.body[0].orelse, "tk_next_hi", sums)
        self.w("q += c1 - c0;")
        self.w("c0 = 0;")
        if k.ndim == 3:
            self.w("if (++tk_r1 == tk_n1) { tk_r1 = 0; ++tk_r0; }")
        elif k.ndim == 2:
            self.w("++tk_row;")
        self.depth -= 1
        self.w("}")
        for n, (_, arr) in enumerate(sums):
            self.w(f"a_{mangle(arr.name)}[tk_t] = tk_sum{n};")
        if streams or self.loop_streams:
            flush = " ".join(f"tk_pend_flush(&tk_pend_{mangle(n)});" for n in sorted(self.stream_arrays))
            self.w(f"if (tk_stream) {{ {flush} tk_stream_fence(); }}")
        self.depth = 0
        self.w("}")
        self.fallback_pool("tk_chunk(w->a, w->total * w->t / w->nt, w->total * (w->t + 1) / w->nt, w->t);",
                           "tk_parallel_chunks")
        total = " * ".join(f"a[{3 * d + 1}].i" for d in range(k.ndim))
        self.w("void tk_kernel(const tk_slot *a, int nthreads) {")
        self.w(f"    const int64_t total = {total};")
        self.w(f"    if (nthreads <= 1 || total < {serial_cutoff(k)}) {{ tk_chunk(a, 0, total, 0); return; }}")
        self.w("#ifdef _OPENMP")
        self.w("    #pragma omp parallel num_threads(nthreads)")
        self.w("    {")
        self.w("        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();")
        self.w("        tk_chunk(a, total * t / nt, total * (t + 1) / nt, (int)t);")
        self.w("    }")
        self.w("#else")
        self.w("    tk_parallel_chunks(a, total, nthreads);")
        self.w("#endif")
        self.w("}")
        return self.lines

    def hoist_row_loads(self) -> None:
        """The row's loads that are the same for all its items (passes/rowdiv.py: row_loads),
        done once before its item loop (at its first position, ``c0``; the row has at least one
        item); the items read ``tk_rl<N>``."""
        if not self.row_loads:
            return
        last = self.k.ndim - 1
        for n, (_, load, _) in enumerate(self.row_loads):
            self.w(f"{self.ctype(load.ty)} tk_rl{n};")
        self.w("{")
        self.depth += 1
        self.w(f"const int64_t tk_p{last} = c0; (void)tk_p{last};")
        self.global_coords()
        for n, (_, load, hoistable) in enumerate(self.row_loads):
            self.w(f"tk_rl{n} = {self.expr(hoistable)};")
            self.load_values[id(load)] = f"tk_rl{n}"
        self.depth -= 1
        self.w("}")

    def prefetch_start(self) -> None:
        """At the start of a group (flat: item): point the cursors ``tk_pf<N>`` at the rows the
        next one reads (passes/prefetch.py), or at nothing when the row is outside the array,
        the array is small (``tk_pf_min_bytes``) or the row shorter than 8 lines."""
        body = self.k.body if self.plan is None else self.plan.body
        self.pf_left = sum(1 for s in N.walk_stmts(body) if isinstance(s, N.For) and self.prefetch_steps(s))
        self.pf_first = True
        if self.pf_left < 2:        # one pass over the row: nothing computes on a row in cache
            self.pf_rows, self.pf_left = [], 0
            return
        for n, r in enumerate(self.pf_rows):
            a, size = r.array, r.array.dtype.itemsize
            last = a.ndim - 1
            ty, loc = r.lead[0].ty, r.lead[0].loc
            idx = [f"(tk_idx)({self.expr(i)})" for i in r.lead]
            inside = " && ".join(f"{i} >= 0 && {i} < {self.shape(a, d)}" for d, i in enumerate(idx))
            total = " * ".join(self.shape(a, d) for d in range(a.ndim))
            on = f"({total}) * {size} >= tk_pf_min_bytes() && {self.shape(a, last)} * {size} >= 512 && {inside}"
            end = N.BinOp(ty, loc, "-", N.Shape(ty, loc, a, last), N.Const(ty, loc, 1))
            first = self.element(a, r.lead + [N.Const(ty, loc, 0)])
            final = self.element(a, r.lead + [end])
            self.w(f"tk_pf tk_pf{n}; {{ const int tk_on = {on};")
            self.w(f"  tk_pf_row(&tk_pf{n}, tk_on, tk_on ? (const void *)&{first} : 0, "
                   f"tk_on ? (const void *)&{final} : 0, {size}); }}")

    def prefetch_steps(self, s: N.For) -> bool:
        """Whether loop ``s`` steps the prefetch cursors: it reads one of their arrays and holds
        no loop that does; a flat kernel's loop only when it holds a loop (the vectorized one:
        a prefetch inside that would stop GCC from vectorizing it)."""
        if not self.pf_rows or not reads_rows(s.body, self.pf_rows):
            return False
        if self.plan is None and id(s) in self.loop_streams:
            return True         # its block loop holds the vectorized loop
        inner = [t for t in N.walk_stmts(s.body) if isinstance(t, (N.For, N.While))]
        if self.plan is None:
            return bool(inner) and not any(has_loop(t.body) for t in inner)
        return not any(isinstance(t, N.For) and reads_rows(t.body, self.pf_rows) for t in inner)

    def prefetch_plan(self, s: N.For, trips: str) -> bool:
        """Before a loop of ``trips`` iterations: if it steps the cursors, give it its share of
        the rest of the rows. The first loop over the row does not prefetch (it is the one that
        reads the row from DRAM; prefetching the next row there slowed a one-pass row sum by
        a third); the later ones, which compute on the row in cache, share the next row evenly."""
        if self.pf_left < 1 or not self.prefetch_steps(s):
            return False
        self.pf_left -= 1
        if self.pf_first:           # the pass that waits for DRAM: prefetching there competes with it
            self.pf_first = False
            return False
        left = max(1, self.pf_left + 1)
        for n in range(len(self.pf_rows)):
            self.w(f"  tk_pf_plan(&tk_pf{n}, {trips}, {left});")
        return True

    def prefetch_step(self, on: bool) -> None:
        if on:
            self.w(" ".join(f"tk_pf_step(&tk_pf{n});" for n in range(len(self.pf_rows))))

    def loop_started(self, s: N.For, trips: str):
        return self.prefetch_plan(s, trips) if self.plan is None else False

    def loop_iteration(self, state) -> None:
        self.prefetch_step(state)

    # --- grid-stride prefetch (passes/gridstride.py) -------------------------------------

    def address_at(self, s: N.For, value: str, loads: list, ct: str) -> list:
        """C pointers to the elements ``loads`` read when the variable of loop ``s`` is
        ``value`` (C)."""
        name = self.fresh("gsv")
        self.w(f"const {ct} {name} = {value}; (void){name};")
        saved = self.var_over.get(s.var)
        self.var_over[s.var] = name
        try:
            return [f"(const void *)&{self.element(e.array, e.index)}" for e in loads]
        finally:
            if saved is None:
                self.var_over.pop(s.var, None)
            else:
                self.var_over[s.var] = saved

    def stride_step(self, s, loads, g, k, trips, ct, value, lanes) -> None:
        """The top of an iteration of a hoisted loop: fetch its reads ``{g}_d`` iterations
        ahead, from the first to the last valid lane (``lanes``: their C values)."""
        self.w(f"if ({g}_d && {k} + {g}_d < {trips}) {{")
        self.depth += 1
        for i, lane in enumerate(lanes):
            self.at_lane(lane, lambda: self.address_at(s, value(f"{k} + {g}_d"), loads, ct), f"{g}_p{i}")
        for r in range(len(loads)):
            self.w(f"if ({g}_on[{r}]) tk_gs_fetch({g}_p0[{r}], {g}_p1[{r}]);")
        self.depth -= 1
        self.w("}")

    def at_lane(self, lane: str, addresses, out: str) -> None:
        """``const void *out[]`` = the pointers ``addresses()`` renders for the work item whose
        last local coordinate is ``lane`` (C), the outer ones bound by enclosing item loops of
        a lanes piece, else 0 (lanes shape, group level)."""
        k = self.k
        dims = range(k.ndim - 1 if self.lane_outer else 0, k.ndim)
        self.w(f"const void *{out}[{MAX_READS}];")
        self.w("{")
        self.depth += 1
        for d in dims:
            self.w(f"const int64_t tk_l{d} = {lane if d == k.ndim - 1 else 0};")
        self.item_geometry(dims)
        self.global_coords()
        saved = self.in_item
        self.in_item = True
        ptrs = addresses()
        self.in_item = saved
        for r, p in enumerate(ptrs):
            self.w(f"{out}[{r}] = {p};")
        self.depth -= 1
        self.w("}")

    def lanes_stride_start(self, s: N.For, trips: str, value, ct: str, k: str):
        """Before a hoisted loop of a lanes piece: which of its reads stride far, judged from
        the first valid lane's addresses at iterations 0 and 1 and the span of the group's
        lanes (first to last) at iteration 0; ``value(t)``: the loop variable's C value at
        iteration ``t`` in a lane's context."""
        plan = self.plan
        fixed = lambda name: name not in self.var_over and (
            name in plan.remat or name in plan.group_vars or name in plan.item_vars)
        loads = [] if self.k.debug else strided_reads(s, fixed, self.gs_consts)
        bounds = [x.name for e in (s.start, s.step) for x in N.walk_expr(e) if isinstance(x, N.Var)]
        if not loads or not all(fixed(v) for v in bounds):     # (an enclosing hoisted loop's variable)
            return None
        self.gridstride = True
        g = self.fresh("gs")
        last = f"tk_nv{self.k.ndim - 1} - 1"
        self.w(f"int {g}_on[{len(loads)}]; uint64_t {g}_d = 0;")
        self.w("{")
        self.depth += 1
        self.at_lane("0", lambda: self.address_at(s, value("0"), loads, ct), f"{g}_a")
        self.at_lane("0", lambda: self.address_at(s, value("1"), loads, ct), f"{g}_b")
        self.at_lane(last, lambda: self.address_at(s, value("0"), loads, ct), f"{g}_c")
        for r, e in enumerate(loads):
            size = e.array.dtype.itemsize
            self.w(f"const int64_t {g}_s{r} = tk_gs_span({g}_a[{r}], {g}_c[{r}], {size});")
            self.w(f"{g}_on[{r}] = {trips} > 4 && tk_gs_far({g}_a[{r}], {g}_b[{r}], {g}_s{r}); "
                   f"{g}_d += {g}_on[{r}] ? {g}_s{r} : 0;")
        self.depth -= 1
        self.w(f"}} {g}_d = {g}_d ? tk_gs_dist({g}_d) : 0;")
        return (s, loads, g, k, trips, ct, value, ("0", last))

    def peel_bounds(self):
        """(lo, hi) in C of ``Kernel.peel_last`` when the body is its one If and the loop can
        be split there (unit steps, no per-item sums, no group indices), else None."""
        k = self.k
        if k.peel_last is None or self.ranges == 2 or self.item_sums() or "groupindex" in k.uses \
                or len(k.body) != 1 or not isinstance(k.body[0], N.If):
            return None
        return tuple(f"({self.expr(e)})" for e in k.peel_last)

    def item_loop(self, c0: str, c1: str, body: list, label: str, sums) -> None:
        """The loop over positions ``c0 <= tk_pl < c1`` of one row, running ``body``."""
        self.next_label = label
        self.division_runs(c0, c1, lambda r0, r1: self._item_loop(r0, r1, body, label, sums))
        self.next_label = "tk_next"

    def _item_loop(self, c0: str, c1: str, body: list, label: str, sums) -> None:
        if sums and not self.k.debug:    # the sums' order may change: the loop still vectorizes
            self.w("#ifdef _OPENMP")
            self.w(f"#pragma omp simd reduction(+:{', '.join(f'tk_sum{n}' for n in range(len(sums)))})")
            self.w("#endif")
        self.w(f"for (tk_idx tk_pl = (tk_idx){c0}; tk_pl < (tk_idx){c1}; ++tk_pl) {{")
        self.depth += 1
        self.flat_item(body)
        self.w(f"{label}: ;")
        for n, (var, _) in enumerate(sums):
            self.w(f"tk_sum{n} += {self.var(var)};")
        self.depth -= 1
        self.w("}")

    def division_runs(self, c0: str, c1: str, emit) -> None:
        """Positions ``c0 <= tk_pl < c1`` of a row: ``emit(start, end)`` renders the item loop
        over a range. With row divisions (passes/rowdiv.py) the row is split into runs over
        which every quotient stays the same: each run computes its quotients and remainders
        once (the same helpers, at the run's first position), and the item loop reads them
        (a remainder plus the position within the run), so it has no division."""
        if not self.row_divs:
            emit(c0, c1)
            return
        last = self.k.ndim - 1
        self.w(f"for (tk_idx tk_ds = (tk_idx)({c0}), tk_de; tk_ds < (tk_idx)({c1}); tk_ds = tk_de) {{")
        self.depth += 1
        self.w(f"tk_de = (tk_idx)({c1});")
        self.w("int64_t " + ", ".join(f"tk_dq{n}, tk_dr{n}" for n in range(len(self.row_divs))) + ";")
        self.w("{")
        self.depth += 1
        self.w(f"const int64_t tk_p{last} = tk_ds;")
        self.global_coords()
        for n, d in enumerate(self.row_divs):
            self.w(f"const int64_t tk_da{n} = {self.expr(d.a)}, tk_db{n} = {self.expr(d.b)};")
            self.w(f"tk_dq{n} = tk_floordiv_i64(tk_da{n}, tk_db{n}); tk_dr{n} = tk_mod_i64(tk_da{n}, tk_db{n});")
            if d.step:
                self.w(f"tk_de = tk_div_run(tk_ds, tk_de, tk_da{n}, tk_db{n}, tk_dr{n});")
        self.depth -= 1
        self.w("}")
        for n, d in enumerate(self.row_divs):
            rem = f"(tk_dr{n} + (int64_t)(tk_pl - tk_ds))" if d.step else f"tk_dr{n}"
            for e in d.ops:
                self.div_values[id(e)] = f"tk_dq{n}" if e.op == "//" else rem
        emit("tk_ds", "tk_de")
        self.div_values = {}
        self.depth -= 1
        self.w("}")

    def flat_item(self, body: list) -> None:
        """One work item of the flat loop (position ``tk_pl`` along the last dimension) running
        ``body``."""
        k = self.k
        self.w(f"const int64_t tk_p{k.ndim - 1} = tk_pl;")
        self.global_coords()
        if "groupindex" in k.uses:
            for d in range(k.ndim):
                self.w(f"const int64_t tk_gr{d} = tk_p{d} / {k.workgroup[d]}, tk_l{d} = tk_p{d} % {k.workgroup[d]};"
                       f" (void)tk_gr{d}; (void)tk_l{d};")
            ll, grl = "tk_l0", "tk_gr0"
            for d in range(1, k.ndim):
                ll = f"({ll}) * {k.workgroup[d]} + tk_l{d}"
                grl = f"({grl}) * tk_ng{d} + tk_gr{d}"
            self.w(f"const int64_t tk_ll = {ll}, tk_grl = {grl}; (void)tk_ll; (void)tk_grl;")
        self.declare_locals(k.locals)
        self.prefetch_start()
        self.last_line = None
        self.stmts(body)

    def flat_streaming(self, streams: list) -> None:
        """The row's items ``c0 <= tk_pl < c1`` in blocks. Each of the ``streams``
        (passes/streaming.py) stores through a pointer chosen per block: for a large output
        (``tk_stream``) a buffer in L1, then written to the output with streaming stores, else
        the output itself, so that there is one copy of the loop (compile time). A kernel that
        only copies or converts (``copy_sources``) does each block straight from
        its source run: a copy streams from it (the items run only when not streaming), a
        conversion rounds it with ``tk_f16_block`` and a byte-indexed table lookup runs
        ``tk_lut16_block`` (no item loop at all)."""
        k = self.k
        last = k.ndim - 1
        itemsize = max(s.array.dtype.itemsize for s, _ in streams)
        block = STREAM_BLOCK_BYTES // itemsize
        copies = copy_sources(k, self.ranges, streams, frozenset(v for v, _, _ in self.row_loads))
        run = STREAM_RUN_BYTES // itemsize if staged_runs(copies) else block
        self.staged = {id(s): f"tk_dst{n}[tk_pl - tk_b]" for n, (s, _) in enumerate(streams)}
        # float16 outputs: the items store float32 values into tk_f32_<n> (a plain loop), which
        # tk_f16_block then rounds (F16C's vector conversion where the target has it)
        halves = {n: v for n, (s, _) in enumerate(streams) if (v := self.half_source(s)) is not None}
        for n, (s, _) in enumerate(streams):
            if copies is None or copies[id(s)][1] != "copy":
                self.w(f"{self.stype(s.array.dtype)} tk_stage{n}[{block}] __attribute__((aligned(64)));")
            if n in halves and copies is None:
                self.w(f"float tk_f32_{n}[{block}] __attribute__((aligned(64)));")
                self.staged[id(s)] = (f"tk_f32_{n}[tk_pl - tk_b]", halves[n])
        if run != block:        # rows shorter than a block keep one block per row (see staged_runs)
            self.w(f"for (tk_idx tk_b = (tk_idx)c0, tk_bs = tk_stream && tk_n{last} >= {block} ? {run} : {block}; "
                   "tk_b < (tk_idx)c1; tk_b += tk_bs) {")
            self.depth += 1
            self.w("const tk_idx tk_be = (tk_idx)c1 - tk_b < tk_bs ? (tk_idx)c1 : tk_b + tk_bs;")
        else:
            self.w(f"for (tk_idx tk_b = (tk_idx)c0; tk_b < (tk_idx)c1; tk_b += {block}) {{")
            self.depth += 1
            self.w(f"const tk_idx tk_be = (tk_idx)c1 - tk_b < {block} ? (tk_idx)c1 : tk_b + {block};")
        for n, (s, index) in enumerate(streams):
            self.w(f"{self.stype(s.array.dtype)} *tk_out{n}, *restrict tk_dst{n};")
            if copies is not None:
                self.w(f"const {self.stype(copies[id(s)][0].array.dtype)} *tk_src{n};")
        self.w("{")
        self.depth += 1
        self.w(f"const int64_t tk_p{last} = tk_b;")
        self.global_coords()
        for n, (s, index) in enumerate(streams):
            self.w(f"tk_out{n} = &{self.element(s.array, index)};")
            if copies is None or copies[id(s)][1] != "copy":
                self.w(f"tk_dst{n} = tk_stream ? tk_stage{n} : tk_out{n};")
            else:
                self.w(f"tk_dst{n} = tk_out{n};")
            if copies is not None:
                src = copies[id(s)][0]
                self.w(f"tk_src{n} = &{self.element(src.array, src.index)};")
        self.depth -= 1
        self.w("}")
        nbytes = "(int64_t)(tk_be - tk_b) * (int64_t)sizeof(*tk_out{n})"
        if copies is not None:
            raw = [n for n, (s, _) in enumerate(streams) if copies[id(s)][1] == "copy"]
            for n, (s, _) in enumerate(streams):
                if n not in raw:
                    self.w(self.converted_block(n, copies[id(s)]))
            self.w("if (tk_stream) {")
            for n, (s, _) in enumerate(streams):
                src = f"tk_src{n}" if n in raw else f"tk_stage{n}"
                self.w(f"    tk_stream_bytes(&{self.pend(s.array)}, tk_out{n}, {src}, {nbytes.format(n=n)});")
            self.w("    continue;")
            self.w("}")
            if raw:         # all copies (copy_sources): the items store into the output
                self.division_runs("tk_b", "tk_be", self._streamed_items)
        else:
            self.division_runs("tk_b", "tk_be", self._streamed_items)
            for n in halves:
                self.w(f"tk_f16_block(tk_dst{n}, tk_f32_{n}, (int64_t)(tk_be - tk_b));")
            for n, (s, _) in enumerate(streams):
                self.w(f"if (tk_stream) tk_stream_bytes(&{self.pend(s.array)}, tk_out{n}, tk_stage{n}, "
                       f"{nbytes.format(n=n)});")
        self.depth -= 1
        self.w("}")
        self.staged = {}

    LOOP_BLOCK = 1024
    """Bytes of output per block of a loop whose stores stream (``loop_streams``): a staging
    buffer in L1, and one step of the next-row prefetch per block."""

    def s_For(self, s):
        if self.plan is not None or id(s) not in self.loop_streams:
            return super().s_For(s)
        self.streamed_loop(s, self.loop_streams[id(s)])

    def streamed_loop(self, s: N.For, streams: list) -> None:
        """A flat kernel's ``range`` loop of step 1 whose ``streams`` (passes/streaming.py:
        ``loop_streams``) write consecutive elements per iteration, in blocks of
        ``LOOP_BLOCK`` bytes: each stream stores through a pointer chosen per block, a
        buffer in L1 that ``tk_stream_bytes`` then writes with non-temporal stores (a large
        output, ``tk_stream``, and a run of at least 256 bytes) or the output itself. The
        block loop holds the loop the C compiler vectorizes, so it steps the next-row
        prefetch cursors (one step per block)."""
        t = self.k.locals.get(s.var)
        ct = self.ctype(t) if t is not None else "int64_t"
        start, stop, n, b, e, k = (self.fresh(x) for x in ("start", "stop", "trips", "kb", "ke", "k"))
        block = self.LOOP_BLOCK // max(st.array.dtype.itemsize for st, _ in streams)
        narrow = min(st.array.dtype.itemsize for st, _ in streams)
        self.w(f"{{ const {ct} {start} = {self.expr(s.start)}; const {ct} {stop} = {self.expr(s.stop)};")
        self.w(f"  const uint64_t {n} = {stop} > {start} ? (uint64_t){stop} - (uint64_t){start} : 0u;")
        self.w(f"  const int tk_lon = tk_stream && {n} * {narrow} >= 256;")
        for i, (st, _) in enumerate(streams):
            self.w(f"  {self.stype(st.array.dtype)} tk_lstage{i}[{block}] __attribute__((aligned(64)));")
        # the prefetch cursors step LOOP_BLOCK / 256 times per block (each step at most TK_PF_PER lines),
        # as often as a loop over 256 bytes of the row would
        steps = self.LOOP_BLOCK // 256
        hook = self.loop_started(s, f"(({n} + {block - 1}) / {block} * {steps})")
        self.w(f"  for (uint64_t {b} = 0; {b} < {n}; {b} += {block}) {{")
        self.depth += 1
        for _ in range(steps if hook else 0):
            self.loop_iteration(hook)
        self.w(f"const uint64_t {e} = {n} - {b} < {block} ? {n} : {b} + {block};")
        for i, (st, index) in enumerate(streams):
            self.w(f"{self.stype(st.array.dtype)} *tk_lout{i}, *restrict tk_ldst{i};")
        self.w(f"{self.var(s.var)} = ({ct})((uint64_t){start} + {b});")
        for i, (st, index) in enumerate(streams):
            self.w(f"tk_lout{i} = &{self.element(st.array, index)};")
            self.w(f"tk_ldst{i} = tk_lon ? tk_lstage{i} : tk_lout{i};")
        saved = self.staged
        self.staged = {**saved, **{id(st): f"tk_ldst{i}[{k} - {b}]" for i, (st, _) in enumerate(streams)}}
        self.w(f"for (uint64_t {k} = {b}; {k} < {e}; ++{k}) {{")
        self.depth += 1
        self.w(f"{self.var(s.var)} = ({ct})((uint64_t){start} + {k});")
        self.depth -= 1
        self.block(s.body)
        self.w("}")
        self.staged = saved
        for i, (st, _) in enumerate(streams):
            self.w(f"if (tk_lon) tk_stream_bytes(&{self.pend(st.array)}, tk_lout{i}, tk_lstage{i}, "
                   f"(int64_t)({e} - {b}) * (int64_t)sizeof(tk_lstage{i}[0]));")
        self.depth -= 1
        self.w("}}")

    def converted_block(self, n: int, copy: tuple) -> str:
        """The C statement converting block ``n``'s source run into ``tk_dst<n>`` for a
        ``copy_sources`` entry of kind ``"f16"`` (``tk_f16_block``) or ``"lut16"``
        (``tk_lut16_block`` with the table's pointer and length)."""
        _, kind, table = copy
        count = "(int64_t)(tk_be - tk_b)"
        if kind == "f16":
            return f"tk_f16_block(tk_dst{n}, tk_src{n}, {count});"
        t = self.array_ptr(table)
        self.lut16 = True
        return (f"tk_lut16_block((uint16_t *)tk_dst{n}, (const uint8_t *)tk_src{n}, (const uint16_t *){t}, "
                f"(int64_t){t}_sh0, {count});")

    def half_source(self, store) -> N.Expr | None:
        """The expression whose value, converted to float32, rounds to the float16 that
        ``store`` (into a float16 array) writes, or None: the value before the frontend's cast to float16 (an integer or
        float32 value converted to float32 first, as ``narrow_bits`` does), or a float16
        value itself (exact in float32); None for a float64 value (rounded once, directly)."""
        if store.array.dtype.name != "float16":
            return None
        v = store.value
        if isinstance(v, N.Cast) and v.ty.dtype == store.array.dtype:
            v = v.a
        if v.ty.dtype.name == "float64":
            return None
        return v

    def _streamed_items(self, c0: str, c1: str) -> None:
        self.w(f"for (tk_idx tk_pl = {c0}; tk_pl < {c1}; ++tk_pl) {{")
        self.depth += 1
        self.flat_item(self.k.body)
        self.w("tk_next: ;")
        self.depth -= 1
        self.w("}")

    def streamed_bytes(self, extent) -> str:
        """C expression: the bytes of the arrays the grouped kernel streams (the run-time test
        of streaming, against ``tk_stream_threshold()``), ``extent(name, d)`` giving an array's
        extent along dimension ``d``."""
        arrays = {p[1].name: p[1] for p in self.k.params if p[0] == "array"}
        return " + ".join(f"{' * '.join(extent(n, d) for d in range(arrays[n].ndim))} * {arrays[n].dtype.itemsize}"
                          for n in sorted(self.stream_arrays))

    def grouped_stream_test(self, size: str) -> str:
        """C test whether a grouped launch whose streamed arrays are ``size`` bytes streams:
        against ``tk_stream_threshold()``, or half of it for a kernel that then walks its
        groups row-major (passes/grouporder.py: no loop, so no group re-reads another's data;
        its tile rows, written with ordinary stores, are single lines scattered over the
        output's rows). Measured idle, bench_llm's 64 MiB transpose (32 MiB - 7 KiB of
        output): 4.2-4.4 ms plain, 1.4 ms streamed row-major; flat kernels keep the whole
        threshold (a 64 MiB 3-D stencil's forward ran 1.4x slower streamed, docs/cpu.md)."""
        half = " / 2" if rows_first_when_streamed(self.k) else ""
        return f"{size} >= tk_stream_threshold(){half}"

    def render_grouped(self) -> list:
        k, plan = self.k, self.plan
        self.lines = []
        self.depth = 0
        wg = k.workgroup
        # The group's body takes its valid work items per dimension (tk_nv<d>; a partial group
        # at the end of the ndrange has fewer) as parameters and is inlined twice: full groups
        # call it with the group size as constants, so item loops have compile-time trip
        # counts (fully vectorized, no remainder loops, a tile's accumulators in registers).
        # The group's coordinates come as parameters too (the caller walks them without a
        # division per group: see group_walk).
        nv_params = ", ".join(f"int64_t tk_nv{d}" for d in range(k.ndim))
        gr_params = ", ".join(f"int64_t tk_gr{d}" for d in range(k.ndim))
        self.w("static inline __attribute__((always_inline)) void tk_group_body(const tk_slot *a, int64_t g, "
               f"{gr_params}, {nv_params}) {{")
        self.depth = 1
        for d in range(k.ndim):
            self.w(f"(void)tk_nv{d}; (void)tk_gr{d};")
        self.unpack()
        flag_at = len(self.lines)
        self.w("const int64_t tk_grl = g; (void)tk_grl;")
        self.w("const int64_t tk_lid0 = 0; (void)tk_lid0;")
        # group-level context is work item 0 (for tk.uniform of per-item values)
        self.local_coords("tk_lid0")
        for d in range(k.ndim):
            self.w(f"const int64_t tk_p{d} = tk_gr{d} * {wg[d]} + tk_l{d};")
        self.global_coords()
        self.declare_locals(plan.group_vars)
        self.declare_locals(plan.item_vars, per_item=True)
        for s in N.walk_stmts(k.body):
            if isinstance(s, N.AllocArray) and s.array.name in plan.item_private:
                a = s.array
                size = _prod(a.shape)
                self.w(f"{self.stype(a.dtype)} a_{mangle(a.name)}[{_prod(wg)}][{size}];")
        if plan.needs_done:
            self.w(f"unsigned char tk_done[{_prod(wg)}] = {{0}};")
        self.prefetch_start()
        self.last_line = None
        self.stmts(plan.body)
        self.w("goto tk_group_end;")
        if self.stream_arrays:      # streaming stores when the outputs are large
            arrays = {p[1].name: p[1] for p in k.params if p[0] == "array"}
            size = self.streamed_bytes(lambda n, d: f"a_{mangle(n)}_sh{d}")
            pends = " ".join(f"tk_pend {self.pend(arrays[n])}; {self.pend(arrays[n])}.have = 0;"
                             for n in sorted(self.stream_arrays))
            self.lines.insert(flag_at, "    " + f"const int tk_stream = {self.grouped_stream_test(size)}; {pends}")
        self.depth = 0
        self.w("tk_group_end: ;")
        if self.stream_arrays:      # the group's last partial lines
            self.w("    " + " ".join(f"tk_pend_flush(&{self.pend(arrays[n])});" for n in sorted(self.stream_arrays)))
        self.w("}")
        full = ", ".join(str(x) for x in wg)
        grs = ", ".join(f"tk_gr{d}" for d in range(k.ndim))
        rows_first = bool(self.stream_arrays) and rows_first_when_streamed(k)     # passes/grouporder.py
        # with two walks (row-major and blocks: two call sites) GCC keeps tk_group out of line;
        # inlined into each walk, the launch-invariant setup (the streaming test, the group's
        # constants) leaves the loop over groups: 0.90 -> 0.95 of the C reference, docs/cpu.md
        inline = "inline __attribute__((always_inline)) " if rows_first else ""
        self.w(f"static {inline}void tk_group(const tk_slot *a, int64_t g, {gr_params}) {{")
        if k.unsafe_indices:        # every item of every group runs
            self.w(f"    tk_group_body(a, g, {grs}, {full});")
        else:
            nvs = []
            for d in range(k.ndim):
                self.w(f"    const int64_t tk_n{d} = a[{3 * d + 1}].i;")
                self.w(f"    const int64_t tk_nv{d} = tk_n{d} - tk_gr{d} * {wg[d]} < {wg[d]} ? "
                       f"tk_n{d} - tk_gr{d} * {wg[d]} : {wg[d]};")
                nvs.append(f"tk_nv{d}")
            cond = " && ".join(f"tk_nv{d} == {wg[d]}" for d in range(k.ndim))
            self.w(f"    if ({cond}) tk_group_body(a, g, {grs}, {full});")
            self.w(f"    else tk_group_body(a, g, {grs}, {', '.join(nvs)});")
        self.w("}")
        rows = None
        if rows_first:
            slots = {p[1].name: slot for p, slot in slot_layout(k) if p[0] == "array"}
            rows = self.grouped_stream_test(self.streamed_bytes(lambda n, d: f'a[{slots[n] + 1 + d}].i'))
        self.lines.extend(group_walk(k.ndim, wg, rows).splitlines())
        if self.stream_arrays:      # each thread's streaming stores complete before the launch returns
            self.lines.extend([
                "static void tk_run_groups_fenced(const tk_slot *a, int64_t lo, int64_t hi) {",
                "    tk_run_groups(a, lo, hi);",
                "    tk_stream_fence();",
                "}",
                "#define tk_run_groups tk_run_groups_fenced"])
        self.fallback_pool("tk_run_groups(w->a, w->total * w->t / w->nt, w->total * (w->t + 1) / w->nt);",
                           "tk_parallel_groups")
        total = " * ".join(f"((a[{3 * d + 1}].i + {wg[d] - 1}) / {wg[d]})" for d in range(k.ndim))
        self.w("void tk_kernel(const tk_slot *a, int nthreads) {")
        self.w(f"    const int64_t ngroups = {total};")
        self.w("    if (nthreads <= 1 || ngroups <= 1) { tk_run_groups(a, 0, ngroups); return; }")
        self.w("#ifdef _OPENMP")
        self.w("    #pragma omp parallel num_threads(nthreads)")
        self.w("    { const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();")
        self.w("      tk_run_groups(a, ngroups * t / nt, ngroups * (t + 1) / nt); }")
        self.w("#else")
        self.w("    tk_parallel_groups(a, ngroups, nthreads);")
        self.w("#endif")
        self.w("}")
        return self.lines

    def item_sums(self) -> tuple:
        """``(local, array)`` pairs of a flat kernel whose per-item ``local`` is summed per
        thread, the sum stored to ``array[thread]`` (scalar gradients of adjoints: see
        ``passes/adjoint_gather.py``); the launch sizes ``array`` by its thread count."""
        return tuple(getattr(self.k, "item_sums", ()))

    def fallback_pool(self, work: str, name: str) -> None:
        """Threads for compilers without OpenMP (Apple clang): one pthread per share of the work."""
        self.lines.extend(f"""\
#ifndef _OPENMP
#include <pthread.h>
typedef struct {{ const tk_slot *a; int64_t total; int t, nt; }} tk_work;
static void *tk_worker(void *p) {{ tk_work *w = (tk_work *)p; {work} return 0; }}
static void {name}(const tk_slot *a, int64_t total, int nthreads) {{
    pthread_t th[256]; tk_work ws[256];
    int nt = nthreads < 256 ? nthreads : 256;
    for (int t = 0; t < nt; ++t) {{ ws[t].a = a; ws[t].total = total; ws[t].t = t; ws[t].nt = nt; }}
    for (int t = 1; t < nt; ++t) pthread_create(&th[t], 0, tk_worker, &ws[t]);
    tk_worker(&ws[0]);
    for (int t = 1; t < nt; ++t) pthread_join(th[t], 0);
}}
#endif""".splitlines())


_OMP_OPS = {"add": "+", "mul": "*", "min": "min", "max": "max"}


def _defined_in(stmts) -> set:
    """Locals assigned anywhere in ``stmts`` (nested bodies and item loops included)."""
    out: set = set()
    for s in stmts:
        out.update(defs(s))
        for sub in (getattr(s, "body", None), getattr(s, "orelse", None)):
            if sub:
                out |= _defined_in(sub)
    return out


def _copied_var(e: N.Expr) -> str | None:
    """``name`` when ``e`` is the local ``name`` (or a conversion of it), else ``None``."""
    if isinstance(e, N.Cast):
        e = e.a
    return e.name if isinstance(e, N.Var) else None


def scan_totals(body: list, item_vars: set) -> dict:
    """``id(reduce) -> scan`` for each ``group_reduce(v, op)`` of a group-level block that
    follows a ``group_scan(v, op)`` (inclusive or exclusive, same type) of the same block of
    a local ``v`` not assigned in between: the reduction is the last valid item's inclusive
    scan (a prefix sum's tile total). The frontend copies each collective's operand into a
    fresh local (``csrc = v``) in the item code before it; those copies are matched. Only
    where the scan's result is stored per item (``item_vars``), and not in kernels with
    item-level returns (a returned item's scan is not stored)."""
    out: dict = {}

    def visit(stmts):
        seq = []            # the block in order, item loops' top-level statements inline
        for s in stmts:
            seq.extend(s.body if isinstance(s, ItemLoop) else [s])
        last_def: dict = {}     # local -> (index in seq, the variable it copies or None)
        scans: dict = {}        # local -> a scan of a copy of it whose result is still stored
        for b, s in enumerate(seq):
            v = last_def.get(s.src, (None, None))[1] if isinstance(s, N.Collective) else None
            if isinstance(s, N.Collective) and s.kind == "reduce" and v in scans:
                p = scans[v]
                if p.op == s.op and p.ty == s.ty:
                    out[id(s)] = p
            for name in (defs(s) if isinstance(s, (N.Assign, N.Collective)) else _defined_in([s])):
                # an assignment ends the reuse of scans of that local and of scans stored in it
                scans = {u: p for u, p in scans.items() if name not in (u, p.dst)}
                last_def[name] = (b, _copied_var(s.value) if isinstance(s, N.Assign) and s.var == name else None)
            if isinstance(s, N.Collective) and s.kind in ("scan", "exscan") and v is not None \
                    and s.dst in item_vars and s.dst != v:
                scans[v] = s
            for sub in (getattr(s, "body", None), getattr(s, "orelse", None)):
                if sub and not isinstance(s, ItemLoop):
                    visit(sub)
    visit(body)
    return out


LANES_UNROLL = 8    # at most this many vector iterations of a lanes loop are unrolled


def short_row(width: int, a: N.ArrayInfo) -> bool:
    """Whether a streamed row of ``width`` lanes of ``a`` is shorter than 4 cache lines (it is
    then whole lines, see ``lane_streams``): such a row streams only where it starts a line
    (run-time test per row), else it is all partial lines and keeps ordinary stores."""
    return width * a.dtype.itemsize < 256


def lanes_unroll(lanes: int) -> int:
    """The ``#pragma GCC unroll`` count of a lanes loop over ``lanes`` work items: below the
    trip count of a full group, so that GCC does not unroll the scalar loop before the
    vectorizer sees it (a tiled matmul: 6x slower), but at least the trip count of the
    vectorized loop (``lanes`` / 16 float32 lanes with AVX-512, / 8 with AVX2), so that GCC
    unrolls that completely after vectorizing: then the per-item values of the lanes (a row
    sum's 64 accumulators, 4 AVX-512 registers) stay in registers across the hoisted loop
    around it instead of making a round trip through the per-item array in memory every
    iteration. Capped at ``LANES_UNROLL``: a loop that does not vectorize is unrolled by
    this count at most."""
    return max(1, min(LANES_UNROLL, lanes // 2))


def tile_transpose_helper(itemsize: int, stream: bool = False) -> str:
    """C of ``tk_tile_tr<itemsize>(dst, ldd, src, lds, rows, cols)``: ``dst[c * ldd + r] =
    src[r * lds + c]`` for ``r < rows``, ``c < cols`` (elements of ``itemsize`` bytes, moved
    as bits). Full ``L x L`` blocks (``L = passes.tiletranspose.block_lanes``) are
    transposed in registers: each row one ``L``-lane vector (GNU C vector extensions), then
    ``log2 L`` stages, each exchanging one bit of the row index with the same bit of the
    column index between pairs of rows with two two-source shuffles (``vpermt2ps`` and
    friends with AVX-512; GCC and Clang lower them for any target). The edges that do not
    fill a block are copied element by element. ``stream``: ``tk_tile_tr<itemsize>_nt``,
    which writes each transposed row of a full block (one 64-byte line: ``L * itemsize ==
    64``) with a non-temporal store straight from its register (``tk_stream_line``; every
    ``dst`` row of a block must start a cache line)."""
    lanes = block_lanes(itemsize)
    ut = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}[itemsize]
    vt = f"tk_trv{itemsize}"
    name = f"tk_tile_tr{itemsize}" + ("_nt" if stream else "")
    out = [] if stream else [f"typedef {ut} {vt} __attribute__((vector_size({lanes * itemsize})));"]
    out += [
           f"static inline __attribute__((always_inline)) void {name}(void *restrict dst, int64_t ldd, "
           "const void *restrict src, int64_t lds, int64_t rows, int64_t cols) {",
           "    char *restrict d = (char *)dst; const char *restrict s = (const char *)src;",
           "    int64_t r0 = 0;",
           f"    for (; r0 + {lanes} <= rows; r0 += {lanes}) {{",
           "        int64_t c0 = 0;",
           f"        for (; c0 + {lanes} <= cols; c0 += {lanes}) {{",
           f"            {vt} " + ", ".join(f"t{i}" for i in range(lanes)) + ";"]
    for i in range(lanes):
        out.append(f"            memcpy(&t{i}, s + ((r0 + {i}) * lds + c0) * {itemsize}, {lanes * itemsize});")
    h = lanes // 2
    while h:
        lo = [c if not c & h else lanes + c - h for c in range(lanes)]
        hi = [c + h if not c & h else lanes + c for c in range(lanes)]
        for i in range(lanes):
            if i & h:
                continue
            out.append(f"            {{ const {vt} a = t{i}, b = t{i + h}; "
                       f"t{i} = TK_SHUFFLE({vt}, a, b, {', '.join(map(str, lo))}); "
                       f"t{i + h} = TK_SHUFFLE({vt}, a, b, {', '.join(map(str, hi))}); }}")
        h //= 2
    for i in range(lanes):
        at = f"d + ((c0 + {i}) * ldd + r0) * {itemsize}"
        out.append(f"            tk_stream_line({at}, (const char *)&t{i});" if stream
                   else f"            memcpy({at}, &t{i}, {lanes * itemsize});")
    out += ["        }",
            "        for (; c0 < cols; ++c0)",
            f"            for (int64_t r = r0; r < r0 + {lanes}; ++r)",
            f"                memcpy(d + (c0 * ldd + r) * {itemsize}, s + (r * lds + c0) * {itemsize}, {itemsize});",
            "    }",
            "    for (; r0 < rows; ++r0)",
            "        for (int64_t c = 0; c < cols; ++c)",
            f"            memcpy(d + (c * ldd + r0) * {itemsize}, s + (r0 * lds + c) * {itemsize}, {itemsize});",
            "}"]
    return "\n".join(out) + "\n"


_SHUFFLE = """#ifndef TK_SHUFFLE
#if defined(__clang__)
#define TK_SHUFFLE(T, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define TK_SHUFFLE(T, a, b, ...) __builtin_shuffle(a, b, (T){__VA_ARGS__})
#endif
#endif
"""


GROUP_BLOCK = 8     # launches of 2-D/3-D grids visit groups in blocks of 8 x 8 (group_walk)


def group_walk(ndim: int, wg: tuple, rows_first: str | None = None) -> str:
    """``tk_run_groups(a, lo, hi)``: runs the groups at positions ``lo .. hi-1`` of the order
    in which a launch visits them (a multi-threaded launch gives each thread a contiguous
    range of positions), passing each group's coordinates, which it steps instead of
    dividing per group. A 1-D grid goes in order of group ids. A 2-D/3-D grid goes in
    blocks of ``GROUP_BLOCK`` x ``GROUP_BLOCK`` groups over its last two dimensions
    (row-major inside a block, blocks row-major, partial blocks at the edges; outer
    dimension outermost): a thread's consecutive groups touch a compact 2-D region, so a
    kernel that reads rows and writes columns (a transpose through a tile) writes runs of
    cache lines into each output row instead of one line into each of thousands of rows
    (pages). Where ``rows_first`` (a C condition) holds at run time, a 2-D/3-D grid goes
    row-major instead (passes/grouporder.py: a streamed launch of a loop-free kernel). The
    order of groups is unspecified in the language; their ids are unchanged."""
    ng = [f"((a[{3 * d + 1}].i + {wg[d] - 1}) / {wg[d]})" for d in range(ndim)]
    if ndim == 1:
        return """\
static void tk_run_groups(const tk_slot *a, int64_t lo, int64_t hi) {
    for (int64_t g = lo; g < hi; ++g) tk_group(a, g, g);
}"""
    B = GROUP_BLOCK
    outer = "o, " if ndim == 3 else ""
    rows = "" if rows_first is None else f"""
    if ({rows_first}) {{      /* row-major */
        int64_t o = lo / plane, i = lo % plane / nB, j = lo % nB; (void)o;
        for (int64_t s = lo; s < hi; ++s) {{
            tk_group(a, s, {outer}i, j);
            if (++j == nB) {{ j = 0; if (++i == nA) {{ i = 0; ++o; }} }}
        }}
        return;
    }}"""
    return f"""\
static void tk_run_groups(const tk_slot *a, int64_t lo, int64_t hi) {{
    const int64_t nA = {ng[ndim - 2]}, nB = {ng[ndim - 1]}, plane = nA * nB;{rows}
    for (int64_t s = lo; s < hi;) {{      /* one block (or the part of it in lo .. hi) */
        const int64_t o = s / plane, r = s % plane; (void)o;
        const int64_t band = r / ({B} * nB), rr = r % ({B} * nB);
        const int64_t h = nA - band * {B} < {B} ? nA - band * {B} : {B};
        const int64_t bc = rr / (h * {B}), q = rr % (h * {B});
        const int64_t w = nB - bc * {B} < {B} ? nB - bc * {B} : {B};
        const int64_t n = hi - s < h * w - q ? hi - s : h * w - q;
        int64_t i = band * {B} + q / w, j = bc * {B} + q % w;
        for (int64_t t = 0; t < n; ++t) {{
            tk_group(a, (o * nA + i) * nB + j, {outer}i, j);
            if (++j == bc * {B} + w) {{ j = bc * {B}; ++i; }}
        }}
        s += n;
    }}
}}"""


def simd_reduction_op(s: N.Collective, fastmath: bool) -> str | None:
    """The ``omp simd`` reduction identifier of collective ``s`` when its result cannot depend
    on the order of combination: integer ops (wrapping, so exact in any order), bool and/or,
    and float32/float64 ops in a ``fastmath`` kernel (which permits reassociation). ``None``
    for a default kernel's float collective: it stays a sequential loop in local order, the
    order the interpreter defines, so results are bit-identical to it."""
    dt = s.ty.dtype
    if dt.kind == "b":
        return {"and": "&&", "or": "||"}.get(s.op)
    if dt.kind in "iu":
        return {**_OMP_OPS, "and": "&", "or": "|"}.get(s.op)
    if dt.kind == "f" and fastmath and dt.name in ("float32", "float64"):
        return _OMP_OPS.get(s.op)
    return None


@lru_cache(maxsize=None)
def _prelude() -> str:
    return prelude(["base", "half", "bf16", "fp8", "intdiv", "floatdiv", "ipow", "philox"])


PAD_MAX_BYTES = 64 << 10   # line_pitch pads tiles up to this size (the stack limit counts logical bytes)


def line_pitch(a: N.ArrayInfo) -> int | None:
    """The row length in elements of a 2-D ``localmem`` array in the CPU's C when its rows are
    padded to whole 64-byte cache lines (a ``(16, 17)`` float32 tile: rows of 32), else None.
    Padded: a contiguous 2-D local array of static shape whose row is longer than a line but
    not a whole number of lines, when the padding at most doubles the row and the padded
    array stays within ``PAD_MAX_BYTES`` (runtime/cpu.py's stack limit counts the logical
    bytes; a tile worth padding is L1-sized anyway). The GPU idiom of
    one extra column (against bank conflicts) otherwise makes every 16-lane row vector of the
    tile cross a line (docs/cpu.md, "Transposed tile reads"). Indexing and bounds stay the
    logical shape's; only addresses change."""
    if a.space != "local" or a.ndim != 2 or not a.contiguous:
        return None
    if not all(isinstance(n, int) for n in a.shape):
        return None
    row = a.shape[1] * a.dtype.itemsize
    if row <= 64 or row % 64 == 0 or 64 % a.dtype.itemsize:
        return None
    padded = -(-row // 64) * 64
    if padded > 2 * row or a.shape[0] * padded > PAD_MAX_BYTES:
        return None
    return padded // a.dtype.itemsize


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def render_c(kernel: N.Kernel, plan: GroupPlan | None, ranges: int) -> tuple:
    """The C translation unit for a specialized kernel, and the debug array-name table."""
    r = CRenderer(kernel, plan, ranges)
    src = r.render()
    return src, list(r.array_ids)


__all__ = ["render_c", "slot_layout", "GEOMETRY_SLOTS", "CRenderer", "Ty"]
