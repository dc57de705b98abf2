"""Streaming stores from inside a flat kernel's loop over a row (passes/streaming.py:
``loop_streams``; docs/cpu.md, "Streaming stores"): which loops qualify, and that their
results are bit-identical to ordinary stores for every dtype, odd row lengths, misaligned
and strided arrays, partial blocks and several threads; ``tinykernels.llm.rms_norm`` (whose
host kernel streams this way) against the kernel that keeps ordinary stores.

``TK_CPU_STREAM_BYTES`` is read by a kernel library at its first launch, so every kernel
that a test forces into streaming is defined inside that test (a new source line is a new
library), or run in a child process."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.passes.streaming import loop_streams

CPU = tk.CPU()
CPU2 = tk.CPU(threads=2)


@pytest.fixture
def stream_always(monkeypatch):
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", "1")


@tk.kernel
def row_scale(out, x: tk.Const, s):
    r = tk.index()
    acc = tk.float32(0)
    for j in range(x.shape[1]):
        acc += tk.float32(x[r, j])
    for j in range(x.shape[1]):
        out[r, j] = out.dtype(x[r, j] * s + acc)


@tk.kernel
def row_read_back(out, x: tk.Const):
    r = tk.index()
    for j in range(x.shape[1]):
        out[r, j] = x[r, j]
    for j in range(x.shape[1]):
        out[r, j] = out[r, j] * 2          # the output is read: no streaming


@tk.kernel
def row_conditional(out, x: tk.Const):
    r = tk.index()
    for j in range(x.shape[1]):
        if x[r, j] > 0:
            out[r, j] = x[r, j]            # not every iteration stores


@tk.kernel
def row_stepped(out, x: tk.Const):
    r = tk.index()
    for j in range(0, x.shape[1], 2):
        out[r, j] = x[r, j]                # a step of 2: not consecutive elements


@tk.kernel
def row_doubled_index(out, x: tk.Const):
    r = tk.index()
    for j in range(x.shape[1] // 2):
        out[r, 2 * j] = x[r, j]            # two elements further per iteration


@tk.kernel
def row_writable_input(out, x):
    r = tk.index()
    for j in range(x.shape[1]):
        out[r, j] = x[r, j]                # x is writable: it may alias out


@tk.kernel
def row_loaded_row(out, x: tk.Const, idx: tk.Const):
    r = tk.index()
    for j in range(x.shape[1]):
        t = idx[j]
        out[t, j] = x[r, j]                # the row moves with a loaded value


def _src(kernel, *args, ndrange):
    return kernel.source("CPU", *args, ndrange=ndrange)


def test_row_loop_store_streams_in_blocks():
    x = np.zeros((8, 300), np.float32)
    src = _src(row_scale, x, x, np.float32(2), ndrange=(8,))
    assert "tk_lout0 = &a_out[" in src and "tk_ldst0 = tk_lon ? tk_lstage0 : tk_lout0;" in src
    assert "if (tk_lon) tk_stream_bytes(&tk_pend_out, tk_lout0, tk_lstage0," in src
    assert "tk_pend_flush(&tk_pend_out);" in src and "tk_stream_threshold()" in src
    assert src.count("tk_ldst0[") == 1          # one copy of the loop; the first loop is unchanged


@pytest.mark.parametrize("kernel, extra", [
    (row_read_back, ()), (row_conditional, ()), (row_stepped, ()), (row_doubled_index, ()),
    (row_writable_input, ()), (row_loaded_row, (np.zeros(300, np.int64),)),
])
def test_no_row_loop_streaming_where_it_could_be_observed_or_is_not_contiguous(kernel, extra):
    x = np.zeros((8, 300), np.float32)
    assert "tk_lstage" not in _src(kernel, x, x, *extra, ndrange=(8,))


def test_debug_kernels_keep_plain_row_stores():
    x = np.zeros((8, 300), np.float32)
    assert "tk_lstage" not in row_scale.source(tk.CPU(debug=True), x, x, np.float32(2), ndrange=(8,))


def test_loop_streams_maps_the_loop_to_its_store():
    x = np.zeros((8, 300), np.float32)
    from tinykernels.codegen import c as cgen
    seen = []
    orig = cgen.loop_streams
    try:
        cgen.loop_streams = lambda k: seen.append(loop_streams(k)) or seen[-1]
        _src(row_scale, x, x, np.float32(2), ndrange=(8,))
    finally:
        cgen.loop_streams = orig
    (found,) = seen
    (picked,) = found.values()
    (store, index), = picked
    assert store.array.name == "out" and len(index) == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int32])
@pytest.mark.parametrize("R, D, offset", [(3, 1, 0), (5, 37, 1), (4, 1000, 3), (3, 4099, 0), (2, 256, 5)])
@pytest.mark.parametrize("be", [CPU, CPU2], ids=["1thread", "2threads"])
def test_streamed_row_loops_equal_numpy(dtype, R, D, offset, be, stream_always):
    @tk.kernel
    def scaled_rows(out, x: tk.Const, s):
        r = tk.index()
        for j in range(x.shape[1]):
            out[r, j] = out.dtype(x[r, j] * s)

    rng = np.random.default_rng(D)
    x = (rng.random((R, D)) * 50).astype(dtype)
    fill = np.array(7).astype(dtype)
    buf = np.full(R * D + offset + 9, fill, dtype)
    out = buf[offset:offset + R * D].reshape(R, D)         # misaligned rows, odd lengths
    scaled_rows(be)(out, x, dtype(3) if np.dtype(dtype).kind == "f" else 3, ndrange=(R,))
    tk.synchronize(be)
    np.testing.assert_array_equal(out, (x * np.array(3).astype(dtype)).astype(dtype))
    assert (buf[:offset] == fill).all() and (buf[offset + R * D:] == fill).all()


def test_streamed_row_loops_of_strided_views_and_offset_starts(stream_always):
    @tk.kernel
    def window(out, x: tk.Const, lo):
        r = tk.index()
        for j in range(lo, x.shape[1]):
            out[r, j - lo] = x[r, j] + 1

    x = np.arange(7 * 2000, dtype=np.float32).reshape(7, 2000)[::2, 1:]      # strided rows of 1999
    out = np.full((4, 1999 - 3), -1, np.float32)
    window(CPU2)(out, x, 3, ndrange=(4,))
    np.testing.assert_array_equal(out, x[:, 3:] + 1)
    outT = np.full((1996, 4), -1, np.float32).T                            # a non-contiguous output
    assert "tk_lstage" not in window.source("CPU", outT, x, 3, ndrange=(4,))
    window(CPU)(outT, x, 3, ndrange=(4,))
    np.testing.assert_array_equal(outT, x[:, 3:] + 1)


_RMS_CHECK = r"""
import importlib
import numpy as np, tinykernels as tk
from tinykernels import llm
from tinykernels.llm import norms
from tinykernels.llm import _common as C
rng = np.random.default_rng(0)
for dt in (np.float32, np.float16):
    for shape in ((3, 1), (5, 37), (4, 4099), (2, 3, 1000)):
        x = rng.standard_normal(shape).astype(dt)
        w = (1 + 0.1 * rng.standard_normal(shape[-1])).astype(dt)
        res = rng.standard_normal(shape).astype(dt)
        R = int(np.prod(shape[:-1]))
        for mode, r in ((norms.PLAIN, None), (norms.RESIDUAL_AFTER, res), (norms.RESIDUAL_FIRST, res)):
            for want in (False, True):
                ref, s_ref, sc_ref = np.empty_like(x), np.empty_like(x), np.empty(shape[:-1], np.float32)
                norms._rms_rows(tk.CPU())(ref, s_ref, sc_ref, x, x if r is None else r, w, 1e-6, mode, want,
                                          C.compute_type(x.dtype), ndrange=R)
                if mode == norms.RESIDUAL_FIRST:
                    got = llm.rms_norm(x, w, residual=r, return_scale=want)
                    assert np.array_equal(got[1], s_ref), (dt, shape, mode)
                else:
                    got = (llm.rms_norm(x, w, return_scale=want) if r is None
                           else llm.rms_norm_add(x, w, r, return_scale=want))
                y = got[0] if isinstance(got, tuple) else got
                assert np.array_equal(y, ref), (dt, shape, mode, want)
                if want:
                    assert np.array_equal(got[-1], sc_ref), (dt, shape, mode)
        xs = rng.standard_normal((9, 2 * shape[-1] + 3)).astype(dt)[::3, 1:1 + shape[-1]]   # a strided view
        assert np.array_equal(llm.rms_norm(xs, w), llm.rms_norm(np.ascontiguousarray(xs), w))
        xi = x.copy()
        assert np.array_equal(llm.rms_norm(xi, w, out=xi), llm.rms_norm(x, w))                 # in place
        ri = res.copy()
        want_y, want_s = llm.rms_norm(x, w, residual=res)
        y, s = llm.rms_norm(x, w, residual=ri, residual_out=ri)                               # residual in place
        assert np.array_equal(y, want_y) and np.array_equal(s, want_s) and s is ri
