"""An ML engineer's first programs, written from SPEC.md alone (audit user22): fused kernels
(bias + GELU, layernorm, softmax, a tiled matmul) launched directly, used from PyTorch through
``torch_op`` (autograd against torch's own ops) and from JAX through ``jax_kernel`` /
``raise_kernel`` (jit, grad, vmap), all in float64 against the framework's own functions."""
import math

import numpy as np
import pytest

import tinykernels as tk


# ------------------------------------------------------------------------ the kernels

@tk.kernel
def bias_gelu(y, x: tk.Const, bias: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    v = x[i, j] + bias[j]
    y[i, j] = 0.5 * v * (1.0 + math.erf(v * (1.0 / math.sqrt(2.0))))


@tk.kernel
def layernorm_rows(y, x: tk.Const, w: tk.Const, b: tk.Const, eps):
    r = tk.index()
    n = x.shape[1]
    mean = 0.0
    for j in range(n):
        mean += x[r, j]
    mean = mean / n
    var = 0.0
    for j in range(n):
        d = x[r, j] - mean
        var += d * d
    inv = 1.0 / math.sqrt(var / n + eps)
    for j in range(n):
        y[r, j] = (x[r, j] - mean) * inv * w[j] + b[j]


@tk.kernel
def softmax_rows(y, x: tk.Const):
    r = tk.index()
    n = x.shape[1]
    m = x[r, 0]
    for j in range(1, n):
        m = max(m, x[r, j])
    s = 0.0
    for j in range(n):
        s += math.exp(x[r, j] - m)
    for j in range(n):
        y[r, j] = math.exp(x[r, j] - m) / s


@tk.kernel
def matmul_tiled(c, a: tk.Const, b: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    ta = tk.localmem(a.dtype, (T, T))
    tb = tk.localmem(b.dtype, (T, T))
    m = c.shape[0]
    n = c.shape[1]
    kk = a.shape[1]
    acc = 0.0
    for t in range(0, kk, T):
        ta[li, lj] = a[i, t + lj] if i < m and t + lj < kk else 0.0
        tb[li, lj] = b[t + li, j] if t + li < kk and j < n else 0.0
        tk.synchronize()
        for p in range(T):
            acc += ta[li, p] * tb[p, lj]
        tk.synchronize()
    if i < m and j < n:
        c[i, j] = acc


# ------------------------------------------------------------------------ direct launches

@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_fused_kernels_direct_against_numpy(dev):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((5, 7))
    bias = rng.standard_normal(7)
    w, b = rng.standard_normal(7), rng.standard_normal(7)
    be = tk.backend(dev)
    y = np.zeros_like(x)
    bias_gelu(be)(y, x, bias, ndrange=x.shape)
    tk.synchronize(be)
    v = x + bias
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(y, 0.5 * v * (1 + erf(v / math.sqrt(2))), rtol=1e-12, atol=1e-14)
    layernorm_rows(be)(y, x, w, b, 1e-5, ndrange=5)
    tk.synchronize(be)
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5) * w + b, rtol=1e-12, atol=1e-12)
    softmax_rows(be)(y, x, ndrange=5)
    tk.synchronize(be)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("dev", ["CPU", "INTERP", "CL"])
def test_tiled_matmul_with_ragged_edges(dev):
    """C = A B with 4x4 local tiles; 9x6 @ 6x11 is no multiple of the tile in any dimension, so
    the ndrange is rounded up to whole tiles (12, 12) and the kernel guards its loads and its
    store itself (zero padding in the tiles)."""
    if dev == "CL" and not tk.backends()["OpenCL"][0]:
        pytest.skip(f"OpenCL: {tk.backends()['OpenCL'][1]}")
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((9, 6)).astype(np.float32), rng.standard_normal((6, 11)).astype(np.float32)
    be = tk.backend(dev)
    c = tk.zeros((9, 11), backend=be)
    ad, bd = tk.asarray(a, backend=be), tk.asarray(b, backend=be)
    matmul_tiled(be, (4, 4))(c, ad, bd, 4, ndrange=(12, 12))
    tk.synchronize(be)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------ PyTorch: torch_op

