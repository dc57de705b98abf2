"""The ROCm backend (AMD GPUs, HIP).

* Renderer unit tests (always run): the wavefront size (64 on CDNA, 32 on RDNA) is a
  parameter of the render, HIP's shuffles and atomics, ``kernel.source("ROCm", ...)``.
* Compiler checks (no GPU; skipped where the tools are missing): clang compiles kernels
  device-only to gfx90a and gfx1100 assembly (runtime/hipclang.py); the argument buffer the
  runtime packs matches the kernel ABI clang reports; the runtime's own compile path
  (``compile_hip``) runs on the real hiprtc of Debian's ROCm 5.2 library through
  tests/hiprtc_ctypes.py (gfx90a, gfx1030); every conformance kernel compiles with both (and,
  with ``TK_HIP_COMPILE_ALL=1``, every kernel of the project's tests).
* The runtime's plumbing against a fake ``hip-python`` (always run): device properties,
  memory, copies, argument buffers, the ``extra`` launch protocol, hiprtc options and the
  disk cache, compile errors, streams, events, debug reports, DLPack. It checks the Python
  side only; nothing executes GPU code (no AMD GPU was available to this project).
"""
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.codegen import cuda as cg_cuda
from tinykernels.codegen import hip as cg
from tinykernels.runtime import hipclang
from tinykernels.runtime import rocm as rt

import hiprtc_ctypes

ROOT = Path(__file__).resolve().parents[1]
CLANG_OK, CLANG_WHY = hipclang.hip_clang_available()
needs_clang = pytest.mark.skipif(not CLANG_OK, reason=f"clang cannot compile HIP here: {CLANG_WHY}")
ARCHS = hipclang.ARCHS
HIPRTC_OK, HIPRTC_WHY = hiprtc_ctypes.available()
needs_hiprtc = pytest.mark.skipif(not HIPRTC_OK, reason=f"no hiprtc library: {HIPRTC_WHY}")
HIPRTC_ARCHS = ("gfx90a", "gfx1030")     # Debian's ROCm 5.2 hiprtc predates gfx1100


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
def collectives(r, inc, ex, x: tk.Const):
    v = x[tk.index()]
    r[tk.index()] = tk.group_reduce(v, "add")
    inc[tk.index()] = tk.group_scan(v, "max")
    ex[tk.index()] = tk.group_scan(v, "add", inclusive=False)


@tk.kernel
def atomics(i32, i64, u64, f32, f64, x: tk.Const):
    i = tk.index()
    tk.atomic_add(i32, 0, 1)
    tk.atomic_min(i64, 0, tk.int64(i) - 5)
    tk.atomic_max(i64, 1, tk.int64(i) - 5)
    tk.atomic_max(u64, 0, tk.uint64(i))
    tk.atomic_min(f32, 0, x[i])
    tk.atomic_add(f64, 0, tk.float64(x[i]))
    tk.atomic_sub(f64, 1, tk.float64(x[i]))


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
def mixed(out, b, i8, i16, f, d, u):
    i = tk.index()
    if b:
        out[i] = tk.float64(i8) + tk.float64(i16) + tk.float64(f) + d + tk.float64(u)


def _src(kern, *args, arch="gfx90a", **kw):
    return rt.hip_source(kern, *args, arch=arch, **kw)


def _f32(n):
    return np.zeros(n, np.float32)


def _mixed_args():
    return (np.zeros(16), True, np.int8(-3), np.int16(300), np.float32(1.5), 2.25, np.uint32(7))


# ----------------------------------------------------------------------------- renderer

def test_kernel_source_accepts_the_rocm_dev_strings():
    for dev in ("ROCm", "HIP", "AMD", "rocm:1"):
        src = saxpy.source(dev, _f32(4), 1.0, _f32(4), ndrange=4)
        assert 'extern "C" __global__ void' in src and "tk_kernel(" in src and "HIP C++ for hiprtc" in src
    x = np.zeros(64, np.float32)
    assert "tk_ll >> 5" in collectives.source("ROCm:gfx1100", x, x, x, x, ndrange=64)
    assert "tk_ll >> 6" in collectives.source("HIP", x, x, x, x, ndrange=64)


def test_wave_size_of_architectures():
    for arch, wave in (("gfx90a", 64), ("gfx942", 64), ("gfx906", 64), ("gfx803", 64),
                       ("gfx90a:sramecc+:xnack-", 64), ("gfx1030", 32), ("gfx1100", 32), ("gfx1201", 32)):
        assert cg.wave_size(arch) == wave, arch
    for bad in ("sm_90", "gfx", "navi31"):
        with pytest.raises(ValueError):
            cg.wave_size(bad)
    with pytest.raises(ValueError):
        rt.ROCmTarget("sm_90")


