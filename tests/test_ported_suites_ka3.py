"""KernelAbstractions.jl's test files not yet in test_ported_suites_ka.py, _ka2.py or
_ka_examples.py, ported test by test:

* test/offsets.jl: an ndrange of ranges with a negative start (``(-3:4, 2:11)``), with a static
  and a dynamic workgroup size, a backend-chosen one, ragged groups (3 x 3 over 8 x 10),
  extents mixed with ranges, a bare 1-D range (also with NumPy unsigned bounds), the absolute
  Cartesian index, ``@ndrange()`` giving the extents, and an empty range;
* test/barriers.jl: a ``@uniform`` update after the last barrier of a ``while`` body, branches
  without a barrier beside one with a barrier, a local tile written and read twice between
  barriers, all with 13 items in groups of 8 (the 3 padding items of the last group must run
  nothing);
* test/groupreduce.jl: ``@groupreduce(+)`` of ones over one whole group (256, 512, 1024 items
  up to the backend's maximum) and over groups of 64 and 128, in float16, float32, int16,
  int32 and int64;
* test/atomic_test.jl and test/atomix_test.jl: add/sub of 1 by 1024 items in groups of 4,
  exchange, and/or/xor of ten bit masks, max/min of 1..1024, compare-and-swap 0 -> 1, into
  the *second* element (the first must stay untouched);
* test/colon.jl (``sum(B[:, I])``) and test/unsafe_getindex.jl (a copy in groups of 8);
* test/foreach_index.jl: every index space of ``foreach_index`` as the ndrange of a kernel:
  1-D to 3-D copies and marks (each index visited once), a strided view, an offset linear
  range, a range of indices without device memory summed with an atomic, ranges recorded as
  given (``5:20``, ``-3:4``, int32 and unsigned bounds, Cartesian ranges with a one-point
  dimension, indices past ``typemax(Int32)``), and empty spaces;
* test/indexmap.jl: an index map (a list of Cartesian indices) as the iteration space, here an
  int array of coordinates read by the kernel, with the group and local positions of each
  entry;
* test/tiles.jl: the tile operations (reduce, shuffle by lane, up, down, xor, any, all,
  ballot) of tiles of N consecutive items, here a workgroup (or half of one) of N items
  communicating through ``tk.localmem`` and ``tk.group_reduce``; tiles that loop a different
  number of times and return early; reductions of pairs; ``unsafe_indices``.

Julia's 1-based indices become 0-based; column-major linear indices become row-major ones (the
last dimension fastest, SPEC 2), so ``reshape(1:80, 8, 10)`` is ``np.arange(80).reshape(8, 10)``.
Exact against NumPy. The launches over ranges, barriers, collectives and atomics run on CPU,
INTERP, INTERP:CHECK, CL and WEBGPU (64-bit types skip on WebGPU, which has none); the rest on
CPU and INTERP.

Where SPEC differs from upstream (ported as SPEC reads, or not ported):

* ``@index(Global, Linear)`` over ranges is the 0-based position within the ranges (SPEC 2),
  as KA's is the 1-based one; ``tk.ndrange()`` gives the extents, as ``@ndrange()``.
* KA fixes an ndrange at instantiation (``kernel(backend, wg, ndrange)``); here the ndrange is
  always given at launch (the "static ndrange" case is the same launch).
* ``CartesianIndices`` is a tuple of Python ``range``s, and a stepped range is allowed (SPEC 2:
  ``start + k * step``), where ``foreach_index`` refuses ``1:2:9`` (ArgumentError): the port
  checks that the stepped space visits ``1, 3, .., 9``. A 0-dimensional index space
  (``CartesianIndices(())``) has no ndrange here (1 to 3 dimensions): a ``tk.LaunchError``.
  An int workgroup size with a 2-D or 3-D ndrange means items along the last dimension, and a
  tuple of the wrong rank (upstream's ``(4, 4)`` for a 3-D space) is a ``tk.LaunchError``.
* There is no ``foreach_index``/closure form, no ``OffsetArray``, no index-map ndrange, no
  array of tuples and no tiles/sub-groups: each is written as a kernel over an ordinary
  ndrange (the offset vector's storage is written at ``i - first``; the index map is an
  ``(n, 3)`` int array; a tile is a group of N items, ``tile_shfl`` a read of ``tk.localmem``
  after a barrier, ``tile_any/all`` a ``group_reduce`` with ``"or"``/``"and"``, a ballot an
  ``"or"`` of ``1 << lane``). Upstream's "rejected launches" of tiles and its boxed-closure and
  ``Dict`` errors have no counterpart.
* No slicing in kernels: colon.jl's ``sum(B[:, I])`` is a loop, and a slice is a
  ``tk.CompileError`` naming the line (checked).
* ``atomic_inc``/``atomic_dec`` with CUDA's wrap-around are ported in
  test_ported_suites_cudajl.py as compare-and-swap loops; not repeated here.
"""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, put

ALL = ('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA')


@pytest.fixture(params=backend_params(*ALL), scope="module")
def anybe(request):
    return tk.backend(request.param)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def rbe(request):
    """backends that render ranged launches (the check mode adds nothing there)"""
    return tk.backend(request.param)


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    return tk.backend(request.param)


def intt(be):
    """Julia's ``Int``: int64, or int32 where the backend has no 64-bit integers"""
    return np.int64 if be.supports(np.dtype(np.int64)) else np.int32


def zeros(be, shape, dtype):
    return put(be, np.zeros(shape, dtype))


def needs(be, *dtypes):
    for dt in dtypes:
        if not be.supports(np.dtype(dt)):
            pytest.skip(f"{be.name} has no {np.dtype(dt).name}")


# --- offsets.jl ------------------------------------------------------------------------------

@tk.kernel
def offsets_fill_indices(out, lo0, lo1):
    I = tk.index(tk.Global, tk.Cartesian)
    i = tk.index(tk.Global, tk.Linear)
    out[I[0] - lo0, I[1] - lo1] = i


@tk.kernel
def offsets_fill_indices1(out, lo0):
    I = tk.index(tk.Global, tk.Cartesian)
    i = tk.index(tk.Global, tk.Linear)
    out[I[0] - lo0] = i


