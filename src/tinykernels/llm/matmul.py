"""``llm.matmul``: quantized and float matrix products.

Routes (``a`` [M, K], ``b`` [K] for a GEMV or [K, N] for a GEMM, float32 ``b``):

* ``a`` a ``QTensor`` (q4_0, q8_0, q4_k), ``b`` [K]: fused dequant-GEMV; the weights are
  decoded from their bytes inside the dot product, exactly as ``dequantize`` computes them.
* ``a`` a q4_0/q8_0 ``QTensor``, ``b`` [K, N] with small N: fused dequant-GEMM (GPUs: one work
  item per output; host backends: one per row of ``a``, over ``b`` transposed to [N, K]);
  larger N, and q4_k: ``dequantize`` into a float32 scratch, then the float GEMM.
* ``a`` float32: GEMV for ``b`` [K], tiled GEMM (16 x 16 tiles in local memory) for [K, N].

Accumulation is float32. On the host backends (CPU, interpreter) a GEMV runs one work item
per output row with 32 independent partial sums, a shape GCC vectorizes without reassociating
anything: q4_k and float32 ``a``: lane ``j`` sums the weights ``k`` with ``k % 32 == j``;
q4_0/q8_0: each block's integers times ``x`` in 16 block sums, scaled once per lane by an FMA
into lanes 0-15 (even blocks) or 16-31 (odd ones) (:func:`q4_0_block_dot`); on GPUs one
workgroup per row strides over the row and ends in ``tk.group_reduce``.
"""
from __future__ import annotations

import math
import sys

import numpy as np

import tinykernels as tk

from . import _common as C
from .quant import QTensor, half_at, half_at_host, q4k_quarter, q4k_scale_min

__all__ = ["matmul", "quantize_activations"]

LANES = 32          # partial sums per row on the host backends
GROUP = 64          # work items per row on GPUs
TILE = 16           # float GEMM tile
CHUNK = 8           # blocks whose scales a host GEMV decodes before their weights
FUSED_MAX_N = 8     # fused quantized GEMM up to this many columns; beyond, dequantize + GEMM
X_INT8, X_INT8_ZERO, X_PACKED = 0, 1, 2     # layouts of the quantized activations (_quantize_x_q8_0)
Q4_0_ZERO = 8       # q4_0's weights are their 4-bit values minus this


# ----------------------------------------------------------------------------- decoding helpers

@tk.func
def q4_0_pair(data, r, base, j, d):
    """Weights ``j`` and ``j + 16`` of the Q4_0 block at ``data[r, base]`` (scale ``d``)."""
    q = tk.int32(data[r, base + 2 + j])
    return d * tk.float32((q & 15) - 8), d * tk.float32((q >> 4) - 8)


@tk.func
def q8_0_at(data, r, base, j, d):
    """Weight ``j`` of the Q8_0 block at ``data[r, base]`` (scale ``d``)."""
    q = tk.int32(data[r, base + 2 + j])
    return tk.float32(q - ((q & 128) << 1)) * d


# ----------------------------------------------------------------------------- host GEMV (row per item)

@tk.func
def scaled_block_sums(acc, h, d, x, o, w):
    """The 32 integer weights ``w`` of a block (exact in float32) times ``x[o ..]`` into the 16
    lanes ``acc[h ..]``: ``s_j = w_j x_{o+j}`` then ``fma(w_{j+16}, x_{o+j+16}, s_j)``, and
    ``acc[h + j] = fma(d, s_j, acc[h + j])``: the block's scale ``d`` applied once per lane,
    not to each weight (on the CPU one multiply and two FMAs per block)."""
    for j in range(16):
        s = w[j] * x[o + j]
        s = tk.fma(w[j + 16], x[o + j + 16], s)
        acc[h + j] = tk.fma(d, s, acc[h + j])


@tk.func
def q4_0_block_dot(acc, h, data, r, b, d, x, tab, w):
    """Q4_0 block ``b`` of row ``r`` (scale ``d``) into ``acc[h ..]`` (:func:`scaled_block_sums`),
    its ``q - 8`` looked up by the nibbles in ``tab`` = [-8 .. 7] (``tk.lookup_u4`` unscaled:
    on the CPU one ``vpermps`` per 16 weights, and no table multiply)."""
    tk.lookup_u4(w, tab, data, (r, b * 18 + 2), 16)
    scaled_block_sums(acc, h, d, x, b * 32, w)


@tk.func
def q8_0_block_dot(acc, h, data, r, b, d, x, w):
    """As :func:`q4_0_block_dot` for Q8_0 block ``b`` (its int8 values, exact, by
    ``tk.load_i8``: on the CPU one sign extension to 32 bits and a conversion per 16)."""
    tk.load_i8(w, data, (r, b * 34 + 2), 32)
    scaled_block_sums(acc, h, d, x, b * 32, w)


@tk.func
def block_dot(acc, h, data, r, b, d, x, tab, w, q8):
    """:func:`q8_0_block_dot` (``q8``) or :func:`q4_0_block_dot` into ``acc[h ..]``."""
    if q8:
        q8_0_block_dot(acc, h, data, r, b, d, x, w)
    else:
        q4_0_block_dot(acc, h, data, r, b, d, x, tab, w)


