"""SPEC section 10 (``tinykernels.llm``) read as a stranger would (engineer llm19): every
function called as the SPEC writes it, with NumPy arrays, ``tk.Array`` and CPU torch tensors,
``out=`` (given, in place, of the wrong shape or dtype, strided), ``stream=``; the documented
errors; and the cases of llama.cpp's test-backend-ops (``tests/test-backend-ops.cpp``,
``make_test_cases_eval``) that tests/test_ported_llm_ops.py and tests/test_ported_llm2.py did
not port: its bin_bcast, rms_norm (eps 0 to 10, rows 1 to 33 * 512), soft_max (rows of
200001 and 643251), argmax, get_rows, repeat, sum, unary, glu, rope (partial rotation, views
at an offset), mul_mat (m = 16, n = 1..9, k = 256; 2880-wide rows) and flash_attn_ext
(head dims 40 to 256, 113 keys, GQA 4:1 and 12:1, permuted inputs) shapes. References are
NumPy/PyTorch in float64 and ``gguf.quants`` for the block formats; the end-to-end check
writes a tiny Llama as a real ``.gguf`` file with gguf's writer and decodes it with llm
calls only, against PyTorch in float64.

ggml's tensor extents are written innermost first ({ne0, ne1, ne2, ne3}); here they are in
NumPy order (reversed)."""
import warnings

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm

from llm_helpers import backends, dev, get, skip_16bit

try:
    import torch
except ImportError:                       # the minimal install: those tests skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
F32, F16 = np.float32, np.float16


def on(a, b):
    """``a`` on backend ``b``: NumPy stays NumPy on the CPU."""
    return a if b.name == "CPU" else tk.asarray(np.ascontiguousarray(a), backend=b)


def small(b) -> bool:
    """The interpreter runs work items in Python: the big ggml shapes are cut down there."""
    return b.name == "INTERP"


def ulps(dt, n=2):
    return n * float(np.finfo(dt).eps)


# --- binary ops: ggml's bin_bcast shapes -------------------------------------------------------

# (ne of b, nr) as test-backend-ops lists them; a = ne * nr. ggml repeats (tiles) b nr times;
# SPEC 10 broadcasts as NumPy does, so where nr > 1 along an extent > 1 the port gives b
# extent 1 there (the broadcast reading of the same case).
BCAST = [((1, 1, 8, 1), (1, 1, 1, 1)), ((1, 1, 1, 1), (32, 1, 1, 1)), ((1, 1, 320, 320), (1, 1, 1, 1)),
         ((10, 5, 1, 1), (1, 1, 1, 1)), ((10, 5, 4, 3), (2, 1, 1, 1)), ((10, 5, 4, 3), (1, 2, 1, 1)),
         ((10, 5, 4, 3), (1, 1, 2, 2)), ((10, 5, 4, 3), (2, 2, 2, 2)), ((1280, 1, 1, 1), (1, 16, 16, 1)),
         ((1, 1, 1280, 1), (16, 16, 1, 1)), ((5120, 1, 1, 1), (1, 256, 1, 1)), ((1, 1, 65536, 1), (256, 1, 1, 1))]


def _bcast_shapes(ne, nr):
    a = tuple(reversed([n * r for n, r in zip(ne, nr)]))
    b = tuple(reversed([1 if r > 1 else n for n, r in zip(ne, nr)]))
    return a, b


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [F32, F16])
def test_binary_ops_on_ggml_bin_bcast_shapes_bit_exact(name, dt):
    """add/sub/mul/div of every bin_bcast shape, both operand orders (the broadcast operand
    first too), bit for bit NumPy's (one rounding per element in the dtype)"""
    skip_16bit(name, dt)
    b = dev(name)
    rng = np.random.default_rng(0)
    # the interpreter runs items in Python: without the 320 x 320 case and the big ones
    cases = BCAST[:2] + BCAST[3:8] if small(b) else BCAST
    for ne, nr in cases:
        sa, sb = _bcast_shapes(ne, nr)
        x = rng.uniform(-1, 1, sa).astype(dt)
        y = rng.uniform(0.5, 1, sb).astype(dt)          # no zero divisor
        for fn, op in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
            got = get(getattr(llm, fn)(on(x, b), on(y, b)))
            assert got.dtype == dt and got.shape == sa
            np.testing.assert_array_equal(got, op(x, y), err_msg=f"{fn} {ne} {nr}")
            if fn != "div":
                np.testing.assert_array_equal(get(getattr(llm, fn)(on(y, b), on(x, b))), op(y, x))


@pytest.mark.parametrize("name", backends())
def test_binary_ops_in_place_and_on_overlapping_inputs(name):
    """ggml's inplace cases (the result written over a, {16, 5, 4, 3}) and src_overlap (a and
    b two overlapping views of one buffer: both only read, so allowed)"""
    b = dev(name)
    rng = np.random.default_rng(1)
    for fn, op in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
        x = rng.uniform(1, 2, (3, 4, 5, 16)).astype(F32)
        y = rng.uniform(1, 2, (3, 4, 5, 16)).astype(F32)
        want = op(x, y)
        xa = on(x.copy(), b)
        assert getattr(llm, fn)(xa, on(y, b), out=xa) is xa
        np.testing.assert_array_equal(get(xa), want)
    if b.name == "CPU":
        buf = rng.uniform(1, 2, 10 * 5 * 4 * 7).astype(F32)
        p, q = buf[:1200].reshape(6, 4, 5, 10), buf[200:1400].reshape(6, 4, 5, 10)
        np.testing.assert_array_equal(llm.add(p, q), p + q)
        np.testing.assert_array_equal(llm.mul(q[..., ::2], p[..., 1::2]), q[..., ::2] * p[..., 1::2])


@pytest.mark.parametrize("name", backends())
def test_pow_by_scalar_two_half_and_minus_one_is_numpy_bit_for_bit(name):
    """np.power(x, 2), (x, 0.5), (x, -1) are square, sqrt and reciprocal (torch's pow too):
    correctly rounded, with sqrt's -0.0 -> -0.0 and -inf -> NaN. llm.pow gave the C
    library's powf, which rounded ties such as (1 + 2**-12) ** 2 up (about 0.06% of random
    float32 squares differed from NumPy's in the last bit); other exponents stay powf's, within
    an ulp of np.power"""
    b = dev(name)
    rng = np.random.default_rng(24)
    x = np.concatenate([1 + np.arange(1, 4096, dtype=F32) * F32(2**-12), rng.uniform(-100, 100, 20000).astype(F32),
                        np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, -2.0, 1e-45], F32)])
    if small(b):
        x = x[::20].copy()
    X = on(x, b)
    with np.errstate(all="ignore"):
        for y in (2, 2.0, np.float32(2), 0.5, -1, -1.0):
            got, want = get(llm.pow(X, y)), np.power(x, y)
            assert got.dtype == F32
            same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (y, x[~same][:4], got[~same][:4], want[~same][:4])
        if name != "WEBGPU":
            h = x[np.isfinite(x) & (np.abs(x) < 200)].astype(F16)
            for y in (2, 0.5, -1):
                got, want = get(llm.pow(on(h, b), y)), np.power(h, y)
                assert got.dtype == F16
                np.testing.assert_array_equal(got, want)
        y = rng.uniform(-3, 3, x.shape).astype(F32)
        got = get(llm.pow(X, on(y, b)))
        want = np.abs(x).astype(np.float64) ** y
        ok = np.isfinite(want) & (np.abs(want) < 1e30) & (np.abs(want) > 1e-30) & (x > 0)
        np.testing.assert_allclose(got[ok], want[ok], rtol=2 * ulps(F32, 1))


# --- repeat with axis=None (found here) --------------------------------------------------------

@pytest.mark.parametrize("name", backends())
def test_repeat_without_axis_flattens_as_numpy(name):
    """``llm.repeat(x, r)`` with the default ``axis=None`` is ``np.repeat(x, r)`` for x of any
    rank: the C-order flattening repeated (it was a ValueError for anything but 1-D x)"""
    b = dev(name)
    x = np.arange(2 * 3 * 4, dtype=F32).reshape(2, 3, 4)
    for a in (x, x[0], x.reshape(1, 2, 3, 4), np.array(7, F32)):
        got = get(llm.repeat(on(a, b), 3))
        assert got.shape == (a.size * 3,)
        np.testing.assert_array_equal(got, np.repeat(a, 3))
    if b.name == "CPU":
        v = x.transpose(2, 0, 1)                          # a strided view: flattened as NumPy does
        np.testing.assert_array_equal(llm.repeat(v, 2), np.repeat(v, 2))
        out = np.empty(48, F32)
        assert llm.repeat(v, 2, out=out) is out
        np.testing.assert_array_equal(out, np.repeat(v, 2))
        with pytest.raises(ValueError, match="'out'"):
            llm.repeat(x, 2, out=np.empty((2, 24), F32))
        if torch is not None:
            t = torch.tensor(x).permute(2, 0, 1)
            r = llm.repeat(t, 2)
            assert isinstance(r, torch.Tensor)
            np.testing.assert_array_equal(r.numpy(), np.repeat(v, 2))


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("ne3", [1, 3])
def test_repeat_ggml_shapes_every_axis_and_dtype(name, ne3):
    """test_repeat's {10, 5, 4, ne3} along each axis, float32, int32, float16"""
    b = dev(name)
    rng = np.random.default_rng(ne3)
    for dt in (F32, np.int32, F16):
        if dt == F16 and name == "WEBGPU":
            continue
        x = (rng.standard_normal((ne3, 4, 5, 10)) * 100).astype(dt)
        for ax in range(4):
            np.testing.assert_array_equal(get(llm.repeat(on(x, b), 2, ax)), np.repeat(x, 2, ax))


