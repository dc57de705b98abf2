"""The reference of the fuzzer's WebGPU profile: the CPU backend with WebGPU's scalar rules.

WebGPU computes Python ints and floats (literals, scalar arguments, indices, shapes) as weak
int32 / float32 (docs/webgpu.md); the interpreter and the CPU compute them in 64 bits, so a
kernel mixing them would differ for reasons that are the language's definition, not a bug.
``CPU32`` (DEV string ``"CPU32"`` in :func:`tinykernels.testing.fuzz.run_case`) lowers every
kernel as the WebGPU runtime does (``default_int=int32``, ``default_float=float32``, Python
int arguments weak int32, Python float arguments weak float32) and compiles it to C as the CPU
backend does, so the comparison checks WGSL code generation and the WebGPU runtime against the C ones. (What both share, the
frontend's 32-bit lowering, is checked only where the interpreter agrees with the CPU.)
"""
from __future__ import annotations

from ... import dtypes as D
from ...frontend import ScalarSpec
from ...dtypes import Ty
from ...runtime.base import python_ints_as_int32
from ...runtime.cpu import CPU, CPUKernelInstance


class CPU32KernelInstance(CPUKernelInstance):
    """A CPU kernel lowered with WebGPU's 32-bit Python scalars."""

    def _specs(self, args, wg):
        specs = python_ints_as_int32(super()._specs(args, wg), args, self.kernel.params)
        for a, (name, kind) in zip(args, self.kernel.params):
            if kind != "constexpr" and isinstance(a, float):    # WebGPU's Python floats: float32
                specs[name] = ScalarSpec(Ty(D.float32, True))
        return specs

    def _ir(self, args, geom, ndim, ranges, wg):
        return self._lower(args, wg, ndim=ndim, default_float=D.float32, default_int=D.int32, idx32=True)


class CPU32(CPU):
    """``tk.CPU`` whose kernels compute Python scalars in 32 bits (the fuzzer's WebGPU reference;
    its ``name`` stays "CPU", so everything else behaves as on the CPU; its ``key`` differs)."""
    instance_class = CPU32KernelInstance

    def key(self) -> tuple:
        return ("CPU32",) + super().key()[1:]

    def __repr__(self) -> str:
        return "CPU32()"
