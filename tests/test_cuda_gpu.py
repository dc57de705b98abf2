"""The CUDA backend on a real GPU: what only a device can show (skipped without one; CI has none).

Streams and priorities as the device schedules them, ordering with PyTorch's and CuPy's default
streams at a zero-copy hand-over, DLPack to and from PyTorch, CuPy and JAX (bfloat16 and fp8
dtype codes included), memory given back by ``__del__``, launches from several threads, a
kernel fault reported as an error (not a crash), and ``print`` from a kernel.
``tests/test_cuda.py`` holds the rest (its GPU tests: collectives, atomics, tiles, debug mode).
Run on a GPU machine: ``python -m pytest -q tests/test_cuda_gpu.py`` (or scripts/gpu_check.sh).
"""
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk

ROOT = Path(__file__).resolve().parents[1]
GPU_OK, GPU_WHY = tk.backends()["CUDA"]
pytestmark = pytest.mark.skipif(not GPU_OK, reason=f"no usable CUDA device: {GPU_WHY}")


@tk.kernel
def busy(a, iters):
    """A compute-bound item: ``iters`` dependent multiply-adds on a[i]."""
    i = tk.index()
    x = a[i]
    for _ in range(iters):
        x = x * 0.999 + 0.001
    a[i] = x


@tk.kernel
def scale(out, x: tk.Const, s):
    i = tk.index()
    out[i] = x[i] * s


@tk.kernel
def add_one(a):
    i = tk.index()
    a[i] = a[i] + 1


@pytest.fixture(scope="module")
def cuda():
    return tk.backend("CUDA")


def _run(tmp_path, code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``code`` run as a script file (kernels need a source file) in a fresh process."""
    src = tmp_path / "prog.py"
    src.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), XLA_PYTHON_CLIENT_PREALLOCATE="false")
    return subprocess.run([sys.executable, str(src)], capture_output=True, text=True, env=env, timeout=timeout)


# ----------------------------------------------------------------------------- streams

def _busy_launch(cuda, a, iters, stream=None):
    return busy(cuda)(a, iters, ndrange=a.shape[0], workgroupsize=128, stream=stream)


def test_high_priority_kernel_overtakes_a_long_low_priority_one(cuda):
    """A small kernel on a tk.High stream starts before the remaining blocks of a long kernel on
    a tk.Low stream (the block scheduler serves the higher priority first); on a second tk.Low
    stream it waits for them. Both latencies are measured from the small kernel's launch."""
    n = 132 * 2048 * 64                      # many waves of blocks on any current GPU
    a = tk.asarray(np.random.default_rng(0).random(n, dtype=np.float32), backend=cuda)
    small = tk.asarray(np.ones(256, np.float32), backend=cuda)
    low, other_low, high = cuda.stream(tk.Low), cuda.stream(tk.Low), cuda.stream(tk.High)
    _busy_launch(cuda, a, 10, low).wait()    # compiled and warm
    add_one(cuda)(small, ndrange=256, stream=high).wait()
    iters = 64
    while True:                              # a long kernel: at least ~80 ms
        t0 = time.perf_counter()
        _busy_launch(cuda, a, iters, low).wait()
        t_long = time.perf_counter() - t0
        if t_long > 0.08 or iters > 1 << 20:
            break
        iters *= 2

    def latency(stream):
        long_ev = _busy_launch(cuda, a, iters, low)
        time.sleep(0.002)                    # the long kernel is running
        t0 = time.perf_counter()
        ev = add_one(cuda)(small, ndrange=256, stream=stream)
        ev.wait()
        dt = time.perf_counter() - t0
        long_running = not long_ev.done()
        long_ev.wait()
        return dt, long_running

    t_high, high_overtook = latency(high)
    t_low, _ = latency(other_low)
    print(f"long kernel {t_long * 1e3:.1f} ms; small kernel after it started: tk.High {t_high * 1e3:.2f} ms, "
          f"tk.Low {t_low * 1e3:.2f} ms")
    assert high_overtook, "the tk.High kernel did not finish while the tk.Low kernel was still running"
    assert t_high < 0.25 * t_long
    assert t_low > 2 * t_high
    np.testing.assert_array_equal(small.numpy(), np.full(256, 4.0, np.float32))


def test_priorities_map_to_the_device_range(cuda):
    from tinykernels.runtime import cuda_context
    dev = cuda_context.device_for(0)
    assert dev.prio_greatest < dev.prio_least           # CUDA: a smaller number is a higher priority
    assert cuda.stream(tk.High).cuda_priority == dev.prio_greatest
    assert cuda.stream(tk.Low).cuda_priority == cuda.stream(tk.Normal).cuda_priority == dev.prio_least


def test_stream_wait_orders_two_streams_on_the_device(cuda):
    n = 1 << 22
    a = tk.asarray(np.zeros(n, np.float32), backend=cuda)
    out = tk.empty(n, np.float32, backend=cuda)
    s1, s2 = cuda.stream(tk.Low), cuda.stream(tk.High)
    for _ in range(3):
        ev = add_one(cuda)(a, ndrange=n, stream=s1)
    s2.wait(ev)
    scale(cuda)(out, a, 2.0, ndrange=n, stream=s2).wait()
    np.testing.assert_array_equal(out.numpy(), np.full(n, 6.0, np.float32))


def test_launches_from_several_threads(cuda):
    n, rounds = 4096, 200
    arrays = [tk.asarray(np.zeros(n, np.int32), backend=cuda) for _ in range(4)]
    errors = []

    def work(a):
        try:
            s = cuda.stream(tk.Normal)
            for _ in range(rounds):
                add_one(cuda)(a, ndrange=n, stream=s)
            s.synchronize()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(a,)) for a in arrays]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for a in arrays:
        np.testing.assert_array_equal(a.numpy(), np.full(n, rounds, np.int32))


