"""The WebGPU backend (wgpu; lavapipe in CI); skipped where wgpu or an adapter is missing."""
import math
import sys

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.runtime.webgpu import WebGPU

ok, why = WebGPU.available()
pytestmark = pytest.mark.skipif(not ok, reason=f"WebGPU unavailable: {why}")


@pytest.fixture(scope="module")
def gpu():
    return WebGPU()


def dev(x, b):
    return tk.asarray(np.ascontiguousarray(x), backend=b)


def run_both(kernel, gpu, args, ndrange, wg=None, **kw):
    """Run ``kernel`` on the CPU (NumPy arrays) and on WebGPU; return both sets of host arrays."""
    cpu_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    gpu_args = [dev(a, gpu) if isinstance(a, np.ndarray) else a for a in args]
    kernel(tk.CPU(), wg)(*cpu_args, ndrange=ndrange, **kw)
    kernel(gpu, wg)(*gpu_args, ndrange=ndrange, **kw)
    tk.synchronize(gpu)
    return ([a for a in cpu_args if isinstance(a, np.ndarray)],
            [a.numpy() for a in gpu_args if isinstance(a, tk.Array)])


def assert_agree(kernel, gpu, args, ndrange, wg=None, rtol=0.0, **kw):
    cpu, got = run_both(kernel, gpu, args, ndrange, wg, **kw)
    for c, g in zip(cpu, got):
        assert g.dtype == c.dtype
        if rtol:
            np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64), rtol=rtol, atol=rtol)
        else:
            np.testing.assert_array_equal(g, c)
            if c.dtype.kind == "f":            # and the signs of zeros
                np.testing.assert_array_equal(np.signbit(g[c == 0]), np.signbit(c[c == 0]))


# ----------------------------------------------------------------------------- backend object

def test_capabilities(gpu):
    assert gpu.name == "WEBGPU" and not gpu.is_host and not gpu.supports_float64
    for d in (tk.bool_, tk.int8, tk.uint8, tk.int16, tk.uint16, tk.int32, tk.uint32, tk.float16,
              tk.float32, "bfloat16", "float8_e4m3fn"):
        assert gpu.supports(d), d
    for d in (tk.float64, tk.int64, tk.uint64):
        assert not gpu.supports(d)
    assert gpu.supports_atomic(tk.int32) and gpu.supports_atomic(tk.uint32) and gpu.supports_atomic(tk.float32)
    assert not gpu.supports_atomic(tk.int64) and not gpu.supports_atomic(tk.float64)
    assert gpu.max_workgroupsize >= 256
    assert gpu == WebGPU() and hash(gpu) == hash(WebGPU())
    assert WebGPU(debug=True) != WebGPU(debug=False)


def test_arrays_round_trip_and_copies(gpu):
    for dt in (np.float32, np.int32, np.uint32, np.int8, np.uint8, np.int16, np.uint16, np.float16, np.bool_):
        h = (np.arange(7 * 3) % 5).astype(dt).reshape(7, 3)
        a = dev(h, gpu)
        assert a.shape == (7, 3) and a.dtype == dt and a.backend == gpu
        np.testing.assert_array_equal(a.numpy(), h)
    a = tk.zeros((5,), tk.uint8, backend=gpu)
    tk.copyto(a, np.arange(5, dtype=np.uint8))
    b = tk.empty((5,), tk.uint8, backend=gpu)
    tk.copyto(b, a)
    host = np.zeros(5, np.uint8)
    tk.copyto(host, b)
    np.testing.assert_array_equal(host, np.arange(5))
    assert tk.zeros(0, backend=gpu).numpy().shape == (0,)
    with pytest.raises(ValueError, match="shape"):
        tk.copyto(a, np.ones(4, np.uint8))
    with pytest.raises(TypeError, match="float64"):
        tk.asarray(np.zeros(3), backend=gpu)


@tk.kernel
def saxpy(y, a, x: tk.Const):
    i = tk.index()
    y[i] = a * x[i] + y[i]


def test_host_arrays_are_refused(gpu):
    with pytest.raises(tk.LaunchError, match="'y'.*device arrays"):
        saxpy(gpu)(np.zeros(4, np.float32), 1.0, tk.zeros(4, backend=gpu), ndrange=4)


def test_python_int_argument_must_fit_32_bits(gpu):
    @tk.kernel
    def put(A, v):
        A[tk.index()] = v
    A = tk.zeros(2, tk.int32, backend=gpu)
    put(gpu)(A, -7, ndrange=2)
    np.testing.assert_array_equal(A.numpy(), [-7, -7])
    with pytest.raises(tk.LaunchError, match="32 bits"):
        put(gpu)(A, 1 << 40, ndrange=2)


def test_source_is_wgsl(gpu):
    src = saxpy(gpu).source(tk.zeros(4, backend=gpu), 2.0, tk.zeros(4, backend=gpu), ndrange=4)
    assert "@compute @workgroup_size(256)" in src and "fn tk_main" in src and "var<uniform> tk_a" in src


# ----------------------------------------------------------------------------- agreement with the CPU

def test_saxpy_matches_cpu_bit_for_bit(gpu):
    rng = np.random.default_rng(0)
    x, y = rng.random(1037).astype(np.float32), rng.random(1037).astype(np.float32)
    assert_agree(saxpy, gpu, [y, np.float32(0.5), x], 1037)


@tk.kernel
def no_fast_math(out, x: tk.Const):
    i = tk.index()
    v = x[i]
    out[i, 0] = (v + 1e8) - 1e8
    out[i, 1] = v * 1.1 - v * 1.1          # would be an fma residue if contracted
    t = v * 3.0
    out[i, 2] = t / 3.0 - v
    out[i, 3] = v + 0.0 - v


def test_float_arithmetic_is_not_reassociated_or_fused(gpu):
    x = np.random.default_rng(1).random(500).astype(np.float32) * 10
    assert_agree(no_fast_math, gpu, [np.zeros((500, 4), np.float32), x], 500)


