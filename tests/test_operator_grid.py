"""Operator x dtype x special-value grid on every backend, against NumPy (SPEC sections 1, 3, 5).

``tests/test_types.py`` checks promotion and the operators on the CPU; this file runs ONE grid
on every backend of the machine (CPU, INTERP, INTERP:CHECK, CL, WEBGPU, JAX), so that a whole
class of mismatch cannot hide on one backend. One kernel per (group of operators, dtype pair),
launched over a whole vector of special values (0, -0.0, +-1, min, max, min+1, max-1,
subnormals, +-inf, NaN, huge values, rounding ties, shift counts -2 .. width+2): every pair of
values of the two operands' lists is one work item.

The expected values are NumPy's, bit for bit (NaN == NaN, -0.0 != 0.0), except where SPEC or
docs/language.md documents another semantics, which the reference then computes:

* integer ``**`` with a negative exponent gives ``1 / a ** -b`` truncated toward zero: 1 for
  a = 1, +-1 for a = -1, else 0 (NumPy raises);
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
import math
import operator as O
import os
import tempfile

import numpy as np
import pytest

import tinykernels as tk
from gen_kernels import make_kernel as _make_kernel, np_eval

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

BACKENDS = ["CPU", "INTERP", "INTERP:CHECK", "CL", "WEBGPU", "JAX"] + (["CUDA"] if tk.backends()["CUDA"][0] else [])
SINTS = [np.dtype(t) for t in ("int8", "int16", "int32", "int64")]
UINTS = [np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64")]
FLOATS = [np.dtype(t) for t in ("float16", "float32", "float64")] + [BF16]
ALL = [np.dtype(bool)] + SINTS + UINTS + FLOATS
MIXED = [("int8", "uint8"), ("int16", "uint16"), ("int32", "uint32"), ("int64", "uint64"), ("uint8", "int64"),
         ("int32", "float32"), ("uint32", "float32"), ("int64", "float64"), ("uint64", "float32"), ("int16", "float16"),
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
    """A kernel from generated source (tests/gen_kernels.py), one per source."""
    return _make_kernel(_GEN_DIR, name, params, body)


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
    f = finfo(dt)
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


ML_FLOATS = {np.dtype(getattr(ml_dtypes, n)) for n in ("bfloat16", "float8_e4m3fn", "float8_e5m2")}


def finfo(dt):
    return ml_dtypes.finfo(dt) if np.dtype(dt) in ML_FLOATS else np.finfo(dt)


def is_float(dt):
    return np.dtype(dt).kind == "f" or np.dtype(dt) in ML_FLOATS


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
    f = finfo(x.dtype)
    x64 = x.astype(np.float64)
    return (x64 != 0) & (np.abs(x64) < float(f.tiny))


def not_flushed(be_name, *arrays):
    """Where a result is checked: everywhere, but on JAX (XLA on the CPU flushes subnormal inputs
    and results to zero, docs/jax.md) not where an operand or NumPy's result is subnormal."""
    if be_name != "JAX":
        return None
    return ~np.logical_or.reduce([subnormal(np.broadcast_to(a, np.shape(arrays[0]))) for a in arrays])


# --------------------------------------------------------------------------- binary operators

BINOPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^",
          "<", "<=", ">", ">=", "==", "!=", "and", "or", "min", "max"]
OPNAME = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "fdiv", "%": "mod", "**": "pow", "<<": "shl",
          ">>": "shr", "&": "and_", "|": "or_", "^": "xor", "<": "lt", "<=": "le", ">": "gt", ">=": "ge",
          "==": "eq", "!=": "ne", "and": "land", "or": "lor", "min": "min", "max": "max"}


PYOP = {"+": O.add, "-": O.sub, "*": O.mul, "/": O.truediv, "//": O.floordiv, "%": O.mod, "**": O.pow,
        "<<": O.lshift, ">>": O.rshift, "&": O.and_, "|": O.or_, "^": O.xor, "<": O.lt, "<=": O.le, ">": O.gt,
        ">=": O.ge, "==": O.eq, "!=": O.ne}


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
            if r.dtype.kind == "u" or b.dtype.kind == "u":
                return r
            a2, b2 = a.astype(r.dtype), b.astype(r.dtype)          # documented: 1 / a ** -b, truncated
            neg = np.where(a2 == 1, 1, np.where(a2 == -1, np.where(b2 % 2 != 0, -1, 1), 0)).astype(r.dtype)
            return np.where(b2 < 0, neg, r).astype(r.dtype)
    return PYOP[op](a, b)


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
    if be_name == "JAX" and (nm(tb), nm(ta)) in MIXED:
        pytest.skip("JAX: each mixed pair in one order (an XLA compile per kernel; the full grid took 9 minutes)")
    skip_unsupported(be_name, ta, tb)
    errors = []
    for op, (got, want, ctx) in binop_results(be_name, ta, tb).items():
        try:
            assert_same(got, want, f"{be_name}: {nm(ta)} {op} {nm(tb)}", ctx, mask=not_flushed(be_name, want, *ctx.values()),
                        ulps=16 if op == "**" and is_float(want.dtype) else 0)
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


