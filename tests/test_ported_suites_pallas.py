"""JAX Pallas's GPU ops tests (tests/pallas/gpu_ops_test.py: the grouped-program-id matmul and
the BlockSpec matmul, FusedAttentionTest with causal masks and segment ids, RmsNormTest forward
and backward, SoftmaxTest over (1024, 125) and (4, 1024, 125) in float32, float16 and bfloat16)
ported test by test as tinykernels kernels: a Pallas program is a workgroup, ``pl.program_id``
is ``tk.index(tk.Group, ...)``, a block loaded with ``pl.load`` is a ``tk.localmem`` tile filled
cooperatively, ``for_loop`` a ``for``; the backward passes come from ``tk.autodiff`` of the
forward kernel (SPEC 7) instead of Pallas's hand-written backward kernels. References in float64
(NumPy), tolerances from the upstream test or from the dtype's epsilon. CPU, INTERP,
INTERP:CHECK, CL and WEBGPU.

Where SPEC differs from upstream (not ported): Pallas's ``interpret=`` flag is the choice of
backend (INTERP); the attention backward (a kernel with per-item private accumulators) and the
layer norm tests (ported from Triton's tutorial in test_ported_suites_triton.py) are not
repeated; sizes are cut (fewer heads and a 128-long sequence on the interpreter) for the
2-core machine; bfloat16 host arrays need ``ml_dtypes`` and skip without it."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, interp, put

RNG = np.random.default_rng(2020)
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def fdt(be):
    return np.float64 if be.supports_float64 else np.float32


# --- matmul (grouped program ids) and matmul_block_spec ----------------------------------------

@tk.kernel
def matmul_grouped(o, x: tk.Const, y: tk.Const, bm: tk.constexpr, bn: tk.constexpr,
                   bk: tk.constexpr, gm: tk.constexpr):
    """One group per (bm x bn) output block; the 1-D program id is swizzled into groups of gm
    block rows (Pallas's ``group_id`` / ``first_pid_m`` arithmetic); x and y blocks of depth bk
    go through local memory."""
    m, k, n = x.shape[0], x.shape[1], y.shape[1]
    pid = tk.index(tk.Group, tk.Linear)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    num_pid_m = m // bm
    num_pid_n = n // bn
    num_pid_in_group = gm * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * gm
    group_size_m = min(num_pid_m - first_pid_m, gm)
    pid_m = first_pid_m + pid % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    xs = tk.localmem(tk.float32, (bm, bk))
    ys = tk.localmem(tk.float32, (bk, bn))
    acc = tk.float32(0)
    for kb in range(k // bk):
        for t in range(lj, bk, bn):
            xs[li, t] = x[pid_m * bm + li, kb * bk + t]
        for t in range(li, bk, bm):
            ys[t, lj] = y[kb * bk + t, pid_n * bn + lj]
        tk.synchronize()
        for t in range(bk):
            acc += xs[li, t] * ys[t, lj]
        tk.synchronize()
    o[pid_m * bm + li, pid_n * bn + lj] = acc


@tk.kernel
def matmul_block_spec(o, x: tk.Const, y: tk.Const, bk: tk.constexpr):
    """A 2-D grid of programs; each loads ``x[i-block, k-slice]`` and ``y[k-slice, j-block]``
    (``pl.load`` with ``pl.ds(i * bk, bk)``) and accumulates ``pl.dot``."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    acc = tk.float32(0)
    for kb in range(x.shape[1] // bk):
        for t in range(kb * bk, kb * bk + bk):
            acc += x[i, t] * y[t, j]
    o[i, j] = acc


def _check_matmul(got, x, y):
    k = x.shape[1]
    ref = x.astype(np.float64) @ y.astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=0, atol=2 * k * EPS32 * (np.abs(x) @ np.abs(y)).max())
    seq = np.zeros(ref.shape, np.float32)                 # K order, float32, no contraction
    for t in range(k):
        seq = seq + np.outer(x[:, t], y[t])
    np.testing.assert_array_equal(got, seq)


@pytest.mark.parametrize(("m", "n", "k", "bm", "bn", "bk", "gm"), [
    (64, 64, 32, 16, 16, 8, 1), (64, 64, 32, 16, 16, 8, 2), (128, 64, 64, 16, 8, 16, 4),
    (64, 128, 16, 8, 16, 8, 3)])
def test_matmul(be, m, n, k, bm, bn, bk, gm):
    """PallasCallTest.test_matmul: the grouped (swizzled) program order covers every block once
    (also with gm not dividing the block rows), float32 accumulation exactly in K order."""
    x = RNG.standard_normal((m, k)).astype(np.float32)
    y = RNG.standard_normal((k, n)).astype(np.float32)
    o = put(be, np.full((m, n), np.nan, np.float32))
    nprog = (m // bm) * (n // bn)
    matmul_grouped(be, (bm, bn))(o, put(be, x), put(be, y), bm, bn, bk, gm, ndrange=(nprog * bm, bn))
    _check_matmul(get(o), x, y)


@pytest.mark.parametrize(("m", "n", "k", "bm", "bn", "bk"), [
    (64, 64, 32, 16, 16, 8), (128, 32, 64, 32, 8, 16)])
def test_matmul_block_spec(be, m, n, k, bm, bn, bk):
    """PallasCallTest.test_matmul_block_spec: a (m/bm, n/bn) grid of (bm, bn) programs."""
    x = RNG.standard_normal((m, k)).astype(np.float32)
    y = RNG.standard_normal((k, n)).astype(np.float32)
    o = put(be, np.zeros((m, n), np.float32))
    matmul_block_spec(be, (bm, bn))(o, put(be, x), put(be, y), bk, ndrange=(m, n))
    _check_matmul(get(o), x, y)


# --- SoftmaxTest ------------------------------------------------------------------------------

@tk.kernel
def softmax_rows(y, x: tk.Const, wg: tk.constexpr):
    """One group per row of a 2-D view: the row max and sum by group reductions in float32."""
    row = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    n = x.shape[1]
    m = -math.inf
    for c in range(t, n, wg):
        m = max(m, tk.float32(x[row, c]))
    m = tk.group_reduce(m, "max")
    s = tk.float32(0)
    for c in range(t, n, wg):
        s += math.exp(tk.float32(x[row, c]) - m)
    s = tk.group_reduce(s, "add")
    for c in range(t, n, wg):
        y[row, c] = math.exp(tk.float32(x[row, c]) - m) / s


def _dtype(name):
    if name == "bfloat16":
        ml = pytest.importorskip("ml_dtypes", reason="bfloat16 host arrays need ml_dtypes")
        return np.dtype(ml.bfloat16)
    return np.dtype(name)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("shape", [(1024, 125), (4, 1024, 125)])
def test_softmax(be, shape, dtype):
    """SoftmaxTest.test_softmax: softmax over the last axis against float64, with upstream's
    tolerances (atol 1e-2 for the 16-bit types; float32: a few ulp of each value instead of
    1e-7, the sum over 125 exps)."""
    dt = _dtype(dtype)
    if not be.supports(dt):
        pytest.skip(f"{be.name} has no {dtype}")
    if interp(be):
        shape = shape[:-2] + (128, 125)
    x = RNG.standard_normal(shape).astype(dt)
    rows = int(np.prod(shape[:-1]))
    y = put(be, np.zeros((rows, shape[-1]), dt))
    wg = 32
    softmax_rows(be, wg)(y, put(be, x.reshape(rows, shape[-1])), wg, ndrange=rows * wg)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)).reshape(rows, shape[-1])
    got = get(y).astype(np.float64)
    if dtype == "float32":
        np.testing.assert_allclose(got, want, rtol=(shape[-1] + 16) * EPS32, atol=1e-30)
    else:
        np.testing.assert_allclose(got, want, atol=1e-2, rtol=1e-4)


