"""A compile-time constant passed to an inlined ``@tk.func`` (a constexpr, a literal) is that
constant in the func's body: an ``if`` on it keeps only the taken branch, and a ``return`` at
the func's top level (also in a branch that folded) ends the func without a jump. Before,
the parameter was a run-time local: every branch was generated, returns became gotos."""
import numpy as np
import pytest

import tinykernels as tk


@tk.func
def pick(x, i, flag):
    if flag == 1:
        return x[i] * 2.0
    return x[i] + 1.0


@tk.func
def bumped(x, i, flag):
    flag = flag + 1                   # reassigned: a run-time local, as before
    if flag == 2:
        return x[i] * 3.0
    return x[i] - 1.0


@tk.kernel
def k_pick(out, x: tk.Const, flag: tk.constexpr):
    i = tk.index()
    out[i] = pick(x, i, flag) + bumped(x, i, flag) + pick(x, i, 0)


def _body(src: str) -> str:
    return src[src.index("static void tk_chunk"):]


@pytest.mark.parametrize("dev", ["CPU", "INTERP"])
@pytest.mark.parametrize("flag", [0, 1])
def test_results_follow_the_constant(dev, flag):
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    k_pick(tk.backend(dev))(out, x, flag, ndrange=8)
    first = x * 2 if flag == 1 else x + 1
    second = x * 3 if flag + 1 == 2 else x - 1
    np.testing.assert_array_equal(out, first + second + (x + 1))


def test_only_the_taken_branch_is_generated():
    x = np.arange(8, dtype=np.float32)
    body = _body(k_pick.source("CPU", x, x, 1, ndrange=8))
    assert "* 0x1.0000000000000p+1f" in body          # pick(.., 1): x * 2
    assert "_pick_flag" not in body                    # no run-time copy of the constant
    assert "_bumped_flag" in body                      # the reassigned one stays a local
    assert body.count("goto _f") == 1 and "goto _f1_pick_end" not in body   # only bumped jumps
