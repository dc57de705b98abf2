"""SPEC sections 1-9 read sentence by sentence as a stranger's test author would (audit user23):
corners that no earlier audit (test_spec_audit19/21, test_user_programs22) checked as stated,
against NumPy or Python. The language tests run on the CPU and the interpreter (the point is the
language, not a backend); a backend matrix only where the point is portability. The tests named
``..._was_...`` failed before this audit's fixes (what they were is in their docstrings)."""
import itertools
import math

import numpy as np
import pytest

import tinykernels as tk

DEVS = ["CPU", "INTERP"]
_AVAIL = tk.backends()
PORTABLE = DEVS + [pytest.param(d, marks=pytest.mark.skipif(not _AVAIL[n][0], reason=f"{n}: {_AVAIL[n][1]}"))
                   for d, n in (("CL", "OpenCL"), ("WEBGPU", "WebGPU"))]


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


# ------------------------------------- section 3: constants fold with Python's arithmetic (2 ** -3)

@tk.kernel
def plus_eps(out, x: tk.Const):
    i = tk.index()
    e = 2 ** -2                      # a weak float 0.25: x * e stays x's float type
    out[i] = x[i] * e + 10 ** -6


@tk.kernel
def times_pow2(out, x: tk.Const, n: tk.constexpr):
    i = tk.index()
    out[i] = x[i] * 2 ** n + (-2) ** -1


@tk.kernel
def zero_to_minus_one(out):
    i = tk.index()
    out[i] = 0 ** -1


@pytest.mark.parametrize("dev", DEVS)
def test_int_constants_to_negative_powers_are_python_floats_was_zero(dev):
    """SPEC 3: Python literals are weak; language.md: constant expressions (literals, constexprs)
    fold with Python's own arithmetic, where ``2 ** -2`` is 0.25 and ``10 ** -6`` is 1e-6.
    Both were the run-time integer power (0), so ``x[i] + 10 ** -6`` added nothing and
    ``x[i] * 2 ** n`` with a constexpr ``n = -3`` was 0 on every backend. ``0 ** -1`` is
    Python's ZeroDivisionError: a CompileError at the line."""
    b = tk.backend(dev)
    rng = np.random.default_rng(23)
    x = rng.standard_normal(8).astype(np.float32)
    out = np.zeros(8, np.float32)
    plus_eps(b)(out, x, ndrange=8).wait()
    np.testing.assert_array_equal(out, x * 2 ** -2 + 10 ** -6)      # NumPy: weak floats, float32
    out64 = np.zeros(8)
    times_pow2(b)(out64, x.astype(np.float64), -3, ndrange=8).wait()
    np.testing.assert_array_equal(out64, x.astype(np.float64) * 2 ** -3 + (-2) ** -1)
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*0 \*\* -1"):
        zero_to_minus_one(b)(np.zeros(2), ndrange=2)


# ------------------------------------------ section 7: tk.adjoint(k) is a kernel: .launch, stream=

@tk.kernel
def cube(y, x: tk.Const):
    i = tk.index()
    y[i] = x[i] * x[i] * x[i]


@tk.kernel
def fill_with(x, v):
    i = tk.index()
    x[i] = v


