"""Output buffers of the framework wrappers (tinykernels.jax / tinykernels.torch): which
outputs a kernel fully overwrites (passes.overwrites.fully_overwritten), so that they get a
fresh buffer instead of a copy of their initial value, and the values of large calls on
both paths (fresh, and copied-in initial value)."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels.passes.overwrites import fully_overwritten, is_elementwise

from interop_kernels import fma_update, gather, stencil2d, two_outputs


@tk.kernel
def triad(y, x: tk.Const, z: tk.Const, s):
    i = tk.index()
    y[i] = x[i] + s * z[i]


@tk.kernel
def ends_early(y, x: tk.Const):
    i = tk.index()
    if x[i] > 0:
        return
    y[i] = 1.0


@tk.kernel
def conditional(y, x: tk.Const):
    i = tk.index()
    if x[i] > 0:
        y[i] = 1.0


@tk.kernel
def copy2d(out, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = x[i, j] * 2


@tk.kernel
def transpose(out, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[j, i] = x[i, j]


@tk.kernel
def shifted_store(out, x: tk.Const):
    i = tk.index()
    out[i + 1] = x[i]


def _ir(k, args, nd):
    inst = k(tk.CPU())
    norm, geom, ndim, ranges, _total, wg = inst._prepare(args, nd, None)
    return inst._ir(norm, geom, ndim, ranges, wg)


def z(*s):
    return np.zeros(s)


@pytest.mark.parametrize("kernel,args,nd,want", [
    (triad, [z(8), z(8), z(8), 1.0], 8, {"y"}),
    (copy2d, [z(3, 4), z(3, 4)], (3, 4), {"out"}),
    (gather, [z(8), z(8), np.zeros(8, np.int64)], 8, {"y"}),
    (two_outputs, [z(8), z(8), z(8), z(8), 2], 8, {"d"}),      # s is read back after its store
    (fma_update, [z(8), z(8), 1.0], 8, set()),                 # reads y's initial value
    (stencil2d, [z(3, 4), z(3, 4), 1.0, 2.0], (3, 4), set()),
    (ends_early, [z(8), z(8)], 8, set()),                      # an item may return before its store
    (conditional, [z(8), z(8)], 8, set()),                     # the store is conditional
    (transpose, [z(4, 4), z(4, 4)], (4, 4), set()),            # not the item's own element
    (shifted_store, [z(9), z(8)], 8, set()),
])
def test_fully_overwritten(kernel, args, nd, want):
    assert set(fully_overwritten(_ir(kernel, args, nd))) == want


@pytest.mark.parametrize("kernel,args,nd,want", [
    (triad, [z(8), z(8), z(8), 1.0], 8, True),
    (copy2d, [z(3, 4), z(3, 4)], (3, 4), True),
    (fma_update, [z(8), z(8), 1.0], 8, True),
    (two_outputs, [z(8), z(8), z(8), z(8), 2], 8, True),
    (gather, [z(8), z(8), np.zeros(8, np.int64)], 8, False),        # x[idx[i]]
    (stencil2d, [z(3, 4), z(3, 4), 1.0, 2.0], (3, 4), False),        # a neighbour, and j > 0
    (conditional, [z(8), z(8)], 8, True),                            # depends on values only
    (transpose, [z(4, 4), z(4, 4)], (4, 4), False),
    (shifted_store, [z(9), z(8)], 8, False),
])
def test_is_elementwise(kernel, args, nd, want):
    assert is_elementwise(_ir(kernel, args, nd)) is want


N = 1 << 19            # 4 MiB of float64: the large-output path


def test_torch_large_outputs_fresh_and_copied():
    torch = pytest.importorskip("torch")
    import tinykernels.torch as tktorch
    tri = tktorch._LIBS.get("tkbuf::triad") or tktorch.torch_op(triad, outputs=["y"], name="tkbuf::triad")
    fma = tktorch._LIBS.get("tkbuf::fma") or tktorch.torch_op(fma_update, outputs=["y"], name="tkbuf::fma")
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(N, dtype=torch.float64, generator=g), torch.randn(N, dtype=torch.float64, generator=g)
    y0 = torch.randn(N, dtype=torch.float64, generator=g)
    keep = y0.clone()
    for _ in range(2):
        torch.testing.assert_close(tri(y0, x, w, s=0.5), x + 0.5 * w)        # fresh buffer, no copy
        torch.testing.assert_close(fma(y0, x, a=1.5), keep * x + 1.5 * x)   # initial value copied in
        torch.testing.assert_close(fma(y0[: N // 2], x[: N // 2], a=1.5, ndrange=N // 4)[: N // 4],
                                   (keep * x + 1.5 * x)[: N // 4])
    out = torch.full((N,), float("nan"), dtype=torch.float64)
    plan = tri._plan(tri._key({"s": 0.5}, N, None)[0], 3)
    fresh = tri._large_output(plan, 0, [out, x, w], [0.5], [], N)     # an int ndrange: no copy either
    assert fresh.data_ptr() != out.data_ptr() and not torch.isnan(fresh).all()
    assert torch.isnan(fma._large_output(fma._plan(fma._key({"a": 0.5}, N, None)[0], 2), 0, [out, x], [0.5], [],
                                         N)).all()                  # y is read: its initial value copied
    torch.testing.assert_close(tri(out, x, w, s=0.5, ndrange=N), x + 0.5 * w)   # an int ndrange
    # ndrange smaller than the output: the rest keeps the initial value, even for a kernel
    # that overwrites every element it is launched on
    part = tri(y0, x, w, s=0.5, ndrange=N // 2)
    torch.testing.assert_close(part[: N // 2], (x + 0.5 * w)[: N // 2])
    torch.testing.assert_close(part[N // 2:], keep[N // 2:])
    torch.testing.assert_close(y0, keep)


def test_jax_fresh_output_is_not_aliased_and_values_hold():
    jax = pytest.importorskip("jax")
    if not hasattr(jax, "ffi"):
        pytest.skip("jax.ffi needs jax >= 0.4.31")
    import jax.numpy as jnp
    import tinykernels.jax as tkjax
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(4)
    x, w, y0 = (jnp.asarray(rng.standard_normal(N)) for _ in range(3))
    tri, fma = tkjax.jax_kernel(triad, outputs=["y"]), tkjax.jax_kernel(fma_update, outputs=["y"])
    ft = jax.jit(lambda y, a, b: tri(y, a, b, s=0.5))
    ff = jax.jit(lambda y, a: fma(y, a, a=1.5))
    assert "output_operand_aliases" not in ft.lower(y0, x, w).as_text()      # y: a fresh XLA buffer
    assert "output_operand_aliases" in ff.lower(y0, x).as_text()            # y's initial value is read
    np.testing.assert_allclose(ft(y0, x, w), x + 0.5 * w, rtol=1e-15)
    np.testing.assert_allclose(ff(y0, x), y0 * x + 1.5 * x, rtol=1e-15)
    part = jax.jit(lambda y, a, b: tri(y, a, b, s=0.5, ndrange=N // 2))(y0, x, w)
    np.testing.assert_allclose(part[N // 2:], y0[N // 2:])
    donated = jax.jit(lambda y, a: fma(y, a, a=1.5), donate_argnums=0)
    np.testing.assert_allclose(donated(jnp.array(y0), x), y0 * x + 1.5 * x, rtol=1e-15)


@tk.kernel
def uses_position(y, x: tk.Const):
    i = tk.index()
    y[i] = x[i] * i


@tk.kernel
def uses_shape(y, x: tk.Const):
    i = tk.index()
    y[i] = x[i] * x.shape[0]


def test_position_or_shape_dependent_kernels_are_not_elementwise():
    assert not is_elementwise(_ir(uses_position, [z(8), z(8)], 8))
    assert not is_elementwise(_ir(uses_shape, [z(8), z(8)], 8))
