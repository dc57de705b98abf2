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
from .gen import generate, webgpu_options
from .minimizer import minimize
from .reproducer import write_reproducer
from .run import Mismatch, _err_text, check_case, compile_only_batch


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


def _generated(seed, opts):
    """(case, None), or (None, the result of a seed whose generation failed: a fuzzer bug)."""
    t0 = time.time()
    try:
        return generate(seed, opts), None
    except Exception as e:  # noqa: BLE001 - a generator crash is a fuzzer bug, report it
        m = Mismatch(seed, "generator", "generator-error", detail=_err_text(e) + "\n" + traceback.format_exc())
        return None, {"seed": seed, "mismatches": [m], "features": [], "seconds": time.time() - t0, "repro": []}


def _checked(case, backends, reference, out_dir, do_min, min_budget, notify=None, compiled=None, t0=None) -> dict:
    """Check one generated case (``compiled``: outcomes of its compile-only targets already
    computed in a batch), and on a disagreement save and minimise it; a plain dict result."""
    seed = case.seed
    t0 = time.time() if t0 is None else t0
    ms = check_case(case, backends, reference, compiled)
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


def _one(seed, backends, reference, opts, out_dir, do_min, min_budget, notify=None) -> dict:
    """Generate, check and (on a disagreement) minimise and save one seed; a plain dict result."""
    case, failed = _generated(seed, opts)
    return failed or _checked(case, backends, reference, out_dir, do_min, min_budget, notify)


def _batch(seeds, backends, reference, opts, out_dir, do_min, min_budget, notify=None):
    """Results of ``seeds`` (one dict each, yielded as each is done), the compile-only targets
    that check many kernels faster together (:func:`.run.compile_only_batch`) run once for all."""
    if len(seeds) == 1:
        yield _one(seeds[0], backends, reference, opts, out_dir, do_min, min_budget, notify)
        return
    t0 = time.time()
    cases = []
    for seed in seeds:
        case, failed = _generated(seed, opts)
        if failed:
            yield failed
        else:
            cases.append(case)
    compiled = [{} for _ in cases]
    for b in backends:
        outcomes = compile_only_batch(cases, b) if isinstance(b, str) else None
        for c, o in zip(compiled, outcomes or []):
            c[b] = o
    share = (time.time() - t0) / max(len(cases), 1)       # each case's part of the batch's time
    for case, c in zip(cases, compiled):
        yield _checked(case, backends, reference, out_dir, do_min, min_budget, notify, c, time.time() - share)


def _worker(conn, backends, reference, opts, out_dir, do_min, min_budget):
    import warnings
    warnings.simplefilter("ignore")
    try:
        while True:
            seeds = conn.recv()
            if seeds is None:
                break
            for res in _batch(seeds, backends, reference, opts, out_dir, do_min, min_budget,
                              notify=lambda s=seeds: conn.send(("minimizing", s))):
                conn.send(("done", res))
    except (EOFError, KeyboardInterrupt):
        pass


