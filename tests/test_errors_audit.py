"""Argument errors left by the audits (SPEC 9/10): every tinykernels.llm argument error reads
"llm.<fn>: argument '<name>': expected <what>, got <what was given>"; public constructors and
factories refuse a flag that is not a bool and a count that is not an int (a bool included)
with a TypeError/ValueError naming the argument; a failed asynchronous launch stops the work
that depends on it (the same stream, a stream that waited for it) until its error is reported."""
import re

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm

X = np.ones((2, 64), np.float32)
W = np.ones(64, np.float32)
Q4 = np.ones((1, 2, 4, 32), np.float32)
KC = np.ones((1, 2, 8, 32), np.float32)
COS = np.ones((4, 16), np.float32)
I32 = np.zeros(2, np.int32)

# (call, function, argument, the rest of the message: "expected ..., got ...")
LLM_BAD = [
    (lambda: llm.argmax(X), "argmax", "x", "expected a 1-D array, got shape (2, 64)"),
    (lambda: llm.argmax(W.astype(np.complex64)), "argmax", "x",
     "expected dtype float32, float16, bfloat16, float64, float8_e4m3fn, float8_e5m2, bool, int8, uint8, int16, "
     "uint16, int32, uint32, int64 or uint64, got dtype complex64"),
    (lambda: llm.argmax([1.0, 2.0]), "argmax", "x", "expected an array, got list"),
    (lambda: llm.argmax(W, out=np.zeros(2, np.int32)), "argmax", "out", "expected shape (), got shape (2,)"),
    (lambda: llm.argmax(W[:0]), "argmax", "x", "expected a non-empty array (argmax of an empty sequence), "
                                                "got shape (0,)"),
    (lambda: llm.rms_norm(X, np.ones(4, np.float32)), "rms_norm", "w", "expected shape (64,), got shape (4,)"),
    (lambda: llm.rms_norm(X, W.astype(np.int32)), "rms_norm", "w",
     "expected dtype float32 (x's or float32), got dtype int32"),
    (lambda: llm.rms_norm(X, W, out=np.zeros((2, 64), np.float64)), "rms_norm", "out",
     "expected dtype float32, got dtype float64"),
    (lambda: llm.rms_norm(X, W, out=np.zeros((3, 64), np.float32)), "rms_norm", "out",
     "expected shape (2, 64), got shape (3, 64)"),
    (lambda: llm.rms_norm(X, W, out=[0.0]), "rms_norm", "out", "expected an array, got list"),
    (lambda: llm.rms_norm(X, W, eps=True), "rms_norm", "eps", "expected a float >= 0, got True"),
    (lambda: llm.softmax(np.ones((1, 1, 1, 1, 2), np.float32)), "softmax", "x",
     "expected a 1-D to 4-D array, got shape (1, 1, 1, 1, 2)"),
    (lambda: llm.sum(X, True), "sum", "axis", "expected an int in [-2, 2), got True"),
    (lambda: llm.add(X, W[:3]), "add", "b", "expected a shape that broadcasts with a's (2, 64), got shape (3,)"),
    (lambda: llm.add(X, X.astype(np.float64)), "add", "b", "expected dtype float32 (a's), got dtype float64"),
    (lambda: llm.add(X, "a"), "add", "b", "expected an array or a Python scalar, got str 'a'"),
    (lambda: llm.gather(X, np.zeros((2, 2), np.int32)), "gather", "indices", "expected a 1-D array, got shape (2, 2)"),
    (lambda: llm.gather(W, I32), "gather", "table", "expected a 2-D array, got shape (64,)"),
    (lambda: llm.transpose(X, (0, 0)), "transpose", "axes", "expected a permutation of the 2 axes, got (0, 0)"),
    (lambda: llm.repeat(X, True, 0), "repeat", "repeats", "expected an int >= 0, got True"),
    (lambda: llm.repeat(X, 2, True), "repeat", "axis", "expected an int in [-2, 2), got True"),
    (lambda: llm.rope(Q4, COS, COS, offset=True), "rope", "offset", "expected an int >= 0, got True"),
    (lambda: llm.rope(Q4, COS, COS, offset=2), "rope", "cos",
     "expected at least 6 positions (offset 2 + 4), got shape (4, 16)"),
    (lambda: llm.rope(Q4, np.ones((4, 17), np.float32), np.ones((4, 17), np.float32)), "rope", "cos",
     "expected shape (positions, 1..16) (x's head_dim 32 / 2 at most), got shape (4, 17)"),
    (lambda: llm.matmul(X, np.ones(3, np.float32)), "matmul", "b",
     "expected shape (64,) or (64, N) (a's [M, K] = [2, 64]), got shape (3,)"),
    (lambda: llm.matmul(X, W, exact=1), "matmul", "exact", "expected a bool, got 1"),
    (lambda: llm.quantize(X, "q9"), "quantize", "qtype",
     "expected a quantization type 'q4_0', 'q8_0' or 'q4_k', got 'q9'"),
    (lambda: llm.flash_attention(Q4, KC[..., :16], KC[..., :16]), "flash_attention", "k",
     "expected head_dim 32 (q's), got shape (1, 2, 8, 16)"),
    (lambda: llm.flash_decode(Q4[:, :, 0], KC, KC, 9), "flash_decode", "kv_len",
     "expected 0 to 8 keys (the caches' length), got 9"),
    (lambda: llm.cast(X, "nope"), "cast", "dtype", "expected one of float32, float16, bfloat16, float64, "
                                                   "float8_e4m3fn or float8_e5m2, got 'nope'"),
    (lambda: llm.counter_add(np.zeros(1, np.float32), 1), "counter_add", "counter",
     "expected dtype int32, got dtype float32"),
    (lambda: llm.fill(np.zeros(3, np.int8), 300), "fill", "value",
     "expected a value in int8's range -128 to 127, got 300"),
    (lambda: llm.rms_norm(tk.asarray(X, backend=tk.Interpreter()), W), "rms_norm", "w",
     "expected an array on the backend of argument 'x' (tk.Interpreter()), got one on tk.CPU("),
]


