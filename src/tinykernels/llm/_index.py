"""Device functions (``@tk.func``) the ``tinykernels.llm`` kernels share: addressing arrays of
rank 1 to 4 through *padded* coordinates ``(c0, c1, c2, c3)`` (an array of rank ``n`` uses the
last ``n`` of them), so one kernel source serves every rank. ``A.ndim`` is a compile-time
constant, so every branch on it disappears from the generated code.

Arrays are indexed with their own strides (strided NumPy views work on backends that take
them); there is no flat view, since device arrays cannot be reshaped.
"""
from __future__ import annotations

import tinykernels as tk


@tk.func
def dims4(A):
    """A's extents padded to four with leading 1s."""
    if A.ndim == 1:
        return 1, 1, 1, A.shape[0]
    elif A.ndim == 2:
        return 1, 1, A.shape[0], A.shape[1]
    elif A.ndim == 3:
        return 1, A.shape[0], A.shape[1], A.shape[2]
    else:
        return A.shape[0], A.shape[1], A.shape[2], A.shape[3]


@tk.func
def rows3(A, r):
    """The padded leading coordinates (c0, c1, c2) of row ``r`` of A (a row: the last axis)."""
    n0, n1, n2, n3 = dims4(A)
    c2 = r % n2
    t = r // n2
    return t // n1, t % n1, c2


@tk.func
def lead2(A, t):
    """The padded coordinates (c0, c1) of block ``t`` of the grid ``(n0 * n1, n2, n3)`` of A
    (:func:`grid3`): only rank 4 divides (a division per work item in a row's loop stops the
    CPU backend from vectorizing it)."""
    if A.ndim == 4:
        return t // A.shape[1], t % A.shape[1]
    return 0, t


def grid3(shape: tuple) -> tuple:
    """The ndrange ``(n0 * n1, n2, n3)`` of the padded extents of an array of ``shape`` (rank
    1 to 4): one work item per element, a row of the last axis the innermost. The CPU
    backend's loop over a row then sees the leading coordinates as constants of the row."""
    n = (1,) * (4 - len(shape)) + tuple(map(int, shape))         # (map: no generator frame)
    return (n[0] * n[1], n[2], n[3])


@tk.func
def unflat4(A, f):
    """The padded coordinates of A's element at C-order position ``f``."""
    n0, n1, n2, n3 = dims4(A)
    c3 = f % n3
    t = f // n3
    c2 = t % n2
    t = t // n2
    return t // n1, t % n1, c2, c3


@tk.func
def ld4(A, c0, c1, c2, c3):
    """A at padded coordinates."""
    if A.ndim == 1:
        return A[c3]
    elif A.ndim == 2:
        return A[c2, c3]
    elif A.ndim == 3:
        return A[c1, c2, c3]
    else:
        return A[c0, c1, c2, c3]


@tk.func
def ldb4(A, c0, c1, c2, c3):
    """A at padded coordinates with NumPy broadcasting on the three leading axes (an extent
    of 1 is read at 0); the caller broadcasts the last axis itself."""
    n0, n1, n2, n3 = dims4(A)
    return ld4(A, min(c0, n0 - 1), min(c1, n1 - 1), min(c2, n2 - 1), c3)


@tk.func
def st4(A, c0, c1, c2, c3, v):
    """A[padded coordinates] = v (rounded to A's dtype)."""
    if A.ndim == 1:
        A[c3] = A.dtype(v)
    elif A.ndim == 2:
        A[c2, c3] = A.dtype(v)
    elif A.ndim == 3:
        A[c1, c2, c3] = A.dtype(v)
    else:
        A[c0, c1, c2, c3] = A.dtype(v)
