"""The CPU's lanes shape for grouped kernels (docs/cpu.md): inside each barrier piece the
work items are the innermost loop, per-item loops run at group level with per-item trip
counts as the mask. Every kernel here is checked against NumPy and, bit for bit, against the
interpreter (which runs work items one by one in the Python reference semantics)."""
import math

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


def _lanes_in_source(kernel, wg, args, ndrange) -> bool:
    return "work items as lanes" in kernel.source("CPU", *args, ndrange=ndrange, workgroupsize=wg)


@tk.kernel
def rmsnorm(out, X: tk.Const, w: tk.Const, D: tk.constexpr, eps):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    WG = tk.groupsize()[0]
    acc = 0.0
    for j in range(lid, D, WG):          # per-item start: a mask on the last trips
        x = X[row, j]
        acc += x * x
    tot = tk.group_reduce(acc, "add")
    scale = 1.0 / math.sqrt(tot / D + eps)
    for j in range(lid, D, WG):
        out[row, j] = X[row, j] * scale * w[j]


@pytest.mark.parametrize("wg,D", [(64, 1000), (32, 4096), (48, 20), (16, 1)])
def test_strided_per_item_loop_and_reduce(wg, D):
    """Group sizes that do and do not divide the row; rows shorter than the group (items
    with no trips at all)."""
    rng = np.random.default_rng(wg + D)
    R = 5
    X = rng.standard_normal((R, D)).astype(np.float32)
    w = rng.standard_normal(D).astype(np.float32)
    args = [np.zeros_like(X), X, w, D, 1e-5]
    assert _lanes_in_source(rmsnorm, wg, args, R * wg)
    cpu, ref = _both(rmsnorm, wg, args, R * wg)
    assert np.array_equal(cpu[0], ref[0])
    X64 = X.astype(np.float64)
    want = X64 / np.sqrt((X64 ** 2).mean(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(cpu[0], want, rtol=1e-5, atol=1e-6)


@tk.kernel
def divergent(out, x: tk.Const, n):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    s = 0.0
    if lid % 3 != 1:                             # per-item condition around loops
        for a in range(lid % 5, lid % 5 + lid % 7):          # per-item start and stop
            for b in range(a, 2 * a + 1, 2):                 # inner range from the outer variable
                s += x[(i + a * b) % n] * (a - b)
    else:
        for a in range(3):                       # uniform loop under a per-item condition
            s -= x[(i + a) % n]
    for c in range(9, lid % 4, -3):              # negative step, per-item stop
        s = s * 0.5 + c
    q = tk.private(tk.float64, (4,))             # a private array in a lanes piece
    for c in range(4):
        q[c] = s + c
    out[i] = q[lid % 4] + tk.group_reduce(s, "max")


def _divergent_ref(x, wg, n_items):
    out = np.zeros(n_items)
    n = x.size
    smax = {}
    vals = np.zeros(n_items)
    for i in range(n_items):
        lid = i % wg
        s = 0.0
        if lid % 3 != 1:
            for a in range(lid % 5, lid % 5 + lid % 7):
                for b in range(a, 2 * a + 1, 2):
                    s += x[(i + a * b) % n] * (a - b)
        else:
            for a in range(3):
                s -= x[(i + a) % n]
        for c in range(9, lid % 4, -3):
            s = s * 0.5 + c
        vals[i] = s + lid % 4
        smax[i // wg] = max(smax.get(i // wg, -np.inf), s)
    for i in range(n_items):
        out[i] = vals[i] + smax[i // wg]
    return out


@pytest.mark.parametrize("wg,n_items", [(16, 64), (12, 50)])
def test_divergent_per_item_loops_partial_groups(wg, n_items):
    x = np.random.default_rng(3).standard_normal(37)
    args = [np.zeros(64), x, 37]
    assert _lanes_in_source(divergent, wg, args, n_items)
    cpu, ref = _both(divergent, wg, args, n_items)
    assert np.array_equal(cpu[0], ref[0])
    np.testing.assert_allclose(cpu[0][:n_items], _divergent_ref(x, wg, n_items), rtol=1e-12)
    assert (cpu[0][n_items:] == 0).all()


@tk.kernel
def tiled_matmul(C, A: tk.Const, B: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    As = tk.localmem(A.dtype, (T, T))
    Bs = tk.localmem(B.dtype, (T, T))
    acc = tk.private(C.dtype, (1,))
    acc[0] = 0.0
    n = A.shape[1]
    for t0 in range(0, n, T):                    # barriers inside a uniform loop
        As[li, lj] = A[i, t0 + lj] if i < A.shape[0] and t0 + lj < n else 0.0
        Bs[li, lj] = B[t0 + li, j] if t0 + li < n and j < B.shape[1] else 0.0
        tk.synchronize()
        for q in range(T):                       # uniform loop between barriers: hoisted
            acc[0] += As[li, q] * Bs[q, lj]
        tk.synchronize()
    if i < C.shape[0] and j < C.shape[1]:
        C[i, j] = acc[0]


def test_barriers_in_uniform_loop_private_array_2d_groups():
    """(Full groups: every item loads its part of the tiles; the matrix edges are masked.)"""
    rng = np.random.default_rng(4)
    A = rng.standard_normal((37, 45))
    B = rng.standard_normal((45, 29))
    args = [np.zeros((37, 29)), A, B, 8]
    assert _lanes_in_source(tiled_matmul, (8, 8), args, (40, 32))
    cpu, ref = _both(tiled_matmul, (8, 8), args, (40, 32))
    assert np.array_equal(cpu[0], ref[0])
    np.testing.assert_allclose(cpu[0], A @ B, rtol=1e-12, atol=1e-12)


@tk.kernel
def collectives(r_add, r_mul, r_min, r_max, r_and, r_or, s_inc, s_ex, x: tk.Const, bits: tk.Const,
                m: tk.constexpr):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    v = 0.0
    for k in range(lid, m, tk.groupsize()[0]):   # a lanes piece feeding every collective
        v += x[k] * (i % 3 + 1)
    b = bits[i % bits.shape[0]]
    r_add[i] = tk.group_reduce(v, "add")
    r_mul[i] = tk.group_reduce(v * 0.001 + 1.0, "mul")
    r_min[i] = tk.group_reduce(v, "min")
    r_max[i] = tk.group_reduce(v, "max")
    r_and[i] = tk.group_reduce(b, "and")
    r_or[i] = tk.group_reduce(b, "or")
    s_inc[i] = tk.group_scan(v, "add")
    s_ex[i] = tk.group_scan(v, "add", inclusive=False)


@pytest.mark.parametrize("wg,n_items", [(8, 32), (8, 29)])
def test_every_collective_after_a_lanes_piece(wg, n_items):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(21)
    bits = rng.integers(0, 2 ** 31, 13).astype(np.int32)
    args = [np.zeros(32) for _ in range(4)] + [np.zeros(32, np.int32) for _ in range(2)] + \
           [np.zeros(32) for _ in range(2)] + [x, bits, 21]
    assert _lanes_in_source(collectives, wg, args, n_items)
    cpu, ref = _both(collectives, wg, args, n_items)
    for c, r in zip(cpu[:8], ref[:8]):
        assert np.array_equal(c, r)
    v = np.array([sum(x[k] * (i % 3 + 1) for k in range(i % wg, 21, wg)) for i in range(n_items)])
    for g in range(0, n_items, wg):
        sl = slice(g, min(g + wg, n_items))
        seg = v[sl]
        bseg = bits[np.arange(sl.start, sl.stop) % 13]
        np.testing.assert_allclose(cpu[0][sl], seg.sum(), rtol=1e-12)
        np.testing.assert_allclose(cpu[1][sl], np.prod(seg * 0.001 + 1.0), rtol=1e-12)
        assert (cpu[2][sl] == seg.min()).all() and (cpu[3][sl] == seg.max()).all()
        assert (cpu[4][sl] == np.bitwise_and.reduce(bseg)).all()
        assert (cpu[5][sl] == np.bitwise_or.reduce(bseg)).all()
        np.testing.assert_allclose(cpu[6][sl], np.cumsum(seg), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cpu[7][sl], np.cumsum(seg) - seg, rtol=1e-12, atol=1e-12)


@tk.kernel
def with_return(out, x: tk.Const, D: tk.constexpr):
    lid = tk.index(tk.Local, tk.Linear)
    if lid == 3:
        return
    acc = 0.0
    for j in range(lid, D, 4):
        acc += x[j]
    out[tk.index()] = acc


def test_item_loops_with_a_return_keep_the_item_outer_shape():
    """An early return needs one work item's statements back to back (done flags)."""
    x = np.arange(10.0)
    args = [np.zeros(8), x, 10]
    assert not _lanes_in_source(with_return, 4, args, 8)
    cpu, ref = _both(with_return, 4, args, 8)
    assert np.array_equal(cpu[0], ref[0])


@tk.kernel
def return_then_lanes(out, x: tk.Const, D: tk.constexpr):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float64, (8,))
    if lid % 3 == 0:
        return                                   # item-outer piece: sets done flags
    buf[lid] = 1.0
    tk.synchronize()
    acc = 0.0
    for j in range(lid, D, 8):                   # lanes piece after the return
        acc += x[j]
    out[tk.index()] = acc


def test_lanes_piece_after_an_early_return_skips_returned_items():
    """Found by the fuzzer (seed 7771215): the lanes pieces ignored the done flags."""
    x = np.arange(1.0, 41.0)
    args = [np.full(16, -1.0), x, 40]
    assert _lanes_in_source(return_then_lanes, 8, args, 16)
    cpu, ref = _both(return_then_lanes, 8, args, 16)
    assert np.array_equal(cpu[0], ref[0])
    want = np.array([-1.0 if i % 8 % 3 == 0 else x[i % 8::8].sum() for i in range(16)])
    np.testing.assert_array_equal(cpu[0], want)


# ----------------------------------------------------------------------------- vectorized collectives

@tk.kernel
def int_collectives(r_add, r_mul, r_min, r_max, r_and, r_or, s_inc, s_ex, s_max, x: tk.Const, m: tk.constexpr):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    v = tk.int32(0)
    for k in range(lid, m, tk.groupsize()[0]):
        v += x[k] * (i % 5 + 1)
    r_add[i] = tk.group_reduce(v, "add")
    r_mul[i] = tk.group_reduce(v | 1, "mul")          # wraps: exact in any order
    r_min[i] = tk.group_reduce(v, "min")
    r_max[i] = tk.group_reduce(v, "max")
    r_and[i] = tk.group_reduce(v, "and")
    r_or[i] = tk.group_reduce(v, "or")
    s_inc[i] = tk.group_scan(v, "add")
    s_ex[i] = tk.group_scan(v, "add", inclusive=False)
    s_max[i] = tk.group_scan(v, "max")


@pytest.mark.parametrize("wg,n_items", [(8, 32), (16, 29), (5, 23)])
def test_integer_collectives_are_simd_and_exact(wg, n_items):
    """Integer collectives are ``omp simd`` reductions / inscan scans (exact in any order):
    bit for bit the interpreter's, and NumPy's with int32 wrapping, partial groups included."""
    rng = np.random.default_rng(9)
    x = rng.integers(-2 ** 20, 2 ** 20, 37).astype(np.int32)
    args = [np.zeros(32, np.int32) for _ in range(9)] + [x, 37]
    src = int_collectives.source("CPU", *args, ndrange=n_items, workgroupsize=wg)
    assert src.count("#pragma omp simd reduction(inscan,") == 3
    assert src.count("#pragma omp simd reduction(") == 9
    cpu, ref = _both(int_collectives, wg, args, n_items)
    for c, r in zip(cpu[:9], ref[:9]):
        assert np.array_equal(c, r)
    v = np.array([sum(int(x[k]) * (i % 5 + 1) for k in range(i % wg, 37, wg)) for i in range(n_items)],
                 np.int64).astype(np.int32)
    for g in range(0, n_items, wg):
        sl = slice(g, min(g + wg, n_items))
        seg = v[sl]
        with np.errstate(over="ignore"):
            assert (cpu[0][sl] == seg.sum(dtype=np.int32)).all()
            assert (cpu[1][sl] == np.prod(seg | 1, dtype=np.int32)).all()
            assert (cpu[6][sl] == np.cumsum(seg, dtype=np.int32)).all()
            assert (cpu[7][sl] == np.cumsum(seg, dtype=np.int32) - seg).all()
        assert (cpu[2][sl] == seg.min()).all() and (cpu[3][sl] == seg.max()).all()
        assert (cpu[4][sl] == np.bitwise_and.reduce(seg)).all()
        assert (cpu[5][sl] == np.bitwise_or.reduce(seg)).all()
        assert (cpu[8][sl] == np.maximum.accumulate(seg)).all()


@tk.kernel
def float_reduce_2d(out, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    v = x[i, j] * 3.0
    out[i, j] = tk.group_reduce(v, "add") + tk.group_scan(v, "add")


@tk.kernel(fastmath=True)
def float_reduce_2d_fm(out, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    v = x[i, j] * 3.0
    out[i, j] = tk.group_reduce(v, "add") + tk.group_reduce(v, "max")


def test_float_collectives_vectorize_only_in_fastmath_kernels():
    """A default kernel's float collectives stay sequential in local order (bit-identical to
    the interpreter, whose order the SPEC's NumPy equivalence fixes); a fastmath kernel's float
    reductions are ``omp simd`` reductions, within the reassociation bound of NumPy's result."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 20)).astype(np.float32)
    args = [np.zeros((12, 20), np.float32), x]
    src = float_reduce_2d.source("CPU", *args, ndrange=(11, 19), workgroupsize=(4, 8))
    assert "omp simd reduction" not in src
    cpu, ref = _both(float_reduce_2d, (4, 8), args, (11, 19))
    assert np.array_equal(cpu[0], ref[0])
    src = float_reduce_2d_fm.source("CPU", *args, ndrange=(11, 19), workgroupsize=(4, 8))
    assert src.count("#pragma omp simd reduction(+:acc)") == 1 and "reduction(max:acc)" in src
    cpu, _ = _both(float_reduce_2d_fm, (4, 8), args, (11, 19))
    v = x.astype(np.float64)[:11, :19] * 3.0
    for gi in range(0, 11, 4):
        for gj in range(0, 19, 8):
            seg = v[gi:gi + 4, gj:gj + 8]
            want = seg.sum() + seg.max()
            got = cpu[0][gi:min(gi + 4, 11), gj:min(gj + 8, 19)]
            assert np.all(np.abs(got - want) <= 64 * np.finfo(np.float32).eps * (np.abs(seg).sum() + abs(seg.max())))
