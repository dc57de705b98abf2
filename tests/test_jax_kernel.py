"""tinykernels.jax.jax_kernel: kernels through XLA's FFI (SPEC section 11): eager, jit, vmap,
grad (check_grads and against tk.autodiff on the same kernel), aliasing, errors."""
import math
from functools import partial

import numpy as np
import pytest

jax = pytest.importorskip("jax")
if not hasattr(jax, "ffi"):
    pytest.skip("jax.ffi needs jax >= 0.4.31", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import tinykernels as tk  # noqa: E402
import tinykernels.jax as tkjax  # noqa: E402
from tinykernels import LaunchError  # noqa: E402

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(11)


from interop_kernels import fma_update, gather, interior, interior_numpy, stencil2d, two_outputs  # noqa: E402


@tk.kernel
def shifted(y, x: tk.Const, k):
    i = tk.index()
    y[i] = x[i + k]


@tk.kernel
def writes_input(y, x):
    i = tk.index()
    y[i] = x[i]
    x[i] = 0.0


@tk.kernel
def axpy2d(out, x: tk.Const, c):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = out[i, j] + c * x[i, j]


AXPY2D = tkjax.jax_kernel(axpy2d, outputs=["out"])
FMA = tkjax.jax_kernel(fma_update, outputs=["y"])
STENCIL = tkjax.jax_kernel(stencil2d, outputs=["out"])
TWO = tkjax.jax_kernel(two_outputs, outputs=["s", "d"])
GATHER = tkjax.jax_kernel(gather, outputs=["y"])


def r(*shape):
    return jnp.asarray(RNG.standard_normal(shape))


def test_eager_and_jit_values():
    y0, x = r(40), r(40)
    np.testing.assert_allclose(FMA(y0, x, a=2.5), y0 * x + 2.5 * x, rtol=1e-14)
    jf = jax.jit(lambda u, v: FMA(u, v, a=-1.0) * 2.0)
    np.testing.assert_allclose(jf(y0, x), 2 * (y0 * x - x), rtol=1e-14)
    img, out0 = r(6, 7), r(6, 7)
    left = jnp.pad(img, ((0, 0), (1, 0)))[:, :-1]
    want = 2.0 * jnp.sin(img) * left + 0.5 * out0
    np.testing.assert_allclose(jax.jit(lambda o, m: STENCIL(o, m, w=0.5, scale=2.0))(out0, img), want, rtol=1e-13)
    s, d = TWO(jnp.zeros(9), jnp.zeros(9), y0[:9], x[:9], n=3)
    np.testing.assert_allclose(s, y0[:9] + 3 * x[:9], rtol=1e-14)
    np.testing.assert_allclose(d, y0[:9] * x[:9] - 0.5 * s, rtol=1e-14)


def test_eager_jit_vmap_match_the_direct_launch():
    """jax_kernel's eager, jit and vmap results equal the same kernel launched directly on
    NumPy copies (bit for bit: the same compiled C)."""
    img, out0 = np.asarray(r(6, 7)), np.asarray(r(6, 7))
    direct = out0.copy()
    stencil2d(tk.CPU())(direct, img, 0.5, 2.0, ndrange=(6, 7))
    f = lambda o, m: STENCIL(o, m, w=0.5, scale=2.0)  # noqa: E731
    np.testing.assert_array_equal(f(jnp.asarray(out0), jnp.asarray(img)), direct)
    np.testing.assert_array_equal(f(out0, img), direct)                  # NumPy arrays, eagerly
    np.testing.assert_array_equal(jax.jit(f)(out0, img), direct)
    Y, X = np.asarray(r(3, 12)), np.asarray(r(3, 12))
    want = Y.copy()
    for b in range(3):
        fma_update(tk.CPU())(want[b], X[b], 1.25, ndrange=12)
    np.testing.assert_array_equal(jax.vmap(lambda y, x: FMA(y, x, a=1.25))(Y, X), want)


def test_float32_and_explicit_ndrange():
    y0, x = jnp.ones(16, jnp.float32), jnp.arange(16, dtype=jnp.float32)
    out = FMA(y0, x, a=1.0, ndrange=8)               # only the first 8 items run
    np.testing.assert_allclose(out, np.r_[2 * np.arange(8), np.ones(8)].astype(np.float32))
    assert out.dtype == jnp.float32


def test_aliasing_initial_values_and_inputs_untouched():
    y0, x = r(10), r(10)
    keep = np.array(y0)
    y = FMA(y0, x, a=1.0)
    np.testing.assert_array_equal(np.array(y0), keep)       # JAX arrays are immutable: y is a new buffer
    # donated under jit: XLA may hand y0's buffer to the kernel as the output (no copy)
    donated = jax.jit(lambda u, v: FMA(u, v, a=1.0), donate_argnums=0)(jnp.array(keep), x)
    np.testing.assert_allclose(donated, keep * x + x, rtol=1e-14)
    # the same array as an output's initial value and as an input
    np.testing.assert_allclose(FMA(x, x, a=0.0), x * x, rtol=1e-14)


@tk.kernel
def triad(y, x: tk.Const, z: tk.Const, s):
    i = tk.index()
    y[i] = x[i] + s * z[i]


def _hlo_copies(fn, *args) -> int:
    return sum(" copy(" in line for line in fn.lower(*args).compile().as_text().splitlines())


def test_inplace_outputs_with_donation_cost_no_copy():
    """A fully overwritten output gets a fresh buffer; when its initial value is donated, XLA
    must place the result in the donated buffer and copies the fresh one into it. With
    inplace=True the kernel writes the donated buffer directly: no copy in the compiled
    program, same values; without donation inplace costs the copy instead."""
    x, z = r(64), r(64)
    fresh, inplace = tkjax.jax_kernel(triad, outputs=["y"]), tkjax.jax_kernel(triad, outputs=["y"], inplace=True)
    for f in (fresh, inplace):
        np.testing.assert_allclose(f(jnp.zeros(64), x, z, s=2.0), x + 2.0 * z, rtol=1e-14)
    donate = {f: jax.jit(lambda y, a, b, f=f: f(y, a, b, s=2.0), donate_argnums=0) for f in (fresh, inplace)}
    plain = {f: jax.jit(lambda y, a, b, f=f: f(y, a, b, s=2.0)) for f in (fresh, inplace)}
    y0 = jnp.zeros(64)
    assert _hlo_copies(donate[fresh], y0, x, z) == 1 and _hlo_copies(donate[inplace], y0, x, z) == 0
    assert _hlo_copies(plain[fresh], y0, x, z) == 0 and _hlo_copies(plain[inplace], y0, x, z) == 1
    for f in (fresh, inplace):
        np.testing.assert_allclose(donate[f](jnp.zeros(64), x, z), x + 2.0 * z, rtol=1e-14)
        np.testing.assert_allclose(plain[f](y0, x, z), x + 2.0 * z, rtol=1e-14)
    np.testing.assert_array_equal(np.array(y0), np.zeros(64))


def test_vmap_runs_each_batch_element():
    Y, X = r(3, 12), r(3, 12)
    out = jax.vmap(lambda u, v: FMA(u, v, a=0.5))(Y, X)
    np.testing.assert_allclose(out, Y * X + 0.5 * X, rtol=1e-14)
    out = jax.jit(jax.vmap(lambda v: FMA(jnp.zeros(12), v, a=2.0)))(X)   # unbatched output value
    np.testing.assert_allclose(out, 2 * X, rtol=1e-14)
    g = jax.vmap(jax.grad(lambda u, v: FMA(u, v, a=0.5).sum(), argnums=1))(Y, X)
    np.testing.assert_allclose(g, Y + 0.5, rtol=1e-14)


def _hlo(fn, *args) -> str:
    return jax.jit(fn).lower(*args).as_text()


def test_vmap_folds_elementwise_kernels_into_one_launch():
    """An elementwise kernel over arrays shaped like its ndrange: the batch becomes part of
    the ndrange (one FFI call, no loop), unbatched arguments broadcast; other kernels run
    once per batch element (a loop around the call). Values agree either way."""
    Y, X = r(4, 12), r(4, 12)
    f = jax.vmap(lambda u, v: FMA(u, v, a=0.5))
    hlo = _hlo(f, Y, X)
    assert hlo.count("custom_call @tinykernels_fma_update") == 1 and "while" not in hlo
    np.testing.assert_allclose(f(Y, X), Y * X + 0.5 * X, rtol=1e-14)
    g = jax.vmap(lambda v: FMA(Y[0], v, a=2.0), in_axes=1, out_axes=1)       # y unbatched, batch axis 1
    assert "while" not in _hlo(g, X.T)
    np.testing.assert_allclose(g(X.T), (Y[0][:, None] * X.T + 2.0 * X.T), rtol=1e-14)
    YY, XX = r(2, 3, 5, 4), r(2, 3, 5, 4)                                     # nested vmap over 2-D arrays
    h = jax.vmap(jax.vmap(lambda u, v: AXPY2D(u, v, c=1.5)))
    assert "while" not in _hlo(h, YY, XX)
    np.testing.assert_allclose(h(YY, XX), YY + 1.5 * XX, rtol=1e-14)
    A, B = r(3, 9), r(3, 9)
    s, d = jax.vmap(lambda u, v: TWO(jnp.zeros(9), jnp.zeros(9), u, v, n=2))(A, B)
    np.testing.assert_allclose(s, A + 2 * B, rtol=1e-14)
    np.testing.assert_allclose(d, A * B - 0.5 * s, rtol=1e-14)
    # not elementwise: a neighbour's element (stencil), an indirect index (gather)
    IMG, OUT = r(3, 4, 5), r(3, 4, 5)
    st = jax.vmap(lambda o, m: STENCIL(o, m, w=0.5, scale=2.0))
    assert "while" in _hlo(st, OUT, IMG)
    left = jnp.pad(IMG, ((0, 0), (0, 0), (1, 0)))[:, :, :-1]
    np.testing.assert_allclose(st(OUT, IMG), 2.0 * jnp.sin(IMG) * left + 0.5 * OUT, rtol=1e-13)
    idx = jnp.asarray(RNG.integers(0, 12, (4, 12)))
    gt = jax.vmap(lambda v, i: GATHER(jnp.zeros(12), v, i))
    assert "while" in _hlo(gt, X, idx)
    np.testing.assert_allclose(gt(X, idx), jnp.take_along_axis(X, idx, 1) ** 2, rtol=1e-14)
    # gradients through a folded vmap
    gv = jax.vmap(jax.grad(lambda u, v: FMA(u, v, a=0.5).sum(), argnums=1))(Y, X)
    np.testing.assert_allclose(gv, Y + 0.5, rtol=1e-14)


def test_forward_mode_jvp_and_check_grads_fwd_rev():
    """autodiff="jvp": jax.jvp through the tangent kernel, jax.grad by transposing it into the
    adjoint kernel; both checked against finite differences, and against the analytic
    derivative."""
    F = tkjax.jax_kernel(fma_update, outputs=["y"], autodiff="jvp")
    y0, x, dy0, dx = r(15), r(15), r(15), r(15)
    out, t = jax.jvp(lambda u, v: F(u, v, a=0.5), (y0, x), (dy0, dx))
    np.testing.assert_allclose(out, y0 * x + 0.5 * x, rtol=1e-14)
    np.testing.assert_allclose(t, dy0 * x + y0 * dx + 0.5 * dx, rtol=1e-13)
    out, t = jax.jit(lambda p, q: jax.jvp(lambda v: F(y0, v, a=0.5), (p,), (q,)))(x, dx)   # y0: a constant
    np.testing.assert_allclose(t, y0 * dx + 0.5 * dx, rtol=1e-13)
    check_grads(lambda u, v: F(u, v, a=0.5), (y0, x), order=1, modes=("fwd", "rev"))
    S = tkjax.jax_kernel(stencil2d, outputs=["out"], autodiff="jvp")
    check_grads(jax.jit(lambda o, m: S(o, m, w=0.3, scale=2.0)), (r(4, 5), r(4, 5)), order=1, modes=("fwd", "rev"))
    T = tkjax.jax_kernel(two_outputs, outputs=["s", "d"], autodiff="jvp")
    check_grads(lambda a, b: T(jnp.zeros(6), jnp.zeros(6), a, b, n=2), (r(6), r(6)), order=1, modes=("fwd", "rev"))
    G = tkjax.jax_kernel(gather, outputs=["y"], autodiff="jvp")
    idx = jnp.asarray([3, 3, 0, 6, 1, 1, 2])
    check_grads(lambda v: G(jnp.zeros(7), v, idx), (r(7),), order=1, modes=("fwd", "rev"))
    np.testing.assert_allclose(jax.vmap(lambda u, v: F(u, v, a=0.5))(r(3, 15), r(3, 15)).shape, (3, 15))
    with pytest.raises(TypeError, match="custom_vjp"):     # the default mode: reverse only
        jax.jvp(lambda v: FMA(y0, v, a=0.5), (x,), (dx,))
    with pytest.raises(ValueError, match="autodiff must be"):
        tkjax.jax_kernel(fma_update, outputs=["y"], autodiff="both")


@tk.kernel
def power(y, x: tk.Const, c: tk.Const):
    i = tk.index()
    y[i] = x[i] ** c[i]


def test_jvp_leaves_out_arguments_jax_holds_constant():
    """d(x ** c)/dc is NaN at a negative x; where c has no tangent (JAX holds it constant) the
    jvp must not multiply that NaN by a zero tangent: jax.jvp of jnp's own power gives
    c * x ** (c - 1). The jvp through the tangent kernel was NaN at x < 0."""
    P = tkjax.jax_kernel(power, outputs=["y"], autodiff="jvp")
    x, c = jnp.asarray([-2.0, -0.5, 3.0]), jnp.asarray([3.0, 2.0, 2.0])
    _, t = jax.jvp(lambda v: P(jnp.zeros(3), v, c), (x,), (jnp.ones(3),))
    _, want = jax.jvp(lambda v: v ** c, (x,), (jnp.ones(3),))
    np.testing.assert_allclose(t, want, rtol=1e-14)
    np.testing.assert_allclose(t, c * x ** (c - 1), rtol=1e-14)
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(P(jnp.zeros(3), v, c)))(x), want, rtol=1e-14)


