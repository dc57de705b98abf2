"""The differential fuzzer (tinykernels.testing.fuzz, docs/fuzzing.md): a bounded run of generated
kernels on the compiled backends against the interpreter, the generator's own guarantees, and one
regression test per disagreement the fuzzer ever found (strict xfail while the bug is open)."""
import ast
import dataclasses
import math
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.testing import fuzz as F

ml_dtypes = pytest.importorskip("ml_dtypes")

CPU_OK = tk.CPU.available()[0]
CL_OK = tk.backends().get("OpenCL", (False, ""))[0]
needs_cpu = pytest.mark.skipif(not CPU_OK, reason="no C compiler for the CPU backend")
needs_cl = pytest.mark.skipif(not CL_OK, reason="no OpenCL device")

INTERP = tk.Interpreter()


def xfail_bug(bug_id):
    """A strict xfail for the open bug ``bug_id`` of :data:`tinykernels.testing.fuzz.KNOWN_BUGS`."""
    return pytest.mark.xfail(strict=True, reason="BUG: " + F.KNOWN_BUGS[bug_id])


# ----------------------------------------------------------------------------- the bounded run

SEEDS_CPU = range(0, 200)        # fixed: the same kernels every run (the disk cache keeps them fast)
SEEDS_CL = range(0, 60)


def _no_mismatch(summ):
    assert not summ.mismatches, "\n".join(str(m) for m in summ.mismatches)


@needs_cpu
def test_bounded_fuzz_run_cpu_against_interpreter():
    _no_mismatch(F.fuzz(SEEDS_CPU, ["CPU"], "INTERP", jobs=1, minimize_found=False))


@needs_cl
def test_bounded_fuzz_run_opencl_against_interpreter():
    _no_mismatch(F.fuzz(SEEDS_CL, ["CL"], "INTERP", jobs=1, minimize_found=False))


try:
    import hypothesis
    from hypothesis import given, settings
except ImportError:                      # pragma: no cover - hypothesis is in the test extra
    hypothesis = None


@needs_cpu
@pytest.mark.skipif(hypothesis is None, reason="hypothesis is not installed")
def test_hypothesis_drawn_kernels_agree_on_cpu():
    """The generator as a hypothesis strategy (derandomized: the same 40 kernels every run)."""
    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(F.cases())
    def check(case):
        ms = F.check_case(case, ["CPU"], "INTERP")
        assert not ms, "\n".join(str(m) for m in ms)
    check()


def _nvrtc_ok():
    try:
        from tinykernels.runtime.cuda import nvrtc_available
        return nvrtc_available()[0]
    except Exception:  # noqa: BLE001 - cuda-bindings missing or broken: the test skips
        return False


@pytest.mark.skipif(not _nvrtc_ok(), reason="NVRTC (cuda-bindings) is not installed")
def test_bounded_fuzz_run_compiles_cuda_with_nvrtc():
    """No GPU needed: every generated kernel's CUDA C++ compiles for sm_80 and sm_90."""
    _no_mismatch(F.fuzz(range(0, 16), ["NVRTC:sm_80+sm_90"], "INTERP", jobs=1, minimize_found=False))


def _hipclang_ok():
    from tinykernels.runtime.hipclang import hip_clang_available
    return hip_clang_available()[0]


@pytest.mark.skipif(not _hipclang_ok(), reason="clang cannot compile HIP here (clang, libamdhip64-dev)")
def test_bounded_fuzz_run_compiles_hip_with_clang():
    """No GPU needed: every generated kernel's HIP C++ compiles for gfx90a (wavefront 64) and
    gfx1100 (wavefront 32)."""
    _no_mismatch(F.fuzz(range(0, 16), ["HIPCLANG:gfx90a+gfx1100"], "INTERP", jobs=1, minimize_found=False))


@pytest.mark.skipif(not _hipclang_ok(), reason="clang cannot compile HIP here (clang, libamdhip64-dev)")
def test_batched_hipclang_run_reports_each_rejected_kernel_by_its_seed(monkeypatch):
    """The HIPCLANG target compiles a batch of kernels in one clang run per architecture; a
    kernel clang rejects is still found (the batch is bisected) and reported for its seed
    alone, with the error its compile alone gives."""
    from tinykernels.testing.fuzz import run as R
    render = R._hip_source
    broken = {7, 12}

    def planted(case, arch):
        src = render(case, arch)
        return src + "\nint tk_planted_error = ;\n" if case.seed in broken else src
    monkeypatch.setattr(R, "_hip_source", planted)
    summ = F.fuzz(range(0, 16), ["HIPCLANG:gfx90a+gfx1100"], "INTERP", jobs=0, minimize_found=False, batch=8)
    assert summ.count == 16
    assert sorted((m.seed, m.backend, m.kind) for m in summ.mismatches) == \
        [(s, "HIPCLANG:gfx90a+gfx1100", "error") for s in sorted(broken)]
    assert all("clang rejected" in m.detail and "(gfx90a)" in m.detail for m in summ.mismatches)
    alone = F.check_case(F.generate(7), ["HIPCLANG:gfx90a+gfx1100"], "INTERP")
    assert [m.detail for m in alone] == [m.detail for m in summ.mismatches if m.seed == 7]


def test_batched_compile_outcomes_are_those_of_the_case_by_case_target(monkeypatch):
    """hipclang_compile_batch gives each case the first failure of the sequence the single
    case target runs (render, compile, for each architecture in turn)."""
    from tinykernels import CompileError
    from tinykernels.runtime import hipclang
    from tinykernels.testing.fuzz import run as R
    cases = [F.generate(s) for s in range(4)]

    def render(case, arch):
        if (case.seed, arch) == (1, "gfx1100"):
            raise CompileError("render failed", None, None, 0)
        return f"{case.seed}:{arch}"

    def compile_one(src, arch="gfx90a", name="k"):
        if src in ("2:gfx90a", "1:gfx90a", "3:gfx1100"):
            raise CompileError(f"rejected {src}", None, None, 0)
        return ""

    def compile_batch(srcs, arch="gfx90a", names=None):
        out = []
        for s in srcs:
            try:
                compile_one(s, arch)
                out.append(None)
            except CompileError as e:
                out.append(e)
        return out
    monkeypatch.setattr(R, "_hip_source", render)
    monkeypatch.setattr(hipclang, "compile_hip_clang", compile_one)
    monkeypatch.setattr(hipclang, "compile_hip_clang_batch", compile_batch)
    batched = [str(e) if e else None for e in F.hipclang_compile_batch(cases, "HIPCLANG:gfx90a+gfx1100")]
    single = []
    for c in cases:
        try:
            single.append(F.hipclang_compile_case(c, "HIPCLANG:gfx90a+gfx1100"))
        except CompileError as e:
            single.append(str(e))
    assert batched == single == [None, "rejected 1:gfx90a", "rejected 2:gfx90a", "rejected 3:gfx1100"]


def test_batch_size_is_many_only_for_targets_that_compile_kernels_together():
    assert F.batch_size(["CPU"], 1000, 2) == 1
    assert F.batch_size(["HIPCLANG:gfx90a"], 2000, 2) == 40
    assert F.batch_size(["CPU", "HIPCLANG"], 16, 2) == 8
    assert F.batch_size(["HIPCLANG"], 1, 2) == 1


def test_a_hipclang_failure_is_a_finding(monkeypatch):
    """A kernel clang rejects is reported as an error of the HIPCLANG target (not skipped)."""
    from tinykernels import CompileError
    from tinykernels.runtime import hipclang

    def reject(src, arch="gfx90a", name="k"):
        raise CompileError(f"clang rejected the generated HIP code for kernel '{name}' ({arch})", None, None, 0)
    monkeypatch.setattr(hipclang, "compile_hip_clang", reject)
    ms = F.check_case(F.generate(3), ["HIPCLANG:gfx942"], "INTERP")
    assert [(m.backend, m.kind) for m in ms] == [("HIPCLANG:gfx942", "error")] and "gfx942" in ms[0].detail


# ----------------------------------------------------------------------------- the generator

def test_generation_is_reproducible_from_the_seed():
    for seed in (0, 1, 12345):
        a, b = F.generate(seed), F.generate(seed)
        assert a.source == b.source and a.ndrange == b.ndrange and a.workgroupsize == b.workgroupsize
        for x, y in zip(a.args, b.args):
            assert x.name == y.name and x.kind == y.kind
            if x.kind == "array":
                assert x.value.tobytes() == y.value.tobytes()
            else:
                assert repr(x.value) == repr(y.value)
    assert F.generate(1).source != F.generate(2).source


def test_generated_kernels_cover_the_language():
    feats = set()
    for seed in SEEDS_CPU:
        feats |= F.generate(seed).features
    for f in ("grouped", "barrier", "localmem", "collective", "uniform", "atomic", "atomic-own", "local-atomic",
              "func", "func-tuple", "inexact", "io", "private", "strided", "ndim1", "ndim2", "ndim3",
              "ndrange-offset", "partial-group", "unsafe_indices", "cartesian-store", "return-before-barrier",
              "local-atomic-own", "group-cartesian", "strided-output"):
        assert f in feats, f
    text = "\n".join(F.generate(s).source for s in range(60))
    for needle in ("while ", "for ", " in range(", "break", "continue", "elif ", " if ", " else ", " and ",
                   " or ", "not ", "**", "//", " % ", "<<", ">>", " ^ ", " & ", " | ", "~", "tk.float16(",
                   "tk.bfloat16(", "tk.float8_e4m3fn(", "np.uint64(", "int(", "float(", "bool(", "math.floor(",
                   "tk.clamp(", "tk.select(", "tk.fma(", "min(", "max(", "abs(", "tk.atomic_", "tk.group_reduce(",
                   "tk.group_scan(", "tk.uniform(", "tk.synchronize()", "tk.private(", "tk.constexpr", "tk.Const",
                   "@tk.func", "tk.index(tk.Global, tk.Cartesian)", "tk.ngroups()", "tk.groupsize()",
                   "tk.index(tk.Group, tk.Cartesian)", "tk.atomic_exchange(", "tk.atomic_cas("):
        assert needle in text, needle


def test_loop_counters_are_plain_names():
    """A retired tuple element (``tu35[0]`` of ``tu35 = f(...)``) is never reused as a loop
    counter (seed 5300058 with grouped=1.0 generated ``for tu35[0] in range(C9):``)."""
    import re
    opts = F.Options(grouped=1.0)
    for seed in [5300058, *range(40)]:
        src = F.generate(seed, opts).source
        assert not re.search(r"for \w+\[", src), seed


def test_excluded_known_bugs_are_not_generated():
    for seed in range(300):
        assert not any(f.startswith("bug:") for f in F.generate(seed).features)
    fixed = set()
    for seed in range(400):
        fixed |= {f[6:] for f in F.generate(seed).features if f.startswith("fixed:")}
    assert {"weak-bool", "tuple-swap", "pow-fastpath", "const-weak-mutation",
            "pocl-collective-loop"} <= fixed                                              # generated again


def test_every_known_bug_has_a_regression_test():
    text = open(__file__).read()
    text += (Path(__file__).parent / "test_fuzz_grad.py").read_text()   # the autodiff mode's bugs
    text += (Path(__file__).parent / "test_fuzz22.py").read_text()      # fuzz22's (test_fuzz.py is slow)
    text += (Path(__file__).parent / "test_pocl22.py").read_text()      # fuzz22's open PoCL seeds
    text += (Path(__file__).parent / "test_fuzz_grad_unsafe.py").read_text()   # --grad-unsafe's (gradfz22)
    text += (Path(__file__).parent / "test_autodiff_audit23.py").read_text()   # adx23's GCC loop distribution
    text += (Path(__file__).parent / "test_fuzz23.py").read_text()      # fuzz23's
    text += (Path(__file__).parent / "test_cuda_h200.py").read_text()   # the first GPU run's (cudafz24)
    for bug in F.KNOWN_BUGS:
        assert f'xfail_bug("{bug}")' in text, bug
    for bug in F.FIXED_BUGS:
        assert f"# fixed: {bug}\n" in text, bug
    assert not set(F.KNOWN_BUGS) & set(F.FIXED_BUGS)


@needs_cpu
def test_reproducer_round_trip(tmp_path):
    case = F.generate(7)
    path = F.write_reproducer(case, str(tmp_path / "seed7.py"), (), ["CPU"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(os.path.dirname(__file__), "..", "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "agree" in r.stdout


@needs_cpu
def test_comparison_and_minimiser_find_a_planted_disagreement(monkeypatch):
    """A fixed compiler bug planted again (tuple assignment element by element), inside noise:
    check_case reports it, minimize shrinks the kernel to the swap."""
    from tinykernels.frontend import lower
    monkeypatch.setattr(lower.Lowerer, "snapshot", lambda self, v, node: v)
    src = textwrap.dedent('''\
        import math
        import numpy as np
        import tinykernels as tk


        @tk.kernel
        def planted(o, x: tk.Const):
            li = tk.index()
            v1 = x[li % len(x)] * 3
            v2 = v1 + 7
            a = li
            b = li + 10
            o[li, 0] = v2 - v1
            a, b = b, a
            v3 = math.floor(tk.float32(v2) * 0.5)
            o[li, 1] = a - b
            o[li, 2] = v3
        ''')
    args = [F.ArgSpec("o", "array", np.zeros((8, 3), np.int64), "out", tol=[0, 0, 0]),
            F.ArgSpec("x", "array", np.arange(5, dtype=np.int32), "in", True)]
    case = F.Case(-1, src, "planted", args, 8)
    ms = F.check_case(case, ["CPU"], "INTERP")
    assert [m.kind for m in ms] == ["value"] and ms[0].array == "o"
    assert all(i[1] == 1 for i, _, _ in ms[0].where)             # only the swapped column
    small = F.minimize(case, "CPU", "INTERP", ms[0].signature(), budget_s=60)
    assert F.check_case(small, ["CPU"], "INTERP")
    assert len(small.source.splitlines()) < len(src.splitlines())
    assert "a, b = (b, a)" in small.source or "a, b = b, a" in small.source
    assert "math.floor" not in small.source


def test_random_numbers_and_prints_are_generated_only_when_asked():
    """``Options.rng`` / ``Options.prints`` add tk.random and tk.print statements; off by default,
    so that every seed recorded before them keeps its kernel."""
    for seed in range(100):
        assert not any(f.startswith(("rng-", "print")) for f in F.generate(seed).features)
    opts = F.Options(rng=1.0, prints=1.0)
    feats, text = set(), ""
    for seed in range(60):
        c = F.generate(seed, opts)
        feats |= c.features
        text += c.source
    assert {"rng-philox", "rng-bits", "rng-uniform", "rng-normal", "print"} <= feats
    for needle in ("tk.random.philox4x32(", "tk.random.bits(", "tk.random.uniform(", "tk.random.normal(",
                   "tk.print("):
        assert needle in text, needle


@needs_cpu
def test_bounded_fuzz_run_with_random_numbers_and_prints():
    summ = F.fuzz(range(40), ["CPU"], "INTERP", jobs=1, minimize_found=False, opts=F.Options(rng=1.0, prints=1.0))
    _no_mismatch(summ)
    assert summ.features.get("print", 0) >= 5 and summ.features.get("rng-normal", 0) >= 5


def test_byte_runs_are_generated_only_when_asked():
    """``Options.bytes`` adds tk.load_i8 / lookup_u4 / load_halves / dot_i8 / dot_u4i8 statements
    (bytegen.py); off by default, so that every seed recorded before it keeps its kernel."""
    for seed in range(100):
        assert F.generate(seed).source == F.generate(seed, F.Options(bytes=0.0)).source
        assert not any(f.startswith("bytes-") for f in F.generate(seed).features)
    feats, text = set(), ""
    for seed in range(80):
        c = F.generate(seed, F.Options(bytes=8.0))
        feats |= c.features
        text += c.source
    kinds = ("load_i8", "lookup_u4", "load_halves", "dot_i8", "dot_u4i8")
    assert {"bytes-" + k for k in kinds} <= feats
    assert "bytes-dot4_i8" in feats
    for needle in [f"tk.{k}(" for k in kinds] + ["tk.dot4_i8(", "scale=", "stride=", "zero=", "start=("]:
        assert needle in text, needle


@needs_cpu
def test_bounded_fuzz_run_with_byte_runs():
    summ = F.fuzz(range(30), ["CPU"], "INTERP", jobs=1, minimize_found=False, opts=F.Options(bytes=8.0))
    _no_mismatch(summ)
    assert sum(v for k, v in summ.features.items() if k.startswith("bytes-")) >= 10


def test_hazards_are_generated_only_when_asked():
    """``Options.hazards`` (hazards.py) adds effect functions (atomics, prints) called in
    ``tk.uniform``, ``x if c else y``, ``and``/``or`` and chained comparisons, nested tuple returns
    and Python int arguments near 2**63 and 2**64; off by default, so every earlier seed keeps its
    kernel, and never in a ``while`` condition (whose generation is bugs16's)."""
    new = ("effect-func", "effect-store", "hazard", "hazard-if", "uniform-effect", "nested-tuple", "big-int",
           "big-int-arg")
    for seed in range(100):
        assert F.generate(seed).source == F.generate(seed, F.Options(hazards=0.0)).source
        assert not set(new) & F.generate(seed).features
    feats, text, while_calls = set(), "", 0
    opts = F.Options(hazards=4.0, prints=1.0)
    for seed in range(60):
        c = F.generate(seed, opts)
        feats |= c.features
        text += c.source
        tree = ast.parse(c.source)
        effect = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.args.args
                  and f.args.args[-1].arg.startswith("E")}
        funcs = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)} - effect
        for w in (n for n in ast.walk(tree) if isinstance(n, ast.While)):
            called = {ast.unparse(n.func) for n in ast.walk(w.test) if isinstance(n, ast.Call)}
            assert not called & effect, ast.unparse(w.test)
            while_calls += bool(called & funcs)
    assert set(new) <= feats, set(new) - feats
    assert while_calls >= 1             # (bugs16: @tk.func calls in while conditions, with hazards only)
    for seed in range(100):             # ... never without: earlier seeds keep their kernels
        tree = ast.parse(F.generate(seed).source)
        funcs = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
        for w in (n for n in ast.walk(tree) if isinstance(n, ast.While)):
            assert not {ast.unparse(n.func) for n in ast.walk(w.test) if isinstance(n, ast.Call)} & funcs
    for needle in ("tk.atomic_add(E", "tk.uniform(f", " if ", " and ", " or ", "), v", "9223372036854775"):
        assert needle in text, needle
    assert "18446744073709551615" in text or "9223372036854775808" in text or "9223372036854775809" in text


