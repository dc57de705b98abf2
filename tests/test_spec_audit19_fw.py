"""SPEC section 11 (JAX and PyTorch) read line by line as a stranger would (audit fw19).

What a PyTorch user writes from "a ``torch.library`` custom op ... named ``ns::op``":
``torch.ops.ns.op(...)`` with the kernel's own arguments, and
``torch.library.opcheck(op, args, kwargs)`` on the returned op or on ``torch.ops.ns.op``.
Before fw19 ``torch.ops.ns.op`` was the generic ``(Tensor[] arrays, float[] floats, int[] ints,
str key)`` operator, so both raised (``opcheck(op, ...)``: "op must be instance of
torch._ops.OpOverload"). Also: the outputs come back in the order of ``outputs`` and the
default ndrange is the shape of the first name in ``outputs``, the same in ``jax_kernel``,
``raise_kernel`` and ``torch_op``; checked against NumPy and float64 finite differences.
"""
import math

import numpy as np
import pytest

import tinykernels as tk

from spec_audit19_kernels import overwrite, saxpy, scale_by, sin_scale2d, sum_diff, take

RNG = np.random.default_rng(19)


def _sum_diff_numpy(x, y):
    s = x + y
    return s, x * y - s


# ------------------------------------------------------------------------------- PyTorch

torch = None
try:
    import torch  # noqa: F811
    import tinykernels.torch as tktorch
except ImportError:
    pass

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install 'tinykernels[torch]')")


def _ops():
    """The operators of this file, registered once per process."""
    got = getattr(_ops, "cache", None)
    if got is None:
        reg = tktorch._LIBS
        def make(k, outs, name):
            return reg.get(name) or tktorch.torch_op(k, outputs=outs, name=name)
        got = _ops.cache = dict(saxpy=make(saxpy, ["y"], "audit19::saxpy"),
                                two=make(sum_diff, ["d", "s"], "audit19::sum_diff"),
                                img=make(sin_scale2d, ["out"], "audit19::sin_scale2d"),
                                mid=make(scale_by, ["y"], "audit19::scale_by"),
                                take=make(take, ["y"], "audit19::take"),
                                over=make(overwrite, ["y"], "audit19::overwrite"))
    return got


def t64(*shape, grad=False):
    return torch.tensor(RNG.random(shape) + 0.5, dtype=torch.float64, requires_grad=grad)


@needs_torch
def test_torch_ops_namespace_has_the_kernels_signature():
    ops = _ops()
    sch = str(torch.ops.audit19.saxpy.default._schema)
    assert sch.startswith("audit19::saxpy(Tensor y, Tensor x, *, Scalar a,"), sch
    assert ops["saxpy"].default is torch.ops.audit19.saxpy.default
    y0, x = t64(9), t64(9)
    want = 2.5 * x + y0
    torch.testing.assert_close(torch.ops.audit19.saxpy(y0, x, a=2.5), want)
    torch.testing.assert_close(torch.ops.audit19.saxpy.default(y0, x, a=2.5), want)
    torch.testing.assert_close(ops["saxpy"](y0, x, a=2.5), want)
    # an int and a bool scalar, an ndrange as a list
    torch.testing.assert_close(torch.ops.audit19.saxpy(y0, x, a=3), 3 * x + y0)
    torch.testing.assert_close(torch.ops.audit19.saxpy(y0, x, a=True), x + y0)
    part = torch.ops.audit19.saxpy(y0, x, a=2.0, ndrange=[4])
    torch.testing.assert_close(part, torch.cat([(2 * x + y0)[:4], y0[4:]]))
    # several outputs: in the order of outputs=["d", "s"]; the default ndrange is d's shape
    x, y = t64(6), t64(6)
    s, d = _sum_diff_numpy(x.numpy(), y.numpy())
    got = torch.ops.audit19.sum_diff(torch.zeros(6, dtype=torch.float64), torch.zeros(6, dtype=torch.float64), x, y)
    assert isinstance(got, tuple) and len(got) == 2
    torch.testing.assert_close(got[0], torch.from_numpy(d))
    torch.testing.assert_close(got[1], torch.from_numpy(s))
    short = ops["two"](torch.zeros(6, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), x, y)  # (s, d, x, y)
    torch.testing.assert_close(short[0], torch.from_numpy(d[:3]))
    torch.testing.assert_close(short[1], torch.from_numpy(np.r_[s[:3], 0, 0, 0]))
    # a constexpr by keyword, a 2-D output
    img, o0 = t64(3, 4), t64(3, 4)
    want = 0.5 * torch.sin(img ** 3) + o0
    torch.testing.assert_close(torch.ops.audit19.sin_scale2d(o0, img, c=0.5, p=3), want)
    # a scalar between two arrays is keyword-only in the schema too
    assert "Tensor y, Tensor x, *, Scalar s" in str(torch.ops.audit19.scale_by.default._schema)
    xs = t64(5)
    torch.testing.assert_close(torch.ops.audit19.scale_by(torch.zeros(5, dtype=torch.float64), xs, s=1.5), 1.5 * xs)


