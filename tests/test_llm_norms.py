"""tinykernels.llm norms (rms_norm and its fused variants, qk_norm_rope) against torch/NumPy."""
import importlib

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from llm_helpers import backends, close, dev, get, put, skip_16bit

try:
    import torch
except ImportError:          # torch is an optional extra: its comparisons skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

C = importlib.import_module("tinykernels.llm._common")
rng = np.random.default_rng(3)


def ref(x, w, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w.astype(np.float64)


def rope_ref(x, cos, sin, off=0):
    h, seq = cos.shape[1], x.shape[-2]
    c, s = cos[off:off + seq].astype(np.float64), sin[off:off + seq].astype(np.float64)
    y = x.astype(np.float64).copy()
    x1, x2 = y[..., :h].copy(), y[..., h:2 * h].copy()
    y[..., :h], y[..., h:2 * h] = x1 * c - x2 * s, x2 * c + x1 * s
    return y


@pytest.fixture(params=[None, 1, 64], ids=["auto", "row-loop", "grouped"])
def group(request, monkeypatch):
    monkeypatch.setattr(C, "ROW_GROUP", request.param)


@needs_torch
@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(300,), (3, 5, 129), (2, 2, 2, 7)])
def test_rms_norm_matches_torch(be, dt, shape, group):
    skip_16bit(be, dt)
    b = dev(be)
    x = rng.standard_normal(shape).astype(dt)
    w = rng.standard_normal(shape[-1]).astype(dt)
    y, scale = llm.rms_norm(put(x, b), put(w, b), eps=1e-5, return_scale=True)
    assert get(y).dtype == dt and get(scale).shape == shape[:-1]
    close(get(y), ref(x, w, 1e-5), dt)
    t = torch.nn.functional.rms_norm(torch.tensor(x.astype(np.float64)), (shape[-1],),
                                     torch.tensor(w.astype(np.float64)), eps=1e-5).numpy()
    close(get(y), t, dt)
    x64 = x.astype(np.float64)
    close(get(scale), 1 / np.sqrt((x64 * x64).mean(-1) + 1e-5), np.float32)


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_fused_residual_variants(be, dt, group):
    skip_16bit(be, dt)
    b = dev(be)
    x, r = (rng.standard_normal((4, 3, 50)).astype(dt) for _ in range(2))
    w = rng.standard_normal(50).astype(np.float32)
    y, s = llm.rms_norm(put(x, b), put(w, b), residual=put(r, b))
    np.testing.assert_array_equal(get(s), x + r)               # s rounded to x's dtype, as NumPy
    close(get(y), ref(x + r, w), dt)
    res = put(r.copy(), b)
    z = llm.rms_norm_add(put(x, b), put(w, b), res, out=res)   # residual stream updated in place
    assert z is res
    close(get(z), r.astype(np.float64) + ref(x, w), dt)
    sc = tk.empty((4, 3), np.float32, backend=b)
    y2, sc2 = llm.rms_norm(put(x, b), put(w, b), scale_out=sc)
    assert sc2 is sc


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("rot", [16, 32])
def test_qk_norm_rope(be, rot, group):
    b = dev(be)
    x = rng.standard_normal((2, 3, 5, 32)).astype(np.float32)
    w = rng.standard_normal(32).astype(np.float32)
    ang = rng.uniform(0, 6, (9, rot // 2))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    got = llm.qk_norm_rope(put(x, b), put(w, b), put(cos, b), put(sin, b), offset=2)
    close(get(got), rope_ref(ref(x, w), cos, sin, 2), np.float32, ulps=8)
    cnt = tk.full((1,), 3, np.int32, backend=b)
    got = llm.qk_norm_rope(put(x[..., :1, :], b), put(w, b), put(cos, b), put(sin, b), pos_counter=cnt)
    close(get(got), rope_ref(ref(x[..., :1, :], w), cos, sin, 3), np.float32, ulps=8)


def test_norm_errors_name_the_argument():
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(ValueError, match="'w'.*shape"):
        llm.rms_norm(x, np.ones(7, np.float32))
    with pytest.raises(ValueError, match="'residual'.*shape"):
        llm.rms_norm(x, np.ones(8, np.float32), residual=np.zeros((2, 7), np.float32))
    with pytest.raises(ValueError, match="'x'.*int64"):
        llm.rms_norm(np.zeros((2, 8), np.int64), np.ones(8, np.float32))
    with pytest.raises(ValueError, match="'scale_out'"):
        llm.rms_norm(x, np.ones(8, np.float32), scale_out=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="'eps'"):
        llm.rms_norm(x, np.ones(8, np.float32), eps=-1.0)
    with pytest.raises(ValueError, match="'cos'"):
        llm.qk_norm_rope(np.zeros((3, 8), np.float32), np.ones(8, np.float32), np.ones((2, 4), np.float32),
                         np.ones((2, 4), np.float32))
