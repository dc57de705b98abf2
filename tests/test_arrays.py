"""tk.Array, its constructors and interop (tinykernels.array), on the CPU backend."""
import ctypes
import threading

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import array as A
from tinykernels import dtypes as D
from tinykernels.backends import CPU
from tinykernels.errors import LaunchError
from tinykernels.runtime.streams import Event, Stream

T = 10.0


@pytest.fixture
def cpu():
    return CPU()


class Interface:
    """Exports only __array_interface__ (like many C-extension buffers)."""

    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__


class HostDLPack:
    """Exports only DLPack, in host memory."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return (1, 0)


class GPUDLPack(HostDLPack):
    def __dlpack_device__(self):
        return (2, 0)            # kDLCUDA


# ------------------------------------------------------------------ constructors

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int32, np.uint16, np.int64,
                                   np.uint64, np.bool_, np.float16, "float32", D.float64, D.int16])
def test_constructors_with_dtypes(cpu, dtype):
    npd = D.to_numpy(D.from_any(dtype))
    z = A.zeros((2, 3), dtype, backend=cpu)
    assert isinstance(z, A.Array)
    assert z.shape == (2, 3) and z.dtype == npd and z.ndim == 2 and z.size == 6
    assert z.nbytes == 6 * npd.itemsize and len(z) == 2
    assert z.strides == (3 * npd.itemsize, npd.itemsize)
    assert z.backend == cpu and z.backend is cpu
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3), npd))
    np.testing.assert_array_equal(A.ones(4, dtype, backend=cpu).numpy(), np.ones(4, npd))
    e = A.empty((0, 5), dtype, backend=cpu)
    assert e.shape == (0, 5) and e.size == 0 and e.dtype == npd
    f = A.full(3, 1, dtype, backend=cpu)
    np.testing.assert_array_equal(f.numpy(), np.full(3, 1, npd))


def test_default_dtype_is_float32_and_tk_dtype_compares_equal(cpu):
    a = A.zeros(5, backend=cpu)
    assert a.dtype == np.float32 and a.dtype == D.PUBLIC["float32"]
    assert A.empty((2, 2), None, backend=cpu).dtype == np.float32
    assert A.full(3, 7, np.int32, backend=cpu).dtype == np.int32


def test_shapes_int_tuple_and_numpy_ints(cpu):
    assert A.zeros(4, backend=cpu).shape == (4,)
    assert A.zeros((), backend=cpu).shape == ()
    assert A.zeros((np.int64(2), 3), backend=cpu).shape == (2, 3)
    assert A.zeros([2, 3, 4], backend=cpu).shape == (2, 3, 4)
    with pytest.raises(TypeError, match="shape"):
        A.zeros((2.5, 3), backend=cpu)
    with pytest.raises(ValueError, match="negative"):
        A.zeros((-1,), backend=cpu)
    with pytest.raises(TypeError, match="0-d"):
        len(A.zeros((), backend=cpu))


def test_backend_none_is_default_backend():
    from tinykernels.backends import default_backend
    a = A.zeros(3)
    assert a.backend == default_backend()
    assert A.zeros(3, backend="CPU").backend == CPU()


def test_unknown_dtypes_raise_type_error(cpu):
    for bad in (np.complex64, "foo", object, np.str_):
        with pytest.raises(TypeError, match="unsupported dtype"):
            A.zeros(3, bad, backend=cpu)
    with pytest.raises(TypeError, match="complex"):
        A.asarray(np.zeros(3, np.complex128), backend=cpu)
    with pytest.raises(TypeError, match="not supported"):
        A.asarray(["a", "b"], backend=cpu)


def test_bfloat16_and_fp8_host_arrays(cpu):
    pytest.importorskip("ml_dtypes")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        a = A.ones(4, getattr(D, name), backend=cpu)
        assert a.dtype == D.to_numpy(D.BY_NAME[name]) and a.dtype.itemsize == D.BY_NAME[name].itemsize
        np.testing.assert_array_equal(a.numpy().astype(np.float32), np.ones(4, np.float32))


def test_full_fill_value_conversion(cpu):
    np.testing.assert_array_equal(A.full((2, 2), 2.5, backend=cpu).numpy(), np.full((2, 2), 2.5, np.float32))
    with pytest.raises(OverflowError):
        A.full(2, 300, np.int8, backend=cpu)


def test_repr(cpu):
    r = repr(A.full((2, 2), 3, np.int32, backend=cpu))
    assert r.startswith("tk.Array([[3, 3]") and "dtype=int32" in r and "CPU" in r


# ------------------------------------------------------------------ zero copy, numpy interop

def test_numpy_is_zero_copy_and_asarray_round_trip(cpu):
    h = np.arange(12, dtype=np.float64).reshape(3, 4)
    a = A.asarray(h, backend=cpu)
    assert a.numpy() is h
    assert a.dtype == np.float64 and a.shape == (3, 4) and a.strides == h.strides
    a.numpy()[1, 2] = -1
    assert h[1, 2] == -1
    assert np.shares_memory(np.asarray(a), h)
    assert np.asarray(a).base is a or np.asarray(a) is h       # a view, never a copy
    np.testing.assert_array_equal(np.array(a), h)
    assert not np.shares_memory(np.array(a), h)          # np.array copies by default
    assert A.asarray(a) is a and A.asarray(a, backend=cpu) is a
    assert a.ptr == h.ctypes.data


def test_asarray_keeps_strided_views(cpu):
    h = np.arange(24, dtype=np.int32).reshape(4, 6)
    v = h[::2, ::-3]
    a = A.asarray(v, backend=cpu)
    assert a.strides == v.strides and not a.is_contiguous
    assert np.shares_memory(a.numpy(), h)
    np.testing.assert_array_equal(a.numpy(), v)


def test_asarray_lists_and_scalars(cpu):
    a = A.asarray([1.0, 2.0, 3.0], backend=cpu)
    assert a.dtype == np.float64 and a.shape == (3,)
    assert A.asarray([[1, 2], [3, 4]], backend=cpu).dtype == np.int64
    assert A.asarray(np.float32(2), backend=cpu).shape == ()


def test_array_protocol_dtype_and_copy(cpu):
    a = A.asarray(np.arange(4, dtype=np.float32), backend=cpu)
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    b = a.__array__(copy=True)
    assert not np.shares_memory(b, a.numpy())
    with pytest.raises(ValueError):
        a.__array__(np.float64, copy=False)
    assert a.__array_interface__["data"][0] == a.numpy().ctypes.data


def test_array_interface_objects_are_wrapped_without_copy(cpu):
    h = np.arange(6, dtype=np.uint8)
    obj = Interface(h)
    a = A.asarray(obj, backend=cpu)
    a.numpy()[0] = 99
    assert h[0] == 99
    assert A.get_backend(obj) == CPU()
    assert np.shares_memory(A.as_host_ndarray(obj), h)


# ------------------------------------------------------------------ DLPack

def test_dlpack_export_zero_copy(cpu):
    a = A.zeros(10, np.float32, backend=cpu)
    assert a.__dlpack_device__() == (1, 0)
    v = np.from_dlpack(a)
    a.numpy()[:] = 4
    np.testing.assert_array_equal(v, np.full(10, 4, np.float32))
    assert np.shares_memory(v, a.numpy())
    cap = a.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
    assert "dltensor" in repr(cap)


def test_from_dlpack_zero_copy(cpu):
    h = np.zeros(10, np.float32)
    w = A.from_dlpack(h)
    assert isinstance(w, A.Array) and w.backend == CPU()
    w.numpy()[3] = 5
    assert h[3] == 5
    assert np.shares_memory(w.numpy(), h)
    w2 = A.from_dlpack(HostDLPack(h))
    assert np.shares_memory(w2.numpy(), h)
    assert np.shares_memory(A.from_dlpack(w).numpy(), h)


def test_from_dlpack_of_device_memory_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA:0"):
        A.from_dlpack(GPUDLPack(np.zeros(2)))
    with pytest.raises(TypeError, match="__dlpack__"):
        A.from_dlpack([1, 2, 3])
    with pytest.raises(ValueError, match="host"):
        A.asarray(GPUDLPack(np.zeros(2)), backend=CPU())


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_dlpack_of_bfloat16_and_float8_both_ways(cpu, name):
    """NumPy's DLPack exporter and importer refuse bfloat16 and float8 (DLPack codes 4, 10,
    12): tk.Array exports them with its own capsule and tk.from_dlpack reads them with its
    own importer, zero-copy, strides included (a torch tensor round trip)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    a = A.asarray(np.arange(6, dtype=np.float32).reshape(2, 3).astype(D.to_numpy(D.BY_NAME[name])), backend=cpu)
    t = torch.from_dlpack(a)
    assert str(t.dtype) == f"torch.{name}" and t.shape == (2, 3)
    assert t.float().tolist() == [[0, 1, 2], [3, 4, 5]]
    t[1, 2] = 7                                           # zero-copy: the array sees it
    assert float(a.numpy()[1, 2]) == 7
    b = A.from_dlpack(t.T)                                # a transposed view, back to tinykernels
    assert b.dtype == a.dtype and b.shape == (3, 2) and b.strides == a.strides[::-1]
    assert np.shares_memory(b.numpy(), a.numpy())
    assert b.numpy().astype(np.float32).tolist() == [[0, 3], [1, 4], [2, 7]]
    assert b.numpy().flags.writeable                     # torch's versioned capsule allows writes
    assert A.from_dlpack(torch.zeros((0, 3), dtype=t.dtype)).shape == (0, 3)
    assert float(A.from_dlpack(torch.tensor(2.0, dtype=t.dtype)).numpy()) == 2.0
    ro = A.asarray(a.numpy().copy(), backend=cpu)
    ro.numpy().flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__()
    assert torch.from_dlpack(ro.__dlpack__(copy=True)).float().tolist() == t.float().tolist()


