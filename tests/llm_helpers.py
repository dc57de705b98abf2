"""Shared by the tests/test_llm_*.py files: the backends to run on, moving arrays there and
back, and dtype-derived tolerances."""
import numpy as np
import pytest

import tinykernels as tk

ALL = ("CPU", "INTERP", "CL", "WEBGPU")


def backends(*, no_webgpu_16bit=False):
    """pytest params of every backend name, skipped cleanly where absent."""
    avail = set(tk.backends_available())
    return [pytest.param(b, marks=pytest.mark.skipif(b not in avail, reason=f"{b} unavailable")) for b in ALL]


def dev(name):
    return tk.backend(name)


def put(a, b):
    """``a`` on backend ``b`` (NumPy stays NumPy on the CPU, so both kinds are exercised)."""
    return a if b.name == "CPU" and isinstance(a, np.ndarray) and a.ndim % 2 == 0 else tk.asarray(a, backend=b)


def get(a):
    return a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)


def tol(dtype, backend_name=None, ulps=4):
    """Absolute/relative tolerance for values of ``dtype`` near 1 after a few roundings."""
    eps = float(np.finfo(np.float16).eps) if np.dtype(dtype) == np.float16 else float(np.finfo(np.float32).eps)
    return ulps * eps


def close(got, ref, dtype, ulps=4):
    """``got`` equals the float64 ``ref`` within ``ulps`` units of ``dtype`` (relative, with an
    absolute floor of the same size)."""
    t = tol(dtype, ulps=ulps)
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=t, atol=t)


def skip_16bit(name, dtype):
    if np.dtype(dtype) == np.float16 and name == "WEBGPU":
        pytest.skip("WebGPU tests run 32-bit dtypes only")


def compile_error_at_line(src: str, path, args, match: str, line: int):
    """Run the kernel ``bad`` that ``src`` defines (registered as the file ``path``, so errors
    point into it) on the CPU with ``args``: a ``tk.CompileError`` matching ``match`` at
    ``line``."""
    import linecache
    ns = {}
    linecache.cache[str(path)] = (len(src), None, src.splitlines(True), str(path))
    exec(compile(src, str(path), "exec"), ns)
    with pytest.raises(tk.CompileError, match=match) as e:
        ns["bad"](tk.CPU())(*args, ndrange=1)
    assert e.value.line == line


def python_calls(f) -> set:
    """(file name, function name) of every Python function that ``f()`` calls."""
    import sys
    seen = set()

    def prof(frame, event, arg):
        if event == "call":
            seen.add((frame.f_code.co_filename.replace("\\", "/"), frame.f_code.co_name))
    sys.setprofile(prof)
    try:
        f()
    finally:
        sys.setprofile(None)
    return seen


def run_at_bytedot_level(script_template: str, level: str, tmp_path) -> str:
    """Run ``script_template`` (formatted with ``here``, this directory) in a new Python process
    whose CPU kernels are compiled with ``TK_CPU_BYTEDOT=level`` (the SIMD level cap of the byte
    intrinsics: read when a kernel is compiled, so each level needs its own process); assert it
    exited cleanly and return its stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    here = Path(__file__).resolve().parent
    script = tmp_path / "levels.py"
    script.write_text(script_template.format(here=str(here)))
    env = dict(os.environ, TK_CPU_BYTEDOT=level, TK_QUIET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent / "src"), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout
