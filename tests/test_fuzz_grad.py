"""The fuzzer's autodiff mode (``scripts/fuzz.py --grad``; testing/fuzz/gradgen.py and
gradcheck.py, docs/fuzzing.md) and one regression test per autodiff bug it found (``# fixed: <id>``,
registered in FIXED_BUGS)."""
import ast
import importlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, dev, fdt, host  # noqa: F401
from tinykernels.passes import autodiff as PAD
from tinykernels.testing import fuzz as F

CPU_OK = tk.CPU.available()[0]
needs_cpu = pytest.mark.skipif(not CPU_OK, reason="no C compiler for the CPU backend")
GRAD = F.Options(grad=True)
AD = importlib.import_module("tinykernels.autodiff")     # the module (tk.autodiff is the function)


@pytest.fixture(params=backend_params('INTERP', 'CPU', 'CL'), scope="module")
def be(request):
    return tk.backend(request.param)


# ----------------------------------------------------------------------------- the generator

def test_grad_cases_are_deterministic_differentiable_float64_kernels():
    for seed in range(45000000, 45000040):
        a, b = F.generate(seed, GRAD), F.generate(seed, GRAD)
        assert a.source == b.source and a.mode == "grad" and "grad" in a.features
        ast.parse(a.source)
        for s in a.args:
            if s.kind == "array":
                assert s.value.dtype in (np.float64, np.int32), (seed, s.name)
                assert s.value.dtype == np.float64 or s.const          # integer arrays are tk.Const
            else:
                assert isinstance(s.value, float)
        for bad in ("floor", "round(", "int(", "tk.uniform", "atomic_min", "atomic_max", "math.inf", "math.nan"):
            assert bad not in a.source, (seed, bad)


def test_grad_cases_cover_the_constructs_the_brief_names():
    feats = set()
    for seed in range(45000000, 45000100):
        feats |= F.generate(seed, GRAD).features
    assert {"for", "while", "if", "select", "private", "func", "atomic", "io-update", "io-read", "gather",
            "mod-read", "offset-read", "kink", "scalar", "div", "pow", "exp", "log"} <= feats


def test_grouped_grad_cases_are_an_option_that_keeps_the_other_seeds():
    for seed in range(45000000, 45000020):
        assert F.generate(seed, GRAD).source == F.generate(seed, F.Options(grad=True, grad_local=0.0)).source
        c = F.generate(seed, F.Options(grad=True, grad_local=1.0))
        assert {"localmem", "barrier"} <= c.features and c.ndrange % c.workgroupsize == 0   # no masked items
        assert F.generate(seed, GRAD).workgroupsize is None


def test_default_options_still_make_the_forward_cases():
    assert F.generate(45000000).mode == "" and F.generate(45000000, F.Options()).mode == ""


def test_a_grad_reproducer_keeps_its_mode(tmp_path):
    case = F.generate(45000001, GRAD)
    path = F.write_reproducer(case, str(tmp_path / "g.py"), (), ["CPU"])
    ns = {"__name__": "g", "__file__": path}
    exec(compile(open(path).read(), path, "exec"), ns)
    back = F.case_from_namespace(ns, case.kname)
    assert back.mode == "grad" and back.ndrange == case.ndrange


# ----------------------------------------------------------------------------- the checker

@needs_cpu
def test_generated_grad_cases_agree():
    """A bounded run: reverse mode against finite differences, forward against reverse, CPU
    against the interpreter (these seeds exposed both bugs below)."""
    for seed in (45000003, 45000005):
        ms = F.check_case(F.generate(seed, GRAD), ["CPU"], "INTERP")
        assert not ms, "\n".join(map(str, ms))


@needs_cpu
def test_the_checker_finds_a_planted_wrong_derivative(monkeypatch):
    """d x**c / dx planted wrong (twice its value) in both modes: forward and reverse still
    agree with each other, the finite differences catch it."""
    orig = PAD.pow_partials

    def wrong(b, a, c, e):
        da, dc = orig(b, a, c, e)
        return b.op("*", da, b.c(2.0, e.ty)), dc
    monkeypatch.setattr(PAD, "pow_partials", wrong)
    case = F.generate(45000000, GRAD)
    case.source = case.source.replace("y1[i] = v1", "y1[i] = (v1 * 0.5) ** 3")   # a fresh kernel: no cache
    assert "(v1 * 0.5) ** 3" in case.source
    kinds = {m.kind for m in F.check_case(case, ["CPU"], "INTERP")}
    assert "grad-fd" in kinds and "grad-jvp" not in kinds


