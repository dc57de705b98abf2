"""Next-row prefetch on the CPU (passes/prefetch.py, docs/cpu.md "Next-row prefetch"): a row
kernel's group (flat: work item) prefetches the row the next one reads while it computes.
Which kernels get it (loads whose leading indices are the group id's function, whose last
index moves along a loop), and that it never changes results: partial groups, the last group
of a thread's chunk, rows too short to prefetch, the last row (its next row is outside the
array), strided and reversed views; always compared with the interpreter bit for bit and with
the prefetch switched off."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinykernels as tk

CPU2 = tk.CPU(threads=2)
INTERP = tk.Interpreter()


@pytest.fixture(autouse=True, scope="module")
def prefetch_small_arrays():
    """Prefetch rows of arrays of any size (default: 2 MiB and more), so that the small test
    arrays run the prefetching code. Read once per compiled kernel, at its first launch: the
    kernels of this module are first launched here."""
    old = os.environ.get("TK_CPU_PREFETCH_BYTES")
    os.environ["TK_CPU_PREFETCH_BYTES"] = "1"
    yield
    if old is None:
        del os.environ["TK_CPU_PREFETCH_BYTES"]
    else:
        os.environ["TK_CPU_PREFETCH_BYTES"] = old


@tk.kernel
def rms_rows_grouped(out, X: tk.Const, w: tk.Const, eps):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    D = X.shape[1]
    acc = 0.0
    for j in range(lid, D, n):
        x = X[row, j]
        acc += x * x
    tot = tk.group_reduce(acc, "add")
    scale = 1.0 / math.sqrt(tot / D + eps)
    for j in range(lid, D, n):
        out[row, j] = X[row, j] * scale * w[j]


@tk.kernel
def softmax_grouped(out, X: tk.Const):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    n = tk.groupsize()[0]
    D = X.shape[1]
    m = -math.inf
    for j in range(lid, D, n):
        m = max(m, X[row, j])
    m = tk.group_reduce(m, "max")
    s = 0.0
    for j in range(lid, D, n):
        e = math.exp(X[row, j] - m)
        out[row, j] = e
        s += e
    inv = 1.0 / tk.group_reduce(s, "add")
    for j in range(lid, D, n):
        out[row, j] *= inv


@tk.func
def lane_sum(X, r, sq):
    """Sum (``sq``: of squares) of row r in 8 exact partial sums (a strip-mined loop)."""
    part = tk.private(tk.float32, (8,))
    for t in range(8):
        part[t] = tk.float32(0)
    full = X.shape[1] - X.shape[1] % 8
    for k0 in range(0, full, 8):
        for t in range(8):
            v = X[r, k0 + t]
            part[t] += v * v if sq else v
    for k in range(full, X.shape[1]):
        v = X[r, k]
        part[k - full] += v * v if sq else v
    acc = tk.float32(0)
    for t in range(8):
        acc += part[t]
    return acc


@tk.kernel
def row_sums_flat(out, X: tk.Const, off):
    """One work item per row, two passes over it; the row index is computed (shifted,
    wrapped) from the item's."""
    i = tk.index()
    r = (i + off) % X.shape[0]
    out[i] = lane_sum(X, r, False) + lane_sum(X, r, True)


@tk.kernel
def one_pass_flat(out, X: tk.Const):
    """One pass over the row: nothing computes on it in cache, so nothing to prefetch."""
    i = tk.index()
    out[i] = lane_sum(X, i, False)


@tk.kernel
def one_pass_grouped(out, X: tk.Const):
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    acc = 0.0
    for j in range(lid, X.shape[1], tk.groupsize()[0]):
        acc += X[row, j]
    tot = tk.group_reduce(acc, "add")
    if lid == 0:
        out[row] = tot


@tk.kernel
def fixed_row(out, X: tk.Const):
    """Every group reads row 0 (twice): nothing to prefetch."""
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    acc = 0.0
    for j in range(lid, X.shape[1], tk.groupsize()[0]):
        acc += X[0, j]
    tot = tk.group_reduce(acc, "add")
    for j in range(lid, X.shape[1], tk.groupsize()[0]):
        out[row, j] = X[0, j] * tot


@tk.kernel
def column_of_row(out, X: tk.Const):
    """The last index does not move along a loop (one element per group): nothing to prefetch."""
    row = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    if lid == 0:
        out[row] = X[row, 3]


