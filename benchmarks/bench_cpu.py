#!/usr/bin/env python3
"""CPU benchmarks for tinykernels: memory-bound kernels, launch overhead, compile and cache.

    cd /work/main && PYTHONPATH=src python3 benchmarks/bench_cpu.py            # full (< ~5 min)
    PYTHONPATH=src python3 benchmarks/bench_cpu.py --quick                      # smoke test (< 60 s)
    PYTHONPATH=src python3 benchmarks/bench_cpu.py --only stream --max-mb 256 --threads 2

Prints plain-text tables. Every kernel's result is checked once against NumPy before it is
timed; a wrong result (or a tinykernels error) makes the script exit 1. The PASS/MISS marks
next to the numbers are informational and never change the exit status. See README.md.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

try:
    import tinykernels as tk
except ImportError:          # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk
from tinykernels.runtime.compiler import toolchain

MiB = 1 << 20
BUSY_LIMIT = 0.2        # cores busy with other processes above which a measurement is repeated/flagged
GB = 1e9

# targets (informational)
T_RATIO = 0.95          # tinykernels / C reference, triad and diffusion, at >= 64 MiB
T_RATIO_MIN_MB = 64
T_LAUNCH_US = 1.5
T_COLD_MS = 100.0
T_DISK_MS = 10.0


def mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


# ---------------------------------------------------------------------------------------------
# tinykernels kernels
# ---------------------------------------------------------------------------------------------

from kernels import tk_copy, tk_tiny, tk_tiny_globals, tk_triad  # noqa: E402
from kernels import tk_diffusion2d as tk_diffusion  # noqa: E402
from kernels import tk_diffusion3d  # noqa: E402


# ---------------------------------------------------------------------------------------------
# hand-written C + OpenMP reference (compiled here with tinykernels' compiler and flags)
# ---------------------------------------------------------------------------------------------

C_REF = r"""
#include <stdint.h>
#include <omp.h>

void ref_copy_f32(float *restrict a, const float *restrict b, int64_t n, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; ++i)
        a[i] = b[i];
}

void ref_triad_f32(float *restrict a, const float *restrict b, const float *restrict c,
                   float s, int64_t n, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; ++i)
        a[i] = b[i] + s * c[i];
}

void ref_diffusion_f64(double *restrict T2, const double *restrict T, double dt, double lam,
                       int64_t nx, int64_t ny, int nt) {
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 1; i < nx - 1; ++i)
        for (int64_t j = 1; j < ny - 1; ++j)
            T2[i * ny + j] = T[i * ny + j] + dt * lam * (T[(i - 1) * ny + j] + T[(i + 1) * ny + j]
                             + T[i * ny + j - 1] + T[i * ny + j + 1] - 4.0 * T[i * ny + j]);
}

void ref_empty3(void *a, const void *b, float s) { (void)a; (void)b; (void)s; }

/* the adjoint of ref_triad_f32 as one would write it by hand (what tk.adjoint(tk_triad) does):
   dB += dA, dC += s dA, dA = 0, and ds += sum(C dA) summed in double per thread */
void ref_triad_adjoint_f32(float *restrict da, float *restrict db, const float *restrict c,
                           float *restrict dc, float s, double *ds, int64_t n, int nt) {
    double acc = 0.0;
    #pragma omp parallel for simd schedule(static) num_threads(nt) reduction(+:acc)
    for (int64_t i = 0; i < n; ++i) {
        const float g = da[i];
        da[i] = 0.0f;
        db[i] += g;
        dc[i] += s * g;
        acc += (double)(g * c[i]);
    }
    ds[0] += acc;
}

