"""SPEC sections 1-3 (the kernel language) audited the way NVIDIA Warp's, Numba CUDA's,
Taichi's, KernelAbstractions.jl's and CuPy's own suites test theirs: corner cases of each
clause on every backend of this machine, against Python or NumPy semantics."""
import numpy as np
import pytest

import tinykernels as tk

NAMES = ("CPU", "INTERP", "INTERP:CHECK", "CL", "WEBGPU")


def backends():
    avail = set(tk.backends_available())
    return [pytest.param(n, marks=pytest.mark.skipif(n.split(":")[0] not in avail, reason=f"{n} unavailable"))
            for n in NAMES]


def run(kernel, name, *args, wg=None, **kw):
    """Launch ``kernel`` on backend ``name`` with NumPy ``args`` (moved there and back):
    the arrays after the launch, in argument order."""
    b = tk.backend(name)
    dev = [tk.asarray(a, backend=b) if isinstance(a, np.ndarray) else a for a in args]
    (kernel(b) if wg is None else kernel(b, wg))(*dev, **kw)
    tk.synchronize(b)
    return [d.numpy() if hasattr(d, "numpy") else np.asarray(d) for d, a in zip(dev, args)
            if isinstance(a, np.ndarray)]


# -- chained comparisons: `a < b < c` evaluates c only when a < b (Python's short circuit) ----

@tk.func
def counted(c, k):
    tk.atomic_add(c, 0, 1)
    return k


@tk.kernel
def chained_with_side_effects(o, c, x: tk.Const):
    i = tk.index()
    o[i] = counted(c, 0) < x[i] < counted(c, 10)


@tk.func
def clobber(x, i):
    x[i] = 100.0
    return 50.0


@tk.kernel
def chained_middle_read_once(o, x):
    i = tk.index()
    o[i] = 0.0 < x[i] < clobber(x, i)      # x[i] is read before clobber stores into it


@pytest.mark.parametrize("name", backends())
def test_chained_comparison_evaluates_later_operands_only_when_needed(name):
    x = np.array([0.0, 5.0, 20.0, -3.0, 3.0], np.float32)
    o, c, _ = run(chained_with_side_effects, name, np.zeros(5, np.bool_), np.zeros(1, np.int32), x, ndrange=5)
    np.testing.assert_array_equal(o, (0 < x) & (x < 10))
    assert c[0] == 5 + (x > 0).sum()      # the right-hand call ran only where 0 < x[i]


@pytest.mark.parametrize("name", backends())
def test_chained_comparison_reads_the_middle_operand_once(name):
    x = np.array([1.0, -1.0, 60.0], np.float32)
    o, xo = run(chained_middle_read_once, name, np.zeros(3, np.float32), x.copy(), ndrange=3)
    np.testing.assert_array_equal(o, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(xo, [100.0, -1.0, 100.0])


# -- Python int scalar arguments: one >= 2**63 is a weak uint64 on every backend --------------

@tk.kernel
def add_scalar(o, x: tk.Const, v):
    i = tk.index()
    o[i] = x[i] + v


@pytest.mark.parametrize("name", [p for p in backends() if p.values[0] != "WEBGPU"])
def test_python_int_past_int64_after_a_small_one(name):
    """A Python int in [2**63, 2**64) is carried as uint64: after a launch with a small int
    (an int64 specialization), OpenCL reused that build and passed -2**63."""
    x = np.array([0.0, 1.0], np.float32)
    for v in (1, 2 ** 63, -2 ** 63, 2 ** 64 - 1, 7):
        o, _ = run(add_scalar, name, np.zeros(2, np.float32), x, v, ndrange=2)
        np.testing.assert_array_equal(o, x + np.float32(float(v)))


# -- a local's type is the promotion of every value assigned to it, also without float64 -------

@tk.kernel
def int_local_becomes_float(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    v = x[i]
    v += 1.5                 # int32 with a Python float: float64 in NumPy
    w = x[i]
    w = w / 2
    u = x[i]
    u = u * y[i]             # int32 with float32: float64 in NumPy
    o[i, 0] = v
    o[i, 1] = w
    o[i, 2] = u


@pytest.mark.parametrize("name", backends())
def test_int_local_reassigned_a_float(name):
    """On WebGPU (no float64) NumPy's float64 results are float32, as `/` on ints is: a local
    assigned an int32 and then such a value was float64 there, a CompileError."""
    x, y = np.array([1, -3, 7], np.int32), np.array([0.5, 0.25, 3.0], np.float32)
    o, _, _ = run(int_local_becomes_float, name, np.zeros((3, 3), np.float32), x, y, ndrange=3)
    np.testing.assert_array_equal(o, np.stack([x + 1.5, x / 2, x * y.astype(np.float64)], 1).astype(np.float32))
