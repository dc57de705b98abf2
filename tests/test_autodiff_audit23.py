"""Autodiff audit adx23: the gradient fuzzer's narrow mode (float16 / bfloat16 arrays checked
against the same kernel on float64 arrays, ``gradcheck.check_grad_narrow_case``), and the by-hand
audit's cases kept as regressions: forward mode (``tk.autodiff(tk.Forward, ...)``) on what reverse
mode was audited on (loops with data-dependent exits, early returns in ``@tk.func``, atomics,
local memory with collectives, private arrays, selects and group extremes at ties), gradients of
``unsafe_indices`` kernels with guarded stores and partial groups, gradients with respect to
scalar arguments, and kernels launched on streams; all against float64 central differences."""
import importlib
import math
import os
import subprocess

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params
from tinykernels.testing import fuzz as F

GC = importlib.import_module("tinykernels.testing.fuzz.gradcheck")
GG = importlib.import_module("tinykernels.testing.fuzz.gradgen")
AD = importlib.import_module("tinykernels.autodiff")     # the module (tk.autodiff is the function)
CPU_OK = tk.CPU.available()[0]
needs_cpu = pytest.mark.skipif(not CPU_OK, reason="no C compiler for the CPU backend")
NARROW = F.Options(grad=True, grad_narrow=1.0)


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    return tk.backend(request.param)


# --- the fuzzer's narrow mode ------------------------------------------------------------------

def test_narrow_cases_are_an_option_that_keeps_the_other_seeds():
    """The narrow choice has an RNG of its own: with it off every seed keeps its kernel, and a
    narrow case is that kernel with its float types named by x0.dtype (so float64 arrays
    instantiate the oracle) and its arrays rounded to float16 / bfloat16 (accumulators float32)."""
    ml = pytest.importorskip("ml_dtypes")
    seen = set()
    for seed in range(96000000, 96000012):
        plain = GG.generate_grad(seed, 0.3, 0.3)
        assert plain.source == F.generate(seed, F.Options(grad=True, grad_local=0.3, grad_unsafe=0.3)).source
        nar = GG.generate_grad(seed, 0.3, 0.3, 1.0)
        assert nar.mode == "grad-narrow" and plain.mode == "grad"
        back = (nar.source.replace("tk.private(x0.dtype,", "tk.private(tk.float64,")
                .replace("tk.localmem(x0.dtype,", "tk.localmem(tk.float64,").replace("x0.dtype(", "float("))
        assert back == plain.source
        for a, b in zip(nar.args, plain.args):
            if a.kind == "array" and np.asarray(b.value).dtype == np.float64:
                want = np.float32 if a.role == "acc" else (np.float16 if "narrow-float16" in nar.features
                                                           else ml.bfloat16)
                assert np.asarray(a.value).dtype == want
                np.testing.assert_array_equal(np.asarray(a.value), np.asarray(b.value).astype(want))
        seen |= {f for f in nar.features if f.startswith("narrow-")}
    assert seen == {"narrow-float16", "narrow-bfloat16"}


def test_a_narrow_reproducer_keeps_its_mode_and_dtypes(tmp_path):
    pytest.importorskip("ml_dtypes")
    case = F.generate(96000005, NARROW)
    path = F.write_reproducer(case, str(tmp_path / "g.py"), (), ["CPU"])
    ns = {"__name__": "g", "__file__": path}
    exec(compile(open(path).read(), path, "exec"), ns)
    back = F.case_from_namespace(ns, case.kname)
    assert back.mode == "grad-narrow"
    for a, b in zip(back.args, case.args):
        if a.kind == "array":
            assert np.asarray(a.value).dtype == np.asarray(b.value).dtype
            assert np.asarray(a.value).tobytes() == np.asarray(b.value).tobytes()


@needs_cpu
def test_narrow_cases_agree_with_their_float64_oracle():
    """A float16 seed of the first run (gathered reads, an in-place update, selects): the
    interpreter's and the CPU's narrow gradients, tangents and results within the tolerance of
    their float64 oracle (bfloat16 seeds: the fuzz runs, docs/fuzzing.md)."""
    pytest.importorskip("ml_dtypes")
    for seed in (96000002,):
        case = F.generate(seed, NARROW)
        ms = F.check_case(case, ["CPU"], "INTERP")
        assert not ms, "\n".join(map(str, ms))
        assert "grad-skipped" not in case.features and case.narrow_used < 0.5


