"""A ``jax.vmap`` rule for JAX's ``linear_call`` primitive (JAX 0.10 has none).

``jax_kernel(..., autodiff="jvp")`` pairs the tangent kernel with its transpose, the
adjoint kernel, in a ``jax.custom_derivatives.linear_call``. JAX defines that primitive's
JVP and transpose but no batching rule, so ``jax.vmap`` of a derivative (``vmap(grad)``,
``jax.jacfwd``, which is a ``vmap`` of ``jvp``, ``jax.jacrev``) failed with "Batching rule
for 'linear_call' not implemented". The rule here batches the callee and, lazily, the
transpose along a leading axis, every operand broadcast to the batch (an unbatched linear
operand would otherwise get a batched cotangent); batching keeps the callee linear in its
linear operands and the batched transpose is the transpose of the batched callee, element
by element. It is registered only where JAX has no rule of its own, and only when JAX's
internals have the expected shape (else the documented limitation stays).
"""
from __future__ import annotations

import functools


def _rule(axis_data, args, dims, *, callee, transpose_thunk, num_callee_consts, num_res):
    from jax._src.custom_derivatives import linear_call_p
    from jax._src.interpreters import batching
    args = [batching.bdim_at_front(a, d, axis_data.size) for a, d in zip(args, dims)]
    batched, _ = batching.batch_jaxpr(callee, axis_data, [True] * len(args), True)

    @functools.cache
    def batched_transpose():
        t, t_consts = transpose_thunk()
        n = len(t_consts)
        tb, _ = batching.batch_jaxpr(t, axis_data, [False] * n + [True] * (len(t.in_avals) - n), True)
        return tb, t_consts

    outs = linear_call_p.bind(*args, callee=batched, transpose_thunk=batched_transpose,
                              num_callee_consts=num_callee_consts, num_res=num_res)
    return outs, [0] * len(outs)


def register() -> bool:
    """Register the rule unless JAX has one; whether ``linear_call`` can now be batched."""
    try:
        from jax._src.custom_derivatives import linear_call_p
        from jax._src.interpreters import batching
        table = batching.fancy_primitive_batchers
        _ = batching.bdim_at_front, batching.batch_jaxpr
    except (ImportError, AttributeError):
        return False
    table.setdefault(linear_call_p, _rule)
    return True
