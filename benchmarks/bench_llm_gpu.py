#!/usr/bin/env python3
"""GPU benchmark of tinykernels.llm against PyTorch on the same device, as a fraction of a measured memcopy.

    PYTHONPATH=src python3 benchmarks/bench_llm_gpu.py --json bench_llm_gpu.json   # CUDA (< 4 min meant)
    PYTHONPATH=src python3 benchmarks/bench_llm_gpu.py --backend CPU --quick        # smoke test anywhere
    PYTHONPATH=src python3 benchmarks/bench_llm_gpu.py --backend CL --quick         # ... on OpenCL

Families: RMSNorm and softmax over rows (T_eff = bytes that must move / time, against torch's
device-to-device copy ``dst.copy_(src)``), quantized GEMV in weight bytes (Q4_0, Q8_0, Q4_K in
ggml's block layout; fp16 next to torch.mv), flash attention forward in TFLOP/s against
``scaled_dot_product_attention``, decode attention in K/V bytes, and the cheap fused
elementwise kernels (swiglu, rope, add+rmsnorm). The peer is torch on the backend's device
(torch CUDA for the CUDA backend, torch CPU otherwise; n/a without torch). Every
implementation is checked once against a float64 reference (torch float64 on the device, or
NumPy) on fresh random inputs, tinykernels' output poisoned with NaN first; a wrong result or
a tinykernels error is shown in its row and makes the exit status 1. PASS/MISS marks are
informational. See README.md.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import itertools
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    import tinykernels as tk
except ImportError:          # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import tinykernels as tk
from tinykernels import llm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gpu import nvidia_smi  # noqa: E402  (the same GPU-state probe as the memory benchmark)

try:
    import ml_dtypes
except ImportError:          # no bfloat16 on the host: the bfloat16 cases are left out (noted)
    ml_dtypes = None

MiB, GB = 1 << 20, 1e9
# targets (T_eff / memcopy), from issue 19
T_RMS, T_SOFTMAX, T_GEMV = 0.75, 0.85, 0.75
# tolerances on ||got - ref|| / ||ref|| against the float64 reference, per dtype of the data
TOL = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2}
FAMILIES = ("norm", "softmax", "gemv", "attention", "decode", "elementwise")


# ------------------------------------------------------------------------------------ environment

class Env:
    """The tinykernels backend, torch on the same device (or None), dtypes and conversions."""

    def __init__(self, backend: str):
        self.b = tk.backend(backend)
        self.cuda = self.b.dev == "CUDA"
        self.torch, self.tdev, self.torch_note = None, None, ""
        try:
            import torch
            if self.cuda:
                if not torch.cuda.is_available():
                    raise RuntimeError(f"torch {torch.__version__} sees no CUDA device")
                self.tdev = torch.device("cuda", getattr(self.b, "device", 0) or 0)
                # float32 means float32 on both sides (torch's defaults allow TF32 in cuDNN)
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
                self.torch_note = (f"{torch.__version__} CUDA {torch.version.cuda} on "
                                   f"{torch.cuda.get_device_name(self.tdev)}")
            else:
                self.tdev = torch.device("cpu")
                self.torch_note = f"{torch.__version__} on the CPU ({torch.get_num_threads()} threads)"
            self.torch = torch
        except Exception as e:  # noqa: BLE001 - a missing or broken peer is n/a
            self.torch_note = f"n/a ({type(e).__name__}: {e})"
        self.dtypes, notes = ["float32"], []
        if self.b.supports("float16"):
            self.dtypes.append("float16")
        else:
            notes.append(f"float16 left out: {self.b.name} does not support it")
        if ml_dtypes is None:
            notes.append("bfloat16 left out: ml_dtypes is not importable")
        elif not self.b.supports("bfloat16"):
            notes.append(f"bfloat16 left out: {self.b.name} does not support it")
        else:
            self.dtypes.append("bfloat16")
        self.dtype_note = "; ".join(notes)

    def np_dtype(self, name: str) -> np.dtype:
        return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)

    def sync(self) -> None:
        tk.synchronize(self.b)

    def tsync(self) -> None:
        if self.torch is not None and self.cuda:
            self.torch.cuda.synchronize(self.tdev)

    def host(self, shape, dtype: str, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        """Fresh random (never zero) values in ``dtype``, drawn in float32."""
        x = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
        return x.astype(self.np_dtype(dtype))

    def dev(self, a: np.ndarray):
        return tk.asarray(a, backend=self.b)

    def t(self, a: np.ndarray):
        """The same values as a torch tensor on the peer device (bfloat16 bit for bit)."""
        torch = self.torch
        if ml_dtypes is not None and a.dtype == np.dtype(ml_dtypes.bfloat16):
            return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16).to(self.tdev)
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.tdev)

    def f64(self, a):
        """A float64 copy for the reference: torch float64 on the device when torch is here."""
        if self.torch is not None:
            if isinstance(a, self.torch.Tensor):
                return a.to(self.tdev, self.torch.float64)
            return self.t(np.ascontiguousarray(a).astype(np.float32)).double()
        if isinstance(a, np.ndarray):
            return a.astype(np.float64)
        return np.asarray(a.numpy()).astype(np.float64)

    def tk_f64(self, a):
        """A tinykernels result as float64 (host, then the device of the reference)."""
        h = a if isinstance(a, np.ndarray) else a.numpy()
        return self.f64(np.asarray(h))


def cuda_versions(b) -> str:
    """The CUDA backend's target architecture and NVRTC version (best effort)."""
    try:
        from tinykernels.runtime import cuda as rt
        return f"compiling for {b.arch}, NVRTC {'.'.join(map(str, rt.nvrtc_version()))}"
    except Exception as e:  # noqa: BLE001
        return f"? ({type(e).__name__})"


