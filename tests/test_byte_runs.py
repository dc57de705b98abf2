"""Byte runs as float32: ``tk.lookup_u4`` (the 4-bit values of a run of bytes, in the GGUF
Q4_0 layout: low nibbles, then high nibbles, replaced by the entries of a 16-entry float32
table) and ``tk.load_i8`` (the bytes as signed 8-bit integers, the GGUF Q8_0 layout), both
optionally times a scale, on every backend.

Checked bit for bit against NumPy (``table[v] * s``, ``float32(int8) * s`` in float32) for every byte value, int8 and
uint8 arrays, a 2-D array indexed by a tuple at an odd offset, run lengths that exercise the
C backend's 16- and 8-wide steps and its scalar remainder, a private and a global table, and
special values (signed zeros, infinities, subnormal products); on the CPU each SIMD level
(AVX-512 ``vpermps``, AVX2 two permutes and a blend, plain C: ``TK_CPU_BYTEDOT``) in its own
process; debug kernels run the reference loop (bounds checked); the CUDA source compiles with
NVRTC; bad arguments are a CompileError at the user's line."""
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk

from llm_helpers import backends, compile_error_at_line, get, run_at_bytedot_level

HERE = Path(__file__).resolve().parent
LENGTHS = (16, 7, 24, 40)       # one AVX-512 step; remainder only; 16 + 8; 2 x 16 + 8


@tk.kernel
def looked_up(out, a: tk.Const, tab: tk.Const, s: tk.Const, n: tk.constexpr, scaled: tk.constexpr,
              private_table: tk.constexpr):
    """Row ``r``: the ``2 n`` values of ``a[r, 3 ..]`` looked up in ``tab`` (copied into a
    private table, or read from the global one), times ``s[r]`` when ``scaled``."""
    r = tk.index()
    t = tk.private(tk.float32, (16,))
    w = tk.private(tk.float32, (2 * n,))
    for v in range(16):
        t[v] = tab[v]
    if private_table:
        if scaled:
            tk.lookup_u4(w, t, a, (r, 3), n, s[r])
        else:
            tk.lookup_u4(w, t, a, (r, 3), n)
    else:
        if scaled:
            tk.lookup_u4(w, tab, a, (r, 3), n, scale=s[r])
        else:
            tk.lookup_u4(w, tab, a, (r, 3), n)
    for k in range(2 * n):
        out[r, k] = w[k]


@tk.kernel
def loaded(out, a: tk.Const, s: tk.Const, n: tk.constexpr, scaled: tk.constexpr):
    """Row ``r``: the ``n`` bytes of ``a[r, 3 ..]`` as signed, times ``s[r]`` when ``scaled``."""
    r = tk.index()
    w = tk.private(tk.float32, (n,))
    if scaled:
        tk.load_i8(w, a, (r, 3), n, scale=s[r])
    else:
        tk.load_i8(w, a, (r, 3), n)
    for k in range(n):
        out[r, k] = w[k]


def _case(rng, n, dtype=np.uint8, rows=20):
    a = rng.integers(0, 256, (rows, n + 5)).astype(np.uint8)
    flat = a[:, 3:3 + n].reshape(-1)
    m = min(256, flat.size)
    flat[:m] = np.arange(m, dtype=np.uint8)          # every byte value where the run is long enough
    a[:, 3:3 + n] = flat.reshape(rows, n)
    tab = rng.standard_normal(16).astype(np.float32)
    tab[:6] = [0.0, -0.0, np.inf, -np.inf, 1e-30, -3e-39]
    s = rng.standard_normal(rows).astype(np.float32)
    s[:3] = [1e-10, -0.0, 2.0 ** 100]
    return (a.view(np.int8) if dtype == np.int8 else a), tab, s


def _ref(a, tab, s, n, scaled):
    u = a.view(np.uint8)[:, 3:3 + n].astype(np.int64)
    w = tab[np.concatenate([u & 15, u >> 4], -1)]
    if scaled:
        with np.errstate(all="ignore"):
            w = w * s[:, None]
    return w.astype(np.float32)


