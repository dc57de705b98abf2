"""The Metal backend (no Mac needed for any of these but the last group).

* Renderer unit tests (always run): ``kernel.source("Metal", ...)``, the argument struct, no
  ``goto``, the CompileErrors for what Metal lacks (float64, 64-bit atomics), tk.print's records.
* The stub check (skipped without clang++): generated MSL passes ``clang++ -fsyntax-only``
  against the project's stub ``metal_stdlib``; the stub rejects typical wrong output (wrong
  address space, double, an int as barrier flags, goto, unknown attributes, printf); every
  conformance kernel passes (every project test kernel too with ``TK_METAL_COMPILE_ALL=1``).
* The runtime against a fake PyObjC ``Metal`` module (always run): compile options, pipeline
  cache, argument struct bytes and buffer indices, dispatch sizes, streams and events, debug
  error readback.
* Emulated Metal (tests/metal_emu.py; skipped without clang++-15 and C++20 ``<barrier>``): the
  generated MSL compiled for the CPU against an emulating ``metal_stdlib`` (one thread per work
  item) and EXECUTED through the runtime: collectives, early exits, atomics, math helpers,
  ranges, debug mode; with ``TK_METAL_EMULATE=1`` the whole conformance suite. This checks the
  generated code's logic, not Apple's compiler or GPUs.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.codegen import metal as cg
from tinykernels.runtime import metal as rt
from tinykernels.testing.metal_check import MetalStubError, check_msl, find_clang

ROOT = Path(__file__).resolve().parents[1]
needs_clang = pytest.mark.skipif(find_clang() is None, reason="no clang++ for the Metal stub check")


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
def atomics(i32, u32, f32, x: tk.Const):
    i = tk.index()
    tk.atomic_add(i32, 0, 1)
    tk.atomic_max(u32, 0, tk.uint32(i))
    tk.atomic_min(f32, 0, x[i])
    loc = tk.localmem(tk.int32, (4,))
    tk.atomic_cas(loc, 0, 0, 1)


@tk.func
def clipped(v):
    if v > 1.0:
        return 1.0
    for k in range(3):
        if v < -k:
            return -1.0
    return v


@tk.kernel
def early_exits(out, x: tk.Const):
    i = tk.index()
    buf = tk.localmem(tk.float32, (64,))
    buf[tk.index(tk.Local, tk.Linear)] = x[i]
    tk.synchronize()
    if x[i] < 0:
        return
    out[i] = clipped(buf[tk.index(tk.Local, tk.Linear)])


@tk.kernel
def uses_f64(out, x: tk.Const):
    i = tk.index()
    out[i] = tk.float32(tk.float64(x[i]) * 2.0)


@tk.kernel
def i64_atomic(c):
    tk.atomic_add(c, 0, 1)


@tk.kernel
def prints(out):
    tk.print("hello", out[0])


@tk.kernel
def print_values(x: tk.Const, h: tk.Const, big: tk.Const, u: tk.Const):
    i = tk.index()
    tk.print("item", i, x[i], x[i] > 0.5, h[i], big[i], u[i], tk.int8(i - 2))


@tk.kernel
def math_fns(out, x: tk.Const):
    i = tk.index()
    v = x[i]
    out[0, i] = math.log1p(v)
    out[1, i] = math.expm1(v)
    out[2, i] = math.erf(v)
    out[3, i] = math.erfc(v)
    out[4, i] = math.hypot(v, 2.0 * v)


def _f32(n):
    return np.zeros(n, np.float32)


def _src(kern, *args, **kw):
    return rt.metal_source(kern, *args, **kw)


# ----------------------------------------------------------------------------- renderer

def test_kernel_source_accepts_the_metal_dev_string_on_any_machine():
    src = saxpy.source("Metal", _f32(10), 2.0, _f32(10), ndrange=10)
    assert "#include <metal_stdlib>" in src and "kernel void tk_kernel(" in src
    assert "constant tk_args &tk_a [[buffer(0)]]" in src
    assert "device float *a_y [[buffer(1)]]" in src and "const device float *a_x [[buffer(2)]]" in src
    assert "[[thread_position_in_threadgroup]]" in src
    assert "float p_a_in;" in src          # a Python float is float32 on Metal (SPEC section 4)
    assert "double" not in src.replace("/*", "").split("tk_args")[1]


def test_localmem_is_threadgroup_and_barrier_has_mem_flags():
    src = _src(tile_sum, _f32(4), _f32(256), ndrange=256, workgroupsize=64)
    assert "tk_threadgroup float a___l" in src or "tk_threadgroup float " in src
    assert "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);" in src


def test_collectives_use_simd_group_functions():
    i32 = np.zeros(100, np.int32)
    src = _src(collectives, i32, i32, i32, i32, ndrange=100, workgroupsize=48)
    assert "simd_sum((uint32_t)acc)" in src                 # int32 sums wrap: computed in uint
    assert "tk_shfl_up(acc, o)" in src and "[[threads_per_simdgroup]]" in src
    f = _f32(100)
    src = _src(collectives, f, f, f, f, ndrange=100, workgroupsize=64)
    assert "acc = simd_sum(acc);" in src and "simd_prefix_inclusive_sum" not in src  # exclusive add: shuffles


def test_atomics_are_explicit_relaxed_on_atomic_views():
    src = _src(atomics, np.zeros(1, np.int32), np.zeros(1, np.uint32), _f32(1), _f32(8), ndrange=8)
    assert "atomic_fetch_add_explicit((volatile device atomic_int *)&a_i32[" in src
    assert "atomic_fetch_max_explicit((volatile device atomic_uint *)&a_u32[" in src
    assert "tk_atomic_min_f32_g(&a_f32[" in src
    assert "tk_atomic_cas_i32_l((volatile threadgroup atomic_int *)&" in src


def test_no_goto_for_early_returns_and_function_exits():
    src = _src(early_exits, _f32(100), _f32(100), ndrange=100, workgroupsize=64)
    assert "goto" not in src
    assert "do {" in src and "} while (false);" in src and "break;" in src


def test_argument_struct_fields_follow_the_signature():
    k = saxpy(rt.MetalTarget())
    args = (_f32(10), 2.0, _f32(10))
    norm, geom, ndim, ranges, total, wg = k._prepare(args, 10, None, k._normalize_for_source)
    ir = k._ir(norm, geom, ndim, ranges, wg)
    fields = cg.arg_fields(ir)
    assert [f[0] for f in fields] == ["tk_s0", "tk_n0", "tk_st0", "a_y_sh0", "a_y_st0", "p_a_in",
                                      "a_x_sh0", "a_x_st0"]
    data = rt.pack_args(fields, geom, {"y": norm[0], "a": 2.0, "x": norm[2]})
    # C layout: long, int (+4 pad), long, int, int, float, int, int (+4 pad)
    assert len(data) == 48
    assert np.frombuffer(data[8:12], np.int32)[0] == 10 and np.frombuffer(data[32:36], np.float32)[0] == 2.0


@pytest.mark.parametrize("kern, args, what", [
    (uses_f64, (_f32(4), _f32(4)), "float64"),
    (saxpy, (np.zeros(4), 2.0, np.zeros(4)), "float64"),
    (i64_atomic, (np.zeros(1, np.int64),), "no atomics on int64"),
])
def test_what_metal_lacks_is_a_compile_error_at_the_line(kern, args, what):
    with pytest.raises(tk.CompileError, match=what) as e:
        _src(kern, *args, ndrange=4)
    if kern is not saxpy:
        assert e.value.line is not None and "test_metal.py" in str(e.value)


def test_print_appends_records_to_the_print_buffer():
    """tk.print on Metal: no printf, a record in the ``tk_print`` buffer bound after the arrays
    (and after debug mode's error buffer): word 0 reserved atomically, then site and values."""
    src = _src(prints, _f32(1), ndrange=4)
    assert "printf" not in src and "device uint *tk_print [[buffer(2)]]" in src
    assert "atomic_fetch_add_explicit((volatile device atomic_uint *)tk_print, 2u" in src
    assert "tk_print[tk_pr" in src and "as_type<uint>((float)(" in src
    src = prints(rt.MetalTarget(debug=True)).source(_f32(1), ndrange=4)
    assert "device long *tk_err [[buffer(2)]]" in src and "device uint *tk_print [[buffer(3)]]" in src


def test_metal_target_says_it_has_no_float64():
    assert not rt.MetalTarget().supports(np.float64) and rt.MetalTarget().supports(np.int64)
    assert not rt.MetalTarget().supports_atomic(np.int64)


def test_backend_listing_explains_why_metal_is_unavailable():
    ok, why = tk.backends()["Metal"]
    if sys.platform != "darwin":
        assert not ok and "macOS" in why
    with pytest.raises(tk.BackendUnavailable):
        if not ok:
            tk.backend("METAL")
        else:
            raise tk.BackendUnavailable("available here")


# ----------------------------------------------------------------------------- stub check

@needs_clang
def test_generated_sources_pass_the_stub_check():
    i32 = np.zeros(100, np.int32)
    srcs = [_src(saxpy, _f32(10), 2.0, _f32(10), ndrange=10),
            _src(collectives, i32, i32, i32, i32, ndrange=100, workgroupsize=48),
            _src(collectives, *[np.zeros(100, np.float16)] * 4, ndrange=100, workgroupsize=1024),
            _src(collectives, *[np.zeros(100, np.uint8)] * 4, ndrange=100, workgroupsize=7),
            _src(collectives, *[np.zeros(100, np.int64)] * 4, ndrange=100, workgroupsize=33),
            _src(atomics, np.zeros(1, np.int32), np.zeros(1, np.uint32), _f32(1), _f32(8), ndrange=8),
            _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=3 << 30, debug=True),
            _src(tile_sum, _f32(4), _f32(256), ndrange=range(0, 256), workgroupsize=64),
            _src(early_exits, _f32(100), _f32(100), ndrange=(range(1, 100, 3)), workgroupsize=64),
            _src(math_fns, np.zeros((5, 10), np.float32), _f32(10), ndrange=10),
            _src(print_values, _f32(8), np.zeros(8, np.float16), np.zeros(8, np.int64), np.zeros(8, np.uint64),
                 ndrange=8, debug=True)]
    for k, s in enumerate(srcs):
        check_msl(s, f"k{k}")


