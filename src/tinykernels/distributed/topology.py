"""Index arithmetic of an implicit global grid: pure functions, no MPI.

The global grid is cut into ``dims[d]`` blocks along each dimension ``d``. Every rank
holds a local array of ``local_shape`` that includes ``halo`` planes on each side;
neighbouring blocks overlap by ``2 * halo`` planes (as in ImplicitGlobalGrid.jl): a
rank's last ``2 * halo`` planes are the same global planes as its right neighbour's
first ``2 * halo``. Along dimension ``d`` with ``n = local_shape[d]``, ``h = halo`` and
the rank's Cartesian coordinate ``c``:

* not periodic: global size ``dims * (n - 2h) + 2h``; local index ``i`` is global
  ``c * (n - 2h) + i``; the outermost ``h`` planes of the global grid are the physical
  boundary (a stencil leaves them alone);
* periodic: global size ``dims * (n - 2h)``; local ``i`` is global
  ``(c * (n - 2h) + i - h) mod size``; every local array has halos on both sides.

Each global point is *owned* by exactly one rank (:func:`owned_range`), which is where
:meth:`GlobalGrid.gather` takes it from.

Staggered arrays (ImplicitGlobalGrid's): an array whose extent along ``d`` is ``n + s``
(``s = +1`` for a field on cell faces, ``-1`` on cell centres) keeps the same global index
``c * (n - 2h) + i`` for its local ``i``; it overlaps its neighbour by ``2h + s`` planes and
has halos along ``d`` only where ``s >= 0`` (:func:`has_halo`).
"""
from __future__ import annotations

import math
import operator
from typing import Sequence

import numpy as np

Range = tuple[int, int]          # a half-open interval [start, stop) of local indices


def normalize_periodic(periodic, ndim: int) -> tuple[bool, ...]:
    """``periodic`` as one bool per dimension (a single bool applies to all); each a bool or
    0/1 (ImplicitGlobalGrid's ``periodx=1``), anything else a TypeError/ValueError naming it."""
    def one(x) -> bool:
        if isinstance(x, (bool, np.bool_)):
            return bool(x)
        if isinstance(x, (int, np.integer)) and x in (0, 1):
            return bool(x)
        if isinstance(x, (int, np.integer)):
            raise ValueError(f"periodic must be a bool or 0/1 (one per dimension), got {periodic!r}")
        raise TypeError(f"periodic must be a bool or 0/1, or one per dimension, got {periodic!r}")
    if isinstance(periodic, (bool, int, np.bool_, np.integer)):
        return (one(periodic),) * ndim
    if isinstance(periodic, (str, bytes)):
        raise TypeError(f"periodic must be a bool or 0/1, or one per dimension, got {periodic!r}")
    p = tuple(one(x) for x in periodic)
    if len(p) != ndim:
        raise ValueError(f"periodic has {len(p)} entries for a {ndim}-D grid")
    return p


def normalize_widths(width, ndim: int, what: str) -> tuple[int, ...]:
    """An int or a tuple of ints, one per dimension, each >= 0 (a float or bool, which ``int()``
    would truncate or take as 0/1, is a TypeError naming ``what``)."""
    def one(x) -> int:
        if isinstance(x, (bool, np.bool_)):
            raise TypeError(f"{what} must be an int or one int per dimension, got {width!r}")
        try:
            return operator.index(x)
        except TypeError:
            raise TypeError(f"{what} must be an int or one int per dimension, got {width!r}") from None
    try:
        items = None if isinstance(width, (int, np.integer)) else list(width)
    except TypeError:
        raise TypeError(f"{what} must be an int or one int per dimension, got {width!r}") from None
    w = (one(width),) * ndim if items is None else tuple(one(x) for x in items)
    if len(w) != ndim:
        raise ValueError(f"{what} has {len(w)} entries for a {ndim}-D grid")
    if any(x < 0 for x in w):
        raise ValueError(f"{what} must not be negative, got {w}")
    return w


def exchanges(dims: Sequence[int], periodic: Sequence[bool]) -> tuple[bool, ...]:
    """Whether each dimension exchanges halos at all (it has a neighbour on some side)."""
    return tuple(d > 1 or p for d, p in zip(dims, periodic))


