"""The checks every launch makes before a kernel touches memory, on every backend.

* a read-only array (``writeable=False``: ``np.frombuffer`` of bytes, a read-only memmap)
  passed where the kernel stores or updates atomically, or one whose elements share memory
  (a stride 0: ``torch.expand``, a writeable ``as_strided`` broadcast);
* a ``tk.Const`` array that shares memory with another (non-``tk.Const``) array argument
  (:mod:`.memspan`): compiled backends assume ``const restrict``, so the result would
  depend on the backend;
* an access that every work item makes at a work-item coordinate plus a constant, or at a
  constant index (:mod:`tinykernels.passes.access`), but whose extent over the ndrange leaves
  the array's shape: a certain out-of-bounds access (not checked in debug mode, which reports the
  first bad access itself). In an ``unsafe_indices`` kernel the items past the ndrange in a
  partial last group run too, so the extent is over the ndrange padded to whole groups.

:func:`plan_checks` resolves these, once per compiled specialization, to argument
positions; :func:`check_launch` runs them on a launch's normalized arguments and raises
:class:`~tinykernels.LaunchError`. :func:`fast_plan` encodes them for the CPU launcher
extension, which runs the alias and bounds checks itself and falls back to
:func:`check_launch` (the error) when one fails.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError
from .memspan import may_alias, overlapping_axis

KIND_CODES = {"global_linear": 0, "global": 1, "global_pos": 2, "const": 3}
PAD_SHIFT = 3           # a kind code is KIND_CODES[kind] | pad << PAD_SHIFT (see _launch.c's checks_ok)
_KIND_MASK = (1 << PAD_SHIFT) - 1


@dataclass(frozen=True)
class LaunchChecks:
    """Argument positions to check (see the module)."""
    readonly: tuple     # (position, name, site) of arrays the kernel writes (site: "file:line ...")
    alias: tuple        # (position, name, position, name): a tk.Const array and another array
    bounds: tuple       # (position, name, dim, kind code, axis, offset, site); the kind code's
                        # bits from PAD_SHIFT up: an unsafe_indices kernel's group size along axis

    @property
    def empty(self) -> bool:
        return not (self.readonly or self.alias or self.bounds)


def _is_array(a) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, np.generic)


def alias_pairs(params, norm) -> tuple:
    """``(i, name, j, other)`` for each tk.Const array argument ``i`` and other non-Const array
    argument ``j`` of a launch: the pairs that must not share memory. Two tk.Const arrays may
    (neither is written)."""
    arrays = [i for i, a in enumerate(norm) if params[i][1] != "constexpr" and _is_array(a)]
    return tuple((i, params[i][0], j, params[j][0]) for i in arrays if params[i][1] == "const"
                 for j in arrays if j != i and params[j][1] != "const")


def plan_checks(params, info, norm, debug: bool = False) -> LaunchChecks:
    """The checks of one specialization. ``params``: the kernel's ``(name, kind)`` list;
    ``info``: its :class:`~tinykernels.passes.access.AccessInfo`; ``norm``: the arguments of
    the launch that compiled it (which positions hold arrays). ``debug``: no bounds facts
    (debug mode reports out-of-bounds accesses itself, with the failing index)."""
    pos = {name: i for i, (name, _) in enumerate(params)}
    readonly = tuple((pos[n], n, site) for n, site in info.written.items() if n in pos)
    alias = alias_pairs(params, norm)
    bounds = () if debug else tuple((pos[f.array], f.array, f.dim, KIND_CODES[f.kind] | f.pad << PAD_SHIFT,
                                     f.axis, f.offset, f.site) for f in info.affine if f.array in pos)
    return LaunchChecks(readonly, alias, bounds)


def coord_extent(kind: int, axis: int, geom) -> tuple[int, int]:
    """The smallest and largest value a work-item coordinate takes over a (non-empty) ndrange
    (padded to whole groups where the kind code says so: an unsafe_indices kernel)."""
    kind, pad = kind & _KIND_MASK, kind >> PAD_SHIFT
    if kind == 0:
        n = geom[1] * geom[4] * geom[7]
        return 0, (-(-n // pad) * pad if pad else n) - 1
    if kind == 3:                       # a constant index: the offset alone
        return 0, 0
    start, count, step = geom[3 * axis:3 * axis + 3]
    if pad:
        count = -(-count // pad) * pad
    if kind == 2:
        return 0, count - 1
    last = start + (count - 1) * step
    return min(start, last), max(start, last)


def _ndrange_text(geom, ndim: int) -> str:
    dims = []
    for d in range(ndim):
        start, count, step = geom[3 * d:3 * d + 3]
        dims.append(str(count) if start == 0 and step == 1 else repr(range(start, start + count * step, step)))
    return dims[0] if ndim == 1 else "(" + ", ".join(dims) + ")"


def readonly_message(kernel: str, name: str, site: str) -> str:
    """The error for a read-only array argument that the kernel writes (at ``site``, "file:line")."""
    return (f"kernel '{kernel}': argument '{name}' is read-only (writeable=False) but the kernel writes to it "
            f"({site}); pass a writeable array (e.g. a copy), or annotate the argument tk.Const "
            "if the kernel only reads it")


def overlap_message(kernel: str, name: str, a, site: str) -> str | None:
    """The error for an array argument the kernel writes (at ``site``, "file:line") whose elements share
    memory (:func:`~.memspan.overlapping_axis`), else None."""
    d = overlapping_axis(a.shape, a.strides)
    if d is None:
        return None
    return (f"kernel '{kernel}': argument '{name}' has elements that share memory (stride 0 along its dimension "
            f"{d} of extent {a.shape[d]}: a broadcast or expanded view) but the kernel writes to it ({site}); "
            "pass a copy (np.ascontiguousarray(x), tensor.contiguous())")


def check_launch(kernel: str, checks: LaunchChecks, norm, geom, ndim: int) -> None:
    """Raise LaunchError when a launch breaks one of ``checks`` (see the module)."""
    for i, name, site in checks.readonly:
        a = norm[i]
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            raise LaunchError(readonly_message(kernel, name, site))
        if _is_array(a) and (why := overlap_message(kernel, name, a, site)) is not None:
            raise LaunchError(why)
    for i, name, j, other in checks.alias:
        if may_alias(norm[i], norm[j]):
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is annotated tk.Const (read-only, not aliased) "
                              f"but shares memory with argument '{other}'; pass a copy or drop the tk.Const "
                              "annotation")
    for i, name, dim, kind, axis, off, site in checks.bounds:
        n = norm[i].shape[dim]
        bad = _outside(coord_extent(kind, axis, geom), off, n)
        if bad is None:
            continue
        if kind == 3:
            raise LaunchError(f"kernel '{kernel}' at {site}: argument '{name}' with shape "
                              f"{tuple(norm[i].shape)} is indexed out of bounds: index {bad} in its dimension {dim}"
                              + (" (negative indices do not wrap around in kernels: write "
                                 f"{name}.shape[{dim}] - {-bad})" if bad < 0 else ""))
        where = f"over the ndrange {_ndrange_text(geom, ndim)}"
        hint = "rerun with TK_DEBUG=1 to see the first out-of-bounds access"
        pad = kind >> PAD_SHIFT
        if pad and _outside(coord_extent(kind & _KIND_MASK, axis, geom), off, n) is None:
            where = (f"in the work items past the ndrange {_ndrange_text(geom, ndim)} (an unsafe_indices kernel "
                     f"runs every statement in every item of its last, partial group of {pad} along "
                     f"dimension {axis if kind & _KIND_MASK else 0})")
            hint = "guard the access (if i < n:), or launch an ndrange that is a multiple of the workgroupsize"
        raise LaunchError(f"kernel '{kernel}' at {site}: argument '{name}' with shape "
                          f"{tuple(norm[i].shape)} is indexed out of bounds: its dimension {dim} reaches index "
                          f"{bad} {where}; {hint}")


def _outside(extent, off: int, n: int):
    """The first index of ``extent`` (lo, hi) plus ``off`` outside ``[0, n)``, else None."""
    lo, hi = extent
    return lo + off if lo + off < 0 else hi + off if hi + off >= n else None


def fast_plan(fnptr: int, checks: LaunchChecks):
    """The CPU launcher's plan entry: the entry point, or (with alias or bounds checks) the
    int64 words ``fnptr, npairs, (i, j)*, nfacts, (position, dim, kind, axis, offset)*``."""
    if not (checks.alias or checks.bounds):
        return fnptr
    words = [fnptr - (1 << 64) if fnptr >= 1 << 63 else fnptr, len(checks.alias)]
    for i, _, j, _ in checks.alias:
        words += [i, j]
    words.append(len(checks.bounds))
    for i, _, dim, kind, axis, off, _ in checks.bounds:
        words += [i, dim, kind, axis, off]
    return np.array(words, dtype=np.int64).tobytes()