@pytest.mark.parametrize("dev", DEVS)
def test_adjoint_kernel_launches_like_a_kernel_and_honours_its_stream_was_ignored(dev):
    """SPEC 7: ``tk.adjoint(kernel)`` returns the adjoint kernel itself; SPEC 2: a kernel has
    ``.launch`` (backend from the arrays); SPEC 6: ``k(..., stream=s)`` is ordered within ``s``.
    The adjoint had no ``.launch`` (AttributeError) and accepted any ``stream=``, a foreign one
    too, and ignored it (it ran on the default stream, so it could read ``x`` before the fill
    queued on ``s``)."""
    b = tk.backend(dev)
    adj = tk.adjoint(cube)
    assert adj.name == "cube"
    rng = np.random.default_rng(7)
    x = rng.standard_normal(16)
    dy = rng.standard_normal(16)
    dx = np.zeros(16)
    if dev == "CPU":                                   # .launch: the backend from NumPy arrays
        adj.launch(np.zeros(16), dy.copy(), x, dx, ndrange=16).wait()
    else:
        adj(b)(np.zeros(16), dy.copy(), x, dx, ndrange=16).wait()
    np.testing.assert_allclose(dx, 3 * x ** 2 * dy, rtol=1e-14)

    n = 4096
    xs, ys = tk.zeros(n, tk.float64, backend=b), tk.zeros(n, tk.float64, backend=b)
    dys, dxs = tk.ones(n, tk.float64, backend=b), tk.zeros(n, tk.float64, backend=b)
    s = b.stream(priority=tk.Low)
    fill_with(b)(xs, 0.5, ndrange=n, stream=s)
    ev = adj.launch(ys, dys, xs, dxs, ndrange=n, stream=s)
    assert isinstance(ev, tk.Event)
    s.synchronize()
    np.testing.assert_array_equal(dxs.numpy(), np.full(n, 3 * 0.5 ** 2))
    other = (tk.Interpreter() if dev == "CPU" else tk.CPU()).stream()
    with pytest.raises(tk.LaunchError, match="adjoint of 'cube': the stream belongs to another backend"):
        adj(b)(ys, dys, xs, dxs, ndrange=n, stream=other)
    with pytest.raises(tk.LaunchError, match="adjoint of 'cube': ndrange= is missing"):
        adj.launch(ys, dys, xs, dxs)


# ------------------------------------------------- section 1: what @tk.kernel and @tk.func return

@tk.kernel
def documented(out):
    """Writes ones."""
    out[tk.index()] = 1.0


@tk.func
def helper(x):
    """Doubles x."""
    return 2 * x


@tk.kernel
def calls_a_kernel(out):
    documented(out)


def test_kernels_and_funcs_keep_the_functions_name_was_missing():
    """What ``functools.wraps`` (and Numba's dispatchers) give a decorated function: its
    ``__name__``, ``__qualname__``, ``__module__`` and ``__doc__``. ``__name__`` was an
    AttributeError on ``@tk.kernel`` and ``@tk.func`` objects."""
    for obj, name, doc in ((documented, "documented", "Writes ones."), (helper, "helper", "Doubles x.")):
        assert (obj.__name__, obj.__qualname__, obj.__module__, obj.__doc__) == (name, name, __name__, doc)


def test_calling_a_kernel_from_a_kernel_says_to_use_a_func():
    """SPEC 3: calls of unknown Python functions are a CompileError naming file, line and column;
    a kernel called from a kernel is the likely mistake of a stranger, and the error says what
    to write instead (a @tk.func)."""
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*cannot call 'documented' in a "
                                              r"kernel \(a @tk\.kernel is launched from the host.*@tk\.func"):
        calls_a_kernel(tk.CPU())(np.zeros(2), ndrange=2)


# ------------------------------------------------- section 2: launch-time errors and range geometry

@tk.kernel
def store_constexpr(out, n: tk.constexpr):
    i = tk.index()
    out[i] = n


@tk.kernel
def store_const_scalar(out, s: tk.Const):
    i = tk.index()
    out[i] = 1.0


@tk.kernel
def geometry_of_a_range(out):
    k = tk.index()
    (c,) = tk.index(tk.Global, tk.Cartesian)
    out[k, 0] = c
    out[k, 1] = tk.ndrange()[0]
    out[k, 2] = tk.groupsize()[0]
    out[k, 3] = tk.ngroups()[0]
    out[k, 4] = tk.index(tk.Local, tk.Linear)
    out[k, 5] = tk.index(tk.Group, tk.Linear)


