"""Local tiles read transposed (``tile[lj, li]``) on the CPU (docs/cpu.md, "Transposed tile
reads"; passes/tiletranspose.py): the C renderer transposes the block of the tile a piece
reads once, in registers, and serves those reads from the copy. Every kernel here is checked
against NumPy (exact: values are only moved) and, where a read is not a pure transpose, the
source is checked to have no copy."""
import re

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.passes.tiletranspose import block_lanes

CPU = tk.CPU()
MARK = "transposed tile reads"


@tk.kernel
def tr_square(out, a: tk.Const, R, C, T: tk.constexpr, P: tk.constexpr):
    """out = a.T through a T x (T + P) tile; ndrange (R, C) rounded up to whole tiles."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + P))
    if i < R and j < C:
        tile[li, lj] = a[i, j]
    tk.synchronize()
    r = gj * T + li
    c = gi * T + lj
    if r < C and c < R:
        out[r, c] = tile[lj, li]


@tk.kernel
def tr_partial(out, a: tk.Const):
    """out = a.T with ndrange out.shape (partial groups at the edges): each item writes the
    tile cell it reads back transposed after the barrier."""
    r, c = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(a.dtype, (40, 41))
    tile[lj, li] = a[c, r]
    tk.synchronize()
    out[r, c] = tile[lj, li]


@tk.kernel
def tr_rect(out, a: tk.Const, R, C, TA: tk.constexpr, TB: tk.constexpr):
    """out = a.T with groups of TA x TB work items over out (ndrange (C, R) rounded up): each
    group stages the TB x TA block of ``a`` it needs in a TB x (TA + 1) tile."""
    li, lj = tk.index(tk.Local, tk.Cartesian)
    by, bx = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (TB, TA + 1))
    f = li * TB + lj
    for q in range(2):                  # TA * TB items load 2 * TA * TB / 2 elements
        g = f + q * (TA * TB)
        rr = g // TA
        cc = g % TA
        if rr < TB:
            ar = bx * TB + rr
            ac = by * TA + cc
            if ar < R and ac < C:
                tile[rr, cc] = a[ar, ac]
    tk.synchronize()
    r = by * TA + li
    c = bx * TB + lj
    if r < C and c < R:
        out[r, c] = tile[lj, li]


@tk.kernel
def tr_two(out, a: tk.Const, b: tk.Const, T: tk.constexpr):
    """out = a.T + 2 * b.T through two tiles read transposed in the same piece."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    ta = tk.localmem(a.dtype, (T, T + 1))
    tb = tk.localmem(b.dtype, (T, T))
    ta[li, lj] = a[i, j]
    tb[li, lj] = b[i, j]
    tk.synchronize()
    out[gj * T + li, gi * T + lj] = ta[lj, li] + 2.0 * tb[lj, li] + ta[li, lj] * 0.0


def _run(kernel, wg, out, *args, ndrange, backend=CPU):
    kernel(backend, wg)(out, *args, ndrange=ndrange)
    tk.synchronize(backend)
    return kernel.source("CPU", out, *args, ndrange=ndrange, workgroupsize=wg)


def _copied(src: str) -> bool:
    """Whether the source copies a tile transposed and reads the copy."""
    return MARK in src and re.search(r"tk_item\d+_tr\d+\[\(tk_idx\)", src) is not None


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


