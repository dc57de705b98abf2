"""Checking an autodiff case (:mod:`.gradgen`): gradients against finite differences, forward
mode against reverse mode, and the compiled backends against the interpreter.

The kernel maps the state ``X`` (every float array: inputs, outputs, accumulators, in-place
arrays; and the scalar ``w``) to the final values of the arrays, ``F(X)``, with Jacobian ``J``. On
each backend (the reference first):

- reverse mode with every array's shadow seeded with random ``u`` leaves ``J^T u`` in the shadows
  (read-only inputs keep ``u`` plus their gradient, overwritten outputs are consumed to 0) and
  returns ``w``'s gradient;
- forward mode with random tangents ``v`` (``dw`` for ``w``) leaves ``J v`` in the shadows.

Checks, each a :class:`.run.Mismatch` of its own kind:

- ``grad-jvp``: ``<u, J v> == <J^T u, v>`` within ``1e-10`` of the sum of the absolute values
  of the terms of both sides (the two modes round differently, nothing else);
- ``grad-fd``: ``<J^T u, v>`` against the central difference ``(L(X + h v) - L(X - h v)) / 2h``
  of ``L = <u, F(X)>`` in float64 (``h = 1e-5``: truncation ``~h**2``, rounding ``~1e-16 / h``),
  run on the first backend. A point where the differences at ``h``, ``2h`` and ``h / 2`` disagree
  with each other lies within a step of a kink or a jump (a branch, ``min``/``max``/``abs``): the
  inputs are re-sampled (a new random point) up to :data:`RESAMPLES` times, and a case that finds
  no smooth point is counted as ``skipped``, not as a mismatch;
- ``grad-backend``: every compiled backend's ``J^T u``, ``w``'s gradient and ``J v`` against the
  reference's, within ``1e-9`` relative to the array's largest magnitude (atomics and partial sums
  add in another order);
- ``grad-primal``: every compiled backend's final values ``F(X)`` against the reference's (same
  tolerance). The finite differences run on the first compiled backend: where its kernel computes
  another function than the reference's, its gradients agree with its own differences and could
  agree with the reference's gradients too (the CPU ran no item past the ndrange of a flat
  ``unsafe_indices`` kernel, nor did the adjoints the interpreter runs on it: gradfz22);
- ``error`` / ``ref-error``: a backend (or the reference) raised.
"""
from __future__ import annotations

import numpy as np

from .case import Case
from .basics import Mismatch, _backend, _err_text, load_kernel

H = 1e-5            # finite-difference step
RESAMPLES = 4       # new random points tried when a step straddles a kink
JVP_RTOL = 1e-10
FD_RTOL = 1e-6
BACKEND_RTOL = 1e-9


def _state(case: Case, rng: np.random.Generator | None = None):
    """The float arrays (name -> copy), the int arrays and the scalar ``w`` of ``case``; with
    ``rng``, a new random point (the float values re-drawn the way the generator draws them)."""
    floats, ints, w = {}, {}, None
    for s in case.args:
        if s.kind == "array" and np.asarray(s.value).dtype.kind == "f":
            v = np.array(s.value, dtype=np.float64, copy=True)
            floats[s.name] = rng.uniform(-1.5, 1.5, v.shape) if rng is not None else v
        elif s.kind == "array":
            ints[s.name] = np.array(s.value, copy=True)
        elif s.kind == "scalar":
            w = float(rng.uniform(0.5, 1.5)) if rng is not None else float(s.value)
    return floats, ints, w


def _launcher(case: Case, backend):
    """``fn(*args)`` launching the case's kernel on ``backend`` (what tk.autodiff records)."""
    k = getattr(case, "kernel", None) or load_kernel(case.source, case.kname)
    inst = k(backend)

    def fn(*args):
        inst(*args, ndrange=case.ndrange, workgroupsize=case.workgroupsize)
    return fn


def _order(case: Case) -> list:
    return [s.name for s in case.args]


def _host(a) -> np.ndarray:
    return a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)


def _dev(a: np.ndarray, b):
    import tinykernels as tk
    return a.copy() if getattr(b, "is_host", True) else tk.asarray(np.ascontiguousarray(a), backend=b)


