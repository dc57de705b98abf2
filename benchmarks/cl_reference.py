"""Hand-written OpenCL C references for the autodiff rows of bench_cpu.py on OpenCL.

The triad and the 2-D and 3-D diffusion stencils, forward and adjoint, written by hand for
a CPU OpenCL device such as PoCL (a gather for the stencil's array gradient, in 3-D split into
the box where every source item is interior, tested nothing and run in groups of one row
segment, and the shell around it; scalar gradients summed over a strip of 16 items per work
item, barrier-free, then by a one-group kernel: PoCL runs per-group tree reductions with
barriers in a loop 10-30x slower than the stream itself), run
with pyopencl on the same device buffers as tinykernels' kernels. Timed in the same rounds
as tinykernels' forward and adjoint, their ratio is what the device and the memory system
allow for these streams, so a tinykernels ratio can be read against it. Each reference is
checked against NumPy before it is timed (:func:`check`).
"""
from __future__ import annotations

import numpy as np

_SRC = r"""
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define WG 256
#define STRIP 16    /* items per work item where a scalar gradient is summed (barrier-free on CPUs) */

/* out0[0] += scale0 * sum(partial[0:n]); out1[0] += scale1 * the same sum (if scale1 != 0); one group */
__kernel void finish(__global const double *partial, long n, __global double *out0, double scale0,
                     __global double *out1, double scale1) {
    __local double s[WG];
    const int l = get_local_id(0);
    double acc = 0.0;
    for (long k = l; k < n; k += WG) acc += partial[k];
    s[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h >>= 1) {
        if (l < h) s[l] += s[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) { out0[0] += scale0 * s[0]; if (scale1 != 0.0) out1[0] += scale1 * s[0]; }
}

__kernel void triad(__global float *a, __global const float *b, __global const float *c, float s, long n) {
    const long i = get_global_id(0);
    if (i < n) a[i] = b[i] + s * c[i];
}

/* dB += dA, dC += s dA, dA = 0 */
__kernel void triad_adjoint(__global float *da, __global float *db, __global float *dc, float s, long n) {
    const long i = get_global_id(0);
    if (i < n) {
        const float g = da[i];
        da[i] = 0.0f;
        db[i] += g;
        dc[i] += s * g;
    }
}

/* the same for a strip of STRIP elements per work item, and the strip's sum of C dA into partial */
__kernel void triad_adjoint_s(__global float *da, __global float *db, __global const float *c,
                              __global float *dc, float s, long n, __global double *partial) {
    const long w = get_global_id(0);
    double part = 0.0;
    for (long i = w * STRIP; i < n && i < (w + 1) * STRIP; ++i) {
        const float g = da[i];
        da[i] = 0.0f;
        db[i] += g;
        dc[i] += s * g;
        part += (double)c[i] * (double)g;
    }
    partial[w] = part;
}

#define AT(a, i, j) a[(i) * nx + (j)]
#define INNER(i, j) ((i) >= 1 && (i) < nx - 1 && (j) >= 1 && (j) < nx - 1)

__kernel void diffusion(__global double *T2, __global const double *T, double dt, double lam, long nx) {
    const long i = get_global_id(1) + 1, j = get_global_id(0) + 1;
    if (i >= nx - 1 || j >= nx - 1) return;
    AT(T2, i, j) = AT(T, i, j) + dt * lam * (AT(T, i - 1, j) + AT(T, i + 1, j) + AT(T, i, j - 1)
                                             + AT(T, i, j + 1) - 4.0 * AT(T, i, j));
}

/* dT[p, q] += the contributions of the interior items that read T[p, q] (a gather, no atomics) */
__kernel void diffusion_adjoint_gather(__global double *dT, __global const double *dT2, double c, long nx) {
    const long p = get_global_id(1), q = get_global_id(0);
    if (p >= nx || q >= nx) return;
    double acc = 0.0;
    if (INNER(p, q)) acc += (1.0 - 4.0 * c) * AT(dT2, p, q);
    if (INNER(p - 1, q)) acc += c * AT(dT2, p - 1, q);
    if (INNER(p + 1, q)) acc += c * AT(dT2, p + 1, q);
    if (INNER(p, q - 1)) acc += c * AT(dT2, p, q - 1);
    if (INNER(p, q + 1)) acc += c * AT(dT2, p, q + 1);
    AT(dT, p, q) += acc;
}

/* a strip of STRIP interior items of one row per work item: the sum of dT2 * laplacian(T)
   into partial, dT2 = 0 there */
__kernel void diffusion_adjoint_scalars(__global double *dT2, __global const double *T, long nx,
                                        long nstrips, __global double *partial) {
    const long i = get_global_id(1) + 1, w = get_global_id(0);
    if (i >= nx - 1 || w >= nstrips) return;
    double part = 0.0;
    for (long j = 1 + w * STRIP; j < nx - 1 && j < 1 + (w + 1) * STRIP; ++j) {
        const double g = AT(dT2, i, j);
        AT(dT2, i, j) = 0.0;
        part += g * (AT(T, i - 1, j) + AT(T, i + 1, j) + AT(T, i, j - 1) + AT(T, i, j + 1) - 4.0 * AT(T, i, j));
    }
    partial[(i - 1) * nstrips + w] = part;
}

#define AT3(a, i, j, k) a[((i) * nx + (j)) * nx + (k)]
#define INNER3(i, j, k) ((i) >= 1 && (i) < nx - 1 && (j) >= 1 && (j) < nx - 1 && (k) >= 1 && (k) < nx - 1)
#define LAP3(T, i, j, k) (AT3(T, i - 1, j, k) + AT3(T, i + 1, j, k) + AT3(T, i, j - 1, k) + AT3(T, i, j + 1, k) \
                          + AT3(T, i, j, k - 1) + AT3(T, i, j, k + 1) - 6.0 * AT3(T, i, j, k))

/* the 3-D stencil on an nx^3 cube (interior items); dimension 0 of the launch is the contiguous k */
__kernel void diffusion3d(__global double *T2, __global const double *T, double dt, double lam, long nx) {
    const long i = get_global_id(2) + 1, j = get_global_id(1) + 1, k = get_global_id(0) + 1;
    if (i >= nx - 1 || j >= nx - 1 || k >= nx - 1) return;
    AT3(T2, i, j, k) = AT3(T, i, j, k) + dt * lam * LAP3(T, i, j, k);
}

/* dT[p, q, r] += the contributions of the interior items that read T[p, q, r] (a gather): the
   contributions of the 7 items of an element of the box [2, nx - 3]^3, all interior, without tests
   (PoCL vectorizes it; a test per neighbour in every item makes it 2.5-3x slower) */
__kernel void diffusion3d_adjoint_gather(__global double *dT, __global const double *dT2, double c, long nx) {
    const long p = get_global_id(2) + 2, q = get_global_id(1) + 2, r = get_global_id(0) + 2;
    if (p >= nx - 2 || q >= nx - 2 || r >= nx - 2) return;
    AT3(dT, p, q, r) += (1.0 - 6.0 * c) * AT3(dT2, p, q, r)
        + c * (AT3(dT2, p - 1, q, r) + AT3(dT2, p + 1, q, r) + AT3(dT2, p, q - 1, r) + AT3(dT2, p, q + 1, r)
               + AT3(dT2, p, q, r - 1) + AT3(dT2, p, q, r + 1));
}

/* the same, each neighbour tested, for the shell outside that box (nx^3 - (nx - 4)^3 elements in one
   1-D launch: the planes p < 2 and p >= nx - 2, then q's, then r's within the others) */
__kernel void diffusion3d_adjoint_shell(__global double *dT, __global const double *dT2, double c, long nx) {
    long id = get_global_id(0);
    const long m = nx - 4, np = 4 * nx * nx, nq = 4 * m * nx, nr = 4 * m * m;
    long p, q, r, e;
    if (id < np) { e = id / (nx * nx); q = (id / nx) % nx; r = id % nx; p = e < 2 ? e : nx - 4 + e; }
    else if ((id -= np) < nq) { e = id / (m * nx); p = 2 + (id / nx) % m; r = id % nx; q = e < 2 ? e : nx - 4 + e; }
    else if ((id -= nq) < nr) { e = id / (m * m); p = 2 + (id / m) % m; q = 2 + id % m; r = e < 2 ? e : nx - 4 + e; }
    else return;
    double acc = 0.0;
    if (INNER3(p, q, r)) acc += (1.0 - 6.0 * c) * AT3(dT2, p, q, r);
    if (INNER3(p - 1, q, r)) acc += c * AT3(dT2, p - 1, q, r);
    if (INNER3(p + 1, q, r)) acc += c * AT3(dT2, p + 1, q, r);
    if (INNER3(p, q - 1, r)) acc += c * AT3(dT2, p, q - 1, r);
    if (INNER3(p, q + 1, r)) acc += c * AT3(dT2, p, q + 1, r);
    if (INNER3(p, q, r - 1)) acc += c * AT3(dT2, p, q, r - 1);
    if (INNER3(p, q, r + 1)) acc += c * AT3(dT2, p, q, r + 1);
    AT3(dT, p, q, r) += acc;
}

/* a strip of STRIP interior items of one row (i, j) per work item: the sum of dT2 * laplacian(T)
   into partial, dT2 = 0 there */
__kernel void diffusion3d_adjoint_scalars(__global double *dT2, __global const double *T, long nx,
                                          long nstrips, __global double *partial) {
    const long i = get_global_id(2) + 1, j = get_global_id(1) + 1, w = get_global_id(0);
    if (i >= nx - 1 || j >= nx - 1 || w >= nstrips) return;
    double part = 0.0;
    for (long k = 1 + w * STRIP; k < nx - 1 && k < 1 + (w + 1) * STRIP; ++k) {
        const double g = AT3(dT2, i, j, k);
        AT3(dT2, i, j, k) = 0.0;
        part += g * LAP3(T, i, j, k);
    }
    partial[((i - 1) * (nx - 2) + (j - 1)) * nstrips + w] = part;
}
"""