def _atomics_src():
    return _src(atomics, np.zeros(1, np.int32), np.zeros(1, np.uint32), _f32(1), _f32(8), ndrange=8)


def _exits_src():
    return _src(early_exits, _f32(100), _f32(100), ndrange=100, workgroupsize=64)


_END = "} while (false);"
#: mistakes a renderer could make, as (source, text to replace (its last occurrence), replacement,
#: the diagnostic clang must give)
_WRONG = {
    "threadgroup pointer to a device parameter": (_atomics_src, "tk_atomic_cas_i32_l(", "tk_atomic_cas_i32_g(",
                                                  "cannot pass pointer to address space '3' as a pointer to "
                                                  "address space '1'"),
    "device pointer to a threadgroup parameter": (_atomics_src, "tk_atomic_min_f32_g(", "tk_atomic_min_f32_l(",
                                                  "cannot pass pointer to address space '1' as a pointer to "
                                                  "address space '3'"),
    "device pointer as a thread pointer": (_exits_src, _END, _END + " { thread float *p = &a_out[0]; (void)p; }",
                                           "cannot initialize a variable of type 'float \\*' with an rvalue of "
                                           "type 'device float \\*'"),
    "double": (_exits_src, "float v_", "double v_", "unknown type name 'tk_metal_has_no_double'"),
    "an int as barrier flags": (_exits_src, "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);",
                                "threadgroup_barrier(3);", "no matching function for call to 'threadgroup_barrier'"),
    "goto": (_exits_src, _END, _END + " goto tk_end; tk_end: ;", "unknown type name 'tk_metal_has_no_goto'"),
    "unknown attribute": (_exits_src, "[[thread_position_in_threadgroup]]", "[[thread_position_in_thread_group]]",
                          "unknown attribute 'thread_position_in_thread_group'"),
    "printf": (_exits_src, _END, _END + ' printf("x");', "use of undeclared identifier 'printf'"),
    "math on an int": (_exits_src, _END, _END + " (void)exp(1);", "call to 'exp' is ambiguous"),
}


