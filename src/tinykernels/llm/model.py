"""A Llama-style decoder that runs only ``tinykernels.llm`` kernels, for end-to-end checks and
the ``python -m tinykernels llm-demo`` command.

Architecture (Llama 2/3): token embedding; per layer ``x += Wo @ attn(rope(Wq @ n), rope(Wk @
n), Wv @ n)`` with ``n = rms_norm(x)`` and grouped-query attention over a KV cache, then
``x += Wdown @ swiglu(Wgate @ n2, Wup @ n2)`` with ``n2 = rms_norm(x)``; logits ``Wout @
rms_norm(x)``. RoPE is NeoX style inside the model (pairs ``(x[j], x[j + hd/2])``).

Weights use llama.cpp's GGUF names (``token_embd.weight``, ``blk.{i}.attn_q.weight``, ...)
and are ``QTensor`` (q4_0, q8_0, q4_k) or float arrays. In a GGUF file the Q and K rows are
in llama.cpp's interleaved-RoPE order; :func:`write_gguf` and :func:`read_gguf` convert, so
a file written here is a valid ``llama`` GGUF and a small llama GGUF of these tensor types
reads back (the demo feeds token ids; there is no tokenizer).

:class:`Decoder` decodes one token per :meth:`Decoder.step` with every position on the
device: one int32 counter drives ``rope_at``, ``kv_append`` and ``flash_decode`` and is
advanced by ``counter_add``, so a step reads nothing back to the host.
:class:`ReferenceDecoder` is the same model in NumPy float64.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from .. import array as _arr
from . import _common as C

__all__ = ["ModelConfig", "random_weights", "quantize_weights", "write_gguf", "read_gguf", "Decoder",
           "ReferenceDecoder", "weight_bytes"]


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a Llama-style decoder."""
    n_layers: int = 2
    dim: int = 64
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden: int = 128
    vocab: int = 128
    max_len: int = 64
    rope_base: float = 10000.0
    eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def check(self) -> "ModelConfig":
        """``ValueError`` naming the field that makes the configuration unusable."""
        for f in ("n_layers", "dim", "n_heads", "n_kv_heads", "hidden", "vocab", "max_len"):
            v = getattr(self, f)
            C.require(C.is_int(v) and v >= 1, "ModelConfig", f, f"expected an int >= 1, got {v!r}")
        C.require(self.dim % self.n_heads == 0 and self.head_dim % 2 == 0, "ModelConfig", "n_heads",
                  f"expected a divisor of dim {self.dim} giving an even head size, got {self.n_heads}")
        C.require(self.n_heads % self.n_kv_heads == 0, "ModelConfig", "n_kv_heads",
                  f"expected a divisor of n_heads {self.n_heads}, got {self.n_kv_heads}")
        return self


def _names(cfg: ModelConfig):
    """(name, shape [out, in]) of every weight, in file order."""
    hd, d = cfg.head_dim, cfg.dim
    yield "token_embd.weight", (cfg.vocab, d)
    for i in range(cfg.n_layers):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", (d,)
        yield p + "attn_q.weight", (cfg.n_heads * hd, d)
        yield p + "attn_k.weight", (cfg.n_kv_heads * hd, d)
        yield p + "attn_v.weight", (cfg.n_kv_heads * hd, d)
        yield p + "attn_output.weight", (d, cfg.n_heads * hd)
        yield p + "ffn_norm.weight", (d,)
        yield p + "ffn_gate.weight", (cfg.hidden, d)
        yield p + "ffn_up.weight", (cfg.hidden, d)
        yield p + "ffn_down.weight", (d, cfg.hidden)
    yield "output_norm.weight", (d,)
    yield "output.weight", (cfg.vocab, d)


def random_weights(cfg: ModelConfig, seed: int = 0) -> dict:
    """float32 weights: matrices ~ N(0, 1/fan_in), norm weights ~ 1 + N(0, 0.1^2), embeddings ~ N(0, 1)."""
    cfg.check()
    r = np.random.default_rng(seed)
    w = {}
    for name, shape in _names(cfg):
        if len(shape) == 1:
            w[name] = (1 + 0.1 * r.standard_normal(shape)).astype(np.float32)
        elif name == "token_embd.weight":
            w[name] = r.standard_normal(shape).astype(np.float32)
        else:
            w[name] = (r.standard_normal(shape) / math.sqrt(shape[1])).astype(np.float32)
    return w


