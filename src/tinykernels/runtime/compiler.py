"""The system C compiler: finding it, probing it once, and compiling through the disk cache.

Compiled objects are cached under ``TK_CACHE_DIR`` (default ``~/.cache/tinykernels``), keyed
by the source, the compiler's identity and version, the flags and the CPU's features. A
file appears under its final name only once complete (written to a temporary name and
renamed), so concurrent processes never see or leave a half-written library.

A damaged cache must not break later runs: every cached binary ends with a seal (a marker and
the SHA-256 of the bytes before it; the dynamic loader ignores bytes past the ELF data), checked
before it is loaded. A truncated or corrupted file fails the check and is rebuilt. Temporaries
are named ``.tmp-<pid>-...``; those of processes that died (killed during a compile) are
removed by later compiles once they are ``STALE_TMP_S`` old.
"""
from __future__ import annotations

import hashlib
import json
import linecache
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import CompileError

STATS = {"compiles": 0, "disk_hits": 0, "compile_seconds": 0.0,   # explicit counters, for tests and the CLI
         "damaged": 0}                                             # cached files that failed their seal

#: Seconds after which a temporary of a dead process (or of any process, after a day) is removed.
STALE_TMP_S = 300.0
_SEAL = b"\0TK-SEAL1"             # then 32 bytes: SHA-256 of everything before the marker
_SEAL_LEN = len(_SEAL) + 32


def cache_dir() -> Path:
    """Where compiled kernels live: ``TK_CACHE_DIR`` or ``~/.cache/tinykernels``; where that
    cannot be created or written (read-only, a file, no permission), a per-user directory
    under the system's temporary directory, with a warning (once per configured path)."""
    return _usable_cache_dir(os.environ.get("TK_CACHE_DIR") or None)


