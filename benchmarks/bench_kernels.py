#!/usr/bin/env python3
"""GPU-style kernels on the CPU: tinykernels CPU vs PoCL vs hand-written C + OpenMP vs PyTorch.

    PYTHONPATH=src python3 benchmarks/bench_kernels.py            # 64 MiB rows (full)
    PYTHONPATH=src python3 benchmarks/bench_kernels.py --quick    # small sizes, smoke test

Kernels (float32, one workgroup per row where it applies): row sum and RMSNorm with
``for j in range(lid, D, WG)`` + ``group_reduce``, transpose through a local-memory tile,
tiled matmul (GFLOP/s, ratio to NumPy's BLAS). Every result is checked against NumPy before
timing (exit 1 when wrong). Bandwidth columns are GB/s of the data each kernel must move;
``/memcpy`` is the tinykernels CPU number as a fraction of a C memcpy of the same bytes.
Numbers taken while other processes load the machine are only meaningful as ratios within
one run (the script prints the load).
"""
from __future__ import annotations

import argparse
import ctypes
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
from tinykernels.runtime.compiler import toolchain

WG = 64
TILE = 16


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


C_REF = r"""
#include <math.h>
#include <string.h>
#include <stdint.h>
void c_memcpy(float *d, const float *s, int64_t n) {
    #pragma omp parallel
    { int t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t lo = n * t / nt, hi = n * (t + 1) / nt; memcpy(d + lo, s + lo, (hi - lo) * sizeof(float)); }
}
void c_rowsum(float *out, const float *X, int64_t R, int64_t D) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) { float acc = 0;
        #pragma omp simd reduction(+:acc)
        for (int64_t j = 0; j < D; ++j) acc += X[r * D + j];
        out[r] = acc; }
}
void c_rmsnorm(float *out, const float *X, const float *w, int64_t R, int64_t D, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) { float acc = 0;
        #pragma omp simd reduction(+:acc)
        for (int64_t j = 0; j < D; ++j) acc += X[r * D + j] * X[r * D + j];
        float s = 1.0f / sqrtf(acc / D + eps);
        #pragma omp simd
        for (int64_t j = 0; j < D; ++j) out[r * D + j] = X[r * D + j] * s * w[j]; }
}
void c_transpose(float *out, const float *a, int64_t R, int64_t C) {
    #pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < R; i0 += 16)
        for (int64_t j0 = 0; j0 < C; j0 += 16)
            for (int64_t j = j0; j < j0 + 16; ++j)
                for (int64_t i = i0; i < i0 + 16; ++i) out[j * R + i] = a[i * C + j];
}
void c_matmul(float *Cm, const float *A, const float *B, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) Cm[i * n + j] = 0;
        for (int64_t k = 0; k < n; ++k) { float a = A[i * n + k];
            #pragma omp simd
            for (int64_t j = 0; j < n; ++j) Cm[i * n + j] += a * B[k * n + j]; } }
}
"""


