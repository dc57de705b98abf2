"""The faster adjoint shapes of ``passes/adjoint_gather.py``: the gather adjoint of
constant-offset stencil reads, per-group scalar partial sums, plain adds for single-offset
reads and dropped dead stores. Every shape is checked against central finite differences
in float64 on the CPU and against the CPU's gradients on the interpreter, OpenCL (float64)
and WebGPU (float32); the generated code is checked for the shape itself (no atomics)."""
import math
import re

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.autodiff import derived
from tinykernels.passes.adjoint_gather import Gather, footprint

CPU = tk.CPU()
RNG = np.random.default_rng(11)


def D(x, seed=None):
    x = np.array(x, dtype=np.float64)
    return tk.Duplicated(x, np.zeros_like(x) if seed is None else np.array(seed, dtype=np.float64))


def _backends():
    out = [("INTERP", np.float64)]
    if tk.backends()["OpenCL"][0]:
        out.append(("CL", np.float64))
    from tinykernels.runtime.webgpu import WebGPU
    if WebGPU.available()[0]:
        out.append(("WEBGPU", np.float32))
    return out


def grads(backend, kernel, ndrange, arrays: dict, seeds: dict, scalars: dict, dtype=np.float64):
    """(array gradients, scalar gradients) of one launch of ``kernel(*arrays, *scalars)``
    with output seeds ``seeds``, from ``tk.adjoint(kernel)`` on ``backend``."""
    b = tk.backend(backend)
    dev = lambda x: tk.asarray(np.array(x, dtype=dtype), backend=b)  # a copy: seeds are consumed  # noqa: E731
    shad = {n: dev(seeds.get(n, np.zeros_like(a))) for n, a in arrays.items()}
    sshad = {n: dev(np.zeros(1)) for n in scalars}
    args = []
    for n, a in arrays.items():
        args += [dev(a), shad[n]]
    for n, v in scalars.items():
        args += [dtype(v), sshad[n]]
    tk.adjoint(kernel)(b)(*args, ndrange=ndrange)
    tk.synchronize(b)
    return ({n: s.numpy().astype(np.float64) for n, s in shad.items()},
            [float(s.numpy()[0]) for s in sshad.values()])


# --- stencils ------------------------------------------------------------------------------------

@tk.kernel
def diffuse2(T2, T: tk.Const, dt, lam):
    i, j = tk.index(tk.Global, tk.Cartesian)
    T2[i, j] = T[i, j] + dt * lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1] + T[i, j + 1] - 4.0 * T[i, j])


@tk.kernel
def diffuse3(T2, T: tk.Const, lam):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    T2[i, j, k] = T[i, j, k] + lam * (T[i - 1, j, k] + T[i + 1, j, k] + T[i, j - 1, k] + T[i, j + 1, k]
                                      + T[i, j, k - 1] + T[i, j, k + 1] - 6.0 * T[i, j, k])


@tk.kernel
def nonlinear3(T2, T: tk.Const, w):
    """3-D, nonlinear in the neighbours, a diagonal offset: every ring kernel (the last
    dimension's launched transposed) recomputes values from T at the source item."""
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    T2[i, j, k] = w * math.sin(T[i, j, k]) * (T[i, j, k - 1] + T[i, j + 1, k + 1]) + T[i - 1, j, k] ** 2


@tk.kernel
def guarded(T2, T: tk.Const, w):
    """Boundary ifs over the full range, a nonlinear function, a select guard."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    n = T.shape[0]
    m = T.shape[1]
    if i > 0 and i < n - 1 and j > 0:
        up = T[i - 1, j] if j < m - 1 else 0.0
        T2[i, j] = w * math.sin(T[i, j]) * (up + T[i + 1, j]) + T[i, j - 1] ** 2
    else:
        T2[i, j] = math.exp(-T[i, j] * T[i, j])


@tk.kernel
def smooth1(y, x: tk.Const, w):
    """1-D, linear index, neighbours guarded by selects."""
    i = tk.index()
    n = x.shape[0]
    left = x[i - 1] if i > 0 else 0.0
    right = x[i + 2] if i + 2 < n else 0.0
    y[i] = w * math.sin(x[i]) * (left + right) + math.exp(-x[i] * x[i])


CASES = {
    "2d interior": (diffuse2, (13, 11), (range(1, 12), range(1, 10)), {"dt": 0.3, "lam": 0.7}),
    "2d full range, step 2": (diffuse2, (13, 11), (range(1, 12, 2), range(2, 10, 3)), {"dt": 0.3, "lam": 0.7}),
    "2d negative step": (diffuse2, (9, 8), (range(7, 0, -2), range(1, 7)), {"dt": 0.3, "lam": 0.7}),
    "3d interior": (diffuse3, (7, 6, 9), (range(1, 6), range(1, 5), range(1, 8)), {"lam": 0.2}),
    "3d nonlinear, offset range": (nonlinear3, (7, 6, 9), (range(1, 7), range(0, 5), range(1, 8)), {"w": 0.6}),
    "boundary ifs": (guarded, (12, 10), (12, 10), {"w": 0.8}),
    "boundary ifs, offset range": (guarded, (12, 10), (range(1, 12), range(0, 10, 2)), {"w": 0.8}),
    "1d linear selects": (smooth1, (37,), 37, {"w": 0.7}),
    "1d linear, range(1, n-2, 2)": (smooth1, (37,), range(1, 35, 2), {"w": 0.7}),
}


def _case(name, dtype=np.float64):
    kern, shape, ndr, scal = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    arrays = {"out": np.zeros(shape), "inp": rng.standard_normal(shape)}
    seeds = {"out": rng.standard_normal(shape)}
    return kern, ndr, arrays, seeds, scal


@pytest.mark.parametrize("name", list(CASES))
def test_stencil_adjoints_match_finite_differences(name):
    kern, ndr, arrays, seeds, scal = _case(name)
    args = [D(arrays["out"], seeds["out"]), D(arrays["inp"])] + [tk.Active(v) for v in scal.values()]
    tk.gradcheck(lambda out, inp, *s: kern(CPU)(out, inp, *s, ndrange=ndr), *args, rtol=1e-6, directions=4)


@pytest.mark.parametrize("backend,dtype", _backends())
@pytest.mark.parametrize("name", list(CASES))
def test_stencil_adjoints_agree_across_backends(name, backend, dtype):
    kern, ndr, arrays, seeds, scal = _case(name)
    ref, gref = grads("CPU", kern, ndr, arrays, seeds, scal)
    got, g = grads(backend, kern, ndr, arrays, seeds, scal, dtype)
    tol = 1e-10 if dtype is np.float64 else 2e-4
    np.testing.assert_allclose(got["inp"], ref["inp"], rtol=tol, atol=tol)
    np.testing.assert_allclose(got["out"], ref["out"], rtol=tol, atol=tol)
    np.testing.assert_allclose(g, gref, rtol=tol * 10, atol=tol * 100)


def test_2d_stencil_gradient_equals_the_transposed_stencil():
    """The gather covers the ring outside an interior range: compare with NumPy's scatter."""
    n, m = 10, 9
    T, dT2 = RNG.standard_normal((n, m)), RNG.standard_normal((n, m))
    dT, ddt, dlam = np.zeros((n, m)), np.zeros(1), np.zeros(1)
    tk.adjoint(diffuse2)(CPU)(np.zeros((n, m)), dT2.copy(), T, dT, 0.5, ddt, 0.25, dlam,
                              ndrange=(range(1, n - 1), range(1, m - 1)))
    g = np.zeros((n, m))
    a = 0.5 * 0.25
    w = dT2[1:-1, 1:-1]
    g[1:-1, 1:-1] += w * (1 - 4 * a)
    g[:-2, 1:-1] += a * w
    g[2:, 1:-1] += a * w
    g[1:-1, :-2] += a * w
    g[1:-1, 2:] += a * w
    np.testing.assert_allclose(dT, g, rtol=1e-13, atol=1e-13)
    lap = T[:-2, 1:-1] + T[2:, 1:-1] + T[1:-1, :-2] + T[1:-1, 2:] - 4 * T[1:-1, 1:-1]
    np.testing.assert_allclose(ddt[0], 0.25 * (w * lap).sum(), rtol=1e-12)
    np.testing.assert_allclose(dlam[0], 0.5 * (w * lap).sum(), rtol=1e-12)


