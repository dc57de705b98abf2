"""The interpreter backend (tk.Interpreter(), DEV=INTERP and INTERP:CHECK): the same results as
the compiled CPU backend, the kernel language's semantics where plain Python differs, tk.print
ordering, breakpoint()/pdb on the user's lines, and check mode finding each kind of bug (with
the fixed kernels passing cleanly)."""
import gc
import inspect
import io
import math
import sys

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.runtime.interp import (DataRaceError, DivergentBarrierError, Interpreter, KernelCheckError,
                                        KernelIndexError, UninitializedReadError)

INTERP = tk.Interpreter()
CHECK = tk.Interpreter(check=True)
CPU_OK = tk.CPU.available()[0]
needs_cpu = pytest.mark.skipif(not CPU_OK, reason="no C compiler for the CPU backend")
ml_dtypes = pytest.importorskip("ml_dtypes")


def line_of(fn, text):
    src, start = inspect.getsourcelines(getattr(fn, "fn", fn))
    for k, line in enumerate(src):
        if text in line:
            return start + k
    raise AssertionError(text)


def both(kernel, make, ndrange, wg=None, workgroupsize=None, backends=None):
    """Run on the CPU (one thread: deterministic atomics order) and on the interpreter; return the
    array arguments after each run."""
    outs = []
    for b in backends or (tk.CPU(threads=1), INTERP):
        args = make()
        k = kernel(b, wg) if wg else kernel(b)
        k(*args, ndrange=ndrange, workgroupsize=workgroupsize)
        outs.append([a for a in args if isinstance(a, np.ndarray)])
    return outs


def assert_same(outs, exclude=()):
    for k, (x, y) in enumerate(zip(*outs)):
        if k in exclude:
            continue
        if x.dtype.kind == "f" and x.dtype.itemsize >= 2 and x.dtype in (np.float16, np.float32, np.float64):
            np.testing.assert_array_equal(x, y)
        else:                                   # bit patterns (bool, ints, bfloat16, fp8)
            assert x.tobytes() == y.tobytes(), (x, y)


# ----------------------------------------------------------------------------- the backend

def test_backend_object_and_listing():
    assert tk.backend("INTERP") == INTERP and tk.backend("INTERP:CHECK") == CHECK and INTERP != CHECK
    assert isinstance(INTERP, Interpreter) and tk.Interpreter is Interpreter
    assert repr(CHECK) == "tk.Interpreter(check=True)" and INTERP.name == "INTERP" and INTERP.is_host
    assert INTERP.supports(tk.float16) and INTERP.supports(np.float64) and INTERP.supports(tk.bfloat16)
    assert INTERP.supports_atomic(tk.int32) and not INTERP.supports_atomic(tk.int8)
    assert INTERP.supports_float64 and INTERP.max_workgroupsize == 1024
    assert tk.backends()["INTERP"][0]
    a = tk.zeros(4, tk.float32, backend=INTERP)
    assert a.backend == INTERP and tk.get_backend(a) == INTERP


@tk.kernel
def fill(A, v):
    A[tk.index()] = v


def test_launch_validation_matches_the_compiled_backends():
    with pytest.raises(tk.LaunchError, match="fill"):
        fill(INTERP)(np.zeros(4), ndrange=4)
    with pytest.raises(tk.LaunchError, match="'A'"):
        fill(INTERP)("not an array", 1.0, ndrange=4)
    with pytest.raises(tk.LaunchError):
        fill(INTERP)(np.zeros(16), 1.0, ndrange=(4, 4), workgroupsize=(4, 4, 1))
    a = np.ones(4)
    fill(INTERP)(a, 7.0, ndrange=0)                       # zero size: a no-op
    assert (a == 1).all()
    with pytest.raises(NotImplementedError, match="no source"):
        fill(INTERP).source(a, 1.0, ndrange=4)


@tk.kernel
def _big_tile(A, n: tk.constexpr):
    t = tk.localmem(tk.float32, (n,))
    t[tk.index(tk.Local, tk.Linear)] = 1.0
    tk.synchronize()
    A[tk.index()] = t[0]


