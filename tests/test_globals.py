"""Globals and closure variables a kernel reads are compile-time constants that follow
rebinding: every launch checks the values its compiled code folded in (tinykernels.globalreads)
and recompiles when one changed, as the interpreter (which runs the Python function) reads the
current value. Kernels and @tk.func bodies, numbers, NumPy scalars, tuples, dtypes, closure
cells; arrays are a CompileError; the disk cache keys on the values."""
import math
import sys
import types

import numpy as np
import pytest

import tinykernels as tk
from backend_params import every_backend
from tinykernels import globalreads
from tinykernels.runtime.cpu import CPUKernelInstance

N = 3
SCALE = 2.0
PAIR = (1, 2)
DT = tk.float32
NPS = np.float32(0.5)
FLAG = False
ARR = np.arange(4.0)
CFG = types.ModuleType("tk_test_cfg")        # a user's configuration module
CFG.BLOCK = 4


@tk.func
def add_n(x):
    return x + N                      # a global read inside a @tk.func body


@tk.kernel
def k_mixed(A):
    i = tk.index()
    a, b = PAIR
    A[i] = add_n(SCALE * b) + a + NPS


@tk.kernel
def k_dtype(A):
    A[tk.index()] = DT(1) / DT(3)


@tk.kernel
def k_flag(A):
    if FLAG:
        A[tk.index()] = 1.0
    else:
        A[tk.index()] = 2.0


@tk.kernel
def k_cfg(A):
    A[tk.index()] = CFG.BLOCK + math.pi


@tk.kernel
def k_array_size(A):
    A[tk.index()] = ARR.size


@tk.kernel
def k_array_len(A):
    A[tk.index()] = len(ARR)


def make_closure(c):
    @tk.kernel
    def k_closure(A):
        A[tk.index()] = c

    def set_c(v):
        nonlocal c
        c = v
    return k_closure, set_c


def _run(kern, b, dtype=tk.float32):
    A = tk.zeros(4, dtype, backend=b)
    kern(b)(A, ndrange=4)
    return A.numpy()


@pytest.fixture
def module(monkeypatch):
    """Sets this module's globals for a test (restored after it)."""
    mod = sys.modules[__name__]
    return lambda **kw: [monkeypatch.setattr(mod, k, v) for k, v in kw.items()]


@pytest.mark.parametrize("dev", every_backend())
def test_rebinding_a_global_recompiles_on_every_backend(dev, module):
    b = tk.backend(dev)
    module(N=3, SCALE=2.0, PAIR=(1, 2), NPS=np.float32(0.5))
    np.testing.assert_array_equal(_run(k_mixed, b), 3 + 4 + 1 + 0.5)
    module(N=10)                                 # read by the @tk.func
    np.testing.assert_array_equal(_run(k_mixed, b), 10 + 4 + 1 + 0.5)
    module(PAIR=(2, 5))                          # a tuple
    np.testing.assert_array_equal(_run(k_mixed, b), 10 + 10 + 2 + 0.5)
    module(SCALE=0.5, NPS=np.float32(0.25))      # a float and a NumPy scalar
    np.testing.assert_array_equal(_run(k_mixed, b), 10 + 2.5 + 2 + 0.25)
    module(N=3, SCALE=2.0, PAIR=(1, 2), NPS=np.float32(0.5))     # back: the first values again
    np.testing.assert_array_equal(_run(k_mixed, b), 3 + 4 + 1 + 0.5)


@pytest.mark.parametrize("dev", every_backend())
def test_a_global_dtype_and_a_branch_follow_rebinding(dev, module):
    b = tk.backend(dev)
    module(FLAG=False, DT=tk.float32)
    np.testing.assert_array_equal(_run(k_flag, b), 2.0)
    module(FLAG=True)                           # the folded branch
    np.testing.assert_array_equal(_run(k_flag, b), 1.0)
    np.testing.assert_array_equal(_run(k_dtype, b), np.float32(1) / np.float32(3))
    if b.supports_float64:
        module(DT=tk.float64)
        np.testing.assert_array_equal(_run(k_dtype, b, tk.float64), 1.0 / 3.0)


@pytest.mark.parametrize("dev", every_backend())
def test_a_closure_variable_follows_rebinding(dev):
    b = tk.backend(dev)
    kern, set_c = make_closure(1.5)
    np.testing.assert_array_equal(_run(kern, b), 1.5)
    set_c(-4.0)
    np.testing.assert_array_equal(_run(kern, b), -4.0)


def test_an_equal_value_in_a_new_object_does_not_recompile(module, monkeypatch):
    compiles = []
    orig = CPUKernelInstance._compile
    monkeypatch.setattr(CPUKernelInstance, "_compile", lambda self, *a: compiles.append(1) or orig(self, *a))
    b = tk.CPU(threads=1)
    module(N=3, SCALE=float("nan"), PAIR=(1, 2), NPS=np.float32(0.5))
    _run(k_mixed, b)
    for _ in range(3):
        module(SCALE=float("nan"), PAIR=tuple([1, 2]), NPS=np.float32(0.5))   # new objects, same values
        _run(k_mixed, b)
    assert len(compiles) == 1
    module(PAIR=(1.0, 2))                      # an int became a float: other code
    _run(k_mixed, b)
    assert len(compiles) == 2


