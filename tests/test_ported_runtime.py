"""Runtime cases in the style of Warp's test_launch / test_devices / test_rand / test_kernel_cache,
Numba CUDA's test_array_args / test_random, CuPy's test_raw and Random123's kat_vectors, against
SPEC sections 2, 4, 5, 6, 8 and 9: DEV strings (tk.backend, kernel.source, the DEV variable),
arrays of another device named as such, tk.copyto's argument errors, Python numbers on backends
without 64-bit types, C compile errors at the kernel's Python line, Philox known answers and
ranges whose coordinates pass 2**31 on every backend, and one cache shared by processes."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.runtime import compiler

from backend_params import every_backend

BACKENDS = [p for p in every_backend() if p.values[0] != "JAX"] + [pytest.param("INTERP:CHECK", id="INTERP:CHECK")]


def _available(dev: str) -> bool:
    name = {"CL": "OpenCL", "WEBGPU": "WebGPU"}[dev]
    return tk.backends()[name][0]


@tk.kernel
def coords1(O):
    (i,) = tk.index(tk.Global, tk.Cartesian)
    O[tk.index()] = i


@tk.kernel
def coords2(O):
    i, j = tk.index(tk.Global, tk.Cartesian)
    O[tk.index(), 0] = i
    O[tk.index(), 1] = j


@tk.kernel
def inc(A):
    i = tk.index()
    A[i] = A[i] + 1


@tk.kernel
def kat(O, C: tk.Const):
    i = tk.index()
    a, b, c, d = tk.random.philox4x32(C[i, 0], C[i, 1], C[i, 2], C[i, 3], C[i, 4], C[i, 5])
    O[i, 0] = a
    O[i, 1] = b
    O[i, 2] = c
    O[i, 3] = d


@tk.kernel
def draws(U, B, key):
    i = tk.index()
    U[i] = tk.random.uniform(key, i)
    B[i] = tk.random.bits(key, i)


# ---------------------------------------------------------------------------- SPEC 4: DEV strings

@pytest.mark.parametrize("dev, err, match", [
    ("CUDA:x", ValueError, r"bad device number 'x' in the DEV string 'CUDA:x'"),
    ("CUDA:-1", ValueError, r"bad device number '-1'"),
    ("METAL:z", ValueError, r"bad device number 'z' in the DEV string 'METAL:z'"),
    ("ROCm:abc", ValueError, r"bad device number 'abc'"),
    ("CL:0:0", ValueError, r"bad device number '0:0'"),
    ("CPU:0", ValueError, r"bad thread count '0' in the DEV string 'CPU:0': expected a positive integer"),
    ("CPU:x", ValueError, r"bad thread count 'x'"),
    ("BOGUS", tk.BackendUnavailable, r"unknown backend 'BOGUS': expected one of CPU, CUDA\[:n\]"),
    ("INTERP:FAST", tk.BackendUnavailable, r"unknown interpreter option 'FAST'"),
])
def test_bad_dev_strings_fail_alike_in_backend_and_source(dev, err, match):
    """kernel.source() parsed the GPU DEV strings itself and ignored what followed the colon:
    source("CUDA:x", ...) rendered CUDA while tk.backend("CUDA:x") is a ValueError."""
    x = np.ones(4, np.float32)
    with pytest.raises(err, match=match):
        tk.backend(dev)
    with pytest.raises(err, match=match):
        inc.source(dev, x, ndrange=4)


def test_source_takes_every_good_dev_string_without_a_device():
    x = np.ones(4, np.float32)
    for dev in ("CPU", "cpu", "CPU:3", " CPU ", "CUDA", "CUDA:1", "GPU", "ROCm", "HIP:0", "ROCm:gfx1100", "METAL"):
        src = inc.source(dev, x, ndrange=4)
        assert isinstance(src, str) and "A" in src
    with pytest.raises(ValueError, match=r"bad device number 'gfx1100'"):   # an architecture names no device
        tk.backend("ROCm:gfx1100")


def test_a_bad_dev_variable_is_named():
    code = "import tinykernels as tk\ntry:\n    tk.default_backend()\nexcept Exception as e:\n" \
           "    print(type(e).__name__, e)\n"
    for dev, want in (("bogus", "BackendUnavailable the DEV environment variable ('bogus'): unknown backend"),
                      ("CPU:0", "ValueError the DEV environment variable ('CPU:0'): bad thread count '0'")):
        env = dict(os.environ, DEV=dev)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert want in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------- SPEC 2: arrays on another device, named

@pytest.mark.parametrize("kdev, adev", [("CL", "WEBGPU"), ("WEBGPU", "CL"), ("CPU", "CL"), ("INTERP", "WEBGPU")])
def test_an_array_of_another_device_backend_is_named_as_such(kdev, adev):
    """A WebGPU kernel given an OpenCL array (and the reverse) said 'is a host array'."""
    for d in (kdev, adev):
        if d in ("CL", "WEBGPU") and not _available(d):
            pytest.skip(f"{d} is not available")
    kb, ab = tk.backend(kdev), tk.backend(adev)
    a = tk.zeros(3, tk.float32, backend=ab)
    with pytest.raises(tk.LaunchError, match=rf"kernel 'inc': argument 'A' is an array on {ab!r}".replace("(", r"\(")
                       .replace(")", r"\)") + ", but the kernel runs on"):
        inc(kb)(a, ndrange=3)


# ----------------------------------------------------------------- SPEC 5: tk.copyto's arguments

@pytest.mark.parametrize("dev", BACKENDS)
@pytest.mark.parametrize("dst", ["x", [0.0, 0.0, 0.0], 3.0, None, (1, 2, 3)])
def test_copyto_into_something_that_is_not_an_array_names_dst(dev, dst):
    """A str, list or number as dst was measured as a shape (a str's is ()) and refused with a
    'shape mismatch' message; it is not memory to copy into."""
    src = tk.ones(3, tk.float32, backend=tk.backend(dev))
    with pytest.raises(TypeError, match=r"tk.copyto: dst must be an array .* got " + type(dst).__name__):
        tk.copyto(dst, src)


@pytest.mark.parametrize("dev", BACKENDS)
def test_copyto_casts_same_kind_and_refuses_the_rest(dev):
    b = tk.backend(dev)
    dst = tk.zeros(3, tk.float32, backend=b)
    tk.copyto(dst, tk.asarray(np.array([1, 2, 3], np.int32), backend=b)).wait()
    assert dst.numpy().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match=r"tk.copyto: cannot cast float32 to int32 \(same_kind casting\)"):
        tk.copyto(tk.zeros(3, tk.int32, backend=b), dst)


# ------------------------------------- SPEC 4/5: Python numbers where there are no 64-bit types

def test_python_numbers_are_32_bit_arrays_on_a_backend_without_64_bit_types():
    """tk.asarray([1.5, 2.0], backend=tk.WebGPU()) refused NumPy's inferred float64; a Python
    float whose type nothing fixes is float32 there (SPEC 4), in an array as in a kernel."""
    if not _available("WEBGPU"):
        pytest.skip("WebGPU is not available")
    w = tk.backend("WEBGPU")
    for obj, dt in (([1.5, 2], np.float32), ([1, 2], np.int32), (3.0, np.float32), (7, np.int32),
                    ([[1, 2], [3, 4]], np.int32), ((0.25,), np.float32), ([True], np.bool_)):
        a = tk.asarray(obj, backend=w)
        assert a.dtype == dt and np.array_equal(a.numpy(), np.asarray(obj).astype(dt))
    for strong in (np.array([1.0]), np.arange(3), [2**40]):         # typed arrays, or too wide: refused
        with pytest.raises(TypeError, match="WebGPU has no (float64|int64)"):
            tk.asarray(strong, backend=w)
    assert tk.asarray([1.5], backend=tk.CPU()).dtype == np.float64  # where float64 exists, NumPy's choice


# ------------------------------------------------ SPEC 9: a C compile error at the Python line

def test_compiler_errors_in_a_macro_are_placed_at_the_python_line():
    """An error the compiler reports at <command-line> (a macro from CC's flags) with notes at
    the #line places: the CompileError had no Python line and no generated lines."""
    stderr = textwrap.dedent("""\
        /tmp/k.c: In function 'tk_chunk':
        <command-line>: error: stray '@' in program
        /tmp/k.c:830:21: note: in expansion of macro 'v_i'
        /tmp/user.py:5:13: note: in expansion of macro 'v_i'
        """)
    assert compiler._python_error(stderr) == ("/tmp/user.py", 5, "stray '@' in program")
    direct = "/tmp/user.py:7:3: error: expected ';' before '}' token\n/tmp/user.py:9:1: error: other\n"
    assert compiler._python_error(direct) == ("/tmp/user.py", 7, "expected ';' before '}' token")
    assert compiler._python_error("cc: fatal error: no input files\n") is None


def test_a_failing_c_compile_shows_the_python_line_and_the_generated_lines(tmp_path):
    kfile = tmp_path / "kern.py"
    kfile.write_text(textwrap.dedent("""\
        import numpy as np, tinykernels as tk

        @tk.kernel
        def bump(A):
            i = tk.index()
            A[i] = A[i] + 1

        try:
            bump(tk.CPU())(np.zeros(4, np.float32), ndrange=4)
        except tk.CompileError as e:
            print("CompileError:", e)
        """))
    env = dict(os.environ, CC="cc -Dv_i=v_i@", TK_CACHE_DIR=str(tmp_path / "cache"), TK_QUIET="1")
    r = subprocess.run([sys.executable, str(kfile)], capture_output=True, text=True, env=env, timeout=600)
    out = r.stdout
    assert "CompileError:" in out, out + r.stderr
    assert f"{kfile}:5:5: in kernel 'bump': the C compiler rejected the generated code" in out, out
    assert "i = tk.index()" in out                          # the Python line itself
    assert "generated source:" in out and "v_i" in out      # and the generated lines
    assert "Traceback" not in r.stderr


# ------------------------------------------ SPEC 8: Random123's known answers on every backend

KAT_IN = np.array([[0] * 6, [0xffffffff] * 6,
                   [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0]], np.uint32)
KAT_OUT = np.array([[0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
                    [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
                    [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]], np.uint32)


def test_philox_known_answers_on_the_host():
    assert np.array_equal(np.stack(tk.random.philox4x32(*KAT_IN.T), 1), KAT_OUT)


@pytest.mark.parametrize("dev", BACKENDS)
def test_philox_known_answers_and_draws_on_every_backend(dev):
    b = tk.backend(dev)
    out = tk.zeros((3, 4), tk.uint32, backend=b)
    kat(b)(out, tk.asarray(KAT_IN, backend=b), ndrange=3).wait()
    assert np.array_equal(out.numpy(), KAT_OUT)
    n = 4096
    for seed in (0, 12345, 2**63 + 5):
        k = tk.random.key(seed)
        u, bits = tk.zeros(n, tk.float32, backend=b), tk.zeros(n, tk.uint32, backend=b)
        draws(b)(u, bits, k, ndrange=n).wait()
        assert np.array_equal(bits.numpy(), tk.random.bits(k, np.arange(n)))
        assert np.array_equal(u.numpy(), tk.random.uniform(k, np.arange(n)))
        assert u.numpy().min() >= 0 and u.numpy().max() < 1


# ------------------------------- SPEC 2: ranges whose coordinates do not fit 32 bits, any step

RANGES = [range(2**31 - 2, 2**31 + 2), range(2**32 - 2, 2**32 + 2), range(-3, 2**31 + 10, 2**30),
          range(2**31 + 3, 2**31 - 3, -2), range(5, -2**31 - 5, -2**30), range(9, -1, -1), range(5, 2)]


@pytest.mark.parametrize("dev", [p for p in BACKENDS if p.values[0] != "WEBGPU"])   # (int64 output)
def test_range_coordinates_past_32_bits(dev):
    b = tk.backend(dev)
    for r in RANGES:
        out = tk.full((max(len(r), 1),), -7, tk.int64, backend=b)
        coords1(b)(out, ndrange=(r,)).wait()
        want = np.array(list(r), np.int64) if len(r) else np.array([-7])
        assert np.array_equal(out.numpy(), want), r
    r0, r1 = range(2**31 - 1, 2**31 + 1), range(2**33, 2**33 - 5, -2)
    out = tk.zeros((len(r0) * len(r1), 2), tk.int64, backend=b)
    coords2(b)(out, ndrange=(r0, r1)).wait()
    assert np.array_equal(out.numpy(), np.array([[x, y] for x in r0 for y in r1], np.int64))


# ------------------------------------------------- SPEC 4: one disk cache, several processes

def test_concurrent_processes_compile_one_kernel_into_one_cache(tmp_path):
    """Three processes compile the same kernel into an empty TK_CACHE_DIR at once; each gets the
    right result, and a fourth compiles nothing."""
    script = tmp_path / "k.py"
    script.write_text(textwrap.dedent("""\
        import numpy as np, tinykernels as tk
        from tinykernels.runtime import compiler

        @tk.kernel
        def saxpy(y, a, x: tk.Const):
            i = tk.index()
            y[i] = a * x[i] + y[i]

        x = np.arange(1000, dtype=np.float32)
        y = np.ones(1000, np.float32)
        saxpy(tk.CPU())(y, 2.0, x, ndrange=1000).wait()
        assert np.array_equal(y, 2 * x + 1)
        print("compiles", compiler.STATS["compiles"])
        """))
    env = dict(os.environ, TK_CACHE_DIR=str(tmp_path / "cache"), TK_QUIET="1")
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and "compiles" in out, out + err
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and "compiles 0" in r.stdout, r.stdout + r.stderr
    assert not [p for p in (tmp_path / "cache").rglob(".tmp*")]


# ------------------------------------- SPEC 1/2: a 0-d device array for a scalar parameter

@tk.kernel
def third(O, s):
    i = tk.index()
    O[i] = s / 3


@pytest.mark.parametrize("dev", [p for p in BACKENDS if p.values[0] in ("CL", "WEBGPU")])
def test_a_0d_device_array_for_a_number_stays_a_compile_error(dev):
    """By design (docs/language.md): reading its value at launch would sync with the device and
    read it before earlier work queued on a stream had written it. A 0-d host array is a number."""
    b = tk.backend(dev)
    out = tk.zeros(1, tk.float32, backend=b)
    with pytest.raises(tk.CompileError, match="array 's' used where a number is expected"):
        third(b)(out, tk.full((), 3.0, tk.float32, backend=b), ndrange=1)
    third(b)(out, np.array(3.0, np.float32), ndrange=1).wait()
    assert out.numpy()[0] == np.float32(1.0)


def test_host_random_errors_name_the_function_and_argument():
    """'expected integers, got dtype float64' and 'n must be non-negative' named neither the
    function nor the argument (as jax.random's and NumPy's errors do)."""
    k = tk.random.key(1)
    with pytest.raises(TypeError, match=r"tk.random.uniform: the counter must be an integer"):
        tk.random.uniform(k, 1.5)
    with pytest.raises(TypeError, match=r"tk.random.normal: the key must be an integer"):
        tk.random.normal(1.5, 1)
    with pytest.raises(TypeError, match=r"tk.random.bits: the counter must be an integer"):
        tk.random.bits(k, np.array([1.0]))
    with pytest.raises(ValueError, match=r"tk.random.split: n must be non-negative, got -1"):
        tk.random.split(k, -1)
    with pytest.raises(ValueError, match=r"tk.random.split: the key must be a single key, got an array of shape \(2,\)"):
        tk.random.split(np.array([k, k]), 2)
    assert np.array_equal(tk.random.split(k, 5)[:3], tk.random.split(k, 3))     # a prefix: same keys
    assert len(set(tk.random.split(k, 4096).tolist()) | {int(k)}) == 4097        # distinct, and not k


# ---------------------------------------- SPEC 5: backend= and the array API's from_dlpack

@pytest.mark.parametrize("make", [lambda b: tk.zeros(3, backend=b), lambda b: tk.full(3, 1.0, tk.float32, b),
                                  lambda b: tk.asarray([1.0], backend=b),
                                  lambda b: tk.from_blob(np.zeros(2).ctypes.data, 2, tk.float64, b)])
def test_a_backend_that_is_not_one_is_a_type_error_naming_backend(make):
    """tk.zeros(3, backend=5) said 'arrays on the int backend is not implemented yet'."""
    for bad in (5, object(), 1.5):
        with pytest.raises(TypeError, match=rf"backend= must be a backend \(tk.CPU\(\), ...\) or a DEV string, "
                                            rf"got {type(bad).__name__}"):
            make(bad)


def test_from_dlpack_takes_the_array_api_device_keyword():
    x = np.arange(3, dtype=np.float32)
    for dev in (None, "CPU", tk.CPU()):                       # where x lives: a view
        v = tk.from_dlpack(x, device=dev)
        v.numpy()[0] = 7
        assert x[0] == 7 and v.backend == tk.CPU()
    c = tk.from_dlpack(x, device="CPU", copy=True)            # a copy on request
    c.numpy()[0] = 1
    assert x[0] == 7
    i = tk.from_dlpack(x, device=tk.Interpreter())
    assert i.backend == tk.Interpreter() and i.numpy().tolist() == [7, 1, 2]
    with pytest.raises(TypeError, match=r"device= must be a backend"):
        tk.from_dlpack(x, device=5)
    if _available("CL"):
        cl = tk.backend("CL")
        d = tk.from_dlpack(x, device=cl)                       # moved: a copy there
        assert d.backend == cl and d.numpy().tolist() == [7, 1, 2]
        with pytest.raises(ValueError, match=r"copy=False forbids moving it"):
            tk.from_dlpack(x, device=cl, copy=False)


@pytest.mark.parametrize("dev", BACKENDS)
@pytest.mark.parametrize("ndrange, match", [
    (2**64, r"ndrange dimension 0 \(18446744073709551616\) does not fit in 64 bits"),
    ((range(0, 2**70, 2**66),), r"ndrange dimension 0 \(range\(0, 1180591620717411303424, .*\) does not fit in 64 bits"),
    ((range(-2**64, 0, 2**62),), r"ndrange dimension 0 .* does not fit in 64 bits"),
    ((2**40, 2**40), r"ndrange \(1099511627776, 1099511627776\) has 1208925819614629174706176 work items, more than 2\*\*63 - 1"),
])
def test_an_ndrange_beyond_64_bits_is_a_launch_error(dev, ndrange, match):
    """The CPU packed such an ndrange into int64 and failed with a bare 'OverflowError: int too
    big to convert' (SPEC 9: no bare error from inside; SPEC 2: sizes are LaunchErrors)."""
    b = tk.backend(dev)
    with pytest.raises(tk.LaunchError, match=rf"kernel 'inc': {match}"):
        inc(b)(tk.zeros(4, tk.float32, backend=b), ndrange=ndrange)


# ------------------------- SPEC 1: source() is a complete translation unit, on any machine

@tk.kernel
def group_sum(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    t = tk.localmem(tk.float32, (64,))
    t[lid] = x[tk.index()]
    tk.synchronize()
    v = tk.group_reduce(t[lid], "add")
    if lid == 0:
        tk.atomic_add(out, 0, v)


def _source_cases():
    x = np.ones(64, np.float32)
    return [(inc, (x,), dict(ndrange=64)),
            (group_sum, (np.zeros(1, np.float32), x), dict(ndrange=64, workgroupsize=64)),
            (draws, (x, np.zeros(64, np.uint32), tk.random.key(2)), dict(ndrange=64)),
            (kat, (np.zeros((3, 4), np.uint32), KAT_IN), dict(ndrange=3)),
            (coords2, (np.zeros((64, 2), np.int32),), dict(ndrange=(range(2, 10), range(20, 4, -2)), workgroupsize=(2, 4)))]


def test_source_compiles_as_is_with_each_backends_compiler(tmp_path):
    """Warp/CuPy-style: the text source() returns is accepted as is by the C compiler, PoCL,
    NVRTC and wgpu's WGSL front end (those present here), with no device for CUDA."""
    tc = compiler.toolchain()                 # the compiler and flags the CPU backend uses
    checks = {"CPU": lambda src, n: _cc_compiles(list(tc.cmd) + list(tc.flags), src, tmp_path / f"{n}.c")}
    if _available("CL"):
        import pyopencl as cl
        ctx = tk.backend("CL")._dev.ctx
        checks["CL"] = lambda src, n: cl.Program(ctx, src).build()
    from tinykernels.runtime.nvrtc import compile_cuda, nvrtc_available
    if nvrtc_available()[0]:
        checks["CUDA:1"] = lambda src, n: compile_cuda(src, "sm_80", name=n, cache=False)
    if _available("WEBGPU"):
        import wgpu
        gdev = wgpu.gpu.request_adapter_sync().request_device_sync()
        checks["WEBGPU"] = lambda src, n: gdev.create_shader_module(code=src)
    for k, args, kw in _source_cases():
        for dev, check in checks.items():
            a = tuple(np.asarray(v, np.int32) if dev == "WEBGPU" and getattr(v, "dtype", None) == np.int64 else v
                      for v in args)
            check(k.source(dev, *a, **kw), f"{k.name}_{dev.replace(':', '_')}")


def _cc_compiles(cc, src: str, path) -> None:
    path.write_text(src)
    r = subprocess.run(cc + ["-c", str(path), "-o", str(path.with_suffix(".o"))],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[:2000]