@tk.kernel
def int_mix(out, a: tk.Const, b: tk.Const):
    i = tk.index()
    x = a[i]
    y = b[i]
    out[i, 0] = x // y
    out[i, 1] = x % y
    out[i, 2] = x * 3 + 100
    out[i, 3] = -x
    out[i, 4] = x << (i % 40)
    out[i, 5] = x >> (i % 40)
    out[i, 6] = x ** (i % 5)
    out[i, 7] = abs(x) + min(x, y) - max(x, y)
    out[i, 8] = ~x ^ (x & y) | 12


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_integer_semantics_match_cpu(gpu, dt):
    rng = np.random.default_rng(2)
    info = np.iinfo(dt)
    a = rng.integers(max(info.min, -(1 << 20)), min(info.max, 1 << 20), 600, endpoint=True).astype(dt)
    b = rng.integers(max(info.min, -50), min(info.max, 50), 600, endpoint=True).astype(dt)
    a[:4] = [info.min, info.max, 0, 1]
    b[:4] = [0, 0, 0, 0] if info.min == 0 else [-1, 0, -1, 0]
    assert_agree(int_mix, gpu, [np.zeros((600, 9), dt), a, b], 600)


@tk.kernel
def casts(out, x: tk.Const):
    i = tk.index()
    v = x[i]
    out[i, 0] = tk.int8(v)
    out[i, 1] = tk.uint8(v)
    out[i, 2] = tk.int16(v * 100.0)
    out[i, 3] = tk.uint16(v * 100.0)
    out[i, 4] = tk.int32(v * 1000.0)
    out[i, 5] = tk.uint32(abs(v) * 1000.0)
    out[i, 6] = int(tk.float16(v) * 64.0)
    out[i, 7] = int(bool(v)) + int(tk.int8(tk.int32(v) + 200))


def test_casts_match_cpu(gpu):
    x = np.random.default_rng(3).uniform(-120, 120, 300).astype(np.float32)
    x[:3] = [0.0, -0.5, 127.9]
    assert_agree(casts, gpu, [np.zeros((300, 8), np.int32), x], 300)


@tk.kernel
def maths(out, x: tk.Const, y: tk.Const):
    i = tk.index()
    v = x[i]
    w = y[i]
    out[i, 0] = math.exp(v) + math.expm1(v)
    out[i, 1] = math.log(abs(v) + 0.1) + math.log2(abs(v) + 0.1) + math.log10(abs(v) + 0.1)
    out[i, 2] = math.log1p(abs(v)) + math.sqrt(abs(v))
    out[i, 3] = math.sin(v) + math.cos(v) + math.tan(v * 0.3)
    out[i, 4] = math.asin(v / 4.0) + math.acos(v / 4.0) + math.atan(v)
    out[i, 5] = math.atan2(v, w) + math.hypot(v, w)
    out[i, 6] = math.sinh(v) + math.cosh(v) + math.tanh(v)
    out[i, 7] = math.asinh(v) + math.acosh(abs(v) + 1.0) + math.atanh(v / 4.0)
    out[i, 8] = math.erf(v) + math.erfc(v)
    out[i, 9] = math.pow(abs(v), w) + math.fmod(v, w) + math.copysign(2.0, w)
    out[i, 10] = math.floor(v) + math.ceil(v) + math.trunc(v) + round(v)
    out[i, 11] = tk.sigmoid(v) + tk.rsqrt(abs(v) + 1.0) + tk.clamp(v, -1.0, 1.0)
    out[i, 12] = v // w + v % w


def test_math_functions_match_cpu(gpu):
    rng = np.random.default_rng(4)
    x = rng.uniform(-3.9, 3.9, 2000).astype(np.float32)
    y = rng.uniform(-3, 3, 2000).astype(np.float32)
    y[np.abs(y) < 0.05] = 0.5
    cpu, got = run_both(maths, gpu, [np.zeros((2000, 13), np.float32), x, y], 2000)
    np.testing.assert_allclose(got[0], cpu[0], rtol=4e-6, atol=4e-6)


@tk.kernel
def trig3(out, x: tk.Const):
    i = tk.index()
    out[i, 0] = math.sin(x[i])
    out[i, 1] = math.cos(x[i])
    out[i, 2] = math.tan(x[i])


def _huge_trig_arguments(rng) -> np.ndarray:
    """float32 arguments from 1e4 to float32 max: log-uniform, the hardest of 2M random ones
    (nearest a multiple of pi/2: the smallest |sin|, |cos|), powers of two, float32 max, and
    floats next to multiples of pi/2 below 2**24 (where those are closer than an ulp of 1)."""
    many = np.exp(rng.uniform(np.log(1e4), np.log(3.4e38), 2_000_000)).astype(np.float32)
    m64 = many.astype(np.float64)
    worst = [many[np.argsort(np.abs(f(m64)))[:300]] for f in (np.sin, np.cos)]
    k = np.unique(np.exp(rng.uniform(np.log(6000), np.log(1e7), 300)).astype(np.int64))
    near = (k * (np.pi / 2)).astype(np.float32)
    near = np.concatenate([near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(0))])
    x = np.concatenate([many[:3000], *worst, near, np.float32(2.0) ** np.arange(13, 128, dtype=np.float32),
                        np.float32([3.4028235e38, 8192.0, 8191.9995, 1e8, 1e9, 1e10, 1e30])])
    return np.concatenate([x, -x[::7]]).astype(np.float32)


def test_trig_of_huge_arguments_is_reduced_exactly(gpu):
    """sin/cos/tan of |x| up to float32 max within the fuzzer's ulps (4, 4, 6) of the correctly
    rounded float32 result (float64 sin/cos/tan of the float32 argument: glibc reduces exactly),
    also where the result is tiny (x next to a multiple of pi/2): the WGSL prelude's Payne-Hanek
    reduction (lavapipe's builtins gave +-1 from 1e9 on: fuzz bug wgsl-trig-range)."""
    x = _huge_trig_arguments(np.random.default_rng(15))
    got = np.zeros((len(x), 3), np.float32)
    g = dev(got, gpu)
    trig3(gpu)(g, dev(x, gpu), ndrange=len(x))
    got = g.numpy()
    x64 = x.astype(np.float64)
    for j, (f, ulps) in enumerate(((np.sin, 4), (np.cos, 4), (np.tan, 6))):
        want = f(x64).astype(np.float32)
        err = np.abs(got[:, j].astype(np.float64) - want) / np.spacing(np.abs(want)).astype(np.float64)
        bad = np.argmax(err)
        assert err[bad] <= ulps, (f.__name__, x[bad], got[bad, j], want[bad], err[bad])


