"""The numerics of the Triton tutorials (python/tutorials/: 02-fused-softmax, 03-matrix-
multiplication, 04-low-memory-dropout, 05-layer-norm) written as tinykernels kernels: a fused
row softmax with group reductions, a register-tiled matmul, seeded dropout from counter-based
random numbers, and layer norm forward and backward, the backward by ``tk.autodiff`` (SPEC 7)
rather than the tutorial's hand-written kernel. float32 results against NumPy / torch in float64
with tolerances derived from the dtype's epsilon and the reduction length; gradients against
float64 central finite differences (float32 on WebGPU, which has no float64) and, where torch is
installed, against torch's autograd. CPU, INTERP, INTERP:CHECK, CL and WEBGPU."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, dev, fdt, host

try:
    import torch
except ImportError:                                   # the minimal install: the torch checks skip
    torch = None

RNG = np.random.default_rng(1855)
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def on(be, x):
    """A copy of ``x`` on ``be`` (its own dtype)."""
    x = np.array(x)
    return x if be.is_host else tk.asarray(x, backend=be)


# --- 02-fused-softmax --------------------------------------------------------------------------

@tk.kernel
def fused_softmax(y, x: tk.Const, wg: tk.constexpr):
    """One group per row; the row's max and sum by group reductions, columns strided by wg."""
    row = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    n = x.shape[1]
    m = -math.inf
    for c in range(t, n, wg):
        m = max(m, x[row, c])
    m = tk.group_reduce(m, "max")
    s = 0.0
    for c in range(t, n, wg):
        s += math.exp(x[row, c] - m)
    s = tk.group_reduce(s, "add")
    for c in range(t, n, wg):
        y[row, c] = math.exp(x[row, c] - m) / s


@pytest.mark.parametrize("n", [1, 33, 781])
def test_fused_softmax_as_torch(be, n):
    """The tutorial's softmax over rows of 1, 33 and 781 (its odd column count) float32 columns,
    one with -inf entries and one with large values (the max subtraction keeps exp finite)."""
    m, wg = 4, 32
    x = RNG.standard_normal((m, n)).astype(np.float32) * 4
    x[1] += 80.0
    if n > 2:
        x[2, ::2] = -np.inf
    y = on(be, np.zeros((m, n), np.float32))
    fused_softmax(be, wg)(y, on(be, x), wg, ndrange=m * wg)
    tk.synchronize(be)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    if torch is not None:
        np.testing.assert_allclose(torch.softmax(torch.tensor(x64), 1).numpy(), want, rtol=1e-12)
    # exp within a few ulp, the sum of n terms within n eps
    np.testing.assert_allclose(host(y), want, rtol=(n + 16) * EPS32, atol=1e-30)
    np.testing.assert_allclose(host(y).sum(1), 1.0, rtol=(n + 16) * EPS32)


# --- 03-matrix-multiplication ------------------------------------------------------------------

@tk.kernel
def blocked_matmul(c, a: tk.Const, b: tk.Const, bk: tk.constexpr):
    """Each item computes a 2 x 2 block of C with private accumulators, K walked in steps of bk
    (the tutorial's BLOCK_SIZE_K loop), edges masked as the tutorial's tl.load(mask=...)."""
    i0, j0 = tk.index(tk.Global, tk.Cartesian)
    i, j = 2 * i0, 2 * j0
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    acc = tk.private(tk.float32, (2, 2))
    for p in range(2):
        for q in range(2):
            acc[p, q] = 0.0
    for k0 in range(0, k, bk):
        for kk in range(k0, min(k0 + bk, k)):
            for p in range(2):
                av = a[i + p, kk] if i + p < m else tk.float32(0)
                for q in range(2):
                    bv = b[kk, j + q] if j + q < n else tk.float32(0)
                    acc[p, q] += av * bv
    for p in range(2):
        for q in range(2):
            if i + p < m and j + q < n:
                c[i + p, j + q] = acc[p, q]


