"""FP8 (e4m3, ``tk.float8_e4m3fn``) with a per-tensor scale: the stored value times the
scale is the real value. Every function computes in float32 and writes float16.

* :func:`fp8_dequantize` ``(x, scale) -> float16(x * scale)``
* :func:`fp8_add` / :func:`fp8_mul`: both operands dequantized (each with its own scale),
  added / multiplied, written as float16 (``b`` broadcasts as in :func:`tinykernels.llm.add`)
* :func:`fp8_rms_norm`: RMSNorm of the dequantized row with a float16 weight, float32
  accumulation, float16 output.

Scales are Python floats (host values; a scale is fixed per tensor when it is quantized).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

import tinykernels as tk

from . import _common as C
from ._math import e4m3_value, f16_bits
from .elementwise import ADD, MUL, binary
from .norms import PLAIN, _rms, _check_eps

__all__ = ["fp8_dequantize", "fp8_add", "fp8_mul", "fp8_rms_norm"]

FP8 = ("float8_e4m3fn",)


def _scale(fn: str, name: str, s) -> float:
    C.require(isinstance(s, (int, float, np.integer, np.floating)) and not isinstance(s, bool), fn, name,
              f"expected a Python float, got {type(s).__name__}")
    return float(s)


@tk.kernel
def _dequant_bits(out, x: tk.Const, s):
    """out (uint16 bits of float16) = float16(e4m3 x (uint8 bits) * s), branch-free: the CPU
    loop vectorizes (the prelude's fp8 and float16 converters branch)."""
    i = tk.index()
    out[i] = tk.uint16(f16_bits(e4m3_value(x[i]) * s))


@tk.kernel
def _dequant_table(tab, s):
    """tab[b] (uint16) = the float16 bits :func:`_dequant_bits` writes for the byte b: the
    whole conversion at one scale, computed by the same functions (so the same bits)."""
    b = tk.index()
    tab[b] = tk.uint16(f16_bits(e4m3_value(b) * s))


@tk.kernel
def _dequant_lookup(out, x: tk.Const, tab: tk.Const):
    """out (uint16 bits of float16) = tab[x] (x: uint8 bits of e4m3; tab from
    :func:`_dequant_table`): one table load per element. The CPU does each block of it with
    ``tk_lut16_block`` (passes/streaming.py, kind "lut16"): with AVX-512BW the 512-byte table
    sits in eight zmm registers and 32 bytes are looked up per four word permutes."""
    i = tk.index()
    out[i] = tab[tk.int32(x[i])]


LOOKUP_MIN: int | None = None
"""Arrays of at least this many elements are dequantized through the table of the 256
results at the call's scale (:func:`_table`, made once per scale), smaller ones by the
arithmetic kernel. None: 4096 where the CPU kernels have AVX-512BW (the table is held in
registers, ``tk_lut16_block``: 1.9-3.4x faster than the arithmetic at 64-256 MiB on the
loaded machine; about the same at 4096 elements, where the host time dominates; docs/llm.md),
else never (the plain table loop is a gather, which measured slower than the arithmetic on
the idle two-thread run)."""

REGISTER_TABLE_MIN = 4096


def _lookup_min() -> int:
    return LOOKUP_MIN if LOOKUP_MIN is not None else _default_lookup_min()


@lru_cache(maxsize=None)
def _default_lookup_min() -> int:
    """REGISTER_TABLE_MIN where the CPU kernels have AVX-512BW, else never (once per process,
    as the toolchain is probed)."""
    from ..runtime.compiler import native_cpu_has
    return REGISTER_TABLE_MIN if native_cpu_has("avx512bw") else 1 << 62


@lru_cache(maxsize=64)
def _table(backend, scale_bits: int) -> np.ndarray:
    """The 256 float16 bits (uint16) of :func:`_dequant_table` at the float64 scale whose bits
    are ``scale_bits`` (bits, not values: -0.0 and 0.0, NaN payloads give other tables),
    computed by a synchronous launch (no stream: it reads nothing the caller wrote), read-only."""
    tab = np.empty(256, np.uint16)
    C.launch(_dequant_table, backend, (tab, float(np.uint64(scale_bits).view(np.float64))), 256)
    tab.flags.writeable = False
    return tab


_F16 = np.dtype(np.float16)
_E4M3 = C.np_dtype("float8_e4m3fn")          # (None without ml_dtypes: no fast path)


def _dequantize_fast(x, s: float, out):
    """The host fast path of :func:`fp8_dequantize` (as ``_common.host_same``): host ``x``
    (e4m3, rank 1 to 4, C-contiguous, not empty) and ``out`` (float16 of x's shape,
    C-contiguous, sharing no memory with ``x``; or not given: a new one like ``x``) on one
    CPU backend (``_common.host_args``): the general path's launch, which every other call
    takes. The result, or None where it does not apply."""
    host = C.host_args(out, x)
    if host is None:
        return None
    backend, (ho, hx) = host
    if hx.dtype != _E4M3 or not 0 < hx.ndim <= C.MAX_RANK or not hx.size \
            or not hx.flags.c_contiguous:
        return None
    res, ho = (out, ho) if ho is not None else C.host_new(x, hx.shape, _F16)
    if ho.shape != hx.shape or ho.dtype is not _F16 or not ho.flags.c_contiguous or C.may_share_memory(ho, hx):
        return None
    _launch_dequantize(backend, ho.reshape(-1).view(np.uint16), hx.reshape(-1).view(np.uint8), s, None)
    return res


def _launch_dequantize(backend, ho: np.ndarray, hx: np.ndarray, s: float, stream) -> None:
    """``ho`` (float16 bits) = the e4m3 bytes ``hx`` times ``s``: a table lookup for large
    arrays, the bit arithmetic for small ones."""
    if hx.size >= _lookup_min():
        tab = _table(backend, int(np.float64(s).view(np.uint64)))
        C.launch(_dequant_lookup, backend, (ho, hx, tab), hx.size, stream=stream)
    elif hx.size:
        C.launch(_dequant_bits, backend, (ho, hx, s), hx.size, stream=stream)


def fp8_dequantize(x, scale: float = 1.0, out=None, stream=None):
    """``float16(float32(x) * scale)`` for an fp8 e4m3 array ``x`` (rank 1 to 4)."""
    s = _scale("fp8_dequantize", "scale", scale)
    res = _dequantize_fast(x, s, out) if stream is None else None
    if res is not None:
        return res
    backend = C.backend_of("fp8_dequantize", stream=stream, x=x, out=out) if C.is_array(x) else None
    if backend is not None and backend.name == "CPU" and C.dtype_of(x) == C.np_dtype("float8_e4m3fn"):
        shape = C.require_rank(x, "fp8_dequantize", "x")
        out = C.output(out, "fp8_dequantize", x, shape, np.float16, backend)
        hx, ho = C.host_flat(x, np.uint8), C.host_flat(out, np.uint16)
        if hx is not None and ho is not None:
            _launch_dequantize(backend, ho, hx, s, stream)
            return out
    return binary("fp8_dequantize", MUL, x, 1.0, out, stream, scales=(s, 1.0), out_dtype=np.float16,
                  allowed=FP8, names=("x", "b"))


def fp8_add(a, b, scale_a: float = 1.0, scale_b: float = 1.0, out=None, stream=None):
    """``float16(a * scale_a + b * scale_b)`` for fp8 e4m3 arrays (float32 arithmetic)."""
    s = (_scale("fp8_add", "scale_a", scale_a), _scale("fp8_add", "scale_b", scale_b))
    C.require_array(b, "fp8_add", "b", "an fp8 array")
    return binary("fp8_add", ADD, a, b, out, stream, scales=s, out_dtype=np.float16, allowed=FP8)


def fp8_mul(a, b, scale_a: float = 1.0, scale_b: float = 1.0, out=None, stream=None):
    """``float16((a * scale_a) * (b * scale_b))`` for fp8 e4m3 arrays (float32 arithmetic)."""
    s = (_scale("fp8_mul", "scale_a", scale_a), _scale("fp8_mul", "scale_b", scale_b))
    C.require_array(b, "fp8_mul", "b", "an fp8 array")
    return binary("fp8_mul", MUL, a, b, out, stream, scales=s, out_dtype=np.float16, allowed=FP8)


def fp8_rms_norm(x, w, eps: float = 1e-6, scale: float = 1.0, out=None, stream=None):
    """RMSNorm over the last axis of the dequantized ``x * scale`` (x fp8 e4m3 [..., D],
    rank 1 to 4) times ``w`` (float16 [D]): float32 accumulation, float16 output."""
    fn = "fp8_rms_norm"
    backend = C.backend_of(fn, stream=stream, x=x, w=w, out=out)
    C.require_array(x, fn, "x")
    shape = C.require_rank(x, fn, "x")
    C.require_float(x, fn, "x", backend, FP8)
    C.require_array(w, fn, "w", "a float16 array")
    C.require_shape(w, fn, "w", (shape[-1],))
    C.require_dtype(w, fn, "w", ("float16",))
    _check_eps(fn, eps)
    s = _scale(fn, "scale", scale)
    C.require(s > 0, fn, "scale", f"expected a float > 0, got {s}")
    out = C.output(out, fn, x, shape, np.float16, backend)
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if rows and shape[-1]:
        # RMSNorm of x * s: x * s / sqrt(mean((x*s)**2) + eps) = x / sqrt(mean(x**2) + eps / s**2)
        # for s > 0, so the plain kernel runs with eps / s**2 (no extra pass, no rescaling).
        args = (out, x, w, x, x, w, float(eps) / (s * s), PLAIN, False, tk.float32)   # (float32 arithmetic)
        C.launch_rows(_rms, backend, args, rows, C.row_group(backend, shape[-1]), stream)
    return out
