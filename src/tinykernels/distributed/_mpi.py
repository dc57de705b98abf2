"""mpi4py access: a clear error when it is missing, CUDA-awareness, byte buffers."""
from __future__ import annotations

import os

import numpy as np

INSTALL_HINT = ("tinykernels.distributed needs mpi4py and an MPI library: pip install 'tinykernels[mpi]' "
                "(mpi4py; add the 'mpich' wheel where no MPI is installed, e.g. pip install mpich)")


def mpi():
    """The ``mpi4py.MPI`` module (initializes MPI); ImportError with the install hint if absent."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from None
    return MPI


def cuda_aware(MPI) -> bool:
    """Whether the MPI library takes CUDA device pointers.

    ``TK_MPI_CUDA_AWARE=1``/``0`` decides when set; otherwise the library's own query
    (``MPIX_Query_cuda_support`` where mpi4py exposes it) or the usual switches of
    Cray MPICH (``MPICH_GPU_SUPPORT_ENABLED=1``) and MVAPICH2 (``MV2_USE_CUDA=1``).
    """
    env = os.environ.get("TK_MPI_CUDA_AWARE")
    if env is not None and env.strip() != "":
        return env.strip().lower() not in ("0", "false", "no", "off")
    query = getattr(MPI, "Query_cuda_support", None)
    if query is not None:
        try:
            return bool(query())
        except Exception:      # a library without the extension
            pass
    return os.environ.get("MPICH_GPU_SUPPORT_ENABLED") == "1" or os.environ.get("MV2_USE_CUDA") == "1"


def byte_spec(MPI, buf):
    """An MPI buffer spec sending ``buf``'s bytes (any dtype, host or CUDA device memory)."""
    if isinstance(buf, np.ndarray):
        return [buf.view(np.uint8), MPI.BYTE]
    return [buf, buf.nbytes, MPI.BYTE]        # a device array (CUDA-aware MPI)
