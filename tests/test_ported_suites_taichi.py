"""Taichi's tests/python/ test_while.py, test_continue.py (continue in for/while loops, in nested
ifs, unconditional, at kernel level), test_ssa.py (self-assignment, an argument with side effects
evaluated once), test_return.py (funcs returning from branches and from inside constant loops,
a missing return, a kernel's bare ``return``/``return None``, uint64 results), test_cast.py
(uint <-> float, float32/float64 division then truncation, int/float casts of Python numbers,
a local that becomes a float in a while, bit casts, sign and zero extension), test_pow.py (float
and int bases, constant and run-time int exponents, negative exponents), test_unary_ops.py
(trig of ``i * 0.1 + 0.4`` in float64 to 1e-15, ``~`` of a float refused, sign, popcnt and clz
written with operators), test_compare.py (all six comparisons, long chains, a chain whose middle
operand is an atomic evaluated once) and the test_loops.py cases not yet in
test_ported_suites_kernels.py (an empty inner loop, run-time ranges from arguments and from an
array, assignments in nested loops, a break in a loop under an ``if``, an accumulator read and
written in nested loops), ported test by test. Exact against Python / NumPy where SPEC makes it
exact; CPU and INTERP (none of these depends on the backend) and, for the casts and powers where
renderers differ, CL and WEBGPU too.

Where SPEC differs from upstream (ported as SPEC reads):

* Taichi kernels return values; here a kernel's ``return`` takes no value (a ``return 1`` is a
  CompileError, tested with ``test_return_without_type_hint``) and results are stored into an
  array; ``@tk.func``s return values. Taichi refuses a ``return`` inside a non-static
  ``if``/``for`` of a ``ti.func``; tinykernels accepts both (docs/language.md), so the port
  checks their values instead of the error.
* ``ti.static(...)`` is a ``tk.constexpr`` (an ``if`` on it keeps one branch); ``ti.template()``
  exponents are constexprs.
* Taichi's ``x ** y`` with a negative integer exponent raises in debug mode; here it is
  ``1 / x ** -y`` truncated toward zero (docs/language.md), so ``10 ** -10`` is 0.
* ``not x`` on a float is Python's truth test here (Taichi: "takes integral inputs only");
  ``~x`` on a float is a CompileError in both.
* No fields, SNodes, ``ti.append``, vectors/matrices, ``ti.random`` (``tk.random.uniform`` with
  a key stands in for it), ``frexp``, quantized ints, ``default_fp``/``default_ip`` (Python
  ints are int64 and Python floats float64, float32 where the backend has no float64)."""
import math
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, be, run  # noqa: F401 - be, anybe: fixtures
from gen_kernels import make_kernel

_GEN = os.path.join(tempfile.gettempdir(), "tinykernels_ported_suites_taichi")



def itype(be):
    return np.int64 if be.supports(np.dtype(np.int64)) else np.int32


# --- test_while.py, test_continue.py ---------------------------------------------------------

@tk.kernel
def while_loops(ret):
    i = 0
    s = 0
    while i < 10:
        s += i
        i += 1
    ret[0] = s                       # test_while: 45
    i = 0
    s = 0
    while True:
        s += i
        i += 1
        if i > 10:
            break
    ret[1] = s                       # test_break: 55


def test_while_and_break(be):
    np.testing.assert_array_equal(run(be, while_loops, np.zeros(2, np.int32), ndrange=1)[0], [45, 55])


@tk.kernel
def for_continue(x, y, z, n):
    for j in range(n):
        if j % 2 == 0:
            continue
        x[j] = j
    j = 0
    while j < n:
        oj = j
        j += 1
        if oj % 2 == 0:
            continue
        y[oj] = oj
    for j in range(n):
        continue
        z[j] = j                     # unreachable (test_unconditional_continue)


@tk.kernel
def kernel_continue(x):
    i = tk.index()
    if i % 2 == 0:
        return                       # a kernel-level continue is a return
    x[i] = i


def test_continue_in_for_and_while(be):
    n = 200
    x, y, z = run(be, for_continue, np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.int32), n,
                  ndrange=1)
    want = np.where(np.arange(n) % 2 == 0, 0, np.arange(n))
    np.testing.assert_array_equal(x, want)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(z, 0)
    np.testing.assert_array_equal(run(be, kernel_continue, np.zeros(n, np.int32), ndrange=n)[0], want)


