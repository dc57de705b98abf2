"""Grid-stride prefetch on the CPU (passes/gridstride.py, docs/cpu.md "Grid-stride loops"):
the reads of a lanes piece's hoisted loop with a run-time step, affine in its variable, are
prefetched a few iterations ahead when the iterations are far apart at run time. Which loops
and reads get it (the source; not flat kernels, item-outer pieces, debug or GPU code), and that
it never changes results (the same loops in every shape): several arrays, partial groups, steps
below a cache line, negative steps, steps that are not multiples of the group size, break /
continue / early return, reads and writes of one array, 2-D ndranges; compared with NumPy and
bit for bit with the interpreter."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.ir import nodes as N
from tinykernels.passes.gridstride import strided_reads, strided_step

CPU1, CPU2 = tk.CPU(threads=1), tk.CPU(threads=2)
INTERP = tk.Interpreter()
RNG = np.random.default_rng(17)


@tk.kernel
def histogram(hist, keys: tk.Const, w: tk.Const, NB: tk.constexpr):
    """bench_kernels' histogram, weighted: two arrays read in the grid-stride loop."""
    g = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    lh = tk.localmem(tk.int32, (NB,))
    for b in range(lid, NB, tk.groupsize()[0]):
        lh[b] = 0
    tk.synchronize()
    for i in range(g, keys.shape[0], tk.ndrange()[0]):
        tk.atomic_add(lh, keys[i], w[i])
    tk.synchronize()
    for b in range(lid, NB, tk.groupsize()[0]):
        tk.atomic_add(hist, b, lh[b])


