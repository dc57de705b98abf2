"""Kernels defined where Python keeps no source: python -c, the plain REPL, exec."""
import linecache
import subprocess
import sys
import types

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.frontend import source

KERNEL = """
@tk.kernel
def twice(A):
    i = tk.index()
    A[i] = i * 2
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_kernel_defined_with_python_dash_c_compiles():
    r = _run("import numpy as np, tinykernels as tk\n" + KERNEL +
             "a = np.zeros(4, np.int64); twice(tk.CPU())(a, ndrange=4); tk.synchronize(tk.CPU()); print(a.tolist())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0, 2, 4, 6]"


def test_exec_without_registered_source_says_what_to_do():
    ns = {"tk": tk}
    exec(compile(KERNEL, "<string>", "exec"), ns)
    with pytest.raises(tk.CompileError, match=r"keeps no source.*linecache\.cache\[name\]"):
        ns["twice"](tk.CPU())(np.zeros(4, np.int64), ndrange=4)


def test_exec_with_source_registered_in_linecache_works():
    name = "<tk-test-exec-kernel>"
    linecache.cache[name] = (len(KERNEL), None, KERNEL.splitlines(True), name)
    ns = {"tk": tk}
    exec(compile(KERNEL, name, "exec"), ns)
    a = np.zeros(4, np.int64)
    ns["twice"](tk.CPU())(a, ndrange=4)
    tk.synchronize(tk.CPU())
    assert a.tolist() == [0, 2, 4, 6]


def test_plain_repl_source_is_read_from_readline_history(monkeypatch):
    """The plain REPL keeps each typed line in readline's history; the block is rebuilt from it."""
    typed = ["import tinykernels as tk", "@tk.kernel", "def rep(A):", "    A[tk.index()] = 3", "",
             "x = 1"]
    fake = types.SimpleNamespace(get_current_history_length=lambda: len(typed),
                                 get_history_item=lambda i: typed[i - 1])
    monkeypatch.setitem(sys.modules, "readline", fake)
    monkeypatch.delitem(linecache.cache, "<stdin>", raising=False)
    ns = {"tk": tk}
    exec(compile("@tk.kernel\ndef rep(A):\n    A[tk.index()] = 3\n", "<stdin>", "single"), ns)
    try:
        a = np.zeros(3, np.int32)
        ns["rep"](tk.CPU())(a, ndrange=3)
        tk.synchronize(tk.CPU())
        assert a.tolist() == [3, 3, 3]
    finally:
        linecache.cache.pop("<stdin>", None)


def test_repl_without_history_says_interactive():
    ns = {"tk": tk}
    exec(compile("def nohist(A):\n    A[0] = 1\n", "<stdin>", "exec"), ns)
    with pytest.raises(tk.CompileError, match="interactive interpreter"):
        source.parse_function(ns["nohist"])



_NO_RUNTIME = """
import sys
sys.modules["pyopencl"] = None      # as on a machine without pyopencl / wgpu
sys.modules["wgpu"] = None
import numpy as np
import tinykernels as tk


@tk.kernel
def saxpy_like(y, x: tk.Const, a):
    i = tk.index()
    y[i] = a * x[i] + y[i]


a = np.zeros(8, np.float32)
for dev in ("CL", "WEBGPU"):
    print(dev, len(saxpy_like.source(dev, a, a, 2.0, ndrange=8)))
"""


def test_source_for_opencl_and_webgpu_needs_no_runtime(tmp_path):
    """SPEC 1: kernel.source(...) works on any machine, with no device present: "CL" and
    "WEBGPU" raised BackendUnavailable without pyopencl / wgpu (found by audit18a in the minimal
    install); they render for a generic device then (float64 and 64-bit atomics on OpenCL),
    the same text as for this machine's device where it has one."""
    script = tmp_path / "no_runtime.py"
    script.write_text(_NO_RUNTIME)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lengths = dict(line.split() for line in r.stdout.splitlines())
    from tinykernels.runtime.opencl import OpenCLTarget
    from tinykernels.runtime.webgpu import WebGPUTarget
    a = np.zeros(8, np.float32)
    for dev, target in (("CL", OpenCLTarget()), ("WEBGPU", WebGPUTarget())):
        src = saxpy_like.source(target, a, a, 2.0, ndrange=8)
        assert int(lengths[dev]) > 1000 and "a_x[" in src   # the kernel body, x read by index
        name = {"CL": "OpenCL", "WEBGPU": "WebGPU"}[dev]
        if tk.backends()[name][0] and (dev != "CL" or tk.backend("CL").supports_float64):
            assert saxpy_like.source(dev, a, a, 2.0, ndrange=8) == src


@tk.kernel
def saxpy_like(y, x: tk.Const, a):
    i = tk.index()
    y[i] = a * x[i] + y[i]