def rel_err(env: Env, got, ref) -> float:
    """||got - ref|| / ||ref|| (inf when got has a NaN or an infinity)."""
    if env.torch is not None and isinstance(ref, env.torch.Tensor):
        torch = env.torch
        if not bool(torch.isfinite(got).all()):
            return math.inf
        return float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref))
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if not np.isfinite(got).all():
        return math.inf
    return float(np.linalg.norm((got - ref).ravel()) / np.linalg.norm(ref.ravel()))


# ------------------------------------------------------------------------------------ cases

@dataclass
class Impl:
    """One implementation: launch (async where the backend is), sync, poison output, result."""
    launch: Callable[[], object]
    sync: Callable[[], None]
    reset: Callable[[], object] | None
    result: Callable[[], object]
    tol: float


@dataclass
class Case:
    family: str
    name: str
    shape: str
    work: float                     # bytes (GB/s families) or flops (attention)
    target: float | None            # T_eff / memcopy target, None: informational
    ref: Callable[[], object]       # float64 reference (torch on the device, or NumPy)
    impls: dict = field(default_factory=dict)   # "tinykernels" / "torch" -> Impl, or an error string


def tk_impl(env: Env, fn: Callable, out, tol: float, name: str = "tinykernels") -> Impl:
    return Impl(fn, env.sync, lambda: llm.fill(out, float("nan")), lambda: env.tk_f64(out), tol)


def torch_impl(env: Env, fn: Callable, tol: float) -> Impl:
    st = {}

    def launch():
        st["y"] = fn()
    return Impl(launch, env.tsync, lambda: st.pop("y", None), lambda: env.f64(st["y"]), tol)