@needs_torch
@pytest.mark.parametrize("which", ["returned op", "torch.ops packet", "torch.ops overload"])
def test_opcheck_passes_on_the_natural_call(which):
    ops = _ops()
    pick = {"returned op": lambda name: ops[name],
            "torch.ops packet": lambda name: getattr(torch.ops.audit19, ops[name].opname),
            "torch.ops overload": lambda name: getattr(torch.ops.audit19, ops[name].opname).default}[which]
    cases = [("saxpy", (t64(7), t64(7, grad=True)), {"a": 2.0}),
             ("saxpy", (t64(7, grad=True), t64(14)[::2]), {"a": -1}),           # non-contiguous input
             ("saxpy", (torch.ones(5), torch.arange(5.0)), {"a": 2.0}),          # float32, no grad
             ("two", (t64(5), t64(5), t64(5, grad=True), t64(5, grad=True)), {}),
             ("img", (t64(3, 4), t64(3, 4, grad=True)), {"c": 0.25, "p": 2}),
             ("take", (t64(4), t64(6, grad=True), torch.tensor([0, 5, 5, 2], dtype=torch.int64)), {})]
    for k, (name, args, kwargs) in enumerate(cases):
        res = torch.library.opcheck(pick(name), args, kwargs, test_utils="ALL" if k == 0 else
                                    ("test_schema", "test_autograd_registration", "test_faketensor",
                                     "test_aot_dispatch_dynamic"))
        assert set(res.values()) == {"SUCCESS"} and len(res) >= 4, (name, res)


@needs_torch
def test_torch_export_keeps_the_operator_by_name():
    _ops()

    class Model(torch.nn.Module):
        def forward(self, y0, x):
            return torch.ops.audit19.saxpy(y0, x, a=2.0) * 2

    y0, x = t64(6), t64(6)
    ep = torch.export.export(Model(), (y0, x))
    assert "torch.ops.audit19.saxpy.default(y0, x, a = 2.0)" in ep.graph_module.code
    torch.testing.assert_close(ep.module()(y0, x), 2 * (2 * x + y0))


@needs_torch
def test_torch_ops_call_has_autograd_compile_and_vmap():
    y0, x = t64(8), t64(8, grad=True)
    assert torch.autograd.gradcheck(lambda x_: torch.ops.audit19.saxpy(y0, x_, a=1.5), (x,))
    img, o0 = t64(3, 4, grad=True), t64(3, 4, grad=True)
    assert torch.autograd.gradcheck(lambda i_, o_: torch.ops.audit19.sin_scale2d(o_, i_, c=0.7, p=2), (img, o0))
    # the gradient of a gather with a repeated index sums
    xs = t64(6, grad=True)
    torch.ops.audit19.take(torch.zeros(4, dtype=torch.float64), xs, torch.tensor([0, 5, 5, 2])).sum().backward()
    torch.testing.assert_close(xs.grad, torch.tensor([2.0, 0, 2, 0, 0, 4], dtype=torch.float64))

    @torch.compile(fullgraph=True)
    def model(y0, x):
        return torch.tanh(torch.ops.audit19.saxpy(y0, x, a=0.5)).sum()

    x.grad = None
    model(y0, x).backward()
    want = (1 - torch.tanh(0.5 * x.detach() + y0) ** 2) * 0.5
    torch.testing.assert_close(x.grad, want)
    xb, yb = t64(3, 8), t64(3, 8)
    torch.testing.assert_close(torch.vmap(lambda a_, b_: torch.ops.audit19.saxpy(a_, b_, a=2.0))(yb, xb), 2 * xb + yb)
    torch.testing.assert_close(torch.vmap(lambda b_: torch.ops.audit19.saxpy(yb[0], b_, a=2.0))(xb), 2 * xb + yb[0])


