"""Kernels the JAX and PyTorch interop tests share (tests/test_jax_kernel.py, tests/test_torch_op.py)."""
import math

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
