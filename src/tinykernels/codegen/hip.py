"""HIP C++ for hiprtc (AMD GPUs), from the CUDA renderer: what differs is a table of strings.

HIP is CUDA's programming model with AMD's names, so :class:`HIPRenderer` subclasses
:class:`~tinykernels.codegen.cuda.CUDARenderer` (same geometry, parameters, parameter
layout, masking, collectives and software float16/bfloat16/fp8 conversions: results match
NumPy bit for bit as on CUDA) and changes only:

* the wavefront: 64 lanes on gfx9 (GCN, CDNA: gfx90a, gfx942) and 32 on RDNA (gfx10+), a
  parameter of the render (:func:`wave_size` of the target architecture); a kernel with
  collectives refuses to compile (``#error``) for an architecture of the other wave size
  (kernels without them do not depend on it);
* shuffles: HIP's ``__shfl_down``/``__shfl_up``/``__shfl`` take no lane mask (they run over
  the whole wavefront; the collectives already ignore lanes past a partial wavefront);
* atomics: HIP has ``atomicAdd`` on ``double`` everywhere; signed 64-bit ``atomicMin``/
  ``atomicMax`` are compare-and-swap loops (ROCm before 5.5 has only the unsigned ones);
* the fixed-width integer types: hiprtc and ``<hip/hip_runtime.h>`` define some of them,
  differently across ROCm versions (``int64_t`` is ``long long`` in hiprtc 5.2, ``long``
  with glibc), so the names are macros for tinykernels' own typedefs and never clash.

The translation unit includes ``<hip/hip_runtime.h>`` unless hiprtc compiles it (hiprtc
pre-includes it), so the same text compiles with ``hipcc``/``clang -x hip`` (CI checks it
with Debian's clang and ROCm headers, see tests/test_rocm.py).
"""
from __future__ import annotations

import re
from functools import lru_cache

from ..ir import nodes as N
from .clike import portable_helpers
from .cuda import _DEBUG, _LIBM, CUDARenderer, _float_atomics, param_layout
from .prelude import prelude

DEFAULT_ARCH = "gfx90a"          # what kernel.source("ROCm", ...) renders for without a device

_INTS = [("int8_t", "signed char"), ("uint8_t", "unsigned char"), ("int16_t", "short"),
         ("uint16_t", "unsigned short"), ("int32_t", "int"), ("uint32_t", "unsigned int"),
         ("int64_t", "long long"), ("uint64_t", "unsigned long long")]
_LIMITS = [("INT64_C(x)", "(x##LL)"), ("UINT64_C(x)", "(x##ULL)"), ("INT8_MIN", "(-128)"), ("INT8_MAX", "127"),
           ("INT16_MIN", "(-32768)"), ("INT16_MAX", "32767"), ("INT32_MIN", "(-2147483647 - 1)"),
           ("INT32_MAX", "2147483647"), ("INT64_MIN", "(-INT64_C(9223372036854775807) - 1)"),
           ("INT64_MAX", "INT64_C(9223372036854775807)"), ("UINT8_MAX", "255"), ("UINT16_MAX", "65535"),
           ("UINT32_MAX", "4294967295u"), ("UINT64_MAX", "UINT64_C(18446744073709551615)")]


@lru_cache(maxsize=None)
def _header(wave: int | None) -> str:
    """The includes and types; with ``wave`` (kernels whose collectives depend on it), an
    ``#error`` when the compiler targets wavefronts of another size."""
    out = ["#if !defined(__HIPCC_RTC__)", "#include <hip/hip_runtime.h>", "#endif"]
    if wave is not None:
        out += [f"#if defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE != {wave}",
                f'#error "tinykernels rendered this kernel for wavefronts of {wave} lanes: render it for the '
                'target architecture"', "#endif"]
    for name, ty in _INTS:
        out += [f"typedef {ty} tk_{name};", f"#undef {name}", f"#define {name} tk_{name}"]
    for name, val in _LIMITS:
        out += [f"#undef {name.partition('(')[0]}", f"#define {name} {val}"]
    out += ["#ifndef INFINITY", "#define INFINITY __int_as_float(0x7f800000)", "#endif",
            "#ifndef NAN", "#define NAN __int_as_float(0x7fffffff)", "#endif",
            "#define TK_INLINE static __device__ __forceinline__"]
    return "\n".join(out) + "\n"


