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
    """tab[b] (int32) = the float16 bits :func:`_dequant_bits` writes for the byte b: the
    whole conversion at one scale, computed by the same functions (so the same bits)."""
    b = tk.index()
    tab[b] = f16_bits(e4m3_value(b) * s)


@tk.kernel
def _dequant_lookup(out, x: tk.Const, tab: tk.Const):
    """out (uint16 bits of float16) = tab[x] (x: uint8 bits of e4m3; tab from
    :func:`_dequant_table`): one table load per element, which the CPU loop vectorizes as a
    gather of the 256-entry table (1 KB, in L1): about 1.4x faster than the arithmetic of
    :func:`_dequant_bits` per element."""
    i = tk.index()
    out[i] = tk.uint16(tab[tk.int32(x[i])])


LOOKUP_MIN = 1 << 62
"""Arrays of at least this many elements are dequantized through a table (two launches: the
table, then the lookups); smaller ones in one launch of the arithmetic kernel. Off by
default: on the idle 2-core test machine the arithmetic kernel was faster at every size
measured, 1M elements to 22M (0.23 against 0.30-0.45 ms at 1M, 5.2 against 6.6 ms at 22M),
although the table measured faster in cache on one thread under load (docs/llm.md)."""


def fp8_dequantize(x, scale: float = 1.0, out=None, stream=None):
    """``float16(float32(x) * scale)`` for an fp8 e4m3 array ``x`` (rank 1 to 4)."""
    s = _scale("fp8_dequantize", "scale", scale)
    backend = C.backend_of("fp8_dequantize", stream=stream, x=x, out=out) if C.is_array(x) else None
    if backend is not None and backend.name == "CPU" and C.dtype_of(x) == C.np_dtype("float8_e4m3fn"):
        shape = C.require_rank(x, "fp8_dequantize", "x")
        out = C.output(out, "fp8_dequantize", x, shape, np.float16, backend)
        hx, ho = C.host_flat(x, np.uint8), C.host_flat(out, np.uint16)
        if hx is not None and ho is not None:
            if hx.size >= LOOKUP_MIN:
                tab = np.empty(256, np.int32)
                C.launch(_dequant_table, backend, (tab, s), 256, stream=stream)
                C.launch(_dequant_lookup, backend, (ho, hx, tab), hx.size, stream=stream)
            elif hx.size:
                C.launch(_dequant_bits, backend, (ho, hx, s), hx.size, stream=stream)
            return out
    return binary("fp8_dequantize", MUL, x, 1.0, out, stream, scales=(s, 1.0), out_dtype=np.float16,
                  allowed=FP8, names=("x", "b"))


def fp8_add(a, b, scale_a: float = 1.0, scale_b: float = 1.0, out=None, stream=None):
    """``float16(a * scale_a + b * scale_b)`` for fp8 e4m3 arrays (float32 arithmetic)."""
    s = (_scale("fp8_add", "scale_a", scale_a), _scale("fp8_add", "scale_b", scale_b))
    C.require(C.is_array(b), "fp8_add", "b", f"expected an fp8 array, got {type(b).__name__}")
    return binary("fp8_add", ADD, a, b, out, stream, scales=s, out_dtype=np.float16, allowed=FP8)


def fp8_mul(a, b, scale_a: float = 1.0, scale_b: float = 1.0, out=None, stream=None):
    """``float16((a * scale_a) * (b * scale_b))`` for fp8 e4m3 arrays (float32 arithmetic)."""
    s = (_scale("fp8_mul", "scale_a", scale_a), _scale("fp8_mul", "scale_b", scale_b))
    C.require(C.is_array(b), "fp8_mul", "b", f"expected an fp8 array, got {type(b).__name__}")
    return binary("fp8_mul", MUL, a, b, out, stream, scales=s, out_dtype=np.float16, allowed=FP8)


def fp8_rms_norm(x, w, eps: float = 1e-6, scale: float = 1.0, out=None, stream=None):
    """RMSNorm over the last axis of the dequantized ``x * scale`` (x fp8 e4m3 [..., D],
    rank 1 to 4) times ``w`` (float16 [D]): float32 accumulation, float16 output."""
    fn = "fp8_rms_norm"
    backend = C.backend_of(fn, stream=stream, x=x, w=w, out=out)
    C.require(C.is_array(x), fn, "x", f"expected an array, got {type(x).__name__}")
    shape = C.require_rank(x, fn, "x")
    C.require_float(x, fn, "x", backend, FP8)
    C.require(C.is_array(w), fn, "w", f"expected a float16 array, got {type(w).__name__}")
    C.require_shape(w, fn, "w", (shape[-1],))
    C.require_dtype(w, fn, "w", ("float16",))
    _check_eps(fn, eps)
    s = _scale(fn, "scale", scale)
    C.require(s > 0, fn, "scale", f"must be > 0, got {s}")
    out = C.output(out, fn, x, shape, np.float16, backend)
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if rows and shape[-1]:
        # RMSNorm of x * s: x * s / sqrt(mean((x*s)**2) + eps) = x / sqrt(mean(x**2) + eps / s**2)
        # for s > 0, so the plain kernel runs with eps / s**2 (no extra pass, no rescaling).
        args = (out, x, w, x, x, w, float(eps) / (s * s), PLAIN, False)
        C.launch_rows(_rms, backend, args, rows, C.row_group(backend, shape[-1]), stream)
    return out
