"""The CUDA backend.

* NVRTC compiles (no GPU needed; skipped where cuda-bindings/NVRTC are not installed): every
  kernel specialization the conformance suite launches is rendered as CUDA C++ and compiled
  for sm_80 and sm_90; compile errors, the disk cache, PTX output, architecture choice.
* Renderer unit tests (always run): 32-bit index arithmetic when extents fit, the last
  ndrange dimension on x, ``const __restrict__``, shared memory, atomics, warp collectives,
  and the parameter layout the runtime packs.
* The runtime's plumbing against a fake ``cuda.bindings.driver`` (always run): allocation and
  copies, argument packing (the cached launch plans byte for byte against ``pack_params``),
  grid mapping, streams, events, debug-mode error reports, DLPack.
  It checks the Python side only; nothing executes GPU code.
* GPU tests: skipped unless a CUDA device is usable here.
"""
import ctypes
import gc
import json
import math
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.codegen import cuda as cg
from tinykernels.runtime import cuda as rt
from tinykernels.runtime import cuda_context, cuda_driver, cuda_launch, cuda_streams
from tinykernels.runtime.arraylayout import layout_of

ROOT = Path(__file__).resolve().parents[1]
NVRTC_OK, NVRTC_WHY = rt.nvrtc_available()
needs_nvrtc = pytest.mark.skipif(not NVRTC_OK, reason=f"NVRTC unavailable: {NVRTC_WHY}")
ARCHS = ("sm_80", "sm_90")


def _conformance_dir():
    env = os.environ.get("TK_CONFORMANCE_DIR")
    for p in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "conformance"]:
        if p.is_dir():
            return p
    return None


# ----------------------------------------------------------------------------- kernels

@tk.kernel
def saxpy(y, a, x: tk.Const):
    i = tk.index()
    y[i] = a * x[i] + y[i]


@tk.kernel
def copy2d(out, a: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = a[i, j]


@tk.kernel
def tile_sum(out, x: tk.Const):
    lid = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.float32, (64,))
    buf[lid] = x[tk.index()]
    tk.synchronize()
    if lid == 0:
        s = 0.0
        for k in range(64):
            s += buf[k]
        out[tk.index(tk.Group, tk.Linear)] = s


@tk.kernel
def collectives(r, inc, ex, x: tk.Const):
    v = x[tk.index()]
    r[tk.index()] = tk.group_reduce(v, "add")
    inc[tk.index()] = tk.group_scan(v, "max")
    ex[tk.index()] = tk.group_scan(v, "add", inclusive=False)


@tk.kernel
def atomics(i32, u64, f32, f64, x: tk.Const):
    i = tk.index()
    tk.atomic_add(i32, 0, 1)
    tk.atomic_max(u64, 0, tk.uint64(i))
    tk.atomic_min(f32, 0, x[i])
    tk.atomic_add(f64, 0, tk.float64(x[i]))


def _src(kern, *args, **kw):
    return rt.cuda_source(kern, *args, **kw)


def _f32(n):
    return np.zeros(n, np.float32)


# ----------------------------------------------------------------------------- renderer

def test_translation_unit_is_self_contained():
    src = _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10)
    assert "#include" not in src
    assert 'extern "C" __global__ void __launch_bounds__(256) tk_kernel(' in src
    for name in ("typedef long long int64_t;", "typedef unsigned long long uint64_t;", "#define INT64_C(x)",
                 "#define UINT64_MAX", "#define TK_INLINE static __device__ __forceinline__"):
        assert name in src


def test_index_arithmetic_is_32_bit_when_extents_fit():
    assert "typedef int tk_idx;" in _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10)
    big = 3 << 30                      # the ndrange alone exceeds int32
    assert "typedef long long tk_idx;" in _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=big)
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(1 << 31,), strides=(0,))
    assert "typedef long long tk_idx;" in _src(saxpy, _f32(10), 2.0, huge, ndrange=10)


def test_padding_to_whole_workgroups_counts_for_32_bit_indices():
    n = (1 << 31) - 1                  # fits, but ceil(n / 256) * 256 does not
    assert "typedef long long tk_idx;" in _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=n)


def test_last_ndrange_dimension_is_x():
    src = _src(copy2d, np.zeros((4, 8)), np.zeros((4, 8)), ndrange=(4, 8), workgroupsize=(2, 8))
    assert "tk_l1 = (tk_idx)threadIdx.x" in src and "tk_gr1 = (tk_idx)blockIdx.x" in src
    assert "tk_l0 = (tk_idx)threadIdx.y" in src and "tk_gr0 = (tk_idx)blockIdx.y" in src
    assert "__launch_bounds__(16)" in src
    grid, block = rt.grid_dims((0, 5, 1, 0, 300, 1, 0, 1, 1), 2, (4, 64))
    assert block == (64, 4, 1) and grid == (5, 2, 1)
    grid, block = rt.grid_dims((0, 3, 1, 0, 5, 1, 0, 7, 1), 3, (1, 2, 4))
    assert block == (4, 2, 1) and grid == (2, 3, 3)


def test_const_arrays_are_restrict_and_others_not():
    src = _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10)
    assert "const float *__restrict__ a_x" in src
    assert "float *a_y," in src and "__restrict__ a_y" not in src


def test_localmem_is_shared_and_barrier_is_syncthreads():
    src = _src(tile_sum, _f32(4), _f32(256), ndrange=256, workgroupsize=64)
    assert "__shared__ float a_" in src and "__syncthreads();" in src


def test_collectives_use_warp_shuffles():
    i32 = np.zeros(100, np.int32)
    src = _src(collectives, i32, i32, i32, i32, ndrange=100, workgroupsize=48)
    assert "__shfl_down_sync" in src and "__shfl_up_sync" in src
    assert "0xffffu" in src                          # the partial second warp of 48 items
    assert "tk_act[" not in src                      # the scaffold's serial mask array is not used
    # signed adds wrap through unsigned (no undefined behaviour)
    assert "((int32_t)((uint32_t)" in src


def test_native_atomics_and_cas_loops_only_where_needed():
    src = _src(atomics, np.zeros(1, np.int32), np.zeros(1, np.uint64), _f32(1), np.zeros(1), _f32(8),
               ndrange=8)
    body = src[src.index('extern "C"'):]
    assert "atomicAdd(&a_i32[" in body
    assert "atomicMax((unsigned long long *)&a_u64[" in body
    assert "tk_atomic_min_f32(&a_f32[" in body       # no native float min: a CAS loop
    assert "tk_atomic_add_f64(&a_f64[" in body and "atomicAdd(p, v)" in src   # native on sm_60+


def test_param_layout_matches_the_signature():
    for idx32, ndrange in ((True, 10), (False, 3 << 30)):
        inst = saxpy(rt.CUDATarget())
        norm, geom, ndim, ranges, total, wg = inst._prepare((_f32(10), 2.0, _f32(10)), ndrange, None)
        ir = inst._ir(norm, geom, ndim, ranges, wg)
        assert ir.idx32 is idx32
        layout = cg.param_layout(ir)
        sig = cg.CUDARenderer(ir, None, ranges).params()
        assert len(sig) == len(layout)
        for decl, (kind, _, ct) in zip(sig, layout):
            if kind == "count" or kind in ("shape", "stride"):
                assert decl.startswith("tk_idx ") and ct == ("int32" if idx32 else "int64")
            elif kind in ("start", "step"):
                assert decl.startswith("long long ") and ct == "int64"
            elif kind == "ptr":
                assert "*" in decl
            elif kind == "scalar":
                assert decl.startswith("double ") and ct == "float64"


def test_debug_mode_renders_bounds_checks_with_an_error_buffer():
    src = _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10, debug=True)
    assert "unsigned long long *tk_err" in src and "tk_oob(tk_err, " in src


def test_kernel_source_accepts_the_cuda_dev_string():
    try:
        src = saxpy.source("CUDA", _f32(4), 1.0, _f32(4), ndrange=4)
    except (NotImplementedError, tk.BackendUnavailable) as e:
        pytest.skip(f"Kernel.source('CUDA', ...) without a GPU is not wired up in kernel.py yet ({e})")
    assert 'extern "C" __global__' in src


# ----------------------------------------------------------------------------- NVRTC

