"""The llm functions' host fast paths (add/sub/mul/div, the unary family and cast, sum,
kv_append on host arrays): the same results as the general path, bit for bit, every case they
do not cover left to the general path (its errors and in-place handling), the environment's
CPU defaults followed, and the few Python frames that keep a call cheap after a large kernel
has evicted the caches (docs/llm.md, "Host time per call")."""
import importlib
import sys

import numpy as np
import pytest

import tinykernels as tk
import tinykernels.array as A
from llm_helpers import python_calls
from tinykernels import llm
from tinykernels.kernel import Kernel

C = importlib.import_module("tinykernels.llm._common")

RNG = np.random.default_rng(7)


def _general(monkeypatch):
    """Force every call through the general path."""
    monkeypatch.setattr(C, "host_args", lambda *a: None)


def _both(monkeypatch, run):
    """``run()`` through the fast path and through the general path, as NumPy arrays."""
    fast = np.array(run(), copy=True)
    with monkeypatch.context() as m:
        _general(m)
        slow = np.array(run(), copy=True)
    return fast, slow


def _bits(x):
    return x.view(np.uint8)


def _launches(monkeypatch):
    """The (kernel name, backend) of each fast-path launch: the ``Kernel.instance`` calls not
    made by the general path's ``_common.launch``."""
    seen = []
    real = Kernel.instance

    def instance(kernel, backend):
        if sys._getframe(1).f_code.co_name != "launch":
            seen.append((kernel.name, backend))
        return real(kernel, backend)
    monkeypatch.setattr(Kernel, "instance", instance)
    return seen


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(1,), (1000,), (3, 5, 7), (2, 3, 4, 5)])
@pytest.mark.parametrize("fn", ["add", "sub", "mul", "div"])
def test_binary_fast_path_matches_general_and_numpy(monkeypatch, fn, shape, dt):
    a = RNG.standard_normal(shape).astype(dt)
    b = (RNG.standard_normal(shape) + 3).astype(dt)
    out = np.empty(shape, dt)
    seen = _launches(monkeypatch)
    fast, slow = _both(monkeypatch, lambda: getattr(llm, fn)(a, b, out=out))
    assert seen and seen[0][0] == "_binary_flat"
    want = getattr(np, {"sub": "subtract", "mul": "multiply", "div": "divide"}.get(fn, fn))(a, b)
    assert np.array_equal(_bits(fast), _bits(slow)) and np.array_equal(_bits(fast), _bits(want))


@pytest.mark.parametrize("src,dst", [(np.float32, np.float16), (np.float16, np.float32), (np.float64, np.float32),
                                     (np.float32, np.float64), (np.float32, np.float32)])
def test_cast_fast_path_matches_general_and_numpy(monkeypatch, src, dst):
    x = (RNG.standard_normal((3, 4099)) * 1e3).astype(src)
    x.flat[:4] = [np.inf, -np.inf, np.nan, 0.0]
    out = np.empty(x.shape, dst)
    seen = _launches(monkeypatch)
    for d in (dst, np.dtype(dst)):                   # a scalar type or a dtype object
        fast, slow = _both(monkeypatch, lambda: llm.cast(x, d, out=out))
        assert np.array_equal(_bits(fast), _bits(slow)) and np.array_equal(_bits(fast), _bits(x.astype(dst)))
    assert [s[0] for s in seen] == ["_unary_flat", "_unary_flat"]


@pytest.mark.parametrize("fn", ["exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt"])
def test_unary_fast_path_matches_general(monkeypatch, fn):
    x = (RNG.random(5000) * 4 + 0.1).astype(np.float32)
    out = np.empty_like(x)
    seen = _launches(monkeypatch)
    fast, slow = _both(monkeypatch, lambda: getattr(llm, fn)(x, out=out))
    assert seen and np.array_equal(_bits(fast), _bits(slow))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape,axis", [((7, 300), -1), ((7, 300), 0), ((2, 3, 40), 1), ((2, 3, 4, 33), 3),
                                        ((5, 1), 0)])
def test_sum_fast_path_matches_general(monkeypatch, shape, axis, dt):
    x = RNG.standard_normal(shape).astype(dt)
    out = np.empty(shape[:axis % len(shape)] + shape[axis % len(shape) + 1:], dt)
    seen = _launches(monkeypatch)
    fast, slow = _both(monkeypatch, lambda: llm.sum(x, axis, out=out))
    assert seen and seen[0][0] in ("_sum_lanes", "_sum_lanes64")
    assert np.array_equal(_bits(fast), _bits(slow))
    np.testing.assert_allclose(fast, x.astype(np.float64).sum(axis), rtol=2e-3 if dt == np.float16 else 1e-5,
                               atol=0.05 if dt == np.float16 else 1e-4)


@pytest.mark.parametrize("cdt", [np.float32, np.float16])
@pytest.mark.parametrize("pos", [0, 5, 14, -2])
def test_kv_append_fast_path_matches_general(monkeypatch, cdt, pos):
    rows = RNG.standard_normal((2, 3, 4, 16)).astype(np.float32)
    for counter in (np.array([pos], np.int32), llm.new_counter(pos)):
        seen = _launches(monkeypatch)
        fast, slow = _both(monkeypatch, lambda: llm.kv_append(np.zeros((2, 3, 16, 16), cdt), rows, counter))
        assert seen and seen[-1][0] == "_append_rows"
        assert np.array_equal(_bits(fast), _bits(slow))
        want = np.zeros((2, 3, 16, 16), cdt)
        lo, hi = max(pos, 0), min(pos + 4, 16)
        want[:, :, lo:hi] = rows[:, :, lo - pos:hi - pos]
        assert np.array_equal(_bits(fast), _bits(want))


