"""Debug-mode bounds checks (SPEC 3 last paragraph, SPEC 9), in the manner of Warp's
test_bounds, Taichi's test_debug and Numba CUDA's test_debug: every access form raises
``IndexError`` naming the kernel, the source line, the index, the array and its shape, on
every backend (CPU, OpenCL/PoCL and WebGPU when present, the interpreter and its check mode);
in-bounds edge accesses never raise; the backend stays usable; debug and plain builds are
cached apart.

Found here: a compiled backend named an out-of-bounds ``tk.localmem``/``tk.private`` array
"local/private array" where the interpreter names the variable (``local array 's'``); the
debug table now carries the variable's name (``ArrayInfo.label``) on every backend."""
import numpy as np
import pytest

import tinykernels as tk

DEVS = ["CPU", "INTERP", "INTERP:CHECK"] + [dev for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU"))
                                            if tk.backends()[name][0]]


def _backend(dev):
    if dev.startswith("INTERP"):
        return tk.Interpreter(check=dev.endswith("CHECK"))
    return {"CPU": tk.CPU, "CL": tk.OpenCL, "WEBGPU": tk.WebGPU}[dev](debug=True)


def _put(be, x):
    return x if isinstance(be, (tk.CPU, tk.Interpreter)) else tk.asarray(x, be)


def _get(x):
    return x if isinstance(x, np.ndarray) else x.numpy()


def _zeros(be, shape, dtype=np.float32):
    return _put(be, np.zeros(shape, dtype))


def _line(fn, text):
    """The source line of ``fn`` that contains ``text``: what the message must name."""
    import inspect
    src, first = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
    return first + next(k for k, s in enumerate(src) if text in s)


def _raises(fn, *parts):
    with pytest.raises(IndexError) as e:
        fn()
    msg = str(e.value)
    for p in parts:
        assert p in msg, (p, msg)
    return msg


@tk.kernel
def _shift(a, n: int):
    i = tk.index()
    a[i + n] = 1.0


@tk.kernel
def _cart(a):
    Ix = tk.index(tk.Global, tk.Cartesian)
    a[Ix] = a[Ix] + 1.0


@tk.func
def _read(a, i):
    return a[i]


@tk.kernel
def _via_func(out, a, o: int):
    i = tk.index()
    out[i] = _read(a, i + o)


@tk.kernel
def _atomic(a, o: int):
    i = tk.index()
    tk.atomic_add(a, i + o, 1.0)


@tk.kernel
def _local(a, o: int):
    i = tk.index()
    l = tk.index(tk.Local, tk.Linear)
    tile = tk.localmem(tk.float32, 8)
    tile[l + o] = a[i]
    tk.synchronize()
    a[i] = tile[l]


@tk.kernel
def _private(a, o: int):
    i = tk.index()
    p = tk.private(tk.float32, 4)
    for k in range(4):
        p[k] = 0.0
    p[i % 4 + o] = 1.0
    a[i] = p[0]


@tk.kernel
def _one_item(a, bad: int):
    i = tk.index()
    j = i
    if i == bad:
        j = i + 1000
    a[j] = 3.0


@tk.kernel
def _scaled(a, m: int):
    i = tk.index()
    a[i * m] = 1.0


@tk.kernel
def _after_barrier(a, o: int):
    i = tk.index()
    s = tk.localmem(tk.float32, 8)
    l = tk.index(tk.Local, tk.Linear)
    s[l] = 1.0
    tk.synchronize()
    a[i + o] = s[7 - l]


@tk.kernel
def _mirror3(out, a):
    i, j, k = tk.index(tk.Global, tk.Cartesian)
    out[i, j, k] = a[a.shape[0] - 1 - i, a.shape[1] - 1 - j, a.shape[2] - 1 - k] + 1.0


@tk.kernel
def _halves(out, a, o: int):
    i = tk.index()
    p = tk.private(tk.float32, 4)
    tk.load_halves(p, a, i * 8 + o, 4)
    out[i] = p[0] + p[3]


@tk.kernel
def _bytes(out, a, o: int):
    i = tk.index()
    p = tk.private(tk.float32, 8)
    tk.load_i8(p, a, i * 8 + o, 8)
    out[i] = p[7]


@tk.kernel
def _nibbles(out, tab, a, o: int):
    i = tk.index()
    p = tk.private(tk.float32, 16)
    tk.lookup_u4(p, tab, a, i * 8 + o, 8)
    out[i] = p[15]


@tk.kernel
def _dot(out, a, b, o: int):
    i = tk.index()
    p = tk.private(tk.int32, 8)
    tk.dot_i8(p, a, i * 32 + o, b, 0, 32)
    out[i] = p[0] + p[7]