@needs_torch
def test_torch_ops_call_errors_are_clear():
    _ops()                      # registers torch.ops.audit19.* (when this test runs alone too)
    y0, x = t64(4), t64(4)
    with pytest.raises(RuntimeError, match="missing value for argument 'a'"):
        torch.ops.audit19.saxpy(y0, x)
    with pytest.raises(tk.LaunchError, match="torch.func transforms that differentiate"):
        torch.func.grad(lambda x_: torch.ops.audit19.saxpy(y0, x_, a=2.0).sum())(x)
    op = _ops()["saxpy"]
    for reg in ("register_fake", "register_autograd", "register_kernel", "register_vmap"):
        with pytest.raises(NotImplementedError, match=f"{reg} is not supported on a tinykernels operator"):
            getattr(op, reg)(lambda *a, **k: None)
    with pytest.raises(NotImplementedError, match="register_fake is not supported"):
        torch.library.register_fake(op, lambda *a, **k: None)
    # the wrapper's own checks are unchanged (torch.func through the wrapper works eagerly)
    torch.testing.assert_close(torch.func.grad(lambda x_: op(y0, x_, a=2.0).sum())(x), torch.full_like(x, 2.0))


@needs_torch
def test_torch_op_stranger_checks_against_numpy():
    """requires_grad on an output's initial value, integer tensors (no gradient), devices
    refused by name, inputs never modified."""
    ops = _ops()
    y0, x = t64(6, grad=True), t64(6, grad=True)
    before = (y0.detach().clone(), x.detach().clone())
    out = ops["saxpy"](y0, x, a=3.0)
    (out * out).sum().backward()
    torch.testing.assert_close(y0.grad, 2 * out.detach())
    torch.testing.assert_close(x.grad, 3 * 2 * out.detach())
    torch.testing.assert_close(y0.detach(), before[0])
    torch.testing.assert_close(x.detach(), before[1])
    yi = ops["saxpy"](torch.ones(5, dtype=torch.int64), torch.arange(5), a=2)
    assert yi.dtype == torch.int64 and yi.tolist() == [1, 3, 5, 7, 9]


# ----------------------------------------------------------------------------------- JAX

jax = None
try:
    import jax  # noqa: F811
    import jax.numpy as jnp
    import tinykernels.jax as tkjax
    if not hasattr(jax, "ffi"):
        jax = None
except ImportError:
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="needs jax >= 0.4.31 (pip install 'tinykernels[jax]')")


@needs_jax
@pytest.mark.parametrize("route", ["jax_kernel", "raise_kernel"])
def test_jax_outputs_order_default_ndrange_and_transforms(route):
    make = getattr(tkjax, route)
    with jax.enable_x64(True):
        x, y = RNG.random(6) + 0.5, RNG.random(6) + 0.5
        s, d = _sum_diff_numpy(x, y)
        f = make(sum_diff, outputs=["d", "s"])
        got = f(jnp.zeros(6), jnp.zeros(6), jnp.asarray(x), jnp.asarray(y))
        assert isinstance(got, tuple) and len(got) == 2
        np.testing.assert_allclose(got[0], d, rtol=1e-15)
        np.testing.assert_allclose(got[1], s, rtol=1e-15)
        short = f(jnp.zeros(6), jnp.zeros(3), jnp.asarray(x), jnp.asarray(y))   # (s, d, x, y): ndrange d's shape
        np.testing.assert_allclose(short[0], d[:3], rtol=1e-15)
        np.testing.assert_allclose(short[1], np.r_[s[:3], 0, 0, 0], rtol=1e-15)
        g = make(saxpy, outputs=["y"])
        xs, y0 = jnp.asarray(x), jnp.asarray(y)
        jitted = jax.jit(lambda y0, x: g(y0, x, a=2.0))
        np.testing.assert_allclose(jitted(y0, xs), 2 * x + y, rtol=1e-15)
        np.testing.assert_allclose(jax.vmap(lambda b: g(y0, b, a=2.0))(jnp.stack([xs, 2 * xs])),
                                   np.stack([2 * x + y, 4 * x + y]), rtol=1e-15)
        gx, gy = jax.grad(lambda b, c: jnp.sum(g(c, b, a=2.0) ** 2), argnums=(0, 1))(xs, y0)
        np.testing.assert_allclose(gx, 2 * (2 * x + y) * 2, rtol=1e-14)
        np.testing.assert_allclose(gy, 2 * (2 * x + y), rtol=1e-14)
        # a constexpr by keyword, the default ndrange of a 2-D output, against finite differences
        h = make(sin_scale2d, outputs=["out"])
        img, o0 = RNG.random((3, 4)) + 0.5, RNG.random((3, 4))
        np.testing.assert_allclose(h(jnp.asarray(o0), jnp.asarray(img), c=0.5, p=3), 0.5 * np.sin(img ** 3) + o0,
                                   rtol=1e-14)
        gi = jax.grad(lambda a: jnp.sum(h(jnp.asarray(o0), a, c=0.5, p=3)))(jnp.asarray(img))
        eps, fd = 1e-6, np.zeros_like(img)
        for k in np.ndindex(img.shape):
            e = np.zeros_like(img)
            e[k] = eps
            fd[k] = (np.sum(np.sin((img + e) ** 3)) - np.sum(np.sin((img - e) ** 3))) * 0.5 / (2 * eps)
        np.testing.assert_allclose(gi, fd, rtol=1e-7)


