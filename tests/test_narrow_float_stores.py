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


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_cpu_store_converts_once(name):
    """A store of a float32 value into a narrow array converts it once: the frontend's cast to
    the array's type is not converted back to float32 and again to the narrow type."""
    ml = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml, name, None) or name)
    src = _copy.source("CPU", np.zeros(64, dt), np.zeros(64, np.float32), ndrange=64)
    store = [ln for ln in src.splitlines() if "(a_x[" in ln and "=" in ln]
    assert len(store) == 1, store
    conv = {"float16": "tk_f32_to_f16", "bfloat16": "tk_f32_to_bf16", "float8_e4m3fn": "tk_f32_to_e4m3",
            "float8_e5m2": "tk_f32_to_e5m2"}[name]
    assert store[0].count(conv) == 1 and "_to_f32(" not in store[0], store[0]


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
