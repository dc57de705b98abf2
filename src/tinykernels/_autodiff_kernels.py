"""Kernels the autodiff launcher runs itself (imported lazily: they are compiled like user
kernels, so this module needs the finished package)."""
import tinykernels as tk

PARTIALS_GROUP = 256      # work items of the one group that sums the partials


@tk.kernel
def add_partials(dst, src: tk.Const, n: int):
    """``dst[0] += sum(src[:n])`` on the device, in one work group of PARTIALS_GROUP items
    (launch with ndrange=PARTIALS_GROUP, workgroupsize=PARTIALS_GROUP): each item sums a
    contiguous share (runtimes that run a group's items one after the other, like PoCL, then
    read each share as one stream), then the group reduces the shares."""
    i = tk.index()
    acc = 0.0
    chunk = (n + 255) // 256
    k = i * chunk
    end = min(k + chunk, n)
    while k < end:
        acc += src[k]
        k += 1
    total = tk.group_reduce(acc, "add")
    if i == 0:
        dst[0] += total


@tk.kernel
def add_partials2(dst, src: tk.Const, dst2, src2: tk.Const, n: int):
    """:func:`add_partials` for two scalars in one launch."""
    i = tk.index()
    acc = 0.0
    acc2 = 0.0
    chunk = (n + 255) // 256
    k = i * chunk
    end = min(k + chunk, n)
    while k < end:
        acc += src[k]
        acc2 += src2[k]
        k += 1
    total = tk.group_reduce(acc, "add")
    total2 = tk.group_reduce(acc2, "add")
    if i == 0:
        dst[0] += total
        dst2[0] += total2


def add_all(backend, bufs: list, n: int):
    """Add each ``(shadow, partials)`` pair's ``n`` partials into its shadow on the device,
    two pairs per launch; returns the last launch's event."""
    ev = None
    for k in range(0, len(bufs), 2):
        if k + 1 < len(bufs):
            (d1, s1), (d2, s2) = bufs[k], bufs[k + 1]
            ev = add_partials2(backend, PARTIALS_GROUP)(d1, s1, d2, s2, n, ndrange=PARTIALS_GROUP)
        else:
            ev = add_partials(backend, PARTIALS_GROUP)(*bufs[k], n, ndrange=PARTIALS_GROUP)
    return ev


@tk.kernel
def convert(dst, src: tk.Const):
    """``dst[I] = src[I]``, converting to ``dst``'s dtype (a store rounds to it): the float32
    copy of a narrow float shadow that an adjoint accumulates in, and back
    (``autodiff._widened``, ``autodiff._narrowed_into``)."""
    idx = tk.index(tk.Global, tk.Cartesian)
    dst[idx] = src[idx]