def guarded(case: Case, name: str, make: Callable[[], Impl]) -> None:
    """Build one implementation; a failure (missing kernel, compile error, unsupported dtype) is
    recorded as the row's error instead of crashing the run."""
    try:
        case.impls[name] = make()
    except Exception as e:  # noqa: BLE001
        case.impls[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def norm_cases(env: Env, quick: bool, rng) -> list:
    torch = env.torch
    shapes = [(256, 1024)] if quick else [(16384, 4096)]
    for R, D in shapes:
        for dt in env.dtypes:
            x, w = env.host((R, D), dt, rng), (1 + 0.1 * rng.standard_normal(D)).astype(env.np_dtype(dt))
            c = Case("norm", f"rms_norm {dt}", f"{R}x{D}", 2 * x.nbytes + w.nbytes, T_RMS, None)
            c.ref = lambda x=x, w=w: rms_ref(env, env.f64(x), env.f64(w))
            dx, dw = env.dev(x), env.dev(w)
            dy = tk.empty((R, D), env.np_dtype(dt), backend=env.b)
            guarded(c, "tinykernels", lambda: tk_impl(env, lambda: llm.rms_norm(dx, dw, 1e-6, out=dy), dy, TOL[dt]))
            if torch is not None:
                tx, tw = env.t(x), env.t(w)
                guarded(c, "torch", lambda: torch_impl(
                    env, lambda: torch.nn.functional.rms_norm(tx, (D,), tw, 1e-6), TOL[dt]))
            yield c


def rms_ref(env, x, w):
    ms = (x * x).mean(-1, keepdims=True) if isinstance(x, np.ndarray) else (x * x).mean(-1, keepdim=True)
    return x / (ms + 1e-6) ** 0.5 * w


def softmax_ref(env, x):
    if isinstance(x, np.ndarray):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return env.torch.softmax(x, -1)


def softmax_cases(env: Env, quick: bool, rng) -> list:
    torch = env.torch
    shapes = [(256, 1024), (32, 4000)] if quick else [(16384, 4096), (4096, 32000)]
    for R, D in shapes:
        for dt in env.dtypes:
            x = env.host((R, D), dt, rng, 3.0)
            c = Case("softmax", f"softmax {dt}", f"{R}x{D}", 2 * x.nbytes, T_SOFTMAX, None)
            c.ref = lambda x=x: softmax_ref(env, env.f64(x))
            dx = env.dev(x)
            dy = tk.empty((R, D), env.np_dtype(dt), backend=env.b)
            guarded(c, "tinykernels", lambda: tk_impl(env, lambda: llm.softmax(dx, -1, out=dy), dy, TOL[dt]))
            if torch is not None:
                tx = env.t(x)
                guarded(c, "torch", lambda: torch_impl(env, lambda: torch.softmax(tx, -1), TOL[dt]))
            yield c


# ---- quantized GEMV: random ggml blocks (fp16 scales, random nibbles / int8), dequantized exactly

QBLOCK = {"q4_0": (32, 18), "q8_0": (32, 34), "q4_k": (256, 144)}     # weights, bytes per block


def random_blocks(qtype: str, M: int, K: int, rng) -> np.ndarray:
    """Random bytes in ``qtype``'s layout, with finite positive float16 scales (d, and dmin for
    q4_k) in front of each block."""
    wpb, bpb = QBLOCK[qtype]
    nb = K // wpb
    raw = rng.integers(0, 256, (M, nb, bpb), dtype=np.uint8)
    nscale = 2 if qtype == "q4_k" else 1
    d = (rng.random((M, nb, nscale), dtype=np.float32) * 0.02 + 0.001).astype(np.float16)
    raw[:, :, :2 * nscale] = d.view(np.uint8).reshape(M, nb, 2 * nscale)
    return raw.reshape(M, nb * bpb)


def dequant(env: Env, qtype: str, raw: np.ndarray, M: int, K: int, dtype):
    """W [M, K] from the blocks, written here from ggml's layout (not tinykernels' code):
    q4_0 ``d * (q - 8)``, q8_0 ``d * q``, q4_k ``d * sc[s] * q - dmin * m[s]`` with the eight
    6-bit sub-block scales and mins unpacked from 12 bytes; in ``dtype`` (a torch dtype on the
    device when torch is here, else a NumPy dtype)."""
    wpb, bpb = QBLOCK[qtype]
    nb = K // wpb
    if env.torch is not None:
        torch = env.torch
        t = torch.from_numpy(raw).to(env.tdev).view(M, nb, bpb)

        def f16(b):                       # bytes [..., 2] -> float16 [..., 1]
            return b.contiguous().view(torch.float16).to(dtype)

        def cat(xs, axis):
            return torch.cat(xs, axis)

        def i16(b):
            return b.to(torch.int16)

        def as_i8(b):
            return b.contiguous().view(torch.int8)

        def to(x):
            return x.to(dtype)
    else:
        t = raw.reshape(M, nb, bpb)

        def f16(b):
            return b.copy().view(np.float16).astype(dtype)

        def cat(xs, axis):
            return np.concatenate(xs, axis)

        def i16(b):
            return b.astype(np.int16)

        def as_i8(b):
            return b.view(np.int8)

        def to(x):
            return x.astype(dtype)
    d = f16(t[:, :, 0:2])
    if qtype == "q4_0":
        qs = i16(t[:, :, 2:])
        return (to(cat([qs & 15, qs >> 4], -1) - 8) * d).reshape(M, K)
    if qtype == "q8_0":
        return (to(as_i8(t[:, :, 2:])) * d).reshape(M, K)
    dmin = f16(t[:, :, 2:4])
    sb = i16(t[:, :, 4:16])
    lo, mid, hi = sb[:, :, 0:4], sb[:, :, 4:8], sb[:, :, 8:12]
    sc = cat([lo & 63, (hi & 15) | ((lo >> 6) << 4)], -1)            # [M, nb, 8]
    mn = cat([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], -1)
    qs = i16(t[:, :, 16:]).reshape(M, nb, 4, 1, 32)                     # 4 chunks of 32 bytes
    q = cat([qs & 15, qs >> 4], 3).reshape(M, nb, 8, 32)                # sub-block 2c: low, 2c+1: high
    w = to(q) * (d * to(sc))[..., None] - (dmin * to(mn))[..., None]
    return w.reshape(M, K)


def gemv_cases(env: Env, quick: bool, rng) -> list:
    torch = env.torch
    M, K = (1024, 1024) if quick else (131072, 4096)
    for qtype in ("q4_0", "q8_0", "q4_k"):
        raw = random_blocks(qtype, M, K, rng)
        x = env.host(K, "float32", rng)
        for exact in (True, False) if qtype != "q4_k" else (True,):    # q4_k has no int8 route
            label = f"gemv {qtype}" + ("" if exact else " int8 route")
            c = Case("gemv", label, f"{M}x{K}", raw.nbytes, T_GEMV if qtype == "q4_0" and exact else None, None)

            def ref(raw=raw, x=x, qtype=qtype):
                f64 = torch.float64 if torch is not None else np.float64
                return dequant(env, qtype, raw, M, K, f64) @ env.f64(x)
            c.ref = ref
            draw, dx = env.dev(raw), env.dev(x)
            dy = tk.empty((M,), np.float32, backend=env.b)
            qa = llm.QTensor(qtype, (M, K), draw)
            # the int8 route rounds the activations to 8 bits per block (llama.cpp's error)
            guarded(c, "tinykernels", lambda qa=qa, dx=dx, dy=dy, e=exact: tk_impl(
                env, lambda: llm.matmul(qa, dx, out=dy, exact=e), dy, TOL["float32"] if e else 2e-2))
            if torch is not None:       # torch.mv with the same weights in fp16: its own (4x) bytes
                def make(raw=raw, x=x, qtype=qtype):
                    w16 = dequant(env, qtype, raw, M, K, torch.float16)
                    x16 = env.t(x).half()
                    return torch_impl(env, lambda: torch.mv(w16, x16), TOL["float16"])
                guarded(c, "torch", make)
                c.peer_bytes = M * K * 2 + K * 2 + M * 2
            yield c
        del raw
    # fp16 weights (GGUF F16): tinykernels' GEMV and torch.mv on the same bytes
    if "float16" not in env.dtypes:
        return
    M = M if quick else M // 2                      # 512 MiB of fp16 weights
    w = env.host((M, K), "float16", rng, 0.05)
    x = env.host(K, "float16", rng)
    c = Case("gemv", "gemv f16", f"{M}x{K}", w.nbytes, None, None)
    c.ref = lambda: env.f64(w) @ env.f64(x)
    dw, dx = env.dev(w), env.dev(x)
    dy = tk.empty((M,), np.float16, backend=env.b)
    guarded(c, "tinykernels", lambda: tk_impl(env, lambda: llm.matmul(dw, dx, out=dy), dy, TOL["float16"]))
    if torch is not None:
        tw, tx = env.t(w), env.t(x)
        guarded(c, "torch", lambda: torch_impl(env, lambda: torch.mv(tw, tx), TOL["float16"]))
    yield c


# ---- attention

def attn_ref(env, q, k, v, causal):
    """softmax(q k^T / sqrt(D)) v per (batch, head) in float64; k/v heads repeated for GQA."""
    G = q.shape[1] // k.shape[1]
    D = q.shape[-1]
    if env.torch is not None:
        torch = env.torch
        if G > 1:
            k, v = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
        outs = []
        for h in range(q.shape[1]):            # one head at a time: the score matrix stays small
            s = q[:, h] @ k[:, h].transpose(-1, -2) / math.sqrt(D)
            if causal:
                Sq, Sk = s.shape[-2:]
                s = s.masked_fill(~torch.ones(Sq, Sk, dtype=torch.bool, device=s.device).tril(Sk - Sq), -math.inf)
            outs.append(torch.softmax(s, -1) @ v[:, h])
        return torch.stack(outs, 1)
    if G > 1:
        k, v = np.repeat(k, G, 1), np.repeat(v, G, 1)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(D)
    if causal:
        Sq, Sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((Sq, Sk), bool), Sk - Sq), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def attention_cases(env: Env, quick: bool, rng) -> list:
    torch = env.torch
    shapes = [(1, 4, 128, 64)] if quick else [(1, 32, 4096, 128), (4, 32, 1024, 128)]
    for i, (B, H, S, D) in enumerate(shapes):
        dts = [d for d in env.dtypes if d != "float32"] + (["float32"] if i == len(shapes) - 1 else [])
        for dt in dts:
            q, k, v = (env.host((B, H, S, D), dt, rng) for _ in range(3))
            dq, dk, dv = env.dev(q), env.dev(k), env.dev(v)
            for causal in (False, True):
                flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
                c = Case("attention", f"flash_attention {dt}{' causal' if causal else ''}",
                         f"B={B} H={H} S={S} D={D}", flops, None, None)
                c.ref = lambda q=q, k=k, v=v, cz=causal: attn_ref(env, env.f64(q), env.f64(k), env.f64(v), cz)
                do = tk.empty((B, H, S, D), env.np_dtype(dt), backend=env.b)
                guarded(c, "tinykernels", lambda do=do, cz=causal: tk_impl(
                    env, lambda: llm.flash_attention(dq, dk, dv, causal=cz, out=do), do, TOL[dt]))
                if torch is not None:
                    tq, tk_, tv = env.t(q), env.t(k), env.t(v)
                    guarded(c, "torch", lambda tq=tq, tk_=tk_, tv=tv, cz=causal: torch_impl(
                        env, lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk_, tv, is_causal=cz),
                        TOL[dt]))
                yield c