def test_from_dlpack_of_a_legacy_bfloat16_capsule_is_read_only(cpu):
    """A legacy (unversioned) capsule cannot say the memory may be written: the view is
    read-only, as NumPy's importer makes it, so a kernel writing it is a LaunchError."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")

    class Legacy:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    w = A.from_dlpack(Legacy(torch.ones(4, dtype=torch.bfloat16)))
    assert w.dtype.name == "bfloat16" and not w.numpy().flags.writeable
    from tinykernels import kernel, index

    @kernel
    def twice(x):
        i = index()
        x[i] = x[i] * 2.0

    with pytest.raises(LaunchError, match="read-only"):
        twice(cpu)(w, ndrange=4)


def _capsule_struct(cap):
    """(name, the DLManagedTensor(Versioned) struct) of an unconsumed DLPack capsule."""
    from tinykernels.runtime import dlpack as dl
    api = dl._pyapi()
    for name, struct in ((b"dltensor_versioned", dl._DLManagedTensorVersioned), (b"dltensor", dl._DLManagedTensor)):
        if api.PyCapsule_IsValid(cap, name):
            return name.decode(), ctypes.cast(api.PyCapsule_GetPointer(cap, name), ctypes.POINTER(struct)).contents
    raise AssertionError("not a DLPack capsule")


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float32"])
def test_numpy_from_dlpack_of_any_dtype_is_a_clear_error_or_works(cpu, name):
    """NumPy (>= 2.1) asks for a versioned capsule; it refuses bfloat16 and float8 with its own
    error, never SystemError (a capsule with a Python destructor used to clear that error)."""
    pytest.importorskip("ml_dtypes")
    a = A.asarray(np.arange(6, dtype=np.float32).reshape(2, 3).astype(D.to_numpy(D.BY_NAME[name])), backend=cpu)
    if name == "float32":
        assert np.shares_memory(np.from_dlpack(a), a.numpy())
        return
    with pytest.raises((RuntimeError, BufferError, TypeError), match="(?i)dtype"):
        np.from_dlpack(a)
    b = A.from_dlpack(a)                                   # tinykernels' own importer reads it
    assert b.dtype == a.dtype and np.shares_memory(b.numpy(), a.numpy()) and b.numpy().flags.writeable


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float32"])
def test_dlpack_versioned_capsule_when_the_consumer_allows_it(cpu, name):
    """max_version (1, x): a "dltensor_versioned" capsule with DLPack's flags (read-only for a
    read-only array, is-copied for copy=True); no max_version: the legacy capsule."""
    pytest.importorskip("ml_dtypes")
    a = A.asarray(np.arange(4, dtype=np.float32).astype(D.to_numpy(D.BY_NAME[name])), backend=cpu)
    code = {"bfloat16": 4, "float8_e4m3fn": 10, "float32": 2}[name]
    kind, mt = _capsule_struct(cap := a.__dlpack__(max_version=(1, 0)))     # (cap: keeps mt alive)
    assert kind == "dltensor_versioned" and mt.version.major == 1 and mt.flags == 0
    assert (mt.dl_tensor.dtype.code, mt.dl_tensor.dtype.bits) == (code, 8 * a.dtype.itemsize)
    assert mt.dl_tensor.data == a.numpy().ctypes.data
    kind, mt = _capsule_struct(cap := a.__dlpack__(max_version=(1, 0), copy=True))
    assert kind == "dltensor_versioned" and mt.flags == 2 and mt.dl_tensor.data != a.numpy().ctypes.data
    kind, mt = _capsule_struct(cap := a.__dlpack__())
    assert kind == "dltensor" and mt.dl_tensor.dtype.code == code
    assert _capsule_struct(a.__dlpack__(max_version=(0, 8)))[0] == "dltensor"
    ro = A.asarray(a.numpy().copy(), backend=cpu)
    ro.numpy().flags.writeable = False
    kind, mt = _capsule_struct(cap := ro.__dlpack__(max_version=(1, 0)))
    assert kind == "dltensor_versioned" and mt.flags == 1
    with pytest.raises(BufferError):
        ro.__dlpack__()                                     # a legacy capsule cannot say read-only
    r = A.from_dlpack(ro)                                   # zero-copy and still read-only
    assert np.shares_memory(r.numpy(), ro.numpy()) and not r.numpy().flags.writeable


def test_from_dlpack_asks_producers_for_versioned_capsules(cpu):
    """tk.from_dlpack passes max_version to a DLPack 1.x producer and reads its versioned
    capsule (torch, NumPy, tinykernels itself); an older producer still gets the old call."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    seen = []

    class Recorder:
        def __init__(self, x, legacy=False):
            self.x, self.legacy = x, legacy

        def __dlpack__(self, **kw):
            if self.legacy and kw:
                raise TypeError("unexpected keyword")
            seen.append(kw.get("max_version"))
            return self.x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

    t = torch.arange(4, dtype=torch.float32).to(torch.bfloat16)
    w = A.from_dlpack(Recorder(t))
    assert seen and seen[-1] is not None and seen[-1][0] >= 1
    assert w.numpy().flags.writeable                       # the versioned capsule allows writes
    w.numpy()[0] = 9
    assert float(t[0]) == 9
    seen.clear()
    v = A.from_dlpack(Recorder(t, legacy=True))            # legacy: read-only, as NumPy's importer
    assert seen and set(seen) == {None} and not v.numpy().flags.writeable
    n = np.arange(3.0)
    assert np.shares_memory(A.from_dlpack(Recorder(n)).numpy(), n)