def _adjoint_source(kernel, mode, *args, ndrange):
    return derived(kernel, mode, ("T2", "T", "dt", "lam")).source("CPU", *args, ndrange=ndrange)


def test_stencil_adjoint_has_no_atomics_and_a_gather_kernel():
    T = np.zeros((8, 8))
    args = (T, T, T, T, 0.1, np.zeros(1), 0.2, np.zeros(1), np.zeros(1), np.zeros(1, np.int64),
            np.zeros((1, 2), np.int64))
    main = _adjoint_source(diffuse2, "reverse", *args, ndrange=(8, 8))
    body = main[main.index("tk_group_body("):]
    assert "tk_atomic" not in body and "a_T2[" not in body          # no atomics, no dead primal store
    gather = _adjoint_source(diffuse2, "gather:T", *args, *(np.int64(1),) * 9, ndrange=(8, 8))
    assert "tk_atomic" not in gather[gather.index("tk_chunk("):]


def test_gather_kernels_keep_only_each_offsets_contribution():
    """For the linear 2-D stencil the interior gather loads only the output shadow (one
    load per offset, no T, no tests); the ring kernel clamps and masks with selects (no
    branches, no divisions for unit steps); the CPU main adjoint sums dt's and lam's
    partials per thread in its flat loop."""
    T = np.zeros((8, 8))
    args = (T, T, T, T, 0.1, np.zeros(1), 0.2, np.zeros(1), np.zeros(1), np.zeros(1, np.int64),
            np.zeros((1, 2), np.int64), *(np.int64(1),) * 9)
    def item_loop(src):
        body = src[src.index("for (tk_idx tk_pl"):]
        return body[:body.index("\n}\n")]
    inner = item_loop(_adjoint_source(diffuse2, "gather_in:T", *args, ndrange=(8, 8)))
    assert inner.count("a__d_T2[") == 5 and "a_T[" not in inner and "if (" not in inner
    ring = item_loop(_adjoint_source(diffuse2, "gather_ring:T", *args, *(np.int64(1),) * 6, ndrange=(8, 8)))
    assert "if (" not in ring and "floordiv" not in ring and "a_T[" not in ring and " ? " in ring
    main = _adjoint_source(diffuse2, "reverse_threads", *args[:11], ndrange=(8, 8))
    assert "tk_group(" not in main and "omp simd reduction(+:tk_sum0, tk_sum1)" in main
    assert "a__d_dt[tk_t] = tk_sum0;" in main and "a__d_lam[tk_t] = tk_sum1;" in main


def test_ring_kernels_move_only_their_slab_dimension():
    """A ring launch per dimension moves (jumps) only the coordinate of its slabs: the others,
    the contiguous last one among them in "gather_ring0", stay plain, so the loop along a
    row vectorizes; several clamped coordinates mask with nested selects, not "&&" (a branch)."""
    T = np.zeros((8, 8))
    args = (T, T, T, T, 0.1, np.zeros(1), 0.2, np.zeros(1), np.zeros(1), np.zeros(1, np.int64),
            np.zeros((1, 2), np.int64), *(np.int64(1),) * 15)
    ring0 = _adjoint_source(diffuse2, "gather_ring0:T", *args, ndrange=(4, 4))
    assert "v__tk_gj1 = tk_g1;" in ring0 and "v__tk_gj0 = (tk_g0 + ((tk_g0 >= p__tk_gc0)" in ring0
    ring1 = _adjoint_source(diffuse2, "gather_ring1:T", *args, ndrange=(4, 4))
    assert "v__tk_gj0 = tk_g0;" in ring1 and "v__tk_gj1 = (tk_g1 + ((tk_g1 >= p__tk_gc1)" in ring1
    assert "&&" not in ring1[ring1.index("tk_chunk("):] and "? ((v__tk_graw0 == v__tk_gpos0) ?" in ring1
    # the mask selects integer bits ANDed with the contribution's, not the float itself: GCC
    # sinks the loads of a selected float under the condition and then vectorizes nothing
    assert "tk_f64_bits(v__tk_gpart)" in ring1 and "? v__tk_gpart : 0.0" not in ring1
    ring = _adjoint_source(diffuse2, "gather_ring:T", *args, ndrange=(4, 4))
    assert "p__tk_gj0 :" not in ring and "p__tk_gj1 :" not in ring      # one launch: nothing moves


