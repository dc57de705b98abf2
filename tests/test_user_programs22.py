"""A scientist's first programs, written from SPEC.md alone (audit user22): stencils with halos,
particle codes, a Monte Carlo, field reductions, streams and zero-copy interop. Each kernel source
runs unchanged on every backend of this machine (the point of these tests is portability) and is
checked against NumPy in float64."""
import math

import numpy as np
import pytest

import tinykernels as tk

BACKENDS = ["CPU", "INTERP", "INTERP:CHECK"]
_info = tk.backends()
for _name, _dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
    _ok, _why = _info[_name]
    BACKENDS.append(pytest.param(_dev, id=_dev, marks=pytest.mark.skipif(not _ok, reason=f"{_name}: {_why}")))


def _dtype(dev):
    """float64 where the backend has it, else float32 (WebGPU)."""
    return np.float64 if tk.backend(dev).supports_float64 else np.float32


def _tol(dtype):
    return dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)


# ------------------------------------------------------------------------ 2-D diffusion, halo 1

@tk.kernel
def diffuse2d(out, u: tk.Const, alpha):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4 * u[i, j])


@pytest.mark.parametrize("dev", BACKENDS)
def test_diffusion_2d_interior_range_ndrange(dev):
    """Explicit heat equation on a 10x13 grid with a fixed boundary: the interior is launched as
    ``ndrange=(range(1, nx-1), range(1, ny-1))`` (section 2), so the Cartesian index is the
    absolute coordinate and the halo rows are never written."""
    dt = _dtype(dev)
    nx, ny, steps, alpha = 10, 13, 5, 0.2
    rng = np.random.default_rng(1)
    u0 = rng.random((nx, ny)).astype(dt)
    b = tk.backend(dev)
    a = tk.asarray(u0.copy(), backend=b)     # asarray wraps a host array without copying
    c = tk.asarray(u0.copy(), backend=b)
    k = diffuse2d(b)
    for _ in range(steps):
        k(c, a, alpha, ndrange=(range(1, nx - 1), range(1, ny - 1)))
        a, c = c, a
    tk.synchronize(b)
    ref = u0.astype(np.float64)
    for _ in range(steps):
        new = ref.copy()
        new[1:-1, 1:-1] = ref[1:-1, 1:-1] + alpha * (ref[:-2, 1:-1] + ref[2:, 1:-1] + ref[1:-1, :-2]
                                                      + ref[1:-1, 2:] - 4 * ref[1:-1, 1:-1])
        ref = new
    np.testing.assert_allclose(a.numpy(), ref, **_tol(dt))


# ------------------------------------------------------------------------ 3-D wave, leapfrog

@tk.kernel
def wave3d(unew, u: tk.Const, uold: tk.Const, c2):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    lap = (u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k] + u[i, j + 1, k]
           + u[i, j, k - 1] + u[i, j, k + 1] - 6.0 * u[i, j, k])
    unew[i, j, k] = 2.0 * u[i, j, k] - uold[i, j, k] + c2 * lap


@pytest.mark.parametrize("dev", BACKENDS)
def test_wave_3d_leapfrog_with_static_workgroup(dev):
    """Second-order wave equation on a 6x7x9 grid with halo 1, three buffers rotated, a static
    (2, 2, 4) workgroup that does not divide the interior (masking)."""
    dt = _dtype(dev)
    n = (6, 7, 9)
    rng = np.random.default_rng(2)
    u0 = rng.standard_normal(n).astype(dt)
    u1 = (u0 + 0.01 * rng.standard_normal(n)).astype(dt)
    inner = (slice(1, -1),) * 3
    u1[...], u1[inner] = u0, u1[inner].copy()     # one fixed boundary shared by all three buffers
    b = tk.backend(dev)
    bufs = [tk.asarray(x.copy(), backend=b) for x in (u0, u1, u1)]
    k = wave3d(b, (2, 2, 4))
    interior = tuple(range(1, m - 1) for m in n)
    for _ in range(4):
        old, cur, new = bufs
        k(new, cur, old, 0.1, ndrange=interior)
        bufs = [cur, new, old]
    tk.synchronize(b)
    ro, rc = u0.astype(np.float64), u1.astype(np.float64)
    for _ in range(4):
        rn = rc.copy()
        s = (slice(1, -1),) * 3
        lap = (rc[:-2, 1:-1, 1:-1] + rc[2:, 1:-1, 1:-1] + rc[1:-1, :-2, 1:-1] + rc[1:-1, 2:, 1:-1]
               + rc[1:-1, 1:-1, :-2] + rc[1:-1, 1:-1, 2:] - 6.0 * rc[s])
        rn[s] = 2.0 * rc[s] - ro[s] + 0.1 * lap
        ro, rc = rc, rn
    np.testing.assert_allclose(bufs[1].numpy(), rc, **_tol(dt))