def test_device_dlpack_capsule_versioned_flags_and_release():
    """The capsule built for device memory (CUDA, ROCm) is versioned when asked, with the
    is-copied flag, and frees what it keeps alive once consumed and released, or dropped."""
    import gc
    from tinykernels.runtime import dlpack as dl

    class Fake:                                           # host memory standing in for a device array
        def __init__(self, h):
            self.h, self.ptr, self.shape, self.strides, self.dtype = h, h.ctypes.data, h.shape, h.strides, h.dtype

        def __dlpack_device__(self):
            return (1, 0)

    h = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = len(dl._EXPORTS)
    cap = dl._dlpack_capsule(Fake(h), (1, 0), copied=True)
    kind, mt = _capsule_struct(cap)
    assert kind == "dltensor_versioned" and (mt.version.major, mt.version.minor) == (1, 0) and mt.flags == 2
    ptr, shape, strides, dtype, dev, owner = dl._from_dlpack_capsule(cap, None)
    assert (ptr, shape, strides, dtype, dev) == (h.ctypes.data, (2, 3), h.strides, np.float32, (1, 0))
    assert not owner.readonly and len(dl._EXPORTS) == before + 1
    del owner, cap
    gc.collect()
    assert len(dl._EXPORTS) == before                     # the consumer's deleter released it
    cap = dl._dlpack_capsule(Fake(h), (1, 0))
    assert len(dl._EXPORTS) == before + 1
    del cap                                               # never consumed: the capsule frees it
    gc.collect()
    assert len(dl._EXPORTS) == before
    assert _capsule_struct(dl._dlpack_capsule(Fake(h)))[0] == "dltensor"


