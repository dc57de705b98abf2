"""Testing tools for tinykernels.

:mod:`tinykernels.testing.fuzz` is the differential fuzzer: it generates random, well-typed
kernels, runs them on the compiled backends and on the reference interpreter, and reports (and
minimises) every disagreement. See ``docs/fuzzing.md``.
"""
from .fuzz import (KNOWN_BUGS, Case, Mismatch, Options, Summary, check_case, fuzz, generate, minimize,
                   run_case, write_reproducer)

__all__ = ["KNOWN_BUGS", "Case", "Mismatch", "Options", "Summary", "check_case", "fuzz", "generate",
           "minimize", "run_case", "write_reproducer"]