def test_trig_next_to_multiples_of_half_pi_keeps_its_relative_accuracy(gpu):
    """sin/cos/tan of the 41 floats either side of every float32 k pi/2 below 8300 (and a dense
    grid on [-10, 10]) within the fuzzer's ulps (4, 4, 6) of NumPy's float64 rounded to float32:
    the exact reduction from |x| = 25/32 on (lavapipe's builtins gave cos(3 pi/2) 6 ulp off,
    688 ulp next to 2238.38 and tan 985 ulp)."""
    c = (np.arange(1, 5300) * (np.pi / 2)).astype(np.float32)
    xs, a, b = [c], c, c
    for _ in range(20):
        a, b = np.nextafter(a, np.float32(np.inf)), np.nextafter(b, np.float32(0))
        xs += [a, b]
    x = np.concatenate(xs + [np.linspace(-10, 10, 20001, dtype=np.float32), np.float32([0.78125, 0.78124994])])
    x = np.concatenate([x, -x]).astype(np.float32)
    g = dev(np.zeros((len(x), 3), np.float32), gpu)
    trig3(gpu)(g, dev(x, gpu), ndrange=len(x))
    got, x64 = g.numpy(), x.astype(np.float64)
    for j, (f, ulps) in enumerate(((np.sin, 4), (np.cos, 4), (np.tan, 6))):
        want = f(x64).astype(np.float32)
        err = np.abs(got[:, j].astype(np.float64) - want) / np.spacing(np.abs(want)).astype(np.float64)
        bad = np.argmax(err)
        assert err[bad] <= ulps, (f.__name__, x[bad], got[bad, j], want[bad], err[bad])
    k3 = np.float32(3 * np.pi / 2)
    i = int(np.flatnonzero(x == k3)[0])
    assert got[i, 1] == np.float32(np.cos(np.float64(k3)))


@tk.kernel
def specials(out, f, x: tk.Const, y: tk.Const):
    i = tk.index()
    v = x[i]
    w = y[i]
    out[i, 0] = 1 if math.isnan(v) else 0
    out[i, 1] = 1 if math.isinf(v) else 0
    out[i, 2] = 1 if math.isfinite(v) else 0
    out[i, 3] = 1 if math.isnan(math.log(v)) else 0
    out[i, 4] = 1 if math.isinf(math.exp(v)) else 0
    out[i, 5] = 1 if v != v else 0                 # the NaN idiom (WGSL's != is ordered)
    out[i, 6] = 1 if bool(v) else 0
    out[i, 7] = 1 if not (v < w) else 0
    f[i, 0] = v % w
    f[i, 1] = v // w
    f[i, 2] = math.fmod(v, w)
    f[i, 3] = v - v                                # inf - inf is NaN: not folded to 0
    f[i, 4] = v * 0.0
    f[i, 5] = v / w
    f[i, 6] = min(v, w) + max(v, w)


def test_nan_inf_and_signed_zero_are_kept(gpu):
    x = np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 100.0, 1.0, -0.0, 5.0, 7.5, 3.0], np.float32)
    y = np.array([3.0, 2.0, 0.0, -3.0, -2.0, 2.0, np.inf, 2.0, -0.0, np.nan, -np.inf], np.float32)
    with np.errstate(all="ignore"):
        assert_agree(specials, gpu, [np.zeros((11, 8), np.int32), np.zeros((11, 7), np.float32), x, y], 11)


# ----------------------------------------------------------------------------- tk.fma

