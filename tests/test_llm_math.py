"""tinykernels.llm's CPU fast paths: the vectorizable float32 exp (``_math.exp_f32``) against
NumPy in float64 (<= 1 ulp over the whole float32 range, specials exact), the branch-free
float16 decoder of the quantized blocks (every one of the 65536 bit patterns), the host
GEMV's chunked block loop at every remainder, and that llm.exp / llm.swiglu on the CPU
compute with exp_f32 (the scalar libm ``expf`` kept their loops from vectorizing)."""
import importlib

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from llm_helpers import backends, dev

M = importlib.import_module("tinykernels.llm._math")
Q = importlib.import_module("tinykernels.llm.quant")
MM = importlib.import_module("tinykernels.llm.matmul")


@tk.kernel
def _exp_k(out, x):
    i = tk.index()
    out[i] = M.exp_f32(x[i])


_exp_k_fast = tk.kernel(fastmath=True)(_exp_k.fn)


@tk.kernel
def _exp_neg_k(out, x):
    i = tk.index()
    out[i] = M.exp_neg_f32(x[i])


@tk.kernel
def _half_k(out, data):
    i = tk.index()
    out[i] = Q.half_at(data, 0, 2 * i)


def _run(kernel, be, out, *ins):
    """Launch ``kernel(out, *ins)`` over ``out.size`` items on backend ``be`` (NumPy arrays on
    the CPU, tk.Arrays elsewhere); returns out as NumPy."""
    b = dev(be)
    if be == "CPU":
        kernel(b)(out, *ins, ndrange=out.size)
        return out
    g = tk.asarray(out, backend=b)
    kernel(b)(g, *(tk.asarray(a, backend=b) for a in ins), ndrange=out.size)
    return g.numpy()


