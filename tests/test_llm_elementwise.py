"""tinykernels.llm elementwise family against NumPy (float64 references, dtype tolerances)."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from llm_helpers import backends, close, dev, get, put, skip_16bit

try:
    import torch
except ImportError:          # torch is an optional extra: its comparisons skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

rng = np.random.default_rng(7)
DT = [np.float32, np.float16]


def small(be):
    return be == "INTERP"


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", DT)
@pytest.mark.parametrize("sa,sb", [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (5,)), ((2, 3, 4, 5), (3, 1, 5)),
                                   ((2, 3, 4, 5), (1, 3, 4, 1)), ((6, 1), (6, 7)), ((7,), ())])
def test_binary_ops_broadcast_exactly_as_numpy(be, dt, sa, sb):
    skip_16bit(be, dt)
    b = dev(be)
    x = rng.standard_normal(sa).astype(dt)
    y = (rng.standard_normal(sb) + 3).astype(dt) if sb else 2.5
    for f, ref in ((llm.add, np.add), (llm.sub, np.subtract), (llm.mul, np.multiply), (llm.div, np.divide)):
        got = get(f(put(x, b), put(y, b) if sb else y))
        want = ref(x, y)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)       # one rounding, as NumPy


SCALARS = [2, -3, 0.1, 1 / 3, True, 10 ** 30, np.float64(0.1), np.float32(1 / 3), np.float16(0.1), np.int8(-3),
           np.uint8(7), np.int16(-300), np.uint16(600), np.int32(-5), np.uint32(9), np.int64(-7),
           np.uint64(2 ** 63), np.bool_(True)]


def _weak(s, dt):
    """What NumPy and torch compute with the scalar ``s`` and a ``dt`` array: ``s`` as a Python
    number (torch's rule: a NumPy scalar's dtype does not promote the array's), rounded to dt."""
    v = s.item() if isinstance(s, np.generic) else s
    with np.errstate(over="ignore"):                   # 10**30 is inf in float16, as NumPy's
        return dt(float(v))


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", DT)
def test_a_scalar_either_side_is_the_numpy_result(be, dt):
    """``llm.add(2.0, x)``: a Python or NumPy scalar (of every dtype) or a 0-d array on either
    side of add/sub/mul/div (sub and div reversed, not swapped) and pow; the result has the
    array's dtype and NumPy's bits (2 - x is not x - 2). It was refused ('a': expected an array)."""
    skip_16bit(be, dt)
    b = dev(be)
    x = (rng.standard_normal((3, 17)) + 3).astype(dt)
    X = put(x, b)
    ops = ((llm.add, np.add), (llm.sub, np.subtract), (llm.mul, np.multiply), (llm.div, np.divide))
    for s in SCALARS:
        w = _weak(s, dt)
        for f, ref in ops:
            for got, want in ((f(s, X), ref(w, x)), (f(X, s), ref(x, w))):
                got = get(got)
                assert got.dtype == dt and got.shape == x.shape, (f, s)
                np.testing.assert_array_equal(got, want, err_msg=f"{f.__name__} {s!r}")
    x64 = x.astype(np.float64)
    close(get(llm.pow(2.5, X)), np.float64(dt(2.5)) ** x64, dt, ulps=8)
    close(get(llm.pow(np.float32(0.5), X)), 0.5 ** x64, dt, ulps=8)
    zero_d = np.asarray(3.0, dt)                       # a 0-d array: its value, either side
    np.testing.assert_array_equal(get(llm.sub(put(zero_d, b), X)), zero_d - x)
    np.testing.assert_array_equal(get(llm.div(X, put(zero_d, b))), x / zero_d)
    for args in ((2.0, 3.0), (2.0, "x")):                 # no array: still an error naming 'a'
        with pytest.raises(ValueError, match="'a'"):
            llm.sub(*args)
    with pytest.raises(ValueError, match="'a'.*complex"):     # a complex scalar names its side
        llm.sub(1j, X)
    with pytest.raises(ValueError, match="'x'"):             # tanh_grad is no scalar's op
        llm.tanh_grad(1.0, X)


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", DT)
def test_unary_math_and_pow(be, dt):
    skip_16bit(be, dt)
    b = dev(be)
    x = rng.uniform(0.1, 3, (3, 40)).astype(dt)
    X = put(x, b)
    x64 = x.astype(np.float64)
    for f, ref in ((llm.exp, np.exp), (llm.log, np.log), (llm.sin, np.sin), (llm.cos, np.cos), (llm.tanh, np.tanh),
                   (llm.sqrt, np.sqrt), (llm.rsqrt, lambda v: 1 / np.sqrt(v))):
        got = get(f(X))
        assert got.dtype == dt
        close(got, ref(x64), dt)
    close(get(llm.pow(X, 1.7)), x64 ** np.float64(dt(1.7)) if dt == np.float32 else x64 ** 1.7, dt, ulps=8)
    y = rng.uniform(-2, 2, (40,)).astype(dt)
    close(get(llm.pow(X, put(y, b))), x64 ** y.astype(np.float64), dt, ulps=8)


@needs_torch
@pytest.mark.parametrize("be", backends())
def test_tanh_grad_matches_autograd(be):
    b = dev(be)
    x = rng.standard_normal((4, 33)).astype(np.float32)
    g = rng.standard_normal((4, 33)).astype(np.float32)
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    torch.tanh(t).backward(torch.tensor(g.astype(np.float64)))
    close(get(llm.tanh_grad(put(x, b), put(g, b))), t.grad.numpy(), np.float32)


@pytest.mark.parametrize("be", backends())
def test_fill_cast_and_out(be):
    b = dev(be)
    x = tk.zeros((3, 5), np.float32, backend=b)
    assert llm.fill(x, 1.25) is x and np.all(get(x) == 1.25)
    v = rng.standard_normal((3, 5)).astype(np.float32) * 1000
    h = llm.cast(put(v, b), np.float16)
    np.testing.assert_array_equal(get(h), v.astype(np.float16))
    np.testing.assert_array_equal(get(llm.cast(h, tk.float32)), v.astype(np.float16).astype(np.float32))
    out = tk.empty((3, 5), np.float32, backend=b)
    assert llm.add(put(v, b), 1.0, out=out) is out
    np.testing.assert_array_equal(get(out), v + np.float32(1))
    y = put(v.copy(), b)
    llm.mul(y, y, out=y)                         # in place
    np.testing.assert_array_equal(get(y), v * v)


@needs_torch
def test_cast_to_fp8_and_bfloat16_and_torch_kind():
    import ml_dtypes
    v = rng.standard_normal(300).astype(np.float32) * 4
    for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2):
        np.testing.assert_array_equal(llm.cast(v, dt).view(np.uint8 if np.dtype(dt).itemsize == 1 else np.uint16),
                                      v.astype(dt).view(np.uint8 if np.dtype(dt).itemsize == 1 else np.uint16))
    t = torch.tensor(v)
    r = llm.exp(t)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.float32
    close(r.numpy(), np.exp(v.astype(np.float64)), np.float32)