def configured_cache_dir() -> Path:
    """The cache directory as configured (``TK_CACHE_DIR`` or the default), not created or
    checked: what ``python -m tinykernels cache`` shows and clears."""
    d = os.environ.get("TK_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "tinykernels"


def _writable(d: Path) -> str | None:
    """None when files can be created in ``d`` (made if missing), else why not."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=temp_prefix("probe-"))
        os.close(fd)
        os.unlink(tmp)
        return None
    except OSError as e:
        return f"{type(e).__name__}: {e}"


@lru_cache(maxsize=None)
def _usable_cache_dir(configured: str | None) -> Path:
    d = configured_cache_dir()
    why = _writable(d)
    if why is None:
        return d
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    fallback = Path(tempfile.gettempdir()) / f"tinykernels-cache-{uid}"
    if _writable(fallback) is not None:
        fallback = Path(tempfile.mkdtemp(prefix="tinykernels-cache-"))   # private to this process
    import warnings
    warnings.warn(f"tinykernels: the kernel cache directory {d} is not usable ({why}); compiled kernels go "
                  f"to {fallback} instead (set TK_CACHE_DIR to a writable directory)", RuntimeWarning, stacklevel=2)
    return fallback


def compile_timeout() -> float:
    """Seconds a compiler run may take (``TK_COMPILE_TIMEOUT``, default 600) before it is killed."""
    try:
        t = float(os.environ.get("TK_COMPILE_TIMEOUT", "600"))
    except ValueError:
        raise ValueError(f"TK_COMPILE_TIMEOUT must be a number of seconds, got {os.environ['TK_COMPILE_TIMEOUT']!r}") from None
    return t if t > 0 else 600.0


def find_compiler() -> list | None:
    """The C compiler command: ``CC`` (may include flags), else cc, gcc or clang."""
    cc = os.environ.get("CC")
    if cc:
        parts = shlex.split(cc)
        return parts if shutil.which(parts[0]) else None
    for name in ("cc", "gcc", "clang"):
        p = shutil.which(name)
        if p:
            return [p]
    return None


#: The kernel features (``runtime.base.kernel_features``: ``Kernel.uses`` and "permuted-doubles") of each
#: probe scope but "all": a kernel gets the flags of every scope whose features it has
#: (``Toolchain.kernel_flags``).
SCOPE_FEATURES = {"grouped": frozenset({"barrier", "localmem", "collective", "uniform"}),   # work groups
                  "float64": frozenset({"permuted-doubles"})}   # may permute vectors of doubles


@dataclass(frozen=True)
class Toolchain:
    cmd: tuple            # compiler command
    version: str          # first line of --version
    flags: tuple          # flags for kernels
    openmp: bool
    cpu: str              # CPU feature fingerprint
    scoped_flags: tuple = ()    # ((scope, flags), ...): miscompile workarounds for some kernels only

    @property
    def identity(self) -> str:
        return hashlib.sha256(json.dumps([self.cmd, self.version, self.flags, self.cpu,
                                          self.scoped_flags]).encode()).hexdigest()

    def kernel_flags(self, uses) -> tuple:
        """The extra flags of a kernel with the features ``uses`` (``kernel_features``): those of each
        scope (SCOPE_FEATURES) it falls in, each flag once."""
        return tuple(dict.fromkeys(f for scope, flags in self.scoped_flags
                                   if SCOPE_FEATURES[scope] & set(uses) for f in flags))


def _cpu_fingerprint() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read(65536)
        m = re.search(r"^(flags|Features)\s*:(.*)$", text, re.M)
        model = re.search(r"^model name\s*:(.*)$", text, re.M)
        s = (m.group(2) if m else "") + (model.group(1) if model else "")
        return platform.machine() + ":" + hashlib.sha1(s.encode()).hexdigest()[:16]
    except OSError:
        return platform.machine() + ":" + platform.processor()


def native_cpu_has(flag: str) -> bool:
    """Whether CPU kernels are compiled for this CPU (``-march=native``) and its
    ``/proc/cpuinfo`` lists ``flag`` (x86: ``"avx512bw"``, ...): the instructions the
    kernels' C then may use. False where either is unknown."""
    try:
        native = "-march=native" in toolchain().flags
    except Exception:       # no compiler
        return False
    return native and flag in _cpu_flags()


@lru_cache(maxsize=None)
def _cpu_flags() -> frozenset:
    """The feature flags ``/proc/cpuinfo`` lists for the first CPU (empty where unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^(flags|Features)\s*:(.*)$", f.read(65536), re.M)
    except OSError:
        return frozenset()
    return frozenset(m.group(2).split()) if m else frozenset()


_BYTEDOT_LEVELS = {"c": 0, "avx2": 1, "vnni": 2}


def bytedot_level_flags(cap: str | None) -> list:
    """``-DTK_BYTEDOT_LEVEL=n``: the SIMD level of ``tk.dot_i8``/``tk.dot_u4i8`` (codegen/c.py;
    ``tk.lookup_u4``/``tk.load_i8`` follow it: AVX-512 at 2, AVX2 at 1),
    fixed when a ``-march=native`` kernel is compiled (such a library is for this CPU anyway),
    so the level is a constant in the C and the compiler folds the other levels away and shares
    work between calls (the activations' loads, Q4_0's zero-point lanes). 2 = AVX-512 VNNI
    and VL, 1 = AVX2, 0 = plain C; ``cap`` (``TK_CPU_BYTEDOT``) lowers it. Without
    ``/proc/cpuinfo`` (or on another architecture): no flag; the library then picks the level
    when it loads (``__builtin_cpu_supports``)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return []
    have = _cpu_flags()
    if "avx2" not in have:
        return []
    lv = 2 if {"avx512_vnni", "avx512vl"} <= have else 1
    lv = min(lv, _BYTEDOT_LEVELS.get(cap, 2))
    return [f"-DTK_BYTEDOT_LEVEL={lv}"]


#: _run's return code for a command killed at its timeout.
TIMED_OUT = -9


def _run(cmd, input: str | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run a compiler (or probe) command, capturing its output. It runs in its own process
    group, killed as a whole after ``timeout`` seconds (default :func:`compile_timeout`): a
    hanging compiler (or a wrapper script whose children keep the pipes open) cannot hang the
    caller. A killed run returns ``TIMED_OUT`` with a message on stderr; a command that cannot
    be started returns 127."""
    import signal
    timeout = compile_timeout() if timeout is None else timeout
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as e:
        return subprocess.CompletedProcess(cmd, 127, "", f"tinykernels: cannot run {cmd[0]}: {e}\n")
    try:
        out, err = p.communicate(input, timeout=timeout)
    except BaseException as e:       # the timeout, or KeyboardInterrupt: never leave the compiler running
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate()
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        return subprocess.CompletedProcess(cmd, TIMED_OUT, "", f"tinykernels: {cmd[0]} did not finish within "
                                           f"{timeout:g} s and was killed (TK_COMPILE_TIMEOUT sets the limit)\n")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _probe(cmd: list) -> dict:
    """Version, -march=native support and OpenMP support of a compiler (slow: run once)."""
    out = _run(cmd + ["--version"])
    if out.returncode in (TIMED_OUT, 127):       # hangs or cannot run: not cached as a probe result
        from ..errors import BackendUnavailable
        raise BackendUnavailable(f"the CPU backend's C compiler {' '.join(cmd)} does not work: {out.stderr.strip()}")
    version = (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else "unknown"
    with tempfile.TemporaryDirectory() as td:
        src = Path(td) / "probe.c"
        src.write_text("#include <omp.h>\nint f(void){return omp_get_max_threads();}\n")
        so = str(Path(td) / "probe.so")
        native = _run(cmd + ["-march=native", "-x", "c", "-fPIC", "-shared", "-o", so, "-"],
                      input="int f(void){return 1;}\n").returncode == 0
        omp_flags = None
        for flags in (["-fopenmp"], ["-Xpreprocessor", "-fopenmp", "-lomp"]):
            if _run(cmd + flags + ["-fPIC", "-shared", "-o", so, str(src)]).returncode == 0:
                omp_flags = flags
                break
        fix = _native_workaround(cmd, td) if native else {"all": []}
    return {"version": version, "native": native, "openmp": omp_flags, "native_fix": fix.pop("all"),
            "native_fix_scoped": fix}


# GCC 12 with -march=native on a CPU with AVX-512 VNNI (or AVX-VNNI) compiles the sum of
# products of two signed bytes, one of them converted from an unsigned byte (C: (int8_t)u),
# to vpdpbusd, which multiplies the first operand as unsigned: wrong sums (kernels computing
# int8 dot products). The probe runs such a loop and, where it comes out wrong, compiles
# without those instructions.
_VNNI_PROBE = r"""
#include <stdint.h>
#include <stdio.h>
__attribute__((noinline)) int32_t f(const uint8_t *restrict d, const int8_t *restrict x, int64_t n) {
    int32_t s = 0;
    for (int64_t j = 0; j < n; ++j) s = s + ((int32_t)((int8_t)d[j])) * ((int32_t)x[j]);
    return s;
}
int main(void) {
    uint8_t d[128]; int8_t x[128];
    for (int j = 0; j < 128; ++j) { d[j] = (uint8_t)(j * 37 + 11); x[j] = (int8_t)(j * 53 - 90); }
    for (int n = 1; n < 128; n += 5) {
        volatile int32_t ref = 0;       /* a loop the vectorizer leaves alone */
        for (int j = 0; j < n; ++j) ref += (d[j] >= 128 ? (int32_t)d[j] - 256 : (int32_t)d[j]) * (int32_t)x[j];
        if (f(d, x, n) != ref) return 1;
    }
    return 0;
}
"""
_VNNI_OFF = ["-mno-avx512vnni", "-mno-avxvnni"]


# GCC 12.2 with -march=native on an AVX-512 CPU (here a Zen 3/4 EPYC, -march=znver3) compiles
# some constant one-operand permutations of eight doubles (a 512-bit VEC_PERM_EXPR) to a
# single in-lane vpermilpd, which cannot move an element across 128-bit lanes: wrong lanes.
# Seen for masks whose 128-bit lanes come from source lanes (0, 2 or 3, 2, 3), e.g.
# {1, 1, 7, 6, 5, 5, 6, 7} -> vpermilpd $183 (the i386 back end's expansion, not the
# vectorizer: the masks in the tree dump are right, and __builtin_shuffle with that mask is
# compiled wrong too). The vectorizers make such permutations from reads of a small array at
# permuted constant indices, in any kernel: a flat kernel's fully unrolled loop over a
# tk.private array (loop-aware SLP inside the item loop, which -fno-tree-slp-vectorize does not
# turn off) as well as a group's item loop over local memory (basic-block SLP). The probe runs
# the flat shape (slpfuzz16: scripts/slp_perm_fuzz.py); with 256-bit vectors (the vectorizers'
# preferred width) no eight-double vector, so no such permutation, is formed.
_PERMUTE_V8DF_PROBE = r"""
#include <stdint.h>
__attribute__((noinline)) void items(const double *restrict x, double *restrict out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        double a[8], b[8];
        for (int64_t j = 0; j < 8; ++j) a[j] = x[8 * i + j] * x[8 * i + j];
        for (int64_t j = 0; j < 8; ++j) b[j] = a[j] * a[(9 - j) % 8] + a[(j + 4) % 8] * a[(j + 4) % 8];
        for (int64_t j = 0; j < 8; ++j) out[8 * i + j] = b[j];
    }
}
int main(void) {
    double x[24], o[24];
    for (int i = 0; i < 24; ++i) x[i] = 0.1 * (i + 1);
    items(x, o, 3);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 8; ++j) {
            const double *a = x + 8 * i;
            volatile double p = (a[j] * a[j]) * (a[(9 - j) % 8] * a[(9 - j) % 8]);
            volatile double q = (a[(j + 4) % 8] * a[(j + 4) % 8]) * (a[(j + 4) % 8] * a[(j + 4) % 8]);
            if (o[8 * i + j] != p + q) return 1;
        }
    return 0;
}
"""

# The first shape the permutation miscompile above was seen in (audit16a): a group's fully
# unrolled item loop after a barrier, b[l] = a[(l + 1) % 8] * a[l] + sin(a[7 - l]) over local
# memory, packed by basic-block SLP into 512-bit vectors: two of the eight items got their
# neighbours' values. With the flags of the probe above (256-bit vectors) it runs right;
# elsewhere (another compiler or CPU where only this shape fails) the float64 scope gets the
# first of its fixes that works.
_SLP_PERMUTE_PROBE = r"""
#include <math.h>
#include <stdint.h>
static inline int64_t md(int64_t a, int64_t b) { int64_t r = a % b; return r != 0 && ((r < 0) != (b < 0)) ? r + b : r; }
static inline __attribute__((always_inline)) void body(const double *restrict x, double *out, int64_t nv) {
    double a1[8], a2[8];
    for (int64_t l = 0; l < nv; ++l) a1[l] = x[l] * x[l];
    for (int64_t l = 0; l < nv; ++l) {
        a2[l] = a1[md(l + 1, 8)] * a1[l];
        a2[l] = a2[l] + sin(a1[7 - l]);
    }
    for (int64_t l = 0; l < nv; ++l) out[l] = a2[l];
}
__attribute__((noinline)) void grp(const double *restrict x, double *out, int64_t nv) {
    if (nv == 8) body(x, out, 8); else body(x, out, nv);
}
int main(void) {
    double x[8], o[8];
    for (int i = 0; i < 8; ++i) x[i] = 0.1 * (i + 1);
    grp(x, o, 8);
    for (int l = 0; l < 8; ++l) {
        volatile double p = (x[(l + 1) % 8] * x[(l + 1) % 8]) * (x[l] * x[l]);
        volatile double q = sin(x[7 - l] * x[7 - l]);
        if (o[l] != p + q) return 1;
    }
    return 0;
}
"""

#: (name, probe program, candidate flags that avoid the miscompile in order of preference, scope):
#: scope "all" adds the flags to every kernel, another scope (SCOPE_FEATURES: "grouped",
#: "float64": kernels that may permute vectors of doubles, passes/permuted_access.py) only to
#: kernels with its features. Probes run in order, each with the flags its
#: scope already has from the probes before it: where "permute-v8df" finds its fix, "slp-permute" runs right with it and adds
#: nothing, so every kernel keeps basic-block SLP (the int8 GEMVs' lane loops need it: 1.5x
#: slower without it, idle A/B, docs/cpu.md "Flags").
_NATIVE_PROBES = (("vnni", _VNNI_PROBE, (_VNNI_OFF,), "all"),
                  ("permute-v8df", _PERMUTE_V8DF_PROBE, (["-mprefer-vector-width=256"],), "float64"),
                  ("slp-permute", _SLP_PERMUTE_PROBE, (["-mprefer-vector-width=256"], ["-fno-tree-slp-vectorize"]),
                   "float64"))


def _probe_runs_right(cmd: list, src: Path, exe: str, extra: list) -> bool | None:
    """Whether ``src`` compiled with -O3 -march=native ``extra`` runs right (exit status 0);
    None where it cannot be built or run."""
    if _run(cmd + ["-O3", "-march=native", "-fwrapv", "-ffp-contract=off", "-fno-math-errno", *extra,
                   "-o", exe, str(src), "-lm"]).returncode != 0:
        return None
    try:
        r = _run([exe], timeout=30)
        return None if r.returncode == TIMED_OUT else r.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return None


def _native_workaround(cmd: list, td: str) -> dict:
    """Extra flags after -march=native that avoid the known miscompiles of this compiler on
    this CPU, by scope ("all" kernels, or those of a SCOPE_FEATURES scope; none for a probe
    program that runs right or cannot be built or run). Each probe runs with the flags its
    kernels already get from the probes before it."""
    out: dict = {"all": [], **{scope: [] for scope in SCOPE_FEATURES}}
    for name, text, fixes, scope in _NATIVE_PROBES:
        src = Path(td) / f"{name}.c"
        src.write_text(text)
        exe = str(Path(td) / name)
        have = out["all"] + (out[scope] if scope != "all" else [])
        if _probe_runs_right(cmd, src, exe, have) is not False:
            continue
        out[scope] += next((list(f) for f in fixes if _probe_runs_right(cmd, src, exe, have + list(f))), [])
    return out


@lru_cache(maxsize=None)
def first_use_notice() -> None:
    """Say once per process, on stderr, that the one-time set-up is running (so that the first
    launch on a machine does not look hung). ``TK_QUIET=1`` silences it;
    ``python -m tinykernels setup`` does the set-up ahead of time."""
    if os.environ.get("TK_QUIET", "0") not in ("", "0"):
        return
    print(f"tinykernels: first use on this machine: probing the C compiler and compiling the launcher "
          f"(once per machine; cached in {cache_dir()})", file=sys.stderr, flush=True)


_PROBE_VERSION = 6      # bumped when the probe learns something new (its disk cache key)


def _probe_cached(cmd: list) -> dict:
    """The probe's result, remembered on disk per compiler binary (path, size, mtime)."""
    exe = shutil.which(cmd[0]) or cmd[0]
    try:
        st = os.stat(os.path.realpath(exe))
        stamp = [os.path.realpath(exe), st.st_size, st.st_mtime_ns, cmd, _PROBE_VERSION, _cpu_fingerprint()]
    except OSError:
        stamp = [exe, 0, 0, cmd, _PROBE_VERSION, _cpu_fingerprint()]
    key = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:24]
    path = cache_dir() / "toolchains" / f"{key}.json"
    data = read_sealed(path) if path.exists() else None
    if data is not None:
        try:
            info = json.loads(data)
        except ValueError:
            info = None
        if _probe_ok(info):
            return info
    first_use_notice()
    info = _probe(cmd)
    cache_write(path, seal(json.dumps(info).encode()))
    return info