def test_local_memory_limit_is_the_cpu_backends():
    """The compiled backends refuse local arrays larger than the device's local memory; the
    interpreter holds kernels to the CPU backend's limit (it ran any size before), a
    CompileError at the tk.localmem line, checked before anything runs."""
    from tinykernels.runtime.interp.backend import INTERP_LOCAL_MEMORY
    from tinykernels.runtime.cpu import CPU_STACK_ARRAYS
    assert INTERP_LOCAL_MEMORY == CPU_STACK_ARRAYS
    a = np.zeros(8, np.float32)
    _big_tile(INTERP)(a, INTERP_LOCAL_MEMORY // 4, ndrange=8)
    assert (a == 1).all()
    a[:] = 0
    with pytest.raises(tk.CompileError, match=r"(?s)_big_tile.*tk.localmem arrays need 1048580 bytes.*"
                                              r"allows 1048576.*tk.localmem\(tk.float32"):
        _big_tile(INTERP)(a, INTERP_LOCAL_MEMORY // 4 + 1, ndrange=8)
    assert (a == 0).all()


def test_streams_events_and_errors_on_streams():
    s = INTERP.stream()
    a = tk.zeros(100, tk.float32, backend=INTERP)
    ev = fill(INTERP)(a, 3.0, ndrange=100, stream=s)
    ev.wait()
    assert ev.done() and (a.numpy() == 3).all()
    bad = fill(INTERP)(a, 1.0, ndrange=101, stream=s)         # one item out of bounds
    with pytest.raises(IndexError, match="out of bounds"):
        bad.wait()


# ----------------------------------------------------------------------------- same results as the CPU

@tk.kernel
def int_ops(o, x: tk.Const, d: tk.Const):
    i = tk.index()
    a = x[i]
    b = d[i]
    o[i, 0] = a // b
    o[i, 1] = a % b
    o[i, 2] = a << (b & 7)
    o[i, 3] = a >> (b & 7)
    o[i, 4] = a ** 2 + a ** b
    o[i, 5] = -a + ~a
    o[i, 6] = abs(a) + min(a, b) + max(a, b, 3)
    o[i, 7] = a * 3 + 100
    o[i, 8] = a // 0 + a % 0 + i // 0 + i % 0


@needs_cpu
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.uint32, np.int64, np.uint64])
def test_integer_semantics_match_the_cpu(dtype):
    def make():
        rng = np.random.default_rng(0)
        info = np.iinfo(dtype)
        x = rng.integers(info.min // 2, info.max // 2, 200, endpoint=False).astype(dtype)
        d = rng.integers(-5 if info.min < 0 else 0, 6, 200).astype(dtype)
        return [np.zeros((200, 9), dtype), x, d]
    assert_same(both(int_ops, make, 200))


@tk.kernel
def py_ints(o, n):
    i = tk.index()
    o[i, 0] = (i - 3) // 2 + (i - 3) % 2
    o[i, 1] = 2 ** (i - 3)                      # int ** negative -> 0
    o[i, 2] = n * n * n * (i + 1)               # past int64: wraps
    o[i, 3] = round(2.5) + round(-0.5 + i) + int(-2.7) + int(True)
    o[i, 4] = (i - 3) << 62
    o[i, 5] = 7 // (i - 3) + 7 % (i - 3)        # by zero -> 0 at i == 3
    o[i, 6] = (i << 70) + (i >> 70) + (-i >> 70)
    o[i, 7] = (i > 4 and i) * 10                # and/or give bools (Python: i)


@needs_cpu
def test_python_ints_are_wrapping_int64():
    outs = both(py_ints, lambda: [np.zeros((8, 8), np.int64), 3037000500], 8)
    assert_same(outs)
    o = outs[1][0]
    assert o[0, 1] == 0 and o[3, 1] == 1 and o[3, 5] == 0
    with np.errstate(over="ignore"):
        assert o[1, 2] == np.int64(3037000500) * np.int64(3037000500) * np.int64(3037000500) * np.int64(2)
    assert (o[:, 7] == np.where(np.arange(8) > 4, 10, 0)).all()


@tk.kernel
def float_ops(o, x: tk.Const, y: tk.Const):
    i = tk.index()
    a = x[i]
    b = y[i]
    o[i, 0] = a / b + a * 0.1 + 1e-3
    o[i, 1] = a // b
    o[i, 2] = a % b
    o[i, 3] = math.floor(a) + math.ceil(b) + math.trunc(a) + math.fabs(b)
    o[i, 4] = tk.select(a > b, a, b) + min(a, 0.25) + max(b, -0.25) + tk.clamp(a, -0.5, 0.5)
    o[i, 5] = round(a * 3) + int(a * 1000) + abs(a)
    o[i, 6] = a / 0.0 + tk.fma(a, b, 1.5)
    o[i, 7] = math.exp(a) + math.log(abs(a)) + math.sqrt(abs(b))       # libm vs NumPy: ulps
    o[i, 8] = math.atan2(a, b) + math.sin(a) + math.cos(b) + math.tanh(a) + math.erf(b)
    o[i, 9] = tk.rsqrt(abs(a)) + tk.sigmoid(b) + math.pow(abs(a), 1.5)


@needs_cpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_semantics_match_the_cpu(dtype):
    def make():
        rng = np.random.default_rng(1)
        x = (rng.standard_normal(100) * 3).astype(dtype)
        y = (rng.standard_normal(100) * 2).astype(dtype)
        x[:4], y[:4] = [0, -0.0, np.inf, 2.5], [0, 0, 2, -0.0]
        return [np.zeros((100, 10), dtype), x, y]
    (cpu, *_), (interp, *_) = both(float_ops, make, 100)
    assert interp.dtype == dtype
    np.testing.assert_array_equal(cpu[:, :7], interp[:, :7])
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(interp[:, 7:], cpu[:, 7:], rtol=8 * eps, atol=8 * eps)


@tk.kernel
def narrow_floats(h, b, e4, e5, f: tk.Const):
    i = tk.index()
    v = f[i] * 3 + tk.float16(0.1)
    h[i] = v
    b[i] = f[i] * 1.7 + h[i]
    e4[i] = f[i] * 2.5
    e5[i] = f[i] * 0.3 - 1
    h[i] += tk.bfloat16(f[i]) * 1.001           # the literal is rounded to bfloat16 first (NEP 50)
    b[i] = b[i] * 1e-3 + h[i] / 7


@needs_cpu
def test_float16_bfloat16_fp8_compute_in_float32_and_round_on_store():
    def make():
        f = np.linspace(-300, 300, 257).astype(np.float32)
        return [np.zeros(257, np.float16), np.zeros(257, ml_dtypes.bfloat16),
                np.zeros(257, ml_dtypes.float8_e4m3fn), np.zeros(257, ml_dtypes.float8_e5m2), f]
    assert_same(both(narrow_floats, make, 257))


@tk.kernel
def casts(o, x: tk.Const):
    i = tk.index()
    v = x[i]
    o[i, 0] = tk.int8(v)
    o[i, 1] = tk.uint8(v)
    o[i, 2] = tk.int32(v * 1e9)
    o[i, 3] = tk.bool_(v)
    o[i, 4] = np.int16(v * 1000)
    o[i, 5] = x.dtype(v) * 2
    o[i, 6] = tk.float16(v) * 1000
    o[i, 7] = int(v) + float(v)


@needs_cpu
def test_casts_follow_c_conversions():
    def make():
        return [np.zeros((101, 8)), np.linspace(-400, 400, 101).astype(np.float32)]
    assert_same(both(casts, make, 101))


@tk.kernel
def bools(o, bb, x: tk.Const):
    i = tk.index()
    t = x[i] > 0.5
    bb[i] = t and x[i] < 0.8 or i == 3
    o[i, 0] = (t & (i > 2)) | (not t)
    o[i, 1] = bb[i] * 2
    o[i, 2] = ~t
    o[i, 3] = min(t, x[i] > 0.3)


@needs_cpu
def test_bools():
    assert_same(both(bools, lambda: [np.zeros((20, 4), np.int32), np.zeros(20, np.bool_),
                                     np.linspace(0, 1, 20).astype(np.float32)], 20))


@tk.func
def divmod_pair(a, b):
    return a // b, a % b


@tk.func
def steps(n):
    s = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        s += 1
        if s > 500:
            break
    return s


@tk.kernel
def control(out, x: tk.Const, n):
    i = tk.index()
    if i >= n:
        return
    v = x[i]
    q, r = divmod_pair(v, 7)
    out[i, 0] = q * 10 + r
    out[i, 1] = steps(v + 1)
    s = 0
    for k in range(10, 0, -3):
        if k == 4:
            continue
        s += k
    out[i, 2] = s
    out[i, 3] = 1 if 0 < v < 50 else (2 if v >= 50 else 3)


@needs_cpu
def test_control_flow_and_funcs():
    def make():
        return [np.full((70, 4), -1, np.int64), np.random.default_rng(2).integers(0, 100, 64), 64]
    assert_same(both(control, make, 70, wg=32))


@tk.kernel
def geometry(o):
    I = tk.index(tk.Global, tk.Cartesian)
    L = tk.index(tk.Local, tk.Cartesian)
    G = tk.index(tk.Group, tk.Cartesian)
    k = tk.index()
    o[k, 0] = I[0] * 1000 + I[-1]
    o[k, 1] = tk.index(tk.Local, tk.Linear) + 1000 * tk.index(tk.Group, tk.Linear)
    o[k, 2] = L[0] * 100 + G[0]
    o[k, 3] = tk.ndrange()[0] + tk.groupsize()[0] * 10 + tk.ngroups()[0] * 100


@needs_cpu
@pytest.mark.parametrize("ndrange,wg,rows", [((range(1, 15, 2), range(3, 12)), (4, 4), 63),
                                             ((3, 5, 6), (2, 2, 4), 90), (100, 16, 100)])
def test_geometry_with_ranges_and_partial_groups(ndrange, wg, rows):
    assert_same(both(geometry, lambda: [np.full((rows, 4), -1, np.int64)], ndrange, workgroupsize=wg))


@tk.func
def tile_sum(buf, lid, v, WG):
    buf[lid] = v
    tk.synchronize()
    s = WG // 2
    while s > 0:
        if lid < s:
            buf[lid] += buf[lid + s]
        tk.synchronize()
        s //= 2
    r = buf[0]
    tk.synchronize()
    return r


@tk.kernel
def barrier_loops(o, x: tk.Const, WG: tk.constexpr, reps):
    lid = tk.index(tk.Local, tk.Linear)
    i = tk.index()
    buf = tk.localmem(tk.float64, (WG,))
    p = tk.private(tk.float64, (2,))
    acc = 0.0
    for r in range(reps):                       # barriers in a loop, inside a func
        p[r % 2] = tile_sum(buf, lid, x[i] * (r + 1), WG)
        acc += p[r % 2]
    o[i] = acc if lid % 3 else -acc


@tk.kernel(unsafe_indices=True)
def unsafe_2d(o):
    i, j = tk.index(tk.Global, tk.Cartesian)
    buf = tk.localmem(tk.int64, (4, 4))
    li, lj = tk.index(tk.Local, tk.Cartesian)
    buf[li, lj] = tk.index()
    tk.synchronize()
    if i < 5 and j < 6:
        o[i, j] = buf[3 - li, 3 - lj]


@needs_cpu
def test_barriers_in_loops_funcs_private_and_unsafe_indices():
    assert_same(both(barrier_loops, lambda: [np.zeros(96), np.random.default_rng(3).random(96), 32, 3], 96, wg=32))
    assert_same(both(unsafe_2d, lambda: [np.full((5, 6), -1, np.int64)], (5, 6), wg=(4, 4)))


@tk.kernel
def collectives(o, x: tk.Const, bx: tk.Const):
    i = tk.index()
    v = x[i]
    o[i, 0] = tk.group_reduce(v, "add")
    o[i, 1] = tk.group_reduce(v, "mul")
    o[i, 2] = tk.group_reduce(v, "min") + tk.group_reduce(v, "max")
    o[i, 3] = tk.group_scan(v, "add")
    o[i, 4] = tk.group_scan(v, "max", inclusive=False)
    o[i, 5] = tk.group_scan(v, "min", inclusive=False)
    o[i, 6] = tk.group_reduce(bx[i], "and") + tk.group_reduce(bx[i], "or") * 2
    o[i, 7] = tk.group_scan(bx[i], "add") + tk.group_reduce(i, "add")


@needs_cpu
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float32, np.float64])
def test_collectives_match_the_cpu(dtype):
    def make():
        rng = np.random.default_rng(4)
        return [np.zeros((100, 8), dtype), rng.integers(1, 4, 100).astype(dtype), rng.random(100) < 0.7]
    assert_same(both(collectives, make, 100, wg=32))