@needs_cpu
def test_the_narrow_checker_finds_a_lost_shadow(monkeypatch):
    """A planted bug of the class adx22 fixed: the launcher's float32 copy of a narrow shadow
    starts at zero instead of the caller's shadow, so the seed of a read-only input (and any
    gradient the shadow held) is lost. The float64 oracle keeps it: a grad-narrow mismatch."""
    pytest.importorskip("ml_dtypes")
    real = AD._widened
    monkeypatch.setattr(AD, "_widened", lambda shadow, backend: np.zeros_like(real(shadow, backend)))
    ms = F.check_case(F.generate(96000002, NARROW), ["CPU"], "INTERP")
    assert {m.kind for m in ms} == {"grad-narrow"}, "\n".join(map(str, ms))


OVERFLOW_SRC = '''import tinykernels as tk


@tk.kernel
def kover(y0, x0, w):
    i = tk.index()
    y0[i] = x0[i] * 40000.0 * w
'''


@needs_cpu
def test_a_narrow_result_beyond_the_type_is_not_compared(tmp_path):
    """A harness false positive of the first run (seed 96000008): a float16 tangent of -235873
    is -inf, the oracle's float64 one finite. A point where an oracle's result exceeds a quarter
    of the narrow type's largest value is re-drawn, and a case with no other point is skipped."""
    case = F.Case(1, OVERFLOW_SRC, "kover",
                  [F.ArgSpec("y0", "array", np.zeros(4, np.float16), "out"),
                   F.ArgSpec("x0", "array", np.linspace(-1, 1, 4).astype(np.float16), "in"),
                   F.ArgSpec("w", "scalar", 1.25)], 4)
    case.mode = "grad-narrow"
    ms = F.check_case(case, ["CPU"], "INTERP")
    assert not ms and "grad-skipped" in case.features


UNDERFLOW_SRC = '''import tinykernels as tk


@tk.kernel
def kunder(y0, x0, w):
    i = tk.index()
    y0[i] = x0[i] * w * 1e-9
'''


@needs_cpu
def test_a_narrow_result_below_the_subnormals_is_zero():
    """A harness false positive of the second run (seed 96000051): float16 tangents of 2.8e-11
    are 0.0 (the smallest float16 subnormal is 6e-8), and the tolerance relative to the array's
    magnitude alone was 1e-12. It now has the type's smallest subnormal in it."""
    case = F.Case(2, UNDERFLOW_SRC, "kunder",
                  [F.ArgSpec("y0", "array", np.zeros(4, np.float16), "out"),
                   F.ArgSpec("x0", "array", np.linspace(-1, 1, 4).astype(np.float16), "in"),
                   F.ArgSpec("w", "scalar", 1.25)], 4)
    case.mode = "grad-narrow"
    ms = F.check_case(case, ["CPU"], "INTERP")
    assert not ms and "grad-skipped" not in case.features, "\n".join(map(str, ms))


# --- fuzz seed 90500158: GCC's loop distribution read a seed after zeroing it ----------------------

@tk.kernel
def reduce_seeds(y0, y1, acc0, x0):
    i = tk.index()
    v2 = x0[i]
    v3 = tk.group_reduce(v2, "add")
    tk.atomic_add(acc0, i % 3, math.tanh(v3))
    y0[i] = v2
    y1[i] = v3