void ref_triad_adjoint_nos_f32(float *restrict da, float *restrict db, float *restrict dc,
                               float s, int64_t n, int nt) {
    #pragma omp parallel for simd schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; ++i) {
        const float g = da[i];
        da[i] = 0.0f;
        db[i] += g;
        dc[i] += s * g;
    }
}
"""


def build_c_reference(tmpdir: Path):
    tc = toolchain()
    src = tmpdir / "cref.c"
    so = tmpdir / "cref.so"
    src.write_text(C_REF)
    cmd = list(tc.cmd) + list(tc.flags) + ["-o", str(so), str(src), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("building the C reference failed:\n" + " ".join(cmd) + "\n" + r.stderr)
    lib = ctypes.CDLL(str(so))
    vp, i64, ci = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.ref_copy_f32.argtypes = [vp, vp, i64, ci]
    lib.ref_triad_f32.argtypes = [vp, vp, vp, ctypes.c_float, i64, ci]
    lib.ref_diffusion_f64.argtypes = [vp, vp, ctypes.c_double, ctypes.c_double, i64, i64, ci]
    lib.ref_empty3.argtypes = [vp, vp, ctypes.c_float]
    lib.ref_triad_adjoint_f32.argtypes = [vp, vp, vp, vp, ctypes.c_float, vp, i64, ci]
    lib.ref_triad_adjoint_nos_f32.argtypes = [vp, vp, vp, ctypes.c_float, i64, ci]
    for f in (lib.ref_copy_f32, lib.ref_triad_f32, lib.ref_diffusion_f64, lib.ref_empty3,
              lib.ref_triad_adjoint_f32, lib.ref_triad_adjoint_nos_f32):
        f.restype = None
    return lib, cmd


# ---------------------------------------------------------------------------------------------
# optional peers (never installed by this script; "n/a" when not importable)
# ---------------------------------------------------------------------------------------------

def _try_import(name):
    try:
        return __import__(name)
    except Exception:
        return None


class Peers:
    """Builds Numba / Taichi / Warp versions of the kernels when the packages import."""

    def __init__(self, threads: int):
        self.threads = threads
        self.versions = {}
        self.errors = {}
        self.nb = self._numba()
        self.ti = self._taichi()
        self.wp = self._warp()
        self.cl = tk.backend("CL") if tk.backends()["OpenCL"][0] else None

    def _fail(self, name, e):
        self.errors[name] = f"{type(e).__name__}: {e}"

    def _numba(self):
        numba = _try_import("numba")
        if numba is None:
            return None
        try:
            numba.set_num_threads(min(self.threads, numba.config.NUMBA_NUM_THREADS))
            prange = numba.prange

            @numba.njit(parallel=True, cache=False)
            def copy(a, b):
                for i in prange(a.size):
                    a[i] = b[i]

            @numba.njit(parallel=True, cache=False)
            def triad(a, b, c, s):
                for i in prange(a.size):
                    a[i] = b[i] + s * c[i]

            @numba.njit(parallel=True, cache=False)
            def diffusion(T2, T, dt, lam):
                nx, ny = T.shape
                for i in prange(1, nx - 1):
                    for j in range(1, ny - 1):
                        T2[i, j] = T[i, j] + dt * lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1]
                                                         + T[i, j + 1] - 4.0 * T[i, j])

            @numba.njit(cache=False)
            def tiny(a, b, s):
                a[0] = b[0] * s

            self.versions["numba"] = numba.__version__
            return {"copy": copy, "triad": triad, "diffusion": diffusion, "tiny": tiny}
        except Exception as e:
            self._fail("numba", e)
            return None

    def _taichi(self):
        ti = _try_import("taichi")
        if ti is None:
            return None
        try:
            ti.init(arch=ti.cpu, cpu_max_num_threads=self.threads, log_level=ti.ERROR)
            nd = ti.types.ndarray()

            @ti.kernel
            def copy(a: nd, b: nd):
                for i in range(a.shape[0]):
                    a[i] = b[i]

            @ti.kernel
            def triad(a: nd, b: nd, c: nd, s: ti.f32):
                for i in range(a.shape[0]):
                    a[i] = b[i] + s * c[i]

            @ti.kernel
            def diffusion(T2: nd, T: nd, dt: ti.f64, lam: ti.f64):
                for i, j in ti.ndrange((1, T.shape[0] - 1), (1, T.shape[1] - 1)):
                    T2[i, j] = T[i, j] + dt * lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1]
                                                     + T[i, j + 1] - 4.0 * T[i, j])

            self.versions["taichi"] = ".".join(map(str, ti.__version__)) if isinstance(
                ti.__version__, tuple) else str(ti.__version__)
            return {"copy": copy, "triad": triad, "diffusion": diffusion, "sync": ti.sync}
        except Exception as e:
            self._fail("taichi", e)
            return None

    def _warp(self):
        wp = _try_import("warp")
        if wp is None:
            return None
        try:
            wp.config.quiet = True
            wp.init()

            @wp.kernel
            def copy(a: wp.array(dtype=wp.float32), b: wp.array(dtype=wp.float32)):
                i = wp.tid()
                a[i] = b[i]

            @wp.kernel
            def triad(a: wp.array(dtype=wp.float32), b: wp.array(dtype=wp.float32),
                      c: wp.array(dtype=wp.float32), s: wp.float32):
                i = wp.tid()
                a[i] = b[i] + s * c[i]

            @wp.kernel
            def diffusion(T2: wp.array2d(dtype=wp.float64), T: wp.array2d(dtype=wp.float64),
                          dt: wp.float64, lam: wp.float64):
                i0, j0 = wp.tid()
                i = i0 + 1
                j = j0 + 1
                T2[i, j] = T[i, j] + dt * lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1]
                                                 + T[i, j + 1] - wp.float64(4.0) * T[i, j])

            def wrap(x):
                dt = {np.dtype(np.float32): wp.float32, np.dtype(np.float64): wp.float64}[x.dtype]
                try:
                    return wp.array(x, dtype=dt, device="cpu", copy=False)   # zero-copy view
                except Exception:
                    return wp.array(x, dtype=dt, device="cpu")

            self.versions["warp"] = wp.config.version
            return {"copy": copy, "triad": triad, "diffusion": diffusion, "wrap": wrap, "wp": wp}
        except Exception as e:
            self._fail("warp", e)
            return None

    # Each returns (run, result) callables, or None when the peer is not available.
    def make(self, peer, kernel, arrays, scalars, ndr):
        if peer == "tk-CL" and self.cl is not None:      # tinykernels' OpenCL backend (PoCL on CPUs)
            k = {"copy": tk_copy, "triad": tk_triad, "diffusion": tk_diffusion}[kernel](self.cl)
            dev = [tk.asarray(x, backend=self.cl) for x in arrays]
            nd = (range(1, ndr[0] - 1), range(1, ndr[1] - 1)) if kernel == "diffusion" else ndr[0]

            def run():
                k(*dev, *scalars, ndrange=nd)
                tk.synchronize(self.cl)
            return run, (lambda: dev[0].numpy())
        if peer == "numba" and self.nb:
            f = self.nb[kernel]
            out = arrays[0]
            return (lambda: f(*arrays, *scalars)), (lambda: out)
        if peer == "taichi" and self.ti:
            f, sync = self.ti[kernel], self.ti["sync"]
            out = arrays[0]

            def run():
                f(*arrays, *scalars)
                sync()
            return run, (lambda: out)
        if peer == "warp" and self.wp:
            wpm, f = self.wp["wp"], self.wp[kernel]
            warrs = [self.wp["wrap"](x) for x in arrays]
            dim = (ndr[0] - 2, ndr[1] - 2) if kernel == "diffusion" else ndr[0]

            def run():
                wpm.launch(f, dim=dim, inputs=[*warrs, *scalars], device="cpu")
                wpm.synchronize()
            return run, (lambda: warrs[0].numpy())
        return None


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------

class Timer:
    def __init__(self, min_time: float, min_reps: int, rounds: int, stat: str, warmup: int = 2):
        self.min_time, self.min_reps, self.rounds, self.warmup = min_time, min_reps, rounds, warmup
        self.stat = stat
        self.agg = min if stat == "best" else statistics.median
        self.attempts, self.pause = 3, 1.0          # re-measurements of a disturbed row, pause between
        self.retry_until = float("inf")             # no re-measuring after this perf_counter() time

    def may_retry(self) -> bool:
        return time.perf_counter() < self.retry_until

    def block(self, fn, budget, reps):
        """Per-launch times (perf_counter around each call) for >= budget s and >= reps calls."""
        out = []
        t_end = time.perf_counter() + budget
        while len(out) < reps or time.perf_counter() < t_end:
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
            if len(out) >= 200000:
                break
        return out

    def measure(self, fns: dict) -> dict:
        """Best or median per-launch time of each callable; rounds interleaved (A B C A B C ...)."""
        samples = {k: [] for k in fns}
        for f in fns.values():
            for _ in range(self.warmup):
                f()
        per_budget = self.min_time / self.rounds
        per_reps = max(1, -(-self.min_reps // self.rounds))
        for _ in range(self.rounds):
            for k, f in fns.items():
                samples[k] += self.block(f, per_budget, per_reps)
        return {k: self.agg(v) for k, v in samples.items()}


# ---------------------------------------------------------------------------------------------
# 1. memory-bound kernels
# ---------------------------------------------------------------------------------------------

PEER_COLS = ("tk-CL", "numba", "taichi", "warp")


def verify(name, impl, got, want, rtol):
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    except AssertionError as e:
        raise AssertionError(f"{impl} gives wrong results for {name}:\n{e}") from None


def setup_case(kernel, mb, lib, nt, rng, peers):
    """Arrays, the expected result, and {impl: (run, result)} for one kernel and size."""
    nbytes = int(mb * MiB)
    impls = {}
    if kernel == "copy":
        n = nbytes // (2 * 4)
        b = rng.random(n, dtype=np.float32)
        a = np.empty_like(b)
        want = b
        traffic = 2 * n * 4
        ka = tk_copy(tk.CPU(threads=nt))
        pa, pb = a.ctypes.data, b.ctypes.data
        impls["tinykernels"] = (lambda: ka(a, b, ndrange=n), lambda: a)
        impls["C-ref"] = (lambda: lib.ref_copy_f32(pa, pb, n, nt), lambda: a)
        impls["numpy"] = (lambda: np.copyto(a, b), lambda: a)
        peer_args = ((a, b), (), (n,))
        outs, check = [a], (lambda r: r)
        rtol, desc = 0, f"n={n}"
    elif kernel == "triad":
        n = nbytes // (3 * 4)
        b = rng.random(n, dtype=np.float32)
        c = rng.random(n, dtype=np.float32)
        a = np.empty_like(b)
        tmp = np.empty_like(b)
        s = np.float32(2.5)
        want = b + s * c
        traffic = 3 * n * 4
        ka = tk_triad(tk.CPU(threads=nt))
        pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data

        def np_triad():
            np.multiply(c, s, out=tmp)
            np.add(b, tmp, out=a)
        impls["tinykernels"] = (lambda: ka(a, b, c, s, ndrange=n), lambda: a)
        impls["C-ref"] = (lambda: lib.ref_triad_f32(pa, pb, pc, s, n, nt), lambda: a)
        impls["numpy"] = (np_triad, lambda: a)
        peer_args = ((a, b, c), (s,), (n,))
        outs, check = [a], (lambda r: r)
        rtol, desc = 1e-6, f"n={n}"
    else:  # diffusion, float64
        nx = ny = int((nbytes / (2 * 8)) ** 0.5)
        T = rng.random((nx, ny))
        T2 = np.empty_like(T)
        dt, lam = np.float64(0.1), np.float64(0.2)
        want = T[1:-1, 1:-1] + dt * lam * (T[:-2, 1:-1] + T[2:, 1:-1] + T[1:-1, :-2] + T[1:-1, 2:]
                                           - 4.0 * T[1:-1, 1:-1])
        traffic = 2 * nx * ny * 8
        ka = tk_diffusion(tk.CPU(threads=nt))
        p2, p1 = T2.ctypes.data, T.ctypes.data
        ndr = (range(1, nx - 1), range(1, ny - 1))
        I, U, D, L, R = (slice(1, -1), slice(1, -1)), (slice(None, -2), slice(1, -1)), \
            (slice(2, None), slice(1, -1)), (slice(1, -1), slice(None, -2)), (slice(1, -1), slice(2, None))

        def np_diff():
            T2[I] = T[I] + dt * lam * (T[U] + T[D] + T[L] + T[R] - 4.0 * T[I])
        impls["tinykernels"] = (lambda: ka(T2, T, dt, lam, ndrange=ndr), lambda: T2)
        impls["C-ref"] = (lambda: lib.ref_diffusion_f64(p2, p1, dt, lam, nx, ny, nt), lambda: T2)
        impls["numpy"] = (np_diff, lambda: T2)
        peer_args = ((T2, T), (dt, lam), (nx, ny))
        outs, check = [T2], (lambda r: r[1:-1, 1:-1])
        rtol, desc = 1e-12, f"{nx}x{ny}"
    for p in PEER_COLS:
        try:
            m = peers.make(p, kernel, *peer_args)
        except Exception as e:
            peers.errors[f"{p}/{kernel}"] = f"{type(e).__name__}: {e}"
            m = None
        if m is not None:
            impls[p] = m
    return impls, outs, want, check, rtol, traffic, desc


def run_stream(args, lib, peers, timer, nt):
    sizes = [s for s in (1, 4, 16, 64, 256, 1024) if s <= args.max_mb]
    rng = np.random.default_rng(12345)
    memcpy = {}
    results = {}
    for kernel in ("copy", "triad", "diffusion"):
        rows = []
        for mb in sizes:
            impls, outs, want, check, rtol, traffic, desc = setup_case(kernel, mb, lib, nt, rng, peers)
            # verify every implementation once (output poisoned with NaN first)
            ok_impls = {}
            for name, (run, res) in impls.items():
                for o in outs:
                    o.fill(np.nan)
                try:
                    run()
                    if name == "tinykernels":
                        tk.synchronize(tk.CPU(threads=nt))
                    verify(f"{kernel} ({mb} MiB)", name, check(res()), want, rtol)
                except Exception as e:
                    if name in PEER_COLS:       # an optional peer failing is reported, not fatal
                        peers.errors[f"{name}/{kernel}"] = f"{type(e).__name__}: {str(e)[:200]}"
                        continue
                    raise
                ok_impls[name] = run
            # re-measure (after a pause) while other processes took CPU time during the cell
            best = None
            for attempt in range(timer.attempts):
                fl = ForeignLoad()
                times = timer.measure(ok_impls)
                busy = fl.cores()
                if best is None or (busy or 0) < (best[1] or 0):
                    best = (times, busy)
                if busy is None or busy <= BUSY_LIMIT or not timer.may_retry():
                    break
                time.sleep(timer.pause)
            times, busy = best
            tk.synchronize(tk.CPU(threads=nt))
            gbs = {k: traffic / t / GB for k, t in times.items()}
            if kernel == "copy":
                memcpy[mb] = gbs["C-ref"]
            rows.append((mb, desc + ("*" if busy is not None and busy > BUSY_LIMIT else " "), gbs))
            del impls, outs, want, ok_impls
        results[kernel] = rows
    return results, memcpy


def print_stream(results, memcpy, nt, timer):
    cols = ["tinykernels", "C-ref", "numpy", *PEER_COLS]
    heads = {
        "copy": "copy       a[i] = b[i]                 float32, 2 arrays moved",
        "triad": "triad      a[i] = b[i] + s*c[i]        float32, 3 arrays moved",
        "diffusion": "diffusion  2-D 5-point, interior     float64, 2 arrays moved (read T, write T2)",
    }
    print(f"\n== 1. Memory-bound kernels: T_eff [GB/s, 1 GB = 1e9 B] = bytes that must move / {timer.stat} "
          f"launch time; {nt} thread(s) (numpy: 1) ==")
    for kernel, rows in results.items():
        print(f"\n{heads[kernel]}")
        hdr = f"{'MiB':>6} {'shape':>12} " + " ".join(f"{c:>11}" for c in cols) + f" {'memcpy':>8}"
        if kernel != "copy":
            hdr += f" {'tk/C':>6}  target"
        print(hdr)
        print("-" * len(hdr))
        for mb, desc, gbs in rows:
            line = f"{mb:>6} {desc:>12} " + " ".join(
                f"{gbs[c]:>11.2f}" if c in gbs else f"{'n/a':>11}" for c in cols)
            line += f" {memcpy[mb]:>8.2f}" if mb in memcpy else f" {'n/a':>8}"
            if kernel != "copy":
                r = gbs["tinykernels"] / gbs["C-ref"]
                line += f" {r:>6.3f}"
                if mb >= T_RATIO_MIN_MB:
                    line += f"  >={T_RATIO} {mark(r >= T_RATIO)}"
            print(line)


# ---------------------------------------------------------------------------------------------
# 2. launch overhead
# ---------------------------------------------------------------------------------------------

def stream_footnote(results):
    if any(d.endswith("*") for rows in results.values() for _, d, _ in rows):
        print(f"\n* other processes kept more than {BUSY_LIMIT} cores busy while this row was measured, even after "
              "re-measuring; its numbers are unreliable")


def run_launch(args, lib, peers, nt, timer):
    agg = timer.agg
    N = 20000 if args.quick else 100000
    rounds = 3 if args.quick else 5
    a = np.zeros(1, np.float32)
    b = np.full(1, 3.0, np.float32)
    s = np.float32(2.0)
    cpu = tk.CPU(threads=nt)
    k = tk_tiny(cpu)
    k(a, b, s, ndrange=1)
    tk.synchronize(cpu)
    np.testing.assert_allclose(a, [6.0])
    pa, pb = a.ctypes.data, b.ctypes.data
    f_empty = lib.ref_empty3

    def loop_reused():
        for _ in range(N):
            k(a, b, s, ndrange=1)

    kg = tk_tiny_globals(cpu)
    kg(a, b, s, ndrange=1)

    def loop_globals():
        for _ in range(N):
            kg(a, b, s, ndrange=1)

    def loop_inst_backend():
        for _ in range(N):
            tk_tiny(cpu)(a, b, s, ndrange=1)

    def loop_inst_new():
        for _ in range(N):
            tk_tiny(tk.CPU(threads=nt))(a, b, s, ndrange=1)

    def loop_launch():
        for _ in range(N):
            tk_tiny.launch(a, b, s, ndrange=1)

    def loop_cref():
        for _ in range(N):
            f_empty(pa, pb, s)

    def loop_empty():
        for _ in range(N):
            pass

    loops = [
        ("tinykernels  k(a, b, s, ndrange=1), k reused", loop_reused, True),
        ("tinykernels  the same, k reading 3 globals and a @tk.func", loop_globals, False),
        ("tinykernels  kern(backend)(...), backend object reused", loop_inst_backend, False),
        ("tinykernels  kern(tk.CPU())(...), instantiate each time", loop_inst_new, False),
        ("tinykernels  kern.launch(...), backend from the arrays", loop_launch, False),
    ]
    loops += launch_kinds(k, cpu, a, b, s, N)
    loops.append(("C reference  ctypes call of an empty 3-arg C function", loop_cref, False))
    if peers.nb:
        nbt = peers.nb["tiny"]
        nbt(a, b, s)

        def loop_numba():
            for _ in range(N):
                nbt(a, b, s)
        loops.append(("numba        @njit 3-arg function", loop_numba, False))
    else:
        loops.append(("numba        @njit 3-arg function", None, False))

    res = []
    base = statistics.median(_time_loop(loop_empty, 1) for _ in range(3)) / N
    for label, fn, target in loops:
        if fn is None:
            res.append((label, None, target))
            continue
        fn()   # warm-up
        best = None
        for attempt in range(timer.attempts):
            fl = ForeignLoad()
            per = [_time_loop(fn, 1) / N for _ in range(rounds)]
            busy = fl.cores()
            if best is None or (busy or 0) < (best[1] or 0):
                best = (agg(per), busy)
            if busy is None or busy <= BUSY_LIMIT or not timer.may_retry():
                break
            time.sleep(timer.pause)
        res.append((label + ("*" if best[1] is not None and best[1] > BUSY_LIMIT else ""), best[0], target))
    tk.synchronize(cpu)
    np.testing.assert_allclose(a, [6.0])
    return res, N, rounds, base


def launch_kinds(k, cpu, a, b, s, N) -> list:
    """Loops of ``k``'s launch with each kind of argument (and keywords, a stream), and the
    torch CPU op doing the same work where torch is installed: (label, loop, target) rows."""
    ka, kb = tk.asarray(a, backend=cpu), tk.asarray(b, backend=cpu)
    st = cpu.stream()
    fs = 2.0

    def loop(f):
        def run():
            for _ in range(N):
                f()
        return run

    def loop_stream():
        for _ in range(N):
            k(a, b, s, ndrange=1, stream=st)
        st.synchronize()
    rows = [("tinykernels  the same, Python float scalar", loop(lambda: k(a, b, fs, ndrange=1))),
            ("tinykernels  the same, by keyword k(a, b=b, s=s, ...)", loop(lambda: k(a, b=b, s=s, ndrange=1))),
            ("tinykernels  the same, tk.Array arguments", loop(lambda: k(ka, kb, s, ndrange=1))),
            ("tinykernels  the same, stream=s (+ one synchronize)", loop_stream)]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        ta, tb = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        rows += [("tinykernels  the same, CPU torch tensors", loop(lambda: k(ta, tb, fs, ndrange=1))),
                 ("torch        torch.mul(b, s, out=a), CPU tensors", loop(lambda: torch.mul(tb, fs, out=ta)))]
    else:
        rows += [("tinykernels  the same, CPU torch tensors", None),
                 ("torch        torch.mul(b, s, out=a), CPU tensors", None)]
    return [(label, fn, False) for label, fn in rows]


def _time_loop(fn, _):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def print_launch(res, N, rounds, base, stat):
    print(f"\n== 2. Launch overhead: tiny kernel a[i] = b[i]*s, ndrange=1; loop of {N} launches, "
          f"{stat} of {rounds} loops; includes the Python for-loop ({base * 1e9:.0f} ns/iter) ==")
    print(f"{'':58} {'us/launch':>10}  target")
    print("-" * 84)
    for label, us, target in res:
        if us is None:
            print(f"{label:58} {'n/a':>10}")
            continue
        line = f"{label:58} {us * 1e6:>10.3f}"
        if target:
            line += f"  <={T_LAUNCH_US} us {mark(us * 1e6 <= T_LAUNCH_US)}"
        print(line)
    if any(label.endswith("*") for label, _, _ in res):
        print(f"* other processes kept more than {BUSY_LIMIT} cores busy during this row; unreliable")


# ---------------------------------------------------------------------------------------------
# 3. compile and cache (child processes with a private, initially empty TK_CACHE_DIR)
# ---------------------------------------------------------------------------------------------

KERNEL_FILE = '''\
# generated by benchmarks/bench_cpu.py (run {nonce}); unique per run so nothing is ever cached
import tinykernels as tk


@tk.kernel
def first_{nonce}(a, b: tk.Const, s):
    i = tk.index()
    a[i] = b[i] * s + {c0!r}
{fresh}
'''

FRESH = '''

@tk.kernel
def fresh{k}_{nonce}(a, b: tk.Const, s):
    i = tk.index()
    x = b[i] * s
    if x > {c!r}:
        x = x - {c!r}
    a[i] = x + {k}.0
'''

CHILD = r'''
import importlib.util, json, sys, time
mode, path, names, threads = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
import numpy as np
import tinykernels as tk
from tinykernels.runtime.compiler import STATS
from tinykernels.runtime import launcher
spec = importlib.util.spec_from_file_location("tk_bench_kernels", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
a = np.zeros(1000, np.float32)
b = np.arange(1000, dtype=np.float32)
s = np.float32(2.0)
cpu = tk.CPU(threads=threads)
out = {"mode": mode}
if mode == "warm":
    # load the (already cached) first kernel so the toolchain and launcher are set up
    getattr(mod, names[0])(cpu)(a, b, s, ndrange=a.size)
    names = names[1:]
before = dict(STATS)
insts, firsts, seconds, steady = [], [], [], []
for nm in names:
    kern = getattr(mod, nm)
    ti = time.perf_counter(); k = kern(cpu)
    t0 = time.perf_counter(); k(a, b, s, ndrange=a.size); t1 = time.perf_counter()
    k(a, b, s, ndrange=a.size); t2 = time.perf_counter()
    insts.append(t0 - ti)
    ts = []
    for _ in range(1000):
        t3 = time.perf_counter(); k(a, b, s, ndrange=a.size); ts.append(time.perf_counter() - t3)
    tk.synchronize(cpu)
    firsts.append(t1 - t0); seconds.append(t2 - t1); steady.append(sorted(ts)[len(ts) // 2])
out.update(inst=insts, first=firsts, second=seconds, steady=steady,
           stats={k: STATS[k] - before[k] for k in STATS}, a_sum=float(a.sum()),
           launcher=type(launcher.get()).__name__)
print("TKBENCH " + json.dumps(out))
'''


def _child(tmp: Path, cache: Path, mode: str, kfile: Path, names, nt, pyc: bool = True) -> dict:
    """Run CHILD in a new interpreter. pyc=True: Python's bytecode cache on (in a private
    PYTHONPYCACHEPREFIX, so nothing is written next to the sources), as for an installed package;
    pyc=False: PYTHONDONTWRITEBYTECODE=1, every module of tinykernels that is not cached elsewhere is
    compiled from source at import."""
    env = dict(os.environ)
    env["TK_CACHE_DIR"] = str(cache)
    if pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    pkg_parent = str(Path(tk.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, str(tmp / "child.py"), mode, str(kfile), ",".join(names), str(nt)],
                       capture_output=True, text=True, env=env, timeout=300)
    for line in r.stdout.splitlines():
        if line.startswith("TKBENCH "):
            return json.loads(line[8:])
    raise RuntimeError(f"compile-benchmark child ({mode}) failed (rc={r.returncode}):\n"
                       f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


def run_compile(args, nt):
    nfresh = 3
    nonce = uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory(prefix="tkbench-compile-") as td:
        tmp = Path(td)
        cache = tmp / "cache"          # empty: nothing compiled, no launcher extension, no probe
        (tmp / "child.py").write_text(CHILD)
        rnd = np.random.default_rng()
        fresh = "".join(FRESH.format(k=k, nonce=nonce, c=float(round(rnd.random() + 1, 6)))
                        for k in range(nfresh))
        kfile = tmp / f"tk_bench_kernels_{nonce}.py"
        kfile.write_text(KERNEL_FILE.format(nonce=nonce, c0=float(round(rnd.random(), 6)), fresh=fresh))
        first_name = f"first_{nonce}"
        fresh_names = [f"fresh{k}_{nonce}" for k in range(nfresh)]

        # (a) first-ever launch in an empty cache dir: compiler probe + launcher extension + compile
        first = _child(tmp, cache, "first", kfile, [first_name], nt)
        assert first["stats"]["compiles"] == 1, first
        # (b) cold compile of fresh kernels in a warm process (toolchain + launcher already loaded)
        cold = _child(tmp, cache, "warm", kfile, [first_name] + fresh_names, nt)
        assert cold["stats"]["compiles"] == nfresh, cold
        # (c) disk-cache load in new processes: the first launch must not compile
        disk, disk_nopyc = [], []
        for pyc, out in ((True, disk), (False, disk_nopyc)):
            for _ in range(3):
                d = _child(tmp, cache, "disk", kfile, [fresh_names[0]], nt, pyc=pyc)
                assert d["stats"]["compiles"] == 0, f"the child compiled although the kernel was cached: {d}"
                assert d["stats"]["disk_hits"] >= 1, d
                out.append(d)
        want = float((np.arange(1000, dtype=np.float32) * np.float32(2.0)).sum())
        for r in [first, cold] + disk + disk_nopyc:
            assert abs(r["a_sum"] - want) / want < 0.1, r       # the kernels ran and wrote something
    return {"first": first, "cold": cold, "disk": disk, "disk_nopyc": disk_nopyc, "nfresh": nfresh}


def print_compile(r):
    first, cold, disk = r["first"], r["cold"], r["disk"]
    med = statistics.median
    f_inst, f_launch = first["inst"][0], first["first"][0]
    f_total = f_inst + f_launch
    f_cc = first["stats"]["compile_seconds"]
    cold_ms = med(i + f for i, f in zip(cold["inst"], cold["first"])) * 1e3
    cc_ms = cold["stats"]["compile_seconds"] / r["nfresh"] * 1e3
    second_us = med(cold["second"]) * 1e6
    steady_us = med(cold["steady"]) * 1e6
    d_inst = med(d["inst"][0] for d in disk) * 1e3
    d_first = med(d["first"][0] for d in disk) * 1e3
    d_total = med(d["inst"][0] + d["first"][0] for d in disk) * 1e3
    W = 78

    def row(label, val, unit, tgt=None):
        line = f"{label:{W}} {val:>9.{2 if unit == 'us' or val < 20 else 1}f} {unit}"
        if tgt is not None:
            line += f"  <={tgt[0]:g} {unit} {mark(val <= tgt[0])}{tgt[1]}"
        print(line)

    print("\n== 3. Compile and cache (child processes, private TK_CACHE_DIR that starts empty; "
          f"launcher: {cold['launcher']}) ==")
    print("   'instantiate' = kern(tk.CPU()), 'launch' = k(a, b, s, ndrange=1000); perf_counter in the child")
    print(f"{'':{W}} {'time':>12}  target")
    print("-" * (W + 34))
    row("first-ever launch in an empty cache: instantiate + launch", f_total * 1e3, "ms")
    row("  instantiate (compiler probe, build + load launcher extension)", f_inst * 1e3, "ms")
    row("  launch (parse, codegen, compile, load)", f_launch * 1e3, "ms")
    row("    of which the C compiler (STATS compile_seconds)", f_cc * 1e3, "ms")
    row(f"cold compile: instantiate + first launch of a fresh kernel, median of {r['nfresh']}", cold_ms, "ms",
        (T_COLD_MS, ""))
    row("  of which the C compiler (STATS compile_seconds / kernel)", cc_ms, "ms")
    row("cached launch: second launch of that kernel, same process", second_us, "us")
    row("  steady state (median of 1000 further launches)", steady_us, "us")
    row("disk-cache load in a NEW process: first launch (median of 3)", d_first, "ms", (T_DISK_MS, ""))
    row("  + instantiate in that process (toolchain, launcher load)", d_inst, "ms")
    row("  instantiate + first launch", d_total, "ms", (T_DISK_MS, " (stricter)"))
    print(f"{'  runs: first launch, ms (STATS compiles == 0 asserted in each)':{W}} "
          + ", ".join(f"{d['first'][0] * 1e3:.2f}" for d in disk))
    nopyc = r["disk_nopyc"]
    row("  same, first launch without a .pyc cache (PYTHONDONTWRITEBYTECODE=1)",
        med(d["first"][0] for d in nopyc) * 1e3, "ms")
    print("   (the children run with Python's bytecode cache in a private PYTHONPYCACHEPREFIX, like an"
          " installed package;\n    the last row shows the cost when tinykernels' lazily imported modules"
          " are compiled from source)")
    return cold_ms, d_first, d_total


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

class ForeignLoad:
    """CPU time used by OTHER processes while this benchmark runs (/proc/stat minus our own)."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            # user nice system idle iowait irq softirq steal ...
            return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self):
        """Average number of cores other processes kept busy since construction (None if unknown)."""
        b = self._busy()
        if b is None or self.busy0 is None:
            return None
        wall = time.perf_counter() - self.t0
        return max(0.0, (b - self.busy0) - (self._own() - self.own0)) / max(wall, 1e-9)


