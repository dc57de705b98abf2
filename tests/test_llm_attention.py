"""tinykernels.llm attention (flash_attention, flash_decode) against NumPy float64 and torch's
scaled_dot_product_attention, in every code shape (row per item, query tile per group, query
rows as lanes)."""
import importlib
import math

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from llm_helpers import backends, close, dev, get, skip_16bit

try:
    import torch
except ImportError:          # torch is an optional extra: its comparisons skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

A = importlib.import_module("tinykernels.llm.attention")
rng = np.random.default_rng(29)


def ref(q, k, v, causal=False, scale=None):
    """Attention in float64; GQA by repeating KV heads; causal aligned bottom-right."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(mx), mx, 0))
    den = p.sum(-1, keepdims=True)
    return np.where(den != 0, p @ v / np.where(den != 0, den, 1), 0)     # NaN stays NaN


def sdpa(q, k, v, causal=False, scale=None):
    t = [torch.tensor(np.asarray(x, np.float64)) for x in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal, scale=scale,
                                                            enable_gqa=True).numpy()


def ulps(dt, d):
    """Float32 accumulation over head_dim products and the keys: a few ulps times sqrt(d);
    float16 results: a few ulps of the one rounding on store."""
    return 4 if np.dtype(dt) == np.float16 else int(8 * math.sqrt(d))


@pytest.fixture(params=[None, "rows", "tiles", "lanes"], ids=["auto", "rows", "tiles", "lanes"])
def shape_kind(request, monkeypatch):
    monkeypatch.setattr(A, "SHAPE", request.param)


def sizes(be):
    if be == "INTERP":         # the interpreter runs every work item in Python: tiny sizes
        return [(1, 2, 1, 5, 5, 8)]
    return [(2, 4, 2, 37, 37, 64), (1, 2, 2, 20, 20, 128), (1, 3, 1, 9, 9, 40)]


@needs_torch
@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_matches_numpy_and_torch(be, dt, causal, shape_kind):
    skip_16bit(be, dt)
    b = dev(be)
    for B, H, KH, SQ, SK, D in sizes(be):
        q = rng.standard_normal((B, H, SQ, D)).astype(dt)
        k = rng.standard_normal((B, KH, SK, D)).astype(dt)
        v = rng.standard_normal((B, KH, SK, D)).astype(dt)
        o = llm.flash_attention(*(tk.asarray(x, backend=b) for x in (q, k, v)), causal=causal)
        got = get(o)
        assert got.dtype == dt and got.shape == q.shape
        close(got, ref(q, k, v, causal), dt, ulps(dt, D))
        close(got, sdpa(q, k, v, causal), dt, ulps(dt, D))


@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] != "INTERP"])
def test_flash_attention_scale_causal_offsets_and_out(be, shape_kind):
    b = dev(be)
    q = rng.standard_normal((1, 2, 6, 16)).astype(np.float32)
    k = rng.standard_normal((1, 2, 70, 16)).astype(np.float32)       # Sk > Sq: queries are the last 6
    v = rng.standard_normal((1, 2, 70, 16)).astype(np.float32)
    out = tk.zeros(q.shape, np.float32, backend=b)
    r = llm.flash_attention(*(tk.asarray(x, backend=b) for x in (q, k, v)), causal=True, scale=0.3, out=out)
    assert r is out
    close(get(out), ref(q, k, v, True, 0.3), np.float32, 32)
    # Sq > Sk, causal: the first rows see no key and are 0
    o = llm.flash_attention(*(tk.asarray(x, backend=b) for x in (k[:, :, :9], q, v[:, :, :6])), causal=True)
    want = ref(k[:, :, :9], q, v[:, :, :6], True)
    assert np.all(want[:, :, :3] == 0)
    close(get(o), want, np.float32, 32)


@needs_torch
def test_flash_attention_numpy_and_torch_in_out():
    q, k, v = (rng.standard_normal((1, 2, 7, 8)).astype(np.float32) for _ in range(3))
    o = llm.flash_attention(q, k, v)
    assert isinstance(o, np.ndarray)
    close(o, ref(q, k, v), np.float32, 32)
    t = llm.flash_attention(*(torch.tensor(x) for x in (q, k, v)), causal=True)
    assert isinstance(t, torch.Tensor)
    close(t.numpy(), ref(q, k, v, True), np.float32, 32)
    # no keys: every row sees none and is 0; no queries: an empty result
    z = llm.flash_attention(q, k[:, :, :0], v[:, :, :0], out=np.full_like(q, np.nan))
    assert np.array_equal(z, np.zeros_like(q))
    assert llm.flash_attention(q[:, :, :0], k, v).shape == (1, 2, 0, 8)


@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_lanes_partial_tiles_and_blocks(be, causal, monkeypatch):
    """The lanes shape (CPU default) at lengths around its 64-row query blocks and 64-key
    tiles: key tiles cut short by Sk or by the causal diagonal (4-key steps plus 1-3
    remainder keys), partial query blocks, Sq != Sk both ways (causal rows that see no key
    are 0), odd head dims (4-column steps plus remainder), GQA and float16."""
    monkeypatch.setattr(A, "SHAPE", "lanes")
    b = dev(be)
    cases = [(1, 2, 1, 3, 5, 8, np.float32), (1, 2, 2, 6, 3, 5, np.float32)] if be == "INTERP" else [
        (1, 2, 1, 65, 65, 64, np.float32), (1, 3, 3, 64, 131, 7, np.float32), (2, 4, 2, 70, 45, 128, np.float32),
        (1, 1, 1, 1, 67, 33, np.float32), (1, 2, 1, 129, 129, 64, np.float16), (1, 1, 1, 66, 63, 256, np.float32)]
    for B, H, KH, SQ, SK, D, dt in cases:
        if be == "WEBGPU" and dt == np.float16:
            continue
        q = rng.standard_normal((B, H, SQ, D)).astype(dt)
        k = rng.standard_normal((B, KH, SK, D)).astype(dt)
        v = rng.standard_normal((B, KH, SK, D)).astype(dt)
        got = get(llm.flash_attention(*(tk.asarray(x, backend=b) for x in (q, k, v)), causal=causal))
        want = ref(q, k, v, causal)
        if causal and SQ > SK:
            assert np.all(got[:, :, :SQ - SK] == 0)
        close(got, want, dt, ulps(dt, D))


def test_flash_attention_picks_the_lanes_shape_on_the_cpu():
    """The CPU runs the lanes kernel (query rows as SIMD lanes) unless a shape is forced; the
    interpreter keeps the row shape."""
    assert A._shape(tk.CPU(), 64) == "lanes" and A._shape(tk.CPU(), 512) == "lanes"
    assert A._shape(tk.backend("INTERP"), 64) == "rows"
    assert A._lanes_blocks(tk.CPU(), 64) == (64, A.LANES_BK)
    src = A._fa_lanes.source("CPU", *(np.zeros((1, 1, 64, 64), np.float32),) * 4, 0.125, 0.0, True, 64, A.LANES_BK, True,
                             ndrange=(1, 64), workgroupsize=(1, 64))
    assert "work items as lanes" in src


def test_flash_attention_lanes_keeps_the_fma_vectors_in_registers():
    """In the lanes kernel's two products each query (scores) or probability (P @ V) vector
    feeds four FMAs. GCC folded its 64-byte load into every one of them (each FMA a load of
    its own, the loop load-bound); ``- zero`` (a run-time 0.0) keeps it in a register. Checked
    in the assembly GCC makes of the D = 128 kernel on x86-64 with AVX-512: at most a third of
    the FMAs read memory (before the change: 153 of 297)."""
    import platform
    import subprocess
    import tempfile
    from tinykernels.runtime.compiler import toolchain
    tc = toolchain()
    if platform.machine() != "x86_64" or "clang" in tc.version.lower() or "-march=native" not in tc.flags:
        pytest.skip("checks GCC's x86-64 assembly")
    D = 128
    bq, bk = A._lanes_blocks(tk.CPU(), D)
    z = np.zeros((1, 1, 256, D), np.float32)
    src = A._fa_lanes.source("CPU", z, z, z, z, 0.125, 0.0, False, D, bk, True, ndrange=(1, 256),
                             workgroupsize=(1, bq))
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/k.c", "w") as f:
            f.write(src)
        flags = [x for x in tc.flags if x != "-shared"]
        subprocess.run([*tc.cmd, *flags, "-S", "-o", f"{d}/k.s", f"{d}/k.c"], check=True)
        asm = open(f"{d}/k.s").read()
    if "zmm" not in asm:
        pytest.skip("no AVX-512 on this CPU")
    fmas = [ln.split(None, 1)[1] for ln in asm.splitlines() if ln.strip().startswith("vfmadd") and "ps" in ln]
    from_memory = [f for f in fmas if "(" in f]
    assert len(fmas) > 50 and 3 * len(from_memory) <= len(fmas), (len(from_memory), len(fmas))


def dec_ref(q, kc, vc, n, scale=None):
    return ref(q[:, :, None], kc[:, :, :n], vc[:, :, :n], False, scale)[:, :, 0]


@needs_torch
@pytest.mark.parametrize("be", backends())
@pytest.mark.parametrize("cdt", [np.float32, np.float16])
@pytest.mark.parametrize("splits", [None, 1, 3])
def test_flash_decode_matches_numpy_and_torch(be, cdt, splits):
    skip_16bit(be, cdt)
    b = dev(be)
    B, H, KH, L, D = (1, 4, 2, 9, 8) if be == "INTERP" else (2, 8, 2, 300, 64)
    q = rng.standard_normal((B, H, D)).astype(np.float32)
    kc = rng.standard_normal((B, KH, L, D)).astype(cdt)
    vc = rng.standard_normal((B, KH, L, D)).astype(cdt)
    qd, kd, vd = (tk.asarray(x, backend=b) for x in (q, kc, vc))
    for n in (1, L // 2 + 1, L):
        want = dec_ref(q, kc, vc, n)
        close(get(llm.flash_decode(qd, kd, vd, n, splits=splits)), want, np.float32, ulps(np.float32, D))
        cnt = tk.asarray(np.array([n - 1], np.int32), backend=b)
        got = get(llm.flash_decode(qd, kd, vd, cnt, offset=1, splits=splits))
        close(got, want, np.float32, ulps(np.float32, D))
        t = torch.nn.functional.scaled_dot_product_attention(
            torch.tensor(q[:, :, None].astype(np.float64)), torch.tensor(kc[:, :, :n].astype(np.float64)),
            torch.tensor(vc[:, :, :n].astype(np.float64)), enable_gqa=True).numpy()[:, :, 0]
        close(got, t, np.float32, ulps(np.float32, D))


@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] != "INTERP"])
def test_flash_decode_reads_the_length_on_the_device(be):
    """The same call with the same arguments follows the counter (advanced by a kernel), per
    batch row with a [batch] array; lengths outside 0..max_len give NaN rows."""
    b = dev(be)
    q = rng.standard_normal((2, 4, 32)).astype(np.float16)
    kc, vc = (rng.standard_normal((2, 1, 40, 32)).astype(np.float32) for _ in range(2))
    qd, kd, vd = (tk.asarray(x, backend=b) for x in (q, kc, vc))
    cnt = llm.new_counter(3, backend=b)
    out = tk.empty(q.shape, np.float16, backend=b)
    for n in (3, 4, 5):
        llm.flash_decode(qd, kd, vd, cnt, out=out, splits=2)
        close(get(out), dec_ref(q, kc, vc, n), np.float16)
        llm.counter_add(cnt)
    lens = tk.asarray(np.array([7, 40], np.int32), backend=b)
    got = get(llm.flash_decode(qd, kd, vd, lens))
    close(got[0], dec_ref(q, kc, vc, 7)[0], np.float16)
    close(got[1], dec_ref(q, kc, vc, 40)[1], np.float16)
    for bad in ([-1, 5], [41, 5]):
        for sp in (1, 3):
            got = get(llm.flash_decode(qd, kd, vd, tk.asarray(np.array(bad, np.int32), backend=b), splits=sp))
            assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()


@pytest.mark.parametrize("be", backends())
def test_flash_decode_takes_a_0d_length(be):
    """A 0-d kv_len is a count too: a 0-d host array (NumPy, torch) is its int, a 0-d device
    array is read in the kernels like a [1] counter (both were 'shape () should be (1,)')."""
    b = dev(be)
    q = rng.standard_normal((1, 2, 8)).astype(np.float32)
    kc, vc = (rng.standard_normal((1, 1, 6, 8)).astype(np.float32) for _ in range(2))
    qd, kd, vd = (tk.asarray(x, backend=b) for x in (q, kc, vc))
    want = dec_ref(q, kc, vc, 4)
    for n in (np.array(4, np.int32), np.array(4, np.int64), tk.asarray(np.array(4, np.int32), backend=b)):
        close(get(llm.flash_decode(qd, kd, vd, n)), want, np.float32, ulps(np.float32, 8))
    if torch is not None:
        close(get(llm.flash_decode(qd, kd, vd, torch.tensor(4))), want, np.float32, ulps(np.float32, 8))
    with pytest.raises(ValueError, match="'kv_len'.*0-d float32"):
        llm.flash_decode(qd, kd, vd, np.array(4.0, np.float32))
    with pytest.raises(ValueError, match="'kv_len'"):
        llm.flash_decode(qd, kd, vd, np.array(7, np.int32))


def test_attention_errors_name_the_argument():
    q = np.zeros((1, 4, 3, 8), np.float32)
    kv = np.zeros((1, 2, 5, 8), np.float32)
    with pytest.raises(ValueError, match="'q'"):
        llm.flash_attention(q[0], kv, kv)
    with pytest.raises(ValueError, match="'k'.*multiple"):
        llm.flash_attention(q, np.zeros((1, 3, 5, 8), np.float32), np.zeros((1, 3, 5, 8), np.float32))
    with pytest.raises(ValueError, match="'v'"):
        llm.flash_attention(q, kv, kv[:, :, :4])
    with pytest.raises(ValueError, match="'v'"):
        llm.flash_attention(q, kv, kv.astype(np.float16))
    with pytest.raises(ValueError, match="'k'.*head_dim"):
        llm.flash_attention(q, kv[..., :4], kv[..., :4])
    with pytest.raises(ValueError, match="'scale'"):
        llm.flash_attention(q, kv, kv, scale="big")
    with pytest.raises(ValueError, match="'causal'"):
        llm.flash_attention(q, kv, kv, causal=None)
    with pytest.raises(ValueError, match="'q'.*head_dim"):
        z = np.zeros((1, 1, 1, 600), np.float32)
        llm.flash_attention(z, z, z)
    with pytest.raises(ValueError, match="'out'"):
        llm.flash_attention(q, kv, kv, out=np.zeros((1, 4, 3, 8), np.float16))
    qd = np.zeros((1, 4, 8), np.float32)
    with pytest.raises(ValueError, match="'kv_len'"):
        llm.flash_decode(qd, kv, kv, 6)
    with pytest.raises(ValueError, match="'kv_len'"):
        llm.flash_decode(qd, kv, kv, -1)              # (0 is no key: a zero row, test_ported_llm2)
    with pytest.raises(ValueError, match="'kv_len'"):
        llm.flash_decode(qd, kv, kv, np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="'kv_len'"):
        llm.flash_decode(qd, kv, kv, np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="'kv_len'"):
        llm.flash_decode(qd, kv, kv, 2.0)
    with pytest.raises(ValueError, match="'k_cache'"):
        llm.flash_decode(qd, kv[0], kv, 2)
    with pytest.raises(ValueError, match="'v_cache'"):
        llm.flash_decode(qd, kv, kv[:, :1], 2)
    with pytest.raises(ValueError, match="'splits'"):
        llm.flash_decode(qd, kv, kv, 2, splits=0)
    with pytest.raises(ValueError, match="'q'"):
        llm.flash_decode(q, kv, kv, 2)


@pytest.mark.parametrize("heads,kv_heads,d", [(12, 1, 512), (6, 3, 40), (5, 5, 16)])
def test_flash_decode_query_groups_per_item(heads, kv_heads, d):
    """On the host one item serves several query heads of a KV head (capped by the private
    array size: 12 heads of 512 -> 6 per item); every grouping matches NumPy."""
    q = rng.standard_normal((2, heads, d)).astype(np.float32)
    kc, vc = (rng.standard_normal((2, kv_heads, 70, d)).astype(np.float32) for _ in range(2))
    for n, sp in ((70, None), (33, 1), (1, 4)):
        close(llm.flash_decode(q, kc, vc, n, splits=sp), dec_ref(q, kc, vc, n), np.float32, ulps(np.float32, d))
    assert A._heads_per_item(tk.CPU(), 12, 512) == 6


def test_flash_decode_host_chunks_feed_the_threads():
    """On the host a long cache is split so the launch has at least PARALLEL_ITEMS items (the
    CPU runs fewer long-loop items on the calling thread: a batch-1 step with 8 KV heads ran
    on one thread); where that cannot be reached (short cache, one thread) it stays one pass."""
    from tinykernels.codegen.c import SERIAL_CUTOFF_LOOPS
    assert A.PARALLEL_ITEMS == SERIAL_CUTOFF_LOOPS
    hc = A._host_decode_chunks
    assert hc(2, 8, 8192) == 8                      # 64 items of 1024 keys
    assert hc(2, 8, 1024) == 1                      # 4 chunks of 256 keys are 32 items: serial anyway
    assert hc(2, 8, 512) == 1 and hc(2, 8, 64) == 1 # short caches: one pass, no merge
    assert hc(1, 8, 8192) == 1                      # one thread: one pass
    assert hc(16, 4, 8192) == 16                    # 4 items per thread and >= 64 items
    assert hc(2, 64, 8192) == 1 and hc(16, 64, 8192) == 1
    for th, rows, n in ((2, 8, 8192), (16, 3, 4000), (4, 1, 300)):
        nc = hc(th, rows, n)
        assert nc == 1 or (rows * nc >= A.PARALLEL_ITEMS and -(-n // nc) >= A.DECODE_CHUNK)


@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] in ("CPU", "CL")])
def test_attention_on_a_stream(be):
    """flash_decode's chunk and merge launches (with their per-call scratch) and
    flash_attention run in order on a stream, asynchronously to Python."""
    b = dev(be)
    s = b.stream()
    q = rng.standard_normal((1, 4, 32)).astype(np.float32)
    kc, vc = (rng.standard_normal((1, 2, 300, 32)).astype(np.float32) for _ in range(2))
    out = tk.zeros(q.shape, np.float32, backend=b)
    assert llm.flash_decode(*(tk.asarray(x, backend=b) for x in (q, kc, vc)), 250, out=out, splits=5,
                            stream=s) is out
    q4 = rng.standard_normal((1, 4, 20, 32)).astype(np.float32)
    o4 = tk.zeros(q4.shape, np.float32, backend=b)
    llm.flash_attention(*(tk.asarray(x, backend=b) for x in (q4, kc, vc)), causal=True, out=o4, stream=s)
    s.synchronize()
    close(get(out), dec_ref(q, kc, vc, 250), np.float32, 64)
    close(get(o4), ref(q4, kc, vc, True), np.float32, 64)


def test_attention_takes_strided_views():
    """[batch, seq, heads, head_dim] buffers seen as [batch, heads, seq, head_dim] (no copy),
    on the CPU backend, which takes strided NumPy views; out= may be strided too."""
    x = [rng.standard_normal((2, 9, 4, 16)).astype(np.float32) for _ in range(3)]
    q, k, v = (a.transpose(0, 2, 1, 3) for a in x)
    out = np.zeros((2, 9, 4, 16), np.float32).transpose(0, 2, 1, 3)
    assert llm.flash_attention(q, k, v, causal=True, out=out) is out
    close(out, ref(q, k, v, True), np.float32, 32)
    close(llm.flash_decode(q[:, :, 3], k, v, 5), dec_ref(q[:, :, 3], k, v, 5), np.float32, 32)


@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] in ("CL", "WEBGPU")])
@pytest.mark.parametrize("d", [256, 512])
def test_flash_attention_large_heads_on_gpu_backends(be, d):
    """head_dim 512 used to come back corrupted on WebGPU (lavapipe) in the workgroup shape:
    heads past 256 take the row shape on GPU backends."""
    b = dev(be)
    q, k, v = (rng.standard_normal((1, 2, 70, d)).astype(np.float32) for _ in range(3))
    o = llm.flash_attention(*(tk.asarray(x, backend=b) for x in (q, k, v)), causal=True)
    close(get(o), ref(q, k, v, True), np.float32, ulps(np.float32, d))
    qd = q[:, :, 0]
    close(get(llm.flash_decode(*(tk.asarray(x, backend=b) for x in (qd, k, v)), 70)), dec_ref(qd, k, v, 70),
          np.float32, ulps(np.float32, d))


@pytest.mark.parametrize("be", backends())
def test_nan_scores_propagate_as_in_the_unfused_softmax(be, shape_kind):
    """A NaN in a query row or a key makes the rows whose scores it reaches NaN, as
    softmax(q @ k^T) @ v computed in float64 does (``ref``); they were 0, the value of a row
    that sees no key, because the final ``acc / l`` tested ``l > 0``. A row that sees no key
    (causal, Sq > Sk) stays 0."""
    b = dev(be)
    D = 8
    q = rng.standard_normal((1, 2, 4, D)).astype(np.float32)
    k = rng.standard_normal((1, 2, 3, D)).astype(np.float32)
    v = rng.standard_normal((1, 2, 3, D)).astype(np.float32)
    q[0, 0, 1, 2] = np.nan                      # one query row of head 0
    k[0, 1, 2, 5] = np.nan                      # one key of head 1: every row that sees it
    for causal in (False, True):
        with np.errstate(invalid="ignore"):
            want = ref(q, k, v, causal)
        got = get(llm.flash_attention(*(tk.asarray(x, backend=b) for x in (q, k, v)), causal=causal))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        fin = ~np.isnan(want)
        close(got[fin], want[fin], np.float32, ulps(np.float32, D))
    assert np.isnan(want[0, 0, 1]).all() and not np.isnan(want[0, 0, 0]).any()
    assert np.isnan(want[0, 1, 3]).all() and not np.isnan(want[0, 1, 0]).any()   # causal
    kc = rng.standard_normal((1, 1, 6, D)).astype(np.float32)
    vc = rng.standard_normal((1, 1, 6, D)).astype(np.float32)
    kc[0, 0, 1, 3] = np.nan
    qd = rng.standard_normal((1, 2, D)).astype(np.float32)
    for splits in (None, 1, 2):
        dd = llm.flash_decode(*(tk.asarray(x, backend=b) for x in (qd, kc, vc)), 4, splits=splits)
        assert np.isnan(get(dd)).all(), splits
        ok = llm.flash_decode(*(tk.asarray(x, backend=b) for x in (qd, kc[:, :, 2:], vc[:, :, 2:])), 4,
                              splits=splits)
        close(get(ok), dec_ref(qd, kc[:, :, 2:], vc[:, :, 2:], 4), np.float32, ulps(np.float32, D))


@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] in ("CPU", "CL", "WEBGPU")])
@pytest.mark.parametrize("kind", ["rows", "tiles"])
def test_flash_attention_key_chunks_are_bit_exact(be, kind, monkeypatch):
    """flash_attention split into launches of a few keys each (``KEYS_PER_ITEM``, what WebGPU
    does for long sequences) continues each row's online softmax from the previous launch's
    (m, l, acc) over the same tiles: bit for bit the one-launch result, causal or not, GQA,
    rows that see no key (causal Sq > Sk) and chunks past a causal row's last key."""
    b = dev(be)
    monkeypatch.setattr(A, "SHAPE", kind)
    q = rng.standard_normal((2, 4, 45, 24)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 40, 24)).astype(np.float32) for _ in range(2))
    qd, kd, vd = (tk.asarray(x, backend=b) for x in (q, k, v))
    for causal in (False, True):
        whole = get(llm.flash_attention(qd, kd, vd, causal=causal))
        close(whole, ref(q, k, v, causal), np.float32, ulps(np.float32, 24))
        for per in (16, 32):
            monkeypatch.setattr(A, "KEYS_PER_ITEM", per)
            np.testing.assert_array_equal(get(llm.flash_attention(qd, kd, vd, causal=causal)), whole)
        monkeypatch.setattr(A, "KEYS_PER_ITEM", None)


