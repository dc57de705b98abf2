"""Fault injection: a failing environment (fork, a hanging or missing compiler, an unusable or
full cache directory, Ctrl-C) gives a clear error or keeps working; never a hang.

Each scenario runs in a subprocess with a timeout (a hang fails the test instead of hanging CI).
"""
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.runtime import compiler

ROOT = Path(__file__).resolve().parents[1]

KERNELS = textwrap.dedent("""
    import tinykernels as tk

    @tk.kernel
    def spin(A, n):
        i = tk.index()
        acc = 0.0
        for k in range(n):
            acc = acc + 1.0
        A[i] = acc

    @tk.kernel
    def hang_me(A):
        i = tk.index()
        A[i] = 2.0
""")



@tk.kernel
def _scaled(out, x: tk.Const, s):
    i = tk.index()
    out[i] = x[i] * s


@tk.kernel
def _put_at(A, v):
    I = tk.index(tk.Global, tk.Cartesian)
    A[I] = v


@tk.kernel
def _put_row2(A, v):
    i, j = tk.index(tk.Global, tk.Cartesian)
    A[i + 2, j] = v + tk.int8(j % 7)


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")


def _script(tmp_path, body: str) -> Path:
    (tmp_path / "rkernels.py").write_text(KERNELS)
    p = tmp_path / "scenario.py"
    p.write_text(textwrap.dedent(body))
    return p


