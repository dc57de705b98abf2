"""Locals holding compile-time constants (``N = tk.groupsize()[0]``, constexprs, literals and
arithmetic of those, ``tk.uniform`` of one) are usable as localmem/private shapes: the
KernelAbstractions tiling idiom. Shapes known only at run time are a clear CompileError."""
import numpy as np
import pytest

import tinykernels as tk


def _backends():
    out = [tk.CPU(), tk.Interpreter()]
    avail = tk.backends()
    for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
        if avail.get(name, (False,))[0]:
            out.append(tk.backend(dev))
    return out


BACKENDS = _backends()


def _on(b, x):
    return x.copy() if b.name in ("CPU", "Interpreter") else tk.asarray(x, backend=b)


def _host(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


@tk.kernel
def tiled_transpose(B, A: tk.Const):
    N = tk.groupsize()[0]
    tile = tk.localmem(A.dtype, (N, N + 1))          # padded against bank conflicts
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    tile[li, lj] = A[gi * N + li, gj * N + lj]
    tk.synchronize()
    B[gj * N + li, gi * N + lj] = tile[lj, li]


@tk.kernel
def tiled_matmul(C, A: tk.Const, B: tk.Const, TILE: tk.constexpr):
    T = tk.uniform(TILE)                              # a constant stays a constant
    gs = tk.groupsize()
    NI, NJ = gs[0], gs[1]
    As = tk.localmem(A.dtype, (NI, T))
    Bs = tk.localmem(B.dtype, (T, NJ))
    acc = tk.private(C.dtype, (1,))
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    acc[0] = 0.0
    for t0 in range(0, A.shape[1], T):
        for q in range(lj, T, NJ):
            As[li, q] = A[i, t0 + q]
        for q in range(li, T, NI):
            Bs[q, lj] = B[t0 + q, j]
        tk.synchronize()
        for q in range(T):
            acc[0] += As[li, q] * Bs[q, lj]
        tk.synchronize()
    C[i, j] = acc[0]


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("static", [True, False])
def test_tiled_transpose_with_groupsize_local(b, static):
    A = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    B = _on(b, np.zeros((8, 16), np.float32))
    if static:
        tiled_transpose(b, (4, 4))(B, _on(b, A), ndrange=(16, 8))
    else:
        tiled_transpose(b)(B, _on(b, A), ndrange=(16, 8), workgroupsize=(4, 4))
    tk.synchronize(b)
    np.testing.assert_array_equal(_host(B), A.T)


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_tiled_matmul_with_constexpr_and_groupsize_locals(b):
    rng = np.random.default_rng(0)
    A = rng.random((8, 12)).astype(np.float32)
    Bm = rng.random((12, 8)).astype(np.float32)
    C = _on(b, np.zeros((8, 8), np.float32))
    tiled_matmul(b, (4, 2))(C, _on(b, A), _on(b, Bm), 4, ndrange=(8, 8))
    tk.synchronize(b)
    np.testing.assert_allclose(_host(C), A.astype(np.float64) @ Bm, rtol=1e-5)


def test_cuda_source_for_the_tiled_transpose():
    try:
        src = tiled_transpose.source("CUDA", np.zeros((8, 8), np.float32), np.zeros((8, 8), np.float32),
                                     ndrange=(8, 8), workgroupsize=(4, 4))
    except (tk.LaunchError, NotImplementedError, RuntimeError) as e:
        pytest.skip(f"CUDA source unavailable here: {e}")
    assert "[20]" in src                                # 4 * (4 + 1) elements of shared memory


@tk.kernel
def shape_from_argument(B, n):
    t = tk.localmem(B.dtype, (n,))
    t[0] = 1.0
    B[0] = t[0]


@tk.kernel
def shape_from_reassigned_local(B):
    n = 4
    if B.shape[0] > 2:
        n = 8
    t = tk.private(B.dtype, (n,))
    t[0] = 1.0
    B[0] = t[0]


@tk.kernel
def shape_from_loop_local(B):
    for k in range(4):
        m = 4
        t = tk.private(B.dtype, (m,))
        t[0] = 1.0
        B[0] = t[0]


@tk.kernel
def shape_not_int(B):
    t = tk.private(B.dtype, (2.5,))
    B[0] = 1.0


@pytest.mark.parametrize("b", [tk.CPU(), tk.Interpreter()], ids=lambda b: b.name)
@pytest.mark.parametrize("kern,line,what", [
    (shape_from_argument, "tk.localmem(B.dtype, (n,))", "known only at run time"),
    (shape_from_reassigned_local, "tk.private(B.dtype, (n,))", "known only at run time"),
    (shape_from_loop_local, "tk.private(B.dtype, (m,))", "known only at run time"),
    (shape_not_int, "tk.private(B.dtype, (2.5,))", "not an integer"),
])
def test_runtime_shapes_are_compile_errors(b, kern, line, what):
    with pytest.raises(tk.CompileError, match=what) as ei:
        kern(b, 1)(np.zeros(4), *([3] if kern is shape_from_argument else []), ndrange=1)
    e = ei.value
    assert e.filename.endswith("test_const_locals.py") and line in (e.source_line or "")
    assert "tk.constexpr" in str(e)