@tk.kernel
def axpy_flat(out, a: tk.Const, b: tk.Const, c: tk.Const, s):
    """Flat grid-stride over three inputs (c at an offset, and at i // 2: not affine)."""
    for i in range(tk.index(), out.shape[0], tk.ndrange()[0]):
        out[i] = a[i] * s + b[i] - c[i // 2] * c[out.shape[0] - 1 - i]


@tk.kernel
def axpy_grouped(out, a: tk.Const, b: tk.Const, s):
    """The same loop in a grouped kernel (a lanes piece), with a step of ndrange + extra."""
    g = tk.index()
    extra = s.shape[0] - 1
    for i in range(g, out.shape[0], tk.ndrange()[0] + extra):
        out[i] = a[i] * s[0] + b[i]
    tk.synchronize()


@tk.kernel
def reverse_scale(x, y: tk.Const):
    """Negative step; reads and writes of x in the loop (in place)."""
    n = x.shape[0]
    for i in range(n - 1 - tk.index(), -1, -tk.ndrange()[0]):
        x[i] = x[i] * 2.0 + y[n - 1 - i]


@tk.func
def plus_one_until_negative(out, a, g):
    for i in range(g, a.shape[0], tk.ndrange()[0]):
        if a[i] < -0.9:
            break
        if a[i] > 0.5:
            continue
        out[i] = a[i] + 1.0


@tk.kernel
def reverse_scale_grouped(x, y: tk.Const):
    n = x.shape[0]
    for i in range(n - 1 - tk.index(), -1, -tk.ndrange()[0]):
        x[i] = x[i] * 2.0 + y[n - 1 - i]
    tk.synchronize()


@tk.kernel
def until_negative(out, a: tk.Const):
    """break / continue / early return in the grid-stride loop of a flat kernel."""
    g = tk.index()
    if g == 3:
        return
    plus_one_until_negative(out, a, g)


@tk.kernel
def until_negative_grouped(out, a: tk.Const):
    """The same with a barrier: item-outer pieces (their loop has break / continue)."""
    tk.synchronize()
    plus_one_until_negative(out, a, tk.index())


@tk.kernel
def rows_2d(out, a: tk.Const):
    """2-D ndrange: each item walks rows with the ndrange's first extent as the step."""
    r0, c = tk.index(tk.Global, tk.Cartesian)
    for r in range(r0, a.shape[0], tk.ndrange()[0]):
        out[r, c] = a[r, c] * 3.0 - a[r, a.shape[1] - 1 - c]


@tk.kernel
def rows_2d_grouped(out, a: tk.Const):
    r0, c = tk.index(tk.Global, tk.Cartesian)
    for r in range(r0, a.shape[0], tk.ndrange()[0]):
        out[r, c] = a[r, c] * 3.0 - a[r, a.shape[1] - 1 - c]
    tk.synchronize()


@tk.kernel
def nested_grouped(out, a: tk.Const):
    """A strided loop inside a hoisted per-item loop, its start using that loop's variable
    (no prefetch: that variable's C value exists only inside the item loops)."""
    g = tk.index()
    for rep in range(tk.index(tk.Local, tk.Linear) % 3, 3, 3):
        for i in range(g + rep, a.shape[0], tk.ndrange()[0]):
            out[rep, i] = a[i] * tk.float32(rep + 1)
    tk.synchronize()


def _run(kernel, backend, arrays, *scalars, **launch):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    kernel(backend)(*args, *scalars, **launch)
    return args


def _same(kernel, arrays, *scalars, **launch):
    """CPU (one and two threads) against the interpreter, bit for bit; the CPU's arrays."""
    want = _run(kernel, INTERP, arrays, *scalars, **launch)
    for be in (CPU1, CPU2):
        got = _run(kernel, be, arrays, *scalars, **launch)
        for w, g in zip(want, got):
            if isinstance(w, np.ndarray):
                np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
    return got


def _fetches(kernel, *args, **launch) -> int:
    src = kernel.source("CPU", *args, **launch)
    return src.count("tk_gs_fetch(tk_gs") + src.count("__builtin_prefetch((const void *)&")


@pytest.mark.parametrize("nd, wg", [(1024, 64), (64, 64), (128, 64), (16, 16), (4, 4), (4096, 256)])
def test_histogram(nd, wg):
    keys = RNG.integers(0, 256, 1 << 18, dtype=np.int32)
    w = RNG.integers(-3, 9, keys.size, dtype=np.int32)
    want = np.bincount(keys, weights=w, minlength=256).astype(np.int32)
    for be in (CPU1, CPU2):
        h = np.zeros(256, np.int32)
        histogram(be, wg)(h, keys, w, 256, ndrange=nd)
        np.testing.assert_array_equal(h, want)
    assert _fetches(histogram, np.zeros(256, np.int32), keys, w, 256, ndrange=nd, workgroupsize=wg) == 2


def test_histogram_partial_group():
    """A partial last group (1000 = 15 x 64 + 40): its items 40..63 do not exist, so its local
    bins 40..63 are never merged (the kernel's semantics); the CPU agrees with the interpreter."""
    keys = RNG.integers(0, 256, 1 << 15, dtype=np.int32)
    w = np.ones(keys.size, np.int32)
    got = _same(histogram, [np.zeros(256, np.int32), keys, w], 256, ndrange=1000, workgroupsize=64)[0]
    assert got.sum() < keys.size and (got[:40] == np.bincount(keys, minlength=256)[:40]).all()


@pytest.mark.parametrize("nd", [7, 256, 1000, 4099])
def test_flat_several_arrays(nd):
    n = 50_000
    a, b, c = (RNG.standard_normal(n).astype(np.float32) for _ in range(3))
    out = np.zeros(n, np.float32)
    got = _same(axpy_flat, [out, a, b, c], np.float32(1.5), ndrange=nd)[0]
    np.testing.assert_array_equal(got, a * np.float32(1.5) + b - c[np.arange(n) // 2] * c[::-1])
    # flat kernels get no prefetch: their items run one after another, so the next items read
    # the lines the first one fetched (measured slower, docs/cpu.md "Grid-stride loops")
    assert _fetches(axpy_flat, out, a, b, c, np.float32(1.5), ndrange=nd) == 0


@pytest.mark.parametrize("nd, extra", [(512, 0), (500, 3), (64, 0), (8, 5)])
def test_grouped_step_not_multiple_of_group(nd, extra):
    n = 40_000
    a, b = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    s = np.full(extra + 1, 0.75, np.float32)
    out = np.zeros(n, np.float32)
    got = _same(axpy_grouped, [out, a, b, s], ndrange=nd, workgroupsize=64 if nd % 64 == 0 or nd > 64 else nd)[0]
    covered = np.zeros(n, bool)
    for g in range(nd):
        covered[g::nd + extra] = True
    np.testing.assert_array_equal(got[covered], (a * np.float32(0.75) + b)[covered])
    assert (got[~covered] == 0).all()
    assert _fetches(axpy_grouped, out, a, b, s, ndrange=nd, workgroupsize=64) == 2


@pytest.mark.parametrize("kernel", [reverse_scale, reverse_scale_grouped])
@pytest.mark.parametrize("nd", [1, 3, 300, 2048])
def test_negative_step_in_place(kernel, nd):
    n = 30_001
    x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    launch = dict(ndrange=nd) if kernel is reverse_scale else dict(ndrange=nd, workgroupsize=min(nd, 64))
    got = _same(kernel, [x, y], **launch)[0]
    np.testing.assert_array_equal(got, x * np.float32(2) + y[::-1])
    assert _fetches(kernel, x, y, **launch) == (0 if kernel is reverse_scale else 2)     # (flat: none)


@pytest.mark.parametrize("kernel", [until_negative, until_negative_grouped])
@pytest.mark.parametrize("nd", [5, 640])
def test_break_continue_return(kernel, nd):
    n = 30_000
    a = RNG.uniform(-1, 1, n).astype(np.float32)
    a[:nd * 3] = np.clip(a[:nd * 3], -0.8, 1)      # the first iterations do not break
    out = np.zeros(n, np.float32)
    launch = dict(ndrange=nd) if kernel is until_negative else dict(ndrange=nd, workgroupsize=5 if nd == 5 else 64)
    got = _same(kernel, [out, a], **launch)[0]
    want = np.zeros(n, np.float32)
    for g in range(nd):
        if g == 3 and kernel is until_negative:
            continue
        for i in range(g, n, nd):
            if a[i] < -0.9:
                break
            if a[i] <= 0.5:
                want[i] = a[i] + np.float32(1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel", [rows_2d, rows_2d_grouped])
@pytest.mark.parametrize("nd", [(4, 16), (33, 8), (64, 48)])
def test_2d_ndrange(kernel, nd):
    a = RNG.standard_normal((3000, 48)).astype(np.float32)
    out = np.zeros_like(a)
    launch = dict(ndrange=nd) if kernel is rows_2d else dict(ndrange=nd, workgroupsize=(1, nd[1]) if nd[1] < 48 else (2, 16))
    got = _same(kernel, [out, a], **launch)[0]
    cols = nd[1]
    np.testing.assert_array_equal(got[:, :cols], (a * np.float32(3) - a[:, ::-1])[:, :cols])
    assert _fetches(kernel, out, a, **launch) == (2 if kernel is rows_2d_grouped else 0)


def test_nested_in_hoisted_loop():
    a = RNG.standard_normal(20_000).astype(np.float32)
    out = np.zeros((3, a.size), np.float32)
    got = _same(nested_grouped, [out, a], ndrange=512, workgroupsize=64)[0]
    want = np.zeros_like(out)
    for g in range(512):
        rep = g % 64 % 3
        want[rep, g + rep::512] = a[g + rep::512] * np.float32(rep + 1)
    np.testing.assert_array_equal(got, want)


def test_every_step_prefetching():
    """``TK_CPU_GRIDSTRIDE_BYTES=1`` (read once per library): every strided read prefetches,
    steps below a cache line and contiguous sweeps included; results unchanged. In a fresh
    process, since this one's kernels have read the default."""
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import test_cpu_gridstride as t\n"
        "t.test_flat_several_arrays(7); t.test_negative_step_in_place(t.reverse_scale_grouped, 300)\n"
        "t.test_grouped_step_not_multiple_of_group(8, 5); t.test_histogram(64, 64)\n"
        "t.test_2d_ndrange(t.rows_2d_grouped, (4, 16)); t.test_nested_in_hoisted_loop()\n"
        "print('ok')\n") % os.path.dirname(__file__)
    env = dict(os.environ, TK_CPU_GRIDSTRIDE_BYTES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_not_in_debug_kernels_nor_gpu_code():
    keys = np.zeros(4096, np.int32)
    h = np.zeros(256, np.int32)
    assert "tk_gs" not in histogram.source(tk.CPU(debug=True), h, keys, keys, 256, ndrange=1024, workgroupsize=64)
    # GPU renderers: CUDA's source needs no device; source('CL') opens the OpenCL device
    assert "tk_gs" not in histogram.source("CUDA", h, keys, keys, 256, ndrange=1024, workgroupsize=64)
    if "CL" in tk.backends_available():
        assert "tk_gs" not in histogram.source("CL", h, keys, keys, 256, ndrange=1024, workgroupsize=64)


def test_which_loops_and_reads():
    """The pass's rules on hand-made IR: a run-time step or a large constant one; affine reads
    of global arrays whose other locals the loop does not assign, deduplicated; not
    ``a[i * i]``, ``a[idx[i]]`` (but ``idx[i]`` itself), local memory or ``a[i + m]`` with ``m``
    assigned in the loop."""
    from tinykernels import dtypes
    c = lambda v: N.Const(None, None, v)
    var = lambda name: N.Var(None, None, name)
    op = lambda o, x, y: N.BinOp(None, None, o, x, y)
    a, idx = N.ArrayInfo("a", dtypes.float32, 1), N.ArrayInfo("idx", dtypes.int64, 1)
    lm = N.ArrayInfo("lm", dtypes.float32, 1, space="local")
    i, n, m = var("i"), var("n"), var("m")
    load = lambda arr, e: N.Load(None, None, arr, [e])
    reads = [load(a, i), load(a, op("*", i, i)), load(a, load(idx, i)), load(lm, i),
             load(a, op("+", i, m)), load(a, op("+", op("*", c(2), i), n)), load(a, i)]
    body = [N.Assign(None, "m", c(1))] + [N.Assign(None, f"t{k}", r) for k, r in enumerate(reads)]
    loop = lambda step: N.For(None, "i", c(0), n, step, body)
    assert not strided_step(loop(c(1))) and not strided_step(loop(c(-4096)))
    assert strided_step(loop(n)) and strided_step(loop(m))
    # a step held by a local assigned once from a constant (n = tk.groupsize()[0]) is a constant
    assert not strided_step(loop(n), {"n": 64}) and strided_step(loop(n), {"m": 64})
    assert strided_reads(loop(c(4))) == []
    got = strided_reads(loop(n))
    assert [(e.array.name, e.index[0]) for e in got] == [("a", i), ("idx", i), ("a", reads[5].index[0])]
    assert strided_reads(loop(n), fixed=lambda name: name != "n") == got[:2]