@needs_cpu
def test_bounded_fuzz_run_with_hazards():
    summ = F.fuzz(range(30), ["CPU"], "INTERP", jobs=1, minimize_found=False,
                  opts=F.Options(hazards=4.0, prints=1.0))
    _no_mismatch(summ)
    assert summ.features.get("hazard", 0) >= 5 and summ.features.get("effect-func", 0) >= 10


def test_calls_are_generated_only_when_asked():
    """``Options.calls`` (calls.py, fuzz17) adds effect functions called from other functions, from
    collectives' arguments and uniform ``while`` conditions, default and keyword arguments, tuple
    returns in conditions, 2-D private arrays of small ints, small-int/float16 mixes, division by
    run-time 0/-1 and shifts by run-time amounts up to twice the width; off by default, so hazard
    seeds keep their kernels too."""
    new = ("effect-wrapper", "effect-in-func", "collective-effect", "uniform-while-effect", "uniform-while-nested",
           "default-arg", "keyword-arg", "tuple-cond", "private-2d", "small-mix", "div-edge", "shift-edge")
    for seed in range(60):
        c = F.generate(seed, F.Options(hazards=3.0))
        assert c.source == F.generate(seed, F.Options(hazards=3.0, calls=0.0)).source
        assert not set(new) & c.features
    feats, text = set(), ""
    for seed in range(120):
        c = F.generate(seed, F.Options(hazards=2.0, calls=2.0))
        feats |= c.features
        text += c.source
    assert set(new) <= feats, set(new) - feats
    for needle in ("tk.group_reduce(f", "and tk.uniform(bool(f", ") % 4 - 2)", "=0", "=True"):
        assert needle in text, needle
    assert re.search(r"tk\.private\((np|tk)\.u?int(8|16), \(\d+, \d+\)\)", text)


@needs_cpu
def test_bounded_fuzz_run_with_calls():
    summ = F.fuzz(range(70000000, 70000020), ["CPU"], "INTERP", jobs=1, minimize_found=False,
                  opts=F.Options(hazards=2.0, calls=2.0))
    _no_mismatch(summ)
    assert summ.features.get("effect-in-func", 0) >= 3 and summ.features.get("div-edge", 0) >= 3


def test_edges_are_generated_only_when_asked():
    """``Options.edges`` (edges.py, fuzz18) adds loops whose trip count is a kernel argument (mostly
    0 or negative), private arrays written by a function that calls a reader, and small ints with
    Python ints near their bounds; off by default, so calls/hazards seeds keep their kernels."""
    new = ("trip-arg", "trip-loop", "trip-minus", "trip-wrap", "trip-reused-name", "private-func", "private-func-call",
           "small-wrap")
    for seed in range(60):
        c = F.generate(seed, F.Options(hazards=2.0, calls=2.0))
        assert c.source == F.generate(seed, F.Options(hazards=2.0, calls=2.0, edges=0.0)).source
        assert not set(new) & c.features
    feats, text, zero = set(), "", 0
    for seed in range(200):
        c = F.generate(seed, F.Options(edges=3.0))
        feats |= c.features
        text += c.source
        trips = {a.name: a.value for a in c.args if a.kind == "scalar" and a.name.startswith("n")}
        zero += any(v == 0 and re.search(rf"range\({n}\)", c.source) for n, v in trips.items())
    assert set(new) <= feats, set(new) - feats
    assert zero >= 5                       # an argument of 0 straight in range(): the loop runs nothing
    assert re.search(r"= fw\d+\(pv\d+, ", text) and re.search(r"v = fr\d+\(P, q \+ s\)", text)


# fixed: gen-func-param-constant
def test_generator_casts_what_a_constant_argument_makes_a_constant_in_a_function():
    """A @tk.func's scalar parameter is the constant a call passes it (docs/language.md), so the
    generator treats it as possibly compile-time: an effect function's `E[i, 0] = int(p)` into a
    uint16 array, called with `tk.int64(7067838905617760850)`, folded to a Python int that does
    not fit, a CompileError on every backend and the interpreter alike (fuzzer seed 90001520,
    `--edges 1 --hazards 1 --calls 1 --bytes 1`: a ref-error). It is now stored through an
    explicit cast, which wraps."""
    case = F.generate(90001520, F.Options(edges=1.0, hazards=1.0, calls=1.0, bytes=1.0))
    assert re.search(r"E\d+\[tk\.index\(\), 0\] = tk\.uint16\(int\(p\d+\)\)", case.source), case.source
    F.run_case(case, INTERP)          # was: CompileError, Python integer ... out of bounds for uint16


@needs_cpu
def test_bounded_fuzz_run_with_edges():
    summ = F.fuzz(range(84000000, 84000020), ["CPU"], "INTERP", jobs=1, minimize_found=False,
                  opts=F.Options(edges=3.0))
    _no_mismatch(summ)
    assert summ.features.get("trip-loop", 0) >= 5 and summ.features.get("private-func-call", 0) >= 2


@needs_cpu
def test_bounded_fuzz_run_assigning_to_scalar_arguments():
    """``--params``: scalar arguments the kernel assigns to like locals. Before adx21's fix every
    compiled backend read a stale copy of an argument assigned in a loop; on that code seeds
    93000009 and 93000013 of this range disagreed with the interpreter on the CPU."""
    summ = F.fuzz(range(93000000, 93000020), ["CPU"], "INTERP", jobs=1, minimize_found=False,
                  opts=F.Options(params=1.0))
    _no_mismatch(summ)
    assert summ.features.get("param-assign", 0) >= 5


# fixed: for-var-retyped
@needs_cpu
def test_fuzz_seed_with_a_reused_loop_name_and_a_negative_trip_count():
    """Seed 84000184 (``--edges 3``) reuses an earlier unsigned local as the variable of
    ``range(n)`` with a negative Python int ``n``: before the fix the CPU counted the loop in the
    unsigned type and did not finish in 60 s."""
    case = F.generate(84000184, F.Options(edges=3.0))
    assert "trip-reused-name" in case.features
    _no_mismatch(F.fuzz([84000184], ["CPU"], "INTERP", jobs=0, minimize_found=False, opts=F.Options(edges=3.0)))


@tk.kernel
def k_trip_edges(o, n, m):
    i = tk.index()
    a = i + 10
    for j in range(n - 1):           # uint8 0 - 1 wraps to 255: 255 iterations
        a += 1
    b = i
    for j in range(m):               # m <= 0: no iteration, b keeps its value; m = 300: 300
        b += 1
    w = 0
    while w < m:
        w += 1
    o[i, 0] = a
    o[i, 1] = b
    o[i, 2] = w


# fixed: for-var-retyped
@pytest.mark.parametrize("m", [0, -2, np.int16(0), np.int64(-1), 300])
def test_trip_count_arguments_of_zero_and_wrapped_uint8(m):
    """What edges.py's trip loops check, by hand: the trip count is an argument, 0 or negative
    (no iteration: the locals keep their values from before the loop), and ``n - 1`` of a uint8 0
    is 255 (NEP 50: the weak 1 takes n's type, which wraps). The second loop reuses ``j``, which
    the first made uint8: until fuzz18 the compiled loop counted in uint8, so ``m = -2`` ran 254
    times and ``m = 300`` 44 (FIXED_BUGS ``for-var-retyped``)."""
    i = np.arange(3)
    trips = max(int(m), 0)
    _check_all(k_trip_edges, [np.full((3, 3), -7, np.int64)],
               np.stack([i + 10 + 255, i + trips, 0 * i + trips], axis=1),
               scalars=(np.uint8(0), m))


_GROUP_LOOP_ITEM_COND = textwrap.dedent("""
    import sys
    import numpy as np
    import tinykernels as tk

    @tk.kernel
    def k(o, n, m):
        li = tk.index()
        lm = tk.localmem(tk.float32, (4,))   # a grouped kernel: split at its (implicit) pieces
        w = 0
        while w < 5:                         # w is per item: the for loop below breaks divergently
            w += 1
            t = m                            # t looked uniform, which made the while group-level
            for j in range(n - 1):
                t = t + 1
            o[li] = t
        for w in range(6):
            if li > 100:
                break

    b = tk.backend(sys.argv[1])
    o = tk.zeros(7, tk.int32, backend=b)
    k(b)(o, np.int32(-2), np.int32(3), ndrange=7)
    tk.synchronize(b)
    assert o.numpy().tolist() == [3] * 7, o.numpy().tolist()
    print("ok")
""")