# --- rms_norm: ggml's eps and row lengths ------------------------------------------------------

def _rms_ref(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + float(np.float32(eps))) * w


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("eps", [0.0, 1e-6, 1e-4, 1e-1, 10.0])
def test_rms_norm_ggml_eps_and_row_lengths(name, eps):
    """test_rms_norm / test_add_rms_norm: rows of 64 and 1025 in a {n, 5, 4, 3} tensor, eps 0 to
    10, also as a strided view (ggml's v) and with a residual (the sum bit for bit NumPy's)"""
    b = dev(name)
    rng = np.random.default_rng(int(eps * 10))
    lead = (3, 4, 5) if not small(b) else (2, 3)
    for n in (64, 1025):
        x = rng.uniform(-1, 1, lead + (n,)).astype(F32)
        w = rng.uniform(-1, 1, n).astype(F32)
        np.testing.assert_allclose(get(llm.rms_norm(on(x, b), on(w, b), eps=eps)), _rms_ref(x, w, eps),
                                   rtol=ulps(F32, 4), atol=ulps(F32, 4))
        r = rng.uniform(-1, 1, lead + (n,)).astype(F32)
        y, s = llm.rms_norm(on(x, b), on(w, b), eps=eps, residual=on(r, b))
        np.testing.assert_array_equal(get(s), x + r)
        np.testing.assert_allclose(get(y), _rms_ref(x + r, w, eps), rtol=ulps(F32, 4), atol=ulps(F32, 4))
        if b.name == "CPU":
            big = rng.uniform(-1, 1, lead + (2 * n,)).astype(F32)
            v = big[..., 1::2]
            np.testing.assert_allclose(llm.rms_norm(v, w, eps=eps), _rms_ref(v, w, eps), rtol=ulps(F32, 4),
                                       atol=ulps(F32, 4))


@pytest.mark.parametrize("name", backends())
def test_rms_norm_long_single_rows_match_torch(name):
    """test_rms_norm_mul_add / test_add_rms_norm single rows of 1, 511, 1025, 8192 and 33 * 512,
    against torch.nn.functional.rms_norm in float64"""
    if torch is None:
        pytest.skip("torch is not installed")
    b = dev(name)
    rng = np.random.default_rng(5)
    for n in ((1, 511, 1025) if small(b) else (1, 511, 1025, 8192, 33 * 512)):
        x = rng.uniform(-1, 1, (1, n)).astype(F32)
        w = rng.uniform(-1, 1, n).astype(F32)
        want = torch.nn.functional.rms_norm(torch.tensor(x, dtype=torch.float64), (n,),
                                            torch.tensor(w, dtype=torch.float64), eps=1e-6).numpy()
        np.testing.assert_allclose(get(llm.rms_norm(on(x, b), on(w, b))), want, rtol=ulps(F32, 8),
                                   atol=ulps(F32, 8), err_msg=f"n={n}")


@pytest.mark.parametrize("name", [p for p in backends() if p.values[0] != "WEBGPU"])
def test_float64_rows_are_computed_in_float64(name):
    """float64 inputs (NumPy's default dtype) to rms_norm (plain, residual first, residual
    after), softmax (last and first axis) and rope/qk_norm_rope give float64 results with
    float64 accuracy; they came back as float64 arrays computed in float32 (relative errors
    2e-7, RoPE 5e-6, against softmax's own docstring), so assert_allclose's default rtol of
    1e-7 failed on NumPy's default dtype"""
    b = dev(name)
    rng = np.random.default_rng(25)
    x, y = rng.uniform(0.5, 2, (3, 100)), rng.uniform(0.5, 2, (3, 100))
    w = rng.standard_normal(100)
    cos, sin = rng.uniform(-1, 1, (3, 40)), rng.uniform(-1, 1, (3, 40))
    xr = x.reshape(1, 1, 3, 100)

    def rms(v):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * w

    def soft(v, ax):
        e = np.exp(v - v.max(ax, keepdims=True))
        return e / e.sum(ax, keepdims=True)

    X, Y, W, XR, CO, SI = (on(a, b) for a in (x, y, w, xr, cos, sin))
    got = {"rms_norm": llm.rms_norm(X, W), "residual": llm.rms_norm(X, W, residual=Y)[0],
           "rms_norm_add": llm.rms_norm_add(X, W, Y), "softmax": llm.softmax(X, scale=0.7),
           "softmax axis 0": llm.softmax(X, axis=0), "rope": llm.rope(XR, CO, SI),
           "rope float32 tables": llm.rope(XR, on(cos.astype(F32), b), on(sin.astype(F32), b)),
           "qk_norm_rope": llm.qk_norm_rope(XR, W, CO, SI)}
    c32, s32 = cos.astype(F32).astype(np.float64), sin.astype(F32).astype(np.float64)
    want = {"rms_norm": rms(x), "residual": rms(x + y), "rms_norm_add": y + rms(x), "softmax": soft(x * 0.7, -1),
            "softmax axis 0": soft(x, 0), "rope": _rope_ref(xr, cos, sin), "rope float32 tables": _rope_ref(xr, c32, s32),
            "qk_norm_rope": _rope_ref(rms(xr), cos, sin)}
    for k, g in got.items():
        g = get(g)
        assert g.dtype == np.float64, k
        np.testing.assert_allclose(g, want[k], rtol=1e-13, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("name", [p for p in backends() if p.values[0] != "WEBGPU"])
def test_argmax_of_float64_compares_float64_values(name):
    """argmax of float64 values that one float32 cannot tell apart (1 and 1 + 1e-12; 1e39 and
    1e40, both inf in float32; -1e300 and -1e299, both -inf): NumPy's index. The kernels
    compared float32 roundings and answered 0 for all three (the host chunks of a long array
    too)"""
    b = dev(name)
    cases = [np.array([1.0, 1.0 + 1e-12, 1.0]), np.array([1e39, 1e40]), np.array([-1e300, -1e299])]
    if not small(b):
        long = np.full(70001, 1.0)
        long[69000] = 1.0 + 1e-13                     # past the first host chunk of 65536
        cases.append(long)
    for x in cases:
        g = get(llm.argmax(on(x, b)))
        assert g.dtype == np.int32 and int(g) == int(np.argmax(x)), x[:3]


# --- softmax: ggml's rows, scales and the long rows ----------------------------------------------

@pytest.mark.parametrize("name", backends())
def test_softmax_ggml_shapes_scales_and_long_rows(name):
    """test_soft_max without mask: {16, 1024} x {16, 1024} rows and one fewer of each, scale 1
    and 0.1, in place ({16, 2, 32}, scale 0.1), and the long rows {200000, 4} and {643251, 3},
    against torch.softmax in float64"""
    if torch is None:
        pytest.skip("torch is not installed")
    b = dev(name)
    rng = np.random.default_rng(6)
    shapes = [(16, 16), (15, 15), (3, 1024), (1023, 15)] if not small(b) else [(16, 16), (15, 15), (3, 100)]
    long = [] if small(b) else [(4, 200000), (3, 643251)]
    for shape in shapes + long:
        for scale in ((1.0, 0.1) if shape not in long else (1.0,)):
            x = rng.uniform(-1, 1, shape).astype(F32)
            want = torch.softmax(torch.tensor(x, dtype=torch.float64) * float(np.float32(scale)), -1).numpy()
            got = get(llm.softmax(on(x, b), scale=scale))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=ulps(F32, 2) * want.max(), err_msg=f"{shape}")
    x = rng.uniform(-1, 1, (1, 32, 2, 16)).astype(F32)
    want = torch.softmax(torch.tensor(x, dtype=torch.float64) * float(np.float32(0.1)), -1).numpy()
    xa = on(x.copy(), b)
    assert llm.softmax(xa, scale=0.1, out=xa) is xa
    np.testing.assert_allclose(get(xa), want, rtol=1e-5, atol=1e-7)


