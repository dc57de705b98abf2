"""tinykernels.jax.raise_kernel and the JAX backend (tk.JAX): kernels raised into JAX operations.

Raised results are compared with the compiled CPU backend bit for bit (test_bitexact_*, run
in a subprocess whose XLA emits no FMA instructions; XLA's exp/log/cos differ from libm's in
the last bits: the softmax is compared within 4 ulp, docs/jax.md), gradients with
tinykernels' own adjoints and with finite differences in float64.
"""
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import tinykernels as tk  # noqa: E402
import tinykernels.jax as tkjax  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CPU = tk.CPU()


# ----------------------------------------------------------------------------- the kernels

@tk.kernel
def stencil(out, u: tk.Const, a):
    i, j = tk.index(tk.Global, tk.Cartesian)
    nx, ny = u.shape[0], u.shape[1]
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        out[i, j] = u[i, j]
    else:
        out[i, j] = u[i, j] + a * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


@tk.kernel
def block_sum(out, x: tk.Const, WG: tk.constexpr):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(x.dtype, (WG,))
    buf[lid] = x[tk.index()] * x[tk.index()]
    tk.synchronize()
    s = WG // 2
    while s > 0:
        if lid < s:
            buf[lid] += buf[lid + s]
        tk.synchronize()
        s //= 2
    if lid == 0:
        out[tk.index(tk.Group, tk.Linear)] = buf[0]


@tk.kernel
def collective_sums(tot, pre, x: tk.Const):
    i = tk.index()
    tot[i] = tk.group_reduce(x[i], "add")
    pre[i] = tk.group_scan(x[i], "add")


@tk.kernel
def transpose(out, x: tk.Const, T: tk.constexpr):
    i, j = tk.index(tk.Global, tk.Cartesian)
    li, lj = tk.index(tk.Local, tk.Cartesian)
    gi, gj = tk.index(tk.Group, tk.Cartesian)
    tile = tk.localmem(x.dtype, (T, T))
    tile[li, lj] = x[i, j]
    tk.synchronize()
    out[gj * T + li, gi * T + lj] = tile[lj, li]


@tk.kernel
def softmax_rows(y, x: tk.Const):
    r = tk.index()
    n = x.shape[1]
    m = x[r, 0]
    for k in range(1, n):
        m = max(m, x[r, k])
    s = tk.float32(0)
    for k in range(n):
        e = math.exp(x[r, k] - m)
        y[r, k] = e
        s += e
    for k in range(n):
        y[r, k] = y[r, k] / s


@tk.kernel
def histogram(bins, x: tk.Const):
    tk.atomic_add(bins, x[tk.index()], 1)


@tk.kernel
def nbody(acc, pos: tk.Const, eps2):
    i = tk.index()
    n = pos.shape[0]
    ax = tk.float32(0)
    ay = tk.float32(0)
    az = tk.float32(0)
    for j in range(n):
        dx = pos[j, 0] - pos[i, 0]
        dy = pos[j, 1] - pos[i, 1]
        dz = pos[j, 2] - pos[i, 2]
        r2 = dx * dx + dy * dy + dz * dz + eps2
        inv = tk.rsqrt(r2)
        w = pos[j, 3] * inv * inv * inv
        ax += w * dx
        ay += w * dy
        az += w * dz
    acc[i, 0] = ax
    acc[i, 1] = ay
    acc[i, 2] = az


@tk.kernel
def smooth(y, x: tk.Const, w):
    i = tk.index()
    n = x.shape[0]
    left = x[i - 1] if i > 0 else 0.0
    right = x[i + 1] if i + 1 < n else 0.0
    y[i] = w * math.sin(x[i]) * (left + right) + math.exp(-x[i] * x[i])


