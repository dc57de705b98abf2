"""KernelAbstractions.jl's test files not yet in test_ported_suites_ka.py, _ka2.py,
_ka_examples.py or _ka3.py (whose header states the conventions and where SPEC differs from
upstream; its fixtures and helpers are used here), ported test by test:

* test/indexmap.jl: an index map (a list of Cartesian indices) as the iteration space, here an
  int array of coordinates read by the kernel, with the group and local positions of each
  entry;
* test/tiles.jl: the tile operations (reduce, shuffle by lane, up, down, xor, any, all,
  ballot) of tiles of N consecutive items, here a workgroup (or half of one) of N items
  communicating through ``tk.localmem`` and ``tk.group_reduce``; tiles that loop a different
  number of times and return early; reductions of pairs; ``unsafe_indices``;
* test/launch.jl: every ``@index`` flavour of every work item (global linear and Cartesian,
  group linear and Cartesian, local linear and Cartesian, the group size and the number of
  groups) against SPEC's layout (row-major linear indices, ``g = J // wgs``, ``l = J % wgs``)
  for 1-D to 3-D ndranges with chosen, int and tuple workgroup sizes, static workgroup sizes,
  ranges with offsets, empty ndranges (nothing runs, unsafe_indices kernels neither),
  unsafe_indices kernels computing their own global index, and a barrier reached by the
  padding items of partial groups in every dimension;
* test/random.jl: ``rand``/``randn``/``rand(10:20)`` in a kernel as SPEC 8's counter-based
  ``tk.random.uniform/normal/bits``: a seed gives the same numbers across launches (and the
  host functions' numbers), another seed others, two draws in one kernel differ, three items
  along any one of the six local/group dimensions draw different numbers.

Where SPEC differs from upstream: launch.jl's 4-D and 0-D shapes have no ndrange here (1 to 3
dimensions: a ``tk.LaunchError``, checked for 4-D in test_ported_suites_kernels.py and for 0-D in
test_ported_suites_ka3.py), a workgroup tuple of another rank than the ndrange is a ``tk.LaunchError`` (KA pads a shorter one with 1s), and
``select_launch``'s index-type choice is internal (the 64-bit index cases are in
test_ported_suites_ka3.py's foreach_index port). random.jl's unseeded case ("different numbers
across launches" from a global RNG state) has no counterpart: counter-based numbers are a pure
function of the key and counter, which is the point of SPEC 8; a kernel that wants new numbers
per launch passes a new key (``tk.random.split``)."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import get, put
from test_ported_suites_ka3 import anybe, intt, needs, rbe, zeros  # noqa: F401 - anybe, rbe: fixtures


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
    for dt in (np.int32, np.uint64, np.uint16):   # (int64/uint32 left out for the CI budget)
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
