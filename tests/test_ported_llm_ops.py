"""SPEC 10 audited op by op in the manner of llama.cpp's test-backend-ops (every op at odd and
prime row lengths, one row and many, views, in-place, each backend against a float64 CPU
reference) and PyTorch's OpInfo sample inputs (empty and 0-d arrays, inf/NaN/-0.0/subnormal
and float16-overflowing values). Engineer llmaudit11; written from SPEC and the docs."""
import numpy as np
import pytest

try:
    import torch
except ImportError:                                   # the minimal install: those tests skip
    torch = None

import tinykernels as tk
from tinykernels import llm

from llm_helpers import backends, dev, get, skip_16bit

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

LENGTHS = (1, 3, 31, 33, 4097)
F32, F16 = np.float32, np.float16


def _on(a, b):
    return tk.asarray(a, backend=b)


def _extremes(n, dtype, rng):
    """``n`` values of ``dtype``: normal ones with inf, -inf, NaN, -0.0, a subnormal and the
    largest finite value mixed in (where ``n`` allows)."""
    x = rng.standard_normal(n).astype(dtype)
    fi = np.finfo(dtype)
    special = np.array([np.inf, -np.inf, np.nan, -0.0, fi.tiny / 4, fi.max, -fi.max], dtype)
    k = min(n, len(special))
    x[rng.permutation(n)[:k]] = special[:k]
    return x


def _same_nan_inf(got, ref):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    return fin


# --- elementwise: odd lengths, extreme values, ulp bounds against float64 ---------------------

UNARY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
         "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos}


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dt", [F32, F16])
def test_unary_ops_at_odd_lengths_with_extreme_values(name, op, dt):
    """Within 2 units of the dtype's last place of the float64 result (relative; absolute
    near 0 for sin/cos/tanh), with inf/NaN where NumPy has them and 0/inf where the result
    leaves the dtype's range."""
    skip_16bit(name, dt)
    b = dev(name)
    rng = np.random.default_rng(len(op))
    for n in LENGTHS:
        x = _extremes(n, dt, rng)
        if op in ("exp",):
            x[np.isfinite(x)] = np.clip(x[np.isfinite(x)], -120, 100)
        if op in ("sin", "cos"):
            x[np.isfinite(x)] = np.clip(x[np.isfinite(x)], -100, 100)
        with np.errstate(all="ignore"):
            ref = UNARY[op](x.astype(np.float64))
            ref_t = ref.astype(dt)                  # where the dtype overflows or flushes
        got = get(getattr(llm, op)(_on(x, b)))
        assert got.dtype == dt and got.shape == x.shape
        fin = _same_nan_inf(got, ref_t.astype(np.float64))
        eps = float(np.finfo(dt).eps)
        tiny = float(np.finfo(dt).smallest_subnormal)
        np.testing.assert_allclose(got[fin].astype(np.float64), ref[fin], rtol=2 * eps,
                                   atol=(2 * eps if op in ("sin", "cos", "tanh") else 2 * tiny),
                                   err_msg=f"{op} n={n}")