@tk.kernel
def bitwise_collectives(o, x: tk.Const):
    i = tk.index()
    o[i, 0] = tk.group_reduce(x[i], "and")
    o[i, 1] = tk.group_reduce(x[i], "or")
    o[i, 2] = tk.group_scan(x[i], "and", inclusive=False)


def test_integer_and_reduction_is_bitwise():
    x = np.array([0xFF0, 0xF3F, 0x7F8, 0xFFE] * 4, np.int32)
    o = np.zeros((16, 3), np.int32)
    bitwise_collectives(INTERP, 16)(o, x, ndrange=16)
    assert (o[:, 0] == np.bitwise_and.reduce(x)).all() and (o[:, 1] == np.bitwise_or.reduce(x)).all()
    assert o[0, 2] == -1 and o[5, 2] == np.bitwise_and.reduce(x[:5])


@tk.kernel
def atomics(o, c, x: tk.Const):
    i = tk.index()
    v = x[i]
    o[i, 0] = tk.atomic_add(c, 0, v)
    o[i, 1] = tk.atomic_sub(c, 1, v)
    o[i, 2] = tk.atomic_min(c, 2, v)
    o[i, 3] = tk.atomic_max(c, (3,), v)
    o[i, 4] = tk.atomic_exchange(c, 4, v)
    o[i, 5] = tk.atomic_cas(c, 5, v - 1, v)