def _ref_i8(a, s, n, scaled):
    w = a.view(np.int8)[:, 3:3 + n].astype(np.float32)
    if scaled:
        with np.errstate(all="ignore"):
            w = w * s[:, None]
    return w.astype(np.float32)


def _run_i8(be, n, dtype, scaled, rng):
    a, _, s = _case(rng, n, dtype)
    out = tk.zeros((a.shape[0], n), tk.float32, backend=be)
    loaded(be)(out, tk.asarray(a, backend=be), tk.asarray(s, backend=be), n, scaled, ndrange=a.shape[0])
    return get(out), _ref_i8(a, s, n, scaled)


def _run(be, n, dtype, scaled, private_table, rng):
    a, tab, s = _case(rng, n, dtype)
    out = tk.zeros((a.shape[0], 2 * n), tk.float32, backend=be)
    looked_up(be)(out, tk.asarray(a, backend=be), tk.asarray(tab, backend=be), tk.asarray(s, backend=be),
                  n, scaled, private_table, ndrange=a.shape[0])
    return get(out), _ref(a, tab, s, n, scaled)


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("scaled", [False, True])
def test_lookup_against_numpy(name, n, scaled):
    be = tk.backend(name)
    rng = np.random.default_rng(n + 100 * scaled)
    for dtype, private_table in ((np.uint8, True), (np.int8, False)):
        got, want = _run(be, n, dtype, scaled, private_table, rng)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", backends() + ["INTERP:CHECK"])
@pytest.mark.parametrize("n", LENGTHS + (32,))
@pytest.mark.parametrize("scaled", [False, True])
def test_load_i8_against_numpy(name, n, scaled):
    be = tk.backend(name)
    rng = np.random.default_rng(n + 100 * scaled)
    for dtype in (np.uint8, np.int8):
        got, want = _run_i8(be, n, dtype, scaled, rng)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_cpu_source_calls_the_simd_helper_and_debug_runs_the_loop():
    rng = np.random.default_rng(5)
    a, tab, s = _case(rng, 16)
    out = np.zeros((a.shape[0], 32), np.float32)
    src = looked_up.source(tk.CPU(), out, a, tab, s, 16, True, True, ndrange=a.shape[0])
    assert "tk_lookup_u4(&" in src and "_mm512_permutexvar_ps" in src
    dbg = looked_up.source(tk.CPU(debug=True), out, a, tab, s, 16, True, True, ndrange=a.shape[0])
    assert "tk_lookup_u4(&" not in dbg and "tk_oob(" in dbg
    looked_up(tk.CPU(debug=True))(out, a, tab, s, 16, True, True, ndrange=a.shape[0])
    np.testing.assert_array_equal(out, _ref(a, tab, s, 16, True))
    out = np.zeros((a.shape[0], 16), np.float32)
    src = loaded.source(tk.CPU(), out, a, s, 16, True, ndrange=a.shape[0])
    assert "tk_load_i8(&" in src and "_mm512_cvtepi8_epi32" in src
    dbg = loaded.source(tk.CPU(debug=True), out, a, s, 16, True, ndrange=a.shape[0])
    assert "tk_load_i8(&" not in dbg and "tk_oob(" in dbg
    loaded(tk.CPU(debug=True))(out, a, s, 16, True, ndrange=a.shape[0])
    np.testing.assert_array_equal(out, _ref_i8(a, s, 16, True))


_LEVEL_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {here!r})
import test_byte_runs as t
rng = np.random.default_rng(11)
res = []
for n in t.LENGTHS:
    for dtype, scaled, private_table in ((np.uint8, True, True), (np.int8, False, False), (np.uint8, False, True)):
        got, want = t._run(t.tk.CPU(), n, dtype, scaled, private_table, rng)
        res.append(bool(np.array_equal(got.view(np.uint32), want.view(np.uint32))))
    for dtype, scaled in ((np.int8, True), (np.uint8, False)):
        got, want = t._run_i8(t.tk.CPU(), n, dtype, scaled, rng)
        res.append(bool(np.array_equal(got.view(np.uint32), want.view(np.uint32))))
