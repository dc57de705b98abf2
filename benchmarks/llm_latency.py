"""Host time per call of every public ``tinykernels.llm`` function at 4096-element rows, beside
the PyTorch CPU op where one exists (``bench_llm.py --only latency``).

Each row is timed for ``tk.Array``, NumPy and torch CPU tensor arguments, with ``out=`` given
and without; the time is the median of ``calls`` back-to-back calls (``time.perf_counter`` per
call), so the kernels are tiny and the numbers are the Python host work plus one launch.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

import tinykernels as tk
from tinykernels import llm

N = 4096


@dataclass
class Row:
    """One function: ``call(args, out)`` (``out`` None: allocated by the call), the arrays it
    takes as NumPy arrays, an ``out`` template (None: the function has no ``out=``) and the
    torch equivalent ``torch_call(targs, tout)`` (None where torch has none); ``inplace``:
    ``out`` is the first argument itself in the out= columns."""
    name: str
    call: Callable
    args: tuple
    out: np.ndarray | None
    torch_call: Callable | None = None
    inplace: bool = False             # the out= columns pass the first argument as out (in place)


def rows(torch) -> list:
    rng = np.random.default_rng(3)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    x, y, w = f32(1, N), f32(1, N), f32(N)
    pos = np.arange(64, dtype=np.float32)[:, None] * np.linspace(0.01, 1, 64, dtype=np.float32)[None]
    cos, sin = np.cos(pos), np.sin(pos)
    F = torch.nn.functional if torch is not None else None
    out = [
        Row("add", lambda a, o: llm.add(*a, out=o), (x, y), np.empty_like(x), lambda a, o: torch.add(*a, out=o)),
        Row("mul", lambda a, o: llm.mul(*a, out=o), (x, y), np.empty_like(x), lambda a, o: torch.mul(*a, out=o)),
        Row("exp", lambda a, o: llm.exp(*a, out=o), (x,), np.empty_like(x), lambda a, o: torch.exp(*a, out=o)),
        Row("cast f32->f16", lambda a, o: llm.cast(a[0], np.float16, out=o), (x,), np.empty(x.shape, np.float16),
            lambda a, o: o.copy_(a[0]) if o is not None else a[0].to(torch.float16)),
        Row("sum(axis=-1)", lambda a, o: llm.sum(a[0], -1, out=o), (x,), np.empty(1, np.float32),
            lambda a, o: torch.sum(a[0], -1, out=o)),
        Row("rms_norm", lambda a, o: llm.rms_norm(*a, out=o), (x, w), np.empty_like(x),
            lambda a, o: F.rms_norm(a[0], (N,), a[1], 1e-6)),
        Row("rms_norm residual, residual_out=r", lambda a, o: llm.rms_norm(a[0], a[1], residual=a[2], out=o,
                                                                          residual_out=a[2]),
            (x, w, y.copy()), np.empty_like(x), None),
        Row("rms_norm_add", lambda a, o: llm.rms_norm_add(*a, out=o), (x, w, y), np.empty_like(x), None),
        Row("softmax", lambda a, o: llm.softmax(a[0], -1, out=o), (x,), np.empty_like(x),
            lambda a, o: torch.softmax(a[0], -1)),
        Row("swiglu", lambda a, o: llm.swiglu(*a, out=o), (x, y), np.empty_like(x),
            lambda a, o: torch.mul(F.silu(a[0]), a[1], out=o)),
        Row("rope", lambda a, o: llm.rope(*a, offset=3, out=o), (f32(32, 1, 128), cos, sin),
            np.empty((32, 1, 128), np.float32), None),
        Row("argmax", lambda a, o: llm.argmax(a[0], out=o), (x[0],), np.empty((), np.int32),
            lambda a, o: torch.argmax(a[0])),
        Row("gather", lambda a, o: llm.gather(*a, out=o), (f32(64, N), np.array([5], np.int32)),
            np.empty((1, N), np.float32), lambda a, o: torch.index_select(a[0], 0, a[1].long(), out=o)),
        Row("transpose", lambda a, o: llm.transpose(a[0], out=o), (f32(64, 64),), np.empty((64, 64), np.float32),
            lambda a, o: o.copy_(a[0].T) if o is not None else a[0].T.contiguous()),
        Row("add in place (out=a)", lambda a, o: llm.add(*a, out=o), (x.copy(), y), np.empty_like(x),
            lambda a, o: torch.add(*a, out=a[0]), inplace=True),
        Row("counter_add", lambda a, o: llm.counter_add(a[0]), (np.zeros(1, np.int32),), None,
            lambda a, o: a[0].add_(1)),
        Row("kv_append", lambda a, o: llm.kv_append(*a), (np.zeros((32, 64, 128), np.float32), f32(32, 1, 128),
                                                         np.array([7], np.int32)), None,
            lambda a, o: a[0][:, 7:8].copy_(a[1])),
        Row("fp8_dequantize", lambda a, o: llm.fp8_dequantize(a[0], 0.5, out=o),
            (rng.integers(0, 120, N).astype(np.uint8).view(tk.float8_e4m3fn),), np.empty(N, np.float16),
            lambda a, o: torch.mul(a[0].to(torch.float16), 0.5, out=o)),
        Row("matmul gemv f32 64x4096", lambda a, o: llm.matmul(*a, out=o), (f32(64, N), x[0]),
            np.empty(64, np.float32), lambda a, o: torch.mv(a[0], a[1], out=o)),
        Row("flash_decode 32x128, 64 keys", lambda a, o: llm.flash_decode(*a, 64, out=o, splits=1),
            (f32(1, 32, 128), f32(1, 8, 64, 128), f32(1, 8, 64, 128)), np.empty((1, 32, 128), np.float32),
            lambda a, o: F.scaled_dot_product_attention(a[0][:, :, None], a[1], a[2], enable_gqa=True)),
    ]
    return out


def median_us(f: Callable, calls: int) -> float:
    f()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e6


def to_torch(torch, a: np.ndarray):
    """``a`` as a torch CPU tensor sharing its memory (fp8 through its bytes)."""
    if a.dtype == np.dtype(tk.float8_e4m3fn):
        return torch.from_numpy(a.view(np.uint8)).view(torch.float8_e4m3fn)
    return torch.from_numpy(a)


def kinds(be, torch) -> dict:
    """Converters from a NumPy array to each argument kind."""
    k = {"tk.Array": lambda a: tk.asarray(a, backend=be), "NumPy": lambda a: a}
    if torch is not None:
        k["torch"] = lambda a: to_torch(torch, a)
    return k


def run(be, torch, calls: int = 2000) -> list:
    """``[(row name, {column: us})]``: each kind with out= and without, then torch's op."""
    table = []
    for r in rows(torch):
        cols = {}
        for kind, conv in kinds(be, torch).items():
            a = tuple(conv(v) for v in r.args)
            outs = (("out=", a[0] if r.inplace else conv(r.out)), ("", None)) if r.out is not None else \
                (("", None),)
            for tag, o in outs:
                cols[f"{kind} {tag}".strip()] = median_us(lambda: r.call(a, o), calls)
        if r.torch_call is not None and torch is not None:
            ta = tuple(to_torch(torch, v) for v in r.args)
            to = torch.from_numpy(r.out.copy()) if r.out is not None and r.out.ndim else None
            cols["torch op"] = median_us(lambda: r.torch_call(ta, to), calls)
        table.append((r.name, cols))
    return table


def print_latency(table: list) -> None:
    heads = ["tk.Array out=", "tk.Array", "NumPy out=", "NumPy", "torch out=", "torch", "torch op"]
    print("\nhost time per call, us (median of per-call times; 4096-element rows; tk = tinykernels.llm)")
    print(f"  {'function':30s}" + "".join(f"{h:>14s}" for h in heads))
    for name, cols in table:
        print(f"  {name:30s}" + "".join(f"{cols[h]:14.1f}" if h in cols else f"{'-':>14s}" for h in heads))
