"""Streams and events of the host runtime (tinykernels.runtime.streams)."""
import gc
import os
import sys
import threading
import time

import pytest

import tinykernels as tk
from tinykernels.runtime import streams as S
from tinykernels.runtime.streams import Event, High, Low, Normal, Stream, StreamSet, completed_event

T = 10.0   # generous timeout: a failure fails instead of hanging


def _wait_until(cond, timeout=T):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_priority_constants():
    assert (High, Normal, Low) == (1, 0, -1)
    assert Stream().priority == Normal
    assert Stream(priority=7).priority == 7
    with pytest.raises(TypeError, match="priority"):
        Stream(priority="fast")


def test_many_jobs_run_in_order_on_one_stream():
    s = Stream(name="order")
    out = []
    evs = [s.submit(lambda i=i: out.append(i)) for i in range(2000)]
    evs[-1].wait(timeout=T)
    assert out == list(range(2000))
    assert all(e.done() for e in evs)
    s.synchronize()


def test_jobs_run_on_one_dedicated_thread():
    s = Stream()
    idents = []
    for _ in range(50):
        s.submit(lambda: idents.append(threading.get_ident()))
    s.synchronize()
    assert len(set(idents)) == 1
    assert idents[0] != threading.get_ident()


def test_submit_does_not_block_and_done_before_after():
    s = Stream()
    gate = threading.Event()
    t0 = time.monotonic()
    ev = s.submit(lambda: gate.wait(T))
    ev2 = s.submit(lambda: None)
    assert time.monotonic() - t0 < 1.0
    assert not ev.done() and not ev2.done()
    with pytest.raises(TimeoutError):
        ev2.wait(timeout=0.05)
    gate.set()
    ev2.wait(timeout=T)
    assert ev.done() and ev2.done()


def test_two_streams_run_concurrently():
    a, b = Stream(name="a"), Stream(name="b")
    flag = threading.Event()
    seen = []
    # a's job blocks until b's job sets the flag: deadlocks (times out) unless concurrent
    ea = a.submit(lambda: seen.append(flag.wait(T)))
    eb = b.submit(flag.set)
    ea.wait(timeout=T + 5)
    eb.wait(timeout=T)
    assert seen == [True]


def test_streams_run_concurrently_with_python():
    s = Stream()
    flag = threading.Event()
    ev = s.submit(lambda: flag.wait(T))
    flag.set()                      # the caller keeps running while the job waits
    ev.wait(timeout=T)


def test_stream_wait_orders_across_streams():
    a, b = Stream(name="producer"), Stream(name="consumer")
    gate = threading.Event()
    out = []
    ea = a.submit(lambda: (gate.wait(T), out.append("a")))
    t0 = time.monotonic()
    b.wait(ea)                      # must not block the caller
    assert time.monotonic() - t0 < 1.0
    eb = b.submit(lambda: out.append("b"))
    time.sleep(0.05)
    assert out == [] and not eb.done()
    gate.set()
    eb.wait(timeout=T)
    assert out == ["a", "b"]


def test_stream_wait_on_done_or_own_event_is_noop():
    s = Stream()
    s.wait(completed_event())
    e = s.submit(lambda: None)
    s.wait(e)
    s.submit(lambda: None).wait(timeout=T)
    with pytest.raises(TypeError):
        s.wait(object())


def test_error_reraised_by_event_wait_once_and_worker_survives():
    s = Stream(name="err")
    out = []

    def boom():
        raise ValueError("kaboom")

    e1 = s.submit(boom)
    e2 = s.submit(lambda: out.append("after"))
    with pytest.raises(tk.LaunchError, match=r"job #2 did not run: job #1 .*ValueError: kaboom") as skipped:
        e2.wait(timeout=T)                      # stopped behind the unreported failure
    assert out == [] and isinstance(skipped.value.__cause__, ValueError)
    assert e1.done()
    with pytest.raises(ValueError, match="kaboom") as info:
        e1.wait(timeout=T)
    # the traceback shows the original raise inside the job
    assert any(tb.name == "boom" for tb in info.traceback)
    if sys.version_info >= (3, 11):
        assert any("stream 'err'" in n for n in info.value.__notes__)
    e1.wait(timeout=T)                          # reported once per event
    s.synchronize()                             # already reported by Event.wait
    assert "failed" in repr(e1)
    s.submit(lambda: out.append("later")).wait(timeout=T)
    assert out == ["later"]                     # the worker survived; reported, the stream runs again


