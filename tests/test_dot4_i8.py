"""``tk.dot4_i8(a, b, acc)``: the packed int8 dot product (dp4a) on every backend.

Checked bit for bit against NumPy (the words viewed as int8, products summed in int64 and
wrapped to int32) with sign and overflow edge cases; the CUDA source compiles with NVRTC and
uses ``__dp4a``; HIP and Metal sources compile where their compilers are installed; the JAX
raise path; folding of constant arguments; autodiff passes over it (an integer); bad
arguments are a CompileError at the user's line."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import dtypes as D

from llm_helpers import backends, get


@tk.kernel
def dot4(out, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    out[i] = tk.dot4_i8(a[i], b[i], c[i])


@tk.kernel
def dot4_u32(out, a: tk.Const, b: tk.Const):
    i = tk.index()
    out[i] = tk.dot4_i8(a[i], b[i], 0)


@tk.kernel
def scaled(y, x: tk.Const, w: tk.Const):
    """A float output that depends on an int8 dot product (autodiff sees through the ints)."""
    i = tk.index()
    y[i] = x[i] * tk.float64(tk.dot4_i8(w[i], w[i], 1))


EDGE = np.array([-2**31, 2**31 - 1, -1, 0, 0x7F7F7F7F, 0x80808080 - 2**32, 0x01FF807F, 1], np.int64)


def _inputs(n=777):
    r = np.random.default_rng(0)
    a, b, c = (r.integers(-2**31, 2**31, n).astype(np.int32) for _ in range(3))
    k = len(EDGE)
    a[:k] = EDGE.astype(np.int32)
    b[:k] = EDGE.astype(np.int32)
    b[k:2 * k] = EDGE[::-1].astype(np.int32)
    a[k:2 * k] = EDGE.astype(np.int32)
    c[:k] = [2**31 - 1, 2**31 - 1, -2**31, -2**31, 2**31 - 1, -2**31, 0, -1]   # acc overflows both ways
    return a, b, c


def _ref(a, b, c):
    p = (a.view(np.int8).reshape(-1, 4).astype(np.int64) * b.view(np.int8).reshape(-1, 4).astype(np.int64)).sum(1)
    return ((p + c.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def test_python_value_matches_numpy():
    a, b, c = _inputs(200)
    got = np.array([D.dot4_i8(int(x), int(y), int(z)) for x, y, z in zip(a, b, c)], np.int32)
    np.testing.assert_array_equal(got, _ref(a, b, c))
    assert D.dot4_i8(0x80808080, 0x80808080, 0) == 4 * 128 * 128      # -128 * -128, four times
    assert D.dot4_i8(0x7F7F7F7F, 0x80808080, 0) == -4 * 127 * 128
    assert D.dot4_i8(0x01010101, 0x01010101, 2**31 - 1) == -2**31 + 3      # wraps


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
def test_every_backend_against_numpy(name):
    be = tk.backend(name)
    a, b, c = _inputs()
    out = tk.zeros(a.size, tk.int32, backend=be)
    dot4(be)(out, *(tk.asarray(x, backend=be) for x in (a, b, c)), ndrange=a.size)
    np.testing.assert_array_equal(get(out), _ref(a, b, c))
    # uint32 words (the bits are the same) and a Python-int accumulator
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    out2 = tk.zeros(a.size, tk.int32, backend=be)
    dot4_u32(be)(out2, tk.asarray(ua, backend=be), tk.asarray(ub, backend=be), ndrange=a.size)
    np.testing.assert_array_equal(get(out2), _ref(a, b, np.zeros_like(c)))


def test_constant_arguments_fold_exactly():
    @tk.kernel
    def k(out):
        out[0] = tk.dot4_i8(0x80808080, -1, 2**31 - 1)      # 4 * 128 + max: wraps
    out = np.zeros(1, np.int32)
    k(tk.CPU())(out, ndrange=1)
    assert out[0] == D.dot4_i8(0x80808080, -1, 2**31 - 1) == -2**31 + 511
    assert "tk_dot4_i8(" not in k.source(tk.CPU(), out, ndrange=1).split("tk_kernel")[-1]


def test_jax_raise_matches_numpy():
    jax = pytest.importorskip("jax")
    import tinykernels.jax as tkjax
    a, b, c = _inputs()
    g = tkjax.raise_kernel(dot4, outputs=["out"])
    got = g(jax.numpy.zeros(a.size, np.int32), a, b, c)
    np.testing.assert_array_equal(np.asarray(got), _ref(a, b, c))


def test_cuda_source_uses_dp4a_and_compiles():
    from tinykernels.runtime import cuda as rt
    a = np.zeros(8, np.int32)
    src = rt.cuda_source(dot4, a, a, a, a, ndrange=8)
    assert "tk_dot4_i8(" in src and "__dp4a(a, b, c)" in src
    ok, why = rt.nvrtc_available()
    if not ok:
        pytest.skip(f"NVRTC unavailable: {why}")
    for arch in ("sm_80", "sm_90"):
        assert rt.compile_cuda(src, arch, "k", cache=False)[:4] == b"\x7fELF"
    ptx = rt.compile_cuda(src, "compute_80", "k", cache=False)
    assert b"dp4a.s32.s32" in ptx


def test_opencl_hip_metal_and_wgsl_sources():
    a = np.zeros(8, np.int32)
    avail = set(tk.backends_available())
    if "WEBGPU" in avail:
        assert "dot4I8Packed(" in dot4.source(tk.backend("WEBGPU"), a, a, a, a, ndrange=8)
    if "CL" in avail:
        assert "tk_dot4_i8(" in dot4.source(tk.backend("CL"), a, a, a, a, ndrange=8)
    from tinykernels.runtime import hipclang, metal, rocm
    hip = rocm.hip_source(dot4, a, a, a, a, ndrange=8)
    assert "tk_dot4_i8(" in hip
    if hipclang.hip_clang_available()[0]:
        hipclang.compile_hip_clang(hip, "gfx90a", "k")
    msl = metal.metal_source(dot4, a, a, a, a, ndrange=8)
    assert "tk_dot4_i8(" in msl
    from tinykernels.testing.metal_check import check_msl, find_clang
    if find_clang() is not None:
        check_msl(msl)


def test_autodiff_treats_it_as_an_integer():
    x = np.random.default_rng(1).standard_normal(16)
    w = np.arange(16, dtype=np.int32) * 0x01020304
    wv = np.array([D.dot4_i8(int(v), int(v), 1) for v in w], np.float64)
    dx = np.zeros(16)
    tk.autodiff(tk.Reverse, lambda y_, x_, w_: scaled(tk.CPU())(y_, x_, w_, ndrange=16),
                tk.Duplicated(np.zeros(16), np.ones(16)), tk.Duplicated(x.copy(), dx), tk.Const(w))
    np.testing.assert_allclose(dx, wv)


@pytest.mark.parametrize("arg, what", [("tk.float32(x[i])", "float32"), ("tk.int64(x[i])", "int64"),
                                       ("tk.int8(x[i])", "int8"), ("x[i] > 0", "bool")])
def test_bad_arguments_are_compile_errors_at_the_line(arg, what):
    ns = {"tk": tk}
    src = ("def k(out, x: tk.Const):\n"
           "    i = tk.index()\n"
           f"    out[i] = tk.dot4_i8({arg}, 1, 0)\n")
    import linecache
    fname = f"<dot4-{what}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), ns)
    k = tk.kernel(ns["k"])
    with pytest.raises(tk.CompileError, match=f"32-bit integers.*a is {what}") as e:
        k(tk.CPU())(np.zeros(4, np.int32), np.ones(4, np.int32), ndrange=4)
    assert ":3" in str(e.value)


@tk.kernel
def bytes_dot(out, data: tk.Const, xq: tk.Const):
    """Signed bytes converted from unsigned ones, times int8: GCC 12 with -march=native on an
    AVX-512 VNNI CPU compiled this loop to vpdpbusd (an unsigned first operand)."""
    r = tk.index()
    s = tk.int32(0)
    for j in range(data.shape[1]):
        s += tk.int32(tk.int8(data[r, j])) * tk.int32(xq[j])
    out[r] = s


@pytest.mark.parametrize("n", [32, 64, 100])
def test_int8_dot_product_loop_from_unsigned_bytes_on_the_cpu(n):
    r = np.random.default_rng(n)
    d = r.integers(0, 256, (5, n)).astype(np.uint8)
    xq = r.integers(-128, 128, n).astype(np.int8)
    out = np.zeros(5, np.int32)
    bytes_dot(tk.CPU())(out, d, xq, ndrange=5)
    np.testing.assert_array_equal(out, d.view(np.int8).astype(np.int64) @ xq.astype(np.int64))