@tk.kernel
def offsets_fill_ndrange(out, lo0, lo1):
    i, j = tk.index(tk.Global, tk.Cartesian)
    sz = tk.ndrange()
    out[i - lo0, j - lo1] = sz[0] * 100 + sz[1]


@tk.kernel
def offsets_fill_cartesian(out, lo0, lo1):
    I = tk.index(tk.Global, tk.Cartesian)
    out[I[0] - lo0, I[1] - lo1] = out[I[0] - lo0, I[1] - lo1] + 1


RANGES = (range(-3, 5), range(2, 12))
REF = np.arange(80).reshape(8, 10)


@pytest.mark.parametrize("how", ["static", "dynamic", "chosen", "ragged", "mixed"])
def test_offsets_fill_indices(rbe, how):
    """offsets.jl "static/dynamic ndrange", "dynamic workgroupsize", "ragged workgroups",
    "mixed extents and ranges": each point of ``(-3:4, 2:11)`` writes its linear position at
    its coordinates less the starts"""
    out = zeros(rbe, (8, 10), intt(rbe))
    if how == "static":
        offsets_fill_indices(rbe, (4, 4))(out, -3, 2, ndrange=RANGES)
    elif how == "dynamic":
        offsets_fill_indices(rbe)(out, -3, 2, ndrange=RANGES, workgroupsize=(4, 4))
    elif how == "chosen":
        offsets_fill_indices(rbe)(out, -3, 2, ndrange=RANGES)
    elif how == "ragged":
        offsets_fill_indices(rbe, (3, 3))(out, -3, 2, ndrange=RANGES)
    else:
        offsets_fill_indices(rbe, (4, 4))(out, 0, 2, ndrange=(8, range(2, 12)))
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(out), REF)


@pytest.mark.parametrize("bounds", [(5, 21), (np.uint64(5), np.uint64(21)), (np.int32(5), np.int32(21))],
                         ids=["int", "uint64", "int32"])
@pytest.mark.parametrize("wg", [None, 4])
def test_offsets_bare_range(rbe, bounds, wg):
    """offsets.jl "bare range" and ``UInt(5):UInt(20)``: the 16 points of ``5:20`` in order"""
    out = zeros(rbe, 16, intt(rbe))
    k = offsets_fill_indices1(rbe) if wg is None else offsets_fill_indices1(rbe, wg)
    k(out, 5, ndrange=range(*bounds))
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(out), np.arange(16))


def test_offsets_cartesian_index_and_ndrange_extents(rbe):
    """offsets.jl "cartesian index" (every point hit once) and "@ndrange returns extents"
    (8 x 10, not the ranges' ends)"""
    out = zeros(rbe, (8, 10), intt(rbe))
    offsets_fill_cartesian(rbe, (4, 4))(out, -3, 2, ndrange=RANGES)
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(out), np.ones((8, 10)))
    out = zeros(rbe, (8, 10), intt(rbe))
    offsets_fill_ndrange(rbe, (4, 4))(out, -3, 2, ndrange=RANGES)
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(out), np.full((8, 10), 810))


def test_offsets_empty_range(rbe):
    """offsets.jl "empty range": ``(5:4, 1:3)`` launches nothing"""
    out = zeros(rbe, (8, 10), intt(rbe))
    offsets_fill_indices(rbe, (4, 4))(out, -3, 2, ndrange=(range(5, 5), range(1, 4)))
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(out), np.zeros((8, 10)))


# --- barriers.jl -----------------------------------------------------------------------------

@tk.kernel
def trailing_uniform(A):
    i = tk.index(tk.Global, tk.Linear)
    remaining = tk.uniform(3)
    iterations = tk.uniform(0)
    while remaining > 0 and iterations < 10:
        iterations += 1
        A[i] += 1
        tk.synchronize()
        remaining -= 1


@tk.kernel
def branches(A, flag):
    i = tk.index(tk.Global, tk.Linear)
    if flag == 1:
        tk.synchronize()
        A[i] = 1
    elif flag == 2:
        A[i] = 2
    else:
        A[i] = 3


@tk.kernel
def qualified(A):
    i = tk.index(tk.Global, tk.Linear)
    li = tk.index(tk.Local, tk.Linear)
    n = tk.uniform(2)
    tile = tk.localmem(A.dtype, (8,))
    for _ in range(n):
        tile[li] = i
        tk.synchronize()
        A[i] += tile[li]
        tk.synchronize()


def test_barriers_trailing_uniform(anybe):
    """barriers.jl "trailing @uniform": three trips, the padding items add nothing"""
    A = zeros(anybe, 16, intt(anybe))
    trailing_uniform(anybe, 8)(A, ndrange=13)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(A), [3] * 13 + [0] * 3)


@pytest.mark.parametrize("flag", [1, 2, 3])
def test_barriers_branches_without_synchronize(anybe, flag):
    """barriers.jl "branches without @synchronize" """
    A = zeros(anybe, 16, intt(anybe))
    branches(anybe, 8)(A, flag, ndrange=13)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(A), [flag] * 13 + [0] * 3)


def test_barriers_local_tile_in_a_loop(anybe):
    """barriers.jl "qualified macros": twice through a local tile, ``2 * i``"""
    A = zeros(anybe, 16, intt(anybe))
    qualified(anybe, 8)(A, ndrange=13)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(A), list(2 * np.arange(13)) + [0] * 3)


# --- groupreduce.jl --------------------------------------------------------------------------

@tk.kernel
def groupreduce(y, x):
    i = tk.index(tk.Global, tk.Linear)
    res = tk.group_reduce(x[i], "add")
    if i == 0:
        y[0] = res


GR_TYPES = [np.float16, np.float32, np.int16, np.int32, np.int64]


@pytest.mark.parametrize("dt", GR_TYPES, ids=lambda d: np.dtype(d).name)
def test_groupreduce_one_whole_group(anybe, dt):
    """groupreduce.jl ``groupreduce_1!``: one group of n ones sums to n (n = 256, 512, 1024, as
    far as the backend's maximum group size goes)"""
    needs(anybe, dt)
    for n in (256, 512, 1024):
        if n > anybe.max_workgroupsize or (n > 256 and isinstance(anybe, tk.Interpreter)):
            continue
        y = zeros(anybe, 1, dt)
        groupreduce(anybe, n)(y, put(anybe, np.ones(n, dt)), ndrange=n)
        tk.synchronize(anybe)
        assert get(y)[0] == n


