"""SPEC 10 audited again (audit16b) where test_ported_llm_ops.py did not go, in the manner of
PyTorch's OpInfo sample inputs (an empty key set) against torch's scaled_dot_product_attention:
flash_decode over 0, 1 and max_len keys from an int and from a device int32 array."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm

from llm_helpers import backends, dev, get

torch = pytest.importorskip("torch")


def _sdpa(q, kc, vc, n):
    """torch's SDPA (float64) of q [B, H, D] over the first n keys (grouped-query)."""
    rep = q.shape[1] // kc.shape[1]
    k = torch.tensor(kc[:, :, :n].astype(np.float64)).repeat_interleave(rep, 1)
    v = torch.tensor(vc[:, :, :n].astype(np.float64)).repeat_interleave(rep, 1)
    return torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q[:, :, None].astype(np.float64)), k, v).numpy()[:, :, 0]


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("D", [64, 128])
def test_flash_decode_over_no_one_and_every_key_as_torch(name, D):
    """kv_len 0 (no key: 0, as torch's SDPA over an empty key set and flash_attention with
    Sk = 0; it was a ValueError from an int and a NaN row from a device array), 1 and max_len,
    from an int, a [1] and a [batch] device array, one chunk and several"""
    b = dev(name)
    rng = np.random.default_rng(D)
    L = 9
    q = rng.standard_normal((2, 4, D)).astype(np.float32)
    kc, vc = (rng.standard_normal((2, 2, L, D)).astype(np.float32) for _ in range(2))
    on = [tk.asarray(a, backend=b) for a in (q, kc, vc)]
    for n in (0, 1, L):
        ref = _sdpa(q, kc, vc, n)
        if n == 0:
            assert np.array_equal(ref, np.zeros_like(ref))            # torch's own rule
        for kv in (n, tk.asarray(np.array([n], np.int32), backend=b),
                   tk.asarray(np.array([n, n], np.int32), backend=b)):
            for splits in (None, 1, 3):
                got = get(llm.flash_decode(*on, kv, splits=splits))
                np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6, err_msg=f"n={n} splits={splits}")
    mixed = get(llm.flash_decode(*on, tk.asarray(np.array([0, L], np.int32), backend=b), splits=2))
    np.testing.assert_array_equal(mixed[0], 0)
    np.testing.assert_allclose(mixed[1], _sdpa(q, kc, vc, L)[1], rtol=2e-6, atol=2e-6)
    got = get(llm.flash_decode(*on, 0, offset=1))                     # offset counts too
    np.testing.assert_allclose(got, _sdpa(q, kc, vc, 1), rtol=2e-6, atol=2e-6)
    for bad in (-1, L + 1):
        with pytest.raises(ValueError, match=f"llm.flash_decode: argument 'kv_len': expected 0 to {L} keys"):
            llm.flash_decode(*on, bad)


def test_flash_decode_with_no_key_on_host_arrays_and_out():
    """the host fast path (NumPy in, out= given) takes kv_len 0 too and writes zeros over out"""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 16)).astype(np.float32)
    kc = rng.standard_normal((1, 1, 4, 16)).astype(np.float32)
    out = np.full_like(q, np.nan)
    assert llm.flash_decode(q, kc, kc, 0, out=out) is out
    np.testing.assert_array_equal(out, 0)


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("Sq,Sk,D", [(1, 1, 64), (1, 7, 128), (3, 9, 64), (9, 3, 64), (5, 5, 128)])
def test_causal_attention_is_torch_lower_right_mask(name, Sq, Sk, D):
    """causal=True with q_len != k_len is aligned bottom-right (query i sees keys
    j <= i + Sk - Sq), as torch's causal_lower_right bias, rows seeing no key 0 as there; for
    Sq == Sk it is also torch's is_causal (top-left), which differs when Sq != Sk"""
    from torch.nn.attention.bias import causal_lower_right
    b = dev(name)
    rng = np.random.default_rng(Sq * 100 + Sk)
    q = rng.standard_normal((2, 4, Sq, D)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, Sk, D)).astype(np.float32) for _ in range(2))
    got = get(llm.flash_attention(*[tk.asarray(a, backend=b) for a in (q, k, v)], causal=True))
    tq, tk_, tv = (torch.tensor(a.astype(np.float64)) for a in (q, k, v))
    tk_, tv = tk_.repeat_interleave(2, 1), tv.repeat_interleave(2, 1)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ref = sdpa(tq, tk_, tv, attn_mask=causal_lower_right(Sq, Sk)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6)
    if Sq > Sk:
        np.testing.assert_array_equal(got[:, :, :Sq - Sk], 0)          # rows that see no key
    top_left = sdpa(tq, tk_, tv, is_causal=True).numpy()
    assert np.allclose(got, top_left, rtol=1e-5, atol=2e-6) == (Sq == Sk or Sk == 1 and Sq == 1)


@pytest.mark.parametrize("name", backends())
def test_transpose_axes_as_numpy_takes_them(name):
    """axes as NumPy takes them: a tuple, a list, an int array, NumPy ints, negative axes;
    floats and bools are a ValueError naming 'axes' (the 2-D host fast path compared
    (1.0, 0.0) == (1, 0) and transposed)"""
    b = dev(name)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axes in ((2, 0, 1), [2, 0, 1], np.array([2, 0, 1]), np.array([-1, 0, -2]), (np.int64(2), np.int32(0), 1)):
        got = get(llm.transpose(tk.asarray(x, backend=b), axes))
        np.testing.assert_array_equal(got, np.transpose(x, axes))
    x2 = x[0]
    for axes in ((1.0, 0.0), (True, False), np.array([1.0, 0.0]), (1, 0.0)):
        for arg in (x2, tk.asarray(x2, backend=b)):
            with pytest.raises(ValueError, match="llm.transpose: argument 'axes': expected a permutation"):
                llm.transpose(arg, axes)
