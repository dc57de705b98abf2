"""A fake PyObjC ``Metal`` module for the Metal runtime's tests, and an emulating one.

:class:`FakeMetal` has enough of the API for the runtime's Python paths: buffers are host
memory, command buffers are recorded (``on_commit`` may act on them) and complete when waited
for (or at once with ``auto_complete``).

:class:`EmulatedMetal` also EXECUTES the generated MSL on the CPU: each library is compiled with
clang++ against ``tests/metal_emu/metal_stdlib`` (a C++20 emulation: one OS thread per work item,
threadgroups one after another) plus a driver generated from the kernel's signature, and each
committed command buffer runs its dispatches and blits. Loaded as a pytest plugin
(``-p metal_emu``), it installs itself as ``Metal`` so that ``DEV=METAL`` and
``TK_TEST_BACKENDS=METAL`` run the conformance suite on it (tests/test_metal.py).
"""
import ctypes
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

EMU_DIR = Path(__file__).resolve().parent / "metal_emu"

class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class _Contents:
    def __init__(self, mem):
        self.mem = mem

    def as_buffer(self, n):
        return memoryview(self.mem)[:n]


class FakeBuffer:
    def __init__(self, n):
        self.mem = bytearray(n)

    def length(self):
        return len(self.mem)

    def contents(self):
        return _Contents(self.mem)

    def array(self, dtype, n):
        return np.frombuffer(self.mem, dtype, count=n)


class FakeEncoder:
    def __init__(self, cb):
        self.cb = cb
        self.calls = []

    def __getattr__(self, name):               # record every encoder call
        return lambda *a: self.calls.append((name, a))


class FakeCommandBuffer:
    def __init__(self, fake, queue):
        self.fake, self.queue = fake, queue
        self.encoders, self.waits, self.signals = [], [], []
        self._status = 0

    def computeCommandEncoder(self):
        self.encoders.append(FakeEncoder(self))
        return self.encoders[-1]

    blitCommandEncoder = computeCommandEncoder

    def encodeWaitForEvent_value_(self, ev, v):
        self.waits.append((ev, v))

    def encodeSignalEvent_value_(self, ev, v):
        self.signals.append((ev, v))

    def commit(self):
        self._status = 2                       # committed: completes when waited for (or auto)
        self.fake.committed.append(self)
        if self.fake.on_commit:
            self.fake.on_commit(self)
        if self.fake.auto_complete:
            self._status = 4

    def status(self):
        return self._status

    def waitUntilCompleted(self):
        self._status = 4

    def error(self):
        return None


class FakeQueue:
    def __init__(self, fake):
        self.fake = fake

    def commandBuffer(self):
        return FakeCommandBuffer(self.fake, self)


class FakeOptions:
    def __init__(self):
        self.fast_math, self.math_mode = None, None

    @classmethod
    def new(cls):
        return cls()

    def setFastMathEnabled_(self, v):
        self.fast_math = v

    def setMathMode_(self, v):
        self.math_mode = v


class FakeDevice:
    def __init__(self, fake):
        self.fake = fake

    def name(self):
        return "Fake M3"

    def maxThreadsPerThreadgroup(self):
        return _Obj(width=1024, height=1024, depth=1024)

    def newCommandQueue(self):
        self.fake.queues.append(FakeQueue(self.fake))
        return self.fake.queues[-1]

    def newSharedEvent(self):
        return _Obj(kind="shared event")

    def newBufferWithLength_options_(self, n, opts):
        assert opts == 0, "shared storage"
        return FakeBuffer(n)

    def newBufferWithBytes_length_options_(self, data, n, opts):
        b = FakeBuffer(n)
        b.mem[:] = bytes(data)[:n]
        return b

    def newLibraryWithSource_options_error_(self, src, opts, err):
        self.fake.compiles.append((src, opts))
        if "kernel void tk_kernel(" not in src:
            return None, _Obj(localizedDescription=lambda: "program_source:1:1: error: no kernel")
        return _Obj(newFunctionWithName_=lambda name: _Obj(name=name, source=src)), None

    def newComputePipelineStateWithFunction_error_(self, fn, err):
        assert fn.name == "tk_kernel"
        return _Obj(maxTotalThreadsPerThreadgroup=lambda: 1024, source=fn.source), None


class FakeMetal:
    """Enough of PyObjC's Metal module for the runtime's Python paths: buffers are host memory,
    nothing executes (``on_commit`` may emulate a kernel), command buffers complete when waited
    for (or at once with ``auto_complete``)."""
    MTLMathModeSafe = 0

    def __init__(self):
        self.compiles, self.committed, self.queues = [], [], []
        self.on_commit = None
        self.auto_complete = False
        self.device = FakeDevice(self)
        self.MTLCompileOptions = FakeOptions

    def MTLSizeMake(self, x, y, z):
        return (x, y, z)

    def MTLCreateSystemDefaultDevice(self):
        return self.device

    def MTLCopyAllDevices(self):
        return [self.device]