def test_differences_that_disagree_with_each_other_are_not_smooth(monkeypatch):
    """A harness false positive (seed 89000435, adx20): expm1(sin(p ** 3)) with p ** 3 = 7.6e16
    (an ulp of 16: billions of periods of sin within a step) has central differences that do not
    agree at h / 2, h and 2h, but they agreed within 1e-6 of the reverse-mode value 1.2e19, the
    scale _smooth_fd judged them on; such a point is now not smooth (re-sampled, else skipped),
    while differences that agree with each other are still compared with a wrong gradient."""
    GC = importlib.import_module("tinykernels.testing.fuzz.gradcheck")
    w0 = float.fromhex("0x1.55dd0c2aadae8p+0")          # the seed's scalar w

    def f(w):                                           # its minimized kernel, y0 per item
        s3 = w
        for _ in range(4):
            s3 = s3 * 0.5 + s3
        return math.expm1(math.sin(math.pow(s3 * s3 + 0.5, s3 * 0.5) ** 3))
    monkeypatch.setattr(GC, "_fd", lambda case, b, fn, fl, ints, w, u, v, dw, h: (f(w0 + h) - f(w0 - h)) / (2 * h))
    assert GC._smooth_fd(None, None, None, {}, {}, w0, {}, {}, 1.0, 1.2402857176936102e+19) is None
    monkeypatch.setattr(GC, "_fd", lambda case, b, fn, fl, ints, w, u, v, dw, h: (math.sin(w0 + h) - math.sin(w0 - h))
                        / (2 * h))
    fd = GC._smooth_fd(None, None, None, {}, {}, w0, {}, {}, 1.0, 1e19)
    assert fd is not None and abs(fd - math.cos(w0)) < 1e-9


@needs_cpu
def test_a_kernel_whose_result_overflows_has_no_gradient_to_compare():
    """A harness false positive (seed 89000608, --grad-local 0.3, adx21): the kernel's output
    overflowed to inf, every backend's gradient was inf there and both modes' <u, J v> NaN; the
    checker took inf against inf (inf - inf is NaN) and NaN against NaN for mismatches. Equal
    values now agree, and where the result is not finite a non-finite side of the identity is
    not compared (the case is marked grad-undefined)."""
    case = F.generate(89000608, F.Options(grad=True, grad_local=0.3))
    ms = F.check_case(case, ["CPU"], "INTERP")
    assert not ms, "\n".join(map(str, ms))
    assert "grad-undefined" in case.features
    GC = importlib.import_module("tinykernels.testing.fuzz.gradcheck")
    inf = np.array([1.0, np.inf])
    assert GC._where({"a": inf}, {"a": inf.copy()}, 1e-9) is None
    assert GC._where({"a": inf}, {"a": -inf}, 1e-9) is not None
    assert GC._agree(math.nan, math.nan, 1.0, True) and not GC._agree(math.nan, math.nan, 1.0, False)
    assert not GC._agree(1.0, 2.0, 1.0, True)


# ----------------------------------------------------------------------------- regressions

@tk.kernel
def k_unused_scalar(y, x, w):
    i = tk.index()
    y[i] = x[i] * 2.0


@tk.kernel
def k_scalar_in_a_condition(y, x, w):
    i = tk.index()
    if w > 0.5:                   # w decides, but no derivative flows into it
        y[i] = x[i] * 3.0
    else:
        y[i] = x[i]


def _dirty_scratch(monkeypatch):
    """Host scratch arrays filled with NaN instead of whatever np.empty returns."""
    orig = AD._dummy

    def dummy(backend, shape, dtype, empty=False):
        a = orig(backend, shape, dtype, empty)
        if empty and isinstance(a, np.ndarray) and a.dtype.kind == "f":
            a[...] = np.nan
        return a
    monkeypatch.setattr(AD, "_dummy", dummy)