@pytest.mark.parametrize("dt", GR_TYPES, ids=lambda d: np.dtype(d).name)
def test_groupreduce_groups_of_64_and_128(anybe, dt):
    """groupreduce.jl ``groupreduce_2!``: over 256 ones in groups of 64 and 128, the first
    group's sum is its size"""
    needs(anybe, dt)
    for gs in (64, 128):
        y = zeros(anybe, 1, dt)
        groupreduce(anybe, gs)(y, put(anybe, np.ones(256, dt)), ndrange=256)
        tk.synchronize(anybe)
        assert get(y)[0] == gs


# --- atomic_test.jl / atomix_test.jl ---------------------------------------------------------

@tk.kernel
def atomic_add_kernel(A, b):
    tk.atomic_add(A, 1, b)


@tk.kernel
def atomic_sub_kernel(A, b):
    tk.atomic_sub(A, 1, b)


@tk.kernel
def atomic_xchg_kernel(A, b):
    tk.atomic_exchange(A, 1, b)


@tk.kernel
def atomic_and_kernel(A, B: tk.Const):
    tk.atomic_and(A, 0, B[tk.index()])


@tk.kernel
def atomic_or_kernel(A, B: tk.Const):
    tk.atomic_or(A, 0, B[tk.index()])


@tk.kernel
def atomic_xor_kernel(A, B: tk.Const):
    tk.atomic_xor(A, 0, B[tk.index()])


@tk.kernel
def atomic_max_kernel(A, B: tk.Const):
    tk.atomic_max(A, 1, B[tk.index()])


@tk.kernel
def atomic_min_kernel(A, B: tk.Const):
    tk.atomic_min(A, 1, B[tk.index()])


@tk.kernel
def atomic_cas_kernel(A, b, c):
    tk.atomic_cas(A, 1, b, c)


INTS = [np.int32, np.int64, np.uint32, np.uint64]


def _atomic(be, kern, dt, init, *args, n):
    needs(be, dt)
    A = put(be, np.array(init, dt))
    args = [put(be, a.astype(dt)) if isinstance(a, np.ndarray) else dt(a) for a in args]
    kern(be, 4)(A, *args, ndrange=n)
    tk.synchronize(be)
    return get(A)


@pytest.mark.parametrize("dt", INTS + [np.float32], ids=lambda d: np.dtype(d).name)
def test_atomic_add_and_sub(anybe, dt):
    """atomic addition/subtraction tests: 1024 items add one to ``[0, 0]`` / take one from
    ``[2048, 2048]``; the first element is untouched"""
    np.testing.assert_array_equal(_atomic(anybe, atomic_add_kernel, dt, [0, 0], 1, n=1024), [0, 1024])
    np.testing.assert_array_equal(_atomic(anybe, atomic_sub_kernel, dt, [2048, 2048], 1, n=1024), [2048, 1024])


@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
def test_atomic_xchg_bitwise_minmax_cas(anybe, dt):
    """atomic xchg/and/or/xor/max/min/cas tests"""
    np.testing.assert_array_equal(_atomic(anybe, atomic_xchg_kernel, dt, [0, 0], 1, n=256), [0, 1])
    bits = np.array([2 ** k for k in range(10)])
    assert _atomic(anybe, atomic_and_kernel, dt, [1023], 1023 - bits, n=10)[0] == 0
    assert _atomic(anybe, atomic_or_kernel, dt, [0], bits, n=10)[0] == 1023
    assert _atomic(anybe, atomic_xor_kernel, dt, [1023], bits, n=10)[0] == 0
    B = np.arange(1, 1025)
    np.testing.assert_array_equal(_atomic(anybe, atomic_max_kernel, dt, [0, 0], B, n=1024), [0, 1024])
    np.testing.assert_array_equal(_atomic(anybe, atomic_min_kernel, dt, [1024, 1024], B, n=1024), [1024, 1])
    np.testing.assert_array_equal(_atomic(anybe, atomic_cas_kernel, dt, [0, 0], 0, 1, n=1024), [0, 1])


# --- colon.jl / unsafe_getindex.jl -----------------------------------------------------------

@tk.kernel
def copy_colon(A, B: tk.Const):
    i = tk.index()
    s = 0.0
    for r in range(B.shape[0]):
        s += B[r, i]
    A[i] = s


@tk.kernel
def copy_unsafe_getindex(A, B: tk.Const):
    i = tk.index(tk.Global, tk.Linear)
    A[i] = B[i]


def test_colon_and_unsafe_getindex(be):
    """colon.jl: ``A[I] = sum(B[:, I])`` of ``ones(2, 128)`` is 2; unsafe_getindex.jl: a copy
    of 128 ones in groups of 8"""
    A = np.zeros(128)
    copy_colon(be, 8)(A, np.ones((2, 128)), ndrange=128)
    np.testing.assert_array_equal(A, 2.0)
    A = np.zeros(128)
    copy_unsafe_getindex(be, 8)(A, np.ones(128), ndrange=128)
    np.testing.assert_array_equal(A, 1.0)


def test_colon_slice_is_a_compile_error(be, tmp_path):
    """a slice (``B[:, i]``) is not in the language: a CompileError naming the line"""
    import importlib.util
    src = tmp_path / "colon_slice.py"
    src.write_text("import tinykernels as tk\n\n@tk.kernel\ndef k(A, B: tk.Const):\n"
                   "    i = tk.index()\n    A[i] = B[:, i][0]\n")
    spec = importlib.util.spec_from_file_location("colon_slice", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(tk.CompileError) as e:
        mod.k(be)(np.zeros(4), np.ones((2, 4)), ndrange=4)
    assert "colon_slice.py" in str(e.value) and ":6" in str(e.value)


# --- foreach_index.jl ------------------------------------------------------------------------

@tk.kernel
def fe_copy(dst, src: tk.Const):
    I = tk.index(tk.Global, tk.Cartesian)
    dst[I] = src[I]


@tk.kernel
def fe_mark(out):
    I = tk.index(tk.Global, tk.Cartesian)
    out[I] += 1


@tk.kernel
def fe_fill_offset(data, first):
    i = tk.index(tk.Global, tk.Cartesian)[0]
    data[i - first] = i


@tk.kernel
def fe_sum_range(out):
    i = tk.index(tk.Global, tk.Cartesian)[0]
    tk.atomic_add(out, 0, out.dtype(i))


@tk.kernel
def fe_record1(out, o0):
    i = tk.index(tk.Global, tk.Cartesian)[0]
    out[i - o0] = i


@tk.kernel
def fe_record2(out, o0, o1):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i - o0, j - o1, 0] = i
    out[i - o0, j - o1, 1] = j