@pytest.mark.parametrize("ndr,shape", [
    ((range(1, 9), range(1, 7)), (10, 8)),
    ((10, 8), (10, 8)),
    ((range(2, 5), range(0, 8, 3)), (10, 8)),
    ((range(1, 3), range(1, 7)), (4, 8)),
    ((range(1, 6), range(2, 4), range(0, 9)), (7, 6, 9)),
])
def test_gather_boxes_partition_the_footprint(ndr, shape):
    """The interior box and the ring boxes (their upper slab moved by the jump) cover the
    footprint once; in the interior box every source item exists (so its kernel tests
    nothing); a ring launch per dimension d, in which only the coordinates up to d may lie
    outside the interior (so only those are clamped), the last dimension's launched
    transposed in 3-D (its box's last two dimensions swapped)."""
    from tinykernels.kernel import parse_ndrange
    from tinykernels.passes.adjoint_gather import gather_boxes
    nd = len(shape)
    offs = tuple(tuple(s * (d == e) for e in range(nd)) for d in range(nd) for s in (-1, 1)) + ((0,) * nd,)
    g = Gather("T", "_d_T", "cart", offs)
    geom = parse_ndrange(ndr, "k")[0]
    items = set(np.ndindex(*[len(r) for r in (ndr if isinstance(ndr[0], range) else [range(n) for n in ndr])]))
    ranges = ndr if isinstance(ndr[0], range) else tuple(range(n) for n in ndr)
    sources = {tuple(r[p] for r, p in zip(ranges, pos)) for pos in items}
    seen = []
    boxes = gather_boxes(g, geom, shape)
    assert len(boxes) <= 1 + nd
    for mode, box, jumps in boxes:
        if mode == "gather_ringT:":                   # the last dimension's slabs, in 3-D
            assert nd == 3 and jumps[nd - 1][1] != 0 and all(j == 0 for _, j in jumps[:nd - 1])
        for J in np.ndindex(*[len(r) for r in box]):
            J = tuple(r[j] for r, j in zip(box, J))
            if mode == "gather_ringT:":               # launch order -> element order
                J = J[:nd - 2] + (J[nd - 1], J[nd - 2])
            if jumps:
                J = tuple(j + (jump if j >= cut else 0) for j, (cut, jump) in zip(J, jumps))
            seen.append(J)
            if mode == "gather_in:":
                assert all(tuple(a - c for a, c in zip(J, o)) in sources for o in offs)
            else:
                unit = all(geom[3 * d + 2] == 1 for d in range(nd))
                moved = [d for d in range(nd) if jumps is not None and jumps[d][1] != 0]
                if not unit:
                    assert mode == "gather:"
                elif not moved:                       # no interior: one generic ring launch
                    assert mode == "gather_ring:"
                else:
                    d, = moved
                    assert mode == ("gather_ringT:" if d == nd - 1 and nd == 3 else f"gather_ring{d}:")
                    inner = boxes[0][1]
                    assert all(inner[e].start <= J[e] < inner[e].stop for e in range(d + 1, nd))
    assert len(seen) == len(set(seen))
    want = {tuple(a + c for a, c in zip(I, o)) for I in sources for o in offs}
    want = {J for J in want if all(0 <= j < n for j, n in zip(J, shape))}
    assert want <= set(seen)
    fp = footprint(g, geom, shape)
    assert set(seen) == set(np.ndindex(*[r.stop for r in fp])) - {J for J in np.ndindex(*[r.stop for r in fp])
                                                                     if any(j < r.start for j, r in zip(J, fp))}


def test_footprint_covers_the_ring_and_clips_to_the_array():
    g = Gather("T", "_d_T", "cart", ((-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)))
    geom = (1, 8, 1, 1, 6, 1, 0, 1, 1)                       # range(1, 9) x range(1, 7)
    assert footprint(g, geom, (10, 8)) == (range(0, 10), range(0, 8))
    assert footprint(g, (0, 10, 1, 0, 8, 1, 0, 1, 1), (10, 8)) == (range(0, 10), range(0, 8))
    assert footprint(g, (8, 4, -2, 1, 6, 1, 0, 1, 1), (10, 8)) == (range(1, 10), range(0, 8))
    lin = Gather("x", "_d_x", "lin", ((-1,), (2,)))
    assert footprint(lin, (5, 3, 2, 0, 1, 1, 0, 1, 1), (20,)) == (range(0, 5),)



@pytest.mark.parametrize("ndr,shape", [
    ((range(1, 6), range(1, 5), range(1, 8)), (7, 6, 9)),
    ((range(2, 5), range(1, 5), range(0, 9)), (7, 6, 9)),
    ((7, 6, 9), (7, 6, 9)),
])
def test_peeled_gather_boxes_partition_the_footprint(ndr, shape):
    """The CPU's peeled 3-D boxes ("gather_inP:", "gather_ring<d>P:") take the footprint's
    whole last dimension and cover the footprint once, with no launch for the last
    dimension's slabs; where a peeled kernel's last coordinate lies in the interior's range
    (its unclamped loop) every source item in that coordinate exists; in 2-D nothing is
    peeled."""
    from tinykernels.kernel import parse_ndrange
    from tinykernels.passes.adjoint_gather import gather_boxes
    nd = len(shape)
    offs = tuple(tuple(s * (d == e) for e in range(nd)) for d in range(nd) for s in (-1, 1)) + ((0,) * nd,)
    g = Gather("T", "_d_T", "cart", offs)
    geom = parse_ndrange(ndr, "k")[0]
    ranges = ndr if isinstance(ndr[0], range) else tuple(range(n) for n in ndr)
    fp = footprint(g, geom, shape)
    boxes = gather_boxes(g, geom, shape, peel=True)
    assert [m for m, _, _ in boxes] == ["gather_inP:"] + [f"gather_ring{d}P:" for d, _ in enumerate(boxes[1:])]
    seen = []
    lo, hi = ranges[-1].start + 1, ranges[-1].stop - 1          # last coordinates with both sources
    for mode, box, jumps in boxes:
        assert box[-1] == fp[-1]
        for J in np.ndindex(*[len(r) for r in box]):
            J = tuple(r[j] for r, j in zip(box, J))
            if jumps:
                J = tuple(j + (jump if j >= cut else 0) for j, (cut, jump) in zip(J, jumps))
            seen.append(J)
            if mode == "gather_inP:" and lo <= J[-1] < hi:
                assert all(all(r.start <= a - c < r.stop for a, c, r in zip(J, o, ranges)) for o in offs)
    assert len(seen) == len(set(seen)) == math.prod(len(r) for r in fp)
    g2 = Gather("T", "_d_T", "cart", ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0)))
    geom2 = parse_ndrange((range(1, 5), range(1, 7)), "k")[0]
    assert [m for m, _, _ in gather_boxes(g2, geom2, (6, 8), peel=True)] == \
        ["gather_in:", "gather_ring0:", "gather_ring1:"]


def test_peeled_gather_kernel_splits_each_row_into_three_loops():
    """The C of a peeled gather kernel runs a row's interior in a loop of its own without
    clamping (it vectorizes) and the first and last few elements in loops that clamp and
    mask the last coordinate; the unpeeled kernel is one loop."""
    T = np.zeros((6, 6, 6))
    args = (T, T, T, T, 0.1, np.zeros(1), np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64),
            *(np.int64(1),) * 9)
    src = derived(diffuse3, "gather_inP:T", ("T2", "T", "lam")).source("CPU", *args, ndrange=(6, 6, 6))
    body = src[src.index("static void tk_chunk("):]
    loops = body.split("for (tk_idx tk_pl = ")[1:]
    assert [x[:x.index(";")] for x in loops] == ["(tk_idx)c0", "(tk_idx)tk_pa", "(tk_idx)tk_pb"]
    assert "v__tk_graw2 = " in loops[0] and "v__tk_graw2 = " in loops[2]
    assert not re.search(r"v__tk_graw\d = ", loops[1])
    assert "v__tk_graw0 = " not in loops[0] and "if (" not in loops[1]
    plain = derived(diffuse3, "gather_in:T", ("T2", "T", "lam")).source("CPU", *args, ndrange=(6, 6, 6))
    assert plain[plain.index("static void tk_chunk("):].count("for (tk_idx tk_pl = ") == 1