@pytest.mark.parametrize("name", backends())
def test_exp_log_overflow_and_underflow(name):
    b = dev(name)
    x = np.array([88.5, 89.0, 1000.0, -103.9, -104.0, -1000.0, np.inf, -np.inf, np.nan], F32)
    got = get(llm.exp(_on(x, b)))
    assert np.all(np.isinf(got[[1, 2, 6]])) and np.all(got[[1, 2, 6]] > 0)
    assert np.all(got[[5, 7]] == 0) and np.isnan(got[8])
    assert got[0] == pytest.approx(np.exp(np.float64(88.5)), rel=2e-7)
    assert got[3] == pytest.approx(np.exp(np.float64(-103.9)), abs=1.5e-45)   # subnormal kept
    y = np.array([0.0, -0.0, -1.0, np.inf, float(np.finfo(F32).smallest_subnormal), np.nan], F32)
    with np.errstate(all="ignore"):
        ref = np.log(y)
    got = get(llm.log(_on(y, b)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(got[[0, 1, 3]], ref[[0, 1, 3]])
    assert got[4] == pytest.approx(ref[4], rel=2e-7)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("fn, op", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                    ("div", np.divide), ("pow", np.power)])
def test_binary_ops_broadcast_views_and_in_place(name, fn, op):
    """Broadcasting up to 4-D (size-1 dims on both sides), a Python scalar, a transposed view
    as ``a``, and ``out=a`` (in place): bit-exact with NumPy in float32 (pow within 2 ulp)."""
    b = dev(name)
    rng = np.random.default_rng(3)
    a = (rng.random((2, 3, 1, 33)) + 0.5).astype(F32)
    c = (rng.random((3, 5, 1)) + 0.5).astype(F32)
    with np.errstate(all="ignore"):
        ref = op(a, c)
        ref_s = op(a, np.float32(1.75))
    rt = 2e-7 if fn == "pow" else 0
    np.testing.assert_allclose(get(getattr(llm, fn)(_on(a, b), _on(c, b))), ref, rtol=rt)
    np.testing.assert_allclose(get(getattr(llm, fn)(_on(a, b), 1.75)), ref_s, rtol=rt)
    t = np.ascontiguousarray(rng.random((33, 4)).astype(F32) + 0.5)
    view = t.T if name == "CPU" else llm.transpose(_on(t, b))     # a NumPy view on the CPU
    np.testing.assert_allclose(get(getattr(llm, fn)(view, 2.0)),
                               op(t.T, np.float32(2.0)), rtol=rt)
    inplace = _on(a.copy(), b)
    r = getattr(llm, fn)(inplace, 1.75, out=inplace)
    assert r is inplace
    np.testing.assert_allclose(get(inplace), ref_s, rtol=rt)


@pytest.mark.parametrize("fn", ["add", "exp", "softmax", "rms_norm", "swiglu", "tanh_grad", "cast"])
@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_out_of_the_wrong_shape_or_dtype_names_out(fn, bad):
    x = np.ones((3, 33), F32)
    odt = F32 if fn != "cast" else F16
    out = np.zeros((3, 32), odt) if bad == "shape" else np.zeros((3, 33), F16 if odt == F32 else F32)
    call = {"add": lambda: llm.add(x, x, out=out), "exp": lambda: llm.exp(x, out=out),
            "softmax": lambda: llm.softmax(x, out=out), "swiglu": lambda: llm.swiglu(x, x, out=out),
            "rms_norm": lambda: llm.rms_norm(x, np.ones(33, F32), out=out),
            "tanh_grad": lambda: llm.tanh_grad(x, x, out=out),
            "cast": lambda: llm.cast(x, F16, out=out)}[fn]
    with pytest.raises(ValueError, match="'out'"):
        call()
    assert not out.any()


def test_empty_and_zero_d_inputs():
    """Empty arrays give empty results (argmax of nothing is a ValueError naming x); 0-d
    arrays behave as NumPy's."""
    e = np.zeros((0, 5), F32)
    for f in (llm.exp, llm.tanh, llm.softmax, lambda v: llm.add(v, 1.0), lambda v: llm.cast(v, F16),
              lambda v: llm.rms_norm(v, np.ones(5, F32))):
        assert get(f(e)).shape == (0, 5)
    np.testing.assert_array_equal(get(llm.sum(np.zeros((3, 0), F32), -1)), np.zeros(3, F32))
    assert get(llm.softmax(np.zeros((3, 0), F32))).shape == (3, 0)
    assert get(llm.gather(np.ones((4, 3), F32), np.zeros(0, np.int32))).shape == (0, 3)
    with pytest.raises(ValueError, match="'x'"):
        llm.argmax(np.zeros(0, F32))
    assert float(get(llm.exp(np.array(1.0, F32)))) == np.float32(np.e)
    assert float(get(llm.mul(np.array(3.0, F32), np.array(2.0, F32)))) == 6.0


@needs_torch
def test_torch_cpu_tensors_in_and_out():
    x = torch.randn(5, 33)
    np.testing.assert_allclose(llm.softmax(x).numpy(), torch.softmax(x.double(), -1).numpy(), rtol=1e-6, atol=1e-8)
    xt = torch.randn(33, 5).T                               # non-contiguous
    np.testing.assert_allclose(get(llm.softmax(xt)), torch.softmax(xt.double(), -1).numpy(), rtol=1e-6, atol=1e-8)
    o = torch.empty(5, 33)
    assert llm.exp(x, out=o) is o
    np.testing.assert_allclose(o.numpy(), torch.exp(x.double()).numpy(), rtol=2e-7)


# --- softmax / rms_norm / sum: extreme rows, float16 with float32 accumulation ---------------

@needs_torch
@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [F32, F16])
def test_softmax_extreme_rows_match_torch(name, dt):
    """Rows with -inf entries, all -inf (NaN, as torch), a NaN, +inf (NaN, as torch), large
    float16 values that overflow a float16 sum: torch.softmax in float64 of the same values."""
    skip_16bit(name, dt)
    b = dev(name)
    big = float(np.finfo(dt).max)
    rows = [[0, -np.inf, 1, 2], [-np.inf] * 4, [np.nan, 0, 1, 2], [np.inf, 0, 1, 2],
            [big, big, -big, big], [-0.0, 0.0, -0.0, 0.0]]
    x = np.array(rows, dt)
    got = get(llm.softmax(_on(x, b))).astype(np.float64)
    ref = torch.softmax(torch.from_numpy(x.astype(np.float64)), -1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = ~np.isnan(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=2 * float(np.finfo(dt).eps), atol=1e-7)
    for n in LENGTHS:                      # many rows of odd length, float32 accumulation
        y = (np.random.default_rng(n).standard_normal((7, n)) * 4).astype(dt)
        ref = torch.softmax(torch.from_numpy(y.astype(np.float64)) * 0.5, -1).numpy()
        got = get(llm.softmax(_on(y, b), scale=0.5)).astype(np.float64)
        # float32: exp's argument x - max carries half an ulp of |x - max| (up to ~10 here),
        # the sum and division a few more: 32 ulps (test_llm_ported's bound, llm9)
        ulps = 32 if dt == F32 else 4
        np.testing.assert_allclose(got, ref, rtol=ulps * float(np.finfo(dt).eps), atol=float(np.finfo(dt).eps) / n)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [F32, F16])
