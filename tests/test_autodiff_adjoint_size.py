"""The adjoint (reverse mode) grows linearly with the length of an expression chain: every
primal value a partial derivative needs is a named local of the replay (passes/primal_values.py),
every zero-adjoint guard one local per guarded operation, and a min/max writes each operand's
chain rule once. Rendered inline, each partial repeated the primal operands below it (a
Horner polynomial of 80 steps had a 164 KB adjoint, 43 KB of primal), nested guards wrapped
every term once per level, and a nested min/max wrote its operands' chain rules twice. The
gradients stay those of float64 finite differences, in both modes."""
import math
import re

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.autodiff import derived


@tk.kernel
def poly8(y, x):
    i = tk.index()
    v = x[i]
    y[i] = ((((((((v * v + 0.1) * v + 0.2) * v + 0.3) * v + 0.4) * v + 0.5) * v + 0.6) * v + 0.7) * v + 0.8)


@tk.kernel
def poly32(y, x):
    i = tk.index()
    v = x[i]
    y[i] = ((((((((((((((((((((((((((((((((v * v + 0.1) * v + 0.2) * v + 0.3) * v + 0.4) * v + 0.5) * v + 0.6)
                    * v + 0.7) * v + 0.8) * v + 0.9) * v + 1.0) * v + 1.1) * v + 1.2) * v + 1.3) * v + 1.4) * v
                    + 1.5) * v + 1.6) * v + 1.7) * v + 1.8) * v + 1.9) * v + 2.0) * v + 2.1) * v + 2.2) * v + 2.3)
                    * v + 2.4) * v + 2.5) * v + 2.6) * v + 2.7) * v + 2.8) * v + 2.9) * v + 3.0) * v + 3.1) * v
                    + 3.2)


@tk.kernel
def calls8(y, x):
    i = tk.index()
    y[i] = math.tanh(math.sin(math.atan(math.tanh(math.sin(math.atan(math.tanh(math.sin(x[i]))))))))


@tk.kernel
def calls32(y, x):
    i = tk.index()
    y[i] = math.tanh(math.sin(math.atan(math.tanh(math.sin(math.atan(math.tanh(math.sin(math.atan(
        math.tanh(math.sin(math.atan(math.tanh(math.sin(math.atan(math.tanh(math.sin(math.atan(math.tanh(
            math.sin(math.atan(math.tanh(math.sin(math.atan(math.tanh(math.sin(math.atan(math.tanh(math.sin(
                math.atan(math.tanh(math.sin(x[i]))))))))))))))))))))))))))))))))


@tk.kernel
def minmax8(y, x):
    i = tk.index()
    w = x[i]
    y[i] = max(min(max(min(max(min(max(min(w, w * 0.50), w * 0.51), w * 0.52), w * 0.53), w * 0.54), w * 0.55),
               w * 0.56), w * 0.57)


@tk.kernel
def minmax32(y, x):
    i = tk.index()
    w = x[i]
    y[i] = max(min(max(min(max(min(max(min(max(min(max(min(max(min(max(min(max(min(max(min(max(min(max(min(
        max(min(max(min(max(min(max(min(w, w * 0.50), w * 0.51), w * 0.52), w * 0.53), w * 0.54), w * 0.55),
        w * 0.56), w * 0.57), w * 0.58), w * 0.59), w * 0.60), w * 0.61), w * 0.62), w * 0.63), w * 0.64),
        w * 0.65), w * 0.66), w * 0.67), w * 0.68), w * 0.69), w * 0.70), w * 0.71), w * 0.72), w * 0.73),
        w * 0.74), w * 0.75), w * 0.76), w * 0.77), w * 0.78), w * 0.79), w * 0.80), w * 0.81)


PAIRS = [(poly8, poly32), (calls8, calls32), (minmax8, minmax32)]


def _size(src: str) -> int:
    return len(re.sub(r"\s+", "", src))      # not the indentation of nested ifs


def _adjoint_growth(kernel, n=8) -> int:
    z = np.zeros(n)
    adjoint = derived(kernel, "reverse", ("y", "x")).source(
        "CPU", z, z, z, z, np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64), ndrange=n)
    return _size(adjoint) - _size(kernel.source("CPU", z, z, ndrange=n))