@pytest.mark.parametrize("dev", [p for p in backend_params("CPU", "INTERP")])
def test_the_seed_of_a_group_reduce_result_reaches_the_inputs(dev):   # fixed: gcc-ldist-read-after-zero
    """Seed 90500158, minimized: with dy1 = (1, 0), y1 = the group's sum of x gives dx = (1, 1)
    (plus dy0 = (1, 0) through y0 = x: (2, 1)). The CPU gave (1, 0): GCC 12.2 at -O3 ran the
    adjoint item loop's read of dy1[i] after its store dy1[i] = 0 (loop distribution)."""
    be = tk.backend(dev)
    x = np.array([-0.8, -0.6, 0.4, 1.3])
    for dy0, dy1, dacc, want in (([1.0, 0.0], [0.0, 1.0], [0.0, 0.0, 0.0], [2.0, 1.0]),
                                 ([0.0, 0.0], [1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0]),
                                 ([0.0, 0.0], [0.0, 0.0], [1.0, 2.0, 3.0], [3 / math.cosh(-1.4) ** 2] * 2)):
        sh = [np.array(dy0), np.array(dy1), np.array(dacc)]
        dx = np.zeros(4)
        tk.adjoint(reduce_seeds)(be)(np.zeros(2), sh[0], np.zeros(2), sh[1], np.zeros(3), sh[2], x.copy(), dx,
                                     ndrange=2, workgroupsize=2)
        np.testing.assert_allclose(dx, want + [0.0, 0.0], rtol=1e-14)
        assert not sh[0].any() and not sh[1].any()          # consumed


