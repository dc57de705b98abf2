"""ImplicitGlobalGrid.jl-style halo and gather tests (its test_update_halo / test_gather idea:
fill local arrays with global coordinates, exchange, compare), under ``mpiexec -n 1/2/4``
with NumPy, CPU and OpenCL arrays. The worker is tests/ported_distributed_worker.py."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tinykernels as tk

WORKER = Path(__file__).resolve().parent / "ported_distributed_worker.py"


def _mpiexec():
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


pytestmark = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
                                reason="needs mpi4py and mpiexec (pip install 'tinykernels[mpi]' mpich)")


def _run(n, *where):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(tk.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    r = subprocess.run([_mpiexec(), "-n", str(n), sys.executable, str(WORKER), *where], capture_output=True,
                       text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "OK", r.stdout + r.stderr


@pytest.mark.parametrize("n", [1, 2, 4])
def test_halos_and_gather_hold_global_coordinates(n):
    _run(n, "numpy", "CPU")


def test_halos_and_gather_with_opencl_arrays():
    if "CL" not in tk.backends_available():
        pytest.skip("no OpenCL")
    _run(2, "CL")
