"""Arrays and views (SPEC 5), in the manner of Warp's test_array, Taichi's test_ndarray, Numba
CUDA's test_array_args and CuPy's ndarray-view tests: ``tk.asarray`` of every dtype, 0-d and
Fortran-order arrays; strided, negative-stride, transposed NumPy and PyTorch views written
in place (zero-copy) by kernels on the host backends and copied to device backends; read-only,
broadcast, byte-swapped and misaligned inputs refused with a LaunchError naming the argument;
aliased ``tk.Const`` views; ``from_dlpack``/``from_blob`` with offsets and strides; and
``tk.copyto``'s errors between dtypes, shapes and backends."""
import numpy as np
import pytest

import tinykernels as tk

DEVS = ["CPU", "INTERP"] + [dev for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                            if tk.backends()[name][0]]
HOST = ["CPU", "INTERP"]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


@tk.kernel
def _inc(a):
    i = tk.index()
    a[i] = a[i] + 1


@tk.kernel
def _inc2(a):
    i, j = tk.index(tk.Global, tk.Cartesian)
    a[i, j] = a[i, j] + 1


@tk.kernel
def _double(dst, src: tk.Const):
    i = tk.index()
    dst[i] = src[i] * 2


@pytest.mark.parametrize("dev", DEVS)
@pytest.mark.parametrize("dt", DTYPES)
def test_asarray_round_trips_every_dtype(dev, dt):
    be = tk.backend(dev)
    x = (np.arange(6) % 2).astype(dt) if dt == "bool" else np.arange(6).astype(dt)
    if dt in ("int64", "uint64", "float64") and not be.supports(np.dtype(dt).type):
        with pytest.raises(TypeError, match=dt):                   # WebGPU: no 64-bit types
            tk.asarray(x, backend=be)
        return
    a = tk.asarray(x, backend=be)
    assert a.dtype == x.dtype and a.shape == (6,)
    np.testing.assert_array_equal(a.numpy(), x)


@pytest.mark.parametrize("dev", DEVS)
def test_zero_d_fortran_and_unsupported_dtypes(dev):
    be = tk.backend(dev)
    z = tk.asarray(np.float32(3.5), backend=be)
    assert z.shape == () and z.numpy().shape == () and z.numpy() == 3.5
    f = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    a = tk.asarray(f, backend=be)                  # zero-copy on the host backends
    np.testing.assert_array_equal(a.numpy(), f)
    _inc2(be)(a, ndrange=(3, 4))
    np.testing.assert_array_equal(a.numpy(), np.arange(12).reshape(3, 4) + 1)
    for bad in (np.ones(3, np.complex64), np.array([object()]), "abc"):
        with pytest.raises(TypeError, match="not supported"):
            tk.asarray(bad, backend=be)


@pytest.mark.parametrize("dev", DEVS)
def test_asarray_of_a_torch_bfloat16_tensor(dev):
    torch = pytest.importorskip("torch")
    h = tk.asarray(torch.arange(6, dtype=torch.bfloat16), backend=tk.backend(dev))
    assert str(h.dtype) == "bfloat16" and h.numpy().astype(np.float32).tolist() == list(range(6))


@pytest.mark.parametrize("dev", HOST)
def test_numpy_views_are_written_in_place(dev):
    be = tk.backend(dev)
    x = np.zeros(8, np.float32)
    _inc(be)(x[::2], ndrange=4)
    assert x.tolist() == [1, 0] * 4
    x = np.zeros(6, np.float32)
    _inc(be)(x[::-2], ndrange=3)                                   # negative stride
    assert x.tolist() == [0, 1] * 3
    t = np.zeros((5, 4), np.float32)
    _inc2(be)(t.T, ndrange=(4, 5))
    assert (t == 1).all()
    f = np.asfortranarray(np.zeros((3, 4), np.float32))
    _inc2(be)(f[:, 1:3], ndrange=(3, 2))
    assert f.sum() == 6 and (f[:, 1:3] == 1).all()


@pytest.mark.parametrize("dev", HOST)
def test_torch_views_are_written_in_place(dev):
    torch = pytest.importorskip("torch")
    be = tk.backend(dev)
    t = torch.zeros(8, 6)
    _inc2(be)(t[::2, 1:4], ndrange=(4, 3))
    assert float(t.sum()) == 12 and float(t[::2, 1:4].sum()) == 12
    tt = torch.zeros(5, 4)
    _inc2(be)(tt.t(), ndrange=(4, 5))
    assert bool((tt == 1).all())
    with pytest.raises(tk.LaunchError, match="'a'.*(stride 0|share memory)"):
        _inc2(be)(torch.zeros(4).expand(3, 4), ndrange=(3, 4))


