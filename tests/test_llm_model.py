"""End to end: a tiny Llama-style decoder (tinykernels.llm.model) decoding token after token
with only tinykernels.llm kernels and a device-resident position counter, against the same
model in NumPy float64; weights in memory and through a real GGUF file."""
import io

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import cli, llm
from tinykernels.llm import model as M
from llm_helpers import backends

TOKENS = [3, 17, 5, 99, 0, 127, 64, 2]
EPS32 = float(np.finfo(np.float32).eps)


def cfg_for(be):
    if be == "INTERP":
        return M.ModelConfig(dim=32, n_heads=4, n_kv_heads=2, hidden=64, vocab=128, max_len=16)
    return M.ModelConfig()          # 2 layers, dim 64, 4 query heads, 2 KV heads, vocab 128


def assert_logits_close(got, want):
    """float32 evaluation of a float64 model: every dot product has at most a few hundred
    terms, so each logit is within a few dozen float32 ulps of the logit scale."""
    got = np.asarray(got, np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=64 * EPS32 * np.abs(want).max())


@pytest.mark.parametrize("be", backends())
def test_decoder_matches_numpy_token_after_token(be):
    cfg = cfg_for(be)
    w = M.quantize_weights(M.random_weights(cfg, seed=1))      # q8_0 attention, q4_0 MLP, f16 embeddings
    assert isinstance(w["blk.0.attn_q.weight"], llm.QTensor) and w["blk.1.ffn_up.weight"].qtype == "q4_0"
    dec, ref = M.Decoder(w, cfg, be), M.ReferenceDecoder(w, cfg)
    for t in TOKENS:
        assert_logits_close(dec.step(t).numpy(), ref.step(t))
    assert int(dec.pos.numpy()[0]) == len(TOKENS)       # the counter lives on the device
    dec.reset()                     # counter back to 0 on the device: the same sequence again
    ref.reset()
    for t in TOKENS[:3]:
        assert_logits_close(dec.step(t).numpy(), ref.step(t))


@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] in ("CPU", "CL")])
def test_greedy_generation_takes_the_token_on_the_device(be):
    cfg = M.ModelConfig(n_layers=1)
    w = M.quantize_weights(M.random_weights(cfg, seed=4), {"attn": "q4_0", "ffn": "q8_0", "output": "float32"})
    dec, ref = M.Decoder(w, cfg, be, kv_dtype=np.float32), M.ReferenceDecoder(w, cfg)
    got = dec.generate([5, 6], 5)
    logits = [ref.step(5), ref.step(6)]
    want = []
    for _ in range(5):
        want.append(int(np.argmax(logits[-1])))
        logits.append(ref.step(want[-1]))
    assert got == want


def test_decoder_errors_name_the_argument():
    cfg = M.ModelConfig(max_len=2, vocab=32)
    w = M.quantize_weights(M.random_weights(cfg))
    dec = M.Decoder(w, cfg, "CPU")
    with pytest.raises(ValueError, match="'token'"):
        dec.step(32)
    dec.step(1)
    dec.step(2)
    with pytest.raises(ValueError, match="'token'.*full cache \\(2 positions\\)"):
        dec.step(3)
    with pytest.raises(ValueError, match="'n_kv_heads'"):
        M.ModelConfig(n_heads=4, n_kv_heads=3).check()
    del w["output.weight"]
    with pytest.raises(ValueError, match="output.weight"):
        M.Decoder(w, cfg, "CPU")


def test_gguf_model_file_round_trip_and_decode(tmp_path):
    gguf = pytest.importorskip("gguf")
    cfg = M.ModelConfig()
    w = M.quantize_weights(M.random_weights(cfg, seed=2), {"attn": "q4_0", "ffn": "q8_0", "output": "float16"})
    path = tmp_path / "tiny-llama.gguf"
    M.write_gguf(path, cfg, w)
    # a real llama GGUF: metadata, and Q/K rows in llama.cpp's interleaved-RoPE order
    reader = gguf.GGUFReader(str(path))
    assert reader.fields["general.architecture"].contents() == "llama"
    assert reader.fields["llama.attention.head_count_kv"].contents() == 2
    raw = llm.load_gguf(path)
    hd = cfg.head_dim
    q_file = np.asarray(raw["blk.0.attn_q.weight"].data)
    q_mem = np.asarray(w["blk.0.attn_q.weight"].data)
    assert np.array_equal(q_file[1], q_mem[hd // 2]) and np.array_equal(q_file[2], q_mem[1])
    assert raw["token_embd.weight"].dtype == np.float16
    cfg2, w2 = M.read_gguf(path)
    assert cfg2 == cfg
    for name, a in w.items():
        b = w2[name]
        if isinstance(a, llm.QTensor):
            assert b.qtype == a.qtype and np.array_equal(np.asarray(b.data), np.asarray(a.data)), name
        else:
            assert np.array_equal(np.asarray(b), a), name
    dec, ref = M.Decoder(w2, cfg2, "CPU"), M.ReferenceDecoder(w, cfg)
    for t in TOKENS:
        assert_logits_close(dec.step(t).numpy(), ref.step(t))


def test_llm_demo_command(tmp_path, capsys):
    args = ["llm-demo", "--backend", "CPU", "--tokens", "4", "--layers", "1", "--dim", "64", "--heads", "4",
            "--kv-heads", "2", "--hidden", "128", "--vocab", "256"]
    out = io.StringIO()
    assert cli.cmd_llm_demo(cli.build_parser().parse_args(args), out) == 0
    text = out.getvalue()
    assert "tokens/s" in text and "GB/s" in text and "match NumPy" in text
