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
