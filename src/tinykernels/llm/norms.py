"""RMSNorm over the last axis, with its fused variants: residual add first (``residual=``),
residual add after (:func:`rms_norm_add`), and per-head QK-norm followed by RoPE
(:func:`qk_norm_rope`).

``y = x * (1 / sqrt(mean(x**2) + eps)) * w``, the sum of squares accumulated in float32 for
float32, float16 and bfloat16 inputs, in float64 for float64 ones (the kernels' constexpr
``T``, :func:`_common.compute_type`). One row is handled by ``C.row_group(backend)`` work items:
one (a plain loop over the row) on the CPU and the interpreter, a workgroup with a
``group_reduce`` elsewhere; rows of any length.
"""
from __future__ import annotations

import math

import numpy as np

import tinykernels as tk

from . import _common as C
from ._index import dims4, ld4, rows3, st4
from .rope import angle, check_counter, check_tables

__all__ = ["rms_norm", "rms_norm_add", "qk_norm_rope"]

PLAIN, RESIDUAL_FIRST, RESIDUAL_AFTER = 0, 1, 2


LANES = C.LANES


@tk.func
def sumsq_lanes(x, res, c0, c1, c2, D, add, T):
    """The ``T`` sum of squares of row (c0, c1, c2) (of ``x``; with ``add``, a constant, of
    ``x + res`` rounded to x's dtype, as the fused residual add stores it) by one work item:
    ``LANES`` partial sums (lane ``t`` takes the elements ``k`` with ``k % LANES == t``; the C
    compiler vectorizes the loop over the lanes without reassociating), combined in order."""
    part = tk.private(T, (LANES,))
    for t in range(LANES):
        part[t] = T(0)
    full = D - D % LANES
    for k0 in range(0, full, LANES):
        for t in range(LANES):
            if add:
                v = T(x.dtype(ld4(x, c0, c1, c2, k0 + t) + ld4(res, c0, c1, c2, k0 + t)))
            else:
                v = T(ld4(x, c0, c1, c2, k0 + t))
            part[t] += v * v
    for k in range(full, D):
        if add:
            v = T(x.dtype(ld4(x, c0, c1, c2, k) + ld4(res, c0, c1, c2, k)))
        else:
            v = T(ld4(x, c0, c1, c2, k))
        part[k - full] += v * v
    acc = T(0)
    for t in range(LANES):
        acc += part[t]
    return acc


@tk.func
def sumsq(x, c0, c1, c2, D, lid, W, T):
    """The ``T`` sum of squares of row (c0, c1, c2) by a group of ``W`` items: each item sums
    its share, then a ``group_reduce`` (``W == 1``: :func:`sumsq_lanes`)."""
    acc = T(0)
    if W == 1:
        acc = sumsq_lanes(x, x, c0, c1, c2, D, False, T)
    else:
        for j in range(lid, D, W):
            v = T(ld4(x, c0, c1, c2, j))
            acc += v * v
        acc = tk.group_reduce(acc, "add")
    return acc


@tk.kernel
def _rms(out, s_out, scale_out, x, res, w, eps, mode: tk.constexpr, want_scale: tk.constexpr, T: tk.constexpr):
    """One row per group (ndrange (rows, W), workgroup (1, W)). PLAIN: out = norm(x) * w;
    RESIDUAL_FIRST: s_out = x + res, out = norm(s_out) * w; RESIDUAL_AFTER: out = res + norm(x) * w."""
    r = tk.index(tk.Global, tk.Cartesian)[0]
    lid = tk.index(tk.Local, tk.Linear)
    W = tk.groupsize()[1]
    c0, c1, c2 = rows3(x, r)
    n0, n1, n2, D = dims4(x)
    if mode == RESIDUAL_FIRST:
        for j in range(lid, D, W):
            st4(s_out, c0, c1, c2, j, ld4(x, c0, c1, c2, j) + ld4(res, c0, c1, c2, j))
        acc = sumsq(s_out, c0, c1, c2, D, lid, W, T)
    else:
        acc = sumsq(x, c0, c1, c2, D, lid, W, T)
    inv = 1 / math.sqrt(acc / D + eps)
    if want_scale and lid == 0:
        st4(scale_out, 0, c0, c1, c2, inv)
    for j in range(lid, D, W):
        if mode == RESIDUAL_FIRST:
            v = T(ld4(s_out, c0, c1, c2, j))
        else:
            v = T(ld4(x, c0, c1, c2, j))
        y = v * inv * T(w[j])
        if mode == RESIDUAL_AFTER:
            y = y + T(ld4(res, c0, c1, c2, j))
        st4(out, c0, c1, c2, j, y)


