"""Loads and stores of the storage-only floats (float16, bfloat16, fp8) in generated kernels:
bit for bit NumPy's / ml_dtypes' conversions on every backend (every float16 pattern, float32
edge values and a large random set), and on the CPU the store rounds once (no float32 round
trip of an already rounded value) and the loops vectorize."""
import numpy as np
import pytest

import tinykernels as tk
from llm_helpers import backends, dev

rng = np.random.default_rng(1613)


def _f32_patterns(n):
    """Random float32 bit patterns, a sweep over every exponent, and the boundaries of every
    case of the narrow rounding (ties, overflow, subnormals, infinities, NaN payloads, signs)."""
    edges = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                      0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F801FFF, 0x7F802000, 0x7FA00000, 0x477FEFFF,
                      0x477FF000, 0x477FE000, 0xC77FF000, 0x38800000, 0x387FFFFF, 0x387FF000, 0x38000000,
                      0x33000000, 0x33000001, 0x32FFFFFF, 0x33800000, 0x33C00000, 0x00000001, 0x807FFFFF,
                      0x3F801000, 0x3F803000, 0x3F800FFF, 0x3F808000, 0x3F818000, 0x7F7FFFFF], np.uint32)
    return np.concatenate([edges, rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32),
                           np.arange(0, 2 ** 32, 2 ** 32 // n + 1, dtype=np.uint64).astype(np.uint32)]).view(np.float32)


@tk.kernel
def _copy(out, x: tk.Const):
    i = tk.index()
    out[i] = x[i]


def _run(be, out, x):
    b = dev(be)
    o = tk.asarray(out, backend=b)
    _copy(b)(o, tk.asarray(x, backend=b), ndrange=x.size)
    return o.numpy()


def _bits(a):
    return a.view(np.dtype(f"uint{a.dtype.itemsize * 8}"))


@pytest.mark.parametrize("be", backends())
def test_every_float16_loads_exactly(be):
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    got = _run(be, np.zeros(h.size, np.float32), h)
    np.testing.assert_array_equal(_bits(got), _bits(h.astype(np.float32)))


@pytest.mark.parametrize("be", backends())
def test_float32_stores_round_like_numpy(be):
    x = _f32_patterns(2000 if be == "INTERP" else 300_000)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(_bits(_run(be, np.zeros(x.size, np.float16), x)), _bits(want))


@pytest.mark.parametrize("be", ["CPU", "INTERP"])
def test_float64_stores_round_once(be):
    """float64 -> float16 rounds the double directly (not through float32: 1 + 2**-11 + 2**-40
    rounds up, where float32 would first make it the tie 1 + 2**-11 and round it to even)."""
    x = np.concatenate([_f32_patterns(1000).astype(np.float64),
                        np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11 - 2.0 ** -40, 65519.99999999,
                                  2.0 ** -25 + 2.0 ** -60, 2.0 ** -25, -(2.0 ** -25 + 2.0 ** -60)]),
                        rng.standard_normal(5000) * 2.0 ** rng.integers(-30, 20, 5000)])
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(_bits(_run(be, np.zeros(x.size, np.float16), x)), _bits(want))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("be", ["CPU", "INTERP"])
def test_other_narrow_stores_round_like_ml_dtypes(be, name):
    ml = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml, name))
    x = _f32_patterns(3000)
    with np.errstate(all="ignore"):
        want = x.astype(dt)
    got = _run(be, np.zeros(x.size, dt), x)
    if name == "bfloat16":       # a NaN becomes the quiet NaN of its sign (ml_dtypes keeps payloads)
        nan = np.isnan(x)
        np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
        got, want = got[~nan], want[~nan]
    np.testing.assert_array_equal(_bits(got), _bits(want))


@tk.kernel
def _copy_if(out, x: tk.Const):
    i = tk.index()
    if x[i] != 12345.0:      # a conditional store: not staged (passes/streaming.py)
        out[i] = x[i]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_cpu_store_converts_once(name):
    """A store of a float32 value into a narrow array converts it once: the frontend's cast to
    the array's type is not converted back to float32 and again to the narrow type."""
    ml = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml, name, None) or name)
    src = _copy_if.source("CPU", np.zeros(64, dt), np.zeros(64, np.float32), ndrange=64)
    store = [ln for ln in src.splitlines() if "(a_x[" in ln and "] = " in ln]
    assert len(store) == 1, store
    conv = {"float16": "tk_f32_to_f16", "bfloat16": "tk_f32_to_bf16", "float8_e4m3fn": "tk_f32_to_e4m3",
            "float8_e5m2": "tk_f32_to_e5m2"}[name]
    assert store[0].count(conv) == 1 and "_to_f32(" not in store[0], store[0]


