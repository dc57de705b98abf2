"""Differential fuzzing of tinykernels: random kernels, compiled backends against the interpreter.

The generator (:func:`generate`) builds a random, well-typed kernel module (source text: a few
``@tk.func`` device functions and one ``@tk.kernel``) plus its arguments and launch geometry from
a seed; everything is reproducible from ``(seed, Options)``. The runner (:func:`run_case`,
:func:`check_case`) writes the module to a content-addressed file (so ``inspect`` finds the
source and the disk cache of compiled kernels is reused), launches it on every requested backend
and on the reference (``tk.Interpreter()``), and compares every output element: integers and
bools bit for bit, floats bit for bit (NaN equals NaN) except where the generator marked an
output slot as the result of a transcendental function, which gets an ulp tolerance (see
``docs/fuzzing.md``); fastmath cases (:mod:`.fastmath`, a fraction of the seeds) compare their
float outputs with a reassociation bound scaled by the sum of the absolute values of the terms,
which the reference computes alongside. A disagreement is minimised (:func:`minimize`, statement deletion and
expression simplification on the Python AST, keeping the same kind of disagreement) and written
as a standalone reproducer script (:func:`write_reproducer`). :func:`fuzz` drives many seeds in
parallel worker processes, with a per-case timeout.

Kernels are generated so that the reference semantics are defined and order-independent: every
loop is bounded, array indices are taken modulo the extent, float-to-int conversions are clamped
into range (NaN mapped to 0), each work item writes only its own output elements, local memory is
initialised by the group's first item before anyone reads it, atomics are commutative on shared
elements (floats only with integer values, whose sums are exact) and free to return their old
value only on elements a single item owns, and group reductions/scans of floats only see values
whose combination is exact in any order. Constructs the documentation lists as differences
between the interpreter and the compiler (docs/debugging.md) are not generated, and constructs
that exposed a known bug (:data:`KNOWN_BUGS`) are excluded unless ``Options.exclude`` drops them.
"""
from __future__ import annotations

# One idea per module, each importing only from those above it here. Every public name is
# re-exported, so ``from tinykernels.testing import fuzz as F; F.generate(...)`` keeps working, and
# so are the private names used from outside: ``_arr`` and ``_scalar``, which generated reproducer
# scripts import (with ``reproduce``), and ``_print_signatures``, which the minimiser's subprocess
# imports.
from .bugs import KNOWN_BUGS, FIXED_BUGS
from .types import (INTS, FLOATS, NARROW_X, FLOATS_ALL, STRONG, WEAK, ALL_TYPES, ATOMIC_TYPES, NARROW, FP8,
                    is_float, is_int, is_boolish, np_dtype, promote, int_range, fits, float_max, ARITH, BITS,
                    BINOPS, CMPS, PAIRS)
from .data import edge_values, random_values, int_valued
from .case import Options, ArgSpec, Case, Var, Arr, Ex
from .gen import (INEXACT_MATH, INEXACT_ULPS, PYINT_LITS, PYFLOAT_LITS, Gen, MANT, store_ulps, generate,
                  cases, webgpu_options)
from .run import (load_kernel, nvrtc_compile_case, hipclang_compile_case, hipclang_compile_batch, compile_only_batch,
                  metal_stub_compile_case, make_args, run_case, Mismatch, compare_arrays, check_case)
from .reproducer import case_args_code, write_reproducer, case_from_namespace, reproduce
from .reproducer import _arr as _arr, _scalar as _scalar
from .minimizer import minimize
from .minimizer import _print_signatures as _print_signatures
from .driver import Summary, batch_size, fuzz, profile_for

__all__ = ["KNOWN_BUGS", "FIXED_BUGS", "INTS", "FLOATS", "NARROW_X", "FLOATS_ALL", "STRONG", "WEAK",
           "ALL_TYPES", "ATOMIC_TYPES", "NARROW", "FP8", "is_float", "is_int", "is_boolish", "np_dtype",
           "promote", "int_range", "fits", "float_max", "ARITH", "BITS", "BINOPS", "CMPS", "PAIRS",
           "edge_values", "random_values", "int_valued", "Options", "ArgSpec", "Case", "Var", "Arr", "Ex",
           "INEXACT_MATH", "INEXACT_ULPS", "PYINT_LITS", "PYFLOAT_LITS", "Gen", "MANT", "store_ulps",
           "generate", "cases", "load_kernel", "nvrtc_compile_case", "hipclang_compile_case",
           "hipclang_compile_batch", "compile_only_batch", "metal_stub_compile_case",
           "make_args", "run_case", "Mismatch",
           "compare_arrays", "check_case", "case_args_code", "write_reproducer", "case_from_namespace",
           "reproduce", "minimize", "Summary", "batch_size", "fuzz", "profile_for", "webgpu_options"]