def build_ref(tmp: Path):
    tc = toolchain()
    src = tmp / "ref.c"
    src.write_text("#include <omp.h>\n" + C_REF)
    so = tmp / "ref.so"
    subprocess.run(list(tc.cmd) + ["-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-o", str(so), str(src)],
                   check=True)
    lib = ctypes.CDLL(str(so))
    return lib


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def best(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps = 3 if args.quick else 10
    R, D = (256, 1024) if args.quick else (4096, 4096)
    NM = 128 if args.quick else 1024
    cpu = tk.CPU()
    cl = None
    if tk.backends().get("OpenCL", (False,))[0]:
        cl = tk.backend("CL")
    try:
        import torch
    except ImportError:
        torch = None
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
          "(under load, read the columns as ratios within this run)")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((R, D)).astype(np.float32)
    w = rng.standard_normal(D).astype(np.float32)
    with tempfile.TemporaryDirectory() as td:
        lib = build_ref(Path(td))
        bad = 0

        def check(name, got, want, rtol):
            nonlocal bad
            if not np.allclose(got, want, rtol=rtol, atol=rtol):
                print(f"WRONG RESULT: {name}")
                bad += 1

        cp = np.empty_like(X)
        t_mc = best(lambda: lib.c_memcpy(ptr(cp), ptr(X), ctypes.c_int64(X.size)), reps)
        memcpy_gbs = 2 * X.nbytes / t_mc / 1e9
        print(f"\nmemcpy {X.nbytes / 2**20:.0f} MiB: {memcpy_gbs:.2f} GB/s\n")
        print(f"{'kernel':<12} {'tk CPU':>8} {'tk PoCL':>8} {'C ref':>8} {'torch':>8} {'tk/C':>6} {'/memcpy':>8}  (GB/s)")

        def row(name, nbytes, tk_fn, cl_fn, c_fn, torch_fn):
            gb = lambda f: nbytes / best(f, reps) / 1e9 if f else float("nan")   # noqa: E731
            t, c = gb(tk_fn), gb(c_fn)
            p, th = gb(cl_fn), gb(torch_fn)
            print(f"{name:<12} {t:8.2f} {p:8.2f} {c:8.2f} {th:8.2f} {t / c:6.2f} {t / memcpy_gbs:8.2f}")

        # row sum
        out = np.zeros(R, np.float32)
        k = rowsum(cpu, WG)
        run = lambda: (k(out, X, D, ndrange=R * WG), tk.synchronize(cpu))       # noqa: E731
        run()
        check("rowsum", out, X.sum(1, dtype=np.float64), 1e-3)
        cl_run = None
        if cl is not None:
            Xd, od = tk.asarray(X, backend=cl), tk.asarray(out, backend=cl)
            kc = rowsum(cl, WG)
            cl_run = lambda: (kc(od, Xd, D, ndrange=R * WG), tk.synchronize(cl))  # noqa: E731
            cl_run()
            check("rowsum PoCL", od.numpy(), X.sum(1, dtype=np.float64), 1e-3)
        co = np.zeros(R, np.float32)
        c_run = lambda: lib.c_rowsum(ptr(co), ptr(X), ctypes.c_int64(R), ctypes.c_int64(D))  # noqa: E731
        tX = torch.from_numpy(X) if torch else None
        row("row sum", X.nbytes, run, cl_run, c_run, (lambda: tX.sum(1)) if torch else None)

        # RMSNorm
        out2 = np.zeros_like(X)
        k2 = rmsnorm(cpu, WG)
        run = lambda: (k2(out2, X, w, D, 1e-5, ndrange=R * WG), tk.synchronize(cpu))   # noqa: E731
        run()
        X64 = X.astype(np.float64)
        check("rmsnorm", out2, X64 / np.sqrt((X64 ** 2).mean(1, keepdims=True) + 1e-5) * w, 1e-4)
        cl_run = None
        if cl is not None:
            Xd, wd, od = (tk.asarray(a, backend=cl) for a in (X, w, out2))
            kc2 = rmsnorm(cl, WG)
            cl_run = lambda: (kc2(od, Xd, wd, D, 1e-5, ndrange=R * WG), tk.synchronize(cl))  # noqa: E731
        co2 = np.zeros_like(X)
        c_run = lambda: lib.c_rmsnorm(ptr(co2), ptr(X), ptr(w), ctypes.c_int64(R), ctypes.c_int64(D),  # noqa: E731
                                      ctypes.c_float(1e-5))
        tw = torch.from_numpy(w) if torch else None
        t_fn = (lambda: torch.nn.functional.rms_norm(tX, (D,), tw, 1e-5)) if torch else None
        row("RMSNorm", 3 * X.nbytes, run, cl_run, c_run, t_fn)

        # transpose through a local tile
        out3 = np.zeros((D, R), np.float32)
        k3 = transpose(cpu, (TILE, TILE))
        run = lambda: (k3(out3, X, TILE, ndrange=X.shape), tk.synchronize(cpu))   # noqa: E731
        run()
        check("transpose", out3, X.T, 0)
        cl_run = None
        if cl is not None:
            Xd, od = tk.asarray(X, backend=cl), tk.asarray(out3, backend=cl)
            kc3 = transpose(cl, (TILE, TILE))
            cl_run = lambda: (kc3(od, Xd, TILE, ndrange=X.shape), tk.synchronize(cl))  # noqa: E731
        co3 = np.zeros_like(out3)
        c_run = lambda: lib.c_transpose(ptr(co3), ptr(X), ctypes.c_int64(R), ctypes.c_int64(D))  # noqa: E731
        row("transpose", 2 * X.nbytes, run, cl_run, c_run, (lambda: tX.t().contiguous()) if torch else None)

        # tiled matmul
        A = rng.standard_normal((NM, NM)).astype(np.float32)
        B = rng.standard_normal((NM, NM)).astype(np.float32)
        Cm = np.zeros((NM, NM), np.float32)
        k4 = matmul(cpu, (TILE, TILE))
        run = lambda: (k4(Cm, A, B, TILE, ndrange=(NM, NM)), tk.synchronize(cpu))   # noqa: E731
        run()
        check("matmul", Cm, A.astype(np.float64) @ B, 1e-3)
        flop = 2.0 * NM ** 3
        g_tk = flop / best(run, reps) / 1e9
        g_np = flop / best(lambda: A @ B, reps) / 1e9
        co4 = np.zeros_like(Cm)
        g_c = flop / best(lambda: lib.c_matmul(ptr(co4), ptr(A), ptr(B), ctypes.c_int64(NM)), reps) / 1e9
        g_cl = float("nan")
        if cl is not None:
            Ad, Bd, Cd = (tk.asarray(a, backend=cl) for a in (A, B, Cm))
            kc4 = matmul(cl, (TILE, TILE))
            g_cl = flop / best(lambda: (kc4(Cd, Ad, Bd, TILE, ndrange=(NM, NM)), tk.synchronize(cl)), reps) / 1e9
        print(f"\ntiled matmul {NM}^3 float32 (GFLOP/s): tk CPU {g_tk:.2f}, tk PoCL {g_cl:.2f}, C ref {g_c:.2f}, "
              f"NumPy BLAS {g_np:.2f}; tk/BLAS {g_tk / g_np:.3f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
