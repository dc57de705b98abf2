"""``python -m tinykernels``: devices, demo, cache, --version.

    python -m tinykernels devices          # what can run here, the default backend, the C toolchain
    python -m tinykernels demo             # 2-D heat diffusion, timed and checked against NumPy
    python -m tinykernels cache [info|clear|path]
    mpiexec -n 4 python -m tinykernels diffusion3d   # 3-D heat diffusion on MPI ranks (tinykernels.distributed)
    python -m tinykernels llm-demo         # a Llama-style decoder on tinykernels.llm kernels, timed

This module only parses arguments and prints; the demo lives in :mod:`tinykernels.demo`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

CACHE_SUBDIRS = ("kernels", "launch", "toolchains")


def _fmt_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} TiB"  # pragma: no cover


def _files(unit: str, n: int) -> str:
    return f"{n} {unit}" + ("" if n == 1 else "s")


# ---------------------------------------------------------------------------- devices

def _default_reason() -> str:
    dev = (os.environ.get("DEV") or "").strip()
    if dev:
        return f"from the DEV environment variable (DEV={dev})"
    return "first available of CUDA, ROCm, Metal, CPU (DEV is not set)"


def cmd_devices(args, out) -> int:
    import tinykernels as tk
    from tinykernels.runtime.compiler import cache_dir, toolchain

    info = tk.backends()
    rows = [("backend", "available", "detail")] + [(name, "yes" if ok else "no", str(detail))
                                                    for name, (ok, detail) in info.items()]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print("Backends", file=out)
    for k, r in enumerate(rows):
        print(f"  {r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]}", file=out)
        if k == 0:
            print(f"  {'-' * w0}  {'-' * w1}  {'-' * 6}", file=out)
    print(file=out)

    rc = 0
    try:
        d = tk.default_backend()
        print(f"Default backend: {d!r}, {_default_reason()}", file=out)
    except Exception as e:  # an invalid or unavailable DEV
        print(f"Default backend: none: {type(e).__name__}: {e}", file=out)
        rc = 1
    print(file=out)

    print("CPU backend", file=out)
    cores = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = cores
    print(f"  cores      {cores}" + (f" ({usable} usable by this process)" if usable != cores else ""), file=out)
    nt = os.environ.get("TK_NUM_THREADS")
    try:
        threads = tk.CPU().threads
        how = f"TK_NUM_THREADS={nt}" if nt else "all cores; set TK_NUM_THREADS or tk.CPU(threads=n) to change"
        print(f"  threads    {threads} ({how})", file=out)
    except Exception as e:
        print(f"  threads    invalid: {e}", file=out)
    try:
        tc = toolchain()
        print(f"  compiler   {' '.join(tc.cmd)}" + (" (from CC)" if os.environ.get("CC") else ""), file=out)
        print(f"  version    {tc.version}", file=out)
        omp = [f for f in tc.flags if "openmp" in f or f == "-lomp"]
        print(f"  OpenMP     {'yes (' + ' '.join(omp) + ')' if tc.openmp else 'no: kernels run on one thread'}",
              file=out)
        print(f"  flags      {' '.join(tc.flags)}", file=out)
    except Exception as e:
        print(f"  compiler   none: {e}", file=out)
    src = "TK_CACHE_DIR" if os.environ.get("TK_CACHE_DIR") else "default; set TK_CACHE_DIR to change"
    print(f"  cache dir  {cache_dir()} ({src})", file=out)
    return rc


# ---------------------------------------------------------------------------- cache

def _scan(d: Path) -> tuple[int, int]:
    """(number of files, total bytes) under ``d``."""
    n = size = 0
    if not d.is_dir():
        return 0, 0
    for root, _dirs, files in os.walk(d):
        for f in files:
            try:
                size += os.lstat(os.path.join(root, f)).st_size
                n += 1
            except OSError:
                pass
    return n, size


def cmd_cache(args, out) -> int:
    from tinykernels.runtime.compiler import configured_cache_dir
    root = configured_cache_dir()
    action = args.action or "info"
    if action == "path":
        print(root, file=out)
        return 0
    if action == "info":
        print(f"cache dir  {root}" + ("" if root.exists() else "  (does not exist yet)"), file=out)
        tn = tb = 0
        for sub in CACHE_SUBDIRS:
            n, b = _scan(root / sub)
            tn, tb = tn + n, tb + b
            print(f"  {sub:<11} {_files('file', n):>12}  {_fmt_bytes(b):>10}", file=out)
        others = sorted(p.name for p in root.iterdir() if p.name not in CACHE_SUBDIRS) if root.is_dir() else []
        for name in others:
            n, b = _scan(root / name) if (root / name).is_dir() else (1, (root / name).lstat().st_size)
            print(f"  {name:<11} {_files('file', n):>12}  {_fmt_bytes(b):>10}  (not tinykernels'; kept by clear)",
                  file=out)
        print(f"  {'total':<11} {_files('file', tn):>12}  {_fmt_bytes(tb):>10}", file=out)
        return 0
    if action == "clear":
        tn = tb = 0
        failed = False
        for sub in CACHE_SUBDIRS:
            d = root / sub
            if not d.exists():
                continue
            n, b = _scan(d)
            try:
                shutil.rmtree(d)
            except OSError as e:
                print(f"could not remove {d}: {e}", file=sys.stderr)
                failed = True
                continue
            tn, tb = tn + n, tb + b
            print(f"removed {d}  ({_files('file', n)}, {_fmt_bytes(b)})", file=out)
        print(f"cleared {_files('file', tn)}, {_fmt_bytes(tb)} from {root}", file=out)
        return 1 if failed else 0
    raise AssertionError(action)  # argparse restricts the choices


# ---------------------------------------------------------------------------- setup

def cmd_setup(args, out) -> int:
    """The one-time set-up of the CPU backend, ahead of the first launch (e.g. in a Docker build)."""
    import time
    from tinykernels.errors import BackendUnavailable
    from tinykernels.runtime import compiler, launcher
    t0 = time.perf_counter()
    try:
        tc = compiler.toolchain()
    except BackendUnavailable as e:
        print(f"no C compiler: {e}", file=out)
        return 1
    mod = launcher.get()
    kind = ("C extension" if not isinstance(mod, launcher.PyLauncher)
            else "ctypes fallback (Python's headers are missing: install python3-dev for faster launches)")
    print(f"C compiler  {' '.join(tc.cmd)}: {tc.version}", file=out)
    print(f"OpenMP      {'yes' if tc.openmp else 'no (threads through pthreads)'}", file=out)
    print(f"launcher    {kind}", file=out)
    print(f"cache dir   {compiler.cache_dir()}", file=out)
    built = compiler.first_use_notice.cache_info().currsize > 0     # the notice marks first-use work
    print(f"set up in {time.perf_counter() - t0:.2f} s" if built else "already set up (nothing to build)",
          file=out)
    return 0


# ---------------------------------------------------------------------------- demo

def cmd_demo(args, out) -> int:
    import tinykernels as tk
    from tinykernels import demo
    png = None if args.no_png else args.png
    try:
        demo.run_demo(backend=args.backend, size=args.size, steps=args.steps, png=png, out=out,
                      progress=sys.stderr)
    except (tk.BackendUnavailable, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except AssertionError as e:
        print(f"demo FAILED: {e}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------- diffusion3d

def cmd_diffusion3d(args, out) -> int:
    import tinykernels as tk
    try:
        from tinykernels.distributed import diffusion3d
        stats = diffusion3d.run(args, out=out)
    except (ImportError, tk.BackendUnavailable, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0 if stats["same"] else 1


# ---------------------------------------------------------------------------- llm-demo

#: llm-demo's size options (argparse dest -> ModelConfig field)
_DEMO_SIZES = {"layers": "n_layers", "dim": "dim", "heads": "n_heads", "kv_heads": "n_kv_heads",
               "hidden": "hidden", "vocab": "vocab"}


def cmd_llm_demo(args, out) -> int:
    import tinykernels as tk
    from tinykernels.llm import demo as llm_demo
    from tinykernels.llm.model import ModelConfig
    cfg = None
    sizes = {f: getattr(args, a) for a, f in _DEMO_SIZES.items()}
    given = [f"--{a.replace('_', '-')}" for a, f in _DEMO_SIZES.items() if sizes[f] is not None]
    if args.gguf is not None and given:
        print(f"error: llm-demo: {', '.join(given)}: sizes of the random model, not of a --gguf file",
              file=sys.stderr)
        return 1
    if args.gguf is None:            # an option given as 0 stays 0 (ModelConfig refuses it)
        d = llm_demo.DEMO_CONFIG
        cfg = ModelConfig(**{f: getattr(d, f) if v is None else v for f, v in sizes.items()})
    try:
        llm_demo.run_llm_demo(backend=args.backend, gguf=args.gguf, tokens=args.tokens, cfg=cfg, seed=args.seed,
                              check=not args.no_check, out=out)
    except (tk.BackendUnavailable, ValueError, ImportError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except AssertionError as e:
        print(f"llm-demo FAILED: {e}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    import tinykernels as tk
    from tinykernels import demo
    p = argparse.ArgumentParser(prog="python -m tinykernels",
                                description="tinykernels: Python kernels compiled for CPUs and GPUs.")
    p.add_argument("--version", action="version", version=f"tinykernels {tk.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("devices", help="list backends, the default one, and the CPU toolchain",
                   description="List every backend with its availability (and, when unavailable, why and "
                               "how to get it), the default backend, and the CPU backend's toolchain.")

    d = sub.add_parser("demo", help="2-D heat diffusion: timed, and checked against NumPy",
                       description="2-D heat diffusion (explicit 5-point stencil, ping-pong buffers, fixed "
                                   "boundaries) on the default backend. Prints the time per step, the "
                                   "effective memory throughput T_eff and its fraction of numpy's copy "
                                   "bandwidth, after checking the kernel against NumPy on a small grid.")
    d.add_argument("--backend", metavar="DEV", default=None,
                   help="backend to run on, e.g. CPU, CPU:4, CUDA:1 (default: the DEV variable, else the "
                        "first available)")
    d.add_argument("--size", type=int, default=None, metavar="N",
                   help=f"grid of N x N, float64 (float32 where the backend has no float64); default "
                        f"{demo.DEFAULT_SIZE}, {demo.INTERP_SIZE} on the interpreter")
    d.add_argument("--steps", type=int, default=None,
                   help=f"time steps (default {demo.DEFAULT_STEPS}, {demo.INTERP_STEPS} on the interpreter)")
    d.add_argument("--png", metavar="PATH", default="heat.png",
                   help="where to save a picture of the final field (default heat.png; needs matplotlib)")
    d.add_argument("--no-png", action="store_true", help="do not save a picture")

    m = sub.add_parser("diffusion3d", help="3-D heat diffusion on MPI ranks (run it with mpiexec -n N)",
                       description="3-D heat diffusion on an implicit global grid (tinykernels.distributed; "
                                   "needs mpi4py). Run with mpiexec -n N python -m tinykernels diffusion3d. "
                                   "Prints T_eff per rank and the fraction of the halo exchange hidden behind "
                                   "the interior's computation.")
    from tinykernels.distributed.diffusion3d import add_arguments
    add_arguments(m)

    sub.add_parser("setup", help="probe the C compiler and build the launcher now (once per machine)",
                   description="Do the CPU backend's one-time set-up ahead of the first launch: probe the "
                               "C compiler (version, -march=native, OpenMP) and compile the launcher "
                               "extension into the cache. The first launch does this by itself otherwise "
                               "(a fraction of a second; it says so once on stderr, TK_QUIET=1 silences it).")

    c = sub.add_parser("cache", help="show, locate or clear the compiled-kernel cache",
                       description="info (default): location, files and size per subfolder; "
                                   "clear: delete compiled kernels, the launcher and toolchain probes; "
                                   "path: print only the location.")
    c.add_argument("action", nargs="?", choices=("info", "clear", "path"), default="info")

    m = sub.add_parser("llm-demo", help="a Llama-style decoder on tinykernels.llm kernels: tokens/s and GB/s",
                       description="Greedy decoding with a Llama-style model (RMSNorm, RoPE, grouped-query "
                                   "attention over a KV cache, SwiGLU MLP) that runs only tinykernels.llm "
                                   "kernels, with device-resident positions. Without --gguf the weights are "
                                   "random (q8_0 attention, q4_0 MLP), written to a temporary GGUF file and "
                                   "read back. The first steps are checked against NumPy; then prints tokens "
                                   "per second and the GB/s of weights read.")
    m.add_argument("--backend", metavar="DEV", default=None, help="backend (default: the DEV variable, else the "
                                                                  "first available)")
    m.add_argument("--gguf", metavar="PATH", default=None,
                   help="a 'llama' GGUF file (q4_0/q8_0/q4_k/float tensors) instead of random weights")
    m.add_argument("--tokens", type=int, default=64, help="tokens to decode (default 64)")
    m.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    m.add_argument("--no-check", action="store_true", help="skip the comparison with NumPy")
    for flag, name in (("--layers", "n_layers"), ("--dim", "dim"), ("--heads", "n_heads"),
                       ("--kv-heads", "n_kv_heads"), ("--hidden", "hidden"), ("--vocab", "vocab")):
        m.add_argument(flag, type=int, default=None,
                       help=f"random model's {name} (default {getattr(demo_cfg(), name)})")
    return p


def demo_cfg():
    """The random model of llm-demo (imported lazily: building the parser compiles nothing)."""
    from tinykernels.llm.demo import DEMO_CONFIG
    return DEMO_CONFIG


def main(argv=None) -> int:
    """Entry point of ``python -m tinykernels``; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:                  # --help, --version, usage errors
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    out = sys.stdout
    if args.command is None:
        parser.print_help(out)
        return 0
    return {"devices": cmd_devices, "demo": cmd_demo, "setup": cmd_setup, "cache": cmd_cache,
            "diffusion3d": cmd_diffusion3d,
            "llm-demo": cmd_llm_demo}[args.command](args, out)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
