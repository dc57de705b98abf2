"""The fuzzer's autodiff mode on ``@tk.kernel(unsafe_indices=True)`` kernels (``scripts/fuzz.py
--grad --grad-unsafe P``; testing/fuzz/gradgen.py, docs/fuzzing.md "Autodiff mode"): 1-D to 3-D
launches whose ndrange is no multiple of the workgroup, so that the items past the ndrange run
every statement (tape pushes included) and the kernel guards its own stores. Seeds 95000003 and
95000004 below failed on the code before f4826fb (the tape sized by the ndrange only: an
IndexError in the interpreter's counting kernel), which the generator would have found. The
first campaign found ``cpu-unsafe-flat-padded-items`` (regression tests at the end)."""
import ast
import ctypes
import importlib
import importlib.util
import math
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.testing import fuzz as F

CPU_OK = tk.CPU.available()[0]
needs_cpu = pytest.mark.skipif(not CPU_OK, reason="no C compiler for the CPU backend")
UNSAFE = F.Options(grad=True, grad_unsafe=1.0)
SEEDS = range(95000000, 95000040)


def _padded(case) -> tuple:
    nd = case.ndrange if isinstance(case.ndrange, tuple) else (case.ndrange,)
    wg = case.workgroupsize if isinstance(case.workgroupsize, tuple) else (case.workgroupsize,)
    return nd, wg


def test_the_option_off_keeps_every_seeds_kernel():
    """Old seeds are reproducible: the unsafe decision has an RNG of its own."""
    for seed in range(45000000, 45000012):
        for local in (0.0, 0.3, 1.0):
            a = F.generate(seed, F.Options(grad=True, grad_local=local))
            b = F.generate(seed, F.Options(grad=True, grad_local=local, grad_unsafe=0.0))
            assert (a.source, a.ndrange, a.workgroupsize) == (b.source, b.ndrange, b.workgroupsize)
            assert "unsafe_indices" not in a.source


def test_unsafe_cases_have_partial_groups_and_guard_their_stores():
    dims = set()
    for seed in SEEDS:
        a, b = F.generate(seed, UNSAFE), F.generate(seed, UNSAFE)
        assert a.source == b.source and a.mode == "grad" and a.unsafe
        tree = ast.parse(a.source)
        assert "@tk.kernel(unsafe_indices=True)" in a.source
        nd, wg = _padded(a)
        assert len(nd) == len(wg) and any(e % w for e, w in zip(nd, wg)), seed     # a partial group
        assert math.prod(-(-e // w) * w for e, w in zip(nd, wg)) <= 48, seed
        dims.add(len(nd))
        # every store to an output or in-place array is under ``if ok:``
        kern = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == a.kname][0]
        stored = {s.name for s in a.args if s.role in ("out", "io")}

        def visit(node, guarded):
            for ch in ast.iter_child_nodes(node):
                g = guarded or (isinstance(node, ast.If) and ast.unparse(node.test) == "ok" and ch in node.body)
                if isinstance(ch, ast.Assign):
                    for t in ch.targets:
                        if isinstance(t, ast.Subscript) and ast.unparse(t.value) in stored:
                            assert g, (seed, ast.unparse(ch))
                visit(ch, g)
        visit(kern, False)
        for s in a.args:        # outputs and in-place arrays have the ndrange's shape
            if s.role in ("out", "io"):
                assert s.value.shape == nd, seed
    assert dims == {1, 2, 3}


def test_unsafe_and_local_memory_together():
    c = F.generate(95000001, F.Options(grad=True, grad_unsafe=1.0, grad_local=1.0))
    nd, wg = _padded(c)
    assert {"localmem", "barrier", "unsafe_indices"} <= c.features
    assert f"tk.localmem(tk.float64, ({math.prod(wg)},))" in c.source      # one slot per item


@needs_cpu
@pytest.mark.parametrize("seed", [95000003, 95000004, 95000001])
def test_generated_unsafe_grad_cases_agree(seed):
    """A bounded run (reverse vs finite differences, forward vs reverse, CPU vs the interpreter):
    2-D (95000003), 1-D (95000004), 2-D with local memory and a group reduction (95000001); each
    failed on the code before f4826fb. The three have local memory with these options."""
    opts = F.Options(grad=True, grad_unsafe=1.0, grad_local=0.5)
    c = F.generate(seed, opts)
    assert c.unsafe
    ms = F.check_case(c, ["CPU"], "INTERP")
    assert not ms, [str(m) for m in ms]
    assert "grad-skipped" not in c.features or "kink" in c.features


def test_fuzz_script_takes_the_option():
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "fuzz.py")
    r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--grad-unsafe" in r.stdout