def test_dropped_arrays_give_their_memory_back(cuda):
    """Arrays of 4 GiB made and dropped until 1.25 times the device's free memory has been
    allocated: with a leak the last ones cannot be allocated (other processes' use of the
    device does not matter, unlike comparing cuMemGetInfo before and after)."""
    from tinykernels.runtime.cuda_driver import checked, driver
    cuda.synchronize()
    free, _ = checked(driver().cuMemGetInfo(), "cuMemGetInfo")
    chunk = 1 << 30                                   # float32 elements: 4 GiB
    for _ in range(int(1.25 * free / (4 * chunk)) + 2):
        a = tk.empty(chunk, np.float32, backend=cuda)
        add_one(cuda)(a, ndrange=1024)
        del a
    cuda.synchronize()


# ----------------------------------------------------------------------------- interop

def test_torch_hand_over_is_ordered_with_torchs_default_stream(cuda):
    torch = pytest.importorskip("torch")
    n = 1 << 26
    t = torch.full((n,), 3.0, device="cuda")          # torch's default stream, not synchronized
    out = tk.empty(n, np.float32, backend=cuda)
    scale(cuda)(out, t, 2.0, ndrange=n)               # zero-copy input
    back = torch.from_dlpack(out)                      # zero-copy output
    assert back.data_ptr() == out.__cuda_array_interface__["data"][0]
    assert torch.all(back == 6.0).item()
    # the other way: a long tinykernels kernel on a tk.Low stream, then torch reads at once
    a = torch.zeros(1 << 20, device="cuda")
    busy(cuda)(a, 20000, ndrange=a.numel(), stream=cuda.stream(tk.Low))
    want = np.zeros(1, np.float32)
    for _ in range(20000):
        want = want * np.float32(0.999) + np.float32(0.001)
    assert abs(a.sum().item() / a.numel() - float(want[0])) < 1e-4


def test_torch_strided_and_narrow_dtypes(cuda):
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 96, device="cuda")
    xt = x.t()                                          # a transposed view: strides (1, 96)
    out = torch.empty(96, 64, device="cuda")

    @tk.kernel
    def copy2(o, i: tk.Const):
        r, c = tk.index(tk.Global, tk.Cartesian)
        o[r, c] = i[r, c]
    copy2(cuda)(out, xt, ndrange=(96, 64))
    cuda.synchronize()
    assert torch.equal(out, xt)
    for tdt in (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2):
        t = torch.arange(8, dtype=torch.float32, device="cuda").to(tdt)
        a = tk.asarray(t, backend=cuda)                 # DLPack / torch import: our dtype code for it
        back = torch.from_dlpack(a)                     # and our export: torch reads the same code back
        assert back.dtype == tdt and back.data_ptr() == t.data_ptr(), tdt
        assert torch.equal(back.float(), t.float()), tdt


