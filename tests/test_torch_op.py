"""tinykernels.torch.torch_op: kernels as torch.library operators (SPEC section 11):
eager values, opcheck, gradcheck in float64, torch.compile(fullgraph=True), refusals."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tinykernels as tk  # noqa: E402
import tinykernels.torch as tktorch  # noqa: E402
from tinykernels import LaunchError  # noqa: E402


from interop_kernels import fma_update, gather, interior, interior_numpy, stencil2d, two_outputs  # noqa: E402


@tk.kernel
def writes_input(y, x):
    i = tk.index()
    y[i] = x[i]
    x[i] = 0.0


import math  # noqa: E402  (the kernels above use it; imported where they are compiled)

FMA = tktorch.torch_op(fma_update, outputs=["y"], name="tktest::fma_update")
STENCIL = tktorch.torch_op(stencil2d, outputs=["out"], name="tktest::stencil2d")
TWO = tktorch.torch_op(two_outputs, outputs=["s", "d"], name="tktest::two_outputs")
GATHER = tktorch.torch_op(gather, outputs=["y"], name="tktest::gather")
BAD = tktorch.torch_op(writes_input, outputs=["y"], name="tktest::writes_input")


@tk.kernel
def patched(out, acc, x: tk.Const, idx: tk.Const, a, n, flag, scale: tk.constexpr):
    i = tk.index()
    out[i] = a * x[i] + n
    v = x[idx[i]] * scale
    acc[i] = acc[i] + (v if flag else -v)


PATCHED = tktorch.torch_op(patched, outputs=["out", "acc"], name="tktest::patched")

G = torch.Generator().manual_seed(5)


def rand(*shape, grad=True):
    return torch.randn(*shape, dtype=torch.float64, generator=G).requires_grad_(grad)


def test_eager_values_and_inputs_unchanged():
    y0, x = rand(50, grad=False), rand(50, grad=False)
    keep = y0.clone()
    y = FMA(y0, x, a=2.5)
    torch.testing.assert_close(y, keep * x + 2.5 * x)
    torch.testing.assert_close(y0, keep)          # functional: the initial value is not modified


def test_two_outputs_int_scalar_and_constexpr():
    a, b = rand(20, grad=False), rand(20, grad=False)
    s, d = TWO(torch.zeros(20, dtype=torch.float64), torch.zeros(20, dtype=torch.float64), a, b, n=3)
    torch.testing.assert_close(s, a + 3 * b)
    torch.testing.assert_close(d, a * b - 0.5 * (a + 3 * b))
    img, out0 = rand(6, 7, grad=False), rand(6, 7, grad=False)
    out = STENCIL(out0, img, w=0.5, scale=2.0)
    left = torch.nn.functional.pad(img, (1, 0))[:, :-1]
    torch.testing.assert_close(out, 2.0 * torch.sin(img) * left + 0.5 * out0)


def test_opcheck_passes_every_check():
    y0, x = rand(16), rand(16)
    for args in (([y0, x], [1.5], [], "f:a;nd=None;wg=None"),
                 ([y0, x], [1.5], [], "f:a;nd=8;wg=4")):
        torch.library.opcheck(FMA._op, args)
    img, out0 = rand(4, 5), rand(4, 5)
    key = STENCIL._key({"w": 0.25, "scale": 3.0}, None, None)
    torch.library.opcheck(STENCIL._op, ([out0, img], key[1], key[2], key[0]))
    # two outputs, an int scalar
    key = TWO._key({"n": 3}, None, None)
    torch.library.opcheck(TWO._op, ([rand(6), rand(6), rand(6), rand(6)], key[1], key[2], key[0]))
    # two outputs (one fully overwritten), int and bool scalars, an int array, a constexpr
    key = PATCHED._key({"a": 0.5, "n": 2, "flag": True, "scale": 3.0}, None, None)
    idx = torch.tensor([3, 0, 1, 1, 2, 5], dtype=torch.int32)
    torch.library.opcheck(PATCHED._op, ([rand(6), rand(6), rand(6), idx], key[1], key[2], key[0]))


def test_gradcheck_float64():
    y0, x = rand(12), rand(12)
    assert torch.autograd.gradcheck(lambda u, v: FMA(u, v, a=0.7), (y0, x))
    img, out0 = rand(5, 6), rand(5, 6)
    assert torch.autograd.gradcheck(lambda o, m: STENCIL(o, m, w=0.3, scale=2.0), (out0, img))
    a, b = rand(9), rand(9)
    z = torch.zeros(9, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda u, v: TWO(z, z, u, v, n=2), (a, b))


def test_gradients_match_tk_autodiff_and_skip_int_arrays():
    x = rand(10)
    idx = torch.tensor([3, 3, 0, 9, 1, 1, 1, 2, 5, 5])
    seed = rand(10, grad=False)
    y = GATHER(torch.zeros(10, dtype=torch.float64), x, idx)
    y.backward(seed)
    # the same kernel launched directly, differentiated by tk.autodiff
    xn, dx = x.detach().numpy().copy(), np.zeros(10)
    tk.autodiff(tk.Reverse, lambda y_, x_, i_: gather(tk.CPU())(y_, x_, i_, ndrange=10),
                tk.Duplicated(np.zeros(10), seed.numpy().copy()), tk.Duplicated(xn, dx), tk.Const(idx.numpy()))
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-12)
    assert idx.grad is None


def test_torch_compile_fullgraph_model_with_two_kernels():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8, dtype=torch.float64)

        def forward(self, x):
            h = self.lin(x).reshape(2, 4, 8)[0]
            h = STENCIL(torch.zeros_like(h), h, w=0.0, scale=1.5)
            return FMA(h.reshape(-1), torch.tanh(h.reshape(-1)), a=0.25).sum()

    torch.manual_seed(0)
    model = Model()
    x = torch.randn(8, 8, dtype=torch.float64)
    eager = model(x)
    eager.backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = compiled(x)
    out.backward()
    torch.testing.assert_close(out, eager)
    for p, g in zip(model.parameters(), ref):
        torch.testing.assert_close(p.grad, g)


def test_refusals():
    y, x = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    with pytest.raises(LaunchError, match=r"writes \['x'\].*not among outputs"):
        BAD(y, x)
    assert torch.equal(x, torch.ones(4, dtype=torch.float64))
    with pytest.raises(LaunchError, match="expected 2 array argument"):
        FMA(y, a=1.0)
    # a forgotten scalar: the message says scalars go by keyword (it looked like a missing array)
    with pytest.raises(LaunchError, match=r"expected 3 array argument.*by keyword \(a=\.\.\.\)"):
        FMA(y, x)
    # not a tensor: a LaunchError naming the parameter (was torch's schema error about 'arrays')
    for bad in ([0.0] * 4, np.zeros(4)):
        with pytest.raises(LaunchError, match=r"argument 'y' must be a torch.Tensor.*got (list|ndarray)"):
            FMA(bad, x, a=1.0)
    with pytest.raises(LaunchError, match="unknown keyword argument 'b'"):
        FMA(y, x, a=1.0, b=2.0)
    with pytest.raises(LaunchError, match="must be a Python scalar"):
        FMA(y, x, a=torch.tensor(1.0))
    with pytest.raises(LaunchError, match="output 'q' is not one of its parameters"):
        tktorch.torch_op(fma_update, outputs=["q"], name="tktest::nope")
    with pytest.raises(LaunchError, match="annotated tk.Const"):
        tktorch.torch_op(fma_update, outputs=["x"], name="tktest::nope")
    with pytest.raises(ValueError, match="namespace::opname"):
        tktorch.torch_op(fma_update, outputs=["y"], name="no_namespace")
    with pytest.raises(ValueError, match="already registered"):
        tktorch.torch_op(fma_update, outputs=["y"], name="tktest::fma_update")
    with pytest.raises(LaunchError, match="is on meta"):
        FMA(y, torch.ones(4, dtype=torch.float64, device="meta"), a=1.0)
    # a sparse tensor (its stride() looks like an expanded dense one's): the dispatcher refuses it
    for _ in range(2):
        FMA(y, torch.ones(1, dtype=torch.float64).expand(4), a=1.0)
    with pytest.raises(NotImplementedError, match="SparseCPU"):
        FMA(y, x.to_sparse(), a=1.0)


@tk.kernel
def shifted(y, x: tk.Const):
    i = tk.index()
    y[i] = x[i + 2]


SHIFT = tktorch.torch_op(shifted, outputs=["y"], name="tktest::shifted")


def test_fast_path_keeps_the_launch_checks():
    """The eager hot path (a cached, already-checked plan, one launcher call) still refuses a
    launch whose shapes make an access certainly out of bounds, as a direct launch does."""
    x = torch.arange(10, dtype=torch.float64)
    for _ in range(3):                            # the second and third calls take the hot path
        torch.testing.assert_close(SHIFT(torch.zeros(8, dtype=torch.float64), x), x[2:])
    with pytest.raises(LaunchError, match="out of bounds"):
        SHIFT(torch.zeros(9, dtype=torch.float64), x)
    y32 = SHIFT(torch.zeros(5, dtype=torch.float32), x.float())   # a second signature
    torch.testing.assert_close(y32, x[2:7].float())
    with pytest.raises(LaunchError, match=r"writes \['x'\].*not among outputs"):
        for _ in range(2):                        # also once the op has a fast plan elsewhere
            BAD(torch.zeros(4, dtype=torch.float32), torch.ones(4, dtype=torch.float32))


def test_direct_and_dispatcher_routes_agree():
    """An eager call without autograd runs the CPU implementation directly; under the
    profiler, a dispatch mode (FakeTensorMode) or with gradients it goes through the
    dispatcher; all give the same result and the profiler sees the operator (the generic
    ``ns::op_kernel`` that the wrapper calls; ``ns::op`` is its composite with the kernel's schema)."""
    y0, x = rand(30, grad=False), rand(30, grad=False)
    want = y0 * x + 0.5 * x
    torch.testing.assert_close(FMA(y0, x, a=0.5), want)
    with torch.profiler.profile() as prof:
        torch.testing.assert_close(FMA(y0, x, a=0.5), want)
    assert any(e.name == "tktest::fma_update_kernel" for e in prof.events())
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fy = FMA(mode.from_tensor(y0), mode.from_tensor(x), a=0.5)
        assert fy.shape == (30,) and fy.dtype == torch.float64
    xg = x.clone().requires_grad_(True)
    torch.testing.assert_close(FMA(y0, xg, a=0.5), want)


def test_double_backward_is_a_clear_error():
    y0, x = rand(8), rand(8)
    y = FMA(y0, x, a=0.5)
    (gx,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    torch.testing.assert_close(gx, 2 * y.detach() * (y0.detach() + 0.5))
    with pytest.raises(LaunchError, match="double backward"):
        gx.sum().backward()


def _llm_swiglu_op():
    from tinykernels.llm import elementwise as E    # the kernel behind tinykernels.llm.swiglu
    op = tktorch._LIBS.get("tktest::llm_swiglu") or tktorch.torch_op(E._binary, outputs=["out"],
                                                                     name="tktest::llm_swiglu")

    def swiglu(a, b):
        return op(torch.empty_like(a), a, b, sa=1.0, sb=1.0, op=E.SWIGLU, a_last1=False, b_last1=False,
                  b_scalar=False, scaled=False, poly=False, ndrange=(1, a.shape[0], a.shape[1]))
    return swiglu


def test_torch_compile_fullgraph_with_an_llm_kernel():
    """A small gated-MLP model: tinykernels.llm's SwiGLU kernel and a second kernel, both as
    operators, compiled with fullgraph=True; values and parameter gradients match the same
    model written with PyTorch operations."""
    swiglu = _llm_swiglu_op()

    class Model(torch.nn.Module):
        def __init__(self, tk_ops: bool):
            super().__init__()
            torch.manual_seed(1)
            self.w1 = torch.nn.Linear(6, 10, dtype=torch.float64)
            self.w3 = torch.nn.Linear(6, 10, dtype=torch.float64)
            self.tk_ops = tk_ops

        def forward(self, x):
            a, b = self.w1(x), self.w3(x)
            if self.tk_ops:
                h = swiglu(a, b)
                h = FMA(h.reshape(-1), torch.cos(h.reshape(-1)), a=0.5)
            else:
                h = a * torch.sigmoid(a) * b
                h = (h * torch.cos(h) + 0.5 * torch.cos(h)).reshape(-1)
            return (h * h).sum()

    x = torch.randn(5, 6, dtype=torch.float64, generator=G)
    ref = Model(False)
    want = ref(x)
    want.backward()
    model = Model(True)
    torch.testing.assert_close(swiglu(x, x), x * torch.sigmoid(x) * x)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = compiled(x)
    out.backward()
    torch.testing.assert_close(out, want)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert torch.autograd.gradcheck(swiglu, (rand(3, 4), rand(3, 4)))


def _kept_templates() -> bool:
    """Whether the launcher keeps launch templates (the C extension; not the ctypes fallback)."""
    from tinykernels.runtime import launcher
    return launcher.get().template(0, (), 1) is not None


def _raw_entries(op):
    return [e for p in op._plans.values() for e in p.raw.values()]


def test_eager_kept_launch_patches_pointers_and_scalars():
    """Repeated eager calls with the same tensor metadata launch from a kept template with
    each call's data pointers and scalars (int, float, bool) patched in: every call's values
    match NumPy, the inputs are unchanged, and the fully overwritten output and the
    read-modify-write output both come out right."""
    rng = np.random.default_rng(3)
    for it in range(6):
        x = torch.from_numpy(rng.standard_normal(40))
        idx = torch.from_numpy(rng.integers(0, 40, 40).astype(np.int32))
        out0, acc0 = torch.full((40,), float("nan"), dtype=torch.float64), torch.from_numpy(rng.standard_normal(40))
        keep = acc0.clone()
        a, n, flag = 0.5 * it - 1.0, it - 2, bool(it % 2)
        out, acc = PATCHED(out0, acc0, x, idx, a=a, n=n, flag=flag, scale=3.0)
        xn = x.numpy()
        np.testing.assert_allclose(out.numpy(), a * xn + n, rtol=1e-13)
        v = xn[idx.numpy()] * 3.0
        np.testing.assert_allclose(acc.numpy(), keep.numpy() + (v if flag else -v), rtol=1e-13)
        torch.testing.assert_close(acc0, keep)
        assert out.data_ptr() not in (out0.data_ptr(), acc0.data_ptr())
    if _kept_templates():
        assert any(isinstance(e, tktorch._Raw) for e in _raw_entries(PATCHED))
    # the dispatcher route gives the same values
    key = PATCHED._key({"a": 1.5, "n": 2, "flag": True, "scale": 3.0}, None, None)[0]
    d_out, d_acc = PATCHED._op([out0, acc0, x, idx], [1.5], [2, 1], key)
    e_out, e_acc = PATCHED(out0, acc0, x, idx, a=1.5, n=2, flag=True, scale=3.0)
    torch.testing.assert_close((e_out, e_acc), (d_out, d_acc))


def test_eager_call_pattern_memo_follows_values_and_kinds():
    """The eager key memo keys on keyword names, ndrange and workgroup size: a changed
    constexpr value, a scalar of another kind and a NumPy scalar each get their own key."""
    img, out0 = rand(6, 7, grad=False), rand(6, 7, grad=False)
    left = torch.nn.functional.pad(img, (1, 0))[:, :-1]
    for scale in (2.0, 3.0, 2.0):
        out = STENCIL(out0, img, w=0.5, scale=scale)
        torch.testing.assert_close(out, scale * torch.sin(img) * left + 0.5 * out0)
    y0, x = rand(10, grad=False), rand(10, grad=False)
    for a in (2.0, 3, np.float32(0.25), 2.0, 3):
        torch.testing.assert_close(FMA(y0, x, a=a), y0 * x + float(a) * x)
    # ndrange values equal to a remembered one but of another type are still checked
    for nd in (8, [8], (8,), 8, (8,)):
        torch.testing.assert_close(FMA(y0, x, a=1.0, ndrange=nd)[:8], (y0 * x + x)[:8])
    for bad in (8.0, True, (8.0,)):
        with pytest.raises(LaunchError, match="ndrange"):
            FMA(y0, x, a=1.0, ndrange=bad)


def test_eager_kept_launch_layouts():
    """Non-contiguous inputs (transposed, strided), a non-contiguous initial value (the
    checked path), and a lazily negated view (.imag of a conjugate: materialized) all
    give the right values, also on repeated calls."""
    for _ in range(3):
        img, out0 = rand(7, 6, grad=False).t(), rand(6, 7, grad=False)
        left = torch.nn.functional.pad(img, (1, 0))[:, :-1]
        torch.testing.assert_close(STENCIL(out0, img, w=0.5, scale=2.0), 2.0 * torch.sin(img) * left + 0.5 * out0)
        out0t = rand(7, 6, grad=False).t()
        torch.testing.assert_close(STENCIL(out0t, img, w=0.5, scale=2.0),
                                   2.0 * torch.sin(img) * left + 0.5 * out0t)
        y0, x = rand(20, grad=False), rand(40, grad=False)[::2]
        torch.testing.assert_close(FMA(y0, x, a=1.5), y0 * x + 1.5 * x)
    c = torch.randn(20, dtype=torch.complex128, generator=G)
    xn = c.conj().imag                             # is_neg(): values are -c.imag
    assert xn.is_neg()
    y0 = rand(20, grad=False)
    for _ in range(2):
        torch.testing.assert_close(FMA(y0, xn, a=1.5), y0 * (-c.imag) + 1.5 * (-c.imag))
        torch.testing.assert_close(FMA(y0, -c.imag, a=1.5), y0 * (-c.imag) + 1.5 * (-c.imag))


def test_eager_kept_launch_refuses_misaligned_pointers():
    """A tensor whose data pointer is not a multiple of its element size has the same
    metadata as an aligned one; the kept launch refuses it and the checked path decides
    (same values as the aligned tensor, or a clear LaunchError)."""
    x = torch.arange(16, dtype=torch.float32)
    y0 = torch.zeros(16, dtype=torch.float32)
    for _ in range(2):
        torch.testing.assert_close(FMA(y0, x, a=2.0), 2.0 * x)
    buf = bytearray(4 * 17)
    xm = torch.frombuffer(buf, dtype=torch.float32, offset=1, count=16)
    xm.copy_(x)
    assert xm.data_ptr() % 4 and xm.stride() == x.stride()
    try:
        got = FMA(y0, xm, a=2.0)
    except LaunchError as e:
        assert "fma_update" in str(e)
    else:
        torch.testing.assert_close(got, 2.0 * x)


def test_launcher_raw_refuses_bad_values():
    """The launcher's kept-template launch (runtime/_launch.c raw()) launches only with
    values of the recorded kinds, aligned pointers and disjoint checked pairs."""
    from tinykernels.runtime import launcher
    L = launcher.get()
    if not _kept_templates():
        pytest.skip("the ctypes launcher has no kept templates")
    y0, x = torch.zeros(8, dtype=torch.float64), torch.ones(8, dtype=torch.float64)
    FMA(y0, x, a=1.0)
    FMA(y0, x, a=1.0)
    p = FMA._plans[(FMA._key({"a": 1.0}, None, None)[0], 2)]
    e = p.raw[tuple((t.shape, t.stride(), t.dtype) for t in (y0, x))]
    assert isinstance(e, tktorch._Raw)
    y, x = torch.ones(8, dtype=torch.float64), torch.full((8,), 2.0, dtype=torch.float64)
    assert L.raw(e.words, 1, (y.data_ptr(), x.data_ptr(), 3.0)) is True
    torch.testing.assert_close(y, torch.full((8,), 2.0 + 6.0, dtype=torch.float64))
    assert L.raw(e.words, 1, (y.data_ptr() + 1, x.data_ptr(), 3.0)) is False       # misaligned
    assert L.raw(e.words, 1, (y.data_ptr(), x.data_ptr(), 3)) is False             # not a float
    assert L.raw(e.words, 1, (y.data_ptr(), x.data_ptr())) is False                # too few values
    assert L.raw(e.words[:24], 1, (y.data_ptr(), x.data_ptr(), 3.0)) is False      # truncated entry
    torch.testing.assert_close(y, torch.full((8,), 8.0, dtype=torch.float64))     # none of them ran


def test_torch_compile_fullgraph_default_backend_with_an_llm_kernel():
    """torch.compile's default backend (Inductor, which generates C++ around the operators)
    with fullgraph=True: tinykernels.llm's SwiGLU kernel and a second kernel in one model;
    value and parameter gradient match eager mode."""
    import shutil
    if not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("Inductor's CPU code generation needs a C++ compiler")
    swiglu = _llm_swiglu_op()
    torch.manual_seed(2)
    lin = torch.nn.Linear(6, 10, dtype=torch.float64)

    def model(x):
        a = lin(x)
        h = swiglu(a, a.flip(1))
        h = FMA(h.reshape(-1), torch.cos(h.reshape(-1)), a=0.5)
        return (h * h).sum()

    x = torch.randn(5, 6, dtype=torch.float64, generator=G)
    want = model(x)
    want.backward()
    grad = lin.weight.grad.clone()
    lin.zero_grad()
    torch._dynamo.reset()
    out = torch.compile(model, fullgraph=True)(x)
    out.backward()
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(lin.weight.grad, grad)


def test_eager_kept_launch_large_outputs():
    """Outputs of 1 MiB or more (fresh, huge-page advised tensors; the initial value copied in
    only when the kernel reads it) on the kept-launch route: right values on every call."""
    n = 1 << 18                                    # 2 MiB of float64
    rng = np.random.default_rng(8)
    for _ in range(3):
        x = torch.from_numpy(rng.standard_normal(n))
        idx = torch.from_numpy(rng.integers(0, n, n).astype(np.int32))
        acc0 = torch.from_numpy(rng.standard_normal(n))
        out, acc = PATCHED(torch.zeros(n, dtype=torch.float64), acc0, x, idx, a=2.0, n=1, flag=True, scale=0.5)
        np.testing.assert_allclose(out.numpy(), 2.0 * x.numpy() + 1, rtol=1e-13)
        np.testing.assert_allclose(acc.numpy(), acc0.numpy() + 0.5 * x.numpy()[idx.numpy()], rtol=1e-13)
        y = FMA(acc0, x, a=0.5)
        np.testing.assert_allclose(y.numpy(), acc0.numpy() * x.numpy() + 0.5 * x.numpy(), rtol=1e-13)
    if _kept_templates():
        assert any(isinstance(e, tktorch._Raw) and tktorch._LARGE_OUT in dict(e.alloc).values()
                   for e in _raw_entries(PATCHED))


def test_vmap_runs_the_operator_per_batch_element():
    """torch.vmap of an operator (it raised 'Batching rule not implemented ... could not
    generate a fallback': the Tensor[] schema has no automatic fallback): each batch element
    is one call, outputs stacked; in_dims/out_dims, unbatched arguments, nested vmap, two
    outputs, an empty batch and vmap under torch.compile(fullgraph=True)."""
    Y, X = rand(3, 5, grad=False), rand(3, 5, grad=False)
    ref = Y * X + 2 * X
    torch.testing.assert_close(torch.vmap(lambda a, b: FMA(a, b, a=2.0))(Y, X), ref)
    torch.testing.assert_close(torch.vmap(lambda a, b: FMA(a, b, a=2.0), in_dims=(None, 0))(Y[0], X),
                               Y[0] * X + 2 * X)
    torch.testing.assert_close(torch.vmap(lambda a, b: FMA(a, b, a=2.0), in_dims=(1, 1), out_dims=1)(Y.T, X.T),
                               ref.T)
    Y4, X4 = rand(2, 3, 5, grad=False), rand(2, 3, 5, grad=False)
    torch.testing.assert_close(torch.vmap(torch.vmap(lambda a, b: FMA(a, b, a=2.0)))(Y4, X4), Y4 * X4 + 2 * X4)
    z = torch.zeros(5, dtype=torch.float64)
    s, d = torch.vmap(lambda a, b: TWO(z, z, a, b, n=3))(Y, X)
    torch.testing.assert_close(s, Y + 3 * X)
    torch.testing.assert_close(d, Y * X - 0.5 * (Y + 3 * X))
    img = rand(2, 4, 5, grad=False)
    got = torch.vmap(lambda o, i: STENCIL(o, i, w=0.5, scale=2.0))(torch.zeros_like(img), img)
    for k in range(2):
        torch.testing.assert_close(got[k], STENCIL(torch.zeros(4, 5, dtype=torch.float64), img[k], w=0.5, scale=2.0))
    assert torch.vmap(lambda a, b: FMA(a, b, a=2.0))(torch.zeros(0, 5), torch.zeros(0, 5)).shape == (0, 5)
    torch._dynamo.reset()
    f = torch.compile(torch.vmap(lambda a, b: FMA(a, b, a=2.0)), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(Y, X), ref)


INTERIOR = tktorch.torch_op(interior, outputs=["out"], name="tktest::interior")


RANGE_CASES = {"offset": (range(1, 8), range(1, 6)), "stepped": (range(1, 8, 3), range(2, 6, 2)),
               "negative-step": (range(7, 0, -2), range(1, 6))}


@pytest.mark.parametrize("case", list(RANGE_CASES))
def test_range_ndrange_like_a_direct_launch(case):
    """SPEC 2: an ndrange dimension may be a Python range: eager, opcheck, torch.compile
    (fullgraph) and autograd, bit for bit against a direct CPU launch and NumPy, gradients by
    gradcheck (float64 finite differences), also through the compiled function."""
    nd = RANGE_CASES[case]
    u, out0 = rand(9, 7), rand(9, 7)
    direct = out0.detach().numpy().copy()
    interior(tk.CPU())(direct, u.detach().numpy(), 0.3, ndrange=nd)
    rows = nd[0] if nd[0].step > 0 else range(nd[0][-1], nd[0].start + 1, -nd[0].step)
    np.testing.assert_array_equal(direct, interior_numpy(out0.detach().numpy(), u.detach().numpy(), 0.3,
                                                         rows, nd[1]))
    np.testing.assert_array_equal(INTERIOR(out0, u, a=0.3, ndrange=nd).detach().numpy(), direct)
    np.testing.assert_array_equal(INTERIOR(out0.detach(), u.detach(), a=0.3, ndrange=nd).numpy(), direct)
    key = INTERIOR._key({"a": 0.3}, nd, None)
    torch.library.opcheck(INTERIOR._op, ([out0, u], key[1], key[2], key[0]))
    assert torch.autograd.gradcheck(lambda o, v: INTERIOR(o, v, a=0.3, ndrange=nd), (out0, u))
    fixed = tktorch.torch_op(interior, outputs=["out"], name="tktest::interior_" + case.replace("-", "_"),
                               ndrange=nd)
    np.testing.assert_array_equal(fixed(out0.detach(), u.detach(), a=0.3).numpy(), direct)
    torch._dynamo.reset()
    compiled = torch.compile(lambda o, v: INTERIOR(o, v, a=0.3, ndrange=nd), fullgraph=True, backend="aot_eager")
    r = compiled(out0, u)
    np.testing.assert_array_equal(r.detach().numpy(), direct)
    w = rand(9, 7, grad=False)
    gu, = torch.autograd.grad((w * r).sum(), u)
    want, = torch.autograd.grad((w * INTERIOR(out0, u, a=0.3, ndrange=nd)).sum(), u)
    assert gu.abs().max() > 0
    torch.testing.assert_close(gu, want, rtol=0, atol=0)


def test_range_ndrange_refusals_name_ndrange():
    y0, x = rand(8, grad=False), rand(8, grad=False)
    for bad in ((range(0, 4), 2.0), [range(3), True], "range(3)", (range(1), 1, 1, 1)):
        with pytest.raises(LaunchError, match="ndrange"):
            FMA(y0, x, a=1.0, ndrange=bad)


def test_range_ndrange_large_output_keeps_the_points_outside():
    """An output of at least 1 MiB may get a fresh buffer when the kernel overwrites it
    (see "Large outputs" in docs/torch.md): over a range ndrange it is copied, so the points
    outside the index space keep their initial values."""
    u, out0 = rand(400, 380, grad=False), rand(400, 380, grad=False)
    nd = (range(1, 399, 2), range(1, 379))
    direct = out0.numpy().copy()
    interior(tk.CPU())(direct, u.numpy(), 0.3, ndrange=nd)
    for _ in range(2):          # the second call takes the kept launch
        np.testing.assert_array_equal(INTERIOR(out0, u, a=0.3, ndrange=nd).numpy(), direct)
