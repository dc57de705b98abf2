"""``GlobalGrid``: a Cartesian grid of MPI ranks, each holding one block of a global array."""
from __future__ import annotations

import operator
from typing import Callable, Sequence

import numpy as np

import tinykernels as tk
from tinykernels.dtypes import from_any as _kernel_dtype

from . import _mpi, topology as T
from .halo import exchange
from .pack import Staging, ndrange_of


def _integer(x, name: str) -> int:
    """``x`` as an int; a TypeError naming the argument for anything else (``int(1.5)`` would
    silently make a grid the caller did not ask for)."""
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"GlobalGrid: {name}: expected an int, got {x!r}") from None


class GlobalGrid:
    """An implicit global grid over the ranks of ``comm`` (as ImplicitGlobalGrid.jl's).

    ``local_shape`` (1 to 3 ints) is the shape of every rank's local arrays, halos
    included; neighbouring ranks overlap by ``2 * halo`` planes, so the global shape is
    ``dims * (n - 2 * halo) + 2 * halo`` per dimension (``dims * (n - 2 * halo)`` where
    periodic). ``dims``: ranks per dimension; ``None`` or zeros let ``MPI.Compute_dims``
    choose. ``periodic``: a bool or one per dimension. ``comm``: an mpi4py communicator
    (default ``MPI.COMM_WORLD``); every rank of it must construct the grid with the same
    arguments. ``simulated_latency`` (seconds) makes every halo exchange wait that long
    after posting its messages, emulating a network on one machine (for benchmarks).

    Attributes: ``ndim``, ``local_shape``, ``halo``, ``dims``, ``periodic``, ``comm`` (the
    Cartesian communicator), ``rank``, ``nprocs``, ``coords``, ``global_shape``,
    ``neighbors`` (per dimension ``(left, right)`` ranks, ``MPI.PROC_NULL`` where none).
    The communicator is MPI's to keep until :meth:`free` (or the end of a ``with`` block).
    """

    def __init__(self, local_shape: Sequence[int], halo: int = 1, dims: Sequence[int] | None = None,
                 periodic: bool | Sequence[bool] = False, comm=None, *, reorder: bool = False,
                 simulated_latency: float = 0.0):
        MPI = self._MPI = _mpi.mpi()
        comm = MPI.COMM_WORLD if comm is None else comm
        nprocs = comm.Get_size()
        try:                    # checked on every rank, then agreed on: one rank's error is every rank's
            shape, halo, dims, periodic = self._arguments(MPI, nprocs, local_shape, halo, dims, periodic)
            mine, err = (shape, halo, periodic, dims), None
        except (ValueError, TypeError) as e:
            mine, err = None, e
        theirs = comm.allgather((mine, None if err is None else f"{type(err).__name__}: {err}"))
        if err is not None:
            raise err
        failed = [(r, msg) for r, (_, msg) in enumerate(theirs) if msg is not None]
        if failed:
            raise ValueError(f"GlobalGrid: rank {failed[0][0]} rejected its arguments ({failed[0][1]}); "
                             "every rank must pass the same")
        bad = next((r for r, (t, _) in enumerate(theirs) if t != mine), None)
        if bad is not None:
            raise ValueError(f"GlobalGrid: ranks disagree: rank {comm.Get_rank()} has (local_shape, halo, periodic, "
                             f"dims) = {mine}, rank {bad} has {theirs[bad][0]}; every rank must pass the same")
        self.ndim, self.local_shape, self.halo, self.dims, self.periodic = len(shape), shape, halo, dims, periodic
        ndim = self.ndim
        self.comm = comm.Create_cart(list(self.dims), periods=list(self.periodic), reorder=reorder)
        self.rank, self.nprocs = self.comm.Get_rank(), nprocs
        self.coords = tuple(self.comm.Get_coords(self.rank))
        self.neighbors = tuple(tuple(self.comm.Shift(d, 1)) for d in range(ndim))
        self.global_shape = tuple(T.global_size(n, self.halo, m, p)
                                  for n, m, p in zip(shape, self.dims, self.periodic))
        self.simulated_latency = float(simulated_latency)
        self._cuda_aware = _mpi.cuda_aware(MPI)
        self._stagings: dict = {}
        self._streams: dict = {}

    @staticmethod
    def _arguments(MPI, nprocs: int, local_shape, halo, dims, periodic):
        """The constructor's arguments checked and normalized: (shape, halo, dims, periodic)."""
        shape = (_integer(local_shape, "local_shape"),) if isinstance(local_shape, (int, np.integer)) else \
            tuple(_integer(n, "local_shape") for n in local_shape)
        if not 1 <= len(shape) <= 3:
            raise ValueError(f"GlobalGrid: local_shape must have 1 to 3 dimensions, got {shape}")
        ndim = len(shape)
        halo = _integer(halo, "halo")
        want = [0] * ndim if dims is None else [_integer(x, "dims") for x in dims]
        if len(want) != ndim or any(x < 0 for x in want):
            raise ValueError(f"GlobalGrid: dims must be {ndim} non-negative ints (0: chosen), got {dims}")
        # a dimension too thin to exchange halos (fewer than 3 * halo points, e.g. the 1 of a
        # 2-D problem written as (nx, ny, 1)) is not split when the split is chosen
        # (ImplicitGlobalGrid's nz == 1 gives dimz = 1); given explicitly, check_local_shape says why not
        thin = [d for d, (x, n) in enumerate(zip(want, shape)) if x == 0 and n < 3 * halo]
        want = [1 if d in thin else x for d, x in enumerate(want)]
        fixed = int(np.prod([x for x in want if x > 0])) if any(want) else 1
        if nprocs % fixed or (all(want) and fixed != nprocs):
            raise ValueError(f"GlobalGrid: dims {tuple(want)} do not fit {nprocs} MPI ranks"
                             + (f" (dimension(s) {thin} have fewer than 3 * halo = {3 * halo} points: they are not "
                                "split)" if thin else ""))
        dims = tuple(MPI.Compute_dims(nprocs, want))
        periodic = T.normalize_periodic(periodic, ndim)
        T.check_local_shape(shape, halo, dims, periodic)
        return shape, halo, dims, periodic

    def free(self) -> None:
        """Release the grid's Cartesian communicator (collective: every rank calls it). A grid
        is also a context manager that frees it on exit; a freed grid cannot exchange."""
        if self.comm is not None:
            self.comm.Free()
            self.comm = None

    def __enter__(self) -> "GlobalGrid":
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __repr__(self) -> str:
        return (f"<GlobalGrid rank {self.rank}/{self.nprocs} coords {self.coords} dims {self.dims} "
                f"local {self.local_shape} global {self.global_shape} halo {self.halo} periodic {self.periodic}>")

    # --- devices -----------------------------------------------------------------------------

    def select_device(self, device_type: str = "auto"):
        """The GPU of this rank's node-local rank (ImplicitGlobalGrid's ``select_device``), as a
        backend: ``tk.CUDA(device=l)`` (or ``tk.ROCm``, ``tk.OpenCL``) where ``l`` is the rank's
        index among the grid's ranks on its node (``MPI.COMM_TYPE_SHARED``), so one rank runs per
        GPU. ``device_type``: ``"auto"`` (CUDA, else ROCm), ``"CUDA"``, ``"ROCm"`` or
        ``"OpenCL"``. ``tk.BackendUnavailable`` when there is no such GPU, or when more ranks
        run on the node than it has devices. Collective over the grid's ranks."""
        self._check_alive("select_device")
        if not isinstance(device_type, str):
            raise TypeError(f"GlobalGrid.select_device: device_type must be a string, got {type(device_type).__name__}")
        kinds = {"auto": ("CUDA", "ROCm"), "cuda": ("CUDA",), "rocm": ("ROCm",), "amdgpu": ("ROCm",),
                 "hip": ("ROCm",), "opencl": ("OpenCL",), "cl": ("OpenCL",)}.get(device_type.lower())
        if kinds is None:
            raise ValueError(f"GlobalGrid.select_device: device_type must be 'auto', 'CUDA', 'ROCm' or 'OpenCL', "
                             f"got {device_type!r}")
        local = self.comm.Split_type(self._MPI.COMM_TYPE_SHARED, key=self.rank)
        try:
            me_l, n_l = local.Get_rank(), local.Get_size()
        finally:
            local.Free()
        why, backend, err = [], None, None
        for kind in kinds:
            ok, reason = getattr(tk, kind).available()
            if not ok:
                why.append(f"{kind}: {reason}")
                continue
            try:
                backend = tk.backend(f"{'CL' if kind == 'OpenCL' else kind}:{me_l}")
            except tk.BackendUnavailable as e:
                err = (f"{n_l} ranks run on rank {self.rank}'s node (it is the node's rank {me_l}), but {e}; "
                       "launch at most one rank per device")
            break
        else:
            err = f"no GPU to select ({'; '.join(why)})"
        errs = self.comm.allgather(err)        # one rank's error is every rank's (no rank goes on alone)
        bad = next((r for r, e in enumerate(errs) if e is not None), None)
        if bad is not None:
            raise tk.BackendUnavailable(f"GlobalGrid.select_device({device_type!r}): "
                                        + (errs[bad] if bad == self.rank else f"on rank {bad}: {errs[bad]}"))
        return backend

    # --- coordinates -------------------------------------------------------------------------

    def global_index(self, i: int, dim: int = 0, A=None) -> int:
        """The global index of local index ``i`` along ``dim`` (wrapped where periodic).

        ``dim`` is one of the grid's dimensions and ``0 <= i < n``, ``n`` the local extent
        (halos included): ``local_shape[dim]``, or ``A``'s extent along ``dim`` when ``A`` (an
        array or a shape) is staggered as in :meth:`update_halo` (its point ``i`` is global
        ``coords[dim] * (local_shape[dim] - 2 * halo) + i``, as in the halo exchange and
        :meth:`gather`). Anything else is an ``IndexError`` (a ``TypeError`` for a
        non-integer)."""
        dim, i = self._dim("global_index", dim), _int_arg("global_index", "i", i)
        n, m = self.local_shape[dim], self._extent("global_index", dim, A)
        if not 0 <= i < m:
            raise IndexError(f"GlobalGrid.global_index: local index {i} is out of range along dim {dim} "
                             f"(0 <= i < {m}, the local extent with halos)")
        return T.global_index(i, n, self.halo, self.coords[dim], self.global_shape[dim], self.periodic[dim])

    def global_indices(self, dim: int = 0, A=None) -> np.ndarray:
        """The global indices of all local positions along ``dim`` of the grid's local arrays, or
        of ``A`` (an array or a shape, staggered as in :meth:`update_halo`)."""
        dim = self._dim("global_indices", dim)
        return np.array([self.global_index(i, dim, A) for i in range(self._extent("global_indices", dim, A))],
                        dtype=np.int64)

    def global_coordinates(self, dim: int, dx: float = 1.0, A=None, *, origin: float = 0.0,
                           wrap_periodic: bool = True) -> np.ndarray:
        """The physical coordinates of all local positions along ``dim`` (ImplicitGlobalGrid's
        ``x_g(ix, dx, A)`` for every ``ix``): ``origin + position * dx``, where the position of
        local index ``i`` is its global index for the grid's local arrays. ``A`` (an array or a
        shape) staggered by ``s`` along ``dim`` is centred on the grid: its positions are
        ``global index - s / 2`` (a face array of ``n + 1`` points starts half a cell before
        the first cell centre, a centre array of ``n - 1`` points half a cell after it). Along
        a periodic dimension the positions start one halo earlier, wrapped into ``0 .. nx_g - 1``
        (the whole-spacing part; a half spacing stays) unless ``wrap_periodic=False``."""
        dim = self._dim("global_coordinates", dim)
        if isinstance(dx, (bool, np.bool_)) or not isinstance(dx, (int, float, np.integer, np.floating)):
            raise TypeError(f"GlobalGrid.global_coordinates: dx must be a number, got {type(dx).__name__}")
        m = self._extent("global_coordinates", dim, A)
        n = self.local_shape[dim]
        pos = [T.coordinate(i, n, self.halo, self.coords[dim], self.global_shape[dim], self.periodic[dim], m,
                            bool(wrap_periodic)) for i in range(m)]
        return origin + np.asarray(pos, dtype=np.float64) * dx

    def _extent(self, fn: str, dim: int, A) -> int:
        """The local extent along ``dim`` of the grid's arrays (``A`` None) or of ``A`` (an array
        or a shape) of the grid's rank and any extents (ImplicitGlobalGrid's coordinates take
        arrays shorter by more than the halo, e.g. a stress on the cells' inner corners)."""
        if A is None:
            return self.local_shape[dim]
        shape = tuple(A) if isinstance(A, (tuple, list)) else getattr(A, "shape", None)
        if shape is None or len(shape) != self.ndim or not all(isinstance(m, (int, np.integer)) and m >= 1
                                                               for m in shape):
            raise ValueError(f"GlobalGrid.{fn}: A must be a {self.ndim}-D array or shape (the grid's local shape "
                             f"{self.local_shape}, or staggered: longer or shorter along some dimensions), got "
                             f"{shape if shape is not None else type(A).__name__}")
        return int(shape[dim])

    def _dim(self, fn: str, dim) -> int:
        """``dim`` checked to be one of the grid's dimensions (0 .. ndim - 1)."""
        dim = _int_arg(fn, "dim", dim)
        if not 0 <= dim < self.ndim:
            raise IndexError(f"GlobalGrid.{fn}: dim {dim} is out of range for a {self.ndim}-D grid "
                             f"(0 <= dim < {self.ndim})")
        return dim

    def local_part(self, global_array) -> np.ndarray:
        """This rank's local array (halos included), cut from a global array every rank holds.

        The global array has :attr:`global_shape`, or is staggered as :meth:`gather` returns
        it (``array_global_shape(A.shape)``: ``s`` longer or shorter along a non-periodic
        dimension gives a local array ``local_shape[d] + s`` long there)."""
        G = np.asarray(global_array)
        if G.ndim != self.ndim:
            raise ValueError(f"local_part: the global array has shape {G.shape}, the grid's global shape "
                             f"is {self.global_shape}")
        local = tuple(m - size + n for m, size, n in zip(G.shape, self.global_shape, self.local_shape))
        bad = [d for d in range(self.ndim) if local[d] < 1 or (self.periodic[d] and local[d] != self.local_shape[d])]
        if bad:
            raise ValueError(f"local_part: the global array has shape {G.shape}, the grid's global shape is "
                             f"{self.global_shape} (periodic {self.periodic}); a staggered global array may differ "
                             f"from it along non-periodic dimensions only (as gather returns them)")
        return G[np.ix_(*[self.global_indices(d, local) for d in range(self.ndim)])].copy()

    # --- halo exchange -----------------------------------------------------------------------

    def update_halo(self, *arrays) -> None:
        """Exchange the ``halo`` planes of ``arrays`` with the neighbours; returns when done.

        Any number of arrays of ``local_shape``, any dtype, on any backend (NumPy arrays,
        ``tk.Array`` on the CPU, OpenCL, CUDA...). As in ImplicitGlobalGrid, arrays may be
        staggered: ``local_shape[d] + s`` long along a dimension (``s >= -halo``); one longer
        (``s > 0``) exchanges its own planes, one shorter has no halos along that dimension
        and is left alone there (an array shorter along every dimension is a ValueError). Work queued on the arrays' backends is
        finished first (``tk.synchronize``). Every rank must call it with the same arrays'
        dtypes, in the same order.
        """
        arrays, backends = _bit_views("update_halo", *self._check_arrays("update_halo", arrays, staggered=True))
        self._check_alive("update_halo")
        for b in {b.key(): b for b in backends}.values():
            tk.synchronize(b)
        exchange(self, arrays, [self._staging(b) for b in backends], [self._stream(b, tk.High) for b in backends],
                 self.simulated_latency)

    def hide_communication(self, boundary_width: int | Sequence[int], step: Callable, *arrays) -> None:
        """One stencil step whose halo exchange is hidden behind the interior's computation.

        ``step(ndrange, stream)`` must launch the step's kernels on ``ndrange`` (a tuple of
        ``range``, one per dimension) on ``stream``. The step's region is every point but
        the halos of the longest array: along dimension ``d``, ``halo .. N - halo`` where
        ``N`` is the largest of ``local_shape[d]`` and the arrays' extents (arrays may be
        staggered as in :meth:`update_halo`; the step's kernels then guard each array's own
        extent, as ParallelStencil's ``@inn``). ``boundary_width`` planes (an int or one per
        dimension, at least ``halo`` plus the largest staggering ``s`` along it, so that the
        slabs hold every array's send planes) at each end of every exchanging dimension form
        the boundary slabs. The slabs run first on a high-priority stream; as soon as they
        finish, the halos of ``arrays`` (what the step writes) are exchanged, while the
        interior runs on a low-priority stream. Returns when both are done. The result
        equals ``step`` on the whole region followed by ``update_halo(*arrays)``, bit for bit.
        """
        arrays, backends = _bit_views("hide_communication", *self._check_arrays("hide_communication", arrays, staggered=True))
        self._check_alive("hide_communication")
        if not callable(step):
            raise TypeError(f"hide_communication: step must be callable as step(ndrange, stream), "
                            f"got {type(step).__name__}")
        b = backends[0]
        if any(x.key() != b.key() for x in backends):
            raise ValueError("hide_communication: all arrays must live on one backend (the step runs on its streams)")
        widths = T.normalize_widths(boundary_width, self.ndim, "hide_communication: boundary_width")
        ex = T.exchanges(self.dims, self.periodic)
        extents = [max([n] + [A.shape[d] for A in arrays]) for d, n in enumerate(self.local_shape)]
        for d in range(self.ndim):
            need = self.halo + T.stagger(self.local_shape[d], extents[d])
            if ex[d] and widths[d] < need:
                longest = "" if need == self.halo else \
                    f" plus the longest array's staggering ({need - self.halo}: extent {extents[d]})"
                raise ValueError(f"hide_communication: boundary_width[{d}] = {widths[d]} is less than the halo "
                                 f"({self.halo}){longest}: the planes sent to the neighbours must be in the "
                                 f"boundary slabs (at least {need} planes)")
        slabs, inner = T.split_boundary(T.interior(extents, self.halo),
                                        [w if e else 0 for w, e in zip(widths, ex)])
        hi, lo = self._stream(b, tk.High), self._stream(b, tk.Low)
        tk.synchronize(b)
        try:
            for box in slabs:
                step(ndrange_of(box), hi)
            if T.box_size(inner):
                step(ndrange_of(inner), lo)
            exchange(self, arrays, [self._staging(b)] * len(arrays), [hi] * len(arrays), self.simulated_latency)
        finally:
            lo.synchronize()
            hi.synchronize()

    # --- gathering ---------------------------------------------------------------------------

    def gather(self, A, root: int = 0) -> np.ndarray | None:
        """The global array (NumPy) on rank ``root``, assembled from each rank's own points; None elsewhere.

        ``A`` has ``local_shape``, or is staggered as in :meth:`update_halo` along the
        non-periodic dimensions: its global shape is then :meth:`array_global_shape`."""
        MPI = self._MPI
        root = _int_arg("gather", "root", root)
        (A,), (b,) = self._check_arrays("gather", (A,), writable=False, staggered=True)
        self._check_alive("gather")
        tk.synchronize(b)
        h = np.ascontiguousarray(A.numpy() if isinstance(A, tk.Array) else np.asarray(A))
        if not 0 <= root < self.nprocs:
            raise ValueError(f"gather: root {root} is not a rank of the grid (0..{self.nprocs - 1})")
        shape = tuple(h.shape)
        if any(p and m != w for m, w, p in zip(shape, self.local_shape, self.periodic)):
            raise ValueError(f"gather: the array has shape {shape}, staggered along a periodic dimension of the "
                             f"grid (local shape {self.local_shape}, periodic {self.periodic}): its points do not "
                             "tile the global grid; gather an unstaggered array there")
        is_root = self.rank == root
        blocks = np.empty((self.nprocs,) + shape, h.dtype) if is_root else None
        self.comm.Gather([h.view(np.uint8), MPI.BYTE],
                         [blocks.view(np.uint8), MPI.BYTE] if is_root else None, root=root)
        if not is_root:
            return None
        G = np.empty(self.array_global_shape(shape), h.dtype)
        for r in range(self.nprocs):
            coords = self.comm.Get_coords(r)
            src, dst = [], []
            for d in range(self.ndim):
                n, m, p = self.local_shape[d], self.dims[d], self.periodic[d]
                a, e = T.owned_range(n, self.halo, coords[d], m, p, shape[d])
                g = T.global_index(a, n, self.halo, coords[d], self.global_shape[d], p)
                src.append(slice(a, e))
                dst.append(slice(g, g + e - a))
            G[tuple(dst)] = blocks[r][tuple(src)]
        return G

    def array_global_shape(self, shape) -> tuple[int, ...]:
        """The global shape of arrays of local ``shape`` (a shape, or an array whose shape it
        takes, as ImplicitGlobalGrid's ``nx_g(A)``): :attr:`global_shape` for the grid's
        ``local_shape``; a staggered array's (``local_shape[d] + s`` long) is ``s`` longer
        along each dimension."""
        if hasattr(shape, "shape"):
            shape = shape.shape
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
            shape = (shape,)
        try:
            shape = tuple(_int_arg("array_global_shape", "shape", m) for m in shape)
        except TypeError:
            raise TypeError(f"GlobalGrid.array_global_shape: expected a shape (ints) or an array, got "
                            f"{shape!r}") from None
        if len(shape) != self.ndim or any(m < 1 for m in shape):
            raise ValueError(f"GlobalGrid.array_global_shape: {shape} is not a {self.ndim}-D shape of positive "
                             f"extents (the grid's local shape is {self.local_shape})")
        return tuple(T.array_global_size(n, self.halo, m, p, w)
                     for n, m, p, w in zip(self.local_shape, self.dims, self.periodic, shape))

    # --- helpers -----------------------------------------------------------------------------

    def _check_shape(self, what: str, k: int, shape: tuple, staggered: bool) -> None:
        """Argument ``k + 1``'s shape: the grid's ``local_shape``, or where ``staggered``,
        ImplicitGlobalGrid's staggered arrays: as many dimensions, each at least
        ``local_shape[d] - halo`` long, with halos (at least ``local_shape[d]``) along one."""
        n, h = self.local_shape, self.halo
        if shape == n:
            return
        if not staggered:
            raise ValueError(f"{what}: argument {k + 1} has shape {shape}, but the grid's local arrays have "
                             f"shape {n}")
        if len(shape) != self.ndim or any(m < max(1, w - h) for m, w in zip(shape, n)):
            raise ValueError(f"{what}: argument {k + 1} has shape {shape}, but the grid's local arrays have "
                             f"shape {n} (staggered ones at least local_shape - halo = "
                             f"{tuple(max(1, w - h) for w in n)} along every dimension)")
        if not any(T.has_halo(w, m) for m, w in zip(shape, n)):
            raise ValueError(f"{what}: argument {k + 1} has shape {shape}, shorter than the grid's local shape "
                             f"{n} along every dimension: it has no halo to exchange; remove it from the call")

    def _check_arrays(self, what: str, arrays, writable: bool = True, staggered: bool = False):
        if not arrays:
            raise TypeError(f"{what}: no arrays given")
        out, backends, seen = [], [], set()
        for k, A in enumerate(arrays):
            try:
                b = tk.get_backend(A)
            except tk.LaunchError:
                raise TypeError(f"{what}: argument {k + 1} is a {type(A).__name__}, not an array") from None
            if not isinstance(A, (np.ndarray, tk.Array)) and getattr(b, "is_host", False):
                try:
                    A = tk.asarray(A, backend=b).numpy()   # a CPU torch tensor, an array-interface or
                                                            # DLPack object: its zero-copy NumPy view
                except TypeError:                           # a dtype kernels do not take (complex):
                    A = _host_view(A)                       # NumPy's own zero-copy view
            self._check_shape(what, k, tuple(getattr(A, "shape", ())), staggered)
            if writable:
                h = getattr(A, "flags", None)
                if h is not None and not h.writeable:
                    raise ValueError(f"{what}: argument {k + 1} is read-only")
                if id(A) in seen:
                    raise ValueError(f"{what}: argument {k + 1} is the same array as an earlier argument")
            seen.add(id(A))
            out.append(A)
            backends.append(b)
        return out, backends

    def _check_alive(self, what: str) -> None:
        if self.comm is None:
            raise RuntimeError(f"{what}: the grid was freed (GlobalGrid.free or the end of its with block)")

    def _staging(self, backend) -> Staging:
        s = self._stagings.get(backend.key())
        if s is None:
            s = self._stagings[backend.key()] = Staging(backend, self._cuda_aware)
        return s

    def _stream(self, backend, priority: int):
        k = (backend.key(), priority)
        s = self._streams.get(k)
        if s is None:
            s = self._streams[k] = backend.stream(priority=priority)
        return s


