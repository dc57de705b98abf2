"""Numba CUDA's numba/cuda/tests/cudapy/ test_math.py (every ``math`` function SPEC 3 lists, on
float32, float64 and, where upstream runs them, int64/uint64 arguments, float16 too; isnan/
isinf/isfinite on special values; pow with an int32 exponent array, ``**`` and ``%``),
test_casting.py (float -> int8..int64 and uint, int64 -> float16/32/64, literals times
float16), test_intrinsics.py (thread/block/grid indices and sizes in 1-D to 3-D, grid-stride
loops, ``selp`` as ``tk.select``, ``round`` of float32/float64 to an int, float16 scalar
comparisons, chained float16 predicates through device functions, hmax/hmin, the float16
intrinsics sin..rsqrt), test_fastmath.py (float32 functions and a func in a fastmath kernel,
a division by zero; with Warp's test_fast_math pow of a negative base) and test_exception.py
(the warp-divergence case of issue #2655, division by zero that continues, what upstream
raises at run time as compile errors), ported test by test
as tinykernels kernels. Exact where SPEC makes it exact; upstream's tolerances for the math
functions. CPU and INTERP (the backend does not matter for most); the float16 and casting cases
on CL and WEBGPU as well, where narrow types are rendered differently.

Where SPEC differs from upstream (not ported, or ported as SPEC reads):

* SPEC's ``math`` list has no exp2/gamma/lgamma/remainder/nextafter/modf/degrees/radians: a
  call of one is a ``tk.CompileError`` naming it (test_math_functions_outside_spec_are_
  compile_errors); acosh/asinh/atanh/erfc/log10 are not in SPEC's list either but are
  accepted, so they are checked as upstream checks them; no ``round(x, ndigits)``; no
  popc/brev/clz/ffs/laneid/warpsize intrinsics (popc/brev are ported with the bit operators in
  test_ported_suites_kernels.py); no ``cuda.fp16.*`` names: float16 arithmetic is the operators
  on float16 values (SPEC 3 computes them in float32 and rounds once on store, so an ``hfma``
  is not re-rounded after the product).
* ``%`` on floats is Python's floor remainder (upstream compares with ``np.fmod`` on positive
  operands only, where they agree; the port also checks negative operands against ``np.mod``).
* Numba's ``debug=True`` raises ``IndexError`` from ``ary.shape[-x]`` and ``ZeroDivisionError``
  from a float division by zero at run time, and ``raise`` in a kernel raises on the host.
  Here ``A.shape[k]`` needs a constant ``k`` and ``raise``/``assert`` are not in the language:
  each is a ``tk.CompileError`` naming the line; a float division by zero gives inf in debug
  mode too (IEEE, as NumPy), and an integer one gives 0 (docs/language.md).
* Grids are ndranges: ``cuda.grid(2)`` is ``tk.index(tk.Global, tk.Cartesian)`` with the last
  dimension fastest (SPEC 2), ``gridsize`` is ``tk.ndrange()``; the 2**32-item grid of
  issue #9229 is tested by the existing 64-bit index tests, not here (too slow on a CPU)."""
import math
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, be, run  # noqa: F401 - be, anybe: fixtures
from gen_kernels import make_kernel

_GEN = os.path.join(tempfile.gettempdir(), "tinykernels_ported_suites_numba")
FLOAT16_RTOL = np.finfo(np.float16).eps
EPS32 = float(np.finfo(np.float32).eps)



def unary(fn):
    return make_kernel(_GEN, f"math_{fn}", ["A: tk.Const", "B"], [f"B[i] = math.{fn}(A[i])"])


def binary(expr, name):
    return make_kernel(_GEN, f"math_{name}", ["A: tk.Const", "B: tk.Const", "C"], [f"C[i] = {expr}"])


# --- test_math.py ----------------------------------------------------------------------------

