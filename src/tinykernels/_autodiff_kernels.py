"""Kernels the autodiff launcher runs itself (imported lazily: they are compiled like user
kernels, so this module needs the finished package)."""
import tinykernels as tk

PARTIALS_GROUP = 256      # work items of the one group that sums the partials


@tk.kernel
def add_partials(dst, src: tk.Const, n: int):
    """``dst[0] += sum(src[:n])`` on the device, in one work group of PARTIALS_GROUP items
    (launch with ndrange=PARTIALS_GROUP, workgroupsize=PARTIALS_GROUP): each item sums a
    strided share, then the group reduces the shares."""
    i = tk.index()
    acc = 0.0
    k = i
    while k < n:
        acc += src[k]
        k += 256
    total = tk.group_reduce(acc, "add")
    if i == 0:
        dst[0] += total
