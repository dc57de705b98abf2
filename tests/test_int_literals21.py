"""Python ints at the edge of the 64-bit types (docs/language.md, "Python ints"): a literal, a
folded constant, a constexpr or a Python int argument in [2**63, 2**64) is a weak uint64 on every
backend (the compiled ones rendered literals and locals of that value as int64, so -1 for
2**64 - 1, while the interpreter kept them unsigned), two Python ints one of which is such compute
in uint64 whichever side it is on (``63 % s`` took the LEFT operand's int64), and a literal that
fits no 64-bit type where it must be held at run time is a tk.CompileError at its line.

References are NumPy 2 scalars computed in the type the rules give (np.uint64 for a weak uint64).
"""
import numpy as np
import pytest

import tinykernels as tk
from backend_params import every_backend
from gen_kernels import make_kernel

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

U = np.uint64
M64 = 2**64 - 1
N = 4
IDX = np.arange(N)
BACKENDS = [p for p in every_backend() if p.id in ("CPU", "INTERP", "CL")] + [pytest.param("INTERP:CHECK", id="CHECK")]


def _launch(dev, k, out, *args):
    be = tk.backend(dev)
    arr = tk.asarray(out, backend=be) if dev != "CPU" else out
    k(be)(arr, *args, ndrange=N)
    tk.synchronize(be)
    return arr.numpy() if hasattr(arr, "numpy") else arr


def _u(x):
    """``x`` (an int or an array of them) as NumPy uint64, wrapped modulo 2**64."""
    return np.asarray(np.asarray(x, dtype=object) % 2**64, dtype=object).astype(U)


