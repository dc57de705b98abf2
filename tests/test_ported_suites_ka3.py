"""KernelAbstractions.jl's test files not yet in test_ported_suites_ka.py, _ka2.py or
_ka_examples.py, ported test by test (indexmap.jl, tiles.jl, launch.jl and random.jl are in
test_ported_suites_ka4.py, which shares this header's conventions and fixtures):

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
    """groupreduce.jl ``groupreduce_1!``: one group of n ones sums to n (n = 256 and 1024, as
    far as the backend's maximum group size goes; the interpreter 256 only)"""
    needs(anybe, dt)
    for n in (256, 1024):                         # (512 left out for the CI budget)
        if n > anybe.max_workgroupsize or (n > 256 and isinstance(anybe, tk.Interpreter)):
            continue
        y = zeros(anybe, 1, dt)
        groupreduce(anybe, n)(y, put(anybe, np.ones(n, dt)), ndrange=n)
        tk.synchronize(anybe)
        assert get(y)[0] == n


@pytest.mark.parametrize("dt", GR_TYPES, ids=lambda d: np.dtype(d).name)
def test_groupreduce_groups_of_64_and_128(anybe, dt):
    """groupreduce.jl ``groupreduce_2!``: over 256 ones in groups of 64 and 128 (128 only on
    the compiled backends, for the CI budget), the first group's sum is its size"""
    needs(anybe, dt)
    for gs in (64, 128) if isinstance(anybe, tk.Interpreter) else (128,):
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
    """atomic xchg/and/or/xor/max/min/cas tests (every type on the interpreter; int32 and
    uint64, the signed/unsigned and 32/64-bit corners, on the compiled backends, and uint32 on
    WebGPU, which has no 64-bit integers: for the CI budget)"""
    compiled = not isinstance(anybe, tk.Interpreter)
    if compiled and dt not in ((np.int32, np.uint64) if anybe.supports(np.dtype(np.int64)) else (np.int32, np.uint32)):
        pytest.skip("covered by int32/uint64 on the compiled backends (CI budget)")
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