def test_cases_outside_the_fast_paths_keep_the_general_behaviour(monkeypatch):
    """Aliasing (but the very array in place), strides, mixed dtypes and shapes, bad ranks,
    empty arrays, scalars and streams take the general path: its in-place handling, its errors
    naming arguments."""
    seen = _launches(monkeypatch)
    a = np.arange(12, dtype=np.float32)
    r = llm.add(a, a[::-1].copy()[::-1], out=a)                     # a strided input
    assert r is a and np.array_equal(a, 2 * np.arange(12, dtype=np.float32))
    r = llm.add(a, a, out=a.reshape(3, 4).reshape(12))              # in place through another view object
    assert np.array_equal(a, 4 * np.arange(12, dtype=np.float32))
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    o = np.empty((4, 3), np.float32)
    llm.mul(x[:, ::2], x[:, 1::2], out=o)                           # strided inputs
    assert np.array_equal(o, x[:, ::2] * x[:, 1::2])
    half = np.arange(20, dtype=np.float32)
    with pytest.raises(ValueError, match="argument 'out': .*got one that overlaps argument 'a'"):
        llm.add(half[:10], half[10:], out=half[5:15])               # partial overlap: refused as before
    with pytest.raises(ValueError, match="argument 'b': expected dtype .*, got dtype float64"):
        llm.add(a, a.astype(np.float64), out=a.copy())
    with pytest.raises(ValueError, match="argument 'out'"):
        llm.add(a, a, out=np.empty(11, np.float32))
    with pytest.raises(ValueError, match=r"argument 'a': expected a 0-D to 4-D array, got shape \(1, 1, 1, 1, 2\)"):
        z = np.ones((1, 1, 1, 1, 2), np.float32)
        llm.add(z, z, out=np.empty_like(z))
    e = np.empty(0, np.float32)
    assert llm.add(e, e, out=np.empty(0, np.float32)).shape == (0,)
    with pytest.raises(ValueError, match="argument 'out': expected dtype float32, got dtype float16"):
        llm.exp(a, out=np.empty(12, np.float16))
    with pytest.raises(ValueError, match="argument 'dtype'"):
        llm.cast(a, np.int32, out=np.empty(12, np.int32))
    with pytest.raises(ValueError, match="argument 'axis'"):
        llm.sum(x, 2, out=np.empty(4, np.float32))
    with pytest.raises(ValueError, match="argument 'out'"):
        llm.sum(x, -1, out=np.empty(5, np.float32))
    with pytest.raises(ValueError, match="argument 'rows'"):
        llm.kv_append(np.zeros((2, 8, 4), np.float32), np.ones((3, 1, 4), np.float32), np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="argument 'counter'"):
        llm.kv_append(np.zeros((2, 8, 4), np.float32), np.ones((2, 1, 4), np.float32), np.zeros(1, np.int64))
    assert not seen, seen                                           # none of these took a fast path
    be = A.get_backend(a)
    o2 = np.empty_like(a)
    llm.add(a, a, out=o2, stream=be.stream())                       # a stream: the general path
    tk.synchronize(be)
    assert np.array_equal(o2, 2 * a) and not seen, seen


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(7,), (3, 5, 7), (2, 3, 4, 33)])
def test_in_place_flat_calls_take_the_general_kernel_on_the_fast_path(monkeypatch, shape, dt):
    """``out`` the very array of an input (the decode step's ``swiglu(g, u, out=g)``,
    ``add(x, o, out=x)``): the general path's non-``tk.Const`` kernel, the same bits."""
    be = tk.CPU(threads=1)
    x0 = (RNG.random(shape) + 0.5).astype(dt)
    y0 = RNG.standard_normal(shape).astype(dt)
    for conv in (lambda v: v, lambda v: tk.asarray(v, backend=be)):
        calls = {"_binary": lambda x, y: llm.swiglu(x, y, out=x), "_binary ": lambda x, y: llm.div(y, x, out=x),
                 "_binary  ": lambda x, y: llm.add(x, x, out=x), "_unary": lambda x, y: llm.exp(x, out=x),
                 "_unary ": lambda x, y: llm.cast(x, dt, out=x)}
        for kname, f in calls.items():
            def run():
                x, y = conv(x0.copy()), conv(y0)
                f(x, y)
                return A.as_host_ndarray(x)
            seen = _launches(monkeypatch)
            fast, slow = _both(monkeypatch, run)
            assert [k for k, _ in seen] == [kname.strip()], (kname, seen)
            assert np.array_equal(_bits(fast), _bits(slow)), kname


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(1,), (1, 4096), (3, 5, 7), (2, 3, 4, 33)])
def test_row_fast_paths_match_general(monkeypatch, shape, dt):
    """swiglu, rms_norm, rms_norm_add and softmax: bit for bit the general path's results."""
    x, y, r = (RNG.standard_normal(shape).astype(dt) for _ in range(3))
    w = RNG.standard_normal(shape[-1]).astype(dt)
    w32 = w.astype(np.float32)
    out = np.empty(shape, dt)
    calls = {"_binary_flat": lambda: llm.swiglu(x, y, out=out),
             "_rms_rows_ro": lambda: llm.rms_norm(x, w, 1e-5, out=out),
             "_rms_rows_ro ": lambda: llm.rms_norm(x, w32, out=out),
             "_rms_rows_ro  ": lambda: llm.rms_norm_add(x, w, r, 0.0, out=out),
             "_softmax_rows_ro": lambda: llm.softmax(x, -1, 0.5, out=out),
             "_softmax_rows_ro ": lambda: llm.softmax(x, len(shape) - 1, out=out)}
    for kname, run in calls.items():
        seen = _launches(monkeypatch)
        fast, slow = _both(monkeypatch, run)
        assert [k for k, _ in seen] == [kname.strip()], (kname, seen)
        assert np.array_equal(_bits(fast), _bits(slow)), kname
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(llm.rms_norm(x, w, 1e-5, out=out),
                               x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * w,
                               rtol=5e-3 if dt == np.float16 else 1e-5, atol=5e-3 if dt == np.float16 else 1e-6)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    np.testing.assert_allclose(llm.softmax(x, out=out), e / e.sum(-1, keepdims=True),
                               rtol=2e-3 if dt == np.float16 else 1e-5, atol=1e-3 if dt == np.float16 else 1e-7)


