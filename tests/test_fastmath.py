"""``@tk.kernel(fastmath=True)``: float reassociation and contraction for that kernel only.

Results agree with NumPy within a tolerance on every backend; default kernels stay bit-exact;
integer arithmetic is unchanged; the flag is part of the generated source and of the caches."""
import numpy as np
import pytest

import tinykernels as tk


def _backends():
    out = [tk.CPU(), tk.Interpreter()]
    avail = tk.backends()
    for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
        if avail.get(name, (False,))[0]:
            out.append(tk.backend(dev))
    return out


BACKENDS = _backends()


def _on(b, x):
    return x.copy() if b.name in ("CPU", "Interpreter") else tk.asarray(x, backend=b)


def _host(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _rowsum(X: tk.Const, out, n: tk.constexpr):
    i = tk.index()
    acc = X[i, 0] * 0
    for j in range(n):
        acc += X[i, j] * X[i, j] + 1
    out[i] = acc


rowsum_fast = tk.kernel(fastmath=True)(_rowsum)
rowsum_exact = tk.kernel(_rowsum)


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_fastmath_matches_numpy_within_tolerance(b):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((37, 300)).astype(np.float32)
    out = _on(b, np.zeros(37, np.float32))
    rowsum_fast(b)(_on(b, X), out, 300, ndrange=37)
    tk.synchronize(b)
    want = (X.astype(np.float64) ** 2 + 1).sum(1)
    np.testing.assert_allclose(_host(out), want, rtol=1e-5)


def test_default_kernel_stays_bit_exact_next_to_fastmath_one():
    """The same Python function as an exact and a fastmath kernel: separate specializations,
    and the exact one rounds as a sequential float32 loop does (no reassociation, no FMA)."""
    rng = np.random.default_rng(2)
    X = (rng.standard_normal((16, 257)) * 1e3).astype(np.float32)
    o_fast, o_exact = np.zeros(16, np.float32), np.zeros(16, np.float32)
    rowsum_fast.launch(X, o_fast, 257, ndrange=16)
    rowsum_exact.launch(X, o_exact, 257, ndrange=16)
    want = np.zeros(16, np.float32)
    for j in range(257):
        want = want + (X[:, j] * X[:, j] + np.float32(1))
    assert np.array_equal(o_exact, want)
    np.testing.assert_allclose(o_fast, want, rtol=1e-4)


def test_fastmath_is_in_the_source_and_the_cache_key():
    X = np.zeros((4, 8), np.float32)
    o = np.zeros(4, np.float32)
    fast = rowsum_fast.source("CPU", X, o, 8, ndrange=4)
    exact = rowsum_exact.source("CPU", X, o, 8, ndrange=4)
    assert "/* fastmath:" in fast and "/* fastmath:" not in exact
    assert fast != exact
    cu = rowsum_fast.source("CUDA", X, o, 8, ndrange=4)
    assert "--fmad=true" in cu


@pytest.mark.skipif("CL" not in tk.backends_available(), reason="OpenCL unavailable (source('CL') still opens the device)")
def test_fastmath_turns_opencl_contraction_on():
    X = np.zeros((4, 8), np.float32)
    o = np.zeros(4, np.float32)
    assert "#pragma OPENCL FP_CONTRACT ON" in rowsum_fast.source("CL", X, o, 8, ndrange=4)
    exact = rowsum_exact.source("CL", X, o, 8, ndrange=4)
    assert "FP_CONTRACT ON" not in exact and "#pragma OPENCL FP_CONTRACT OFF" in exact


@tk.kernel(fastmath=True)
def int_ops(out, a: tk.Const, s):
    i = tk.index()
    acc = a[i]
    for k in range(5):
        acc = acc * s + a[i] // 3 - (a[i] % 7)      # wrapping int32 arithmetic, Python // and %
    out[i] = acc


def test_fastmath_leaves_integer_semantics_alone():
    a = np.arange(-500, 500, dtype=np.int32) * 1234567
    out = np.zeros_like(a)
    int_ops.launch(out, a, np.int32(40503), ndrange=a.size)
    want = a.copy()
    with np.errstate(over="ignore"):
        for _ in range(5):
            want = want * np.int32(40503) + a // 3 - (a % 7)
    assert np.array_equal(out, want)


@tk.kernel(fastmath=True)
def keeps_inf_nan(out, a: tk.Const):
    i = tk.index()
    x = a[i]
    out[i] = 1.0 if x != x else (2.0 if x == math.inf else 0.0)


import math  # noqa: E402  (used inside the kernel above)


def test_fastmath_does_not_assume_finite_values():
    a = np.array([np.nan, np.inf, 1.0, -np.inf], np.float64)
    out = np.zeros(4)
    keeps_inf_nan.launch(out, a, ndrange=4)
    assert out.tolist() == [1.0, 2.0, 0.0, 0.0]


# ----------------------------------------------------------------------------- vector math functions

@tk.kernel(fastmath=True)
def math_fast(o_exp, o_log, o_sin, o_tanh, x: tk.Const):
    i = tk.index()
    o_exp[i] = math.exp(x[i])
    o_log[i] = math.log(x[i])
    o_sin[i] = math.sin(x[i])
    o_tanh[i] = math.tanh(x[i])


@tk.kernel
def math_exact(o_exp, x: tk.Const):
    i = tk.index()
    o_exp[i] = math.exp(x[i])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """float32 units in the last place between ``got`` and ``want`` (NaN == NaN, 0 == -0)."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    d = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    d[same] = 0
    return d


def test_fastmath_math_functions_vectorize_within_a_few_ulp():
    """A fastmath kernel's exp/log/sin/... may use the C library's SIMD variants (glibc's
    libmvec: at most 4 ulp from the correctly rounded result); inf, NaN, overflow, underflow
    to subnormals and zero keep their meaning. A default kernel's float32 exp is the correctly
    rounded tk_exp_f32 (tests/test_cpu_exp.py)."""
    rng = np.random.default_rng(3)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.7, 89.0, -87.5, -103.0, -104.0,
               1e30, -1e30, 1.0, -1.0, 100.0]
    x = np.concatenate([rng.standard_normal(4000) * 4, rng.uniform(0, 1e4, 1000), special]).astype(np.float32)
    outs = [np.zeros_like(x) for _ in range(4)]
    math_fast.launch(*outs, x, ndrange=x.size)
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        wants = [f(x64).astype(np.float32) for f in (np.exp, np.log, np.sin, np.tanh)]
    for name, got, want in zip(("exp", "log", "sin", "tanh"), outs, wants):
        u = _ulps(got, want)
        assert u.max() <= 4, (name, x[u.argmax()], got[u.argmax()], want[u.argmax()])
    fast = math_fast.source("CPU", *outs, x, ndrange=x.size)
    exact = math_exact.source("CPU", outs[0], x, ndrange=x.size)
    assert "#define __FAST_MATH__" in fast and "__FAST_MATH__" not in exact
    o = np.zeros_like(x)
    math_exact.launch(o, x, ndrange=x.size)      # the default kernel: tk_exp_f32, correctly rounded
    assert _ulps(o, wants[0]).max() <= 1


def test_fastmath_exp_compiles_to_a_simd_call_with_gcc_and_glibc():
    """Where the toolchain is GCC on glibc x86-64, the fastmath kernel's loop calls libmvec's
    vector ``expf`` (``_ZGV...v_expf``); the default kernel only the scalar one."""
    import platform
    import subprocess
    from tinykernels.runtime.compiler import compile_library, toolchain
    from tinykernels.codegen.c import FASTMATH_CFLAGS
    tc = toolchain()
    if platform.machine() != "x86_64" or platform.libc_ver()[0] != "glibc" or "clang" in tc.version.lower():
        pytest.skip("libmvec vector calls are checked with GCC on glibc x86-64")
    x = np.zeros(4096, np.float32)
    o = [np.zeros_like(x) for _ in range(4)]
    syms = {}
    for tag, src, flags in (("fast", math_fast.source("CPU", *o, x, ndrange=x.size), FASTMATH_CFLAGS),
                            ("exact", math_exact.source("CPU", o[0], x, ndrange=x.size), ())):
        lib = compile_library(src, "tk_test_" + tag, flags)
        syms[tag] = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert "v_expf" in syms["fast"] and "_ZGV" in syms["fast"]
    assert "_ZGV" not in syms["exact"]
