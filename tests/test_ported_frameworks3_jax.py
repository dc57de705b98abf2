"""SPEC 6, 7 and 11 across features (audit17a), with JAX's own tools: ``check_grads`` with x64 off
(float32) in both differentiation modes, ``vmap`` with ``in_axes``/``out_axes`` other than 0,
``jax.linearize``, ``jax.vjp`` of several outputs, ``make_jaxpr`` (one FFI call), arrays sharded
on one device. These combinations held (no finding); they are kept as tests."""
import numpy as np
import pytest

import tinykernels as tk

jax = pytest.importorskip("jax")
if not hasattr(jax, "ffi"):
    pytest.skip("jax.ffi needs jax >= 0.4.31", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import tinykernels.jax as tkjax  # noqa: E402

from interop_kernels import fma_update, two_outputs  # noqa: E402


@pytest.fixture(params=[False, True], ids=["x64-off", "x64-on"])
def x64(request):
    with jax.enable_x64(request.param):
        yield request.param


def _data(x64):
    dt = jnp.float64 if x64 else jnp.float32
    x = jnp.linspace(0.1, 0.9, 6, dtype=dt)
    return dt, x, jnp.cos(x) + 0.5


@pytest.mark.parametrize("mode", ["vjp", "jvp"])
def test_check_grads_two_outputs_and_transforms(mode, x64):
    dt, x, y = _data(x64)
    T = tkjax.jax_kernel(two_outputs, outputs=["s", "d"], autodiff=mode)
    z = jnp.zeros(6, dt)
    modes = ("rev",) if mode == "vjp" else ("fwd", "rev")
    eps, tol = (1e-4, 1e-6) if x64 else (1e-2, 2e-2)
    check_grads(lambda a, b: T(z, z, a, b, n=2.0), (x, y), order=1, modes=modes, eps=eps, atol=tol, rtol=tol)
    # jax.vjp with a cotangent for each output: s = a + b n, d = a b - s / 2
    _, back = jax.vjp(lambda a, b: T(z, z, a, b, n=2.0), x, y)
    ga, gb = back((jnp.ones(6, dt), 2 * jnp.ones(6, dt)))
    rt = 1e-12 if x64 else 1e-6
    np.testing.assert_allclose(ga, 1 + 2 * (y - 0.5), rtol=rt)
    np.testing.assert_allclose(gb, 2 + 2 * (x - 1.0), rtol=rt)
    if mode == "jvp":
        _, lin = jax.linearize(lambda a: T(z, z, a, y, n=2.0)[1], x)
        np.testing.assert_allclose(lin(jnp.ones(6, dt)), y - 0.5, rtol=rt)


def test_vmap_axes_jaxpr_and_sharding(x64):
    dt, x, y = _data(x64)
    f = tkjax.jax_kernel(fma_update, outputs=["y"])
    xs = jnp.stack([x, 2 * x], 1)
    want = jnp.stack([y * x + 0.5 * x, y * 2 * x + x])
    np.testing.assert_allclose(jax.vmap(lambda a, b: f(a, b, a=0.5), in_axes=(None, 1))(y, xs), want, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(lambda a, b: f(a, b, a=0.5), in_axes=(None, 1), out_axes=1)(y, xs), want.T,
                               rtol=1e-6)
    grad = jax.grad(lambda a, b: f(a, b, a=0.5).sum(), argnums=1)
    np.testing.assert_allclose(jax.vmap(grad, in_axes=(None, 1))(y, xs), jnp.stack([y + 0.5, y + 0.5]), rtol=1e-6)
    jaxpr = str(jax.make_jaxpr(lambda a, b: f(a, b, a=0.5))(y, x))
    assert jaxpr.count("ffi_call") == 1, jaxpr
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    sharding = NamedSharding(Mesh(np.array(jax.devices()[:1]), ("i",)), PartitionSpec("i"))
    ys, xsh = jax.device_put(y, sharding), jax.device_put(x, sharding)
    np.testing.assert_allclose(jax.jit(lambda a, b: f(a, b, a=0.5))(ys, xsh), y * x + 0.5 * x, rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda b: f(ys, b, a=0.5).sum())(xsh), y + 0.5, rtol=1e-6)


def test_a_traced_scalar_is_refused_by_name():
    f = tkjax.jax_kernel(fma_update, outputs=["y"])
    x = jnp.linspace(0.0, 1.0, 6)
    with pytest.raises(tk.LaunchError, match="keyword argument 'a' must be a Python or NumPy scalar"):
        jax.vmap(lambda a, b, s: f(a, b, a=s))(jnp.stack([x, x]), jnp.stack([x, x]), jnp.array([0.5, 1.0]))


@pytest.mark.parametrize("mode", ["vjp", "jvp"])
def test_donation_float16_pytrees_and_the_kernel_twice_in_one_gradient(mode, x64):
    dt, x, y = _data(x64)
    f = tkjax.jax_kernel(fma_update, outputs=["y"], autodiff=mode)
    T = tkjax.jax_kernel(two_outputs, outputs=["s", "d"], autodiff=mode)
    rt = 1e-12 if x64 else 1e-6
    step = jax.jit(lambda a, b: f(a, b, a=0.5), donate_argnums=0)
    y1 = jnp.array(y)
    np.testing.assert_allclose(step(y1, x), y * x + 0.5 * x, rtol=rt)
    assert y1.is_deleted()
    h, xh = y.astype(jnp.float16), x.astype(jnp.float16)
    want = (h.astype(np.float32) * xh.astype(np.float32) + 0.5 * xh.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(f(h, xh, a=0.5), want)
    out = jax.jit(lambda a, b: {"pair": T(jnp.zeros(6, dt), jnp.zeros(6, dt), a, b, n=2.0)})(x, y)
    np.testing.assert_allclose(out["pair"][0], x + 2 * y, rtol=rt)
    # twice in one gradient: f(f(1, b), b) = (b + b) b + b / 2 = 2 b^2 + b / 2
    np.testing.assert_allclose(jax.grad(lambda b: f(f(jnp.ones(6, dt), b, a=1.0), b, a=0.5).sum())(x), 4 * x + 0.5,
                               rtol=rt)
