"""tinykernels.llm.matmul: quantized (q4_0, q8_0, q4_k) and float32 GEMV/GEMM against NumPy
float64 of the dequantized weights, on CPU, INTERP (small), CL and WEBGPU; out=, errors, and
every kernel's CUDA source through NVRTC."""
import importlib

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from tinykernels.runtime import cuda as rt

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
    """On the CPU the fused GEMV accumulates the same products as dequantize() + float GEMV
    in the same order: bit-identical results."""
    rng = np.random.default_rng(13)
    for qtype in QTYPES:
        a, _ = _weights(qtype, 9, 512, rng)
        x = rng.standard_normal(512).astype(np.float32)
        assert np.array_equal(llm.matmul(a, x), llm.matmul(llm.dequantize(a), x)), qtype


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
    with pytest.raises(ValueError, match="'b'.*contiguous"):
        llm.matmul(np.ones((4, 64), np.float32), np.ones((64, 6), np.float32)[:, ::2])


@pytest.mark.parametrize("be", [p for p in BACKENDS if p.id == "CL"])
def test_arrays_on_different_backends_are_an_error(be):
    a, _ = _weights("q8_0", 4, 64, np.random.default_rng(16))
    with pytest.raises(ValueError, match="'b'.*is on"):
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
    for q, kern in mm._FUSED_GEMM.items():
        cases.append((kern, (np.zeros((4, 3), f32), data[q], bm), (4, 3), None))
        cases.append((mm._gemm_rows_q, (np.zeros((4, 3), f32), data[q], bm, q == "q8_0"), 4, None))
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
        mm._gemv_rows_q4_0(tk.CPU(threads=threads))(out, a.data, x, ndrange=300)
        _check(out, w64, x, 256)
