"""tinykernels.llm.matmul: quantized (q4_0, q8_0, q4_k) and float32 GEMV/GEMM against NumPy
float64 of the dequantized weights, on CPU, INTERP (small), CL and WEBGPU; out=, errors, and
every kernel's CUDA source through NVRTC."""
import importlib

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from tinykernels.runtime import cuda as rt

from llm_helpers import run_at_bytedot_level
from llm_quant_helpers import BACKENDS, QTYPES, host, random_blocks, ref_dequantize, to, to_q

mm = importlib.import_module("tinykernels.llm.matmul")
U32 = 2.0 ** -24          # float32 unit roundoff


def _check(got, w64, b, k):
    """float32 accumulation of K products, in any order: |error| <= (K + 2) u sum|w||b|."""
    b64 = np.asarray(b, np.float64)
    ref = w64 @ b64
    bound = (k + 2) * U32 * (np.abs(w64) @ np.abs(b64)) + 1e-30
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert got.shape == ref.shape and got.dtype == np.float32
    assert (err <= bound).all(), float((err / bound).max())


def _fma32(a, b, c):
    """float32 ``fma(a, b, c)`` (rounded once) where ``a * b`` is exact in float64 (the
    host GEMV's products: a weight of <= 8 bits or a float16 scale times a float32): the sum
    in float64 rounded to odd (TwoSum's error decides the last bit), so that the rounding
    to float32 is the single correct one."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    s = p + c
    bv = s - p
    e = (p - (s - bv)) + (c - bv)
    even = (s.view(np.uint64) & 1) == 0
    s = np.where((e != 0) & even, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def exact_route_model(qtype, raw, x, pair_lanes=True):
    """The host exact q4_0/q8_0 GEMV in NumPy, bit for bit: per block ``b``, with ``w`` the
    block's integers (``q - 8`` / int8) and ``d`` its scale, ``s_j = w_j x_j`` rounded, then
    ``s_j = fma(w_{j+16}, x_{j+16}, s_j)`` and lane ``h + j`` = ``fma(d, s_j, lane)``
    (``j < 16``; ``h = 16`` for the odd blocks before the last whole chunk of ``CHUNK``,
    else 0; always 0 without ``pair_lanes``); the 32 lanes added in order."""
    raw = np.asarray(raw)
    m = raw.shape[0]
    bb = 18 if qtype == "q4_0" else 34
    nb = raw.shape[1] // bb
    blocks = raw.reshape(m, nb, bb)
    ds = blocks[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float32)
    if qtype == "q4_0":
        q = blocks[:, :, 2:].astype(np.int64)
        w = np.concatenate([(q & 15) - 8, (q >> 4) - 8], axis=2).astype(np.float64)
    else:
        w = blocks[:, :, 2:].view(np.int8).astype(np.float64)
    full = nb - nb % mm.CHUNK
    acc = np.zeros((m, 32), np.float32)
    for b in range(nb):
        h = 16 if pair_lanes and b < full and b % 2 else 0
        xb = x[32 * b: 32 * b + 32]
        s = (w[:, b, :16] * xb[:16].astype(np.float64)).astype(np.float32)
        s = _fma32(w[:, b, 16:], xb[16:], s)
        acc[:, h:h + 16] = _fma32(ds[:, b, None], s, acc[:, h:h + 16])
    out = acc[:, 0]
    for j in range(1, 32):
        out = out + acc[:, j]
    return out


def _weights(qtype, m, k, rng):
    """A QTensor from random valid blocks (any byte pattern) or a float32 matrix; and its
    float64 values."""
    if qtype is None:
        w = rng.standard_normal((m, k)).astype(np.float32)
        return w, w.astype(np.float64)
    raw = random_blocks(qtype, m, k // llm.QTYPES[qtype].block, rng)
    return llm.QTensor(qtype, (m, k), raw), ref_dequantize(qtype, raw).astype(np.float64)


def _dims(be, qtype):
    if be == "INTERP":
        return 3, 256 if qtype == "q4_k" else 96
    return 37, 768 if qtype == "q4_k" else 544       # 544 = 17 blocks of 32, not a multiple of 64


@pytest.mark.parametrize("be", BACKENDS)
@pytest.mark.parametrize("qtype", QTYPES + [None])
def test_gemv(qtype, be):
    rng = np.random.default_rng(10)
    m, k = _dims(be, qtype)
    a, w64 = _weights(qtype, m, k, rng)
    x = rng.standard_normal(k).astype(np.float32)
    a = to_q(be, a) if qtype else to(be, a)
    _check(host(llm.matmul(a, to(be, x))), w64, x, k)


@pytest.mark.parametrize("be", BACKENDS)
@pytest.mark.parametrize("qtype", QTYPES + [None])
@pytest.mark.parametrize("n", [3, mm.FUSED_MAX_N + 9])
def test_gemm(qtype, be, n):
    """Small N takes the fused quantized kernel, larger N (and q4_k) dequantize + tiled GEMM;
    M and N are not multiples of the 16 x 16 tile."""
    rng = np.random.default_rng(11)
    m, k = _dims(be, qtype)
    if be == "INTERP":
        n = min(n, 5)
    a, w64 = _weights(qtype, m, k, rng)
    bm = rng.standard_normal((k, n)).astype(np.float32)
    a = to_q(be, a) if qtype else to(be, a)
    _check(host(llm.matmul(a, to(be, bm))), w64, bm, k)


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_host_fused_gemm_every_small_n(qtype, be):
    """The host fused GEMM compiles per N (1..FUSED_MAX_N) with 32 * N partial sums over the
    transposed ``b``: each N against float64, K with an odd number of blocks."""
    rng = np.random.default_rng(15)
    m, k = (2, 64) if be == "INTERP" else (13, 32 * 19)
    a, w64 = _weights(qtype, m, k, rng)
    for n in range(1, mm.FUSED_MAX_N + 1) if be == "CPU" else (1, 3, 8):
        bm = rng.standard_normal((k, n)).astype(np.float32)
        _check(host(llm.matmul(to_q(be, a), to(be, bm))), w64, bm, k)


@pytest.mark.parametrize("k", [1, 31, 33, 100])
def test_float_gemv_and_gemm_ragged_k(k):
    """The 32-lane host GEMV has a tail loop; the tiled GEMM pads K to the tile."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((19, k)).astype(np.float32)
    x = rng.standard_normal(k).astype(np.float32)
    bm = rng.standard_normal((k, 21)).astype(np.float32)
    _check(llm.matmul(a, x), a.astype(np.float64), x, k)
    _check(llm.matmul(a, bm), a.astype(np.float64), bm, k)


