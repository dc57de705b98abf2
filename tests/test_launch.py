"""Launching on the CPU: argument handling, ndranges, threads, streams, debug mode, and the
two launchers (C extension and ctypes) agreeing."""
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk

CPU = tk.CPU()
ROOT = Path(__file__).resolve().parents[1]


@tk.kernel
def axpy(y, a, x: tk.Const):
    i = tk.index()
    y[i] = a * x[i] + y[i]


@tk.kernel
def coords(out):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = i * 1000 + j + 0.5 * tk.index(tk.Global, tk.Linear) / 1e6


def test_offset_and_stepped_ranges_are_distinct_specializations():
    out = np.zeros((12, 40))
    coords(CPU)(out, ndrange=(range(2, 10), range(3, 38)))
    lin = np.arange(8 * 35).reshape(8, 35)
    ii, jj = np.meshgrid(np.arange(2, 10), np.arange(3, 38), indexing="ij")
    np.testing.assert_array_equal(out[2:10, 3:38], ii * 1000 + jj + 0.5 * lin / 1e6)
    assert (out[:2] == 0).all() and (out[:, 38:] == 0).all()
    again = np.zeros((12, 40))
    coords(CPU)(again, ndrange=(range(2, 10), range(3, 38)))    # the launcher's fast path
    np.testing.assert_array_equal(again, out)
    out2 = np.zeros((12, 40))
    for _ in range(2):                                            # slow path, then fast path
        out2[:] = 0
        coords(CPU)(out2, ndrange=(range(1, 12, 3), range(0, 40, 7)))
    ii, jj = np.meshgrid(np.arange(1, 12, 3), np.arange(0, 40, 7), indexing="ij")
    lin = np.arange(ii.size).reshape(ii.shape)
    np.testing.assert_array_equal(out2[1:12:3, 0:40:7], ii * 1000 + jj + 0.5 * lin / 1e6)
    assert np.count_nonzero(out2) == ii.size             # nothing outside the ranges


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_do_not_depend_on_thread_count(threads):
    n = 100_003
    x = np.random.default_rng(0).random(n)
    y = np.ones(n)
    axpy(tk.CPU(threads=threads))(y, 3.0, x, ndrange=n)
    np.testing.assert_array_equal(y, 3.0 * x + 1.0)


def test_strided_and_transposed_arguments():
    base = np.arange(60.0).reshape(6, 10)
    x = base.T                                  # non-contiguous 2-D view
    out = np.zeros((10, 6))

    @tk.kernel
    def copy2(o, a: tk.Const):
        i, j = tk.index(tk.Global, tk.Cartesian)
        o[i, j] = a[i, j]
    copy2(CPU)(out, x, ndrange=x.shape)
    np.testing.assert_array_equal(out, x)
    y = np.zeros(20)[::-2]                      # negative stride
    axpy(CPU)(y, 1.0, np.arange(10.0), ndrange=10)
    np.testing.assert_array_equal(y, np.arange(10.0))


def test_launch_errors_name_kernel_and_argument():
    with pytest.raises(tk.LaunchError, match="axpy.*'y'"):
        axpy(CPU)([1, 2], 1.0, np.zeros(2), ndrange=2)
    with pytest.raises(tk.LaunchError, match="axpy.*3 argument"):
        axpy(CPU)(np.zeros(2), 1.0, ndrange=2)
    with pytest.raises(tk.LaunchError, match="ndrange"):
        axpy(CPU)(np.zeros(2), 1.0, np.zeros(2), ndrange=(1, 2, 3, 4))
    with pytest.raises(tk.LaunchError, match="negative"):
        axpy(CPU)(np.zeros(2), 1.0, np.zeros(2), ndrange=-3)
    with pytest.raises(tk.LaunchError, match="workgroupsize"):
        axpy(CPU)(np.zeros(2), 1.0, np.zeros(2), ndrange=2, workgroupsize=(0,))
    with pytest.raises(tk.LaunchError, match="dtype"):
        axpy(CPU)(np.zeros(2, np.complex64), 1.0, np.zeros(2), ndrange=2)
    with pytest.raises(tk.LaunchError, match="maximum"):
        axpy(CPU)(np.zeros(2), 1.0, np.zeros(2), ndrange=2, workgroupsize=4096)


