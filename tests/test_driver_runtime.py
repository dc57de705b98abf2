"""The generic pieces of the driver-API runtimes that CUDA and ROCm share (runtime/driverbackend.py,
drivermemory.py, driverstream.py, paramblock.py, compiler.cached_binary), on small fakes: no GPU,
no driver bindings. tests/test_cuda.py and tests/test_rocm.py check them through each runtime."""
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import tinykernels as tk
from tinykernels import dtypes as D
from tinykernels.runtime import compiler, paramblock
from tinykernels.runtime.driverbackend import check_grid, check_stream, kernel_function, shared_device
from tinykernels.runtime.drivermemory import DriverAllocation, DriverArray
from tinykernels.runtime.driverstream import DriverEvent, DriverStream, stream_priority


def test_stream_priority_high_is_the_greatest_and_the_rest_the_least():
    assert [stream_priority(p, 0, -5) for p in (tk.High, tk.Normal, tk.Low)] == [-5, 0, 0]


def test_shared_device_is_made_once_and_says_why_it_cannot_be():
    made = []

    def make(n):
        if n == 1:
            raise RuntimeError("busy")
        made.append(n)
        return SimpleNamespace(n=n)
    devices, lock = {}, threading.Lock()
    a = shared_device(devices, lock, 0, 2, make, "ROCm")
    assert shared_device(devices, lock, 0, 2, make, "ROCm") is a and made == [0]
    with pytest.raises(tk.BackendUnavailable, match="ROCm device 3 does not exist: this machine has 2 device"):
        shared_device(devices, lock, 3, 2, make, "ROCm")
    with pytest.raises(tk.BackendUnavailable, match="CUDA device 1 cannot be used: busy"):
        shared_device(devices, lock, 1, 2, make, "CUDA")


def test_kernel_function_compiles_and_loads_a_source_once_per_device():
    dev = SimpleNamespace(lock=threading.Lock(), modules={}, arch="gfx90a", activate=lambda: None)
    calls = []
    fn = kernel_function(dev, "src", lambda: calls.append("compile") or b"img", lambda im: ("mod", im),
                         lambda mod: ("fn", mod), "HIP runtime", "k", "f.py")
    again = kernel_function(dev, "src", lambda: calls.append("compile") or b"img", lambda im: ("mod", im),
                            lambda mod: ("fn", mod), "HIP runtime", "k", "f.py")
    assert fn is again and fn == ("fn", ("mod", b"img")) and calls == ["compile"]

    def refuse(im):
        raise RuntimeError("no kernel image")
    with pytest.raises(tk.CompileError, match="the HIP runtime could not load the compiled kernel 'k' "
                                              r"\(gfx90a\): no kernel image"):
        kernel_function(dev, "other", lambda: b"img", refuse, None, "HIP runtime", "k", "f.py")
    assert "other" not in dev.modules


def test_launch_checks_name_the_kernel():
    check_grid("k", (10, 1, 1), (10, 1, 1))
    with pytest.raises(tk.LaunchError, match="kernel 'k': 11 workgroups along hardware axis y exceed"):
        check_grid("k", (1, 11, 1), (10, 10, 10))
    b = object()
    s = SimpleNamespace(backend=b)
    check_stream("k", None, SimpleNamespace, b)
    check_stream("k", s, SimpleNamespace, b)
    with pytest.raises(tk.LaunchError, match="kernel 'k': the stream belongs to another backend"):
        check_stream("k", s, SimpleNamespace, object())


def _layout():
    a = SimpleNamespace(name="a")
    return [("start", 0, "int64"), ("count", 0, "int64"), ("step", 0, "int64"), ("ptr", a, "ptr"),
            ("shape", (a, 0), "int32"), ("stride", (a, 0), "int32"), ("scalar", ("s", D.Ty(D.float32)), "float32"),
            ("scalar", ("c", D.Ty(D.int8)), "int8"), ("scalar", ("d", D.Ty(D.float64)), "float64"), ("err", None, "ptr")]