@tk.kernel
def fma_k(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = tk.fma(a[i], b[i], c[i])


def _f32_of_fraction(f):
    """The exact rational ``f`` rounded once to float32, half to even, with subnormals and
    overflow to inf (no floats on the way: an independent reference)."""
    from fractions import Fraction
    if f == 0:
        return np.float32(0.0)
    m = abs(f)
    e = max(m.numerator.bit_length() - m.denominator.bit_length() - 1, -126)
    while Fraction(2) ** (e + 1) <= m:
        e += 1
    while e > -126 and Fraction(2) ** e > m:
        e -= 1
    q = Fraction(2) ** (e - 23)                     # the float32 spacing at |f|
    n, r = divmod(m, q)
    n += 1 if r > q / 2 or (r == q / 2 and n % 2) else 0
    v = float(n * q)
    r = np.float32(np.inf) if v >= 2.0 ** 128 else np.float32(v)
    return -r if f < 0 else r


def _fma_cases(rng, n):
    """float32 (a, b, c) where one rounding of a * b + c differs from two: products over the
    whole exponent range, addends cancelling them to the last bits, subnormal results at a
    midpoint of the 2^-149 grid off by a tiny remainder, subnormal operands, overflow."""
    f32 = np.float32

    def rnd(k, lo, hi):
        return (rng.uniform(1, 2, k) * rng.choice([-1, 1], k) * 2.0 ** rng.integers(lo, hi, k)).astype(f32)

    k = n // 6
    out = [(rnd(k, -150, 127), rnd(k, -150, 127), rnd(k, -150, 127))]
    for lo, hi in ((-60, 60), (-90, -40)):          # c = -(a b rounded) +- a few ulps; tiny products
        a, b = rnd(k, lo, hi), rnd(k, lo, hi)
        with np.errstate(all="ignore"):
            p = (a.astype(np.float64) * b).astype(f32)
        m = np.maximum(np.abs(p).view(np.int32) + rng.integers(-3, 4, k).astype(np.int32), 1).view(f32)
        out.append((a, b, np.where(p > 0, -m, m)))
    a = ((1 + rng.choice([-1, 1], k) * 2.0 ** -rng.integers(1, 23, k).astype(float)) * 2.0 ** -75).astype(f32)
    b = (rng.choice([-1, 1], k) * 2.0 ** -75).astype(f32)
    def subnormal():
        return (rng.integers(1, 2 ** 23, k).astype(np.uint32) | (rng.integers(0, 2, k).astype(np.uint32) << 31)).view(f32)

    out.append((a, b, subnormal()))                # a b = +-2^-150 (1 +- 2^-j): midpoints, off by a bit
    out.append((subnormal(), rnd(k, -10, 40), rnd(k, -150, -100)))
    out.append((rnd(k, 60, 70), rnd(k, 60, 68), -rnd(k, 126, 128)))
    return [np.concatenate(x) for x in zip(*out)]


def test_fma_is_rounded_once_against_exact_rationals(gpu):
    """tk.fma is emulated on WebGPU (lavapipe's WGSL fma rounds the product first; fixed bug
    wgsl-fma-rounds-twice): bit for bit the exactly rounded a * b + c, subnormal results and
    overflow included. A subnormal result rounded twice (at 24 bits, then to the 2^-149 grid)
    would fail the midpoint cases."""
    from fractions import Fraction
    a, b, c = _fma_cases(np.random.default_rng(7), 4800)
    o = dev(np.zeros(a.size, np.float32), gpu)
    fma_k(gpu)(o, dev(a, gpu), dev(b, gpu), dev(c, gpu), ndrange=a.size)
    got = o.numpy()
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c)]
    want = np.array([_f32_of_fraction(f) for f in exact], np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    tiny = Fraction(2) ** -126
    sub = np.array([0 < abs(f) < tiny for f in exact])
    mid = np.array([f != 0 and abs(f) < tiny and (abs(f) / Fraction(2) ** -149) % 1 not in (0, Fraction(1, 2))
                    and abs((abs(f) / Fraction(2) ** -149) % 1 - Fraction(1, 2)) < Fraction(1, 2 ** 10) for f in exact])
    assert sub.sum() > 1000 and mid.sum() > 200 and np.isinf(want).sum() > 100     # the cases are there


def test_fma_special_operands_and_signed_zeros(gpu):
    """inf, NaN, zeros, float32 max, the smallest subnormal and normal in every combination: as
    the CPU's fmaf (C99 F.10.10.1: an exact finite product plus an infinity is that infinity,
    even where a * b alone overflows; an exact zero sum is +0; a nonzero product rounding to
    zero keeps its sign)."""
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.4028235e38, -3.4028235e38, 2.0 ** -149,
                   -(2.0 ** -149), 2.0 ** -126, 1.5, 2.0 ** 64, 2.0 ** -64], np.float32)
    a, b, c = (x.ravel() for x in np.meshgrid(sp, sp, sp))
    with np.errstate(all="ignore"):
        assert_agree(fma_k, gpu, [np.zeros(a.size, np.float32), a, b, c], a.size)
    o = dev(np.zeros(4, np.float32), gpu)
    f = np.float32
    fma_k(gpu)(o, dev(np.array([3e38, -2.0 ** -100, 2.0 ** -75, 1.0], f), gpu),
               dev(np.array([10.0, 2.0 ** -100, 2.0 ** -75, -(2.0 ** -149)], f), gpu),
               dev(np.array([-np.inf, 0.0, -0.0, 2.0 ** -149], f), gpu), ndrange=4)
    r = o.numpy()
    assert r[0] == -np.inf and r[1] == 0 and np.signbit(r[1]) and r[2] == 0 and not np.signbit(r[2]) \
        and r[3] == 0 and not np.signbit(r[3])


@tk.func
def fma_dot(x, y, n, c0):
    acc = c0
    for j in range(n):
        acc = tk.fma(x[j], y[j], acc)
    return acc


@tk.kernel
def fma_contexts(o, x: tk.Const, y: tk.Const, n):
    i = tk.index()
    acc = x[i]
    for j in range(n):                              # loop-carried, and through a @tk.func
        acc = tk.fma(x[j], y[(i + j) % n], acc)
    o[i, 0] = acc
    o[i, 1] = fma_dot(x, y, n, -acc)
    h = tk.float16(x[i])
    o[i, 2] = tk.fma(h, h, tk.float16(-acc))        # float16 operands: float32 fma


def test_fma_in_loops_functions_and_from_float16_matches_cpu(gpu):
    rng = np.random.default_rng(3)
    n = 257
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    y = (-x * (1 + rng.integers(-4, 5, n) * 2.0 ** -23)).astype(np.float32)   # near-cancelling products
    assert_agree(fma_contexts, gpu, [np.zeros((n, 3), np.float32), x, y, n], n)


# ----------------------------------------------------------------------------- packed 8/16-bit storage

@tk.kernel
def neighbours(out, x: tk.Const):
    i = tk.index()
    out[i] = x[i] * 3 + i          # each item writes its own byte / half-word of shared words


@tk.kernel
def neighbours_bool(out, x: tk.Const):
    i = tk.index()
    out[i] = x[i] != (i % 3 == 0)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.bool_, np.float16])
def test_packed_stores_from_neighbouring_items(gpu, dt):
    n = 4099
    x = (np.arange(n) % 7 > 2 if dt == np.bool_ else np.arange(n) % 7).astype(dt)
    sentinel = np.full(n + 5, 99 if dt != np.bool_ else True, dt)
    out = dev(sentinel, gpu)
    k = neighbours_bool if dt == np.bool_ else neighbours
    for _ in range(3):
        k(gpu, 64)(out, dev(x, gpu), ndrange=n)
    tk.synchronize(gpu)
    ref = sentinel.copy()
    k(tk.CPU(), 64)(ref, x, ndrange=n)
    np.testing.assert_array_equal(out.numpy(), ref)


