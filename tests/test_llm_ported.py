"""SPEC 10 edge cases in the manner of llama.cpp's test-backend-ops, PyTorch's OpInfo tests
and gguf-py's tests (engineer llm9's audit): device-counter positions outside the cache or
the RoPE table, argument validation, quantizer edge values, GGUF reading."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm

from llm_helpers import backends, dev, get


def _on(a, b):
    return a if b.name == "CPU" else tk.asarray(a, backend=b)


# --- device counters: negative positions (set below 0, or int32 wraparound) ------------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("start", [-1, -3, 2**31 - 1])
def test_kv_append_drops_negative_positions(name, start):
    """A counter below 0 (set so, or wrapped past 2**31 - 1 by counter_add) must drop the
    rows at negative positions like those past max_len: the store was unguarded below 0 and
    wrote before the cache's buffer (the row of the previous head, or the heap: a crash)."""
    b = dev(name)
    backing = np.full(64 + 2 * 4 * 3, 7.0, np.float32)
    backing[64:] = 0
    cache = backing[64:].reshape(1, 2, 4, 3) if name == "CPU" else tk.asarray(backing[64:].reshape(1, 2, 4, 3), backend=b)
    cnt = llm.new_counter(start, backend=b)
    if start > 0:
        llm.counter_add(cnt, 1)                   # int32 wraparound: -2**31
        assert int(get(cnt)[0]) == -2**31
        first = -2**31
    else:
        first = start
    rows = (np.arange(2 * 4 * 3, dtype=np.float32).reshape(1, 2, 4, 3) + 1)
    llm.kv_append(cache, _on(rows, b), cnt)
    want = np.zeros((1, 2, 4, 3), np.float32)
    for t in range(4):
        if 0 <= first + t < 4:
            want[:, :, first + t] = rows[:, :, t]
    np.testing.assert_array_equal(get(cache), want)
    if name == "CPU":
        np.testing.assert_array_equal(backing[:64], 7.0)     # nothing written before the cache


@pytest.mark.parametrize("name", backends())
def test_rope_at_negative_position_is_nan_not_a_read_before_the_table(name):
    b = dev(name)
    x = np.arange(1, 1 + 3 * 4, dtype=np.float32).reshape(1, 1, 3, 4)
    cos = np.ones((3, 2), np.float32)
    sin = np.zeros((3, 2), np.float32)
    cnt = llm.new_counter(-2, backend=b)
    got = get(llm.rope_at(_on(x, b), _on(cos, b), _on(sin, b), cnt))[0, 0]
    assert np.isnan(got[:2]).all()                          # rows -2, -1: outside the table
    np.testing.assert_array_equal(got[2], x[0, 0, 2])       # row 0: cos 1, sin 0
    w = np.ones(4, np.float32)
    got = get(llm.qk_norm_rope(_on(x, b), _on(w, b), _on(cos, b), _on(sin, b), pos_counter=cnt))[0, 0]
    assert np.isnan(got[:2]).all()
    xr = x[0, 0, 2].astype(np.float64)
    np.testing.assert_allclose(got[2], xr / np.sqrt(np.mean(xr ** 2) + 1e-6), rtol=4e-7)


@pytest.mark.parametrize("fn", ["kv_append", "rope_at"])
def test_negative_device_positions_are_index_errors_in_debug_mode(fn, monkeypatch):
    monkeypatch.setenv("TK_DEBUG", "1")
    b = dev("CPU")
    cnt = llm.new_counter(-1, backend=b)
    with pytest.raises(IndexError):
        if fn == "kv_append":
            llm.kv_append(np.zeros((1, 2, 4, 3), np.float32), np.ones((1, 2, 1, 3), np.float32), cnt)
        else:
            llm.rope_at(np.ones((1, 1, 1, 4), np.float32), np.ones((3, 2), np.float32),
                        np.zeros((3, 2), np.float32), cnt)


