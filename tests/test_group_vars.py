"""Locals in kernels with barriers: names reused across loops and barrier segments, counters
of uniform barrier loops that share a name with per-item variables (the CPU and the GPU
scaffold store such a variable per work item; it must still be assigned in every item)."""
import numpy as np
import pytest

import tinykernels as tk


def _backends():
    out = [tk.CPU(), tk.Interpreter()]
    avail = tk.backends()
    for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")):
        if avail.get(name, (False,))[0]:
            out.append(tk.backend(dev))
    return out


BACKENDS = _backends()


def run(kernel, b, arrays, ndrange, wg):
    """Launch on ``b`` and return the arrays as NumPy."""
    args = [tk.asarray(a, backend=b) if b.name not in ("CPU", "Interpreter") else a.copy() for a in arrays]
    kernel(b, wg)(*args, ndrange=ndrange)
    tk.synchronize(b)
    return [np.asarray(a.numpy() if hasattr(a, "numpy") else a) for a in args]


@tk.kernel
def reused_counter(T):
    i = tk.index(tk.Local, tk.Linear)
    for j in range(4):
        pass
    for j in range(4):
        T[i, j] = j
        tk.synchronize()


@tk.kernel
def counter_named_like_item_value(T):
    i = tk.index(tk.Local, tk.Linear)
    j = i * 10                     # per item
    T[i, 4] = j
    for j in range(4):             # the same name as a uniform barrier-loop counter
        tk.synchronize()
        T[i, j] = j + i
    T[i, 5] = j                    # the counter's last value, in every item


@tk.kernel
def nested_barrier_loops(T):
    i = tk.index(tk.Local, tk.Linear)
    for k in range(i, i + 1):      # per-item loop: k per item
        T[i, 0] = k
    s = i                          # per-item accumulator
    for j in range(2):
        for k in range(3):         # nested barrier loop reusing k
            tk.synchronize()
            s += k * (j + 1)
            tk.synchronize()
        T[i, 1 + j] = s
    T[i, 3] = k + j


@tk.kernel
def while_with_barrier(T, n: tk.int32):
    i = tk.index(tk.Local, tk.Linear)
    buf = tk.localmem(tk.int32, (8,))
    for r in range(2):             # item-level loop first
        T[i, r] = r
    r = 0
    while r < n:                   # uniform while, barrier inside, counter name reused
        buf[i] = r + i
        tk.synchronize()
        T[i, 2 + r] = buf[(i + 1) % 4]
        tk.synchronize()
        r += 1


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_reused_loop_counter_with_barrier(b):
    (T,) = run(reused_counter, b, [np.full((4, 4), -1, np.int32)], 4, 4)
    np.testing.assert_array_equal(T, np.tile(np.arange(4, dtype=np.int32), (4, 1)))


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_barrier_loop_counter_named_like_a_per_item_local(b):
    (T,) = run(counter_named_like_item_value, b, [np.full((4, 6), -1, np.int32)], 8, 4)
    want = np.zeros((4, 6), np.int32)
    for i in range(4):
        want[i, :4] = np.arange(4) + i
        want[i, 4] = i * 10
        want[i, 5] = 3
    np.testing.assert_array_equal(T, want)


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_nested_barrier_loops_reuse_names(b):
    (T,) = run(nested_barrier_loops, b, [np.full((4, 4), -1, np.int32)], 4, 4)
    want = np.zeros((4, 4), np.int32)
    for i in range(4):
        want[i] = [i, i + 3, i + 9, 3]
    np.testing.assert_array_equal(T, want)


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_while_loop_with_barrier_after_item_loop(b):
    T = np.full((4, 5), -1, np.int32)
    args = [tk.asarray(T, backend=b) if b.name not in ("CPU", "Interpreter") else T]
    while_with_barrier(b, 4)(*args, np.int32(3), ndrange=4)
    tk.synchronize(b)
    T = np.asarray(args[0].numpy() if hasattr(args[0], "numpy") else args[0])
    want = np.zeros((4, 5), np.int32)
    for i in range(4):
        want[i] = [0, 1] + [r + (i + 1) % 4 for r in range(3)]
    np.testing.assert_array_equal(T, want)
