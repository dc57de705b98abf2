"""The CPU's grouped code shapes (docs/cpu.md): item loops over the valid items of a group
(no per-item division or range test), full groups compiled with constant extents, lanes
pieces of multi-dimensional groups (outer dimensions outside the hoisted loops), local and
private atomics as plain read-modify-writes, recomputed locals without storage. Every kernel
is checked bit for bit against the interpreter and against a Python/NumPy reference."""
import numpy as np
import pytest

import tinykernels as tk

CPU = tk.CPU()
INTERP = tk.Interpreter()


def _both(kernel, wg, args, ndrange):
    """Run on the CPU and the interpreter on copies of ``args``; return both argument lists."""
    outs = []
    for b in (CPU, INTERP):
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        kernel(b, wg)(*a, ndrange=ndrange)
        tk.synchronize(b)
        outs.append(a)
    return outs


# ----------------------------------------------------------------------------- 3-D lanes, partial groups

@tk.kernel
def cube(out, x: tk.Const, n: tk.constexpr):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    lid = tk.index(tk.Local, tk.Linear)
    p = tk.private(tk.float64, (3,))             # private array live across barriers
    for r in range(3):
        p[r] = 0.0
    for t in range(2):                           # barriers inside a uniform loop
        for m in range(lid, n, tk.groupsize()[2]):   # per-item range: masked lanes
            p[t] += x[(i + 2 * j + 3 * k + m) % n]
        tk.synchronize()
        for q in range(3):                       # uniform loop: hoisted
            p[2] += p[t] * (q + 1)
        tk.synchronize()
    s = tk.group_reduce(p[2], "add")
    c = tk.group_scan(p[0], "max")
    out[i, j, k] = s + c + p[1]


