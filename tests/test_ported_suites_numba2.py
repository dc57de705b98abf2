"""Numba CUDA's numba/cuda/tests/cudapy/ files not in test_ported_suites_numba.py,
test_ported_suites_kernels.py or test_ported_suites_atomics.py, ported test by test:
test_powi.py (``math.pow`` with an int8 argument cast to int32, ``**`` on a 2-D guarded grid),
test_idiv.py (``grid[x, y] /= 2.0`` in float32 and float64 in loops bounded by int32
arguments), test_boolean.py (a bool argument), test_freevar.py (closure variables as a shared
array's size and dtype), test_py2_div_issue.py (``float32(1.001 * float32(i))`` times and over
``1.0``), test_nondet.py (grid-stride loops that start past the array), test_mandel.py (the
Mandelbrot escape count as a device function), test_transpose.py (float64, bool and
strided-view transposes), test_blackscholes.py (the option pricer against NumPy, L1 error
below 1e-13), test_globals.py (module-level ints and tuples as shared-array shapes, including
upstream's skipped 2-D case), test_device_func.py (device functions, nested, and a signature's
casts of float arguments to int32 in ``rgba``), test_sm_creation.py (shared-array shapes from
globals and the refused ones), test_lang.py and test_iterators.py (enumerate/zip; the
multi-block use of thread indices of issue #872), test_constmem.py (constant arrays) and
test_minmax.py (builtin max/min of float32/float64 pairs) and test_print.py (ints, a float,
a string, no argument and 33 arguments, from several work items).
Exact against NumPy or Python where SPEC makes it exact; the Black-Scholes prices within
upstream's 1e-13 (float64). CPU and INTERP (none of these depends on the backend), and the
pricer, the transposes and the grid-stride loops on CL and WEBGPU too (float32 on WebGPU,
with a float32 tolerance).

Where SPEC differs from upstream (ported as SPEC reads, or not ported):

* No complex numbers: test_powi's complex ``pow``/``**`` cases and test_constmem's complex 3-D
  array are not ported; test_mandel's ``complex`` arithmetic is written with real and
  imaginary parts (checked against Python's complex arithmetic, which upstream only compiles).
* Kernels loop only over ``range`` (SPEC 3): ``enumerate``/``zip`` over a tuple or an array
  are a ``tk.CompileError`` at the loop ("kernels only loop over range(...)"); the ports
  write the same loops with ``range`` and tuple unpacking (tuples index only with constants).
* No ``cuda.const.array_like`` and no global arrays: a global NumPy array in a kernel is a
  ``tk.CompileError`` that says to pass it as an argument; the constant-memory cases pass it
  as a ``tk.Const`` argument (read-only, ``const restrict``). No record dtypes (their cases
  are not ported).
* A shared array's dtype must be a dtype (``tk.int32``, ``np.int32``, ``A.dtype``): a string
  such as ``'int32'`` (which Numba accepts) is a ``tk.CompileError``, as upstream's invalid
  ``'int33'``; a list shape is a ``tk.CompileError`` as in Numba, and so is a shape read from
  an array.
* test_print's 33-argument case: CUDA's vprintf takes at most 32, so Numba prints the raw
  format string and warns; ``tk.print`` prints all 33 values on every backend. Upstream runs
  each print in a subprocess; here C's printf and Python's stdout are captured (capfd).
* Numba's CPU ``@jit`` dispatchers called from a kernel and the declare_device/inspect_*
  cases have no counterpart (a kernel calls ``@tk.func``s only).
* Under NEP 50 ``1.001 * float32(i)`` is a float32 product (a Python float is weak), where
  Numba computes it in float64 and casts; the port checks NumPy's float32 result.
* ``cuda.grid(2)`` is ``tk.index(tk.Global, tk.Cartesian)`` with the LAST dimension fastest
  (SPEC 2), so upstream's ``(x, y)`` launches become ``(y, x)`` ndranges; sizes are cut for the
  2-core machine (a 257 x 64 transpose instead of 1025 x 512)."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, be, put, run  # noqa: F401 - be, anybe: fixtures


def fdt(be):
    return np.float64 if be.supports_float64 else np.float32


# ------------------------------------------------------------------------------- test_powi.py

@tk.kernel
def cu_mat_power(A: tk.Const, power, power_A):
    y, x = tk.index(tk.Global, tk.Cartesian)
    m, n = power_A.shape[0], power_A.shape[1]
    if x >= n or y >= m:
        return
    power_A[y, x] = math.pow(A[y, x], tk.int32(power))


@tk.kernel
def cu_mat_power_binop(A: tk.Const, power, power_A):
    y, x = tk.index(tk.Global, tk.Cartesian)
    m, n = power_A.shape[0], power_A.shape[1]
    if x >= n or y >= m:
        return
    power_A[y, x] = A[y, x] ** power


@pytest.mark.parametrize("k", [cu_mat_power, cu_mat_power_binop], ids=["pow", "binop"])
def test_powi(be, k):
    """test_powi / test_powi_binop: an int8 power of 2 (a NumPy int8 scalar), A = arange(10) as
    2 x 5, launched over a padded (3, 8) grid that the kernel guards"""
    A = np.arange(10, dtype=np.float64).reshape(2, 5)
    _, out = run(be, k, A, np.int8(2), np.full_like(A, -1), ndrange=(3, 8))
    np.testing.assert_array_equal(out, A ** 2)


# ------------------------------------------------------------------------------- test_idiv.py

@tk.kernel
def idiv(grid, l_x, l_y):
    for x in range(l_x):
        for y in range(l_y):
            grid[x, y] /= 2.0


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_inplace_div(be, dt):
    """test_inplace_div / _double: one work item halves a 2 x 2 grid in place (l_x, l_y int32)"""
    (g,) = run(be, idiv, np.ones((2, 2), dt), np.int32(2), np.int32(2), ndrange=1)
    assert g.dtype == dt and np.all(g == 0.5)


# ---------------------------------------------------------------------------- test_boolean.py

@tk.kernel
def boolean_func(A, vertial):
    if vertial:
        A[0] = 123
    else:
        A[0] = 321


@pytest.mark.parametrize("flag", [True, np.bool_(True)], ids=["python", "numpy"])
def test_boolean(be, flag):
    """test_boolean: a bool argument chooses the branch (True -> 123, False -> 321)"""
    (A,) = run(be, boolean_func, np.zeros(1), flag, ndrange=1)
    assert A[0] == 123
    (A,) = run(be, boolean_func, np.zeros(1), not flag, ndrange=1)
    assert A[0] == 321


# ---------------------------------------------------------------------------- test_freevar.py

def test_freevar(be):
    """test_freevar: the shared array's size and dtype are closure variables of the kernel
    (upstream only compiles it, reading an unset element; here the element is set first)"""
    size = 1024
    nbtype = tk.float32

    @tk.kernel
    def foo(A, i):
        sdata = tk.localmem(nbtype, size)
        sdata[i] = A[i] + 1
        tk.synchronize()
        A[i] = sdata[i] * sdata.shape[0]

    (A,) = run(be, foo, np.arange(2, dtype=np.float32), 0, ndrange=1)
    np.testing.assert_array_equal(A, [1024, 1])


# ---------------------------------------------------------------------- test_py2_div_issue.py

@tk.kernel
def preCalc(y, yA, yB, numDataPoints):
    i = tk.index()
    k = i % numDataPoints  # noqa: F841 - unused, as upstream (part of the original trigger)
    ans = tk.float32(1.001 * tk.float32(i))
    y[i] = ans
    yA[i] = ans * 1.0
    yB[i] = ans / 1.0


def test_py2_div_issue(be):
    """test_py2_div_issue: ans * 1.0 and ans / 1.0 equal ans, and ans is NumPy's float32
    1.001 * float32(i) (NEP 50: the literal is weak)"""
    n = 15
    y, yA, yB = run(be, preCalc, *(np.zeros(n, np.float32) for _ in range(3)), np.int32(n), ndrange=n)
    assert np.all(y == yA) and np.all(y == yB)
    np.testing.assert_array_equal(y, 1.001 * np.arange(n, dtype=np.float32))


# ----------------------------------------------------------------------------- test_nondet.py

@tk.kernel
def diagproduct(c, a: tk.Const, b: tk.Const):
    startY, startX = tk.index(tk.Global, tk.Cartesian)
    gridY, gridX = tk.ndrange()
    height = c.shape[0]
    width = c.shape[1]
    for x in range(startX, width, gridX):
        for y in range(startY, height, gridY):
            c[y, x] = a[y, x] * b[x]


def test_for_pre(anybe):
    """test_for_pre (bad sign extension in a loop precondition): a grid of 8 x 32 items over an
    8 x 8 array, so most grid-stride loops start past the end and run no iteration"""
    n = 8
    A = np.arange(n * n, dtype=np.float32).reshape(n, n)
    B = np.arange(n, dtype=np.float32)
    (F, _, _) = run(anybe, diagproduct, np.full((n, n), np.nan, np.float32), A, B, ndrange=(8, 32),
                    workgroupsize=(8, 32) if anybe.max_workgroupsize >= 256 else None)
    np.testing.assert_array_equal(F, A * B)      # np.dot(A, np.diag(B)), exact here


# ----------------------------------------------------------------------------- test_mandel.py

@tk.func
def mandel(tid, min_x, max_x, min_y, max_y, width, height, iters):
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    x = tid % width
    y = tid / width                       # a float (true division), as upstream
    real = min_x + x * pixel_size_x
    imag = min_y + y * pixel_size_y
    zr = 0.0
    zi = 0.0
    for i in range(iters):
        zr, zi = zr * zr - zi * zi + real, 2.0 * zr * zi + imag
        if (zr * zr + zi * zi) >= 4:
            return i
    return iters


@tk.kernel
def mandel_k(out, min_x, max_x, min_y, max_y, width, height, iters):
    t = tk.index()
    out[t] = mandel(tk.uint32(t), min_x, max_x, min_y, max_y, width, height, iters)


def mandel_py(tid, min_x, max_x, min_y, max_y, width, height, iters):
    """upstream's function as Python runs it (complex arithmetic)"""
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    x = tid % width
    y = tid / width
    c = complex(min_x + x * pixel_size_x, min_y + y * pixel_size_y)
    z = 0.0j
    for i in range(iters):
        z = z * z + c
        if (z.real * z.real + z.imag * z.imag) >= 4:
            return i
    return iters


