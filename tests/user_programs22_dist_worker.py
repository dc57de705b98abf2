"""Worker of tests/test_user_programs22_dist.py, run as ``python WORKER BACKEND [DIMS]`` (one
rank) or under ``mpiexec -n 2`` (DIMS such as ``1,2``: ranks per dimension, default chosen by MPI): a 2-D heat equation periodic along x, written from SPEC section 12, run
with update_halo and with hide_communication, gathered and compared on rank 0 bit for bit with
the same steps in NumPy on the global grid. Prints OK on rank 0."""
import sys

import numpy as np

import tinykernels as tk
from tinykernels.distributed import GlobalGrid


@tk.kernel
def heat(out, u: tk.Const, a):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = u[i, j] + a * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


def numpy_steps(g, steps, a):
    """The same steps on the global array: periodic along x (np.roll), the first and last
    columns fixed (the non-periodic boundary)."""
    for _ in range(steps):
        new = g.copy()
        lap = (np.roll(g, 1, 0) + np.roll(g, -1, 0))[:, 1:-1] + g[:, :-2] + g[:, 2:]
        new[:, 1:-1] = g[:, 1:-1] + a * (lap - 4.0 * g[:, 1:-1])
        g = new
    return g


def main(dev, dims=None):
    b = tk.backend(dev)
    steps, a = 6, 0.15
    grid = GlobalGrid((7, 6), halo=1, dims=dims, periodic=(True, False))
    rng = np.random.default_rng(40)
    g0 = rng.random(grid.global_shape)            # every rank draws the same global field
    inner = tuple(range(1, n - 1) for n in grid.local_shape)
    results = {}
    for how in ("update_halo", "hide_communication"):
        u = tk.asarray(np.ascontiguousarray(grid.local_part(g0)), backend=b)
        v = tk.asarray(np.ascontiguousarray(grid.local_part(g0)), backend=b)
        grid.update_halo(u)          # the periodic halo planes of the start field
        grid.update_halo(v)
        k = heat(b)
        for _ in range(steps):
            if how == "update_halo":
                k(v, u, a, ndrange=inner)
                grid.update_halo(v)
            else:
                def step(ndrange, stream, u=u, v=v):
                    k(v, u, a, ndrange=ndrange, stream=stream)
                grid.hide_communication(2, step, v)
            u, v = v, u
        tk.synchronize(b)
        results[how] = grid.gather(u)
    if grid.rank == 0:
        ref = numpy_steps(g0, steps, a)
        for how, got in results.items():
            assert got.shape == grid.global_shape == ref.shape, (how, got.shape, ref.shape)
            assert np.array_equal(got, ref), (how, grid.nprocs, np.abs(got - ref).max())
        print("nprocs", grid.nprocs, "dims", tuple(grid.dims), "global", grid.global_shape)
        print("OK")
    grid.free()


if __name__ == "__main__":
    main(sys.argv[1], tuple(int(d) for d in sys.argv[2].split(",")) if len(sys.argv) > 2 else None)