def test_collectives_use_the_wavefront_of_the_architecture():
    x = np.zeros(200, np.int32)
    w64 = _src(collectives, x, x, x, x, ndrange=200, workgroupsize=200, arch="gfx90a")
    w32 = _src(collectives, x, x, x, x, ndrange=200, workgroupsize=200, arch="gfx1100")
    assert "tk_lane = (int)(tk_ll & 63), tk_warp = (int)(tk_ll >> 6)" in w64
    assert "tk_lane = (int)(tk_ll & 31), tk_warp = (int)(tk_ll >> 5)" in w32
    # 200 items: 4 wavefronts of 64 (the last has 8 lanes) or 7 of 32 (the last 8)
    assert "(tk_warp == 3 ? 8 : 64)" in w64 and "(tk_warp == 6 ? 8 : 32)" in w32
    assert "__AMDGCN_WAVEFRONT_SIZE != 64" in w64 and "__AMDGCN_WAVEFRONT_SIZE != 32" in w32
    for s in (w64, w32):
        assert "__shfl_down_sync" not in s and "__shfl_sync" not in s   # HIP's shuffles take no mask
        assert "return __shfl_down(v, o);" in s and "return __shfl_up(v, o);" in s
        assert "unsigned long long tk_wm" in s           # 64-bit lane masks


def test_kernels_without_collectives_do_not_depend_on_the_wavefront():
    a = _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10, arch="gfx90a")
    assert a == _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10, arch="gfx1100")
    assert "__AMDGCN_WAVEFRONT_SIZE" not in a


def test_native_atomics_and_cas_loops_only_where_needed():
    s = _src(atomics, np.zeros(1, np.int32), np.zeros(2, np.int64), np.zeros(1, np.uint64), _f32(1),
             np.zeros(2), _f32(8), ndrange=8)
    assert "atomicAdd(&a_i32" in s
    assert "tk_atomic_min_i64((long long *)&a_i64" in s and "tk_atomic_max_i64((long long *)&a_i64" in s
    assert "atomicMax((unsigned long long *)&a_u64" in s
    assert "tk_atomic_min_f32(&a_f32" in s
    assert "tk_atomic_add_f64(&a_f64" in s and "#if 1\n    return atomicAdd(p, v);" in s   # HIP: native everywhere
    assert "__CUDA_ARCH__" not in s


def test_fixed_width_types_never_clash_with_hip_headers():
    s = _src(saxpy, _f32(4), 1.0, _f32(4), ndrange=4)
    assert "#if !defined(__HIPCC_RTC__)\n#include <hip/hip_runtime.h>\n#endif" in s
    for name in ("int8_t", "int64_t", "uint64_t"):
        assert f"#define {name} tk_{name}" in s and f"#undef {name}" in s
    assert "typedef long long int64_t" not in s


def test_parameter_layout_is_cuda_s():
    ir_args = (np.zeros(16), True, np.int8(1), np.int16(1), np.float32(1), 1.0, np.uint32(1))
    inst = mixed(rt.ROCmTarget())
    norm, geom, ndim, ranges, total, wg = inst._prepare(ir_args, 16, None, inst._normalize_for_source)
    ir = inst._ir(norm, geom, ndim, ranges, wg)
    assert cg.param_layout(ir) == cg_cuda.param_layout(ir)
    assert [c for k, _, c in cg.param_layout(ir) if k == "scalar"] == ["uint8", "int8", "int16", "float32",
                                                                       "float64", "uint32"]


# ----------------------------------------------------------------------------- clang

@needs_clang
@pytest.mark.parametrize("arch", ARCHS)
def test_compiles_collectives_atomics_localmem_and_debug_kernels(arch):
    i32 = np.zeros(100, np.int32)
    srcs = [_src(collectives, i32, i32, i32, i32, ndrange=100, workgroupsize=48, arch=arch),
            _src(collectives, *[np.zeros(100, np.float16)] * 4, ndrange=100, workgroupsize=1024, arch=arch),
            _src(collectives, *[np.zeros(100, np.uint8)] * 4, ndrange=100, workgroupsize=7, arch=arch),
            _src(collectives, *[np.zeros(100, np.int64)] * 4, ndrange=100, workgroupsize=200, arch=arch),
            _src(atomics, np.zeros(1, np.int32), np.zeros(2, np.int64), np.zeros(1, np.uint64), _f32(1),
                 np.zeros(2), _f32(8), ndrange=8, arch=arch),
            _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=3 << 30, debug=True, arch=arch),
            _src(tile_sum, _f32(4), _f32(256), ndrange=range(0, 256), workgroupsize=64, arch=arch)]
    for s in srcs:
        asm = hipclang.compile_hip_clang(s, arch, "k")
        assert f".amdgcn_target \"amdgcn-amd-amdhsa--{arch}" in asm and "tk_kernel:" in asm


