"""CUDA.jl's device-intrinsics tests (test/core/device/intrinsics/ math.jl and atomics.jl) and
the test/core/execution.jl cases test_ported_suites_ka2.py does not have, ported test by test
as tinykernels kernels:

* math.jl: log10; ``x .^ y`` with float exponents of both signs and with int32/int64 exponent
  arrays (the accuracy must not depend on the exponent's width, and both widths agree bit for
  bit); min/max of float32 with float64; isinf/isnan of Inf/NaN in float16/32/64; exp and
  expm1 of positive and negative values; ``rem``, ``rem(..., RoundNearest)`` and ``mod`` by 2 in
  float16/32/64; rsqrt of 4; fma (exactly rounded, against an exact rational reference) and
  muladd (two roundings, as NumPy); the round-to-nearest column of the "directed rounding"
  cases (ties of fma/add/sub at half an ulp, inexact mul and div); erf; abs/abs2/exp/log/
  log10 in every float type; the fastmath cases (cos, log1p, max, a power with an int32 or
  int exponent, inv, float64 division); byte_perm and dp4a written as ``@tk.func``s with
  shifts, masks and int8/uint8 casts against upstream's reference definitions; inv; the
  NaN cases of min/max (#2111) and the signed zeros.
* atomics.jl: the low-level and/or/xor cases (masks built in a loop, one through a float
  ``b /= 2``), the high-level ``@atomic a[1] = f(a[1], x)`` forms (add, sub, mul, div, and,
  or, xor, max, min, shift) written as compare-and-swap loops on ``tk.atomic_cas``, the
  ``@atomic`` of a NaN (the loop terminates because the swap compares bits), atomic_inc and
  atomic_dec with CUDA's wrap-around definitions written as CAS loops (known answers 255 and
  257), and the two shared-memory issues (#311 a local counter; #558 atomics on local
  elements read from neighbouring ones).
* intrinsics.jl's "llvm ir barrier int"/"bool" (sync_threads_count/and/or as group
  reductions) and memory.jl's "static shmem" (two shared arrays, a reversal through one, for
  int64, float16 and float32, one per element size) and "dynamic shmem consisting of
  multiple arrays" (one shared array split in two halves; SPEC has no dynamic shared memory,
  the halves are offsets into a static one).
* execution.jl: "mapreduce (full)" and "(reduced)" (a tree reduction in shared memory whose
  ``while offset > 0`` loop holds a barrier: uniform, as offset derives from the group size),
  "closures" and "captured values", "splatting", "keyword arguments" (of a device function)
  and "varargs" (a CompileError: kernels take plain positional parameters).

Exact against NumPy or Python where SPEC makes it exact (docs/language.md: ``+ - * /``, fma,
sqrt, fmod, floor, the atomics); upstream's approximate comparisons (``testf`` is ``isapprox``
against Julia on the CPU) for the transcendental functions. CPU and INTERP for what does not
depend on the backend; the rounding cases, the bit manipulation and the atomics also on
INTERP:CHECK, CL and WEBGPU (float64 and 64-bit integers skip there: SPEC 4).

Where SPEC differs from upstream (ported as SPEC reads, or not ported):

* No exp2, exp10, angle, loggamma or complex numbers in SPEC's ``math`` list: not ported (the
  complex ``exp`` of #1085 neither). The float16 exp/log/log2 over every float16 value are in
  test_ported_suites_cts.py (all 65,536 inputs with the CTS bounds) and not repeated here.
* The directed-rounding intrinsics (``add_rz``, ``fma_rp``, ...) and the PTX/``@filecheck``
  pins have no counterpart (SPEC has round-to-nearest only and no PTX inspection): the
  ``_rn`` column is checked, the others are not ported.
* ``min``/``max`` are Python's builtins (docs/language.md): with a NaN the result depends on
  the order, so ``min(nan, inf)`` and ``max(nan, -inf)`` are NaN as in #2111 but
  ``min(inf, nan)`` is inf; ``min(0.0, -0.0)`` is ``0.0`` (Python keeps the first of equal
  values) where Julia orders the signed zeros. The port checks Python's results.
* ``rem(x, 2, RoundNearest)`` (IEEE remainder) is not in SPEC; it is written as
  ``x - 2 * round(x / 2)`` (``round`` is half to even, as RoundNearest).
* There is no ``@atomic`` macro (its expansion errors are Julia syntax checks) and no
  atomic_inc/dec, mul, div or shift: each is a CAS loop in the kernel, whose exit compares the
  bits (``tk.bitcast``) so that a NaN ends it as upstream's does; integer ``a / 2`` gives a
  float (SPEC 3), so the integer ``div`` case uses ``//``. The int16/uint16/float16/bfloat16
  variants (sm_70 in upstream) are not SPEC atomic types.
* byte_perm and dp4a are not intrinsics here; the ports compute them with SPEC's operators
  (no PTX instruction selection to check).
* execution.jl's dynamic parallelism, cooperative groups, clusters, traps, PTX/external
  kernels, struct conversions (Adapt) and parameter-space limits have no counterpart.
* Upstream runs every integer and float type; here the CAS loops run one signed and one
  unsigned width of each size (int32, uint64) and both floats, for the CI budget.
* ``@cuda threads=1024`` becomes a smaller ndrange where the count does not matter to the
  answer (256 on the interpreter's compare-and-swap loops, which run item by item)."""
import math
import os
import tempfile
from fractions import Fraction

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, be, run as _run  # noqa: F401 - be, anybe: fixtures
from gen_kernels import make_kernel

_GEN = os.path.join(tempfile.gettempdir(), "tinykernels_ported_suites_cudajl")
FLOATS = [np.float16, np.float32, np.float64]


def run(be, k, *args, outs=None, **kw):
    """the first ``outs`` arrays after the launch (the kernel's outputs come first; default:
    all arrays but the last, the kernels' one input, unless the launch has a single array)"""
    res = _run(be, k, *args, **kw)
    return res[:outs] if outs else (res if len(res) == 1 else res[:-1])


