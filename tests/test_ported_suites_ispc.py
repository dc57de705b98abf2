"""ISPC's tests/func-tests (the tiny known-answer kernels its test driver runs: test-*.ispc (1-22
and the varying loops of 60-90), do-*,
switch-*, short-circuit-*, foreach-*, double-*, int64-*, int8-wrap, min/max-*, uint-shift,
popcnt-*, avg-up/down-*, pow-*, fmod-float-varying-*, reduce-add/equal-*, reduce-add/min/max-<type>
for every integer type, float16, float and double, exclusive-scan-add/and/or-*, shift-*, rotate-*,
broadcast-*, gather-<type>-*, scatter-int8/int16-*, int16-wrap, uint64-min/max-*, half-1 (every
float16 bit pattern to float and back), atomics-* and local-atomics-*), ported test by test.

ISPC's harness calls ``f_*(RET, aFOO, b)`` once, for one gang of ``programCount`` program
instances, with ``aFOO[i] = i + 1`` (float, or double for the ``f_du*`` signatures) and
``b = 5``, and compares ``RET`` (float) with what the file's ``result()`` writes. Here a gang is
one workgroup of ``W`` work items (``programIndex`` is ``tk.index(tk.Local, tk.Linear)``,
``programCount`` is ``tk.groupsize()[0]``, known when the kernel compiles, as in ISPC), the
same arguments are passed, and each ``result()`` is computed in NumPy from ``W``. ``uniform``
values are plain values every item computes alike (or ``tk.uniform``). Exact, as upstream's
driver compares exactly, except pow-* and fmod-* which carry their own tolerance checks.

The straight-line and control-flow cases do not depend on the backend: CPU and INTERP. The
cross-lane cases (collectives, shifts/rotates/broadcasts through local memory, global and local
atomics) are where backends differ: CPU, INTERP, INTERP:CHECK, CL and WEBGPU (int64/float64
variants skip on WebGPU, which has neither; SPEC 4); the per-type matrices of reductions and
gathers without INTERP:CHECK.

Where SPEC differs from upstream (ported as SPEC reads):

* ISPC runs gang-wide operations (``reduce_*``, ``exclusive_scan_*``, ``shift``, ``rotate``,
  ``broadcast``) over the *active* program instances under varying control flow; a
  ``tk.group_reduce``/``tk.group_scan``/``tk.synchronize`` must be reached by every work item
  (SPEC 3), so a masked ``reduce_add(v)`` under ``if (c)`` is written as
  ``tk.group_reduce(v if c else 0, "add")`` (the op's identity for the inactive items: 0 for
  add/or, all ones for and, the type's extremes for min/max), ``reduce_equal`` as a min and a
  max of the active values, and cross-lane moves as a store to ``tk.localmem``, a barrier and
  a load.
* There are no pointers: upstream's ``crash()`` (a load through a null pointer that must not run)
  is a ``@tk.func`` that counts its calls with an atomic on an array, and each test checks that
  the count is 0 where the operator short-circuits. ``atomic_*_global(&s, ...)`` on a uniform
  global variable is an atomic on element 0 of a one-element array argument;
  ``atomic_*_local`` on a ``tk.localmem`` of one element. Reading ``s`` back in the same gang
  after the atomics needs a ``tk.synchronize()`` (ISPC's gang runs in lockstep).
* ``switch`` is ``if``/``elif`` (fall-through written out); ``do { } while (c)`` is
  ``while True:`` with the test at the end (and before each ``continue``); ``foreach (i = a ...
  b)`` is ``for i in range(a + programIndex, b, programCount)``.
* No ``popcnt``/``avg_up``/``avg_down``/``count_*_zeros`` builtins: written with SPEC's operators
  in ``@tk.func``s (avg without overflow, as ISPC's are defined), and checked at the type's
  extremes as well.
* Not ported: pointers, references, structs, SoA/AoS layouts, function pointers, new/delete,
  ``launch``/``task`` (a workgroup is the gang), ``rdrand``, streaming stores, packed
  loads/stores (ISPC library calls with no SPEC counterpart), short vectors and swizzles.
"""
import math

import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import anybe, backend_params, be, get, put  # noqa: F401 - be, anybe: fixtures

W = 8          # programCount: ISPC's gang width (its targets have 4 .. 64)
B = 5.0        # the harness's uniform float b


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def xbe(request):
    """the per-type matrices: every backend but INTERP:CHECK (the CI budget)"""
    return tk.backend(request.param)


def afoo(dtype=np.float32, w=W):
    return np.arange(1, w + 1, dtype=dtype)