@needs_cpu
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64])
def test_atomics_return_the_old_value(dtype):
    assert_same(both(atomics, lambda: [np.zeros((10, 6), dtype), np.zeros(6, dtype),
                                       np.arange(1, 11).astype(dtype)], 10))


@tk.kernel
def randoms(o, key):
    i = tk.index()
    a, b, c, d = tk.random.philox4x32(i, i * 7, 3, 0xFFFFFFFF, 12345, key)
    o[i, 0] = a ^ b ^ c ^ d
    o[i, 1] = tk.random.bits(key, i)
    o[i, 2] = tk.float64(tk.random.uniform(key, i)) * 2 ** 24


@tk.kernel
def normals(g, key):
    i = tk.index()
    g[i] = tk.random.normal(key, i + 12345678901)


@needs_cpu
def test_random_numbers():
    key = tk.random.key(7)
    assert_same(both(randoms, lambda: [np.zeros((500, 3)), key], 500))
    g = np.zeros(500, np.float32)
    normals(INTERP)(g, key, ndrange=500)
    np.testing.assert_array_equal(g, tk.random.normal(key, np.arange(500, dtype=np.uint64) + 12345678901))
    gc = np.zeros(500, np.float32)
    normals(tk.CPU())(gc, key, ndrange=500)
    np.testing.assert_allclose(g, gc, rtol=4e-7, atol=1e-6)    # libm's float32 functions


# ----------------------------------------------------------------------------- kernel-language semantics

@tk.kernel
def uniform_ticket(o, c):
    t = tk.uniform(tk.atomic_add(c, 0, 1))      # evaluated once per group
    tk.synchronize()
    o[tk.index()] = t * 100 + tk.uniform(tk.index(tk.Local, tk.Linear))


@tk.kernel
def masked(o, c, x: tk.Const):
    i = tk.index()
    tk.atomic_add(c, 0, 1)
    o[i] = tk.group_reduce(x[i], "add")


@tk.kernel
def early_return(out, x: tk.Const, n):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float32, (16,))
    buf[lid] = 0.0
    tk.synchronize()
    if i >= n:
        return                                  # ends this item; the others still synchronize
    buf[lid] = x[i]
    tk.synchronize()
    out[i] = buf[lid ^ 1] + tk.group_reduce(x[i], "add")