@pytest.mark.parametrize("backend", ["CPU", "INTERP"] + (["CL"] if tk.backends()["OpenCL"][0] else []))
@pytest.mark.parametrize("nd", [2, 3])
def test_ring_masks_are_exact_with_inf_and_nan_seeds(backend, nd):
    """A ring kernel masks the contribution of a clamped source item: exactly 0, even where
    that item's seed is inf or NaN (a mask by multiplication would give NaN); the gradient
    equals NumPy's scatter of the seeds."""
    shape = (6, 7, 8)[:nd]
    rng = np.random.default_rng(5)
    T = rng.standard_normal(shape)
    seed = rng.standard_normal(shape)
    seed[(1,) * nd] = np.inf                       # the first item of the launch range
    seed[tuple(n - 2 for n in shape)] = np.nan     # the last
    b = tk.backend(backend)
    dev = lambda x: tk.asarray(np.array(x), backend=b)  # noqa: E731
    dT, dT2, dl = dev(np.zeros(shape)), dev(seed), dev(np.zeros(1))
    ndr = tuple(range(1, n - 1) for n in shape)
    if nd == 2:
        tk.adjoint(diffuse2)(b)(dev(np.zeros(shape)), dT2, dev(T), dT, 0.5, dev(np.zeros(1)), 0.25, dl, ndrange=ndr)
        a, centre = 0.125, -4.0
    else:
        tk.adjoint(diffuse3)(b)(dev(np.zeros(shape)), dT2, dev(T), dT, 0.25, dl, ndrange=ndr)
        a, centre = 0.25, -6.0
    tk.synchronize(b)
    w = seed[(slice(1, -1),) * nd]
    want = np.zeros(shape)
    with np.errstate(invalid="ignore"):
        want[(slice(1, -1),) * nd] += w                 # per path, as the chain rule adds them:
        want[(slice(1, -1),) * nd] += (a * w) * centre  # inf - inf is NaN at the inf item
        for d in range(nd):
            for lo, hi in ((0, -2), (2, None)):
                sl = tuple(slice(lo, hi) if e == d else slice(1, -1) for e in range(nd))
                want[sl] += a * w
    got = dT.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    assert ok.sum() > 0.7 * ok.size
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-13, atol=1e-13)

# --- shapes that keep the atomics -----------------------------------------------------------------

@tk.kernel
def looped(y, x: tk.Const, w):
    i = tk.index()
    acc = 0.0
    for k in range(3):
        acc += w * x[i + k] * x[i + k]
    y[i] = acc


@tk.kernel
def inplace_neighbours(A, B: tk.Const):
    i = tk.index()
    A[i + 1] = A[i + 1] * B[i] + B[i + 2]


@tk.kernel
def data_index(y, x: tk.Const, idx: tk.Const):
    i = tk.index()
    y[i] = x[idx[i]] * x[i + 1]


def test_shapes_outside_the_gather_form_stay_correct():
    x = RNG.standard_normal(40)
    tk.gradcheck(lambda y, x_, w: looped(CPU)(y, x_, w, ndrange=36), D(np.zeros(40), RNG.standard_normal(40)),
                 D(x), tk.Active(0.6), rtol=1e-6)
    a, bb = RNG.standard_normal(30), RNG.standard_normal(30)
    tk.gradcheck(lambda A, B: inplace_neighbours(CPU)(A, B, ndrange=28), D(a, RNG.standard_normal(30)),
                 D(bb), rtol=1e-6)
    idx = RNG.integers(0, 30, 29).astype(np.int64)
    tk.gradcheck(lambda y, x_: data_index(CPU)(y, x_, idx, ndrange=29), D(np.zeros(29), RNG.standard_normal(29)),
                 D(RNG.standard_normal(30)), rtol=1e-6)


# --- one offset: plain adds ---------------------------------------------------------------------------

@tk.kernel
def shifted(y, x: tk.Const, s):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[i, j] = s * math.cos(x[i + 1, j - 2])


def test_single_offset_reads_add_plainly():
    x = RNG.standard_normal((9, 12))
    ndr = (range(0, 8), range(2, 12, 3))
    tk.gradcheck(lambda y, x_, s: shifted(CPU)(y, x_, s, ndrange=ndr), D(np.zeros((9, 12)), RNG.standard_normal((9, 12))),
                 D(x), tk.Active(1.3), rtol=1e-6)
    src = derived(shifted, "reverse", ("y", "x", "s")).source(
        "CPU", x, x, x, x, 1.0, np.zeros(1), np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64),
        ndrange=ndr)
    assert "tk_atomic" not in src[src.index("tk_group_body("):]


# --- scalar gradients -----------------------------------------------------------------------------

@tk.kernel
def triad(a, b: tk.Const, c: tk.Const, s):
    i = tk.index()
    a[i] = b[i] + s * c[i]


@pytest.mark.parametrize("n,wg", [(1, None), (255, None), (1000, None), (4099, 64), (70000, None)])
def test_scalar_gradient_with_partial_groups(n, wg):
    b, c, da = RNG.standard_normal(n), RNG.standard_normal(n), RNG.standard_normal(n)
    db, dc, ds = np.zeros(n), np.zeros(n), np.array([0.5])
    tk.adjoint(triad)(CPU, wg)(np.zeros(n), da.copy(), b, db, c, dc, 2.5, ds, ndrange=n)
    np.testing.assert_allclose(ds[0], 0.5 + (da * c).sum(), rtol=1e-12)
    np.testing.assert_allclose(db, da, rtol=1e-15)
    np.testing.assert_allclose(dc, 2.5 * da, rtol=1e-15)


@pytest.mark.parametrize("threads", [1, 6, 8])
def test_scalar_gradient_per_thread_partials_reused_launcher(threads):
    """Per-thread partial sums on the CPU: a launcher's partial buffer is reused, so a small
    launch (one thread does the work) after a big one must not add stale partials."""
    at = tk.adjoint(triad)(tk.CPU(threads=threads), 1024)    # <= 6 groups: the same buffer each time
    for n in (5000, 100, 6000, 3):
        b, c, da = RNG.standard_normal(n), RNG.standard_normal(n), RNG.standard_normal(n)
        ds = np.array([0.25])
        at(np.zeros(n), da.copy(), b, np.zeros(n), c, np.zeros(n), 1.5, ds, ndrange=n)
        np.testing.assert_allclose(ds[0], 0.25 + (da * c).sum(), rtol=1e-12)


@tk.kernel
def weighted2(y, x: tk.Const, p, q):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[i, j] = p * x[i, j] * x[i, j] + math.sin(q * x[i, j])


@pytest.mark.parametrize("backend,dtype", [("CPU", np.float64)] + _backends())
def test_scalar_gradients_2d_partial_groups_across_backends(backend, dtype):
    x, w = RNG.standard_normal((37, 29)), RNG.standard_normal((37, 29))
    ndr = (range(1, 36, 2), range(0, 29))
    arrays, seeds = {"y": np.zeros((37, 29)), "x": x}, {"y": w}
    _, (gp, gq) = grads(backend, weighted2, ndr, arrays, seeds, {"p": 0.7, "q": -1.1}, dtype)
    xs, ws = x[1:36:2], w[1:36:2]
    tol = 1e-11 if dtype is np.float64 else 1e-4
    np.testing.assert_allclose(gp, (ws * xs * xs).sum(), rtol=tol)
    np.testing.assert_allclose(gq, (ws * xs * np.cos(-1.1 * xs)).sum(), rtol=tol)