@tk.func
def chunk_dot(acc, acc2, data, r, r2, b0, ds, es, x, tab, w, w2, q8):
    """The ``CHUNK`` blocks of rows ``r`` (into ``acc``, block ``b0 + t`` scaled by ``ds[t]``)
    and ``r2`` (into ``acc2``, scaled by ``es[t]``) from block ``b0``, the two rows' blocks
    interleaved so that each ``x`` piece serves both; in each row the even ``t`` go into lanes
    0-15 and the odd ones into 16-31 (two independent chains of FMAs per row)."""
    for t in range(0, CHUNK, 2):
        block_dot(acc, 0, data, r, b0 + t, ds[t], x, tab, w, q8)
        block_dot(acc2, 0, data, r2, b0 + t, es[t], x, tab, w2, q8)
        block_dot(acc, 16, data, r, b0 + t + 1, ds[t + 1], x, tab, w, q8)
        block_dot(acc2, 16, data, r2, b0 + t + 1, es[t + 1], x, tab, w2, q8)


@tk.func
def gemv_rows(acc, acc2, da, db, ea, eb, data, r, r2, x, tab, w, w2, bb, q8):
    """``acc`` += row ``r``'s blocks and ``acc2`` += row ``r2``'s (``bb`` bytes each; Q8_0 when
    ``q8``, else Q4_0), each block into 16 lanes (:func:`chunk_dot`). Whole chunks of ``CHUNK``
    blocks go in pairs, their float16 scales decoded one chunk ahead (``tk.load_halves``) into
    two arrays per row by turns, ``da``/``ea`` for the even chunks and ``db``/``eb`` for the odd
    ones: a chunk's scale decode is off the path from its bytes to its weights (the C compiler
    overlaps it with the previous chunk's blocks), and no array is overwritten while its
    scales are still to be read, so the C compiler takes each block's scale straight from
    memory as a broadcast operand (a load, not a shuffle). The blocks after the last whole
    chunk decode their own scales (``half_at_host``) and go into lanes 0-15. Each row's sums
    are those of a row alone: the second row only shares the loop (and ``x``'s loads)."""
    nb = data.shape[1] // bb
    full = nb - nb % CHUNK
    pairs = nb - nb % (2 * CHUNK)
    if full > 0:
        tk.load_halves(da, data, (r, 0), CHUNK, bb)
        tk.load_halves(ea, data, (r2, 0), CHUNK, bb)
    for b0 in range(0, pairs, 2 * CHUNK):
        tk.load_halves(db, data, (r, (b0 + CHUNK) * bb), CHUNK, bb)
        tk.load_halves(eb, data, (r2, (b0 + CHUNK) * bb), CHUNK, bb)
        chunk_dot(acc, acc2, data, r, r2, b0, da, ea, x, tab, w, w2, q8)
        if b0 + 2 * CHUNK < full:
            tk.load_halves(da, data, (r, (b0 + 2 * CHUNK) * bb), CHUNK, bb)
            tk.load_halves(ea, data, (r2, (b0 + 2 * CHUNK) * bb), CHUNK, bb)
        chunk_dot(acc, acc2, data, r, r2, b0 + CHUNK, db, eb, x, tab, w, w2, q8)
    if pairs < full:
        chunk_dot(acc, acc2, data, r, r2, pairs, da, ea, x, tab, w, w2, q8)
    for b in range(full, nb):
        block_dot(acc, 0, data, r, b, half_at_host(data, r, b * bb), x, tab, w, q8)
        block_dot(acc2, 0, data, r2, b, half_at_host(data, r2, b * bb), x, tab, w2, q8)


@tk.func
def lane_sum(acc):
    """The 32 lanes of ``acc`` added in order."""
    s = tk.float32(0)
    for j in range(32):
        s += acc[j]
    return s


@tk.func
def gemv_row_pair(out, data, x, bb, q8):
    """Work item ``i``'s rows ``2i`` and ``2i + 1`` (the last row twice when the row count is
    odd: the same sums, stored twice) of the exact host Q4_0/Q8_0 GEMV (:func:`gemv_rows`):
    each core keeps two rows' weight streams in flight, which from DRAM is what pays (the
    shared ``x`` loads do not: docs/llm-quant.md, "Two rows per work item")."""
    r = 2 * tk.index()
    r2 = r + 1 if r + 1 < data.shape[0] else r
    acc = tk.private(tk.float32, (32,))
    acc2 = tk.private(tk.float32, (32,))
    da = tk.private(tk.float32, (CHUNK,))
    db = tk.private(tk.float32, (CHUNK,))
    ea = tk.private(tk.float32, (CHUNK,))
    eb = tk.private(tk.float32, (CHUNK,))
    tab = tk.private(tk.float32, (16,))
    w = tk.private(tk.float32, (32,))
    w2 = tk.private(tk.float32, (32,))
    for j in range(32):
        acc[j] = tk.float32(0)
        acc2[j] = tk.float32(0)
    for v in range(16):
        tab[v] = tk.float32(v - Q4_0_ZERO)
    gemv_rows(acc, acc2, da, db, ea, eb, data, r, r2, x, tab, w, w2, bb, q8)
    out[r] = lane_sum(acc)
    out[r2] = lane_sum(acc2)


