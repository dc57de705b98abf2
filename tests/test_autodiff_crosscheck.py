"""tk.autodiff cross-checked (SPEC 7, 11): reverse and forward mode against jax.vjp / jax.jvp of
the same kernel raised into JAX operations (an independent derivative), and the adjoint identity
<u, J v> == <J^T u, v> between tk.autodiff's two modes, on hand-written classics
(tests/crosscheck_kernels.py) and on the fuzzer's gradient kernels
(src/tinykernels/testing/adcross.py is the checker)."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.testing.adcross import crosscheck, tk_reverse

import crosscheck_kernels as ck

HAS_JAX = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")

#: kernels whose raised form JAX cannot reverse (a data-dependent trip count is a while loop):
#: forward mode is still compared
WHILE_LOOPS = {"data_trip_for", "data_trip_while"}


def _args(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("case", ck.CASES + [ck.TIE_CASE, ck.POW_CASE], ids=lambda c: c[0])
def test_adjoint_identity(case):
    """<u, J v> == <J^T u, v> between forward and reverse mode (float scalars included)."""
    name, k, args, nd, wg = case
    fs = crosscheck(k, _args(args), nd, wg, backend="INTERP", seed=3, jax=False)
    assert fs == [], fs


@needs_jax
@pytest.mark.parametrize("case", ck.CASES, ids=lambda c: c[0])
def test_against_jax_of_the_raised_kernel(case):
    name, k, args, nd, wg = case
    fs = crosscheck(k, _args(args), nd, wg, backend="INTERP", seed=5)
    unraised = [f for f in fs if f.kind == "unraised"]
    assert [f for f in fs if f.mismatch] == [], fs
    assert bool(unraised) == (name in WHILE_LOOPS), unraised


@needs_jax
def test_raised_kernel_gradient_has_no_nan_from_masked_lanes():
    """jax.grad of a raised kernel: lanes an 'if' masks out (and lanes past the ndrange, whose
    locals are 0) compute 1/v and sqrt(v) at v <= 0 too; their cotangent 0 times the infinite
    or NaN partial was NaN, added into x by the load's transpose (ad18: a softmax row's
    x[0, 0], and here every x <= 0). Now 0, as tk.autodiff and finite differences say."""
    import jax
    import jax.numpy as jnp
    from tinykernels.jax import raise_kernel
    x = np.array([0.0, -1.0, 0.5, 2.0, -0.0, 1e-3, -3.0, 0.0])
    g = raise_kernel(ck.guarded, outputs=["y"], ndrange=7)
    with jax.enable_x64(True):
        got = np.asarray(jax.grad(lambda x_: jnp.sum(g(jnp.zeros(8), x_)))(jnp.asarray(x)))
    pos = x > 0
    want = np.where(pos, 0.5 / np.sqrt(np.where(pos, x, 1.0)) - 1.0 / np.where(pos, x, 1.0) ** 2, 2 * x)
    want[7] = 0.0                                     # past the ndrange
    np.testing.assert_allclose(got, want, rtol=1e-14)
    sm = raise_kernel(ck.softmax_row, outputs=["y"], ndrange=2)
    xs = np.random.default_rng(0).uniform(-3, 3, (2, 5))
    w = np.arange(10.0).reshape(2, 5)
    with jax.enable_x64(True):
        got = np.asarray(jax.grad(lambda x_: jnp.sum(sm(jnp.zeros((2, 5)), x_) * w))(jnp.asarray(xs)))
    p = np.exp(xs - xs.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(got, p * (w - (p * w).sum(1, keepdims=True)), rtol=1e-12, atol=1e-15)


@tk.kernel
def hypot_in_a_branch(io0, x1, x2, idx):
    """gradgen seed 85000126, minimized: XLA miscompiled the jitted JVP of jnp.hypot here."""
    i = tk.index()
    n = io0.shape[0]
    v1 = x1[idx[i]] - abs(x2[i + 1])
    v2 = math.exp(v1)
    p3 = tk.private(tk.float64, (3,))
    for m4 in range(3):
        p3[m4] = (x2[(i + m4) % n] if float(m4) <= v1 else v1)
    v5 = p3[0] * p3[2]
    if v1 <= v5:
        io0[i] = math.hypot(v2, v5 + 2.0)


@needs_jax
def test_raised_hypot_has_the_right_jvp_under_jit():
    """jax.jvp of the jitted raised kernel gave item 3's tangent as ~0 (finite differences and
    tk.autodiff: -0.159; right without jit or with XLA's algsimp pass disabled): XLA's simplifier
    miscompiled jnp.hypot's maximum/minimum JVP selects. The raise path now writes hypot with one
    select (codegen/jaxraise.py _hypot); tk.autodiff was right."""
    x1 = [1.0697880696834856, -1.0655636459305429, 1.279655981254269, -0.9402085634648643, -0.5095078644754943,
          -0.1145472181267626, 0.3897571840908822, 0.20669003269176578, -1.489109630173771, -0.7216506852980101]
    x2 = [0.4470302481314925, -1.0421481574827358, 1.0871037758830528, -0.4914795761351507, 1.401407614129917,
          -0.930748676146384, 0.724761893032488, 1.2757420653854634, 0.4929729382581869, 0.2968208656674425]
    args = [np.random.default_rng(0).uniform(-1.5, 1.5, 8), np.array(x1), np.array(x2),
            np.array([4, 3, 4, 1, 2, 5, 3, 3], np.int32)]
    fs = crosscheck(hypot_in_a_branch, args, (8,), None, backend="INTERP", seed=5)
    assert fs == [], fs


def test_kinks_at_ties_follow_the_documented_conventions():
    """At x == x2 (and x == 0) JAX's raised min/max/abs pick a side; tk.autodiff keeps its own
    conventions (docs/autodiff.md): a tie of max/min gives half to each operand, abs has 0 at 0,
    a comparison that is false at the tie takes the else branch. y = 1.5 max(x, x2) +
    1.5 min(2x, 2x2) + |x - x2| + |x| + (x if x > x2 else 3 x2)."""
    name, k, args, nd, wg = ck.TIE_CASE
    x = args[1]
    u = {0: np.ones(8), 1: np.zeros(8), 2: np.zeros(8)}
    inst = k(tk.backend("INTERP"))
    (jtu, _) = tk_reverse(lambda *a: inst(*a, ndrange=nd), _args(args), u, tk.backend("INTERP"))
    np.testing.assert_array_equal(jtu[1], 1.5 * 0.5 + 1.5 * 2 * 0.5 + 0.0 + np.sign(x))
    np.testing.assert_array_equal(jtu[2], 1.5 * 0.5 + 1.5 * 2 * 0.5 + 0.0 + 3.0)
    np.testing.assert_array_equal(jtu[0], 0.0)       # the output's seed is consumed


def test_pow_at_zero_follows_the_documented_conventions():
    """x ** e at x == 0: d/dx = 0 where e == 0, d/dx = e x**(e-1) (0 for e > 1, e for e == 1),
    d/de = 0 (not 0 * log 0); y = x ** e + pow(x, 2) + x ** 0 * e."""
    name, k, args, nd, wg = ck.POW_CASE
    x, e = args[1], args[2]
    u = {0: np.ones(8), 1: np.zeros(8), 2: np.zeros(8)}
    inst = k(tk.backend("INTERP"))
    (jtu, _) = tk_reverse(lambda *a: inst(*a, ndrange=nd), _args(args), u, tk.backend("INTERP"))
    with np.errstate(all="ignore"):
        dx = np.where(e == 0, 0.0, e * x ** (e - 1)) + 2 * x
        de = np.where(x == 0, 0.0, np.log(np.where(x > 0, x, 1.0)) * x ** e) + 1.0
    np.testing.assert_allclose(jtu[1], dx, rtol=1e-14)
    np.testing.assert_allclose(jtu[2], de, rtol=1e-14)


@pytest.mark.parametrize("seed", range(85000000, 85000006))
def test_fuzz_gradient_kernels_adjoint_identity(seed):
    """A few of gradgen's kernels (the runs over thousands: docs/autodiff.md, "Cross-checked")."""
    from tinykernels.testing.fuzz.basics import load_kernel
    from tinykernels.testing.fuzz.gradgen import generate_grad
    case = generate_grad(seed, local=0.3)
    k = load_kernel(case.source, case.kname)
    args = [a.value.copy() if isinstance(a.value, np.ndarray) else a.value for a in case.args]
    fs = crosscheck(k, args, case.ndrange, case.workgroupsize, backend="INTERP", seed=seed, jax=HAS_JAX)
    assert [f for f in fs if f.mismatch] == [], fs