def test_triad_adjoint_writes_one_partial_per_group_and_no_output():
    n = 1000
    a = np.zeros(n, np.float32)
    src = derived(triad, "reverse", ("a", "b", "c", "s")).source(
        "CPU", a, a, a, a, a, a, np.float32(2.5), np.zeros(4), np.zeros(1), np.zeros(1, np.int64),
        np.zeros((1, 2), np.int64), ndrange=n)
    body = src[src.index("tk_group_body("):]
    assert "a__d_s[(tk_idx)(tk_grl)]" in body and "tk_atomic" not in body and "a_a[" not in body


# --- the adjoint leaves primal outputs alone ---------------------------------------------------------

@tk.kernel
def scale_into(B, A: tk.Const, s):
    i = tk.index()
    B[i] = A[i] * s


def test_adjoint_of_a_later_overwrite_does_not_change_what_an_earlier_launch_read():
    """The adjoint of the second launch used to re-write A (a write-only output there), so
    the first launch's adjoint saw the new A: d/ds was 100 instead of 15."""
    a, c = np.arange(1.0, 6.0), np.full(5, 10.0)

    def f(A, B, s):
        scale_into(CPU)(B, A, s, ndrange=5)       # reads A
        scale_into(CPU)(A, c, 2.0, ndrange=5)     # then overwrites it
    A, B = D(a.copy()), D(np.zeros(5), np.ones(5))
    (ds,) = tk.autodiff(tk.Reverse, f, A, B, tk.Active(0.5))
    assert ds == pytest.approx(15.0)
    np.testing.assert_allclose(A.primal, 2 * c)
    np.testing.assert_allclose(A.shadow, 0.5 * np.ones(5))


# --- tk.adjoint of a kernel whose tape is sized by the counting pass ----------------------------------

@tk.kernel
def repeat_inplace(A, x: tk.Const, m: int):
    """Reads and writes A in a loop: the tape size comes from the counting pass, which runs
    the forward sweep and so writes A."""
    i = tk.index()
    for _ in range(m):
        A[i] = A[i] * x[i] + 0.25 * math.sin(A[i])


def _repeat_numpy(a, x, m):
    for _ in range(m):
        a = a * x + 0.25 * np.sin(a)
    return a


@pytest.mark.parametrize("backend", ["CPU", "INTERP"] + (["CL"] if tk.backends()["OpenCL"][0] else []))
def test_adjoint_with_a_counted_tape_matches_finite_differences(backend):
    """tk.adjoint (without tk.autodiff) of a kernel whose loop reads and writes A: the
    counting pass used to leave its writes in A, so the adjoint differentiated at the wrong
    point. Checked against central differences in float64; A is left as it was."""
    n, m = 23, 3
    a0, x0, w = RNG.standard_normal(n), RNG.uniform(0.5, 1.5, n), RNG.standard_normal(n)
    b = tk.backend(backend)
    A, dA, x, dx = (tk.asarray(v.copy(), backend=b) for v in (a0, w, x0, np.zeros(n)))
    tk.adjoint(repeat_inplace)(b)(A, dA, x, dx, m, ndrange=n)
    tk.synchronize(b)
    np.testing.assert_array_equal(A.numpy(), a0)            # primal memory untouched
    eps = 1e-6
    loss = lambda a, xx: float((w * _repeat_numpy(a, xx, m)).sum())  # noqa: E731
    fd_a = np.array([(loss(a0 + eps * e, x0) - loss(a0 - eps * e, x0)) / (2 * eps) for e in np.eye(n)])
    fd_x = np.array([(loss(a0, x0 + eps * e) - loss(a0, x0 - eps * e)) / (2 * eps) for e in np.eye(n)])
    np.testing.assert_allclose(dA.numpy(), fd_a, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dx.numpy(), fd_x, rtol=1e-6, atol=1e-8)