def _ulps(a, b):
    """|a - b| in float32 ulps (bit distance of same-signed values; both finite or equal infs)."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def _exp_inputs(n):
    rng = np.random.default_rng(5)
    specials = np.array([0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, 88.72283, 88.72284, 89.0, 104.0, 1e30, -87.33655,
                         -87.34, -103.27, -103.28, -103.97, -104.0, -105.0, -1e30, np.inf, -np.inf], np.float32)
    return np.concatenate([np.linspace(-110, 95, n, dtype=np.float32), specials,
                           (rng.standard_normal(n // 2) * 30).astype(np.float32)])


@pytest.mark.parametrize("be", backends()[:2])          # CPU (compiled C) and the interpreter
def test_exp_f32_within_one_ulp_everywhere(be):
    x = _exp_inputs(400_001 if be == "CPU" else 4001)
    got = _run(_exp_k, be, np.empty_like(x), x)
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)      # correctly rounded float32
    assert (_ulps(got, want) <= 1).all(), x[_ulps(got, want) > 1][:5]
    assert got[x == np.inf][0] == np.inf and got[x == -np.inf][0] == 0 and got[x == 1e30][0] == np.inf
    nan = np.array([np.nan, -np.nan], np.float32)
    out = _run(_exp_k, be, np.empty_like(nan), nan)
    assert np.isnan(out).all()


@pytest.mark.parametrize("be", backends()[:2])
def test_exp_neg_f32_within_one_ulp_for_non_positive_x(be):
    """The softmax / attention exponential (arguments x - max <= 0): within 1 ulp of the
    correctly rounded e**x from 0 down past the subnormal results to 0, -inf gives 0, NaN
    stays NaN; positive arguments up to the overflow are right too."""
    x = _exp_inputs(400_001 if be == "CPU" else 4001)
    x = np.concatenate([x[(x <= 100) | np.isnan(x)], np.float32([-np.inf, np.nan, -np.nan, -0.0, -1e-45])])
    got = _run(_exp_neg_k, be, np.empty_like(x), x)
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    ok = ~np.isnan(x)
    assert (_ulps(got[ok], want[ok]) <= 1).all(), x[ok][_ulps(got[ok], want[ok]) > 1][:5]
    assert got[x == -np.inf][0] == 0 and np.isnan(got[~ok]).all()
    assert (got[(x < -103.98) & ok] == 0).all() and (got[(x > -103.2) & (x < -87.4)] > 0).all()


def test_exp_f32_within_one_ulp_in_fastmath_kernels():
    """The flash attention kernel calls exp_f32 from a ``fastmath`` kernel: reassociation and
    FMA contraction must not break its rounding steps (a ``(x + 1.5 * 2**23) - 1.5 * 2**23``
    rounding would be folded to ``x``)."""
    x = _exp_inputs(400_001)
    got = _run(_exp_k_fast, "CPU", np.empty_like(x), x)
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    assert (_ulps(got, want) <= 1).all(), x[_ulps(got, want) > 1][:5]
    assert got[x == np.inf][0] == np.inf and got[x == -np.inf][0] == 0


@tk.kernel
def _swiglu_k(out, a, b):
    i = tk.index()
    out[i] = a[i] * (1 / (1 + M.exp_f32(-a[i]))) * b[i]


def test_cpu_exp_and_swiglu_use_exp_f32():
    """llm.exp and llm.swiglu on the CPU compute with exp_f32 (bit for bit), not the C
    library's scalar expf (one call per element, which kept the loops from vectorizing);
    float64 and the interpreter keep math.exp."""
    x = _exp_inputs(20001)
    y = np.random.default_rng(6).standard_normal(x.size).astype(np.float32)
    want = _run(_exp_k, "CPU", np.empty_like(x), x)
    assert np.array_equal(llm.exp(x).view(np.uint32), want.view(np.uint32))
    with np.errstate(all="ignore"):
        want = _run(_swiglu_k, "CPU", np.empty_like(x), x, y)
    got = llm.swiglu(x, y)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)].view(np.uint32), want[~np.isnan(want)].view(np.uint32))
    assert M.use_poly(tk.CPU(), np.float32) and M.use_poly(tk.CPU(), np.float16)
    assert not M.use_poly(tk.CPU(), np.float64) and not M.use_poly(tk.Interpreter(), np.float32)


@pytest.mark.parametrize("be", backends()[:2])
def test_half_at_decodes_every_float16(be):
    """Every float16 bit pattern (zeros, subnormals, normals, infs, NaNs) decodes to the
    float32 NumPy gives."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    data = bits.astype("<u2").view(np.uint8).reshape(1, -1).copy()
    out = _run(_half_k, be, np.empty(bits.size, np.float32), data)
    want = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    assert (np.isnan(out) == nan).all()
    assert np.array_equal(out[~nan].view(np.uint32), want[~nan].view(np.uint32))   # -0.0 too


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
@pytest.mark.parametrize("blocks", [1, MM.CHUNK - 1, MM.CHUNK, MM.CHUNK + 1, 3 * MM.CHUNK + 5])
def test_host_gemv_every_chunk_remainder(qtype, blocks):
    """The host GEMV decodes CHUNK block scales at a time, then a tail: every remainder
    multiplies by exactly dequantize(a) (float32 sums in 32 lanes, within the sum bound)."""
    rng = np.random.default_rng(blocks)
    k = 32 * blocks
    a = llm.quantize(rng.standard_normal((7, k)).astype(np.float32), qtype)
    x = rng.standard_normal(k).astype(np.float32)
    w64 = llm.dequantize(a).astype(np.float64)
    got = llm.matmul(a, x)
    ref = w64 @ x
    bound = (k + 2) * 2.0 ** -24 * (np.abs(w64) @ np.abs(x.astype(np.float64)))
    assert (np.abs(got - ref) <= bound).all()


# ----------------------------------------------------------------------------- bit-level conversions

@tk.kernel
def _f16_bits_k(out, x):
    i = tk.index()
    out[i] = M.f16_bits(x[i])


@tk.kernel
def _e4m3_k(out, x, s):
    i = tk.index()
    out[i] = M.f16_bits(M.e4m3_value(x[i]) * s)


