"""NVRTC: compiling CUDA C++ to cubins (``sm_XX``) or PTX (``compute_XX``), with a disk cache.

This needs no GPU, only ``cuda-bindings`` and the NVRTC library, so ``tk.CUDA``'s code can
be compiled and checked on any machine (the CUDA runtime, :mod:`.cuda`, re-exports these
names). Compiled kernels are cached under the CPU's cache directory (``TK_CACHE_DIR``/cuda),
keyed by the source, the NVRTC version, the architecture and the options, written
atomically and sealed (a damaged file is compiled again).
"""
from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache

from ..errors import BackendUnavailable, CompileError

HINT = ("pip install 'tinykernels[cuda]' (cuda-bindings and nvidia-cuda-nvrtc; for a CUDA 12 driver "
        "(< 580): pip install 'cuda-bindings>=12.8,<13' nvidia-cuda-nvrtc-cu12) and an NVIDIA driver")
NVRTC_OPTIONS = ("--fmad=false",)       # no contraction into FMA: float results match NumPy's
FASTMATH_NVRTC_OPTIONS = ("--fmad=true",)   # @tk.kernel(fastmath=True): contraction allowed
STATS = {"compiles": 0, "disk_hits": 0}


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise BackendUnavailable(f"the CUDA backend needs cuda-bindings: {HINT} ({e})") from None
    return nvrtc



@lru_cache(maxsize=None)
def nvrtc_version() -> tuple:
    """(major, minor) of the NVRTC library cuda-bindings loads."""
    nv = _nvrtc()
    try:
        res = nv.nvrtcVersion()
    except Exception as e:  # the library itself is missing (nvidia-cuda-nvrtc not installed)
        raise BackendUnavailable(f"NVRTC could not be loaded: {HINT} ({e})") from None
    major, minor = _nv_ok(res, "nvrtcVersion")
    return int(major), int(minor)


@lru_cache(maxsize=None)
def supported_archs() -> tuple:
    """The sm_XX numbers (e.g. 80, 90) this NVRTC can compile for."""
    try:
        return tuple(int(a) for a in _nv_ok(_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))
    except AttributeError:      # very old NVRTC
        return (75, 80, 86, 89, 90)


def nvrtc_available() -> tuple:
    """(True, version text) when NVRTC can compile here, else (False, why)."""
    try:
        major, minor = nvrtc_version()
    except BackendUnavailable as e:
        return False, str(e)
    return True, f"NVRTC {major}.{minor}"


def _nv_ok(res, what):
    err, vals = res[0], res[1:]
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {getattr(err, 'name', err)}")
    return vals[0] if len(vals) == 1 else vals


def normalize_arch(arch) -> str:
    """``sm_90`` / ``compute_90`` / ``90`` / ``(9, 0)`` -> ``sm_90`` or ``compute_90``."""
    if isinstance(arch, tuple):
        return f"sm_{arch[0]}{arch[1]}"
    s = str(arch).strip().lower()
    if s.isdigit():
        return f"sm_{s}"
    m = re.fullmatch(r"(sm|compute)_(\d+)([af]?)", s)
    if not m:
        raise ValueError(f"unknown CUDA architecture {arch!r}: expected e.g. 'sm_90' (cubin) or 'compute_90' (PTX)")
    return s


def cubin_path(source: str, arch: str, options=()) -> os.PathLike:
    from .compiler import cache_dir
    major, minor = nvrtc_version()
    key = hashlib.sha256("\0".join([f"nvrtc-{major}.{minor}", arch, " ".join(options), source]).encode()).hexdigest()
    ext = "ptx" if arch.startswith("compute_") else "cubin"
    return cache_dir() / "cuda" / key[:2] / f"{key}.{ext}"


def compile_cuda(source: str, arch: str = "sm_90", name: str = "kernel", options=(), cache: bool = True) -> bytes:
    """Compile CUDA C++ with NVRTC: a cubin for ``sm_XX``, PTX for ``compute_XX``.

    Results are cached on disk (see :func:`cubin_path`). A compile error raises
    ``tk.CompileError`` with NVRTC's log, the Python line (from the ``#line`` directives)
    and the failing generated lines."""
    from .compiler import cached_binary
    arch = normalize_arch(arch)
    options = tuple(options)
    base = tuple(o for o in NVRTC_OPTIONS if not (o.startswith("--fmad=") and any(x.startswith("--fmad=") for x in options)))
    opts = base + options

    def build() -> bytes:
        ok, log, data = _compile(source, arch, name, opts)
        if not ok:
            raise _compile_error(name, source, log, arch, opts)
        return data
    return cached_binary(cubin_path(source, arch, opts) if cache else None, STATS, build)


def _compile(source: str, arch: str, name: str, opts) -> tuple:
    """(ok, log, binary): in this process, or in the NVRTC worker process where an LLVM-based
    driver may share this process (see :mod:`.nvrtc_worker`)."""
    from . import nvrtc_worker
    if nvrtc_worker.isolation_wanted():
        nvrtc_version()                  # a clear BackendUnavailable here, not in the worker
        return nvrtc_worker.compile_isolated(source, arch, name, opts)
    return _nvrtc_compile(source, arch, name, opts)