@tk.kernel
def fe_record3(out, o0, o1, o2):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    out[i - o0, j - o1, k - o2, 0] = i
    out[i - o0, j - o1, k - o2, 1] = j
    out[i - o0, j - o1, k - o2, 2] = k


@pytest.mark.parametrize("dims", [(1024,), (32, 33), (4, 5, 6)], ids=str)
def test_foreach_index_linear_space(anybe, dims):
    """foreach_index.jl "linear index space": a copy of ``1:prod(dims)`` and a mark of every
    index, which is visited exactly once"""
    src = np.arange(1, int(np.prod(dims)) + 1).reshape(dims).astype(intt(anybe))
    dst = zeros(anybe, dims, intt(anybe))
    fe_copy(anybe)(dst, put(anybe, src), ndrange=dims)
    out = zeros(anybe, dims, intt(anybe))
    fe_mark(anybe)(out, ndrange=dims)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(dst), src)
    np.testing.assert_array_equal(get(out), np.ones(dims))


def test_foreach_index_strided_view(be):
    """foreach_index.jl "cartesian index space": a mark over ``view(A, 1:2:8, 2:2:10)``, a
    strided view written in place"""
    A = np.zeros((8, 10), np.int64)
    v = A[0:8:2, 1:10:2]
    fe_mark(be)(v, ndrange=v.shape)
    ref = np.zeros((8, 10), np.int64)
    ref[0:8:2, 1:10:2] = 1
    np.testing.assert_array_equal(A, ref)


def test_foreach_index_offset_linear_space(rbe):
    """foreach_index.jl "offset linear index space": an offset vector indexed ``-2:7`` filled
    with its own indices (its storage written at ``i - first``)"""
    data = zeros(rbe, 10, intt(rbe))
    fe_fill_offset(rbe)(data, -2, ndrange=range(-2, 8))
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(data), np.arange(-2, 8))


def test_foreach_index_space_without_device_memory(anybe):
    """foreach_index.jl "index space without device memory": ``1:100`` summed with a 32-bit
    atomic, and "empty index space": ``5:4`` adds nothing"""
    out = zeros(anybe, 1, np.int32)
    fe_sum_range(anybe)(out, ndrange=range(1, 101))
    fe_sum_range(anybe)(out, ndrange=range(5, 5))
    tk.synchronize(anybe)
    assert get(out)[0] == 5050


@pytest.mark.parametrize("r", [range(5, 21), range(-3, 5), range(np.int32(2), np.int32(10)),
                               range(np.uint64(2), np.uint64(10)), range(1, 10, 2)],
                         ids=["5:20", "-3:4", "int32", "uint64", "1:2:9"])
def test_foreach_index_ranges_as_given(rbe, r):
    """foreach_index.jl "index space as given": the values of the range, not its positions;
    a stepped range (refused upstream) visits ``1, 3, .., 9`` (SPEC 2)"""
    if r.step == 1:
        out = zeros(rbe, len(r), intt(rbe))
        fe_record1(rbe)(out, int(r.start), ndrange=r)
        want = np.array(list(r))
    else:                                 # a stepped space: recorded at the values themselves
        out = zeros(rbe, r.stop, intt(rbe))
        fe_record1(rbe)(out, 0, ndrange=r)
        want = np.zeros(r.stop, intt(rbe))
        want[list(r)] = list(r)
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(out), want)


CART = [(range(2, 10), range(2, 8)), (range(-1, 4), range(0, 1), range(4, 7)),
        (range(1, 10, 2), range(1, 4))]


@pytest.mark.parametrize("ranges", CART, ids=["2:9x2:7", "-1:3x0:0x4:6", "1:2:9x1:3"])
@pytest.mark.parametrize("wg", [None, 4, "tuple"])
def test_foreach_index_cartesian_ranges_as_given(rbe, ranges, wg):
    """foreach_index.jl "index space as given" with ``CartesianIndices``: every point records
    its own coordinates, with a chosen, an int and a tuple workgroup size"""
    nd = len(ranges)
    shape = tuple(len(r) for r in ranges)
    if wg == "tuple":
        wg = (4,) * nd
    out = zeros(rbe, shape + (nd,), intt(rbe))
    k = [fe_record1, fe_record2, fe_record3][nd - 1]
    starts = [r.start for r in ranges]
    if any(r.step != 1 for r in ranges):              # record at the position: a stepped space
        return _stepped_cartesian(rbe, ranges, wg)
    (k(rbe) if wg is None else k(rbe, wg))(out, *starts, ndrange=ranges)
    tk.synchronize(rbe)
    want = np.stack(np.meshgrid(*[np.array(r) for r in ranges], indexing="ij"), axis=-1)
    np.testing.assert_array_equal(get(out), want)


@tk.kernel
def fe_record_position2(out):
    i, j = tk.index(tk.Global, tk.Cartesian)
    p = tk.index(tk.Global, tk.Linear)
    out[p, 0] = i
    out[p, 1] = j


def _stepped_cartesian(be, ranges, wg):
    out = zeros(be, (len(ranges[0]) * len(ranges[1]), 2), intt(be))
    k = fe_record_position2
    (k(be) if wg is None else k(be, wg))(out, ndrange=ranges)
    tk.synchronize(be)
    want = np.array([(i, j) for i in ranges[0] for j in ranges[1]])
    np.testing.assert_array_equal(get(out), want)