def test_grad_of_bfloat16_arrays():
    """bfloat16 arrays were taken for non-float ones (NumPy kind 'V') and got zero gradients."""
    P = tkjax.jax_kernel(power, outputs=["y"])
    x, c = jnp.linspace(0.5, 1.5, 8).astype(jnp.bfloat16), jnp.full(8, 3.0, jnp.bfloat16)
    g = jax.grad(lambda v: jnp.sum(P(jnp.zeros(8, jnp.bfloat16), v, c).astype(jnp.float32)))(x)
    xf = np.asarray(x, np.float64)
    np.testing.assert_allclose(np.asarray(g, np.float64), 3 * xf ** 2, rtol=2e-2)


def test_grad_check_grads_float64():
    y0, x = r(14), r(14)
    check_grads(lambda u, v: FMA(u, v, a=0.7), (y0, x), order=1, modes=["rev"])
    img, out0 = r(5, 6), r(5, 6)
    check_grads(lambda o, m: STENCIL(o, m, w=0.3, scale=2.0), (out0, img), order=1, modes=["rev"])
    a, b = r(9), r(9)
    check_grads(lambda u, v: TWO(jnp.zeros(9), jnp.zeros(9), u, v, n=2), (a, b), order=1, modes=["rev"])


def test_grad_matches_tk_autodiff_of_the_direct_launch():
    x = r(10)
    idx = jnp.array([3, 3, 0, 9, 1, 1, 1, 2, 5, 5])
    seed = RNG.standard_normal(10)
    gx, gidx = jax.grad(lambda v, i: jnp.vdot(GATHER(jnp.zeros(10), v, i), seed), argnums=(0, 1),
                        allow_int=True)(x, idx)
    xn, dx = np.array(x), np.zeros(10)
    tk.autodiff(tk.Reverse, lambda y_, x_, i_: gather(tk.CPU())(y_, x_, i_, ndrange=10),
                tk.Duplicated(np.zeros(10), seed.copy()), tk.Duplicated(xn, dx), tk.Const(np.array(idx)))
    np.testing.assert_allclose(gx, dx, rtol=1e-12)
    assert gidx.dtype == jax.dtypes.float0


