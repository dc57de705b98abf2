"""Atomics (SPEC 3) ported test by test from Numba's numba/cuda/tests/cudapy/test_atomics.py
(histograms into shared and global memory, 2-D tuple indices with mixed index types, max/min
over many groups, the NaN location/value cases, returned old values, compare_and_swap),
Taichi's tests/python/test_atomic.py and test_local_atomics.py (old values of a shared counter
are a permutation of ``k * step``, an atomic whose result is unused is not dropped, atomics
under ``if``, atomics on a work item's private array) and NVIDIA Warp's warp/tests/test_atomic.py
(every op on 1-D to 3-D arrays, one element hit by every thread). Every op x every SPEC dtype
(int32, uint32, int64, uint64, float32, float64) on CPU, INTERP, INTERP:CHECK, CL and WEBGPU;
where a backend lacks the dtype (WebGPU: 64-bit) the test checks the documented clear error.

Where SPEC differs from upstream: SPEC has no atomic inc/dec (Numba's wrapping ``inc``/``dec``
and ``nanmin``/``nanmax`` are not ported); ``atomic_and/or/xor`` are integer-only (a float array
is a ``tk.CompileError``). ``atomic_min/max`` with a NaN keep what the array holds, as Numba's
``atomic.min/max`` (and Python's ``min``/``max`` with the stored value first)."""
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params
from gen_kernels import make_kernel as _make_kernel

_GEN = os.path.join(tempfile.gettempdir(), "tinykernels_ported_suites_atomics")
RNG = np.random.default_rng(18)

DTYPES = [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64]
INT_DTYPES = DTYPES[:4]
OPS = ["add", "sub", "max", "min", "and", "or", "xor", "exchange"]
PYOP = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "max": lambda a, b: max(a, b),
        "min": lambda a, b: min(a, b), "and": lambda a, b: a & b, "or": lambda a, b: a | b,
        "xor": lambda a, b: a ^ b, "exchange": lambda a, b: b}
N = 32


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def kernel(name, params, body, **kw):
    return _make_kernel(_GEN, name, params, body, **kw)


def run(be, k, *args, **kw):
    """Launch ``k`` on ``be`` with NumPy ``args`` moved there; the arrays afterwards."""
    dev = [tk.asarray(a.copy(), backend=be) if isinstance(a, np.ndarray) else a for a in args]
    k(be)(*dev, **kw)
    tk.synchronize(be)
    return [d.numpy() for d, a in zip(dev, args) if isinstance(a, np.ndarray)]


def skip_or_refused(be, dt):
    """True where ``be`` lacks ``dt``: the caller then checks the documented error instead."""
    return not (be.supports(dt) and be.supports_atomic(dt))


def expect_dtype_error(be, k, dt, *args, **kw):
    """A backend without ``dt``: a clear error naming the dtype (never a wrong result)."""
    with pytest.raises((tk.CompileError, tk.LaunchError, ValueError, TypeError)) as e:
        run(be, k, *args, **kw)
    assert np.dtype(dt).name in str(e.value), str(e.value)


def operands(op, dt, n):
    """Per-item operands for ``op`` on ``dt`` and the initial value of every bin."""
    if op in ("and", "or", "xor"):
        bits = 8 * np.dtype(dt).itemsize
        one = np.array(1, dt)
        v = np.array([one << (t % bits) for t in range(n)], dt)
        if op == "and":
            return ~v, np.array(~np.array(0, dt), dt)
        return v, np.array(0 if op == "or" else 5, dt)
    if op in ("max", "min", "exchange"):
        lo = -1000 if np.dtype(dt).kind in "if" else 0
        return RNG.integers(lo, 1000, n).astype(dt), np.array(7, dt)
    return np.full(n, 3, dt), np.array(11, dt)              # add/sub: old values are init +- k*3


def check_chain(op, dt, init, idx, v, old, final):
    """The returned old values are the states of one serial order per bin: the multiset of old
    values plus the final one equals the initial value plus op(old_t, v_t) of every item."""
    with np.errstate(over="ignore"):
        for b in np.unique(idx):
            mine = idx == b
            olds = [dt(o) for o in old[mine]]
            nexts = [dt(PYOP[op](dt(o), dt(x))) for o, x in zip(old[mine], v[mine])]
            assert sorted(olds + [dt(final[b])]) == sorted([dt(init[b])] + nexts), (b, olds, nexts)