def test_cupy_zero_copy_both_ways(cuda):
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(1 << 20, dtype=cupy.float32)
    out = tk.empty(1 << 20, np.float32, backend=cuda)
    scale(cuda)(out, x, 0.5, ndrange=x.size)
    view = cupy.asarray(out)                           # __cuda_array_interface__, no copy
    assert view.data.ptr == out.__cuda_array_interface__["data"][0]
    assert bool(cupy.all(view == x * 0.5))
    add_one(cuda)(view, ndrange=x.size)                # a CuPy array as the output
    np.testing.assert_array_equal(out.numpy(), np.arange(1 << 20, dtype=np.float32) * 0.5 + 1)


def test_jax_dlpack_both_ways(tmp_path):
    pytest.importorskip("jax")
    r = _run(tmp_path, r"""
import numpy as np, jax, jax.numpy as jnp, tinykernels as tk
assert any(d.platform == "gpu" for d in jax.devices()), jax.devices()
cuda = tk.backend("CUDA")
@tk.kernel
def scale(out, x: tk.Const, s):
    i = tk.index()
    out[i] = x[i] * s
x = jnp.arange(1 << 16, dtype=jnp.float32)
out = tk.empty(1 << 16, np.float32, backend=cuda)
scale(cuda)(out, x, 3.0, ndrange=x.size)               # a JAX array as an input (DLPack)
cuda.synchronize()
y = jax.dlpack.from_dlpack(out)                        # ours as a JAX array
assert y.devices().pop().platform == "gpu"
np.testing.assert_array_equal(np.asarray(y), np.arange(1 << 16, dtype=np.float32) * 3)
print("jax ok")
""")
    assert r.returncode == 0 and "jax ok" in r.stdout, r.stderr[-3000:]


# ----------------------------------------------------------------------------- faults and print

_FAULT = r"""
import numpy as np, tinykernels as tk
cuda = tk.backend("CUDA")
@tk.kernel(unsafe_indices=True)
def wild(a, off: tk.int64):
    a[tk.index() + off] = 1.0
a = tk.empty(16, np.float32, backend=cuda)
try:
    wild(cuda)(a, (1 << 31) - 64, ndrange=16)     # 8 GiB past a 64-byte array (32-bit indices here)
    cuda.synchronize()
except Exception as e:
    print("raised", type(e).__name__, e)
"""


def test_a_kernel_fault_is_an_error_not_a_crash(tmp_path):
    r = _run(tmp_path, _FAULT)
    assert r.returncode == 0, r.stderr[-3000:]
    # an H200 reported CUDA_ERROR_INVALID_ADDRESS_SPACE for this store; other GPUs say ILLEGAL_ADDRESS
    assert re.search(r"raised RuntimeError .*CUDA_ERROR_\w+", r.stdout), r.stdout + r.stderr[-2000:]


_PRINT = r"""
import numpy as np, tinykernels as tk
cuda = tk.backend("CUDA")
@tk.kernel
def hello(a: tk.Const):
    i = tk.index()
    if i == 2:
        tk.print("item", i, "holds", a[i])
hello(cuda)(tk.asarray(np.arange(4, dtype=np.float32) * 1.5, backend=cuda), ndrange=4)
cuda.synchronize()
"""


def test_print_from_a_kernel(tmp_path):
    r = _run(tmp_path, _PRINT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"item 2 holds 3(\.0*)?\b", r.stdout), r.stdout


# ----------------------------------------------------------------------------- inside PyTorch and JAX programs

@tk.kernel
def fma_update(y, x: tk.Const, a):
    i = tk.index()
    y[i] = y[i] * x[i] + a * x[i]


@tk.kernel
def kv_write(cache, old: tk.Const, pos: tk.Const, val: tk.Const):
    """One decode step's cache write: the new row at the position the device holds."""
    i = tk.index()
    cache[i] = val[0] if i == pos[0] else old[i]


@tk.kernel
def advance(new, old: tk.Const):
    new[0] = old[0] + 1