@needs_clang
def test_a_kernel_rendered_for_another_wavefront_does_not_compile():
    x = np.zeros(64, np.float32)
    src = _src(collectives, x, x, x, x, ndrange=64, arch="gfx90a")
    with pytest.raises(tk.CompileError, match="wavefronts of 64 lanes"):
        hipclang.compile_hip_clang(src, "gfx1100", "collectives")


@needs_clang
def test_clang_errors_are_compile_errors_with_the_python_line():
    src = _src(saxpy, _f32(4), 1.0, _f32(4), ndrange=4).replace("a_y[", "a_nope[", 1)
    with pytest.raises(tk.CompileError) as e:
        hipclang.compile_hip_clang(src, "gfx90a", "saxpy")
    assert "clang rejected the generated HIP code for kernel 'saxpy' (gfx90a)" in str(e.value)
    assert "a_nope" in str(e.value) and e.value.line is not None and e.value.filename == __file__


@needs_clang
@pytest.mark.parametrize("arch", ARCHS)
def test_a_batch_compiles_each_source_as_it_compiles_alone(arch):
    """Many kernels in one clang run: each sees only its own macros and names (two define
    the same macro differently, one checks that no other's macro leaks in, all are
    ``tk_kernel``), and only the rejected ones are reported, with the message of their
    compile alone (the batch is bisected)."""
    x = _f32(4)
    good = _src(saxpy, x, 1.0, x, ndrange=4, arch=arch)
    coll = _src(collectives, x, x, x, x, ndrange=64, arch="gfx90a")    # wave 64: rejected on gfx1100
    bad = good.replace("a_y[", "a_nope[", 1)
    macro_a = good.replace("typedef int tk_idx;", "#define TK_MARK 1\ntypedef int tk_idx;")
    macro_b = good.replace("typedef int tk_idx;", "#define TK_MARK 2\ntypedef int tk_idx;")
    leak = good.replace("typedef int tk_idx;", '#ifdef TK_MARK\n#error "a macro leaked"\n#endif\ntypedef int tk_idx;')
    srcs = [good, macro_a, leak, bad, macro_b, leak, coll, good]
    names = [f"k{i}" for i in range(len(srcs))]
    errs = hipclang.compile_hip_clang_batch(srcs, arch, names)
    rejected = {3} | ({6} if arch == "gfx1100" else set())
    assert {i for i, e in enumerate(errs) if e is not None} == rejected
    for i in rejected:
        with pytest.raises(tk.CompileError) as alone:
            hipclang.compile_hip_clang(srcs[i], arch, names[i])
        assert str(errs[i]) == str(alone.value) and errs[i].line == alone.value.line
    assert hipclang.compile_hip_clang_batch([], arch) == []


def test_batch_source_keeps_every_source_and_restores_its_macros():
    srcs = ["#define A 1\n#undef B\nextern \"C\" __global__ void tk_kernel() {}", "int x;"]
    tu = hipclang.batch_source(srcs)
    assert srcs[0] in tu and srcs[1] in tu and "namespace tk_batch_1 {" in tu
    first = tu[:tu.index(srcs[1])]
    for name in ("A", "B", "tk_kernel"):
        assert f'#pragma push_macro("{name}")' in first and f'#pragma pop_macro("{name}")' in first
    assert "#define tk_kernel tk_kernel_0" in tu and "#define tk_kernel tk_kernel_1" in tu


@needs_clang
@pytest.mark.parametrize("idx32", [True, False])
def test_argument_buffer_matches_the_abi_clang_compiles(idx32):
    """Offsets and sizes of every parameter in the runtime's buffer are the ones in the
    compiled kernel's metadata (mixed 1/2/4/8-byte scalars, 32- and 64-bit indices)."""
    n = 16 if idx32 else 3 << 30
    args = _mixed_args()
    inst = mixed(rt.ROCmTarget())
    norm, geom, ndim, ranges, total, wg = inst._prepare(args, n, None, inst._normalize_for_source)
    ir = inst._ir(norm, geom, ndim, ranges, wg)
    assert ir.idx32 == idx32
    src = inst._render(ir, ranges)[0]
    abi = hipclang.kernel_args(hipclang.compile_hip_clang(src, "gfx90a", "mixed"))
    layout = cg.param_layout(ir)
    offs, size = rt.arg_offsets(layout)
    sizes = [np.dtype(rt._NP_PARAM[c]).itemsize for _, _, c in layout]
    assert [(o, s) for o, s, _ in abi] == list(zip(offs, sizes))
    assert [k for _, _, k in abi].count("global_buffer") == 1
    assert size >= offs[-1] + sizes[-1]


# ----------------------------------------------------------------------------- real hiprtc

