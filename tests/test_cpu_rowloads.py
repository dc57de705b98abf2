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
