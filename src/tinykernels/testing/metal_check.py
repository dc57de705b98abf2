"""Checking generated Metal Shading Language without a Mac: ``clang++ -fsyntax-only`` against
the project's stub ``<metal_stdlib>`` (``testing/metal_stub/metal_stdlib``; what it checks and
what it cannot is written at its top). Used by tests/test_metal.py and the fuzzer's compile-only
``METAL-STUB`` target (scripts/fuzz.py).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from functools import lru_cache

STUB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metal_stub")

#: clang's options: C++17 syntax only, no system headers, unknown attributes are errors
FLAGS = ("-x", "c++", "-std=c++17", "-fsyntax-only", "-nostdinc", "-nostdinc++", "-Werror=unknown-attributes",
         "-Wno-unused-value", "-ferror-limit=20")


class MetalStubError(Exception):
    """clang rejected a Metal source checked against the stub header (the message holds its log)."""


@lru_cache(maxsize=None)
def find_clang() -> str | None:
    """The clang++ to check with: ``TK_METAL_CLANG``, else clang++-15, else clang++ (None if absent)."""
    for c in (os.environ.get("TK_METAL_CLANG"), "clang++-15", "clang++"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def check_msl(src: str, name: str = "kernel") -> None:
    """Raise MetalStubError with clang's log unless ``src`` passes the stub check."""
    clang = find_clang()
    if clang is None:
        raise MetalStubError("no clang++ found (install clang-15 or set TK_METAL_CLANG)")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{name}.metal")
        with open(path, "w") as f:
            f.write(src)
        r = subprocess.run([clang, *FLAGS, "-I", STUB_DIR, path], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise MetalStubError(f"clang rejected the Metal source of '{name}' (stub metal_stdlib):\n"
                             + (r.stderr or r.stdout)[-6000:])


__all__ = ["STUB_DIR", "FLAGS", "MetalStubError", "find_clang", "check_msl"]