# --------------------------------------------------------------------------- weak Python scalar arguments

WEAK = {"int": [0, 1, 2, 7, 100], "float": [0.0, -0.0, 1.5, 2.5, -7.25, math.inf, -math.inf, math.nan, 1e-40]}
WEAK_OPS = ["+", "-", "*", "/", "//", "%", "<", "==", "min", "max"]


@functools.lru_cache(maxsize=None)
def weak_results(be_name, t, kind, side):
    """``a[i] OP s`` (or ``s OP a[i]``) with ``s`` a Python scalar argument (weak, NEP 50)."""
    a = specials(t)
    f64 = tk.backend(be_name).supports_float64
    x = np.ones(2, t)
    ops = []
    for op in WEAK_OPS:
        r = np_eval(lambda: numpy_of(op, x, np.asarray(WEAK[kind][1])))
        if r is not None and np_eval(lambda: PYOP.get(op, O.add)(x, WEAK[kind][1])) is not None \
                and (f64 or r.dtype.itemsize < 8):
            ops.append(op)
    ops = [op for op in ops if op != "-" or t.kind != "b"]
    body = [f"o_{OPNAME[op]}[i] = {src_of(op, 's', 'a[i]') if side else src_of(op, 'a[i]', 's')}" for op in ops]
    k = make_kernel("k_weak", tuple(f"o_{OPNAME[op]}" for op in ops) + ("a", "s"), tuple(body))
    res = []
    values = WEAK[kind][::2] if be_name == "JAX" and kind == "int" else WEAK[kind]   # JAX: a compile per int value
    for s in values:
        want = {}
        for op in ops:
            if t == BF16:
                # NEP 50 (SPEC 3): the weak scalar takes bfloat16 (ml_dtypes' NumPy loops give float32)
                sv = np.full(len(a), s, BF16).astype(np.float32)
                r = np_eval(lambda: numpy_of(op, sv, a.astype(np.float32)) if side else
                            numpy_of(op, a.astype(np.float32), sv))
                want[op] = r.astype(BF16) if r.dtype.kind == "f" else r
            elif op in ("min", "max"):
                rt = np.result_type(a, s)                                # NEP 50: s is weak
                av, sv = a.astype(rt), np.full(len(a), s, rt)
                want[op] = numpy_of(op, sv, av) if side else numpy_of(op, av, sv)
            else:
                want[op] = np_eval(lambda: PYOP[op](s, a) if side else PYOP[op](a, s))
        got = launch(k, be_name, [np.zeros(len(a), want[op].dtype) for op in ops], [a, s])
        res += [(op, s, g, want[op]) for op, g in zip(ops, got)]
    return a, res


@pytest.mark.parametrize("be_name", backend_params())
@pytest.mark.parametrize("side", [0, 1], ids=["arr_op_s", "s_op_arr"])
@pytest.mark.parametrize("kind", list(WEAK))
@pytest.mark.parametrize("t", [t for t in ALL if t.kind != "b"], ids=nm)
def test_weak_python_scalar_arguments(be_name, t, kind, side):
    """NEP 50: a Python int/float argument takes the array's type (a float with an integer array: float64)."""
    skip_unsupported(be_name, t)
    if kind == "float" and t.kind in "iu" and not tk.backend(be_name).supports_float64:
        pytest.skip("int array with a Python float is float64 in NumPy")
    a, res = weak_results(be_name, t, kind, side)
    errors = []
    for op, s, got, want in res:
        try:
            assert_same(got, want, f"{be_name}: {'s ' + op + ' ' + nm(t) if side else nm(t) + ' ' + op + ' s'} (s={s!r})",
                        {"a": a}, mask=not_flushed(be_name, want, a, np.full(len(a), s, t) if is_float(t) else a))
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


# --------------------------------------------------------------------------- unary operators, builtins and casts

CAST_TARGETS = ["bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"]


def _target(name):
    if name.startswith("float8") or name == "bfloat16":
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(bool) if name == "bool_" else np.dtype(name)


def unary_numpy(op, a):
    if op == "neg":
        return -a
    if op == "inv":
        return ~a
    if op == "abs":
        return np.abs(a)
    if op == "not":
        return np.logical_not(a)
    if op == "bool":
        return a.astype(bool)
    if op == "int":
        return a.astype(np.int64)
    if op == "float":
        return a.astype(np.float64)
    if op == "round":
        return np.round(a.astype(np.float64)).astype(np.int64) if is_float(a.dtype) else a.astype(np.int64)
    return a.astype(_target(op[5:]))                                     # "cast_<dtype>"


