"""Shared memory, barriers, collectives, reductions and whole kernels (SPEC 2 and 3), ported test by
test from Numba's numba/cuda/tests/cudapy/ test_sync.py (useless/simple/2-D cooperative shared
memory, syncthreads_count/and/or), test_sm.py (several shared arrays of different dtypes in one
kernel, shared arrays in loops), test_localmem.py (a large per-thread scratch array, 2-D),
test_laplace.py (Jacobi sweeps with a shared-memory error reduction), test_matmul.py (the
shared-memory tiled matmul), test_montecarlo.py (counter-based random numbers, a hit count) and
test_intrinsics.py (fma, float16 add/mul, popc/brev written with SPEC's bit operators); Taichi's
tests/python/ test_reduction.py (sum/min/max of many sizes), test_bit_operations.py (and, or,
xor, not, shifts of every int type) and test_loops.py (negative steps, empty ranges, the loop
variable after the loop); NVIDIA Warp's warp/tests/ test_launch.py (ranks 1..3, size 0, a rank
too many) and test_reduce-style group reductions and scans (SPEC's group_reduce/group_scan).
CPU, INTERP, INTERP:CHECK, CL and WEBGPU; exact against NumPy where SPEC makes it exact.

Where SPEC differs from upstream: no dynamic shared memory, syncthreads_count/and/or are
``tk.group_reduce(v, "add"/"and"/"or")``, no popc/clz/ffs/brev intrinsics (written with the
operators), no cbrt, launches have at most three dimensions (Warp's 4-D launch is a
``tk.LaunchError``)."""
import math
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params
from gen_kernels import make_kernel

_GEN = os.path.join(tempfile.gettempdir(), "tinykernels_ported_suites_kernels")

RNG = np.random.default_rng(1818)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def run(be, k, *args, wg=None, **kw):
    """Launch ``k`` on ``be`` with copies of the NumPy ``args``; every array argument afterwards."""
    dev = [tk.asarray(a.copy(), backend=be) if isinstance(a, np.ndarray) else a for a in args]
    (k(be) if wg is None else k(be, wg))(*dev, **kw)
    tk.synchronize(be)
    return [d.numpy() for d, a in zip(dev, args) if isinstance(a, np.ndarray)]


def fdt(be):
    return np.float64 if be.supports_float64 else np.float32


# --- test_sync.py ------------------------------------------------------------------------------

@tk.kernel
def useless_sync(a):
    tk.synchronize()


@tk.kernel
def simple_smem(out):
    t = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    sm = tk.localmem(tk.int32, 100)
    sm[t] = t
    tk.synchronize()
    out[tk.index()] = sm[n - 1 - t]


@tk.kernel
def coop_smem2d(out):
    i, j = tk.index(tk.Local, tk.Cartesian)
    sm = tk.localmem(out.dtype, (10, 20))
    sm[i, j] = (i + 1) / (j + 1)
    tk.synchronize()
    out[i, j] = sm[i, j]


def test_useless_synchronize(be):
    """test_useless_syncthreads: a kernel that only synchronizes launches and leaves its array."""
    (a,) = run(be, useless_sync, np.arange(4, dtype=np.int32), ndrange=4, workgroupsize=4)
    np.testing.assert_array_equal(a, np.arange(4))


def test_simple_smem_reversed(be):
    """test_simple_smem: each item stores its id in shared memory, then reads its mirror's."""
    (out,) = run(be, simple_smem, np.zeros(100, np.int32), ndrange=100, wg=100)
    np.testing.assert_array_equal(out, np.arange(100)[::-1])


def test_coop_smem2d(be):
    """test_coop_smem2d: a 10 x 20 group fills a 2-D shared array with (i + 1) / (j + 1)."""
    dt = np.float32
    (out,) = run(be, coop_smem2d, np.zeros((10, 20), dt), ndrange=(10, 20), wg=(10, 20))
    i, j = np.indices((10, 20))
    np.testing.assert_array_equal(out, ((i + 1) / (j + 1)).astype(dt))


@tk.kernel
def sync_count_and_or(cnt, every, some, x: tk.Const):
    i = tk.index()
    p = x[i] > 0
    c = tk.group_reduce(int(p), "add")
    a = tk.group_reduce(p, "and")
    o = tk.group_reduce(p, "or")
    g = tk.index(tk.Group, tk.Linear)
    if tk.index(tk.Local, tk.Linear) == 0:
        cnt[g] = c
        every[g] = a
        some[g] = o


