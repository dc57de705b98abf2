"""Streaming (non-temporal) stores on the CPU (docs/cpu.md, passes/streaming.py): which
stores qualify, and that streamed results are bit-identical to ordinary stores for every
dtype, odd sizes, misaligned arrays, 2-D rows and offset ndranges.

``TK_CPU_STREAM_BYTES`` is read by a kernel library at its first launch, so every kernel
that a test forces into streaming (or out of it) is defined inside that test: a new source
line is a new library."""
import math

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.ir import nodes as N
from tinykernels.passes.streaming import streamed_stores

CPU = tk.CPU()


def _source(kernel, *args, ndrange):
    return kernel.source("CPU", *args, ndrange=ndrange)


@pytest.fixture
def stream_always(monkeypatch):
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", "1")


@pytest.fixture
def stream_never(monkeypatch):
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", str(1 << 62))


# ----------------------------------------------------------------------------- which stores

@tk.kernel
def triad(a, b: tk.Const, c: tk.Const, s):
    i = tk.index()
    a[i] = b[i] + s * c[i]


@tk.kernel
def inplace(a, s):
    i = tk.index()
    a[i] = a[i] * s                      # the output is read: no streaming


@tk.kernel
def conditional(a, b: tk.Const):
    i = tk.index()
    if b[i] > 0:
        a[i] = b[i]                      # not every item stores: no streaming


@tk.kernel
def shifted(a, b: tk.Const):
    i = tk.index()
    a[i - 1] = b[i]                      # not the item's own position


@tk.kernel
def read_after(a, x, b: tk.Const):
    i = tk.index()
    a[i] = b[i]
    x[i] = x[i] + 1.0                    # reads a writable array afterwards: it may alias a


@tk.kernel
def early_exit(a, b: tk.Const):
    i = tk.index()
    if i == 3:
        return
    a[i] = b[i]