def _forward(case, b, fn, floats, ints, w) -> dict:
    """The final values of the float arrays after one launch."""
    import tinykernels as tk
    arrs = {k: _dev(v, b) for k, v in floats.items()}
    args = [arrs[n] if n in arrs else _dev(ints[n], b) if n in ints else w for n in _order(case)]
    with np.errstate(all="ignore"):
        fn(*args)
    tk.synchronize(b)
    return {k: _host(v).astype(np.float64) for k, v in arrs.items()}


def _reverse(case, b, fn, floats, ints, w, u) -> tuple:
    """(J^T u per array, w's gradient)."""
    import tinykernels as tk
    pairs = {k: (_dev(v, b), _dev(u[k], b)) for k, v in floats.items()}
    wa = tk.Active(w)
    args = [tk.Duplicated(*pairs[n]) if n in pairs else tk.Const(_dev(ints[n], b)) if n in ints else wa
            for n in _order(case)]
    with np.errstate(all="ignore"):
        (gw,) = tk.autodiff(tk.Reverse, fn, *args)
    tk.synchronize(b)
    return {k: _host(p[1]).astype(np.float64) for k, p in pairs.items()}, float(gw)


def _jvp(case, b, fn, floats, ints, w, v, dw) -> dict:
    """J v per array."""
    import tinykernels as tk
    pairs = {k: (_dev(x, b), _dev(v[k], b)) for k, x in floats.items()}
    args = [tk.Duplicated(*pairs[n]) if n in pairs else tk.Const(_dev(ints[n], b)) if n in ints
            else tk.Duplicated(w, dw) for n in _order(case)]
    with np.errstate(all="ignore"):
        tk.autodiff(tk.Forward, fn, *args)
    tk.synchronize(b)
    return {k: _host(p[1]).astype(np.float64) for k, p in pairs.items()}


def _dot(a: dict, b: dict) -> tuple:
    """(sum of a*b over all arrays, sum of |a*b|)."""
    with np.errstate(invalid="ignore", over="ignore"):     # inf - inf in an overflowed case
        s = sum(float(np.sum(a[k] * b[k])) for k in a)
        m = sum(float(np.sum(np.abs(a[k] * b[k]))) for k in a)
    return s, m


def _fd(case, b, fn, floats, ints, w, u, v, dw, h) -> float:
    """Central difference of <u, F(X)> along (v, dw) with step h."""
    def loss(t):
        xs = {k: floats[k] + t * v[k] for k in floats}
        out = _forward(case, b, fn, xs, ints, w + t * dw)
        return _dot(u, out)[0]
    return (loss(h) - loss(-h)) / (2 * h)


def _smooth_fd(case, b, fn, floats, ints, w, u, v, dw, ad):
    """The finite difference at ``H`` when the differences at H/2, H and 2H agree with each other
    (the point is not within a step of a kink, and the loss does not oscillate within a step),
    else None. Their agreement is judged on their own magnitude, not on the gradient's: seed
    89000435's ``expm1(sin(p ** 3))`` with ``p ** 3 = 7.6e16`` (an ulp of 16, billions of periods
    within a step) gave differences of -3.2e3, -1.1e5 and -5.8e4, which agreed within 1e-6 of the
    reverse-mode value 1.2e19 and were reported as a wrong gradient (adx20)."""
    d1 = _fd(case, b, fn, floats, ints, w, u, v, dw, H)
    d2 = _fd(case, b, fn, floats, ints, w, u, v, dw, 2 * H)
    d0 = _fd(case, b, fn, floats, ints, w, u, v, dw, H / 2)
    scale = max(abs(d0), abs(d1), abs(d2)) + 1e-3
    if not all(np.isfinite((d0, d1, d2))) or abs(d1 - d2) > FD_RTOL * scale or abs(d0 - d1) > FD_RTOL * scale:
        return None
    return d1


def _agree(fwd: float, ad: float, mag: float, undefined: bool) -> bool:
    """``<u, J v> == <J^T u, v>`` within ``JVP_RTOL`` of ``mag``. Where the kernel's result is
    itself inf or NaN (``undefined``) a side that is not finite has no value to be right about
    (as the cross-check's ``undefined`` verdict, docs/autodiff.md): seed 89000608 overflowed to
    inf and both modes gave NaN, reported as a mismatch until adx21. Elsewhere NaN is a
    mismatch, also against NaN."""
    if undefined and not (np.isfinite(fwd) and np.isfinite(ad)):
        return True
    return abs(fwd - ad) <= JVP_RTOL * mag + 1e-300


