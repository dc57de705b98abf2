#!/usr/bin/env python3
"""Differential fuzzing of tinykernels: random kernels on the compiled backends against the interpreter.

    PYTHONPATH=src python3 scripts/fuzz.py --count 20000 --seed 1 --backends CPU,CL --jobs 2 \\
        --out fuzz-out --log fuzz-out/log.txt

Every disagreement is written to --out as a standalone reproducer (seed<N>.py, and seed<N>_min.py
after minimisation); the exit status is 1 when any was found. See docs/fuzzing.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from tinykernels.testing.fuzz import KNOWN_BUGS, Options, fuzz, profile_for  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=1000, help="number of kernels (seeds seed .. seed+count-1)")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--backends", default="CPU",
                   help="comma-separated compiled backends (DEV strings): CPU,CL,CUDA; NVRTC or NVRTC:sm_80+sm_90 "
                        "only compiles each kernel's CUDA C++ (no GPU needed); HIPCLANG or HIPCLANG:gfx90a+gfx1100 "
                        "only compiles its HIP C++ with clang (no GPU needed); METAL-STUB only checks "
                        "each kernel's Metal source with clang++ against the stub metal_stdlib (no Mac needed)")
    p.add_argument("--reference", default="INTERP", help="reference backend (INTERP or INTERP:CHECK)")
    p.add_argument("--jobs", type=int, default=1,
                   help="worker processes (each kernel under --timeout); 0: in this process, without a timeout")
    p.add_argument("--batch", type=int, default=None,
                   help="kernels a worker checks together (default: 40 with HIPCLANG, which compiles them in one "
                        "clang run per architecture, else 1)")
    p.add_argument("--out", default=None, help="directory for reproducers of every mismatch")
    p.add_argument("--log", default=None, help="also append progress and findings to this file")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per kernel before it counts as a hang")
    p.add_argument("--no-minimize", action="store_true", help="save mismatches without minimising them")
    p.add_argument("--min-budget", type=float, default=120.0, help="seconds to spend minimising one mismatch")
    p.add_argument("--include-known-bugs", default="", metavar="IDS",
                   help="comma-separated KNOWN_BUGS ids whose constructs to generate again ('all' for every "
                        f"one): {', '.join(KNOWN_BUGS)}")
    p.add_argument("--no-narrow", action="store_true", help="no bfloat16 / fp8")
    p.add_argument("--rng", type=float, default=0.0, metavar="W",
                   help="weight of tk.random statements (Philox words, bits/uniform/normal; off by default so "
                        "that earlier seeds keep their kernels; 1.0 is about one kernel in three)")
    p.add_argument("--bytes", type=float, default=0.0, metavar="W",
                   help="weight of byte-run statements (tk.load_i8, tk.lookup_u4, tk.load_halves, tk.dot_i8, "
                        "tk.dot_u4i8 on int8/uint8 arrays; off by default so that earlier seeds keep their kernels)")
    p.add_argument("--hazards", type=float, default=0.0, metavar="W",
                   help="weight of side-effect hazards (testing/fuzz/hazards.py): @tk.funcs with atomics and prints "
                        "called inside tk.uniform, x if c else y, and/or and chained comparisons, nested tuple "
                        "returns, Python int arguments near 2**63 and 2**64; off by default so that earlier seeds "
                        "keep their kernels")
    p.add_argument("--calls", type=float, default=0.0, metavar="W",
                   help="weight of testing/fuzz/calls.py's constructs: effect functions called from @tk.funcs, "
                        "collectives' arguments and uniform while conditions, default and keyword arguments, "
                        "tuple returns in conditions, 2-D private arrays of small ints, small-int/float16 "
                        "mixes, // and %% by run-time 0/-1, shifts by run-time amounts >= the width; off by default")
    p.add_argument("--edges", type=float, default=0.0, metavar="W",
                   help="weight of testing/fuzz/edges.py's constructs: loops whose trip count is a kernel argument "
                        "(mostly 0 or negative; a uint8 0 minus 1 wraps), tk.private arrays written by a @tk.func "
                        "that calls another reading them, small-int arithmetic with Python ints near the type's "
                        "bounds (NEP 50 wraparound); off by default")
    p.add_argument("--params", type=float, default=0.0, metavar="P",
                   help="probability that a scalar argument of a NumPy type is assigned to in the kernel like a "
                        "local (in loops too); off by default")
    p.add_argument("--print", type=float, default=0.0, metavar="W", dest="prints",
                   help="weight of tk.print statements, whose printed lines are compared (sorted) with the "
                        "reference's; off by default")
    p.add_argument("--fastmath", type=float, default=None, metavar="P",
                   help="fraction of seeds that make a fastmath case (default 0.1; 1.0: only those)")
    p.add_argument("--grouped", type=float, default=None, metavar="P",
                   help="fraction of kernels with local memory, barriers and collectives (default 0.35; 1.0: "
                        "all of them)")
    p.add_argument("--grad", action="store_true",
                   help="autodiff mode: random differentiable float64 kernels (testing/fuzz/gradgen.py); reverse "
                        "mode against finite differences, forward against reverse, and each backend's gradients "
                        "against the reference's (testing/fuzz/gradcheck.py)")
    p.add_argument("--grad-local", type=float, default=0.0, metavar="P",
                   help="with --grad: fraction of kernels with local memory, a barrier and a group reduction "
                        "(off by default so that earlier seeds keep their kernels)")
    p.add_argument("--grad-unsafe", type=float, default=0.0, metavar="P",
                   help="with --grad: fraction of @tk.kernel(unsafe_indices=True) kernels, 1-D to 3-D, whose "
                        "ndrange is no multiple of the workgroup (the padded items run every statement; the "
                        "kernel guards its stores; off by default so that earlier seeds keep their kernels)")
    p.add_argument("--grad-narrow", type=float, default=0.0, metavar="P",
                   help="with --grad: fraction of kernels whose float arrays are float16 or bfloat16 (accumulators "
                        "float32), checked against the same kernel on float64 arrays (off by default so that "
                        "earlier seeds keep their kernels)")
    p.add_argument("--progress", type=float, default=60.0, help="seconds between progress lines")
    p.add_argument("--stream", choices=("all", "auto"), default="all",
                   help="CPU streaming (non-temporal) stores: 'all' (default) streams every eligible store "
                        "whatever its size (TK_CPU_STREAM_BYTES=1), so the small arrays the fuzzer makes "
                        "exercise that code; 'auto' keeps the size threshold (or the environment's setting)")
    a = p.parse_args(argv)
    if a.stream == "all":       # read by each compiled kernel at its first launch (docs/cpu.md)
        os.environ["TK_CPU_STREAM_BYTES"] = "1"

    inc = set(KNOWN_BUGS) if a.include_known_bugs == "all" else {x for x in a.include_known_bugs.split(",") if x}
    unknown = inc - set(KNOWN_BUGS)
    if unknown:
        p.error(f"unknown bug ids: {', '.join(sorted(unknown))}")
    opts = Options(exclude=frozenset(KNOWN_BUGS) - inc, narrow_floats=not a.no_narrow, rng=a.rng, prints=a.prints, bytes=a.bytes,
                   hazards=a.hazards, calls=a.calls, edges=a.edges, params=a.params,
                   grad=a.grad, grad_local=a.grad_local, grad_unsafe=a.grad_unsafe,
                   grad_narrow=a.grad_narrow)
    if a.fastmath is not None:
        opts.fastmath = a.fastmath
    if a.grouped is not None:
        opts.grouped = a.grouped
    backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    if "CL" in [b.upper() for b in backends]:
        import tinykernels as tk
        ok, why = tk.backends().get("OpenCL", (False, "?"))
        if not ok:
            print(f"OpenCL is not available ({why}); running without it", file=sys.stderr)
            backends = [b for b in backends if b.upper() != "CL"]
    if any(b.upper().startswith("NVRTC") for b in backends):
        from tinykernels.runtime.cuda import nvrtc_available
        ok, why = nvrtc_available()
        if not ok:
            print(f"NVRTC is not available ({why}); running without it", file=sys.stderr)
            backends = [b for b in backends if not b.upper().startswith("NVRTC")]
    if any(b.upper().startswith("HIPCLANG") for b in backends):
        from tinykernels.runtime.hipclang import hip_clang_available
        ok, why = hip_clang_available()
        if not ok:
            print(f"clang cannot compile HIP here ({why}); running without HIPCLANG", file=sys.stderr)
            backends = [b for b in backends if not b.upper().startswith("HIPCLANG")]
    if any(b.upper() == "METAL-STUB" for b in backends):
        from tinykernels.testing.metal_check import find_clang
        if find_clang() is None:
            print("no clang++ for the METAL-STUB check; running without it", file=sys.stderr)
            backends = [b for b in backends if b.upper() != "METAL-STUB"]
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    logf = open(a.log, "a") if a.log else None

    def log(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        if logf:
            logf.write(line + "\n")
            logf.flush()

    reference, opts = profile_for(backends, a.reference, opts)     # WEBGPU: its profile, vs CPU32
    log(f"fuzz: seeds {a.seed}..{a.seed + a.count - 1}, backends {','.join(backends)} vs {reference}, "
        f"profile {opts.profile}, jobs {a.jobs}, grad {a.grad} (local {opts.grad_local}, unsafe {opts.grad_unsafe}, narrow {opts.grad_narrow}), rng {opts.rng}, print {opts.prints}, bytes {opts.bytes}, hazards {opts.hazards}, calls {opts.calls}, edges {opts.edges}, params {opts.params}, "
        f"fastmath {opts.fastmath}, grouped {opts.grouped}, stream {a.stream}, "
        f"excluded known bugs: {', '.join(sorted(opts.exclude)) or 'none'}")
    summ = fuzz(range(a.seed, a.seed + a.count), backends, reference, jobs=a.jobs, out_dir=a.out, opts=opts,
                minimize_found=not a.no_minimize, timeout=a.timeout, min_budget=a.min_budget, log=log,
                progress_every=a.progress, batch=a.batch)
    log("done: " + summ.line())
    feats = ", ".join(f"{k} {v}" for k, v in sorted(summ.features.items()))
    log(f"features (kernels using each): {feats}")
    for path in summ.reproducers:
        log(f"reproducer: {path}")
    if logf:
        logf.close()
    return 1 if summ.mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