@tk.kernel
def moving_row(out, X: tk.Const):
    """The row index changes inside the loops: not a row of the item."""
    g = tk.index()
    r = g
    acc = 0.0
    for p in range(2):
        for j in range(X.shape[1]):
            for t in range(1):
                acc += X[r, j]
            r = (r + 1) % X.shape[0]
    out[g] = acc


def _src(kernel, *args, **kw) -> str:
    return kernel.source("CPU", *args, **kw)


def test_which_kernels_prefetch():
    X = np.ones((64, 1024), np.float32)
    o = np.zeros_like(X)
    w = np.ones(1024, np.float32)
    s = _src(rms_rows_grouped, o, X, w, 1e-5, ndrange=64 * 64, workgroupsize=64)
    assert "tk_pf_row(&tk_pf0" in s and "tk_pf_step(&tk_pf0)" in s and "tk_pf1" not in s
    # the cursor is pointed at row g + 1 of X
    assert "tk_grl + INT64_C(1)" in s.split("tk_pf_row(&tk_pf0")[1].split(";")[0]
    s = _src(row_sums_flat, np.zeros(64, np.float32), X, 5, ndrange=64)
    assert "tk_pf_step(&tk_pf0)" in s
    # the step sits in the strip-mined loop, not in the vectorized inner one
    body = s.split("tk_pf_step(&tk_pf0);")[1]
    assert "for (uint64_t" in body.split("tk_pf_step")[0]
    for k, args, kw in ((fixed_row, (o, X), dict(ndrange=64 * 64, workgroupsize=64)),
                        (column_of_row, (np.zeros(64, np.float32), X), dict(ndrange=64 * 64, workgroupsize=64)),
                        (moving_row, (np.zeros(64, np.float32), X), dict(ndrange=64))):
        assert "tk_pf_row" not in _src(k, *args, **kw), k.name
    # debug kernels keep their checked loads only
    assert "tk_pf_row" not in rms_rows_grouped.source(tk.CPU(debug=True), o, X, w, 1e-5, ndrange=64 * 64,
                                                      workgroupsize=64)


def _run(kernel, backend, wg, args, ndrange, out_idx=0):
    arrs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    k = kernel(backend, wg) if wg else kernel(backend)
    k(*arrs, ndrange=ndrange)
    tk.synchronize(backend)
    return arrs[out_idx]


# rows x cols: odd row counts (the two threads' chunks end on different rows), rows shorter
# than the 512-byte minimum, a group size that does not divide the row, one row
SHAPES = [(37, 1000), (16, 2048), (5, 3), (1, 777), (33, 128), (9, 100)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("wg", [64, 48])
def test_grouped_results_unchanged(shape, wg):
    R, D = shape
    rng = np.random.default_rng(R * D + wg)
    X = rng.standard_normal((R, D), dtype=np.float32)
    w = rng.standard_normal(D, dtype=np.float32)
    o = np.zeros_like(X)
    got = _run(rms_rows_grouped, CPU2, wg, (o, X, w, 1e-5), R * wg)
    np.testing.assert_array_equal(got, _run(rms_rows_grouped, INTERP, wg, (o, X, w, 1e-5), R * wg))
    # softmax: the interpreter's float32 exp is NumPy's, not the CPU's correctly rounded one
    # (the same difference without the prefetch); bit-identity with and without the prefetch
    # is test_on_and_off_bit_identical's
    got = _run(softmax_grouped, CPU2, wg, (o, X), R * wg)
    np.testing.assert_allclose(got, _run(softmax_grouped, INTERP, wg, (o, X), R * wg), rtol=1e-6, atol=0)


@pytest.mark.parametrize("view", ["plain", "reversed_rows", "reversed_cols", "strided"])
@pytest.mark.parametrize("off", [0, 3, -1])
def test_flat_results_unchanged(view, off):
    rng = np.random.default_rng(7)
    base = rng.standard_normal((80, 2 * 601), dtype=np.float32)
    X = {"plain": base[:, :601], "reversed_rows": base[::-1, :601], "reversed_cols": base[:, 601:][:, ::-1],
         "strided": base[::2, ::2]}[view]
    out = np.zeros(X.shape[0], np.float32)
    got = _run(row_sums_flat, CPU2, None, (out, X, off), X.shape[0])
    want = _run(row_sums_flat, INTERP, None, (out, X, off), X.shape[0])
    np.testing.assert_array_equal(got, want)


def test_on_and_off_bit_identical(tmp_path):
    """The same launches in two processes, prefetching every array (TK_CPU_PREFETCH_BYTES=1)
    and none: identical bits (a prefetch is a hint)."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys, numpy as np, tinykernels as tk
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_cpu_prefetch import rms_rows_grouped, softmax_grouped, row_sums_flat, _run
        from tinykernels import llm
        rng = np.random.default_rng(1)
        X = rng.standard_normal((41, 700), dtype=np.float32); w = rng.standard_normal(700, dtype=np.float32)
        cpu = tk.CPU(threads=2)
        outs = [_run(rms_rows_grouped, cpu, 64, (np.zeros_like(X), X, w, 1e-5), 41 * 64),
                _run(softmax_grouped, cpu, 64, (np.zeros_like(X), X), 41 * 64),
                _run(softmax_grouped, cpu, 48, (np.zeros_like(X), X), 41 * 48),
                _run(row_sums_flat, cpu, None, (np.zeros(41, np.float32), X, 2), 41),
                llm.rms_norm(X, w), llm.softmax(X), llm.rms_norm(X, w, residual=X[::-1].copy())[0]]
        np.save(sys.argv[1], np.concatenate([o.ravel() for o in outs]))
    """))
    res = []
    for n, env in enumerate(("1", "1000000000000000")):
        path = tmp_path / f"r{n}.npy"
        e = dict(os.environ, TK_CPU_PREFETCH_BYTES=env)
        subprocess.run([sys.executable, str(script), str(path)], check=True, env=e, timeout=600)
        res.append(np.load(path))
    np.testing.assert_array_equal(res[0].view(np.uint32), res[1].view(np.uint32))


