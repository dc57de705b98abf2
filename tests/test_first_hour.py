"""A new user's first hour: the ten most common beginner mistakes each end in a clear error
that names the culprit and says what to do (or, for streams, the documented way works)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinykernels as tk


@tk.kernel
def add(y, x: tk.Const):
    i = tk.index()
    y[i] += x[i]


def _webgpu():
    if not tk.backends()["WebGPU"][0]:
        pytest.skip("no WebGPU device here")
    return tk.WebGPU()


def test_kernel_typed_into_the_interpreter_says_define_it_in_a_file(tmp_path):
    src = textwrap.dedent("""
        import numpy as np
        import tinykernels as tk
        @tk.kernel
        def f(y):
            y[tk.index()] = 1
        f(tk.CPU())(np.zeros(4, np.float32), ndrange=4)
    """)
    r = subprocess.run([sys.executable, "-"], input=src, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0
    assert "CompileError: cannot read the source of 'f'" in r.stderr and "Define kernels in a file" in r.stderr


def test_ndrange_mistakes_name_the_argument_or_the_ndrange():
    y, x = np.zeros(10, np.float32), np.ones(10, np.float32)
    k = add(tk.CPU())
    with pytest.raises(tk.LaunchError, match=r"argument 'y' with shape \(10,\) is indexed out of bounds.*"
                                             r"ndrange 20; rerun with TK_DEBUG=1"):
        k(y, x, ndrange=20)
    with pytest.raises(tk.LaunchError, match=r"ndrange= is missing \(an int, or a tuple"):
        k(y, x)
    with pytest.raises(tk.LaunchError, match="ndrange dimensions must be ints or ranges, got 10.0"):
        k(y, x, ndrange=10.0)
    tk.synchronize(tk.CPU())
    np.testing.assert_array_equal(y, 0)                  # nothing ran


@pytest.mark.parametrize("dtype,fix", [(np.complex64, "pass x.real and x.imag as two arrays"),
                                       (object, r"pass x.astype\(np.float32\), say"),
                                       ("U3", r"pass x.astype\(np.float32\), say")])
def test_numpy_array_of_a_dtype_no_kernel_takes_says_what_to_convert_to(dtype, fix):
    with pytest.raises(tk.LaunchError, match=rf"argument 'y' has unsupported dtype .*kernels take arrays of bool, "
                                             rf"int8..int64, .*float64.*\): {fix}"):
        add(tk.CPU())(np.zeros(10, dtype), np.ones(10, np.float32), ndrange=10)


def test_numpy_array_of_another_supported_dtype_computes_as_numpy_does():
    """Not a mistake: kernels are generic over dtypes (y float32 += x float64 stores NumPy's
    float32 of the float64 sum), so this launch is correct and bit-exact."""
    y, x = np.full(10, 0.1, np.float32), np.full(10, 1 / 3)
    want = (y.astype(np.float64) + x).astype(np.float32)
    add(tk.CPU())(y, x, ndrange=10)
    tk.synchronize(tk.CPU())
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("bad", [[0.0] * 10, (0.0,) * 10])
def test_python_list_says_make_it_an_array(bad):
    with pytest.raises(tk.LaunchError, match=r"argument 'y' has unsupported type (list|tuple) .*: make it an array "
                                             r"first, e.g. np.asarray\(y, np.float32\)"):
        add(tk.CPU())(bad, np.ones(10, np.float32), ndrange=10)


def test_missing_constexpr_names_the_argument_to_annotate(tmp_path):
    src = tmp_path / "wg.py"
    src.write_text(textwrap.dedent("""
        import tinykernels as tk
        @tk.kernel
        def copy(out, x: tk.Const, WG):
            buf = tk.localmem(x.dtype, (WG,))
            buf[tk.index(tk.Local, tk.Linear)] = x[tk.index()]
            tk.synchronize()
            out[tk.index()] = buf[tk.index(tk.Local, tk.Linear)]
    """))
    import runpy
    k = runpy.run_path(str(src))["copy"]
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(tk.CompileError, match=r"wg.py:5:.*a dimension is the kernel argument 'WG', a value known "
                                              r"only at run time: annotate it 'WG: tk.constexpr'"):
        k(tk.CPU(), 4)(np.zeros(8, np.float32), x, 4, ndrange=8)


@pytest.mark.parametrize("call", [lambda y, x: add(y, x), lambda y, x: add(y, x, ndrange=10)])
def test_calling_a_kernel_without_a_backend_shows_the_launch(call):
    with pytest.raises(TypeError, match=r"instantiated on a backend, then launched: add\(backend\)\(arguments..., "
                                        r"ndrange=...\), or add.launch"):
        call(np.zeros(10, np.float32), np.ones(10, np.float32))


def test_float64_on_webgpu_says_use_float32(tmp_path):
    wg = _webgpu()
    with pytest.raises(TypeError, match=r"WebGPU has no float64 .*x.astype\(np.float32\)"):
        tk.asarray(np.zeros(4), backend=wg)
    with pytest.raises(tk.LaunchError, match=r"argument 'y' is a host array; the WebGPU backend needs device "
                                             r"arrays: tk.asarray"):
        add(wg)(np.zeros(4, np.float32), np.ones(4, np.float32), ndrange=4)
    src = tmp_path / "f64.py"
    src.write_text("import tinykernels as tk\n@tk.kernel\ndef f(y):\n    y[tk.index()] = tk.float64(y[tk.index()])\n")
    import runpy
    f = runpy.run_path(str(src))["f"]
    with pytest.raises(tk.CompileError, match="f64.py:4:.*float64 is not supported on WebGPU.*use float32"):
        f(wg)(tk.zeros(4, tk.float32, backend=wg), ndrange=4)


def test_stream_results_are_there_after_the_documented_synchronization(tmp_path):
    """Reading a result before synchronizing a stream cannot be detected (a NumPy array has
    no hook), so the first hour needs the SPEC's ways to wait to work: ev.wait(),
    s.synchronize(), tk.synchronize(backend), and s.wait(ev) ordering another stream."""
    be = tk.CPU()
    s1, s2 = be.stream(), be.stream()
    x = np.arange(100_000, dtype=np.float64)
    y, z = np.zeros_like(x), np.zeros_like(x)
    ev = add(be)(y, x, ndrange=x.size, stream=s1)
    s2.wait(ev)
    add(be)(z, y, ndrange=x.size, stream=s2)             # reads y: ordered after s1's launch
    s2.synchronize()
    np.testing.assert_array_equal(z, x)
    add(be)(y, x, ndrange=x.size, stream=s1).wait()
    np.testing.assert_array_equal(y, 2 * x)
    add(be)(y, x, ndrange=x.size, stream=s1)
    tk.synchronize(be)
    np.testing.assert_array_equal(y, 3 * x)


def test_returning_a_value_says_write_it_into_an_array(tmp_path):
    src = tmp_path / "ret.py"
    src.write_text("import tinykernels as tk\n@tk.kernel\ndef twice(y, x: tk.Const):\n"
                   "    return 2 * x[tk.index()]\n")
    import runpy
    k = runpy.run_path(str(src))["twice"]
    with pytest.raises(tk.CompileError, match="ret.py:4:.*kernels cannot return a value; write results into an array"):
        k(tk.CPU())(np.zeros(4), np.ones(4), ndrange=4)


def test_python_globals_say_pass_an_argument(tmp_path):
    src = tmp_path / "glob.py"
    src.write_text(textwrap.dedent("""
        import numpy as np
        import tinykernels as tk
        TABLE = np.ones(4)
        count = 0
        @tk.kernel
        def lookup(y):
            y[tk.index()] = TABLE[tk.index()]
        @tk.kernel
        def counts(y):
            global count
            count += 1
    """))
    import runpy
    ns = runpy.run_path(str(src))
    with pytest.raises(tk.CompileError, match="glob.py:8:.*a global NumPy array cannot be used in a kernel.*pass the "
                                              "array as an argument"):
        ns["lookup"](tk.CPU())(np.zeros(4), ndrange=4)
    with pytest.raises(tk.CompileError, match="glob.py:11:.*'global' statements are not supported in kernels; a "
                                              "kernel cannot change Python variables: pass the value as an argument"):
        ns["counts"](tk.CPU())(np.zeros(4), ndrange=4)