@pytest.mark.parametrize("dev", ["CPU", "INTERP"] + [d for n, d in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                                     if tk.backends()[n][0]])
def test_a_numpy_scalar_of_an_unsupported_dtype_names_the_argument(dev):
    """np.longdouble is a NumPy float the language has no type for: a LaunchError naming the
    argument on every backend (the CPU said 'an argument could not be passed', the others
    crashed with an AttributeError inside the compiler)."""
    b = tk.backend(dev)
    with pytest.raises(tk.LaunchError, match="axpy': argument 'a' is a scalar of unsupported dtype"):
        axpy(b)(tk.zeros(2, backend=b), np.longdouble(2), tk.zeros(2, backend=b), ndrange=2)


@pytest.mark.parametrize("dev", ["CPU", "CPU-py", "INTERP"] + [d for n, d in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                                               if tk.backends()[n][0]])
def test_int_and_float_subclasses_are_their_values(dev, monkeypatch):
    """An IntEnum member or a float subclass is a Python int/float argument (weak, as the
    value): the CPU refused them ('an argument could not be passed to CPU', naming nothing)
    while the interpreter and OpenCL took them."""
    import enum

    class Scale(enum.IntEnum):
        THREE = 3

    class Meters(float):
        pass

    if dev == "CPU-py":
        monkeypatch.setenv("TK_PY_LAUNCHER", "1")
        dev = "CPU"
    b = tk.backend(dev)

    @tk.kernel
    def axpy_sub(y, a, x: tk.Const):
        i = tk.index()
        y[i] = a * x[i] + y[i]

    x = tk.asarray(np.arange(4, dtype=np.float32), backend=b)
    for a in (Scale.THREE, Meters(2.5), Scale.THREE):       # also once the specialization exists
        y = tk.zeros(4, tk.float32, backend=b)
        axpy_sub(b)(y, a, x, ndrange=4)
        tk.synchronize(b)
        assert y.numpy().dtype == np.float32                  # weak: float32 stays float32
        np.testing.assert_array_equal(y.numpy(), float(a) * np.arange(4, dtype=np.float32))


def test_calling_a_kernel_like_a_function_says_how_to_launch_it():
    """axpy(y, a, x, ndrange=n) (Numba/Warp habits) and axpy(None): a TypeError that shows
    both ways to launch (it was 'unexpected keyword argument ndrange', or a backend error)."""
    for call in (lambda: axpy(np.zeros(2), 1.0, np.zeros(2), ndrange=2), lambda: axpy(np.zeros(2)),
                 lambda: axpy(None)):
        with pytest.raises(TypeError, match=r"axpy\(backend\)\(arguments\.\.\., ndrange=\.\.\.\).*axpy\.launch"):
            call()
    assert axpy("CPU") is axpy(CPU)                   # a DEV string still instantiates


@pytest.mark.parametrize("dev", ["CPU", "INTERP"] + [d for n, d in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                                     if tk.backends()[n][0]])
def test_arguments_by_keyword(dev):
    # as in a Python call; used to be a TypeError from the instance's __call__
    b = tk.backend(dev)
    y, x = tk.asarray(np.ones(4, np.float32), backend=b), tk.asarray(np.arange(4, dtype=np.float32), backend=b)
    axpy(b)(y, x=x, a=2.0, ndrange=4)
    axpy(b)(a=2.0, y=y, x=x, ndrange=4).wait()
    axpy.launch(y, 1.0, x=x, ndrange=4)
    tk.synchronize(b)
    np.testing.assert_array_equal(y.numpy(), 1 + 5 * np.arange(4))
    if dev != "INTERP":
        assert axpy.source(dev, y, 2.0, x=x, ndrange=4) == axpy.source(dev, y, 2.0, x, ndrange=4)
    with pytest.raises(tk.LaunchError, match=r"kernel 'axpy' has no argument 'z' \(its arguments: y, a, x\)"):
        axpy(b)(y, 2.0, z=x, ndrange=4)
    with pytest.raises(tk.LaunchError, match="kernel 'axpy': argument 'y' is given twice"):
        axpy(b)(y, 2.0, x, y=y, ndrange=4)
    with pytest.raises(tk.LaunchError, match="kernel 'axpy': argument.s. 'x' missing"):
        axpy(b)(y, a=2.0, ndrange=4)
    with pytest.raises(tk.LaunchError, match="kernel 'axpy': ndrange= is missing"):
        axpy(b)(y, 2.0, x)
    with pytest.raises(tk.LaunchError, match="kernel 'axpy': ndrange= is missing"):
        axpy.launch(y, 2.0, x)