@tk.kernel
def continue_nested_if(x, a):
    for i in range(1):
        if a:
            if a:
                continue
        if a:
            if a:
                continue
        x[0] = i
    for i in range(1):
        if a:
            if a:
                continue
        if a:
            continue
        x[1] = i
    for i in range(1):
        if a:
            continue
        if a:
            if a:
                continue
        x[2] = i


@tk.kernel
def continue_in_simple_if(img):
    for i in range(2):
        for j in range(2):
            img[i, j] = 0
            if i > 0 or j > 0:
                continue
            img[i, j] = 1


def test_continue_in_nested_ifs(be):
    np.testing.assert_array_equal(run(be, continue_nested_if, np.ones(3, np.int32), 1, ndrange=1)[0], 1)
    np.testing.assert_array_equal(run(be, continue_nested_if, np.ones(3, np.int32), 0, ndrange=1)[0], 0)
    img = run(be, continue_in_simple_if, np.full((2, 2), 2, np.int32), ndrange=1)[0]
    np.testing.assert_array_equal(img, [[1, 0], [0, 0]])


# --- test_ssa.py ------------------------------------------------------------------------------

@tk.func
def dup_eval(a, t):
    return a * t - a


@tk.func
def counted(c, v):
    tk.atomic_add(c, 0, 1)
    return v


@tk.kernel
def ssa_cases(c, out, cnt, key, t):
    i = tk.index()
    c[i, 0], c[i, 1] = c[i, 1], c[i, 0]                          # test_matrix_self_assign (swap)
    n = math.sqrt(c[i, 0] * c[i, 0] + c[i, 1] * c[i, 1])
    c[i, 0], c[i, 1] = c[i, 0] / n, c[i, 1] / n                  # a[None] = a[None].normalized()
    out[i, 0] = dup_eval(tk.random.uniform(key, i), t)            # test_func_argument_dup_eval: 0
    r = tk.random.uniform(key, i + 100) * 6.0
    out[i, 1] = math.cos(r) ** 2 + math.sin(r) ** 2               # test_func_random_argument_dup_eval
    out[i, 2] = dup_eval(counted(cnt, 2.0), t)                    # an argument with a side effect: once


def test_ssa_self_assign_and_single_evaluation(be):
    n = 8
    c0 = np.stack([np.arange(1.0, n + 1), np.arange(2.0, n + 2)], 1)
    c, out, cnt = run(be, ssa_cases, c0, np.zeros((n, 3)), np.zeros(1, np.int64), tk.random.key(7), 1.0, ndrange=n)
    swapped = c0[:, ::-1]
    np.testing.assert_allclose(c, swapped / np.linalg.norm(swapped, axis=1, keepdims=True), rtol=1e-15)
    np.testing.assert_array_equal(out[:, 0], 0)
    np.testing.assert_allclose(out[:, 1], 1, rtol=3e-7)          # uniform() is a float32
    np.testing.assert_array_equal(out[:, 2], 0)
    assert cnt[0] == n


# --- test_return.py -----------------------------------------------------------------------------

@tk.func
def mul_as(a, b, flag: tk.constexpr):
    if flag == 1:
        return float(a * b)
    return int(a * b)


@tk.func
def static_if(a):
    if a == 1:
        return 1
    elif a == 2:
        return 2
    return 3


@tk.func
def safe_sqrt(a):
    if a > 0:
        return math.sqrt(a)
    else:
        return 0.0


@tk.func
def static_for():
    a = 0
    for i in range(10):
        a += i * i
        if i == 8:
            return a
    return -1


@tk.func
def first_in_loop(n):
    for i in range(n):
        return i
    return -1


@tk.func
def bump_u(u):
    u[1] = u[1] + 1
    return None


@tk.kernel
def return_cases(fo, io, a: tk.constexpr, x, y, n, u):
    fo[0] = mul_as(x, y, 1)
    io[0] = mul_as(x, y, 0)
    io[1] = static_if(a)
    fo[1] = safe_sqrt(x)
    fo[2] = safe_sqrt(-x)
    io[2] = static_for()
    io[3] = first_in_loop(n)
    u[0] = tk.uint64(2**64 - 1)
    bump_u(u)
    if x > 0:
        return None
    io[4] = 99


