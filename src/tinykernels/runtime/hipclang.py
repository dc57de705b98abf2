"""Checking generated HIP C++ with the system's clang: device-only compiles to AMD GPU
assembly, no GPU, no ROCm install and no hiprtc needed.

``tk.ROCm`` compiles with hiprtc on the user's machine; CI and the fuzzer cannot, so they
compile the same text with a clang that has the AMDGPU target (Debian 12's ``clang-15``)
against the HIP headers (Debian's ``libamdhip64-dev``, ``/usr/include/hip``):

    clang -x hip --offload-arch=gfx90a --cuda-device-only -nogpuinc -nogpulib
          -include __clang_hip_runtime_wrapper.h -ffp-contract=off -O3 -S

``-S`` stops at the assembly: the front end, the AMDGPU back end (instruction selection,
register allocation) and the kernel metadata all run; only the final link with ROCm's
device libraries (the math functions' bodies) is left out. ``TK_HIP_CLANG`` names the
clang to use and ``TK_HIP_CLANG_FLAGS`` adds flags (e.g. ``-I/opt/rocm/include``).

Each clang run spends about half a second parsing the HIP headers, so checking many kernels
(the fuzzer, the conformance suite) goes through :func:`compile_hip_clang_batch`: the
kernels' sources, unchanged, in one translation unit (:func:`batch_source`: each in a
namespace of its own, its ``tk_kernel`` renamed by a macro, and every macro it defines
restored afterwards with ``push_macro``/``pop_macro``, so that each kernel sees the
preprocessor state it sees alone), compiled once per architecture. When clang rejects a
batch, it is split in halves until each rejected kernel is compiled alone, so a failure is
reported exactly as :func:`compile_hip_clang` reports it for that kernel.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from functools import lru_cache

from ..errors import CompileError
from .device import clang_log_error

FLAGS = ("--cuda-device-only", "-nogpuinc", "-nogpulib", "-include", "__clang_hip_runtime_wrapper.h",
         "-ffp-contract=off", "-O3", "-S")
ARCHS = ("gfx90a", "gfx1100")         # CDNA2 (wavefront 64) and RDNA3 (wavefront 32)
_CANDIDATES = ("clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang")   # gfx1100 needs LLVM 15+


def _command(arch: str, out: str = "-") -> list:
    cc = os.environ.get("TK_HIP_CLANG") or _find_clang()
    return [cc, "-x", "hip", f"--offload-arch={arch}", *FLAGS,
            *shlex.split(os.environ.get("TK_HIP_CLANG_FLAGS", "")), "-o", out, "-"]


@lru_cache(maxsize=None)
def _find_clang() -> str:
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return "clang"


@lru_cache(maxsize=None)
def hip_clang_available() -> tuple:
    """(True, what) when clang compiles HIP for AMD GPUs here, else (False, why)."""
    probe = '#include <hip/hip_runtime.h>\nextern "C" __global__ void k(float *p) { p[threadIdx.x] = 1.0f; }\n'
    try:
        r = subprocess.run(_command(ARCHS[0]), input=probe, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"no clang with the AMDGPU target ({e}); apt-get install clang libamdhip64-dev"
    if r.returncode != 0:
        return False, ("clang cannot compile HIP here (apt-get install clang libamdhip64-dev): "
                       + (r.stderr.strip().splitlines() or ["?"])[-1])
    ver = subprocess.run([_command(ARCHS[0])[0], "--version"], capture_output=True, text=True).stdout
    return True, (ver.splitlines() or ["clang"])[0]


def compile_hip_clang(source: str, arch: str = ARCHS[0], name: str = "kernel") -> str:
    """AMDGPU assembly of HIP C++ ``source`` for ``arch``; ``tk.CompileError`` with clang's
    diagnostics (and the Python line the ``#line`` directives point at) when it is rejected."""
    r = subprocess.run(_command(arch), input=source, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise clang_log_error(f"clang rejected the generated HIP code for kernel '{name}' ({arch})", r.stderr, name)
    return r.stdout


_MACRO = re.compile(r"^[ \t]*#[ \t]*(?:define|undef)[ \t]+(\w+)", re.M)


def batch_source(sources) -> str:
    """One HIP translation unit holding every source of ``sources`` as it is: source ``i`` in
    ``namespace tk_batch_i`` with ``tk_kernel`` renamed ``tk_kernel_i``, the macros it
    (re)defines saved before it and restored after it, so no kernel sees another's."""
    out = ["#include <hip/hip_runtime.h>"]       # include-guarded: the sources' own #include is then empty
    for i, src in enumerate(sources):
        names = sorted(set(_MACRO.findall(src)) | {"tk_kernel"})
        out += [f'#pragma push_macro("{n}")' for n in names]
        out += [f"#define tk_kernel tk_kernel_{i}", f"namespace tk_batch_{i} {{", src, "}"]
        out += [f'#pragma pop_macro("{n}")' for n in reversed(names)]
    return "\n".join(out) + "\n"


def compile_hip_clang_batch(sources, arch: str = ARCHS[0], names=None) -> list:
    """Compile every HIP C++ source of ``sources`` for ``arch`` in as few clang runs as
    possible; per source, None (it compiles) or the ``tk.CompileError`` that
    :func:`compile_hip_clang` raises for it alone (``names``: the kernels' names)."""
    sources = list(sources)
    names = list(names) if names is not None else ["kernel"] * len(sources)
    out: list = [None] * len(sources)

    def check(idx: list) -> None:
        if len(idx) == 1:
            try:
                compile_hip_clang(sources[idx[0]], arch, names[idx[0]])
            except CompileError as e:
                out[idx[0]] = e
            return
        r = subprocess.run(_command(arch, os.devnull), input=batch_source([sources[i] for i in idx]),
                           capture_output=True, text=True, timeout=600 + 10 * len(idx))
        if r.returncode != 0:                     # find the kernels clang rejects
            half = len(idx) // 2
            check(idx[:half])
            check(idx[half:])

    if sources:
        check(list(range(len(sources))))
    return out


def kernel_args(asm: str) -> list:
    """The ``tk_kernel`` arguments' (offset, size, value kind) from the assembly's AMDGPU
    metadata: the ABI the runtime's argument buffer must match."""
    m = re.search(r"\.args:\s*\n(.*?)\n\s*\.group_segment_fixed_size", asm, re.S)
    if not m:
        return []
    out = []
    for item in re.split(r"\n\s*- ", "\n" + m.group(1))[1:]:
        off = re.search(r"\.offset:\s*(\d+)", item)
        size = re.search(r"\.size:\s*(\d+)", item)
        kind = re.search(r"\.value_kind:\s*(\w+)", item)
        if off and size and kind and not kind.group(1).startswith("hidden"):
            out.append((int(off.group(1)), int(size.group(1)), kind.group(1)))
    return out