CAPTURE = r'''
import importlib, json, sys
import pytest
import tinykernels as tk
K = importlib.import_module("tinykernels.kernel")
CAPS = []
_orig = K.KernelInstance._ir
def _ir(self, args, geom, ndim, ranges, wg):
    ir = _orig(self, args, geom, ndim, ranges, wg)
    CAPS.append((self.kernel, tuple(args), geom, ndim, ranges, wg, bool(self.backend.debug)))
    return ir
K.KernelInstance._ir = _ir
out, archs, rootdir, paths = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4:]
rc = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", rootdir, *paths])
K.KernelInstance._ir = _orig
from tinykernels.runtime.cuda import CUDATarget, compile_cuda
seen, results = set(), []
for kern, args, geom, ndim, ranges, wg, debug in list(CAPS):
    rec = {"kernel": kern.name, "ndim": ndim, "wg": list(wg), "debug": debug}
    try:
        inst = kern(CUDATarget(debug))
        ir = inst._ir(args, geom, ndim, ranges, wg)
        src = inst._render(ir, ranges)[0]
    except tk.CompileError as e:    # expected only where the CPU refuses the kernel too
        cpu = kern(tk.CPU(debug=debug))
        try:
            cpu._render(cpu._ir(args, geom, ndim, ranges, wg), ranges)
            rec["error"] = "render: " + str(e)
            results.append(rec)
        except tk.CompileError:
            pass
        continue
    if src in seen:
        continue
    seen.add(src)
    rec["idx32"] = ir.idx32
    for arch in archs:
        try:
            compile_cuda(src, arch, kern.name, cache=False)
        except Exception as e:
            rec["error"] = f"{arch}: {type(e).__name__}: {e}"
            rec["source"] = src
    results.append(rec)
json.dump({"pytest_rc": int(rc), "captured": len(CAPS), "results": results}, open(out, "w"))
'''


def _capture_and_compile(tmp_path, rootdir, paths, archs=ARCHS):
    out = tmp_path / "compiled.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TK_CACHE_DIR=str(tmp_path / "cache"), TK_TEST_BACKENDS="CPU", DEV="CPU")
    env.pop("TK_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", CAPTURE, str(out), ",".join(archs), str(rootdir), *map(str, paths)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=1800)
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), r


@needs_nvrtc
def test_every_conformance_kernel_compiles_with_nvrtc_for_sm80_and_sm90(tmp_path):
    conf = _conformance_dir()
    if conf is None:
        pytest.skip("the conformance suite (../shared/conformance) is not beside this checkout")
    data, r = _capture_and_compile(tmp_path, conf, [conf])
    assert data["pytest_rc"] == 0, r.stdout[-3000:]
    results = data["results"]
    assert len(results) >= 50, f"only {len(results)} specializations captured"
    bad = [x for x in results if "error" in x]
    assert not bad, "\n\n".join(f"{x['kernel']}: {x['error'][:2000]}" for x in bad[:5])
    print(f"\nNVRTC {rt.nvrtc_version()}: {len(results)} distinct conformance kernels compiled for {ARCHS}")


@needs_nvrtc
@pytest.mark.skipif(not os.environ.get("TK_CUDA_COMPILE_ALL"), reason="set TK_CUDA_COMPILE_ALL=1 (about a minute)")
def test_every_project_test_kernel_compiles_with_nvrtc(tmp_path):
    tests = [p for p in sorted((ROOT / "tests").glob("test_*.py")) if p.name not in ("test_cuda.py",)]
    data, r = _capture_and_compile(tmp_path, ROOT, tests)
    assert len(data["results"]) > 100, r.stdout[-3000:]
    bad = [x for x in data["results"] if "error" in x]
    assert not bad, "\n\n".join(f"{x['kernel']}: {x['error'][:2000]}" for x in bad[:5])
    print(f"\n{len(data['results'])} distinct kernels compiled for {ARCHS}")


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_compiles_collectives_atomics_and_debug_kernels(arch):
    i32 = np.zeros(100, np.int32)
    srcs = [_src(collectives, i32, i32, i32, i32, ndrange=100, workgroupsize=48),
            _src(collectives, *[np.zeros(100, np.float16)] * 4, ndrange=100, workgroupsize=1024),
            _src(collectives, *[np.zeros(100, np.uint8)] * 4, ndrange=100, workgroupsize=7),
            _src(atomics, np.zeros(1, np.int32), np.zeros(1, np.uint64), _f32(1), np.zeros(1), _f32(8), ndrange=8),
            _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=3 << 30, debug=True),
            _src(copy2d, np.zeros((4, 8), np.float16), np.zeros((8, 8), np.float16)[::2], ndrange=(4, 8)),
            _src(tile_sum, _f32(4), _f32(256), ndrange=range(0, 256), workgroupsize=64)]
    for s in srcs:
        assert rt.compile_cuda(s, arch, "k", cache=False)[:4] == b"\x7fELF"


@needs_nvrtc
def test_ptx_for_compute_archs():
    src = _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10)
    ptx = rt.compile_cuda(src, "compute_80", "saxpy", cache=False)
    assert b".target sm_80" in ptx and b".entry tk_kernel" in ptx


@needs_nvrtc
def test_nvrtc_errors_are_compile_errors_with_the_log_and_generated_lines():
    bad = 'extern "C" __global__ void tk_kernel(float *a) {\n    a[0] = 1.0f;\n    not_declared = 2;\n}\n'
    with pytest.raises(tk.CompileError) as e:
        rt.compile_cuda(bad, "sm_90", "broken", cache=False)
    msg = str(e.value)
    assert "NVRTC" in msg and "not_declared" in msg and ">     3 |     not_declared = 2;" in msg
    # with #line directives the error names the Python file and line too
    src = '#line 41 "user_kernel.py"\n' + bad
    with pytest.raises(tk.CompileError) as e:
        rt.compile_cuda(src, "sm_90", "broken", cache=False)
    assert e.value.filename == "user_kernel.py" and e.value.line == 43
    assert "generated source" in str(e.value)


@needs_nvrtc
def test_cubins_are_cached_on_disk_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("TK_CACHE_DIR", str(tmp_path))
    src = _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10)
    before = dict(rt.STATS)
    a = rt.compile_cuda(src, "sm_90", "saxpy")
    path = rt.cubin_path(src, "sm_90", rt.NVRTC_OPTIONS)
    from tinykernels.runtime.compiler import unseal
    assert path.is_file() and unseal(path.read_bytes()) == a and str(path).startswith(str(tmp_path / "cuda"))
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]
    b = rt.compile_cuda(src, "sm_90", "saxpy")
    assert a == b and rt.STATS["disk_hits"] == before["disk_hits"] + 1
    assert rt.cubin_path(src, "sm_80", rt.NVRTC_OPTIONS) != path       # keyed by the architecture
    assert rt.cubin_path(src + " ", "sm_90", rt.NVRTC_OPTIONS) != path  # and by the source


