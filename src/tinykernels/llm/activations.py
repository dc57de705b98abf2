"""Activation functions: ``swiglu(w1, w3) = w1 * sigmoid(w1) * w3`` (the gated FFN of
Llama-family models), one pass, float32 arithmetic for 16-bit inputs."""
from __future__ import annotations

from .elementwise import SWIGLU, _binary_fast, binary

__all__ = ["swiglu"]


def swiglu(w1, w3, out=None, stream=None):
    """``w1 * sigmoid(w1) * w3`` elementwise (``w3`` broadcasts against ``w1`` as in
    :func:`tinykernels.llm.add`)."""
    res = _binary_fast(SWIGLU, w1, w3, out, stream)
    if res is not None:
        return res
    return binary("swiglu", SWIGLU, w1, w3, out, stream, names=("w1", "w3"))