@needs_clang
@pytest.mark.parametrize("what", sorted(_WRONG))
def test_the_stub_rejects_typical_wrong_output(what):
    make, old, new, diagnostic = _WRONG[what]
    src = make()
    check_msl(src)                                   # the right source passes
    k = src.rindex(old)
    bad = src[:k] + new + src[k + len(old):]
    with pytest.raises(MetalStubError, match=diagnostic):
        check_msl(bad, what.replace(" ", "_"))


def test_renderer_never_writes_what_the_stub_cannot_reject():
    """MSL has no ``long long`` and no ``double``; the stub rejects double, and long long is
    checked here on the text (clang accepts it in C++17)."""
    for src in (_atomics_src(), _exits_src(), _src(saxpy, _f32(10), 2.0, _f32(10), ndrange=3 << 30, debug=True)):
        assert "long long" not in src and "goto" not in src and "printf" not in src


CAPTURE = r'''
import importlib, json, sys
import numpy as np
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
out, rootdir, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
rc = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", rootdir, *paths])
K.KernelInstance._ir = _orig
from tinykernels.runtime.metal import MetalTarget
from tinykernels.testing.metal_check import check_msl

def narrow(a):
    """float64 -> float32: what a caller passes on a backend without float64."""
    if isinstance(a, np.ndarray) and a.dtype == np.float64:
        return a.astype(np.float32)
    if isinstance(a, np.float64):
        return np.float32(a)
    return a

def render(kern, args, geom, ndim, ranges, wg, debug):
    inst = kern(MetalTarget(debug))
    ir = inst._ir(args, geom, ndim, ranges, wg)
    return inst._render(ir, ranges)[0]

seen, results, refused = set(), [], 0
for kern, args, geom, ndim, ranges, wg, debug in list(CAPS):
    rec = {"kernel": kern.name, "ndim": ndim, "wg": list(wg), "debug": debug}
    src = None
    for a in (args, tuple(narrow(x) for x in args)):
        try:
            src = render(kern, a, geom, ndim, ranges, wg, debug)
            break
        except tk.CompileError as e:
            err = str(e)
    if src is None:
        cpu = kern(tk.CPU(debug=debug))
        try:
            cpu._render(cpu._ir(args, geom, ndim, ranges, wg), ranges)
        except tk.CompileError:
            continue                  # the CPU refuses it too: an expected error
        if "Metal has no" in err or "not available on Metal" in err or "Metal allows 31" in err:
            refused += 1              # what Metal lacks (float64 in the kernel, 64-bit atomics, print, > 30 arrays)
            continue
        rec["error"] = "render: " + err
        results.append(rec)
        continue
    if src in seen:
        continue
    seen.add(src)
    try:
        check_msl(src, kern.name)
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    results.append(rec)
json.dump({"pytest_rc": int(rc), "captured": len(CAPS), "refused": refused, "results": results}, open(out, "w"))
'''


