"""KernelAbstractions.jl's test suite (test/ localmem.jl, private.jl, convert.jl, unroll.jl,
specialfunctions.jl and test.jl's index, Val, zero-iteration-space and return tests) ported test by
test as tinykernels kernels. Julia's 1-based indices become 0-based (``lmem[N2 - i + 1]`` is
``lmem[n - 1 - i]``), ``@uniform`` is ``tk.uniform``, ``@private`` is ``tk.private``, ``Val{N}``
a ``tk.constexpr``, ``@unroll`` a plain ``for`` over a constant range. CPU, INTERP, INTERP:CHECK,
CL and WEBGPU; exact against NumPy.

Where SPEC differs from upstream (not ported): Julia's ``Int`` is int64 (int32 here on WebGPU,
which has no 64-bit integers); there is no Int128/UInt128 (upstream skips them too); ``@index``
returns Julia ``CartesianIndex`` objects, here a tuple of ints (stored one coordinate per array);
``SpecialFunctions.gamma`` has no SPEC counterpart (erf and ``1 - erf`` are ported); the partition/
NDIteration internals, ``adapt``, sparse arrays and LLVM-IR inspection of ``@Const`` are Julia
internals; ``@synchronize(cond)`` (a barrier only some iterations take) is an ``if`` on a uniform
condition around ``tk.synchronize()``; typetest's ``eltype(priv) === eltype(A)`` compares
types, and a dtype comparison in a kernel is a ``tk.CompileError`` ("dtype used where a number is
expected"; SPEC 3 makes ``A.dtype`` usable in ``localmem``, ``private`` and casts only), so the
port checks that a private array of ``A.dtype`` holds values only that type holds."""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, put


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)


def intt(be):
    """Julia's ``Int`` (int64), or int32 where the backend has no 64-bit integers."""
    return np.int64 if be.supports(np.dtype(np.int64)) else np.int32


def zeros(be, shape, dtype):
    return put(be, np.zeros(shape, dtype))


# --- localmem.jl ------------------------------------------------------------------------------

@tk.kernel
def localmem(A):
    n = tk.uniform(tk.groupsize()[0])
    n2 = tk.uniform(tk.groupsize()[0])
    I = tk.index(tk.Global, tk.Linear)
    i = tk.index(tk.Local, tk.Linear)
    lmem = tk.localmem(A.dtype, tk.groupsize()[0])
    lmem[i] = i + 1
    tk.synchronize()
    A[I] = lmem[n2 - 1 - i]
    A[I] += n - n2


@tk.kernel
def localmem2(A):
    n = tk.groupsize()[0]
    I = tk.index(tk.Global, tk.Linear)
    i = tk.index(tk.Local, tk.Linear)
    lmem = tk.localmem(A.dtype, tk.groupsize()[0])
    lmem[i] = i + 1 + 3
    for j in range(1, 3):
        lmem[i] -= j
        tk.synchronize()
    A[I] = lmem[n - 1 - i]


@tk.kernel(unsafe_indices=True)
def localmem_unsafe_indices(A):
    n = tk.groupsize()[0]
    gI = tk.index(tk.Group, tk.Linear)
    i = tk.index(tk.Local, tk.Linear)
    lmem = tk.localmem(A.dtype, tk.groupsize()[0])
    lmem[i] = i + 1
    tk.synchronize()
    I = gI * n + i
    if I < A.shape[0]:
        A[I] = lmem[n - 1 - i]


@tk.kernel
def many_localmem(A):
    n = tk.groupsize()[0]
    I = tk.index(tk.Global, tk.Linear)
    i = tk.index(tk.Local, tk.Linear)
    lmem1 = tk.localmem(A.dtype, tk.groupsize()[0])
    lmem2 = tk.localmem(A.dtype, tk.groupsize()[0])
    lmem1[i] = i
    lmem2[i] = 1
    tk.synchronize()
    A[I] = lmem1[n - 1 - i] + lmem2[n - 1 - i]


@pytest.mark.parametrize("kern", [localmem, localmem2, localmem_unsafe_indices, many_localmem],
                         ids=lambda k: k.name)