def _where(got: dict, want: dict, rtol: float):
    """(array, [(index, got, want)]) of the first array whose values differ beyond rtol of its
    largest magnitude, or None."""
    for k in want:
        g, x = got[k], want[k]
        # the largest finite magnitude: a NaN elsewhere in the array must not flag every element
        fin = lambda a: np.abs(a[np.isfinite(a)])          # noqa: E731
        mag = max(float(np.max(fin(x), initial=0.0)), float(np.max(fin(g), initial=0.0)), 1e-300)
        # equal values agree, the same infinity too (inf - inf is NaN: seed 89000608's
        # gradients, inf on every backend, were reported as differing until adx21)
        with np.errstate(invalid="ignore"):
            bad = ~((g == x) | (np.abs(g - x) <= rtol * mag) | (np.isnan(g) & np.isnan(x)))
        if bad.any():
            idx = np.argwhere(bad)[:5]
            return k, [(tuple(int(j) for j in i), repr(float(g[tuple(i)])), repr(float(x[tuple(i)]))) for i in idx]
    return None


def _grads(case, b, floats, ints, w, u, v, dw):
    fn = _launcher(case, b)
    g, gw = _reverse(case, b, fn, floats, ints, w, u)
    jv = _jvp(case, b, fn, floats, ints, w, v, dw)
    return fn, g, gw, jv


def check_grad_case(case: Case, backends=("CPU",), reference="INTERP") -> list:
    """The Mismatches of an autodiff case (see the module docstring); ``case.features`` gains
    ``grad-skipped`` when no smooth point was found for the finite-difference check."""
    seed = case.seed
    rng = np.random.default_rng(seed ^ 0x9AD)
    bnames = [b if isinstance(b, str) else getattr(b, "name", repr(b)) for b in backends]
    floats, ints, w = _state(case)
    ref = _backend(reference)
    out: list = []
    fd_b = _backend(backends[0]) if backends else ref
    for attempt in range(RESAMPLES + 1):
        if attempt:
            floats, ints, w = _state(case, rng)
        u = {k: rng.standard_normal(x.shape) for k, x in floats.items()}
        v = {k: rng.standard_normal(x.shape) for k, x in floats.items()}
        dw = float(rng.standard_normal())
        try:
            fn_ref, g, gw, jv = _grads(case, ref, floats, ints, w, u, v, dw)
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            return [Mismatch(seed, bn, "ref-error", detail=_err_text(e)) for bn in bnames or [str(reference)]]
        ad, mag_r = _dot(g, v)
        ad += gw * dw
        fd = _smooth_fd(case, fd_b, fn_ref if fd_b is ref else _launcher(case, fd_b), floats, ints, w, u, v, dw, ad)
        if fd is not None or attempt == RESAMPLES:
            break
    # forward against reverse on the reference
    fwd, mag_f = _dot(u, jv)
    mag = mag_r + mag_f + abs(gw * dw)
    ref_out = _forward(case, ref, fn_ref, floats, ints, w)
    undefined = not all(np.isfinite(v).all() for v in ref_out.values())
    if undefined:
        case.features.add("grad-undefined")
    if not _agree(fwd, ad, mag, undefined):
        out.append(Mismatch(seed, str(reference), "grad-jvp", "<u,Jv>",
                            [((), repr(fwd), repr(ad))], detail=f"<u, J v> = {fwd!r}, <J^T u, v> = {ad!r}"))
    if fd is None:
        case.features.add("grad-skipped")
    elif not abs(fd - ad) <= FD_RTOL * (abs(fd) + mag + 1.0):
        out.append(Mismatch(seed, str(reference), "grad-fd", "<J^T u,v>",
                            [((), repr(ad), repr(fd))], detail=f"reverse {ad!r}, finite difference {fd!r}"))
    for b, bn in zip(backends, bnames):
        try:
            fn_b, gb, gwb, jvb = _grads(case, _backend(b), floats, ints, w, u, v, dw)
            out_b = _forward(case, _backend(b), fn_b, floats, ints, w)
        except Exception as e:  # noqa: BLE001
            out.append(Mismatch(seed, bn, "error", detail=_err_text(e)))
            continue
        bad = _where(out_b, ref_out, BACKEND_RTOL)
        if bad:
            out.append(Mismatch(seed, bn, "grad-primal", bad[0], bad[1]))
        bad = (_where(gb, g, BACKEND_RTOL) or _where({"dw": np.array([gwb])}, {"dw": np.array([gw])}, BACKEND_RTOL)
               or _where(jvb, jv, BACKEND_RTOL))
        if bad:
            out.append(Mismatch(seed, bn, "grad-backend", bad[0], bad[1]))
        fwd_b, _ = _dot(u, jvb)
        ad_b = _dot(gb, v)[0] + gwb * dw
        if not _agree(fwd_b, ad_b, mag, undefined):
            out.append(Mismatch(seed, bn, "grad-jvp", "<u,Jv>", [((), repr(fwd_b), repr(ad_b))]))
    return out