# ------------------------------------------------------------------------ N-body with local tiles

@tk.kernel(unsafe_indices=True)
def nbody_acc(acc, pos: tk.Const, n, eps2, TILE: tk.constexpr):
    i = tk.index()
    ii = min(i, n - 1)      # items past n still load their tile slot (masking would skip them)
    li = tk.index(tk.Local, tk.Linear)
    tile = tk.localmem(pos.dtype, (TILE, 3))
    ax = 0.0
    ay = 0.0
    az = 0.0
    ntiles = (n + TILE - 1) // TILE
    for t in range(ntiles):
        j = t * TILE + li
        if j < n:
            tile[li, 0] = pos[j, 0]
            tile[li, 1] = pos[j, 1]
            tile[li, 2] = pos[j, 2]
        tk.synchronize()
        for jj in range(TILE):
            if t * TILE + jj < n:
                dx = tile[jj, 0] - pos[ii, 0]
                dy = tile[jj, 1] - pos[ii, 1]
                dz = tile[jj, 2] - pos[ii, 2]
                r2 = dx * dx + dy * dy + dz * dz + eps2
                inv = 1.0 / (r2 * math.sqrt(r2))
                ax += dx * inv
                ay += dy * inv
                az += dz * inv
        tk.synchronize()
    if i < n:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@pytest.mark.parametrize("dev", BACKENDS)
def test_nbody_local_memory_tiles(dev):
    """All-pairs gravity with the positions staged through a workgroup-shared tile; n = 37 is no
    multiple of the 8-item tile. With default masking the items past n would skip their tile
    loads (section 3: they run no statement between barriers) and leave stale slots, so the
    kernel is ``unsafe_indices=True`` and guards itself, as KernelAbstractions users do."""
    dt = _dtype(dev)
    n, tile, eps2 = 37, 8, 0.01
    rng = np.random.default_rng(3)
    pos = rng.standard_normal((n, 3)).astype(dt)
    b = tk.backend(dev)
    acc = tk.zeros((n, 3), dt, backend=b)
    nbody_acc(b, tile)(acc, tk.asarray(pos, backend=b), n, eps2, tile, ndrange=n)
    tk.synchronize(b)
    acc = acc.numpy()
    p = pos.astype(np.float64)
    d = p[None, :, :] - p[:, None, :]
    r2 = (d ** 2).sum(-1) + eps2
    ref = (d / (r2 * np.sqrt(r2))[..., None]).sum(1)
    np.testing.assert_allclose(acc, ref, **(_tol(dt) if dt == np.float64 else dict(rtol=1e-4, atol=1e-4)))


# ------------------------------------------------------------------------ cell list with atomics

@tk.kernel
def bin_particles(counts, cells, pos: tk.Const, ncell, box, cap):
    i = tk.index()
    cx = min(int(pos[i, 0] / box * ncell), ncell - 1)
    cy = min(int(pos[i, 1] / box * ncell), ncell - 1)
    c = cx * ncell + cy
    slot = tk.atomic_add(counts, c, 1)
    if slot < cap:
        cells[c, slot] = i