def test_rms_norm_zeros_odd_lengths_residual_and_float16_range(name, dt):
    skip_16bit(name, dt)
    b = dev(name)
    eps = float(np.finfo(dt).eps)
    for n in LENGTHS:
        rng = np.random.default_rng(n)
        x = rng.standard_normal((3, n)).astype(dt)
        x[1] = 0                                           # a row of zeros: 0, not NaN
        w = rng.standard_normal(n).astype(dt)
        r = rng.standard_normal((3, n)).astype(dt)
        y, s = llm.rms_norm(_on(x, b), _on(w, b), eps=1e-5, residual=_on(r, b))
        s_ref = (x + r).astype(np.float64)                 # x + residual, rounded to dt
        np.testing.assert_array_equal(get(s), (x + r))
        ref = s_ref / np.sqrt(np.mean(s_ref ** 2, -1, keepdims=True) + 1e-5) * w
        np.testing.assert_allclose(get(y).astype(np.float64), ref, rtol=4 * eps, atol=4 * eps)
        z = get(llm.rms_norm(_on(np.zeros((2, n), dt), b), _on(w, b)))
        np.testing.assert_array_equal(z, np.zeros((2, n), dt))
    if dt == F16:                       # sum of squares far beyond float16's range: float32 accumulation
        big = np.full((1, 4097), 60000, F16)
        np.testing.assert_allclose(get(llm.rms_norm(_on(big, b), _on(np.ones(4097, F16), b))), 1.0, rtol=eps)


@pytest.mark.parametrize("name", backends())
def test_sum_float16_accumulates_in_float32_and_overflows_on_store(name):
    skip_16bit(name, F16)
    b = dev(name)
    x = np.full((2, 4097), 1.0, F16)
    x[1] = 60000
    got = get(llm.sum(_on(x, b), -1))
    assert got.dtype == F16
    assert got[0] == F16(4097) and np.isinf(got[1])       # 4097 is exact only in float32 steps