def test_error_reraised_by_synchronize_once():
    s = Stream()

    def boom():
        raise KeyError("first")

    def boom2():
        raise RuntimeError("second")

    e1 = s.submit(boom)
    s.submit(boom2)
    s.submit(lambda: None)
    with pytest.raises(KeyError, match="first"):
        s.synchronize()
    s.synchronize()                             # reported once
    with pytest.raises(KeyError):               # Event.wait still reports its own error once
        e1.wait()
    ok = s.submit(lambda: None)
    s.synchronize()
    ok.wait()


def test_stream_wait_propagates_an_unreported_error_and_a_reported_one_only_orders():
    a, b = Stream(), Stream()
    out = []
    ea = a.submit(lambda: 1 / 0)
    b.wait(ea)
    eb = b.submit(lambda: out.append("b"))
    with pytest.raises(tk.LaunchError, match="waited for .*failed") as info:
        b.synchronize()                         # b's wait failed; its later job did not run
    assert isinstance(info.value.__cause__, ZeroDivisionError) and out == []
    with pytest.raises(tk.LaunchError, match="did not run"):
        eb.wait(timeout=T)
    with pytest.raises(ZeroDivisionError):
        a.synchronize()
    b.wait(ea)                                  # reported: waiting for it only orders work
    b.submit(lambda: out.append("b2"))
    b.synchronize()
    assert out == ["b2"]


def test_event_wait_timeout_and_completed_event():
    ev = completed_event()
    assert ev.done()
    ev.wait()
    ev.wait(timeout=0)
    assert completed_event() is ev
    assert "done" in repr(ev)
    s = Stream()
    gate = threading.Event()
    pending = s.submit(lambda: gate.wait(T))
    assert "pending" in repr(pending)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        pending.wait(timeout=0.1)
    assert time.monotonic() - t0 < 5
    gate.set()
    s.synchronize()


def test_synchronize_waits_for_all_work():
    s = Stream()
    out = []
    for i in range(20):
        s.submit(lambda i=i: (time.sleep(0.002), out.append(i)))
    s.synchronize()
    assert out == list(range(20))
    assert s.query()


def test_synchronize_from_own_job_is_a_clear_error():
    s = Stream()
    ev = s.submit(s.synchronize)
    with pytest.raises(RuntimeError, match="deadlock"):
        ev.wait(timeout=T)


def test_streamset_synchronize_waits_for_every_stream_and_raises_first_error():
    ss = StreamSet()
    a, b = ss.stream(High), ss.stream(Low)
    assert a.priority == High and b.priority == Low
    assert set(ss.streams()) == {a, b}
    out = []
    a.submit(lambda: (time.sleep(0.05), out.append("a")))
    b.submit(lambda: (time.sleep(0.05), out.append("b")))
    ss.synchronize()
    assert sorted(out) == ["a", "b"]
    b.submit(lambda: [][1])
    a.submit(lambda: (time.sleep(0.05), out.append("a2")))
    with pytest.raises(IndexError):
        ss.synchronize()
    assert "a2" in out                           # it waited for the other stream too
    ss.synchronize()                             # reported once


def test_streamset_waits_for_work_of_a_dropped_stream():
    ss = StreamSet()
    gate = threading.Event()
    out = []
    s = ss.stream()
    s.submit(lambda: (gate.wait(T), out.append("done")))
    del s
    gc.collect()
    threading.Timer(0.1, gate.set).start()
    ss.synchronize()
    assert out == ["done"]


