#!/usr/bin/env python3
"""GPU benchmarks for tinykernels: memory-bound kernels, launch overhead, hidden communication.

    PYTHONPATH=src python3 benchmarks/bench_gpu.py --json bench_gpu.json      # CUDA (H100: ~3 min)
    PYTHONPATH=src python3 benchmarks/bench_gpu.py --backend CL --quick        # smoke test anywhere

Prints plain-text tables: T_eff of copy, triad and 2-D/3-D diffusion next to a measured
device-to-device memcopy and the peers (PyTorch, CuPy; n/a unless importable with CUDA), the
launch overhead, and the boundary/inner stream split of TinyBenchmarks' "hide communication".
Every kernel's result is checked once against NumPy before it is timed; a wrong result (or a
tinykernels error) exits 1. PASS/MISS marks are informational. See README.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    import tinykernels as tk
except ImportError:          # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk
from tinykernels.kernel import DEFAULT_WORKGROUP

MiB, GB = 1 << 20, 1e9
SIZES, QUICK_SIZES = (4, 16, 64, 256, 1024), (4, 16)      # MiB that must move per launch
KERNELS = ("copy", "triad", "diffusion2d", "diffusion3d")
NARRAYS = {"copy": 2, "triad": 3, "diffusion2d": 2, "diffusion3d": 2}
COLS = ("tinykernels", "tk.copyto", "torch", "cupy")
T_RATIO, T_RATIO_MIN_MB = 0.95, 256    # target: T_eff >= 0.95 memcopy at >= 256 MiB (beyond the L2)
T_LAUNCH_US = 3.0                      # target: async launch overhead on CUDA
BUSY_LIMIT = 0.2                       # cores other processes may use: max(0.2, 0.1 per core)
HIDE_N, HIDE_N_QUICK, HIDE_BW = 384, 64, (2, 2, 16)


# ------------------------------------------------------------------------------------ kernels

from kernels import tk_copy, tk_diffusion2d, tk_diffusion3d, tk_tiny, tk_triad  # noqa: E402


TK_KERNELS = {"copy": tk_copy, "triad": tk_triad, "diffusion2d": tk_diffusion2d, "diffusion3d": tk_diffusion3d}

# hand-written CUDA C for CuPy (RawModule; "%s" is float or double)
CUPY_SRC = r"""
typedef %s real;
extern "C" {
__global__ void k_copy(real *__restrict__ a, const real *__restrict__ b, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i];
}
__global__ void k_triad(real *__restrict__ a, const real *__restrict__ b, const real *__restrict__ c,
                        real s, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] + s * c[i];
}
__global__ void k_diffusion2d(real *__restrict__ T2, const real *__restrict__ T, real dtlam, int nx, int ny) {
    int j = blockIdx.x * blockDim.x + threadIdx.x + 1, i = blockIdx.y * blockDim.y + threadIdx.y + 1;
    if (i >= nx - 1 || j >= ny - 1) return;
    long long c = (long long)i * ny + j;
    T2[c] = T[c] + dtlam * (T[c - ny] + T[c + ny] + T[c - 1] + T[c + 1] - (real)4 * T[c]);
}
__global__ void k_diffusion3d(real *__restrict__ T2, const real *__restrict__ T, real dtlam,
                              int nx, int ny, int nz) {
    int k = blockIdx.x * blockDim.x + threadIdx.x + 1, j = blockIdx.y * blockDim.y + threadIdx.y + 1;
    int i = blockIdx.z * blockDim.z + threadIdx.z + 1;
    if (i >= nx - 1 || j >= ny - 1 || k >= nz - 1) return;
    long long sx = (long long)ny * nz, c = i * sx + (long long)j * nz + k;
    T2[c] = T[c] + dtlam * (T[c - sx] + T[c + sx] + T[c - nz] + T[c + nz] + T[c - 1] + T[c + 1] - (real)6 * T[c]);
}
__global__ void k_tiny(real *a, const real *b, real s) { a[0] = b[0] * s; }
}
"""


def stencil(T, dtlam):
    """The diffusion update of the interior of ``T`` (NumPy, torch or CuPy arrays, any ndim)."""
    nd, c = T.ndim, (slice(1, -1),) * T.ndim
    acc = None
    for d in range(nd):
        lo, hi = c[:d] + (slice(None, -2),) + c[d + 1:], c[:d] + (slice(2, None),) + c[d + 1:]
        acc = T[lo] + T[hi] if acc is None else acc + T[lo] + T[hi]
    return T[c] + dtlam * (acc - 2.0 * nd * T[c])


# ------------------------------------------------------------------------------------ cases

@dataclass
class Case:
    """One kernel at one dtype and size: host inputs, scalars, ndrange and the expected result."""
    kernel: str
    dtype: np.dtype
    mb: int
    inputs: list
    shape: tuple
    scalars: tuple
    ndrange: object
    traffic: int
    desc: str
    want: np.ndarray = field(repr=False)

    def check(self, name: str, got: np.ndarray) -> None:
        """Compare an implementation's output with NumPy's (only the interior for stencils)."""
        verify(f"{name} ({self.kernel} {self.dtype} {self.mb} MiB)", got, self.want, self.kernel.startswith("diff"))


def verify(label: str, got: np.ndarray, want: np.ndarray, interior: bool) -> None:
    """assert_allclose against NumPy, with the dtype's tolerance; raises naming ``label``."""
    if interior:
        got = got[(slice(1, -1),) * got.ndim]
    rtol = 1e-5 if want.dtype == np.float32 else 1e-12
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2)
    except AssertionError as e:
        raise AssertionError(f"wrong results from {label}:\n{e}") from None