@tk.func
def _rms_row(out, s_out, scale_out, x, res, w, eps, r, mode, want_scale, recompute, T):
    """Row ``r`` of :func:`_rms` by one work item (the host kernels below): unit-stride loops
    over the row that the C compiler vectorizes, the sum of squares in ``LANES`` partial sums
    (:func:`sumsq_lanes`). ``mode``, ``want_scale`` and ``recompute`` are compile-time
    constants (the kernels' constexprs: the branches they rule out are not generated).
    ``recompute``: RESIDUAL_FIRST recomputes ``x + res`` from the row in cache instead of
    reading ``s_out`` back (only when no output shares memory with an input); the same
    arithmetic, so the same bits."""
    c0, c1, c2 = rows3(x, r)
    n0, n1, n2, D = dims4(x)
    if mode == RESIDUAL_FIRST:
        for j in range(D):
            st4(s_out, c0, c1, c2, j, ld4(x, c0, c1, c2, j) + ld4(res, c0, c1, c2, j))
    if mode == RESIDUAL_FIRST and not recompute:
        acc = sumsq_lanes(s_out, s_out, c0, c1, c2, D, False, T)
    else:
        acc = sumsq_lanes(x, res, c0, c1, c2, D, mode == RESIDUAL_FIRST, T)
    inv = 1 / math.sqrt(acc / D + eps)
    if want_scale:
        st4(scale_out, 0, c0, c1, c2, inv)
    for j in range(D):
        if mode == RESIDUAL_FIRST and recompute:
            v = T(x.dtype(ld4(x, c0, c1, c2, j) + ld4(res, c0, c1, c2, j)))
        elif mode == RESIDUAL_FIRST:
            v = T(ld4(s_out, c0, c1, c2, j))
        else:
            v = T(ld4(x, c0, c1, c2, j))
        y = v * inv * T(w[j])
        if mode == RESIDUAL_AFTER:
            y = y + T(ld4(res, c0, c1, c2, j))
        st4(out, c0, c1, c2, j, y)


@tk.kernel
def _rms_rows(out, s_out, scale_out, x, res, w, eps, mode: tk.constexpr, want_scale: tk.constexpr,
              T: tk.constexpr):
    """The host shape of :func:`_rms` (CPU, interpreter): one work item per row, a flat
    ndrange; outputs may share memory with inputs (in place)."""
    _rms_row(out, s_out, scale_out, x, res, w, eps, tk.index(), mode, want_scale, False, T)


@tk.kernel
def _rms_rows_ro(out, s_out, scale_out, x: tk.Const, res: tk.Const, w: tk.Const, eps, mode: tk.constexpr,
                 want_scale: tk.constexpr, T: tk.constexpr):
    """:func:`_rms_rows` when no output shares memory with an input: the inputs are read-only
    (``tk.Const``) and the outputs only written (RESIDUAL_FIRST recomputes ``x + res``), so the
    CPU streams them from their loops (docs/cpu.md, "Streaming stores": stores in a loop over
    a row), whose blocks also prefetch the next row."""
    _rms_row(out, s_out, scale_out, x, res, w, eps, tk.index(), mode, want_scale, True, T)


@tk.kernel
def _qk_norm_rope(out, x, w, cos, sin, pos, eps, offset, use_pos: tk.constexpr, guard: tk.constexpr,
                  T: tk.constexpr):
    """One head vector (row) per group: RMSNorm (float32) then RoPE on the normalized values,
    which are rounded once, on store."""
    r = tk.index(tk.Global, tk.Cartesian)[0]
    lid = tk.index(tk.Local, tk.Linear)
    W = tk.groupsize()[1]
    c0, c1, c2 = rows3(x, r)
    n0, n1, n2, D = dims4(x)
    inv = 1 / math.sqrt(sumsq(x, c0, c1, c2, D, lid, W, T) / D + eps)
    h = cos.shape[1]
    p = c2 + offset
    if use_pos:
        p += pos[0]
    for k in range(lid, h, W):
        c, s = angle(cos, sin, p, k, guard, T)
        x1 = T(ld4(x, c0, c1, c2, k)) * inv * T(w[k])
        x2 = T(ld4(x, c0, c1, c2, k + h)) * inv * T(w[k + h])
        st4(out, c0, c1, c2, k, x1 * c - x2 * s)
        st4(out, c0, c1, c2, k + h, x2 * c + x1 * s)
    for j in range(2 * h + lid, D, W):
        st4(out, c0, c1, c2, j, T(ld4(x, c0, c1, c2, j)) * inv * T(w[j]))


_F32 = np.dtype("float32")


