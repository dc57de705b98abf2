"""SPEC 6 and 7 together (audit17a): ``tk.autodiff`` of a launch on a stream that waits on another
stream's event, the primal or the shadow being filled by that other stream's kernel. Forward
mode ran the tangent kernel on no stream, so it raced with the pending work (a wrong tangent
and primal, now and then); reverse mode held."""
import numpy as np
import pytest

import tinykernels as tk

from interop_kernels import fma_update


@pytest.mark.parametrize("filled", ["primal", "shadow"])
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_autodiff_on_a_stream_that_waits_on_another_streams_fill(mode, filled):
    cpu = tk.CPU()
    n = 1 << 18
    x = np.linspace(0.0, 2.0, n)
    y0 = 0.25 if filled == "shadow" else 1.0
    for _trial in range(3):
        y = np.full(n, 0.25) if filled == "shadow" else np.zeros(n)
        seed = np.zeros(n) if filled == "shadow" else np.ones(n)
        s1, s2 = cpu.stream(), cpu.stream()
        fill = fma_update(cpu)
        for _ in range(32):                       # t = t * 1 + 1/32, 32 times: 1.0, on s2
            ev = fill(seed if filled == "shadow" else y, np.ones(n), 1 / 32, ndrange=n, stream=s2)
        s1.wait(ev)
        k = fma_update(cpu)
        d = np.zeros(n)
        tk.autodiff(tk.Reverse if mode == "reverse" else tk.Forward,
                    lambda a, b: k(a, b, 0.5, ndrange=n, stream=s1), tk.Duplicated(y, seed), tk.Duplicated(x, d))
        s1.synchronize()
        # y = y * x + 0.5 x: the primal, and with the seed 1 on y (and none on x) the tangent x,
        # or in reverse mode the gradients x (y's) and y0 + 0.5 (x's)
        np.testing.assert_allclose(y, y0 * x + 0.5 * x, rtol=1e-15, atol=1e-15)
        np.testing.assert_allclose(seed, x, rtol=1e-15, atol=1e-15)
        if mode == "reverse":
            np.testing.assert_allclose(d, y0 + 0.5)


def test_reverse_mode_copy_on_a_stream_that_waits_on_another_streams_fill():
    """tk.copyto(tmp, y, stream=s1) inside fn, y still being filled on s2: the copy's snapshot
    waits for s1 too (one run in three had a wrong gradient before audit17a)"""
    cpu = tk.CPU()
    n = 1 << 18
    x = np.linspace(0.0, 2.0, n)
    for _trial in range(3):
        y, tmp = np.zeros(n), np.zeros(n)
        s1, s2 = cpu.stream(), cpu.stream()
        fill = fma_update(cpu)
        for _ in range(32):
            ev = fill(y, np.ones(n), 1 / 32, ndrange=n, stream=s2)      # y -> 1.0 on s2
        s1.wait(ev)
        k = fma_update(cpu)
        dx, dy = np.zeros(n), np.zeros(n)

        def fn(yy, xx, tt):
            tk.copyto(tt, yy, stream=s1)                     # tmp = y
            k(tt, xx, 0.5, ndrange=n, stream=s1)             # tmp = tmp * x + 0.5 x
        tk.autodiff(tk.Reverse, fn, tk.Duplicated(y, dy), tk.Duplicated(x, dx), tk.Duplicated(tmp, np.ones(n)))
        np.testing.assert_allclose(tmp, 1.5 * x, rtol=1e-15, atol=1e-15)
        np.testing.assert_allclose(dx, 1.5)
        np.testing.assert_allclose(dy, x, rtol=1e-15, atol=1e-15)
