"""A transpose's second piece, ``out[gj * T + li, gi * T + lj] = tile[lj, li]``, streamed
straight from the register transpose (docs/cpu.md, "Transposed tile reads"; codegen/c.py:
``streamed_tile_copy``): full groups of a streamed launch whose rows start cache lines write
each transposed row with a non-temporal store (``tk_tile_tr<size>_nt``); partial groups,
misaligned outputs and launches below the threshold take the copy and the staged rows as
before. Every result is checked against NumPy bit for bit (values are only moved).

``TK_CPU_STREAM_BYTES`` is read by a kernel library at its first launch, so kernels that a
test forces into streaming are defined inside it (see tests/test_cpu_stream.py)."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import dtypes
from tinykernels.dtypes import Ty
from tinykernels.ir import nodes as N
from tinykernels.passes.streaming import lane_coef
from test_cpu_stream import _at, stream_always, stream_never  # noqa: F401  (fixtures)

FUSED = "_nt(tk_trow0, "


def _data(shape, dtype, seed):
    a = (np.random.default_rng(seed).standard_normal(shape) * 100).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a.flat[:3] = [np.nan, -0.0, np.inf]
    return a


def _launch(kernel, wg, out, *args, ndrange, threads=1):
    b = tk.CPU(threads=threads)
    kernel(b, wg)(out, *args, ndrange=ndrange)
    tk.synchronize(b)
    return kernel.source("CPU", out, *args, ndrange=ndrange, workgroupsize=wg)


def _same_bits(got, want):
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


@pytest.mark.parametrize("dtype, T", [(np.float32, 16), (np.float64, 8), (np.float32, 32), (np.int64, 16),
                                      (np.uint32, 16)])
@pytest.mark.parametrize("R, C", [(64, 64), (96, 160), (50, 37), (17, 100)])
@pytest.mark.parametrize("offset, threads", [(0, 1), (0, 2), (1, 1)])
def test_streamed_tile_rows_equal_numpy(dtype, T, R, C, offset, threads, stream_always):
    """Full groups stream from the register transpose (every 4- and 8-byte type, tiles of one,
    two and three register blocks); partial groups at the edges (odd sizes) and misaligned
    outputs (``offset`` elements past a line) take the staged rows: the same bits either way."""
    @tk.kernel
    def transpose(out, a: tk.Const, n, m, T: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        gi, gj = tk.index(tk.Group, tk.Cartesian)
        tile = tk.localmem(a.dtype, (T, T + 1))
        if i < n and j < m:
            tile[li, lj] = a[i, j]
        tk.synchronize()
        out[gj * T + li, gi * T + lj] = tile[lj, li]

    up = lambda x: -(-x // T) * T        # noqa: E731
    a = _data((R, C), dtype, R * C + T)
    full = _at((up(C), up(R)), dtype, offset)
    src = _launch(transpose, (T, T), full, a, R, C, T, ndrange=(up(R), up(C)), threads=threads)
    assert FUSED in src
    _same_bits(full[:C, :R], a.T)


def test_row_step_may_be_negative(stream_always):
    """Rows of the group written bottom to top (``T - 1 - li``): the address is still affine in
    the local index, the row step is negative, and every row streams."""
    @tk.kernel
    def flip_transpose(out, a: tk.Const, T: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        gi, gj = tk.index(tk.Group, tk.Cartesian)
        tile = tk.localmem(a.dtype, (T, T + 1))
        tile[li, lj] = a[i, j]
        tk.synchronize()
        out[gj * T + (T - 1 - li), gi * T + lj] = tile[lj, li]

    a = _data((48, 64), np.float32, 5)
    out = _at((64, 48), np.float32, 0)
    src = _launch(flip_transpose, (16, 16), out, a, 16, ndrange=a.shape)
    assert FUSED in src
    want = a.T.reshape(4, 16, 48)[:, ::-1].reshape(64, 48)
    _same_bits(out, want)


def test_below_the_threshold_stores_directly(stream_never):
    """The same source, a launch below the streaming threshold: the copy and ordinary stores."""
    @tk.kernel
    def transpose_small(out, a: tk.Const, T: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        gi, gj = tk.index(tk.Group, tk.Cartesian)
        tile = tk.localmem(a.dtype, (T, T + 1))
        tile[li, lj] = a[i, j]
        tk.synchronize()
        out[gj * T + li, gi * T + lj] = tile[lj, li]

    a = _data((64, 32), np.float64, 2)
    out = _at((32, 64), np.float64, 0)
    assert FUSED in _launch(transpose_small, (8, 8), out, a, 8, ndrange=a.shape, threads=2)
    _same_bits(out, a.T)


@tk.kernel
def interleaved_rows(out, a: tk.Const, T: tk.constexpr):
    """Rows of the group in an order not affine in the local index (``li % 2``, ``li // 2``)."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    out[gj * T + (li % 2) * (T // 2) + li // 2, gi * T + lj] = tile[lj, li]


@tk.kernel
def scaled(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    out[gj * T + li, gi * T + lj] = tile[lj, li] * 2.0


@tk.kernel
def two_stores(out, out2, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    out[gj * T + li, gi * T + lj] = tile[lj, li]
    out2[gj * T + li, gi * T + lj] = a[gj * T + li, gi * T + lj]


@tk.kernel
def batched(out, a: tk.Const, T: tk.constexpr):
    """A 3-D launch (a batch of transposes): a 3-D group is left to the general shapes."""
    b, i, j = tk.index(tk.Global, tk.Cartesian)
    _, li, lj = tk.index(tk.Local, tk.Cartesian)
    _, gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[b, i, j]
    tk.synchronize()
    out[b, gj * T + li, gi * T + lj] = tile[lj, li]


def _not_fused(kernel, wg, out, args, ndrange, want):
    src = _launch(kernel, wg, out, *args, ndrange=ndrange, threads=2)
    assert FUSED not in src and "_nt(" not in src
    _same_bits(out, want)
    return src


def test_other_pieces_keep_the_copy():
    """What the streamed copy does not cover keeps the copy (or no copy), with correct
    results: rows not affine in the local index, a value computed from the read, a piece with
    a second store, element sizes whose register row is not a cache line (float16, int8), a
    tile of partial register blocks (24), debug mode, a 3-D group."""
    a = _data((64, 64), np.float32, 1)
    src = _not_fused(interleaved_rows, (16, 16), _at((64, 64), np.float32, 0), [a, 16], a.shape,
                     a.T.reshape(4, 8, 2, 64).transpose(0, 2, 1, 3).reshape(64, 64))
    assert "transposed tile reads" in src
    _not_fused(scaled, (16, 16), _at((64, 64), np.float32, 0), [a, 16], a.shape, a.T * np.float32(2))
    o2 = _at((64, 64), np.float32, 0)
    _not_fused(two_stores, (16, 16), _at((64, 64), np.float32, 0), [o2, a, 16], a.shape, a.T)
    _same_bits(o2, a)
    for dtype in (np.float16, np.int8):
        h = _data((64, 64), dtype, 3)
        _not_fused(scaled if dtype == np.float16 else two_stores, (16, 16), _at((64, 64), dtype, 0),
                   [h, 16] if dtype == np.float16 else [_at((64, 64), dtype, 0), h, 16], h.shape,
                   h.T * np.float16(2) if dtype == np.float16 else h.T)
    a24 = _data((48, 72), np.float32, 4)
    _not_fused(scaled, (24, 24), _at((72, 48), np.float32, 0), [a24, 24], a24.shape, a24.T * np.float32(2))
    a3 = _data((3, 32, 48), np.float32, 6)
    _not_fused(batched, (1, 16, 16), _at((3, 48, 32), np.float32, 0), [a3, 16], a3.shape,
               a3.transpose(0, 2, 1))
    dbg = tk.CPU(debug=True)
    o = _at((64, 64), np.float32, 0)
    scaled(dbg, (16, 16))(o, a, 16, ndrange=a.shape)
    tk.synchronize(dbg)
    _same_bits(o, a.T * np.float32(2))


def test_other_grouped_kernels_unaffected():
    """A tiled matmul (two tiles, read untransposed, in a loop) gets neither copy nor stream."""
    @tk.kernel
    def matmul(c, a: tk.Const, b: tk.Const, T: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        ta = tk.localmem(a.dtype, (T, T))
        tb = tk.localmem(b.dtype, (T, T))
        acc = 0.0
        for t in range(0, a.shape[1], T):
            ta[li, lj] = a[i, t + lj]
            tb[li, lj] = b[t + li, j]
            tk.synchronize()
            for k in range(T):
                acc += ta[li, k] * tb[k, lj]
            tk.synchronize()
        c[i, j] = acc

    rng = np.random.default_rng(7)
    a, b = rng.integers(-8, 8, (64, 48)).astype(np.float32), rng.integers(-8, 8, (48, 32)).astype(np.float32)
    _not_fused(matmul, (16, 16), _at((64, 32), np.float32, 0), [a, b, 16], (64, 32), a @ b)


def test_lane_coef_along_another_dimension():
    """``lane_coef(..., dim=d)`` steps group dimension d: local and global indices of d count
    1, those of other dimensions 0, the linear indices are unknown off the last dimension."""
    ty = Ty(dtypes.int64)
    li, lj = N.Index(ty, None, "local", 0), N.Index(ty, None, "local", 1)
    g0, lin = N.Index(ty, None, "global", 0), N.Index(ty, None, "local_linear", 0)
    e = N.BinOp(ty, None, "+", N.BinOp(ty, None, "*", N.Const(ty, None, 3), li), lj)
    coef = lambda x, d: lane_coef(x, 2, 0, set(), {}, {}, dim=d)      # noqa: E731
    assert coef(e, 0) == 3 and coef(e, 1) == 1 and coef(e, None) == 1
    assert coef(g0, 0) == 1 and coef(g0, 1) == 0
    assert coef(lin, 1) == 1 and coef(lin, 0) is None
    assert lane_coef(g0, 2, 2, set(), {}, {}, dim=0) is None      # stepped ndrange
    assert coef(N.BinOp(ty, None, "%", li, N.Const(ty, None, 2)), 0) is None