@pytest.mark.parametrize("a,x,y,n", [(1, 0.4, 2, 3), (2, 0.8, 3, 0), (123, 1.0, 1, 5), (1, -0.5, 2, 1)])
def test_return_values(be, a, x, y, n):
    """Values returned from branches and loops of funcs; ``return None`` ends a kernel (and a
    func) as a bare ``return`` does (test_return_none; it was a CompileError before port20)."""
    fo, io, u = run(be, return_cases, np.zeros(3), np.zeros(5, np.int64), a, x, y, n, np.zeros(2, np.uint64),
                    ndrange=1)
    np.testing.assert_allclose(fo, [x * y, math.sqrt(max(x, 0)), math.sqrt(max(-x, 0))], rtol=1e-15)
    np.testing.assert_array_equal(io, [int(x * y), min(a, 3), 204, 0 if n else -1, 0 if x > 0 else 99])
    assert u[0] == 2**64 - 1 and u[1] == 1


def test_return_errors():
    k = make_kernel(_GEN, "ret_value", ["a"], ["return 1"])
    with pytest.raises(tk.CompileError, match=r"ret_value.*:3:"):
        k(tk.CPU())(np.zeros(1), ndrange=1)
    with pytest.raises(tk.CompileError, match="must return a value on every path|return"):
        uses_half_ret(tk.CPU())(np.zeros(1), 1.0, ndrange=1)


@tk.func
def half_ret(x):
    if x > 0:
        return 1.0


@tk.kernel
def uses_half_ret(out, x):
    out[0] = half_ret(x)                     # test_func_no_return: a path without a return


# --- test_cast.py ----------------------------------------------------------------------------

@tk.kernel
def casts(fo, uo, io, x: tk.float32, a8: tk.Const, b8: tk.Const, u32o, bits: tk.Const, bo, fx, ix):
    fo[0] = tk.float32(tk.uint8(255))
    fo[1] = tk.float32(tk.uint16(255))
    fo[2] = tk.float32(tk.uint32(255))
    uo[0] = tk.uint8(x)
    uo[1] = tk.uint16(x)
    uo[2] = tk.uint32(x)
    io[0] = tk.float32(1e9) / tk.float32(1e6) + 1e-3          # test_cast_f32: 1000
    io[1] = fo.dtype(1e13) / fo.dtype(1e10) + 1e-3             # test_cast_f64: 1000
    io[2] = int(fx) * int(ix)                                  # test_cast_default_ip
    fo[3] = float(ix) * float(7)                               # test_cast_default_fp
    t = 10
    while t > 5:
        t = 1.0
        break
    fo[4] = t                                                  # test_cast_within_while
    io[3] = tk.int32(a8[0])                                    # test_int_extension
    io[4] = tk.int32(b8[0])
    u32o[0] = tk.uint32(a8[0])
    u32o[1] = tk.uint32(b8[0])
    y = tk.bitcast(bits[0], tk.float32)                        # test_bit_cast
    bo[0] = tk.bitcast(y, tk.int32)
    bo[1] = tk.bitcast(tk.float32(-2.5), tk.int32)


def test_casts(anybe):
    f = np.float64 if anybe.supports_float64 else np.float32
    it = itype(anybe)
    fo, uo, io, u32o, bo = [out for k, out in enumerate(run(
        anybe, casts, np.zeros(5, f), np.zeros(3, np.uint32), np.zeros(5, it), 255.0, np.array([-128], np.int8),
        np.array([-128], np.int8).view(np.uint8), np.zeros(2, np.uint32), np.array([2333], np.int32),
        np.zeros(2, np.int32), 23.3, 4, ndrange=1)) if k not in (3, 4, 6)]
    np.testing.assert_array_equal(fo, [255, 255, 255, 4 * 7, 1])
    np.testing.assert_array_equal(uo, [255, 255, 255])
    np.testing.assert_array_equal(io, [1000, 1000, 23 * 4, -128, 128])
    np.testing.assert_array_equal(u32o, [0xFFFFFF80, 128])
    np.testing.assert_array_equal(bo, [2333, np.float32(-2.5).view(np.int32)])


@tk.kernel
def int_mul(out, x, y):
    out[0] = int(x) * int(y)


def test_cast_large_ints_are_int64(be):
    """test_cast_default_ip with default_ip=i64: 1e9 * 233 does not wrap (run-time Python ints
    are int64)."""
    for x, y in ((1000000000.0, 233.0), (233.0, 1000000000.0), (23.3, 4.6)):
        assert run(be, int_mul, np.zeros(1, np.int64), x, y, ndrange=1)[0][0] == int(x) * int(y)


# --- test_pow.py ------------------------------------------------------------------------------

@tk.kernel
def pow_rt(z, x, y):
    i = tk.index()
    z[i] = x[i] ** y[i]


@tk.kernel
def pow_const(z, x, y: tk.constexpr):
    i = tk.index()
    z[i] = x[i] ** y