def _capture_and_check(tmp_path, rootdir, paths):
    out = tmp_path / "checked.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TK_CACHE_DIR=str(tmp_path / "cache"), TK_TEST_BACKENDS="CPU", DEV="CPU")
    env.pop("TK_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", CAPTURE, str(out), str(rootdir), *map(str, paths)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=3600)
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), r


@needs_clang
def test_every_conformance_kernel_passes_the_metal_stub_check(tmp_path):
    conf = _conformance_dir()
    if conf is None:
        pytest.skip("the conformance suite (../shared/conformance) is not beside this checkout")
    data, r = _capture_and_check(tmp_path, conf, [conf])
    assert data["pytest_rc"] == 0, r.stdout[-3000:]
    results = data["results"]
    assert len(results) >= 50, f"only {len(results)} specializations captured"
    bad = [x for x in results if "error" in x]
    assert not bad, "\n\n".join(f"{x['kernel']}: {x['error'][:3000]}" for x in bad[:5])
    print(f"\n{len(results)} distinct conformance kernels pass the Metal stub check "
          f"({data['refused']} refused by design: float64 or 64-bit atomics in the kernel)")


@needs_clang
@pytest.mark.skipif(not os.environ.get("TK_METAL_COMPILE_ALL"), reason="set TK_METAL_COMPILE_ALL=1 (minutes)")
def test_every_project_test_kernel_passes_the_metal_stub_check(tmp_path):
    tests = [p for p in sorted((ROOT / "tests").glob("test_*.py")) if p.name not in ("test_metal.py", "test_cuda.py")]
    data, r = _capture_and_check(tmp_path, ROOT, tests)
    assert len(data["results"]) > 100, r.stdout[-3000:]
    bad = [x for x in data["results"] if "error" in x]
    kinds = sorted({f"{x['kernel']}: {x['error'][:300]}" for x in bad})
    assert not bad, f"{len(bad)} failed, {len(kinds)} distinct:\n" + "\n\n".join(kinds[:40])
    print(f"\n{len(data['results'])} distinct kernels pass the Metal stub check ({data['refused']} refused)")


# ----------------------------------------------------------------------------- fake Metal

from metal_emu import FakeMetal  # noqa: E402 - tests/metal_emu.py: the fake (and emulating) Metal module