def make_case(kernel: str, dtype, mb: int, rng: np.random.Generator) -> Case:
    dt = np.dtype(dtype)
    per = mb * MiB // (NARRAYS[kernel] * dt.itemsize)           # elements per array
    if kernel in ("copy", "triad"):
        shape = (per,)
        nd = per
    else:
        nd_ = 2 if kernel == "diffusion2d" else 3
        n = round(per ** (1 / nd_))
        shape = (n,) * nd_
        nd = tuple(range(1, n - 1) for _ in range(nd_))
    inputs = [rng.random(shape, dtype=dt) for _ in range(NARRAYS[kernel] - 1)]
    if kernel == "copy":
        scalars, want = (), inputs[0]
    elif kernel == "triad":
        s = dt.type(2.5)
        scalars, want = (s,), inputs[0] + s * inputs[1]
    else:
        dtt, lam = dt.type(0.1), dt.type(0.2)
        scalars, want = (dtt, lam), stencil(inputs[0], dtt * lam)
    traffic = NARRAYS[kernel] * math.prod(shape) * dt.itemsize
    return Case(kernel, dt, mb, inputs, shape, scalars, nd, traffic, "x".join(map(str, shape)), want)


@dataclass
class Impl:
    """How to run one implementation: launch (async), sync, reset output to NaN, fetch result."""
    launch: Callable[[], object]
    sync: Callable[[], None]
    reset: Callable[[], object]
    result: Callable[[], np.ndarray]


def tk_impls(b, case: Case, wg: tuple | None) -> dict:
    """tinykernels' kernel and, for copy, the backend's own device-to-device copy (tk.copyto)."""
    ins = [tk.asarray(x, backend=b) for x in case.inputs]
    out = tk.empty(case.shape, case.dtype, backend=b)
    nan = np.full(case.shape, np.nan, case.dtype)
    k = TK_KERNELS[case.kernel](b, wg)
    res = {"tinykernels": Impl(lambda: k(out, *ins, *case.scalars, ndrange=case.ndrange), b.synchronize,
                               lambda: tk.copyto(out, nan), out.numpy)}
    if case.kernel == "copy":
        s = b.stream(tk.Normal)
        res["tk.copyto"] = Impl(lambda: tk.copyto(out, ins[0], stream=s), b.synchronize,
                                lambda: tk.copyto(out, nan), out.numpy)
    return res


