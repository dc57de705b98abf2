"""CuPy's user-kernel tests (tests/cupy_tests/core_tests/ test_raw.py, test_userkernel.py,
test_reduction.py, test_elementwise.py) ported test by test: the same computations written as
tinykernels kernels. RawKernel's hand-guarded ``if (tid < N)`` kernels become
``@tk.kernel(unsafe_indices=True)`` kernels launched over the padded grid; ElementwiseKernel's
``T x, T y -> T z`` becomes one kernel specialized per dtype, with Python scalars (weak) and NumPy
scalars (strong, wrapped by ``astype`` as upstream builds them); ReductionKernel's int8 sums
(which wrap in int8) over every awkward length around powers of two, along either axis, over
transposed (strided) views and over several axes of a 7-D array. Exact against NumPy. CPU,
INTERP, INTERP:CHECK, CL and WEBGPU.

Where SPEC differs from upstream (not ported):

* No C source, macros, templates, modules, cubin/PTX loading, kernel attributes, dynamic
  parallelism, grid-wide sync, textures or complex types: a macro or template parameter is a
  ``tk.constexpr`` or an array's dtype (one kernel, one specialization per dtype, its source
  from ``kernel.source()``); a grid-wide sync is two launches.
* No ElementwiseKernel ``size=``/"raw" rules: every launch names its ``ndrange``, and one that
  does not is a ``tk.LaunchError`` (the analogue of "Loop size is undecided").
* No kernel-name validation (a kernel's name is its Python function's) and no per-kernel cache
  counters (SPEC's specialization cache is tested in tests/test_cache.py).
* A Python int *literal* that does not fit the array's type is a ``tk.CompileError`` where NumPy
  (and CuPy) raise OverflowError (docs/language.md); test_large_int_* check that."""
import ctypes
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, interp, put
from gen_kernels import make_kernel

_GEN = os.path.join(tempfile.gettempdir(), "tinykernels_ported_suites_cupy")
RNG = np.random.default_rng(2019)
ALL_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
              np.uint64, np.float16, np.float32, np.float64]
INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def need(be, *dtypes):
    for dt in dtypes:
        if not be.supports(np.dtype(dt)):
            pytest.skip(f"{be.name} has no {np.dtype(dt).name}")


def shaped_arange(shape, dtype):
    """cupy.testing.shaped_arange: 1, 2, 3, ... (bools alternate), as the dtype."""
    a = np.arange(1, int(np.prod(shape)) + 1).reshape(shape)
    return (a % 2 == 0) if dtype is np.bool_ else a.astype(dtype)


# --- test_raw.py ------------------------------------------------------------------------------

@tk.kernel(unsafe_indices=True)
def raw_sum(x1: tk.Const, x2: tk.Const, y, n):
    tid = tk.index()
    if tid < n:
        y[tid] = x1[tid] + x2[tid]


@tk.kernel(unsafe_indices=True)
def raw_multiply(x1: tk.Const, x2: tk.Const, y, n):
    tid = tk.index()
    if tid < n:
        y[tid] = x1[tid] * x2[tid]