softmax = importlib.import_module("tinykernels.llm.softmax")
for dt in (np.float32, np.float16):
    for shape in ((3, 1), (5, 37), (4, 4096), (2, 3, 1000), (4, 4097)):
        x = (rng.standard_normal(shape) * 4).astype(dt)
        x.reshape(-1)[::7] = -np.inf
        for scale in (1.0, 0.125):
            y = llm.softmax(x, scale=scale)
            ref = np.empty_like(x)
            R = int(np.prod(shape[:-1]))
            softmax._softmax_lanes(tk.CPU())(ref, x, scale, shape[-1], 1, 3, True, dt == np.float32,
                                             C.compute_type(x.dtype), ndrange=R)
            assert np.array_equal(y, ref, equal_nan=True), (dt, shape, scale)
        xs = rng.standard_normal((9, 2 * shape[-1] + 3)).astype(dt)[::3, 1:1 + shape[-1]]
        assert np.array_equal(llm.softmax(xs), llm.softmax(np.ascontiguousarray(xs)))
        xi = x.copy()
        assert np.array_equal(llm.softmax(xi, out=xi), llm.softmax(x), equal_nan=True)
print("ok")
"""


@pytest.mark.parametrize("stream", ["1", str(1 << 62)])
def test_llm_rms_norm_and_softmax_streamed_equal_the_plain_kernels(stream):
    """llm.softmax's read-only host kernel (the exponentials in a private row, the output
    streamed) gives the bits of the kernel that keeps them in ``out``; llm.rms_norm's read-only host kernel (its outputs stream from the row loops; the fused
    residual add recomputes ``x + residual`` instead of reading it back) gives the bits of the
    kernel with ordinary stores, streamed or not, in every mode, with and without the scale,
    on partial blocks, odd lengths, float16, views and in place."""
    env = dict(os.environ, TK_CPU_STREAM_BYTES=stream, TK_QUIET="1", TK_NUM_THREADS="2")
    r = subprocess.run([sys.executable, "-c", _RMS_CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