def test_syncthreads_count_and_or_as_group_reduce(be):
    """test_syncthreads_count / _and / _or: the count of items whose predicate holds, and
    whether all / any hold, per group (groups all-true, all-false, mixed)."""
    wg = 32
    x = np.zeros(4 * wg, np.int32)
    x[:wg] = 1
    x[2 * wg:3 * wg:3] = 1
    x[3 * wg:] = RNG.integers(0, 2, wg)
    cnt, every, some, _ = run(be, sync_count_and_or, np.zeros(4, np.int32), np.zeros(4, np.bool_),
                              np.zeros(4, np.bool_), x, ndrange=x.size, workgroupsize=wg)
    p = (x > 0).reshape(4, wg)
    np.testing.assert_array_equal(cnt, p.sum(1))
    np.testing.assert_array_equal(every, p.all(1))
    np.testing.assert_array_equal(some, p.any(1))


# --- test_sm.py / test_localmem.py -------------------------------------------------------------

@tk.kernel
def two_shared_dtypes(outi, outf):
    t = tk.index(tk.Local, tk.Linear)
    si = tk.localmem(tk.int32, 16)
    sf = tk.localmem(tk.float32, (2, 16))
    si[t] = t * 3
    sf[0, t] = t * 0.5
    sf[1, t] = -t
    tk.synchronize()
    for k in range(2):                    # shared arrays read in a loop (Numba issue 953)
        outf[k, t] = sf[k, 15 - t] + si[15 - t]
    outi[t] = si[(t + 1) % 16]


def test_several_shared_arrays_of_different_dtypes(be):
    """test_sm: an int32 and a float32 2-D shared array in one kernel do not overlap."""
    outi, outf = run(be, two_shared_dtypes, np.zeros(16, np.int32), np.zeros((2, 16), np.float32),
                     ndrange=16, workgroupsize=16)
    t = np.arange(16)
    np.testing.assert_array_equal(outi, ((t + 1) % 16) * 3)
    r = t[::-1]
    np.testing.assert_array_equal(outf, np.stack([r * 0.5 + r * 3, -r + r * 3]).astype(np.float32))


@tk.kernel
def localmem_scratch(b, a: tk.Const):
    i = tk.index()
    c = tk.private(tk.int32, 1000)
    for k in range(c.shape[0]):
        c[k] = a[k] + i
    acc = 0
    for k in range(c.shape[0]):
        acc += c[k]
    b[i] = acc


@tk.kernel
def localmem_2d(b):
    i = tk.index()
    c = tk.private(b.dtype, (5, 6))
    for x in range(5):
        for y in range(6):
            c[x, y] = x * y + i
    b[i] = c[4, 5] - c[1, 2]


def test_localmem_large_and_2d(be):
    """test_localmem's culocal (a 1000-element per-thread array) and culocal2d (a 2-D one)."""
    a = np.arange(1000, dtype=np.int32)
    b, _ = run(be, localmem_scratch, np.zeros(4, np.int32), a, ndrange=4)
    np.testing.assert_array_equal(b, a.sum() + 1000 * np.arange(4))
    (b2,) = run(be, localmem_2d, np.zeros(4, np.int32), ndrange=4)
    np.testing.assert_array_equal(b2, np.full(4, 20 - 2))


# --- test_laplace.py ---------------------------------------------------------------------------

@tk.kernel
def jacobi_step(anew, err, a: tk.Const, tpb: tk.constexpr):
    j, i = tk.index(tk.Global, tk.Cartesian)
    tj, ti = tk.index(tk.Local, tk.Cartesian)
    sm = tk.localmem(a.dtype, tpb * tpb)
    e = a.dtype(0)
    if 0 < j < a.shape[0] - 1 and 0 < i < a.shape[1] - 1:
        anew[j, i] = 0.25 * (a[j, i + 1] + a[j, i - 1] + a[j - 1, i] + a[j + 1, i])
        e = abs(anew[j, i] - a[j, i])
    t = tj * tpb + ti
    sm[t] = e
    tk.synchronize()
    s = tpb * tpb // 2
    while s > 0:                          # the shared-memory max tree of the upstream kernel
        if t < s:
            sm[t] = max(sm[t], sm[t + s])
        tk.synchronize()
        s //= 2
    if t == 0:
        tk.atomic_max(err, 0, sm[0])