# --- argmax: NumPy's NaN and tie rules on every backend ---------------------------------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [F32, F16])
def test_argmax_nan_ties_and_signed_zero_as_numpy(name, dt):
    skip_16bit(name, dt)
    b = dev(name)
    rng = np.random.default_rng(7)
    cases = [np.array([1, np.nan, 5, np.nan], dt), np.array([np.nan, np.nan], dt),
             np.array([-0.0, 0.0, -0.0], dt), np.full(33, -np.inf, dt), np.array([3], dt)]
    for n in (31, 4097):
        x = rng.standard_normal(n).astype(dt)
        x[[n // 3, n - 1]] = 9                             # a tie: the first index
        cases.append(x)
        y = x.copy()
        y[n - 2] = np.nan                                  # a NaN wins over the max
        cases.append(y)
    for x in cases:
        got = llm.argmax(_on(x, b))
        g = get(got)
        assert g.shape == () and g.dtype == np.int32
        assert int(g) == int(np.argmax(x)), x


# --- gather: indices outside the table ----------------------------------------------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("idt", [np.int32, np.int64])
def test_gather_out_of_range_rows_are_zero_and_index_errors_in_debug(name, idt, monkeypatch):
    if name == "WEBGPU" and idt == np.int64:
        pytest.skip("WebGPU has no int64 (a TypeError, docs/webgpu.md)")
    b = dev(name)
    table = np.arange(5 * 33, dtype=F32).reshape(5, 33)
    idx = np.array([4, -1, 0, 5, 2, -6], idt)
    got = get(llm.gather(_on(table, b), _on(idx, b)))
    want = np.zeros((6, 33), F32)
    for i, k in enumerate(idx):
        if 0 <= k < 5:
            want[i] = table[k]
    np.testing.assert_array_equal(got, want)
    if name in ("CPU", "INTERP"):
        monkeypatch.setenv("TK_DEBUG", "1")
        bd = tk.backend(name)
        for bad in ([5], [-1]):
            with pytest.raises(IndexError):
                llm.gather(tk.asarray(table, backend=bd), tk.asarray(np.array(bad, idt), backend=bd))


# --- attention: odd sequence lengths, GQA ratios, causal with q_len != kv_len -------------------

def _attn_ref(q, k, v, causal):
    """float64 attention; causal: query i sees keys j <= i + Sk - Sq; a row seeing no key is 0
    (docs/llm.md)."""
    G = q.shape[1] // k.shape[1]
    k = np.repeat(k.astype(np.float64), G, 1)
    v = np.repeat(v.astype(np.float64), G, 1)
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    Sq, Sk = q.shape[2], k.shape[2]
    if causal:
        s = np.where(np.arange(Sk)[None, :] <= np.arange(Sq)[:, None] + Sk - Sq, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    den = p.sum(-1, keepdims=True)
    return np.where(den > 0, (p @ v) / np.where(den > 0, den, 1), 0)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("Sq, Sk, H, Hk, D", [(1, 1, 1, 1, 1), (3, 7, 4, 2, 3), (33, 33, 2, 1, 31),
                                              (5, 65, 6, 3, 16), (7, 3, 4, 1, 8), (17, 129, 8, 2, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_odd_lengths_gqa_and_causal_offsets(name, Sq, Sk, H, Hk, D, causal):
    if name == "INTERP" and Sq * Sk * H * D > 50_000:    # items in Python: the same key count,
        Sq, H, Hk, D = 5, 4, 2, 16                      # GQA ratio and causal offset, smaller
    b = dev(name)
    rng = np.random.default_rng(Sq * 100 + Sk)
    q = rng.standard_normal((2, H, Sq, D)).astype(F32)
    k = rng.standard_normal((2, Hk, Sk, D)).astype(F32)
    v = rng.standard_normal((2, Hk, Sk, D)).astype(F32)
    got = get(llm.flash_attention(_on(q, b), _on(k, b), _on(v, b), causal=causal))
    np.testing.assert_allclose(got, _attn_ref(q, k, v, causal), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("kv_len", [1, 2, 37])
def test_flash_decode_short_counts_gqa_and_device_counts(name, kv_len):
    b = dev(name)
    rng = np.random.default_rng(kv_len)
    q = rng.standard_normal((2, 6, 16)).astype(F32)
    kc = rng.standard_normal((2, 2, 37, 16)).astype(F32)
    vc = rng.standard_normal((2, 2, 37, 16)).astype(F32)
    ref = _attn_ref(q[:, :, None], kc[:, :, :kv_len], vc[:, :, :kv_len], False)[:, :, 0]
    for n in (kv_len, _on(np.array([kv_len], np.int32), b)):
        got = get(llm.flash_decode(_on(q, b), _on(kc, b), _on(vc, b), n))
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6)
    for bad in (38, -1):
        with pytest.raises(ValueError, match="'kv_len'"):
            llm.flash_decode(_on(q, b), _on(kc, b), _on(vc, b), bad)
    got = get(llm.flash_decode(_on(q, b), _on(kc, b), _on(vc, b), _on(np.array([-1, kv_len], np.int32), b)))
    assert np.isnan(got[0]).all()                          # a device count of -1: NaN (docs/llm.md)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=2e-6)


# --- rope, quantizers, fp8 ------------------------------------------------------------------

@pytest.mark.parametrize("name", backends())
def test_rope_partial_rotation_and_positions_beyond_the_table(name):
    b = dev(name)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 5, 10)).astype(F32)
    ang = rng.standard_normal((5, 3))
    cos, sin = np.cos(ang).astype(F32), np.sin(ang).astype(F32)
    got = get(llm.rope(_on(x, b), _on(cos, b), _on(sin, b)))
    ref = x.astype(np.float64).copy()
    x1, x2 = x[..., 0:3].astype(np.float64), x[..., 3:6].astype(np.float64)
    ref[..., 0:3] = x1 * cos - x2 * sin
    ref[..., 3:6] = x2 * cos + x1 * sin
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[..., 6:], x[..., 6:])
    with pytest.raises(ValueError, match="'cos'"):
        llm.rope(_on(x, b), _on(cos[:4], b), _on(sin[:4], b))


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_quantize_all_zero_tiny_and_huge_blocks_match_gguf(qtype):
    gguf = pytest.importorskip("gguf")
    w = np.zeros((4, 64), F32)
    w[1] = -0.0
    w[2, :32] = 1e-40                                      # subnormal block: d rounds to 0
    w[2, 32:] = np.linspace(-1, 1, 32)
    w[3, :32] = 1e30                                       # d overflows float16
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # no RuntimeWarning from 1/d or float16 overflow
        qt = llm.quantize(w, qtype)
    with np.errstate(all="ignore"):                     # gguf's own NumPy warnings
        ref = gguf.quantize(w, getattr(gguf.GGMLQuantizationType, qtype.upper()))
    assert get(qt.data).tobytes() == np.asarray(ref).tobytes()
    deq = get(llm.dequantize(qt))
    np.testing.assert_array_equal(deq[:2], 0)
    assert llm.quantize(np.zeros((0, 64), F32), qtype).data.shape[0] == 0
    with pytest.raises(ValueError, match="'w'"):
        llm.quantize(np.zeros((2, 33), F32), qtype)


def test_q4_k_all_zero_blocks_round_trip_to_zero():
    import warnings
    w = np.zeros((2, 256), F32)
    w[1, 32:64] = 1e-40                                    # a subnormal sub-block: scale 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qt = llm.quantize(w, "q4_k")
    assert get(qt.data).shape == (2, 144)
    np.testing.assert_array_equal(get(llm.dequantize(qt)), 0)


@pytest.mark.parametrize("name", backends())
def test_fp8_e4m3_cast_of_out_of_range_and_nan_as_ml_dtypes(name):
    """float8_e4m3fn has no infinity: values rounding past 448 (and +-inf) become NaN, bit
    for bit as ml_dtypes (the project's float8 reference; torch saturates instead)."""
    ml = pytest.importorskip("ml_dtypes")
    b = dev(name)
    x = np.array([448, 464, 465, 500, 1e6, -1e6, np.inf, -np.inf, np.nan, 2.0 ** -9, 2.0 ** -11, -0.0], F32)
    got = get(llm.cast(_on(x, b), "float8_e4m3fn")).view(np.uint8)
    np.testing.assert_array_equal(got, x.astype(ml.float8_e4m3fn).view(np.uint8))


# --- out= of the wrong shape for every other SPEC 10 function; stream= with out= -------------

def _bad_out_calls(b):
    A = lambda a: _on(a, b)
    o = lambda *s: A(np.zeros(s, F32))
    ones = lambda *s: A(np.ones(s, F32))
    q = llm.quantize(ones(2, 32), "q8_0")
    return {
        "argmax": lambda: llm.argmax(ones(5), out=A(np.zeros(1, np.int32))),
        "sum": lambda: llm.sum(ones(3, 5), 1, out=o(5)),
        "gather": lambda: llm.gather(ones(4, 3), A(np.array([1], np.int32)), out=o(1, 4)),
        "dequantize": lambda: llm.dequantize(q, out=o(2, 31)),
        "transpose": lambda: llm.transpose(ones(2, 3), out=o(2, 3)),
        "repeat": lambda: llm.repeat(ones(2, 3), 2, 0, out=o(4, 2)),
        "rope": lambda: llm.rope(ones(2, 4), ones(2, 2), ones(2, 2), out=o(2, 5)),
        "matmul": lambda: llm.matmul(ones(2, 3), ones(3, 4), out=o(2, 5)),
        "qmatmul": lambda: llm.matmul(q, ones(32), out=o(3)),
        "flash_attention": lambda: llm.flash_attention(ones(1, 1, 2, 4), ones(1, 1, 2, 4), ones(1, 1, 2, 4),
                                                       out=o(1, 1, 2, 5)),
        "flash_decode": lambda: llm.flash_decode(ones(1, 2, 4), ones(1, 1, 3, 4), ones(1, 1, 3, 4), 2, out=o(1, 2, 5)),
    }


@pytest.mark.parametrize("name", ["CPU", "CL"])
def test_every_function_names_out_of_the_wrong_shape(name):
    if name not in tk.backends_available():
        pytest.skip(f"{name} unavailable")
    for fn, call in _bad_out_calls(dev(name)).items():
        with pytest.raises(ValueError, match="'out'"):
            call()


@pytest.mark.parametrize("name", backends())
def test_stream_and_out_together(name):
    """``out=`` with ``stream=``: the same object returned, written once the stream is
    synchronized (launches on a stream are asynchronous: docs/llm.md)."""
    b = dev(name)
    s = b.stream()
    x = np.arange(33, dtype=F32) / 8
    o = _on(np.zeros((2, 33), F32), b)
    r = llm.softmax(_on(np.stack([x, -x]), b), out=o, stream=s)
    assert r is o
    i = llm.argmax(_on(x, b), stream=s)
    s.synchronize()
    z = np.stack([x, -x]).astype(np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(get(o), ref, rtol=16 * float(np.finfo(F32).eps), atol=1e-9)
    assert int(get(i)) == 32


@pytest.mark.parametrize("name", backends())
def test_float16_casts_and_arithmetic_bit_exact_with_numpy(name):
    """float32 -> float16 rounding at the overflow edge (65519.99 stays finite, 65520 is inf),
    subnormals and the underflow midpoint; float16 add/div rounded once from float32 as
    NumPy does (WebGPU: casts only)."""
    b = dev(name)
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(4097).astype(F32) * 3000,
                        np.array([65519.99, 65520, -65520, 1e-8, 5.96e-8, 2.9802322e-08, -2.98e-8,
                                  np.inf, np.nan, -0.0], F32)])
    with np.errstate(over="ignore"):
        ref = x.astype(F16)
    np.testing.assert_array_equal(get(llm.cast(_on(x, b), F16)).view(np.uint16), ref.view(np.uint16))
    h = (x / 1000).astype(F16)
    np.testing.assert_array_equal(get(llm.cast(_on(h, b), F32)), h.astype(F32))
    if name != "WEBGPU":
        r = h[::-1].copy()
        with np.errstate(all="ignore"):
            for fn, op in (("add", np.add), ("div", np.divide)):
                np.testing.assert_array_equal(get(getattr(llm, fn)(_on(h, b), _on(r, b))).view(np.uint16),
                                              op(h, r).view(np.uint16))
