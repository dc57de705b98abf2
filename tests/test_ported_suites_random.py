"""Counter-based random numbers (SPEC 8), in the manner of Random123's kat_vectors, Warp's
test_rand, Taichi's test_random and Numba CUDA's test_random: every published Philox4x32-10
known answer on every backend, ``uniform`` strictly below 1, ``normal`` finite with the right
moments, ``split`` streams that never repeat, the same numbers on the host, on every backend
and in an autodiff replay, and the host API's argument errors."""
import numpy as np
import pytest

import tinykernels as tk

R = tk.random
DEVS = ["CPU", "INTERP"] + [dev for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                            if tk.backends()[name][0]]

# Random123 1.14 examples/kat_vectors, "philox4x32 10": counter words, key words, answer.
KATS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@tk.kernel
def _philox(out, c0: tk.uint32, c1: tk.uint32, c2: tk.uint32, c3: tk.uint32, k0: tk.uint32, k1: tk.uint32):
    a, b, c, d = tk.random.philox4x32(c0, c1, c2, c3, k0, k1)
    out[0] = a
    out[1] = b
    out[2] = c
    out[3] = d


@tk.kernel
def _draw(u, nrm, bts, key):
    i = tk.index()
    u[i] = tk.random.uniform(key, i)
    nrm[i] = tk.random.normal(key, i)
    bts[i] = tk.random.bits(key, i)