@pytest.mark.parametrize("dev", DEVS)
def test_launch_errors_name_the_kernel_and_the_argument(dev):
    """SPEC 2: launch-time errors (unsupported argument type, rank mismatch, zero or negative
    sizes) are a tk.LaunchError with the kernel's name and the argument's name: a constexpr
    that is no bool/int/float/dtype, tk.Const on a scalar, a launch workgroup size that
    contradicts the static one, an ndrange of floats or bools."""
    b = tk.backend(dev)
    out = np.zeros(4)
    for bad in ("abc", None, np.zeros(3)):
        with pytest.raises(tk.LaunchError, match=r"kernel 'store_constexpr': constexpr argument 'n' must be"):
            store_constexpr(b)(out, bad, ndrange=4)
    with pytest.raises(tk.LaunchError, match=r"kernel 'store_const_scalar': argument 's' is annotated tk\.Const"):
        store_const_scalar(b)(out, 2.0, ndrange=4)
    with pytest.raises(tk.LaunchError, match=r"kernel 'store_constexpr' was instantiated with workgroup size 2"):
        store_constexpr(b, 2)(out, 1, ndrange=4, workgroupsize=4)
    for nd in (4.0, True, (2, 2.0)):
        with pytest.raises(tk.LaunchError, match=r"kernel 'store_constexpr': ndrange dimensions must be ints"):
            store_constexpr(b)(out, 1, ndrange=nd)
    for wg in (0, -2, 2.0):
        with pytest.raises(tk.LaunchError, match=r"kernel 'store_constexpr': workgroupsize must be a positive int"):
            store_constexpr(b)(out, 1, ndrange=4, workgroupsize=wg)
    store_constexpr(b, 2)(out, 1.5, ndrange=4, workgroupsize=2).wait()      # the same size again: fine
    assert out.tolist() == [1.5] * 4