def reference(op, dt, init, idx, v):
    """The final array: ``op`` folded over each bin's operands (order-free for these ops)."""
    out = init.copy()
    with np.errstate(over="ignore"):
        for t in range(len(v)):
            if op != "exchange":
                out[idx[t]] = dt(PYOP[op](out[idx[t]], v[t]))
    return out


def op_kernel(op, where):
    """Numba's atomic_binary_1dim_shared / _global: item t applies ``op`` to bin idx[t], keeps
    the old value; the shared variant stages the bins in local memory between two barriers."""
    call = f"tk.atomic_{op}({'sm' if where == 'local' else 'out'}, idx[t], v[t])"
    if where == "local":
        body = ["t = tk.index(tk.Local, tk.Linear)", f"sm = tk.localmem(out.dtype, {N})",
                "sm[t] = out[t]", "tk.synchronize()", f"old[t] = {call}", "tk.synchronize()",
                "out[t] = sm[t]"]
    else:
        body = ["t = i", f"old[t] = {call}"]
    return kernel(f"atomic_{op}_{where}", ["out", "old", "idx: tk.Const", "v: tk.Const"], body)


@pytest.mark.parametrize("where", ["local", "global"])
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OPS)
def test_atomic_op_into_bins_returns_old_values(be, op, dt, where):
    """test_atomic_add/sub/and/or/max/min(_shared/_global) of Numba with every dtype: 32 items hit
    32 bins at random (several items per bin): the bins as NumPy folds them, and the old values
    one serial order per bin (Taichi's returned-old check, generalised to every op)."""
    k = op_kernel(op, where)
    if op in ("and", "or", "xor") and np.dtype(dt).kind == "f":
        if not be.supports(dt):
            return expect_dtype_error(be, k, dt, np.zeros(N, dt), np.zeros(N, dt), np.zeros(N, np.int32),
                                      np.zeros(N, dt), ndrange=N)
        with pytest.raises(tk.CompileError, match=f"integer array.*{np.dtype(dt).name}"):
            run(be, k, np.zeros(N, dt), np.zeros(N, dt), np.zeros(N, np.int32), np.zeros(N, dt), ndrange=N)
        return
    v, init0 = operands(op, dt, N)
    idx = RNG.integers(0, N // 4, N).astype(np.int32)        # 8 bins used, about 4 items each
    init = np.full(N, init0, dt)
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, init, np.zeros(N, dt), idx, v, ndrange=N, workgroupsize=N)
    out, old, _, _ = run(be, k, init, np.zeros(N, dt), idx, v, ndrange=N, workgroupsize=N)
    if op == "exchange":
        for b in np.unique(idx):
            assert out[b] in v[idx == b]
        untouched = np.setdiff1d(np.arange(N), idx)
        np.testing.assert_array_equal(out[untouched], init[untouched])
    else:
        np.testing.assert_array_equal(out, reference(op, dt, init, idx, v))
    check_chain(op, dt, init, idx, v, old, out)


@pytest.mark.parametrize("cast", ["uint32", "uint64"])
@pytest.mark.parametrize("where", ["local", "global"])
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_atomic_add_2d_tuple_index_mixed_int_types(be, dt, where, cast):
    """test_atomic_add2/add3 (and _float_2/_3, _double_2/_3, _double_global_2/3): a (4, 8) group
    adds 1 at its own (tx, ty), then at (tx, cast(ty)): add3 casts ty to uint64, so the tuple
    mixes index types (WebGPU has no uint64: the cast is the documented CompileError)."""
    body = ["tx, ty = tk.index(tk.Local, tk.Cartesian)"]
    if where == "local":
        body += ["sm = tk.localmem(A.dtype, (4, 8))", "sm[tx, ty] = A[tx, ty]", "tk.synchronize()",
                 "tk.atomic_add(sm, (tx, ty), 1)", f"tk.atomic_add(sm, (tx, tk.{cast}(ty)), 1)",
                 "tk.synchronize()", "A[tx, ty] = sm[tx, ty]"]
    else:
        body += ["tk.atomic_add(A, (tx, ty), 1)", f"tk.atomic_add(A, (tx, tk.{cast}(ty)), 1)"]
    k = kernel(f"atomic_add_2d_{where}_{cast}", ["A"], body)
    a = RNG.integers(0, 32, (4, 8)).astype(dt)
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, a, ndrange=(4, 8), workgroupsize=(4, 8))
    if not be.supports(getattr(np, cast)):
        return expect_dtype_error(be, k, getattr(np, cast), a, ndrange=(4, 8), workgroupsize=(4, 8))
    (out,) = run(be, k, a, ndrange=(4, 8), workgroupsize=(4, 8))
    np.testing.assert_array_equal(out, a + 2)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_atomic_extreme_over_many_groups(be, op, dt):
    """check_atomic_max/min: a [32, 32] launch folds vals[tx, bx] into res[0]; the result is
    NumPy's max/min of every value (lo/hi as upstream: signed ranges cross zero)."""
    k = kernel(f"atomic_{op}_grid", ["res", "vals: tk.Const"],
               ["tx = tk.index(tk.Local, tk.Linear)", "bx = tk.index(tk.Group, tk.Linear)",
                f"tk.atomic_{op}(res, 0, vals[tx, bx])"])
    lo = 0 if np.dtype(dt).kind == "u" else -65535
    vals = RNG.integers(lo, 65535, (32, 32)).astype(dt)
    res = np.array([0 if op == "max" else 65535], dt)
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, res, vals, ndrange=1024, workgroupsize=32)
    (out, _) = run(be, k, res, vals, ndrange=1024, workgroupsize=32)
    want = vals.max() if op == "max" else vals.min()
    want = max(want, res[0]) if op == "max" else min(want, res[0])
    np.testing.assert_array_equal(out, [want])


