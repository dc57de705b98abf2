"""Per-launch host overhead of ``tk.autodiff``: µs per call of one launch of a 16-item triad.

Each case runs ``--launches`` calls of ``tk.autodiff`` (forward or reverse mode) whose ``fn``
makes one launch of ``a[i] = b[i]*b[i] + s*c[i]`` on the CPU backend, with NumPy arrays,
host tk.Arrays or CPU torch tensors, with and without ``stream=``, and prints the median of
``--loops`` loops. The kernel itself takes about 1 µs; the rest is tinykernels' Python (the
activity checks, the recording, the tangent or adjoint launches). Every case's result is
checked against NumPy once before it is timed. For an A/B, run it from two trees in
alternating processes (docs/autodiff.md, "Launch overhead").

    python benchmarks/bench_autodiff_launch.py [--launches 2000] [--loops 3] [--only fwd-np,rev-np]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tinykernels as tk

N = 16


@tk.kernel
def triad(a, b, c, s):
    i = tk.index()
    a[i] = b[i] * b[i] + s * c[i]


def make_cases() -> dict:
    """name -> (a call, a check of the call's result)."""
    k = triad(tk.CPU())
    rng = np.random.default_rng(0)
    b0, c0 = rng.standard_normal(N), rng.standard_normal(N)
    stream = tk.CPU().stream()

    def kinds():
        yield "np", np.asarray
        yield "tk", tk.asarray
        try:
            import torch
            yield "torch", torch.from_numpy
        except ImportError:
            pass

    cases = {}
    for kind, wrap in kinds():
        for st in (None, stream) if kind == "np" else (None,):
            raw = [np.zeros(N), b0.copy(), c0.copy(), np.zeros(N), np.ones(N), np.zeros(N)]
            a, b, c, da, db, dc = (wrap(x) for x in raw)     # views of raw's memory
            rda, rdb, rdc = raw[3:]
            sfx = "-stream" if st is not None else ""

            def fwd(a=a, b=b, c=c, da=da, db=db, dc=dc, st=st, rdb=rdb):
                rdb[:] = 1.0
                tk.autodiff(tk.Forward, lambda x, y, z, s: k(x, y, z, s, ndrange=N, stream=st),
                            tk.Duplicated(a, da), tk.Duplicated(b, db), tk.Const(c), tk.Duplicated(2.0, 1.0))

            def fwd_check(rda=rda):
                np.testing.assert_allclose(rda, 2 * b0 + c0)

            def rev(a=a, b=b, c=c, da=da, db=db, dc=dc, st=st, rda=rda, rdb=rdb, rdc=rdc):
                rda[:], rdb[:], rdc[:] = 1.0, 0.0, 0.0
                return tk.autodiff(tk.Reverse, lambda x, y, z, s: k(x, y, z, s, ndrange=N, stream=st),
                                   tk.Duplicated(a, da), tk.Duplicated(b, db), tk.Duplicated(c, dc), tk.Active(2.0))

            def rev_check(rdb=rdb, rdc=rdc, rev=rev):
                (gs,) = rev()
                np.testing.assert_allclose(rdb, 2 * b0)
                np.testing.assert_allclose(rdc, 2.0)
                assert abs(gs - c0.sum()) < 1e-12

            cases[f"fwd-{kind}{sfx}"] = (fwd, lambda fwd=fwd, chk=fwd_check: (fwd(), chk()))
            cases[f"rev-{kind}{sfx}"] = (rev, rev_check)
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--loops", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args()
    cases = make_cases()
    names = [n for n in args.only.split(",") if n] or list(cases)
    for name in names:
        call, check = cases[name]
        check()
        for _ in range(50):
            call()
        times = []
        for _ in range(args.loops):
            t = time.perf_counter()
            for _ in range(args.launches):
                call()
            times.append((time.perf_counter() - t) / args.launches * 1e6)
        print(f"{name:16s} {statistics.median(times):8.1f} us per tk.autodiff call")


if __name__ == "__main__":
    main()