@tk.func
def collatz(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@tk.kernel
def divergent(out, x: tk.Const):
    i = tk.index()
    if x[i] < 0:
        return
    out[i] = collatz(x[i])


@tk.kernel
def tickets(counter, out):
    out[tk.index()] = tk.atomic_add(counter, 0, 1)


@tk.kernel
def draw(u, g, key):
    i = tk.index()
    u[i] = tk.random.uniform(key, i)
    g[i] = tk.random.normal(key, i)


BITEXACT = os.environ.get("TK_JAX_BITEXACT") == "1"
bitexact = pytest.mark.skipif(not BITEXACT, reason="run by test_bit_for_bit_against_the_cpu_backend in a "
                              "process where XLA emits no FMA (XLA_FLAGS=--xla_cpu_max_isa=AVX)")


def test_bit_for_bit_against_the_cpu_backend():
    """The test_bitexact_* tests, in a process whose XLA does not contract a * b + c into
    FMA instructions (it does on CPUs that have them: docs/jax.md)."""
    if BITEXACT:
        pytest.skip("already inside the bit-exact run")
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=AVX", TK_JAX_BITEXACT="1",
               PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "bitexact"],
                       env=env, capture_output=True, text=True, timeout=900, cwd=str(ROOT))
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "skipped" not in r.stdout.splitlines()[-1], r.stdout[-2000:]


def cpu_run(kernel, outs, *args, **kw):
    """Run ``kernel`` on the CPU backend on copies; the output arrays named by position."""
    args = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    kernel(CPU, kw.pop("wg", None))(*args, **kw)
    return [args[k] for k in outs]


# ----------------------------------------------------------------------------- raised == CPU

@bitexact
def test_bitexact_stencil():
    rng = np.random.default_rng(0)
    u = rng.random((37, 53), dtype=np.float32)
    (ref,) = cpu_run(stencil, [0], np.zeros_like(u), u, 0.2, ndrange=u.shape)
    g = tkjax.raise_kernel(stencil, outputs=["out"])
    got = g(jnp.zeros_like(u), jnp.asarray(u), a=0.2)
    np.testing.assert_array_equal(np.asarray(got), ref)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda o, v: g(o, v, a=0.2))(jnp.zeros_like(u), u)), ref)


@bitexact
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bitexact_reduction_in_local_memory(dtype):
    x = np.random.default_rng(1).standard_normal(64 * 13).astype(dtype)
    (ref,) = cpu_run(block_sum, [0], np.zeros(13, dtype), x, 64, ndrange=x.size, wg=64)
    g = tkjax.raise_kernel(block_sum, outputs=["out"], ndrange=x.size, workgroupsize=64)
    with jax.enable_x64(dtype == np.float64):
        got = g(jnp.zeros(13, dtype), jnp.asarray(x), WG=64)
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got), ref)


@bitexact
def test_bitexact_group_collectives():
    x = np.random.default_rng(2).standard_normal(100 * 5).astype(np.float32)
    tot, pre = cpu_run(collective_sums, [0, 1], np.zeros_like(x), np.zeros_like(x), x, ndrange=x.size, wg=100)
    g = tkjax.raise_kernel(collective_sums, outputs=["tot", "pre"], workgroupsize=100)
    gt, gp = g(jnp.zeros_like(x), jnp.zeros_like(x), jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(gt), tot)
    np.testing.assert_array_equal(np.asarray(gp), pre)


@bitexact
def test_bitexact_tiled_transpose():
    x = np.random.default_rng(3).random((32, 48), dtype=np.float32)
    (ref,) = cpu_run(transpose, [0], np.zeros((48, 32), np.float32), x, 8, ndrange=x.shape, wg=(8, 8))
    np.testing.assert_array_equal(ref, x.T)
    g = tkjax.raise_kernel(transpose, outputs=["out"], ndrange=x.shape, workgroupsize=(8, 8))
    np.testing.assert_array_equal(np.asarray(g(jnp.zeros((48, 32), jnp.float32), jnp.asarray(x), T=8)), ref)


@bitexact
def test_bitexact_softmax_within_four_ulp():
    x = np.random.default_rng(4).standard_normal((40, 33)).astype(np.float32) * 4
    (ref,) = cpu_run(softmax_rows, [0], np.zeros_like(x), x, ndrange=40)
    g = tkjax.raise_kernel(softmax_rows, outputs=["y"], ndrange=40)
    got = np.asarray(g(jnp.zeros_like(x), jnp.asarray(x)))
    np.testing.assert_array_max_ulp(got, ref, maxulp=4)       # XLA's expf vs libm's (docs/jax.md)


