"""passes/permuted_access: which kernels get GCC 12.2's permutation workaround
(``-mprefer-vector-width=256``, the ``gcc-slp-permute`` probes' scope "float64"): those that
compute with doubles and access an array at an index that may not follow the vector lanes'
order. Stencils keep 512-bit vectors; permuted float64 kernels do not (docs/cpu.md "Flags")."""
import math

import numpy as np
import pytest

import tinykernels as tk
from tinykernels.passes.permuted_access import computes_doubles, permuted_accesses

CPU_OK = tk.CPU.available()[0]
needs_cpu = pytest.mark.skipif(not CPU_OK, reason="no C compiler for the CPU backend")


@tk.kernel
def stencil_1d(o, x: tk.Const):
    i = tk.index()
    o[i] = x[i] + x[i + 2] - 2.0 * x[i + 1]


@tk.kernel
def diffusion2d(T2, T: tk.Const, dt, lam):
    i, j = tk.index(tk.Global, tk.Cartesian)
    T2[i, j] = T[i, j] + dt * lam * (T[i - 1, j] + T[i + 1, j] + T[i, j - 1] + T[i, j + 1] - 4.0 * T[i, j])


@tk.kernel
def runtime_rows(o, x: tk.Const, n):
    i = tk.index()
    for j in range(4):
        o[i * n + j] = x[j * n + i] * 2.0


@tk.kernel
def local_in_order(o, x: tk.Const):
    a = tk.localmem(x.dtype, 8)
    l = tk.index(tk.Local, tk.Linear)
    i = tk.index()
    a[l] = x[i] * x[i]
    tk.synchronize()
    o[i] = a[l] * 2.0 + x[i + 1]


