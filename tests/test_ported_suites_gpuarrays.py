"""GPUArrays.jl's test suite (test/testsuite/reductions.jl) ported as tinykernels kernels:
"reductions/mapreducedim!" and "mapreduce" (sum and product, with the map ``x -> x + x``, over
every combination of dimensions of 1-D to 3-D arrays, including reductions over nothing and
over empty arrays, which give ``init``), "sum prod", "and or xor" (``init = ~0`` for ``&``),
"minimum maximum extrema" (with the map ``x -> x * x``, from ``typemax``/``typemin``), "any all
count" (of bools and of ``iseven``, whole and along ``dims=2``) and "== isequal" (``0.0 ==
-0.0`` but not isequal; ``NaN != NaN`` but isequal; arrays of different shapes are unequal).

One kernel does every ``mapreducedim``: one workgroup per output element, each work item
folds a strided share of the reduced elements (their coordinates decoded from a linear count)
from ``init``, and ``tk.group_reduce`` combines the group; the operator and the reduced
dimensions are run-time arguments (uniform), so one build serves every case of a dtype. Values
are ``rand(ET(1):ET(10))`` as upstream; the accumulator has the element type, so integer sums
and products wrap in it as Julia's do, and the reference is NumPy's ``ufunc.reduce`` with
``dtype=ET`` and ``initial=init`` (exact for integers, whose wrapping arithmetic does not
depend on the order; float sums of small integers are exact too, float products within
rounding). int8, uint16, int32 and uint64 (every width, both signs), float16 (small sizes, as
upstream skips it for the large ones), float32 and float64 on CPU and INTERP; int32 and
float32 on CL and WEBGPU too (collectives are where backends differ; one build per dtype
there, for the CI budget).

Where SPEC differs from upstream (ported as SPEC reads, or not ported):

* ``tk.group_reduce`` has no ``"xor"`` op (SPEC 3: add, mul, min, max, and, or): the xor
  reduction is an ``atomic_xor`` of each item's partial xor into the output (int32, uint32,
  int64, uint64: the SPEC atomic types).
* Julia's column-major ``dims`` become NumPy axes of a row-major array (a reduction over
  axes is the same either way); ``extrema`` is a min and a max; ``count`` is an ``"add"`` of
  ``int(v)``; complex element types, ``missing``, wrapper types (transpose/adjoint outputs),
  ``mapreducedim!_large`` (500,000 elements) and the Statistics tests are not ported; the
  (10, 10, 10) arrays are (6, 5, 4) on the interpreter-sized budget of this machine."""
import itertools
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, backend_params, get, put  # noqa: F401 - anybe: a fixture

OPS = {"add": 0, "mul": 1, "min": 2, "max": 3, "and": 4, "or": 5}
G = 16


