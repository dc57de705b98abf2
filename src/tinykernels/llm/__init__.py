"""``tinykernels.llm``: the kernels of an LLM inference engine, written once in the kernel
language, for every backend (SPEC section 10).

Every function takes arrays on any backend (NumPy arrays, ``tk.Array``, CPU torch tensors,
device arrays on their device; the backend is taken from the arrays), accepts ``out=``
(written in place and returned) and ``stream=`` (the launch is then asynchronous on that
stream), and raises ``ValueError`` naming the argument on a shape or dtype mismatch. Results
are of the kind of the first array argument (NumPy in, NumPy out; ``tk.Array`` in,
``tk.Array`` out; torch in, torch out). Row lengths are unbounded.

The families live in one module each (elementwise, fp8, norms, rope, activations, softmax,
layout, kvcache, quant, matmul, attention, gguf_io,
model); this package re-exports their public
names lazily, so ``import tinykernels.llm`` compiles nothing and imports no optional
dependency.
"""
from __future__ import annotations

import importlib
import sys
import types

_FAMILIES = ("elementwise", "fp8", "norms", "rope", "activations", "softmax", "layout", "kvcache",
             "quant", "matmul", "attention", "gguf_io", "model")


class _Package(types.ModuleType):
    """The package's module type: binding a family module whose ``__all__`` holds a function
    of the same name (``rope``, ``softmax``) binds that function instead, so ``llm.rope`` is
    the function even after the import system sets the submodule as an attribute. The
    modules stay in ``sys.modules`` (``importlib.import_module('tinykernels.llm.rope')``)."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and name in getattr(value, "__all__", ()):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def _family(name: str):
    try:
        mod = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"{__name__}.{name}":
            return None              # a family not written yet
        raise
    return mod                       # (a family named like its function: see _Package)


def __getattr__(name: str):
    if not name.startswith("_"):
        for fam in _FAMILIES:
            mod = _family(fam)
            if mod is not None and name in getattr(mod, "__all__", ()):
                value = getattr(mod, name)
                globals()[name] = value      # later look-ups skip this function
                return value
    raise AttributeError(f"module 'tinykernels.llm' has no attribute {name!r}")


def __dir__() -> list:
    names = set(globals())
    for fam in _FAMILIES:
        mod = _family(fam)
        if mod is not None:
            names.update(getattr(mod, "__all__", ()))
    return sorted(names)
