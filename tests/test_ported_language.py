"""SPEC sections 1-3 (the kernel language) audited the way NVIDIA Warp's, Numba CUDA's,
Taichi's, KernelAbstractions.jl's and CuPy's own suites test theirs: corner cases of each
clause on every backend of this machine, against Python or NumPy semantics."""
import numpy as np
import pytest

import tinykernels as tk

NAMES = ("CPU", "INTERP", "INTERP:CHECK", "CL", "WEBGPU")


def backends():
    avail = set(tk.backends_available())
    return [pytest.param(n, marks=pytest.mark.skipif(n.split(":")[0] not in avail, reason=f"{n} unavailable"))
            for n in NAMES]


def run(kernel, name, *args, wg=None, **kw):
    """Launch ``kernel`` on backend ``name`` with NumPy ``args`` (moved there and back):
    the arrays after the launch, in argument order."""
    b = tk.backend(name)
    dev = [tk.asarray(a, backend=b) if isinstance(a, np.ndarray) else a for a in args]
    (kernel(b) if wg is None else kernel(b, wg))(*dev, **kw)
    tk.synchronize(b)
    return [d.numpy() if hasattr(d, "numpy") else np.asarray(d) for d, a in zip(dev, args)
            if isinstance(a, np.ndarray)]


# -- chained comparisons: `a < b < c` evaluates c only when a < b (Python's short circuit) ----

@tk.func
def counted(c, k):
    tk.atomic_add(c, 0, 1)
    return k


@tk.kernel
def chained_with_side_effects(o, c, x: tk.Const):
    i = tk.index()
    o[i] = counted(c, 0) < x[i] < counted(c, 10)


@tk.func
def clobber(x, i):
    x[i] = 100.0
    return 50.0


@tk.kernel
def chained_middle_read_once(o, x):
    i = tk.index()
    o[i] = 0.0 < x[i] < clobber(x, i)      # x[i] is read before clobber stores into it


@pytest.mark.parametrize("name", backends())
def test_chained_comparison_evaluates_later_operands_only_when_needed(name):
    x = np.array([0.0, 5.0, 20.0, -3.0, 3.0], np.float32)
    o, c, _ = run(chained_with_side_effects, name, np.zeros(5, np.bool_), np.zeros(1, np.int32), x, ndrange=5)
    np.testing.assert_array_equal(o, (0 < x) & (x < 10))
    assert c[0] == 5 + (x > 0).sum()      # the right-hand call ran only where 0 < x[i]