def test_quantized_matmul_uses_exactly_the_dequantized_weights():
    """On the CPU the fused GEMV multiplies by exactly dequantize()'s weights: q4_k in the
    float GEMV's order (bit-identical results); q4_0/q8_0 with the block's scale factored
    out of its 32 products (bit for bit :func:`exact_route_model`, and within the float32
    bound of the float64 product of dequantize()'s values)."""
    rng = np.random.default_rng(13)
    for qtype in QTYPES:
        a, w64 = _weights(qtype, 9, 512, rng)
        x = rng.standard_normal(512).astype(np.float32)
        got = llm.matmul(a, x)
        _check(got, w64, x, 512)
        if qtype == "q4_k":
            assert np.array_equal(got, llm.matmul(llm.dequantize(a), x)), qtype
        else:
            assert np.array_equal(got, exact_route_model(qtype, a.data, x)), qtype


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
@pytest.mark.parametrize("blocks", ["one", "chunk", "chunks+tail"])
def test_host_exact_gemv_decodes_every_byte_value(qtype, be, blocks):
    """The host exact GEMV (q8_0 sign-extends its bytes, q4_0 looks its nibbles up) on rows
    whose weight bytes take all 256 values, K of one block (the tail loop only), of one
    chunk of ``CHUNK`` blocks (no tail) and of full chunks and a remainder: bit for bit
    :func:`exact_route_model` (the same bits on the CPU and the interpreter: one kernel
    source), which a swapped nibble, block, scale or lane would break, and within the
    float32 bound of dequantize()'s values times ``x`` in float64."""
    rng = np.random.default_rng(42)
    nb = {"one": 1, "chunk": mm.CHUNK, "chunks+tail": mm.CHUNK + 3 if be == "INTERP" else 2 * mm.CHUNK + 3}[blocks]
    m, k = 4, 32 * nb
    raw = random_blocks(qtype, m, nb, rng).reshape(m, nb, -1)
    nq = raw.shape[2] - 2
    raw[:, :, 2:] = (np.arange(m * nb * nq) % 256).astype(np.uint8).reshape(m, nb, nq)
    raw = raw.reshape(m, -1)
    a = llm.QTensor(qtype, (m, k), raw)
    x = rng.standard_normal(k).astype(np.float32)
    got = host(llm.matmul(to_q(be, a), to(be, x)))
    assert got.dtype == np.float32 and np.array_equal(got, exact_route_model(qtype, raw, x))
    _check(got, ref_dequantize(qtype, raw).astype(np.float64), x, k)


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_host_exact_gemv_two_rows_per_item_any_row_count(qtype, be):
    """The host exact GEMV takes rows ``2i`` and ``2i + 1`` in work item ``i``
    (``matmul.host_items``), the last row alone (computed twice) when the count is odd: every
    row count gives each row its own :func:`exact_route_model` bits, through the host fast
    path and through a stream's launch, at one and three threads (the pairs split across
    threads differently), rows all different so a row written from its neighbour shows."""
    rng = np.random.default_rng(43)
    nb = 2 * mm.CHUNK + 3 if be == "CPU" else mm.CHUNK + 1
    for m in (1, 2, 3, 5, 8):
        raw = random_blocks(qtype, m, nb, rng)
        x = rng.standard_normal(32 * nb).astype(np.float32)
        want = exact_route_model(qtype, raw, x)
        assert len(set(want.tolist())) == m
        a = llm.QTensor(qtype, (m, 32 * nb), raw)
        assert mm.host_items(qtype, m) == (m + 1) // 2
        backends = [tk.CPU(threads=t) for t in (1, 3)] if be == "CPU" else [tk.backend("INTERP")]
        for b in backends:
            out = np.full(m, np.nan, np.float32)
            mm._HOST_GEMV[qtype](b)(out, raw, x, ndrange=mm.host_items(qtype, m))
            assert np.array_equal(out, want), (m, b)
        assert np.array_equal(host(llm.matmul(to_q(be, a), to(be, x))), want), m
        s = tk.backend(be).stream()
        got = llm.matmul(to_q(be, a), to(be, x), stream=s)
        s.synchronize()
        assert np.array_equal(host(got), want), m


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_exact_route_model_tells_a_wrong_order_apart(qtype):
    """The model is not a tautology: a swapped nibble order, a neighbour block's scale or all
    blocks into one set of lanes give other bits than the kernel's."""
    rng = np.random.default_rng(45)
    nb = 2 * mm.CHUNK + 3
    raw = random_blocks(qtype, 5, nb, rng)
    x = rng.standard_normal(32 * nb).astype(np.float32)
    got = llm.matmul(llm.QTensor(qtype, (5, 32 * nb), raw), x)
    assert np.array_equal(got, exact_route_model(qtype, raw, x))
    bb = 18 if qtype == "q4_0" else 34
    blocks = raw.reshape(5, nb, bb)
    wrong = []
    if qtype == "q4_0":
        sw = blocks.copy()
        sw[:, :, 2:] = (blocks[:, :, 2:] >> 4) | (blocks[:, :, 2:] << 4)    # nibbles swapped
        wrong.append(sw)
    sh = blocks.copy()
    sh[:, :, :2] = np.roll(blocks[:, :, :2], 1, axis=1)                      # scales shifted
    wrong.append(sh)
    for w in wrong:
        assert not np.array_equal(got, exact_route_model(qtype, w.reshape(5, -1), x))
    assert not np.array_equal(got, exact_route_model(qtype, raw, x, pair_lanes=False))
    assert not np.array_equal(got, llm.matmul(llm.dequantize(llm.QTensor(qtype, (5, 32 * nb), raw)), x))


