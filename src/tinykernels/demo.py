"""The ``python -m tinykernels demo``: 2-D heat diffusion with an explicit 5-point stencil.

A hot Gaussian blob sits in a cold field whose edges are held at zero (Dirichlet
boundaries). Each step reads ``T`` and writes ``T2`` on the interior only, then the two
buffers swap roles (ping-pong). Before the timed run, the kernel is checked against a
NumPy implementation (:func:`reference_step`) on a small grid.

    from tinykernels.demo import run_demo
    stats = run_demo(size=1024, steps=200, png=None)
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import tinykernels as tk

LAM = 1.0          # diffusivity (grid spacing 1)
DT = 0.2           # time step; stable while LAM * DT <= 0.25

DEFAULT_SIZE = 2048
DEFAULT_STEPS = 1000   # about 3-4 s on 2 cores at 2048 x 2048 float64
VERIFY_SIZE = 128
VERIFY_STEPS = 20
# The interpreter runs each work item in Python (tens of thousands of items a second): a
# grid the size of the compiled backends' would take hours, so it gets a small one.
INTERP_SIZE, INTERP_STEPS, INTERP_VERIFY = 64, 20, (32, 5)


def defaults_for(backend) -> tuple[int, int]:
    """The demo's default (size, steps) on ``backend``: a few seconds' work."""
    if getattr(backend, "name", "") == "INTERP":
        return INTERP_SIZE, INTERP_STEPS
    return DEFAULT_SIZE, DEFAULT_STEPS


def dtype_for(backend) -> np.dtype:
    """float64 where the backend has it, else float32 (WebGPU, Metal)."""
    return np.dtype(np.float64 if getattr(backend, "supports_float64", True) else np.float32)


@tk.kernel
def heat_step(T2, T: tk.Const, lam, dt):
    """One explicit Euler step of dT/dt = lam * laplacian(T) on the points of the ndrange."""
    i, j = tk.index(tk.Global, tk.Cartesian)
    T2[i, j] = T[i, j] + dt * lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1] + T[i, j + 1] - 4.0 * T[i, j])


def reference_step(T: np.ndarray, lam: float = LAM, dt: float = DT, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`heat_step` in NumPy: the interior gets the stencil, the boundary is copied."""
    if out is None:
        out = T.copy()
    else:
        out[...] = T
    c = T[1:-1, 1:-1]
    out[1:-1, 1:-1] = c + dt * lam * (T[:-2, 1:-1] + T[2:, 1:-1] + T[1:-1, :-2] + T[1:-1, 2:] - 4.0 * c)
    return out


def reference(T0: np.ndarray, steps: int, lam: float = LAM, dt: float = DT) -> np.ndarray:
    """``steps`` steps of :func:`reference_step` from ``T0``."""
    a, b = T0.copy(), T0.copy()
    for _ in range(steps):
        reference_step(a, lam, dt, out=b)
        a, b = b, a
    return a


def initial_field(n: int, dtype=np.float64) -> np.ndarray:
    """A hot Gaussian blob (peak 1, sigma n/32, at least 2 cells) in a cold (0) field, edges at 0."""
    x = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
    sigma = max(n / 32.0, 2.0)
    g = np.exp(-0.5 * (x / sigma) ** 2)
    T = np.multiply.outer(g, g).astype(dtype)
    T[0, :] = T[-1, :] = T[:, 0] = T[:, -1] = 0.0
    return T