def decode_cases(env: Env, quick: bool, rng) -> list:
    """flash_decode: one query per head against a GQA KV cache; bytes: K and V read once."""
    torch = env.torch
    B, H, KH, L, D = (1, 8, 2, 256, 64) if quick else (4, 32, 8, 16384, 128)
    for dt in env.dtypes:
        q = env.host((B, H, D), dt, rng)
        kc, vc = (env.host((B, KH, L, D), dt, rng) for _ in range(2))
        c = Case("decode", f"flash_decode {dt}", f"B={B} H={H}/{KH} L={L} D={D}", kc.nbytes + vc.nbytes, None, None)
        c.ref = lambda q=q, kc=kc, vc=vc: attn_ref(env, env.f64(q)[:, :, None], env.f64(kc), env.f64(vc),
                                                   False)[:, :, 0]
        dq, dk, dv = env.dev(q), env.dev(kc), env.dev(vc)
        do = tk.empty((B, H, D), env.np_dtype(dt), backend=env.b)
        guarded(c, "tinykernels", lambda do=do, dq=dq, dk=dk, dv=dv: tk_impl(
            env, lambda: llm.flash_decode(dq, dk, dv, L, out=do), do, TOL[dt]))
        if torch is not None:
            tq, tk_, tv = env.t(q)[:, :, None], env.t(kc), env.t(vc)
            guarded(c, "torch", lambda tq=tq, tk_=tk_, tv=tv: torch_impl(
                env, lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk_, tv, enable_gqa=True)[:, :, 0],
                TOL[dt]))
        yield c


