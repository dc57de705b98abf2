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


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("lead", [(), (3,), (2, 3)])
def test_append_rows_of_every_rank(be, lead):
    """Rows of rank 2, 3 and 4 (leading extents != 1) land at the counter in their own
    (batch, head) slab: the host kernel takes a row's coordinates from a 3-D ndrange."""
    b = dev(be)
    cache = tk.zeros(lead + (7, 5), np.float32, backend=b)
    rows = rng.standard_normal(lead + (3, 5)).astype(np.float32)
    cnt = llm.new_counter(2, backend=b)
    llm.kv_append(cache, tk.asarray(rows, backend=b), cnt)
    want = np.zeros(lead + (7, 5), np.float32)
    want[..., 2:5, :] = rows
    np.testing.assert_array_equal(get(cache), want)


def test_host_append_has_no_per_row_division():
    """The host kernel's row coordinates come from the ndrange, not from a flat row index
    divided by the extents (two integer divisions per row: ~10% of an in-cache copy)."""
    from importlib import import_module
    kv = import_module("tinykernels.llm.kvcache")
    src = kv._append_rows.source("CPU", np.zeros((2, 3, 7, 5), np.float32), np.zeros((2, 3, 3, 5), np.float32),
                                 np.zeros(1, np.int32), True,
                                 ndrange=kv._append_shape(tk.CPU(threads=1), (2, 3, 3, 5), 4)[2])
    body = src[src.index("static void tk_chunk"):]
    assert "tk_floordiv" not in body and "tk_mod" not in body


@pytest.mark.parametrize("cdt", [np.float32, np.float16])
@pytest.mark.parametrize("rs", [(1, 1, 300001), (2, 1, 2, 70001), (1, 3, 1, 40000)])
def test_long_rows_split_over_threads(monkeypatch, rs, cdt):
    """Fewer rows than a CPU launch needs to leave the calling thread, each long: pieces of
    rows over the threads (``_append_split``), every position written as NumPy (the last
    piece short, positions past the end dropped); one thread or short rows: one item per row."""
    import importlib
    K = importlib.import_module("tinykernels.llm.kvcache")
    from tinykernels.kernel import Kernel
    monkeypatch.setattr(K, "SPLIT_MIN_BYTES", 1024)
    seen = []
    real = Kernel.instance
    monkeypatch.setattr(Kernel, "instance", lambda k, b: seen.append(k.name) or real(k, b))
    rows = np.random.default_rng(1).standard_normal(rs).astype(np.float32)
    for threads, want_kernel in ((2, "_append_split"), (1, "_append_rows")):
        be = tk.CPU(threads=threads)
        for pos in (0, 2, 4):
            cache = tk.asarray(np.zeros(rs[:-2] + (5, rs[-1]), cdt), backend=be)
            seen.clear()
            llm.kv_append(cache, tk.asarray(rows, backend=be), tk.asarray(np.array([pos], np.int32), backend=be))
            assert want_kernel in seen, (threads, seen)
            want = np.zeros(rs[:-2] + (5, rs[-1]), cdt)
            n = rs[-2]
            want[..., pos:min(pos + n, 5), :] = rows[..., :min(n, 5 - pos), :]
            assert np.array_equal(cache.numpy(), want), (threads, pos)
    assert K._append_shape(tk.CPU(threads=2), (1, 1, 4096), 4)[0] is K._append_rows     # short: not split
    assert K._append_shape(tk.CPU(threads=2), (64, 1, 300001), 4)[0] is K._append_rows  # rows enough