def _up(n, t):
    return -(-n // t) * t


@pytest.mark.parametrize("R,C", [(64, 64), (100, 37), (16, 16), (33, 70), (17, 5)])
def test_square_tiles(R, C):
    a = _data((R, C), np.float32)
    out = np.full((C, R), -1.0, np.float32)
    src = _run(tr_square, (16, 16), out, a, R, C, 16, 1, ndrange=(_up(R, 16), _up(C, 16)))
    assert _copied(src)
    np.testing.assert_array_equal(out, a.T)


@pytest.mark.parametrize("R,C,wg", [(37, 100, (16, 16)), (70, 33, (16, 32)), (17, 20, (32, 16)),
                                    (5, 3, (16, 16)), (40, 40, (40, 24)), (45, 70, (24, 40))])
def test_partial_groups(R, C, wg):
    """Partial groups at the ndrange's edges (the copy covers their valid items only), tiny
    sizes, non-square groups, groups that are not a multiple of the register block."""
    a = _data((C, R), np.float32, 11)
    out = np.full((R, C), -1.0, np.float32)
    src = _run(tr_partial, wg, out, a, ndrange=(R, C))
    assert _copied(src)
    np.testing.assert_array_equal(out, a.T)


@pytest.mark.parametrize("dtype,T", [(np.float64, 8), (np.float64, 16), (np.int64, 12), (np.int32, 16),
                                     (np.uint8, 16), (np.bool_, 16), (np.int16, 16), (np.float16, 16), (np.float32, 24),
                                     (np.float32, 17), (np.float32, 32)])
def test_dtypes_and_tile_sizes(dtype, T):
    """Every element size (8-lane blocks for 8 bytes, 16 for the others), tiles that are not a
    multiple of the block (full blocks plus an element-by-element edge), tiles larger than a
    block; bits are moved unchanged (NaN payloads, -0.0, integer extremes)."""
    R, C = 3 * T + 5, 2 * T + 3
    a = _data((R, C), dtype, seed=T)
    if np.dtype(dtype).kind == "f":
        a[0, :3] = [np.nan, -0.0, np.inf]
    out = np.zeros((C, R), dtype)
    src = _run(tr_square, (T, T), out, a, R, C, T, 1, ndrange=(_up(R, T), _up(C, T)))
    assert _copied(src)
    assert f"tk_tile_tr{np.dtype(dtype).itemsize}(" in src
    np.testing.assert_array_equal(out.view(np.uint8), np.ascontiguousarray(a.T).view(np.uint8))


@pytest.mark.parametrize("R,C", [(64, 96), (45, 70)])
def test_non_square_groups(R, C):
    a = _data((R, C), np.float32, seed=3)
    out = np.zeros((C, R), np.float32)
    TA, TB = 16, 32
    nd = (-(-C // TA) * TA, -(-R // TB) * TB)
    src = _run(tr_rect, (TA, TB), out, a, R, C, TA, TB, ndrange=nd)
    assert _copied(src)
    np.testing.assert_array_equal(out, a.T)


def test_two_tiles_in_one_piece():
    """Two tiles read transposed in the same piece each get a copy; the non-transposed read of
    one of them (``ta[li, lj]``) keeps reading the tile itself."""
    T, N = 16, 48
    a, b = _data((N, N), np.float32, 1), _data((N, N), np.float32, 2)
    out = np.zeros((N, N), np.float32)
    src = _run(tr_two, (T, T), out, a, b, T, ndrange=(N, N))
    assert len(re.findall(r"^\s+tk_tile_tr4\(tk_item", src, re.M)) == 2
    np.testing.assert_array_equal(out, a.T + np.float32(2) * b.T)


def test_debug_mode_keeps_bounds_checks():
    R, C = 40, 24
    a = _data((R, C), np.float32, 4)
    out = np.zeros((C, R), np.float32)
    dbg = tk.CPU(debug=True)
    tr_square(dbg, (16, 16))(out, a, R, C, 16, 1, ndrange=(48, 32))
    tk.synchronize(dbg)
    np.testing.assert_array_equal(out, a.T)


# --- reads that are not a pure transpose are left alone ---------------------------------------

@tk.kernel
def shifted(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T + 1, T + 1))
    tile[li, lj] = a[i, j]
    tile[T, lj] = 0.0
    tile[li, T] = 0.0
    tk.synchronize()
    out[i, j] = tile[lj, li + 1] + tile[lj + 1, li]


@tk.kernel
def same_order(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    out[i, j] = tile[li, lj] + tile[li, T - 1 - lj] + tile[lj, 0]


@tk.kernel
def written_in_piece(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    v = tile[lj, li]
    tile[li, lj] = v + 1.0      # a data race between items on a GPU; here it must see the tile
    out[i, j] = tile[lj, li]


@tk.kernel
def swapped_locals(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    lj = li                     # reassigned: not the local index any more
    out[i, j] = tile[lj, li]


def _tiles(N, T):
    g = np.arange(N) // T * T
    return g[:, None], g[None, :]


def test_shifted_indices_left_alone():
    T, N = 16, 32
    a = _data((N, N), np.float32, 5)
    out = np.zeros((N, N), np.float32)
    src = _run(shifted, (T, T), out, a, T, ndrange=(N, N))
    assert MARK not in src
    bi, bj = _tiles(N, T)
    li, lj = np.arange(N)[:, None] % T, np.arange(N)[None, :] % T
    tile = lambda r, c: np.where((r < T) & (c < T), a[bi + np.minimum(r, T - 1), bj + np.minimum(c, T - 1)], 0)
    np.testing.assert_array_equal(out, tile(lj, li + 1) + tile(lj + 1, li))


def test_untransposed_reads_left_alone():
    T, N = 16, 32
    a = _data((N, N), np.float32, 6)
    out = np.zeros((N, N), np.float32)
    src = _run(same_order, (T, T), out, a, T, ndrange=(N, N))
    assert MARK not in src
    bi, bj = _tiles(N, T)
    li, lj = np.arange(N)[:, None] % T, np.arange(N)[None, :] % T
    np.testing.assert_array_equal(out, a[bi + li, bj + lj] + a[bi + li, bj + T - 1 - lj] + a[bi + lj, bj])


def test_tile_written_in_the_piece_left_alone():
    T, N = 16, 16
    a = _data((N, N), np.float32, 7)
    out = np.zeros((N, N), np.float32)
    assert MARK not in written_in_piece.source("CPU", out, a, T, ndrange=(N, N), workgroupsize=(T, T))


def test_reassigned_local_index_left_alone():
    T, N = 16, 32
    a = _data((N, N), np.float32, 8)
    out = np.zeros((N, N), np.float32)
    src = _run(swapped_locals, (T, T), out, a, T, ndrange=(N, N))
    assert MARK not in src
    bi, bj = _tiles(N, T)
    li = np.arange(N)[:, None] % T
    np.testing.assert_array_equal(out, np.broadcast_to(a[bi + li, bj + li], (N, N)))


@pytest.mark.parametrize("T", [4, 8])
def test_groups_smaller_than_a_block_left_alone(T):
    """A group narrower than a register block (16 four-byte lanes) would only copy element by
    element: no copy, same results."""
    R, C = 3 * T + 1, 2 * T + 1
    a = _data((R, C), np.float32, T)
    out = np.zeros((C, R), np.float32)
    src = _run(tr_square, (T, T), out, a, R, C, T, 1, ndrange=(_up(R, T), _up(C, T)))
    assert MARK not in src
    np.testing.assert_array_equal(out, a.T)


def test_block_lanes():
    assert [block_lanes(n) for n in (1, 2, 4, 8)] == [16, 16, 16, 8]


def test_other_backends_unchanged():
    """The copy is the C renderer's: the interpreter runs the same kernel to the same bits."""
    R, C = 37, 50
    a = _data((C, R), np.float32, 9)
    out = np.zeros((R, C), np.float32)
    _run(tr_partial, (16, 16), out, a, ndrange=(R, C), backend=tk.Interpreter())
    np.testing.assert_array_equal(out, a.T)


@tk.kernel
def tr_scaled(out, a: tk.Const, K, T: tk.constexpr):
    """out = sum over q < K of (q + 1) * a.T: the reading piece has a loop (the lanes shape)."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    acc = 0.0
    for q in range(K):
        acc += tile[lj, li] * (q + 1)
    out[gj * T + li, gi * T + lj] = acc


def test_lanes_piece_reads_the_copy():
    T, N, K = 16, 64, 3
    a = _data((N, N), np.float64, 12)
    out = np.zeros((N, N), np.float64)
    src = _run(tr_scaled, (T, T), out, a, K, T, ndrange=(N, N))
    assert MARK in src and "work items as lanes" in src
    assert re.search(r"tk_item\d+_tr0\[\(tk_idx\)", src)       # the read is served from the copy
    want = np.zeros_like(a)
    for q in range(K):
        want += a.T * (q + 1)
    np.testing.assert_array_equal(out, want)


# --- local tiles with rows padded to whole cache lines (codegen/c.py: line_pitch) ------------

def test_line_pitch_rule():
    """A 2-D local array whose row is longer than a cache line but not whole lines gets rows
    of whole lines when that at most doubles them; nothing else is padded."""
    from tinykernels.codegen.c import line_pitch
    from tinykernels.dtypes import from_any
    from tinykernels.ir import nodes as N

    def arr(shape, dt=np.float32, space="local"):
        return N.ArrayInfo("t", from_any(dt), len(shape), shape=tuple(shape), space=space)
    assert line_pitch(arr((16, 17))) == 32
    assert line_pitch(arr((8, 9), np.float64)) == 16
    assert line_pitch(arr((32, 33), np.float16)) == 64
    assert line_pitch(arr((80, 81), np.int8)) == 128
    assert line_pitch(arr((4, 100))) == 112
    assert line_pitch(arr((16, 16))) is None                 # whole lines already (the tiled matmul's tiles)
    assert line_pitch(arr((8, 9))) is None                   # a row within one line
    assert line_pitch(arr((4, 48))) is None                  # 192 bytes: whole lines
    assert line_pitch(arr((16, 17), space="private")) is None
    assert line_pitch(arr((16, 17), space="global")) is None
    assert line_pitch(arr((4, 4, 17))) is None
    assert line_pitch(arr((512, 33))) is None                # padded beyond PAD_MAX_BYTES (the stack)
    assert line_pitch(arr((256, 33))) == 48                  # 48 KiB padded


@tk.kernel
def pad_column(out, a: tk.Const, T: tk.constexpr):
    """Writes and reads the tile's extra column (``tile[li, T]``): it must stay its own
    element, not the next row's first one, whatever the row pitch."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    if lj == 0:
        tile[li, T] = a[i, j] + a[i, j]
    tk.synchronize()
    out[i, j] = tile[li, (lj + 1) % (T + 1)] + tile[li, T] + tile[lj, li]


@pytest.mark.parametrize("dtype, T", [(np.float32, 16), (np.float64, 8), (np.float16, 32), (np.int64, 8),
                                      (np.int32, 16)])
@pytest.mark.parametrize("R, C", [(64, 96), (96, 32)])
def test_padded_tile_rows_keep_every_element(dtype, T, R, C):
    """The padded layout (rows of whole lines, e.g. 32 elements for a 16 x 17 float32 tile):
    the extra column, a read shifted along the row and the transposed read all equal the
    interpreter, bit for bit, on one and two threads; the source indexes rows by the pitch."""
    from tinykernels.codegen.c import line_pitch
    from tinykernels.dtypes import from_any
    from tinykernels.ir import nodes as N
    a = _data((R, C), dtype, seed=R + T)
    pitch = line_pitch(N.ArrayInfo("t", from_any(dtype), 2, shape=(T, T + 1), space="local"))
    want = np.zeros((R, C), dtype)
    pad_column(tk.Interpreter(), (T, T))(want, a, T, ndrange=(R, C))
    for threads in (1, 2):
        out = np.zeros((R, C), dtype)
        src = _run(pad_column, (T, T), out, a, T, ndrange=(R, C), backend=tk.CPU(threads=threads))
        np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
    assert pitch is not None and f") * {pitch} + (tk_idx)" in src and "__attribute__((aligned(64)))" in src
