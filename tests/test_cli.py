"""``python -m tinykernels``: devices, demo, cache, --version (tinykernels.cli and tinykernels.demo)."""
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import cli, demo
from tinykernels.runtime.compiler import cache_dir

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _row(out: str, name: str) -> list:
    """The cells of the backend table's row for ``name``."""
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row for {name} in:\n{out}")


# ---------------------------------------------------------------------------- --version, help

def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tinykernels {tk.__version__}"


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for cmd in ("devices", "demo", "cache"):
        assert cmd in out


def test_usage_error_returns_2(capsys):
    assert cli.main(["cache", "explode"]) == 2
    assert "invalid choice" in capsys.readouterr().err


# ---------------------------------------------------------------------------- devices

def test_devices_lists_every_backend_and_cpu_available(capsys, monkeypatch):
    monkeypatch.delenv("DEV", raising=False)
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    for name in ("CUDA", "ROCm", "Metal", "OpenCL", "WebGPU", "CPU", "INTERP"):
        ok, detail = tk.backends()[name]
        row = _row(out, name)
        assert row[1] == ("yes" if ok else "no")
        assert str(detail).split()[0] in row[2:]          # the detail (why not / how to get it) is shown
    assert _row(out, "CPU")[1] == "yes"
    assert f"Default backend: {tk.default_backend()!r}" in out
    assert "first available" in out
    assert f"cores      {os.cpu_count()}" in out
    assert "OpenMP" in out and "compiler" in out and "version" in out
    assert str(cache_dir()) in out


def test_devices_reports_dev_variable(capsys, monkeypatch):
    monkeypatch.setenv("DEV", "CPU")
    assert cli.main(["devices"]) == 0
    assert "DEV=CPU" in capsys.readouterr().out