class CLReference:
    """The hand-written kernels, built once for the context of a tinykernels OpenCL backend."""

    def __init__(self, backend):
        import pyopencl as cl
        self.cl = cl
        dev = backend._dev
        self.ctx, self.queue = dev.ctx, dev.queue
        prog = cl.Program(self.ctx, _SRC).build()
        self.k = {n: cl.Kernel(prog, n) for n in ("finish", "triad", "triad_adjoint", "triad_adjoint_s", "diffusion",
                                                  "diffusion_adjoint_gather", "diffusion_adjoint_scalars",
                                                  "diffusion3d", "diffusion3d_adjoint_gather", "diffusion3d_adjoint_shell",
                                                  "diffusion3d_adjoint_scalars")}
        self._partials: dict = {}

    def _run(self, name, queue, gsize, lsize, *args):
        k = self.k[name]
        k.set_args(*args)
        self.cl.enqueue_nd_range_kernel(queue, k, gsize, lsize)

    def _partial(self, n: int):
        buf = self._partials.get(n)
        if buf is None:
            buf = self._partials[n] = self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, size=8 * max(n, 1))
        return buf

    def _finish(self, partial, n, out0, s0, out1=None, s1=0.0):
        self._run('finish', self.queue, (256,), (256,), partial, np.int64(n), out0, np.float64(s0),
                         out1 if out1 is not None else out0, np.float64(s1))

    # --- triad ------------------------------------------------------------------------------

    def triad(self, a, b, c, s, n):
        g = -(-n // 256) * 256
        self._run('triad', self.queue, (g,), (256,), a.buffer, b.buffer, c.buffer, np.float32(s), np.int64(n))
        self.queue.finish()

    def triad_adjoint(self, da, db, c, dc, s, n, ds=None):
        if ds is None:
            g = -(-n // 256) * 256
            self._run('triad_adjoint', self.queue, (g,), (256,), da.buffer, db.buffer, dc.buffer,
                      np.float32(s), np.int64(n))
        else:
            w = -(-n // 16)
            g = -(-w // 256) * 256
            part = self._partial(g)
            self._run('triad_adjoint_s', self.queue, (g,), (256,), da.buffer, db.buffer, c.buffer, dc.buffer,
                      np.float32(s), np.int64(n), part)
            self._finish(part, w, ds.buffer, 1.0)
        self.queue.finish()

    # --- 2-D diffusion (interior items; float64) --------------------------------------------

    def diffusion(self, T2, T, dt, lam, nx):
        g = -(-(nx - 2) // 16) * 16
        self._run('diffusion', self.queue, (g, g), (16, 16), T2.buffer, T.buffer, np.float64(dt),
                            np.float64(lam), np.int64(nx))
        self.queue.finish()

    def diffusion_adjoint(self, dT2, T, dT, dt, ddt, lam, dlam, nx):
        ga = -(-nx // 16) * 16
        self._run('diffusion_adjoint_gather', self.queue, (ga, ga), (16, 16), dT.buffer, dT2.buffer,
                                           np.float64(dt * lam), np.int64(nx))
        ns = -(-(nx - 2) // 16)
        gr = -(-(nx - 2) // 16) * 16
        gs = -(-ns // 16) * 16
        part = self._partial(gs * gr)
        self._run('diffusion_adjoint_scalars', self.queue, (gs, gr), (16, 16), dT2.buffer, T.buffer,
                  np.int64(nx), np.int64(ns), part)
        ng = ns * (nx - 2)
        self._finish(part, ng, ddt.buffer, lam, dlam.buffer, dt)
        self.queue.finish()

    # --- 3-D diffusion (interior items of an nx^3 cube; float64) ------------------------------

    def diffusion3d(self, T2, T, dt, lam, nx):
        # the work groups of tinykernels' default 3-D launch (4, 8, 8), so the forward kernels match
        g8, g4 = -(-(nx - 2) // 8) * 8, -(-(nx - 2) // 4) * 4
        self._run('diffusion3d', self.queue, (g8, g8, g4), (8, 8, 4), T2.buffer, T.buffer, np.float64(dt),
                  np.float64(lam), np.int64(nx))
        self.queue.finish()

    def diffusion3d_adjoint(self, dT2, T, dT, dt, ddt, lam, dlam, nx):
        assert nx >= 5
        # groups of one 64-element row segment: PoCL streams each row in one vectorized loop
        # (with (16, 4, 4) groups this kernel took 2-3x as long)
        ga = -(-(nx - 4) // 64) * 64
        c = np.float64(dt * lam)
        self._run('diffusion3d_adjoint_gather', self.queue, (ga, nx - 4, nx - 4), (64, 1, 1), dT.buffer,
                  dT2.buffer, c, np.int64(nx))
        shell = nx ** 3 - (nx - 4) ** 3
        self._run('diffusion3d_adjoint_shell', self.queue, (-(-shell // 256) * 256,), (256,), dT.buffer,
                  dT2.buffer, c, np.int64(nx))
        ns = -(-(nx - 2) // 16)
        gs, gr = -(-ns // 4) * 4, -(-(nx - 2) // 8) * 8
        part = self._partial(gs * gr * gr)
        self._run('diffusion3d_adjoint_scalars', self.queue, (gs, gr, gr), (4, 8, 8), dT2.buffer, T.buffer,
                  np.int64(nx), np.int64(ns), part)
        self._finish(part, ns * (nx - 2) ** 2, ddt.buffer, lam, dlam.buffer, dt)
        self.queue.finish()


def check(ref: CLReference, backend) -> None:
    """Each hand-written kernel against NumPy on small arrays (SystemExit when wrong)."""
    import tinykernels as tk
    rng = np.random.default_rng(11)
    dev = (lambda x: tk.asarray(x, backend=backend))  # noqa: E731
    n = 1000
    b, c, g, db0, dc0 = (rng.random(n, dtype=np.float32) for _ in range(5))
    a = dev(np.zeros(n, np.float32))
    ref.triad(a, dev(b), dev(c), 2.5, n)
    ok = np.allclose(a.numpy(), b + np.float32(2.5) * c, rtol=1e-6)
    da, db, dc, ds = dev(g), dev(db0), dev(dc0), dev(np.full(1, 0.5))
    ref.triad_adjoint(da, db, dev(c), dc, 2.5, n, ds)
    ok &= (not da.numpy().any() and np.allclose(db.numpy(), db0 + g, rtol=1e-6)
           and np.allclose(dc.numpy(), dc0 + np.float32(2.5) * g, rtol=1e-6)
           and np.isclose(ds.numpy()[0], 0.5 + np.dot(c.astype(np.float64), g), rtol=1e-9))
    nx, dt, lam = 37, 0.1, 0.2
    T, G, dT0 = rng.random((nx, nx)), rng.random((nx, nx)), rng.random((nx, nx))
    T2 = dev(np.zeros((nx, nx)))
    ref.diffusion(T2, dev(T), dt, lam, nx)
    lap = T[:-2, 1:-1] + T[2:, 1:-1] + T[1:-1, :-2] + T[1:-1, 2:] - 4 * T[1:-1, 1:-1]
    ok &= np.allclose(T2.numpy()[1:-1, 1:-1], T[1:-1, 1:-1] + dt * lam * lap, rtol=1e-12)
    dT2, dT, ddt, dlam = dev(G), dev(dT0), dev(np.zeros(1)), dev(np.zeros(1))
    ref.diffusion_adjoint(dT2, dev(T), dT, dt, ddt, lam, dlam, nx)
    gi = G[1:-1, 1:-1]
    want = dT0.copy()
    c = dt * lam
    want[1:-1, 1:-1] += (1 - 4 * c) * gi
    want[:-2, 1:-1] += c * gi
    want[2:, 1:-1] += c * gi
    want[1:-1, :-2] += c * gi
    want[1:-1, 2:] += c * gi
    zeroed = G.copy()
    zeroed[1:-1, 1:-1] = 0
    s = float(np.sum(gi * lap))
    ok &= (np.allclose(dT.numpy(), want, rtol=1e-12) and np.array_equal(dT2.numpy(), zeroed)
           and np.isclose(ddt.numpy()[0], lam * s, rtol=1e-9) and np.isclose(dlam.numpy()[0], dt * s, rtol=1e-9))
    nx = 23
    T, G, dT0 = rng.random((nx,) * 3), rng.random((nx,) * 3), rng.random((nx,) * 3)
    T2 = dev(np.zeros((nx,) * 3))
    ref.diffusion3d(T2, dev(T), dt, lam, nx)
    m = slice(1, -1)
    lap = (T[:-2, m, m] + T[2:, m, m] + T[m, :-2, m] + T[m, 2:, m] + T[m, m, :-2] + T[m, m, 2:]
           - 6 * T[m, m, m])
    ok &= np.allclose(T2.numpy()[m, m, m], T[m, m, m] + dt * lam * lap, rtol=1e-12)
    dT2, dT, ddt, dlam = dev(G), dev(dT0), dev(np.zeros(1)), dev(np.zeros(1))
    ref.diffusion3d_adjoint(dT2, dev(T), dT, dt, ddt, lam, dlam, nx)
    gi = G[m, m, m]
    want = dT0.copy()
    want[m, m, m] += (1 - 6 * c) * gi
    for sl in ((slice(None, -2), m, m), (slice(2, None), m, m), (m, slice(None, -2), m), (m, slice(2, None), m),
               (m, m, slice(None, -2)), (m, m, slice(2, None))):
        want[sl] += c * gi
    zeroed = G.copy()
    zeroed[m, m, m] = 0
    s = float(np.sum(gi * lap))
    ok &= (np.allclose(dT.numpy(), want, rtol=1e-12) and np.array_equal(dT2.numpy(), zeroed)
           and np.isclose(ddt.numpy()[0], lam * s, rtol=1e-9) and np.isclose(dlam.numpy()[0], dt * s, rtol=1e-9))
    if not ok:
        raise SystemExit("the hand-written OpenCL reference is wrong (benchmarks/cl_reference.py)")