def _probe_ok(info) -> bool:
    """Whether a cached probe result has the shape :func:`_probe` writes (a damaged or foreign
    file, even valid JSON, is probed again instead of failing every later run)."""
    return (isinstance(info, dict) and isinstance(info.get("version"), str) and isinstance(info.get("native"), bool)
            and (info.get("openmp") is None or isinstance(info.get("openmp"), list))
            and isinstance(info.get("native_fix", []), list) and isinstance(info.get("native_fix_scoped", {}), dict))


#: GCC vectorizes a loop whose arrays it cannot prove disjoint behind run-time overlap
#: checks, one per (load, store) pair it cannot merge, and gives up beyond 10 of them. The
#: ``restrict`` of tk.Const arrays and the staged stores does not spare those checks (GCC 12
#: honours restrict on parameters, not on the kernels' local pointers), so a kernel reading
#: two arrays at five points each and writing two (the 2-D stencil's tangent: 13 checks) ran
#: scalar. 64 lets such loops vectorize; the checks run once per row block.
GCC_VECTOR_FLAGS = ("--param", "vect-max-version-for-alias-checks=64")

#: GCC 10+ versions a loop nest whose inner stride is a run-time value for "that stride is 1"
#: (-fversion-loops-for-strides, on at -O3). The generated C indexes every array by its shape
#: (``a[i * a_sh1 + j]``), so such a stride is a row length, 1 only for a degenerate extent: the
#: copy is dead code that the real path pays for. In a transpose through a local tile (the
#: tile's write piece, a 16-row block copy with the input's row length as the outer stride) GCC
#: computed the versioned copy's set-up before its test in every group: the group function went
#: from 2381 to 1366 instructions without it, 0.94 -> 0.96 of the C reference, and its cc1 time
#: from 3.2 to 1.9 s (docs/cpu.md "Transposed tile reads").
GCC_LOOP_FLAGS = ("-fno-version-loops-for-strides",)

