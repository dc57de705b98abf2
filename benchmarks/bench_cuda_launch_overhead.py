#!/usr/bin/env python3
"""The Python side of one CUDA kernel launch, measured against the fake driver (no GPU needed).

    PYTHONPATH=src python3 benchmarks/bench_cuda_launch_overhead.py            # us per launch
    PYTHONPATH=src python3 benchmarks/bench_cuda_launch_overhead.py --profile  # + cProfile of the loop

The kernel is bench_gpu.py's launch-overhead kernel ``a[i] = b[i]*s`` (two float32 device
arrays and a float scalar, ``ndrange=1``), the instance reused. The CUDA driver is the fake
``cuda.bindings.driver`` of tests/test_cuda.py (``FakeDriver``), with its ``cuLaunchKernel``
replaced by one that only returns success, so the time is tinykernels' own work: finding the
compiled specialization, packing the argument block, computing the grid, the driver calls
through the (fake) binding, and the returned event. The ``full path`` row is
``CUDAKernelInstance._launch`` alone (every check and the compile-cache lookup: what the first
launch of a new argument layout or ndrange costs, and what every launch cost before the launch
plans). The ``floor`` row is a bare Python call of the fake's cuLaunchKernel with the same 11
arguments (what any launcher pays to the fake).

This is NOT the launch overhead on a GPU: a real ``cuda.bindings`` call converts its arguments
in Cython and the driver itself takes a few microseconds per launch. Measure that with
``bench_gpu.py --only launch`` on a machine with an NVIDIA GPU. Prints, never asserts; the best
of several loops is reported (the minimum is the least disturbed by other processes).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
try:
    import tinykernels as tk
except ImportError:          # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(ROOT / "src"))
    import tinykernels as tk
from tinykernels.runtime import cuda as rt
from tinykernels.runtime import cuda_context, cuda_driver, cuda_launch

sys.path.insert(0, str(ROOT / "tests"))
from test_cuda import FakeDriver  # the fake driver of the test suite

_OK = (0,)


class LeanFake(FakeDriver):
    """The test suite's fake driver, but a launch records nothing (so it costs ~nothing)."""

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        return _OK


@tk.kernel
def tk_tiny(a, b: tk.Const, s):
    i = tk.index()
    a[i] = b[i] * s


def install_fake():
    """Make tinykernels.runtime.cuda talk to the fake driver (what the tests' fixture does)."""
    drv = LeanFake()
    cuda_driver._DRIVER = drv
    cuda_context._DEVICES.clear()
    cuda_launch.compile_cuda = lambda src, arch, name="k", options=(), cache=True: b"\x7fELF fake"
    cuda_context.choose_arch = lambda cc, driver_version=None: f"sm_{cc[0]}{cc[1]}"
    cuda_driver.init_driver.cache_clear()
    cuda_context.CURRENT.ctx = None
    return drv


def per_launch(fn, n: int, loops: int) -> float:
    """Best over ``loops`` loops of (loop time / n), in seconds."""
    best = float("inf")
    for _ in range(loops):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20000, help="launches per loop (default 20000)")
    ap.add_argument("--loops", type=int, default=7, help="loops; the best is reported (default 7)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one loop")
    args = ap.parse_args()

    drv = install_fake()
    b = rt.CUDA(0)
    a = b.array_from_host(np.zeros(16, np.float32))
    x = b.array_from_host(np.ones(16, np.float32))
    k = tk_tiny(b)
    k(a, x, 2.0, ndrange=1)                               # compile (fake) and warm up
    hi = b.stream(tk.High)

    empty = per_launch(lambda: None, args.n, args.loops)
    fn, s = rt.CUDAArray, b._dev.null
    floor = per_launch(lambda: drv.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, 12345, 0), args.n, args.loops)
    rows = [
        ("instance reused: k(a, x, 2.0, ndrange=1)", lambda: k(a, x, 2.0, ndrange=1)),
        ("same, on a tk.High stream", lambda: k(a, x, 2.0, ndrange=1, stream=hi)),
        ("same, 2-D ndrange=(1, 1)", None),
        ("kern(backend)(...) each time", lambda: tk_tiny(b)(a, x, 2.0, ndrange=1)),
        ("the full path alone: k._launch(...)", lambda: k._launch((a, x, 2.0), 1, None, None)),
    ]
    a2 = b.array_from_host(np.zeros((4, 4), np.float32))
    x2 = b.array_from_host(np.ones((4, 4), np.float32))

    @tk.kernel
    def tiny2(a, b: tk.Const, s):
        i, j = tk.index(tk.Global, tk.Cartesian)
        a[i, j] = b[i, j] * s
    k2 = tiny2(b)
    k2(a2, x2, 2.0, ndrange=(1, 1))
    rows[2] = (rows[2][0], lambda: k2(a2, x2, 2.0, ndrange=(1, 1)))

    print(f"Python side of one CUDA launch against the fake driver (tinykernels {tk.__version__}, "
          f"Python {sys.version.split()[0]}, NumPy {np.__version__})")
    print(f"best of {args.loops} loops of {args.n} launches, loop overhead subtracted "
          f"(empty loop: {empty * 1e6:.3f} us)\n")
    print(f"{'':52} {'us/launch':>10}")
    for label, f in rows:
        t = per_launch(f, args.n, args.loops) - empty
        print(f"{label:52} {t * 1e6:10.2f}")
    print(f"{'floor: a bare call of the fake cuLaunchKernel':52} {(floor - empty) * 1e6:10.2f}")
    print("\nThe real-GPU launch overhead is not measured here (see bench_gpu.py --only launch).")

    if args.profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.n):
            k(a, x, 2.0, ndrange=1)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