def test_laplace_jacobi_with_shared_error_reduction(be):
    """test_laplace: Jacobi sweeps of Laplace's equation (a sine on the boundary) with the
    largest change reduced in shared memory per block then by atomic max; every sweep exactly as
    NumPy's (the same float operations in the same order)."""
    dt = np.float32 if be.name.startswith(("WebGPU", "Interp")) else fdt(be)
    n, tpb = 16, 8
    a = np.zeros((n, n), dt)
    a[0, :] = np.sin(np.pi * np.arange(n) / (n - 1)).astype(dt)
    a[-1, :] = a[0, :] * dt(0.5)
    ref = a.copy()
    for _ in range(3):
        anew, err, _ = run(be, jacobi_step, a.copy(), np.zeros(1, dt), a, tpb, ndrange=(n, n), workgroupsize=(tpb, tpb))
        want = ref.copy()
        want[1:-1, 1:-1] = dt(0.25) * (ref[1:-1, 2:] + ref[1:-1, :-2] + ref[:-2, 1:-1] + ref[2:, 1:-1])
        np.testing.assert_array_equal(anew, want)
        assert err[0] == np.abs(want - ref).max()
        a, ref = anew, want


# --- test_matmul.py ----------------------------------------------------------------------------

@tk.kernel
def tiled_matmul(c, a: tk.Const, b: tk.Const, tpb: tk.constexpr):
    x, y = tk.index(tk.Global, tk.Cartesian)
    tx, ty = tk.index(tk.Local, tk.Cartesian)
    sa = tk.localmem(a.dtype, (tpb, tpb))
    sb = tk.localmem(b.dtype, (tpb, tpb))
    n = a.shape[1]
    acc = c.dtype(0)
    for k0 in range(0, n, tpb):
        sa[tx, ty] = a[x, k0 + ty] if x < a.shape[0] and k0 + ty < n else 0
        sb[tx, ty] = b[k0 + tx, y] if k0 + tx < n and y < b.shape[1] else 0
        tk.synchronize()
        for k in range(tpb):
            acc += sa[tx, k] * sb[k, ty]
        tk.synchronize()
    if x < c.shape[0] and y < c.shape[1]:
        c[x, y] = acc