print("RESULT", all(res), len(res))
"""


@pytest.mark.parametrize("level", ["c", "avx2", "vnni"])
def test_every_cpu_level_gives_the_same_bits(level, tmp_path):
    """``TK_CPU_BYTEDOT`` caps the SIMD level the kernel is compiled for (a new process each):
    plain C, AVX2 (two table halves and a blend), AVX-512 (where the CPU has it) agree."""
    out = run_at_bytedot_level(_LEVEL_SCRIPT, level, tmp_path)
    assert f"RESULT True {5 * len(LENGTHS)}" in out, out


def test_cuda_source_compiles_with_nvrtc():
    from tinykernels.runtime import cuda as rt
    ok, why = rt.nvrtc_available()
    if not ok:
        pytest.skip(f"NVRTC unavailable: {why}")
    a, tab, s = _case(np.random.default_rng(5), 16)
    out = np.zeros((a.shape[0], 32), np.float32)
    src = rt.cuda_source(looked_up, out, a, tab, s, 16, True, True, ndrange=a.shape[0])
    assert rt.compile_cuda(src, "sm_80", "looked_up", cache=False)[:4] == b"\x7fELF"
    src = rt.cuda_source(loaded, out, a, s, 16, True, ndrange=a.shape[0])
    assert rt.compile_cuda(src, "sm_80", "loaded", cache=False)[:4] == b"\x7fELF"


@pytest.mark.parametrize("body, match", [
    ("tk.lookup_u4(w, t, f, 0, 16)", "int8 or uint8"),
    ("tk.lookup_u4(w, a, a, 0, 16)", "table must be a 1-D float32"),
    ("tk.lookup_u4(p, t, a, 0, 16)", "out must be a 1-D float32"),
    ("tk.lookup_u4(w, t, a, 0, 17)", "fewer than 2 n = 34"),
    ("tk.lookup_u4(w, t8, a, 0, 16)", "fewer than 16"),
    ("tk.lookup_u4(w, t, a, 0, 0)", "must be positive"),
    ("tk.lookup_u4(w, t, a, 0, out[0])", "compile-time integer"),
    ("tk.lookup_u4(w, t, a, (0, 0), 16)", "must index an element"),
    ("tk.lookup_u4(w, t, a, 0, 16, bogus=1)", "unexpected keyword"),
    ("tk.lookup_u4(w, t, a, 0, 16, f)", "where a number is expected"),
    ("tk.lookup_u4(f, t, a, 0, 16)", "read-only"),
    ("tk.load_i8(w, f, 0, 32)", "int8 or uint8"),
    ("tk.load_i8(p, a, 0, 32)", "out must be a 1-D float32"),
    ("tk.load_i8(w, a, 0, 33)", "fewer than n = 33"),
    ("tk.load_i8(w, a, 0, -1)", "must be positive"),
    ("tk.load_i8(w, a, 0, 32, 1.0, 2.0)", "takes 4 or 5 arguments"),
    ("tk.load_i8(w, a, 0, 32, sc=1.0)", "unexpected keyword"),
])
def test_bad_arguments_are_compile_errors_at_the_line(body, match):
    src = ("import tinykernels as tk\n@tk.kernel\ndef bad(out, a, f: tk.Const):\n"
           "    p = tk.private(tk.int32, (32,)); w = tk.private(tk.float32, (32,)); t = tk.private(tk.float32, (16,)); "
           "t8 = tk.private(tk.float32, (8,))\n"
           f"    {body}\n")
    args = (np.zeros(8, np.float32), np.zeros(64, np.uint8), np.zeros(64, np.float32))
    compile_error_at_line(src, HERE / "_byte_runs_bad_kernel.py", args, match, 5)
