"""KernelAbstractions.jl's examples and KernelIntrinsics tests not yet in
test_ported_suites_ka.py: examples/histogram.jl (a histogram in shared memory, one block of bins
per pass of a loop with barriers, atomics on local and global memory; bins beyond the group
size), examples/performant_matmul.jl (the tiled matmul with a padded tile, bounds checks for
non-square and non-multiple sizes) and test/intrinsics.jl (launch parameters in 1-D to 3-D,
every index and size of a work item, a rank-4 launch refused). Julia's 1-based indices become
0-based, ``KI.localmemory`` is ``tk.localmem``, ``KI.barrier()`` ``tk.synchronize()``,
``Val(gs)`` a ``tk.constexpr``, ``@atomic a[i] += v`` ``tk.atomic_add``; KI's
``numworkgroups``/``workgroupsize`` launch is ``ndrange = numworkgroups * workgroupsize``.
Exact against NumPy (integer counts; the matmul's float32 sums against a float64 reference
within the reduction's rounding). CPU, INTERP, INTERP:CHECK, CL and WEBGPU: barriers, local
memory and atomics are where backends differ.

Where SPEC differs from upstream: KI's ``max_work_group_size``/``multiprocessor_count``/
``kernel_max_work_group_size`` queries are ``backend.max_workgroupsize`` only; a 4-D launch
(upstream's ArgumentError) is a ``tk.LaunchError``; the example sizes are cut for the 2-core
machine (a 40 x 24 by 24 x 56 matmul with 8 x 8 tiles instead of 1024 x 512 by 512 x 2048)."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, put, run

RNG = np.random.default_rng(1209)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def be(request):
    return tk.backend(request.param)



# --- examples/histogram.jl ---------------------------------------------------------------------

@tk.kernel
def histogram_kernel(hist, inp: tk.Const, gs: tk.constexpr):
    gid = tk.index(tk.Group, tk.Linear)
    lid = tk.index(tk.Local, tk.Linear)
    tid = gid * gs + lid
    n = hist.shape[0]
    shared = tk.localmem(hist.dtype, gs)
    # bins are the values 1..n; one block of gs bins per pass
    for min_element in range(1, n + 1, gs):
        shared[lid] = 0
        tk.synchronize()
        max_element = min_element + gs
        if max_element > n:
            max_element = n + 1
        b = inp[tid] if tid < inp.shape[0] else 0
        if b >= min_element and b < max_element:
            b -= min_element - 1
            tk.atomic_add(shared, b - 1, 1)
        tk.synchronize()
        if lid + min_element <= n:                      # Julia: lid + min_element - 1 <= N, lid 1-based
            tk.atomic_add(hist, lid + min_element - 1, shared[lid])


def histogram(be, inp, gs=256):
    n = int(inp.max())
    groups = -(-inp.size // gs)
    return run(be, histogram_kernel, np.zeros(n, np.int32), inp, gs, ndrange=groups * gs, workgroupsize=gs)[0]


@pytest.mark.parametrize("case", ["rand-gs6", "linear", "all-two"])
def test_histogram(be, case):
    """Upstream's three inputs: 1000 random values in 1..128 with groups of 6 (21 passes of
    the bin loop), 1..1024 (4 passes) and 512 twos; each against a host count."""
    inp, gs = {"rand-gs6": (RNG.integers(1, 129, 1000), 6), "linear": (np.arange(1, 1025), 256),
               "all-two": (np.full(512, 2), 256)}[case]
    inp = inp.astype(np.int32)
    if isinstance(be, tk.Interpreter) and case == "linear":
        gs = 64                                            # the interpreter: fewer items per group
    want = np.bincount(inp, minlength=int(inp.max()) + 1)[1:]
    np.testing.assert_array_equal(histogram(be, inp, gs), want)


# --- examples/performant_matmul.jl ------------------------------------------------------------

@tk.kernel
def coalesced_matmul(output, input1: tk.Const, input2: tk.Const, N, R, M, TDIM: tk.constexpr, BANK: tk.constexpr):
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    i, j = tk.index(tk.Local, tk.Cartesian)
    # +BANK columns against bank conflicts (the transposed padding of the row-major layout)
    tile1 = tk.localmem(output.dtype, (TDIM, TDIM + BANK))
    tile2 = tk.localmem(output.dtype, (TDIM, TDIM + BANK))
    outval = -output.dtype(0)
    num_tiles = (R + TDIM - 1) // TDIM
    for t in range(num_tiles):
        I = gi * TDIM + i
        J = gj * TDIM + j
        if I < N and t * TDIM + j < R:
            tile1[i, j] = input1[I, t * TDIM + j]
        else:
            tile1[i, j] = 0.0
        if t * TDIM + i < R and J < M:
            tile2[i, j] = input2[t * TDIM + i, J]
        else:
            tile2[i, j] = 0.0
        tk.synchronize()
        out = output.dtype(0)
        for k in range(TDIM):
            out += tile1[i, k] * tile2[k, j]
        outval += out
        tk.synchronize()
    I = gi * TDIM + i
    J = gj * TDIM + j
    if I < N and J < M:
        output[I, J] = outval


@pytest.mark.parametrize("bank", [0, 1])
def test_performant_matmul(be, bank):
    """Non-square, and no size a multiple of the tile: the bounds checks zero the tiles'
    edges; float32 against float64 within the reduction's rounding (R terms)."""
    N, R, M, T = 40, 24, 56, 8
    a = RNG.random((N, R)).astype(np.float32)
    b = RNG.random((R, M)).astype(np.float32)
    c = run(be, coalesced_matmul, np.zeros((N, M), np.float32), a, b, N, R, M, T, bank,
            ndrange=(-(-N // T) * T, -(-M // T) * T), workgroupsize=(T, T))[0]
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=R * np.finfo(np.float32).eps, atol=0)


# --- test/intrinsics.jl -----------------------------------------------------------------------

@tk.kernel
def launch_kernel1d(arr):
    (i,) = tk.index(tk.Local, tk.Cartesian)
    (gi,) = tk.index(tk.Group, tk.Cartesian)
    (ngi,) = tk.ngroups()
    arr[gi * ngi + i] = 1.0


@tk.kernel
def launch_kernel2d(arr):
    i, j = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    ngi, ngj = tk.ngroups()
    arr[gi * ngi + i, gj * ngj + j] = 1.0


@tk.kernel
def launch_kernel3d(arr):
    i, j, k = tk.index(tk.Local, tk.Cartesian)
    gi, gj, gk = tk.index(tk.Group, tk.Cartesian)
    ngi, ngj, ngk = tk.ngroups()
    arr[gi * ngi + i, gj * ngj + j, gk * ngk + k] = 1.0


def test_launch_parameters(be):
    """numworkgroups 2 x workgroupsize 2 along each of 1, 2, 3 dimensions (an int and a
    1-tuple in 1-D) fill every element; a rank-4 launch is a LaunchError naming the kernel."""
    for ndr, wg in ((4, 2), ((4,), (2,))):
        np.testing.assert_array_equal(run(be, launch_kernel1d, np.zeros(4, np.float32), ndrange=ndr,
                                          workgroupsize=wg)[0], 1)
    np.testing.assert_array_equal(run(be, launch_kernel2d, np.zeros((4, 4), np.float32), ndrange=(4, 4),
                                      workgroupsize=(2, 2))[0], 1)
    np.testing.assert_array_equal(run(be, launch_kernel3d, np.zeros((4, 4, 4), np.float32), ndrange=(4, 4, 4),
                                      workgroupsize=(2, 2, 2))[0], 1)
    arr = put(be, np.zeros((4, 4, 4), np.float32))
    with pytest.raises(tk.LaunchError, match="launch_kernel3d"):
        launch_kernel3d(be)(arr, ndrange=(4, 4, 4, 4), workgroupsize=(2, 2, 2))
    with pytest.raises(tk.LaunchError, match="launch_kernel3d"):
        launch_kernel3d(be)(arr, ndrange=(4, 4, 4), workgroupsize=(2, 2, 2, 2))
    assert isinstance(be.max_workgroupsize, int) and be.max_workgroupsize >= 1


@tk.kernel
def intrinsics_kernel(results):
    i = tk.index()
    if i < results.shape[0]:
        results[i, 0] = tk.ndrange()[0]
        results[i, 1] = i
        results[i, 2] = tk.groupsize()[0]
        results[i, 3] = tk.index(tk.Local, tk.Linear)
        results[i, 4] = tk.ngroups()[0]
        results[i, 5] = tk.index(tk.Group, tk.Linear)


@pytest.mark.parametrize("wg,ng", [(4, 4), (4, 3)])
def test_basic_intrinsics(be, wg, ng):
    """KernelData of every work item: global size and id, local size and id, number of groups
    and group id (upstream's 4 x 4; also 4 x 3, where groups and group size differ)."""
    n = wg * ng
    r = run(be, intrinsics_kernel, np.zeros((n, 6), np.int32), ndrange=n, workgroupsize=wg)[0]
    k = np.arange(n)
    np.testing.assert_array_equal(r, np.stack([np.full(n, n), k, np.full(n, wg), k % wg, np.full(n, ng), k // wg], 1))
