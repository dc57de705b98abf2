"""The CPU launcher's fast path for every argument kind (NumPy arrays, host tk.Arrays, CPU
torch tensors, keywords): a later launch of the same call site must never reuse a stale
specialization or skip a check. Each test launches once (the fast path is then armed), changes
one property of an argument, launches again and compares with NumPy, or expects the
LaunchError the checked path raises."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels.runtime import launcher

torch = pytest.importorskip("torch")

needs_ext = pytest.mark.skipif(type(launcher.get()).__name__ == "PyLauncher",
                               reason="the C launcher extension could not be built here (no Python headers)")


@tk.kernel
def scale(a, b: tk.Const, s):
    i = tk.index()
    a[i] = b[i] * s


@tk.kernel
def copy2(out, x: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = x[i, j] + 0.5


@pytest.fixture
def cpu():
    return tk.CPU(threads=1)


class Spy:
    """Counts the launches that took the checked (Python) path of an instance."""

    def __init__(self, inst, monkeypatch):
        self.n = 0
        orig = inst._launch

        def counted(*a, **k):
            self.n += 1
            return orig(*a, **k)
        monkeypatch.setattr(inst, "_launch", counted)


@needs_ext
def test_torch_and_tk_array_take_the_fast_path(cpu, monkeypatch):
    k = scale(cpu)
    spy = Spy(k, monkeypatch)
    a, b = torch.zeros(8), torch.arange(8, dtype=torch.float32)
    k(a, b, 2.0, ndrange=8)
    assert spy.n <= 1
    k(a, b, 3.0, ndrange=8)
    k(a=a, b=b, s=3.0, ndrange=8)
    assert spy.n == 1, "the second launch of CPU torch tensors went through Python"
    np.testing.assert_array_equal(a.numpy(), np.arange(8, dtype=np.float32) * 3)
    ta, tb = tk.asarray(np.zeros(8, np.float32), backend=cpu), tk.asarray(np.arange(8, dtype=np.float32), backend=cpu)
    k(ta, tb, 4.0, ndrange=8)
    assert spy.n == 1, "a host tk.Array went through Python though NumPy arrays of that signature do not"
    np.testing.assert_array_equal(ta.numpy(), np.arange(8, dtype=np.float32) * 4)


def _views():
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    return [base, base.t(), base[:, ::2], base[::2], base[:1], base[:, :1], base[2:3, 1:7],
            torch.ones(4, 7)[:, :1], base.reshape(48)[5:], torch.zeros(0, 3), torch.ones(3).expand(4, 3),
            base.to(torch.float64), base.to(torch.int32).t(), base.to(torch.bfloat16) if _has_ml_dtypes() else base,
            torch.nn.Parameter(base.clone()), base.clone().requires_grad_(), _from_read_only()]


def _from_read_only():
    """A tensor over a read-only NumPy array (torch warns; its numpy() view is writeable)."""
    import warnings
    ro = np.arange(8, dtype=np.float32)
    ro.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.from_numpy(ro)


def _has_ml_dtypes():
    try:
        import ml_dtypes  # noqa: F401
        return True
    except ImportError:
        return False


@needs_ext
@pytest.mark.parametrize("i", range(17))
def test_torch_key_equals_its_numpy_views_key(cpu, i):
    """The specialization key of a torch tensor read by the launcher is the key of the NumPy
    view the checked path makes of it (dtype number, rank, contiguity as NumPy decides it,
    writeability, shared elements, 32-bit extents)."""
    t = _views()[i]
    view = cpu.instance_class(copy2, cpu, None)._prepare((t, t), (1, 1), None)[0][0]
    L = launcher.get()
    launcher.note_torch(L, t, view)
    geom = (0, 1, 1, 0, 1, 1, 0, 1, 1)
    key = L.sig(0, (view,), geom, 2, 0, 0)
    assert key is not None
    # a tensor without a data pointer (empty) takes the checked path: no key
    assert L.sig(0, (t,), geom, 2, 0, 0) == (key if t.data_ptr() else None)


def test_torch_dtype_shape_and_strides_change_between_launches(cpu):
    k = copy2(cpu)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = torch.zeros(3, 4)
    for _ in range(2):
        k(out, x, ndrange=(3, 4))
    np.testing.assert_array_equal(out.numpy(), x.numpy() + 0.5)
    xt, outt = x.t(), torch.zeros(4, 3)                 # strides change: not contiguous
    k(outt, xt, ndrange=(4, 3))
    np.testing.assert_array_equal(outt.numpy(), x.numpy().T + 0.5)
    x64, out64 = x.double() * 3, torch.zeros(3, 4, dtype=torch.float64)    # dtype changes
    k(out64, x64, ndrange=(3, 4))
    np.testing.assert_array_equal(out64.numpy(), x64.numpy() + 0.5)
    col = torch.arange(28, dtype=torch.float32).reshape(4, 7)[:, :1]       # (4, 1) with strides (7, 1)
    outc = torch.zeros(4, 1)
    k(outc, col, ndrange=(4, 1))
    np.testing.assert_array_equal(outc.numpy(), col.numpy() + 0.5)


def test_torch_resized_or_rebound_in_place(cpu):
    """resize_, set_ and .data = change a tensor object's memory and metadata in place: the
    next launch of the same objects sees the new ones."""
    k = scale(cpu)
    a, b = torch.zeros(4), torch.arange(4, dtype=torch.float32)
    k(a, b, 2.0, ndrange=4)
    k(a, b, 2.0, ndrange=4)
    try:
        a.resize_(64)
        b.resize_(64)
    except RuntimeError:       # torch refuses once tensor.numpy() exported the storage (the checked path)
        a.set_(torch.zeros(64).untyped_storage(), 0, (64,))
        b.set_(torch.zeros(64).untyped_storage(), 0, (64,))
    b.copy_(torch.arange(64, dtype=torch.float32))
    k(a, b, 2.0, ndrange=64)
    np.testing.assert_array_equal(a.numpy(), np.arange(64, dtype=np.float32) * 2)
    other = torch.full((64,), 5.0)
    b.set_(other.untyped_storage(), 0, (64,))
    k(a, b, 2.0, ndrange=64)
    np.testing.assert_array_equal(a.numpy(), np.full(64, 10.0, np.float32))
    b.data = torch.arange(64, dtype=torch.float64)         # dtype and storage swapped under the object
    a.data = torch.zeros(64, dtype=torch.float64)
    k(a, b, 2.0, ndrange=64)
    np.testing.assert_array_equal(a.numpy(), np.arange(64, dtype=np.float64) * 2)
    with pytest.raises(tk.LaunchError, match="'b'.*out of bounds"):
        k(a, b[:10], 2.0, ndrange=64)                      # shrunk: the certain out-of-bounds check


def test_torch_freed_and_reallocated(cpu):
    k = scale(cpu)
    for n in (16, 16, 16, 32):
        a, b = torch.zeros(n), torch.rand(n)
        k(a, b, 3.0, ndrange=n)
        np.testing.assert_array_equal(a.numpy(), b.numpy() * np.float32(3.0))
        del a, b


def test_torch_checks_still_raise_after_the_fast_path(cpu):
    k = scale(cpu)
    a, b = torch.zeros(8), torch.ones(8)
    k(a, b, 2.0, ndrange=8)
    k(a, b, 2.0, ndrange=8)
    with pytest.raises(tk.LaunchError, match="'b' is annotated tk.Const.*shares memory with argument 'a'"):
        k(a, a, 2.0, ndrange=8)
    with pytest.raises(tk.LaunchError, match="'a' has elements that share memory"):
        k(torch.zeros(1).expand(8), b, 2.0, ndrange=8)
    with pytest.raises(tk.LaunchError, match="'b'.*negated"):
        k(a, torch._neg_view(b), 2.0, ndrange=8)
    with pytest.raises(tk.LaunchError, match="'b'"):
        k(a, torch._efficientzerotensor(8), 2.0, ndrange=8)
    with pytest.raises(tk.LaunchError, match="'b'.*meta"):
        k(a, torch.ones(8, device="meta"), 2.0, ndrange=8)
    with pytest.raises(tk.LaunchError, match="'b'.*out of bounds"):
        k(a, torch.ones(4), 2.0, ndrange=8)
    with pytest.raises(tk.LaunchError, match="'a' is not aligned"):
        k(np.zeros(8 * 4 + 1, np.uint8)[1:].view(np.float32), b, 2.0, ndrange=8)
    k(a, b, 5.0, ndrange=8)
    np.testing.assert_array_equal(a.numpy(), np.full(8, 5.0, np.float32))


def test_torch_requires_grad_parameter_and_subclass(cpu):
    k = scale(cpu)

    class Sub(torch.Tensor):
        pass
    b = torch.arange(8, dtype=torch.float32)
    for arg in (b.clone().requires_grad_(), torch.nn.Parameter(b.clone()), b.clone().as_subclass(Sub), b):
        a = torch.zeros(8)
        k(a, arg, 2.0, ndrange=8)
        k(a, arg, 3.0, ndrange=8)
        np.testing.assert_array_equal(a.numpy(), np.arange(8, dtype=np.float32) * 3)


def test_torch_empty_tensor(cpu):
    k = scale(cpu)
    a, b = torch.zeros(0), torch.zeros(0)
    k(a, b, 2.0, ndrange=0)
    k(a, b, 2.0, ndrange=0)


def test_tk_array_properties_change(cpu):
    k = scale(cpu)
    b32 = tk.asarray(np.arange(6, dtype=np.float32), backend=cpu)
    a32 = tk.zeros(6, dtype=tk.float32, backend=cpu)
    k(a32, b32, 2.0, ndrange=6)
    k(a32, b32, 2.0, ndrange=6)
    a64 = tk.zeros(6, dtype=tk.float64, backend=cpu)
    k(a64, tk.asarray(np.arange(6, dtype=np.float64), backend=cpu), 2.0, ndrange=6)
    np.testing.assert_array_equal(a64.numpy(), np.arange(6) * 2.0)
    ro = np.arange(6, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(tk.LaunchError, match="'a' is read-only"):
        k(tk.asarray(ro, backend=cpu), b32, 2.0, ndrange=6)
    with pytest.raises(tk.LaunchError, match="'b' is annotated tk.Const"):
        k(a32, a32, 2.0, ndrange=6)
    strided = tk.asarray(np.arange(12, dtype=np.float32)[::2], backend=cpu)
    k(a32, strided, 1.0, ndrange=6)
    np.testing.assert_array_equal(a32.numpy(), np.arange(0, 12, 2, dtype=np.float32))


def test_keyword_binding_keeps_its_errors(cpu):
    k = scale(cpu)
    a, b = np.zeros(4, np.float32), np.ones(4, np.float32)
    k(a, b=b, s=2.0, ndrange=4)
    k(s=3.0, b=b, a=a, ndrange=4)
    np.testing.assert_array_equal(a, np.full(4, 3.0, np.float32))
    with pytest.raises(tk.LaunchError, match="no argument 'c'"):
        k(a, b=b, c=2.0, ndrange=4)
    with pytest.raises(tk.LaunchError, match="'a' is given twice"):
        k(a, b, a=a, ndrange=4)
    with pytest.raises(tk.LaunchError, match="'s'.*missing"):
        k(a, b=b, ndrange=4)
    with pytest.raises(tk.LaunchError, match="ndrange= is missing"):
        k(a, b=b, s=1.0)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_stream_launches_prepared_at_submit(cpu, kind, monkeypatch):
    """A stream launch whose signature ran before is prepared at submit time (key, checks,
    slots) and its job only calls the kernel: its arrays stay alive until it ran, a changed
    argument gets its own specialization and every check still raises at the launch."""
    k = scale(cpu)
    spy = Spy(k, monkeypatch)
    s = cpu.stream()
    mk = (lambda x: x) if kind == "numpy" else torch.from_numpy
    a, b = mk(np.zeros(64, np.float32)), mk(np.arange(64, dtype=np.float32))
    k(a, b, 2.0, ndrange=64, stream=s)
    outs = []
    for i in range(20):                      # temporaries: only the job keeps them alive
        out = mk(np.zeros(64, np.float32))
        k(out, mk(np.arange(64, dtype=np.float32) + i), 2.0, ndrange=64, stream=s)
        outs.append(out)
    s.synchronize()
    if type(launcher.get()).__name__ != "PyLauncher":
        assert spy.n <= 1, "an armed stream launch went through Python"
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(out), (np.arange(64, dtype=np.float32) + i) * 2)
    a64 = mk(np.zeros(64, np.float64))
    k(a64, mk(np.arange(64, dtype=np.float64)), 3.0, ndrange=64, stream=s).wait()
    np.testing.assert_array_equal(np.asarray(a64), np.arange(64) * 3.0)
    with pytest.raises(tk.LaunchError, match="'b' is annotated tk.Const"):
        k(a, a, 2.0, ndrange=64, stream=s)
    with pytest.raises(tk.LaunchError, match="'b'.*out of bounds"):
        k(a, b[:8], 2.0, ndrange=64, stream=s)
    with pytest.raises(tk.LaunchError, match="stream"):
        k(a, b, 2.0, ndrange=64, stream=tk.CPU(threads=2).stream())
    s.synchronize()


def _constexpr_kernels():
    """Fresh kernels (their instances pick up a monkeypatched TK_PY_LAUNCHER)."""
    @tk.kernel
    def addc(a, c: tk.constexpr):
        i = tk.index()
        a[i] = a[i] + c

    @tk.kernel
    def recip(a, c: tk.constexpr):
        i = tk.index()
        a[i] = 1.0 / c
    return addc, recip


@tk.kernel
def recip_scalar(a, s):
    i = tk.index()
    a[i] = 1.0 / s


@pytest.mark.parametrize("py", [False, True])
def test_constexpr_values_that_hash_alike_compile_apart(cpu, py, monkeypatch):
    """The launcher keyed constexprs by hash: -1 and -2 (hash -2 both), 0 and 2**61 - 1 shared
    one build. 0.0 == -0.0 (and hash alike) but 1 / c tells them apart."""
    if py:
        monkeypatch.setenv("TK_PY_LAUNCHER", "1")
    addc, recip = _constexpr_kernels()
    k = addc(cpu)
    if py:
        assert type(k._L).__name__ == "PyLauncher"
    a = np.zeros(4, np.int64)
    for c in (-1, -1, -2, 0, 2**61 - 1):
        before = a.copy()
        k(a, c, ndrange=4)
        np.testing.assert_array_equal(a, before + c)
    r = recip(cpu)
    out = np.zeros(2)
    r(out, 0.0, ndrange=2)
    assert np.all(np.isposinf(out))
    r(out, -0.0, ndrange=2)
    assert np.all(np.isneginf(out))
    r(out, np.float32(-0.0), ndrange=2)
    assert np.all(np.isneginf(out))


def test_value_key_is_exact():
    from tinykernels.runtime.launchplan import value_key
    assert value_key(0.0) != value_key(-0.0)
    assert value_key(np.float32(0.0)) != value_key(np.float32(-0.0))
    assert value_key(1) != value_key(1.0) != value_key(True)
    assert value_key(-1) != value_key(-2)
    assert value_key(np.float32) == value_key(np.float32)
    with pytest.raises(TypeError):
        value_key([1])


@pytest.mark.parametrize("be", ["INTERP"] + [dev for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                             if tk.backends()[name][0]])
def test_constexpr_signed_zero_on_other_backends(be):
    """The device runtimes keyed a constexpr by type name and value, and OpenCL's repeated-launch
    memo compared scalars by value: -0.0 reused 0.0's build, or 0.0's argument value."""
    _, recip = _constexpr_kernels()
    out = tk.asarray(np.zeros(2, np.float32), backend=be)
    for k in (recip(be), recip_scalar(be)):
        for s in (0.0, -0.0, np.float32(0.0), np.float32(-0.0)):
            k(out, s, ndrange=2)
            assert np.all(np.copysign(1, out.numpy()) == np.copysign(1, s)), (k, s)


def test_the_extension_builds_where_python_headers_are():
    """A compile error in _launch.c falls back to the ctypes launcher silently (every test of
    the fast path then skips or runs the slow path): where Python's headers exist, it must build."""
    from pathlib import Path
    from tinykernels.runtime import compiler
    info = compiler.python_build_info()
    if not info["include"] or not (Path(info["include"]) / "Python.h").exists():
        pytest.skip("no Python headers here")
    assert launcher._build_extension() is not None, "runtime/_launch.c did not compile"
