"""AMDGPU.jl's device tests (test/device/ synchronization.jl, wavefront.jl, regression.jl,
indexing.jl, memory.jl, vadd.jl), ported test by test:

* synchronization.jl: ``sync_workgroup_count/and/or`` (a barrier that also counts / and-s /
  or-s a predicate over the group, CUDA's ``__syncthreads_count/and/or``) over two groups of
  each of upstream's sizes 10, 40, 70, 240, 723, 32, 64, 128, 256, 512 and 1024 (here 10 and
  723 on the compiled backends, 10, 70, 64 and 256 on the interpreter: one build per size,
  for the CI budget): ``tk.group_reduce`` of ``int(p != 0)`` with ``"add"``, ``"and"`` and
  ``"or"``, after local memory written by items 0 and 1 and a ``tk.synchronize()`` (every item
  reads 10 + 20); the predicates all 0, all 1, odd items, all -1 (nonzero is true), the item's
  own index, and one item different;
* wavefront.jl: ``wfred``/``wfscan`` of 64 values (one group of 64) with ``+``, ``max``,
  ``min``, ``&``, ``|`` for int32, int64, uint32 and uint64 (exact) and ``+``, ``max``, ``min``
  for float32 and float64, against ``reduce``/``accumulate``; ``wfany``/``wfall``/``wfsame``
  (skipped upstream, ``@test_skip``) as ``"or"``/``"and"`` reductions and a ``max == min`` test;
* regression.jl: issue 931 (a 4-D permuted strided layout, ``out = beta * out + alpha *
  conj(A)``, complex64 written as real and imaginary float32 pairs) and issue 1015 (a
  triangular loop whose inner bounds start at the outer variable, as ``for`` and as
  ``while``, 594 rows in groups of 256 with a hand guard);
* indexing.jl: ``groupsize = (1, 2, 3)``, ``gridsize = (4, 5, 6)`` groups: the group size
  and the number of groups as a kernel sees them, and the item and group indices positive
  (here within their ranges);
* memory.jl "Memory: Static" (one float32 through a one-element local array) and vadd.jl
  (``c = a + b`` of 1024 float32, in groups of 64).

AMDGPU's x dimension is the fastest; here the last one is (SPEC 2), so ``(x, y, z)`` sizes
become ``(z, y, x)``. 1-based indices become 0-based. Exact against NumPy (integer reductions,
max/min, float sums of integers); float sums and the regression cases within float32 rounding.
Collectives, local memory and non-power-of-two groups are where backends differ: CPU, INTERP,
INTERP:CHECK, CL and WEBGPU (64-bit types skip on WebGPU, which has none).

Where SPEC differs from upstream (not ported, or ported as SPEC reads): no wavefronts
(``sync_wavefront`` and the wavefront size; a wavefront op is a group collective over a
group of the wavefront's size); ``tk.group_reduce`` has no ``xor`` (SPEC 3), so ``wfred(⊻)``
is not ported (an ``atomic_xor`` reduction is in test_ported_suites_gpuarrays.py); no complex
numbers (issue 931's ComplexF32 is a pair of float32 arrays); ``alloc_special``'s region and
private address spaces, device ``malloc``/``memcpy!``/``memset!`` and ``frexp``/``ldexp``/
``sincospi`` (math.jl) have no counterpart.

Found here and fixed: a ``@tk.func`` choosing its collective by a constexpr (``if op == 0:
return tk.group_reduce(v, "add")`` ... ``return tk.group_reduce(v, "or")``) was a CompileError
for float arguments ("op 'or' needs integers or bools"), on every backend: the statements after
a return that a constant condition chose were lowered (and type-checked) before being dropped,
although docs/language.md says the func ends there. The same held for any code after a
``return``, ``break`` or ``continue`` in its block (a float ``&``, an int64 product on WebGPU)
and for the body of ``while <false constexpr>:``. The frontend now stops lowering a block at
such a statement and drops a loop whose condition is a false constant
(test_code_after_a_folded_return_is_not_compiled)."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, put


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def anybe(request):
    return tk.backend(request.param)


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    return tk.backend(request.param)


def needs(be, *dtypes):
    for dt in dtypes:
        if not be.supports(np.dtype(dt)):
            pytest.skip(f"{be.name} has no {np.dtype(dt).name}")


# --- synchronization.jl ----------------------------------------------------------------------

@tk.func
def count_and_or(out, k, i, p):
    """upstream's sync_workgroup_count/and/or of predicate ``p`` into ``out[k, 0..2, i]``"""
    nz = int(p != 0)
    out[k, 0, i] = tk.group_reduce(nz, "add")
    out[k, 1, i] = tk.group_reduce(nz, "and")
    out[k, 2, i] = tk.group_reduce(nz, "or")


