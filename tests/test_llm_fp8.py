"""tinykernels.llm fp8 (e4m3) and activations against NumPy/ml_dtypes."""
import numpy as np
import pytest

from tinykernels import llm
from llm_helpers import backends, close, dev, get, put

try:
    import torch
except ImportError:          # torch is an optional extra: its comparisons skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3 = ml_dtypes.float8_e4m3fn
rng = np.random.default_rng(19)


@pytest.mark.parametrize("be", backends())
def test_fp8_ops(be):
    b = dev(be)
    a = (rng.standard_normal((3, 40)) * 4).astype(E4M3)
    c = (rng.standard_normal((3, 40)) * 4).astype(E4M3)
    a32, c32 = a.astype(np.float32), c.astype(np.float32)
    np.testing.assert_array_equal(get(llm.fp8_dequantize(put(a, b), 0.5)), (a32 * np.float32(0.5)).astype(np.float16))
    np.testing.assert_array_equal(get(llm.fp8_add(put(a, b), put(c, b), 0.5, 2.0)),
                                  (a32 * np.float32(0.5) + c32 * np.float32(2)).astype(np.float16))
    np.testing.assert_array_equal(get(llm.fp8_mul(put(a, b), put(c, b), 0.5, 2.0)),
                                  ((a32 * np.float32(0.5)) * (c32 * np.float32(2))).astype(np.float16))
    w = rng.standard_normal(40).astype(np.float16)
    got = get(llm.fp8_rms_norm(put(a, b), put(w, b), eps=1e-5, scale=0.125))
    xs = a.astype(np.float64) * 0.125
    assert got.dtype == np.float16
    close(got, xs / np.sqrt((xs * xs).mean(-1, keepdims=True) + 1e-5) * w, np.float16)


@needs_torch
@pytest.mark.parametrize("be", backends())
def test_swiglu_matches_torch(be):
    b = dev(be)
    w1, w3 = (rng.standard_normal((4, 50)).astype(np.float32) * 3 for _ in range(2))
    t1 = torch.tensor(w1.astype(np.float64))
    close(get(llm.swiglu(put(w1, b), put(w3, b))), (torch.nn.functional.silu(t1) * torch.tensor(w3.astype(np.float64))).numpy(),
          np.float32, ulps=8)


def test_fp8_errors_name_the_argument():
    a = np.zeros(4, E4M3)
    with pytest.raises(ValueError, match="'a'.*float32"):
        llm.fp8_add(np.zeros(4, np.float32), a)
    with pytest.raises(ValueError, match="'scale'"):
        llm.fp8_rms_norm(a, np.ones(4, np.float16), scale=0.0)
    with pytest.raises(ValueError, match="'w'.*float32"):
        llm.fp8_rms_norm(a, np.ones(4, np.float32))
