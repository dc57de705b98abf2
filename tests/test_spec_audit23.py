"""SPEC sections 1-9 read sentence by sentence as a stranger's test author would (audit user23):
corners that no earlier audit (test_spec_audit19/21, test_user_programs22) checked as stated,
against NumPy or Python. The language tests run on the CPU and the interpreter (the point is the
language, not a backend); a backend matrix only where the point is portability. The tests named
``..._was_...`` failed before this audit's fixes (what they were is in their docstrings)."""
import numpy as np
import pytest

import tinykernels as tk

DEVS = ["CPU", "INTERP"]


# ------------------------------------------------------------ section 3: len / size / ndim of 0-d

@tk.kernel
def len_of(out, z):
    i = tk.index()
    out[i] = len(z)


@tk.kernel
def size_ndim_of(out, z):
    i = tk.index()
    out[i] = z.size * 10 + z.ndim + len(z.shape)


@pytest.mark.parametrize("dev", DEVS)
def test_len_of_a_0d_array_is_a_compile_error_was_a_c_error_or_bare_index_error(dev):
    """SPEC 3 lists ``len(A)``, ``A.size`` and ``A.ndim``; SPEC 1 takes 0-d arrays. ``len`` of a
    0-d array is NumPy's TypeError ("len() of unsized object"): in a kernel it must be a
    tk.CompileError naming the line. It was a C compiler error about an undeclared
    ``a_z_sh0`` on the CPU and a bare ``IndexError: tuple index out of range`` on the
    interpreter. ``.size`` (1) and ``.ndim`` (0) of a 0-d array work as in NumPy."""
    b = tk.backend(dev)
    z = np.zeros(())
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*len\(\) of the 0-d array 'z'"):
        len_of(b)(np.zeros(2), z, ndrange=2)
    out = np.zeros(2)
    size_ndim_of(b)(out, z, ndrange=2).wait()
    assert out.tolist() == [z.size * 10 + z.ndim + len(z.shape)] * 2
    out = np.zeros(2)
    len_of(b)(out, np.zeros((3, 5)), ndrange=2).wait()
    assert out.tolist() == [3.0, 3.0]
