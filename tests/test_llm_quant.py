"""tinykernels.llm quantized formats: QTensor, dequantize (kernels), quantize, load_gguf.

Dequantizers are checked bit for bit against an independent NumPy reference (always) and
against ``gguf.quants`` (when the gguf package is installed); quantizers against
``gguf.quants.quantize`` (q4_0, q8_0) or the format's error bound (q4_k)."""
import importlib
import sys

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from tinykernels.llm.quant import half_at, half_at_host

from llm_quant_helpers import BACKENDS, QTYPES, host, random_blocks, ref_dequantize, to


def _bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


def _gguf_type(gguf, qtype):
    return {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0,
            "q4_k": gguf.GGMLQuantizationType.Q4_K}[qtype]


# ----------------------------------------------------------------------------- float16 scales

@tk.kernel
def _decode_halves(out, b: tk.Const):
    i = tk.index()
    out[i] = half_at(b, 0, 2 * i)


@pytest.mark.parametrize("be", BACKENDS)
def test_every_float16_bit_pattern_decodes_exactly(be):
    """The scales are decoded arithmetically from their two bytes: all 65536 patterns
    (subnormals, signed zeros, infinities, NaNs) against NumPy's float16 -> float32."""
    n = 65536 if be != "INTERP" else 4096
    h = np.arange(65536, dtype=np.uint16)
    if be == "INTERP":
        h = np.concatenate([h[:1024], h[0x7800:0x7c10], h[0x8000:0x8400], h[0xfbf0:]])[:n]
    out = to(be, np.zeros(n, np.float32))
    _decode_halves.launch(out, to(be, h.view(np.uint8).reshape(1, -1)), ndrange=n)
    got, ref = host(out), h.view(np.float16).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(_bits(got)[~nan], _bits(ref)[~nan])
    assert np.isnan(got[nan]).all()


@tk.kernel
def _decode_halves_host(out, b: tk.Const):
    i = tk.index()
    out[i] = half_at_host(b, 0, 2 * i)


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
def test_host_float16_decoder_gives_half_ats_bits(be):
    """The host GEMVs' scale decoder (a multiply by 2**112) gives exactly half_at's float32
    bits for every non-NaN pattern of the 65536 and a NaN for every NaN (the interpreter:
    subnormals, the normal/subnormal and finite/inf edges, both signs)."""
    h = np.arange(65536, dtype=np.uint16)
    if be == "INTERP":
        h = np.concatenate([h[:1100], h[0x7b00:0x7d00], h[0x8000:0x8500], h[0xfb00:]])
    n = h.size
    data = to(be, h.view(np.uint8).reshape(1, -1))
    out, ref = to(be, np.zeros(n, np.float32)), to(be, np.zeros(n, np.float32))
    _decode_halves_host.launch(out, data, ndrange=n)
    _decode_halves.launch(ref, data, ndrange=n)
    want = h.view(np.float16).astype(np.float32)
    ok = ~np.isnan(want)
    assert np.array_equal(_bits(host(out))[ok], _bits(host(ref))[ok])
    assert np.array_equal(_bits(host(out))[ok], _bits(want)[ok])
    assert np.isnan(host(out)[~ok]).all()


# ----------------------------------------------------------------------------- dequantize

@pytest.mark.parametrize("be", BACKENDS)
@pytest.mark.parametrize("qtype", QTYPES)
def test_dequantize_random_blocks_bit_exact_vs_numpy_reference(qtype, be):
    rng = np.random.default_rng(1)
    rows, nb = (3, 2) if be == "INTERP" else (7, 5)
    raw = random_blocks(qtype, rows, nb, rng)
    k = nb * llm.QTYPES[qtype].block
    got = host(llm.dequantize(llm.QTensor(qtype, (rows, k), to(be, raw))))
    assert got.shape == (rows, k) and got.dtype == np.float32
    assert np.array_equal(_bits(got), _bits(ref_dequantize(qtype, raw)))


@pytest.mark.parametrize("be", BACKENDS)
@pytest.mark.parametrize("qtype", QTYPES)
def test_dequantize_bit_exact_vs_gguf(qtype, be):
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(2)
    rows, nb = (2, 2) if be == "INTERP" else (9, 4)
    raw = random_blocks(qtype, rows, nb, rng)
    k = nb * llm.QTYPES[qtype].block
    got = host(llm.dequantize(llm.QTensor(qtype, (rows, k), to(be, raw))))
    assert np.array_equal(_bits(got), _bits(gguf.quants.dequantize(raw, _gguf_type(gguf, qtype))))


