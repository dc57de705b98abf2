"""Gradients of a stranger's programs, written from SPEC.md section 7 alone (audit user22): a
loss through several stencil launches (reverse and forward mode against central finite
differences in float64), and the gradient of an N-body potential computed with local-memory
tiles (against the analytic force). The tests named ``..._was_...`` failed before this audit's
fixes: the adjoint of an ``unsafe_indices`` kernel whose ndrange is no multiple of its workgroup
wrote its tape past the end (the items past the ndrange push too): a crash on the CPU
(``munmap_chunk(): invalid pointer``), an IndexError on the interpreter."""
import math

import numpy as np
import pytest

import tinykernels as tk

BACKENDS = ["CPU", "INTERP", "INTERP:CHECK"]
_info = tk.backends()
for _name, _dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
    _ok, _why = _info[_name]
    BACKENDS.append(pytest.param(_dev, id=_dev, marks=pytest.mark.skipif(not _ok, reason=f"{_name}: {_why}")))


@tk.kernel
def heat_step(out, u: tk.Const, alpha):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4 * u[i, j])


@tk.kernel
def sq_misfit(loss, u: tk.Const, target: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    d = u[i, j] - target[i, j]
    tk.atomic_add(loss, 0, d * d)


def _simulate(b, u0, alpha, loss, target, steps=3):
    """``steps`` heat steps on the interior (range ndrange), ping-ponging two temporaries made
    inside the differentiated function, then the squared misfit summed with an atomic."""
    n = u0.shape
    bufs = [tk.zeros(n, tk.float64, backend=b), tk.zeros(n, tk.float64, backend=b)]
    tk.copyto(bufs[0], u0)
    tk.copyto(bufs[1], u0)
    for s in range(steps):
        heat_step(b)(bufs[1 - s % 2], bufs[s % 2], alpha, ndrange=(range(1, n[0] - 1), range(1, n[1] - 1)))
    sq_misfit(b)(loss, bufs[steps % 2], target, ndrange=n)


@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_loss_through_stencil_steps_reverse_and_forward_vs_finite_differences(dev):
    b = tk.backend(dev)
    rng = np.random.default_rng(30)
    u0, target, alpha = rng.random((5, 6)), rng.random((5, 6)), 0.2

    def loss_of(u, a):
        out = np.zeros(1)
        _simulate(b, u.copy(), a, out, target)
        tk.synchronize(b)
        return out[0]

    du0, loss, dloss = np.zeros_like(u0), np.zeros(1), np.ones(1)
    (dalpha,) = tk.autodiff(tk.Reverse, lambda u, a, l: _simulate(b, u, a, l, target),
                            tk.Duplicated(u0.copy(), du0), tk.Active(alpha), tk.Duplicated(loss, dloss))
    assert loss[0] == pytest.approx(loss_of(u0, alpha), rel=1e-14)
    h = 1e-6
    fd = np.zeros_like(u0)
    for idx in np.ndindex(u0.shape):
        e = np.zeros_like(u0)
        e[idx] = h
        fd[idx] = (loss_of(u0 + e, alpha) - loss_of(u0 - e, alpha)) / (2 * h)
    np.testing.assert_allclose(du0, fd, rtol=1e-6, atol=1e-8)
    assert dalpha == pytest.approx((loss_of(u0, alpha + h) - loss_of(u0, alpha - h)) / (2 * h), rel=1e-6)

    # forward mode: the directional derivative along (v, 1) for (u0, alpha)
    v = rng.standard_normal(u0.shape)
    tl = np.zeros(1)
    tk.autodiff(tk.Forward, lambda u, a, l: _simulate(b, u, a, l, target),
                tk.Duplicated(u0.copy(), v), tk.Duplicated(alpha, 1.0), tk.Duplicated(np.zeros(1), tl))
    fdj = (loss_of(u0 + h * v, alpha + h) - loss_of(u0 - h * v, alpha - h)) / (2 * h)
    assert tl[0] == pytest.approx(fdj, rel=1e-6)


@tk.kernel(unsafe_indices=True)
def tiled_potential(energy, pos: tk.Const, n, eps2, TILE: tk.constexpr):
    i = tk.index()
    li = tk.index(tk.Local, tk.Linear)
    me = min(i, n - 1)          # the items past n load tile slots too, so they run (unsafe_indices)
    tile = tk.localmem(pos.dtype, (TILE, 3))
    e = 0.0
    for t in range((n + TILE - 1) // TILE):
        j = t * TILE + li
        if j < n:
            tile[li, 0] = pos[j, 0]
            tile[li, 1] = pos[j, 1]
            tile[li, 2] = pos[j, 2]
        tk.synchronize()
        for jj in range(TILE):
            if t * TILE + jj < n and t * TILE + jj != i:
                dx = tile[jj, 0] - pos[me, 0]
                dy = tile[jj, 1] - pos[me, 1]
                dz = tile[jj, 2] - pos[me, 2]
                e += -0.5 / math.sqrt(dx * dx + dy * dy + dz * dz + eps2)
        tk.synchronize()
    if i < n:
        tk.atomic_add(energy, 0, e)


@pytest.mark.parametrize("dev", BACKENDS)
def test_nbody_potential_gradient_is_minus_the_force_unsafe_partial_group_was_a_crash(dev):
    """E = -1/2 sum_{i != j} 1/sqrt(r_ij^2 + eps2) over 11 bodies in tiles of 4 (the last group
    has one item past n, which loads no tile slot but runs: unsafe_indices); dE/dp_i equals
    minus the softened force on body i."""
    b = tk.backend(dev)
    dt = np.float64 if b.supports_float64 else np.float32
    n, eps2 = 11, 0.01
    rng = np.random.default_rng(31)
    pos = rng.standard_normal((n, 3)).astype(dt)
    P, dP = tk.asarray(pos, backend=b), tk.zeros((n, 3), dt, backend=b)
    E, dE = tk.zeros(1, dt, backend=b), tk.asarray(np.ones(1, dt), backend=b)
    tk.autodiff(tk.Reverse, lambda P, E: tiled_potential(b, 4)(E, P, n, eps2, 4, ndrange=n),
                tk.Duplicated(P, dP), tk.Duplicated(E, dE))
    p = pos.astype(np.float64)
    d = p[None, :, :] - p[:, None, :]               # d[i, j] = p_j - p_i
    r2 = (d ** 2).sum(-1) + eps2
    np.fill_diagonal(r2, np.inf)
    force = (d / r2[..., None] ** 1.5).sum(1)        # -dE/dp_i
    tol = dict(rtol=1e-12, atol=1e-12) if dt == np.float64 else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(E.numpy()[0], -0.5 * (1 / np.sqrt(r2)).sum(), **tol)
    np.testing.assert_allclose(dP.numpy(), -force, **tol)


@tk.kernel(unsafe_indices=True)
def mirrored_tile(y, x: tk.Const, s):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    n0 = x.shape[0]
    n1 = x.shape[1]
    t = tk.localmem(x.dtype, (2, 4))
    t[li, lj] = x[min(i, n0 - 1), min(j, n1 - 1)]
    tk.synchronize()
    v = t[1 - li, 3 - lj] * s
    v = v * v
    if i < n0 and j < n1:
        y[i, j] = v


@pytest.mark.parametrize("dev", ["CPU", "INTERP", "INTERP:CHECK"])
def test_unsafe_2d_tiles_partial_groups_gradient_was_out_of_bounds(dev):
    """A 2-D unsafe_indices kernel on a (3, 5) ndrange in (2, 4) groups: the padded items load
    the clamped edge into the tile and their neighbours read it, so the gradient flows through
    them. Their tape slots were global linear indices i * 5 + j with j >= 5, another item's slot
    or past the tape (IndexError on the interpreter); against finite differences, with an Active
    scalar."""
    b = tk.backend(dev)
    rng = np.random.default_rng(32)
    x, w, s = rng.standard_normal((3, 5)), rng.standard_normal((3, 5)), 0.7

    def loss(x, s):
        y = np.zeros((3, 5))
        mirrored_tile(b, (2, 4))(y, x, s, ndrange=(3, 5))
        tk.synchronize(b)
        return (y * w).sum()

    dx = np.zeros_like(x)
    (ds,) = tk.autodiff(tk.Reverse, lambda y, x, s: mirrored_tile(b, (2, 4))(y, x, s, ndrange=(3, 5)),
                        tk.Duplicated(np.zeros((3, 5)), w.copy()), tk.Duplicated(x, dx), tk.Active(s))
    h = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        fd[idx] = (loss(x + e, s) - loss(x - e, s)) / (2 * h)
    np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)
    assert ds == pytest.approx((loss(x, s + h) - loss(x, s - h)) / (2 * h), rel=1e-6)