class CudaInterface:
    """Exports only __cuda_array_interface__ (a CuPy / Numba device array), no GPU needed."""
    __cuda_array_interface__ = {"shape": (3,), "typestr": "<f4", "data": (0, False), "version": 3}


def _fill_kernel():
    import tinykernels as tk

    @tk.kernel
    def fill(A, v):
        A[tk.index()] = v
    return fill


@pytest.mark.parametrize("name", ["CPU", "INTERP", "CL", "WEBGPU"])
def test_cuda_and_foreign_device_arrays_are_named_errors(name):
    """A __cuda_array_interface__ object or a torch tensor on another device (meta here) is
    an error saying where the array lives, naming the kernel and argument, on every non-CUDA
    backend (were 'unsupported type CAI' and 'arrays of dtype object' from tk.asarray)."""
    import tinykernels as tk
    if name not in tk.backends_available():
        pytest.skip(f"{name} unavailable")
    b, fill = tk.backend(name), _fill_kernel()
    with pytest.raises(LaunchError, match="'fill'.*'A'.*CUDA device memory"):
        fill(b)(CudaInterface(), 1.0, ndrange=3)
    with pytest.raises(ValueError, match="CUDA device memory.*not in host memory"):
        A.asarray(CudaInterface(), backend=b)
    torch = pytest.importorskip("torch")
    with pytest.raises(LaunchError, match="'fill'.*'A'.*torch tensor on meta"):
        fill(b)(torch.zeros(3, device="meta"), 1.0, ndrange=3)
    with pytest.raises(ValueError, match="'meta' device"):
        A.asarray(torch.zeros(3, device="meta"), backend=b)


