"""``tk.load_halves``: a run of float16 values stored little-endian in a byte array (at a byte
stride, e.g. the scales of GGUF blocks), decoded exactly to float32, on every backend.

Checked bit for bit against NumPy's float16 -> float32 conversion on all 65536 patterns
(subnormals, both zeros, infinities, quiet and signaling NaNs with their payloads) on the
compiled backends, on a spread of them in the interpreter; the CPU's F16C path (eight at a
time) and its scalar remainder (n not a multiple of 8), 1-D and 2-D byte arrays, int8 and
uint8; debug kernels run the reference loop (bounds checked); the CUDA source compiles with
NVRTC; bad arguments are a CompileError at the user's line."""
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk

from llm_helpers import backends, compile_error_at_line, get

HERE = Path(__file__).resolve().parent


@tk.kernel
def halves_2d(out, a: tk.Const, n: tk.constexpr, stride: tk.constexpr):
    """Row ``r`` of ``a``: ``n`` halves from byte 1, ``stride`` bytes apart."""
    r = tk.index()
    p = tk.private(tk.float32, (24,))
    tk.load_halves(p, a, (r, 1), n, stride)
    for t in range(n):
        out[r, t] = p[t]


@tk.kernel
def halves_1d(out, a: tk.Const, n: tk.constexpr):
    """Item ``r``: ``n`` consecutive halves from byte ``2 n r`` of the 1-D ``a``."""
    r = tk.index()
    p = tk.private(tk.float32, (16,))
    tk.load_halves(p, a, 2 * n * r, n, stride=2)
    for t in range(n):
        out[r * n + t] = p[t]


def _patterns(rows, n, stride, rng, pats):
    """Bytes holding ``pats`` (uint16) as ``rows`` x ``n`` halves at ``stride``, from byte 1 of
    each row; the other bytes random."""
    h = np.resize(pats, rows * n).reshape(rows, n)
    a = rng.integers(0, 256, (rows, 1 + stride * n), dtype=np.uint8)
    for t in range(n):
        a[:, 1 + stride * t] = h[:, t] & 255
        a[:, 2 + stride * t] = h[:, t] >> 8
    return a, h.view(np.float16).astype(np.float32)


ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
# a spread for the interpreter: every sign/exponent with a few mantissas, signaling NaNs
SOME16 = np.unique(np.concatenate([(np.arange(64, dtype=np.uint32) << 10).astype(np.uint16) | m
                                   for m in (0, 1, 0x155, 0x1FF, 0x200, 0x3FF)]))


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("n, stride", [(8, 18), (16, 34), (11, 2), (3, 3)])
def test_every_pattern_decodes_as_numpy(name, n, stride):
    be = tk.backend(name)
    pats = SOME16 if name.startswith("INTERP") else ALL16
    rows = -(-pats.size // n)
    a, want = _patterns(rows, n, stride, np.random.default_rng(n + stride), pats)
    out = tk.zeros((rows, n), tk.float32, backend=be)
    halves_2d(be)(out, tk.asarray(a, backend=be), n, stride, ndrange=rows)
    np.testing.assert_array_equal(get(out).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("adtype", [np.uint8, np.int8])
def test_one_dimensional_bytes_at_the_default_stride(adtype):
    n, rows = 16, 64
    a, want = _patterns(1, rows * n, 2, np.random.default_rng(2), np.random.default_rng(3).permutation(ALL16))
    a = a[0, 1:].copy().view(adtype)
    out = np.zeros(rows * n, np.float32)
    halves_1d(tk.CPU())(out, a, n, ndrange=rows)
    np.testing.assert_array_equal(out.view(np.uint32), want.reshape(-1).view(np.uint32))


def test_jax_raise_path_runs_the_reference_loop():
    """``tinykernels.jax_raise`` runs the plain loop: NumPy's values, except that XLA's
    float16 conversion quiets a signaling NaN (still a NaN)."""
    pytest.importorskip("jax")
    from tinykernels import jax_raise
    n, stride = 8, 18
    a, want = _patterns(512, n, stride, np.random.default_rng(6), np.random.default_rng(7).permutation(ALL16))
    got = np.asarray(jax_raise.raise_kernel(halves_2d, ["out"], ndrange=512)(
        np.zeros((512, n), np.float32), a, n=n, stride=stride))
    nan = np.isnan(want)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert np.isnan(got[nan]).all() and nan.any()

def test_cpu_source_calls_the_f16c_helper_and_debug_runs_the_loop():
    a, want = _patterns(8, 11, 18, np.random.default_rng(5), ALL16[::97])
    out = np.zeros((8, 11), np.float32)
    src = halves_2d.source(tk.CPU(), out, a, 11, 18, ndrange=8)
    assert "tk_load_halves(&" in src and "_mm256_cvtph_ps" in src
    dbg = halves_2d.source(tk.CPU(debug=True), out, a, 11, 18, ndrange=8)
    assert "tk_load_halves(&" not in dbg and "tk_oob(" in dbg
    halves_2d(tk.CPU(debug=True))(out, a, 11, 18, ndrange=8)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


def test_cuda_source_compiles_with_nvrtc():
    from tinykernels.runtime import cuda as rt
    ok, why = rt.nvrtc_available()
    if not ok:
        pytest.skip(f"NVRTC unavailable: {why}")
    a, _ = _patterns(8, 11, 18, np.random.default_rng(5), ALL16[::97])
    src = rt.cuda_source(halves_2d, np.zeros((8, 11), np.float32), a, 11, 18, ndrange=8)
    assert rt.compile_cuda(src, "sm_80", "halves_2d", cache=False)[:4] == b"\x7fELF"


def _compile_error(body, match):
    src = ("import tinykernels as tk\n@tk.kernel\ndef bad(out, a, f, i):\n"
           f"    p = tk.private(tk.float32, (8,))\n    {body}\n")
    args = (np.zeros(8, np.float32), np.zeros(64, np.uint8), np.zeros(64, np.float32), np.zeros(8, np.int32))
    compile_error_at_line(src, HERE / "_load_halves_bad_kernel.py", args, match, 5)


@pytest.mark.parametrize("body, match", [
    ("tk.load_halves(p, f, 0, 8)", "int8 or uint8"),
    ("tk.load_halves(i, a, 0, 8)", "1-D float32"),
    ("tk.load_halves(p, a, 0, 9)", "8 elements"),
    ("tk.load_halves(p, a, 0, 0)", "positive"),
    ("tk.load_halves(p, a, 0, 4, 1)", "at least 2"),
    ("tk.load_halves(p, a, 0, i[0])", "compile-time integer"),
    ("tk.load_halves(p, a, (0, 0), 4)", "must index an element"),
    ("tk.load_halves(p, a, 0, 4, bogus=1)", "unexpected keyword"),
    ("tk.load_halves(p, a, 0)", "4 or 5 arguments"),
])
def test_bad_arguments_are_compile_errors_at_the_line(body, match):
    _compile_error(body, match)
