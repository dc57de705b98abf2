"""A dtype annotation on a kernel or @tk.func parameter: a scalar argument is cast to that dtype
at entry (as the annotated assignment ``n: tk.uint8 = n`` does: integers wrap, floats round), an
array argument must have that dtype (else a CompileError naming the parameter); any other
annotation (``int``, ``np.ndarray``, a string) is a hint the compiler ignores. Same on every
backend (docs/language.md, "Launching")."""
import numpy as np
import pytest

import tinykernels as tk

DEVS = ["CPU", "INTERP", "INTERP:CHECK"] + [dev for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                            if tk.backends()[name][0]]


@tk.kernel
def wrap_and_round(out, n: tk.uint8, x: tk.float32):
    i = tk.index()
    out[i] = n + x / 3


@tk.func
def times(v, t: tk.int16):
    return v * t


@tk.kernel
def through_func(out, a: tk.Const):
    i = tk.index()
    out[i] = times(a[i], 70000)


@tk.kernel
def typed_array(out: tk.float32, a: tk.Const):
    i = tk.index()
    out[i] = a[i] * 2


@tk.kernel
def hints_only(out: np.ndarray, n: int, m: "tk.int8"):
    i = tk.index()
    out[i] = n + m


@tk.kernel
def reassigned(out, n: tk.int8):
    i = tk.index()
    n = n + 1                      # int8 arithmetic: 127 + 1 wraps
    out[i] = n


def test_scalar_annotation_casts_like_the_annotated_assignment():
    for dev in DEVS:
        be = tk.backend(dev)
        out = tk.zeros(3, tk.float32, backend=be)
        wrap_and_round(be)(out, 300, 1.0, ndrange=3)
        want = np.float32(np.uint8(44) + np.float32(1.0) / np.float32(3))
        assert out.numpy().tolist() == [want] * 3, dev


def test_float64_argument_is_rounded_to_the_annotated_float32():
    be = tk.CPU()
    out = np.zeros(1, np.float64)
    wrap_and_round(be)(out, 0, 0.1, ndrange=1)
    tk.synchronize(be)
    assert out[0] == np.float64(np.float32(0.1) / np.float32(3))
    assert out[0] != 0.1 / 3


def test_func_parameter_annotation_casts():
    for dev in DEVS:
        be = tk.backend(dev)
        a = tk.asarray(np.array([1, -2, 3], np.int32), backend=be)
        out = tk.zeros(3, tk.int32, backend=be)
        through_func(be)(out, a, ndrange=3)
        # 70000 as int16 is 4464; int32 * int16 computes in int32
        assert out.numpy().tolist() == [4464, -8928, 13392], dev


def test_reassigned_annotated_parameter_keeps_its_dtype():
    for dev in DEVS:
        be = tk.backend(dev)
        out = tk.zeros(1, tk.int32, backend=be)
        reassigned(be)(out, 127, ndrange=1)
        assert out.numpy().tolist() == [-128], dev


@tk.kernel
def reassigned_in_loops(out, x: tk.Const, s: float, n: int, m: tk.int16):
    i = tk.index()
    acc = x[i]
    trips = 0
    while n > 0 and trips < 10:     # bounded: the loop's condition never saw n change (adx21)
        acc = acc * s
        n -= 1
        trips += 1
    for k in range(2):
        s = s * x[i] + 0.25         # every trip read the argument, not the last trip's s
    for m in range(m):              # a loop variable named like an annotated parameter
        acc = acc + m
    out[i, 0] = acc
    out[i, 1] = s
    out[i, 2] = n


def test_a_parameter_reassigned_in_loops():
    """A reassigned parameter lives in a local copy, which an assignment in a loop did not
    update until adx21: the assignment wrote a local of the parameter's own name, while the
    loop's next trip (its condition, its body) read the copy again: `while n > 0: n -= 1` never
    ended and `for k in range(2): s = s * x + c` gave `s * x + c` on the compiled backends (the
    interpreter, running the Python, was right)."""
    x = np.array([0.5, 0.75, 1.0])
    want = np.stack([x * 0.5 ** 3 + 3, (0.5 * x + 0.25) * x + 0.25, np.zeros(3)], axis=1)
    for dev in DEVS:
        be = tk.backend(dev)
        t = np.float64 if be.supports_float64 else np.float32
        out = tk.zeros((3, 3), t, backend=be)
        reassigned_in_loops(be)(out, tk.asarray(x.astype(t), backend=be), 0.5, 3, 3, ndrange=3)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, err_msg=dev)


def test_array_of_the_annotated_dtype_is_accepted():
    for dev in DEVS:
        be = tk.backend(dev)
        out = tk.zeros(4, tk.float32, backend=be)
        a = tk.asarray(np.arange(4, dtype=np.float32), backend=be)
        typed_array(be)(out, a, ndrange=4)
        assert out.numpy().tolist() == [0.0, 2.0, 4.0, 6.0], dev


def test_array_of_another_dtype_is_a_compile_error_naming_the_parameter():
    for dev in ["CPU", "INTERP"]:
        be = tk.backend(dev)
        with pytest.raises(tk.CompileError) as e:
            typed_array(be)(np.zeros(4), np.ones(4), ndrange=4)
        msg = str(e.value)
        assert "parameter 'out' is annotated float32 but receives an array of float64" in msg, msg
        assert "test_param_annotations.py" in msg


def test_other_annotations_are_ignored():
    for dev in DEVS:
        be = tk.backend(dev)
        out = tk.zeros(2, tk.int64, backend=be) if dev != "WEBGPU" else tk.zeros(2, tk.int32, backend=be)
        hints_only(be)(out, 5, 300, ndrange=2)
        assert out.numpy().tolist() == [305, 305], dev


def test_annotation_appears_in_the_generated_source_as_a_cast():
    src = wrap_and_round.source("CPU", np.zeros(2, np.float32), 300, 1.0, ndrange=2)
    assert "uint8_t" in src