@bitexact
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_bitexact_histogram(dtype):
    x = np.random.default_rng(5).integers(0, 17, 20000).astype(np.int32)
    (ref,) = cpu_run(histogram, [0], np.zeros(17, dtype), x, ndrange=x.size)
    g = tkjax.raise_kernel(histogram, outputs=["bins"], ndrange=x.size)
    got = np.asarray(g(jnp.zeros(17, dtype), jnp.asarray(x)))
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, np.bincount(x, minlength=17))


@bitexact
def test_bitexact_nbody():
    rng = np.random.default_rng(6)
    pos = np.concatenate([rng.standard_normal((200, 3)), rng.random((200, 1))], 1).astype(np.float32)
    (ref,) = cpu_run(nbody, [0], np.zeros((200, 3), np.float32), pos, 1e-3, ndrange=200)
    g = tkjax.raise_kernel(nbody, outputs=["acc"], ndrange=200)
    got = np.asarray(jax.jit(lambda a, p: g(a, p, eps2=1e-3))(jnp.zeros((200, 3), jnp.float32), pos))
    np.testing.assert_array_equal(got, ref)


@bitexact
def test_bitexact_divergent_while_loop_and_early_return():
    x = np.random.default_rng(7).integers(-20, 300, 500).astype(np.int32)
    (ref,) = cpu_run(divergent, [0], np.full(500, -1, np.int32), x, ndrange=500)
    g = tkjax.raise_kernel(divergent, outputs=["out"])
    np.testing.assert_array_equal(np.asarray(g(jnp.full(500, -1, jnp.int32), jnp.asarray(x))), ref)


def test_atomic_old_values_are_a_serialization():
    g = tkjax.raise_kernel(tickets, outputs=["counter", "out"], ndrange=1000)
    c, out = g(jnp.zeros(1, jnp.int32), jnp.full(1000, -1, jnp.int32))
    assert int(c[0]) == 1000
    np.testing.assert_array_equal(np.sort(np.asarray(out)), np.arange(1000))


@bitexact
def test_bitexact_random():
    key = tk.random.key(7)
    u, gn = cpu_run(draw, [0, 1], np.zeros(5000, np.float32), np.zeros(5000, np.float32), key, ndrange=5000)
    g = tkjax.raise_kernel(draw, outputs=["u", "g"])
    gu, gg = g(jnp.zeros(5000, jnp.float32), jnp.zeros(5000, jnp.float32), key=key)
    np.testing.assert_array_equal(np.asarray(gu), u)                 # Philox in uint32: exact
    # normal goes through XLA's logf/cosf (not libm's: the last bits; docs/jax.md)
    np.testing.assert_allclose(np.asarray(gg), gn, rtol=1e-5, atol=1e-6)


@bitexact
def test_bitexact_int64_arithmetic_without_x64():
    @tk.kernel
    def big(y, x: tk.Const):
        i = tk.index()
        v = tk.int64(x[i]) * 3000000000      # int64 arithmetic on int32 data
        y[i] = v // 7 % 1000003

    x = np.arange(1, 101, dtype=np.int32) * 12345
    (ref,) = cpu_run(big, [0], np.zeros(100, np.int32), x, ndrange=100)
    g = tkjax.raise_kernel(big, outputs=["y"])
    np.testing.assert_array_equal(np.asarray(g(jnp.zeros(100, jnp.int32), jnp.asarray(x))), ref)


# ----------------------------------------------------------------------------- transformations

def _cpu_grad_smooth(x0, wy, w):
    X, dX = x0.copy(), np.zeros_like(x0)
    Y, dY = np.zeros_like(x0), wy.copy()

    def f(y, x, w):
        smooth(CPU)(y, x, w, ndrange=x.shape[0])
    (dw,) = tk.autodiff(tk.Reverse, f, tk.Duplicated(Y, dY), tk.Duplicated(X, dX), tk.Active(w))
    return dX, dw


