"""The argument block of a driver-API kernel launch (generic: CUDA's ``cuLaunchKernel``,
HIP's ``hipModuleLaunchKernel``, any API taking ``kernelParams`` or one packed buffer).

A kernel rendered from the SIMT scaffold takes the parameters its ``param_layout`` lists
(:func:`tinykernels.codegen.cuda.param_layout`): the geometry (start, count, step per
dimension), array addresses, shapes and strides, scalars, and in debug mode the error
buffer. Each goes in one 8-byte slot; ``kernelParams`` is an array of pointers to the
slots. :func:`pack_params` writes a block from scratch; :func:`prepare_block` preallocates
one for a launch plan, with the slots that do not change between launches (shapes,
strides) written once and a ``struct`` format for the others. :func:`arg_buffer` packs the
same values into one buffer at their natural alignments (the AMDGPU kernel ABI, which HIP's
``extra`` launch protocol takes).
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from .device import scalar_value

NP_PARAM = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
            "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float32": np.float32,
            "float64": np.float64, "ptr": np.uint64}

FMT = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H", "uint32": "I",
       "uint64": "Q", "float32": "f", "float64": "d", "ptr": "Q"}


def param_value(kind: str, det, values: dict, geom, err_ptr: int = 0):
    """The value of one entry ``(kind, det, _)`` of a ``param_layout`` in a launch: a geometry
    number, an array's address, shape or stride (in elements), a scalar, the error buffer."""
    if kind in ("start", "count", "step"):
        return geom[3 * det + ("start", "count", "step").index(kind)]
    if kind == "ptr":
        return values[det.name].ptr
    if kind == "shape":
        return values[det[0].name].shape[det[1]]
    if kind == "stride":
        a = values[det[0].name]
        return a.strides[det[1]] // a.dtype.itemsize
    if kind == "scalar":
        return scalar_value(values[det[0]], det[1])
    return err_ptr  # err


def pack_params(layout: list, values: dict, geom, err_ptr: int = 0) -> tuple:
    """The argument block of a launch: (buffer of 8-byte slots, array of pointers to
    them). ``values``: kernel argument by IR parameter name (see :func:`bind_args`).

    Debug launches use it; other launches go through a launch plan, which must write these
    bytes (the tests compare them)."""
    buf = np.zeros(max(len(layout), 1), np.uint64)
    raw = buf.view(np.uint8)
    for i, (kind, det, ct) in enumerate(layout):
        b = np.asarray(param_value(kind, det, values, geom, err_ptr)).astype(NP_PARAM[ct]).tobytes()
        raw[8 * i:8 * i + len(b)] = np.frombuffer(b, np.uint8)
    ptrs = (np.arange(len(buf), dtype=np.uint64) * np.uint64(8)) + np.uint64(buf.ctypes.data)
    return buf, ptrs