@tk.kernel
def two_outputs(a, m, b: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    a[i, j] = b[i, j] * 2.0
    m[i, j] = b[i, j] > 0.5


def test_streams_top_level_stores_of_the_items_own_position():
    x = np.zeros(1000, np.float32)
    src = _source(triad, x, x, x, np.float32(2), ndrange=(1000,))
    assert "tk_out0 = &a_a[" in src and "tk_stream_fence();" in src
    assert "if (tk_stream) tk_stream_bytes(&tk_pend_a, tk_out0, tk_stage0," in src
    assert "tk_pend_flush(&tk_pend_a);" in src
    # one copy of the loop: it stores through the stage buffer or the output itself,
    # chosen at run time by the launch's output bytes
    assert "tk_dst0 = tk_stream ? tk_stage0 : tk_out0;" in src and "tk_stream_threshold()" in src
    assert src.count("tk_dst0[tk_pl - tk_b] =") == 1 and "a_a[(tk_idx)(v_i)] =" not in src


@pytest.mark.parametrize("kernel, args", [
    (inplace, (np.zeros(1000, np.float32), np.float32(2))),
    (conditional, (np.zeros(1000, np.float32), np.zeros(1000, np.float32))),
    (shifted, (np.zeros(1000, np.float32), np.zeros(1000, np.float32))),
    (read_after, (np.zeros(1000, np.float32), np.zeros(1000, np.float32), np.zeros(1000, np.float32))),
    (early_exit, (np.zeros(1000, np.float32), np.zeros(1000, np.float32))),
])
def test_no_streaming_where_a_delayed_store_could_be_observed(kernel, args):
    assert "tk_stream" not in _source(kernel, *args, ndrange=(1000,))


def test_debug_kernels_keep_plain_stores():
    x = np.zeros(1000, np.float32)
    assert "tk_stream" not in triad.source(tk.CPU(debug=True), x, x, x, np.float32(2), ndrange=(1000,))


def test_analysis_picks_both_outputs_in_program_order():
    a = np.zeros((4, 300), np.float32)
    m = np.zeros((4, 300), np.bool_)
    src = _source(two_outputs, a, m, a, ndrange=(4, 300))
    assert src.index("tk_stream_bytes(&tk_pend_a, tk_out0,") < src.index("tk_stream_bytes(&tk_pend_m, tk_out1,")


def test_streamed_stores_unit():
    i = N.Index(None, None, "global_linear")
    out = N.ArrayInfo("out", tk.float32, 1)
    store = N.Store(None, out, [i], N.Var(None, None, "v"))
    k = N.Kernel("k", [], [store], {}, 1, (256,))
    assert [s for s, _ in streamed_stores(k, 0)] == [store]
    k.debug = True
    assert streamed_stores(k, 0) == []
    k.debug = False
    # ranges == 2 (a step between items): global coordinates are not unit stride
    store2 = N.Store(None, out, [N.Index(None, None, "global", 0)], N.Var(None, None, "v"))
    k.body = [store2]
    assert streamed_stores(k, 0) and not streamed_stores(k, 2)


def test_compute_heavy_kernels_keep_ordinary_stores(stream_always):
    """Staging costs a store, a load and the streamed store per element: a flat kernel that
    computes more per byte moved than that pays for (a transcendental call, a long polynomial)
    keeps ordinary stores; a light one streams. Results are NumPy's either way."""
    from tinykernels.passes.streaming import compute_heavy

    @tk.kernel
    def light(out, a: tk.Const):
        i = tk.index()
        out[i] = a[i] * 2.0 + 1.0

    @tk.kernel
    def poly(out, a: tk.Const):
        i = tk.index()
        x = a[i]
        out[i] = ((((((((x * 0.5 + 1.0) * x + 2.0) * x + 3.0) * x + 4.0) * x + 5.0) * x + 6.0) * x
                   + 7.0) * x + 8.0) * x + 9.0

    @tk.kernel
    def trans(out, a: tk.Const):
        i = tk.index()
        out[i] = math.tanh(a[i])

    a = np.linspace(-3, 3, 5000, dtype=np.float32)
    chunk = lambda src: src[src.index("static void tk_chunk"):]  # noqa: E731
    assert "tk_stream_bytes(" in chunk(light.source("CPU", a, a, ndrange=a.size))
    for k in (poly, trans):
        assert "tk_stream_bytes(" not in chunk(k.source("CPU", a, a, ndrange=a.size))
    want = {light: a * np.float32(2) + np.float32(1), trans: np.tanh(a)}
    for k, ref in want.items():
        out = np.empty_like(a)
        k(tk.CPU())(out, a, ndrange=a.size)
        tk.synchronize()
        np.testing.assert_allclose(out, ref, rtol=4e-7 if k is trans else 0, atol=0)
    x = np.float64(a[-1])
    out = np.empty_like(a)
    poly(tk.CPU())(out, a, ndrange=a.size)
    tk.synchronize()
    np.testing.assert_allclose(out[-1], ((((((((x * .5 + 1) * x + 2) * x + 3) * x + 4) * x + 5) * x + 6) * x + 7) * x + 8) * x + 9,
                               rtol=1e-5)
    i = N.Index(None, None, "global_linear")
    out_a = N.ArrayInfo("out", tk.float32, 1)
    k = N.Kernel("k", [], [N.Store(None, out_a, [i], N.Call(None, None, "exp", [N.Var(None, None, "v")]))], {}, 1, (256,))
    assert compute_heavy(k)
    k.body = [N.Store(None, out_a, [i], N.Call(None, None, "max", [N.Var(None, None, "v"), N.Var(None, None, "v")]))]
    assert not compute_heavy(k)


# ----------------------------------------------------------------------------- identical results

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint16, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, offset", [(1, 0), (37, 1), (4099, 0), (100003, 3)])
def test_streamed_results_equal_numpy(dtype, n, offset, stream_always):
    @tk.kernel
    def scale(a, b: tk.Const):
        i = tk.index()
        a[i] = b[i] + b[i]

    rng = np.random.default_rng(n)
    src = (rng.random(n + offset) * 50).astype(dtype)
    fill = np.array(7).astype(dtype)
    buf = np.full(n + offset + 5, fill, dtype)
    out = buf[offset:offset + n]                 # misaligned start, odd length
    b = src[offset:]
    scale(CPU)(out, b, ndrange=(n,))
    tk.synchronize(CPU)
    np.testing.assert_array_equal(out, (b + b).astype(dtype))
    assert (buf[:offset] == fill).all() and (buf[offset + n:] == fill).all()   # nothing outside written


def test_streamed_rows_offsets_and_threads(stream_always):
    @tk.kernel
    def rows(a, m, b: tk.Const, s):
        i, j = tk.index(tk.Global, tk.Cartesian)
        t = b[i, j] * s
        a[i, j] = t + 1.0
        m[i, j] = t > 0.5

    rng = np.random.default_rng(1)
    b = rng.random((67, 1029)).astype(np.float64)
    for nd in [(67, 1029), (range(3, 60), range(5, 1000))]:
        a = np.full((67, 1029), -1.0)
        m = np.zeros((67, 1029), np.bool_)
        for threads in (1, 2, 3):
            a[:] = -1.0
            m[:] = False
            rows(tk.CPU(threads=threads))(a, m, b, 2.0, ndrange=nd)
            r0 = range(67) if isinstance(nd[0], int) else nd[0]
            r1 = range(1029) if isinstance(nd[1], int) else nd[1]
            exp_a = np.full((67, 1029), -1.0)
            exp_m = np.zeros((67, 1029), np.bool_)
            sl = (slice(r0.start, r0.stop), slice(r1.start, r1.stop))
            exp_a[sl] = b[sl] * 2.0 + 1.0
            exp_m[sl] = b[sl] * 2.0 > 0.5
            np.testing.assert_array_equal(a, exp_a)
            np.testing.assert_array_equal(m, exp_m)


def test_small_outputs_keep_plain_stores_by_default(monkeypatch):
    """Without TK_CPU_STREAM_BYTES the threshold is the last-level cache size: a small output
    takes the plain branch (observable here only through the source's guard) and is right."""
    monkeypatch.delenv("TK_CPU_STREAM_BYTES", raising=False)

    @tk.kernel
    def small(a, b: tk.Const):
        i = tk.index()
        a[i] = b[i] * 3.0

    b = np.arange(5000, dtype=np.float32)
    a = np.zeros_like(b)
    src = small.source("CPU", a, b, ndrange=(5000,))
    assert "const int tk_stream = (tk_n0) * 4 >= tk_stream_threshold() && tk_n0 * 4 >= 256;" in src
    small(CPU)(a, b, ndrange=(5000,))
    np.testing.assert_array_equal(a, b * 3)


# ----------------------------------------------------------------------------- grouped kernels: lanes runs

INTERP = tk.Interpreter()


@tk.kernel
def softmax_like(out, X: tk.Const, D: tk.constexpr):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    tk.synchronize()                     # a grouped kernel (lanes shape)
    for j in range(lid, D, tk.groupsize()[0]):
        out[row, j] = X[row, j]
    for j in range(lid, D, tk.groupsize()[0]):
        out[row, j] *= 2.0               # reads the output: no streaming


@tk.kernel
def masked_store(out, X: tk.Const, D: tk.constexpr):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    tk.synchronize()                     # a grouped kernel (lanes shape)
    for j in range(lid, D, tk.groupsize()[0]):
        if X[row, j] > 0:
            out[row, j] = 1.0            # not every lane stores: plain stores


def test_lanes_source_streams_only_write_only_outputs_stored_by_every_lane():
    X = np.zeros((4, 256), np.float32)
    assert "tk_stream" not in softmax_like.source("CPU", X, X, 256, ndrange=(256,), workgroupsize=(64,))
    assert "tk_stage" not in masked_store.source("CPU", X, X, 256, ndrange=(256,), workgroupsize=(64,))


def _check(kernel, wg, args, ndrange, expected=None):
    """CPU (streaming forced by the fixture) against the interpreter, bit for bit."""
    outs = []
    for b in (CPU, INTERP):
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        kernel(b, wg)(*a, ndrange=ndrange)
        tk.synchronize(b)
        outs.append(a)
    for x, y in zip(*outs):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
    if expected is not None:
        np.testing.assert_array_equal(outs[0][0], expected)
    return outs[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.bool_])