def _host_view(A) -> np.ndarray:
    """NumPy's zero-copy view of a host array-like whose dtype tinykernels does not take
    (a complex CPU torch tensor: through DLPack); a TypeError when there is none."""
    for make in (np.from_dlpack, np.asarray):
        try:
            h = make(A)
        except (TypeError, ValueError, BufferError, RuntimeError, AttributeError):
            continue
        if isinstance(h, np.ndarray) and h.flags.writeable:
            return h
    raise TypeError(f"update_halo: cannot view a {type(A).__name__} of dtype {getattr(A, 'dtype', '?')} as a "
                    "writable NumPy array")


def _bit_views(what: str, arrays, backends):
    """The arrays as the exchange's kernels take them. The exchange only copies elements, so a
    host array of a dtype that kernels do not take is exchanged through views of dtypes they
    do: a complex array as its ``.real`` and ``.imag`` (strided views), any other of 1, 2, 4 or
    8 bytes (datetime64, ...) as unsigned integers of its size. Every rank passes the same
    dtypes, so every rank expands them alike (the messages' tags stay matched)."""
    out, outb = [], []
    for A, b in zip(arrays, backends):
        if isinstance(A, np.ndarray) and _kernel_dtype(A.dtype) is None:
            if A.dtype.kind == "c" and _kernel_dtype(A.real.dtype) is not None:
                out += [A.real, A.imag]
                outb += [b, b]
                continue
            if A.dtype.itemsize in (1, 2, 4, 8) and not A.dtype.hasobject:
                A = A.view(np.dtype(f"u{A.dtype.itemsize}"))
            else:
                raise TypeError(f"{what}: arrays of dtype {A.dtype} cannot be exchanged (complex or of "
                                "1, 2, 4 or 8 bytes, or a dtype tinykernels kernels take)")
        out.append(A)
        outb.append(b)
    return out, outb


def _int_arg(fn: str, name: str, v) -> int:
    """``v`` as an int (Python or NumPy integer; not a bool or float), else ``TypeError``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"GlobalGrid.{fn}: {name} must be an integer, got {type(v).__name__}")
    return int(v)