@pytest.mark.parametrize("shape", [(16, 16, 16), (19, 13, 7)])
def test_tiled_matmul(be, shape):
    """test_matmul: the shared-memory tiled matmul (blocks of 8 here), on a multiple of the tile
    and on ragged sizes (the partial tiles padded with zeros; every item reaches the barriers);
    float32 against NumPy within the dtype's tolerance for an n-term dot product."""
    m, n, p = shape
    a = RNG.standard_normal((m, n)).astype(np.float32)
    b = RNG.standard_normal((n, p)).astype(np.float32)
    c, _, _ = run(be, tiled_matmul, np.zeros((m, p), np.float32), a, b, 8,
                  ndrange=(-(-m // 8) * 8, -(-p // 8) * 8), workgroupsize=(8, 8))
    want = a.astype(np.float64) @ b.astype(np.float64)
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(c, want, rtol=0, atol=2 * n * eps * (np.abs(a) @ np.abs(b)).max())


# --- test_montecarlo.py ------------------------------------------------------------------------

@tk.kernel
def montecarlo_pi(hits, key):
    i = tk.index()
    x = tk.random.uniform(key, 2 * i)
    y = tk.random.uniform(key, 2 * i + 1)
    if x * x + y * y <= 1.0:
        tk.atomic_add(hits, 0, 1)


def test_montecarlo_pi_hit_count(be):
    """test_montecarlo: points from counter-based uniforms, hits counted atomically; the count
    is exactly the host's from the same key and counters (SPEC 8), and near pi / 4."""
    n = 4096
    key = tk.random.key(42)
    (hits,) = run(be, montecarlo_pi, np.zeros(1, np.int32), key, ndrange=n, workgroupsize=64)
    u = tk.random.uniform(key, np.arange(2 * n, dtype=np.uint64)).astype(np.float32)
    x, y = u[0::2], u[1::2]
    assert hits[0] == int((x * x + y * y <= np.float32(1.0)).sum())
    assert abs(4 * hits[0] / n - math.pi) < 0.1


# --- test_intrinsics.py ------------------------------------------------------------------------

@tk.kernel
def fma_k(r, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    r[i] = tk.fma(a[i], b[i], c[i])


@tk.kernel
def half_ops(s, p, a: tk.Const, b: tk.Const):
    i = tk.index()
    s[i] = a[i] + b[i]
    p[i] = a[i] * b[i]


@tk.kernel
def popc_brev(pc, rev, x: tk.Const):
    i = tk.index()
    v = x[i]
    n = 0
    r = v & 0
    for k in range(32):
        n += (v >> k) & 1
        r = (r << 1) | ((v >> k) & 1)
    pc[i] = n
    rev[i] = r


def test_fma_rounds_once(be):
    """test_fma_f4/f8: fma(a, b, c) rounds a*b + c once: with a*b's low bits lost by a separate
    rounding, the fused result keeps them (exact in float64 for float32 operands)."""
    dt = np.float32
    a = np.array([1 + 2.0 ** -12, 3.0, -1.5], dt)
    b = np.array([1 + 2.0 ** -12, 0.5, 2.0], dt)
    c = np.array([-(1 + 2.0 ** -11), 1.0, 0.25], dt)
    r, *_ = run(be, fma_k, np.zeros(3, dt), a, b, c, ndrange=3)
    np.testing.assert_array_equal(r, np.array([2.0 ** -24, 2.5, -2.75], dt))
    assert dt(dt(a[0] * b[0]) + c[0]) == 0                 # rounded twice, the low bit is lost


def _fma_exact(a, b, c):
    """a * b + c rounded once to float32 (exact rationals; round half to even)."""
    from fractions import Fraction
    out = []
    for x, y, z in zip(a, b, c):
        f = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        r = np.float32(float(f))
        near = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
        out.append(min(near, key=lambda q: (abs(Fraction(float(q)) - f), int(q.view(np.uint32)) & 1)))
    return np.array(out, np.float32)


def test_fma_correctly_rounded_over_exponents(be):
    """test_fma_f4 widened: products from 2^-60 to 2^60 with addends that cancel them to the last
    bits, far below (only the sign breaks a tie) or far above them: the exactly rounded
    result on every backend (WebGPU's builtin fma rounded the product first on lavapipe; it is
    emulated, see docs/webgpu.md). Results stay out of the subnormal range
    (tests/test_webgpu.py checks those)."""
    n = 600
    a = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-30, 30, n)).astype(np.float32)
    b = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-30, 30, n)).astype(np.float32)
    c = (-(a.astype(np.float64) * b) * (1 + RNG.integers(-3, 4, n) * 2.0 ** -23)).astype(np.float32)
    c[::3] = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-90, 90, n))[::3].astype(np.float32)
    a[:2], b[:2], c[:2] = 1 + 2.0 ** -12, 1 + 2.0 ** -12, [2.0 ** -80, -(2.0 ** -80)]   # ties broken by c
    r, *_ = run(be, fma_k, np.zeros(n, np.float32), a, b, c, ndrange=n)
    want = _fma_exact(a, b, c)
    assert (np.abs(want[want != 0]) > np.finfo(np.float32).tiny).all()
    np.testing.assert_array_equal(r, want)


def test_float16_add_mul_as_numpy(be):
    """test_hadd / test_hmul: float16 arithmetic rounds to float16 as NumPy's does (SPEC:
    computed in float32, rounded on store; float32 is wide enough that this is exact); a
    backend without float16 refuses the dtype by name."""
    a = RNG.standard_normal(64).astype(np.float16) * np.float16(30)
    b = RNG.standard_normal(64).astype(np.float16)
    a[:2], b[:2] = np.float16(65504), np.float16(2)        # overflow to inf, as NumPy's
    if not be.supports(np.float16):
        with pytest.raises((tk.CompileError, tk.LaunchError, TypeError, ValueError), match="float16"):
            run(be, half_ops, np.zeros(64, np.float16), np.zeros(64, np.float16), a, b, ndrange=64)
        return
    with np.errstate(over="ignore"):
        s, p, _, _ = run(be, half_ops, np.zeros(64, np.float16), np.zeros(64, np.float16), a, b, ndrange=64)
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(p, a * b)


