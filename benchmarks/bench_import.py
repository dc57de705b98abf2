"""Time of ``import tinykernels`` beyond NumPy's own import, in fresh processes.

    python benchmarks/bench_import.py            # 15 runs each, medians
    python benchmarks/bench_import.py --runs 5

Each run is a new interpreter (``python -X importtime``); the table shows the median
cumulative import time of numpy and of tinykernels (which includes numpy) and their
difference, the cost a user pays for tinykernels itself. Bytecode is compiled first
(``compileall``) so that the numbers are those of an installed package. Target: under 40 ms
beyond NumPy (issue 14). Run on an idle machine; the spread is shown.
"""
from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
from pathlib import Path


def import_us(module: str) -> int:
    """Cumulative microseconds of ``import module`` in a fresh interpreter."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                       capture_output=True, text=True, env=env, check=True)
    for line in reversed(r.stderr.splitlines()):
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    raise RuntimeError(f"no import time for {module} in:\n{r.stderr[-2000:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)
    import tinykernels
    compileall.compile_dir(str(Path(tinykernels.__file__).parent), quiet=1)
    import_us("tinykernels")                       # warm the file cache
    np_t = sorted(import_us("numpy") for _ in range(args.runs))
    tk_t = sorted(import_us("tinykernels") for _ in range(args.runs))
    med_np, med_tk = statistics.median(np_t), statistics.median(tk_t)
    print(f"{'import':<26}{'median ms':>10}{'min ms':>9}{'max ms':>9}")
    print(f"{'numpy':<26}{med_np / 1e3:>10.1f}{np_t[0] / 1e3:>9.1f}{np_t[-1] / 1e3:>9.1f}")
    print(f"{'tinykernels (with numpy)':<26}{med_tk / 1e3:>10.1f}{tk_t[0] / 1e3:>9.1f}{tk_t[-1] / 1e3:>9.1f}")
    extra = (med_tk - med_np) / 1e3
    print(f"\ntinykernels beyond numpy: {extra:.1f} ms (target < 40 ms: {'PASS' if extra < 40 else 'MISS'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
