"""Kernels of tests/test_spec_audit19_fw.py (SPEC section 11 read as a stranger would)."""
import math

import tinykernels as tk


@tk.kernel
def saxpy(y, x: tk.Const, a):
    i = tk.index()
    y[i] = a * x[i] + y[i]


@tk.kernel
def sum_diff(s, d, x: tk.Const, y: tk.Const):
    i = tk.index()
    s[i] = x[i] + y[i]
    d[i] = x[i] * y[i] - s[i]


@tk.kernel
def sin_scale2d(out, img: tk.Const, c, p: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    acc = 1.0
    for _ in range(p):
        acc = acc * img[i, j]
    out[i, j] = c * math.sin(acc) + out[i, j]


@tk.kernel
def scale_by(y, s, x: tk.Const):
    """A scalar parameter between two arrays: the arrays still go positionally, in order."""
    i = tk.index()
    y[i] = s * x[i]


@tk.kernel
def take(y, x: tk.Const, idx: tk.Const):
    i = tk.index()
    y[i] = x[idx[i]] * 2.0


@tk.kernel
def overwrite(y, x: tk.Const, a):
    """Overwrites the output where it runs: the initial value's gradient is 0 there, 1 elsewhere."""
    i = tk.index()
    y[i] = a * x[i] * x[i]
