"""Forward mode's tangent kernel: the zero guard of its products (branch free since fwd16)
gives what the nested select gave, bit for bit; a tk.Const array's tangent is read only and
checked for aliasing like the array; tk.autodiff lowers a kernel once, not per launch."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, dev, host
from tinykernels.autodiff import derived
from tinykernels.runtime.base import KernelInstance

CPU = tk.CPU()


@tk.kernel
def scaled(y, x, c: tk.Const):
    i = tk.index()
    y[i] = x[i] * c[i]


@tk.kernel
def scaled_twice(y, x, c: tk.Const):
    i = tk.index()
    y[i] = (x[i] * 2.5) * c[i]


@tk.kernel
def stencil(T2, T: tk.Const, dt):
    i = tk.index() + 1
    T2[i] = T[i] + dt * (T[i - 1] + T[i + 1] - 2.0 * T[i])


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL', 'WEBGPU'), scope="module")
def be(request):
    return tk.backend(request.param)


def jvp_scaled(be, kernel, x, dx, c):
    y, dy = dev(np.zeros_like(x), be), dev(np.zeros_like(x), be)
    tk.autodiff(tk.Forward, lambda y_, x_, c_: kernel(be)(y_, x_, c_, ndrange=len(x)),
                tk.Duplicated(y, dy), tk.Duplicated(dev(x, be), dev(dx, be)), dev(c, be))
    return host(dy)


def test_a_guarded_product_is_plus_zero_where_a_factor_is_zero(be):
    # tangent, partial: a zero tangent times an infinite partial and an infinite tangent times
    # a zero partial are 0, not NaN; a signed zero factor gives +0 as the guard's select did
    # (an unguarded -0.0 * 3.0 is -0.0)
    x = np.array([1.0, 1.0, 1.0, 1.0, 2.0, np.nan])
    dx = np.array([-0.0, 0.0, np.inf, 1.0, -2.0, 1.0])
    c = np.array([3.0, np.inf, 0.0, -0.0, 4.0, 2.0])
    dy = jvp_scaled(be, scaled, x, dx, c)
    np.testing.assert_array_equal(dy, [0.0, 0.0, 0.0, 0.0, -8.0, 2.0])
    assert not np.signbit(dy[:4]).any()
    # a constant partial (2.5): the tangent -0.0 and the tangent inf times c = 0
    dy = jvp_scaled(be, scaled_twice, x, dx, c)
    np.testing.assert_array_equal(dy, [0.0, 0.0, 0.0, 0.0, -20.0, 5.0])
    assert not np.signbit(dy[:4]).any()


def test_the_tangent_of_a_const_array_is_refused_when_it_aliases_an_output():
    n = 32
    T, dT = np.random.default_rng(3).random(n), np.ones(n)
    T2, dT2 = np.zeros(n), np.zeros(n)
    tan = derived(stencil, "tangent", ("T2", "T", "dt"))(CPU)
    assert ("_d_T", "const") in tan.kernel.params
    tan(T2, dT2, T, dT, 0.1, 0.0, ndrange=n - 2)
    np.testing.assert_array_equal(dT2[1:-1], dT[1:-1])      # d/dT of a constant field: 1
    with pytest.raises(tk.LaunchError, match="_d_T"):
        tan(T2, dT2, T, dT2, 0.1, 0.0, ndrange=n - 2)


def test_forward_mode_lowers_the_kernel_once_per_specialization(monkeypatch):
    n = 64
    rng = np.random.default_rng(4)
    T, dT = rng.random(n), rng.random(n)
    calls = []
    ir = KernelInstance._ir

    def counting(self, *a, **kw):
        calls.append(self.kernel.name)
        return ir(self, *a, **kw)
    monkeypatch.setattr(KernelInstance, "_ir", counting)
    outs = []
    for _ in range(3):
        T2, dT2 = np.zeros(n), np.zeros(n)
        tk.autodiff(tk.Forward, lambda y, x, t: stencil(CPU)(y, x, t, ndrange=n - 2),
                    tk.Duplicated(T2, dT2), tk.Duplicated(T, dT), tk.Duplicated(0.1, 0.5))
        outs.append(dT2)
    assert calls.count("stencil") <= 1
    ref = dT + 0.1 * (np.roll(dT, 1) + np.roll(dT, -1) - 2 * dT) + 0.5 * (np.roll(T, 1) + np.roll(T, -1) - 2 * T)
    for d in outs:
        np.testing.assert_allclose(d[1:-1], ref[1:-1], rtol=1e-13)