@tk.kernel
def private_reads(o, x: tk.Const, form: tk.constexpr):
    """Reads of a private array of eight at the index form ``form``."""
    i = tk.index()
    a = tk.private(x.dtype, 8)
    for j in range(8):
        a[j] = x[i * 8 + j] * x[i * 8 + j]
    for j in range(8):
        if form == 0:
            o[i * 8 + j] = a[7 - j] * a[j]
        elif form == 1:
            o[i * 8 + j] = a[(j + 1) % 8] * a[j]
        elif form == 2:
            o[i * 8 + j] = a[j ^ 1] * a[j]
        elif form == 3:
            o[i * 8 + j] = a[j // 2] * a[j]
        else:
            o[i * 8 + j] = a[3] * a[j]


@tk.kernel
def strided(o, x: tk.Const):
    i = tk.index()
    o[i] = x[2 * i] * x[2 * i + 1]


@tk.kernel
def reversed_store(o, x: tk.Const):
    i = tk.index()
    for j in range(8):
        o[i * 8 + 7 - j] = x[i * 8 + j] * 3.0


@tk.kernel
def constant_rows(o, x: tk.Const):
    i = tk.index()
    for j in range(8):
        o[i * 8 + j] = x[i * 8 + j] * 3.0


@tk.kernel
def stride_n(o, x: tk.Const, n: tk.constexpr, m):
    """x[i * n]: a constant stride when n is a constexpr (the C has the literal), an unknown one
    when m is a runtime argument"""
    i = tk.index()
    o[i] = x[i * n] * x[i * m]


@tk.kernel
def reversed_global(o, x: tk.Const, n):
    i = tk.index()
    o[i] = x[n - 1 - i] * 2.0


@tk.kernel
def exp_reversed(o, x: tk.Const):
    i = tk.index()
    o[i] = math.exp(x[7 - i % 8 + i - i % 8])


def _ir(kern, args, ndrange, *, wg=None):
    """The kernel's IR as the CPU compiles it (after every pass)."""
    inst = kern(tk.CPU()) if wg is None else kern(tk.CPU(), wg)
    norm, geom, ndim, ranges, total, w = inst._prepare(args, ndrange, None)
    return inst._ir(norm, geom, ndim, ranges, w)


def _spy_compiles(monkeypatch) -> tuple:
    """({library name: [extra flags of each compile]}, the toolchain): records what
    ``compile_library`` is given from now on."""
    from tinykernels.runtime import compiler
    seen: dict = {}
    real = compiler.compile_library
    monkeypatch.setattr(compiler, "compile_library",
                        lambda src, name, extra_flags=(), tc=None: seen.setdefault(name, []).append(tuple(extra_flags))
                        or real(src, name, extra_flags, tc))
    return seen, compiler.toolchain()


def _features(kern, args, ndrange, **kw):
    from tinykernels.runtime.base import kernel_features
    return kernel_features(_ir(kern, args, ndrange, **kw))


@needs_cpu
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_in_order_kernels_are_not_permuted(dt):
    x = np.zeros(96, dt)
    u = np.zeros((8, 8))
    assert "permuted-doubles" not in _features(stencil_1d, (np.zeros(90, dt), x), 90)
    assert "permuted-doubles" not in _features(diffusion2d, (u, u, 0.1, 0.2), (range(1, 7), range(1, 7)))
    assert "permuted-doubles" not in _features(runtime_rows, (np.zeros(96, dt), x, 8), 8)
    assert "permuted-doubles" not in _features(local_in_order, (np.zeros(80, dt), x), 80, wg=8)
    for kern, args, nd in ((stencil_1d, (np.zeros(90, dt), x), 90), (local_in_order, (np.zeros(80, dt), x), 80)):
        assert not permuted_accesses(_ir(kern, args, nd, **({"wg": 8} if kern is local_in_order else {})))


@needs_cpu
@pytest.mark.parametrize("form", range(5))
def test_permuted_private_reads_of_doubles_are_permuted(form):
    x, o = np.zeros(32), np.zeros(32)
    assert "permuted-doubles" in _features(private_reads, (o, x, form), 4)
    # float32 work (no double anywhere): the permutation is of floats, which GCC compiles right
    assert "permuted-doubles" not in _features(private_reads, (o.astype(np.float32), x.astype(np.float32), form), 4)


@needs_cpu
def test_strided_reversed_and_constant_strides_are_permuted():
    x = np.zeros(96)
    assert "permuted-doubles" in _features(strided, (np.zeros(40), x), 40)
    assert "permuted-doubles" in _features(reversed_store, (np.zeros(96), x), 12)
    assert "permuted-doubles" in _features(reversed_global, (np.zeros(96), x, 96), 96)
    # x[8 * i + j]: an interleaved group of eight per item, which GCC transposes with permutations
    assert "permuted-doubles" in _features(constant_rows, (np.zeros(96), x), 12)
    assert "permuted-doubles" in _features(stride_n, (np.zeros(40), x, 2, 1), 40)
    assert "permuted-doubles" not in _features(stride_n, (np.zeros(40), x, 1, 2), 40)


@needs_cpu
def test_doubles_of_the_prelude_count_in_float32_kernels():
    x = np.zeros(64, np.float32)
    ir = _ir(exp_reversed, (np.zeros(64, np.float32), x), 64)
    assert computes_doubles(ir)          # float32 exp is evaluated in double (tk_exp_f32)
    assert permuted_accesses(ir)
    assert "permuted-doubles" in _features(exp_reversed, (np.zeros(64, np.float32), x), 64)
    assert not computes_doubles(_ir(stencil_1d, (np.zeros(60, np.float32), x), 60))


@needs_cpu
def test_the_compile_command_has_the_workaround_for_permuted_kernels_only(monkeypatch):
    """What ``compile_library`` is given: the stencils none of the scoped flags, the permuted
    float64 kernel those of the scope "float64" (``-mprefer-vector-width=256`` where the probe
    found GCC 12.2's miscompile, nothing on a compiler without it); results right either way."""
    from tinykernels.runtime import compiler
    seen, tc = _spy_compiles(monkeypatch)
    x = np.random.default_rng(3).uniform(-1, 1, 96)
    o = np.zeros(90)
    stencil_1d(tk.CPU())(o, x, ndrange=90)
    np.testing.assert_array_equal(o, x[:90] + x[2:92] - 2.0 * x[1:91])
    u = np.random.default_rng(4).uniform(-1, 1, (40, 40))
    t2 = np.zeros_like(u)
    diffusion2d(tk.CPU())(t2, u, 0.1, 0.2, ndrange=(range(1, 39), range(1, 39)))
    want = u[1:-1, 1:-1] + 0.1 * 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
    np.testing.assert_allclose(t2[1:-1, 1:-1], want, rtol=1e-15, atol=1e-15)
    o = np.zeros(96)
    private_reads(tk.CPU())(o, x, 1, ndrange=12)
    a = (x * x).reshape(12, 8)
    np.testing.assert_array_equal(o, (np.roll(a, -1, axis=1) * a).ravel())
    assert seen["stencil_1d"] == [()] and seen["diffusion2d"] == [()]
    assert seen["private_reads"] == [tc.kernel_flags({"permuted-doubles"})]
    assert tc.kernel_flags({"permuted-doubles"}) == tc.kernel_flags(compiler.SCOPE_FEATURES["float64"])
    if dict(tc.scoped_flags).get("float64"):        # the probe found the miscompile here
        assert "-mprefer-vector-width=256" in seen["private_reads"][0]


@needs_cpu
def test_jax_kernel_cpu_libraries_follow_the_same_rule(monkeypatch):
    """``jax_kernel``'s CPU libraries get the scoped flags by the same features
    (``runtime.base.kernel_features``): none for the stencil, the float64 scope's for the
    permuted kernel."""
    jax = pytest.importorskip("jax")
    import tinykernels.jax as tkjax
    from tinykernels.runtime import compiler
    if not hasattr(jax, "ffi"):
        pytest.skip("jax.ffi needs jax >= 0.4.31")
    jax.config.update("jax_enable_x64", True)
    seen, tc = _spy_compiles(monkeypatch)
    x = np.random.default_rng(5).uniform(-1, 1, 96)
    o = tkjax.jax_kernel(stencil_1d, outputs=["o"])(np.zeros(90), x)
    np.testing.assert_array_equal(np.asarray(o), x[:90] + x[2:92] - 2.0 * x[1:91])
    o = tkjax.jax_kernel(private_reads, outputs=["o"], ndrange=12)(np.zeros(96), x, form=0)
    a = (x * x).reshape(12, 8)
    np.testing.assert_array_equal(np.asarray(o), (a[:, ::-1] * a).ravel())
    scoped = {f for _, fl in tc.scoped_flags for f in fl}
    assert not scoped & set(seen["stencil_1d"][0])
    assert set(tc.kernel_flags({"permuted-doubles"})) <= set(seen["private_reads"][0])
