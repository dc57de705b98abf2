"""What every checker of fuzz cases shares (the forward checker ``run`` and the autodiff checker
``gradcheck``): loading a generated kernel module, a backend from its DEV string, the record of
a disagreement, an exception's text."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field


_GEN_DIR = os.environ.get("TK_FUZZ_DIR") or os.path.join(tempfile.gettempdir(), f"tinykernels_fuzz_{os.getuid()}")
_MODULES: dict = {}


def load_kernel(source: str, kname: str):
    """The kernel ``kname`` of module ``source``, written to a content-addressed file first (so that
    ``inspect`` finds its source and the compiled-kernel cache is reused across processes)."""
    key = hashlib.sha1(source.encode()).hexdigest()[:20]
    ns = _MODULES.get(key)
    if ns is None:
        os.makedirs(_GEN_DIR, exist_ok=True)
        path = os.path.join(_GEN_DIR, f"fz_{key}.py")
        if not os.path.exists(path):
            fd, tmp = tempfile.mkstemp(dir=_GEN_DIR, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        ns = {"__name__": f"tk_fuzz_{key}", "__file__": path}
        exec(compile(source, path, "exec"), ns)
        if len(_MODULES) > 64:
            _MODULES.clear()
        _MODULES[key] = ns
    return ns[kname]


def _backend(spec):
    """A backend object for a DEV string (``"CPU32"``: the WebGPU profile's reference, weak32.py)."""
    import tinykernels as tk
    if spec == "CPU32":
        from .weak32 import CPU32
        return CPU32()
    return tk.backend(spec) if isinstance(spec, str) else spec


@dataclass
class Mismatch:
    """A disagreement between ``backend`` and the reference on one case."""
    seed: int
    backend: str
    kind: str                 # value, error (one side raised), ref-error (the reference raised), timeout
    array: str = ""
    where: list = field(default_factory=list)       # up to 5 (index, got, want)
    detail: str = ""
    tol: int = 0

    def __str__(self) -> str:
        if self.kind == "value":
            w = "; ".join(f"{i}: got {g} want {v}" for i, g, v in self.where)
            return f"seed {self.seed} {self.backend}: array '{self.array}' differs (tol {self.tol} ulp) at {w}"
        if self.kind.startswith("grad-"):
            w = "; ".join(f"{i}: got {g} want {v}" for i, g, v in self.where)
            return f"seed {self.seed} {self.backend}: {self.kind} '{self.array}' differs at {w} {self.detail}"
        return f"seed {self.seed} {self.backend}: {self.kind}: {self.detail}"

    def signature(self) -> tuple:
        """What must stay the same while minimising: the array, or the error without its location."""
        if self.kind == "value" or self.kind.startswith("grad-"):
            return (self.kind, self.array)
        first = self.detail.split("\n", 1)[0]
        first = re.sub(r"\S+\.py:\d+(:\d+)?:?", "", first)
        first = re.sub(r"kernel '\w+'", "kernel", first)
        first = re.sub(r"\(and .*", "", first)
        first = re.sub(r"-?\d+", "N", first)
        return (self.kind, first.strip())


def _err_text(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 2000 else s[:2000] + " ..."
