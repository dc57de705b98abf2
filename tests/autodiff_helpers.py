"""Shared by the autodiff test files: backend parameters, and arrays in the precision a backend
tests gradients in (float64, or float32 where it has none)."""
import numpy as np
import pytest

import tinykernels as tk

_NAMES = {"CL": "OpenCL", "WEBGPU": "WebGPU", "CUDA": "CUDA"}


def backend_params(*devs: str) -> list:
    """pytest parameters for the DEV strings ``devs``, each skipped (with the reason) where this
    machine lacks it (the interpreter is always there)."""
    avail = tk.backends()
    out = []
    for d in devs:
        if d.startswith("INTERP"):
            ok, why = True, ""
        elif d == "CPU":
            ok, why = tk.CPU.available()[0], "no C compiler for the CPU backend"
        else:
            ok, why = avail.get(_NAMES[d], (False, "unknown"))
            why = f"{_NAMES[d]}: {why}"
        out.append(pytest.param(d, id=d, marks=() if ok else pytest.mark.skip(reason=why)))
    return out


@pytest.fixture(params=backend_params('CPU', 'INTERP'), scope="module")
def be(request):
    """The backend of a test that runs on the CPU and the interpreter (import it as a fixture)."""
    return tk.backend(request.param)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def anybe(request):
    """The backend of a test that runs on every backend this machine has (a fixture)."""
    return tk.backend(request.param)


def fdt(be):
    """The float dtype the tests use on a backend: float64, or float32 where it has none."""
    return np.float64 if be.supports_float64 else np.float32


def dev(x, be, dtype=None):
    """``x`` (a copy) as an array of ``be``: NumPy on host backends, a device array otherwise."""
    h = np.array(x, dtype=dtype or fdt(be))
    return h if be.is_host else tk.asarray(h, backend=be)


def host(a):
    """A float64 NumPy copy of a host or device array."""
    return np.array(a.numpy() if isinstance(a, tk.Array) else a, dtype=np.float64)


def put(be, x):
    """A copy of ``x`` on ``be``, keeping its dtype (a NumPy array on the host backends); ``dev``
    converts to the tests' float dtype instead."""
    x = np.array(x)
    return x if be.is_host else tk.asarray(x, backend=be)


def get(x):
    """A NumPy copy of a host or device array, keeping its dtype (``host`` gives float64)."""
    return np.array(x.numpy() if isinstance(x, tk.Array) else x)


def run(be, k, *args, wg=None, **kw):
    """Launch ``k`` on ``be`` (workgroup ``wg`` if given) with copies of the NumPy ``args``;
    every array afterwards, as NumPy arrays, in order."""
    dev = [put(be, a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    (k(be) if wg is None else k(be, wg))(*dev, **kw)
    tk.synchronize(be)
    return [get(d) for d, a in zip(dev, args) if isinstance(a, np.ndarray)]


def interp(be) -> bool:
    """Whether ``be`` is the interpreter (its check mode too)."""
    return isinstance(be, tk.Interpreter)