# ------------------------------------------------------------------ from_blob

def test_from_blob_wraps_memory(cpu):
    host = np.zeros(8, np.float64)
    a = A.from_blob(host.ctypes.data, (8,), np.float64, cpu)
    a.numpy()[:] = 9.0
    np.testing.assert_array_equal(host, np.full(8, 9.0))
    assert a.backend == cpu and a.ptr == host.ctypes.data
    b = A.from_blob(host.ctypes.data, 8, D.float64, cpu)
    assert b.shape == (8,) and np.shares_memory(b.numpy(), host)


def test_from_blob_ctypes_buffer_and_strides(cpu):
    buf = (ctypes.c_int32 * 12)(*range(12))
    addr = ctypes.addressof(buf)
    a = A.from_blob(addr, (3, 4), np.int32, cpu)
    np.testing.assert_array_equal(a.numpy(), np.arange(12).reshape(3, 4))
    t = A.from_blob(addr, (4, 3), np.int32, cpu, strides=(4, 16))       # transposed view
    np.testing.assert_array_equal(t.numpy(), np.arange(12).reshape(3, 4).T)
    r = A.from_blob(addr + 11 * 4, (12,), np.int32, cpu, strides=(-4,))  # reversed view
    np.testing.assert_array_equal(r.numpy(), np.arange(12)[::-1])
    r.numpy()[0] = -7
    assert buf[11] == -7
    z = A.from_blob(0, (0, 3), np.float32, cpu)
    assert z.shape == (0, 3)
    with pytest.raises(ValueError, match="address"):
        A.from_blob(0, (3,), np.float32, cpu)
    with pytest.raises(ValueError, match="strides"):
        A.from_blob(addr, (3, 4), np.int32, cpu, strides=(4,))
    with pytest.raises(TypeError, match="dtype"):
        A.from_blob(addr, (3,), np.complex64, cpu)


# ------------------------------------------------------------------ copyto

def test_copyto_synchronous(cpu):
    d = A.empty(6, np.float64, backend=cpu)
    ev = A.copyto(d, A.asarray(np.arange(6.0), backend=cpu))
    assert isinstance(ev, Event) and ev.done()
    ev.wait()
    np.testing.assert_array_equal(d.numpy(), np.arange(6.0))
    A.copyto(d, np.ones(6, np.float32))                 # numpy source, safe cast
    np.testing.assert_array_equal(d.numpy(), np.ones(6))
    A.copyto(d, [5, 4, 3, 2, 1, 0])                      # list source
    np.testing.assert_array_equal(d.numpy(), np.arange(6.0)[::-1])
    h = np.zeros(6, np.float64)
    A.copyto(h, d)                                       # numpy destination
    np.testing.assert_array_equal(h, d.numpy())


def test_copyto_errors(cpu):
    d = A.zeros((2, 3), np.float32, backend=cpu)
    with pytest.raises(ValueError, match=r"shape mismatch.*\(2, 3\).*\(3, 2\)"):
        A.copyto(d, np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"shape mismatch.*\(2, 3\).*\(2,\).*broadcast"):
        A.copyto(d, np.zeros(2, np.float32))            # (2,) does not broadcast to (2, 3)
    with pytest.raises(ValueError, match="shape mismatch"):
        A.copyto(np.zeros(3), np.zeros((2, 3)))         # nor does a larger source
    with pytest.raises(TypeError, match="cast"):
        A.copyto(A.zeros(2, np.int32, backend=cpu), np.zeros(2, np.float64))
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        A.copyto(ro, np.ones(3))
    with pytest.raises(TypeError, match="dst"):
        A.copyto([0, 0], np.ones(2))


@pytest.mark.parametrize("dev", ["CPU", "INTERP"] + [d for n, d in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                                      if tk.backends()[n][0]])
def test_copyto_refuses_a_host_dst_it_cannot_write_element_by_element(dev):
    """A read-only host dst is a ValueError from tk.copyto whatever the source (from a device
    array it was NumPy's bare 'assignment destination is read-only'), and so is a dst whose
    elements share memory (torch.expand, a writeable stride-0 view): the copy kept the last
    element's value in all of them, where torch's copy_ refuses."""
    b = tk.backend(dev)
    src = A.asarray(np.arange(4, dtype=np.float32), backend=b)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="tk.copyto: dst is read-only"):
        A.copyto(ro, src)
    shared = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (4,), (0,))
    for s in (src, np.arange(4, dtype=np.float32)):
        with pytest.raises(ValueError, match=r"tk.copyto: dst has elements that share memory \(stride 0 along "
                                             r"its dimension 0 of extent 4"):
            A.copyto(shared, s)
    assert shared[0] == 0
    one = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (1,), (0,))
    A.copyto(one, A.asarray(np.full(1, 7, np.float32), backend=b))          # one element: fine
    assert one[0] == 7


