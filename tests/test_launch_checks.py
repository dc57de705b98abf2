"""Launch-time checks on every backend: read-only arrays a kernel writes, tk.Const arrays
aliasing another argument, certain out-of-bounds accesses (issue 10, items 1, 3 and 7)."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels.passes.access import analyze
from tinykernels.runtime.memspan import byte_span, may_alias, spans_overlap

HOST = ["CPU", "CPU-py", "INTERP"]
DEVICE = [name for name, dev in (("OpenCL", "CL"), ("WebGPU", "WEBGPU")) if tk.backends()[name][0]]


def _kernels():
    """Fresh kernels (so a monkeypatched TK_PY_LAUNCHER is seen by their instances)."""
    @tk.kernel
    def add1(a, b: tk.Const):
        i = tk.index()
        a[i] = b[i] + 1

    @tk.kernel
    def count(hist, x: tk.Const):
        i = tk.index()
        tk.atomic_add(hist, 0, x[i])

    @tk.kernel
    def scale(a, s):
        i = tk.index()
        a[i] = a[i] * s

    return add1, count, scale


@pytest.fixture(params=HOST)
def host(request, monkeypatch):
    if request.param == "CPU-py":
        monkeypatch.setenv("TK_PY_LAUNCHER", "1")
        return "CPU"
    return request.param


def _readonly(kind: str) -> np.ndarray:
    if kind == "flag":
        a = np.zeros(4, np.float32)
        a.flags.writeable = False
        return a
    if kind == "bytes":
        return np.frombuffer(bytes(16), np.float32)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["flag", "bytes"])
def test_a_read_only_array_the_kernel_stores_to_is_refused(host, kind):
    add1, count, _ = _kernels()
    ro = _readonly(kind)
    for _ in range(2):                                   # also once the signature is known
        with pytest.raises(tk.LaunchError, match=r"kernel 'add1': argument 'a' is read-only .*writes to it "
                                                 r"\(.*test_launch_checks.py:\d+\)"):
            add1(host)(ro, np.ones(4, np.float32), ndrange=4)
    assert (ro == 0).all()
    with pytest.raises(tk.LaunchError, match="argument 'hist' is read-only"):
        count(host)(_ro_int(), np.ones(4, np.int32), ndrange=4)


def _ro_int():
    a = np.zeros(1, np.int32)
    a.flags.writeable = False
    return a


def test_read_only_arrays_the_kernel_only_reads_are_fine(host):
    add1, _, _ = _kernels()
    ro = _readonly("bytes")
    out = np.zeros(4, np.float32)
    add1(host)(out, ro, ndrange=4)
    add1(host)(out, ro, ndrange=4)
    np.testing.assert_array_equal(out, np.ones(4))
    w = np.zeros(4, np.float32)                          # the writeable array still launches
    add1(host)(w, np.ones(4, np.float32), ndrange=4)
    np.testing.assert_array_equal(w, 2 * np.ones(4))


def test_a_read_only_memmap_is_refused_not_a_crash(host, tmp_path):
    _, _, scale = _kernels()
    path = tmp_path / "data.bin"
    np.arange(8, dtype=np.float64).tofile(path)
    m = np.memmap(path, np.float64, mode="r")
    with pytest.raises(tk.LaunchError, match="argument 'a' is read-only"):
        scale(host)(m, 2.0, ndrange=8)
    np.testing.assert_array_equal(np.fromfile(path, np.float64), np.arange(8.0))


def test_torch_tensors_are_writeable(host):
    torch = pytest.importorskip("torch")
    _, _, scale = _kernels()
    t = torch.arange(4, dtype=torch.float64)
    scale(host)(t, 3.0, ndrange=4)
    np.testing.assert_array_equal(t.numpy(), 3 * np.arange(4.0))


def _expanded(kind: str, n: int):
    """A writeable array of ``n`` elements that all share one (stride 0)."""
    if kind == "torch":
        torch = pytest.importorskip("torch")
        return torch.zeros(1, dtype=torch.int32).expand(n)
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.int32), (n,), (0,))


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_an_array_whose_elements_share_memory_is_refused_where_the_kernel_writes(host, kind):
    """torch.expand / a writeable stride-0 view: every item stored to one element, so the
    CPU raced (4 of 4 increments, or fewer) while the interpreter kept one item's value;
    torch itself refuses in-place updates of such tensors. A read is fine."""
    _, count, _ = _kernels()

    @tk.kernel
    def bump(a, b: tk.Const):
        i = tk.index()
        a[i] = a[i] + b[i]

    msg = (r"kernel '(bump|count)': argument '(a|hist)' has elements that share memory \(stride 0 along its "
           r"dimension 0 of extent 4.*writes to it \(.*test_launch_checks.py:\d+\)")
    for _ in range(2):                                   # also once the signature is known
        with pytest.raises(tk.LaunchError, match=msg):
            bump(host)(_expanded(kind, 4), np.ones(4, np.int32), ndrange=4)
    with pytest.raises(tk.LaunchError, match=msg):
        count(host)(_expanded(kind, 4), np.ones(4, np.int32), ndrange=4)
    out, three = np.zeros(4, np.int32), _expanded(kind, 4)
    if kind == "numpy":
        three[:1] = 3
    else:
        three[:1].fill_(3)
    for _ in range(2):                                   # read through a stride 0: fine, also relaunched
        bump(host)(out, three, ndrange=4)
    np.testing.assert_array_equal(out, [6, 6, 6, 6])

    @tk.kernel
    def guarded(a):
        i = tk.index()
        if i < a.shape[0]:
            a[i, 1] = 1

    empty = np.zeros((0, 4), np.int32)                   # NumPy gives an empty array zero strides:
    assert empty.strides == (0, 0)                       # it has no element to share
    for _ in range(2):
        guarded(host)(empty, ndrange=4)
    one = _expanded(kind, 1)                             # a stride 0 over one element shares nothing
    bump(host)(one, np.full(1, 5, np.int32), ndrange=1)
    assert int(one[0]) == 5


def test_const_argument_aliasing_another_is_refused(host):
    add1, _, _ = _kernels()
    z = np.zeros(8, np.float32)
    msg = r"kernel 'add1': argument 'b' is annotated tk.Const .* shares memory with argument 'a'"
    for _ in range(2):
        with pytest.raises(tk.LaunchError, match=msg):
            add1(host)(z, z, ndrange=4)
    with pytest.raises(tk.LaunchError, match=msg):
        add1(host)(z[:4], z[3:7], ndrange=4)             # overlapping views
    with pytest.raises(tk.LaunchError, match=msg):
        add1(host)(z[::-2], z[1::2][::-1], ndrange=4)    # the same elements, reversed
    assert (z == 0).all()
    add1(host)(z[:4], z[4:], ndrange=4)                  # disjoint halves: fine (fast path, again)
    add1(host)(z[:4], z[4:], ndrange=4)
    add1(host)(z[0::2], z[1::2], ndrange=4)              # interleaved, no shared element: fine
    np.testing.assert_array_equal(z[0::2], [2, 2, 1, 1])


def test_two_non_const_arrays_may_alias(host):
    @tk.kernel
    def copy(a, b):
        i = tk.index()
        a[i] = b[i] + 1
    z = np.zeros(4)
    copy(host)(z, z, ndrange=4)
    np.testing.assert_array_equal(z, np.ones(4))


@pytest.mark.parametrize("dev", DEVICE)
def test_device_checks(dev):
    add1, _, _ = _kernels()
    y = tk.asarray(np.ones(4, np.float32), backend=dev)
    z = tk.asarray(np.ones(8, np.float32), backend=dev)
    with pytest.raises(tk.LaunchError, match="argument 'b' is annotated tk.Const .* argument 'a'"):
        add1(dev)(y, y, ndrange=4)
    with pytest.raises(tk.LaunchError, match=r"argument 'a' with shape \(4,\) is indexed out of bounds.*TK_DEBUG=1"):
        add1(dev)(y, z, ndrange=8)
    add1(dev)(y, z, ndrange=4)
    np.testing.assert_array_equal(y.numpy(), 2 * np.ones(4))


def test_memspan_helpers():
    assert byte_span(1000, (3, 4), (32, 8), 8) == (1000, 1096)
    assert byte_span(1000, (3,), (-8,), 8) == (984, 1008)
    assert byte_span(1000, (0, 4), (32, 8), 8) == (1000, 1000)
    assert spans_overlap((0, 8), (7, 9)) and not spans_overlap((0, 8), (8, 9))
    assert not spans_overlap((5, 5), (0, 10))
    a = np.zeros((4, 4))
    assert may_alias(a, a.T) and may_alias(a[1], a[:, 1]) and not may_alias(a[0], a[1])
    assert not may_alias(a[:, 0], a[:, 1])               # interleaved columns share no element
    assert not may_alias(a[:0], a)


# --- certain out-of-bounds accesses -----------------------------------------------------------

@tk.kernel
def stencil(out, u: tk.Const):
    i = tk.index(tk.Global, tk.Cartesian)[0]
    out[i] = u[i - 1] + u[i + 1]


@tk.kernel
def guarded(out, u: tk.Const, n):
    i = tk.index()
    if i >= n:
        return
    out[i] = u[i]


@tk.kernel
def guarded_expr(out, u: tk.Const, n):
    i = tk.index()
    out[i] = u[i + 1] if i + 1 < n else 0.0


@tk.kernel
def looped(out, u: tk.Const, m):
    i = tk.index()
    for k in range(m):
        out[i] += u[i + k]


@tk.kernel
def transpose(out, a: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[j, i] = a[i, j]


@tk.kernel(unsafe_indices=True)
def unsafe(out, u: tk.Const):
    i = tk.index()
    out[i] = u[i]


@pytest.mark.parametrize("be", ["CPU", "CPU-py"] + DEVICE)
def test_certain_out_of_bounds_is_refused_at_launch(be, monkeypatch):
    if be == "CPU-py":
        monkeypatch.setenv("TK_PY_LAUNCHER", "1")
        be = tk.CPU(threads=2)                           # a distinct instance: the ctypes launcher
    conv = (lambda a: tk.asarray(a, backend=be)) if be in DEVICE else (lambda a: a)
    u, out = conv(np.arange(10, dtype=np.float32)), conv(np.zeros(10, np.float32))
    stencil(be)(out, u, ndrange=range(1, 9))             # the valid interior
    with pytest.raises(tk.LaunchError, match=r"kernel 'stencil' at .*test_launch_checks.py:\d+: argument 'u' "
                                             r"with shape \(10,\) is indexed out of bounds: its dimension 0 "
                                             r"reaches index -1 over the ndrange 9.*TK_DEBUG=1"):
        stencil(be)(out, u, ndrange=range(0, 9))
    with pytest.raises(tk.LaunchError, match="reaches index 10"):
        stencil(be)(out, u, ndrange=range(1, 10))
    a = conv(np.zeros((3, 5), np.float32))
    with pytest.raises(tk.LaunchError, match=r"argument 'out' with shape \(3, 5\).*dimension 0 reaches index 4"):
        transpose(be)(a, conv(np.zeros((3, 5), np.float32)), ndrange=(3, 5))
    transpose(be)(a, conv(np.ones((5, 3), np.float32)), ndrange=(5, 3))
    if be not in DEVICE:
        np.testing.assert_array_equal(a, np.ones((3, 5)))


@tk.kernel
def last_of(out, u: tk.Const):
    i = tk.index()
    j = 2
    out[i] = u[-1] + u[j + 1] + u[0]      # u[-1] is no NumPy wrap-around: outside the array


@tk.kernel
def const_within(out, u: tk.Const):
    i = tk.index()
    out[i] = u[0] + u[u.shape[0] - 1] + u[3]


@pytest.mark.parametrize("be", ["CPU", "CPU-py"] + DEVICE)
def test_constant_index_out_of_bounds_is_refused_at_launch(be, monkeypatch):
    # a constant index outside the array (A[-1] written the NumPy way) read or wrote the memory
    # next to the array on the compiled backends, silently
    if be == "CPU-py":
        monkeypatch.setenv("TK_PY_LAUNCHER", "1")
        be = tk.CPU(threads=2)
    conv = (lambda a: tk.asarray(a, backend=be)) if be in DEVICE else (lambda a: a)
    u, out = conv(np.arange(10, dtype=np.float32)), conv(np.zeros(4, np.float32))
    with pytest.raises(tk.LaunchError, match=r"kernel 'last_of' at .*test_launch_checks.py:\d+: argument 'u' "
                                             r"with shape \(10,\) is indexed out of bounds: index -1 in its "
                                             r"dimension 0 \(negative indices do not wrap around in kernels: "
                                             r"write u.shape\[0\] - 1\)"):
        last_of(be)(out, u, ndrange=4)
    last_of(be)(out, u, ndrange=0)                       # launches nothing: not an error
    with pytest.raises(tk.LaunchError, match=r"argument 'u' with shape \(3,\) is indexed out of bounds: index 3 "):
        const_within(be)(out, conv(np.zeros(3, np.float32)), ndrange=4)
    const_within(be)(out, u, ndrange=4)
    if be in DEVICE:
        out = out.numpy()
    np.testing.assert_array_equal(out, np.full(4, 12, np.float32))


@tk.kernel
def guarded_constants(out, n):
    i = tk.index()
    tile = tk.localmem(tk.float32, (4,))
    tile[i % 4] = 1.0
    if n > 100:                        # never taken here: the accesses below never run
        out[-1] = tile[7]
        tile[-2] = 3.0
    out[i] = tile[i % 4] * 2


@pytest.mark.parametrize("be", ["CPU", "INTERP"] + DEVICE)
def test_constant_indices_outside_arrays_compile_where_they_never_run(be):
    # naga (WebGPU) refused to compile such a kernel ("Accessing ... via a negative index is
    # invalid"), which the other backends run
    out = tk.asarray(np.zeros(4, np.float32), backend=be)
    guarded_constants(be, 4)(out, 3, ndrange=4)
    np.testing.assert_array_equal(out.numpy(), np.full(4, 2, np.float32))


@pytest.mark.parametrize("be", ["CPU"] + DEVICE)
def test_guarded_and_looped_accesses_are_not_refused(be):
    conv = (lambda a: tk.asarray(a, backend=be)) if be in DEVICE else (lambda a: a)
    u, out = conv(np.arange(4, dtype=np.float32)), conv(np.zeros(8, np.float32))
    guarded(be)(out, u, 4, ndrange=8)
    guarded_expr(be)(out, u, 4, ndrange=4)
    looped(be)(out, u, 0, ndrange=8)
    unsafe(be)(out, u, ndrange=4, workgroupsize=4)   # one full group: no item past the ndrange


@tk.kernel(unsafe_indices=True)
def unsafe_grid(out, u: tk.Const):
    i, j = tk.index(tk.Global, tk.Cartesian)
    out[i, j] = u[i + 1, j]


@pytest.mark.parametrize("be", ["CPU", "CPU-py"] + DEVICE)
def test_unguarded_unsafe_indices_kernels_are_checked_over_their_padded_groups(be, monkeypatch):
    # an unsafe_indices kernel runs every statement in the items past the ndrange of its last,
    # partial group (SPEC section 3): unguarded, u[i] and out[i] certainly leave the arrays.
    # The launch checks used to skip such kernels: the CPU (since gradfz22), OpenCL and WebGPU
    # then read and wrote past the arrays, silently
    if be == "CPU-py":
        monkeypatch.setenv("TK_PY_LAUNCHER", "1")
        be = tk.CPU(threads=2)
    conv = (lambda a: tk.asarray(a, backend=be)) if be in DEVICE else (lambda a: a)
    host = (lambda a: a.numpy()) if be in DEVICE else (lambda a: a)
    u, out = conv(np.arange(1, 9, dtype=np.float32)), conv(np.zeros(8, np.float32))
    unsafe(be)(out, u, ndrange=8, workgroupsize=4)              # whole groups: fine
    unsafe(be)(out, u, ndrange=6, workgroupsize=4)              # padded to 8 items: still inside
    np.testing.assert_array_equal(host(out), np.arange(1, 9))
    small = conv(np.zeros(6, np.float32))
    with pytest.raises(tk.LaunchError, match=r"kernel 'unsafe' at .*test_launch_checks.py:\d+: argument 'out' "
                                             r"with shape \(6,\) is indexed out of bounds: its dimension 0 reaches "
                                             r"index 7 in the work items past the ndrange 6 \(an unsafe_indices kernel "
                                             r"runs every statement in every item of its last, partial group of 4 along "
                                             r"dimension 0\); guard the access \(if i < n:\)"):
        unsafe(be)(small, u, ndrange=6, workgroupsize=4)
    unsafe(be)(conv(np.zeros(256, np.float32)), conv(np.ones(256, np.float32)), ndrange=200)        # the default group (256 in 1-D): padded to 256, inside;
    for _ in range(2):                       # the CPU launcher now has a plan and checks itself
        with pytest.raises(tk.LaunchError, match=r"argument .u. with shape \(8,\).*reaches index 255 in the work items past the ndrange 4 .*group of 256"):
            unsafe(be)(out, u, ndrange=4)
    with pytest.raises(tk.LaunchError, match=r"argument 'u'.*index 8 over the ndrange \(8, 1\); rerun"):
        unsafe_grid(be)(conv(np.zeros((8, 1), np.float32)), conv(np.zeros((8, 1), np.float32)),
                        ndrange=(8, 1), workgroupsize=(8, 1))          # u[i + 1]: outside without padding too
    a, b = conv(np.zeros((4, 8), np.float32)), conv(np.ones((5, 8), np.float32))
    unsafe_grid(be)(a, b, ndrange=(3, 5), workgroupsize=(2, 4))     # padded to (4, 8): inside both
    assert host(a).sum() == 32
    with pytest.raises(tk.LaunchError, match=r"argument 'out' with shape \(3, 8\).*dimension 0 reaches index 3 "
                                             r"in the work items past the ndrange \(3, 5\).*group of 2 along dimension 0"):
        unsafe_grid(be)(conv(np.zeros((3, 8), np.float32)), b, ndrange=(3, 5), workgroupsize=(2, 4))


def test_the_analysis_is_conservative():
    def facts(kern, *args, ndrange):
        inst = kern(tk.CPU())
        norm, geom, ndim, ranges, total, wg = inst._prepare(args, ndrange, None)
        return analyze(inst._ir(norm, geom, ndim, ranges, wg))
    u = np.zeros(4, np.float32)
    assert facts(guarded, u, u, 4, ndrange=4).affine == ()
    assert {(f.array, f.offset) for f in facts(guarded_expr, u, u, 4, ndrange=4).affine} == {("out", 0)}
    assert {(f.array, f.offset) for f in facts(looped, u, u, 4, ndrange=4).affine} == set()
    # an unsafe_indices kernel's facts carry its group size (the items past the ndrange run)
    assert {(f.array, f.kind, f.pad) for f in facts(unsafe, u, u, ndrange=4).affine} == \
        {("out", "global_linear", 256), ("u", "global_linear", 256)}
    info = facts(stencil, u, u, ndrange=4)
    assert info.written == {"out": info.affine[-1].site} and {f.offset for f in info.affine} == {-1, 0, 1}


def test_debug_mode_reports_the_access_itself():
    u, out = np.arange(10, dtype=np.float32), np.zeros(10, np.float32)
    with pytest.raises(IndexError, match="index -1 is out of bounds for array 'u'"):
        stencil(tk.CPU(debug=True))(out, u, ndrange=range(0, 9))


@tk.kernel
def late_reader(out, u: tk.Const):
    i = tk.index()
    x = 0.0
    if i >= 1000:                      # guarded: no launch-time refusal, debug mode reports it
        x = u[i]
    out[i] = x


def test_debug_mode_reports_the_first_bad_work_item_whatever_the_thread_order():
    cpu = tk.CPU(threads=4, debug=True)
    for _ in range(5):                 # threads 2-4 meet a bad index before thread 1 does
        with pytest.raises(IndexError, match=r"index 1000 is out of bounds for array 'u' with shape \(1000,\)"):
            late_reader(cpu)(np.zeros(200000, np.float32), np.zeros(1000, np.float32), ndrange=200000)


# --- byte order and alignment of host arrays ------------------------------------------------------

@pytest.mark.parametrize("name", HOST[:1] + HOST[2:] + DEVICE)
def test_asarray_of_a_byte_swapped_array_holds_native_values(name):
    """tk.asarray of a non-native byte order array ('>f4' on a little-endian host) converts it:
    a device upload used to copy the swapped bytes and keep dtype '>f4', so a kernel computed
    on garbage values (0..3 + 1 read back as 4.6e-41) without any error."""
    be = np.arange(4, dtype=np.float32).astype(np.dtype(np.float32).newbyteorder(">" if np.little_endian else "<"))
    a = tk.asarray(be, backend=tk.backend(name))
    assert a.dtype == np.float32 and a.dtype.isnative
    _, _, scale = _kernels()
    scale(a.backend)(a, 2.0, ndrange=4)
    tk.synchronize(a.backend)
    np.testing.assert_array_equal(a.numpy(), [0, 2, 4, 6])


def test_unaddressable_host_arrays_get_a_fix_that_works(host):
    """A byte-swapped, misaligned or odd-strided host array is a LaunchError whose advice fixes
    it (it advised np.ascontiguousarray, which keeps both the byte order and the misalignment)."""
    _, _, scale = _kernels()
    swapped = np.arange(4, dtype=np.float32).astype(np.dtype(np.float32).newbyteorder())
    misaligned = np.zeros(17, np.uint8)[1:].view(np.float32)
    odd = np.lib.stride_tricks.as_strided(np.zeros(10, np.float32), (3,), (6,))
    for a, why, fix in ((swapped, "byte-swapped", lambda x: np.array(x, dtype=x.dtype.newbyteorder("="))),
                        (misaligned, "not aligned", lambda x: x.copy()),
                        (odd, "strides", lambda x: x.copy())):
        with pytest.raises(tk.LaunchError, match=f"kernel 'scale': argument 'a' .*{why}"):
            scale(tk.backend(host))(a, 2.0, ndrange=a.shape[0])
        b = fix(a)
        scale(tk.backend(host))(b, 2.0, ndrange=a.shape[0])
        tk.synchronize(tk.backend(host))
        np.testing.assert_array_equal(b, a.astype(np.float32) * 2)


def test_launch_names_the_kernel_and_argument_it_cannot_place():
    """``kernel.launch`` takes its backend from the first array argument; an argument it cannot
    place on a device (a list, None, a string, a torch tensor on the meta device) is a
    tk.LaunchError naming the kernel and the argument (SPEC 2), as the instance's own check
    does. It said only 'cannot tell which device a builtins.list lives on'."""
    _, _, scale = _kernels()
    for bad, what in (([1.0, 2.0], "builtins.list"), (None, "builtins.NoneType"), ("ab", "builtins.str")):
        with pytest.raises(tk.LaunchError, match=f"kernel 'scale': argument 'a': cannot tell which device a {what}"):
            scale.launch(bad, 2.0, ndrange=2)
        with pytest.raises(tk.LaunchError, match="kernel 'scale': argument 'a' has unsupported type"):
            scale(tk.CPU())(bad, 2.0, ndrange=2)
    torch = pytest.importorskip("torch")
    with pytest.raises(tk.LaunchError, match="kernel 'scale': argument 'a': no tinykernels backend for a torch "
                                             "tensor on meta"):
        scale.launch(torch.zeros(2, device="meta"), 2.0, ndrange=2)
    with pytest.raises(tk.LaunchError, match="kernel 'scale': argument 'a': cannot tell"):
        scale.launch(s=2.0, a=[1.0], ndrange=1)