def test_pow_float(anybe):
    """_test_pow_f: float bases and exponents (both arrays of one float type), approx."""
    xs, ys = [0.5, 1, 1.5, 2, 6.66], [-2, -1, -0.3, 0, 0.5, 1, 1.4, 2.6]
    for dt in (np.float32, np.float64):
        if not anybe.supports(np.dtype(dt)):
            continue
        x = np.repeat(np.array(xs, dt), len(ys))
        y = np.tile(np.array(ys, dt), len(xs))
        z = run(anybe, pow_rt, np.zeros(x.size, dt), x, y, ndrange=x.size)[0]
        np.testing.assert_allclose(z, [float(a) ** float(b) for a, b in zip(x, y)], rtol=1e-6 if dt == np.float32 else 1e-14)


def test_pow_int(anybe):
    """_test_pow_i (constexpr exponents 0..3), _test_pow_int_base_int_exp (run-time exponents
    0..9, every int32/int64 pairing), exact; and a negative exponent (upstream raises)."""
    xs = np.arange(-5, 5)
    for dbase, dexp in ((np.int32, np.int32), (np.int32, np.int64), (np.int64, np.int64), (np.int64, np.int32)):
        if not (anybe.supports(np.dtype(dbase)) and anybe.supports(np.dtype(dexp))):
            continue
        for y in range(4):
            z = run(anybe, pow_const, np.zeros(xs.size, dbase), xs.astype(dbase), y, ndrange=xs.size)[0]
            np.testing.assert_array_equal(z, [int(a) ** y for a in xs])
        x = np.repeat(xs, 10).astype(dbase)
        y = np.tile(np.arange(10), xs.size).astype(dexp)
        z = run(anybe, pow_rt, np.zeros(x.size, np.result_type(dbase, dexp)), x, y, ndrange=x.size)[0]
        np.testing.assert_array_equal(z, [int(a) ** int(b) for a, b in zip(x, y)])
    z = run(anybe, pow_rt, np.zeros(4, np.int32), np.array([10, 1, -1, -1], np.int32),
            np.array([-10, -3, -3, -4], np.int32), ndrange=4)[0]
    np.testing.assert_array_equal(z, [0, 1, -1, 1])


def test_pow_float_base_int_exp(anybe):
    """_test_pow_float_base_int_exp: float32/float64 bases, int32/int64 exponents -10..9."""
    xs = [-6.66, -2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2, 6.66]
    for dbase, dexp in ((np.float32, np.int32), (np.float64, np.int32), (np.float32, np.int64), (np.float64, np.int64)):
        if not (anybe.supports(np.dtype(dbase)) and anybe.supports(np.dtype(dexp))):
            continue
        x = np.repeat(np.array(xs, dbase), 20)
        y = np.tile(np.arange(-10, 10), len(xs)).astype(dexp)
        zt = np.result_type(dbase, dexp)
        if not anybe.supports(zt):
            zt = dbase
        z = run(anybe, pow_rt, np.zeros(x.size, zt), x, y, ndrange=x.size)[0]
        np.testing.assert_allclose(z, [float(a) ** int(b) for a, b in zip(x, y)], rtol=2e-6 if dbase == np.float32 else 1e-14)


# --- test_unary_ops.py ------------------------------------------------------------------------

@tk.func
def f_of_i(i):
    return i * 0.1 + 0.4