def simulate(backend, T0: np.ndarray, steps: int, lam: float = LAM, dt: float = DT,
             on_progress=None, chunk: int | None = None):
    """Run ``steps`` steps of :func:`heat_step` from ``T0`` on ``backend``.

    Returns ``(final field as NumPy, seconds)``; the time excludes compilation (one
    warm-up launch, whose result the first timed step overwrites) and includes waiting
    for the device. ``on_progress(done)`` is called every ``chunk`` steps after a
    synchronization, so it reports finished work, not queued work; ``on_progress(0)``
    is called once just before the clock starts.
    """
    n0, n1 = T0.shape
    T = tk.zeros(T0.shape, T0.dtype, backend=backend)
    T2 = tk.zeros(T0.shape, T0.dtype, backend=backend)
    tk.copyto(T, T0)
    tk.copyto(T2, T0)          # both buffers carry the fixed boundary values
    k = heat_step(backend)
    interior = (range(1, n0 - 1), range(1, n1 - 1))
    k(T2, T, lam, dt, ndrange=interior)      # warm-up: compiles; T2 is rewritten by step 1
    tk.synchronize(backend)
    chunk = chunk or max(1, steps // 200)
    if on_progress is not None:
        on_progress(0)                       # the clock starts now
    t0 = time.perf_counter()
    done = 0
    while done < steps:
        for _ in range(min(chunk, steps - done)):
            k(T2, T, lam, dt, ndrange=interior)
            T, T2 = T2, T
            done += 1
        tk.synchronize(backend)
        if on_progress is not None:
            on_progress(done)
    seconds = time.perf_counter() - t0
    return np.array(T.numpy(), copy=True), seconds


def copy_bandwidth(n_elems: int, dtype=np.float64, reps: int = 5) -> float:
    """Bytes/s of NumPy's ``np.copyto`` (read + write) on an array of ``n_elems``: best of ``reps``."""
    src = np.ones(n_elems, dtype=dtype)
    dst = np.empty_like(src)
    np.copyto(dst, src)                     # touch the pages first
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2 * src.nbytes / max(best, 1e-9)


class Progress:
    """A plain-text progress bar: ``\\r`` updates on a terminal, a line every 10% otherwise."""

    def __init__(self, total: int, stream=None, label: str = "heat", width: int = 30):
        self.total, self.label, self.width = max(1, total), label, width
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.last_draw = 0.0
        self.next_tenth = 1

    def update(self, done: int) -> None:
        if self.stream is None:
            return
        now = time.perf_counter()
        if done == 0:                        # (re)start the clock; nothing to show yet
            self.t0 = self.last_draw = now
            return
        elapsed = now - self.t0
        frac = done / self.total
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        if self.tty:
            if done < self.total and now - self.last_draw < 0.1:
                return
            self.last_draw = now
            full = int(frac * self.width)
            bar = "#" * full + "-" * (self.width - full)
            self.stream.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}%  {done}/{self.total}  "
                              f"{elapsed:6.2f} s  eta {eta:5.1f} s ")
            if done >= self.total:
                self.stream.write("\n")
            self.stream.flush()
        else:
            if frac * 10 + 1e-12 < self.next_tenth and done < self.total:
                return
            while self.next_tenth <= frac * 10 + 1e-12:
                self.next_tenth += 1
            more = f", about {eta:.1f} s to go" if done < self.total else ""
            self.stream.write(f"{self.label}: {done}/{self.total} steps ({frac * 100:.0f}%), {elapsed:.2f} s{more}\n")
            self.stream.flush()