def test_torch_ops_forward_and_autograd_against_torch():
    """The four kernels as torch.library operators: values and gradients (x, bias, weights, both
    matmul operands; the matmul's adjoint goes through localmem and barriers) equal torch's own
    gelu / layer_norm / softmax / @ in float64."""
    torch = pytest.importorskip("torch")
    tkt = pytest.importorskip("tinykernels.torch")
    f64 = torch.float64
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(5, 7, dtype=f64, generator=gen, requires_grad=True)
    bias, w, b = (torch.randn(7, dtype=f64, generator=gen, requires_grad=True) for _ in range(3))
    g = torch.randn(5, 7, dtype=f64, generator=gen)
    gelu = tkt.torch_op(bias_gelu, outputs=["y"], name="user22::bias_gelu")
    ln = tkt.torch_op(layernorm_rows, outputs=["y"], name="user22::layernorm")
    sm = tkt.torch_op(softmax_rows, outputs=["y"], name="user22::softmax")
    mm = tkt.torch_op(matmul_tiled, outputs=["c"], name="user22::matmul", workgroupsize=(4, 4))

    def check(ours, ref, inputs):
        torch.testing.assert_close(ours, ref)
        for a_, b_ in zip(torch.autograd.grad((ours * g).sum(), inputs),
                          torch.autograd.grad((ref * g).sum(), inputs)):
            torch.testing.assert_close(a_, b_)

    check(gelu(torch.empty(5, 7, dtype=f64), x, bias), torch.nn.functional.gelu(x + bias), (x, bias))
    check(ln(torch.empty(5, 7, dtype=f64), x, w, b, eps=1e-5, ndrange=5),
          torch.nn.functional.layer_norm(x, (7,), w, b, 1e-5), (x, w, b))
    check(sm(torch.empty(5, 7, dtype=f64), x, ndrange=5), torch.softmax(x, 1), (x,))
    A = torch.randn(5, 6, dtype=f64, generator=gen, requires_grad=True)
    B = torch.randn(6, 7, dtype=f64, generator=gen, requires_grad=True)
    check(mm(torch.zeros(5, 7, dtype=f64), A, B, T=4, ndrange=(8, 8)), A @ B, (A, B))


# ------------------------------------------------------------------------ JAX

@pytest.mark.parametrize("how", ["jax_kernel", "raise_kernel"])
def test_jax_jit_grad_vmap_against_jax(how):
    """GELU and the tiled matmul through ``tinykernels.jax`` (SPEC section 11): jit, grad, and
    vmap over a batch axis, against jax.nn.gelu and @ in float64."""
    jax = pytest.importorskip("jax")
    tkj = pytest.importorskip("tinykernels.jax")
    import jax.numpy as jnp
    with jax.enable_x64(True):
        mk = getattr(tkj, how)
        gelu, mm = mk(bias_gelu, outputs=["y"]), mk(matmul_tiled, outputs=["c"])
        rng = np.random.default_rng(13)
        x, bias = jnp.asarray(rng.standard_normal((5, 7))), jnp.asarray(rng.standard_normal(7))
        f = lambda x, bias: gelu(jnp.zeros_like(x), x, bias)  # noqa: E731
        ref = lambda x, bias: jax.nn.gelu(x + bias, approximate=False)  # noqa: E731
        np.testing.assert_allclose(jax.jit(f)(x, bias), ref(x, bias), rtol=1e-12, atol=1e-14)
        loss = lambda fn: lambda x, bias: (fn(x, bias) ** 2).sum()  # noqa: E731
        for a_, b_ in zip(jax.jit(jax.grad(loss(f), (0, 1)))(x, bias), jax.grad(loss(ref), (0, 1))(x, bias)):
            np.testing.assert_allclose(a_, b_, rtol=1e-10, atol=1e-12)
        xb = jnp.stack([x, 2 * x, -x])
        np.testing.assert_allclose(jax.vmap(f, in_axes=(0, None))(xb, bias), ref(xb, bias), rtol=1e-12, atol=1e-14)
        A, B = jnp.asarray(rng.standard_normal((5, 6))), jnp.asarray(rng.standard_normal((6, 7)))
        g = jnp.asarray(rng.standard_normal((5, 7)))
        fm = lambda A, B: mm(jnp.zeros((5, 7)), A, B, T=4, ndrange=(8, 8), workgroupsize=(4, 4))  # noqa: E731
        np.testing.assert_allclose(jax.jit(fm)(A, B), A @ B, rtol=1e-12)
        for a_, b_ in zip(jax.grad(lambda A, B: (fm(A, B) * g).sum(), (0, 1))(A, B),
                          jax.grad(lambda A, B: ((A @ B) * g).sum(), (0, 1))(A, B)):
            np.testing.assert_allclose(a_, b_, rtol=1e-10, atol=1e-12)
