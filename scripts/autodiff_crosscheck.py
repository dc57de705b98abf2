#!/usr/bin/env python3
"""Cross-check ``tk.autodiff`` on the fuzzer's gradient kernels (gradgen.py) against JAX's
derivative of the raised kernels and against itself (``tinykernels.testing.adcross``).

    PYTHONPATH=src python3 scripts/autodiff_crosscheck.py --start 85000000 --count 1000
    PYTHONPATH=src python3 scripts/autodiff_crosscheck.py --start 85100000 --count 5000 --no-jax

Prints every disagreement (seed, kind, verdict, detail) as it is found and running counts every
10 seeds: ``checked`` kernels compared with JAX in both modes, ``unraised`` ones the raise path
refused or JAX could not reverse (forward mode and the adjoint identity only), and the
disagreements by kind and verdict. The verdict is float64 central differences' (adcross module
docstring): ``tk`` (tk.autodiff wrong), ``jax``, ``both``, ``undecided`` (a kink, an overflow,
noise), ``undefined`` (inf or NaN where the output itself is); ``--no-fd`` skips them.
"""
from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from tinykernels.testing.adcross import crosscheck
from tinykernels.testing.fuzz.basics import load_kernel
from tinykernels.testing.fuzz.gradgen import generate_grad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=85000000)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--backend", default="INTERP")
    ap.add_argument("--local", type=float, default=0.3, help="probability of a grouped kernel")
    ap.add_argument("--no-jax", action="store_true", help="the adjoint identity only")
    ap.add_argument("--no-fd", action="store_true", help="no finite-difference verdicts (NaN matching NaN)")
    args = ap.parse_args()
    stats, t0 = collections.Counter(), time.time()
    for k, seed in enumerate(range(args.start, args.start + args.count)):
        case = generate_grad(seed, local=args.local)
        kern = load_kernel(case.source, case.kname)
        vals = [a.value.copy() if isinstance(a.value, np.ndarray) else a.value for a in case.args]
        fs = crosscheck(kern, vals, case.ndrange, case.workgroupsize, backend=args.backend, seed=seed,
                        jax=not args.no_jax, fd=not args.no_fd)
        stats["unraised" if any(f.kind == "unraised" for f in fs) else "checked"] += 1
        for f in fs:
            if f.kind != "unraised":
                stats[f"{f.kind}:{f.verdict}" if f.verdict else f.kind] += 1
                print(seed, f.kind, f.verdict or "", f.detail, flush=True)
        if k % 10 == 9 or k == args.count - 1:
            print(f"through seed {seed}: {dict(stats)}, {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