@lru_cache(maxsize=None)
def _shuffles() -> str:
    """Overloads of the wavefront shuffles for every compute type. The mask argument keeps
    the CUDA renderer's call shape; HIP's shuffles have none."""
    out = []
    native = ["int", "unsigned int", "long long", "unsigned long long", "float", "double"]
    narrow = [("bool", "int"), ("int8_t", "int"), ("uint8_t", "unsigned int"), ("int16_t", "int"),
              ("uint16_t", "unsigned int")]
    for fn, hip in (("down", "__shfl_down"), ("up", "__shfl_up"), ("idx", "__shfl")):
        for t in native:
            out.append(f"TK_INLINE {t} tk_shfl_{fn}(unsigned long long m, {t} v, int o) "
                       f"{{ (void)m; return {hip}(v, o); }}")
        for t, w in narrow:
            out.append(f"TK_INLINE {t} tk_shfl_{fn}(unsigned long long m, {t} v, int o) "
                       f"{{ (void)m; return ({t}){hip}(({w})v, o); }}")
    return "\n".join(out) + "\n"


@lru_cache(maxsize=None)
def _i64_minmax() -> str:
    """Signed 64-bit atomic min/max as compare-and-swap loops (a value that does not change
    the cell is not written)."""
    out = []
    for op, cond in (("min", "v < o"), ("max", "v > o")):
        out.append(f"TK_INLINE long long tk_atomic_{op}_i64(long long *p, long long v) {{ "
                   "unsigned long long *q = (unsigned long long *)p; unsigned long long old = *q; "
                   f"while (1) {{ long long o = (long long)old; if (!({cond})) return o; "
                   "unsigned long long prev = atomicCAS(q, old, (unsigned long long)v); "
                   "if (prev == old) return o; old = prev; } }")
    return "\n".join(out) + "\n"


def wave_size(arch: str) -> int:
    """Lanes per wavefront HIP compiles for on ``arch`` (``gfx90a``, ``gfx1100:xnack-``...):
    64 on GCN/CDNA (gfx6 to gfx9, gfx90a, gfx942), 32 on RDNA (gfx10, gfx11, gfx12)."""
    m = re.fullmatch(r"gfx(\d+?)([0-9a-f]{2})(:.*)?", str(arch).strip().lower())
    if not m:
        raise ValueError(f"unknown AMD GPU architecture {arch!r}: expected e.g. 'gfx90a', 'gfx942' or 'gfx1100'")
    return 32 if int(m.group(1)) >= 10 else 64


class HIPRenderer(CUDARenderer):
    """HIP C++ (hiprtc) for ``tk.ROCm()``: the CUDA renderer with AMD's wavefronts,
    shuffles and atomics."""
    mask_type = "unsigned long long"
    safe_conversions = False      # CUDA's conversion intrinsics and its ptxas workaround
    dot4_i8_fn = "tk_dot4_i8"     # the prelude's code (the CUDA renderer's tk_dp4a is CUDA's)

    def __init__(self, kernel: N.Kernel, plan, ranges: int, wave: int = 64):
        if wave not in (32, 64):
            raise ValueError(f"wavefront size must be 32 or 64, not {wave}")
        super().__init__(kernel, plan, ranges)
        self.warp = wave

    def lane_mask(self, n: int) -> str:
        return f"{hex((1 << n) - 1)}ull"

    def atomic_call(self, e: N.Atomic, elem: str, args: list) -> str:
        d, op = e.array.dtype, e.op
        if d.name == "int64" and op in ("min", "max"):
            return f"tk_atomic_{op}_i64((long long *)&{elem}, (long long){args[0]})"
        return super().atomic_call(e, elem, args)

    def preamble(self, uses_coll: bool) -> list:
        k = self.k
        fm = " (fastmath: compile with -ffp-contract=fast)" if k.fastmath else ""
        wave = f", wavefront {self.warp}" if uses_coll else ""
        return [f"/* tinykernels: HIP C++ for hiprtc, kernel {k.name}{wave}{fm} */",
                _header(self.warp if uses_coll else None), f"typedef {'int' if k.idx32 else 'long long'} tk_idx;",
                prelude(["base", "half", "bf16", "fp8", "intdiv", "floatdiv", "ipow", "philox"]), _LIBM,
                portable_helpers(True), _float_atomics("1"), _i64_minmax(),
                _shuffles() if uses_coll else "", _DEBUG if k.debug else ""]   # HIP has CUDA's atomicCAS, fences


def render_hip(kernel: N.Kernel, plan, ranges: int, wave: int = 64) -> tuple:
    """HIP C++ source of a specialized kernel for wavefronts of ``wave`` lanes, and the
    debug array-name table."""
    r = HIPRenderer(kernel, plan, ranges, wave)
    return r.render(), list(r.array_ids)


__all__ = ["HIPRenderer", "render_hip", "param_layout", "wave_size", "DEFAULT_ARCH"]