def foreign_load_note(cores, ncpu) -> str:
    if cores is None:
        return "unknown (no /proc/stat)"
    s = f"{cores:.2f} of {ncpu} cores busy with other processes on average"
    if cores > BUSY_LIMIT:
        s += "  ** WARNING: the machine was not idle; throughput and launch numbers are unreliable **"
    return s


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


T_ADJ = 3.0     # target: the adjoint takes at most 3x the forward kernel's time


def _autodiff_cases(be, mb, lib=None, nt=1):
    """[(adjoint case, forward case, forward launch, adjoint launch, reference)] for one backend:
    triad with and without the scalar gradient, the 2-D and 3-D diffusion stencils (interior
    ranges) with dt and lam. ``reference`` is None, or for triad on the host with the C
    reference library ``lib`` the (forward, adjoint) pair of the hand-written C + OpenMP
    kernels on the same arrays, timed in the same rounds."""
    rng = np.random.default_rng(7)
    dev = (lambda x: x) if be.is_host else (lambda x: tk.asarray(x, backend=be))  # noqa: E731
    n = int(mb * MiB) // 12
    a, b, c = (dev(rng.random(n, dtype=np.float32)) for _ in range(3))
    da, db, dc = (dev(np.zeros(n, np.float32)) for _ in range(3))
    nx = int((mb * MiB / 16) ** 0.5)
    n3 = int((mb * MiB / 16) ** (1 / 3))
    T, T2, dT, dT2 = (dev(x) for x in (rng.random((nx, nx)), np.zeros((nx, nx)), np.zeros((nx, nx)),
                                        rng.random((nx, nx))))
    U, U2, dU, dU2 = (dev(x) for x in (rng.random((n3,) * 3), np.zeros((n3,) * 3), np.zeros((n3,) * 3),
                                        rng.random((n3,) * 3)))
    ndr2 = (range(1, nx - 1),) * 2
    ndr3 = (range(1, n3 - 1),) * 3
    kt, at = tk_triad(be), tk.adjoint(tk_triad)(be)
    kd, ad = tk_diffusion(be), tk.adjoint(tk_diffusion)(be)
    k3, a3 = tk_diffusion3d(be), tk.adjoint(tk_diffusion3d)(be)
    s = np.float32(2.5)
    ds, g1, g2 = (dev(np.zeros(1)) for _ in range(3))

    def triad():
        kt(a, b, c, s, ndrange=n)

    def diff2():
        kd(T2, T, 0.1, 0.2, ndrange=ndr2)

    def diff3():
        k3(U2, U, 0.1, 0.2, ndrange=ndr3)
    ref_s = ref_nos = ref_d2 = ref_d3 = None
    clr = _cl_reference(be)
    if clr is not None:     # the hand-written OpenCL kernels on the same device buffers
        def clfwd():
            clr.triad(a, b, c, s, n)
        ref_s = (clfwd, lambda: clr.triad_adjoint(da, db, c, dc, s, n, ds))
        ref_nos = (clfwd, lambda: clr.triad_adjoint(da, db, c, dc, 2.0, n))
        ref_d2 = (lambda: clr.diffusion(T2, T, 0.1, 0.2, nx),
                  lambda: clr.diffusion_adjoint(dT2, T, dT, 0.1, g1, 0.2, g2, nx))
        ref_d3 = (lambda: clr.diffusion3d(U2, U, 0.1, 0.2, n3),
                  lambda: clr.diffusion3d_adjoint(dU2, U, dU, 0.1, g1, 0.2, g2, n3))
    if lib is not None and be.is_host:
        P = (lambda x: x.ctypes.data)  # noqa: E731
        cds = np.zeros(1)

        def cfwd():
            lib.ref_triad_f32(P(a), P(b), P(c), s, n, nt)
        ref_s = (cfwd, lambda: lib.ref_triad_adjoint_f32(P(da), P(db), P(c), P(dc), s, P(cds), n, nt))
        ref_nos = (cfwd, lambda: lib.ref_triad_adjoint_nos_f32(P(da), P(db), P(dc), 2.0, n, nt))
    return [
        ("triad adjoint (arrays and the scalar s)", "triad forward", triad,
         lambda: at(a, da, b, db, c, dc, s, ds, ndrange=n), ref_s),
        ("triad adjoint (arrays; s an int, not differentiated)", "triad forward", triad,
         lambda: at(a, da, b, db, c, dc, 2, ndrange=n), ref_nos),
        ("diffusion 2-D adjoint (T, dt, lam)", "diffusion 2-D forward", diff2,
         lambda: ad(T2, dT2, T, dT, 0.1, g1, 0.2, g2, ndrange=ndr2), ref_d2),
        ("diffusion 3-D adjoint (T, dt, lam)", "diffusion 3-D forward", diff3,
         lambda: a3(U2, dU2, U, dU, 0.1, g1, 0.2, g2, ndrange=ndr3), ref_d3),
    ]