def test_foreach_index_indices_past_int32(rbe):
    """foreach_index.jl: indices ``typemax(Int32) + 1 : typemax(Int32) + 10`` recorded as
    given (64-bit coordinates; WebGPU, which has no 64-bit integers, refuses the launch)"""
    r = range(2 ** 31, 2 ** 31 + 10)
    if not rbe.supports(np.dtype(np.int64)):
        with pytest.raises(tk.LaunchError, match="ndrange dimension 0"):
            fe_record1(rbe)(zeros(rbe, 10, np.int32), 0, ndrange=r)
        return
    out = zeros(rbe, 10, np.int64)
    fe_record1(rbe)(out, 2 ** 31, ndrange=r)
    tk.synchronize(rbe)
    np.testing.assert_array_equal(get(out), np.arange(2 ** 31, 2 ** 31 + 10))


def test_foreach_index_several_arrays_and_errors(be):
    """foreach_index.jl "several arrays" (a copy into a strided view, the other rows left
    zero), a 0-dimensional space and a workgroup tuple of the wrong rank (LaunchErrors here),
    and "empty index space" (a 2-D space with an empty dimension)"""
    A = np.arange(1, 13).reshape(3, 4)
    C = np.zeros((6, 4), np.int64)
    fe_copy(be)(C[0:6:2, :], A, ndrange=(3, 4))
    np.testing.assert_array_equal(C[0:6:2], A)
    np.testing.assert_array_equal(C[1:6:2], 0)
    with pytest.raises(tk.LaunchError):
        fe_mark(be)(np.zeros(1, np.int64), ndrange=())
    out = np.zeros((5, 1, 3, 3), np.int64)
    with pytest.raises(tk.LaunchError):
        fe_record3(be)(out, -1, 0, 4, ndrange=CART[1], workgroupsize=(4, 4))
    out = np.zeros((2, 1, 2), np.int64)
    fe_record2(be)(out, 1, 3, ndrange=(range(1, 3), range(3, 3)))
    np.testing.assert_array_equal(out, 0)


# --- indexmap.jl -----------------------------------------------------------------------------

def _index_map():
    """upstream's ``[CartesianIndex(i, j, k) for i in 1:4, j in 1:5, k in 1:6 if (i + j + k) % 3
    == 0]`` (``i`` fastest, as the comprehension runs), 0-based"""
    return np.array([(i, j, k) for k in range(6) for j in range(5) for i in range(4)
                     if (i + j + k + 3) % 3 == 0])


@tk.kernel
def indexmap_mark(A, count, idx: tk.Const):
    p = tk.index(tk.Global, tk.Linear)
    A[idx[p, 0], idx[p, 1], idx[p, 2]] += 1
    count[p] = p


@tk.kernel
def indexmap_positions(count):
    p = tk.index(tk.Global, tk.Linear)
    g = tk.index(tk.Group, tk.Linear)
    l = tk.index(tk.Local, tk.Linear)
    nd = tk.ndrange()
    count[p] = p + 1000 * g + 100000 * l + 10 ** 7 * nd[0]


@pytest.mark.parametrize("idt", [np.int64, np.int32], ids=["int64", "int32"])
@pytest.mark.parametrize("size", ["all", "8", "empty"])
def test_indexmap_mark(anybe, idt, size):
    """indexmap.jl: the points of the map are marked once each and every entry records its
    position (groups of 4, 40 entries: a partial last group); "exact multiple of the
    workgroup size" (the first 8) and "empty map" """
    needs(anybe, idt)
    m = _index_map()
    m = {"all": m, "8": m[:8], "empty": m[:0]}[size]
    n = len(m)
    A = zeros(anybe, (4, 5, 6), intt(anybe))
    count = zeros(anybe, max(n, 1), intt(anybe))
    indexmap_mark(anybe, 4)(A, count, put(anybe, m.astype(idt).reshape(n, 3)), ndrange=n)
    tk.synchronize(anybe)
    ref = np.zeros((4, 5, 6))
    ref[tuple(m.T)] = 1
    np.testing.assert_array_equal(get(A), ref)
    if n:
        np.testing.assert_array_equal(get(count), np.arange(n))


