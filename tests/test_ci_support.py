"""tests/conftest.py's CI support, run on a throwaway test module in a pytest subprocess:
module-level random generators reseeded per test, and the record/deselect round trip of
``.ci/run``'s two stages (with and without pytest-xdist)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

MODULE = '''
import json, os, random
import numpy as np
import pytest

rng = np.random.default_rng(1)
legacy = np.random.RandomState(2)
plain = random.Random(3)

def draw(rng=rng):                      # a helper holding the generator as a default argument
    return rng.random()

def _log(name, value):
    with open(os.environ["DRAWS"], "a") as f:
        f.write(json.dumps([name, value]) + "\\n")

def test_first():
    _log("first", [draw(), float(legacy.rand()), plain.random()])

@pytest.mark.parametrize("k", [1, 2])
def test_param(k):
    _log(f"param{k}", [draw(), float(legacy.rand()), plain.random()])

def test_skips():
    pytest.skip("stands for a test that needs an extra")
'''


def _project(tmp_path: Path) -> Path:
    d = tmp_path / "proj"
    (d / "tests").mkdir(parents=True)
    # the project's conftest, loaded by path so that this copy of the tree is the one tested
    (d / "tests" / "conftest.py").write_text(
        "import importlib.util as _u\n"
        f"_s = _u.spec_from_file_location('tk_ci_conftest', {str(CONFTEST)!r})\n"
        "_m = _u.module_from_spec(_s)\n_s.loader.exec_module(_m)\n"
        "globals().update({k: v for k, v in vars(_m).items() if not k.startswith('__')})\n")
    (d / "tests" / "test_mod.py").write_text(MODULE)
    return d


def _pytest(d: Path, *args: str, **env: str) -> dict[str, list]:
    draws = d / "draws.jsonl"
    draws.unlink(missing_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TK_TESTS_")}
    full_env.update(env, DRAWS=str(draws), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "tests"],
                       cwd=d, env=full_env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(json.loads(line) for line in draws.read_text().splitlines()) if draws.exists() else {}


def test_a_test_draws_the_same_data_whichever_tests_ran_before_it(tmp_path):
    d = _project(tmp_path)
    full = _pytest(d)
    assert sorted(full) == ["first", "param1", "param2"]
    assert full["param1"] != full["param2"] != full["first"]          # not one seed for all
    alone = _pytest(d, "-k", "test_param and 2")
    assert alone == {"param2": full["param2"]}
    again = _pytest(d)
    assert again == full


def test_the_second_stage_runs_only_what_did_not_pass_in_the_first(tmp_path):
    d = _project(tmp_path)
    record = d / "passed.txt"
    first = _pytest(d, TK_TESTS_RECORD_PASSED=str(record))
    assert sorted(record.read_text().split()) == [
        "tests/test_mod.py::test_first", "tests/test_mod.py::test_param[1]", "tests/test_mod.py::test_param[2]"]
    # stage 2 deselects the three that passed; the skipped one runs (and skips) again
    (d / "tests" / "test_mod.py").write_text(MODULE + "\ndef test_new():\n    _log('new', [draw()])\n")
    second = _pytest(d, TK_TESTS_SKIP_PASSED=str(record))
    assert sorted(second) == ["new"]
    full = _pytest(d)
    assert full["new"] == second["new"] and full["first"] == first["first"]


def test_the_round_trip_under_xdist(tmp_path):
    pytest.importorskip("xdist")
    d = _project(tmp_path)
    record = d / "passed.txt"
    serial = _pytest(d)
    assert _pytest(d, "-n", "2", "--dist", "load", TK_TESTS_RECORD_PASSED=str(record)) == serial
    assert len(record.read_text().split()) == 3
    assert _pytest(d, "-n", "2", TK_TESTS_SKIP_PASSED=str(record)) == {}
