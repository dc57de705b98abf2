"""Barrier splitting on the CPU: barriers in nested uniform loops and ifs, locals and private
arrays live across barriers, masking of partial groups, early returns, collectives."""
import numpy as np
import pytest

import tinykernels as tk

CPU = tk.CPU()


@tk.kernel
def nested(out, x: tk.Const, reps):
    lid = tk.index(tk.Local, tk.Linear)
    wg = tk.groupsize()[0]
    buf = tk.localmem(tk.float64, (32,))
    acc = 0.0
    v = x[tk.index()]
    for r in range(reps):                       # uniform for
        if r % 2 == 0:                          # uniform if inside it
            buf[lid] = v + r
            tk.synchronize()
            acc += buf[(lid + 1) % wg]
            tk.synchronize()
        else:
            k = 0
            while k < 2:                        # uniform while, two levels down
                buf[lid] = acc * 0.5 + k
                tk.synchronize()
                acc += buf[wg - 1 - lid]
                tk.synchronize()
                k += 1
    out[tk.index()] = acc


def _nested_ref(x, wg, reps):
    out = np.empty_like(x)
    for g in range(x.size // wg):
        v = x[g * wg:(g + 1) * wg].copy()
        acc = np.zeros(wg)
        for r in range(reps):
            if r % 2 == 0:
                buf = v + r
                acc = acc + buf[(np.arange(wg) + 1) % wg]
            else:
                for k in range(2):
                    buf = acc * 0.5 + k
                    acc = acc + buf[wg - 1 - np.arange(wg)]
        out[g * wg:(g + 1) * wg] = acc
    return out


@pytest.mark.parametrize("reps", [0, 1, 4])
def test_barriers_in_nested_uniform_loops_and_ifs(reps):
    wg = 32
    x = np.random.default_rng(1).random(wg * 6)
    out = np.zeros_like(x)
    nested(CPU, wg)(out, x, reps, ndrange=x.size)
    np.testing.assert_allclose(out, _nested_ref(x, wg, reps), rtol=1e-12)


@tk.kernel
def private_across(y, x: tk.Const):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    p = tk.private(tk.float32, (4,))
    tile = tk.localmem(tk.float32, (16,))
    for k in range(4):
        p[k] = x[i] * (k + 1)
    s = p[0] + p[3]                      # a local defined before the barrier ...
    tile[lid] = x[i]
    tk.synchronize()
    for k in range(4):
        p[k] += tile[15 - lid]           # ... and the private array updated after it
    tk.synchronize()
    y[i] = s + p[0] + p[1] + p[2] + p[3]


def test_locals_and_private_arrays_survive_barriers():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    private_across(CPU, 16)(y, x, ndrange=64)
    rev = x.reshape(4, 16)[:, ::-1].ravel()
    ref = (x + 4 * x) + (x * 10 + 4 * rev)
    np.testing.assert_allclose(y, ref)


@tk.kernel
def masked(counter, out, x: tk.Const):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    t = tk.localmem(tk.int64, (16,))
    t[lid] = 1000 + i
    tk.synchronize()
    tk.atomic_add(counter, 0, 1)
    out[i] = t[lid] + x[i]


@pytest.mark.parametrize("n", [1, 15, 16, 17, 50])
def test_items_past_the_ndrange_run_nothing(n):
    counter = np.zeros(1, np.int64)
    out = np.full(64, -7, np.int64)
    x = np.arange(64, dtype=np.int64)
    masked(CPU, 16)(counter, out, x, ndrange=n)
    assert counter[0] == n
    np.testing.assert_array_equal(out[:n], 1000 + 2 * np.arange(n))
    assert (out[n:] == -7).all()


@tk.kernel
def returns_then_barrier(out, n):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    t = tk.localmem(tk.int32, (8,))
    t[lid] = -1
    tk.synchronize()
    if i % 3 == 0 or i >= n:
        return                            # this item is done; the others still synchronize
    t[lid] = i
    tk.synchronize()
    out[i] = t[(lid + 1) % 8]


def test_early_return_before_a_barrier():
    out = np.full(32, 99, np.int32)
    returns_then_barrier(CPU, 8)(out, 30, ndrange=32)
    ref = np.full(32, 99, np.int32)
    for i in range(30):
        if i % 3:
            nb = (i // 8) * 8 + (i % 8 + 1) % 8
            ref[i] = nb if (nb % 3 and nb < 30) else -1
    np.testing.assert_array_equal(out, ref)


@tk.kernel
def rotate(out, steps):
    lid = tk.index(tk.Local, tk.Linear)
    s = tk.localmem(tk.int64, (8,))
    s[lid] = tk.index()
    k = 0
    while True:
        tk.synchronize()
        if k >= steps:                   # a uniform break out of a loop with barriers
            break
        v = s[(lid + 1) % 8]
        tk.synchronize()
        s[lid] = v
        k += 1
    out[tk.index()] = s[lid]


def test_uniform_break_from_a_barrier_loop():
    out = np.zeros(16, np.int64)
    rotate(CPU, 8)(out, 3, ndrange=16)
    ref = np.concatenate([(np.arange(8) + 3) % 8, 8 + (np.arange(8) + 3) % 8])
    np.testing.assert_array_equal(out, ref)


@tk.kernel
def scans(ex, inc, mn, x: tk.Const):
    v = x[tk.index()]
    ex[tk.index()] = tk.group_scan(v, "add", inclusive=False)
    inc[tk.index()] = tk.group_scan(v, "max")
    mn[tk.index()] = tk.group_reduce(v, "min")


def test_exclusive_scan_and_partial_groups():
    x = np.random.default_rng(0).integers(-50, 50, 96).astype(np.int64)
    ex, inc, mn = (np.zeros(96, np.int64) for _ in range(3))
    scans(CPU, 32)(ex, inc, mn, x, ndrange=80)          # the last group is partial
    for g in range(3):
        lo, hi = 32 * g, min(32 * g + 32, 80)
        seg = x[lo:hi]
        np.testing.assert_array_equal(ex[lo:hi], np.cumsum(seg) - seg)
        np.testing.assert_array_equal(inc[lo:hi], np.maximum.accumulate(seg))
        assert (mn[lo:hi] == seg.min()).all()
    assert (ex[80:] == 0).all()


@tk.kernel
def transpose_tiles(out, a: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(a.dtype, (T, T + 1))
    tile[li, lj] = a[i, j]
    tk.synchronize()
    out[gj * T + li, gi * T + lj] = tile[lj, li]


def test_2d_groups_with_local_tiles():
    a = np.arange(48 * 32, dtype=np.float32).reshape(48, 32)
    out = np.zeros((32, 48), np.float32)
    transpose_tiles(CPU, (16, 16))(out, a, 16, ndrange=a.shape)
    np.testing.assert_array_equal(out, a.T)


def test_divergent_break_in_a_barrier_loop_is_rejected():
    def body(A):
        lid = tk.index(tk.Local, tk.Linear)
        for k in range(4):
            if lid == k:
                break
            tk.synchronize()
        A[lid] = 1
    with pytest.raises(tk.CompileError) as e:
        tk.kernel(body)(CPU, 8)(np.zeros(8), ndrange=8)
    assert "break" in str(e.value) and "synchronize" in str(e.value)


def test_uniformity_follows_locals():
    def ok(A, n):
        m = n * 2                # uniform: derived from an argument
        g = tk.index(tk.Group, tk.Linear)
        if m + g > 3:
            tk.synchronize()
        A[tk.index()] = m
    A = np.zeros(8)
    tk.kernel(ok)(CPU, 4)(A, 3, ndrange=8)
    assert (A == 6).all()

    def bad(A, n):
        m = n + tk.index(tk.Local, tk.Linear)   # not uniform
        if m > 3:
            tk.synchronize()
    with pytest.raises(tk.CompileError) as e:
        tk.kernel(bad)(CPU, 4)(np.zeros(8), 3, ndrange=8)
    assert "non-uniform" in str(e.value)
