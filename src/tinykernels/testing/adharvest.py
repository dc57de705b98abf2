"""A pytest plugin that cross-checks (:mod:`.adcross`) every kernel a test suite differentiates.

    python -m pytest -p tinykernels.testing.adharvest tests/test_autodiff_correctness.py -k CPU

Every launch ``tk.autodiff`` records (its first launch of each kernel object, with host NumPy
arrays, a float64 array among them, no stream, no static work-group size) is kept with a copy
of its arguments; when the session ends each kept kernel is cross-checked on the CPU backend
(``TK_ADHARVEST_BACKEND``) within a time budget (``TK_ADHARVEST_BUDGET`` seconds, default
600), and the findings and counts are written to ``TK_ADHARVEST_OUT`` (default
``adharvest.txt``). Launches of more than 4096 items are counted, not checked.
"""
from __future__ import annotations

import collections
import importlib
import os
import time

import numpy as np

MAX_ITEMS = 4096

_ad = importlib.import_module("tinykernels.autodiff")
_KEPT: dict = {}           # id(kernel) -> (kernel, args, ndrange, workgroupsize, test id)
_TEST = [""]
_launch = _ad._Recorder.launch


def _plain(a) -> bool:
    return isinstance(a, (np.ndarray, int, float, bool, np.generic))


def _recording_launch(self, inst, args, ndrange, workgroupsize, stream):
    k = inst.kernel
    if (id(k) not in _KEPT and type(k).__name__ == "Kernel" and inst.static_wg is None and stream is None
            and all(_plain(a) for a in args)
            and any(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in args)):
        _KEPT[id(k)] = (k, [a.copy() if isinstance(a, np.ndarray) else a for a in args], ndrange, workgroupsize,
                        _TEST[0])
    return _launch(self, inst, args, ndrange, workgroupsize, stream)


def _items(ndrange) -> int:
    dims = ndrange if isinstance(ndrange, tuple) else (ndrange,)
    return int(np.prod([len(d) if isinstance(d, range) else d for d in dims]))


def pytest_configure(config):
    _ad._Recorder.launch = _recording_launch


def pytest_runtest_setup(item):
    _TEST[0] = item.nodeid


def pytest_sessionfinish(session):
    from .adcross import crosscheck
    budget = float(os.environ.get("TK_ADHARVEST_BUDGET", "600"))
    backend = os.environ.get("TK_ADHARVEST_BACKEND", "CPU")
    t0, stats = time.time(), collections.Counter()
    with open(os.environ.get("TK_ADHARVEST_OUT", "adharvest.txt"), "w") as out:
        out.write(f"{len(_KEPT)} kernels differentiated\n")
        for k, args, nd, wg, test in _KEPT.values():
            if time.time() - t0 > budget:
                stats["not checked (budget)"] += 1
                continue
            if _items(nd) > MAX_ITEMS:
                stats["not checked (size)"] += 1
                continue
            try:
                fs = crosscheck(k, [a.copy() if isinstance(a, np.ndarray) else a for a in args], nd, wg,
                                backend=backend, seed=7)
            except Exception as e:  # noqa: BLE001 - reported, the others still run
                stats["crash"] += 1
                out.write(f"{k.name} ({test}): crash {type(e).__name__}: {e}\n")
                continue
            stats["unraised" if any(f.kind == "unraised" for f in fs) else "checked against JAX"] += 1
            for f in fs:
                if f.mismatch:
                    stats[f.kind] += 1
                elif f.verdict:
                    stats[f"{f.kind} ({f.verdict})"] += 1
                out.write(f"{k.name} ({test}): {f.kind} {f.verdict or ''} {f.detail}\n")
            out.flush()
        out.write(f"counts {dict(stats)}, {time.time() - t0:.0f} s\n")