def test_mandel(be):
    """test_mandel (upstream compiles it with uint32/float64 arguments): the escape counts of a
    12 x 8 image, against Python's complex arithmetic"""
    w, h, iters = 12, 8, 50
    args = (-2.0, 1.0, -1.0, 1.0, np.uint32(w), np.uint32(h), np.uint32(iters))
    (out,) = run(be, mandel_k, np.zeros(w * h, np.int64), *args, ndrange=w * h)
    want = [mandel_py(t, -2.0, 1.0, -1.0, 1.0, w, h, iters) for t in range(w * h)]
    np.testing.assert_array_equal(out, want)
    assert 0 < (out == iters).sum() < w * h    # both inside and escaping points


# -------------------------------------------------------------------------- test_transpose.py

@tk.kernel
def transpose_k(out, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = x[j, i]


@pytest.mark.parametrize("rows,cols", [(5, 6), (257, 64)])
def test_transpose(anybe, rows, cols):
    """test_transpose: x = arange(rows * cols) as (cols, rows) into a (rows, cols) array"""
    dt = fdt(anybe)
    x = np.arange(rows * cols, dtype=dt).reshape(cols, rows)
    (y, _) = run(anybe, transpose_k, np.zeros((rows, cols), dt), x, ndrange=(rows, cols))
    np.testing.assert_array_equal(y, x.T)


@pytest.mark.parametrize("rows,cols", [(2, 3), (16, 16), (16, 17), (17, 16), (14, 15), (15, 14), (14, 14)])
def test_transpose_bool(be, rows, cols):
    """test_transpose_bool over upstream's small_variants"""
    arr = np.random.default_rng(rows * 100 + cols).integers(2, size=(rows, cols)).astype(np.bool_)
    (y, _) = run(be, transpose_k, np.zeros((cols, rows), np.bool_), arr, ndrange=(cols, rows))
    np.testing.assert_array_equal(y, arr.T)


def test_transpose_view(be):
    """test_transpose_view: the transpose of the strided view a[::2, ::2] (shape (6, 5)) is
    passed as it is (zero-copy, strides (16, 192)) and read by a copy kernel"""
    a = np.arange(120, dtype=np.int64).reshape((10, 12))
    view_t = a[::2, ::2].T
    assert view_t.shape == (6, 5) and view_t.strides == (16, 192)

    @tk.kernel
    def copy2(out, x: tk.Const):
        i, j = tk.index(tk.Global, tk.Cartesian)
        out[i, j] = x[i, j]

    out = np.zeros((6, 5), np.int64)
    copy2(be)(out, view_t, ndrange=(6, 5))
    tk.synchronize(be)
    np.testing.assert_array_equal(out, view_t)


# ------------------------------------------------------------------------ test_blackscholes.py

RISKFREE = 0.02
VOLATILITY = 0.30
A1 = 0.31938153
A2 = -0.356563782
A3 = 1.781477937
A4 = -1.821255978
A5 = 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


def cnd_np(d):
    K = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    ret_val = (RSQRT2PI * np.exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    return np.where(d > 0, 1.0 - ret_val, ret_val)


def black_scholes_np(callResult, putResult, S, X, T, R, V):
    sqrtT = np.sqrt(T)
    d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1, cndd2 = cnd_np(d1), cnd_np(d2)
    expRT = np.exp(- R * T)
    callResult[:] = (S * cndd1 - X * expRT * cndd2)
    putResult[:] = (X * expRT * (1.0 - cndd2) - S * (1.0 - cndd1))


@tk.func
def cnd_cuda(d):
    K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    ret_val = (RSQRT2PI * math.exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    if d > 0:
        ret_val = 1.0 - ret_val
    return ret_val


@tk.kernel
def black_scholes_cuda(callResult, putResult, S: tk.Const, X: tk.Const, T: tk.Const, R, V):
    i = tk.index()
    if i >= S.shape[0]:
        return
    sqrtT = math.sqrt(T[i])
    d1 = ((math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrtT))
    d2 = d1 - V * sqrtT
    cndd1 = cnd_cuda(d1)
    cndd2 = cnd_cuda(d2)
    expRT = math.exp((-1. * R) * T[i])
    callResult[i] = (S[i] * cndd1 - X[i] * expRT * cndd2)
    putResult[i] = (X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1))


def test_blackscholes(anybe):
    """test_blackscholes: 400 options, two iterations, launched on a stream over a padded range
    (512-item groups where the backend has them), against NumPy: relative L1 error and the
    largest error below 1e-13 (float64; WebGPU computes in float32: 1e-5 relative there)"""
    dt = fdt(anybe)
    rng = np.random.default_rng(400)

    def randfloat(r, low, high):
        return (1.0 - r) * low + r * high

    n = 400
    S = randfloat(rng.random(n), 5.0, 30.0)
    X = randfloat(rng.random(n), 1.0, 100.0)
    T = randfloat(rng.random(n), 0.25, 10.0)
    call_np, put_np = np.zeros(n), -np.ones(n)
    black_scholes_np(call_np, put_np, S, X, T, RISKFREE, VOLATILITY)
    wg = 512 if anybe.max_workgroupsize >= 512 else anybe.max_workgroupsize
    stream = anybe.stream()
    dev = [tk.asarray(a.astype(dt), backend=anybe) for a in (np.zeros(n), -np.ones(n), S, X, T)]
    k = black_scholes_cuda(anybe)
    for _ in range(2):
        k(*dev, RISKFREE, VOLATILITY, ndrange=-(-n // wg) * wg, workgroupsize=wg, stream=stream)
    stream.synchronize()
    call, put = dev[0].numpy().astype(np.float64), dev[1].numpy().astype(np.float64)
    tol = 1e-13 if dt == np.float64 else 1e-5
    for got, want in ((call, call_np), (put, put_np)):
        delta = np.abs(want - got)
        assert delta.sum() / np.abs(want).sum() < tol
        assert delta.max() < tol * (1 if dt == np.float64 else np.abs(want).max())


# ---------------------------------------------------------------- test_globals.py, sm_creation

N = 100
S0 = 10
S1 = 20
GLOBAL_CONSTANT = 5
GLOBAL_CONSTANT_2 = 6
GLOBAL_CONSTANT_TUPLE = 5, 6


@tk.kernel
def simple_smem(ary):
    sm = tk.localmem(tk.int32, N)
    i = tk.index()
    if i == 0:
        for j in range(N):
            sm[j] = j
    tk.synchronize()
    ary[i] = sm[i]


def test_global_int_const(be):
    """test_global_int_const: a module-level N sizes the shared array; item 0 fills it"""
    (ary,) = run(be, simple_smem, np.full(N, -1, np.int32), ndrange=N, workgroupsize=N)
    np.testing.assert_array_equal(ary, np.arange(N, dtype=np.int32))


@tk.kernel
def coop_smem2d(ary):
    i, j = tk.index(tk.Global, tk.Cartesian)
    sm = tk.localmem(tk.float32, (S0, S1))
    sm[i, j] = (i + 1) / (j + 1)
    tk.synchronize()
    ary[i, j] = sm[i, j]


def test_global_tuple_const(be):
    """test_global_tuple_const (skipped upstream): a shape built from module-level S0, S1, one
    10 x 20 group; (i + 1) / (j + 1) is a float64 division stored as float32"""
    (ary,) = run(be, coop_smem2d, np.zeros((S0, S1), np.float32), ndrange=(S0, S1), workgroupsize=(S0, S1))
    i, j = np.meshgrid(np.arange(S0), np.arange(S1), indexing="ij")
    np.testing.assert_array_equal(ary, ((i + 1) / (j + 1)).astype(np.float32))


@tk.kernel
def udt_global_constants(A):
    sa = tk.localmem(tk.float32, GLOBAL_CONSTANT)
    i = tk.index()
    sa[i] = i + 0.5
    A[i] = sa[i] * sa.shape[0]


@tk.kernel
def udt_global_build_tuple(A):
    sa = tk.localmem(tk.float32, (GLOBAL_CONSTANT, GLOBAL_CONSTANT_2))
    i, j = tk.index(tk.Global, tk.Cartesian)
    sa[i, j] = i * 10 + j
    A[i, j] = sa[i, j] + sa.shape[0] * 100 + sa.shape[1] * 1000


@tk.kernel
def udt_global_constant_tuple(A):
    sa = tk.localmem(tk.float32, GLOBAL_CONSTANT_TUPLE)
    i, j = tk.index(tk.Global, tk.Cartesian)
    sa[i, j] = i * 10 + j
    A[i, j] = sa[i, j] + sa.shape[0] * 100 + sa.shape[1] * 1000


def test_shared_array_shapes_from_globals(be):
    """test_global_constants / test_global_build_tuple / test_global_constant_tuple: shapes from
    a global int, a tuple built from two globals and a global tuple (upstream launches one item
    over uninitialized memory; here every element is written and the shape read back)"""
    (A,) = run(be, udt_global_constants, np.zeros(5, np.float32), ndrange=5)
    np.testing.assert_array_equal(A, (np.arange(5) + 0.5) * 5)
    i, j = np.meshgrid(np.arange(5), np.arange(6), indexing="ij")
    for k in (udt_global_build_tuple, udt_global_constant_tuple):
        (A,) = run(be, k, np.zeros((5, 6), np.float32), ndrange=(5, 6), workgroupsize=(5, 6))
        np.testing.assert_array_equal(A, i * 10 + j + 6500)


@tk.kernel
def udt_global_build_list(A):
    sa = tk.localmem(tk.float32, [GLOBAL_CONSTANT, GLOBAL_CONSTANT_2])
    i, j = tk.index(tk.Global, tk.Cartesian)
    A[i, j] = sa[i, j]


@tk.kernel
def udt_invalid_1(A):
    sa = tk.localmem(tk.float32, A[0])
    i = tk.index()
    A[i] = sa[i]


@tk.kernel
def udt_invalid_2(A):
    sa = tk.localmem(tk.float32, (1, A[0]))
    i, j = tk.index(tk.Global, tk.Cartesian)
    A[i, j] = sa[i, j]


@tk.kernel
def udt_invalid_3(A):
    sa = tk.localmem(tk.float32, (1, A[0]))
    i = tk.index()
    A[i] = sa[i, 0]


@tk.kernel
def udt_invalid_string_dtype(x):
    s = tk.localmem('int33', 10)
    s[0] = x[0]
    x[0] = s[0]


@tk.kernel
def udt_string_dtype(x):
    s = tk.localmem('int32', 10)
    s[0] = x[0]
    x[0] = s[0]


@pytest.mark.parametrize("k,arg,match", [
    (udt_global_build_list, np.full((1, 1), 100, np.float32), "lists are not supported"),
    (udt_invalid_1, np.full(1, 100, np.float32), "known at compile time"),
    (udt_invalid_1, np.full(1, 100, np.int32), "known at compile time"),
    (udt_invalid_2, np.full((1, 1), 100, np.float32), "2 dimension"),
    (udt_invalid_3, np.full(1, 100, np.int32), "known at compile time"),
    (udt_invalid_string_dtype, np.zeros(1, np.int32), "must be a dtype"),
    (udt_string_dtype, np.zeros(1, np.int32), "must be a dtype"),
], ids=["list", "invalid_1", "invalid_3", "invalid_2", "invalid_4", "int33", "string"])
def test_invalid_shared_array_creation(be, k, arg, match):
    """test_global_build_list, test_invalid_1..4, test_invalid_string_dtype: a list shape, a
    shape (or one dimension) read from an array, a string dtype: a CompileError at the line
    (invalid_2's A[0] of a 2-D array is a row: refused as an index of the wrong rank)"""
    with pytest.raises(tk.CompileError, match=match) as ei:
        k(be)(arg.copy(), ndrange=1)
    assert "test_ported_suites_numba2.py" in str(ei.value)


@pytest.mark.parametrize("dtype", [tk.int32, np.int32], ids=["tk", "numpy"])
def test_shared_array_dtype_spellings(be, dtype):
    """test_numba_dtype / test_numpy_dtype: tk.int32 and np.int32 both give an int32 local
    array (a value that an int32 holds and a float would not: 2**31 - 1 survives exactly)"""
    @tk.kernel
    def f(x):
        s = tk.localmem(dtype, 10)
        s[0] = x[0]
        x[0] = s[0] - 1

    (x,) = run(be, f, np.array([2**31 - 1], np.int32), ndrange=1)
    assert x[0] == 2**31 - 2


# -------------------------------------------------------------------------- test_device_func.py

@tk.func
def add2f(a, b):
    return a + b


@tk.func
def indirect(a, b):
    return add2f(a, b)


@tk.kernel
def use_add2f(ary):
    i = tk.index()
    ary[i] = add2f(ary[i], ary[i])


@tk.kernel
def indirect_add2f(ary):
    i = tk.index()
    ary[i] = indirect(ary[i], ary[i])


@pytest.mark.parametrize("k", [use_add2f, indirect_add2f], ids=["direct", "indirect"])
def test_device_function_calls(be, k):
    """test_use_add2f / test_indirect_add2f: ary + ary through one and two device functions"""
    ary = np.arange(10, dtype=np.float32)
    (out,) = run(be, k, ary, ndrange=10)
    np.testing.assert_array_equal(out, ary + ary)


@tk.func
def rgba(r: tk.int32, g: tk.int32, b: tk.int32, a: tk.int32):
    return (((r & 0xFF) << 16) | ((g & 0xFF) << 8) | ((b & 0xFF) << 0) | ((a & 0xFF) << 24))


@tk.kernel
def rgba_caller(x, channels: tk.Const):
    x[0] = rgba(channels[0], channels[1], channels[2], channels[3])


def test_device_casting(anybe):
    """test_device_casting: the func's int32 annotations cast float32 channels on entry (no
    float specialization: ``&`` on a float would be a CompileError), giving 0x04010203"""
    (x, _) = run(anybe, rgba_caller, np.zeros(1, np.int32), np.array([1.0, 2.0, 3.0, 4.0], np.float32), ndrange=1)
    assert x[0] == 0x04010203


# ----------------------------------------------------------------- test_lang.py, test_iterators

TUP = (1., 2.5, 3.)
T1 = (1, 2, 3)
T2 = (4.5, 5.6, 6.7)


@tk.kernel
def enumerate_tuple(a):
    for i, v in enumerate(TUP):
        a[i] = v


@tk.kernel
def zip_arrays(x, y, error):
    i = 0
    for xv, yv in zip(x, y):
        if xv != x[i]:
            error[0] = 1
        i += 1


@pytest.mark.parametrize("k,args", [(enumerate_tuple, (np.zeros(3),)),
                                    (zip_arrays, (np.arange(5), np.arange(5), np.zeros(1, np.int32)))],
                         ids=["enumerate", "zip"])
def test_enumerate_and_zip_are_compile_errors(be, k, args):
    """test_lang's test_enumerate/test_zip and test_iterators: a kernel loops over range only
    (SPEC 3): a CompileError naming the loop's line"""
    with pytest.raises(tk.CompileError, match=r"only loop over range") as ei:
        k(be)(*args, ndrange=1)
    assert "for " in str(ei.value)


@tk.kernel
def enumerate_by_range(a, error, x: tk.Const):
    v0, v1, v2 = TUP
    a[0], a[1], a[2] = v0, v1, v2
    c = 0.0
    t10, t11, t12 = T1
    t20, t21, t22 = T2
    c += t10 + t20
    c += t11 + t21
    c += t12 + t22
    a[3] = c
    count = 0
    for i in range(len(x)):
        if count != i:
            error[0] = 1
        if x[i] != x[count]:
            error[0] = 2
        count += 1
    if count != len(x):
        error[0] = 3


def test_enumerate_and_zip_written_with_range(be):
    """the same cases as SPEC writes them: tuples unpacked, arrays walked with range(len(x));
    zip's sum is (b + c).sum() computed as upstream (left to right, float64)"""
    a, err, _ = run(be, enumerate_by_range, np.zeros(4), np.zeros(1, np.int32), np.asarray((10, 9, 8, 7, 6)),
                    ndrange=1)
    assert list(a[:3]) == list(TUP) and err[0] == 0
    c = 0.0
    for p, q in zip(T1, T2):
        c += p + q
    assert a[3] == c


@tk.kernel
def cuda_kernel_api_in_multiple_blocks(ary):
    tx = 0
    ty = 0
    for i in range(2):
        tx = tk.index(tk.Local, tk.Cartesian)[0]
    for j in range(3):
        ty = tk.index(tk.Local, tk.Cartesian)[1]
    sm = tk.localmem(tk.float64, (2, 3))
    sm[tx, ty] = 1.0 + tx * 3 + ty
    ary[tx, ty] = sm[tx, ty]


def test_issue_872(be):
    """test_issue_872: thread indices read inside two loops, a 2 x 3 shared array"""
    dt = fdt(be)
    (a,) = run(be, cuda_kernel_api_in_multiple_blocks, np.zeros((2, 3), dt), ndrange=(2, 3), workgroupsize=(2, 3))
    np.testing.assert_array_equal(a, np.arange(1, 7).reshape(2, 3))


# ---------------------------------------------------------------------------- test_constmem.py

CONST1D = np.arange(10, dtype=np.float64) / 2.
CONST2D = np.asfortranarray(np.arange(100, dtype=np.int32).reshape(10, 10))
CONST3BYTES = np.arange(3, dtype=np.uint8)


@tk.kernel
def cuconst_global(A):
    i = tk.index()
    A[i] = CONST1D[i] + 1.0


@tk.kernel
def cuconst(A, C: tk.Const):
    i = tk.index()
    A[i] = C[i] + 1.0


@tk.kernel
def cuconst2d(A, C: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    A[i, j] = C[i, j]


@tk.kernel
def cuconst_align(z, a: tk.Const, b: tk.Const):
    i = tk.index()
    z[i] = a[i] + b[i]


@tk.kernel
def cuconst_empty(A, C: tk.Const):
    A[0] = len(C)


def test_constant_arrays(be):
    """test_const_array (1-D float64 + 1), test_const_array_2d (a Fortran-order int32 array,
    read through its strides into a C-order one, groups of 5 x 5), test_const_align (uint8 plus
    float64), test_const_empty (len of an empty array is 0); a global array is refused"""
    A, _ = run(be, cuconst, np.zeros_like(CONST1D), CONST1D, ndrange=10, workgroupsize=5)
    np.testing.assert_array_equal(A, CONST1D + 1)
    A, _ = run(be, cuconst2d, np.zeros((10, 10), np.int32), CONST2D, ndrange=(10, 10), workgroupsize=(5, 5))
    np.testing.assert_array_equal(A, CONST2D)
    z, _, _ = run(be, cuconst_align, np.full(3, np.nan), CONST3BYTES, CONST1D[:3].copy(), ndrange=3)
    np.testing.assert_array_equal(z, CONST3BYTES + CONST1D[:3])
    A, _ = run(be, cuconst_empty, np.full(1, -1, np.int64), np.array([]), ndrange=1)
    assert A[0] == 0
    with pytest.raises(tk.CompileError, match="pass the array as an argument"):
        cuconst_global(be)(np.zeros(10), ndrange=10)


# ----------------------------------------------------------------------------- test_minmax.py

@tk.kernel
def builtin_max(A: tk.Const, B: tk.Const, C):
    i = tk.index()
    if i >= len(C):
        return
    C[i] = tk.float64(max(A[i], B[i]))


@tk.kernel
def builtin_min(A: tk.Const, B: tk.Const, C):
    i = tk.index()
    if i >= len(C):
        return
    C[i] = tk.float64(min(A[i], B[i]))


@pytest.mark.parametrize("left,right", [(np.float64, np.float64), (np.float32, np.float64),
                                        (np.float64, np.float32), (np.float32, np.float32)])
def test_minmax(be, left, right):
    """test_max/min_f8f8, f4f8, f8f4, f4f4: arange(5) + .5 against 2, over a padded range"""
    a = np.arange(5, dtype=left) + .5
    b = np.full(5, fill_value=2, dtype=right)
    for k, ref in ((builtin_max, np.maximum), (builtin_min, np.minimum)):
        _, _, c = run(be, k, a, b, np.zeros(5), ndrange=8)
        np.testing.assert_array_equal(c, ref(a, b))


# ------------------------------------------------------------------------------ test_print.py

@tk.kernel
def cuhello():
    i = tk.index()
    tk.print(i, 999)
    tk.print(-42)


@tk.kernel
def printfloat():
    i = tk.index()
    tk.print(i, 23, 34.75, 321)


@tk.kernel
def printstring():
    i = tk.index()
    tk.print(i, "hop!", 999)


@tk.kernel
def printempty():
    tk.print()


@tk.kernel
def print_many(r):
    tk.print(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
             r[11], r[12], r[13], r[14], r[15], r[16], r[17], r[18], r[19], r[20],
             r[21], r[22], r[23], r[24], r[25], r[26], r[27], r[28], r[29], r[30],
             r[31], r[32])


def printed(be, capfd, k, *args, **kw):
    """the lines ``k`` prints (stripped), C's printf and Python's stdout both captured"""
    import sys
    capfd.readouterr()
    k(be)(*args, **kw)
    tk.synchronize(be)
    sys.stdout.flush()
    return [ln.strip() for ln in capfd.readouterr().out.splitlines()]


def test_print(anybe, capfd):
    """test_print.py: cuhello (two groups of three; each print is one line, lines of different
    items in some order), printfloat (34.75 with %g: upstream accepts "34.75"), printstring,
    printempty (an empty line) and print_too_many (33 values: CUDA's vprintf cannot, upstream
    prints the format string and warns; tk.print prints them all)"""
    lines = printed(anybe, capfd, cuhello, ndrange=6, workgroupsize=3)
    assert sorted(lines) == ['-42'] * 6 + ['%d 999' % i for i in range(6)]
    assert printed(anybe, capfd, printfloat, ndrange=1) == ["0 23 34.75 321"]
    assert sorted(printed(anybe, capfd, printstring, ndrange=3)) == ['%d hop! 999' % i for i in range(3)]
    assert printed(anybe, capfd, printempty, ndrange=1) == [""]
    r = put(anybe, np.arange(33, dtype=np.int32))
    assert printed(anybe, capfd, print_many, r, ndrange=1) == [" ".join(str(v) for v in range(33))]
