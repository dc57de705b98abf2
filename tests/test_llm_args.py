"""Arguments every tinykernels.llm function shares: ``stream=`` is checked up front with an
error naming the llm function and the argument (not an internal kernel), and scalar operands
follow NumPy (a bool is 0 or 1)."""
import numpy as np
import pytest

import tinykernels as tk
from llm_helpers import python_calls
from tinykernels import llm

rng = np.random.default_rng(7)
X = rng.standard_normal((2, 64)).astype(np.float32)
W = rng.standard_normal(64).astype(np.float32)
Q4 = rng.standard_normal((1, 2, 4, 32)).astype(np.float32)
COS = np.ones((4, 16), np.float32)
SIN = np.zeros((4, 16), np.float32)
KC = rng.standard_normal((1, 2, 8, 32)).astype(np.float32)

# name -> call taking the stream (each with valid arrays, so only the stream is wrong)
CALLS = {
    "add": lambda s: llm.add(X, X, stream=s),
    "mul": lambda s: llm.mul(X, 2.0, stream=s),
    "pow": lambda s: llm.pow(X, 2.0, stream=s),
    "exp": lambda s: llm.exp(X, stream=s),
    "rsqrt": lambda s: llm.rsqrt(X, stream=s),
    "fill": lambda s: llm.fill(X.copy(), 1.0, stream=s),
    "cast": lambda s: llm.cast(X, np.float16, stream=s),
    "swiglu": lambda s: llm.swiglu(X, X, stream=s),
    "rms_norm": lambda s: llm.rms_norm(X, W, stream=s),
    "softmax": lambda s: llm.softmax(X, stream=s),
    "sum": lambda s: llm.sum(X, 1, stream=s),
    "argmax": lambda s: llm.argmax(W, stream=s),
    "gather": lambda s: llm.gather(X, np.array([1, 0], np.int32), stream=s),
    "transpose": lambda s: llm.transpose(X, stream=s),
    "repeat": lambda s: llm.repeat(X, 2, 0, stream=s),
    "rope": lambda s: llm.rope(Q4, COS, SIN, stream=s),
    "matmul": lambda s: llm.matmul(X, W, stream=s),
    "dequantize": lambda s: llm.dequantize(llm.quantize(X, "q8_0"), stream=s),
    "flash_attention": lambda s: llm.flash_attention(Q4, Q4, Q4, stream=s),
    "flash_decode": lambda s: llm.flash_decode(Q4[:, :, 0], KC, KC, 4, stream=s),
    "counter_add": lambda s: llm.counter_add(np.zeros(1, np.int32), 1, stream=s),
    "kv_append": lambda s: llm.kv_append(KC.copy(), Q4[:, :, :1], np.zeros(1, np.int32), stream=s),
    "quantize_activations": lambda s: llm.quantize_activations(W, stream=s),
}


@pytest.mark.parametrize("fn", sorted(CALLS))
def test_bad_stream_names_the_llm_function_and_argument(fn):
    """A stream that is not a stream, or one of another backend, is refused before any work
    with a LaunchError (also a ValueError, as llm's other argument errors) naming llm.<fn>
    and 'stream'; a stream of the right backend works."""
    for bad in ("s", 3, tk.backend("INTERP").stream()):
        with pytest.raises(tk.LaunchError) as e:
            CALLS[fn](bad)
        assert isinstance(e.value, ValueError)
        msg = str(e.value)
        assert f"llm.{fn}: argument 'stream'" in msg and "kernel '" not in msg, msg
    s = tk.backend("CPU").stream()
    CALLS[fn](s)
    s.synchronize()


def test_bad_stream_is_refused_before_out_is_written():
    out = np.full_like(X, 7.0)
    with pytest.raises(tk.LaunchError):
        llm.add(X, X, out=out, stream=object())
    assert (out == 7.0).all()