@needs_hiprtc
@pytest.mark.parametrize("arch", HIPRTC_ARCHS)
def test_real_hiprtc_compiles_code_objects_for_the_device_architecture(tmp_path, arch):
    i32 = np.zeros(100, np.int32)
    srcs = [_src(collectives, i32, i32, i32, i32, ndrange=100, workgroupsize=200, arch=arch),
            _src(collectives, *[np.zeros(100, np.float64)] * 4, ndrange=100, workgroupsize=96, arch=arch),
            _src(atomics, np.zeros(1, np.int32), np.zeros(2, np.int64), np.zeros(1, np.uint64), _f32(1),
                 np.zeros(2), _f32(8), ndrange=8, arch=arch),
            _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=3 << 30, debug=True, arch=arch),
            _src(tile_sum, _f32(4), _f32(256), ndrange=range(0, 256), workgroupsize=64, arch=arch),
            _src(mixed, *_mixed_args(), ndrange=16, arch=arch)]
    jobs = [{"src": s, "arch": arch, "name": "k"} for s in srcs + srcs[:1]]   # the last: from the disk cache
    res = hiprtc_ctypes.compile_batch(jobs, tmp_path, tmp_path / "cache")
    assert [r.get("error") for r in res] == [None] * len(jobs)
    assert {r["magic"] for r in res} == {"7f454c46"}                         # ELF code objects
    assert (res[-1]["compiles"], res[-1]["disk_hits"]) == (len(srcs), 1)
    assert len(list((tmp_path / "cache" / "rocm").rglob("*.hsaco"))) == len(srcs)


@needs_hiprtc
def test_real_hiprtc_errors_are_compile_errors(tmp_path):
    x = np.zeros(64, np.float32)
    bad = _src(saxpy, _f32(4), 1.0, _f32(4), ndrange=4).replace("a_y[", "a_nope[", 1)
    wave, undeclared = hiprtc_ctypes.compile_batch(
        [{"src": _src(collectives, x, x, x, x, ndrange=64, arch="gfx90a"), "arch": "gfx1030", "name": "collectives"},
         {"src": bad, "arch": "gfx90a", "name": "saxpy"}], tmp_path, tmp_path / "cache")
    assert not wave["ok"] and "wavefronts of 64 lanes" in wave["error"]
    assert not undeclared["ok"] and "hiprtc rejected the generated HIP code for kernel 'saxpy' (gfx90a)" in \
        undeclared["error"]
    assert "a_nope" in undeclared["error"] and undeclared["filename"] == __file__ and undeclared["line"]


CAPTURE = r'''
import importlib, json, os, sys
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
out, targets, rootdir, paths = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4:]
rc = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", rootdir, *paths])
K.KernelInstance._ir = _orig
from tinykernels.runtime import rocm as rt
from tinykernels.runtime.hipclang import compile_hip_clang_batch
seen, results, hiprtc_jobs, clang_jobs = set(), [], [], {}
for kern, args, geom, ndim, ranges, wg, debug in list(CAPS):
    for target in targets:
        tool, arch = target.split(":")
        rec = {"kernel": kern.name, "ndim": ndim, "wg": list(wg), "debug": debug, "target": target}
        try:
            inst = kern(rt.ROCmTarget(arch, debug))
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
        if (target, src) in seen:
            continue
        seen.add((target, src))
        if tool == "hiprtc":             # compiled by the test in a child process (see hiprtc_ctypes)
            hiprtc_jobs.append({"src": src, "arch": arch, "name": kern.name, "cache": False, "rec": rec})
            continue
        clang_jobs.setdefault(arch, []).append((src, kern.name, rec))
for arch, jobs in clang_jobs.items():      # many kernels a clang run (rejected batches are bisected)
    errs = compile_hip_clang_batch([j[0] for j in jobs], arch, [j[1] for j in jobs])
    for (src, name, rec), e in zip(jobs, errs):
        if e is not None:
            rec["error"] = f"{rec['target']}: {type(e).__name__}: {e}"
            rec["source"] = src
        results.append(rec)
json.dump({"pytest_rc": int(rc), "captured": len(CAPS), "results": results, "hiprtc_jobs": hiprtc_jobs},
          open(out, "w"))
'''


def _targets():
    """clang for gfx90a and gfx1100, and the real hiprtc for gfx90a where its library is here."""
    return [f"clang:{a}" for a in ARCHS] + (["hiprtc:gfx90a"] if HIPRTC_OK else [])


def _capture_and_compile(tmp_path, rootdir, paths, targets):
    """Run the tests ``paths`` on the CPU, capture every kernel specialization they launch,
    render each as HIP for every target's architecture and compile it (in a subprocess)."""
    out = tmp_path / "compiled.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TK_CACHE_DIR=str(tmp_path / "cache"), TK_TEST_BACKENDS="CPU", DEV="CPU")
    env.pop("TK_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", CAPTURE, str(out), ",".join(targets), str(rootdir),
                        *map(str, paths)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=3600)
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads(out.read_text())
    jobs = data.pop("hiprtc_jobs")
    if jobs:
        for job, res in zip(jobs, hiprtc_ctypes.compile_batch(jobs, tmp_path / "hiprtc")):
            rec = job["rec"]
            if not res["ok"]:
                rec["error"], rec["source"] = f"{rec['target']}: {res['error']}", job["src"]
            data["results"].append(rec)
    return data, r