def _tangent_growth(kernel, n=8) -> int:
    z = np.zeros(n)
    tangent = derived(kernel, "tangent", ("y", "x")).source("CPU", z, z, z, z, ndrange=n)
    return _size(tangent) - _size(kernel.source("CPU", z, z, ndrange=n))


@pytest.mark.parametrize("short, long", PAIRS, ids=[p[0].name for p in PAIRS])
def test_adjoint_source_grows_linearly_with_the_chain(short, long):
    # 4x the operations: 2.9-3.7x the code now (the fixed part of the adjoint weighs); before,
    # 10.8x (Horner), 4.5x (calls: each level's partial is large beside the operands it repeats)
    # and no result (min/max: exponential)
    g8, g32 = _adjoint_growth(short), _adjoint_growth(long)
    assert 0 < g32 < 4.2 * g8, (g8, g32)


@pytest.mark.parametrize("short, long", PAIRS, ids=[p[0].name for p in PAIRS])
def test_tangent_source_grows_linearly_with_the_chain(short, long):
    # 3.8-3.9x now; before 8.4x (Horner), 5.6x (calls)
    g8, g32 = _tangent_growth(short), _tangent_growth(long)
    assert 0 < g32 < 4.2 * g8, (g8, g32)


def _fd(kernel, x, v, h=1e-6):
    def f(t):
        y = np.zeros_like(x)
        kernel(tk.CPU())(y, x + t * v, ndrange=len(x))
        return y
    return (f(h) - f(-h)) / (2 * h)


@pytest.mark.parametrize("kernel", [k for p in PAIRS for k in p], ids=lambda k: k.name)
def test_chain_gradients_match_finite_differences(kernel):
    rng = np.random.default_rng(5)
    n = 64
    x = rng.uniform(0.2, 0.9, n) if kernel.name.startswith("poly") else rng.uniform(-1.5, 1.5, n)
    u, v = rng.standard_normal(n), rng.standard_normal(n)
    k = kernel(tk.CPU())
    fd = _fd(kernel, x, v)
    dx = np.zeros(n)
    tk.autodiff(tk.Reverse, lambda a, b: k(a, b, ndrange=n), tk.Duplicated(np.zeros(n), u.copy()),
                tk.Duplicated(x.copy(), dx))
    dy = np.zeros(n)
    tk.autodiff(tk.Forward, lambda a, b: k(a, b, ndrange=n), tk.Duplicated(np.zeros(n), dy),
                tk.Duplicated(x.copy(), v.copy()))
    # elementwise: the reverse gradient is u * f'(x), the tangent v * f'(x)
    np.testing.assert_allclose(dx * v, u * fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dy, fd, rtol=1e-6, atol=1e-8)


def test_nested_min_max_ties_split_the_adjoint_evenly():
    """At a tie each level halves the adjoint between its operands (PyTorch, JAX); the halves
    of max(min(max(x, x), x), x) add back up to d/dx x = 1, the tangents' means to the tangent."""
    n = 8
    x = np.linspace(-1, 1, n)
    k = tie_chain(tk.CPU())
    dx, u = np.zeros(n), np.ones(n)
    tk.autodiff(tk.Reverse, lambda a, b: k(a, b, ndrange=n), tk.Duplicated(np.zeros(n), u),
                tk.Duplicated(x.copy(), dx))
    # max(min(x, x), x): every level ties; the halves add back up to d/dx x = 1
    np.testing.assert_array_equal(dx, np.ones(n))
    dy = np.zeros(n)
    tk.autodiff(tk.Forward, lambda a, b: k(a, b, ndrange=n), tk.Duplicated(np.zeros(n), dy),
                tk.Duplicated(x.copy(), np.full(n, 2.0)))
    np.testing.assert_array_equal(dy, np.full(n, 2.0))


@tk.kernel
def tie_chain(y, x):
    i = tk.index()
    y[i] = max(min(max(x[i], x[i]), x[i]), x[i])