@pytest.fixture
def fake(monkeypatch):
    m = FakeMetal()
    monkeypatch.setitem(sys.modules, "Metal", m)
    monkeypatch.setattr(rt, "_DEVICES", {})
    for k in (saxpy, uses_f64):        # equal backends share kernel instances: none from another fake
        k._instances.clear()
    yield m
    for k in (saxpy, uses_f64):
        k._instances.clear()


def _encoder_calls(cb, name):
    return [a for n, a in cb.encoders[0].calls if n == name]


def test_fake_backend_is_available_and_arrays_share_host_memory(fake):
    ok, why = rt.Metal.available()
    assert ok and "Fake M3" in why
    m = rt.Metal()
    assert not m.supports(np.float64) and m.supports(np.float16) and m.max_workgroupsize == 1024
    x = tk.asarray(np.arange(5, dtype=np.float32), backend=m)
    assert isinstance(x, rt.MetalArray) and x.numpy().tolist() == [0, 1, 2, 3, 4]
    x.host_view()[2] = 7                                   # zero-copy: the buffer's own bytes
    assert x.numpy()[2] == 7 and x.buffer.array(np.float32, 5)[2] == 7
    with pytest.raises(TypeError, match="float64"):
        tk.asarray(np.zeros(3), backend=m)
    y = tk.zeros(5, np.float32, backend=m)
    tk.copyto(y, x)                                        # device to device: a blit
    assert fake.committed[-1].encoders[0].calls[0][0] == "copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_"
    tk.copyto(x, x)                                        # onto itself: no blit (Metal forbids the overlap)
    assert not fake.committed[-1].encoders and x.numpy().tolist() == [0, 1, 7, 3, 4]


def test_fake_launch_compiles_once_without_fast_math_and_packs_arguments(fake):
    m = rt.Metal()
    y = tk.asarray(np.ones(1000, np.float32), backend=m)
    x = tk.asarray(np.arange(1000, dtype=np.float32), backend=m)

    def run(cb):                                           # emulate saxpy on the bound buffers
        enc = cb.encoders[0]
        bufs = {a[2]: a[0] for n, a in enc.calls if n == "setBuffer_offset_atIndex_"}
        data = _encoder_calls(cb, "setBytes_length_atIndex_")[0][0]
        a = np.frombuffer(data[32:36], np.float32)[0]
        yy, xx = bufs[1].array(np.float32, 1000), bufs[2].array(np.float32, 1000)
        yy[:] = a * xx + yy
    fake.on_commit = run
    ev = saxpy(m)(y, 2.0, x, ndrange=1000)
    assert not ev.done()
    ev.wait()
    assert ev.done()
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(1000, dtype=np.float32) + 1)
    saxpy(m)(y, 3.0, x, ndrange=1000)
    assert len(fake.compiles) == 1                         # the pipeline is cached
    src, opts = fake.compiles[0]
    assert opts.fast_math is False and opts.math_mode == FakeMetal.MTLMathModeSafe
    cb = fake.committed[-1]
    (data, n, idx), = _encoder_calls(cb, "setBytes_length_atIndex_")
    assert idx == 0 and n == len(data) == 48
    assert [a[1:] for a in _encoder_calls(cb, "setBuffer_offset_atIndex_")] == [(0, 1), (0, 2)]
    assert _encoder_calls(cb, "dispatchThreadgroups_threadsPerThreadgroup_") == [((4, 1, 1), (256, 1, 1))]
    assert np.frombuffer(data[32:36], np.float32)[0] == 3.0


def test_fake_2d_dispatch_puts_the_last_dimension_on_x(fake):
    m = rt.Metal()
    fake.auto_complete = True
    out = tk.zeros((10, 300), np.float32, backend=m)
    a = tk.zeros((10, 300), np.float32, backend=m)

    @tk.kernel
    def copy2d(out, a: tk.Const):
        i, j = tk.index(tk.Global, tk.Cartesian)
        out[i, j] = a[i, j]
    copy2d(m)(out, a, ndrange=(10, 300), workgroupsize=(2, 64))
    assert _encoder_calls(fake.committed[-1], "dispatchThreadgroups_threadsPerThreadgroup_") == \
        [((5, 5, 1), (64, 2, 1))]