@tk.kernel
def scatter_bytes(out, idx: tk.Const):
    i = tk.index()
    out[idx[i]] = tk.uint8(i % 251 + 1)


def test_packed_stores_in_random_order_lose_nothing(gpu):
    n = 1 << 14
    perm = np.random.default_rng(5).permutation(n).astype(np.int32)
    out = tk.zeros(n, tk.uint8, backend=gpu)
    scatter_bytes(gpu)(out, dev(perm, gpu), ndrange=n)
    ref = np.zeros(n, np.uint8)
    ref[perm] = (np.arange(n) % 251 + 1).astype(np.uint8)
    np.testing.assert_array_equal(out.numpy(), ref)


@tk.kernel
def half_ops(h, f: tk.Const, b):
    i = tk.index()
    h[i] = f[i] * 3 + tk.float16(0.1)
    b[i] = b[i] + f[i]


def test_float16_round_trips_like_numpy(gpu):
    bits = np.arange(1 << 16, dtype=np.uint16)
    allh = bits.view(np.float16)
    a = dev(allh, gpu)
    np.testing.assert_array_equal(a.numpy().view(np.uint16), bits)      # storage is exact

    @tk.kernel
    def f16_through_f32(dst, src: tk.Const, out32):
        i = tk.index()
        v = src[i]
        out32[i] = v
        dst[i] = v                 # float32 -> float16 again
    out = tk.zeros(1 << 16, tk.float16, backend=gpu)
    out32 = tk.zeros(1 << 16, tk.float32, backend=gpu)
    f16_through_f32(gpu)(out, a, out32, ndrange=1 << 16)
    want32 = allh.astype(np.float32)
    np.testing.assert_array_equal(out32.numpy().view(np.uint32), want32.view(np.uint32))
    finite = ~np.isnan(allh)
    np.testing.assert_array_equal(out.numpy().view(np.uint16)[finite], bits[finite])

    # float32 -> float16 rounding (nearest even, overflow, subnormals) against NumPy
    rng = np.random.default_rng(6)
    f = np.concatenate([rng.standard_normal(5000) * 10.0 ** rng.integers(-9, 6, 5000),
                        [65504, 65519.99, 65520, 1e9, -1e9, 2.0 ** -25, 2.0 ** -24 * 1.5, 5.96e-8, 0.0, -0.0,
                         np.inf, -np.inf]]).astype(np.float32)
    h = tk.zeros(f.size, tk.float16, backend=gpu)
    with np.errstate(over="ignore"):
        want = f.astype(np.float16).view(np.uint16)

    @tk.kernel
    def to_half(dst, src: tk.Const):
        i = tk.index()
        dst[i] = src[i]
    to_half(gpu)(h, dev(f, gpu), ndrange=f.size)
    np.testing.assert_array_equal(h.numpy().view(np.uint16), want)


def test_float16_and_bfloat16_arithmetic_match_cpu(gpu):
    f = np.linspace(-4, 4, 333).astype(np.float16)
    assert_agree(half_ops, gpu, [np.zeros(333, np.float16), f, np.full(333, 0.25, np.float16)], 333)
    mld = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(7).standard_normal(999).astype(mld.bfloat16)

    @tk.kernel
    def bf(y, x: tk.Const, z):
        i = tk.index()
        y[i] = x[i] * 1.7 + 0.3
        z[i] = tk.float8_e4m3fn(x[i] * 8.0)
    assert_agree(bf, gpu, [np.zeros(999, mld.bfloat16), x, np.zeros(999, mld.float8_e4m3fn)], 999)


# ----------------------------------------------------------------------------- capabilities

def _line_of(fn, text):
    import inspect
    src, start = inspect.getsourcelines(fn)
    return next(start + k for k, ln in enumerate(src) if text in ln)


def test_float64_use_is_a_compile_error_naming_the_line(gpu):
    def body(A):
        i = tk.index()
        A[i] = A[i] + 1.0
        A[i] = tk.float32(tk.float64(A[i]) * 2.0)
    with pytest.raises(tk.CompileError) as e:
        tk.kernel(body)(gpu)(tk.zeros(4, backend=gpu), ndrange=4)
    assert "float64" in str(e.value) and str(_line_of(body, "tk.float64(")) in str(e.value)


def test_int64_use_is_a_compile_error_naming_the_line(gpu):
    def body(A, n):
        i = tk.index()
        k = i + n
        A[i] = tk.int32(k * 2)
    with pytest.raises(tk.CompileError) as e:
        tk.kernel(body)(gpu)(tk.zeros(4, tk.int32, backend=gpu), np.int64(3), ndrange=4)
    assert "int64" in str(e.value) and str(_line_of(body, "k = i + n")) in str(e.value)


def test_print_writes_lines_through_the_print_buffer(gpu, capfd):
    """tk.print was a CompileError on WebGPU (WGSL has no printf); it now prints through a
    buffer the launch reads back (docs/webgpu.md, "tk.print")."""
    def body(A):
        i = tk.index()
        tk.print("i =", i, A[i])
    tk.kernel(body)(gpu)(tk.asarray(np.arange(4, dtype=np.float32) / 4, backend=gpu), ndrange=4)
    assert sorted(capfd.readouterr().out.splitlines()) == [f"i = {k} {'%g' % (k / 4)}" for k in range(4)]


def test_python_floats_and_ints_are_32_bit(gpu):
    @tk.kernel
    def lit(out, x: tk.Const):
        i = tk.index()
        out[i] = x[i] / 3 + 1 / 3          # int / int would be float64 on the CPU: float32 here
    out = tk.zeros(4, backend=gpu)
    lit(gpu)(out, dev(np.arange(4, dtype=np.int32), gpu), ndrange=4)
    np.testing.assert_allclose(out.numpy(), np.arange(4) / 3 + 1 / 3, rtol=1e-6)


# ----------------------------------------------------------------------------- random numbers

@tk.kernel
def draws(u, g, b, key):
    i = tk.index()
    u[i] = tk.random.uniform(key, i)
    g[i] = tk.random.normal(key, i)
    b[i] = tk.random.bits(key, i + 1000)