# ----------------------------------------------------------------------------- execution

def _signature(src: str) -> list:
    """(C type, name) of each parameter of ``tk_kernel``."""
    m = re.search(r"kernel void tk_kernel\((.*?)\) \{", src)
    out = []
    for p in m.group(1).split(", "):
        p = re.sub(r"\s*\[\[.*?\]\]", "", p).strip()
        name = re.search(r"(\w+)$", p).group(1)
        out.append((p[: -len(name)].strip(), name))
    return out


def _driver(src: str) -> str:
    args, k = [], 0
    for ty, name in _signature(src):
        if name == "tk_a":
            args.append("*(tk_args *)args")
        elif ty.endswith("*"):
            args.append(f"({ty})bufs[{k}]")
            k += 1
        else:
            args.append({"tk_tid": "tid", "tk_tgid": "tg", "tk_ntg": "ntg", "tk_lane": "t % sw",
                         "tk_sg": "t / sw", "tk_sw": "sw"}[name])
    call = ", ".join(args)
    return f"""
#undef thread
extern "C" int tk_run(void *args, void **bufs, unsigned gx, unsigned gy, unsigned gz,
                      unsigned wx, unsigned wy, unsigned wz, unsigned sw) {{
    unsigned n = wx * wy * wz;
    if (n > 4096) return 1;
    for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x) {{
        std::barrier<> bar(n);
        tk_emu_bar = &bar; tk_emu_n = n; tk_emu_sw = sw;
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < n; ++t)
            ts.emplace_back([=] {{
                tk_emu_tid = t;
                uint3 tid = {{t % wx, t / wx % wy, t / (wx * wy)}}, tg = {{x, y, z}}, ntg = {{gx, gy, gz}};
                (void)tid; (void)tg; (void)ntg;
                tk_kernel({call});
            }});
        for (auto &th : ts) th.join();
    }}
    return 0;
}}
"""


_BUILT: dict = {}


def build(src: str):
    """``tk_run`` of the MSL ``src`` compiled for the CPU emulation (cached by source)."""
    key = hashlib.sha1(src.encode()).hexdigest()[:24]
    fn = _BUILT.get(key)
    if fn is None:
        d = Path(os.environ.get("TK_CACHE_DIR") or tempfile.gettempdir()) / "metal-emu"
        d.mkdir(parents=True, exist_ok=True)
        so = d / f"{key}.so"
        if not so.exists():
            cpp = d / f"{key}.cpp"
            cpp.write_text(src + _driver(src))
            tmp = d / f"{key}.{os.getpid()}.so"
            r = subprocess.run(["clang++-15", "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread",
                                "-I", str(EMU_DIR), "-o", str(tmp), str(cpp)], capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError("metal_emu: clang++ failed:\n" + r.stderr[-4000:])
            os.replace(tmp, so)
        lib = ctypes.CDLL(str(so))
        fn = lib.tk_run
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 7
        fn.restype = ctypes.c_int
        _BUILT[key] = fn
    return fn


def _address(buf: FakeBuffer) -> int:
    return ctypes.addressof((ctypes.c_char * len(buf.mem)).from_buffer(buf.mem))


class EmulatedMetal(FakeMetal):
    """FakeMetal that runs what is committed: compute dispatches through :func:`build`, blits."""
    SIMD_WIDTH = 32

    def __init__(self):
        super().__init__()
        self.auto_complete = True
        self.on_commit = self.execute

    def execute(self, cb) -> None:
        for enc in cb.encoders:
            calls = enc.calls
            if calls and calls[0][0] == "copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_":
                src, so, dst, do, n = calls[0][1]
                dst.mem[do:do + n] = src.mem[so:so + n]
                continue
            state = {"bufs": {}}
            for name, a in calls:
                if name == "setComputePipelineState_":
                    state["pso"] = a[0]
                elif name == "setBytes_length_atIndex_":
                    state["bufs"][a[2]] = FakeBuffer(a[1])
                    state["bufs"][a[2]].mem[:] = bytes(a[0])[:a[1]]
                elif name == "setBuffer_offset_atIndex_":
                    state["bufs"][a[2]] = a[0]
                elif name == "dispatchThreadgroups_threadsPerThreadgroup_":
                    self.dispatch(state, a[0], a[1])

    def dispatch(self, state, groups, threads) -> None:
        fn = build(state["pso"].source)
        bufs = state["bufs"]
        arrays = (ctypes.c_void_p * max(1, len(bufs) - 1))(*[_address(bufs[k]) for k in range(1, len(bufs))])
        rc = fn(_address(bufs[0]), ctypes.cast(arrays, ctypes.c_void_p), *groups, *threads, self.SIMD_WIDTH)
        assert rc == 0, "threadgroup too large for the emulation"


def pytest_configure(config):
    """As a pytest plugin (``-p metal_emu``): the emulation is PyObjC's Metal module."""
    sys.modules["Metal"] = EmulatedMetal()
