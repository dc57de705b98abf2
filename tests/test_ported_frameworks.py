"""SPEC section 11 in the style of torch.library's opcheck tests and jax.ffi's tests: aliased
arguments, repeated gather indices, non-contiguous inputs under torch.compile, empty tensors,
and higher-order derivatives refused by name."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
if not hasattr(jax, "ffi"):
    pytest.skip("jax.ffi needs jax >= 0.4.31", allow_module_level=True)
torch = pytest.importorskip("torch")

import jax.numpy as jnp  # noqa: E402

import tinykernels as tk  # noqa: E402
import tinykernels.jax as tkjax  # noqa: E402
from tinykernels.torch import torch_op  # noqa: E402

jax.config.update("jax_enable_x64", True)

from interop_kernels import fma_update, gather  # noqa: E402

FMA = torch_op(fma_update, outputs=["y"], name="ported11::fma")
GATHER = torch_op(gather, outputs=["y"], name="ported11::gather")
IDX = [0, 0, 3, 1]


def test_torch_op_with_one_tensor_as_output_and_input_is_functional():
    """y = y * x + a * x with y and x the same tensor: the input is not modified, the result
    and the gradient are those of t * t + t"""
    t = torch.arange(1.0, 5.0, dtype=torch.float64, requires_grad=True)
    before = t.detach().clone()
    r = FMA(t, t, a=1.0)
    torch.testing.assert_close(r, before * before + before)
    torch.testing.assert_close(t.detach(), before)
    r.sum().backward()
    torch.testing.assert_close(t.grad, 2 * before + 1)


def test_torch_op_gradient_of_a_gather_with_repeated_indices_sums():
    x = torch.arange(1.0, 5.0, dtype=torch.float64, requires_grad=True)
    GATHER(torch.zeros(4, dtype=torch.float64), x, torch.tensor(IDX, dtype=torch.int32)).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([4.0, 4.0, 0.0, 8.0], dtype=torch.float64))


def test_torch_op_non_contiguous_inputs_under_compile_and_gradcheck():
    x = torch.rand(12, dtype=torch.float64)[::2]
    y = torch.rand(6, dtype=torch.float64)
    f = torch.compile(lambda a_, b_: FMA(a_, b_, a=0.5), fullgraph=True)
    torch.testing.assert_close(f(y, x), y * x + 0.5 * x)
    yy = torch.rand(8, dtype=torch.float64, requires_grad=True)[::2]
    xx = torch.rand(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a_, b_: FMA(a_, b_, a=0.7), (yy, xx))


def test_torch_op_empty_tensors_and_errors_naming_the_argument():
    assert FMA(torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.float64), a=1.0).shape == (0,)
    with pytest.raises(tk.LaunchError, match="argument 'y' must be a torch.Tensor"):
        FMA([1.0] * 6, torch.ones(6, dtype=torch.float64), a=2.0)
    with pytest.raises(tk.LaunchError, match="unknown keyword argument 'b'"):
        FMA(torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64), a=2.0, b=3)
    with pytest.raises(tk.LaunchError, match="double backward"):
        yy = torch.rand(6, dtype=torch.float64, requires_grad=True)
        torch.autograd.gradgradcheck(lambda a_: FMA(a_, a_, a=0.7), (yy,))


@pytest.mark.parametrize("mode", ["vjp", "jvp"])
def test_jax_kernel_with_one_array_as_output_and_input(mode):
    f = tkjax.jax_kernel(fma_update, outputs=["y"], autodiff=mode)
    a = jnp.arange(1.0, 5.0)
    np.testing.assert_array_equal(f(a, a, a=1.0), a * a + a)
    np.testing.assert_allclose(jax.grad(lambda u: f(u, u, a=1.0).sum())(a), 2 * a + 1)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda u: f(u, u, a=1.0).sum()))(a), 2 * a + 1)


def test_jax_kernel_gather_gradient_with_repeated_indices():
    a = jnp.arange(1.0, 5.0)
    idx = jnp.array(IDX, jnp.int32)
    for f in (tkjax.jax_kernel(gather, outputs=["y"]), tkjax.raise_kernel(gather, outputs=["y"])):
        np.testing.assert_allclose(jax.grad(lambda u: f(jnp.zeros(4), u, idx).sum())(a), [4.0, 4.0, 0.0, 8.0])


@pytest.mark.parametrize("mode", ["vjp", "jvp"])
def test_jax_kernel_second_order_derivatives_are_refused_by_name(mode):
    """jax.grad of jax.grad (and jax.hessian) differentiates the derivative rule itself; that
    was JAX's 'The FFI call to `tinykernels_fma_update_...` cannot be differentiated'"""
    f = tkjax.jax_kernel(fma_update, outputs=["y"], autodiff=mode)
    a = jnp.arange(1.0, 5.0)
    kind = "adjoint" if mode == "vjp" else "tangent"
    with pytest.raises(tk.LaunchError, match=f"jax_kernel 'fma_update': differentiating its derivative .* "
                                             f"tinykernels' {kind} kernel"):
        jax.grad(lambda u: jax.grad(lambda v: f(v, v, a=1.0).sum())(u).sum())(a)
    with pytest.raises(tk.LaunchError, match="differentiating its derivative"):
        jax.hessian(lambda u: f(u, u, a=1.0).sum())(a)
    # first-order transforms still work after the refusal
    np.testing.assert_allclose(jax.grad(lambda u: f(u, u, a=1.0).sum())(a), 2 * a + 1)
    if mode == "vjp":
        np.testing.assert_allclose(jax.vmap(jax.grad(lambda u: f(u, 2 * u, a=1.0).sum()))(jnp.ones((3, 4))), 6.0)
    else:
        _, t = jax.jvp(lambda u: f(u, u, a=1.0), (a,), (jnp.ones(4),))
        np.testing.assert_allclose(t, 2 * a + 1)


def test_the_raised_kernel_has_second_order_derivatives():
    """raise_kernel lowers to JAX operations, so jax.hessian works there (contrast with jax_kernel)"""
    r = tkjax.raise_kernel(fma_update, outputs=["y"])
    a = jnp.arange(1.0, 5.0)
    np.testing.assert_allclose(jax.hessian(lambda u: r(u, u, a=1.0).sum())(a), 2 * np.eye(4))
