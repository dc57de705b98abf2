"""Shared by tests that run on every backend of this machine: pytest parameters for CPU and
INTERP, and for OpenCL, WebGPU and JAX skipped (with the reason) where unavailable."""
import pytest

import tinykernels as tk


def every_backend() -> list:
    out = [pytest.param("CPU", id="CPU"), pytest.param("INTERP", id="INTERP")]
    info = tk.backends()
    for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"), ("JAX", "JAX")):
        ok, why = info[name]
        out.append(pytest.param(dev, id=dev, marks=pytest.mark.skipif(not ok, reason=f"{name}: {why}")))
    return out