def _cl_reference(be):
    """The hand-written OpenCL references (benchmarks/cl_reference.py) for an OpenCL backend,
    checked against NumPy; None on other backends or without pyopencl."""
    if be.is_host or type(be).__name__ != "OpenCL":
        return None
    try:
        from cl_reference import CLReference, check
        ref = CLReference(be)
    except Exception as e:   # noqa: BLE001 - a missing/failed reference only drops its rows
        print(f"  (no hand-written OpenCL reference: {type(e).__name__}: {e})")
        return None
    check(ref, be)
    return ref


def check_c_triad_adjoint(lib) -> None:
    """The hand-written C triad adjoints against NumPy (small arrays, float64 sums)."""
    rng = np.random.default_rng(3)
    n = 10007
    c, g, db0, dc0 = (rng.random(n, dtype=np.float32) for _ in range(4))
    for with_s in (True, False):
        da, db, dc, ds = g.copy(), db0.copy(), dc0.copy(), np.full(1, 0.5)
        P = (lambda x: x.ctypes.data)  # noqa: E731
        if with_s:
            lib.ref_triad_adjoint_f32(P(da), P(db), P(c), P(dc), 2.5, P(ds), n, 2)
        else:
            lib.ref_triad_adjoint_nos_f32(P(da), P(db), P(dc), 2.5, n, 2)
        ok = (not da.any() and np.allclose(db, db0 + g, rtol=1e-6)
              and np.allclose(dc, dc0 + np.float32(2.5) * g, rtol=1e-6)
              and (not with_s or np.isclose(ds[0], 0.5 + np.dot(g.astype(np.float64), c), rtol=1e-5)))
        if not ok:
            raise SystemExit("the C reference triad adjoint is wrong (with_s=%s)" % with_s)