# --- finite-difference verdicts (no JAX needed: its side is replaced by known values) ---------

@tk.kernel
def sin_mix(y, x, z):
    i = tk.index()
    y[i] = math.sin(x[i]) * z[i] + x[i] * x[i]


@tk.kernel
def overflowing(y, x):
    i = tk.index()
    y[i] = math.exp(x[i] * 1000.0) * x[i]


@tk.kernel
def cancelling(y, x):
    """y = v - hypot(v, c) at v ~ 1.8e7 moves in steps of ulp(v) = 3.7e-9: its derivative (about
    -1e-7 per unit of x) is below what finite differences resolve (gradgen seed 85000131's y1)."""
    i = tk.index()
    v = 1.8e7 + x[i]
    y[i] = v - math.hypot(v, 2.0 + math.sin(x[i]))


_ORIG_REV, _ORIG_FWD = tk_reverse, __import__("tinykernels.testing.adcross", fromlist=["tk_forward"]).tk_forward


def _fake_jax(edit):
    """A stand-in for adcross.jax_derivatives: tk.autodiff's own (J^T u, J v), edited."""
    def fake(kernel, args, u, v, ndrange, workgroupsize=None):
        b = tk.backend("INTERP")
        inst = kernel(b)

        def fn(*a):
            inst(*a, ndrange=ndrange, workgroupsize=workgroupsize)
        jtu, _ = _ORIG_REV(fn, args, u, b)
        jv = _ORIG_FWD(fn, args, v, {}, b)
        edit(jtu, jv)
        return jtu, jv
    return fake


