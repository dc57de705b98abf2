"""Regression tests for the disagreements of the fuzz22 campaign (docs/fuzzing.md): one test per
FIXED_BUGS entry, each marked ``# fixed: <id>``. Kept apart from tests/test_fuzz.py, one of the
slowest files in CI."""
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinykernels as tk

CL_OK = tk.backends().get("OpenCL", (False, ""))[0]
needs_cl = pytest.mark.skipif(not CL_OK, reason="no OpenCL device")
WEBGPU_OK = tk.backends().get("WebGPU", (False,))[0]
needs_webgpu = pytest.mark.skipif(not WEBGPU_OK, reason="no WebGPU adapter")

# A grouped kernel (local memory) whose uniform loop assigns a local only in per-item code
# (`if (tk_active)` on the GPU-like backends, so the local is undefined on the inactive path) and
# reads it after the loop: fuzzer seed 90001921, minimised (fuzz21).
_UNDEF_LOCAL_KERNELS = '''
import json, sys
import numpy as np
import tinykernels as tk


@tk.kernel
def k_for(o, n, c: tk.constexpr):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(np.bool_, (4,))
    t = ll
    for j in range(tk.uint32(0), n):
        t = c
        w = 0
    o[li] = t


@tk.kernel
def k_while(o, n):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(np.float32, (4,))
    t = ll * 2
    w = 0
    while w < n:
        w += 1
        t = t + w
    o[li] = t


out = {}
b = tk.backend("CL")
for nd, wg in ((83, 1), (6, 4), (8, 4)):
    for n in (0, 3):
        for name, kern, extra in (("for", k_for, (7,)), ("while", k_while, ())):
            o = tk.asarray(np.full(nd, -1, np.int64), backend=b)
            kern(b)(o, np.uint32(n), *extra, ndrange=nd, workgroupsize=wg).wait()
            out[f"{name} {nd} {wg} {n}"] = o.numpy().tolist()
print(json.dumps(out))
'''


