"""The frontend's errors: every user mistake is a tk.CompileError naming file, line, column
and showing the line; plus the language features that are resolved at compile time."""
import inspect
import math

import numpy as np
import pytest

import tinykernels as tk

CPU = tk.CPU()


def _line(fn, text):
    src, start = inspect.getsourcelines(fn)
    body = next(k for k, line in enumerate(src) if line.lstrip().startswith("def "))
    for k, line in enumerate(src):
        if k > body and text in line:
            return start + k
    raise AssertionError(text)


def _compile_error(fn, *args, nd=4, wg=None):
    with pytest.raises(tk.CompileError) as e:
        tk.kernel(fn)(CPU, wg)(*args, ndrange=nd)
    return e.value


CASES = []


def case(marker, *fragments, args=None, wg=None):
    def deco(fn):
        CASES.append(pytest.param(fn, marker, fragments, args, wg, id=fn.__name__))
        return fn
    return deco


@case("foo(1)", "'foo' is not defined")
def undefined_call(A):
    A[tk.index()] = foo(1)  # noqa: F821


@case("[1, 2]", "lists are not supported")
def a_list(A):
    x = [1, 2]  # noqa: F841


@case("A.bogus", "no attribute 'bogus'")
def bad_attr(A):
    A[tk.index()] = A.bogus


@case("np.uint8(1) + 300", "300 is out of bounds for uint8")
def weak_overflow(A):
    A[0] = np.uint8(1) + 300


@case("= y", "'y' is used before it is assigned")
def before_assign(A):
    A[tk.index()] = y  # noqa: F821
    y = 1  # noqa: F841


@case("in [1, 2]", "only loop over range")
def non_range_loop(A):
    for k in [1, 2]:
        pass


@case("A[1, 2]", "1 dimension(s) but 2 index(es)")
def wrong_rank(A):
    A[1, 2] = 0


@case("math.gamma", "cannot call 'gamma'")
def unknown_math(A):
    A[0] = math.gamma(A[0])


@case("lambda", "lambdas are not supported")
def a_lambda(A):
    f = lambda v: v  # noqa: E731,F841


@case("with ", "'with' statements are not supported")
def a_with(A):
    with open("x"):
        pass


@case("return 1", "cannot return a value")
def kernel_returns(A):
    return 1


@case("A[0:2]", "slicing is not supported")
def a_slice(A):
    A[0:2] = 1


@case("tk.localmem(tk.float32, (n,))", "known at compile time")
def dynamic_localmem(A, n):
    t = tk.localmem(tk.float32, (n,))
    t[0] = 1


@case("tk.index(tk.Linear", "write tk.index(space, form)")
def swapped_index_args(A):
    A[tk.index(tk.Linear, tk.Global)] = 1


@case("x = 1.5 << 2", "needs integers")
def float_shift(A):
    x = 1.5 << 2  # noqa: F841


@case("print_helper(", "decorate it with @tk.func")
def plain_python_call(A):
    A[0] = print_helper(1)


def print_helper(v):
    return v


# Python's own spelling of what is refused (these said "'global' are not supported", "NamedExpr
# expressions", "operator MatMult", "comparison Is").
@case("global G", "'global' statements are not supported")
def a_global_statement(A):
    global G
    A[0] = 1


@case("assert n", "'assert' statements are not supported")
def an_assert(A, n):
    assert n > 0
    A[0] = 1


@case("(v := 2)", "assignment expressions (':=') are not supported")
def a_walrus(A):
    if (v := 2) > 1:
        A[0] = v


@case("A[0] @ A[1]", "operator '@' (matrix multiplication) is not supported")
def a_matmul(A):
    A[0] = A[0] @ A[1]


@case("A[0] is None", "comparison 'is' is not supported")
def an_is(A):
    if A[0] is None:
        A[0] = 1


@case("n in (1, 2)", "comparison 'in' is not supported")
def an_in(A, n):
    if n in (1, 2):
        A[0] = 1


# Keywords were allowed on every call as long as they were all named 'inclusive' (and any on
# tk.print): math.sin(x, inclusive=True) compiled, tk.group_reduce ignored inclusive= and a
# third argument, tk.print ignored sep= / end=.
@case("math.sin(A[0], inclusive=True)", "keyword arguments are not supported")
def keyword_on_math(A):
    A[0] = math.sin(A[0], inclusive=True)


@case('tk.print("v", A[0], sep="-")', "keyword arguments are not supported")
def keyword_on_print(A):
    tk.print("v", A[0], sep="-")


@case('tk.group_reduce(A[0], "add", inclusive=False)', "unexpected keyword argument 'inclusive'", wg=4)
def inclusive_on_reduce(A):
    A[0] = tk.group_reduce(A[0], "add", inclusive=False)