def _sin_mix_args():
    rng = np.random.default_rng(1)
    return [np.zeros(6), rng.uniform(-1.5, 1.5, 6), rng.uniform(-1.5, 1.5, 6)]


def _by_kind(fs):
    return {f.kind: f for f in fs}


def test_fd_decides_a_disagreement_against_a_wrong_jax(monkeypatch):
    """JAX's side off by 0.1 at one element in each mode: central differences side with
    tk.autodiff, so the findings say JAX is wrong and are not counted as mismatches."""
    from tinykernels.testing import adcross

    def edit(jtu, jv):
        jtu[1][3] += 0.1
        jv[0][2] += 0.1
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(edit))
    fs = _by_kind(crosscheck(sin_mix, _sin_mix_args(), 6, backend="INTERP", seed=2))
    assert fs["rev-jax"].verdict == "jax" and "(3,)" in fs["rev-jax"].detail, fs
    assert fs["fwd-jax"].verdict == "jax" and "(2,)" in fs["fwd-jax"].detail, fs
    assert not any(f.mismatch for f in fs.values()), fs
    assert set(fs) == {"rev-jax", "fwd-jax"}


def test_fd_decides_a_disagreement_against_a_wrong_tk(monkeypatch):
    """tk.autodiff's reverse mode off at one element: the finding says tk.autodiff is wrong, and
    the adjoint identity's finding says forward mode is the one that agrees with the finite
    difference."""
    from tinykernels.testing import adcross
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(lambda jtu, jv: None))

    def wrong_reverse(fn, args, u, backend):
        jtu, gs = _ORIG_REV(fn, args, u, backend)
        jtu[2][1] *= 1.5
        return jtu, gs
    monkeypatch.setattr(adcross, "tk_reverse", wrong_reverse)
    fs = _by_kind(crosscheck(sin_mix, _sin_mix_args(), 6, backend="INTERP", seed=2))
    assert fs["rev-jax"].verdict == "tk" and fs["rev-jax"].mismatch, fs
    assert "(1,)" in fs["rev-jax"].detail
    assert "forward agrees" in fs["adjoint"].detail, fs["adjoint"]
    assert "fwd-jax" not in fs


