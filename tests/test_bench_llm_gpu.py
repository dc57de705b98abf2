"""benchmarks/bench_llm_gpu.py (the tinykernels.llm GPU benchmark) runs on the CPU backend,
verifies every implementation, and fails (exit 1, naming the case) on a wrong result, an
unwritten output or a tinykernels error. Runs with or without torch (torch columns n/a)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_llm_gpu.py"
HEADINGS = ("== RMSNorm over rows", "== softmax over rows", "== GEMV, decode", "== flash attention forward",
            "== decode attention", "== fused elementwise", "== Summary")
COLUMNS = ("case", "shape", "tinykernels GB/s", "torch GB/s", "memcopy GB/s", "tk/memcopy", "torch/memcopy",
           "target")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_llm_gpu_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod            # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def test_smoke_cpu_subprocess(tmp_path):
    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(SCRIPT), "--backend", "CPU", "--smoke", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for h in HEADINGS + COLUMNS + ("memcopy    :", "every result verified"):
        assert h in r.stdout, h
    data = json.loads(out.read_text())
    assert data["failures"] == []
    assert data["memcopy"]["gbs"] > 0
    fams = {row["family"] for row in data["rows"]}
    assert fams == {"norm", "softmax", "gemv", "attention", "decode", "elementwise"}
    for row in data["rows"]:
        t = row["tinykernels"]
        assert t["s"] > 0 and t["rel_err"] <= 1e-4, row     # float32 only under --smoke


def test_unwritten_output_fails(bench, monkeypatch, capsys):
    """A kernel that writes nothing leaves the NaN poison: the check fails and names the case."""
    monkeypatch.setattr(bench.llm, "rms_norm", lambda x, w, eps=1e-6, **kw: kw["out"])
    assert bench.main(["--backend", "CPU", "--smoke", "--only", "norm"]) == 1
    text = capsys.readouterr().out
    assert "FAILED" in text and "rms_norm float32 256x1024: tinykernels gives wrong results" in text
    assert "inf > 0.0001" in text                      # NaN in the output: the error is infinite


def test_wrong_values_fail(bench, monkeypatch, capsys):
    real = bench.llm.softmax
    monkeypatch.setattr(bench.llm, "softmax", lambda x, axis=-1, out=None: real(x, axis, scale=1.01, out=out))
    assert bench.main(["--backend", "CPU", "--smoke", "--only", "softmax"]) == 1
    text = capsys.readouterr().out
    assert "softmax float32 256x1024: tinykernels gives wrong results" in text
    assert "WRONG" in text


def test_tinykernels_error_is_a_row_not_a_crash(bench, monkeypatch, capsys):
    def broken(*a, **k):
        raise RuntimeError("no such kernel on this backend")
    monkeypatch.setattr(bench.llm, "flash_decode", broken)
    assert bench.main(["--backend", "CPU", "--smoke", "--only", "decode", "--only", "elementwise"]) == 1
    text = capsys.readouterr().out
    assert "ERROR" in text and "no such kernel on this backend" in text
    assert "swiglu float32" in text                    # the run went on after the error


def test_runs_without_ml_dtypes(tmp_path):
    """The device machine may lack ml_dtypes: bfloat16 is then left out with a note, the rest runs."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = ("import sys, runpy; sys.modules['ml_dtypes'] = None; "
            f"sys.argv = ['bench_llm_gpu.py', '--backend', 'CPU', '--smoke', '--only', 'norm']; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "bfloat16 left out: ml_dtypes is not importable" in r.stdout
    assert "rms_norm float32" in r.stdout and "every result verified" in r.stdout


def test_budget_leaves_cases_out_and_says_so(bench, capsys):
    assert bench.main(["--backend", "CPU", "--smoke", "--only", "norm", "--only", "softmax",
                       "--budget", "1e-9"]) == 0
    text = capsys.readouterr().out
    assert "over the --budget of 1e-09 s: not run: norm; softmax" in text