@case('tk.group_reduce(A[0], "add", False)', "takes 2 arguments, got 3", wg=4)
def three_arguments_to_reduce(A):
    A[0] = tk.group_reduce(A[0], "add", False)


@case('tk.group_scan(A[0], "add", True, inclusive=False)', "inclusive given twice", wg=4)
def inclusive_twice(A):
    A[0] = tk.group_scan(A[0], "add", True, inclusive=False)


@pytest.mark.parametrize("fn,marker,fragments,args,wg", CASES)
def test_errors_name_file_line_and_show_source(fn, marker, fragments, args, wg):
    err = _compile_error(fn, *(args or (np.zeros(4),) + ((3,) if "n" in inspect.signature(fn).parameters else ())), wg=wg)
    msg = str(err)
    line = _line(fn, marker)
    assert err.line == line and err.filename == __file__
    assert f"{__file__}:{line}:" in msg
    assert marker.strip() in msg                       # the offending source line is shown
    assert "^" in msg                                  # with a caret under the column
    for f in fragments:
        assert f in msg
    assert fn.__name__ in msg


def test_recursion_is_rejected():
    @tk.func
    def rec(n):
        return rec(n - 1)

    def body(A):
        A[0] = rec(3)
    err = _compile_error(body, np.zeros(4))
    assert "recursive" in str(err) and "rec" in str(err)


def test_atomics_on_unsupported_dtype_name_it():
    def body(A):
        tk.atomic_add(A, 0, 1)
    err = _compile_error(body, np.zeros(4, np.int8))
    assert "int8" in str(err) and err.line == _line(body, "atomic_add")


def test_atomic_indices_must_be_integers():
    """An atomic's index is checked as a subscript's: a float index was truncated silently
    (tk.atomic_add(A, 1.5, v) updated A[1])."""
    def flat(A, x):
        tk.atomic_add(A, 1.5, 1.0)

    def loaded(A, x):
        tk.atomic_max(A, x[0], 1.0)

    def pair(A, x):
        tk.atomic_cas(A, (0, 1.0), 0.0, 1.0)
    for body, shape in ((flat, (4,)), (loaded, (4,)), (pair, (2, 2))):
        err = _compile_error(body, np.zeros(shape, np.float32), np.zeros(4, np.float32))
        assert "array indices must be integers" in str(err) and err.line == _line(body, "tk.atomic_")


def test_compile_time_features():
    SCALE = 3

    @tk.func
    def twice(v):
        return v * 2

    @tk.kernel
    def k(out, x: tk.Const, n: tk.constexpr):
        i = tk.index()
        buf = tk.private(x.dtype, (n,))                # dtype and shape known at compile time
        for j in range(n):
            buf[j] = x[i] * j
        acc = x.dtype(0)
        for j in range(n):
            acc += buf[j]
        if n > 2:                                      # folded away for small n
            acc = twice(acc) + SCALE
        out[i] = acc
    x = np.arange(6, dtype=np.float32)
    for n in (2, 4):
        out = np.zeros(6, np.float32)
        k(CPU)(out, x, n, ndrange=6)
        ref = x * sum(range(n))
        np.testing.assert_array_equal(out, ref * 2 + SCALE if n > 2 else ref)
    src = k.source("CPU", np.zeros(6, np.float32), x, 2, ndrange=6)
    assert "twice" not in src                           # the branch was folded at compile time


def test_tuple_returning_funcs_and_nested_calls():
    @tk.func
    def minmax(a, b):
        if a < b:
            return a, b
        return b, a

    @tk.func
    def spread(a, b):
        lo, hi = minmax(a, b)
        return hi - lo

    @tk.kernel
    def k(out, x: tk.Const, y: tk.Const):
        i = tk.index()
        out[i] = spread(x[i], y[i])
    x = np.array([1, 5, -3, 7], np.int32)
    y = np.array([4, 2, -8, 7], np.int32)
    out = np.zeros(4, np.int32)
    k(CPU)(out, x, y, ndrange=4)
    np.testing.assert_array_equal(out, np.abs(x - y))


def test_internal_errors_never_escape_as_tracebacks():
    def body(A):
        A[tk.index()] = (1, 2)
    err = _compile_error(body, np.zeros(4))
    assert err.line == _line(body, "(1, 2)")


# ------------------------------------------------------------------ traceback filtering

_TB_SCRIPT = '''
import numpy as np, tinykernels as tk
@tk.kernel
def bad(A):
    A[tk.index()] = not_defined_anywhere
bad(tk.CPU())(np.zeros(3), ndrange=3)
'''


