"""Scaled dot-product attention: :func:`flash_attention` (prefill, a block of queries) and
:func:`flash_decode` (one query per head against a KV cache, grouped-query).

Both never form the score matrix: keys are visited in tiles and an *online softmax* keeps,
per query row, the running maximum ``m``, the running sum ``l`` of ``exp(s - m)`` and the
running output ``acc``; a new tile with maximum ``m'`` rescales both by ``exp(m - m')``.
Scores, sums and the output accumulate in float32 for every input dtype and the output is
rounded once, on store.

Code shapes (chosen per backend, see :func:`_shape`):

* CPU (``_fa_lanes``): one workgroup per block of 64 query rows, the rows as SIMD lanes
  (per-row arrays in local memory, item innermost), keys in tiles of 64: two small matrix
  products per tile with the online softmax between (docs/llm.md "Attention");
* interpreter (``_fa_rows``): one work item per (batch, head, query row) with the loop over
  keys inside, keys in tiles of ``KT`` whose scores live in a private array;
* GPUs (CL, WebGPU, CUDA): one workgroup per tile of ``BQ`` query rows (one row per item);
  the group stages a tile of K and V rows in local memory (float32, at most 16 KiB, the
  WebGPU default) and every item scores its row against it.

:func:`flash_decode` splits each head's keys into chunks (flash-decoding): one work item per
(batch, query head, chunk) leaves a partial (m, l, acc), and a second kernel merges the
chunks. The key count may be a device-resident int32 array read inside the kernels, so the
launches do not depend on it (a captured sequence replays with a new length).
"""
from __future__ import annotations

import math

import numpy as np

import tinykernels as tk

from . import _common as C
from ._math import exp_neg as _exp_neg, exp_neg_f32, use_poly

__all__ = ["flash_attention", "flash_decode"]

KT = 16                 # keys per tile, host shape
LANES = 16              # partial sums of a host q.k dot product (one 64-byte vector)
BQ_MAX = 64             # query rows per workgroup, GPU shape
LANES_BK = 64           # keys per tile, lanes shape (CPU)
LOCAL_BYTES = 16384     # local memory for the K and V tiles (WebGPU's default limit)
MAX_HEAD_DIM = 512
DECODE_CHUNK = 256      # host: fewest keys per flash_decode chunk (chunks only to feed every thread)
DECODE_CHUNK_GPU = 64   # GPUs: keys per chunk (many items: one per query head and chunk)
PARALLEL_ITEMS = 64     # the CPU runs a launch of fewer (long-loop) items on one thread
                        # (codegen/c.py: SERIAL_CUTOFF_LOOPS, docs/cpu.md "Launching")
LOOP_BUDGET = 32768     # WebGPU: loop back edges one work item may run (lavapipe stops at 65535)

# Keys one work item visits per launch: None by backend (bounded on WebGPU only); tests set
# an int to run the chunked flash_attention on any backend.
KEYS_PER_ITEM: int | None = None

# Which code shape flash_attention uses: None by backend; tests set "rows", "tiles" or "lanes".
SHAPE: str | None = None


# ----------------------------------------------------------------------------- device functions

@tk.func
def visible(i, Sq, Sk, causal):
    """How many keys query row ``i`` attends to: all ``Sk``, or with ``causal`` the keys
    ``j <= i + Sk - Sq`` (the queries are the last ``Sq`` positions of the ``Sk`` keys)."""
    n = Sk
    if causal:
        n = min(Sk, max(0, i + 1 + Sk - Sq))
    return n


@tk.func
def dot_heads(qp, K, b, kh, row, lanes, sc, jj, D, G):
    """``sc[g * KT + jj] = sum_d qp[g * D + d] * K[b, kh, row, d]`` for the G query rows of
    ``qp`` (``lanes``: G * LANES floats of scratch), in float32 as LANES (16) interleaved
    partial sums per row (lane u adds the terms d with d % LANES == u, in order, with
    ``tk.fma``; the lanes are then added as a tree: 8 + 8, 4 + 4, 2 + 2, 1 + 1, vector adds
    where a left to right sum is a chain of 15 dependent scalar adds): loops over contiguous
    memory the C compiler vectorizes without reassociating. Each block of the key row is
    loaded once for all G rows, and the G rows' lane vectors are G independent chains."""
    D0 = D - D % LANES
    for g in range(G):
        for u in range(LANES):
            lanes[g * LANES + u] = tk.float32(0)
    for d0 in range(0, D0, LANES):
        for g in range(G):
            for u in range(LANES):
                lanes[g * LANES + u] = tk.fma(qp[g * D + d0 + u], tk.float32(K[b, kh, row, d0 + u]),
                                              lanes[g * LANES + u])
    for d in range(D0, D):
        for g in range(G):
            lanes[g * LANES + d - D0] = tk.fma(qp[g * D + d], tk.float32(K[b, kh, row, d]), lanes[g * LANES + d - D0])
    for g in range(G):
        o = g * LANES
        for u in range(8):
            lanes[o + u] += lanes[o + u + 8]
        for u in range(4):
            lanes[o + u] += lanes[o + u + 4]
        for u in range(2):
            lanes[o + u] += lanes[o + u + 2]
        sc[g * KT + jj] = lanes[o] + lanes[o + 1]


@tk.func
def finish(acc_d, l):
    """One output value: ``acc / l`` (0 for a row that sees no key, whose ``l`` is exactly 0;
    a NaN ``l``, from a NaN or infinite score, gives NaN as the unfused softmax does)."""
    r = tk.float32(0)
    if l != 0:
        r = acc_d / l
    return r