# (name, kernel parameters, body lines, output dtype, arguments, NumPy reference of out)
CASES = [
    ("mod-left-literal", ["out", "s"], ["out[i] = 63 % s"], U, (M64,), lambda: np.full(N, 63, U)),
    ("mod-right-literal", ["out", "s"], ["out[i] = s % 63"], U, (M64,), lambda: np.full(N, U(M64) % U(63))),
    ("floordiv-literal-by-index", ["out"], ["out[i] = 18446744073709551615 // (i + 1)"], U, (),
     lambda: U(M64) // _u(IDX + 1)),
    ("literal-local-as-float", ["out"], ["x = 18446744073709551615", "out[i] = x // 2 + i"], np.float64, (),
     lambda: (U(M64) // U(2) + _u(IDX)).astype(np.float64)),
    ("literal-plus-index-compare", ["out"], ["out[i] = (i + 9223372036854775808) > 9223372036854775809"],
     np.bool_, (), lambda: _u(IDX) + U(2**63) > U(2**63 + 1)),
    ("shift-right", ["out"], ["out[i] = 18446744073709551615 >> (i + 60)"], U, (), lambda: U(M64) >> _u(IDX + 60)),
    ("shift-left", ["out"], ["out[i] = 9223372036854775808 << i"], U, (), lambda: U(2**63) << _u(IDX)),
    ("shift-arg", ["out", "s"], ["out[i] = (s >> 1) << (i + 1)"], U, (M64,), lambda: (U(M64) >> U(1)) << _u(IDX + 1)),
    ("max-literal", ["out"], ["out[i] = max(i, 18446744073709551615)"], np.float64, (), lambda: np.full(N, float(M64))),
    ("min-literal", ["out"], ["out[i] = min(i + 9223372036854775808, 9223372036854775809)"], U, (),
     lambda: np.minimum(_u(IDX) + U(2**63), U(2**63 + 1))),
    ("min-negative-with-arg", ["out", "s"], ["out[i] = min(i - 2, s)"], U, (M64,),
     lambda: np.minimum(_u(IDX - 2), U(M64))),
    ("clamp-with-arg", ["out", "s"], ["out[i] = tk.clamp(i - 2, 0, s)"], U, (M64,),
     lambda: np.clip(_u(IDX - 2), U(0), U(M64))),
    ("negative-mod-arg", ["out", "s"], ["out[i] = (i - 1) % s"], U, (M64,), lambda: _u(IDX - 1) % U(M64)),
    ("abs-wraps-unsigned", ["out"], ["out[i] = abs(i - 9223372036854775809)"], U, (),
     lambda: _u(IDX) - U(2**63 + 1)),
    ("augassign-local", ["out"], ["v = i", "v += 18446744073709551615", "out[i] = v"], np.float64, (),
     lambda: (_u(IDX) + U(M64)).astype(np.float64)),
    ("augassign-array", ["out"], ["out[i] = i", "out[i] += 18446744073709551615"], U, (), lambda: _u(IDX) + U(M64)),
    ("range-bounds", ["out"], ["out[i] = 0", "for k in range(9223372036854775808 + i, 9223372036854775810):",
                               "    out[i] += k % 7"], U, (),
     lambda: np.array([sum(k % 7 for k in range(2**63 + int(j), 2**63 + 2)) for j in IDX], U)),
    ("index-from-uint64", ["out", "s"], ["out[s - 18446744073709551614 + i - 1] = i"], U, (M64,), lambda: _u(IDX)),
    ("negative-literal-with-arg", ["out", "s"], ["out[i] = s + (-1)"], U, (M64,), lambda: np.full(N, U(M64 - 1))),
    ("arg-minus-big", ["out", "s"], ["v = s - 18446744073709551610", "out[i] = (v - 10) // 2"], U, (M64,),
     lambda: np.full(N, (U(5) - U(10)) // U(2))),
    ("neg-arg-as-float", ["out", "s"], ["out[i] = -s + i"], np.float64, (2**63 + 8,),
     lambda: ((U(0) - U(2**63 + 8)) + _u(IDX)).astype(np.float64)),
    ("true-divide", ["out", "s"], ["out[i] = (i - 1) / s"], np.float64, (M64,),
     lambda: (IDX - 1) / float(M64)),
    ("int-of-uint64", ["out", "s"], ["out[i] = int(s) + i"], np.int64, (M64,), lambda: IDX - 1),
    ("float-of-uint64", ["out", "s"], ["out[i] = float(s) + i"], np.float64, (M64,), lambda: float(M64) + IDX),
    ("cast-int64", ["out"], ["out[i] = tk.int64(18446744073709551615) + i"], np.int64, (), lambda: IDX - 1),
    ("cast-uint64", ["out"], ["out[i] = tk.uint64(-1) - i"], U, (), lambda: U(M64) - _u(IDX)),
    ("with-strong-uint64", ["out", "a"], ["out[i] = a[i] + 9223372036854775808"], U, (np.arange(N, dtype=U),),
     lambda: _u(IDX) + U(2**63)),
    ("negated-2**63-is-int64", ["out"], ["out[i] = (-9223372036854775808 + i) // 3"], np.float64, (),
     lambda: ((IDX + np.int64(-2**63)) // 3).astype(np.float64)),
    ("folded-difference-is-int64", ["out"], ["x = 9223372036854775808 - 18446744073709551616", "out[i] = (x + i) // 3"],
     np.float64, (), lambda: ((IDX + np.int64(-2**63)) // 3).astype(np.float64)),
    ("folded-small-is-int64", ["out"], ["out[i] = ((18446744073709551615 - 18446744073709551614) - (i + 2)) // 3"],
     np.int64, (), lambda: (1 - (IDX + 2)) // 3),
    ("folded-stays-exact", ["out"], ["out[i] = (18446744073709551615 * 2 // 4) + i"], U, (),
     lambda: _u(IDX + (M64 * 2 // 4))),
]

CMP_CASES = [   # comparisons are exact, as Python compares the values
    ("minus-one-below-arg", "-1 < s", (M64,)),
    ("index-below-2**63", "i - 5 < 9223372036854775808", (M64,)),
    ("index-below-2**64", "i < 18446744073709551616", (M64,)),
    ("arg-above-literal", "s > 9223372036854775808 + i", (M64,)),
    ("arg-vs-negative-index", "i - 2 < s", (2**63,)),
    ("arg-eq", "s == 18446744073709551615 - i", (M64,)),
]


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("int_literals21"))


@pytest.mark.parametrize("dev", BACKENDS)
@pytest.mark.parametrize("name, params, body, dt, args, ref", CASES, ids=[c[0] for c in CASES])
def test_python_ints_near_2_64_match_numpy(gen_dir, dev, name, params, body, dt, args, ref):
    k = make_kernel(gen_dir, "k_" + name.replace("-", "_").replace("*", ""), params, body)
    if dev != "CPU":
        args = tuple(tk.asarray(a, backend=tk.backend(dev)) if isinstance(a, np.ndarray) else a for a in args)
    got = _launch(dev, k, np.zeros(N, dt), *args)
    want = np.asarray(ref(), dtype=dt)
    np.testing.assert_array_equal(got, want, err_msg=f"{dev} {name}: {body}")


@pytest.mark.parametrize("dev", BACKENDS)
@pytest.mark.parametrize("name, expr, args", CMP_CASES, ids=[c[0] for c in CMP_CASES])
def test_comparisons_with_python_ints_near_2_64_are_exact(gen_dir, dev, name, expr, args):
    k = make_kernel(gen_dir, "k_cmp_" + name.replace("-", "_").replace("*", ""), ["out", "s"], [f"out[i] = {expr}"])
    got = _launch(dev, k, np.zeros(N, np.bool_), *args)
    want = np.array([eval(expr, {"i": int(j), "s": args[0]}) for j in IDX])      # Python's exact ints
    np.testing.assert_array_equal(got, want, err_msg=f"{dev}: {expr}")


def test_constexpr_near_2_64_is_unsigned(gen_dir):
    k = make_kernel(gen_dir, "k_constexpr_u64", ["out", "c: tk.constexpr"], ["out[i] = c // (i + 1)"])
    for dev in ("CPU", "INTERP"):
        got = _launch(dev, k, np.zeros(N, U), M64)
        np.testing.assert_array_equal(got, U(M64) // _u(IDX + 1), err_msg=dev)


@pytest.mark.parametrize("body, what", [
    (["out[i] = i + 18446744073709551616"], "18446744073709551616"),
    (["x = 18446744073709551616", "out[i] = x + i"], "18446744073709551616"),
    (["out[i] = -9223372036854775809 + i"], "-9223372036854775809"),
    (["out[i] = max(i, -9223372036854775809)"], "-9223372036854775809"),
    (["for k in range(18446744073709551617):", "    out[i] = k"], "18446744073709551617"),
    (["out[i] = a[i] + 9223372036854775808"], "9223372036854775808"),     # NumPy: OverflowError for int64
    (["out[i] = 1 << 64"], "18446744073709551616"),
], ids=["plus-index", "local", "below-int64", "max", "range", "int64-array", "folded-shift"])
def test_literals_that_fit_no_type_are_compile_errors_at_their_line(gen_dir, body, what):
    k = make_kernel(gen_dir, "k_toobig", ["out", "a"], body)
    a = np.zeros(N, np.int64)
    with pytest.raises(tk.CompileError) as ei:
        k(tk.CPU())(np.zeros(N, np.int64), a, ndrange=N)
    msg = str(ei.value)
    assert what in msg and "out of bounds" in msg, msg
    assert ".py:" in msg, msg          # file:line of the kernel's source


@pytest.mark.parametrize("body, s, exc", [
    (["out[i] = tk.uint32(i + 9223372036854775808)"], 5, tk.CompileError),
    (["out[i] = tk.uint32(s % 7)"], M64, tk.LaunchError),
], ids=["literal", "argument"])
def test_webgpu_has_no_64_bit_ints_a_clear_error(gen_dir, body, s, exc):
    ok, why = tk.backends()["WebGPU"]
    if not ok:
        pytest.skip(f"WebGPU: {why}")
    k = make_kernel(gen_dir, "k_wgpu_u64", ["out", "s"], body)
    be = tk.backend("WEBGPU")
    out = tk.asarray(np.zeros(N, np.uint32), backend=be)
    with pytest.raises(exc) as ei:
        k(be)(out, s, ndrange=N)
    msg = str(ei.value)
    assert ("uint64" in msg or "32 bits" in msg) and ("WebGPU" in msg), msg
    if exc is tk.CompileError:
        assert ".py:3:" in msg, msg


def test_jax_raise_path_agrees(gen_dir):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import tinykernels.jax as tkjax
    k = make_kernel(gen_dir, "k_jax_u64", ["out", "s"],
                    ["out[i] = 63 % s + 18446744073709551615 // (i + 1) + (-s if i < 2 else s)"])
    want = (U(63) % U(M64) + U(M64) // _u(IDX + 1) + np.where(IDX < 2, U(0) - U(M64), U(M64))).astype(U)
    got = _launch("CPU", k, np.zeros(N, U), M64)
    np.testing.assert_array_equal(got, want)
    g = tkjax.raise_kernel(k, outputs=["out"])
    with jax.enable_x64(True):
        np.testing.assert_array_equal(np.asarray(g(jnp.zeros(N, jnp.uint64), s=M64)), want)


def test_gpu_sources_render_uint64_literals_and_compile(gen_dir):
    """The C-like renderers share the literal's type: 2**64 - 1 is a uint64 constant in the CUDA,
    HIP, Metal and OpenCL sources (never an int64 -1), and NVRTC accepts the CUDA one."""
    k = make_kernel(gen_dir, "k_gpu_u64", ["out", "s"],
                    ["v = 18446744073709551615", "out[i] = v // (i + 1) + 63 % s + (i + 9223372036854775808 > s)"])
    args = (np.zeros(N, U), M64)
    for dev in ("CUDA", "ROCm", "Metal", "CL"):
        src = k.source(dev, *args, ndrange=N)
        assert "v_v = UINT64_C(18446744073709551615);" in src and "uint64_t v_v;" in src, dev
        assert "tk_mod_u64(UINT64_C(63), p_s)" in src, dev
    from tinykernels.runtime import cuda as rt
    ok, why = rt.nvrtc_available()
    if ok:
        src = rt.cuda_source(k, *args, ndrange=N)
        assert rt.compile_cuda(src, "sm_80", "k_gpu_u64", cache=False)[:4] == b"\x7fELF"
