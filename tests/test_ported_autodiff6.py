"""Sixth autodiff audit (SPEC 7, adx21): gradient cases not in the earlier ported files.

- NVIDIA Warp's test_grad.py: a loop over the whole array with nested ifs on the counter (known
  per-element gradients), nested loops over a flattened index with an int-to-float factor,
  outputs the backward pass must leave as the forward wrote them (a plain store, atomic_add and
  atomic_sub), a func returning three values, triangle areas over a mesh gathered through an
  index array, a rotation by a quaternion built from roll/pitch/yaw (its length does not depend
  on the angles: a zero gradient), and test_name_clash: kernel names that look like the ones the
  compiler makes up (``_d_v``, ``_s1_it``, ``_ad1_g``, a tuple ``a`` beside a local ``a_0``).
- Dr.Jit's autodiff tests: a loop whose trip count depends on the differentiated value (the
  gradient flows through the values, the count is piecewise constant), and a select whose
  unchosen branch is NaN.
- Enzyme's integration tests: forward substitution with a lower-triangular matrix in a private
  array, and Simpson's rule over a parameter-dependent integrand.

Both modes against float64 central differences (or known answers), on CPU and INTERP."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params
from test_ported_autodiff import check_forward, check_reverse

RNG = np.random.default_rng(6021)


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    return tk.backend(request.param)


def both_modes(be, fn, args, seeds, wrt, tangents=None):
    dtypes = {k: a.dtype for k, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "i"}
    res = check_reverse(be, fn, args, seeds, wrt=wrt, dtypes=dtypes)
    tangents = tangents or {k: RNG.standard_normal(args[k].shape) for k in wrt}
    check_forward(be, fn, args, tangents, outs=list(seeds), dtypes=dtypes)
    return res


# --- Warp: a loop over the array with nested ifs on the counter ----------------------------------

@tk.kernel
def nested_if_loop(s, x: tk.Const, n: int):
    acc = 0.0
    for k in range(n):
        if k < 8:
            if k < 4:
                acc = acc + x[k] * 2.0
            else:
                acc = acc + x[k] * 4.0
        else:
            if k < 12:
                acc = acc + x[k] * 6.0
            else:
                acc = acc + x[k] * 8.0
    s[0] = acc


def test_a_loop_with_nested_ifs_on_its_counter(be):
    n = 16
    x = RNG.standard_normal(n)
    fn = lambda s, x_: nested_if_loop(be)(s, x_, n, ndrange=1)   # noqa: E731
    (shadows, _) = check_reverse(be, fn, [np.zeros(1), x], {0: np.ones(1)}, wrt=[1])
    want = np.repeat([2.0, 4.0, 6.0, 8.0], 4)
    np.testing.assert_array_equal(np.asarray(shadows[1]), want)      # exact: sums of the weights
    check_forward(be, fn, [np.zeros(1), x], {1: RNG.standard_normal(n)}, outs=[0])


# --- Warp: nested loops over a flattened index --------------------------------------------------

@tk.kernel
def flat_nested(s, x: tk.Const, n: int):
    acc = 0.0
    for a in range(n):
        for b in range(n):
            acc = acc + x[a * n + b] * float(a * n + b) + 1.0
    s[0] = acc * acc


def test_nested_loops_over_a_flattened_index(be):
    x = RNG.standard_normal(9)
    fn = lambda s, x_: flat_nested(be)(s, x_, 3, ndrange=1)   # noqa: E731
    (shadows, _) = both_modes(be, fn, [np.zeros(1), x], {0: np.ones(1)}, wrt=[1])
    acc = float(np.dot(x, np.arange(9.0))) + 9.0
    np.testing.assert_allclose(np.asarray(shadows[1]), 2 * acc * np.arange(9.0), rtol=1e-12)


# --- Warp: outputs the backward pass must preserve ------------------------------------------------

@tk.kernel
def preserve(c, s1, s2, x: tk.Const):
    i = tk.index()
    c[i] = x[i] * 2.0
    tk.atomic_add(s1, 0, x[i] * 3.0)
    tk.atomic_sub(s2, 0, x[i] * x[i])


def test_outputs_keep_their_forward_values_after_the_backward_pass(be):
    n = 8
    x = RNG.uniform(0.5, 1.5, n)
    fn = lambda c, s1, s2, x_: preserve(be)(c, s1, s2, x_, ndrange=n)   # noqa: E731
    for seeds, want in (((0.0, 1.0, 0.0), 3.0 * np.ones(n)), ((0.0, 0.0, 1.0), -2.0 * x),
                        ((1.0, 0.5, 2.0), 2.0 + 1.5 - 4.0 * x)):
        c, s1, s2, xx = np.zeros(n), np.zeros(1), np.zeros(1), x.copy()
        dx = np.zeros(n)
        args = [tk.Duplicated(c, np.full(n, seeds[0])), tk.Duplicated(s1, np.full(1, seeds[1])),
                tk.Duplicated(s2, np.full(1, seeds[2])), tk.Duplicated(xx, dx)]
        tk.autodiff(tk.Reverse, fn, *args)
        np.testing.assert_allclose(dx, want, rtol=1e-12)
        np.testing.assert_array_equal(c, 2.0 * x)                   # the primal results, put back
        np.testing.assert_allclose(s1, [3.0 * x.sum()], rtol=1e-12)
        np.testing.assert_allclose(s2, [-(x * x).sum()], rtol=1e-12)
        np.testing.assert_array_equal(xx, x)


# --- Warp: a func returning three values ------------------------------------------------------------

@tk.func
def three_values(a, b, c):
    return math.sin(a), math.cos(b) * c, math.sqrt(abs(c)) / abs(a)


@tk.kernel
def multi_valued(out, v: tk.Const):
    i = tk.index()
    p, q, r = three_values(v[i, 0], v[i, 1], v[i, 2])
    out[i] = p + q + r


def test_a_func_returning_three_values(be):
    v = RNG.uniform(0.3, 1.5, (4, 3)) * RNG.choice([-1.0, 1.0], (4, 3))
    fn = lambda o, v_: multi_valued(be)(o, v_, ndrange=4)   # noqa: E731
    both_modes(be, fn, [np.zeros(4), v], {0: RNG.standard_normal(4)}, wrt=[1])


# --- Warp: triangle areas of a mesh gathered through an index array ---------------------------------

@tk.func
def sub3(p, a, b, k):
    return p[a, k] - p[b, k]


@tk.kernel
def mesh_area(total, p: tk.Const, tri: tk.Const):
    t = tk.index()
    i, j, k = tri[t, 0], tri[t, 1], tri[t, 2]
    ux, uy, uz = sub3(p, j, i, 0), sub3(p, j, i, 1), sub3(p, j, i, 2)
    vx, vy, vz = sub3(p, k, i, 0), sub3(p, k, i, 1), sub3(p, k, i, 2)
    cx, cy, cz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
    tk.atomic_add(total, 0, 0.5 * math.sqrt(cx * cx + cy * cy + cz * cz))


def test_mesh_area_through_an_index_array(be):
    p = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]) + \
        RNG.uniform(-0.1, 0.1, (4, 3))
    tri = np.array([[0, 1, 2], [0, 2, 3], [0, 3, 1], [1, 3, 2]], np.int32)    # each point in 3 faces
    fn = lambda s, p_, t_: mesh_area(be)(s, p_, t_, ndrange=4)   # noqa: E731
    both_modes(be, fn, [np.zeros(1), p, tri], {0: np.ones(1)}, wrt=[1])


# --- Warp: a rotation by a quaternion from roll, pitch and yaw ---------------------------------------

@tk.func
def quat_rpy(roll, pitch, yaw):
    cy, sy = math.cos(yaw * 0.5), math.sin(yaw * 0.5)
    cr, sr = math.cos(roll * 0.5), math.sin(roll * 0.5)
    cp, sp = math.cos(pitch * 0.5), math.sin(pitch * 0.5)
    return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy)


@tk.func
def rotate(qx, qy, qz, qw, x, y, z):
    # v + 2 w (q x v) + 2 q x (q x v)
    tx, ty, tz = 2.0 * (qy * z - qz * y), 2.0 * (qz * x - qx * z), 2.0 * (qx * y - qy * x)
    return (x + qw * tx + qy * tz - qz * ty, y + qw * ty + qz * tx - qx * tz, z + qw * tz + qx * ty - qy * tx)


@tk.kernel
def rotated(out, length, ang: tk.Const, v: tk.Const):
    i = tk.index()
    qx, qy, qz, qw = quat_rpy(ang[i, 0], ang[i, 1], ang[i, 2])
    rx, ry, rz = rotate(qx, qy, qz, qw, v[i, 0], v[i, 1], v[i, 2])
    out[i, 0] = rx
    out[i, 1] = ry
    out[i, 2] = rz
    length[i] = math.sqrt(rx * rx + ry * ry + rz * rz)


def test_rotation_by_a_quaternion_from_roll_pitch_yaw(be):
    ang, v = RNG.uniform(-2, 2, (3, 3)), RNG.standard_normal((3, 3))
    fn = lambda o, n, a, v_: rotated(be)(o, n, a, v_, ndrange=3)   # noqa: E731
    both_modes(be, fn, [np.zeros((3, 3)), np.zeros(3), ang, v], {0: RNG.standard_normal((3, 3))}, wrt=[2, 3])
    # a rotation keeps the length: d|Rv|/d(angles) = 0 and d|Rv|/dv = v / |v|
    dang, dv = np.zeros((3, 3)), np.zeros((3, 3))
    tk.autodiff(tk.Reverse, fn, tk.Duplicated(np.zeros((3, 3)), np.zeros((3, 3))),
                tk.Duplicated(np.zeros(3), np.ones(3)), tk.Duplicated(ang.copy(), dang), tk.Duplicated(v.copy(), dv))
    np.testing.assert_allclose(dang, 0.0, atol=1e-12)
    np.testing.assert_allclose(dv, v / np.linalg.norm(v, axis=1, keepdims=True), rtol=1e-12)


# --- Warp test_name_clash: kernel names like the compiler's own -------------------------------------

@tk.kernel
def lookalike_names(out, x: tk.Const):
    i = tk.index()
    v = x[i] * 2.0
    _d_v = v * 3.0                 # the name of v's adjoint
    _s1_it = x[i] + 0.5            # the name structurize gives a for loop's iterator
    acc = 0.0
    for k in range(3):
        acc += _s1_it * (k + 1)
    _ad1_g = acc * x[i]            # autodiff's temporaries
    a = (x[i], v)
    a_0 = x[i] * 5.0               # the name a tuple's first part had
    b, c = a
    out[i] = _d_v * v + _ad1_g * acc + b * c * a_0


@tk.kernel
def shadow_named_param(out, _d_out: tk.Const):
    i = tk.index()
    out[i] = _d_out[i] * _d_out[i]


def test_locals_named_like_the_compilers_own(be):
    """Until adx21 such a local shared the compiler's variable: ``_d_v`` was v's adjoint (a wrong
    gradient), ``_s1_it`` the loop's iterator (a wrong gradient), ``a_0`` the tuple's first part
    (a wrong primal on the compiled backends; the interpreter was right)."""
    x = RNG.uniform(0.5, 1.5, 6)
    fn = lambda o, x_: lookalike_names(be)(o, x_, ndrange=6)   # noqa: E731
    o = np.zeros(6)
    fn(o, x)
    acc = 6 * (x + 0.5)
    np.testing.assert_allclose(o, 6 * x * x * 2 + acc * x * acc + x * 2 * x * 5 * x, rtol=1e-12)
    both_modes(be, fn, [np.zeros(6), x], {0: RNG.standard_normal(6)}, wrt=[1])


def test_a_parameter_named_like_a_shadow_is_refused(be):
    fn = lambda o, x_: shadow_named_param(be)(o, x_, ndrange=4)   # noqa: E731
    with pytest.raises(tk.CompileError, match=r"parameter '_d_out' has the name .* the shadow of 'out'") as e:
        tk.autodiff(tk.Reverse, fn, tk.Duplicated(np.zeros(4), np.ones(4)), tk.Duplicated(np.ones(4), np.zeros(4)))
    assert "test_ported_autodiff6.py" in str(e.value)
    with pytest.raises(tk.CompileError, match="parameter '_d_out'"):
        tk.autodiff(tk.Forward, fn, tk.Duplicated(np.zeros(4), np.zeros(4)), tk.Duplicated(np.ones(4), np.ones(4)))


# --- Dr.Jit: a trip count that depends on the differentiated value ----------------------------------

@tk.kernel
def halving(out, x: tk.Const):
    i = tk.index()
    v = x[i]
    k = 0
    while v > 1.0:                 # trips: piecewise constant in x
        v = v * 0.5 + math.sin(v) * 0.01
        k += 1
    out[i] = v * (k + 1)


def test_a_trip_count_that_depends_on_the_value(be):
    x = np.array([0.7, 1.6, 3.1, 5.5, 9.0, 17.0])      # away from the points where the count changes
    fn = lambda o, x_: halving(be)(o, x_, ndrange=6)   # noqa: E731
    both_modes(be, fn, [np.zeros(6), x], {0: RNG.standard_normal(6)}, wrt=[1])


@tk.kernel
def select_nan(out, x: tk.Const):
    i = tk.index()
    a = math.sqrt(x[i])            # NaN for x < 0
    b = math.log(-x[i])            # NaN for x > 0
    out[i] = tk.select(x[i] > 0.0, a * x[i], b * x[i])


def test_a_select_whose_other_branch_is_nan(be):
    x = np.array([-2.0, -0.5, 0.25, 3.0])
    fn = lambda o, x_: select_nan(be)(o, x_, ndrange=4)   # noqa: E731
    both_modes(be, fn, [np.zeros(4), x], {0: RNG.standard_normal(4)}, wrt=[1])


# --- Enzyme: forward substitution, Simpson's rule -----------------------------------------------------

@tk.kernel
def fwdsolve(xs, L: tk.Const, b: tk.Const, n: tk.constexpr):
    """L x = b for lower-triangular L, one system per item, x kept in a private array"""
    s = tk.index()
    x = tk.private(tk.float64, n)
    for i in range(n):
        acc = b[s, i]
        for j in range(i):
            acc = acc - L[s, i, j] * x[j]
        x[i] = acc / L[s, i, i]
    for i in range(n):
        xs[s, i] = x[i]


def test_forward_substitution_in_a_private_array(be):
    n = 4
    L = np.tril(RNG.uniform(-0.5, 0.5, (2, n, n))) + 2.0 * np.eye(n)
    b = RNG.standard_normal((2, n))
    fn = lambda x_, L_, b_: fwdsolve(be)(x_, L_, b_, n, ndrange=2)   # noqa: E731
    (shadows, _) = both_modes(be, fn, [np.zeros((2, n)), L, b], {0: RNG.standard_normal((2, n))}, wrt=[1, 2])


@tk.kernel
def simpson(out, a: tk.Const, c: tk.Const, n: int):
    """the integral of exp(-a t^2) cos(c t) over [0, 1] by Simpson's rule with n intervals"""
    i = tk.index()
    h = 1.0 / n
    acc = 0.0
    for k in range(n + 1):
        t = k * h
        w = 1.0 if k == 0 or k == n else (4.0 if k % 2 == 1 else 2.0)
        acc += w * math.exp(-a[i] * t * t) * math.cos(c[i] * t)
    out[i] = acc * h / 3.0