def test_fake_streams_are_queues_and_wait_encodes_the_event(fake):
    m = rt.Metal()
    y, x = tk.zeros(10, np.float32, backend=m), tk.zeros(10, np.float32, backend=m)
    s1, s2 = m.stream(tk.High), m.stream(tk.Low)
    ev = saxpy(m)(y, 2.0, x, ndrange=10, stream=s1)
    cb1 = fake.committed[-1]
    assert cb1.queue is s1._s.queue and cb1.signals == [(s1._s.event, 1)]
    s2.wait(ev)                                            # pending: the next command buffer waits
    saxpy(m)(x, 1.0, y, ndrange=10, stream=s2)
    cb2 = fake.committed[-1]
    assert cb2.queue is s2._s.queue and cb2.waits == [(s1._s.event, 1)]
    tk.synchronize(m)
    assert ev.done() and cb2.status() == 4


def test_fake_synchronize_waits_for_a_dropped_stream(fake):
    # audit19: a stream the program dropped was forgotten with its queue, so tk.synchronize(m)
    # returned while the stream's command buffer still ran (OpenCL had the same bug).
    import gc
    m = rt.Metal()
    y, x = tk.zeros(10, np.float32, backend=m), tk.zeros(10, np.float32, backend=m)
    s = m.stream(tk.Low)
    saxpy(m)(y, 2.0, x, ndrange=10, stream=s)
    cb = fake.committed[-1]
    del s
    gc.collect()
    assert cb.status() == 2                                # committed, not completed
    tk.synchronize(m)
    assert cb.status() == 4
    assert len(m._dev.orphans) == 0                        # finished: forgotten


def test_fake_debug_launch_reports_out_of_bounds(fake):
    m = rt.Metal(debug=True)

    def oob(cb):                                           # the kernel's tk_oob report, by hand
        bufs = {a[2]: a[0] for n, a in cb.encoders[0].calls if n == "setBuffer_offset_atIndex_"}
        err = bufs[max(bufs)].array(np.int64, 12)
        err[:6] = [1, 0, 0, 1, 12, 10]                     # site 0 of the kernel's IR: its one line
    fake.on_commit = oob
    y, x = tk.zeros(10, np.float32, backend=m), tk.zeros(10, np.float32, backend=m)
    line = saxpy.fn.__code__.co_firstlineno + 3               # y[i] = a * x[i] + y[i]
    with pytest.raises(IndexError, match=rf"saxpy' at .*test_metal.py:{line}: index 12 is out of bounds for array "
                                         r"'[xy]' with shape \(10,\)"):
        saxpy(m)(y, 2.0, x, ndrange=10)


def test_fake_print_launch_formats_the_records_after_the_kernel(fake, capsys):
    """The runtime binds a zeroed print buffer after the arrays, waits for the kernel and
    formats its records (written here by hand, as the kernel would) on sys.stdout."""
    from tinykernels.codegen.printrecords import PRINT_WORDS
    m = rt.Metal()

    def records(cb):
        bufs = {a[2]: a[0] for n, a in cb.encoders[0].calls if n == "setBuffer_offset_atIndex_"}
        assert sorted(bufs) == [1, 2]                      # out, then the print buffer
        words = bufs[2].array(np.uint32, PRINT_WORDS)
        assert not words.any()                             # zeroed: an unwritten record reads as its end
        words[:7] = [6, 1, np.float32(1.5).view(np.uint32), 1, np.float32(-2.0).view(np.uint32), 0, 0]
    fake.on_commit = records
    prints._instances.clear()
    prints(m)(tk.zeros(1, np.float32, backend=m), ndrange=4)
    assert capsys.readouterr().out == "hello 1.5\nhello -2\n"
    prints._instances.clear()


def test_fake_metal_compile_errors_and_float64_kernels(fake, monkeypatch):
    m = rt.Metal()
    y = tk.zeros(4, np.float32, backend=m)
    with pytest.raises(tk.CompileError, match="float64"):
        uses_f64(m)(y, y, ndrange=4)
    monkeypatch.setattr(cg, "render_metal", lambda ir, plan, ranges: ("garbage", [], []))
    with pytest.raises(tk.CompileError, match="(?s)Metal compiler rejected.*no kernel"):
        saxpy(m)(y, 2.0, tk.zeros(4, np.float32, backend=m), ndrange=3)