# fixed: group-loop-item-condition
def test_group_level_loop_with_a_per_item_condition_terminates(tmp_path):
    """Fuzzer seed 84000159 (``--edges 3 --calls 1``) hung on OpenCL: a ``while`` whose condition
    reads a per-item local (demoted from uniform because a later ``for`` reusing its name breaks
    divergently) was kept group-level because it assigned another local that looked uniform; the
    items past the ndrange ran it with their increments masked off and never left it. Each
    backend runs in a subprocess with a time limit, so a regression fails instead of hanging."""
    path = tmp_path / "group_loop_item_cond.py"
    path.write_text(_GROUP_LOOP_ITEM_COND)
    devs = ["INTERP"] + (["CPU"] if CPU_OK else []) + (["CL"] if CL_OK else []) + \
        (["WEBGPU"] if tk.backends()["WebGPU"][0] else [])
    for dev in devs:
        r = subprocess.run([sys.executable, str(path), dev], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "ok" in r.stdout, (dev, r.stdout, r.stderr[-2000:])


@tk.kernel
def k_divergent_for_var_barrier(o, x):
    li = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(tk.float32, (4,))
    j = 0
    for j in range(4):
        if x[li] > j:
            break                        # the items leave with different j
    if j > 1:
        tk.synchronize()
    o[li] = j


# fixed: divergent-for-var-uniform
def test_loop_variable_after_a_divergent_break_is_not_uniform():
    """A ``for`` variable after a break under a per-item condition differs between the items; the
    uniformity analysis counted it uniform, so a barrier under ``if j > 1`` compiled (and items
    skipped it: a divergent barrier, undefined on GPUs). Now the CompileError every backend gives
    for a barrier under non-uniform control."""
    for b in _backends():
        with pytest.raises(tk.CompileError, match="non-uniform control flow"):
            _run(k_divergent_for_var_barrier, b, [np.zeros(4, np.int32), np.array([0, 5, 5, 5], np.float32)],
                 workgroupsize=4)


def test_a_write_between_the_elements_of_a_strided_output_is_a_finding():
    """Strided outputs (``Options.strided_outputs``) are compared through their view, and the
    elements the view skips must keep their bytes (a store that streams whole blocks would not)."""
    from tinykernels.testing.fuzz import run as R
    init = np.arange(12, dtype=np.int32).reshape(2, 6)
    case = F.Case(-4, "", "k", [F.ArgSpec("o", "array", init, "out", tol=[0, 0, 0], view=2)], 2)
    _, arrays = R.make_args(case, tk.CPU() if CPU_OK else INTERP)
    arrays["o"][:] = -1                          # what a kernel may write: the view's elements
    R.check_gaps(case, arrays)
    arrays["o"].base[0, 1] = -1                  # a gap
    with pytest.raises(AssertionError, match="between the elements of the strided output 'o'"):
        R.check_gaps(case, arrays)


def test_captured_stdout_sees_python_and_file_descriptor_writes():
    from tinykernels.testing.fuzz import run as R
    sink = []
    with R.captured_stdout(sink):
        print("from python")
        os.write(1, b"from fd 1\n")
    assert sink == ["from python\nfrom fd 1\n"]
    assert R.printed_lines("b -nan 2\na nan\n") == ["a nan", "b nan 2"]


@needs_cpu
def test_a_printed_difference_is_a_finding(monkeypatch, tmp_path):
    """A CPU printf planted to print integers in hex: check_case reports the printed lines."""
    from tinykernels.codegen.clike import CLikeRenderer
    from tinykernels.testing.fuzz import run as R
    src = textwrap.dedent('''\
        import tinykernels as tk


        @tk.kernel
        def printer(o):
            li = tk.index()
            tk.print("P", li, li * 3, 0.5)
            o[li, 0] = li
        ''')
    case = F.Case(-2, src, "printer", [F.ArgSpec("o", "array", np.zeros((12, 1), np.int32), "out", tol=[0])], 12,
                  features={"print"})
    assert not F.check_case(case, ["CPU"], "INTERP")
    want = R.run_case(case, "INTERP")[R.PRINTED]
    assert want == sorted(f"P {i} {3 * i} 0.5" for i in range(12))
    fmts = dict(CLikeRenderer.print_formats, i=("%llx", "long long"))
    monkeypatch.setattr(CLikeRenderer, "print_formats", fmts)
    case = F.Case(-3, src.replace("printer", "planted_printer"), "planted_printer", case.args, 12,
                  features={"print"})          # a kernel not compiled before the planting
    ms = F.check_case(case, ["CPU"], "INTERP")
    assert [(m.kind, m.array) for m in ms] == [("value", R.PRINTED)]
    path = F.write_reproducer(case, str(tmp_path / "printer.py"), ms, ["CPU"])
    ns = {"__name__": "printer_repro", "__file__": path}
    exec(compile(open(path).read(), path, "exec"), ns)
    assert F.reproduce(ns, "planted_printer", verbose=False) == 1      # the reproducer compares the lines too


def test_ulp_comparison():
    want = np.array([[1.0, 1.0, np.nan, 0.0]], np.float32)
    got = np.array([[np.nextafter(np.float32(1), np.float32(2)), 1.0, np.nan, -0.0]], np.float32)
    assert F.compare_arrays("o", got, want, [0, 0, 0, 0]) == [((0, 0), repr(float(got[0, 0])), "1.0"),
                                                              ((0, 3), "-0.0", "0.0")]
    assert F.compare_arrays("o", got, want, [1, 0, 0, 1]) == []
    got64 = np.array([[1.0 + 2 ** -23]], np.float64)                # float32-computed, stored in float64
    assert F.compare_arrays("o", got64, np.array([[1.0]]), [(1, "float32")]) == []
    assert F.compare_arrays("o", got64, np.array([[1.0]]), [3]) != []
    assert F.compare_arrays("o", np.array([[np.nan]], np.float32), np.array([[1.0]], np.float32), [16]) != []


# ----------------------------------------------------------------------------- regression tests

def _run(kernel, backend, arrays, scalars=(), ndrange=None, workgroupsize=None, static_wg=None):
    """Launch with fresh copies of ``arrays`` (then ``scalars``); the arrays afterwards."""
    b = tk.backend(backend) if isinstance(backend, str) else backend
    dev = not getattr(b, "is_host", True)
    args = [tk.asarray(np.array(a), backend=b) if dev else np.array(a) for a in arrays]
    inst = kernel(b, static_wg) if static_wg else kernel(b)
    with np.errstate(all="ignore"):
        inst(*args, *scalars, ndrange=ndrange if ndrange is not None else len(arrays[0]),
             workgroupsize=workgroupsize).wait()
    return [a.numpy() if dev else a for a in args]


def _backends(cl=True):
    out = [INTERP]
    if CPU_OK:
        out.append("CPU")
    if cl and CL_OK:
        out.append("CL")
    return out


def _check_all(kernel, arrays, expected, index=0, cl=True, **kw):
    """Every backend (interpreter, CPU, CL) gives ``expected`` for output ``index``, bit for bit
    (NaN equal to NaN)."""
    bad = []
    for b in _backends(cl):
        got = _run(kernel, b, arrays, **kw)[index]
        e = np.asarray(expected, dtype=got.dtype)
        same = got.tobytes() == e.tobytes() or (got.dtype.kind == "f" and np.array_equal(got, e, equal_nan=True))
        if not same:
            bad.append(f"{b}: {got.tolist()} != {e.tolist()}")
    assert not bad, "; ".join(bad)


@tk.kernel
def k_weak_bool(o):
    i = tk.index()
    o[i, 0] = (i < 3) + (i < 5)                  # Python bools: 2, 1 or 0
    o[i, 1] = (i < 1) * 2 + tk.int8(100) + tk.int8(100)   # a Python int with int8: wraps in int8
    o[i, 2] = (not i) * 2 + tk.int8(100) + tk.int8(100)   # `not` gives a strong bool: int64
    o[i, 3] = (i < 4) - (i > 1) + (1 < i < 3)             # Python bools subtract; chains stay weak


# fixed: weak-bool
def test_bug_weak_bool():
    _check_all(k_weak_bool, [np.zeros((6, 4), np.int64)], [[2, -54, 202, 1], [2, -56, 200, 1], [2, -56, 200, 1],
                                                           [1, -56, 200, 0], [1, -56, 200, -1], [0, -56, 200, -1]])


@tk.kernel
def k_weak_int_fold(o):
    i = tk.index()
    o[i] = (2 ** 62 * 4) // 8 + i                # constants fold exactly, as in Python
    o[i] += (i + 2 ** 62) * 4 // 8 - 2 ** 61     # run time: 2**64 + 4i wraps to 4i in int64


# fixed: weak-int-fold
def test_bug_weak_int_fold():
    _check_all(k_weak_int_fold, [np.zeros(3, np.int64)], [0, 1, 3])   # 2**61 + i + i // 2 - 2**61


@tk.kernel
def k_pow_fastpath(o, x, e):
    i = tk.index()
    o[i, 0] = x[i] ** -1
    o[i, 1] = x[i] ** 0.5
    o[i, 2] = x[i] ** 2
    o[i, 3] = x[i] ** e[0]           # run-time exponents use C pow()
    o[i, 4] = x[i] ** e[1]
    o[i, 5] = x[i] ** e[2]
    o[i, 6] = tk.float32(x[i]) ** tk.float32(e[2])


# fixed: pow-fastpath
def test_bug_pow_fastpath():
    # 1/x and pow(x, -1) differ at the first, x*x and pow(x, 2) at the second value
    x = np.array([-1.6979398304606041, -2.0737810688814626, -0.0, -np.inf, 3.0], np.float64)
    e = np.array([-1.0, 0.5, 2.0, 0.0, 0.0], np.float64)
    o = np.zeros((5, 7), np.float64)
    with np.errstate(all="ignore"):
        x32 = x.astype(np.float32)
        want = np.stack([np.float64(1) / x, np.sqrt(x), x * x,                  # NumPy's scalar fast paths
                         *([a ** c for a in x] for c in e[:3]),     # C pow(), as NumPy's scalar power
                         [a ** np.float32(e[2]) for a in x32]], axis=1)
    _check_all(k_pow_fastpath, [o, x, e], want, cl=False)
    if CL_OK:           # OpenCL's pow() may differ from glibc's in the last bit; the fast paths may not
        got = _run(k_pow_fastpath, "CL", [o, x, e])[0]
        assert np.array_equal(got[:, :3], want[:, :3], equal_nan=True)
        assert np.allclose(got[:, 3:], want[:, 3:], rtol=1e-6, atol=0, equal_nan=True)


@tk.kernel
def k_fp8_int(o, x, y):
    i = tk.index()
    o[i] = x[i] + y[i]


# fixed: fp8-int-operand
def test_bug_fp8_int_operand():
    x = np.array([1.0, 3.0, 0.5, 7.0]).astype(ml_dtypes.float8_e4m3fn)
    y = np.array([17, 33, -19, 100], np.int8)
    # the int8 operand converted to the promoted type (fp8), the sum computed in float32, not rounded
    want = x.astype(np.float32) + y.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    _check_all(k_fp8_int, [np.zeros(4, np.float32), x, y], want)


@tk.kernel
def k_f16_scalar(o, x, h):
    i = tk.index()
    o[i] = x[i] - h


# fixed: f16-scalar-arg
def test_bug_float16_scalar_argument():
    h = np.float16(-59.4)
    x = np.array([18], np.uint8)
    want = np.float32(18) - np.float32(h)                      # float32 arithmetic, float64 store
    _check_all(k_f16_scalar, [np.zeros(1, np.float64), x], [want], scalars=(h,))


@tk.kernel
def k_fp8_minmax(o, x):
    i = tk.index()
    o[i, 0] = tk.group_reduce(x[i], "max")
    o[i, 1] = tk.group_reduce(x[i], "min")
    o[i, 2] = tk.group_scan(x[i], "max")


# fixed: fp8-minmax-identity
def test_bug_fp8_group_min_max():
    x = np.array([1, 2, -3, 4]).astype(ml_dtypes.float8_e4m3fn)
    _check_all(k_fp8_minmax, [np.zeros((4, 3), np.float32), x], [[4, -3, 1], [4, -3, 2], [4, -3, 2], [4, -3, 4]],
               workgroupsize=4)


@tk.kernel
def k_ndrange_in_for(o):
    i = tk.index()
    for j in range(5):
        o[i, j] = tk.ndrange()[0] + 100 * tk.ndrange()[1] + 10000 * tk.ndrange()[2]


@tk.kernel
def k_ndrange_in_for_grouped(o):
    i = tk.index()
    lm = tk.localmem(tk.int64, (8,))
    for j in range(np.int32(-2147483644), np.int32(-2147483648), -3):
        o[i] += 1
    tk.synchronize()


# fixed: ndrange-in-for
def test_bug_ndrange_inside_for_loop():
    _check_all(k_ndrange_in_for, [np.zeros((24, 5), np.int64)], np.full((24, 5), 40302), ndrange=(2, 3, 4))


# fixed: ndrange-in-for
def test_bug_ndrange_inside_for_loop_grouped_mask():
    _check_all(k_ndrange_in_for_grouped, [np.zeros(30, np.int64)], np.full(30, 2), ndrange=(2, 3, 5),
               workgroupsize=(2, 1, 4))


@tk.kernel
def k_tuple_swap(o):
    i = tk.index()
    a = i
    b = 10 + i
    a, b = b, a
    o[i, 0] = a
    o[i, 1] = b


# fixed: tuple-swap
def test_bug_tuple_swap():
    _check_all(k_tuple_swap, [np.zeros((2, 2), np.int64)], [[10, 0], [11, 1]])


@tk.kernel
def k_narrow_self_cast(o, x):
    i = tk.index()
    o[i, 0] = x[i] * x[i]                       # float32 intermediate, stored unrounded
    o[i, 1] = tk.float16(x[i] * x[i])           # rounded by the explicit cast
    v: tk.float16 = x[i] * x[i]                 # and by the annotation
    o[i, 2] = v


# fixed: narrow-self-cast
def test_bug_narrow_explicit_cast_rounds():
    x = np.array([1.0009765625, 3.1], np.float16)
    p = x.astype(np.float32) * x.astype(np.float32)
    r = p.astype(np.float16).astype(np.float32)
    _check_all(k_narrow_self_cast, [np.zeros((2, 3), np.float32), x], np.stack([p, r, r], axis=1))


@tk.kernel
def k_fma(o, a, b, c):
    i = tk.index()
    o[i] = tk.fma(a, b, c)


# fixed: fma-overflow
def test_bug_fma_overflow():
    _check_all(k_fma, [np.zeros(2, np.float64)], [np.inf, np.inf], scalars=(2.0, 1.7e308, 1.0))


@tk.func
def f_early(A):
    if np.bool_(2):
        return tk.uint32(0), (-np.uint8(127))
    return np.uint32(4294967295), (-tk.uint8(A[0]))


@tk.kernel
def k_func_return_grouped(o, x):
    li = tk.index()
    v32, v33 = f_early(x)
    tk.synchronize()
    o[li] = v33


# fixed: func-return-grouped
def test_bug_func_early_return_in_grouped_kernel():
    _check_all(k_func_return_grouped, [np.zeros(6, np.int64), np.array([5, 150], np.int64)], [129] * 6,
               workgroupsize=4, cl=False)


@tk.kernel
def k_const_mutation(o, x, C: tk.constexpr):
    i = tk.index()
    a = tk.int64(5) + C
    o[i] = (x[i] + C) * 100


# fixed: const-weak-mutation
def test_bug_constexpr_stays_weak():
    _check_all(k_const_mutation, [np.zeros(2, np.int64), np.array([1, 2], np.int8)], [-112, -12], scalars=(3,))


@tk.kernel
def k_uniform_after_return(o, x: tk.Const):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    v = x[i] * 2.0
    tk.synchronize()
    if lid == 0 or (lid == 1 and i > 4):
        return
    u = tk.uniform(v)
    w = tk.uniform(v + 1.0)
    o[i] = u + w * 100.0


# fixed: uniform-after-return
@pytest.mark.parametrize("backend", ["INTERP", "CPU", "CL", "WEBGPU"])
def test_bug_uniform_after_return_is_the_first_running_item(backend):
    """Groups of 4 over 10 items: item 0 of each group returned (and item 1 of the last two),
    so tk.uniform takes the value of the first item still running: 1 (group 0), 6 (group 1),
    nobody in group 2 (items 10, 11 lie past the ndrange)."""
    available = {"INTERP": True, "CPU": CPU_OK, "CL": CL_OK, "WEBGPU": tk.backends().get("WebGPU", (False,))[0]}
    if not available[backend]:
        pytest.skip(f"{backend} is not available")
    x = np.arange(10, dtype=np.float32)
    got = _run(k_uniform_after_return, backend, [np.zeros(10, np.float32), x], workgroupsize=4)[0]
    want = np.zeros(10, np.float32)
    want[1:4] = 2.0 + 3.0 * 100
    want[6:8] = 12.0 + 13.0 * 100
    np.testing.assert_array_equal(got, want)


_POCL_LOOP = textwrap.dedent('''\
    import numpy as np, tinykernels as tk

    @tk.kernel
    def k(o, s):
        li = tk.index()
        for w in range(2):
            o[li, 1] = tk.group_reduce(s, "add")
        o[li, 0] = 7

    b = tk.backend("CL")
    o = tk.asarray(np.zeros((31, 2), np.int64), backend=b)
    k(b)(o, np.uint32(3), ndrange=31, workgroupsize=16)
    r = o.numpy()
    assert (r[:, 0] == 7).all() and (r[:16, 1] == 48).all() and (r[16:, 1] == 45).all(), r
    print("ok")
    ''')


@needs_cl
# fixed: pocl-collective-loop
def test_bug_opencl_collective_in_loop(tmp_path):
    """In a subprocess: the driver bug aborts the process."""
    p = tmp_path / "pocl_loop.py"
    p.write_text(_POCL_LOOP)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(os.path.dirname(__file__), "..", "src")] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]))
    r = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-500:]


@tk.kernel
def k_const_nan(o, x):
    i = tk.index()
    o[i, 0] = math.tanh(tk.float32(math.nan))
    o[i, 1] = math.exp(tk.float32(math.nan))
    o[i, 2] = tk.float8_e4m3fn(7) // 1e10
    o[i, 3] = math.tanh(x[i])                    # the same at run time is right


@needs_cl
# fixed: cl-const-nan
def test_bug_opencl_constant_nan():
    got = _run(k_const_nan, "CL", [np.zeros((1, 4), np.float32), np.array([np.nan], np.float32)])[0]
    assert np.isnan(got).all(), got


@tk.kernel
def k_pow_one_nan(o):
    o[1] = 5.0
    o[0] = math.pow(tk.float32(1.0), math.nan)
    o[2] = math.pow(tk.float32(1.0), tk.float32(math.inf))
    o[3] = tk.float32(1.0) ** tk.float32(math.nan)
    o[4] = math.pow(tk.float8_e4m3fn(math.inf), tk.float8_e4m3fn(-math.inf))    # NaN ** NaN
    o[5] = math.pow(tk.float32(math.nan), tk.float32(0.0))
    o[6] = math.pow(tk.float32(2.0), tk.float32(math.nan))


@needs_cl
# fixed: pocl-const-pow-one-nan
def test_bug_opencl_pow_of_one_and_a_constant_nan():
    got = _run(k_pow_one_nan, "CL", [np.zeros(7, np.float32)])[0]
    assert got[:4].tolist() == [1.0, 5.0, 1.0, 1.0] and np.isnan(got[4]) and got[5] == 1.0 and np.isnan(got[6]), got


@tk.kernel
def k_log1p_tiny(o, x: tk.Const):
    i = tk.index()
    o[i] = math.log1p(x[i])


# fixed: pocl-log1p-tiny
def test_bug_opencl_log1p_of_subnormals():
    """log1p(x) is x for tiny x; PoCL 3.1 gave +0.0 for +-the smallest subnormal."""
    for dt in (np.float32, np.float64):
        s = np.finfo(dt).smallest_subnormal
        x = np.array([s, -s, 3 * s, np.finfo(dt).tiny / 3, -0.0], dt)
        _check_all(k_log1p_tiny, [np.zeros(5, dt), x], x)


@tk.kernel
def k_print_doubles(o, x: tk.Const, s):
    i = tk.index()
    o[i] = x[i]
    tk.print("P", i, 1e-40, 1e300, s, x[i], tk.float32(x[i]))


# fixed: pocl-printf-double
def test_bug_opencl_print_of_a_double_is_not_rounded_to_float32():
    """PoCL 3.1's printf read a double passed for %g as a float: 1e-40 printed 9.99995e-41,
    1e300 inf and 1e-310 0 (fuzzer seed 49910003); every backend prints what the interpreter does."""
    from tinykernels.testing.fuzz import run as R
    x = np.array([1e-310, -2.5e-39, 1e200, 0.1], np.float64)
    out = {}
    for b in _backends():
        sink = []
        with R.captured_stdout(sink):
            _run(k_print_doubles, b, [np.zeros(4), x], (1e-310,))
        out[b] = R.printed_lines(sink[0])
    assert out[INTERP][0] == "P 0 1e-40 1e+300 1e-310 1e-310 0", out[INTERP]
    assert all(v == out[INTERP] for v in out.values()), out


def test_regression_kernels_agree_on_the_interpreter_with_numpy():
    """The expected values above are the reference semantics: the interpreter gives them where its
    own bug is not involved."""
    assert _run(k_tuple_swap, INTERP, [np.zeros((2, 2), np.int64)])[0].tolist() == [[10, 0], [11, 1]]
    assert _run(k_weak_int_fold, INTERP, [np.zeros(3, np.int64)])[0].tolist() == [0, 1, 3]
    o = _run(k_const_mutation, INTERP, [np.zeros(2, np.int64), np.array([1, 2], np.int8)], scalars=(3,))[0]
    assert o.tolist() == [-112, -12]


@tk.kernel
def k_fma_inf(o, a, b, c):
    i = tk.index()
    o[i] = tk.fma(a, b, c)
    o[i] += tk.fma(tk.float32(-3e38), tk.float32(3e38), tk.float32(c))      # float32 too


# fixed: fma-inf-addend
def test_bug_fma_finite_product_plus_infinity():
    # the exact product of two finite numbers never overflows inside fma: -max * -max + -inf is -inf
    m = np.finfo(np.float64).max
    _check_all(k_fma_inf, [np.zeros(1, np.float64)], [-np.inf], scalars=(-m, -m, -np.inf))