# fixed: ad-unused-scalar-partial
@pytest.mark.parametrize("k", [k_unused_scalar, k_scalar_in_a_condition], ids=["unused", "condition"])
def test_bug_ad_unused_scalar_partial(be, k, monkeypatch):
    """A float scalar nothing differentiable flows into has gradient 0 (its partial-sums scratch
    array was never written: 3.0 or 5e-324 from np.empty on the interpreter)."""
    _dirty_scratch(monkeypatch)
    n = 37
    x, dx = dev(np.linspace(-1, 1, n), be), dev(np.zeros(n), be)
    y, dy = dev(np.zeros(n), be), dev(np.ones(n), be)

    def fn(y, x, w):
        k(be)(y, x, w, ndrange=n)
    (gw,) = tk.autodiff(tk.Reverse, fn, tk.Duplicated(y, dy), tk.Duplicated(x, dx), tk.Active(0.7))
    assert gw == 0.0
    np.testing.assert_array_equal(host(dx), np.full(n, 3.0 if k is k_scalar_in_a_condition else 2.0))
    dws = dev(np.full(1, 5.0), be)        # tk.adjoint: the shadow accumulates nothing
    tk.adjoint(k)(be)(y, dev(np.ones(n), be), x, dev(np.zeros(n), be), 0.7, dws, ndrange=n)
    assert host(dws)[0] == 5.0


@tk.kernel
def k_private_in_blocks(y, x, idx):
    i = tk.index()
    n = y.shape[0]
    s = x[i]
    if x[i] > 0.0:
        p = tk.private(tk.float64, (2,))
        for m in range(2):
            p[m] = math.sin(x[(i + m) % n])
        s = p[0] * p[1]
    for j in range(idx[i] % 3 + 1):
        q = tk.private(tk.float64, (3,))
        for m in range(3):
            q[m] = x[(i + j + m) % n] * s
        s = q[0] + q[2] * q[1]
    y[i] = s