@pytest.mark.parametrize("dt", [np.uint32, np.int64], ids=lambda d: np.dtype(d).name)
def test_popc_and_brev_from_operators(be, dt):
    """test_popc_u4/u8 and test_brev_u4: bit counts and 32-bit reversals written with shifts,
    and, or (no intrinsics in SPEC) equal Python's bin(x).count('1') and reversed bits."""
    if not be.supports(dt):
        return
    x = np.array([0, 1, 0xF0F0F0F0, 0xFFFFFFFF, 0x80000001, 12345678], dt)
    pc, rev, _ = run(be, popc_brev, np.zeros(6, np.int32), np.zeros(6, dt), x, ndrange=6)
    np.testing.assert_array_equal(pc, [bin(int(v)).count("1") for v in x])
    np.testing.assert_array_equal(rev, [int(format(int(v), "032b")[::-1], 2) for v in x])


# --- Taichi test_bit_operations.py -------------------------------------------------------------

@tk.kernel
def bit_ops(out, a: tk.Const, b: tk.Const, s: tk.Const):
    i = tk.index()
    out[0, i] = a[i] & b[i]
    out[1, i] = a[i] | b[i]
    out[2, i] = a[i] ^ b[i]
    out[3, i] = ~a[i]
    out[4, i] = a[i] << s[i]
    out[5, i] = a[i] >> s[i]


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_bit_operations_every_int_type(be, dt):
    """test_bit_and/or/xor/not/shl/shr/sar: NumPy's results (arithmetic right shift of negative
    signed values, left shifts wrapping into the sign bit) for shift counts below the width."""
    if not be.supports(dt):
        return
    info = np.iinfo(dt)
    n = 64
    a = RNG.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    a[:3] = [info.min, info.max, 1]
    b = RNG.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    s = RNG.integers(0, info.bits, n).astype(dt)
    s[:3] = info.bits - 1
    (out, *_) = run(be, bit_ops, np.zeros((6, n), dt), a, b, s, ndrange=n)
    want = np.stack([a & b, a | b, a ^ b, ~a, a << s, a >> s]).astype(dt)
    np.testing.assert_array_equal(out, want)


# --- Taichi test_loops.py ----------------------------------------------------------------------

@tk.kernel
def loops(out, n):
    i = tk.index()
    acc = 0
    for k in range(n, 0, -1):             # negative step
        acc = acc * 3 + k
    out[0, i] = acc
    m = 0
    for k in range(5, n):                 # empty when n <= 5
        m += 1
    out[1, i] = m
    last = -1
    for k in range(2, 2 * n + i, 3):
        last = k
    out[2, i] = last                      # the loop variable's last value, kept after the loop
    t = 0
    for a in range(4):
        for b in range(a, -1, -1):
            if b == 1:
                continue
            if a * b > 4:
                break
            t += a * 10 + b
    out[3, i] = t


@pytest.mark.parametrize("n", [0, 3, 7])
def test_loops_like_python(be, n):
    """test_loops: range with a negative step, an empty range, the loop variable's value after
    the loop, nested loops with break/continue: Python's results."""
    (out,) = run(be, loops, np.zeros((4, 3), np.int64 if be.supports(np.int64) else np.int32), n, ndrange=3)
    for i in range(3):
        acc = 0
        for k in range(n, 0, -1):
            acc = acc * 3 + k
        last = -1
        for k in range(2, 2 * n + i, 3):
            last = k
        t = 0
        for a in range(4):
            for b in range(a, -1, -1):
                if b == 1:
                    continue
                if a * b > 4:
                    break
                t += a * 10 + b
        assert list(out[:, i]) == [acc, max(0, n - 5), last, t]


# --- Taichi test_reduction.py, Warp group reductions and scans ----------------------------------

@tk.kernel
def reduce_all(tot, lo, hi, x: tk.Const):
    i = tk.index()
    v = x[i] if i < x.shape[0] else x[0]
    s = tk.group_reduce(v if i < x.shape[0] else x.dtype(0), "add")
    mn = tk.group_reduce(v, "min")
    mx = tk.group_reduce(v, "max")
    if tk.index(tk.Local, tk.Linear) == 0:
        tk.atomic_add(tot, 0, s)
        tk.atomic_min(lo, 0, mn)
        tk.atomic_max(hi, 0, mx)