# --- RmsNormTest ------------------------------------------------------------------------------

@tk.kernel
def rms_norm_fwd(y, x: tk.Const, w: tk.Const, b: tk.Const, eps):
    """Pallas's rms_norm(x, w, b): x / sqrt(mean(x**2) + eps) * w + b, one item per row."""
    row = tk.index()
    n = x.shape[1]
    ss = x[row, 0] * 0
    for c in range(n):
        ss += x[row, c] * x[row, c]
    r = 1 / math.sqrt(ss / n + eps)
    for c in range(n):
        y[row, c] = x[row, c] * r * w[c] + b[c]


def _rms_ref(x, w, b, eps):
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return x * r * w + b, r


@pytest.mark.parametrize(("batch", "seq", "embed"), [(1, 384, 192), (2, 384, 192)])
def test_rms_fwd(be, batch, seq, embed):
    """RmsNormTest.test_rms_fwd in float32: atol 1e-5 as upstream."""
    if interp(be):
        seq = 64
    x = RNG.standard_normal((batch * seq, embed)).astype(np.float32)
    w, b = RNG.standard_normal(embed).astype(np.float32), RNG.standard_normal(embed).astype(np.float32)
    y = put(be, np.zeros_like(x))
    rms_norm_fwd(be)(y, put(be, x), put(be, w), put(be, b), 1e-6, ndrange=batch * seq)
    want, _ = _rms_ref(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), 1e-6)
    np.testing.assert_allclose(get(y), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("batch", "seq", "embed"), [(1, 384, 192), (2, 384, 192)])