@needs_torch
@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] == "WEBGPU"])
@pytest.mark.parametrize("kind", [None, "rows"])
def test_flash_attention_long_keys_on_webgpu(be, kind, monkeypatch):
    """lavapipe stops a work item's loops after 65535 back edges in total (docs/webgpu.md):
    Sk = 1000 at head_dim 64 (rows) and 600 at head_dim 128 (tiles) came back with errors up
    to 1e32 or NaN. flash_attention now visits the keys in launches of at most
    ``_keys_per_item`` keys each (1000 keys: 6 launches at head_dim 64)."""
    b = dev(be)
    monkeypatch.setattr(A, "SHAPE", kind)
    for H, KH, SQ, SK, D, causal in ((4, 2, 6, 1000, 64, False), (2, 1, 5, 600, 128, True),
                                     (2, 2, 3, 300, 512, True)):
        assert A._key_chunks(b, D, SK, 16) < SK
        q = rng.standard_normal((1, H, SQ, D)).astype(np.float32)
        k, v = (rng.standard_normal((1, KH, SK, D)).astype(np.float32) for _ in range(2))
        got = get(llm.flash_attention(*(tk.asarray(x, backend=b) for x in (q, k, v)), causal=causal))
        close(got, ref(q, k, v, causal), np.float32, ulps(np.float32, D))
        # (torch's is_causal aligns the mask top-left when Sq != Sk: pass ours, bottom-right)
        mask = np.arange(SK)[None, :] <= np.arange(SQ)[:, None] + SK - SQ if causal else np.ones((SQ, SK), bool)
        t = torch.nn.functional.scaled_dot_product_attention(
            *(torch.tensor(x.astype(np.float64)) for x in (q, k, v)), attn_mask=torch.tensor(mask),
            enable_gqa=True).numpy()
        close(got, t, np.float32, ulps(np.float32, D))


