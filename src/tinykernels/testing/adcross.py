"""A differential oracle for ``tk.autodiff`` (SPEC sections 7 and 11): its gradients against
JAX's derivative of the same kernel raised into JAX operations, and its two modes against
each other.

The kernel maps the state ``X`` (every float64 array argument) to the arrays' final values
``F(X)`` (an array the kernel does not write maps to itself), with Jacobian ``J``.

- ``rev-jax``: ``tk.autodiff(tk.Reverse, ...)`` with every shadow seeded with ``u`` leaves
  ``J^T u`` in the shadows; ``jax.vjp`` of :func:`tinykernels.jax.raise_kernel` gives it
  independently (another lowering, JAX's own chain rules).
- ``fwd-jax``: ``tk.autodiff(tk.Forward, ...)`` with tangents ``v`` leaves ``J v`` in the
  shadows; ``jax.jvp`` of the raised kernel gives it independently.
- ``adjoint``: ``<u, J v> == <J^T u, v>`` between the two modes of ``tk.autodiff`` (float
  scalars included: ``tk.Active`` in reverse mode, ``tk.Duplicated(s, ds)`` in forward mode),
  which needs no JAX.

Float scalars are static on the raised route (not differentiated), so their gradients enter
only the ``adjoint`` check. Everything runs in float64 (JAX under ``enable_x64``); values are
compared per element within ``rtol`` of the array's largest magnitude (the two sides sum in
different orders). A kernel the raise path refuses (a ``tk.CompileError`` or
``tk.LaunchError`` from ``raise_kernel``) is reported as ``Finding("unraised", ...)``, not as
a mismatch; :func:`crosscheck` then still runs the ``adjoint`` check.

**Who is wrong.** Every element where ``tk.autodiff`` and JAX disagree is decided by central
finite differences of the kernel itself in float64 (:func:`fd_forward`, :func:`fd_reverse`):
``(J v)_k`` from ``F(X + h v)``, ``(J^T u)_k`` from ``<u, F(X + h e_k)>``, each at the steps
``h / 2``, ``h`` and ``2h`` (Richardson-extrapolated; the spread of the three is the noise
estimate, so a step that straddles a kink or a jump leaves the element undecided). A finding's
``verdict`` says who is wrong: ``"tk"`` (finite differences agree with JAX only), ``"jax"``
(with tk.autodiff only: not counted as a mismatch), ``"both"``, ``"undecided"`` (a kink,
an overflow in the step, or noise wider than the gap) or ``"undefined"`` (one side is inf or
NaN where the output itself is: forward mode at an output element that is inf or NaN, reverse
mode when a seeded output element is; there is no derivative to be right about, so not counted
as a mismatch; reverse mode's finite differences then sum only the finite outputs, so finite
gradients are still decided); each element's values and the finite difference are in
``detail``. Elements where both sides are NaN (or the same infinity) are not
taken as agreement blindly: where finite differences give a smooth finite value there, both are
wrong (``verdict="both"``), as for gradgen seed 85000131 (docs/autodiff.md). Before finite
differences are asked, a gap is checked against what the inputs allow (:func:`jitter`): where
tk.autodiff's own derivative moves by a quarter of the gap or more when every float input moves
by a few roundings (``1 +- 2**-50``), the two sides' different rounding of their intermediates
can explain it, and no finite difference can decide it (the derivative changes far more within
the step): ``"undecided"`` (gradgen seed 85200313). An ``adjoint``
finding says which of tk.autodiff's two modes the directional finite difference sides with.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RTOL = 1e-9            # per element, relative to the array's largest magnitude
ADJOINT_RTOL = 1e-10   # relative to the sum of the absolute values of both inner products' terms


#: finite differences: the base step (scaled by ``max(1, |x|)`` for one element), and how far
#: the noise estimate must stay below the gap between the two sides to decide it
FD_STEP = 2.0 ** -17   # about 7.6e-6; a power of two, so that steps along a direction rounded to
                       # TANGENT_BITS binary places move each element exactly (x + t v == x + t v)
TANGENT_BITS = 20
FD_MARGIN = 4.0
FD_MAX_ELEMENTS = 6    # per array and mode: the reverse check costs 6 launches per element
#: the conditioning check: every float input scaled by ``1 +- JITTER`` (random signs, a few
#: roundings' worth), JITTER_TRIES times; how far tk.autodiff's own derivative moves is what the
#: inputs allow two correct evaluations to differ by
JITTER = 2.0 ** -50
JITTER_TRIES = 3

#: verdicts, worst first: a finding's verdict is the worst of its elements'
VERDICTS = ("tk", "both", "undecided", "undefined", "jax")


@dataclass
class Finding:
    """One outcome of :func:`crosscheck`: ``kind`` is ``rev-jax``, ``fwd-jax``, ``adjoint`` (a
    mismatch), ``unraised`` (the raise path refused the kernel: not a mismatch) or ``error``
    (``tk.autodiff`` raised). ``verdict`` (``rev-jax``/``fwd-jax``/``adjoint``): who finite
    differences say is wrong, ``"tk"``, ``"jax"``, ``"both"`` or ``"undecided"``, or
    ``"undefined"`` (a non-finite value where the output itself is inf or NaN: no derivative to
    compare); ``None`` where none was sought."""
    kind: str
    detail: str
    verdict: str | None = None

    @property
    def mismatch(self) -> bool:
        """A possible tk.autodiff bug: anything but ``unraised``, a disagreement that finite
        differences decided against JAX, and one where the output is not finite (``undefined``)."""
        return self.kind != "unraised" and self.verdict not in ("jax", "undefined")


def _is_float_array(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == np.float64


def _is_float_scalar(a) -> bool:
    return isinstance(a, float) and not isinstance(a, bool)


def _suspects(got: np.ndarray, want: np.ndarray, rtol: float) -> tuple:
    """(elements where ``got`` and ``want`` differ beyond ``rtol`` of the arrays' largest finite
    magnitude, elements where both are the same non-finite value), as index tuples."""
    fin = lambda a: np.abs(a[np.isfinite(a)])          # noqa: E731
    mag = max(float(np.max(fin(want), initial=0.0)), float(np.max(fin(got), initial=0.0)), 1e-300)
    with np.errstate(invalid="ignore"):
        same_nonfinite = (np.isnan(got) & np.isnan(want)) | (np.isinf(got) & (got == want))
        bad = ~((np.abs(got - want) <= rtol * mag) | same_nonfinite | (got == want))
    idx = lambda m: [tuple(int(j) for j in i) for i in np.argwhere(m)]   # noqa: E731
    return idx(bad), idx(same_nonfinite)


def _differs(got: np.ndarray, want: np.ndarray, rtol: float) -> str | None:
    """A description of the first elements where ``got`` and ``want`` differ, or None (NaN
    matching NaN: the plain comparison, without finite differences)."""
    bad, _ = _suspects(got, want, rtol)
    if not bad:
        return None
    return ", ".join(f"{i}: {got[i]!r} vs {want[i]!r}" for i in bad[:4])


def final_values(fn, args: list, backend, xs: dict) -> dict:
    """The float arrays' final values (position -> float64 array) after one launch of ``fn`` on
    copies of ``args`` with the float arrays replaced by ``xs``."""
    import tinykernels as tk
    a = [xs[k].copy() if k in xs else (x.copy() if isinstance(x, np.ndarray) else x) for k, x in enumerate(args)]
    with np.errstate(all="ignore"):
        fn(*a)
    tk.synchronize(backend)
    return {k: np.array(a[k], dtype=np.float64) for k in xs}


def _richardson(d0, d1, d2, floor=0.0):
    """(estimate, noise) from central differences at h/2, h, 2h (arrays or floats) and the
    rounding noise ``floor`` of a difference: the Richardson extrapolation of the two smaller
    steps, and the spread of all three plus the floor. A smooth function's differences converge
    as ``h**2`` (``d1 - d2 = 4 (d0 - d1)``); where they do not shrink at least twofold as the
    step halves (beyond the floor), a step straddles a kink or a jump (``|x - a|`` at ``x - a =
    1e-7`` gives ``d ~ 1/h``, which extrapolates to nonsense), and the noise is infinite."""
    with np.errstate(all="ignore"):
        est = (4.0 * d0 - d1) / 3.0
        a, b = np.abs(d0 - d1), np.abs(d1 - d2)
        converging = (a <= 0.5 * b + floor) | (np.maximum(a, b) <= floor + 1e-8 * np.abs(d1))
        noise = np.where(converging, a + b + floor, np.inf)
    return est, noise


def _noise_floor(values) -> np.ndarray | float:
    """The rounding noise of ``F`` near the point, from its values at ``X + d * dir`` for ``d`` in
    ``(0, +-delta, 2 delta)`` with ``delta`` a millionth of the step: ``F`` is linear to within far
    below float64 there, so its second differences are rounding alone (an output computed with
    cancellation, ``v - hypot(v, c)`` at ``v = 1.8e7``, is noisy far beyond its own ulp)."""
    f0, fp, fm, f2 = values
    with np.errstate(all="ignore"):
        return np.maximum(np.abs(fp + fm - 2 * f0), np.abs(f2 - 2 * fp + f0))


def _flat(values: list) -> np.ndarray:
    """Where ``F`` kept exactly its value at the point and at every step: the finite difference
    is exactly 0 there, but it cannot tell a constant from an output computed with cancellation
    (``v - hypot(v, c)`` at ``v = 1.8e7`` moves in steps of ``ulp(v) = 3.7e-9``, hiding a
    derivative of 1e-7 below its resolution at any step that keeps the branches), so it decides
    only against a non-finite side there."""
    with np.errstate(invalid="ignore"):
        return np.all([f == values[0] for f in values[1:]], axis=0)


def fd_forward(fn, args: list, backend, v: dict, h: float = FD_STEP) -> tuple:
    """(``J v`` by central differences, its noise estimate, the elements that did not move
    (:func:`_flat`)), per float array position: ``F(X + t v)`` at ``t = +-h/2, +-h, +-2h``
    (float scalars held fixed). The noise is the spread of the three differences plus the
    rounding of ``F`` itself (:func:`_noise_floor`) over the step."""
    x = {k: np.array(args[k], dtype=np.float64) for k in v}
    at = lambda t: final_values(fn, args, backend, {k: x[k] + t * v[k] for k in v})   # noqa: E731
    d, small = [], []
    for t in (h / 2, h, 2 * h):
        fp, fm = at(t), at(-t)
        small += [fp, fm]
        with np.errstate(all="ignore"):
            d.append({k: (fp[k] - fm[k]) / (2 * t) for k in v})
    delta = h * 2.0 ** -20
    near = [at(t) for t in (0.0, delta, -delta, 2 * delta)]
    floor = {k: 4.0 * _noise_floor([f[k] for f in near]) / h for k in v}
    out = {k: _richardson(d[0][k], d[1][k], d[2][k], floor[k]) for k in v}
    flat = {k: _flat([near[0][k]] + [f[k] for f in small]) for k in v}
    return ({k: e for k, (e, _) in out.items()}, {k: n for k, (_, n) in out.items()}, flat)


def fd_reverse(fn, args: list, backend, u: dict, pos: int, idx: tuple, h: float = FD_STEP,
               finite: dict | None = None) -> tuple:
    """(``(J^T u)`` at element ``idx`` of the float array at position ``pos``, its noise
    estimate, whether ``L`` did not move at all (:func:`_flat`)) by central
    differences of ``L(X) = sum <u_j, F_j(X)>`` along that element. With ``finite`` (position ->
    boolean mask), ``L`` sums only over those output elements (the others are inf or NaN at
    ``X``, where ``inf - inf`` would make every difference NaN)."""
    x = {k: np.array(args[k], dtype=np.float64) for k in u}
    base = float(x[pos][idx])
    # a power-of-two step; each difference divides by the step actually taken ((x + t) - x)
    step = 2.0 ** round(np.log2(h * max(1.0, abs(base)))) if np.isfinite(base) else h
    f0 = final_values(fn, args, backend, x)

    def loss(t):
        """<u, F(X + t e) - F(X)> (the differences first: no rounding of the sum of the rest)"""
        xs = {k: a.copy() for k, a in x.items()}
        xs[pos][idx] = base + t
        f = final_values(fn, args, backend, xs)
        with np.errstate(all="ignore"):
            return sum(float(np.sum(u[k] * (f[k] - f0[k]) if finite is None
                                    else np.where(finite[k], u[k] * (f[k] - f0[k]), 0.0))) for k in u)

    def taken(t):
        return (base + t) - base
    d = [(loss(t) - loss(-t)) / (taken(t) - taken(-t)) for t in (step / 2, step, 2 * step)]
    delta = step * 2.0 ** -20
    floor = 4.0 * float(_noise_floor([0.0] + [loss(t) for t in (delta, -delta, 2 * delta)])) / step
    est, noise = _richardson(*d, floor)
    # L did not move at all: see _flat (an output that moved below its resolution while others
    # moved is not seen; the sum cannot tell which outputs depend on the element)
    flat = d[0] == d[1] == d[2] == 0.0
    return float(est), float(noise), flat


def jitter(derivative, args: list, seed: int = 0, rel: float = JITTER, tries: int = JITTER_TRIES) -> dict:
    """How far a derivative moves when its inputs move by a few roundings: the largest change,
    per element, of ``derivative(args)`` (position -> array) over ``tries`` launches with every
    float array and float scalar of ``args`` scaled by ``1 +- rel`` (random signs per element).
    Two correct evaluations whose intermediates round differently (tk.autodiff and JAX, libm and
    XLA) can differ by that much: an ill-conditioned derivative (``cosh(sin(z))`` at ``z =
    -2.7e11``, whose ulp is 3e-5 radians: gradgen seed 85200313) moves by 0.1-0.4% for an input
    moved by one ulp, so a 0.3% gap between the two sides decides nothing."""
    rng = np.random.default_rng([seed, 0x6a17])

    def moved(a):
        if _is_float_array(a):
            return a * (1.0 + rel * rng.choice([-1.0, 1.0], a.shape))
        return a * (1.0 + rel * float(rng.choice([-1.0, 1.0]))) if _is_float_scalar(a) else a
    base = derivative(args)
    out = {k: np.zeros(np.shape(a)) for k, a in base.items()}
    for _ in range(tries):
        d = derivative([moved(a) for a in args])
        with np.errstate(invalid="ignore"):
            for k in out:
                out[k] = np.fmax(out[k], np.abs(np.asarray(d[k], dtype=np.float64) - base[k]))
    return out


def _verdict(tk_val: float, jax_val: float, fd: float, noise: float, mag: float, rtol: float,
             undefined: bool = False, flat: bool = False, jit: float = 0.0) -> str | None:
    """Who is wrong at one element (``"tk"``, ``"jax"``, ``"both"``, ``"undecided"``,
    ``"undefined"``), or None where both sides are the same non-finite value and finite
    differences do not contradict them (no smooth finite value there). ``undefined``: the
    derivative may legitimately be non-finite here (an output it reaches is inf or NaN at the
    point), so a non-finite value on either side is a convention, not an error. ``flat``: the
    output did not move at any step (:func:`_flat`), so the finite difference decides only
    against a non-finite side. ``jit``: how far tk.autodiff's value moves when the inputs move
    by a few roundings (:func:`jitter`); a gap within a few times that is within what the inputs
    allow (the two sides round their intermediates differently), so no finite difference decides
    it (the derivative changes far more within the step)."""
    tk_fin, jax_fin = bool(np.isfinite(tk_val)), bool(np.isfinite(jax_val))
    both_nonfinite = not tk_fin and (tk_val == jax_val or (np.isnan(tk_val) and np.isnan(jax_val)))
    if undefined and not (tk_fin and jax_fin):
        return None if both_nonfinite else "undefined"
    if tk_fin and jax_fin and not FD_MARGIN * jit < abs(tk_val - jax_val):
        return "undecided"        # ill-conditioned: the inputs' rounding allows the gap
    if not (np.isfinite(fd) and np.isfinite(noise)):
        return None if both_nonfinite else "undecided"
    if flat:
        return "both" if both_nonfinite else "undecided" if tk_fin == jax_fin else "jax" if tk_fin else "tk"
    tol = noise + rtol * max(mag, abs(fd))
    if both_nonfinite:
        # a smooth finite difference where both give NaN (or inf): both wrong; else agreement
        return "both" if noise <= 1e-5 * max(abs(fd), 1.0) else None
    gap = abs(tk_val - jax_val) if tk_fin and jax_fin else np.inf
    if FD_MARGIN * tol >= gap:
        return "undecided"        # the finite difference cannot resolve the gap
    tk_ok = tk_fin and abs(tk_val - fd) <= tol
    jax_ok = jax_fin and abs(jax_val - fd) <= tol
    if tk_ok == jax_ok:
        return "undecided" if tk_ok else "both"
    return "jax" if tk_ok else "tk"


def _worst(verdicts) -> str:
    return min(verdicts, key=VERDICTS.index)


def tk_reverse(fn, args: list, u: dict, backend) -> tuple:
    """(``J^T u`` per float array position, the float scalars' gradients) from ``tk.autodiff``."""
    import tinykernels as tk
    shadows = {k: u[k].copy() for k in u}
    actives = {k: tk.Active(a) for k, a in enumerate(args) if _is_float_scalar(a)}
    wrapped = [tk.Duplicated(a.copy(), shadows[k]) if k in shadows else actives.get(k, tk.Const(a))
               for k, a in enumerate(args)]
    with np.errstate(all="ignore"):
        gs = tk.autodiff(tk.Reverse, fn, *wrapped)
    tk.synchronize(backend)
    return shadows, dict(zip(actives, (float(g) for g in gs)))


def tk_forward(fn, args: list, v: dict, dv: dict, backend) -> dict:
    """``J v`` per float array position from ``tk.autodiff(tk.Forward, ...)`` (scalar tangents ``dv``)."""
    import tinykernels as tk
    tangents = {k: v[k].copy() for k in v}
    wrapped = [tk.Duplicated(a.copy(), tangents[k]) if k in tangents
               else tk.Duplicated(a, dv[k]) if k in dv else tk.Const(a) for k, a in enumerate(args)]
    with np.errstate(all="ignore"):
        tk.autodiff(tk.Forward, fn, *wrapped)
    tk.synchronize(backend)
    return tangents


def jax_derivatives(kernel, args: list, u: dict, v: dict, ndrange, workgroupsize=None) -> tuple:
    """(``J^T u``, ``J v``) per float array position, from ``jax.vjp`` / ``jax.jvp`` of the raised
    kernel. Raises what ``raise_kernel`` raises for a kernel it cannot lower."""
    import jax
    import jax.numpy as jnp

    from tinykernels.jax import raise_kernel
    params = [name for name, _ in kernel.params]
    kinds = dict(kernel.params)
    arr_pos = [k for k, a in enumerate(args) if isinstance(a, np.ndarray)]
    outs = [params[k] for k in arr_pos if kinds[params[k]] == "value"]
    scalars = {params[k]: a for k, a in enumerate(args) if not isinstance(a, np.ndarray)}
    g = raise_kernel(kernel, outputs=outs, ndrange=ndrange, workgroupsize=workgroupsize)
    diff = sorted(u)
    out_pos = [arr_pos[j] for j, k in enumerate(arr_pos) if kinds[params[k]] == "value"]
    with jax.enable_x64(True):
        base = {k: jnp.asarray(args[k]) for k in arr_pos}

        def f(*xs):
            vals = dict(base)
            vals.update(zip(diff, xs))
            res = g(*(vals[k] for k in arr_pos), **scalars)
            res = res if isinstance(res, tuple) else (res,)
            final = dict(zip(out_pos, res))
            return tuple(final.get(k, vals[k]) for k in diff)
        x0 = tuple(base[k] for k in diff)
        f = jax.jit(f)
        _, jv = jax.jvp(f, x0, tuple(jnp.asarray(v[k]) for k in diff))
        jv = {k: np.asarray(a) for k, a in zip(diff, jv)}
        try:
            _, pull = jax.vjp(f, *x0)
            jtu = pull(tuple(jnp.asarray(u[k]) for k in diff))
        except ValueError as e:         # JAX's own limit: no reverse mode through a while loop
            if "while_loop" not in str(e):
                raise
            return None, jv
        return {k: np.asarray(a) for k, a in zip(diff, jtu)}, jv


def crosscheck(kernel, args: list, ndrange, workgroupsize=None, backend="INTERP", seed: int = 0,
               jax: bool = True, rtol: float = RTOL, fd: bool = True) -> list:
    """The :class:`Finding` s of ``kernel`` launched with ``args`` (its arguments in parameter
    order; float64 arrays and Python floats are differentiated) on ``backend``: see the module
    docstring. ``jax=False`` runs only the ``adjoint`` check; ``fd=False`` compares with JAX
    without finite differences (NaN matching NaN, no verdicts). An empty list: everything agrees."""
    import tinykernels as tk
    b = tk.backend(backend) if isinstance(backend, str) else backend
    inst = kernel(b)

    def fn(*a):
        inst(*a, ndrange=ndrange, workgroupsize=workgroupsize)
    rng = np.random.default_rng(seed)
    u = {k: rng.standard_normal(a.shape) for k, a in enumerate(args) if _is_float_array(a)}
    # tangents with TANGENT_BITS binary places: X + t v is exact for the power-of-two steps of
    # the finite differences (for |x| < 2**16), so a difference divides by the step it took
    v = {k: np.round(rng.standard_normal(a.shape) * 2.0 ** TANGENT_BITS) / 2.0 ** TANGENT_BITS
         for k, a in enumerate(args) if _is_float_array(a)}
    dv = {k: float(rng.standard_normal()) for k, a in enumerate(args) if _is_float_scalar(a)}
    if not u:
        raise ValueError(f"crosscheck: kernel '{kernel.name}' has no float64 array argument to differentiate")
    out: list = []
    try:
        jtu, gs = tk_reverse(fn, args, u, b)
        jv = tk_forward(fn, args, v, dv, b)
        # the raised kernel's scalars are static: J v without the scalars' tangents for JAX
        jv0 = tk_forward(fn, args, v, {k: 0.0 for k in dv}, b) if dv and jax else jv
    except Exception as e:  # noqa: BLE001 - every failure is a finding
        return [Finding("error", f"{type(e).__name__}: {e}")]
    lhs = sum(float(np.sum(u[k] * jv[k])) for k in u)
    rhs = sum(float(np.sum(jtu[k] * v[k])) for k in u) + sum(gs[k] * dv[k] for k in dv)
    mag = (sum(float(np.sum(np.abs(u[k] * jv[k])) + np.sum(np.abs(jtu[k] * v[k]))) for k in u)
           + sum(abs(gs[k] * dv[k]) for k in dv))
    if not (abs(lhs - rhs) <= ADJOINT_RTOL * mag + 1e-300 or lhs == rhs or (np.isnan(lhs) and np.isnan(rhs))):
        out.append(_adjoint_finding(fn, args, b, u, v, dv, lhs, rhs, mag))
    if not jax:
        return out
    try:
        jjtu, jjv = jax_derivatives(kernel, args, u, v, ndrange, workgroupsize)
    except (tk.CompileError, tk.LaunchError) as e:
        return out + [Finding("unraised", f"{type(e).__name__}: {str(e).splitlines()[0]}")]
    params = [name for name, _ in kernel.params]
    if jjtu is None:
        out.append(Finding("unraised", "JAX has no reverse mode through this kernel's while loop; forward mode checked"))
    fwd_fd = base = None
    jits: dict = {}

    def jit_of(kind):
        """tk.autodiff's derivative's :func:`jitter` for that mode, computed once"""
        if kind not in jits:
            if kind == "fwd-jax":
                dv0 = {k: 0.0 for k in dv} if dv else dv
                jits[kind] = jitter(lambda a: tk_forward(fn, a, v, dv0, b), args, seed)
            else:
                jits[kind] = jitter(lambda a: tk_reverse(fn, a, u, b)[0], args, seed)
        return jits[kind]
    for kind, got, want in (("rev-jax", jtu, jjtu), ("fwd-jax", jv0, jjv)):
        for k in sorted(want or ()):
            bad, same = _suspects(got[k], want[k], rtol)
            if not bad and not same:
                continue
            if not fd:
                if bad:
                    out.append(Finding(kind, f"'{params[k]}': {_differs(got[k], want[k], rtol)}"))
                continue
            if base is None:
                base = final_values(fn, args, b, {j: np.array(args[j], dtype=np.float64) for j in u})
                finite = {j: np.isfinite(a) for j, a in base.items()}
                # reverse mode: an output with a seed that is inf or NaN at the point
                nonfinite_out = any(bool(np.any(~finite[j] & (u[j] != 0))) for j in u)
            fin = lambda a: np.abs(a[np.isfinite(a)])          # noqa: E731
            amag = max(float(np.max(fin(want[k]), initial=0.0)), float(np.max(fin(got[k]), initial=0.0)))
            if kind == "fwd-jax" and fwd_fd is None:
                fwd_fd = fd_forward(fn, args, b, v)
            elems = []
            for i in bad[:FD_MAX_ELEMENTS] + same[:FD_MAX_ELEMENTS]:
                if kind == "fwd-jax":
                    est, noise, flat = float(fwd_fd[0][k][i]), float(fwd_fd[1][k][i]), bool(fwd_fd[2][k][i])
                    undefined = not finite[k][i]
                else:
                    est, noise, flat = fd_reverse(fn, args, b, u, k, i, finite=finite if nonfinite_out else None)
                    undefined = nonfinite_out
                jit = float(jit_of(kind)[k][i]) if i in bad else 0.0
                verdict = _verdict(float(got[k][i]), float(want[k][i]), est, noise, amag, rtol, undefined, flat,
                                   jit)
                if verdict is not None:
                    elems.append((i, verdict, float(got[k][i]), float(want[k][i]), est, noise, jit))
            if len(bad) > FD_MAX_ELEMENTS:    # elements beyond the budget: not decided
                elems.append((bad[FD_MAX_ELEMENTS], "undecided", float(got[k][bad[FD_MAX_ELEMENTS]]),
                              float(want[k][bad[FD_MAX_ELEMENTS]]), float("nan"), float("nan"), float("nan")))
            if not elems:
                continue
            detail = ", ".join(f"{i}: tk {g!r} jax {w!r} fd {e:.12g} (+-{n:.2g}) jitter {j:.2g} -> {vd}"
                               for i, vd, g, w, e, n, j in elems[:8])
            extra = f" ({len(bad)} differing, {len(same)} non-finite on both sides)"
            out.append(Finding(kind, f"'{params[k]}': {detail}{extra}", _worst(vd for _, vd, *_ in elems)))
    return out


def _adjoint_finding(fn, args, b, u, v, dv, lhs, rhs, mag) -> Finding:
    """The ``adjoint`` finding, with the directional finite difference of ``<u, F>`` along
    ``(v, dv)`` (scalars included) that says which mode it sides with. Its verdict is
    ``"undefined"`` where a side is inf or NaN and an output with a seed is itself inf or NaN at
    the point (no derivative to be right about, as for the elements: gradgen seed 85200260's
    ``-inf`` against NaN where ``io0`` and ``y1`` overflowed), else ``"tk"``."""
    detail = f"<u, J v> = {lhs!r}, <J^T u, v> = {rhs!r}"
    verdict = "tk"
    try:
        f0 = final_values(fn, args, b, {k: np.array(args[k], dtype=np.float64) for k in v})
        if not (np.isfinite(lhs) and np.isfinite(rhs)) and any(
                bool(np.any(~np.isfinite(f0[k]) & (u[k] != 0))) for k in u if k in f0):
            verdict = "undefined"
        d = []
        for t in (FD_STEP / 2, FD_STEP, 2 * FD_STEP):
            vals = []
            for sgn in (1.0, -1.0):
                a = [x + sgn * t * dv[k] if k in dv else x for k, x in enumerate(args)]
                f = final_values(fn, a, b, {k: np.array(args[k], dtype=np.float64) + sgn * t * v[k] for k in v})
                with np.errstate(all="ignore"):
                    vals.append(sum(float(np.sum(u[k] * (f[k] - f0[k]))) for k in u))
            d.append((vals[0] - vals[1]) / (2 * t))
        est, noise = _richardson(*d, 1e-9 * mag)
        tol = float(noise) + ADJOINT_RTOL * mag
        side = ("forward" if abs(lhs - est) <= tol < abs(rhs - est) else
                "reverse" if abs(rhs - est) <= tol < abs(lhs - est) else "neither mode clearly")
        detail += f"; finite difference {float(est)!r} (+-{float(noise):.2g}): {side} agrees"
    except Exception as e:  # noqa: BLE001 - the finding stands without its finite difference
        detail += f"; finite difference failed: {type(e).__name__}: {e}"
    return Finding("adjoint", detail, verdict)


__all__ = ["Finding", "crosscheck", "fd_forward", "fd_reverse", "final_values", "jax_derivatives", "jitter",
           "tk_forward", "tk_reverse"]