def test_rms_norm_bwd(be, batch, seq, embed):
    """RmsNormTest.test_rms_norm_bwd: the gradients of sum(rms_norm(x, w, b)) from tk.autodiff
    of the forward kernel, against the analytic float64 gradient (upstream: dx within 1e-6,
    dw and db within 1e-2 of the reference's jax.grad; here dx within 1e-5 relative to its scale,
    dw and db, sums over every row, within rows * 4 eps of theirs)."""
    seq = 16 if interp(be) else seq // 4
    rows = batch * seq
    dt = fdt(be)
    eps = 1e-6
    x = RNG.standard_normal((rows, embed)).astype(dt)
    w, b = RNG.standard_normal(embed).astype(dt), RNG.standard_normal(embed).astype(dt)
    shadows = {k: put(be, np.zeros(s, dt)) for k, s in (("x", x.shape), ("w", embed), ("b", embed))}
    tk.autodiff(tk.Reverse,
                lambda y_, x_, w_, b_: rms_norm_fwd(be)(y_, x_, w_, b_, eps, ndrange=rows),
                tk.Duplicated(put(be, np.zeros_like(x)), put(be, np.ones_like(x))),
                tk.Duplicated(put(be, x), shadows["x"]), tk.Duplicated(put(be, w), shadows["w"]),
                tk.Duplicated(put(be, b), shadows["b"]))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    _, r = _rms_ref(x64, w64, b.astype(np.float64), eps)
    g = np.ones_like(x64)
    dx = r * w64 * g - x64 * r ** 3 * (x64 * w64 * g).mean(-1, keepdims=True)
    dw = (x64 * r * g).sum(0)
    db = g.sum(0)
    e = float(np.finfo(dt).eps)
    np.testing.assert_allclose(get(shadows["x"]), dx, rtol=0, atol=64 * embed * e * np.abs(dx).max())
    np.testing.assert_allclose(get(shadows["w"]), dw, rtol=0, atol=4 * rows * e * np.abs(x64 * r).sum(0).max())
    np.testing.assert_allclose(get(shadows["b"]), db, rtol=rows * e)


# --- FusedAttentionTest (forward) -------------------------------------------------------------