def test_devices_subprocess():
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("DEV", None)
    r = subprocess.run([sys.executable, "-m", "tinykernels", "devices"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert _row(r.stdout, "CPU")[1] == "yes"
    assert "Default backend" in r.stdout


# ---------------------------------------------------------------------------- demo

def test_step_kernel_matches_numpy_reference():
    """heat_step on a random, non-square field, interior ndrange, several steps."""
    rng = np.random.default_rng(0)
    T0 = rng.random((37, 53))
    b = tk.CPU()
    k = demo.heat_step(b)
    T, T2 = T0.copy(), T0.copy()
    want = T0.copy()
    for _ in range(5):
        k(T2, T, 0.7, 0.3, ndrange=(range(1, 36), range(1, 52)))
        tk.synchronize(b)
        T, T2 = T2, T
        want = demo.reference_step(want, 0.7, 0.3)
    np.testing.assert_allclose(T, want, rtol=1e-13, atol=1e-15)
    assert np.array_equal(T[0], T0[0]) and np.array_equal(T[:, -1], T0[:, -1])   # boundary untouched


def test_reference_step_is_the_textbook_stencil():
    T = np.zeros((5, 5))
    T[2, 2] = 1.0
    out = demo.reference_step(T, lam=1.0, dt=0.25)
    assert out[2, 2] == 0.0 and out[1, 2] == out[3, 2] == out[2, 1] == out[2, 3] == 0.25
    assert out.sum() == pytest.approx(1.0)
    assert T[2, 2] == 1.0                                # input not modified


def test_simulate_matches_reference_and_reports_progress():
    T0 = demo.initial_field(40)
    seen = []
    got, seconds = demo.simulate(tk.CPU(), T0, 7, on_progress=seen.append, chunk=3)
    np.testing.assert_allclose(got, demo.reference(T0, 7), rtol=1e-13, atol=1e-15)
    assert seen == [0, 3, 6, 7] and seconds > 0


def test_demo_cli_small(capsys, monkeypatch):
    monkeypatch.delenv("DEV", raising=False)
    assert cli.main(["demo", "--size", "64", "--steps", "10", "--no-png"]) == 0
    cap = capsys.readouterr()
    assert "T_eff" in cap.out and "GB/s" in cap.out
    assert "verified against NumPy" in cap.out
    assert "np.copyto" in cap.out and "(decreased)" in cap.out
    assert "PNG" not in cap.out
    assert "10/10 steps (100%)" in cap.err                # progress, as lines (stderr is not a TTY here)


def test_run_demo_returns_numbers():
    out = io.StringIO()
    r = demo.run_demo(backend="CPU", size=48, steps=6, png=None, out=out, progress=None)
    assert r["verified"] and r["verify_max_abs_err"] <= 1e-12
    assert r["steps"] == 6 and r["size"] == 48
    assert r["bytes_per_step"] == 2 * 48 * 48 * 8
    assert r["teff_gbs"] > 0 and r["copy_gbs"] > 0
    assert r["copy_fraction"] == pytest.approx(r["teff_gbs"] / r["copy_gbs"])
    assert r["seconds_per_step"] == pytest.approx(r["seconds"] / 6)
    assert r["max_final"] < r["max_initial"]
    assert r["heat_final"] <= r["heat_initial"]
    assert "T_eff" in out.getvalue()


def test_demo_without_matplotlib_says_how(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import matplotlib -> ImportError
    out = io.StringIO()
    r = demo.run_demo(size=32, steps=3, png=str(tmp_path / "h.png"), out=out, progress=None)
    assert r["png"] is None and not (tmp_path / "h.png").exists()
    assert "install matplotlib for a PNG" in out.getvalue()


def test_demo_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = io.StringIO()
    path = tmp_path / "heat.png"
    r = demo.run_demo(size=32, steps=3, png=str(path), out=out, progress=None)
    assert r["png"] == str(path) and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(path) in out.getvalue()


def test_demo_bad_backend_fails_cleanly(capsys):
    assert cli.main(["demo", "--backend", "NOPE", "--size", "16", "--steps", "1", "--no-png"]) == 1
    assert "NOPE" in capsys.readouterr().err


def test_progress_bar_on_a_tty():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    s = Tty()
    p = demo.Progress(4, s)
    p.update(0)
    for d in range(1, 5):
        p.update(d)
    text = s.getvalue()
    assert text.startswith("\r") and text.endswith("\n") and "100.0%" in text and "4/4" in text


# ---------------------------------------------------------------------------- cache

def test_cache_path(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TK_CACHE_DIR", str(tmp_path / "c"))
    assert cli.main(["cache", "path"]) == 0
    assert capsys.readouterr().out == str(tmp_path / "c") + "\n"


def test_cache_info_and_clear(capsys, monkeypatch, tmp_path):
    root = tmp_path / "cache"
    monkeypatch.setenv("TK_CACHE_DIR", str(root))
    assert cli.main(["cache"]) == 0                                # missing dir: info still works
    out = capsys.readouterr().out
    assert str(root) in out and "does not exist yet" in out and "0 files" in out

    @tk.kernel
    def fill_for_cache_test(A, v):
        i = tk.index()
        A[i] = v

    a = np.zeros(8)
    fill_for_cache_test(tk.CPU())(a, 3.0, ndrange=8)                # compiles into the new cache dir
    tk.synchronize(tk.CPU())
    assert (a == 3.0).all()
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "keep.txt").write_text("not ours")

    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    kernels = _row(out, "kernels")
    assert int(kernels[1]) >= 1 and kernels[2].startswith("file")
    assert int(_row(out, "total")[1]) >= int(kernels[1])
    assert "elsewhere" in out

    assert cli.main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed" in out and str(root / "kernels") in out and "cleared" in out
    assert not (root / "kernels").exists() and not (root / "launch").exists()
    assert not (root / "toolchains").exists()
    assert (root / "elsewhere" / "keep.txt").exists()             # only tinykernels' folders go

    assert cli.main(["cache", "info"]) == 0
    assert _row(capsys.readouterr().out, "total")[1] == "0"
    assert cli.main(["cache", "clear"]) == 0                       # clearing an empty cache is fine
    assert "cleared 0 files" in capsys.readouterr().out


def test_demo_defaults_follow_the_backend():
    """float32 where the backend has no float64; a small grid on the interpreter."""
    class NoF64:
        name, supports_float64 = "WEBGPU", False
    assert demo.dtype_for(NoF64()) == np.float32 and demo.dtype_for(tk.CPU()) == np.float64
    assert demo.defaults_for(tk.Interpreter()) == (demo.INTERP_SIZE, demo.INTERP_STEPS)
    assert demo.defaults_for(tk.CPU()) == (demo.DEFAULT_SIZE, demo.DEFAULT_STEPS)


def test_demo_on_the_interpreter_is_small_and_says_so():
    out, err = io.StringIO(), io.StringIO()
    r = demo.run_demo(backend="INTERP", png=None, out=out, progress=err, verify=False, steps=2)
    assert r["size"] == demo.INTERP_SIZE and r["dtype"] == "float64"
    assert "MB/s" in out.getvalue() and "2/2 steps (100%)" in err.getvalue()


@pytest.mark.skipif("WEBGPU" not in tk.backends_available(), reason="WebGPU unavailable")
def test_demo_on_webgpu_runs_in_float32():
    out = io.StringIO()
    r = demo.run_demo(backend="WEBGPU", size=40, steps=4, png=None, out=out, progress=None)
    assert r["dtype"] == "float32" and r["verified"] and r["verify_max_abs_err"] < 1e-5
    assert "no float64" in out.getvalue()


def test_import_loads_no_runtime_compiler_or_autodiff():
    """`import tinykernels` stays light: device runtimes, the compiler frontend, the
    interpreter and autodiff are imported on first use (benchmarks/bench_import.py times it)."""
    import subprocess
    import sys
    code = ("import sys, tinykernels as tk; "
            "print(sorted(m for m in sys.modules if m.startswith(('tinykernels', 'pyopencl', 'wgpu', 'cuda'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("runtime.opencl", "runtime.webgpu", "runtime.cuda", "runtime.interp", "frontend",
                  "autodiff", "codegen", "passes", "pyopencl", "wgpu", "'cuda"):
        assert heavy not in out, (heavy, out)
    # and everything is still there on first use
    code = ("import tinykernels as tk, tinykernels.autodiff; print(tk.OpenCL.__name__, tk.Interpreter.__name__, "
            "type(tk.autodiff).__name__, tk.KernelIndexError.__name__, 'OpenCL' in dir(tk))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["OpenCL", "Interpreter", "function", "KernelIndexError", "True"]


# ---------------------------------------------------------------------------- first use, setup

_FIRST_LAUNCH = """
import numpy as np, tinykernels as tk
@tk.kernel
def one(a):
    a[tk.index()] = 1.0
x = np.zeros(4)
one(tk.CPU())(x, ndrange=4)
tk.synchronize()
assert (x == 1).all()
"""


def _fresh_env(tmp_path, **extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TK_CACHE_DIR"] = str(tmp_path / "cache")
    env.pop("TK_QUIET", None)
    env.update(extra)
    return env


def test_first_launch_says_once_that_it_sets_up(tmp_path):
    """The one-time set-up (compiler probe, launcher build) is announced once, then never again."""
    env = _fresh_env(tmp_path)
    r = subprocess.run([sys.executable, "-c", _FIRST_LAUNCH], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("first use on this machine") == 1, r.stderr
    assert str(tmp_path / "cache") in r.stderr
    again = subprocess.run([sys.executable, "-c", _FIRST_LAUNCH], env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_first_use_notice_silenced_by_tk_quiet(tmp_path):
    env = _fresh_env(tmp_path, TK_QUIET="1")
    r = subprocess.run([sys.executable, "-c", _FIRST_LAUNCH], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_setup_command_builds_ahead_of_the_first_launch(tmp_path):
    env = _fresh_env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "tinykernels", "setup"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "C compiler" in r.stdout and "launcher" in r.stdout and "set up in" in r.stdout
    again = subprocess.run([sys.executable, "-m", "tinykernels", "setup"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert "already set up" in again.stdout and again.stderr == ""
    launch = subprocess.run([sys.executable, "-c", _FIRST_LAUNCH], env=env, capture_output=True, text=True,
                            timeout=120)
    assert launch.returncode == 0 and launch.stderr == "", launch.stderr   # nothing left to announce