def test_row_calls_outside_the_fast_paths_keep_the_general_behaviour(monkeypatch):
    seen = _launches(monkeypatch)
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    w = np.ones(8, np.float32)
    o = np.empty_like(x)
    llm.softmax(x, 0, out=o)                                        # another axis
    llm.softmax(x, -1, 1, out=o)                                    # an int scale
    llm.rms_norm(x, w, 1, out=o)                                    # an int eps
    llm.rms_norm(x, w, out=o, return_scale=True)                    # a scale output
    y = x.copy()
    llm.rms_norm(y, w, out=y)                                       # in place
    r = x.copy()
    llm.rms_norm_add(x, w, r, out=r)                                # out=residual
    llm.swiglu(x, x[:1], out=o)                                     # broadcasting
    assert not seen, seen
    for bad, msg in ((lambda: llm.softmax(x, 2, out=o), "argument 'axis'"),
                     (lambda: llm.softmax(x, -3, out=o), "argument 'axis'"),
                     (lambda: llm.rms_norm(x, w, -1.0, out=o), "argument 'eps'"),
                     (lambda: llm.rms_norm(x, w, float("nan"), out=o), "argument 'eps'"),
                     (lambda: llm.rms_norm(x, w[:4], out=o), "argument 'w'"),
                     (lambda: llm.rms_norm(x, w.astype(np.float64), out=o), "argument 'w'"),
                     (lambda: llm.rms_norm_add(x, w, x[:2], out=o), "argument 'residual'"),
                     (lambda: llm.swiglu(x, x, out=o[:2]), "argument 'out'"),
                     (lambda: llm.softmax(x, out=o.astype(np.float16)), "argument 'out'")):
        with pytest.raises(ValueError, match=msg):
            bad()
    assert not seen, seen


@pytest.mark.parametrize("qtype", [None, "q4_0", "q8_0", "q4_k"])
def test_gemv_fast_path_matches_general(monkeypatch, qtype):
    w = RNG.standard_normal((33, 512)).astype(np.float32)
    a = w if qtype is None else llm.quantize(w, qtype)
    x = RNG.standard_normal(512).astype(np.float32)
    be = tk.CPU(threads=1)
    for conv in (lambda v: v, lambda v: tk.asarray(v, backend=be)):
        aa = conv(w) if qtype is None else llm.QTensor(qtype, a.shape, conv(A.as_host_ndarray(a.data)))
        xx, out = conv(x), conv(np.empty(33, np.float32))
        seen = _launches(monkeypatch)
        fast, slow = _both(monkeypatch, lambda: A.as_host_ndarray(llm.matmul(aa, xx, out=out)))
        assert [k for k, _ in seen] == [f"_gemv_rows_{qtype or 'f32'}"], seen
        assert np.array_equal(_bits(fast), _bits(slow))
    deq = w if qtype is None else A.as_host_ndarray(llm.dequantize(a))
    np.testing.assert_allclose(fast, deq.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0"])
def test_int8_gemv_fast_path_matches_general(monkeypatch, qtype):
    """``exact=False`` on host arrays: the activations' quantizer and the int8 GEMV launched
    straight (new NumPy scratch arrays), the general path's bits; ``out=None`` a new array; a
    different answer from the exact route (the activations are rounded)."""
    w = RNG.standard_normal((33, 512)).astype(np.float32)
    a = llm.quantize(w, qtype)
    x = RNG.standard_normal(512).astype(np.float32)
    be = tk.CPU(threads=1)
    for conv in (lambda v: v, lambda v: tk.asarray(v, backend=be)):
        aa = llm.QTensor(qtype, a.shape, conv(A.as_host_ndarray(a.data)))
        xx, out = conv(x), conv(np.empty(33, np.float32))
        seen = _launches(monkeypatch)
        fast, slow = _both(monkeypatch, lambda: A.as_host_ndarray(llm.matmul(aa, xx, out=out, exact=False)))
        assert [k for k, _ in seen] == ["_quantize_x_q8_0", "_gemv_rows_i8"], seen
        assert np.array_equal(_bits(fast), _bits(slow))
        new = llm.matmul(aa, xx, exact=False)
        assert np.array_equal(_bits(A.as_host_ndarray(new)), _bits(fast)) and type(new) is type(xx)
    assert not np.array_equal(fast, A.as_host_ndarray(llm.matmul(a, x)))
    deq = A.as_host_ndarray(llm.dequantize(a)).astype(np.float64)
    assert (np.abs(fast - deq @ x) <= 0.01 * (np.abs(deq) @ np.abs(x))).all()     # x's rounding: <= 1/254 of a block's max


def test_gemv_calls_outside_the_fast_path_keep_the_general_behaviour(monkeypatch):
    seen = _launches(monkeypatch)
    w = RNG.standard_normal((32, 64)).astype(np.float32)
    x = RNG.standard_normal(64).astype(np.float32)
    q = llm.quantize(w, "q8_0")
    o = np.empty(32, np.float32)
    llm.matmul(q, np.stack([x, x], 1)[:, 0], out=o, exact=False)   # a strided b: a copy
    llm.matmul(w.T.copy().T, x, out=o)                              # a Fortran-ordered a: a copy
    assert not seen, seen
    for bad, msg in ((lambda: llm.matmul(w, x[:32], out=o), "argument 'b'"),
                     (lambda: llm.matmul(w, x, out=o[:16]), "argument 'out'"),
                     (lambda: llm.matmul(w, x.astype(np.float64), out=o), "argument 'b'"),
                     (lambda: llm.matmul(w, x, out=w[0, :32]), "argument 'out'"),
                     (lambda: llm.matmul(w, x, out=o, exact=1), "argument 'exact'")):
        with pytest.raises(ValueError, match=msg):
            bad()
    assert not seen, seen


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("shape,h", [((5, 64), 32), ((2, 3, 64), 16), ((2, 4, 3, 32), 16)])
def test_rope_fast_path_matches_general(monkeypatch, shape, h, dt):
    x = RNG.standard_normal(shape).astype(dt)
    ang = np.arange(12)[:, None] * RNG.random(h)[None]
    for tdt in (np.float32, dt):
        cos, sin = np.cos(ang).astype(tdt), np.sin(ang).astype(tdt)
        for pos in (np.array([2], np.int32), np.array([11], np.int32)):     # 11: past the table for some rows
            out = np.empty(shape, dt)
            runs = {"rope": lambda: llm.rope(x, cos, sin, 1, out=out),
                    "rope_at": lambda: llm.rope_at(x, cos, sin, pos, out=out),
                    "in place": lambda: llm.rope_at(np.copyto(out, x) or out, cos, sin, pos, out=out)}
            for name, run in runs.items():
                seen = _launches(monkeypatch)
                fast, slow = _both(monkeypatch, run)
                assert [k for k, _ in seen] == ["_rope_rows"], (name, seen)
                assert np.array_equal(_bits(fast), _bits(slow)), name
    x64 = x.astype(np.float64)
    c, sn = np.cos(ang)[1:1 + shape[-2]], np.sin(ang)[1:1 + shape[-2]]
    x1, x2 = x64[..., :h], x64[..., h:2 * h]
    want = np.concatenate([x1 * c - x2 * sn, x2 * c + x1 * sn, x64[..., 2 * h:]], -1)
    got = llm.rope(x, np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32), 1, out=np.empty(shape, dt))
    np.testing.assert_allclose(got, want, rtol=2e-3 if dt == np.float16 else 1e-5, atol=2e-3 if dt == np.float16 else 1e-6)


