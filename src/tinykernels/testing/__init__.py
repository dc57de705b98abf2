"""Testing tools for tinykernels.

:mod:`tinykernels.testing.fuzz` is the differential fuzzer: it generates random, well-typed
kernels, runs them on the compiled backends and on the reference interpreter, and reports (and
minimises) every disagreement. See ``docs/fuzzing.md``::

    from tinykernels.testing import fuzz
    summary = fuzz.fuzz(range(1000), backends=["CPU"], reference="INTERP", jobs=2, out_dir="fuzz-out")
"""
from . import fuzz

__all__ = ["fuzz"]