@pytest.mark.parametrize("be", [p for p in backends() if p.values[0] == "WEBGPU"])
def test_flash_decode_long_cache_large_heads_on_webgpu(be):
    """flash_decode's WebGPU chunks (at most LOOP_BUDGET // (2 * head_dim + 40) keys: 30 at
    head_dim 512) keep each work item below lavapipe's loop limit, so long caches need no
    change there: 2000 keys, the length device-resident per batch row, GQA. (64-key chunks
    passed the limit once tk.fma was emulated and NIR stopped unrolling the dot product's
    lanes: rows of 1e35 and NaN, the output left unwritten.)"""
    b = dev(be)
    B, H, KH, L, D = 2, 4, 2, 2000, 512
    q = rng.standard_normal((B, H, D)).astype(np.float32)
    kc, vc = (rng.standard_normal((B, KH, L, D)).astype(np.float32) for _ in range(2))
    lens = tk.asarray(np.array([L - 1, 1500], np.int32), backend=b)
    got = get(llm.flash_decode(*(tk.asarray(x, backend=b) for x in (q, kc, vc)), lens, offset=1))
    close(got[0], dec_ref(q, kc, vc, L)[0], np.float32, ulps(np.float32, D))
    close(got[1], dec_ref(q, kc, vc, 1501)[1], np.float32, ulps(np.float32, D))