@pytest.mark.parametrize("shape", [(8, 8, 8), (13, 37, 9)])
def test_blocked_matmul_as_numpy(be, shape):
    """The tutorial's check (torch.matmul vs the kernel in float32) with a tolerance from the
    dtype: |C - AB| <= 2 k eps (|A||B|); ragged shapes exercise the masks. The kernel sums in
    K order, so it equals NumPy's float32 sum done in that order exactly."""
    m, k, n = shape
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = on(be, np.zeros((m, n), np.float32))
    blocked_matmul(be)(c, on(be, a), on(be, b), 4, ndrange=(-(-m // 2), -(-n // 2)))
    tk.synchronize(be)
    got = host(c)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=0, atol=2 * k * EPS32 * (np.abs(a) @ np.abs(b)).max())
    seq = np.zeros((m, n), np.float32)
    for kk in range(k):
        seq = seq + np.outer(a[:, kk], b[kk])
    np.testing.assert_array_equal(got, seq)


# --- 04-low-memory-dropout ---------------------------------------------------------------------

@tk.kernel
def seeded_dropout(out, x: tk.Const, p, key):
    i = tk.index()
    keep = tk.random.uniform(key, i) > p
    out[i] = x[i] / (1 - p) if keep else 0.0


def test_seeded_dropout(be):
    """The tutorial's seeded dropout: the mask is a function of (seed, offset) only: the same
    seed gives the same output (on every backend: the host's uniform from the same key), another
    seed another mask; kept values are x / (1 - p), about 1 - p of them."""
    n, p = 2048, np.float32(0.5)
    x = RNG.standard_normal(n).astype(np.float32)

    def drop(seed):
        out = on(be, np.zeros(n, np.float32))
        seeded_dropout(be)(out, on(be, x), p, tk.random.key(seed), ndrange=n)
        tk.synchronize(be)
        return host(out)

    a, a2, b = drop(123), drop(123), drop(512)
    np.testing.assert_array_equal(a, a2)
    u = tk.random.uniform(tk.random.key(123), np.arange(n, dtype=np.uint64))
    keep = u > p
    np.testing.assert_array_equal(a, np.where(keep, x / (np.float32(1) - p), np.float32(0)).astype(np.float32))
    assert (a != 0).sum() != (b != 0).sum() or not np.array_equal(a != 0, b != 0)
    assert abs(keep.mean() - (1 - p)) < 0.05


# --- 05-layer-norm -----------------------------------------------------------------------------

@tk.kernel
def layer_norm_fwd(y, x: tk.Const, w: tk.Const, b: tk.Const, eps):
    """One item per row: mean, variance (two passes, as the tutorial), then (x - mean) * rstd * w + b."""
    row = tk.index()
    n = x.shape[1]
    mean = 0.0
    for c in range(n):
        mean += x[row, c]
    mean = mean / n
    var = 0.0
    for c in range(n):
        d = x[row, c] - mean
        var += d * d
    var = var / n
    rstd = 1 / math.sqrt(var + eps)
    for c in range(n):
        y[row, c] = (x[row, c] - mean) * rstd * w[c] + b[c]


def _ln_ref(x, w, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps) * w + b


def test_layer_norm_forward_as_torch(be):
    """The tutorial's forward against torch.nn.functional.layer_norm (float64), float32 kernel:
    the error of a normalisation over n columns is a few n eps relative to the output scale."""
    m, n, eps = 5, 37, 1e-5
    x = (RNG.standard_normal((m, n)) * 3 + 1).astype(np.float32)
    w = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    y = on(be, np.zeros((m, n), np.float32))
    layer_norm_fwd(be)(y, on(be, x), on(be, w), on(be, b), eps, ndrange=m)
    tk.synchronize(be)
    want = _ln_ref(x, w, b, eps)
    if torch is not None:
        t = torch.nn.functional.layer_norm(torch.tensor(x, dtype=torch.float64), (n,), torch.tensor(w, dtype=torch.float64),
                                           torch.tensor(b, dtype=torch.float64), eps)
        np.testing.assert_allclose(t.numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(y), want, rtol=0, atol=4 * n * EPS32 * (np.abs(w).max() * 4 + np.abs(b).max()))


def test_layer_norm_backward_by_autodiff(be):
    """The tutorial's backward (dx, dw, db; its test compares with torch's autograd) here from
    tk.autodiff of the forward kernel: against float64 central differences of the forward
    (float32 ones on WebGPU) and against torch's autograd. dw and db sum over every row."""
    m, n, eps = 3, 9, 1e-5
    dt = fdt(be)
    x = RNG.standard_normal((m, n)) * 2 + 0.5
    w = RNG.standard_normal(n)
    b = RNG.standard_normal(n)
    dy = RNG.standard_normal((m, n))
    shadows = {k: dev(np.zeros(v.shape), be, dt) for k, v in (("x", x), ("w", w), ("b", b))}
    tk.autodiff(tk.Reverse, lambda y_, x_, w_, b_: layer_norm_fwd(be)(y_, x_, w_, b_, eps, ndrange=m),
                tk.Duplicated(dev(np.zeros((m, n)), be, dt), dev(dy, be, dt)),
                tk.Duplicated(dev(x, be, dt), shadows["x"]), tk.Duplicated(dev(w, be, dt), shadows["w"]),
                tk.Duplicated(dev(b, be, dt), shadows["b"]))
    got = {k: host(v) for k, v in shadows.items()}

    def loss(xx, ww, bb):
        y = dev(np.zeros((m, n)), be, dt)
        layer_norm_fwd(be)(y, dev(xx, be, dt), dev(ww, be, dt), dev(bb, be, dt), eps, ndrange=m)
        tk.synchronize(be)
        return float((host(y) * dy).sum())

    h = 1e-6 if dt == np.float64 else 3e-3
    args = {"x": x, "w": w, "b": b}
    for name, arr in args.items():
        fd = np.zeros(arr.shape)
        for j in np.ndindex(arr.shape):
            p, q = {k: v.copy() for k, v in args.items()}, {k: v.copy() for k, v in args.items()}
            p[name][j] += h
            q[name][j] -= h
            fd[j] = (loss(p["x"], p["w"], p["b"]) - loss(q["x"], q["w"], q["b"])) / (2 * h)
        tol = (1e-6, 1e-6) if dt == np.float64 else (3e-2, 3e-2)
        np.testing.assert_allclose(got[name], fd, rtol=tol[0], atol=tol[1], err_msg=name)
    if torch is not None:
        tx, tw, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, w, b))
        torch.nn.functional.layer_norm(tx, (n,), tw, tb, eps).backward(torch.tensor(dy))
        tol = 1e-10 if dt == np.float64 else 2e-4
        for name, t in (("x", tx), ("w", tw), ("b", tb)):
            np.testing.assert_allclose(got[name], t.grad.numpy(), rtol=tol, atol=tol, err_msg=name)