@tk.kernel
def sync_workgroup(sync_test, out):
    i = tk.index(tk.Global, tk.Linear)
    l = tk.index(tk.Local, tk.Linear)
    sm = tk.localmem(tk.int32, (2,))
    if l == 0:
        sm[0] = 10
    elif l == 1:
        sm[1] = 20
    tk.synchronize()
    sync_test[i] = sm[0] + sm[1]
    count_and_or(out, 0, i, tk.int32(0))                    # all items pass 0
    count_and_or(out, 1, i, tk.int32(1))                    # all pass 1
    count_and_or(out, 2, i, tk.int32(l % 2))                # odd items pass 1
    count_and_or(out, 3, i, tk.int32(-1))                   # all pass -1 (true)
    count_and_or(out, 4, i, tk.int32(l))                    # their own index
    count_and_or(out, 5, i, tk.int32(0 if l == 0 else 1))   # item 0 passes 0, the others 1
    count_and_or(out, 6, i, tk.int32(1 if l == 0 else 0))   # item 0 passes 1, the others 0


BLOCKS = [10, 40, 70, 240, 723, 32, 64, 128, 256, 512, 1024]


def test_sync_workgroup_count_and_or(anybe):
    """synchronization.jl: two groups of each size; count = the number of nonzero predicates,
    and / or = whether all / any are nonzero (the compiled backends run the sizes 10 and 723,
    the interpreter 10, 70, 64 and 256 (its check mode 10 and 64): one build per size, for
    the CI budget)"""
    if isinstance(anybe, tk.Interpreter):
        sizes = [10, 70, 64, 256] if anybe.name == "INTERP" else [10, 64]
    else:
        sizes = [b for b in (10, 723) if b <= anybe.max_workgroupsize]
    assert set(sizes) <= set(BLOCKS)
    for b in sizes:
        sync_test = put(anybe, np.full(2 * b, -7, np.int32))
        out = put(anybe, np.full((7, 3, 2 * b), -7, np.int32))
        sync_workgroup(anybe, b)(sync_test, out, ndrange=2 * b)
        tk.synchronize(anybe)
        np.testing.assert_array_equal(get(sync_test), 30, err_msg=f"block {b}")
        got = get(out)
        l = np.arange(b)
        preds = [np.zeros(b), np.ones(b), l % 2, -np.ones(b), l, np.r_[0, np.ones(b - 1)], np.r_[1, np.zeros(b - 1)]]
        for k, p in enumerate(preds):
            nz = p != 0
            for o, want in enumerate([nz.sum(), int(nz.all()), int(nz.any())]):
                np.testing.assert_array_equal(got[k, o], want, err_msg=f"predicate {k}, op {o}, block {b}")


# --- wavefront.jl ----------------------------------------------------------------------------

@tk.kernel
def wf_all(Y, S, X: tk.Const, isint: tk.constexpr):
    """wfred into Y[op] and wfscan into S[op, :] for op = +, max, min (and &, | for integers)"""
    idx = tk.index(tk.Local, tk.Linear)
    x = X[idx]
    r0 = tk.group_reduce(x, "add")
    r1 = tk.group_reduce(x, "max")
    r2 = tk.group_reduce(x, "min")
    S[0, idx] = tk.group_scan(x, "add")
    S[1, idx] = tk.group_scan(x, "max")
    S[2, idx] = tk.group_scan(x, "min")
    if idx == 0:
        Y[0] = r0
        Y[1] = r1
        Y[2] = r2
    if isint:
        r3 = tk.group_reduce(x, "and")
        r4 = tk.group_reduce(x, "or")
        S[3, idx] = tk.group_scan(x, "and")
        S[4, idx] = tk.group_scan(x, "or")
        if idx == 0:
            Y[3] = r3
            Y[4] = r4


@tk.kernel
def wf_bool(Y, X: tk.Const):
    idx = tk.index(tk.Local, tk.Linear)
    x = X[idx]
    a = tk.group_reduce(int(x == 1), "or")
    b = tk.group_reduce(int(x == 1), "and")
    same = tk.group_reduce(x, "max") == tk.group_reduce(x, "min")
    if idx == 0:
        Y[0] = a
        Y[1] = b
        Y[2] = int(same)


UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or}


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_wavefront_reduce_and_scan(anybe, dt):
    """wavefront.jl: ``wfred``/``wfscan`` of 64 values in one group of 64"""
    needs(anybe, dt)
    rng = np.random.default_rng(64)
    isint = np.dtype(dt).kind in "iu"
    X = rng.integers(1, 101, 64).astype(dt) if isint else rng.random(64).astype(dt)
    ops = ["add", "max", "min", "and", "or"] if isint else ["add", "max", "min"]
    Y = put(anybe, np.zeros(len(ops), dt))
    S = put(anybe, np.zeros((len(ops), 64), dt))
    wf_all(anybe, 64)(Y, S, put(anybe, X), isint, ndrange=64)
    tk.synchronize(anybe)
    for k, op in enumerate(ops):
        want_r, want_s = UFUNC[op].reduce(X), UFUNC[op].accumulate(X)
        if isint or op != "add":
            assert get(Y)[k] == want_r, op
            np.testing.assert_array_equal(get(S)[k], want_s, err_msg=op)
        else:
            eps = np.finfo(dt).eps
            np.testing.assert_allclose(get(Y)[k], want_r, rtol=64 * eps)
            np.testing.assert_allclose(get(S)[k], want_s, rtol=64 * eps)


@pytest.mark.parametrize("case", ["random01", "zeros", "ones"])
def test_wavefront_any_all_same(anybe, case):
    """wavefront.jl's ``wfany``/``wfall``/``wfsame`` (``@test_skip`` upstream, with their
    meanings: any item holds 1, all do, all hold the same value)"""
    X = {"random01": np.random.default_rng(3).integers(0, 2, 64), "zeros": np.zeros(64),
         "ones": np.ones(64)}[case].astype(np.int32)
    Y = put(anybe, np.full(3, -1, np.int32))
    wf_bool(anybe, 64)(Y, put(anybe, X), ndrange=64)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(Y), [int((X == 1).any()), int((X == 1).all()), int(len(np.unique(X)) == 1)])


# --- regression.jl ---------------------------------------------------------------------------

@tk.func
def strided_offset(s0, s1, s2, s3, i0, i1, i2, i3):
    return s0 * i0 + s1 * i1 + s2 * i2 + s3 * i3


@tk.kernel
def conj_scale_add(out_re, out_im, A_re: tk.Const, A_im: tk.Const, a_re, a_im, b_re, b_im,
                   o0, o1, o2, o3, s0, s1, s2, s3, d3):
    """issue 931: out[o] = beta * out[o] + alpha * conj(A[a]) over a 4-D index space (the last two
    dimensions of upstream's (4, 3, 5, 6) folded into the third of the ndrange)"""
    i0, i1, i23 = tk.index(tk.Global, tk.Cartesian)
    i2 = i23 // d3
    i3 = i23 % d3
    oi = strided_offset(o0, o1, o2, o3, i0, i1, i2, i3)
    ai = strided_offset(s0, s1, s2, s3, i0, i1, i2, i3)
    c_re = out_re[oi]
    c_im = out_im[oi]
    acc_re = b_re * c_re - b_im * c_im
    acc_im = b_re * c_im + b_im * c_re
    v_re = A_re[ai]
    v_im = -A_im[ai]
    out_re[oi] = acc_re + (a_re * v_re - a_im * v_im)
    out_im[oi] = acc_im + (a_re * v_im + a_im * v_re)


def test_regression_931_predicated_conj_load(anybe):
    """regression.jl "Predicated conj load (#931)": permuted strides (bijections onto
    ``0 .. prod(dims) - 1``), against NumPy's complex64 arithmetic"""
    dims = (4, 3, 5, 6)
    out_stride, A_stride = (1, 4, 72, 12), (15, 1, 3, 60)
    alpha, beta = np.complex64(0.75734866 + 0.7862585j), np.complex64(0.9682096 + 0.11172444j)
    n = int(np.prod(dims))
    rng = np.random.default_rng(931)
    C0 = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    hA = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    expected = C0.copy()
    for I in np.ndindex(*dims):
        oi, ai = int(np.dot(out_stride, I)), int(np.dot(A_stride, I))
        expected[oi] = beta * C0[oi] + alpha * np.conj(hA[ai])
    parts = [put(anybe, np.ascontiguousarray(p, np.float32)) for p in (C0.real, C0.imag, hA.real, hA.imag)]
    conj_scale_add(anybe)(*parts, np.float32(alpha.real), np.float32(alpha.imag), np.float32(beta.real),
                          np.float32(beta.imag), *out_stride, *A_stride, dims[3],
                          ndrange=(dims[0], dims[1], dims[2] * dims[3]))
    tk.synchronize(anybe)
    got = get(parts[0]) + 1j * get(parts[1])
    np.testing.assert_allclose(got, expected, rtol=4e-6, atol=4e-6)