def gang(be, kern, *args, w=W):
    """Run ``kern`` for one gang (one workgroup of ``w`` items) with RET (float32, filled with
    -1e20 as upstream's driver does) first and ``args`` after; RET and every other array back."""
    ret = put(be, np.full(w, -1e20, np.float32))
    dargs = [put(be, a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    kern(be, w)(ret, *dargs, ndrange=w)
    tk.synchronize(be)
    return [get(ret)] + [get(d) for d, a in zip(dargs, args) if isinstance(a, np.ndarray)]


def need(be, *dtypes):
    for dt in dtypes:
        if not be.supports(np.dtype(dt)):
            pytest.skip(f"{be.name} has no {np.dtype(dt).name} (SPEC 4)")


def pidx():
    return np.arange(W)


# --- test-*.ispc: assignments, funcs, if, early returns, ternaries, constants ---------------------

@tk.func
def twice(x):
    return x + x


@tk.func
def twice_from(xs):
    x = xs[tk.index(tk.Local, tk.Linear)]
    return x + x


@tk.kernel
def ispc_test_1(RET, aFOO: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    b = tk.float32(0.0)
    b = a
    RET[pi] = a + b


@tk.kernel
def ispc_test_2(RET, aFOO: tk.Const):
    RET[tk.index(tk.Local, tk.Linear)] = twice_from(aFOO)


@tk.kernel
def ispc_test_3(RET, aFOO: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    b = twice(a)
    RET[pi] = b


@pytest.mark.parametrize("kern", [ispc_test_1, ispc_test_2, ispc_test_3], ids=lambda k: k.name)
def test_copy_and_func_calls(be, kern):
    """test-1/2/3: ``a + b`` after ``b = a``; ``x + x`` in a function taking the array and in
    one taking the value: 2 + 2 * programIndex."""
    np.testing.assert_array_equal(gang(be, kern, afoo())[0], 2 + 2 * pidx())


@tk.kernel
def ispc_test_10(RET, aFOO: tk.Const, b):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    r = a
    if a <= 2.0:
        r = b
    RET[pi] = r


@tk.kernel
def ispc_test_11(RET, aFOO: tk.Const, b):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    r = a
    if a <= 2.0:
        RET[pi] = b
        return
    RET[pi] = r


@pytest.mark.parametrize("kern", [ispc_test_10, ispc_test_11], ids=lambda k: k.name)
def test_if_with_uniform_value_and_early_return(be, kern):
    """test-10/11: items with ``a <= 2`` take b (5), directly or by storing and returning."""
    want = 1.0 + pidx()
    want[:2] = 5
    np.testing.assert_array_equal(gang(be, kern, afoo(), B)[0], want)


@tk.kernel
def ispc_test_12(RET, aFOO: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    b, t = tk.float32(10.0), tk.float32(2.0)
    c = tk.float32(0.0)
    if a <= t:
        if a == 1.0:
            c = 7.0
        else:
            c = a
    else:
        c = b
        if a == 3.0:
            c = 12
    RET[pi] = c


@tk.kernel
def ispc_test_13(RET, aFOO: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    b, t = tk.float32(10.0), tk.float32(2.0)
    c = tk.float32(0.0)
    if a <= t:
        if a == 1.0:
            RET[pi] = 7.0
            return
        else:
            RET[pi] = a
            return
    else:
        c = b
        if a == 3.0:
            RET[pi] = 12
            return
    RET[pi] = c


@pytest.mark.parametrize("kern", [ispc_test_12, ispc_test_13], ids=lambda k: k.name)
def test_nested_ifs(be, kern):
    """test-12/13: nested if/else assigning a local, and the same with a return in every leaf."""
    want = np.full(W, 10.0)
    want[:3] = [7, 2, 12]
    np.testing.assert_array_equal(gang(be, kern, afoo())[0], want)


@tk.kernel
def ispc_test_14_15_16(RET, aFOO: tk.Const, b, which: tk.constexpr):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    if which == 14:
        RET[pi] = a if a == 1.0 else 2.0 * a
    elif which == 15:
        RET[pi] = a if b == 1.0 else 2.0 * a
    else:
        b -= 2.0
        RET[pi] = a if a == b else 2.0 * a


@pytest.mark.parametrize("which", [14, 15, 16])
def test_ternaries(be, which):
    """test-14/15/16: ``?:`` on a varying condition, on a uniform one, and on a uniform value
    changed in place (b -= 2 gives 3)."""
    want = 2.0 + 2 * pidx()
    if which == 14:
        want[0] = 1
    if which == 16:
        want[2] = 3
    np.testing.assert_array_equal(gang(be, ispc_test_14_15_16, afoo(), B, which)[0], want)


@tk.kernel
def constants(RET):
    pi = tk.index(tk.Local, tk.Linear)
    RET[pi] = 0
    if pi == 0:
        RET[pi] = 12.5
    if pi == 1:
        RET[pi] = (-1.0 + 2) - 1
    if pi == 2:
        RET[pi] = 1.0 + 2.14159
    if pi == 3:
        RET[pi] = (2 >> 1) + 2.14159
    if pi == 4:
        RET[pi] = (1 << 1) + 1.14159
    if pi == 5:
        RET[pi] = 3.0 * (4 << 0) - 7
    if pi == 6:
        RET[pi] = 0xffffffff >> 16


def test_constant_expressions(be):
    """test-17..22 and uint-shift: constant expressions stored into a float array (folded in
    Python's float64, rounded once on the store, as NumPy's float32(...) of the same value)."""
    want = np.float32([12.5, (-1.0 + 2) - 1, 1.0 + 2.14159, (2 >> 1) + 2.14159, (1 << 1) + 1.14159,
                       3.0 * (4 << 0) - 7, 0xffff, 0])
    np.testing.assert_array_equal(gang(be, constants)[0], want)


# --- do-*.ispc, switch-*.ispc ------------------------------------------------------------------------

@tk.kernel
def do_1(RET, aFOO: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    x = aFOO[pi]
    r = tk.float32(0.0)
    while True:
        r += 1.0
        x -= 0.25
        if not x > 0.0:
            break
    RET[pi] = r


@tk.kernel
def do_2_3(RET, brk: tk.constexpr):
    pi = tk.index(tk.Local, tk.Linear)
    i = 0
    j = 0
    while True:
        j += 1
        if i >= 5:
            if brk:
                break
            i += 1                    # `continue` in a do-while goes to the test (++i < 10)
            if not i < 10:
                break
            continue
        j += 1
        i += 1
        if not i < 10:
            break
    RET[pi] = float(j)


def test_do_while(be):
    """do-1: a do-while counting quarters (4 (i + 1) trips); do-2/3: ``continue`` runs the test
    of a do-while (15), ``break`` leaves it (11)."""
    np.testing.assert_array_equal(gang(be, do_1, afoo())[0], 4 * (pidx() + 1))
    np.testing.assert_array_equal(gang(be, do_2_3, False)[0], np.full(W, 15))
    np.testing.assert_array_equal(gang(be, do_2_3, True)[0], np.full(W, 11))


@tk.func
def switchit(a, b):
    r = 0
    if a == 3:
        r = 1
    else:
        r = 0
    return r


@tk.kernel
def switches(RET, OUT, aFOO: tk.Const, b):
    pi = tk.index(tk.Local, tk.Linear)
    a = int(aFOO[pi])
    # switch-1: default first (with break), case 5 matches
    if b == 5:
        OUT[0, pi] = 0
    else:
        OUT[0, pi] = -1
    # switch-2: default falls through into case 5
    if b != 5:
        OUT[1, pi] = -1
    OUT[1, pi] = 0
    # switch-4: a switch on a varying value in a function
    RET[pi] = switchit(a, int(b))


def test_switch(be):
    """switch-1..4: a uniform switch with its default first (with and without fall-through),
    and a varying one in a function (only programIndex 2, a == 3, takes case 3)."""
    ret, out, *_ = gang(be, switches, np.zeros((2, W), np.float32), afoo(), B)
    np.testing.assert_array_equal(out, np.zeros((2, W)))
    np.testing.assert_array_equal(ret, (pidx() == 2).astype(np.float32))


# --- test-60/65/70/75/80/90: varying loops ------------------------------------------------------------

@tk.kernel
def varying_loops(RET, OUT, aFOO: tk.Const, b):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    while a < 64:                                   # test-60
        a += 1
    OUT[0, pi] = a
    a = aFOO[pi & 0x3]                              # test-65: nested fors with breaks, float counters
    i = tk.float32(0)
    while i < b:
        if a == 1.0:
            break
        j = tk.float32(0)
        while j < b:
            if a == 3.0:
                break
            a += 1
            j += 1
        i += 1
    OUT[1, pi] = a
    a = aFOO[pi]                                    # test-70
    if a >= 4:
        a = 0
    else:
        i = tk.float32(0)
        while i < b:
            if a == b:
                a += 10
            a += 1
            if a == 2:
                break
            i += 1
    OUT[2, pi] = a
    r = tk.float32(0)                               # test-75: a uniform trip count
    for k in range(int(b)):
        r += aFOO[pi]
    OUT[3, pi] = r
    i, j = 0, 0                                     # test-80: while (i++ < 10) with continue
    while True:
        old = i
        i += 1
        if not old < 10:
            break
        j += 1
        if i >= 5:
            continue
        j += 1
    OUT[4, pi] = float(j)
    x = tk.private(tk.float32, 3)                   # test-90: an array passed to a function
    for k in range(3):
        x[k] = b
    OUT[5, pi] = second(x)
    RET[pi] = 0


@tk.func
def second(x):
    return x[1]


def test_varying_loops(be):
    """test-60/65/70/75/80/90: a while loop each item leaves at its own trip; nested loops with
    breaks over float counters (each item's value from aFOO[i & 3]); a loop whose break and
    update depend on the item; a loop of the uniform b trips; ``while (i++ < 10)`` with a
    continue (14); a per-item array passed to a function."""
    out = gang(be, varying_loops, np.zeros((6, W), np.float32), afoo(), B)[1]
    p = pidx()
    np.testing.assert_array_equal(out[0], np.full(W, 64))
    np.testing.assert_array_equal(out[1], np.array([1, 3, 3, 29] * (W // 4)))
    want = np.zeros(W)
    want[:3] = [2, 17, 18]
    np.testing.assert_array_equal(out[2], want)
    np.testing.assert_array_equal(out[3], 5 + 5 * p)
    np.testing.assert_array_equal(out[4], np.full(W, 14))
    np.testing.assert_array_equal(out[5], np.full(W, 5))


# --- short-circuit-*.ispc ---------------------------------------------------------------------------

@tk.func
def crash(calls):
    """upstream dereferences a null pointer; here every call is counted"""
    tk.atomic_add(calls, 0, 1)
    return calls[1] > 0


@tk.func
def crash_even(calls, pi):
    if pi & 1:
        return True
    return crash(calls)


@tk.kernel
def short_circuit(RET, aFOO: tk.Const, calls, case: tk.constexpr):
    pi = tk.index(tk.Local, tk.Linear)
    a0, a1 = aFOO[0], aFOO[1]
    if case == 1:                       # short-circuit-1/3/5/7
        RET[pi] = 1 if a0 < a1 or crash(calls) else 0
    elif case == 2:                     # short-circuit-2/4/6/8/9
        RET[pi] = 0 if a0 > a1 and crash(calls) else 1
    elif case == 10:
        RET[pi] = 1 if (pi & 1) == 0 or crash_even(calls, pi) else 0
    elif case == 11:
        RET[pi] = 1 if (pi & 1) == 1 and crash_even(calls, pi) else 2
    elif case == 12:                    # index is out of bounds in the items that skip the branch
        index = (pi & 1) * 10000
        if (pi & 1) == 0:
            RET[pi] = 1 if aFOO[pi] < 10000 and aFOO[index] == 1 else 1234
        else:
            RET[pi] = 2
    else:                               # short-circuit-14/15
        index = pi & 1
        if (pi & 1) == 0:
            RET[pi] = 1234 if aFOO[index] == 2 and crash(calls) else 1
        else:
            RET[pi] = 2


@pytest.mark.parametrize("case", [1, 2, 10, 11, 12, 14])
def test_short_circuit(be, case):
    """short-circuit-1..15: ``||``/``&&`` whose right operand (a null-pointer load upstream)
    must not run: with a uniform and a varying left side, in a function that returns early
    for odd items, and guarding an out-of-range index. The right side's calls are counted."""
    ret, _, calls = gang(be, short_circuit, afoo(), np.zeros(2, np.int32), case)
    want = {1: np.ones(W), 2: np.ones(W), 10: np.ones(W), 11: np.where(pidx() & 1, 1, 2),
            12: np.where(pidx() & 1, 2, 1), 14: np.where(pidx() & 1, 2, 1)}[case]
    np.testing.assert_array_equal(ret, want)
    # case 11: odd items evaluate crash_even, which returns before crash()
    assert calls[0] == 0


# --- foreach-*.ispc ---------------------------------------------------------------------------------

@tk.kernel
def foreach(RET, aFOO: tk.Const, start, stop, case: tk.constexpr):
    pi = tk.index(tk.Local, tk.Linear)
    pc = tk.groupsize()[0]
    if case == 1:
        val = tk.localmem(tk.float32, tk.groupsize()[0])
        val[pi] = 0
        tk.synchronize()
        for i in range(start + pi, stop, pc):
            val[i] += aFOO[i] - 1
        tk.synchronize()
        s = tk.float32(0)
        for i in range(pc):
            s += val[i]
        RET[pi] = s
    elif case == 2:
        val = tk.localmem(tk.float32, tk.groupsize()[0])
        val[pi] = 0
        tk.synchronize()
        for i in range(start + pi, stop, pc):
            val[i] += i
        tk.synchronize()
        s = tk.float32(0)
        for i in range(pc):
            s += val[i]
        RET[pi] = s
    else:
        RET[pi] = 0
        tk.synchronize()
        for i in range(start + pi, stop, pc):
            if case == 3:
                RET[i] = i + 1
            elif case == 4:
                RET[i] -= 1234
            else:
                RET[i + 2] += 1234


@pytest.mark.parametrize("case,start,stop", [(1, 0, W), (2, 2, W), (3, 0, 2), (4, 2, 0), (5, 1, 1), (6, -2, W - 2)])
def test_foreach(be, case, start, stop):
    """foreach-1..6: a gang-wide loop over [start, stop) (one item per element), into local
    memory then summed, over a partial range, an empty one (2 ... 0, 1 ... 1) and one from -2."""
    ret = gang(be, foreach, afoo(), start, stop, case)[0]
    p = pidx()
    want = {1: np.full(W, p.sum()), 2: np.full(W, p[2:].sum()), 3: np.where(p < 2, p + 1, 0),
            4: np.zeros(W), 5: np.zeros(W), 6: np.full(W, 1234)}[case]
    np.testing.assert_array_equal(ret, want)


# --- double-*, int64-*, int8-wrap, min/max, popcnt, avg ------------------------------------------

@tk.kernel
def double_div(RET, aFOO: tk.Const, b, ret_early: tk.constexpr):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    if ret_early:
        if a <= 2.0:
            RET[pi] = 0
            return
        RET[pi] = a
    else:
        RET[pi] = a / b


@pytest.mark.parametrize("bt", [np.float64, np.float32])
def test_double(be, bt):
    """double-1/2/3: float64 values over a float64 or float32 uniform (computed in float64,
    NumPy's promotion, rounded once on the float store); an early return."""
    ret = gang(be, double_div, afoo(np.float64), bt(B), False)[0]
    np.testing.assert_array_equal(ret, np.float32(afoo(np.float64) / np.float64(bt(B))))
    ret = gang(be, double_div, afoo(np.float64), bt(B), True)[0]
    np.testing.assert_array_equal(ret, np.where(pidx() < 2, 0, pidx() + 1))


@tk.kernel
def ints(RET, OUT, aFOO: tk.Const, bb):
    pi = tk.index(tk.Local, tk.Linear)
    pc = tk.groupsize()[0]
    v = tk.int64(0xffffffff)
    OUT[0, pi] = 1 if v == 0xffffffff else 0                         # int64-constant
    a = tk.int64(aFOO[pi])
    b = tk.int64(2.0 * a)
    OUT[1, pi] = max(a, b)                                           # int64-max
    OUT[2, pi] = min(a, b)                                           # int64-min
    ua = tk.uint8(aFOO[pi])
    ub = tk.uint8(bb)
    OUT[3, pi] = (tk.uint8(100) * ua) + ub                           # int8-wrap
    u = tk.uint32(aFOO[pi])
    OUT[4, pi] = max(tk.uint32(2), u)                                # max-uint-1
    OUT[4, pc - 1] = max(tk.uint32(10), tk.uint32(bb))
    i = int(aFOO[pi])
    OUT[5, pi] = min(2, i)                                           # min-int-1
    OUT[5, pc - 1] = min(10, int(bb))
    x = tk.uint32(0xffffffff)
    RET[pi] = x >> 16                                                # uint-shift


def test_integer_ops(be):
    """int64-constant/max/min, int8-wrap (uint8 100 * a + b wraps), max-uint-1, min-int-1 (the
    last element written by every item, the same value), uint-shift."""
    need(be, np.int64)
    ret, out, *_ = gang(be, ints, np.zeros((6, W), np.float32), afoo(), B)
    p = pidx()
    np.testing.assert_array_equal(ret, np.full(W, 0xffff))
    np.testing.assert_array_equal(out[0], np.ones(W))
    np.testing.assert_array_equal(out[1], 2 * (1 + p))
    np.testing.assert_array_equal(out[2], 1 + p)
    np.testing.assert_array_equal(out[3], (((100 * (p + 1)) & 0xff) + 5) & 0xff)
    want = np.maximum(2, 1 + p)
    want[-1] = 10
    np.testing.assert_array_equal(out[4], want)
    want = np.minimum(2, 1 + p)
    want[-1] = 5
    np.testing.assert_array_equal(out[5], want)


@tk.func
def popcnt(v):
    """the number of set bits of a non-negative v"""
    count = 0
    while v != 0:
        if v & 1:
            count += 1
        v >>= 1
    return count


@tk.kernel
def popcnts(RET, OUT, aFOO: tk.Const, words: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    RET[pi] = 0
    a = aFOO[pi]
    OUT[0, pi] = popcnt(int(a))                                      # popcnt-1
    OUT[1, pi] = popcnt(words[pi % 4])                               # popcnt-2
    OUT[2, pi] = tk.group_reduce(1 if a < 3 else 0, "add")           # popcnt-3 (of a bool mask)
    b = tk.int64(1) if a < 3 else tk.int64(0)                        # popcnt-4
    if (pi & 1) != 0:
        b |= tk.int64(1) << 36
    OUT[3, pi] = popcnt(b)


def test_popcnt(be):
    """popcnt-1..4 with a counting loop: of 1 .. W, of 0xf0f0f0f0 / 0xff / 0x10 / 0, of a
    gang's mask (a < 3 holds in two items), and of an int64 with bit 36 set in odd items."""
    need(be, np.int64)
    out = gang(be, popcnts, np.zeros((4, W), np.float32), afoo(),
               np.int64([0xf0f0f0f0, 0xff, 0x10, 0]))[1]
    p = pidx()
    np.testing.assert_array_equal(out[0], [bin(k + 1).count("1") for k in p])
    np.testing.assert_array_equal(out[1], np.tile([16, 8, 1, 0], W // 4))
    np.testing.assert_array_equal(out[2], np.full(W, 2))
    np.testing.assert_array_equal(out[3], (p & 1) + (p < 2))


@tk.func
def avg_down(a, b):
    """floor((a + b) / 2) without overflow in a's type"""
    return (a >> 1) + (b >> 1) + (a & b & 1)


@tk.func
def avg_up(a, b):
    """ceil((a + b) / 2) without overflow in a's type"""
    return (a >> 1) + (b >> 1) + ((a | b) & 1)


@tk.kernel
def avgs(RET, UP, DOWN, A: tk.Const, Bv: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    a = A[pi]
    b = Bv[pi]
    DOWN[pi] = avg_down(a, b)
    UP[pi] = avg_up(a, b)
    RET[pi] = 0


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16])
def test_avg_up_down(be, dt):
    """avg-up/down-int8/uint8/int16/uint16: (a + b) / 2 rounded down and up, for a = 1 .. W,
    b = 5 (upstream), and at the type's extremes, where a + b overflows the type."""
    info = np.iinfo(dt)
    a = np.array(list(range(1, 5)) + [info.max, info.max, info.min, info.min], dt)
    b = np.array([5] * 4 + [info.max, info.max - 1, info.min, info.max], dt)
    _, up, down, _, _ = gang(be, avgs, np.zeros(W, dt), np.zeros(W, dt), a, b)
    s = a.astype(np.int64) + b.astype(np.int64)
    np.testing.assert_array_equal(down, (s // 2).astype(dt))
    np.testing.assert_array_equal(up, (-((-s) // 2)).astype(dt))


# --- pow-*, fmod-float-varying-* --------------------------------------------------------------------

@tk.func
def ok(x, ref):
    return abs(x - ref) < 1e-6 or abs((x - ref) / ref) < 1e-5


@tk.kernel
def pows(RET, A: tk.Const, Bv: tk.Const, REF: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    RET[pi] = 1.0 if ok(A[pi] ** Bv[pi], REF[pi]) else 0.0


def test_pow(be):
    """pow-1 (its four bases, exponents and references, the last a 0 exponent) and more of its
    kind (pow-2..9 use the same check): every item passes upstream's ok() test."""
    a = np.float32([8.998542785644531, 5.330646991729736, 2.699711084365845, 7.423774242401123,
                    0.5, 3.0, 1.0, 2.0])
    b = np.float32([-6.729081153869629, 2.082883834838867, -2.190436124801636, 0.0, -1.5, 4.0, 1e6, 0.5])
    ref = np.float32([0.000000379575283, 32.643608093261719, 0.113560430705547, 1.0,
                      2 ** 1.5, 81.0, 1.0, math.sqrt(2)])
    np.testing.assert_array_equal(gang(be, pows, a, b, ref)[0], np.ones(W))


@tk.kernel
def fmods(RET, aFOO: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    pc = tk.groupsize()[0]
    RET[pi] = 0
    for sx in range(2):
        for sy in range(2):
            x = aFOO[pc // 2] * (1 - 2 * sx)
            y = tk.float32(0.8) * (1 - 2 * sy)
            t = math.fmod(x, y)
            base = x - math.trunc(x / y) * y
            RET[pi] += 0 if abs(base - t) < 1e-6 or abs((base - t) / base) < 1e-5 else 1


def test_fmod_float_varying(be):
    """fmod-float-varying-1: fmod(+-x, +-0.8) against x - trunc(x / y) * y in all four sign
    combinations (x = aFOO[programCount / 2] = 5): no item counts a miss."""
    np.testing.assert_array_equal(gang(be, fmods, afoo())[0], np.zeros(W))


# --- cross-lane operations: reduce-*, exclusive-scan-*, shift/rotate/broadcast, atomics -------------

@tk.kernel
def reduces(RET, OUT, aFOO: tk.Const, b):
    pi = tk.index(tk.Local, tk.Linear)
    pc = tk.groupsize()[0]
    v = aFOO[pi]
    iv = int(v)
    m = tk.group_reduce(iv if iv & 1 else 0, "add")                  # reduce-add-int-1
    RET[pi] = m
    for case in range(1, 7):                                         # reduce-equal-1..6
        a = int(b)
        active = True
        if case == 2:
            a = int(aFOO[pi // 2])
            active = a == 1
        elif case == 3:
            a = int(aFOO[pi // 2])
            active = a < pc + 4
        elif case == 4:
            a = int(aFOO[pi // max(1, pc // 2)])
            active = pi >= pc // 2 and a < 4
        elif case == 5:
            a = int(aFOO[pi & 1])
            active = (pi & 1) != 0
        elif case == 6:
            a = int(aFOO[pi])
            active = (pi & 1) != 0
        lo = tk.group_reduce(a if active else 2 ** 62, "min")
        hi = tk.group_reduce(a if active else -2 ** 62, "max")
        OUT[case - 1, pi] = 0 if case == 6 else 1
        if active:
            OUT[case - 1, pi] = 1 if lo == hi else 0


def test_reduce_add_and_reduce_equal(anybe):
    """reduce-add-int-1 (a uniform sum of the odd values, taken under ``if (iv & 1)``) and
    reduce-equal-1..6 (whether the active items hold one value: all items with b; the items
    where a == 1; all items with aFOO[i / 2]; the upper half with aFOO[1]; odd items with
    aFOO[1]; odd items with aFOO[i], which differ)."""
    need(anybe, np.int64)
    ret, out, *_ = gang(anybe, reduces, np.zeros((6, W), np.float32), afoo(), B)
    np.testing.assert_array_equal(ret, np.full(W, np.arange(1, W + 1, 2).sum()))
    want = np.ones((6, W))
    want[2] = 0
    want[5] = 0
    np.testing.assert_array_equal(out, want)


@tk.kernel
def scans(RET, OUT, aFOO: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    a = aFOO[pi]
    RET[pi] = tk.group_scan(pi, "add", inclusive=False)                              # -1
    OUT[0, pi] = tk.group_scan(a, "add", inclusive=False)                            # -2
    s = tk.group_scan(a if a <= 2 else 0, "add", inclusive=False)                    # -3/-4
    OUT[1, pi] = s if a <= 2 else -1
    s = tk.group_scan(a if pi & 1 else 0, "add", inclusive=False)                    # -5
    OUT[2, pi] = s if pi & 1 else -1
    OUT[3, pi] = tk.group_scan(float(pi), "add", inclusive=False)                    # -6
    v = tk.int32(0xff) if pi & 1 else tk.int32(0)                                    # and-1
    s = tk.group_scan(v if pi & 1 else tk.int32(-1), "and", inclusive=False)
    OUT[4, pi] = s if pi & 1 else -1
    on = pi < 32 and (pi & 1) == 0
    v = ~(tk.int32(1) << min(pi, 31))                                                # and-2
    s = tk.group_scan(v if on else tk.int32(-1), "and", inclusive=False)
    OUT[5, pi] = s if on else -1
    on = pi < 8 and (pi & 1) == 0
    v8 = tk.int8(~(1 << min(pi, 7)))                                                 # and-3
    s8 = tk.group_scan(v8 if on else tk.int8(-1), "and", inclusive=False)
    OUT[6, pi] = s8 if on else -1
    on = pi < 16 and (pi & 1) == 0
    v16 = tk.int16(~(1 << min(pi, 15)))                                              # and-4
    s16 = tk.group_scan(v16 if on else tk.int16(-1), "and", inclusive=False)
    OUT[7, pi] = s16 if on else -1
    OUT[8, pi] = tk.group_scan(tk.int32(1) << min(pi, 30), "or", inclusive=False)   # or-1
    OUT[9, pi] = tk.group_scan(tk.int8(1 << min(pi, 6)), "or", inclusive=False)     # or-2
    OUT[10, pi] = tk.group_scan(tk.int16(1 << min(pi, 14)), "or", inclusive=False)  # or-3


def _exscan(vals, active, op, identity, dtype):
    """ISPC's exclusive scan over the active program instances (the rest are -1 in RET)."""
    out, acc = [], dtype(identity)
    for v, on in zip(vals, active):
        out.append(acc if on else -1)
        if on:
            acc = dtype(op(acc, dtype(v)))
    return np.array(out, np.float64).astype(np.float32)


def test_exclusive_scans(anybe):
    """exclusive-scan-add-1..6 (of programIndex, of aFOO, under ``if (a <= 2)``, in odd items
    only, of float(programIndex)), exclusive-scan-and-1..4 (0xff in odd items; ~(1 << i) in
    even items, as int32, int8 and int16) and exclusive-scan-or-1..3 (1 << i as int32, int8,
    int16): the active items' exclusive prefix, -1 elsewhere."""
    ret, out, *_ = gang(anybe, scans, np.zeros((11, W), np.float32), afoo())
    p = pidx()
    a = afoo()
    add = np.add
    allon = np.ones(W, bool)
    np.testing.assert_array_equal(ret, _exscan(p, allon, add, 0, np.int64))
    np.testing.assert_array_equal(out[0], _exscan(a, allon, add, 0, np.float32))
    np.testing.assert_array_equal(out[1], _exscan(a, a <= 2, add, 0, np.float32))
    np.testing.assert_array_equal(out[2], _exscan(a, (p & 1) == 1, add, 0, np.float32))
    np.testing.assert_array_equal(out[3], _exscan(p, allon, add, 0, np.float64))
    band, bor = np.bitwise_and, np.bitwise_or
    even = (p & 1) == 0
    np.testing.assert_array_equal(out[4], _exscan(np.full(W, 0xff), (p & 1) == 1, band, -1, np.int32))
    np.testing.assert_array_equal(out[5], _exscan(~(1 << np.minimum(p, 31)), even & (p < 32), band, -1, np.int32))
    np.testing.assert_array_equal(out[6], _exscan((~(1 << np.minimum(p, 7))).astype(np.int8), even & (p < 8),
                                                  band, -1, np.int8))
    np.testing.assert_array_equal(out[7], _exscan((~(1 << np.minimum(p, 15))).astype(np.int16), even & (p < 16),
                                                  band, -1, np.int16))
    np.testing.assert_array_equal(out[8], (1 << np.minimum(p, 31)) - 1)
    np.testing.assert_array_equal(out[9], ((1 << np.minimum(p, 7)) - 1).astype(np.int8))
    np.testing.assert_array_equal(out[10], ((1 << np.minimum(p, 15)) - 1).astype(np.int16))
    # upstream's own answers for and-1 (the first active item gets all ones: -1 as a float)
    assert out[4][1] == -1 and (out[4][3::2] == 0xff).all()


@tk.kernel
def scans64(RET, aFOO: tk.Const, A: tk.Const):
    pi = tk.index(tk.Local, tk.Linear)
    a = A.dtype(aFOO[pi])
    s = tk.group_scan(a if a <= 2 else A.dtype(0), "add", inclusive=False)
    RET[pi] = -1                      # (``s if a <= 2 else -1``: -1 does not fit uint64, NEP 50)
    if a <= 2:
        RET[pi] = s


@pytest.mark.parametrize("dt", [np.float64, np.int64, np.uint64])
def test_exclusive_scan_add_64_bit(anybe, dt):
    """exclusive-scan-add-7/8/9: the scan of (double)aFOO, and of int64 / uint64 values under
    ``if (a <= 2)`` (0, 1 in the first two items)."""
    need(anybe, dt)
    ret = gang(anybe, scans64, afoo(), np.zeros(1, dt))[0]
    np.testing.assert_array_equal(ret, _exscan(afoo(dt), afoo() <= 2, np.add, 0, dt))


@tk.kernel
def moves(RET, OUT, aFOO: tk.Const, d, b):
    pi = tk.index(tk.Local, tk.Linear)
    pc = tk.groupsize()[0]
    lm = tk.localmem(OUT.dtype, tk.groupsize()[0])
    lm[pi] = OUT.dtype(aFOO[pi])
    tk.synchronize()
    j = pi + d
    OUT[0, pi] = lm[j] if 0 <= j < pc else OUT.dtype(0)              # shift(a, d)
    OUT[1, pi] = lm[(pi + d) % pc]                                   # rotate(a, d)
    OUT[2, pi] = lm[int(b) - 2]                                      # broadcast(a, b - 2)
    RET[pi] = 0


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.int64,
                                np.uint64, np.float16])
@pytest.mark.parametrize("d", [-1, 1])
def test_shift_rotate_broadcast(anybe, dt, d):
    """shift-1..8, rotate-1..4, broadcast-1..3: another item's value by ``programIndex + d``
    (0 past the gang's ends), by ``(programIndex + d) mod programCount``, and item b - 2's,
    exchanged through local memory, for every integer type and float16."""
    need(anybe, dt)
    out = gang(anybe, moves, np.zeros((3, W), dt), afoo(), d, B)[1]
    p = pidx()
    a = afoo(dt)
    j = p + d
    np.testing.assert_array_equal(out[0], np.where((j >= 0) & (j < W), a[np.clip(j, 0, W - 1)], 0).astype(dt))
    np.testing.assert_array_equal(out[1], a[(p + d) % W])
    np.testing.assert_array_equal(out[2], np.full(W, a[int(B) - 2]))


@tk.func
def one_atomic(s, pi, case):
    old = s.dtype(0)
    if case == 1 or case == 2:
        old = tk.atomic_add(s, 0, 1)
    elif case == 3:
        tk.atomic_xor(s, 0, 0xfff0)
    elif case == 4:
        tk.atomic_or(s, 0, 1 << min(pi, 30))
    elif case == 5:
        old = tk.atomic_exchange(s, 0, pi)
    else:
        tk.atomic_cas(s, 0, pi, (pi + 1) * 1000)
    return old


@tk.kernel
def atomics(RET, S, case: tk.constexpr, local: tk.constexpr):
    pi = tk.index(tk.Local, tk.Linear)
    ls = tk.localmem(S.dtype, 1)
    if local:
        if pi == 0:
            ls[0] = S[0]
        tk.synchronize()
    old = one_atomic(ls, pi, case) if local else one_atomic(S, pi, case)
    tk.synchronize()
    s = ls[0] if local else S[0]
    if case == 1 or case == 2:
        RET[pi] = tk.group_reduce(old, "add")
    elif case == 5:
        RET[pi] = tk.group_reduce(old, "max")
    else:
        RET[pi] = s
    if local:
        if pi == 0:
            S[0] = ls[0]


ATOMIC_CASES = {  # case: (dtype of s, its initial value, RET upstream's result() gives)
    1: (np.uint32, 0, W * (W - 1) // 2),        # atomics-1 / local-atomics-1: sum of old values
    2: (np.int64, 0, W * (W - 1) // 2),         # atomics-2 / local-atomics-2
    3: (np.int32, 0xff, 0xff0f if W & 1 else 0xff),  # atomics-3 / local-atomics-3: xor 0xfff0, W times
    4: (np.int32, 0, (1 << min(W, 31)) - 1),    # atomics-4 / local-atomics-4: or of 1 << i
    5: (np.int32, 0xbeef, 0xbeef),              # atomics-5: max of the swapped-out values
    6: (np.int32, 2, 3000),                     # atomics-6: only item 2 finds 2, stores 3 * 1000
}


@pytest.mark.parametrize("local", [False, True], ids=["global", "local"])
@pytest.mark.parametrize("case", sorted(ATOMIC_CASES))
def test_atomics(anybe, case, local):
    """atomics-1..6 and local-atomics-1..4: add (uint32, int64: the old values are 0 .. W-1 in
    some order), xor, or, exchange and compare-exchange on one uniform variable (a global
    array element, or local memory), read back by every item after the gang's atomics."""
    dt, init, want = ATOMIC_CASES[case]
    need(anybe, dt)
    ret, s = gang(anybe, atomics, np.array([init], dt), case, local)
    np.testing.assert_array_equal(ret, np.full(W, want, np.float32))
    final = {1: W, 2: W, 5: None}.get(case, want)
    if final is not None:
        assert s[0] == final
    else:
        assert 0 <= s[0] < W


# --- reduce-{add,min,max}-<type>, gather-int8-*, scatter-int8-*, int16-wrap, uint64-min/max, half-1 ---------

@tk.func
def c_rem(a, n):
    """C's remainder (truncated toward zero), which ISPC's ``%`` is: Python's ``%`` floors"""
    r = a % n
    if r != 0 and a < 0:
        r -= n
    return r


@tk.kernel
def typed_reduces(RET, OUT, aFOO: tk.Const, b):
    pi = tk.index(tk.Local, tk.Linear)
    T = OUT.dtype
    v = aFOO[pi]
    iv = T(v)
    odd = (int(v) & 1) == 1
    OUT[0, pi] = tk.group_reduce(iv, "add")                                  # reduce-add-<type>
    OUT[1, pi] = tk.group_reduce(iv if odd else T(0), "add")                 # reduce-add-<type>-1
    lo = tk.group_reduce(iv if v < 3 else T(100), "min")                     # reduce-min-<type> (masked)
    hi = tk.group_reduce(iv if v < 3 else T(0), "max")                       # reduce-max-<type> (masked)
    OUT[2, pi] = lo
    OUT[3, pi] = hi
    db = int(b) - 4                                                          # reduce-add-int8's own values
    OUT[4, pi] = tk.group_reduce(T(c_rem(pi + 1 + db - 1 - 19, 7) if T(-1) < 0 else c_rem(pi + 1, 7)), "add")
    RET[pi] = 0


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                                np.float16, np.float32, np.float64])
def test_reduce_add_min_max_of_every_type(xbe, dt):
    """reduce-add/min/max-int8 .. uint64, float16, float and double: the gang's sum of
    aFOO converted to the type, the sum of the odd ones only (``if (iv & 1)``), the min and max
    of the values below 3 (1, 2), and reduce-add-int8's ``(programIndex + db - 19) % 7`` with C's
    remainder (``(i + 1) % 7`` for unsigned types, where that is negative)."""
    need(xbe, dt)
    out = gang(xbe, typed_reduces, np.zeros((5, W), dt), afoo(), B)[1]
    p = pidx()
    np.testing.assert_array_equal(out[0], np.full(W, np.arange(1, W + 1).sum(), dt))
    np.testing.assert_array_equal(out[1], np.full(W, np.arange(1, W + 1, 2).sum(), dt))
    np.testing.assert_array_equal(out[2], np.full(W, 1, dt))
    np.testing.assert_array_equal(out[3], np.full(W, 2, dt))
    if np.dtype(dt).kind == "u":
        want = sum((i + 1) % 7 for i in p)
    else:
        want = sum(int(math.fmod(i + 1 + 1 - 1 - 19, 7)) for i in p)
    np.testing.assert_array_equal(out[4], np.full(W, want, dt))


@tk.kernel
def gather_scatter(RET, OUT, aFOO: tk.Const, zero):
    pi = tk.index(tk.Local, tk.Linear)
    pc = tk.groupsize()[0]
    a = tk.localmem(OUT.dtype, tk.groupsize()[0])
    x = tk.localmem(OUT.dtype, tk.groupsize()[0])
    if pi == 0:
        for i in range(pc):                                  # uniform int8 a[programCount] = aFOO
            a[i] = aFOO[i]
    x[pi] = -1
    tk.synchronize()
    g = 0
    if pi < 2:                                               # gather-int8-3: a masked varying load
        g = a[pi + zero]
    OUT[0, pi] = g
    OUT[1, pi] = a[pc - 1 - pi]                              # a reversed gather
    ia = int(aFOO[pi]) - 1
    if pi < 3:                                               # scatter-int8-1: a masked varying store
        x[ia] = pi
    tk.synchronize()
    OUT[2, pi] = x[pi]
    RET[pi] = 0


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int64, np.float64])
def test_gather_and_scatter(xbe, dt):
    """gather-int8/int16/int32/int64/float/double-*: loads of a gang-shared array at varying
    indices under a mask; scatter-int8/int16-*: stores at varying indices under a mask."""
    need(xbe, dt)
    out = gang(xbe, gather_scatter, np.zeros((3, W), dt), afoo(), 0)[1]
    p = pidx()
    np.testing.assert_array_equal(out[0], np.where(p < 2, p + 1, 0))
    np.testing.assert_array_equal(out[1], W - p)
    np.testing.assert_array_equal(out[2], np.where(p < 3, p, -1))


@tk.kernel
def wraps_and_u64(RET, OUT, aFOO: tk.Const, bb):
    pi = tk.index(tk.Local, tk.Linear)
    a = tk.uint16(aFOO[pi])
    b = tk.uint16(bb)
    OUT[0, pi] = (tk.uint16(4000) * a) + b                               # int16-wrap
    u = tk.uint64(aFOO[pi])
    OUT[1, pi] = max(u, tk.uint64(2))                                    # uint64-max-1
    OUT[2, pi] = min(u, tk.uint64(2))                                    # uint64-min-1
    big = tk.uint64(0xFFFFFFFFFFFFFFFF) - u
    OUT[3, pi] = tk.float32(max(big, u) == tk.uint64(0xFFFFFFFFFFFFFFFF) - u)   # uint64-max (no signed compare)
    RET[pi] = 0


def test_int16_wrap_and_uint64_min_max(be):
    """int16-wrap (uint16 4000 * a + b wraps at 2^16), uint64-max/min-1, and uint64 max of
    values above 2^63 (compared unsigned)."""
    need(be, np.uint64)
    out = gang(be, wraps_and_u64, np.zeros((4, W), np.float64), afoo(), B)[1]
    p = pidx()
    np.testing.assert_array_equal(out[0], (((4000 * (p + 1)) & 0xffff) + 5) & 0xffff)
    np.testing.assert_array_equal(out[1], np.maximum(2, p + 1))
    np.testing.assert_array_equal(out[2], np.minimum(2, p + 1))
    np.testing.assert_array_equal(out[3], np.ones(W))


@tk.kernel
def half_round_trip(errors, nan_count):
    i = tk.index()
    h = tk.uint16(i)
    f = tk.float32(tk.bitcast(h, tk.float16))            # half_to_float
    back = tk.bitcast(tk.float16(f), tk.uint16)           # float_to_half
    if math.isnan(f):
        tk.atomic_add(nan_count, 0, 1)
    elif back != h:
        tk.atomic_add(errors, 0, 1)


def test_half_to_float_round_trip(xbe):
    """half-1: every one of the 65,536 float16 bit patterns to float and back is the same
    pattern (NaNs aside, as upstream; there are 2 * 1023 of them)."""
    need(xbe, np.float16)
    errors, nans = (put(xbe, np.zeros(1, np.uint32)) for _ in range(2))
    half_round_trip(xbe)(errors, nans, ndrange=1 << 16)
    tk.synchronize(xbe)
    assert get(errors)[0] == 0
    assert get(nans)[0] == 2 * 1023
