"""CI support: run the suite a second time without repeating what already passed.

``.ci/run`` runs the README's test command in a venv without the optional extras, then again
with every extra installed. A test that passed in the first run takes the same code path in
the second unless an extra changes it, and an extra-dependent test skips, or is not collected
(a backend that is not available), without its extra. So the first run records the node ids
that passed (``TK_TESTS_RECORD_PASSED=file``) and the second deselects them
(``TK_TESTS_SKIP_PASSED=file``): it runs only what skipped, failed or was not there before.
Neither variable is set in a plain ``python -m pytest``, which runs everything.

Every random generator kept at module level (by a test module or a helper module of tests/)
is reseeded before each test from the test's own id, so a test draws the same data whichever
other tests ran before it: in a full run, in CI's second run (which deselects what passed),
under ``-k`` or ``--lf``, and in any xdist worker.

Under pytest-xdist (the README's ``-n auto``) the controller records what its workers report,
and hands the deselection file to each worker, which collects (``pytest_configure_node``).
"""
from __future__ import annotations

import os
import random
import sys
import zlib

import numpy as np
import pytest

# popped: a test that runs pytest in a subprocess runs all of what it asks for
_RECORD = os.environ.pop("TK_TESTS_RECORD_PASSED", None)
_SKIP = os.environ.pop("TK_TESTS_SKIP_PASSED", None)
_passed: list[str] = []


def pytest_configure(config) -> None:
    global _SKIP
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:          # an xdist worker: the controller popped the variable
        _SKIP = workerinput.get("tk_tests_skip_passed") or _SKIP


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker per core this process may use, but at most 8 and at most one per
    3 GiB of memory (a worker that has loaded torch and jax holds about 3 GiB)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = min(cores, 8)
    try:
        n = min(n, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (3 << 30))
    except (AttributeError, ValueError, OSError):
        pass
    return max(1, n)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist (controller side): pass the deselection file on to a worker it starts."""
    node.workerinput["tk_tests_skip_passed"] = _SKIP


def pytest_runtest_logreport(report) -> None:
    # under xdist this runs in the controller too, with each worker's reports
    if _RECORD and report.when == "call" and report.passed and not hasattr(report, "wasxfail"):
        _passed.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus) -> None:
    if _RECORD and _passed:
        with open(_RECORD, "a", encoding="utf-8") as f:
            f.write("".join(n + "\n" for n in _passed))


_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
_RNG_TYPES = (np.random.Generator, np.random.RandomState, random.Random)
_rngs_of: dict[str, list] = {}       # test module name -> the generators its tests may draw from


def _module_rngs(module) -> list:
    """The random generators at module level in ``module`` and in the helper modules of tests/
    loaded so far (a helper's generator, e.g. crosscheck_kernels.RNG, is drawn from by tests)."""
    found = _rngs_of.get(module.__name__)
    if found is None:
        mods = [module] + [m for m in list(sys.modules.values())
                           if m is not module and os.path.dirname(os.path.abspath(getattr(m, "__file__", None) or "/")) == _TESTS_DIR]
        found = [v for m in mods for v in vars(m).values() if isinstance(v, _RNG_TYPES)]
        _rngs_of[module.__name__] = found
    return found


def _reseed(rng, seed: int) -> None:
    """Reseed ``rng`` in place (a helper may hold it as a default argument)."""
    if isinstance(rng, np.random.Generator):
        rng.bit_generator.state = type(rng.bit_generator)(seed).state
    else:
        rng.seed(seed)


@pytest.fixture(autouse=True)
def _seed_module_rngs(request):
    """Before each test, reseed the module-level generators from the test's id (module name and
    test name with its parameters), so its data do not depend on which tests ran before it."""
    module = getattr(request.node, "module", None)
    if module is not None:
        rngs = _module_rngs(module)
        if rngs:
            seed = zlib.crc32(f"{module.__name__}::{request.node.name}".encode())
            for rng in rngs:
                _reseed(rng, seed)
    yield


def pytest_collection_modifyitems(session, config, items) -> None:
    if not _SKIP or not os.path.exists(_SKIP):
        return
    with open(_SKIP, encoding="utf-8") as f:
        done = set(f.read().splitlines())
    keep = [it for it in items if it.nodeid not in done]
    dropped = [it for it in items if it.nodeid in done]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_report_header(config) -> str | None:
    if _SKIP:
        return f"tinykernels: deselecting the tests recorded as passed in {_SKIP}"
    return None