@pytest.mark.parametrize("fn, op", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                    ("div", np.divide), ("pow", np.power)])
@pytest.mark.parametrize("b", [True, False, np.True_, np.False_])
def test_bool_scalar_operands_are_zero_or_one_as_in_numpy(fn, op, b):
    x = np.abs(X) + 0.5
    with np.errstate(divide="ignore"):
        ref = op(x, b)
    got = getattr(llm, fn)(x, b)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_bool_fill_value_and_bool_parameters():
    """Values follow NumPy (True is 1); parameters that are counts, axes or sizes still refuse
    a bool (``repeat(x, True)`` is almost always a mistake)."""
    y = X.copy()
    llm.fill(y, np.True_)
    assert (y == 1.0).all()
    with pytest.raises(ValueError, match="'repeats'"):
        llm.repeat(X, True, 0)
    with pytest.raises(ValueError, match="'axis'"):
        llm.sum(X, True)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "float32"])
def test_fill_float_dtypes_keep_fractions(name):
    """fill rounds the value to x's dtype: fp8 arrays (NumPy kind 'V', not 'f') were filled
    with int(value) (0.5 -> 0)."""
    ml = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml, name, None) or name)
    for value in (0.5, -1.25, 3):
        x = np.zeros(5, dt)
        llm.fill(x, value)
        np.testing.assert_array_equal(x.astype(np.float64), np.full(5, value, dt).astype(np.float64))


@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.int32, np.uint32, np.int64])
def test_fill_integer_values_as_numpy_stores_them(dt):
    """Integer arrays: floats truncate and bools are 0/1 (as np.full); NaN, infinities and
    values out of range are a ValueError naming 'value' (300 into uint8 wrapped to 44; NaN
    was Python's bare 'cannot convert float NaN to integer')."""
    info = np.iinfo(dt)
    for value in (2.5, -1.5 if info.min < 0 else 1.5, True, info.max, info.min):
        x = np.zeros(4, dt)
        llm.fill(x, value)
        np.testing.assert_array_equal(x, np.full(4, value).astype(dt))
    for bad in (info.max + 1, info.min - 1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="llm.fill: argument 'value'"):
            llm.fill(np.zeros(4, dt), bad)