def test_rope_calls_outside_the_fast_path_keep_the_general_behaviour(monkeypatch):
    seen = _launches(monkeypatch)
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    cos, sin = np.ones((8, 4), np.float32), np.zeros((8, 4), np.float32)
    o = np.empty_like(x)
    llm.rope(x, cos, sin, np.int64(1), out=o)                       # a NumPy int offset
    llm.rope(x[:, ::-1], cos, sin, out=o)                           # strided x
    y = np.zeros(40, np.float32)
    with pytest.raises(ValueError, match="argument 'out': .*got one that overlaps argument 'x'"):
        llm.rope(y[:32].reshape(4, 8), cos, sin, out=y[8:].reshape(4, 8))
    for bad, msg in ((lambda: llm.rope(x, cos, sin, 5, out=o), "argument 'cos': expected at least 9 positions"),
                     (lambda: llm.rope(x, cos, sin, -1, out=o), "argument 'offset'"),
                     (lambda: llm.rope(x, cos, sin.astype(np.float16), out=o), "argument 'sin'"),
                     (lambda: llm.rope(x, cos[:, :3].copy(), sin[:, :3].copy(), out=o[:, :4]), "argument 'out'"),
                     (lambda: llm.rope(x, np.ones((8, 5), np.float32), np.ones((8, 5), np.float32), out=o),
                      "argument 'cos': expected shape \\(positions, 1..4\\)"),
                     (lambda: llm.rope_at(x, cos, sin, np.zeros(1, np.int64), out=o), "argument 'pos_counter'"),
                     (lambda: llm.rope(x, cos, sin, out=np.empty((4, 8), np.float64)), "argument 'out'")):
        with pytest.raises(ValueError, match=msg):
            bad()
    assert not seen, seen


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_gather_and_argmax_fast_paths_match_general(monkeypatch, dt):
    table = RNG.standard_normal((50, 40)).astype(dt)
    be = tk.CPU(threads=1)
    for idt in (np.int32, np.int64):
        for idx in ([3, 0, 49, 3], [7], [-1, 50, 2]):                   # out of range: zero rows (not debug)
            ind = np.array(idx, idt)
            for conv in (lambda v: v, lambda v: tk.asarray(v, backend=be)):
                t, i, out = conv(table), conv(ind), conv(np.empty((len(idx), 40), dt))
                seen = _launches(monkeypatch)
                fast, slow = _both(monkeypatch, lambda: A.as_host_ndarray(llm.gather(t, i, out=out)))
                assert [k for k, _ in seen] == ["_gather_rows"], seen
                assert np.array_equal(_bits(fast), _bits(slow))
                ok = (ind >= 0) & (ind < 50)
                assert np.array_equal(fast[ok], table[ind[ok]]) and not fast[~ok].any()
    for x in (RNG.standard_normal(1000).astype(dt), np.array([1, 3, 3, np.nan, 5], dt), np.ones(7, dt)):
        for conv in (lambda v: v, lambda v: tk.asarray(v, backend=be)):
            xx, out = conv(x), conv(np.empty((), np.int32))
            seen = _launches(monkeypatch)
            fast, slow = _both(monkeypatch, lambda: A.as_host_ndarray(llm.argmax(xx, out=out)))
            assert [k for k, _ in seen] == ["_argmax_lanes"], seen
            assert fast == slow == np.argmax(x)


def test_gather_and_argmax_outside_the_fast_paths_keep_the_general_behaviour(monkeypatch):
    seen = _launches(monkeypatch)
    table = RNG.standard_normal((50, 40)).astype(np.float32)
    ind = np.array([1, 2], np.int32)
    o = np.empty((2, 40), np.float32)
    llm.gather(table.astype(np.int32), ind, out=np.empty((2, 40), np.int32))   # an integer table
    big = np.zeros((2, 40), np.float32)
    llm.gather(table, np.array([1, 2], np.int64), out=big[:, ::-1])   # a strided out
    assert np.array_equal(big[:, ::-1], table[[1, 2]])
    assert not seen, seen
    for bad, msg in ((lambda: llm.gather(table, ind.astype(np.int16), out=o), "argument 'indices'"),
                     (lambda: llm.gather(table, ind, out=o[:1]), "argument 'out'"),
                     (lambda: llm.gather(table, ind, out=table[:2]), "argument 'out'"),
                     (lambda: llm.gather(table[0], ind, out=o), "argument 'table'"),
                     (lambda: llm.argmax(table, out=np.empty((), np.int32)), "argument 'x'"),
                     (lambda: llm.argmax(table[0], out=np.empty((), np.int64)), "argument 'out'"),
                     (lambda: llm.argmax(table[0], out=np.empty(1, np.int32)), "argument 'out'"),
                     (lambda: llm.argmax(table[0, :0], out=np.empty((), np.int32)), "argument 'x': expected a non-empty array")):
        with pytest.raises(ValueError, match=msg):
            bad()
    assert not seen, seen


