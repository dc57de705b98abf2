"""The tinykernels kernels the benchmark scripts time (bench_cpu.py, bench_gpu.py)."""
import tinykernels as tk


@tk.kernel
def tk_copy(a, b: tk.Const):
    i = tk.index()
    a[i] = b[i]


@tk.kernel
def tk_triad(a, b: tk.Const, c: tk.Const, s):
    i = tk.index()
    a[i] = b[i] + s * c[i]


@tk.kernel
def tk_diffusion2d(T2, T: tk.Const, dt, lam):
    i, j = tk.index(tk.Global, tk.Cartesian)
    T2[i, j] = T[i, j] + dt * lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1] + T[i, j + 1] - 4.0 * T[i, j])


@tk.kernel
def tk_diffusion3d(T2, T: tk.Const, dt, lam):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    T2[i, j, k] = T[i, j, k] + dt * lam * (T[i - 1, j, k] + T[i + 1, j, k] + T[i, j - 1, k] + T[i, j + 1, k]
                                           + T[i, j, k - 1] + T[i, j, k + 1] - 6.0 * T[i, j, k])


@tk.kernel
def tk_tiny(a, b: tk.Const, s):
    i = tk.index()
    a[i] = b[i] * s


TINY_ADD = 1.0        # module globals tk_tiny_globals folds in: each launch checks they are unchanged
TINY_SCALE = 1.0
TINY_OFFSET = 0.0


@tk.func
def _tiny_shift(x):
    return x + TINY_OFFSET


@tk.kernel
def tk_tiny_globals(a, b: tk.Const, s):
    """tk_tiny reading three globals and a @tk.func (four values the launch checks)."""
    i = tk.index()
    a[i] = _tiny_shift(b[i] * s * TINY_SCALE) * TINY_ADD
