"""PyOpenCL's test suite (test/test_algorithm.py and test/test_array.py) ported test by test as
tinykernels kernels: what PyOpenCL builds from C snippets (ElementwiseKernel, ReductionKernel,
Inclusive/Exclusive/GenericScanKernel, copy_if, partition, unique, RadixSort, ListOfListsBuilder,
KeyValueSorter, BitonicSort) and what its ``cl.array`` operators do, written here in the kernel
language: a multi-level scan from ``tk.group_scan`` (group scans, a scan of the group totals,
the carries added back), segmented scans built from a sum scan and a max scan of the segment
heads, stream compaction, a 1-bit LSB radix sort and a bitonic sort from ``tk.index``/scalars,
two-stage reductions with ``tk.group_reduce`` over ranged ndranges (PyOpenCL's ``slice=``).
Elementwise arithmetic, division, bitwise operators and comparisons on every dtype pair the
upstream tests use, checked exactly against NumPy, including the result's type (stored into
the widest array so that a wrongly promoted computation shows). CPU, INTERP, INTERP:CHECK, CL
and WEBGPU (sizes are smaller on the interpreter, which runs work items in Python).

Where SPEC differs from upstream:

* No complex dtypes (upstream's complex64/complex128 cases of sum, dot, vdot, division are
  not ported); no struct dtypes (test_struct_reduce's min/max collector is a pair of
  ``group_reduce``s).
* ``tk.group_reduce(v, "max"/"min")`` leaves NaN operands out (C's ``fmax``/``fmin`` folded
  from the identity: a group of NaNs only gives -inf / +inf), on every backend, where
  PyOpenCL's ``cl.array.max/min`` propagate the NaN as NumPy does; the NumPy behaviour is
  written in the kernel with ``math.isnan`` (test_reduction_nan_handling).
* ``np.maximum``/``np.minimum`` (``cl.array.maximum``) propagate NaN; the builtins ``max``/
  ``min`` follow Python's argument order instead (docs/language.md), so the port writes
  NumPy's rule with ``math.isnan``.
* A Python int argument that does not fit the array's integer type wraps (docs/language.md)
  where NumPy raises OverflowError (test_bitwise's out-of-range scalars are skipped, as
  upstream skips them when NumPy raises).
* ``and``/``or`` give a bool, as NumPy's ``logical_and``/``logical_or`` (not Python's
  operand).
* WebGPU has no 64-bit types: int64 scans and sorts skip there with the reason, float64 data
  becomes float32 (documented SPEC 4), and upstream's int64 values of test_key_value_sorter
  are int32 there."""
import math
import operator
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, interp, put
from gen_kernels import make_kernel

RNG = np.random.default_rng(1919)
WG = 64
EPS32 = float(np.finfo(np.float32).eps)
ADD, MAX, MIN = 0, 1, 2                  # constexpr codes of the operators (a str is no constexpr)
OPS = {"add": ADD, "max": MAX, "min": MIN}


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def empty(be, n, dtype):
    return put(be, np.zeros(n, dtype))


def fdt(be):
    return np.float64 if be.supports_float64 else np.float32


def need(be, dtype):
    if not be.supports(np.dtype(dtype)):
        pytest.skip(f"{be.name} has no {np.dtype(dtype).name}")


def sizes(be, small, large=()):
    """upstream's scan_test_counts, cut to what each backend runs in reasonable time."""
    return list(small) + (list(large)[:1] if interp(be) else list(large))


SCAN_SMALL = [10, 2 ** 6 - 1, 2 ** 6, 2 ** 6 + 1, 2 ** 8 + 5]
SCAN_LARGE = [2 ** 10 - 5, 2 ** 10, 2 ** 12 + 5, 2 ** 14 - 3]


# --- building blocks written in the kernel language ------------------------------------------

@tk.kernel
def scan_groups(out, totals, x: tk.Const, op: tk.constexpr, inclusive: tk.constexpr):
    """Each group's scan of ``x`` into ``out``; each group's total into ``totals``."""
    i = tk.index()
    v = x[i]
    if op == ADD:
        s = tk.group_scan(v, "add", inclusive)
        t = tk.group_reduce(v, "add")
    else:
        s = tk.group_scan(v, "max", inclusive)
        t = tk.group_reduce(v, "max")
    out[i] = s
    if tk.index(tk.Local, tk.Linear) == 0:
        totals[tk.index(tk.Group, tk.Linear)] = t


@tk.kernel
def add_carries(out, carries: tk.Const, op: tk.constexpr, inclusive: tk.constexpr):
    """Combines each item with its group's carry (the scan of the earlier groups' totals)."""
    i = tk.index()
    g = tk.index(tk.Group, tk.Linear)
    if g > 0:
        if op == ADD:
            out[i] = carries[g] + out[i]
        elif inclusive or tk.index(tk.Local, tk.Linear) > 0:
            out[i] = max(carries[g], out[i])
        else:
            out[i] = carries[g]