def test_debug_mode_error_surfaces_as_a_jax_error():
    f = tkjax.jax_kernel(shifted, outputs=["y"], backend=tk.CPU(debug=True))
    x, y0 = jnp.arange(10.0), jnp.zeros(10)
    np.testing.assert_array_equal(f(y0, x, k=0), np.arange(10.0))
    with pytest.raises(Exception, match=r"kernel 'shifted' at .*test_jax_kernel.py:\d+: index 10 is out of bounds "
                                        r"for array 'x' with shape \(10,\)"):
        jax.jit(lambda u, v: f(u, v, k=1))(y0, x).block_until_ready()


def test_refusals():
    y, x = jnp.zeros(4), jnp.ones(4)
    with pytest.raises(LaunchError, match=r"writes \['x'\].*not among outputs"):
        tkjax.jax_kernel(writes_input, outputs=["y"])(y, x)
    with pytest.raises(LaunchError, match="expected 2 array argument"):
        FMA(y, a=1.0)
    with pytest.raises(LaunchError, match="must be a Python or NumPy scalar"):
        FMA(y, x, a=jnp.ones(()))
    with pytest.raises(LaunchError, match="constexpr parameter 'scale' must be given by keyword"):
        STENCIL(jnp.zeros((2, 2)), jnp.zeros((2, 2)), w=1.0)
    with pytest.raises(LaunchError, match="output 'q' is not one of its parameters"):
        tkjax.jax_kernel(fma_update, outputs=["q"])
    with pytest.raises(LaunchError, match="must be a tk.CPU"):
        tkjax.jax_kernel(fma_update, outputs=["y"], backend=tk.Interpreter())
    with pytest.raises(LaunchError, match="out of bounds"):       # a certain out-of-bounds access, at trace time
        tkjax.jax_kernel(fma_update, outputs=["y"])(jnp.zeros(8), jnp.zeros(4), a=1.0)


