"""The OpenCL backend (runs on PoCL in CI); skipped where no OpenCL device is available."""
import math

import numpy as np
import pytest

import tinykernels as tk

ok, why = tk.backends()["OpenCL"]
pytestmark = pytest.mark.skipif(not ok, reason=f"OpenCL unavailable: {why}")


@pytest.fixture(scope="module")
def cl():
    return tk.backend("CL")


@tk.kernel
def saxpy(y, a, x: tk.Const):
    i = tk.index()
    y[i] = a * x[i] + y[i]


def test_device_arrays_round_trip_and_copies(cl):
    a = tk.asarray(np.arange(12.0).reshape(3, 4), backend=cl)
    assert a.backend == cl and a.shape == (3, 4) and a.dtype == np.float64
    np.testing.assert_array_equal(a.numpy(), np.arange(12.0).reshape(3, 4))
    b = tk.zeros((3, 4), tk.float64, backend=cl)
    tk.copyto(b, a)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    host = np.zeros((3, 4))
    tk.copyto(host, b)
    np.testing.assert_array_equal(host, a.numpy())
    tk.copyto(b, np.ones((3, 4)))
    assert (b.numpy() == 1).all()
    with pytest.raises(ValueError, match="shape"):
        tk.copyto(b, np.ones(5))


def test_kernels_match_the_cpu(cl):
    x = np.random.default_rng(0).random(1037).astype(np.float32)
    y = np.random.default_rng(1).random(1037).astype(np.float32)
    Y = tk.asarray(y, backend=cl)
    saxpy(cl)(Y, 0.5, tk.asarray(x, backend=cl), ndrange=x.size)
    tk.synchronize(cl)
    ref = y.copy()
    saxpy(tk.CPU())(ref, 0.5, x, ndrange=x.size)
    np.testing.assert_array_equal(Y.numpy(), ref)


def test_host_arrays_are_refused_with_a_launch_error(cl):
    with pytest.raises(tk.LaunchError, match="'y'.*device arrays"):
        saxpy(cl)(np.zeros(4, np.float32), 1.0, tk.zeros(4, backend=cl), ndrange=4)


def test_streams_and_events_order_work(cl):
    n = 1 << 14
    A = tk.zeros(n, tk.float32, backend=cl)
    ones = tk.ones(n, tk.float32, backend=cl)
    s1, s2 = cl.stream(priority=tk.High), cl.stream(priority=tk.Low)
    evs = [saxpy(cl)(A, 1.0, ones, ndrange=n, stream=s1) for _ in range(10)]
    s2.wait(evs[-1])
    B = tk.zeros(n, tk.float32, backend=cl)
    ev = saxpy(cl)(B, 2.0, A, ndrange=n, stream=s2)
    assert isinstance(ev, tk.Event)
    ev.wait()
    assert ev.done()
    np.testing.assert_array_equal(B.numpy(), np.full(n, 20.0, np.float32))


def test_debug_mode_bounds_checks(cl):
    @tk.kernel
    def oob(A):
        A[tk.index() + 2] = 1.0
    b = tk.OpenCL(debug=True)
    with pytest.raises(IndexError, match=r"oob.*\(8,\)"):
        oob(b)(tk.zeros(8, backend=b), ndrange=8)
        tk.synchronize(b)


def test_generated_source_is_opencl_c(cl):
    src = saxpy(cl).source(tk.zeros(4, backend=cl), 1.0, tk.zeros(4, backend=cl), ndrange=4)
    assert "__kernel" in src and "get_local_id" in src and "#line" in src


def test_no_float64_is_a_compile_error_naming_the_line(cl, monkeypatch):
    b = tk.OpenCL()
    monkeypatch.setattr(b, "supports_float64", False)

    @tk.kernel
    def widen(y, x: tk.Const):
        i = tk.index()
        y[i] = tk.float64(x[i]) * 2
    with pytest.raises(tk.CompileError, match="float64"):
        widen(b)(tk.zeros(4, backend=cl), tk.zeros(4, backend=cl), ndrange=4)


def test_listed_in_backends_and_capabilities(cl):
    assert "CL" in tk.backends_available()
    assert cl.supports(tk.float16) and cl.supports_atomic(tk.int32)
    assert cl.max_workgroupsize >= 64