DEFAULT_QTYPES = {"attn": "q8_0", "ffn": "q4_0", "output": "q8_0", "token_embd": "float16"}


def quantize_weights(weights: dict, qtypes: dict | None = None) -> dict:
    """The float32 ``weights`` stored as a model file would: each matrix as ``qtypes[kind]``
    (kinds ``attn``, ``ffn``, ``output``, ``token_embd``; values ``q4_0``, ``q8_0``, ``q4_k``,
    ``float16``, ``float32``), norm weights float32."""
    from .quant import quantize
    q = dict(DEFAULT_QTYPES, **(qtypes or {}))
    out = {}
    for name, w in weights.items():
        kind = "token_embd" if name.startswith("token_embd") else "output" if name == "output.weight" else \
            "attn" if ".attn_" in name else "ffn"
        if w.ndim == 1 or q[kind] == "float32":
            out[name] = np.asarray(w, np.float32)
        elif q[kind] == "float16":
            out[name] = np.asarray(w, np.float16)
        else:
            out[name] = quantize(np.ascontiguousarray(w, np.float32), q[kind])
    return out


# ----------------------------------------------------------------------------- GGUF files

def _rope_rows(rows: int, n_head: int, to_file: bool) -> np.ndarray:
    """Row order between NeoX (half-split) RoPE and llama.cpp's interleaved order in a file."""
    half = rows // n_head // 2
    idx = np.arange(rows).reshape(n_head, 2, half).swapaxes(1, 2).reshape(-1)
    return idx if to_file else np.argsort(idx)


def _permute(w, n_head: int, to_file: bool):
    from .quant import QTensor
    idx = _rope_rows(w.shape[0], n_head, to_file)
    if isinstance(w, QTensor):
        return QTensor(w.qtype, w.shape, np.ascontiguousarray(np.asarray(w.data)[idx]))
    return np.ascontiguousarray(np.asarray(w)[idx])


def write_gguf(path, cfg: ModelConfig, weights: dict) -> None:
    """Write ``weights`` (as :func:`quantize_weights` returns them) as a ``llama`` GGUF file."""
    from .gguf_io import _import_gguf
    from .quant import QTensor, QTYPES
    gguf = _import_gguf()
    G = gguf.GGMLQuantizationType
    wr = gguf.GGUFWriter(os.fspath(path), "llama")
    wr.add_block_count(cfg.n_layers)
    wr.add_context_length(cfg.max_len)
    wr.add_embedding_length(cfg.dim)
    wr.add_feed_forward_length(cfg.hidden)
    wr.add_head_count(cfg.n_heads)
    wr.add_head_count_kv(cfg.n_kv_heads)
    wr.add_rope_freq_base(cfg.rope_base)
    wr.add_layer_norm_rms_eps(cfg.eps)
    for name, _ in _names(cfg):
        w = weights[name]
        if name.endswith("attn_q.weight"):
            w = _permute(w, cfg.n_heads, True)
        elif name.endswith("attn_k.weight"):
            w = _permute(w, cfg.n_kv_heads, True)
        if isinstance(w, QTensor):
            wr.add_tensor(name, np.asarray(w.data), raw_dtype=G(QTYPES[w.qtype].ggml_type))
        else:
            wr.add_tensor(name, np.asarray(w))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def _f32(v) -> float:
    """A float32 metadata value as the shortest decimal that rounds to it (1e-5, not
    9.99999974e-06): the value the file's author wrote."""
    return float(str(np.float32(v)))