def test_torch_cpu_tensors_take_the_fast_paths(monkeypatch):
    """CPU torch tensors of NumPy dtypes launch through their NumPy views on tk.CPU(), the
    general path's backend, and the call returns the caller's tensor; bfloat16, tensors that
    require grad and strided tensors as the general path has them."""
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 64)
    w = torch.randn(64)
    for f, kname in ((lambda o: llm.add(x, x, out=o), "_binary_flat"),
                     (lambda o: llm.rms_norm(x, w, out=o), "_rms_rows_ro"),
                     (lambda o: llm.softmax(x, out=o), "_softmax_rows_ro"),
                     (lambda o: llm.swiglu(x, x, out=o), "_binary_flat")):
        o = torch.empty(3, 64)
        seen = _launches(monkeypatch)
        assert f(o) is o
        assert seen == [(kname, A._cpu())], seen
        with monkeypatch.context() as m:
            _general(m)
            o2 = torch.empty(3, 64)
            assert f(o2) is o2
        assert torch.equal(o, o2)
    seen = _launches(monkeypatch)
    g = torch.randn(3, 64, requires_grad=True)
    o = torch.empty(3, 64)
    assert llm.add(g, g, out=o) is o and torch.equal(o, 2 * g.detach())
    b = x.to(torch.bfloat16)
    ob = torch.empty(3, 64, dtype=torch.bfloat16)
    assert llm.add(b, b, out=ob) is ob and torch.equal(ob, b + b)
    assert [k for k, _ in seen] == ["_binary_flat"], seen            # bfloat16: the general path
    llm.add(x.T, x.T, out=torch.empty(64, 3))                       # strided: the general path
    assert len(seen) == 1, seen


def test_fast_paths_follow_the_environment_defaults(monkeypatch):
    """NumPy arrays launch on tk.CPU() with TK_NUM_THREADS / TK_DEBUG as they are now (the
    fast path reads os.environ's dict directly)."""
    seen = _launches(monkeypatch)
    a = np.ones(64, np.float32)
    for n in ("1", "2"):
        monkeypatch.setenv("TK_NUM_THREADS", n)
        llm.add(a, a, out=np.empty_like(a))
        assert seen[-1][1] == tk.CPU(threads=int(n)) and seen[-1][1] is A.get_backend(a)
    monkeypatch.delenv("TK_NUM_THREADS")
    assert A._cpu_env()[0] is None and A._cpu() == tk.CPU()
    monkeypatch.setenv("TK_DEBUG", "1")
    rows = np.ones((1, 2, 4), np.float32)
    with pytest.raises(IndexError):                                  # debug mode reports the position
        llm.kv_append(np.zeros((1, 4, 4), np.float32), rows, np.array([3], np.int32))
    assert seen[-1][1].debug


def test_tk_arrays_on_one_cpu_backend_take_the_fast_path(monkeypatch):
    be = tk.CPU(threads=1)
    a = tk.asarray(np.arange(8, dtype=np.float32), backend=be)
    o = tk.asarray(np.zeros(8, np.float32), backend=be)
    seen = _launches(monkeypatch)
    assert llm.add(a, a, out=o) is o and np.array_equal(o.numpy(), 2 * np.arange(8, dtype=np.float32))
    assert seen == [("_binary_flat", be)]
    other = tk.asarray(np.zeros(8, np.float32), backend=tk.CPU(threads=2))
    with pytest.raises(ValueError, match="got one on tk.CPU|on tk.CPU.*got one"):            # two backends: the general error
        llm.add(a, a, out=other)


def test_instance_memo_is_the_kernels_own_instance_table():
    """``Kernel.instance`` finds a backend object's instance by identity in the kernel's one
    instance table: the instance ``kernel(backend)`` gives, for equal backend objects too, and
    no second cache in front of it (the llm modules hold none)."""
    E = importlib.import_module("tinykernels.llm.elementwise")   # the module (llm.exp etc. shadow names)
    be, be2 = tk.CPU(threads=1), tk.CPU(threads=1)
    k = E._binary_flat
    old = k(be)
    assert k.instance(be) is k(be) is k.instance(be) is k.instance(be2) is k(be2)
    assert k.instance(be) is not k.instance(tk.CPU(threads=2))
    assert k(be, 64) is not k.instance(be) and k(be, 64) is k(be2, 64)   # a static size: its own entry
    assert k._instances[id(be)] == (be, k(be))                      # the entry keeps the backend alive
    k._instances.clear()                                            # one table: clearing forgets both entries
    fresh = k.instance(be)
    assert fresh is k(be) is k(be2) and fresh is not old
    assert not any(isinstance(v, dict) and "INSTANCES" in n.upper() for n, v in vars(C).items())


def test_fast_paths_run_few_python_frames():
    """The point of the fast paths: a valid call runs a handful of small Python functions (each
    one a chain of cache misses after a large kernel), not the general path's checks."""
    a, b, o = (np.ones(4096, np.float32) for _ in range(3))
    h = np.empty(4096, np.float16)
    x, s = np.ones((4, 1024), np.float32), np.empty(4, np.float32)
    kc, kr, cnt = np.zeros((8, 64, 128), np.float32), np.ones((8, 4, 128), np.float32), np.zeros(1, np.int32)
    w, xo = np.ones(1024, np.float32), np.empty((4, 1024), np.float32)
    calls = {"add": lambda: llm.add(a, b, out=o), "cast": lambda: llm.cast(a, np.float16, out=h),
             "sum": lambda: llm.sum(x, -1, out=s), "kv_append": lambda: llm.kv_append(kc, kr, cnt),
             "swiglu": lambda: llm.swiglu(a, b, out=o), "rms_norm": lambda: llm.rms_norm(x, w, out=xo),
             "rms_norm_add": lambda: llm.rms_norm_add(x, w, x, out=xo), "softmax": lambda: llm.softmax(x, out=xo),
             "matmul": lambda: llm.matmul(x, w, out=s),
             "rope_at": lambda: llm.rope_at(xo, x[:, :16], x[:, 16:32], cnt, out=xo),
             "gather": lambda: llm.gather(x, cnt, out=xo[:1]), "argmax": lambda: llm.argmax(a, out=cnt[0:1].reshape(()))}
    torch = sys.modules.get("torch")
    if torch is not None:
        ta, tb, to = (torch.from_numpy(v) for v in (a, b, o))
        calls["add (torch)"] = lambda: llm.add(ta, tb, out=to)
    for name, f in calls.items():
        f()
        frames = python_calls(f)
        assert len(frames) <= 12, f"{name}: {sorted(frames)}"   # distinct functions; the general path: 30-60
        assert not any(fn in ("backend_of", "output", "require", "get_backend") for _, fn in frames), frames