def test_nan_on_both_sides_is_not_agreement_where_fd_is_finite(monkeypatch):
    """Both sides NaN at an element whose derivative is smooth and finite (what hid gradgen seed
    85000131's bug: JAX was NaN there too and NaN matched NaN): both are wrong."""
    from tinykernels.testing import adcross

    def nan_at(jtu, jv):
        jtu[2][4] = np.nan
        jv[0][5] = np.nan
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(nan_at))
    monkeypatch.setattr(adcross, "tk_reverse", lambda *a: (lambda r: (nan_at(r[0], {0: np.zeros(6)}), r)[1])(_ORIG_REV(*a)))
    monkeypatch.setattr(adcross, "tk_forward", lambda *a: (lambda jv: (nan_at({2: np.zeros(6)}, jv), jv)[1])(_ORIG_FWD(*a)))
    fs = [f for f in crosscheck(sin_mix, _sin_mix_args(), 6, backend="INTERP", seed=2) if f.kind != "adjoint"]
    assert {(f.kind, f.verdict) for f in fs} == {("rev-jax", "both"), ("fwd-jax", "both")}, fs
    assert all(f.mismatch for f in fs)
    # without finite differences, NaN matches NaN as before
    fs = [f for f in crosscheck(sin_mix, _sin_mix_args(), 6, backend="INTERP", seed=2, fd=False) if f.kind != "adjoint"]
    assert fs == [], fs


def test_a_nonfinite_derivative_of_a_nonfinite_output_is_undefined(monkeypatch):
    """exp(1000 x) overflows to inf at x = 1: the output is inf, so a NaN against an inf tangent
    there is a convention, not an error (gradgen seed 85200132: tk.autodiff NaN, jax.jvp -inf
    where io0 is -inf); the finite elements are still compared."""
    from tinykernels.testing import adcross

    def edit(jtu, jv):
        jv[0][1] = -jv[0][1] if np.isinf(jv[0][1]) else np.inf
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(edit))
    x = np.array([0.1, 1.0, -0.2, 0.3])
    fs = crosscheck(overflowing, [np.zeros(4), x], 4, backend="INTERP", seed=2)
    fwd = [f for f in fs if f.kind == "fwd-jax"]
    assert len(fwd) == 1 and fwd[0].verdict == "undefined" and not fwd[0].mismatch, fs
    assert "(1,)" in fwd[0].detail


def test_an_adjoint_identity_broken_only_by_an_overflowed_output_is_undefined(monkeypatch):
    """<u, J v> and <J^T u, v> non-finite and different (-inf against NaN, gradgen seed
    85200260, whose io0 and y1 overflowed) where an output with a seed is itself inf: no
    derivative to be right about, so 'undefined', not a tk.autodiff mismatch; with every output
    finite, a broken identity stays 'tk'. Needs no JAX."""
    from tinykernels.testing import adcross

    def flip_inf(fn, args, v, dv, backend):
        jv = _ORIG_FWD(fn, args, v, dv, backend)
        jv[0] = np.where(np.isinf(jv[0]), np.nan, jv[0] * 1.5)
        return jv
    monkeypatch.setattr(adcross, "tk_forward", flip_inf)
    fs = _by_kind(crosscheck(overflowing, [np.zeros(4), np.array([0.1, 1.0, -0.2, 0.3])], 4, backend="INTERP",
                             seed=2, jax=False))
    assert fs["adjoint"].verdict == "undefined" and not fs["adjoint"].mismatch, fs
    fs = _by_kind(crosscheck(overflowing, [np.zeros(4), np.array([0.1, 0.001, -0.2, 0.3])], 4, backend="INTERP",
                             seed=2, jax=False))
    assert fs["adjoint"].verdict == "tk" and fs["adjoint"].mismatch, fs
    assert "reverse agrees" in fs["adjoint"].detail