def test_grad_matches_tinykernels_adjoint_and_finite_differences():
    with jax.enable_x64(True):
        rng = np.random.default_rng(8)
        x0, wy = rng.standard_normal(64), rng.standard_normal(64)
        g = tkjax.raise_kernel(smooth, outputs=["y"])

        def loss(x):
            return jnp.sum(g(jnp.zeros(64), x, w=0.7) * wy)
        dx = np.asarray(jax.grad(loss)(jnp.asarray(x0)))
        ref, _ = _cpu_grad_smooth(x0, wy, 0.7)
        np.testing.assert_allclose(dx, ref, rtol=1e-12, atol=1e-14)
        h = 1e-6
        fd = np.array([(float(loss(jnp.asarray(x0 + h * e))) - float(loss(jnp.asarray(x0 - h * e)))) / (2 * h)
                       for e in np.eye(64)[:8]])
        np.testing.assert_allclose(dx[:8], fd, rtol=1e-5, atol=1e-7)


def test_grad_through_local_memory_and_barriers():
    with jax.enable_x64(True):
        x0 = np.random.default_rng(9).standard_normal(64 * 4)
        g = tkjax.raise_kernel(block_sum, outputs=["out"], ndrange=x0.size, workgroupsize=64)
        wts = jnp.asarray([1.0, 2.0, 3.0, 4.0])
        dx = jax.grad(lambda x: jnp.sum(g(jnp.zeros(4), x, WG=64) * wts))(jnp.asarray(x0))
        X, dX = x0.copy(), np.zeros_like(x0)
        out, dout = np.zeros(4), np.asarray(wts)

        def f(o, x):
            block_sum(CPU, 64)(o, x, 64, ndrange=x0.size)
        tk.autodiff(tk.Reverse, f, tk.Duplicated(out, np.array(dout)), tk.Duplicated(X, dX))
        np.testing.assert_allclose(np.asarray(dx), dX, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(dx), 2 * x0 * np.repeat(np.asarray(wts), 64), rtol=1e-13)


def test_grad_through_a_static_loop():
    with jax.enable_x64(True):
        rng = np.random.default_rng(10)
        pos = np.concatenate([rng.standard_normal((24, 3)), rng.random((24, 1))], 1)
        g = tkjax.raise_kernel(nbody, outputs=["acc"], ndrange=24)

        def loss(p):
            return jnp.sum(g(jnp.zeros((24, 3)), p, eps2=0.1) ** 2)
        d = np.asarray(jax.grad(loss)(jnp.asarray(pos)))
        h = 1e-6
        for k in [(0, 0), (5, 2), (11, 3)]:
            e = np.zeros_like(pos)
            e[k] = h
            fd = (float(loss(jnp.asarray(pos + e))) - float(loss(jnp.asarray(pos - e)))) / (2 * h)
            np.testing.assert_allclose(d[k], fd, rtol=1e-5, atol=1e-8)


def test_jvp_matches_forward_mode():
    with jax.enable_x64(True):
        rng = np.random.default_rng(11)
        x0, t = rng.standard_normal(64), rng.standard_normal(64)
        g = tkjax.raise_kernel(smooth, outputs=["y"])
        _, tangent = jax.jvp(lambda x: g(jnp.zeros(64), x, w=0.7), (jnp.asarray(x0),), (jnp.asarray(t),))
        X, dX, Y, dY = x0.copy(), t.copy(), np.zeros(64), np.zeros(64)

        def f(y, x):
            smooth(CPU)(y, x, 0.7, ndrange=64)
        tk.autodiff(tk.Forward, f, tk.Duplicated(Y, dY), tk.Duplicated(X, dX))
        np.testing.assert_allclose(np.asarray(tangent), dY, rtol=1e-12, atol=1e-14)


def test_vmap_matches_a_loop():
    rng = np.random.default_rng(12)
    us = rng.random((3, 20, 24), dtype=np.float32)
    g = tkjax.raise_kernel(stencil, outputs=["out"])
    got = np.asarray(jax.vmap(lambda u: g(jnp.zeros_like(u), u, a=0.1))(jnp.asarray(us)))
    for b in range(3):
        (ref,) = cpu_run(stencil, [0], np.zeros_like(us[b]), us[b], 0.1, ndrange=us[b].shape)
        np.testing.assert_array_equal(got[b], ref)


