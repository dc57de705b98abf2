"""The calling convention shared by :mod:`tinykernels.jax` and :mod:`tinykernels.torch`
(SPEC section 11), independent of either framework.

A kernel is called with its array arguments positionally, in the kernel's parameter order
(the outputs' initial values among them), and its scalars and constexprs by keyword; the
result is the outputs' new values. :func:`bind` splits one call into a :class:`Binding`
(everything static: which parameter is what, constexpr values, the ndrange) and the runtime
scalar values, so that a framework can key its compiled objects on the static part.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import LaunchError
from .kernel import Kernel


@dataclass(frozen=True)
class Binding:
    """How one call maps onto a kernel's parameters (hashable; no runtime values).

    ``kinds[p]`` for parameter ``p``: ``"A"`` an array (the ``slots[p]``-th positional
    argument), ``"f"``/``"i"``/``"b"`` a float/int/bool scalar (the ``slots[p]``-th value of
    its kind), ``"c"`` a constexpr (value in ``consts``)."""
    kernel_name: str
    names: tuple
    kinds: tuple
    slots: tuple
    outputs: tuple            # positional indices of the outputs, in the order given
    consts: tuple             # (name, value) of the constexprs
    ndrange: object           # None: the first output's shape
    workgroupsize: object

    @property
    def n_arrays(self) -> int:
        return sum(k == "A" for k in self.kinds)

    def array_names(self) -> list:
        return [n for n, k in zip(self.names, self.kinds) if k == "A"]

    def geometry(self, shapes) -> object:
        """The ndrange of a launch whose arrays have these shapes."""
        return tuple(shapes[self.outputs[0]]) if self.ndrange is None else self.ndrange

    def kernel_args(self, arrays, floats, ints) -> list:
        """The kernel's argument list from the arrays and the scalar values."""
        out, consts = [], dict(self.consts)
        for name, kind, slot in zip(self.names, self.kinds, self.slots):
            if kind == "A":
                out.append(arrays[slot])
            elif kind == "f":
                out.append(float(floats[slot]))
            elif kind == "i":
                out.append(int(ints[slot]))
            elif kind == "b":
                out.append(bool(ints[slot]))
            else:
                out.append(consts[name])
        return out


def _is_count(d) -> bool:
    return isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0


def _check_geometry(ndrange, what: str):
    """The ndrange as an int, a Python ``range`` or a tuple of them (SPEC section 2: a
    dimension may be a range, for offset or stepped index spaces); LaunchError otherwise."""
    if ndrange is None:
        return None
    dims = ndrange if isinstance(ndrange, (tuple, list)) else (ndrange,)
    if not all(_is_count(d) or isinstance(d, range) for d in dims):
        raise LaunchError(f"{what}: ndrange must be an int, a range or a tuple of non-negative ints and "
                          f"ranges, got {ndrange!r}")
    norm = tuple(d if isinstance(d, range) else int(d) for d in dims)
    return norm if isinstance(ndrange, (tuple, list)) else norm[0]