@tk.func
def load_acc(acc, acc_io, r, D):
    """The running output of query row ``r`` left by the previous key chunk."""
    for d in range(D):
        acc[d] = acc_io[r, d]


@tk.func
def store_state(acc, acc_io, ml_io, r, m, l, D):
    """Leaves query row ``r``'s running (m, l, acc) for the next key chunk."""
    for d in range(D):
        acc_io[r, d] = acc[d]
    ml_io[r, 0] = m
    ml_io[r, 1] = l


@tk.kernel
def _fa_rows(out, q: tk.Const, k: tk.Const, v: tk.Const, scale, causal: tk.constexpr, D: tk.constexpr,
             poly: tk.constexpr, acc_io, ml_io, lo, hi, first, last, split: tk.constexpr):
    """Host shape: ndrange (batch * heads, Sq), one query row per item. A tile's scores become
    probabilities in one loop (the exponentials vectorize with ``poly``, see ``_math``)
    before the loop that accumulates ``p * v``. With ``split`` the item visits only the keys
    [lo, hi) (a chunk, see :func:`_key_chunks`), starting from the running state in
    ``acc_io``/``ml_io`` unless ``first`` and leaving it there unless ``last``."""
    bh, i = tk.index(tk.Global, tk.Cartesian)
    H = q.shape[1]
    b = bh // H
    h = bh % H
    kh = h // (H // k.shape[1])
    qp = tk.private(tk.float32, (D,))
    acc = tk.private(tk.float32, (D,))
    sc = tk.private(tk.float32, (KT,))
    lanes = tk.private(tk.float32, (LANES,))
    for d in range(D):
        qp[d] = tk.float32(q[b, h, i, d])
        acc[d] = tk.float32(0)
    n = visible(i, q.shape[2], k.shape[2], causal)
    m = tk.float32(-math.inf)
    l = tk.float32(0)
    j_lo = 0
    r = bh * q.shape[2] + i
    if split:
        j_lo = lo
        n = min(n, hi)
        if not first:
            load_acc(acc, acc_io, r, D)
            m = ml_io[r, 0]
            l = ml_io[r, 1]
    for j0 in range(j_lo, n, KT):
        t = min(KT, n - j0)
        for jj in range(t):
            dot_heads(qp, k, b, kh, j0 + jj, lanes, sc, jj, D, 1)
        mt = m
        for jj in range(t):
            sc[jj] = sc[jj] * scale
            mt = max(mt, sc[jj])
        corr = _exp_neg(m - mt, poly)
        l = l * corr
        for d in range(D):
            acc[d] = acc[d] * corr
        for jj in range(t):
            sc[jj] = _exp_neg(sc[jj] - mt, poly)
        for jj in range(t):
            p = sc[jj]
            l += p
            for d in range(D):
                acc[d] += p * tk.float32(v[b, kh, j0 + jj, d])
        m = mt
    if split and not last:
        store_state(acc, acc_io, ml_io, r, m, l, D)
    else:
        for d in range(D):
            out[b, h, i, d] = out.dtype(finish(acc[d], l))


@tk.kernel
def _fa_tiles(out, q: tk.Const, k: tk.Const, v: tk.Const, scale, causal: tk.constexpr, D: tk.constexpr,
              BK: tk.constexpr, acc_io, ml_io, lo, hi, first, last, split: tk.constexpr):
    """GPU shape: ndrange (batch * heads, Sq rounded up to BQ), workgroup (1, BQ); the group
    loads BK keys and values at a time into local memory. ``split`` etc.: as ``_fa_rows``."""
    bh, qt = tk.index(tk.Group, tk.Cartesian)
    lid = tk.index(tk.Local, tk.Linear)
    BQ = tk.groupsize()[1]
    H = q.shape[1]
    Sq = q.shape[2]
    Sk = k.shape[2]
    b = bh // H
    h = bh % H
    kh = h // (H // k.shape[1])
    i = qt * BQ + lid
    Ks = tk.localmem(tk.float32, (BK, D))
    Vs = tk.localmem(tk.float32, (BK, D))
    qp = tk.private(tk.float32, (D,))
    acc = tk.private(tk.float32, (D,))
    sc = tk.private(tk.float32, (BK,))
    iq = min(i, Sq - 1)
    for d in range(D):
        qp[d] = tk.float32(q[b, h, iq, d])
        acc[d] = tk.float32(0)
    n = 0
    if i < Sq:
        n = visible(i, Sq, Sk, causal)
    n_group = visible(min(qt * BQ + BQ - 1, Sq - 1), Sq, Sk, causal)     # the group's last row
    m = tk.float32(-math.inf)
    l = tk.float32(0)
    j_lo = 0
    r = bh * Sq + i
    if split:
        j_lo = lo
        n_group = min(n_group, hi)
        n = min(n, hi)
        if not first and i < Sq:
            load_acc(acc, acc_io, r, D)
            m = ml_io[r, 0]
            l = ml_io[r, 1]
    for j0 in range(j_lo, n_group, BK):
        for e in range(lid, BK * D, BQ):
            kk = e // D
            dd = e % D
            key = min(j0 + kk, Sk - 1)
            Ks[kk, dd] = tk.float32(k[b, kh, key, dd])
            Vs[kk, dd] = tk.float32(v[b, kh, key, dd])
        tk.synchronize()
        t = min(BK, n - j0)
        if t > 0:
            mt = m
            for jj in range(t):
                s = tk.float32(0)
                for d in range(D):
                    s += qp[d] * Ks[jj, d]
                s = s * scale
                sc[jj] = s
                mt = max(mt, s)
            corr = math.exp(m - mt)
            l = l * corr
            for d in range(D):
                acc[d] = acc[d] * corr
            for jj in range(t):
                p = math.exp(sc[jj] - mt)
                l += p
                for d in range(D):
                    acc[d] += p * Vs[jj, d]
            m = mt
        tk.synchronize()
    if i < Sq:
        if split and not last:
            store_state(acc, acc_io, ml_io, r, m, l, D)
        else:
            for d in range(D):
                out[b, h, i, d] = out.dtype(finish(acc[d], l))