def test_streamset_default_stream_and_thread_safety():
    ss = StreamSet()
    assert ss.default is ss.default and ss.default.priority == Normal
    made = []

    def make():
        for _ in range(50):
            made.append(ss.stream())

    ts = [threading.Thread(target=make) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(T)
    assert len(made) == 200 and len(ss) == 201
    ss.synchronize()


def test_concurrent_submitters_on_one_stream():
    s = Stream()
    out = []

    def producer(k):
        for i in range(200):
            s.submit(lambda k=k, i=i: out.append((k, i)))

    ts = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(T)
    s.synchronize()
    assert len(out) == 800
    for k in range(4):                            # each producer's jobs stay in order
        assert [i for kk, i in out if kk == k] == list(range(200))


def test_threads_end_when_streams_are_dropped():
    def mine():
        return [t for t in threading.enumerate() if t.name.startswith("tk-stream 'drop-")]

    streams = [Stream(name=f"drop-{i}") for i in range(300)]
    for s in streams:
        s.submit(lambda: None)
    for s in streams:
        s.synchronize()
    threads = mine()
    assert len(threads) == 300                  # one worker per stream
    del streams, s
    gc.collect()
    assert _wait_until(lambda: not mine()), len(mine())
    assert not any(t.is_alive() for t in threads)


def test_unused_stream_starts_no_thread():
    ss = [Stream(name=f"unused-{i}") for i in range(1000)]
    assert not [t for t in threading.enumerate() if "'unused-" in t.name]
    ss.clear()


def test_pending_jobs_of_a_dropped_stream_still_run():
    out = []
    s = Stream()
    ev = s.submit(lambda: (time.sleep(0.05), out.append(1)))
    del s
    gc.collect()
    ev.wait(timeout=T)
    assert out == [1]


def test_idle_worker_exits_and_restarts(monkeypatch):
    monkeypatch.setattr(S, "IDLE_EXIT_S", 0.05)
    s = Stream(name="idle")
    idents = []
    s.submit(lambda: idents.append(threading.get_ident())).wait(timeout=T)
    assert _wait_until(lambda: s._state.thread is None)
    s.submit(lambda: idents.append(threading.get_ident())).wait(timeout=T)
    assert len(idents) == 2
    s.synchronize()


def test_worker_threads_are_daemons():
    s = Stream()
    names = []
    s.submit(lambda: names.append(threading.current_thread())).wait(timeout=T)
    assert names[0].daemon


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux-only")
def test_priority_sets_worker_nice_value():
    base = os.getpriority(os.PRIO_PROCESS, os.getpid())

    def nice_of_worker(s):
        out = []
        s.submit(lambda: out.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))).wait(timeout=T)
        return out[0]

    def nice_from_proc(s):
        out = []

        def read():
            with open(f"/proc/self/task/{threading.get_native_id()}/stat") as f:
                out.append(int(f.read().rpartition(")")[2].split()[16]))   # field 19: nice
        s.submit(read).wait(timeout=T)
        return out[0]

    low, normal, high = Stream(Low), Stream(Normal), Stream(High)
    assert nice_of_worker(low) == min(19, base + 10)
    assert nice_from_proc(low) == min(19, base + 10)
    assert nice_of_worker(normal) == base
    assert nice_of_worker(high) in (base, max(-20, base - 5))   # base - 5 only with privileges
    if os.geteuid() == 0:
        assert nice_of_worker(high) == max(-20, base - 5)
    # the caller's own nice value is untouched
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base
    # a Normal stream started from a Low worker does not inherit the low priority
    inner = []

    def start_inner():
        s2 = Stream(Normal)
        inner.append(nice_of_worker(s2))

    low.submit(start_inner).wait(timeout=T)
    if os.geteuid() == 0:
        assert inner == [base]


def test_submit_rejects_non_callables():
    with pytest.raises(TypeError, match="callable"):
        Stream().submit(42)


def test_event_repr_names_stream_and_job():
    s = Stream(name="named")
    ev = s.submit(lambda: None)
    ev.wait(timeout=T)
    assert "named" in repr(ev) and "#1" in repr(ev) and "done" in repr(ev)
    assert "named" in repr(s)
    assert isinstance(ev, Event)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux-only")