@pytest.mark.parametrize("dev", HOST)
def test_inputs_a_kernel_cannot_write_are_refused(dev):
    be = tk.backend(dev)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(tk.LaunchError, match="argument 'a' is read-only"):
        _inc(be)(ro, ndrange=4)
    assert not ro.any()
    with pytest.raises(tk.LaunchError, match="argument 'a'"):
        _inc(be)(np.broadcast_to(np.zeros(1, np.float32), (4,)), ndrange=4)
    with pytest.raises(tk.LaunchError, match="argument 'a'.*byte"):
        _inc(be)(np.zeros(4, np.float32).view(">f4"), ndrange=4)
    with pytest.raises(tk.LaunchError, match="argument 'a'.*aligned"):
        _inc(be)(np.zeros(17, np.uint8)[1:].view(np.float32), ndrange=4)


@pytest.mark.parametrize("dev", HOST)
def test_overlapping_views_as_two_arguments(dev):
    be = tk.backend(dev)
    z = np.arange(8, dtype=np.float32)
    with pytest.raises(tk.LaunchError, match="'src'.*tk.Const.*'dst'"):
        _double(be)(z[1:5], z[0:4], ndrange=4)
    _double(be)(z[4:8], z[0:4], ndrange=4)                         # disjoint views of one buffer
    assert z.tolist() == [0, 1, 2, 3, 0, 2, 4, 6]


@pytest.mark.parametrize("dev", DEVS)
def test_device_copies_of_views_keep_their_values(dev):
    be = tk.backend(dev)
    for view in (np.arange(8, dtype=np.float32)[::2], np.arange(4, dtype=np.float32)[::-1],
                 np.arange(12, dtype=np.float32).reshape(3, 4).T):
        a = tk.asarray(view, backend=be)
        assert a.shape == view.shape
        np.testing.assert_array_equal(a.numpy(), view)


def test_from_dlpack_and_from_blob_with_offsets_and_strides():
    torch = pytest.importorskip("torch")
    tv = torch.arange(12.0).reshape(3, 4)[1:, ::2]
    a = tk.from_dlpack(tv)
    assert a.shape == (2, 2) and a.strides == (16, 8)
    assert a.numpy().tolist() == [[4.0, 6.0], [8.0, 10.0]]
    _inc2(tk.CPU())(a, ndrange=(2, 2))                               # zero-copy: torch sees it
    assert tv.tolist() == [[5.0, 7.0], [9.0, 11.0]]
    b = tk.from_dlpack(np.arange(10, dtype=np.float32)[3:7])
    assert b.numpy().tolist() == [3.0, 4.0, 5.0, 6.0]
    buf = np.arange(12, dtype=np.float32)
    c = tk.from_blob(buf.ctypes.data + 8, (2, 2), tk.float32, tk.CPU(), strides=(16, 4))
    assert c.numpy().tolist() == [[2.0, 3.0], [6.0, 7.0]]
    with pytest.raises(ValueError, match="negative"):
        tk.from_blob(buf.ctypes.data, (-2,), tk.float32, tk.CPU())
    with pytest.raises(ValueError, match="address"):
        tk.from_blob(0, (2,), tk.float32, tk.CPU())


@pytest.mark.parametrize("dev", DEVS)
def test_copyto_between_dtypes_shapes_and_backends(dev):
    be = tk.backend(dev)
    a = tk.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), backend=be)
    d = tk.zeros((3, 4), tk.int32 if dev == "WEBGPU" else tk.float64, backend=be)
    if dev == "WEBGPU":
        with pytest.raises(TypeError, match="cannot cast float32 to int32"):
            tk.copyto(d, a)
    else:
        tk.copyto(d, a)                                              # widening: same_kind
        np.testing.assert_array_equal(d.numpy(), np.arange(12).reshape(3, 4))
    with pytest.raises(ValueError, match="shape mismatch"):
        tk.copyto(tk.zeros((4, 3), backend=be), a)
    with pytest.raises(TypeError, match="cannot cast float32 to int32"):
        tk.copyto(tk.zeros(4, tk.int32, backend=be), np.full(4, 2.7, np.float32))
    r = tk.zeros((3, 4), backend=be)
    tk.copyto(r, np.arange(4, dtype=np.float32))                     # broadcast
    assert r.numpy().tolist() == [[0.0, 1.0, 2.0, 3.0]] * 3
    other = tk.asarray(np.ones((3, 4), np.float32), backend=tk.CPU())
    tk.copyto(r, other)                                              # across backends
    assert (r.numpy() == 1).all()
    h = np.zeros((3, 4), np.float32)
    tk.copyto(h[:, ::2], np.ones((3, 2), np.float32))               # into a strided host view
    assert h.tolist() == [[1.0, 0.0, 1.0, 0.0]] * 3
    h.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        tk.copyto(h, a)