@needs_nvrtc
def test_architecture_choice():
    archs = rt.supported_archs()
    assert 80 in archs and 90 in archs
    assert rt.choose_arch((9, 0)) == "sm_90" and rt.choose_arch((8, 0)) == "sm_80"
    newest = max(archs)
    assert rt.choose_arch((newest // 10 + 5, 0)) == f"compute_{newest}"     # a future GPU: PTX, JIT by the driver
    with pytest.raises(tk.BackendUnavailable, match="driver"):
        rt.choose_arch((newest // 10 + 5, 0), driver_version=(rt.nvrtc_version()[0] - 1) * 1000)
    with pytest.raises(tk.BackendUnavailable, match="upgrade the NVIDIA driver"):
        rt.choose_arch((9, 0), driver_version=(rt.nvrtc_version()[0] - 1) * 1000 + 40)
    if min(archs) > 50:
        with pytest.raises(tk.BackendUnavailable, match="NVRTC"):
            rt.choose_arch((5, 0))


def test_normalize_arch():
    assert rt.normalize_arch("sm_90") == "sm_90" and rt.normalize_arch(80) == "sm_80"
    assert rt.normalize_arch((8, 6)) == "sm_86" and rt.normalize_arch("compute_90") == "compute_90"
    with pytest.raises(ValueError):
        rt.normalize_arch("ampere")


# ----------------------------------------------------------------------------- fake driver

class _Enum:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeDriver:
    """Enough of cuda.bindings.driver for the runtime's Python paths: 'device' memory is
    host memory, launches are recorded (and may run a callback), events complete at once."""

    ATTRS = ["CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
             "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK", "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X",
             "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y", "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z",
             "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X", "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y",
             "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z"]
    VALUES = [9, 0, 1024, 2 ** 31 - 1, 65535, 65535, 1024, 1024, 64]

    def __init__(self):
        self.CUdevice_attribute = _Enum(**{a: a for a in self.ATTRS})
        self.CUevent_flags = _Enum(CU_EVENT_DISABLE_TIMING=2)
        self.CUresult = _Enum(CUDA_ERROR_NOT_READY=600)
        self.CUpointer_attribute = _Enum(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL=9)
        self.mem, self.launches, self.streams, self.events, self.waits = {}, [], [], 0, []
        self.on_launch = None
        self.freed = 0

    CUdeviceptr = staticmethod(int)
    CUstream = staticmethod(int)

    def cuInit(self, flags): return (0,)
    def cuDeviceGetCount(self): return (0, 1)
    def cuDeviceGet(self, n): return (0, 100 + n)
    def cuDevicePrimaryCtxRetain(self, dev): return (0, 7)
    def cuCtxSetCurrent(self, ctx): return (0,)
    def cuDeviceGetAttribute(self, a, dev): return (0, self.VALUES[self.ATTRS.index(a)])
    def cuDeviceGetName(self, n, dev): return (0, b"Fake H100\0\0")
    def cuDriverGetVersion(self): return (0, 13000)
    def cuCtxGetStreamPriorityRange(self): return (0, 0, -5)
    def cuGetErrorString(self, e): return (0, b"fake error")

    def cuMemAlloc(self, n):
        buf = np.zeros(n, np.uint8)
        self.mem[buf.ctypes.data] = buf
        return (0, buf.ctypes.data)

    def cuMemFree(self, p):
        self.mem.pop(int(p), None)
        self.freed += 1
        return (0,)

    def cuMemcpyHtoD(self, dst, src, n):
        assert isinstance(src, int), "host pointers are passed as ints"
        ctypes.memmove(int(dst), src, n)
        return (0,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream): return self.cuMemcpyHtoD(dst, src, n)

    def cuMemcpyDtoH(self, dst, src, n):
        assert isinstance(dst, int), "host pointers are passed as ints"
        ctypes.memmove(dst, int(src), n)
        return (0,)

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        ctypes.memmove(int(dst), int(src), n)
        return (0,)

    def cuMemsetD8(self, dst, v, n):
        ctypes.memset(int(dst), v, n)
        return (0,)

    def cuModuleLoadData(self, image):
        assert isinstance(image, bytes) and image
        return (0, 55)

    def cuModuleGetFunction(self, mod, name):
        assert name == b"tk_kernel"
        return (0, 66)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        self.launches.append({"grid": (gx, gy, gz), "block": (bx, by, bz), "stream": stream, "params": params})
        if self.on_launch:
            self.on_launch(self.launches[-1])
        return (0,)

    def cuEventCreate(self, flags):
        self.events += 1
        return (0, 1000 + self.events)

    def cuEventRecord(self, ev, stream): return (0,)
    def cuEventQuery(self, ev): return (0,)
    def cuEventSynchronize(self, ev): return (0,)
    def cuEventDestroy(self, ev): return (0,)

    def cuStreamCreateWithPriority(self, flags, prio):
        self.streams.append((flags, prio))
        return (0, 2000 + len(self.streams))

    def cuStreamWaitEvent(self, s, ev, flags):
        self.waits.append((s, ev))
        return (0,)

    def cuStreamSynchronize(self, s): return (0,)
    def cuStreamDestroy(self, s): return (0,)
    def cuCtxSynchronize(self): return (0,)

    def cuPointerGetAttribute(self, attr, ptr): return (0, 0)


@pytest.fixture
def fake(monkeypatch):
    # each replaced where the runtime looks it up: the loaded bindings (every CUDA runtime
    # module calls cuda_driver.driver()), the device table, and the compiler and architecture
    # choice of the modules that call them
    drv = FakeDriver()
    monkeypatch.setattr(cuda_driver, "_DRIVER", drv)
    monkeypatch.setattr(cuda_context, "_DEVICES", {})
    monkeypatch.setattr(cuda_launch, "compile_cuda", lambda src, arch, name="k", options=(), cache=True: b"\x7fELF fake")
    cuda_driver.init_driver.cache_clear()
    cuda_context.CURRENT.ctx = None
    if not NVRTC_OK:
        monkeypatch.setattr(cuda_context, "choose_arch", lambda cc, driver_version=None: f"sm_{cc[0]}{cc[1]}")
    yield drv
    # free the fake's devices, arrays, streams and events while the fake is in place (with a
    # real GPU present, the real driver would otherwise be handed the fake's handles)
    cuda_context._DEVICES.clear()
    for v in list(globals().values()):     # this module's kernels forget the fake backend's instances
        if isinstance(getattr(v, "_instances", None), dict):
            v._instances.clear()
    gc.collect()
    cuda_driver.init_driver.cache_clear()
    cuda_context.CURRENT.ctx = None


def _decode(layout, params_addr):
    """The values cuLaunchKernel would copy, from the pointer array the runtime passed."""
    n = len(layout)
    ptrs = np.ctypeslib.as_array((ctypes.c_uint64 * n).from_address(params_addr))
    out = []
    for (kind, det, ct), p in zip(layout, ptrs):
        np_t = {"ptr": np.uint64}.get(ct) or np.dtype(ct)
        out.append(np.frombuffer(ctypes.string_at(int(p), np.dtype(np_t).itemsize), np_t)[0])
    return out


def test_fake_device_backend_memory_and_copies(fake):
    b = rt.CUDA(0)
    assert b.device_name == "Fake H100" and b.max_workgroupsize == 1024 and b == rt.CUDA(0)
    ok, why = rt.CUDA.available()
    if NVRTC_OK:        # available() also needs NVRTC (the [cuda] extra), which the fake lacks
        assert ok and "Fake H100" in why
    else:
        assert not ok and why == NVRTC_WHY
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = b.array_from_host(h)
    assert isinstance(a, tk.Array) and a.shape == (3, 4) and a.dtype == np.float32 and a.is_contiguous
    np.testing.assert_array_equal(a.numpy(), h)
    c = rt.CUDAArray.empty(b, (3, 4), np.float32)
    b.copy(c, a)
    np.testing.assert_array_equal(c.numpy(), h)
    b.copy(c, np.ones((3, 4)))
    assert (c.numpy() == 1).all()
    out = np.zeros((3, 4), np.float32)
    b.copy(out, a)
    np.testing.assert_array_equal(out, h)
    # a strided view (every other column) reads back correctly
    v = rt.CUDAArray(b, a.ptr, (3, 2), np.float32, (16, 8), a)
    assert not v.is_contiguous
    np.testing.assert_array_equal(v.numpy(), h[:, ::2])
    cai = v.__cuda_array_interface__
    assert cai["data"] == (a.ptr, False) and cai["strides"] == (16, 8) and cai["typestr"] == "<f4"
    assert a.__dlpack_device__() == (2, 0)
    n = fake.freed
    del a, c, v
    import gc
    gc.collect()
    assert fake.freed == n + 2


def test_fake_launch_packs_arguments_in_signature_order(fake):
    b = rt.CUDA(0)
    y = b.array_from_host(np.ones(1000, np.float32))
    x = b.array_from_host(np.arange(1000, dtype=np.float32))
    seen = {}

    def run(launch):                       # decode the argument block while it is alive
        inst = saxpy(b)
        entry = next(iter(inst._compiled.values()))
        seen["layout"] = entry[3]
        seen["values"] = _decode(entry[3], launch["params"])
    fake.on_launch = run
    ev = saxpy(b)(y, 2.5, x, ndrange=1000)
    assert isinstance(ev, tk.Event) and ev.done()
    launch = fake.launches[-1]
    assert launch["grid"] == (4, 1, 1) and launch["block"] == (256, 1, 1) and launch["stream"] == 0
    kinds = [k for k, _, _ in seen["layout"]]
    assert kinds == ["start", "count", "step", "ptr", "shape", "stride", "scalar", "ptr", "shape", "stride"]
    v = seen["values"]
    assert v[:3] == [0, 1000, 1] and v[3] == y.ptr and v[4] == 1000 and v[5] == 1
    assert v[6] == 2.5 and v[7] == x.ptr
    assert np.dtype(type(v[1])) == np.int32          # idx32: the extents are 32-bit ints


@tk.kernel
def last_into_0d(a, x):
    i = tk.index()
    if i == tk.ndrange()[0] - 1:
        x[()] = a[i]


def test_fake_launch_takes_a_0d_array_and_refuses_9_dimensions(fake):
    """A 0-d CUDA array is an array argument of one element, as on every backend (it was refused,
    'must have 1 to 8 dimensions': found on the first run on a GPU, CUDA.jl's "scalar through
    single-value array" port); more than 8 dimensions is still a LaunchError."""
    b = rt.CUDA(0)
    a = b.array_from_host(np.arange(256, dtype=np.float32))
    x = b.array_from_host(np.zeros((), np.float32))
    seen = {}

    def run(launch):
        entry = next(iter(last_into_0d(b)._compiled.values()))
        seen["layout"], seen["values"] = entry[3], _decode(entry[3], launch["params"])
    fake.on_launch = run
    last_into_0d(b)(a, x, ndrange=256)
    kinds = [k for k, _, _ in seen["layout"]]
    assert kinds == ["start", "count", "step", "ptr", "shape", "stride", "ptr"]
    assert seen["values"][6] == x.ptr
    assert x.numpy().shape == () and b.array_from_host(np.float32(2.5)).numpy()[()] == 2.5   # (it read back as (1,))
    nine = b.array_from_host(np.zeros((1,) * 9, np.float32))
    with pytest.raises(tk.LaunchError, match="'x' has 9 dimensions; at most 8"):
        last_into_0d(b)(a, nine, ndrange=256)


def test_fake_launch_2d_ranges_streams_and_events(fake):
    b = rt.CUDA(0)
    a = b.array_from_host(np.zeros((10, 70), np.float64))
    c = b.array_from_host(np.zeros((10, 70), np.float64))
    hi, lo = b.stream(priority=tk.High), b.stream(priority=tk.Low)
    assert fake.streams == [(0, -5), (0, 0)]
    ev = copy2d(b)(a, c, ndrange=(range(1, 9), range(2, 68)), workgroupsize=(2, 32), stream=hi)
    launch = fake.launches[-1]
    assert launch["stream"] == hi.handle and launch["block"] == (32, 2, 1) and launch["grid"] == (3, 4, 1)
    lo.wait(ev)
    assert fake.waits[-1] == (lo.handle, ev.handle)
    lo.synchronize()
    b.synchronize()
    with pytest.raises(tk.LaunchError, match="host array"):
        copy2d(b)(np.zeros((10, 70)), c, ndrange=(10, 70))
    with pytest.raises(tk.LaunchError, match="exceed"):
        copy2d(b)(a, c, ndrange=(70000 * 2, 1), workgroupsize=(1, 1))
    assert copy2d(b)(a, c, ndrange=(0, 70)).done()   # an empty ndrange launches nothing


def test_fake_timeouts_and_unrecorded_events(fake, monkeypatch):
    b = rt.CUDA(0)
    a = b.array_from_host(np.zeros((10, 70), np.float64))
    c = b.array_from_host(np.zeros((10, 70), np.float64))
    s = b.stream()
    ev = copy2d(b)(a, c, ndrange=(10, 70), stream=s)
    ev.wait(timeout=1)
    s.synchronize(timeout=1)
    tk.synchronize(b, timeout=1)
    with pytest.raises(RuntimeError, match="never recorded"):
        s.wait(tk.Event())
    busy = int(fake.CUresult.CUDA_ERROR_NOT_READY)
    monkeypatch.setattr(type(fake), "cuEventQuery", lambda self, e: (busy,))   # the work never finishes
    with pytest.raises(TimeoutError):
        ev.wait(timeout=0.05)
    with pytest.raises(TimeoutError):
        s.synchronize(timeout=0.05)
    with pytest.raises(TimeoutError):
        tk.synchronize(b, timeout=0.05)


def test_fake_synchronize_with_timeout_waits_for_a_dropped_stream(fake, monkeypatch):
    # audit19: a dropped stream's work (which CUDA still completes) was forgotten by
    # tk.synchronize(b, timeout=), which only polled the live streams; the device-wide
    # synchronize without a timeout covered it. An event is now recorded on it before the
    # stream is destroyed.
    import gc
    b = rt.CUDA(0)
    a = b.array_from_host(np.zeros((10, 70), np.float64))
    c = b.array_from_host(np.zeros((10, 70), np.float64))
    s = b.stream()
    copy2d(b)(a, c, ndrange=(10, 70), stream=s)
    del s
    gc.collect()
    assert len(b._dev.orphans) == 1
    orphan = b._dev.orphans[0].handle
    busy = int(fake.CUresult.CUDA_ERROR_NOT_READY)
    monkeypatch.setattr(type(fake), "cuEventQuery", lambda self, e: (busy,) if e is orphan else (0,))
    with pytest.raises(TimeoutError):
        tk.synchronize(b, timeout=0.05)                    # the dropped stream's work is still running
    monkeypatch.setattr(type(fake), "cuEventQuery", lambda self, e: (0,))
    tk.synchronize(b, timeout=1)
    assert len(b._dev.orphans) == 0


def test_fake_debug_launch_reports_out_of_bounds(fake):
    b = rt.CUDA(0, debug=True)
    y = b.array_from_host(np.ones(8, np.float32))
    x = b.array_from_host(np.ones(8, np.float32))     # not y: a tk.Const argument must not alias

    def oob(launch):                       # what tk_oob would write: line, array 'y', 1-d, index 9, shape 8
        inst = saxpy(b)
        _, _, names, layout = next(iter(inst._compiled.values()))
        err = int(_decode(layout, launch["params"])[-1])
        info = np.array([1, saxpy.fn.__code__.co_firstlineno + 3, names.index("y"), 1, 9, 8, 0, 1, 0, 1, 0, 0],
                        np.int64)
        ctypes.memmove(err, info.ctypes.data, info.nbytes)
    fake.on_launch = oob
    with pytest.raises(IndexError, match=r"saxpy.*index 9 is out of bounds for array 'y' with shape \(8,\)"):
        saxpy(b)(y, 1.0, x, ndrange=8)


def test_fake_dlpack_export_and_import_round_trip(fake):
    b = rt.CUDA(0)
    a = b.array_from_host(np.arange(6, dtype=np.int16).reshape(2, 3))

    class Exporter:                        # a foreign CUDA array exporting DLPack only
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, stream=None):
            return self.arr.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()
    v = rt.as_cuda_array(Exporter(a), b)
    assert v.ptr == a.ptr and v.shape == (2, 3) and v.dtype == np.int16 and v.strides == (6, 2)
    np.testing.assert_array_equal(v.numpy(), np.arange(6).reshape(2, 3))
    assert len(rt._EXPORTS) == 1
    del v
    import gc
    gc.collect()
    assert len(rt._EXPORTS) == 0           # the consumer's deleter released the export
    cap = a.__dlpack__()                   # an unconsumed capsule frees its export when collected
    assert len(rt._EXPORTS) == 1
    del cap
    gc.collect()
    assert len(rt._EXPORTS) == 0


def test_exported_dlpack_deleters_are_c_functions_of_the_launcher_extension():
    """XLA frees the views it imported while the process exits, after Python has finalized: a
    ctypes callback as the deleter is gone by then (a JAX program holding one of our CUDA arrays
    died with SIGILL at exit on an H200). With the launcher extension the deleters are its C
    functions, which do nothing once the interpreter is finalizing."""
    from tinykernels.runtime import dlpack, launcher
    ext = launcher.get()
    if not getattr(ext, "dlpack_deleter", None):
        pytest.skip("the ctypes launcher (no C compiler for the extension): ctypes deleters")
    legacy, versioned = dlpack._deleters()
    addr = ctypes.cast(legacy, ctypes.c_void_p).value
    assert addr == ext.dlpack_deleter and ctypes.cast(versioned, ctypes.c_void_p).value == ext.dlpack_deleter_v


def test_fake_foreign_cuda_array_interface_is_zero_copy(fake):
    b = rt.CUDA(0)
    a = b.array_from_host(np.arange(4, dtype=np.float32))

    class CAI:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (a.ptr, False), "version": 3,
                                    "strides": None}
    v = rt.as_cuda_array(CAI(), b)
    assert v.ptr == a.ptr and v.is_contiguous
    y = b.array_from_host(np.zeros(4, np.float32))
    saxpy(b)(y, 1.0, v, ndrange=4)          # accepted as a kernel argument (v is a's memory: not as y)
    assert rt.device_of(CAI()) == 0


# ----------------------------------------------------------------------------- launch plans (fake driver)
#
# A repeated launch packs its arguments through a cached plan (runtime/cuda_launch.py, "launch
# plans"); rt.pack_params is the reference the plan must match byte for byte.

def _slot_bytes(layout, params_addr):
    """The bytes cuLaunchKernel would copy for each parameter (its C type's size)."""
    ptrs = (ctypes.c_uint64 * len(layout)).from_address(params_addr)
    return [ctypes.string_at(int(p), np.dtype({"ptr": np.uint64}.get(ct, ct)).itemsize)
            for (_, _, ct), p in zip(layout, ptrs)]


def _reference(inst, args, ndrange, workgroupsize=None):
    """(layout, bytes per parameter) of rt.pack_params for this launch."""
    norm, geom, ndim, ranges, _, wg = inst._prepare(args, ndrange, workgroupsize)
    _, ir, _, layout = inst._specialize(norm, geom, ndim, ranges, wg)
    _buf, ptrs = rt.pack_params(layout, rt.bind_args(ir, norm), geom)
    return layout, _slot_bytes(layout, int(ptrs.ctypes.data))


def _count_full_launches(monkeypatch, inst):
    calls = []
    full = inst._launch

    def counting(*a):
        calls.append(a)
        return full(*a)
    monkeypatch.setattr(inst, "_launch", counting)
    return calls


def _launch_twice_and_compare(fake, monkeypatch, inst, args, ndrange, workgroupsize=None, fast=True):
    """Launch twice (the full path, then the plan) and check both argument blocks against
    pack_params; returns (layout, the reference bytes). ``fast``: whether the second launch
    skips the full path (a Python int >= 2**63 never does)."""
    layout, want = _reference(inst, args, ndrange, workgroupsize)
    got = []
    fake.on_launch = lambda launch: got.append(_slot_bytes(layout, launch["params"]))
    full = _count_full_launches(monkeypatch, inst)
    inst(*args, ndrange=ndrange, workgroupsize=workgroupsize)
    n = len(full)
    inst(*args, ndrange=ndrange, workgroupsize=workgroupsize)
    fake.on_launch = None
    assert got == [want, want]
    assert len(full) == (n if fast else n + 1), "the second launch took the wrong path"
    return layout, want


def _value(layout, raw, kind):
    """The value of the first parameter of ``kind`` in the packed bytes."""
    for (k, _, ct), b in zip(layout, raw):
        if k == kind:
            return np.frombuffer(b, {"ptr": np.uint64}.get(ct, ct))[0]
    raise KeyError(kind)


def _fill_kernel():
    @tk.kernel
    def fill(y, s):
        y[tk.index()] = s
    return fill


SCALARS = [True, False, 7, -(2 ** 63), 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2.5, -0.0, float("nan"), float("-inf"),
           np.bool_(True), np.int8(-5), np.int16(-300), np.int32(-(2 ** 31)), np.int64(-(2 ** 63)),
           np.uint8(255), np.uint16(65535), np.uint32(2 ** 32 - 1), np.uint64(2 ** 64 - 1),
           np.float16(1.5), np.float16(-65504), np.float32(3.25), np.float32(-1e-45),
           np.uint32(0x7FA00001).view(np.float32),           # a signalling NaN with a payload
           np.float64(-0.0), np.float64(1e308)]      # (bfloat16/fp8 scalars are not kernel arguments)


@pytest.mark.parametrize("s", SCALARS, ids=lambda s: f"{type(s).__name__}({s!r})")
def test_fake_plan_packs_scalars_of_every_dtype_like_pack_params(fake, monkeypatch, s):
    b = rt.CUDA(0)
    if isinstance(s, (bool, np.bool_)):
        dt = np.bool_
    elif isinstance(s, np.generic):
        dt = s.dtype
    elif isinstance(s, int):
        dt = np.uint64 if s >= 2 ** 63 else np.int64
    else:
        dt = np.float64
    y = b.array_from_host(np.zeros(8, dt))
    inst = _fill_kernel()(b)
    wide = type(s) is int and s >= 2 ** 63
    layout, raw = _launch_twice_and_compare(fake, monkeypatch, inst, (y, s), 8, fast=not wide)
    _, (_, ty), ct = next(e for e in layout if e[0] == "scalar")
    got = raw[[e[0] for e in layout].index("scalar")]
    if isinstance(s, (bool, np.bool_)):
        assert ct == "uint8" and got == bytes([bool(s)])
    elif ty.dtype.is_storage_only:                    # float16, bfloat16, fp8: as float32
        assert ct == "float32" and got == np.float32(s).tobytes()
    else:
        assert got == np.array(s, dtype=ct).tobytes()   # its own bits (NaN payloads, -0.0 too)
    assert _value(layout, raw, "ptr") == y.ptr


def test_fake_plan_repacks_new_values_on_every_launch(fake, monkeypatch):
    b = rt.CUDA(0)
    inst = _fill_kernel()(b)
    ys = [b.array_from_host(np.zeros(16, np.float64)) for _ in range(3)]
    layout, _ = _reference(inst, (ys[0], 1.0), 16)
    seen = []
    fake.on_launch = lambda launch: seen.append(_slot_bytes(layout, launch["params"]))
    full = _count_full_launches(monkeypatch, inst)
    for k, (y, s) in enumerate([(ys[0], 1.0), (ys[1], -7.25), (ys[2], 1e300), (ys[0], float("inf"))]):
        ev = inst(y, s, ndrange=16 - k)            # new arrays, scalars and extents: nothing stale
        assert isinstance(ev, tk.Event) and ev.done()
        raw = seen[-1]
        assert _value(layout, raw, "ptr") == y.ptr and _value(layout, raw, "scalar") == s
        assert _value(layout, raw, "count") == 16 - k
        assert raw == _reference(inst, (y, s), 16 - k)[1]
    assert len(full) == 4          # a new ndrange takes the full path (its geometry is cached there) ...
    inst(ys[1], 2.0, ndrange=15)
    assert len(full) == 4          # ... and then not again
    assert _value(layout, seen[-1], "ptr") == ys[1].ptr and _value(layout, seen[-1], "scalar") == 2.0
    assert len(inst._plans) == 1   # one plan: the extents are written at each launch, not keyed


def test_fake_plan_32_and_64_bit_index_variants(fake, monkeypatch):
    @tk.kernel
    def axpy(y, a, x: tk.Const):
        i = tk.index()
        if i < y.shape[0]:                 # the ndrange of 3 << 30 items is larger than the arrays
            y[i] = a * x[i] + y[i]
    b = rt.CUDA(0)
    y, x = b.array_from_host(np.ones(10, np.float32)), b.array_from_host(np.arange(10, dtype=np.float32))
    inst = axpy(b)
    for ndrange, ct in ((10, "int32"), (3 << 30, "int64"), (range(2, 10, 3), "int32")):
        layout, raw = _launch_twice_and_compare(fake, monkeypatch, inst, (y, 0.5, x), ndrange)
        cts = {k: c for k, _, c in layout}
        assert cts["count"] == cts["shape"] == cts["stride"] == ct and cts["start"] == cts["step"] == "int64"
        r = ndrange if isinstance(ndrange, range) else range(ndrange)
        assert [_value(layout, raw, k) for k in ("start", "count", "step")] == [r.start, len(r), r.step]
        assert len(raw[[k for k, _, _ in layout].index("count")]) == (4 if ct == "int32" else 8)
    assert fake.launches[-1]["grid"] == (1, 1, 1)
    assert len(inst._plans) == 3   # 32-bit, 64-bit and the ranges specialization


def test_fake_plan_strided_and_reversed_arrays(fake, monkeypatch):
    b = rt.CUDA(0)
    a = b.array_from_host(np.arange(24, dtype=np.float32).reshape(4, 6))
    out = b.array_from_host(np.zeros((4, 3), np.float32))
    cols = rt.CUDAArray(b, a.ptr, (4, 3), np.float32, (24, 8), a)          # a[:, ::2]
    rev = rt.CUDAArray(b, a.ptr + 4 * 5, (2, 3), np.float32, (48, -8), a)   # a[::2, 5::-2]
    inst = copy2d(b)
    for src, nd in ((cols, (4, 3)), (rev, (2, 3))):
        layout, raw = _launch_twice_and_compare(fake, monkeypatch, inst, (out, src), nd)
        vals = [(k, d[1], np.frombuffer(r, ct)[0]) for (k, d, ct), r in zip(layout, raw)
                if k in ("shape", "stride") and d[0].name == "a"]
        want = [("shape", i, n) for i, n in enumerate(src.shape)] + \
               [("stride", i, s // 4) for i, s in enumerate(src.strides)]
        assert vals == want
        ptrs = [np.frombuffer(r, np.uint64)[0] for (k, _, _), r in zip(layout, raw) if k == "ptr"]
        assert ptrs == [out.ptr, src.ptr]


def test_fake_plan_never_skips_a_check(fake, monkeypatch):
    b = rt.CUDA(0)
    inst = _fill_kernel()(b)
    y = b.array_from_host(np.zeros(8, np.int64))
    inst(y, 3, ndrange=8)
    inst(y, 3, ndrange=8)                  # a plan and a fast function exist now
    assert inst._fast is not cuda_launch._no_fast
    with pytest.raises(tk.LaunchError, match="64 bits"):
        inst(y, 2 ** 64, ndrange=8)
    with pytest.raises(tk.LaunchError, match="64 bits"):
        inst(y, -(2 ** 63) - 1, ndrange=8)
    for bad in (1.0 * 8, True, [8.5], "8"):
        with pytest.raises(tk.LaunchError):
            inst(y, 3, ndrange=bad)
    with pytest.raises(tk.LaunchError, match="takes 2 argument"):
        inst(y, 3, 4, ndrange=8)
    with pytest.raises(tk.LaunchError, match="host array"):
        inst(np.zeros(8, np.int64), 3, ndrange=8)
    with pytest.raises(tk.LaunchError, match="workgroupsize"):
        inst(y, 3, ndrange=8, workgroupsize=2.0)
    with pytest.raises(tk.LaunchError, match="stream"):
        inst(y, 3, ndrange=8, stream=object())
    n = len(fake.launches)
    assert inst(y, 3, ndrange=0).done() and inst(y, 3, ndrange=(range(3, 3),)).done()
    assert len(fake.launches) == n         # empty ndranges launch nothing
    # a Python int beyond int64 goes as uint64 (its own specialization), then int64 again
    seen = []
    fake.on_launch = lambda launch: seen.append(launch["params"])
    layout, _ = _reference(inst, (y, 2 ** 63 + 5), 8)
    inst(y, 2 ** 63 + 5, ndrange=8)
    assert _value(layout, _slot_bytes(layout, seen[-1]), "scalar") == np.uint64(2 ** 63 + 5)
    layout, _ = _reference(inst, (y, -4), 8)
    inst(y, -4, ndrange=8)
    assert _value(layout, _slot_bytes(layout, seen[-1]), "scalar") == -4
    # an array on another device is refused even when its layout matches a plan
    other = rt.CUDAArray(b, y.ptr, y.shape, y.dtype, None, y)
    other._layout = layout_of(y.dtype, y.shape, y.strides, 1)
    other._backend = type("B", (), {"device": 1, "__eq__": lambda s, o: False, "__hash__": lambda s: 1})()
    with pytest.raises(tk.LaunchError, match="CUDA:1"):
        inst(other, 3, ndrange=8)


def test_fake_plan_with_streams_constexpr_and_workgroups(fake, monkeypatch):
    @tk.kernel
    def scaled(y, x: tk.Const, k: tk.constexpr):
        i, j = tk.index(tk.Global, tk.Cartesian)
        y[i, j] = x[i, j] * k
    b = rt.CUDA(0)
    x = b.array_from_host(np.ones((6, 40), np.float32))
    y = b.array_from_host(np.zeros((6, 40), np.float32))
    inst = scaled(b)
    hi = b.stream(tk.High)
    full = _count_full_launches(monkeypatch, inst)
    for k in (2, 3, 2.0):
        for _ in range(2):
            inst(y, x, k, ndrange=(6, 40), workgroupsize=(2, 32), stream=hi)
            assert fake.launches[-1]["stream"] == hi.handle
            assert fake.launches[-1]["block"] == (32, 2, 1) and fake.launches[-1]["grid"] == (2, 3, 1)
    assert len(full) == 3                  # one full launch per constexpr value (2 and 2.0 differ)
    assert len({id(e) for e in inst._compiled.values()}) == 3
    inst(y, x, 2, ndrange=(6, 40), workgroupsize=(2, 32))
    assert fake.launches[-1]["stream"] == 0 and len(full) == 3
    _launch_twice_and_compare(fake, monkeypatch, inst, (y, x, 3), (range(1, 5), range(0, 40, 2)), (2, 32))


def test_fake_events_are_recorded_per_launch_and_their_handles_reused(fake):
    b = rt.CUDA(0)
    y = b.array_from_host(np.zeros(8))
    inst = _fill_kernel()(b)
    inst(y, 1.0, ndrange=8)
    evs = [inst(y, 1.0, ndrange=8) for _ in range(5)]
    handles = {e.handle for e in evs}
    assert len(handles) == 5               # live events never share a handle
    created = fake.events
    del evs
    import gc
    gc.collect()
    evs = [inst(y, 1.0, ndrange=8) for _ in range(5)]
    assert fake.events == created and {e.handle for e in evs} == handles   # recorded again, not created
    ref = cuda_streams.CUDAEvent(123, b._dev)        # the fast constructor sets what Event.__init__ sets
    fast = cuda_streams.new_event(123, b._dev)
    for slot in tk.Event.__slots__ + cuda_streams.CUDAEvent.__slots__:
        if slot not in ("_lock", "__weakref__"):
            assert getattr(fast, slot) == getattr(ref, slot), slot
    assert fast._lock.locked() and ref._lock.locked() and fast.done()
    ref.handle = fast.handle = None


def test_fake_plan_concurrent_launches_keep_their_own_arguments(fake):
    import threading
    b = rt.CUDA(0)
    y = b.array_from_host(np.zeros(8))
    inst = _fill_kernel()(b)
    layout, _ = _reference(inst, (y, 0.0), 8)
    inst(y, 0.0, ndrange=8)
    seen = []
    fake.on_launch = lambda launch: seen.append(_value(layout, _slot_bytes(layout, launch["params"]), "scalar"))

    def work(base):
        for k in range(300):
            inst(y, float(base + k), ndrange=8)
    ts = [threading.Thread(target=work, args=(1000 * t,)) for t in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(seen) == sorted(float(1000 * t + k) for t in range(3) for k in range(300))


# ----------------------------------------------------------------------------- on a GPU

GPU_OK, GPU_WHY = rt.CUDA.available()
needs_gpu = pytest.mark.skipif(not GPU_OK, reason=f"no usable CUDA device: {GPU_WHY}")


@pytest.fixture(scope="module")
def cuda():
    return rt.CUDA(0)


@needs_gpu
def test_gpu_saxpy_matches_the_cpu(cuda):
    x = np.random.default_rng(0).random(1037).astype(np.float32)
    y = np.random.default_rng(1).random(1037).astype(np.float32)
    Y = cuda.array_from_host(y)
    saxpy(cuda)(Y, 0.5, cuda.array_from_host(x), ndrange=x.size)
    cuda.synchronize()
    ref = y.copy()
    saxpy(tk.CPU())(ref, 0.5, x, ndrange=x.size)
    np.testing.assert_array_equal(Y.numpy(), ref)


@needs_gpu
@pytest.mark.parametrize("wg", [7, 32, 48, 256, 1024])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_gpu_collectives_with_partial_groups(cuda, wg, dtype):
    n = 3 * wg - 5
    x = np.random.default_rng(2).integers(-50, 50, 3 * wg).astype(dtype)
    outs = [cuda.array_from_host(np.zeros(3 * wg, dtype)) for _ in range(3)]
    collectives(cuda)(*outs, cuda.array_from_host(x), ndrange=n, workgroupsize=wg)
    r, inc, ex = (o.numpy() for o in outs)
    for g in range(3):
        lo, hi = g * wg, min(g * wg + wg, n)
        seg = x[lo:hi]
        assert (r[lo:hi] == seg.sum()).all()
        np.testing.assert_array_equal(inc[lo:hi], np.maximum.accumulate(seg))
        np.testing.assert_array_equal(ex[lo:hi], np.cumsum(seg) - seg)


@needs_gpu
def test_gpu_atomics(cuda):
    x = np.random.default_rng(3).random(4096).astype(np.float32)
    i32, u64 = cuda.array_from_host(np.zeros(1, np.int32)), cuda.array_from_host(np.zeros(1, np.uint64))
    f32, f64 = cuda.array_from_host(np.full(1, 2.0, np.float32)), cuda.array_from_host(np.zeros(1))
    atomics(cuda)(i32, u64, f32, f64, cuda.array_from_host(x), ndrange=x.size)
    assert i32.numpy()[0] == 4096 and u64.numpy()[0] == 4095 and f32.numpy()[0] == x.min()
    np.testing.assert_allclose(f64.numpy()[0], x.astype(np.float64).sum(), rtol=1e-6)


@needs_gpu
def test_gpu_2d_tiles_and_ranges(cuda):
    a = np.random.default_rng(4).random((37, 70))
    A, O = cuda.array_from_host(a), cuda.array_from_host(np.zeros((37, 70)))
    copy2d(cuda)(O, A, ndrange=(range(1, 36), range(2, 68)), workgroupsize=(4, 32))
    ref = np.zeros((37, 70))
    ref[1:36, 2:68] = a[1:36, 2:68]
    np.testing.assert_array_equal(O.numpy(), ref)
    x = np.random.default_rng(5).random(64 * 12).astype(np.float32)
    out = cuda.array_from_host(np.zeros(12, np.float32))
    tile_sum(cuda)(out, cuda.array_from_host(x), ndrange=x.size, workgroupsize=64)
    np.testing.assert_allclose(out.numpy(), x.reshape(12, 64).sum(1), rtol=1e-5)


@needs_gpu
def test_gpu_debug_mode_raises_index_error(cuda):
    b = rt.CUDA(0, debug=True)
    y = b.array_from_host(np.ones(8, np.float32))

    @tk.kernel
    def oob(A):
        A[tk.index() + 2] = 1.0
    with pytest.raises(IndexError, match=r"oob.*\(8,\)"):
        oob(b)(y, ndrange=8)


@needs_gpu
def test_gpu_streams_events_and_priorities(cuda):
    n = 1 << 16
    A = cuda.array_from_host(np.zeros(n, np.float32))
    ones = cuda.array_from_host(np.ones(n, np.float32))
    s1, s2 = cuda.stream(priority=tk.High), cuda.stream(priority=tk.Low)
    evs = [saxpy(cuda)(A, 1.0, ones, ndrange=n, stream=s1) for _ in range(10)]
    s2.wait(evs[-1])
    B = cuda.array_from_host(np.zeros(n, np.float32))
    ev = saxpy(cuda)(B, 2.0, A, ndrange=n, stream=s2)
    ev.wait()
    assert ev.done()
    np.testing.assert_array_equal(B.numpy(), np.full(n, 20.0, np.float32))


@needs_gpu
def test_gpu_torch_tensors_zero_copy(cuda):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    y = torch.ones(100, device="cuda")
    x = torch.arange(100, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    saxpy(cuda)(y, 2.0, x, ndrange=100)
    cuda.synchronize()
    assert torch.equal(y.cpu(), 2 * torch.arange(100, dtype=torch.float32) + 1)
    back = torch.from_dlpack(cuda.array_from_host(np.arange(5, dtype=np.int64)))
    assert back.device.type == "cuda" and back.cpu().tolist() == [0, 1, 2, 3, 4]


@needs_gpu
@pytest.mark.skipif(_conformance_dir() is None, reason="no conformance suite beside this checkout")
def test_gpu_conformance_suite():
    if "CUDA" not in tk.backends() or not tk.backends()["CUDA"][0]:
        pytest.skip("tk.CUDA is not registered in backends.py yet")
    env = dict(os.environ, TK_TEST_BACKENDS="CUDA", PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(_conformance_dir())],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-5000:]


def test_module_imports_without_cuda_bindings():
    """The runtime module must import (and report unavailability) without cuda-bindings."""
    code = ("import sys; sys.modules['cuda'] = None; sys.modules['cuda.bindings'] = None\n"
            "from tinykernels.runtime import cuda as rt\n"
            "ok, why = rt.CUDA.available(); assert not ok and 'cuda-bindings' in why, why\n"
            "print(rt.nvrtc_available())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert r.returncode == 0, r.stderr
    assert "False" in r.stdout


_NVRTC_THEN_POCL = r"""
import os, sys, numpy as np, tinykernels as tk, math
from tinykernels.runtime import nvrtc, nvrtc_worker
print("isolated", nvrtc_worker.isolation_wanted())
nvrtc.compile_cuda('extern "C" __global__ void tk_kernel(float *x) { x[threadIdx.x] += 2.0f; }\n', "sm_80", "k")

@tk.kernel
def k(o):
    o[0] = math.tanh(tk.float32(math.nan))

o = tk.asarray(np.zeros(1, np.float32), backend=tk.backend("CL"))
k(tk.backend("CL"))(o, ndrange=1).wait()
print("tanh", o.numpy()[0])
"""


@needs_nvrtc
@pytest.mark.skipif("CL" not in tk.backends_available(), reason="no OpenCL device")
def test_nvrtc_runs_apart_from_pocls_llvm(tmp_path):
    """NVRTC's LLVM in the same process breaks PoCL's (constant NaNs folded to 0, or a crash):
    with pyopencl installed, NVRTC compiles in its worker process and PoCL stays right."""
    env = dict(os.environ, TK_CACHE_DIR=str(tmp_path / "tk"), POCL_CACHE_DIR=str(tmp_path / "pocl"),
               POCL_KERNEL_CACHE="0", PYTHONPATH=str(Path(__file__).resolve().parent.parent / "src"))
    env.pop("TK_NVRTC_ISOLATE", None)
    r = subprocess.run([sys.executable, "-c", _NVRTC_THEN_POCL], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "isolated True" in r.stdout and "tanh nan" in r.stdout, r.stdout


@needs_nvrtc
def test_nvrtc_worker_compiles_like_the_process_and_restarts(monkeypatch, tmp_path):
    from tinykernels.runtime import nvrtc, nvrtc_worker
    src = 'extern "C" __global__ void tk_kernel(float *x) { x[threadIdx.x] *= 3.0f; }\n'
    # (never NVRTC in this process: pytest runs PoCL kernels in it; see the test above)
    here = nvrtc_worker.compile_isolated(src, "sm_80", "k", nvrtc.NVRTC_OPTIONS)
    assert here[0] and here[2][:4] == b"\x7fELF"
    nvrtc_worker._CHILD[0].kill()
    nvrtc_worker._CHILD[0].wait()
    assert nvrtc_worker.compile_isolated(src, "sm_80", "k", nvrtc.NVRTC_OPTIONS)[2] == here[2]
    bad = nvrtc_worker.compile_isolated("this is not CUDA", "sm_80", "bad", nvrtc.NVRTC_OPTIONS)
    assert not bad[0] and "error" in bad[1]
    monkeypatch.setenv("TK_NVRTC_ISOLATE", "0")
    assert not nvrtc_worker.isolation_wanted()
    monkeypatch.setenv("TK_NVRTC_ISOLATE", "1")
    assert nvrtc_worker.isolation_wanted()


def test_fake_plan_constexpr_signed_zero(fake, monkeypatch):
    """The plan keys (and the fast function's inline keys) compared a constexpr by value: -0.0
    took 0.0's plan and build. Each is its own now, and each repeats from its plan."""
    @tk.kernel
    def scaled0(y, k: tk.constexpr):
        i = tk.index()
        y[i] = 1.0 / k
    b = rt.CUDA(0)
    y = b.array_from_host(np.zeros(8, np.float32))
    inst = scaled0(b)
    full = _count_full_launches(monkeypatch, inst)
    for k in (0.0, -0.0, 0.0, -0.0):
        inst(y, k, ndrange=8)
    assert len(full) == 2
    assert len({id(e) for e in inst._compiled.values()}) == 2


@tk.kernel
def print_35(r):
    tk.print(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15],
             r[16], r[17], r[18], r[19], r[20], r[21], r[22], r[23], r[24], r[25], r[26], r[27], r[28], r[29], r[30],
             r[31], r[32], "50%d", 1.5)


def test_print_of_more_than_32_values_is_split_into_printf_calls_of_32():
    """CUDA's device printf takes at most 32 arguments: the 33rd of a tk.print printed garbage on
    an H200 (CUDA.jl's print_too_many port). The renderer splits the call; only the last piece
    ends the line, and a literal '%' (escaped '%%') is no conversion."""
    src = print_35.source("CUDA", np.zeros(33, np.int32), ndrange=1)
    calls = re.findall(r'printf\("((?:[^"\\]|\\.)*)"((?:, [^;]*)?)\);', src)
    assert len(calls) == 2
    (f1, a1), (f2, a2) = calls
    assert f1.count("%lld") == 32 and not f1.endswith("\\n") and a1.count("(long long)") == 32
    assert f2 == "%lld 50%%d %g\\n" and a2.count("(long long)") == 1
    if NVRTC_OK:
        assert rt.compile_cuda(src, "sm_90", "print_35")[:4] == b"\x7fELF"


@tk.kernel
def nan_max_min(o, x: tk.Const):
    i = tk.index()
    o[i] = tk.group_reduce(x[i], "max") + tk.group_scan(x[i], "min")


def test_float_min_max_collectives_fold_each_value_into_the_identity():
    """group_reduce/scan max and min leave a NaN out (docs/language.md: C's fmax, as the CPU's
    fold from the identity). The warp-shuffle code started from each item's own value, so a NaN
    in it stayed (an H200 gave NaN for [nan, 1]; pyopencl's reduction NaN port)."""
    src = nan_max_min.source("CUDA", np.zeros(64, np.float32), np.zeros(64, np.float32), ndrange=64,
                             workgroupsize=64)
    inits = [ln.strip() for ln in src.splitlines() if "acc = tk_active ?" in ln]
    assert len(inits) == 2
    assert inits[0].startswith("float acc = tk_active ? tk_max_f32(((float)(tk_ident_min_f32)), ")
    assert inits[1].startswith("float acc = tk_active ? tk_min_f32(((float)(tk_ident_max_f32)), ")


@tk.kernel
def early_return(o, x: tk.Const, n):
    i = tk.index()
    if x[i] < 0:
        return
    for k in range(n):
        if k == 3:
            return
        o[i] += x[i] * k
    o[i] += tk.index(tk.Group)


def test_items_per_thread_only_for_flat_1d_kernels():
    """TK_CUDA_ITEMS (experimental): work items per thread for flat 1-D kernels only."""
    from tinykernels.codegen.cuda import items_per_thread
    x = np.zeros(4096, np.float32)
    ir = early_return(rt.CUDATarget())._ir(*_prepared(early_return, (x, x, 5), 4096))
    assert items_per_thread(ir, None, 4) == 4 and items_per_thread(ir, None, 1) == 1
    assert items_per_thread(ir, object(), 4) == 1                     # a grouped kernel (barriers...)
    a2 = np.zeros((64, 64))
    ir2 = copy2d(rt.CUDATarget())._ir(*_prepared(copy2d, (a2, a2), (64, 64)))
    assert items_per_thread(ir2, None, 4) == 1                        # 2-D: not (yet)


def _prepared(kernel, args, nd):
    inst = kernel(rt.CUDATarget())
    norm, geom, ndim, ranges, _total, wg = inst._prepare(args, nd, None)
    return norm, geom, ndim, ranges, wg


@tk.func
def clipped_square(v):
    if v < 0:
        return 0.0
    return v * v


@tk.kernel
def with_func(o, x: tk.Const):
    i = tk.index()
    o[i] = clipped_square(x[i]) + clipped_square(-x[i])


def test_items_per_thread_with_inlined_funcs_compiles(monkeypatch):
    """An inlined @tk.func's exit label appears once (the item is one lambda): rendering the body
    twice, as the first version did, gave duplicate labels, and NVRTC refused kernels with funcs
    (two autodiff ports failed with TK_CUDA_ITEMS=4 on an H200)."""
    monkeypatch.setenv("TK_CUDA_ITEMS", "4")
    x = np.zeros(4096, np.float32)
    src = with_func.source("CUDA", x, x, ndrange=x.size)
    labels = re.findall(r"\} (\w+): ;", src)
    assert len(labels) == 2 and len(set(labels)) == 2
    if NVRTC_OK:
        assert rt.compile_cuda(src, "sm_90", "with_func")[:4] == b"\x7fELF"


def test_items_per_thread_source_returns_end_only_that_item(monkeypatch):
    """A return inside the item (also from a loop) jumps to the end of that item, not out of the
    thread; full blocks run the items unrolled without bounds checks, the last one checks."""
    monkeypatch.setenv("TK_CUDA_ITEMS", "4")
    x = np.zeros(4096, np.float32)
    src = early_return.source("CUDA", x, x, 5, ndrange=x.size)
    body = src[src.index('extern "C"'):]
    item = body[body.index("auto tk_item = [&]"):body.index("};")]
    assert item.count("return;") == 2 and "goto" not in item          # a return ends the item (the lambda)
    assert "((long long)blockIdx.x + 1) * 1024 <= (long long)tk_n0" in body
    assert body.count("if (tk_pw >= (long long)tk_n0) break;") == 1
    assert body.count("tk_item((tk_idx)blockIdx.x * 4 + tk_u, ") == 2
    if NVRTC_OK:
        assert rt.compile_cuda(src, "sm_90", "early_return")[:4] == b"\x7fELF"
    monkeypatch.delenv("TK_CUDA_ITEMS")
    assert "tk_u = 0" not in early_return.source("CUDA", x, x, 5, ndrange=x.size)


def test_fake_items_per_thread_divides_the_grid(fake, monkeypatch):
    monkeypatch.setenv("TK_CUDA_ITEMS", "4")
    b = rt.CUDA(0)
    y = b.array_from_host(np.ones(10000, np.float32))
    x = b.array_from_host(np.ones(10000, np.float32))
    saxpy(b)(y, 2.0, x, ndrange=10000)
    assert fake.launches[-1]["grid"] == (10, 1, 1) and fake.launches[-1]["block"] == (256, 1, 1)   # 40 groups / 4
    saxpy(b)(y, 2.0, x, ndrange=10000)                                # the cached plan: the same grid
    assert fake.launches[-1]["grid"] == (10, 1, 1)
    copy2d(b)(b.array_from_host(np.zeros((8, 512))), b.array_from_host(np.zeros((8, 512))), ndrange=(8, 512),
              workgroupsize=(1, 256))
    assert fake.launches[-1]["grid"] == (2, 8, 1)                     # 2-D: one item per thread


@tk.kernel
def pow_hypot(o, a: tk.Const, b: tk.Const, o32, a32: tk.Const):
    i = tk.index()
    o[i] = a[i] ** b[i] + math.hypot(a[i], b[i])
    o32[i] = a32[i] ** a32[i] + math.hypot(a32[i], a32[i])


def test_pow_and_hypot_go_through_the_libdevice_fixups():
    """libdevice's pow(0.5, 4.0) is 1 ulp low and hypot(1, DBL_MAX) overflows (an H200): float
    ** and math.hypot call tk_pow/tk_hypot (exact powers of two to integer powers; the overflow
    recomputed), on CUDA and HIP alike."""
    f64, f32 = np.zeros(4), np.zeros(4, np.float32)
    for dev in ("CUDA", "ROCm"):
        src = pow_hypot.source(dev, f64, f64, f64, f32, f32, ndrange=4)
        body = src[src.index("tk_kernel("):]
        for fn in ("tk_pow(", "tk_hypot(", "tk_powf(", "tk_hypotf("):
            assert fn in body, (dev, fn)
        assert " pow(" not in body and " hypot(" not in body
