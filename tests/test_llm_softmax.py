"""tinykernels.llm softmax / sum against torch and NumPy."""
import importlib

import numpy as np
import pytest

from tinykernels import llm
from llm_helpers import backends, close, dev, get, put, skip_16bit

try:
    import torch
except ImportError:          # torch is an optional extra: its comparisons skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

C = importlib.import_module("tinykernels.llm._common")
rng = np.random.default_rng(11)


@needs_torch
@pytest.mark.parametrize("grp", [None, 1, 32])
@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_softmax_every_axis_matches_torch(be, dt, grp, monkeypatch):
    monkeypatch.setattr(C, "ROW_GROUP", grp)
    skip_16bit(be, dt)
    b = dev(be)
    x = (rng.standard_normal((3, 4, 37)) * 20).astype(dt)     # large values: needs the max subtraction
    for ax in (0, 1, 2, -1):
        got = get(llm.softmax(put(x, b), axis=ax, scale=0.7))
        want = torch.softmax(torch.tensor(x.astype(np.float64)) * float(np.float32(0.7)), dim=ax).numpy()
        assert got.dtype == dt
        close(got, want, dt, ulps=8)
    s = get(llm.sum(put(x, b), 1))
    assert s.shape == (3, 37)
    close(s, x.astype(np.float64).sum(1), dt, ulps=8 * 4)


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_softmax_host_lanes_rows_around_the_lane_count(be, dt):
    """The host shape keeps ``SM_LANES`` partial maxima and sums per row: rows shorter than,
    equal to and a little longer than whole multiples of it, a -inf entry, the maximum in the
    tail, float32 (the exponentials stashed in ``out``) and float16; a row with a NaN is NaN."""
    sm = importlib.import_module("tinykernels.llm.softmax")
    n = sm.SM_LANES
    b = dev(be)
    for L in (1, n - 1, n, n + 1, 2 * n + 3, 200 if be == "INTERP" else 1000):
        x = (rng.standard_normal((3, L)) * 8).astype(dt)
        if L > 1:
            x[0, L // 2] = -np.inf
        x[1, -1] = 40
        got = get(llm.softmax(put(x, b), scale=1.5))
        x64 = x.astype(np.float64) * 1.5
        want = np.exp(x64 - x64.max(-1, keepdims=True))
        close(got, want / want.sum(-1, keepdims=True), dt, ulps=8)
    x = np.ones((2, 2 * n + 3), dt)
    x[1, n + 1] = np.nan
    got = get(llm.softmax(put(x, b)))
    assert np.isnan(got[1]).all() and not np.isnan(got[0]).any()


@pytest.mark.parametrize("be", backends())
def test_sum_of_1d_is_0d_and_long_rows(be):
    b = dev(be)
    x = rng.standard_normal(5000 if be != "INTERP" else 300).astype(np.float32)
    s = llm.sum(put(x, b), 0)
    assert get(s).shape == ()
    assert abs(float(get(s)) - x.astype(np.float64).sum()) < 1e-5 * np.abs(x).sum()


def test_softmax_errors_name_the_argument():
    with pytest.raises(ValueError, match="'axis'"):
        llm.softmax(np.zeros((2, 3), np.float32), axis=2)
    with pytest.raises(ValueError, match="'x'.*int32"):
        llm.softmax(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="'out'.*shape"):
        llm.sum(np.zeros((2, 3), np.float32), 0, out=np.zeros(2, np.float32))
