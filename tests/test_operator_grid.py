"""Operator x dtype x special-value grid on every backend, against NumPy (SPEC sections 1, 3, 5).

``tests/test_types.py`` checks promotion and the operators on the CPU; this file runs ONE grid
on every backend of the machine (CPU, INTERP, INTERP:CHECK, CL, WEBGPU, JAX), so that a whole
class of mismatch cannot hide on one backend. One kernel per (group of operators, dtype pair),
launched over a whole vector of special values (0, -0.0, +-1, min, max, min+1, max-1,
subnormals, +-inf, NaN, huge values, rounding ties, shift counts -2 .. width+2): every pair of
values of the two operands' lists is one work item.

The expected values are NumPy's, bit for bit (NaN == NaN, -0.0 != 0.0), except where SPEC or
docs/language.md documents another semantics, which the reference then computes:

* integer ``**`` with a negative exponent gives 0 (NumPy raises);
* ``min``/``max`` are Python's builtins (``min(a, b)`` is ``b if b < a else a``);
* a float -> integer conversion of NaN, an infinity or an out-of-range value is the hardware's
  (not checked here; in range it must be exact);
* ``and``/``or`` of two arrays give NumPy bools;
* float16 / bfloat16 compute in float32 and round once on store;
* on a backend without float64 (WebGPU) results NumPy gives in float64 are not checked and a
  64-bit *array* is a ``tk.CompileError`` naming the dtype (also checked here).

Math functions are compared with NumPy's float64 function of the (exact) float64 argument,
rounded to the argument's type, within the fuzzer's ulp table (docs/fuzzing.md); their special
values (C99 Annex F: exp(-inf) = 0, log(0) = -inf, pow(x, 0) = 1, atan2's signed zeros, fmod,
hypot(inf, nan) = inf, ...) must be exact.
"""
import functools
import hashlib
import itertools
import math
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

