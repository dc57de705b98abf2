"""Hand-written classics for the autodiff cross-check (tests/test_autodiff_crosscheck.py):
each ``CASES`` entry is ``(name, kernel, args, ndrange, workgroupsize)``, the arguments in the
kernel's parameter order (float64 arrays and Python floats are differentiated)."""
from __future__ import annotations

import math

import numpy as np

import tinykernels as tk

RNG = np.random.default_rng(8518)


@tk.kernel
def halo1d(y, x: tk.Const, w):
    i = tk.index()
    left = x[i - 1] if i > 0 else 0.0
    right = x[i + 1] if i + 1 < x.shape[0] else 0.0
    y[i] = w * math.sin(x[i]) * (left + right)


@tk.kernel
def diffusion2d(out, t: tk.Const, lam):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = t[i, j] + lam * (t[i - 1, j] + t[i + 1, j] + t[i, j - 1] + t[i, j + 1] - 4.0 * t[i, j])


@tk.kernel
def scan_rows(y, x: tk.Const, inclusive: tk.constexpr):
    i = tk.index()
    v = math.exp(x[i])
    s = tk.group_scan(v * x[i], "add", inclusive=inclusive)
    y[i] = s * math.cos(x[i])


@tk.kernel
def atomic_sums(acc, hist, x: tk.Const, idx: tk.Const, w):
    i = tk.index()
    tk.atomic_add(acc, 0, w * x[i] * x[i])
    tk.atomic_add(hist, idx[i], math.sin(x[i]) * x[idx[i]])


@tk.kernel
def softmax_row(y, x: tk.Const):
    r = tk.index()
    n = x.shape[1]
    m = x[r, 0]
    for k in range(1, n):
        m = max(m, x[r, k])
    s = 0.0
    for k in range(n):
        s += math.exp(x[r, k] - m)
    for k in range(n):
        y[r, k] = math.exp(x[r, k] - m) / s


@tk.kernel
def layernorm_row(y, x: tk.Const, g: tk.Const, eps):
    r = tk.index()
    n = x.shape[1]
    mean = 0.0
    for k in range(n):
        mean += x[r, k]
    mean = mean / n
    var = 0.0
    for k in range(n):
        d = x[r, k] - mean
        var += d * d
    inv = 1.0 / math.sqrt(var / n + eps)
    for k in range(n):
        y[r, k] = (x[r, k] - mean) * inv * g[k]


@tk.kernel
def attention_row(o, q: tk.Const, kk: tk.Const, v: tk.Const):
    r = tk.index()
    t = kk.shape[0]
    d = q.shape[1]
    p = tk.private(q.dtype, 8)
    m = -1e300
    for s in range(t):
        a = 0.0
        for c in range(d):
            a += q[r, c] * kk[s, c]
        p[s] = a / math.sqrt(d)
        m = max(m, p[s])
    z = 0.0
    for s in range(t):
        p[s] = math.exp(p[s] - m)
        z += p[s]
    for c in range(d):
        acc = 0.0
        for s in range(t):
            acc += p[s] * v[s, c]
        o[r, c] = acc / z


@tk.kernel
def gather_scatter(y, z, x: tk.Const, idx: tk.Const):
    i = tk.index()
    y[i] = x[idx[i]] * x[idx[i]] + x[i]
    tk.atomic_add(z, idx[i], math.tanh(x[i]) * x[idx[i]])


@tk.kernel
def data_trip_for(y, x: tk.Const, cnt: tk.Const):
    i = tk.index()
    s = x[i]
    for k in range(cnt[i]):
        s = math.sin(s) * x[(i + k) % x.shape[0]] + 0.5 * s
    y[i] = s


@tk.kernel
def data_trip_while(y, x: tk.Const):
    i = tk.index()
    s = x[i]
    k = 0
    while s < 4.0 and k < 20:
        s = s * 1.5 + x[(i + k) % x.shape[0]] * 0.25 + 0.3
        k += 1
    y[i] = s * s


@tk.kernel
def kinks(y, x: tk.Const, x2: tk.Const):
    i = tk.index()
    a = max(x[i], x2[i]) + min(x[i] * 2.0, x2[i] * 2.0)
    b = abs(x[i] - x2[i]) + math.fabs(x[i])
    c = x[i] if x[i] > x2[i] else x2[i] * 3.0
    y[i] = a * 1.5 + b + c


@tk.kernel
def pow_at_zero(y, x: tk.Const, e: tk.Const):
    i = tk.index()
    y[i] = x[i] ** e[i] + math.pow(x[i], 2.0) + x[i] ** 0.0 * e[i]