@pytest.mark.parametrize("dev", BACKENDS)
def test_cell_list_atomic_slots(dev):
    """Particles binned into a 4x4 cell list: ``atomic_add`` returns the old count, which is the
    particle's slot; every particle lands exactly once in its cell (the order within a cell is
    whatever the atomics gave, so compare as sets)."""
    n, ncell, cap, box = 50, 4, 50, 1.0
    rng = np.random.default_rng(4)
    pos = rng.random((n, 2)).astype(np.float32)
    b = tk.backend(dev)
    counts = tk.zeros(ncell * ncell, tk.int32, backend=b)
    cells = tk.full((ncell * ncell, cap), -1, tk.int32, backend=b)
    bin_particles(b)(counts, cells, tk.asarray(pos, backend=b), ncell, box, cap, ndrange=n)
    tk.synchronize(b)
    counts, cells = counts.numpy(), cells.numpy()
    cid = np.minimum((pos[:, 0] / box * ncell).astype(int), ncell - 1) * ncell \
        + np.minimum((pos[:, 1] / box * ncell).astype(int), ncell - 1)
    np.testing.assert_array_equal(counts, np.bincount(cid, minlength=ncell * ncell))
    for c in range(ncell * ncell):
        got = cells[c, :counts[c]]
        assert sorted(got.tolist()) == np.flatnonzero(cid == c).tolist()
        assert (cells[c, counts[c]:] == -1).all()


# ------------------------------------------------------------------------ Monte Carlo with the RNG

@tk.kernel
def mc_pi(hits, key0, key1, per_item):
    i = tk.index()
    inside = 0
    for s in range(per_item):
        w = tk.random.philox4x32(tk.uint32(i), tk.uint32(s), tk.uint32(0), tk.uint32(0), key0, key1)
        x = tk.float32(w[0] >> 8) * (1.0 / 16777216.0)
        y = tk.float32(w[1] >> 8) * (1.0 / 16777216.0)
        if x * x + y * y < 1.0:
            inside += 1
    hits[i] = inside


def _philox_ref(c, k):
    """Philox4x32-10 in NumPy (Random123's constants), for the known-answer check of the host."""
    M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
    c = [int(x) for x in c]
    k0, k1 = int(k[0]), int(k[1])
    for r in range(10):
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k1, p0 & 0xFFFFFFFF]
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return c