def test_a_kink_or_a_quantized_output_leaves_the_disagreement_undecided(monkeypatch):
    """Where the finite difference cannot see the gap it reports 'undecided' (a mismatch still):
    abs at 0 (a kink between the steps), and an output that moves in steps of 3.7e-9 whose
    derivative, about 1e-7, finite differences give as exactly 0."""
    from tinykernels.testing import adcross

    def edit(jtu, jv):
        jv[0][0] *= 1.1
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(edit))
    fs = crosscheck(cancelling, [np.zeros(3), np.array([0.3, -0.7, 1.1])], 3, backend="INTERP", seed=2)
    fwd = [f for f in fs if f.kind == "fwd-jax"]
    assert len(fwd) == 1 and fwd[0].verdict == "undecided" and fwd[0].mismatch, fs
    assert "fd 0 " in fwd[0].detail
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(lambda jtu, jv: jtu[1].__setitem__(0, -jtu[1][0])))
    fs = crosscheck(kinked, [np.zeros(3), np.array([0.3 + 3e-6, -0.7, 1.1])], 3, backend="INTERP", seed=2)
    rev = [f for f in fs if f.kind == "rev-jax"]
    assert len(rev) == 1 and rev[0].verdict == "undecided" and rev[0].mismatch, fs


@tk.kernel
def kinked(y, x):
    i = tk.index()
    y[i] = abs(x[i] - 0.3) * 2.0


@tk.kernel
def oscillating(y, x):
    """cosh(sin(z)) at z = x * 2**36 * 2 pi, about 3e11 (an ulp of 6e-5 radians): the derivative
    moves by about 1e-4 of itself when x moves by one ulp, and every finite-difference step
    (2**-18 .. 2**-16) moves z by a whole number of periods, so the differences alias to about 0
    and agree with each other (gradgen seed 85200313's io0, whose three differences happened to
    agree)."""
    i = tk.index()
    y[i] = math.cosh(math.sin(x[i] * 431777206544.7046))


def test_a_gap_within_what_the_inputs_rounding_allows_is_undecided(monkeypatch):
    """JAX's side replaced by tk.autodiff's own derivative at inputs moved by one ulp (another
    correct evaluation whose intermediates rounded differently): the gap, about 1e-4 relative,
    is within what the inputs allow, so the verdict is 'undecided', not 'both' (the aliased
    finite difference, about 0, agrees with neither; gradgen seed 85200313, where JAX's sin of
    -2.7e11 differed from tk's by 0.3%). A gap well beyond the jitter is still decided."""
    from tinykernels.testing import adcross
    x = np.array([0.61, 0.83, 0.72])

    def moved_by_an_ulp(scale):
        def edit(jtu, jv):
            b = tk.backend("INTERP")
            inst = oscillating(b)
            rng = np.random.default_rng(2)
            u = {0: rng.standard_normal(3), 1: rng.standard_normal(3)}
            moved, _ = _ORIG_REV(lambda *a: inst(*a, ndrange=3), [np.zeros(3), np.nextafter(x, 2.0)], u, b)
            jtu[1][1] = jtu[1][1] + scale * (moved[1][1] - jtu[1][1])
        return edit
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(moved_by_an_ulp(1.0)))
    fs = _by_kind(crosscheck(oscillating, [np.zeros(3), x], 3, backend="INTERP", seed=2))
    assert set(fs) == {"rev-jax"}, fs
    assert fs["rev-jax"].verdict == "undecided" and "(1,)" in fs["rev-jax"].detail, fs
    # the same kernel with JAX's side off by 1000 times that: decided (the aliased fd is neither)
    monkeypatch.setattr(adcross, "jax_derivatives", _fake_jax(moved_by_an_ulp(1000.0)))
    fs = _by_kind(crosscheck(oscillating, [np.zeros(3), x], 3, backend="INTERP", seed=2))
    assert fs["rev-jax"].verdict == "both", fs
