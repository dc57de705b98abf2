"""SPEC 5-7 and 11 across features (audit17a), checked with the frameworks' own tools for their
extension points: torch's forward-mode AD (``torch.autograd.forward_ad``, ``gradcheck(...,
check_forward_ad=True)``) and ``torch.func`` transforms over ``torch_op``; every derivative
against float64 central finite differences. Before audit17a a forward-mode tangent through a
``torch_op`` was silently zero (or missing) and ``torch.func.grad``/``jacrev`` were refused."""
import math

import pytest

torch = pytest.importorskip("torch")

import tinykernels as tk  # noqa: E402
from tinykernels.torch import torch_op  # noqa: E402

F64 = torch.float64


@tk.kernel
def mix(s, d, a: tk.Const, b: tk.Const, n):
    """two outputs, one read before it is written"""
    i = tk.index()
    s[i] = s[i] * math.sin(a[i]) + b[i] * n
    d[i] = a[i] * b[i] - s[i] * 0.5


@tk.kernel
def gather_sq(y, x: tk.Const, idx: tk.Const):
    i = tk.index()
    y[i] = y[i] + x[idx[i]] * x[idx[i]]


MIX = torch_op(mix, outputs=["s", "d"], name="ported17::mix")
GATHER = torch_op(gather_sq, outputs=["y"], name="ported17::gather_sq")
IDX = torch.tensor([0, 0, 3, 1, 4], dtype=torch.int32)


def mix_ref(s, a, b, n):
    s2 = s * torch.sin(a) + b * n
    return s2, a * b - s2 * 0.5


def central_jvp(f, xs, vs, h=1e-6):
    """(f(x + h v) - f(x - h v)) / 2h for each output, in float64"""
    plus = f(*[x + h * v for x, v in zip(xs, vs)])
    minus = f(*[x - h * v for x, v in zip(xs, vs)])
    return [(p - m) / (2 * h) for p, m in zip(plus, minus)]


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(5, dtype=F64, generator=g) for _ in range(3)]