@tk.kernel
def mapreducedim(R, A: tk.Const, init, op, double, r0, r1, r2, bitwise: tk.constexpr):
    """R[o] = init op map(A[o, k...]) over the reduced dimensions r0..r2 (1 = reduced); ``&``
    and ``|`` (op 4, 5) exist for integers only: a float build (``bitwise`` False) drops them"""
    g = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    n0, n1, n2 = A.shape[0], A.shape[1], A.shape[2]
    m1 = 1 if r1 else n1
    m2 = 1 if r2 else n2
    o0 = g // (m1 * m2)
    o1 = (g // m2) % m1
    o2 = g % m2
    k1 = n1 if r1 else 1
    k2 = n2 if r2 else 1
    nred = (n0 if r0 else 1) * k1 * k2
    acc = init
    for k in range(t, nred, tk.groupsize()[0]):
        j0 = k // (k1 * k2) if r0 else o0
        j1 = (k // k2) % k1 if r1 else o1
        j2 = k % k2 if r2 else o2
        v = A[j0, j1, j2]
        if double:
            v = A.dtype(v + v)
        if op == 0:
            acc = A.dtype(acc + v)
        elif op == 1:
            acc = A.dtype(acc * v)
        elif op == 2:
            acc = min(acc, v)
        elif op == 3:
            acc = max(acc, v)
        elif bitwise:
            if op == 4:
                acc = acc & v
            else:
                acc = acc | v
    total = acc
    if op == 0:
        total = tk.group_reduce(acc, "add")
    elif op == 1:
        total = tk.group_reduce(acc, "mul")
    elif op == 2:
        total = tk.group_reduce(acc, "min")
    elif op == 3:
        total = tk.group_reduce(acc, "max")
    elif bitwise:
        if op == 4:
            total = tk.group_reduce(acc, "and")
        else:
            total = tk.group_reduce(acc, "or")
    if t == 0:
        R[o0, o1, o2] = total


def reduce_on(be, A, dims, op, init, double=False):
    """mapreduce(x -> double ? x + x : x, op, A; dims, init) through the kernel, keepdims"""
    A3 = A.reshape((1,) * (3 - A.ndim) + A.shape)
    red = [0] * (3 - A.ndim) + [1 if d in dims else 0 for d in range(A.ndim)]
    if A.ndim < 3:                          # the leading 1s count as reduced when all are
        red[:3 - A.ndim] = [1 if all(red[3 - A.ndim:]) else 0] * (3 - A.ndim)
    out_shape = tuple(1 if r else n for r, n in zip(red, A3.shape))
    R = np.full(out_shape, 99, A.dtype)
    nout = int(np.prod(out_shape))
    dR, dA = put(be, R), put(be, A3)
    if nout:
        mapreducedim(be, G)(dR, dA, A.dtype.type(init), OPS[op], int(double), *red, A.dtype.kind != "f",
                            ndrange=nout * G)
        tk.synchronize(be)
    return get(dR).reshape(tuple(1 if d in dims else n for d, n in enumerate(A.shape)))


UFUNC = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum,
         "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def reference(A, dims, op, init, double=False):
    with np.errstate(over="ignore"):
        X = (A + A).astype(A.dtype) if double else A
        if not dims:
            return UFUNC[op](X, A.dtype.type(init)).astype(A.dtype)   # reduce over nothing: init op x
        return UFUNC[op].reduce(X, axis=tuple(dims), dtype=A.dtype, keepdims=True, initial=A.dtype.type(init))


def check(got, want, dt):
    if np.dtype(dt).kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=4 * np.finfo(dt).eps)
    else:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


INTS = [np.int8, np.uint16, np.int32, np.uint64]      # each width, signed and unsigned
FLOATS = [np.float16, np.float32, np.float64]
SHAPES_DIMS = [((10,), [0]), ((10, 10), [0, 1]), ((6, 5, 4), [0, 1, 2]), ((6, 5, 4), []),
               ((6, 5, 4), [1, 2]), ((6, 5, 4), [0, 2]), ((6, 5, 4), [0, 1]),
               ((6, 5, 4), [0]), ((6, 5, 4), [1]), ((6, 5, 4), [2]), ((0,), [0])]


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def rbe(request):
    """every dtype on the host backends"""
    return tk.backend(request.param)


@pytest.fixture(params=backend_params('CL', 'WEBGPU', 'CUDA'), scope="module")
def dbe(request):
    """the device backends, on int32 and float32 (PoCL builds each reduction kernel in about
    ten seconds on this machine: one build per dtype, two dtypes, for the CI budget)"""
    return tk.backend(request.param)


def need(be, dt):
    if not be.supports(dt):
        pytest.skip(f"{be.name} has no {np.dtype(dt).name} (SPEC 4)")


def one_to_ten(rng, shape, dt):
    return rng.integers(1, 11, size=shape).astype(dt)


@pytest.mark.parametrize("dt", INTS + FLOATS)
def test_mapreducedim_sum_prod(rbe, dt):
    check_sum_prod(rbe, dt)


def check_sum_prod(rbe, dt):
    """"reductions/mapreducedim!" and "mapreduce": sum and product with init 0 / 1, and the sum
    of x + x, over every dims case (float16 on the small shapes only: upstream's precision
    skip, here because a float16 sum of 100 values of 1..20 passes 2048)"""
    need(rbe, dt)
    rng = np.random.default_rng(np.dtype(dt).num)
    for shape, dims in SHAPES_DIMS:
        if dt == np.float16 and int(np.prod([shape[d] for d in dims] or [1])) > 10:
            continue
        A = one_to_ten(rng, shape, dt)
        for op, init, double in (("add", 0, False), ("mul", 1, False), ("add", 0, True)):
            got = reduce_on(rbe, A, dims, op, init, double)
            check(got, reference(A, dims, op, init, double), dt)


@pytest.mark.parametrize("dt", INTS)
def test_reductions_and_or(rbe, dt):
    check_and_or(rbe, dt)


def check_and_or(rbe, dt):
    """"reductions/and or xor": reduce(&, A; init=~0) and reduce(|, A; init=0) over every dims
    case (xor: test_reduction_xor_through_atomics)"""
    need(rbe, dt)
    rng = np.random.default_rng(100 + np.dtype(dt).num)
    for shape, dims in SHAPES_DIMS:
        A = one_to_ten(rng, shape, dt)
        check(reduce_on(rbe, A, dims, "and", ~dt(0)), reference(A, dims, "and", ~dt(0)), dt)
        check(reduce_on(rbe, A, dims, "or", 0), reference(A, dims, "or", 0), dt)


@tk.kernel
def xor_rows(R, A: tk.Const):
    """reduce(xor, A; dims=2): each item xors a strided share of its row, then one atomic"""
    g = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    acc = R.dtype(0)
    for k in range(t, A.shape[1], tk.groupsize()[0]):
        acc = acc ^ A[g, k]
    tk.atomic_xor(R, g, acc)


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
def test_reduction_xor_through_atomics(rbe, dt):
    check_xor(rbe, dt)


def check_xor(rbe, dt):
    """reduce(xor, A; dims, init=0) for a (10, 10) and a (3, 37) array along the last axis"""
    need(rbe, dt)
    rng = np.random.default_rng(7)
    for shape in ((10, 10), (3, 37)):
        A = one_to_ten(rng, shape, dt)
        R = put(rbe, np.zeros(shape[0], dt))
        xor_rows(rbe, G)(R, put(rbe, A), ndrange=shape[0] * G)
        tk.synchronize(rbe)
        np.testing.assert_array_equal(get(R), np.bitwise_xor.reduce(A, axis=1))


@pytest.mark.parametrize("dt", INTS + FLOATS)
def test_minimum_maximum_extrema(rbe, dt):
    check_min_max(rbe, dt)


def check_min_max(rbe, dt):
    """"reductions/minimum maximum extrema": minimum and maximum from typemax/typemin (extrema
    is both), of A and of x -> x * x (written as the doubled map's sibling: the kernel's map
    is x + x), over every dims case but the empty one"""
    need(rbe, dt)
    rng = np.random.default_rng(200 + np.dtype(dt).num)
    info = np.iinfo(dt) if np.dtype(dt).kind in "iu" else np.finfo(dt)
    hi, lo = (info.max, info.min) if np.dtype(dt).kind in "iu" else (np.inf, -np.inf)
    for shape, dims in SHAPES_DIMS[:-1]:
        A = one_to_ten(rng, shape, dt)
        for double in (False, True):
            check(reduce_on(rbe, A, dims, "min", hi, double), reference(A, dims, "min", hi, double), dt)
            check(reduce_on(rbe, A, dims, "max", lo, double), reference(A, dims, "max", lo, double), dt)


@tk.kernel
def any_all_count(out, A: tk.Const, even):
    """out[r] = (any, all, count) of row r of A (or of iseven.(A) when even)"""
    r = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    a = False
    b = True
    c = 0
    for k in range(t, A.shape[1], tk.groupsize()[0]):
        v = A[r, k] % 2 == 0 if even else bool(A[r, k])
        a = a or v
        b = b and v
        c += int(v)
    out[r, 0] = int(tk.group_reduce(a, "or"))
    out[r, 1] = int(tk.group_reduce(b, "and"))
    out[r, 2] = tk.group_reduce(c, "add")


BOOLS = [[False, False], [False, True], [True, True], [[False, False], [False, False]],
         [[False, True], [False, False]], [[True, True], [False, False]], [[True, True], [True, True]]]
INTS2 = [[1, 1], [1, 2], [2, 2], [[1, 1], [1, 1]], [[1, 2], [1, 1]], [[2, 2], [1, 1]], [[2, 2], [2, 2]]]


@pytest.mark.parametrize("even", [False, True], ids=["bool", "iseven"])
def test_any_all_count(rbe, even):
    check_any_all_count(rbe, even)


def check_any_all_count(rbe, even):
    """"reductions/any all count": any, all and count of each upstream array, whole (the array
    as one row) and along dims=2 (each row), of bools and of iseven on ints"""
    for Ac in (INTS2 if even else BOOLS):
        A = np.array(Ac, np.int32 if even else np.bool_)
        pred = A % 2 == 0 if even else A
        for rows in ([A.reshape(1, -1)] + ([A] if A.ndim > 1 else [])):
            out = put(rbe, np.full((rows.shape[0], 3), -1, np.int32))
            any_all_count(rbe, G)(out, put(rbe, rows), int(even), ndrange=rows.shape[0] * G)
            tk.synchronize(rbe)
            p = pred.reshape(rows.shape)
            want = np.stack([p.any(axis=1), p.all(axis=1), p.sum(axis=1)], axis=1)
            np.testing.assert_array_equal(get(out), want)


@tk.kernel
def equal_isequal(out, A: tk.Const, B: tk.Const):
    """out = (A == B, isequal(A, B)) over the whole (flat) arrays, one group"""
    t = tk.index(tk.Local, tk.Linear)
    eq = True
    same = True
    for k in range(t, A.shape[0], tk.groupsize()[0]):
        a = A[k]
        b = B[k]
        eq = eq and a == b
        same = same and (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
                         or math.isnan(a) and math.isnan(b))
    e = tk.group_reduce(eq, "and")
    s = tk.group_reduce(same, "and")
    if t == 0:
        out[0] = int(e)
        out[1] = int(s)


def julia_eq(A, B):
    if A.shape != B.shape:
        return 0, 0
    eq = bool(np.all(A == B))
    same = all((a == b and np.signbit(a) == np.signbit(b)) or (np.isnan(a) and np.isnan(b))
               for a, b in zip(A.ravel().tolist(), B.ravel().tolist()))
    return int(eq), int(same)


def equal_on(be, A, B):
    if A.shape != B.shape:                  # Julia: arrays of different sizes are never equal
        return 0, 0
    out = put(be, np.full(2, -1, np.int32))
    equal_isequal(be, G)(out, put(be, A.ravel()), put(be, B.ravel()), ndrange=G)
    tk.synchronize(be)
    return tuple(int(v) for v in get(out))


@pytest.mark.parametrize("dt", [np.int16, np.int32, np.float16, np.float32, np.float64])
def test_equal_and_isequal(rbe, dt):
    check_equal(rbe, dt)


def check_equal(rbe, dt):
    """"reductions/== isequal": random arrays of 1..10 (unequal), an array with itself (equal),
    a (2, 3) against a 6-vector (CUDA.jl#1524: unequal), and for floats 0.0 vs -0.0 (== but not
    isequal) and NaN vs NaN (isequal but not ==)"""
    need(rbe, dt)
    rng = np.random.default_rng(300 + np.dtype(dt).num)
    assert equal_on(rbe, one_to_ten(rng, (2, 3), dt), one_to_ten(rng, 6, dt)) == (0, 0)
    for shape in ((10,), (10, 10), (6, 5, 4), (0,)):
        A, B = one_to_ten(rng, shape, dt), one_to_ten(rng, shape, dt)
        assert equal_on(rbe, A, B) == julia_eq(A, B)
        assert equal_on(rbe, A, A.copy()) == (1, 1)
        if np.dtype(dt).kind == "f" and A.size:
            Bc = A.copy()
            A[0], Bc[0] = dt(0.0), dt(-0.0)
            assert equal_on(rbe, A, Bc) == julia_eq(A, Bc) == (1, 0)
            A[0] = Bc[0] = dt(np.nan)
            assert equal_on(rbe, A, Bc) == julia_eq(A, Bc) == (0, 1)


def test_reductions_on_device_backends(dbe):
    """every case above on OpenCL, WebGPU and CUDA, for int32 and float32: sum/prod (and the
    doubled map), &/|, xor, minimum/maximum, any/all/count, == and isequal"""
    for dt in (np.int32, np.float32):
        check_sum_prod(dbe, dt)
        check_min_max(dbe, dt)
        check_equal(dbe, dt)
    check_and_or(dbe, np.int32)
    check_xor(dbe, np.int32)
    for even in (False, True):
        check_any_all_count(dbe, even)


def test_dims_cases_cover_every_axis_combination():
    """the dims list is upstream's (every subset of the three axes of a 3-D array, and the whole
    array for 1-D and 2-D), so a decoding error in one combination cannot hide"""
    subsets = {tuple(d) for s, d in SHAPES_DIMS if len(s) == 3}
    assert subsets == {c for r in range(4) for c in itertools.combinations(range(3), r)}