@tk.kernel
def mha_fwd(o, q: tk.Const, k: tk.Const, v: tk.Const, seg: tk.Const, scale, causal: tk.constexpr,
            use_seg: tk.constexpr, D: tk.constexpr):
    """One item per (batch, query, head): an online softmax over the keys (the flash-attention
    recurrence of Pallas's mha kernel) in float32, with the causal and segment masks."""
    bi, qi, h = tk.index(tk.Global, tk.Cartesian)
    seq = q.shape[1]
    acc = tk.private(tk.float32, D)
    for d in range(D):
        acc[d] = 0.0
    m = -math.inf
    l = tk.float32(0)
    kend = qi + 1 if causal else seq
    for ki in range(kend):
        if use_seg and seg[bi, ki] != seg[bi, qi]:
            continue
        s = tk.float32(0)
        for d in range(D):
            s += tk.float32(q[bi, qi, h, d]) * tk.float32(k[bi, ki, h, d])
        s = s * scale
        m_new = max(m, s)
        alpha = math.exp(m - m_new)
        p = math.exp(s - m_new)
        l = l * alpha + p
        for d in range(D):
            acc[d] = acc[d] * alpha + p * tk.float32(v[bi, ki, h, d])
        m = m_new
    for d in range(D):
        o[bi, qi, h, d] = acc[d] / l