class Peers:
    """PyTorch and CuPy on the same CUDA device when importable (never installed by this script)."""

    def __init__(self, b):
        self.versions: dict = {}
        self.errors: dict = {}
        self.torch = self.cupy = None
        self._mods: dict = {}
        if b.dev != "CUDA":
            self.versions = {"torch": "n/a (CUDA only)", "cupy": "n/a (CUDA only)"}
            return
        try:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError(f"torch {torch.__version__} sees no CUDA device")
            self.torch, self.tdev = torch, torch.device("cuda", b.device)
            self.versions["torch"] = f"{torch.__version__} (CUDA {torch.version.cuda})"
        except Exception as e:  # noqa: BLE001 - a missing or broken peer is n/a
            self.versions["torch"] = f"n/a ({type(e).__name__}: {e})"
        try:
            import cupy
            cupy.cuda.Device(b.device).use()
            self.cupy = cupy
            self.versions["cupy"] = cupy.__version__
        except Exception as e:  # noqa: BLE001
            self.versions["cupy"] = f"n/a ({type(e).__name__}: {e})"

    def cupy_fn(self, name: str, dtype):
        dt = np.dtype(dtype)
        if dt not in self._mods:
            self._mods[dt] = self.cupy.RawModule(code=CUPY_SRC % ("float" if dt == np.float32 else "double"))
        return self._mods[dt].get_function(name)

    def impls(self, case: Case) -> dict:
        out: dict = {}
        for name, make in (("torch", self._torch), ("cupy", self._cupy)):
            if getattr(self, name) is None:
                continue
            try:
                out[name] = make(case)
            except Exception as e:  # noqa: BLE001 - an optional peer failing is reported, not fatal
                self.errors[f"{name}/{case.kernel}"] = f"{type(e).__name__}: {str(e)[:200]}"
        return out

    def _torch(self, case: Case) -> Impl:
        t = self.torch
        ins = [t.from_numpy(x).to(self.tdev) for x in case.inputs]
        o = t.empty(case.shape, dtype=ins[0].dtype, device=self.tdev)
        c = (slice(1, -1),) * len(case.shape)
        sc = float(np.prod(case.scalars)) if case.scalars else 0.0      # triad: s; diffusion: dt*lam
        f = {"copy": lambda: o.copy_(ins[0]),
             "triad": lambda: t.add(ins[0], ins[1], alpha=sc, out=o),            # b + s*c, one kernel
             }.get(case.kernel, lambda: o.__setitem__(c, stencil(ins[0], sc)))
        return Impl(f, t.cuda.synchronize, lambda: o.fill_(float("nan")), lambda: o.cpu().numpy())

    def _cupy(self, case: Case) -> Impl:
        cp = self.cupy
        ins = [cp.asarray(x) for x in case.inputs]
        o = cp.empty(case.shape, dtype=case.dtype)
        fn = self.cupy_fn("k_" + case.kernel, case.dtype)
        if case.kernel in ("copy", "triad"):
            n = case.shape[0]
            grid, block, args = ((n + 255) // 256,), (256,), (o, *ins, *case.scalars, np.int64(n))
        else:                                   # x along the last (contiguous) axis
            block = (32, 8) if len(case.shape) == 2 else (32, 4, 2)
            grid = tuple(-(-(n - 2) // w) for n, w in zip(case.shape[::-1], block))
            args = (o, ins[0], case.scalars[0] * case.scalars[1], *(np.int32(n) for n in case.shape))
        return Impl(lambda: fn(grid, block, args), cp.cuda.Device().synchronize, lambda: o.fill(np.nan),
                    lambda: cp.asnumpy(o))

    def free(self) -> None:
        if self.torch is not None:
            self.torch.cuda.empty_cache()
        if self.cupy is not None:
            self.cupy.get_default_memory_pool().free_all_blocks()


# ------------------------------------------------------------------------------------ timing

class Timer:
    """Time per launch: batches of async launches closed by one synchronize (after warm-up)."""

    def __init__(self, min_time: float, rounds: int, stat: str):
        self.min_time, self.rounds, self.stat = min_time, rounds, stat
        self.agg = min if stat == "best" else statistics.median

    def measure(self, impls: dict) -> dict:
        """{name: seconds per launch} for {name: (launch, sync)}; rounds interleaved (A B A B ...)."""
        batch = {}
        for k, (f, sync) in impls.items():
            for _ in range(3):                                 # warm-up (compiles, caches)
                f()
            sync()
            t0 = time.perf_counter()
            f()
            sync()
            once = time.perf_counter() - t0
            batch[k] = max(3, min(20000, int(self.min_time / self.rounds / max(once, 1e-6))))
        samples: dict = {k: [] for k in impls}
        for _ in range(self.rounds):
            for k, (f, sync) in impls.items():
                n = batch[k]
                t0 = time.perf_counter()
                for _ in range(n):
                    f()
                sync()
                samples[k].append((time.perf_counter() - t0) / n)
        return {k: self.agg(v) for k, v in samples.items()}


class ForeignLoad:
    """CPU time used by OTHER processes since construction (/proc/stat minus our own), in cores."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy() -> float | None:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self) -> float | None:
        b = self._busy()
        if b is None or self.busy0 is None:
            return None
        wall = max(time.perf_counter() - self.t0, 1e-9)
        return max(0.0, (b - self.busy0) - (self._own() - self.own0)) / wall


def busy_limit() -> float:
    return max(BUSY_LIMIT, 0.1 * (os.cpu_count() or 1))


def is_busy(cores: float | None) -> bool:
    return cores is not None and cores > busy_limit()


def nvidia_smi(device: int) -> dict:
    """GPU name, driver, utilization and OTHER compute processes from nvidia-smi ({} if absent)."""
    q = "name,driver_version,utilization.gpu,memory.used,memory.total,clocks.sm,clocks.max.sm,pstate"
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader", "-i", str(device)],
                           check=False, capture_output=True, text=True, timeout=10)
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader",
                               "-i", str(device)], check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    if r.returncode != 0:
        return {}
    vals = [v.strip() for v in r.stdout.strip().split(",")]
    info = dict(zip(q.split(","), vals))
    info["other_processes"] = [ln.strip() for ln in apps.stdout.splitlines() if ln.strip()]
    return info


# ------------------------------------------------------------------------------------ 1. memory-bound

def run_stream(b, peers: Peers, timer: Timer, sizes: list, wgs: dict, notes: list) -> list:
    """T_eff rows {kernel, dtype, mb, shape, gbs{impl}, busy} for every kernel, dtype and size."""
    rng = np.random.default_rng(1234)
    limit = b.limits.get("max-storage-buffer-binding-size") if hasattr(b, "limits") else None
    rows = []
    for dtype in (np.float32, np.float64):
        if not b.supports(dtype):
            notes.append(f"{np.dtype(dtype).name} rows skipped: {b.device_name} has no {np.dtype(dtype).name}")
            continue
        for kernel in KERNELS:
            for mb in sizes:
                if limit and mb * MiB // NARRAYS[kernel] > limit:
                    notes.append(f"{kernel} {np.dtype(dtype).name} {mb} MiB skipped: an array would exceed "
                                 f"the device's max-storage-buffer-binding-size ({limit // MiB} MiB)")
                    continue
                case = make_case(kernel, dtype, mb, rng)
                impls = {**tk_impls(b, case, wgs.get(kernel)), **peers.impls(case)}
                for name, im in list(impls.items()):
                    im.reset()
                    try:
                        im.launch()
                        im.sync()
                        b.synchronize()
                        case.check(name, im.result())
                    except Exception as e:
                        if name in ("torch", "cupy"):
                            peers.errors[f"{name}/{kernel}"] = f"{type(e).__name__}: {str(e)[:300]}"
                            del impls[name]
                            continue
                        raise
                fl = ForeignLoad()
                times = timer.measure({k: (im.launch, im.sync) for k, im in impls.items()})
                rows.append({"kernel": kernel, "dtype": case.dtype.name, "mb": mb, "shape": case.desc,
                             "traffic_bytes": case.traffic, "busy": is_busy(fl.cores()),
                             "gbs": {k: case.traffic / t / GB for k, t in times.items()}})
                del impls, case
                peers.free()
    # the memcopy reference: torch's d2d copy_ on CUDA, else the backend's own copy (tk.copyto)
    mc = {(r["dtype"], r["mb"]): next((s, r["gbs"][s]) for s in ("torch", "tk.copyto") if s in r["gbs"])
          for r in rows if r["kernel"] == "copy"}
    for r in rows:
        r["memcpy_source"], r["memcpy"] = mc.get((r["dtype"], r["mb"]), (None, None))
        r["ratio"] = r["gbs"]["tinykernels"] / r["memcpy"] if r["memcpy"] else None
    return rows


HEADS = {"copy": "copy         y[i] = x[i]                                  2 arrays moved",
         "triad": "triad        a[i] = b[i] + s*c[i]                         3 arrays moved",
         "diffusion2d": "diffusion2d  T2 = T + dt*lam*lap(T), 5-point, interior     2 arrays moved",
         "diffusion3d": "diffusion3d  T2 = T + dt*lam*lap(T), 7-point, interior     2 arrays moved"}


def print_stream(rows: list, timer: Timer) -> None:
    src = "/".join(sorted({r["memcpy_source"] for r in rows if r["memcpy_source"]})) or "n/a"
    print(f"\n== 1. Memory-bound kernels: T_eff [GB/s, 1 GB = 1e9 B] = bytes that must move / {timer.stat} time "
          f"per launch; memcpy = {src} d2d copy; target tk/memcpy >= {T_RATIO} at >= {T_RATIO_MIN_MB} MiB ==")
    for kernel in KERNELS:
        kr = [r for r in rows if r["kernel"] == kernel]
        if not kr:
            continue
        print(f"\n{HEADS[kernel]}")
        hdr = f"{'dtype':>7} {'MiB':>5} {'shape':>16} " + " ".join(f"{c:>11}" for c in COLS) \
            + f" {'memcpy':>8} {'tk/memcpy':>9}  target"
        print(hdr + "\n" + "-" * len(hdr))
        for r in kr:
            cells = []
            for c in COLS:
                if c in r["gbs"]:
                    cells.append(f"{r['gbs'][c]:>11.1f}")
                else:
                    cells.append(f"{'-' if c == 'tk.copyto' else 'n/a':>11}")
            line = f"{r['dtype']:>7} {r['mb']:>5} {r['shape'] + ('*' if r['busy'] else ' '):>16} " + " ".join(cells)
            line += f" {r['memcpy']:>8.1f} {r['ratio']:>9.3f}" if r["ratio"] else f" {'n/a':>8} {'n/a':>9}"
            if r["ratio"] and r["mb"] >= T_RATIO_MIN_MB:
                line += f"  >={T_RATIO} {'PASS' if r['ratio'] >= T_RATIO else 'MISS'}"
            print(line)


# ------------------------------------------------------------------------------------ 2. launch overhead

def run_launch(b, peers: Peers, quick: bool, stat: str) -> list:
    """(label, seconds per launch or None, is-target) rows for a 3-argument 1-item kernel."""
    agg = min if stat == "best" else statistics.median
    N, rounds = (2000, 3) if quick else (20000, 7)
    a = tk.zeros(1, np.float32, backend=b)
    x = tk.asarray(np.full(1, 3.0, np.float32), backend=b)
    s = np.float32(2.0)
    k = tk_tiny(b)
    k(a, x, s, ndrange=1)
    b.synchronize()
    if a.numpy()[0] != 6.0:
        raise AssertionError(f"tk_tiny gives {a.numpy()} instead of [6.]")
    hi = b.stream(tk.High)

    def timed(launch: Callable, sync: Callable, n: int) -> float:
        launch(), sync()
        per = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(n):
                launch()
            sync()
            per.append((time.perf_counter() - t0) / n)
        return agg(per)

    rows = [("tinykernels  k(a, b, s, ndrange=1), k reused; async",
             timed(lambda: k(a, x, s, ndrange=1), b.synchronize, N), True),
            ("tinykernels  same with stream=<tk.High stream>",
             timed(lambda: k(a, x, s, ndrange=1, stream=hi), b.synchronize, N), False),
            ("tinykernels  launch + synchronize each time (round trip)",
             timed(lambda: (k(a, x, s, ndrange=1), b.synchronize()), lambda: None, max(N // 10, 100)), False)]

    def cupy_tiny() -> tuple:
        cp = peers.cupy
        ca, cx, fn = cp.zeros(1, cp.float32), cp.full(1, 3.0, cp.float32), peers.cupy_fn("k_tiny", np.float32)
        fn((1,), (1,), (ca, cx, s))
        assert float(ca[0]) == 6.0, f"CuPy k_tiny gives {ca} instead of [6.]"
        return lambda: fn((1,), (1,), (ca, cx, s)), cp.cuda.Device().synchronize

    def torch_add() -> tuple:
        tx = peers.torch.zeros(1, device=peers.tdev)
        return lambda: tx.add_(1), peers.torch.cuda.synchronize

    for label, name, make in (("CuPy         RawKernel (1,), (1,), (a, b, s)", "cupy", cupy_tiny),
                              ("PyTorch      x.add_(1), 1-element tensor", "torch", torch_add)):
        t = None
        if getattr(peers, name) is not None:
            try:
                t = timed(*make(), N)
            except Exception as e:  # noqa: BLE001 - an optional peer failing is reported, not fatal
                peers.errors[f"{name}/launch"] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append((label, t, False))
    t0 = time.perf_counter()
    for _ in range(N):
        pass
    rows.append(("(empty Python for-loop, per iteration)", (time.perf_counter() - t0) / N, False))
    if a.numpy()[0] != 6.0:
        raise AssertionError("tk_tiny's result changed during the launch loop")
    return rows


def print_launch(rows: list, b, quick: bool, stat: str) -> None:
    N = 2000 if quick else 20000
    print(f"\n== 2. Launch overhead: a[i] = b[i]*s, ndrange=1; loops of {N} async launches + 1 synchronize, "
          f"{stat} of {3 if quick else 7} loops ==")
    print(f"{'':60} {'us/launch':>10}  target\n" + "-" * 86)
    for label, t, target in rows:
        if t is None:
            print(f"{label:60} {'n/a':>10}")
            continue
        line = f"{label:60} {t * 1e6:>10.3f}"
        if target and b.dev == "CUDA":
            line += f"  <={T_LAUNCH_US} us {'PASS' if t * 1e6 <= T_LAUNCH_US else 'MISS'}"
        print(line)


# ------------------------------------------------------------------------------------ 3. hide communication

def split_regions(n: int, bw: tuple) -> tuple:
    """(inner ndrange, six boundary-slab ndranges) that tile the interior [1, n-1)^3 exactly."""
    lo = [1 + w for w in bw]
    hi = [n - 1 - w for w in bw]
    full = range(1, n - 1)
    inner = tuple(range(a, z) for a, z in zip(lo, hi))
    slabs = [(range(1, lo[0]), full, full), (range(hi[0], n - 1), full, full),
             (inner[0], range(1, lo[1]), full), (inner[0], range(hi[1], n - 1), full),
             (inner[0], inner[1], range(1, lo[2])), (inner[0], inner[1], range(hi[2], n - 1))]
    return inner, [s for s in slabs if all(len(r) for r in s)]


def run_hide(b, timer: Timer, n: int, bw: tuple, wg: tuple | None) -> dict:
    """Time per step of 3-D diffusion: one launch vs boundary slabs (High stream) + inner (Low stream)."""
    dtype = np.float64 if b.supports(np.float64) else np.float32
    if any(2 * w >= n - 2 for w in bw):
        raise SystemExit(f"--hide-bw {bw} leaves no inner region for n = {n}")
    rng = np.random.default_rng(7)
    T0 = rng.random((n, n, n), dtype=dtype)
    dt, lam = np.dtype(dtype).type(0.1), np.dtype(dtype).type(0.2)
    inner, slabs = split_regions(n, bw)
    full = tuple(range(1, n - 1) for _ in range(3))
    k = tk_diffusion3d(b, wg)
    s_hi, s_lo = b.stream(tk.High), b.stream(tk.Low)
    bufs = [tk.asarray(T0, backend=b), tk.asarray(T0, backend=b)]
    st = {"i": 0, "ev_hi": None, "ev_lo": None}

    def pair():
        i = st["i"]
        st["i"] = i + 1
        return bufs[(i + 1) % 2], bufs[i % 2]            # (out, in): ping-pong

    def step_one():
        o, x = pair()
        k(o, x, dt, lam, ndrange=full)

    def step_seq():
        o, x = pair()
        for r in slabs + [inner]:
            k(o, x, dt, lam, ndrange=r)

    def step_split():
        o, x = pair()
        if st["ev_lo"] is not None:
            s_hi.wait(st["ev_lo"])        # this step overwrites what the last inner step read
        ev_hi = None
        for r in slabs:
            ev_hi = k(o, x, dt, lam, ndrange=r, stream=s_hi)
        if st["ev_hi"] is not None:
            s_lo.wait(st["ev_hi"])        # the inner stencil reads the last step's boundary slabs
        st["ev_lo"] = k(o, x, dt, lam, ndrange=inner, stream=s_lo)
        st["ev_hi"] = ev_hi

    modes = {"no split: 1 launch over the interior": step_one,
             f"split, 1 stream: {len(slabs)} slabs + inner, in order": step_seq,
             f"split: {len(slabs)} slabs on tk.High, inner on tk.Low": step_split}
    want = T0.copy()
    for _ in range(2):
        nxt = want.copy()
        nxt[1:-1, 1:-1, 1:-1] = stencil(want, dt * lam)
        want = nxt
    for name, step in modes.items():              # 2 steps from T0 in each mode vs NumPy
        for a_ in bufs:
            tk.copyto(a_, T0)
        st.update(i=0, ev_hi=None, ev_lo=None)
        step()
        step()
        b.synchronize()
        verify(f"hide-communication mode '{name}'", bufs[0].numpy(), want[1:-1, 1:-1, 1:-1], True)
    fl = ForeignLoad()
    times = timer.measure({m: (f, b.synchronize) for m, f in modes.items()})
    traffic = 2 * n ** 3 * np.dtype(dtype).itemsize
    prio = {"High": getattr(s_hi, "cuda_priority", s_hi.priority), "Low": getattr(s_lo, "cuda_priority", s_lo.priority)}
    return {"n": n, "bw": list(bw), "dtype": np.dtype(dtype).name, "traffic_bytes": traffic, "priorities": prio,
            "busy": is_busy(fl.cores()), "slabs": len(slabs),
            "rows": [{"mode": m, "ms_per_step": t * 1e3, "gbs": traffic / t / GB,
                      "vs_no_split": times[next(iter(times))] / t} for m, t in times.items()]}


def print_hide(h: dict, timer: Timer) -> None:
    n, bw = h["n"], h["bw"]
    print(f"\n== 3. Hide communication (TinyBenchmarks): 3-D diffusion {n}^3 {h['dtype']}, boundary width "
          f"{tuple(bw)} cells (i, j, k; k fastest), {timer.stat} time per step, 2 steps verified per mode ==")
    print(f"   stream priorities as given to the device: High -> {h['priorities']['High']}, "
          f"Low -> {h['priorities']['Low']}; T_eff counts 2 arrays of {n}^3")
    print(f"{'':52} {'ms/step':>9} {'T_eff GB/s':>11} {'vs no split':>12}\n" + "-" * 90)
    for r in h["rows"]:
        print(f"{r['mode'] + ('*' if h['busy'] else ''):52} {r['ms_per_step']:>9.3f} {r['gbs']:>11.1f} "
              f"{r['vs_no_split']:>12.3f}")
    print("   (no communication here: the split's cost is its extra launches and smaller blocks; with MPI the"
          " halo exchange\n    would overlap the inner launch. Target: the split stream version within 5% of no"
          " split.)")


# ------------------------------------------------------------------------------------ main

def header(b, args, smi: dict, peers: Peers, timer: Timer, idle: float | None) -> dict:
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "host": platform.node(), "backend": repr(b), "device": b.device_name, "quick": args.quick,
            "tinykernels": tk.__version__, "python": platform.python_version(), "numpy": np.__version__,
            "peers": peers.versions, "stat": timer.stat, "cpu_count": os.cpu_count(),
            "other_cpu_load_cores": idle, "workgroups": {
                "copy/triad": DEFAULT_WORKGROUP[1], "diffusion2d": args.wg2 or DEFAULT_WORKGROUP[2],
                "diffusion3d": args.wg3 or DEFAULT_WORKGROUP[3]}}
    if b.dev == "CUDA":
        from tinykernels.runtime import cuda as rt
        dv = getattr(getattr(b, "_dev", None), "driver_version", None)
        meta.update(arch=b.arch, driver_cuda=f"{dv // 1000}.{dv % 1000 // 10}" if dv else "?",
                    nvrtc=".".join(map(str, rt.nvrtc_version())), nvidia_smi=smi)
        try:
            from importlib.metadata import version
            meta["cuda_bindings"] = version("cuda-bindings")
        except Exception:  # noqa: BLE001
            meta["cuda_bindings"] = "?"
    print("tinykernels GPU benchmark" + (" (--quick)" if args.quick else ""))
    print(f"  date       : {meta['date']} on {meta['host']}")
    print(f"  backend    : {meta['backend']}")
    if b.dev == "CUDA":
        print(f"  CUDA       : compiling for {meta['arch']}; driver supports CUDA {meta['driver_cuda']}"
              f" (driver {smi.get('driver_version', '?')}); NVRTC {meta['nvrtc']}; cuda-bindings "
              f"{meta['cuda_bindings']}")
        if smi:
            print(f"  GPU state  : {smi.get('utilization.gpu')} busy, {smi.get('memory.used')} of "
                  f"{smi.get('memory.total')} used, SM clock {smi.get('clocks.sm')} (max {smi.get('clocks.max.sm')}),"
                  f" {smi.get('pstate')} (nvidia-smi, before this process opened the device)")
    print(f"  software   : python {meta['python']}, numpy {meta['numpy']}, tinykernels {meta['tinykernels']}")
    print(f"  workgroups : {', '.join(f'{k} {v}' for k, v in meta['workgroups'].items())}")
    print("  peers      : " + ", ".join(f"{k} {v}" for k, v in peers.versions.items()))
    print(f"  timing     : batches of async launches + 1 synchronize (perf_counter), 3 warm-up launches, "
          f"~{timer.min_time} s per implementation in {timer.rounds} interleaved batches; {timer.stat.upper()}")
    note = "unknown (no /proc/stat)" if idle is None else f"{idle:.2f} of {os.cpu_count()} cores busy (other processes)"
    if is_busy(idle):
        note += "  ** WARNING: the machine is not idle; launch-bound numbers are unreliable **"
    la = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"  other load : {note}" + (f"; loadavg {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}" if la else ""))
    others = smi.get("other_processes") if smi else None
    if others:
        print(f"  ** WARNING: other processes use this GPU: {'; '.join(others)} **")
    sys.stdout.flush()
    return meta


def parse_ints(text: str) -> tuple:
    return tuple(int(x) for x in text.split(","))


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="CUDA", help="CUDA (default), CUDA:1, CL or WEBGPU")
    ap.add_argument("--quick", action="store_true", help=f"smoke run: sizes {QUICK_SIZES} MiB, short timing, "
                    f"hide-communication grid {HIDE_N_QUICK}^3")
    ap.add_argument("--max-mb", type=int, default=None, help="largest size in MiB moved per launch (default 1024)")
    ap.add_argument("--stat", choices=("best", "median"), default="best", help="statistic over rounds (default best)")
    ap.add_argument("--only", choices=("stream", "launch", "hide"), action="append", help="run only this section")
    ap.add_argument("--hide-n", type=int, default=None, help=f"3-D grid size of section 3 (default {HIDE_N})")
    ap.add_argument("--hide-bw", type=parse_ints, default=HIDE_BW, help="boundary width(s) of section 3: b or "
                    "bi,bj,bk (default 2,2,16: 16 along the fastest axis k)")
    ap.add_argument("--wg2", type=parse_ints, default=None, help="workgroup size of tinykernels' 2-D diffusion, "
                    "e.g. 4,64 (default: tinykernels' default, 16,16)")
    ap.add_argument("--wg3", type=parse_ints, default=None, help="the same for 3-D diffusion (default 4,8,8)")
    ap.add_argument("--json", metavar="PATH", help="also write every number to PATH as JSON")
    args = ap.parse_args(argv)
    if args.backend.split(":")[0].upper() not in ("CUDA", "GPU", "NV", "CL", "OPENCL", "WEBGPU", "WGPU"):
        ap.error(f"--backend must be a device backend (CUDA, CL, WEBGPU), got {args.backend!r}")
    if len(args.hide_bw) == 1:
        args.hide_bw *= 3
    sections = args.only or ["stream", "launch", "hide"]
    sizes = [s for s in (QUICK_SIZES if args.quick else SIZES) if s <= (args.max_mb or 1 << 30)]
    timer = Timer(min_time=0.03 if args.quick else 0.25, rounds=3 if args.quick else 5, stat=args.stat)
    t_start = time.perf_counter()
    probe = ForeignLoad()
    is_cuda = args.backend.upper().startswith(("CUDA", "GPU", "NV"))
    smi = nvidia_smi(int(args.backend.partition(":")[2] or 0)) if is_cuda else {}     # before we open the GPU
    time.sleep(0.5)
    idle = probe.cores()
    load = ForeignLoad()
    b = tk.backend(args.backend)
    peers = Peers(b)
    out = {"meta": header(b, args, smi, peers, timer, idle)}
    notes: list = []

    if "stream" in sections:
        out["stream"] = run_stream(b, peers, timer, sizes, {"diffusion2d": args.wg2, "diffusion3d": args.wg3}, notes)
        print_stream(out["stream"], timer)
        sys.stdout.flush()
    if "launch" in sections:
        rows = run_launch(b, peers, args.quick, args.stat)
        print_launch(rows, b, args.quick, args.stat)
        out["launch"] = [{"label": lb, "us": None if t is None else t * 1e6} for lb, t, _ in rows]
        sys.stdout.flush()
    if "hide" in sections:
        n = args.hide_n or (HIDE_N_QUICK if args.quick else HIDE_N)
        out["hide"] = run_hide(b, timer, n, args.hide_bw, args.wg3)
        print_hide(out["hide"], timer)

    if any(r["busy"] for r in out.get("stream", [])) or out.get("hide", {}).get("busy"):
        notes.append(f"* other processes kept more than {busy_limit():.1f} cores busy while this row ran")
    for k, v in peers.errors.items():
        notes.append(f"peer error (shown as n/a): {k}: {v}")
    if notes:
        print("\nnotes:\n" + "\n".join(f"  {n}" for n in dict.fromkeys(notes)))
    summary = []
    for kernel in KERNELS:
        for dt in ("float32", "float64"):
            big = [r for r in out.get("stream", []) if r["kernel"] == kernel and r["dtype"] == dt and r["ratio"]
                   and r["mb"] >= T_RATIO_MIN_MB]
            if big:
                w = min(big, key=lambda r: r["ratio"])
                summary.append((f"{kernel} {dt} T_eff tk/memcpy, worst at >= {T_RATIO_MIN_MB} MiB ({w['mb']} MiB)",
                                f"{w['ratio']:.3f}", f">= {T_RATIO}", w["ratio"] >= T_RATIO))
    if "launch" in out and b.dev == "CUDA":
        us = out["launch"][0]["us"]
        summary.append(("launch overhead, async, instance reused", f"{us:.2f} us", f"<= {T_LAUNCH_US} us",
                        us <= T_LAUNCH_US))
    if "hide" in out:
        r = out["hide"]["rows"][-1]["vs_no_split"]
        summary.append(("hide communication: T_eff split on 2 streams / no split", f"{r:.3f}", ">= 0.95", r >= 0.95))
    if summary:
        print("\n== Summary (informational; the exit status is 0 whenever every result was correct) ==")
        for label, val, tgt, ok in summary:
            print(f"  {label:70} {val:>9}  {tgt:>9}  {'PASS' if ok else 'MISS'}")
    out["meta"]["other_cpu_load_during_run"] = load.cores()
    out["notes"] = notes
    print(f"\nother load during the run: {load.cores() or 0:.2f} cores; all results verified against NumPy; "
          f"total time {time.perf_counter() - t_start:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
        print(f"numbers written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
