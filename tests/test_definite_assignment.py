"""Definite assignment: a local read where some path leaves it unassigned is a CompileError at
the read (Python would raise UnboundLocalError; compiled code would read garbage), while
every definitely-assigned program still compiles and runs."""
import numpy as np
import pytest

import tinykernels as tk

BACKENDS = [tk.CPU(), tk.Interpreter()]


@tk.func
def maybe_returns(x):
    if x > 0.5:
        return x * 2.0


@tk.kernel
def only_if(A, X: tk.Const):
    i = tk.index()
    if X[i] > 3:
        v = X[i] * 2
    A[i] = v


@tk.kernel
def only_elif(A, X: tk.Const):
    i = tk.index()
    if X[i] > 3:
        v = 1.0
    elif X[i] > 1:
        v = 2.0
    else:
        pass
    A[i] = v


@tk.kernel
def only_in_loop(A, X: tk.Const, n):
    i = tk.index()
    for k in range(n):
        v = X[i] + k
    A[i] = v


@tk.kernel
def loop_var_after_loop(A, n):
    i = tk.index()
    for k in range(n):
        pass
    A[i] = k


@tk.kernel
def only_in_while(A, X: tk.Const):
    i = tk.index()
    k = 0
    while k < X[i]:
        v = k
        k += 1
    A[i] = v


@tk.kernel
def skipped_by_break(A, X: tk.Const):
    i = tk.index()
    for k in range(4):
        if X[i] > k:
            break
        v = 1.0
    A[i] = v


@tk.kernel
def skipped_by_continue(A, X: tk.Const):
    i = tk.index()
    s = 0.0
    for k in range(4):
        if X[i] > k:
            continue
        v = 1.0
        s += v
    A[i] = s + v


@tk.kernel
def read_before_in_loop(A, X: tk.Const):
    i = tk.index()
    for k in range(3):
        A[i] = v
        v = X[i]


@tk.kernel
def tuple_in_branch(A, X: tk.Const):
    i = tk.index()
    if X[i] > 1:
        a, b = X[i], 2.0
    A[i] = b


@tk.kernel
def func_result_maybe_missing(A, X: tk.Const):
    i = tk.index()
    A[i] = maybe_returns(X[i])


@tk.func
def assigns_in_branch(x):
    if x > 0.5:
        y = x
    return y


@tk.kernel
def in_func_body(A, X: tk.Const):
    i = tk.index()
    A[i] = assigns_in_branch(X[i])


@tk.kernel
def after_kernel_return(A, X: tk.Const):
    i = tk.index()
    if X[i] > 1:
        w = 1.0
    else:
        return
    if X[i] > 2:
        v = 2.0
    A[i] = w + v


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("kern,name,line", [
    (only_if, "v", "A[i] = v"), (only_elif, "v", "A[i] = v"), (only_in_loop, "v", "A[i] = v"),
    (loop_var_after_loop, "k", "A[i] = k"), (only_in_while, "v", "A[i] = v"),
    (skipped_by_break, "v", "A[i] = v"), (skipped_by_continue, "v", "A[i] = s + v"),
    (read_before_in_loop, "v", "A[i] = v"), (tuple_in_branch, "b", "A[i] = b"),
    (in_func_body, "y", "return y"), (after_kernel_return, "v", "A[i] = w + v"),
])
def test_maybe_unassigned_read_is_a_compile_error(b, kern, name, line):
    args = [np.zeros(4), np.arange(4.0)]
    if kern in (only_in_loop,):
        args.append(3)
    if kern is loop_var_after_loop:
        args = [np.zeros(4), 3]
    with pytest.raises(tk.CompileError, match=f"'{name}' may be used before it is assigned") as ei:
        kern(b)(*args, ndrange=4)
    e = ei.value
    assert e.filename.endswith("test_definite_assignment.py") and line in e.source_line
    assert e.col == e.source_line.index(name if name != "y" else "y", e.source_line.index(line))


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_func_result_missing_on_some_path(b):
    with pytest.raises(tk.CompileError, match="'maybe_returns' .* does not return a value on every path"):
        func_result_maybe_missing(b)(np.zeros(4), np.arange(4.0), ndrange=4)