# fixed: ad-private-in-block
def test_bug_ad_private_in_block(be):
    """A tk.private array declared inside an `if` or a loop body: the reverse sweep reads it
    outside that block (the C adjoint failed to compile: the array was out of scope)."""
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    n = 11
    rng = np.random.default_rng(3)
    xh = rng.uniform(-1, 1, n)
    idx = dev(rng.integers(0, 5, n), be, np.int32)
    u = rng.standard_normal(n)

    def loss(xv):
        y = dev(np.zeros(n), be)
        k_private_in_blocks(be)(y, dev(xv, be), idx, ndrange=n)
        return float(np.dot(u, host(y)))
    x, dx = dev(xh, be), dev(np.zeros(n), be)
    y, dy = dev(np.zeros(n), be), dev(u, be)
    tk.autodiff(tk.Reverse, lambda y, x, idx: k_private_in_blocks(be)(y, x, idx, ndrange=n),
                tk.Duplicated(y, dy), tk.Duplicated(x, dx), tk.Const(idx))
    h = 1e-6
    fd = np.array([(loss(xh + h * e) - loss(xh - h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(host(dx), fd, rtol=1e-6, atol=1e-8)


def test_every_grad_bug_is_registered():
    text = open(__file__).read()
    for bug in ("ad-unused-scalar-partial", "ad-private-in-block", "ad-dead-value-nan", "ad-zero-adjoint-inf-partial",
                "ad-saturated-inf-partial", "ad-adjoint-size"):
        assert bug in F.FIXED_BUGS and f"# fixed: {bug}\n" in text


@needs_cpu
def test_fuzz_script_grad_mode_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(os.path.dirname(__file__), "..", "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "fuzz.py")
    r = subprocess.run([sys.executable, script, "--grad", "--count", "1", "--seed", "45000003", "--jobs", "0",
                        "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 kernels, 0 mismatches" in r.stdout


@tk.kernel
def k_dead_overflow(y, x):
    i = tk.index()
    d = math.exp(x[i] * 1000.0)       # never reaches y; inf for x[0] == 1
    y[i] = x[i] * 2.0


def test_ad_dead_overflow_does_not_poison_the_gradient(be):   # fixed: ad-dead-value-nan
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    x, dx = dev([1.0, -1.0, 0.5], be), dev(np.zeros(3), be)
    y, dy = dev(np.zeros(3), be), dev(np.ones(3), be)
    tk.autodiff(tk.Reverse, lambda y, x: k_dead_overflow(be)(y, x, ndrange=3), tk.Duplicated(y, dy),
                tk.Duplicated(x, dx))
    np.testing.assert_array_equal(host(dx), [2.0, 2.0, 2.0])


# --- values with infinite partials that no output uses (exp(1000 * x) is inf at x = 1), dead
# everywhere (no adjoint code at all) or on the path taken (a zero adjoint, not multiplied in)

@tk.func
def _overflowing(v):
    return math.exp(v * 1000.0)


@tk.kernel
def k_dead_only_compared(y, x):
    i = tk.index()
    t = math.exp(x[i] * 1000.0)                     # only a branch condition
    m = int(math.tanh(math.exp(x[i] * 1000.0)))     # only an integer cast (then an integer operand)
    y[i] = (x[i] * 2.0 if t > 1.0 else x[i] * 3.0) + m


@tk.kernel
def k_dead_func_result(y, x):
    i = tk.index()
    r = _overflowing(x[i])                          # a @tk.func result nothing reads
    y[i] = x[i] * x[i]


@tk.kernel
def k_dead_loop(y, x):
    i = tk.index()
    s = 0.0
    for j in range(3):                              # a loop whose accumulator no output reads
        s += math.exp(x[i] * 1000.0 * (j + 1))
    y[i] = math.sin(x[i])


@tk.kernel
def k_min_inline(y, x):
    i = tk.index()
    y[i] = min(x[i], math.exp(x[i] * 1000.0)) + max(x[i], -math.exp(x[i] * 1000.0))


@tk.kernel
def k_unchosen_local(y, x):
    i = tk.index()
    e = math.exp(x[i] * 1000.0)                     # live, but its adjoint is 0 on the path taken
    f = e * 3.0
    z = min(x[i], e) + max(x[i], -e) + abs(x[i])
    w = f if x[i] < -0.7 else x[i]
    if x[i] > -0.9:
        y[i] = z + w
    else:
        y[i] = e + w


@tk.kernel
def k_saturated_overflow(y, x):
    i = tk.index()
    v = math.hypot(x[i] * 400.0, 2.0)               # seed 45100061: pow overflows, tanh saturates:
    y[i] = math.tanh(math.pow(v * v + 0.5, v * 0.5)) + x[i] * 2.0     # tanh' = 0 times pow' = inf


@tk.kernel
def k_atan2_overflow(y, x):
    i = tk.index()                                   # seed 85000131: atan2(cos(.), pow(.) ** 2 + 1)
    y[i] = math.atan2(math.cos(x[i]), math.pow(2.0, 1000.0 * x[i]) + 1.0) + x[i] * 2.0


@tk.kernel
def k_hypot(y, a, b):
    i = tk.index()
    y[i] = math.hypot(a[i], b[i])


def _reverse_vs_fd(kern, be, xs):
    """d sum(u * y) / dx by reverse mode vs float64 central differences of the kernel itself."""
    n = len(xs)
    u = np.linspace(0.5, 1.5, n)
    xh = np.array(xs, dtype=np.float64)

    def loss(xv):
        y = dev(np.zeros(n), be)
        kern(be)(y, dev(xv, be), ndrange=n)
        return float(np.dot(u, host(y)))
    x, dx = dev(xh, be), dev(np.zeros(n), be)
    y, dy = dev(np.zeros(n), be), dev(u, be)
    tk.autodiff(tk.Reverse, lambda y, x: kern(be)(y, x, ndrange=n), tk.Duplicated(y, dy), tk.Duplicated(x, dx))
    h = 1e-6
    fd = np.array([(loss(xh + h * e) - loss(xh - h * e)) / (2 * h) for e in np.eye(n)])
    assert np.isfinite(fd).all()
    np.testing.assert_allclose(host(dx), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kern", [k_dead_overflow, k_dead_only_compared, k_dead_func_result, k_dead_loop],
                         ids=lambda k: k.name)
def test_ad_dead_values_get_no_adjoint(be, kern):   # fixed: ad-dead-value-nan
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    _reverse_vs_fd(kern, be, [1.0, -1.0, 0.5, 0.25])


@pytest.mark.parametrize("kern", [k_min_inline, k_unchosen_local, k_saturated_overflow], ids=lambda k: k.name)
def test_ad_zero_adjoint_is_not_multiplied_by_an_infinite_partial(be, kern):   # fixed: ad-zero-adjoint-inf-partial
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    _reverse_vs_fd(kern, be, [1.0, -1.0, 0.5, 0.25, -0.8])


def test_ad_saturated_overflow_forward_mode(be):   # fixed: ad-saturated-inf-partial
    """Forward mode on k_saturated_overflow: the overflowed operand's infinite tangent times its
    saturated consumer's zero partial is 0, not NaN (the JVP matches reverse mode's VJP)."""
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    xs = np.array([1.0, -1.0, 0.5, 0.01])
    x, tx = dev(xs, be), dev(np.ones(4), be)
    y, ty = dev(np.zeros(4), be), dev(np.zeros(4), be)
    tk.autodiff(tk.Forward, lambda y, x: k_saturated_overflow(be)(y, x, ndrange=4), tk.Duplicated(y, ty),
                tk.Duplicated(x, tx))
    assert np.isfinite(host(ty)).all()
    np.testing.assert_allclose(host(ty)[:3], [2.0, 2.0, 2.0], rtol=1e-12)


def test_ad_atan2_of_an_overflowed_argument(be):   # fixed: ad-atan2-hypot-inf-partial
    """atan2(y, x) with x overflowed to inf (x >= 1.03 here): both partials are 0 (their limit;
    (x / h) / h was inf / inf: NaN), as finite differences say, in reverse and forward mode."""
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    xs = [1.5, -1.0, 0.5, 2.0, 0.25]
    _reverse_vs_fd(k_atan2_overflow, be, xs)
    x, tx = dev(np.array(xs), be), dev(np.ones(5), be)
    y, ty = dev(np.zeros(5), be), dev(np.zeros(5), be)
    tk.autodiff(tk.Forward, lambda y, x: k_atan2_overflow(be)(y, x, ndrange=5), tk.Duplicated(y, ty),
                tk.Duplicated(x, tx))
    t = host(ty)
    np.testing.assert_array_equal(t[[0, 3]], [2.0, 2.0])
    assert np.isfinite(t).all()


@tk.kernel
def k_saturating(y, x):
    i = tk.index()
    y[i, 0] = math.tanh(x[i])
    y[i, 1] = tk.sigmoid(x[i] * 2.0)


def test_ad_saturated_tanh_and_sigmoid_keep_their_digits(be):   # fixed: ad-saturated-tanh-partial
    """tanh' and sigmoid' where the functions round to +-1 (or 0 and 1) or nearly: within a few
    ulps of sech(x)**2 and e**-x / (1 + e**-x)**2 in 40 digits, in both modes, on every backend
    alike (1 - tanh(x)**2 was 0 or 2e-16 at x = 19 depending on the backend's last ulp of tanh)."""
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    from decimal import Decimal, localcontext
    xs = np.array([19.0, 18.7, -19.3, 25.0, 0.3, -300.0, 1e-9, -12.5])

    def want(v):
        with localcontext() as ctx:
            ctx.prec = 40
            t = (-2 * abs(Decimal(v))).exp()        # e**(-2 |x|): tanh at x, sigmoid at 2 x
            return [float(4 * t / (1 + t) ** 2), float(2 * t / (1 + t) ** 2)]
    w = np.array([want(v) for v in xs])
    n = len(xs)
    fn = lambda y, x: k_saturating(be)(y, x, ndrange=n)  # noqa: E731
    for col in range(2):
        seed = np.zeros((n, 2))
        seed[:, col] = 1.0
        dx = dev(np.zeros(n), be)
        tk.autodiff(tk.Reverse, fn, tk.Duplicated(dev(np.zeros((n, 2)), be), dev(seed, be)),
                    tk.Duplicated(dev(xs, be), dx))
        np.testing.assert_allclose(host(dx), w[:, col], rtol=4e-15, err_msg=f"reverse, column {col}")
    ty = dev(np.zeros((n, 2)), be)
    tk.autodiff(tk.Forward, fn, tk.Duplicated(dev(np.zeros((n, 2)), be), ty),
                tk.Duplicated(dev(xs, be), dev(np.ones(n), be)))
    np.testing.assert_allclose(host(ty), w, rtol=4e-15)


def test_ad_hypot_at_an_infinite_argument(be):   # fixed: ad-atan2-hypot-inf-partial
    """d hypot(a, b) = (a da + b db) / h: where a alone is infinite, its limit sign(a) da (a / h
    was inf / inf: NaN); 0 for the finite one; NaN stays at hypot(inf, inf) (no limit)."""
    if not be.supports_float64:
        pytest.skip("float64 kernel")
    inf = math.inf
    a, b = np.array([inf, -inf, 0.5, 3.0, inf]), np.array([2.0, -1.0, inf, -4.0, inf])
    want_a, want_b = np.array([1.0, -1.0, 0.0, 0.6, np.nan]), np.array([0.0, 0.0, 1.0, -0.8, np.nan])
    da, db = dev(np.zeros(5), be), dev(np.zeros(5), be)
    tk.autodiff(tk.Reverse, lambda y, a, b: k_hypot(be)(y, a, b, ndrange=5),
                tk.Duplicated(dev(np.zeros(5), be), dev(np.ones(5), be)), tk.Duplicated(dev(a, be), da),
                tk.Duplicated(dev(b, be), db))
    np.testing.assert_allclose(host(da), want_a, rtol=1e-15)
    np.testing.assert_allclose(host(db), want_b, rtol=1e-15)
    ty = dev(np.zeros(5), be)
    tk.autodiff(tk.Forward, lambda y, a, b: k_hypot(be)(y, a, b, ndrange=5), tk.Duplicated(dev(np.zeros(5), be), ty),
                tk.Duplicated(dev(a, be), dev(np.ones(5), be)), tk.Duplicated(dev(b, be), dev(np.zeros(5), be)))
    np.testing.assert_allclose(host(ty), want_a, rtol=1e-15)


def test_ad_dead_values_emit_no_adjoint_code():
    """The activity analysis leaves no trace of a dead value in the adjoint: the reverse sweep
    of k_dead_loop has no exp (the dead accumulator's partial) and the kernel's only exp is the
    forward sweep's (a tape-free float local still gets recomputed there)."""
    from tinykernels.autodiff import derived
    n = 4
    z = np.zeros(n)
    src = derived(k_dead_loop, "reverse", ("y", "x")).source(
        "CPU", z, z, z, z, np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64), ndrange=n)
    assert src.count("exp(") == 1, src


@tk.kernel
def k_nested_pows(y, x):
    i = tk.index()
    # fuzz seed 48100035's output statement: nested pows and atan2 in one expression
    p = math.pow(math.pow(x[i] * x[i] + 0.5, x[i + 1] * 0.5) * math.pow(x[i] * x[i] + 0.5, x[i + 1] * 0.5) + 0.5,
                 math.atan2(x[i], x[i + 2] * x[i + 2] + 1.0) * 0.5)
    y[i] = math.atan2((x[i + 2] - x[i]) ** 3, p * math.pow(math.pow(x[i] * x[i] + 0.5, x[i + 1] * 0.5)
                                                          * math.pow(x[i] * x[i] + 0.5, x[i + 1] * 0.5) + 0.5,
                                                          math.atan2(x[i], x[i + 2] * x[i + 2] + 1.0) * 0.5) + 1.0)


# fixed: ad-adjoint-size
def test_ad_adjoint_of_a_nested_statement_stays_small():
    """The partials referred to their primal operands by re-rendering them, so a long statement's
    adjoint grew quadratically (fuzz seeds 48100035, 48100047, 48100048 timed out after 120 s); the
    primal values are named locals now. Gradients against central finite differences."""
    from tinykernels.autodiff import derived
    n = 6
    z, x = np.zeros(n), np.zeros(n + 2)
    src = derived(k_nested_pows, "reverse", ("y", "x")).source(
        "CPU", z, z, x, x, np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64), ndrange=n)
    grow = len(src) - len(k_nested_pows.source("CPU", z, x, ndrange=n))
    assert grow < 15000, grow     # 21.8 KB before, 10.7 KB after
    rng = np.random.default_rng(48100035)
    xh = rng.uniform(0.2, 1.2, n + 2)
    w = rng.standard_normal(n)
    k = k_nested_pows(tk.CPU())

    def loss(v):
        y = np.zeros(n)
        k(y, v, ndrange=n)
        return float(w @ y)
    dx = np.zeros(n + 2)
    tk.autodiff(tk.Reverse, lambda a, b: k(a, b, ndrange=n), tk.Duplicated(np.zeros(n), w.copy()),
                tk.Duplicated(xh.copy(), dx))
    h = 1e-6
    fd = np.array([(loss(xh + h * e) - loss(xh - h * e)) / (2 * h) for e in np.eye(n + 2)])
    np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)