def kernel(name, params, body, **kw):
    return make_kernel(_GEN, name, params, body, **kw)


def need(be, *dts):
    for dt in dts:
        if not be.supports(dt):
            pytest.skip(f"{be.name} has no {np.dtype(dt).name} (SPEC 4)")


def round_exact(q: Fraction, dt):
    """The value of ``dt`` nearest to the rational ``q`` (ties to even): one rounding."""
    c = np.array(float(q), dtype=np.float64).astype(dt)
    cands = [c, np.nextafter(c, dt(np.inf)), np.nextafter(c, dt(-np.inf))]
    best = None
    for v in cands:
        if not np.isfinite(v):
            continue
        d = abs(Fraction(float(v)) - q)
        even = (int(np.array(v).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize])) & 1) == 0
        key = (d, not even)
        if best is None or key < best[0]:
            best = (key, v)
    return best[1]


# ----------------------------------------------------------------------------------- math.jl

@tk.kernel
def log10_k(y, x: tk.Const):
    i = tk.index()
    y[i] = math.log10(x[i])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_log10(be, dt):
    """@testset "log10": log10.(T[100]) is 2, within upstream's isapprox (the interpreter uses
    NumPy's functions, and NumPy's float32 log10(100) is 2.0000002, one ulp above)"""
    (y,) = run(be, log10_k, np.zeros(1, dt), np.array([100], dt), ndrange=1)
    np.testing.assert_allclose(y[0], 2, rtol=np.finfo(dt).eps)


@tk.kernel
def pow_k(y, x: tk.Const, e: tk.Const):
    i = tk.index()
    y[i] = x[i] ** e[i]


@pytest.mark.parametrize("et", FLOATS)
def test_pow_float_exponents_of_both_signs(be, et):
    """@testset "pow": rand(Float32) .^ rand(T) and .^ -rand(T), T = Float16/32/64; the result
    has the promoted type (float64 only with a float64 exponent, NEP 50)"""
    rng = np.random.default_rng(11)
    x = rng.random(16, dtype=np.float32) + np.float32(0.01)
    e = rng.random(16).astype(et)
    rt = np.result_type(np.float32, et)
    for sgn in (1, -1):
        ee = (sgn * e).astype(et)
        (y,) = run(be, pow_k, np.zeros(16, rt), x, ee, ndrange=16, outs=1)
        want = np.power(x.astype(np.float64), ee.astype(np.float64))
        np.testing.assert_allclose(y, want, rtol=4 * np.finfo(rt).eps)


def test_pow_integer_exponent_accuracy(anybe):
    """"integer exponent ($T, $I)": x .^ n with n up to 5000 and -3, within 8 eps of the exact
    power (__nv_powi drifted by 1500 ulp for Int32); stored into a T array; on every backend,
    as each has its own pow"""
    for ft in (np.float32, np.float64):
        for it in (np.int32, np.int64):
            if not (anybe.supports(ft) and anybe.supports(it)):
                continue
            x = np.array([1.001, 0.9, 1.1, 1.0001, 2, 0.5], ft)
            n = np.array([500, 200, 30, 5000, 7, -3], it)
            (y,) = run(anybe, pow_k, np.zeros(6, ft), x, n, ndrange=6, outs=1)
            want = [float(Fraction(float(a)) ** int(k)) for a, k in zip(x, n)]
            np.testing.assert_allclose(y, want, rtol=8 * np.finfo(ft).eps)


@pytest.mark.parametrize("ft", [np.float32, np.float64])
def test_pow_integer_exponent_widths_agree(be, ft):
    """"integer exponent width agreement": x .^ Int32.(n) == x .^ n, bit for bit"""
    x = np.array([1.001, 0.9, 1.1, 1.0001], ft)
    n = np.array([500, 200, 30, 5000], np.int64)
    (a,) = run(be, pow_k, np.zeros(4, ft), x, n.astype(np.int32), ndrange=4, outs=1)
    (b,) = run(be, pow_k, np.zeros(4, ft), x, n, ndrange=4, outs=1)
    assert a.tobytes() == b.tobytes()


@tk.kernel
def minmax_k(lo, hi, x: tk.Const, y: tk.Const):
    i = tk.index()
    lo[i] = min(x[i], y[i])
    hi[i] = max(x[i], y[i])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_min_max_mixed_float_types(be, dt):
    """@testset "min/max": max.(x, y) and min.(x, y) with x Float32 and y T; the result has the
    promoted type and is one of the operands exactly"""
    rng = np.random.default_rng(12)
    x, y = rng.random(8, dtype=np.float32), rng.random(8).astype(dt)
    rt = np.result_type(x, y)
    lo, hi = run(be, minmax_k, np.zeros(8, rt), np.zeros(8, rt), x, y, ndrange=8, outs=2)
    np.testing.assert_array_equal(lo, np.minimum(x, y))
    np.testing.assert_array_equal(hi, np.maximum(x, y))


def test_min_max_nan_and_signed_zeros_follow_python(be):
    """#2111 ("min/max should return NaN") and "min/max should order signed zeros", as SPEC
    reads min/max (Python's builtins): NaN first gives NaN, NaN second gives the other value;
    of two equal zeros the first is kept"""
    for dt in (np.float32, np.float64):
        x = np.array([np.nan, np.inf, np.nan, -np.inf, 0.0, -0.0], dt)
        y = np.array([np.inf, np.nan, -np.inf, np.nan, -0.0, 0.0], dt)
        lo, hi = run(be, minmax_k, np.zeros(6, dt), np.zeros(6, dt), x, y, ndrange=6, outs=2)
        want_lo = np.array([min(a, b) for a, b in zip(x.tolist(), y.tolist())], dt)
        want_hi = np.array([max(a, b) for a, b in zip(x.tolist(), y.tolist())], dt)
        assert lo.tobytes() == want_lo.tobytes() and hi.tobytes() == want_hi.tobytes()
        assert np.isnan(lo[0]) and np.isnan(hi[2]) and lo[1] == np.inf and hi[3] == -np.inf
        assert np.signbit(lo[4]) == np.signbit(hi[4]) == False  # noqa: E712 - min(0.0, -0.0) is 0.0


