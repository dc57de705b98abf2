"""The fuzzing driver: :func:`fuzz` generates, checks, minimises and saves many seeds, in this
process or in worker processes (each case with a timeout, workers recycled), and sums the results
up in a :class:`Summary`.
"""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field

from .case import Options
from .gen import generate
from .minimizer import minimize
from .reproducer import write_reproducer
from .run import Mismatch, _err_text, check_case


@dataclass
class Summary:
    count: int = 0
    mismatches: list = field(default_factory=list)      # [Mismatch]
    reproducers: list = field(default_factory=list)     # paths
    features: dict = field(default_factory=dict)        # feature -> number of cases
    seconds: float = 0.0
    timeouts: int = 0

    def line(self) -> str:
        return (f"{self.count} kernels, {len(self.mismatches)} mismatches "
                f"({len({m.seed for m in self.mismatches})} seeds), {self.timeouts} timeouts, "
                f"{self.seconds:.1f}s ({self.count / max(self.seconds, 1e-9):.1f} kernels/s)")


def _one(seed, backends, reference, opts, out_dir, do_min, min_budget, notify=None) -> dict:
    """Generate, check and (on a disagreement) minimise and save one seed; a plain dict result."""
    t0 = time.time()
    try:
        case = generate(seed, opts)
    except Exception as e:  # noqa: BLE001 - a generator crash is a fuzzer bug, report it
        m = Mismatch(seed, "generator", "generator-error", detail=_err_text(e) + "\n" + traceback.format_exc())
        return {"seed": seed, "mismatches": [m], "features": [], "seconds": time.time() - t0, "repro": []}
    ms = check_case(case, backends, reference)
    repro = []
    if ms and out_dir:
        if notify:
            notify()
        path = os.path.join(out_dir, f"seed{seed}.py")
        write_reproducer(case, path, ms, backends, reference)
        repro.append(path)
        if do_min:
            by_backend = {}
            for m in ms:
                by_backend.setdefault(m.backend, m)
            m = next(iter(by_backend.values()))
            bspec = next((b for b in backends if (b if isinstance(b, str) else b.name) == m.backend), backends[0])
            # a fastmath case is not minimised: deleting statements from the kernel would leave
            # its magnitude kernel (the tolerance) out of step
            if m.kind not in ("timeout", "generator-error") and not case.mag_kname:
                small = minimize(case, bspec, reference, m.signature(), min_budget)
                ms2 = check_case(small, [bspec], reference)
                if ms2:
                    p2 = os.path.join(out_dir, f"seed{seed}_min.py")
                    write_reproducer(small, p2, ms2, [bspec], reference)
                    repro.append(p2)
    return {"seed": seed, "mismatches": ms, "features": sorted(case.features), "seconds": time.time() - t0,
            "repro": repro}


def _worker(conn, backends, reference, opts, out_dir, do_min, min_budget):
    import warnings
    warnings.simplefilter("ignore")
    try:
        while True:
            seed = conn.recv()
            if seed is None:
                break
            res = _one(seed, backends, reference, opts, out_dir, do_min, min_budget,
                       notify=lambda: conn.send(("minimizing", seed)))
            conn.send(("done", res))
    except (EOFError, KeyboardInterrupt):
        pass


def fuzz(seeds, backends=("CPU",), reference="INTERP", jobs: int = 1, out_dir=None, opts: Options | None = None,
         minimize_found: bool = True, timeout: float = 120.0, min_budget: float = 120.0, log=None,
         progress_every: float = 30.0, recycle: int = 300) -> Summary:
    """Check every seed of ``seeds`` in ``jobs`` worker processes (each case with a ``timeout``,
    workers recycled every ``recycle`` cases); ``jobs=0`` runs them in this process, without a
    timeout (for debugging: a hanging kernel hangs the caller). Mismatches are saved to ``out_dir``."""
    opts = opts or Options()
    seeds = list(seeds)
    summ = Summary()
    t0 = time.time()
    last = [t0]

    def record(res):
        if out_dir and any(m.kind in ("crash", "timeout") for m in res["mismatches"]):
            try:          # the worker died with the case: save it from here (regenerated from its seed)
                path = os.path.join(out_dir, f"seed{res['seed']}.py")
                write_reproducer(generate(res["seed"], opts), path, res["mismatches"], backends, reference)
                res["repro"] = [path]
            except Exception:  # noqa: BLE001
                pass
        summ.count += 1
        summ.mismatches.extend(res["mismatches"])
        summ.reproducers.extend(res["repro"])
        for f in res["features"]:
            summ.features[f] = summ.features.get(f, 0) + 1
        for m in res["mismatches"]:
            if log:
                log(f"MISMATCH {m}")
        now = time.time()
        if log and now - last[0] >= progress_every:
            last[0] = now
            summ.seconds = now - t0
            log(f"[{now - t0:7.0f}s] {summ.line()}")

    if jobs <= 0:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in seeds:
                record(_one(s, backends, reference, opts, out_dir, minimize_found, min_budget))
        summ.seconds = time.time() - t0
        return summ

    import multiprocessing as mp
    from multiprocessing.connection import wait
    # spawn, never fork: a process that already ran OpenMP kernels (GNU libgomp), PoCL or wgpu
    # has threads and locks a forked child inherits half-taken; it hangs in its first kernel
    ctx = mp.get_context("spawn")
    pending = list(reversed(seeds))
    workers = {}          # conn -> [process, seed or None, deadline, cases run]

    def start():
        a, b = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(b, tuple(backends), reference, opts, out_dir, minimize_found,
                                              min_budget), daemon=True)
        p.start()
        b.close()
        workers[a] = [p, None, 0.0, 0]
        return a

    def feed(conn):
        w = workers[conn]
        if w[3] >= recycle:
            stop(conn)
            conn = start()
            w = workers[conn]
        if pending:
            s = pending.pop()
            conn.send(s)
            w[1], w[2] = s, time.time() + timeout
            w[3] += 1
        else:
            w[1] = None

    def stop(conn, kill=False):
        p = workers.pop(conn)[0]
        try:
            if kill:
                p.kill()
            else:
                conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        p.join(5)
        if p.is_alive():
            p.kill()
        conn.close()

    for _ in range(min(jobs, len(seeds))):
        feed(start())
    while any(w[1] is not None for w in workers.values()):
        busy = [c for c, w in workers.items() if w[1] is not None]
        ready = wait(busy, timeout=1.0)
        for conn in ready:
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                w = workers[conn]
                seed = w[1]
                record({"seed": seed, "mismatches": [Mismatch(seed, ",".join(map(str, backends)), "crash",
                        detail=f"worker process died (exit code {w[0].exitcode})")], "features": [],
                        "seconds": 0.0, "repro": []})
                stop(conn, kill=True)
                feed(start())
                continue
            if kind == "minimizing":
                workers[conn][2] = time.time() + timeout + min_budget * 4
                continue
            record(payload)
            feed(conn)
        now = time.time()
        for conn, w in list(workers.items()):
            if w[1] is not None and now > w[2]:
                seed = w[1]
                summ.timeouts += 1
                record({"seed": seed, "mismatches": [Mismatch(seed, ",".join(map(str, backends)), "timeout",
                        detail=f"no result after {timeout:.0f}s")], "features": [], "seconds": timeout,
                        "repro": []})
                stop(conn, kill=True)
                feed(start())
    for conn in list(workers):
        stop(conn)
    summ.seconds = time.time() - t0
    return summ