# --- narrow cases (gradgen's NARROW_MODE) ------------------------------------------------------

#: unit roundoff of each narrow type (half its epsilon)
NARROW_U = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}
NARROW_R = 8.0      # the tolerance in units of the narrow type's rounding (see check_grad_narrow_case)
NEAR = 2            # float64 gradients at nearby points, for the spread of the oracle
_FMAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}
#: the smallest subnormal of each type: a result below it rounds to 0 (seed 96000051: float16
#: tangents of 2.8e-11 are 0.0)
_TINY = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -133, "float32": 2.0 ** -149}


def _dtypes(case: Case) -> dict:
    """name -> NumPy dtype of each float array of a narrow case."""
    from ... import dtypes as D
    out = {}
    for s in case.args:
        if s.kind == "array":
            a = np.asarray(s.value)
            if D.from_any(a.dtype).name in NARROW_U or a.dtype == np.float64:
                out[s.name] = a.dtype
    return out


def _narrow_state(case: Case, dts: dict, rng: np.random.Generator | None = None):
    """(float arrays as float64 holding values exact in their dtype, int arrays, w)."""
    floats, ints, w = {}, {}, None
    for s in case.args:
        if s.kind == "array" and s.name in dts:
            v = np.asarray(s.value).astype(np.float64)
            if rng is not None:
                v = rng.uniform(-1.5, 1.5, v.shape)
            floats[s.name] = _round(v, dts[s.name])
        elif s.kind == "array":
            ints[s.name] = np.array(s.value, copy=True)
        elif s.kind == "scalar":
            w = float(rng.uniform(0.5, 1.5)) if rng is not None else float(s.value)
    return floats, ints, w


def _round(a, dt) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).astype(dt).astype(np.float64)


def _as(d: dict, dts: dict) -> dict:
    return {k: np.asarray(v).astype(dts[k]) for k, v in d.items()}


def _scale(a: np.ndarray) -> float:
    fin = np.abs(a[np.isfinite(a)])
    return float(np.max(fin, initial=0.0))


def _dev_ok(b, dts: dict) -> bool:
    sup = getattr(b, "supports", None)
    if sup is None:
        return True
    from ... import dtypes as D
    try:
        return all(sup(D.from_any(dt)) for dt in dts.values())
    except Exception:  # noqa: BLE001 - a backend without the query runs them all
        return True


def _narrow_bad(got: dict, want: dict, spread: dict, tag: str, U: float, case: Case, tiny: dict):
    """(array, [(index, got, want)], tolerance) of the first array of ``got`` outside its
    tolerance around ``want`` (see check_grad_narrow_case), or None; ``case.narrow_used`` keeps
    the largest fraction of a tolerance used. ``tiny``: the smallest subnormal of each array's
    type (``"w"``: the narrow type's)."""
    for k, want_k in want.items():
        tol = NARROW_R * (U * _scale(want_k) + tiny[k]) + 2 * spread[tag, k]
        x = got[k]
        with np.errstate(invalid="ignore"):
            wrong = ~((x == want_k) | (np.abs(x - want_k) <= tol) | (np.isnan(x) & np.isnan(want_k)))
            used = np.abs(x - want_k)[np.isfinite(x - want_k)] / tol
        case.narrow_used = max(getattr(case, "narrow_used", 0.0), float(np.max(used, initial=0.0)))
        if wrong.any():
            idx = np.argwhere(wrong)[:5]
            return k, [(tuple(int(j) for j in i), repr(float(x[tuple(i)])), repr(float(want_k[tuple(i)])))
                       for i in idx], tol
    return None