def test_indexmap_group_and_local_indices(anybe):
    """indexmap.jl "group and local indices": ``p + 1000 g + 100000 l + 10^7 n`` for 40 entries
    in groups of 4"""
    n = len(_index_map())
    count = zeros(anybe, n, intt(anybe))
    indexmap_positions(anybe, 4)(count, ndrange=n)
    tk.synchronize(anybe)
    p = np.arange(n)
    np.testing.assert_array_equal(get(count), p + 1000 * (p // 4) + 100000 * (p % 4) + 10 ** 7 * n)


# --- tiles.jl --------------------------------------------------------------------------------

@tk.kernel
def tile_divergent(out, x: tk.Const):
    """every tile loops a different number of times, and some return early"""
    i = tk.index(tk.Global, tk.Linear)
    lane = tk.index(tk.Local, tk.Linear)
    g = tk.index(tk.Group, tk.Linear) + 1
    mem = tk.localmem(x.dtype, (tk.groupsize()[0],))
    acc = out.dtype(0)
    for _ in range(g % 3):
        acc += tk.group_reduce(x[i], "add")
    if g % 4 == 2:
        return
    mem[lane] = x[i]
    tk.synchronize()
    out[i] = acc + mem[0]


@tk.kernel
def tile_ops(out, ballots, x: tk.Const):
    """the tile's index, lane and number, shuffles by lane, up, down and xor, any, all, ballot"""
    i = tk.index(tk.Global, tk.Linear)
    lane = tk.index(tk.Local, tk.Linear)
    N = tk.groupsize()[0]
    mem = tk.localmem(x.dtype, (N,))
    mem[lane] = x[i]
    tk.synchronize()
    out[i, 0] = 1
    out[i, 1] = lane + 1
    out[i, 2] = tk.index(tk.Group, tk.Linear) + 1
    out[i, 3] = mem[(lane + 1) % N]
    out[i, 4] = mem[lane - 1] if lane > 0 else mem[lane]
    out[i, 5] = mem[lane + 1] if lane < N - 1 else mem[lane]
    out[i, 6] = mem[lane ^ 1]
    out[i, 7] = tk.group_reduce(int(x[i] == 3), "or")
    out[i, 8] = tk.group_reduce(int(x[i] > 0), "and")
    ballots[i] = tk.group_reduce(ballots.dtype(x[i] % 2) << ballots.dtype(lane), "or")


@tk.kernel
def tile_barrier(out, x: tk.Const, N: tk.constexpr):
    """two tiles of N per group, communicating through local memory after a barrier"""
    i = tk.index(tk.Global, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    mem = tk.localmem(out.dtype, (tk.groupsize()[0],))
    mem[lid] = x[i]
    tk.synchronize()
    out[i] = mem[(lid // N) * N + (lid % N + 1) % N]


@tk.kernel
def tile_reduce(out, out_sv, x: tk.Const):
    """reductions of a pair and of a 3-vector"""
    i = tk.index(tk.Global, tk.Linear)
    out[i, 0] = tk.group_reduce(x[i], "add")
    out[i, 1] = tk.group_reduce(2 * x[i], "add")
    out_sv[i, 0] = tk.group_reduce(x[i], "add")
    out_sv[i, 1] = tk.group_reduce(-x[i], "add")
    out_sv[i, 2] = tk.group_reduce(tk.int32(1), "add")


@tk.kernel(unsafe_indices=True)
def tile_unsafe(out, x: tk.Const):
    i = tk.index(tk.Global, tk.Linear)
    v = x[i] if i < x.shape[0] else x.dtype(0)
    s = tk.group_reduce(v, "add")
    if i < out.shape[0]:
        out[i] = s


def _tile_data(N, seed):
    x = np.random.default_rng(seed).integers(1, 101, 5 * N).astype(np.int32)
    groups = [slice(i // N * N, i // N * N + N) for i in range(5 * N)]
    return x, groups


@pytest.mark.parametrize("N", [8, 32])
def test_tiles_divergent(anybe, N):
    """tiles.jl "divergent tiles": ``(g % 3) * sum(tile) + x[first]``, -1 where ``g % 4 == 2``
    returned"""
    x, groups = _tile_data(N, N)
    want = np.array([-1 if (i // N + 1) % 4 == 2 else (i // N + 1) % 3 * x[g].sum() + x[g.start]
                     for i, g in enumerate(groups)])
    out = put(anybe, np.full(5 * N, -1, np.int32))
    tile_divergent(anybe, N)(out, put(anybe, x), ndrange=5 * N)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(out), want)


@pytest.mark.parametrize("N", [8, 32])
def test_tiles_operations(anybe, N):
    """tiles.jl "tile operations" (``x3[2] = 3``: one tile has a 3)"""
    x, groups = _tile_data(N, N + 1)
    x[1] = 3
    n = 5 * N
    out = zeros(anybe, (n, 9), np.int32)
    ballots = zeros(anybe, n, np.uint32)
    tile_ops(anybe, N)(out, ballots, put(anybe, x), ndrange=n)
    tk.synchronize(anybe)
    out, ballots = get(out), get(ballots)
    for i, g in enumerate(groups):
        lane = i - g.start
        t = x[g]
        assert list(out[i]) == [1, lane + 1, i // N + 1, t[(lane + 1) % N], t[max(lane - 1, 0)],
                                t[min(lane + 1, N - 1)], t[lane ^ 1], int((t == 3).any()), 1], (i, out[i])
        assert ballots[i] == sum(1 << j for j in range(N) if t[j] % 2), i


@pytest.mark.parametrize("N", [8, 32])
def test_tiles_barrier_two_tiles_per_group(anybe, N):
    """tiles.jl "tile_barrier": groups of 2N (the last one half padding), each item reads the
    next lane of its own tile"""
    x, groups = _tile_data(N, N + 2)
    out = zeros(anybe, 5 * N, np.int32)
    tile_barrier(anybe, 2 * N)(out, put(anybe, x), N, ndrange=5 * N)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(out), [x[g][(i - g.start + 1) % N] for i, g in enumerate(groups)])


@pytest.mark.parametrize("N", [8, 32])
def test_tiles_reductions_and_unsafe_indices(anybe, N):
    """tiles.jl "tuples and static arrays" and "unsafe_indices" (also over ``n - 3`` items,
    where the last tile's padding items read no ``x``)"""
    x, groups = _tile_data(N, N + 3)
    n = 5 * N
    out = zeros(anybe, (n, 2), np.int32)
    out_sv = zeros(anybe, (n, 3), np.int32)
    tile_reduce(anybe, N)(out, out_sv, put(anybe, x), ndrange=n)
    sums = np.array([x[g].sum() for g in groups])
    for m in (n, n - 3):
        o = zeros(anybe, m, np.int32)
        tile_unsafe(anybe, N)(o, put(anybe, x[:m]), ndrange=m)
        tk.synchronize(anybe)
        np.testing.assert_array_equal(get(o), [x[:m][g].sum() for g in groups[:m]])
    np.testing.assert_array_equal(get(out), np.stack([sums, 2 * sums], 1))
    np.testing.assert_array_equal(get(out_sv), np.stack([sums, -sums, np.full(n, N)], 1))


# --- launch.jl -------------------------------------------------------------------------------
# Every index of a work item, stored in OUT[position, column]: the global linear index, the
# global Cartesian one (N columns), the group's linear and Cartesian index, the local linear
# and Cartesian index, the group size and the number of groups.

@tk.kernel
def launch_indices1(OUT, lo0):
    I = tk.index(tk.Global, tk.Cartesian)
    G = tk.index(tk.Group, tk.Cartesian)
    L = tk.index(tk.Local, tk.Cartesian)
    W = tk.groupsize()
    NG = tk.ngroups()
    a = I[0] - lo0
    OUT[a, 0] = tk.index(tk.Global, tk.Linear)
    OUT[a, 1] = I[0]
    OUT[a, 2] = tk.index(tk.Group, tk.Linear)
    OUT[a, 3] = G[0]
    OUT[a, 4] = tk.index(tk.Local, tk.Linear)
    OUT[a, 5] = L[0]
    OUT[a, 6] = W[0]
    OUT[a, 7] = NG[0]


@tk.kernel
def launch_indices2(OUT, lo0, lo1):
    I = tk.index(tk.Global, tk.Cartesian)
    G = tk.index(tk.Group, tk.Cartesian)
    L = tk.index(tk.Local, tk.Cartesian)
    W = tk.groupsize()
    NG = tk.ngroups()
    a = I[0] - lo0
    b = I[1] - lo1
    OUT[a, b, 0] = tk.index(tk.Global, tk.Linear)
    OUT[a, b, 1] = I[0]
    OUT[a, b, 2] = I[1]
    OUT[a, b, 3] = tk.index(tk.Group, tk.Linear)
    OUT[a, b, 4] = G[0]
    OUT[a, b, 5] = G[1]
    OUT[a, b, 6] = tk.index(tk.Local, tk.Linear)
    OUT[a, b, 7] = L[0]
    OUT[a, b, 8] = L[1]
    OUT[a, b, 9] = W[0]
    OUT[a, b, 10] = W[1]
    OUT[a, b, 11] = NG[0]
    OUT[a, b, 12] = NG[1]


@tk.kernel
def launch_indices3(OUT, lo0, lo1, lo2):
    I = tk.index(tk.Global, tk.Cartesian)
    G = tk.index(tk.Group, tk.Cartesian)
    L = tk.index(tk.Local, tk.Cartesian)
    W = tk.groupsize()
    NG = tk.ngroups()
    a = I[0] - lo0
    b = I[1] - lo1
    c = I[2] - lo2
    OUT[a, b, c, 0] = tk.index(tk.Global, tk.Linear)
    OUT[a, b, c, 1] = I[0]
    OUT[a, b, c, 2] = I[1]
    OUT[a, b, c, 3] = I[2]
    OUT[a, b, c, 4] = tk.index(tk.Group, tk.Linear)
    OUT[a, b, c, 5] = G[0]
    OUT[a, b, c, 6] = G[1]
    OUT[a, b, c, 7] = G[2]
    OUT[a, b, c, 8] = tk.index(tk.Local, tk.Linear)
    OUT[a, b, c, 9] = L[0]
    OUT[a, b, c, 10] = L[1]
    OUT[a, b, c, 11] = L[2]
    OUT[a, b, c, 12] = W[0]
    OUT[a, b, c, 13] = W[1]
    OUT[a, b, c, 14] = W[2]
    OUT[a, b, c, 15] = NG[0]
    OUT[a, b, c, 16] = NG[1]
    OUT[a, b, c, 17] = NG[2]


LAUNCH_INDICES = {1: launch_indices1, 2: launch_indices2, 3: launch_indices3}


def check_indices(be, ndrange, wg=None, static=None):
    """launch.jl's ``check_indices``, for SPEC's layout: row-major linear indices (the last
    dimension fastest), group ``g = J // wgs``, local ``l = J % wgs`` along each dimension"""
    ranges = tuple(range(r) if isinstance(r, int) else r for r in ndrange)
    N = len(ranges)
    ext = tuple(len(r) for r in ranges)
    lo = [r.start for r in ranges]
    out = zeros(be, ext + (1 + N + 1 + N + 1 + N + N + N,), intt(be))
    k = LAUNCH_INDICES[N]
    (k(be) if static is None else k(be, static))(out, *lo, ndrange=ndrange, workgroupsize=wg)
    tk.synchronize(be)
    got = get(out).reshape(-1, out.shape[-1])
    wgs = got[0, 3 + 3 * N:3 + 4 * N]
    assert (got[:, 3 + 3 * N:3 + 4 * N] == wgs).all(), "one group size"
    if wg is not None or static is not None:
        w = wg if wg is not None else static
        w = (1,) * (N - 1) + (w,) if isinstance(w, int) else tuple(w)
        np.testing.assert_array_equal(wgs, w)
    groups = tuple(-(-e // w) for e, w in zip(ext, wgs))
    J = np.array(list(np.ndindex(*ext))).reshape(-1, N)
    g, l = J // wgs, J % wgs
    want = np.concatenate([np.arange(len(J))[:, None], J + lo,
                           np.ravel_multi_index(g.T, groups)[:, None], g,
                           np.ravel_multi_index(l.T, tuple(wgs))[:, None], l,
                           np.tile(wgs, (len(J), 1)), np.tile(groups, (len(J), 1))], axis=1)
    np.testing.assert_array_equal(got, want)


SHAPES = [(7,), (37,), (5, 7), (33, 3), (3, 5, 7)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("wg", [None, 4, (2, 3), (4, 1, 2)], ids=str)
def test_launch_index_layout(rbe, shape, wg):
    """launch.jl "index layout": every index flavour of every work item; a workgroup tuple of
    another rank than the ndrange is a LaunchError here (KA pads a shorter one with 1s)"""
    if isinstance(wg, tuple) and len(wg) != len(shape):
        with pytest.raises(tk.LaunchError):
            check_indices(rbe, shape, wg)
        return
    check_indices(rbe, shape, wg)


@pytest.mark.parametrize("case", ["static-2d", "static-3d", "static-ranges", "offsets-1d", "offsets-2d",
                                  "offsets-mixed"])
def test_launch_static_workgroups_and_offsets(rbe, case):
    """launch.jl "static workgroupsize", "static ndrange" and "offsets" """
    if case == "static-2d":
        check_indices(rbe, (9, 5), static=(4, 2))
    elif case == "static-3d":
        check_indices(rbe, (9, 5, 3), static=8)
    elif case == "static-ranges":
        check_indices(rbe, (range(0, 9), range(-2, 3)), static=(4, 2))
    elif case == "offsets-1d":
        check_indices(rbe, (range(-3, 5),))
    elif case == "offsets-2d":
        check_indices(rbe, (range(-3, 5), range(2, 12)), wg=(3, 3))
    else:
        check_indices(rbe, (range(0, 5), 3, range(2, 4)))


@tk.kernel(unsafe_indices=True)
def launch_unsafe1(A):
    i = tk.index(tk.Group, tk.Cartesian)[0] * tk.groupsize()[0] + tk.index(tk.Local, tk.Cartesian)[0]
    if i < A.shape[0]:
        A[i] = i


@tk.kernel(unsafe_indices=True)
def launch_unsafe2(A):
    g = tk.index(tk.Group, tk.Cartesian)
    l = tk.index(tk.Local, tk.Cartesian)
    W = tk.groupsize()
    i = g[0] * W[0] + l[0]
    j = g[1] * W[1] + l[1]
    if i < A.shape[0] and j < A.shape[1]:
        A[i, j] = i * A.shape[1] + j


@tk.kernel(unsafe_indices=True)
def launch_unsafe3(A):
    g = tk.index(tk.Group, tk.Cartesian)
    l = tk.index(tk.Local, tk.Cartesian)
    W = tk.groupsize()
    i = g[0] * W[0] + l[0]
    j = g[1] * W[1] + l[1]
    k = g[2] * W[2] + l[2]
    if i < A.shape[0] and j < A.shape[1] and k < A.shape[2]:
        A[i, j, k] = (i * A.shape[1] + j) * A.shape[2] + k


LAUNCH_UNSAFE = {1: launch_unsafe1, 2: launch_unsafe2, 3: launch_unsafe3}


@tk.kernel
def launch_sync(A):
    I = tk.index(tk.Global, tk.Cartesian)
    i = tk.index(tk.Local, tk.Linear)
    lmem = tk.localmem(A.dtype, (64,))          # at least the largest group of the test
    lmem[i] = tk.index(tk.Global, tk.Linear)
    tk.synchronize()
    A[I] = lmem[i]


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (3, 4, 0)], ids=str)
def test_launch_empty_ndrange(anybe, shape):
    """launch.jl "empty ndrange": nothing runs, even unsafe_indices kernels"""
    A = zeros(anybe, tuple(max(s, 1) for s in shape), intt(anybe))
    LAUNCH_UNSAFE[len(shape)](anybe)(A, ndrange=shape)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(A), 0)


@pytest.mark.parametrize("shape, wg", [((37,), 8), ((33, 7), (8, 4)), ((9, 5, 3), (4, 2, 2)), ((9, 5), None)],
                         ids=str)
def test_launch_unsafe_indices(anybe, shape, wg):
    """launch.jl "unsafe_indices": global indices computed from the group and local ones, the
    kernel guarding the padding itself"""
    A = zeros(anybe, shape, intt(anybe))
    LAUNCH_UNSAFE[len(shape)](anybe)(A, ndrange=shape, workgroupsize=wg)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(A), np.arange(int(np.prod(shape))).reshape(shape))


@pytest.mark.parametrize("shape, wg", [((37,), (8,)), ((7, 6), (4, 4)), ((5, 3, 3), (2, 2, 2))], ids=str)
def test_launch_synchronize_with_padding_lanes(anybe, shape, wg):
    """launch.jl "synchronize with padding lanes": partial groups in every dimension reach the
    barrier; every point gets its own linear index back through local memory"""
    A = zeros(anybe, shape, intt(anybe))
    launch_sync(anybe, wg)(A, ndrange=shape)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(A), np.arange(int(np.prod(shape))).reshape(shape))


# --- random.jl -------------------------------------------------------------------------------

@tk.kernel
def rand_kernel(A, B, key, n):
    tid = tk.index(tk.Global, tk.Linear)
    A[tid] = tk.random.uniform(key, tid)
    B[tid] = tk.random.uniform(key, tid + n)


@tk.kernel
def rand_bits_kernel(A, key, lo, span):
    tid = tk.index(tk.Global, tk.Linear)
    A[tid] = A.dtype(lo + tk.random.bits(key, tid) % span)


@tk.kernel
def randn_kernel(A, key):
    tid = tk.index(tk.Global, tk.Linear)
    A[tid] = tk.random.normal(key, tid)


@tk.kernel
def rand_threads_kernel(A, key):
    lid = tk.index(tk.Local, tk.Cartesian)
    gid = tk.index(tk.Group, tk.Cartesian)
    idx = (lid[0] + 1) * (lid[1] + 1) * (lid[2] + 1) * (gid[0] + 1) * (gid[1] + 1) * (gid[2] + 1)
    if 1 <= idx and idx <= A.shape[0]:
        A[idx - 1] = tk.random.uniform(key, tk.index(tk.Global, tk.Linear))


def test_random_across_launches_calls_and_threads(anybe):
    """random.jl: the same seed gives the same numbers across launches, another seed others,
    two draws in one kernel differ ("across calls"), and "across threads, dim 1..6": three
    items along one of the six local/group dimensions draw three different numbers; ``randn``
    and ``rand(10:20)`` of every integer type with a seed, equal across launches and equal to
    the host functions"""
    n = 256
    key = tk.random.key(1234)
    runs = []
    for k in (key, key, tk.random.key(4321)):
        a, b = zeros(anybe, n, np.float32), zeros(anybe, n, np.float32)
        rand_kernel(anybe, n)(a, b, k, n, ndrange=n)
        tk.synchronize(anybe)
        runs.append((get(a), get(b)))
        assert (get(a) != get(b)).any() and ((get(a) >= 0) & (get(a) < 1)).all()
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert (runs[0][0] != runs[2][0]).any()
    np.testing.assert_array_equal(runs[0][0], tk.random.uniform(key, np.arange(n)))
    for dim in range(6):
        t = [3 if d == dim else 1 for d in range(6)]
        a = zeros(anybe, 3, np.float32)
        rand_threads_kernel(anybe)(a, key, ndrange=(t[0] * t[3], t[1] * t[4], t[2] * t[5]),
                                   workgroupsize=tuple(t[:3]))
        tk.synchronize(anybe)
        assert len(np.unique(get(a))) > 1, dim
    a = zeros(anybe, n, np.float32)
    randn_kernel(anybe)(a, key, ndrange=n)
    tk.synchronize(anybe)
    np.testing.assert_allclose(get(a), tk.random.normal(key, np.arange(n)), rtol=1e-5, atol=1e-6)
    for dt in (np.int32, np.int64, np.uint32, np.uint64, np.uint16):
        if not anybe.supports(np.dtype(dt)):
            continue
        got = []
        for _ in range(2):
            a = zeros(anybe, n, dt)
            rand_bits_kernel(anybe)(a, key, 10, 11, ndrange=n)
            tk.synchronize(anybe)
            got.append(get(a))
        np.testing.assert_array_equal(got[0], got[1])
        np.testing.assert_array_equal(got[0], 10 + tk.random.bits(key, np.arange(n)) % 11)
        assert got[0].min() >= 10 and got[0].max() <= 20 and len(np.unique(got[0])) == 11
