"""Launch geometry and sizes against the backends' limits, integer workgroup sizes on 2-D/3-D
ndranges, and kernel.source() with host arrays (issue 10, items 8, 15 and 16)."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels.kernel import CPU_STACK_ARRAYS, expand_wg

CL_OK = tk.backends()["OpenCL"][0]
WGPU_OK = tk.backends()["WebGPU"][0]
DEVICES = ["CL"] * CL_OK + ["WEBGPU"] * WGPU_OK


@tk.kernel
def big_local(out, n: tk.constexpr):
    tmp = tk.localmem(tk.float32, (n,))
    i = tk.index(tk.Local, tk.Linear)
    tmp[i] = 1.0
    tk.synchronize()
    out[tk.index()] = tmp[i]


@tk.kernel
def big_private(out, n: tk.constexpr):
    p = tk.private(tk.float64, (n,))
    p[0] = 2.0
    out[tk.index()] = p[0]


def test_cpu_refuses_huge_local_and_private_arrays_at_their_line():
    out = np.zeros(4, np.float32)
    with pytest.raises(tk.CompileError, match=r"test_launch_geometry.py:\d+:.*need \d+ bytes per workgroup but "
                                              r"the CPU backend allows"):
        big_local(tk.CPU(), 4)(out, 1 << 30, ndrange=4)
    with pytest.raises(tk.CompileError, match="tk.private arrays need"):
        big_private(tk.CPU())(out, 1 << 28, ndrange=4)
    big_local(tk.CPU(), 4)(out, 1024, ndrange=4)          # within the limit: runs
    np.testing.assert_array_equal(out, np.ones(4))
    assert CPU_STACK_ARRAYS >= 64 * 1024


@pytest.mark.skipif(not CL_OK, reason="no OpenCL")
def test_opencl_limits():
    cl = tk.backend("CL")
    dev = cl._dev.device
    out = tk.zeros(4, tk.float32, backend=cl)
    with pytest.raises(tk.CompileError, match=r"test_launch_geometry.py:\d+:.*tk.localmem arrays need 67108864 "
                                              r"bytes.*CL_DEVICE_LOCAL_MEM_SIZE"):
        big_local(cl, 4)(out, 1 << 24, ndrange=4)

    @tk.kernel
    def first(a):
        i = tk.index()
        if i == 0:
            a[0] = 1.0
    a = tk.zeros(1, tk.float32, backend=cl)
    with pytest.raises(tk.LaunchError, match="kernel 'first': 4294967296 workgroups along ndrange dimension 0"):
        first(cl)(a, ndrange=2 ** 40, workgroupsize=256)
    with pytest.raises(tk.LaunchError, match=r"kernel 'first': .*(work items exceed .*CL_DEVICE_ADDRESS_BITS|"
                                             r"2\*\*66 work items|73786976294838206464 work items, more than 2\*\*63 - 1)"):
        first(cl)(a, ndrange=(2 ** 33, 2 ** 33))       # (beyond int64 on every backend: parse_ndrange says so)
    with pytest.raises(MemoryError, match=r"exceeds .*CL_DEVICE_MAX_MEM_ALLOC_SIZE"):
        tk.zeros(int(dev.max_mem_alloc_size) + 8, tk.uint8, backend=cl)


def test_expand_wg():
    assert expand_wg(64, 1) == (64,) and expand_wg(64, 2) == (1, 64) and expand_wg(64, 3) == (1, 1, 64)
    assert expand_wg((4, 8), 2) == (4, 8)


@tk.kernel
def shape_of_group(out):
    i, j = tk.index(tk.Global, tk.Cartesian)
    gs = tk.groupsize()
    out[i, j] = gs[0] * 1000 + gs[1]


@pytest.mark.parametrize("be", ["CPU", "INTERP"] + DEVICES)
def test_an_int_workgroupsize_runs_along_the_last_dimension(be):
    conv = (lambda a: tk.asarray(a, backend=be)) if be in DEVICES else (lambda a: a)
    host = (lambda a: a.numpy()) if be in DEVICES else (lambda a: a)
    for launch in (lambda o: shape_of_group(be, 4)(o, ndrange=(3, 8)),
                   lambda o: shape_of_group(be, 4)(o, ndrange=(3, 8), workgroupsize=4),
                   lambda o: shape_of_group(be)(o, ndrange=(3, 8), workgroupsize=4),
                   lambda o: shape_of_group(be)(o, ndrange=(3, 8), workgroupsize=np.int64(4))):
        out = conv(np.zeros((3, 8), np.int64 if be != "WEBGPU" else np.int32))
        launch(out)
        launch(out)                                     # again: the CPU's fast path
        assert (host(out) == 1004).all()
    with pytest.raises(tk.LaunchError, match=r"instantiated with workgroup size 4; launch got \(4, 1\)"):
        shape_of_group(be, 4)(conv(np.zeros((3, 8), np.int32)), ndrange=(3, 8), workgroupsize=(4, 1))


@pytest.mark.parametrize("dev", ["CL", "WEBGPU", "CUDA"])
def test_source_accepts_host_arrays(dev):
    if (dev == "CL" and not CL_OK) or (dev == "WEBGPU" and not WGPU_OK):
        pytest.skip(f"{dev} unavailable")

    @tk.kernel
    def add(a, b: tk.Const, s):
        i = tk.index()
        a[i] = b[i] + s
    x = np.zeros(16, np.float32)
    src = add.source(dev, x, x, 2.0, ndrange=16)
    assert "tk_kernel" in src or "tk_main" in src
    assert add.source(dev, tk.asarray(x), x, 2.0, ndrange=16) == src
