"""tk.copyto(..., stream=s) from and to NumPy memory: every backend reads a host source before
the call returns (the caller may change it at once, as with CUDA's cudaMemcpyAsync from
pageable memory, CuPy and torch), reads a backend array source in stream order, and fills a
host destination by the time the stream is synchronized."""
import threading

import numpy as np
import pytest

import tinykernels as tk
from backend_params import every_backend

# iterations of the spin kernel: long enough that the queued copy has not run when the
# source is changed (on CPU and INTERP a gate job holds the stream as well)
SPIN = {"CPU": 3_000_000, "CL": 3_000_000, "WEBGPU": 200_000, "INTERP": 200, "JAX": 3_000_000, "CUDA": 3_000_000}


@tk.kernel
def spin(A, n):
    i = tk.index()
    acc = A[i]
    for k in range(n):
        acc = acc * 0.5 + 1.0
    A[i] = acc


@tk.kernel
def fill(A, v):
    A[tk.index()] = v


def _busy_stream(dev):
    """A stream of ``dev`` with a long kernel queued (and, on host streams, a gate job that
    holds it until the returned release() is called)."""
    b = tk.backend(dev)
    s = b.stream()
    busy = tk.zeros(64, tk.float32, backend=b)
    spin(b)(busy, SPIN[dev], ndrange=64, stream=s)
    gate = threading.Event()
    if dev in ("CPU", "INTERP", "JAX"):
        s.submit(lambda: gate.wait(30))
    return b, s, gate.set


@pytest.mark.parametrize("dev", every_backend())
@pytest.mark.parametrize("case", ["same dtype", "converted", "broadcast", "host tk.Array"])
def test_a_host_source_may_change_once_copyto_returns(dev, case):
    if case == "host tk.Array" and dev in ("CPU", "INTERP"):
        pytest.skip("a tk.Array of a host backend is that backend's memory (read in stream order)")
    b, s, release = _busy_stream(dev)
    dst = tk.zeros(1000, tk.float32, backend=b)
    dtype = np.float64 if case == "converted" and dev != "WEBGPU" else np.float32
    src = np.arange(1 if case == "broadcast" else 1000, dtype=dtype) + 1
    want = np.broadcast_to(src, (1000,)).astype(np.float32)
    if case == "host tk.Array":
        src = tk.asarray(src, backend="CPU")          # host memory to a device backend
    try:
        ev = tk.copyto(dst, src, stream=s)
        (src.numpy() if isinstance(src, tk.Array) else src)[:] = -7    # at once, before the copy ran
    finally:
        release()
    ev.wait(timeout=60)
    s.synchronize(timeout=60)
    np.testing.assert_array_equal(dst.numpy(), want)


@pytest.mark.parametrize("dev", every_backend())
def test_a_backend_array_source_is_read_in_stream_order_and_the_host_dst_is_valid_after_synchronize(dev):
    b, s, release = _busy_stream(dev)
    a = tk.zeros(100, tk.float32, backend=b)
    fill(b)(a, 5.0, ndrange=100, stream=s)          # queued behind the long kernel
    c = tk.zeros(100, tk.float32, backend=b)
    out = np.zeros(100, np.float32)
    try:
        tk.copyto(c, a, stream=s)                    # device -> device: after the fill
        tk.copyto(out, a, stream=s)                  # device -> host: after the fill
    finally:
        release()
    s.synchronize(timeout=60)
    np.testing.assert_array_equal(out, np.full(100, 5.0, np.float32))
    np.testing.assert_array_equal(c.numpy(), np.full(100, 5.0, np.float32))