@pytest.mark.parametrize("dev", BACKENDS)
def test_monte_carlo_pi_matches_a_numpy_philox(dev):
    """Estimate pi with Philox draws: the hit counts of every work item equal those of a
    Philox4x32-10 written in NumPy from Random123's description, on every backend."""
    n, per = 16, 8
    b = tk.backend(dev)
    hits = tk.zeros(n, tk.int32, backend=b)
    mc_pi(b)(hits, np.uint32(7), np.uint32(11), per, ndrange=n)
    tk.synchronize(b)
    hits = hits.numpy()
    assert _philox_ref([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    ref = np.zeros(n, np.int64)
    for i in range(n):
        for s in range(per):
            w = _philox_ref([i, s, 0, 0], [7, 11])
            x = np.float32(w[0] >> 8) * np.float32(1.0 / 16777216.0)
            y = np.float32(w[1] >> 8) * np.float32(1.0 / 16777216.0)
            ref[i] += x * x + y * y < 1.0
    np.testing.assert_array_equal(hits, ref)
    assert abs(4 * hits.sum() / (n * per) - math.pi) < 0.5


@tk.kernel
def mc_uniform_normal(u, z, key):
    i = tk.index()
    u[i] = tk.random.uniform(key, i)
    z[i] = tk.random.normal(key, i)


@pytest.mark.parametrize("dev", BACKENDS)
def test_random_uniform_normal_same_on_every_backend(dev):
    """``tk.random.uniform`` / ``normal`` with a host key: in [0, 1) / finite, and equal to the
    interpreter's numbers (section 8: same key and counter, same numbers on every backend)."""
    n = 64
    key = tk.random.key(1234)
    b = tk.backend(dev)
    u, z = tk.zeros(n, backend=b), tk.zeros(n, backend=b)
    mc_uniform_normal(b)(u, z, key, ndrange=n)
    tk.synchronize(b)
    u, z = u.numpy(), z.numpy()
    ur, zr = np.zeros(n, np.float32), np.zeros(n, np.float32)
    mc_uniform_normal(tk.Interpreter())(ur, zr, key, ndrange=n)
    assert ((u >= 0) & (u < 1)).all() and np.isfinite(z).all()
    np.testing.assert_allclose(u, ur, rtol=0, atol=1e-7)
    np.testing.assert_allclose(z, zr, rtol=1e-5, atol=1e-5)
    assert len(set(u.tolist())) == n


# ------------------------------------------------------------------------ reductions of a field

@tk.kernel
def field_sum_max(total, peak, f: tk.Const):
    i = tk.index()
    v = f[i]
    s = tk.group_reduce(v, "add")
    m = tk.group_reduce(v, "max")
    if tk.index(tk.Local, tk.Linear) == 0:
        tk.atomic_add(total, 0, s)
        tk.atomic_max(peak, 0, m)


@pytest.mark.parametrize("dev", BACKENDS)
def test_field_reduction_group_reduce_then_atomics(dev):
    """Sum and maximum of a 2-D field flattened to 1000 cells: group_reduce in groups of 64 (the
    last group partial: its masked items must not contribute), then one atomic per group."""
    n = 1000
    rng = np.random.default_rng(5)
    f = rng.integers(-50, 50, n).astype(np.int32)
    b = tk.backend(dev)
    total = tk.zeros(1, tk.int32, backend=b)
    peak = tk.full(1, np.iinfo(np.int32).min, tk.int32, backend=b)
    field_sum_max(b, 64)(total, peak, tk.asarray(f, backend=b), ndrange=n)
    tk.synchronize(b)
    total, peak = total.numpy(), peak.numpy()
    assert total[0] == f.sum() and peak[0] == f.max()


@tk.kernel
def field_sum_float(total, f: tk.Const):
    i = tk.index()
    s = tk.group_reduce(f[i] * f[i], "add")
    if tk.index(tk.Local, tk.Linear) == 0:
        tk.atomic_add(total, 0, s)


@pytest.mark.parametrize("dev", BACKENDS)
def test_field_energy_float_reduction(dev):
    """Energy (sum of squares) of a float32 field with partial groups, against NumPy float64."""
    n = 777
    rng = np.random.default_rng(6)
    f = rng.standard_normal(n).astype(np.float32)
    b = tk.backend(dev)
    total = tk.zeros(1, backend=b)
    field_sum_float(b, 32)(total, tk.asarray(f, backend=b), ndrange=n)
    tk.synchronize(b)
    total = total.numpy()
    np.testing.assert_allclose(total[0], (f.astype(np.float64) ** 2).sum(), rtol=1e-5)


# ------------------------------------------------------------------------ collectives and tiles

@tk.kernel
def compact_above(out, count, x: tk.Const, thr):
    i = tk.index()
    keep = 1 if x[i] > thr else 0
    pos = tk.group_scan(keep, "add", inclusive=False)
    tot = tk.group_reduce(keep, "add")
    base = tk.localmem(tk.int32, (1,))
    if tk.index(tk.Local, tk.Linear) == 0:
        base[0] = tk.atomic_add(count, 0, tot)
    tk.synchronize()
    if keep == 1:
        out[base[0] + pos] = x[i]


@tk.kernel
def histogram_local(h, x: tk.Const, NB: tk.constexpr):
    i = tk.index()
    li = tk.index(tk.Local, tk.Linear)
    loc = tk.localmem(tk.int32, (NB,))
    if li < NB:
        loc[li] = 0
    tk.synchronize()
    tk.atomic_add(loc, x[i] % NB, 1)
    tk.synchronize()
    if li < NB:
        tk.atomic_add(h, li, loc[li])


@tk.kernel
def bitonic_sort_groups(a, N: tk.constexpr):
    li = tk.index(tk.Local, tk.Linear)
    g = tk.index(tk.Group, tk.Linear)
    s = tk.localmem(a.dtype, (N,))
    s[li] = a[g * N + li]
    tk.synchronize()
    k = 2
    while k <= N:
        j = k // 2
        while j > 0:
            p = li ^ j
            if p > li:
                if (s[li] > s[p]) == ((li & k) == 0):
                    t = s[li]
                    s[li] = s[p]
                    s[p] = t
            tk.synchronize()
            j = j // 2
        k = k * 2
    a[g * N + li] = s[li]


@pytest.mark.parametrize("dev", BACKENDS)
def test_compaction_histogram_and_bitonic_sort(dev):
    """Three textbook group algorithms: stream compaction (exclusive group_scan + one atomic per
    group for the group's base, 300 items in groups of 64: a partial last group), a histogram
    in local memory with local atomics, and a bitonic sort of each 32-item group in local
    memory (barriers inside nested while loops whose conditions are uniform)."""
    b = tk.backend(dev)
    rng = np.random.default_rng(7)
    x = rng.standard_normal(300).astype(np.float32)
    out, cnt = tk.zeros(300, backend=b), tk.zeros(1, tk.int32, backend=b)
    compact_above(b, 64)(out, cnt, tk.asarray(x, backend=b), 0.5, ndrange=300)
    xi = rng.integers(0, 1000, 256).astype(np.int32)
    h = tk.zeros(16, tk.int32, backend=b)
    histogram_local(b, 64)(h, tk.asarray(xi, backend=b), 16, ndrange=256)
    v = rng.standard_normal(64).astype(np.float32)
    a = tk.asarray(v.copy(), backend=b)
    bitonic_sort_groups(b, 32)(a, 32, ndrange=64)
    tk.synchronize(b)
    c = int(cnt.numpy()[0])
    assert c == (x > 0.5).sum()
    np.testing.assert_array_equal(np.sort(out.numpy()[:c]), np.sort(x[x > 0.5]))
    np.testing.assert_array_equal(h.numpy(), np.bincount(xi % 16, minlength=16))
    np.testing.assert_array_equal(a.numpy(), np.concatenate([np.sort(v[:32]), np.sort(v[32:])]))


# ------------------------------------------------------------------------ streams and events

@tk.kernel
def axpy(y, a, x: tk.Const):
    i = tk.index()
    y[i] = y[i] + a * x[i]


@pytest.mark.parametrize("dev", [d for d in BACKENDS if d != "INTERP:CHECK"])
def test_two_streams_ordered_by_an_event(dev):
    """SPEC section 6: ten launches in order on a high-priority stream, a second stream made to
    wait for the first one's last event, then a copy and a launch on the second stream; the
    results are read only after waiting (reading does not wait: docs/debugging.md)."""
    b = tk.backend(dev)
    n = 1000
    hi, lo = b.stream(priority=tk.High), b.stream(priority=tk.Low)
    y, x = tk.zeros(n, backend=b), tk.asarray(np.arange(n, dtype=np.float32), backend=b)
    z = tk.zeros(n, backend=b)
    tk.synchronize(b)       # the arrays' initialisation is not ordered with hi and lo (SPEC 6)
    k = axpy(b)
    for _ in range(10):
        ev = k(y, 0.5, x, ndrange=n, stream=hi)
    lo.wait(ev)
    ev2 = tk.copyto(z, y, stream=lo)
    ev3 = k(z, 1.0, x, ndrange=n, stream=lo)
    ev3.wait()
    assert ev.done() and ev2.done() and ev3.done()
    np.testing.assert_array_equal(z.numpy(), 6.0 * np.arange(n, dtype=np.float32))
    hi.synchronize()
    np.testing.assert_array_equal(y.numpy(), 5.0 * np.arange(n, dtype=np.float32))


# ------------------------------------------------------------------------ zero-copy interop

def test_zero_copy_numpy_torch_jax_on_the_cpu():
    """SPEC section 5: kernels take NumPy (strided views too), PyTorch and JAX arrays directly
    and without copies on the CPU: writes land in the caller's memory; a JAX array (immutable)
    is read through a tk.Const parameter; the refusals name the argument."""
    b = tk.CPU()
    k = axpy(b)
    base = np.zeros(20, np.float32)
    k(base[::2], 1.0, np.arange(10, dtype=np.float32), ndrange=10)      # a strided view
    tk.synchronize(b)
    np.testing.assert_array_equal(base[::2], np.arange(10))
    np.testing.assert_array_equal(base[1::2], 0)
    torch = pytest.importorskip("torch")
    t = torch.ones(6, dtype=torch.float32)
    k(t, 2.0, torch.arange(6, dtype=torch.float32), ndrange=6)
    tk.synchronize(b)
    assert t.tolist() == [1.0 + 2.0 * i for i in range(6)]
    wrapped = tk.from_dlpack(t)
    k(wrapped, 1.0, np.ones(6, np.float32), ndrange=6)
    tk.synchronize(b)
    assert t.tolist() == [2.0 + 2.0 * i for i in range(6)]                  # same memory
    with pytest.raises(tk.LaunchError, match=r"argument 'y' has unsupported dtype complex64"):
        k(torch.zeros(6, dtype=torch.complex64), 1.0, t, ndrange=6)
    jnp = pytest.importorskip("jax.numpy")
    y = np.zeros(4, np.float32)
    k(y, 3.0, jnp.arange(4, dtype=jnp.float32), ndrange=4)
    tk.synchronize(b)
    np.testing.assert_array_equal(y, [0, 3, 6, 9])
    with pytest.raises(tk.LaunchError, match=r"argument 'y' is read-only"):
        k(jnp.zeros(4, dtype=jnp.float32), 3.0, y, ndrange=4)


@pytest.mark.skipif(not (_info["OpenCL"][0] and _info["WebGPU"][0]), reason="needs OpenCL and WebGPU")
def test_arrays_on_the_wrong_device_are_refused_naming_the_argument():
    cl, wg = tk.backend("CL"), tk.backend("WEBGPU")
    y = tk.zeros(4, backend=cl)
    with pytest.raises(tk.LaunchError, match=r"kernel 'axpy': argument 'x' is an array on tk\.WebGPU"):
        axpy(cl)(y, 1.0, tk.ones(4, backend=wg), ndrange=4)
    with pytest.raises(tk.LaunchError, match=r"kernel 'axpy': argument 'x' is a host array"):
        axpy(cl)(y, 1.0, np.ones(4, np.float32), ndrange=4)
    with pytest.raises(tk.LaunchError, match=r"kernel 'axpy': argument 'y' is an array on tk\.OpenCL"):
        axpy(tk.CPU())(y, 1.0, np.ones(4, np.float32), ndrange=4)


# ------------------------------------------------------------------------ the masking pitfall

@tk.kernel
def tile_sum_masked(acc, x: tk.Const, n, TILE: tk.constexpr):
    i = tk.index()
    li = tk.index(tk.Local, tk.Linear)
    tile = tk.localmem(x.dtype, (TILE,))
    a = 0.0
    for t in range((n + TILE - 1) // TILE):
        j = t * TILE + li
        if j < n:
            tile[li] = x[j]
        tk.synchronize()
        for jj in range(TILE):
            if t * TILE + jj < n:
                a += tile[jj]
        tk.synchronize()
    acc[i] = a


def test_check_mode_says_the_partial_group_is_masked_was_silent_on_the_cause():
    """The first N-body kernel a stranger writes: every item loads one tile slot, with the
    default masking and 11 items in groups of 4. The last group's item 11 runs no statement
    between barriers (SPEC section 3), so its tile slot is never loaded: the other backends
    silently sum a stale slot (45 instead of 55 on the interpreter). INTERP:CHECK reported an
    uninitialized read without its cause; it now names the masked items and the two ways out."""
    x, acc = np.arange(11, dtype=np.float64), np.zeros(11)
    with pytest.raises(tk.UninitializedReadError, match=r"element 3, .*this group has work items past the "
                       r"ndrange, which run no statement between barriers.*unsafe_indices=True"):
        tile_sum_masked(tk.backend("INTERP:CHECK"), 4)(acc, x, 11, 4, ndrange=11)
    acc12 = np.zeros(12)
    tile_sum_masked(tk.backend("INTERP:CHECK"), 4)(acc12, x, 11, 4, ndrange=12)   # full groups: no error
    np.testing.assert_array_equal(acc12, 55.0)


# ------------------------------------------------------------------------ what a backend lacks

@tk.kernel
def double_it(y, x: tk.Const):
    i = tk.index()
    y[i] = x[i] * 2.0


@pytest.mark.parametrize("dev", ["Metal", "WebGPU"])
def test_float64_array_on_a_backend_without_it_names_the_line_was_file_only_on_metal(dev):
    """SPEC section 4: a kernel needing what its backend lacks is a CompileError naming the dtype
    and the line. Metal's error for a float64 array argument named only the file; it now points
    at the array's first use, as WebGPU's does (the source is generated with no device present)."""
    with pytest.raises(tk.CompileError, match=r"test_user_programs22\.py:\d+:\d+: in kernel 'double_it'.*float64") as e:
        double_it.source(dev, np.zeros(4), np.zeros(4, np.float32), ndrange=4)
    assert "y[i] = x[i] * 2.0" in str(e.value)