@needs_clang
def test_every_conformance_kernel_compiles_with_clang_and_hiprtc(tmp_path):
    conf = _conformance_dir()
    if conf is None:
        pytest.skip("the conformance suite (../shared/conformance) is not beside this checkout")
    targets = _targets()
    data, r = _capture_and_compile(tmp_path, conf, [conf], targets)
    assert data["pytest_rc"] == 0, r.stdout[-3000:]
    results = data["results"]
    assert len(results) >= 100, f"only {len(results)} specializations captured"
    bad = [x for x in results if "error" in x]
    assert not bad, "\n\n".join(f"{x['kernel']}: {x['error'][:2000]}" for x in bad[:5])
    print(f"\n{CLANG_WHY}, {HIPRTC_WHY}: {len(results)} distinct conformance kernel sources compiled ({targets})")


@needs_clang
@pytest.mark.skipif(not os.environ.get("TK_HIP_COMPILE_ALL"), reason="set TK_HIP_COMPILE_ALL=1 (several minutes)")
def test_every_project_test_kernel_compiles_with_clang_and_hiprtc(tmp_path):
    tests = [p for p in sorted((ROOT / "tests").glob("test_*.py")) if p.name not in ("test_rocm.py", "test_cuda.py")]
    data, r = _capture_and_compile(tmp_path, ROOT, tests, _targets())
    assert len(data["results"]) > 100, r.stdout[-3000:]
    bad = [x for x in data["results"] if "error" in x]
    assert not bad, "\n\n".join(f"{x['kernel']} ({x['target']}): {x['error'][:2000]}" for x in bad[:5])
    print(f"\n{len(data['results'])} distinct kernel sources compiled ({_targets()})")


# ----------------------------------------------------------------------------- fake hip-python

class _Props:
    def __init__(self):
        self.name = b"Fake MI250X\0\0"
        self.gcnArchName = b"gfx90a:sramecc+:xnack-\0"
        self.warpSize = 64
        self.maxThreadsPerBlock = 1024
        self.maxGridSize = [2 ** 31 - 1, 65535, 65535]


class FakeHip:
    """Enough of hip-python's ``hip`` module for the runtime's Python paths: 'device' memory
    is host memory, launches are recorded (with the argument buffer they were given)."""

    def __init__(self):
        self.mem, self.launches, self.streams, self.waits, self.devices_set = {}, [], [], [], []
        self.events, self.destroyed_events, self.count_error = 0, 0, 0
        self.on_launch = None
        self.props = _Props()

    def hipGetDeviceCount(self): return (self.count_error, 0 if self.count_error else 2)
    def hipSetDevice(self, n):
        self.devices_set.append(n)
        return (0,)
    def hipDeviceProp_t(self): return _Props()

    def hipGetDeviceProperties(self, props, n):
        props.__dict__.update(self.props.__dict__)
        return (0,)

    def hipDeviceGetStreamPriorityRange(self): return (0, 0, -1)
    def hipGetErrorString(self, e): return b"fake hip error"

    def hipMalloc(self, n):
        buf = np.zeros(n, np.uint8)
        self.mem[buf.ctypes.data] = buf
        return (0, buf.ctypes.data)

    def hipFree(self, p):
        self.mem.pop(int(p), None)
        return (0,)

    def hipMemcpyHtoD(self, dst, src, n):
        assert isinstance(dst, int) and isinstance(src, int)
        ctypes.memmove(dst, src, n)
        return (0,)

    def hipMemcpyDtoH(self, dst, src, n):
        assert isinstance(dst, int) and isinstance(src, int)
        ctypes.memmove(dst, src, n)
        return (0,)

    def hipMemcpyDtoDAsync(self, dst, src, n, stream):
        ctypes.memmove(dst, src, n)
        return (0,)

    def hipMemset(self, dst, v, n):
        ctypes.memset(dst, v, n)
        return (0,)

    def hipModuleLoadData(self, image):
        assert isinstance(image, bytes) and image
        return (0, "module")

    def hipModuleGetFunction(self, mod, name):
        assert name == b"tk_kernel"
        return (0, "function")

    def hipModuleLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        assert params is None and fn == "function"
        assert isinstance(extra, int)                                # the address of a void *[5]
        cfg = list((ctypes.c_void_p * 5).from_address(extra))
        assert cfg[0] == 1 and cfg[2] == 2 and cfg[4] == 3           # BUFFER_POINTER, BUFFER_SIZE, END
        size = ctypes.c_size_t.from_address(cfg[3]).value
        launch = {"grid": (gx, gy, gz), "block": (bx, by, bz), "stream": stream,
                  "buffer": ctypes.string_at(cfg[1], size)}
        self.launches.append(launch)
        if self.on_launch:
            self.on_launch(launch)
        return (0,)

    def hipEventCreateWithFlags(self, flags):
        assert flags == 2
        self.events += 1
        return (0, 1000 + self.events)

    def hipEventRecord(self, ev, stream): return (0,)
    def hipEventQuery(self, ev): return (0,)
    def hipEventSynchronize(self, ev): return (0,)

    def hipEventDestroy(self, ev):
        self.destroyed_events += 1
        return (0,)

    def hipStreamCreateWithPriority(self, flags, prio):
        self.streams.append((flags, prio))
        return (0, 2000 + len(self.streams))

    def hipStreamWaitEvent(self, s, ev, flags):
        self.waits.append((s, ev))
        return (0,)

    def hipStreamSynchronize(self, s): return (0,)
    def hipStreamDestroy(self, s): return (0,)
    def hipDeviceSynchronize(self): return (0,)


