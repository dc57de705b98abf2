"""tinykernels.llm layout: argmax, gather, transpose, repeat, against NumPy (exact)."""
import importlib

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from llm_helpers import backends, dev, get, put

rng = np.random.default_rng(13)


@pytest.mark.parametrize("be", backends())
def test_argmax_ties_and_nan_as_numpy(be):
    b = dev(be)
    n = 300 if be == "INTERP" else 5000
    for dt in ((np.float32,) if be == "WEBGPU" else (np.float32, np.float16)):
        x = rng.standard_normal(n).astype(dt)
        x[[17, 200, n - 1]] = 50
        r = llm.argmax(put(x, b))
        assert get(r).shape == () and get(r).dtype == np.int32 and int(get(r)) == np.argmax(x) == 17
        x[[250, 100]] = np.nan
        assert int(get(llm.argmax(put(x, b)))) == np.argmax(x) == 100
        assert int(get(llm.argmax(put(np.full(7, -np.inf, dt), b)))) == 0


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
def test_host_argmax_lanes_match_numpy(be):
    """The host shape (lanes of running maxima): ties across lanes and in the tail, -inf,
    NaN first or last, all NaN, lengths around the lane count."""
    b = dev(be)
    r = np.random.default_rng(44)
    cases = []
    for n in (1, 5, 16, 17, 31, 33, 100):
        x = r.integers(-3, 3, n).astype(np.float32)          # many ties
        cases += [x, np.full(n, -np.inf, np.float32), np.full(n, np.nan, np.float32)]
        y = x.copy()
        y[n // 2] = np.nan
        cases.append(y)
        z = np.full(n, -np.inf, np.float32)
        z[-1] = -1e30
        cases.append(z)
        w = np.full(n, np.nan, np.float32)
        w[-1] = 1.0
        cases.append(w)
    for x in cases:
        assert int(get(llm.argmax(put(x, b)))) == np.argmax(x), x


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
def test_host_argmax_in_chunks_matches_numpy(be, monkeypatch):
    """Arrays longer than ``ARGMAX_CHUNK`` run one work item per chunk (on all threads), then
    combine the chunks in order: ties across chunks (the first wins), the maximum or a NaN
    in the last, partial chunk, all -inf, all NaN."""
    layout = importlib.import_module("tinykernels.llm.layout")
    monkeypatch.setattr(layout, "ARGMAX_CHUNK", 48)
    b = dev(be)
    r = np.random.default_rng(45)
    for n in (49, 96, 97, 300):
        x = r.integers(-3, 3, n).astype(np.float32)
        cases = [x, np.full(n, -np.inf, np.float32), np.full(n, np.nan, np.float32)]
        y = x.copy()
        y[-1] = 9
        cases.append(y)
        z = x.copy()
        z[-1] = np.nan
        z[n // 3] = np.nan
        cases.append(z)
        w = np.full(n, -np.inf, np.float32)
        w[[50 % n, n - 1]] = -1e30
        cases.append(w)
        for x in cases:
            assert int(get(llm.argmax(put(x, b)))) == np.argmax(x), (n, x)


@pytest.mark.parametrize("be", backends())
def test_gather_transpose_repeat(be):
    b = dev(be)
    t = rng.standard_normal((50, 9)).astype(np.float32)
    for idt in ((np.int32,) if be == "WEBGPU" else (np.int32, np.int64)):
        idx = rng.integers(0, 50, 13).astype(idt)
        np.testing.assert_array_equal(get(llm.gather(put(t, b), put(idx, b))), t[idx])
    bad = np.array([1, 50, -1], np.int32)
    np.testing.assert_array_equal(get(llm.gather(put(t, b), put(bad, b))), np.stack([t[1], 0 * t[0], 0 * t[0]]))
    for shape in ((37, 21), (16, 16), (1, 5)):
        m = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(get(llm.transpose(put(m, b))), m.T)
    m4 = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for axes in ((3, 2, 1, 0), (0, 2, 1, 3), (1, 3, 0, 2)):
        np.testing.assert_array_equal(get(llm.transpose(put(m4, b), axes)), m4.transpose(axes))
    m3 = m4[0]
    np.testing.assert_array_equal(get(llm.transpose(put(m3, b))), m3.T)
    for ax in (0, 1, 2, -1):
        np.testing.assert_array_equal(get(llm.repeat(put(m3, b), 2, ax)), np.repeat(m3, 2, ax))
    v = rng.standard_normal(6).astype(np.float32)
    np.testing.assert_array_equal(get(llm.repeat(put(v, b), 3)), np.repeat(v, 3))


def test_gather_out_of_range_is_index_error_in_debug_mode():
    b = tk.CPU(debug=True)
    with pytest.raises(IndexError):
        llm.gather(tk.asarray(np.zeros((4, 3), np.float32), backend=b), tk.asarray(np.array([4], np.int32), backend=b))
        tk.synchronize(b)


def test_layout_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"'x': expected a 1-D array, got shape \(2, 2\)"):
        llm.argmax(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="'indices'.*float32"):
        llm.gather(np.zeros((3, 2), np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="'axes'"):
        llm.transpose(np.zeros((2, 3), np.float32), (0, 0))
    with pytest.raises(ValueError, match="'repeats'"):
        llm.repeat(np.zeros(3, np.float32), -1)


def _at(shape, dtype, offset):
    """A zeroed array of ``shape`` starting ``offset`` elements after a 64-byte boundary."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    buf = np.zeros(n * dtype.itemsize + 64 + offset * dtype.itemsize, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset * dtype.itemsize
    return buf[start:start + n * dtype.itemsize].view(dtype).reshape(shape)


_CPU_TRANSPOSE_CHECK = """
import numpy as np
from tinykernels import llm
from tinykernels.llm import layout as L
from test_llm_layout import _at
rng = np.random.default_rng(7)
for R, C in [(1, 1), (3, 5), (16, 16), (17, 33), (64, 48), (100, 37), (31, 16), (16, 31), (257, 130), (128, 256)]:
    for dt in (np.float32, np.float64, np.float16, np.int8):
        x = (rng.standard_normal((R, C)) * 100).astype(dt)
        for off in (0, 1, 5, 15):
            out = _at((C, R), dt, off)
            assert llm.transpose(x, out=out) is out
            np.testing.assert_array_equal(out, x.T, err_msg=f"{R}x{C} {dt} offset {off}")
        np.testing.assert_array_equal(llm.transpose(x), x.T)
        xs = (rng.standard_normal((C, 2 * R)) * 100).astype(dt)[:, ::2].T     # strided x
        np.testing.assert_array_equal(llm.transpose(xs), xs.T)
print("ok")
"""


@pytest.mark.parametrize("stream", ["1", str(1 << 62)])
def test_cpu_transpose_line_aligned_tiles_match_numpy(stream):
    """The CPU's 2-D transpose (whole tiles shifted so their output rows start cache lines,
    which then stream; the rows before and after and the last partial column of tiles copied
    tile by tile) equals NumPy for partial tiles, non-square and tiny shapes, 1- to 8-byte
    dtypes, outputs at every offset into a line and strided inputs; with streaming forced
    on and off (``TK_CPU_STREAM_BYTES`` is read once per kernel and process: a subprocess)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    here = Path(__file__).resolve().parent
    env = dict(os.environ, TK_CPU_STREAM_BYTES=stream,
               PYTHONPATH=os.pathsep.join([str(here), str(here.parent / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _CPU_TRANSPOSE_CHECK], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_cpu_transpose_tiles_start_cache_lines():
    """``_line_shift`` picks the first input row whose output column starts a 64-byte line;
    ``_transpose_lines`` streams such rows (whole lines, all lanes running)."""
    from tinykernels.llm import layout as L
    for dt, per_line in ((np.float32, 16), (np.float64, 8)):
        for off in range(per_line):
            out = _at((64, 128), dt, off)
            r0 = L._line_shift(out, np.dtype(dt), 128)
            assert r0 == (per_line - off) % per_line and out[0, r0:].ctypes.data % 64 == 0
    assert L._line_shift(_at((64, 100), np.float32, 3), np.dtype(np.float32), 100) == 0   # rows not whole lines
    x = np.zeros((64, 64), np.float32)
    src = L._transpose_lines.source("CPU", x, x, 3, ndrange=(48, 64), workgroupsize=(16, 16))
    assert "tk_stream_lines((char *)tk_out0, (const char *)tk_stage0, 1);" in src


@pytest.mark.parametrize("idt", [np.int32, np.int64])
def test_gather_large_outputs_take_the_streamed_copy(monkeypatch, idt):
    """Outputs from ``COPY_MIN_BYTES`` on the CPU: a plain copy kernel (streamed from the
    table) and, when not in debug mode, a second pass zeroing the rows of indices outside
    the table."""
    from tinykernels.llm import layout
    monkeypatch.setattr(layout, "COPY_MIN_BYTES", 1)
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", "1")
    rng = np.random.default_rng(7)
    t = rng.standard_normal((50, 333)).astype(np.float32)
    idx = rng.integers(0, 50, 41).astype(idt)
    idx[[0, 7, 40]] = [-1, 50, np.iinfo(idt).max]
    got = llm.gather(t, idx)
    ref = t[np.clip(idx, 0, 49)]
    ref[[0, 7, 40]] = 0
    np.testing.assert_array_equal(got, ref)
    src = layout._gather_copy.source("CPU", got, t, idx, True, ndrange=got.shape)
    assert "tk_src0 = &a_table[" in src
    with pytest.raises(IndexError):
        llm.gather(tk.asarray(t, backend=tk.CPU(debug=True)), tk.asarray(idx, backend=tk.CPU(debug=True)))
