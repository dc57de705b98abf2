"""Loads that are the same for a whole row of a flat kernel's CPU loop (passes/rowdiv.py:
``row_loads``, docs/cpu.md): ``t = idx[n]`` at the top level of a 2-D kernel, from a
``tk.Const`` array at an index fixed for the row, is loaded once per row before the item loop
(``tk_rl<N>``), so the row's copy ``out[n, j] = table[t, j]`` is a unit-stride vector loop
instead of a gather of every element. Loads that not every item reaches, from writable
arrays, or at indices that move along the row stay per item; results never change."""
import numpy as np
import pytest

import tinykernels as tk

CPU2 = tk.CPU(threads=2)


@tk.kernel
def gather2d(out, table: tk.Const, idx: tk.Const):
    n, j = tk.index(tk.Global, tk.Cartesian)
    t = idx[n]
    out[n, j] = table[t, j]


@tk.kernel
def gather2d_scaled(out, table: tk.Const, idx: tk.Const, scale: tk.Const):
    n, j = tk.index(tk.Global, tk.Cartesian)
    s = scale[0]                        # the same for the whole launch
    t = tk.int64(idx[n + 1 - 1])        # a cast, an index expression fixed for the row
    out[n, j] = table[t, j] * s


@tk.kernel
def gather3d(out, table: tk.Const, idx: tk.Const):
    a, b, j = tk.index(tk.Global, tk.Cartesian)
    t = idx[a, b]
    out[a, b, j] = table[t, j]


@tk.kernel
def gather_after_return(out, table: tk.Const, idx: tk.Const, n_valid):
    n, j = tk.index(tk.Global, tk.Cartesian)
    if n >= n_valid:
        return                          # rows past n_valid must not read idx at all
    t = idx[n]
    out[n, j] = table[t, j]


@tk.kernel
def gather_writable(out, table: tk.Const, idx):
    n, j = tk.index(tk.Global, tk.Cartesian)
    t = idx[n]                          # idx is writable: it may alias out
    out[n, j] = table[t, j]


@tk.kernel
def moving_index(out, x: tk.Const):
    n, j = tk.index(tk.Global, tk.Cartesian)
    v = x[n, j]                         # moves along the row
    out[n, j] = v + 1


def _case(rows=37, cols=1000, vocab=50, dtype=np.int32, seed=0):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab, cols)).astype(np.float32)
    idx = rng.integers(0, vocab, rows).astype(dtype)
    return table, idx, np.full((rows, cols), np.nan, np.float32)


def test_row_invariant_load_is_hoisted_out_of_the_item_loop():
    table, idx, out = _case()
    src = gather2d.source("CPU", out, table, idx, ndrange=out.shape)
    assert "tk_rl0 = a_idx[" in src
    loop = src[src.index("for (tk_idx tk_pl"):]
    assert "a_idx[" not in loop and "= tk_rl0;" in loop
    src = gather2d_scaled.source("CPU", out, table, idx, np.ones(1, np.float32), ndrange=out.shape)
    assert "tk_rl0 = a_scale[" in src and "tk_rl1 = a_idx[" in src


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(37, 1000), (1, 5), (300, 3), (5, 40000)])
def test_hoisted_gather_matches_numpy(dtype, shape):
    """Rows split between threads mid-row, short and long rows, both index types."""
    table, idx, out = _case(*shape, dtype=dtype)
    gather2d(CPU2)(out, table, idx, ndrange=out.shape)
    np.testing.assert_array_equal(out, table[idx])
    s = np.array([0.5], np.float32)
    gather2d_scaled(CPU2)(out, table, idx, s, ndrange=out.shape)
    np.testing.assert_array_equal(out, table[idx] * s[0])


def test_hoisted_gather_with_offsets_steps_and_3d():
    table, idx, out = _case(20, 300)
    out[:] = -1
    gather2d(CPU2)(out, table, idx, ndrange=(range(3, 19, 2), range(7, 300)))
    ref = np.full_like(out, -1)
    ref[3:19:2, 7:] = table[idx[3:19:2], 7:]
    np.testing.assert_array_equal(out, ref)
    idx3 = np.random.default_rng(1).integers(0, 20, (4, 6)).astype(np.int64)
    out3 = np.zeros((4, 6, 300), np.float32)
    src = gather3d.source("CPU", out3, table, idx3, ndrange=out3.shape)
    assert "tk_rl0 = a_idx[" in src
    gather3d(CPU2)(out3, table, idx3, ndrange=out3.shape)
    np.testing.assert_array_equal(out3, table[idx3])


def test_load_after_a_return_is_not_hoisted():
    """A load that an item may never reach stays in the item: here the rows past
    ``n_valid`` have no index at all (``idx`` is shorter than the ndrange)."""
    table, idx, out = _case(40, 500)
    src = gather_after_return.source("CPU", out, table, idx[:10], 10, ndrange=out.shape)
    assert "tk_rl" not in src
    out[:] = 7
    gather_after_return(CPU2)(out, table, idx[:10], 10, ndrange=out.shape)
    np.testing.assert_array_equal(out[:10], table[idx[:10]])
    assert (out[10:] == 7).all()