@pytest.mark.parametrize("be", ["CPU", "CL"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_zero_d_array_operand_broadcasts_as_in_numpy(be, dt):
    """A 0-d array b broadcasts against a (NumPy: x + np.array(2.0)); it was 'has 0 dimensions;
    expected 1 to 4'. Its dtype must still be a's."""
    if be not in tk.backends_available():
        pytest.skip(f"{be} unavailable")
    b_ = tk.backend(be)
    x = (np.abs(X) + 0.5).astype(dt)
    s = np.array(1.75, dt)
    for fn, op in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
                   ("pow", np.power)):
        got = getattr(llm, fn)(tk.asarray(x, backend=b_), tk.asarray(s, backend=b_))
        ref = op(x.astype(np.float64), float(s)).astype(dt)
        np.testing.assert_allclose(got.numpy().astype(np.float64), ref, rtol=2e-3 if dt == np.float16 else 1e-6)
    with pytest.raises(ValueError, match="argument 'b': expected dtype .*, got dtype float64"):
        llm.add(X, np.array(1.0))


@pytest.mark.parametrize("be", ["CPU", "CL"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_zero_d_array_a_broadcasts_as_in_numpy(be, dt):
    """A 0-d array a broadcasts too (NumPy: np.array(2.0) - x): against an array b the result
    has b's shape; against a 0-d array or a Python scalar b it is 0-d. It was 'argument 'a':
    has 0 dimensions; expected 1 to 4'."""
    if be not in tk.backends_available():
        pytest.skip(f"{be} unavailable")
    b_ = tk.backend(be)
    x = (np.abs(X) + 0.5).astype(dt)
    s, s2 = np.array(1.75, dt), np.array(0.5, dt)
    tol = dict(rtol=2e-3 if dt == np.float16 else 1e-6)
    for fn, op in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
                   ("pow", np.power)):
        f = getattr(llm, fn)
        got = f(tk.asarray(s, backend=b_), tk.asarray(x, backend=b_))
        assert got.shape == x.shape and got.dtype == dt
        np.testing.assert_allclose(got.numpy().astype(np.float64),
                                   op(float(s), x.astype(np.float64)).astype(dt).astype(np.float64), **tol)
        for other in (tk.asarray(s2, backend=b_), 0.5):
            got = f(tk.asarray(s, backend=b_), other)
            assert got.shape == () and got.dtype == dt
            np.testing.assert_allclose(float(got.numpy()), float(op(np.float64(s), 0.5).astype(dt)), **tol)
        out = tk.zeros(x.shape, dt, backend=b_)
        assert f(tk.asarray(s, backend=b_), tk.asarray(x, backend=b_), out=out) is out
        np.testing.assert_allclose(out.numpy().astype(np.float64),
                                   op(float(s), x.astype(np.float64)).astype(dt).astype(np.float64), **tol)
    n = np.array(3.0, dt)                                  # NumPy in place on a 0-d array
    assert llm.mul(n, 2.0, out=n) is n and float(n) == 6.0
    with pytest.raises(ValueError, match="argument 'b': expected dtype .*, got dtype float64"):
        llm.add(np.array(1.0, np.float32), np.ones(3))
    with pytest.raises(ValueError, match="argument 'out'"):
        llm.add(np.array(1.0, np.float32), np.ones(3, np.float32), out=np.zeros((), np.float32))


@pytest.mark.parametrize("be", ["CPU", "CL"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_zero_d_array_unary_cast_and_fill_as_in_numpy(be, dt):
    """The unary functions, cast and fill take a 0-d array as NumPy's ufuncs do (np.exp of a
    0-d array is 0-d); they said 'has 0 dimensions; expected 1 to 4' while add/mul took it."""
    if be not in tk.backends_available():
        pytest.skip(f"{be} unavailable")
    b_ = tk.backend(be)
    x = np.array(1.75, dt)
    tol = dict(rtol=2e-3 if dt == np.float16 else 1e-6)
    for fn, ref in (("exp", np.exp), ("log", np.log), ("sin", np.sin), ("cos", np.cos),
                    ("tanh", np.tanh), ("sqrt", np.sqrt), ("rsqrt", lambda v: 1 / np.sqrt(v))):
        got = getattr(llm, fn)(tk.asarray(x, backend=b_))
        assert got.shape == () and got.dtype == dt, fn
        np.testing.assert_allclose(float(got.numpy()), float(ref(np.float64(x))), **tol, err_msg=fn)
        out = tk.zeros((), dt, backend=b_)
        assert getattr(llm, fn)(tk.asarray(x, backend=b_), out=out) is out
        np.testing.assert_allclose(float(out.numpy()), float(ref(np.float64(x))), **tol, err_msg=fn)
    got = llm.cast(tk.asarray(np.array(1.1, dt), backend=b_), np.float16)
    assert got.shape == () and float(got.numpy()) == float(np.array(1.1, dt).astype(np.float16))
    z = tk.zeros((), dt, backend=b_)
    assert llm.fill(z, 2.5) is z and float(z.numpy()) == 2.5
    n = np.array(4.0, dt)                                  # NumPy in, NumPy out, in place
    assert llm.sqrt(n, out=n) is n and float(n) == 2.0
    with pytest.raises(ValueError, match="argument 'out'"):
        llm.exp(np.array(1.0, np.float32), out=np.zeros(1, np.float32))


def test_errors_name_the_callers_arguments():
    """The binary-shaped functions name their own arguments in errors (SPEC 10: 'raises
    ValueError naming the argument'): tanh_grad's x and g, pow's x and y, swiglu's w1 and w3;
    they said 'a' and 'b', names those functions do not have."""
    a, bad_shape, bad_dt = np.zeros((3, 4), np.float32), np.zeros(5, np.float32), np.zeros(4, np.float16)
    for fn, (na, nb) in (("tanh_grad", ("x", "g")), ("pow", ("x", "y")), ("swiglu", ("w1", "w3"))):
        f = getattr(llm, fn)
        with pytest.raises(ValueError, match=f"llm.{fn}: argument '{nb}': expected a shape that broadcasts "
                                             f"with {na}'s .*, got shape .5,."):
            f(a, bad_shape)
        with pytest.raises(ValueError, match=f"llm.{fn}: argument '{nb}': expected dtype float32 .{na}'s."):
            f(a, bad_dt)
        with pytest.raises(ValueError, match=f"llm.{fn}: argument '{na}': expected an array"):
            f([1.0], a)
        with pytest.raises(ValueError, match=f"llm.{fn}: argument '{na}': expected dtype .*, got dtype int32"):
            f(np.zeros(3, np.int32), 1.0)
    with pytest.raises(ValueError, match="llm.pow: argument 'y': expected an array or a Python scalar"):
        llm.pow(a, "2")
    with pytest.raises(ValueError, match="llm.add: argument 'b': expected a shape"):
        llm.add(a, bad_shape)


@pytest.mark.parametrize("kind", ["tk", "numpy"])
def test_valid_calls_do_no_avoidable_host_work(kind):
    """Host time per call: a valid call of a cached kernel formats no dtype names (NumPy's
    dtype str/name run Python code: eager error messages and dtype lookups cost a few us
    each) and, with tk.Array arguments on the CPU, takes the launcher's fast path instead of
    validating the arguments in Python again (_prepare) on every launch."""
    be = tk.backend("CPU")
    wrap = (lambda a: tk.asarray(a, backend=be)) if kind == "tk" else (lambda a: a)
    x, y = wrap(np.ones(4096, np.float32)), wrap(np.full(4096, 2.0, np.float32))
    o = wrap(np.zeros(4096, np.float32))
    xr, w, orr = wrap(np.ones((2, 4096), np.float32)), wrap(np.ones(4096, np.float32)), wrap(np.zeros((2, 4096), np.float32))
    calls = {"add": lambda: llm.add(x, y, out=o), "add_new": lambda: llm.add(x, y), "exp": lambda: llm.exp(x, out=o),
             "mul_scalar": lambda: llm.mul(x, 2.0, out=o), "rms_norm": lambda: llm.rms_norm(xr, w, out=orr),
             "add_broadcast": lambda: llm.add(xr, w, out=orr)}
    for name, f in calls.items():
        f()
        seen = python_calls(f)
        slow = sorted(c for c in seen if c[0].endswith("numpy/_core/_dtype.py") or c[1] == "_prepare")
        assert not slow, f"{name}: {slow}"
    np.testing.assert_allclose(np.asarray(orr.numpy() if kind == "tk" else orr), 2.0)


def test_dtypes_may_be_torch_dtypes():
    """llm.cast(t, torch.float16) and tk.zeros(..., dtype=torch.int32): a torch dtype names the
    same dtype as its NumPy twin (it was "torch.float16 is not one of float32, ...")."""
    torch = pytest.importorskip("torch")
    x = torch.linspace(-3, 3, 12).reshape(3, 4)
    for d in (torch.float16, torch.bfloat16, torch.float64, torch.float32):
        r = llm.cast(x, d)
        assert isinstance(r, torch.Tensor) and r.dtype == d
        torch.testing.assert_close(r, x.to(d), rtol=0, atol=0)
    assert tk.zeros(3, dtype=torch.int32).dtype == np.int32
    with pytest.raises(ValueError, match="argument 'dtype': expected one of .*, got torch.int32"):
        llm.cast(x, torch.int32)
