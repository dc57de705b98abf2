"""The first CUDA fuzzer run on a GPU (H200, NVRTC 13.0): the causes of its mismatches, tested
without a GPU (brief cudafz24; scripts/gpu_diag.py checks them on one).

* float32 atomic add/sub flush subnormal operands and results on NVIDIA GPUs (PTX
  ``atom.add.f32``): kept (a CAS loop would cost every float32 atomic), documented, and the
  fuzzer compares CUDA against the interpreter run under that model;
* NVVM dropped the NaN guard in front of a float -> int C cast (undefined for a NaN): CUDA now
  converts through ``tk_f2{i,u}{32,64}`` (NaN 0, saturating);
* ptxas 13.0 dropped the sign extension after ``neg.s16``: int16 negation is ``tk_neg_i16``;
* ptxas turns ``selp.f32`` of -0.0 and +-1.0 into FSET.BF / I2F (+0.0): such a select of two
  constants is ``tk_selz`` (the bits selected in inline PTX);
* the reproducer writer wrote a non-finite np.float64 scalar as ``float('np.float64(-inf)')``.

The C helpers are also compiled with the host C compiler and checked value by value; the
NVRTC tests check the generated source and compile it for sm_80 and sm_90.
"""
import re
import subprocess

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.codegen import cuda as C
from tinykernels.runtime import nvrtc as rt
from tinykernels.runtime.compiler import find_compiler
from tinykernels.testing.fuzz import run as R
from tinykernels.testing.fuzz.case import ArgSpec, Case
from tinykernels.testing.fuzz.reproducer import _arr, _encode_scalar, _scalar  # noqa: F401 (eval'd)

NVRTC_OK, NVRTC_WHY = rt.nvrtc_available()
needs_nvrtc = pytest.mark.skipif(not NVRTC_OK, reason=f"NVRTC unavailable: {NVRTC_WHY}")
CC = find_compiler()
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")