BACKENDS = ["CPU", "INTERP", "INTERP:CHECK", "CL", "WEBGPU", "JAX"]
SINTS = [np.dtype(t) for t in ("int8", "int16", "int32", "int64")]
UINTS = [np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64")]
FLOATS = [np.dtype(t) for t in ("float16", "float32", "float64")] + [BF16]
ALL = [np.dtype(bool)] + SINTS + UINTS + FLOATS
MIXED = [("int8", "uint8"), ("int16", "uint16"), ("int32", "uint32"), ("int64", "uint64"), ("uint8", "int64"),
         ("int32", "float32"), ("int64", "float64"), ("uint64", "float32"), ("int16", "float16"),
         ("float16", "float32"), ("float32", "float64"), ("bool", "int8"), ("bool", "float32"),
         ("uint32", "int8"), ("bfloat16", "float16"), ("bfloat16", "float32")]


def backend_params():
    avail = set(tk.backends_available())
    return [pytest.param(n, marks=pytest.mark.skipif(n.split(":")[0] not in avail, reason=f"{n} unavailable"))
            for n in BACKENDS]


def nm(dt):
    return np.dtype(dt).name


# --------------------------------------------------------------------------- kernels from generated source

_GEN_DIR = os.path.join(tempfile.gettempdir(), "tinykernels_test_operator_grid")


@functools.lru_cache(maxsize=None)
def make_kernel(name, params, body):
    """A kernel from generated source, written to a content-addressed file (the frontend reads it)."""
    src = f"def {name}({', '.join(params)}):\n    i = tk.index()\n" + "".join(f"    {ln}\n" for ln in body)
    path = os.path.join(_GEN_DIR, f"{name}_{hashlib.sha1(src.encode()).hexdigest()[:16]}.py")
    if not os.path.exists(path):
        os.makedirs(_GEN_DIR, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=_GEN_DIR, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(src)
        os.replace(tmp, path)
    ns = {"tk": tk, "math": math}
    exec(compile(src, path, "exec"), ns)
    return tk.kernel(ns[name])


def launch(kernel, be_name, outs, ins):
    """Run ``kernel(*outs, *ins)`` over ``len(outs[0])`` items on the backend; the outputs as NumPy."""
    be = tk.backend(be_name)
    n = len(outs[0])
    dev = [tk.asarray(a, backend=be) if isinstance(a, np.ndarray) else a for a in list(outs) + list(ins)]
    kernel(be)(*dev, ndrange=n)
    tk.synchronize(be)
    return [d.numpy() if hasattr(d, "numpy") else np.asarray(d) for d in dev[:len(outs)]]


# --------------------------------------------------------------------------- values

def specials(dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = int(info.min), int(info.max)
        v = [0, 1, 2, 3, 7, hi, hi - 1, hi // 2, hi // 2 + 1, lo, lo + 1]
        if dt.kind == "i":
            v += [-1, -2, -3, -7, lo // 2]
        return np.array(sorted(set(v)), dtype=dt)
    f = ml_dtypes.finfo(dt) if dt == BF16 else np.finfo(dt)
    mx, tiny, sub = float(f.max), float(f.tiny), float(f.smallest_subnormal)
    v = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -7.0, 0.1, 1e4, -1e4, mx, -mx, tiny, -tiny, sub,
         -sub, sub * 3, math.inf, -math.inf, math.nan, 127.5, -128.5, 255.5, 65504.0, 2.0**31, -2.0**31, 2.0**63]
    with np.errstate(over="ignore"):
        return np.array(v, dtype=np.float64).astype(dt)


def ordered(x):
    """Floats as integers whose differences count ulps."""
    x = np.ascontiguousarray(x)
    it = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    i = x.view(it).astype(np.int64)
    return np.where(i < 0, np.iinfo(it).min - i, i)


def is_float(dt):
    return np.dtype(dt).kind == "f" or np.dtype(dt) == BF16


def assert_same(got, want, what, ctx, ulps=0, mask=None):
    """Equal dtype and values (NaN == NaN, signed zeros differ; ``ulps`` allowed off; where ``mask``)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if is_float(want.dtype):
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = np.isnan(g) != np.isnan(w)
        both = ~np.isnan(g) & ~np.isnan(w)
        exact = (g == w) & (np.signbit(g) == np.signbit(w))
        if ulps:
            fin = np.isfinite(g) & np.isfinite(w)
            close = fin & (np.abs(ordered(got) - ordered(want)) <= ulps)
            bad |= both & ~exact & ~close
        else:
            bad |= both & ~exact
    else:
        bad = got != want
    if mask is not None:
        bad &= mask
    if bad.any():
        idx = np.nonzero(bad)[0]
        rows = [f"  {', '.join(f'{k}={v[j]!r}' for k, v in ctx.items())} -> got {got[j]!r}, want {want[j]!r}"
                for j in idx[:10]]
        raise AssertionError(f"{what}: {len(idx)} of {got.size} wrong\n" + "\n".join(rows))


def skip_unsupported(be_name, *dts):
    """pytest.skip where the backend lacks a dtype, after checking that using it is a clear CompileError."""
    be = tk.backend(be_name)
    missing = [np.dtype(d) for d in dts if not be.supports(np.dtype(d))]
    if not missing:
        return
    k = make_kernel("k_copy", ("o", "a"), ("o[i] = a[i]",))
    a = np.zeros(4, missing[0])
    with pytest.raises((tk.CompileError, tk.LaunchError, ValueError, TypeError), match=nm(missing[0])):
        launch(k, be_name, [np.zeros(4, np.float32)], [a])
    pytest.skip(f"{be_name} has no {nm(missing[0])} (the documented CompileError was checked)")


def subnormal(x):
    x = np.asarray(x)
    if not is_float(x.dtype):
        return np.zeros(x.shape, bool)
    f = ml_dtypes.finfo(x.dtype) if x.dtype == BF16 else np.finfo(x.dtype)
    x64 = x.astype(np.float64)
    return (x64 != 0) & (np.abs(x64) < float(f.tiny))


def not_flushed(be_name, *arrays):
    """Where a result is checked: everywhere, but on JAX (XLA on the CPU flushes subnormal inputs
    and results to zero, docs/jax.md) not where an operand or NumPy's result is subnormal."""
    if be_name != "JAX":
        return None
    return ~np.logical_or.reduce([subnormal(np.broadcast_to(a, np.shape(arrays[0]))) for a in arrays])


def np_eval(fn):
    with np.errstate(all="ignore"):
        try:
            return np.asarray(fn())
        except (TypeError, OverflowError, ValueError):
            return None


# --------------------------------------------------------------------------- binary operators

BINOPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^",
          "<", "<=", ">", ">=", "==", "!=", "and", "or", "min", "max"]
OPNAME = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "fdiv", "%": "mod", "**": "pow", "<<": "shl",
          ">>": "shr", "&": "and_", "|": "or_", "^": "xor", "<": "lt", "<=": "le", ">": "gt", ">=": "ge",
          "==": "eq", "!=": "ne", "and": "land", "or": "lor", "min": "min", "max": "max"}


def src_of(op, x, y):
    return f"{op}({x}, {y})" if op in ("min", "max") else f"({x}) {op} ({y})"


def numpy_of(op, a, b):
    """The reference: NumPy, or the documented semantics where the language differs."""
    if op in ("min", "max"):
        pick_b = (b < a) if op == "min" else (b > a)
        rt = np.result_type(a, b)
        return np.where(pick_b, b.astype(rt), a.astype(rt))
    if op in ("and", "or"):
        return (np.logical_and if op == "and" else np.logical_or)(a, b)
    if op == "**" and a.dtype.kind in "biu" and b.dtype.kind in "iu":
        r = np.asarray(np.power(a, np.where(b < 0, 0, b).astype(b.dtype)))
        if r.dtype.kind in "iu":
            return np.where(b < 0, 0, r).astype(r.dtype)                   # documented: negative exponent -> 0
    return eval(f"a {op} b", {"a": a, "b": b, "np": np})


def shift_counts(ta, tb, n):
    if tb.kind == "b":
        return np.resize([False, True], n)
    if tb.kind not in "iu":
        return np.resize(specials(tb), n)
    rt = np.result_type(ta, tb)
    bits = rt.itemsize * 8 if rt.kind in "iu" else 64
    lo = -2 if tb.kind == "i" else 0
    return np.resize(np.arange(lo, min(bits + 3, int(np.iinfo(tb).max) + 1)), n).astype(tb)


def pair_values(ta, tb):
    va, vb = specials(ta), specials(tb)
    a = np.repeat(va, len(vb))
    b = np.tile(vb, len(va))
    return a, b


@functools.lru_cache(maxsize=None)
def valid_binops(ta, tb, f64):
    """Operators NumPy accepts on these dtypes (and, without float64, whose result is not 64-bit)."""
    x, y = np.ones(2, ta), np.ones(2, tb)
    ops = []
    for op in BINOPS:
        r = np_eval(lambda: numpy_of(op, x, y))
        if r is not None and (f64 or r.dtype.itemsize < 8):
            ops.append(op)
    return tuple(ops)


@functools.lru_cache(maxsize=None)
def binop_results(be_name, ta, tb):
    f64 = tk.backend(be_name).supports_float64
    ops = valid_binops(ta, tb, f64)
    a, b = pair_values(ta, tb)
    s = shift_counts(ta, tb, len(a))
    want, ins = {}, {}
    for op in ops:
        y = s if op in ("<<", ">>") else b
        ins[op] = {"a": a, "b": y}
        want[op] = np_eval(lambda: numpy_of(op, a, y))
    body = [f"r_{OPNAME[op]} = {src_of(op, 'a[i]', ('s' if op in ('<<', '>>') else 'b') + '[i]')}\n"
            f"    o_{OPNAME[op]}[i] = r_{OPNAME[op]}" for op in ops]
    k = make_kernel("k_binops", tuple(f"o_{OPNAME[op]}" for op in ops) + ("a", "b", "s"), tuple(body))
    got = launch(k, be_name, [np.zeros(len(a), want[op].dtype) for op in ops], [a, b, s])
    return {op: (g, want[op], ins[op]) for op, g in zip(ops, got)}


def _binop_params():
    pairs = [(t, t) for t in ALL] + [(np.dtype(x), np.dtype(y)) for x, y in MIXED]
    pairs += [(y, x) for x, y in pairs if x != y]
    return [pytest.param(ta, tb, id=f"{nm(ta)}-{nm(tb)}") for ta, tb in pairs]


@pytest.mark.parametrize("be_name", backend_params())
@pytest.mark.parametrize("ta,tb", _binop_params())
def test_binary_operators_on_special_values(be_name, ta, tb):
    skip_unsupported(be_name, ta, tb)
    errors = []
    for op, (got, want, ctx) in binop_results(be_name, ta, tb).items():
        try:
            assert_same(got, want, f"{be_name}: {nm(ta)} {op} {nm(tb)}", ctx, mask=not_flushed(be_name, want, *ctx.values()),
                        ulps=16 if op == "**" and is_float(want.dtype) else 0)
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)