def test_forward_ad_dual_tensors_give_the_tangent_kernels_tangents():
    """torch.autograd.forward_ad through the operator: it was a missing tangent before"""
    import torch.autograd.forward_ad as fwAD
    s, a, b = _inputs()
    vs = _inputs(1)
    want = central_jvp(lambda s_, a_, b_: MIX(s_, torch.zeros(5, dtype=F64), a_, b_, n=1.5), (s, a, b), vs)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, v) for x, v in zip((s, a, b), vs)]
        outs = MIX(duals[0], torch.zeros(5, dtype=F64), duals[1], duals[2], n=1.5)
        tans = [fwAD.unpack_dual(o).tangent for o in outs]
        # a tangent only on b: the others held constant
        only_b = fwAD.unpack_dual(MIX(s, torch.zeros(5, dtype=F64), a, fwAD.make_dual(b, vs[2]), n=1.5)[0]).tangent
    for t, w in zip(tans, want):
        torch.testing.assert_close(t, w, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(only_b, vs[2] * 1.5)


def test_gradcheck_with_forward_ad_and_only_some_inputs_requiring_grad():
    s, a, b = (t.requires_grad_() for t in _inputs())
    d0 = torch.zeros(5, dtype=F64)
    assert torch.autograd.gradcheck(lambda s_, a_, b_: MIX(s_, d0, a_, b_, n=2), (s, a, b), check_forward_ad=True)
    assert torch.autograd.gradcheck(lambda a_: MIX(s.detach(), d0, a_, b.detach(), n=2), (a,), check_forward_ad=True)
    y0 = torch.rand(5, dtype=F64, requires_grad=True)
    x = torch.rand(5, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda y_, x_: GATHER(y_, x_, IDX), (y0, x), check_forward_ad=True)


def test_torch_func_transforms_match_finite_differences():
    """torch.func.jvp / jacfwd (tangent kernel), grad / vjp / jacrev and vmap of grad (adjoint
    kernel): grad and jacrev were refused, jvp and jacfwd silently zero before audit17a"""
    s, a, b = _inputs()
    d0 = torch.zeros(5, dtype=F64)

    def f(a_):
        return MIX(s, d0, a_, b, n=0.5)[1]
    jac_fd = torch.stack([central_jvp(lambda a_: [f(a_)], (a,), (e,))[0] for e in torch.eye(5, dtype=F64)], 1)
    want = torch.func.jacrev(lambda a_: mix_ref(s, a_, b, 0.5)[1])(a)
    torch.testing.assert_close(jac_fd, want, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(torch.func.jacrev(f)(a), want)
    torch.testing.assert_close(torch.func.jacfwd(f)(a), want)
    v = torch.linspace(-1, 1, 5, dtype=F64)
    torch.testing.assert_close(torch.func.jvp(f, (a,), (v,))[1], want @ v)
    torch.testing.assert_close(torch.func.vjp(f, a)[1](v)[0], v @ want)
    torch.testing.assert_close(torch.func.grad(lambda a_: f(a_).sum())(a), want.sum(0))
    batch = torch.rand(3, 5, dtype=F64)
    torch.testing.assert_close(torch.func.vmap(torch.func.grad(lambda a_: f(a_).sum()))(batch),
                               torch.stack([torch.func.jacrev(lambda a_: mix_ref(s, a_, b, 0.5)[1])(r).sum(0)
                                            for r in batch]))
    # an int array among the inputs; gradients reach the float ones only
    x = torch.rand(5, dtype=F64)
    g = torch.func.grad(lambda x_: GATHER(torch.zeros(5, dtype=F64), x_, IDX).sum())(x)
    torch.testing.assert_close(g, torch.tensor([4.0, 2.0, 0.0, 2.0, 2.0], dtype=F64) * x)


@pytest.mark.parametrize("how", ["grad of grad", "hessian", "jacfwd of jacrev", "jacfwd of jacfwd",
                                 "jacrev of jacfwd", "autograd hessian"])
def test_second_order_through_torch_func_is_refused_by_name(how):
    """the derivatives are tinykernels' adjoint and tangent kernels, which have no derivatives:
    a clear error, not the zeros jacrev of jacfwd gave before"""
    s, a, b = _inputs()
    d0 = torch.zeros(5, dtype=F64)

    def f(a_):
        return MIX(s, d0, a_ * a_, b, n=0.5)[1].sum()
    fn = {"grad of grad": lambda: torch.func.grad(lambda u: torch.func.grad(f)(u).sum())(a),
          "hessian": lambda: torch.func.hessian(f)(a),
          "jacfwd of jacrev": lambda: torch.func.jacfwd(torch.func.jacrev(f))(a),
          "jacfwd of jacfwd": lambda: torch.func.jacfwd(torch.func.jacfwd(f))(a),
          "jacrev of jacfwd": lambda: torch.func.jacrev(torch.func.jacfwd(f))(a),
          "autograd hessian": lambda: torch.autograd.functional.hessian(f, a)}[how]
    with pytest.raises(tk.LaunchError, match="op ported17::mix: double backward .* not supported"):
        fn()


def test_torch_func_differentiation_under_torch_compile_is_an_error_not_a_zero():
    """torch.func.jvp compiled: a silently zero tangent before; now an error naming the route"""
    s, a, b = _inputs()
    d0 = torch.zeros(5, dtype=F64)
    ones = torch.ones(5, dtype=F64)
    f = torch.compile(lambda a_: torch.func.jvp(lambda u: MIX(s, d0, u, b, n=0.5)[1], (a_,), (ones,))[1],
                      fullgraph=True)
    with pytest.raises(Exception, match="torch.func transforms that differentiate"):
        f(a)
    # plain vmap under torch.compile still traces the operator's vmap rule
    g = torch.compile(torch.func.vmap(lambda u: MIX(s, d0, u, b, n=0.5)[1]), fullgraph=True)
    batch = torch.rand(2, 5, dtype=F64)
    torch.testing.assert_close(g(batch), torch.stack([mix_ref(s, r, b, 0.5)[1] for r in batch]))


@tk.kernel
def fma_update(y, x: tk.Const, a):
    i = tk.index()
    y[i] = y[i] * x[i] + a * x[i]


FMA = torch_op(fma_update, outputs=["y"], name="ported17::fma")


@pytest.mark.parametrize("how", ["dynamic=True", "automatic", "mark_dynamic"])
def test_torch_compile_dynamic_shapes_with_an_ndrange_from_a_shape(how):
    """an ndrange computed from a tensor's shape is a SymInt under dynamic shapes (also after
    torch.compile's automatic recompile on a new shape): it was Dynamo's 'repr_impl not
    implemented' from the operator's key; the explicit ndrange specializes (recompiles per
    value), the default one (the output's shape) stays dynamic"""
    torch._dynamo.reset()        # (the lambdas' code objects are shared between the parameters)
    kw = {"dynamic": True} if how == "dynamic=True" else {}
    f = torch.compile(lambda y, x: FMA(y, x, a=0.5, ndrange=y.shape[0] - 1), fullgraph=True, **kw)
    g = torch.compile(lambda y, x: FMA(y, x, a=0.5).sum(), fullgraph=True, **kw)
    for n in (4, 9, 17):
        y, x = torch.rand(n, dtype=F64), torch.rand(n, dtype=F64, requires_grad=True)
        if how == "mark_dynamic":    # (mark_dynamic: the ndrange's specialization violates it, as torch says)
            torch._dynamo.maybe_mark_dynamic(y, 0)
            torch._dynamo.maybe_mark_dynamic(x, 0)
        want = y.clone()
        want[:-1] = y[:-1] * x.detach()[:-1] + 0.5 * x.detach()[:-1]
        torch.testing.assert_close(f(y, x), want)
        g(y, x).backward()
        torch.testing.assert_close(x.grad, y + 0.5)
    if how == "mark_dynamic":
        y, x = torch.rand(6, dtype=F64), torch.rand(6, dtype=F64)
        torch._dynamo.mark_dynamic(y, 0)
        torch._dynamo.mark_dynamic(x, 0)
        torch.testing.assert_close(torch.compile(lambda y_, x_: FMA(y_, x_, a=0.5), fullgraph=True)(y, x),
                                   y * x + 0.5 * x)


def test_opcheck_on_the_derivative_operators():
    """torch.library.opcheck on ns::op_backward and ns::op_jvp (schema, fake tensors, autograd
    registration, AOT dispatch), with missing tangents among the inputs"""
    s, a, b = _inputs()
    arrays = [s, torch.zeros(5, dtype=F64), a, b]
    key, floats, ints = MIX._key({"n": 2.0}, None, None)
    for args in ((arrays, [None, None, torch.ones(5, dtype=F64), None], floats, ints, key),
                 (arrays, [torch.ones(5, dtype=F64), None, torch.rand(5, dtype=F64), torch.rand(5, dtype=F64)],
                  floats, ints, key)):
        res = torch.library.opcheck(MIX._op_jvp, args)
        assert all(v == "SUCCESS" for v in res.values()), res
    grads = [torch.ones(5, dtype=F64), torch.ones(5, dtype=F64)]
    res = torch.library.opcheck(MIX._op_bwd, (arrays, grads, floats, ints, key))
    assert all(v == "SUCCESS" for v in res.values()), res


def test_the_operator_twice_in_one_graph_and_no_grad_modes():
    """gradients of two calls in one graph (retain_graph accumulates), and no recording under
    torch.no_grad / torch.inference_mode"""
    x = torch.rand(6, dtype=F64, requires_grad=True)
    out = FMA(FMA(torch.ones(6, dtype=F64), x, a=1.0), x, a=0.5)       # 2 x^2 + x / 2
    out.sum().backward(retain_graph=True)
    torch.testing.assert_close(x.grad, 4 * x.detach() + 0.5)
    out.sum().backward()
    torch.testing.assert_close(x.grad, 2 * (4 * x.detach() + 0.5))
    with torch.no_grad():
        r = FMA(torch.ones(6, dtype=F64), x, a=1.0)
    assert r.grad_fn is None and not r.requires_grad
    with torch.inference_mode():
        r = FMA(torch.ones(6, dtype=F64), x, a=1.0)
    assert r.is_inference()
    torch.testing.assert_close(r, 2 * x.detach())