@pytest.mark.parametrize("D, wg, offset", [(4096, 64, 0), (1000, 64, 1), (301, 48, 3), (64, 64, 0)])
def test_lanes_streamed_rows_equal_interpreter(dtype, D, wg, offset, stream_always):
    wg = max(wg, 256 // np.dtype(dtype).itemsize)       # rows of the group of >= 4 cache lines stream
    @tk.kernel
    def scale_rows(out, X: tk.Const, w: tk.Const, D: tk.constexpr):
        row = tk.index(tk.Group, tk.Linear)
        lid = tk.index(tk.Local, tk.Linear)
        tk.synchronize()
        for j in range(lid, D, tk.groupsize()[0]):
            out[row, j] = X[row, j] * w[j]

    R = 5
    rng = np.random.default_rng(D)
    X = (rng.random((R, D)) * 10).astype(dtype)
    w = (rng.random(D) * 3).astype(dtype)
    fill = np.array(5).astype(dtype)
    buf = np.full(R * D + offset + 3, fill, dtype)
    out = buf[offset:offset + R * D].reshape(R, D)      # misaligned rows
    src = scale_rows.source("CPU", out, X, w, D, ndrange=(R * wg,), workgroupsize=(wg,))
    assert "tk_dst0[tk_l0] =" in src
    scale_rows(CPU, wg)(out, X, w, D, ndrange=(R * wg,))
    tk.synchronize(CPU)
    ref = np.empty((R, D), dtype)
    scale_rows(INTERP, wg)(ref, X, w, D, ndrange=(R * wg,))
    np.testing.assert_array_equal(out, ref)
    assert (buf[:offset] == fill).all() and (buf[offset + R * D:] == fill).all()


def test_lanes_streamed_2d_groups_partial_and_uniform_loop(stream_always):
    @tk.kernel
    def planes(out, x: tk.Const, s, P: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        tk.synchronize()
        for t in range(P):                       # uniform loop: hoisted, lanes along j
            out[t, i, j] = x[i, j] * s + t

    x = np.random.default_rng(2).random((21, 77)).astype(np.float32)
    out = np.zeros((3, 21, 77), np.float32)
    exp = np.stack([x * np.float32(1.5) + np.float32(t) for t in range(3)])
    src = planes.source("CPU", out, x, np.float32(1.5), 3, ndrange=(21, 77), workgroupsize=(4, 64))
    assert "tk_stream_bytes(&tk_pend_out, tk_out0," in src
    _check(planes, (4, 64), [out, x, np.float32(1.5), 3], (21, 77), exp)
    # a group row of one cache line (16 float32) streams only whole, from a line's start
    src = planes.source("CPU", out, x, np.float32(1.5), 3, ndrange=(21, 77), workgroupsize=(4, 16))
    assert "tk_stream_lines((char *)tk_out0, (const char *)tk_stage0, 1);" in src
    assert "tk_nv1 == 16 && ((uintptr_t)tk_out0 & 63) == 0" in src
    assert "tk_stream_bytes(&tk_pend_out" not in src


def _at(shape, dtype, offset):
    """A zeroed array of ``shape`` starting ``offset`` elements after a 64-byte boundary."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    buf = np.zeros(n * dtype.itemsize + 64 + offset * dtype.itemsize, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset * dtype.itemsize
    a = buf[start:start + n * dtype.itemsize].view(dtype).reshape(shape)
    assert a.ctypes.data % 64 == offset * dtype.itemsize
    return a


@pytest.mark.parametrize("dtype, T", [(np.float32, 16), (np.float64, 8), (np.int32, 32), (np.float64, 16)])
@pytest.mark.parametrize("R, C", [(64, 64), (64, 128), (128, 32)])
@pytest.mark.parametrize("offset", [0, 1, 4])
def test_tile_rows_of_whole_lines_stream(dtype, T, R, C, offset, stream_always):
    """A local-memory tile transpose whose group rows are whole cache lines (16 float32, 8
    float64: one line; 32 int32: two) streams the rows that start a line and stores the
    others directly: bit-identical to the interpreter for aligned and misaligned outputs,
    square and not."""
    @tk.kernel
    def transpose_tile(out, a: tk.Const, T: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        gi, gj = tk.index(tk.Group, tk.Cartesian)
        tile = tk.localmem(a.dtype, (T, T + 1))
        tile[li, lj] = a[i, j]
        tk.synchronize()
        out[gj * T + li, gi * T + lj] = tile[lj, li]

    a = (np.random.default_rng(R + C).random((R, C)) * 100).astype(dtype)
    out = _at((C, R), dtype, offset)
    src = transpose_tile.source("CPU", out, a, T, ndrange=(R, C), workgroupsize=(T, T))
    lines = T * np.dtype(dtype).itemsize // 64
    assert f"tk_stream_lines((char *)tk_out0, (const char *)tk_stage0, {lines});" in src
    res = _check(transpose_tile, (T, T), [out, a, T], (R, C), a.T)
    np.testing.assert_array_equal(res[0], a.T)


@pytest.mark.parametrize("offset", [0, 3])
def test_short_rows_partial_groups_keep_plain_stores(offset, stream_always):
    """Partial groups (77 = 4 * 16 + 13 columns, 21 rows of groups of 4) of a kernel whose
    16-wide float32 group rows would stream: the last group of each row stores directly."""
    @tk.kernel
    def planes16(out, x: tk.Const, s, P: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        tk.synchronize()
        for t in range(P):
            out[t, i, j] = x[i, j] * s + t

    x = np.random.default_rng(3).random((21, 80)).astype(np.float32)
    for cols in (80, 77):
        xs = np.ascontiguousarray(x[:, :cols])
        out = _at((3, 21, cols), np.float32, offset)
        exp = np.stack([xs * np.float32(1.5) + np.float32(t) for t in range(3)])
        _check(planes16, (4, 16), [out, xs, np.float32(1.5), 3], (21, cols), exp)


def test_rows_shorter_than_a_line_keep_plain_stores(stream_always):
    """16 float16 are half a line: no streaming (a row would be a partial line)."""
    @tk.kernel
    def copy_tile(out, a: tk.Const):
        i, j = tk.index(tk.Global, tk.Cartesian)
        tk.synchronize()
        out[i, j] = a[i, j]

    a = np.random.default_rng(6).random((32, 32)).astype(np.float16)
    assert "tk_stream" not in copy_tile.source("CPU", a, a, ndrange=(32, 32), workgroupsize=(16, 16))
    _check(copy_tile, (16, 16), [np.zeros_like(a), a], (32, 32), a)


def test_item_outer_piece_streams_through_a_local_tile(stream_always):
    @tk.kernel
    def swap_pairs(out, a: tk.Const, W: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        tile = tk.localmem(a.dtype, (2, W))
        tile[li, lj] = a[i, j]
        tk.synchronize()
        out[i, j] = tile[li, lj] * 2.0 + tile[1 - li, lj]

    a = np.random.default_rng(4).random((8, 200)).astype(np.float64)
    src = swap_pairs.source("CPU", a, a, 64, ndrange=(8, 200), workgroupsize=(2, 64))
    assert "streaming stores */" in src
    exp = a * 2.0 + a.reshape(4, 2, 200)[:, ::-1].reshape(8, 200)
    _check(swap_pairs, (2, 64), [np.zeros_like(a), a, 64], (8, 200), exp)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.bool_])
def test_flat_plain_path_stores_through_the_output(dtype, stream_never):
    """Small outputs (here: streaming off) run the same loop storing into the output itself."""
    @tk.kernel
    def shift_rows(a, b: tk.Const):
        i, j = tk.index(tk.Global, tk.Cartesian)
        a[i, j] = b[i, j] + b[i, j]

    b = (np.random.default_rng(5).random((9, 2100)) * 20).astype(dtype)
    for nd in [(9, 2100), (range(2, 9), range(3, 2099))]:
        a = np.zeros_like(b)
        shift_rows(tk.CPU(threads=2))(a, b, ndrange=nd)
        r0 = range(9) if isinstance(nd[0], int) else nd[0]
        r1 = range(2100) if isinstance(nd[1], int) else nd[1]
        exp = np.zeros_like(b)
        sl = (slice(r0.start, r0.stop), slice(r1.start, r1.stop))
        exp[sl] = (b[sl] + b[sl]).astype(dtype)
        np.testing.assert_array_equal(a, exp)


# ----------------------------------------------------------------------------- outputs that do not start a line

def _in_guard(n, dtype, byte_offset):
    """(buffer, view): ``n`` elements starting ``byte_offset`` bytes after a 64-byte boundary
    inside a buffer of sentinel bytes 0xA5 (two lines either side), to check that nothing
    outside the view is written."""
    dtype = np.dtype(dtype)
    buf = np.full(n * dtype.itemsize + 4 * 64 + byte_offset, 0xA5, np.uint8)
    start = (-buf.ctypes.data) % 64 + 128 + byte_offset
    return buf, start, buf[start:start + n * dtype.itemsize].view(dtype)


@pytest.mark.parametrize("dtype, byte_offsets", [
    (np.float32, range(0, 64, 4)),           # every 4-byte position in a line (the register path)
    (np.float64, (8, 24, 56)),
    (np.float16, (2, 4, 62)),                # 2 mod 4: the general path
    (np.int8, (1, 4, 63))])
@pytest.mark.parametrize("R, D, wg, ndrange", [
    (6, 4096, 64, None),                     # rows of whole group rows (RMSNorm's shape)
    (5, 1000, 64, None),                     # a last group row with masked lanes
    (4, 200, 128, None),                     # rows shorter than the group (masked lanes only)
    (7, 1024, 64, 6 * 64 + 40)])             # a partial group: its row streams 40 lanes per run
def test_lanes_streamed_rows_at_every_line_offset(dtype, byte_offsets, R, D, wg, ndrange, stream_always):
    """A group-per-row kernel (RMSNorm's second pass) whose output starts at each byte offset
    into a cache line: the streamed rows are bit-identical to the interpreter's and no byte
    outside the output is written. (Regression: the runs of a line-misaligned output, such as
    a NumPy array's 16-byte aligned data, now continue the pending line in registers.)"""
    wg = max(wg, 256 // np.dtype(dtype).itemsize)       # group rows of >= 4 lines stream
    @tk.kernel
    def scale_rows_at(out, X: tk.Const, w: tk.Const, D: tk.constexpr):
        row = tk.index(tk.Group, tk.Linear)
        lid = tk.index(tk.Local, tk.Linear)
        acc = 0.0
        for j in range(lid, D, tk.groupsize()[0]):
            acc += X[row, j]
        s = tk.group_reduce(acc, "add") / D
        for j in range(lid, D, tk.groupsize()[0]):
            out[row, j] = X[row, j] * w[j] + s

    rng = np.random.default_rng(D + wg)
    X = (rng.random((R, D)) * 10).astype(dtype)
    w = (rng.random(D) * 3).astype(dtype)
    nd = R * wg if ndrange is None else ndrange
    ref = np.zeros((R, D), dtype)
    scale_rows_at(INTERP, wg)(ref, X, w, D, ndrange=nd)
    src = scale_rows_at.source("CPU", ref, X, w, D, ndrange=nd, workgroupsize=wg)
    assert "tk_dst0[tk_l0] =" in src
    for off in byte_offsets:
        buf, start, flat = _in_guard(R * D, dtype, off)
        flat[:] = 0
        scale_rows_at(CPU, wg)(flat.reshape(R, D), X, w, D, ndrange=nd)
        tk.synchronize(CPU)
        np.testing.assert_array_equal(flat.reshape(R, D), ref, err_msg=f"output at byte {off} of a line")
        assert (buf[:start] == 0xA5).all() and (buf[start + flat.nbytes:] == 0xA5).all()


@pytest.mark.parametrize("dtype, byte_offsets", [(np.float32, (4, 16, 44, 60)), (np.float64, (8, 40)),
                                                 (np.float16, (2, 6))])
@pytest.mark.parametrize("n", [16 * 1024 + 5, 4096, 100])
def test_flat_streamed_blocks_at_every_line_offset(dtype, byte_offsets, n, stream_always):
    """A flat kernel's staged blocks written to an output that starts inside a cache line:
    bit-identical to NumPy, nothing outside written, with one thread and two."""
    @tk.kernel
    def twice_at(a, b: tk.Const):
        i = tk.index()
        a[i] = b[i] + b[i]

    b = (np.random.default_rng(n).random(n) * 50).astype(dtype)
    for off in byte_offsets:
        for threads in (1, 2):
            buf, start, out = _in_guard(n, dtype, off)
            twice_at(tk.CPU(threads=threads))(out, b, ndrange=(n,))
            tk.synchronize(CPU)
            np.testing.assert_array_equal(out, b + b, err_msg=f"output at byte {off} of a line")
            assert (buf[:start] == 0xA5).all() and (buf[start + out.nbytes:] == 0xA5).all()


@tk.kernel
def _sum_run(a, b: tk.Const, c: tk.Const):
    i = tk.index()
    a[i] = b[i] + c[i]


@tk.kernel
def _copy_run(a, b: tk.Const):
    i = tk.index()
    a[i] = b[i]


def test_streamed_flat_blocks_are_256_bytes_where_staged():
    """A streamed flat launch that computes into the staging buffer (items, or float16 rounding)
    takes blocks of 256 bytes of output where its rows are at least 4 KB, else (shorter rows,
    a launch that does not stream) 4 KB; a copy streams from its source in 4 KB blocks."""
    for dt, run, block in ((np.float32, 64, 1024), (np.float64, 32, 512), (np.float16, 128, 2048),
                           (np.int8, 256, 4096)):
        x = np.zeros(100, dt)
        staged = f"tk_bs = tk_stream && tk_n0 >= {block} ? {run} : {block};"
        assert staged in _source(_sum_run, x, x, x, ndrange=100)
        copied = _source(_copy_run, x, x, ndrange=100)
        if dt == np.float16:                                         # rounded (tk_f16_block)
            assert staged in copied
        else:
            assert f"tk_b += {block}) {{" in copied and "tk_bs" not in copied
    src = _source(_copy_run, np.zeros(100, np.float16), np.zeros(100, np.float32), ndrange=100)
    assert "tk_f16_block(tk_dst0, tk_src0," in src and "tk_bs = tk_stream && tk_n0 >= 2048 ? 128 : 2048;" in src


@pytest.mark.parametrize("dtype, byte_offsets", [(np.float32, (0, 4, 16, 60)), (np.float64, (0, 8, 56)),
                                                 (np.float16, (0, 2, 62)), (np.int8, (0, 1, 63))])
def test_flat_streamed_runs_at_their_edges(dtype, byte_offsets, stream_always):
    """Streamed 256-byte runs: lengths around a run's and a line's edges (a partial line, a
    line, a run and a line, several runs), outputs starting anywhere in a line, one thread
    and two (a launch of 4096 items or more is split): bit-identical to NumPy, nothing
    outside written."""
    @tk.kernel
    def sum_edges(a, b: tk.Const, c: tk.Const):
        i = tk.index()
        a[i] = b[i] + c[i]

    rng = np.random.default_rng(5)
    per_line = 64 // np.dtype(dtype).itemsize
    for n in (1, per_line - 1, per_line, per_line + 1, 4 * per_line - 1, 4 * per_line + 1,
              5 * per_line + 3, 4096 + 4 * per_line + 1):
        b, c = ((rng.random(n) * 50).astype(dtype) for _ in range(2))
        for off in byte_offsets:
            for threads in (1, 2):
                buf, start, out = _in_guard(n, dtype, off)
                sum_edges(tk.CPU(threads=threads))(out, b, c, ndrange=(n,))
                tk.synchronize(CPU)
                np.testing.assert_array_equal(out, b + c, err_msg=f"n={n}, output at byte {off} of a line")
                assert (buf[:start] == 0xA5).all() and (buf[start + out.nbytes:] == 0xA5).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("cols", [300, 1029, 2100])
def test_flat_streamed_2d_rows_shorter_and_longer_than_a_block(dtype, cols, stream_always):
    """2-D flat launches over a sub-range whose rows are shorter than a 4 KB block (one block
    per row) or longer (256-byte runs), one thread and two: bit-identical, the rest of the
    output untouched."""
    @tk.kernel
    def rows_sum(a, b: tk.Const, c: tk.Const):
        i, j = tk.index(tk.Global, tk.Cartesian)
        a[i, j] = b[i, j] + c[i, j]

    rng = np.random.default_rng(cols)
    b, c = ((rng.random((9, cols)) * 50).astype(dtype) for _ in range(2))
    for threads in (1, 2):
        a = np.full((9, cols), 7, dtype)
        rows_sum(tk.CPU(threads=threads))(a, b, c, ndrange=(range(1, 8), range(3, cols - 2)))
        tk.synchronize(CPU)
        want = np.full((9, cols), 7, dtype)
        want[1:8, 3:cols - 2] = b[1:8, 3:cols - 2] + c[1:8, 3:cols - 2]
        np.testing.assert_array_equal(a, want)


def test_misaligned_rows_below_the_threshold_store_directly(stream_never):
    """The same row kernel with streaming off (an output below TK_CPU_STREAM_BYTES)."""
    @tk.kernel
    def scale_rows_small(out, X: tk.Const, D: tk.constexpr):
        row = tk.index(tk.Group, tk.Linear)
        lid = tk.index(tk.Local, tk.Linear)
        for j in range(lid, D, tk.groupsize()[0]):
            out[row, j] = X[row, j] * 3.0

    X = np.random.default_rng(9).random((3, 1000)).astype(np.float32)
    buf, start, flat = _in_guard(X.size, np.float32, 16)
    scale_rows_small(CPU, 64)(flat.reshape(X.shape), X, 1000, ndrange=3 * 64)
    tk.synchronize(CPU)
    np.testing.assert_array_equal(flat.reshape(X.shape), X * np.float32(3.0))
    assert (buf[:start] == 0xA5).all() and (buf[start + flat.nbytes:] == 0xA5).all()


# ----------------------------------------------------------------------------- group order of streamed launches

ROWS_FIRST = "/* row-major */"


@pytest.mark.parametrize("dtype, T", [(np.float32, 16), (np.float64, 8), (np.float16, 32), (np.int32, 16),
                                      (np.int64, 8)])
@pytest.mark.parametrize("R, C", [(64, 64), (48, 160), (160, 32)])
@pytest.mark.parametrize("threads", [1, 2])
def test_streamed_loop_free_launch_walks_groups_row_major(dtype, T, R, C, threads, stream_always):
    """A streamed launch of a loop-free 2-D kernel (passes/grouporder.py) visits its groups
    row-major instead of in 8 x 8 blocks: a tile transpose of every element size whose tile
    rows are whole lines (1-byte elements would need groups of 64 x 64, over the CPU's
    limit), square and not, grids of groups narrower and wider than a block, one and two threads (each thread a
    contiguous range of group positions), bit-identical to the interpreter and to NumPy."""
    @tk.kernel
    def transpose_rows_first(out, a: tk.Const, T: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        gi, gj = tk.index(tk.Group, tk.Cartesian)
        tile = tk.localmem(a.dtype, (T, T + 1))
        tile[li, lj] = a[i, j]
        tk.synchronize()
        out[gj * T + li, gi * T + lj] = tile[lj, li]

    R, C = R * T // 16, C * T // 16
    a = (np.random.default_rng(R * C).random((R, C)) * 100).astype(dtype)
    out = _at((C, R), dtype, 0)
    src = transpose_rows_first.source("CPU", out, a, T, ndrange=(R, C), workgroupsize=(T, T))
    assert ROWS_FIRST in src and "tk_stream_lines" in src
    # such a launch streams from half the threshold, and both of its tests agree (codegen/c.py)
    assert src.count("tk_stream_threshold() / 2") == 2 and "tk_stream_threshold();" not in src
    for b in (tk.CPU(threads=threads), INTERP):
        o = out.copy()
        transpose_rows_first(b, (T, T))(o, a, T, ndrange=(R, C))
        tk.synchronize(b)
        np.testing.assert_array_equal(o, a.T)


@pytest.mark.parametrize("nd, wg", [((45, 136), (4, 8)), ((3, 37, 72), (1, 4, 8)), ((300, 24), (5, 8))])
@pytest.mark.parametrize("threads", [1, 2])
def test_streamed_row_major_walk_partial_groups_and_3d(nd, wg, threads, stream_always):
    """The row-major walk of a streamed launch with partial groups at both edges and a 3-D
    grid: every work item writes its own group and local ids (a 64-byte row of int64 per
    group row streams), so a skipped group or wrong coordinates show as wrong ids."""
    @tk.kernel
    def ids_streamed(out):
        p = tk.index(tk.Global, tk.Cartesian)
        g = tk.index(tk.Group, tk.Linear)
        lid = tk.index(tk.Local, tk.Linear)
        tk.synchronize()
        out[p] = g * 1000 + lid

    out = np.full(nd, -1, np.int64)
    assert ROWS_FIRST in ids_streamed.source("CPU", out, ndrange=nd, workgroupsize=wg)
    ids_streamed(tk.CPU(threads=threads), wg)(out, ndrange=nd)
    ng = [(n + w - 1) // w for n, w in zip(nd, wg)]
    idx = np.indices(nd)
    g = np.zeros(nd, np.int64)
    lid = np.zeros(nd, np.int64)
    for d in range(len(nd)):
        g = g * ng[d] + idx[d] // wg[d]
        lid = lid * wg[d] + idx[d] % wg[d]
    np.testing.assert_array_equal(out, g * 1000 + lid)


def test_kernels_with_loops_or_no_streams_keep_the_blocked_walk():
    """A kernel with a loop (a tiled matmul re-reads its neighbours' rows and columns: the
    8 x 8 blocks keep them in cache) or without streamed stores walks only in blocks; the
    decision itself (``rows_first_when_streamed``) looks at loops anywhere in the body."""
    from tinykernels.passes.grouporder import rows_first_when_streamed

    @tk.kernel
    def mm_tiled(C, A: tk.Const, B: tk.Const, T: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        li, lj = tk.index(tk.Local, tk.Cartesian)
        As = tk.localmem(A.dtype, (T, T))
        Bs = tk.localmem(B.dtype, (T, T))
        acc = C.dtype(0)
        for k0 in range(0, A.shape[1], T):
            As[li, lj] = A[i, k0 + lj]
            Bs[li, lj] = B[k0 + li, j]
            tk.synchronize()
            for k in range(T):
                acc += As[li, k] * Bs[k, lj]
            tk.synchronize()
        C[i, j] = acc

    A = np.ones((64, 64), np.float32)
    src = mm_tiled.source("CPU", A.copy(), A, A, 16, ndrange=(64, 64), workgroupsize=(16, 16))
    assert "tk_stream_lines" in src and ROWS_FIRST not in src and "(o * nA + i) * nB + j" in src
    assert "tk_stream_threshold() / 2" not in src and "tk_stream_threshold();" in src   # the whole cache
    @tk.kernel
    def ids_counted(out, count):
        p = tk.index(tk.Global, tk.Cartesian)
        g = tk.index(tk.Group, tk.Linear)
        out[p] = g
        tk.atomic_add(count, g, 1)

    src = ids_counted.source("CPU", np.zeros((64, 64), np.int64), np.zeros(64, np.int32), ndrange=(64, 64),
                             workgroupsize=(8, 8))
    assert ROWS_FIRST not in src and "tk_stream" not in src      # a global atomic: nothing streams
    i, j = N.Index(None, None, "global", 0), N.Index(None, None, "global", 1)
    out = N.ArrayInfo("out", tk.float32, 2)
    store = N.Store(None, out, [i, j], N.Var(None, None, "v"))
    k = N.Kernel("k", [], [store], {}, 2, (16, 16))
    assert rows_first_when_streamed(k)
    k.body = [N.If(None, N.Var(None, None, "c"), [N.For(None, "t", None, None, None, [store])], [])]
    assert not rows_first_when_streamed(k)          # a loop, even nested
    k.body, k.ndim, k.workgroup = [store], 1, (256,)
    assert not rows_first_when_streamed(k)          # 1-D grids walk in order of ids anyway


@pytest.mark.parametrize("dtype, out_dtype", [(np.float32, np.float32), (np.int16, np.int16),
                                              (np.float64, np.float64), (np.float32, np.float16)])
@pytest.mark.parametrize("n", [3, 5000])
def test_a_zero_d_source_is_broadcast_not_streamed_as_a_copy(dtype, out_dtype, n, stream_always):
    """``out[i] = A[()]`` (a 0-d tk.Const, every item reads the same element) is not a copy of
    contiguous memory: the copy-source analysis unpacked the load's (empty) index and the
    render failed with a bare ValueError."""
    @tk.kernel
    def broadcast0d(out, A: tk.Const):
        i = tk.index()
        out[i] = A[()]

    a = np.array(2.5 if dtype != np.int16 else -7, dtype)
    out = np.zeros(n, out_dtype)
    broadcast0d(CPU)(out, a, ndrange=n)
    tk.synchronize(CPU)
    np.testing.assert_array_equal(out, np.full(n, a, out_dtype))
