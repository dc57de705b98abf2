"""``tk.bitcast(x, dtype)``: a value's bits read as another dtype of the same size, on every
backend, against NumPy's ``view``; narrow floats round to their type first; CUDA/HIP/Metal
sources compile; the JAX raise path; constant folding; autodiff; CompileErrors at the user's
line for sizes that differ, bool and Python floats."""
import linecache

import numpy as np
import pytest

import tinykernels as tk

from llm_helpers import backends, get

ml = pytest.importorskip("ml_dtypes")


@tk.kernel
def view_as(out, x: tk.Const):
    i = tk.index()
    out[i] = tk.bitcast(x[i], out.dtype)


@tk.kernel
def round_trip(out, x: tk.Const):
    """float -> bits -> arithmetic on the bits -> float: x * 2 by adding 1 to the exponent."""
    i = tk.index()
    out[i] = tk.bitcast(tk.bitcast(x[i], tk.int32) + (1 << 23), tk.float32)


def _floats(dt, n=512):
    r = np.random.default_rng(0)
    v = (r.standard_normal(n) * np.exp(r.uniform(-20, 20, n))).astype(np.float64)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, 1e-45, 6e-8]
    v[:len(special)] = special
    with np.errstate(all="ignore"):
        return v.astype(dt)


def _bits(dt, n=512):
    r = np.random.default_rng(1)
    return r.integers(0, 256, n * np.dtype(dt).itemsize, dtype=np.uint8).view(dt)


PAIRS = [(np.float32, np.int32), (np.float32, np.uint32), (np.int32, np.float32), (np.uint32, np.float32),
         (np.float16, np.int16), (np.float16, np.uint16), (np.int16, np.float16), (np.uint16, np.float16),
         (np.float64, np.int64), (np.uint64, np.float64), (ml.bfloat16, np.uint16), (np.int16, ml.bfloat16),
         (ml.float8_e4m3fn, np.uint8), (np.int8, ml.float8_e4m3fn), (np.float16, ml.bfloat16),
         (np.int32, np.uint32)]


def _same(got, want):
    """Equal bit patterns, except that any NaN equals any NaN (payloads may change in a float
    register on the way)."""
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind == "f" or want.dtype in (ml.bfloat16, ml.float8_e4m3fn):
        with np.errstate(invalid="ignore"):
            g, w = got.astype(np.float64), want.astype(np.float64)
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan)
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}")[~nan], want.view(f"u{want.itemsize}")[~nan])
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("src, dst", PAIRS, ids=lambda t: np.dtype(t).name)
def test_every_backend_against_numpy_view(name, src, dst):
    be = tk.backend(name)
    for t in (src, dst):
        if not be.supports(np.dtype(t)):
            pytest.skip(f"{name} has no {np.dtype(t).name}")
    x = _floats(src) if np.dtype(src).kind == "f" or src in (ml.bfloat16, ml.float8_e4m3fn) else _bits(src)
    out = tk.zeros(x.size, dst, backend=be)
    view_as(be)(out, tk.asarray(x, backend=be), ndrange=x.size)
    _same(get(out), x.view(dst))


def test_float32_exponent_arithmetic_and_back():
    x = _floats(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) > 1e-30) & (np.abs(x) < 1e30)]
    for name in ("CPU", "INTERP"):
        be = tk.backend(name)
        out = tk.zeros(x.size, tk.float32, backend=be)
        round_trip(be)(out, tk.asarray(x, backend=be), ndrange=x.size)
        np.testing.assert_array_equal(get(out), x * 2)


def test_narrow_float_values_round_to_their_type_first():
    @tk.kernel
    def k(out, a: tk.Const, b: tk.Const):
        i = tk.index()
        out[i] = tk.bitcast(a[i] + b[i], tk.uint16)     # a float16 sum, computed in float32
    a = np.array([1.0, 2048.0, 0.1], np.float16)
    b = np.array([2.0 ** -11, 1.0, 0.2], np.float16)
    for name in ("CPU", "INTERP"):
        be = tk.backend(name)
        out = tk.zeros(3, tk.uint16, backend=be)
        k(be)(out, tk.asarray(a, backend=be), tk.asarray(b, backend=be), ndrange=3)
        np.testing.assert_array_equal(get(out), (a + b).view(np.uint16))