@pytest.mark.parametrize("n", [1, 31, 1000])
@pytest.mark.parametrize("dt", [np.int32, np.float32], ids=lambda d: np.dtype(d).name)
def test_reduction_sum_min_max(be, dt, n):
    """Taichi's test_reduction (sum, min, max over sizes that are no multiple of the group; the
    items past the data stay in the collectives and add 0 / repeat x[0]): ints exactly, float32
    within n * eps of the magnitude sum (upstream: approx)."""
    x = (RNG.integers(-50, 50, n) if dt == np.int32 else RNG.standard_normal(n)).astype(dt)
    wg = 64
    tot, lo, hi, _ = run(be, reduce_all, np.zeros(1, dt), np.full(1, 1e6, dt), np.full(1, -1e6, dt), x,
                         ndrange=-(-n // wg) * wg, workgroupsize=wg, )
    assert lo[0] == x.min() and hi[0] == x.max()
    if dt == np.int32:
        assert tot[0] == x.sum()
    else:
        assert abs(tot[0] - x.astype(np.float64).sum()) <= n * np.finfo(dt).eps * np.abs(x).sum()


def scans(op):
    return make_kernel(_GEN, f"scan_{op}", ["inc", "exc", "x: tk.Const"],
                       [f"inc[i] = tk.group_scan(x[i], {op!r})", f"exc[i] = tk.group_scan(x[i], {op!r}, inclusive=False)"])


IDENT = {"add": 0, "mul": 1, "min": None, "max": None, "and": -1, "or": 0}
UFUNC = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum,
         "and": np.bitwise_and, "or": np.bitwise_or}


@pytest.mark.parametrize("op", list(UFUNC))
@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.float32], ids=lambda d: np.dtype(d).name)
def test_group_scan_inclusive_exclusive(be, dt, op):
    """Warp's tile/launch scans: tk.group_scan per group of 16, inclusive and exclusive (the
    exclusive one starts at the op's identity: 0, 1, all ones, the dtype's largest/smallest),
    against NumPy's accumulate; products of small values so nothing overflows."""
    if op in ("and", "or") and dt == np.float32:
        return
    n, wg = 48, 16
    x = (RNG.integers(1, 3, n) if op == "mul" else RNG.integers(0, 200, n)).astype(dt)
    inc, exc, _ = run(be, scans(op), np.zeros(n, dt), np.zeros(n, dt), x, ndrange=n, workgroupsize=wg)
    g = x.reshape(-1, wg)
    want = UFUNC[op].accumulate(g, axis=1)
    np.testing.assert_array_equal(inc.reshape(-1, wg), want)
    if op == "min":
        ident = np.inf if dt == np.float32 else np.iinfo(dt).max
    elif op == "max":
        ident = -np.inf if dt == np.float32 else np.iinfo(dt).min
    else:
        ident = np.array(IDENT[op]).astype(dt)
    want_exc = np.concatenate([np.full((g.shape[0], 1), ident, dt), want[:, :-1]], axis=1)
    np.testing.assert_array_equal(exc.reshape(-1, wg), want_exc)


# --- Warp test_launch.py -----------------------------------------------------------------------

@tk.kernel
def coords(out):
    I = tk.index(tk.Global, tk.Cartesian)
    out[I] = tk.index()


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (0,), (3, 0), (2, 0, 4)])
def test_launch_dims_and_size_zero(be, shape):
    """test_launch_1d..3d: every item of a 1-, 2-, 3-D launch writes its linear (row-major) index
    at its coordinates; a zero-sized dimension launches nothing (SPEC 2: not an error)."""
    out = np.full(shape, -1, np.int32)
    (got,) = run(be, coords, out, ndrange=shape)
    np.testing.assert_array_equal(got, np.arange(out.size, dtype=np.int32).reshape(shape))


def test_launch_4d_is_a_launch_error(be):
    """test_launch_4d: SPEC launches have 1 to 3 dimensions; a fourth is a tk.LaunchError that
    names the kernel."""
    with pytest.raises(tk.LaunchError, match="coords"):
        run(be, coords, np.zeros((2, 2, 2, 2), np.int32), ndrange=(2, 2, 2, 2))