@pytest.mark.parametrize("value", [2**31, -2**31 - 1, 1.5, True, "3"])
def test_new_counter_refuses_values_that_are_not_int32(value):
    with pytest.raises(ValueError, match=r"new_counter.*'value'"):
        llm.new_counter(value, backend=dev("CPU"))


# --- weak Python-int scalars beyond 64 bits (NumPy converts them to the array's dtype) ------

@pytest.mark.parametrize("fn", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("v", [2**63, -2**63 - 1, 2**64 + 1, 3**80, 10**40, -10**40])
@pytest.mark.parametrize("dt", [np.float32, np.float16, np.float64])
def test_binary_ops_take_python_ints_beyond_64_bits_as_numpy_does(fn, v, dt):
    x = np.array([1.5, -2.0, 0.0, 3e-3], dt)
    with np.errstate(all="ignore"):
        want = getattr(np, {"sub": "subtract", "mul": "multiply", "div": "divide"}.get(fn, fn))(x, v)
    got = getattr(llm, fn)(x, v)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_fill_takes_python_ints_beyond_64_bits_as_numpy_does():
    for v in (2**64 + 1, 10**40):
        for dt in (np.float32, np.float64):
            with np.errstate(all="ignore"):
                np.testing.assert_array_equal(llm.fill(np.zeros(3, dt), v), np.full(3, v, dt))


@pytest.mark.parametrize("call", [lambda v: llm.add(np.ones(2, np.float32), v),
                                  lambda v: llm.pow(np.ones(2, np.float32), v)])
def test_python_int_beyond_float64_is_a_value_error_naming_the_operand(call):
    with pytest.raises(ValueError, match=r"argument '(b|y)': an int of \d+ bits is too large"):
        call(10**400)
    with pytest.raises(ValueError, match=r"llm.fill: argument 'value'"):
        llm.fill(np.zeros(2, np.float32), -10**400)


# --- quantizers at the edges of float16 scales (gguf-py's quantize tests, extended) ---------

def test_q4_k_quantize_refuses_weights_its_float16_scales_cannot_hold():
    """q4_k's range quantizer rounds d = max(scale) / 63 and dmin = max(min) / 63 up to float16:
    past 65504 they were infinite and every weight of the block dequantized to inf or NaN from
    finite input. Now a ValueError naming w; the largest spans that fit still round-trip."""
    gq = pytest.importorskip("gguf.quants")
    from gguf import GGMLQuantizationType as GT
    for v in (3.4e38, 7e7, -5e6):
        w = np.zeros((2, 256), np.float32)
        w[1, 100] = v
        with pytest.raises(ValueError, match=r"llm.quantize: argument 'w': values too large for q4_k"):
            llm.quantize(w, "q4_k")
    rng = np.random.default_rng(5)
    w = rng.uniform(-4.1e6, 6.19e7 - 4.1e6, (3, 512)).astype(np.float32)
    w[:, ::32] = -4.1e6
    w[:, 1::32] = 6.19e7 - 4.1e6                                     # spans of ~6.19e7
    q = llm.quantize(w, "q4_k")
    back = gq.dequantize(q.data, GT.Q4_K)
    assert np.isfinite(back).all()
    d = back - w
    step = 15 * 63 * 65504 / 15                                       # the largest step
    assert np.abs(d).max() <= step / 2


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_q4_0_q8_0_quantize_match_gguf_for_extreme_values(qtype):
    """Bit for bit gguf.quants.quantize, also where the block scale overflows float16 (ggml
    stores inf there too), for all-zero, -0.0, subnormal and equal rows."""
    gq = pytest.importorskip("gguf.quants")
    from gguf import GGMLQuantizationType as GT
    rng = np.random.default_rng(6)
    rows = [np.full(64, 3.4e38), np.full(64, -3.4e38), rng.standard_normal(64) * 1e7,
            np.zeros(64), np.full(64, -0.0), rng.standard_normal(64) * 1e-41, np.full(64, 0.7),
            np.where(np.arange(64) % 2, 5.0, -5.0)]
    w = np.stack(rows).astype(np.float32)
    with np.errstate(all="ignore"):
        want = gq.quantize(w, GT.Q4_0 if qtype == "q4_0" else GT.Q8_0)
    np.testing.assert_array_equal(llm.quantize(w, qtype).data, want)


# --- GGUF reading: every tensor type gguf writes ---------------------------------------------

def _write_one(path, gguf, qt, rng):
    """A GGUF file holding one [3, K] tensor 't' of type ``qt``; returns what was written."""
    from gguf import GGMLQuantizationType as GT
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    k = bs * 2 if bs > 1 else 32
    w = gguf.GGUFWriter(str(path), "llama")
    ints = {GT.I8: np.int8, GT.I16: np.int16, GT.I32: np.int32, GT.I64: np.int64, GT.F64: np.float64}
    if qt in (GT.F32, GT.F16):
        arr = rng.standard_normal((3, k)).astype(np.float32 if qt == GT.F32 else np.float16)
        w.add_tensor("t", arr)
    elif qt in ints:
        arr = rng.integers(-100, 100, (3, k)).astype(ints[qt])
        w.add_tensor("t", arr, raw_dtype=qt)
    else:
        arr = rng.integers(0, 256, (3, k // bs * ts), dtype=np.uint8)
        w.add_tensor("t", arr, raw_shape=arr.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return arr, k


def test_load_gguf_reads_every_tensor_type_or_names_the_one_it_cannot(tmp_path):
    """q4_0/q8_0/q4_k: QTensors over the file's bytes (no copy); plain types: memory-mapped
    arrays; other block types: gguf.quants' float32 values; types nobody decodes (Q8_1, Q8_K):
    an error naming the tensor and its type (was gguf's bare NotImplementedError)."""
    gguf = pytest.importorskip("gguf")
    from gguf import GGMLQuantizationType as GT
    rng = np.random.default_rng(7)
    undecodable = []
    for qt in GT:
        path = tmp_path / f"{qt.name}.gguf"
        arr, k = _write_one(path, gguf, qt, rng)
        try:
            t = llm.load_gguf(path)["t"]
        except ValueError as e:
            assert isinstance(e, NotImplementedError)
            assert f"tensor 't' has type {qt.name}" in str(e)
            undecodable.append(qt.name)
            continue
        if qt.name.lower() in llm.QTYPES:
            assert isinstance(t, llm.QTensor) and t.qtype == qt.name.lower() and t.shape == (3, k)
            assert isinstance(t.data, np.memmap) or isinstance(getattr(t.data, "base", None), np.memmap)
            np.testing.assert_array_equal(t.data, arr)
            with np.errstate(all="ignore"):
                want = gguf.quants.dequantize(arr, qt)
            np.testing.assert_array_equal(llm.dequantize(t), want)
        elif arr.dtype != np.uint8:
            assert t.dtype == arr.dtype and t.shape == arr.shape
            np.testing.assert_array_equal(t, arr)
        else:
            with np.errstate(all="ignore"):
                want = gguf.quants.dequantize(arr, qt)
            assert t.dtype == np.float32 and t.shape == (3, k)
            np.testing.assert_array_equal(t, want.reshape(3, k))
    assert {"Q4_0", "Q8_0", "Q4_K", "Q6_K", "BF16"}.isdisjoint(undecodable)
    assert set(undecodable) <= {"Q8_1", "Q8_K", "Q1_0"}


# --- python -m tinykernels llm-demo: options and errors ---------------------------------------

_SMALL = ["--layers", "1", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--hidden", "64", "--vocab", "100"]


@pytest.mark.parametrize("flag, field", [("--layers", "n_layers"), ("--vocab", "vocab"), ("--heads", "n_heads")])
def test_llm_demo_zero_size_is_an_error_not_the_default(flag, field, capsys):
    """``--layers 0`` ran the default 4 layers (``args.layers or default``)."""
    from tinykernels.cli import main
    argv = list(_SMALL)
    argv[argv.index(flag) + 1] = "0"
    assert main(["llm-demo", "--tokens", "1", *argv]) == 1
    assert f"argument '{field}': expected an int >= 1, got 0" in capsys.readouterr().err


def test_llm_demo_refuses_model_sizes_with_a_gguf_file(tmp_path, capsys):
    from tinykernels.cli import main
    assert main(["llm-demo", "--gguf", str(tmp_path / "m.gguf"), "--layers", "2", "--kv-heads", "1"]) == 1
    assert "--layers, --kv-heads: sizes of the random model, not of a --gguf file" in capsys.readouterr().err


def test_llm_demo_runs_a_small_model_and_reports_errors(capsys):
    from tinykernels.cli import main
    assert main(["llm-demo", "--backend", "CPU", "--tokens", "2", *_SMALL]) == 0
    o = capsys.readouterr().out
    assert "model: 1 layers, dim 64, 4 query / 2 KV heads of 16" in o and "match NumPy float64" in o
    assert main(["llm-demo", "--tokens", "0", *_SMALL]) == 1
    assert "--tokens must be >= 1" in capsys.readouterr().err
    assert main(["llm-demo", "--tokens", "1", *_SMALL[:-6], "--kv-heads", "3", "--hidden", "64", "--vocab", "9"]) == 1
    assert "argument 'n_kv_heads'" in capsys.readouterr().err


# --- flash_decode in place (out=q), which the docs allow ---------------------------------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("splits", [1, 3])
def test_flash_decode_out_is_q(name, splits):
    """``out=q`` (the same view: allowed) failed with the kernel's tk.Const aliasing error
    ('q' shares memory with 'part') instead of computing in place."""
    b = dev(name)
    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 4, 16)).astype(np.float32)
    kc = rng.standard_normal((2, 2, 40, 16)).astype(np.float32)
    vc = rng.standard_normal((2, 2, 40, 16)).astype(np.float32)
    want = get(llm.flash_decode(_on(q, b), _on(kc, b), _on(vc, b), 33, splits=splits))
    qd = _on(q.copy(), b)
    got = llm.flash_decode(qd, _on(kc, b), _on(vc, b), 33, splits=splits, out=qd)
    assert got is qd
    np.testing.assert_array_equal(get(qd), want)
    if name == "CPU":
        qt = pytest.importorskip("torch").from_numpy(q.copy())
        assert llm.flash_decode(qt, kc, vc, 33, splits=splits, out=qt) is qt
        np.testing.assert_array_equal(qt.numpy(), want)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_out_is_q(name, causal):
    b = dev(name)
    rng = np.random.default_rng(9)
    sq, sk = (35, 38) if name == "INTERP" else (70, 75)     # the interpreter: items in Python
    q = rng.standard_normal((1, 4, sq, 16)).astype(np.float32)
    k = rng.standard_normal((1, 2, sk, 16)).astype(np.float32)
    v = rng.standard_normal((1, 2, sk, 16)).astype(np.float32)
    want = get(llm.flash_attention(_on(q, b), _on(k, b), _on(v, b), causal=causal))
    qd = _on(q.copy(), b)
    assert llm.flash_attention(qd, _on(k, b), _on(v, b), causal=causal, out=qd) is qd
    np.testing.assert_array_equal(get(qd), want)


# --- quantize_activations: NaN and infinite blocks as gguf -------------------------------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("packed", [False, True])
def test_quantize_activations_nan_and_inf_blocks_match_gguf(name, packed):
    """A block holding a NaN got d = 0 (the kernel's max dropped the NaN), so the int8 route
    of matmul(..., exact=False) silently ignored NaN activations; gguf's quantizer (NumPy's
    max) stores d = NaN, and q = 0 for the NaN and infinite blocks."""
    gq = pytest.importorskip("gguf.quants")
    from gguf import GGMLQuantizationType as GT
    b = dev(name)
    rng = np.random.default_rng(10)
    x = rng.standard_normal(32 * 6).astype(np.float32)
    x[3] = np.nan                      # block 0
    x[32 + 31] = np.nan                # block 1, last value
    x[64] = np.inf                     # block 2
    x[96:128] = 0                      # block 3: all zero
    x[128 + 5] = -np.inf               # block 4
    with np.errstate(all="ignore"):
        ref = gq.quantize(x[None], GT.Q8_0).reshape(-1, 34)
    qs, d = llm.quantize_activations(_on(x, b), packed=packed)
    want_d = ref[:, :2].copy().view(np.float16).astype(np.float32).ravel()
    np.testing.assert_array_equal(get(d), want_d)
    np.testing.assert_array_equal(get(qs).view(np.uint8).ravel(), ref[:, 2:].ravel())
    q = llm.quantize(rng.standard_normal((3, 32 * 6)).astype(np.float32), "q8_0")
    qd = llm.QTensor("q8_0", q.shape, _on(q.data, b))
    y = get(llm.matmul(qd, _on(np.where(np.isinf(x), 0, x).astype(np.float32), b), exact=False))
    assert np.isnan(y).all()


@pytest.mark.parametrize("exact", ["no", 0, None])
def test_matmul_exact_must_be_a_bool(exact):
    """``exact="no"`` (truthy) ran the exact route silently; ``exact=0`` the int8 route."""
    q = llm.quantize(np.ones((2, 32), np.float32), "q8_0")
    with pytest.raises(ValueError, match=r"llm.matmul: argument 'exact': expected a bool"):
        llm.matmul(q, np.ones(32, np.float32), exact=exact)


# --- softmax: a relative error bound for every probability, not an absolute floor ------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("L", [7, 1000, 20000])
def test_softmax_small_probabilities_have_a_relative_error_bound(name, L):
    """The shared ``close`` helper has an absolute floor of a few float32 ulps of 1, which
    passes any probability below ~1e-6. Each probability's relative error is bounded instead:
    the float32 rounding of ``x - max`` (half an ulp of ``|x - max|``: ``|x - max| / 2``
    ulps of the result after exp), the exponential (1-2 ulps), the row sum and the division
    (a few ulps): ``(|x - max| / 2 + 16) * 2**-23``. Measured (llm9): at most 38 ulps at
    L = 70000 with |x - max| up to ~70, on CPU, INTERP, CL and WEBGPU."""
    b = dev(name)
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((3, L)) * 8).astype(np.float32)
    got = get(llm.softmax(_on(x, b))).astype(np.float64)
    x64 = x.astype(np.float64)
    dist = x64.max(-1, keepdims=True) - x64
    e = np.exp(-dist)
    want = e / e.sum(-1, keepdims=True)
    keep = want > 1e-37                      # normal float32 results
    rel = np.abs(got - want)[keep] / want[keep]
    bound = (dist[keep] / 2 + 16) * 2.0 ** -23
    assert (rel <= bound).all(), float((rel / bound).max())
    assert want[keep].min() < 1e-12          # the rows reach far below the absolute floor


@pytest.mark.parametrize("reader", ["load_gguf", "read_gguf"])
def test_gguf_readers_name_the_path_of_a_file_that_is_not_gguf(reader, tmp_path):
    """read_gguf (llm-demo --gguf) let gguf's own 'Sorry, file appears to be version 0'
    ValueError and a missing file's OSError through, without naming the function or path."""
    pytest.importorskip("gguf")
    from tinykernels.llm import model
    fn = llm.load_gguf if reader == "load_gguf" else model.read_gguf
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(40))
    with pytest.raises(ValueError, match=rf"llm.{reader}: argument 'path': .*bad.gguf' is not a readable GGUF file"):
        fn(bad)
    with pytest.raises(ValueError, match=rf"llm.{reader}: argument 'path': no such file"):
        fn(tmp_path / "missing.gguf")
