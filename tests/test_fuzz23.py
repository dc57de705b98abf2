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
    v = lm[(l + 1) % 4]
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


def _run_exit(kern, dev, n):
    b = tk.Interpreter() if dev == "INTERP" else tk.backend(dev)
    x = np.arange(12, dtype=np.float64) * 0.5 + 1.0
    arrs = [np.zeros(12), np.zeros(12), x]
    if dev == "CL":
        arrs = [tk.asarray(a, backend=b) for a in arrs]
    kern(b)(*arrs, np.int32(n), ndrange=(12,), workgroupsize=(4,))
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
    for n in (0, 2, 5):
        want = _run_exit(kern, "INTERP", n)
        got = _run_exit(kern, dev, n)
        # known answer for the counter: per item 100 a trip, 1 for each trip of first's body,
        # 10 for each trip of second's past its return
        assert want[1][0] == 400 + min(n, 4) + 10 * (4 - (n < 4)), (n, want[1])
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"{dev} o, n={n}")
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"{dev} out, n={n}")
