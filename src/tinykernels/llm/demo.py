"""``python -m tinykernels llm-demo``: greedy decoding with the Llama-style model of
:mod:`tinykernels.llm.model`, timed, after checking its logits against NumPy.

Without ``--gguf`` the weights are random, written as a ``llama`` GGUF file in a temporary
folder (q8_0 attention, q4_0 MLP, q8_0 output, float16 embeddings) and read back through
``llm.load_gguf``; without the ``gguf`` package they stay in memory. Reported: tokens per
second and the bandwidth of the weights one token reads (GB/s, 1e9 bytes).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

from . import model as M

DEMO_CONFIG = M.ModelConfig(n_layers=4, dim=512, n_heads=8, n_kv_heads=4, hidden=1408, vocab=8192)
CHECK_TOKENS = 2


def _load(cfg, gguf_path, seed, max_len, tmp):
    """(config, weights, where they came from)."""
    if gguf_path is not None:
        cfg, w = M.read_gguf(gguf_path, max_len=max_len)
        return cfg, w, os.fspath(gguf_path)
    cfg = M.ModelConfig(**{**cfg.__dict__, "max_len": max_len}).check()
    w = M.quantize_weights(M.random_weights(cfg, seed))
    try:
        import gguf  # noqa: F401
    except ImportError:
        return cfg, w, "random weights in memory (the gguf package is not installed)"
    path = os.path.join(tmp, "random-llama.gguf")
    M.write_gguf(path, cfg, w)
    cfg2, w2 = M.read_gguf(path)
    return cfg2, w2, f"random weights, written to and read from {path}"


def run_llm_demo(backend=None, gguf=None, tokens: int = 64, cfg: M.ModelConfig | None = None, seed: int = 0,
                 check: bool = True, out=sys.stdout) -> dict:
    """Decode ``tokens`` tokens greedily (from token 1) on ``backend`` and print the speed.
    Returns ``{"tokens_per_s", "gb_per_s", "bytes_per_token"}``; ``AssertionError`` when
    the logits of the first steps differ from NumPy's."""
    import tinykernels as tk
    if tokens < 1:
        raise ValueError(f"llm-demo: --tokens must be >= 1, got {tokens}")
    be = tk.backend(backend) if backend is not None else tk.default_backend()
    with tempfile.TemporaryDirectory(prefix="tk-llm-demo-") as tmp:
        cfg, w, origin = _load(cfg or DEMO_CONFIG, gguf, seed, tokens + 1, tmp)
        print(f"model: {cfg.n_layers} layers, dim {cfg.dim}, {cfg.n_heads} query / {cfg.n_kv_heads} KV heads "
              f"of {cfg.head_dim}, MLP {cfg.hidden}, vocab {cfg.vocab} ({origin})", file=out)
        dec = M.Decoder(w, cfg, be)
        if check:
            ref = M.ReferenceDecoder(w, cfg)
            for t in range(1, CHECK_TOKENS + 1):
                got = np.asarray(dec.step(t).numpy(), np.float64)
                want = ref.step(t)
                err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
                if not err <= 64 * float(np.finfo(np.float32).eps):
                    raise AssertionError(f"logits of step {t} differ from NumPy's by {err:.2e} (relative)")
            print(f"check: the logits of {CHECK_TOKENS} steps match NumPy float64 (max rel. error {err:.1e})",
                  file=out)
        dec.reset()
        dec.step(1)                                       # compiles every kernel
        dec.reset()
        np.asarray(dec.step(1).numpy())
        t0 = time.perf_counter()
        for _ in range(tokens):
            dec.step(None)                                # the previous argmax, on the device
        last = int(np.asarray(dec.next_tok.numpy()).reshape(-1)[0])     # waits for the last step
        dt = time.perf_counter() - t0
    tps = tokens / dt
    gbs = dec.bytes_per_token * tokens / dt / 1e9
    print(f"backend {be!r}: {tokens} tokens in {dt * 1e3:.1f} ms: {tps:.1f} tokens/s, "
          f"{dec.bytes_per_token / 2**20:.2f} MiB of weights per token: {gbs:.2f} GB/s (last token {last})",
          file=out)
    return {"tokens_per_s": tps, "gb_per_s": gbs, "bytes_per_token": dec.bytes_per_token}
