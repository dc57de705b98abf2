"""SPEC section 10 read once more (engineer llm20): the reductions of integer, bool and
float8 arrays (``llm.argmax``: "argmax of a 1-D array: int32 0-d array, first index on ties", with no
dtype restriction; ``llm.sum`` as NumPy sums them), the fastmath route of the WebGPU kernels
(the WGSL ``fma`` builtin only where a kernel allows contraction), and llama.cpp
test-backend-ops cases not yet ported (``tests/test-backend-ops.cpp``). References are NumPy
(integer results exactly) or float64."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from tinykernels.llm import layout
from tinykernels.llm._common import np_dtype

from llm_helpers import backends, dev, get

try:
    import torch
except ImportError:                       # the minimal install: those tests skip
    torch = None

# every kind of integer (signed, unsigned; 8 to 64 bits) and bool; uint8 and int16 are in the
# chunk and torch tests (each dtype a compile per backend: CI time)
INTS = ("bool", "int8", "uint16", "int32", "uint32", "int64", "uint64")


def on(a, b):
    return a if b.name == "CPU" else tk.asarray(np.ascontiguousarray(a), backend=b)


def ints(dt, n, rng):
    """``n`` values of dtype ``dt`` over its whole range (0/1 for bool)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    i = np.iinfo(dt)
    return rng.integers(i.min, i.max, n, dtype=dt, endpoint=True)


# --- reductions of integer and bool arrays ---------------------------------------------------