@pytest.mark.parametrize("case", range(len(LLM_BAD)))
def test_llm_argument_errors_say_function_argument_expected_and_given(case):
    call, fn, arg, rest = LLM_BAD[case]
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith(f"llm.{fn}: argument '{arg}': {rest}"), msg
    assert re.match(r"llm\.\w+: argument '\w+': expected .+, got ", msg), msg


# (call, exception type, message)
CTOR_BAD = [
    (lambda: tk.CPU(debug="x"), TypeError, "tk.CPU: argument 'debug': expected a bool (True or False), got str 'x'"),
    (lambda: tk.CPU(debug=1), TypeError, "tk.CPU: argument 'debug': expected a bool (True or False), got int 1"),
    (lambda: tk.CPU(threads=1.5), TypeError, "tk.CPU: argument 'threads': expected an int, got float 1.5"),
    (lambda: tk.CPU(threads=True), TypeError, "tk.CPU: argument 'threads': expected an int, got bool True"),
    (lambda: tk.CPU(threads=0), ValueError, "tk.CPU: argument 'threads': expected an int >= 1, got 0"),
    (lambda: tk.Interpreter(check="yes"), TypeError, "tk.Interpreter: argument 'check': expected a bool"),
    (lambda: tk.Interpreter(debug="no"), TypeError, "tk.Interpreter: argument 'debug': expected a bool"),
    (lambda: tk.CPU().stream(priority=True), TypeError, "stream(): argument 'priority': expected an int"),
    (lambda: tk.CPU().stream(priority=1.5), TypeError, "stream(): argument 'priority': expected an int"),
    (lambda: tk.Interpreter().stream(priority="hi"), TypeError, "stream(): argument 'priority': expected an int"),
    (lambda: tk.zeros(True), TypeError, "shape must be an int or a tuple of ints, got True"),
    (lambda: tk.zeros((2, np.True_)), TypeError, "shape must be an int or a tuple of ints"),
    (lambda: tk.random.key(True), TypeError, "tk.random.key: the seed must be an int, got bool True"),
    (lambda: tk.synchronize(tk.CPU(), timeout="x"), TypeError,
     "synchronize: argument 'timeout': expected seconds (a number) or None, got str 'x'"),
    (lambda: tk.CPU().stream().synchronize(timeout=float("nan")), ValueError,
     "synchronize: argument 'timeout': expected seconds (a number) or None, got nan"),
]


@pytest.mark.parametrize("case", range(len(CTOR_BAD)))
def test_constructor_and_factory_arguments_are_checked(case):
    call, exc, msg = CTOR_BAD[case]
    with pytest.raises(exc) as e:
        call()
    assert str(e.value).startswith(msg), str(e.value)


def test_good_constructor_arguments_still_work():
    assert tk.CPU(threads=np.int64(2), debug=np.True_).debug is True
    assert tk.CPU(threads=1, debug=False).threads == 1
    assert tk.Interpreter(check=True).check is True
    assert tk.CPU().stream(priority=np.int8(-1)).priority == -1
    assert tk.zeros((np.int64(2), 3)).shape == (2, 3)
    assert tk.random.key(-1) == tk.random.key((1 << 64) - 1)      # seeds are taken mod 2**64