@tk.func
def always_returns(x):
    if x > 1.5:
        return x
    elif x > 0.5:
        y = 2.0
    else:
        y = 3.0
    return y


@tk.kernel
def valid(A, X: tk.Const, n):
    i = tk.index()
    if X[i] > 2:                   # both branches
        v = 1.0
    else:
        v = 2.0
    s = 0.0                        # before the loop, updated inside
    for k in range(n):
        s += k
    for q in range(3):             # a positive constant trip count runs the body
        last = q
    while True:                    # left only through break, assigned before it
        w = X[i] + 1.0
        break
    c, d = X[i] * 0.0, 1.0           # tuple unpacking
    if X[i] > 1:
        u = 1.0
    else:
        return
    A[i] = v + s + last + w + c + d + u + always_returns(X[i])


@pytest.mark.parametrize("b", BACKENDS, ids=lambda b: b.name)
def test_definitely_assigned_code_still_compiles(b):
    X = np.arange(4.0)
    A = np.zeros(4)
    valid(b)(A, X, 3, ndrange=4)
    want = np.zeros(4)
    for i, x in enumerate(X):
        if x <= 1:
            continue
        v = 1.0 if x > 2 else 2.0
        ar = x if x > 1.5 else (2.0 if x > 0.5 else 3.0)
        want[i] = v + 3 + 2 + (x + 1) + 0.0 + 1.0 + 1.0 + ar
    np.testing.assert_array_equal(A, want)


def _drop_branch_assignment(source: str):
    """Variants of the generated module with one branch's assignment of a branch-assigned local
    (the generator's ``s_branch``, if/else only, in the kernel) replaced by ``pass``, and that local's name;
    None when the local is never read after its if."""
    import re
    for m in re.finditer(r"^( *)if .*:\n\1    (b\d+) = .*\n\1else:\n\1    \2 = .*$", source, re.M):
        ind, name = m.group(1), m.group(2)
        if m.start() < source.index("@tk.kernel"):
            continue                                     # in a @tk.func the kernel may not call
        after = source[m.end():]
        if not re.search(rf"\b{name}\b", after):
            continue
        lines = m.group(0).split("\n")
        drop_if = "\n".join([lines[0], f"{ind}    pass", lines[2], lines[3]])
        drop_else = "\n".join([lines[0], lines[1], lines[2], f"{ind}    pass"])
        return [source[:m.start()] + v + after for v in (drop_if, drop_else)], name
    return None


def test_generated_kernels_missing_a_branch_assignment_are_compile_errors():
    """The fuzzer generates only definitely-assigned code (the reference raises otherwise);
    dropping one branch's assignment from its generated kernels must give the new error (for
    one of the two branches: a compile-time condition keeps only the taken one; a read in
    compile-time-dead code reads nothing)."""
    import dataclasses
    import re

    from tinykernels.testing import fuzz as F
    from tinykernels.testing.fuzz.run import run_case
    checked = raised = 0
    for seed in range(300):
        case = F.generate(seed)
        if "branch-assign" not in case.features:
            continue
        mutated = _drop_branch_assignment(case.source)
        if mutated is None:
            continue
        variants, name = mutated
        run_case(case, "CPU")                            # the generated kernel itself compiles
        errors = 0
        for src in variants:
            try:
                run_case(dataclasses.replace(case, source=src), "CPU")
            except tk.CompileError as e:
                assert re.search(rf"'{name}' (may be|is) used before it is assigned", str(e)), str(e)
                errors += 1
        checked += 1
        raised += errors > 0       # (not when every later read of it is in compile-time-dead code)
        if checked == 10:
            break
    assert checked == 10 and raised >= 5, (checked, raised)