def test_the_packed_buffer_holds_the_values_of_the_slot_block():
    """arg_buffer (HIP's ``extra``: natural alignment) and pack_params (8-byte slots) write
    the same values; the offsets are the AMDGPU ABI's."""
    arr = SimpleNamespace(ptr=0x1234_5678_9A, shape=(7,), strides=(24,), dtype=np.dtype(np.float64))
    values = {"a": arr, "s": 1.5, "c": -3, "d": 2.25}
    layout = _layout()
    geom = (4, 100, 2)
    offs, size = paramblock.arg_offsets(layout)
    assert offs == [0, 8, 16, 24, 32, 36, 40, 44, 48, 56] and size == 64
    buf = bytes(paramblock.arg_buffer(layout, values, geom, err_ptr=0xBEEF))
    slots, _ = paramblock.pack_params(layout, values, geom, err_ptr=0xBEEF)
    raw = slots.tobytes()
    for i, (off, (_, _, ct)) in enumerate(zip(offs, layout)):
        n = np.dtype(paramblock.NP_PARAM[ct]).itemsize
        assert buf[off:off + n] == raw[8 * i:8 * i + n], layout[i]
    assert np.frombuffer(buf[32:36], np.int32)[0] == 7 and np.frombuffer(buf[36:40], np.int32)[0] == 3
    assert np.frombuffer(buf[44:45], np.int8)[0] == -3 and np.frombuffer(buf[56:64], np.uint64)[0] == 0xBEEF


def test_cached_binary_builds_once_and_rebuilds_a_damaged_file(tmp_path):
    stats = {"compiles": 0, "disk_hits": 0}
    path = tmp_path / "k" / "x.bin"
    builds = []

    def build():
        builds.append(1)
        return b"image"
    assert compiler.cached_binary(path, stats, build) == b"image"
    assert compiler.cached_binary(path, stats, build) == b"image"
    assert len(builds) == 1 and stats == {"compiles": 1, "disk_hits": 1}
    path.write_bytes(path.read_bytes()[:-3])                     # truncated
    assert compiler.cached_binary(path, stats, build) == b"image" and len(builds) == 2
    assert compiler.cached_binary(None, stats, build) == b"image" and len(builds) == 3


# --- a driver on the host: "device" memory is host memory, events are done when told ------

class _Dev:
    prio_least, prio_greatest = 0, -1
    null = "null"

    def activate(self):
        pass


class _Event(DriverEvent):
    __slots__ = ("handle", "_dev")
    label = "FAKE"
    pending = set()

    @classmethod
    def record(cls, dev, h_stream):
        return cls(h_stream, dev)

    def _query(self):
        return self.handle not in self.pending

    def _synchronize(self):
        self.pending.discard(self.handle)


class _Stream(DriverStream):
    label = "FAKE"
    event_class = _Event
    waited: list = []

    def _create(self, prio):
        return f"stream{prio}"

    def _wait_event(self, handle):
        self.waited.append(handle)

    def _synchronize(self):
        _Event.pending.discard(self.handle)

    def _destroy(self):
        pass


def test_driver_streams_and_events_on_a_fake_driver():
    backend = SimpleNamespace(_dev=_Dev(), device=0)
    hi, lo = _Stream(backend, tk.High), _Stream(backend, tk.Low)
    assert (hi.native_priority, lo.native_priority, hi.handle) == (-1, 0, "stream-1")
    assert repr(hi) == "<tk.Stream (FAKE:0) priority=1>"
    ev = _Event.record(backend._dev, "stream0")
    hi.wait(ev)                                   # on the device
    assert _Stream.waited == ["stream0"]
    assert _Event(None).done() and repr(_Event(None)) == "<tk.Event (FAKE) done>"
    _Event.pending.add("stream-1")
    with pytest.raises(TimeoutError, match="the FAKE stream: work still running after 0.05 s"):
        hi.synchronize(timeout=0.05)
    hi.synchronize()
    assert hi.submit(lambda: None).done()
    with pytest.raises(TypeError, match="Stream.wait expects a tk.Event"):
        hi.wait(object())


class _Alloc(DriverAllocation):
    __slots__ = ()
    freed: list = []

    @staticmethod
    def _malloc(n):
        buf = np.zeros(n, np.uint8)
        _Array.memory[buf.ctypes.data] = buf
        return buf.ctypes.data

    @staticmethod
    def _free(ptr):
        _Alloc.freed.append(ptr)


class _Array(DriverArray):
    __slots__ = ()
    label = "FAKE"
    dl_device_type = 99
    allocation = _Alloc
    memory: dict = {}

    def _to_host(self, dst, src, n):
        import ctypes
        ctypes.memmove(dst, src, n)


