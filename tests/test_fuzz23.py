"""Regression tests for the findings of the fuzz23 campaign (docs/fuzzing.md): one test per
FIXED_BUGS entry, each marked ``# fixed: <id>``. Kept apart from tests/test_fuzz.py, one of the
slowest files in CI."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels.testing.fuzz.basics import load_kernel

CL_OK = tk.backends().get("OpenCL", (False, ""))[0]
needs_cl = pytest.mark.skipif(not CL_OK, reason="no OpenCL device")

# Inlined @tk.funcs that hold barriers and return early under a uniform condition, called in a
# group-level loop: the return is a jump to the function's end (a FuncExit) that skips barriers.
_FUNC_EXIT = '''
import numpy as np
import tinykernels as tk


@tk.func
def first(lm, l, k, n, g, o):
    if k >= n:
        return 0.0
    tk.synchronize()
    v = lm[l]
    tk.synchronize()
    lm[l] = v + 1.0
    o[g] += 1.0
    return v


@tk.func
def second(lm, l, k, n, g, o):
    tk.synchronize()
    if k == n:
        return 1.0 + l
    o[g] += 10.0
    tk.synchronize()
    return lm[l]


@tk.kernel
def k_exit(out, o, x, n: tk.int32):
    l = tk.index(tk.Local, tk.Linear)
    g = tk.index()
    lm = tk.localmem(tk.float64, (4,))
    lm[l] = x[g]
    tk.synchronize()
    acc = 0.0
    k = 0
    while k < 4:
        acc += first(lm, l, k, n, g, o)
        o[g] += 100.0
        acc += second(lm, l, k, n, g, o)
        k += 1
    out[g] = acc
'''


def _run_exit(kern, dev, n, nd):
    b = tk.Interpreter() if dev == "INTERP" else tk.backend(dev)
    x = np.arange(nd, dtype=np.float64) * 0.5 + 1.0
    arrs = [np.zeros(nd), np.zeros(nd), x]
    if dev == "CL":
        arrs = [tk.asarray(a, backend=b) for a in arrs]
    kern(b)(*arrs, np.int32(n), ndrange=(nd,), workgroupsize=(4,))
    tk.synchronize(b)
    return [np.asarray(a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else a)
            for a in arrs[:2]]


# fixed: cpu-func-exit-in-item-loop
@pytest.mark.parametrize("dev", ["CPU", pytest.param("CL", marks=needs_cl)])
def test_uniform_early_return_over_barriers(dev):
    """An early return out of an inlined function with barriers is taken by the whole group at
    group level. The CPU put the uniform `if` in the item loop, whose `goto` to the function's
    end left that loop after its first work item: the others kept the previous iteration's
    return value (out differed from the interpreter's for n = 0 and 2). OpenCL (PoCL) had it
    right (fuzz23 brief item 0b) and is checked too."""
    kern = load_kernel(_FUNC_EXIT, "k_exit")
    for n, nd in ((0, 12), (2, 12), (5, 12), (0, 9), (2, 9)):     # 9: a partial last group
        want = _run_exit(kern, "INTERP", n, nd)
        got = _run_exit(kern, dev, n, nd)
        # known answer for the counter: per item 100 a trip, 1 for each trip of first's body,
        # 10 for each trip of second's past its return
        assert want[1][0] == 400 + min(n, 4) + 10 * (4 - (n < 4)), (n, want[1])
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"{dev} o, n={n}, ndrange {nd}")
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"{dev} out, n={n}, ndrange {nd}")


# The nested per-item loops of an unsafe_indices kernel (fuzzer seed 95000058 with --grad
# --grad-unsafe 0.5 --grad-local 0.3, cut down): its grouped adjoint pushes and pops a tape in
# loops whose trip counts differ per work item, and sums w's partials with a barrier.
_UNSAFE_LOOPS = '''
import json, sys
import numpy as np
import tinykernels as tk


@tk.kernel(unsafe_indices=True)
def k_loops(y0, x0, x1, idx, w):
    gi = tk.index()
    n = y0.shape[0]
    i = min(gi, n - 1)
    v5 = x0[i]
    for j8 in range(idx[i] % 4 + 1):
        for j9 in range(4):
            v5 = v5 * 0.75 + x0[j9]
            v5 += (w + -(x1[i]))
    if gi < n:
        y0[gi] = v5


def grads(b):
    rng = np.random.default_rng(0)
    n = 11
    x0, x1 = rng.uniform(-1.5, 1.5, n + 2), rng.uniform(-1.5, 1.5, n + 2)
    idx = np.array([7, 1, 10, 9, 8, 3, 2, 6, 4, 5, 9], np.int32)
    dev = (lambda a: a.copy()) if b.is_host else (lambda a: tk.asarray(np.ascontiguousarray(a), backend=b))
    arrs = [dev(a) for a in (np.zeros(n), rng.standard_normal(n), x0, np.zeros_like(x0), x1, np.zeros_like(x1))]
    inst = k_loops(b)
    fn = lambda *a: inst(*a, ndrange=(n,), workgroupsize=(4,))
    (gw,) = tk.autodiff(tk.Reverse, fn, tk.Duplicated(arrs[0], arrs[1]), tk.Duplicated(arrs[2], arrs[3]),
                        tk.Duplicated(arrs[4], arrs[5]), tk.Const(dev(idx)), tk.Active(0.9))
    tk.synchronize(b)
    host = lambda a: np.asarray(a if isinstance(a, np.ndarray) else a.numpy())
    return [host(arrs[3]).tolist(), host(arrs[5]).tolist(), float(gw)]


print(json.dumps({"want": grads(tk.Interpreter()), "got": grads(tk.backend("CL"))}))
'''


# fixed: pocl-unsafe-uniform-item-loops
@needs_cl
def test_pocl_unsafe_nested_item_loops(tmp_path):
    """CL's gradients of an unsafe_indices kernel with nested per-item loops match the
    interpreter's; PoCL miscounted the loops and the adjoint ran for hours on a tape index read
    out of its range (run in a child process with a time limit, one PoCL thread as in the
    reproducer; it hung with more too)."""
    import json
    import os
    import subprocess
    import sys
    path = tmp_path / "unsafe_loops.py"
    path.write_text(_UNSAFE_LOOPS)
    env = dict(os.environ, POCL_MAX_PTHREAD_COUNT="1")
    try:
        r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("the CL adjoint hung (pocl-unsafe-uniform-item-loops)")
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    for want, got in zip(res["want"][:2], res["got"][:2]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert res["got"][2] == pytest.approx(res["want"][2], rel=1e-12)
