"""SPEC 11 audited again (audit16b), in the manner of torch.library's opcheck samples and
jax.ffi's tests: the launch geometry given as NumPy integers (as code that computes it from
array shapes does), eagerly, with autograd and under jax.jit (TorchDynamo traces a NumPy
scalar as a tensor, so torch.compile(fullgraph=True) needs Python ints there), and geometries
that are no ints refused by name."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tinykernels as tk  # noqa: E402
from tinykernels.torch import torch_op  # noqa: E402

from interop_kernels import fma_update  # noqa: E402

FMA = torch_op(fma_update, outputs=["y"], name="ported16::fma")
GEOMETRIES = [{"ndrange": np.int64(6)}, {"ndrange": (np.int32(6),)}, {"ndrange": [np.int64(6)]},
              {"workgroupsize": np.int64(2)}, {"ndrange": 6, "workgroupsize": (np.int32(3),)}]


@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
def test_torch_op_takes_numpy_int_geometry(geom):
    """the operator's key holds the geometry's repr, read back with ast.literal_eval:
    np.int64(6) was 'ValueError: malformed node or string' from inside torch_op"""
    y0 = torch.arange(6, dtype=torch.float64)
    x = torch.full((6,), 2.0, dtype=torch.float64)
    want = y0 * x + 0.5 * x
    torch.testing.assert_close(FMA(y0, x, a=0.5, **geom), want)
    yg = y0.clone().requires_grad_(True)
    FMA(yg, x, a=0.5, **geom).sum().backward()
    torch.testing.assert_close(yg.grad, x)


def test_torch_op_geometry_that_is_no_int_is_a_launch_error_naming_it():
    y0, x = torch.zeros(6), torch.ones(6)
    with pytest.raises(tk.LaunchError, match=r"op ported16::fma: ndrange must be an int, a range or a tuple of "
                                             r"non-negative ints and ranges, got \(1\.5,\)"):
        FMA(y0, x, a=1.0, ndrange=(1.5,))
    with pytest.raises(tk.LaunchError, match="ndrange must be an int"):
        FMA(y0.requires_grad_(True), x, a=1.0, ndrange=6.0)
    # a range dimension is a launch like any other since fw16 (SPEC 2); tk.index() (Linear) is the
    # 0-based position within the range, so fma_update writes y[0:4]
    torch.testing.assert_close(FMA(y0, x, a=1.0, ndrange=(range(1, 5),)), torch.tensor([1., 1., 1., 1., 0., 0.]))


@pytest.mark.parametrize("raised", [False, True])
def test_jax_kernels_take_numpy_int_geometry(raised):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import tinykernels.jax as tkjax
    if not raised and not hasattr(jax, "ffi"):
        pytest.skip("jax.ffi needs jax >= 0.4.31")
    f = (tkjax.raise_kernel if raised else tkjax.jax_kernel)(fma_update, outputs=["y"])
    y0, x = jnp.arange(6.0, dtype=jnp.float32), jnp.full((6,), 2.0, jnp.float32)
    for geom in GEOMETRIES:
        np.testing.assert_array_equal(f(y0, x, a=0.5, **geom), y0 * x + 0.5 * x)
        np.testing.assert_array_equal(jax.jit(lambda u, v, g=geom: f(u, v, a=0.5, **g))(y0, x), y0 * x + 0.5 * x)