def _cube_ref(x, wg, nd):
    n = x.size
    p = {}
    for i in range(nd[0]):
        for j in range(nd[1]):
            for k in range(nd[2]):
                li, lj, lk = i % wg[0], j % wg[1], k % wg[2]
                lid = (li * wg[1] + lj) * wg[2] + lk
                v = [0.0, 0.0, 0.0]
                for t in range(2):
                    for m in range(lid, n, wg[2]):
                        v[t] += x[(i + 2 * j + 3 * k + m) % n]
                    for q in range(3):
                        v[2] += v[t] * (q + 1)
                p[i, j, k] = (lid, v)
    out = np.zeros(nd)
    for (i, j, k), (lid, v) in p.items():
        grp = [key for key in p if all(key[d] // wg[d] == (i, j, k)[d] // wg[d] for d in range(3))]
        s = sum(p[key][1][2] for key in sorted(grp, key=lambda q: p[q][0]))
        c = max(p[key][1][0] for key in grp if p[key][0] <= lid)
        out[i, j, k] = s + c + v[1]
    return out


@pytest.mark.parametrize("nd", [(4, 6, 8), (3, 5, 7)])
def test_3d_lanes_with_full_and_partial_groups(nd):
    """Full groups run the constant-extent copy of the group body, partial groups the other;
    both agree with the interpreter bit for bit."""
    wg = (2, 3, 4)
    x = np.random.default_rng(1).standard_normal(11)
    args = [np.zeros((4, 6, 8)), x, 11]
    src = cube.source("CPU", *args, ndrange=nd, workgroupsize=wg)
    assert "work items as lanes" in src
    assert "tk_group_body(a, g, tk_gr0, tk_gr1, tk_gr2, 2, 3, 4);" in src and "#pragma GCC unroll 2" in src   # lanes_unroll(4)
    assert "% 4" not in src.split("tk_group_body")[1].split("tk_item")[1]   # no division per item
    cpu, ref = _both(cube, wg, args, nd)
    assert np.array_equal(cpu[0], ref[0])
    want = _cube_ref(x, wg, nd)
    np.testing.assert_allclose(cpu[0][:nd[0], :nd[1], :nd[2]], want, rtol=1e-12, atol=1e-12)


@tk.kernel
def tile_transpose(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    r, c = gj * T + li, gi * T + lj
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = tile[lj, li]


def test_tile_transpose_item_outer_pieces():
    """Item-outer pieces (no loop to hoist) of a 2-D group run over the valid items only."""
    a = np.random.default_rng(2).standard_normal((32, 48)).astype(np.float32)
    args = [np.zeros((48, 32), np.float32), a, 16]
    src = tile_transpose.source("CPU", *args, ndrange=(32, 48), workgroupsize=(16, 16))
    assert "work items as lanes" not in src and "for (int64_t tk_l1 = 0; tk_l1 < tk_nv1; ++tk_l1)" in src
    cpu, ref = _both(tile_transpose, (16, 16), args, (32, 48))
    assert np.array_equal(cpu[0], a.T) and np.array_equal(ref[0], a.T)


# ----------------------------------------------------------------------------- atomics

@tk.kernel
def local_atomics(out, olds, N: tk.constexpr):
    lid = tk.index(tk.Local, tk.Linear)
    g = tk.index(tk.Group, tk.Linear)
    i = tk.index()
    lm = tk.localmem(out.dtype, (N,))
    if lid == 0:
        for s in range(N):
            lm[s] = 0
        lm[2] = 100
    tk.synchronize()
    tk.atomic_add(lm, 0, lid + 1)
    tk.atomic_sub(lm, 1, 1)
    tk.atomic_min(lm, 2, 50 + lid % 7)
    tk.atomic_max(lm, 3, lid % 5 + g)
    olds[i, 0] = tk.atomic_exchange(lm, 4 + lid, lid + 2)       # own slot: old value 0
    olds[i, 1] = tk.atomic_cas(lm, 4 + lid, lid + 2, 7)         # succeeds: returns lid + 2
    olds[i, 2] = tk.atomic_cas(lm, 4 + lid, 99, 8)              # fails: returns 7
    tk.synchronize()
    if lid == 0:
        for s in range(N):
            tk.atomic_add(out, g * N + s, lm[s])                # global atomics across groups


@tk.kernel
def local_bit_atomics(out, N: tk.constexpr):
    lid = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(out.dtype, (N,))
    if lid == 0:
        lm[0] = 0
        lm[1] = ~lm[0]                         # all ones
        lm[2] = 0
    tk.synchronize()
    tk.atomic_or(lm, 0, 1 << (lid % 20))
    tk.atomic_and(lm, 1, ~(1 << (lid % 13)))
    tk.atomic_xor(lm, 2, lid * 3)
    tk.synchronize()
    if lid == 0:
        for s in range(3):
            out[tk.index(tk.Group, tk.Linear) * N + s] = lm[s]


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64])
def test_local_atomics_are_plain_read_modify_writes(dtype):
    """A group's local memory is touched by that group's items only, which the CPU runs one
    after another on one thread: its atomics compile to plain operations, with the same
    results (and returned old values) as the interpreter's."""
    wg, groups, N = 16, 37, 20
    args = [np.zeros(groups * N, dtype), np.zeros((wg * groups, 3), dtype), N]
    src = local_atomics.source("CPU", *args, ndrange=wg * groups, workgroupsize=wg)
    body = src.split("tk_group_body")[1]
    assert "tk_plain_add_" in body and "tk_plain_cas_" in body and "tk_atomic_add_" in body
    assert "tk_atomic_cas_" not in body
    cpu, ref = _both(local_atomics, wg, args, wg * groups)
    assert np.array_equal(cpu[0], ref[0]) and np.array_equal(cpu[1], ref[1])
    got = cpu[0].reshape(groups, N).astype(np.float64)
    lids = np.arange(wg)
    for g in range(groups):
        assert got[g, 0] == (lids + 1).sum()
        assert got[g, 1] == (-wg if np.dtype(dtype).kind != "u" else float(np.array(-wg).astype(dtype)))
        assert got[g, 2] == 50 and got[g, 3] == 4 + g
        assert (got[g, 4:4 + wg] == 7).all()
    olds = cpu[1].astype(np.float64)
    assert (olds[:, 0] == 0).all() and (olds[:, 1] == np.tile(lids + 2, groups)).all() and (olds[:, 2] == 7).all()


@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
def test_local_bitwise_atomics(dtype):
    wg, groups, N = 24, 5, 3
    args = [np.zeros(groups * N, dtype), N]
    cpu, ref = _both(local_bit_atomics, wg, args, wg * groups)
    assert np.array_equal(cpu[0], ref[0])
    lids = np.arange(wg, dtype=np.uint64)
    want_or = np.bitwise_or.reduce(np.uint64(1) << (lids % 20))
    want_and = np.array(-1).astype(dtype)
    for b in np.unique(lids % 13):
        want_and &= ~np.array(1 << int(b)).astype(dtype)
    want_xor = np.bitwise_xor.reduce(lids * 3)
    got = cpu[0].reshape(groups, N)
    assert (got[:, 0] == want_or.astype(dtype)).all()
    assert (got[:, 1] == want_and).all()
    assert (got[:, 2] == want_xor.astype(dtype)).all()


@tk.kernel
def float_cas_bits(out, olds):
    lid = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(out.dtype, (4,))
    pm = tk.private(out.dtype, (1,))
    if lid == 0:
        lm[0] = 0.0
        lm[1] = -0.0
    pm[0] = 0.0
    tk.synchronize()
    if lid == 1:
        olds[0] = tk.atomic_cas(lm, 0, -0.0, 5.0)     # bits differ: no swap
        olds[1] = tk.atomic_cas(lm, 1, -0.0, 6.0)     # same bits: swap
        olds[2] = tk.atomic_cas(pm, 0, 0.0, 9.0)      # private memory too
    tk.synchronize()
    if lid == 1:
        out[0] = lm[0]
        out[1] = lm[1]
        out[2] = pm[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plain_float_cas_compares_bits(dtype):
    """Compare-and-swap compares the bit patterns (-0.0 is not 0.0), like the atomic one."""
    args = [np.full(3, -1, dtype), np.full(3, -1, dtype)]
    assert "tk_plain_cas_" in float_cas_bits.source("CPU", *args, ndrange=4, workgroupsize=4)
    cpu, ref = _both(float_cas_bits, 4, args, 4)
    assert np.array_equal(cpu[0], ref[0]) and np.array_equal(cpu[1], ref[1])
    np.testing.assert_array_equal(cpu[0], [0.0, 6.0, 9.0])
    assert not np.signbit(cpu[0][0]) and np.signbit(cpu[1][1])


@tk.kernel
def global_counts(hist, keys: tk.Const):
    i = tk.index()
    for r in range(i, keys.shape[0], tk.ndrange()[0]):
        tk.atomic_add(hist, keys[r], 1)
        tk.atomic_max(hist, hist.shape[0] - 1, keys[r])


def test_relaxed_global_atomics_count_exactly_across_threads():
    keys = np.random.default_rng(3).integers(0, 63, 200_000).astype(np.int32)
    hist = np.zeros(64, np.int32)
    global_counts(tk.CPU(threads=2), 32)(hist, keys, ndrange=32 * 64)
    want = np.bincount(keys, minlength=64)
    want[63] = keys.max()
    np.testing.assert_array_equal(hist, want)


# ----------------------------------------------------------------------------- recomputed locals

@tk.kernel
def remat_locals(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    i = tk.index()
    lm = tk.localmem(tk.float64, (8,))
    lm[lid] = x[i]
    tk.synchronize()
    out[i] = lm[lid // 2] * (lid + 1)      # an entry of an earlier item (valid in partial groups)


@tk.kernel
def remat_read_by_group(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    i = tk.index()
    lm = tk.localmem(tk.float64, (8,))
    lm[lid] = x[i]
    tk.synchronize()
    first = tk.uniform(lid)                 # group-level code reads the item-level local
    out[i] = lm[lid // 2] * (lid + 1) + first


@pytest.mark.parametrize("n", [32, 29])
def test_recomputed_locals_need_no_storage(n):
    x = np.random.default_rng(4).standard_normal(32)
    args = [np.zeros(32), x]
    src = remat_locals.source("CPU", *args, ndrange=n, workgroupsize=8)
    assert "v_lid" not in src
    cpu, ref = _both(remat_locals, 8, args, n)
    assert np.array_equal(cpu[0], ref[0])
    want = np.array([x[(i // 8) * 8 + (i % 8) // 2] * (i % 8 + 1) for i in range(n)])
    np.testing.assert_array_equal(cpu[0][:n], want)
    cpu, ref = _both(remat_read_by_group, 8, args, n)
    assert np.array_equal(cpu[0], ref[0])
    np.testing.assert_array_equal(cpu[0][:n], want)   # (the group's first item has lid 0)


# ----------------------------------------------------------------------------- blocked group order

@tk.kernel
def group_ids(out, count):
    p = tk.index(tk.Global, tk.Cartesian)
    g = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    tk.synchronize()                       # grouped
    out[p] = g * 1000 + lid
    if lid == 0:
        tk.atomic_add(count, g, 1)


@pytest.mark.parametrize("nd,wg", [((45, 131), (4, 8)), ((300, 18), (4, 2)), ((3, 37, 70), (1, 4, 4)),
                                   ((70, 9, 9), (4, 2, 2))])
@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_group_order_runs_every_group_once(nd, wg, threads):
    """Launches of 2-D/3-D grids visit the groups in 8 x 8 blocks (codegen/c.py:
    group_walk), partial blocks and partial groups at the edges: every group runs
    exactly once, with its own ids, on one thread and on two (every launch here has >= 4096
    items); also with the pthread pool of compilers without OpenMP."""
    ng = [(n + w - 1) // w for n, w in zip(nd, wg)]
    out = np.full(nd, -1, np.int64)
    count = np.zeros(int(np.prod(ng)), np.int32)
    group_ids(tk.CPU(threads=threads), wg)(out, count, ndrange=nd)
    idx = np.indices(nd)
    g = np.zeros(nd, np.int64)
    lid = np.zeros(nd, np.int64)
    for d in range(len(nd)):
        g = g * ng[d] + idx[d] // wg[d]
        lid = lid * wg[d] + idx[d] % wg[d]
    np.testing.assert_array_equal(out, g * 1000 + lid)
    np.testing.assert_array_equal(count, 1)
    src = group_ids.source("CPU", out, count, ndrange=nd, workgroupsize=wg)
    assert "tk_run_groups(a, ngroups * t / nt, ngroups * (t + 1) / nt)" in src and "(o * nA + i) * nB + j" in src


# ----------------------------------------------------------------------------- lanes loops unrolled after vectorizing

def test_lanes_unroll_count():
    """Below a full group's trip count (GCC must not unroll before vectorizing), at least the
    vectorized loop's trip count for float32 lanes (so that it unrolls completely), at most 8."""
    from tinykernels.codegen.c import lanes_unroll
    assert [lanes_unroll(n) for n in (1, 2, 4, 16, 64, 256)] == [1, 1, 2, 8, 8, 8]
    for n in (2, 4, 8, 16, 32, 64):
        assert lanes_unroll(n) < n and lanes_unroll(n) >= min(8, n // 16)


# ----------------------------------------------------------------------------- group_reduce after group_scan

@tk.kernel
def scan_then_reduce(out, tot, x: tk.Const, xi: tk.Const, PER: tk.constexpr):
    p = tk.index(tk.Global, tk.Linear)
    grp = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    carry = x[0] * 0.0
    imax = tk.int32(-1000)
    for k in range(PER):
        v = x[(p * PER + k) % x.shape[0]]
        out[p, k] = carry + tk.group_scan(v, "add")          # inclusive
        carry += tk.group_reduce(v, "add")                    # = the last item's scan
        w = xi[(p * 7 + k) % xi.shape[0]]
        e = tk.group_scan(w, "max", inclusive=False)
        imax = max(imax, tk.group_reduce(w, "max") + e * 0)   # = last exclusive scan max last w
        v = v * 2.0
        s2 = tk.group_reduce(v, "add")                        # v changed since the scan: a real reduction
        out[p, PER + k] = s2
    tot[grp, 0] = carry
    tot[grp, 1] = imax
    if lid == 0:
        out[p, 2 * PER] = carry


@pytest.mark.parametrize("nd,wg", [((128,), (32,)), ((100,), (32,)), ((6, 20), (2, 8))])
def test_group_reduce_after_group_scan_reuses_the_scan(nd, wg):
    """``group_reduce(v)`` right after ``group_scan(v)`` of the same op takes the last valid
    item's scan (codegen/c.py: scan_totals): bit for bit the interpreter's result, in full
    and partial, 1-D and 2-D groups; a reduction of a value changed since the scan does not."""
    n = int(np.prod(nd))
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(997) * 1e3).astype(np.float32)
    xi = rng.integers(-500, 500, 331).astype(np.int32)
    ngroups = int(np.prod([(a + b - 1) // b for a, b in zip(nd, wg)]))
    args = [np.zeros((n, 9), np.float32), np.zeros((ngroups, 2), np.float32), x, xi, 4]
    src = scan_then_reduce.source("CPU", *args, ndrange=nd, workgroupsize=wg)
    assert src.count("group_reduce: the last item's group_scan") == 2
    cpu, ref = _both(scan_then_reduce, wg, args, nd)
    assert np.array_equal(cpu[0], ref[0]) and np.array_equal(cpu[1], ref[1])