@tk.kernel
def repeat_scaled(A, x: tk.Const, w, m: int):
    """A loop that reads and writes A (a counted tape) and a scalar gradient: on device
    backends the strip form runs STRIP items per work item with the tape offsets of each."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    for _ in range(m):
        A[i, j] = A[i, j] * x[i, j] * w + 0.25 * math.sin(A[i, j])


@pytest.mark.parametrize("backend,dtype", [("CPU", np.float64)] + _backends())
def test_scalar_gradient_with_a_counted_tape_matches_finite_differences(backend, dtype):
    shape, ndr, m = (9, 21), (range(1, 8, 3), range(2, 21)), 2
    a0, x0, wt = RNG.standard_normal(shape), RNG.uniform(0.5, 1.5, shape), RNG.standard_normal(shape)
    w = 0.9

    def primal(a, xx, ww):
        a = a.copy()
        for _ in range(m):
            sub = a[1:8:3, 2:21]
            a[1:8:3, 2:21] = sub * xx[1:8:3, 2:21] * ww + 0.25 * np.sin(sub)
        return float((wt * a).sum())
    eps = 1e-6
    fd_w = (primal(a0, x0, w + eps) - primal(a0, x0, w - eps)) / (2 * eps)
    fd_x = np.zeros(shape)
    for idx in np.ndindex(*shape):
        e = np.zeros(shape)
        e[idx] = eps
        fd_x[idx] = (primal(a0, x0 + e, w) - primal(a0, x0 - e, w)) / (2 * eps)
    b = tk.backend(backend)
    dev = lambda v: tk.asarray(np.array(v, dtype=dtype), backend=b)  # noqa: E731
    A, dA, X, dX, dW = dev(a0), dev(wt), dev(x0), dev(np.zeros(shape)), dev(np.zeros(1))
    tk.adjoint(repeat_scaled)(b)(A, dA, X, dX, dtype(w), dW, m, ndrange=ndr)
    tk.synchronize(b)
    tol = 1e-6 if dtype is np.float64 else 2e-3
    np.testing.assert_allclose(dX.numpy(), fd_x, rtol=tol, atol=tol)
    np.testing.assert_allclose(dW.numpy()[0], fd_w, rtol=tol, atol=tol)


@tk.kernel
def three_scalars(y, x: tk.Const, p, q, r):
    i = tk.index()
    y[i] = p * x[i] + q * x[i] * x[i] + r * math.sin(x[i])


@pytest.mark.parametrize("backend,dtype", [("CPU", np.float64)] + _backends())
def test_three_scalar_gradients(backend, dtype):
    """Device backends add the partials of two scalars per launch: three take two launches."""
    n = 3001
    x, w = RNG.standard_normal(n), RNG.standard_normal(n)
    _, g = grads(backend, three_scalars, n, {"y": np.zeros(n), "x": x}, {"y": w}, {"p": 0.5, "q": -0.3, "r": 2.0},
                 dtype)
    tol = 1e-11 if dtype is np.float64 else 1e-4
    np.testing.assert_allclose(g, [(w * x).sum(), (w * x * x).sum(), (w * np.sin(x)).sum()], rtol=tol)


@tk.kernel
def scale2(y, x: tk.Const, s):
    i = tk.index()
    y[i] = s * x[i]


@tk.kernel
def scale2d(y, x: tk.Const, s):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[i, j] = s * x[i, j]


@tk.kernel
def strip_loop_kernel(y, x: tk.Const, p):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[i, j] = p * math.exp(0.1 * x[i, j]) + p * p * x[i, j]


@pytest.mark.parametrize("backend,dtype", _backends())
def test_strip_form_as_a_loop(backend, dtype, monkeypatch):
    """Item adjoints too big to unroll run the strip as a loop: the same gradients."""
    from tinykernels.passes import adjoint_gather
    monkeypatch.setattr(adjoint_gather, "STRIP_UNROLL", 0)
    x, w = RNG.standard_normal((11, 37)), RNG.standard_normal((11, 37))
    ndr = (range(1, 10), range(3, 37, 2))
    arrays, seeds = {"y": np.zeros((11, 37)), "x": x}, {"y": w}
    ref, gref = grads("CPU", strip_loop_kernel, ndr, arrays, seeds, {"p": 0.7})
    got, g = grads(backend, strip_loop_kernel, ndr, arrays, seeds, {"p": 0.7}, dtype)
    tol = 1e-10 if dtype is np.float64 else 2e-4
    np.testing.assert_allclose(got["x"], ref["x"], rtol=tol, atol=tol)
    np.testing.assert_allclose(g, gref, rtol=tol * 10)


@pytest.mark.parametrize("backend", [b for b, _ in _backends()])
@pytest.mark.parametrize("scalar", [np.float32(0.75), 0.75])
def test_float32_scalar_gradient_sums_strips_in_float32_and_stays_accurate(backend, scalar):
    """A float32 scalar on float32 data: the strip form accumulates its items in float32 and
    writes float32 partials (no float64 to halve the vector width), which the device adds up
    in float64; the gradient matches float64 NumPy to float32 rounding. A Python float (a
    float64 scalar) keeps float64 partials. Both on 100003 items, in a 2-D launch too."""
    b = tk.backend(backend)
    rng = np.random.default_rng(5)        # the same data whichever tests ran before
    for k, shape, ndr in ((scale2, (100003,), 100003), (scale2d, (37, 2711), (range(1, 36), range(2, 2709)))):
        x, w = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
        X, dX, Y, dY = (tk.asarray(v.copy(), backend=b) for v in (x, np.zeros(shape, np.float32),
                                                                    np.zeros(shape, np.float32), w))
        dS = tk.asarray(np.zeros(1, np.float32 if backend == "WEBGPU" else np.float64), backend=b)
        tk.adjoint(k)(b)(Y, dY, X, dX, scalar, dS, ndrange=ndr)
        tk.synchronize(b)
        sel = tuple(slice(r.start, r.stop) for r in ndr) if isinstance(ndr, tuple) else slice(0, ndr)
        terms = w[sel].astype(np.float64) * x[sel]
        # float32 strips (and, on WebGPU, a float32 total): the rounding error scales with the
        # sum of the terms' magnitudes, not with the total, which cancels to ~1/4000 of it
        np.testing.assert_allclose(dS.numpy()[0], terms.sum(), rtol=1e-5, atol=1e-8 * np.abs(terms).sum())
        np.testing.assert_allclose(dX.numpy()[sel], np.float32(scalar) * w[sel], rtol=1e-6)


def test_strip_form_partials_take_the_scalars_float_type():
    if not tk.backends()["OpenCL"][0]:
        pytest.skip("no OpenCL")
    a = np.zeros(300, np.float32)
    for s, pdt, want in ((np.float32(0.5), np.float32, "float"), (0.5, np.float64, "double")):
        args = (a, a, a, a, s, np.zeros(1, pdt), np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 2), np.int64),
                *(np.int64(1),) * 9)
        src = derived(scale2, "reverse_strip", ("y", "x", "s")).source("CL", *args, ndrange=300)
        assert f"__global {want} * a__d_s," in src and f"{want} v__ad" in src
        assert ("(double)" in src[src.index("tk_kernel("):]) == (want == "double")


@pytest.mark.parametrize("backend,dtype", _backends())
@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 1000, 70001])
def test_device_partial_sums_add_exactly_the_first_n(backend, dtype, n):
    """The device-side sum of scalar partials (each of the group's items sums a contiguous
    share, then the group reduces): every one of the first ``n`` partials counts once, none
    after them; one and two shadows per launch."""
    from tinykernels._autodiff_kernels import add_all
    be = tk.backend(backend)
    rng = np.random.default_rng(n)
    parts = [rng.standard_normal(n + 300).astype(dtype) for _ in range(3)]
    dst = [tk.asarray(np.full(1, 0.5, dtype), backend=be) for _ in range(3)]
    src = [tk.asarray(p, backend=be) for p in parts]
    add_all(be, list(zip(dst, src)), n)
    tk.synchronize(be)
    tol = 1e-12 if dtype is np.float64 else 1e-3
    for d, p in zip(dst, parts):
        want = 0.5 + np.sum(p[:n].astype(np.float64))
        np.testing.assert_allclose(d.numpy()[0], want, rtol=tol, atol=tol * max(1, n) ** 0.5)


@pytest.mark.parametrize("backend,dtype", _backends())
@pytest.mark.parametrize("contiguous", [False, True])
def test_strip_layouts_give_the_same_gradients(backend, dtype, contiguous, monkeypatch):
    """Both strip layouts (each work item's STRIP items interleaved across the launch, for
    GPUs; contiguous, for runtimes that run work items as a loop on a CPU, like PoCL) cover
    every item once, with partial strips, starts and steps, in 1-D and 2-D."""
    b = tk.backend(backend)
    monkeypatch.setattr(b, "items_in_loops", contiguous)
    for k, shape, ndr in ((scale2, (1000,), range(3, 1000, 3)), (weighted2, (13, 301), (range(1, 12, 2), range(2, 299))),
                          (three_scalars, (4099,), 4099)):
        x, w = RNG.standard_normal(shape), RNG.standard_normal(shape)
        scalars = {"s": 0.7} if k is scale2 else {"p": 0.7, "q": -1.1} if k is weighted2 else \
            {"p": 0.5, "q": -0.3, "r": 2.0}
        arrays, seeds = {"y": np.zeros(shape), "x": x}, {"y": w}
        ref, gref = grads("CPU", k, ndr, arrays, seeds, scalars)
        got, g = grads(b, k, ndr, arrays, seeds, scalars, dtype)
        tol = 1e-10 if dtype is np.float64 else 2e-4
        np.testing.assert_allclose(got["x"], ref["x"], rtol=tol, atol=tol)
        np.testing.assert_allclose(g, gref, rtol=tol * 10, atol=tol)


def test_opencl_on_a_cpu_takes_contiguous_strips():
    """PoCL runs a group's work items as a vectorized loop: interleaved strips read each
    array as STRIP streams at once (triad's adjoint about 2x slower), so a CPU device gets
    the contiguous layout (work item w: items STRIP w ... STRIP w + STRIP - 1)."""
    if not tk.backends()["OpenCL"][0]:
        pytest.skip("no OpenCL")
    from tinykernels.autodiff import _main_mode
    b = tk.backend("CL")
    assert b.items_in_loops == (b._dev.device.type & 2 != 0)      # CL_DEVICE_TYPE_CPU
    unit, stepped = (0, 300, 1) + (0, 1, 1) * 2, (0, 100, 3) + (0, 1, 1) * 2
    assert _main_mode(b, 0, unit, 1) == ("reverse_stripc1" if b.items_in_loops else "reverse_strip1")
    assert _main_mode(b, 0, stepped, 1) == ("reverse_stripc" if b.items_in_loops else "reverse_strip")
    assert _main_mode(tk.CPU(threads=2), 2, unit, 1) == "reverse_threads"
    a = np.zeros(300, np.float32)
    args = (a, a, a, a, np.float32(0.5), np.zeros(1, np.float32), np.zeros(1), np.zeros(1, np.int64),
            np.zeros((1, 2), np.int64), *(np.int64(1),) * 9)
    srcs = {m: derived(scale2, m, ("y", "x", "s")).source("CL", *args, ndrange=300)
            for m in ("reverse_strip", "reverse_stripc")}
    assert "(uint64_t)(tk_p0) * (uint64_t)(INT64_C(16))" in srcs["reverse_stripc"]
    assert "(uint64_t)(tk_p0) * (uint64_t)(INT64_C(16))" not in srcs["reverse_strip"]
    # unit steps: an item's coordinate is start + position, a stride the compiler knows
    a2 = np.zeros((4, 300), np.float32)
    args2 = (a2, a2, a2, a2) + args[4:]
    src2 = {m: derived(scale2d, m, ("y", "x", "s")).source("CL", *args2, ndrange=(4, range(2, 290)))
            for m in ("reverse_stripc", "reverse_stripc1")}
    assert "(uint64_t)(v__tk_spos) * (uint64_t)(p__tk_gt1)" in src2["reverse_stripc"]
    assert "p__tk_gt1)" not in src2["reverse_stripc1"].split("{", 1)[1]


@tk.kernel
def stencil_or_square(y, x: tk.Const, s, STENCIL: tk.constexpr):
    i = tk.index()
    if STENCIL:
        y[i] = s * (x[i] + 2.0 * x[i + 2])
    else:
        y[i] = s * x[i] * x[i]


def _device_backends():
    return [(b, dt) for b, dt in _backends() if b != "INTERP"]


@pytest.mark.parametrize("backend,dtype", _device_backends())
def test_device_adjoint_plan_is_cached_per_signature(backend, dtype, monkeypatch):
    """On device runtimes the adjoint's plan (tape, gathers, partials form) is looked up by
    the arguments' types and shapes without normalizing them again: a repeated call prepares
    the main adjoint once (its own launch), not twice (on OpenCL not at all: the launch
    itself is repeated without its host work). The key keeps apart what changes the
    specialization: a constexpr value (gather form or not), a shape, a dtype."""
    from tinykernels.autodiff import _main_mode
    b = tk.backend(backend)
    at = tk.adjoint(stencil_or_square)(b)
    for stencil, n in ((True, 300), (False, 300), (True, 4099), (False, 4099), (True, 300)):
        x, w = RNG.standard_normal(n), RNG.standard_normal(n)
        w[n - 2:] = 0.0                  # items 0 .. n - 3 write y
        dev = lambda v: tk.asarray(np.array(v, dtype=dtype), backend=b)  # noqa: E731
        Y, dY, X, dX, dS = dev(np.zeros(n)), dev(w), dev(x), dev(np.zeros(n)), dev(np.zeros(1))
        at(Y, dY, X, dX, dtype(0.7), dS, stencil, ndrange=n - 2)
        tk.synchronize(b)
        ws = w[:n - 2]
        want_dx = np.zeros(n)
        if stencil:
            want_dx[:n - 2] += 0.7 * ws
            want_dx[2:] += 1.4 * ws
            want_s = (ws * (x[:n - 2] + 2.0 * x[2:])).sum()
        else:
            want_dx[:n - 2] = 1.4 * x[:n - 2] * ws
            want_s = (ws * x[:n - 2] ** 2).sum()
        tol = 1e-10 if dtype is np.float64 else 2e-4
        np.testing.assert_allclose(dX.numpy(), want_dx, rtol=tol, atol=tol)
        np.testing.assert_allclose(dS.numpy()[0], want_s, rtol=tol * 10, atol=tol)
    # a repeated call: the main adjoint's instance is prepared once (by its launch)
    x = RNG.standard_normal(300)
    args = [tk.asarray(np.array(v, dtype=dtype), backend=b) for v in (np.zeros(300), x, x, np.zeros(300))]
    dS = tk.asarray(np.zeros(1, dtype), backend=b)
    call = lambda: at(args[0], args[1], args[2], args[3], dtype(0.5), dS, False, ndrange=300)  # noqa: E731
    call()
    adj = derived(stencil_or_square, _main_mode(b, 0, (0, 300, 1, 0, 1, 1, 0, 1, 1), 1), ("y", "x", "s"))(b)
    calls = []
    orig = type(adj)._prepare
    monkeypatch.setattr(type(adj), "_prepare", lambda self, *a, **k: (calls.append(self), orig(self, *a, **k))[1])
    call()
    # once by its launch; on OpenCL not at all (the repeated launch only enqueues again)
    assert sum(1 for c in calls if c is adj) == (0 if backend == "CL" else 1)


# --- the gathers' work groups on CPU OpenCL devices (rows, see adjoint_gather.gather_workgroup) ---

@tk.kernel
def wide3(T2, T: tk.Const, w):
    """3-D, offsets of 2 in every dimension, nonlinear."""
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    T2[i, j, k] = w * (T[i - 2, j, k] + T[i, j + 2, k] * T[i, j, k] + T[i, j, k - 2] - math.sin(T[i, j, k + 1]))


def _cpu_opencl():
    if not tk.backends()["OpenCL"][0]:
        pytest.skip("no OpenCL device")
    b = tk.backend("CL")
    if not b.items_in_loops:
        pytest.skip("the OpenCL device is not a CPU")
    return b


def test_gather_workgroup_is_a_row_segment_where_items_run_in_loops():
    from tinykernels.passes.adjoint_gather import GATHER_ROW, gather_workgroup
    assert gather_workgroup(3, True, 4096) == (1, 1, GATHER_ROW)
    assert gather_workgroup(2, True, 4096) == (1, GATHER_ROW)
    assert gather_workgroup(3, True, 16) == (1, 1, 16)          # capped by the device
    assert gather_workgroup(1, True, 4096) is None              # 1-D: the primal launch's groups
    assert gather_workgroup(3, False, 1024) is None             # GPUs, WebGPU, the interpreter


def test_opencl_gather_launches_take_row_groups(monkeypatch):
    """On a CPU OpenCL device every gather launch of a 3-D stencil adjoint runs groups of one
    row segment; the main adjoint keeps the primal launch's groups."""
    b = _cpu_opencl()
    from tinykernels.runtime import opencl as O
    seen = []
    orig = O.CLKernelInstance._launch

    def spy(self, args, ndrange, wg, stream):
        seen.append((self.name, wg))
        return orig(self, args, ndrange, wg, stream)
    monkeypatch.setattr(O.CLKernelInstance, "_launch", spy)
    n = (6, 5, 70)
    dev = (lambda x: tk.asarray(x, backend=b))  # noqa: E731
    T, dT2 = RNG.standard_normal(n), RNG.standard_normal(n)
    tk.adjoint(diffuse3)(b)(dev(np.zeros(n)), dev(dT2), dev(T), dev(np.zeros(n)), 0.2, dev(np.zeros(1)),
                            ndrange=tuple(range(1, m - 1) for m in n), workgroupsize=(2, 2, 4))
    tk.synchronize(b)
    gathers = [wg for name, wg in seen if "gather" in name]
    assert len(gathers) >= 2 and all(wg == (1, 1, 64) for wg in gathers), seen
    assert [wg for name, wg in seen if "reverse" in name] == [(2, 2, 4)], seen


ROW_CASES = {
    "3d rows of 148, several groups a row": (diffuse3, (5, 4, 150), (range(1, 4), range(1, 3), range(1, 149)),
                                             {"lam": 0.2}),
    "3d non-cubic, offsets of 2": (wide3, (6, 7, 75), (range(2, 6), range(0, 5), range(2, 74)), {"w": 0.6}),
    "3d 1-wide interior": (diffuse3, (3, 3, 3), (range(1, 2),) * 3, {"lam": 0.3}),
    "3d 2-wide interior": (diffuse3, (4, 4, 4), (range(1, 3),) * 3, {"lam": 0.3}),
    "3d 1-wide rows": (diffuse3, (9, 8, 3), (range(1, 8), range(1, 7), range(1, 2)), {"lam": 0.3}),
    "2d rows of 128": (diffuse2, (3, 130), (range(1, 2), range(1, 129)), {"dt": 0.3, "lam": 0.7}),
    "2d 2-wide rows": (diffuse2, (70, 4), (range(1, 69), range(1, 3)), {"dt": 0.3, "lam": 0.7}),
}


def _row_case(name):
    kern, shape, ndr, scal = ROW_CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    return kern, ndr, {"out": np.zeros(shape), "inp": rng.standard_normal(shape)}, \
        {"out": rng.standard_normal(shape)}, scal


@pytest.mark.parametrize("name", ["3d non-cubic, offsets of 2", "3d 1-wide interior"])
def test_row_group_cases_match_finite_differences_on_the_cpu(name):
    """The CPU's gradients, the reference of the next test, against central differences."""
    kern, ndr, arrays, seeds, scal = _row_case(name)
    args = [D(arrays["out"], seeds["out"]), D(arrays["inp"])] + [tk.Active(v) for v in scal.values()]
    tk.gradcheck(lambda out, inp, *s: kern(CPU)(out, inp, *s, ndrange=ndr), *args, rtol=1e-6, directions=4)


@pytest.mark.parametrize("name", list(ROW_CASES))
def test_opencl_row_group_gathers_are_exact(name):
    """Rows longer than a group (several groups a row, the last one partial), shorter than
    one, 1- and 2-wide interiors, wider offsets: the OpenCL gradients equal the CPU's."""
    _cpu_opencl()
    kern, ndr, arrays, seeds, scal = _row_case(name)
    ref, gref = grads("CPU", kern, ndr, arrays, seeds, scal)
    got, g = grads("CL", kern, ndr, arrays, seeds, scal)
    np.testing.assert_allclose(got["inp"], ref["inp"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got["out"], ref["out"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(g, gref, rtol=1e-9, atol=1e-8)


def test_opencl_adjoint_of_an_instance_with_a_static_workgroup():
    """The gathers take their own groups even when the adjoint was instantiated with a fixed
    work-group size (which its main launch keeps)."""
    b = _cpu_opencl()
    kern, ndr, arrays, seeds, scal = _row_case("3d non-cubic, offsets of 2")
    ref, gref = grads("CPU", kern, ndr, arrays, seeds, scal)
    dev = (lambda x: tk.asarray(np.array(x, dtype=np.float64), backend=b))  # noqa: E731
    dT2, dT, dw = dev(seeds["out"]), dev(np.zeros_like(arrays["inp"])), dev(np.zeros(1))
    tk.adjoint(kern)(b, (2, 2, 8))(dev(arrays["out"]), dT2, dev(arrays["inp"]), dT, 0.6, dw, ndrange=ndr)
    np.testing.assert_allclose(dT.numpy(), ref["inp"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dT2.numpy(), ref["out"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw.numpy()[0], gref[0], rtol=1e-9, atol=1e-8)


@tk.kernel
def _row_rms(y, x: tk.Const, w: tk.Const, eps):
    row = tk.index()
    n = x.shape[1]
    ss = x[row, 0] * 0
    for c in range(n):
        ss += x[row, c] * x[row, c]
    r = 1 / math.sqrt(ss / n + eps)
    for c in range(n):
        y[row, c] = x[row, c] * r * w[c]


def test_webgpu_adjoint_runs_one_item_per_work_item():
    """lavapipe stops a work item's loops after 65535 back edges (docs/webgpu.md). The strip
    form of the main adjoint ran 16 primal items in one work item, so a row kernel whose
    items each loop 2 x 1024 times (plus the CAS retries of the float atomics into dw) lost
    the adjoint of rows 12-31 of 32 silently (dx rows 0, dw short of their terms; found
    porting Pallas's RmsNormTest). On backends with ``bounded_loops`` the partials of the
    scalar (eps) are per work group instead, and every row's gradient is there."""
    if not tk.backends()["WebGPU"][0]:
        pytest.skip("WebGPU: no wgpu adapter")
    from tinykernels.autodiff import _main_mode
    b = tk.backend("WEBGPU")
    assert b.bounded_loops and _main_mode(b, 0, (0, 32, 1), 1) == "reverse"
    rows, n, eps = 32, 1024, 1e-6
    rng = np.random.default_rng(65535)
    x = rng.standard_normal((rows, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    dx, dw = tk.zeros((rows, n), backend=b), tk.zeros(n, backend=b)
    tk.autodiff(tk.Reverse, lambda y_, x_, w_: _row_rms(b)(y_, x_, w_, eps, ndrange=rows),
                tk.Duplicated(tk.zeros((rows, n), backend=b), tk.asarray(np.ones((rows, n), np.float32), backend=b)),
                tk.Duplicated(tk.asarray(x, backend=b), dx), tk.Duplicated(tk.asarray(w, backend=b), dw))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    r = 1 / np.sqrt((x64 * x64).mean(1, keepdims=True) + eps)
    want_dx = r * w64 - x64 * r ** 3 * (x64 * w64).mean(1, keepdims=True)
    want_dw = (x64 * r).sum(0)
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=0, atol=1e-3 * np.abs(want_dx).max())
    np.testing.assert_allclose(dw.numpy(), want_dw, rtol=0, atol=1e-4 * np.abs(x64 * r).sum(0).max())