def test_out_is_written_in_place_and_returned():
    rng = np.random.default_rng(14)
    a, w64 = _weights("q8_0", 5, 64, rng)
    x = rng.standard_normal(64).astype(np.float32)
    out = np.full(5, np.nan, np.float32)
    assert llm.matmul(a, x, out=out) is out
    _check(out, w64, x, 64)
    bm = rng.standard_normal((64, 20)).astype(np.float32)
    out2 = np.full((5, 20), np.nan, np.float32)
    assert llm.matmul(a, bm, out=out2) is out2
    _check(out2, w64, bm, 64)


def test_empty_extents():
    assert llm.matmul(np.zeros((0, 8), np.float32), np.ones(8, np.float32)).shape == (0,)
    z = llm.matmul(np.zeros((3, 0), np.float32), np.ones((0, 4), np.float32))
    assert z.shape == (3, 4) and (z == 0).all()
    assert llm.matmul(np.zeros((3, 0), np.float32), np.ones(0, np.float32)).tolist() == [0, 0, 0]


def test_errors_name_the_argument():
    a, _ = _weights("q4_0", 4, 64, np.random.default_rng(15))
    x = np.ones(64, np.float32)
    with pytest.raises(ValueError, match="'b'.*shape"):
        llm.matmul(a, np.ones(32, np.float32))
    with pytest.raises(ValueError, match="'b'.*dtype"):
        llm.matmul(a, x.astype(np.float64))
    with pytest.raises(ValueError, match="'out'.*shape"):
        llm.matmul(a, x, out=np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="'out'.*dtype"):
        llm.matmul(a, x, out=np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="'a'.*dtype"):
        llm.matmul(np.ones((4, 64), np.float64), x)
    with pytest.raises(ValueError, match="'a'.*2-D"):
        llm.matmul(np.ones(64, np.float32), x)
    with pytest.raises(ValueError, match="'a'.*QTensor"):
        llm.matmul([[1.0]], x)
    # a strided b is multiplied as its contiguous copy (see
    # test_strided_inputs_are_taken_as_contiguous_copies); a strided out is refused
    with pytest.raises(ValueError, match="'out'.*contiguous"):
        llm.matmul(np.ones((4, 64), np.float32), np.ones((64, 3), np.float32), out=np.zeros((4, 6), np.float32)[:, ::2])


