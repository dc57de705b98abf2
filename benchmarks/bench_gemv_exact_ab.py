#!/usr/bin/env python3
"""The exact host q4_0/q8_0 GEMV kernels of another git revision against this tree's, in one
process (issue 13, q4x18): the machine's load drifts between processes, so the two kernels
are alternated per round in one process and the medians compared.

    PYTHONPATH=src python3 benchmarks/bench_gemv_exact_ab.py --base d36c5d0        # CPU time, 2 threads
    PYTHONPATH=src python3 benchmarks/bench_gemv_exact_ab.py --base d36c5d0 --wall  # wall clock (idle machine)
    PYTHONPATH=src python3 benchmarks/bench_gemv_exact_ab.py --quick

``--base``'s ``src/tinykernels/llm/matmul.py`` (``git show``) is loaded as a second module
beside this tree's ``tinykernels.llm.matmul``; each revision launches its kernel with its own
work-item count (``host_items`` where the module has it: two rows per item since q4x18; else
one per row). 64 MiB of weights (rows of K = 4096; random bytes, float16 scales of both signs),
both results compared bit for bit first (exit status 1 if they differ). Per round: the best of
``--calls`` calls of each (in alternating order), and a two-thread ``np.copyto`` of the same
bytes for scale. Default timing is CPU time (``time.process_time``; run with
``OMP_WAIT_POLICY=PASSIVE``, set here) so that a loaded machine's descheduling does not count;
``--wall`` times ``time.perf_counter`` as ``bench_llm.py`` does (meaningful only idle; only then
is "of the copy" issue 13's fraction: in CPU time it compares CPU seconds, not bandwidths).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import statistics as st
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

import tinykernels as tk  # noqa: E402

K = 4096


def base_module(rev: str, d: str):
    """``rev``'s ``llm/matmul.py`` as the module ``tinykernels.llm._base_matmul``."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/tinykernels/llm/matmul.py"],
                         check=True, capture_output=True, text=True).stdout
    path = Path(d) / "base_matmul.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("tinykernels.llm._base_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def items(mod, qtype: str, m: int) -> int:
    """Work items of ``mod``'s exact host GEMV for ``m`` rows."""
    return mod.host_items(qtype, m) if hasattr(mod, "host_items") else m


def weights(qtype: str, mib: int, rng) -> np.ndarray:
    """``mib`` MiB of random q4_0/q8_0 rows of K weights, scales of both signs, all finite."""
    bb = 18 if qtype == "q4_0" else 34
    nb = K // 32
    m = (mib << 20) // (nb * bb)
    data = rng.integers(0, 256, (m, nb * bb), dtype=np.uint8)
    sc = rng.integers(0x2000, 0x2800, (m, nb)).astype(np.uint16) | (rng.integers(0, 2, (m, nb)).astype(np.uint16) << 15)
    data.reshape(m, nb, bb)[:, :, :2] = sc.view(np.uint8).reshape(m, nb, 2)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="HEAD~1", help="git revision to compare against (default HEAD~1)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=5, help="calls per kernel per round (the best counts)")
    ap.add_argument("--wall", action="store_true", help="wall clock instead of CPU time")
    ap.add_argument("--quick", action="store_true", help="smoke test: 2 MiB, 3 rounds")
    a = ap.parse_args(argv)
    mib, rounds = (2, 3) if a.quick else (64, a.rounds)
    clock = time.perf_counter if a.wall else time.process_time
    new = importlib.import_module("tinykernels.llm.matmul")
    be = tk.CPU(threads=a.threads)
    pool = ThreadPoolExecutor(2)
    rng = np.random.default_rng(1)
    ok = True
    with tempfile.TemporaryDirectory() as d:
        old = base_module(a.base, d)
        print(f"exact host GEMV, {a.base} (old) vs this tree (new): {mib} MiB, K = {K}, {a.threads} thread(s), "
              f"{rounds} rounds, best of {a.calls} calls, {'wall clock' if a.wall else 'CPU time'}")
        for qtype in ("q4_0", "q8_0"):
            data = weights(qtype, mib, rng)
            m = data.shape[0]
            x = rng.standard_normal(K).astype(np.float32)
            runs = {}
            outs = {}
            for name, mod in (("old", old), ("new", new)):
                kern, out, n = mod._HOST_GEMV[qtype].instance(be), np.zeros(m, np.float32), items(mod, qtype, m)
                kern(out, data, x, ndrange=n)
                outs[name] = out
                runs[name] = (lambda kern=kern, out=out, n=n: kern(out, data, x, ndrange=n))
            if outs["old"].tobytes() != outs["new"].tobytes():
                print(f"  {qtype}: MISMATCH between the two revisions' results")
                ok = False
                continue
            flat = data.reshape(-1)
            dst = np.empty_like(flat)
            h = flat.size // 2
            runs["copy"] = lambda: list(pool.map(lambda s: np.copyto(dst[s], flat[s]), (slice(0, h), slice(h, None))))
            times = {k: [] for k in runs}
            load0 = os.getloadavg()[0]
            for r in range(rounds):
                for k in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                    best = float("inf")
                    for _ in range(a.calls):
                        t0 = clock()
                        runs[k]()
                        best = min(best, clock() - t0)
                    times[k].append(best)
            ratio = [n / o for n, o in zip(times["new"], times["old"])]
            med = {k: st.median(v) * 1e3 for k, v in times.items()}
            gbs = data.nbytes / 1e6 / med["copy"]
            print(f"  {qtype} {m}x{K}: old {med['old']:.3f} ms, new {med['new']:.3f} ms, new/old {st.median(ratio):.3f} "
                  f"(rounds {min(ratio):.3f}-{max(ratio):.3f}); copy {med['copy']:.3f} ms ({gbs:.1f} GB/s): "
                  f"old {med['copy'] / med['old']:.2f}, new {med['copy'] / med['new']:.2f} of it; "
                  f"load average {load0:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