def _raw_helper(be, kern, dtype, n=10, block=None):
    """TestRaw._helper: x1 = arange(n*n), x2 = ones, a grid of n blocks of n threads (or of
    ``block`` threads, padded past n*n: the kernel guards itself)."""
    x1 = np.arange(n * n, dtype=dtype).reshape(n, n)
    x2 = np.ones((n, n), dtype)
    y = put(be, np.zeros(n * n, dtype))
    block = block or n
    grid = -(-(n * n) // block)
    kern(be)(put(be, x1.ravel()), put(be, x2.ravel()), y, np.uint32(n * n),
             ndrange=grid * block, workgroupsize=block)
    return x1.ravel(), x2.ravel(), get(y)


def test_basic(be):
    """TestRaw.test_basic: the guarded float32 sum kernel on a 10 x 10 grid."""
    x1, x2, y = _raw_helper(be, raw_sum, np.float32)
    np.testing.assert_array_equal(y, x1 + x2)


@pytest.mark.parametrize("block", [64, 256])
@pytest.mark.parametrize("n", [10, 33])
def test_padded_grid_guard(be, n, block):
    """TestRawGridSync's launch shape (grid = ceil(n*n / block)) without the grid sync: items
    past n*n run (unsafe_indices) and the kernel's own guard keeps them from writing."""
    x1, x2, y = _raw_helper(be, raw_sum, np.float32, n=n, block=block)
    np.testing.assert_array_equal(y, x1 + x2)


def test_module(be):
    """TestRaw.test_module: two kernels of one module (sum and multiply)."""
    x1, x2, y = _raw_helper(be, raw_sum, np.float32)
    np.testing.assert_array_equal(y, x1 + x2)
    x1, x2, y = _raw_helper(be, raw_multiply, np.float32)
    np.testing.assert_array_equal(y, x1 * x2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiler_flag_precision(be, dtype):
    """TestRaw.test_compiler_flag: ``-DPRECISION=2`` picks double, 1 float: here the arrays'
    dtype picks the specialization, and the generated source says which C type it uses."""
    need(be, dtype)
    for kern, fn in ((raw_sum, np.add), (raw_multiply, np.multiply)):
        x1, x2, y = _raw_helper(be, kern, dtype)
        np.testing.assert_array_equal(y, fn(x1, x2))
    a = np.zeros(4, dtype)
    src = raw_sum.source("CUDA", a, a, a, np.uint32(4), ndrange=4)
    ctype = "double" if dtype is np.float64 else "float"
    assert f"const {ctype} *__restrict__ a_x1" in src


@tk.kernel(unsafe_indices=True)
def multiply_by_const(x, some_array: tk.Const, n):
    i = tk.index()
    if i < n:
        x[i] *= some_array[i]


def test_const_memory(be):
    """TestRaw.test_const_memory: a read-only (``tk.Const``) table multiplies ones in place."""
    data = np.arange(100, dtype=np.float32)
    out = put(be, np.ones(100, np.float32))
    multiply_by_const(be)(out, put(be, data), np.int32(100), ndrange=100, workgroupsize=100)
    np.testing.assert_array_equal(get(out), data)


@tk.kernel(unsafe_indices=True)
def my_sqr(inp, n):
    x = tk.index()
    if x < n:
        inp[x] *= inp[x]


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_template_specialization(be, dtype):
    """TestRaw.test_template_specialization: ``my_sqrt<T>`` (which squares in place) for int32,
    float32 and float64 (complex<double> has no SPEC dtype)."""
    need(be, dtype)
    a = (RNG.integers(0, 10, 10) if dtype is np.int32 else RNG.random(10)).astype(dtype)
    x = put(be, a)
    my_sqr(be)(x, 10, ndrange=10)
    np.testing.assert_array_equal(get(x), a * a)


@tk.kernel(unsafe_indices=True)
def cast_func(arr, n):
    x = tk.index()
    if x < n:
        arr[x] = 3.0 * arr[x] - 8.0


@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_raw_pointer(dev):
    """TestRaw.test_raw_pointer: the kernel runs on memory known only by its address
    (``tk.from_blob``, a host-backend feature: SPEC 5)."""
    be = tk.backend(dev)
    buf = (ctypes.c_double * 100)(*([1.0] * 100))
    arr = tk.from_blob(ctypes.addressof(buf), (100,), tk.float64, be)
    cast_func(be)(arr, 100, ndrange=100)
    np.testing.assert_array_equal(np.frombuffer(buf, np.float64), np.full(100, -5.0))


def test_invalid_source_is_a_compile_error(be):
    """TestRaw.test_invalid_compiler_flag / test_get_function_failure: a kernel that cannot
    compile raises tk.CompileError naming the file and line, on every backend."""
    k = make_kernel(_GEN, "bad_kernel", ["y"], ["y[i] = undefined_name + 1"])
    with pytest.raises(tk.CompileError) as e:
        k(be)(put(be, np.zeros(4, np.float32)), ndrange=4)
    assert "undefined_name" in str(e.value) and "bad_kernel_" in str(e.value)


# --- test_userkernel.py -----------------------------------------------------------------------

@tk.kernel
def ew_add(x, y, z):
    i = tk.index(tk.Global, tk.Cartesian)
    z[i] = x[i] + y[i]


@tk.kernel
def ew_add_scalar(x, y, z):
    i = tk.index(tk.Global, tk.Cartesian)
    z[i] = x[i] + y


@tk.kernel(unsafe_indices=True)
def raw_add(x, y, z, n):
    i = tk.index()
    if i < n:
        z[i] = x[i] + y[i]


def test_manual_indexing(be):
    """TestUserkernel.test_manual_indexing: the elementwise form and the raw-indexed form give
    the same array."""
    n = 100
    a, b = RNG.uniform(-1, 1, n).astype(np.float32), RNG.uniform(-1, 1, n).astype(np.float32)
    z1, z2 = put(be, np.zeros(n, np.float32)), put(be, np.zeros(n, np.float32))
    ew_add(be)(put(be, a), put(be, b), z1, ndrange=n)
    raw_add(be)(put(be, a), put(be, b), z2, n, ndrange=128, workgroupsize=64)
    np.testing.assert_array_equal(get(z1), get(z2))
    np.testing.assert_array_equal(get(z1), a + b)


@pytest.mark.parametrize("typ", [int, float, bool])
def test_python_scalar(be, typ):
    """TestUserkernel.test_python_scalar: an int64 / float64 / bool array plus the Python
    scalar ``typ(2)``, which is weak: the array's type stays."""
    dtype = np.dtype(typ).type
    need(be, dtype)
    a = RNG.integers(0, 2, (4, 5)).astype(dtype)
    z = put(be, np.zeros((4, 5), dtype))
    ew_add_scalar(be)(put(be, a), typ(2), z, ndrange=(4, 5))
    np.testing.assert_array_equal(get(z), a + dtype(2))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_scalar(be, dtype):
    """TestUserkernel.test_numpy_scalar: every dtype plus ``dtype(2)`` (strong, same type)."""
    need(be, dtype)
    a = RNG.integers(0, 2, (4, 5)).astype(dtype)
    z = put(be, np.zeros((4, 5), dtype))
    ew_add_scalar(be)(put(be, a), dtype(2), z, ndrange=(4, 5))
    np.testing.assert_array_equal(get(z), a + dtype(2))


@pytest.mark.parametrize("value", [-1, 2 ** 32, 2 ** 63 - 1, -(2 ** 63)])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_userkernel_scalar(be, dtype, value):
    """TestUserkernelScalar.test_scalar: shaped_arange((2, 3, 4)) plus a NumPy scalar made by
    ``np.array(value).astype(dtype)`` (so wrapped or rounded), for every dtype."""
    need(be, dtype)
    x = shaped_arange((2, 3, 4), dtype)
    with np.errstate(all="ignore"):
        y = np.array(value).astype(dtype)[()]
        want = x + y
    z = put(be, np.zeros((2, 3, 4), dtype))
    ew_add_scalar(be)(put(be, x), y, z, ndrange=(2, 3, 4))
    np.testing.assert_array_equal(get(z), want)


def test_block_size(be):
    """TestUserkernelManualBlockSize: block_size=1 works; block_size=0 is an error (here a
    tk.LaunchError, as SPEC 2 makes every zero size)."""
    x = shaped_arange((2, 3, 4), np.float32)
    z = put(be, np.zeros((2, 3, 4), np.float32))
    ew_add_scalar(be)(put(be, x), 1, z, ndrange=(2, 3, 4), workgroupsize=(1, 1, 1))
    np.testing.assert_array_equal(get(z), x + 1)
    with pytest.raises(tk.LaunchError, match="workgroupsize"):
        ew_add_scalar(be)(put(be, x), 1, z, ndrange=(2, 3, 4), workgroupsize=0)


def test_size_is_required(be):
    """TestElementwiseKernelSize: where CuPy cannot infer the loop size it raises "Loop size is
    undecided"; a tinykernels launch always names its ndrange, and one without it is a
    tk.LaunchError naming the kernel."""
    z = put(be, np.zeros(2, np.float32))
    with pytest.raises(tk.LaunchError, match="raw_add.*ndrange"):
        raw_add(be)(z, z, z, 2)
    raw_add(be)(put(be, np.array([1, 2], np.float32)), put(be, np.array([3, 4], np.float32)), z, 2,
                ndrange=2)
    np.testing.assert_array_equal(get(z), [4, 6])


class _Dummy:
    """TestArgumentTypes' cupy-like protocol object: exports only ``__array_interface__``."""

    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


def test_argument_protocols_and_bad_argument():
    """TestArgumentTypes (reduction and elementwise kernels): an object exporting an array
    protocol is accepted (zero-copy on the host); a bad argument is a LaunchError naming it."""
    be = tk.CPU()
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    ew_add(be)(_Dummy(x), _Dummy(x), _Dummy(out), ndrange=10)
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(tk.LaunchError, match="'y'"):
        ew_add(be)(x, object(), out, ndrange=10)


# --- test_elementwise.py ----------------------------------------------------------------------

@tk.kernel
def ew_copy(dst, src: tk.Const):
    i = tk.index(tk.Global, tk.Cartesian)
    dst[i] = src[i]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_copy(be, dtype):
    """TestElementwise.test_copy / test_copy_zero_sized_array1/2 / test_copy_orders: a copy
    kernel for every dtype, from C and Fortran order, and of zero-sized shapes (nothing runs)."""
    need(be, dtype)
    src = shaped_arange((2, 3, 4), dtype)
    for s in (src, np.asfortranarray(src)):
        dst = put(be, np.zeros((2, 3, 4), dtype))
        ew_copy(be)(dst, put(be, s), ndrange=(2, 3, 4))
        np.testing.assert_array_equal(get(dst), src)
    for shape in ((0,), (1, 0, 2)):
        dst = put(be, np.zeros(shape, dtype))
        ew_copy(be)(dst, put(be, np.zeros(shape, dtype)), ndrange=shape)
        assert get(dst).shape == shape


@tk.kernel
def ew_accumulate(x: tk.Const, y):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[j] += x[i, j]


def test_invalid_shape(be):
    """TestElementwiseInvalidShape: CuPy refuses ``y += x`` with y (4,) and x (3, 4); a kernel
    indexes what it is told, and an index outside y is caught by debug mode (SPEC 3)."""
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    k = make_kernel(_GEN, "bad_shape", ["x", "y"], ["y[i] += x[i]"])
    if not be.supports(np.dtype(np.int32)):
        pytest.skip("no int32")
    dbg = tk.Interpreter(check=True) if interp(be) else type(be)(debug=True) \
        if isinstance(be, (tk.CPU, tk.OpenCL, tk.WebGPU)) else None
    if dbg is None:
        pytest.skip(f"{be.name}: no debug mode here")
    with pytest.raises(IndexError, match="bad_shape"):
        k(dbg)(put(dbg, x.ravel()), put(dbg, np.zeros(4, np.int32)), ndrange=12)


def _large_int_kernel(form, value):
    body = {"add_lit": f"out[i] = a[i] + {value}"}[form]
    return make_kernel(_GEN, "large_int", ["out", "a"], [body])


def _widest(be, dt):
    if dt.kind == "f":
        return np.float64 if be.supports_float64 else np.float32
    return dt


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_large_int(be, dtype):
    """TestElementwiseType.test_large_int_upper/lower_1..4: int8 [0] + max, int8 [1] + (max - 1),
    int8 [0] + min, int8 [-1] + (min + 1) with a Python int literal (NumPy: OverflowError where it
    does not fit int8; here tk.CompileError), and [max] + int8(0), [max - 1] + int8(1),
    [min] + int8(0), [min + 1] + int8(-1) with a strong int8 scalar, promoted as NumPy (uint64
    with int8 is float64)."""
    need(be, dtype)
    info = np.iinfo(dtype)
    for a0, lit in ((0, info.max), (1, info.max - 1), (0, info.min), (-1, info.min + 1)):
        a = np.array([a0], np.int8)
        k = _large_int_kernel("add_lit", int(lit))
        try:
            want = a + int(lit)
        except OverflowError:
            with pytest.raises(tk.CompileError, match="out of bounds for int8"):
                k(be)(put(be, np.zeros(1, np.int8)), put(be, a), ndrange=1)
            continue
        out = put(be, np.zeros(1, want.dtype))
        k(be)(out, put(be, a), ndrange=1)
        np.testing.assert_array_equal(get(out), want)
    for a0, s in ((info.max, 0), (info.max - 1, 1), (info.min, 0), (info.min + 1, -1)):
        a = np.array([a0], dtype)
        want = a + np.int8(s)
        need(be, want.dtype)
        out = put(be, np.zeros(1, _widest(be, want.dtype)))
        ew_add_scalar(be)(put(be, a), np.int8(s), out, ndrange=1)
        np.testing.assert_array_equal(get(out), want.astype(out.dtype))


# --- test_reduction.py ------------------------------------------------------------------------

@tk.kernel
def sum_axis0(out, a: tk.Const):
    j = tk.index()
    acc = tk.int8(0)
    for k in range(a.shape[0]):
        acc += a[k, j]
    out[j] = acc


@tk.kernel
def sum_axis1(out, a: tk.Const):
    j = tk.index()
    acc = tk.int8(0)
    for k in range(a.shape[1]):
        acc += a[j, k]
    out[j] = acc


@tk.kernel
def sum_groups(partial, a: tk.Const):
    i = tk.index()
    r = tk.group_reduce(a[i], "add")
    if tk.index(tk.Local, tk.Linear) == 0:
        partial[tk.index(tk.Group, tk.Linear)] = r


def int8_sum(be, a, wg=64):
    """``my_sum`` over a whole 1-D int8 array: group sums, then sums of the partials."""
    x = put(be, a)
    n = a.shape[0]
    while True:
        ng = -(-n // wg)
        partial = put(be, np.zeros(ng, np.int8))
        sum_groups(be, wg)(partial, x, ndrange=n)
        if ng == 1:
            return get(partial)[0]
        x, n = partial, ng


def _int8(shape):
    return RNG.integers(-128, 128, shape, dtype=np.int8)


def test_reduction_shape1(be):
    """TestReductionKernel / TestSimpleReductionFunction.test_shape1: int8 sums (wrapping in
    int8, as CuPy's ``dtype='b'``) of 2**i - 1, 2**i, 2**i + 1 elements, i = 1..9."""
    for i in range(1, 10):
        for n in (2 ** i - 1, 2 ** i, 2 ** i + 1):
            a = _int8(n)
            assert int8_sum(be, a) == a.sum(dtype=np.int8), n


@pytest.mark.parametrize("axis", [0, 1])
def test_reduction_shape2_shape3(be, axis):
    """test_shape2 / test_shape3: (2**i +- 1, 1000) summed along axis 0 and along axis 1."""
    cols = 1000
    for i in range(1, 10):
        for m in (2 ** i - 1, 2 ** i, 2 ** i + 1):
            a = _int8((m, cols))
            nout = a.shape[1 - axis]
            out = put(be, np.zeros(nout, np.int8))
            (sum_axis0 if axis == 0 else sum_axis1)(be)(out, put(be, a), ndrange=nout)
            np.testing.assert_array_equal(get(out), a.sum(axis=axis, dtype=np.int8), err_msg=str(m))


def test_reduction_shape4(be):
    """test_shape4: (512, 256*256) and (513, 256*256 + 1), both axes (smaller here: 2-core
    machine; the interpreter (33, 4097))."""
    shapes = [(33, 4097)] if interp(be) else [(512, 4096), (513, 4097)]
    for shape in shapes:
        a = _int8(shape)
        for axis, k in ((0, sum_axis0), (1, sum_axis1)):
            nout = a.shape[1 - axis]
            out = put(be, np.zeros(nout, np.int8))
            k(be)(out, put(be, a), ndrange=nout)
            np.testing.assert_array_equal(get(out), a.sum(axis=axis, dtype=np.int8))


@tk.kernel
def sum_3d_axes01(out, a: tk.Const):
    j = tk.index()
    acc = tk.int8(0)
    for p in range(a.shape[0]):
        for q in range(a.shape[1]):
            acc += a[p, q, j]
    out[j] = acc


@tk.kernel
def sum_3d_axes12(out, a: tk.Const):
    j = tk.index()
    acc = tk.int8(0)
    for p in range(a.shape[1]):
        for q in range(a.shape[2]):
            acc += a[j, p, q]
    out[j] = acc


@tk.kernel
def sum_4d_axes12(out, a: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    acc = tk.int8(0)
    for p in range(a.shape[1]):
        for q in range(a.shape[2]):
            acc += a[i, p, q, j]
    out[i, j] = acc


@tk.kernel
def sum_3d_all(out, a: tk.Const):
    acc = tk.int8(0)
    for p in range(a.shape[0]):
        for q in range(a.shape[1]):
            for r in range(a.shape[2]):
                acc += a[p, q, r]
    out[0] = acc


@pytest.mark.parametrize(("shape", "trans", "axis"), [
    ((2, 4, 3), (2, 1, 0), (0, 1)), ((2, 4, 5, 3), (3, 2, 1, 0), (1, 2)),
    ((2, 4, 3), (2, 1, 0), (1, 2)), ((0, 4, 3), (2, 1, 0), (0, 1)),
    ((2, 4, 3), (2, 1, 0), (0, 1, 2))])
def test_reduction_noncontiguous(be, shape, trans, axis):
    """TestReductionKernelNonContiguous: int8 sums over axes of a transposed (strided) array:
    head axes, middle axes, tail axes, an empty output, every axis (a 0-d result)."""
    a = _int8(shape).transpose(trans)
    want = a.sum(axis=axis, dtype=np.int8)
    k = {(3, (0, 1)): sum_3d_axes01, (3, (1, 2)): sum_3d_axes12, (4, (1, 2)): sum_4d_axes12,
         (3, (0, 1, 2)): sum_3d_all}[(a.ndim, axis)]
    out = put(be, np.zeros(max(want.size, 1) if want.ndim == 0 else want.shape, np.int8))
    k(be)(out, a if be.is_host else put(be, a), ndrange=want.shape or 1)
    np.testing.assert_array_equal(get(out).reshape(want.shape), want)


@tk.kernel
def sum_7d_keepdims(out, a: tk.Const):
    i0, i2, i5 = tk.index(tk.Global, tk.Cartesian)
    acc = tk.int8(0)
    for k1 in range(a.shape[1]):
        for k3 in range(a.shape[3]):
            for k4 in range(a.shape[4]):
                for k6 in range(a.shape[6]):
                    acc += a[i0, k1, i2, k3, k4, i5, k6]
    out[i0, 0, i2, 0, 0, i5, 0] = acc


def test_large_dims_keep_kernels(be):
    """TestLargeMultiDimReduction.test_large_dims_keep_kernels: a 7-D int8 array summed over
    axes (1, 4, 3, 6) with keepdims."""
    a = _int8((4, 3, 2, 4, 3, 2, 2))
    want = a.sum(axis=(1, 4, 3, 6), keepdims=True, dtype=np.int8)
    out = put(be, np.zeros(want.shape, np.int8))
    sum_7d_keepdims(be)(out, put(be, a), ndrange=(4, 2, 2))
    np.testing.assert_array_equal(get(out), want)