def scan(be, x, op="add", inclusive=True):
    """PyOpenCL's Inclusive/ExclusiveScanKernel: a scan of any length, group scans then a
    (recursive) exclusive scan of the group totals added back."""
    n = x.shape[0]
    out = empty(be, n, x.dtype)
    if n == 0:
        return out
    ng = -(-n // WG)
    totals = empty(be, ng, x.dtype)
    scan_groups(be, WG)(out, totals, x, OPS[op], inclusive, ndrange=n)
    if ng > 1:
        carries = scan(be, totals, op, inclusive=op != "add")
        if op != "add":                    # the carry of group g is the max over groups < g
            carries = shift_right(be, carries)
        add_carries(be, WG)(out, carries, OPS[op], inclusive, ndrange=n)
    return out


@tk.kernel
def shift_kernel(out, x: tk.Const):
    i = tk.index()
    out[i] = x[i - 1] if i > 0 else x[0]


def shift_right(be, x):
    out = empty(be, x.shape[0], x.dtype)
    shift_kernel(be)(out, x, ndrange=x.shape[0])
    return out


@tk.kernel
def reduce_groups(partial, x: tk.Const, op: tk.constexpr):
    """One partial result per group over the (possibly ranged) ndrange: PyOpenCL's
    ReductionKernel with ``slice=``."""
    (i,) = tk.index(tk.Global, tk.Cartesian)
    if op == ADD:
        r = tk.group_reduce(x[i], "add")
    elif op == MAX:
        r = tk.group_reduce(x[i], "max")
    else:
        r = tk.group_reduce(x[i], "min")
    if tk.index(tk.Local, tk.Linear) == 0:
        partial[tk.index(tk.Group, tk.Linear)] = r


def reduce(be, x, op="add", rng=None):
    rng = range(x.shape[0]) if rng is None else rng
    ng = -(-len(rng) // WG)
    partial = empty(be, max(ng, 1), x.dtype)
    reduce_groups(be, WG)(partial, x, OPS[op], ndrange=(rng,))
    while ng > 1:
        x, ng = partial, -(-ng // WG)
        partial = empty(be, ng, x.dtype)
        reduce_groups(be, WG)(partial, x, OPS[op], ndrange=x.shape[0])
    return get(partial)[0]


# --- test_algorithm.py: elementwise -----------------------------------------------------------

@tk.kernel
def lin_comb(a, x: tk.Const, b, y: tk.Const, z):
    i = tk.index()
    z[i] = a * x[i] + b * y[i]


def test_elwise_kernel(be):
    """test_elwise_kernel: z = a*x + b*y with Python int coefficients (weak: float32 stays)."""
    x, y = RNG.random(50, np.float32), RNG.random(50, np.float32)
    z = empty(be, 50, np.float32)
    lin_comb(be)(5, put(be, x), 6, put(be, y), z, ndrange=50)
    np.testing.assert_array_equal(get(z), np.float32(5) * x + np.float32(6) * y)


@tk.kernel
def add_one_opt(out, inp: tk.Const, add_one: tk.constexpr):
    i = tk.index()
    if add_one:
        out[i] = inp[i] + 1
    else:
        out[i] = inp[i]


@pytest.mark.parametrize("flag", [True, False])
def test_elwise_kernel_with_options(be, flag):
    """test_elwise_kernel_with_options: ``-D ADD_ONE`` becomes a constexpr flag."""
    x = RNG.random(50, np.float32)
    out = empty(be, 50, np.float32)
    add_one_opt(be)(out, put(be, x), flag, ndrange=50)
    np.testing.assert_array_equal(get(out), x + np.float32(flag))


@tk.kernel
def set_to_seven(z):
    (i,) = tk.index(tk.Global, tk.Cartesian)
    z[i] = 7


def test_ranged_elwise_kernel(be):
    """test_ranged_elwise_kernel: the ElementwiseKernel's ``slice=`` is a ranged ndrange
    (forward, strided, backward, to one before the end)."""
    n = 3000 if interp(be) else 50000
    for slc in [slice(5, n // 2), slice(5, n // 2, 17), slice(n // 3, 5, -1), slice(n // 5, -1)]:
        a = empty(be, n, np.float32)
        set_to_seven(be)(a, ndrange=(range(*slc.indices(n)),))
        want = np.zeros(n, np.float32)
        want[slc] = 7
        np.testing.assert_array_equal(get(a), want, err_msg=str(slc))


@tk.kernel
def take(out, a: tk.Const, idx: tk.Const):
    i = tk.index()
    out[i] = a[idx[i]]


def test_take(be):
    """test_take: ``a[idx]`` with a uint32 index array into arange(0, 3m, 3)."""
    m = 2000 if interp(be) else 100000
    a = np.arange(0, 3 * m, 3, dtype=np.float32)
    idx = np.arange(0, m, 2, dtype=np.uint32)
    out = empty(be, idx.size, np.float32)
    take(be)(out, put(be, a), put(be, idx), ndrange=idx.size)
    np.testing.assert_array_equal(get(out), 3 * idx)


@tk.kernel
def arange_k(a, start, step):
    i = tk.index()
    a[i] = start + i * step


@tk.kernel
def reverse_k(out, a: tk.Const):
    i = tk.index()
    out[i] = a[a.shape[0] - 1 - i]


def test_arange_and_reverse(be):
    """test_arange / test_reverse: arange(n) as float32, and its reverse."""
    n = 5000
    a = empty(be, n, np.float32)
    arange_k(be)(a, 0, 1, ndrange=n)
    np.testing.assert_array_equal(get(a), np.arange(n, dtype=np.float32))
    r = empty(be, n, np.float32)
    reverse_k(be)(r, a, ndrange=n)
    np.testing.assert_array_equal(get(r), np.arange(n, dtype=np.float32)[::-1])


@tk.kernel
def np_max_min(mx, mn, a: tk.Const, b: tk.Const):
    """NumPy's maximum/minimum: a NaN in either operand propagates."""
    i = tk.index()
    x = a[i]
    y = b[i]
    if math.isnan(x) or math.isnan(y):
        mx[i] = x + y
        mn[i] = x + y
    else:
        mx[i] = max(x, y)
        mn[i] = min(x, y)


def test_if_positive_maximum_minimum(be):
    """test_if_positive: elementwise maximum and minimum of two random arrays, exactly."""
    n = 2000 if interp(be) else 20000
    a, b = RNG.random(n, np.float32), RNG.random(n, np.float32)
    mx, mn = empty(be, n, np.float32), empty(be, n, np.float32)
    np_max_min(be)(mx, mn, put(be, a), put(be, b), ndrange=n)
    np.testing.assert_array_equal(get(mx), np.maximum(a, b))
    np.testing.assert_array_equal(get(mn), np.minimum(a, b))


@pytest.mark.parametrize("sb", [np.nan, np.inf, -np.inf, None])
@pytest.mark.parametrize("sa", [np.nan, np.inf, -np.inf])
def test_branch_operations_on_nans(be, sa, sb):
    """test_branch_operations_on_nans: maximum/minimum with NaN and infinities as NumPy's."""
    def sb_or(v):
        return v if sb is None else sb
    dt = fdt(be)
    x = np.array([sa, sb_or(1.), sa, sb_or(2.), sb_or(3.)], dt)
    y = np.array([sa, sa, sb_or(1.), sb_or(3.), sb_or(2.)], dt)
    mx, mn = empty(be, 5, dt), empty(be, 5, dt)
    np_max_min(be)(mx, mn, put(be, x), put(be, y), ndrange=5)
    np.testing.assert_array_equal(get(mx), np.maximum(x, y))
    np.testing.assert_array_equal(get(mn), np.minimum(x, y))


@tk.kernel
def take_put(buf, dest_idx: tk.Const, read_map: tk.Const, src: tk.Const, field: tk.constexpr):
    f, j = tk.index(tk.Global, tk.Cartesian)
    buf[f * field + dest_idx[j]] = src[f * field + read_map[j]]


@pytest.mark.parametrize("n", [5, 17, 333])
def test_take_put(be, n):
    """test_take_put (multi_take_put): per field f, buf[f*8 + dest[j]] = src[f*8 + read_map[j]];
    upstream only runs it, here the scattered values are checked."""
    field = 8
    src = RNG.random(n * field, np.float32)
    dest = np.array([0, 1, 2, 3, 4, 5, 6, 7], np.uint32)
    rmap = np.array([7, 6, 5, 4, 3, 2, 1, 0], np.uint32)
    buf = empty(be, n * field, np.float32)
    take_put(be)(buf, put(be, dest), put(be, rmap), put(be, src), field, ndrange=(n, field))
    np.testing.assert_array_equal(get(buf), src.reshape(n, field)[:, ::-1].ravel())


@tk.kernel
def astype_k(out, a: tk.Const):
    i = tk.index()
    out[i] = a[i]


def test_astype(be):
    """test_astype: float32 -> float64 is exact, float64 -> float32 rounds as NumPy's astype."""
    need(be, np.float64)
    a = RNG.random(2000, np.float32)
    out = empty(be, 2000, np.float64)
    astype_k(be)(out, put(be, a), ndrange=2000)
    np.testing.assert_array_equal(get(out), a.astype(np.float64))
    b = RNG.random(2000) * 1e3
    out = empty(be, 2000, np.float32)
    astype_k(be)(out, put(be, b), ndrange=2000)
    np.testing.assert_array_equal(get(out), b.astype(np.float32))


# --- test_algorithm.py: reductions ------------------------------------------------------------

def test_sum(be):
    """test_sum: float32 sums over slices (whole, interior, open-ended, strided, empty) as
    ranged ndranges; relative error 1e-4 as upstream."""
    n = 20000 if interp(be) else 200000
    a = RNG.random(n, np.float32)
    ad = put(be, a)
    for slc in [slice(None), slice(1000, 3000), slice(1000, -300), slice(1000, None),
                slice(1000, None, 3), slice(1000, 1000)]:
        want = np.sum(a[slc], dtype=np.float64)
        got = reduce(be, ad, "add", range(*slc.indices(n)))
        assert abs(got - want) / (abs(want) or 1) < 1e-4, (slc, got, want)


@tk.kernel
def sum_of_index(partial):
    i = tk.index()
    r = tk.group_reduce(tk.int32(i), "add")
    if tk.index(tk.Local, tk.Linear) == 0:
        partial[tk.index(tk.Group, tk.Linear)] = r


def test_sum_without_data(be):
    """test_sum_without_data: map_expr ``i`` with no arguments sums to n(n-1)/2 in int32."""
    n = 2000
    partial = empty(be, -(-n // WG), np.int32)
    sum_of_index(be, WG)(partial, ndrange=n)
    assert reduce(be, partial) == n * (n - 1) // 2


@tk.kernel
def scaled_dot_groups(partial, z, x: tk.Const, y: tk.Const):
    i = tk.index()
    r = tk.group_reduce(z * x[i] * y[i], "add")
    if tk.index(tk.Local, tk.Linear) == 0:
        partial[tk.index(tk.Group, tk.Linear)] = r


def test_reduction_not_first_argument(be):
    """test_reduction_not_first_argument: a scalar before the arrays, map z*x[i]*y[i]."""
    n = 400
    x = np.arange(n, dtype=np.float32)
    partial = empty(be, -(-n // WG), np.float32)
    scaled_dot_groups(be, WG)(partial, 0.1, put(be, x), put(be, x), ndrange=n)
    want = 0.1 * np.sum(np.arange(n, dtype=np.float64) ** 2)
    assert abs(reduce(be, partial) - want) / want < 1e-6


def _rand(dtype, n, lo=0, hi=None):
    if np.dtype(dtype).kind == "f":
        return RNG.random(n).astype(dtype)
    return RNG.integers(lo, hi or 2 ** 31 - 1, n, dtype=dtype)


@pytest.mark.parametrize("what", ["min", "max"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_minmax(be, dtype, what):
    """test_minmax: the exact min / max of random float64, float32 and int32 data."""
    need(be, dtype)
    n = 20000 if interp(be) else 200000
    a = _rand(dtype, n)
    assert reduce(be, put(be, a), what) == getattr(np, what)(a)


@tk.kernel
def subset_min_groups(partial, idx: tk.Const, a: tk.Const):
    j = tk.index()
    r = tk.group_reduce(a[idx[j]], "min")
    if tk.index(tk.Local, tk.Linear) == 0:
        partial[tk.index(tk.Group, tk.Linear)] = r


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_subset_minmax(be, dtype):
    """test_subset_minmax: the min over a[idx] where idx skips every fifth index."""
    need(be, dtype)
    la, gran = (20000 if interp(be) else 200000), 5
    a = _rand(dtype, la)
    idx = np.array([j for j in range(la) if j % gran or j == 0], np.int32)
    assert idx.size == la - la // gran + 1
    a[np.setdiff1d(np.arange(la), idx)] = -1          # below every value of the subset
    partial = empty(be, -(-idx.size // WG), dtype)
    subset_min_groups(be, WG)(partial, put(be, idx), put(be, a), ndrange=idx.size)
    assert reduce(be, partial, "min") == a[idx].min()


@tk.kernel
def dot_groups(partial, a: tk.Const, b: tk.Const):
    i = tk.index()
    r = tk.group_reduce(a[i] * b[i], "add")
    if tk.index(tk.Local, tk.Linear) == 0:
        partial[tk.index(tk.Group, tk.Linear)] = r


@pytest.mark.parametrize("bt", [np.float32, np.float64])
@pytest.mark.parametrize("at", [np.float32, np.float64])
def test_dot(be, at, bt):
    """test_dot (real dtypes): the product is computed in the promoted type."""
    need(be, at)
    need(be, bt)
    n = 20000 if interp(be) else 200000
    a, b = RNG.random(n).astype(at), RNG.random(n).astype(bt)
    rt = np.result_type(at, bt)
    partial = empty(be, -(-n // WG), rt)
    dot_groups(be, WG)(partial, put(be, a), put(be, b), ndrange=n)
    want = np.dot(a.astype(np.float64), b.astype(np.float64))
    assert abs(reduce(be, partial) - want) / want < (1e-12 if rt == np.float64 else 1e-4)


@tk.func
def minmax_from_scalar(v):
    return v, v


@tk.kernel
def minmax_collector(mins, maxs, x: tk.Const):
    i = tk.index()
    lo, hi = minmax_from_scalar(x[i])
    lo = tk.group_reduce(lo, "min")
    hi = tk.group_reduce(hi, "max")
    if tk.index(tk.Local, tk.Linear) == 0:
        g = tk.index(tk.Group, tk.Linear)
        mins[g] = lo
        maxs[g] = hi


def test_struct_reduce(be):
    """test_struct_reduce: a min/max collector (a pair from a @tk.func) over int32 data."""
    n = 20000
    a = RNG.integers(0, 10 ** 6, n, dtype=np.int32)
    ng = -(-n // WG)
    mins, maxs = empty(be, ng, np.int32), empty(be, ng, np.int32)
    minmax_collector(be, WG)(mins, maxs, put(be, a), ndrange=n)
    assert reduce(be, mins, "min") == a.min()
    assert reduce(be, maxs, "max") == a.max()


# --- test_algorithm.py: scans -----------------------------------------------------------------

@pytest.mark.parametrize("inclusive", [True, False], ids=["inclusive", "exclusive"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_scan(be, dtype, inclusive):
    """test_scan: Inclusive/ExclusiveScanKernel(a+b, 0) over upstream's awkward lengths
    (around powers of two of the group size)."""
    need(be, dtype)
    for n in sizes(be, SCAN_SMALL, SCAN_LARGE):
        a = RNG.integers(0, 10, n, dtype=dtype)
        want = np.cumsum(a, dtype=dtype)
        if not inclusive:
            want -= a
        np.testing.assert_array_equal(get(scan(be, put(be, a), "add", inclusive)), want,
                                      err_msg=f"n={n}")


@tk.kernel
def write_back(x, item: tk.Const):
    i = tk.index()
    x[i] = item[i]


def test_scan_in_place_float(be):
    """test_scan_with_vectorargs_with_offsets: a float scan written back into its input; the
    upstream offsets are views of NumPy arrays on the host backends."""
    dt = fdt(be)
    host = np.zeros(30, dt)
    host[10:] = RNG.integers(0, 10, 20)
    want = np.cumsum(host[10:])
    x = host[10:] if be.is_host else put(be, host[10:])
    write_back(be)(x, scan(be, x), ndrange=20)
    np.testing.assert_array_equal(get(x), want)
    if be.is_host:
        assert (host[:10] == 0).all()


@tk.kernel
def index_input(x):
    i = tk.index()
    x[i] = i


def test_index_preservation(be):
    """test_index_preservation: a scan whose operator keeps the later operand (here ``max``
    of the indices) gives every item its own index back, across group carries."""
    for n in sizes(be, SCAN_SMALL, SCAN_LARGE):
        x = empty(be, n, np.int32)
        index_input(be)(x, ndrange=n)
        np.testing.assert_array_equal(get(scan(be, x, "max")), np.arange(n), err_msg=f"n={n}")


@tk.kernel
def head_index(h, flags: tk.Const):
    i = tk.index()
    h[i] = i if flags[i] != 0 or i == 0 else 0


@tk.kernel
def segmented_from_scans(out, a: tk.Const, excl: tk.Const, heads: tk.Const, inclusive: tk.constexpr):
    """Segmented scan = sum scan minus the sum scan at the segment's head."""
    i = tk.index()
    h = heads[i]
    if inclusive:
        out[i] = excl[i] + a[i] - excl[h]
    else:
        out[i] = excl[i] - excl[h]


def segmented_scan(be, a, flags, inclusive):
    n = a.shape[0]
    h = empty(be, n, np.int32)
    head_index(be)(h, flags, ndrange=n)
    heads = scan(be, h, "max")
    excl = scan(be, a, "add", inclusive=False)
    out = empty(be, n, a.dtype)
    segmented_from_scans(be)(out, a, excl, heads, inclusive, ndrange=n)
    return out


def _segmented_reference(a, bounds, inclusive):
    want = a.copy()
    starts = [0] + sorted(bounds)
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else None
        c = np.cumsum(a[s:e], dtype=a.dtype)
        want[s:e] = c if inclusive else c - a[s:e]
    return want


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_segmented_scan(be, inclusive):
    """test_segmented_scan: GenericScanKernel with ``across_seg_boundary ? b : a+b`` over
    uint8 segment flags, fixed boundaries for short arrays and random ones (including one at
    1028 past a group boundary) for long ones."""
    for n in sizes(be, [10, 17] + SCAN_SMALL[1:], SCAN_LARGE):
        a = RNG.integers(0, 10, n, dtype=np.int32)
        if n < 20:
            cases = [[0, 9], [0, 3], [4, 6]]
        else:
            cases = []
            for _ in range(3):
                b = sorted(RNG.integers(0, n, max(2, min(100, int(0.4 * n)))).tolist())
                cases.append(([1028] if n >= 1029 else []) + b)
        ad = put(be, a)
        for bounds in cases:
            flags = np.zeros(n, np.uint8)
            flags[bounds] = 1
            got = get(segmented_scan(be, ad, put(be, flags), inclusive))
            np.testing.assert_array_equal(got, _segmented_reference(a, bounds, inclusive),
                                          err_msg=f"n={n} bounds={bounds}")


# --- test_algorithm.py: compaction (copy_if, partition, unique) -------------------------------

@tk.kernel
def pred_gt(flags, a: tk.Const, crit):
    i = tk.index()
    flags[i] = 1 if a[i] > crit else 0


@tk.kernel
def pred_unique(flags, a: tk.Const):
    i = tk.index()
    flags[i] = 1 if i == 0 or a[i] != a[i - 1] else 0


@tk.kernel
def scatter_selected(out, rest, count, a: tk.Const, flags: tk.Const, pos: tk.Const):
    """Stable partition by the exclusive scan ``pos`` of ``flags``."""
    i = tk.index()
    n = a.shape[0]
    total = pos[n - 1] + flags[n - 1]
    if flags[i] != 0:
        out[pos[i]] = a[i]
    else:
        rest[i - pos[i]] = a[i]
    if i == n - 1:
        count[0] = total


def compact(be, a, flags):
    n = a.shape[0]
    pos = scan(be, flags, "add", inclusive=False)
    out, rest, count = empty(be, n, a.dtype), empty(be, n, a.dtype), empty(be, 1, np.int32)
    scatter_selected(be)(out, rest, count, a, flags, pos, ndrange=n)
    c = int(get(count)[0])
    return get(out)[:c], get(rest)[:n - c], c


def test_copy_if_and_partition(be):
    """test_copy_if / test_partition: the elements > 300 (and the rest), in order, and their
    count, from an exclusive scan of the predicate."""
    for n in sizes(be, SCAN_SMALL, SCAN_LARGE):
        a = RNG.integers(0, 1000, n, dtype=np.int32)
        ad = put(be, a)
        flags = empty(be, n, np.int32)
        pred_gt(be)(flags, ad, np.int32(300), ndrange=n)
        sel, rest, c = compact(be, ad, flags)
        assert c == (a > 300).sum()
        np.testing.assert_array_equal(sel, a[a > 300])
        np.testing.assert_array_equal(rest, a[a <= 300])


def test_unique(be):
    """test_unique: the distinct values of a sorted array and their count."""
    for n in sizes(be, SCAN_SMALL, SCAN_LARGE):
        a = np.sort(RNG.integers(0, 1000, n, dtype=np.int32))
        ad = put(be, a)
        flags = empty(be, n, np.int32)
        pred_unique(be)(flags, ad, ndrange=n)
        sel, _, c = compact(be, ad, flags)
        np.testing.assert_array_equal(sel, np.unique(a))
        assert c == np.unique(a).size


# --- test_algorithm.py: sorting ---------------------------------------------------------------

@tk.kernel
def bit_flags(f, keys: tk.Const, bit):
    i = tk.index()
    f[i] = 1 - ((keys[i] >> bit) & 1)


@tk.kernel
def radix_scatter(out, keys: tk.Const, f: tk.Const, pos: tk.Const):
    i = tk.index()
    n = keys.shape[0]
    zeros = pos[n - 1] + f[n - 1]
    if f[i] != 0:
        out[pos[i]] = keys[i]
    else:
        out[zeros + i - pos[i]] = keys[i]


def radix_sort(be, keys, key_bits):
    n = keys.shape[0]
    for bit in range(key_bits):
        f = empty(be, n, keys.dtype)
        bit_flags(be)(f, keys, bit, ndrange=n)
        out = empty(be, n, keys.dtype)
        radix_scatter(be)(out, keys, f, scan(be, f, "add", inclusive=False), ndrange=n)
        keys = out
    return keys


def test_radix_sort(be):
    """test_sort (RadixSort, key_bits=16): int32 keys in [0, 2**16), one bit per pass, each
    pass a stable split by an exclusive scan."""
    for n in sizes(be, [10, 2 ** 6 + 1], [2 ** 8 + 5, 2 ** 12 + 5]):
        a = RNG.integers(0, 2 ** 16, n, dtype=np.int32)
        np.testing.assert_array_equal(get(radix_sort(be, put(be, a), 16)), np.sort(a))


@tk.kernel
def bitonic_step(a, idx, k, j):
    """One compare-exchange step of a bitonic sort along axis 1, carrying ``idx`` along; ties
    are ordered by ``idx`` so that the permutation is well defined."""
    b, i, c = tk.index(tk.Global, tk.Cartesian)
    partner = i ^ j
    if partner > i:
        x = a[b, i, c]
        y = a[b, partner, c]
        xi = idx[b, i, c]
        yi = idx[b, partner, c]
        greater = x > y or (x == y and xi > yi)
        if greater == ((i & k) == 0):
            a[b, i, c] = y
            a[b, partner, c] = x
            idx[b, i, c] = yi
            idx[b, partner, c] = xi


def bitonic_sort(be, a, idx):
    size = a.shape[1]
    k = 2
    while k <= size:
        j = k // 2
        while j >= 1:
            bitonic_step(be)(a, idx, k, j, ndrange=a.shape)
            j //= 2
        k *= 2


@pytest.mark.parametrize("size", [4, 16, 512])
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_bitonic_sort(be, dtype, size):
    """test_bitonic_sort: shape (2, size, 3) sorted along axis 1; test_bitonic_argsort: the
    index array carried along gives a permutation that sorts the data."""
    need(be, dtype)
    if interp(be) and size > 16 and dtype is not np.int32:
        pytest.skip("the interpreter sorts 512 only for int32 (45 steps of 3072 items: 10 s each)")
    s = RNG.integers(0, 239482333, (2, size, 3)).astype(dtype)
    s[0, : size // 2, 0] = s[0, size // 2:, 0]                       # ties
    idx = np.broadcast_to(np.arange(size, dtype=np.int32)[None, :, None], s.shape).copy()
    ad, idd = put(be, s), put(be, idx)
    bitonic_sort(be, ad, idd)
    np.testing.assert_array_equal(get(ad), np.sort(s, axis=1))
    perm = get(idd)
    np.testing.assert_array_equal(np.take_along_axis(s, perm, axis=1), np.sort(s, axis=1))
    np.testing.assert_array_equal(np.sort(perm, axis=1), idx)


# --- test_algorithm.py: list builders and key/value sorter ------------------------------------

@tk.kernel
def list_counts(counts, modulus: tk.constexpr):
    i = tk.index()
    counts[i] = i % modulus


@tk.kernel
def list_fill(lists, starts: tk.Const, counts: tk.Const):
    i = tk.index()
    c = counts[i]
    for j in range(c):
        lists[starts[i] + j] = c


def test_list_builder(be):
    """test_list_builder: item i appends ``i % 4`` copies of ``i % 4``: a count pass, an
    exclusive scan for the starts, a fill pass."""
    n = 2000
    counts = empty(be, n, np.int32)
    list_counts(be)(counts, 4, ndrange=n)
    starts = scan(be, counts, "add", inclusive=False)
    total = int(get(starts)[-1] + get(counts)[-1])
    assert total == 3000
    lists = empty(be, total, np.int32)
    list_fill(be)(lists, starts, counts, ndrange=n)
    lst = get(lists)
    np.testing.assert_array_equal(lst[-6:], [1, 2, 2, 3, 3, 3])
    np.testing.assert_array_equal(lst, np.repeat(np.arange(n) % 4, np.arange(n) % 4))


@tk.kernel
def fifth_counts(counts, nonempty):
    i = tk.index()
    c = i // 5 if i % 5 == 0 else 0
    counts[i] = c
    nonempty[i] = 1 if c > 0 else 0


@tk.kernel
def fifth_fill(l1, l2, l3, starts: tk.Const, counts: tk.Const):
    i = tk.index()
    for j in range(counts[i]):
        l1[starts[i] + j] = j
        l2[starts[i] + j] = j + 1
        l3[starts[i] + j] = j


def test_list_builder_with_empty_elim(be):
    """test_list_builder_with_empty_elim: three lists; empty lists eliminated (a compaction of
    the item indices with a non-empty list) for the first two."""
    n = 1000
    counts, nonempty = empty(be, n, np.int32), empty(be, n, np.int32)
    fifth_counts(be)(counts, nonempty, ndrange=n)
    starts = scan(be, counts, "add", inclusive=False)
    total = int(get(starts)[-1] + get(counts)[-1])
    assert total == 19900
    l1, l2, l3 = (empty(be, total, np.int32) for _ in range(3))
    fifth_fill(be)(l1, l2, l3, starts, counts, ndrange=n)
    items = empty(be, n, np.int32)
    index_input(be)(items, ndrange=n)
    nonempty_idx, _, c = compact(be, items, nonempty)
    st = get(starts)
    np.testing.assert_array_equal(nonempty_idx[:5], [5, 10, 15, 20, 25])
    np.testing.assert_array_equal(st[nonempty_idx][:5], [0, 1, 3, 6, 10])
    np.testing.assert_array_equal(get(l1)[:6], [0, 0, 1, 0, 1, 2])
    np.testing.assert_array_equal(get(l2)[:6], [1, 1, 2, 1, 2, 3])
    np.testing.assert_array_equal(st[:10], [0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(get(l3)[:6], [0, 0, 1, 0, 1, 2])
    assert c == n // 5 - 1


@tk.kernel
def histogram(counts, keys: tk.Const):
    i = tk.index()
    tk.atomic_add(counts, keys[i], 1)


@tk.kernel
def kv_place(lists, cursor, starts: tk.Const, keys: tk.Const, values: tk.Const):
    i = tk.index()
    k = keys[i]
    lists[starts[k] + tk.atomic_add(cursor, k, 1)] = values[i]


def test_key_value_sorter(be):
    """test_key_value_sorter: values grouped by key (histogram, exclusive scan for the starts,
    an atomic cursor per key); each key's values compared as sets, as upstream."""
    n, nkeys = (3000, 200) if interp(be) else (10 ** 5, 2000)
    vdt = np.int64 if be.supports(np.dtype(np.int64)) else np.int32
    keys = RNG.integers(0, nkeys, n, dtype=np.int32)
    values = RNG.integers(0, n, n).astype(vdt)
    kd = put(be, keys)
    counts = empty(be, nkeys + 1, np.int32)
    histogram(be)(counts, kd, ndrange=n)
    starts = scan(be, counts, "add", inclusive=False)
    lists, cursor = empty(be, n, vdt), empty(be, nkeys, np.int32)
    kv_place(be)(lists, cursor, starts, kd, put(be, values), ndrange=n)
    st, lst = get(starts), get(lists)
    assert st[-1] == n
    for k in range(nkeys):
        np.testing.assert_array_equal(np.sort(lst[st[k]:st[k + 1]]), np.sort(values[keys == k]))


# --- test_array.py: elementwise arithmetic, comparisons, bitwise ------------------------------

_GEN = os.path.join(tempfile.gettempdir(), "tinykernels_ported_suites_pyopencl")
SYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "and_": "&", "or_": "|", "xor": "^",
       "eq": "==", "ne": "!=", "le": "<=", "lt": "<", "ge": ">=", "gt": ">"}


def binop(name, form):
    """``out[i] = a[i] op b[i]`` (form "aa"), ``a[i] op s`` ("as"), ``s op a[i]`` ("sa"), or the
    in-place ``a[i] op= b[i]`` ("ia") / ``a[i] op= s`` ("is")."""
    o = SYM[name]
    body = {"aa": f"out[i] = a[i] {o} b[i]", "as": f"out[i] = a[i] {o} b",
            "sa": f"out[i] = b {o} a[i]", "ia": f"a[i] {o}= b[i]", "is": f"a[i] {o}= b"}[form]
    params = ["a", "b"] if form[0] == "i" else ["out", "a", "b"]
    return make_kernel(_GEN, f"{name}_{form}", params, [body])


def wide(be, dtype):
    """The widest array type of ``dtype``'s kind on ``be``: a result stored there keeps the type
    it was computed in, so a wrongly promoted computation shows."""
    k = np.dtype(dtype).kind
    if k == "b":
        return np.bool_
    if k == "f":
        return fdt(be)
    return np.int64 if be.supports(np.dtype(np.int64)) else np.int32


def launch(be, k, n, *args):
    k(be)(*args, ndrange=n)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float32])
def test_div_type_matches_numpy(be, dtype):
    """test_div_type_matches_numpy: (4a) / (3a) is float64 for integers (float32 without
    float64), float32 for float32."""
    need(be, dtype)
    a = (np.arange(10) + 1).astype(dtype)
    k = make_kernel(_GEN, "div43", ["out", "a"], ["out[i] = (4 * a[i]) / (3 * a[i])"])
    out = empty(be, 10, fdt(be))
    launch(be, k, 10, out, put(be, a))
    want = (4 * a) / (3 * a)
    if not be.supports_float64:
        want = np.float32(4) * a.astype(np.float32) / (np.float32(3) * a.astype(np.float32))
    np.testing.assert_array_equal(get(out), want.astype(fdt(be)))


DIV_DTYPES = [np.uint8, np.uint16, np.uint32, np.int8, np.int16, np.int32, np.float32, np.float64]


def _np_or_f32(be, fn, *xs):
    """NumPy's result, or on a backend without float64 the float32 computation it documents
    for results NumPy gives in float64."""
    want = fn(*xs)
    if not be.supports_float64 and want.dtype == np.float64:
        want = fn(*(np.asarray(x).astype(np.float32) if np.asarray(x).dtype.kind in "iuf" else x
                    for x in xs))
    return want


@pytest.mark.parametrize("ds", DIV_DTYPES)
@pytest.mark.parametrize("da", DIV_DTYPES)
def test_divide_scalar(be, da, ds):
    """test_divide_scalar: a / s and s / a for a NumPy scalar s = ds(40) (strong, as in
    NumPy), every pair of upstream's real dtypes; the quotient is computed in NumPy's type."""
    need(be, da)
    need(be, ds)
    a = np.array([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]).astype(da)
    s = ds(40)
    for form, fn in (("as", lambda x, y: x / y), ("sa", lambda x, y: y / x)):
        want = _np_or_f32(be, fn, a, s)
        out = empty(be, 10, wide(be, want.dtype))
        launch(be, binop("truediv", form), 10, out, put(be, a), s)
        np.testing.assert_array_equal(get(out), want.astype(out.dtype), err_msg=form)


@pytest.mark.parametrize("db", [np.float32, np.float64])
@pytest.mark.parametrize("da", [np.float32, np.float64])
def test_divide_array(be, da, db):
    """test_divide_array (real dtypes): a / b and b / a, promoted as NumPy."""
    need(be, da)
    need(be, db)
    a = np.array([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]).astype(da)
    b = np.full(10, 10).astype(db)
    b[1::2] = 3
    for x, y in ((a, b), (b, a)):
        out = empty(be, 10, fdt(be))
        launch(be, binop("truediv", "aa"), 10, out, put(be, x), put(be, y))
        np.testing.assert_array_equal(get(out), (x / y).astype(fdt(be)))


@pytest.mark.parametrize("ds", DIV_DTYPES)
@pytest.mark.parametrize("da", DIV_DTYPES)
def test_divide_inplace(be, da, ds):
    """test_divide_inplace_scalar / _array: ``a[i] /= s`` and ``a[i] /= b[i]``. NumPy refuses
    ``a /= s`` on a whole integer array (the float quotient cannot be cast back); an element
    assignment, which is what the kernel writes, casts it (truncating) as NumPy's
    ``a[i] /= s`` on one element does: the reference is that loop."""
    need(be, da)
    need(be, ds)
    a = np.array([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]).astype(da)
    s = ds(40)
    b = np.full(10, 40).astype(ds)
    want_s, want_b = a.copy(), a.copy()
    with np.errstate(all="ignore"):
        for i in range(10):
            want_s[i] = _np_or_f32(be, lambda x, y: x / y, a[i], s)
            want_b[i] = _np_or_f32(be, lambda x, y: x / y, a[i], b[i])
    x = put(be, a)
    launch(be, binop("truediv", "is"), 10, x, s)
    np.testing.assert_array_equal(get(x), want_s)
    x = put(be, a)
    launch(be, binop("truediv", "ia"), 10, x, put(be, b))
    np.testing.assert_array_equal(get(x), want_b)


@pytest.mark.parametrize(("da", "db"), [(np.float32, np.float32), (np.float32, np.int32),
                                        (np.int32, np.int32), (np.int64, np.int32),
                                        (np.int64, np.uint32)])
def test_subtract_array(be, da, db):
    """test_subtract_array: a - b and b - a over upstream's mixed dtype pairs (float32 - int32
    is float64, int64 - uint32 is int64)."""
    need(be, da)
    need(be, db)
    a = np.arange(1, 11).astype(da)
    b = (10 * np.arange(1, 11)).astype(db)
    for x, y in ((a, b), (b, a)):
        want = _np_or_f32(be, lambda p, q: p - q, x, y)
        out = empty(be, 10, wide(be, want.dtype))
        launch(be, binop("sub", "aa"), 10, out, put(be, x), put(be, y))
        np.testing.assert_array_equal(get(out), want.astype(out.dtype))


@pytest.mark.parametrize("n", [10, 50000])
def test_add_sub_mul_scalar_and_array(be, n):
    """test_multiply / test_multiply_array / test_addition_array / test_addition_scalar /
    test_subtract_scalar: float32 with a Python int (weak: float32 stays) on either side."""
    n = min(n, 5000) if interp(be) else n
    a = (RNG.random(n) * 100).astype(np.float32)
    for name, fn in (("mul", operator.mul), ("add", operator.add), ("sub", operator.sub)):
        for form, s in (("as", 2), ("sa", 7), ("as", 7)):
            out = empty(be, n, fdt(be))
            launch(be, binop(name, form), n, out, put(be, a), s)
            want = fn(a, s) if form == "as" else fn(s, a)
            assert want.dtype == np.float32
            np.testing.assert_array_equal(get(out), want.astype(fdt(be)), err_msg=f"{name} {form}")
        out = empty(be, n, fdt(be))
        launch(be, binop(name, "aa"), n, out, put(be, a), put(be, a))
        np.testing.assert_array_equal(get(out), fn(a, a).astype(fdt(be)))


@tk.kernel
def pow_k(p, q, a: tk.Const):
    i = tk.index()
    p[i] = a[i] ** a[i]
    q[i] = a[i] ** 2


def test_pow_array_and_number(be):
    """test_pow_array / test_pow_number: float32 a ** a (a math function: within 2 ulp) and
    a ** 2 (a square, exact)."""
    a = np.arange(1, 11).astype(np.float32)
    p, q = empty(be, 10, np.float32), empty(be, 10, np.float32)
    pow_k(be)(p, q, put(be, a), ndrange=10)
    np.testing.assert_allclose(get(p), a.astype(np.float64) ** a, rtol=2 * EPS32)
    np.testing.assert_array_equal(get(q), a ** 2)


BIT_DTYPES = [np.int64, np.int32, np.int16, np.int8]


@pytest.mark.parametrize("db", BIT_DTYPES)
@pytest.mark.parametrize("da", BIT_DTYPES)
def test_bitwise(be, da, db):
    """test_bitwise: &, |, ^ between arrays, with a Python int on either side, in place, and ~,
    on every pair of signed integer types (values from the int32 range, wrapped as
    ``astype``); where NumPy refuses the Python int (OverflowError) the case is skipped, as
    upstream does (tinykernels wraps it, docs/language.md)."""
    need(be, da)
    need(be, db)
    i32 = np.iinfo(np.int32)
    a = RNG.integers(i32.min, i32.max + 1, 16, dtype=np.int64).astype(da)
    b = RNG.integers(i32.min, i32.max + 1, 16, dtype=np.int64).astype(db)
    s = int(np.int64(RNG.integers(i32.min, i32.max + 1)).astype(db))
    for name in ("and_", "or_", "xor"):
        fn = getattr(operator, name)
        cases = [("aa", fn(a, b), b)]
        for form, f in (("as", lambda: fn(a, s)), ("sa", lambda: fn(s, a))):
            try:
                cases.append((form, f(), s))
            except OverflowError:
                pass
        for form, want, other in cases:
            out = empty(be, 16, wide(be, want.dtype))
            launch(be, binop(name, form), 16, out, put(be, a),
                   put(be, other) if form == "aa" else other)
            np.testing.assert_array_equal(get(out), want.astype(out.dtype), err_msg=f"{name} {form}")
        # a[i] op= b[i] casts the result back to a's type, as an element assignment does
        # (NumPy's whole-array a op= b refuses the narrowing cast instead)
        x = put(be, a)
        launch(be, binop(name, "ia"), 16, x, put(be, b))
        np.testing.assert_array_equal(get(x), fn(a, b).astype(da), err_msg=f"i{name}")
    k = make_kernel(_GEN, "invert", ["out", "a"], ["out[i] = ~a[i]"])
    out = empty(be, 16, da)
    launch(be, k, 16, out, put(be, a))
    np.testing.assert_array_equal(get(out), ~a)


@pytest.mark.parametrize("name", ["eq", "ne", "le", "lt", "ge", "gt"])
def test_comparisons(be, name):
    """test_comparisons: array op array, array op 0, 0 op array, and 0 op (a bool result)."""
    n = 2000
    a, b = RNG.random(n, np.float32), RNG.random(n, np.float32)
    a[:100] = b[:100]
    a[100:200] = 0
    fn = getattr(operator, name)
    out = empty(be, n, np.bool_)
    launch(be, binop(name, "aa"), n, out, put(be, a), put(be, b))
    res = get(out)
    np.testing.assert_array_equal(res, fn(a, b))
    for form, want in (("as", fn(a, 0)), ("sa", fn(0, b))):
        out = empty(be, n, np.bool_)
        launch(be, binop(name, form), n, out, put(be, a if form == "as" else b), 0)
        np.testing.assert_array_equal(get(out), want, err_msg=form)
    out = empty(be, n, np.bool_)
    launch(be, binop(name, "sa"), n, out, put(be, res), 0)
    np.testing.assert_array_equal(get(out), fn(0, res))


@tk.kernel
def mul_k(out, a: tk.Const, b: tk.Const):
    i = tk.index()
    out[i] = a[i] * b[i]


def test_nan_arithmetic(be):
    """test_nan_arithmetic: a product is NaN exactly where an operand is."""
    n = 1 << 16
    a, b = RNG.standard_normal(n, np.float32), RNG.standard_normal(n, np.float32)
    a[RNG.integers(0, n, n // 10)] = np.nan
    b[RNG.integers(0, n, n // 10)] = np.nan
    out = empty(be, n, np.float32)
    mul_k(be)(out, put(be, a), put(be, b), ndrange=n)
    np.testing.assert_array_equal(np.isnan(get(out)), np.isnan(a * b))
    np.testing.assert_array_equal(get(out), a * b)


@tk.kernel
def diff_k(out, a: tk.Const):
    i = tk.index()
    out[i] = a[i + 1] - a[i]


def test_diff(be):
    """test_diff: a[1:] - a[:-1]."""
    a = RNG.random(20000, np.float32)
    out = empty(be, a.size - 1, np.float32)
    diff_k(be)(out, put(be, a), ndrange=a.size - 1)
    np.testing.assert_array_equal(get(out), np.diff(a))


@tk.kernel
def any_all_groups(anyp, allp, a: tk.Const):
    i = tk.index()
    p = a[i] != 0
    s = tk.group_reduce(p, "or")
    e = tk.group_reduce(p, "and")
    if tk.index(tk.Local, tk.Linear) == 0:
        g = tk.index(tk.Group, tk.Linear)
        anyp[g] = s
        allp[g] = e


def _any_all(be, a):
    n = a.shape[0]
    ng = -(-n // WG)
    anyp, allp = empty(be, ng, np.int32), empty(be, ng, np.int32)
    any_all_groups(be, WG)(anyp, allp, a, ndrange=n)
    return bool(reduce(be, anyp, "max")), bool(reduce(be, allp, "min"))


def test_any_all(be):
    """test_any_all: int8 zeros, one element set, then all ones."""
    n = 20000
    a = np.zeros(n, np.int8)
    assert _any_all(be, put(be, a)) == (False, False)
    a[15213] = 1
    assert _any_all(be, put(be, a)) == (True, False)
    assert _any_all(be, put(be, np.ones(n, np.int8))) == (True, True)


@tk.kernel
def logical_k(land, lor, lnot, x: tk.Const, y: tk.Const):
    i = tk.index(tk.Global, tk.Cartesian)
    land[i] = x[i] and y[i]
    lor[i] = x[i] or y[i]
    lnot[i] = not x[i]


@tk.kernel
def logical_s(land, lor, x: tk.Const, s):
    i = tk.index(tk.Global, tk.Cartesian)
    land[i] = x[i] and s
    lor[i] = x[i] or s


def test_logical_and_or_not(be):
    """test_logical_and_or / test_logical_not: against random, zero and one arrays and the
    scalars 1.0 and 0.0; the results are bools, as NumPy's."""
    dt = fdt(be)
    x = RNG.random((10, 4)).astype(dt)
    x[0] = 0
    for y in (RNG.random((10, 4)).astype(dt), np.zeros((10, 4), dt), np.ones((10, 4), dt)):
        outs = [empty(be, (10, 4), np.bool_) for _ in range(3)]
        logical_k(be)(*outs, put(be, x), put(be, y), ndrange=(10, 4))
        for o, want in zip(outs, (np.logical_and(x, y), np.logical_or(x, y), np.logical_not(x))):
            np.testing.assert_array_equal(get(o), want)
    for s in (1.0, 0.0):
        outs = [empty(be, (10, 4), np.bool_) for _ in range(2)]
        logical_s(be)(*outs, put(be, x), s, ndrange=(10, 4))
        np.testing.assert_array_equal(get(outs[0]), np.logical_and(x, s))
        np.testing.assert_array_equal(get(outs[1]), np.logical_or(x, s))


# --- test_array.py: reductions with an initial value and NaNs ---------------------------------

@tk.kernel
def np_reduce_groups(partial, x: tk.Const, op: tk.constexpr):
    """NumPy's sum / max / min per group: a NaN anywhere makes the result NaN (group_reduce's
    max and min leave NaNs out, see the module docstring)."""
    (i,) = tk.index(tk.Global, tk.Cartesian)
    v = x[i]
    nan = tk.group_reduce(math.isnan(v), "or")
    if op == ADD:
        r = tk.group_reduce(v, "add")
    elif op == MAX:
        r = tk.group_reduce(v, "max")
    else:
        r = tk.group_reduce(v, "min")
    if tk.index(tk.Local, tk.Linear) == 0:
        partial[tk.index(tk.Group, tk.Linear)] = math.nan if nan else r


@tk.kernel
def fold_initial(out, partial: tk.Const, initial, op: tk.constexpr):
    """The initial value folded in, NaN first (NumPy: ``max(nan, 5) = nan``)."""
    r = initial
    for g in range(partial.shape[0]):
        v = partial[g]
        if op == ADD:
            r = r + v
        elif math.isnan(v) or math.isnan(r):
            r = v + r
        elif op == MAX:
            r = max(r, v)
        else:
            r = min(r, v)
    out[0] = r


def np_reduce(be, x, op, initial):
    ng = -(-x.shape[0] // WG)
    partial = empty(be, ng, x.dtype)
    if ng:
        np_reduce_groups(be, WG)(partial, x, OPS[op], ndrange=x.shape[0])
    out = empty(be, 1, x.dtype)
    fold_initial(be)(out, partial, initial, OPS[op], ndrange=1)
    return get(out)[0]


@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_empty_reductions_with_initial(be, op):
    """test_empty_reductions_vs_numpy (the cases with ``initial``): an empty array gives the
    initial value, a non-empty one folds it in (the initial-less max/min of an empty array,
    a ValueError in NumPy, is a library check with nothing to port)."""
    dt = fdt(be)
    npop = {"add": np.sum, "max": np.max, "min": np.min}[op]
    x = np.array([], dt)
    assert np_reduce(be, put(be, x), op, 5.0) == npop(x, initial=5.0)
    x = np.linspace(-1, 1, 10).astype(dt)
    for init in (5.0, -5.0):
        np.testing.assert_allclose(np_reduce(be, put(be, x), op, init), npop(x, initial=init),
                                   rtol=4 * np.finfo(dt).eps, atol=4 * np.finfo(dt).eps)


@pytest.mark.parametrize("initial", [None, 5.0])
@pytest.mark.parametrize("case", ["only nans", "mixed"])
@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_reduction_nan_handling(be, op, case, initial):
    """test_reduction_nan_handling: sum, max and min propagate NaN as NumPy's; and the
    documented difference: ``group_reduce``'s max/min leave the NaN out."""
    dt = fdt(be)
    x = np.array([np.nan, np.nan] if case == "only nans" else [np.nan, 1.0], dt)
    npop = {"add": np.sum, "max": np.max, "min": np.min}[op]
    ident = {"add": 0.0, "max": -np.inf, "min": np.inf}[op]
    got = np_reduce(be, put(be, x), op, ident if initial is None else initial)
    want = npop(x) if initial is None else npop(x, initial=initial)
    assert np.isnan(want) and np.isnan(got)
    raw = reduce(be, put(be, x), op)
    if op == "add":
        assert np.isnan(raw)
    else:
        assert raw == (ident if case == "only nans" else 1.0)


# --- test_array.py / test_clrandom.py: random numbers -----------------------------------------

@tk.kernel
def fill_uniform(out, key, a, b):
    i = tk.index()
    out[i] = a + (b - a) * tk.random.uniform(key, i)


@tk.kernel
def fill_normal(out, key, mu, sigma):
    i = tk.index()
    out[i] = mu + sigma * tk.random.normal(key, i)


@tk.kernel
def fill_int(out, key, a, b):
    i = tk.index()
    out[i] = a + out.dtype(tk.random.bits(key, i) % tk.uint32(b - a))


@pytest.mark.parametrize("n", [300, 301, 302, 303, 10007])
def test_random_float_in_range(be, n):
    """test_random_float_in_range: uniform in [0, 1] and in [4, 7] for float32 and float64,
    and normal(mu=10, sigma=3) with plausible moments."""
    key = tk.random.key(n)
    for dt in ([np.float32, np.float64] if be.supports_float64 else [np.float32]):
        for a, b in ((0.0, 1.0), (4.0, 7.0)):
            out = empty(be, n, dt)
            fill_uniform(be)(out, key, dt(a), dt(b), ndrange=n)
            r = get(out)
            assert ((a <= r) & (r <= b)).all(), (a, b, r.min(), r.max())
            assert r.max() - r.min() > 0.9 * (b - a) * (1 - 2 / n)
        out = empty(be, n, dt)
        fill_normal(be)(out, key, dt(10), dt(3), ndrange=n)
        r = get(out)
        assert np.isfinite(r).all()
        assert abs(r.mean() - 10) < 5 * 3 / math.sqrt(n)
        assert abs(r.std() - 3) < 0.5


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_random_int_in_range(be, dtype):
    """test_random_int_in_range: integers in [200, 300) that reach above 295."""
    need(be, dtype)
    n = 100003
    out = empty(be, n, dtype)
    fill_int(be)(out, tk.random.key(7), dtype(200), dtype(300), ndrange=n)
    r = get(out)
    assert (200 <= r).all() and (r < 300).all()
    assert r.max() > 295
    assert np.bincount(r - 200, minlength=100).min() > 0.7 * n / 100
