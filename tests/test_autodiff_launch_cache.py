"""tk.autodiff's per-launch caches never return stale facts: one call site launched twice
with each property of an argument changed in between (dtype, shape, strides, another array at
a reused address, a swapped shadow, a torch tensor given new data, a global the kernel folds in),
gradients and tangents checked against float64 central finite differences; and the errors
that name an argument still come on the second launch of a signature."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params

CPU = tk.CPU()
MODE = 0          # a global the kernel folds in: which array `switch` writes


@tk.kernel
def triad(a, b, c, s):
    i = tk.index()
    a[i] = b[i] * b[i] + s * c[i]


@tk.kernel
def switch(y, z, x):
    i = tk.index()
    if MODE == 0:
        y[i] = x[i] * x[i]
    else:
        z[i] = 3.0 * x[i]


@tk.kernel
def double(w, z):
    i = tk.index()
    w[i] = 2.0 * z[i]


def run(mode, a, da, b, db, c, dc, s, ds=None, n=None):
    """``tk.autodiff`` of one triad launch (one call site for every test)."""
    n = len(a) if n is None else n
    f = lambda a_, b_, c_, s_: triad(CPU)(a_, b_, c_, s_, ndrange=n)   # noqa: E731
    sa = tk.Duplicated(s, ds) if mode is tk.Forward else tk.Active(s)
    return tk.autodiff(mode, f, tk.Duplicated(a, da), tk.Duplicated(b, db), tk.Duplicated(c, dc), sa)


def loss_fd(b, c, s, seed, eps=1e-6):
    """Central differences (float64) of sum(seed * (b*b + s*c)) w.r.t. b, c and s."""
    f = lambda b_, c_, s_: float((seed * (b_ * b_ + s_ * c_)).sum())   # noqa: E731
    b, c = b.astype(np.float64), c.astype(np.float64)
    gb, gc = np.zeros_like(b), np.zeros_like(c)
    for g, x, which in ((gb, b, 0), (gc, c, 1)):
        for k in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[k] += eps
            xm[k] -= eps
            g[k] = (f(xp, c, s) - f(xm, c, s)) / (2 * eps) if which == 0 else (f(b, xp, s) - f(b, xm, s)) / (2 * eps)
    gs = (f(b, c, s + eps) - f(b, c, s - eps)) / (2 * eps)
    return gb, gc, gs


def check_reverse(a, b, c, s, rtol):
    seed = np.random.default_rng(1).standard_normal(a.shape)
    da, db, dc = seed.astype(a.dtype), np.zeros_like(b), np.zeros_like(c)
    (gs,) = run(tk.Reverse, a, da, b, db, c, dc, s)
    gb, gc, fgs = loss_fd(b, c, float(s), seed.astype(a.dtype).astype(np.float64))
    np.testing.assert_allclose(db, gb, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(dc, gc, rtol=rtol, atol=rtol)
    assert abs(gs - fgs) <= rtol * (1 + abs(fgs))


def check_forward(a, b, c, s, rtol, eps=1e-6):
    rng = np.random.default_rng(2)
    vb, vc = rng.standard_normal(b.shape).astype(b.dtype), rng.standard_normal(c.shape).astype(c.dtype)
    da, db, dc = np.zeros_like(a), vb.copy(), vc.copy()
    run(tk.Forward, a, da, b, db, c, dc, s, ds=0.5)
    f = lambda t: (b.astype(np.float64) + t * vb) ** 2 + (float(s) + t * 0.5) * (c.astype(np.float64) + t * vc)  # noqa: E731
    np.testing.assert_allclose(da, (f(eps) - f(-eps)) / (2 * eps), rtol=rtol, atol=rtol)


@pytest.fixture(params=["reverse", "forward"])
def check(request):
    return check_reverse if request.param == "reverse" else check_forward


def arrays(n, dt=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return np.zeros(n, dt), rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)


def test_dtype_then_shape_changes_between_launches(check):
    check(*arrays(8), 1.5, 1e-6)
    check(*arrays(8, np.float32), np.float32(1.5), 1e-3)     # same shapes, another dtype
    check(*arrays(13), 1.5, 1e-6)                            # another length
    a, b, c = (x.reshape(4, 4) for x in arrays(16))
    with pytest.raises(tk.CompileError, match="2 dimension"):   # 2-d arrays, 1-d index: as before
        run(tk.Reverse, a, np.ones_like(a), b, np.zeros_like(b), c, np.zeros_like(c), 1.5)


def test_strides_change_between_launches(check):
    check(*arrays(8), 2.0, 1e-6)
    a, b, c = (np.repeat(x, 2)[::2] for x in arrays(8, seed=3))    # strided views, same shape and dtype
    assert not b.flags.c_contiguous
    check(a, b, c, 2.0, 1e-6)
    check(*(x[::-1] for x in arrays(8, seed=4)), 2.0, 1e-6)           # negative strides


def test_another_array_at_a_reused_address(check):
    for seed in range(4):           # freed each round: NumPy often reuses the address
        check(*arrays(8, seed=seed), 0.5 + seed, 1e-6)


def test_shadow_swapped_between_launches():
    a, b, c = arrays(8)
    seed = np.ones(8)
    db1, db2 = np.zeros(8), np.zeros(8)
    run(tk.Reverse, a, seed.copy(), b, db1, c, np.zeros(8), 1.0)
    run(tk.Reverse, a, seed.copy(), b, db2, c, np.zeros(8), 1.0)
    np.testing.assert_allclose(db1, 2 * b)
    np.testing.assert_allclose(db2, 2 * b)          # the second shadow got it, not the first again
    with pytest.raises(ValueError, match="dtype"):   # a shadow of another dtype, same call site
        run(tk.Reverse, a, seed.copy(), b, np.zeros(8, np.float32), c, np.zeros(8), 1.0)
    with pytest.raises(ValueError, match="share memory"):
        run(tk.Reverse, a, seed.copy(), b, np.zeros(8), c, a, 1.0)
    ro = np.zeros(8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        run(tk.Reverse, a, seed.copy(), b, ro, c, np.zeros(8), 1.0)


def test_aliasing_refused_on_a_repeated_signature():
    a, b, c = arrays(8)
    x = np.random.default_rng(6).standard_normal(8)
    for mode in (tk.Forward, tk.Reverse, tk.Forward):
        for k in range(3):           # the signature is known; the third launch reads a's memory as c
            cc = x if k == 2 else c
            f = lambda a_, b_: triad(CPU)(a_, b_, cc, 1.0, ndrange=8)   # noqa: E731
            args = (tk.Duplicated(x, np.ones(8)), tk.Duplicated(b, np.zeros(8)))
            if k < 2:
                tk.autodiff(mode, f, *args)
                continue
            with pytest.raises(tk.LaunchError, match="argument 'a' and argument 'c' share memory"):
                tk.autodiff(mode, f, *args)


def test_torch_tensor_given_new_data_between_launches(check):
    torch = pytest.importorskip("torch")
    a, b, c = (torch.tensor(x) for x in arrays(8))
    check_reverse_torch = lambda: check(a.numpy(), b.numpy(), c.numpy(), 1.25, 1e-6)  # noqa: E731
    check_reverse_torch()
    seed = torch.ones(8, dtype=torch.float64)
    db = torch.zeros(8, dtype=torch.float64)
    run(tk.Reverse, a, seed.clone(), b, db, c, torch.zeros(8, dtype=torch.float64), 1.0)
    np.testing.assert_allclose(db.numpy(), 2 * b.numpy())
    for k, t in enumerate((a, b, c, seed, db)):     # the same tensors, another shape and memory
        t.data = torch.tensor(np.random.default_rng(5 + k).standard_normal(12))
    db.zero_()
    dc = torch.zeros(12, dtype=torch.float64)
    run(tk.Reverse, a, seed.clone(), b, db, c, dc, 1.0)
    np.testing.assert_allclose(db.numpy(), 2 * b.numpy() * seed.numpy())
    np.testing.assert_allclose(dc.numpy(), seed.numpy())
    with pytest.raises(ValueError, match="shape"):           # a stale shadow of the old shape
        run(tk.Reverse, a, seed.clone(), b, torch.zeros(8, dtype=torch.float64), c, dc, 1.0)


def test_a_global_the_kernel_folds_in_changes_which_array_is_written():
    global MODE
    x, vx = np.array([1.0, -2.0, 3.0]), np.array([0.5, 1.0, -1.0])
    f = lambda y_, z_, x_: switch(CPU)(y_, z_, x_, ndrange=3)   # noqa: E731
    try:
        for mode in (0, 1, 0):
            MODE = mode
            y, z, dy, dz = np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3)
            tk.autodiff(tk.Forward, f, tk.Duplicated(y, dy), tk.Duplicated(z, dz), tk.Duplicated(x, vx))
            np.testing.assert_allclose(dy, 2 * x * vx if mode == 0 else 0.0)
            np.testing.assert_allclose(dz, 0.0 if mode == 0 else 3 * vx)
            gy, gz, gx = np.ones(3), np.ones(3), np.zeros(3)
            tk.autodiff(tk.Reverse, f, tk.Duplicated(y, gy), tk.Duplicated(z, gz), tk.Duplicated(x, gx))
            np.testing.assert_allclose(gx, 2 * x if mode == 0 else 3.0)
    finally:
        MODE = 0


def test_a_global_change_reaches_a_temporary_written_only_in_one_mode():
    """z is no tk.Duplicated: forward mode gives it a tangent only where the kernel writes it
    (MODE 1), which the access sets of the launch say; stale ones lose w's tangent."""
    global MODE
    x, vx = np.array([1.0, -2.0, 3.0]), np.array([0.5, 1.0, -1.0])

    def fn(y_, w_, x_):
        switch(CPU)(y_, z, x_, ndrange=3)
        double(CPU)(w_, z, ndrange=3)
    try:
        for mode in (0, 1, 0, 1):
            MODE = mode
            z = np.zeros(3)
            y, w, dy, dw = np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3)
            tk.autodiff(tk.Forward, fn, tk.Duplicated(y, dy), tk.Duplicated(w, dw), tk.Duplicated(x, vx))
            np.testing.assert_allclose(dw, 0.0 if mode == 0 else 6 * vx)
            gy, gw, gx = np.ones(3), np.ones(3), np.zeros(3)
            z = np.zeros(3)
            tk.autodiff(tk.Reverse, fn, tk.Duplicated(y, gy), tk.Duplicated(w, gw), tk.Duplicated(x, gx))
            np.testing.assert_allclose(gx, 2 * x if mode == 0 else 6.0)
    finally:
        MODE = 0


@pytest.mark.parametrize("devname", backend_params("CL"))
def test_backend_mismatch_refused_on_a_known_signature(devname):
    """A shadow on another device, and a device array passed to a CPU launch, after the same
    call site ran with host arrays: the errors that name the argument still come."""
    dv = tk.backend(devname)
    a, b, c = arrays(8)
    for mode in (tk.Forward, tk.Reverse):
        run(mode, a, np.ones(8), b, np.zeros(8), c, np.zeros(8), 1.0, ds=0.0)
        with pytest.raises(ValueError, match="the shadow lives in"):
            run(mode, a, np.ones(8), b, tk.asarray(np.zeros(8), backend=dv), c, np.zeros(8), 1.0, ds=0.0)
        with pytest.raises(tk.LaunchError, match="argument 'c'"):
            tk.autodiff(mode, lambda a_, b_: triad(CPU)(a_, b_, tk.asarray(c, backend=dv), 1.0, ndrange=8),
                        tk.Duplicated(a, np.ones(8)), tk.Duplicated(b, np.zeros(8)))