@tk.kernel(unsafe_indices=True)
def triangular_for(out, A: tk.Const, R: tk.Const, n):
    lm = tk.index(tk.Local, tk.Linear) + tk.index(tk.Group, tk.Linear) * tk.groupsize()[0]
    if lm < out.shape[0]:
        for k in range(n):
            v = out.dtype(0)
            for r in range(k, n):
                v += R[k, r] * A[lm, r]
            out[lm, k] = v


@tk.kernel(unsafe_indices=True)
def triangular_while(out, A: tk.Const, R: tk.Const, n):
    lm = tk.index(tk.Local, tk.Linear) + tk.index(tk.Group, tk.Linear) * tk.groupsize()[0]
    if lm < out.shape[0]:
        for k in range(n):
            v = out.dtype(0)
            r = k
            while r < n:
                v += R[k, r] * A[lm, r]
                r += 1
            out[lm, k] = v


@pytest.mark.parametrize("kern", [triangular_for, triangular_while], ids=lambda k: k.name)
def test_regression_1015_triangular_dynamic_bounds_loop(anybe, kern):
    """regression.jl "Triangular dynamic-bounds loop (#1015)": 594 rows, groups of 256 (the
    last one partly past the rows); float32, each output a sum of at most 8 products, against
    the same sums in float64"""
    n, rows = 8, 594 if anybe.name != "INTERP:CHECK" else 100
    rng = np.random.default_rng(1015)
    hA = rng.random((rows, n)).astype(np.float32)
    hR = rng.random((n, n)).astype(np.float32)
    want = np.array([[sum(float(hR[k, r]) * float(hA[l, r]) for r in range(k, n)) for k in range(n)]
                     for l in range(rows)])
    out = put(anybe, np.zeros((rows, n), np.float32))
    kern(anybe, 256)(out, put(anybe, hA), put(anybe, hR), n, ndrange=-(-rows // 256) * 256)
    tk.synchronize(anybe)
    np.testing.assert_allclose(get(out), want, rtol=8 * np.finfo(np.float32).eps)


# --- indexing.jl / memory.jl / vadd.jl -------------------------------------------------------

@tk.kernel
def idx_dim_kern(X, Y):
    I = tk.index(tk.Global, tk.Linear)
    L = tk.index(tk.Local, tk.Cartesian)
    G = tk.index(tk.Group, tk.Cartesian)
    W = tk.groupsize()
    NG = tk.ngroups()
    if I == 0:
        X[0] = W[0]
        X[1] = W[1]
        X[2] = W[2]
        X[3] = NG[0]
        X[4] = NG[1]
        X[5] = NG[2]
    ok = L[0] < W[0] and L[1] < W[1] and L[2] < W[2] and G[0] < NG[0] and G[1] < NG[1] and G[2] < NG[2]
    Y[I] = int(ok and L[0] >= 0 and G[2] >= 0)


def test_indexing_groupsize_and_gridsize(anybe):
    """indexing.jl: groups of (1, 2, 3) items, (4, 5, 6) groups (x fastest: here (3, 2, 1) and
    (6, 5, 4)); every item's indices lie within them"""
    X = put(anybe, np.zeros(6, np.int32))
    Y = put(anybe, np.zeros(18 * 10 * 4, np.int32))
    idx_dim_kern(anybe, (3, 2, 1))(X, Y, ndrange=(6 * 3, 5 * 2, 4 * 1))
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(X), [3, 2, 1, 6, 5, 4])
    np.testing.assert_array_equal(get(Y), 1)


@tk.kernel
def memory_static(a: tk.Const, b):
    lm = tk.localmem(tk.float32, (1,))
    lm[0] = a[0]
    b[0] = lm[0]


@tk.kernel
def vadd(a: tk.Const, b: tk.Const, c):
    i = tk.index()
    c[i] = a[i] + b[i]


def test_memory_static_and_vadd(anybe):
    """memory.jl "Memory: Static" and vadd.jl"""
    b = put(anybe, np.zeros(1, np.float32))
    memory_static(anybe, 1)(put(anybe, np.ones(1, np.float32)), b, ndrange=1)
    rng = np.random.default_rng(1024)
    a, bb = rng.random(1024).astype(np.float32), rng.random(1024).astype(np.float32)
    c = put(anybe, np.zeros(1024, np.float32))
    vadd(anybe, 64)(put(anybe, a), put(anybe, bb), c, ndrange=1024)
    tk.synchronize(anybe)
    np.testing.assert_array_equal(get(b), [1.0])
    np.testing.assert_array_equal(get(c), a + bb)


# --- found porting wavefront.jl: code after a return that a constant condition chose ----------

@tk.func
def reduce_or_flat(v, op):
    if op == 0:
        return tk.group_reduce(v, "add")
    return tk.group_reduce(v, "or")              # floats: no "or"; dead for op == 0


@tk.func
def plus_one_or_bits(v, op):
    if op == 0:
        return v + 1
    return v & 1                                 # floats: no "&"; dead for op == 0


@tk.func
def widened(v, wide):
    if not wide:
        return v + 1
    return tk.int64(v) * 3                       # no int64 on WebGPU; dead for wide == False


@tk.kernel
def dead_after_folded_return(Y, R, X: tk.Const, op: tk.constexpr):
    i = tk.index()
    Y[i] = plus_one_or_bits(X[i], op) + plus_one_or_bits(X[i], 0)
    R[i] = reduce_or_flat(X[i], op)
    if op == 0:
        return
    Y[i] = X[i] | 1                              # dead for op == 0


@tk.kernel
def dead_after_break_and_continue(Y, X: tk.Const, n):
    i = tk.index()
    for j in range(n):
        Y[i] += X[i]
        continue
        Y[i] = X[i] | 1                          # dead
    while True:
        Y[i] += 1
        break
        Y[i] = X[i] ^ 2                          # dead


@tk.kernel
def while_constant(Y, X: tk.Const, flag: tk.constexpr):
    i = tk.index()
    while flag:                                  # never runs for flag == False
        Y[i] = X[i] | 1
    Y[i] = X[i] + 1


@tk.kernel
def int32_unless_wide(Y, X: tk.Const, wide: tk.constexpr):
    i = tk.index()
    Y[i] = widened(X[i], wide)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'WEBGPU'), scope="module")