def _check_x_w(fn, x, w, backend):
    C.require_array(x, fn, "x")
    shape = C.require_rank(x, fn, "x")
    dt = C.require_float(x, fn, "x", backend)
    C.require_array(w, fn, "w")
    C.require_shape(w, fn, "w", (shape[-1],))
    if C.dtype_of(w) not in (dt, _F32):                # (messages only on failure: dtype names are slow)
        C.expected(fn, "w", f"dtype {C.one_of(dict.fromkeys((str(dt), 'float32')))} (x's or float32)",
                   f"dtype {C.dtype_of(w)}")
    return shape, dt


def _check_eps(fn, eps):
    C.require(isinstance(eps, (int, float, np.integer, np.floating)) and not isinstance(eps, bool) and eps >= 0,
              fn, "eps", f"expected a float >= 0, got {eps!r}")


def _norm_fast(mode, x, w, eps, residual, out, residual_out=None):
    """The host fast path of :func:`rms_norm` and :func:`rms_norm_add` (``_common.host_same``:
    host ``out``, ``x`` and ``residual`` of one shape and float dtype, ``out`` sharing no
    memory with them or with ``w`` [D] of x's dtype or float32), a float ``eps >= 0``, no
    scale output, the one-item-per-row kernel: the general path's launch. ``out`` None: a
    new array like ``x`` (``_common.host_same``). The fused residual add first
    (``RESIDUAL_FIRST``) also writes the sum to ``residual_out``: a new array like ``x``,
    the very array ``residual`` (in place: the general path's ``_rms_rows``, as the decode
    step calls it), or one sharing no memory with the others. The callers pass only calls
    with the default stream; the result, or None where it does not apply."""
    if type(eps) is not float or not eps >= 0:
        return None
    host = C.host_same(out, x) if residual is None else C.host_same(out, x, residual)
    hw = C.host_args(w) if host is not None else None
    if hw is None or hw[0] is not host[0]:
        return None
    backend, (ho, hx, *hr), res = host
    (hw,) = hw[1]
    D = hx.shape[-1]
    if ho.dtype is not hx.dtype or hw.shape != (D,) or hw.dtype not in (hx.dtype, _F32) \
            or C.ROW_GROUP not in (None, 1) or C.may_share_memory(ho, hw):
        return None
    if mode != RESIDUAL_FIRST:
        _rms_rows_ro.instance(backend)(ho, ho, ho, hx, hr[0] if hr else hx, hw, eps, mode, False,
                                       C.COMPUTE_TYPES.get(hx.dtype, C.F32_TYPE), ndrange=hx.size // D)
        return res
    if residual_out is residual:          # in place on the residual stream
        _rms_rows.instance(backend)(ho, hr[0], hw, hx, hr[0], hw, eps, mode, False, C.COMPUTE_TYPES.get(hx.dtype, C.F32_TYPE),
                                    ndrange=hx.size // D)
        return res, residual_out
    if residual_out is None:
        s_res, hs = C.host_new(x, hx.shape, hx.dtype)
    else:
        hs = C.host_args(residual_out)
        if hs is None or hs[0] is not backend:
            return None
        s_res, (hs,) = residual_out, hs[1]
        if hs.shape != hx.shape or hs.dtype is not hx.dtype or not hs.flags.c_contiguous \
                or not C.disjoint(hs, ho, hx, hr[0], hw):
            return None
    _rms_rows_ro.instance(backend)(ho, hs, ho, hx, hr[0], hw, eps, mode, False, C.COMPUTE_TYPES.get(hx.dtype, C.F32_TYPE),
                                   ndrange=hx.size // D)
    return res, s_res


def _norm_call(fn, mode, x, w, eps, residual, out, residual_out, return_scale, scale_out, stream):
    if stream is None and scale_out is None and not return_scale:
        res = _norm_fast(mode, x, w, eps, residual, out, residual_out)
        if res is not None:
            return res
    backend = C.backend_of(fn, stream=stream, x=x, w=w, residual=residual, out=out, residual_out=residual_out,
                           scale_out=scale_out)
    shape, dt = _check_x_w(fn, x, w, backend)
    _check_eps(fn, eps)
    if residual is not None:
        C.require_array(residual, fn, "residual")
        C.require_shape(residual, fn, "residual", shape)
        if C.dtype_of(residual) != dt:
            C.expected(fn, "residual", f"dtype {dt} (x's)", f"dtype {C.dtype_of(residual)}")
    out = C.output(out, fn, x, shape, dt, backend, reads={"x": x, "residual": residual},
                   reads_across={"w": w})
    s_out = None
    if mode == RESIDUAL_FIRST:
        s_out = C.output(residual_out, fn, x, shape, dt, backend, "residual_out", reads={"x": x, "residual": residual},
                         reads_across={"w": w})
    scale = None
    if return_scale or scale_out is not None:
        scale = C.output(scale_out, fn, x, shape[:-1], np.float32, backend, "scale_out",
                         reads={"x": x, "residual": residual}, reads_across={"w": w})
    rows = math.prod(shape[:-1])
    if rows and shape[-1]:
        sc = C.view(scale, (1,)) if scale is not None and len(shape) == 1 else scale
        args = (out, s_out if s_out is not None else x, sc if sc is not None else w, x,
                residual if residual is not None else x, w, float(eps), mode, scale is not None, C.compute_type(dt))
        group = C.row_group(backend, shape[-1])
        if group == 1 and not any(C.shares_memory(o, i) for o in (out, s_out, scale) if o is not None
                                  for i in (x, residual, w) if i is not None):
            C.launch(_rms_rows_ro, backend, (out, s_out if s_out is not None else out, sc if sc is not None else out)
                     + args[3:], rows, stream=stream)
        elif group == 1:
            C.launch(_rms_rows, backend, args, rows, stream=stream)
        else:
            C.launch_rows(_rms, backend, args, rows, group, stream)
    res = (out,) + ((s_out,) if s_out is not None else ()) + ((scale,) if scale is not None else ())
    return res[0] if len(res) == 1 else res


def rms_norm(x, w, eps: float = 1e-6, residual=None, *, out=None, residual_out=None, return_scale: bool = False,
             scale_out=None, stream=None):
    """RMSNorm of ``x`` [..., D] (rank 1 to 4) over its last axis, times ``w`` [D] (x's dtype
    or float32): ``x / sqrt(mean(x**2) + eps) * w``, float32 accumulation (float64 for a
    float64 ``x``).

    ``residual`` (x's shape and dtype): fused residual add first; ``s = x + residual`` (rounded
    to x's dtype, written to ``residual_out`` or a new array) is normalized and
    ``(rms_norm(s) * w, s)`` returned. ``return_scale=True`` or ``scale_out=`` (float32,
    shape ``x.shape[:-1]``) also returns the per-row factor ``1 / sqrt(mean + eps)``, last."""
    mode = PLAIN if residual is None else RESIDUAL_FIRST
    return _norm_call("rms_norm", mode, x, w, eps, residual, out, residual_out, return_scale, scale_out, stream)


def rms_norm_add(x, w, residual, eps: float = 1e-6, *, out=None, return_scale: bool = False, scale_out=None,
                 stream=None):
    """Fused RMSNorm then residual add: ``residual + rms_norm(x) * w`` (float32 throughout,
    rounded once). ``out=residual`` updates the residual stream in place."""
    if residual is None:
        C.expected("rms_norm_add", "residual", "an array", "None")
    return _norm_call("rms_norm_add", RESIDUAL_AFTER, x, w, eps, residual, out, None, return_scale, scale_out,
                      stream)


def qk_norm_rope(x, w, cos, sin, eps: float = 1e-6, *, offset: int = 0, pos_counter=None, out=None, stream=None):
    """Per-head QK-norm then RoPE, in one pass: each head vector of ``x`` [..., seq, head_dim]
    (rank 2 to 4) is RMS-normalized (float32), scaled by ``w`` [head_dim], and rotated as
    :func:`tinykernels.llm.rope` does (table row ``offset + t``, plus ``pos_counter[0]`` when
    that device-resident int32 [1] counter is given). ``out=x`` works in place."""
    fn = "qk_norm_rope"
    backend = C.backend_of(fn, stream=stream, x=x, w=w, cos=cos, sin=sin, pos_counter=pos_counter, out=out)
    shape, dt = _check_x_w(fn, x, w, backend)
    C.require(len(shape) >= 2, fn, "x", f"has shape {shape}; expected [..., seq, head_dim]")
    _check_eps(fn, eps)
    h = check_tables(fn, shape, cos, sin, dt)
    C.require(C.is_int(offset) and offset >= 0, fn, "offset",
              f"expected an int >= 0, got {offset!r}")
    if pos_counter is None:
        C.require(offset + shape[-2] <= C.shape_of(cos)[0], fn, "cos",
                  f"expected at least {offset + shape[-2]} positions (offset {offset} + {shape[-2]}), "
                  f"got shape {C.shape_str(C.shape_of(cos))}")
    else:
        check_counter(fn, "pos_counter", pos_counter)
    out = C.output(out, fn, x, shape, dt, backend, reads_across={"w": w, "cos": cos, "sin": sin})
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    args = (out, x, w, cos, sin, cos if pos_counter is None else pos_counter, float(eps), int(offset),
            pos_counter is not None, not C.is_debug(backend), C.compute_type(dt))
    C.launch_rows(_qk_norm_rope, backend, args, rows, C.row_group(backend, shape[-1]), stream)
    return out