def test_writable_moving_and_debug_loads_stay_per_item():
    table, idx, out = _case()
    assert "tk_rl" not in gather_writable.source("CPU", out, table, idx, ndrange=out.shape)
    assert "tk_rl" not in moving_index.source("CPU", out, out, ndrange=out.shape)
    assert "tk_rl" not in gather2d.source(tk.CPU(debug=True), out, table, idx, ndrange=out.shape)
    gather_writable(CPU2)(out, table, idx, ndrange=out.shape)
    np.testing.assert_array_equal(out, table[idx])


# --- kernels that only copy stream each block straight from its source (passes/streaming.py:
# copy_sources): no staging buffer, no item loop while streaming


@pytest.fixture
def stream_always(monkeypatch):
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", "1")


@tk.kernel
def copy1d(out, x: tk.Const, off: tk.int64):
    i = tk.index()
    out[i] = x[i + off]


@tk.kernel
def copy_scaled(out, x: tk.Const):
    i = tk.index()
    out[i] = x[i] * 2          # computes: staged


@tk.kernel
def copy_with_call(out, x: tk.Const, y: tk.Const):
    i = tk.index()
    m = max(y[i], 0)           # an assignment with a call: the items must run
    out[i] = x[i]
    y2 = m + 1                 # noqa: F841


@tk.kernel
def copy_cast(out, x: tk.Const):
    i = tk.index()
    out[i] = out.dtype(x[i])


def test_copy_kernels_stream_from_the_source():
    table, idx, out = _case()
    src = gather2d.source("CPU", out, table, idx, ndrange=out.shape)
    assert "tk_src0 = &a_table[" in src and "tk_stage0" not in src
    x = np.zeros(100, np.float32)
    assert "tk_src0 = &a_x[" in copy1d.source("CPU", x, x, 0, ndrange=(100,))
    for kern, args in ((copy_scaled, (x, x)), (copy_with_call, (x, x, x)),
                       (copy_cast, (np.zeros(100, np.float64), x)),
                       (copy1d, (np.zeros(100, np.float16), np.zeros(100, np.float16), 0)),
                       (copy1d, (np.zeros(100, bool), np.zeros(100, bool), 0))):
        s = kern.source("CPU", *args, ndrange=(100,))
        assert "tk_stage0" in s and "tk_src0" not in s, kern


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint32, np.int64, np.float32, np.float64])
def test_streamed_copies_are_exact(stream_always, dtype):
    """Every length around the 4 KB blocks and lines, sources and outputs misaligned by one
    element, offsets, both threads."""
    rng = np.random.default_rng(3)
    base = (rng.standard_normal(20000) * 100).astype(dtype)
    for n in (1, 63, 64, 65, 1000, 4096 // base.itemsize + 3, 9001):
        for a in (0, 1):
            for off in (0, 5):
                x = base[a:a + n + off + 8]
                buf = np.zeros(n + 1, dtype)
                out = buf[a:a + n]
                copy1d(CPU2)(out, x, off, ndrange=(n,))
                np.testing.assert_array_equal(out, x[off:off + n])
                assert (buf[a + n:] == 0).all() and (buf[:a] == 0).all()


@pytest.mark.parametrize("shape", [(37, 1000), (3, 17), (5, 40000)])
def test_streamed_gather_is_exact(stream_always, shape):
    table, idx, out = _case(*shape, dtype=np.int64)
    gather2d(CPU2)(out, table, idx, ndrange=out.shape)
    np.testing.assert_array_equal(out, table[idx])
    out[:] = -1
    gather2d(CPU2)(out, table, idx, ndrange=(range(2, shape[0]), range(3, shape[1])))
    ref = np.full_like(out, -1)
    ref[2:, 3:] = table[idx[2:], 3:]
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("stream", ["1", str(1 << 62)])
def test_gather_to_float16_converts_from_the_source(monkeypatch, stream):
    """A gather that rounds float32 rows to float16: tk_f16_block reads each block from the
    table row directly (no item loop), streamed or not; NumPy's bits."""
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", stream)

    @tk.kernel
    def gather_f16(out, table: tk.Const, idx: tk.Const):
        n, j = tk.index(tk.Global, tk.Cartesian)
        t = idx[n]
        out[n, j] = out.dtype(table[t, j])

    table, idx, _ = _case(23, 3001)
    table[3, :40] = [np.nan, np.inf, -np.inf, 65520.0, 1e-8, -0.0] * 6 + [1.0, 2.0, 3.0, 4.0]
    idx[:4] = 3
    out = np.zeros((23, 3001), np.float16)
    src = gather_f16.source("CPU", out, table, idx, ndrange=out.shape)
    assert "tk_f16_block(tk_dst0, tk_src0," in src and "for (tk_idx tk_pl" not in src
    gather_f16(CPU2)(out, table, idx, ndrange=out.shape)
    np.testing.assert_array_equal(out.view(np.uint16), table[idx].astype(np.float16).view(np.uint16))