def test_torch_op_on_a_side_stream(cuda):
    torch = pytest.importorskip("torch")
    import tinykernels.torch as tktorch
    op = tktorch.torch_op(fma_update, outputs=["y"], name="tkgpu::fma_side")
    y0, x = torch.randn(1 << 22, device="cuda"), torch.randn(1 << 22, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                      # the op runs on torch's current stream
        y = op(y0, x, a=2.5)
        z = y * 2                                   # torch work after it, on the same stream
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(z, 2 * (y0 * x + 2.5 * x), rtol=1e-6, atol=1e-6)


def test_torch_cuda_graph_replays_a_decode_step_with_device_resident_counters(cuda):
    """A decode step (write the new value at the position held on the device, advance the
    position) captured once with torch.cuda.graph and replayed: each replay writes the next row."""
    torch = pytest.importorskip("torch")
    import tinykernels.torch as tktorch
    write = tktorch.torch_op(kv_write, outputs=["cache"], name="tkgpu::kv_write")
    step = tktorch.torch_op(advance, outputs=["new"], name="tkgpu::advance", ndrange=1)
    cache = torch.zeros(64, device="cuda")
    pos = torch.zeros(1, dtype=torch.int64, device="cuda")
    val = torch.zeros(1, device="cuda")

    def decode():
        new_cache = write(torch.empty_like(cache), cache, pos, val)
        new_pos = step(torch.empty_like(pos), pos)
        cache.copy_(new_cache)
        pos.copy_(new_pos)

    s = torch.cuda.Stream()                         # warm up (compile, plans) off the capture
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        decode()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    cache.zero_()
    pos.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        decode()
    cache.zero_()                                   # the capture itself does not run the work
    pos.zero_()
    for k in range(5):
        val.fill_(float(k + 1))
        g.replay()
    torch.cuda.synchronize()
    assert pos.item() == 5
    assert cache[:6].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 0.0]


_JAX_GPU = r"""
import numpy as np, jax, jax.numpy as jnp, tinykernels as tk, tinykernels.jax as tkjax
assert any(d.platform == "gpu" for d in jax.devices()), jax.devices()

@tk.kernel
def fma_update(y, x: tk.Const, a):
    i = tk.index()
    y[i] = y[i] * x[i] + a * x[i]

rng = np.random.default_rng(0)
y0 = jnp.asarray(rng.standard_normal(1 << 20).astype(np.float32))
x = jnp.asarray(rng.standard_normal(1 << 20).astype(np.float32))
assert y0.devices().pop().platform == "gpu"
want = 2 * (np.asarray(y0) * np.asarray(x) + 2.5 * np.asarray(x))
RAISED = tkjax.raise_kernel(fma_update, outputs=["y"])          # JAX operations: any XLA device
out = jax.jit(lambda u, v: RAISED(u, v, a=2.5) * 2.0)(y0, x)
assert out.devices().pop().platform == "gpu"
np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
g = jax.jit(jax.grad(lambda u, v: RAISED(u, v, a=2.5).sum()))(y0, x)
np.testing.assert_allclose(np.asarray(g), np.asarray(x), rtol=1e-5, atol=1e-6)
print("raise ok")
FFI = tkjax.jax_kernel(fma_update, outputs=["y"])                # XLA's FFI: CPU only (docs/jax.md)
try:
    jax.jit(lambda u, v: FFI(u, v, a=2.5))(y0, x).block_until_ready()
    print("ffi ran on the gpu")
except Exception as e:
    print("ffi refused:", type(e).__name__, str(e).splitlines()[0][:200])
cpu = jax.devices("cpu")[0]
out = FFI(jax.device_put(y0, cpu), jax.device_put(x, cpu), a=2.5)
np.testing.assert_allclose(np.asarray(out) * 2, want, rtol=1e-5, atol=1e-5)
print("ffi on cpu ok")
"""


def test_jax_programs_on_the_gpu_raise_kernel_and_the_cpu_ffi(tmp_path):
    """raise_kernel (JAX operations) runs on JAX's GPU under jit and grad; jax_kernel (XLA's FFI)
    runs on JAX's CPU platform (its CUDA handler is generated but not registered: docs/jax.md),
    also in a process whose default device is a GPU."""
    pytest.importorskip("jax")
    r = _run(tmp_path, _JAX_GPU)
    assert r.returncode == 0 and "raise ok" in r.stdout and "ffi on cpu ok" in r.stdout, (r.stdout + r.stderr)[-3000:]
    print(r.stdout)