# (function, NumPy's, start, stop, int64/uint64 too) as upstream's unary tests call them
UNARY = [("acos", np.arccos, 0, 1, False), ("asin", np.arcsin, 0, 1, False), ("atan", np.arctan, 0, 1, True),
         ("cos", np.cos, 0, 1, True), ("sin", np.sin, 0, 1, True), ("tan", np.tan, 0, 1, True),
         ("cosh", np.cosh, 0, 1, True), ("sinh", np.sinh, 0, 1, True), ("tanh", np.tanh, 0, 1, True),
         ("exp", np.exp, 0, 1, True), ("expm1", np.expm1, 0, 1, True), ("fabs", np.fabs, -1, 1, True),
         ("log", np.log, 1, 100, True), ("log2", np.log2, 1, 100, True), ("log1p", np.log1p, 0, 1, True),
         ("sqrt", np.sqrt, 0, 1, True), ("ceil", np.ceil, 0, 1, True), ("floor", np.floor, 0, 1, True),
         ("trunc", np.trunc, 0, 1, True),
         # beyond SPEC's list, but accepted (docs/language.md): checked as upstream does
         ("acosh", np.arccosh, 1, 2, True), ("asinh", np.arcsinh, 0, 1, True), ("atanh", np.arctanh, 0, 0.9, False),
         ("log10", np.log10, 1, 100, True)]


def unary_rows(fns):
    """One kernel for many functions (one compile per dtype): ``B[k, i] = math.fns[k](A[k, i])``."""
    name = "math_rows_" + "_".join(fns)
    return make_kernel(_GEN, name, ["A: tk.Const", "B"],
                       [f"B[{r}, i] = math.{fn}(A[{r}, i])" for r, fn in enumerate(fns)])


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.uint64])
def test_math_unary(be, dt):
    """upstream's unary_template for every function of the table: 50 points of
    linspace(start, stop) (0..50 for the int arguments, which give float64 as in NumPy),
    rtol 1e-13 / 1e-6; floor/ceil/trunc/fabs/sqrt of floats exact."""
    ints = np.dtype(dt).kind in "iu"
    rows = [u for u in UNARY if u[4] or not ints]
    a = np.stack([np.linspace(1 if fn in ("log", "log2", "log10", "acosh") else 0, 50, 50) if ints
                  else np.linspace(lo, hi, 50) for fn, _, lo, hi, _ in rows]).astype(dt)
    rt = np.float64 if ints else dt
    b = run(be, unary_rows([u[0] for u in rows]), a, np.zeros(a.shape, rt), ndrange=50)[-1]
    rtol = 1e-6 if dt is np.float32 else 1e-13
    for r, (fn, npfn, *_) in enumerate(rows):
        if not ints and fn in ("ceil", "floor", "trunc", "fabs", "sqrt"):
            np.testing.assert_array_equal(b[r], npfn(a[r]), err_msg=f"{fn} {dt.__name__}")
        else:
            np.testing.assert_allclose(b[r], npfn(a[r].astype(rt)), rtol=rtol, atol=1e-300,
                                       err_msg=f"{fn} {dt.__name__}")


@pytest.mark.parametrize("fn", ["erf", "erfc"])
def test_math_erf_erfc(be, fn):
    """upstream's test_math_erf / test_math_erfc: float32 and float64 over [0, 1], against
    Python's math.erf / math.erfc in float64."""
    k = unary(fn)
    for dt, rtol in ((np.float32, 1e-6), (np.float64, 1e-13)):
        a = np.linspace(0, 1, 50).astype(dt)
        b = run(be, k, a, np.zeros(50, dt), ndrange=50)[-1]
        np.testing.assert_allclose(b, [getattr(math, fn)(float(v)) for v in a], rtol=rtol, atol=1e-300)


FP16 = [("sin", np.sin, 0), ("cos", np.cos, 0), ("exp", np.exp, 0), ("log", np.log, 1), ("log2", np.log2, 1),
        ("fabs", np.fabs, -1), ("sqrt", np.sqrt, 0), ("ceil", np.ceil, 0), ("floor", np.floor, 0),
        ("trunc", np.trunc, 0)]