def test_llm_softmax_prefetches_its_input():
    import importlib
    sm = importlib.import_module("tinykernels.llm.softmax")
    x = np.ones((8, 1024), np.float32)
    s = sm._softmax_lanes.source("CPU", np.empty_like(x), x, 1.0, 1024, 1, 3, False, True, tk.float32, ndrange=8)
    assert "tk_pf_row(&tk_pf0" in s and "tk_pf_step(&tk_pf0)" in s
    assert "tk_pf1" not in s        # out is written: not prefetched


def test_llm_rms_norm_has_one_pass_and_no_prefetch():
    """``_rms_rows``' second pass is the vectorized loop itself, so its only strip-mined loop is
    the first pass: no cursors (and none for the arrays of its constexpr-dead branches)."""
    from tinykernels.llm import norms
    x = np.ones((8, 1024), np.float32)
    w = np.ones(1024, np.float32)
    for mode in (norms.PLAIN, norms.RESIDUAL_AFTER):
        s = norms._rms_rows.source("CPU", np.empty_like(x), x, w, x, x, w, 1e-6, mode, False, tk.float32, ndrange=8)
        assert "tk_pf_row" not in s


def test_one_cursor_per_row_read_at_several_sites():
    """The host q4_0/q8_0 GEMVs read a weight row at several lines of inlined ``@tk.func``s,
    whose row index is a cast of the item's (``tk.int64``/weak int): one cursor per row (rows
    compare without source locations and no-op casts: ``prefetch.row_key``). Each duplicate
    cursor stepped the same lines again: with four chunk loops the exact GEMV ran 1.4-1.8x
    slower (gemv15). Since q4x18 an item takes two rows (``2i`` and, but for an odd last
    one, ``2i + 1``): two cursors, each at the next item's row of the same place."""
    import importlib
    mm = importlib.import_module("tinykernels.llm.matmul")
    f32 = np.float32
    for kern, bb in ((mm._gemv_rows_q4_0, 18), (mm._gemv_rows_q8_0, 34)):
        s = kern.source("CPU", np.zeros(4, f32), np.zeros((4, 128 * bb), np.uint8), np.zeros(4096, f32), ndrange=4)
        assert "tk_pf_row(&tk_pf0" in s and "tk_pf_row(&tk_pf1" in s and "tk_pf2" not in s, kern.name
        assert "(INT64_C(2) * (tk_gl + INT64_C(1)))" in s, kern.name      # the rows 2 (i + 1) ...
        assert "((INT64_C(2) * (tk_gl + INT64_C(1))) + INT64_C(1))" in s, kern.name  # ... and 2 (i + 1) + 1
