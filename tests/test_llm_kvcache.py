"""tinykernels.llm kvcache: appends at a device-resident counter; counter updates."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from llm_helpers import backends, dev, get, put

rng = np.random.default_rng(17)


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("cdt", [np.float32, np.float16])
def test_decode_loop_appends_at_the_counter(be, cdt):
    b = dev(be)
    cache = tk.zeros((2, 6, 8), cdt, backend=b)
    cnt = llm.new_counter(0, backend=b)
    want = np.zeros((2, 6, 8), cdt)
    pos = 0
    for step in range(3):
        n = 2 if step == 0 else 1
        rows = rng.standard_normal((2, n, 8)).astype(np.float32)
        llm.kv_append(cache, put(rows, b), cnt)
        llm.counter_add(cnt, n)
        want[:, pos:pos + n] = rows.astype(cdt)
        pos += n
    np.testing.assert_array_equal(get(cache), want)
    assert int(get(cnt)[0]) == 4
    llm.counter_set(cnt, 5)
    llm.kv_append(cache, put(np.ones((2, 3, 8), np.float32), b), cnt)   # positions 6, 7 dropped
    want[:, 5] = 1
    np.testing.assert_array_equal(get(cache), want)
    llm.counter_set(cnt)
    assert int(get(cnt)[0]) == 0


def test_kvcache_errors_name_the_argument():
    cache = np.zeros((2, 6, 8), np.float32)
    with pytest.raises(ValueError, match="'rows'"):
        llm.kv_append(cache, np.zeros((3, 1, 8), np.float32), np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="'counter'"):
        llm.kv_append(cache, np.zeros((2, 1, 8), np.float32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="'n'"):
        llm.counter_add(np.zeros(1, np.int32), 1.5)