def test_indices_are_64_bit_when_an_opencl_array_is_too_large(cl, monkeypatch):
    """The 32-bit index decision looks at the OpenCL arrays (not only NumPy ones): an array of
    2**31 elements or more, or whose strides reach that far, gets 64-bit indexing."""
    from tinykernels.runtime import device, opencl as rcl
    x = tk.zeros(4, backend=cl)
    geom = (0, 4, 1, 0, 1, 1, 0, 1, 1)
    assert device.fits32([x], geom, rcl.CLArray)
    monkeypatch.setattr(rcl.CLArray, "size", property(lambda self: 1 << 31))
    assert not device.fits32([x], geom, rcl.CLArray)
    src = saxpy(cl).source(x, 1.0, tk.zeros(4, backend=cl), ndrange=4)
    assert "typedef long tk_idx;" in src


def test_a_host_stream_can_wait_for_a_device_event(cl):
    """A CPU stream told to wait for an OpenCL event runs its later jobs once the event is done
    (it used to block forever: device events never release the host Event's lock)."""
    import threading
    x = tk.asarray(np.ones(1 << 16, np.float32), backend=cl)
    y = tk.zeros(1 << 16, backend=cl)
    ev = saxpy(cl)(y, 2.0, x, ndrange=1 << 16)
    s = tk.CPU().stream()
    s.wait(ev)
    ran = threading.Event()
    s.submit(ran.set)
    assert ran.wait(30), "the host stream never ran the job queued behind the device event"
    assert ev.done() and y.numpy()[0] == 2.0


@tk.kernel
def many_scalars(out, x: tk.Const, a, b, c, d, e, f):
    i = tk.index()
    out[i] = x[i] * a + b + c + d + (1.0 if e else 0.0) + f


def test_scalar_arguments_of_every_width_reach_the_kernel_launch_after_launch(cl):
    """The runtime declares a kernel's scalar types to pyopencl once (without them each
    NumPy scalar costs about 10 us in set_args); every launch still passes its own values,
    of every scalar width, and its own buffers."""
    x = np.arange(5.0)
    inst = many_scalars(cl)
    for k in range(3):
        out, xx = tk.zeros(5, tk.float64, backend=cl), tk.asarray(x + k, backend=cl)
        args = (np.float32(1.5 + k), np.int8(-3 - k), np.uint16(60000 + k), np.int64(2**40 + k), k % 2 == 0,
                np.float16(0.5 * k))
        inst(out, xx, *args, ndrange=5)
        a, b, c, d, e, f = args
        want = (x + k) * float(a) + float(b) + float(c) + float(d) + (1.0 if e else 0.0) + float(f)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    fast = [entry[3].fast for entry in inst._compiled.values()]     # kept with the build
    assert fast == [True]
    assert "_typed_kernels" not in vars(inst)


@tk.kernel
def shift_add(y, x: tk.Const, c):
    i = tk.index()
    y[i] = x[i] + c