class FakeHiprtc:
    """hip-python's ``hiprtc``: records each compile's options; ``fail`` makes the next
    compile fail with that log."""

    def __init__(self):
        self.compiles, self.fail, self.version = [], None, (6, 4)
        self._progs = {}

    def hiprtcVersion(self): return (0, *self.version)

    def hiprtcCreateProgram(self, src, name, n, headers, names):
        assert isinstance(src, bytes) and name.endswith(b".hip")
        self._progs[len(self._progs) + 1] = {"src": src, "log": b""}
        return (0, len(self._progs))

    def hiprtcCompileProgram(self, prog, n, opts):
        assert n == len(opts) and all(isinstance(o, bytes) for o in opts)
        self.compiles.append([o.decode() for o in opts])
        if self.fail:
            self._progs[prog]["log"] = self.fail.encode()
            return (6,)                  # HIPRTC_ERROR_COMPILATION
        return (0,)

    def hiprtcGetProgramLogSize(self, prog): return (0, len(self._progs[prog]["log"]) + 1)

    def hiprtcGetProgramLog(self, prog, buf):
        log = self._progs[prog]["log"] + b"\0"
        buf[:len(log)] = log
        return (0,)

    def hiprtcGetCodeSize(self, prog): return (0, 16)

    def hiprtcGetCode(self, prog, buf):
        buf[:] = b"\x7fELF fake hsaco"[:16].ljust(16, b"\0")
        return (0,)

    def hiprtcDestroyProgram(self, prog): return (0,)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    hip, rtc = FakeHip(), FakeHiprtc()
    monkeypatch.setattr(rt, "_bindings", lambda: (hip, rtc))
    monkeypatch.setattr(rt, "_DEVICES", {})
    monkeypatch.setenv("TK_CACHE_DIR", str(tmp_path / "cache"))
    rt._init.cache_clear()
    rt.hiprtc_version.cache_clear()
    rt._TLS.dev = None
    for k in list(globals().values()):          # kernel instances of an earlier test's (equal) backend
        if isinstance(k, tk.Kernel):
            k._instances.clear()
    hip.rtc = rtc
    yield hip
    rt._init.cache_clear()
    rt.hiprtc_version.cache_clear()
    rt._TLS.dev = None


def _decode(layout, buf):
    offs, _ = rt.arg_offsets(layout)
    return [np.frombuffer(buf[o:o + np.dtype(rt._NP_PARAM[c]).itemsize], rt._NP_PARAM[c])[0]
            for o, (_, _, c) in zip(offs, layout)]


def test_without_hip_python_the_backend_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "hip", None)            # import hip -> ImportError
    rt._init.cache_clear()
    try:
        ok, why = rt.ROCm.available()
        assert not ok and "hip-python" in why and "docs/rocm.md" in why
        assert tk.backends()["ROCm"] == (False, why)
        with pytest.raises(tk.BackendUnavailable, match="hip-python"):
            tk.ROCm()
        with pytest.raises(tk.BackendUnavailable, match="hip-python"):
            tk.backend("HIP:1")
    finally:
        rt._init.cache_clear()


def test_fake_no_device_and_a_missing_ordinal(fake):
    fake.count_error = 100                                   # hipErrorNoDevice
    ok, why = rt.ROCm.available()
    assert not ok and "no usable AMD GPU" in why
    rt._init.cache_clear()
    fake.count_error = 0
    with pytest.raises(tk.BackendUnavailable, match="ROCm device 5 does not exist: this machine has 2"):
        tk.ROCm(5)