@tk.kernel
def k_fma_f32_rows(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = tk.fma(a[i], b[i], c[i])


# fixed: fma-f32-max
# (fuzz seed 33004734: the interpreter raised OverflowError next to FLT_MAX)
def test_bug_fma_float32_rounds_at_the_overflow_boundary():
    # float32 results within half an ulp above FLT_MAX round to it, from half an ulp on to inf (the
    # tie goes to the even 2**128, i.e. inf); float64 holds every exact value here, so NumPy's
    # float64 -> float32 cast of it is the reference
    m, h = float(np.finfo(np.float32).max), 2.0 ** 103      # h: half an ulp of FLT_MAX
    a = np.array([-m, m, m, -m, -m, m], np.float32)
    b = np.array([-1, 1, 1, 1, 1, -1], np.float32)
    c = np.array([0.75, h, h - 2.0 ** 80, -h, -h + 2.0 ** 80, 1e30], np.float32)
    want = (a.astype(np.float64) * b + c).astype(np.float32)
    assert want.tolist() == [m, np.inf, m, -np.inf, -m, -m]
    _check_all(k_fma_f32_rows, [np.zeros(6, np.float32), a, b, c], want)


@tk.kernel
def k_const_pow(o):
    i = tk.index()
    o[i, 0] = tk.float32(-0.0) ** 0.5            # both constant: still the sqrt fast path
    o[i, 1] = (-0.0) ** 0.5                      # Python floats fold as Python: pow


# fixed: const-base-pow
def test_bug_constant_base_and_exponent_power():
    _check_all(k_const_pow, [np.zeros((1, 2), np.float32)], [[-0.0, 0.0]])


@tk.kernel
def k_const_floordiv_pow(o):
    i = tk.index()
    o[i, 0] = (False // (-3.75)) ** 0.5          # -0.0 ** 0.5, folded as Python: 0.0
    o[i, 1] = (1.5 % -1.0) + (7.0 // 2.0)        # Python float // and % fold too


# fixed: const-float-floordiv
def test_bug_constant_python_float_floordiv_folds():
    _check_all(k_const_floordiv_pow, [np.zeros((1, 2), np.float64)], [[0.0, -0.5 + 3.0]])


@tk.kernel
def k_zero_minus_int(o, x):
    i = tk.index()
    o[i, 0] = 0.0 - float(x[i])                  # GCC 12 folded this to -x: -0.0 for x == 0
    o[i, 1] = float(0) - int(x[i] * 0.5)


# fixed: gcc-zero-minus-int
def test_bug_zero_minus_converted_int_is_positive_zero():
    x = np.array([0, 3], np.int32)
    _check_all(k_zero_minus_int, [np.zeros((2, 2)), x], [[0.0, 0.0], [-3.0, -1.0]])


@tk.kernel
def k_folded_zero_minus(o, u, x):
    i = tk.index()
    # u[i] != u[i]: False, which GCC's folder sees within the one C expression (not a local's)
    o[i, 0] = (u[i] != u[i]) - tk.float32(u[i])  # GCC 12 folded 0.0 - (float)u to -(float)u
    o[i, 1] = (u[i] != u[i]) + -tk.float32(u[i])  # a + -b is a - b to GCC: the same fold
    o[i, 2] = -float(u[i]) + (u[i] != u[i])
    o[i, 3] = (u[i] != u[i]) - abs(x[i])         # fabs: never -0.0 to GCC either
    o[i, 4] = (u[i] != u[i]) - (2.0 if u[i] > 5 else 0.0)    # a ?: of constants
    o[i, 5] = tk.float64(u[i] - u[i]) - float(u[i])


# fixed: gcc-folded-zero-minus
def test_bug_zero_minus_where_gcc_folds_the_zero_keeps_positive_zero():
    """Fuzzer seed 88301372 (--fastmath 0.3 --rng 1 --print 1, fuzz19): `(io[i] != io[i]) -
    tk.float32(io[i])` stored -0.0 on the CPU for io[i] == 0 (NumPy +0.0): GCC folds `x != x` to 0
    and then, in the same C expression, `0.0 - (float)u` to `-(float)u` (gcc-zero-minus-int's fold
    with a zero the renderer cannot see). Signs checked bit for bit against NumPy."""
    u = np.array([0, 1, 0, 7], np.uint8)
    x = np.array([-0.0, 1.5, 0.0, -2.5])
    with np.errstate(all="ignore"):
        z = u != u
        want = np.stack([z - u.astype(np.float32), z + -u.astype(np.float32), -u.astype(np.float64) + z,
                         z - np.abs(x), z - np.where(u > 5, 2.0, 0.0), (u - u).astype(np.float64) - u], axis=1)
    assert not np.signbit(want[[0, 2], :]).any() and (want[3] < 0).all()
    for b in _backends():
        got = _run(k_folded_zero_minus, b, [np.full((4, 6), 9.0), u, x])[0]
        assert got.tolist() == want.tolist() and (np.signbit(got) == np.signbit(want)).all(), (str(b), got)


@tk.kernel
def k_fma_narrow_zero(o):
    i = tk.index()
    # fma of fp8 values whose exact result is 0 stays fp8, so a Python float meeting it rounds to fp8
    o[i, 0] = math.atan2(tk.fma(0.0, 3.0, tk.float8_e4m3fn(1e-10)), 1e300)
    o[i, 1] = np.float16(-math.inf) ** 0.5       # a narrow constant base: the sqrt fast path (NaN)
    o[i, 2] = np.float16(-0.0) ** 0.5            # -0.0


# fixed: fma-narrow-zero
# fixed: narrow-const-pow
def test_bug_fma_narrow_zero_and_narrow_constant_power():
    got = _run(k_fma_narrow_zero, INTERP, [np.zeros((1, 3), np.float32)])[0]
    _check_all(k_fma_narrow_zero, [np.zeros((1, 3), np.float32)], got)
    assert np.isnan(got[0, 0]) and np.isnan(got[0, 1]) and got[0, 2] == 0 and np.signbit(got[0, 2])


@tk.func
def f_early_exit(v):
    if v > 2:
        return 7.0
    return 1.0


@tk.kernel
def k_func_exit_in_barrier_loop(o, x):
    i = tk.index()
    for r in range(3):
        o[i] += f_early_exit(x[i])               # a divergent early return, but not out of the loop
        tk.synchronize()


# fixed: func-exit-barrier-loop
def test_bug_func_early_return_in_a_loop_with_barriers():
    x = np.arange(8, dtype=np.float32)
    _check_all(k_func_exit_in_barrier_loop, [np.zeros(8, np.float32), x], np.where(x > 2, 21.0, 3.0),
               workgroupsize=4)


@tk.func
def f_exit_then_sync(v):
    if v > 2:
        return 7.0
    tk.synchronize()
    return 1.0


@tk.kernel
def k_func_exit_skips_barrier(o, x):
    i = tk.index()
    for r in range(3):
        o[i] += f_exit_then_sync(x[i])


def test_divergent_return_that_skips_a_barrier_in_a_loop_is_a_compile_error():
    with pytest.raises(tk.CompileError, match="return depends on the work item"):
        k_func_exit_skips_barrier(tk.CPU())(np.zeros(8, np.float32), np.arange(8, dtype=np.float32), ndrange=8,
                                            workgroupsize=4)


@tk.kernel
def k_atomic_in_uniform_if_with_barrier(acc, o, s):
    i = tk.index()
    u = s != tk.groupsize()[0]
    o[i] = u
    if u:                                        # uniform, holds a barrier: group-level code
        tk.atomic_sub(acc, 1, 2)                 # masked-off items of the partial group must not run it
        tk.synchronize()


@needs_cl
# fixed: pocl-barrier-if-mask
def test_bug_opencl_masked_items_skip_atomics_in_an_if_with_a_barrier():
    for wg in (None, 16):
        got = _run(k_atomic_in_uniform_if_with_barrier, "CL", [np.zeros(3, np.int64), np.zeros(31, np.int64)],
                   scalars=(3,), ndrange=31, workgroupsize=wg)[0]
        assert got.tolist() == [0, -62, 0], (wg, got)


@tk.kernel
def k_round_const_nan(o):
    i = tk.index()
    o[i, 0] = math.floor(tk.float8_e4m3fn(65504.0))     # fp8 e4m3fn has no inf: NaN
    o[i, 1] = math.trunc(math.nan)
    o[i, 2] = math.ceil(tk.float32(math.nan))


@needs_cl
# fixed: cl-const-nan-round
def test_bug_opencl_floor_ceil_trunc_of_constant_nan():
    got = _run(k_round_const_nan, "CL", [np.zeros((1, 3), np.float32)])[0]
    assert np.isnan(got).all(), got


@tk.kernel
def k_round_const_to_int(o):
    i = tk.index()
    o[i, 0] = 7
    o[i, 1] = round(tk.float32(10000000000.0))    # folded now; PoCL dropped the whole kernel
    o[i, 2] = round(2.5) + round(-3.5)            # half to even, as rint


# fixed: pocl-round-const-int64
def test_bug_round_of_a_constant_float_to_int64():
    _check_all(k_round_const_to_int, [np.zeros((1, 3), np.int64)], [[7, 10000000000, -2]])


@tk.kernel
def k_round_narrow_const(o, a):
    i = tk.index()
    tk.atomic_xor(a, round(tk.bfloat16(10000000000.0)) % 2, 3)   # bf16/fp8 casts of constants fold too
    o[i] = round(tk.bfloat16(10000000000.0)) + round(tk.float8_e4m3fn(300.0))


# fixed: pocl-round-narrow-const
def test_bug_round_of_a_narrow_float_constant():
    want = int(np.float32(1e10).astype(ml_dtypes.bfloat16).astype(np.float64)) + 288
    _check_all(k_round_narrow_const, [np.zeros(4, np.int64), np.zeros(2, np.int64)], [want] * 4)


@tk.kernel
def k_pocl_clamp_round(o):
    i = tk.index()
    o[i, 0] = 7
    o[i, 1] = round(tk.clamp(10000000000.0, 4.611686018427388e+18, 4.611686018427388e+18))


@tk.kernel
def k_pocl_rint_forms(o, f: tk.Const):
    i = tk.index()
    o[i, 0] = 7
    o[i, 1] = round(tk.clamp(1e300, -4.611686018427388e+18, 4.611686018427388e+18))
    o[i, 2] = 1 if round(tk.clamp(tk.float32(3e9), tk.float32(0.0), tk.float32(4e9))) > 0 else 2
    o[i, 3] = round(max(tk.float32(1e10), tk.float32(2.0)))
    o[i, 4] = round(min(f[0] * 0.0 + 2.5, 1e20))          # run-time value below 2**52: still rint, half to even
    o[i, 5] = round(tk.clamp(-1e300, -4.611686018427388e+18, 0.0))


# fixed: pocl-const-rint-int64
@needs_cl
def test_bug_opencl_round_of_a_clamped_constant():
    got = _run(k_pocl_clamp_round, "CL", [np.zeros((1, 2), np.int64)])[0]
    assert got.tolist() == [[7, 4611686018427387904]], got
    want = [[7, 4611686018427387904, 1, 10000000000, 2, -4611686018427387904]]
    _check_all(k_pocl_rint_forms, [np.zeros((1, 6), np.int64), np.ones(1, np.float64)], want[0])


POCL_HANG = textwrap.dedent("""
    import numpy as np
    import tinykernels as tk

    @tk.kernel
    def k(o, acc):
        i = tk.index()
        tk.atomic_min(acc, 0, tk.float32(i % 33 - 16))
        if round(tk.clamp(1e300, -4.611686018427388e+18, 4.611686018427388e+18) if 1e300 == 1e300 else 0.0) > -i:
            tk.atomic_min(acc, 1, tk.float32(-3.0))
        o[i] = 7

    cl = tk.backend("CL")
    o, acc = tk.zeros(64, tk.int64, backend=cl), tk.zeros(2, tk.float32, backend=cl)
    k(cl)(o, acc, ndrange=64)
    tk.synchronize(cl)
    assert (o.numpy() == 7).all() and acc.numpy().tolist() == [-16.0, -3.0], (o.numpy(), acc.numpy())
    print("ok")
""")


# fixed: pocl-const-rint-int64 (the hang of seed 700034, --no-narrow)
@needs_cl
def test_bug_opencl_rint_of_a_huge_constant_beside_a_float_atomic_does_not_hang(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(POCL_HANG)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


class HangingBackend:
    """A backend whose every use blocks (picklable: the worker process gets it)."""
    name = "HANG"

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        import time
        time.sleep(600)


def test_one_job_runs_in_a_worker_process_so_a_hang_times_out():
    t0 = time.monotonic()
    summ = F.fuzz([0], [HangingBackend()], "INTERP", jobs=1, minimize_found=False, timeout=5)
    assert summ.count == 1 and summ.timeouts == 1 and summ.mismatches[0].kind == "timeout"
    assert time.monotonic() - t0 < 60


def test_a_batch_that_hangs_is_checked_again_seed_by_seed():
    """A batch whose worker hangs is not reported as a whole: its seeds are checked again one
    by one, so each timeout names its own seed."""
    summ = F.fuzz([0, 1], [HangingBackend()], "INTERP", jobs=1, minimize_found=False, timeout=3, batch=2)
    assert summ.count == 2 and summ.timeouts == 2
    assert sorted(m.seed for m in summ.mismatches) == [0, 1] and {m.kind for m in summ.mismatches} == {"timeout"}


@needs_cpu
def test_generator_finds_a_stale_barrier_loop_counter(monkeypatch):
    """Issue 10 item 5's class: a uniform loop holding a barrier that reuses a per-item name as
    its counter. With the fix in passes/groups.py planted out again, kernels the generator makes
    for this class (feature 'reused-item-name', counter traced per item) disagree with the
    interpreter. Searches seeds rather than naming one, so generator changes don't blind it."""
    from tinykernels.passes import groups
    monkeypatch.setattr(groups, "_item_counters", lambda stmts, *a, **k: list(stmts))
    tried = found = 0
    for seed in range(9300000, 9302000):
        case = F.generate(seed)
        if "reused-item-name" not in case.features or "counter-trace" not in case.features:
            continue
        tried += 1
        if F.check_case(case, ["CPU"], "INTERP"):
            found += 1
            break
        if tried >= 12:
            break
    assert tried, "the generator no longer makes uniform loops that reuse a per-item name"
    assert found, f"none of {tried} kernels of the class showed the planted bug"




# ----------------------------------------------------------------------------- fastmath cases

# fixed: interp-int-pow-negative-type
@tk.kernel
def pow_negative_exponent_keeps_the_type(out, x: tk.Const, e: tk.Const):
    i = tk.index()
    v = np.bool_(2) ** e[i]              # True to a negative power: 1 (docs/language.md)
    v ^= 128                             # int16 129 (an int64 one made the power below not wrap)
    w = np.uint8(3) ** e[i]              # uint8 with int16: int16 (NumPy's promotion)
    w += 32767
    out[i] = x[i] ** v + (w + np.int16(1))   # wraps to -32768 in int16, not in int64


@pytest.mark.parametrize("b", [tk.CPU(), INTERP], ids=lambda b: b.name)
def test_bug_interp_int_pow_negative_keeps_the_promoted_type(b):
    if b is not INTERP and not CPU_OK:
        pytest.skip("no C compiler for the CPU backend")
    # seed 17180765: the interpreter's fallback for NumPy's refusal of a negative integer power
    # (`a * 0 + b * 0`) made bool ** int16 an int64, so `x ** v` did not wrap in int16 (CPU
    # -28159 = int16(-19) ** 128, INTERP 8.2e17, inf once stored to float16).
    x = np.array([-19, -4, 3, 7], np.int16)
    e = np.array([-3, -1, -7, -2], np.int16)
    out = np.zeros(4, np.int16)
    pow_negative_exponent_keeps_the_type(b)(out, x, e, ndrange=4)
    tk.synchronize(b)
    with np.errstate(over="ignore"):
        want = x ** np.int16(129) + (np.int16(32767) + np.int16(1))
    np.testing.assert_array_equal(out, want)


import ast  # noqa: E402

from tinykernels.testing.fuzz import fastmath as FM  # noqa: E402

FM_SEEDS = [s for s in range(400) if FM.is_fastmath_seed(s, F.Options())][:16]


def test_fastmath_cases_are_a_fraction_of_the_seeds():
    assert 10 <= len([s for s in range(400) if FM.is_fastmath_seed(s, F.Options())]) <= 80
    assert not any(FM.is_fastmath_seed(s, F.Options(fastmath=0.0)) for s in range(400))
    feats = set()
    for s in FM_SEEDS:
        c = F.generate(s)
        assert "@tk.kernel(fastmath=True)" in c.source and c.mag_kname and "fastmath" in c.features
        feats |= c.features
    assert {"grouped", "flat", "collective", "float32", "float64"} <= feats


@needs_cpu
def test_bounded_fuzz_run_with_fastmath_cases_cpu():
    summ = F.fuzz(FM_SEEDS, ["CPU"], "INTERP", jobs=1, minimize_found=False)
    _no_mismatch(summ)
    assert summ.count == len(FM_SEEDS)


def _fm_outputs(case, source):
    """(got, want, mag) of the case's float output: ``source`` (a mutated kernel) on the
    interpreter against the case itself."""
    mutated = F.Case(case.seed, source, case.kname, case.args, case.ndrange, case.workgroupsize,
                     case.static_wg, mag_kname=case.mag_kname)
    got = F.run_case(mutated, INTERP)
    want = F.run_case(case, INTERP)
    mag = F.run_case(case, INTERP, F.load_kernel(case.source, case.mag_kname))
    return got, want, mag


def _mutate_kernel(case, transformer):
    """The case's module with ``transformer`` applied to its fastmath kernel only (the magnitude
    kernel, the reference's tolerance, stays as generated)."""
    tree = ast.parse(case.source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == case.kname:
            transformer.visit(node)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _float_loop(node):
    """A plain ``for j in range(L)`` accumulating a float (not the integer recurrence)."""
    return (isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and len(node.iter.args) == 1
            and not any(isinstance(t, ast.Name) and t.id == "ia"
                        for s in node.body for t in getattr(s, "targets", [getattr(s, "target", None)])))


class _Contract(ast.NodeTransformer):
    """What a fastmath compile may do: ``a * b + c`` into ``tk.fma(a, b, c)``, sums reversed."""

    def visit_Assign(self, node):
        if any(isinstance(t, ast.Name) and t.id == "ia" for t in node.targets):
            return node                   # the integer recurrence: no floats, nothing to contract
        return self.generic_visit(node)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Add) and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mult):
            return ast.Call(ast.Attribute(ast.Name("tk", ast.Load()), "fma", ast.Load()),
                            [node.left.left, node.left.right, node.right], [])
        return node

    def visit_For(self, node):
        self.generic_visit(node)
        if _float_loop(node):
            n = node.iter.args[0]
            node.iter.args = [ast.BinOp(n, ast.Sub(), ast.Constant(1)), ast.Constant(-1), ast.Constant(-1)]
        return node


class _DropLastTerm(ast.NodeTransformer):
    """A real bug: the first float accumulation loop skips its last iteration."""
    done = False

    def visit_For(self, node):
        if not self.done and _float_loop(node):
            self.done = True
            node.iter.args = [ast.BinOp(node.iter.args[0], ast.Sub(), ast.Constant(1))]
        return node


def test_fastmath_tolerance_accepts_contraction_and_reassociation():
    changed = 0
    for s in FM_SEEDS:
        case = F.generate(s)
        got, want, mag = _fm_outputs(case, _mutate_kernel(case, _Contract()))
        tol = next(a.tol for a in case.args if a.name == "out")
        assert not F.compare_arrays("out", got["out"], want["out"], tol, mag["out"]), case.describe()
        assert got["iout"].tobytes() == want["iout"].tobytes()
        changed += got["out"].tobytes() != want["out"].tobytes()
    assert changed >= 4, changed          # the planted rewrites really changed the last bits


def test_fastmath_tolerance_still_catches_a_real_bug():
    caught = tried = 0
    for s in FM_SEEDS:
        case = F.generate(s)
        t = _DropLastTerm()
        src = _mutate_kernel(case, t)
        if not t.done:
            continue
        tried += 1
        got, want, mag = _fm_outputs(case, src)
        tol = next(a.tol for a in case.args if a.name == "out")
        if got["out"].tobytes() != want["out"].tobytes():
            caught += bool(F.compare_arrays("out", got["out"], want["out"], tol, mag["out"]))
            assert caught, case.describe()
    assert tried >= 3 and caught >= 3, (tried, caught)


def test_fastmath_tolerance_is_bounded_by_the_magnitudes():
    k, w = 10, np.array([1.0, -1.0, 0.0], np.float32)
    mag = np.array([4.0, 4.0, 1e-30], np.float32)
    slack = 2 * k * float(np.finfo(np.float32).eps) / 2 * 4.0
    ok = FM.fm_tolerance(w + np.float32(slack * 0.9), w, mag, k)
    assert ok[:2].all()
    assert not FM.fm_tolerance(w + np.float32(slack * 1.5), w, mag, k)[:2].any()
    assert FM.fm_tolerance(np.array([np.nan]), np.array([np.nan]), np.array([1.0]), 1).all()
    assert not FM.fm_tolerance(np.array([np.nan]), np.array([1.0]), np.array([1.0]), 1).any()
    g, w2 = np.array([[1.0000001]], np.float32), np.array([[1.0]], np.float32)
    assert not F.compare_arrays("o", g, w2, [("fm", 10)], np.array([[4.0]], np.float32))
    assert F.compare_arrays("o", g, w2, [("fm", 10)], None)          # no magnitudes: bit for bit


@needs_cpu
def test_fastmath_reproducer_keeps_the_tolerance(tmp_path):
    case = F.generate(FM_SEEDS[0])
    path = F.write_reproducer(case, str(tmp_path / "fm.py"), (), ["CPU"])
    ns = {"__name__": "fm_repro", "__file__": path}
    exec(compile(open(path).read(), path, "exec"), ns)
    c = F.case_from_namespace(ns, case.kname)
    assert c.mag_kname == case.mag_kname
    assert F.reproduce(ns, case.kname, verbose=False) == 0


def test_interpreter_runs_fastmath_cases_exactly_as_written():
    """The reference ignores fastmath: the same kernel without it gives the same bits."""
    for s in FM_SEEDS[:6]:
        case = F.generate(s)
        plain = case.source.replace("@tk.kernel(fastmath=True)", "@tk.kernel")
        got, want, _ = _fm_outputs(case, plain)
        assert got["out"].tobytes() == want["out"].tobytes() and got["iout"].tobytes() == want["iout"].tobytes()


def test_predicates_of_python_ints_count_as_possible_constants():
    """``math.isfinite(i)`` of an int folds to a constant whatever ``i`` is, so a store of an
    expression built on it is cast explicitly (seed 61004497 stored the folded Python int -2 into
    a uint32 array: a CompileError on every backend, reported as a mismatch)."""
    g = F.generate(61004497)
    assert "math.isfinite(g33)" in g.source and not F.check_case(g, ["CPU"], "INTERP")


@tk.kernel
def k_pow_neg_inf(o, x, y):
    i = tk.index()
    o[i, 0] = math.pow(x[i], y[i])
    o[i, 1] = x[i] ** y[i]
    o[i, 2] = math.pow(tk.float16(x[i]), tk.float16(y[i]))


# fixed: pow-neg-inf
# (fuzz seed 34003700: math.pow(C // -0.0, x) gave NaN on the interpreter, inf on the CPU)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bug_pow_of_negative_infinity_follows_c99(dt):
    # pow(-inf, y): +inf for y > 0 not an odd integer, -inf for odd y > 0, +0 / -0 for y < 0,
    # as C99 Annex F and math.pow say; NumPy's scalar power gives NaN for y = 0.5, 2.5
    y = np.array([0.5, 2.5, 3.0, 2.0, -0.5, -3.0, 0.0], dt)
    x = np.full(y.shape, -np.inf, dt)
    want = np.array([math.pow(-math.inf, float(v)) for v in y])
    assert want.tolist() == [math.inf, math.inf, -math.inf, math.inf, 0.0, -0.0, 1.0]
    _check_all(k_pow_neg_inf, [np.zeros((7, 3), dt), x, y], np.repeat(want[:, None], 3, axis=1))


# fixed: pow-neg-zero
# (found by audit6's edge-value sweep of the math functions: math.pow(-0.0, 0.5) gave -0.0 on
# the interpreter, +0.0 on the CPU)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bug_pow_of_negative_zero_follows_c99(dt):
    # pow(-0, y): +0 for y > 0 not an odd integer, -0 for odd y > 0, -inf / +inf for y < 0, as
    # C99 Annex F and math.pow say; NumPy's scalar power takes sqrt(-0) = -0 for y = 0.5
    y = np.array([0.5, 2.5, 3.0, 2.0, -0.5, -3.0, 0.0, 1.0], dt)
    x = np.full(y.shape, -0.0, dt)
    want = np.array([math.pow(-0.0, float(v)) if v >= 0 else (-math.inf if v == -3 else math.inf) for v in y])
    assert np.signbit(want).tolist() == [False, False, True, False, False, True, False, True]
    expected = np.repeat(want[:, None], 3, axis=1)
    _check_all(k_pow_neg_inf, [np.zeros((8, 3), dt), x, y], expected)
    for b in _backends():                    # _check_all takes -0.0 == +0.0: the signs too
        got = _run(k_pow_neg_inf, b, [np.zeros((8, 3), dt), x, y])[0]
        assert np.signbit(got).tolist() == np.signbit(expected).tolist(), b


@tk.kernel
def k_signed_nan_const(o, x):
    i = tk.index()
    o[i, 0] = math.copysign(tk.float8_e4m3fn(2.0), -math.inf)
    o[i, 1] = math.copysign(x[i], -math.nan)
    o[i, 2] = math.copysign(x[i], tk.float8_e4m3fn(-math.inf))


# fixed: signed-nan-const
# (audit8's fuzz run, seed 37304320: a folded -NaN rendered as NAN in C, so copysign took +)
def test_bug_folded_negative_nan_keeps_its_sign():
    # float8_e4m3fn has no infinity: -inf rounds to -NaN, whose sign copysign passes on
    x = np.array([2.0, 0.5, 3.0], np.float32)
    want = np.repeat(-x[:, None], 3, axis=1)
    want[:, 0] = -2.0
    _check_all(k_signed_nan_const, [np.zeros((3, 3), np.float32), x], want)


WEBGPU_OK = tk.backends().get("WebGPU", (False,))[0]
needs_webgpu = pytest.mark.skipif(not WEBGPU_OK, reason="no WebGPU adapter")


@tk.kernel
def k_wgsl_zero_const(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = tk.float8_e4m3fn(1000) * tk.float8_e4m3fn(-0.0)     # NaN * -0.0 (e4m3fn has no inf)
    o[i, 1] = tk.float16(1e6) * tk.float16(-0.0)                   # inf * -0.0
    o[i, 2] = math.atan(tk.float8_e4m3fn(1000) * tk.float8_e4m3fn(-0.0))
    o[i, 3] = x[i] + tk.float32(0.0)                               # -0.0 + 0.0 is +0.0, not x
    o[i, 4] = x[i] * 0.0


# fixed: wgsl-zero-const-fold
# (fuzzer seed 44001016, WebGPU profile: lavapipe's NIR folded x * 0.0 to 0.0 for NaN and inf)
@needs_webgpu
def test_bug_wgsl_zero_constant_is_not_folded():
    x = np.array([-0.0, np.inf, np.nan, 2.0], np.float32)
    got = _run(k_wgsl_zero_const, "WEBGPU", [np.zeros((4, 5), np.float32), x])[0]
    want = _run(k_wgsl_zero_const, INTERP, [np.zeros((4, 5), np.float32), x])[0]
    assert np.isnan(got[:, :3]).all()
    assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True), (got, want)
    assert np.signbit(got[:, 3]).tolist() == [False] * 3 + [False] and np.isnan(got[2, 4])


@tk.kernel
def k_wgsl_packed_unused(o, h, b8):
    i = tk.index()
    o[i] = tk.float32(i) * 2.0         # h (bfloat16) and b8 (fp8) are never touched


# fixed: wgsl-packed-helper-lib
# (fuzzer seeds 44001000 and 44001018: the packed helpers of an unused bfloat16 array failed to compile)
@needs_webgpu
def test_bug_wgsl_unused_packed_arrays_compile():
    o = np.zeros(4, np.float32)
    h = np.zeros(4, ml_dtypes.bfloat16)
    b8 = np.zeros(4, ml_dtypes.float8_e5m2)
    got = _run(k_wgsl_packed_unused, "WEBGPU", [o, h, b8])[0]
    assert got.tolist() == [0.0, 2.0, 4.0, 6.0]


@tk.kernel
def k_f32_const_overflow(o, x):
    i = tk.index()
    o[i] = x[i] * 1e300                # a weak Python float: float32 where Python floats are 32-bit


# fixed: c-f32-const-overflow
# (WebGPU profile seeds 44001005 and 44001012: the CPU32 reference rendered 1e300 as `inff`)
@needs_cpu
def test_bug_c_float32_constant_beyond_range_is_infinity():
    from tinykernels.testing.fuzz.weak32 import CPU32
    x = np.array([1.0, -2.0, 0.0], np.float32)
    got = _run(k_f32_const_overflow, CPU32(), [np.zeros(3, np.float32), x])[0]
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    if WEBGPU_OK:
        assert _run(k_f32_const_overflow, "WEBGPU", [np.zeros(3, np.float32), x])[0].tobytes() == got.tobytes()


@tk.kernel
def k_c_weak_int32_shape_index(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    o[i, 0] = int(x[i]) * (-8 * y.shape[0])      # weak int32 (WebGPU's Python ints): wraps
    o[i, 1] = (i + 1073741824) * 4


# fixed: c-weak-int32-shape-index
# (fuzzer seed 88700350, WebGPU profile with --edges: CPU32 computed int(x) * A.shape[0] in 64 bits)
@needs_cpu
def test_bug_c_shapes_and_indices_keep_their_32_bit_type():
    from tinykernels.testing.fuzz.weak32 import CPU32
    x = np.array([3379964676, 5, 2 ** 31 + 7, 1811939328], np.uint32)
    y = np.zeros(7, np.bool_)
    with np.errstate(over="ignore"):
        want = np.stack([x.view(np.int32) * np.int32(-56), (np.arange(4, dtype=np.int32) + np.int32(2 ** 30)) * np.int32(4)],
                        axis=1).astype(np.float32)
    got = _run(k_c_weak_int32_shape_index, CPU32(), [np.zeros((4, 2), np.float32), x, y], ndrange=4)[0]
    np.testing.assert_array_equal(got, want)
    if WEBGPU_OK:
        np.testing.assert_array_equal(_run(k_c_weak_int32_shape_index, "WEBGPU", [np.zeros((4, 2), np.float32), x, y],
                                           ndrange=4)[0], want)


@tk.kernel
def k_wgsl_trig_range(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = math.sin(x[i])
    o[i, 1] = math.cos(x[i])
    o[i, 2] = math.tan(x[i])


# fixed: wgsl-trig-range
# (fuzzer seed 46400006, WebGPU profile: tan(np.float32(1e10)) gave -1.0 against CPU32's -0.558)
@needs_webgpu
def test_bug_wgsl_trig_of_large_arguments():
    x = np.array([1.0, 4.0, 1e5, 3.3e7, 1e8, 1e9, 1e10, 1e30, -3e38], np.float32)
    got = _run(k_wgsl_trig_range, "WEBGPU", [np.zeros((len(x), 3), np.float32), x])[0]
    want = np.stack([np.sin(x), np.cos(x), np.tan(x)], 1)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (got, want)


# fixed: wgsl-trig-zeros
# (cos(3 pi/2) 6 ulp off on lavapipe: the builtins' own reduction below 8192)
@needs_webgpu
def test_bug_wgsl_trig_next_to_zeros():
    x = np.float32([3 * np.pi / 2, np.pi, 2238.3848, 4476.7695, 252.89821])
    got = _run(k_wgsl_trig_range, "WEBGPU", [np.zeros((len(x), 3), np.float32), x])[0]
    x64 = x.astype(np.float64)
    want = np.stack([np.sin(x64), np.cos(x64), np.tan(x64)], 1).astype(np.float32)
    ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want)).astype(np.float64)
    assert ulps.max() <= 3, (got, want, ulps)


@tk.kernel
def k_wgsl_repeated_operand(o, f, a: tk.Const, b: tk.Const):
    i = tk.index()
    o[i] = np.uint32(tk.clamp(a[i] // b[i], 0.0, 256.0))
    f[i] = max(min(a[i] % b[i], 2.0), -2.0)


# fixed: wgsl-repeated-operand
# (fuzzer seed 46400086, WebGPU profile: no result in 200 s; lavapipe compiling 39 inlined
# copies of tk_floordiv_f32)
@needs_webgpu
def test_bug_wgsl_operand_used_twice_is_rendered_once():
    src = k_wgsl_repeated_operand(tk.WebGPU()).source(
        np.zeros(8, np.uint32), np.zeros(8, np.float32), np.ones(8, np.float32), np.ones(8, np.float32), ndrange=8)
    body = src[src.index("@compute"):]
    assert body.count("tk_floordiv_f32(") == 1 and body.count("tk_mod_f32(") == 1, body
    a = np.array([7.0, -7.0, 300.5, 3.0, 1.0, 5.0, -0.5, 9.0], np.float32)
    b = np.array([2.0, 2.0, 1.0, 1.0, 0.0, np.inf, 3.0, -4.0], np.float32)
    got, gotf = _run(k_wgsl_repeated_operand, "WEBGPU", [np.zeros(8, np.uint32), np.zeros(8, np.float32), a, b])[:2]
    want, wantf = _run(k_wgsl_repeated_operand, "CPU", [np.zeros(8, np.uint32), np.zeros(8, np.float32), a, b])[:2]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(gotf, wantf)


@tk.kernel
def k_wgsl_repeated_int_operands(o, c, a: tk.Const, b: tk.Const, u: tk.Const):
    i = tk.index()
    o[i] = (a[i] // b[i]) >> (a[i] % b[i])          # a run-time shift: value and amount used twice
    c[i] = tk.int32(u[i] // 3 < a[i] // b[i])        # uint32 vs int32: compare32 uses its int side twice


# fixed: wgsl-repeated-operand (the renderer's other repeats: a run-time shift's value and
# amount, compare32's signed side)
@needs_webgpu
def test_bug_wgsl_shift_and_mixed_compare_operands_are_rendered_once():
    a = np.array([7, -7, 300, -3, 1, 5, -1, 9, 2**31 - 1, -2**31], np.int32)
    b = np.array([2, 2, 7, 5, 3, 9, 4, -4, 40, -3], np.int32)
    u = np.array([0, 1, 2**32 - 1, 5, 9, 2**31, 3, 7, 12, 100], np.uint32)
    arrays = [np.zeros(10, np.int32), np.zeros(10, np.int32), a, b, u]
    src = k_wgsl_repeated_int_operands(tk.WebGPU()).source(*arrays, ndrange=10)
    body = src[src.index("@compute"):]
    assert body.count("tk_floordiv_i32(") == 2 and body.count("tk_mod_i32(") == 1, body
    got = _run(k_wgsl_repeated_int_operands, "WEBGPU", arrays)[:2]
    want = _run(k_wgsl_repeated_int_operands, "CPU", arrays)[:2]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@tk.kernel
def k_weak_float_arg_compare(acc, s):
    tk.atomic_sub(acc, 0, False < s)


def test_cpu32_takes_python_float_arguments_as_float32():
    """The WebGPU profile's reference computes a Python float argument in float32, as WebGPU
    does (SPEC 4): 2**-1022 is 0.0 there, so `False < s` is False (fuzzer seed 46400272: CPU32
    kept the argument float64 and subtracted 1 per item)."""
    from tinykernels.testing.fuzz.weak32 import CPU32
    acc = np.full(1, 16, np.uint32)
    k_weak_float_arg_compare(CPU32())(acc, 2.0 ** -1022, ndrange=8)
    assert acc[0] == 16
    k_weak_float_arg_compare(CPU32())(acc, 2.0 ** -100, ndrange=8)
    assert acc[0] == 8
    if "WEBGPU" in tk.backends_available():
        got = _run(k_weak_float_arg_compare, "WEBGPU", [np.full(1, 16, np.uint32)], scalars=(2.0 ** -1022,), ndrange=8)
        assert got[0][0] == 16


def test_webgpu_profile_takes_trig_of_any_argument():
    _, opts = F.profile_for(["WEBGPU"], "INTERP", F.Options())
    text = "".join(F.generate(seed, opts).source for seed in range(46400000, 46400060))
    calls = re.findall(r"math\.(?:sin|cos|tan)\((.{0,10})", text)
    assert calls and not any(c.startswith("math.fmod(") for c in calls), calls


# the WebGPU profile: only 32-bit types and Python scalars, no tk.random (tk.print as asked:
# WebGPU prints through a buffer since audit spec19), checked against CPU32 (the CPU with
# WebGPU's 32-bit Python scalars)
def test_webgpu_profile_generates_only_what_webgpu_runs():
    ref, opts = F.profile_for(["WEBGPU"], "INTERP", F.Options(prints=1.0, rng=1.0))
    assert ref == "CPU32" and opts.profile == "webgpu" and opts.prints == 1.0 and opts.rng == 0
    opts = dataclasses.replace(opts, prints=0.0)
    with pytest.raises(ValueError, match="alone"):
        F.profile_for(["WEBGPU", "CPU"], "INTERP", F.Options())
    for seed in range(44002000, 44002040):
        c = F.generate(seed, opts)
        assert not any(w in c.source for w in ("int64", "uint64", "float64", "tk.print", "tk.random")), seed
        # (Python ints past int32; typed ones such as tk.int32(-2147483648) are fine)
        assert not any(re.search(rf"(?<![-\d.]){n}(?![\d.])", c.source) for n in (2**31, 2**32, 2**40, 2**62)), seed


@needs_webgpu
@needs_cpu
def test_fuzz_webgpu_profile():
    _no_mismatch(F.fuzz(range(44002000, 44002012), backends=["WEBGPU"], jobs=0))


@tk.kernel
def k_wgsl_sub_self(o, x: tk.Const):
    i = tk.index()
    v = x[i]
    o[i, 0] = (v * tk.float32(-math.inf)) - (v * tk.float32(-math.inf))
    a = v * 3.0
    b = v * 3.0
    o[i, 1] = a - b
    o[i, 2] = (v + v) - (v + v)
    o[i, 3] = (v + 1.0) + -(v + 1.0)
    o[i, 4] = v - v


# fixed: wgsl-sub-self-fold
# (fuzzer seed 44002001, WebGPU profile: (v * -inf) - (v * -inf) was folded to 0 by lavapipe)
@needs_webgpu
def test_bug_wgsl_self_subtraction_is_not_folded():
    x = np.array([1.0, np.inf, np.nan, 0.0], np.float32)
    got = _run(k_wgsl_sub_self, "WEBGPU", [np.zeros((4, 5), np.float32), x])[0]
    want = _run(k_wgsl_sub_self, INTERP, [np.zeros((4, 5), np.float32), x])[0]
    assert np.isnan(got[1:3]).all() and np.isnan(got[:, 0]).all()
    assert np.array_equal(got, want, equal_nan=True), (got, want)


@tk.kernel
def k_wgsl_const_wrap(o):
    i = tk.index()
    o[i, 0] = (-1) >> (127 << min(tk.int8(3), True))
    o[i, 1] = tk.int8(127) << tk.int8(3)
    o[i, 2] = tk.int16(32767) * tk.int16(3)


# fixed: wgsl-const-wrap-shift
# (fuzzer seed 44001044, WebGPU profile: naga rejected the constant sign extension of an int8 result)
@needs_webgpu
def test_bug_wgsl_constant_narrow_int_wraps():
    got = _run(k_wgsl_const_wrap, "WEBGPU", [np.zeros((2, 3), np.int32)])[0]
    assert got.tolist() == [[-1, -8, 32765]] * 2
    assert got.tolist() == _run(k_wgsl_const_wrap, INTERP, [np.zeros((2, 3), np.int32)])[0].tolist()


@tk.kernel
def k_wgsl_div_const_zero(io, o, C: tk.constexpr):
    i = tk.index()
    io[i] /= C
    o[i] = tk.float32(io[i]) / tk.float32(C)


# fixed: wgsl-const-div-zero
# (fuzzer seed 44001113, WebGPU profile: x /= False gave NaN, not +-inf)
@needs_webgpu
def test_bug_wgsl_division_by_a_constant_zero():
    x = np.array([1.0, -2.0, 0.0, 3.0], ml_dtypes.bfloat16)
    for c in (False, 0, 0.0):
        got = _run(k_wgsl_div_const_zero, "WEBGPU", [x, np.zeros(4, np.float32)], scalars=(c,))
        want = _run(k_wgsl_div_const_zero, INTERP, [x, np.zeros(4, np.float32)], scalars=(c,))
        assert np.asarray(got[0], np.float32).tolist()[:2] == [np.inf, -np.inf], c
        for g, w in zip(got, want):
            assert np.array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32), equal_nan=True), (c, g, w)


@tk.func
def f_uniform_prints(x):
    tk.print("F", x)
    return x + 1


@tk.kernel
def k_uniform_side_effect(o):
    i = tk.index()
    o[i] = tk.uniform(f_uniform_prints(7))


# fixed: uniform-side-effects
@needs_cpu
def test_bug_uniform_argument_runs_once_per_group(capfd):
    # (fuzzer seed 44000644: 2 groups of 4 items print 2 lines on the interpreter, 8 on the CPU)
    counts = []
    for b in (INTERP, "CPU"):
        o = np.zeros(8, np.int64)
        _run(k_uniform_side_effect, b, [o], workgroupsize=4, static_wg=(4,))
        counts.append(sum(1 for ln in capfd.readouterr().out.splitlines() if ln.startswith("F 7")))
    assert counts == [2, 2], counts


@tk.func
def f_uniform_claims(cnt, who, x, i):
    tk.atomic_add(cnt, 0, 1)                      # once per group: the group's count
    who[i] = 1                                    # by the evaluating item only
    return x[i] * 10


@tk.kernel
def k_uniform_stores(o, cnt, who, x: tk.Const):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    if lid == 0 and i > 0:                        # the first item of every group but the first returns
        return
    o[i] = tk.uniform(f_uniform_claims(cnt, who, x, i) if x[0] >= 0 else 0)


# fixed: uniform-side-effects (stores and atomics, after a return, a partial last group)
@pytest.mark.parametrize("backend", ["INTERP", "INTERP:CHECK", "CPU", "CL", "WEBGPU"])
def test_bug_uniform_argument_side_effects_in_the_evaluating_item_only(backend):
    """Groups of 4 over 10 items: the first running item of each group (0, 5, 9) runs the
    function once: 3 atomic adds, 3 marks, and every running item gets that item's x * 10."""
    available = {"INTERP": True, "INTERP:CHECK": True, "CPU": CPU_OK, "CL": CL_OK,
                 "WEBGPU": tk.backends().get("WebGPU", (False,))[0]}
    if not available[backend]:
        pytest.skip(f"{backend} is not available")
    x = np.arange(10, dtype=np.int32) + 1
    o, cnt, who, _ = _run(k_uniform_stores, backend, [np.full(10, -1, np.int32), np.zeros(1, np.int32),
                                                      np.zeros(10, np.int32), x], workgroupsize=4)
    assert cnt.tolist() == [3]
    assert who.tolist() == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert o.tolist() == [10, 10, 10, 10, -1, 60, 60, 60, -1, 100]


@tk.kernel
def k_wgsl_const_shift(o, x: tk.Const):
    i = tk.index()
    n = max(tk.int32(40), tk.int32(3))           # a constant amount past the width, not a literal
    o[i, 0] = x[i] << n
    o[i, 1] = x[i] >> n
    o[i, 2] = tk.int16(x[i]) << tk.int16(n - 30)


# fixed: wgsl-const-shift-amount
# (fuzzer seeds 44001157 and 44001185, WebGPU profile: naga rejected the constant shift in select's other side)
@needs_webgpu
def test_bug_wgsl_constant_shift_amount_past_the_width():
    x = np.array([1, -5, 7], np.int32)
    got = _run(k_wgsl_const_shift, "WEBGPU", [np.zeros((3, 3), np.int32), x])[0]
    want = _run(k_wgsl_const_shift, INTERP, [np.zeros((3, 3), np.int32), x])[0]
    assert got.tolist() == want.tolist()


@tk.kernel
def k_wgsl_const_shl_overflow(o, u, x: tk.Const):
    i = tk.index()
    o[i, 0] = abs(np.int32(2147483647)) << 1      # a constant value and amount: wraps to -2
    o[i, 1] = (x[i] | 1073741824) << 2
    u[i] = abs(np.uint32(4294967295)) << 3


# fixed: wgsl-const-shl-overflow
# (fuzzer seed 82000391, WebGPU profile, fuzz18: naga rejected `abs(2147483647i) << 1u`, "<< operation overflowed")
@needs_webgpu
def test_bug_wgsl_constant_left_shift_that_overflows_32_bits():
    args = [np.zeros((3, 2), np.int32), np.zeros(3, np.uint32), np.array([1, -5, 7], np.int32)]
    got = _run(k_wgsl_const_shl_overflow, "WEBGPU", args)[:2]
    want = _run(k_wgsl_const_shl_overflow, INTERP, args)[:2]
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert want[0][0, 0] == -2


@tk.kernel
def k_wgsl_round_negative_zero(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = round(x[i])                          # an int: round(-0.3) is 0, stored as +0.0
    o[i, 1] = int(x[i]) + tk.uint32(0)
    o[i, 2] = round(tk.clamp(-0.0, -1.0, 1.0))


# fixed: wgsl-round-int-float-fold
# (fuzzer seed 82000361, WebGPU profile, fuzz18: lavapipe folded f32(i32(round(x))) to round(x))
@needs_webgpu
def test_bug_wgsl_float_of_a_rounded_int_is_positive_zero():
    args = [np.ones((4, 3), np.float32), np.array([-0.0, -0.3, -0.5, 2.5], np.float32)]
    got = _run(k_wgsl_round_negative_zero, "WEBGPU", args)[0]
    want = _run(k_wgsl_round_negative_zero, INTERP, args)[0]
    assert got.tobytes() == want.tobytes(), (got, want)
    assert not np.signbit(want).any()


@tk.kernel
def k_wgsl_const_tree_zero(o, x: tk.Const):
    i = tk.index()
    z = tk.float32(tk.int32(2) ** tk.int32(-8))   # 0 (an integer power with a negative exponent)
    o[i, 0] = x[i] * np.float16(tk.int32(3) ** tk.int32(-820547046))
    o[i, 1] = x[i] * z
    o[i, 2] = x[i] + z


# fixed: wgsl-const-tree-zero
# (fuzzer seeds 44001178 and 44001270, WebGPU profile: got 0.0 want NaN / -0.0)
@needs_webgpu
def test_bug_wgsl_zero_computed_from_constants_is_opaque():
    x = np.array([np.inf, -np.inf, np.nan, -0.0, -3.0, 2.0], np.float32)
    got = _run(k_wgsl_const_tree_zero, "WEBGPU", [np.zeros((6, 3), np.float32), x])[0]
    want = _run(k_wgsl_const_tree_zero, INTERP, [np.zeros((6, 3), np.float32), x])[0]
    assert np.isnan(want[:3, :2]).all() and np.signbit(want[3:5, :2]).all() and not np.signbit(want[3, 2])
    assert got.tobytes() == want.tobytes(), (got, want)


@tk.kernel
def k_wgsl_int_local_zero(o, x: tk.Const):
    i = tk.index()
    v = 0
    w = ~True
    o[i, 0] = x[i] * v
    o[i, 1] = x[i] * (w + False)
    o[i, 2] = x[i] + tk.int32(v)


# fixed: wgsl-int-local-zero
# (fuzzer seeds 46400370 and 46400384, WebGPU profile: got 0.0 want NaN / -0.0)
@needs_webgpu
def test_bug_wgsl_int_local_converted_to_float_is_opaque():
    x = np.array([np.inf, -np.inf, np.nan, -0.0, -3.0, 2.0], np.float32)
    got = _run(k_wgsl_int_local_zero, "WEBGPU", [np.zeros((6, 3), np.float32), x])[0]
    want = _run(k_wgsl_int_local_zero, INTERP, [np.zeros((6, 3), np.float32), x])[0]
    assert np.isnan(want[:3, 0]).all() and np.signbit(want[3:5, 0]).all() and not np.signbit(want[3, 2])
    assert got.tobytes() == want.tobytes(), (got, want)


@tk.func
def _bump_first(A):
    A[0] += 1.0
    return A[0]


@tk.func
def _bump_positive(A):
    A[1] += 1.0
    return A[1] > 0.0


@tk.kernel
def k_ifexp_side_effects(o, A, c, C: tk.constexpr):
    i = tk.index()
    o[i, 0] = _bump_first(A) if c > 0 else 0.0          # a run-time condition
    o[i, 1] = 0.0 if C > 0 else _bump_first(A)          # a compile-time one
    o[i, 2] = 1.0 if (c > 0 and _bump_positive(A)) else 0.0
    o[i, 3] = 1.0 if (c > 0 or _bump_positive(A)) else 0.0


# fixed: ifexp-side-effects
# (fuzzer seed 44000733, --print: the CPU printed from the branch of `a if True else ...` not taken)
@needs_cpu
@pytest.mark.parametrize("c,C", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_bug_conditional_expression_runs_only_the_chosen_side(c, C):
    want_o = np.zeros((1, 4), np.float32)
    want_a = np.zeros(2, np.float32)
    if c > 0:                                           # Python's semantics, computed by hand
        want_a[0] += 1.0
        want_o[0, 0] = want_a[0]
    if not C > 0:
        want_a[0] += 1.0
        want_o[0, 1] = want_a[0]
    if c > 0:
        want_a[1] += 1.0
        want_o[0, 2] = float(want_a[1] > 0)
    want_o[0, 3] = 1.0
    if not c > 0:
        want_a[1] += 1.0
    backends = [INTERP, "CPU"] + (["CL"] if CL_OK else [])
    for b in backends:
        o, a = _run(k_ifexp_side_effects, b, [np.zeros((1, 4), np.float32), np.zeros(2, np.float32)], (c, C),
                    ndrange=1)
        np.testing.assert_array_equal(a, want_a, err_msg=str(b))
        np.testing.assert_array_equal(o, want_o, err_msg=str(b))


@tk.kernel
def k_chain_side_effects(o, A, c):
    i = tk.index()
    o[i, 0] = c < 1 < _bump_first(A)               # the call runs only where c < 1
    o[i, 1] = 0 < c < _bump_first(A) < 10           # likewise, where 0 < c


# fixed: chain-side-effects
@needs_cpu
@pytest.mark.parametrize("c", [0, 1])
def test_bug_chained_comparison_runs_later_operands_only_when_needed(c):
    want_o, want_a = np.zeros((1, 2), np.float32), np.zeros(2, np.float32)
    if c < 1:                                           # Python's semantics, computed by hand
        want_a[0] += 1.0
        want_o[0, 0] = 1 < want_a[0]
    if 0 < c:
        want_a[0] += 1.0
        want_o[0, 1] = c < want_a[0] < 10
    for b in [INTERP, "CPU"] + (["CL"] if CL_OK else []):
        o, a = _run(k_chain_side_effects, b, [np.zeros((1, 2), np.float32), np.zeros(2, np.float32)], (c,),
                    ndrange=1)
        np.testing.assert_array_equal(a, want_a, err_msg=str(b))
        np.testing.assert_array_equal(o, want_o, err_msg=str(b))


@tk.kernel
def k_chain_pure_calls_in_while(o, x: tk.Const):
    i = tk.index()
    w = 0
    while x[len(x) - 1] <= x[i] > x[abs(w) % len(x)] and w < 8:     # pure calls in the tail
        w += 1
    o[i] = w


def test_chained_comparison_with_pure_calls_stays_usable_in_a_while_condition():
    """The chain-side-effects fix snapshots a chain's middle operand before a tail that calls
    something which may store; `abs`/`len` do not, so no statement is needed and the chain may
    sit in a `while` condition (fuzzer seeds 60000058, 60001374: 'this call cannot be used in a
    while condition' after the fix)."""
    x = np.array([3.0, 1.0, 5.0, 2.0], np.float32)
    want = np.zeros(4, np.int32)
    for i in range(4):                                   # the loop in Python
        w = 0
        while x[len(x) - 1] <= x[i] > x[abs(w) % len(x)] and w < 8:
            w += 1
        want[i] = w
    assert set(want) == {0, 2}
    for b in [INTERP, "CPU"] + (["CL"] if CL_OK else []):
        o = _run(k_chain_pure_calls_in_while, b, [np.zeros(4, np.int32), x])[0]
        np.testing.assert_array_equal(o, want, err_msg=str(b))


@tk.kernel
def k_wgsl_narrow_self_cast(o, h: tk.Const):
    i = tk.index()
    o[i] = tk.float16(h[i] * 3.0) - 0.1


# fixed: wgsl-narrow-self-cast
@needs_webgpu
def test_bug_wgsl_cast_of_a_narrow_value_to_its_own_type_rounds():
    h = np.array([0.3303, 0.581, -0.7363], np.float16)
    got = _run(k_wgsl_narrow_self_cast, "WEBGPU", [np.zeros(3, np.float32), h])[0]
    want = _run(k_wgsl_narrow_self_cast, INTERP, [np.zeros(3, np.float32), h])[0]
    assert got.tolist() == want.tolist()
    assert want[0] == np.float32(np.float16(0.9912109375)) - np.float32(np.float16(0.1))


@tk.kernel
def rotated_and_reversed_local_reads(o, x: tk.Const):
    """GCC 12.2 -O3 -march=native on an AVX-512 CPU packed the fully unrolled item loop after
    the barrier into 512-bit vectors with a wrong lane permutation: items 3 and 4 got their
    neighbours' values (audit16a; the compiler probe now turns basic-block SLP off there)"""
    a = tk.localmem(x.dtype, 8)
    b = tk.localmem(x.dtype, 8)
    l = tk.index(tk.Local, tk.Linear)
    i = tk.index()
    a[l] = x[i] * x[i]
    tk.synchronize()
    b[l] = a[(l + 1) % 8] * a[l]
    b[l] += math.sin(a[7 - l])
    tk.synchronize()
    o[i] = b[l]


# fixed: gcc-slp-permute
# (audit16a: a wrong gradient of a local-memory kernel on the CPU; the primal was wrong)
@needs_cpu
@pytest.mark.parametrize("b", [tk.CPU(), INTERP], ids=lambda b: b.name)
def test_bug_gcc_slp_permute_rotated_and_reversed_local_reads_after_a_barrier(b):
    x = np.random.default_rng(5).uniform(-1, 1, 24)
    o = np.zeros(24)
    rotated_and_reversed_local_reads(b, 8)(o, x, ndrange=24)
    a = (x * x).reshape(3, 8)
    want = (np.roll(a, -1, axis=1) * a + np.sin(a[:, ::-1])).ravel()
    np.testing.assert_allclose(o, want, rtol=1e-15, atol=0)


@tk.kernel
def rotated_and_reversed_private_reads(o, x: tk.Const):
    """A flat kernel: GCC 12.2 -O3 -march=native on an AVX-512 CPU loop-vectorized the item loop,
    its 8-trip loops unrolled, with the permutation {1, 1, 7, 6, 5, 5, 6, 7} of eight doubles,
    which the back end compiled to an in-lane vpermilpd: items' elements 2 and 3 came out wrong
    (slpfuzz16, scripts/slp_perm_fuzz.py seed 1326; -fno-tree-slp-vectorize did not help)"""
    i = tk.index()
    a = tk.private(x.dtype, 8)
    b = tk.private(x.dtype, 8)
    for j in range(8):
        a[j] = x[i * 8 + j] * x[i * 8 + j]
    for j in range(8):
        b[j] = a[j] * a[(7 - j + 2) % 8]
        b[j] += a[(j + 4) % 8] * a[(j + 4) % 8]
    for j in range(8):
        o[i * 8 + j] = b[j]


@tk.func
def half_sine_plus(v):
    return math.sin(v) * 0.5 + v


@tk.kernel
def permuted_private_reads_with_calls(o, x: tk.Const):
    """As rotated_and_reversed_private_reads, with a device function and floor in the sums
    (slp_perm_fuzz.py's first flat finding: items' elements 2 and 3 wrong)"""
    i = tk.index()
    a = tk.private(x.dtype, 8)
    b = tk.private(x.dtype, 8)
    for j in range(8):
        a[j] = x[i * 8 + j] * x[i * 8 + j]
    for j in range(8):
        b[j] = a[(7 - j + 2) % 8] * a[j]
        b[j] += half_sine_plus(a[j])
        b[j] += math.floor(a[(j * 7) % 8] * 3.0)
        b[j] += math.floor(a[(7 - j + 7) % 8] * 3.0)
    for j in range(8):
        o[i * 8 + j] = b[j]


def _rows(x):
    return (x * x).reshape(-1, 8)


# fixed: gcc-slp-permute
# (slpfuzz16: the same back-end bug in flat kernels over tk.private arrays)
@needs_cpu
@pytest.mark.parametrize("b", [tk.CPU(), INTERP], ids=lambda b: b.name)
def test_bug_gcc_slp_permute_flat_kernel_permuted_private_reads(b):
    x = np.random.default_rng(1326).uniform(-1, 1, 24)
    o = np.zeros(24)
    rotated_and_reversed_private_reads(b)(o, x, ndrange=3)
    a = _rows(x)
    want = (a * a[:, [(9 - j) % 8 for j in range(8)]] + a[:, [(j + 4) % 8 for j in range(8)]] ** 2).ravel()
    np.testing.assert_array_equal(o, want)


# fixed: gcc-slp-permute
@needs_cpu
@pytest.mark.parametrize("b", [tk.CPU(), INTERP], ids=lambda b: b.name)
def test_bug_gcc_slp_permute_flat_kernel_permuted_private_reads_with_calls(b):
    x = np.random.default_rng(299).uniform(-1, 1, 24)
    o = np.zeros(24)
    permuted_private_reads_with_calls(b)(o, x, ndrange=3)
    a = _rows(x)
    perm = lambda f: a[:, [f(j) for j in range(8)]]     # noqa: E731
    want = perm(lambda j: (9 - j) % 8) * a + (np.sin(a) * 0.5 + a) + np.floor(perm(lambda j: j * 7 % 8) * 3.0) \
        + np.floor(perm(lambda j: (14 - j) % 8) * 3.0)
    np.testing.assert_allclose(o, want.ravel(), rtol=1e-15, atol=0)


@tk.kernel
def strided_private_reads_with_exp(o, x: tk.Const):
    """slp_perm_fuzz.py --forms all seed 20256 (f64narrow17): sixteen doubles per item read at
    (4 j) % 16; without the workaround items' elements 11 and 12 came out wrong"""
    a = tk.private(x.dtype, 16)
    b = tk.private(x.dtype, 16)
    i = tk.index()
    for j in range(16):
        a[j] = x[i * 16 + j] * x[i * 16 + j]
    for j in range(16):
        b[j] = a[(j * 4) % 16] * a[j]
        b[j] += math.exp(a[j])
    for j in range(16):
        o[i * 16 + j] = b[j]


@tk.kernel
def interleaved_private_reads_in_groups(o, x: tk.Const):
    """slp_perm_fuzz.py --forms all seed 40205 (f64narrow17): a grouped kernel's private arrays
    read at j ^ 1, an interleave, 7 j % 8 and 7 - j; without the workaround element 3 was wrong"""
    sh = tk.localmem(x.dtype, 1)
    a = tk.private(x.dtype, 8)
    b = tk.private(x.dtype, 8)
    i = tk.index()
    for j in range(8):
        a[j] = x[i * 8 + j] * x[i * 8 + j]
    for j in range(8):
        b[j] = a[j ^ 1] * a[(j % 2) * 4 + j // 2]
        b[j] += math.fmod(a[(j * 7) % 8], 0.37)
        b[j] += (a[7 - j] * a[7 - j])
        b[j] += math.fmod(a[(j % 2) * 4 + j // 2], 0.37)
    sh[0] = a[0]
    tk.synchronize()
    for j in range(8):
        o[i * 8 + j] = b[j] + sh[0] * 0.0


# fixed: gcc-slp-permute
# (f64narrow17: found without the workaround by the wide generator; the narrow rule marks it)
@needs_cpu
@pytest.mark.parametrize("b", [tk.CPU(), INTERP], ids=lambda b: b.name)
def test_bug_gcc_slp_permute_strided_private_reads_of_sixteen(b):
    x = np.random.default_rng(20256).uniform(-1, 1, 48)
    o = np.zeros(48)
    strided_private_reads_with_exp(b)(o, x, ndrange=3)
    a = (x * x).reshape(3, 16)
    want = a[:, [(j * 4) % 16 for j in range(16)]] * a + np.exp(a)
    np.testing.assert_allclose(o, want.ravel(), rtol=1e-14, atol=0)


# fixed: gcc-slp-permute
@needs_cpu
@pytest.mark.parametrize("b", [tk.CPU(), INTERP], ids=lambda b: b.name)
def test_bug_gcc_slp_permute_interleaved_private_reads_in_a_grouped_kernel(b):
    x = np.random.default_rng(40205).uniform(-1, 1, 24)
    o = np.zeros(24)
    interleaved_private_reads_in_groups(b, 1)(o, x, ndrange=3)
    a = _rows(x)
    perm = lambda f: a[:, [f(j) for j in range(8)]]     # noqa: E731
    il = perm(lambda j: (j % 2) * 4 + j // 2)
    want = perm(lambda j: j ^ 1) * il + np.fmod(perm(lambda j: j * 7 % 8), 0.37) + perm(lambda j: 7 - j) ** 2 \
        + np.fmod(il, 0.37)
    np.testing.assert_allclose(o, want.ravel(), rtol=1e-14, atol=0)


@tk.kernel
def reversed_private_reads(o, x: tk.Const):
    i = tk.index()
    a = tk.private(x.dtype, 8)
    for j in range(8):
        a[j] = x[i * 8 + j]
    for j in range(8):
        o[i * 8 + j] = a[7 - j] * a[j]


@needs_cpu
def test_the_float64_workaround_reaches_float64_kernels_only(monkeypatch):
    """The permute-v8df workaround (scope "float64": the miscompiled permutation is of eight
    doubles) is given to a kernel computing in float64 at permuted indices (kernel feature
    "permuted-doubles", passes/permuted_access.py) and not to the same kernel in float32, nor
    to the int8 GEMV (it keeps 512-bit vectors)."""
    from tinykernels import llm
    from tinykernels.runtime import compiler
    seen = {}
    real = compiler.compile_library
    monkeypatch.setattr(compiler, "compile_library",
                        lambda src, name, extra=(), tc=None: seen.setdefault(name, []).append(tuple(extra))
                        or real(src, name, extra, tc))
    for dt in (np.float64, np.float32):
        x = np.arange(16, dtype=dt)
        o = np.zeros(16, dt)
        reversed_private_reads(tk.CPU())(o, x, ndrange=2)
        np.testing.assert_array_equal(o, (x.reshape(2, 8)[:, ::-1] * x.reshape(2, 8)).ravel())
    w = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    llm.matmul(llm.quantize(w, "q8_0"), np.ones(64, np.float32), out=np.zeros(32, np.float32), exact=False)
    tc = compiler.toolchain()
    assert seen["reversed_private_reads"] == [tc.kernel_flags({"permuted-doubles"}), ()]
    assert all(f == () for f in seen.get("_gemv_rows_i8", []))     # (not compiled again if cached in-process)
    assert tc.kernel_flags({"permuted-doubles", "barrier"}) == tuple(dict.fromkeys(
        tc.kernel_flags({"permuted-doubles"}) + tc.kernel_flags({"barrier"})))


@needs_cpu
def test_the_native_miscompile_probes_run_right_with_the_toolchains_flags(tmp_path):
    """Each probe program of a known -march=native miscompile, compiled with the flags the kernels
    of its scope get (every kernel, or those of a scope: ``kernel_flags(SCOPE_FEATURES[scope])``), computes the right
    result (the probe found a fix, or the compiler has no such bug)."""
    import subprocess
    from tinykernels.runtime import compiler
    tc = compiler.toolchain()
    if "-march=native" not in tc.flags:
        pytest.skip("kernels are not compiled with -march=native here")
    flags = [f for f in tc.flags if f not in ("-shared", "-fPIC", "-w") and not f.startswith("-D")]
    for name, text, _, scope in compiler._NATIVE_PROBES:
        src = tmp_path / f"{name}.c"
        src.write_text(text)
        exe = str(tmp_path / name)
        extra = list(tc.kernel_flags(compiler.SCOPE_FEATURES.get(scope, frozenset())))
        subprocess.run(list(tc.cmd) + flags + extra + ["-o", exe, str(src), "-lm"], check=True, capture_output=True)
        assert subprocess.run([exe]).returncode == 0, f"{name}: {tc.flags}"


# ----------------------------------------------------------------------------- audit17b's operator grid
# (tests/test_operator_grid.py found these; each is checked here once more on its own)

JAX_OK = tk.backends().get("JAX", (False, ""))[0]
needs_jax = pytest.mark.skipif(not JAX_OK, reason="no JAX")


@tk.kernel
def k_bool_times_float(o, b, x):
    i = tk.index()
    o[i] = b[i] * x[i]


# fixed: jax-bool-times-float
# (XLA rewrote convert(pred) * x to select(pred, x, 0): False * -1.0 gave 0.0, False * inf 0.0)
@needs_jax
def test_bug_jax_bool_times_float():
    b, x = np.array([False, False, True]), np.array([-1.0, np.inf, -2.0], np.float32)
    got = _run(k_bool_times_float, "JAX", [np.zeros(3, np.float32), b, x])[0]
    assert np.signbit(got[0]) and got[0] == 0 and np.isnan(got[1]) and got[2] == -2.0, got


@tk.kernel
def k_div_scalar(o, x, s):
    i = tk.index()
    o[i] = x[i] / s


# fixed: jax-scalar-constants
# (a launch with s = -0.0 reused the trace of s = 0.0: -1.0 / -0.0 gave -inf)
@needs_jax
def test_bug_jax_scalar_minus_zero_is_not_zero():
    x = np.array([-1.0, 1.0])
    assert _run(k_div_scalar, "JAX", [np.zeros(2), x], (0.0,))[0].tolist() == [-np.inf, np.inf]
    assert _run(k_div_scalar, "JAX", [np.zeros(2), x], (-0.0,))[0].tolist() == [np.inf, -np.inf]


@tk.kernel
def k_floordiv_const(o, x):
    i = tk.index()
    o[i] = x[i] // 7


# fixed: jax-constant-divisor
# (XLA's x * (1/7) for x // 7: an ulp off for x = 1.8e308)
@needs_jax
def test_bug_jax_floordiv_by_a_constant_divides():
    x = np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max, 1e300])
    np.testing.assert_array_equal(_run(k_floordiv_const, "JAX", [np.zeros(3), x])[0], x // 7)


@tk.kernel
def k_sinh_cosh(o, x):
    i = tk.index()
    o[i, 0] = math.sinh(x[i])
    o[i, 1] = math.cosh(x[i])


# fixed: jax-sinh-cosh
# (XLA's cosh(710.0) was 300 ulp off)
@needs_jax
def test_bug_jax_sinh_cosh_of_large_arguments():
    x = np.array([3.0, 10.0, 88.0, -104.0, 700.0, 710.0, -710.0])
    got = _run(k_sinh_cosh, "JAX", [np.zeros((len(x), 2)), x])[0]
    want = np.stack([np.sinh(x), np.cosh(x)], 1)
    assert (np.abs(got - want) / np.spacing(np.abs(want))).max() <= 4, (got, want)


@tk.kernel
def k_pow_pairs(o, x, y):
    i = tk.index()
    o[i] = math.pow(x[i], y[i])


# fixed: wgsl-pow-signed-zero
# (the driver folded sn * 0.0 to +0.0: pow(-3.4e38, -3.0) gave +0.0)
@needs_webgpu
def test_bug_wgsl_pow_underflow_keeps_the_sign():
    x, y = np.float32([-3.4e38, -1e-45, -1e-20]), np.float32([-3.0, 3.0, 5.0])
    got = _run(k_pow_pairs, "WEBGPU", [np.zeros(3, np.float32), x, y])[0]
    assert got.tolist() == [0.0, 0.0, 0.0] and np.signbit(got).all(), got


@tk.kernel
def k_int_float_compare(o, a, f):
    i = tk.index()
    o[i, 0] = a[i] < f[i]
    o[i, 1] = a[i] == f[i]
    o[i, 2] = f[i] <= a[i]


# fixed: wgsl-int-float-compare
# (int32 2147483646 < float32 2**31 was False on WebGPU: compared in float32)
@needs_webgpu
@pytest.mark.parametrize("it", [np.int32, np.uint32])
def test_bug_wgsl_int32_float32_compare_is_exact(it):
    info = np.iinfo(it)
    a = np.array([info.max, info.max - 1, info.min, info.min + 1, 16777217, 0], it)
    f = np.float32([float(info.max) + 1, float(info.max) + 1, float(info.min), float(info.min), 16777216, np.nan])
    got = _run(k_int_float_compare, "WEBGPU", [np.zeros((6, 3), bool), a, f])[0]
    np.testing.assert_array_equal(got, np.stack([a < f, a == f, f <= a], 1))


@tk.kernel
def k_array_bind_in_branch(x, y, o):
    i = tk.index()
    a = x
    if y[i] > 0:
        a = y                                       # Python: y only where y[i] > 0
    o[i] = a[i]


@tk.kernel
def k_private_in_branch(x, o):
    i = tk.index()
    if x[i] > 0:
        p = tk.private(np.float32, (2,))
        p[0] = x[i]
        p[1] = 2.0
    o[i] = p[1]                                     # Python: UnboundLocalError where x[i] <= 0


@tk.kernel
def k_private_in_loop(x, o):
    i = tk.index()
    for j in range(2):
        p = tk.private(np.float32, (2,))
        p[j] = x[i]
    o[i] = p[1]                                     # Python: the last iteration's array


@tk.kernel
def k_array_rebound_in_loop(x, y, o):
    i = tk.index()
    a = x
    for j in range(2):
        o[i] += a[i]                                # Python: x, then y
        a = y


@tk.kernel
def k_array_bind_flow_ok(x, y, o):
    i = tk.index()
    a = x
    t = x.dtype
    if y[i] > 0:
        t = x.dtype                                 # the same dtype on every path
        a = y
        o[i] = a[i]                                 # read where it was bound
    else:
        o[i] = a[i] * 2.0                           # the else branch sees the binding before the if
    for j in range(2):
        p = tk.private(t, (2,))                     # allocated and used inside the loop body
        p[j % 2] = x[i]
        p[(j + 1) % 2] = 1.0
        o[i] += p[0] + p[1]


# fixed: array-bind-flow
@pytest.mark.parametrize("kern,where", [(k_array_bind_in_branch, "a"), (k_private_in_branch, "p"),
                                        (k_private_in_loop, "p"), (k_array_rebound_in_loop, "a")])
def test_bug_array_bound_under_control_flow_is_a_compile_error(kern, where):
    """Fuzzer seed 71000041 (--calls): a tk.private bound inside an if and read after it was C that
    did not compile ('a__pm1' undeclared) where the interpreter raised UnboundLocalError, and an
    argument rebound in a branch (k_array_bind_in_branch) silently read the array bound last on the
    CPU ([1, -5] where Python gives [1, -2]). Arrays, dtypes and Python objects are bound when the
    kernel compiles: every backend now rejects such a read, naming the variable."""
    x = np.array([1.0, -2.0], np.float32)
    y = np.array([1.0, -5.0], np.float32)
    arrays = [x, y, np.zeros(2, np.float32)] if kern is not k_private_in_branch and kern is not k_private_in_loop \
        else [x, np.zeros(2, np.float32)]
    for b in _backends():
        with pytest.raises(tk.CompileError, match=f"'{where}' is bound to an array"):
            _run(kern, b, arrays, ndrange=2)


def test_array_bound_once_per_path_still_compiles():
    """What the array-bind-flow check keeps: a binding read in the branch that made it, the else
    branch seeing the binding before the if, the same dtype bound on every path, a private array
    allocated and used inside a loop body; against the same computation in NumPy."""
    x = np.array([1.0, -2.0, 3.0], np.float32)
    y = np.array([4.0, -5.0, 6.0], np.float32)
    want = np.where(y > 0, y, x * 2.0) + 2 * (x + 1.0)
    for b in _backends():
        o = _run(k_array_bind_flow_ok, b, [x, y, np.zeros(3, np.float32)], ndrange=3)[2]
        np.testing.assert_array_equal(o, want.astype(np.float32), err_msg=str(b))


@tk.func
def _early_exit(v):
    if v > 3:                                       # a per-item early return
        return v + 1
    return v


@tk.kernel
def k_uniform_of_early_return_in_while(x, o):
    i = tk.index()
    w = 0
    while tk.uniform(_early_exit(x[i]) > 0):
        w += 1
        tk.synchronize()
        if w > 3:
            break
    o[i] = w


@tk.kernel
def k_uniform_of_early_return_in_for(x, o):
    i = tk.index()
    w = 0
    for j in range(3):
        u = tk.uniform(_early_exit(x[i] + j) > 1)
        tk.synchronize()
        if u:
            break
        w += 1
    o[i] = w


@tk.func
def _calls_early_exit(v, j):
    _early_exit(v)                                  # its early return ends inside this function
    return j * 2                                    # uniform


@tk.func
def _own_early_exit(v, j):
    if v > 3:                                       # this function's own per-item return
        return 0
    return j * 2


@tk.kernel
def k_func_calling_early_return_in_barrier_loop(x, o):
    i = tk.index()
    w = 0
    for j in range(4):
        t = _calls_early_exit(x[i], j)
        tk.synchronize()
        if t > 2:
            break
        w += 1
    o[i] = w


@tk.kernel
def k_own_early_return_in_barrier_loop(x, o):
    i = tk.index()
    for j in range(3):
        t = _own_early_exit(x[i], j)                # per item: its break must stay an error
        tk.synchronize()
        if t > 2:
            break
    o[i] = 1


@tk.kernel
def k_early_return_result_in_barrier_loop(x, o):
    i = tk.index()
    for j in range(3):
        t = _early_exit(x[i] + j)                   # per item: its break must stay an error
        tk.synchronize()
        if t > 2:
            break
    o[i] = 1


# fixed: uniform-func-exit
def test_bug_uniform_of_a_function_with_an_early_return_is_uniform_in_a_barrier_loop():
    """Fuzzer construct of --calls (uniform_while, fuzz17): `while tk.uniform(f(x[i]) > 0):` with a
    barrier in the loop, `f` returning early under a per-item condition, was a CompileError ('this
    while condition depends on the work item') on every backend, and so was `u = tk.uniform(f(..))`
    then `if u: break`: the uniformity analysis took the early return, which only leaves the
    function inlined inside the loop (under the evaluating item's guard), for a jump out of the
    loop's iteration. Values against the loops written in Python (the group's first item
    evaluates the uniform); likewise a function that calls one returning early had every local it
    assigned after the call taken as per-item. A per-item result of the function stays an error."""
    x = np.arange(8, dtype=np.int32) - 3
    want_w = np.zeros(8, np.int32)
    want_f = np.zeros(8, np.int32)
    for g in range(2):
        x0 = int(x[4 * g])
        e = (lambda v: v + 1 if v > 3 else v)
        w = 0
        while e(x0) > 0:
            w += 1
            if w > 3:
                break
        want_w[4 * g:4 * g + 4] = w
        w = 0
        for j in range(3):
            if e(x0 + j) > 1:
                break
            w += 1
        want_f[4 * g:4 * g + 4] = w
    assert set(want_w) == {0, 4} and set(want_f) == {1, 3}
    for b in _backends():
        o = _run(k_uniform_of_early_return_in_while, b, [x, np.zeros(8, np.int32)], ndrange=8, workgroupsize=4)[1]
        np.testing.assert_array_equal(o, want_w, err_msg=str(b))
        o = _run(k_uniform_of_early_return_in_for, b, [x, np.zeros(8, np.int32)], ndrange=8, workgroupsize=4)[1]
        np.testing.assert_array_equal(o, want_f, err_msg=str(b))
        o = _run(k_func_calling_early_return_in_barrier_loop, b, [x, np.zeros(8, np.int32)], ndrange=8,
                 workgroupsize=4)[1]
        np.testing.assert_array_equal(o, np.full(8, 2, np.int32), err_msg=str(b))   # j = 0, 1, then t = 4
        for kern in (k_early_return_result_in_barrier_loop, k_own_early_return_in_barrier_loop):
            with pytest.raises(tk.CompileError, match="depends on the work item"):
                _run(kern, b, [x, np.zeros(8, np.int32)], ndrange=8, workgroupsize=4)


@tk.kernel
def k_barrier_in_one_branch(o, s):
    li = tk.index()
    if s > 100:
        o[li, 0] = 5.0
    else:
        tk.synchronize()
        o[li, 1] = 3.0


@tk.kernel
def k_uniform_in_else_of_group_if(o, s):
    li = tk.index()
    gl = tk.index(tk.Group, tk.Linear)
    if gl:
        o[li, 0] = 5.0
    else:
        o[li, 1] = tk.uniform(s + 1.0)


@tk.kernel
def k_barrier_in_then_branch(o, s):
    li = tk.index()
    if s < 100:
        tk.synchronize()
        o[li, 1] = 3.0
    else:
        o[li, 0] = 5.0


# fixed: pocl-barrier-one-branch
@pytest.mark.parametrize("wg,nd", [((4,), 3), ((4,), 6), ((2, 3, 2), (1, 4, 2))])
def test_bug_barrier_in_one_branch_of_an_if_else_in_a_partial_group(wg, nd):
    """Fuzzer seed 70000427 (--hazards --print --rng on CL): a tk.uniform in the else of `if gl:`
    came out as garbage on PoCL in a partial group. PoCL 3.1 lost the stores after the barrier of
    an if/else branch that held one when the other branch held none (partial groups only); the
    OpenCL renderer now writes such an if/else as two fenced ifs on the condition's value."""
    n, s = int(np.prod(nd)), 7
    one = np.full((n, 2), -1, np.float32)
    one[:, 1] = 3.0                                     # s = 7: the branch with the barrier everywhere
    gsize = int(np.prod(wg))
    first = np.full((n, 2), -1, np.float32)             # group 0 takes the else (s + 1), the others 5.0
    pos = np.indices(nd if isinstance(nd, tuple) else (nd,)).reshape(len(wg), -1)
    grp = np.zeros(n, np.int64)
    ngroups = [-(-d // w) for d, w in zip(nd if isinstance(nd, tuple) else (nd,), wg)]
    for d in range(len(wg)):
        grp = grp * ngroups[d] + pos[d] // wg[d]
    first[grp == 0, 1] = s + 1.0
    first[grp != 0, 0] = 5.0
    assert gsize > 1 and (grp == 0).any()
    for b in _backends():
        for kern, want in ((k_barrier_in_one_branch, one), (k_barrier_in_then_branch, one),
                           (k_uniform_in_else_of_group_if, first)):
            o = _run(kern, b, [np.full((n, 2), -1, np.float32)], (s,), ndrange=nd, static_wg=wg)[0]
            np.testing.assert_array_equal(o, want, err_msg=f"{b} {kern}")


@tk.kernel
def k_weak_u64_compare_is_a_python_bool(o, s):
    li = tk.index()
    v = (s == li + 2**62) ^ (s > li)                # Python bools: a Python scalar against a Python scalar
    o[li] = True - v + (s != li) * 3


# fixed: weak-u64-compare-bool
@pytest.mark.parametrize("s", [5, 2**63 - 1, 2**63, 2**64 - 2])
def test_bug_comparing_a_python_int_above_int64_gives_a_python_bool(s):
    """Fuzzer seed 70000488 (--hazards on the CPU and CL): `v = (s7 == <Python int>)` with `s7` a
    Python int argument in [2**63, 2**64) gave a NumPy bool, so `True - v` was a CompileError
    ('-' is not defined for bools) where the same kernel with s7 < 2**63 compiled: the exact
    mixed-sign comparison (audit15a) typed its result strong whatever its operands. Against Python."""
    want = np.array([True - ((s == li + 2**62) ^ (s > li)) + (s != li) * 3 for li in range(3)], np.int64)
    for b in _backends():
        o = _run(k_weak_u64_compare_is_a_python_bool, b, [np.zeros(3, np.int64)], (s,), ndrange=3)[0]
        np.testing.assert_array_equal(o, want, err_msg=str(b))


@tk.kernel
def k_wgsl_fma(o, a: tk.Const, b: tk.Const, c: tk.Const):
    i = tk.index()
    o[i] = tk.fma(a[i], b[i], c[i])


# fixed: wgsl-fma-rounds-twice
# (audit18a, Numba's test_fma ported: lavapipe's fma rounded the product first)
@needs_webgpu
def test_bug_wgsl_fma_rounds_once():
    a = np.array([1 + 2.0 ** -12, 3.0, 1 + 2.0 ** -12], np.float32)
    c = np.array([-(1 + 2.0 ** -11), 1.0, 2.0 ** -80], np.float32)
    got = _run(k_wgsl_fma, "WEBGPU", [np.zeros(3, np.float32), a, a, c])[0]
    want = _run(k_wgsl_fma, INTERP, [np.zeros(3, np.float32), a, a, c])[0]
    assert got.tolist() == want.tolist() and got[0] == 2.0 ** -24


@tk.kernel
def k_wgsl_zero_minus_folded_zero(o):
    i = tk.index()
    o[i] = ~True - tk.float8_e4m3fn(0.0) / 1      # False - 0.0: +0.0


# fixed: wgsl-xor-mark-cancels
# (fuzzer seed 88701127, WebGPU profile with --edges: -0.0 on WebGPU, +0.0 on CPU32)
@needs_webgpu
def test_bug_wgsl_zero_minus_a_left_operand_folded_to_the_opaque_zero_is_positive():
    args = [np.full(4, 7.0, np.float32)]
    for b in ("WEBGPU", INTERP):
        got = _run(k_wgsl_zero_minus_folded_zero, b, args, ndrange=4)[0]
        assert got.tolist() == [0.0] * 4 and not np.signbit(got).any(), (b, got)


@tk.kernel
def k_atomic_after_uniform_while(e, o, n):
    li = tk.index()
    t = li
    w = 0
    while w < n:
        w += 1
        t = t + 2
    tk.atomic_add(e, 0, 1)
    tk.synchronize()
    o[li] = t


@tk.kernel
def k_atomic_after_uniform_for(e, o, n):
    li = tk.index()
    t = li
    for w in range(n):
        t = t + 3
    tk.atomic_add(e, 0, 1)
    tk.synchronize()
    o[li] = t


# fixed: pocl-uniform-loop-item-code
@pytest.mark.parametrize("wg,nd", [((4, 1), (2, 8)), ((4, 1), (6, 2)), ((1, 4, 1), (2, 2, 2)), ((4,), 6)])
def test_bug_atomic_after_a_uniform_loop_runs_once_per_item_in_a_partial_group(wg, nd):
    """Fuzzer seed 90000533 (--edges --hazards --calls --bytes on CL, fuzz20): an effect function's
    atomic counted 8 calls too many. PoCL 3.1 ran an `if (tk_active)` atomic after a group-level
    (uniform) `while` that held per-item code once more per group, in a partial group of a
    workgroup one item wide in OpenCL's x (reqd_work_group_size(1, 4, 1)); the OpenCL renderer
    now fences such loops with barriers."""
    n = int(np.prod(nd))
    for b in _backends():
        for kern, step in ((k_atomic_after_uniform_while, 2), (k_atomic_after_uniform_for, 3)):
            for trips in (0, 2):
                e, o = _run(kern, b, [np.zeros(1, np.uint64), np.zeros(n, np.int64)], (np.uint8(trips),),
                            ndrange=nd, static_wg=wg)
                assert int(e[0]) == n, f"{b} {kern} trips={trips}: {int(e[0])} atomics for {n} items"
                np.testing.assert_array_equal(o, np.arange(n) + step * trips, err_msg=f"{b} {kern}")


@tk.kernel
def k_abs_of_min_floordiv(of, oi, s):
    i = tk.index()
    of[i] = abs(s) // 7
    oi[i, 0] = abs(s) // 7
    oi[i, 1] = abs(s) % 7
    oi[i, 2] = abs(s) >> 1


# fixed: gcc-abs-min-nonnegative
@pytest.mark.parametrize("s", [-2**63, np.int64(-2**63), np.int32(-2**31), np.int16(-2**15), np.int8(-128), -5])
def test_bug_abs_of_the_minimum_integer_stays_negative_in_a_loop(s):
    """Fuzzer seed 90000794 (--edges --hazards --calls --bytes on the CPU, fuzz20): `abs(s12) // 7`
    with the Python int argument s12 = -2**63 gave +1.3e18 on the CPU, -1.3e18 on the interpreter:
    abs wraps (abs(INT64_MIN) == INT64_MIN), but GCC 12 took tk_abs's `a < 0 ? (T)(0u - (U)a) : a`
    for its ABS_EXPR, assumed the loop-invariant result non-negative (even under -fwrapv) and
    divided it as a positive number; tk_abs is now written with a sign mask."""
    t = np.asarray(s).dtype if isinstance(s, np.generic) else np.dtype(np.int64)
    a = int(s)
    v = a if -a > np.iinfo(t).max else -a if a < 0 else a             # abs, wrapped to the type
    want = [v // 7, v % 7, v >> 1]
    for b in _backends():
        of, oi = _run(k_abs_of_min_floordiv, b, [np.zeros(8, np.float32), np.zeros((8, 3), np.int64)], (s,))
        np.testing.assert_array_equal(oi, np.tile(want, (8, 1)), err_msg=f"{b} {s!r}")
        np.testing.assert_array_equal(of, np.full(8, np.float32(v // 7)), err_msg=f"{b} {s!r}")


@tk.kernel
def k_weak_uint64_either_side(o, s):
    i = tk.index()
    v = 18446744073709551615
    o[i, 0] = max(v, 63)
    o[i, 1] = 63 % v
    o[i, 2] = 63 % s
    o[i, 3] = s % 63
    o[i, 4] = (9223372036854775808 + i) // 2


# fixed: weak-uint64-literal-left
@pytest.mark.parametrize("s", [2**64 - 1, 2**63 + 5])
def test_bug_python_ints_above_int64_are_uint64_on_either_side(s):
    """Minimising fuzzer seed 90000533 (fuzz20): a local `v = 2**64 - 1` (a literal) was a weak int64
    on the compiled backends (-1: `max(v, 63)` 63, `63 % v` 0) and unsigned on the interpreter,
    and with a Python int argument `s` >= 2**63 `s % 63` computed in uint64 but `63 % s` in int64
    (dtypes.promote gave two weak ints the LEFT one's type). Against Python's exact ints."""
    M = 2**64 - 1
    want = [[M, 63, 63 % s, s % 63, (2**63 + li) // 2] for li in range(3)]
    for b in _backends():
        o = _run(k_weak_uint64_either_side, b, [np.zeros((3, 5), np.uint64)], (s,), ndrange=3)[0]
        np.testing.assert_array_equal(o, np.array(want, np.uint64), err_msg=str(b))
