"""The compiled-kernel caches: in memory (no compiler work on a second launch), on disk
(a second process loads without compiling), and safe under concurrent compilation."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.runtime import compiler

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import tinykernels as tk
    from tinykernels.runtime.compiler import STATS

    @tk.kernel
    def scaled_copy(y, x: tk.Const, s):
        i = tk.index()
        y[i] = x[i] * s + SHIFT

    SHIFT = float(sys.argv[1])
    x = np.arange(100, dtype=np.float64)
    y = np.zeros(100)
    t = time.perf_counter()
    scaled_copy(tk.CPU())(y, x, 2.0, ndrange=100)
    dt = time.perf_counter() - t
    assert np.array_equal(y, x * 2 + SHIFT), y
    print(json.dumps({"stats": STATS, "seconds": dt}))
""")


def _child(tmp_path, shift, cache):
    script = tmp_path / "child.py"
    if not script.exists():        # written once: children started together must not see it truncated
        script.write_text(CHILD)
    env = dict(os.environ, TK_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen([sys.executable, str(script), str(shift)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(p):
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_second_process_loads_from_disk_without_compiling(tmp_path):
    cache = tmp_path / "cache"
    first = _result(_child(tmp_path, 1.5, cache))
    assert first["stats"]["compiles"] == 1
    second = _result(_child(tmp_path, 1.5, cache))
    assert second["stats"]["compiles"] == 0 and second["stats"]["disk_hits"] == 1
    # a different global constant is a different kernel, never a stale cache hit
    third = _result(_child(tmp_path, 2.5, cache))
    assert third["stats"]["compiles"] == 1


def test_concurrent_processes_compiling_the_same_kernel(tmp_path):
    cache = tmp_path / "cache"
    procs = [_child(tmp_path, 7.0, cache) for _ in range(4)]
    results = [_result(p) for p in procs]           # every child checked its own numbers
    assert sum(r["stats"]["compiles"] + r["stats"]["disk_hits"] for r in results) == 4
    libs = list((cache / "kernels").rglob("*.so"))
    assert len(libs) == 1                           # one complete library, no leftovers
    assert not [p for p in (cache / "kernels").rglob(".*") if p.is_file()]
    again = _result(_child(tmp_path, 7.0, cache))
    assert again["stats"]["compiles"] == 0


def test_second_launch_does_no_compiler_work():
    @tk.kernel
    def inc(a):
        a[tk.index()] += 1
    a = np.zeros(10, np.int32)
    k = inc(tk.CPU())
    k(a, ndrange=10)
    before = dict(compiler.STATS)
    for _ in range(5):
        k(a, ndrange=10)
    assert compiler.STATS == before
    assert (a == 6).all()


def test_specializations_are_keyed_by_dtype_layout_and_constexpr():
    @tk.kernel
    def fill(a, v: tk.constexpr):
        a[tk.index()] = v
    k = fill(tk.CPU())
    for dt in (np.float32, np.int64, np.uint8):
        a = np.zeros(6, dt)
        k(a, 3, ndrange=6)
        assert (a == 3).all() and a.dtype == dt
        k(a, 5, ndrange=6)                      # a new constexpr value is a new kernel
        assert (a == 5).all()
    strided = np.zeros(12, np.float32)[::2]
    k(strided, 4, ndrange=6)
    assert (strided == 4).all()


def test_compiler_failure_is_a_compile_error(tmp_path, monkeypatch):
    src = "#line 3 \"user.py\"\nvoid tk_kernel(void) { this is not C; }\n"
    try:
        compiler.compile_library(src, "broken")
    except tk.CompileError as e:
        msg = str(e)
        assert "user.py" in msg and "broken" in msg and "this is not C" in msg
    else:
        raise AssertionError("expected a CompileError")


def test_cache_writes_are_atomic(tmp_path):
    target = tmp_path / "x" / "y.json"
    compiler._atomic_write(target, json.dumps({"a": 1}).encode())
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["y.json"]


def test_threads_without_openmp(tmp_path):
    """TK_OPENMP=0 compiles without OpenMP: the pthread fallback (Apple clang) must give the same
    results, for flat kernels and for kernels with barriers (1-D and 2-D grids: the pool runs
    2-D grids in the blocked group order)."""
    code = textwrap.dedent("""
        import numpy as np, tinykernels as tk
        from tinykernels.runtime.compiler import toolchain
        assert not toolchain().openmp and "-fopenmp" not in toolchain().flags
        @tk.kernel
        def saxpy(y, a, x: tk.Const):
            i = tk.index()
            y[i] = a * x[i] + y[i]
        @tk.kernel
        def block_sum(out, x: tk.Const):
            lid = tk.index(tk.Local, tk.Linear)
            t = tk.localmem(tk.float64, (64,))
            t[lid] = x[tk.index()]
            tk.synchronize()
            if lid == 0:
                s = 0.0
                for k in range(64):
                    s += t[k]
                out[tk.index(tk.Group, tk.Linear)] = s
        cpu = tk.CPU(threads=3)
        x = np.arange(100000, dtype=np.float64)
        y = np.ones_like(x)
        saxpy(cpu)(y, 2.0, x, ndrange=x.size)
        assert np.array_equal(y, 2 * x + 1)
        out = np.zeros(64 * 40 // 64)
        block_sum(cpu, 64)(out, x[:64 * 40], ndrange=64 * 40)
        assert np.array_equal(out, x[:64 * 40].reshape(-1, 64).sum(1))
        @tk.kernel
        def group_ids(out, count):
            p = tk.index(tk.Global, tk.Cartesian)
            g = tk.index(tk.Group, tk.Linear)
            tk.synchronize()
            out[p] = g
            tk.atomic_add(count, g, 1)
        nd, wg = (75, 131), (4, 8)      # 2-D grid, >= 4096 items: threads in blocks of groups
        ids, count = np.zeros(nd, np.int64), np.zeros(19 * 17, np.int32)
        group_ids(cpu, wg)(ids, count, ndrange=nd)
        i, j = np.indices(nd)
        assert np.array_equal(ids, (i // 4) * 17 + j // 8) and np.array_equal(count, np.bincount(ids.ravel()))
        print("ok")
    """)
    script = tmp_path / "noomp.py"
    script.write_text(code)
    env = dict(os.environ, TK_OPENMP="0", TK_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


# --- a damaged cache is repaired, not fatal (issue 10, item 9) --------------------------------

def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:100])                  # "file too short" for the loader
    elif how == "half":
        path.write_bytes(data[:len(data) // 2])       # mapped beyond the end: SIGBUS when loaded
    elif how == "corrupt":
        mid = len(data) // 2
        path.write_bytes(data[:mid] + bytes(b ^ 0xFF for b in data[mid:mid + 64]) + data[mid + 64:])
    elif how == "empty":
        path.write_bytes(b"")


@pytest.mark.parametrize("how", ["truncated", "half", "corrupt", "empty"])
def test_damaged_cached_library_is_rebuilt_by_the_next_process(tmp_path, how):
    cache = tmp_path / "cache"
    assert _result(_child(tmp_path, 3.0, cache))["stats"]["compiles"] == 1
    libs = list((cache / "kernels").rglob("*.so"))
    assert len(libs) == 1
    _damage(libs[0], how)
    again = _result(_child(tmp_path, 3.0, cache))         # the child checks its numbers
    assert again["stats"]["compiles"] == 1 and again["stats"]["damaged"] == 1
    third = _result(_child(tmp_path, 3.0, cache))         # repaired for good
    assert third["stats"]["compiles"] == 0 and third["stats"]["disk_hits"] == 1


@pytest.mark.parametrize("how", ["truncated", "half", "corrupt"])
def test_damaged_launcher_extension_is_rebuilt(tmp_path, how):
    cache = tmp_path / "cache"
    code = ("import tinykernels.runtime.launcher as L; m = L.get(); "
            "print(type(m).__name__)")
    env = dict(os.environ, TK_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT / "src"))
    env.pop("TK_PY_LAUNCHER", None)

    def run():
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()
    first = run()
    exts = list((cache / "launch").glob("_tklaunch_*"))
    if first == "PyLauncher" or not exts:
        pytest.skip("the launcher extension cannot be built here")
    _damage(exts[0], how)
    assert run() == "module"                              # rebuilt, not the slow fallback (or a crash)
    assert compiler.unseal(exts[0].read_bytes()) is not None


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path):
    import time
    d = tmp_path / "kernels" / "ab"
    d.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()                                           # a pid that no longer runs
    old = time.time() - compiler.STALE_TMP_S - 10
    stale = [d / f".tmp-{dead.pid}-k-x1.c", d / f".tmp-{dead.pid}-k-x1.so", d / ".tmp-x9"]
    fresh = d / f".tmp-{dead.pid}-k-x2.c"                  # maybe still being written (clock skew)
    mine = d / f".tmp-{os.getpid()}-k-x3.c"                # a live process's
    for p in stale + [fresh, mine]:
        p.write_text("x")
    for p in stale + [mine]:
        os.utime(p, (old, old))
    assert compiler.clean_stale_temporaries(d) == 3
    assert sorted(p.name for p in d.iterdir()) == sorted([fresh.name, mine.name])


def test_a_compile_removes_stale_temporaries_in_its_directory(tmp_path, monkeypatch):
    import time
    monkeypatch.setenv("TK_CACHE_DIR", str(tmp_path))
    src = "void tk_kernel(void) {}\n/* stale-temp test */\n"
    path = compiler.library_path(src, compiler.toolchain())
    path.parent.mkdir(parents=True)
    left = path.parent / ".tmp-999999999-killed-abc.c"     # no such pid
    left.write_text("int x;")
    old = time.time() - compiler.STALE_TMP_S - 10
    os.utime(left, (old, old))
    out = compiler.compile_library(src, "k")
    assert out == path and not left.exists()
    assert compiler.unseal(path.read_bytes()) is not None


def test_damaged_cubin_is_compiled_again(tmp_path, monkeypatch):
    from tinykernels.runtime import cuda as rt
    ok, why = rt.nvrtc_available()
    if not ok:
        pytest.skip(why)
    monkeypatch.setenv("TK_CACHE_DIR", str(tmp_path))
    src = 'extern "C" __global__ void tk_kernel(float *x) { x[threadIdx.x] += 1.0f; }\n'
    first = rt.compile_cuda(src, "sm_80", "k")
    path = rt.cubin_path(src, "sm_80", rt.NVRTC_OPTIONS)
    assert path.exists() and first[:4] == b"\x7fELF"
    path.write_bytes(path.read_bytes()[:len(first) // 2])
    before = rt.STATS["compiles"]
    assert rt.compile_cuda(src, "sm_80", "k") == first
    assert rt.STATS["compiles"] == before + 1
    assert rt.compile_cuda(src, "sm_80", "k") == first      # and now a disk hit again
    assert rt.STATS["compiles"] == before + 1


def test_gcc_kernels_get_the_alias_check_parameter_and_other_compilers_do_not():
    """GCC's vectorizer gives up beyond 10 run-time alias checks (the 2-D stencil's tangent
    kernel needs 13): GCC kernels raise the limit; clang would reject GCC's --param."""
    from tinykernels.runtime import compiler
    for v in ("gcc (GCC) 13.2.1 20230801", "cc (Debian 12.2.0-14+deb12u1) 12.2.0",
              "x86_64-linux-gnu-gcc-12 (Debian 12.2.0-14) 12.2.0"):
        assert compiler.is_gcc(v), v
    for v in ("Debian clang version 14.0.6", "Apple clang version 15.0.0 (clang-1500.1.0.2.5)",
              "Intel(R) oneAPI DPC++/C++ Compiler 2024.0.0 (2024.0.0.20231017)", "cc: unknown"):
        assert not compiler.is_gcc(v), v
    tc = compiler.toolchain()
    flags = " ".join(tc.flags)
    assert ("vect-max-version-for-alias-checks" in flags) == compiler.is_gcc(tc.version)


def test_gcc_10_and_later_kernels_skip_stride_versioning():
    """The generated C indexes arrays by their shapes, so GCC's "this stride is 1" loop copies
    are dead code (docs/cpu.md, "Transposed tile reads"): GCC 10+ kernels turn them off; older
    GCC (no such option) and other compilers do not get the flag."""
    from tinykernels.runtime import compiler
    for v, major in (("gcc (GCC) 13.2.1 20230801", 13), ("cc (Debian 12.2.0-14+deb12u1) 12.2.0", 12),
                     ("x86_64-linux-gnu-gcc-12 (Debian 12.2.0-14) 12.2.0", 12),
                     ("gcc (Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0", 9), ("Debian clang version 14.0.6", 0),
                     ("cc: unknown", 0)):
        assert compiler.gcc_major(v) == major, v
    tc = compiler.toolchain()
    want = compiler.is_gcc(tc.version) and compiler.gcc_major(tc.version) >= 10
    assert ("-fno-version-loops-for-strides" in tc.flags) == want