@pytest.mark.parametrize("b", [INTERP, CHECK], ids=["INTERP", "CHECK"])
def test_uniform_masking_and_early_return(b):
    o, c = np.zeros(40, np.int64), np.zeros(1, np.int64)
    uniform_ticket(b, 16)(o, c, ndrange=40)
    assert c[0] == 3 and (o == np.repeat([0, 100, 200], 16)[:40]).all()
    o, c = np.zeros(40, np.int64), np.zeros(1, np.int64)
    masked(b, 16)(o, c, np.arange(40, dtype=np.int64), ndrange=37)   # 11 items past the ndrange
    assert c[0] == 37 and o[36] == sum(range(32, 37)) and o[37:].sum() == 0
    out = np.zeros(32, np.float32)
    early_return(b, 16)(out, np.arange(32, dtype=np.float32), 30, ndrange=32)
    x = np.arange(32, dtype=np.float32)
    assert out[29] == x[28] + x[16:30].sum() and out[30:].sum() == 0


@tk.kernel
def local_alias(o):
    i = tk.index()
    t = tk.float32(2.5)
    h = tk.float16(65504.0) * 2                  # float16-typed, computed in float32
    o[i, 0] = t * 3 + np.float32(0.1)
    o[i, 1] = h
    o[i, 2] = tk.float16(h)                      # an explicit cast rounds: inf


def test_explicit_casts_and_float16_range():
    o = np.zeros((1, 3), np.float32)
    local_alias(INTERP)(o, ndrange=1)
    assert o[0, 0] == np.float32(7.5) + np.float32(0.1) and o[0, 1] == 131008.0 and np.isinf(o[0, 2])


# ----------------------------------------------------------------------------- tk.print

@tk.kernel
def printer(x: tk.Const):
    i = tk.index()
    lid = tk.index(tk.Local, tk.Linear)
    tk.print("before", i, x[i], x[i] > 1, tk.index(tk.Global, tk.Cartesian), tk.uint8(255), 1.5e-7)
    tk.synchronize()
    tk.print("after", lid, tk.float16(x[i]) / 3)


def test_print_is_in_work_item_order_and_formatted_like_c(capsys):
    printer(INTERP, 4)(np.array([0.5, 1.5, 2.25, 3, 4, 5], np.float32), ndrange=6)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == ["before 0 0.5 0 0 255 1.5e-07", "before 1 1.5 1 1 255 1.5e-07",
                         "before 2 2.25 1 2 255 1.5e-07", "before 3 3 1 3 255 1.5e-07", "after 0 0.166667"]
    assert lines[5:8] == ["after 1 0.5", "after 2 0.75", "after 3 1"]
    assert lines[8:] == ["before 4 4 1 4 255 1.5e-07", "before 5 5 1 5 255 1.5e-07", "after 0 1.33333",
                         "after 1 1.66667"]


@needs_cpu
def test_print_matches_the_cpu(capfd):
    printer(tk.CPU(threads=1), 4)(np.array([0.5, 1.5, 2.25, 3, 4, 5], np.float32), ndrange=6)
    cpu = capfd.readouterr().out
    printer(INTERP, 4)(np.array([0.5, 1.5, 2.25, 3, 4, 5], np.float32), ndrange=6)
    sys.stdout.flush()
    assert capfd.readouterr().out == cpu


# ----------------------------------------------------------------------------- breakpoint / pdb

@tk.kernel
def stop_at_five(A, n):
    i = tk.index()
    v = A[i] * 2
    if i == 5:
        breakpoint()
    tk.synchronize()
    A[i] = v + n


def test_breakpoint_sees_the_users_line_and_locals(monkeypatch):
    seen = []

    def hook(*a, **k):
        f = sys._getframe(1)
        seen.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name, dict(f.f_locals)))
    monkeypatch.setattr(sys, "breakpointhook", hook)
    a = np.arange(8, dtype=np.float32)
    stop_at_five(INTERP, 4)(a, 1, ndrange=8)
    assert len(seen) == 1
    file, line, name, loc = seen[0]
    assert file == __file__ and line == line_of(stop_at_five, "breakpoint()") and name == "stop_at_five"
    assert loc["i"] == 5 and loc["v"] == 10.0 and loc["n"] == 1
    assert (a == np.arange(8) * 2 + 1).all()


def test_pdb_session_inside_a_kernel(monkeypatch, capsys):
    monkeypatch.delenv("PYTHONBREAKPOINT", raising=False)
    monkeypatch.setattr(sys, "breakpointhook", sys.__breakpointhook__)
    monkeypatch.setattr(sys, "stdin", io.StringIO("p i, v\nn\np tk.index(), A[i]\nc\n"))
    a = np.arange(8, dtype=np.float32)
    # pdb's `n` traces Python-level gc callbacks (hypothesis installs one): a collection
    # during the step would stop pdb inside that callback instead of at the kernel's line
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        stop_at_five(INTERP, 4)(a, 1, ndrange=8)
    finally:
        if gc_was_on:
            gc.enable()
    out = capsys.readouterr().out
    assert f"{__file__}({line_of(stop_at_five, 'tk.synchronize()')})stop_at_five()" in out
    assert "(5, np.float32(10.0))" in out                     # the item's locals
    assert f"{__file__}({line_of(stop_at_five, 'A[i] = v + n')})stop_at_five()" in out   # 'n' over the barrier
    assert "(5, np.float32(5.0))" in out                      # ... is still work item 5
    assert (a == np.arange(8) * 2 + 1).all()