def test_simpsons_rule_over_a_parameter_dependent_integrand(be):
    a, c = RNG.uniform(0.1, 2.0, 3), RNG.uniform(-3.0, 3.0, 3)
    fn = lambda o, a_, c_: simpson(be)(o, a_, c_, 10, ndrange=3)   # noqa: E731
    (shadows, _) = both_modes(be, fn, [np.zeros(3), a, c], {0: np.ones(3)}, wrt=[1, 2])
    # d/da of the integral is -int t^2 exp(-a t^2) cos(c t): Simpson with 10 intervals is within 1e-4
    t = np.linspace(0.0, 1.0, 20001)
    for m in range(3):
        exact = -np.trapezoid(t * t * np.exp(-a[m] * t * t) * np.cos(c[m] * t), t)
        assert abs(np.asarray(shadows[1])[m] - exact) < 1e-4


# --- a scalar parameter reassigned in a loop (found by adx21 while porting) ----------------------

@tk.kernel
def reassigned_scalar(out, x: tk.Const, s: float, n: int):
    i = tk.index()
    while n > 0:
        s = s * x[i] + 0.1         # s: the argument, then each trip's value
        n -= 1
    out[i] = s


def test_an_active_scalar_reassigned_in_a_loop(be):
    """Until adx21 the compiled backends' loop read the argument on every trip (see
    tests/test_param_annotations.py): a wrong primal and a gradient of the wrong program."""
    x = RNG.uniform(0.5, 1.5, 5)
    fn = lambda o, x_, s: reassigned_scalar(be)(o, x_, s, 3, ndrange=5)   # noqa: E731
    seed = RNG.standard_normal(5)
    _, (ds,) = check_reverse(be, fn, [np.zeros(5), x, 0.7], {0: seed}, wrt=[1], active=[2])
    # s3 = s x^3 + 0.1 (x^2 + x + 1): d/ds = x^3
    np.testing.assert_allclose(ds, float(np.dot(seed, x ** 3)), rtol=1e-10)
