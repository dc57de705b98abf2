"""``tk.dot_i8`` / ``tk.dot_u4i8``: block byte dot products into eight exact int32 lanes (or a
scaled float32 accumulation), on every backend.

Checked bit for bit against NumPy (int64 products, lanes of four) with the edge bytes
-128/127/0/255 on both sides, 2-D operands indexed by a tuple, int8 and uint8 arrays, the
``zero`` offset of 4-bit values, and the float form ``out[l] = fma(lane, scale, out[l])``;
on the CPU each SIMD level (VNNI, AVX2, scalar C: ``TK_CPU_BYTEDOT``) in its own process;
debug kernels run the reference loop (bounds checked); the CUDA source compiles with NVRTC;
bad arguments are a CompileError at the user's line."""
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk

from llm_helpers import backends, compile_error_at_line, get, run_at_bytedot_level

HERE = Path(__file__).resolve().parent


@tk.kernel
def lanes_i8(out, a: tk.Const, b: tk.Const, n: tk.constexpr):
    """Row ``r`` of the 2-D ``a`` times the same bytes of the 1-D ``b``: lanes into ``out``."""
    r = tk.index()
    p = tk.private(tk.int32, (16,))
    tk.dot_i8(p, a, (r, 0), b, r * n, n)
    for l in range(n // 4):
        out[r * (n // 4) + l] = p[l]


@tk.kernel
def lanes_u4(out, a: tk.Const, b: tk.Const, zero: tk.constexpr):
    r = tk.index()
    p = tk.private(tk.int32, (8,))
    tk.dot_u4i8(p, a, r * 16, b, (r, 0), 32, zero=zero)
    for l in range(8):
        out[r * 8 + l] = p[l]


@tk.kernel
def scaled(out, a: tk.Const, b: tk.Const, s: tk.Const, u4: tk.constexpr):
    """Row ``r``: ``acc[l] = fma(lane_l(block t), s[t], acc[l])`` over the row's blocks, the
    lanes then stored (the shape of the quantized GEMV)."""
    r = tk.index()
    acc = tk.private(tk.float32, (8,))
    for l in range(8):
        acc[l] = tk.float32(0.5)
    for t in range(s.shape[0]):
        if u4:
            tk.dot_u4i8(acc, a, (r, 16 * t), b, 32 * t, 32, s[t], 8)
        else:
            tk.dot_i8(acc, a, (r, 32 * t), b, 32 * t, 32, scale=s[t])
    for l in range(8):
        out[r, l] = acc[l]


EDGE = np.array([-128, 127, 0, -1, 1, -128, 127, -127], np.int8)


def _bytes(rng, shape, dtype=np.uint8):
    v = rng.integers(0, 256, shape).astype(np.uint8)
    flat = v.reshape(-1)
    flat[:64] = np.tile(EDGE.view(np.uint8), 8)       # -128/127/0/255 against each other
    return v.view(dtype) if dtype == np.int8 else v


def _lanes(vals_a, vals_b):
    """Lanes of four of the int64 products ``vals_a * vals_b`` (last axis)."""
    p = vals_a.astype(np.int64) * vals_b.astype(np.int64)
    return p.reshape(*p.shape[:-1], -1, 4).sum(-1)


def _nibbles(a16, zero):
    """The 32 values of 16 bytes (last axis): low nibbles, then high nibbles, minus ``zero``."""
    a16 = a16.astype(np.int64)
    return np.concatenate([a16 & 15, a16 >> 4], -1) - zero


def _fma32(a, b, c):
    return (np.float64(1) * a * b + c).astype(np.float32)


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("n", [32, 64])
@pytest.mark.parametrize("bdtype", [np.int8, np.uint8])
def test_dot_i8_lanes_against_numpy(name, n, bdtype):
    be = tk.backend(name)
    rng = np.random.default_rng(n)
    rows = 5
    a = _bytes(rng, (rows, n))
    b = _bytes(rng, (rows * n,), bdtype)
    b[:8] = np.array([-128, -128, 127, 0, 255 - 256, 1, -128, 127], np.int64).astype(np.int8).view(b.dtype)
    out = tk.zeros(rows * n // 4, tk.int32, backend=be)
    lanes_i8(be)(out, tk.asarray(a, backend=be), tk.asarray(b, backend=be), n, ndrange=rows)
    want = _lanes(a.view(np.int8), b.view(np.int8).reshape(rows, n)).reshape(-1)
    np.testing.assert_array_equal(get(out), want)


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("zero", [0, 8, 15])
def test_dot_u4i8_lanes_against_numpy(name, zero):
    be = tk.backend(name)
    rng = np.random.default_rng(7 + zero)
    rows = 6
    a = _bytes(rng, (rows * 16,))
    a[:4] = [0x00, 0xFF, 0xF0, 0x0F]
    b = _bytes(rng, (rows, 32), np.int8)
    b[0, :] = -128
    out = tk.zeros(rows * 8, tk.int32, backend=be)
    lanes_u4(be)(out, tk.asarray(a, backend=be), tk.asarray(b, backend=be), zero, ndrange=rows)
    want = _lanes(_nibbles(a.reshape(rows, 16), zero), b).reshape(-1)
    np.testing.assert_array_equal(get(out), want)


@tk.kernel
def scaled_private(out, a: tk.Const, b: tk.Const, s: tk.Const, u4: tk.constexpr, P: tk.constexpr):
    """:func:`scaled` with the scales read from a private float32 array of ``P`` elements,
    refilled from ``s`` every ``P`` blocks (with P a multiple of 8 the C backend permutes each
    scale out of the array's group of eight; otherwise it broadcasts the value)."""
    r = tk.index()
    acc = tk.private(tk.float32, (8,))
    sp = tk.private(tk.float32, (P,))
    for l in range(8):
        acc[l] = tk.float32(0.5)
    for t in range(s.shape[0]):
        if t % P == 0:
            for k in range(P):
                sp[k] = s[t + k] if t + k < s.shape[0] else tk.float32(0)
        if u4:
            tk.dot_u4i8(acc, a, (r, 16 * t), b, 32 * t, 32, sp[t % P], 8)
        else:
            tk.dot_i8(acc, a, (r, 32 * t), b, 32 * t, 32, scale=sp[t % P])
    for l in range(8):
        out[r, l] = acc[l]


def _scaled_ref(a, b, s, u4):
    rows, nb = a.shape[0], s.size
    acc = np.full((rows, 8), 0.5, np.float32)
    for t in range(nb):
        if u4:
            lanes = _lanes(_nibbles(a[:, 16 * t:16 * t + 16], 8), b[32 * t:32 * t + 32].view(np.int8)[None])
        else:
            lanes = _lanes(a[:, 32 * t:32 * t + 32].view(np.int8), b[32 * t:32 * t + 32].view(np.int8)[None])
        acc = _fma32(lanes.astype(np.float32), s[t], acc)
    return acc


def _scaled_ref64(a, b, s, u4):
    """The float64 value of the accumulation and the sum of its terms' magnitudes."""
    ref, mag = np.full((a.shape[0], 8), 0.5), np.full((a.shape[0], 8), 0.5)
    for t in range(s.size):
        if u4:
            lanes = _lanes(_nibbles(a[:, 16 * t:16 * t + 16], 8), b[32 * t:32 * t + 32].view(np.int8)[None])
        else:
            lanes = _lanes(a[:, 32 * t:32 * t + 32].view(np.int8), b[32 * t:32 * t + 32].view(np.int8)[None])
        ref += lanes * np.float64(s[t])
        mag += np.abs(lanes * np.float64(s[t]))
    return ref, mag


def _scaled_case(rng, u4, nb=5, rows=7):
    a = _bytes(rng, (rows, (16 if u4 else 32) * nb))
    b = _bytes(rng, (32 * nb,), np.int8)
    s = (rng.standard_normal(nb) * np.exp(rng.uniform(-3, 3, nb))).astype(np.float32)
    return a, b, s


@tk.kernel
def started(out, lanes, a: tk.Const, b: tk.Const, c: tk.Const, s: tk.Const, u4: tk.constexpr):
    """Row ``r`` with ``start=``: the int32 lanes of its first 64 values (``dot_i8``, two steps)
    or first block (``dot_u4i8``, ``zero=3``) from ``c[0 ..]`` into ``lanes``; the scaled
    accumulation over its blocks, block ``t``'s lanes from ``c[8 t ..]`` (``zero=8``), into
    ``out``."""
    r = tk.index()
    p = tk.private(tk.int32, (16,))
    acc = tk.private(tk.float32, (8,))
    for l in range(16):
        p[l] = 0
    for l in range(8):
        acc[l] = tk.float32(0.5)
    if u4:
        tk.dot_u4i8(p, a, (r, 0), b, 0, 32, zero=3, start=(c, 0))
    else:
        tk.dot_i8(p, a, (r, 0), b, 0, 64, start=(c, 0))
    for t in range(s.shape[0]):
        if u4:
            tk.dot_u4i8(acc, a, (r, 16 * t), b, 32 * t, 32, s[t], 8, start=(c, 8 * t))
        else:
            tk.dot_i8(acc, a, (r, 32 * t), b, 32 * t, 32, scale=s[t], start=(c, 8 * t))
    for l in range(16):
        lanes[r, l] = p[l]
    for l in range(8):
        out[r, l] = acc[l]


def _started_case(rng, u4):
    a, b, s = _scaled_case(rng, u4)
    c = rng.integers(-2**20, 2**20, 8 * s.size).astype(np.int32)
    return a, b, c, s


def _started_ref(a, b, c, s, u4):
    """(lanes, out) of :func:`started` in NumPy."""
    if u4:
        lanes = _lanes(_nibbles(a[:, :16], 3), b[:32].view(np.int8)[None]) + c[:8]
        lanes = np.concatenate([lanes, np.zeros_like(lanes)], 1)
    else:
        lanes = _lanes(a[:, :64].view(np.int8), b[:64].view(np.int8)[None]) + c[:16]
    acc = np.full((a.shape[0], 8), 0.5, np.float32)
    for t in range(s.size):
        if u4:
            lt = _lanes(_nibbles(a[:, 16 * t:16 * t + 16], 8), b[32 * t:32 * t + 32].view(np.int8)[None])
        else:
            lt = _lanes(a[:, 32 * t:32 * t + 32].view(np.int8), b[32 * t:32 * t + 32].view(np.int8)[None])
        acc = _fma32((lt + c[8 * t:8 * t + 8]).astype(np.float32), s[t], acc)
    return lanes, acc


def _run_started(be, u4, rng):
    a, b, c, s = _started_case(rng, u4)
    out = tk.zeros((a.shape[0], 8), tk.float32, backend=be)
    lanes = tk.zeros((a.shape[0], 16), tk.int32, backend=be)
    started(be)(out, lanes, *(tk.asarray(v, backend=be) for v in (a, b, c, s)), u4, ndrange=a.shape[0])
    want_lanes, want = _started_ref(a, b, c, s, u4)
    return get(lanes), want_lanes, get(out), want


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("u4", [False, True])
def test_start_lanes_begin_at_the_given_values(name, u4):
    """``start=(c, k)``: lane ``l`` starts at ``c[k + l]`` (int32 and float forms, with and
    without ``zero``; ``dot_i8`` over two steps takes ``c[k + 8 ..]`` for the second)."""
    lanes, want_lanes, out, want = _run_started(tk.backend(name), u4, np.random.default_rng(9 + u4))
    np.testing.assert_array_equal(lanes, want_lanes)
    if name != "WEBGPU":
        np.testing.assert_array_equal(out, want)
    else:
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())

@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("u4", [False, True])
def test_scaled_accumulation_is_one_fma_per_lane_and_block(name, u4):
    """The float form rounds once per lane and block, in block order: bit for bit (WebGPU's
    ``fma`` may round the product first, as ``tk.fma`` there: within that bound)."""
    be = tk.backend(name)
    a, b, s = _scaled_case(np.random.default_rng(3 + u4), u4)
    out = tk.zeros((a.shape[0], 8), tk.float32, backend=be)
    scaled(be)(out, *(tk.asarray(v, backend=be) for v in (a, b, s)), u4, ndrange=a.shape[0])
    if name != "WEBGPU":
        np.testing.assert_array_equal(get(out), _scaled_ref(a, b, s, u4))
        return
    ref, mag = _scaled_ref64(a, b, s, u4)
    assert (np.abs(get(out) - ref) <= 2 * (s.size + 1) * 2.0**-24 * mag).all()


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("u4", [False, True])
@pytest.mark.parametrize("P", [8, 12, 16])
def test_scale_read_from_a_private_array_is_the_same_fma(name, u4, P):
    """A scale that is an element of a private float32 array (the GEMV's chunk of block
    scales; on the CPU permuted out of the array's group of eight when its length is a
    multiple of 8, else broadcast) gives the bits of :func:`scaled` (19 blocks: groups 0
    and 1 of a 16-array, a partly filled last refill)."""
    be = tk.backend(name)
    a, b, s = _scaled_case(np.random.default_rng(7 + u4 + P), u4, nb=19, rows=5)
    out = tk.zeros((a.shape[0], 8), tk.float32, backend=be)
    scaled_private(be)(out, *(tk.asarray(v, backend=be) for v in (a, b, s)), u4, P, ndrange=a.shape[0])
    if name != "WEBGPU":
        np.testing.assert_array_equal(get(out), _scaled_ref(a, b, s, u4))
        return
    ref, mag = _scaled_ref64(a, b, s, u4)
    assert (np.abs(get(out) - ref) <= 2 * (s.size + 1) * 2.0**-24 * mag).all()


def test_cpu_source_permutes_a_private_scale_out_of_its_group():
    """The CPU source takes a scale read from a private array of 8m floats as that array's
    element by ``TK_BD_SCALE_AT`` (one permute); a scale from an array of another length or
    from a global array is a broadcast value (``TK_BD_SCALE``)."""
    a, b, s = _scaled_case(np.random.default_rng(5), True)
    out = np.zeros((a.shape[0], 8), np.float32)
    for P, want in ((8, True), (16, True), (12, False)):
        src = scaled_private.source(tk.CPU(), out, a, b, s, True, P, ndrange=a.shape[0])
        assert ("tk_dot_u4i8_acc(&" in src) and (", TK_BD_SCALE_AT(&" in src) == want, P
    src = scaled.source(tk.CPU(), out, a, b, s, True, ndrange=a.shape[0])
    assert ", TK_BD_SCALE_AT(&" not in src and ", TK_BD_SCALE(" in src


def test_cpu_source_calls_the_simd_helpers_and_debug_runs_the_loop():
    a, b, s = _scaled_case(np.random.default_rng(5), True)
    out = np.zeros((a.shape[0], 8), np.float32)
    src = scaled.source(tk.CPU(), out, a, b, s, True, ndrange=a.shape[0])
    assert "tk_dot_u4i8_acc(&" in src and "vpdpbusd" in src
    dbg = scaled.source(tk.CPU(debug=True), out, a, b, s, True, ndrange=a.shape[0])
    assert "tk_dot_u4i8_acc(&" not in dbg and "tk_oob(" in dbg
    scaled(tk.CPU(debug=True))(out, a, b, s, True, ndrange=a.shape[0])
    np.testing.assert_array_equal(out, _scaled_ref(a, b, s, True))


_LEVEL_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {here!r})
import test_dot_bytes as t
rng = np.random.default_rng(11)
res = []
for u4 in (False, True):
    a, b, s = t._scaled_case(rng, u4, nb=9, rows=13)
    out = np.zeros((a.shape[0], 8), np.float32)
    t.scaled(t.tk.CPU())(out, a, b, s, u4, ndrange=a.shape[0])
    res.append(bool(np.array_equal(out, t._scaled_ref(a, b, s, u4))))
a = t._bytes(rng, (3, 64)); b = t._bytes(rng, (3 * 64,), np.int8)
out = np.zeros(3 * 16, np.int32)
t.lanes_i8(t.tk.CPU())(out, a, b, 64, ndrange=3)
res.append(bool(np.array_equal(out, t._lanes(a.view(np.int8), b.reshape(3, 64)).reshape(-1))))
for u4 in (False, True):
    lanes, want_lanes, out, want = t._run_started(t.tk.CPU(), u4, rng)
    res.append(bool(np.array_equal(lanes, want_lanes) and np.array_equal(out, want)))
for u4 in (False, True):
    a, b, s = t._scaled_case(rng, u4, nb=19, rows=5)
    out = np.zeros((a.shape[0], 8), np.float32)
    t.scaled_private(t.tk.CPU())(out, a, b, s, u4, 16, ndrange=a.shape[0])
    res.append(bool(np.array_equal(out, t._scaled_ref(a, b, s, u4))))
print("RESULT", res)
"""


@pytest.mark.parametrize("level", ["c", "avx2", "vnni"])
def test_every_cpu_level_gives_the_same_bits(level, tmp_path):
    """``TK_CPU_BYTEDOT`` caps the level chosen when the kernel's library loads (a new
    process each): the scalar C lanes, AVX2, VNNI (where the CPU has it) agree bit for bit."""
    out = run_at_bytedot_level(_LEVEL_SCRIPT, level, tmp_path)
    assert "RESULT [True, True, True, True, True, True, True]" in out, out


def test_cuda_source_compiles_with_nvrtc():
    from tinykernels.runtime import cuda as rt
    ok, why = rt.nvrtc_available()
    if not ok:
        pytest.skip(f"NVRTC unavailable: {why}")
    a, b, s = _scaled_case(np.random.default_rng(5), True)
    out = np.zeros((a.shape[0], 8), np.float32)
    for u4 in (False, True):
        src = rt.cuda_source(scaled, out, a, b, s, u4, ndrange=a.shape[0])
        assert rt.compile_cuda(src, "sm_80", "scaled", cache=False)[:4] == b"\x7fELF"


def _compile_error(body, match):
    src = f"import tinykernels as tk\n@tk.kernel\ndef bad(out, a, b, f):\n    p = tk.private(tk.int32, (8,))\n    {body}\n"
    args = (np.zeros(8, np.int32), np.zeros(64, np.uint8), np.zeros(64, np.int8), np.zeros(64, np.float32))
    compile_error_at_line(src, HERE / "_dot_bytes_bad_kernel.py", args, match, 5)


@pytest.mark.parametrize("body, match", [
    ("tk.dot_i8(p, a, 0, b, 0, 48)", "multiple of 32"),
    ("tk.dot_u4i8(p, a, 0, b, 0, 64)", "must be 32"),
    ("tk.dot_u4i8(p, a, 0, b, 0, 32, zero=16)", "0..15"),
    ("tk.dot_i8(p, f, 0, b, 0, 32)", "int8 or uint8"),
    ("tk.dot_i8(out, a, 0, b, 0, 32, 2.0)", "takes no scale"),
    ("tk.dot_i8(p, a, (0, 0), b, 0, 32)", "must index an element"),
    ("tk.dot_i8(p, a, 0, b, 0, out[0])", "compile-time integer"),
    ("tk.dot_i8(p, a, 0, b, 0, 64)", "8 elements"),
    ("tk.dot_i8(p, a, 0, b, 0, 32, bogus=1)", "unexpected keyword"),
    ("tk.dot_i8(p, a, 0, b, 0, 32, start=(f, 0))", "start must be"),
    ("tk.dot_u4i8(p, a, 0, b, 0, 32, start=p)", "start must be"),
])
def test_bad_arguments_are_compile_errors_at_the_line(body, match):
    _compile_error(body, match)
