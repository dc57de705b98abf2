"""The forward-mode (tangent) kernel grows linearly with the nesting of the kernel's
expressions: every tangent and partial used more than once is computed once into a local.
Inlined at each use (tangent and partial each twice in ``t * p`` guarded against ``0 * inf``)
they doubled per level: fuzz seed 46500000's tangent C was 117 KB (passes/autodiff.py,
``_Tangent.bind``). The tangents stay those of float64 finite differences."""
import math

import numpy as np

import tinykernels as tk
from tinykernels.autodiff import derived


@tk.kernel
def nest4(y, x):
    i = tk.index()
    y[i] = math.tanh(math.sin(math.tanh(math.sin(x[i] * x[i]) * x[i]) * x[i]) * x[i])


@tk.kernel
def nest8(y, x):
    i = tk.index()
    y[i] = math.tanh(math.sin(math.tanh(math.sin(math.tanh(math.sin(math.tanh(math.sin(
        x[i] * x[i]) * x[i]) * x[i]) * x[i]) * x[i]) * x[i]) * x[i]) * x[i])


@tk.kernel
def guarded(y, x, n):
    i = tk.index()
    # the branch's tangent needs locals of its own: they must run only where the branch is chosen
    y[i] = math.tanh(math.sin(x[i + 1] * x[i + 1]) * x[i + 1]) if i + 1 < n else x[i] * 2.0


def _tangent_source(kernel, n=8):
    y, x = np.zeros(n), np.ones(n)
    return derived(kernel, "tangent", ("y", "x")).source("CPU", y, y, x, x, ndrange=n)


def _primal_source(kernel, n=8):
    return kernel.source("CPU", np.zeros(n), np.ones(n), ndrange=n)


def test_tangent_source_grows_linearly_with_nesting():
    grow4 = len(_tangent_source(nest4)) - len(_primal_source(nest4))
    grow8 = len(_tangent_source(nest8)) - len(_primal_source(nest8))
    # doubling per level made grow8 about 16x grow4; one local per tangent and partial keeps
    # it near 2x (the partials still repeat their primal operands: about 3x)
    assert 0 < grow8 < 5 * grow4, (grow4, grow8)


def _fd(kernel, x, v, h=1e-6):
    def f(t):
        y = np.zeros_like(x)
        kernel(tk.CPU())(y, x + t * v, ndrange=len(x))
        return y
    return (f(h) - f(-h)) / (2 * h)


def _jvp(kernel, x, v):
    y, dy = np.zeros_like(x), np.zeros_like(x)
    k = kernel(tk.CPU())
    tk.autodiff(tk.Forward, lambda a, b: k(a, b, ndrange=len(x)), tk.Duplicated(y, dy),
                tk.Duplicated(x.copy(), v.copy()))
    return dy


def test_nested_tangents_match_finite_differences():
    rng = np.random.default_rng(3)
    x, v = rng.uniform(-1.2, 1.2, 64), rng.standard_normal(64)
    for k in (nest4, nest8):
        np.testing.assert_allclose(_jvp(k, x, v), _fd(k, x, v), rtol=1e-6, atol=1e-8)


def test_a_select_branch_tangent_runs_only_where_chosen():
    rng = np.random.default_rng(4)
    n = 32
    x, v = rng.uniform(-1.2, 1.2, n + 1), rng.standard_normal(n + 1)
    src = derived(guarded, "tangent", ("y", "x")).source("CPU", np.zeros(n), np.zeros(n), x, v, n, ndrange=n)
    assert "if (" in src         # the chosen branch's tangent locals sit under the condition
    y, dy = np.zeros(n), np.zeros(n)
    k = guarded(tk.CPU())
    tk.autodiff(tk.Forward, lambda a, b, m: k(a, b, m, ndrange=n), tk.Duplicated(y, dy),
                tk.Duplicated(x.copy(), v.copy()), n)
    a, t = x[1:n], v[1:n]        # items 0..30 take the first branch, item 31 the second
    want = (1 - np.tanh(np.sin(a * a) * a) ** 2) * (np.cos(a * a) * 2 * a * a + np.sin(a * a)) * t
    np.testing.assert_allclose(dy[:n - 1], want, rtol=1e-12)
    assert dy[n - 1] == 2.0 * v[n - 1]
