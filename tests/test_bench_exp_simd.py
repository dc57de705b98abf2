"""benchmarks/bench_exp_simd.py (the AVX-512 exp experiment): the mock-up builds with the CPU
backend's flags, GCC's vectorized loop calls the hand-written 16-lane variant, and every variant
gives the bits of tk_exp_f32 (a strided sample here; the script's --check runs all 2^32 inputs).
Timing is not asserted."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import tinykernels as tk

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_exp_simd.py"
pytestmark = pytest.mark.skipif(not tk.backends().get("CPU", (False,))[0], reason="no C compiler")


def _run(args, capsys) -> tuple:
    """The script module and what its main printed (skips where it measures nothing)."""
    spec = importlib.util.spec_from_file_location("bench_exp_simd_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(args) == 0
    out = capsys.readouterr().out
    if "nothing measured" in out:
        pytest.skip("needs GCC and AVX-512")
    return mod, out


def test_every_variant_gives_the_bits_of_tk_exp_f32(capsys):
    _, out = _run(["--check", "--stride", "65521"], capsys)
    assert out.count(": 0 results differ from tk_exp_f32") == 3
    assert int(out.split("called the AVX-512 variant ")[1].split()[0]) > 0


def test_the_timing_rows_print(capsys):
    mod, out = _run(["--quick", "--n", "4096"], capsys)
    for row in mod.VARIANTS:
        assert f"  {row} " in out