@tk.kernel
def _fa_lanes(out, q: tk.Const, k: tk.Const, v: tk.Const, scale, zero, causal: tk.constexpr, D: tk.constexpr,
              BK: tk.constexpr, poly: tk.constexpr):
    """Host shape: ndrange (batch * heads, Sq rounded up to BQ), workgroup (1, BQ); one query
    row per item. Every per-row array lives in local memory with the item innermost
    (``Qt[d, lid]``, ``P[j, lid]``, ``Acc[d, lid]``), so on the CPU the group's items are the
    SIMD lanes (docs/cpu.md) of each loop: a score tile is ``BK`` keys, 4 at a time, each key
    value broadcast against a vector of query rows; ``P @ V`` runs 4 output columns at a time
    with the accumulators in registers across the keys. Both products are written as
    ``tk.fma`` (one instruction per term on the CPU, and the same bits with any compiler):
    results differ from the other shapes in the last bits, within the float32 accumulation
    error the tests allow. (It was a ``fastmath`` kernel; there, GCC's reassociation turned
    ``s += a * b`` of two unrolled steps into ``s + (fma(a, b, c * d))``: 3 instructions per 2
    terms instead of 2.)

    ``zero`` is always 0.0, subtracted from the query vector (scores) and the probability
    vector (``P @ V``) before their four FMAs: ``x - 0.0`` is ``x`` for every float (-0.0 and
    NaN included), so the results are bit for bit those without it, but GCC cannot fold a
    subtraction of a run-time value, so it keeps the vector in a register for the four FMAs
    instead of folding its 64-byte load into each of them (which made the loops load-bound
    at about 75% of the FMA peak; one subtraction per vector runs on the add pipes)."""
    bh, g = tk.index(tk.Group, tk.Cartesian)
    lid = tk.index(tk.Local, tk.Linear)
    BQ = tk.groupsize()[1]
    # query blocks in the order 0, last, 1, last - 1, ...: a causal block's work grows with
    # its index, and the CPU gives each thread a contiguous range of groups, so neighbouring
    # groups pair a light block with a heavy one
    nqb = tk.ndrange()[1] // BQ
    qt = tk.select(g % 2 == 0, g // 2, nqb - 1 - g // 2)
    H = q.shape[1]
    Sq = q.shape[2]
    Sk = k.shape[2]
    b = bh // H
    h = bh % H
    kh = h // (H // k.shape[1])
    D4 = D - D % 4
    ninf = tk.float32(-math.inf)
    n_group = visible(min(qt * BQ + BQ - 1, Sq - 1), Sq, Sk, causal)     # the group's last row
    Qt = tk.localmem(tk.float32, (D, BQ))
    Acc = tk.localmem(tk.float32, (D, BQ))
    P = tk.localmem(tk.float32, (BK, BQ))
    i = qt * BQ + lid
    iq = min(i, Sq - 1)
    for d in range(D):
        Qt[d, lid] = tk.float32(q[b, h, iq, d])
        Acc[d, lid] = tk.float32(0)
    n = visible(iq, Sq, Sk, causal)
    m = ninf
    l = tk.float32(0)
    for j0 in range(0, n_group, BK):
        t = min(BK, n_group - j0)       # this tile's keys
        for j4 in range(0, t // 4 * 4, 4):
            # the sums start from their first term (0 + x is x): a zero fill of the
            # accumulators becomes memset calls in GCC, which keep them out of registers
            x0 = Qt[0, lid]
            s0 = tk.float32(k[b, kh, j0 + j4, 0]) * x0
            s1 = tk.float32(k[b, kh, j0 + j4 + 1, 0]) * x0
            s2 = tk.float32(k[b, kh, j0 + j4 + 2, 0]) * x0
            s3 = tk.float32(k[b, kh, j0 + j4 + 3, 0]) * x0
            for ds in range(1, D):
                x = Qt[ds, lid] - zero
                s0 = tk.fma(tk.float32(k[b, kh, j0 + j4, ds]), x, s0)
                s1 = tk.fma(tk.float32(k[b, kh, j0 + j4 + 1, ds]), x, s1)
                s2 = tk.fma(tk.float32(k[b, kh, j0 + j4 + 2, ds]), x, s2)
                s3 = tk.fma(tk.float32(k[b, kh, j0 + j4 + 3, ds]), x, s3)
            if causal:      # (all the tile's keys are visible otherwise)
                P[j4, lid] = tk.select(j0 + j4 < n, s0 * scale, ninf)
                P[j4 + 1, lid] = tk.select(j0 + j4 + 1 < n, s1 * scale, ninf)
                P[j4 + 2, lid] = tk.select(j0 + j4 + 2 < n, s2 * scale, ninf)
                P[j4 + 3, lid] = tk.select(j0 + j4 + 3 < n, s3 * scale, ninf)
            else:
                P[j4, lid] = s0 * scale
                P[j4 + 1, lid] = s1 * scale
                P[j4 + 2, lid] = s2 * scale
                P[j4 + 3, lid] = s3 * scale
        for j1 in range(t // 4 * 4, t):
            s = tk.float32(k[b, kh, j0 + j1, 0]) * Qt[0, lid]
            for d1 in range(1, D):
                s = tk.fma(tk.float32(k[b, kh, j0 + j1, d1]), Qt[d1, lid], s)
            P[j1, lid] = tk.select(j0 + j1 < n, s * scale, ninf)
        mt = m
        for jm in range(t):
            mt = max(mt, P[jm, lid])
        ms = tk.select(mt > ninf, mt, tk.float32(0))   # a row that sees no key yet
        # (``if poly`` is decided at compile time: a function taking it would assign it at
        # group level, which splits this piece out of the CPU's lanes shape)
        if poly:
            corr = exp_neg_f32(m - ms)
        else:
            corr = math.exp(m - ms)
        l = l * corr
        for je in range(t):
            p = tk.float32(0)
            if poly:
                p = exp_neg_f32(P[je, lid] - ms)
            else:
                p = math.exp(P[je, lid] - ms)
            P[je, lid] = p
            l += p
        for d0 in range(0, D4, 4):
            a0 = Acc[d0, lid] * corr
            a1 = Acc[d0 + 1, lid] * corr
            a2 = Acc[d0 + 2, lid] * corr
            a3 = Acc[d0 + 3, lid] * corr
            for jv in range(t):
                pv = P[jv, lid] - zero
                a0 = tk.fma(pv, tk.float32(v[b, kh, j0 + jv, d0]), a0)
                a1 = tk.fma(pv, tk.float32(v[b, kh, j0 + jv, d0 + 1]), a1)
                a2 = tk.fma(pv, tk.float32(v[b, kh, j0 + jv, d0 + 2]), a2)
                a3 = tk.fma(pv, tk.float32(v[b, kh, j0 + jv, d0 + 3]), a3)
            Acc[d0, lid] = a0
            Acc[d0 + 1, lid] = a1
            Acc[d0 + 2, lid] = a2
            Acc[d0 + 3, lid] = a3
        for dr in range(D4, D):
            a = Acc[dr, lid] * corr
            for jr in range(t):
                a = tk.fma(P[jr, lid], tk.float32(v[b, kh, j0 + jr, dr]), a)
            Acc[dr, lid] = a
        m = mt
        # (no item reads another's lanes: this barrier only makes j0 and t uniform, one
        # value per group, so the loops above have uniform bounds on the CPU)
        tk.synchronize()
    if i < Sq:
        for do in range(D):
            out[b, h, i, do] = out.dtype(finish(Acc[do, lid], l))


@tk.kernel
def _fd_part(part, ml, out, q: tk.Const, kc: tk.Const, vc: tk.Const, kv_len: tk.Const, n_int, scale, chunk,
             use_arr: tk.constexpr, direct: tk.constexpr, D: tk.constexpr, G: tk.constexpr, poly: tk.constexpr):
    """ndrange (batch * q_heads / G, chunks): item (r, c) serves the G query heads
    ``hg*G .. hg*G + G - 1`` (``r = b * (q_heads / G) + hg``; they share one KV head, whose
    rows are read once for all G) over keys [c*chunk, (c+1)*chunk). ``direct`` (one chunk):
    writes the normalized rows to ``out``; else each head's unnormalized ``acc`` to
    ``part[b*q_heads + h, c, :]`` and its (m, l) to ``ml[..., c, :]``. A key count of 0 gives 0
    (no key, as a row that sees none in flash_attention); one outside 0..max_len NaN. The G heads' scores of a key share its row's loads (``dot_heads``);
    both products are ``tk.fma``, with which GCC keeps the G heads' ``p @ V`` accumulators in
    registers across a tile's keys (docs/llm.md "Attention")."""
    r, c = tk.index(tk.Global, tk.Cartesian)
    H = q.shape[1]
    NG = H // G
    b = r // NG
    h0 = (r % NG) * G
    kh = h0 // (H // kc.shape[1])
    L = kc.shape[2]
    n = n_int
    if use_arr:             # kv_len[b], or kv_len[0] for a [1] array
        n += kv_len[min(b, kv_len.shape[0] - 1)]
    bad = n < 0 or n > L
    lo = c * chunk
    hi = min(lo + chunk, n)
    if bad:
        hi = lo
    qp = tk.private(tk.float32, (G * D,))
    acc = tk.private(tk.float32, (G * D,))
    sc = tk.private(tk.float32, (G * KT,))
    lg = tk.private(tk.float32, (G * LANES,))
    m = tk.private(tk.float32, (G,))
    l = tk.private(tk.float32, (G,))
    for g in range(G):
        m[g] = tk.float32(-math.inf)
        l[g] = tk.float32(0)
        for d in range(D):
            qp[g * D + d] = tk.float32(q[b, h0 + g, d])
            acc[g * D + d] = tk.float32(0)
    for j0 in range(lo, hi, KT):
        t = min(KT, hi - j0)
        for jj in range(t):
            dot_heads(qp, kc, b, kh, j0 + jj, lg, sc, jj, D, G)
        for g in range(G):
            mt = m[g]
            for jj in range(t):
                sc[g * KT + jj] = sc[g * KT + jj] * scale
                mt = max(mt, sc[g * KT + jj])
            corr = _exp_neg(m[g] - mt, poly)
            l[g] = l[g] * corr
            for d in range(D):
                acc[g * D + d] = acc[g * D + d] * corr
            for jj in range(t):
                sc[g * KT + jj] = _exp_neg(sc[g * KT + jj] - mt, poly)
            for jj in range(t):
                l[g] += sc[g * KT + jj]
            m[g] = mt
        for jj in range(t):
            for g in range(G):
                p = sc[g * KT + jj]
                for d in range(D):
                    acc[g * D + d] = tk.fma(p, tk.float32(vc[b, kh, j0 + jj, d]), acc[g * D + d])
    for g in range(G):
        if direct:
            for d in range(D):
                v = finish(acc[g * D + d], l[g])
                if bad:
                    v = tk.float32(math.nan)
                out[b, h0 + g, d] = out.dtype(v)
        else:
            bh = b * H + h0 + g
            for d in range(D):
                part[bh, c, d] = acc[g * D + d]
            ml[bh, c, 0] = m[g]
            ml[bh, c, 1] = l[g]
            if bad:
                ml[bh, c, 1] = tk.float32(math.nan)


@tk.kernel
def _fd_merge(out, part: tk.Const, ml: tk.Const):
    """ndrange (batch * q_heads, head_dim): merges the chunks' partial results of one value."""
    bh, d = tk.index(tk.Global, tk.Cartesian)
    H = out.shape[1]
    nc = part.shape[1]
    m = tk.float32(-math.inf)
    for c in range(nc):
        m = max(m, ml[bh, c, 0])
    l = tk.float32(0)
    a = tk.float32(0)
    for c in range(nc):
        lc = ml[bh, c, 1]
        if lc != 0:             # an empty chunk (m = -inf) adds nothing; NaN propagates
            w = math.exp(ml[bh, c, 0] - m)
            l += lc * w
            a += part[bh, c, d] * w
    out[bh // H, bh % H, d] = out.dtype(finish(a, l) if l == l else tk.float32(math.nan))


# ----------------------------------------------------------------------------- validation

def _check_scale(fn: str, scale, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    C.require(isinstance(scale, (int, float, np.integer, np.floating)) and not isinstance(scale, bool)
              and math.isfinite(float(scale)), fn, "scale", f"expected a finite float, got {scale!r}")
    return float(scale)


def _check_head_dim(fn: str, name: str, d: int) -> None:
    C.require(1 <= d <= MAX_HEAD_DIM, fn, name, f"expected a head_dim of 1 to {MAX_HEAD_DIM}, got head_dim {d}")


def _check_kv(fn: str, kname: str, vname: str, k, v, backend, batch: int, heads: int, head_dim: int, qname="q"):
    """K and V of rank 4 [batch, kv_heads, n, head_dim] matching each other and q."""
    for name, a in ((kname, k), (vname, v)):
        C.require_array(a, fn, name)
        C.require_float(a, fn, name, backend, ("float32", "float16", "bfloat16"))
        C.require_rank(a, fn, name, 4, 4)
    # k against q first, then v against k: with one argument wrong, the error names that one
    # (checked the other way round, a k whose head_dim differs from q's was reported as a v whose
    # shape differs from k's, user22)
    ks = C.shape_of(k)
    C.require(ks[0] == batch, fn, kname, f"expected batch {batch} ({qname}'s), got shape {C.shape_str(ks)}")
    C.require(ks[3] == head_dim, fn, kname, f"expected head_dim {head_dim} ({qname}'s), got shape {C.shape_str(ks)}")
    C.require(ks[1] >= 1 and heads % ks[1] == 0, fn, kname,
              f"expected a number of heads that {qname}'s {heads} heads are a multiple of (grouped-query), "
              f"got shape {C.shape_str(ks)}")
    C.require_shape(v, fn, vname, ks)
    if C.dtype_of(v) != C.dtype_of(k):                  # (the message only on failure: dtype names are slow)
        C.expected(fn, vname, f"dtype {C.dtype_of(k)} ({kname}'s)", f"dtype {C.dtype_of(v)}")
    return ks


TILES_MAX_HEAD_DIM = 256
"""Largest head_dim the workgroup shape takes; larger heads use the row shape (no barriers).
WebGPU on lavapipe returns corrupted rows from the workgroup shape from head_dim ~410 up
(two private rows of head_dim floats per item, live across barriers; the cause inside
naga/llvmpipe is not pinned down: a plain kernel with private arrays that large across
barriers works). 256 keeps a wide margin and covers the usual 64/128/256."""


def _keys_per_item(backend, head_dim: int) -> int | None:
    """Most keys one attention work item may visit in one launch: ``KEYS_PER_ITEM`` when set;
    no bound except on WebGPU, where lavapipe silently stops every loop of a work item after
    65535 back edges in total (docs/webgpu.md). A key costs an item about ``2 * head_dim``
    back edges (the q.k dot product and the ``p * v`` update, one per element, plus the tile
    bookkeeping); half the limit leaves room for the rest of the kernel."""
    if KEYS_PER_ITEM is not None:
        return KEYS_PER_ITEM
    if backend.name != "WEBGPU":
        return None
    return max(1, LOOP_BUDGET // (2 * head_dim + 40))


def _key_chunks(backend, head_dim: int, n_keys: int, tile: int) -> int:
    """Keys per flash_attention launch (a multiple of ``tile``, so the chunks' tiles are the
    unsplit kernel's and the result is bit for bit the same), or ``n_keys`` for one launch."""
    most = _keys_per_item(backend, head_dim)
    if most is None or most >= n_keys:
        return n_keys
    return max(tile, most // tile * tile)


def _shape(backend, head_dim: int) -> str:
    """The code shape flash_attention uses: ``SHAPE`` when set; else "lanes" on the CPU, "rows"
    on the interpreter and for heads past ``TILES_MAX_HEAD_DIM``, "tiles" on GPUs."""
    if SHAPE is not None:
        return SHAPE
    if backend.name == "CPU":
        return "lanes"
    return "rows" if C.row_group(backend) == 1 or head_dim > TILES_MAX_HEAD_DIM else "tiles"


def _lanes_blocks(backend, head_dim: int) -> tuple[int, int]:
    """(query rows per group, keys per tile) of the lanes shape: 64 x 64 on the CPU (a row of
    64 float32 lanes is 4 AVX-512 vectors), fewer rows for large heads (the group's Qt and Acc
    are 2 * head_dim * rows floats of local memory, on the stack); on GPU backends (tests) as
    many rows as fit ``LOCAL_BYTES`` with 16-key tiles."""
    if backend.name == "CPU":
        bq = 64 if head_dim <= 128 else 32 if head_dim <= 256 else 16
        return bq, LANES_BK
    bk = 16
    bq = 64
    while bq > 1 and (2 * head_dim + bk) * bq * 4 > LOCAL_BYTES:
        bq //= 2
    return bq, bk


# ----------------------------------------------------------------------------- the API

def flash_attention(q, k, v, causal: bool = False, scale: float | None = None, out=None, stream=None):
    """``softmax(q @ k^T * scale) @ v`` per (batch, head), never forming the score matrix.

    ``q`` [batch, heads, Sq, head_dim]; ``k``, ``v`` [batch, kv_heads, Sk, head_dim] with
    ``heads`` a multiple of ``kv_heads`` (grouped-query: query head ``h`` reads KV head
    ``h // (heads // kv_heads)``); float32, float16 or bfloat16 (K and V alike), head_dim 1
    to 512. ``scale`` defaults to ``1 / sqrt(head_dim)``. ``causal``: query ``i`` sees the
    keys ``j <= i + Sk - Sq`` (the queries are the last ``Sq`` positions; for ``Sq == Sk``
    this is ``j <= i``, torch's ``is_causal``); a row that sees no key is 0. Float32
    accumulation; the result has q's dtype."""
    fn = "flash_attention"
    C.require_array(q, fn, "q")
    backend = C.backend_of(fn, stream=stream, q=q, k=k, v=v, out=out)
    qs = C.require_rank(q, fn, "q", 4, 4)
    dt = C.require_float(q, fn, "q", backend, ("float32", "float16", "bfloat16"))
    B, H, Sq, D = qs
    _check_head_dim(fn, "q", D)
    ks = _check_kv(fn, "k", "v", k, v, backend, B, H, D)
    C.require(isinstance(causal, (bool, np.bool_)), fn, "causal", f"expected a bool, got {causal!r}")
    sc = _check_scale(fn, scale, D)
    out = C.output(out, fn, q, qs, dt, backend, reads={"q": q}, reads_across={"k": k, "v": v})
    if B * H * Sq == 0:
        return out
    if ks[2] == 0:
        from .elementwise import fill
        return fill(out, 0.0, stream=stream)
    if C.shares_memory(out, q):      # in place (out=q): the kernels take q as tk.Const
        q = _read_copy(q, backend, stream)
    shape = _shape(backend, D)
    if shape == "lanes":
        bq, bk = _lanes_blocks(backend, D)
        C.launch(_fa_lanes, backend, (out, q, k, v, sc, 0.0, bool(causal), D, bk, use_poly(backend, np.float32)),
                 (B * H, -(-Sq // bq) * bq), (1, bq), stream=stream)
    elif shape == "rows":
        _launch_chunks(_fa_rows, backend, (out, q, k, v, sc, bool(causal), D, use_poly(backend, np.float32)),
                       (B * H, Sq), None, _key_chunks(backend, D, ks[2], KT), ks[2], stream)
    else:
        bq = min(C.row_group(backend, Sq), BQ_MAX) if SHAPE is None else BQ_MAX
        bk = max(1, min(32, LOCAL_BYTES // (8 * D)))
        _launch_chunks(_fa_tiles, backend, (out, q, k, v, sc, bool(causal), D, bk),
                       (B * H, -(-Sq // bq) * bq), (1, bq), _key_chunks(backend, D, ks[2], bk), ks[2], stream)
    return out


def _launch_chunks(kernel, backend, args: tuple, ndrange, wgs, chunk: int, n_keys: int, stream) -> None:
    """Launches ``kernel`` (``_fa_rows`` or ``_fa_tiles``) once over all ``n_keys`` keys, or,
    when ``chunk < n_keys``, once per chunk of ``chunk`` keys in order: each launch continues
    every query row's online softmax from the running (m, l, acc) the previous one left in a
    float32 scratch of [rows, head_dim + 2] and the last one writes ``out``. The chunks'
    tiles are those of one launch, so the result is bit for bit the same; what changes is
    that no work item loops over more than ``chunk`` keys (lavapipe's loop limit)."""
    out, q = args[0], args[1]
    if chunk >= n_keys:
        C.launch(kernel, backend, args + (out, out, 0, n_keys, 1, 1, False), ndrange, wgs, stream)
        return
    B, H, Sq, D = C.shape_of(q)
    acc = C.new_like(None, (B * H * Sq, D), np.float32, backend)
    ml = C.new_like(None, (B * H * Sq, 2), np.float32, backend)
    for lo in range(0, n_keys, chunk):
        hi = min(lo + chunk, n_keys)
        C.launch(kernel, backend, args + (acc, ml, lo, hi, int(lo == 0), int(hi == n_keys), True), ndrange, wgs,
                 stream)


def _heads_per_item(backend, group: int, D: int) -> int:
    """Query heads one flash_decode item serves: on the host backends the whole group of a KV
    head (its cache rows are read once), capped so the item's private arrays stay <= 4096
    floats; one head per item on GPUs (more items)."""
    if C.row_group(backend) != 1:
        return 1
    g = group
    while g > 1 and (group % g or g * D > 4096):
        g -= 1
    return g


def _decode_chunks(backend, rows: int, max_len: int, splits, head_dim: int) -> int:
    """How many chunks each head's keys are split into. On GPUs chunks of 64 keys; on WebGPU
    also at most ``LOOP_BUDGET // (2 * head_dim + 40)`` keys (as flash_attention's launches),
    which keeps a work item below lavapipe's loop limit whatever the driver unrolls: 30 keys
    at head_dim 512. (64 keys at 512 were about 64 x (512 + 512 + 32) back edges with the dot
    product's 16 lanes unrolled, within the limit only so; when tk.fma became a function too
    large for NIR to unroll those lanes, every item passed the limit and left its output
    unwritten: 1e35 and NaN in tests/test_llm_attention.py.)"""
    if splits is not None:
        return splits
    if C.row_group(backend) == 1:       # host: enough items for every thread
        return _host_decode_chunks(int(getattr(backend, "threads", 1) or 1), rows, max_len)
    per = DECODE_CHUNK_GPU
    if backend.name == "WEBGPU":
        per = min(per, max(1, LOOP_BUDGET // (2 * head_dim + 40)))
    return max(1, -(-max_len // per))


def _host_decode_chunks(threads: int, rows: int, max_len: int) -> int:
    """Chunks per head on the host (``rows`` items per chunk): about 4 items per thread, and
    at least ``PARALLEL_ITEMS`` items in all, below which the CPU runs the launch on the
    calling thread (a batch-1 step of 8 KV heads was 8 items: one thread did all the work,
    the other idled); no chunk of fewer than ``DECODE_CHUNK`` keys. Where that still leaves
    fewer than ``PARALLEL_ITEMS`` items (a short cache, one thread) the launch runs on one
    thread anyway, and chunks would only add the merge: one pass."""
    rows = max(rows, 1)
    want = max(-(-4 * threads // rows), -(-PARALLEL_ITEMS // rows)) if threads > 1 else 1
    nc = max(1, min(want, -(-max_len // DECODE_CHUNK)))
    return nc if rows * nc >= PARALLEL_ITEMS else 1


def _kv_len_arg(kv_len):
    """``kv_len`` as flash_decode reads it: a 0-d host array (``np.array(7)``, a 0-d CPU torch
    tensor) is its int, as a 0-d host array is a scalar in a launch; a 0-d device array is its
    one-element [1] view (read in the kernels, like a [1] counter)."""
    if not C.is_array(kv_len) or len(C.shape_of(kv_len)) != 0:
        return kv_len
    host = C._arr.as_host_ndarray(kv_len)
    if host is not None:
        C.require(host.dtype.kind in "iu", "flash_decode", "kv_len",
                  f"expected an int or an int32 array, got a 0-d {host.dtype} array")
        return int(host[()])
    return C.view(kv_len, (1,))


def _read_copy(x, backend, stream):
    """A copy of ``x`` (ordered on ``stream``) for a kernel that reads it as ``tk.Const``
    while writing ``out``, which is ``x`` itself (in-place use)."""
    c = C.new_like(x, C.shape_of(x), C.dtype_of(x), backend)
    tk.copyto(c, x, stream=stream)
    return c


def flash_decode(q, k_cache, v_cache, kv_len, scale: float | None = None, out=None, stream=None, *,
                 offset: int = 0, splits: int | None = None):
    """One decode step of attention: ``q`` [batch, q_heads, head_dim] against the first
    ``n`` rows of ``k_cache``/``v_cache`` [batch, kv_heads, max_len, head_dim] (``q_heads`` a
    multiple of ``kv_heads``: grouped-query; the caches may be float32/float16/bfloat16 and
    of another dtype than q). The result has q's shape and dtype.

    ``kv_len``: the key count, a Python int (0..max_len), or a device-resident int32 array
    of shape [1] or [batch] (e.g. the counter of :func:`tinykernels.llm.new_counter`) read
    inside the kernels, so the launches do not depend on its value; ``n = kv_len[b] +
    offset``. No key (``n == 0``) gives 0, as torch's SDPA over an empty key set and
    :func:`flash_attention` with no visible key; a device count outside 0..max_len makes that
    row NaN. ``splits``: how many
    chunks the keys are split into (default by backend and cache length); ``splits=1``
    allocates no scratch memory."""
    res = _decode_fast(q, k_cache, v_cache, kv_len, scale, out, offset, splits) if stream is None else None
    if res is not None:
        return res
    fn = "flash_decode"
    C.require_array(q, fn, "q")
    kv_len = _kv_len_arg(kv_len)
    arr_len = C.is_array(kv_len)
    backend = C.backend_of(fn, stream=stream, q=q, k_cache=k_cache, v_cache=v_cache, kv_len=kv_len if arr_len else None,
                           out=out)
    qs = C.require_rank(q, fn, "q", 3, 3)
    dt = C.require_float(q, fn, "q", backend, ("float32", "float16", "bfloat16"))
    B, H, D = qs
    _check_head_dim(fn, "q", D)
    ks = _check_kv(fn, "k_cache", "v_cache", k_cache, v_cache, backend, B, H, D)
    L = ks[2]
    C.require(isinstance(offset, (int, np.integer)) and not isinstance(offset, bool), fn, "offset",
              f"expected an int, got {offset!r}")
    if arr_len:
        C.require_dtype(kv_len, fn, "kv_len", ("int32",))
        C.require(len(C.shape_of(kv_len)) == 1 and C.shape_of(kv_len)[0] in (1, B), fn, "kv_len",
                  f"expected shape (1,) or (batch,) = ({B},), got shape {C.shape_str(C.shape_of(kv_len))}")
        n_int = int(offset)
    else:
        C.require(isinstance(kv_len, (int, np.integer)) and not isinstance(kv_len, bool), fn, "kv_len",
                  f"expected an int or an int32 array, got {type(kv_len).__name__}")
        n_int = int(kv_len) + int(offset)
        C.require(0 <= n_int <= L, fn, "kv_len", f"expected 0 to {L} keys (the caches' length), got {n_int}")
    C.require(splits is None or (isinstance(splits, (int, np.integer)) and not isinstance(splits, bool)
                                 and splits >= 1), fn, "splits", f"expected an int >= 1, got {splits!r}")
    sc = _check_scale(fn, scale, D)
    out = C.output(out, fn, q, qs, dt, backend, reads={"q": q},
                   reads_across={"k_cache": k_cache, "v_cache": v_cache})
    if B * H == 0:
        return out
    if C.shares_memory(out, q):      # in place (out=q): the kernels take q as tk.Const
        q = _read_copy(q, backend, stream)
    _decode_launch(backend, out, q, k_cache, v_cache, kv_len if arr_len else None, n_int, sc, ks, splits, stream)
    return out


def _decode_launch(backend, out, q, k_cache, v_cache, lens, n_int: int, sc: float, ks: tuple, splits, stream):
    """flash_decode's launches for checked arguments (``out`` sharing no memory with the
    inputs; ``lens`` the device count or None, ``ks`` the caches' shape): one ``_fd_part``
    per group of heads, or chunks of keys into float32 scratch then ``_fd_merge``."""
    B, H, D = C.shape_of(q)
    L, arr_len = ks[2], lens is not None
    G = _heads_per_item(backend, H // ks[1], D)
    nc = _decode_chunks(backend, B * H // G, L, splits, D)
    chunk = -(-L // nc)
    lens = lens if arr_len else q
    fd = C.contracted(_fd_part, backend)       # (WebGPU: the builtin fma; docs/llm.md)
    if nc == 1:
        C.launch(fd, backend, (out, out, out, q, k_cache, v_cache, lens, n_int, sc, chunk, arr_len, True, D, G,
                               use_poly(backend, np.float32)),
                 (B * H // G, 1), stream=stream)
        return
    part = C.new_like(None, (B * H, nc, D), np.float32, backend)
    ml = C.new_like(None, (B * H, nc, 2), np.float32, backend)
    C.launch(fd, backend, (part, ml, out, q, k_cache, v_cache, lens, n_int, sc, chunk, arr_len, False, D, G,
                           use_poly(backend, np.float32)),
             (B * H // G, nc), stream=stream)
    C.launch(_fd_merge, backend, (out, part, ml), (B * H, D), stream=stream)


_DECODE_FLOATS = (np.dtype(np.float32), np.dtype(np.float16))
_I32 = np.dtype(np.int32)


def _decode_fast(q, k_cache, v_cache, kv_len, scale, out, offset, splits):
    """The host fast path of :func:`flash_decode` (as ``_common.host_same``): host ``q`` [B,
    H, D] and caches [B, KVH, L, D] (float32/float16, H a multiple of KVH, 1 <= D <=
    MAX_HEAD_DIM), a Python int ``kv_len`` (0 <= kv_len + offset <= L) or an int32 [1] or [B]
    counter, ``out`` of q's shape and dtype sharing no memory with the inputs (or not given:
    a new one like ``q``), int ``offset`` and ``splits``, a float or default ``scale``: the
    general path's launches (:func:`_decode_launch`). The result, or None where it does not
    apply."""
    if type(offset) is not int or not (splits is None or type(splits) is int and splits >= 1) \
            or not (scale is None or type(scale) is float and math.isfinite(scale)):
        return None
    arr_len = type(kv_len) is not int
    host = C.host_args(out, q, k_cache, v_cache, kv_len) if arr_len else C.host_args(out, q, k_cache, v_cache)
    if host is None:
        return None
    backend, (ho, hq, hk, hv, *hl) = host
    if hq.ndim != 3 or hk.ndim != 4 or hq.dtype not in _DECODE_FLOATS or hk.dtype not in _DECODE_FLOATS:
        return None
    (B, H, D), ks = hq.shape, hk.shape
    if hv.shape != ks or hv.dtype is not hk.dtype or ks[0] != B or ks[3] != D or not 1 <= D <= MAX_HEAD_DIM \
            or not B * H or ks[1] < 1 or H % ks[1]:
        return None
    if arr_len and (hl[0].dtype != _I32 or hl[0].ndim != 1 or hl[0].shape[0] not in (1, B)):
        return None
    n_int = offset if arr_len else kv_len + offset
    if not arr_len and not 0 <= n_int <= ks[2]:
        return None
    res, ho = (out, ho) if ho is not None else C.host_new(q, hq.shape, hq.dtype)
    if ho.shape != hq.shape or ho.dtype is not hq.dtype or C.may_share_memory(ho, hq) \
            or C.may_share_memory(ho, hk) or C.may_share_memory(ho, hv):
        return None
    sc = 1.0 / math.sqrt(D) if scale is None else scale
    _decode_launch(backend, ho, hq, hk, hv, hl[0] if arr_len else None, n_int, sc, ks, splits, None)
    return res