def test_vmap_of_a_divergent_loop():
    xs = np.random.default_rng(13).integers(1, 200, (2, 64)).astype(np.int32)
    g = tkjax.raise_kernel(divergent, outputs=["out"])
    got = np.asarray(jax.jit(jax.vmap(lambda x: g(jnp.zeros(64, jnp.int32), x)))(jnp.asarray(xs)))
    for b in range(2):
        (ref,) = cpu_run(divergent, [0], np.zeros(64, np.int32), xs[b], ndrange=64)
        np.testing.assert_array_equal(got[b], ref)


def test_sharded_diffusion_example_on_four_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "jax_raise_sharded_diffusion.py"),
                        "--n", "64", "--steps", "10"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "on 4 device(s)" in r.stdout and "bit for bit: True" in r.stdout


# ----------------------------------------------------------------------------- what cannot be raised

def _line(fn, text):
    import inspect
    src, start = inspect.getsourcelines(fn)
    return start + next(k for k, ln in enumerate(src) if text in ln)


@tk.kernel
def cas_lock_sum(lock, total, x: tk.Const):
    i = tk.index()
    done = False
    while not done:
        if tk.atomic_cas(lock, 0, 0, 1) == 0:
            total[0] += x[i]
            tk.atomic_exchange(lock, 0, 0)
            done = True


def test_atomic_cas_is_serialized_in_item_order():
    """Each item's compare-and-swap sees the items before it (a valid order of the atomics):
    a spin lock built from atomic_cas/atomic_exchange works, one item per loop iteration."""
    x = np.arange(1, 41, dtype=np.int32)
    g = tkjax.raise_kernel(cas_lock_sum, outputs=["lock", "total"], ndrange=x.size)
    lock, total = g(jnp.zeros(1, jnp.int32), jnp.zeros(1, jnp.int32), jnp.asarray(x))
    assert int(lock[0]) == 0 and int(total[0]) == x.sum()


def test_racing_stores_are_a_compile_error():
    def body(out, x):
        out[0] = x[tk.index()]
    g = tkjax.raise_kernel(tk.kernel(body), outputs=["out"], ndrange=8)
    with pytest.raises(tk.CompileError) as e:
        g(jnp.zeros(1), jnp.arange(8.0))
    assert str(_line(body, "out[0] =")) in str(e.value) and "racing" in str(e.value)


def test_atomic_in_a_ternary_is_a_compile_error():
    def body(c, out):
        i = tk.index()
        out[i] = tk.atomic_add(c, 0, 1) if i > 2 else 0
    g = tkjax.raise_kernel(tk.kernel(body), outputs=["c", "out"])
    with pytest.raises(tk.CompileError) as e:
        g(jnp.zeros(1, jnp.int32), jnp.zeros(8, jnp.int32))
    assert str(_line(body, "atomic_add")) in str(e.value)


def test_uniform_stores_are_not_races():
    @tk.kernel
    def group_total(out, x: tk.Const):
        lid = tk.index(tk.Local, tk.Linear)
        buf = tk.localmem(tk.float32, (32,))
        buf[lid] = x[tk.index()]
        tk.synchronize()
        t = buf[0] + buf[31]
        out[tk.index(tk.Group, tk.Linear)] = t          # every item stores the same value
    x = np.arange(64, dtype=np.float32)
    g = tkjax.raise_kernel(group_total, outputs=["out"], ndrange=64, workgroupsize=32)
    np.testing.assert_array_equal(np.asarray(g(jnp.zeros(2, jnp.float32), jnp.asarray(x))), [31.0, 95.0])


def test_writing_an_array_not_listed_as_output_is_a_launch_error():
    @tk.kernel
    def two(a, b):
        a[tk.index()] = 1.0
        b[tk.index()] = 2.0
    g = tkjax.raise_kernel(two, outputs=["a"])
    with pytest.raises(tk.LaunchError, match="'b'"):
        g(jnp.zeros(4), jnp.zeros(4))


# ----------------------------------------------------------------------------- the backend