# ----------------------------------------------------------------------------- found by the campaign

BACKENDS = ["CPU", "INTERP"]
if tk.backends()["OpenCL"][0]:
    BACKENDS.append("CL")

PADDED_SRC = """
import tinykernels as tk

@tk.kernel(unsafe_indices=True)
def padded_flat(acc, x, w):
    gi = tk.index()
    tk.atomic_add(acc, 0, 1.0)
    s = w
    for j in range(2):
        s = s * 0.5 + x[min(gi, x.shape[0] - 1)] ** 2
    tk.atomic_add(acc, 1, s)

@tk.kernel(unsafe_indices=True)
def padded_flat2d(acc, w):
    v = w
    for j in range(3):
        v = v * v
    tk.atomic_add(acc, 0, v)
"""


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    path = tmp_path_factory.mktemp("padded") / "padded_kernels.py"       # the frontend reads the source
    path.write_text(PADDED_SRC)
    spec = importlib.util.spec_from_file_location("padded_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.padded_flat, mod.padded_flat2d


def _b(dev):
    if dev == "CPU" and not CPU_OK:
        pytest.skip("no C compiler for the CPU backend")
    if dev == "INTERP" and not CPU_OK:
        pytest.skip("the interpreter runs derived kernels on the CPU backend")
    return tk.backend(dev)


def _host(a):
    return a.numpy() if hasattr(a, "numpy") else a


@pytest.mark.parametrize("dev", BACKENDS)
def test_flat_unsafe_kernel_runs_the_padded_items(dev, padded):   # fixed: cpu-unsafe-flat-padded-items
    """ndrange 5 in groups of 4: 8 items run, the 3 past the ndrange read x's last element.
    The CPU ran 5 (its flat code shape loops over the ndrange), and the adjoint and tangent
    (which the interpreter runs on the CPU) lost the padded items' terms."""
    k, _ = padded
    b = _b(dev)
    x = np.array([0.5, -1.0, 1.5, 2.0, -0.25])
    w = 0.75
    xs = np.concatenate([x, [x[-1]] * 3])                 # the value each of the 8 items reads
    s = (w * 0.5 + xs ** 2) * 0.5 + xs ** 2               # its s
    acc = tk.asarray(np.zeros(2), backend=b) if dev == "CL" else np.zeros(2)
    k(b)(acc, x if dev != "CL" else tk.asarray(x, backend=b), w, ndrange=5, workgroupsize=4)
    tk.synchronize(b)
    np.testing.assert_allclose(_host(acc), [8.0, s.sum()], rtol=1e-14)
    # reverse mode: d(acc[1])/dx_k = 1.5 * 2 x_k per item reading x_k; d/dw = 0.25 per item
    counts = np.array([1, 1, 1, 1, 4.0])
    dx_want = 3.0 * x * counts
    acc0, dacc = np.zeros(2), np.array([0.0, 1.0])
    dx = np.zeros(5)
    if dev == "CL":
        acc0, dacc, xa, dxa = (tk.asarray(a, backend=b) for a in (acc0, dacc, x, dx))
    else:
        xa, dxa = x.copy(), dx
    (gw,) = tk.autodiff(tk.Reverse, lambda a, xx, ww: k(b)(a, xx, ww, ndrange=5, workgroupsize=4),
                        tk.Duplicated(acc0, dacc), tk.Duplicated(xa, dxa), tk.Active(w))
    tk.synchronize(b)
    np.testing.assert_allclose(_host(dxa), dx_want, rtol=1e-13)
    assert gw == pytest.approx(8 * 0.25, rel=1e-13)
    # forward mode along x's last element: every item past the ndrange adds 3 x[4]
    v = np.array([0, 0, 0, 0, 1.0])
    acc0, dacc = np.zeros(2), np.zeros(2)
    if dev == "CL":
        acc0, dacc, xa, va = (tk.asarray(a, backend=b) for a in (acc0, dacc, x, v))
    else:
        xa, va = x.copy(), v
    tk.autodiff(tk.Forward, lambda a, xx: k(b)(a, xx, w, ndrange=5, workgroupsize=4),
                tk.Duplicated(acc0, dacc), tk.Duplicated(xa, va))
    tk.synchronize(b)
    np.testing.assert_allclose(_host(dacc), [0.0, 4 * 3.0 * x[4]], rtol=1e-13)


@pytest.mark.parametrize("dev", BACKENDS)
def test_flat_unsafe_2d_kernel_tape_has_the_padded_items(dev, padded):   # fixed: cpu-unsafe-flat-padded-items
    """Seed 95000007 minimised: a 2-D flat kernel pushing a loop's value to the tape, ndrange
    (1, 6) in groups of (2, 4): 16 items each add w ** 8. The interpreter's adjoint (run on
    the CPU) wrote the tape past its end (IndexError); the CPU's lost 10 items' terms."""
    _, k = padded
    b = _b(dev)
    w = 0.9
    acc = np.zeros(1)
    dacc = np.ones(1)
    if dev == "CL":
        acc, dacc = tk.asarray(acc, backend=b), tk.asarray(dacc, backend=b)
    (gw,) = tk.autodiff(tk.Reverse, lambda a, ww: k(b)(a, ww, ndrange=(1, 6), workgroupsize=(2, 4)),
                        tk.Duplicated(acc, dacc), tk.Active(w))
    tk.synchronize(b)
    assert _host(acc)[0] == pytest.approx(16 * w ** 8, rel=1e-14)
    assert gw == pytest.approx(16 * 8 * w ** 7, rel=1e-13)


@needs_cpu
def test_seed_95000006_compiles_on_the_cpu():   # fixed: gcc-vectorizer-ice
    """GCC 12.2 crashed compiling this seed's adjoint (an internal compiler error in its loop
    vectorizer, a CompileError); on another compiler this is a plain agreement check."""
    c = F.generate(95000006, F.Options(grad=True, grad_unsafe=1.0, grad_local=0.5))
    ms = F.check_case(c, ["CPU"], "INTERP")
    assert not ms, [str(m) for m in ms]


@needs_cpu
def test_a_vectorizer_crash_is_compiled_again_without_the_vectorizer(monkeypatch, tmp_path):   # fixed: gcc-vectorizer-ice
    C = importlib.import_module("tinykernels.runtime.compiler")
    real, calls = C._run, []

    def run(cmd, *a, **kw):
        calls.append(list(cmd))
        if len(calls) == 1:        # what GCC 12 printed for seed 95000006's adjoint
            return types.SimpleNamespace(returncode=1, stdout="", stderr=(
                "k.c:1559:13: internal compiler error: in vect_get_vec_defs_for_operand, at "
                "tree-vect-stmts.cc:1509\n"))
        return real(cmd, *a, **kw)
    monkeypatch.setattr(C, "_run", run)
    src = f"int tk_probe(void) {{ return 7; }}\n/* {tmp_path} */\n"       # never cached before
    path = C.compile_library(src, "probe")
    assert len(calls) == 2 and "-fno-tree-vectorize" not in calls[0] and "-fno-tree-vectorize" in calls[1]
    assert ctypes.CDLL(str(path)).tk_probe() == 7


@needs_cpu
def test_other_compile_errors_are_not_retried(monkeypatch, tmp_path):
    C = importlib.import_module("tinykernels.runtime.compiler")
    real, calls = C._run, []

    def run(cmd, *a, **kw):
        calls.append(list(cmd))
        return real(cmd, *a, **kw)
    monkeypatch.setattr(C, "_run", run)
    with pytest.raises(tk.CompileError):
        C.compile_library(f"int tk_probe(void) {{ return nope; }}\n/* {tmp_path} */\n", "probe")
    assert calls and not any("-fno-tree-vectorize" in c for c in calls)


@needs_cpu
def test_the_checker_compares_the_backends_primal_results(monkeypatch):
    """grad-primal: a backend whose final values differ (here by a constant, which no
    derivative sees) is reported; the gradients alone agree."""
    GC = importlib.import_module("tinykernels.testing.fuzz.gradcheck")
    real = GC._forward

    def forward(case, b, fn, floats, ints, w):
        out = real(case, b, fn, floats, ints, w)
        if getattr(b, "name", "") == "CPU":
            out = {k: v + 1e-3 for k, v in out.items()}
        return out
    monkeypatch.setattr(GC, "_forward", forward)
    c = F.generate(95000004, F.Options(grad=True, grad_unsafe=1.0))
    ms = F.check_case(c, ["CPU"], "INTERP")
    assert [m.kind for m in ms] == ["grad-primal"], [str(m) for m in ms]