@pytest.mark.parametrize("dev", DEVS)
def test_linear_and_cartesian_index_forms(dev):
    be = _backend(dev)
    _shift(be)(_zeros(be, 16), 0, ndrange=16)                               # the last element: fine
    _raises(lambda: _shift(be)(_zeros(be, 16), 1, ndrange=16), "kernel '_shift'",
            f":{_line(_shift, 'a[i + n]')}", "index 16 ", "array 'a'", "shape (16,)")
    a = _zeros(be, (4, 5))
    _cart(be)(a, ndrange=(4, 5))
    assert (_get(a) == 1).all()
    _raises(lambda: _cart(be)(_zeros(be, (4, 5)), ndrange=(4, 6)), "index (0, 5)", "shape (4, 5)")
    _raises(lambda: _shift(be)(_zeros(be, 0), 0, ndrange=1), "index 0 ", "shape (0,)")   # zero-size
    _raises(lambda: _scaled(be)(_zeros(be, 16), 1 << 30, ndrange=16), "index 1073741824 ")


@pytest.mark.parametrize("dev", DEVS)
def test_views_are_checked_against_their_own_shape(dev):
    be = _backend(dev)
    base = np.zeros(32, np.float32)
    v = _put(be, base[::2])                       # a strided view (copied on device backends)
    _shift(be)(v, 0, ndrange=16)
    assert _get(v).tolist() == [1.0] * 16
    if isinstance(be, (tk.CPU, tk.Interpreter)):
        assert base.tolist() == [1.0, 0.0] * 16  # written in place, every other element
    _raises(lambda: _shift(be)(_put(be, np.zeros(32, np.float32)[::2]), 1, ndrange=16), "shape (16,)")
    rev = np.zeros(16, np.float32)
    _shift(be)(_put(be, rev[::-1]), 0, ndrange=16)                          # negative stride
    _raises(lambda: _shift(be)(_put(be, np.zeros(16, np.float32)[::-1]), 1, ndrange=16), "index 16 ")
    t = np.zeros((5, 4), np.float32)
    tt = _put(be, t.T)                                                     # transposed
    _cart(be)(tt, ndrange=(4, 5))
    assert (_get(tt) == 1).all()
    _raises(lambda: _cart(be)(_put(be, np.zeros((5, 4), np.float32).T), ndrange=(4, 6)),
            "index (0, 5)", "shape (4, 5)")


@pytest.mark.parametrize("dev", DEVS)
def test_func_atomic_local_private_accesses(dev):
    be = _backend(dev)
    _raises(lambda: _via_func(be)(_zeros(be, 16), _zeros(be, 16), 1, ndrange=16),
            "in @tk.func '_read'", "index 16 ", "array 'a'")
    _raises(lambda: _atomic(be)(_zeros(be, 16), 1, ndrange=16), "index 16 ", "array 'a'")
    _local(be)(_zeros(be, 16), 0, ndrange=16, workgroupsize=8)
    _raises(lambda: _local(be)(_zeros(be, 16), 1, ndrange=16, workgroupsize=8),
            "index 8 ", "local array 'tile'", "shape (8,)", f":{_line(_local, 'tile[l + o]')}")
    _private(be)(_zeros(be, 16), 0, ndrange=16)
    _raises(lambda: _private(be)(_zeros(be, 16), 1, ndrange=16),
            "index 4 ", "private array 'p'", "shape (4,)")


@pytest.mark.parametrize("dev", DEVS)
def test_byte_run_helpers_are_checked(dev):
    be = _backend(dev)
    u8, i8, out = _zeros(be, 32, np.uint8), _zeros(be, 32, np.int8), _zeros(be, 4)
    tab = _put(be, np.arange(16, dtype=np.float32))
    _halves(be)(out, u8, 0, ndrange=4)
    _bytes(be)(out, i8, 0, ndrange=4)
    _nibbles(be)(out, tab, u8, 0, ndrange=4)
    _raises(lambda: _halves(be)(out, u8, 1, ndrange=4), "index 32 ", "array 'a'", "shape (32,)")
    _raises(lambda: _bytes(be)(out, i8, 1, ndrange=4), "index 32 ", "array 'a'")
    _raises(lambda: _nibbles(be)(out, tab, u8, 1, ndrange=4), "index 32 ", "array 'a'")
    a, b, o = _zeros(be, 128, np.int8), _zeros(be, 32, np.int8), _zeros(be, 4, np.int32)
    _dot(be)(o, a, b, 0, ndrange=4)
    _raises(lambda: _dot(be)(o, a, b, 1, ndrange=4), "index 128 ", "shape (128,)")