def test_random_matches_the_host_functions(gpu):
    n = 4096
    key = tk.random.key(7)
    u, g, b = tk.zeros(n, backend=gpu), tk.zeros(n, backend=gpu), tk.zeros(n, tk.uint32, backend=gpu)
    draws(gpu)(u, g, b, key, ndrange=n)
    i = np.arange(n)
    np.testing.assert_array_equal(u.numpy(), tk.random.uniform(key, i))
    np.testing.assert_array_equal(b.numpy(), tk.random.bits(key, i + 1000))
    np.testing.assert_allclose(g.numpy(), tk.random.normal(key, i), rtol=2e-6, atol=2e-6)


# ----------------------------------------------------------------------------- atomics

@tk.kernel
def atomics(ia, ua, fa, x: tk.Const, xf: tk.Const):
    i = tk.index()
    v = x[i]
    tk.atomic_add(ia, 0, v)
    tk.atomic_sub(ia, 1, v)
    tk.atomic_min(ia, 2, v)
    tk.atomic_max(ia, 3, v)
    tk.atomic_and(ua, 0, tk.uint32(v) | 0xFFFF0000)
    tk.atomic_or(ua, 1, tk.uint32(1) << (tk.uint32(v) % 32))
    tk.atomic_xor(ua, 2, tk.uint32(v))
    tk.atomic_add(fa, 0, xf[i])
    tk.atomic_sub(fa, 1, xf[i])
    tk.atomic_min(fa, 2, xf[i])
    tk.atomic_max(fa, 3, xf[i])


def test_atomics_int_uint_and_float_cas_loops(gpu):
    rng = np.random.default_rng(8)
    n = 5000
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    xf = (rng.random(n) * 4 - 2).astype(np.float32)
    ia = dev(np.array([0, 0, 1 << 30, -(1 << 30)], np.int32), gpu)
    ua = dev(np.array([0xFFFFFFFF, 0, 0, 0], np.uint32), gpu)
    fa = dev(np.array([0, 0, 100, -100], np.float32), gpu)
    atomics(gpu)(ia, ua, fa, dev(x, gpu), dev(xf, gpu), ndrange=n)
    np.testing.assert_array_equal(ia.numpy(), [x.sum(), -x.sum(), x.min(), x.max()])
    u = x.astype(np.uint32)
    want_and = np.bitwise_and.reduce(u | np.uint32(0xFFFF0000))
    want_or = np.bitwise_or.reduce(np.uint32(1) << (u % 32))
    np.testing.assert_array_equal(ua.numpy(), [want_and, want_or, np.bitwise_xor.reduce(u), 0])
    f = fa.numpy()
    np.testing.assert_allclose(f[:2], [xf.sum(dtype=np.float64), -xf.sum(dtype=np.float64)], rtol=1e-4)
    assert f[2] == xf.min() and f[3] == xf.max()


@tk.kernel
def tickets(counter, out):
    out[tk.index()] = tk.atomic_add(counter, 0, 1)


@tk.kernel
def cas_claim(slots, owner):
    i = tk.index()
    k = i % 16
    if tk.atomic_cas(slots, k, 0, i + 1) == 0:      # exactly one item wins each slot
        owner[k] = i + 1
    old = tk.atomic_exchange(slots, 16, i)
    owner[16 + i % 2] = old * 0 + 1


def test_atomic_return_values_cas_and_exchange(gpu):
    n = 4096
    counter, out = tk.zeros(1, tk.int32, backend=gpu), tk.zeros(n, tk.int32, backend=gpu)
    tickets(gpu)(counter, out, ndrange=n)
    np.testing.assert_array_equal(np.sort(out.numpy()), np.arange(n))
    slots, owner = tk.zeros(17, tk.int32, backend=gpu), tk.zeros(18, tk.int32, backend=gpu)
    cas_claim(gpu)(slots, owner, ndrange=1000)
    s, o = slots.numpy(), owner.numpy()
    np.testing.assert_array_equal(s[:16], o[:16])
    assert ((s[:16] - 1) % 16 == np.arange(16)).all()