def check_grad_narrow_case(case: Case, backends=("CPU",), reference="INTERP") -> list:
    """The Mismatches of a narrow autodiff case: on every backend (the reference included), the
    gradients (reverse mode: ``J^T u`` and ``w``'s gradient), the tangents (``J v``) and the
    final values of the kernel on its float16 / bfloat16 arrays against the *oracle*, the same
    kernel on float64 arrays holding the same values (exact upcasts; the seeds ``u`` and the
    tangents ``v`` are drawn in the narrow type too), run on the reference.

    Tolerance. The narrow kernel computes in float32 and rounds every value it stores (arrays,
    private and local arrays, locals of the narrow type) to the narrow type, and its gradient
    is rounded once into the narrow shadow: each of those roundings moves a value by at most
    ``U`` (the type's unit roundoff, :data:`NARROW_U`) relative, and the gradient, a function
    of those values, by about ``U`` times their magnitude times the derivative's sensitivity.
    The sensitivity is measured, not assumed: the oracle's gradients are also computed at
    :data:`NEAR` points whose every float value is moved by up to ``4 U`` relative (a random
    perturbation the size of a few roundings); ``spread`` is the largest change of each result
    array seen there. An array agrees when every element is within
    ``NARROW_R * (U * max|oracle| + tiny) + 2 * spread`` of the oracle (``tiny`` the type's
    smallest subnormal: a float16 tangent of 2.8e-11 is 0.0, seed 96000051), the array's largest magnitude
    standing for the sum of the terms an element adds (``NARROW_R = 8``: a handful of roundings
    in a chain, each up to ``U``; the first 14 seeds from 96000000 on the interpreter, the CPU
    and PoCL used at most 0.11 of a tolerance twice that, so about ``1.8 U``, which
    ``case.narrow_used`` reports). Rounding the result into the shadow alone may take ``U/2``.
    A wrong gradient from a dropped or doubled contribution, a caller's shadow not added to or
    not consumed, or one rounded per contribution (a 1000-read accumulation stuck at 256 in
    bfloat16) is far outside that. A point where the spread
    exceeds a quarter of the array's magnitude lies near a kink or a branch the roundings may
    flip (``min``/``max``/``if`` on data), and one where an oracle's result exceeds a quarter of
    the narrow type's largest value is where the narrow kernel may overflow (a float16 tangent
    of -235873 is -inf, seed 96000008): the point is re-drawn up to :data:`RESAMPLES` times,
    and a case that finds no such point is counted as ``grad-skipped``. The roundings of the
    narrow kernel itself can flip a branch the oracle's perturbations do not (``x < sin(x)`` for a
    small float16 ``x``, where ``sin(x)`` rounds to ``x``; seed 96000014 gave 0.71 on the
    interpreter, 1.02 on the CPU and PoCL, 0.81 in float64): a point is also re-drawn where the
    reference's narrow final values are outside their tolerance, and a backend whose final values
    are (its transcendental functions an ulp from the reference's flipped one) has its gradients
    left uncompared and the case the feature ``grad-narrow-diverged`` (the final values of narrow
    kernels are the forward fuzzer's to compare, with its ulp tolerances). Mismatch kinds:
    ``grad-narrow`` (gradients, ``w``'s gradient or tangents), ``error`` / ``ref-error``."""
    seed = case.seed
    rng = np.random.default_rng(seed ^ 0x4A77)
    dts = _dtypes(case)
    from ... import dtypes as D
    nname = next((D.from_any(dt).name for dt in dts.values() if np.dtype(dt).itemsize == 2), "float16")
    U = NARROW_U[nname]
    fmax = _FMAX[nname]
    tiny = {k: _TINY[D.from_any(dt).name] for k, dt in dts.items()}
    tiny["w"] = _TINY[nname]
    bnames = [b if isinstance(b, str) else getattr(b, "name", repr(b)) for b in backends]
    ref = _backend(reference)
    floats, ints, w = _narrow_state(case, dts)
    stable = False
    for attempt in range(RESAMPLES + 1):
        if attempt:
            floats, ints, w = _narrow_state(case, dts, rng)
        u = {k: _round(rng.standard_normal(x.shape), dts[k]) for k, x in floats.items()}
        v = {k: _round(rng.standard_normal(x.shape), dts[k]) for k, x in floats.items()}
        dw = float(rng.standard_normal())
        try:
            fn_ref, g, gw, jv = _grads(case, ref, floats, ints, w, u, v, dw)
            out64 = _forward(case, ref, fn_ref, floats, ints, w)
            spread = {}
            for _ in range(NEAR):
                f2 = {k: x * (1 + rng.uniform(-4 * U, 4 * U, x.shape)) for k, x in floats.items()}
                w2 = w * (1 + rng.uniform(-4 * U, 4 * U))
                g2, gw2 = _reverse(case, ref, fn_ref, f2, ints, w2, u)
                jv2 = _jvp(case, ref, fn_ref, f2, ints, w2, v, dw)
                o2 = _forward(case, ref, fn_ref, f2, ints, w2)
                for tag, a, b in (("g", g2, g), ("jv", jv2, jv), ("out", o2, out64), ("w", {"w": np.array([gw2])},
                                                                                         {"w": np.array([gw])})):
                    for k in a:
                        with np.errstate(invalid="ignore"):
                            d = float(np.max(np.abs(a[k] - b[k]), initial=0.0))
                        spread[tag, k] = max(spread.get((tag, k), 0.0), d if np.isfinite(d) else np.inf)
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            return [Mismatch(seed, bn, "ref-error", detail=_err_text(e)) for bn in bnames or [str(reference)]]
        wants = {"g": g, "jv": jv, "out": out64, "w": {"w": np.array([gw])}}
        stable = (all(sp <= 0.25 * (_scale(wants[tag][k]) + 1e-3) for (tag, k), sp in spread.items())
                  and all(_scale(a) < fmax / 4 for d in wants.values() for a in d.values()))
        if stable:      # the reference's narrow results near the oracle's: no branch its roundings flip
            try:
                ob = _forward(case, ref, fn_ref, _as(floats, dts), ints, w)
            except Exception as e:  # noqa: BLE001
                return [Mismatch(seed, bn, "ref-error", detail=_err_text(e)) for bn in bnames or [str(reference)]]
            stable = _narrow_bad(ob, out64, spread, "out", U, case, tiny) is None
        if stable:
            break
    if not stable:
        case.features.add("grad-skipped")
        return []
    out: list = []
    case.narrow_used = 0.0      # the largest fraction of the tolerance a result used (docs/fuzzing.md)
    for b, bn in [(reference, str(reference))] + list(zip(backends, bnames)):
        bk = _backend(b)
        if not _dev_ok(bk, dts):
            case.features.add("grad-narrow-unsupported")      # counted in the run's summary
            continue
        try:
            fn_b = _launcher(case, bk)
            gb, gwb = _reverse(case, bk, fn_b, _as(floats, dts), ints, w, _as(u, dts))
            jvb = _jvp(case, bk, fn_b, _as(floats, dts), ints, w, _as(v, dts), dw)
            ob = _forward(case, bk, fn_b, _as(floats, dts), ints, w)
        except Exception as e:  # noqa: BLE001
            out.append(Mismatch(seed, bn, "error", detail=_err_text(e)))
            continue
        got = {"g": gb, "jv": jvb, "out": ob, "w": {"w": np.array([gwb])}}
        if _narrow_bad(ob, out64, spread, "out", U, case, tiny) is not None:
            # the narrow kernel's own roundings took another branch here than the reference's
            # (a transcendental an ulp apart, then x < sin(x) at float16): its gradients are of
            # another function; primal agreement of narrow kernels is the forward fuzzer's
            case.features.add("grad-narrow-diverged")
            continue
        for tag in ("g", "w", "jv"):
            bad = _narrow_bad(got[tag], wants[tag], spread, tag, U, case, tiny)
            if bad:
                out.append(Mismatch(seed, bn, "grad-narrow", f"{tag}:{bad[0]}", bad[1],
                                    detail=f"{nname}, tolerance {bad[2]:.3g}"))
                break
    return out


__all__ = ["check_grad_case", "check_grad_narrow_case"]