def batch_size(backends, count: int, jobs: int) -> int:
    """Seeds a worker checks together: many where a target compiles many kernels in one run
    (``HIPCLANG``: up to 40 per clang run, fewer so that every job gets work), else 1."""
    if not any(isinstance(b, str) and b.upper().startswith("HIPCLANG") for b in backends):
        return 1
    return max(1, min(40, -(-count // max(jobs, 1))))


def profile_for(backends, reference: str, opts: Options) -> tuple:
    """(reference, opts) for checking ``backends``: with WEBGPU the WebGPU profile
    (``gen.webgpu_options``: only what WebGPU runs) against ``CPU32`` (the CPU with WebGPU's
    32-bit Python scalars, weak32.py) in place of the interpreter, which computes them in 64
    bits. WEBGPU is checked alone (the other backends' Python scalars are 64-bit)."""
    names = [b if isinstance(b, str) else getattr(b, "name", "") for b in backends]
    if not any(n.upper().startswith("WEBGPU") for n in names):
        return reference, opts
    if len(names) > 1:
        raise ValueError(f"backends {names}: WEBGPU is fuzzed alone (its Python scalars are 32-bit)")
    return ("CPU32" if reference.upper().startswith("INTERP") else reference), webgpu_options(opts)


def fuzz(seeds, backends=("CPU",), reference="INTERP", jobs: int = 1, out_dir=None, opts: Options | None = None,
         minimize_found: bool = True, timeout: float = 120.0, min_budget: float = 120.0, log=None,
         progress_every: float = 30.0, recycle: int = 300, batch: int | None = None) -> Summary:
    """Check every seed of ``seeds`` in ``jobs`` worker processes (each case with a ``timeout``,
    workers recycled every ``recycle`` cases); ``jobs=0`` runs them in this process, without a
    timeout (for debugging: a hanging kernel hangs the caller). Mismatches are saved to ``out_dir``.
    ``batch``: seeds a worker checks together (default :func:`batch_size`); a batch that hangs
    or kills its worker is checked again seed by seed, so the timeout names the seed."""
    reference, opts = profile_for(backends, reference, opts or Options())
    seeds = list(seeds)
    batch = batch_size(backends, len(seeds), jobs) if batch is None else max(1, batch)
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
            for i in range(0, len(seeds), batch):
                for res in _batch(seeds[i:i + batch], backends, reference, opts, out_dir, minimize_found,
                                  min_budget):
                    record(res)
        summ.seconds = time.time() - t0
        return summ

    import multiprocessing as mp
    from multiprocessing.connection import wait
    # spawn, never fork: a process that already ran OpenMP kernels (GNU libgomp), PoCL or wgpu
    # has threads and locks a forked child inherits half-taken; it hangs in its first kernel
    ctx = mp.get_context("spawn")
    pending = [seeds[i:i + batch] for i in range(0, len(seeds), batch)][::-1]     # batches, next last
    workers = {}          # conn -> [process, [seeds not yet reported] or None, deadline, cases run, batch size]

    def start():
        a, b = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(b, tuple(backends), reference, opts, out_dir, minimize_found,
                                              min_budget), daemon=True)
        p.start()
        b.close()
        workers[a] = [p, None, 0.0, 0, 0]
        return a

    def feed(conn):
        w = workers[conn]
        if w[3] >= recycle:
            stop(conn)
            conn = start()
            w = workers[conn]
        if pending:
            todo = pending.pop()
            conn.send(todo)
            # a batch first compiles all its kernels: a tenth of the timeout each, then the timeout per case
            w[1], w[2], w[4] = list(todo), time.time() + timeout * (1 + (len(todo) - 1) / 10), len(todo)
            w[3] += len(todo)
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

    def lost(conn, kind, detail):
        """The worker hung or died: a lone seed is the finding; a batch's unreported seeds go
        back to the queue one by one (the next failure names the seed)."""
        w = workers[conn]
        if w[4] > 1:
            pending.extend([s] for s in reversed(w[1]))
        else:
            seed = w[1][0]
            if kind == "timeout":
                summ.timeouts += 1
            record({"seed": seed, "mismatches": [Mismatch(seed, ",".join(map(str, backends)), kind,
                    detail=detail(w))], "features": [], "seconds": timeout if kind == "timeout" else 0.0,
                    "repro": []})
        stop(conn, kill=True)
        feed(start())
        for c, other in list(workers.items()):      # idle workers take the requeued seeds too
            if other[1] is None and pending:
                feed(c)

    for _ in range(min(jobs, len(pending))):
        feed(start())
    while any(w[1] is not None for w in workers.values()):
        busy = [c for c, w in workers.items() if w[1] is not None]
        ready = wait(busy, timeout=1.0)
        for conn in ready:
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                lost(conn, "crash", lambda w: f"worker process died (exit code {w[0].exitcode})")
                continue
            w = workers[conn]
            if kind == "minimizing":
                w[2] = time.time() + timeout + min_budget * 4
                continue
            record(payload)
            w[1].remove(payload["seed"])
            w[2] = time.time() + timeout
            if not w[1]:
                feed(conn)
        now = time.time()
        for conn, w in list(workers.items()):
            if w[1] is not None and now > w[2]:
                lost(conn, "timeout", lambda w: f"no result after {timeout:.0f}s")
    for conn in list(workers):
        stop(conn)
    summ.seconds = time.time() - t0
    return summ