def check_outputs(kernel: Kernel, outputs) -> tuple:
    """The validated output names (a non-empty list of the kernel's non-constexpr parameters)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"expected a @tk.kernel, got {type(kernel).__name__}")
    if isinstance(outputs, str):
        outputs = [outputs]
    outputs = tuple(outputs or ())
    params = dict(kernel.params)
    if not outputs:
        raise LaunchError(f"kernel '{kernel.name}': outputs=[...] must name at least one array argument "
                          "the kernel writes")
    for o in outputs:
        if o not in params:
            raise LaunchError(f"kernel '{kernel.name}': output '{o}' is not one of its parameters "
                              f"({', '.join(params)})")
        if params[o] != "value":
            raise LaunchError(f"kernel '{kernel.name}': output '{o}' is annotated "
                              f"{'tk.Const' if params[o] == 'const' else 'tk.constexpr'}, so it cannot be written")
    if len(set(outputs)) != len(outputs):
        raise LaunchError(f"kernel '{kernel.name}': outputs {list(outputs)} name a parameter twice")
    return outputs


def bind(kernel: Kernel, outputs: tuple, n_arrays: int, kwargs: dict, what: str,
         ndrange=None, workgroupsize=None) -> tuple:
    """``(Binding, floats, ints)`` for a call with ``n_arrays`` positional arrays and the
    keyword arguments ``kwargs`` (scalars and constexprs). LaunchError on a mismatch."""
    names, kinds, slots, consts, floats, ints = [], [], [], [], [], []
    unknown = set(kwargs) - {n for n, _ in kernel.params}
    if unknown:
        raise LaunchError(f"{what}: unknown keyword argument(s) {sorted(unknown)}; the kernel's parameters are "
                          f"{', '.join(n for n, _ in kernel.params)}")
    pos = 0
    for name, kind in kernel.params:
        names.append(name)
        if name in kwargs:
            v = kwargs[name]
            if kind == "constexpr":
                if not isinstance(v, (bool, int, float, np.generic, type, np.dtype)):
                    raise LaunchError(f"{what}: constexpr '{name}' must be a bool, int, float or dtype, "
                                      f"got {type(v).__name__}")
                kinds.append("c")
                slots.append(-1)
                consts.append((name, v))
            elif isinstance(v, (bool, np.bool_)):
                kinds.append("b")
                slots.append(len(ints))
                ints.append(int(v))
            elif isinstance(v, (int, np.integer)):
                kinds.append("i")
                slots.append(len(ints))
                ints.append(int(v))
            elif isinstance(v, (float, np.floating)):
                kinds.append("f")
                slots.append(len(floats))
                floats.append(float(v))
            else:
                raise LaunchError(f"{what}: keyword argument '{name}' must be a Python or NumPy scalar (arrays go "
                                  f"positionally, in the kernel's order), got {type(v).__name__}")
            if name in outputs:
                raise LaunchError(f"{what}: output '{name}' must be passed positionally as an array")
        else:
            if kind == "constexpr":
                raise LaunchError(f"{what}: constexpr parameter '{name}' must be given by keyword")
            kinds.append("A")
            slots.append(pos)
            pos += 1
    if pos != n_arrays:
        arr = [n for n, k in zip(names, kinds) if k == "A"]
        hint = ""
        if n_arrays < pos:              # the parameters left without a value may be scalars
            hint = (f"; a scalar parameter goes by keyword ({', '.join(f'{n}=...' for n in arr[n_arrays:])}), "
                    "or it is taken as an array")
        raise LaunchError(f"{what}: expected {pos} array argument(s) ({', '.join(arr)}) positionally, "
                          f"got {n_arrays}{hint}")
    out_pos = tuple(slots[names.index(o)] for o in outputs)
    b = Binding(kernel.name, tuple(names), tuple(kinds), tuple(slots), out_pos, tuple(consts),
                _check_geometry(ndrange, what), workgroupsize)
    return b, floats, ints


def check_shapes(b: Binding, shapes, what: str) -> None:
    """LaunchError when the default ndrange (the first output's shape) is empty of dimensions."""
    if b.ndrange is None and len(shapes[b.outputs[0]]) == 0:
        raise LaunchError(f"{what}: output '{b.array_names()[b.outputs[0]]}' is a 0-d array; pass ndrange=...")
    if b.ndrange is None and len(shapes[b.outputs[0]]) > 3:
        raise LaunchError(f"{what}: the default ndrange is the first output's shape, which has "
                          f"{len(shapes[b.outputs[0]])} dimensions (at most 3); pass ndrange=...")


def total_items(geometry) -> int:
    """The number of work items of an ndrange (its ranges count by their length)."""
    dims = geometry if isinstance(geometry, tuple) else (geometry,)
    return math.prod(len(d) if isinstance(d, range) else d for d in dims)