@pytest.mark.parametrize("name", backends())
def test_chained_comparison_reads_the_middle_operand_once(name):
    x = np.array([1.0, -1.0, 60.0], np.float32)
    o, xo = run(chained_middle_read_once, name, np.zeros(3, np.float32), x.copy(), ndrange=3)
    np.testing.assert_array_equal(o, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(xo, [100.0, -1.0, 100.0])


# -- Python int scalar arguments: one >= 2**63 is a weak uint64 on every backend --------------

@tk.kernel
def add_scalar(o, x: tk.Const, v):
    i = tk.index()
    o[i] = x[i] + v


@pytest.mark.parametrize("name", [p for p in backends() if p.values[0] != "WEBGPU"])
def test_python_int_past_int64_after_a_small_one(name):
    """A Python int in [2**63, 2**64) is carried as uint64: after a launch with a small int
    (an int64 specialization), OpenCL reused that build and passed -2**63."""
    x = np.array([0.0, 1.0], np.float32)
    for v in (1, 2 ** 63, -2 ** 63, 2 ** 64 - 1, 7):
        o, _ = run(add_scalar, name, np.zeros(2, np.float32), x, v, ndrange=2)
        np.testing.assert_array_equal(o, x + np.float32(float(v)))


# -- a local's type is the promotion of every value assigned to it, also without float64 -------

@tk.kernel
def int_local_becomes_float(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    v = x[i]
    v += 1.5                 # int32 with a Python float: float64 in NumPy
    w = x[i]
    w = w / 2
    u = x[i]
    u = u * y[i]             # int32 with float32: float64 in NumPy
    o[i, 0] = v
    o[i, 1] = w
    o[i, 2] = u


@pytest.mark.parametrize("name", backends())
def test_int_local_reassigned_a_float(name):
    """On WebGPU (no float64) NumPy's float64 results are float32, as `/` on ints is: a local
    assigned an int32 and then such a value was float64 there, a CompileError."""
    x, y = np.array([1, -3, 7], np.int32), np.array([0.5, 0.25, 3.0], np.float32)
    o, _, _ = run(int_local_becomes_float, name, np.zeros((3, 3), np.float32), x, y, ndrange=3)
    np.testing.assert_array_equal(o, np.stack([x + 1.5, x / 2, x * y.astype(np.float64)], 1).astype(np.float32))


# -- integer operators at the edges, against NumPy (Numba's test_operators, Taichi's test_bit_operations)

@tk.kernel
def int_ops(o, a: tk.Const, b: tk.Const):
    i = tk.index()
    o[i, 0] = a[i] // b[i]
    o[i, 1] = a[i] % b[i]
    o[i, 2] = a[i] << b[i]
    o[i, 3] = a[i] >> b[i]
    o[i, 4] = a[i] * b[i]
    o[i, 5] = a[i] - b[i]
    o[i, 6] = -a[i]
    o[i, 7] = abs(a[i])


def _int_edges(dt):
    info = np.iinfo(dt)
    v = {0, 1, 2, 7, -1, -7, info.min, info.max, info.min + 1, info.bits - 1, info.bits, info.bits + 1}
    return [x for x in sorted(v) if info.min <= x <= info.max]


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_integer_operators_at_the_edges_match_numpy(name, dt):
    """Floor division and modulo of negative and minimum values and by zero (0, as NumPy's
    arrays give), shifts by the width or more and by negative amounts, wrapping products,
    -INT_MIN and abs(INT_MIN): NumPy's values bit for bit."""
    if name == "WEBGPU" and np.dtype(dt).itemsize != 4:
        pytest.skip("WebGPU has 32-bit integers only")
    v = _int_edges(dt)
    a = np.repeat(np.array(v, dt), len(v))
    b = np.tile(np.array(v, dt), len(v))
    o, _, _ = run(int_ops, name, np.zeros((a.size, 8), dt), a, b, ndrange=a.size)
    with np.errstate(all="ignore"):
        want = np.stack([a // b, a % b, np.left_shift(a, b), np.right_shift(a, b), a * b, a - b, -a, np.abs(a)], 1)
    np.testing.assert_array_equal(o, want)


# -- group collectives over partial groups, every op, inclusive and exclusive (KA, CUB-style) --

@tk.kernel
def scans(o, x: tk.Const, incl: tk.constexpr):
    i = tk.index()
    v = x[i]
    o[i, 0] = tk.group_reduce(v, "add")
    o[i, 1] = tk.group_reduce(v, "max")
    o[i, 2] = tk.group_scan(v, "add", inclusive=incl)
    o[i, 3] = tk.group_scan(v, "mul", inclusive=incl)
    o[i, 4] = tk.group_scan(v, "min", inclusive=incl)
    o[i, 5] = tk.group_scan(v, "and", inclusive=incl)
    o[i, 6] = tk.group_scan(v, "or", inclusive=incl)


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("incl", [True, False])
def test_group_scans_over_a_partial_last_group(name, incl):
    n, wg = 13, 8
    x = np.array([3, -1, 2, 5, -4, 1, 1, 2, 7, -2, 3, 1, 6], np.int32)
    o, _ = run(scans, name, np.zeros((n, 7), np.int32), x, incl, ndrange=n, workgroupsize=wg)
    want = np.zeros((n, 7), np.int32)
    ident = [0, 1, np.iinfo(np.int32).max, -1, 0]
    for g in range(0, n, wg):
        s = x[g:g + wg]
        want[g:g + wg, 0], want[g:g + wg, 1] = s.sum(), s.max()
        for c, (f, e) in enumerate(zip([np.add, np.multiply, np.minimum, np.bitwise_and, np.bitwise_or], ident)):
            acc = f.accumulate(s)
            want[g:g + wg, 2 + c] = acc if incl else np.concatenate([[e], acc[:-1]])
    np.testing.assert_array_equal(o, want)


# -- loops and ranges (Warp's test_codegen, KA's nditeration) ----------------------------------

@tk.kernel
def range_sum(o, n: int, step: int):
    i = tk.index()
    s = 0
    c = 0
    for k in range(i, n, step):
        s += k
        c += 1
    o[i, 0] = s
    o[i, 1] = c


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("n,step", [(10, 3), (10, -1), (-5, -2), (10, 100), (3, 1)])
def test_range_with_run_time_steps(name, n, step):
    (o,) = run(range_sum, name, np.zeros((6, 2), np.int32), n, step, ndrange=6)
    np.testing.assert_array_equal(o, [[sum(range(i, n, step)), len(range(i, n, step))] for i in range(6)])


@tk.kernel
def cartesian_ranges(o):
    i, j = tk.index(tk.Global, tk.Cartesian)
    o[i, j] = tk.index() + 1


@pytest.mark.parametrize("name", backends())
def test_cartesian_index_of_stepped_and_reversed_ranges(name):
    """Absolute coordinates start + k*step (a negative step too); the linear index stays the
    0-based position, the last dimension fastest."""
    (o,) = run(cartesian_ranges, name, np.zeros((8, 9), np.int32), ndrange=(range(1, 7, 2), range(8, 2, -3)))
    want = np.zeros((8, 9), np.int32)
    for k, (i, j) in enumerate((i, j) for i in range(1, 7, 2) for j in range(8, 2, -3)):
        want[i, j] = k + 1
    np.testing.assert_array_equal(o, want)


# -- tk.print: the same text on every backend that prints -------------------------------------

@tk.kernel
def print_specials(x: tk.Const):
    i = tk.index()
    tk.print(i, x[i], -x[i], tk.float16(x[i]), x[i] > 0.0)


@pytest.mark.parametrize("name", [p for p in backends() if p.values[0] not in ("INTERP", "INTERP:CHECK")])
def test_print_of_nan_infinities_and_signed_zeros_matches_the_interpreter(name, capfd):
    """A NaN prints "nan" whatever its sign (Python's "%g"): the C backend printed "-nan"
    for -x of a NaN, glibc's printf does."""
    import sys
    x = np.array([np.nan, -np.inf, -0.0, 1e-45], np.float32)
    run(print_specials, "INTERP", x, ndrange=4)
    sys.stdout.flush()
    want = capfd.readouterr().out
    assert want.splitlines()[0] == "0 nan nan nan 0"
    run(print_specials, name, x, ndrange=4, workgroupsize=1)
    got = capfd.readouterr().out
    assert sorted(got.splitlines()) == sorted(want.splitlines())


# -- narrow floats: an explicit cast rounds, also from the narrow type itself --------------------

@tk.kernel
def narrow_self_cast(o, a: tk.Const, T: tk.constexpr):
    i = tk.index()
    o[i, 0] = T(a[i] * 3.0) - 0.1
    o[i, 1] = a.dtype(a[i] * 3.0) - 0.1
    v: a.dtype = a[i] * 3.0
    o[i, 2] = v - 0.1


@pytest.mark.parametrize("name", backends())
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_cast_of_a_narrow_float_expression_to_its_own_type_rounds(name, dt):
    """`a * 3.0` of float16 `a` is float16 computed in float32; `tk.float16(...)` of it must
    round to float16 (a tie here: 0.3303 * 3 lies halfway). WGSL dropped the cast as a no-op."""
    ml = pytest.importorskip("ml_dtypes") if dt == "bfloat16" else None
    ndt = np.dtype(ml.bfloat16) if ml else np.dtype(np.float16)
    a = np.array([0.3303, 0.581, -0.7363, 1.1, 2.0 ** -14], np.float32).astype(ndt)
    o, _ = run(narrow_self_cast, name, np.zeros((5, 3), np.float32), a, getattr(tk, dt), ndrange=5)
    r = (a.astype(np.float32) * np.float32(3.0)).astype(ndt).astype(np.float32) - np.float32(np.array(0.1).astype(ndt))
    np.testing.assert_array_equal(o, np.stack([r, r, r], 1))


# -- @tk.func results: nested tuples, as Python returns them (Warp's test_func) -----------------

@tk.func
def sum_and_max(x, n, scale=1.0):
    s = 0.0
    m = x[0]
    for k in range(n):
        s += x[k]
        m = max(m, x[k])
    return s * scale, m


@tk.func
def nested_result(x, n):
    a, b = sum_and_max(x, n, scale=2.0)
    if n < 0:
        return (b, a), b
    return (a, b), a - b


@tk.kernel
def use_nested_result(o, x: tk.Const):
    i = tk.index()
    (s, m), d = nested_result(x, len(x))
    o[i, 0] = s
    o[i, 1] = m
    o[i, 2] = d
    t = nested_result(x, 2)
    o[i, 3] = t[0][1]


@pytest.mark.parametrize("name", backends())
def test_func_returning_a_nested_tuple(name):
    """`return (a, b), c` was "a tuple was used where a number is expected"."""
    x = np.array([1.0, 4.0, -2.0], np.float32)
    o, _ = run(use_nested_result, name, np.zeros((2, 4), np.float32), x, ndrange=2)
    np.testing.assert_array_equal(o, [[6.0, 4.0, 2.0, 4.0]] * 2)


# -- comparisons with a Python int argument >= 2**63 are exact (NumPy 2) ------------------------

@tk.kernel
def compare_scalar(o, x: tk.Const, v):
    i = tk.index()
    o[i, 0] = x[i] < v
    o[i, 1] = x[i] == v
    o[i, 2] = v > x[i]
    o[i, 3] = v <= x[i]


@pytest.mark.parametrize("name", [p for p in backends() if p.values[0] != "WEBGPU"])
@pytest.mark.parametrize("dt", [np.int64, np.uint64, np.int32, np.uint8])
def test_comparison_with_a_python_int_past_int64(name, dt):
    """A Python int in [2**63, 2**64) is a weak uint64: compared with an int64 (or narrower)
    value it was wrapped to int64 on the compiled backends (x_i64 == 2**63 held for INT64_MIN,
    x_u64 < 2**64 - 1 was False)."""
    info = np.iinfo(dt)
    x = np.array([info.min, info.min // 2, 0, info.max], dt)
    for v in (2 ** 63, 2 ** 64 - 1, 2 ** 63 + 5, -1, 7):
        o, _ = run(compare_scalar, name, np.zeros((4, 4), np.bool_), x, v, ndrange=4)
        want = [[int(a) < v, int(a) == v, v > int(a), v <= int(a)] for a in x]
        np.testing.assert_array_equal(o, want, err_msg=f"v = {v}")