def fbe(request):
    return tk.backend(request.param)


def test_code_after_a_folded_return_is_not_compiled(fbe):
    """docs/language.md: a return at a func's top level, also in a branch a constant condition
    folded, ends the func there; Python never runs what follows, so it is not compiled (as the
    untaken side of a constant ``if``). The statements after it were lowered anyway and then
    dropped, so a func choosing its collective by a constexpr (``if op == 0: return
    group_reduce(v, "add")`` ... ``return group_reduce(v, "or")``) was a CompileError for float
    arguments ("op 'or' needs integers or bools"), and so were a float ``&`` after a kernel's
    folded ``return`` and after a ``continue``/``break``, an int64 product after a folded
    return on WebGPU, and the body of a ``while`` whose condition is a false constexpr. With op != 0 the same kernel still fails, naming the live line."""
    X = np.arange(8, dtype=np.float32)
    Y, R = put(fbe, np.zeros(8, np.float32)), put(fbe, np.zeros(8, np.float32))
    dead_after_folded_return(fbe, 8)(Y, R, put(fbe, X), 0, ndrange=8)
    Z = put(fbe, np.zeros(8, np.float32))
    dead_after_break_and_continue(fbe)(Z, put(fbe, X), 3, ndrange=8)
    W = put(fbe, np.zeros(8, np.int32))
    int32_unless_wide(fbe)(W, put(fbe, np.arange(8, dtype=np.int32)), False, ndrange=8)
    V = put(fbe, np.zeros(8, np.float32))
    while_constant(fbe)(V, put(fbe, X), False, ndrange=8)
    tk.synchronize(fbe)
    np.testing.assert_array_equal(get(V), X + 1)
    np.testing.assert_array_equal(get(Y), 2 * (X + 1))
    np.testing.assert_array_equal(get(R), X.sum())
    np.testing.assert_array_equal(get(Z), 3 * X + 1)
    np.testing.assert_array_equal(get(W), np.arange(8) + 1)
    with pytest.raises(tk.CompileError, match="needs integers"):
        dead_after_folded_return(fbe, 8)(Y, R, put(fbe, X), 1, ndrange=8)