def arg_offsets(layout: list) -> tuple:
    """Byte offsets of the kernel's parameters in one packed argument buffer (each at its
    natural alignment, as the AMDGPU kernel ABI lays them out: HIP's ``extra`` launch
    protocol) and the buffer's size."""
    offs, pos = [], 0
    for _, _, ct in layout:
        size = np.dtype(NP_PARAM[ct]).itemsize
        pos = -(-pos // size) * size
        offs.append(pos)
        pos += size
    return offs, -(-pos // 8) * 8


def arg_buffer(layout: list, values: dict, geom, err_ptr: int = 0) -> bytearray:
    """The packed argument buffer of one launch (see :func:`arg_offsets`); the values are
    :func:`pack_params`' (:func:`param_value`)."""
    offs, size = arg_offsets(layout)
    buf = bytearray(max(size, 8))
    for off, (kind, det, ct) in zip(offs, layout):
        b = np.asarray(param_value(kind, det, values, geom, err_ptr)).astype(NP_PARAM[ct]).tobytes()
        buf[off:off + len(b)] = b
    return buf


def bind_args(ir, norm) -> dict:
    """Kernel arguments by IR parameter name (arrays: ArrayInfo.name, scalars: their name)."""
    out = {}
    for p, a in zip(ir.params, norm):
        if p[0] == "array":
            out[p[1].name] = a
        elif p[0] == "scalar":
            out[p[1]] = a
    return out


def grid_dims(geom, ndim: int, wg: tuple) -> tuple:
    """(grid, block) in hardware order (x first): the last ndrange dimension is x."""
    grid, block = [1, 1, 1], [1, 1, 1]
    for d in range(ndim):
        hw = ndim - 1 - d
        count = geom[3 * d + 1]
        grid[hw] = -(-count // wg[d])
        block[hw] = wg[d]
    return tuple(grid), tuple(block)


def slot_format(ct: str) -> str:
    """The struct format of one 8-byte parameter slot holding a value of C type ``ct``."""
    size = np.dtype(NP_PARAM[ct]).itemsize
    return FMT[ct] + (f"{8 - size}x" if size < 8 else "")


def _f32_bytes(a) -> bytes:
    return np.float32(a).tobytes()


def scalar_slot(a, ty, ct: str) -> tuple:
    """(struct format of the slot, converter or None) for scalar argument ``a`` of a parameter
    of IR type ``ty`` and C type ``ct``; the bytes are pack_params' (scalar_value, then ct).
    No converter: struct packs ``a`` itself, exactly (a float as float64, an int as int64 or
    uint64, a bool or np.bool_ as one byte 0/1, a NumPy integer as its own type)."""
    c = a.__class__
    if (c is float and ct == "float64") or (c is int and ct in ("int64", "uint64")):
        return slot_format(ct), None
    if c is bool and ct == "uint8":
        return "?7x", None
    if isinstance(a, np.generic):
        dt = a.dtype
        if dt.kind == "b" and ct == "uint8":
            return "?7x", None
        if dt.name == ct and (dt.kind in "iu" or ct == "float64"):
            return slot_format(ct), None
        if dt.name == ct == "float32":       # its own bytes (a float32 NaN keeps its payload)
            return "4s4x", c.tobytes
        if ty.dtype.is_storage_only and ct == "float32":
            return "4s4x", _f32_bytes
    size = np.dtype(NP_PARAM[ct]).itemsize   # anything else: pack_params' own conversion

    def convert(v, ty=ty, np_t=NP_PARAM[ct]):
        return np.asarray(scalar_value(v, ty)).astype(np_t).tobytes()
    return f"{size}s" + (f"{8 - size}x" if size < 8 else ""), convert


class PreparedBlock:
    """A preallocated argument block (see :func:`prepare_block`).

    ``struct`` packs the changing slots, in this order: the geometry, then for each entry of
    ``values`` (an expression over the arguments ``a0, a1, ...`` and the converters ``c<i>``)
    its slot; ``convs``: converter name -> function; ``buf``: the slots; ``params``: the
    ``kernelParams`` array (its address goes to the driver)."""
    __slots__ = ("struct", "values", "convs", "buf", "params")

    def __init__(self, st, values, convs, buf, params):
        self.struct, self.values, self.convs, self.buf, self.params = st, values, convs, buf, params


def prepare_block(layout: list, ir, norm, address_attr: str = "_ptr") -> PreparedBlock | None:
    """A block for ``layout`` that writes :func:`pack_params`' bytes, with the shape and stride
    slots of these (normalized) arguments filled in now; None when the layout has an entry a
    plan cannot write (the debug error buffer, a geometry slot after another kind)."""
    pos = {}
    for i, (p, a) in enumerate(zip(ir.params, norm)):
        if p[0] == "array":
            pos[p[1].name] = i
        elif p[0] == "scalar":
            pos[p[1]] = i
    fmts, values, convs, dyn, const = [], [], {}, [], []
    try:
        for j, (kind, det, ct) in enumerate(layout):
            if kind in ("start", "count", "step"):
                if j != len(dyn):        # the geometry comes first, in order
                    return None
                fmts.append(slot_format(ct))
                dyn.append(j)
            elif kind == "ptr":
                i = pos[det.name]
                fmts.append("Q")
                values.append(f"a{i}.{address_attr}")
                dyn.append(j)
            elif kind == "scalar":
                i = pos[det[0]]
                fmt, conv = scalar_slot(norm[i], det[1], ct)
                fmts.append(fmt)
                if conv is None:
                    values.append(f"a{i}")
                else:
                    convs[f"c{i}"] = conv
                    values.append(f"c{i}(a{i})")
                dyn.append(j)
            elif kind in ("shape", "stride"):
                const.append(j)
            else:                        # "err" (debug) and anything unknown
                return None
    except KeyError:
        return None
    st = struct.Struct("<" + "".join(fmts))
    n = len(layout)
    slot_of = {j: k for k, j in enumerate(dyn + const)}
    buf = (ctypes.c_uint64 * n)()
    base = ctypes.addressof(buf)
    bound = bind_args(ir, norm)
    for j in const:
        kind, det, ct = layout[j]
        a = bound[det[0].name]
        v = a.shape[det[1]] if kind == "shape" else a.strides[det[1]] // a.dtype.itemsize
        b = np.asarray(v).astype(NP_PARAM[ct]).tobytes()
        ctypes.memmove(base + 8 * slot_of[j], b, len(b))
    params = (ctypes.c_void_p * n)(*[base + 8 * slot_of[j] for j in range(n)])
    return PreparedBlock(st, values, convs, buf, params)
