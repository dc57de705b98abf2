"""Interned layouts of pointer-addressed device arrays (generic: any driver-API runtime).

An array in a device's flat address space (CUDA today; HIP has the same model) is an
address plus an :class:`ArrayLayout`: dtype, shape, byte strides and device ordinal. One
object exists per distinct layout (:func:`layout_of`), so launch caches key on it and
compare it by identity, and what a launch derives from a layout (its compile signature,
whether its indices fit 32 bits, whether it is a valid kernel argument) is computed once.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .device import c_strides


class ArrayLayout:
    """What a launch needs to know about an array besides its address: dtype, shape, strides
    and device, with the facts derived from them."""
    __slots__ = ("dtype", "shape", "strides", "device", "sig", "fits32", "usable")

    def __init__(self, dtype: np.dtype, shape: tuple, strides: tuple, device):
        self.dtype, self.shape, self.strides, self.device = dtype, shape, strides, device
        size = 1
        for n in shape:
            size *= n
        contiguous = strides == c_strides(shape, dtype) or size <= 1
        self.sig = ("A", dtype.str, len(shape), contiguous)        # arg_sig(..., layout=True)
        item = dtype.itemsize
        if item == 0:                 # not a dtype kernels take (the runtime's _normalize says so)
            self.fits32 = self.usable = False
            return
        self.fits32 = size < 1 << 31 and sum(abs(s // item) * max(n - 1, 0) for s, n in zip(strides, shape)) < 1 << 31
        # what a kernel argument must satisfy (the runtime's _normalize raises the errors)
        self.usable = D.from_any(dtype) is not None and 1 <= len(shape) <= 8 and not any(s % item for s in strides)


_LAYOUTS: dict = {}            # explicit cache: (dtype, shape, strides, device) -> ArrayLayout
_MAX_LAYOUTS = 4096


def layout_of(dtype: np.dtype, shape: tuple, strides: tuple, device) -> ArrayLayout:
    """The one :class:`ArrayLayout` of these values (a bounded cache: arrays keep their own)."""
    key = (dtype, shape, strides, device)
    lay = _LAYOUTS.get(key)
    if lay is None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        lay = _LAYOUTS.setdefault(key, ArrayLayout(dtype, shape, strides, device))
    return lay
