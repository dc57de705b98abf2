"""Debug mode checks every axis of an access to an array of more than three dimensions (SPEC 3
and 9). The compiled backends' error buffer holds three (index, extent) pairs: axes beyond the
third were not checked at all, so ``a[0, 0, i, 3]`` on a (2, 2, 4, 3) array read the next row
silently. Now the third pair carries the first bad axis from the third on, and the message
names the axis."""
import numpy as np
import pytest

import tinykernels as tk

BACKENDS = ["CPU", "INTERP"] + [dev for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                if tk.backends()[name][0]]


@tk.kernel
def _read4(out, a, j, k, m):
    i = tk.index()
    out[i] = a[k, m, i, j]


@tk.kernel
def _write5(a, j):
    i = tk.index()
    a[0, 1, i, j, 1] = 7.0


def _backend(dev):
    return tk.Interpreter(debug=True) if dev == "INTERP" else \
        {"CPU": tk.CPU, "CL": tk.OpenCL, "WEBGPU": tk.WebGPU}[dev](debug=True)


def _put(be, x):
    return x if isinstance(be, (tk.CPU, tk.Interpreter)) else tk.asarray(x, be)


def _get(x):
    return x if isinstance(x, np.ndarray) else x.numpy()


@pytest.mark.parametrize("dev", BACKENDS)
@pytest.mark.parametrize("j,k,m,axis,value", [(3, 0, 0, 3, 3), (0, 2, 0, 0, 2), (0, 0, 5, 1, 5),
                                              (-1, 1, 1, 3, -1), (3, 2, 0, 0, 2)])
def test_every_axis_of_a_4d_access_is_checked(dev, j, k, m, axis, value):
    be = _backend(dev)
    a = np.arange(48, dtype=np.float32).reshape(2, 2, 4, 3)
    with pytest.raises(IndexError, match="out of bounds for array 'a'") as e:
        _read4(be)(_put(be, np.zeros(4, np.float32)), _put(be, a), j, k, m, ndrange=4)
        be.synchronize()
    if dev != "INTERP":     # (the interpreter prints the whole index)
        assert f"index {value} along axis {axis} of a 4-dimensional index" in str(e.value)
        assert f"extent along axis {axis} is {a.shape[axis]}" in str(e.value)


@pytest.mark.parametrize("dev", BACKENDS)
def test_in_bounds_4d_and_5d_accesses_are_unchanged(dev):
    be = _backend(dev)
    a = np.arange(48, dtype=np.float32).reshape(2, 2, 4, 3)
    out = _put(be, np.zeros(4, np.float32))
    _read4(be)(out, _put(be, a), 1, 1, 1, ndrange=4)
    be.synchronize()
    np.testing.assert_array_equal(_get(out), a[1, 1, :, 1])
    b = _put(be, np.zeros((1, 2, 4, 3, 2), np.float32))
    _write5(be)(b, 2, ndrange=4)
    be.synchronize()
    want = np.zeros((1, 2, 4, 3, 2), np.float32)
    want[0, 1, :, 2, 1] = 7.0
    np.testing.assert_array_equal(_get(b), want)


@pytest.mark.parametrize("dev", BACKENDS)
def test_a_5d_store_past_its_fourth_axis_raises(dev):
    be = _backend(dev)
    b = _put(be, np.zeros((1, 2, 4, 3, 2), np.float32))
    with pytest.raises(IndexError, match="out of bounds for array 'a'") as e:
        _write5(be)(b, 3, ndrange=4)
        be.synchronize()
    if dev != "INTERP":
        assert "index 3 along axis 3 of a 5-dimensional index" in str(e.value)


def test_the_cuda_debug_source_of_a_4d_and_5d_access_compiles():
    from tinykernels.runtime import cuda as rt
    ok, why = rt.nvrtc_available()
    if not ok:
        pytest.skip(why)
    a = np.zeros((2, 2, 4, 3), np.float32)
    src = rt.cuda_source(_read4, np.zeros(4, np.float32), a, 1, 1, 1, ndrange=4, debug=True)
    assert "4 + 16 * " in src
    assert rt.compile_cuda(src, "sm_80", "k", cache=False)[:4] == b"\x7fELF"
    src = rt.cuda_source(_write5, np.zeros((1, 2, 4, 3, 2), np.float32), 2, ndrange=4, debug=True)
    assert rt.compile_cuda(src, "sm_90", "k", cache=False)[:4] == b"\x7fELF"