@tk.kernel
def _gemv_rows_q4_0(out, data: tk.Const, x: tk.Const):
    """Two rows per work item (:func:`gemv_row_pair`; launch ``host_items`` items), ``LANES``
    partial sums per row (:func:`chunk_dot`), the blocks in chunks of ``CHUNK``
    (:func:`gemv_rows`): the chunk's float16 scales, then its weights, loop nests without
    control flow around the blocks, whose inner loops the C compiler vectorizes."""
    gemv_row_pair(out, data, x, 18, False)


@tk.kernel
def _gemv_rows_q8_0(out, data: tk.Const, x: tk.Const):
    """As :func:`_gemv_rows_q4_0`, for Q8_0 blocks."""
    gemv_row_pair(out, data, x, 34, True)


@tk.kernel
def _gemv_rows_q4_k(out, data: tk.Const, x: tk.Const):
    r = tk.index()
    acc = tk.private(tk.float32, (32,))
    for j in range(32):
        acc[j] = tk.float32(0)
    for b in range(data.shape[1] // 144):
        base = b * 144
        d = half_at_host(data, r, base)
        dmin = half_at_host(data, r, base + 2)
        for g in range(4):
            sc0, m0 = q4k_scale_min(data, r, base, 2 * g)
            sc1, m1 = q4k_scale_min(data, r, base, 2 * g + 1)
            d0 = d * tk.float32(sc0)
            dm0 = dmin * tk.float32(m0)
            d1 = d * tk.float32(sc1)
            dm1 = dmin * tk.float32(m1)
            qb = base + 16 + 32 * g
            o = b * 256 + 64 * g
            for j in range(32):
                q = tk.int32(data[r, qb + j])
                acc[j] += (d0 * tk.float32(q & 15) - dm0) * x[o + j]
                acc[j] += (d1 * tk.float32(q >> 4) - dm1) * x[o + j + 32]
    s = tk.float32(0)
    for j in range(32):
        s += acc[j]
    out[r] = s


@tk.kernel
def _gemv_rows_f32(out, a: tk.Const, x: tk.Const):
    r = tk.index()
    n = a.shape[1]
    acc = tk.private(tk.float32, (32,))
    for j in range(32):
        acc[j] = tk.float32(0)
    full = n - n % 32
    for k0 in range(0, full, 32):
        for j in range(32):
            acc[j] += tk.float32(a[r, k0 + j]) * tk.float32(x[k0 + j])
    for k in range(full, n):
        acc[k - full] += tk.float32(a[r, k]) * tk.float32(x[k])
    s = tk.float32(0)
    for j in range(32):
        s += acc[j]
    out[r] = s


# ----------------------------------------------------------------------------- GPU GEMV (group per row)

@tk.kernel
def _gemv_group_q4_0(out, data: tk.Const, x: tk.Const):
    r = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    nt = tk.groupsize()[0]
    acc = tk.float32(0)
    for b in range(t, data.shape[1] // 18, nt):
        base = b * 18
        d = half_at(data, r, base)
        o = b * 32
        for j in range(16):
            w0, w1 = q4_0_pair(data, r, base, j, d)
            acc += w0 * x[o + j] + w1 * x[o + j + 16]
    s = tk.group_reduce(acc, "add")
    if t == 0:
        out[r] = s


@tk.kernel
def _gemv_group_q8_0(out, data: tk.Const, x: tk.Const):
    r = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    nt = tk.groupsize()[0]
    acc = tk.float32(0)
    for b in range(t, data.shape[1] // 34, nt):
        base = b * 34
        d = half_at(data, r, base)
        o = b * 32
        for j in range(32):
            acc += q8_0_at(data, r, base, j, d) * x[o + j]
    s = tk.group_reduce(acc, "add")
    if t == 0:
        out[r] = s


@tk.kernel
def _gemv_group_q4_k(out, data: tk.Const, x: tk.Const):
    """Work item ``t`` takes the 64-weight quarters ``t, t + nt, ...`` of the row."""
    r = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    nt = tk.groupsize()[0]
    acc = tk.float32(0)
    for u in range(t, data.shape[1] // 144 * 4, nt):
        d0, dm0, d1, dm1, qb, o = q4k_quarter(data, r, u // 4, u % 4)
        for j in range(32):
            q = tk.int32(data[r, qb + j])
            acc += (d0 * tk.float32(q & 15) - dm0) * x[o + j] + (d1 * tk.float32(q >> 4) - dm1) * x[o + j + 32]
    s = tk.group_reduce(acc, "add")
    if t == 0:
        out[r] = s


@tk.kernel
def _gemv_group_f32(out, a: tk.Const, x: tk.Const):
    r = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    nt = tk.groupsize()[0]
    acc = tk.float32(0)
    for k in range(t, a.shape[1], nt):
        acc += tk.float32(a[r, k]) * tk.float32(x[k])
    s = tk.group_reduce(acc, "add")
    if t == 0:
        out[r] = s


# ----------------------------------------------------------------------------- the int8 route (llama.cpp's)

@tk.func
def round_away(v):
    """C's ``roundf(v)`` (ties away from zero) as an int32, exactly: ``a - floor(a)`` is exact."""
    a = abs(v)
    f = math.floor(a)
    q = tk.int32(f) + tk.int32(a - f >= tk.float32(0.5))
    return tk.select(v < 0, -q, q)


@tk.func
def q8_value(v):
    """:func:`round_away` of ``x * (1 / d)``, 0 for a NaN (a NaN or infinite block, whose
    ``1 / d`` is NaN or 0): what gguf's NumPy quantizer stores there, and no float -> int
    conversion of a NaN."""
    return round_away(tk.select(v != v, tk.float32(0), v))


@tk.kernel
def _quantize_x_q8_0(qs, qd, xz, x: tk.Const, fmt: tk.constexpr):
    """Activations ``x`` [K] to Q8_0, block ``b = tk.index()`` (32 values) per work item, as
    ggml's reference quantizer: ``d = max|x| / 127``, ``q = roundf(x / d)`` (by ``1 / d``).
    ``qd[b]``: ``d`` rounded to float16 (the stored scale), as float32. ``qs`` by ``fmt``:
    the values one per element (``X_INT8``: int8 [K], the operand of ``tk.dot_i8`` /
    ``tk.dot_u4i8`` in the host GEMV), or four per word, byte 0 the lowest (``X_PACKED``:
    uint32 [K / 4], the operand of ``tk.dot4_i8``). ``X_INT8_ZERO``: as ``X_INT8``, and
    ``xz`` (int32 [K / 4]) the q4_0 zero point's share of each lane of four,
    ``xz[l] = -8 * (q[4l] + .. + q[4l + 3])``, which every row's blocks share."""
    b = tk.index()
    o = b * 32
    amax = tk.float32(0)
    for j in range(32):
        a = abs(x[o + j])
        amax = tk.select(a > amax or a != a, a, amax)      # a NaN stays, as NumPy's max (gguf)
    d = amax / tk.float32(127)
    inv = tk.select(d == 0, tk.float32(0), tk.float32(1) / d)
    qd[b] = tk.float32(tk.float16(d))
    if fmt == X_PACKED:
        for w in range(8):
            word = tk.uint32(0)
            for t in range(4):
                word |= tk.uint32(q8_value(x[o + 4 * w + t] * inv) & 255) << (8 * t)
            qs[8 * b + w] = word
    else:
        for j in range(32):
            qs[o + j] = tk.int8(q8_value(x[o + j] * inv))
        if fmt == X_INT8_ZERO:
            for w in range(8):
                z = 0
                for t in range(4):
                    z += tk.int32(qs[o + 4 * w + t])
                xz[8 * b + w] = -Q4_0_ZERO * z


@tk.func
def block_acc_i8(acc, data, r, b, xq, xz, ds, t, q8):
    """``acc[l] = fma(float32(lane_l), ds[t], acc[l])`` for the eight exact int32 lanes of block
    ``b`` of row ``r`` times the quantized activations ``xq`` (lane ``l``: the products of
    weights ``4l .. 4l + 3``): ``tk.dot_i8`` (Q8_0); for Q4_0 ``tk.dot_u4i8`` of the unsigned
    nibbles with the lanes starting at the zero point's share ``xz`` of the activations,
    computed once per GEMV (the same int32 lanes as ``zero=8``, without its second
    ``vpdpbusd`` and subtraction per block). The scale is read as ``ds[t]`` from the chunk's
    private array of ``CHUNK`` scales: the C backend permutes it out of that vector."""
    if q8:
        tk.dot_i8(acc, data, (r, b * 34 + 2), xq, b * 32, 32, ds[t])
    else:
        tk.dot_u4i8(acc, data, (r, b * 18 + 2), xq, b * 32, 32, ds[t], start=(xz, 8 * b))


@tk.kernel
def _gemv_rows_i8(out, data: tk.Const, xq: tk.Const, xd: tk.Const, xz: tk.Const, q8: tk.constexpr):
    """One work item per row, two sets of eight float partial sums (even and odd blocks, so
    that two chains of FMAs overlap): per block the language's block byte dot product
    (``tk.dot_i8``/``tk.dot_u4i8``; on the CPU one ``vpdpbusd`` per 32 products, or AVX2
    ``vpmaddubsw``/``vpmaddwd``) gives eight exact int32 lanes (lane ``l``: weights
    ``4l .. 4l + 3``), accumulated as ``acc[l] = fma(float32(lane), d_w * d_x, acc[l])`` (on
    the CPU a vector conversion and FMA, the sums in registers); at the end lane ``l`` of
    the even set plus lane ``l`` of the odd set, added in order of ``l``. ``xq``: the
    activations as int8, ``xz`` Q4_0's zero-point lanes (:func:`_quantize_x_q8_0`). Blocks go
    in chunks of ``CHUNK``: the chunk's scales first (``tk.load_halves``), then its blocks;
    the blocks after the last full chunk go to the even set."""
    r = tk.index()
    bb = 34 if q8 else 18
    acc = tk.private(tk.float32, (8,))
    acc1 = tk.private(tk.float32, (8,))
    ds = tk.private(tk.float32, (CHUNK,))
    for j in range(8):
        acc[j] = tk.float32(0)
        acc1[j] = tk.float32(0)
    nb = data.shape[1] // bb
    full = nb - nb % CHUNK
    for b0 in range(0, full, CHUNK):
        tk.load_halves(ds, data, (r, b0 * bb), CHUNK, 34 if q8 else 18)
        for t in range(CHUNK):
            ds[t] *= xd[b0 + t]
        for t in range(0, CHUNK, 2):
            block_acc_i8(acc, data, r, b0 + t, xq, xz, ds, t, q8)
            block_acc_i8(acc1, data, r, b0 + t + 1, xq, xz, ds, t + 1, q8)
    for b in range(full, nb):
        ds[0] = half_at_host(data, r, b * bb) * xd[b]
        block_acc_i8(acc, data, r, b, xq, xz, ds, 0, q8)
    tot = tk.float32(0)
    for j in range(8):
        tot += acc[j] + acc1[j]
    out[r] = tot


@tk.func
def word_at(data, r, i):
    """The little-endian uint32 at ``data[r, i:i + 4]`` (uint8; any alignment)."""
    return (tk.uint32(data[r, i]) | (tk.uint32(data[r, i + 1]) << 8) | (tk.uint32(data[r, i + 2]) << 16)
            | (tk.uint32(data[r, i + 3]) << 24))


@tk.kernel
def _gemv_group_i8(out, data: tk.Const, xw: tk.Const, xd: tk.Const, q8: tk.constexpr):
    """A workgroup per row, a block per work item and step: ``tk.dot4_i8`` over packed words
    (Q4_0: the unsigned nibbles, then minus 8 times the sum of the activations)."""
    r = tk.index(tk.Group, tk.Linear)
    t = tk.index(tk.Local, tk.Linear)
    nt = tk.groupsize()[0]
    bb = 34 if q8 else 18
    acc = tk.float32(0)
    for b in range(t, data.shape[1] // bb, nt):
        base = b * bb + 2
        s = tk.int32(0)
        if q8:
            for w in range(8):
                s = tk.dot4_i8(word_at(data, r, base + 4 * w), xw[8 * b + w], s)
        else:
            sx = tk.int32(0)
            for w in range(4):
                u = word_at(data, r, base + 4 * w)
                s = tk.dot4_i8(u & 0x0F0F0F0F, xw[8 * b + w], s)
                s = tk.dot4_i8((u >> 4) & 0x0F0F0F0F, xw[8 * b + 4 + w], s)
                sx = tk.dot4_i8(0x01010101, xw[8 * b + w], sx)
                sx = tk.dot4_i8(0x01010101, xw[8 * b + 4 + w], sx)
            s -= 8 * sx
        acc += tk.float32(s) * (half_at(data, r, b * bb) * xd[b])
    tot = tk.group_reduce(acc, "add")
    if t == 0:
        out[r] = tot


def quantize_activations(x, packed: bool = False, stream=None):
    """float32 ``x`` [K] (``K`` a multiple of 32) quantized to Q8_0 on ``x``'s backend, bit
    for bit as ggml's (and ``gguf.quants``') quantizer: returns ``(qs, d)``, ``qs`` the int8
    values [K] (``packed``: uint32 [K / 4], four per word, byte 0 the lowest) and ``d`` the
    float32 values of the blocks' float16 scales [K / 32]."""
    C.require_array(x, "quantize_activations", "x")
    C.require_dtype(x, "quantize_activations", "x", ["float32"])
    s = C.shape_of(x)
    C.require(len(s) == 1 and s[0] % 32 == 0, "quantize_activations", "x",
              f"expected a 1-D array whose length is a multiple of 32, got shape {s}")
    x = C.contiguous_input(x)
    return _quantize_x(x, X_PACKED if packed else X_INT8, stream)[:2]


def _quantize_x(x, fmt: int, stream):
    """:func:`quantize_activations` of a checked ``x``, ``qs`` in ``fmt``: ``X_PACKED``
    (uint32 [K / 4]) or ``X_INT8``/``X_INT8_ZERO`` (int8 [K]); returns ``(qs, d, xz)``, ``xz``
    the zero-point lanes (int32 [K / 4]) with ``X_INT8_ZERO``, else a placeholder."""
    backend = C.backend_of("quantize_activations", stream=stream, x=x)
    k = C.shape_of(x)[0]
    shape, dtype = ((k // 4,), np.uint32) if fmt == X_PACKED else ((k,), np.int8)
    qs = C.new_like(x, shape, dtype, backend)
    d = C.new_like(x, (k // 32,), np.float32, backend)
    xz = C.new_like(x, (k // 4 if fmt == X_INT8_ZERO else 1,), np.int32, backend)
    if k:
        C.launch(_quantize_x_q8_0, backend, (qs, d, xz, x, fmt), k // 32, stream=stream)
    return qs, d, xz


def _gemv_int8(qtype, a, x, out, backend, stream):
    host = _host_backend(backend)
    m = out.shape[0]
    q8 = qtype == "q8_0"
    if host:
        xq, xd, xz = _quantize_x(x, X_INT8 if q8 else X_INT8_ZERO, stream)
        return C.launch(_gemv_rows_i8, backend, (out, a, xq, xd, xz, q8), m, stream=stream)
    xq, xd, _ = _quantize_x(x, X_PACKED, stream)
    return C.launch(_gemv_group_i8, backend, (out, a, xq, xd, q8), m * GROUP, GROUP, stream=stream)


# ----------------------------------------------------------------------------- GEMM

@tk.kernel
def _gemm_q4_0(out, data: tk.Const, bm: tk.Const):
    """One work item per output (row i, column n): small N only (each item decodes row i)."""
    i, n = tk.index(tk.Global, tk.Cartesian)
    acc = tk.float32(0)
    for b in range(data.shape[1] // 18):
        base = b * 18
        d = half_at(data, i, base)
        o = b * 32
        for j in range(16):
            w0, w1 = q4_0_pair(data, i, base, j, d)
            acc += w0 * bm[o + j, n] + w1 * bm[o + j + 16, n]
    out[i, n] = acc


@tk.kernel
def _gemm_q8_0(out, data: tk.Const, bm: tk.Const):
    i, n = tk.index(tk.Global, tk.Cartesian)
    acc = tk.float32(0)
    for b in range(data.shape[1] // 34):
        base = b * 34
        d = half_at(data, i, base)
        o = b * 32
        for j in range(32):
            acc += q8_0_at(data, i, base, j, d) * bm[o + j, n]
    out[i, n] = acc


@tk.kernel
def _gemm_rows_q(out, data: tk.Const, bt: tk.Const, q8: tk.constexpr, N: tk.constexpr):
    """Host shape of the fused quantized GEMM (N <= FUSED_MAX_N): one work item per row of
    ``a``; each block is decoded once (scale, then 32 weights, as the GEMV) and multiplies
    column ``n`` of ``b`` for every ``n``, so the weights are read once for all N columns.
    ``bt``: ``b`` transposed, [N, K] (each column contiguous); ``N`` a compile-time constant.
    ``32 * N`` partial sums, lane ``32 n + j`` adding the terms of column ``n`` with
    ``k % 32 == j`` in increasing ``k`` (one ``tk.fma`` each), combined in order of ``j``:
    per column a 32-trip loop over the block's weights and 32 consecutive values of the
    column, which the C compiler vectorizes with the partial sums in registers (N = 8: 16
    512-bit FMAs per block with their column operand from memory, no data movement). With
    ``b`` [K, N] as given, the weights had to be repeated N times each to line up with a row
    of ``b`` (28 permutes per block at N = 8; 2x slower). One running sum per column, ``n``
    innermost, was a chain of dependent adds per column and a loop of run-time trip count:
    6x slower than that."""
    i = tk.index()
    acc = tk.private(tk.float32, (32 * N,))
    w = tk.private(tk.float32, (32,))
    tab = tk.private(tk.float32, (16,))
    for u in range(32 * N):
        acc[u] = tk.float32(0)
    for v in range(16):
        tab[v] = tk.float32(v - Q4_0_ZERO)
    bb = 34 if q8 else 18
    for b in range(data.shape[1] // bb):
        base = b * bb
        d = half_at_host(data, i, base)
        if q8:      # the weights decoded as the GEMV's blocks (q8_0_block_dot / q4_0_block_dot)
            tk.load_i8(w, data, (i, base + 2), 32, d)
        else:
            tk.lookup_u4(w, tab, data, (i, base + 2), 16, d)
        o = b * 32
        for n in range(N):
            for j in range(32):
                acc[n * 32 + j] = tk.fma(w[j], bt[n, o + j], acc[n * 32 + j])
    for n in range(N):
        s = acc[n * 32]
        for p in range(1, 32):
            s += acc[n * 32 + p]
        out[i, n] = s


@tk.kernel
def _transpose_kn(bt, bm: tk.Const):
    """``bt[n, k] = bm[k, n]`` (the columns of a small [K, N] operand made contiguous)."""
    n, k = tk.index(tk.Global, tk.Cartesian)
    bt[n, k] = bm[k, n]


@tk.kernel
def _gemm_f32(out, a: tk.Const, bm: tk.Const):
    """C = A @ B in TILE x TILE tiles staged through local memory; the ndrange is the output
    shape rounded up to whole tiles, items past the edge load zeros and store nothing."""
    T = tk.groupsize()[0]
    ti, tj = tk.index(tk.Local, tk.Cartesian)
    i, j = tk.index(tk.Global, tk.Cartesian)
    m = a.shape[0]
    kk = a.shape[1]
    n = bm.shape[1]
    As = tk.localmem(tk.float32, (TILE, TILE))
    Bs = tk.localmem(tk.float32, (TILE, TILE))
    acc = tk.float32(0)
    for k0 in range(0, kk, T):
        As[ti, tj] = tk.float32(a[i, k0 + tj]) if i < m and k0 + tj < kk else tk.float32(0)
        Bs[ti, tj] = tk.float32(bm[k0 + ti, j]) if k0 + ti < kk and j < n else tk.float32(0)
        tk.synchronize()
        for p in range(TILE):
            acc += As[ti, p] * Bs[p, tj]
        tk.synchronize()
    if i < m and j < n:
        out[i, j] = acc


# ----------------------------------------------------------------------------- the API

_HOST_GEMV = {"q4_0": _gemv_rows_q4_0, "q8_0": _gemv_rows_q8_0, "q4_k": _gemv_rows_q4_k, None: _gemv_rows_f32}
_ROWS_PER_ITEM = {"q4_0": 2, "q8_0": 2}     # the exact q4_0/q8_0 host GEMVs: gemv_row_pair


def host_items(qtype, m: int) -> int:
    """Work items of ``_HOST_GEMV[qtype]`` for ``m`` rows."""
    n = _ROWS_PER_ITEM.get(qtype, 1)
    return -(-m // n)
_GROUP_GEMV = {"q4_0": _gemv_group_q4_0, "q8_0": _gemv_group_q8_0, "q4_k": _gemv_group_q4_k, None: _gemv_group_f32}
_FUSED_GEMM = {"q4_0": _gemm_q4_0, "q8_0": _gemm_q8_0}


def _host_backend(backend) -> bool:
    return bool(getattr(backend, "is_host", False)) or backend.name == "INTERP"


def _gemv(qtype, a, x, out, backend, stream):
    m = out.shape[0]
    if _host_backend(backend):
        return C.launch(_HOST_GEMV[qtype], backend, (out, a, x), host_items(qtype, m), stream=stream)
    return C.launch(_GROUP_GEMV[qtype], backend, (out, a, x), m * GROUP, GROUP, stream=stream)


def _gemm(a, bm, out, backend, stream):
    m, n = C.shape_of(out)
    nd = (-(-m // TILE) * TILE, -(-n // TILE) * TILE)
    return C.launch(_gemm_f32, backend, (out, a, bm), nd, (TILE, TILE), stream=stream)


_F32 = np.dtype(np.float32)


def _gemv_fast(a, b, out, exact: bool):
    """The host fast path of the GEMV (as ``_common.host_same``): ``out`` [M] and ``b`` [K]
    host float32 arrays and ``a`` a ``QTensor`` with host data or a float32 [M, K] host
    array, all C-contiguous on one CPU backend (``_common.host_args``), ``out`` sharing no
    memory with ``a`` or ``b``, M and K not 0: the general path's launches, ``_HOST_GEMV``'s
    (``exact``) or for ``exact=False`` and a q4_0/q8_0 ``a`` the int8 route's two
    (:func:`_gemv_int8_host`). The caller passes only calls with the default stream and a
    bool ``exact``; ``out`` None: a new array like ``b`` (``_common.host_new``). The result,
    or None where it does not apply."""
    quant = type(a) is QTensor
    host = C.host_args(out, a.data if quant else a, b)
    if host is None:
        return None
    backend, (ho, ha, hb) = host
    m, k = a.shape if quant else (ha.shape + (0, 0))[:2]
    if hb.shape != (k,) or not m or not k or hb.dtype is not _F32 \
            or not (quant or (ha.ndim == 2 and ha.dtype is _F32)) or not ha.flags.c_contiguous \
            or not hb.flags.c_contiguous:
        return None
    res, ho = (out, ho) if ho is not None else C.host_new(b, (m,), _F32)
    if ho.shape != (m,) or ho.dtype is not _F32 or not ho.flags.c_contiguous \
            or C.may_share_memory(ho, ha) or C.may_share_memory(ho, hb):
        return None
    if not exact and quant and a.qtype in ("q4_0", "q8_0"):
        _gemv_int8_host(a.qtype, ha, hb, ho, backend)
    else:
        qtype = a.qtype if quant else None
        _HOST_GEMV[qtype].instance(backend)(ho, ha, hb, ndrange=host_items(qtype, m))
    return res


def _gemv_int8_host(qtype, ha, hb, ho, backend):
    """:func:`_gemv_int8`'s host launches on checked NumPy arrays (``_gemv_fast``): the
    activations quantized into new NumPy arrays, then the int8 GEMV; no stream, so no event."""
    k, q8 = hb.shape[0], qtype == "q8_0"
    xq, xd = np.empty(k, np.int8), np.empty(k // 32, _F32)
    xz = np.empty(1 if q8 else k // 4, np.int32)
    _quantize_x_q8_0.instance(backend)(xq, xd, xz, hb, X_INT8 if q8 else X_INT8_ZERO, ndrange=k // 32)
    _gemv_rows_i8.instance(backend)(ho, ha, xq, xd, xz, q8, ndrange=ho.shape[0])


def matmul(a, b, out=None, stream=None, exact: bool = True):
    """``a @ b`` for ``a`` a ``QTensor`` or a float array [M, K] and ``b`` a float [K]
    (GEMV, result [M]) or [K, N] (GEMM, result [M, N]); float32 accumulation. A quantized
    ``a`` multiplies by exactly ``dequantize(a)`` and takes a float32 ``b``. A float ``a`` is
    float32, float16 or bfloat16 (GGUF's F16/BF16 weights), ``b`` float32, float16 or
    bfloat16; the result is float32, or float16/bfloat16 when ``a`` and ``b`` are both of
    that dtype (as NumPy and torch), rounded once from the float32 sum.

    ``exact=False`` (a q4_0/q8_0 GEMV): llama.cpp's route instead, faster: ``b`` is quantized
    to Q8_0 (:func:`quantize_activations`) and each block is an exact int8 x int8 dot product
    scaled by the two blocks' scales, so the result differs from the exact route by the
    activations' rounding, as llama.cpp's does. Other shapes and formats ignore it."""
    res = _gemv_fast(a, b, out, exact) if stream is None and (exact is True or exact is False) else None
    if res is not None:
        return res
    quant = isinstance(a, QTensor)
    if quant:
        m, k = a.shape
        amat = a.data
    else:
        C.require_array(a, "matmul", "a", "a QTensor or an array")
        adt = C.require_dtype(a, "matmul", "a", C._float_dtypes(MATMUL_FLOATS))
        s = C.shape_of(a)
        C.require(len(s) == 2, "matmul", "a", f"expected a 2-D [M, K] array, got shape {s}")
        a = C.contiguous_input(a)       # a transposed or sliced a: a contiguous copy
        m, k = s
        amat = a
    C.require_array(b, "matmul", "b")
    if quant:
        bdt = C.require_dtype(b, "matmul", "b", ["float32"])
    else:
        bdt = C.require_dtype(b, "matmul", "b", C._float_dtypes(MATMUL_FLOATS))
    C.require(isinstance(exact, (bool, np.bool_)), "matmul", "exact", f"expected a bool, got {exact!r}")
    bs = C.shape_of(b)
    C.require(len(bs) in (1, 2) and bs[0] == k, "matmul", "b",
              f"expected shape ({k},) or ({k}, N) (a's [M, K] = [{m}, {k}]), got shape {C.shape_str(bs)}")
    b = C.contiguous_input(b)
    backend = C.backend_of("matmul", stream=stream, a=amat, b=b, out=out)
    odt = np.dtype(np.float32)
    if not quant:
        C.require_supported(backend, adt, "matmul", "a")
        C.require_supported(backend, bdt, "matmul", "b")
        if adt == bdt:
            odt = adt
    oshape = (m,) if len(bs) == 1 else (m, bs[1])
    out = C.output(out, "matmul", b, oshape, odt, backend, reads_across={"a": amat, "b": b})
    C.contiguous(out, "matmul", "out")
    if m == 0 or (len(bs) == 2 and bs[1] == 0):
        return out
    if k == 0:
        C.launch(_fill_zero, backend, (out,), (m,) if len(bs) == 1 else (m, bs[1]), stream=stream)
        return out
    qtype = a.qtype if quant else None
    if len(bs) == 1 and not exact and qtype in ("q4_0", "q8_0"):
        _gemv_int8(qtype, amat, b, out, backend, stream)
    elif len(bs) == 1:
        _gemv(qtype, amat, b, out, backend, stream)
    elif quant and qtype in _FUSED_GEMM and bs[1] <= FUSED_MAX_N and _host_backend(backend):
        n = bs[1]
        bt = C.new_like(b, (n, k), np.float32, backend)
        C.launch(_transpose_kn, backend, (bt, b), (n, k), stream=stream)
        C.launch(_gemm_rows_q, backend, (out, amat, bt, qtype == "q8_0", n), m, stream=stream)
    elif quant and qtype in _FUSED_GEMM and bs[1] <= FUSED_MAX_N:
        C.launch(_FUSED_GEMM[qtype], backend, (out, amat, b), oshape, stream=stream)
    else:
        if quant:
            from .quant import dequantize
            w = C.new_like(b, (m, k), np.float32, backend)
            dequantize(a, out=w, stream=stream)
            amat = w
        _gemm(amat, b, out, backend, stream)
    return out


MATMUL_FLOATS = ("float32", "float16", "bfloat16")
"""The dtypes of a float (not quantized) ``a`` and its ``b``."""


@tk.kernel
def _fill_zero(out):
    out[tk.index(tk.Global, tk.Cartesian)] = tk.float32(0)


class _CallableModule(type(sys)):
    """This module is named like its function: ``import tinykernels.llm.matmul`` binds
    ``llm.matmul`` to the module, so calling the module calls the function."""

    def __call__(self, *args, **kwargs):
        return matmul(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