def check_local_shape(local_shape: Sequence[int], halo: int, dims: Sequence[int],
                      periodic: Sequence[bool]) -> None:
    """Raise ValueError unless every exchanged dimension owns at least ``halo`` planes.

    A rank sends the ``halo`` planes just inside its halo; they must be its own
    (computed) planes, not halo planes it received, so ``n >= 3 * halo``.
    """
    if halo < 1:
        raise ValueError(f"halo must be at least 1, got {halo}")
    for d, (n, ex) in enumerate(zip(local_shape, exchanges(dims, periodic))):
        if n < 1:
            raise ValueError(f"local_shape[{d}] must be positive, got {n}")
        if ex and n < 3 * halo:
            raise ValueError(f"local_shape[{d}] = {n} is too small for halo {halo}: a dimension that "
                             f"exchanges halos needs at least 3 * halo = {3 * halo} planes")


def global_size(n: int, halo: int, dims: int, periodic: bool) -> int:
    """The global number of points along one dimension."""
    return dims * (n - 2 * halo) + (0 if periodic else 2 * halo)


def global_index(i: int, n: int, halo: int, coord: int, size: int, periodic: bool) -> int:
    """The global index of local index ``i`` on the rank at Cartesian coordinate ``coord``."""
    g = coord * (n - 2 * halo) + i
    return (g - halo) % size if periodic else g