def test_fake_backend_properties_and_dev_strings(fake):
    ok, why = rt.ROCm.available()
    assert ok and "Fake MI250X (gfx90a:sramecc+:xnack-), 2 device(s), hiprtc 6.4" == why
    b = tk.backend("HIP:1")
    assert isinstance(b, tk.ROCm) and b.device == 1 and b == tk.ROCm(device=1) and b != tk.ROCm()
    assert tk.backend("ROCM") == tk.ROCm(0) and tk.backend("AMD:0") == tk.ROCm()
    assert b.arch == "gfx90a:sramecc+:xnack-" and b.wave == 64 and b.max_workgroupsize == 1024
    assert "Fake MI250X" in repr(b)


def test_fake_rdna_device_renders_wave32_collectives(fake):
    fake.props.gcnArchName, fake.props.warpSize = b"gfx1100\0", 32
    b = tk.ROCm()
    x = np.zeros(64, np.float32)
    assert b.wave == 32
    assert "tk_ll >> 5" in collectives(b).source(x, x, x, x, ndrange=64)


def test_fake_memory_and_copies(fake):
    b = tk.ROCm()
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = tk.asarray(h, backend=b)
    assert isinstance(a, rt.ROCmArray) and a.backend == b and a.ptr in fake.mem
    np.testing.assert_array_equal(a.numpy(), h)
    c = tk.zeros((3, 4), np.float32, backend=b)
    tk.copyto(c, a)
    np.testing.assert_array_equal(c.numpy(), h)
    out = np.empty((3, 4), np.float32)
    tk.copyto(out, c)
    np.testing.assert_array_equal(out, h)
    with pytest.raises(AttributeError, match="no host address"):
        a.__array_interface__


def test_fake_launch_packs_the_abi_buffer_and_passes_it_through_extra(fake):
    b = tk.ROCm()
    y, x = tk.asarray(np.ones(1000), backend=b), tk.asarray(np.arange(1000.0), backend=b)
    ev = saxpy(b)(y, 2.5, x, ndrange=1000)
    ev.wait()
    assert isinstance(ev, rt.ROCmEvent) and ev.done()
    (launch,) = fake.launches
    assert launch["grid"] == (4, 1, 1) and launch["block"] == (256, 1, 1) and launch["stream"] is None
    inst = saxpy(b)
    (fn, ir, names, layout), = inst._compiled.values()
    vals = dict(zip([(k, getattr(d, "name", d if not isinstance(d, tuple) else str(d))) for k, d, _ in layout],
                    _decode(layout, launch["buffer"])))
    assert vals[("start", 0)] == 0 and vals[("count", 0)] == 1000 and vals[("step", 0)] == 1
    ptrs = [v for (k, _), v in vals.items() if k == "ptr"]
    assert ptrs == [y.ptr, x.ptr]
    assert [v for (k, _), v in vals.items() if k == "scalar"] == [2.5]
    assert ir.idx32 and [c for k, _, c in layout if k == "count"] == ["int32"]


def test_fake_hiprtc_options_arch_and_fastmath(fake):
    b = tk.ROCm()
    y, x = tk.asarray(np.ones(8), backend=b), tk.asarray(np.ones(8), backend=b)
    saxpy(b)(y, 1.0, x, ndrange=8)

    @tk.kernel(fastmath=True)
    def fm(y, a):
        y[tk.index()] = y[tk.index()] * a + a

    fm(b)(y, 2.0, ndrange=8)
    plain, fast = fake.rtc.compiles
    assert plain[0] == "--offload-arch=gfx90a:sramecc+:xnack-" and "-ffp-contract=off" in plain
    assert "-ffp-contract=fast" in fast and "-ffp-contract=off" not in fast


def test_fake_code_objects_are_cached_on_disk_by_source_version_arch_and_options(fake, monkeypatch):
    src = _src(saxpy, _f32(4), 1.0, _f32(4), ndrange=4)
    n0 = rt.STATS["compiles"]
    image = rt.compile_hip(src, "gfx90a", "saxpy")
    assert rt.compile_hip(src, "gfx90a", "saxpy") == image and rt.STATS["compiles"] == n0 + 1
    p = rt.code_object_path(src, "gfx90a", rt.hiprtc_options("gfx90a"))
    assert p.exists() and p.parent.parent.name == "rocm"
    keys = {p,
            rt.code_object_path(src + " ", "gfx90a", rt.hiprtc_options("gfx90a")),
            rt.code_object_path(src, "gfx942", rt.hiprtc_options("gfx942")),
            rt.code_object_path(src, "gfx90a", rt.hiprtc_options("gfx90a", rt.FASTMATH_HIPRTC_OPTIONS))}
    fake.rtc.version = (7, 0)
    rt.hiprtc_version.cache_clear()
    keys.add(rt.code_object_path(src, "gfx90a", rt.hiprtc_options("gfx90a")))
    assert len(keys) == 5
    fake.rtc.version = (6, 4)
    rt.hiprtc_version.cache_clear()
    p.write_bytes(p.read_bytes()[:-3])                        # a damaged file is compiled again
    assert rt.compile_hip(src, "gfx90a", "saxpy") == image and rt.STATS["compiles"] == n0 + 2


