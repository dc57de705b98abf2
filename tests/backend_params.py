"""Shared by tests that run on every backend of this machine: pytest parameters for CPU and
INTERP, for OpenCL, WebGPU and JAX skipped (with the reason) where unavailable, and for CUDA
only where a CUDA GPU is usable (machines without one, CI's, get no CUDA parameters at all)."""
import pytest

import tinykernels as tk


def every_backend() -> list:
    out = [pytest.param("CPU", id="CPU"), pytest.param("INTERP", id="INTERP")]
    info = tk.backends()
    for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"), ("JAX", "JAX")):
        ok, why = info[name]
        out.append(pytest.param(dev, id=dev, marks=pytest.mark.skipif(not ok, reason=f"{name}: {why}")))
    if info["CUDA"][0]:
        out.append(pytest.param("CUDA", id="CUDA"))
    return out
