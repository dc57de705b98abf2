"""SPEC section 12 as a stranger uses it (audit user22): a 2-D heat equation periodic along x
on a GlobalGrid, stepped with update_halo and with hide_communication, gathered and compared
bit for bit with the same steps in NumPy on the global grid: on one rank in this process's
own interpreter, and on 2 ranks under mpiexec. The worker is
tests/user_programs22_dist_worker.py."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tinykernels as tk

WORKER = Path(__file__).resolve().parent / "user_programs22_dist_worker.py"


def _mpiexec():
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


pytestmark = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                                reason="needs mpi4py (pip install 'tinykernels[mpi]')")


def _run(cmd):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(tk.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "OK", r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("dev", ["CPU", "CL"])
def test_heat_on_one_rank_equals_numpy(dev):
    if dev == "CL" and not tk.backends()["OpenCL"][0]:
        pytest.skip(f"OpenCL: {tk.backends()['OpenCL'][1]}")
    out = _run([sys.executable, str(WORKER), dev])
    assert "nprocs 1" in out


@pytest.mark.parametrize("dims", ["2,1", "1,2"])
def test_heat_on_two_ranks_equals_numpy(dims):
    """Split along the periodic x (each rank is the other's left and right neighbour) or along
    the bounded y."""
    if _mpiexec() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    out = _run([_mpiexec(), "-n", "2", sys.executable, str(WORKER), "CPU", dims])
    assert "nprocs 2" in out and f"dims ({dims.replace(',', ', ')})" in out