@tk.kernel
def _halve(out, x: tk.Const):
    i = tk.index()
    out[i] = x[i] * 0.5


def test_cpu_flat_float16_stores_stage_float32_blocks():
    """A flat kernel's float16 output that the streaming pass stages: the items store float32
    values into a block buffer, which tk_f16_block rounds (F16C's vector conversion where the
    target has it; 16 at a time with AVX-512F); a kernel that only converts float32 input
    (passes/streaming.py: copy_sources) has tk_f16_block round its source directly, with no
    item loop; a float64 value keeps the one-step tk_f64_to_f16 store."""
    src = _halve.source("CPU", np.zeros(64, np.float16), np.zeros(64, np.float32), ndrange=64)
    assert "tk_f32_0[tk_pl - tk_b] = " in src and "tk_f16_block(tk_dst0, tk_f32_0," in src
    assert "__builtin_ia32_vcvtps2ph256" in src and "__builtin_ia32_vcvtps2ph512_mask" in src
    src = _copy.source("CPU", np.zeros(64, np.float16), np.zeros(64, np.float32), ndrange=64)
    assert "tk_f16_block(tk_dst0, tk_src0," in src and "float tk_f32_0[" not in src and "for (tk_idx tk_pl" not in src
    src = _copy.source("CPU", np.zeros(64, np.float16), np.zeros(64, np.float64), ndrange=64)
    assert "tk_f32_0" not in src and "tk_f64_to_f16" in src


@pytest.mark.parametrize("streaming", ["1", str(1 << 62)])
def test_cpu_staged_float16_stores_are_numpys_bits(monkeypatch, streaming):
    """The staged float16 stores (hardware conversion, NaN groups redone in software), with
    streaming stores forced on and off (each kernel defined here: TK_CPU_STREAM_BYTES is read
    at a library's first launch), from float32, float16 (signaling NaNs stay signaling) and
    int32 values, odd lengths and an output starting 2 bytes into a line."""
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", streaming)

    @tk.kernel
    def conv(out, x: tk.Const):
        i = tk.index()
        out[i] = x[i]

    @tk.kernel
    def scaled(out, x: tk.Const, s):
        i = tk.index()
        out[i] = x[i] * s                  # (a product quiets a signaling NaN, in C and NumPy)

    b = dev("CPU")
    x = _f32_patterns(100_000)
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    k = rng.integers(-(1 << 20), 1 << 20, 9001).astype(np.int32)
    for src, s in ((x, None), (x[3:], 0.75), (x[5:], 1.0), (h, None), (h[1:], 1.0), (k, None), (k, 3)):
        buf = np.zeros(src.size + 1, np.float16)
        out = buf[1:]                      # 2 bytes into the array (and into a line)
        with np.errstate(all="ignore"):
            if s is None:
                conv(b)(out, src, ndrange=src.size)
                want = src.astype(np.float16)
            else:
                scaled(b)(out, src, s, ndrange=src.size)
                want = (src.astype(np.float32) * np.float32(s)).astype(np.float16)
        np.testing.assert_array_equal(_bits(out), _bits(want))
        assert buf[0] == 0


@tk.kernel
def _f64_sources(out, s, d: tk.float64):
    out[0] = tk.float16(1.0004882812509095)
    out[1] = 1.0004882812509095
    out[2] = s
    out[3] = tk.float16(s)
    out[4] = d
    out[5] = tk.float16(d)
    out[6] = tk.float16(tk.float64(s) * 1.0)


@pytest.mark.parametrize("be", backends())
def test_float64_literals_and_scalars_round_once_to_float16(be):
    """1 + 2**-11 + 2**-40 as a literal, a Python float argument, a float64 argument or a
    float64 expression, cast or stored to float16: rounded once (up, 0x3c01) on every backend
    (the interpreter used to round it to float32 first, making it a tie it then rounded to
    even, 0x3c00). WebGPU has no float64: its floats arrive as float32."""
    b = dev(be)
    if be == "WEBGPU":
        pytest.skip("no float64 on WebGPU")
    o = tk.zeros(7, tk.float16, backend=b)
    _f64_sources(b)(o, 1.0004882812509095, 1.0004882812509095, ndrange=1)
    assert list(o.numpy().view(np.uint16)) == [0x3C01] * 7