def test_dequantize_hand_built_blocks():
    # q4_0: d = 1.0 (0x3c00); byte j holds weight j (low nibble) and j + 16 (high nibble)
    qs = np.array([(j & 15) | ((15 - j) << 4) for j in range(16)], np.uint8)
    blk = np.concatenate([[0x00, 0x3c], qs]).astype(np.uint8)[None]
    want = np.concatenate([np.arange(16) - 8, 15 - np.arange(16) - 8]).astype(np.float32)
    assert np.array_equal(llm.dequantize(llm.QTensor("q4_0", (1, 32), blk))[0], want)
    # q8_0: d = -0.5 (0xb800), q = -16..15
    q = np.arange(-16, 16).astype(np.int8).view(np.uint8)
    blk = np.concatenate([[0x00, 0xb8], q]).astype(np.uint8)[None]
    assert np.array_equal(llm.dequantize(llm.QTensor("q8_0", (1, 32), blk))[0],
                          np.arange(-16, 16, dtype=np.float32) * -0.5)
    # q4_k: d = 2.0 (0x4000), dmin = 0.25 (0x3400); sub-block s has scale s + 1 and min 2 * s
    sc, mn = np.arange(1, 9), 2 * np.arange(8)
    scales = np.zeros(12, np.uint8)
    scales[0:4] = sc[:4] | ((sc[4:] >> 4) << 6)
    scales[4:8] = mn[:4] | ((mn[4:] >> 4) << 6)
    scales[8:12] = (sc[4:] & 15) | ((mn[4:] & 15) << 4)
    qs = np.tile((np.arange(32) % 16) | ((15 - np.arange(32) % 16) << 4), 4).astype(np.uint8)
    blk = np.concatenate([[0x00, 0x40, 0x00, 0x34], scales, qs]).astype(np.uint8)[None]
    got = llm.dequantize(llm.QTensor("q4_k", (1, 256), blk))[0].reshape(8, 32)
    for s in range(8):
        q = np.arange(32) % 16 if s % 2 == 0 else 15 - np.arange(32) % 16
        assert np.array_equal(got[s], (2.0 * (s + 1) * q - 0.25 * 2 * s).astype(np.float32)), s


def test_dequantize_out_and_errors():
    raw = random_blocks("q8_0", 2, 1, np.random.default_rng(0))
    qt = llm.QTensor("q8_0", (2, 32), raw)
    out = np.zeros((2, 32), np.float32)
    assert llm.dequantize(qt, out=out) is out and np.array_equal(out, ref_dequantize("q8_0", raw))
    with pytest.raises(ValueError, match="'out'"):
        llm.dequantize(qt, out=np.zeros((2, 31), np.float32))
    with pytest.raises(ValueError, match="'qt'"):
        llm.dequantize(raw)


def test_qtensor_validates_its_arguments():
    raw = np.zeros((2, 36), np.uint8)
    qt = llm.QTensor("Q4_0", (2, 64), raw)
    assert (qt.qtype, qt.shape, qt.data is raw, qt.nbytes) == ("q4_0", (2, 64), True, 72)
    with pytest.raises(ValueError, match="'qtype'.*q5_1"):
        llm.QTensor("q5_1", (2, 64), raw)
    with pytest.raises(ValueError, match="'shape'.*multiple"):
        llm.QTensor("q4_0", (2, 48), raw)
    with pytest.raises(ValueError, match="'data'.*shape"):
        llm.QTensor("q4_0", (2, 32), raw)
    with pytest.raises(ValueError, match="'data'.*dtype"):
        llm.QTensor("q4_0", (2, 64), raw.astype(np.int8))
    with pytest.raises(ValueError, match="'data'.*contiguous"):
        llm.QTensor("q4_0", (2, 32), np.zeros((2, 36), np.uint8)[:, ::2])


# ----------------------------------------------------------------------------- quantize

def _edge_weights(rng, m, k):
    w = (rng.standard_normal((m, k)) * np.exp(rng.standard_normal((m, 1)))).astype(np.float32)
    w[0, :32] = 0                                    # an all-zero block
    w[1, :32] = np.float32(0.25) * np.arange(-16, 16)  # exact ties at the rounding points
    w[2, 3] = -np.abs(w[2, :32]).max() - 1           # the largest magnitude is negative
    w[2, 40] = w[2, 41] = np.abs(w[2, 32:64]).max() + 1  # two maxima: the first one wins
    w[2, 41] *= -1
    return w


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_quantize_bit_exact_vs_gguf(qtype):
    gguf = pytest.importorskip("gguf")
    w = _edge_weights(np.random.default_rng(3), 6, 256)
    q = llm.quantize(w, qtype)
    assert q.qtype == qtype and q.shape == w.shape and isinstance(q.data, np.ndarray)
    assert np.array_equal(q.data, gguf.quants.quantize(w, _gguf_type(gguf, qtype)))


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_quantize_within_half_a_step(qtype):
    """No gguf needed: each weight is within half a quantization step (|d|) of its value
    (q4_0: a whole step on the side opposite the largest magnitude)."""
    w = _edge_weights(np.random.default_rng(4), 5, 128)
    q = llm.quantize(w, qtype)
    x = llm.dequantize(q)
    blocks = np.abs(w).reshape(-1, 32).max(axis=1)
    step = blocks / (8 if qtype == "q4_0" else 127)
    err = np.abs(x - w).reshape(-1, 32).max(axis=1)
    # half a step, plus the float16 rounding of d (relative 2**-11) times the largest |q|;
    # q4_0 maps the largest magnitude to -8 and clips the other side at +7: one whole step
    half, qmax = (0.5, 127) if qtype == "q8_0" else (1.0, 8)
    assert (err <= step * (half + 2.0**-11 * qmax) + 1e-30).all()