#: GCC 12.2 at -O3 miscompiles a loop that zeroes local per-item arrays and also reads and then
#: zeroes global elements: loop distribution (-ftree-loop-distribute-patterns) turns the zeroing
#: into a memset and splits the rest into loops, and puts the loop that reads ``dy[gl]`` after
#: the one that stores ``dy[gl] = 0.0``, so the read sees 0 (:data:`LDIST_PROBE`). The adjoint
#: of a kernel with a collective has exactly that shape (its item loop zeroes the adjoints kept
#: per item, reads each output's seed and consumes it): fuzz seed 90500158 lost the gradient
#: through a ``group_reduce`` on the CPU only (adx23). Without the pattern the loop is not
#: distributed; the zeroing stays a store in the vectorized loop.
GCC_LDIST_FLAGS = ("-fno-tree-loop-distribute-patterns",)

#: A C program that exits 1 where the compiler has the loop-distribution miscompile above
#: (GCC 12.2 -O3; fine at -O2 or with GCC_LDIST_FLAGS). tests/test_autodiff_audit23.py builds
#: it with the toolchain's flags.
LDIST_PROBE = r"""
#include <stdint.h>
static inline int64_t mod3(int64_t a) { int64_t r = a % 3; return (r != 0 && ((r ^ 3) < 0)) ? r + 3 : r; }
static inline __attribute__((always_inline)) void body(double *dy0, double *dy1, const double *dacc,
                                                       double *out, int64_t g, int64_t n) {
    double d_v2[2], d_v3[2], a5[2];
    for (int64_t l = 0; l < n; ++l) {
        const int64_t gl = g * 2 + l;
        double a3, a4;
        d_v2[l] = 0.0;
        d_v3[l] = 0.0;
        a3 = dy1[gl];
        dy1[gl] = 0.0;
        d_v3[l] = d_v3[l] + a3;
        a4 = dy0[gl];
        dy0[gl] = 0.0;
        d_v2[l] = d_v2[l] + a4;
        a5[l] = dacc[mod3(gl)];
    }
    for (int64_t l = 0; l < n; ++l) {
        d_v3[l] = d_v3[l] + (a5[l] != 0.0 ? a5[l] * 0.5 : 0.0);
        out[l] = d_v3[l] + d_v2[l];
    }
}
__attribute__((noinline)) void run(double *dy0, double *dy1, const double *dacc, double *out, int64_t g, int64_t n) {
    if (n == 2) body(dy0, dy1, dacc, out, g, 2); else body(dy0, dy1, dacc, out, g, n);
}
int main(void) {
    double dy0[2] = {0, 0}, dy1[2] = {1, 0}, dacc[3] = {0, 0, 0}, out[2] = {0, 0};
    run(dy0, dy1, dacc, out, 0, 2);
    return out[0] == 1.0 && out[1] == 0.0 ? 0 : 1;
}
"""