@pytest.mark.parametrize("params", ["A, v=3.0", "A, *rest", "A, *, v", "A, **kw"])
def test_unbindable_parameters_are_a_compile_error_at_the_def(params, tmp_path):
    # they were reported as a wrong argument count at the first launch ("takes 2 argument(s)
    # (A, v), got 1"), or, given every argument, at the first compile
    path = tmp_path / "sig.py"
    path.write_text(f"import tinykernels as tk\n\n@tk.kernel\ndef k({params}):\n    A[tk.index()] = 1\n")
    with pytest.raises(tk.CompileError, match=r"sig.py:4:1: in kernel 'k': kernels take plain positional "
                                              r"parameters only \(no defaults, \*args or \*\*kwargs\)"):
        exec(compile(path.read_text(), str(path), "exec"), {})


@tk.kernel
def scale_by(out, x: tk.Const, v):
    i = tk.index()
    out[i] = x[i] * v


@pytest.mark.parametrize("dev", ["CPU", "INTERP"] + [d for n, d in (("OpenCL", "CL"),) if tk.backends()[n][0]])
def test_zero_dimensional_arrays_are_scalar_arguments(dev):
    # np.array(0.2) or torch.tensor(0.2) where a scalar goes: its NumPy scalar, strong as in
    # NumPy (float32 * 0-d float64 computes in float64); was "must have 1 to 8 dimensions"
    torch = pytest.importorskip("torch")
    b = tk.backend(dev)
    x = np.array([0.1, 0.3, 0.7], np.float32)
    for v in (np.array(0.2), torch.tensor(0.2, dtype=torch.float64)):
        out = tk.asarray(np.zeros(3, np.float64), backend=b)
        scale_by(b)(out, tk.asarray(x, backend=b), v, ndrange=3)
        np.testing.assert_array_equal(out.numpy(), x * np.array(0.2))         # float64, not float32
    out = tk.asarray(np.zeros(3, np.float64), backend=b)
    scale_by(b)(out, tk.asarray(x, backend=b), 0.2, ndrange=3)                 # a weak Python float
    np.testing.assert_array_equal(out.numpy(), (x * np.float32(0.2)).astype(np.float64))


@tk.func
def _store0(o, v):
    o[()] = v


@tk.kernel
def _sum_squares0(total, x: tk.Const, start: tk.Const):
    i = tk.index()
    if i == 0:
        _store0(total, total[()] + start[()] * total.ndim)
    tk.atomic_add(total, (), x[i] * x[i])


@pytest.mark.parametrize("dev", ["CPU", "INTERP", "CL", "WEBGPU"])
def test_zero_dimensional_arrays_the_kernel_indexes_are_arrays(dev):
    # a 0-d array for a parameter the kernel uses as an array (A[()], an atomic's array, through
    # a @tk.func) is an array, read and written in place, on every backend; host backends
    # turned every 0-d host array into a scalar ("only arrays can be indexed here")
    if dev not in tk.backends_available():
        pytest.skip(f"{dev} unavailable")
    b = tk.backend(dev)
    x = np.array([0.5, 1.5, 2.0, 3.0], np.float32)
    total = tk.zeros((), tk.float32, backend=b)
    _sum_squares0(b)(total, tk.asarray(x, backend=b), tk.asarray(np.array(7.0, np.float32), backend=b),
                     ndrange=4)
    tk.synchronize(b)
    assert total.shape == () and total.numpy()[()] == np.float32((x.astype(np.float64) ** 2).sum())
    if b.is_host:                       # NumPy 0-d arrays too, written in place
        h = np.zeros((), np.float32)
        _sum_squares0(b)(h, x, np.array(7.0, np.float32), ndrange=4)
        assert h[()] == total.numpy()[()]
    else:                               # a host 0-d array the kernel indexes is a host array there
        with pytest.raises(tk.LaunchError, match="'total' is a host array"):
            _sum_squares0(b)(np.zeros((), np.float32), tk.asarray(x, backend=b),
                             tk.asarray(np.array(7.0, np.float32), backend=b), ndrange=4)
    out = tk.zeros((4,), tk.float32, backend=b)                   # still a scalar where used as one
    scale_by(b)(out, tk.asarray(x, backend=b), np.array(2.0, np.float32), ndrange=4)
    np.testing.assert_array_equal(out.numpy(), x * 2)


def test_array_params_finds_array_uses():
    from tinykernels.frontend.source import array_params, parse_function

    def k(a, b, c, d, e, f, g, s):
        a[()] = s
        n = b.shape[0] + len(c) + d.ndim
        tk.atomic_max(e, 0, n)
        _store0(f, g + s)
    assert array_params(parse_function(k)) == {"a", "b", "c", "d", "e", "f"}
    assert _sum_squares0.array_params() == {"total", "x", "start"}