def test_a_repeated_launch_skips_the_host_work_and_stays_right(cl, monkeypatch):
    """A launch with the very same device arrays, equal scalars and ndrange only enqueues
    again (no argument normalization, specialization or launch checks); anything else
    (another array, a new scalar, a freed array whose place a new one takes, a 0-d host
    array, which may change in place) takes the full path, and the kernel's argument values
    are set again where another launch of the same specialization set its own."""
    from tinykernels.runtime.opencl import CLKernelInstance
    k = shift_add(cl)
    prepared = []
    real = CLKernelInstance._prepare
    monkeypatch.setattr(CLKernelInstance, "_prepare", lambda self, *a, **kw: prepared.append(1) or real(self, *a, **kw))
    dev = lambda v: tk.asarray(np.array(v, dtype=np.float64), backend=cl)  # noqa: E731
    x1, x2 = dev([1.0, 2.0, 3.0]), dev([10.0, 20.0, 30.0])
    y1, y2 = dev(np.zeros(3)), dev(np.zeros(3))
    k(y1, x1, 0.5, ndrange=3)
    k(y1, x1, 0.5, ndrange=3)
    assert len(prepared) == 1
    np.testing.assert_array_equal(y1.numpy(), [1.5, 2.5, 3.5])
    k(y2, x2, 0.5, ndrange=3)                     # same specialization, its own values
    tk.copyto(y1, np.zeros(3))
    k(y1, x1, 0.5, ndrange=3)                      # full path: the last launch was another
    k(y2, x2, 0.5, ndrange=3)
    k(y2, x2, 0.5, ndrange=3)                      # repeated: values as set by the launch before
    np.testing.assert_array_equal(y1.numpy(), [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(y2.numpy(), [10.5, 20.5, 30.5])
    n = len(prepared)
    k(y2, x2, 1.5, ndrange=3)                      # a new scalar value
    k(y2, x2, np.float32(1.5), ndrange=3)          # equal value, another type
    k(y2, x2, 1.5, ndrange=2)                      # another ndrange
    assert len(prepared) == n + 3
    np.testing.assert_array_equal(y2.numpy(), [11.5, 21.5, 31.5])
    for _ in range(3):                             # freed arrays, new ones (maybe at their address)
        del x1
        x1 = dev([4.0, 5.0, 6.0])
        k(y1, x1, 0.5, ndrange=3)
        np.testing.assert_array_equal(y1.numpy(), [4.5, 5.5, 6.5])
    c = np.array(0.25)                             # a 0-d host array is a scalar argument
    k(y1, x1, c, ndrange=3)
    c[()] = 2.0
    k(y1, x1, c, ndrange=3)
    np.testing.assert_array_equal(y1.numpy(), [6.0, 7.0, 8.0])


@pytest.mark.parametrize("first, second, error", [
    (dict(ndrange=np.int64(3)), dict(ndrange=()), "1 to 3 dimensions"),
    (dict(ndrange=np.int64(3)), dict(ndrange=range(5, 2)), None),     # empty: launches nothing
    (dict(ndrange=3), dict(ndrange=3.0), "must be ints or ranges"),
    (dict(ndrange=1), dict(ndrange=True), "must be ints or ranges"),
    (dict(ndrange=3), dict(ndrange=np.float64(3)), "must be ints or ranges"),
    (dict(ndrange=3), dict(ndrange=np.array([3])), "must be an int or a tuple of 1 to 3 ints or ranges"),
    (dict(ndrange=3, workgroupsize=1), dict(ndrange=3, workgroupsize=True), "workgroupsize must be"),
    (dict(ndrange=3, workgroupsize=1), dict(ndrange=3, workgroupsize=1.0), "workgroupsize must be"),
])
def test_a_repeated_launch_checks_its_geometry_as_the_first(cl, first, second, error):
    """The repeated-launch memo compares ndrange and workgroupsize by type and value: an
    ndrange or workgroup size that only compares equal to the last launch's (3.0, True, a
    NumPy array) is a LaunchError as on a first launch, and a NumPy ndrange before an empty
    one is not compared by broadcasting (that raised a bare ValueError)."""
    k = shift_add(cl)
    x = tk.asarray(np.array([1.0, 2.0, 3.0]), backend=cl)
    y = tk.asarray(np.zeros(3), backend=cl)
    k(y, x, 0.5, **first)
    if error is None:
        k(y, x, 0.5, **second)
    else:
        with pytest.raises(tk.LaunchError, match=error):
            k(y, x, 0.5, **second)
    n = int(first["ndrange"])                      # the first launch's items, once each
    np.testing.assert_array_equal(y.numpy(), [1.5, 2.5, 3.5][:n] + [0.0] * (3 - n))


@tk.kernel
def tanh_and_grad(t, d, x: tk.Const):
    i = tk.index()
    t[i] = math.tanh(x[i])
    d[i] = 1 - t[i] * t[i]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_reaches_one(cl, dtype):
    """tanh is +-1 wherever it rounds to +-1, +-inf included (PoCL 3.1's float tanh gave
    0.99999994 for every x >= 9.0109 and for inf: 1 - tanh(x)**2 was 1.2e-7, not 0)."""
    x = np.array([np.inf, -np.inf, 9.010914, -9.010914, 9.010913, 20.0, 1e30, 0.5, -0.0, np.nan], dtype)
    t = tk.zeros(x.shape, dtype, backend=cl)
    d = tk.zeros(x.shape, dtype, backend=cl)
    tanh_and_grad(cl)(t, d, tk.asarray(x, backend=cl), ndrange=x.size)
    exact = np.array([math.tanh(v) for v in x.astype(np.float64)]).astype(dtype)
    got = t.numpy()
    assert np.array_equal(got[:7] == 1, exact[:7] == 1) and np.array_equal(got[:7] == -1, exact[:7] == -1)
    np.testing.assert_allclose(got, exact, rtol=2 * np.finfo(dtype).eps)
    assert np.signbit(got[8]) and np.isnan(got[9])
    assert (d.numpy()[np.abs(exact) == 1] == 0).all()


def test_copyto_onto_itself_is_a_no_op(cl):
    """tk.copyto(a, a) keeps a (OpenCL refuses a buffer copy onto itself: it raised pyopencl's
    MEM_COPY_OVERLAP), with and without a stream, ordered after the stream's work."""
    a = tk.asarray(np.arange(6, dtype=np.float32), backend=cl)
    tk.copyto(a, a).wait()
    s = cl.stream()
    y = tk.zeros(6, tk.float32, backend=cl)
    shift_add(cl)(y, a, 1.0, ndrange=6, stream=s)
    ev = tk.copyto(y, y, stream=s)
    ev.wait()
    assert ev.done()
    np.testing.assert_array_equal(a.numpy(), np.arange(6))
    np.testing.assert_array_equal(y.numpy(), np.arange(6) + 1)


TINY_FNS = ("log1p", "expm1", "sin", "tan", "asinh", "atanh", "sinh", "tanh", "atan", "asin", "erf")


@tk.kernel
def tiny_math(out, x: tk.Const, op: tk.constexpr):
    i = tk.index()
    v = x[i]
    if op == 0:
        out[i] = math.log1p(v)
    elif op == 1:
        out[i] = math.expm1(v)
    elif op == 2:
        out[i] = math.sin(v)
    elif op == 3:
        out[i] = math.tan(v)
    elif op == 4:
        out[i] = math.asinh(v)
    elif op == 5:
        out[i] = math.atanh(v)
    elif op == 6:
        out[i] = math.sinh(v)
    elif op == 7:
        out[i] = math.tanh(v)
    elif op == 8:
        out[i] = math.atan(v)
    elif op == 9:
        out[i] = math.asin(v)
    else:
        out[i] = math.erf(v)


def _tiny_points(dt):
    fi = np.finfo(dt)
    s, t = fi.smallest_subnormal, fi.tiny
    small = [s, 3 * s, t / 3, t, 1e-30 if dt == np.float32 else 1e-300, 2.0 ** (-26 if dt == np.float32 else -55)]
    return np.array([0.0] + small, dt), np.array([-0.0] + [-v for v in small], dt)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_at_subnormal_and_tiny_arguments(cl, dtype):
    """Every function here is x to within half an ulp for these arguments (x + O(x²)), so the
    result is x itself, -0.0 and subnormals included; erf is 2x/sqrt(pi), within an ulp. PoCL
    3.1's log1p gave +0.0 for +-the smallest subnormal and 5.6e-45 for 4.2e-45 (float32; the
    same in float64): tk_log1p returns x below 2**-25 (2**-54), where log1p(x) rounds to x."""
    xs = np.concatenate(_tiny_points(dtype))
    X, o = tk.asarray(xs, backend=cl), tk.zeros(xs.shape, dtype, backend=cl)
    for op, fn in enumerate(TINY_FNS):
        tiny_math(cl)(o, X, op, ndrange=len(xs))
        got = o.numpy()
        if fn == "erf":
            want = np.array([math.erf(float(v)) for v in xs], dtype)
            assert (np.abs(got - want) <= np.spacing(np.abs(want))).all() and (np.signbit(got) == np.signbit(xs)).all()
            continue
        np.testing.assert_array_equal(got, xs, err_msg=fn)
        assert (np.signbit(got) == np.signbit(xs)).all(), fn


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log1p_is_within_an_ulp_of_numpy_in_every_binade(cl, dtype):
    """The tk_log1p workaround covers exactly the broken range: from 2**-25 (2**-54) up PoCL's
    log1p is within an ulp of NumPy's, in every binade from the smallest subnormal to 1, both
    signs (64 random mantissas each)."""
    lo = -149 if dtype == np.float32 else -1074
    m = np.random.default_rng(0).uniform(1, 2, (1 - lo, 64))
    xs = (m * np.exp2(np.arange(lo, 1.0))[:, None]).ravel()
    xs = np.concatenate([xs, -xs[xs < 0.9]]).astype(dtype)
    o = tk.zeros(xs.shape, dtype, backend=cl)
    tiny_math(cl)(o, tk.asarray(xs, backend=cl), 0, ndrange=len(xs))
    ref = np.log1p(xs)
    ulps = np.abs(o.numpy().astype(np.float64) - ref) / np.spacing(np.abs(ref)).astype(np.float64)
    assert ulps.max() <= 1, xs[ulps.argmax()]
    assert (ulps[np.abs(xs) < 2.0 ** -20] == 0).all()
