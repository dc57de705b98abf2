"""benchmarks/bench_exp.py: the exp throughput script runs, checks its kernels against NumPy
and prints the softmax bound (timing itself is not asserted)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import tinykernels as tk

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_exp.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_exp_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_softmax_bound_is_the_exp_rate_per_core():
    mod = _load()
    # 0.7 of 75 GB/s, 8 bytes of T_eff per element, 2 cores: 3.28125 G exp/s per core
    assert mod.softmax_bound(0.7, 75.0, 2) == pytest.approx(0.7 * 75.0 / 8 / 2)


@pytest.mark.skipif(not tk.backends().get("CPU", (False,))[0], reason="no C compiler")
def test_bench_exp_runs_and_checks_every_row(capsys):
    mod = _load()
    assert mod.main(["--n", "4096", "--min-time", "0.01", "--copy-gbs", "80", "--cores", "4"]) == 0
    out = capsys.readouterr().out
    for row in ("default", "fastmath", "llm exp_f32", "numpy"):
        assert f"  {row} " in out
    assert "needs >= 1.75 G exp/s per core" in out
