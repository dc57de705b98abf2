"""tinykernels.distributed: the index arithmetic (pure), and real runs under mpiexec.

The MPI runs start ``tests/distributed_worker.py`` with ``mpiexec -n 1/2/3/4`` (MPICH's
wheel runs 4 ranks on 2 cores without --oversubscribe); each compares the gathered
multi-rank result with the single-rank one, bit for bit. They skip cleanly when mpi4py
or mpiexec is missing.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.distributed import topology as T

HERE = Path(__file__).resolve().parent
WORKER = HERE / "distributed_worker.py"


# ------------------------------------------------------------------------- pure functions

@pytest.mark.parametrize("n,h,m,periodic", [(10, 1, 1, False), (10, 1, 3, False), (12, 2, 4, False),
                                            (10, 1, 1, True), (9, 2, 3, True), (6, 2, 4, True)])
def test_owned_ranges_tile_the_global_grid(n, h, m, periodic):
    size = T.global_size(n, h, m, periodic)
    seen = np.zeros(size, int)
    for c in range(m):
        a, b = T.owned_range(n, h, c, m, periodic)
        g = [T.global_index(i, n, h, c, size, periodic) for i in range(a, b)]
        assert g == list(range(g[0], g[0] + b - a))          # contiguous, no wrap inside the owned part
        seen[g] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize("n,h,m,periodic", [(10, 1, 3, False), (12, 2, 4, True), (7, 2, 1, True)])
def test_halos_hold_the_neighbours_send_planes(n, h, m, periodic):
    """A rank's left halo is its left neighbour's right send planes, globally the same points."""
    size = T.global_size(n, h, m, periodic)
    (r_lo, r_hi), (s_lo, s_hi) = T.recv_ranges(n, h), T.send_ranges(n, h)
    for c in range(m):
        left = (c - 1) % m if periodic else c - 1
        if left < 0:
            continue
        mine = [T.global_index(i, n, h, c, size, periodic) for i in range(*r_lo)]
        theirs = [T.global_index(i, n, h, left, size, periodic) for i in range(*s_hi)]
        assert mine == theirs
        mine = [T.global_index(i, n, h, left, size, periodic) for i in range(*r_hi)]
        theirs = [T.global_index(i, n, h, c, size, periodic) for i in range(*s_lo)]
        assert mine == theirs


@pytest.mark.parametrize("shape,widths", [((10,), (2,)), ((10, 12), (2, 3)), ((8, 9, 10), (1, 2, 3)),
                                          ((8, 9, 10), (0, 4, 1)), ((6, 6), (5, 5)), ((5, 7, 4), (3, 0, 9))])
def test_split_boundary_covers_each_point_once(shape, widths):
    region = tuple((1, n - 1) for n in shape)
    slabs, inner = T.split_boundary(region, widths)
    count = np.zeros(shape, int)
    for box in slabs + [inner]:
        count[tuple(slice(a, b) for a, b in box)] += 1
    expect = np.zeros(shape, int)
    expect[tuple(slice(a, b) for a, b in region)] = 1
    assert (count == expect).all()
    for d, w in enumerate(widths):       # the planes next to each end are in slabs, not in the interior
        a, b = region[d]
        assert inner[d][0] >= min(b, a + w) and (inner[d][1] <= max(a, b - w) or inner[d][0] == inner[d][1])


def test_local_shape_for_round_trips():
    for g, h, m, p in itertools.product((12, 24), (1, 2), (1, 2, 4), (False, True)):
        try:
            (n,) = T.local_shape_for((g,), h, (m,), (p,))
        except ValueError:
            assert (g - (0 if p else 2 * h)) % m
            continue
        assert T.global_size(n, h, m, p) == g
    with pytest.raises(ValueError, match="cannot be split into 4 blocks"):
        T.local_shape_for((11,), 1, (4,), (False,))


def test_check_local_shape_messages():
    T.check_local_shape((3, 1), 1, (2, 1), (False, False))      # dimension 1 exchanges nothing
    with pytest.raises(ValueError, match=r"local_shape\[0\] = 5 is too small for halo 2"):
        T.check_local_shape((5, 8), 2, (1, 1), (True, False))
    with pytest.raises(ValueError, match="halo must be at least 1"):
        T.check_local_shape((8,), 0, (1,), (False,))


def test_package_imports_without_mpi():
    """Importing tinykernels.distributed does not start MPI (mpi4py is imported by GlobalGrid)."""
    code = ("import sys, tinykernels.distributed as d; "
            "assert 'mpi4py.MPI' not in sys.modules, 'MPI was initialized'; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=_env())
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_missing_mpi4py_says_what_to_install():
    """Without mpi4py, GlobalGrid and the diffusion3d command name the extra to install."""
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "from tinykernels.distributed import GlobalGrid\n"
            "try:\n    GlobalGrid((8, 8))\nexcept ImportError as e:\n    print('hint:', e)\n"
            "from tinykernels.cli import main\n"
            "print('rc', main(['diffusion3d', '--steps', '1']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    assert "hint: tinykernels.distributed needs mpi4py" in r.stdout and "tinykernels[mpi]" in r.stdout, r.stderr
    assert "rc 1" in r.stdout and "error: tinykernels.distributed needs mpi4py" in r.stderr


class _FakeMPI:
    def __init__(self, answer=None):
        if answer is not None:
            self.Query_cuda_support = lambda: answer


def test_cuda_aware_detection(monkeypatch):
    from tinykernels.distributed._mpi import cuda_aware
    for var in ("TK_MPI_CUDA_AWARE", "MPICH_GPU_SUPPORT_ENABLED", "MV2_USE_CUDA"):
        monkeypatch.delenv(var, raising=False)
    assert not cuda_aware(_FakeMPI())
    assert cuda_aware(_FakeMPI(True)) and not cuda_aware(_FakeMPI(False))
    monkeypatch.setenv("MPICH_GPU_SUPPORT_ENABLED", "1")
    assert cuda_aware(_FakeMPI())
    monkeypatch.setenv("TK_MPI_CUDA_AWARE", "0")               # the override wins
    assert not cuda_aware(_FakeMPI(True))
    monkeypatch.setenv("TK_MPI_CUDA_AWARE", "1")
    assert cuda_aware(_FakeMPI(False))


# ------------------------------------------------------------------------- runs under mpiexec

def _mpiexec() -> str | None:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


def _env() -> dict:
    env = dict(os.environ)
    src = str(HERE.parent / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TK_NUM_THREADS", "1")      # 4 ranks on 2 cores: no OpenMP oversubscription on top
    return env


needs_mpi = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
                               reason="needs mpi4py and mpiexec (pip install 'tinykernels[mpi]' mpich)")


def _run(n: int, *args: str, timeout: float = 120) -> str:
    cmd = [_mpiexec(), "-n", str(n), sys.executable, str(WORKER), *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} timed out after {timeout} s:\n{e.stdout}\n{e.stderr}")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "ALL OK" in r.stdout, f"{' '.join(cmd)} failed:\n{out}"
    return r.stdout


@needs_mpi
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_multi_rank_equals_single_rank_cpu(n):
    """3 ranks: an odd decomposition (dims (3, 1) / (3, 1, 1)); the worker's global sizes are
    multiples of 12 so that 1 to 4 ranks split them."""
    out = _run(n, "--backend", "CPU", "--cases", "all")
    # 1-, 2- and 3-D, periodic and not, halo 1 and 2, float32/float64/int32, both exchange paths
    assert out.count("OK ") >= 30 and "3-D periodic halo 2 int32" in out and "2-D not periodic halo 1 float32" in out
    assert "OK halo not an int" in out and "OK update_halo of torch tensors" in out


@needs_mpi
@pytest.mark.skipif("CL" not in tk.backends_available(), reason="no OpenCL device")
@pytest.mark.parametrize("n", [1, 2])
def test_multi_rank_equals_single_rank_opencl(n):
    out = _run(n, "--backend", "CL", "--cases", "stencils", timeout=240)
    assert "3-D periodic halo 2 float32" in out


@needs_mpi
@pytest.mark.skipif("WEBGPU" not in tk.backends_available(), reason="no WebGPU adapter")
def test_multi_rank_equals_single_rank_webgpu():
    """WebGPU arrays are staged like OpenCL's (float32 and int32: WebGPU has no float64)."""
    out = _run(2, "--backend", "WEBGPU", "--cases", "stencils", timeout=240)
    assert "3-D periodic halo 2 int32" in out and "float64" not in out


