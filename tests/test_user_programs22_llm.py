"""``tinykernels.llm`` as SPEC section 10 shows it, used by a stranger (audit user22): one
transformer block written with the library's functions (out= and stream= included) against the
same block in NumPy float64, and the errors of the attention functions naming the argument that
is actually wrong. The tests named ``..._was_...`` failed before this audit's fixes."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm

DEVS = ["CPU"]
if tk.backends()["OpenCL"][0]:
    DEVS.append("CL")


def _sdpa(q, k, v, causal):
    """Attention in float64, grouped-query by repeating k/v heads; the causal mask is
    bottom-right aligned (query i sees keys j <= i + Sk - Sq), as docs/llm.md says."""
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, 1).astype(np.float64), np.repeat(v, rep, 1).astype(np.float64)
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, sk), bool), sk - sq), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


@pytest.mark.parametrize("dev", DEVS)
def test_transformer_block_from_the_spec_functions(dev):
    """Embedding gather -> rms_norm -> q/k/v projections (matmul, one of them quantized q8_0) ->
    rope -> grouped-query causal flash_attention -> residual rms_norm -> swiglu MLP, against NumPy.
    Half of the calls pass ``out=`` (and get that array back) and run on a stream of their own."""
    rng = np.random.default_rng(20)
    b = tk.backend(dev)
    A = lambda x: tk.asarray(np.ascontiguousarray(x, dtype=np.float32), backend=b)  # noqa: E731
    V, D, S, H, KVH, HD, F = 11, 32, 5, 4, 2, 8, 64
    table = rng.standard_normal((V, D)).astype(np.float32)
    tokens = np.array([3, 1, 4, 1, 5], np.int32)
    wn, wn2 = 1 + 0.1 * rng.standard_normal(D), 1 + 0.1 * rng.standard_normal(D)
    wq, wk, wv = (0.2 * rng.standard_normal((D, n * HD)) for n in (H, KVH, KVH))
    w1, w3 = 0.2 * rng.standard_normal((D, F)), 0.2 * rng.standard_normal((D, F))
    ang = np.outer(np.arange(S), 1.0 / 10000 ** (np.arange(HD // 2) / (HD // 2)))
    cos, sin = np.cos(ang), np.sin(ang)
    s = b.stream()

    x = llm.gather(A(table), tk.asarray(tokens, backend=b))                       # [S, D]
    h = tk.zeros((S, D), backend=b)
    tk.synchronize(b)      # work on the default stream is not ordered with s (SPEC 6): wait for it
    assert llm.rms_norm(x, A(wn), eps=1e-5, out=h, stream=s) is h
    s.synchronize()
    q = llm.matmul(h, A(wq))                                                      # [S, H*HD]
    wk_q = llm.quantize(A(wk.T), "q8_0")                                          # [KVH*HD, D]
    kt = tk.zeros(KVH * HD, backend=b)
    ks = []
    for t in range(S):     # GEMVs on the stream; reading .numpy() waits for nothing (debugging.md)
        ht = A(h.numpy()[t])
        tk.synchronize(b)
        assert llm.matmul(wk_q, ht, out=kt, stream=s) is kt
        s.synchronize()
        ks.append(kt.numpy().copy())
    k = np.stack(ks)                                                              # [S, KVH*HD]
    v = llm.matmul(h, A(wv))

    def heads(a, n):
        return np.ascontiguousarray(np.asarray(a).reshape(S, n, HD).transpose(1, 0, 2)[None])

    qh = llm.rope(A(heads(q.numpy(), H)), A(cos), A(sin))
    kh = llm.rope(A(heads(k, KVH)), A(cos), A(sin))
    att = llm.flash_attention(qh, kh, A(heads(v.numpy(), KVH)), causal=True)       # [1, H, S, HD]
    o = A(att.numpy()[0].transpose(1, 0, 2).reshape(S, H * HD))
    h2, resid = llm.rms_norm(o, A(wn2), eps=1e-5, residual=x)
    up = tk.zeros((S, F), backend=b)
    g1, g3 = llm.matmul(h2, A(w1)), llm.matmul(h2, A(w3))                       # default stream
    tk.synchronize(b)
    out = llm.swiglu(g1, g3, out=up, stream=s)
    s.synchronize()
    assert out is up

    # NumPy, float64 (the quantized projection with the dequantized weights it really used)
    def rms(a, w):
        return a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-5) * w

    def rope(a):
        r, a1, a2 = a.copy(), a[..., :HD // 2], a[..., HD // 2:]
        r[..., :HD // 2], r[..., HD // 2:] = a1 * cos - a2 * sin, a2 * cos + a1 * sin
        return r

    f32 = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731  (the weights as stored)
    X = table[tokens].astype(np.float64)
    Hn = rms(X, f32(wn))
    Q, K, Vv = Hn @ f32(wq), Hn @ llm.dequantize(wk_q).numpy().astype(np.float64).T, Hn @ f32(wv)
    hd = lambda a, n: a.reshape(S, n, HD).transpose(1, 0, 2)[None]  # noqa: E731
    At = _sdpa(rope(hd(Q, H)), rope(hd(K, KVH)), hd(Vv, KVH), True)
    R = At[0].transpose(1, 0, 2).reshape(S, H * HD) + X
    H2 = rms(R, f32(wn2))
    G = H2 @ f32(w1)
    ref = G / (1 + np.exp(-G)) * (H2 @ f32(w3))
    np.testing.assert_allclose(resid.numpy(), R, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-3, atol=1e-3)


def test_attention_error_names_k_when_k_head_dim_is_wrong_was_v():
    """A k whose head_dim differs from q's (v correct) was reported as "argument 'v': expected
    shape (.., 4), got (.., 8)": v checked against k before k against q. Now k is named, for
    flash_attention and flash_decode's k_cache; a wrong v is still named v."""
    b = tk.CPU()
    rng = np.random.default_rng(21)
    z = lambda *s: tk.asarray(rng.standard_normal(s).astype(np.float32), backend=b)  # noqa: E731
    q, k, v = z(1, 2, 3, 8), z(1, 2, 5, 8), z(1, 2, 5, 8)
    with pytest.raises(ValueError, match=r"flash_attention: argument 'k': expected head_dim 8"):
        llm.flash_attention(q, z(1, 2, 5, 4), v)
    with pytest.raises(ValueError, match=r"flash_attention: argument 'k': expected batch 1"):
        llm.flash_attention(q, z(2, 2, 5, 8), v)
    with pytest.raises(ValueError, match=r"flash_attention: argument 'v': expected shape \(1, 2, 5, 8\)"):
        llm.flash_attention(q, k, z(1, 2, 5, 4))
    with pytest.raises(ValueError, match=r"flash_decode: argument 'k_cache': expected head_dim 8"):
        llm.flash_decode(z(1, 2, 8), z(1, 2, 5, 4), v, 3)
    with pytest.raises(ValueError, match=r"flash_decode: argument 'v_cache': expected shape"):
        llm.flash_decode(z(1, 2, 8), k, z(1, 2, 4, 8), 3)
