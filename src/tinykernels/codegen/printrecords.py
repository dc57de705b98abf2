"""``tk.print`` on targets without ``printf`` (WebGPU, Metal): the record format.

A kernel appends one record per executed ``tk.print`` call to a buffer of 32-bit words. Word 0
counts the words the records need (an atomic add reserves each record); a record is the print
site's number plus 1, then each printed value's words, by kind:

* ``"f"``: a float's float32 bits (float16/bfloat16 values are widened to float32 first);
* ``"i"``: a 32-bit (or narrower) signed integer's bits; ``"u"``: unsigned; ``"b"``: 1 or 0;
* ``"I"``/``"U"``: a 64-bit signed/unsigned integer as two words, low word first.

A record that does not fit is not written, so the first 0 where a record should start ends
the readable records; the runtime reads the buffer once the kernel is done and formats the
lines as the CPU's ``printf`` writes them (``%g`` for floats, decimal integers, bools as 1/0).
The renderers write the kernel side (``WGSLRenderer.s_Print``, ``MetalRenderer.s_Print``);
:func:`format_prints` is the host side.
"""
from __future__ import annotations

import numpy as np

#: words of a launch's print buffer (1 MiB); word 0 counts the words the records needed
PRINT_WORDS = 1 << 18


def value_kind(dtype) -> str:
    """The record kind of a printed value of ``dtype`` (see the module docstring)."""
    if dtype.kind == "b":
        return "b"
    if dtype.is_float:
        return "f"
    if dtype.bits == 64:
        return "U" if dtype.kind == "u" else "I"
    return "u" if dtype.kind == "u" else "i"


def record(parts, value_words) -> tuple:
    """A print call's site (the texts, None where a value goes, and the values' kinds: what the
    host needs) and its values' word expressions, from the renderer's
    ``value_words(kind, part) -> [expr, ...]``."""
    kinds, words = [], []
    for p in parts:
        if not isinstance(p, str):
            kinds.append(value_kind(p.ty.dtype))
            words += value_words(kinds[-1], p)
    return (tuple(p if isinstance(p, str) else None for p in parts), tuple(kinds)), words


def _value(kind: str, words, k: int) -> tuple:
    """One printed value (as the CPU's printf writes it) from ``words[k:]``, and the next k."""
    w = int(words[k])
    if kind == "f":
        return "%g" % float(np.uint32(w).view(np.float32)), k + 1
    if kind == "i":
        return str(w - (1 << 32) if w >= 1 << 31 else w), k + 1
    if kind in ("U", "I"):
        v = w | (int(words[k + 1]) << 32)
        return str(v - (1 << 64) if kind == "I" and v >= 1 << 63 else v), k + 2
    return str(w), k + 1                      # "u", and "b" as 1/0


def format_prints(words, sites, where: str = "WebGPU") -> str:
    """The lines of a launch's ``tk.print`` records: the texts and values of each call separated
    by spaces, as on the CPU and the interpreter. Records that did not fit in the buffer are
    summarized in one line (``where`` names the backend there)."""
    used, k, end, lines = int(words[0]), 1, min(int(words[0]) + 1, len(words)), []
    while k < end and words[k]:              # (a 0: the first record that did not fit, none after it did)
        texts, kinds = sites[int(words[k]) - 1]
        k += 1
        parts, it = [], iter(kinds)
        for t in texts:
            if t is not None:
                parts.append(t)
                continue
            v, k = _value(next(it), words, k)
            parts.append(v)
        lines.append(" ".join(parts))
    if used + 1 > len(words):
        lines.append(f"[tinykernels: tk.print output truncated: {used + 1 - len(words)} more words than the "
                     f"{len(words)}-word print buffer of a {where} launch]")
    return "".join(line + "\n" for line in lines)


__all__ = ["PRINT_WORDS", "value_kind", "record", "format_prints"]