def read_gguf(path, max_len: int | None = None) -> tuple:
    """``(ModelConfig, weights)`` of a ``llama`` GGUF file (weights on the host, Q/K rows back
    in NeoX order; a missing ``output.weight`` is tied to ``token_embd.weight``)."""
    from .gguf_io import load_gguf, open_reader
    _, reader = open_reader(path, "read_gguf")
    f = reader.fields

    def meta(key, default=None):
        fld = f.get(key)
        return default if fld is None else fld.contents()

    arch = meta("general.architecture", "llama")
    C.require(arch == "llama", "read_gguf", "path", f"expected a 'llama' model, got architecture {arch!r}")
    w = load_gguf(path)
    emb = w.get("token_embd.weight")
    C.require(emb is not None, "read_gguf", "path", "expected a model with token_embd.weight, got one without it")
    n_heads = int(meta("llama.attention.head_count"))
    ctx = int(meta("llama.context_length", 2048))
    cfg = ModelConfig(n_layers=int(meta("llama.block_count")), dim=int(meta("llama.embedding_length")),
                      n_heads=n_heads, n_kv_heads=int(meta("llama.attention.head_count_kv", n_heads)),
                      hidden=int(meta("llama.feed_forward_length")), vocab=int(emb.shape[0]),
                      max_len=min(ctx, max_len) if max_len else ctx,
                      rope_base=_f32(meta("llama.rope.freq_base", 10000.0)),
                      eps=_f32(meta("llama.attention.layer_norm_rms_epsilon", 1e-5))).check()
    w.setdefault("output.weight", emb)
    for i in range(cfg.n_layers):
        w[f"blk.{i}.attn_q.weight"] = _permute(w[f"blk.{i}.attn_q.weight"], cfg.n_heads, False)
        w[f"blk.{i}.attn_k.weight"] = _permute(w[f"blk.{i}.attn_k.weight"], cfg.n_kv_heads, False)
    missing = [n for n, _ in _names(cfg) if n not in w]
    C.require(not missing, "read_gguf", "path", f"expected every tensor of the model, got one without {', '.join(missing[:4])}")
    return cfg, w


# ----------------------------------------------------------------------------- shared pieces