@pytest.mark.parametrize("name", backends())
def test_argmax_of_integer_and_bool_arrays_is_numpys(name):
    """Every integer dtype and bool the backend holds (WebGPU: no 64-bit ones): NumPy's
    first index of the maximum, on ties, when every element is the type's smallest value
    (the running maximum's start), at the last index, and where the 64-bit values differ
    only past float32's and float64's precision. Until llm20 all of them were refused."""
    b = dev(name)
    rng = np.random.default_rng(20)
    n = 300 if name == "INTERP" else 1000
    for dt in INTS:                       # (each dtype a compile: CI time; uint8 below)
        if not b.supports(dt):
            continue
        x = ints(dt, n, rng)
        x[[7, n // 2]] = x.max()                  # a tie: the first one
        lo = np.zeros(37, dt) if dt == "bool" else np.full(37, np.iinfo(dt).min, dt)
        last = lo.copy()
        last[-1] = 1
        cases = [x, lo, last, x[::-1].copy(), x[:5].copy()]
        if dt in ("int64", "uint64"):
            big = np.array([2**53 + 1, 2**62, 2**62 + 1, 2**62 + 1, 3], dt)    # one float64 apart: none
            cases.append(big)
        for c in cases:
            g = get(llm.argmax(on(c, b)))
            assert g.shape == () and g.dtype == np.int32 and int(g) == int(np.argmax(c)), (dt, c[:8])


def test_argmax_of_a_long_integer_array_combines_chunks_in_order():
    """More than ``layout.ARGMAX_CHUNK`` elements on the CPU: one work item per chunk, then
    the chunks combined; the maximum tied across chunks gives the first chunk's index."""
    n = layout.ARGMAX_CHUNK * 2 + 123
    x = np.arange(n, dtype=np.int64) % 1000 - 500
    x[[layout.ARGMAX_CHUNK + 5, 2 * layout.ARGMAX_CHUNK + 7]] = 2**40
    assert int(llm.argmax(x)) == layout.ARGMAX_CHUNK + 5
    u = (np.arange(n) % 251).astype(np.uint8)
    assert int(llm.argmax(u)) == int(np.argmax(u)) == 250


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_argmax_and_sum_of_integer_torch_tensors():
    """CPU torch tensors of integer and bool dtypes, as NumPy arrays."""
    rng = np.random.default_rng(3)
    for dt in ("bool", "int8", "uint8", "int16", "int32", "int64"):
        x = ints(dt, 50, rng)
        assert int(llm.argmax(torch.from_numpy(x))) == int(np.argmax(x))
        s = llm.sum(torch.from_numpy(x.reshape(5, 10)), 1)
        np.testing.assert_array_equal(s.numpy(), x.reshape(5, 10).sum(1))
        assert s.numpy().dtype == x.sum().dtype


@pytest.mark.parametrize("name", backends())
def test_sum_of_integer_and_bool_arrays_is_numpys(name):
    """``llm.sum`` of integers and bool has NumPy's dtype (int64 for bool and signed
    integers, uint64 for unsigned ones) and value, wrapping modulo 2**64 as NumPy's does
    (int64 values over their whole range); on every axis. A backend without 64-bit integers
    (WebGPU) refuses them with a ValueError naming ``x`` and the dtype NumPy sums to."""
    b = dev(name)
    rng = np.random.default_rng(21)
    shape = (3, 5, 7) if name == "INTERP" else (4, 33, 9)
    for i, dt in enumerate(INTS):
        if not b.supports(dt):
            continue
        x = ints(dt, int(np.prod(shape)), rng).reshape(shape)
        if not b.supports("int64"):
            with pytest.raises(ValueError, match=rf"llm.sum: argument 'x': .*NumPy sums dtype {dt} to u?int64"):
                llm.sum(on(x, b), 0)
            continue
        ax = i % 3                                # (every axis, not for every dtype: each a compile)
        want = x.sum(ax)
        g = get(llm.sum(on(x, b), ax))
        assert g.dtype == want.dtype, (dt, ax)
        np.testing.assert_array_equal(g, want, err_msg=f"{dt} axis {ax}")


def test_sum_of_integers_writes_a_given_out_of_numpys_dtype():
    x = np.arange(24, dtype=np.int16).reshape(4, 6)
    out = np.zeros(4, np.int64)
    assert llm.sum(x, 1, out=out) is out
    np.testing.assert_array_equal(out, x.sum(1))
    with pytest.raises(ValueError, match="llm.sum: argument 'out': expected dtype int64, got dtype int16"):
        llm.sum(x, 1, out=np.zeros(4, np.int16))


@pytest.mark.parametrize("name", backends())
def test_integer_reductions_take_out_and_stream(name):
    """argmax and sum of integers with ``out=`` on a stream of the arrays' backend (after
    synchronize), as every llm function (SPEC 10)"""
    b = dev(name)
    x = (np.arange(40, dtype=np.int32) * 7919 % 101).astype(np.int16).reshape(4, 10)
    s = b.stream()
    o = tk.zeros((), np.int32, backend=b)
    assert llm.argmax(tk.asarray(x[1].copy(), backend=b), out=o, stream=s) is o
    if b.supports("int64"):
        os_ = tk.zeros(4, np.int64, backend=b)
        assert llm.sum(tk.asarray(x, backend=b), 1, out=os_, stream=s) is os_
    s.synchronize()
    assert int(o.numpy()) == int(np.argmax(x[1]))
    if b.supports("int64"):
        np.testing.assert_array_equal(os_.numpy(), x.sum(1))


@pytest.mark.parametrize("name", backends())
def test_argmax_and_sum_of_float8_arrays_are_numpys(name):
    """float8_e4m3fn and float8_e5m2 (ml_dtypes; NumPy takes them): argmax compared in float32
    (NumPy's first NaN and first maximum; -inf in e5m2), sum of the float8 dtype accumulated in
    float32 and rounded once (the inputs keep every row sum exact in float32, so the result is
    the float64 sum rounded to the dtype, bit for bit)"""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    b = dev(name)
    rng = np.random.default_rng(24)
    for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        x = (rng.standard_normal((3, 50)) * 4).astype(dt)
        x = np.where(np.abs(x.astype(F32)) < 2**-4, 0, x.astype(F32)).astype(dt)   # (exact float32 sums)
        x[1, 7] = x[1, 30] = x[1].astype(F32).max() * 2
        x[0, 11] = np.nan
        if dt == ml_dtypes.float8_e5m2:
            x[2, 9] = -np.inf
        for i in range(3):
            assert int(get(llm.argmax(on(x[i].copy(), b)))) == int(np.argmax(x[i])), (dt, i)
        got = get(llm.sum(on(x, b), 1))
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.astype(F32), x.astype(np.float64).sum(1).astype(dt).astype(F32))


def test_reductions_refuse_other_dtypes_naming_x():
    for f, fn in ((lambda a: llm.argmax(a), "argmax"), (lambda a: llm.sum(a, 0), "sum")):
        with pytest.raises(ValueError, match=rf"llm.{fn}: argument 'x': expected dtype .*int64 or uint64, "
                                             r"got dtype complex64"):
            f(np.ones(4, np.complex64))


# --- WebGPU: tk.fma in fastmath kernels, and the llm kernels that may use it ------------------

needs_webgpu = pytest.mark.skipif("WEBGPU" not in tk.backends_available(), reason="WEBGPU unavailable")


@pytest.fixture(scope="module")
def fma_kernels(tmp_path_factory):
    from gen_kernels import make_kernel
    d = str(tmp_path_factory.mktemp("fma20"))
    body = ["out[i] = tk.fma(a[i], b[i], c[i])"]
    return (make_kernel(d, "fma_exact20", ("out", "a", "b", "c"), body),
            make_kernel(d, "fma_fast20", ("out", "a", "b", "c"), body, fastmath=True))


@needs_webgpu
def test_webgpu_fma_is_the_builtin_in_fastmath_kernels_only(fma_kernels):
    """A default kernel's ``tk.fma`` stays correctly rounded on WebGPU (the emulation: exact
    against float64, which holds a float32 product exactly, for inputs where the builtin of
    lavapipe rounds the product first); a ``fastmath`` kernel's is the WGSL builtin (one
    instruction): the exact result or the product rounded first, nothing else."""
    b = dev("WEBGPU")
    rng = np.random.default_rng(22)
    a = np.concatenate([[1 + 2**-12, 3.0], rng.standard_normal(254)]).astype(np.float32)
    bb = np.concatenate([[1 + 2**-12, 3.0], rng.standard_normal(254)]).astype(np.float32)
    c = np.concatenate([[-(1 + 2**-11), 1.0], rng.standard_normal(254)]).astype(np.float32)
    exact = (a.astype(np.float64) * bb + c).astype(np.float32)       # (one rounding: a b is exact in f64,
    twice = (a * bb) + c                                             #  then + c: 2**-24 on the first one)
    assert exact[0] == 2.0**-24 and twice[0] == 0
    args = [tk.asarray(x, backend=b) for x in (a, bb, c)]
    k_exact, k_fast = fma_kernels
    for k in fma_kernels:
        src = k.source(b, tk.zeros(256, np.float32, backend=b), *args, ndrange=256)
        assert ("tk_fma(" in src) == (k is k_exact) and (" fma(" in src) == (k is k_fast), k.name
    o = tk.zeros(256, np.float32, backend=b)
    k_exact(b)(o, *args, ndrange=256)
    np.testing.assert_array_equal(o.numpy(), exact)
    k_fast(b)(o, *args, ndrange=256)
    got = o.numpy()
    assert np.all((got == exact) | (got == twice)), np.flatnonzero((got != exact) & (got != twice))[:5]


def _decode_ref(q, kc, vc, n):
    g = q.shape[1] // kc.shape[1]
    k, v = (np.repeat(x[:, :, :n].astype(np.float64), g, 1) for x in (kc, vc))
    s = np.einsum("bhd,bhld->bhl", q.astype(np.float64), k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhl,bhld->bhd", p / p.sum(-1, keepdims=True), v)


@needs_webgpu
def test_flash_decode_on_webgpu_contracts_and_the_exact_route_remains(monkeypatch):
    """``flash_decode``'s kernel (its dot products and ``p @ V`` are ``tk.fma``) runs as its
    ``fastmath`` twin on WebGPU (``_common.contracted``: the WGSL builtin), everywhere else as
    itself; with ``CONTRACT_BACKENDS`` empty WebGPU runs the exact kernel. Both routes match
    float64 within the head dim's float32 tolerance."""
    from tinykernels.llm import _common as C
    from tinykernels.llm import attention
    b = dev("WEBGPU")
    assert C.contracted(attention._fd_part, tk.CPU()) is attention._fd_part
    twin = C.contracted(attention._fd_part, b)
    assert twin.fastmath and twin is C.contracted(attention._fd_part, b) and not attention._fd_part.fastmath
    rng = np.random.default_rng(23)
    B, H, KH, L, D = 1, 4, 2, 40, 64
    q = rng.standard_normal((B, H, D)).astype(np.float32)
    kc, vc = (rng.standard_normal((B, KH, L, D)).astype(np.float32) for _ in range(2))
    want = _decode_ref(q, kc, vc, 33)
    tol = 8 * D * float(np.finfo(np.float32).eps)
    args = [tk.asarray(x, backend=b) for x in (q, kc, vc)]
    seen = []
    launch = C.launch
    monkeypatch.setattr(C, "launch", lambda k, *a, **kw: (seen.append(k), launch(k, *a, **kw))[1])
    fast = get(llm.flash_decode(*args, 33))
    monkeypatch.setattr(C, "CONTRACT_BACKENDS", frozenset())
    exact = get(llm.flash_decode(*args, 33))
    assert seen[0] is twin and seen[-1] is attention._fd_part
    np.testing.assert_allclose(fast, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(exact, want, rtol=tol, atol=tol)


# --- llama.cpp test-backend-ops cases not ported before (make_test_cases_eval) ---------------
# ggml's extents are innermost first ({ne0, ne1, ne2, ne3}); here in NumPy order (reversed).

F32, F16 = np.float32, np.float16
EPS32 = float(np.finfo(F32).eps)


def small(b) -> bool:
    return b.name == "INTERP"


def dot_bound(a, x, k):
    """float32 dot-product error bound of ``a @ x`` (k terms; ``a`` float64)."""
    return k * EPS32 * (np.abs(a) @ np.abs(np.asarray(x, np.float64))).max()


@pytest.mark.parametrize("name", backends())
def test_sum_ggml_rows_and_a_strided_out(name):
    """test_sum / test_sum_rows: {33}, {33, 256}, {33, 1024}, {16, 5, 6, 3} rows, and ggml's
    "sum dst not-contiguous" ({33, 256} into a strided out, CPU: device arrays have no views)"""
    b = dev(name)
    rng = np.random.default_rng(30)
    shapes = [(33,), (256, 33), (3, 6, 5, 16)] + ([] if small(b) else [(1024, 33)])
    for shape in shapes:
        x = rng.uniform(-1, 1, shape).astype(F32)
        got = get(llm.sum(on(x, b), -1))
        assert got.shape == shape[:-1] and got.dtype == F32
        np.testing.assert_allclose(got, x.astype(np.float64).sum(-1), rtol=0, atol=shape[-1] * EPS32)
    if b.name == "CPU":
        x = rng.uniform(-1, 1, (256, 33)).astype(F32)
        o = np.zeros(512, F32)
        assert llm.sum(x, 1, out=o[::2]) is not None
        np.testing.assert_allclose(o[::2], x.astype(np.float64).sum(1), rtol=0, atol=33 * EPS32)
        assert not o[1::2].any()


@pytest.mark.parametrize("name", backends())
def test_fill_ggml_shapes_and_values(name):
    """test_fill: 0 on {10, 5, 4, 3}; 2, -152 and 3.5 on {303, 207, 11, 3}, {800, 600, 4, 4} and
    {2048, 512, 2, 2} (the big ones on the CPU; cut down elsewhere): equal to np.full"""
    b = dev(name)
    cases = [(0.0, (3, 4, 5, 10))]
    cases += [(2.0, (3, 11, 207, 303)), (-152.0, (4, 4, 600, 800)), (3.5, (2, 2, 512, 2048))] if b.name == "CPU" \
        else [(2.0, (3, 11, 2, 303)), (-152.0, (1, 4, 6, 800))] if not small(b) else [(3.5, (2, 2, 3, 7))]
    for v, shape in cases:
        x = on(np.ones(shape, F32), b)
        assert llm.fill(x, v) is x
        np.testing.assert_array_equal(get(x), np.full(shape, v, F32))


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [F32, F16])
def test_unary_ggml_7_1_5_3_and_1024_square(name, dt):
    """test_sqr/sqrt/log/sin/cos on {7, 1, 5, 3} (an extent of 1 inside) and {1024, 1024} (the
    CPU): ``sqr`` as ``pow(x, 2)`` and ``sqrt`` bit for bit NumPy's, the others within 2 ulps
    of the dtype of the float64 result"""
    if dt == F16 and name == "WEBGPU":
        pytest.skip("WebGPU tests run 32-bit dtypes only")
    b = dev(name)
    rng = np.random.default_rng(31)
    for shape in [(3, 5, 1, 7)] + ([(1024, 1024)] if b.name == "CPU" else []):
        x = rng.uniform(0.1, 3, shape).astype(dt)
        np.testing.assert_array_equal(get(llm.pow(on(x, b), 2)), x * x)
        np.testing.assert_array_equal(get(llm.sqrt(on(x, b))), np.sqrt(x))
        e = float(np.finfo(dt).eps)
        for op in ("log", "sin", "cos"):
            got = get(getattr(llm, op)(on(x, b)))
            assert got.shape == shape and got.dtype == dt
            np.testing.assert_allclose(got.astype(np.float64), getattr(np, op)(x.astype(np.float64)),
                                       rtol=2 * e, atol=2 * e, err_msg=op)


def _rope_tables(S, rot):
    inv = 10000.0 ** (-np.arange(rot // 2) * 2.0 / rot)
    ang = np.arange(S)[:, None] * inv
    return np.cos(ang).astype(F32), np.sin(ang).astype(F32)


def _rope_ref(x, cos, sin):
    h = cos.shape[-1]
    xf, c, s = x.astype(np.float64), cos.astype(np.float64), sin.astype(np.float64)
    r = xf.copy()
    r[..., :h] = xf[..., :h] * c - xf[..., h:2 * h] * s
    r[..., h:2 * h] = xf[..., h:2 * h] * c + xf[..., :h] * s
    return r


@pytest.mark.parametrize("name", backends())
def test_rope_ggml_falcon_40b_8192_positions_and_batched_in_place(name):
    """test_rope's NeoX {64, 128, 2} (falcon 40B: 128 heads), {16, 16, 8192} (8192 positions,
    the angles up to 8191 radians), and the in-place float16 {128, 32, 2, 3} (batch 3), within
    a few float32 units of the magnitudes (float16: of float16)"""
    b = dev(name)
    rng = np.random.default_rng(32)
    cases = [((1, 128, 2, 64), 64, F32), ((1, 16, 8192 if not small(b) else 300, 16), 16, F32)]
    if name != "WEBGPU":
        cases.append(((3, 32, 2, 128), 128, F16))
    for shape, rot, dt in cases:
        x = rng.standard_normal(shape).astype(dt)
        cos, sin = _rope_tables(shape[2], rot)
        want = _rope_ref(x, cos, sin)
        tol = 4 * float(np.finfo(dt).eps) * np.abs(x).astype(np.float64).max()
        xa = on(x.copy(), b)
        got = get(llm.rope(xa, on(cos, b), on(sin, b), out=xa))
        assert got.dtype == dt
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=0, atol=tol, err_msg=f"{shape}")


@pytest.mark.parametrize("name", backends())
def test_matmul_ggml_single_rows_long_k_and_odd_shapes(name):
    """test_mul_mat cases with one weight row (m = 1, n = 64, k = 256) for every format and the
    float types; Q4_0 with k = 8192 (one row; n cut from 2048 to 16) and {576, 512, 576} (k =
    18 blocks; n cut to 64 off the CPU); Q8_0 {6, 4096, 5120} (n cut to 32); the stream-k
    k = 1024 with n = 1, 8, 16 (Q4_0 and float32); float16 weights of odd shapes (83 x 128,
    1056 x 193 as a GEMV) and float32 {64, 77, 77}: within float32 dot-product error of the float64
    product of the dequantized weights"""
    b = dev(name)
    rng = np.random.default_rng(33)

    def check(A, ad, x):
        got = get(llm.matmul(A, on(x, b)))
        want = ad @ x.astype(np.float64)
        assert got.shape == want.shape and got.dtype == F32
        np.testing.assert_allclose(got, want, rtol=0, atol=dot_bound(ad, x, ad.shape[1]) + 1e-30)

    def weights(m, k, qt):
        a = rng.standard_normal((m, k)).astype(F32)
        if qt in ("q4_0", "q8_0", "q4_k"):
            A = llm.quantize(on(a, b), qt)
            return A, get(llm.dequantize(A)).astype(np.float64)
        a = a.astype(qt)
        return on(a, b), a.astype(np.float64)

    floats = ["q4_0", "q8_0", "q4_k", F32] + ([F16] if name != "WEBGPU" else [])
    for qt in floats:
        A, ad = weights(1, 256, qt)
        check(A, ad, rng.standard_normal((256, 64 if not small(b) else 5)).astype(F32))
        if not small(b) and qt in ("q4_0", F32):     # (each format a compile: CI time)
            A, ad = weights(16, 1024, qt)
            for n in (1, 8, 16):
                check(A, ad, rng.standard_normal((1024, n)).astype(F32))
    if small(b):
        return
    A, ad = weights(1, 8192, "q4_0")
    check(A, ad, rng.standard_normal((8192, 16)).astype(F32))
    check(A, ad, rng.standard_normal(8192).astype(F32))
    A, ad = weights(576, 576, "q4_0")
    check(A, ad, rng.standard_normal((576, 512 if b.name == "CPU" else 64)).astype(F32))
    A, ad = weights(6, 5120, "q8_0")
    check(A, ad, rng.standard_normal((5120, 32)).astype(F32))
    check(A, ad, rng.standard_normal(5120).astype(F32))
    if name != "WEBGPU":
        for m, k, n in ((83, 128, 2), (1056, 193, None)):
            A, ad = weights(m, k, F16)
            check(A, ad, rng.standard_normal((k, n) if n else k).astype(F32))
    A, ad = weights(64, 77, F32)
    check(A, ad, rng.standard_normal((77, 77)).astype(F32))


@pytest.mark.parametrize("name", backends())
def test_transpose_ggml_dup_and_cpy_permutations(name):
    """test_dup of int16/int32/float16 {10, 8, 3} under ggml's permutations (int16: all six),
    and test_cpy's long thin tensors: {2, 2097121} and {2, 2, 524281}
    with their two innermost axes swapped (the CPU; cut down elsewhere): copies, so exact"""
    import itertools
    b = dev(name)
    rng = np.random.default_rng(34)
    for dt in ("int16", "int32") + (("float16",) if name != "WEBGPU" else ()):
        x = (rng.standard_normal((3, 8, 10)) * 1000).astype(dt)
        # ggml's {0, 2, 1, 3}, {1, 0, 2, 3} and {1, 2, 0, 3} in NumPy's axis order; every
        # permutation for int16 (each one a compile: CI time)
        for p in itertools.permutations(range(3)) if dt == "int16" else ((1, 0, 2), (0, 2, 1), (1, 2, 0)):
            np.testing.assert_array_equal(get(llm.transpose(on(x, b), p)), x.transpose(p), err_msg=f"{dt} {p}")
    n = 2097121 if b.name == "CPU" else 4099 if not small(b) else 67
    x = rng.standard_normal((n, 2)).astype(F32)
    np.testing.assert_array_equal(get(llm.transpose(on(x, b))), x.T)
    y = rng.standard_normal((n // 4, 2, 2)).astype(F32)
    np.testing.assert_array_equal(get(llm.transpose(on(y, b), (0, 2, 1))), y.transpose(0, 2, 1))


@pytest.mark.parametrize("name", backends())
def test_repeat_ggml_int16_and_bfloat16(name):
    """test_repeat's I16 ({10, 5, 4, ne3} twice along the outermost axis) and BF16 (twice along
    the innermost), ne3 = 1 and 3: equal to np.repeat"""
    b = dev(name)
    rng = np.random.default_rng(35)
    dts = ["int16"] + (["bfloat16"] if b.supports("bfloat16") else [])
    for ne3 in (1, 3):
        for dt, ax in zip(dts, (0, 3)):
            x = (rng.standard_normal((ne3, 4, 5, 10)) * 100).astype(np_dtype(dt))
            got = get(llm.repeat(on(x, b), 2, ax))
            assert got.dtype == x.dtype
            np.testing.assert_array_equal(got, np.repeat(x, 2, ax), err_msg=dt)


@pytest.mark.parametrize("name", backends())
def test_argmax_ggml_1024_by_12(name):
    """test_argmax {1024, 12} (the case audit19 did not list), row by row"""
    b = dev(name)
    x = np.random.default_rng(36).uniform(-1, 1, (12, 1024 if not small(b) else 100)).astype(F32)
    x[5, 7] = x[5, -1] = 3.0
    for i in range(12):
        assert int(get(llm.argmax(on(x[i].copy(), b)))) == int(np.argmax(x[i]))


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", backends())
def test_flash_attention_ggml_head_dim_512_long_kv_and_gqa_192(name):
    """test_flash_attn_ext cases past audit19's list: head dim 512 (113 keys, 3 queries, 4
    heads), GQA 16:1 at head dim 192 over 512 keys, and on the CPU GQA 8:1 at 192 (the
    1024-key case at head dim 64 is left out: CI time); against torch's scaled_dot_product_attention in
    float64 (causal aligned bottom-right)"""
    b = dev(name)
    rng = np.random.default_rng(37)
    cases = [(512, 113, 3, 4, 4), (192, 512, 3, 16, 1)]
    if b.name == "CPU":                       # (the rest: CI time)
        cases += [(192, 512, 3, 8, 1)]
    if small(b):
        cases = [(512, 5, 2, 2, 2)]
    for D, Sk, Sq, H, Hk in cases:
        q = rng.standard_normal((1, H, Sq, D)).astype(F32)
        k, v = (rng.standard_normal((1, Hk, Sk, D)).astype(F32) for _ in range(2))
        rep = H // Hk
        tq, tk_, tv = (torch.tensor(a.astype(np.float64)) for a in (q, k, v))
        tk_, tv = tk_.repeat_interleave(rep, 1), tv.repeat_interleave(rep, 1)
        for causal in (False, True):
            mask = np.arange(Sk)[None, :] <= np.arange(Sq)[:, None] + Sk - Sq if causal else None
            want = torch.nn.functional.scaled_dot_product_attention(
                tq, tk_, tv, attn_mask=None if mask is None else torch.tensor(mask)).numpy()
            got = get(llm.flash_attention(on(q, b), on(k, b), on(v, b), causal=causal))
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"D={D} Sk={Sk} H={H}/{Hk}")


@pytest.mark.parametrize("name", backends())
def test_qk_norm_rope_ggml_rms_norm_mul_rope_shapes(name):
    """test_rms_norm_mul_rope (NeoX): RMSNorm over each head vector, times w, then RoPE over the
    whole head: ggml's {768, 1, 1}, {768, 3, 5}, {128, 32, 2}, {128, 4, 50}, {8192, 2, 2}
    ({head_dim, heads, seq}; here [heads, seq, head_dim]), eps 1e-6, against float64"""
    b = dev(name)
    rng = np.random.default_rng(38)
    cases = [(1, 1, 768), (3, 5, 768), (32, 2, 128), (4, 50, 128), (2, 2, 8192)]
    if small(b):
        cases = [(1, 1, 768), (3, 5, 64)]
    for shape in cases:
        x = rng.uniform(-1, 1, shape).astype(F32)
        w = rng.uniform(-1, 1, shape[-1]).astype(F32)
        cos, sin = _rope_tables(shape[1], shape[-1])
        xf = x.astype(np.float64)
        normed = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + float(np.float32(1e-6))) * w
        want = _rope_ref(normed, cos, sin)
        got = get(llm.qk_norm_rope(on(x, b), on(w, b), on(cos, b), on(sin, b), eps=1e-6))
        tol = 8 * EPS32 * np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=tol, err_msg=f"{shape}")


# bin_bcast shapes audit19's list lacks (stable diffusion's; {64, 262144} cut to {64, 4096})
BCAST20 = [((10, 5, 4, 1), (1, 1, 1, 1)), ((10, 5, 4, 3), (1, 1, 2, 1)), ((10, 5, 4, 3), (1, 1, 1, 2)),
           ((10, 5, 4, 3), (1, 2, 2, 2)), ((1280, 16, 16, 1), (1, 1, 1, 1)), ((1280, 1, 1, 1), (1, 256, 1, 1)),
           ((16, 16, 1280, 1), (1, 1, 1, 1)), ((1, 1, 1920, 1), (16, 16, 1, 1)), ((1, 1, 2560, 1), (16, 16, 1, 1)),
           ((1, 1, 1280, 1), (32, 32, 1, 1)), ((1, 1, 1920, 1), (32, 32, 1, 1)), ((1, 1, 640, 1), (32, 32, 1, 1)),
           ((640, 1, 1, 1), (1, 1, 1, 1)), ((64, 4096, 1, 1), (1, 1, 1, 1))]


@pytest.mark.parametrize("name", backends())
def test_binary_ops_ggml_stable_diffusion_shapes_permuted_b_and_fused_chains(name):
    """bin_bcast: the shapes above (b with extent 1 where ggml repeats it: NumPy's broadcast
    reading, as audit19), b stored permuted (perm1: a transposed view; the CPU, where views
    exist), and the fusion cases (a + b1 + ... + b_k, k = 2..8, {10/16, 5, 4, 3}): bit for bit
    NumPy's, one rounding per operation"""
    b = dev(name)
    rng = np.random.default_rng(39)
    cases = BCAST20[:2] if small(b) else BCAST20
    for ne, nr in cases:
        sa = tuple(reversed([n * r for n, r in zip(ne, nr)]))
        sb = tuple(reversed([1 if r > 1 else n for n, r in zip(ne, nr)]))
        x = rng.uniform(-1, 1, sa).astype(F32)
        y = rng.uniform(0.5, 1, sb).astype(F32)
        for fn, op in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
            np.testing.assert_array_equal(get(getattr(llm, fn)(on(x, b), on(y, b))), op(x, y), err_msg=f"{fn} {ne}")
        if b.name == "CPU" and len(sb) == 4 and sb[1] > 1 and sb[2] > 1:
            yp = np.ascontiguousarray(y.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)     # perm1
            assert not yp.flags.c_contiguous
            np.testing.assert_array_equal(llm.mul(x, yp), x * y)
    chains = ((2, (3, 4, 5, 10)), (3, (3, 4, 10, 16)), (5, (6, 4, 5, 16)), (8, (6, 8, 10, 32)))
    for nf, ne in chains[:2] if small(b) else chains:
        a = rng.uniform(-1, 1, ne).astype(F32)
        bs = [rng.uniform(-1, 1, (1,) * (4 - k % 4) + ne[4 - k % 4:]).astype(F32) for k in range(nf)]
        got, want = on(a, b), a
        for t in bs:
            got, want = llm.add(got, on(t, b)), want + t
        np.testing.assert_array_equal(get(got), want, err_msg=f"nf={nf}")
