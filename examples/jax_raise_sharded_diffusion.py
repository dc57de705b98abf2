"""A tinykernels stencil raised into JAX and run sharded over several devices.

The 2-D diffusion kernel below is ordinary tinykernels code. ``tinykernels.jax.raise_kernel``
lowers it to JAX operations, so XLA compiles it for whatever devices JAX has and partitions
it with ``jax.sharding``: here the field is split by rows over every device of a 1-D mesh.

On a machine with one CPU, ask XLA for several host devices:

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python examples/jax_raise_sharded_diffusion.py

It checks the sharded result against the same kernel on tinykernels' CPU backend (bit for
bit: the raised code rounds every float operation as the compiled C does).
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import tinykernels as tk
import tinykernels.jax as tkjax


@tk.kernel
def diffuse(out, u: tk.Const, a):
    i, j = tk.index(tk.Global, tk.Cartesian)
    nx, ny = u.shape[0], u.shape[1]
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        out[i, j] = u[i, j]                       # fixed boundary
    else:
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        out[i, j] = u[i, j] + a * lap


def initial(nx: int, ny: int) -> np.ndarray:
    x, y = np.meshgrid(np.linspace(-1, 1, nx), np.linspace(-1, 1, ny), indexing="ij")
    return np.exp(-20 * (x * x + y * y)).astype(np.float32)


def run_sharded(u0: np.ndarray, steps: int, a: float) -> tuple:
    """``steps`` diffusion steps on every JAX device (rows sharded); (result, number of devices)."""
    step = tkjax.raise_kernel(diffuse, outputs=["out"])
    devices = np.array(jax.devices())
    mesh = Mesh(devices, ("rows",))
    sharding = NamedSharding(mesh, P("rows", None))

    @jax.jit
    def evolve(u):
        def body(_, v):
            return step(jnp.zeros_like(v), v, a=a)
        return jax.lax.fori_loop(0, steps, body, u)

    u = jax.device_put(jnp.asarray(u0), sharding)
    out = evolve(u)
    return np.asarray(out), len(devices), out.sharding


def run_cpu(u0: np.ndarray, steps: int, a: float) -> np.ndarray:
    """The same steps with the compiled kernel on tinykernels' CPU backend."""
    u, out = u0.copy(), np.zeros_like(u0)
    k = diffuse(tk.CPU())
    for _ in range(steps):
        k(out, u, a, ndrange=u.shape)
        u, out = out, u
    return u


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=128, help="grid size (n x n); a multiple of the device count")
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    u0 = initial(args.n, args.n)
    got, ndev, sharding = run_sharded(u0, args.steps, 0.2)
    ref = run_cpu(u0, args.steps, 0.2)
    same = np.array_equal(got, ref)
    print(f"raised diffusion, {args.n}x{args.n}, {args.steps} steps on {ndev} device(s) "
          f"({sharding}); equal to the CPU backend bit for bit: {same}")
    if not same:
        raise SystemExit(f"mismatch: max |diff| = {np.abs(got - ref).max()}")


if __name__ == "__main__":
    main()