def paired_ratio(fwd, adj, rounds: int, pairs: int, budget: float, warmup: int = 2, ref=None):
    """Adjoint/forward time ratio measured interleaved: each round alternates forward and
    adjoint calls (>= `pairs` pairs and >= `budget` s), takes the fastest call of each and
    their ratio; returns (median ratio over rounds, median forward, median adjoint time),
    so load that slows a whole round cancels in its ratio. With ``ref`` (a reference
    (forward, adjoint) pair) each pair of calls is followed by a pair of reference calls,
    and the result has a second triple for the reference: the two ratios then come from the
    same rounds, on the same machine state."""
    calls = [fwd, adj] + (list(ref) if ref else [])
    for _ in range(warmup):
        for f in calls:
            f()
    ratios, times = [[] for _ in range(len(calls) // 2)], [[] for _ in calls]
    for _ in range(rounds):
        ts = [[] for _ in calls]
        t_end = time.perf_counter() + budget
        while len(ts[0]) < pairs or time.perf_counter() < t_end:
            for f, t in zip(calls, ts):
                t0 = time.perf_counter()
                f()
                t.append(time.perf_counter() - t0)
        for k, t in enumerate(ts):
            times[k].append(min(t))
        for k in range(len(ratios)):
            ratios[k].append(times[2 * k + 1][-1] / times[2 * k][-1])
    out = tuple((statistics.median(ratios[k]), statistics.median(times[2 * k]), statistics.median(times[2 * k + 1]))
                for k in range(len(ratios)))
    return out[0] if ref is None else out


def run_autodiff(args, nt, timer, lib=None) -> list:
    """Adjoint (tk.adjoint) time relative to the forward kernel: triad, 2-D and 3-D diffusion,
    on the CPU backend and (when available) OpenCL; forward and adjoint calls alternate. With
    the C reference library ``lib``, the CPU triad rows also time the hand-written C + OpenMP
    forward and adjoint in the same rounds (their ratio is the machine's, not tinykernels')."""
    mb = min(16 if args.quick else 64, args.max_mb)
    rounds, pairs, budget = (3, 3, 0.05) if args.quick else (9, 5, 0.15)
    backends = [("CPU", tk.CPU(threads=nt))]
    if tk.backends()["OpenCL"][0]:
        backends.append(("CL", tk.backend("CL")))
    rows = []
    print(f"\n== 4. Autodiff: adjoint time / forward time ({mb:g} MiB of forward traffic; target <= {T_ADJ}x) ==\n")
    print(f"  forward and adjoint calls alternate ({rounds} rounds of >= {pairs} pairs and >= {budget} s, each "
          "call timed\n  with its synchronization and host cost, compile excluded); a round's ratio is its "
          "fastest adjoint over\n  its fastest forward; the MEDIAN of the rounds' ratios is reported, with "
          "the median of the rounds' times\n")
    for label, be in backends:
        sync = (lambda: None) if be.is_host else (lambda: tk.synchronize(be))  # noqa: E731
        for name, fname, fwd, adj, ref in _autodiff_cases(be, mb, lib, nt):
            res = paired_ratio(lambda f=fwd: (f(), sync()), lambda f=adj: (f(), sync()),
                               rounds, pairs, budget, ref=ref)
            (r, tf, ta), cref = (res[0], res[1]) if ref else (res, None)
            print(f"  {label:<4s} {fname:<55s} {tf * 1e3:9.3f} ms")
            print(f"  {label:<4s} {name:<55s} {ta * 1e3:9.3f} ms   {r:5.2f}x  {mark(r <= T_ADJ)}")
            note = ""
            if cref:
                cr, ctf, cta = cref
                lang = "C" if be.is_host else "OpenCL C"
                print(f"  {label:<4s} {'  ' + lang + ' reference, same rounds: forward':<55s} {ctf * 1e3:9.3f} ms")
                print(f"  {label:<4s} {'  ' + lang + ' reference, same rounds: hand-written adjoint':<55s} "
                      f"{cta * 1e3:9.3f} ms   {cr:5.2f}x")
                note = f" ({lang} ref {cr:.2f}x)"
            rows.append((f"{label} {name} / forward{note}", f"{r:.2f}x", f"<= {T_ADJ}x", r <= T_ADJ))
            sys.stdout.flush()
    if lib is not None:
        print("  (C reference: the same triad forward and its adjoint written by hand in C + OpenMP, on the "
              "same arrays,\n   timed in the same rounds; the ratio the memory system allows for these "
              "streams: 3 for the forward,\n   6 for the adjoint, 7 with the scalar gradient)")
    if len(backends) > 1:
        print("  (OpenCL C reference: the triad and the 2-D and 3-D stencils, forward and adjoint, written by hand in OpenCL C "
              "\n   (benchmarks/cl_reference.py: a gather for dT, per-strip partial sums for dt and lam), run by pyopencl "
              "\n   on the same buffers in the same rounds)")
    print("  (stencil adjoints: gather kernels compute dT without atomics, the main adjoint the rest; "
          "scalar gradients\n   are summed per thread on the CPU, per 16 items on OpenCL; see docs/autodiff.md)")
    return rows


def _fd_check(name: str, run, xs: list, vs: list, jvp: np.ndarray, h: float = 1e-6) -> None:
    """Exit 1 unless ``jvp`` matches the central float64 finite difference of ``run`` (inputs
    -> output) along the tangents ``vs``."""
    fd = (run([x + h * v for x, v in zip(xs, vs)]) - run([x - h * v for x, v in zip(xs, vs)])) / (2 * h)
    if not np.allclose(jvp, fd, rtol=1e-6, atol=1e-7 * (np.abs(fd).max() + 1)):
        raise SystemExit(f"{name}: the JVP disagrees with finite differences (max error "
                         f"{np.abs(jvp - fd).max():.3g})")


def _forward_mode_cases(be, mb, nt):
    """[(name, primal launch, tk.Forward JVP, {peer: JVP})] for triad (float32, tangents of b,
    c and s) and the 2-D diffusion stencil (float64, tangents of T and dt); each JVP (tk's
    and the peers') is first checked against float64 finite differences on small inputs."""
    rng = np.random.default_rng(11)
    cpu = tk.CPU(threads=nt)
    kt, kd = tk_triad(cpu), tk_diffusion(cpu)

    def triad_tk(a, b, c, s, db, dc, ds, n):
        da = np.zeros_like(a)
        tk.autodiff(tk.Forward, lambda a_, b_, c_, s_: kt(a_, b_, c_, s_, ndrange=n), tk.Duplicated(a, da),
                    tk.Duplicated(b, db), tk.Duplicated(c, dc), tk.Duplicated(s, ds))
        return da

    def diff_tk(T2, T, dt, dT, ddt, nx):
        dT2 = np.zeros_like(T2)
        tk.autodiff(tk.Forward, lambda y, x, t: kd(y, x, t, 0.2, ndrange=(range(1, nx - 1),) * 2),
                    tk.Duplicated(T2, dT2), tk.Duplicated(T, dT), tk.Duplicated(dt, ddt))
        return dT2
    # small float64 checks against finite differences
    m = 1000
    b, c, db, dc = (rng.standard_normal(m) for _ in range(4))
    _fd_check("triad tk.Forward", lambda x: x[0] + x[2] * x[1], [b, c, 1.5], [db, dc, 0.3],
              triad_tk(np.zeros(m), b, c, 1.5, db, dc, 0.3, m))
    k = 34
    T, dT = rng.standard_normal((k, k)), rng.standard_normal((k, k))

    def diff_np(x):
        out = np.zeros((k, k))
        X, t = x[0], x[1]
        out[1:-1, 1:-1] = X[1:-1, 1:-1] + t * 0.2 * (X[:-2, 1:-1] + X[2:, 1:-1] + X[1:-1, :-2] + X[1:-1, 2:]
                                                      - 4.0 * X[1:-1, 1:-1])
        return out
    _fd_check("diffusion 2-D tk.Forward", diff_np, [T, 0.1], [dT, 0.7], diff_tk(np.zeros((k, k)), T, 0.1, dT, 0.7, k))

    n = int(mb * MiB) // 12
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))
    db, dc = (rng.random(n, dtype=np.float32) for _ in range(2))
    s, ds = np.float32(2.5), np.float32(0.5)
    nx = int((mb * MiB / 16) ** 0.5)
    T, T2, dT = rng.random((nx, nx)), np.zeros((nx, nx)), rng.random((nx, nx))
    ndr = (range(1, nx - 1),) * 2
    da, dT2 = np.zeros_like(a), np.zeros_like(T2)
    cases = [
        ("triad (tangents of b, c, s; float32)", lambda: kt(a, b, c, s, ndrange=n),
         lambda: tk.autodiff(tk.Forward, lambda a_, b_, c_, s_: kt(a_, b_, c_, s_, ndrange=n), tk.Duplicated(a, da),
                             tk.Duplicated(b, db), tk.Duplicated(c, dc), tk.Duplicated(s, ds)),
         _jvp_peers("triad", nt, (b, c, s), (db, dc, ds), lambda x, y, z: x + z * y, None)),
        ("diffusion 2-D (tangents of T, dt; float64)", lambda: kd(T2, T, 0.1, 0.2, ndrange=ndr),
         lambda: tk.autodiff(tk.Forward, lambda y, x, t: kd(y, x, t, 0.2, ndrange=ndr), tk.Duplicated(T2, dT2),
                             tk.Duplicated(T, dT), tk.Duplicated(0.1, 0.7)),
         _jvp_peers("diffusion", nt, (T, np.float64(0.1)), (dT, np.float64(0.7)),
                    lambda X, t: X[1:-1, 1:-1] + t * 0.2 * (X[:-2, 1:-1] + X[2:, 1:-1] + X[1:-1, :-2]
                                                             + X[1:-1, 2:] - 4.0 * X[1:-1, 1:-1]), (diff_np, k))),
    ]
    return cases