# fixed: pocl-undef-local-loop-barrier
@needs_cl
def test_bug_local_assigned_by_items_in_a_uniform_loop_of_a_grouped_kernel(tmp_path):
    """Fuzzer seed 90001921 (--edges --hazards --calls --bytes on CL, fuzz21): PoCL 3.1 aborted the
    process ("Could not find a dominating alternative variable.") when it compiled a grouped
    kernel whose uniform loop assigned a local in per-item code (undefined for inactive items)
    that was read after the loop: PoCL puts a barrier of its own into such a loop in a kernel
    with barriers. The OpenCL renderer now starts a grouped kernel's locals at 0 under TK_POCL.
    Run in a child process (an abort would take the test worker down), from tmp_path (PoCL
    writes broken.dot to the working directory when it aborts)."""
    (tmp_path / "undef_local.py").write_text(_UNDEF_LOCAL_KERNELS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "undef_local.py"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"exit status {r.returncode}: {r.stderr[-2000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(got) == 12
    for key, vals in got.items():
        name, nd, wg, n = key.split()
        nd, wg, n = int(nd), int(wg), int(n)
        ll = np.arange(nd) % wg
        want = (np.full(nd, 7) if n else ll) if name == "for" else ll * 2 + n * (n + 1) // 2
        assert vals == want.tolist(), key


def test_grouped_opencl_locals_start_at_zero_only_under_pocl(tmp_path):
    """The initializer is the TK_POCL_ZERO macro (`= 0` under TK_POCL, nothing elsewhere), on the
    locals of grouped kernels only."""
    src = textwrap.dedent('''
        import numpy as np
        import tinykernels as tk

        @tk.kernel
        def k_grouped(o, n):
            li = tk.index()
            lm = tk.localmem(np.float32, (4,))
            t = li
            o[li] = t

        @tk.kernel
        def k_plain(o, n):
            li = tk.index()
            t = li
            o[li] = t
        ''')
    path = tmp_path / "kz.py"
    path.write_text(src)
    ns = {}
    exec(compile(src, str(path), "exec"), ns)
    o = np.zeros(8, np.int64)
    g = ns["k_grouped"].source("OpenCL", o, np.uint32(1), ndrange=8, workgroupsize=4)
    p = ns["k_plain"].source("OpenCL", o, np.uint32(1), ndrange=8)
    assert "#define TK_POCL_ZERO = 0" in g and "int64_t v_t TK_POCL_ZERO;" in g
    assert "int64_t v_t;" in p and "v_t TK_POCL_ZERO" not in p


def _run(kernel, backend, arrays, scalars=(), ndrange=None, static_wg=None):
    """Launch with fresh copies of ``arrays`` (then ``scalars``); the arrays afterwards."""
    b = tk.backend(backend) if isinstance(backend, str) else backend
    dev = not getattr(b, "is_host", True)
    args = [tk.asarray(np.array(a), backend=b) if dev else np.array(a) for a in arrays]
    inst = kernel(b, static_wg) if static_wg else kernel(b)
    inst(*args, *scalars, ndrange=ndrange).wait()
    return [a.numpy() if dev else a for a in args]


def _backends():
    return [tk.Interpreter()] + (["CPU"] if tk.CPU.available()[0] else []) + (["CL"] if CL_OK else [])


@tk.kernel
def k_atomic_before_uniform_for(e, o, n):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(np.float32, (4,))
    lm[ll] = 1.0
    tk.synchronize()
    tk.atomic_add(e, 0, 1)
    t = 80
    for j in range(n):
        t = -t
    o[li] = t + lm[ll]


@tk.kernel
def k_atomic_after_uniform_for(e, o, n):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    t = 80
    for j in range(n):
        t = -t
    tk.atomic_add(e, 0, 1)
    tk.synchronize()
    o[li] = t


# fixed: pocl-loop-barrier-partial-group
@pytest.mark.parametrize("wg,nd", [((4, 1), (3, 1)), ((4, 1), (6, 2)), ((1, 4, 1), (2, 3, 1))])
def test_bug_atomic_next_to_a_uniform_loop_without_item_code_in_a_partial_group(wg, nd):
    """Fuzzer seed 90002214 (--edges --hazards --calls --bytes on CL, fuzz22): an effect function's
    accumulator got 19 for 17 (one atomic_add of 2 too many). In a kernel with a barrier, PoCL
    3.1 puts barriers of its own into an innermost loop with a uniform trip count, and in a
    partial group of a workgroup one item wide in OpenCL's x an `if (tk_active)` atomic between
    the explicit barrier and such a loop ran once more per group; the OpenCL renderer now fences
    every group-level loop of a grouped kernel (it fenced only loops holding per-item code)."""
    n = int(np.prod(nd))
    for b in _backends():
        for kern, extra in ((k_atomic_before_uniform_for, 1), (k_atomic_after_uniform_for, 0)):
            for trips in (0, 3):
                e, o = _run(kern, b, [np.zeros(1, np.uint64), np.zeros(n, np.int64)], (np.uint8(trips),),
                            ndrange=nd, static_wg=wg)
                assert int(e[0]) == n, f"{b} {kern} trips={trips}: {int(e[0])} atomics for {n} items"
                np.testing.assert_array_equal(o, np.full(n, (-80 if trips % 2 else 80) + extra), err_msg=f"{b} {kern}")


@tk.kernel
def k_group_loop_in_one_branch(o, s, n):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(np.int8, (4,))
    lm[ll] = tk.int8(ll)
    tk.synchronize()
    if s != 0:
        for v in range(n):
            w = v
    else:
        o[li, 0] = 5
    o[li, 1] = lm[ll] + 1


# fixed: pocl-loop-barrier-partial-group (its if/else part)
@pytest.mark.parametrize("nd", [6, 7])
def test_bug_group_level_loop_in_one_branch_of_an_if_else_in_a_partial_group(nd):
    """Fuzzer seed 91000360 (--grouped 1.0 --calls 1 on CL, fuzz22, with the first version of
    the pocl-loop-barrier-partial-group workaround): the fences around a group-level `for` in
    the then-branch of a uniform if/else put a barrier in one branch only, and PoCL 3.1 lost the
    stores after the if/else in the partial group (pocl-barrier-one-branch). An `if` holding a
    group-level loop is now fenced and split like one holding a barrier."""
    ll = np.arange(nd) % 4
    for b in _backends():
        for s in (0.0, 2.0**24 + 2):
            o = _run(k_group_loop_in_one_branch, b, [np.full((nd, 2), -1, np.int64)], (s, np.uint8(3)),
                     ndrange=nd, static_wg=4)[0]
            np.testing.assert_array_equal(o[:, 1], ll + 1, err_msg=f"{b} s={s}")
            np.testing.assert_array_equal(o[:, 0], np.full(nd, -1 if s else 5), err_msg=f"{b} s={s}")


@tk.func
def f_count(e):
    tk.atomic_add(e, 0, 1)
    return 0.0


@tk.kernel
def k_wgsl_constant_nan_minus_itself(o, e):
    i = tk.index()
    o[i, 0] = tk.float8_e4m3fn(70000) + -math.inf      # NaN + -NaN (float8_e4m3fn has no inf)
    o[i, 1] = tk.float8_e4m3fn(70000) - tk.float8_e4m3fn(70000)
    o[i, 2] = tk.float16(math.inf) - tk.float16(math.inf)
    o[i, 3] = tk.float16(math.inf) + tk.float16(-math.inf)
    o[i, 4] = f_count(e) == tk.float8_e4m3fn(70000) + -math.inf < f_count(e)


# fixed: wgsl-const-nan-minus-itself
@needs_webgpu
def test_bug_wgsl_constant_nan_or_inf_minus_itself_is_nan():
    """Fuzzer seed 90100752 (the WebGPU profile with --edges --hazards --calls --bytes, fuzz22):
    an effect function's counter got 75 for 44. `f(e) == tk.float8_e4m3fn(70000) + -math.inf <
    f(e)` ran its second call: the sum of two constants was `tk_x(tk_nan()) + (-tk_nan())`, which
    NIR folded to 0 (tk_x of tk_x collapses, then e + -e is 0), so 0.0 == NaN was true. A
    constant left operand of + and - is now tk_y-marked, as every other one is. Against NumPy."""
    n = 5
    for b in ("WEBGPU", tk.Interpreter()):
        o, e = _run(k_wgsl_constant_nan_minus_itself, b, [np.zeros((n, 5), np.float32), np.zeros(1, np.int32)],
                    ndrange=n)
        assert np.isnan(o[:, :4]).all(), (b, o)
        assert (o[:, 4] == 0).all() and int(e[0]) == n, (b, o[:, 4], e)