def test_errors_name_the_argument():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="'b'.*broadcast"):
        llm.add(a, np.zeros((4,), np.float32))
    with pytest.raises(ValueError, match="'b'.*dtype"):
        llm.mul(a, np.zeros((3,), np.float16))
    with pytest.raises(ValueError, match="'a'.*int32"):
        llm.add(np.zeros(3, np.int32), 1)
    with pytest.raises(ValueError, match=r"'x': expected a 0-D to 4-D array, got shape \(1, 1, 1, 1, 1\)"):
        llm.exp(np.zeros((1,) * 5, np.float32))
    with pytest.raises(ValueError, match="'out'.*shape"):
        llm.add(a, 1.0, out=np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="'dtype'"):
        llm.cast(a, np.int32)
    with pytest.raises(ValueError, match="'b'.*str"):
        llm.add(a, "1")


def test_argument_checks_reuse_their_dtype_tables_and_keep_their_messages():
    """The dtype checks every llm call runs convert their allowed names once (they were half
    the host time of a small call: llm.add of 4096 floats 73 -> 43 us) and format a message
    only on failure; the messages still name the argument and list what is allowed."""
    from tinykernels.llm import _common as C
    a = np.ones(8, np.float32)
    llm.pow(a, a)                     # (no host fast path: the general path's checks)
    hits = C._float_dtypes.cache_info().hits
    llm.pow(a, a)
    assert C._float_dtypes.cache_info().hits > hits
    assert C.require_dtype(a, "f", "a", ["float32", "float16"]) == np.float32      # a list: fine
    with pytest.raises(ValueError, match=r"llm.f: argument 'a': expected dtype int8, got dtype float32"):
        C.require_dtype(a, "f", "a", ("int8",))
    with pytest.raises(ValueError, match=r"llm.add: argument 'a': expected dtype .*, got dtype int32"):
        llm.add(np.ones(8, np.int32), np.ones(8, np.int32))
    assert C.np_dtype("float16") == np.float16 and C.np_dtype("no-such-type") is None