def test_localmem(be, kern):
    """localmem.jl: four groups of 16 each give 16:-1:1 (reversed through local memory; with a
    barrier in a loop; with unsafe indices and a hand guard; with two local arrays)."""
    A = zeros(be, 64, intt(be))
    kern(be, 16)(A, ndrange=64)
    np.testing.assert_array_equal(get(A), np.tile(np.arange(16, 0, -1), 4))


@tk.kernel(unsafe_indices=True)
def localmem_unsafe_partial(A):
    n = tk.groupsize()[0]
    gI = tk.index(tk.Group, tk.Linear)
    i = tk.index(tk.Local, tk.Linear)
    lmem = tk.localmem(A.dtype, tk.groupsize()[0])
    lmem[i] = i + 1
    tk.synchronize()
    I = gI * n + i
    if I < A.shape[0]:
        A[I] = lmem[n - 1 - i]


def test_localmem_unsafe_indices_partial_group(be):
    """localmem_unsafe_indices' own guard (``I <= length(A)``), exercised with an ndrange that
    is not a multiple of the group: every item of the last group still fills local memory."""
    A = zeros(be, 60, intt(be))
    localmem_unsafe_partial(be, 16)(A, ndrange=60)
    np.testing.assert_array_equal(get(A), np.tile(np.arange(16, 0, -1), 4)[:60])


# --- private.jl -------------------------------------------------------------------------------

@tk.kernel
def stmt_form():
    bs = tk.uniform(tk.groupsize()[0])
    s = tk.private(tk.int32, 1)
    s[0] = bs // 2
    tk.synchronize()


@tk.kernel
def private_k(A):
    n = tk.uniform(tk.groupsize()[0])
    I = tk.index(tk.Global, tk.Linear)
    i = tk.index(tk.Local, tk.Linear)
    priv = tk.private(A.dtype, 1)
    priv[0] = n - i
    tk.synchronize()
    A[I] = priv[0]


@tk.kernel
def forloop(A, N: tk.constexpr):
    I = tk.index(tk.Global, tk.Linear)
    i = tk.index(tk.Local, tk.Linear)
    priv = tk.private(A.dtype, N)
    for j in range(N):
        priv[j] = A[I, j]
    A[I, 0] = 0
    tk.synchronize()
    for j in range(N):
        k = (j + i) % N
        A[k, 0] += priv[j]
        tk.synchronize()


@tk.kernel
def typetest(A, B):
    priv = tk.private(A.dtype, 1)
    I = tk.index(tk.Global, tk.Cartesian)
    priv[0] = A[I]
    B[I] = priv[0] == A[I]


@tk.kernel
def reduce_private(out, A):
    I = tk.index(tk.Global, tk.Linear)
    priv = tk.private(A.dtype, 1)
    priv[0] = 0
    for k in range(A.shape[A.ndim - 1]):
        priv[0] += A[I, k]
    out[I] = priv[0]


def test_private(be):
    """private.jl: the statement form; a private value kept across a barrier (16:-1:1 per
    group); the "horrible" forloop rotation through column 0 with a barrier per step; a private
    array of the argument's element type; a private accumulator over the last axis."""
    it = intt(be)
    stmt_form(be, 16)(ndrange=16)
    A = zeros(be, 64, it)
    private_k(be, 16)(A, ndrange=64)
    np.testing.assert_array_equal(get(A), np.tile(np.arange(16, 0, -1), 4))

    A = put(be, np.ones((64, 64), it))
    forloop(be)(A, 64, ndrange=64, workgroupsize=64)
    a = get(A)
    assert (a[:, 0] == 64).all() and (a[:, 1:] == 1).all()

    B = zeros(be, (64, 64), np.bool_)          # values only A's own type holds survive the copy
    big = np.iinfo(it).max - np.arange(64 * 64, dtype=it).reshape(64, 64)
    typetest(be, (16, 16))(put(be, big), B, ndrange=(64, 64))
    assert get(B).all()
    B = zeros(be, (64, 64), np.bool_)
    typetest(be, (16, 16))(put(be, np.full((64, 64), 0.1, np.float32)), B, ndrange=(64, 64))
    assert get(B).all()

    out = zeros(be, 64, np.float32)
    reduce_private(be, 8)(out, put(be, np.ones((64, 3), np.float32)), ndrange=64)
    np.testing.assert_array_equal(get(out), np.full(64, 3.0, np.float32))