def gcc_major(version: str) -> int:
    """The major version of a GCC ``--version`` line (``cc (Debian 12.2.0-14) 12.2.0`` -> 12); 0
    when it does not say."""
    m = re.match(r"\S+ \(.*?\) (\d+)\.", version)
    return int(m.group(1)) if m else 0


def is_gcc(version: str) -> bool:
    """Whether a compiler's ``--version`` line is GCC's (``gcc (GCC) 13.2.1``, ``cc (Debian
    12.2.0-14) 12.2.0``), not clang's or another compiler's that calls itself cc."""
    low = version.lower()
    return "clang" not in low and "intel" not in low and bool(re.match(r"\S+ \(.*\) \d", version))


@lru_cache(maxsize=None)
def _toolchain(cc_env: str | None, cache: str, use_openmp: bool = True) -> Toolchain:
    cmd = find_compiler()
    if cmd is None:
        from ..errors import BackendUnavailable
        raise BackendUnavailable("the CPU backend needs a C compiler: install gcc or clang, or set CC")
    info = _probe_cached(cmd)
    flags = ["-O3", "-fPIC", "-shared", "-std=gnu11", "-fwrapv", "-ffp-contract=off", "-fno-math-errno",
             "-fno-strict-aliasing", "-w"]
    if is_gcc(info["version"]):
        flags += GCC_VECTOR_FLAGS
        if gcc_major(info["version"]) >= 10:
            flags += GCC_LOOP_FLAGS
        flags += GCC_LDIST_FLAGS
    scoped: tuple = ()
    if info["native"]:
        flags.append("-march=native")
        flags += info.get("native_fix", [])
        scoped = tuple((scope, tuple(f)) for scope, f in sorted(info.get("native_fix_scoped", {}).items()) if f)
        flags += bytedot_level_flags(os.environ.get("TK_CPU_BYTEDOT"))
    openmp = bool(info["openmp"]) and use_openmp
    flags += info["openmp"] if openmp else ["-pthread"]     # without OpenMP: the pthread fallback
    return Toolchain(tuple(cmd), info["version"], tuple(flags), openmp, _cpu_fingerprint(), scoped)