def test_quantize_q4_k_error_bound_and_gguf_agrees():
    """q4_k: every weight within half a step of its sub-block (d * sc), where the stored
    6-bit scales exceed the sub-block's range / 15 by at most one unit of d."""
    rng = np.random.default_rng(5)
    w = _edge_weights(rng, 6, 512)
    w[3, 256:288] = 3.0                               # constant sub-block
    w[4, :256] = -2.0                                 # constant negative block
    q = llm.quantize(w, "q4_k")
    x = llm.dequantize(q)
    blk = np.asarray(q.data).reshape(-1, 144)
    d = blk[:, 0:2].copy().view("<f2").astype(np.float32)[:, 0]
    sub = w.reshape(-1, 8, 32)
    rng_sub = sub.max(axis=2) + np.maximum(0, -sub.min(axis=2))
    step_bound = rng_sub / 15 + d[:, None]
    dmin = blk[:, 2:4].copy().view("<f2").astype(np.float32)[:, 0]
    err = np.abs(x - w).reshape(-1, 8, 32).max(axis=2)
    # a constant non-positive sub-block has no step (sc = 0): only the min, within one dmin
    bound = np.where(rng_sub > 0, 0.5 * step_bound * (1 + 1e-5) + 1e-6, dmin[:, None])
    assert (err <= bound).all()
    gguf = pytest.importorskip("gguf")
    assert np.array_equal(_bits(x), _bits(gguf.quants.dequantize(np.asarray(q.data), gguf.GGMLQuantizationType.Q4_K)))


@pytest.mark.parametrize("be", [p for p in BACKENDS if p.id in ("CL", "WEBGPU")])
def test_quantize_puts_the_bytes_on_the_input_backend(be):
    w = np.random.default_rng(6).standard_normal((3, 64)).astype(np.float32)
    q = llm.quantize(to(be, w), "q8_0")
    assert q.backend == tk.backend(be) and not isinstance(q.data, np.ndarray)
    assert np.array_equal(host(q.data), llm.quantize(w, "q8_0").data)
    assert np.array_equal(host(llm.dequantize(q)), llm.dequantize(llm.quantize(w, "q8_0")))


def test_quantize_errors_name_the_argument():
    w = np.zeros((2, 64), np.float32)
    with pytest.raises(ValueError, match="'qtype'"):
        llm.quantize(w, "q2_k")
    with pytest.raises(ValueError, match="'w'.*multiple"):
        llm.quantize(np.zeros((2, 48), np.float32), "q4_0")
    with pytest.raises(ValueError, match="'w'.*multiple"):
        llm.quantize(w, "q4_k")
    with pytest.raises(ValueError, match="'w'.*dtype"):
        llm.quantize(w.astype(np.float64), "q8_0")
    with pytest.raises(ValueError, match="'w'.*2-D"):
        llm.quantize(np.zeros(64, np.float32), "q8_0")
    w[1, 5] = np.nan
    with pytest.raises(ValueError, match="'w'.*NaN"):
        llm.quantize(w, "q8_0")


# ----------------------------------------------------------------------------- load_gguf