def test_same_compares_what_compiles():
    same = globalreads.same
    assert same(1, 1) and same(2.5, 2.5) and same(float("nan"), float("nan"))
    assert same(np.float32("nan"), np.float32("nan")) and same((1, (2.0,)), (1, (2.0,)))
    assert not same(1, 1.0) and not same(True, 1) and not same(0.0, -0.0)
    assert not same(np.float32(1), np.float64(1)) and not same((1, 2), (1, 2, 3)) and not same(tk.float32, tk.float64)


def test_the_fast_path_checks_no_global_when_the_kernel_reads_none():
    @tk.kernel
    def k_plain(A):
        A[tk.index()] = math.pi
    b = tk.CPU(threads=1)
    _run(k_plain, b)
    assert k_plain._reads == []                # modules (tk, math) are not recorded
    _run(k_mixed, b)
    assert {r[1] for r in k_mixed._reads} >= {"N", "SCALE", "PAIR", "NPS", "add_n"}


@pytest.mark.parametrize("kern", [k_array_size, k_array_len])
def test_a_global_array_is_a_compile_error_wherever_it_is_used(kern):
    with pytest.raises(tk.CompileError, match=r"a global NumPy array cannot be used in a kernel.*pass the array as an argument"):
        _run(kern, tk.CPU(threads=1))


def test_source_lowered_with_a_new_value_drops_the_old_specializations(module):
    b = tk.CPU(threads=1)
    module(N=3, SCALE=2.0, PAIR=(1, 2), NPS=np.float32(0.5))
    _run(k_mixed, b)
    module(N=20)
    A = tk.zeros(4, tk.float32, backend=b)
    assert "20" in k_mixed.source(b, A, ndrange=4)
    np.testing.assert_array_equal(_run(k_mixed, b), 20 + 4 + 1 + 0.5)


def test_the_disk_cache_keys_on_the_values(module, tmp_path, monkeypatch):
    from tinykernels.runtime import compiler
    built = []
    orig = compiler.compile_library
    monkeypatch.setattr(compiler, "compile_library", lambda src, *a, **kw: built.append(orig(src, *a, **kw)) or built[-1])
    b = tk.CPU(threads=1)
    for n in (3, 11, 3):
        module(N=n, SCALE=2.0, PAIR=(1, 2), NPS=np.float32(0.5))
        np.testing.assert_array_equal(_run(k_mixed, b), n + 4 + 1 + 0.5)
    assert len(built) == 3 and built[0] == built[2] and built[0] != built[1]


@tk.kernel
def k_scaled(y, x: tk.Const):
    i = tk.index()
    y[i] = x[i] * SCALE


def test_a_torch_op_follows_rebinding(module):
    torch = pytest.importorskip("torch")
    import tinykernels.torch as tktorch
    op = tktorch.torch_op(k_scaled, outputs=["y"], name="tkglobals::scaled")
    x = torch.arange(4, dtype=torch.float32)
    module(SCALE=2.0)
    assert torch.equal(op(torch.zeros(4), x), x * 2)
    xg = x.clone().requires_grad_()              # through the dispatcher (autograd), not the eager path
    assert torch.equal(op(torch.zeros(4), xg).detach(), x * 2)
    module(SCALE=3.0)
    assert torch.equal(op(torch.zeros(4), x), x * 3)
    module(SCALE=5.0)
    assert torch.equal(op(torch.zeros(4), xg).detach(), x * 5)


def test_a_jax_kernel_follows_rebinding(module):
    pytest.importorskip("jax")
    import jax.numpy as jnp
    import tinykernels.jax as tkjax
    op = tkjax.jax_kernel(k_scaled, outputs=["y"])
    x = jnp.arange(4, dtype=jnp.float32)
    module(SCALE=2.0)
    np.testing.assert_array_equal(op(jnp.zeros(4, jnp.float32), x, ndrange=4), np.arange(4) * 2)
    module(SCALE=3.0)
    np.testing.assert_array_equal(op(jnp.zeros(4, jnp.float32), x, ndrange=4), np.arange(4) * 3)


def test_an_attribute_of_a_users_module_follows_rebinding(monkeypatch):
    b = tk.CPU(threads=1)
    monkeypatch.setattr(CFG, "BLOCK", 4)
    np.testing.assert_array_equal(_run(k_cfg, b), np.float32(4 + math.pi))
    monkeypatch.setattr(CFG, "BLOCK", 8)
    np.testing.assert_array_equal(_run(k_cfg, b), np.float32(8 + math.pi))
    assert [r[1] for r in k_cfg._reads] == ["BLOCK"]          # math.pi and the name CFG: not recorded