def toolchain() -> Toolchain:
    """The compiler this process uses (probed once per process, and once per machine on disk)."""
    return _toolchain(os.environ.get("CC"), str(cache_dir()), os.environ.get("TK_OPENMP", "1") != "0")


def seal(data: bytes) -> bytes:
    """``data`` followed by its seal (see the module docstring)."""
    return data + _SEAL + hashlib.sha256(data).digest()


def unseal(blob: bytes) -> bytes | None:
    """The data of a sealed blob, or None when the seal is missing or does not match."""
    if len(blob) < _SEAL_LEN or blob[-_SEAL_LEN:-32] != _SEAL:
        return None
    data = blob[:-_SEAL_LEN]
    return data if hashlib.sha256(data).digest() == blob[-32:] else None


def read_sealed(path: Path) -> bytes | None:
    """The data of a sealed cache file; None when it is missing, truncated or corrupted."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    data = unseal(blob)
    if data is None:
        STATS["damaged"] += 1
    return data


def seal_file(path: str | Path) -> None:
    """Append the seal to a file the compiler wrote (before it is renamed into the cache)."""
    with open(path, "r+b") as f:
        data = f.read()
        f.write(_SEAL + hashlib.sha256(data).digest())


def temp_prefix(name: str = "") -> str:
    """The prefix of this process's temporaries in the cache (its pid marks them as its own)."""
    return f".tmp-{os.getpid()}-{name}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                   # exists, owned by someone else
        return True
    return True