def elementwise_cases(env: Env, quick: bool, rng) -> list:
    torch = env.torch
    R, F = (64, 1024) if quick else (8192, 14336)
    for dt in [d for d in ("float32", "float16") if d in env.dtypes]:
        a, g = env.host((R, F), dt, rng), env.host((R, F), dt, rng)
        c = Case("elementwise", f"swiglu {dt}", f"{R}x{F}", 3 * a.nbytes, None, None)

        def ref(a=a, g=g):
            a64, g64 = env.f64(a), env.f64(g)
            e = (-a64).exp() if env.torch is not None else np.exp(-a64)
            return a64 / (1 + e) * g64
        c.ref = ref
        da, dg = env.dev(a), env.dev(g)
        dy = tk.empty((R, F), env.np_dtype(dt), backend=env.b)
        guarded(c, "tinykernels", lambda da=da, dg=dg, dy=dy, dt=dt: tk_impl(
            env, lambda: llm.swiglu(da, dg, out=dy), dy, TOL[dt]))
        if torch is not None:
            ta, tg = env.t(a), env.t(g)
            guarded(c, "torch", lambda ta=ta, tg=tg, dt=dt: torch_impl(
                env, lambda: torch.nn.functional.silu(ta) * tg, TOL[dt]))
        yield c
    # rope on [heads, seq, head_dim] with float32 tables
    H, S, hd = (4, 128, 64) if quick else (32, 16384, 128)
    ang = np.arange(S)[:, None] * 10000.0 ** (-np.arange(hd // 2) / (hd // 2))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    for dt in [d for d in ("float32", "float16") if d in env.dtypes]:
        x = env.host((H, S, hd), dt, rng)
        c = Case("elementwise", f"rope {dt}", f"{H}x{S}x{hd}", 2 * x.nbytes + cos.nbytes + sin.nbytes, None, None)

        def ref(x=x):
            x64, c64, s64 = env.f64(x), env.f64(cos), env.f64(sin)
            x1, x2 = x64[..., :hd // 2], x64[..., hd // 2:]
            parts = [x1 * c64 - x2 * s64, x2 * c64 + x1 * s64]
            return env.torch.cat(parts, -1) if env.torch is not None else np.concatenate(parts, -1)
        c.ref = ref
        dx, dc, ds = env.dev(x), env.dev(cos), env.dev(sin)
        dy = tk.empty(x.shape, env.np_dtype(dt), backend=env.b)
        guarded(c, "tinykernels", lambda dx=dx, dy=dy, dt=dt: tk_impl(
            env, lambda: llm.rope(dx, dc, ds, out=dy), dy, TOL[dt]))
        if torch is not None:       # composed eager torch ops (torch has no fused rope)
            tx = env.t(x)
            tc, ts = env.t(cos).to(tx.dtype), env.t(sin).to(tx.dtype)

            def trope(tx=tx, tc=tc, ts=ts):
                x1, x2 = tx[..., :hd // 2], tx[..., hd // 2:]
                return torch.cat([x1 * tc - x2 * ts, x2 * tc + x1 * ts], -1)
            guarded(c, "torch", lambda f=trope, dt=dt: torch_impl(env, f, TOL[dt]))
        yield c
    # add + rmsnorm (the residual stream): s = x + r; y = rms_norm(s) * w; both written
    R, D = (256, 1024) if quick else (16384, 4096)
    for dt in [d for d in ("float32", "float16") if d in env.dtypes]:
        x, r = env.host((R, D), dt, rng), env.host((R, D), dt, rng)
        w = (1 + 0.1 * rng.standard_normal(D)).astype(env.np_dtype(dt))
        c = Case("elementwise", f"add+rms_norm {dt}", f"{R}x{D}", 4 * x.nbytes + w.nbytes, None, None)
        # the reference rounds s to the dtype first, as the kernel (and torch) store it
        s = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
        c.ref = lambda s=s, w=w: rms_ref(env, env.f64(s), env.f64(w))
        dx, dr, dw = env.dev(x), env.dev(r), env.dev(w)
        dy, ds = (tk.empty((R, D), env.np_dtype(dt), backend=env.b) for _ in range(2))
        guarded(c, "tinykernels", lambda dx=dx, dr=dr, dw=dw, dy=dy, ds=ds, dt=dt: tk_impl(
            env, lambda: llm.rms_norm(dx, dw, 1e-6, residual=dr, out=dy, residual_out=ds), dy, TOL[dt]))
        if torch is not None:
            tx, tr, tw = env.t(x), env.t(r), env.t(w)
            guarded(c, "torch", lambda tx=tx, tr=tr, tw=tw, dt=dt: torch_impl(
                env, lambda: torch.nn.functional.rms_norm(tx + tr, (D,), tw, 1e-6), TOL[dt]))
        yield c


MAKERS = {"norm": norm_cases, "softmax": softmax_cases, "gemv": gemv_cases, "attention": attention_cases,
          "decode": decode_cases, "elementwise": elementwise_cases}
TITLES = {"norm": f"RMSNorm over rows (T_eff: read x and w, write y; target >= {T_RMS} memcopy)",
          "softmax": f"softmax over rows (T_eff: read x, write y; target >= {T_SOFTMAX} memcopy)",
          "gemv": f"GEMV, decode (T_eff in WEIGHT bytes: q4_0 18 B, q8_0 34 B per 32 weights, q4_k 144 B per "
                  f"256; torch.mv reads fp16 weights, its T_eff counts its own bytes; target q4_0 >= {T_GEMV} memcopy)",
          "attention": "flash attention forward, TFLOP/s = 4*B*H*S*S*D (halved for causal) / time; torch: SDPA",
          "decode": "decode attention (flash_decode, one query per head, GQA), T_eff in K/V cache bytes",
          "elementwise": "fused elementwise (swiglu, rope, add+rms_norm), T_eff: arrays read and written once"}


# ------------------------------------------------------------------------------------ timing

class Timer:
    """Seconds per launch: warm-up, then batches of async launches closed by one synchronize;
    the best (or median) of the batches; ~min_time per implementation."""

    def __init__(self, min_time: float, rounds: int, stat: str):
        self.min_time, self.rounds, self.stat = min_time, rounds, stat
        self.agg = min if stat == "best" else statistics.median

    def measure(self, f: Callable, sync: Callable) -> float:
        f()                    # warm-up (the checked run before compiled and loaded the kernel)
        sync()
        t0 = time.perf_counter()
        f()
        sync()
        once = max(time.perf_counter() - t0, 1e-7)
        if once >= self.min_time:      # a slow kernel: one more run, the better (median) of the two
            t0 = time.perf_counter()
            f()
            sync()
            return self.agg([once, time.perf_counter() - t0])
        if once < 0.05:        # fast kernels: a few more warm-up launches (clocks, allocator)
            for _ in range(3):
                f()
            sync()
        rounds = max(2, min(self.rounds, int(self.min_time / once)))      # slow kernels: fewer batches
        n = max(1, min(20000, int(self.min_time / rounds / once)))
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            sync()
            samples.append((time.perf_counter() - t0) / n)
        return self.agg(samples)


def memcopy(env: Env, nbytes: int, timer: Timer) -> dict:
    """The ceiling: torch ``dst.copy_(src)`` on the device (bytes read + written / time); without
    torch, ``tk.copyto`` on the backend (CPU: np.copyto)."""
    n = nbytes // 2 // 4
    src = np.random.default_rng(5).random(n, dtype=np.float32) + np.float32(0.5)
    if env.torch is not None:
        ts, td = env.t(src), env.torch.empty(n, dtype=env.torch.float32, device=env.tdev)
        f, sync, how = (lambda: td.copy_(ts)), env.tsync, f"torch {env.tdev.type} dst.copy_(src)"
        check = lambda: np.array_equal(td.cpu().numpy(), src)  # noqa: E731
    else:
        ds, dd = env.dev(src), tk.empty(n, np.float32, backend=env.b)
        f, sync, how = (lambda: tk.copyto(dd, ds)), env.sync, "tk.copyto (torch n/a)"
        check = lambda: np.array_equal(dd.numpy(), src)  # noqa: E731
    t = timer.measure(f, sync)
    if not check():
        raise AssertionError(f"the memcopy ({how}) copied wrong values")
    return {"how": how, "bytes": 2 * n * 4, "gbs": 2 * n * 4 / t / GB, "ms": t * 1e3}


# ------------------------------------------------------------------------------------ running

def run_case(env: Env, c: Case, timer: Timer, failures: list) -> dict:
    row = {"family": c.family, "case": c.name, "shape": c.shape, "work": c.work, "target": c.target}
    try:
        ref = c.ref()
    except Exception as e:  # noqa: BLE001 - the reference itself failing is a benchmark bug: report it
        failures.append(f"{c.name} {c.shape}: reference failed: {type(e).__name__}: {e}")
        row["error"] = "reference failed"
        return row
    for name in ("tinykernels", "torch"):
        imp = c.impls.get(name)
        if imp is None:
            row[name] = None
            continue
        if isinstance(imp, str):
            row[name] = {"error": imp}
            if name == "tinykernels":
                failures.append(f"{c.name} {c.shape}: tinykernels: {imp}")
            continue
        try:
            if imp.reset is not None:
                imp.reset()
            imp.sync()
            imp.launch()
            imp.sync()
            err = rel_err(env, imp.result(), ref)
            if not err <= imp.tol:
                row[name] = {"error": f"WRONG: rel. error {err:.3g} > {imp.tol:g}", "rel_err": err}
                failures.append(f"{c.name} {c.shape}: {name} gives wrong results: ||got-ref||/||ref|| = {err:.3g}"
                                f" > {imp.tol:g}")
                continue
            t = timer.measure(imp.launch, imp.sync)
            row[name] = {"s": t, "rel_err": err}
        except Exception as e:  # noqa: BLE001 - reported in the row; tinykernels' errors fail the run
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            row[name] = {"error": msg}
            if name == "tinykernels":
                failures.append(f"{c.name} {c.shape}: tinykernels: {msg}")
            if os.environ.get("TK_BENCH_TRACE"):
                traceback.print_exc()
    return row


def fmt_row(row: dict, mc: float, flops: bool) -> list:
    def val(name, work):
        r = row.get(name)
        if r is None:
            return "n/a", None
        if "error" in r:
            return "ERROR" if not r["error"].startswith("WRONG") else "WRONG", None
        v = work / r["s"] / (1e12 if flops else GB)
        return (f"{v:.2f}" if flops else f"{v:.1f}"), v
    tkv, tkn = val("tinykernels", row["work"])
    thv, thn = val("torch", row.get("peer_work", row["work"]))
    if flops:
        ratio = "n/a" if tkn is None or thn is None else f"{tkn / thn:.2f}"
        ms = "-" if tkn is None else f"{row['tinykernels']['s'] * 1e3:.3f}"
        return [row["case"], row["shape"], tkv, thv, ratio, ms]
    r1 = None if tkn is None else tkn / mc
    r2 = None if thn is None else thn / mc
    tgt = "-"
    if row["target"] is not None:
        tgt = f">= {row['target']} " + ("n/a" if r1 is None else "PASS" if r1 >= row["target"] else "MISS")
    row["tk_ratio"], row["torch_ratio"] = r1, r2
    return [row["case"], row["shape"], tkv, thv, f"{mc:.1f}", "-" if r1 is None else f"{r1:.3f}",
            "-" if r2 is None else f"{r2:.3f}", tgt]


def print_table(title: str, rows: list, mc: float, flops: bool, secs: float) -> None:
    if flops:
        head = ["case", "shape", "tinykernels TFLOP/s", "torch TFLOP/s", "tk/torch", "tk ms"]
    else:
        head = ["case", "shape", "tinykernels GB/s", "torch GB/s", "memcopy GB/s", "tk/memcopy", "torch/memcopy",
                "target"]
    table = [head] + [fmt_row(r, mc, flops) for r in rows]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    print(f"\n== {title} == ({secs:.1f} s with set-up and checks)")
    for k, r in enumerate(table):
        print("  " + "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  " + "  ".join("-" * w for w in widths))
    for r in rows:
        for name in ("tinykernels", "torch"):
            if isinstance(r.get(name), dict) and "error" in r[name]:
                print(f"  ! {r['case']} {r['shape']}: {name}: {r[name]['error']}")
    sys.stdout.flush()


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="CUDA", help="tinykernels backend: CUDA (default), CL, CPU, ...")
    ap.add_argument("--quick", action="store_true", help="smoke run: small shapes, short timing")
    ap.add_argument("--smoke", action="store_true", help="--quick with float32 only and one case per family "
                    "(the test suite's run)")
    ap.add_argument("--stat", choices=("best", "median"), default="best", help="statistic over batches")
    ap.add_argument("--only", choices=FAMILIES, action="append", help="run only this family (repeatable)")
    ap.add_argument("--time", type=float, default=None, help="seconds of timing per implementation "
                    "(default 0.6; 0.03 with --quick)")
    ap.add_argument("--budget", type=float, default=None, metavar="S",
                    help="start no new case after S seconds (default 210, to end inside 4 minutes; 0: no limit; "
                    "none with --quick); the cases left out are listed in the summary")
    ap.add_argument("--json", metavar="PATH", help="also write every number to PATH as JSON")
    args = ap.parse_args(argv)
    args.quick = args.quick or args.smoke
    if args.budget is None and not args.quick:
        args.budget = 210.0
    t_start = time.perf_counter()
    is_cuda = args.backend.upper().startswith(("CUDA", "GPU", "NV"))
    smi = nvidia_smi(int(args.backend.partition(":")[2] or 0)) if is_cuda else {}     # before we open the GPU
    env = Env(args.backend)
    if args.smoke:
        env.dtypes, env.dtype_note = ["float32"], "; ".join(filter(None, ["--smoke: float32 only", env.dtype_note]))
    timer = Timer(args.time or (0.005 if args.smoke else 0.03 if args.quick else 0.6), 3 if args.quick else 5,
                  args.stat)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "host": platform.node(),
            "backend": repr(env.b), "device": getattr(env.b, "device_name", env.b.name), "quick": args.quick,
            "tinykernels": tk.__version__, "python": platform.python_version(), "numpy": np.__version__,
            "torch": env.torch_note, "dtypes": env.dtypes, "stat": args.stat, "time_per_impl": timer.min_time}
    print("tinykernels.llm GPU benchmark" + (" (--quick)" if args.quick else ""))
    print(f"  date       : {meta['date']} on {meta['host']}")
    print(f"  backend    : {meta['backend']} ({meta['device']})")
    if env.cuda:
        meta.update(cuda=cuda_versions(env.b), nvidia_smi=smi)
        print(f"  CUDA       : {meta['cuda']}; driver {smi.get('driver_version', '?')}")
        if smi:
            print(f"  GPU state  : {smi.get('utilization.gpu')} busy, {smi.get('memory.used')} of "
                  f"{smi.get('memory.total')} used, SM clock {smi.get('clocks.sm')} (max {smi.get('clocks.max.sm')}),"
                  f" {smi.get('pstate')} (nvidia-smi, before this process opened the device)")
            if smi.get("other_processes"):
                print(f"  ** WARNING: other processes use this GPU: {'; '.join(smi['other_processes'])} **")
    print(f"  software   : python {meta['python']}, numpy {meta['numpy']}, tinykernels {meta['tinykernels']}")
    print(f"  peer       : torch {env.torch_note}")
    print(f"  dtypes     : {', '.join(env.dtypes)}" + (f" ({env.dtype_note})" if env.dtype_note else ""))
    print(f"  timing     : 1-4 warm-up launches, then batches of async launches + 1 synchronize, ~{timer.min_time} s"
          f" per implementation, {args.stat.upper()} of the batches")
    print("  checks     : each implementation once against a float64 reference (torch on the device, else NumPy)"
          f", ||got-ref||/||ref|| <= {', '.join(f'{k} {v:g}' for k, v in TOL.items())}; tinykernels' output "
          "poisoned with NaN first")
    sys.stdout.flush()
    mc = memcopy(env, (16 if args.quick else 1024) * MiB, timer)
    print(f"  memcopy    : {mc['how']}, {mc['bytes'] / MiB:.0f} MiB read + written: {mc['gbs']:.1f} GB/s")
    out = {"meta": meta, "memcopy": mc, "rows": []}
    failures: list = []
    rng = np.random.default_rng(20261127)
    not_run: list = []
    for fam in args.only or FAMILIES:
        rows, t_fam = [], time.perf_counter()
        if args.budget and t_fam - t_start > args.budget:
            not_run.append(fam)
            continue
        try:
            cases = MAKERS[fam](env, args.quick, rng)
            for c in itertools.islice(cases, 1) if args.smoke else cases:
                if args.budget and time.perf_counter() - t_start > args.budget:
                    not_run.append(f"{fam} from {c.name} {c.shape} on")
                    break
                row = run_case(env, c, timer, failures)
                if hasattr(c, "peer_bytes"):
                    row["peer_work"] = c.peer_bytes
                rows.append(row)
                del c
                gc.collect()
                if env.torch is not None and env.cuda:
                    env.torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 - a family's setup failing: reported, exit 1
            failures.append(f"{fam}: setup failed: {type(e).__name__}: {e}")
            if os.environ.get("TK_BENCH_TRACE"):
                traceback.print_exc()
        print_table(TITLES[fam], rows, mc["gbs"], fam == "attention", time.perf_counter() - t_fam)
        out["rows"] += rows
        if args.json:            # after every family: a run cut short still leaves its numbers
            Path(args.json).write_text(json.dumps(dict(out, failures=failures), indent=1, default=str) + "\n")

    try:                         # drift check (clocks, other load): the ceiling measured again
        mc_end = memcopy(env, (16 if args.quick else 1024) * MiB, timer)
    except Exception as e:  # noqa: BLE001
        failures.append(f"memcopy at the end: {type(e).__name__}: {e}")
        mc_end = {"gbs": math.nan}
    out["memcopy_end"] = mc_end
    print("\n== Summary (targets informational; exit 1 only for wrong results or tinykernels errors) ==")
    print(f"  memcopy ceiling: {mc['gbs']:.1f} GB/s at the start (used above), {mc_end['gbs']:.1f} GB/s at the end")
    for r in out["rows"]:
        if r.get("target") is not None:
            v = r.get("tk_ratio")
            mark = "n/a" if v is None else "PASS" if v >= r["target"] else "MISS"
            print(f"  {r['case'] + ' ' + r['shape']:40} tk/memcopy {'-' if v is None else f'{v:.3f}':>7}"
                  f"  target >= {r['target']}  {mark}")
    for fam in args.only or FAMILIES:       # speed against torch: torch's time / tinykernels' time
        both = [r for r in out["rows"] if r["family"] == fam and isinstance(r.get("tinykernels"), dict)
                and "s" in r["tinykernels"] and isinstance(r.get("torch"), dict) and "s" in r["torch"]]
        if both:
            sp = [r["torch"]["s"] / r["tinykernels"]["s"] for r in both]
            g = math.exp(statistics.fmean(math.log(v) for v in sp))
            out.setdefault("speed_vs_torch", {})[fam] = g
            print(f"  {fam:12} speed vs torch (torch time / tinykernels time): geometric mean {g:.3f} over "
                  f"{len(both)} cases (min {min(sp):.3f}, max {max(sp):.3f})")
    if not_run:
        print(f"  ** over the --budget of {args.budget:g} s: not run: {'; '.join(not_run)} **")
        out["not_run"] = not_run
    if args.quick:
        print("  (--quick: small shapes inside the caches; the ratios say nothing about the targets)")
    if failures:
        print("\nFAILED:\n" + "\n".join(f"  {f}" for f in failures))
    print(f"\ntotal time {time.perf_counter() - t_start:.1f} s" + ("" if failures else "; every result verified"))
    out["failures"] = failures
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
        print(f"numbers written to {args.json}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
