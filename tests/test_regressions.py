"""Regression tests for compiler bugs found by the differential fuzzer (each against its
expected value, on the CPU and on the interpreter)."""
import numpy as np
import pytest

import tinykernels as tk

BACKENDS = [tk.CPU(), tk.Interpreter()]


@tk.kernel
def swap(o, x: tk.Const):
    i = tk.index()
    a = x[i]
    b = x[i] * 2.0
    a, b = b, a
    o[i, 0] = a
    o[i, 1] = b


@tk.kernel
def ndrange_in_loop(o):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    s = 0
    for q in range(2):
        s += tk.ndrange()[2]
    o[i, j, k] = s


@tk.func
def early(v, c):
    if v > 0.5:
        return v * c
    return -v


@tk.kernel
def func_return_with_barrier(o, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    t = tk.localmem(tk.float64, (8,))
    t[lid] = early(x[tk.index()], 3.0)
    tk.synchronize()
    o[tk.index()] = t[(lid + 1) % 8]


@tk.kernel
def self_cast(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    o[i] = tk.float16(x[i] * y[i]) * 1.0


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_tuple_assignment_swaps(b):
    o = np.zeros((4, 2))
    swap(b)(o, np.arange(4.0), ndrange=4)
    np.testing.assert_array_equal(o, np.stack([2 * np.arange(4.0), np.arange(4.0)], 1))


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_ndrange_inside_a_for_loop(b):
    o = np.zeros((2, 3, 5), np.int64)
    ndrange_in_loop(b)(o, ndrange=(2, 3, 5))
    assert (o == 10).all()


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_func_early_return_in_a_kernel_with_barriers(b):
    x = np.random.default_rng(0).random(16)
    o = np.zeros(16)
    func_return_with_barrier(b, 8)(o, x, ndrange=16)
    ref = np.where(x > 0.5, x * 3, -x).reshape(2, 8)
    np.testing.assert_array_equal(o, np.roll(ref, -1, 1).ravel())


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_explicit_narrow_cast_of_a_narrow_intermediate_rounds(b):
    x = np.full(3, 1.1, np.float16)
    o = np.zeros(3, np.float32)
    self_cast(b)(o, x, x, ndrange=3)
    assert o[0] == np.float32(np.float16(np.float32(x[0]) * np.float32(x[0])))


def test_huge_constant_shift_does_not_crash_the_compiler():
    # not folded (it raised MemoryError); at run time an int64 shift past the width gives 0, as in NumPy
    def body(o):
        o[0] = 1 << 2**62
    o = np.ones(1, np.int64)
    tk.kernel(body)(tk.CPU())(o, ndrange=1)
    assert o[0] == 0


@tk.kernel
def _aug_square(x, y):
    i = tk.index()
    v = x[i]
    v **= 2                  # a constant exponent in an augmented assignment: x * x, as in `v ** 2`
    w = x[i]
    w **= -1
    y[i, 0] = v
    y[i, 1] = w


@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_augmented_power_by_a_constant_squares_exactly(dev):
    """Fuzzer seed 30000339: ``x **= 2`` of float32 4293 is the tie 18429849; x * x (and NumPy's
    array power) round it to 18429848, NumPy's float32 *scalar* power to 18429850. The
    interpreter took the scalar route for the augmented form only."""
    x = np.array([4293.0, 3.0, -7.5, 1e-3], np.float32)
    y = np.zeros((4, 2), np.float32)
    _aug_square(tk.backend(dev))(x, y, ndrange=4)
    tk.synchronize()
    np.testing.assert_array_equal(y[:, 0], x * x)
    np.testing.assert_array_equal(y[:, 1], np.float32(1) / x)


def test_malformed_dev_strings_and_thread_counts_say_what_is_wrong():
    """tk.backend('CPU:x') was Python's bare "invalid literal for int() with base 10: 'x'"
    and tk.CPU(threads='2') "'<' not supported between 'str' and 'int'"."""
    with pytest.raises(ValueError, match=r"bad thread count 'x' in the DEV string 'CPU:x'.*'CPU:1'"):
        tk.backend("CPU:x")
    with pytest.raises(ValueError, match=r"bad device number '-1' in the DEV string 'CL:-1'"):
        tk.backend("CL:-1")
    with pytest.raises(TypeError, match=r"tk.CPU: argument 'threads': expected an int, got str"):
        tk.CPU(threads="2")
    with pytest.raises(TypeError, match="got float"):
        tk.CPU(threads=2.0)
    assert tk.backend("CPU:1") == tk.CPU(threads=1) and tk.CPU(threads=np.int64(1)).threads == 1