@pytest.mark.parametrize("dev", DEVS)
def test_geometry_queries_over_a_range_with_a_negative_step(dev):
    """SPEC 2: a range dimension's ``tk.index(tk.Global, tk.Cartesian)`` is ``start + k * step``
    while the linear index is the 0-based position k; SPEC 3: ``tk.ndrange()``, ``groupsize()``
    and ``ngroups()`` describe the index space of k (len(range) items), and the local and group
    indices split k (a partial last group)."""
    b = tk.backend(dev)
    r, wg = range(10, 2, -2), 3
    out = np.full((len(r), 6), -1, np.int64)
    geometry_of_a_range(b)(out, ndrange=r, workgroupsize=wg).wait()
    k = np.arange(len(r))
    want = np.stack([np.array(r), np.full(len(r), len(r)), np.full(len(r), wg),
                     np.full(len(r), -(-len(r) // wg)), k % wg, k // wg], 1)
    np.testing.assert_array_equal(out, want)


def test_an_array_of_sizes_as_ndrange_says_to_pass_a_tuple_was_called_a_dimension():
    """SPEC 2: ``ndrange`` is an int or a tuple of 1 to 3 ints. ``ndrange=np.array(A.shape)``
    was refused as "ndrange dimensions must be ints or ranges, got array([3, 4])", as if the
    array were one dimension; the error now names what ndrange must be and how to convert."""
    out = np.zeros((3, 4))
    with pytest.raises(tk.LaunchError, match=r"kernel 'store_constexpr': ndrange must be an int or a tuple of 1 to "
                                             r"3 ints or ranges, got a ndarray .*tuple\(int\(n\) for n in ndrange\)"):
        store_constexpr(tk.CPU())(out, 1, ndrange=np.array(out.shape))
    with pytest.raises(tk.LaunchError, match=r"got a ndarray array\(4\): pass int\(ndrange\)"):
        store_constexpr(tk.CPU())(out, 1, ndrange=np.array(4))


# ------------------------------------------- section 3: A.dtype is a compile-time constant (==, !=)

@tk.kernel
def half_or_not(out, x: tk.Const):
    i = tk.index()
    if x.dtype == tk.float16 or x.dtype == tk.bfloat16:
        out[i] = 16
    elif x.dtype != np.float64 and x.dtype == out.dtype:
        out[i] = 1
    else:
        out[i] = 2


@tk.kernel
def dtype_less(out, x: tk.Const):
    i = tk.index()
    out[i] = x.dtype < tk.float32


@tk.kernel
def dtype_vs_number(out, x: tk.Const):
    i = tk.index()
    out[i] = x.dtype == 3


@pytest.mark.parametrize("dev", DEVS)
def test_dtypes_compare_at_compile_time_was_a_compile_error(dev):
    """SPEC 3: ``A.dtype`` is a compile-time constant "so one kernel serves every dtype"; the
    natural way to specialize a branch, ``if x.dtype == tk.float16:``, was a CompileError
    ("dtype float16 used where a number is expected"). ``==``/``!=`` against dtypes (tk's,
    NumPy's, another array's ``.dtype``) now fold to a constant, as in Python; ``<`` and a
    dtype compared with a number stay CompileErrors naming the line."""
    b = tk.backend(dev)
    for xdt, odt, want in ((np.float16, np.float32, 16), (np.float32, np.float32, 1), (np.int32, np.int32, 1),
                           (np.float64, np.float64, 2), (np.float32, np.float64, 2)):
        out = np.zeros(3, odt)
        half_or_not(b)(out, np.zeros(3, xdt), ndrange=3).wait()
        assert out.tolist() == [want] * 3, (xdt, odt)
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*dtypes compare with == and != only"):
        dtype_less(b)(np.zeros(3), np.zeros(3, np.float32), ndrange=3)
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*compared with something that is "
                                              r"not a dtype"):
        dtype_vs_number(b)(np.zeros(3), np.zeros(3, np.float32), ndrange=3)


@tk.kernel
def geometry_3d(out):
    g = tk.index(tk.Global, tk.Cartesian)
    l = tk.index(tk.Local, tk.Cartesian)
    r = tk.index(tk.Group, tk.Cartesian)
    k = tk.index()
    n, gs, ng = tk.ndrange(), tk.groupsize(), tk.ngroups()
    out[k, 0], out[k, 1], out[k, 2] = g
    out[k, 3], out[k, 4], out[k, 5] = l
    out[k, 6], out[k, 7], out[k, 8] = r
    out[k, 9] = n[0] * 10000 + gs[0] * 100 + ng[0]
    out[k, 10] = n[1] * 10000 + gs[1] * 100 + ng[1]
    out[k, 11] = n[2] * 10000 + gs[2] * 100 + ng[2]
    out[k, 12] = tk.index(tk.Local, tk.Linear)
    out[k, 13] = tk.index(tk.Group, tk.Linear)


@pytest.mark.parametrize("dev", PORTABLE)
def test_every_index_query_over_3d_ranges_with_partial_groups(dev):
    """SPEC 2 and 3 on every backend (the point is portability): over a 3-D ndrange of ranges
    (one with a negative step) and a workgroup that leaves a partial group in every dimension,
    each work item's global, local and group coordinates, the linear local and group indices
    (row-major, the last dimension fastest) and ndrange()/groupsize()/ngroups() equal a Python
    model of the index space."""
    ranges, wg = (range(5), range(7, 1, -2), range(2, 9)), (2, 2, 4)
    ng = [-(-len(r) // w) for r, w in zip(ranges, wg)]
    want = np.zeros((5 * 3 * 7, 14), np.int32)
    for pos in itertools.product(*[range(len(r)) for r in ranges]):
        k = (pos[0] * len(ranges[1]) + pos[1]) * len(ranges[2]) + pos[2]
        loc = [p % w for p, w in zip(pos, wg)]
        grp = [p // w for p, w in zip(pos, wg)]
        want[k] = ([r[p] for r, p in zip(ranges, pos)] + loc + grp
                   + [len(r) * 10000 + w * 100 + m for r, w, m in zip(ranges, wg, ng)]
                   + [(loc[0] * wg[1] + loc[1]) * wg[2] + loc[2], (grp[0] * ng[1] + grp[1]) * ng[2] + grp[2]])
    b = tk.backend(dev)
    out = tk.zeros(want.shape, tk.int32, backend=b)
    geometry_3d(b)(out, ndrange=ranges, workgroupsize=wg)
    np.testing.assert_array_equal(out.numpy(), want)


# ------------------------------------------------ section 3: constant slices of tuples (A.shape[-2:])

@tk.kernel
def tuple_slices(out, a: tk.Const):
    I = tk.index(tk.Global, tk.Cartesian)
    n, m = a.shape[-2:]
    j, k = I[1:]
    r = I[::-1]
    out[I] = n * 1000 + m * 100 + len(tk.ndrange()[1:]) * 10 + r[0] - k + j * a[I[0], j, k]


@tk.kernel
def tuple_run_time_slice(out, a: tk.Const, s):
    i = tk.index()
    out[i] = len(a.shape[s:])


@pytest.mark.parametrize("dev", DEVS)
def test_tuples_slice_with_constants_was_a_compile_error(dev):
    """SPEC 3 lists ``A.shape[k]`` and Cartesian index tuples, and refuses slicing of *arrays*.
    Slicing a tuple (``n, m = A.shape[-2:]``, ``I[1:]``, ``I[::-1]``) was a CompileError
    "slicing are not supported in kernels"; with constant bounds it is Python's slice now; a
    run-time bound stays a CompileError naming the line."""
    b = tk.backend(dev)
    a = np.ones((2, 3, 4))
    out = np.zeros((2, 3, 4))
    tuple_slices(b)(out, a, ndrange=(2, 3, 4)).wait()
    j = np.arange(3)[None, :, None]
    np.testing.assert_array_equal(out, np.broadcast_to(3 * 1000 + 4 * 100 + 2 * 10 + j, out.shape))
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*sliced with constant integers"):
        tuple_run_time_slice(b)(np.zeros(2), a, 1, ndrange=2)


# ----------------------------------------- section 4: what a backend lacks is a CompileError (WebGPU)

@tk.kernel
def big_private(out, k):
    p = tk.private(tk.float32, 100000)
    p[k] = 1.0
    out[0] = p[k]


@pytest.mark.skipif(not _AVAIL["WebGPU"][0], reason=f"WebGPU: {_AVAIL['WebGPU'][1]}")
def test_webgpu_private_arrays_beyond_its_limit_are_a_compile_error_was_a_hang():
    """SPEC 4: a kernel that needs what its backend lacks is a tk.CompileError naming the line.
    A 400 KB tk.private array on WebGPU hung in create_compute_pipeline (lavapipe compiled for
    minutes; 64 KiB already took 17 s); WGSL's function variables are bounded (8192 bytes in
    portable WebGPU), so it is now refused at the tk.private line, before any compile."""
    b = tk.backend("WEBGPU")
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*tk\.private arrays need 400000 "
                                              r"bytes per work item but WebGPU"):
        big_private(b)(tk.zeros(1, tk.float32, backend=b), 5, ndrange=1)


# -------------------------------------------------- section 3: `...` is a no-op statement, as in Python

@tk.func
def not_written_yet(x):
    ...


@tk.kernel
def placeholder_bodies(out):
    i = tk.index()
    if i > 2:
        ...
    else:
        out[i] = 1.0
    not_written_yet(i)
    ...


@pytest.mark.parametrize("dev", DEVS)
def test_ellipsis_statements_are_no_ops_was_a_compile_error(dev):
    """A bare ``...`` statement (the usual placeholder body, like ``pass``) does nothing in
    Python; in a kernel or a @tk.func it was a CompileError "a value of type ellipsis cannot be
    used in a kernel" (only docstrings were skipped)."""
    b = tk.backend(dev)
    out = np.zeros(4)
    placeholder_bodies(b)(out, ndrange=4).wait()
    assert out.tolist() == [1.0, 1.0, 1.0, 0.0]


# ------------------- section 3: float("inf"), int("3"), min/max of one tuple, as Python computes them

@tk.kernel
def python_builtins(out, a: tk.Const):
    i = tk.index()
    lo = float("-inf")
    if i == 0:
        out[i] = float("inf")
    elif i == 1:
        out[i] = max(lo, a[i])
    elif i == 2:
        out[i] = max(a.shape) * 10 + min(tk.index(tk.Global, tk.Cartesian)) + int("3")
    else:
        out[i] = min((a[i], 2.5, a[0]))


@tk.kernel
def bad_float_text(out):
    out[tk.index()] = float("one")


@tk.kernel
def min_of_nothing(out):
    out[tk.index()] = min(())


@pytest.mark.parametrize("dev", DEVS)
def test_python_builtins_on_strings_and_tuples_were_compile_errors(dev):
    """SPEC 3: ``int(x)``, ``float(x)``, ``bool(x)`` cast as in Python, and ``min``/``max`` are
    builtins. ``float("inf")`` (the usual way to write an infinity) was a CompileError
    "'inf' cannot be used as a value", and ``max(A.shape)`` / ``min((a, b, c))``, Python's
    one-iterable form, were "a tuple was used where a number is expected". A string that does
    not parse and ``min(())`` stay CompileErrors, as they are Python ValueErrors."""
    b = tk.backend(dev)
    a = np.array([-1.0, 4.0, 0.0, 7.0, 1.0])
    out = np.zeros(5)
    python_builtins(b)(out, a, ndrange=5).wait()
    assert out.tolist() == [np.inf, 4.0, 5 * 10 + 2 + 3, min(7.0, 2.5, -1.0), min(1.0, 2.5, -1.0)]
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*could not convert string to float"):
        bad_float_text(b)(np.zeros(2), ndrange=2)
    with pytest.raises(tk.CompileError, match=r"test_spec_audit23\.py:\d+:\d+: .*min\(\) of an empty tuple"):
        min_of_nothing(b)(np.zeros(2), ndrange=2)


@tk.kernel
def log_base(out, x: tk.Const, b):
    i = tk.index()
    out[i] = math.log(x[i], b) + math.log(8.0, 2) * 0


@pytest.mark.parametrize("dev", DEVS)
def test_math_log_takes_pythons_base_argument_was_a_compile_error(dev):
    """SPEC 3 lists ``math.log``; Python's ``math.log(x, base)`` is ``log(x) / log(base)``. The
    two-argument form was a CompileError "log() takes 1 argument(s), got 2" (the interpreter's
    math already took it). Checked against NumPy's ``log(x) / log(base)`` in the argument's
    float type, bit for bit."""
    b = tk.backend(dev)
    for dt in (np.float64, np.float32):
        x = np.array([8.0, 100.0, 0.5, 3.0], dt)
        out = np.zeros(4, dt)
        log_base(b)(out, x, 10.0, ndrange=4).wait()
        np.testing.assert_array_equal(out, np.log(x) / np.log(dt(10.0)))
    np.testing.assert_allclose(out.astype(np.float64), [math.log(v, 10.0) for v in (8.0, 100.0, 0.5, 3.0)],
                               rtol=1e-6)


# ------------------------------------ section 9: a very long expression is no bare RecursionError

def test_a_sum_of_hundreds_of_terms_compiles_or_says_how_to_split_it(tmp_path):
    """SPEC 9: no error is a bare traceback from inside the compiler. A generated kernel with a
    600-term sum in one expression nests 600 levels deep; it either compiles and gives NumPy's
    sum, or is a CompileError at the kernel that says to split the expression into statements
    (the message said only "nested too deeply"); the split form compiles and gives the sum."""
    from gen_kernels import make_kernel
    rng = np.random.default_rng(23)
    x = rng.integers(-9, 9, 8).astype(np.float64)
    terms = [k % 8 for k in range(600)]
    want = float(sum(x[k] for k in terms))
    one = make_kernel(str(tmp_path), "one_long_sum", ["out", "x"],
                      ["out[i] = " + " + ".join(f"x[{k}]" for k in terms)])
    out = np.zeros(2)
    try:
        one(tk.CPU())(out, x, ndrange=2).wait()
        assert out.tolist() == [want, want]
    except tk.CompileError as e:
        assert "one_long_sum" in str(e) and "split it into statements" in str(e), str(e)
    split = make_kernel(str(tmp_path), "split_sum", ["out", "x"],
                        ["acc = 0.0"] + [f"acc += x[{k}]" for k in terms] + ["out[i] = acc"])
    out = np.zeros(2)
    split(tk.CPU())(out, x, ndrange=2).wait()
    assert out.tolist() == [want, want]


# ------------------------------------ section 4: capability queries and misspelt dtype names

@pytest.mark.parametrize("be", ["CPU", "INTERP"] + [d for d in ("CL", "WEBGPU") if d in tk.backends_available()])
def test_capability_queries_refuse_what_is_no_dtype(be):
    """SPEC 4: ``backend.supports(dtype)`` answers whether arrays of a dtype can be stored and
    computed with. A dtype tinykernels has no type for (complex) is False; a name that is no
    dtype at all ("float46", a typo) was False too, read as "unsupported": now a TypeError that
    lists the dtypes, as np.dtype("float46") is one."""
    b = tk.backend(be)
    assert b.supports("float32") and b.supports(np.float32) and b.supports(tk.float16)
    assert not b.supports("complex64") and not b.supports(np.complex128)
    assert b.supports_atomic("int32") and not b.supports_atomic("complex64")
    for query in (b.supports, b.supports_atomic):
        with pytest.raises(TypeError, match=r"'float46' is not a dtype name \(tinykernels' dtypes: bool, int8.*float64"):
            query("float46")
