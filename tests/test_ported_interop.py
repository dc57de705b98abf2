"""Interop and stream cases in the style of Numba's CUDA array-interface tests, CuPy's raw-kernel
tests and Warp's test_streams / test_torch, against SPEC sections 2, 5 and 6: zero-copy
arguments of every layout (non-contiguous, negative strides, 0-d, empty, read-only), DLPack in
and out, dtype errors naming the argument, and ordering across streams on every backend."""
import numpy as np
import pytest

import tinykernels as tk

try:
    import torch
except ImportError:                                   # the minimal install: the torch cases skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


@tk.kernel
def twice(y, x: tk.Const):
    i = tk.index()
    y[i] = 2 * x[i]


@tk.kernel
def twice2(y, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    y[i, j] = 2 * x[i, j]


@tk.kernel
def inc(y):
    i = tk.index()
    y[i] += 1


@tk.kernel
def relax(y, v, reps):
    i = tk.index()
    acc = y[i] * 0.0
    for _ in range(reps):
        acc = acc * 0.5 + v
    y[i] = acc


@tk.kernel
def add_into(z, x: tk.Const, y: tk.Const):
    i = tk.index()
    z[i] = x[i] + y[i]


CPU = tk.CPU()


def _run(k, *args, **kw):
    ev = k.launch(*args, **kw)
    ev.wait()


# --- zero-copy layouts ----------------------------------------------------------------------------

def test_negative_strides_on_both_sides():
    x = np.arange(8.0)
    y = np.zeros(8)
    _run(twice, y[::-1], x[::-2][:4].repeat(2)[::-1], ndrange=8)
    np.testing.assert_array_equal(y[::-1], 2 * x[::-2][:4].repeat(2)[::-1])
    y2 = np.zeros(8)
    _run(twice, y2[::-1], x, ndrange=8)
    np.testing.assert_array_equal(y2, 2 * x[::-1])


@needs_torch
def test_torch_transposed_and_sliced_tensors():
    t = torch.arange(24.0).reshape(4, 6)
    out = torch.zeros(6, 4)
    _run(twice2, out, t.T, ndrange=(6, 4))
    torch.testing.assert_close(out, 2 * t.T)
    o2 = torch.zeros(12)
    _run(twice, o2[1::3], t[:, 2], ndrange=4)          # both strided, one with an offset
    want = torch.zeros(12)
    want[1::3] = 2 * t[:, 2]
    torch.testing.assert_close(o2, want)


@needs_torch
def test_empty_arrays_with_an_empty_ndrange():
    for y, x in ((np.zeros(0), np.zeros(0)), (torch.zeros(0), torch.zeros(0)), (np.zeros((0, 3)), np.zeros((0, 3)))):
        k = twice if y.ndim == 1 else twice2
        _run(k, y, x, ndrange=y.shape)


def test_a_zero_d_array_indexed_by_one_index_is_a_compile_error_naming_it():
    with pytest.raises(tk.CompileError, match="array 'x' has 0 dimension"):
        twice.launch(np.zeros(1), np.ones(()), ndrange=1)


def test_read_only_arrays_are_refused_where_written_and_accepted_where_read():
    ro = np.arange(6.0)
    ro.flags.writeable = False
    y = np.zeros(6)
    _run(twice, y, ro, ndrange=6)
    np.testing.assert_array_equal(y, 2 * ro)
    for arr in (ro, tk.asarray(ro), tk.from_dlpack(ro)):
        with pytest.raises(tk.LaunchError, match=r"kernel 'inc': argument 'y' is read-only"):
            inc.launch(arr, ndrange=6)
    with pytest.raises(ValueError, match="dst is read-only"):
        tk.copyto(tk.asarray(ro), np.ones(6))
    np.testing.assert_array_equal(ro, np.arange(6.0))


def test_jax_arrays_are_read_only_inputs():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(6.0, dtype=jnp.float32)
    y = np.zeros(6, np.float32)
    _run(twice, y, x, ndrange=6)
    np.testing.assert_array_equal(y, 2 * np.arange(6.0, dtype=np.float32))
    with pytest.raises(tk.LaunchError, match="argument 'y' is read-only"):
        twice.launch(jnp.zeros(6, jnp.float32), x, ndrange=6)


@pytest.mark.parametrize("bad", [np.zeros(6, np.complex128), np.zeros(6, object)])
def test_unsupported_dtypes_name_the_argument(bad):
    with pytest.raises(tk.LaunchError, match=f"kernel 'twice': argument 'y' has unsupported dtype {bad.dtype}"):
        twice.launch(bad, np.ones(6), ndrange=6)
    with pytest.raises(tk.LaunchError, match="argument 'x' has unsupported dtype"):
        twice.launch(np.zeros(6), bad, ndrange=6)


def test_an_object_with_only_the_array_interface():
    class Exported:
        def __init__(self, a):
            self._a = a
            self.__array_interface__ = a.__array_interface__
    y = np.zeros(6)
    _run(twice, Exported(y), Exported(np.arange(6.0)), ndrange=6)
    np.testing.assert_array_equal(y, 2 * np.arange(6.0))


# --- DLPack in and out ----------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("tdt", ["bool", "uint16", "float16", "bfloat16", "float8_e4m3fn", "float64"])
def test_dlpack_round_trips_through_torch_without_copying(tdt):
    t = torch.ones(5, dtype=getattr(torch, tdt))
    a = tk.from_dlpack(t)
    assert a.shape == (5,)
    back = torch.from_dlpack(a)
    assert back.dtype == t.dtype and back.data_ptr() == t.data_ptr()


@needs_torch
def test_dlpack_exports_zero_d_empty_strided_and_negative_strides():
    z = tk.from_dlpack(np.full((), 4.0))
    assert z.shape == () and torch.from_dlpack(z).item() == 4.0
    e = tk.zeros((0, 3))
    assert torch.from_dlpack(e).shape == (0, 3)
    t = torch.arange(12.0).reshape(3, 4)
    s = tk.from_dlpack(t.T)
    assert s.shape == (4, 3) and s.strides == (4, 16)
    assert torch.from_dlpack(s).data_ptr() == t.data_ptr()
    r = tk.asarray(np.arange(4.0)[::-1])
    assert r.strides == (-8,)
    np.testing.assert_array_equal(np.from_dlpack(r), [3.0, 2.0, 1.0, 0.0])


@needs_torch
def test_from_dlpack_refuses_unsupported_dtypes_and_non_exporters():
    with pytest.raises(TypeError, match="complex64 are not supported"):
        tk.from_dlpack(torch.ones(3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="expects an object with __dlpack__"):
        tk.from_dlpack(3.0)


def test_from_blob_checks_its_arguments():
    buf = np.arange(6.0)
    a = tk.from_blob(buf.ctypes.data, (2, 3), tk.float64, CPU)
    np.testing.assert_array_equal(a.numpy(), buf.reshape(2, 3))
    with pytest.raises(ValueError, match="negative dimension"):
        tk.from_blob(buf.ctypes.data, (-1,), tk.float64, CPU)
    with pytest.raises(ValueError, match="invalid address 0x0"):
        tk.from_blob(0, (3,), tk.float64, CPU)
    assert tk.from_blob(0, (0,), tk.float64, CPU).shape == (0,)


# --- device backends: layouts and copies ------------------------------------------------------------

def _device_backends():
    out = []
    avail = tk.backends()
    for name, d in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
        ok, why = avail.get(name, (False, "unknown"))
        out.append(pytest.param(d, id=d, marks=() if ok else pytest.mark.skip(reason=f"{name}: {why}")))
    return out


@pytest.mark.parametrize("name", _device_backends())
def test_device_arrays_from_every_host_layout(name):
    B = tk.backend(name)
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    for h in (src[:, 1], src[::-1, 2], np.ones((), np.float32), np.ones((0, 2), np.float32)):
        np.testing.assert_array_equal(tk.asarray(h, backend=B).numpy(), h)
    d = tk.zeros(3, backend=B)
    tk.copyto(d, src[::-1, 0]).wait()
    np.testing.assert_array_equal(d.numpy(), src[::-1, 0])
    h = np.zeros(4, np.float32)
    tk.copyto(h[::-1], tk.asarray(src[0], backend=B)).wait()
    np.testing.assert_array_equal(h, src[0, ::-1])
    with pytest.raises(TypeError, match="cannot cast float32 to int32"):
        tk.copyto(tk.zeros(4, tk.int32, backend=B), src[0])
    with pytest.raises(tk.LaunchError, match=f"argument 'y' is a host array; the .* backend needs device arrays"):
        inc(B)(np.zeros(4, np.float32), ndrange=4)
    with pytest.raises(BufferError, match="cannot be exported through DLPack"):
        np.from_dlpack(tk.ones(3, backend=B))


# --- streams and events -------------------------------------------------------------------------------

def _all_backends():
    return [pytest.param(n, id=n) for n in ("CPU", "INTERP")] + _device_backends()


def _relaxed(v, reps):
    acc = np.float32(0)
    for _ in range(reps):
        acc = np.float32(acc * np.float32(0.5) + np.float32(v))
    return acc


@pytest.mark.parametrize("name", _all_backends())
def test_a_stream_waiting_on_another_streams_event_sees_its_results(name):
    """Warp's test_stream_wait_event: a slow producer on a low-priority stream, a fast one on a
    high-priority stream, and a consumer that waits for the slow one's event."""
    B = tk.backend(name)
    n = 64 if name == "INTERP" else 4096
    slow = 6 if name == "INTERP" else 3000
    mk = (lambda: np.zeros(n, np.float32)) if B.is_host else (lambda: tk.zeros(n, backend=B))
    hi, lo = B.stream(priority=tk.High), B.stream(priority=tk.Low)
    want = _relaxed(3.0, slow) + _relaxed(4.0, 10)
    for _ in range(3):
        a, b, c = mk(), mk(), mk()
        e1 = relax(B)(a, np.float32(3.0), slow, ndrange=n, stream=lo)
        relax(B)(b, np.float32(4.0), 10, ndrange=n, stream=hi)
        hi.wait(e1)
        add_into(B)(c, a, b, ndrange=n, stream=hi).wait()
        assert e1.done()
        np.testing.assert_array_equal(c if B.is_host else c.numpy(), want)


@pytest.mark.parametrize("name", _all_backends())
def test_copies_and_launches_keep_their_order(name):
    B = tk.backend(name)
    n = 256
    mk = (lambda: np.zeros(n, np.float32)) if B.is_host else (lambda: tk.zeros(n, backend=B))
    s1, s2 = B.stream(), B.stream()
    a = mk()
    ev = tk.copyto(a, np.full(n, 5.0, np.float32), stream=s1)
    s2.wait(ev)
    for _ in range(20):
        inc(B)(a, ndrange=n, stream=s2)
    s2.synchronize()
    np.testing.assert_array_equal(a if B.is_host else a.numpy(), 25.0)
    inc(B)(mk(), ndrange=0, stream=s1).wait()            # an empty launch still gives an event
    with pytest.raises(TypeError, match="Stream.wait expects a tk.Event, got int"):
        s1.wait(3)
    other = tk.backend("INTERP" if name != "INTERP" else "CPU")
    with pytest.raises(tk.LaunchError, match="the stream belongs to another backend"):
        inc(B)(mk(), ndrange=4, stream=other.stream())
    with pytest.raises(TypeError, match="argument 'priority': expected an int"):
        B.stream(priority="urgent")


@needs_torch
def test_lazy_negated_and_conjugated_torch_views_are_refused_not_read_wrong():
    """torch's DLPack export of x._neg_view() hands out the memory of x, so np.from_dlpack
    reads +1 for -1; tk.from_dlpack returned that wrong-signed array without a word"""
    neg = torch.ones(3)._neg_view()
    assert neg.is_neg() and neg[0].item() == -1.0
    with pytest.raises(ValueError, match=r"tk.from_dlpack: the tensor is a lazy negated view .*resolve_neg\(\)"):
        tk.from_dlpack(neg)
    with pytest.raises(ValueError, match=r"tk.asarray: the tensor is a lazy negated view"):
        tk.asarray(neg)
    with pytest.raises(ValueError, match=r"tk.asarray: the tensor is a lazy conjugated view .*resolve_conj\(\)"):
        tk.asarray(torch.ones(3, dtype=torch.complex64).conj())
    with pytest.raises(tk.LaunchError, match=r"kernel 'twice': argument 'x' .* lazy negated view"):
        twice.launch(np.zeros(3, np.float32), neg, ndrange=3)
    y = np.zeros(3, np.float32)
    _run(twice, y, neg.resolve_neg(), ndrange=3)
    np.testing.assert_array_equal(y, -2.0)
    np.testing.assert_array_equal(tk.from_dlpack(neg.resolve_neg()).numpy(), -1.0)
    with pytest.raises(ValueError, match=r"tk.copyto: src: the tensor is a lazy negated view"):
        tk.copyto(np.zeros(3, np.float32), neg)
    with pytest.raises(ValueError, match=r"tk.copyto: dst: the tensor is a lazy negated view"):
        tk.copyto(neg, np.zeros(3, np.float32))