# --- convert.jl -------------------------------------------------------------------------------

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@tk.kernel
def convert_kernel(A, B, T: tk.constexpr):
    tid = tk.index(tk.Global, tk.Linear)
    tid = int(tk.int32(tid))                          # Int -> Int
    x = A[tid]
    B[tid, 0] = T(math.ceil(x))
    B[tid, 1] = T(math.floor(x))
    B[tid, 2] = T(round(x))


@pytest.mark.parametrize("T", INT_TYPES)
def test_convert(be, T):
    """convert.jl: ceil, floor and round (ties to even, as Julia's) of rand() * 3 converted to
    every integer type and back to the float type (Int128/UInt128 skipped, as upstream)."""
    dt = np.dtype(T)
    if not be.supports(dt):
        pytest.skip(f"{be.name} has no {T}")
    ET = np.float64 if be.supports_float64 else np.float32
    a = (np.random.default_rng(32).random(32) * 3).astype(ET)
    a[:4] = [0.5, 1.5, 2.5, 2.0]                       # ties and an integer
    B = zeros(be, (32, 3), ET)
    convert_kernel(be, 4)(put(be, a), B, getattr(tk, T), ndrange=32)
    b = get(B)
    np.testing.assert_array_equal(b[:, 0], np.ceil(a))
    np.testing.assert_array_equal(b[:, 1], np.floor(a))
    np.testing.assert_array_equal(b[:, 2], np.round(a))


# --- unroll.jl --------------------------------------------------------------------------------

@tk.kernel
def kernel_unroll(a):
    for i in range(1, 6):
        a[i - 1] = i


@tk.kernel
def kernel_unroll_val(a, N: tk.constexpr):
    M = N + 5
    for i in range(6, M + 1):
        a[i - 6] = i
    tk.synchronize()


@tk.kernel
def kernel_unroll2(A):
    a = tk.private(tk.float32, 3)
    b = tk.private(tk.float32, 3)
    c = tk.private(tk.float32, (3, 3))
    for t in range(3):
        a[t] = t + 1
        b[t] = 3 - t
    I = tk.index()
    for m in range(1, 4):
        for j in range(3):
            for i in range(3):
                c[0, j] = m * a[0] * b[j]
        A[I] = c[0, 0]
        if m % 2 == 0:
            tk.synchronize()


def test_unroll(be):
    """unroll.jl: constant-bound loops (1:5, 6:N+5 with a Val), and nested loops over private
    arrays with a barrier every second iteration (``@synchronize(m % 2 == 0)``)."""
    a = zeros(be, 5, np.float32)
    kernel_unroll(be, 1)(a, ndrange=1)
    np.testing.assert_array_equal(get(a), [1, 2, 3, 4, 5])
    kernel_unroll_val(be, 1)(a, 5, ndrange=1)
    np.testing.assert_array_equal(get(a), [6, 7, 8, 9, 10])
    kernel_unroll2(be, 1)(a, ndrange=1)
    np.testing.assert_array_equal(get(a), [9, 7, 8, 9, 10])     # m = 3: 3 * 1 * 3


# --- specialfunctions.jl ----------------------------------------------------------------------

@tk.kernel
def erf_knl(A, B: tk.Const):
    I = tk.index()
    A[I] = math.erf(B[I])


@tk.kernel
def erfc_knl(A, B: tk.Const):
    I = tk.index()
    A[I] = 1 - math.erf(B[I])


def test_special_functions(be):
    """specialfunctions.jl: erf and erfc of float32 inputs, against float64 within a few ulp
    (erfc as 1 - erf: absolute error a few float32 ulp of 1)."""
    x = np.array([-1.0, -0.5, 0.0, 1.0e-3, 1.0, 2.0, 5.5], np.float32)
    ref = np.array([math.erf(float(v)) for v in x])
    y = zeros(be, x.size, np.float32)
    erf_knl(be)(y, put(be, x), ndrange=x.size)
    np.testing.assert_allclose(get(y), ref, rtol=4 * np.finfo(np.float32).eps, atol=1e-9)
    erfc_knl(be)(y, put(be, x), ndrange=x.size)
    np.testing.assert_allclose(get(y), 1 - ref, atol=4 * np.finfo(np.float32).eps)


