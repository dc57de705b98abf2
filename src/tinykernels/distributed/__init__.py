"""Distributed stencils on MPI: an implicit global grid, halo exchange, hidden communication.

    from tinykernels.distributed import GlobalGrid
    grid = GlobalGrid((66, 66, 66), halo=1)          # run with: mpiexec -n 8 python script.py
    grid.update_halo(T)                                # exchange halos with the neighbours
    grid.hide_communication(8, step, T2)               # boundary first, exchange under the interior
    G = grid.gather(T)                                 # the global array on rank 0

See docs/distributed.md. Needs mpi4py (``pip install 'tinykernels[mpi]'``); importing this
package does not: MPI starts when the first :class:`GlobalGrid` is made.
"""
from .grid import GlobalGrid
from .topology import local_shape_for

__all__ = ["GlobalGrid", "local_shape_for"]
