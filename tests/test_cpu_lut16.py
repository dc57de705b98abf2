"""Flat CPU kernels that only look up a 16-bit table at a byte, ``out[i] = tab[x[i]]``
(passes/streaming.py ``copy_sources``, kind ``"lut16"``): each block runs
``tk_lut16_block`` on its source run (AVX-512BW: the first 256 entries in eight zmm
registers, 32 bytes per step; else, for tables shorter than 256 entries or with
``TK_CPU_LUT16=c``, the plain loop), streamed or not. Results are ``tab[x]`` bit for bit for
every length, alignment and offset."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tinykernels as tk

CPU2 = tk.CPU(threads=2)


@tk.kernel
def lut(out, x: tk.Const, tab: tk.Const, off: tk.int64):
    i = tk.index()
    out[i] = tab[tk.int32(x[i + off])]


@tk.kernel
def lut_plain_index(out, x: tk.Const, tab: tk.Const):
    i = tk.index()
    b = x[i]
    out[i] = tab[b]


@tk.kernel
def lut_rows(out, x: tk.Const, tab: tk.Const):
    r, j = tk.index(tk.Global, tk.Cartesian)
    out[r, j] = tab[tk.int32(x[r, j])]


@tk.kernel
def lut_writable_table(out, x: tk.Const, tab):
    i = tk.index()
    out[i] = tab[tk.int32(x[i])]


@tk.kernel
def lut_2d_table(out, x: tk.Const, tab: tk.Const):
    i = tk.index()
    out[i] = tab[0, tk.int32(x[i])]


@pytest.fixture
def stream_always(monkeypatch):
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", "1")


def test_lookup_kernels_take_the_block_lookup():
    u8, u16 = np.zeros(100, np.uint8), np.zeros(100, np.uint16)
    for kern, args in ((lut, (u16, u8, np.zeros(256, np.uint16), 0)),
                       (lut, (np.zeros(100, np.int16), u8, np.zeros(256, np.int16), 0)),
                       (lut_plain_index, (u16, u8, np.zeros(256, np.uint16)))):
        s = kern.source("CPU", *args, ndrange=(100,))
        assert "tk_lut16_block((uint16_t *)tk_dst0" in s, kern
    s = lut_rows.source("CPU", np.zeros((3, 100), np.uint16), np.zeros((3, 100), np.uint8),
                        np.zeros(256, np.uint16), ndrange=(3, 100))
    assert "tk_lut16_block((uint16_t *)tk_dst0" in s
    # not a byte-indexed 16-bit table: the items run (no block lookup, no helper)
    for kern, args in ((lut, (u16, np.zeros(100, np.int8), np.zeros(256, np.uint16), 0)),
                       (lut, (np.zeros(100, np.uint32), u8, np.zeros(256, np.uint32), 0)),
                       (lut, (np.zeros(100, np.float16), u8, np.zeros(256, np.float16), 0)),
                       (lut, (u16, np.zeros(100, np.uint16), np.zeros(256, np.uint16), 0)),
                       (lut_writable_table, (u16, u8, np.zeros(256, np.uint16))),
                       (lut_2d_table, (u16, u8, np.zeros((1, 256), np.uint16)))):
        s = kern.source("CPU", *args, ndrange=(100,))
        assert "tk_lut16_block" not in s, (kern, args[0].dtype, args[1].dtype)
    assert "tk_lut16_block" not in lut.source(tk.CPU(debug=True), u16, u8, np.zeros(256, np.uint16), 0,
                                              ndrange=(100,))


def _check_lengths(dtype, ntab, kern_threads=CPU2):
    rng = np.random.default_rng(ntab)
    tab = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, ntab, endpoint=True).astype(dtype)
    base = rng.integers(0, min(ntab, 256), 20000).astype(np.uint8)
    for n in (1, 31, 32, 33, 63, 1000, 2047, 2048, 2049, 4096 + 17, 9001):
        for a in (0, 1):
            for off in (0, 3):
                x = base[a:a + n + off + 8]
                buf = np.zeros(n + 2, dtype)
                out = buf[a:a + n]
                lut(kern_threads)(out, x, tab, off, ndrange=(n,))
                np.testing.assert_array_equal(out, tab[x[off:off + n]])
                assert (buf[a + n:] == 0).all() and (buf[:a] == 0).all()


@pytest.mark.parametrize("dtype", [np.uint16, np.int16])
@pytest.mark.parametrize("ntab", [256, 1000, 40])
def test_lookups_are_exact(dtype, ntab):
    """Every length around the 32-byte steps, 4 KB blocks and lines, outputs and sources
    misaligned by one element, offsets; tables of 256 entries, more (only the first 256 can
    be read) and fewer (bytes below the length: the plain loop)."""
    _check_lengths(dtype, ntab)


def test_streamed_lookups_are_exact(stream_always):
    _check_lengths(np.uint16, 256)
    _check_lengths(np.int16, 256, tk.CPU(threads=1))


def test_row_lookups_and_ranges_are_exact(stream_always):
    rng = np.random.default_rng(9)
    tab = rng.integers(0, 1 << 16, 256).astype(np.uint16)
    for shape in ((3, 17), (37, 1000), (2, 40000)):
        x = rng.integers(0, 256, shape).astype(np.uint8)
        out = np.zeros(shape, np.uint16)
        lut_rows(CPU2)(out, x, tab, ndrange=shape)
        np.testing.assert_array_equal(out, tab[x])
        out[:] = 7
        lut_rows(CPU2)(out, x, tab, ndrange=(range(1, shape[0]), range(5, shape[1])))
        ref = np.full_like(out, 7)
        ref[1:, 5:] = tab[x[1:, 5:]]
        np.testing.assert_array_equal(out, ref)


def test_plain_c_route_gives_the_same_bits(tmp_path):
    """``TK_CPU_LUT16=c`` (read when the kernel's library loads) takes the plain loop; the
    same lookups, streamed and not, give the same bits (run in a fresh process)."""
    script = tmp_path / "lut_c.py"
    script.write_text(
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import test_cpu_lut16 as t\n"
        "t._check_lengths(np.uint16, 256)\n"
        "print('done')\n")
    for stream in ("1", ""):
        env = dict(os.environ, TK_CPU_LUT16="c", TK_CPU_STREAM_BYTES=stream, TK_QUIET="1")
        r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and "done" in r.stdout, r.stderr[-3000:]