@tk.kernel
def local_float_atomics(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    acc = tk.localmem(tk.float32, (2,))
    if lid < 2:
        acc[lid] = 0.0
    tk.synchronize()
    tk.atomic_add(acc, 0, x[tk.index()])
    tk.atomic_max(acc, 1, x[tk.index()])
    tk.synchronize()
    if lid == 0:
        out[tk.index(tk.Group, tk.Linear), 0] = acc[0]
        out[tk.index(tk.Group, tk.Linear), 1] = acc[1]


def test_float_atomics_on_local_memory(gpu):
    x = np.random.default_rng(9).random(64 * 10).astype(np.float32)
    out = tk.zeros((10, 2), backend=gpu)
    local_float_atomics(gpu, 64)(out, dev(x, gpu), ndrange=x.size)
    g = x.reshape(10, 64)
    np.testing.assert_allclose(out.numpy()[:, 0], g.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(out.numpy()[:, 1], g.max(1))


# ----------------------------------------------------------------------------- workgroups

@tk.kernel
def colls(out, x: tk.Const, fx: tk.Const):
    i = tk.index()
    v = x[i]
    out[i, 0] = tk.group_reduce(v, "add")
    out[i, 1] = tk.group_reduce(v, "min")
    out[i, 2] = tk.group_reduce(v, "max")
    out[i, 3] = tk.group_scan(v, "add")
    out[i, 4] = tk.group_scan(v, "add", inclusive=False)
    out[i, 5] = tk.group_reduce(v & 7, "or") + tk.group_reduce(v | 8, "and")
    out[i, 6] = tk.int32(tk.group_reduce(v > 0, "and")) + 2 * tk.int32(tk.group_reduce(v > 90, "or"))
    out[i, 7] = tk.int32(tk.group_reduce(fx[i], "add") * 16.0)


@pytest.mark.parametrize("wg,n", [(32, 32 * 5), (100, 650), (64, 1000)])
def test_collectives_match_cpu_with_partial_groups(gpu, wg, n):
    rng = np.random.default_rng(10)
    x = rng.integers(-100, 100, n).astype(np.int32)
    fx = (rng.integers(-64, 64, n) / 16).astype(np.float32)
    assert_agree(colls, gpu, [np.zeros((n, 8), np.int32), x, fx], n, wg)


@tk.kernel
def early_exit_grouped(out, x: tk.Const, n):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.int32, (64,))
    buf[lid] = 0
    if i >= n:
        return                              # an item-level return before a barrier
    buf[lid] = x[i]
    for r in range(3):
        tk.synchronize()
        if x[i] % 5 == r:
            out[i] = r * 1000 + buf[(lid + 1) % 64]
            return                          # inside a group-level loop with barriers
        tk.synchronize()
        buf[lid] = buf[lid] + 1
    out[i] = -buf[lid]


def test_returns_inside_grouped_kernels(gpu):
    x = np.random.default_rng(11).integers(0, 100, 640).astype(np.int32)
    assert_agree(early_exit_grouped, gpu, [np.full(700, 7, np.int32), x, 600], 700, 64)


@tk.func
def find_first(x, start, n, target):
    for k in range(start, n):
        j = 0
        while True:
            j += 1
            if j > 2:
                break
            if x[k] == target + j - 1:
                return k                     # leaves two loops and the function
    return -1


@tk.func
def classify(v):
    if v < 0:
        return 0
    if v < 10:
        return 1
    return 2


@tk.kernel
def nested_funcs(out, x: tk.Const, n):
    i = tk.index()
    out[i, 0] = find_first(x, i, n, x[i] + 1)
    out[i, 1] = classify(x[i] - 20) + 10 * classify(find_first(x, 0, n, 50))
    t = 0
    k = 0
    while k < 20:
        k += 1
        if k % 3 == 0:
            continue
        if k * x[i] > 500:
            break
        t += k
    out[i, 2] = t


def test_function_exits_from_nested_loops(gpu):
    x = np.random.default_rng(12).integers(0, 60, 300).astype(np.int32)
    assert_agree(nested_funcs, gpu, [np.zeros((300, 3), np.int32), x, 300], 300)


@tk.kernel
def tiled(C, A: tk.Const, B: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    As = tk.localmem(tk.float16, (T, T))     # narrow local memory holds float16-rounded values
    Bs = tk.localmem(tk.float32, (T, T))
    acc = tk.float32(0)
    for t in range(0, A.shape[1], T):
        As[li, lj] = A[i, t + lj] if i < A.shape[0] else 0.0
        Bs[li, lj] = B[t + li, j] if j < B.shape[1] else 0.0
        tk.synchronize()
        for k in range(T):
            acc += As[li, k] * Bs[k, lj]
        tk.synchronize()
    C[i, j] = acc


def test_2d_tiles_with_local_memory_match_cpu(gpu):
    rng = np.random.default_rng(13)
    a = rng.random((37, 32), dtype=np.float32)
    b = rng.random((32, 29), dtype=np.float32)
    assert_agree(tiled, gpu, [np.zeros((37, 29), np.float32), a, b, 8], (37, 29), (8, 8), rtol=1e-6)


@tk.kernel
def where3(A, L):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    A[i, j, k] = i * 10000 + j * 100 + k
    L[i, j, k] = tk.index(tk.Global, tk.Linear) + 1000000 * tk.index(tk.Group, tk.Linear)


def test_3d_ranges_and_large_dispatches(gpu):
    shape = (9, 30, 40)
    ndr = (range(1, 8), range(2, 28, 3), range(0, 40))
    assert_agree(where3, gpu, [np.zeros(shape, np.int32), np.zeros(shape, np.int32)], ndr, (2, 4, 8))
    n = 65536 * 4 + 17                        # more groups than one dispatch dimension holds
    A = tk.zeros(n, backend=gpu)

    @tk.kernel
    def fill(A):
        A[tk.index()] = tk.float32(tk.index())
    fill(gpu, 2)(A, ndrange=n)
    np.testing.assert_array_equal(A.numpy(), np.arange(n, dtype=np.float32))


@tk.kernel
def private_and_select(out, x: tk.Const, counter):
    i = tk.index()
    p = tk.private(tk.int16, (4,))
    for k in range(4):
        p[k] = tk.int16(x[i] * (k + 1))
    s = p[0] + p[1] + p[2] + p[3]
    out[i, 0] = s
    # only the chosen side runs (and only the right side of `and` when needed)
    out[i, 1] = tk.atomic_add(counter, 0, 1) * 0 + 1 if x[i] > 50 else 0
    out[i, 2] = 1 if x[i] > 90 and tk.atomic_add(counter, 1, 1) >= 0 else 0


def test_private_arrays_and_conditional_atomics(gpu):
    x = np.random.default_rng(14).integers(0, 100, 999).astype(np.int32)
    out, counter = tk.zeros((999, 3), tk.int32, backend=gpu), tk.zeros(2, tk.int32, backend=gpu)
    private_and_select(gpu)(out, dev(x, gpu), counter, ndrange=999)
    o = out.numpy()
    np.testing.assert_array_equal(o[:, 0], (x * 10).astype(np.int16))
    np.testing.assert_array_equal(o[:, 1], (x > 50).astype(np.int32))
    np.testing.assert_array_equal(counter.numpy(), [(x > 50).sum(), (x > 90).sum()])


# ----------------------------------------------------------------------------- streams, events, debug

@tk.kernel
def add_from(A, B: tk.Const):
    i = tk.index()
    A[i] += B[i]


def test_streams_and_events_order_work(gpu):
    n = 1 << 14
    A = tk.zeros(n, backend=gpu)
    ones = tk.ones(n, backend=gpu)
    s1, s2 = gpu.stream(priority=tk.High), gpu.stream(priority=tk.Low)
    evs = [add_from(gpu)(A, ones, ndrange=n, stream=s1) for _ in range(20)]
    s2.wait(evs[-1])
    B = tk.zeros(n, backend=gpu)
    ev = add_from(gpu)(B, A, ndrange=n, stream=s2)
    assert isinstance(ev, tk.Event)
    ev.wait()
    assert ev.done() and all(e.done() or e.wait() is None for e in evs)
    np.testing.assert_array_equal(B.numpy(), np.full(n, 20.0, np.float32))
    C = tk.zeros(n, backend=gpu)
    ev = tk.copyto(C, B, stream=s1)
    s1.synchronize()
    assert ev.done()
    np.testing.assert_array_equal(C.numpy(), B.numpy())


def test_debug_mode_bounds_checks(gpu):
    @tk.kernel
    def oob(A):
        A[tk.index() + 2] = 1.0
    b = WebGPU(debug=True)
    with pytest.raises(IndexError, match=r"oob.*\(8,\)"):
        oob(b)(tk.zeros(8, backend=b), ndrange=8)
    A = tk.zeros(8, backend=b)

    @tk.kernel
    def fine(A):
        A[tk.index()] = 1.0
    fine(b)(A, ndrange=8)
    np.testing.assert_array_equal(A.numpy(), np.ones(8, np.float32))


@tk.kernel
def mixed_compares(out, u: tk.Const, s: tk.Const, b: tk.Const):
    i = tk.index()
    out[i, 0] = 1 if u[i] < i - 300 else 0          # uint32 against a (weak) Python int
    out[i, 1] = 1 if s[i] >= i else 0               # int8 against a Python int
    out[i, 2] = 1 if b[i] > i % 2 else 0            # uint8 against a Python int
    out[i, 3] = 1 if u[i] != 4000000000 else 0      # a literal beyond int32
    g = tk.uniform(s[i] * 2)                        # item 0 of the group evaluates it
    out[i, 4] = g


def test_mixed_sign_comparisons_and_uniform_are_exact(gpu):
    rng = np.random.default_rng(15)
    n = 600
    u = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    u[:3] = [0, 4000000000, 5]
    s = rng.integers(-128, 128, n).astype(np.int8)
    b = rng.integers(0, 3, n).astype(np.uint8)
    assert_agree(mixed_compares, gpu, [np.zeros((n, 5), np.int32), u, s, b], n, 64)


@tk.kernel
def loops(out, n, step):
    i = tk.index()
    c = 0
    for k in range(2147483000 - i, 2147483647, step):     # ends near INT32_MAX: no overflow
        c += 1
    for j in range(i, -5, -3):
        c += j
    for m in range(0, n, 0 - step):                         # a run-time negative step: no trips
        c += 1000
    for u in range(tk.uint8(250), tk.uint8(255)):
        c += tk.int32(u)
    for q in range(i % 7, 127, 7):
        c += tk.int32(tk.int8(q))
    out[i] = c


def test_range_loops_count_trips_without_overflow(gpu):
    assert_agree(loops, gpu, [np.zeros(64, np.int32), 10, 100], 64)


def test_too_much_local_memory_is_a_compile_error_at_the_localmem_line(gpu):
    def body(out, N: tk.constexpr):
        buf = tk.localmem(tk.float32, (N,))
        buf[tk.index(tk.Local, tk.Linear)] = 1.0
        tk.synchronize()
        out[tk.index()] = buf[0]
    limit = gpu.limits["max-compute-workgroup-storage-size"]
    with pytest.raises(tk.CompileError) as e:
        tk.kernel(body)(gpu, 64)(tk.zeros(64, backend=gpu), limit // 4 + 1, ndrange=64)
    assert str(_line_of(body, "tk.localmem")) in str(e.value) and "workgroup memory" in str(e.value)


def test_a_host_stream_can_wait_for_a_webgpu_event(gpu):
    import threading
    x = tk.asarray(np.ones(4096, np.float32), backend=gpu)
    y = tk.asarray(np.zeros(4096, np.float32), backend=gpu)
    ev = saxpy(gpu)(y, 2.0, x, ndrange=4096)
    s = tk.CPU().stream()
    s.wait(ev)
    ran = threading.Event()
    s.submit(ran.set)
    assert ran.wait(30), "the host stream never ran the job queued behind the device event"
    assert y.numpy()[0] == 2.0


def _rss_mib() -> float:
    import os
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_dropped_arrays_free_device_memory_without_a_launch(gpu):
    # lavapipe's device memory is host memory: 256 dropped 1 MiB arrays must not pile up
    # (wgpu freed them only at the next submission, i.e. the next launch)
    tk.zeros(4, tk.float32, backend=gpu)
    before = _rss_mib()
    for _ in range(256):
        a = tk.zeros(1 << 18, tk.float32, backend=gpu)
        del a
    assert _rss_mib() - before < 96


@tk.kernel
def _scale(o, x: tk.Const):
    i = tk.index()
    o[i] = x[i] * 3.0


def test_array_dropped_while_a_launch_uses_it_keeps_its_data(gpu):
    n = 1 << 16
    o = tk.zeros(n, tk.float32, backend=gpu)
    s = gpu.stream()
    for k in range(4):
        x = dev(np.full(n, k + 1, np.float32), gpu)
        _scale(gpu)(o, x, ndrange=n, stream=s)
        del x                                     # released with the launch still pending
        big = [tk.zeros(1 << 18, tk.float32, backend=gpu) for _ in range(8)]
        del big
        s.synchronize()
        np.testing.assert_array_equal(o.numpy(), np.full(n, 3.0 * (k + 1), np.float32))


def test_copyto_onto_itself_is_a_no_op(gpu):
    """tk.copyto(a, a) keeps a (WebGPU refuses a buffer copy onto itself: it raised a
    GPUValidationError), with and without a stream."""
    a = tk.asarray(np.arange(6, dtype=np.float32), backend=gpu)
    tk.copyto(a, a).wait()
    ev = tk.copyto(a, a, stream=gpu.stream())
    ev.wait()
    np.testing.assert_array_equal(a.numpy(), np.arange(6))