UNARY_SRC = {"neg": "-a[i]", "inv": "~a[i]", "abs": "abs(a[i])", "not": "not a[i]", "bool": "bool(a[i])",
             "int": "int(a[i])", "float": "float(a[i])", "round": "round(a[i])"}


def unary_ops(t, be):
    ops = ["abs", "not", "bool", "int", "float", "round"] + [f"cast_{n}" for n in CAST_TARGETS]
    if t.kind != "b":
        ops.append("neg")
    if t.kind in "biu":
        ops.append("inv")
    if t.kind == "b":
        ops.remove("round")
    return [op for op in ops if not op.startswith("cast_") or be.supports(_target(op[5:]))]


def out_dtype(op, t, be):
    """The result dtype; Python's int/float/round are int64/float64 (int32/float32 without 64-bit types)."""
    if op in ("int", "round"):
        return np.dtype(np.int64 if be.supports_float64 else np.int32)
    if op == "float":
        return np.dtype(np.float64 if be.supports_float64 else np.float32)
    if op in ("not", "bool"):
        return np.dtype(bool)
    if op.startswith("cast_"):
        return _target(op[5:])
    return t


def defined(op, a, dt):
    """Where the result is defined: a float -> integer conversion of NaN, an infinity or an
    out-of-range value gives what the hardware gives (docs/language.md), so it is not checked."""
    if not is_float(a.dtype) or dt.kind not in "iu":
        return np.ones(len(a), bool)
    x = a.astype(np.float64)
    if op == "round":
        x = np.round(x)
    info = np.iinfo(dt)
    with np.errstate(invalid="ignore"):
        return np.isfinite(x) & (np.trunc(x) >= float(info.min)) & (np.trunc(x) < float(info.max) + 1)


@pytest.mark.parametrize("be_name", backend_params())
@pytest.mark.parametrize("t", ALL, ids=nm)
def test_unary_builtins_and_casts(be_name, t):
    skip_unsupported(be_name, t)
    be = tk.backend(be_name)
    a = specials(t)
    ops = unary_ops(t, be)
    body = tuple(f"o_{op}[i] = {UNARY_SRC.get(op) or 'tk.' + op[5:] + '(a[i])'}" for op in ops)
    k = make_kernel("k_unary", tuple(f"o_{op}" for op in ops) + ("a",), body)
    got = launch(k, be_name, [np.zeros(len(a), out_dtype(op, t, be)) for op in ops], [a])
    errors = []
    for op, g in zip(ops, got):
        dt = out_dtype(op, t, be)
        want = np_eval(lambda: unary_numpy(op, a))
        if dt.itemsize < want.dtype.itemsize and op in ("int", "round", "float"):
            with np.errstate(all="ignore"):
                want = want.astype(dt)                                  # no 64-bit types: int32 / float32
        mask = defined(op, a, dt)
        if be_name == "JAX":
            mask &= not_flushed(be_name, a, want)
        try:
            assert_same(g, want, f"{be_name}: {op}({nm(t)})", {"a": a}, mask=mask)
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


# --------------------------------------------------------------------------- math functions

# name: (source, float64 reference, allowed ulps (docs/fuzzing.md's table))
MATH1 = {
    "exp": ("math.exp", np.exp, 4), "log": ("math.log", np.log, 4), "log2": ("math.log2", np.log2, 4),
    "log1p": ("math.log1p", np.log1p, 4), "expm1": ("math.expm1", np.expm1, 4), "sqrt": ("math.sqrt", np.sqrt, 0),
    "sin": ("math.sin", np.sin, 4), "cos": ("math.cos", np.cos, 4), "tan": ("math.tan", np.tan, 6),
    "asin": ("math.asin", np.arcsin, 4), "acos": ("math.acos", np.arccos, 4), "atan": ("math.atan", np.arctan, 6),
    "sinh": ("math.sinh", np.sinh, 4), "cosh": ("math.cosh", np.cosh, 4), "tanh": ("math.tanh", np.tanh, 6),
    "erf": ("math.erf", np.vectorize(math.erf, otypes=[np.float64]), 16),
    "floor": ("math.floor", np.floor, 0), "ceil": ("math.ceil", np.ceil, 0), "trunc": ("math.trunc", np.trunc, 0),
    "fabs": ("math.fabs", np.abs, 0), "rsqrt": ("tk.rsqrt", lambda x: 1 / np.sqrt(x), 4),
    "sigmoid": ("tk.sigmoid", lambda x: 1 / (1 + np.exp(-x)), 8),
}
MATH_BOOL = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
MATH2 = {
    "atan2": ("math.atan2", np.arctan2, 6), "pow": ("math.pow", np.power, 16), "hypot": ("math.hypot", np.hypot, 4),
    "copysign": ("math.copysign", np.copysign, 0), "fmod": ("math.fmod", np.fmod, 0),
}
MATH_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1.5, 3.0, -3.0, 10.0, -10.0, 0.75, 1e-3, 88.0, -88.0,
               100.0, -104.0, 710.0, 1e30, 1e-30, math.pi, -math.pi / 2, math.inf, -math.inf, math.nan]