# --- test.jl: indextest, Val, zero iteration space, return ------------------------------------

@tk.kernel
def index_linear_global(A):
    I = tk.index(tk.Global, tk.Linear)
    A[I] = I


@tk.kernel
def index_linear_local(A):
    I = tk.index(tk.Global, tk.Linear)
    A[I] = tk.index(tk.Local, tk.Linear)


@tk.kernel
def index_linear_group(A):
    I = tk.index(tk.Global, tk.Linear)
    A[I] = tk.index(tk.Group, tk.Linear)


@tk.kernel
def index_cartesian_global(A):
    i, j = tk.index(tk.Global, tk.Cartesian)
    A[i, j, 0] = i
    A[i, j, 1] = j


@tk.kernel
def index_cartesian_local_group(L, G):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    L[i, j, 0] = li
    L[i, j, 1] = lj
    G[i, j, 0] = gi
    G[i, j, 1] = gj


def test_indextest(be):
    """test.jl "indextest": linear global / local / group indices with a group of 8 (exact
    multiples and not: 7 x 7 and 5 items), Cartesian global indices of a 16 x 16 range, and
    (the TODO upstream) Cartesian local and group indices."""
    it = intt(be)
    A = zeros(be, 256, it)
    index_linear_global(be, 8)(A, ndrange=256)
    np.testing.assert_array_equal(get(A), np.arange(256))
    for n in (8, 16):
        A = zeros(be, n, it)
        index_linear_local(be, 8)(A, ndrange=n)
        np.testing.assert_array_equal(get(A), np.arange(n) % 8)
    A = zeros(be, 16, it)
    index_linear_group(be, 8)(A, ndrange=16)
    np.testing.assert_array_equal(get(A), np.arange(16) // 8)
    A = zeros(be, 49, it)
    index_linear_global(be, 8)(A, ndrange=49)
    np.testing.assert_array_equal(get(A), np.arange(49))
    A = zeros(be, 5, it)
    index_linear_local(be, 8)(A, ndrange=5)
    np.testing.assert_array_equal(get(A), np.arange(5))
    C = zeros(be, (16, 16, 2), it)
    index_cartesian_global(be, (8, 8))(C, ndrange=(16, 16))
    np.testing.assert_array_equal(get(C), np.stack(np.indices((16, 16)), axis=-1))
    L, G = zeros(be, (16, 12, 2), it), zeros(be, (16, 12, 2), it)
    index_cartesian_local_group(be, (8, 4))(L, G, ndrange=(16, 12))
    idx = np.stack(np.indices((16, 12)), axis=-1)
    np.testing.assert_array_equal(get(L), idx % [8, 4])
    np.testing.assert_array_equal(get(G), idx // [8, 4])


@tk.kernel
def kernel_val(a, m: tk.constexpr):
    I = tk.index()
    a[I] = m


@tk.kernel
def kernel_empty():
    pass


@tk.kernel
def gpu_return_kernel(x):
    i = tk.index()
    if i < x.shape[0] // 2:
        x[i] = 1
        return
    x[i] = 2


def test_val_empty_and_return(be):
    """test.jl: a ``Val(3)`` argument fills 1024 items; an empty kernel over ndrange 1 and 0
    (nothing runs, no error); a ``return`` inside ``if`` ends only those items."""
    A = zeros(be, 1024, intt(be))
    kernel_val(be)(A, 3, ndrange=1024)
    assert (get(A) == 3).all()
    kernel_empty(be, 1)(ndrange=1)
    kernel_empty(be, 1)(ndrange=0)
    tk.synchronize(be)
    A = zeros(be, 1024, intt(be))
    gpu_return_kernel(be)(A, ndrange=1024)
    a = get(A)
    assert (a[:512] == 1).all() and (a[512:] == 2).all()