def _nvrtc_compile(source: str, arch: str, name: str, opts) -> tuple:
    """(ok, log, binary) of one NVRTC compile."""
    nv = _nvrtc()
    nvrtc_version()                      # a clear BackendUnavailable when the library is missing
    prog = _nv_ok(nv.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        args = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in opts]
        err, = nv.nvrtcCompileProgram(prog, len(args), args)
        size = _nv_ok(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        _nv_ok(nv.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.rstrip(b"\0").decode(errors="replace")
        if int(err) != 0:
            return False, log or getattr(err, "name", str(err)), b""
        if arch.startswith("compute_"):
            size = _nv_ok(nv.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            out = b" " * size
            _nv_ok(nv.nvrtcGetPTX(prog, out), "nvrtcGetPTX")
        else:
            size = _nv_ok(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            out = b" " * size
            _nv_ok(nv.nvrtcGetCUBIN(prog, out), "nvrtcGetCUBIN")
        return True, log, bytes(out)
    finally:
        nv.nvrtcDestroyProgram(prog)


def _compile_error(name: str, source: str, log: str, arch: str, opts) -> CompileError:
    """NVRTC's log, the Python line it points at, and the generated lines it rejected."""
    py = re.search(r'^(.*?\.py)\((\d+)\): (?:catastrophic )?error:\s*(.*)$', log, re.M)
    plain = re.sub(r'^#line .*$', "", source, flags=re.M)
    shown = ""
    if plain != source:
        _, log2, _ = _compile(plain, arch, name, opts)
    else:
        log2 = log
    m = re.search(rf'^{re.escape(name)}\.cu\((\d+)\): (?:catastrophic )?error', log2, re.M)
    if m:
        ln = int(m.group(1))
        lines = plain.splitlines()
        lo, hi = max(0, ln - 3), min(len(lines), ln + 2)
        shown = "\n".join(f"{'>' if k + 1 == ln else ' '} {k + 1:5d} | {lines[k]}" for k in range(lo, hi))
    msg = f"NVRTC rejected the generated CUDA code for kernel '{name}' ({arch})"
    if py:
        msg += f" (from {py.group(1)}:{py.group(2)}): {py.group(3)}"
    errors = [ln for ln in log.splitlines() if "error" in ln] or log.strip().splitlines()
    msg += ":\n" + "\n".join(errors[:10])
    if shown:
        msg += "\ngenerated source:\n" + shown
    return CompileError(msg, py.group(1) if py else None, int(py.group(2)) if py else None, 0, kernel=name)


def choose_arch(cc: tuple, driver_version: int | None = None) -> str:
    """What to compile for a device of compute capability ``cc``: its own cubin when this
    NVRTC knows the architecture; PTX for the newest architecture it knows when the device
    is newer (the driver JIT-compiles it, which needs a driver at least as new as NVRTC)."""
    want = cc[0] * 10 + cc[1]
    archs = supported_archs()
    if driver_version is not None and nvrtc_version()[0] > driver_version // 1000:
        major, minor = nvrtc_version()
        raise BackendUnavailable(
            f"NVRTC {major}.{minor} makes code for CUDA {major} drivers, but this driver supports CUDA "
            f"{driver_version // 1000}.{driver_version % 1000 // 10}: upgrade the NVIDIA driver, or install the "
            f"CUDA {driver_version // 1000} packages: pip install 'cuda-bindings>={driver_version // 1000},"
            f"<{driver_version // 1000 + 1}' nvidia-cuda-nvrtc-cu{driver_version // 1000}")
    if want in archs:
        return f"sm_{want}"
    older = [a for a in archs if a <= want]
    if not older:
        major, minor = nvrtc_version()
        raise BackendUnavailable(f"NVRTC {major}.{minor} cannot compile for sm_{want} (it supports "
                                 f"sm_{min(archs)} to sm_{max(archs)}); for older GPUs install NVRTC 12: "
                                 "pip install nvidia-cuda-nvrtc-cu12 'cuda-bindings>=12.8,<13'")
    if driver_version is not None:
        nv = nvrtc_version()
        if (driver_version // 1000, driver_version % 1000 // 10) < nv:
            raise BackendUnavailable(
                f"sm_{want} is newer than NVRTC {nv[0]}.{nv[1]} knows, and its PTX cannot be JIT-compiled by "
                f"this driver (CUDA {driver_version // 1000}.{driver_version % 1000 // 10}): upgrade "
                "nvidia-cuda-nvrtc to a version that supports this GPU")
    return f"compute_{max(older)}"


if __name__ == "__main__":          # the NVRTC worker process (see nvrtc_worker.py)
    from .nvrtc_worker import serve
    serve(_nvrtc_compile)