def save_png(T: np.ndarray, path: str, title: str) -> str | None:
    """Save the field as a PNG with matplotlib (Agg); returns the path, or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 5), dpi=120)
    im = ax.imshow(T, cmap="inferno", origin="lower", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="temperature")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return os.path.abspath(path)


def _fmt_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024


def _fmt_rate(bps: float) -> str:
    """Bytes per second in GB/s, or MB/s below 0.1 GB/s (the interpreter)."""
    return f"{bps / 1e9:.2f} GB/s" if bps >= 1e8 else f"{bps / 1e6:.3f} MB/s"


def run_demo(backend=None, size: int | None = None, steps: int | None = None, png: str | None = "heat.png",
             out=sys.stdout, progress=sys.stderr, verify: bool = True) -> dict:
    """Run the heat-diffusion demo and print a report to ``out``; returns the numbers.

    ``backend``: a backend, a DEV string or None (``tk.default_backend()``).
    ``size``, ``steps``: the grid is ``size x size``; None picks :func:`defaults_for` the
    backend. The field is float64 where the backend has it, else float32.
    ``png``: where to save a picture of the final field (needs matplotlib), or None.
    ``progress``: stream for the progress bar (None: no bar).
    Raises ``AssertionError`` when the kernel disagrees with NumPy or the run is not sane.
    """
    b = tk.default_backend() if backend is None else tk.backend(backend)
    d_size, d_steps = defaults_for(b)
    size = d_size if size is None else size
    steps = d_steps if steps is None else steps
    if size < 3:
        raise ValueError("size must be at least 3 (the boundary is fixed)")
    if steps < 1:
        raise ValueError("steps must be at least 1")
    dtype = dtype_for(b)
    single = dtype == np.float32

    def say(*a):
        print(*a, file=out, flush=True)

    say(f"tinykernels {tk.__version__} heat diffusion on {b!r}")
    say(f"  grid {size} x {size} {dtype.name}, {steps} steps, lam*dt = {LAM * DT:g}, Dirichlet boundaries at 0")

    if single:
        say("  (this backend has no float64: the field is float32)")
    if b.name == "INTERP" and (size, steps) == (INTERP_SIZE, INTERP_STEPS):
        say("  (the interpreter runs each work item in Python: a small grid by default; --size/--steps change it)")
    result = {"backend": repr(b), "size": size, "steps": steps, "dtype": dtype.name}

    # 1. correctness: the kernel against NumPy on a small grid
    if verify:
        n, s = INTERP_VERIFY if b.name == "INTERP" else (VERIFY_SIZE, VERIFY_STEPS)
        T0s = initial_field(n, dtype)
        got, _ = simulate(b, T0s, s)
        want = reference(T0s, s)             # NumPy in the same dtype (NEP 50: the floats are weak)
        rtol, atol = (1e-5, 1e-6) if single else (1e-12, 1e-14)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   err_msg=f"heat_step on {b!r} disagrees with the NumPy reference")
        err = float(np.max(np.abs(got - want)))
        say(f"  verified against NumPy: {n} x {n}, {s} steps, max |difference| = {err:.1e}")
        result.update(verified=True, verify_max_abs_err=err)
    else:
        result.update(verified=False, verify_max_abs_err=None)

    # 2. the timed run
    T0 = initial_field(size, dtype)
    bar = Progress(steps, progress)
    T, seconds = simulate(b, T0, steps, on_progress=bar.update)

    # 3. sanity: diffusion only spreads and loses heat through the cold edges
    max0, max1 = float(T0.max()), float(T.max())
    heat0, heat1 = float(T0.sum()), float(T.sum())
    min1 = float(T.min())
    if not np.all(np.isfinite(T)):
        raise AssertionError("the field contains NaN or Inf after the run")
    if not max1 < max0:
        raise AssertionError(f"the maximum temperature did not decrease: {max0} -> {max1}")
    if min1 < (-1e-6 if single else -1e-12):
        raise AssertionError(f"the temperature went negative ({min1}): the stencil is unstable or wrong")
    if heat1 > heat0 * (1 + (1e-4 if single else 1e-9)):
        raise AssertionError(f"the total heat grew: {heat0} -> {heat1}")

    # 4. performance
    bytes_per_step = 2 * size * size * dtype.itemsize          # read T, write T2
    per_step = seconds / steps
    teff = bytes_per_step / per_step
    copy_bw = copy_bandwidth(size * size, dtype)
    frac = teff / copy_bw

    say(f"  steps          {steps}")
    say(f"  time           {seconds:.3f} s")
    say(f"  time/step      {per_step * 1e3:.3f} ms")
    say(f"  T_eff          {_fmt_rate(teff)}  ({_fmt_bytes(bytes_per_step)} moved per step: read T, write T2)")
    say(f"  memory copy    {copy_bw / 1e9:.2f} GB/s  (numpy's np.copyto of an array the same size, "
        f"single-threaded, best of 5)")
    say(f"  T_eff / copy   {frac * 100:.0f}%" if frac >= 0.01 else f"  T_eff / copy   {frac * 100:.2g}%")
    say(f"  sanity         max temperature {max0:.4f} -> {max1:.4f} (decreased), "
        f"total heat {heat0:.1f} -> {heat1:.1f}, min {min1:.2e}")
    result.update(seconds=seconds, seconds_per_step=per_step, bytes_per_step=bytes_per_step,
                  teff_gbs=teff / 1e9, copy_gbs=copy_bw / 1e9, copy_fraction=frac,
                  max_initial=max0, max_final=max1, heat_initial=heat0, heat_final=heat1, png=None)

    # 5. picture
    if png:
        path = save_png(T, png, f"heat after {steps} steps ({size} x {size})")
        if path:
            say(f"  PNG            {path}")
            result["png"] = path
        else:
            say("  PNG            not written: install matplotlib for a PNG (pip install matplotlib)")
    return result