def test_specializations_are_registered_once():
    before = len(tkjax._TARGETS)
    f2 = tkjax.jax_kernel(fma_update, outputs=["y"])        # another wrapper, same kernel and types
    f2(r(40), r(40), a=3.0)
    FMA(r(40), r(40), a=4.0)
    assert len(tkjax._TARGETS) - before <= 1


def test_cuda_ffi_handler_is_generated_and_compiles(tmp_path):
    """The CUDA FFI handler (stream from XLA's call frame, cuLaunchKernel's address from the
    attribute) for several signatures: host C that compiles against XLA's FFI header with the
    system C compiler; no GPU, CUDA toolkit or cuda.h needed."""
    import subprocess
    from tinykernels.runtime.compiler import find_compiler
    cc = find_compiler()
    if cc is None:
        pytest.skip("no C compiler")
    f32 = tkjax.jax_kernel(fma_update, outputs=["y"])
    calls = [(FMA, (r(10), r(10)), {"a": 0.5}),
             (f32, (jnp.ones(10, jnp.float32), jnp.ones(10, jnp.float32)), {"a": 0.5}),
             (STENCIL, (r(4, 5), r(4, 5)), {"w": 0.5, "scale": 2.0}),
             (TWO, (jnp.zeros(9), jnp.zeros(9), r(9), r(9)), {"n": 3}),
             (GATHER, (r(7), r(7), jnp.arange(7)), {}),
             (AXPY2D, (jax.ShapeDtypeStruct((3, 4), jnp.float64), jax.ShapeDtypeStruct((3, 4), jnp.float64)),
              {"c": 2.0})]
    for k, (fn, args, kw) in enumerate(calls):
        src = fn.source(*args, platform="cuda", **kw)
        assert "XLA_FFI_Stream_Get" in src and "tk_xla_ffi_cuda" in src
        path = tmp_path / f"h{k}.c"
        path.write_text(src)
        res = subprocess.run([*cc, "-std=c11", "-Wall", "-Werror", "-c", f"-I{jax.ffi.include_dir()}", str(path),
                              "-o", str(tmp_path / f"h{k}.o")], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    assert "tk_xla_ffi(" in FMA.source(r(10), r(10), a=0.5)          # the CPU platform's handler
    with pytest.raises(ValueError, match="platform"):
        FMA.source(r(10), r(10), a=0.5, platform="rocm")


_HARNESS = r"""
#include <stdint.h>
#include <string.h>
#include "xla/ffi/api/c_api.h"
XLA_FFI_Error *tk_xla_ffi_cuda(XLA_FFI_CallFrame *cf);
static uint64_t seen[256];
static uint64_t seen_meta[8];
static int npar;
static XLA_FFI_Error *fake_stream_get(XLA_FFI_Stream_Get_Args *a) { a->stream = (void *)0x5151; return NULL; }
static int fake_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shmem, void *stream, void **params, void **extra) {
    unsigned d[6] = {gx, gy, gz, bx, by, bz};
    seen_meta[0] = (uint64_t)(uintptr_t)f;
    seen_meta[1] = (uint64_t)(uintptr_t)stream;
    for (int k = 0; k < 6; ++k) seen_meta[2 + k] = d[k];
    for (int k = 0; k < npar; ++k) memcpy(&seen[k], params[k], 8);
    (void)shmem; (void)extra;
    return 0;
}
/* runs the handler on a call frame of host buffers: 8 dims per buffer, args then rets */
int tk_harness(int nargs, int nrets, void **data, int64_t *rank, int64_t *dims, int64_t *attr, int64_t nattr,
               int nparams, uint64_t *out, uint64_t *meta) {
    XLA_FFI_Buffer bufs[16];
    void *ptrs[16];
    for (int i = 0; i < nargs + nrets; ++i) {
        memset(&bufs[i], 0, sizeof bufs[i]);
        bufs[i].struct_size = sizeof bufs[i];
        bufs[i].data = data[i];
        bufs[i].rank = rank[i];
        bufs[i].dims = dims + 8 * i;
        ptrs[i] = &bufs[i];
    }
    attr[nattr - 1] = (int64_t)(uintptr_t)fake_launch;
    XLA_FFI_Array arr = {XLA_FFI_DataType_S64, (size_t)nattr, attr};
    XLA_FFI_AttrType at = XLA_FFI_AttrType_ARRAY;
    void *attrp = &arr;
    static XLA_FFI_Api api;
    api.XLA_FFI_Stream_Get = fake_stream_get;
    XLA_FFI_CallFrame cf;
    memset(&cf, 0, sizeof cf);
    cf.api = &api;
    cf.stage = XLA_FFI_ExecutionStage_EXECUTE;
    cf.args.size = nargs;
    cf.args.args = ptrs;
    cf.rets.size = nrets;
    cf.rets.rets = ptrs + nargs;
    cf.attrs.size = 1;
    cf.attrs.types = &at;
    cf.attrs.attrs = &attrp;
    npar = nparams;
    if (tk_xla_ffi_cuda(&cf) != NULL) return 1;
    memcpy(out, seen, 8 * (size_t)nparams);
    memcpy(meta, seen_meta, sizeof seen_meta);
    return 0;
}
"""


def test_cuda_ffi_handler_packs_what_the_cuda_runtime_packs(tmp_path):
    """Run the generated CUDA handler on the host with a fake call frame, stream and
    cuLaunchKernel: the argument block it passes equals the CUDA runtime's own
    (runtime.cuda.pack_params) for the same specialization, on XLA's stream, with the grid."""
    import ctypes
    import subprocess
    from tinykernels.codegen.cuda import param_layout
    from tinykernels.runtime.compiler import find_compiler
    from tinykernels.runtime.cuda import CUDATarget, grid_dims, pack_params
    cc = find_compiler()
    if cc is None:
        pytest.skip("no C compiler")

    class Dev:                       # what pack_params reads of a device array
        def __init__(self, a):
            self.a, self.ptr, self.shape, self.strides, self.dtype = a, a.ctypes.data, a.shape, a.strides, a.dtype

    cases = [(TWO, two_outputs, [np.zeros(9), np.zeros(9), np.ones(9), np.ones(9)], {"n": 3}),
             (STENCIL, stencil2d, [np.zeros((4, 5)), np.ones((4, 5))], {"w": 0.5, "scale": 2.0}),
             (AXPY2D, axpy2d, [np.zeros((3, 70), np.float32), np.ones((3, 70), np.float32)], {"c": -1.25})]
    for n, (fn, kern, arrays, kw) in enumerate(cases):
        src = fn.source(*arrays, platform="cuda", **kw)
        (tmp_path / f"h{n}.c").write_text(src + _HARNESS)
        lib = tmp_path / f"h{n}.so"
        res = subprocess.run([*cc, "-std=c11", "-shared", "-fPIC", f"-I{jax.ffi.include_dir()}",
                              str(tmp_path / f"h{n}.c"), "-o", str(lib)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        h = ctypes.CDLL(str(lib))
        from tinykernels import interop
        b, floats, ints = interop.bind(kern, fn.outputs, len(arrays), kw, "test")
        inst = kern(CUDATarget(debug=False))
        norm, geom, ndim, ranges, _t, wg = inst._prepare(b.kernel_args(arrays, floats, ints), b.geometry(
            [a.shape for a in arrays]), None)
        ir = inst._ir(norm, geom, ndim, ranges, wg)
        layout = param_layout(ir)
        values = {p[1].name if p[0] == "array" else p[1]: (Dev(a) if isinstance(a, np.ndarray) else a)
                  for p, a in zip(ir.params, norm)}
        # the frame: every array as an operand, the outputs also as results in memory of their
        # own (XLA's result buffers): the kernel must get the results' pointers
        args_in = list(range(len(arrays)))
        frame = list(arrays) + [arrays[k].copy() for k in b.outputs]
        for j, k in enumerate(b.outputs):
            values[b.array_names()[k]] = Dev(frame[len(args_in) + j])
        want = pack_params(layout, values, geom)[0]
        bits = []
        for kind, slot in zip(b.kinds, b.slots):
            if kind == "f":
                bits.append(int(np.float64(floats[slot]).view(np.int64)))
            elif kind in "ib":
                bits.append(ints[slot])
        attr = np.array(list(geom) + bits + [0x7777, 0], np.int64)
        data = (ctypes.c_void_p * len(frame))(*[a.ctypes.data for a in frame])
        rank = np.array([a.ndim for a in frame], np.int64)
        dims = np.zeros((len(frame), 8), np.int64)
        for i, a in enumerate(frame):
            dims[i, :a.ndim] = a.shape
        out, meta = np.zeros(len(layout), np.uint64), np.zeros(8, np.uint64)
        P = ctypes.c_void_p
        rc = h.tk_harness(len(args_in), len(b.outputs), data, P(rank.ctypes.data), P(dims.ctypes.data),
                          P(attr.ctypes.data), ctypes.c_int64(len(attr)), len(layout), P(out.ctypes.data),
                          P(meta.ctypes.data))
        assert rc == 0
        np.testing.assert_array_equal(out, want[:len(layout)])
        grid, block = grid_dims(geom, ndim, wg)
        assert list(meta) == [0x7777, 0x5151, *grid, *block]


RANGE_CASES = [(range(1, 8), range(1, 6)), (range(1, 8, 3), range(2, 6, 2)), (range(7, 0, -2), range(1, 6))]


@pytest.mark.parametrize("nd", RANGE_CASES, ids=["offset", "stepped", "negative-step"])
@pytest.mark.parametrize("route", ["ffi", "ffi-jvp", "raised"])
def test_range_ndrange_like_a_direct_launch(route, nd):
    """SPEC 2: an ndrange dimension may be a Python range. Through the FFI (both autodiff
    modes) and the raised route, eager, under jit and vmap (per batch element: an offset
    index space does not fold), bit for bit against a direct CPU launch and NumPy (the raised
    route within XLA's FMA contraction); gradients against float64 finite differences
    (check_grads) and against tk.autodiff's adjoint, also under vmap."""
    u, out0 = RNG.standard_normal((9, 7)), RNG.standard_normal((9, 7))
    direct = out0.copy()
    interior(tk.CPU())(direct, u, 0.3, ndrange=nd)
    rows = nd[0] if nd[0].step > 0 else range(nd[0][-1], nd[0].start + 1, -nd[0].step)
    np.testing.assert_array_equal(direct, interior_numpy(out0, u, 0.3, rows, nd[1]))
    # the raised code under jit: XLA's CPU contracts a * b + c into an FMA (docs/jax.md)
    same = partial(np.testing.assert_allclose, rtol=1e-15, atol=1e-15) if route == "raised" else \
        np.testing.assert_array_equal
    make = tkjax.raise_kernel if route == "raised" else \
        lambda k, outputs: tkjax.jax_kernel(k, outputs=outputs, autodiff="jvp" if route == "ffi-jvp" else "vjp")
    f = make(interior, outputs=["out"])
    same(f(out0, u, a=0.3, ndrange=nd), direct)
    same(jax.jit(lambda o, v: f(o, v, a=0.3, ndrange=nd))(out0, u), direct)
    batched = jax.vmap(lambda v: f(out0, v, a=0.3, ndrange=nd))(jnp.stack([u, 2 * u]))
    direct2 = out0.copy()
    interior(tk.CPU())(direct2, 2 * u, 0.3, ndrange=nd)
    same(batched, np.stack([direct, direct2]))
    # the ndrange given to jax_kernel(...) instead of per call
    g = make(interior, outputs=["out"]) if route == "raised" else \
        tkjax.jax_kernel(interior, outputs=["out"], ndrange=nd)
    if route != "raised":
        same(g(out0, u, a=0.3), direct)
    modes = ("fwd", "rev") if route != "ffi" else ("rev",)
    check_grads(lambda o, v: f(o, v, a=0.3, ndrange=nd), (out0, u), order=1, modes=modes)
    w = RNG.standard_normal((9, 7))
    gu = jax.grad(lambda v: jnp.sum(w * f(out0, v, a=0.3, ndrange=nd)))(u)
    du = np.zeros_like(u)
    tk.autodiff(tk.Reverse, lambda o, v: interior(tk.CPU())(o, v, 0.3, ndrange=nd),
                tk.Duplicated(out0.copy(), w.copy()), tk.Duplicated(u.copy(), du))
    assert np.abs(du).max() > 0
    np.testing.assert_allclose(gu, du, rtol=1e-13, atol=1e-13)
    gb = jax.vmap(jax.grad(lambda v: jnp.sum(w * f(out0, v, a=0.3, ndrange=nd))))(jnp.stack([u, u]))
    np.testing.assert_allclose(gb, np.stack([gu, gu]), rtol=1e-13, atol=1e-13)


def test_range_ndrange_refusals_name_ndrange():
    y0, x = jnp.ones(8), jnp.arange(8.0)
    for bad in ((range(0, 4), 2.0), [range(3), True], "range(3)"):
        with pytest.raises(LaunchError, match="ndrange"):
            FMA(y0, x, a=1.0, ndrange=bad)
    with pytest.raises(LaunchError, match="ndrange"):       # 4 dimensions, as a direct launch
        FMA(y0, x, a=1.0, ndrange=(range(1), 1, 1, 1))


def test_jvp_mode_derivatives_batch_under_vmap():
    """autodiff="jvp" pairs the tangent and adjoint kernels in a linear_call, which JAX cannot
    batch by itself ("Batching rule for 'linear_call' not implemented"): tinykernels.jax_batching
    supplies the rule, so vmap of grad and of jvp, jacfwd and jacrev run through the kernel's own
    derived kernels and agree with the default mode's reverse Jacobian and with the raised
    kernel's (JAX-differentiated) Jacobians."""
    nd = (range(1, 5), range(1, 4))
    u, out0 = RNG.standard_normal((6, 5)), RNG.standard_normal((6, 5))
    fj = tkjax.jax_kernel(interior, outputs=["out"], autodiff="jvp")
    fv = tkjax.jax_kernel(interior, outputs=["out"])
    fr = tkjax.raise_kernel(interior, outputs=["out"])

    def h(f):
        return lambda v: jnp.tanh(f(out0, v, a=0.3, ndrange=nd)) * v

    want = jax.jacrev(h(fv))(u)
    assert np.abs(want).max() > 0
    for jac in (jax.jacfwd(h(fj))(u), jax.jacrev(h(fj))(u), jax.jacfwd(h(fr))(u)):
        np.testing.assert_allclose(jac, want, rtol=1e-13, atol=1e-14)
    us = jnp.stack([u, 2 * u, -u])
    loss = lambda f: lambda v: jnp.sum(h(f)(v) ** 2)   # noqa: E731
    np.testing.assert_allclose(jax.vmap(jax.grad(loss(fj)))(us), jax.vmap(jax.grad(loss(fv)))(us),
                               rtol=1e-13, atol=1e-14)
    ts = jnp.stack([out0, u, -u])
    tj = jax.vmap(lambda v, t: jax.jvp(h(fj), (v,), (t,))[1])(us, ts)
    for k in range(3):
        np.testing.assert_allclose(tj[k], jax.jvp(h(fr), (us[k],), (ts[k],))[1], rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("nd", [range(0, 16), range(3, 16, 2)])
def test_range_ndrange_vmap_of_an_elementwise_kernel(nd):
    """An elementwise kernel over a range ndrange: the batch is not folded into one launch
    (whose ndrange would have to be the arrays' shape), each element matches a direct launch."""
    ys, xs = RNG.standard_normal((3, 16)), RNG.standard_normal((3, 16))
    want = ys.copy()
    for k in range(3):
        fma_update(tk.CPU())(want[k], xs[k], 1.5, ndrange=nd)
    np.testing.assert_array_equal(jax.vmap(lambda y, x: FMA(y, x, a=1.5, ndrange=nd))(ys, xs), want)