@needs_cpu
def test_the_cpu_toolchain_avoids_the_loop_distribution_miscompile(tmp_path):   # fixed: gcc-ldist-read-after-zero
    """The 30-line C program of the miscompile, built with the kernels' flags (as an executable),
    runs right (GCC 12.2 at plain -O3: exit status 1)."""
    C = importlib.import_module("tinykernels.runtime.compiler")
    tc = C.toolchain()
    src = tmp_path / "ldist.c"
    src.write_text(C.LDIST_PROBE)
    flags = [f for f in tc.flags if f not in ("-shared", "-fPIC")]
    r = subprocess.run([*tc.cmd, *flags, "-o", str(tmp_path / "ldist"), str(src), "-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(tmp_path / "ldist")]).returncode == 0


@needs_cpu
def test_gcc_kernels_do_not_distribute_loops_into_patterns():   # fixed: gcc-ldist-read-after-zero
    """Every GCC gets the flag (the miscompile is not tied to -march=native); clang does not
    know it."""
    C = importlib.import_module("tinykernels.runtime.compiler")
    tc = C.toolchain()
    assert ("-fno-tree-loop-distribute-patterns" in tc.flags) == C.is_gcc(tc.version)


@needs_cpu
def test_seed_90500158_agrees():   # fixed: gcc-ldist-read-after-zero
    ms = F.check_case(F.generate(90500158, F.Options(grad=True, grad_local=0.3)), ["CPU"], "INTERP")
    assert not ms, "\n".join(map(str, ms))


# --- by hand: forward and reverse mode against float64 central differences ----------------------

def _put(be, a):
    a = np.array(a)
    return a if be.is_host else tk.asarray(a, backend=be)


def _get(a):
    return np.array(a.numpy() if isinstance(a, tk.Array) else a, dtype=np.float64)


def _final(be, fn, args):
    """The final values of the float arrays of ``args`` (('a', array) | ('s', float) | ('c', x))
    after ``fn``."""
    xs = [_put(be, v) if k == "a" else v for k, v in args]
    fn(*xs)
    tk.synchronize(be)
    return [_get(x) for (k, _), x in zip(args, xs) if k == "a"]


def check_both_modes(be, fn, args, seed=0, h=1e-6):
    """Forward mode's ``J v`` element by element, and reverse mode's ``<J^T u, v>`` (the Active
    scalars' gradients included), against central differences of the whole state along ``v``."""
    rng = np.random.default_rng(seed)
    v = [rng.standard_normal(np.shape(a)) if k in "as" else None for k, a in args]
    u = [rng.standard_normal(np.shape(a)) if k == "a" else None for k, a in args]

    def at(t):
        return [(k, a + t * d) if k == "a" else (k, float(a + t * d)) if k == "s" else (k, a)
                for (k, a), d in zip(args, v)]
    fd = [(p - m) / (2 * h) for p, m in zip(_final(be, fn, at(h)), _final(be, fn, at(-h)))]
    xs, tangents = [], []
    for (k, a), d in zip(args, v):
        if k == "a":
            tangents.append(_put(be, d))
            xs.append(tk.Duplicated(_put(be, a), tangents[-1]))
        else:
            xs.append(tk.Duplicated(float(a), float(d)) if k == "s" else tk.Const(a))
    tk.autodiff(tk.Forward, fn, *xs)
    tk.synchronize(be)
    for j, (t, want) in enumerate(zip(tangents, fd)):
        np.testing.assert_allclose(_get(t), want, rtol=1e-5, atol=1e-5 * (np.max(np.abs(want)) + 1),
                                   err_msg=f"forward mode, array {j}")
    xs, shadows, scal_v = [], [], []
    for (k, a), d, s in zip(args, v, u):
        if k == "a":
            shadows.append(_put(be, s))
            xs.append(tk.Duplicated(_put(be, a), shadows[-1]))
        elif k == "s":
            xs.append(tk.Active(float(a)))
            scal_v.append(d)
        else:
            xs.append(tk.Const(a))
    grads = tk.autodiff(tk.Reverse, fn, *xs) or ()
    tk.synchronize(be)
    vs = [d for (k, _), d in zip(args, v) if k == "a"]
    us = [s for (k, _), s in zip(args, u) if k == "a"]
    ad = sum(float(np.sum(_get(s) * d)) for s, d in zip(shadows, vs)) + sum(float(g) * d for g, d in zip(grads, scal_v))
    want = sum(float(np.sum(s * f)) for s, f in zip(us, fd))
    assert abs(ad - want) <= 1e-5 * (abs(want) + 1), f"reverse mode: <J^T u, v> = {ad!r}, differences {want!r}"


@tk.kernel
def loop_exits(y, x, w):
    i = tk.index()
    n = x.shape[0]
    acc = 0.0
    for k in range(8):
        t = x[(i + k) % n]
        if t < -1.0:
            continue
        acc = acc * w + math.sin(t)
        if acc > 1.2:
            break
    m = x[i]
    c = 0
    while m < 2.0 and c < 10:
        m = m + w * x[(i + c) % n] * x[(i + c) % n] + 0.1
        c += 1
    y[i] = acc + m * m


@tk.func
def early(a, b):
    if a > 0.5:
        return a * b
    if b < -0.3:
        return math.exp(b)
    return a + b * b


@tk.kernel
def funcs_atomics_private(acc, y, x, idx, w):
    i = tk.index()
    n = x.shape[0]
    p = tk.private(tk.float64, (4,))
    for m in range(4):
        p[m] = x[(i + m) % n] * w
    p[idx[i] % 4] = p[idx[i] % 4] * p[(idx[i] + 1) % 4]
    p[0] += p[3] * x[i]
    v = early(x[i], p[1] * w) + early(p[2], x[i])
    tk.atomic_add(acc, idx[i] % 3, v * v)
    tk.atomic_add(acc, 0, math.sin(x[i]))
    y[i] = v + p[0] + p[idx[i] % 4]


@tk.kernel
def local_collectives(y, x, w):
    i = tk.index()
    l = tk.index(tk.Local, tk.Linear)
    lm = tk.localmem(tk.float64, (8,))
    lm[l] = early(x[i], w) * x[i]
    tk.synchronize()
    s = lm[(l + 1) % 8] + lm[l] * 0.5
    r = tk.group_reduce(s * x[i], "add")
    m = tk.group_reduce(x[i], "max")
    c = tk.group_scan(x[i] * w, "add", inclusive=False)
    y[i] = r + m * s + c


@tk.kernel(unsafe_indices=True)
def unsafe_1d(y, io, x, w):
    gi = tk.index()
    n = y.shape[0]
    ok = gi < n
    i = min(gi, n - 1)
    v = early(x[i], w) + w * x[i + 1]
    if ok:
        y[gi] = v * v
        io[gi] = io[gi] * v
    r = tk.group_scan(v, "add")
    if ok:
        y[gi] += r


@tk.kernel(unsafe_indices=True)
def unsafe_2d(y, x, w):
    q0, q1 = tk.index(tk.Global, tk.Cartesian)
    n0 = y.shape[0]
    n1 = y.shape[1]
    ok = q0 < n0 and q1 < n1
    i = min(q0, n0 - 1) * n1 + min(q1, n1 - 1)
    lm = tk.localmem(tk.float64, (4, 2))
    a, b = tk.index(tk.Local, tk.Cartesian)
    lm[a, b] = x[i] * w
    tk.synchronize()
    s = lm[(a + 1) % 4, b] + lm[a, (b + 1) % 2]
    if ok:
        y[q0, q1] = s * x[i]


@tk.kernel
def sin_scaled(t, x, w):
    i = tk.index()
    t[i] = math.sin(x[i]) * w


@tk.kernel
def square_in_place(t, x):
    i = tk.index()
    t[i] = t[i] * x[i] + t[i] * t[i]


@tk.kernel
def neighbours(y, t, x):
    i = tk.index()
    n = x.shape[0]
    y[i] = t[i] * t[(i + 1) % n] + x[i]


@tk.kernel
def ties(y, a, b, w):
    i = tk.index()
    y[i] = max(a[i], b[i]) * w + min(a[i], b[i]) + (a[i] if a[i] >= b[i] else b[i])


@tk.kernel
def group_ties(y, x):
    i = tk.index()
    m = tk.group_reduce(x[i], "max")
    s = tk.group_reduce(x[i] * x[i], "min")
    y[i] = m + s * 2.0 + tk.clamp(x[i], -0.5, 0.5) + abs(x[i])


def test_loops_with_data_dependent_exits(be):
    x = np.random.default_rng(1).uniform(-1.5, 1.5, 16)
    check_both_modes(be, lambda y, x, w: loop_exits(be)(y, x, w, ndrange=16),
                     [("a", np.zeros(16)), ("a", x), ("s", 0.8)])


def test_early_returns_atomics_and_private_arrays(be):
    rng = np.random.default_rng(2)
    x, idx = rng.uniform(-1.5, 1.5, 16), _put(be, rng.integers(0, 7, 16).astype(np.int32))
    check_both_modes(be, lambda acc, y, x, i, w: funcs_atomics_private(be)(acc, y, x, i, w, ndrange=16),
                     [("a", np.zeros(3)), ("a", np.zeros(16)), ("a", x), ("c", idx), ("s", 0.9)])


def test_local_memory_and_collectives(be):
    x = np.random.default_rng(3).uniform(-1.5, 1.5, 16)
    check_both_modes(be, lambda y, x, w: local_collectives(be)(y, x, w, ndrange=16, workgroupsize=8),
                     [("a", np.zeros(16)), ("a", x), ("s", 0.7)])


def test_unsafe_indices_with_guarded_stores_and_partial_groups(be):
    rng = np.random.default_rng(4)
    x = rng.uniform(-1.5, 1.5, 16)
    check_both_modes(be, lambda y, io, x, w: unsafe_1d(be)(y, io, x, w, ndrange=13, workgroupsize=4),
                     [("a", np.zeros(13)), ("a", rng.uniform(-1, 1, 13)), ("a", x), ("s", 0.9)])
    check_both_modes(be, lambda y, x, w: unsafe_2d(be)(y, x, w, ndrange=(5, 3), workgroupsize=(4, 2)),
                     [("a", np.zeros((5, 3))), ("a", x), ("s", 0.9)])


@tk.kernel
def two_scalars(y, x, w, s):
    i = tk.index()
    t = w * x[i]
    for k in range(3):
        t = t * s + w
    y[i] = y[i] * s + t + s * s


def test_scalar_arguments_passed_twice_and_to_two_launches(be):
    """w reaches three launches and s is passed to both scalar parameters of one launch: each
    Active scalar's gradient sums every parameter that received that very object."""
    x = np.random.default_rng(5).uniform(-1.5, 1.5, 16)

    def fn(y, x, w, s):
        sin_scaled(be)(y, x, w, ndrange=16)
        two_scalars(be)(y, x, w, s, ndrange=16)
        two_scalars(be)(y, x, s, s, ndrange=16)
        sin_scaled(be)(x, y, w, ndrange=16)
    check_both_modes(be, fn, [("a", np.zeros(16)), ("a", x), ("s", 0.8), ("s", -0.4)])


def test_kernels_on_streams(be):
    """Launches on two streams ordered by an event, and a copy on a stream from a temporary of
    the backend (a NumPy source is read when tk.copyto is called: docs/streams)."""
    x = np.random.default_rng(6).uniform(-1.5, 1.5, 16)
    s1, s2 = be.stream(), be.stream()

    def two(y, t, x, w):
        sin_scaled(be)(t, x, w, ndrange=16, stream=s1)
        s2.wait(square_in_place(be)(t, x, ndrange=16, stream=s1))
        neighbours(be)(y, t, x, ndrange=16, stream=s2)
        square_in_place(be)(t, x, ndrange=16, stream=s2)

    def copied(y, t, x, w):
        tmp = tk.zeros(16, dtype=tk.float64, backend=be)
        sin_scaled(be)(tmp, x, w, ndrange=16, stream=s1)
        tk.copyto(t, tmp, stream=s1)
        square_in_place(be)(t, x, ndrange=16, stream=s1)
        neighbours(be)(y, t, x, ndrange=16, stream=s1)
    for fn in (two, copied):
        check_both_modes(be, fn, [("a", np.zeros(16)), ("a", np.zeros(16)), ("a", x), ("s", 0.8)])


def test_selects_and_group_extremes_at_ties(be):
    """At a tie max/min share the adjoint (and forward mode averages the tangents), a select
    takes its chosen operand, a group max/min the mean of the tied items' tangents (reverse:
    shares), clamp at its bounds all to x, abs at 0 nothing (docs/autodiff.md)."""
    a = np.array([1.0, -2.0, 0.5, 3.0])
    ta, tb, w, dw = np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0, 30.0, 40.0]), 0.7, 0.3
    ty = _put(be, np.zeros(4))
    tk.autodiff(tk.Forward, lambda y, a_, b_, w_: ties(be)(y, a_, b_, w_, ndrange=4), tk.Duplicated(_put(be, np.zeros(4)), ty),
                tk.Duplicated(_put(be, a), _put(be, ta)), tk.Duplicated(_put(be, a), _put(be, tb)), tk.Duplicated(w, dw))
    np.testing.assert_allclose(_get(ty), (ta + tb) / 2 * w + a * dw + (ta + tb) / 2 + ta, rtol=1e-14)
    da, db = _put(be, np.zeros(4)), _put(be, np.zeros(4))
    (gw,) = tk.autodiff(tk.Reverse, lambda y, a_, b_, w_: ties(be)(y, a_, b_, w_, ndrange=4),
                        tk.Duplicated(_put(be, np.zeros(4)), _put(be, np.ones(4))), tk.Duplicated(_put(be, a), da),
                        tk.Duplicated(_put(be, a), db), tk.Active(w))
    np.testing.assert_allclose(_get(da), w / 2 + 0.5 + 1.0, rtol=1e-14)
    np.testing.assert_allclose(_get(db), w / 2 + 0.5, rtol=1e-14)
    assert gw == pytest.approx(a.sum(), rel=1e-14)
    x = np.array([0.5, 0.5, -0.5, 0.2, 0.3, 0.3, 0.1, -0.3])
    tx, ty = np.arange(1.0, 9.0), _put(be, np.zeros(8))
    tk.autodiff(tk.Forward, lambda y, x_: group_ties(be)(y, x_, ndrange=8, workgroupsize=4),
                tk.Duplicated(_put(be, np.zeros(8)), ty), tk.Duplicated(_put(be, x), _put(be, tx)))
    own = np.where(np.abs(x) <= 0.5, 1.0, 0.0) + np.sign(x)
    want = np.repeat([(1 + 2) / 2 + 2 * (2 * 0.2 * 4), (5 + 6) / 2 + 2 * (2 * 0.1 * 7)], 4) + tx * own
    np.testing.assert_allclose(_get(ty), want, rtol=1e-14)
    dx = _put(be, np.zeros(8))
    tk.autodiff(tk.Reverse, lambda y, x_: group_ties(be)(y, x_, ndrange=8, workgroupsize=4),
                tk.Duplicated(_put(be, np.zeros(8)), _put(be, np.ones(8))), tk.Duplicated(_put(be, x), dx))
    want = own.copy()
    want[[0, 1, 4, 5]] += 2.0
    want[3] += 4 * 2 * 2 * 0.2
    want[6] += 4 * 2 * 2 * 0.1
    np.testing.assert_allclose(_get(dx), want, rtol=1e-14)