def _jvp_peers(name, nt, primals, tangents, f, small) -> dict:
    """{peer: JVP call} for torch.func.jvp and jax.jvp (jitted) of ``f`` when installed, each
    checked first: against float64 finite differences of ``small`` = (numpy function, size)
    for the stencil, against the closed form ``db + s dc + ds c`` for triad."""
    out = {}
    rng = np.random.default_rng(13)
    try:
        import torch
        import torch.func
        torch.set_num_threads(nt)
        tp = [torch.from_numpy(np.asarray(x)) if np.ndim(x) else torch.tensor(x) for x in primals]
        tt = [torch.from_numpy(np.asarray(x)) if np.ndim(x) else torch.tensor(x) for x in tangents]
        out["torch.func.jvp"] = (lambda: torch.func.jvp(f, tuple(tp), tuple(tt)))
    except ImportError:
        pass
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        jf = jax.jit(lambda p, t: jax.jvp(f, p, t))
        jp, jt = tuple(jax.numpy.asarray(x) for x in primals), tuple(jax.numpy.asarray(x) for x in tangents)
        out["jax.jvp (jit)"] = (lambda: jax.block_until_ready(jf(jp, jt)))
    except ImportError:
        pass
    for peer, call in out.items():       # the peers' JVPs, checked on small float64 inputs
        if name == "triad":
            b, c, db, dc = (rng.standard_normal(64) for _ in range(4))
            xs, vs = [b, c, 1.5], [db, dc, 0.3]
            want = db + 1.5 * dc + 0.3 * c
        else:
            fn_np, k = small
            xs, vs = [rng.standard_normal((k, k)), 0.1], [rng.standard_normal((k, k)), 0.7]
            want = None
        if peer.startswith("torch"):
            import torch
            got = torch.func.jvp(f, tuple(torch.tensor(x, dtype=torch.float64) for x in xs),
                                 tuple(torch.tensor(v, dtype=torch.float64) for v in vs))[1].numpy()
        else:
            import jax
            got = np.asarray(jax.jvp(f, tuple(jax.numpy.asarray(x, dtype=np.float64) for x in xs),
                                     tuple(jax.numpy.asarray(v, dtype=np.float64) for v in vs))[1])
        if want is not None:
            if not np.allclose(got, want, rtol=1e-12):
                raise SystemExit(f"{name} {peer}: wrong JVP")
        else:
            full = np.zeros((k, k))
            full[1:-1, 1:-1] = got
            _fd_check(f"{name} {peer}", fn_np, xs, vs, full)
    return out


