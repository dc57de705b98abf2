"""Regression tests for two PoCL 3.1 bugs in grouped kernels' group-level loops that the fuzz22
campaign left open (docs/fuzzing.md, docs/opencl.md), each marked ``# fixed: <id>``. The OpenCL
C was valid both times; the OpenCL renderer works around PoCL under TK_POCL."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tinykernels as tk

CL_OK = tk.backends().get("OpenCL", (False, ""))[0]
needs_cl = pytest.mark.skipif(not CL_OK, reason="no OpenCL device")

# Run in a child process (a PoCL abort would take the test worker down), from tmp_path (PoCL
# writes its CFG dump to the working directory when it aborts). argv[1]: the backend.
_KERNELS = '''
import json, sys
import numpy as np
import tinykernels as tk


@tk.kernel
def k_store(o, io, n):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(np.int32, (8,))
    v = ll + 2
    lm[ll] = 1
    tk.synchronize()
    wr = 0
    while True:
        tk.synchronize()
        if wr >= n:
            break
        wr += 1
        if v != 0:
            io[li] = 5
        v = 0
        o[li] = lm[0] + wr


@tk.func
def one(e):
    tk.atomic_add(e, 0, 1)
    return 1


@tk.kernel
def k_exits(o, e, s):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(np.int32, (8,))
    lm[ll] = 1
    tk.synchronize()
    wr = 0
    while wr < 2 and tk.uniform(one(e) == 1):
        wr += 1
        if s & 1:
            break
        o[li] += 2
        tk.synchronize()
    o[li] += 3


b = tk.backend(sys.argv[1])
out = {}
for nd, wg in ((81, 8), (69, 7), (8, 4)):
    o = tk.asarray(np.full(nd, -1, np.int64), backend=b)
    io = tk.asarray(np.zeros(nd, np.int32), backend=b)
    k_store(b)(o, io, 3, ndrange=nd, workgroupsize=wg).wait()
    out[f"store {nd} {wg} 3"] = [o.numpy().tolist(), io.numpy().tolist()]
for nd, wg in ((69, 7), (8, 4)):
    for s in (0, 1):
        o = tk.asarray(np.zeros(nd, np.int64), backend=b)
        e = tk.asarray(np.zeros(1, np.int64), backend=b)
        k_exits(b)(o, e, s, ndrange=nd, workgroupsize=wg).wait()
        out[f"exits {nd} {wg} {s}"] = [o.numpy().tolist(), e.numpy().tolist()]
print(json.dumps(out))
'''


def _run(tmp_path, backend: str) -> dict:
    (tmp_path / "pocl22_kernels.py").write_text(_KERNELS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "pocl22_kernels.py", backend], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit status {r.returncode}: {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check(got: dict) -> None:
    """Known answers: k_store stores 1 + n and io 5 for every item; k_exits adds 2 per completed
    iteration (2 without the break, 0 with it) and 3, and evaluates the uniform condition (one
    atomic per group) twice per group without the break, once with it."""
    assert len(got) == 7
    for key, (o, other) in got.items():
        name, nd, wg, n = key.split()
        nd, wg, n = int(nd), int(wg), int(n)
        groups = -(-nd // wg)
        if name == "store":
            assert o == [1 + n] * nd, key
            assert other == [5] * nd, key
        else:
            assert o == [3 if n else 2 * 2 + 3] * nd, key
            assert other == [groups * (1 if n else 2)], key


# fixed: pocl-loop-item-block-lost-store
# fixed: pocl-loop-two-exits-abort
@needs_cl
def test_bug_group_loop_item_block_and_two_exits_on_cl(tmp_path):
    """Fuzzer seeds 94000222 and 91000615 (fuzz22), cut down by hand. k_store: in a group-level
    loop holding a barrier, the per-item block after the loop's break (`if (v != 0) io[li] = 5;
    v = 0; o[li] = ...`) lost its stores on PoCL 3.1 for the active items of a partial group
    (81 items in groups of 8: o[80] kept -1). k_exits: a loop with two exits between the same
    barriers (the uniform condition's break and `if s & 1: break`) aborted PoCL's compiler
    ("Incoming edges to non-entry block!"). Under TK_POCL every per-item block in a group-level
    loop is followed by a barrier, and an `if` holding a group-level break is fenced."""
    _check(_run(tmp_path, "CL"))


def test_group_loop_item_block_and_two_exits_known_answers_interp(tmp_path):
    """The same kernels and known answers on the interpreter (with its race checker)."""
    _check(_run(tmp_path, "INTERP:CHECK"))


@needs_cl
def test_pocl_fences_of_item_blocks_and_exits_only_in_group_loops(tmp_path):
    """The OpenCL source: a TK_POCL_BARRIER follows each per-item block inside the group-level
    loop and fences the `if` holding the break; none follows the per-item blocks outside it, and
    the source is the same without TK_POCL (the macro is empty there)."""
    src_file = tmp_path / "pocl22_src.py"
    src_file.write_text(_KERNELS.split("b = tk.backend")[0])
    import importlib.util
    spec = importlib.util.spec_from_file_location("pocl22_src", src_file)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    b = tk.backend("CL")
    o = tk.asarray(np.zeros(81, np.int64), backend=b)
    io = tk.asarray(np.zeros(81, np.int32), backend=b)
    body = m.k_store.source(b, o, io, 3, ndrange=81, workgroupsize=8).split("__kernel", 1)[1]
    lines = [ln.strip() for ln in body.splitlines() if not ln.lstrip().startswith("#line")]
    ends = [i for i, ln in enumerate(lines) if ln.startswith("} tk_item") and ln.endswith("_end: ;")]
    loop = lines.index("while (1) {")
    inside = [i for i in ends if i > loop]
    outside = [i for i in ends if i < loop]
    assert inside and outside
    assert all(lines[i + 1] == "TK_POCL_BARRIER;" for i in inside)
    assert all(lines[i + 1] != "TK_POCL_BARRIER;" for i in outside)
    brk = lines.index("break;")
    assert lines[brk - 2] == "TK_POCL_BARRIER;" and lines[brk + 2] == "TK_POCL_BARRIER;"