# --- argmax, get_rows, sum ---------------------------------------------------------------------

@pytest.mark.parametrize("name", backends())
def test_argmax_ggml_row_shapes(name):
    """test_argmax's {32, 1}, {32, 513}, {100, 10}, {1024, 10}, {2000, 10}, {5438, 3}, row by
    row (llm.argmax takes a 1-D array): an int32 0-d result equal to np.argmax"""
    b = dev(name)
    rng = np.random.default_rng(7)
    shapes = [(1, 32), (513, 32), (10, 100), (10, 1024), (10, 2000), (3, 5438)]
    if small(b):
        shapes = [(1, 32), (3, 100), (2, 5438)]
    for shape in shapes:
        x = rng.uniform(-1, 1, shape).astype(F32)
        x[0, shape[1] // 3] = x[0, -1] = 2.0                      # a tie: the first index wins
        for i in range(min(shape[0], 12)):
            g = get(llm.argmax(on(x[i].copy(), b)))
            assert g.shape == () and g.dtype == np.int32
            assert int(g) == int(np.argmax(x[i])), (shape, i)


@pytest.mark.parametrize("name", backends())
def test_gather_ggml_get_rows_shapes(name):
    """test_get_rows: 256-wide rows of a 5-row table, 1-wide rows, 4 of 5 rows picked, and
    (not on the interpreter) 7000 indices into an 80000-row table; int32 and int64 indices;
    a strided table view (ggml's v) on the CPU"""
    b = dev(name)
    rng = np.random.default_rng(8)
    cases = [(5, 256, 4), (8, 1, 2), (5, 33, 0)] + ([] if small(b) else [(80000, 16, 7000)])
    for V, D, N in cases:
        tab = rng.standard_normal((V, D)).astype(F32)
        for idt in ((np.int32,) if name == "WEBGPU" else (np.int32, np.int64)):
            idx = rng.integers(0, V, N).astype(idt)
            got = get(llm.gather(on(tab, b), on(idx, b)))
            assert got.shape == (N, D)
            np.testing.assert_array_equal(got, tab[idx])
    if b.name == "CPU":
        big = rng.standard_normal((9, 80)).astype(F32)
        tv, idx = big[:, 1::2], np.array([8, 0, 3, 3], np.int32)
        np.testing.assert_array_equal(llm.gather(tv, idx), tv[idx])


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("perm", [(0, 1, 2, 3), (0, 2, 1, 3), (0, 3, 2, 1), (0, 1, 3, 2)])
def test_sum_ggml_permuted_inputs(name, perm):
    """test_sum / test_sum_rows over {11, 5, 6, 3} permuted (row-contiguous but not contiguous),
    every axis, within float32 summation error of the float64 sum"""
    b = dev(name)
    x = np.random.default_rng(9).standard_normal((3, 6, 5, 11)).astype(F32).transpose(perm)
    xs = x if b.name == "CPU" else np.ascontiguousarray(x)
    for ax in range(4):
        want = x.astype(np.float64).sum(ax)
        got = get(llm.sum(on(xs, b) if b.name != "CPU" else xs, ax))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=16 * ulps(F32) * np.abs(x).sum(ax).max())


# --- unary and glu ops: ggml's {128, 2, 2, 2} and {5, 7, 11, 13} ------------------------------

UNARY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
         "rsqrt": lambda v: 1 / np.sqrt(v)}


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [F32, F16])
def test_unary_and_swiglu_on_ggml_shapes(name, dt):
    """test_unary / test_glu shapes, float32 and float16 (the result in the input's dtype, within
    2 ulps of the float64 result; swiglu also with its operands swapped, as ggml's swapped)"""
    skip_16bit(name, dt)
    b = dev(name)
    rng = np.random.default_rng(10)
    for shape in ((2, 2, 2, 128), (13, 11, 7, 5)):
        x = rng.uniform(0.1, 3, shape).astype(dt)
        for op, ref in UNARY.items():
            got = get(getattr(llm, op)(on(x, b)))
            assert got.dtype == dt and got.shape == shape
            np.testing.assert_allclose(got.astype(np.float64), ref(x.astype(np.float64)), rtol=ulps(dt),
                                       atol=ulps(dt), err_msg=op)
        g = rng.uniform(-3, 3, shape).astype(dt)
        for w1, w3 in ((x, g), (g, x)):
            w1d = w1.astype(np.float64)
            want = w1d / (1 + np.exp(-w1d)) * w3
            got = get(llm.swiglu(on(w1, b), on(w3, b)))
            assert got.dtype == dt
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=ulps(dt, 4), atol=ulps(dt, 4))


# --- rope: ggml's NeoX shapes, partial rotation, views at an offset -----------------------------

def _tables(S, rot, start=0):
    inv = 10000.0 ** (-np.arange(rot // 2) * 2.0 / rot)
    ang = (np.arange(S)[:, None] + start) * inv
    return np.cos(ang).astype(F32), np.sin(ang).astype(F32)


def _rope_ref(x, cos, sin):
    rot = 2 * cos.shape[-1]
    h = rot // 2
    xf = x.astype(np.float64)
    r = xf.copy()
    r[..., :h] = xf[..., :h] * cos - xf[..., h:rot] * sin
    r[..., h:rot] = xf[..., h:rot] * cos + xf[..., :h] * sin
    return r


ROPE = [((2, 32, 2, 128), 128), ((1, 1, 2, 64), 64), ((1, 71, 2, 64), 64), ((1, 32, 2, 80), 20),
        ((1, 32, 2, 80), 32), ((1, 32, 4, 80), 32), ((1, 16, 40, 16), 16)]


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [F32, F16])
def test_rope_neox_ggml_shapes_partial_rotation_and_in_place(name, dt):
    """test_rope's NeoX cases (llama 7B heads, falcon, stablelm rot 20 of 80, phi-2 rot 32 of
    80) as [batch, heads, seq, head_dim]; the dims past rot are copied; in place (out=x)"""
    skip_16bit(name, dt)
    b = dev(name)
    rng = np.random.default_rng(11)
    tol = 4 * float(np.finfo(F16).eps) if dt == F16 else 4 * ulps(F32)
    for shape, rot in (ROPE[:4] if small(b) else ROPE):
        x = rng.standard_normal(shape).astype(dt)
        cos, sin = _tables(shape[2], rot, start=3)
        want = _rope_ref(x, cos, sin)
        got = get(llm.rope(on(x, b), on(cos, b), on(sin, b)))
        assert got.dtype == dt
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol, err_msg=f"{shape} {rot}")
        np.testing.assert_array_equal(got[..., rot:], x[..., rot:])
        xa = on(x.copy(), b)
        assert llm.rope(xa, on(cos, b), on(sin, b), out=xa) is xa
        np.testing.assert_array_equal(get(xa), got)


@pytest.mark.parametrize("dt", [F32, F16])
def test_rope_on_a_view_starting_at_an_offset(dt):
    """build_rope_2d-style: RoPE on a non-contiguous view that starts at a non-zero offset
    along the innermost axis ({36, 16, 2457} in ggml; here its second half of head_dim 36),
    and on a [batch, seq, heads, head_dim] tensor seen as [batch, heads, seq, head_dim]"""
    rng = np.random.default_rng(12)
    tol = 4 * float(np.finfo(F16).eps) if dt == F16 else 4 * ulps(F32)
    big = rng.standard_normal((1, 16, 300, 72)).astype(dt)
    v = big[..., 36:]
    cos, sin = _tables(300, 36)
    np.testing.assert_allclose(llm.rope(v, cos, sin).astype(np.float64), _rope_ref(v, cos, sin), rtol=tol, atol=tol)
    bshd = rng.standard_normal((2, 9, 4, 32)).astype(dt)
    x = bshd.transpose(0, 2, 1, 3)
    cos, sin = _tables(9, 32)
    np.testing.assert_allclose(llm.rope(x, cos, sin).astype(np.float64), _rope_ref(x, cos, sin), rtol=tol, atol=tol)


# --- quantized formats against gguf.quants -----------------------------------------------------

def _gguf():
    gguf = pytest.importorskip("gguf")
    from gguf import quants
    T = gguf.GGMLQuantizationType
    return quants, {"q4_0": T.Q4_0, "q8_0": T.Q8_0, "q4_k": T.Q4_K}


def _same_bits(got, want):
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    assert got.shape == want.shape
    ok = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), (np.argwhere(~ok)[:4], got[~ok][:4], want[~ok][:4])