def _f32_patterns(n):
    """Random bit patterns, a sweep over every exponent, and the boundaries of each branch of
    the float16 rounding (ties, overflow, the subnormal range, infinities, NaN payloads)."""
    r = np.random.default_rng(6)
    edges = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
                      0x7F801FFF, 0x7F802000, 0x477FEFFF, 0x477FF000, 0x477FE000, 0x38800000, 0x387FFFFF,
                      0x387FF000, 0x33000000, 0x33000001, 0x32FFFFFF, 0x33800000, 0x33C00000, 0x00000001,
                      0x3F801000, 0x3F803000, 0x3F800FFF], np.uint32)
    return np.concatenate([edges, r.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32),
                           np.arange(0, 2 ** 32, 2 ** 32 // n + 1, dtype=np.uint64).astype(np.uint32)]).view(np.float32)


@pytest.mark.parametrize("be", backends())
def test_f16_bits_is_numpys_rounding(be):
    x = _f32_patterns(3000 if be == "INTERP" else 400_000)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).view(np.uint16).astype(np.int32)
    np.testing.assert_array_equal(_run(_f16_bits_k, be, np.zeros(x.size, np.int32), x), want)


@pytest.mark.parametrize("be", backends())
def test_e4m3_value_every_byte(be):
    ml = pytest.importorskip("ml_dtypes")
    b = np.arange(256, dtype=np.uint8)
    for s in (1.0, 0.37, 1e-3, 300.0, -2.0):
        with np.errstate(all="ignore"):
            want = (b.view(ml.float8_e4m3fn).astype(np.float32) * np.float32(s)).astype(np.float16)
        bk = dev(be)
        out = tk.zeros(256, tk.int32, backend=bk)
        _e4m3_k(bk)(out, tk.asarray(b, backend=bk), s, ndrange=256)
        np.testing.assert_array_equal(out.numpy(), want.view(np.uint16).astype(np.int32))


def test_cpu_cast_and_fp8_dequantize_take_the_flat_kernels(monkeypatch):
    """On the CPU, float32 -> float16 casts of contiguous host arrays run the flat kernel (its
    float16 stores vectorize: the prelude's converter is branch-free) and fp8_dequantize the
    branch-free bit-level kernel; results are NumPy's bit for bit."""
    ml = pytest.importorskip("ml_dtypes")
    C = importlib.import_module("tinykernels.llm._common")
    seen = []
    real = C.launch
    monkeypatch.setattr(C, "launch", lambda k, *a, **kw: (seen.append(k), real(k, *a, **kw))[1])
    # the general path's choice (the host fast path launches the same flat kernel itself, not
    # through _common.launch; tests/test_llm_fastpath.py compares the two paths bit for bit)
    monkeypatch.setattr(C, "host_args", lambda *a: None)
    x = _f32_patterns(5000)[:4 * 999].reshape(4, 999)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(llm.cast(x, np.float16).view(np.uint16), x.astype(np.float16).view(np.uint16))
        f8 = np.arange(256, dtype=np.uint8).view(ml.float8_e4m3fn).reshape(2, 128)
        want = (f8.astype(np.float32) * np.float32(0.75)).astype(np.float16)
    np.testing.assert_array_equal(llm.fp8_dequantize(f8, 0.75).view(np.uint16), want.view(np.uint16))
    names = [getattr(k, "__name__", repr(k)) for k in seen]
    assert any("_unary_flat" in n for n in names) and any("_dequant_bits" in n for n in names), names
    # strided: the general kernel
    seen.clear()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(llm.cast(x[:, ::2], np.float16), x[:, ::2].astype(np.float16))
    assert not any("_unary_flat" in getattr(k, "__name__", repr(k)) for k in seen)


def test_cpu_fp8_dequantize_table_path_matches_the_arithmetic_bit_for_bit(monkeypatch):
    """Large fp8_dequantize inputs on the CPU go through a 256-entry table (_dequant_table,
    made once per scale, then _dequant_lookup); every byte, at scales that give subnormal,
    overflowing, negative and NaN results, matches ml_dtypes/NumPy and the one-launch kernel
    bit for bit."""
    ml = pytest.importorskip("ml_dtypes")
    C = importlib.import_module("tinykernels.llm._common")
    fp8 = importlib.import_module("tinykernels.llm.fp8")
    seen = []
    real = C.launch
    monkeypatch.setattr(C, "launch", lambda k, *a, **kw: (seen.append(getattr(k, "__name__", repr(k))), real(k, *a, **kw))[1])
    monkeypatch.setattr(fp8, "LOOKUP_MIN", 1 << 16)    # forced (by default only with AVX-512BW)
    n = fp8.LOOKUP_MIN + 77
    b = np.random.default_rng(5).integers(0, 256, n).astype(np.uint8)
    b[:256] = np.arange(256)
    x = b.view(ml.float8_e4m3fn).reshape(1, n)
    for s in (1.0, 0.37, 1e-3, 1e-7, 300.0, -2.0, 1e30, float("inf"), float("nan")):
        with np.errstate(all="ignore"):
            want = (x.astype(np.float32) * np.float32(s)).astype(np.float16).view(np.uint16)
        seen.clear()
        got = llm.fp8_dequantize(x, s).view(np.uint16)
        assert any("_dequant_lookup" in k for k in seen) and not any("_dequant_bits" in k for k in seen), seen
        small = llm.fp8_dequantize(x[:, :300], s).view(np.uint16)
        assert any("_dequant_bits" in k for k in seen), seen
        if s == s:       # a NaN scale: NaN results whose sign NumPy and C may order differently
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got[:, :300], small)
    # on a stream (the table is made before the lookups are queued)
    stream = tk.backend("CPU").stream()
    out = np.empty_like(x, dtype=np.float16)
    llm.fp8_dequantize(x, 0.5, out=out, stream=stream)
    stream.synchronize()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, (x.astype(np.float32) * np.float32(0.5)).astype(np.float16))