def test_read_only_out_is_the_launchers_error_on_both_paths(monkeypatch):
    a = np.ones(8, np.float32)
    x = np.ones((4, 8), np.float32)
    for f, out in ((lambda o: llm.add(a, a, out=o), np.empty(8, np.float32)),
                   (lambda o: llm.cast(a, np.float16, out=o), np.empty(8, np.float16)),
                   (lambda o: llm.sum(x, -1, out=o), np.empty(4, np.float32))):
        out.flags.writeable = False
        msgs = []
        for general in (False, True):
            with monkeypatch.context() as m:
                if general:
                    _general(m)
                with pytest.raises(tk.LaunchError, match="argument 'out' is read-only") as e:
                    f(out)
                msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


def _kinds():
    """Converters of a NumPy array to each argument kind the fast paths take, and the type of
    the result the caller gets back for it (NumPy in, NumPy out; torch in, torch out)."""
    be = tk.CPU(threads=1)
    k = [(lambda v: v, np.ndarray), (lambda v: tk.asarray(v, backend=be), A.Array)]
    try:
        import torch
        k.append((torch.from_numpy, torch.Tensor))
    except ImportError:               # (the minimal install has no torch)
        pass
    return k


def _no_out_calls(cv):
    """(kernel name, call without ``out=``) of every family with a host fast path."""
    rng = np.random.default_rng(11)
    x, y = (cv(rng.standard_normal((3, 96)).astype(np.float32)) for _ in range(2))
    w = cv(rng.standard_normal(96).astype(np.float32))
    cs = cv(rng.standard_normal((8, 16)).astype(np.float32))
    h4 = cv(rng.standard_normal((2, 3, 32)).astype(np.float32))
    idx, cnt = cv(np.array([2, 0], np.int32)), cv(np.array([1], np.int32))
    v = cv(rng.standard_normal(96).astype(np.float32))
    return {"add": ("_binary_flat", lambda: llm.add(x, y)), "div": ("_binary_flat", lambda: llm.div(x, y)),
            "exp": ("_unary_flat", lambda: llm.exp(x)), "cast": ("_unary_flat", lambda: llm.cast(x, np.float16)),
            "cast dtype": ("_unary_flat", lambda: llm.cast(x, np.dtype(np.float64))),
            "swiglu": ("_binary_flat", lambda: llm.swiglu(x, y)), "sum": ("_sum_lanes", lambda: llm.sum(x, -1)),
            "sum 0": ("_sum_lanes", lambda: llm.sum(x, 0)),
            "rms_norm": ("_rms_rows_ro", lambda: llm.rms_norm(x, w)),
            "rms_norm_add": ("_rms_rows_ro", lambda: llm.rms_norm_add(x, w, y)),
            "softmax": ("_softmax_rows_ro", lambda: llm.softmax(x, -1, 0.5)),
            "rope": ("_rope_rows", lambda: llm.rope(h4, cs, cs, 3)),
            "rope_at": ("_rope_rows", lambda: llm.rope_at(h4, cs, cs, cnt)),
            "argmax": ("_argmax_lanes", lambda: llm.argmax(v)), "gather": ("_gather_rows", lambda: llm.gather(x, idx)),
            "matmul": ("_gemv_rows_f32", lambda: llm.matmul(x, v))}


@pytest.mark.parametrize("kind", range(3))
def test_calls_without_out_take_the_fast_path_in_the_callers_kind(monkeypatch, kind):
    """``out`` not given: the fast path allocates the result in the kind of the argument the
    general path models it on (``_common.host_new``), launches the same kernel, and the
    result is the general path's, bit for bit, of the same type, shape and dtype."""
    kinds = _kinds()
    if kind >= len(kinds):
        pytest.skip("torch is not installed")
    cv, typ = kinds[kind]
    for name, (kname, run) in _no_out_calls(cv).items():
        seen = _launches(monkeypatch)
        fast = run()
        assert [k for k, _ in seen] == [kname], (name, seen)
        with monkeypatch.context() as m:
            _general(m)
            slow = run()
        assert isinstance(fast, typ) and type(fast) is type(slow), (name, type(fast), type(slow))
        hf, hs = A.as_host_ndarray(fast), A.as_host_ndarray(slow)
        assert hf.shape == hs.shape and hf.dtype == hs.dtype and hf.flags.c_contiguous, name
        assert np.array_equal(_bits(hf.reshape(-1)), _bits(hs.reshape(-1))), name
        if typ is A.Array:
            assert fast.backend is slow.backend and fast.backend.threads == 1, name


def test_no_out_fast_path_runs_few_python_frames():
    a, b = np.ones(4096, np.float32), np.ones(4096, np.float32)
    calls = {"add": lambda: llm.add(a, b), "rms_norm": lambda: llm.rms_norm(a, b), "sum": lambda: llm.sum(a[None], -1)}
    torch = sys.modules.get("torch")
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        calls["add (torch)"] = lambda: llm.add(ta, tb)
        calls["add (torch, in place)"] = lambda: llm.add(ta, tb, out=ta)
    for name, f in calls.items():
        f()
        frames = python_calls(f)
        assert len(frames) <= 12, f"{name}: {sorted(frames)}"
        assert not any(fn in ("backend_of", "output", "require", "get_backend", "new_like") for _, fn in frames), \
            (name, frames)


def test_torch_in_place_calls_take_the_fast_path(monkeypatch):
    """``out`` the very torch tensor of an input (each ``Tensor.numpy()`` is a new NumPy
    object, so in place is told by the arguments themselves): the general path's kernel and
    bits, the tensor itself returned; another tensor over the same memory is not in place."""
    torch = pytest.importorskip("torch")
    x0 = (RNG.random((3, 64)) + 0.5).astype(np.float32)
    y0 = RNG.standard_normal((3, 64)).astype(np.float32)
    cs = RNG.standard_normal((8, 16)).astype(np.float32)
    calls = {"add": ("_binary", lambda x, y: llm.add(x, y, out=x)),
             "swiglu": ("_binary", lambda x, y: llm.swiglu(y, x, out=x)),
             "exp": ("_unary", lambda x, y: llm.exp(x, out=x)),
             "rope": ("_rope_rows", lambda x, y: llm.rope(x.view(3, 2, 32), torch.from_numpy(cs),
                                                           torch.from_numpy(cs), out=x.view(3, 2, 32)))}
    for name, (kname, f) in calls.items():
        def run():
            x, y = torch.from_numpy(x0.copy()), torch.from_numpy(y0)
            r = f(x, y)
            assert r is x or r.data_ptr() == x.data_ptr(), name
            return x.numpy()
        seen = _launches(monkeypatch)
        fast, slow = _both(monkeypatch, run)
        if name != "rope":            # (rope's views are new tensors: not the very array)
            assert [k for k, _ in seen] == [kname], (name, seen)
        assert np.array_equal(_bits(fast), _bits(slow)), name
    x = torch.from_numpy(x0.copy())
    seen = _launches(monkeypatch)
    llm.add(x, x, out=x.view(3, 64))                 # the same memory through another tensor object
    assert not seen and np.array_equal(x.numpy(), 2 * x0)


