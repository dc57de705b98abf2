#!/usr/bin/env python3
"""tinykernels.llm benchmark: every llm kernel family at >= 64 MiB of traffic, beside
PyTorch (CPU) and NumPy, as a fraction of a measured memcpy; quantized GEMV in weight bytes;
flash attention against torch's scaled_dot_product_attention.

    PYTHONPATH=src python3 benchmarks/bench_llm.py                  # 64 and 256 MiB, CPU backend
    PYTHONPATH=src python3 benchmarks/bench_llm.py --quick          # smoke test (4 MiB)
    PYTHONPATH=src python3 benchmarks/bench_llm.py --backend CL     # tinykernels on OpenCL

Every tinykernels result is checked against NumPy once before it is timed; a wrong result
(or a tinykernels error) exits 1. See README.md, section "LLM kernels".
"""
from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import tinykernels as tk
except ImportError:          # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk
from tinykernels import llm  # noqa: E402

from bench_cpu import BUSY_LIMIT, ForeignLoad, Timer, cpu_model, foreign_load_note  # noqa: E402

MiB = 1 << 20
GB = 1e9


def _torch():
    try:
        import torch
        return torch
    except Exception:
        return None


class ParallelCopy:
    """``np.copyto(dst, src)`` split into one contiguous slice per thread (NumPy releases the
    GIL for the copy), the memcpy the kernels are measured against."""

    def __init__(self, nbytes: int, threads: int):
        n = max(1, nbytes // 4)
        self.src = np.random.default_rng(0).random(n, dtype=np.float32)
        self.dst = np.empty_like(self.src)
        cut = np.linspace(0, n, threads + 1).astype(np.int64)
        self.parts = [(self.dst[a:b], self.src[a:b]) for a, b in zip(cut[:-1], cut[1:])]
        self.pool = concurrent.futures.ThreadPoolExecutor(threads) if threads > 1 else None

    def __call__(self):
        if self.pool is None:
            np.copyto(self.dst, self.src)
        else:
            list(self.pool.map(lambda p: np.copyto(*p), self.parts))


# ---------------------------------------------------------------------------------------------
# the cases: name, bytes that must move, tinykernels / numpy / torch callables, check
# ---------------------------------------------------------------------------------------------

class Case:
    def __init__(self, name, desc, traffic, tk_run, tk_result, want, rtol, np_run=None, torch_run=None,
                 flops=None):
        self.name, self.desc, self.traffic = name, desc, traffic
        self.tk_run, self.tk_result, self.want, self.rtol = tk_run, tk_result, want, rtol
        self.np_run, self.torch_run, self.flops = np_run, torch_run, flops


def make_cases(mb: float, be, torch, rng):
    """The memory-bound llm kernels at ``mb`` MiB of traffic each."""
    nb = int(mb * MiB)
    dev = (lambda a: a) if be.name == "CPU" else (lambda a: tk.asarray(a, backend=be))

    def host(a):
        return a if isinstance(a, np.ndarray) else a.numpy()

    def sync():
        if be.name != "CPU":
            tk.synchronize(be)

    def tk_call(f):
        def run():
            f()
            sync()
        return run

    T = (lambda a: torch.from_numpy(a)) if torch is not None else None
    cases = []
    D = 4096

    # elementwise: add (3 arrays), exp (2), swiglu (3), cast f32 -> f16 (4 + 2 bytes per element)
    n = nb // 12 // D * D
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    da, db, do = dev(a), dev(b), dev(np.empty(n, np.float32))
    o = np.empty(n, np.float32)
    cases.append(Case("add", f"n={n}", 12 * n, tk_call(lambda: llm.add(da, db, out=do)), lambda: host(do),
                      a + b, 0, lambda: np.add(a, b, out=o),
                      T and (lambda: torch.add(T(a), T(b), out=T(o)))))
    sw = (a.astype(np.float64) / (1 + np.exp(-a.astype(np.float64))) * b).astype(np.float32)
    cases.append(Case("swiglu", f"n={n}", 12 * n, tk_call(lambda: llm.swiglu(da, db, out=do)), lambda: host(do),
                      sw, 1e-5, lambda: np.multiply(a / (1 + np.exp(-a)), b, out=o),
                      T and (lambda: torch.mul(torch.nn.functional.silu(T(a)), T(b), out=T(o)))))
    n2 = nb // 8 // D * D
    a2 = a[:n2].copy() if n2 <= n else rng.standard_normal(n2).astype(np.float32)
    da2, do2, o2 = dev(a2), dev(np.empty(n2, np.float32)), np.empty(n2, np.float32)
    cases.append(Case("exp", f"n={n2}", 8 * n2, tk_call(lambda: llm.exp(da2, out=do2)), lambda: host(do2),
                      np.exp(a2), 1e-6, lambda: np.exp(a2, out=o2), T and (lambda: torch.exp(T(a2), out=T(o2)))))
    n3 = nb // 6 // D * D
    a3 = rng.standard_normal(n3).astype(np.float32)
    da3, do3, o3 = dev(a3), dev(np.empty(n3, np.float16)), np.empty(n3, np.float16)
    cases.append(Case("cast f32->f16", f"n={n3}", 6 * n3, tk_call(lambda: llm.cast(da3, np.float16, out=do3)),
                      lambda: host(do3), a3.astype(np.float16), 0, lambda: np.copyto(o3, a3, casting="unsafe"),
                      T and (lambda: T(o3).copy_(T(a3)))))

    # row-wise: rms_norm, softmax, sum over rows of D
    R = max(1, nb // 8 // D)
    x = rng.standard_normal((R, D)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    dx, dw, dy = dev(x), dev(w), dev(np.empty((R, D), np.float32))
    y = np.empty((R, D), np.float32)
    x64 = x.astype(np.float64)
    rn = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w

    def np_rms():
        np.multiply(x, (1 / np.sqrt(np.mean(np.square(x), -1, keepdims=True) + 1e-6)), out=y)
        np.multiply(y, w, out=y)
    cases.append(Case("rms_norm", f"{R}x{D}", 8 * R * D, tk_call(lambda: llm.rms_norm(dx, dw, out=dy)),
                      lambda: host(dy), rn, 1e-5, np_rms,
                      T and (lambda: torch.nn.functional.rms_norm(T(x), (D,), T(w), 1e-6))))
    sm = np.exp(x64 - x64.max(-1, keepdims=True))
    sm /= sm.sum(-1, keepdims=True)

    def np_softmax():
        np.subtract(x, x.max(-1, keepdims=True), out=y)
        np.exp(y, out=y)
        np.divide(y, y.sum(-1, keepdims=True), out=y)
    cases.append(Case("softmax", f"{R}x{D}", 8 * R * D, tk_call(lambda: llm.softmax(dx, out=dy)),
                      lambda: host(dy), sm, 1e-5, np_softmax, T and (lambda: torch.softmax(T(x), -1))))
    Rs = max(1, nb // 4 // D)
    xs = rng.standard_normal((Rs, D)).astype(np.float32)
    dxs, dss, ss = dev(xs), dev(np.empty(Rs, np.float32)), np.empty(Rs, np.float32)
    cases.append(Case("sum(axis=-1)", f"{Rs}x{D}", 4 * Rs * D, tk_call(lambda: llm.sum(dxs, -1, out=dss)),
                      lambda: host(dss), xs.astype(np.float64).sum(-1), 1e-4, lambda: np.sum(xs, -1, out=ss),
                      T and (lambda: torch.sum(T(xs), -1, out=T(ss)))))

    # rms_norm with the fused residual add (reads x and the residual, writes both outputs)
    xb = rng.standard_normal((R // 2 or 1, D)).astype(np.float32)
    rb = rng.standard_normal(xb.shape).astype(np.float32)
    dxb, drb, dyb, dsb = dev(xb), dev(rb), dev(np.empty_like(xb)), dev(np.empty_like(xb))
    yb, sb = np.empty_like(xb), np.empty_like(xb)
    s64 = xb.astype(np.float64) + rb
    rnr = s64 / np.sqrt((s64 * s64).mean(-1, keepdims=True) + 1e-6) * w

    def np_rms_res():
        np.add(xb, rb, out=sb)
        np.multiply(sb, (1 / np.sqrt(np.mean(np.square(sb), -1, keepdims=True) + 1e-6)), out=yb)
        np.multiply(yb, w, out=yb)
    cases.append(Case("rms_norm+residual", f"{xb.shape[0]}x{D}", 16 * xb.size,
                      tk_call(lambda: llm.rms_norm(dxb, dw, residual=drb, out=dyb, residual_out=dsb)),
                      lambda: host(dyb), rnr, 1e-5, np_rms_res,
                      T and (lambda: torch.nn.functional.rms_norm(torch.add(T(xb), T(rb), out=T(sb)), (D,), T(w),
                                                                  1e-6))))
    # argmax of a long vector; gather of embedding rows; repeat (GQA head expansion)
    na = nb // 4
    xa = rng.standard_normal(na).astype(np.float32)
    dxa, dam = dev(xa), dev(np.zeros((), np.int32))
    cases.append(Case("argmax", f"n={na}", 4 * na, tk_call(lambda: llm.argmax(dxa, out=dam)),
                      lambda: host(dam), np.argmax(xa), 0, lambda: np.argmax(xa), T and (lambda: torch.argmax(T(xa)))))
    V, N = 32000, max(1, nb // 8 // D)
    table = rng.standard_normal((max(V, N), D)).astype(np.float32) if N * D * 4 < 2 * nb else None
    table = table if table is not None else rng.standard_normal((N, D)).astype(np.float32)
    idx = rng.integers(0, table.shape[0], N).astype(np.int32)
    dt_, di, dg, g = dev(table), dev(idx), dev(np.empty((N, D), np.float32)), np.empty((N, D), np.float32)
    cases.append(Case("gather", f"{N} of {table.shape[0]} rows x {D}", 8 * N * D,
                      tk_call(lambda: llm.gather(dt_, di, out=dg)), lambda: host(dg), table[idx], 0,
                      lambda: np.take(table, idx, axis=0, out=g),
                      T and (lambda: torch.index_select(T(table), 0, T(idx), out=T(g)))))
    rep = 4
    xp = rng.standard_normal((max(1, nb // 4 // (rep + 1) // (2 * 128)), 2, 128)).astype(np.float32)
    dxp, dyp, yp = dev(xp), dev(np.empty((xp.shape[0], 2 * rep, 128), np.float32)), \
        np.empty((xp.shape[0], 2 * rep, 128), np.float32)
    cases.append(Case("repeat", f"{xp.shape} x{rep} axis 1", 4 * xp.size * (1 + rep),
                      tk_call(lambda: llm.repeat(dxp, rep, 1, out=dyp)), lambda: host(dyp), np.repeat(xp, rep, 1), 0,
                      lambda: np.copyto(yp, np.repeat(xp, rep, 1)),
                      T and (lambda: torch.repeat_interleave(T(xp), rep, 1))))
    # fp8 e4m3 -> float16 with a scale (1 byte read, 2 written)
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None and be.supports("float8_e4m3fn"):
        n8 = nb // 3
        x8 = rng.standard_normal(n8).astype(ml_dtypes.float8_e4m3fn)
        dx8, dy8, y8 = dev(x8), dev(np.empty(n8, np.float16)), np.empty(n8, np.float16)
        want8 = (x8.astype(np.float32) * np.float32(0.5)).astype(np.float16)

        def np_fp8():
            np.multiply(x8.astype(np.float32), np.float32(0.5), out=y8, casting="unsafe")
        t8 = None
        if T is not None and hasattr(torch, "float8_e4m3fn"):
            t8 = (lambda: torch.mul(T(x8.view(np.uint8)).view(torch.float8_e4m3fn).float(), 0.5).half())
        cases.append(Case("fp8_dequantize", f"n={n8}", 3 * n8, tk_call(lambda: llm.fp8_dequantize(dx8, 0.5, out=dy8)),
                          lambda: host(dy8), want8, 0, np_fp8, t8))

    # rope on [rows, heads, 128]; transpose of a square matrix; kv_append of a batch of rows
    hd = 128
    Rr = max(1, nb // 8 // hd)
    xr = rng.standard_normal((Rr // 8, 8, hd)).astype(np.float32) if Rr >= 8 else \
        rng.standard_normal((1, Rr, hd)).astype(np.float32)
    seq = xr.shape[1]
    ang = np.arange(seq)[:, None] * 10000.0 ** (-np.arange(hd // 2) / (hd // 2))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    x1, x2 = xr[..., :hd // 2].astype(np.float64), xr[..., hd // 2:].astype(np.float64)
    rw = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    dxr, dc, dsn, dyr = dev(xr), dev(cos), dev(sin), dev(np.empty_like(xr))
    yr = np.empty_like(xr)
    h = hd // 2

    def np_rope():
        np.subtract(xr[..., :h] * cos, xr[..., h:] * sin, out=yr[..., :h])
        np.add(xr[..., h:] * cos, xr[..., :h] * sin, out=yr[..., h:])
    cases.append(Case("rope", f"{xr.shape}", 8 * xr.size, tk_call(lambda: llm.rope(dxr, dc, dsn, out=dyr)),
                      lambda: host(dyr), rw, 1e-5, np_rope, None))
    S = int(math.isqrt(nb // 8))
    xt = rng.standard_normal((S, S)).astype(np.float32)
    dxt, dyt, yt = dev(xt), dev(np.empty((S, S), np.float32)), np.empty((S, S), np.float32)
    cases.append(Case("transpose", f"{S}x{S}", 8 * S * S, tk_call(lambda: llm.transpose(dxt, out=dyt)),
                      lambda: host(dyt), xt.T, 0, lambda: np.copyto(yt, xt.T),
                      T and (lambda: T(yt).copy_(T(xt).T))))
    kvh, L = 8, 4096
    nrows = max(1, nb // 8 // (kvh * hd))
    Lc = max(L, nrows)
    cache = np.zeros((kvh, Lc, hd), np.float32)
    rows = rng.standard_normal((kvh, nrows, hd)).astype(np.float32)
    dcache, drows, cnt = dev(cache), dev(rows), llm.new_counter(0, backend=be)
    cases.append(Case("kv_append", f"{nrows} rows x {kvh} heads", 8 * rows.size,
                      tk_call(lambda: llm.kv_append(dcache, drows, cnt)), lambda: host(dcache)[:, :nrows], rows, 0,
                      lambda: np.copyto(cache[:, :nrows], rows), T and (lambda: T(cache)[:, :nrows].copy_(T(rows)))))
    return cases


def make_matmul_cases(mb: float, be, torch, rng):
    """GEMV at ``mb`` MiB of weights: q4_0, q8_0, float32; peers multiply the dequantized
    float32 matrix (torch/NumPy have no q4_0), so they read 4 bytes per weight."""
    cases = []
    dev = (lambda a: a) if be.name == "CPU" else (lambda a: tk.asarray(a, backend=be))
    host = (lambda a: a) if be.name == "CPU" else (lambda a: a.numpy())
    sync = (lambda: None) if be.name == "CPU" else (lambda: tk.synchronize(be))
    T = (lambda a: torch.from_numpy(a)) if torch is not None else None
    K = 4096
    for qt, bpw in (("q4_0", 18 / 32), ("q8_0", 34 / 32), ("float32", 4)):
        M = max(1, int(mb * MiB / (K * bpw)))
        w = rng.standard_normal((M, K)).astype(np.float32)
        a = llm.quantize(w, qt) if qt != "float32" else w
        wf = llm.dequantize(a) if qt != "float32" else w
        x = rng.standard_normal(K).astype(np.float32)
        want = wf.astype(np.float64) @ x
        da = llm.QTensor(a.qtype, a.shape, dev(a.data)) if qt != "float32" else dev(w)
        dx, dy, y = dev(x), dev(np.empty(M, np.float32)), np.empty(M, np.float32)

        def run(da=da, dx=dx, dy=dy):
            llm.matmul(da, dx, out=dy)
            sync()
        wbytes = a.nbytes if qt != "float32" else w.nbytes
        cases.append(Case(f"gemv {qt}", f"{M}x{K}", wbytes, run, (lambda dy=dy: host(dy)), want, 1e-4,
                          (lambda wf=wf, x=x, y=y: np.matmul(wf, x, out=y)),
                          T and (lambda wf=wf, x=x, y=y: torch.mv(T(wf), T(x), out=T(y)))))
        if qt != "float32":      # llama.cpp's route: Q8_0 activations, int8 x int8 block products
            def run8(da=da, dx=dx, dy=dy):
                llm.matmul(da, dx, out=dy, exact=False)
                sync()
            # the activations' rounding (8 bits per block) is the route's error: 2e-2 of the largest
            cases.append(Case(f"gemv {qt} int8", f"{M}x{K}", wbytes, run8, (lambda dy=dy: host(dy)), want, 2e-2,
                              (lambda wf=wf, x=x, y=y: np.matmul(wf, x, out=y)),
                              T and (lambda wf=wf, x=x, y=y: torch.mv(T(wf), T(x), out=T(y)))))
    # fused q4_0 GEMM with 8 columns (a small decode batch): the weights are read once
    M = max(1, int(mb * MiB / (K * 18 / 32)))
    qa = llm.quantize(rng.standard_normal((M, K)).astype(np.float32), "q4_0")
    xb = rng.standard_normal((K, 8)).astype(np.float32)
    wf = llm.dequantize(qa)
    dqa, dxb, dyb, yb = llm.QTensor("q4_0", qa.shape, dev(qa.data)), dev(xb), dev(np.empty((M, 8), np.float32)), \
        np.empty((M, 8), np.float32)
    cases.append(Case("gemm q4_0 N=8", f"{M}x{K} @ {K}x8", qa.nbytes,
                      (lambda: (llm.matmul(dqa, dxb, out=dyb), sync())), lambda: host(dyb),
                      wf.astype(np.float64) @ xb, 1e-4, lambda: np.matmul(wf, xb, out=yb),
                      T and (lambda: torch.mm(T(wf), T(xb), out=T(yb)))))
    # dequantize q4_0 -> float32 (reads the blocks, writes 4 bytes per weight)
    M = max(1, int(mb * MiB / (K * (18 / 32 + 4))))
    qa = llm.quantize(rng.standard_normal((M, K)).astype(np.float32), "q4_0")
    dq = llm.QTensor("q4_0", qa.shape, dev(qa.data))
    dout = dev(np.empty((M, K), np.float32))
    want = llm.dequantize(qa)
    cases.append(Case("dequantize q4_0", f"{M}x{K}", qa.nbytes + M * K * 4,
                      (lambda: (llm.dequantize(dq, out=dout), sync())), lambda: host(dout), want, 0))
    # flash_decode over a float32 KV cache (GQA 32 query / 8 KV heads, head_dim 128)
    H, KH, hd = 32, 8, 128
    L = max(16, int(mb * MiB / (2 * KH * hd * 4)))
    q = rng.standard_normal((1, H, hd)).astype(np.float32)
    kc, vc = (rng.standard_normal((1, KH, L, hd)).astype(np.float32) for _ in range(2))
    s = np.einsum("hd,hnd->hn", q[0].astype(np.float64), np.repeat(kc[0], H // KH, 0)) / math.sqrt(hd)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (np.einsum("hn,hnd->hd", p / p.sum(-1, keepdims=True), np.repeat(vc[0], H // KH, 0)))[None]
    dq_, dk, dv, do = dev(q), dev(kc), dev(vc), dev(np.empty_like(q))
    tq, tk_, tv = (T(q[:, :, None]), T(kc), T(vc)) if T else (None, None, None)
    cases.append(Case("flash_decode", f"L={L} {H}/{KH} heads x {hd}", kc.nbytes + vc.nbytes,
                      (lambda: (llm.flash_decode(dq_, dk, dv, L, out=do), sync())), lambda: host(do), want, 1e-4,
                      None, T and (lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk_, tv,
                                                                                            enable_gqa=True))))
    return cases


def attention_cases(quick: bool, be, torch, rng):
    """flash_attention [1, 8, S, D] against torch SDPA, causal and not."""
    dev = (lambda a: a) if be.name == "CPU" else (lambda a: tk.asarray(a, backend=be))
    host = (lambda a: a) if be.name == "CPU" else (lambda a: a.numpy())
    sync = (lambda: None) if be.name == "CPU" else (lambda: tk.synchronize(be))
    T = (lambda a: torch.from_numpy(a)) if torch is not None else None
    cases = []
    S = 128 if quick else 1024
    for D in (64, 128):
        q, k, v = (rng.standard_normal((1, 8, S, D)).astype(np.float32) for _ in range(3))
        for causal in (False, True):
            sc = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / math.sqrt(D)
            if causal:
                sc = np.where(np.tril(np.ones((S, S), bool)), sc, -np.inf)
            p = np.exp(sc - sc.max(-1, keepdims=True))
            want = p / p.sum(-1, keepdims=True) @ v
            dq, dk, dv, do = dev(q), dev(k), dev(v), dev(np.empty_like(q))
            flops = 4 * 8 * S * S * D * (0.5 if causal else 1)
            cases.append(Case(f"flash_attention{' causal' if causal else ''}", f"S={S} D={D}", 4 * q.nbytes,
                              (lambda dq=dq, dk=dk, dv=dv, do=do, c=causal:
                               (llm.flash_attention(dq, dk, dv, causal=c, out=do), sync())),
                              (lambda do=do: host(do)), want, 1e-4, None,
                              T and (lambda q=q, k=k, v=v, c=causal: torch.nn.functional.scaled_dot_product_attention(
                                  T(q), T(k), T(v), is_causal=c)), flops))
    return cases


# ---------------------------------------------------------------------------------------------
# running and printing
# ---------------------------------------------------------------------------------------------

def check(case: Case) -> None:
    case.tk_run()
    got = np.asarray(case.tk_result(), np.float64)
    try:
        np.testing.assert_allclose(got, case.want, rtol=case.rtol, atol=case.rtol * max(1.0, np.abs(case.want).max()))
    except AssertionError as e:
        raise AssertionError(f"tinykernels gives wrong results for {case.name} ({case.desc}):\n{e}") from None


def measure(case: Case, timer: Timer, memcpy) -> dict:
    fns = {"tk": case.tk_run, "memcpy": memcpy}
    if case.np_run is not None:
        fns["numpy"] = case.np_run
    if case.torch_run is not None:
        fns["torch"] = case.torch_run
    for attempt in range(timer.attempts):
        load = ForeignLoad()
        t = timer.measure(fns)
        busy = load.cores()
        if busy is None or busy <= BUSY_LIMIT or not timer.may_retry():
            break
        time.sleep(timer.pause)
    t["busy"] = busy is not None and busy > BUSY_LIMIT
    return t


def fmt_ms(t):
    return "n/a" if t is None else f"{t * 1e3:.3f}"


def print_table(title, rows, flops=False):
    print(f"\n{title}")
    head = ["kernel", "size", "MiB moved", "tk ms", "tk GB/s", "memcpy GB/s", "tk/memcpy", "numpy ms", "torch ms"]
    if flops:
        head = ["kernel", "size", "tk ms", "tk TFLOP/s", "torch ms", "torch TFLOP/s", "tk/torch time"]
    table = [head]
    for case, t in rows:
        star = "*" if t["busy"] else ""
        if flops:
            tt = t.get("torch")
            table.append([case.name, case.desc, fmt_ms(t["tk"]) + star, f"{case.flops / t['tk'] / 1e12:.4f}",
                          fmt_ms(tt), "n/a" if tt is None else f"{case.flops / tt / 1e12:.4f}",
                          "n/a" if tt is None else f"{t['tk'] / tt:.2f}"])
        else:
            gbs = case.traffic / t["tk"] / GB
            mc = case.traffic / t["memcpy"] / GB
            table.append([case.name, case.desc, f"{case.traffic / MiB:.1f}", fmt_ms(t["tk"]) + star, f"{gbs:.2f}",
                          f"{mc:.2f}", f"{gbs / mc:.2f}", fmt_ms(t.get("numpy")), fmt_ms(t.get("torch"))])
    widths = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    for k, r in enumerate(table):
        print("  " + "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  " + "  ".join("-" * w for w in widths))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 MiB, short timing windows")
    ap.add_argument("--sizes", type=float, nargs="+", default=None, metavar="MiB",
                    help="traffic sizes in MiB (default 64 256; 4 with --quick)")
    ap.add_argument("--backend", default="CPU", help="tinykernels backend (CPU, CL, ...; default CPU)")
    ap.add_argument("--threads", type=int, default=None, help="threads for torch and the memcpy (default: all cores)")
    ap.add_argument("--stat", choices=("best", "median"), default="best")
    ap.add_argument("--only", choices=("memory", "matmul", "attention", "latency"), action="append",
                    help="run only this section (may be repeated)")
    args = ap.parse_args(argv)
    sizes = args.sizes or ([4] if args.quick else [64, 256])
    sections = args.only or ["memory", "matmul", "attention", "latency"]
    nt = args.threads or os.cpu_count() or 1
    be = tk.backend(args.backend)
    torch = _torch()
    if torch is not None:
        torch.set_num_threads(nt)
    timer = Timer(min_time=0.05 if args.quick else 0.5, min_reps=3, rounds=1 if args.quick else 3, stat=args.stat)
    if args.quick:
        timer.attempts, timer.pause = 1, 0.0
    timer.retry_until = time.perf_counter() + (10 if args.quick else 150)
    probe = ForeignLoad()
    time.sleep(0.5)
    print("tinykernels.llm benchmark" + (" (--quick)" if args.quick else ""))
    print(f"  CPU        : {cpu_model()}, {os.cpu_count()} logical cores; torch/memcpy threads: {nt}")
    print(f"  backend    : {be!r}")
    print(f"  python     : {platform.python_version()}, numpy {np.__version__}, "
          f"torch {torch.__version__ if torch else 'n/a'}, tinykernels {tk.__version__}")
    print(f"  memcpy     : np.copyto of the same bytes, split over {nt} threads (ThreadPoolExecutor); "
          "measured per row (memcpy GB/s): at sizes near the last-level cache a repeated copy finds part "
          "of its data there and runs faster than at DRAM sizes, which lowers tk/memcpy (docs/llm.md)")
    print(f"  timing     : {timer.stat} of per-call times, >= {timer.min_time} s per row; tk/memcpy = "
          "T_eff / memcpy's T_eff; * = other processes were busy during the row")
    print(f"  other load : {foreign_load_note(probe.cores(), os.cpu_count() or 1)} (0.5 s sample before start)")
    sys.stdout.flush()
    rng = np.random.default_rng(1)
    load = ForeignLoad()
    try:
        for mb in sizes:
            groups = []
            if "memory" in sections:
                groups.append(("memory-bound kernels", make_cases(mb, be, torch, rng)))
            if "matmul" in sections:
                groups.append(("GEMV (bytes: the weights), dequantize, flash_decode (bytes: the KV cache)",
                               make_matmul_cases(mb, be, torch, rng)))
            for title, cases in groups:
                rows = []
                for c in cases:
                    check(c)
                    rows.append((c, measure(c, timer, ParallelCopy(c.traffic // 2, nt))))
                print_table(f"{title}, {mb:g} MiB", rows)
                sys.stdout.flush()
        if "attention" in sections:
            rows = []
            for c in attention_cases(args.quick, be, torch, rng):
                check(c)
                rows.append((c, measure(c, timer, lambda: None)))
            print_table("flash_attention vs torch scaled_dot_product_attention (float32, 8 heads)", rows, flops=True)
        if "latency" in sections:
            import llm_latency
            llm_latency.print_latency(llm_latency.run(be, torch, calls=200 if args.quick else 2000))
    except (AssertionError, ValueError, tk.CompileError, tk.LaunchError) as e:
        print(f"\nFAILED: {e}", file=sys.stderr)
        return 1
    print(f"\nother load during the run: {foreign_load_note(load.cores(), os.cpu_count() or 1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