def run_forward_mode(args, nt) -> list:
    """tk.Forward (JVP) time relative to the primal kernel on the CPU, beside torch.func.jvp
    and jax.jvp when installed: each JVP alternates with the primal kernel in the same rounds
    (paired_ratio), so each ratio is over the primal launch measured with it."""
    mb = min(16 if args.quick else 64, args.max_mb)
    rounds, pairs, budget = (3, 3, 0.05) if args.quick else (9, 5, 0.15)
    print(f"\n== 5. Autodiff forward mode: JVP time / primal kernel time (CPU, {mb:g} MiB of primal traffic; "
          f"target <= {T_ADJ}x) ==\n")
    print("  tk.autodiff(tk.Forward, ...) runs the tangent kernel (primal and tangent in one pass); each JVP is\n"
          "  checked against float64 finite differences first; the peers compute the same JVP of the same\n"
          "  function (torch.func.jvp eagerly, jax.jvp jitted), each timed against tinykernels' primal kernel\n"
          "  in its own interleaved rounds\n")
    rows = []
    for name, fwd, jvp, peers in _forward_mode_cases(tk.CPU(threads=nt), mb, nt):
        r, tf, tj = paired_ratio(fwd, jvp, rounds, pairs, budget)
        print(f"  CPU  {name + ': primal kernel':<62s} {tf * 1e3:9.3f} ms")
        print(f"  CPU  {name + ': tk.Forward JVP':<62s} {tj * 1e3:9.3f} ms   {r:5.2f}x  {mark(r <= T_ADJ)}")
        rows.append((f"CPU {name} tk.Forward JVP / primal", f"{r:.2f}x", f"<= {T_ADJ}x", r <= T_ADJ))
        for peer, call in peers.items():
            pr, ptf, ptj = paired_ratio(fwd, call, rounds, pairs, budget)
            print(f"  CPU  {'  ' + peer + ' (same rounds: primal ' + f'{ptf * 1e3:.3f} ms)':<62s} "
                  f"{ptj * 1e3:9.3f} ms   {pr:5.2f}x")
        sys.stdout.flush()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short smoke run (< 60 s): sizes <= 64 MiB, "
                    "shorter timing windows, smaller launch loops")
    ap.add_argument("--max-mb", type=float, default=None, help="largest traffic size in MiB (default 1024; "
                    "64 with --quick)")
    ap.add_argument("--threads", type=int, default=None, help="threads for tinykernels, the C reference and "
                    "the peers (default: all cores)")
    ap.add_argument("--stat", choices=("best", "median"), default="best",
                    help="per-launch statistic reported (default best = minimum, as STREAM; median is more "
                    "sensitive to other processes on a small shared machine)")
    ap.add_argument("--only", choices=("stream", "launch", "compile", "autodiff"), action="append",
                    help="run only this section (may be repeated)")
    args = ap.parse_args(argv)
    if args.max_mb is None:
        args.max_mb = 64 if args.quick else 1024
    elif args.quick:
        args.max_mb = min(args.max_mb, 64)
    sections = args.only or ["stream", "launch", "compile", "autodiff"]
    nt = args.threads or os.cpu_count() or 1
    timer = Timer(min_time=0.05 if args.quick else 0.3, min_reps=5, rounds=1 if args.quick else 3,
                  stat=args.stat)
    if args.quick:
        timer.attempts, timer.pause = 2, 0.3
    # re-measuring disturbed rows stops after this much time, to bound the run on a busy machine
    timer.retry_until = time.perf_counter() + (20 if args.quick else 150)

    t_start = time.perf_counter()
    ncpu = os.cpu_count() or 1
    probe = ForeignLoad()
    time.sleep(0.5)
    idle_note = foreign_load_note(probe.cores(), ncpu)
    load = ForeignLoad()
    tc = toolchain()
    peers = Peers(nt)
    from tinykernels.runtime import launcher
    print("tinykernels CPU benchmark" + (" (--quick)" if args.quick else ""))
    print(f"  CPU        : {cpu_model()}, {os.cpu_count()} logical cores; threads used: {nt}")
    print(f"  compiler   : {tc.version}; OpenMP: {tc.openmp}")
    print(f"  flags      : {' '.join(tc.flags)}  (tinykernels and the C reference)")
    print(f"  python     : {platform.python_version()}, numpy {np.__version__}, tinykernels {tk.__version__}, "
          f"launcher {type(launcher.get()).__name__}")
    print("  peers      : " + ", ".join(f"{p} {peers.versions[p]}" if p in peers.versions else f"{p} n/a"
                                        for p in PEER_COLS))
    print(f"  timing     : per-launch perf_counter, {timer.warmup} warm-up launches, then >= {timer.min_time} s "
          f"and >= {timer.min_reps} launches in {timer.rounds} interleaved round(s); {timer.stat.upper()} reported")
    print(f"  targets    : T_eff tk/C >= {T_RATIO} (triad, diffusion, >= {T_RATIO_MIN_MB} MiB); launch <= "
          f"{T_LAUNCH_US} us; cold compile <= {T_COLD_MS:.0f} ms; disk-cache load <= {T_DISK_MS:.0f} ms "
          "(informational)")
    la = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"  other load : {idle_note} (0.5 s sample before start)"
          + (f"; loadavg {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}" if la else ""))
    sys.stdout.flush()

    summary = []
    with tempfile.TemporaryDirectory(prefix="tkbench-cref-") as td:
        lib, _ = build_c_reference(Path(td))
        if "stream" in sections:
            results, memcpy = run_stream(args, lib, peers, timer, nt)
            print_stream(results, memcpy, nt, timer)
            stream_footnote(results)
            for kernel in ("triad", "diffusion"):
                big = [(mb, g["tinykernels"] / g["C-ref"], d.endswith("*"))
                       for mb, d, g in results[kernel] if mb >= T_RATIO_MIN_MB]
                if big:
                    worst = min(big, key=lambda x: x[1])
                    summary.append((f"{kernel} T_eff tinykernels/C-ref, worst at >= {T_RATIO_MIN_MB} MiB "
                                    f"({worst[0]} MiB{', row marked *' if worst[2] else ''})", f"{worst[1]:.3f}",
                                    f">= {T_RATIO}", worst[1] >= T_RATIO))
            sys.stdout.flush()
        if "launch" in sections:
            res, N, rounds, base = run_launch(args, lib, peers, nt, timer)
            print_launch(res, N, rounds, base, timer.stat)
            us = res[0][1] * 1e6
            summary.append(("launch overhead, instance reused" + (" (row marked *)" if res[0][0].endswith("*")
                                                                  else ""), f"{us:.3f} us", f"<= {T_LAUNCH_US} us",
                            us <= T_LAUNCH_US))
            sys.stdout.flush()
    if "compile" in sections:
        fl = ForeignLoad()
        r = run_compile(args, nt)
        busy = fl.cores()
        cold_ms, disk_ms, disk_total = print_compile(r)
        if busy is not None and busy > BUSY_LIMIT:
            print(f"* other processes kept {busy:.2f} cores busy during this section; times are unreliable")
        summary.append(("cold compile of a fresh kernel", f"{cold_ms:.1f} ms", f"<= {T_COLD_MS:.0f} ms",
                        cold_ms <= T_COLD_MS))
        summary.append(("disk-cache load in a new process (first launch)", f"{disk_ms:.2f} ms",
                        f"<= {T_DISK_MS:.0f} ms", disk_ms <= T_DISK_MS))
        summary.append(("  same, instantiate + first launch", f"{disk_total:.2f} ms",
                        f"<= {T_DISK_MS:.0f} ms", disk_total <= T_DISK_MS))

    if "autodiff" in sections:
        with tempfile.TemporaryDirectory(prefix="tkbench-cref-") as td:
            lib, _ = build_c_reference(Path(td))
            check_c_triad_adjoint(lib)
            for row in run_autodiff(args, nt, timer, lib):
                summary.append(row)
            summary += run_forward_mode(args, nt)
        sys.stdout.flush()

    if peers.errors:
        print("\npeer errors (shown as n/a above):")
        for k, v in peers.errors.items():
            print(f"  {k}: {v}")
    if summary:
        print("\n== Summary (informational; exit status is 0 whenever every result was correct) ==")
        for label, val, tgt, ok in summary:
            print(f"  {label:80} {val:>10}  {tgt:>9}  {mark(ok)}")
    print(f"\nother load during the run: {foreign_load_note(load.cores(), ncpu)}")
    print(f"all results verified against NumPy; total time {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