@tk.kernel
def off_by_one(A):
    i = tk.index()
    A[i + 1] = 1.0


def test_tracebacks_show_the_users_line():
    with pytest.raises(IndexError) as e:
        off_by_one(INTERP)(np.zeros(8), ndrange=8)
    lines = [(fr.tb_frame.f_code.co_filename, fr.tb_lineno) for fr in _tb(e.value.__traceback__)]
    assert (__file__, line_of(off_by_one, "A[i + 1]")) in lines


def _tb(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


# ----------------------------------------------------------------------------- check mode

@pytest.mark.parametrize("b", [INTERP, CHECK], ids=["INTERP", "CHECK"])
def test_out_of_bounds_names_kernel_line_index_shape_and_item(b):
    with pytest.raises(KernelIndexError) as e:
        off_by_one(b)(np.zeros(8), ndrange=8)
    msg = str(e.value)
    assert "'off_by_one'" in msg and f"{__file__}:{line_of(off_by_one, 'A[i + 1]')}" in msg
    assert "index 8" in msg and "(8,)" in msg and "work item 7 (group 0, local 7)" in msg
    assert isinstance(e.value, IndexError) and isinstance(e.value, KernelCheckError)
    with pytest.raises(IndexError, match=r"index \(0, -1\)"):        # never a negative wrap-around
        neg_index(b)(np.zeros((4, 4)), ndrange=(4, 4))


@tk.kernel
def off_by_one_fixed(A):
    i = tk.index()
    if i + 1 < A.shape[0]:
        A[i + 1] = 1.0


def test_out_of_bounds_fixed_passes_check_mode():
    a = np.zeros(8)
    off_by_one_fixed(CHECK)(a, ndrange=8)
    assert (a == [0] + [1] * 7).all()


@tk.kernel
def neg_index(A):
    i, j = tk.index(tk.Global, tk.Cartesian)
    A[i, j - 1] = 1.0


@tk.kernel
def half_filled(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float32, (64,))
    if lid < 32:
        buf[lid] = x[tk.index()]
    tk.synchronize()
    out[tk.index()] = buf[63 - lid]


@tk.kernel
def filled(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float32, (64,))
    buf[lid] = x[tk.index()]
    tk.synchronize()
    out[tk.index()] = buf[63 - lid]


def test_check_uninitialized_local_read():
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(UninitializedReadError) as e:
        half_filled(CHECK, 64)(np.zeros(64, np.float32), x, ndrange=64)
    msg = str(e.value)
    assert "'half_filled'" in msg and f":{line_of(half_filled, 'buf[63 - lid]')}" in msg
    assert "local array 'buf' element 63" in msg and "work item 0 (group 0, local 0)" in msg
    out = np.zeros(64, np.float32)
    filled(CHECK, 64)(out, x, ndrange=64)
    assert (out == x[::-1]).all()


@tk.kernel
def shift_left(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float32, (64,))
    buf[lid] = x[tk.index()]
    if lid > 0:
        out[tk.index()] = buf[lid - 1]       # missing tk.synchronize()


@tk.kernel
def shift_left_fixed(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float32, (64,))
    buf[lid] = x[tk.index()]
    tk.synchronize()
    if lid > 0:
        out[tk.index()] = buf[lid - 1]


def test_check_local_memory_race():
    x = np.arange(128, dtype=np.float32)
    with pytest.raises(DataRaceError) as e:
        shift_left(CHECK, 64)(np.zeros(128, np.float32), x, ndrange=128)
    msg = str(e.value)
    assert "'shift_left'" in msg and "local array 'buf' element 0" in msg
    assert f"work item 0 (group 0, local 0) wrote it at {__file__}:{line_of(shift_left, 'buf[lid] = x')}" in msg
    assert f"work item 1 (group 0, local 1) reads it at {__file__}:{line_of(shift_left, 'buf[lid - 1]')}" in msg
    assert "no tk.synchronize() between them" in msg
    out = np.zeros(128, np.float32)
    shift_left(INTERP, 64)(out, x, ndrange=128)                # without check mode: no complaint
    shift_left_fixed(CHECK, 64)(out, x, ndrange=128)


@tk.kernel
def wrap_store(out, x: tk.Const):
    i = tk.index()
    out[i % 100] = x[i]                        # items 100.. overwrite the elements of 0..


@tk.kernel
def wrap_store_atomic(out, x: tk.Const):
    i = tk.index()
    tk.atomic_add(out, i % 100, x[i])


def test_check_global_race_across_groups():
    x = np.ones(256, np.float32)
    with pytest.raises(DataRaceError) as e:
        wrap_store(CHECK, 64)(np.zeros(100, np.float32), x, ndrange=256)
    msg = str(e.value)
    assert "array 'out' element 0" in msg and "work item 0 (group 0, local 0) wrote it" in msg
    assert "work item 100 (group 1, local 36) writes it" in msg and "different workgroups" in msg
    out = np.zeros(100, np.float32)
    wrap_store_atomic(CHECK, 64)(out, x, ndrange=256)
    assert out.sum() == 256


@tk.kernel
def sync_some(out):
    lid = tk.index(tk.Local, tk.Linear)
    if lid < 4:
        tk.synchronize()
    out[tk.index()] = 1


@tk.kernel
def reduce_or_sync(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    if lid < 4:
        out[tk.index()] = tk.group_reduce(x[lid], "add")
    else:
        tk.synchronize()


@tk.kernel
def sync_all(out):
    lid = tk.index(tk.Local, tk.Linear)
    if tk.index(tk.Group, tk.Linear) < 4:      # uniform: every item of a group agrees
        tk.synchronize()
    out[tk.index()] = lid


@pytest.mark.parametrize("backend", [INTERP, CHECK], ids=["INTERP", "CHECK"])
def test_divergent_barrier_is_a_compile_error(backend):
    # SPEC section 3: a barrier or collective under a condition that depends on the work item is
    # a tk.CompileError naming the line on every backend (the interpreter used to run the kernel
    # and raise DivergentBarrierError only when the items actually diverged)
    with pytest.raises(tk.CompileError, match="non-uniform control flow") as e:
        sync_some(backend, 16)(np.zeros(16, np.int32), ndrange=16)
    assert f"{__file__}:{line_of(sync_some, 'tk.synchronize()')}" in str(e.value)
    with pytest.raises(tk.CompileError, match="tk.group_reduce"):
        reduce_or_sync(backend, 16)(np.zeros(16, np.int32), np.ones(16, np.int32), ndrange=16)
    out = np.zeros(32, np.int32)
    sync_all(backend, 16)(out, ndrange=32)
    assert (out == np.arange(32) % 16).all()


def test_check_divergent_barrier(monkeypatch):
    # the lockstep scheduler's own run-time check, behind the static one (switched off here)
    import tinykernels.runtime.interp.backend as interp_backend
    monkeypatch.setattr(interp_backend, "_check_barriers", lambda ir: None)
    for k in (sync_some, reduce_or_sync):     # forget what this test lets through, when it ends
        monkeypatch.setattr(k(CHECK, 16), "_compiled", {})
    with pytest.raises(DivergentBarrierError) as e:
        sync_some(CHECK, 16)(np.zeros(16, np.int32), ndrange=16)
    msg = str(e.value)
    assert "'sync_some'" in msg and f"tk.synchronize() at {__file__}:{line_of(sync_some, 'tk.synchronize()')}" in msg
    assert "work item 0 (group 0, local 0)" in msg and "work item 15 (group 0, local 15)" in msg
    assert "finished the kernel without reaching it" in msg
    with pytest.raises(DivergentBarrierError, match="tk.group_reduce"):
        reduce_or_sync(CHECK, 16)(np.zeros(16, np.int32), np.ones(16, np.int32), ndrange=16)
    out = np.zeros(32, np.int32)
    sync_all(CHECK, 16)(out, ndrange=32)
    assert (out == np.arange(32) % 16).all()


@tk.kernel
def cas_lock_sum(lock, total, x: tk.Const):
    i = tk.index()
    done = False
    while not done:
        if tk.atomic_cas(lock, 0, 0, 1) == 0:
            total[0] += x[i]                   # plain accesses, ordered by the lock's atomics
            tk.atomic_exchange(lock, 0, 0)
            done = True


@tk.kernel
def private_garbage(out):
    p = tk.private(tk.int32, (4,))
    p[0] = 1
    out[tk.index()] = p[0] + p[1]


@tk.kernel
def writes_const(A: tk.Const):
    A[tk.index()] = 1.0


def test_check_mode_lock_private_and_const():
    x = np.arange(2000, dtype=np.int64)
    total = np.zeros(1, np.int64)
    cas_lock_sum(CHECK)(np.zeros(1, np.int32), total, x, ndrange=x.size)     # no false positive
    assert total[0] == x.sum()
    with pytest.raises(UninitializedReadError, match="private array 'p' element 1"):
        private_garbage(CHECK)(np.zeros(4, np.int32), ndrange=4)
    with pytest.raises(tk.CompileError, match="read-only"):
        writes_const(INTERP)(np.zeros(4), ndrange=4)


@tk.kernel
def add_into(A, B: tk.Const):
    i = tk.index()
    A[i] += B[i]


def test_check_mode_reports_a_const_argument_aliasing_another():
    a = np.ones(10)
    with pytest.raises(tk.LaunchError, match="'B' is annotated tk.Const"):
        add_into(CHECK)(a[1:], a[:-1], ndrange=9)
    add_into(CHECK)(a[:5], a[5:], ndrange=5)                    # disjoint halves are fine
    assert (a == [2] * 5 + [1] * 5).all()


@tk.kernel
def square(A):
    i = tk.index()
    A[i] *= A[i]


@needs_cpu
def test_autodiff_records_interpreter_launches():
    a0 = np.linspace(-2, 2, 64).astype(np.float32)
    A = tk.asarray(a0.copy(), backend=INTERP)
    dA = tk.asarray(np.ones(64, np.float32), backend=INTERP)

    def f(A):
        square(INTERP)(A, ndrange=64)
    tk.autodiff(tk.Reverse, f, tk.Duplicated(A, dA))
    np.testing.assert_allclose(A.numpy(), a0 * a0)
    np.testing.assert_allclose(dA.numpy(), 2 * a0)


@tk.kernel
def weak_int_ops(out, x: tk.Const, v, f: tk.Const):
    i = tk.index()
    w = int(f[i])                       # a run-time Python int, like the argument v
    out[i, 0] = x[i] + v
    out[i, 1] = v - x[i]
    out[i, 2] = x[i] * v
    out[i, 3] = x[i] // v
    out[i, 4] = x[i] % v
    out[i, 5] = x[i] & v
    out[i, 6] = x[i] | w
    out[i, 7] = w ^ x[i]
    out[i, 8] = x[i] >> v
    out[i, 9] = x[i]
    out[i, 9] += w
    out[i, 10] = x[i]
    out[i, 10] ^= v


@pytest.mark.parametrize("t", [np.uint8, np.int8, np.int16, np.uint32])
@pytest.mark.parametrize("v", [300, -1, 2**40 + 7])
def test_run_time_python_int_that_does_not_fit_wraps_as_compiled(t, v):
    # a Python int argument (or int(x)) outside the range of the integer it meets is converted
    # to that type, wrapping, on the compiled backends; the interpreter raised NumPy's
    # OverflowError instead (and agreed only for values in range)
    x = np.array([1, 7, 100, 255 if t != np.int8 else -128], t)
    f = np.full(4, float(v), np.float64)
    outs = []
    for b in (INTERP, tk.CPU()):
        out = np.zeros((4, 11), t)
        weak_int_ops(b)(out, x, v, f, ndrange=4)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    vw = np.array(v).astype(np.int64).astype(t)          # the wrapped value
    with np.errstate(all="ignore"):
        expect = [x + vw, vw - x, x * vw, x // vw if vw else 0 * x, x % vw if vw else 0 * x, x & vw, x | vw,
                  vw ^ x, x >> vw, x + vw, x ^ vw]
    bits = 8 * x.itemsize
    if not 0 <= vw < bits:               # past the width: 0, or -1 for a negative value (language.md)
        expect[8] = outs[1][:, 8] if vw < 0 else np.where(x < 0, -1, 0)
    np.testing.assert_array_equal(outs[0], np.stack(expect, 1).astype(t))


@tk.kernel
def _shifted_copy(a, b, k):
    i = tk.index()
    a[i] = b[i + k]


@pytest.mark.parametrize("check", [False, True])
def test_debug_argument_is_accepted_and_every_access_checked(check, monkeypatch):
    """SPEC 3 and 9: a backend made with debug=True bounds-checks every access on every
    backend; tk.Interpreter(debug=True) was a TypeError. The interpreter checks whatever
    debug says (no negative wrap-around either) and reports the flag as the others do."""
    monkeypatch.delenv("TK_DEBUG", raising=False)
    assert tk.Interpreter(check=check, debug=True).debug and not tk.Interpreter(check=check).debug
    monkeypatch.setenv("TK_DEBUG", "1")
    assert tk.Interpreter(check=check).debug and not tk.Interpreter(check=check, debug=False).debug
    for be in (tk.Interpreter(check=check, debug=True), tk.Interpreter(check=check, debug=False)):
        a, b = np.zeros(4, np.float32), np.arange(4, dtype=np.float32)
        for k, bad in ((1, "index 4 "), (-1, "index -1 ")):
            with pytest.raises(IndexError, match=f"kernel '_shifted_copy' at .*test_interpreter.py:.*{bad}.*shape \\(4,\\)"):
                _shifted_copy(be)(a, b, k, ndrange=4)


@tk.kernel
def cas_loop_max(A, x: tk.Const):
    """The compare-and-swap loop as CUDA's guide writes it: a plain first read, then CAS until
    the value read is the one replaced."""
    v = x[tk.index()]
    cur = A[0]
    while cur < v:
        old = tk.atomic_cas(A, 0, cur, v)
        if old == cur:
            break
        cur = old


@tk.kernel
def plain_write_vs_atomic(A):
    i = tk.index()
    if i == 0:
        A[0] = 5
    else:
        tk.atomic_add(A, 0, 1)


def test_check_mode_accepts_the_cas_loop_and_reports_a_plain_write_beside_an_atomic():
    x = np.random.default_rng(3).integers(-1000, 1000, 300).astype(np.int32)
    for wgs in (1, 64):
        A = np.full(1, -2**31, np.int32)
        cas_loop_max(CHECK, wgs)(A, x, ndrange=x.size)                    # no false positive
        assert A[0] == x.max()
    with pytest.raises(DataRaceError, match="atomically updates|wrote it"):
        plain_write_vs_atomic(CHECK, 4)(np.zeros(1, np.int32), ndrange=8)