def test_module_imports_without_pyobjc():
    code = ("import sys; sys.modules['Metal'] = None\n"
            "import tinykernels as tk\n"
            "from tinykernels.runtime import metal as rt\n"
            "print(rt.Metal.available())\n"
            "print(tk.Metal.__name__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert r.returncode == 0, r.stderr
    assert "(False," in r.stdout and "Metal" in r.stdout


# ----------------------------------------------------------------------------- emulated Metal

def _emulation_ok() -> bool:
    if find_clang() is None or not Path("/usr/bin/clang++-15").exists():
        return False
    import metal_emu
    try:
        metal_emu.build("struct tk_args { int x; };\nkernel void tk_kernel(constant tk_args &tk_a [[buffer(0)]]) {\n}\n"
                        .replace("struct", "#include <metal_stdlib>\nusing namespace metal;\nstruct", 1))
        return True
    except Exception:  # noqa: BLE001 - no C++20 <barrier> here
        return False


needs_emulation = pytest.mark.skipif(not _emulation_ok(), reason="no clang++-15 with C++20 <barrier> to emulate Metal")


@tk.kernel
def strided2d(out, a: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = a[i, j] * tk.float32(i * 100 + j) + tk.float32(tk.index())


@pytest.fixture
def emu(monkeypatch):
    import metal_emu
    m = metal_emu.EmulatedMetal()
    monkeypatch.setitem(sys.modules, "Metal", m)
    monkeypatch.setattr(rt, "_DEVICES", {})
    kernels = (saxpy, collectives, early_exits, atomics, math_fns, tile_sum, strided2d)
    for k in kernels:
        k._instances.clear()
    yield rt.Metal()
    for k in kernels:
        k._instances.clear()


def _on(m, a):
    return tk.asarray(np.ascontiguousarray(a), backend=m)


@needs_emulation
@pytest.mark.parametrize("dtype, wg", [(np.int32, 48), (np.float32, 64), (np.uint8, 7), (np.int64, 33),
                                       (np.float16, 100), (np.int32, 1), (np.uint32, 256)])
def test_emulated_collectives_with_partial_groups(emu, dtype, wg):
    """The SIMD-group collectives (native and by shuffles) against NumPy, per workgroup, with
    a partial last group and a partial last SIMD-group."""
    n = 100
    xs = (np.arange(n) * 5 % 11).astype(dtype)
    r, inc, ex = (tk.zeros(n, dtype, backend=emu) for _ in range(3))
    collectives(emu)(r, inc, ex, _on(emu, xs), ndrange=n, workgroupsize=wg)
    for g in range(0, n, wg):
        seg = xs[g:g + wg]
        acc = np.add.accumulate(seg, dtype=dtype)
        np.testing.assert_array_equal(r.numpy()[g:g + wg], np.full(len(seg), acc[-1]))
        np.testing.assert_array_equal(inc.numpy()[g:g + wg], np.maximum.accumulate(seg))
        np.testing.assert_array_equal(ex.numpy()[g:g + wg], np.concatenate([[0], acc[:-1]]).astype(dtype))


@needs_emulation
def test_emulated_early_exits_without_goto(emu):
    xs = np.linspace(-3, 3, 100).astype(np.float32)
    o = tk.full(100, 5.0, np.float32, backend=emu)
    early_exits(emu)(o, _on(emu, xs), ndrange=100, workgroupsize=64)
    want = np.where(xs < 0, 5.0, np.minimum(xs, 1.0))
    np.testing.assert_array_equal(o.numpy(), want.astype(np.float32))


@needs_emulation
def test_emulated_atomics_in_device_and_threadgroup_memory(emu):
    i32, u32, f32 = tk.zeros(1, np.int32, backend=emu), tk.zeros(1, np.uint32, backend=emu), \
        tk.full(1, 100.0, np.float32, backend=emu)
    x = np.linspace(7, -3, 300).astype(np.float32)
    atomics(emu)(i32, u32, f32, _on(emu, x), ndrange=300, workgroupsize=64)
    assert i32.numpy()[0] == 300 and u32.numpy()[0] == 299 and f32.numpy()[0] == np.float32(-3)


@needs_emulation
def test_emulated_math_helpers_match_numpy(emu):
    """The helpers for what MSL lacks (log1p, expm1, erf, erfc, hypot) against the float64 results,
    tiny, huge and special arguments included, within the fuzzer's ulp tolerances for these
    functions (INEXACT_ULPS: 4 ulp, 16 for erf/erfc; here with the emulation's exp and log)."""
    from math import erf, erfc
    xs = np.concatenate([np.linspace(-4, 4, 81), [1e-7, -1e-6, 3e-4, -0.999, 30.0, 1e20, 1e-30, np.inf, -np.inf,
                                                  np.nan, 0.0]]).astype(np.float32)
    o = tk.zeros((5, len(xs)), np.float32, backend=emu)
    math_fns(emu)(o, _on(emu, xs), ndrange=len(xs))
    x = xs.astype(np.float64)
    with np.errstate(all="ignore"):
        want = [np.log1p(x), np.expm1(x), np.vectorize(erf)(x), np.vectorize(erfc)(x), np.hypot(x, 2 * x)]
    for k, (w, tol) in enumerate(zip(want, (4, 4, 16, 16, 4))):
        w32 = w.astype(np.float32)
        got = o.numpy()[k]
        same = (got == w32) | (np.isnan(got) & np.isnan(w32))
        with np.errstate(invalid="ignore"):
            ulp = np.abs(got.astype(np.float64) - w) / np.spacing(np.abs(w32)).astype(np.float64)
        bad = ~same & ~(ulp <= tol)
        assert not bad.any(), (k, xs[bad], got[bad], w32[bad], ulp[bad])


@needs_emulation
def test_emulated_ranges_tiles_and_debug_mode(emu):
    x = np.arange(256, dtype=np.float32)
    out = tk.zeros(4, np.float32, backend=emu)
    tile_sum(emu)(out, _on(emu, x), ndrange=256, workgroupsize=64)
    np.testing.assert_array_equal(out.numpy(), x.reshape(4, 64).sum(1))
    for ndrange in ((range(1, 10, 3), range(2, 30, 5)), (range(9, 0, -2), 7), (3, range(4, 30))):
        want = np.zeros((10, 30), np.float32)
        strided2d(tk.CPU())(want, np.ones((10, 30), np.float32), ndrange=ndrange)
        got = tk.zeros((10, 30), np.float32, backend=emu)
        strided2d(emu)(got, _on(emu, np.ones((10, 30), np.float32)), ndrange=ndrange, workgroupsize=(2, 8))
        np.testing.assert_array_equal(got.numpy(), want)
    dbg = rt.Metal(debug=True)
    saxpy._instances.clear()
    with pytest.raises(IndexError, match="out of bounds for array 'x' with shape \\(10,\\)"):
        saxpy(dbg)(tk.zeros(12, np.float32, backend=dbg), 2.0, tk.zeros(10, np.float32, backend=dbg), ndrange=12)


@needs_emulation
def test_emulated_print_writes_what_the_cpu_prints(emu, capfd):
    """tk.print executed in the generated MSL: every work item's line, with floats, bools,
    float16, int64, uint64 and int8 values, as the CPU backend's printf writes them (the
    order of lines differs between the two: compared sorted); in debug mode too."""
    n = 40
    x = np.linspace(-1, 1, n, dtype=np.float32)
    h = (x * 3).astype(np.float16)
    big = (np.arange(n, dtype=np.int64) - 20) * (1 << 40)
    u = np.arange(n, dtype=np.uint64) * np.uint64(0x0123456789ABCDEF)
    print_values(tk.CPU())(x, h, big, u, ndrange=n)
    want = sorted(capfd.readouterr().out.splitlines())
    assert len(want) == n
    print_values._instances.clear()
    for m in (emu, rt.Metal(debug=True)):
        print_values(m)(_on(m, x), _on(m, h), _on(m, big), _on(m, u), ndrange=n, workgroupsize=16)
        assert sorted(capfd.readouterr().out.splitlines()) == want
    print_values._instances.clear()


@needs_emulation
@pytest.mark.skipif(not os.environ.get("TK_METAL_EMULATE"), reason="set TK_METAL_EMULATE=1 (about 5 minutes)")
@pytest.mark.skipif(_conformance_dir() is None, reason="no conformance suite beside this checkout")
def test_conformance_suite_on_emulated_metal(tmp_path):
    """The whole conformance suite with TK_TEST_BACKENDS=METAL on the emulating Metal module:
    the generated MSL, executed on the CPU, and the runtime's Python side, end to end."""
    env = dict(os.environ, TK_TEST_BACKENDS="METAL", TK_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "metal_emu", "-q", "-p", "no:cacheprovider", "-rs",
                        str(_conformance_dir())], capture_output=True, text=True, env=env, timeout=3000)
    assert r.returncode == 0, r.stdout[-5000:]