SRC = '''
import tinykernels as tk


@tk.kernel
def neg16(out, x):
    i = tk.index()
    out[i, 0] = tk.int32(-x[i])
    out[i, 1] = tk.int32(0 - x[i])
    out[i, 2] = tk.int32(x[i] * -1)
    out[i, 3] = tk.int32(-x[i]) > 100
    out[i, 4] = tk.int32(abs(x[i]))


@tk.kernel
def nan_guard(out, acc, x):
    i = tk.index()
    v = x[i] + tk.float64(-1.0)
    out[i] = tk.int32(tk.clamp(v, -1073741824.0, 1073741824.0) if v == v else 0.0)
    tk.atomic_min(acc, 0, tk.int32(tk.clamp(v, -1073741824.0, 1073741824.0) if v == v else 0.0))


@tk.kernel
def negzero(A, B, c):
    i = tk.index()
    A[i] -= (-0.0 if c[i] else 1.0)
    B[i] = (-0.0 if c[i] else -1.0)


@tk.kernel
def f32_atomics(A, old, v, B, oldb):
    i = tk.index()
    old[i] = tk.atomic_add(A, (i, 0), v[i])
    oldb[i] = tk.atomic_sub(A, (i, 1), v[i])
    tk.atomic_min(A, (i, 2), v[i])
    tk.atomic_exchange(A, (i, 3), A[i, 3])
    tk.atomic_add(B, i, tk.float64(0.0))
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("h200") / "h200_kernels.py"
    path.write_text(SRC)
    ns = {"__name__": "h200_kernels", "__file__": str(path)}
    exec(compile(SRC, str(path), "exec"), ns)
    return ns


SUB = np.frombuffer(np.uint32(0x00400000).tobytes(), np.float32)[0]     # 2**-127
SUB2 = np.frombuffer(np.uint32(0x00200000).tobytes(), np.float32)[0]    # 2**-128 (the seeds' value)
TINY = np.finfo(np.float32).tiny                                          # 2**-126


def _bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


# --- int16 negation (seed 97001581) -----------------------------------------------------------

@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_int16_negation_wraps_like_numpy(kernels, dev):
    x = np.array([-32768, 32767, 5, -7, 0], np.int16)
    out = np.zeros((5, 5), np.int32)
    kernels["neg16"](tk.backend(dev))(out, x, ndrange=5)
    with np.errstate(over="ignore"):
        neg = (-x).astype(np.int32)                       # int16 wraps: -(-32768) is -32768
        ab = np.abs(x).astype(np.int32)                   # and abs(-32768) too
    np.testing.assert_array_equal(out, np.stack([neg, neg, neg, (neg > 100).astype(np.int32), ab], 1))


@needs_nvrtc
def test_int16_negation_is_tk_neg_i16_on_cuda(kernels):
    # fixed: ptxas-neg-s16
    src = kernels["neg16"].source("CUDA", np.zeros((5, 5), np.int32), np.zeros(5, np.int16), ndrange=5)
    body = src[src.index("tk_kernel("):]
    assert body.count("tk_neg_i16(") == 4, body          # -x, 0 - x, x * -1, and in the comparison
    assert body.count("tk_abs16_i16(") == 1 and "tk_abs_i16(" not in body, body
    assert "(int16_t)(-(" not in body
    for arch in ("sm_80", "sm_90"):
        rt.compile_cuda(src, arch, "neg16", cache=False)


# --- float -> int conversions (seed 97001945) --------------------------------------------------

@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_nan_guarded_conversion(kernels, dev):
    out, acc = np.full(3, 9, np.int32), np.array([19], np.uint32)
    kernels["nan_guard"](tk.backend(dev))(out, acc, np.array([np.nan, 5.0, -1e300]), ndrange=3)
    np.testing.assert_array_equal(out, [0, 4, -(2 ** 30)])
    assert acc[0] == 0                                   # min(19, 0, 4, 2**32 - 2**30)


@needs_nvrtc
def test_float_to_int_is_a_helper_on_cuda(kernels):
    # fixed: cuda-fptosi-guard
    src = kernels["nan_guard"].source("CUDA", np.zeros(3, np.int32), np.zeros(1, np.uint32), np.zeros(3),
                                      ndrange=3)
    body = src[src.index("tk_kernel("):]
    assert body.count("tk_f2i32_f64(") == 2, body
    assert not re.search(r"\(\(int32_t\)\(\(\(v_v", body), body
    for arch in ("sm_80", "sm_90"):
        rt.compile_cuda(src, arch, "nan_guard", cache=False)


@needs_nvrtc
def test_nan_guard_survives_nvvm(kernels):
    """The PTX NVRTC makes of the guarded conversion still tests for a NaN (before the fix NVVM
    deleted `v == v`: the PTX had only the clamp's setp.lt/gt in front of cvt.rzi)."""
    src = kernels["nan_guard"].source("CUDA", np.zeros(3, np.int32), np.zeros(1, np.uint32), np.zeros(3),
                                      ndrange=3)
    ptx = rt.compile_cuda(src, "compute_90", "nan_guard", cache=False).decode(errors="replace")
    assert ptx.count("cvt.rzi.s32.f64") == 2, ptx
    assert len(re.findall(r"setp\.(?:nan|num|equ|neu)\.f64", ptx)) >= 2, ptx


@needs_cc
def test_cuda_int16_helpers_compiled_on_the_host(tmp_path):
    """tk_neg_i16 and tk_abs16_i16 (plain C; the conversions are inline PTX) compiled by the
    host compiler, every 4681st int16 against NumPy's wrapping negation and abs."""
    header = C._HEADER.replace("#define TK_INLINE static __device__ __forceinline__", "#define TK_INLINE static inline")
    helpers = "\n".join(ln for ln in C._conversions().splitlines() if "asm(" not in ln)
    assert "tk_neg_i16" in helpers and "tk_abs16_i16" in helpers
    lines = [header, "#include <stdio.h>", helpers, "int main(void) {"]
    lines.append('    for (int x = -32768; x <= 32767; x += 4681) printf("%d ", (int)tk_neg_i16((int16_t)x));')
    lines.append('    printf("%d\\n", (int)tk_neg_i16((int16_t)32767));')
    lines.append('    for (int x = -32768; x <= 32767; x += 4681) printf("%d ", (int)tk_abs16_i16((int16_t)x));')
    lines.append('    printf("%d\\n", (int)tk_abs16_i16((int16_t)32767));\n    return 0;\n}')
    c = tmp_path / "helpers.c"
    c.write_text("\n".join(lines))
    exe = tmp_path / "helpers"
    subprocess.run(CC + ["-O2", "-o", str(exe), str(c)], check=True, capture_output=True, timeout=120)
    rows = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
    xs = np.array(list(range(-32768, 32768, 4681)) + [32767], np.int16)
    with np.errstate(over="ignore"):
        assert [int(t) for t in rows[0].split()] == (-xs).astype(np.int32).tolist()
        assert [int(t) for t in rows[1].split()] == np.abs(xs).astype(np.int32).tolist()


# --- a float select of -0.0 and +-1.0 (seed 97001365) -------------------------------------------

@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_negative_zero_select(kernels, dev):
    A, B, c = np.array([-0.0, -0.0, 5.0], np.float32), np.full(3, 7, np.float32), np.array([np.nan, 2, 0], np.float32)
    kernels["negzero"](tk.backend(dev))(A, B, c, ndrange=3)
    np.testing.assert_array_equal(_bits(A), _bits(np.array([0.0, 0.0, 4.0], np.float32)))   # -0.0 - -0.0 is +0.0
    np.testing.assert_array_equal(_bits(B), _bits(np.array([-0.0, -0.0, -1.0], np.float32)))


@needs_nvrtc
def test_constant_zero_select_is_tk_selz_on_cuda(kernels):
    # fixed: ptxas-selp-negzero
    src = kernels["negzero"].source("CUDA", np.zeros(3, np.float32), np.zeros(3, np.float32),
                                    np.zeros(3, np.float32), ndrange=3)
    body = src[src.index("tk_kernel("):]
    assert body.count("tk_selz_f64(") == 2, body
    assert "? -0.0 :" not in body
    assert re.search(r"TK_INLINE double tk_selz_f64\(bool c, double a, double b\) \{ .*selp\.b64", src)
    for arch in ("sm_80", "sm_90"):
        rt.compile_cuda(src, arch, "negzero", cache=False)


# --- float32 atomics: the flushing model of CUDA (seeds 97003314, 97200722, 97300038) ------------

def test_interpreter_models_flushing_float32_atomics(kernels):
    # fixed: cuda-f32-atomic-ftz
    b = tk.backend("INTERP")
    A0 = np.array([[SUB, SUB2, SUB, -SUB], [TINY, SUB2, 1.5, 3.0], [-SUB, SUB, 2.0, 0.0]], np.float32)
    v = np.array([0.0, np.float32(49283) * SUB2, -SUB], np.float32)

    def launch():
        A, old, oldb, B = A0.copy(), np.zeros(3, np.float32), np.zeros(3, np.float32), np.array([5e-324, 0.0, 1.0])
        kernels["f32_atomics"](b)(A, old, v, B, oldb, ndrange=3)
        return A, old, oldb, B

    A, old, oldb, B = launch()                           # the reference: exact
    with np.errstate(all="ignore"):
        assert _bits(A[:, 0]).tolist() == _bits(A0[:, 0] + v).tolist()
        assert _bits(A[:, 1]).tolist() == _bits(A0[:, 1] - v).tolist()
    with R.ftz_f32_atomics():
        F, fold, foldb, FB = launch()
    # row 0: 2**-127 + 0.0 -> +0.0; row 1: 2**-126 + 49283 * 2**-128 is normal; row 2: -2**-127 + -2**-127
    # is -2**-126 exactly, but the operands flush first -> -0.0 + -0.0 = -0.0
    assert _bits(F[:, 0]).tolist() == _bits(np.array([0.0, TINY + v[1], -0.0], np.float32)).tolist()
    # atomic_sub: 2**-128 - 0.0 -> +0.0; 2**-128 - 49283 * 2**-128 -> -(49283 * 2**-128) (seed 97300038's
    # value); 2**-127 - -2**-127 flushes both operands -> +0.0 - -0.0 = +0.0
    assert _bits(F[:, 1]).tolist() == _bits(np.array([0.0, -v[1], 0.0], np.float32)).tolist()
    assert float(F[1, 1]) == -1.4482972022893699e-34 and float(A[1, 1]) == -1.4482678149305993e-34
    np.testing.assert_array_equal(_bits(fold), _bits(old))          # the old values as stored
    np.testing.assert_array_equal(_bits(F[:, 2:]), _bits(A[:, 2:]))  # min / exchange: no flush
    np.testing.assert_array_equal(_bits(FB), _bits(B))                # float64: no flush
    G, *_ = launch()                                                   # and the model is off again
    np.testing.assert_array_equal(_bits(G), _bits(A))


def _case(kernels, v):
    args = [ArgSpec("A", "array", np.array([[SUB2, 1.0, 2.0, 3.0]], np.float32), "own", False, [0, 0, 0, 0], None),
            ArgSpec("old", "array", np.zeros(1, np.float32), "out", False, [], None),
            ArgSpec("v", "array", np.array([v], np.float32), "in", False, [], None),
            ArgSpec("B", "array", np.zeros(1), "own", False, [], None),
            ArgSpec("oldb", "array", np.zeros(1, np.float32), "out", False, [], None)]
    c = Case(1, "", "f32_atomics", args, 1, None, None)
    c.kernel = kernels["f32_atomics"]
    return c


def test_check_case_forgives_cuda_only_the_flushes(kernels, monkeypatch):
    """check_case with a stand-in for the GPU: the interpreter under the flushing model, for a
    backend named CUDA (no finding), for one named CPU (a finding), and with one more ulp
    somewhere else (a finding on CUDA too)."""
    real = R.run_case
    bump = {}

    def fake(case, backend, kernel=None):
        if backend in ("CUDA", "CPU"):
            with R.ftz_f32_atomics():
                out = real(case, "INTERP", kernel)
            for name, (idx, k) in bump.items():
                out[name][idx] = np.nextafter(out[name][idx], np.float32(np.inf))
            return out
        return real(case, backend, kernel)
    monkeypatch.setattr(R, "run_case", fake)
    c = _case(kernels, 0.0)
    assert R.check_case(c, ["CUDA"], "INTERP") == []
    ms = R.check_case(c, ["CPU"], "INTERP")
    assert [(m.backend, m.array) for m in ms] == [("CPU", "A")] and "got 0.0 want 2.938735877055719e-39" in str(ms[0])
    bump["A"] = ((0, 1), 1)                                 # 1.0 + 1 ulp: not a flush
    ms = R.check_case(c, ["CUDA"], "INTERP")
    assert [(m.backend, m.array) for m in ms] == [("CUDA", "A")]


# --- the reproducer writer's scalars -------------------------------------------------------------

def test_reproducer_scalars_round_trip():
    # fixed: repro-np-float64-scalar
    for v in (np.float64(-np.inf), np.float64(np.nan), np.float64(1.5), np.float32(np.inf), np.float64(-0.0),
              float("inf"), -2.5, np.int8(-3), True, 7):
        back = eval(_encode_scalar(v))
        assert type(back) is type(v), (v, back)
        assert np.asarray(back).tobytes() == np.asarray(v).tobytes() or (np.isnan(back) and np.isnan(v)), (v, back)
