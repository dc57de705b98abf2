"""SPEC section 12 (tinykernels.distributed) read as a stranger and an ImplicitGlobalGrid user
would (audit fw19), under ``mpiexec -n 1/2/4`` (tests/spec_audit19_dist_worker.py): the
constructor's defaults and global sizes, ImplicitGlobalGrid's x_g/y_g/z_g known values
(``GlobalGrid.global_coordinates``, new in fw19, with staggered arrays), coordinates gathered
across ranks, ``local_part`` of staggered global arrays (fw19), update_halo on several fields
of several dtypes and staggerings, complex and datetime arrays (fw19: a complex array was a
TypeError on some ranks only), a thin dimension that the chosen split leaves alone (fw19:
``GlobalGrid((6, 6, 1))`` on 8 ranks split z and failed), ``select_device`` (fw19), errors and
``free``. Skips cleanly without mpi4py or mpiexec."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
WORKER = HERE / "spec_audit19_dist_worker.py"


def _mpiexec() -> str | None:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


pytestmark = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
                                reason="needs mpi4py and mpiexec (pip install 'tinykernels[mpi]' mpich)")


def _run(n: int, *cases: str, timeout: float = 240) -> str:
    env = dict(os.environ)
    src = str(HERE.parent / "src")
    env["PYTHONPATH"] = src + os.pathsep + str(HERE) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TK_NUM_THREADS", "1")
    cmd = [_mpiexec(), "-n", str(n), sys.executable, str(WORKER), *cases]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} timed out after {timeout} s:\n{e.stdout}\n{e.stderr}")
    assert r.returncode == 0 and "ALL OK" in r.stdout, f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}"
    for c in cases:
        assert f"OK {c}\n" in r.stdout
    return r.stdout


ALL = ["defaults", "coordinates_across_ranks", "update_several_fields", "complex_and_other_dtypes", "thin_dimension",
       "select_device", "errors_and_free"]


def test_one_rank_and_igg_known_coordinates():
    _run(1, "igg_coordinates", *ALL)


@pytest.mark.parametrize("n", [2, 4])
def test_several_ranks(n):
    _run(n, *ALL)