@needs_jax
@pytest.mark.parametrize("route", ["jax_kernel", "raise_kernel"])
def test_jax_calling_convention_errors_name_the_argument(route):
    f = getattr(tkjax, route)(saxpy, outputs=["y"])
    y0, x = jnp.ones(4), jnp.arange(4.0)
    with pytest.raises(tk.LaunchError, match=r"expected 3 array argument\(s\).*a=\.\.\."):
        f(y0, x)                                        # a scalar left out
    with pytest.raises(tk.LaunchError, match="argument 'a' is 0-d.*scalars go by keyword"):
        f(y0, x, 2.0)                                   # a scalar positionally
    with pytest.raises(tk.LaunchError, match="keyword argument 'a' must be a Python or NumPy scalar"):
        jax.jit(lambda y0, x, s: f(y0, x, a=s))(y0, x, 2.0)
    with pytest.raises(tk.LaunchError, match="argument 'x' with shape \\(2,\\) is indexed out of bounds"):
        f(y0, jnp.ones(2), a=1.0)
    with pytest.raises(tk.LaunchError, match="unsupported dtype complex64"):
        f(jnp.ones(4, jnp.complex64), jnp.ones(4, jnp.complex64), a=1.0)


def _overwrite_grads(n=6, m=4):
    """d/dy0 and d/dx of sum(overwrite(y0, x, a=3, ndrange=m)): 0 / 6 x inside the ndrange, 1 / 0 past it."""
    x = np.linspace(1.0, 2.0, n)
    return np.r_[np.zeros(m), np.ones(n - m)], np.r_[6.0 * x[:m], np.zeros(n - m)], x


@needs_torch
def test_torch_gradient_of_an_overwritten_initial_value():
    _ops()
    gy_want, gx_want, x = _overwrite_grads()
    for call in (lambda y, x_: _ops()["over"](y, x_, a=3.0, ndrange=4),
                 lambda y, x_: torch.ops.audit19.overwrite(y, x_, a=3.0, ndrange=[4])):
        y0 = torch.arange(6.0, dtype=torch.float64, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        call(y0, xt).sum().backward()
        np.testing.assert_allclose(y0.grad.numpy(), gy_want, rtol=1e-15)
        np.testing.assert_allclose(xt.grad.numpy(), gx_want, rtol=1e-15)
    res = torch.library.opcheck(_ops()["over"], (torch.arange(6.0, dtype=torch.float64, requires_grad=True),
                                                  torch.tensor(x, requires_grad=True)), {"a": 3.0, "ndrange": [4]})
    assert set(res.values()) == {"SUCCESS"}


@needs_jax
@pytest.mark.parametrize("route", ["jax_kernel", "raise_kernel"])
def test_jax_gradient_of_an_overwritten_initial_value(route):
    gy_want, gx_want, x = _overwrite_grads()
    f = getattr(tkjax, route)(overwrite, outputs=["y"])
    with jax.enable_x64(True):
        gy, gx = jax.grad(lambda y, x_: f(y, x_, a=3.0, ndrange=4).sum(), argnums=(0, 1))(jnp.arange(6.0),
                                                                                          jnp.asarray(x))
        np.testing.assert_allclose(gy, gy_want, rtol=1e-15)
        np.testing.assert_allclose(gx, gx_want, rtol=1e-15)