@tk.kernel
def _keyed(out, keys):
    i = tk.index()
    out[i] = tk.random.bits(keys[i // 64], i % 64)


@tk.kernel
def _noisy(y, x, key):
    i = tk.index()
    y[i] = x[i] * tk.random.uniform(key, i)


def _backend(dev):
    return tk.backend(dev)


@pytest.mark.parametrize("c, k, want", KATS)
def test_host_philox_matches_every_published_vector(c, k, want):
    assert tuple(int(w) for w in R.philox4x32(*c, *k)) == want


@pytest.mark.parametrize("dev", DEVS)
def test_kernel_philox_matches_every_published_vector(dev):
    be = _backend(dev)
    for c, k, want in KATS:
        out = tk.zeros(4, tk.uint32, backend=be)
        _philox(be)(out, *(np.uint32(w) for w in c + k), ndrange=1)
        assert tuple(int(w) for w in out.numpy()) == want


@pytest.mark.parametrize("dev", DEVS)
def test_kernel_draws_equal_the_host_api(dev):
    be = _backend(dev)
    n, key = 4096, R.key(1234)
    u, nrm = tk.zeros(n, tk.float32, backend=be), tk.zeros(n, tk.float32, backend=be)
    bts = tk.zeros(n, tk.uint32, backend=be)
    _draw(be)(u, nrm, bts, key, ndrange=n)
    c = np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(bts.numpy(), R.bits(key, c))
    np.testing.assert_array_equal(u.numpy(), R.uniform(key, c))
    # normal: float32 libm steps; bit-exact except WGSL's cos/log (documented: float32 rounding)
    np.testing.assert_allclose(nrm.numpy(), R.normal(key, c), rtol=0, atol=4e-7 if dev == "WEBGPU" else 0)


def test_uniform_is_the_top_24_bits_so_never_one():
    key, c = R.key(9), np.arange(1 << 16, dtype=np.uint64)
    u, x = R.uniform(key, c), R.bits(key, c)
    assert u.dtype == np.float32
    np.testing.assert_array_equal(u, (x >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24))
    # the largest word, 0xffffffff, gives (2**24 - 1) / 2**24: below 1 in float32
    assert np.float32(0xFFFFFF) * np.float32(2.0 ** -24) < 1
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.003


def test_normal_moments_and_bounded_tails():
    x = R.normal(R.key(3), np.arange(1 << 16, dtype=np.uint64)).astype(np.float64)
    assert np.isfinite(x).all()
    # Box-Muller's u1 is (top24 + 1) / 2**24 in (0, 1]: |z| <= sqrt(-2 ln 2**-24) ~ 5.77
    assert np.abs(x).max() <= np.sqrt(-2 * np.log(2.0 ** -24)) + 1e-6
    m = x.mean()
    assert abs(m) < 0.02 and abs(x.var() - 1) < 0.03
    assert abs(((x - m) ** 3).mean()) < 0.05 and abs(((x - m) ** 4).mean() - 3) < 0.1
    assert 0.3 < (np.abs(x) > 1).mean() < 0.34             # P(|z| > 1) = 0.3173


def test_split_streams_are_distinct_and_prefix_stable():
    k = R.key(42)
    keys = R.split(k, 256)
    assert keys.dtype == np.uint64 and len(set(keys.tolist()) | {int(k)}) == 257
    np.testing.assert_array_equal(R.split(k, 16), keys[:16])
    draws = R.bits(keys[:, None], np.arange(256, dtype=np.uint64)[None, :])
    assert len(np.unique(draws)) > 0.99 * draws.size          # 65536 words, no repeated stream
    assert not any(np.array_equal(draws[0], draws[i]) for i in range(1, 256))
    assert R.split(k, 0).shape == (0,)


@pytest.mark.parametrize("dev", DEVS)
def test_split_keys_as_a_kernel_array(dev):
    be = _backend(dev)
    keys = R.split(R.key(7), 4)
    if dev == "WEBGPU":                       # no 64-bit arrays: a clear error, not wrong numbers
        with pytest.raises(TypeError, match="uint64"):
            tk.asarray(keys, backend=be)
        return
    out = tk.zeros(256, tk.uint32, backend=be)
    _keyed(be)(out, tk.asarray(keys, backend=be), ndrange=256)
    want = R.bits(keys[:, None], np.arange(64, dtype=np.uint64)[None, :]).reshape(-1)
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("dev", DEVS)
def test_autodiff_replays_the_same_numbers(dev):
    be = _backend(dev)
    n, key = 64, R.key(5)
    x = tk.asarray(np.linspace(-1, 1, n).astype(np.float32), backend=be)
    dx, y = tk.zeros(n, backend=be), tk.zeros(n, backend=be)
    dy = tk.asarray(np.ones(n, np.float32), backend=be)
    tk.autodiff(tk.Reverse, lambda y, x: _noisy(be)(y, x, key, ndrange=n), tk.Duplicated(y, dy), tk.Duplicated(x, dx))
    u = R.uniform(key, np.arange(n, dtype=np.uint64))
    np.testing.assert_array_equal(dx.numpy(), u)                 # d(x * u)/dx = u, the primal's u
    np.testing.assert_array_equal(y.numpy(), x.numpy() * u)


@pytest.mark.parametrize("dev", DEVS)
def test_key_as_a_python_int_or_numpy_uint64(dev):
    be = _backend(dev)
    key, n = R.key(2024), 64
    assert isinstance(key, np.uint64) and int(key) >= 1 << 32
    u, nrm, bts = (tk.zeros(n, dt, backend=be) for dt in (tk.float32, tk.float32, tk.uint32))
    _draw(be)(u, nrm, bts, key, ndrange=n)
    want = R.bits(key, np.arange(n, dtype=np.uint64))
    np.testing.assert_array_equal(bts.numpy(), want)
    if dev == "WEBGPU":                 # Python ints are int32 there: a clear error naming the fix
        with pytest.raises(tk.LaunchError, match="argument 'key'.*np.uint64"):
            _draw(be)(u, nrm, bts, int(key), ndrange=n)
    else:
        _draw(be)(u, nrm, bts, int(key), ndrange=n)
        np.testing.assert_array_equal(bts.numpy(), want)


def test_host_api_argument_errors():
    with pytest.raises(TypeError, match="seed"):
        R.key(1.5)
    with pytest.raises(TypeError, match="seed"):
        R.key(True)
    assert R.key(-1) == R.key(2 ** 64 - 1) and R.key(2 ** 64 + 5) == R.key(5)   # documented: mod 2**64
    with pytest.raises(ValueError, match="non-negative"):
        R.split(R.key(1), -1)
    with pytest.raises(TypeError, match="n must be an int"):
        R.split(R.key(1), 2.0)
    with pytest.raises(ValueError, match="single key"):
        R.split(R.split(R.key(1), 2), 2)
    for f in (R.uniform, R.normal, R.bits):
        with pytest.raises(TypeError, match="counter"):
            f(R.key(1), 1.5)
        with pytest.raises(TypeError, match="key"):
            f(0.5, 1)
