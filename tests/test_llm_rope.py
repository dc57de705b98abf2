"""tinykernels.llm rope / rope_at against a NumPy reference (exact in float32)."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from llm_helpers import backends, close, dev, get, put, skip_16bit
from test_llm_norms import rope_ref

rng = np.random.default_rng(5)


def tables(n, rot, dt=np.float32):
    ang = rng.uniform(0, 6, (n, rot // 2))
    return np.cos(ang).astype(dt), np.sin(ang).astype(dt)


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("shape,rot", [((6, 8), 8), ((2, 4, 64), 32), ((1, 2, 3, 10), 4)])
def test_rope_full_and_half_rotary(be, dt, shape, rot):
    skip_16bit(be, dt)
    b = dev(be)
    x = rng.standard_normal(shape).astype(dt)
    cos, sin = tables(shape[-2] + 3, rot)
    got = get(llm.rope(put(x, b), put(cos, b), put(sin, b), offset=3))
    assert got.dtype == dt
    if dt == np.float32:
        # float32 arithmetic, each product rounded (CL may contract to FMA: see the report)
        close(got, rope_ref(x, cos, sin, 3), dt, ulps=2)
        np.testing.assert_array_equal(got[..., rot:], x[..., rot:])
    else:
        close(got, rope_ref(x, cos, sin, 3), dt, ulps=4)


@pytest.mark.parametrize("be", backends())
def test_rope_in_place_and_at_device_position(be):
    b = dev(be)
    x = rng.standard_normal((2, 1, 16)).astype(np.float32)
    cos, sin = tables(10, 16)
    X = tk.asarray(x.copy(), backend=b)
    cnt = tk.full((1,), 7, np.int32, backend=b)
    assert llm.rope_at(X, put(cos, b), put(sin, b), cnt, out=X) is X
    close(get(X), rope_ref(x, cos, sin, 7), np.float32, ulps=2)
    # a position past the table gives NaN, never a read outside it
    cnt2 = tk.full((1,), 10, np.int32, backend=b)
    assert np.isnan(get(llm.rope_at(put(x, b), put(cos, b), put(sin, b), cnt2))).all()


def test_rope_position_past_table_is_index_error_in_debug_mode():
    b = tk.CPU(debug=True)
    cos, sin = tables(4, 8)
    with pytest.raises(IndexError):
        A = lambda a: tk.asarray(a, backend=b)
        llm.rope_at(A(np.zeros((1, 8), np.float32)), A(cos), A(sin), A(np.array([4], np.int32)))
        tk.synchronize(b)


def test_rope_errors_name_the_argument():
    x = np.zeros((3, 8), np.float32)
    cos, sin = tables(3, 8)
    with pytest.raises(ValueError, match="'cos'.*positions"):
        llm.rope(x, cos, sin, offset=1)
    with pytest.raises(ValueError, match="'sin'"):
        llm.rope(x, cos, sin[:, :2])
    with pytest.raises(ValueError, match="'cos'.*head_dim"):
        llm.rope(x, *tables(3, 16))
    with pytest.raises(ValueError, match="'pos_counter'"):
        llm.rope_at(x, cos, sin, np.zeros(1, np.int64))
