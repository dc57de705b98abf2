"""Errors raised inside an inlined ``@tk.func`` name the func's own file and line, then the
call chain (``(in @tk.func 'f', called at kernel.py:11)``), on every backend and for every
kind of report: compile errors, debug-mode bounds errors, the interpreter's checks (races),
the launch-time bounds and read-only checks. The compiled backends named the kernel's file
with the func's line number (their error buffer held a line, the host added the kernel's
file); now the buffer holds an index into the kernel IR's ``sites``."""
import os
import re

import numpy as np
import pytest

import tinykernels as tk
from func_sites_helpers import bad_call, load_past, outer, read_next, store_first, store_one

HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "func_sites_helpers.py")
HERE = os.path.abspath(__file__)
BACKENDS = ["CPU", "INTERP", "INTERP:CHECK"] + [dev for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                                if tk.backends()[name][0]]


def line_of(path: str, marker: str) -> int:
    with open(path) as f:
        return next(n for n, text in enumerate(f, 1) if marker in text)


def site(path, marker):
    return re.escape(f"{path}:{line_of(path, marker)}")


def _backend(dev, debug=True):
    if dev.startswith("INTERP"):
        return tk.Interpreter(debug=debug, check=dev.endswith("CHECK"))
    return {"CPU": tk.CPU, "CL": tk.OpenCL, "WEBGPU": tk.WebGPU}[dev](debug=debug)


def _put(be, x):
    return x if isinstance(be, (tk.CPU, tk.Interpreter)) else tk.asarray(x, be)


@tk.kernel
def _k_load(out, a):
    i = tk.index()
    out[i] = load_past(a, i)          # K_LOAD_CALL


@tk.kernel
def _k_nested(out, a):
    i = tk.index()
    out[i] = outer(a, i)              # K_NESTED_CALL


@pytest.mark.parametrize("dev", BACKENDS)
def test_debug_bounds_error_names_the_funcs_file_line_and_call_chain(dev):
    be = _backend(dev)
    a, out = _put(be, np.zeros(8, np.float32)), _put(be, np.zeros(8, np.float32))
    wants = {_k_load: (f"kernel '_k_load' at {site(HELPERS, 'LOAD_PAST_LINE')} \\(in @tk.func 'load_past', "
                       f"called at {site(HERE, 'K_LOAD_CALL')}\\): index 10 is out of bounds"),
             _k_nested: (f"at {site(HELPERS, 'LOAD_PAST_LINE')} \\(in @tk.func 'load_past', called at "
                         f"{site(HELPERS, 'OUTER_LINE')}; in @tk.func 'outer', called at "
                         f"{site(HERE, 'K_NESTED_CALL')}\\)")}
    for kern, want in wants.items():
        with pytest.raises(IndexError) as e:
            kern(be)(out, a, ndrange=8)
            tk.synchronize(be)
        assert re.search(want, str(e.value)), str(e.value)


@tk.kernel
def _k_bad(out, x):
    i = tk.index()
    out[i] = bad_call(x[i])           # K_BAD_CALL


@pytest.mark.parametrize("dev", [d for d in BACKENDS if d != "INTERP:CHECK"])
def test_compile_error_in_a_func_names_its_file_and_call_site(dev):
    be = _backend(dev, debug=False)
    x = _put(be, np.zeros(4, np.float32))
    with pytest.raises((tk.CompileError, TypeError)) as e:
        _k_bad(be)(x, x, ndrange=4)
    if dev.startswith("INTERP"):          # NumPy's own TypeError at the func's line
        return
    assert e.value.filename == HELPERS and e.value.line == line_of(HELPERS, "BAD_CALL_LINE")
    assert f"(in @tk.func 'bad_call', called at {HERE}:{line_of(HERE, 'K_BAD_CALL')})" in str(e.value)


@tk.kernel
def _k_race(a):
    i = tk.index()
    store_first(a)                    # K_RACE_CALL


def test_check_mode_race_names_the_func_and_its_call_site():
    be = tk.Interpreter(check=True)
    a = np.zeros(4, np.float32)
    with pytest.raises(tk.runtime.interp.DataRaceError) as e:
        _k_race(be)(a, ndrange=4)
    at = f"{HELPERS}:{line_of(HELPERS, 'STORE_FIRST_LINE')} (in @tk.func 'store_first', called at " \
         f"{HERE}:{line_of(HERE, 'K_RACE_CALL')})"
    assert str(e.value).count(at) == 3, str(e.value)      # the header and both accesses


@tk.kernel
def _k_next(out, a):
    i = tk.index()
    out[i] = read_next(a, i)          # K_NEXT_CALL


@tk.kernel
def _k_store(a):
    i = tk.index()
    store_one(a, i)                   # K_STORE_CALL


@pytest.mark.parametrize("dev", ["CPU"] + [d for d in BACKENDS if d in ("CL", "WEBGPU")])
def test_launch_checks_name_the_func_line(dev):
    """The launch-time checks of a compiled backend (without debug mode): a certain
    out-of-bounds access and a write to a read-only array, made inside a func."""
    be = _backend(dev, debug=False)
    a, out = _put(be, np.zeros(8, np.float32)), _put(be, np.zeros(8, np.float32))
    with pytest.raises(tk.LaunchError) as e:
        _k_next(be)(out, a, ndrange=8)
    assert f"at {HELPERS}:{line_of(HELPERS, 'READ_NEXT_LINE')} (in @tk.func 'read_next', called at " \
           f"{HERE}:{line_of(HERE, 'K_NEXT_CALL')})" in str(e.value), str(e.value)
    if dev == "CPU":
        ro = np.zeros(8, np.float32)
        ro.flags.writeable = False
        with pytest.raises(tk.LaunchError) as e:
            _k_store(be)(ro, ndrange=8)
        assert f"({HELPERS}:{line_of(HELPERS, 'STORE_ONE_LINE')} (in @tk.func 'store_one', called at " \
               f"{HERE}:{line_of(HERE, 'K_STORE_CALL')}))" in str(e.value), str(e.value)