def clean_stale_temporaries(directory: Path, now: float | None = None) -> int:
    """Remove the temporaries in ``directory`` that processes killed during a write left behind:
    ``STALE_TMP_S`` old and their process gone (or a day old). Returns how many were removed."""
    import time
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for e in entries:
        if not e.name.startswith(".tmp-"):
            continue
        m = re.match(r"\.tmp-(\d+)-", e.name)
        try:
            age = now - e.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        pid = int(m.group(1)) if m else None
        dead = pid is None or (pid != os.getpid() and not _pid_alive(pid))
        if age > STALE_TMP_S and (dead or age > 86400):
            try:
                os.unlink(e.path)
                removed += 1
            except OSError:
                pass
    return removed


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix())
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def cache_write(path: Path, data: bytes) -> bool:
    """Write a cache file atomically; a failure (a full disk, a directory that became read-only)
    is a warning, not an error: the cache only saves time. Returns whether it was written."""
    try:
        _atomic_write(path, data)
        return True
    except OSError as e:
        import warnings
        warnings.warn(f"tinykernels: could not write the cache file {path} ({type(e).__name__}: {e}); "
                      "continuing without caching it", RuntimeWarning, stacklevel=3)
        return False


def cached_binary(path: Path | None, stats: dict, build) -> bytes:
    """The binary sealed in cache file ``path``, or ``build()``'s (a device compiler's output,
    written to ``path`` atomically and sealed; None: no caching). A damaged file is built
    again. ``stats``: its ``disk_hits`` and ``compiles`` are counted."""
    if path is not None and path.exists():
        data = read_sealed(path)               # None: truncated or corrupted, compile it again
        if data is not None:
            stats["disk_hits"] += 1
            return data
    data = build()
    stats["compiles"] += 1
    if path is not None:
        cache_write(path, seal(data))
    return data


def library_path(source: str, tc: Toolchain, extra_flags=()) -> Path:
    key = hashlib.sha256((tc.identity + "\0" + " ".join(extra_flags) + "\0" + source).encode()).hexdigest()
    return cache_dir() / "kernels" / key[:2] / f"{key}.so"


#: where a compiler crash that compiling without the loop vectorizer avoids says it happened
VECTORIZER_ICE = "tree-vect"