def test_copyto_async_on_a_stream_is_ordered(cpu):
    s = cpu.stream()
    src = A.full(1000, 3.0, np.float32, backend=cpu)
    dst = A.zeros(1000, np.float32, backend=cpu)
    gate = threading.Event()
    s.submit(lambda: gate.wait(T))
    ev = A.copyto(dst, src, stream=s)
    assert isinstance(ev, Event) and not ev.done()
    assert dst.numpy()[0] == 0                           # queued behind the blocked job
    src.numpy()[:] = 5.0                                 # read when the copy runs
    gate.set()
    ev.wait(timeout=T)
    np.testing.assert_array_equal(dst.numpy(), np.full(1000, 5.0, np.float32))
    with pytest.raises(ValueError, match="shape"):      # checked before queuing
        A.copyto(dst, np.zeros(3), stream=s)
    s.synchronize()


def test_copyto_on_a_plain_stream_and_overlap(cpu):
    h = np.arange(10.0)
    A.copyto(h[2:], h[:8], stream=Stream()).wait(timeout=T)
    np.testing.assert_array_equal(h, [0, 1, 0, 1, 2, 3, 4, 5, 6, 7])


# ------------------------------------------------------------------ get_backend / as_host_ndarray

def test_get_backend(cpu):
    a = A.zeros(3, backend=CPU(threads=1))
    assert A.get_backend(a) == CPU(threads=1)
    assert A.get_backend(np.zeros(3)) == CPU()
    assert A.get_backend(HostDLPack(np.zeros(3))) == CPU()
    with pytest.raises(LaunchError, match="list"):
        A.get_backend([1, 2])
    with pytest.raises(LaunchError, match="float"):
        A.get_backend(2.0)
    with pytest.raises(LaunchError, match="CUDA:0"):
        A.get_backend(GPUDLPack(np.zeros(3)))


def test_as_host_ndarray(cpu):
    h = np.arange(6.0).reshape(2, 3)
    a = A.asarray(h, backend=cpu)
    assert A.as_host_ndarray(a) is h
    assert A.as_host_ndarray(h) is h
    m = np.ma.masked_array(h)
    assert type(A.as_host_ndarray(m)) is np.ndarray and np.shares_memory(A.as_host_ndarray(m), h)
    assert np.shares_memory(A.as_host_ndarray(HostDLPack(h)), h)
    for not_array in (1, 2.0, True, np.float32(1), np.int64(3), "s", None, [1, 2], GPUDLPack(h)):
        assert A.as_host_ndarray(not_array) is None, not_array


# ------------------------------------------------------------------ torch

def test_torch_tensors_zero_copy(cpu):
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a = A.asarray(t, backend=cpu)
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a.numpy()[0, 0] = 42
    assert t[0, 0].item() == 42
    assert A.get_backend(t) == CPU()
    v = A.as_host_ndarray(t.T)                           # strided view keeps its strides
    assert v.strides == (4, 12) and np.shares_memory(v, a.numpy())
    back = torch.from_dlpack(a)                          # DLPack export to torch
    back[1, 1] = -1
    assert a.numpy()[1, 1] == -1
    w = A.from_dlpack(t)
    assert np.shares_memory(w.numpy(), a.numpy())
    g = torch.zeros(4, requires_grad=True)              # tensors that require grad too
    assert np.shares_memory(A.as_host_ndarray(g), g.detach().numpy())


def test_torch_bfloat16_tensor(cpu):
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    t = torch.ones(4, dtype=torch.bfloat16)
    a = A.asarray(t, backend=cpu)
    assert a.dtype == D.to_numpy(D.bfloat16)
    a.numpy()[1] = 3
    assert t[1].item() == 3.0


def test_copyto_torch_destination(cpu):
    torch = pytest.importorskip("torch")
    t = torch.zeros(5, dtype=torch.float64)
    A.copyto(t, np.arange(5.0))
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_get_backend_follows_cpu_defaults_from_environment(monkeypatch):
    monkeypatch.setenv("TK_NUM_THREADS", "1")
    assert A.get_backend(np.zeros(2)) == CPU(threads=1)
    monkeypatch.setenv("TK_NUM_THREADS", "3")
    assert A.get_backend(np.zeros(2)) == CPU(threads=3)