def _write_gguf(path, tensors):
    gguf = pytest.importorskip("gguf")
    wr = gguf.GGUFWriter(str(path), "llama")
    for name, (arr, raw) in tensors.items():
        wr.add_tensor(name, arr, raw_dtype=raw)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def test_load_gguf_round_trip(tmp_path):
    gguf = pytest.importorskip("gguf")
    G = gguf.GGMLQuantizationType
    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 512)).astype(np.float32)
    q4k = llm.quantize(w, "q4_k")
    f = rng.standard_normal((3, 5)).astype(np.float32)
    bf16 = gguf.quants.quantize(f, G.BF16)
    tensors = {"blk.0.q4_0": (llm.quantize(w, "q4_0").data, G.Q4_0),
               "blk.0.q8_0": (gguf.quants.quantize(w, G.Q8_0), G.Q8_0),
               "blk.0.q4_k": (q4k.data, G.Q4_K),
               "norm.f32": (f, None), "emb.f16": (f.astype(np.float16), None), "emb.bf16": (bf16, G.BF16),
               "cube.q8_0": (gguf.quants.quantize(w.reshape(2, 3, 512), G.Q8_0), G.Q8_0)}
    path = tmp_path / "model.gguf"
    _write_gguf(path, tensors)
    d = llm.load_gguf(path)
    assert set(d) == set(tensors)
    for name in ("blk.0.q4_0", "blk.0.q8_0", "blk.0.q4_k"):
        qt = d[name]
        assert isinstance(qt, llm.QTensor) and qt.shape == (6, 512) and qt.qtype == name[-4:]
        assert isinstance(qt.data, np.memmap)                  # zero-copy
        assert np.array_equal(qt.data, tensors[name][0])
    assert np.array_equal(llm.dequantize(d["blk.0.q4_k"]), llm.dequantize(q4k))
    assert d["norm.f32"].shape == (3, 5) and np.array_equal(d["norm.f32"], f)
    assert d["emb.f16"].dtype == np.float16 and np.array_equal(d["emb.f16"], f.astype(np.float16))
    assert d["emb.bf16"].dtype == np.float32 and d["emb.bf16"].shape == (3, 5)   # decoded by gguf
    assert np.array_equal(d["emb.bf16"], gguf.quants.dequantize(bf16, G.BF16))
    assert d["cube.q8_0"].shape == (6, 512)               # leading dims flattened into rows
    x = rng.standard_normal(512).astype(np.float32)
    ref = llm.dequantize(d["blk.0.q8_0"]).astype(np.float64) @ x
    np.testing.assert_allclose(llm.matmul(d["blk.0.q8_0"], x), ref, rtol=1e-4, atol=1e-4)


def test_load_gguf_gguf_dims_are_reversed(tmp_path):
    """GGUF's ne[0] is the row length: a [n_out=4, n_in=64] weight reads back as (4, 64)."""
    gguf = pytest.importorskip("gguf")
    w = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    _write_gguf(tmp_path / "m.gguf", {"w": (gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0),
                                             gguf.GGMLQuantizationType.Q8_0)})
    r = gguf.GGUFReader(str(tmp_path / "m.gguf"))
    assert list(r.tensors[0].shape) == [64, 4]
    qt = llm.load_gguf(tmp_path / "m.gguf")["w"]
    assert qt.shape == (4, 64)
    np.testing.assert_allclose(llm.dequantize(qt), w, atol=0.5 * 255 / 127 * 1.01)   # half a step


@pytest.mark.parametrize("be", [p for p in BACKENDS if p.id == "CL"])
def test_load_gguf_to_a_device_backend(tmp_path, be):
    gguf = pytest.importorskip("gguf")
    w = np.random.default_rng(8).standard_normal((4, 64)).astype(np.float32)
    _write_gguf(tmp_path / "m.gguf", {"q": (llm.quantize(w, "q4_0").data, gguf.GGMLQuantizationType.Q4_0),
                                      "f": (w, None)})
    d = llm.load_gguf(tmp_path / "m.gguf", backend=be)
    assert d["q"].backend == tk.backend(be) and d["f"].backend == tk.backend(be)
    assert np.array_equal(host(d["q"].data), llm.quantize(w, "q4_0").data)
    assert np.array_equal(host(d["f"]), w)


def test_load_gguf_errors(tmp_path):
    pytest.importorskip("gguf")
    with pytest.raises(ValueError, match="'path'.*no such file"):
        llm.load_gguf(tmp_path / "missing.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(ValueError, match="'path'.*not a readable GGUF"):
        llm.load_gguf(tmp_path / "junk.gguf")


def test_load_gguf_without_the_gguf_package_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)           # import gguf -> ImportError
    gio = importlib.import_module("tinykernels.llm.gguf_io")
    with pytest.raises(ImportError, match="pip install"):
        gio.load_gguf(tmp_path / "x.gguf")


@pytest.mark.parametrize("qtype", QTYPES)
def test_quantize_empty_matrices(qtype):
    """Weights with no rows (or K = 0) quantize to a QTensor with no blocks whose data has
    the format's row length (0 rows was 'argument data: shape (0, 0) does not match')."""
    for m, k in ((0, 256), (3, 0), (0, 0)):
        qt = llm.quantize(np.zeros((m, k), np.float32), qtype)
        assert qt.shape == (m, k) and qt.data.shape == (m, k // qt.format.block * qt.format.block_bytes)
        assert np.asarray(llm.dequantize(qt)).shape == (m, k)
        np.testing.assert_array_equal(np.asarray(llm.matmul(qt, np.ones(k, np.float32))), np.zeros(m))