def mha_reference(q, k, v, seg, causal):
    """Pallas's mha_reference in float64: softmax(q k^T) v with the masks, over (b, s, h, d)."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    logits = np.einsum("bqhd,bkhd->bhqk", q, k)
    seq = q.shape[1]
    mask = np.ones((q.shape[0], 1, seq, seq), bool)
    if seg is not None:
        mask &= (seg[:, None, :, None] == seg[:, None, None, :])
    if causal:
        mask &= np.tril(np.ones((seq, seq), bool))[None, None]
    logits = np.where(mask, logits, -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", w, v)


@pytest.mark.parametrize("use_seg", [True, False])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("batch", "seq", "heads", "head_dim"), [(1, 128, 1, 32), (2, 128, 2, 64)])
def test_fused_attention_fwd(be, batch, seq, heads, head_dim, causal, use_seg):
    """FusedAttentionTest.test_fused_attention_fwd: float16 q, k, v (scale 1, as upstream's
    sm_scale default), causal or not, segment ids [0]*seq/2 + [1]*seq/2 or none; atol 0.05 as
    upstream, and float32 accumulation keeps it within 1e-3 here."""
    if not be.supports(np.dtype(np.float16)):
        pytest.skip(f"{be.name} has no float16")
    if interp(be) and (batch, heads) != (1, 1):
        pytest.skip("the interpreter runs the small case only (2-core machine)")
    shape = (batch, seq, heads, head_dim)
    q, k, v = (RNG.standard_normal(shape).astype(np.float16) for _ in range(3))
    seg = np.concatenate([np.zeros((batch, seq // 2), np.int32), np.ones((batch, seq // 2), np.int32)], 1)
    o = put(be, np.zeros(shape, np.float16))
    mha_fwd(be)(o, put(be, q), put(be, k), put(be, v), put(be, seg), 1.0, causal, use_seg, head_dim,
                ndrange=(batch, seq, heads))
    want = mha_reference(q, k, v, seg if use_seg else None, causal)
    got = get(o).astype(np.float64)
    np.testing.assert_allclose(got, want, atol=0.05)
    tol = 1e-3 + 2 * float(np.finfo(np.float16).eps) * np.abs(want)   # the float16 store's rounding
    assert (np.abs(got - want) <= tol).all(), np.abs(got - want).max()


# --- pallas_test.py: control flow in kernels (lax.cond / fori_loop / while_loop / switch) ------

@tk.kernel
def cond_threadwise(o, x: tk.Const):
    """test_cond_threadwise: each item takes its own branch (lax.cond on x > 0)."""
    i = tk.index()
    if x[i] > 0:
        o[i] = x[i] * 2
    else:
        o[i] = -x[i] + 1


@tk.kernel
def conditional_write(o, x: tk.Const, pred):
    """test_conditional_write: a store only when a scalar predicate holds (pl.when)."""
    i = tk.index()
    o[i] = x[i]
    if pred:
        o[i] = x[i] + 10


@tk.kernel
def fori_accumulate(o, x: tk.Const, lower, upper):
    """test_fori_loop_simple / _with_nonzero_lower_bound / _accumulates: o[i] = x[i] + sum of
    the loop indices in [lower, upper), carried in a float32 local."""
    i = tk.index()
    acc = x[i]
    for j in range(lower, upper):
        acc += j
    o[i] = acc


@tk.kernel
def while_collatz(steps, x: tk.Const):
    """test_while_loop: a data-dependent trip count per item (the Collatz steps of x[i])."""
    i = tk.index()
    v = x[i]
    n = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        n += 1
    steps[i] = n


@tk.kernel
def nested_while(o, m: tk.Const):
    """test_nested_while_loop: an inner while bounded by the outer counter."""
    i = tk.index()
    total = 0
    a = 0
    while a < m[i]:
        b = 0
        while b < a:
            total += 1
            b += 1
        a += 1
    o[i] = total


@tk.kernel
def switch_k(o, x: tk.Const, idx: tk.Const):
    """test_switch: lax.switch clamps the branch index into range (index < 0 -> first branch,
    past the end -> last)."""
    i = tk.index()
    k = min(max(idx[i], 0), 2)
    if k == 0:
        o[i] = x[i] + 1
    elif k == 1:
        o[i] = x[i] * 3
    else:
        o[i] = -x[i]


def test_control_flow(be):
    """PallasControlFlowTest in the kernel language: per-item branches, a predicated write,
    counted loops with a non-zero lower bound and an empty range, data-dependent while loops
    (nested too) and a clamped switch, exact against NumPy."""
    n = 64
    x = RNG.standard_normal(n).astype(np.float32)
    o = put(be, np.zeros(n, np.float32))
    cond_threadwise(be)(o, put(be, x), ndrange=n)
    np.testing.assert_array_equal(get(o), np.where(x > 0, x * 2, -x + 1))
    for pred in (True, False):
        conditional_write(be)(o, put(be, x), pred, ndrange=n)
        np.testing.assert_array_equal(get(o), x + np.float32(10 if pred else 0))
    for lo, hi in ((0, 5), (3, 9), (7, 7), (9, 3)):
        fori_accumulate(be)(o, put(be, x), lo, hi, ndrange=n)
        want = x.copy()
        for j in range(lo, hi):                    # float32, rounded after every step
            want = want + np.float32(j)
        np.testing.assert_array_equal(get(o), want, err_msg=str((lo, hi)))
    v = RNG.integers(1, 200, n).astype(np.int32)
    steps = put(be, np.zeros(n, np.int32))
    while_collatz(be)(steps, put(be, v), ndrange=n)

    def collatz(a):
        c = 0
        while a != 1:
            a, c = (a // 2 if a % 2 == 0 else 3 * a + 1), c + 1
        return c
    np.testing.assert_array_equal(get(steps), [collatz(int(a)) for a in v])
    m = RNG.integers(0, 12, n).astype(np.int32)
    tot = put(be, np.zeros(n, np.int32))
    nested_while(be)(tot, put(be, m), ndrange=n)
    np.testing.assert_array_equal(get(tot), m * (m - 1) // 2)
    idx = RNG.integers(-2, 5, n).astype(np.int32)
    switch_k(be)(o, put(be, x), put(be, idx), ndrange=n)
    k = np.clip(idx, 0, 2)
    np.testing.assert_array_equal(get(o), np.select([k == 0, k == 1], [x + 1, x * 3], -x))