@pytest.mark.parametrize("where", ["local", "global"])
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["max", "min"])
def test_atomic_extreme_nan_location_and_value(be, op, dt, where):
    """_test_atomic_minmax_nan_location / _nan_val and *_returns_old_nan_*: with a NaN stored,
    or a NaN given, the array keeps what it holds (min/max(a, b) == a when either is NaN), and
    the old value comes back; atomic_max_double_shared: the same through local memory."""
    body = ["t = i"]
    if where == "local":
        body += ["sm = tk.localmem(x.dtype, 1)", "sm[0] = x[0]", "tk.synchronize()",
                 f"x[1] = tk.atomic_{op}(sm, 0, v)", "tk.synchronize()", "x[0] = sm[0]"]
    else:
        body += [f"x[1] = tk.atomic_{op}(x, 0, v)"]
    k = kernel(f"atomic_{op}_nan_{where}", ["x", "v"], body)
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, np.zeros(2, dt), dt(1), ndrange=1, workgroupsize=1)
    for stored, given in ((np.nan, 1.0), (10.0, np.nan), (10.0, 1.0), (1.0, 10.0)):
        (x,) = run(be, k, np.array([stored, -5.0], dt), dt(given), ndrange=1, workgroupsize=1)
        want = stored if np.isnan(stored) or np.isnan(given) else (max if op == "max" else min)(stored, given)
        np.testing.assert_array_equal(x, np.array([want, stored], dt))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_atomic_compare_and_swap_fills_only_matching(be, dt):
    """test_atomic_compare_and_swap: half the slots hold the sentinel (-99, or its unsigned
    wrap), half -1; cas(res, gid, sentinel, ary[gid]) fills exactly the sentinel slots, and the
    old value (sentinel or -1) comes back to every item (10 groups of 10, as upstream)."""
    k = kernel("atomic_cas_fill", ["res", "old", "ary: tk.Const", "sentinel"],
               ["if i < res.shape[0]:", "    old[i] = tk.atomic_cas(res, i, sentinel, ary[i])"])
    n = 100
    with np.errstate(over="ignore"):
        sent, other = np.array(-99).astype(dt)[()], np.array(-1).astype(dt)[()]
    res = np.where(RNG.permutation(n) < n // 2, sent, other).astype(dt)
    ary = RNG.integers(1, 10, n).astype(dt)
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, res, np.zeros(n, dt), ary, sent, ndrange=n, workgroupsize=10)
    out, old, _ = run(be, k, res, np.zeros(n, dt), ary, sent, ndrange=n, workgroupsize=10)
    fill = res == sent
    np.testing.assert_array_equal(out, np.where(fill, ary, other))
    np.testing.assert_array_equal(old, res)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_atomic_cas_loop_counter_hands_out_every_ticket(be, dt):
    """Warp/Taichi lock-free counter: every item increments one element by a compare-and-swap
    loop (no plain read of the racing element); the tickets are 0..n-1 once each."""
    k = kernel("atomic_cas_ticket", ["c", "ticket"],
               ["seen = c.dtype(0)", "while True:",
                "    cur = tk.atomic_cas(c, 0, seen, seen + 1)", "    if cur == seen:", "        break",
                "    seen = cur", "ticket[i] = seen"])
    n = 64
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, np.zeros(1, dt), np.zeros(n, dt), ndrange=n)
    c, ticket = run(be, k, np.zeros(1, dt), np.zeros(n, dt), ndrange=n, workgroupsize=16)
    assert c[0] == n
    np.testing.assert_array_equal(np.sort(ticket), np.arange(n, dtype=dt))