def coordinate(i: int, n: int, halo: int, coord: int, size: int, periodic: bool, extent: int,
               wrap: bool = True) -> float:
    """The position, in grid spacings, of local index ``i`` of an array of ``extent`` points
    along a dimension of local extent ``n`` (ImplicitGlobalGrid's ``x_g(ix, dx, A) / dx``). An
    array staggered by ``s = extent - n`` is centred on the grid: its point ``i`` sits at
    ``global index - s / 2`` (a face array's first point half a cell before the first cell's
    centre). Where periodic, the position is shifted by ``-halo`` and, with ``wrap``, its
    whole-spacing part wrapped into ``0 .. size - 1`` (the half spacing of an odd staggering
    stays, so a face point may sit at ``-0.5``)."""
    s = extent - n
    g = coord * (n - 2 * halo) + i
    if not periodic:
        return g - s / 2
    whole = g - halo - s // 2                  # s // 2: floor, so s / 2 - s // 2 is 0 or 0.5
    return (whole % size if wrap else whole) - (s / 2 - s // 2)


def owned_range(n: int, halo: int, coord: int, dims: int, periodic: bool, size: int | None = None) -> Range:
    """The local indices whose global points this rank owns (they tile the global grid).

    ``size`` is the array's extent along the dimension when it is staggered (``n + s``,
    see :func:`stagger`; default ``n``): the last rank then owns up to its end. Along a
    periodic dimension only an unstaggered array tiles the global grid this way."""
    size = n if size is None else size
    if periodic:
        return halo, n - halo
    return (0 if coord == 0 else halo), (size if coord == dims - 1 else n - halo)


def stagger(n: int, size: int) -> int:
    """How much longer than the grid's local extent ``n`` an array's extent ``size`` is
    (``+1`` for a field on the cells' faces, ``-1`` on their centres, as ImplicitGlobalGrid's
    staggered arrays). Its overlap with a neighbour is then ``2 * halo + s`` planes."""
    return size - n


def has_halo(n: int, size: int) -> bool:
    """Whether an array of extent ``size`` has halos along a dimension of local extent ``n``:
    its overlap ``2 * halo + s`` is at least ``2 * halo`` (ImplicitGlobalGrid's rule; a
    shorter array only overlaps its neighbour and is not exchanged along it)."""
    return stagger(n, size) >= 0


def send_ranges(n: int, halo: int, size: int | None = None) -> tuple[Range, Range]:
    """(to the left neighbour, to the right neighbour): the planes just inside the halos of an
    array of extent ``size`` (default ``n``) along a dimension of local extent ``n``. The
    right neighbour's first plane is global plane ``n - 2 * halo`` here whatever the
    staggering, so the planes sent to the left move with it: ``halo + s`` onwards."""
    s = stagger(n, n if size is None else size)
    return (halo + s, 2 * halo + s), (n - 2 * halo, n - halo)


def recv_ranges(size: int, halo: int) -> tuple[Range, Range]:
    """(from the left neighbour, from the right neighbour): the halo planes of an array of
    extent ``size``."""
    return (0, halo), (size - halo, size)


def array_global_size(n: int, halo: int, dims: int, periodic: bool, size: int) -> int:
    """The global extent of an array of local extent ``size`` (staggered by ``size - n``)."""
    return global_size(n, halo, dims, periodic) + stagger(n, size)


def local_shape_for(global_shape: Sequence[int], halo: int, dims: Sequence[int],
                    periodic: bool | Sequence[bool] = False) -> tuple[int, ...]:
    """The local shape that makes ``global_shape`` on a ``dims`` grid (ValueError if none).

    ``global_shape`` and ``dims`` (ranks per dimension) are ints or one int per dimension,
    ``periodic`` a bool or one per dimension, as :class:`GlobalGrid` takes them; a float, a
    missing ``dims`` or lengths that disagree are a TypeError/ValueError naming the argument
    (before fw19 ``periodic=False`` was "'bool' object is not iterable" and extra entries were
    dropped silently)."""
    def ints(v, name):
        vs = (v,) if isinstance(v, (int, np.integer)) else v
        try:
            vs = tuple(vs)
        except TypeError:
            vs = (None,)
        if any(isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) for x in vs):
            raise TypeError(f"local_shape_for: {name} must be an int or one int per dimension, got {v!r}")
        return tuple(int(x) for x in vs)
    global_shape = ints(global_shape, "global_shape")
    ndim = len(global_shape)
    if not 1 <= ndim <= 3:
        raise ValueError(f"local_shape_for: global_shape must have 1 to 3 dimensions, got {global_shape}")
    if dims is None:
        raise TypeError("local_shape_for: dims (the ranks per dimension) must be given, e.g. grid.dims")
    dims = ints(dims, "dims")
    if len(dims) != ndim or any(m < 1 for m in dims):
        raise ValueError(f"local_shape_for: dims must be {ndim} positive ints, got {dims}")
    if isinstance(halo, (bool, np.bool_)) or not isinstance(halo, (int, np.integer)):
        raise TypeError(f"local_shape_for: halo must be an int, got {halo!r}")
    if halo < 1:
        raise ValueError(f"local_shape_for: halo must be at least 1, got {halo}")
    halo = int(halo)
    periodic = normalize_periodic(periodic, ndim)
    out = []
    for d, (g, m, p) in enumerate(zip(global_shape, dims, periodic)):
        inner = g if p else g - 2 * halo
        if inner <= 0 or inner % m:
            raise ValueError(f"global size {g} along dimension {d} cannot be split into {m} blocks with "
                             f"halo {halo} ({'periodic' if p else 'not periodic'}: "
                             f"{'size' if p else 'size - 2 * halo'} must be a positive multiple of {m})")
        out.append(inner // m + 2 * halo)
    return tuple(out)


def interior(local_shape: Sequence[int], halo: int) -> tuple[Range, ...]:
    """The points a stencil step computes: everything but the ``halo`` planes on each side."""
    return tuple((halo, n - halo) for n in local_shape)


def split_boundary(region: Sequence[Range], widths: Sequence[int]) -> tuple[list[tuple[Range, ...]], tuple[Range, ...]]:
    """Split ``region`` into disjoint boundary slabs and the interior.

    ``widths[d]`` planes at each end of dimension ``d`` form its two slabs (0: no slabs);
    slabs of later dimensions exclude the planes earlier slabs took, so every point of
    ``region`` is in exactly one box. Returns ``(slabs, interior)``; empty boxes are
    left out of ``slabs`` and the interior may be empty.
    """
    slabs: list[tuple[Range, ...]] = []
    rest = list(region)
    for d, w in enumerate(widths):
        a, b = rest[d]
        if w <= 0 or b <= a:
            continue
        lo = (a, min(b, a + w))
        hi = (min(b, max(a + w, b - w)), b)          # never overlaps lo; empty when lo took it all
        for r in (lo, hi):
            box = tuple(rest[:d]) + (r,) + tuple(rest[d + 1:])
            if all(s < e for s, e in box):
                slabs.append(box)
        rest[d] = (lo[1], hi[0])
    return slabs, tuple(rest)


def box_size(box: Sequence[Range]) -> int:
    """Number of points in a box of ranges."""
    return math.prod(max(0, b - a) for a, b in box)