@tk.kernel
def trig(val):
    for i in range(4):
        v = f_of_i(val.dtype(i))
        val[0, i] = math.sin(v)
        val[1, i] = math.cos(v)
        val[2, i] = math.asin(v)
        val[3, i] = math.acos(v)
        val[4, i] = math.tan(v)
        val[5, i] = math.tanh(v)
        val[6, i] = math.exp(v)
        val[7, i] = math.log(v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_trig(be, dtype):
    """float64 to 1e-15 (that is, computed in double precision), float32 to 1e-6."""
    val = run(be, trig, np.zeros((8, 4), dtype), ndrange=1)[0]
    fs = [np.sin, np.cos, np.arcsin, np.arccos, np.tan, np.tanh, np.exp, np.log]
    for r, fn in enumerate(fs):
        for i in range(4):
            assert abs(fn(float(dtype(i) * dtype(0.1) + dtype(0.4))) - val[r, i]) < (1e-15 if dtype == np.float64 else 1e-6) * 2
    if dtype == np.float64:
        x = np.arange(4) * 0.1 + 0.4
        for r, fn in enumerate(fs):
            np.testing.assert_allclose(val[r], fn(x), rtol=2e-16, atol=1e-15)


@tk.func
def popcnt(x):
    c = 0
    v = x
    while v != 0:
        v &= v - 1
        c += 1
    return c


@tk.func
def clz32(x):
    n = 0
    for b in range(31, -1, -1):
        if (x >> b) & 1:
            break
        n += 1
    return n


@tk.kernel
def unary_ops(pc, cz, sg, i32: tk.Const, u64: tk.Const, f: tk.Const):
    i = tk.index()
    pc[0, i] = popcnt(i32[i])
    pc[1, i] = popcnt(u64[i])
    cz[i] = clz32(i32[i])
    sg[i] = tk.select(f[i] > 0, 1.0, tk.select(f[i] < 0, -1.0, 0.0))
    sg[i + 3] = not f[i]


def test_popcnt_clz_sign_not(be):
    v = np.array([100, 1000, 10000, 1, 2, 3, 4, 5, 1023, 1024], np.int32)
    f = np.array([0.5, -0.5, 0.0], np.float32)
    pc, cz, sg, *_ = run(be, unary_ops, np.zeros((2, 10), np.int32), np.zeros(10, np.int32), np.zeros(6, np.float32),
                     v, v.astype(np.uint64), np.resize(f, 10), ndrange=3)
    np.testing.assert_array_equal(pc[:, :3], [[3, 6, 5], [3, 6, 5]])
    np.testing.assert_array_equal(cz[:3], [25, 22, 18])
    np.testing.assert_array_equal(sg, [1.0, -1.0, 0.0, 0.0, 0.0, 1.0])
    pc, cz, *_ = run(be, unary_ops, np.zeros((2, 10), np.int32), np.zeros(10, np.int32), np.zeros(13, np.float32),
                    v, v.astype(np.uint64), np.resize(f, 10), ndrange=10)
    np.testing.assert_array_equal(pc[0], [bin(int(x)).count("1") for x in v])
    np.testing.assert_array_equal(cz, [32 - int(x).bit_length() for x in v])


def test_bit_not_of_a_float_is_a_compile_error():
    k = make_kernel(_GEN, "bitnot_float", ["out", "x: tk.float32"], ["out[i] = ~x"])
    with pytest.raises(tk.CompileError, match=r"bitnot_float.*:3:"):
        k(tk.CPU())(np.zeros(1, np.int32), 1.0, ndrange=1)


# --- test_compare.py --------------------------------------------------------------------------

@tk.kernel
def compare_all(a, bc: tk.Const):
    b = bc[0]
    c = bc[1]
    a[0] = b < c
    a[1] = b <= c
    a[2] = b > c
    a[3] = b >= c
    a[4] = b == c
    a[5] = b != c
    a[6] = c < b
    a[7] = c <= b
    a[8] = c > b
    a[9] = c >= b
    a[10] = c == b
    a[11] = c != b


@tk.kernel
def chain_compare(a, v: tk.Const, cnt):
    b = v[0]
    c = v[1]
    d = v[2]
    a[0] = c == d != b < d > b >= b <= c
    a[1] = b <= c != d > b == b
    a[2] = 0 <= tk.atomic_add(cnt, 0, 2) < 1                  # test_no_duplicate_eval_func
    for i in range(100):                                       # test_compare_ret_type
        if i == 0:
            pass
    i = 100
    while i != 0:
        i -= 1
    a[3] = i == 0


def test_compare(be):
    for b, c in ((3, 5), (3, 3)):
        bc = np.array([b, c], np.int32)
        a = run(be, compare_all, np.zeros(12, np.int32), bc, ndrange=1)[0]
        want = [b < c, b <= c, b > c, b >= c, b == c, b != c, c < b, c <= b, c > b, c >= b, c == b, c != b]
        np.testing.assert_array_equal(a, want)
    a, _, cnt = run(be, chain_compare, np.zeros(4, np.int32), np.array([2, 3, 3], np.int32), np.zeros(1, np.int32),
                    ndrange=1)
    np.testing.assert_array_equal(a, [1, 0, 1, 1])
    assert cnt[0] == 2


# --- test_loops.py ----------------------------------------------------------------------------

@tk.kernel
def zero_inner_loop(x):
    for i in range(1):
        for j in range(0):
            x[0] = 1


@tk.kernel
def fill_counter(x, c):
    i = tk.index()
    x[i] = tk.atomic_add(c, 0, 1)


@tk.kernel
def dynamic_range(x, c: tk.Const, n):
    for i in range(c[0], c[0] * 2):
        x[i - n] += c[0]


@tk.kernel
def loop_arg_as_range(x, b, e):
    for i in range(b, e):
        x[i - b] = i


@tk.kernel
def nested_loop_cases(m, x, out):
    a = x[0]
    for i in range(m.shape[0]):
        b = a
        for j in range(1):
            b = b
        x[0] = b                                   # test_assignment_in_nested_loops
    a = 0
    if True:
        for i in range(1000):
            if i == 100:
                break
            a += 1
    out[0] = a                                     # test_break_in_outermost_for_not_in_outermost_scope
    for n in range(1):
        for t in range(2):
            for k in range(1):
                out[1 + n] = out[1 + n] + 1.0
            out[1 + n] = out[1 + n] + 1.0          # test_cache_loop_invariant_global_var_in_nested_loops


def test_loops(be):
    assert run(be, zero_inner_loop, np.zeros(1, np.int32), ndrange=1)[0][0] == 0
    n = 200
    x, c = run(be, fill_counter, np.zeros(n, np.int32), np.zeros(1, np.int32), ndrange=n)
    assert c[0] == n and sorted(x) == list(range(n))
    x = run(be, dynamic_range, x, c, n, ndrange=1)[0]
    assert x.sum() == n * (n - 1) // 2 + n * n
    for b, e in ((0, n // 2), (n // 2, n), (-n // 2, -n // 3)):
        x = run(be, loop_arg_as_range, np.zeros(n, np.int32), b, e, ndrange=1)[0]
        np.testing.assert_array_equal(x[:e - b], np.arange(b, e))
    _, x, out = run(be, nested_loop_cases, np.zeros(3, np.float32), np.ones(1, np.float32), np.zeros(2), ndrange=1)
    assert x[0] == 1
    np.testing.assert_array_equal(out, [100, 4.0])


# --- found by this port: operands with side effects ------------------------------------------

@tk.func
def bump(c, k):
    c[0] = c[0] + 10
    return k


@tk.kernel
def effects_in_order(o, c, x, d):
    o[0] = 0 <= tk.atomic_add(c, 0, 2) < 1          # c 0 -> 2: 0 <= 0 < 1
    o[1] = 1 << (tk.atomic_add(c, 0, 1) - 1)        # c 2 -> 3: 1 << 1
    o[2] = c[0] + tk.atomic_add(c, 0, 1)            # reads 3, then c 3 -> 4: 3 + 3
    o[3] = tk.atomic_add(c, 0, 1) + c[0]            # c 4 -> 5, then reads 5: 4 + 5
    o[4] = c[0] + bump(c, 0)                        # reads 5, then c -> 15: 5
    o[5] = max(c[0], bump(c, -1))                   # reads 15, then c -> 25: 15
    o[6] = tk.select(c[0] > 5, c[0], bump(c, 3))    # reads 25 twice, then c -> 35: 25
    x[tk.atomic_add(d, 0, 1)] = d[0]                # the value first (0), then the index (0; d -> 1)
    x[1 + bump(x, 0)] = x[0]                        # the value first (0), then x[0] -> 10


@tk.kernel
def effects_in_while(o, c):
    n = 0
    while 0 <= tk.atomic_add(c, 0, 1) < 5:           # the atomic once per test: 5 iterations
        n += 1
    o[0] = n


def test_operands_with_side_effects_run_once_in_python_order(anybe):
    """test_no_duplicate_eval_func's idea, widened: an atomic or an effectful @tk.func call in
    an operand runs once, after the operands to its left have been read, as Python evaluates.
    Before port20 the compiled backends ran a chained comparison's atomic middle operand twice
    and a shift count's three times, and read ``c[0]`` after a later operand's stores."""
    for be in (anybe, tk.CPU(debug=True)) if anybe.name == "CPU" else (anybe,):
        o, c, x, d = run(be, effects_in_order, np.zeros(7, np.int32), np.zeros(1, np.int32), np.zeros(3, np.int32),
                         np.zeros(1, np.int32), ndrange=1)
        np.testing.assert_array_equal(o, [1, 2, 6, 9, 5, 15, 25])
        assert c[0] == 35 and d[0] == 1
        np.testing.assert_array_equal(x, [10, 0, 0])
        o, c = run(be, effects_in_while, np.zeros(1, np.int32), np.zeros(1, np.int32), ndrange=1)
        assert o[0] == 5 and c[0] == 6                  # was 2 iterations (the atomic ran twice a test)