@needs_mpi
def test_diffusion3d_command_under_mpiexec():
    """`mpiexec -n 2 python -m tinykernels diffusion3d`: T_eff per rank, the fraction hidden, and
    the overlapped run equal to the sequential one (exit status 0)."""
    cmd = [_mpiexec(), "-n", "2", sys.executable, "-m", "tinykernels", "diffusion3d", "--local-size", "12",
           "--steps", "2", "--backend", "CPU", "--delay", "0.001", "--boundary-width", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("T_eff =") == 2 and "rank 1 coords (1, 0, 0)" in r.stdout
    assert "communication hidden:" in r.stdout and "equals sequential: yes" in r.stdout


@needs_mpi
@pytest.mark.parametrize("backend", ["CPU"] + (["CL"] if "CL" in tk.backends_available() else []))
def test_periodic_single_rank_exchange_is_local(backend):
    """One rank along a periodic dimension is its own neighbour: update_halo copies the send
    planes into the opposite halos on the device, posting no MPI message (a communicator
    that refuses Isend/Irecv proves it), and the halos equal NumPy's wrap-around."""
    code = f"""
import numpy as np, tinykernels as tk
from mpi4py import MPI
from tinykernels.distributed import GlobalGrid

class NoMessages:
    def __init__(self, comm):
        self._comm = comm
    def __getattr__(self, name):
        if name in ("Isend", "Irecv", "Send", "Recv", "Sendrecv"):
            raise AssertionError("a message was posted: " + name)
        return getattr(self._comm, name)

h = 2
for shape in ((9,), (7, 8), (6, 7, 8)):
    grid = GlobalGrid(shape, halo=h, periodic=True, comm=MPI.COMM_SELF)
    grid.comm = NoMessages(grid.comm)
    G = np.random.default_rng(len(shape)).standard_normal(grid.global_shape).astype(np.float32)
    want = grid.local_part(G)
    owned = np.pad(np.ones([n - 2 * h for n in shape], bool), h)
    B = tk.asarray(np.where(owned, want, np.float32(0)), backend=tk.backend("{backend}"))
    grid.update_halo(B)
    assert np.array_equal(B.numpy(), want), shape
    grid.free()
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@needs_mpi
def test_global_index_checks_its_arguments():
    """global_index(i, dim) needs 0 <= dim < ndim and 0 <= i < local_shape[dim] (it returned
    made-up indices past the local array, and wrapped a negative dim); integers only."""
    code = """
import numpy as np
from mpi4py import MPI
from tinykernels.distributed import GlobalGrid

grid = GlobalGrid((6, 5), halo=1, comm=MPI.COMM_SELF)
assert [grid.global_index(i, 1) for i in range(5)] == list(range(5))
assert grid.global_index(np.int64(2), np.int32(0)) == 2
for i, dim, err, text in ((6, 0, IndexError, "local index 6 is out of range along dim 0 (0 <= i < 6"),
                          (-1, 0, IndexError, "local index -1"), (0, 2, IndexError, "dim 2 is out of range"),
                          (0, -1, IndexError, "dim -1"), (1.0, 0, TypeError, "i must be an integer"),
                          (True, 0, TypeError, "i must be an integer"), (0, "x", TypeError, "dim must be")):
    try:
        grid.global_index(i, dim)
    except err as e:
        assert text in str(e), str(e)
    else:
        raise AssertionError((i, dim))
try:
    grid.global_indices(2)
except IndexError as e:
    assert "GlobalGrid.global_indices: dim 2" in str(e), str(e)
else:
    raise AssertionError("global_indices(2)")
grid.free()
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
