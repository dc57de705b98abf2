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
different orders), NaN matching NaN. A kernel the raise path refuses (a ``tk.CompileError`` or
``tk.LaunchError`` from ``raise_kernel``) is reported as ``Finding("unraised", ...)``, not as
a mismatch; :func:`crosscheck` then still runs the ``adjoint`` check.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RTOL = 1e-9            # per element, relative to the array's largest magnitude
ADJOINT_RTOL = 1e-10   # relative to the sum of the absolute values of both inner products' terms


@dataclass
class Finding:
    """One outcome of :func:`crosscheck`: ``kind`` is ``rev-jax``, ``fwd-jax``, ``adjoint`` (a
    mismatch), ``unraised`` (the raise path refused the kernel: not a mismatch) or ``error``
    (``tk.autodiff`` raised)."""
    kind: str
    detail: str

    @property
    def mismatch(self) -> bool:
        return self.kind != "unraised"


def _is_float_array(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == np.float64


def _is_float_scalar(a) -> bool:
    return isinstance(a, float) and not isinstance(a, bool)


def _differs(got: np.ndarray, want: np.ndarray, rtol: float) -> str | None:
    """A description of the first elements where ``got`` and ``want`` differ, or None."""
    fin = lambda a: np.abs(a[np.isfinite(a)])          # noqa: E731
    mag = max(float(np.max(fin(want), initial=0.0)), float(np.max(fin(got), initial=0.0)), 1e-300)
    bad = ~((np.abs(got - want) <= rtol * mag) | (np.isnan(got) & np.isnan(want)) | (got == want))
    if not bad.any():
        return None
    idx = [tuple(int(j) for j in i) for i in np.argwhere(bad)[:4]]
    return ", ".join(f"{i}: {got[i]!r} vs {want[i]!r}" for i in idx)


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
               jax: bool = True, rtol: float = RTOL) -> list:
    """The :class:`Finding` s of ``kernel`` launched with ``args`` (its arguments in parameter
    order; float64 arrays and Python floats are differentiated) on ``backend``: see the module
    docstring. ``jax=False`` runs only the ``adjoint`` check. An empty list: everything agrees."""
    import tinykernels as tk
    b = tk.backend(backend) if isinstance(backend, str) else backend
    inst = kernel(b)

    def fn(*a):
        inst(*a, ndrange=ndrange, workgroupsize=workgroupsize)
    rng = np.random.default_rng(seed)
    u = {k: rng.standard_normal(a.shape) for k, a in enumerate(args) if _is_float_array(a)}
    v = {k: rng.standard_normal(a.shape) for k, a in enumerate(args) if _is_float_array(a)}
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
    if not (abs(lhs - rhs) <= ADJOINT_RTOL * mag + 1e-300 or (np.isnan(lhs) and np.isnan(rhs))):
        out.append(Finding("adjoint", f"<u, J v> = {lhs!r}, <J^T u, v> = {rhs!r}"))
    if not jax:
        return out
    try:
        jjtu, jjv = jax_derivatives(kernel, args, u, v, ndrange, workgroupsize)
    except (tk.CompileError, tk.LaunchError) as e:
        return out + [Finding("unraised", f"{type(e).__name__}: {str(e).splitlines()[0]}")]
    params = [name for name, _ in kernel.params]
    if jjtu is None:
        out.append(Finding("unraised", "JAX has no reverse mode through this kernel's while loop; forward mode checked"))
    for kind, got, want in (("rev-jax", jtu, jjtu), ("fwd-jax", jv0, jjv)):
        for k in sorted(want or ()):
            d = _differs(got[k], want[k], rtol)
            if d:
                out.append(Finding(kind, f"'{params[k]}': {d}"))
    return out


__all__ = ["Finding", "crosscheck", "jax_derivatives", "tk_forward", "tk_reverse"]