def test_zero_sized_launch_is_a_no_op_and_returns_a_done_event():
    y = np.ones(3)
    ev = axpy(CPU)(y, 2.0, np.ones(3), ndrange=(3, 0))
    assert ev.done()
    assert (y == 1).all()


def test_streams_run_kernels_in_order_and_events_order_streams():
    n = 1 << 16
    a = np.zeros(n)
    b = np.zeros(n)
    s1, s2 = CPU.stream(priority=tk.High), CPU.stream(priority=tk.Low)
    events = [axpy(CPU)(a, 1.0, np.ones(n), ndrange=n, stream=s1) for _ in range(50)]
    s2.wait(events[-1])
    ev = axpy(CPU)(b, 2.0, a, ndrange=n, stream=s2)     # must see all 50 updates of a
    ev.wait()
    assert all(e.done() for e in events)
    np.testing.assert_array_equal(b, np.full(n, 100.0))
    tk.synchronize(CPU)


def test_stream_launches_run_concurrently_with_python():
    gate = threading.Event()
    s = CPU.stream()
    s.submit(lambda: gate.wait(10))                     # blocks the stream, not the caller
    y = np.zeros(4)
    ev = axpy(CPU)(y, 1.0, np.ones(4), ndrange=4, stream=s)
    assert not ev.done() and (y == 0).all()
    gate.set()
    ev.wait()
    assert (y == 1).all()


@tk.kernel
def oob(A, shift):
    i = tk.index()
    A[i + shift] = 1.0


def test_debug_mode_names_kernel_line_index_and_shape():
    b = tk.CPU(debug=True)
    with pytest.raises(IndexError) as e:
        oob(b)(np.zeros(8), 3, ndrange=8)
    msg = str(e.value)
    assert "oob" in msg and "(8,)" in msg and "'A'" in msg
    import inspect
    line = inspect.getsourcelines(oob.fn)[1] + 3
    assert f"test_launch.py:{line}" in msg
    a = np.zeros(8)
    oob(b)(a, 0, ndrange=8)                            # in bounds: no error, and it ran
    assert (a == 1).all()


def test_debug_errors_surface_through_streams():
    b = tk.CPU(debug=True)
    s = b.stream()
    ev = oob(b)(np.zeros(4), 1, ndrange=4, stream=s)
    with pytest.raises(IndexError):
        ev.wait()


def test_env_debug_switch():
    code = ("import numpy as np, tinykernels as tk\n"
            "@tk.kernel\ndef k(A):\n    A[tk.index() + 1] = 0\n"
            "try:\n    k(tk.CPU())(np.zeros(2), ndrange=2)\nexcept IndexError as e:\n    print('caught', e)\n")
    script = ROOT / "tests" / "_debug_child.py"
    script.write_text(code)
    try:
        env = dict(os.environ, TK_DEBUG="1", PYTHONPATH=str(ROOT / "src"))
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    finally:
        script.unlink()
    assert "caught" in out.stdout and "(2,)" in out.stdout, out.stderr


def test_ctypes_launcher_agrees_with_the_extension(monkeypatch):
    from tinykernels.runtime import launcher
    ext = launcher.get()
    py = launcher.PyLauncher()
    x = np.random.default_rng(3).random(1000).astype(np.float32)
    results = []
    for L in (ext, py):
        y = np.zeros(1000, np.float32)
        inst = tk.kernel(axpy.fn)(CPU)                  # a fresh kernel object per launcher
        inst._L, inst._fast = L, L.fast
        for _ in range(2):
            inst(y, np.float32(0.5), x, ndrange=1000)
        inst(y[::2], 2, x[::2], ndrange=500)
        results.append(y)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0][1::2], x[1::2])


def test_torch_tensors_are_zero_copy():
    torch = pytest.importorskip("torch")
    t = torch.zeros(10, dtype=torch.float64)
    axpy(CPU)(t, 2.0, torch.arange(10, dtype=torch.float64), ndrange=10)
    assert torch.equal(t, 2 * torch.arange(10, dtype=torch.float64))


def test_source_is_readable_and_points_at_python_lines():
    src = axpy.source("CPU", np.zeros(4), 1.0, np.zeros(4), ndrange=4)
    assert "#line" in src and __file__ in src and "void tk_kernel" in src
    assert "restrict" in src          # tk.Const renders const restrict


def test_launch_shorthand_and_default_backend():
    y = np.zeros(5)
    axpy.launch(y, 1.0, np.arange(5.0), ndrange=5)
    tk.synchronize(tk.get_backend(y))
    np.testing.assert_array_equal(y, np.arange(5.0))
    assert tk.default_backend() == tk.CPU() or os.environ.get("DEV")