def math_values(t):
    f = finfo(t)
    v = MATH_VALUES + [float(f.max), -float(f.max), float(f.tiny), float(f.smallest_subnormal),
                       -float(f.smallest_subnormal)]
    with np.errstate(over="ignore"):
        return np.array(v).astype(t)


def reference(fn, *args, t):
    """``fn`` in float64 of the exact float64 arguments, rounded to ``t``."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(*[x.astype(np.float64) for x in args])).astype(t)


def math_check(be_name, name, got, want, ulps, ctx, t):
    """Within ``ulps`` (of float32 for the narrow floats, which compute in float32; then one ulp of
    the stored type), special values (inf, nan, zeros, exact results) exactly."""
    if t in (np.dtype(np.float16), BF16) and ulps:
        ulps = 1
    special = ~np.isfinite(want.astype(np.float64)) | (want.astype(np.float64) == 0)
    for v in ctx.values():
        special |= ~np.isfinite(v.astype(np.float64))
    if name == "pow":                                    # C99 F.9.4.4: pow(x, +-0) = 1, pow(+1, y) = 1
        special |= (ctx["b"].astype(np.float64) == 0) | (ctx["a"].astype(np.float64) == 1)
    mask = not_flushed(be_name, want, *ctx.values())
    if be_name == "JAX":     # XLA flushes subnormal intermediates too: asin(smallest normal) is 0
        f = finfo(t)
        for v in ctx.values():
            mask &= ~(np.abs(v.astype(np.float64)) <= float(f.tiny)) | (v.astype(np.float64) == 0)
    assert_same(np.where(special, want, got).astype(t), want, f"{be_name}: {name}({nm(t)}) (accuracy)", ctx, ulps=ulps,
                mask=mask)
    assert_same(got[special], want[special], f"{be_name}: {name}({nm(t)}) (special values)",
                {k: v[special] for k, v in ctx.items()}, mask=None if mask is None else mask[special])


@pytest.mark.parametrize("be_name", backend_params())
@pytest.mark.parametrize("t", FLOATS, ids=nm)
def test_math_functions_on_special_values(be_name, t):
    skip_unsupported(be_name, t)
    a = math_values(t)
    n1 = list(MATH1)
    body = [f"o_{n}[i] = {MATH1[n][0]}(a[i])" for n in n1] + [f"o_{n}[i] = math.{n}(a[i])" for n in MATH_BOOL]
    k = make_kernel("k_math1", tuple(f"o_{n}" for n in n1 + list(MATH_BOOL)) + ("a",), tuple(body))
    got = launch(k, be_name, [np.zeros(len(a), t) for _ in n1] + [np.zeros(len(a), bool) for _ in MATH_BOOL], [a])
    errors = []
    for n, g in zip(n1 + list(MATH_BOOL), got):
        try:
            if n in MATH_BOOL:
                assert_same(g, MATH_BOOL[n](a.astype(np.float64)), f"{be_name}: {n}({nm(t)})", {"a": a})
            else:
                math_check(be_name, n, g, reference(MATH1[n][1], a, t=t), MATH1[n][2], {"a": a}, t)
        except AssertionError as e:
            errors.append(str(e))
    x, y = np.repeat(a, len(a)), np.tile(a, len(a))
    n2 = list(MATH2)
    body = [f"o_{n}[i] = {MATH2[n][0]}(a[i], b[i])" for n in n2]
    body += ["o_fma[i] = tk.fma(a[i], b[i], a[i])", "o_clamp[i] = tk.clamp(a[i], b[i], b[i] + 1)"]
    k = make_kernel("k_math2", tuple(f"o_{n}" for n in n2) + ("o_fma", "o_clamp", "a", "b"), tuple(body))
    got = launch(k, be_name, [np.zeros(len(x), t) for _ in range(len(n2) + 2)], [x, y])
    for n, g in zip(n2, got):
        try:
            math_check(be_name, n, g, reference(MATH2[n][1], x, y, t=t), MATH2[n][2], {"a": x, "b": y}, t)
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)