def _edge_rows(rng):
    fmax = np.finfo(F32).max
    rows = [np.zeros(32), np.full(32, -0.0), np.full(32, fmax), np.full(32, 65504.0), np.full(32, 65520.0),
            np.full(32, 6e-8), rng.standard_normal(32) * 1e-30, np.abs(rng.standard_normal(32)),
            -np.abs(rng.standard_normal(32))]
    z = np.zeros(32)
    z[5], z[7] = -0.0, 1e-45                        # -0.0 and a float32 subnormal in one block
    m = rng.standard_normal(32)
    m[3] = -fmax                                    # max magnitude, negative
    rows += [z, m] + [rng.standard_normal(32) for _ in range(4)]
    w = np.stack(rows).astype(F32)
    return np.concatenate([w, w[::-1]], 1)          # K = 64: two blocks per row


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_quantize_edge_blocks_bit_exact_with_gguf(name, qtype):
    """all-zero blocks, blocks of -0.0, subnormals, float16-overflowing and float32-max
    magnitudes: the bytes are gguf.quants.quantize's and dequantize gives gguf's floats bit
    for bit (inf/NaN included)"""
    quants, T = _gguf()
    b = dev(name)
    w = _edge_rows(np.random.default_rng(13))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # gguf's own overflow warnings
        want = quants.quantize(w, T[qtype])
        want_f = quants.dequantize(want, T[qtype])
    q = llm.quantize(on(w, b), qtype)
    assert q.qtype == qtype and q.shape == w.shape
    np.testing.assert_array_equal(get(q.data), want)
    _same_bits(get(llm.dequantize(q)), want_f)


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0", "q4_k"])
def test_quantize_refuses_nan_and_inf_naming_w(qtype):
    """a NaN or an infinity in w is a ValueError naming w (documented in docs/llm-quant.md;
    gguf's NumPy quantizer casts NaN to int8, whose value NumPy leaves undefined)"""
    w = np.ones((1, 256), F32)
    for bad in (np.nan, np.inf, -np.inf):
        w[0, 5] = bad
        with pytest.raises(ValueError, match="llm.quantize: argument 'w'"):
            llm.quantize(w, qtype)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0", "q4_k"])
def test_dequantize_special_scales_bit_exact_with_gguf(name, qtype):
    """random block bytes with float16 scales +-0, +-inf, NaN, the smallest subnormal, the
    largest finite and the largest subnormal (d and dmin for q4_k): gguf.quants.dequantize's
    floats bit for bit (NaN for NaN)"""
    quants, T = _gguf()
    b = dev(name)
    rng = np.random.default_rng(14)
    fmt = llm.QTYPES[qtype]
    raw = rng.integers(0, 256, (7, 3 * fmt.block_bytes), dtype=np.uint8)
    blk = raw.reshape(7, 3, fmt.block_bytes)
    for i, s in enumerate([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x7BFF, 0x03FF]):
        blk[i % 7, i % 3, 0:2] = (s & 0xFF, s >> 8)
        if qtype == "q4_k":
            blk[(i + 1) % 7, (i + 2) % 3, 2:4] = (s & 0xFF, s >> 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = quants.dequantize(raw, T[qtype])
    _same_bits(get(llm.dequantize(llm.QTensor(qtype, (7, 3 * fmt.block), on(raw, b)))), want)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0", "q4_k"])
def test_gguf_py_test_quants_cases(name, qtype):
    """gguf-py's tests/test_quants.py, its cases that apply here (rows of 1024, smaller): a
    normal tensor with an all-zero row quantized (q4_0, q8_0) bit for bit as gguf, and random
    float16 values in [0, 1) viewed as block bytes dequantized bit for bit as gguf"""
    quants, T = _gguf()
    b = dev(name)
    rng = np.random.default_rng(27)
    rows = 2 if small(b) else 16
    r = rng.standard_normal((rows, 1024)).astype(F32)
    r[0] = 0
    if qtype != "q4_k":
        q = llm.quantize(on(r, b), qtype)
        np.testing.assert_array_equal(get(q.data), quants.quantize(r, T[qtype]))
        _same_bits(get(llm.dequantize(q)), quants.dequantize(quants.quantize(r, T[qtype]), T[qtype]))
    fmt = llm.QTYPES[qtype]
    nbytes = 1024 // fmt.block * fmt.block_bytes
    rq = rng.random((rows, nbytes // 2)).astype(F16).view(np.uint8)
    got = get(llm.dequantize(llm.QTensor(qtype, (rows, 1024), on(rq, b))))
    _same_bits(got, quants.dequantize(rq, T[qtype]))


def test_q4_k_quantize_round_trip_within_the_format_bound():
    """Q4_K: gguf has no quantizer, so the round trip: gguf dequantizes our bytes to our floats
    bit for bit, each weight within one quantization step (d * sc + dmin * m span / 15) plus
    the float16 rounding of the scales; all-zero rows stay zero"""
    quants, T = _gguf()
    w = np.random.default_rng(15).standard_normal((4, 512)).astype(F32)
    q = llm.quantize(w, "q4_k")
    d = llm.dequantize(q)
    _same_bits(d, quants.dequantize(np.asarray(q.data), T["q4_k"]))
    sub = w.reshape(4, 16, 32)
    span = (sub.max(-1) - np.minimum(sub.min(-1), 0)).repeat(32, -1).reshape(4, 512)
    assert (np.abs(d - w) <= span / 15 * 1.1 + 1e-3).all()
    assert (llm.dequantize(llm.quantize(np.zeros((2, 256), F32), "q4_k")) == 0).all()


# --- matmul: ggml's mul_mat shapes -------------------------------------------------------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("qtype", ["q4_0", "q8_0", "q4_k", None])
def test_matmul_ggml_mul_mat_m16_n1_to_9_k256(name, qtype):
    """test_mul_mat(type_a, f32, m = 16, n = 1..9, k = 256): [16, 256] (quantized or float32)
    times [256, n], and the GEMV with a [256] vector, within float32 dot-product error of the
    float64 product of the dequantized weights"""
    b = dev(name)
    rng = np.random.default_rng(16)
    a = rng.standard_normal((16, 256)).astype(F32)
    A = llm.quantize(on(a, b), qtype) if qtype else on(a, b)
    ad = get(llm.dequantize(A)).astype(np.float64) if qtype else a.astype(np.float64)
    for n in ((1, 2, 5, 9) if small(b) else range(1, 10)):
        x = rng.standard_normal((256, n)).astype(F32)
        want = ad @ x
        got = get(llm.matmul(A, on(x, b)))
        assert got.shape == (16, n) and got.dtype == F32
        bound = 256 * ulps(F32, 1) * (np.abs(ad) @ np.abs(x)).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=bound, err_msg=f"n={n}")
        if n == 1:
            g1 = get(llm.matmul(A, on(x[:, 0].copy(), b)))
            assert g1.shape == (16,)
            np.testing.assert_allclose(g1, want[:, 0], rtol=0, atol=bound)


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_matmul_ggml_2880_wide_rows(qtype):
    """test_mul_mat(q4_0/q8_0, f32, 2880, 32, 2880) with a quarter of the rows (CPU): K = 2880
    is 90 blocks, not a multiple of any chunk of 8 or 16 blocks"""
    rng = np.random.default_rng(17)
    a = rng.standard_normal((720, 2880)).astype(F32)
    x = rng.standard_normal((2880, 32)).astype(F32)
    A = llm.quantize(a, qtype)
    ad = llm.dequantize(A).astype(np.float64)
    bound = 2880 * ulps(F32, 1) * (np.abs(ad) @ np.abs(x)).max()
    np.testing.assert_allclose(llm.matmul(A, x), ad @ x, rtol=0, atol=bound)
    np.testing.assert_allclose(llm.matmul(A, x[:, 3].copy()), ad @ x[:, 3], rtol=0, atol=bound)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("adt, bdt", [(F16, F32), (F16, F16), (F32, F16), ("bfloat16", F32), ("bfloat16", "bfloat16"),
                                      (F16, "bfloat16")])
def test_matmul_float16_and_bfloat16_weights(name, adt, bdt):
    """test_mul_mat(F16, F32 / F16, m = 16, n = 1..9, k = 256) and the GEMV: a float16 or
    bfloat16 [M, K] (GGUF's F16/BF16 weights) times float32/float16/bfloat16 b, summed in
    float32; a float32 result (NumPy's and ggml's for mixed dtypes), the 16-bit dtype when
    both operands have it (NumPy, torch), rounded once. It was a ValueError naming 'a'."""
    import ml_dtypes
    adt, bdt = (np.dtype(ml_dtypes.bfloat16) if d == "bfloat16" else np.dtype(d) for d in (adt, bdt))
    skip_16bit(name, F16)
    b = dev(name)
    rng = np.random.default_rng(22)
    a = rng.standard_normal((16, 256)).astype(adt)
    odt = adt if adt == bdt else np.dtype(F32)
    tol = {np.dtype(F16): 2 * float(np.finfo(F16).eps), np.dtype(ml_dtypes.bfloat16): 2 * 2.0 ** -8}.get(odt, 1e-5)
    for n in ((None, 1, 9) if small(b) else (None, 1, 2, 5, 9)):
        x = rng.standard_normal((256,) if n is None else (256, n)).astype(bdt)
        got = get(llm.matmul(on(a, b), on(x, b)))
        assert got.dtype == odt and got.shape == ((16,) if n is None else (16, n))
        want = a.astype(np.float64) @ x.astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * np.abs(want).max(),
                                   err_msg=f"n={n}")
    z = get(llm.matmul(on(np.zeros((3, 0), adt), b), on(np.zeros((0, 2), bdt), b)))
    assert z.dtype == odt and z.shape == (3, 2) and (z == 0).all()


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0", "q4_k"])
def test_quantize_takes_float16_and_bfloat16_and_keeps_torch_kind(qtype):
    """quantize of float16/bfloat16 weights gives the bytes of their float32 values (gguf's
    quantize takes float16 the same way); a torch w gives a torch uint8 data tensor (the
    result's kind is the argument's, SPEC 10; it was a tk.Array), which dequantize and matmul
    take and answer in torch; a float16 w was a ValueError"""
    import ml_dtypes
    rng = np.random.default_rng(23)
    w = rng.standard_normal((3, 256)).astype(F32)
    for dt in (F16, ml_dtypes.bfloat16):
        w16 = w.astype(dt)
        want = llm.quantize(w16.astype(F32), qtype)
        got = llm.quantize(w16, qtype)
        np.testing.assert_array_equal(got.data, want.data)
        if qtype != "q4_k":
            quants, T = _gguf()
            if dt == F16:
                np.testing.assert_array_equal(got.data, quants.quantize(w16, T[qtype]))
    if torch is None:
        return
    q = llm.quantize(torch.tensor(w), qtype)
    assert isinstance(q.data, torch.Tensor) and q.data.dtype == torch.uint8
    np.testing.assert_array_equal(q.data.numpy(), llm.quantize(w, qtype).data)
    d = llm.dequantize(q)
    assert isinstance(d, torch.Tensor)
    x = torch.tensor(rng.standard_normal(256).astype(F32))
    y = llm.matmul(q, x)
    assert isinstance(y, torch.Tensor)
    np.testing.assert_allclose(y.numpy(), d.double().numpy() @ x.double().numpy(), rtol=1e-5, atol=1e-4)


# --- attention: flash_attn_ext's head dims, key counts, GQA ------------------------------------

def _sdpa(q, k, v, causal=False, scale=None):
    """torch's SDPA in float64; keys/values repeated for grouped-query; causal with
    q_len != k_len aligned bottom-right (torch's causal_lower_right, docs/llm.md)"""
    rep = q.shape[1] // k.shape[1]
    tq, tk_, tv = (torch.tensor(np.asarray(a, np.float64)) for a in (q, k, v))
    tk_, tv = tk_.repeat_interleave(rep, 1), tv.repeat_interleave(rep, 1)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if causal and q.shape[2] != k.shape[2]:
        from torch.nn.attention.bias import causal_lower_right
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return sdpa(tq, tk_, tv, attn_mask=causal_lower_right(q.shape[2], k.shape[2]), scale=scale).numpy()
    return sdpa(tq, tk_, tv, is_causal=causal, scale=scale).numpy()


# (head_dim, keys, queries, q heads, kv heads) after test_flash_attn_ext: hsk 40..256, kv 113
# (and 512 with GQA 12:1 at head dim 128), nb 1, 3, 32, 75
FA = [(64, 113, 1, 1, 1), (64, 113, 3, 4, 1), (128, 512, 32, 12, 1), (40, 113, 3, 4, 4), (72, 113, 75, 4, 2),
      (80, 33, 3, 4, 4), (96, 17, 5, 2, 2), (192, 33, 3, 4, 1), (256, 31, 3, 2, 1)]
FA_SMALL = [(64, 13, 1, 1, 1), (40, 13, 3, 4, 4), (72, 9, 5, 4, 2), (128, 12, 3, 12, 1)]


@needs_torch
@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_ggml_head_dims_key_counts_and_gqa(name, causal):
    b = dev(name)
    rng = np.random.default_rng(18)
    for D, Sk, Sq, H, Hk in (FA_SMALL if small(b) else FA):
        q = rng.standard_normal((2, H, Sq, D)).astype(F32)
        k, v = (rng.standard_normal((2, Hk, Sk, D)).astype(F32) for _ in range(2))
        got = get(llm.flash_attention(on(q, b), on(k, b), on(v, b), causal=causal))
        assert got.shape == q.shape and got.dtype == F32
        np.testing.assert_allclose(got, _sdpa(q, k, v, causal), rtol=2e-5, atol=2e-5,
                                   err_msg=f"D={D} Sk={Sk} Sq={Sq} H={H} Hk={Hk}")


@needs_torch
def test_flash_attention_permuted_inputs_scale_and_torch_tensors():
    """flash_attn_ext's permuted case: q/k/v stored [batch, seq, heads, head_dim] and passed as
    [batch, heads, seq, head_dim] views; an explicit scale; torch tensors in, a torch tensor out;
    float16 inputs (float16 result, float32 accumulation)"""
    rng = np.random.default_rng(19)
    q = rng.standard_normal((2, 5, 4, 64)).astype(F32).transpose(0, 2, 1, 3)
    k = rng.standard_normal((2, 9, 2, 64)).astype(F32).transpose(0, 2, 1, 3)
    v = rng.standard_normal((2, 9, 2, 64)).astype(F32).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(llm.flash_attention(q, k, v, scale=0.3), _sdpa(q, k, v, False, 0.3), rtol=2e-5, atol=2e-5)
    got = llm.flash_attention(*(torch.tensor(a) for a in (q, k, v)), causal=True)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), _sdpa(q, k, v, True), rtol=2e-5, atol=2e-5)
    qh, kh, vh = (np.ascontiguousarray(a).astype(F16) for a in (q, k, v))
    got = llm.flash_attention(qh, kh, vh, causal=True)
    assert got.dtype == F16
    np.testing.assert_allclose(got.astype(np.float64), _sdpa(qh, kh, vh, True), rtol=2e-3, atol=2e-3)