@pytest.mark.parametrize("n", [1, 31, 33, 256, 4096 + 77, 100003])
def test_cpu_fp8_dequantize_special_bits_on_both_routes(monkeypatch, n):
    """Every e4m3 byte (NaN 0x7f/0xff, -0.0 0x80, the largest and the subnormals) at scales
    of both signed zeros, both infinities, a NaN, subnormal and overflowing results: the table
    route (on this CPU: AVX-512BW's register table where the target has it, any length, output
    and input misaligned by one element) gives the arithmetic kernel's bits, NaN signs
    included; 0.0 and -0.0 have tables of their own (the cache key is the scale's bits)."""
    ml = pytest.importorskip("ml_dtypes")
    fp8 = importlib.import_module("tinykernels.llm.fp8")
    rng = np.random.default_rng(n)
    b = rng.integers(0, 256, n + 1).astype(np.uint8)
    b[1:min(n, 256) + 1] = np.arange(min(n, 256))
    for s in (0.0, -0.0, float("inf"), -float("inf"), float("nan"), -1.0, 1e-7, 3e4, 0.37):
        x = b[1:].view(ml.float8_e4m3fn)
        monkeypatch.setattr(fp8, "LOOKUP_MIN", 1 << 62)
        want = llm.fp8_dequantize(x, s).view(np.uint16)
        monkeypatch.setattr(fp8, "LOOKUP_MIN", 1)
        buf = np.zeros(n + 2, np.float16)
        got = llm.fp8_dequantize(x, s, out=buf[1:n + 1]).view(np.uint16)
        np.testing.assert_array_equal(got, want)
        assert buf[0] == 0 and buf[-1] == 0
        if s == s:
            with np.errstate(all="ignore"):
                ref = (x.astype(np.float32) * np.float32(s)).astype(np.float16).view(np.uint16)
            ok = ~np.isnan(x.astype(np.float32) * np.float32(s))
            np.testing.assert_array_equal(got[ok], ref[ok])
            assert np.isnan(got[~ok].view(np.float16)).all()
    zero = b[1:2].copy()
    zero[0] = 0
    z = zero.view(ml.float8_e4m3fn)
    assert llm.fp8_dequantize(z, -0.0).view(np.uint16)[0] == 0x8000
    assert llm.fp8_dequantize(z, 0.0).view(np.uint16)[0] == 0


def test_cpu_fp8_dequantize_default_route(monkeypatch):
    """By default (LOOKUP_MIN None) large inputs take the table where the CPU kernels have
    AVX-512BW (fp8.REGISTER_TABLE_MIN elements and more), else the arithmetic kernel."""
    ml = pytest.importorskip("ml_dtypes")
    C = importlib.import_module("tinykernels.llm._common")
    fp8 = importlib.import_module("tinykernels.llm.fp8")
    from tinykernels.runtime.compiler import native_cpu_has
    assert fp8.LOOKUP_MIN is None
    seen = []
    real = C.launch
    monkeypatch.setattr(C, "launch", lambda k, *a, **kw: (seen.append(getattr(k, "__name__", repr(k))), real(k, *a, **kw))[1])
    x = np.arange(fp8.REGISTER_TABLE_MIN, dtype=np.uint32).astype(np.uint8).view(ml.float8_e4m3fn)
    llm.fp8_dequantize(x, 0.5)
    assert ("_dequant_lookup" if native_cpu_has("avx512bw") else "_dequant_bits") in seen[-1], seen
    llm.fp8_dequantize(x[:-1], 0.5)
    assert "_dequant_bits" in seen[-1], seen