@pytest.mark.skipif(not tk.backends()["OpenCL"][0], reason="no OpenCL device")
def test_opencl_and_webgpu_selectors_are_checked():
    idx = r"expected an index \(int\) or part of a name \(str\)"
    for kw, exc, msg in ((dict(platform=1.5), TypeError, f"argument 'platform': {idx}, got float 1.5"),
                         (dict(platform=True), TypeError, f"argument 'platform': {idx}, got bool True"),
                         (dict(device=-1), ValueError, "argument 'device': expected an int >= 0, got -1"),
                         (dict(debug="x"), TypeError, "argument 'debug': expected a bool")):
        with pytest.raises(exc, match=f"tk.OpenCL: {msg}"):
            tk.OpenCL(**kw)
    with pytest.raises(tk.BackendUnavailable, match="no OpenCL device matches platform='nope'"):
        tk.OpenCL(platform="nope")
    if tk.backends()["WebGPU"][0]:
        with pytest.raises(TypeError, match="tk.WebGPU: argument 'device': expected an adapter index .*, got bool"):
            tk.WebGPU(device=True)
        with pytest.raises(TypeError, match="tk.WebGPU: argument 'debug': expected a bool"):
            tk.WebGPU(debug="x")


@tk.kernel
def put(a, i, v):
    a[i] = v


def _debug_backend(dev):
    if dev == "CL":
        if not tk.backends()["OpenCL"][0]:
            pytest.skip("no OpenCL device")
        return tk.OpenCL(debug=True)
    return tk.CPU(debug=True) if dev == "CPU" else tk.Interpreter()


@pytest.mark.parametrize("dev", ["CPU", "INTERP", "CL"])
def test_a_failed_launch_stops_dependent_work_until_reported(dev):
    """A debug-mode IndexError on stream s: on the host backends (asynchronous streams) the
    later launch on s and the launch of s2 queued behind s2.wait(ev) do not run; s reports
    the IndexError, s2 a LaunchError caused by it; work submitted after the reports runs.
    On OpenCL the debug launch raises the IndexError itself (so it is reported at once) and
    nothing later is stopped: the same rule."""
    b = _debug_backend(dev)
    a = tk.asarray(np.zeros(4, np.float32), backend=b)
    s, s2 = b.stream(), b.stream()
    try:
        ev = put(b)(a, 10, 1.0, ndrange=1, stream=s)
    except IndexError:
        assert dev == "CL"
        ev = None
    later = put(b)(a, 1, 2.0, ndrange=1, stream=s)
    if ev is not None:
        s2.wait(ev)
    put(b)(a, 2, 3.0, ndrange=1, stream=s2)
    if dev == "CL":
        s.synchronize()
        s2.synchronize()
        assert a.numpy().tolist() == [0, 2, 3, 0]
        return
    with pytest.raises(IndexError, match="index 10 is out of bounds"):
        s.synchronize()
    with pytest.raises(tk.LaunchError, match="waited for .*failed") as waited:
        s2.synchronize()
    assert isinstance(waited.value.__cause__, IndexError)
    with pytest.raises(tk.LaunchError, match="did not run"):
        later.wait()
    assert a.numpy().tolist() == [0, 0, 0, 0]
    put(b)(a, 3, 4.0, ndrange=1, stream=s)
    put(b)(a, 0, 5.0, ndrange=1, stream=s2)
    tk.synchronize(b)
    assert a.numpy().tolist() == [5, 0, 0, 4]


@pytest.mark.parametrize("dev", ["CPU", "CL"])
def test_a_device_stream_waiting_for_a_failed_host_event_raises_it(dev):
    """A stream of any backend told to wait for a failed, unreported host event reports its
    error there (a device queue cannot carry it), so nothing is queued behind it."""
    cpu = tk.CPU(debug=True)
    a = tk.asarray(np.zeros(4, np.float32), backend=cpu)
    ev = put(cpu)(a, 10, 1.0, ndrange=1, stream=cpu.stream())
    target = _debug_backend(dev).stream() if dev == "CL" else cpu.stream()
    if dev == "CL":
        with pytest.raises(IndexError, match="index 10"):
            target.wait(ev)
        target.wait(ev)                               # reported: only orders now
    else:
        target.wait(ev)
        with pytest.raises(tk.LaunchError):
            target.synchronize()
        with pytest.raises(IndexError):
            ev.wait()