def compile_library(source: str, name: str, extra_flags=(), tc: Toolchain | None = None) -> Path:
    """Compile C source to a shared library through the disk cache; returns its path (a cached
    library is used only when its seal matches; a damaged one is rebuilt)."""
    import time
    tc = tc or toolchain()
    path = library_path(source, tc, extra_flags)
    if path.exists() and read_sealed(path) is not None:
        STATS["disk_hits"] += 1
        return path
    t0 = time.perf_counter()
    tmp_src = tmp_so = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temporaries(path.parent)
        fd, tmp_src = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(name[:64] + "-"), suffix=".c")
        tmp_so = tmp_src[:-2] + ".so"
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        cmd = list(tc.cmd) + list(tc.flags) + list(extra_flags) + ["-o", tmp_so, tmp_src, "-lm"]
        r = _run(cmd)
        if r.returncode not in (0, TIMED_OUT) and "internal compiler error" in r.stderr and VECTORIZER_ICE in r.stderr:
            # GCC 12's vectorizer crashed on valid generated code (gradfz22: the grouped adjoint
            # of fuzzer seed 95000006, "in vect_get_vec_defs_for_operand"): once more without
            # the loop vectorizer, which that crash is in; the library is as correct, slower
            r = _run(cmd[:-4] + ["-fno-tree-vectorize"] + cmd[-4:])
        if r.returncode == TIMED_OUT:
            raise CompileError(r.stderr.strip().removeprefix("tinykernels: "), kernel=name)
        if r.returncode != 0:
            raise _compile_error(name, source, r.stderr, tc, extra_flags)
        seal_file(tmp_so)
        os.replace(tmp_so, path)
    except OSError as e:              # a full disk, a cache directory that became read-only
        raise CompileError(f"could not write to the kernel cache {path.parent} "
                           f"({type(e).__name__}: {e}); free some space or set TK_CACHE_DIR", kernel=name) from e
    finally:
        for p in (tmp_src, tmp_so):
            try:
                if p:
                    os.unlink(p)
            except OSError:
                pass
    STATS["compiles"] += 1
    STATS["compile_seconds"] += time.perf_counter() - t0
    return path


def _python_error(stderr: str) -> tuple[str, int, str] | None:
    """(file, line, message) of the first error at a Python line. An error reported elsewhere
    (``<command-line>``: a macro from ``CC``'s flags) is placed at the first Python line the
    compiler's notes name, with the first error's message."""
    py = re.search(r'^(.*?\.py):(\d+):(?:\d+:)?\s*error:\s*(.*)$', stderr, re.M)
    if py is not None:
        return py.group(1), int(py.group(2)), py.group(3)
    err = re.search(r'error:\s*(.*)$', stderr, re.M)
    at = re.search(r'^(.*?\.py):(\d+):', stderr, re.M)
    return (at.group(1), int(at.group(2)), err.group(1)) if err and at else None


def _compile_error(name: str, source: str, stderr: str, tc: Toolchain, extra_flags) -> CompileError:
    """Show the Python line (from #line) and the generated lines the compiler rejected."""
    py = _python_error(stderr)
    plain = re.sub(r'^#line .*$', "", source, flags=re.M)
    shown = ""
    with tempfile.TemporaryDirectory() as td:
        p = Path(td) / f"{name}.c"
        p.write_text(plain)
        r = _run(list(tc.cmd) + list(tc.flags) + list(extra_flags) + ["-o", str(Path(td) / "x.so"), str(p)])
        m = (re.search(rf'{re.escape(str(p))}:(\d+):(?:\d+:)?\s*error:', r.stderr)
             or re.search(rf'{re.escape(str(p))}:(\d+):', r.stderr))   # an error in a macro: its note
        if m:
            ln = int(m.group(1))
            lines = plain.splitlines()
            lo, hi = max(0, ln - 3), min(len(lines), ln + 2)
            shown = "\n".join(f"{'>' if k + 1 == ln else ' '} {k + 1:5d} | {lines[k]}" for k in range(lo, hi))
    msg = f"the C compiler rejected the generated code for kernel '{name}'"
    if py:
        msg += f" (from {py[0]}:{py[1]}): {py[2]}"
    else:
        msg += ":\n" + "\n".join(stderr.strip().splitlines()[:10])
    if shown:
        msg += "\ngenerated source:\n" + shown
    if not py:
        return CompileError(msg, kernel=name)
    text = linecache.getline(py[0], py[1]) or None          # the Python line itself, as the frontend's errors show it
    col = len(text) - len(text.lstrip()) if text else 0
    return CompileError(msg, py[0], py[1], col, source_line=text, kernel=name)


def python_build_info() -> dict:
    """What a CPython extension build needs: include dirs and the module suffix."""
    import sysconfig
    import numpy as np
    return {"include": sysconfig.get_paths().get("include"), "numpy_include": np.get_include(),
            "suffix": sysconfig.get_config_var("EXT_SUFFIX") or ".so", "version": sys.version,
            "numpy": np.__version__}