@pytest.mark.parametrize("be", [p for p in BACKENDS if p.id == "CL"])
def test_arrays_on_different_backends_are_an_error(be):
    a, _ = _weights("q8_0", 4, 64, np.random.default_rng(16))
    with pytest.raises(ValueError, match="'b'.*got one on"):
        llm.matmul(to_q(be, a), np.ones(64, np.float32))


def test_llm_matmul_is_callable_however_the_module_was_imported():
    """The family module is named like its function: importing tinykernels.llm.matmul (or
    looking up another llm name, which imports every family) must not leave llm.matmul a
    non-callable module."""
    importlib.import_module("tinykernels.llm.matmul")
    try:
        llm.no_such_function
    except AttributeError:
        pass
    a = np.ones((2, 3), np.float32)
    assert llm.matmul(a, np.ones(3, np.float32)).tolist() == [3.0, 3.0]


# ----------------------------------------------------------------------------- CUDA sources

NVRTC_OK, NVRTC_WHY = rt.nvrtc_available()


def _kernel_launches():
    """(kernel, args, ndrange, workgroupsize) for every kernel of the quant and matmul modules."""
    qmod = importlib.import_module("tinykernels.llm.quant")
    f32 = np.float32
    out1, out2 = np.zeros(4, f32), np.zeros((4, 256), f32)
    x, bm = np.zeros(256, f32), np.zeros((256, 3), f32)
    data = {q: np.zeros((4, 256 // llm.QTYPES[q].block * llm.QTYPES[q].block_bytes), np.uint8) for q in QTYPES}
    g = mm.GROUP
    cases = [(qmod._dequant_q4_0, (out2, data["q4_0"]), (4, 8), None),
             (qmod._dequant_q8_0, (out2, data["q8_0"]), (4, 8), None),
             (qmod._dequant_q4_k, (out2, data["q4_k"]), (4, 4), None),
             (mm._gemv_rows_f32, (out1, out2, x), 4, None),
             (mm._gemv_group_f32, (out1, out2, x), 4 * g, g),
             (mm._gemm_f32, (np.zeros((4, 3), f32), out2, bm), (16, 16), (16, 16)),
             (mm._fill_zero, (out2,), (4, 256), None)]
    for q in QTYPES:
        cases += [(mm._HOST_GEMV[q], (out1, data[q], x), 4, None),
                  (mm._GROUP_GEMV[q], (out1, data[q], x), 4 * g, g)]
    xq8, xd, xz = np.zeros(256, np.int8), np.zeros(8, f32), np.zeros(64, np.int32)
    cases += [(mm._quantize_x_q8_0, (xq8, xd, xz[:1], x, mm.X_INT8), 8, None),
              (mm._quantize_x_q8_0, (xq8, xd, xz, x, mm.X_INT8_ZERO), 8, None),
              (mm._quantize_x_q8_0, (np.zeros(64, np.uint32), xd, xz[:1], x, mm.X_PACKED), 8, None)]
    for q in ("q4_0", "q8_0"):
        cases += [(mm._gemv_rows_i8, (out1, data[q], xq8, xd, xz, q == "q8_0"), 4, None),
                  (mm._gemv_group_i8, (out1, data[q], np.zeros(64, np.uint32), xd, q == "q8_0"), 4 * g, g)]
    for q, kern in mm._FUSED_GEMM.items():
        cases.append((kern, (np.zeros((4, 3), f32), data[q], bm), (4, 3), None))
        cases.append((mm._gemm_rows_q, (np.zeros((4, 3), f32), data[q], np.zeros((3, 256), f32), q == "q8_0", 3),
                      4, None))
    cases.append((mm._transpose_kn, (np.zeros((3, 256), f32), bm), (3, 256), None))
    return cases


@pytest.mark.skipif(not NVRTC_OK, reason=f"NVRTC unavailable: {NVRTC_WHY}")
def test_every_llm_quant_kernel_compiles_with_nvrtc():
    cases = _kernel_launches()
    from tinykernels.kernel import Kernel
    every = {v for mod in (mm, importlib.import_module("tinykernels.llm.quant"))
             for v in vars(mod).values() if isinstance(v, Kernel)}
    assert {c[0] for c in cases} == every
    for kern, args, nd, wg in cases:
        src = rt.cuda_source(kern, *args, ndrange=nd, workgroupsize=wg)
        assert rt.compile_cuda(src, "sm_80", kern.__name__ if hasattr(kern, "__name__") else "k",
                               cache=False)[:4] == b"\x7fELF"


@pytest.mark.parametrize("be", [p for p in BACKENDS if p.id in ("CPU", "CL")])
def test_stream_orders_the_dequantize_and_gemm_launches(be):
    """q4_k with N > 1 is two launches (dequantize into a scratch, then the GEMM): on a stream
    they run in order, asynchronously to Python."""
    rng = np.random.default_rng(17)
    a, w64 = _weights("q4_k", 40, 512, rng)
    bm = rng.standard_normal((512, 24)).astype(np.float32)
    s = tk.backend(be).stream()
    out = to(be, np.zeros((40, 24), np.float32))
    assert llm.matmul(to_q(be, a), to(be, bm), out=out, stream=s) is out
    s.synchronize()
    _check(host(out), w64, bm, 512)


@tk.kernel
def _axpy_short_loop(y, x: tk.Const):
    i = tk.index()
    for j in range(4):
        y[i] += x[i]


def test_cpu_runs_row_loops_of_a_few_rows_on_all_threads():
    """The CPU backend keeps launches of fewer than 4096 work items on the calling thread;
    a GEMV has one (long) item per row, so a 2048-row GEMV ran on one core. Kernels whose items
    run long loops now go parallel from 64 items; short constant loops keep the old cutoff."""
    f32 = np.float32
    src = mm._gemv_rows_q4_0.source("CPU", np.zeros(4, f32), np.zeros((4, 18), np.uint8),
                                    np.zeros(32, f32), ndrange=4)
    assert "total < 64)" in src
    src = _axpy_short_loop.source("CPU", np.zeros(4, f32), np.zeros(4, f32), ndrange=4)
    assert "total < 4096)" in src
    rng = np.random.default_rng(18)
    a, w64 = _weights("q4_0", 300, 256, rng)
    x = rng.standard_normal(256).astype(np.float32)
    for threads in (1, 3):
        _check(llm.matmul(llm.QTensor("q4_0", a.shape, a.data), x), w64, x, 256)
        out = np.zeros(300, f32)
        mm._gemv_rows_q4_0(tk.CPU(threads=threads))(out, a.data, x, ndrange=mm.host_items("q4_0", 300))
        _check(out, w64, x, 256)


# ----------------------------------------------------------------------------- the int8 route

def _gguf_q8_0(x):
    gguf = pytest.importorskip("gguf")
    return gguf.quants.quantize(x.reshape(1, -1), gguf.GGMLQuantizationType.Q8_0).reshape(-1, 34)


def _activations(k, rng):
    """Magnitudes over many decades, an all-zero block, ties of roundf (x / d = n + 0.5)."""
    x = (rng.standard_normal(k) * np.exp(rng.uniform(-6, 6, k))).astype(np.float32)
    x[:32] = 0
    if k >= 64:
        x[32:64] = np.arange(32, dtype=np.float32) - 15.5          # d = 16.5 / 127: ties
        x[32] = 127.0
    return x


@pytest.mark.parametrize("be", BACKENDS)
@pytest.mark.parametrize("packed", [False, True])
def test_quantize_activations_is_bit_exact_against_gguf(be, packed):
    rng = np.random.default_rng(31)
    k = 96 if be == "INTERP" else 4096
    x = _activations(k, rng)
    qs, d = llm.quantize_activations(to(be, x), packed=packed)
    qs, d = host(qs), host(d)
    assert qs.dtype == (np.uint32 if packed else np.int8) and qs.shape == ((k // 4,) if packed else (k,))
    got = np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), qs.view(np.uint8).reshape(-1, 32)], 1)
    np.testing.assert_array_equal(got, _gguf_q8_0(x))


def _int8_route(qtype, raw, x):
    """NumPy model of llama.cpp's route: per block the exact integer dot product of the weight
    and activation bytes, times d_w * d_x, summed in float64; and a bound on float32 rounding."""
    blocks = _gguf_q8_0(x)
    dx = blocks[:, :2].copy().view(np.float16)[:, 0].astype(np.float64)
    qx = blocks[:, 2:].view(np.int8).astype(np.int64)
    m = raw.shape[0]
    fmt = llm.QTYPES[qtype]
    rb = raw.reshape(m, -1, fmt.block_bytes)
    dw = rb[:, :, :2].copy().view(np.float16)[..., 0].astype(np.float64)
    if qtype == "q8_0":
        qw = rb[:, :, 2:].view(np.int8).astype(np.int64)
    else:
        lo, hi = (rb[:, :, 2:] & 15).astype(np.int64) - 8, (rb[:, :, 2:] >> 4).astype(np.int64) - 8
        qw = np.concatenate([lo, hi], axis=2)
    terms = (qw * qx[None]).astype(np.float64) * (dw * dx[None])[..., None]     # [m, nb, 32]
    return terms.sum((1, 2)), np.abs(terms).sum((1, 2))


@pytest.mark.parametrize("be", BACKENDS)
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_int8_gemv_is_llama_cpps_route(qtype, be):
    """``exact=False``: Q8_0 activations and integer block products, as llama.cpp; K with a
    tail of blocks past the last whole chunk."""
    rng = np.random.default_rng(32)
    m, k = (3, 96) if be == "INTERP" else (37, 32 * (3 * mm.CHUNK + 5))
    raw = random_blocks(qtype, m, k // 32, rng)
    a = llm.QTensor(qtype, (m, k), raw)
    x = _activations(k, rng)
    got = host(llm.matmul(to_q(be, a), to(be, x), exact=False))
    ref, mag = _int8_route(qtype, raw, x)
    assert got.dtype == np.float32 and got.shape == (m,)
    assert (np.abs(got - ref) <= (k + 2) * U32 * mag + 1e-30).all()
    # it is not the exact route: the activations were rounded to 8 bits
    exact = ref_dequantize(qtype, raw).astype(np.float64) @ x.astype(np.float64)
    assert np.abs(ref - exact).max() > 1e-6 * np.abs(exact).max()


def test_int8_route_applies_to_q4_0_and_q8_0_gemv_only():
    rng = np.random.default_rng(33)
    raw = random_blocks("q4_k", 2, 1, rng)
    a = llm.QTensor("q4_k", (2, 256), raw)
    x = rng.standard_normal(256).astype(np.float32)
    np.testing.assert_array_equal(llm.matmul(a, x, exact=False), llm.matmul(a, x))
    b = rng.standard_normal((64, 3)).astype(np.float32)
    q = llm.quantize(rng.standard_normal((4, 64)).astype(np.float32), "q8_0")
    np.testing.assert_array_equal(llm.matmul(q, b, exact=False), llm.matmul(q, b))


def test_quantize_activations_errors_name_the_argument():
    with pytest.raises(ValueError, match="x"):
        llm.quantize_activations(np.zeros(33, np.float32))
    with pytest.raises(ValueError, match="x"):
        llm.quantize_activations(np.zeros(64, np.float64))
    with pytest.raises(ValueError, match="x"):
        llm.quantize_activations(np.zeros((2, 32), np.float32))


def _fma32(a, b, c):
    """float32 fma: the product is exact in float64, the sum rounded to float64 and then to
    float32 (a double rounding that can differ from one rounding only at rare halfway cases;
    none in these tests' data)."""
    return (np.float64(1) * a * b + c).astype(np.float32)


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_host_fused_gemm_sums_each_column_in_32_fma_lanes(qtype):
    """The host fused GEMM's documented order: column ``n`` in 32 partial sums (lane ``j``:
    the terms ``k % 32 == j`` in increasing ``k``, one fma each), added in order of ``j``:
    bit for bit a NumPy model (it pins the shape over the transposed ``b``)."""
    rng = np.random.default_rng(40)
    for n in (3, mm.FUSED_MAX_N):
        m, k = 5, 32 * 7
        a, _ = _weights(qtype, m, k, rng)
        bm = rng.standard_normal((k, n)).astype(np.float32)
        w = llm.dequantize(a)                   # the kernel's weights, exactly
        acc = np.zeros((m, n, 32), np.float32)
        for kk in range(k):
            acc[:, :, kk % 32] = _fma32(w[:, kk, None], bm[None, kk], acc[:, :, kk % 32])
        want = acc[:, :, 0]
        for j in range(1, 32):
            want = want + acc[:, :, j]
        got = llm.matmul(a, bm)
        assert got.dtype == np.float32 and np.array_equal(got, want), (qtype, n)


def int8_route_model(qtype, raw, x):
    """The host int8 route bit for bit in NumPy: per block eight exact int32 lanes (lane
    ``l``: weights ``4l .. 4l + 3`` times the Q8_0 activations), accumulated with one fma by
    ``d_w * d_x`` per lane and block in block order into one of two sets of lanes: within
    the whole chunks of ``mm.CHUNK`` blocks the even blocks into the first, the odd ones into
    the second; the blocks after the last whole chunk into the first. At the end lane ``l``
    of the first set plus lane ``l`` of the second, added in order of ``l``."""
    m, k = raw.shape[0], x.shape[0]
    nb = k // 32
    qx, dx = llm.quantize_activations(x)
    fmt = llm.QTYPES[qtype]
    rb = raw.reshape(m, nb, fmt.block_bytes)
    dw = rb[:, :, :2].copy().view("<f2")[..., 0].astype(np.float32)
    if qtype == "q8_0":
        qw = rb[:, :, 2:].view(np.int8).astype(np.int64)
    else:
        qw = np.concatenate([rb[:, :, 2:] & 15, rb[:, :, 2:] >> 4], axis=2).astype(np.int64) - 8
    lanes = (qw * qx.reshape(nb, 32).astype(np.int64)[None]).reshape(m, nb, 8, 4).sum(-1)   # exact
    ds = dw * dx[None]                                                # float32 products
    acc = np.zeros((2, m, 8), np.float32)
    full = nb - nb % mm.CHUNK
    for b in range(nb):
        s = b % 2 if b < full else 0
        acc[s] = _fma32(lanes[:, b].astype(np.float32), ds[:, b, None], acc[s])
    tot = np.zeros(m, np.float32)
    for j in range(8):
        tot = tot + (acc[0, :, j] + acc[1, :, j])
    return tot


# rows: one, odd, many, each of 1..8; blocks: one, whole chunks of 8, chunks and a tail (K not a
# multiple of 256), only a tail, an odd count of whole chunks and a tail
INT8_SHAPES = [(1, 1), (7, 2 * 8 + 3), (6, 8), (301, 5 * 8 + 3), (2, 11), (3, 9), (4, 1), (5, 16),
               (8, 11)]


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
@pytest.mark.parametrize("m, nb", INT8_SHAPES)
def test_host_int8_route_sums_eight_exact_lanes_per_block(qtype, m, nb):
    """The host int8 route (``tk.dot_i8`` / ``tk.dot_u4i8`` with ``zero=8``) is bit for bit
    :func:`int8_route_model`."""
    rng = np.random.default_rng(41 + nb)
    raw = random_blocks(qtype, m, nb, rng)
    x = _activations(32 * nb, rng)
    got = llm.matmul(llm.QTensor(qtype, (m, 32 * nb), raw), x, exact=False)
    assert np.array_equal(got, int8_route_model(qtype, raw, x))


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_host_gemv_scales_take_every_finite_float16(qtype):
    """The host GEMVs read each chunk's scales with ``tk.load_halves`` (F16C on the CPU): on
    rows whose block scales are every finite float16 pattern once (subnormals, both zeros,
    the largest), the exact route is bit for bit :func:`exact_route_model` and the int8
    route bit for bit :func:`int8_route_model` (K = 1024 blocks, whole chunks)."""
    rng = np.random.default_rng(44)
    pats = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    pats = rng.permutation(pats[(pats & 0x7C00) != 0x7C00])           # 63488 finite halves
    m, nb = 62, 1024
    raw = random_blocks(qtype, m, nb, rng).reshape(m, nb, -1)
    raw[:, :, 0] = (pats & 255).reshape(m, nb)
    raw[:, :, 1] = (pats >> 8).reshape(m, nb)
    raw = raw.reshape(m, -1)
    a = llm.QTensor(qtype, (m, 32 * nb), raw)
    x = _activations(32 * nb, rng)
    assert np.array_equal(llm.matmul(a, x), exact_route_model(qtype, raw, x))
    assert np.array_equal(llm.matmul(a, x, exact=False), int8_route_model(qtype, raw, x))


_LEVEL_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {here!r})
import test_llm_matmul as t
res = []
for qtype in ("q4_0", "q8_0"):
    for m, nb in t.INT8_SHAPES:
        rng = np.random.default_rng(m + nb)
        raw = t.random_blocks(qtype, m, nb, rng)
        x = t._activations(32 * nb, rng)
        got = t.llm.matmul(t.llm.QTensor(qtype, (m, 32 * nb), raw), x, exact=False)
        res.append(bool(np.array_equal(got, t.int8_route_model(qtype, raw, x))))
print("RESULT", all(res), res)
"""


@pytest.mark.parametrize("level", ["c", "avx2", "vnni"])
def test_host_int8_route_is_the_same_at_every_cpu_level(level, tmp_path):
    """``TK_CPU_BYTEDOT`` (read when the kernel is compiled; a new process each): the int8
    route's bits are the model's at the scalar C, AVX2 and VNNI levels (VNNI where the CPU
    has it; the cap is then the CPU's level)."""
    out = run_at_bytedot_level(_LEVEL_SCRIPT, level, tmp_path)
    assert "RESULT True" in out, out


def test_strided_inputs_are_taken_as_contiguous_copies():
    """A transposed or sliced a / b (NumPy, torch, tk.Array) is multiplied like its contiguous
    copy (it was refused with 'must be C-contiguous'); quantize_activations likewise; an out
    that is not contiguous is still refused (a copy would not receive the result)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    b = rng.standard_normal((9, 7)).astype(np.float32)
    ref = a.T.astype(np.float64) @ b.T.astype(np.float64)
    got = llm.matmul(a.T, b.T)
    assert isinstance(got, np.ndarray)
    _check(got, a.T.astype(np.float64), b.T, 7)
    _check(llm.matmul(a.T, b.T[:, 2]), a.T.astype(np.float64), b.T[:, 2], 7)      # GEMV, strided b
    np.testing.assert_allclose(np.asarray(llm.matmul(tk.asarray(a.T), tk.asarray(b.T))), ref, rtol=1e-5, atol=1e-5)
    torch = pytest.importorskip("torch")
    t = llm.matmul(torch.from_numpy(a).t(), torch.from_numpy(b).t())
    assert isinstance(t, torch.Tensor)
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-5)
    x = rng.standard_normal(64).astype(np.float32)
    for u, v in zip(llm.quantize_activations(x), llm.quantize_activations(np.repeat(x, 2)[::2])):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    with pytest.raises(ValueError, match="argument 'out': expected a C-contiguous array"):
        llm.matmul(a.T, b.T, out=np.zeros((9, 5), np.float32).T)
