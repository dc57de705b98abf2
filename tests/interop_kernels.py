"""Kernels the JAX and PyTorch interop tests share (tests/test_jax_kernel.py, tests/test_torch_op.py)."""
import math

import numpy as np

import tinykernels as tk


@tk.kernel
def fma_update(y, x: tk.Const, a):
    i = tk.index()
    y[i] = y[i] * x[i] + a * x[i]


@tk.kernel
def stencil2d(out, img: tk.Const, w, scale: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    left = img[i, j - 1] if j > 0 else 0.0
    out[i, j] = scale * math.sin(img[i, j]) * left + w * out[i, j]


@tk.kernel
def two_outputs(s, d, a: tk.Const, b: tk.Const, n):
    i = tk.index()
    s[i] = a[i] + b[i] * n
    d[i] = a[i] * b[i] - s[i] * 0.5


@tk.kernel
def gather(y, x: tk.Const, idx: tk.Const):
    i = tk.index()
    y[i] = x[idx[i]] * x[idx[i]]


@tk.kernel
def interior(out, u: tk.Const, a):
    """A nonlinear 2-D stencil at absolute coordinates, for offset and stepped ndranges
    (``ndrange=(range(1, n - 1, 2), range(1, m - 1))``)."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = u[i, j] * u[i, j + 1] + a * (u[i - 1, j] - u[i + 1, j] + u[i, j - 1])


def interior_numpy(out0, u, a, rows: range, cols: range):
    """NumPy's ``interior`` over the index space ``rows`` x ``cols`` (ranges with positive steps)."""
    out = out0.copy()
    r, c = np.ix_(np.arange(rows.start, rows.stop, rows.step), np.arange(cols.start, cols.stop, cols.step))
    out[r, c] = u[r, c] * u[r, c + 1] + a * (u[r - 1, c] - u[r + 1, c] + u[r, c - 1])
    return out