def test_high_priority_without_privileges_keeps_normal_nice(monkeypatch):
    real = os.setpriority

    def unprivileged(which, who, value):
        if value < os.getpriority(which, who):
            raise PermissionError(13, "Permission denied")
        real(which, who, value)

    monkeypatch.setattr(os, "setpriority", unprivileged)
    base = os.getpriority(os.PRIO_PROCESS, os.getpid())
    out = []
    s = Stream(High)
    s.submit(lambda: out.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))).wait(timeout=T)
    assert out == [base]
    s.synchronize()


def test_pending_work_does_not_keep_the_interpreter_alive():
    import subprocess
    code = ("import time, sys\n"
            "from tinykernels.runtime.streams import Stream\n"
            "streams = [Stream() for _ in range(200)]\n"
            "for s in streams: s.submit(lambda: None)\n"
            "for s in streams: s.synchronize()\n"
            "s = Stream(); s.submit(lambda: time.sleep(60))\n"
            "print('exiting'); sys.stdout.flush()\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    assert "exiting" in r.stdout
    assert time.monotonic() - t0 < 20


def test_a_job_is_released_before_its_event_completes():
    """The worker drops a job (its closure: the launch's arrays) before completing its event,
    so a waiter never returns while the stream still holds the job's objects: it dropped them
    after, and a torch tensor freed that way during interpreter shutdown aborted the process."""
    seen = []

    class Tracked:
        def __del__(self):
            seen.append(ev.done())

    s = Stream(name="release")
    gate = threading.Event()
    s.submit(lambda: gate.wait(T))       # hold the worker until the job's only holder is the job
    ev = s.submit(lambda o=Tracked(): o)
    gate.set()
    ev.wait(timeout=T)
    assert seen == [False]


@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
def test_a_launch_holds_no_torch_tensor_once_its_event_completes(dev):
    torch = pytest.importorskip("torch")
    import weakref
    k = _slow_kernel()
    b = tk.backend(dev)
    s = b.stream()
    t = torch.zeros(64)
    ref = weakref.ref(t)
    ev = k(b)(t, 50, ndrange=64, stream=s)
    del t
    ev.wait(timeout=60)
    assert ref() is None


def _slow_kernel():
    @tk.kernel
    def count_up(a, n):
        i = tk.index()
        acc = a[i]
        for _ in range(n):
            acc += 1.0
        a[i] = acc
    return count_up


# --- unrecorded events and timeouts (issue 10) -------------------------------------------------

def _device_backends():
    import tinykernels as tk
    out = [pytest.param("CPU", id="CPU"), pytest.param("INTERP", id="INTERP")]
    info = tk.backends()
    for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
        ok, why = info[name]
        out.append(pytest.param(dev, id=dev, marks=pytest.mark.skipif(not ok, reason=f"{name}: {why}")))
    return out


def test_waiting_on_an_unrecorded_event_is_an_error_not_a_hang():
    ev = Event()
    with pytest.raises(RuntimeError, match="never recorded"):
        ev.wait()
    with pytest.raises(RuntimeError, match="never recorded"):
        ev.wait(timeout=0.01)
    s = Stream()
    with pytest.raises(RuntimeError, match="never recorded"):
        s.wait(ev)                   # refused at once: the stream is not left blocked behind it
    assert s.query()
    s.submit(lambda: None)
    s.synchronize(timeout=10)


@pytest.mark.parametrize("dev", _device_backends())
def test_backend_stream_wait_refuses_an_unrecorded_event(dev):
    import tinykernels as tk
    b = tk.backend(dev)
    s = b.stream()
    with pytest.raises(RuntimeError, match="never recorded"):
        s.wait(tk.Event())
    s.synchronize(timeout=10)
    tk.synchronize(b, timeout=10)


def test_stream_and_backend_synchronize_time_out_while_work_runs():
    import tinykernels as tk
    gate = threading.Event()
    b = tk.CPU()
    s = b.stream()
    ev = s.submit(lambda: gate.wait(30))
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        s.synchronize(timeout=0.1)
    with pytest.raises(TimeoutError):
        tk.synchronize(b, timeout=0.1)
    with pytest.raises(TimeoutError):
        ev.wait(0.05)
    assert time.monotonic() - t0 < 5
    gate.set()
    s.synchronize(timeout=10)        # the work kept running; waiting again succeeds
    tk.synchronize(b, timeout=10)
    assert ev.done()


def test_streamset_synchronize_timeout_is_one_deadline_for_all_streams():
    gates = [threading.Event() for _ in range(3)]
    ss = StreamSet()
    streams = [ss.stream() for _ in gates]
    for s, g in zip(streams, gates):
        s.submit(lambda g=g: g.wait(30))
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        ss.synchronize(timeout=0.2)
    assert time.monotonic() - t0 < 2
    for g in gates:
        g.set()
    ss.synchronize(timeout=10)


@pytest.mark.parametrize("dev", ["CL", "WEBGPU"])
def test_device_events_and_synchronize_accept_a_timeout(dev):
    import numpy as np
    import tinykernels as tk
    name = {"CL": "OpenCL", "WEBGPU": "WebGPU"}[dev]
    ok, why = tk.backends()[name]
    if not ok:
        pytest.skip(why)
    b = tk.backend(dev)

    @tk.kernel
    def inc(x):
        i = tk.index()
        x[i] += 1.0

    x = tk.zeros(4096, tk.float32, backend=b)
    s = b.stream()
    ev = inc(b)(x, ndrange=4096, stream=s)
    ev.wait(timeout=30)
    assert ev.done()
    inc(b)(x, ndrange=4096, stream=s)
    s.synchronize(timeout=30)
    inc(b)(x, ndrange=4096)
    tk.synchronize(b, timeout=30)
    np.testing.assert_array_equal(x.numpy(), np.full(4096, 3, np.float32))


@pytest.mark.parametrize("name", ["CPU", "INTERP", "CL", "WEBGPU"])
def test_every_backend_checks_priorities_and_whose_stream_it_is(name):
    """stream(priority=) takes only ints on every backend (OpenCL and WebGPU kept 'x'), and a
    launch or tk.copyto on another backend's stream (or on a non-stream) is an error naming the
    kernel (OpenCL raised AttributeError: 'Stream' object has no attribute 'queue')."""
    import numpy as np
    import tinykernels as tk
    if name not in tk.backends_available():
        pytest.skip(f"{name} unavailable")
    b = tk.backend(name)
    other = tk.backend("INTERP" if name == "CPU" else "CPU")

    @tk.kernel
    def one(A):
        A[tk.index()] = 1.0
    assert b.stream(priority=tk.High).priority == 1 and b.stream(priority=np.int8(-1)).priority == -1
    for bad in ("x", 1.5, None):
        with pytest.raises(TypeError, match="argument 'priority': expected an int"):
            b.stream(priority=bad)
    a = tk.zeros((4,), backend=b)
    with pytest.raises(tk.LaunchError, match=r"kernel 'one': the stream belongs to another backend \(tk\."):
        one(b)(a, ndrange=4, stream=other.stream())
    with pytest.raises(tk.LaunchError, match="kernel 'one': stream= must be a stream of .*got int"):
        one(b)(a, ndrange=4, stream=3)
    if not b.is_host:
        with pytest.raises(ValueError, match="tk.copyto: the stream belongs to another backend"):
            tk.copyto(a, np.ones(4, np.float32), stream=other.stream())
    assert (a.numpy() == 0).all()
    s = b.stream()
    one(b)(a, ndrange=4, stream=s).wait()
    assert (a.numpy() == 1).all() and "priority=0" in repr(s)
    # a launch repeating the last one (OpenCL only enqueues it again) still checks its stream
    with pytest.raises(tk.LaunchError, match=r"kernel 'one': the stream belongs to another backend \(tk\."):
        one(b)(a, ndrange=4, stream=other.stream())


def test_tk_synchronize_takes_a_dev_string():
    """tk.synchronize("CPU") waits for that backend, as tk.backend("CPU") names it (it was an
    AttributeError: 'str' object has no attribute 'synchronize'); a non-backend is a TypeError."""
    done = []
    s = tk.backend("CPU").stream()
    s.submit(lambda: (time.sleep(0.05), done.append(1)))
    tk.synchronize("CPU")
    assert done == [1]
    tk.synchronize("INTERP")
    with pytest.raises(TypeError, match="expected a backend or a DEV string, got int"):
        tk.synchronize(3)