@tk.kernel
def private_indexed(y, x: tk.Const, idx: tk.Const):
    i = tk.index()
    p = tk.private(x.dtype, 4)
    for k in range(4):
        p[k] = x[(i + k) % x.shape[0]] * (k + 1.0)
    p[idx[i] % 4] = p[idx[i] % 4] * p[(idx[i] + 1) % 4]
    s = 0.0
    for k in range(4):
        s += math.sin(p[k]) * p[(k + idx[i]) % 4]
    y[i] = s


@tk.kernel
def guarded(y, x: tk.Const):
    i = tk.index()
    v = x[i]
    if v > 0.0:
        y[i] = math.sqrt(v) + 1.0 / v
    else:
        y[i] = v * v


@tk.func
def f_inner(a, b):
    return math.exp(math.tanh(a)) * b


@tk.func
def f_mid(a, b):
    return f_inner(a * b, a + b) - f_inner(b, a)


@tk.func
def f_outer(a):
    return f_mid(math.sin(a), a * a) * a


@tk.kernel
def func_chain(y, x: tk.Const, w):
    i = tk.index()
    y[i] = f_outer(x[i] * w) + f_mid(x[i], w)


def _r(*shape):
    return RNG.uniform(-1.5, 1.5, shape)


_IDX = np.array([0, 3, 3, 1, 3, 0, 5, 5, 2, 3], np.int32)    # repeated indices
_TIES = np.array([0.5, -1.0, 0.0, 2.0, 0.0, -0.25, 1.0, 0.0])

CASES = [
    ("halo1d", halo1d, [np.zeros(10), _r(10), 0.7], 10, None),
    ("diffusion2d", diffusion2d, [np.zeros((8, 9)), _r(8, 9), 0.2], (range(1, 7), range(1, 8)), None),
    ("scan_inclusive", scan_rows, [np.zeros(8), _r(8), True], 8, 4),
    ("scan_exclusive", scan_rows, [np.zeros(8), _r(8), False], 8, 4),
    ("atomic_sums", atomic_sums, [_r(1), _r(6), _r(10), _IDX, 0.9], 10, None),
    ("softmax_row", softmax_row, [np.zeros((3, 7)), _r(3, 7) * 3], 3, None),
    ("layernorm_row", layernorm_row, [np.zeros((3, 6)), _r(3, 6), _r(6), 1e-5], 3, None),
    ("attention_row", attention_row, [np.zeros((3, 4)), _r(3, 4), _r(5, 4), _r(5, 4)], 3, None),
    ("gather_scatter", gather_scatter, [np.zeros(10), _r(6), _r(10), _IDX], 10, None),
    ("data_trip_for", data_trip_for, [np.zeros(10), _r(10), np.array([0, 1, 2, 3, 4, 5, 3, 1, 0, 2], np.int32)], 10, None),
    ("data_trip_while", data_trip_while, [np.zeros(10), np.abs(_r(10)) + 0.1], 10, None),
    ("pow_off_zero", pow_at_zero, [np.zeros(8), np.array([0.5, -1.5, 2.0, 1.5, -0.5, 0.25, 0.7, -2.0]),
                                   np.array([0.0, 2.0, 1.0, 0.5, 3.0, 1.5, 2.5, -1.0])], 8, None),
    ("private_indexed", private_indexed, [np.zeros(10), _r(10), _IDX], 10, None),
    ("guarded", guarded, [np.zeros(8), np.array([0.0, -1.0, 0.5, 2.0, -0.0, 1e-3, -3.0, 0.0])], 8, None),
    ("func_chain", func_chain, [np.zeros(9), _r(9), 0.8], 9, None),
]

#: kinks at ties: x == x2 and x == 0 at every item where the conventions (docs/autodiff.md:
#: max/min share a tie evenly, abs has 0 at 0) differ from JAX's
TIE_CASE = ("kinks_at_ties", kinks, [np.zeros(8), _TIES.copy(), _TIES.copy()], 8, None)
SMOOTH_KINKS = ("kinks_off_ties", kinks, [np.zeros(8), _TIES + 0.125, _TIES - 0.3], 8, None)
CASES.append(SMOOTH_KINKS)
#: pow at x == 0 (x ** 0 too): d/dx is 0 where y == 0, PyTorch's convention; JAX gives NaN there
POW_CASE = ("pow_at_zero", pow_at_zero, [np.zeros(8), np.array([0.0, 0.0, 0.0, 1.5, 2.0, 0.0, 0.7, 0.0]),
                                         np.array([0.0, 2.0, 1.0, 0.0, 3.0, 1.5, 2.5, 3.0])], 8, None)