@needs_torch
@pytest.mark.parametrize("name", backends())
def test_flash_decode_gqa_head_dims_from_int_and_device_count(name):
    """one query per head over the first n keys of a cache: GQA 4:1 and 12:1, head dims 40 to
    128, n from a Python int and from a device-resident int32 [1]"""
    b = dev(name)
    rng = np.random.default_rng(20)
    for D, H, Hk, L, n in [(64, 8, 2, 40, 40), (128, 12, 1, 100, 37), (40, 4, 4, 10, 1), (72, 4, 2, 70, 69)]:
        if small(b):
            L, n = min(L, 12), min(n, 11)
        q = rng.standard_normal((2, H, D)).astype(F32)
        kc, vc = (rng.standard_normal((2, Hk, L, D)).astype(F32) for _ in range(2))
        want = _sdpa(q[:, :, None], kc[:, :, :n], vc[:, :, :n])[:, :, 0]
        np.testing.assert_allclose(get(llm.flash_decode(on(q, b), on(kc, b), on(vc, b), n)), want, rtol=2e-5, atol=2e-5)
        cnt = tk.asarray(np.array([n], np.int32), backend=b)
        got = llm.flash_decode(*(tk.asarray(a, backend=b) for a in (q, kc, vc)), cnt)
        np.testing.assert_allclose(get(got), want, rtol=2e-5, atol=2e-5)


# --- the API contract: every function, every array kind, out=, stream= --------------------------