@pytest.mark.parametrize("shape", [(7,), (5, 7), (3, 5, 7), (2, 3, 5, 7)])
def test_element_kernels_take_row_coordinates_from_the_ndrange(shape):
    """The element-per-item kernels run over (n0 * n1, n2, n3): up to rank 3 a row's leading
    coordinates are the work item's own, so the CPU loop over a row has no integer division
    (a flat row index divided per element kept GCC from vectorizing 2-D exp: 6x slower per
    element than 1-D); rank 4 divides once per element by n1 only. Results as NumPy."""
    from importlib import import_module
    E = import_module("tinykernels.llm.elementwise")
    L = import_module("tinykernels.llm.layout")
    from tinykernels.llm._index import grid3
    a = np.zeros(shape, np.float32)
    b = np.zeros(shape[-1], np.float32)
    nd = grid3(shape)
    assert nd == (int(np.prod(shape[:-2], dtype=np.int64)) if len(shape) > 2 else 1,
                  shape[-2] if len(shape) > 1 else 1, shape[-1])
    perm = tuple(range(4))
    srcs = [E._binary.source("CPU", a, a, b, 1.0, 1.0, E.ADD, False, False, False, False, False, ndrange=nd),
            E._unary.source("CPU", a, a, E.EXP, True, ndrange=nd),
            E._fill.source("CPU", a, 1.0, ndrange=nd),
            L._permute.source("CPU", a, a, *perm, ndrange=nd)]
    for src in srcs:
        body = src[src.index("static void tk_chunk"):]
        divs = body.count("tk_floordiv_i64(") + body.count("tk_mod_i64(")
        assert divs == (0 if len(shape) < 4 else 2), divs     # rank 4: t // n1 and t % n1
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape[-1]).astype(np.float32)
    for be in ("CPU", "INTERP"):
        bk = tk.backend(be)
        got = llm.add(tk.asarray(x, backend=bk), tk.asarray(y, backend=bk))
        np.testing.assert_array_equal(np.asarray(got), x + y)
        got = llm.exp(tk.asarray(x, backend=bk))
        np.testing.assert_allclose(np.asarray(got), np.exp(x.astype(np.float64)), rtol=2.4e-7, atol=0)


def test_flat_cpu_kernels_stream_their_outputs():
    """Same-shape contiguous elementwise calls on the CPU take flat kernels whose inputs are
    tk.Const and whose op is the kernel's own compile-time constant: one top-level store of
    the item's element, which the C renderer stages and streams (no read for ownership of a
    large output; the general broadcasting kernel reads writable arrays and stores through an
    inlined function, so it cannot). exp and swiglu keep ordinary stores: they compute more
    per byte than staging pays for (passes/streaming.compute_heavy; streamed, llm.exp at 64 MiB
    took 2.07 ms against 1.54)."""
    from importlib import import_module
    E = import_module("tinykernels.llm.elementwise")
    a = np.zeros(1000, np.float32)
    streams = lambda src: "tk_stream_bytes(" in src[src.index("static void tk_chunk"):]  # noqa: E731
    for op in (E.ADD, E.SUB, E.MUL, E.DIV):
        assert streams(E._binary_flat.source("CPU", a, a, a, 1.0, 1.0, op, False, False, ndrange=1000))
        assert streams(E._binary_flat_scalar.source("CPU", a, a, 2.0, 1.0, op, False, False, ndrange=1000))
    for op in (E.COPY, E.SQRT, E.RSQRT):
        assert streams(E._unary_flat.source("CPU", a, a, op, False, ndrange=1000))
    assert streams(E._unary_flat.source("CPU", a.astype(np.float64), a, E.COPY, False, ndrange=1000))
    for poly in (False, True):
        assert not streams(E._unary_flat.source("CPU", a, a, E.EXP, poly, ndrange=1000))
        assert not streams(E._binary_flat.source("CPU", a, a, a, 1.0, 1.0, E.SWIGLU, False, poly, ndrange=1000))
    assert not streams(E._binary.source("CPU", a, a, a, 1.0, 1.0, E.ADD, False, False, False, False, False,
                                        ndrange=(1, 1, 1000)))


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.float64])
def test_flat_cpu_path_matches_numpy_in_place_and_overlapping(monkeypatch, dt):
    """The flat CPU path (streaming forced on) gives NumPy's results bit for bit for arrays and
    scalars; an output that is an input (the same array or a view of its memory) takes the
    general kernel (a tk.Const input must not alias the output), never a LaunchError."""
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", "1")
    n = 4099
    x = rng.standard_normal(2 * n).astype(dt)
    a, b = x[:n].copy(), x[n:].copy() + dt(3)
    for fn, ref in ((llm.add, np.add), (llm.sub, np.subtract), (llm.mul, np.multiply), (llm.div, np.divide)):
        np.testing.assert_array_equal(fn(a, b), ref(a, b))
        np.testing.assert_array_equal(fn(a, 1.5), ref(a, dt(1.5)))
        y = a.copy()
        assert fn(y, b, out=y) is y                        # out is a
        np.testing.assert_array_equal(y, ref(a, b))
        y = b.copy()
        fn(a, y, out=y)                                    # out is b
        np.testing.assert_array_equal(y, ref(a, b))
        z = np.concatenate([a, b])
        fn(z[:n], z[n:], out=z[n:])                        # views of one buffer, out is b's view
        np.testing.assert_array_equal(z[n:], ref(a, b))
    pos = np.abs(a) + dt(0.5)
    np.testing.assert_array_equal(llm.sqrt(pos), np.sqrt(pos))
    y = pos.copy()
    llm.sqrt(y, out=y)
    np.testing.assert_array_equal(y, np.sqrt(pos))
    for target in (np.float32, np.float64, np.float16):
        np.testing.assert_array_equal(llm.cast(a, target), a.astype(target))
    if torch is not None:                                   # torch CPU tensors take the same path
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        np.testing.assert_array_equal(llm.add(ta, tb).numpy(), a + b)
