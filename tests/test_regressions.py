"""Regression tests for compiler bugs found by the differential fuzzer (each against its
expected value, on the CPU and on the interpreter)."""
import numpy as np
import pytest

import tinykernels as tk

BACKENDS = [tk.CPU(), tk.Interpreter()]


@tk.kernel
def swap(o, x: tk.Const):
    i = tk.index()
    a = x[i]
    b = x[i] * 2.0
    a, b = b, a
    o[i, 0] = a
    o[i, 1] = b


@tk.kernel
def ndrange_in_loop(o):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    s = 0
    for q in range(2):
        s += tk.ndrange()[2]
    o[i, j, k] = s


@tk.func
def early(v, c):
    if v > 0.5:
        return v * c
    return -v


@tk.kernel
def func_return_with_barrier(o, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    t = tk.localmem(tk.float64, (8,))
    t[lid] = early(x[tk.index()], 3.0)
    tk.synchronize()
    o[tk.index()] = t[(lid + 1) % 8]


@tk.kernel
def self_cast(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    o[i] = tk.float16(x[i] * y[i]) * 1.0


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_tuple_assignment_swaps(b):
    o = np.zeros((4, 2))
    swap(b)(o, np.arange(4.0), ndrange=4)
    np.testing.assert_array_equal(o, np.stack([2 * np.arange(4.0), np.arange(4.0)], 1))


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_ndrange_inside_a_for_loop(b):
    o = np.zeros((2, 3, 5), np.int64)
    ndrange_in_loop(b)(o, ndrange=(2, 3, 5))
    assert (o == 10).all()


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_func_early_return_in_a_kernel_with_barriers(b):
    x = np.random.default_rng(0).random(16)
    o = np.zeros(16)
    func_return_with_barrier(b, 8)(o, x, ndrange=16)
    ref = np.where(x > 0.5, x * 3, -x).reshape(2, 8)
    np.testing.assert_array_equal(o, np.roll(ref, -1, 1).ravel())


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_explicit_narrow_cast_of_a_narrow_intermediate_rounds(b):
    x = np.full(3, 1.1, np.float16)
    o = np.zeros(3, np.float32)
    self_cast(b)(o, x, x, ndrange=3)
    assert o[0] == np.float32(np.float16(np.float32(x[0]) * np.float32(x[0])))


def test_huge_constant_shift_does_not_crash_the_compiler():
    # not folded (it raised MemoryError); at run time an int64 shift past the width gives 0, as in NumPy
    def body(o):
        o[0] = 1 << 2**62
    o = np.ones(1, np.int64)
    tk.kernel(body)(tk.CPU())(o, ndrange=1)
    assert o[0] == 0


@tk.kernel
def _aug_square(x, y):
    i = tk.index()
    v = x[i]
    v **= 2                  # a constant exponent in an augmented assignment: x * x, as in `v ** 2`
    w = x[i]
    w **= -1
    y[i, 0] = v
    y[i, 1] = w


@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_augmented_power_by_a_constant_squares_exactly(dev):
    """Fuzzer seed 30000339: ``x **= 2`` of float32 4293 is the tie 18429849; x * x (and NumPy's
    array power) round it to 18429848, NumPy's float32 *scalar* power to 18429850. The
    interpreter took the scalar route for the augmented form only."""
    x = np.array([4293.0, 3.0, -7.5, 1e-3], np.float32)
    y = np.zeros((4, 2), np.float32)
    _aug_square(tk.backend(dev))(x, y, ndrange=4)
    tk.synchronize()
    np.testing.assert_array_equal(y[:, 0], x * x)
    np.testing.assert_array_equal(y[:, 1], np.float32(1) / x)


def test_the_jax_backend_without_jax_is_unavailable_when_made(monkeypatch):
    """As CL, WEBGPU and CUDA: tk.backend("JAX") without jax raises tk.BackendUnavailable (it was
    made, and the first launch or array failed with a bare ModuleNotFoundError)."""
    from tinykernels.runtime import jaxrt
    real = jaxrt.importlib.util.find_spec
    monkeypatch.setattr(jaxrt.importlib.util, "find_spec", lambda n, *a: None if n == "jax" else real(n, *a))
    with pytest.raises(tk.BackendUnavailable, match=r"the JAX backend needs jax: pip install 'tinykernels\[jax\]'"):
        tk.backend("JAX")


def test_malformed_dev_strings_and_thread_counts_say_what_is_wrong():
    """tk.backend('CPU:x') was Python's bare "invalid literal for int() with base 10: 'x'"
    and tk.CPU(threads='2') "'<' not supported between 'str' and 'int'"."""
    with pytest.raises(ValueError, match=r"bad thread count 'x' in the DEV string 'CPU:x'.*'CPU:1'"):
        tk.backend("CPU:x")
    with pytest.raises(ValueError, match=r"bad device number '-1' in the DEV string 'CL:-1'"):
        tk.backend("CL:-1")
    with pytest.raises(TypeError, match=r"tk.CPU: argument 'threads': expected an int, got str"):
        tk.CPU(threads="2")
    with pytest.raises(TypeError, match="got float"):
        tk.CPU(threads=2.0)
    assert tk.backend("CPU:1") == tk.CPU(threads=1) and tk.CPU(threads=np.int64(1)).threads == 1


# --- statements in a while condition (lowered as `while True: <test>; if not cond: break; <body>`)

def _all_backends():
    """Every backend this machine runs: the compiled ones, the interpreter and its check mode."""
    out = [tk.CPU(), tk.Interpreter(), tk.Interpreter(check=True)]
    have = tk.backends()
    for name, spec in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
        if have.get(name, (False,))[0]:
            out.append(tk.backend(spec))
    return out


ALL = _all_backends()


def _launch(inst, b, arrays, scalars=(), ndrange=None):
    """Launch on ``b`` with device copies of ``arrays`` where it needs them; the arrays after."""
    dev = not getattr(b, "is_host", True)
    args = [tk.asarray(a, backend=b) if dev else a for a in arrays]
    inst(*args, *scalars, ndrange=ndrange).wait()
    return [a.numpy() if dev else a for a in args]


@tk.func
def _count_down(c, i):
    tk.atomic_add(c, i, 1)                   # a side effect per evaluation of the condition
    return 5 - c[i]


@tk.kernel
def while_func_cond(o, c):
    i = tk.index()
    n = 0
    while _count_down(c, i) > i:
        n += 1
        if n % 2 == 1:
            continue                         # tests the condition again
    o[i] = n


@pytest.mark.parametrize("b", ALL, ids=lambda b: b.name)
def test_while_condition_calling_a_func_runs_it_once_per_test(b):
    o, c = _launch(while_func_cond(b), b, [np.zeros(6, np.int32), np.zeros(6, np.int32)], ndrange=6)
    want_o, want_c = np.zeros(6, np.int32), np.zeros(6, np.int32)
    for i in range(6):                        # Python's semantics
        while (want_c.__setitem__(i, want_c[i] + 1), 5 - want_c[i])[1] > i:
            want_o[i] += 1
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(o, want_o)
    assert want_o.tolist() == [4, 3, 2, 1, 0, 0]


@tk.kernel
def while_atomic_cond(o, c, n: tk.int32):
    i = tk.index()
    k = 0
    while tk.atomic_add(c, 0, 1) < n:        # the work items share the n tickets
        k += 1
    o[i] = k


@pytest.mark.parametrize("b", ALL, ids=lambda b: b.name)
def test_while_condition_with_an_atomic_hands_out_each_ticket_once(b):
    o, c = _launch(while_atomic_cond(b), b, [np.zeros(8, np.int32), np.zeros(1, np.int32)], (np.int32(37),), 8)
    assert o.sum() == 37                      # one ticket per iteration
    assert c[0] == 37 + 8                     # every item's last test fails once


@tk.func
def _limit(c, i, x):
    tk.atomic_add(c, i, 1)
    return x


@tk.kernel
def while_chain_cond(o, c, x: tk.Const):
    i = tk.index()
    w = 0
    while w < x[i] < _limit(c, i, 4.0):       # the tail (and its atomic) only where w < x[i]
        w += 1
    o[i] = w


@pytest.mark.parametrize("b", ALL, ids=lambda b: b.name)
def test_while_chain_condition_whose_tail_calls_a_func(b):
    x = np.array([0.0, 2.5, 3.0, 7.0], np.float32)
    o, c = _launch(while_chain_cond(b), b, [np.zeros(4, np.int32), np.zeros(4, np.int32), x], ndrange=4)[:2]
    want_o, want_c = np.zeros(4, np.int32), np.zeros(4, np.int32)
    for i in range(4):
        w = 0
        while w < x[i] and (want_c.__setitem__(i, want_c[i] + 1) or x[i] < 4.0):
            w += 1
        want_o[i] = w
    np.testing.assert_array_equal(o, want_o)
    np.testing.assert_array_equal(c, want_c)
    assert want_o.tolist() == [0, 3, 3, 0] and want_c.tolist() == [0, 3, 3, 1]


@tk.func
def _capped(n, cap):
    if n > cap:                              # statements: a func with two returns
        return cap
    return n


@tk.kernel
def while_func_cond_barrier(o, x: tk.Const, n: tk.int32):
    lid = tk.index(tk.Local, tk.Linear)
    t = tk.localmem(tk.float32, (4,))
    t[lid] = 0.0
    s = 0.0
    w = 0
    while w < _capped(n, 3):                 # uniform: a barrier may sit in the body
        w += 1
        tk.synchronize()
        t[lid] = t[lid] + x[tk.index()]
        tk.synchronize()
        s += t[(lid + 1) % 4]
    o[tk.index()] = s


@pytest.mark.parametrize("b", ALL, ids=lambda b: b.name)
def test_while_condition_with_statements_around_barriers(b):
    x = np.arange(8, dtype=np.float32)
    for n, trips in ((2, 2), (9, 3)):
        o = _launch(while_func_cond_barrier(b, 4), b, [np.zeros(8, np.float32), x], (np.int32(n),), 8)[0]
        nb = np.roll(x.reshape(2, 4), -1, 1).ravel()
        np.testing.assert_array_equal(o, nb * sum(range(1, trips + 1)))


# --- a run-time range() step of zero: no iteration; debug and check mode report the line

@tk.kernel
def zero_step(o, a: tk.int32, b: tk.int32, s: tk.int32):
    i = tk.index()
    n = 0
    for k in range(a, b, s):                 # line reported in debug / check mode
        n += 1
    o[i] = n


def _with_jax():
    try:
        return ALL + [tk.backend("JAX")]
    except tk.BackendUnavailable:       # no JAX on this machine
        return ALL


@pytest.mark.parametrize("b", _with_jax(), ids=lambda b: b.name)
def test_zero_range_step_runs_no_iteration(b):
    if getattr(b, "check", False):
        pytest.skip("check mode reports it (below)")
    for lo, hi in ((0, 5), (5, 0), (3, 3)):   # 5 > 0 divided by the zero step in C, ran 5 trips on JAX
        o = _launch(zero_step(b), b, [np.full(3, -1, np.int32)], (np.int32(lo), np.int32(hi), np.int32(0)), 3)[0]
        assert o.tolist() == [0, 0, 0], (lo, hi)
    o = _launch(zero_step(b), b, [np.zeros(3, np.int32)], (np.int32(5), np.int32(0), np.int32(-2)), 3)[0]
    assert o.tolist() == [3, 3, 3]


def _debug_backends():
    out = [tk.Interpreter(check=True), tk.CPU(debug=True)]
    have = tk.backends()
    if have.get("OpenCL", (False,))[0]:
        out.append(tk.OpenCL(debug=True))
    if have.get("WebGPU", (False,))[0]:
        out.append(tk.WebGPU(debug=True))
    return out


@pytest.mark.parametrize("b", _debug_backends(), ids=lambda b: b.name)
def test_zero_range_step_is_an_error_naming_the_line_in_debug_and_check_mode(b):
    with pytest.raises(ValueError, match=r"kernel 'zero_step' at .*test_regressions\.py:\d+.*range\(\) step is zero") as ei:
        _launch(zero_step(b), b, [np.zeros(3, np.int32)], (np.int32(0), np.int32(5), np.int32(0)), 3)
    line = int(str(ei.value).split("test_regressions.py:")[1].split()[0].rstrip(":,"))
    with open(__file__) as f:
        assert "for k in range(a, b, s)" in f.read().splitlines()[line - 1]


# --- tk.uniform of a function holding a barrier, collective or tk.uniform (nested uniform)

@tk.func
def _synced(x, i):
    tk.synchronize()
    return x[i] * 2.0


@tk.func
def _printed_uniform(x, i):
    tk.print("evaluated", i)
    return tk.uniform(x[i]) + 1.0


@tk.func
def _branchy_reduce(x, i):
    if x[i] > 100.0:
        return 0.0
    return tk.group_reduce(x[i], "add")


@tk.func
def _group_sum(x, i):
    return tk.group_reduce(x[i], "add")


@tk.kernel
def uniform_of_barrier(o, x: tk.Const):
    i = tk.index()
    o[i] = tk.uniform(_synced(x, i))


@tk.kernel
def uniform_of_uniform_with_print(o, x: tk.Const):
    i = tk.index()
    o[i] = tk.uniform(_printed_uniform(x, i))


@tk.kernel
def uniform_of_branchy_reduce(o, x: tk.Const):
    i = tk.index()
    o[i] = tk.uniform(_branchy_reduce(x, i))


@tk.kernel
def uniform_of_collectives(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = tk.uniform(_group_sum(x, i))                      # every item takes part
    o[i, 1] = tk.uniform(tk.group_reduce(x[i], "max"))
    o[i, 2] = tk.uniform(x[tk.uniform(i) + 1] + 1.0)            # nested, no side effects


@pytest.mark.parametrize("b", ALL, ids=lambda b: b.name)
def test_uniform_of_what_every_item_must_reach(b):
    """A barrier in tk.uniform's argument, or a collective / tk.uniform under a func's control
    flow or beside side effects, is a CompileError on every backend (the interpreter evaluates
    the argument in one work item: it gave per-item values for the barrier and ran the print
    once per group where the compiled code ran it in every item); a collective or tk.uniform
    at the argument's top level without side effects runs in every item, the same everywhere."""
    x = np.arange(8, dtype=np.float32)
    for k, what in ((uniform_of_barrier, r"tk\.synchronize\(\)"), (uniform_of_uniform_with_print, r"tk\.uniform\(\)"),
                    (uniform_of_branchy_reduce, r"tk\.group_reduce\(\)")):
        with pytest.raises(tk.CompileError, match=rf"argument of tk\.uniform\(\) reaches {what} \(line \d+\).*"
                                                  r"compute it before tk\.uniform\(\)"):
            _launch(k(b, 4), b, [np.zeros(8, np.float32), x], ndrange=8)
    o = _launch(uniform_of_collectives(b, 4), b, [np.zeros((8, 3), np.float32), x], ndrange=8)[0]
    np.testing.assert_array_equal(o[:, 0], np.repeat([6.0, 22.0], 4))
    np.testing.assert_array_equal(o[:, 1], np.repeat([3.0, 7.0], 4))
    np.testing.assert_array_equal(o[:, 2], np.repeat([2.0, 6.0], 4))


@tk.func
def _left(c, i):
    if i > 2:
        return 0
    return 3 - c[i]


@tk.kernel
def while_func_cond_item_barrier(o, c):
    i = tk.index()
    while _left(c, i) > 0:                   # depends on the work item: cannot hold a barrier
        tk.synchronize()
        c[i] += 1
    o[i] = 1


def test_item_dependent_while_condition_with_statements_around_a_barrier_names_the_condition():
    with pytest.raises(tk.CompileError, match=r"this while condition depends on the work item, but its loop "
                                              r"contains tk\.synchronize\(\)"):
        while_func_cond_item_barrier(tk.CPU(), 4)(np.zeros(4, np.int32), np.zeros(4, np.int32), ndrange=4)


@tk.kernel
def int_pow_grid(o, a: tk.Const, e: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    o[i, j] = a[i] ** e[j]


@pytest.mark.parametrize("b", ALL, ids=lambda b: b.name)
@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64])
def test_integer_power_with_a_negative_exponent_is_the_truncated_reciprocal(b, dt):
    # 1 ** -3 was 0 and (-1) ** -3 was 0 on every backend: the exact 1 / a ** -e truncated toward
    # zero is 1 and -1 there (Julia's ^ for those bases); other bases (0 too) give 0.
    if dt is np.int64 and b.name.upper() == "WEBGPU":
        pytest.skip("WebGPU has no 64-bit integers")
    a = np.array([-3, -2, -1, 0, 1, 2, 3], dt)
    e = np.array([-4, -3, -2, -1, 0, 1, 2, 3], dt)
    (got,) = _launch(int_pow_grid(b), b, [np.zeros((a.size, e.size), dt), a, e], ndrange=(a.size, e.size))[:1]
    want = np.array([[(x ** y if y >= 0 else 1 if x == 1 else (-1) ** y if x == -1 else 0)
                      for y in e.tolist()] for x in a.tolist()], dt)
    np.testing.assert_array_equal(got, want)