def _run(tmp_path, body: str, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(ROOT / "src"), TK_QUIET="1", **env)
    return subprocess.run([sys.executable, str(_script(tmp_path, body))], env=e, cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------------------- fork

@needs_fork
def test_direct_launch_in_a_forked_child_after_openmp_ran(tmp_path):
    """The forking thread's libgomp pool is gone in the child: its launches run on one thread
    (they hung in the pool's barrier before), and the results are right."""
    r = _run(tmp_path, """
        import os, faulthandler, numpy as np, tinykernels as tk
        from rkernels import spin
        A = np.zeros(1 << 16, np.float32)
        spin(tk.CPU(threads=2))(A, 1, ndrange=A.shape)           # an OpenMP team in this thread
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(60, exit=True)
            B = np.zeros(1 << 16, np.float32)
            spin(tk.CPU(threads=2))(B, 3, ndrange=B.shape)
            os._exit(0 if (B == 3).all() else 3)
        _, st = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(st))
        spin(tk.CPU(threads=2))(A, 4, ndrange=A.shape)            # the parent's pool still works
        print("parent", int(A.min()), int(A.max()))
    """)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout and "parent 4 4" in r.stdout, r.stdout + r.stderr


@needs_fork
def test_streams_in_a_forked_child(tmp_path):
    """A child has none of the parent's stream workers: work pending at the fork fails with a
    LaunchError (it never completes there); new work on the same stream runs."""
    r = _run(tmp_path, """
        import os, faulthandler, numpy as np, tinykernels as tk
        from rkernels import spin
        cpu = tk.CPU(threads=2)
        s = cpu.stream()
        A = np.zeros(1 << 16, np.float32)
        spin(cpu)(A, 1, ndrange=A.shape, stream=s).wait()        # the worker exists
        gate = s.submit(lambda: __import__("time").sleep(1.0))    # still running at the fork
        queued = s.submit(lambda: None)                           # queued behind it
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(60, exit=True)
            if not queued.done():
                os._exit(5)
            try:
                gate.wait()
                os._exit(4)
            except tk.LaunchError as e:
                assert "forked" in str(e), e
            assert gate.done()
            try:
                s.synchronize()                               # reports the queued job's error
                os._exit(6)
            except tk.LaunchError as e:
                assert "job #3" in str(e), e
            B = np.zeros(1000, np.float32)
            spin(cpu)(B, 5, ndrange=B.shape, stream=s).wait()
            s.synchronize()
            tk.synchronize(cpu)
            os._exit(0 if (B == 5).all() else 3)
        _, st = os.waitpid(pid, 0)
        gate.wait()
        print("child", os.waitstatus_to_exitcode(st))
    """)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout + r.stderr


@needs_fork
def test_pending_work_at_fork_is_reported_by_synchronize(tmp_path):
    r = _run(tmp_path, """
        import os, time, tinykernels as tk
        s = tk.CPU().stream()
        s.submit(lambda: time.sleep(1.0))
        pid = os.fork()
        if pid == 0:
            try:
                s.synchronize()
                os._exit(4)
            except tk.LaunchError:
                pass
            s.synchronize()                    # reported once; the stream is usable
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(st))
    """)
    assert "child 0" in r.stdout, r.stdout + r.stderr


@needs_fork
def test_fork_while_another_thread_compiles(tmp_path):
    """A thread compiling a kernel holds its compile lock for the whole compile; a child forked
    meanwhile has no such thread, so the lock is released there (runtime/forksafe.py): the
    child compiles and launches the same kernel instead of waiting forever."""
    cc = tmp_path / "slowcc"
    cc.write_text('#!/bin/sh\ncase "$*" in *hang_me*) sleep 3 ;; esac\nexec gcc "$@"\n')
    cc.chmod(0o755)
    r = _run(tmp_path, """
        import os, threading, time, faulthandler, numpy as np, tinykernels as tk
        from rkernels import hang_me
        cpu = tk.CPU(threads=1)
        A = np.zeros(8, np.float32)
        t = threading.Thread(target=lambda: hang_me(cpu)(A, ndrange=8))
        t.start()
        time.sleep(1.0)                                   # the compile (3 s) is under way
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(60, exit=True)
            B = np.zeros(8, np.float64)                   # a new specialization: takes the lock
            hang_me(cpu)(B, ndrange=8)
            os._exit(0 if (B == 2).all() else 3)
        _, st = os.waitpid(pid, 0)
        t.join()
        print("child", os.waitstatus_to_exitcode(st), "parent", A[0])
    """, timeout=180, CC=str(cc), TK_CACHE_DIR=str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    assert "child 0 parent 2.0" in r.stdout, r.stdout + r.stderr


@needs_fork
def test_fork_while_another_thread_imports_the_compiler(tmp_path):
    """The first launch imports the compiler lazily; a child forked while another thread was
    inside that import waited forever on Python's lock for the module (CI, under load, forked
    during the import in the test above). The fork now waits for the import to finish
    (runtime/forksafe.py). A finder that sleeps makes the import slow here on purpose."""
    r = _run(tmp_path, """
        import os, sys, threading, time, faulthandler, numpy as np, tinykernels as tk
        from rkernels import hang_me

        class Slow:                                   # makes the compiler's import take 2 s
            def find_spec(self, name, path=None, target=None):
                if name == "tinykernels.frontend":
                    time.sleep(2.0)
                return None
        print("lazy", "tinykernels.frontend" not in sys.modules)
        sys.meta_path.insert(0, Slow())
        t = threading.Thread(target=lambda: __import__("tinykernels.frontend"))
        t.start()
        time.sleep(0.5)                               # the import is under way
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(30, exit=True)
            B = np.zeros(8, np.float32)
            hang_me(tk.CPU(threads=1))(B, ndrange=8)
            os._exit(0 if (B == 2).all() else 3)
        _, st = os.waitpid(pid, 0)
        t.join()
        print("child", os.waitstatus_to_exitcode(st))
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "lazy True" in r.stdout and "child 0" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------ compiler and cache

def test_hanging_compiler_is_killed_at_the_timeout(tmp_path):
    """A compiler that never finishes (here a wrapper whose child sleeps, keeping the pipes
    open) is killed, process group and all, after TK_COMPILE_TIMEOUT: a CompileError naming
    the kernel; other kernels still compile."""
    cc = tmp_path / "slowcc"
    cc.write_text('#!/bin/sh\ncase "$*" in *hang_me*) sleep 600 & wait ;; esac\nexec gcc "$@"\n')
    cc.chmod(0o755)
    r = _run(tmp_path, """
        import time, numpy as np, tinykernels as tk
        from rkernels import hang_me, spin
        A = np.zeros(8, np.float32)
        t = time.time()
        try:
            hang_me.launch(A, ndrange=8)
        except tk.CompileError as e:
            print("error", round(time.time() - t), str(e).splitlines()[0])
        spin.launch(A, 3, ndrange=8)
        print("then", A[0])
    """, timeout=240, CC=str(cc), TK_COMPILE_TIMEOUT="3", TK_CACHE_DIR=str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    assert "hang_me" in r.stdout and "did not finish within 3 s" in r.stdout and "then 3.0" in r.stdout, r.stdout
    assert int(r.stdout.split("error ")[1].split()[0]) < 60
    kernels = tmp_path / "cache" / "kernels"
    assert not [p for p in kernels.rglob(".tmp-*")]            # its temporaries were removed


def test_compiler_that_cannot_run_is_backend_unavailable(tmp_path):
    cc = tmp_path / "notacc"
    cc.write_text("not a program\n")
    cc.chmod(0o755)
    r = _run(tmp_path, """
        import numpy as np, tinykernels as tk
        from rkernels import spin
        try:
            spin.launch(np.zeros(4, np.float32), 1, ndrange=4)
        except tk.BackendUnavailable as e:
            print("unavailable:", e)
    """, CC=str(cc), TK_CACHE_DIR=str(tmp_path / "cache"))
    assert "unavailable:" in r.stdout and "notacc" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("how", ["a file", "under /proc"])
def test_unusable_cache_dir_falls_back_with_a_warning(tmp_path, how):
    bad = tmp_path / "afile" if how == "a file" else Path("/proc/tinykernels-cache")
    if how == "a file":
        bad.write_text("x")
    elif not Path("/proc").is_dir():
        pytest.skip("no /proc")
    r = _run(tmp_path, """
        import numpy as np, tinykernels as tk
        from rkernels import spin
        A = np.zeros(4, np.float32)
        spin.launch(A, 2, ndrange=4)
        print("ok", A[0])
    """, TK_CACHE_DIR=str(bad))
    assert r.returncode == 0, r.stderr
    assert "ok 2.0" in r.stdout
    assert "is not usable" in r.stderr and str(bad) in r.stderr


def test_cache_write_failure_is_a_warning(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")                          # a file where the directory should be
    with pytest.warns(RuntimeWarning, match="could not write the cache file"):
        data = compiler.cached_binary(blocker / "sub" / "k.bin", {"disk_hits": 0, "compiles": 0}, lambda: b"binary")
    assert data == b"binary"


def test_full_disk_during_a_compile_is_a_compile_error(tmp_path, monkeypatch):
    import errno
    import tempfile
    monkeypatch.setenv("TK_CACHE_DIR", str(tmp_path / "cache"))
    real = tempfile.mkstemp

    def full(*a, **k):
        if str(k.get("dir", "")).startswith(str(tmp_path / "cache" / "kernels")):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **k)
    tc = compiler.toolchain()
    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.raises(tk.CompileError, match="No space left on device.*TK_CACHE_DIR"):
        compiler.compile_library("int tk_kernel_x(void) { return 7; }\n", "disk_full_kernel", (), tc)


@pytest.mark.parametrize("content", [b"{}", b'{"version": 3, "native": "x"}', b"{trunc"])
def test_damaged_toolchain_probe_cache_is_probed_again(tmp_path, content):
    """The compiler probe's cached result (toolchains/*.json) is sealed and checked: valid JSON
    of the wrong shape raised KeyError / TypeError on every later run."""
    cache = tmp_path / "cache"
    body = """
        import numpy as np, tinykernels as tk
        from rkernels import spin
        A = np.zeros(4, np.float32)
        spin.launch(A, 2, ndrange=4)
        print("ok", A[0])
    """
    assert "ok 2.0" in _run(tmp_path, body, TK_CACHE_DIR=str(cache)).stdout
    files = list((cache / "toolchains").glob("*.json"))
    assert files
    for f in files:
        f.write_bytes(content)
    r = _run(tmp_path, body, TK_CACHE_DIR=str(cache))
    assert r.returncode == 0 and "ok 2.0" in r.stdout, r.stderr
    assert all(compiler.unseal(f.read_bytes()) is not None for f in files)     # rewritten, sealed


def test_compile_timeout_must_be_a_number(monkeypatch):
    monkeypatch.setenv("TK_COMPILE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="TK_COMPILE_TIMEOUT"):
        compiler.compile_timeout()


# ------------------------------------------------------------------------------ signals

def test_ctrl_c_during_a_stream_synchronize(tmp_path):
    """KeyboardInterrupt interrupts synchronize() at once; the stream finishes its work and
    stays usable. (A launch without a stream runs in C and sees Ctrl-C when it returns.)"""
    r = _run(tmp_path, """
        import os, signal, threading, time, numpy as np, tinykernels as tk
        from rkernels import spin
        cpu = tk.CPU(threads=1)
        s = cpu.stream()
        gate = threading.Event()
        s.submit(gate.wait)                                 # blocks the stream until released
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t = time.time()
        try:
            s.synchronize()
        except KeyboardInterrupt:
            print("interrupted", time.time() - t < 30)
        gate.set()
        B = np.zeros(16, np.float32)
        spin(cpu)(B, 2, ndrange=16, stream=s).wait()
        s.synchronize()
        print("usable", B[0])
    """)
    assert r.returncode == 0, r.stderr
    assert "interrupted True" in r.stdout and "usable 2.0" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("bad, exc", [(float("nan"), ValueError), ("1", TypeError), (True, TypeError)])
def test_synchronize_checks_its_timeout_with_nothing_pending(bad, exc):
    with pytest.raises(exc, match="timeout"):
        tk.synchronize(tk.CPU(), timeout=bad)


# ----------------------------------------------------------------------------- lifetimes

@pytest.mark.parametrize("kind", ["numpy", "tk", "torch"])
def test_inputs_dropped_while_queued_stay_alive_until_the_job_ran(kind):
    """The stream's job keeps its arrays alive: dropping the caller's last reference (and
    collecting, and reusing the memory) before the job runs changes nothing."""
    import gc
    import threading
    cpu = tk.CPU(threads=1)
    s = cpu.stream()
    gate = threading.Event()
    s.submit(lambda: gate.wait(60))                 # the launches below wait behind this
    n = 1 << 15
    outs, evs = [], []
    for j in range(4):
        if kind == "numpy":
            x = np.full(n, j + 1, np.float32)
        elif kind == "tk":
            x = tk.full(n, j + 1, tk.float32, backend=cpu)
        else:
            x = pytest.importorskip("torch").full((n,), float(j + 1))
        out = np.zeros(n, np.float32)
        evs.append(_scaled(cpu)(out, x, 2.0, ndrange=n, stream=s))
        outs.append(out)
        del x
    gc.collect()
    junk = [np.full(n, -7, np.float32) for _ in range(16)]   # reuse freed memory if it were freed
    gate.set()
    s.synchronize(timeout=60)
    for j, out in enumerate(outs):
        assert (out == 2 * (j + 1)).all(), (j, out[:4])
    assert len(junk) == 16


def test_host_exports_after_a_synchronize_see_the_result_and_share_memory():
    """Reading a host array while a stream writes it is not waited for (docs/debugging.md):
    after the wait every export (.numpy(), np.asarray, DLPack to NumPy and torch) is a
    zero-copy view that sees the result, and later kernel writes."""
    torch = pytest.importorskip("torch")
    cpu = tk.CPU()
    s = cpu.stream()
    x = tk.full(1000, 3, tk.float32, backend=cpu)
    out = tk.zeros(1000, tk.float32, backend=cpu)
    _scaled(cpu)(out, x, 2.0, ndrange=1000, stream=s)
    s.synchronize()
    views = [out.numpy(), np.asarray(out), np.from_dlpack(out), torch.from_dlpack(out).numpy()]
    for v in views:
        assert (v == 6).all()
    _scaled(cpu)(out, x, 5.0, ndrange=1000, stream=s).wait()
    for v in views:
        assert (v == 15).all()


def test_device_synchronize_raises_the_root_error_not_its_consequence():
    """A job fails on one stream and other streams wait for it: tk.synchronize(backend) raises
    the job's own error, whichever stream it visits first (a set: no order; with six waiting
    streams it used to raise a waiting stream's LaunchError most of the time)."""
    cpu = tk.CPU(debug=True)
    s = cpu.stream()
    out = np.zeros(8, np.float32)
    ev = _scaled(cpu)(out, np.zeros(4, np.float32), 1.0, ndrange=8, stream=s)    # reads past x's end
    waiting = [cpu.stream() for _ in range(6)]
    for w in waiting:
        w.wait(ev)
        w.submit(lambda: None)
    with pytest.raises(IndexError, match="out of bounds"):
        tk.synchronize(cpu)
    tk.synchronize(cpu)                                  # everything was reported


# ---------------------------------------------------------------------------------- sizes

def test_indices_past_2_to_the_31_do_not_wrap():
    """Element offsets beyond int32 (an int8 array over 2 GiB: np.zeros maps it lazily, only
    the pages written are touched): an ndrange range starting past 2**31, and a row offset
    past 2**31 reached from a small ndrange (the 32-bit specialization must not apply)."""
    big = 2**31 + 64
    A = np.zeros(big, np.int8)
    _put_at.launch(A, 5, ndrange=(range(2**31 + 3, 2**31 + 40),))
    window = A[2**31 - 64:]
    assert np.flatnonzero(window).tolist() == list(range(64 + 3, 64 + 40))
    assert not A[:64].any() and not A[2**31 - 2**31 % 4096 - 4096:2**31 - 64].any()   # no wrapped writes
    del A, window
    m = 2**30 + 8
    B = np.zeros((3, m), np.int8)                      # row 2 starts at byte 2**31 + 16
    _put_row2.launch(B, 1, ndrange=(1, 16))
    assert B[2, :16].tolist() == [1 + j % 7 for j in range(16)]
    assert not B[2, 16:4096].any() and not B[0, :4096].any() and not B[1, m - 4096:].any()


# ---------------------------------------------------------------------------------- leaks

@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="Linux /proc")
def test_many_launches_leak_no_memory_or_file_descriptors():
    """Direct and stream launches of several signatures (NumPy, tk.Array; float32 and float64):
    resident memory and open file descriptors stay flat after a warm-up round."""
    import gc
    cpu = tk.CPU(threads=1)
    s = cpu.stream()
    args = [(np.zeros(64, np.float32), np.ones(64, np.float32)), (np.zeros(64), np.ones(64)),
            (tk.zeros(64, tk.float32, backend=cpu), tk.ones(64, tk.float32, backend=cpu))]

    def round_(n):
        for j in range(n):
            out, x = args[j % 3]
            _scaled(cpu)(out, x, 2.0, ndrange=64)
            if j % 8 == 0:
                _scaled(cpu)(out, x, 3.0, ndrange=64, stream=s)
        s.synchronize()
        gc.collect()

    def rss_kib():
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

    round_(5000)
    rss0, fds0 = rss_kib(), len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        round_(10000)
    assert len(os.listdir("/proc/self/fd")) <= fds0
    assert rss_kib() - rss0 < 4096, (rss0, rss_kib())