def test_math_fp16(anybe):
    """test_math_fp16: float16 arguments give float16 results within float16's epsilon."""
    if not anybe.supports(np.dtype(np.float16)):
        pytest.skip(f"{anybe.name} has no float16")
    a = np.stack([np.linspace(start, 1 if start < 1 else 2, 50) for _, _, start in FP16]).astype(np.float16)
    b = run(anybe, unary_rows([f[0] for f in FP16]), a, np.zeros(a.shape, np.float16), ndrange=50)[-1]
    assert b.dtype == np.float16
    for r, (fn, npfn, _) in enumerate(FP16):
        np.testing.assert_allclose(b[r].astype(np.float64), npfn(a[r], dtype=np.float16).astype(np.float64),
                                   rtol=1e-3, atol=1e-3, err_msg=fn)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint64])
def test_math_binary(be, dtype):
    """atan2, hypot (int64/uint64 too, in float64), pow and ``**`` (floats), copysign (from
    -1), fmod and ``%`` (from 1, as upstream; and the floor sign with negative operands)."""
    res = np.float64 if np.dtype(dtype).kind in "iu" else dtype
    rtol = 1e-6 if dtype is np.float32 else 1e-13
    lo, hi = (0, 50) if np.dtype(dtype).kind in "iu" else (0, 1)
    a = np.linspace(lo, hi, 50).astype(dtype)
    fns = [("math.atan2(A[i], B[i])", "atan2", np.arctan2), ("math.hypot(A[i], B[i])", "hypot", np.hypot)]
    if np.dtype(dtype).kind == "f":
        fns += [("math.pow(A[i], B[i])", "pow", np.power), ("A[i] ** B[i]", "pow_binop", np.power),
                ("math.copysign(A[i], B[i])", "copysign", np.copysign)]
    for expr, name, npfn in fns:
        x = np.linspace(-1, 1, 50).astype(dtype) if name == "copysign" else a
        c = run(be, binary(expr, name), x, x, np.zeros(50, res), ndrange=50)[-1]
        np.testing.assert_allclose(c, npfn(x.astype(res), x.astype(res)), rtol=rtol, err_msg=name)
    if np.dtype(dtype).kind == "f":
        x = np.linspace(1, 2, 50).astype(dtype)
        y = np.concatenate([x[:25], -x[25:]]).astype(dtype)
        c = run(be, binary("math.fmod(A[i], B[i])", "fmod"), x, x, np.zeros(50, dtype), ndrange=50)[-1]
        np.testing.assert_array_equal(c, np.fmod(x, x))
        c = run(be, binary("A[i] % B[i]", "mod_binop"), y[::-1].copy(), y, np.zeros(50, dtype), ndrange=50)[-1]
        np.testing.assert_array_equal(c, np.mod(y[::-1], y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_pow_int32_exponent(be, dtype):
    """pow_template_int32: a float base to an int32 array exponent in the base's type;
    float32 overflows to inf as NumPy's cast of the float64 result does."""
    a = np.linspace(0, 25, 50).astype(dtype)
    b = np.arange(50, dtype=np.int32)
    c = run(be, binary("math.pow(A[i], B[i])", "pow_i32"), a, b, np.zeros(50, dtype), ndrange=50)[-1]
    with np.errstate(over="ignore"):
        want = np.power(a.astype(np.float64), b).astype(dtype)
    np.testing.assert_allclose(c, want, rtol=1e-6 if dtype is np.float32 else 1e-13)


@pytest.mark.parametrize("fn", ["isnan", "isinf", "isfinite"])
def test_math_isnan_isinf_isfinite(be, fn):
    """unary_bool_template on float32/float64/int32/int64 and unary_bool_special_values:
    zero, a subnormal, tiny, 0.5, 1, max, inf, nan and their negatives, into int32."""
    k = make_kernel(_GEN, f"math_{fn}_i32", ["A: tk.Const", "B"], [f"B[i] = math.{fn}(A[i])"])
    npfn = getattr(np, fn)
    for dt in (np.float32, np.float64, np.int32, np.int64):
        a = np.linspace(0, 49, 50).astype(dt)
        b = run(be, k, a, np.zeros(50, np.int32), ndrange=50)[-1]
        np.testing.assert_array_equal(b, npfn(a))
    for dt in (np.float32, np.float64):
        fi = np.finfo(dt)
        a = np.array([0.0, fi.tiny / 4, fi.tiny, 0.5, 1.0, fi.max, np.inf, np.nan], dt)
        for x in (a, -a):
            b = run(be, k, x, np.zeros(x.size, np.int32), ndrange=x.size)[-1]
            np.testing.assert_array_equal(b, npfn(x))


@pytest.mark.parametrize("fn", ["exp2", "gamma", "lgamma", "remainder", "nextafter", "modf", "degrees", "radians"])
def test_math_functions_outside_spec_are_compile_errors(fn):
    args = "A[i], A[i]" if fn in ("remainder", "nextafter") else "A[i]"
    k = make_kernel(_GEN, f"math_out_{fn}", ["A: tk.Const", "B"], [f"B[i] = math.{fn}({args})"])
    with pytest.raises(tk.CompileError, match=rf"math_out_{fn}.*:3:.*cannot call '{fn}'"):
        k(tk.CPU())(np.ones(2), np.zeros(2), ndrange=2)


# --- test_casting.py -------------------------------------------------------------------------

def test_float_to_int_casts(anybe):
    """12.3 and -12.3 from float16/32/64 truncate toward zero to every int type, as int() and
    np.int8() (the unsigned targets take 12.3 only); one kernel per source type."""
    tos = [t for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
           if anybe.supports(np.dtype(t))]
    k = make_kernel(_GEN, "to_" + "_".join(tos), ["arg: tk.Const"] + [f"r_{t}" for t in tos],
                    [f"r_{t}[i] = tk.{t}(arg[i])" for t in tos])
    for fromty in (np.float16, np.float32, np.float64):
        if not anybe.supports(np.dtype(fromty)):
            continue
        arg = np.array([12.3, -12.3], fromty)
        res = run(anybe, k, arg, *[np.zeros(2, t) for t in tos], ndrange=2)[1:]
        for t, r in zip(tos, res):
            n = 1 if t.startswith("u") else 2
            np.testing.assert_array_equal(r[:n], [12, -12][:n], err_msg=f"{fromty.__name__} -> {t}")
            np.testing.assert_array_equal(r[:n], arg[:n].astype(t))


def test_int_to_float_and_literals_times_float16(anybe):
    """to_float16/32/64 of int64 321 (x * 0.5, x / 2, x / 2), and np.float16(x) times the int
    literal 2 and the float literal 2.5 (weak: the result stays float16)."""
    k = make_kernel(_GEN, "int_to_float", ["arg: tk.Const", "r16", "r32", "r64", "l16"],
                    ["r16[i] = tk.float16(arg[i]) * tk.float16(0.5)",
                     "r32[i] = tk.float32(arg[i]) / tk.float32(2)",
                     "r64[i] = r64.dtype(arg[i]) / r64.dtype(2)",
                     "l16[2 * i] = tk.float16(arg[i]) * 2",
                     "l16[2 * i + 1] = tk.float16(arg[i]) * 2.5"])
    f64 = np.float64 if anybe.supports_float64 else np.float32
    it = np.int64 if anybe.supports(np.dtype(np.int64)) else np.int32
    if not anybe.supports(np.dtype(np.float16)):
        pytest.skip(f"{anybe.name} has no float16 arrays")
    arg = np.array([321, -7, 2049], it)
    r16, r32, r64, l16 = run(anybe, k, arg, np.zeros(3, np.float16), np.zeros(3, np.float32), np.zeros(3, f64),
                             np.zeros(6, np.float16), ndrange=3)[1:]
    np.testing.assert_array_equal(r16, np.float16(arg) * np.float16(0.5))
    np.testing.assert_array_equal(r32, np.float32(arg) / np.float32(2))
    np.testing.assert_array_equal(r64, (np.float64(arg) / 2).astype(f64))
    np.testing.assert_array_equal(l16[0::2], np.float16(arg) * np.float16(2))
    np.testing.assert_array_equal(l16[1::2], (np.float16(arg).astype(np.float32) * np.float32(2.5)).astype(np.float16))


# --- test_intrinsics.py ----------------------------------------------------------------------

@tk.kernel
def fill_threadidx(ary):
    ary[tk.index()] = tk.index(tk.Local, tk.Linear)


@tk.kernel
def fill3d_threadidx(ary):
    i, j, k = tk.index(tk.Local, tk.Cartesian)
    ary[i, j, k, 0] = i + 1
    ary[i, j, k, 1] = j + 1
    ary[i, j, k, 2] = k + 1


@tk.kernel
def simple_grid2d(ary):
    i, j = tk.index(tk.Global, tk.Cartesian)
    ary[i, j] = i + j


@tk.kernel
def simple_gridsize2d(ary):
    i, j = tk.index(tk.Global, tk.Cartesian)
    x, y = tk.ndrange()
    gx, gy = tk.ngroups()
    bx, by = tk.groupsize()
    if i == 0 and j == 0:
        ary[0] = x
        ary[1] = y
        ary[2] = gx * bx
        ary[3] = gy * by


@tk.kernel
def intrinsic_forloop_step(c, nx: tk.constexpr, ny: tk.constexpr):
    sy, sx = tk.index(tk.Global, tk.Cartesian)
    height, width = c.shape
    for x in range(sx, width, nx):
        for y in range(sy, height, ny):
            c[y, x] = x + y


def test_thread_and_grid_indices(be):
    """simple_threadidx / fill_threadidx / fill3d_threadidx / simple_grid2d / gridsize2d /
    intrinsic_forloop_step (a grid-stride loop over an array 3x the grid)."""
    out = run(be, fill_threadidx, np.zeros(12, np.int32), ndrange=12, workgroupsize=4)[0]
    np.testing.assert_array_equal(out, np.tile(np.arange(4), 3))
    out = run(be, fill3d_threadidx, np.zeros((2, 3, 4, 3), np.int32), ndrange=(2, 3, 4), workgroupsize=(2, 3, 4))[0]
    i, j, k = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(out, np.stack([i + 1, j + 1, k + 1], -1))
    out = run(be, simple_grid2d, np.zeros((4, 6), np.int32), ndrange=(4, 6), workgroupsize=(2, 3))[0]
    np.testing.assert_array_equal(out, np.add.outer(np.arange(4), np.arange(6)))
    out = run(be, simple_gridsize2d, np.zeros(4, np.int32), ndrange=(15, 18), workgroupsize=(3, 6))[0]
    np.testing.assert_array_equal(out, [15, 18, 15, 18])
    out = run(be, intrinsic_forloop_step, np.full((45, 36), -1, np.int32), 12, 15, ndrange=(15, 12))[0]
    np.testing.assert_array_equal(out, np.add.outer(np.arange(45), np.arange(36)))


@tk.kernel
def branching_with_ifs(a, b, c: tk.Const):
    i = tk.index()
    if a[i] > 4:
        if b % 2 == 0:
            a[i] = c[i]
        else:
            a[i] = 13
    else:
        a[i] = 3


@tk.kernel
def branching_with_selps(a, b, c: tk.Const):
    i = tk.index()
    inner = tk.select(b % 2 == 0, c[i], 13)
    a[i] = tk.select(a[i] > 4, inner, 3)


def test_selp(be):
    c = np.full(32, 17, np.int64)
    for b, fill in ((6, 17), (7, 13)):
        want = np.full(32, fill, np.int64)
        want[:5] = 3
        for k in (branching_with_ifs, branching_with_selps):
            a = run(be, k, np.arange(32, dtype=np.int64), b, c, ndrange=32)[0]
            np.testing.assert_array_equal(a, want)


@tk.kernel
def simple_round(ary, c):
    ary[0] = round(c)


@tk.kernel
def round_array(ary, c: tk.Const):
    i = tk.index()
    ary[i] = round(c[i])


def test_round_f4_f8(anybe):
    """round() of float32/float64 scalars and arrays to an int64: Python's half to even."""
    vals = [-3.0, -2.5, -2.25, -1.5, 1.5, 2.25, 2.5, 2.75, 0.5, -0.5]
    it = np.int64 if anybe.supports(np.dtype(np.int64)) else np.int32
    for dt in (np.float32, np.float64):
        if not anybe.supports(np.dtype(dt)):
            continue
        out = run(anybe, round_array, np.zeros(len(vals), it), np.array(vals, dt), ndrange=len(vals))[0]
        np.testing.assert_array_equal(out, [round(v) for v in vals])
        if anybe.name in ("CPU", "INTERP") or str(anybe).startswith("tk.CPU"):
            for v in vals:
                assert run(anybe, simple_round, np.zeros(1, it), dt(v), ndrange=1)[0][0] == round(v)


@tk.kernel
def fp16_compare(r, a, b):
    r[0] = a == b
    r[1] = a != b
    r[2] = a >= b
    r[3] = a > b
    r[4] = a <= b
    r[5] = a < b
    r[6] = max(a, b)
    r[7] = min(a, b)


@tk.func
def hlt_func_1(x, y):
    return x < y


@tk.func
def hlt_func_2(x, y):
    return x < y


@tk.kernel
def multiple_hcmp(r, a, b, c):
    r[0] = hlt_func_1(a, b) and hlt_func_2(b, c)
    r[1] = hlt_func_1(a, b) and b < c
    r[2] = hlt_func_1(a, b) and c >= b
    r[3] = a < b and b < c
    r[4] = a < b and c >= b
    r[5] = a < b < c
    r[6] = hlt_func_1(c, b) or c < a


def test_fp16_comparisons_hmax_hmin(anybe):
    """test_fp16_comparison / test_hmax / test_hmin (np.float16 scalar arguments are strong
    float16) and test_multiple_float16_comparisons."""
    if not anybe.supports(np.dtype(np.float16)):
        pytest.skip(f"{anybe.name} has no float16")
    h = np.float16
    for a, b in ((h(3), h(3)), (h(3), h(4)), (h(3), h(2)), (h(5), h(4))):
        r = run(anybe, fp16_compare, np.zeros(8, np.float16), a, b, ndrange=1)[0]
        np.testing.assert_array_equal(r, [a == b, a != b, a >= b, a > b, a <= b, a < b, max(a, b), min(a, b)])
    r = run(anybe, multiple_hcmp, np.zeros(7, np.bool_), h(2), h(3), h(4), ndrange=1)[0]
    np.testing.assert_array_equal(r, [True] * 6 + [False])


@tk.kernel
def fp16_intrinsics(r, x: tk.Const):
    i = tk.index()
    v = x[i]
    r[0, i] = math.sin(v)
    r[1, i] = math.cos(v)
    r[2, i] = math.log(v)
    r[3, i] = math.log2(v)
    r[4, i] = math.sqrt(v)
    r[5, i] = math.ceil(v)
    r[6, i] = math.floor(v)
    r[7, i] = 1 / v
    r[8, i] = math.trunc(v)
    r[9, i] = round(v)
    r[10, i] = tk.rsqrt(v)
    r[11, i] = math.exp(x[i] * 0.001)


def test_fp16_intrinsics_common(anybe):
    """test_fp16_intrinsics_common: 32 random float16 values in [1, 65505), each function
    within float16's epsilon of NumPy's float16 result (rint as round: half to even). The
    literal in ``x * 0.001`` is weak, so it becomes float16 first (NEP 50), and the product
    stays in float32 until the store (SPEC 3)."""
    if not anybe.supports(np.dtype(np.float16)):
        pytest.skip(f"{anybe.name} has no float16")
    rng = np.random.default_rng(1)
    x = rng.integers(1, 65505, 32).astype(np.float16)
    r = run(anybe, fp16_intrinsics, np.zeros((12, 32), np.float16), x, ndrange=32)[0]
    f = np.float16
    with np.errstate(over="ignore"):
        want = [np.sin(x, dtype=f), np.cos(x, dtype=f), np.log(x, dtype=f), np.log2(x, dtype=f), np.sqrt(x, dtype=f),
                np.ceil(x), np.floor(x), np.reciprocal(x, dtype=f), np.trunc(x), np.rint(x),
                (1 / np.sqrt(x.astype(np.float32))).astype(f), np.exp(x.astype(np.float32) * np.float32(f(0.001))).astype(f)]
    for k, w in enumerate(want):
        atol = 2e-3 if k < 2 else 0      # sin/cos of arguments up to 65504 (float32 inside)
        np.testing.assert_allclose(r[k].astype(np.float64), w.astype(np.float64), rtol=FLOAT16_RTOL, atol=atol,
                                   err_msg=f"row {k}")


# --- test_fastmath.py (and Warp's test_fast_math) --------------------------------------------

@tk.func
def fm_div(a, b):
    return a / b


@tk.kernel(fastmath=True)
def fastmath_funcs(r, x: tk.Const, y: tk.Const, e):
    i = tk.index()
    r[0, i] = math.cos(x[i])
    r[1, i] = math.sin(x[i])
    r[2, i] = math.tan(x[i])
    r[3, i] = math.tanh(x[i])
    r[4, i] = math.exp(x[i])
    r[5, i] = math.log(x[i])
    r[6, i] = math.log10(x[i])
    r[7, i] = math.log2(x[i])
    r[8, i] = math.pow(x[i], y[i])
    r[9, i] = x[i] / y[i]
    r[10, i] = fm_div(x[i], y[i])                               # test_device_fastmath_propagation
    r[11, i] = math.pow(-2.0 * x[i] / x[i], e)                  # Warp's test_pow: pow(-2, 2) == 4
    r[12, i] = math.isnan(math.pow(-2.0 * x[i] / x[i], 0.5))    # a NaN stays one
    r[13, i] = x[i] / (y[i] - y[i])                             # test_divf_exception: inf, no error
    r[14, i] = math.isinf(x[i] / (y[i] - y[i]))
    r[15, i] = math.isnan(x[i] * 0.0 / (y[i] - y[i]))


def test_fastmath_float32_functions(anybe):
    """A ``fastmath=True`` kernel (SPEC 1: reassociation and contraction, and the backend's
    faster math functions) still gives float32 results within a few ulp of NumPy's float64
    ones, its @tk.funcs too, keeps infinities and NaNs (``isnan``/``isinf`` are not folded
    away), and a division by zero is inf (upstream: no ZeroDivisionError)."""
    n = 32
    x = np.linspace(0.1, 3, n).astype(np.float32)
    y = np.linspace(0.5, 2, n).astype(np.float32)
    r = run(anybe, fastmath_funcs, np.zeros((16, n), np.float32), x, y, 2.0, ndrange=n)[0]
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    want = [np.cos(xd), np.sin(xd), np.tan(xd), np.tanh(xd), np.exp(xd), np.log(xd), np.log10(xd), np.log2(xd),
            xd ** yd, xd / yd, xd / yd]
    for k, w in enumerate(want):
        np.testing.assert_allclose(r[k], w, rtol=4 * EPS32, atol=4 * EPS32, err_msg=f"row {k}")
    np.testing.assert_array_equal(r[11], 4.0)
    np.testing.assert_array_equal(r[12], 1)
    assert np.isposinf(r[13]).all()
    np.testing.assert_array_equal(r[14:], 1)


# --- test_exception.py -----------------------------------------------------------------------

@tk.kernel
def problematic(x, y):
    tid = tk.index(tk.Local, tk.Linear)
    ntid = tk.groupsize()[0]
    if tid > 12:
        for i in range(ntid):
            y[i] += x[i] // y[i]
    tk.synchronize()
    if tid < 17:
        for i in range(ntid):
            x[i] += x[i] // y[i]


@tk.kernel
def oracle(x, y):
    tid = tk.index(tk.Local, tk.Linear)
    ntid = tk.groupsize()[0]
    if tid > 12:
        for i in range(ntid):
            if y[i] != 0:
                y[i] += x[i] // y[i]
    tk.synchronize()
    if tid < 17:
        for i in range(ntid):
            if y[i] != 0:
                x[i] += x[i] // y[i]


def test_raise_causing_warp_diverge(be):
    """Issue #2655: divergent branches on either side of a barrier, with racing updates. Only
    deterministic with one work item per update order, so as upstream the test compares the
    kernel with its oracle launched the same way, and with NumPy when items run in order."""
    n = 32
    x0 = 1.0 / (np.arange(n) + 0.01)
    gx, gy = run(be, problematic, x0, x0, ndrange=n, workgroupsize=n)
    ex, ey = run(be, oracle, x0, x0, ndrange=n, workgroupsize=n)
    np.testing.assert_allclose(gx, ex)
    np.testing.assert_allclose(gy, ey)
    assert np.isfinite(gx).all() and np.isfinite(gy).all()


@tk.kernel
def zero_division(r, x: tk.Const, y: tk.Const, ri, xi: tk.Const):
    r[0] = y[0] / x[0]
    r[1] = y[0]
    ri[0] = xi[1] // xi[0]
    ri[1] = xi[1] % xi[0]
    ri[2] = 7


@pytest.mark.parametrize("debug", [False, True])
def test_no_zero_division_error(debug):
    """A float division by zero gives inf and the kernel continues (upstream's debug=False;
    with debug on here too), an integer one gives 0 (docs/language.md)."""
    be = tk.CPU(debug=debug)
    r, _, _, ri, _ = run(be, zero_division, np.zeros(2), np.zeros(1), np.ones(1), np.full(3, -1, np.int64),
                         np.array([0, 5], np.int64), ndrange=1)
    assert np.isposinf(r[0]) and r[1] == 1
    np.testing.assert_array_equal(ri, [0, 0, 7])


def test_run_time_raises_are_compile_errors():
    """test_exception / test_user_raise: what Numba raises at run time in debug mode is
    refused when the kernel compiles, naming the line."""
    k = make_kernel(_GEN, "foo_shape", ["ary"], ["x = tk.index(tk.Local, tk.Linear)", "if x == 2:",
                                                 "    ary[0] = ary.shape[-x]"])
    with pytest.raises(tk.CompileError, match=r"foo_shape.*:5:.*constant integer"):
        k(tk.CPU())(np.zeros(2), ndrange=3)
    k = make_kernel(_GEN, "foo_raise", ["do_raise"], ["if do_raise:", "    raise ValueError"])
    with pytest.raises(tk.CompileError, match=r"foo_raise.*:4:.*'raise' statements are not supported"):
        k(tk.CPU())(False, ndrange=1)
    k = make_kernel(_GEN, "foo_assert", ["a"], ["assert a[0] == 0"])
    with pytest.raises(tk.CompileError, match=r"foo_assert.*:3:.*'assert' statements are not supported"):
        k(tk.Interpreter())(np.zeros(1), ndrange=1)