@pytest.mark.parametrize("dev", DEVS)
def test_one_bad_item_partial_group_barrier_and_recovery(dev):
    be = _backend(dev)
    _raises(lambda: _one_item(be)(_zeros(be, 1024), 777, ndrange=1024), "index 1777 ", "shape (1024,)")
    # the padding items of a partial last group run nothing; item 20 of 21 is the bad one
    _raises(lambda: _shift(be)(_zeros(be, 20), 0, ndrange=21, workgroupsize=8), "index 20 ")
    _shift(be)(_zeros(be, 20), 0, ndrange=20, workgroupsize=8)
    _raises(lambda: _after_barrier(be)(_zeros(be, 16), 1, ndrange=16, workgroupsize=8), "index 16 ")
    a = _zeros(be, (2, 3, 4))
    _mirror3(be)(a, _zeros(be, (2, 3, 4)), ndrange=(2, 3, 4))   # every corner, no false positive
    assert (_get(a) == 1).all()
    a = _zeros(be, 16)
    _shift(be)(a, 0, ndrange=16)                                 # the backend is still usable
    assert (_get(a) == 1).all()


@pytest.mark.parametrize("dev", ["CPU", "INTERP", "INTERP:CHECK"])
def test_first_violation_is_reported_deterministically(dev):
    """The lowest bad work item's access (docs/debugging.md: in index order on the CPU). The
    OpenCL and WebGPU error buffers keep whichever violation stores first."""
    be = _backend(dev)
    msgs = {_raises(lambda: _scaled(be)(_zeros(be, 30), 3, ndrange=15), "index ") for _ in range(3)}
    assert len(msgs) == 1, msgs
    assert "index 30 " in msgs.pop()                                  # the lowest bad item's


@pytest.mark.parametrize("make", [tk.CPU] + [m for name, m in (("OpenCL", tk.OpenCL), ("WebGPU", tk.WebGPU))
                                             if tk.backends()[name][0]])
def test_debug_and_plain_builds_are_cached_apart(make):
    for debug in (False, True, False, True):
        be = make(debug=debug)
        a = _put(be, np.zeros(64, np.float32))
        if debug:
            _raises(lambda: _shift(be)(a, 1, ndrange=64), "index 64 ")
        else:
            _shift(be)(_put(be, np.zeros(65, np.float32)), 1, ndrange=64)   # in bounds: runs
            _shift(be)(a, 0, ndrange=64)


@tk.kernel
def _underscored(_a, n: int):
    i = tk.index()
    _a[i + n] = 1.0


@pytest.mark.parametrize("dev", DEVS)
def test_a_parameter_named_with_an_underscore_is_named(dev):
    """Before the debug table marked local arrays with '@', a global array whose name began
    with '_' was reported as 'local/private array'."""
    be = _backend(dev)
    _raises(lambda: _underscored(be)(_zeros(be, 4), 1, ndrange=4), "array '_a' with shape (4,)")


@tk.kernel
def _unsigned(a, b):
    i = tk.index()
    a[tk.uint32(i) - tk.uint32(1)] = 1.0
    b[1, tk.uint32(i) - tk.uint32(1)] = 1.0


@pytest.mark.parametrize("dev", DEVS)
def test_an_unsigned_index_is_reported_as_its_value(dev):
    """uint32 0 - 1 is 4294967295 (out of bounds), not -1: WebGPU's 32-bit signed error slots
    held it as -1 until the debug word marked unsigned slots (ir/nodes.OOB_UNSIGNED)."""
    be = _backend(dev)
    _raises(lambda: _unsigned(be)(_zeros(be, 8), _zeros(be, (2, 8)), ndrange=8), "index 4294967295 ",
            "shape (8,)")

    @tk.kernel
    def second(b):
        i = tk.index()
        b[1, tk.uint32(i) - tk.uint32(1)] = 1.0
    _raises(lambda: second(be)(_zeros(be, (2, 8)), ndrange=8), "index (1, 4294967295)", "shape (2, 8)")


@tk.kernel
def _window(y, x: tk.Const, o):
    i = tk.index()
    w = tk.private(tk.float32, 4)
    for k in range(4):
        w[k] = x[i]
    y[i] = w[i % 4 + o]


def test_jax_ffi_path_names_the_private_array():
    jax = pytest.importorskip("jax")
    import tinykernels.jax as tkjax
    f = tkjax.jax_kernel(_window, outputs=["y"], backend=tk.CPU(debug=True))
    x, y0 = jax.numpy.arange(8.0, dtype="float32"), jax.numpy.zeros(8, "float32")
    np.testing.assert_array_equal(f(y0, x, o=0), np.arange(8.0))
    with pytest.raises(Exception, match=r"kernel '_window' at .*:\d+: index 4 is out of bounds "
                                        r"for private array 'w' with shape \(4,\)"):
        jax.jit(lambda u, v: f(u, v, o=1))(y0, x).block_until_ready()