@tk.kernel
def isinf_isnan_k(a, b, x: tk.Const):
    i = tk.index()
    a[i] = math.isinf(x[i])
    b[i] = math.isnan(x[i])


@pytest.mark.parametrize("dt", FLOATS)
def test_isinf_isnan(be, dt):
    """@testset "isinf"/"isnan" of Inf32, Inf, NaN16, NaN32, NaN (and their negatives)"""
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 1.0, 0.0], dt)
    a, b = run(be, isinf_isnan_k, np.zeros(6, np.bool_), np.zeros(6, np.bool_), x, ndrange=6)
    np.testing.assert_array_equal(a, np.isinf(x))
    np.testing.assert_array_equal(b, np.isnan(x))


@tk.kernel
def exp_expm1_k(a, b, x: tk.Const):
    i = tk.index()
    a[i] = math.exp(x[i])
    b[i] = math.expm1(x[i])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_exp_expm1_of_both_signs(be, dt):
    """for op in (exp, expm1): op.(rand(T)) and op.(-rand(T)), approximately"""
    rng = np.random.default_rng(13)
    x = rng.random(8).astype(dt)
    x = np.concatenate([x, -x])
    a, b = run(be, exp_expm1_k, np.zeros(16, dt), np.zeros(16, dt), x, ndrange=16)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(a, np.exp(x64), rtol=4 * np.finfo(dt).eps)
    np.testing.assert_allclose(b, np.expm1(x64), rtol=4 * np.finfo(dt).eps)


@tk.kernel
def rem_mod_k(r, rn, m, a: tk.Const):
    i = tk.index()
    r[i] = math.fmod(a[i], 2)
    rn[i] = a[i] - 2 * round(a[i] / 2)
    m[i] = a[i] % 2


@pytest.mark.parametrize("dt", FLOATS)
def test_mod_and_rem(be, dt):
    """@testset "mod and rem": rem.(a, T(2)), rem.(a, T(2), RoundNearest), mod.(a, T(2)) of
    T[0, 1, 1.5, 2, -1], exact (the remainders of these are representable)"""
    a = np.array([0, 1, 1.5, 2, -1], dt)
    r, rn, m = run(be, rem_mod_k, *(np.zeros(5, dt) for _ in range(3)), a, ndrange=5)
    np.testing.assert_array_equal(r, np.fmod(a, dt(2)))
    np.testing.assert_array_equal(rn, [0, 1, -0.5, 0, -1])   # Julia's rem(a, 2, RoundNearest)
    np.testing.assert_array_equal(m, np.mod(a, dt(2)))
    assert np.signbit(r[3]) == np.signbit(np.fmod(dt(2), dt(2)))


@tk.kernel
def rsqrt_k(a):
    a[0] = tk.rsqrt(a[0])


@pytest.mark.parametrize("dt", [np.float16, np.float32])
def test_rsqrt_of_four(anybe, dt):
    """@testset "rsqrt" (GPUCompiler.jl#173): rsqrt(T[4]) == [0.5], in a one-item kernel"""
    (a,) = run(anybe, rsqrt_k, np.array([4], dt), ndrange=1)
    assert a[0] == 0.5


@tk.kernel
def fma_muladd_k(f, m, x: tk.Const, y: tk.Const, z: tk.Const):
    i = tk.index()
    f[i] = tk.fma(x[i], y[i], z[i])
    m[i] = x[i] * y[i] + z[i]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_and_muladd(anybe, dt):
    """@testset "fma" and "muladd": fma is x*y+z rounded once (exact against a rational
    reference), muladd here is unfused (SPEC: no contraction), so it is NumPy's x*y+z; with
    rand and -rand operands as upstream"""
    need(anybe, dt)
    rng = np.random.default_rng(14)
    n = 64
    x, y, z = (rng.random(n).astype(dt) for _ in range(3))
    y[n // 2:], z[n // 2:] = -y[n // 2:], -z[n // 2:]
    f, m = run(anybe, fma_muladd_k, np.zeros(n, dt), np.zeros(n, dt), x, y, z, ndrange=n, outs=2)
    want = [round_exact(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)), dt)
            for a, b, c in zip(x, y, z)]
    assert f.tobytes() == np.array(want, dt).tobytes()
    assert m.tobytes() == (x * y + z).tobytes()