def test_driver_arrays_copy_strided_views_to_the_host():
    backend = SimpleNamespace(_dev=_Dev(), device=0)
    a = _Array.empty(backend, (3, 4), np.float32)
    host = _Array.memory[a.ptr]
    host.view(np.float32)[:] = np.arange(12, dtype=np.float32)
    assert a.is_contiguous and a.strides == (16, 4) and a.__dlpack_device__() == (99, 0)
    np.testing.assert_array_equal(a.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
    col = _Array(backend, a.ptr + 4, (3,), np.float32, (16,), a)       # a[:, 1]
    assert not col.is_contiguous
    np.testing.assert_array_equal(col.numpy(), [1, 5, 9])
    rev = _Array(backend, a.ptr + 44, (12,), np.float32, (-4,), a)     # a.ravel()[::-1]
    np.testing.assert_array_equal(rev.numpy(), np.arange(12, dtype=np.float32)[::-1])
    assert _Array(backend, a.ptr, (0, 4), np.float32, None, a).numpy().shape == (0, 4)
    with pytest.raises(AttributeError, match="a tk.Array on a FAKE device has no host address"):
        a.__array_interface__
    with pytest.raises(BufferError, match="tk.Array on FAKE:0 cannot be exported to device"):
        a.__dlpack__(dl_device=(2, 0))


def test_driver_array_dlpack_copy_true_exports_a_new_allocation():
    """__dlpack__(copy=True) exports a copy on the same device (it raised BufferError: the
    DLPack standard has the producer copy); copy=None/False export the memory itself;
    dl_device=(kDLCPU, 0) exports a host copy, which copy=False refuses."""
    from tinykernels.runtime import dlpack as DL
    import ctypes

    def copy(dst, src):
        if isinstance(src, np.ndarray):
            ctypes.memmove(dst.ptr, np.ascontiguousarray(src).ctypes.data, src.nbytes)
        else:
            ctypes.memmove(dst.ptr, src.ptr, src.nbytes)
    backend = SimpleNamespace(_dev=_Dev(), device=0, copy=copy, name="FAKE")
    a = _Array.empty(backend, (2, 3), np.float32)
    _Array.memory[a.ptr].view(np.float32)[:] = np.arange(6, dtype=np.float32)

    def exported(cap):
        return [v[3] for v in DL._EXPORTS.values()][-1]       # the array the last capsule keeps
    for copy_flag in (None, False):
        cap = a.__dlpack__(copy=copy_flag)
        assert exported(cap) is a
    cap = a.__dlpack__(copy=True)
    c = exported(cap)
    assert c is not a and c.ptr != a.ptr and c.shape == a.shape
    np.testing.assert_array_equal(c.numpy(), a.numpy())
    col = _Array(backend, a.ptr + 4, (2,), np.float32, (12,), a)            # a[:, 1], strided
    cap = col.__dlpack__(copy=True)
    assert exported(cap).is_contiguous and exported(cap).numpy().tolist() == [1, 4]
    np.testing.assert_array_equal(np.from_dlpack(a, device="cpu"), np.arange(6).reshape(2, 3))
    with pytest.raises(BufferError, match="copy=False forbids"):
        a.__dlpack__(dl_device=(1, 0), copy=False)


class _CudaLike(_Array):
    __slots__ = ()
    dl_device_type = 2                    # kDLCUDA: what a CUDA array exports


def test_device_dlpack_capsule_keeps_a_failing_consumers_error_and_frees_the_export():
    """A CUDA/ROCm capsule's destructor is C code (the launcher extension's
    dlpack_capsule_dtor, saving the error state around the deleter): a consumer that takes the
    capsule and then fails (NumPy refuses device memory) raises its own error (a Python
    destructor turned it into "SystemError: from_dlpack returned NULL without setting an
    exception"), and the dropped capsule releases its export (it stayed registered)."""
    import gc

    from tinykernels.runtime import dlpack as DL
    from tinykernels.runtime import launcher
    if isinstance(launcher.get(), launcher.PyLauncher):
        pytest.skip("the ctypes launcher (no Python headers) keeps the Python destructor")
    backend = SimpleNamespace(_dev=_Dev(), device=0)
    a = _CudaLike.empty(backend, (2, 3), np.float32)
    gc.collect()
    before = len(DL._EXPORTS)
    for _ in range(3):
        with pytest.raises((RuntimeError, BufferError, ValueError), match="(?i)device"):
            np.from_dlpack(a)                 # versioned capsule (NumPy asks max_version)
    for mv in (None, (1, 0)):
        cap = a.__dlpack__(max_version=mv)    # legacy and versioned, never consumed
        assert len(DL._EXPORTS) == before + 1
        del cap
    gc.collect()
    assert len(DL._EXPORTS) == before