def test_jax_backend_is_listed_and_launches_update_arrays():
    assert "JAX" in tk.backends_available()
    b = tk.backend("JAX")
    assert b == tk.JAX() and b.supports(np.float64) and b.supports_atomic(np.int64)
    u = np.random.default_rng(14).random((16, 16), dtype=np.float32)
    U, OUT = tk.asarray(u, backend=b), tk.zeros((16, 16), tk.float32, backend=b)
    ev = stencil(b)(OUT, U, 0.25, ndrange=(16, 16))
    assert isinstance(ev, tk.Event)
    (ref,) = cpu_run(stencil, [0], np.zeros_like(u), u, 0.25, ndrange=u.shape)
    np.testing.assert_array_equal(OUT.numpy(), ref)
    assert isinstance(OUT.jax, jax.Array)
    with pytest.raises(tk.LaunchError, match="host array"):
        stencil(b)(np.zeros_like(u), U, 0.25, ndrange=(16, 16))


def test_int64_arrays_on_the_jax_backend():
    b = tk.JAX()
    x = np.array([2**40 + 3, -5, 2**62], np.int64)
    X = tk.asarray(x, backend=b)
    assert X.dtype == np.int64

    @tk.kernel
    def twice(a):
        a[tk.index()] = a[tk.index()] * 2 + 1
    twice(b)(X, ndrange=3)
    np.testing.assert_array_equal(X.numpy(), x * 2 + 1)


def test_import_tinykernels_does_not_import_jax():
    code = "import sys, tinykernels as tk; tk.backends(); print('jax' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stdout + r.stderr


# ----------------------------------------------------------------------------- XLA's rewrites undone

@tk.kernel
def rounding(y, x: tk.Const, d):
    i = tk.index()
    y[i, 0] = (x[i] + 1e8) - 1e8          # XLA reassociates (x + c) - c into x
    y[i, 1] = x[i] / d                    # XLA turns x / broadcast(d) into x * (1 / d)
    y[i, 2] = 1.0 / math.sqrt(abs(x[i]))  # XLA turns a / sqrt(b) into a * rsqrt(b)
    y[i, 3] = x[i] / 3.0


def test_float_rounding_is_numpys_under_jit():
    x = np.random.default_rng(15).standard_normal(4096).astype(np.float32)
    d = np.float32(-7.0)
    g = jax.jit(lambda y, x: tkjax.raise_kernel(rounding, outputs=["y"], ndrange=4096)(y, x, d=d))
    got = np.asarray(g(jnp.zeros((4096, 4), jnp.float32), jnp.asarray(x)))
    np.testing.assert_array_equal(got[:, 0], (x + np.float32(1e8)) - np.float32(1e8))
    np.testing.assert_array_equal(got[:, 1], x / d)
    np.testing.assert_array_equal(got[:, 2], np.float32(1) / np.sqrt(np.abs(x)))
    np.testing.assert_array_equal(got[:, 3], x / np.float32(3))


def test_uniform_is_the_groups_first_items_value():
    @tk.kernel
    def first(out):
        i = tk.index()
        out[i] = tk.uniform(i * 3 + 1)
    g = tkjax.raise_kernel(first, outputs=["out"], workgroupsize=8)
    got = np.asarray(g(jnp.zeros(30, jnp.int32)))
    np.testing.assert_array_equal(got, (np.arange(30) // 8) * 8 * 3 + 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_floor_division_and_modulo_are_numpys(dtype):
    @tk.kernel
    def fdm(q, r, a: tk.Const, b: tk.Const):
        i = tk.index()
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
    vals = np.array([-7.5, -0.0, 0.0, 3.0, 7.25, -3.0, 1e30, np.inf, np.nan, 5.0], dtype)
    a, b = np.repeat(vals, vals.size), np.tile(vals, vals.size)
    g = tkjax.raise_kernel(fdm, outputs=["q", "r"])
    with jax.enable_x64(dtype == np.float64), np.errstate(all="ignore"):
        q, r = g(jnp.zeros_like(a), jnp.zeros_like(a), jnp.asarray(a), jnp.asarray(b))
        np.testing.assert_array_equal(np.asarray(q), np.floor_divide(a, b))
        np.testing.assert_array_equal(np.asarray(r), np.remainder(a, b))
        np.testing.assert_array_equal(np.signbit(np.asarray(r)), np.signbit(np.remainder(a, b)))
        np.testing.assert_array_equal(np.signbit(np.asarray(q)), np.signbit(np.floor_divide(a, b)))