def test_fma_float16_rounds_once_from_float32(anybe):
    """fma of float16 operands (upstream's Float16 column): SPEC computes float16 in float32 and
    rounds on store, so the result is the float32 fma rounded to float16"""
    rng = np.random.default_rng(15)
    x, y, z = (rng.random(64).astype(np.float16) for _ in range(3))
    y[32:], z[32:] = -y[32:], -z[32:]
    f, m = run(anybe, fma_muladd_k, np.zeros(64, np.float16), np.zeros(64, np.float16), x, y, z, ndrange=64, outs=2)
    f32 = [round_exact(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)), np.float32)
           for a, b, c in zip(x, y, z)]
    np.testing.assert_array_equal(f, np.array(f32, np.float32).astype(np.float16))
    want_m = (x.astype(np.float32) * y.astype(np.float32) + z.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(m, want_m)


@tk.kernel
def rn_ops_k(out, x: tk.Const, y: tk.Const):
    out[0] = tk.fma(x[0], x[0], y[0])      # fma_rn(1, 1, 2^-prec): a tie, to even
    out[1] = x[0] + y[1]                    # add_rn(1, 2^-(prec+1))
    out[2] = x[0] - y[1]                    # sub_rn(1, 2^-(prec+1))
    out[3] = y[2] * y[3]                    # mul_rn(1/10, 3)
    out[4] = x[0] / y[3]                    # div_rn(1, 3)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_directed_rounding_rn_column(anybe, dt):
    """@testset "directed rounding", the _rn results: ties at half an ulp go to even (1.0),
    mul/div are NumPy's correctly rounded results"""
    need(anybe, dt)
    prec = np.finfo(dt).nmant + 1
    x = np.array([1], dt)
    y = np.array([2.0 ** -prec, 2.0 ** -(prec + 1), dt(1) / dt(10), 3], dt)
    (out,) = run(anybe, rn_ops_k, np.zeros(5, dt), x, y, ndrange=1, outs=1)
    assert out[0] == 1 and out[1] == 1 and out[2] == 1
    assert out.tobytes() == np.array([1, 1, 1, y[2] * y[3], dt(1) / dt(3)], dt).tobytes()


@tk.kernel
def erf_k(y, x: tk.Const):
    i = tk.index()
    y[i] = math.erf(x[i])


def test_erf_float32(be):
    """@testset "erf" (SpecialFunctions.erf of Float32[1.0])"""
    (y,) = run(be, erf_k, np.zeros(1, np.float32), np.array([1.0], np.float32), ndrange=1)
    np.testing.assert_allclose(y[0], math.erf(1.0), rtol=2 * np.finfo(np.float32).eps)


@tk.kernel
def real_ops_k(o, x: tk.Const):
    i = tk.index()
    o[0, i] = abs(x[i])
    o[1, i] = x[i] * x[i]                   # abs2
    o[2, i] = math.exp(x[i])
    o[3, i] = math.log(x[i])
    o[4, i] = math.log10(x[i])


@pytest.mark.parametrize("dt", FLOATS)
def test_real_ops_every_float_type(be, dt):
    """@testset "Real - $op" for abs, abs2, exp, log, log10 and T in Float16/32/64"""
    rng = np.random.default_rng(16)
    x = (rng.random(8) + 0.01).astype(dt)
    (o,) = run(be, real_ops_k, np.zeros((5, 8), dt), x, ndrange=8)
    np.testing.assert_array_equal(o[0], np.abs(x))
    np.testing.assert_array_equal(o[1], (x.astype(np.float32) * x.astype(np.float32)).astype(dt)
                                  if dt == np.float16 else x * x)
    x64 = x.astype(np.float64)
    for row, ref in zip(o[2:], (np.exp(x64), np.log(x64), np.log10(x64))):
        np.testing.assert_allclose(row, ref.astype(dt), rtol=4 * np.finfo(dt).eps, atol=np.finfo(dt).eps)


@tk.kernel(fastmath=True)
def fast_ops_k(o, x: tk.Const, a: tk.Const, b: tk.Const):
    i = tk.index()
    o[0, i] = math.cos(x[i])
    o[1, i] = math.log1p(x[i])
    o[2, i] = max(a[i], b[i])
    o[3, i] = 1 / a[i]
    o[4, i] = a[i] / b[i]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fastmath(be, dt):
    """@testset "fastmath": cos, log1p (#1352), max (#2886: [1, 2] vs [4, 3] is [4, 3]),
    inv_fast and div_fast within upstream's tolerances of the plain results"""
    x = np.array([0.1, 0.2], dt)
    a, b = np.array([1.0, 2.0], dt), np.array([4.0, 3.0], dt)
    (o,) = run(be, fast_ops_k, np.zeros((5, 2), dt), x, a, b, ndrange=2, outs=1)
    rtol = 1e-4 if dt == np.float32 else 1e-10
    np.testing.assert_allclose(o[0], np.cos(x), rtol=rtol)
    np.testing.assert_allclose(o[1], np.log1p(x), rtol=rtol)
    np.testing.assert_array_equal(o[2], [4.0, 3.0])
    np.testing.assert_allclose(o[3], 1 / a, rtol=rtol)
    np.testing.assert_allclose(o[4], a / b, rtol=rtol)


@tk.kernel(fastmath=True)
def fastpow_k(A, y):
    i = tk.index()
    A[i] = A[i] ** y


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fastmath_pow_with_integer_exponent(be, dt):
    """#3065: pow_fast with an Int32 and an Int exponent (llvm.powi): ones stay ones, and a
    power with a NumPy int32 exponent of 3 is x*x*x within rounding"""
    for y in (np.int32(3), 3):
        (A,) = run(be, fastpow_k, np.ones(4, dt), y, ndrange=4)
        np.testing.assert_array_equal(A, np.ones(4, dt))
    x = np.array([1.5, -2.0, 0.25, 3.0], dt)
    (A,) = run(be, fastpow_k, x, np.int32(3), ndrange=4)
    np.testing.assert_allclose(A, x.astype(np.float64) ** 3, rtol=4 * np.finfo(dt).eps)


@tk.kernel
def inv_k(y, x: tk.Const):
    i = tk.index()
    y[i] = 1 / x[i]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_inv(anybe, dt):
    """@testset "inv": 1 / x is correctly rounded (rcp.rn), bit for bit NumPy's"""
    need(anybe, dt)
    rng = np.random.default_rng(17)
    x = np.concatenate([rng.random(10) + 0.1, [0.1, 0.5, 1.0, 2.0, 10.0, 100.0]]).astype(dt)
    (y,) = run(anybe, inv_k, np.zeros(16, dt), x, ndrange=16)
    assert y.tobytes() == (dt(1) / x).tobytes()


@tk.func
def byte_perm(x, y, s):
    """CUDA's __byte_perm: result byte k is byte (s >> 4k) & 7 of the 8-byte value {y, x}"""
    r = x & 0
    for k in range(4):
        sel = (s >> (4 * k)) & 7
        src = x if sel < 4 else y
        r = r | (((src >> (8 * (sel & 3))) & 0xFF) << (8 * k))
    return r


@tk.kernel
def byte_perm_k(a, code):
    a[2] = byte_perm(a[0], a[1], a.dtype(code))


@pytest.mark.parametrize("dt", [np.uint32, np.int32])
def test_byte_perm(anybe, dt):
    """@testset "byte_perm": bytes 1..8 packed into x and y, selector (4, 2, 4, 2), the
    code as an Int32 and as a UInt16 (here a NumPy int32 and uint16 scalar, cast to the array's
    type in the kernel: under NEP 50 a uint32 shifted by an int32 is an int64, which WebGPU
    does not have)"""
    bytes_ = [i for i in range(1, 9)]
    x = bytes_[3] << 24 | bytes_[2] << 16 | bytes_[1] << 8 | bytes_[0]
    y = bytes_[7] << 24 | bytes_[6] << 16 | bytes_[5] << 8 | bytes_[4]
    sel = [4, 2, 4, 2]
    code = sel[3] << 12 | sel[2] << 8 | sel[1] << 4 | sel[0]
    r = bytes_[sel[3]] << 24 | bytes_[sel[2]] << 16 | bytes_[sel[1]] << 8 | bytes_[sel[0]]
    for c in (np.int32(code), np.uint16(code)):
        (a,) = run(anybe, byte_perm_k, np.array([x, y, 0], dt), c, ndrange=1)
        assert int(a[2]) == r


@tk.func
def sbyte(v, k):
    return int(tk.int8((v >> (8 * k)) & 0xFF))


@tk.func
def ubyte(v, k):
    return int((v >> (8 * k)) & 0xFF)


@tk.kernel
def dp4a_k(out, a: tk.Const, b: tk.Const, c: tk.Const, sa, sb):
    i = tk.index()
    acc = int(c[i])
    for k in range(4):
        x = sbyte(a[i], k) if sa else ubyte(a[i], k)
        y = sbyte(b[i], k) if sb else ubyte(b[i], k)
        acc += x * y
    out[i] = out.dtype(acc)


def _pack(signed, *bs):
    return int(np.array(bs, np.int8 if signed else np.uint8).view(np.int32 if signed else np.uint32)[0])


def _dp4a_ref(a, b, c, sa, sb, dt):
    ba = np.array([a], np.int32 if sa else np.uint32).view(np.int8 if sa else np.uint8)
    bb = np.array([b], np.int32 if sb else np.uint32).view(np.int8 if sb else np.uint8)
    return int(np.array(c + sum(int(p) * int(q) for p, q in zip(ba, bb))).astype(dt))


DP4A_CASES = {
    "ss": [(0, 0, 0), (_pack(1, 1, 2, 3, 4), _pack(1, 5, 6, 7, 8), 10),
           (_pack(1, 127, 127, 127, 127), _pack(1, 1, 1, 1, 1), 0),
           (_pack(1, -128, -128, -128, -128), _pack(1, 1, 1, 1, 1), 0),
           (_pack(1, -1, -1, -1, -1), _pack(1, -1, -1, -1, -1), 0), (-1, -1, 100)],
    "su": [(0, 0, 0), (_pack(1, 1, 2, 3, 4), _pack(0, 5, 6, 7, 8), 10),
           (_pack(1, 127, 0, -128, 1), _pack(0, 255, 128, 1, 0), 5),
           (_pack(1, -1, -1, -1, -1), _pack(0, 255, 255, 255, 255), 0)],
    "us": [(0, 0, 0), (_pack(0, 1, 2, 3, 4), _pack(1, 5, 6, 7, 8), 10),
           (_pack(0, 255, 128, 0, 1), _pack(1, -1, 1, -128, 127), 0)],
    "uu": [(0, 0, 0), (_pack(0, 1, 2, 3, 4), _pack(0, 5, 6, 7, 8), 10),
           (_pack(0, 255, 255, 255, 255), _pack(0, 1, 1, 1, 1), 0),
           (_pack(0, 255, 255, 255, 255), _pack(0, 255, 255, 255, 255), 0)],
}


@pytest.mark.parametrize("kind", sorted(DP4A_CASES))
def test_dp4a(anybe, kind):
    """@testset "dp4a" (ss, su, us, uu): the four bytes of a and b, signed or unsigned, dotted
    and added to c, against upstream's reference (reinterpret as NTuple{4,Int8/UInt8})"""
    sa, sb = kind[0] == "s", kind[1] == "s"
    cases = DP4A_CASES[kind]
    dt = np.uint32 if kind == "uu" else np.int32
    a = np.array([p[0] for p in cases], np.int32 if sa else np.uint32)
    b = np.array([p[1] for p in cases], np.int32 if sb else np.uint32)
    c = np.array([p[2] for p in cases], dt)
    # the packed words go in as uint32 bits and the signedness as run-time flags (one build)
    (out,) = run(anybe, dp4a_k, np.zeros(len(cases), dt), a.view(np.uint32), b.view(np.uint32), c,
                 int(sa), int(sb), ndrange=len(cases), outs=1)
    want = [_dp4a_ref(int(p), int(q), int(r), sa, sb, dt) for p, q, r in zip(a, b, c)]
    np.testing.assert_array_equal(out, want)
    if kind == "ss":
        assert list(out[:2]) == [0, 80]
    if kind == "uu":
        assert list(out[2:]) == [1020, 260100]


# -------------------------------------------------------------------------------- atomics.jl

INTS = [np.int32, np.int64, np.uint32, np.uint64]


def need_atomic(be, dt):
    if not (be.supports(dt) and be.supports_atomic(dt)):
        pytest.skip(f"{be.name} has no {np.dtype(dt).name} atomics (SPEC 4)")


def small(be, n):
    """upstream's thread count, cut on the interpreter (its CAS loops run item by item)"""
    return min(n, 256) if isinstance(be, tk.Interpreter) else n


@tk.kernel
def low_and_k(a):
    i = tk.index()
    k = 1
    for _ in range(i):
        k *= 2
    tk.atomic_and(a, 0, a.dtype(1023 - k))


@tk.kernel
def low_or_xor_k(a):
    i = tk.index() + 1
    b = 1
    for _ in range(i):
        b *= 2
    b /= 2                                  # b becomes a float, as in Julia
    tk.atomic_or(a, 0, a.dtype(b))
    tk.atomic_xor(a, 1, a.dtype(b))


@pytest.mark.parametrize("dt", [np.int32, np.uint64])
def test_low_level_and_or_xor(anybe, dt):
    """"atomic_and": 1023 & (1023 - 2^i) over 10 threads is 0; "atomic_or"/"atomic_xor": the
    masks 2^(i-1), built through a float b /= 2, or-ed into 0 give 1023, xor-ed into 1023 give 0"""
    need_atomic(anybe, dt)
    (a,) = run(anybe, low_and_k, np.array([1023], dt), ndrange=10)
    assert a[0] == 0
    (a,) = run(anybe, low_or_xor_k, np.array([0, 1023], dt), ndrange=10)
    assert list(a) == [1023, 0]


HIGH = {  # op: (initial, expression of old and i, threads, updates per thread, expected)
    "add": (0, "old + 1", 1024, 2, lambda n, dt: 2 * n),
    "sub": (2048, "old - 1", 1024, 2, lambda n, dt: 0),
    "mul": (1, "old * 2", 5, 2, lambda n, dt: 1024),
    "div": (1024, "old / 2", 5, 2, lambda n, dt: 1),
    "max": (0, "max(old, i + 1)", 32, 1, lambda n, dt: 32),
    "min": (None, "min(old, i + 1)", 32, 1, lambda n, dt: 1),
}


def cas_update_kernel(op, expr, updates):
    body = []
    for _ in range(updates):
        body += ["old = a[0]", "while True:", f"    new = a.dtype({expr})",
                 "    seen = tk.atomic_cas(a, 0, old, new)",
                 "    if tk.bitcast(seen, bits.dtype) == tk.bitcast(old, bits.dtype):", "        break",
                 "    old = seen"]
    return kernel(f"cas_{op}_{updates}", ["a", "bits"], body)


def _bits_dtype(dt):
    return {4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize]


@pytest.mark.parametrize("dt", [np.int32, np.uint64, np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(HIGH))
def test_high_level_atomic_as_cas_loop(be, op, dt):
    """"atomics (high-level)": @atomic a[1] = a[1] op x and @atomic a[1] op= x, written as
    compare-and-swap loops; add/sub 2 x 1024 updates, mul/div 2 x 5 (1 -> 1024 -> 1), max/min
    of the thread numbers 1..32 (min from typemax)"""
    check_high_level(be, op, dt)


def check_high_level(be, op, dt):
    init, expr, threads, updates, want = HIGH[op]
    if op == "div" and np.dtype(dt).kind in "iu":
        expr = "old // 2"                   # integer / gives a float (SPEC 3)
    if op in ("add", "sub"):
        threads = small(be, threads)
        init = 2 * threads if op == "sub" else init
    if init is None:
        init = np.iinfo(dt).max if np.dtype(dt).kind in "iu" else np.finfo(dt).max
    k = cas_update_kernel(op, expr, updates)
    bd = _bits_dtype(dt)
    (a,) = run(be, k, np.array([init], dt), np.zeros(1, bd), ndrange=threads, outs=1)
    assert a[0] == want(threads, dt), (op, dt)


def test_high_level_atomics_as_cas_loops_on_every_backend(anybe):
    """the CAS-loop ports where the backend's compare-and-swap matters: add, div and min on
    float32 and uint32, and and/xor on int32, on every backend"""
    for dt in (np.float32, np.uint32):
        for op in ("add", "div", "min"):
            check_high_level(anybe, op, dt)
    for op in ("and", "xor"):
        check_bitwise(anybe, op, np.int32)


SHIFTY = {  # op: (initial value, threads from the type's width, expected value)
    "and": (lambda dt: ~dt(0), lambda b: b, lambda dt, nb: dt(0)),
    "or": (lambda dt: dt(0), lambda b: b, lambda dt, nb: ~dt(0)),
    "xor": (lambda dt: dt(0), lambda b: b + 4, lambda dt, nb: ~dt(0) & ~dt((1 << nb) - 1)),
}


@pytest.mark.parametrize("dt", [np.int32, np.uint64])
@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_high_level_bitwise_atomic_as_cas_loop(be, op, dt):
    """"and"/"or"/"xor": 8*sizeof(T) threads (xor: 4 more, which wrap around and clear the low 4
    bits again) each apply the mask 1 << (i-1) (and: its complement) to a[1] and a[2]"""
    check_bitwise(be, op, dt)


def check_bitwise(be, op, dt):
    init, threads, want = SHIFTY[op]
    nbits = 8 * np.dtype(dt).itemsize
    sym = {"and": "&", "or": "|", "xor": "^"}[op]
    one = "a.dtype(1)"
    mask = f"{one} << a.dtype(i % {nbits})"
    if op == "and":
        mask = f"~({mask})"
    body = []
    for idx in (0, 1):
        body += [f"old = a[{idx}]", "while True:", f"    new = old {sym} ({mask})",
                 f"    seen = tk.atomic_cas(a, {idx}, old, new)", "    if seen == old:", "        break",
                 "    old = seen"]
    k = kernel(f"cas_bits_{op}", ["a"], body)
    a0 = init(dt)
    (a,) = run(be, k, np.array([a0, a0], dt), ndrange=threads(nbits))
    w = want(dt, 4)
    assert a[0] == w and a[1] == w


@pytest.mark.parametrize("dt", INTS)
def test_high_level_shift_atomic_as_cas_loop(be, dt):
    """"shift": @atomic a[1] <<= 1 by 8 threads: 1 << 8"""
    k = kernel("cas_shift", ["a"], ["old = a[0]", "while True:", "    seen = tk.atomic_cas(a, 0, old, old << 1)",
                                    "    if seen == old:", "        break", "    old = seen"])
    (a,) = run(be, k, np.array([1], dt), ndrange=8)
    assert a[0] == 256


def test_atomic_macro_of_a_nan_terminates(anybe):
    """"macro"/"NaN": @atomic x[1] = f(x[1], 42f0) with f(x, y) = 3x + 2y: 84 from 0, NaN from
    NaN (the swap compares bits, so a loop whose exit compares bits ends on a NaN)"""
    need_atomic(anybe, np.float32)
    k = cas_update_kernel("nan", "3 * old + 2 * 42", 1)
    (a,) = run(anybe, k, np.array([0], np.float32), np.zeros(1, np.uint32), ndrange=1, outs=1)
    assert a[0] == 84
    (a,) = run(anybe, k, np.array([np.nan], np.float32), np.zeros(1, np.uint32), ndrange=1, outs=1)
    assert np.isnan(a[0])


@pytest.mark.parametrize("dt", [np.int32, np.uint32])
def test_atomic_inc_and_dec_as_cas_loops(anybe, dt):
    """"atomic_inc": old >= 512 ? 0 : old + 1 by 768 threads from 0 ends at 255; "atomic_dec":
    (old == 0 || old > 512) ? 512 : old - 1 by 256 threads from 1024 ends at 257"""
    need_atomic(anybe, dt)
    loop = ["while True:", "    seen = tk.atomic_cas(a, 0, old, new)", "    if seen == old:", "        break",
            "    old = seen", "    new = {}"]
    inc_new = "a.dtype(0) if old >= b else old + 1"
    dec_new = "b if (old == 0 or old > b) else old - 1"
    inc = kernel("cas_inc", ["a", "b"], ["old = a[0]", f"new = a.dtype({inc_new})"]
                 + [ln.format(f"a.dtype({inc_new})") for ln in loop])
    dec = kernel("cas_dec", ["a", "b"], ["old = a[0]", f"new = a.dtype({dec_new})"]
                 + [ln.format(f"a.dtype({dec_new})") for ln in loop])
    n_inc = small(anybe, 768)
    (a,) = run(anybe, inc, np.array([0], dt), dt(512), ndrange=n_inc)
    assert a[0] == (n_inc - 513 if n_inc > 512 else n_inc)
    (a,) = run(anybe, dec, np.array([1024], dt), dt(512), ndrange=256)
    assert a[0] == 257


@tk.kernel
def shared_counter_k(a):
    b = tk.localmem(a.dtype, 1)
    t = tk.index(tk.Local, tk.Linear)
    if t == 0:
        b[0] = a[0]
    tk.synchronize()
    tk.atomic_add(b, 0, 1)
    tk.synchronize()
    if t == 0:
        a[0] = b[0]


def test_shared_memory_atomic_counter(anybe):
    """"shared memory" (#311): a local counter set by item 0, incremented by 16 items, read back"""
    dt = np.int64 if anybe.supports(np.int64) else np.int32
    (a,) = run(anybe, shared_counter_k, np.array([0], dt), wg=16, ndrange=16)
    assert a[0] == 16


@tk.kernel
def shared_neighbours_k(out):
    t = tk.index(tk.Local, tk.Linear)
    sh = tk.localmem(tk.float32, 4)
    sh[t] = t + 1.0
    sh[t + 2] = t + 3.0
    tk.synchronize()
    tk.atomic_add(sh, t, sh[t + 2])
    tk.synchronize()
    tk.atomic_add(sh, t, sh[t + 2])
    tk.synchronize()
    out[t] = sh[t]
    out[t + 2] = sh[t + 2]


def test_shared_memory_atomics_on_neighbours(anybe):
    """"shared memory bug" (#558): atomic_add(shared[tid], shared[tid + 2]) twice by 2 items
    (upstream reads uninitialized memory and checks only that it runs; here the elements are
    set first, so the answer is known: 1 + 3 + 3 and 2 + 4 + 4)"""
    (out,) = run(anybe, shared_neighbours_k, np.zeros(4, np.float32), wg=2, ndrange=2)
    np.testing.assert_array_equal(out, [7, 10, 3, 4])


# ------------------------------------------------------------------- execution.jl (not in ka2)

@tk.kernel
def tree_reduce_k(result, A: tk.Const, v0):
    """execution.jl's "mapreduce (full)" reduce_kernel: a strided accumulation, then a tree in
    shared memory halving ``offset`` in a while loop with a barrier in it (uniform: offset
    derives from the group size only)"""
    LMEM = tk.groupsize()[0]
    tmp_local = tk.localmem(result.dtype, LMEM)
    local_index = tk.index(tk.Local, tk.Linear)
    global_index = local_index
    acc = result.dtype(v0)
    while global_index < A.shape[0]:
        acc = acc + A[global_index]
        global_index += LMEM
    tmp_local[local_index] = acc
    tk.synchronize()
    offset = LMEM // 2
    while offset > 0:
        if local_index < offset:
            other = tmp_local[local_index + offset]
            mine = tmp_local[local_index]
            tmp_local[local_index] = mine + other
        tk.synchronize()
        offset = offset // 2
    if local_index == 0:
        result[tk.index(tk.Group, tk.Linear)] = tmp_local[0]


def test_mapreduce_full_and_reduced_tree(anybe):
    """"mapreduce (full)": 1000 float32 values by 256 items (64 where the backend has fewer),
    approximately their sum; "mapreduce (reduced)": 100 ints of 1..10 by 64 items, exactly"""
    rng = np.random.default_rng(21)
    wg = min(256, anybe.max_workgroupsize)
    A = rng.random(1000, dtype=np.float32)
    (out,) = run(anybe, tree_reduce_k, np.zeros(1, np.float32), A, 0.0, wg=wg, ndrange=wg, outs=1)
    np.testing.assert_allclose(out[0], A.astype(np.float64).sum(), rtol=1e-5)
    it = np.int64 if anybe.supports(np.int64) else np.int32
    B = rng.integers(1, 11, size=100).astype(it)
    (out,) = run(anybe, tree_reduce_k, np.zeros(1, it), B, 0, wg=64, ndrange=64, outs=1)
    assert out[0] == B.sum()


def test_closures_and_captured_values(be):
    """"closures" (a kernel capturing val = 2.0) and "captured values" (f(1) == 1, f(2) == 2:
    each closure compiles with its own captured value, of its own type)"""
    def outer(a, val):
        @tk.kernel
        def inner(a):
            a[0] = val
        return run(be, inner, a, ndrange=1)[0]

    assert outer(np.ones(1), 2.0)[0] == 2.0
    assert outer(np.zeros(1, np.int64), 1)[0] == 1
    assert outer(np.zeros(1, np.int64), 2)[0] == 2


@tk.kernel
def splat_k(out, a, b):
    out[0] = a + b


def test_splatting(be):
    """"splatting": the arguments given whole, as a splatted tuple, partly splatted and from a
    list"""
    out = np.zeros(1, np.int64)
    k = splat_k(be)
    k(out, 1, 2, ndrange=1)
    tk.synchronize(be)
    assert out[0] == 3
    k(*(out, 3, 4), ndrange=1)
    tk.synchronize(be)
    assert out[0] == 7
    k(out, *(5, 6), ndrange=1)
    tk.synchronize(be)
    assert out[0] == 11
    k(*[out, 7, 8], ndrange=1)
    tk.synchronize(be)
    assert out[0] == 15


@tk.func
def inner_kwargf(foobar, foo=1, bar=2):
    return foobar * 100 + foo * 10 + bar


@tk.kernel
def kwargs_k(out):
    out[0] = inner_kwargf(42, foo=1, bar=2)
    out[1] = inner_kwargf(42)
    out[2] = inner_kwargf(42, foo=3)
    out[3] = inner_kwargf(42, bar=4)
    out[4] = inner_kwargf(42, bar=5, foo=6)


def test_keyword_arguments_of_device_functions(be):
    """"keyword arguments": a device function with defaults called with none, some and all of
    its keywords, in either order (upstream only checks that these compile)"""
    (out,) = run(be, kwargs_k, np.zeros(5, np.int64), ndrange=1)
    np.testing.assert_array_equal(out, [4212, 4212, 4232, 4214, 4265])


def test_varargs_kernel_is_a_compile_error(tmp_path):
    """"varargs" (kernel(args...) printing args[2]): a kernel takes plain positional parameters
    (SPEC 1), so ``def kernel(*args)`` is a CompileError at the def, naming ``*args``"""
    src = "import tinykernels as tk\n\n\n@tk.kernel\ndef kernel(*args):\n    tk.print(args[1])\n"
    path = tmp_path / "varargs_kernel.py"
    path.write_text(src)
    with pytest.raises(tk.CompileError, match=r"\*args") as ei:
        exec(compile(src, str(path), "exec"), {})
    assert "varargs_kernel.py:5" in str(ei.value)


# ---------------------------------------------------- intrinsics.jl (barriers), memory.jl (shmem)

@tk.kernel
def barrier_count_and_or(a, b, c, pred: tk.constexpr):
    """"llvm ir barrier int"/"bool": sync_threads_count/and/or as group reductions of the
    element (int) or of ``element > 0`` (bool)"""
    i = tk.index()
    va = a[i] > 0 if pred else a[i]
    vb = b[i] > 0 if pred else b[i]
    vc = c[i] > 0 if pred else c[i]
    all_ = tk.group_reduce(va != 0, "and")
    any_ = tk.group_reduce(vc != 0, "or")
    if tk.group_reduce(int(vb != 0), "add") == 3:
        b[i] += 1
    if all_:
        a[i] += 1
    if any_:
        c[i] += 1


@pytest.mark.parametrize("pred", [False, True], ids=["int", "bool"])
def test_barrier_count_and_or(anybe, pred):
    """sync_threads_count(b) == 3 for b = [1, 1, 1, 0, 0], sync_threads_and of all ones,
    sync_threads_or of [1, 0, 0, 0, 0]: each array gets + 1 everywhere, in one group of 5"""
    a = np.array([1, 1, 1, 1, 1], np.int32)
    b = np.array([1, 1, 1, 0, 0], np.int32)
    c = np.array([1, 0, 0, 0, 0], np.int32)
    a2, b2, c2 = run(anybe, barrier_count_and_or, a, b, c, pred, wg=5, ndrange=5, outs=3)
    np.testing.assert_array_equal(a2, a + 1)
    np.testing.assert_array_equal(b2, b + 1)
    np.testing.assert_array_equal(c2, c + 1)


@tk.kernel
def static_shmem_reverse(d, n: tk.constexpr):
    """"static shmem": two shared arrays (the second catches aliasing), a reversal through the
    first"""
    t = tk.index(tk.Local, tk.Linear)
    tr = n - t - 1
    s = tk.localmem(d.dtype, n)
    s2 = tk.localmem(d.dtype, n)
    s[t] = d[t]
    s2[t] = 2 * d[t]
    tk.synchronize()
    d[t] = s[tr]


@tk.kernel
def split_shmem_reverse(a, b, n: tk.constexpr):
    """"dynamic shmem consisting of multiple arrays"/"homogeneous": one shared array of 2n split
    into two halves by an offset (upstream's views)"""
    t = tk.index(tk.Local, tk.Linear)
    tr = n - t - 1
    s = tk.localmem(a.dtype, 2 * n)
    s[t] = a[t]
    tk.synchronize()
    a[t] = s[tr]
    s[n + t] = b[t]
    tk.synchronize()
    b[t] = s[n + tr]


@pytest.mark.parametrize("dt", [np.int64, np.float16, np.float32])
def test_static_and_split_shared_memory(anybe, dt):
    """memory.jl "static shmem" (statically and parametrically typed) and "dynamic shmem
    consisting of multiple arrays": reverse(a) through shared memory, exactly, one group of n
    (upstream's 1024 where the backend allows it)"""
    need(anybe, dt)
    n = min(1024 if not isinstance(anybe, tk.Interpreter) else 128, anybe.max_workgroupsize)
    rng = np.random.default_rng(22)
    a = (rng.random(n) * 100).astype(dt)
    b = (rng.random(n) * 100).astype(dt)
    (d,) = run(anybe, static_shmem_reverse, a, n, wg=n, ndrange=n)
    np.testing.assert_array_equal(d, a[::-1])
    a2, b2 = run(anybe, split_shmem_reverse, a, b, n, wg=n, ndrange=n, outs=2)
    np.testing.assert_array_equal(a2, a[::-1])
    np.testing.assert_array_equal(b2, b[::-1])
