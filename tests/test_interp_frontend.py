"""The interpreter lowers each kernel with the compiled backends' frontend first (once per
argument signature), so code that every compiled backend rejects raises the same located
CompileError on tk.Interpreter(); breakpoint() stays an interpreter-only debugging aid."""
import sys

import numpy as np
import pytest

import tinykernels as tk

GLOBAL_ARRAY = np.ones(4)
INTERP = [tk.Interpreter(), tk.Interpreter(check=True)]


@tk.kernel
def uses_list(A):
    i = tk.index()
    xs = [1.0, 2.0]
    A[i] = xs[0]


@tk.kernel
def uses_dict(A):
    i = tk.index()
    d = {"a": 1.0}
    A[i] = d["a"]


@tk.kernel
def returns_value(A):
    return 1.0


@tk.kernel
def uses_global_array(A):
    i = tk.index()
    A[i] = GLOBAL_ARRAY[i]


@tk.kernel
def unknown_attribute(A):
    i = tk.index()
    A[i] = tk.no_such_function(1.0)


@tk.kernel
def unknown_name(A):
    i = tk.index()
    A[i] = no_such_name


@pytest.mark.parametrize("b", INTERP, ids=repr)
@pytest.mark.parametrize("kern,msg,line", [
    (uses_list, "lists are not supported", "xs = [1.0, 2.0]"),
    (uses_dict, "dicts are not supported", 'd = {"a": 1.0}'),
    (returns_value, "kernels cannot return a value", "return 1.0"),
    (uses_global_array, "global NumPy array", "A[i] = GLOBAL_ARRAY[i]"),
    (unknown_attribute, "has no attribute 'no_such_function'", "tk.no_such_function(1.0)"),
    (unknown_name, "name 'no_such_name' is not defined", "A[i] = no_such_name"),
])
def test_interpreter_raises_the_compiled_backends_compile_error(b, kern, msg, line):
    with pytest.raises(tk.CompileError, match=msg) as ei:
        kern(b)(np.zeros(4), ndrange=4)
    assert ei.value.filename.endswith("test_interp_frontend.py") and line in ei.value.source_line
    with pytest.raises(tk.CompileError, match=msg):        # the same error on the CPU
        kern(tk.CPU())(np.zeros(4), ndrange=4)


@tk.kernel
def debug_me(A):
    i = tk.index()
    breakpoint()
    tk.print("item", i)
    A[i] = i


def test_breakpoint_runs_on_the_interpreter_and_is_a_compile_error_elsewhere(monkeypatch, capfd):
    hits = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: hits.append(1))
    A = np.zeros(3)
    debug_me(tk.Interpreter())(A, ndrange=3)
    np.testing.assert_array_equal(A, [0, 1, 2])
    assert len(hits) == 3 and "item 2" in capfd.readouterr().out
    with pytest.raises(tk.CompileError, match=r"breakpoint\(\) works only on tk.Interpreter"):
        debug_me(tk.CPU())(A, ndrange=3)


@tk.kernel
def scale(A, s):
    i = tk.index()
    A[i] = A[i] * s


def test_frontend_check_runs_once_per_signature(monkeypatch):
    F = sys.modules["tinykernels.frontend"]          # kernel.py imports the frontend on first use
    calls = []
    real = F.lower_kernel
    monkeypatch.setattr(F, "lower_kernel", lambda *a, **k: calls.append(1) or real(*a, **k))
    inst = scale(tk.Interpreter())
    A = np.ones(4)
    for _ in range(3):
        inst(A, 2.0, ndrange=4)
    inst(A, 2, ndrange=4)                      # an int scalar: another signature
    inst(A.astype(np.float32), 2.0, ndrange=4)
    np.testing.assert_array_equal(A, [16.0] * 4)
    assert len(calls) == 3