def rope_tables(cfg: ModelConfig) -> tuple:
    """float32 cos/sin [max_len, head_dim/2]: angle ``p * base**(-2j/head_dim)`` (float64, rounded once)."""
    hd = cfg.head_dim
    inv = cfg.rope_base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(cfg.max_len, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _host_float(w) -> np.ndarray:
    """A weight's values as float64 (QTensors dequantized exactly as the kernels decode them)."""
    from .quant import QTensor, dequantize
    if isinstance(w, QTensor):
        return np.asarray(_arr.as_host_ndarray(dequantize(QTensor(w.qtype, w.shape, np.asarray(w.data)))),
                          np.float64)
    return np.asarray(w.numpy() if hasattr(w, "numpy") and not isinstance(w, np.ndarray) else w, np.float64)


def weight_bytes(weights: dict, cfg: ModelConfig) -> int:
    """Bytes of weights one decode step reads: every matrix and norm weight, one embedding row."""
    from .quant import QTensor
    total = 0
    for name, _ in _names(cfg):
        w = weights[name]
        nb = w.nbytes if isinstance(w, QTensor) else int(np.prod(w.shape)) * C.dtype_of(w).itemsize
        if name == "token_embd.weight":
            nb //= int(w.shape[0])
        total += nb
    return total


# ----------------------------------------------------------------------------- the device decoder

class Decoder:
    """The model on ``backend``, decoding one token per :meth:`step` with only
    ``tinykernels.llm`` kernels and a device-resident position counter.

    Matrices stay as given when they are QTensors or float32; float16/bfloat16 matrices are
    converted to float32 on the device (``llm.matmul`` takes float32 or quantized weights).
    ``kv_dtype``: the KV cache's dtype (float32 or float16)."""

    def __init__(self, weights: dict, cfg: ModelConfig, backend=None, kv_dtype=np.float32):
        import tinykernels as tk
        from .quant import QTensor
        from . import elementwise as E
        self.cfg = cfg.check()
        if backend is None or isinstance(backend, str):
            backend = tk.backend(backend) if backend is not None else tk.default_backend()
        self.backend = backend
        self.w = {}
        for name, _ in _names(cfg):
            C.require(name in weights, "Decoder", "weights", f"expected a dict with {name!r}, got one without it")
            w = weights[name]
            if isinstance(w, QTensor):
                self.w[name] = QTensor(w.qtype, w.shape, self._dev(w.data))
            else:
                a = self._dev(w)
                if len(w.shape) == 2 and name != "token_embd.weight" and C.dtype_of(a) != np.float32:
                    a = E.cast(a, np.float32)
                self.w[name] = a
        emb = self.w["token_embd.weight"]
        if isinstance(emb, QTensor):            # gather needs plain rows: decode the table once
            from .quant import dequantize
            self.w["token_embd.weight"] = dequantize(emb)
        self.bytes_per_token = weight_bytes(self.w, cfg)
        hd, H, KH, L = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.max_len
        cos, sin = rope_tables(cfg)
        self.cos, self.sin = self._dev(cos), self._dev(sin)
        self.kc = [_arr.zeros((1, KH, L, hd), kv_dtype, backend=backend) for _ in range(cfg.n_layers)]
        self.vc = [_arr.zeros((1, KH, L, hd), kv_dtype, backend=backend) for _ in range(cfg.n_layers)]
        self.pos = _arr.zeros((1,), np.int32, backend=backend)
        self.n = 0

        def buf(*shape):
            return _arr.empty(shape, np.float32, backend=backend)
        self.x, self.h, self.o = buf(cfg.dim), buf(cfg.dim), buf(cfg.dim)
        self.q, self.k, self.v, self.att = buf(H * hd), buf(KH * hd), buf(KH * hd), buf(H * hd)
        self.g, self.u = buf(cfg.hidden), buf(cfg.hidden)
        self.logits = buf(cfg.vocab)
        self.tok = _arr.zeros((1,), np.int32, backend=backend)
        self.next_tok = _arr.zeros((), np.int32, backend=backend)

    def _dev(self, a):
        """``a`` as a tk.Array on the model's backend (copied there when it lives elsewhere)."""
        return _arr.asarray(np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a, backend=self.backend)

    def reset(self) -> None:
        """Forget the sequence: the counter goes back to 0 (the cache rows are overwritten)."""
        from .kvcache import counter_set
        counter_set(self.pos, 0)
        self.n = 0

    def step(self, token=None):
        """Feed one token (a Python int, or ``None``: the argmax of the previous step's logits,
        which never leaves the device) and return the logits [vocab] (float32, a buffer the
        next step overwrites)."""
        from . import elementwise as E, kvcache as K, layout as Lay, norms as N
        from .activations import swiglu
        from .rope import rope_at
        from .attention import flash_decode
        from .matmul import matmul
        cfg, w = self.cfg, self.w
        C.require(self.n < cfg.max_len, "Decoder.step", "token", f"expected a free cache position, got a full cache ({cfg.max_len} positions)")
        hd, H, KH = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
        if token is None:
            idx = C.view(self.next_tok, (1,))
        else:
            C.require(C.is_int(token) and 0 <= token < cfg.vocab, "Decoder.step", "token",
                      f"expected an int in [0, {cfg.vocab}), got {token!r}")
            self.tok = _arr.asarray(np.array([token], np.int32), backend=self.backend)
            idx = self.tok
        row = Lay.gather(w["token_embd.weight"], idx)
        x = self.x
        if C.dtype_of(row) == np.float32:
            E.add(C.view(row, (cfg.dim,)), 0.0, out=x)
        else:
            E.cast(C.view(row, (cfg.dim,)), np.float32, out=x)
        qv, kv = C.view(self.q, (H, 1, hd)), C.view(self.k, (KH, 1, hd))
        for i in range(cfg.n_layers):
            p = f"blk.{i}."
            N.rms_norm(x, w[p + "attn_norm.weight"], cfg.eps, out=self.h)
            matmul(w[p + "attn_q.weight"], self.h, out=self.q)
            matmul(w[p + "attn_k.weight"], self.h, out=self.k)
            matmul(w[p + "attn_v.weight"], self.h, out=self.v)
            rope_at(qv, self.cos, self.sin, self.pos, out=qv)
            rope_at(kv, self.cos, self.sin, self.pos, out=kv)
            K.kv_append(self.kc[i], C.view(self.k, (1, KH, 1, hd)), self.pos)
            K.kv_append(self.vc[i], C.view(self.v, (1, KH, 1, hd)), self.pos)
            flash_decode(C.view(self.q, (1, H, hd)), self.kc[i], self.vc[i], self.pos, offset=1,
                         out=C.view(self.att, (1, H, hd)))
            matmul(w[p + "attn_output.weight"], self.att, out=self.o)
            N.rms_norm(self.o, w[p + "ffn_norm.weight"], cfg.eps, residual=x, out=self.h, residual_out=x)
            matmul(w[p + "ffn_gate.weight"], self.h, out=self.g)
            matmul(w[p + "ffn_up.weight"], self.h, out=self.u)
            swiglu(self.g, self.u, out=self.g)
            matmul(w[p + "ffn_down.weight"], self.g, out=self.o)
            E.add(x, self.o, out=x)
        N.rms_norm(x, w["output_norm.weight"], cfg.eps, out=self.h)
        matmul(w["output.weight"], self.h, out=self.logits)
        Lay.argmax(self.logits, out=self.next_tok)
        K.counter_add(self.pos)
        self.n += 1
        return self.logits

    def generate(self, prompt: list, n: int) -> list:
        """Greedy decoding: feed ``prompt``, then ``n`` more steps, each fed the argmax of the
        previous logits on the device; each chosen token is also read back to be returned."""
        out = []
        for t in prompt:
            self.step(int(t))
        for _ in range(n):
            out.append(int(np.asarray(_host(self.next_tok)).reshape(-1)[0]))
            self.step(None)
        return out


def _host(a) -> np.ndarray:
    h = _arr.as_host_ndarray(a)
    return h if h is not None else np.asarray(a.numpy())


# ----------------------------------------------------------------------------- the NumPy reference

class ReferenceDecoder:
    """The same model in NumPy float64, on the dequantized weights (what the kernels multiply
    by) and the same float32 RoPE tables."""

    def __init__(self, weights: dict, cfg: ModelConfig):
        self.cfg = cfg.check()
        self.w = {name: _host_float(weights[name]) for name, _ in _names(cfg)}
        cos, sin = rope_tables(cfg)
        self.cos, self.sin = cos.astype(np.float64), sin.astype(np.float64)
        self.reset()

    def reset(self) -> None:
        c = self.cfg
        self.kc = np.zeros((c.n_layers, c.n_kv_heads, c.max_len, c.head_dim))
        self.vc = np.zeros_like(self.kc)
        self.n = 0

    def _norm(self, x, w):
        return x / np.sqrt(np.mean(x * x) + self.cfg.eps) * w

    def _rope(self, x, p):
        h = x.shape[-1] // 2
        c, s = self.cos[p], self.sin[p]
        x1, x2 = x[..., :h], x[..., h:]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)

    def step(self, token: int) -> np.ndarray:
        """Logits [vocab] (float64) after feeding ``token``."""
        c, w, p = self.cfg, self.w, self.n
        hd, H, KH = c.head_dim, c.n_heads, c.n_kv_heads
        x = w["token_embd.weight"][token].copy()
        for i in range(c.n_layers):
            b = f"blk.{i}."
            h = self._norm(x, w[b + "attn_norm.weight"])
            q = self._rope((w[b + "attn_q.weight"] @ h).reshape(H, hd), p)
            k = self._rope((w[b + "attn_k.weight"] @ h).reshape(KH, hd), p)
            self.kc[i, :, p] = k
            self.vc[i, :, p] = (w[b + "attn_v.weight"] @ h).reshape(KH, hd)
            kk = np.repeat(self.kc[i, :, :p + 1], H // KH, 0)
            vv = np.repeat(self.vc[i, :, :p + 1], H // KH, 0)
            s = np.einsum("hd,hnd->hn", q, kk) / math.sqrt(hd)
            e = np.exp(s - s.max(-1, keepdims=True))
            att = np.einsum("hn,hnd->hd", e / e.sum(-1, keepdims=True), vv).reshape(-1)
            x = x + w[b + "attn_output.weight"] @ att
            h = self._norm(x, w[b + "ffn_norm.weight"])
            g, u = w[b + "ffn_gate.weight"] @ h, w[b + "ffn_up.weight"] @ h
            x = x + w[b + "ffn_down.weight"] @ (g / (1 + np.exp(-g)) * u)
        self.n += 1
        return w["output.weight"] @ self._norm(x, w["output_norm.weight"])