def test_torch_argument_errors_name_the_argument_on_both_paths(monkeypatch):
    """Wrong torch dtypes, shapes, devices and aliasing: the same ``ValueError`` naming the
    argument whether or not ``out=`` is given and whether or not the fast path is enabled."""
    torch = pytest.importorskip("torch")
    a = torch.ones(2, 8)
    bad = [(lambda o: llm.add(a, torch.ones(2, 8, dtype=torch.float64), out=o), "argument 'b': expected dtype float32 \\(a's\\), got dtype float64"),
           (lambda o: llm.add(a, torch.ones(3, 8), out=o), "argument 'b': expected a shape that broadcasts"),
           (lambda o: llm.exp(torch.ones(2, 8, dtype=torch.int32), out=o), "argument 'x': expected dtype float32.*got dtype int32"),
           (lambda o: llm.rms_norm(a, torch.ones(4), out=o), "argument 'w'"),
           (lambda o: llm.softmax(a, 2, out=o), "argument 'axis'"),
           (lambda o: llm.matmul(a, torch.ones(4), out=o), "argument 'b'"),
           (lambda o: llm.add(a, torch.ones(2, 8, device="meta"), out=o), "argument 'b': no tinykernels backend")]
    for f, msg in bad:
        msgs = []
        for general in (False, True):
            for o in (None, torch.empty(2, 8)):
                with monkeypatch.context() as m:
                    if general:
                        _general(m)
                    with pytest.raises(ValueError, match=msg) as e:
                        f(o)
                    msgs.append(str(e.value))
        assert len(set(msgs[::2])) == 1 and len(set(msgs[1::2])) == 1, msgs
    with pytest.raises(ValueError, match="argument 'out': expected dtype float32, got dtype float16"):
        llm.add(a, a, out=torch.empty(2, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match="argument 'out': .*overlaps argument 'a'"):
        big = torch.ones(40)
        llm.add(big[:16].view(2, 8), a, out=big[8:24].view(2, 8))


@pytest.mark.parametrize("kind", range(3))
def test_residual_rms_norm_and_counter_add_fast_paths_match_general(monkeypatch, kind):
    """``rms_norm(x, w, residual=r)`` (the decode step's fused residual add, ``residual_out``
    the residual itself, another array or not given) and ``counter_add``: the general path's
    kernels and bits, results of the caller's kind; a ``residual_out`` overlapping an input
    (``x``) takes the general path."""
    kinds = _kinds()
    if kind >= len(kinds):
        pytest.skip("torch is not installed")
    cv, typ = kinds[kind]
    x0, r0 = (RNG.standard_normal((3, 200)).astype(np.float32) for _ in range(2))
    w = cv(RNG.standard_normal(200).astype(np.float32))
    calls = {"in place": ("_rms_rows", lambda x, r, o: llm.rms_norm(x, w, 1e-5, residual=r, out=o, residual_out=r)),
             "new": ("_rms_rows_ro", lambda x, r, o: llm.rms_norm(x, w, 1e-5, residual=r, out=o)),
             "given": ("_rms_rows_ro", lambda x, r, o: llm.rms_norm(x, w, 1e-5, residual=r, out=o,
                                                                     residual_out=cv(np.empty_like(x0))))}
    for name, (kname, f) in calls.items():
        results = []
        for general in (False, True):
            x, r, o = cv(x0.copy()), cv(r0.copy()), cv(np.empty_like(x0))
            seen = _launches(monkeypatch)
            with monkeypatch.context() as m:
                if general:
                    _general(m)
                got = f(x, r, o)
            assert [k for k, _ in seen] == ([] if general else [kname]), (name, seen)
            assert got[0] is o and isinstance(got[1], typ) and (name != "in place" or got[1] is r), name
            results.append([np.array(A.as_host_ndarray(v)) for v in (*got, r)])
        for a, b in zip(*results):
            assert np.array_equal(_bits(a), _bits(b)), name
    s = (x0 + r0).astype(np.float64)
    np.testing.assert_allclose(results[0][0], s / np.sqrt((s ** 2).mean(-1, keepdims=True) + 1e-5)
                               * A.as_host_ndarray(w), rtol=1e-5, atol=1e-5)
    x, r = cv(x0.copy()), cv(r0.copy())
    seen = _launches(monkeypatch)
    _, s = llm.rms_norm(x, w, residual=r, out=cv(np.empty_like(x0)), residual_out=x)   # the sum into x
    assert not seen and s is x and np.array_equal(A.as_host_ndarray(x), x0 + r0)
    c = cv(np.array([5], np.int32))
    seen = _launches(monkeypatch)
    assert llm.counter_add(c, 3) is c and llm.counter_add(c) is c
    assert [k for k, _ in seen] == ["_counter", "_counter"] and A.as_host_ndarray(c)[0] == 9
    with pytest.raises(ValueError, match="argument 'n'"):
        llm.counter_add(c, 1 << 31)
    with pytest.raises(ValueError, match="argument 'counter'"):
        llm.counter_add(cv(np.zeros(1, np.int64)))


def _general_checks(monkeypatch) -> list:
    """The llm names of the general path's ``backend_of`` calls, as they happen (the fast
    paths make none; kernels they launch through ``_common.launch`` too)."""
    checked = []
    real = C.backend_of
    monkeypatch.setattr(C, "backend_of", lambda fn, **kw: checked.append(fn) or real(fn, **kw))
    return checked


def _fast_and_general(monkeypatch, checked: list, name: str, f, new_out, typ) -> list:
    """``f(out)`` with ``out`` None and ``new_out()``, each through the fast path and the
    general path: the path taken as intended, the result ``out`` or of type ``typ``, the same
    bits on both; the fast results as NumPy arrays."""
    fast = []
    for given in (False, True):
        results = []
        for general in (False, True):
            o = new_out() if given else None
            checked.clear()
            with monkeypatch.context() as m:
                if general:
                    _general(m)
                r = f(o)
            assert bool(checked) == general, (name, checked)
            assert isinstance(r, typ) and (o is None or r is o), name
            results.append(np.array(A.as_host_ndarray(r)))
        assert np.array_equal(_bits(results[0]), _bits(results[1])), name
        fast.append(results[0])
    return fast


@pytest.mark.parametrize("kind", range(3))
def test_transpose_and_fp8_dequantize_fast_paths_match_general(monkeypatch, kind):
    """2-D ``transpose`` (strided inputs too) and ``fp8_dequantize`` (torch fp8 tensors through
    their ml_dtypes view), ``out=`` given and not: the general path's kernels and bits, the
    result in the caller's kind; N-D permutations, axes as a list and fp8 views sharing
    memory with ``out`` take the general path."""
    kinds = _kinds()
    if kind >= len(kinds):
        pytest.skip("torch is not installed")
    cv, typ = kinds[kind]
    x0 = RNG.standard_normal((37, 70)).astype(np.float32)
    q0 = RNG.integers(0, 126, (5, 300)).astype(np.uint8).view(tk.float8_e4m3fn)
    if typ is not np.ndarray and typ is not A.Array:
        import torch
        q = torch.from_numpy(q0.view(np.uint8)).view(torch.float8_e4m3fn)
    else:
        q = cv(q0)
    x = cv(x0)
    calls = {"transpose": (lambda o: llm.transpose(x, out=o), (70, 37), np.float32, x0.T),
             "transpose (1, 0)": (lambda o: llm.transpose(x, (1, 0), out=o), (70, 37), np.float32, x0.T),
             "fp8_dequantize": (lambda o: llm.fp8_dequantize(q, 0.25, out=o), (5, 300), np.float16,
                                (q0.astype(np.float32) * 0.25).astype(np.float16))}
    checked = _general_checks(monkeypatch)
    for name, (f, shape, dt, want) in calls.items():
        for fast in _fast_and_general(monkeypatch, checked, name, f, lambda: cv(np.empty(shape, dt)), typ):
            assert np.array_equal(_bits(fast), _bits(np.ascontiguousarray(want))), name
    checked.clear()
    assert np.array_equal(A.as_host_ndarray(llm.transpose(x, [1, 0])), x0.T)      # a list: the general path
    assert np.array_equal(A.as_host_ndarray(llm.transpose(cv(x0[None]), (0, 2, 1))), x0[None].transpose(0, 2, 1))
    assert checked == ["transpose", "transpose"], checked
    xs = x0[::2, 1::3]                                                             # strided: the fast path
    assert np.array_equal(llm.transpose(xs), xs.T)
    with pytest.raises(ValueError, match="argument 'axes'"):
        llm.transpose(x, (0, 0))
    with pytest.raises(ValueError, match="argument 'out'"):
        llm.transpose(x, out=cv(np.empty((37, 70), np.float32)))
    with pytest.raises(ValueError, match="argument 'out'"):
        llm.fp8_dequantize(q, out=cv(np.empty((5, 300), np.float32)))


@pytest.mark.parametrize("kind", range(3))
def test_flash_decode_fast_path_matches_general(monkeypatch, kind):
    """flash_decode on host arrays (an int or a device-resident counter, grouped-query heads,
    one chunk or several, ``out=`` given or not): the general path's launches and bits, the
    result in q's kind; the general path's errors name the argument as before."""
    kinds = _kinds()
    if kind >= len(kinds):
        pytest.skip("torch is not installed")
    cv, typ = kinds[kind]
    rng = np.random.default_rng(5)
    q0 = rng.standard_normal((2, 8, 32)).astype(np.float32)
    k0, v0 = (rng.standard_normal((2, 2, 40, 32)).astype(np.float16) for _ in range(2))
    q, k, v, cnt = cv(q0), cv(k0), cv(v0), cv(np.array([30], np.int32))
    checked = _general_checks(monkeypatch)
    calls = {"int": lambda o: llm.flash_decode(q, k, v, 17, out=o),
             "counter": lambda o: llm.flash_decode(q, k, v, cnt, 0.3, out=o, offset=1),
             "splits": lambda o: llm.flash_decode(q, k, v, 40, out=o, splits=3)}
    for name, f in calls.items():
        _fast_and_general(monkeypatch, checked, name, f, lambda: cv(np.empty_like(q0)), typ)
    n = 17
    kk, vv = k0.astype(np.float64).repeat(4, 1)[:, :, :n], v0.astype(np.float64).repeat(4, 1)[:, :, :n]
    s = np.einsum("bhd,bhnd->bhn", q0, kk) / np.sqrt(32)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhn,bhnd->bhd", p / p.sum(-1, keepdims=True), vv)
    np.testing.assert_allclose(A.as_host_ndarray(llm.flash_decode(q, k, v, 17)), want, rtol=1e-4, atol=1e-5)
    for bad, msg in ((lambda: llm.flash_decode(q, k, v, 41), "argument 'kv_len'"),
                     (lambda: llm.flash_decode(q, k, cv(v0[:, :1]), 4), "argument 'v_cache'"),
                     (lambda: llm.flash_decode(q, k, v, cv(np.array([3], np.int64))), "argument 'kv_len'"),
                     (lambda: llm.flash_decode(q, k, v, 4, out=cv(np.empty((2, 8, 31), np.float32))),
                      "argument 'out'")):
        checked.clear()
        with pytest.raises(ValueError, match=msg):
            bad()
        assert checked == ["flash_decode"], checked


def test_torch_dtypes_without_a_view_keep_the_general_paths_error(monkeypatch):
    """A torch dtype NumPy and ml_dtypes cannot view (complex64) reaches the general path and
    its error naming the argument, with or without the fast paths."""
    torch = pytest.importorskip("torch")
    z = torch.ones(2, 8, dtype=torch.complex64)
    msgs = []
    for general in (False, True):
        with monkeypatch.context() as m:
            if general:
                _general(m)
            with pytest.raises(ValueError, match="argument 'x'") as e:
                llm.exp(z)
            msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