@pytest.mark.parametrize("dev", ("CL", "WEBGPU"))
def test_zero_dim_device_arrays_keep_their_shape(dev):
    # np.ascontiguousarray turned a 0-d host array into shape (1,) on upload
    import tinykernels as tk
    if dev not in tk.backends_available():
        pytest.skip(f"{dev} is not available")
    b = tk.backend(dev)
    for a in (tk.zeros((), tk.int32, backend=b), tk.asarray(np.float32(2.5), backend=b)):
        assert a.shape == () and a.numpy().shape == ()
    assert tk.asarray(np.float32(2.5), backend=b).numpy() == np.float32(2.5)


@pytest.mark.parametrize("dev", ["CPU", "INTERP"] + [d for n, d in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                                     if __import__("tinykernels").backends()[n][0]])
def test_one_element_arrays_convert_to_python_scalars(dev):
    # int(llm.argmax(x)) (an int32 0-d array, SPEC section 10) was a TypeError, as were
    # float(), .item() and using it as an index; conversions follow NumPy's rules
    import operator

    import tinykernels as tk
    from tinykernels import llm
    b = tk.backend(dev)
    am = llm.argmax(tk.asarray(np.array([1, 5, 2], np.float32), backend=b))
    assert int(am) == 1 and operator.index(am) == 1 and [10, 20, 30][am] == 20 and am.item() == 1
    assert type(am.item()) is int and bool(am) is True
    z = tk.asarray(np.array(2.5, np.float32), backend=b)
    assert float(z) == 2.5 and z.item() == 2.5 and complex(z) == 2.5 and bool(tk.zeros((), backend=b)) is False
    with pytest.raises(TypeError):
        operator.index(z)                                  # a float is no index, as in NumPy
    with pytest.raises((TypeError, ValueError)):
        int(tk.zeros(3, backend=b))                        # not one element
    with pytest.raises(ValueError):
        tk.zeros(3, backend=b).item()
    assert bool(tk.zeros(3, backend=b)) and not bool(tk.zeros((0, 2), backend=b))  # non-empty, as before


@pytest.mark.parametrize("name", ["CL", "WEBGPU"])
def test_device_copyto_casts_by_same_kind_and_handles_empty_arrays(name):
    """tk.copyto onto a device follows the host's rule on every route: values converted with
    NumPy's same_kind casting, a narrowing or float -> int copy a TypeError. OpenCL copied a
    device array of another dtype byte for byte (float32 -> int32 gave the bit patterns,
    float64 -> float32 failed in clEnqueueCopyBuffer), truncated host floats into int arrays,
    and failed on empty arrays."""
    import tinykernels as tk
    if name not in tk.backends_available():
        pytest.skip(f"{name} unavailable")
    b = tk.backend(name)
    wide = [(np.int32, np.float32), (np.int16, np.int32)] + \
        ([(np.float32, np.float64), (np.float64, np.float32), (np.int64, np.int32)] if b.supports_float64 else [])
    for sdt, ddt in wide:
        src = (np.arange(6) * 3 - 7).astype(sdt)
        for s in (tk.asarray(src, backend=b), src):
            d = tk.zeros((6,), ddt, backend=b)
            tk.copyto(d, s)
            np.testing.assert_array_equal(d.numpy(), src.astype(ddt))
    for s in (tk.asarray(np.full(3, 2.5, np.float32), backend=b), np.full(3, 2.5, np.float32), [2.5, 1.0, 0.0]):
        d = tk.zeros((3,), tk.int32, backend=b)
        with pytest.raises(TypeError, match="cannot cast float.* to int32"):
            tk.copyto(d, s)
        assert (d.numpy() == 0).all()
    e = tk.zeros((0, 3), backend=b)
    tk.copyto(e, tk.zeros((0, 3), backend=b))
    tk.copyto(e, np.zeros((0, 3), np.float32))
    tk.copyto(np.zeros((0, 3), np.float32), e)