def _contract_cases(rng):
    """name -> (call(A, out, stream), float64 reference, result shape, result dtype); A maps a
    NumPy array to the array kind under test."""
    x = rng.uniform(0.5, 2, (3, 5, 33)).astype(F32)
    y = rng.uniform(0.5, 2, (3, 5, 33)).astype(F32)
    w = rng.uniform(-1, 1, 33).astype(F32)
    S, D = 7, 16
    cos, sin = (rng.uniform(-1, 1, (S, D // 2)).astype(F32) for _ in range(2))
    xr = rng.standard_normal((2, 3, S, D)).astype(F32)
    tab, idx = rng.standard_normal((11, 33)).astype(F32), np.array([3, 0, 10, 3], np.int32)
    q, k = rng.standard_normal((1, 2, 5, 16)).astype(F32), rng.standard_normal((1, 1, 6, 16)).astype(F32)
    qd = rng.standard_normal((1, 2, 16)).astype(F32)
    mat, vec = rng.standard_normal((4, 33)).astype(F32), rng.standard_normal(33).astype(F32)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    xs = np.moveaxis(x64 * 0.5, 1, -1)
    e1 = np.exp(xs - xs.max(-1, keepdims=True))
    sm1 = np.moveaxis(e1 / e1.sum(-1, keepdims=True), -1, 1)
    return {
        "add": (lambda A, o, s: llm.add(A(x), A(y), out=o, stream=s), x64 + y, x.shape, F32),
        "div_scalar": (lambda A, o, s: llm.div(A(x), 3.0, out=o, stream=s), x / F32(3), x.shape, F32),
        "sub_scalar_first": (lambda A, o, s: llm.sub(2.0, A(x), out=o, stream=s), F32(2) - x, x.shape, F32),
        "pow": (lambda A, o, s: llm.pow(A(x), A(y), out=o, stream=s), x64 ** y, x.shape, F32),
        "exp": (lambda A, o, s: llm.exp(A(x), out=o, stream=s), np.exp(x64), x.shape, F32),
        "rsqrt": (lambda A, o, s: llm.rsqrt(A(x), out=o, stream=s), 1 / np.sqrt(x64), x.shape, F32),
        "tanh_grad": (lambda A, o, s: llm.tanh_grad(A(x), A(y), out=o, stream=s), (1 - np.tanh(x64) ** 2) * y,
                      x.shape, F32),
        "swiglu": (lambda A, o, s: llm.swiglu(A(x), A(y), out=o, stream=s), x64 / (1 + np.exp(-x64)) * y, x.shape, F32),
        "cast": (lambda A, o, s: llm.cast(A(x), np.float16, out=o, stream=s), x.astype(F16), x.shape, F16),
        "rms_norm": (lambda A, o, s: llm.rms_norm(A(x), A(w), out=o, stream=s), _rms_ref(x, w, 1e-6), x.shape, F32),
        "softmax": (lambda A, o, s: llm.softmax(A(x), out=o, stream=s), e / e.sum(-1, keepdims=True), x.shape, F32),
        "softmax_axis1": (lambda A, o, s: llm.softmax(A(x), axis=1, scale=0.5, out=o, stream=s), sm1, x.shape, F32),
        "sum": (lambda A, o, s: llm.sum(A(x), 1, out=o, stream=s), x64.sum(1), (3, 33), F32),
        "argmax": (lambda A, o, s: llm.argmax(A(vec), out=o, stream=s), np.argmax(vec), (), np.int32),
        "gather": (lambda A, o, s: llm.gather(A(tab), A(idx), out=o, stream=s), tab[idx], (4, 33), F32),
        "transpose": (lambda A, o, s: llm.transpose(A(x), (2, 0, 1), out=o, stream=s), x.transpose(2, 0, 1),
                      (33, 3, 5), F32),
        "repeat": (lambda A, o, s: llm.repeat(A(x), 2, 1, out=o, stream=s), np.repeat(x, 2, 1), (3, 10, 33), F32),
        "rope": (lambda A, o, s: llm.rope(A(xr), A(cos), A(sin), out=o, stream=s), _rope_ref(xr, cos, sin), xr.shape, F32),
        "matmul": (lambda A, o, s: llm.matmul(A(mat), A(vec), out=o, stream=s), mat.astype(np.float64) @ vec, (4,), F32),
        "flash_attention": (lambda A, o, s: llm.flash_attention(A(q), A(k), A(k), out=o, stream=s),
                            _sdpa(q, k, k) if torch is not None else None, q.shape, F32),
        "flash_decode": (lambda A, o, s: llm.flash_decode(A(qd), A(k), A(k), 4, out=o, stream=s),
                         _sdpa(qd[:, :, None], k[:, :, :4], k[:, :, :4])[:, :, 0] if torch is not None else None,
                         qd.shape, F32),
    }


def _check(got, ref, dt):
    got = get(got)
    assert got.dtype == dt
    if dt == np.int32:
        assert got.shape == () and int(got) == int(ref)
        return
    t = 2e-3 if dt == F16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=t, atol=t)


CONTRACT = sorted(_contract_cases(np.random.default_rng(0)))


@needs_torch
@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("fn", CONTRACT)
def test_every_function_with_each_array_kind_out_and_stream(name, fn):
    """NumPy in -> NumPy out, torch -> torch, tk.Array -> tk.Array; out= written in place and
    returned; out= on a stream (after synchronize); out= of a wrong dtype or shape is a
    ValueError naming 'out'"""
    b = dev(name)
    call, ref, shp, dt = _contract_cases(np.random.default_rng(0))[fn]
    kinds = {"tk": (lambda a: tk.asarray(a, backend=b), tk.Array)}
    if b.name == "CPU":
        kinds.update(np=(lambda a: a, np.ndarray), torch=(lambda a: torch.tensor(a), torch.Tensor))
    for kind, (A, typ) in kinds.items():
        r = call(A, None, None)
        assert isinstance(r, typ), (kind, type(r))
        _check(r, ref, dt)
        o = A(np.zeros(shp, dt))
        assert call(A, o, None) is o
        _check(o, ref, dt)
        s = b.stream()
        o2 = A(np.zeros(shp, dt))
        assert call(A, o2, s) is o2
        s.synchronize()
        _check(o2, ref, dt)
        bad_dt = np.int32 if dt != np.int32 else F32
        for bad in (A(np.zeros(shp, bad_dt)), A(np.zeros(shp + (1,), dt))):
            with pytest.raises(ValueError, match="'out'"):
                call(A, bad, None)


@needs_torch
@pytest.mark.parametrize("fn", CONTRACT)
def test_every_function_writes_a_strided_out_or_names_it(fn):
    """an out= that is a strided NumPy view: written through its strides (the elements between
    untouched), or refused by the functions that write flat rows (matmul; docs/llm.md) with a
    ValueError naming 'out' - never a silently unwritten copy"""
    call, ref, shp, dt = _contract_cases(np.random.default_rng(0))[fn]
    if not shp:
        pytest.skip("a 0-d result has no strided view")
    big = np.zeros(shp[:-1] + (2 * shp[-1],), dt)
    o = big[..., ::2]
    if fn == "matmul":
        with pytest.raises(ValueError, match="'out'"):
            call(lambda a: a, o, None)
        return
    assert call(lambda a: a, o, None) is o
    _check(o, ref, dt)
    assert (big[..., 1::2] == 0).all()


@pytest.mark.parametrize("fn", CONTRACT)
def test_every_function_refuses_a_stream_of_another_backend(fn):
    """a stream= of another backend: an error naming 'stream' (tk.LaunchError and ValueError),
    before any work"""
    if torch is None and fn.startswith("flash"):
        pytest.skip("torch is not installed (the reference)")
    call = _contract_cases(np.random.default_rng(0))[fn][0]
    other = tk.backend("INTERP").stream()
    with pytest.raises(tk.LaunchError, match="'stream'"):
        call(lambda a: a, None, other)


@pytest.mark.parametrize("name", backends())
def test_out_may_be_an_input_where_the_function_works_in_place(name):
    """docs/llm.md: an out that is the very same view as an input is fine for the elementwise
    and row-wise functions (each element or row read before it is written): every such
    function with out= each of its same-shape inputs equals the out-of-place result"""
    b = dev(name)
    rng = np.random.default_rng(26)
    x = rng.uniform(0.5, 2, (3, 5, 33)).astype(F32)
    y = rng.uniform(0.5, 2, (3, 5, 33)).astype(F32)
    w = rng.uniform(-1, 1, 33).astype(F32)
    cos, sin = (rng.uniform(-1, 1, (5, 8)).astype(F32) for _ in range(2))
    calls = {"add": (lambda p, q, o: llm.add(p, q, out=o), 2), "sub": (lambda p, q, o: llm.sub(p, q, out=o), 2),
             "mul": (lambda p, q, o: llm.mul(p, q, out=o), 2), "div": (lambda p, q, o: llm.div(p, q, out=o), 2),
             "pow": (lambda p, q, o: llm.pow(p, q, out=o), 2), "pow 2": (lambda p, q, o: llm.pow(p, 2, out=o), 1),
             "tanh_grad": (lambda p, q, o: llm.tanh_grad(p, q, out=o), 2),
             "swiglu": (lambda p, q, o: llm.swiglu(p, q, out=o), 2), "exp": (lambda p, q, o: llm.exp(p, out=o), 1),
             "rsqrt": (lambda p, q, o: llm.rsqrt(p, out=o), 1),
             "rms_norm": (lambda p, q, o: llm.rms_norm(p, on(w, b), out=o), 1),
             "softmax": (lambda p, q, o: llm.softmax(p, out=o), 1),
             "softmax axis 0": (lambda p, q, o: llm.softmax(p, axis=0, scale=0.5, out=o), 1),
             "rope": (lambda p, q, o: llm.rope(p, on(cos, b), on(sin, b), out=o), 1)}
    for fn, (call, n_in) in calls.items():
        want = get(call(on(x, b), on(y, b), None))
        for i in range(n_in):
            ins = [on(x.copy(), b), on(y.copy(), b)]
            assert call(ins[0], ins[1], ins[i]) is ins[i]
            np.testing.assert_array_equal(get(ins[i]), want, err_msg=f"{fn} out=input {i}")


# --- documented errors -------------------------------------------------------------------------

def _errors(b):
    X, W = on(np.ones((3, 8), F32), b), on(np.ones(8, F32), b)
    o = lambda *s, dt=F32: on(np.ones(s, dt), b)      # noqa: E731
    return {
        "add shape": ("b", lambda: llm.add(X, o(2, 8))),
        "add dtype": ("b", lambda: llm.add(X, o(3, 8, dt=np.int32))),
        "add rank 5": ("a", lambda: llm.add(o(1, 1, 1, 1, 2), 1.0)),
        "add str": ("b", lambda: llm.add(X, "x")),
        "add list": ("a", lambda: llm.add([1.0, 2.0], X)),
        "exp int": ("x", lambda: llm.exp(o(3, dt=np.int32))),
        "pow shape": ("y", lambda: llm.pow(X, o(3))),
        "tanh_grad shape": ("g", lambda: llm.tanh_grad(X, o(3))),
        "swiglu shape": ("w3", lambda: llm.swiglu(X, o(3, 7))),
        "cast int": ("dtype", lambda: llm.cast(X, np.int32)),
        "cast unknown": ("dtype", lambda: llm.cast(X, "banana")),
        "fill str": ("value", lambda: llm.fill(o(3), "a")),
        "rms_norm w": ("w", lambda: llm.rms_norm(X, o(7))),
        "rms_norm w dtype": ("w", lambda: llm.rms_norm(X, o(8, dt=np.int32))),
        "rms_norm residual": ("residual", lambda: llm.rms_norm(X, W, residual=o(2, 8))),
        "rms_norm eps": ("eps", lambda: llm.rms_norm(X, W, eps="a")),
        "rope sin": ("sin", lambda: llm.rope(o(1, 2, 5, 8), o(5, 4), o(5, 3))),
        "softmax axis": ("axis", lambda: llm.softmax(X, axis=2)),
        "softmax axis float": ("axis", lambda: llm.softmax(X, axis=1.0)),
        "softmax scale": ("scale", lambda: llm.softmax(X, scale="a")),
        "sum axis": ("axis", lambda: llm.sum(X, 5)),
        "argmax 2-D": ("x", lambda: llm.argmax(X)),
        "argmax empty": ("x", lambda: llm.argmax(o(0))),
        "gather float indices": ("indices", lambda: llm.gather(X, o(2))),
        "gather 2-D indices": ("indices", lambda: llm.gather(X, o(2, 2, dt=np.int32))),
        "gather 1-D table": ("table", lambda: llm.gather(W, o(2, dt=np.int32))),
        "transpose repeated axis": ("axes", lambda: llm.transpose(X, (0, 0))),
        "transpose axes count": ("axes", lambda: llm.transpose(X, (0, 1, 2))),
        "repeat negative": ("repeats", lambda: llm.repeat(X, -1, 0)),
        "repeat axis": ("axis", lambda: llm.repeat(X, 2, 2)),
        "quantize K": ("w", lambda: llm.quantize(o(2, 33), "q8_0")),
        "quantize qtype": ("qtype", lambda: llm.quantize(o(2, 32), "q5_0")),
        "quantize 1-D": ("w", lambda: llm.quantize(o(32), "q8_0")),
        "QTensor data shape": ("data", lambda: llm.QTensor("q8_0", (2, 32), o(2, 33, dt=np.uint8))),
        "QTensor data dtype": ("data", lambda: llm.QTensor("q8_0", (2, 32), o(2, 34, dt=np.int32))),
        "QTensor shape": ("shape", lambda: llm.QTensor("q8_0", (2, 33), o(2, 34, dt=np.uint8))),
        "dequantize array": ("qt", lambda: llm.dequantize(X)),
        "matmul K": ("b", lambda: llm.matmul(X, o(7, 2))),
        "matmul quantized K": ("b", lambda: llm.matmul(llm.quantize(o(2, 32), "q8_0"), o(31))),
        "matmul b dtype": ("b", lambda: llm.matmul(X, o(8, 2, dt=np.int32))),
        "matmul a 3-D": ("a", lambda: llm.matmul(o(2, 3, 8), o(8))),
        "flash_attention heads": ("k", lambda: llm.flash_attention(o(1, 3, 4, 8), o(1, 2, 4, 8), o(1, 2, 4, 8))),
        "flash_attention head_dim": ("k", lambda: llm.flash_attention(o(1, 2, 4, 8), o(1, 2, 4, 7), o(1, 2, 4, 7))),
        "flash_attention v": ("v", lambda: llm.flash_attention(o(1, 2, 4, 8), o(1, 2, 4, 8), o(1, 2, 5, 8))),
        "flash_attention batch": ("k", lambda: llm.flash_attention(o(2, 2, 4, 8), o(1, 2, 4, 8), o(1, 2, 4, 8))),
        "flash_attention 3-D": ("q", lambda: llm.flash_attention(o(2, 4, 8), o(2, 4, 8), o(2, 4, 8))),
        "flash_attention scale": ("scale", lambda: llm.flash_attention(o(1, 2, 4, 8), o(1, 2, 4, 8), o(1, 2, 4, 8),
                                                                       scale="x")),
        "flash_decode heads": ("k_cache", lambda: llm.flash_decode(o(1, 3, 8), o(1, 2, 4, 8), o(1, 2, 4, 8), 2)),
        "flash_decode kv_len": ("kv_len", lambda: llm.flash_decode(o(1, 2, 8), o(1, 2, 4, 8), o(1, 2, 4, 8), 5)),
        "flash_decode kv_len float": ("kv_len", lambda: llm.flash_decode(o(1, 2, 8), o(1, 2, 4, 8), o(1, 2, 4, 8), 2.0)),
        "flash_decode kv_len array": ("kv_len", lambda: llm.flash_decode(o(1, 2, 8), o(1, 2, 4, 8), o(1, 2, 4, 8), o(1))),
        "flash_decode v_cache": ("v_cache", lambda: llm.flash_decode(o(1, 2, 8), o(1, 2, 4, 8), o(1, 2, 3, 8), 2)),
    }


ERRORS = sorted(_errors(tk.CPU()))


@pytest.mark.parametrize("name", [p for p in backends() if p.values[0] in ("CPU", "CL")])
@pytest.mark.parametrize("case", ERRORS)
def test_documented_errors_name_the_argument(name, case):
    """SPEC 10: a shape or dtype mismatch is a ValueError naming the argument (in the
    'llm.fn: argument ...' grammar of docs/llm.md)"""
    arg, call = _errors(dev(name))[case]
    with pytest.raises(ValueError, match=rf"^llm\.\w+: argument '{arg}'"):
        call()


# --- float16 rows: float32 accumulation --------------------------------------------------------

@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("n", [1, 31, 33, 4097])
def test_float16_rows_accumulate_in_float32(name, n):
    """float16 rms_norm / softmax / sum / argmax at odd row lengths: float16 results within 2
    float16 ulps of the float64 result (a float16 accumulator would be off by far more at
    4097), as torch computes them from float32"""
    skip_16bit(name, F16)
    b = dev(name)
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((3, n)) * 8).astype(F16)
    w = rng.uniform(-1, 1, n).astype(F16)
    xf = x.astype(np.float64)
    tol = 2 * float(np.finfo(F16).eps)
    r = get(llm.rms_norm(on(x, b), on(w, b)))
    assert r.dtype == F16
    np.testing.assert_allclose(r.astype(np.float64), _rms_ref(x, w, 1e-6), rtol=tol, atol=tol)
    e = np.exp(xf - xf.max(-1, keepdims=True))
    s = get(llm.softmax(on(x, b)))
    assert s.dtype == F16
    np.testing.assert_allclose(s.astype(np.float64), e / e.sum(-1, keepdims=True), rtol=tol, atol=1e-7)
    sm = get(llm.sum(on(x, b), 1))
    assert sm.dtype == F16
    np.testing.assert_allclose(sm.astype(np.float64), xf.sum(1), rtol=tol, atol=tol * np.abs(xf).sum(1).max())
    assert int(get(llm.argmax(on(x[1].copy(), b)))) == int(np.argmax(x[1]))


# --- gather out of range in debug mode ---------------------------------------------------------

@pytest.mark.parametrize("name", backends())
def test_gather_out_of_range_is_an_index_error_in_debug_mode(name):
    """indices V, -1 and 2**31 - 1 into a V-row table: IndexError with a backend made with
    debug=True; in-range int32 (and int64 where the backend has it) indices work there"""
    bd = {"CPU": tk.CPU, "INTERP": tk.Interpreter, "CL": tk.OpenCL, "WEBGPU": tk.WebGPU}[name](debug=True)
    tab = tk.asarray(np.arange(20, dtype=F32).reshape(5, 4), backend=bd)
    for bad in (5, -1, 2**31 - 1):
        with pytest.raises(IndexError):
            llm.gather(tab, tk.asarray(np.array([0, bad], np.int32), backend=bd))
    for idt in ((np.int32,) if name == "WEBGPU" else (np.int32, np.int64)):
        got = llm.gather(tab, tk.asarray(np.array([4, 0], idt), backend=bd))
        np.testing.assert_array_equal(get(got), np.arange(20, dtype=F32).reshape(5, 4)[[4, 0]])


# --- end to end: a tiny Llama in a real .gguf file, decoded with llm calls only -----------------

def _write_tiny_llama(path, rng, dim, n_heads, n_kv, hidden, vocab, n_layers):
    """A Llama-shaped model written with gguf's writer: float16 embeddings, q8_0 attention,
    q4_0 MLP, q8_0 output, float32 norms (GGUF stores [M, K] weights as ggml's {K, M})."""
    gguf = pytest.importorskip("gguf")
    from gguf import quants
    T = gguf.GGMLQuantizationType
    hd = dim // n_heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(n_layers)
    w.add_embedding_length(dim)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    ref = {}

    def put(name, a, qt=None):
        if qt is None:
            w.add_tensor(name, a)
            ref[name] = a.astype(np.float64)
        else:
            raw = quants.quantize(a, qt)
            w.add_tensor(name, raw, raw_dtype=qt)
            ref[name] = quants.dequantize(raw, qt).astype(np.float64)

    def mat(m, k):
        return (rng.standard_normal((m, k)) / np.sqrt(k)).astype(F32)

    put("token_embd.weight", rng.standard_normal((vocab, dim)).astype(F16))
    for i in range(n_layers):
        p = f"blk.{i}."
        put(p + "attn_norm.weight", rng.uniform(0.5, 1.5, dim).astype(F32))
        put(p + "attn_q.weight", mat(n_heads * hd, dim), T.Q8_0)
        put(p + "attn_k.weight", mat(n_kv * hd, dim), T.Q8_0)
        put(p + "attn_v.weight", mat(n_kv * hd, dim), T.Q8_0)
        put(p + "attn_output.weight", mat(dim, n_heads * hd), T.Q8_0)
        put(p + "ffn_norm.weight", rng.uniform(0.5, 1.5, dim).astype(F32))
        put(p + "ffn_gate.weight", mat(hidden, dim), T.Q4_0)
        put(p + "ffn_up.weight", mat(hidden, dim), T.Q4_0)
        put(p + "ffn_down.weight", mat(dim, hidden), T.Q4_0)
    put("output_norm.weight", rng.uniform(0.5, 1.5, dim).astype(F32))
    put("output.weight", mat(vocab, dim), T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ref


@needs_torch
def test_tiny_llama_from_a_gguf_file_decodes_as_torch(tmp_path):
    """A stranger's decode loop: load_gguf, then per token gather -> (rms_norm -> q/k/v GEMVs ->
    rope_at at the device counter -> kv_append -> flash_decode over counter + 1 keys (GQA) ->
    output GEMV -> residual rms_norm -> swiglu MLP -> add) per layer -> rms_norm -> logits ->
    argmax, with one device-resident int32 counter advanced by counter_add; the logits match
    the same model in torch float64 (weights dequantized by gguf) token after token"""
    pytest.importorskip("gguf")
    dim, H, Hk, hidden, V, L, max_len = 64, 4, 2, 96, 80, 2, 16
    hd = dim // H
    rng = np.random.default_rng(21)
    ref = _write_tiny_llama(tmp_path / "tiny.gguf", rng, dim, H, Hk, hidden, V, L)
    m = llm.load_gguf(tmp_path / "tiny.gguf")
    assert isinstance(m["blk.0.attn_q.weight"], llm.QTensor) and m["blk.0.attn_q.weight"].qtype == "q8_0"
    assert m["blk.1.ffn_down.weight"].qtype == "q4_0" and m["blk.1.ffn_down.weight"].shape == (dim, hidden)
    assert m["token_embd.weight"].dtype == F16 and m["token_embd.weight"].shape == (V, dim)
    cos, sin = _tables(max_len, hd)
    eps = 1e-5
    kc = [np.zeros((1, Hk, max_len, hd), F32) for _ in range(L)]
    vc = [np.zeros((1, Hk, max_len, hd), F32) for _ in range(L)]
    pos = llm.new_counter(0, like=cos)

    def step(tok):
        x = llm.cast(llm.gather(m["token_embd.weight"], np.array([tok], np.int32)), F32)[0]
        for i in range(L):
            p = f"blk.{i}."
            h = llm.rms_norm(x, m[p + "attn_norm.weight"], eps=eps)
            q = llm.matmul(m[p + "attn_q.weight"], h).reshape(1, H, 1, hd)
            k = llm.matmul(m[p + "attn_k.weight"], h).reshape(1, Hk, 1, hd)
            v = llm.matmul(m[p + "attn_v.weight"], h).reshape(1, Hk, 1, hd)
            q, k = llm.rope_at(q, cos, sin, pos), llm.rope_at(k, cos, sin, pos)
            llm.kv_append(kc[i], k, pos)
            llm.kv_append(vc[i], v, pos)
            a = llm.flash_decode(q.reshape(1, H, hd), kc[i], vc[i], pos, offset=1)
            o = llm.matmul(m[p + "attn_output.weight"], a.reshape(dim))
            h, x = llm.rms_norm(o, m[p + "ffn_norm.weight"], eps=eps, residual=x)
            g = llm.swiglu(llm.matmul(m[p + "ffn_gate.weight"], h), llm.matmul(m[p + "ffn_up.weight"], h))
            x = llm.add(x, llm.matmul(m[p + "ffn_down.weight"], g))
        logits = llm.matmul(m["output.weight"], llm.rms_norm(x, m["output_norm.weight"], eps=eps))
        llm.counter_add(pos, 1)
        return logits

    T = {k: torch.tensor(v) for k, v in ref.items()}
    tcos, tsin = torch.tensor(cos, dtype=torch.float64), torch.tensor(sin, dtype=torch.float64)
    tk_cache = [[] for _ in range(L)]
    tv_cache = [[] for _ in range(L)]

    def rms(x, w):
        return torch.nn.functional.rms_norm(x, (dim,), w, eps=eps)

    def rope(x, t):                   # x [heads, hd]
        c, s, h2 = tcos[t], tsin[t], hd // 2
        return torch.cat([x[:, :h2] * c - x[:, h2:] * s, x[:, h2:] * c + x[:, :h2] * s], -1)

    def ref_step(tok, t):
        x = T["token_embd.weight"][tok]
        for i in range(L):
            p = f"blk.{i}."
            h = rms(x, T[p + "attn_norm.weight"])
            q = rope((T[p + "attn_q.weight"] @ h).reshape(H, hd), t)
            tk_cache[i].append(rope((T[p + "attn_k.weight"] @ h).reshape(Hk, hd), t))
            tv_cache[i].append((T[p + "attn_v.weight"] @ h).reshape(Hk, hd))
            K = torch.stack(tk_cache[i], 1).repeat_interleave(H // Hk, 0)      # [H, t + 1, hd]
            Vv = torch.stack(tv_cache[i], 1).repeat_interleave(H // Hk, 0)
            a = torch.nn.functional.scaled_dot_product_attention(q[:, None], K, Vv)[:, 0]
            x = x + T[p + "attn_output.weight"] @ a.reshape(dim)
            h = rms(x, T[p + "ffn_norm.weight"])
            x = x + T[p + "ffn_down.weight"] @ (torch.nn.functional.silu(T[p + "ffn_gate.weight"] @ h)
                                                 * (T[p + "ffn_up.weight"] @ h))
        return (T["output.weight"] @ rms(x, T["output_norm.weight"])).numpy()

    tok = 7
    for t in range(10):
        got = step(tok)
        want = ref_step(tok, t)
        assert got.shape == (V,) and got.dtype == F32
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max(), err_msg=f"token {t}")
        assert int(llm.argmax(got)) == int(np.argmax(want)) or np.sort(want)[-1] - np.sort(want)[-2] < 1e-4
        tok = int(llm.argmax(got))
    assert int(pos[0]) == 10
