"""Integer ``//`` and ``%`` in a flat kernel's CPU row loop (passes/rowdiv.py, docs/cpu.md):
a divisor fixed for the row and a dividend that grows by one per position are computed
once per run of equal quotients, so the item loop has no division and vectorizes; the
results stay Python's floor division and modulo exactly (negative dividends and divisors,
0 and -1, 64-bit wrap of the dividend, runs split by threads, blocks and rows)."""
import numpy as np
import pytest

import tinykernels as tk

CPU2 = tk.CPU(threads=2)

EDGE_DIVISORS = [1, 2, 3, 7, 16, 1000, 4999, 5000, 10**6, 2**62, 2**63 - 1,
                 -1, -2, -3, -16, -1000, -(2**62), -(2**63), 0]
EDGE_OFFSETS = [0, 5, -7, -4999, -2500, 2**62, -(2**62), 2**63 - 3000, -(2**63), -(2**63) + 1000]


def _py_floordiv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = a // b
    return (q + 2**63) % 2**64 - 2**63          # MIN // -1 wraps to MIN, as tk defines it


def _py_mod(a: int, b: int) -> int:
    return 0 if b == 0 else a % b


def _wrap(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


@tk.kernel
def divmod_1d(q, r, off: tk.int64, c: tk.int64):
    i = tk.index()
    t = i + off
    q[i] = t // c
    r[i] = t % c


@tk.kernel
def divmod_read(q, r, x, off: tk.int64, c: tk.int64):
    # reads a writable array: plain stores (the item loop without staging)
    i = tk.index()
    q[i] = (i + off) // c + x[i] * 0
    r[i] = (off + i) % c


@tk.kernel
def divmod_2d(q, r, off: tk.int64, c: tk.int64):
    i, j = tk.index(tk.Global, tk.Cartesian)
    p = tk.index(tk.Global, tk.Linear)
    q[i, j] = (j + i * 3 + off) // c
    r[i, j] = (p - off) % c + (j - off) // (c + 1) * 0


def _inner_loops(src: str) -> list:
    """The bodies of the generated item loops over a row (``for (tk_idx tk_pl ...``)."""
    lines = src[src.index("static void tk_chunk"):].splitlines()
    out = []
    for n, line in enumerate(lines):
        if line.lstrip().startswith("for (tk_idx tk_pl"):
            indent = line[:len(line) - len(line.lstrip())]
            end = next(m for m in range(n + 1, len(lines)) if lines[m] == indent + "}")
            out.append("\n".join(lines[n + 1:end]))
    return out


@pytest.mark.parametrize("kernel, nargs", [(divmod_1d, 0), (divmod_read, 1)])
def test_row_divisions_leave_the_item_loop(kernel, nargs):
    """No division helper is called inside the row's item loop: quotient and remainder come
    from the run (tk_dq/tk_dr); before, every item called tk_floordiv_i64/tk_mod_i64 and
    GCC vectorized nothing."""
    n = 5000
    arrays = [np.zeros(n, np.int64) for _ in range(2 + nargs)]
    src = kernel.source("CPU", *arrays, 3, 7, ndrange=(n,))
    loops = _inner_loops(src)
    assert loops
    for body in loops:
        assert "tk_floordiv_i64(" not in body and "tk_mod_i64(" not in body, body
        assert "tk_dq" in body and "tk_dr" in body
    assert "tk_div_run(" in src


def test_2d_row_divisions_leave_the_item_loop():
    q = np.zeros((4, 300), np.int64)
    src = divmod_2d.source("CPU", q, q, 3, 7, ndrange=q.shape)
    for body in _inner_loops(src):
        assert "tk_floordiv_i64(" not in body and "tk_mod_i64(" not in body, body


def test_divisions_that_vary_otherwise_stay_in_the_loop():
    """A dividend that is not the position plus row constants (a loaded value, a stepped
    coordinate, narrower arithmetic) keeps the per-item helper."""
    @tk.kernel
    def varying(q, x: tk.Const, c: tk.int64, c32: tk.int32):
        i = tk.index()
        k = tk.int32(i)
        q[i] = x[i] // c + (i * 2) // c + k // c32
    n = 5000
    src = varying.source("CPU", np.zeros(n, np.int64), np.zeros(n, np.int64), 3, 3, ndrange=(n,))
    assert "tk_div_run(" not in src
    assert all("tk_floordiv_i64(" in body for body in _inner_loops(src))


@pytest.mark.parametrize("c", EDGE_DIVISORS)
def test_row_divisions_are_exact(c):
    """Every divisor sign and size, dividends crossing zero and wrapping past INT64_MAX, on
    2 threads (chunks start inside runs): bit-identical to Python's // and %."""
    n = 5000
    for off in EDGE_OFFSETS:
        t = [_wrap(i + off) for i in range(n)]
        want_q = np.array([_py_floordiv(a, c) for a in t], np.int64)
        want_r = np.array([_py_mod(a, c) for a in t], np.int64)
        for kernel, extra in ((divmod_1d, ()), (divmod_read, (np.zeros(n, np.int64),))):
            q, r = np.full(n, -5, np.int64), np.full(n, -5, np.int64)
            kernel(CPU2)(q, r, *extra, off, c, ndrange=(n,))
            np.testing.assert_array_equal(q, want_q, err_msg=f"{kernel} c={c} off={off}")
            np.testing.assert_array_equal(r, want_r, err_msg=f"{kernel} c={c} off={off}")


@pytest.mark.parametrize("ndrange", [(7, 1000), (range(1, 8), range(3, 1200)), (range(0, 14, 2), range(5, 2000, 3))])
@pytest.mark.parametrize("c", [1, 3, 64, -5, 0, -1, 2**63 - 1])
def test_2d_row_divisions_are_exact(ndrange, c):
    """2-D rows (offsets and steps), against the interpreter (the reference)."""
    off = -1234
    shape = (16, 2000)
    outs = {}
    for be in (CPU2, tk.backend("INTERP")):
        q, r = np.full(shape, -5, np.int64), np.full(shape, -5, np.int64)
        divmod_2d(be)(q, r, off, c, ndrange=ndrange)
        outs[be] = (q, r)
    (q1, r1), (q2, r2) = outs.values()
    np.testing.assert_array_equal(q1, q2)
    np.testing.assert_array_equal(r1, r2)


def test_streamed_row_divisions_are_exact(monkeypatch):
    """Streamed stores (blocks of 512 int64 items, each split into runs) keep the values."""
    monkeypatch.setenv("TK_CPU_STREAM_BYTES", "1")

    @tk.kernel
    def divmod_streamed(q, r, off: tk.int64, c: tk.int64):
        i = tk.index()
        q[i] = (i + off) // c
        r[i] = (i + off) % c
    n = 70001
    for c in (3, 700, -9, 1):
        q, r = np.zeros(n, np.int64), np.zeros(n, np.int64)
        divmod_streamed(CPU2)(q, r, -333, c, ndrange=(n,))
        t = np.arange(n, dtype=np.int64) - 333
        np.testing.assert_array_equal(q, t // c)
        np.testing.assert_array_equal(r, t % c)


def test_negated_local_holding_a_negative_constant():
    """A dividend that negates a local holding a negative literal: evaluated once per run, the
    local's value is substituted into the expression, and the C renderer must parenthesize
    a negation's operand (it wrote ``--11``, which C reads as a decrement: fuzz seed 34002006)."""
    @tk.kernel
    def neg_local(q, r, c: tk.int64):
        i = tk.index()
        m = -11
        m32 = tk.int32(-11)
        q[i] = (i - -m) // c + (-m) // 5 + int(-m32) % 5
        r[i] = (i + c) % 7
    n = 300
    q, r = np.zeros(n, np.int64), np.zeros(n, np.int64)
    neg_local(CPU2)(q, r, 4, ndrange=(n,))
    i = np.arange(n, dtype=np.int64)
    np.testing.assert_array_equal(q, (i - 11) // 4 + 11 // 5 + 11 % 5)
    np.testing.assert_array_equal(r, (i + 4) % 7)