def test_fake_hiprtc_errors_are_compile_errors_with_the_log_and_python_line(fake):
    b = tk.ROCm()
    y, x = tk.asarray(np.ones(8), backend=b), tk.asarray(np.ones(8), backend=b)
    fake.rtc.fail = f"{__file__}:52:5: error: use of undeclared identifier 'boom'\n1 error generated."
    with pytest.raises(tk.CompileError) as e:
        saxpy(b)(y, 1.0, x, ndrange=8)
    msg = str(e.value)
    assert "hiprtc rejected the generated HIP code for kernel 'saxpy' (gfx90a:sramecc+:xnack-)" in msg
    assert "undeclared identifier 'boom'" in msg and e.value.line == 52


def test_fake_host_arrays_and_foreign_streams_are_launch_errors(fake):
    b = tk.ROCm()
    y = tk.asarray(np.ones(8), backend=b)
    with pytest.raises(tk.LaunchError, match="kernel 'saxpy': argument 'x' is a host array; the ROCm backend"):
        saxpy(b)(y, 1.0, np.ones(8), ndrange=8)
    with pytest.raises(tk.LaunchError, match="argument 'x' is on ROCm:1"):
        saxpy(b)(y, 1.0, tk.asarray(np.ones(8), backend=tk.ROCm(1)), ndrange=8)
    with pytest.raises(tk.LaunchError, match="stream belongs to another backend"):
        saxpy(b)(y, 1.0, tk.asarray(np.ones(8), backend=b), ndrange=8, stream=tk.ROCm(1).stream())
    assert not fake.launches


def test_fake_streams_priorities_events_and_waits(fake):
    b = tk.ROCm()
    hi, lo = b.stream(tk.High), b.stream(tk.Low)
    assert fake.streams == [(0, -1), (0, 0)] and hi.hip_priority == -1 and lo.hip_priority == 0
    y, x = tk.asarray(np.ones(8), backend=b), tk.asarray(np.ones(8), backend=b)
    ev = saxpy(b)(y, 1.0, x, ndrange=8, stream=hi)
    assert fake.launches[-1]["stream"] == hi.handle
    lo.wait(ev)
    assert fake.waits == [(lo.handle, ev.handle)]
    lo.synchronize(timeout=1.0)
    b.synchronize(timeout=1.0)
    b.synchronize()
    tk.synchronize(b)
    n = fake.destroyed_events
    del ev
    assert fake.destroyed_events == n + 1


def test_fake_debug_launch_reports_out_of_bounds(fake):
    b = tk.ROCm(debug=True)
    y = tk.asarray(np.ones(8, np.float32), backend=b)
    x = tk.asarray(np.ones(8, np.float32), backend=b)

    def oob(launch):                       # what tk_oob would write: line, array 'y', 1-d, index 9, shape 8
        _, _, names, layout = next(iter(saxpy(b)._compiled.values()))
        err = int(_decode(layout, launch["buffer"])[-1])
        info = np.array([1, saxpy.fn.__code__.co_firstlineno + 3, names.index("y"), 1, 9, 8, 0, 1, 0, 1, 0, 0],
                        np.int64)
        ctypes.memmove(err, info.ctypes.data, info.nbytes)
    fake.on_launch = oob
    with pytest.raises(IndexError, match=r"saxpy.*index 9 is out of bounds for array 'y' with shape \(8,\)"):
        saxpy(b)(y, 1.0, x, ndrange=8)
    assert "tk_oob(tk_err, " in saxpy(b).source(y, 1.0, x, ndrange=8)


def test_fake_dlpack_export_and_zero_copy_import(fake):
    b = tk.ROCm()
    a = tk.asarray(np.arange(6, dtype=np.float32).reshape(2, 3), backend=b)
    assert a.__dlpack_device__() == (10, 0)

    class Foreign:                                            # e.g. a PyTorch-for-ROCm tensor
        def __init__(self, inner):
            self.inner = inner

        def __dlpack_device__(self):
            return self.inner.__dlpack_device__()

        def __dlpack__(self, stream=None):
            return self.inner.__dlpack__(stream=stream)

    f = Foreign(a)
    v = tk.from_dlpack(f)
    assert isinstance(v, rt.ROCmArray) and v.ptr == a.ptr and v.shape == (2, 3) and v.dtype == np.float32
    assert tk.get_backend(f) == b
    w = tk.asarray(Foreign(a), backend=b)
    assert w.ptr == a.ptr
    np.testing.assert_array_equal(v.numpy(), a.numpy())
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))