@pytest.mark.parametrize("be", ["CPU", "INTERP", "CL", "WEBGPU"])
def test_copyto_broadcasts_like_np_copyto(be):
    """tk.copyto broadcasts ``src`` to ``dst``'s shape as np.copyto does: a Python scalar, a
    0-d array, a row, a column; host or device on either side, with and without a stream."""
    if be not in tk.backends_available():
        pytest.skip(f"{be} unavailable")
    b = tk.backend(be)
    row = np.arange(3, dtype=np.float32)
    col = np.arange(2, dtype=np.float32).reshape(2, 1)
    for src in (2.5, np.float32(2.5), np.array(2.5, np.float32), row, col, [1, 2, 3]):
        ref = np.zeros((2, 3), np.float32)
        np.copyto(ref, src, casting="same_kind")
        for dev_src in (False, True):
            s = tk.asarray(np.asarray(src, np.float32), backend=b) if dev_src else src
            d = A.zeros((2, 3), np.float32, backend=b)
            A.copyto(d, s).wait()
            np.testing.assert_array_equal(d.numpy(), ref)
            h = np.zeros((2, 3), np.float32)
            A.copyto(h, s).wait()                        # host destination
            np.testing.assert_array_equal(h, ref)
            st = b.stream()
            d2 = A.zeros((2, 3), np.float32, backend=b)
            A.copyto(d2, s, stream=st)
            st.synchronize()
            np.testing.assert_array_equal(d2.numpy(), ref)
    with pytest.raises(TypeError, match="cast"):
        A.copyto(A.zeros(3, np.int32, backend=b), 2.5)  # same_kind still applies


def test_broadcasting_copyto_checks_the_stream_first():
    if "CL" not in tk.backends_available():
        pytest.skip("CL unavailable")
    src = tk.asarray(np.array(1.0, np.float32), backend="CL")
    with pytest.raises(ValueError, match="tk.copyto: stream= must be a stream"):
        A.copyto(np.zeros(3, np.float32), src, stream="s")


@pytest.mark.parametrize("name", ["float32", "int16", "bfloat16"])
def test_dlpack_copy_true_copies_and_copy_false_shares(cpu, name):
    """The DLPack standard: __dlpack__(copy=True) exports a copy, copy=False the array itself;
    tk.from_dlpack(x, copy=True) likewise copies."""
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    dt = D.to_numpy(D.BY_NAME[name])
    a = A.asarray(np.arange(6).astype(dt), backend=cpu)
    shared = A.from_dlpack(HostDLPack(a))                      # copy=None: zero-copy
    assert np.shares_memory(shared.numpy(), a.numpy())
    if name == "bfloat16":              # NumPy cannot read the capsule: through torch
        torch = pytest.importorskip("torch")
        a.numpy()[0] = 9
        t_copy, t_view = torch.from_dlpack(a.__dlpack__(copy=True)), torch.from_dlpack(a.__dlpack__(copy=False))
        a.numpy()[0] = 0
        assert float(t_copy[0]) == 9 and float(t_view[0]) == 0
    else:
        for kw in ({"copy": False}, {"copy": False, "max_version": (1, 0)}):
            v = np.from_dlpack(_Capsule(a.__dlpack__(**kw)))
            assert np.shares_memory(v, a.numpy()), kw
        for kw in ({"copy": True}, {"copy": True, "max_version": (1, 0)}):
            v = np.from_dlpack(_Capsule(a.__dlpack__(**kw)))
            assert not np.shares_memory(v, a.numpy()), kw
            assert v.tolist() == list(range(6))
    c = A.from_dlpack(a, copy=True)
    assert not np.shares_memory(c.numpy(), a.numpy()) and c.dtype == a.dtype
    assert np.shares_memory(A.from_dlpack(a, copy=False).numpy(), a.numpy())


class _Capsule:
    """Hands over an already made capsule (what a consumer receives from __dlpack__)."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, **kw):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("be", ["CL", "WEBGPU"])
def test_device_arrays_export_a_host_copy_when_asked(be):
    """OpenCL/WebGPU buffers cannot be exported, but a consumer asking for host memory
    (dl_device=(kDLCPU, 0), e.g. np.from_dlpack(x, device='cpu')) gets a copy, as the DLPack
    standard has the producer do; copy=False then is a BufferError, and so is any export
    without dl_device."""
    if be not in tk.backends_available():
        pytest.skip(f"{be} unavailable")
    x = tk.asarray(np.arange(5, dtype=np.float32), backend=be)
    np.testing.assert_array_equal(np.from_dlpack(x, device="cpu"), np.arange(5))
    np.testing.assert_array_equal(np.from_dlpack(x, device="cpu", copy=True), np.arange(5))
    with pytest.raises(BufferError, match="copy=False forbids"):
        x.__dlpack__(dl_device=(1, 0), copy=False)
    for kw in ({}, {"copy": True}):
        with pytest.raises(BufferError, match="cannot be exported through DLPack"):
            x.__dlpack__(**kw)
    kind, mt = _capsule_struct(cap := x.__dlpack__(dl_device=(1, 0), max_version=(1, 0)))  # (cap: keeps mt)
    assert kind == "dltensor_versioned" and mt.flags == 2       # DLPack's is-copied flag: a host copy
    assert _capsule_struct(cap := x.__dlpack__(dl_device=(1, 0)))[0] == "dltensor"