@pytest.mark.parametrize("dt", [np.int32, np.float32], ids=lambda d: np.dtype(d).name)
def test_atomic_add_global_old_values_are_every_step(be, dt):
    """Taichi's run_atomic_add_global_case (i32 step 42, f32 step 4.2): x[i] = atomic_add(c, step)
    over 128 items; c ends at n * step and the sorted old values are k * step (float32: within
    float32 rounding of the running sum, rel 1e-5 as upstream's approx)."""
    k = kernel("atomic_add_ticket", ["c", "x", "step"], ["x[i] = tk.atomic_add(c, 0, step)"])
    n, step = 128, (42 if dt == np.int32 else 4.2)
    c, x = run(be, k, np.zeros(1, dt), np.zeros(n, dt), dt(step), ndrange=n, workgroupsize=32)
    want = np.arange(n) * np.asarray(step, np.float64)
    if dt == np.int32:
        assert c[0] == n * step
        np.testing.assert_array_equal(np.sort(x), want)
    else:
        np.testing.assert_allclose(c[0], n * step, rtol=1e-5)
        np.testing.assert_allclose(np.sort(x), want, rtol=1e-5, atol=1e-5)


def test_atomic_with_unused_result_is_kept_and_under_if(be):
    """test_atomic_add_expr_evaled (result unused: not optimised out) and
    test_atomic_add_with_if_simplify (the old value used on one side of an ``if``, not on the
    other; k = old + s on the taken side)."""
    k = kernel("atomic_if_simplify", ["x", "c", "boundary"],
               ["tk.atomic_add(c, 0, 42)", "if i > boundary:", "    s = tk.private(tk.int32, 1)",
                "    s[0] = i", "    j = tk.atomic_add(s, 0, i)", "    x[i] = j + s[0]", "else:",
                "    tk.atomic_add(x, i, i)", "    x[i] += 42"])
    n = 128
    x, c = run(be, k, np.zeros(n, np.int32), np.zeros(1, np.int32), n // 2, ndrange=n)
    i = np.arange(n)
    np.testing.assert_array_equal(x, np.where(i > n // 2, 3 * i, i + 42))
    assert c[0] == 42 * n


@pytest.mark.parametrize("dt", [np.int32, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_atomics_on_a_private_array(be, dt):
    """test_local_atomics (Taichi's atomics on a kernel-local variable: x += 1 / atomic ops on a
    private value): every op on a work item's private array returns the old value and updates it."""
    ops = ["add", "sub", "max", "min"] + (["and", "or", "xor"] if np.dtype(dt).kind == "i" else [])
    body = ["p = tk.private(out.dtype, 1)", "p[0] = out.dtype(i)", "k = 0"]
    for op in ops:
        body += [f"old[i, k] = tk.atomic_{op}(p, 0, out.dtype(3))", "k += 1"]
    body += ["old[i, k] = tk.atomic_exchange(p, 0, out.dtype(9))", "k += 1",
             "old[i, k] = tk.atomic_cas(p, 0, out.dtype(9), out.dtype(4))", "out[i] = p[0]"]
    k = kernel(f"private_atomics_{np.dtype(dt).kind}", ["out", "old"], body)
    n = 8
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, np.zeros(n, dt), np.zeros((n, len(ops) + 2), dt), ndrange=n)
    out, old = run(be, k, np.zeros(n, dt), np.zeros((n, len(ops) + 2), dt), ndrange=n)
    for t in range(n):
        p, want = dt(t), []
        for op in ops + ["exchange"]:
            want.append(p)
            p = dt(PYOP[op](p, dt(9 if op == "exchange" else 3)))
        want.append(p)
        np.testing.assert_array_equal(old[t], np.array(want, dt))
        assert out[t] == 4


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_atomic_ops_every_thread_one_element_nd(be, dt, ndim):
    """Warp's test_atomic (add/min/max on 1-D, 2-D, 3-D arrays, every thread at one element):
    sums of 1..n, the smallest and the largest value, with tuple indices of the array's rank."""
    at = "0" if ndim == 1 else "(" + ", ".join(["0"] * ndim) + ")"
    k = kernel(f"atomic_one_element_{ndim}d", ["s", "lo", "hi", "v: tk.Const"],
               [f"tk.atomic_add(s, {at}, v[i])", f"tk.atomic_min(lo, {at}, v[i])",
                f"tk.atomic_max(hi, {at}, v[i])"])
    n = 100
    v = RNG.integers(1, 100, n).astype(dt)
    shape = (2,) * ndim
    s, lo, hi = np.zeros(shape, dt), np.full(shape, 1000, dt), np.zeros(shape, dt)
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, s, lo, hi, v, ndrange=n)
    s, lo, hi, _ = run(be, k, s, lo, hi, v, ndrange=n)
    first = (0,) * ndim
    assert (s[first], lo[first], hi[first]) == (v.sum(dtype=dt), v.min(), v.max())
    rest = np.ones(shape, bool)
    rest[first] = False
    assert not s[rest].any() and (lo[rest] == 1000).all() and not hi[rest].any()


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.uint8, np.float16, np.bool_], ids=lambda d: np.dtype(d).name)
def test_atomic_on_a_dtype_outside_spec_is_a_compile_error(dt):
    """SPEC: atomics take int32, uint32, int64, uint64, float32, float64; anything else is a
    tk.CompileError naming the dtype (Numba refuses them at typing too)."""
    k = kernel("atomic_add_any", ["A"], ["tk.atomic_add(A, 0, A[i])"])
    with pytest.raises(tk.CompileError, match=np.dtype(dt).name):
        run(tk.CPU(), k, np.zeros(4, dt), ndrange=4)


@pytest.mark.parametrize("where", ["global", "local", "private"])
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_atomic_cas_on_floats_compares_bits(be, dt, where):
    """compare_and_swap on float arrays (Numba's takes the bits of float32/float64 too): the
    comparison is of the bits, as the hardware's, on every memory space and backend: a NaN
    matches the same NaN, -0.0 does not match 0.0."""
    body = ["t = i"]
    if where == "global":
        body += ["old[t] = tk.atomic_cas(x, t, e[t], n[t])"]
    else:
        alloc = "tk.localmem(x.dtype, 4)" if where == "local" else "tk.private(x.dtype, 4)"
        body += [f"m = {alloc}", "if t == 0:", "    for j in range(4):", "        m[j] = x[j]", "tk.synchronize()",
                 "if t == 0:", "    for j in range(4):", "        old[j] = tk.atomic_cas(m, j, e[j], n[j])",
                 "        x[j] = m[j]"]
    k = kernel(f"atomic_cas_float_{where}", ["x", "old", "e: tk.Const", "n: tk.Const"], body)
    x = np.array([np.nan, -0.0, 0.0, 1.5], dt)
    e = np.array([np.nan, 0.0, 0.0, 1.5], dt)
    nn = np.array([1.0, 2.0, 3.0, 4.0], dt)
    if skip_or_refused(be, dt):
        return expect_dtype_error(be, k, dt, x, np.zeros(4, dt), e, nn, ndrange=4, workgroupsize=4)
    got, old, _, _ = run(be, k, x, np.zeros(4, dt), e, nn, ndrange=4, workgroupsize=4)
    np.testing.assert_array_equal(got, np.array([1.0, -0.0, 3.0, 4.0], dt))
    assert np.signbit(got[1]) and np.isnan(old[0])
    np.testing.assert_array_equal(old[1:], x[1:])


@pytest.mark.parametrize("target", ["CUDA", "Metal", "ROCm", "CL", "WEBGPU"])
def test_private_array_atomics_render_no_device_atomic(target):
    """An atomic on a tk.private array is a plain read-modify-write in every generated source:
    OpenCL rejected ``atomic_add`` on a private pointer (the kernel did not build), CUDA/HIP
    atomics on thread-local memory are undefined, and Metal cast the pointer to ``device``."""
    k = kernel("private_counter", ["out"],
               ["p = tk.private(tk.int32, 2)", "p[0] = 0", "p[1] = i",
                "out[i] = tk.atomic_add(p, 1, 5) + tk.atomic_max(p, 0, 3) + p[1]"])
    src = k.source(target, np.zeros(4, np.int32), ndrange=4)
    entry = src[src.index("tk_kernel("):] if target != "WEBGPU" else src
    assert not [ln for ln in entry.splitlines() if "atomic" in ln.lower() and _GEN not in ln], entry
    (out,) = run(tk.CPU(), k, np.zeros(4, np.int32), ndrange=4)
    np.testing.assert_array_equal(out, np.arange(4) + np.arange(4) + 5)