def _run_tb(env_extra):
    import os
    import subprocess
    import sys
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", _TB_SCRIPT], capture_output=True, text=True, env=env, timeout=120)


def test_compile_errors_show_the_users_frames_not_the_compilers():
    r = _run_tb({})
    assert r.returncode == 1
    err = r.stderr
    assert "CompileError" in err and "not_defined_anywhere" in err and "<string>\", line 6" in err
    lib_frames = [ln for ln in err.splitlines() if ln.strip().startswith("File") and "tinykernels" in ln]
    assert len(lib_frames) <= 1, err                     # at most the launch call itself
    assert "TK_TRACEBACK_FILTERING=off" in err
    assert len(err.splitlines()) < 16, err


def _undefined_name(A, B: tk.Const):
    A[tk.index()] = B[tk.index()] * not_defined_anywhere  # noqa: F821


@pytest.mark.parametrize("entry", ["CPU", "INTERP", "INTERP:CHECK", "launch", "source", "adjoint CPU",
                                   "adjoint INTERP", "jax_kernel", "raise_kernel", "torch_op"])
def test_every_entry_point_filters_the_compilers_frames(entry, monkeypatch):
    """At most the raising frame of tinykernels stays: the interpreter's launches, adjoint
    launches and calls of jax_kernel / raise_kernel / torch_op functions showed the whole
    compiler stack (13 to 16 frames of lower.py and friends), and a nested
    API boundary (kernel.launch around an instance) kept the frames added after the inner one."""
    import traceback
    monkeypatch.delenv("TK_TRACEBACK_FILTERING", raising=False)
    k = tk.kernel(_undefined_name)
    a, b = np.zeros(4, np.float32), np.ones(4, np.float32)
    with pytest.raises(tk.CompileError, match="not_defined_anywhere") as e:
        if entry == "launch":
            k.launch(a, b, ndrange=4)
        elif entry == "source":
            k.source("CPU", a, b, ndrange=4)
        elif entry in ("jax_kernel", "raise_kernel"):
            pytest.importorskip("jax")
            import tinykernels.jax as tkjax
            getattr(tkjax, entry)(k, outputs=["A"])(a, b)
        elif entry == "torch_op":
            torch = pytest.importorskip("torch")
            from tinykernels.torch import torch_op
            torch_op(k, outputs=["A"], name="test_frontend::undefined_name")(torch.zeros(4), torch.ones(4))
        elif entry.startswith("adjoint"):
            tk.adjoint(k)(tk.backend(entry.split()[1]))(a, a.copy(), b, b.copy(), ndrange=4)
        else:
            k(tk.backend(entry))(a, b, ndrange=4)
    frames = traceback.extract_tb(e.value.__traceback__)
    inside = [f for f in frames if "/tinykernels/" in f.filename.replace("\\", "/")]
    assert len(inside) <= 1, frames
    assert frames[0].filename == __file__


def test_traceback_filtering_can_be_turned_off():
    r = _run_tb({"TK_TRACEBACK_FILTERING": "off"})
    lib_frames = [ln for ln in r.stderr.splitlines() if ln.strip().startswith("File") and "tinykernels" in ln]
    assert len(lib_frames) > 3 and "TK_TRACEBACK_FILTERING" not in r.stderr


def test_filtering_keeps_internal_errors_whole():
    from tinykernels import tracebacks

    def inner():
        raise RuntimeError("bug")
    with pytest.raises(RuntimeError) as ei:
        tracebacks.api_boundary(inner)()
    assert not hasattr(ei.value, "_tk_filtered")


# ------------------------------------------------------------------ messages a person can act on

_GLOBAL_ARRAY = np.ones(4)


@tk.kernel
def _uses_global_array(A):
    A[tk.index()] = _GLOBAL_ARRAY[0]


@tk.kernel
def _uses_np_exp(A):
    A[tk.index()] = np.exp(A[tk.index()])


@tk.kernel
def _uses_np_arctan2(A):
    A[tk.index()] = np.arctan2(A[tk.index()], 1.0)


@tk.kernel
def _fills(A):
    A[tk.index()] = 1.0


def test_a_global_numpy_array_says_what_globals_may_be():
    with pytest.raises(tk.CompileError, match=r"globals must be ints, floats, bools or dtypes\); pass the array as an argument"):
        _uses_global_array(tk.CPU())(np.zeros(4), ndrange=4)


def test_numpy_functions_point_to_math():
    with pytest.raises(tk.CompileError, match=r"use math\.exp on a value"):
        _uses_np_exp(tk.CPU())(np.zeros(4), ndrange=4)
    with pytest.raises(tk.CompileError, match=r"use math\.atan2 on a value"):
        _uses_np_arctan2(tk.CPU())(np.zeros(4), ndrange=4)