def test_constants_fold_and_python_ints_are_unsigned_words():
    @tk.kernel
    def k(out, o2):
        out[0] = tk.bitcast(0x3F800000, tk.float32)        # 1.0
        out[1] = tk.bitcast(0xC0000000, tk.float32)        # -2.0
        o2[0] = tk.bitcast(tk.float32(1.0), tk.int32)
        o2[1] = tk.bitcast(-1, tk.int32)                   # a Python int: its low 32 bits
    out, o2 = np.zeros(2, np.float32), np.zeros(2, np.int32)
    for name in ("CPU", "INTERP"):
        out[:], o2[:] = 0, 0
        k(tk.backend(name))(out, o2, ndrange=1)
        assert out.tolist() == [1.0, -2.0] and o2.tolist() == [0x3F800000, -1]
    src = k.source(tk.CPU(), out, o2, ndrange=1)
    assert "tk_bits_f32(" not in src.split("tk_chunk")[-1]


def test_jax_raise_matches_numpy():
    jax = pytest.importorskip("jax")
    import tinykernels.jax as tkjax
    for src, dst in [(np.float32, np.int32), (np.uint32, np.float32), (np.float16, np.uint16), (np.int16, np.float16)]:
        x = _floats(src) if np.dtype(src).kind == "f" else _bits(src)
        g = tkjax.raise_kernel(view_as, outputs=["out"])
        _same(np.asarray(g(jax.numpy.zeros(x.size, dst), x)), x.view(dst))


def test_gpu_sources_compile():
    from tinykernels.runtime import cuda as rt
    x, o = np.zeros(8, np.float16), np.zeros(8, np.int16)
    f, i = np.zeros(8, np.float32), np.zeros(8, np.uint32)
    srcs = [rt.cuda_source(view_as, o, x, ndrange=8), rt.cuda_source(view_as, f, i, ndrange=8),
            rt.cuda_source(view_as, np.zeros(8, np.float64), np.zeros(8, np.int64), ndrange=8)]
    ok, why = rt.nvrtc_available()
    if ok:
        for s in srcs:
            assert rt.compile_cuda(s, "sm_80", "k", cache=False)[:4] == b"\x7fELF"
    from tinykernels.runtime import hipclang, rocm
    hip = rocm.hip_source(view_as, f, i, ndrange=8)
    if hipclang.hip_clang_available()[0]:
        hipclang.compile_hip_clang(hip, "gfx90a", "k")
    from tinykernels.runtime import metal
    from tinykernels.testing.metal_check import check_msl, find_clang
    msl = metal.metal_source(view_as, f, i, ndrange=8)
    assert "as_type<float>" in msl
    if find_clang() is not None:
        check_msl(msl)


def test_autodiff_passes_over_bit_casts():
    @tk.kernel
    def k(y, x: tk.Const):
        i = tk.index()
        # x * (the float whose bits are x's bits plus one ulp): bit casts are not differentiated
        y[i] = x[i] * tk.bitcast(tk.bitcast(tk.float32(x[i]), tk.int32) + 1, tk.float32)
    x = np.linspace(1, 2, 8, dtype=np.float32)
    dx = np.zeros(8, np.float32)
    tk.autodiff(tk.Reverse, lambda y_, x_: k(tk.CPU())(y_, x_, ndrange=8),
                tk.Duplicated(np.zeros(8, np.float32), np.ones(8, np.float32)), tk.Duplicated(x.copy(), dx))
    np.testing.assert_array_equal(dx, np.nextafter(x, np.float32(np.inf)))


def _kernel_from(src, name):
    fname = f"<bitcast-{name}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"tk": tk}
    exec(compile(src, fname, "exec"), ns)
    return tk.kernel(ns["k"])


@pytest.mark.parametrize("expr, msg", [
    ("tk.bitcast(x[i], tk.int16)", "float32 \\(32 bits\\) to int16 \\(16 bits\\)"),
    ("tk.bitcast(x[i], tk.float64)", "float32 \\(32 bits\\) to float64 \\(64 bits\\)"),
    ("tk.bitcast(x[i] > 0, tk.int8)", "bool"),
    ("tk.bitcast(1.5, tk.int32)", "Python float"),
    ("tk.bitcast(x[i], 3)", "must be a dtype"),
])
def test_bad_bit_casts_are_compile_errors_at_the_line(expr, msg):
    k = _kernel_from("def k(out, x: tk.Const):\n    i = tk.index()\n"
                     f"    out[i] = tk.float32({expr})\n", msg[:8])
    with pytest.raises(tk.CompileError, match=msg) as e:
        k(tk.CPU())(np.zeros(4, np.float32), np.ones(4, np.float32), ndrange=4)
    assert ":3" in str(e.value)