@pytest.mark.skipif("CL" not in tk.backends_available(), reason="OpenCL unavailable")
def test_an_array_of_another_backend_names_it_and_how_to_move_it():
    A = tk.zeros(4, backend=tk.OpenCL())
    with pytest.raises(tk.LaunchError, match=r"argument 'A' is an array on tk\.OpenCL.*run the kernel there.*tk\.asarray"):
        _fills(tk.CPU())(A, ndrange=4)


@tk.func
def _lerp_d(a, b, t=0.25, bias=0):
    return a + (b - a) * t + bias


@tk.func
def _bump(c, k):
    return tk.atomic_add(c, 0, k)


@tk.kernel
def func_keywords(out, x: tk.Const, c):
    i = tk.index()
    out[i, 0] = _lerp_d(x[i], 2.0)                      # both defaults
    out[i, 1] = _lerp_d(x[i], 2.0, 0.5)
    out[i, 2] = _lerp_d(x[i], b=2.0, bias=1)            # a keyword, a default between
    out[i, 3] = _lerp_d(bias=x[i], t=1.0, b=3.0, a=0.0)
    out[i, 4] = _bump(k=2, c=c) + _bump(c, 1) * 0       # keyword arguments lowered in source order


@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_func_calls_take_keywords_and_defaults(dev):
    # calls of a @tk.func bind as in Python; keywords were "not supported in kernel calls" and
    # a default value was a wrong argument count
    x = np.array([0.0, 1.0, 4.0], np.float32)
    out, c = np.zeros((3, 5), np.float32), np.zeros(1, np.int32)
    func_keywords(tk.backend(dev))(out, x, c, ndrange=3)
    np.testing.assert_array_equal(out[:, 0], x + (2 - x) * np.float32(0.25))
    np.testing.assert_array_equal(out[:, 1], x + (2 - x) * np.float32(0.5))
    np.testing.assert_array_equal(out[:, 2], x + (2 - x) * np.float32(0.25) + 1)
    np.testing.assert_array_equal(out[:, 3], 3 + x)
    assert sorted(out[:, 4]) == [0, 3, 6] and c[0] == 9


@pytest.mark.parametrize("call,msg", [
    ("_lerp_d(x[i], 2.0, z=1.0)", r"@tk.func '_lerp_d' has no parameter 'z' \(its parameters: a, b, t, bias\)"),
    ("_lerp_d(x[i], 2.0, a=1.0)", "got two values for parameter 'a'"),
    ("_lerp_d(x[i])", r"takes 4 argument\(s\) \(a, b, t, bias\); missing 'b'"),
    ("_lerp_d(x[i], 1.0, 1.0, 1.0, 1.0)", r"takes 4 argument\(s\), got 5"),
])
def test_func_call_binding_errors_name_the_call(call, msg, tmp_path):
    path = tmp_path / "calls.py"
    path.write_text("import tinykernels as tk\nfrom test_frontend import _lerp_d\n\n\n@tk.kernel\n"
                    f"def k(out, x):\n    i = tk.index()\n    out[i] = {call}\n")
    ns: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    with pytest.raises(tk.CompileError, match=rf"calls.py:8:\d+: in kernel 'k': .*{msg}"):
        ns["k"](CPU)(np.zeros(2, np.float32), np.zeros(2, np.float32), ndrange=2)


@tk.kernel
def _scans(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = tk.group_scan(x[i], "add", False)            # inclusive by position
    o[i, 1] = tk.group_scan(x[i], "add", inclusive=False)
    o[i, 2] = tk.group_scan(x[i], "add", True)
    o[i, 3] = tk.group_scan(x[i], "max")


@pytest.mark.parametrize("dev", ["CPU", "INTERP"] + [d for n, d in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                                      if tk.backends()[n][0]])
def test_group_scan_takes_inclusive_by_position(dev):
    """``tk.group_scan(v, op, False)`` is exclusive, as the signature (value, op, inclusive=True)
    says and the interpreter did; the compiled backends ignored the third argument (inclusive)."""
    b = tk.backend(dev)
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32)
    o = tk.asarray(np.zeros((8, 4), np.int32), backend=b)
    _scans(b, 4)(o, tk.asarray(x, backend=b), ndrange=8)
    tk.synchronize(b)
    g = x.reshape(2, 4)
    inc = np.cumsum(g, axis=1)
    exc = np.concatenate([np.zeros((2, 1), np.int32), inc[:, :-1]], axis=1)
    want = np.stack([exc.ravel(), exc.ravel(), inc.ravel(), np.maximum.accumulate(g, axis=1).ravel()], axis=1)
    np.testing.assert_array_equal(o.numpy(), want)
