"""The renderer base shared by every C-like language (C, CUDA, HIP, OpenCL, Metal).

A subclass mostly fills in tables: type names, math function names, how to spell the
work-item geometry, atomics and barriers. The base renders expressions and structured
statements, with ``#line`` directives that point at the user's Python source.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache

from ..dtypes import DType, Ty
from ..ir import nodes as N

# Python operator -> C operator (the ones that map one to one)
C_BINOPS = {"+": "+", "-": "-", "*": "*", "/": "/", "<<": "<<", ">>": ">>", "&": "&", "|": "|",
            "^": "^", "and": "&&", "or": "||"}

_SFX = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
        "uint32": "u32", "uint64": "u64", "float32": "f32", "float64": "f64", "bool": "b"}


TYPES = {"i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "u8": "uint8_t",
         "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "f32": "float", "f64": "double"}
_LIMITS = {"i8": ("INT8_MIN", "INT8_MAX"), "i16": ("INT16_MIN", "INT16_MAX"), "i32": ("INT32_MIN", "INT32_MAX"),
           "i64": ("INT64_MIN", "INT64_MAX"), "u8": ("0", "UINT8_MAX"), "u16": ("0", "UINT16_MAX"),
           "u32": ("0", "UINT32_MAX"), "u64": ("0", "UINT64_MAX"), "f32": ("-INFINITY", "INFINITY"),
           "f64": ("-INFINITY", "INFINITY"), "b": ("0", "1")}


@lru_cache(maxsize=None)
def portable_helpers(with_f64: bool = True) -> str:
    """Python's min/max/abs for every type and the identities of min/max reductions."""
    out = []
    for sfx, t in TYPES.items():
        if sfx == "f64" and not with_f64:
            continue
        out.append(f"TK_INLINE {t} tk_min_{sfx}({t} a, {t} b) {{ return b < a ? b : a; }}")
        out.append(f"TK_INLINE {t} tk_max_{sfx}({t} a, {t} b) {{ return b > a ? b : a; }}")
        if sfx[0] == "i":
            u = "u" + t
            # -a where a < 0, in unsigned arithmetic, abs(MIN) == MIN, written as a mask: GCC 12
            # took `a < 0 ? (T)(0u - (U)a) : a` for its ABS_EXPR, assumed it non-negative (also
            # under -fwrapv) and divided abs(INT64_MIN) // 7 of a loop-invariant value as a
            # positive number (bug gcc-abs-min-nonnegative)
            out.append(f"TK_INLINE {t} tk_abs_{sfx}({t} a) {{ {u} m = ({u})0 - ({u})(a < 0); "
                       f"return ({t})((({u})a ^ m) - m); }}")
        if sfx[0] == "f":
            # 0.0 - x: GCC 12 folds it to -x when x comes from an integer (wrong for x == +0.0)
            out.append(f"TK_INLINE {t} tk_zsub_{sfx}({t} a) {{ return a == 0 ? ({t})0 : -a; }}")
            # a - b where GCC 12 may fold a to +0.0 (`(float)(x != x) - (float)i`): a call hides
            # b's form from its folder (see gcc_never_minus_zero)
            out.append(f"TK_INLINE {t} tk_fsub_{sfx}({t} a, {t} b) {{ return a - b; }}")
    out.append("TK_INLINE bool tk_min_b(bool a, bool b) { return a && b; }")
    out.append("TK_INLINE bool tk_max_b(bool a, bool b) { return a || b; }")
    out += [f"#define tk_ident_min_{s} ({lo})\n#define tk_ident_max_{s} ({hi})" for s, (lo, hi) in _LIMITS.items()]
    return "\n".join(out) + "\n"


def gcc_never_minus_zero(e) -> bool:
    """Whether GCC's folder of C expressions (GENERIC, every optimisation level) may take the C
    of ``e`` for a value that cannot be -0.0: a conversion from an integer, fabs, a constant, a
    ``?:`` of such (fold-const's tree_expr_maybe_real_minus_zero_p), with a sign in front.
    GCC 12 then folds ``0.0 - e`` (and ``0.0 + -e``) to ``-e``, which is -0.0 where e is +0.0
    (FIXED_BUGS gcc-zero-minus-int, gcc-folded-zero-minus); the left operand need not be a
    literal, only something GCC folds to +0.0 within the same expression (``(float)(x != x)``),
    so the renderer keeps such an ``e`` out of a subtraction's (or a negated addend's) view."""
    if isinstance(e, N.Unary) and e.op in ("-", "+"):
        return gcc_never_minus_zero(e.a)
    if isinstance(e, (N.Cast, N.Const)):
        return True
    if isinstance(e, N.Call):
        return e.fn in ("abs", "fabs")
    if isinstance(e, N.Select):                 # (either arm: more than GCC needs, never less)
        return gcc_never_minus_zero(e.a) or gcc_never_minus_zero(e.b)
    return False


def mangle(name: str) -> str:
    """A C identifier for an IR local or argument name."""
    return re.sub(r"[^A-Za-z0-9_]", lambda m: f"_u{ord(m.group()):x}_", name)



def oob_slots(ix: list, ns: list, zero: str, one: str, ok, sel) -> tuple:
    """The three (index, extent) argument pairs of a debug kernel's ``tk_oob`` and its ``nd``
    argument, for an access with index expressions ``ix`` and extents ``ns`` (target-language
    strings; ``ok(i, n)`` an in-bounds test, ``sel(c, x, y)`` a select). Up to three
    dimensions the pairs are the access's own. Beyond three, the third pair is the first
    out-of-bounds dimension from the third on (else the third), and ``nd`` becomes
    ``ndim + 16 * axis`` so that the host's message names that axis: every dimension is
    checked, in a fixed-size error buffer."""
    if len(ix) <= 3:
        parts = []
        for k in range(3):
            parts += [ix[k], ns[k]] if k < len(ix) else [zero, one]
        return parts, str(len(ix))
    i2, n2, ax = ix[2], ns[2], "2"
    for k in range(len(ix) - 1, 2, -1):
        c = ok(ix[k], ns[k])
        i2, n2, ax = sel(c, i2, ix[k]), sel(c, n2, ns[k]), sel(c, ax, str(k))
    return [ix[0], ns[0], ix[1], ns[1], i2, n2], f"{len(ix)} + 16 * {ax}"

class CLikeRenderer:
    """Expressions and statements of the IR in a C-like language."""

    # storage types of array elements and compute types of values, by dtype name
    storage_types = {"bool": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
                     "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
                     "uint64": "uint64_t", "float16": "uint16_t", "bfloat16": "uint16_t",
                     "float8_e4m3fn": "uint8_t", "float8_e5m2": "uint8_t", "float32": "float",
                     "float64": "double"}
    compute_types = dict(storage_types, bool="bool", float16="float", bfloat16="float",
                         float8_e4m3fn="float", float8_e5m2="float")
    # conversions of narrow float storage to and from float32
    load_conv = {"float16": "tk_f16_to_f32", "bfloat16": "tk_bf16_to_f32",
                 "float8_e4m3fn": "tk_e4m3_to_f32", "float8_e5m2": "tk_e5m2_to_f32"}
    store_conv = {"float16": "tk_f32_to_f16", "bfloat16": "tk_f32_to_bf16",
                  "float8_e4m3fn": "tk_f32_to_e4m3", "float8_e5m2": "tk_f32_to_e5m2"}
    line_directives = True
    float_suffix = "f"

    def __init__(self, kernel: N.Kernel):
        self.k = kernel
        self.lines: list = []
        self.depth = 1
        self.last_line = None
        self.tmp = 0
        self.array_ids: list = []   # debug mode: names of arrays by id

    # --- small pieces ------------------------------------------------------------------

    def ctype(self, t) -> str:
        d = t.dtype if isinstance(t, Ty) else t
        return self.compute_types[d.name]

    def stype(self, d: DType) -> str:
        return self.storage_types[d.name]

    def fsuffix(self, d: DType) -> str:
        return _SFX[self.compute_dtype(d).name]

    @staticmethod
    def compute_dtype(d: DType) -> DType:
        from .. import dtypes as D
        return D.float32 if d.is_storage_only else d

    def w(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def at(self, loc: N.Loc) -> None:
        if self.line_directives and loc.line and loc.line != self.last_line:
            self.lines.append(f'#line {loc.line} "{loc.file}"')
            self.last_line = loc.line

    def fresh(self, base="t") -> str:
        self.tmp += 1
        return f"tk_{base}{self.tmp}"

    # --- names (subclasses change how locals, arrays and geometry are stored) ---------------

    def var(self, name: str) -> str:
        return f"v_{mangle(name)}"

    def arg(self, name: str) -> str:
        return f"p_{mangle(name)}"

    def array_ptr(self, a: N.ArrayInfo) -> str:
        return f"a_{mangle(a.name)}"

    def shape(self, a: N.ArrayInfo, k: int) -> str:
        if a.space != "global":
            return str(a.shape[k])
        return f"a_{mangle(a.name)}_sh{k}"

    def stride(self, a: N.ArrayInfo, k: int) -> str:
        return f"a_{mangle(a.name)}_st{k}"

    def index(self, e: N.Index) -> str:
        """Work-item geometry: the scaffold of each language defines these names."""
        d = e.dim
        return {"global_linear": "tk_gl", "global": f"tk_g{d}", "global_pos": f"tk_p{d}",
                "local_linear": "tk_ll", "local": f"tk_l{d}", "group_linear": "tk_grl",
                "group": f"tk_gr{d}", "ndrange": f"tk_n{d}", "ngroups": f"tk_ng{d}",
                "groupsize": str(self.k.workgroup[d])}[e.kind]

    # --- constants ------------------------------------------------------------------------

    def const(self, value, t: Ty) -> str:
        d = t.dtype
        if d.kind == "b":
            return "1" if value else "0"
        if d.is_int:
            v = int(value)
            if d.bits == 64:
                if d.kind == "u":
                    return f"UINT64_C({v & (2**64 - 1)})"
                v = (v + 2**63) % 2**64 - 2**63
                return f"INT64_C({v})" if v != -2**63 else "(-INT64_C(9223372036854775807) - 1)"
            if d.kind == "u":
                return f"(({self.ctype(t)}){v & (2**d.bits - 1)}u)"
            return f"(({self.ctype(t)}){v})" if d.bits < 32 else (str(v) if v > -2**31 else f"(-{-v - 1}-1)")
        v = float(value)
        cd = self.compute_dtype(d)
        suffix = self.float_suffix if cd.bits == 32 else ""
        ct = self.ctype(cd)
        if cd.bits == 32:                # (first: a finite float64 past float32's range rounds to inf)
            import numpy as np
            with np.errstate(over="ignore"):
                v = float(np.float32(v))
        if math.isnan(v):                # the sign of a NaN shows in copysign (-inf to fp8)
            return f"(({ct})({'-' if math.copysign(1, v) < 0 else ''}NAN))"
        if math.isinf(v):
            return f"(({ct})({'-' if v < 0 else ''}INFINITY))"
        return f"{v.hex()}{suffix}" if v != 0 else (f"-0.0{suffix}" if math.copysign(1, v) < 0 else f"0.0{suffix}")

    # --- expressions --------------------------------------------------------------------------

    def expr(self, e: N.Expr) -> str:
        return getattr(self, "e_" + type(e).__name__)(e)

    def e_Const(self, e):
        return self.const(e.value, e.ty)

    def e_Var(self, e):
        return self.var(e.name)

    def e_Arg(self, e):
        return self.arg(e.name)

    def e_Shape(self, e):
        return f"(({self.narrow_index_type(e) or 'int64_t'}){self.shape(e.array, e.dim)})"

    def e_Index(self, e):
        t = self.narrow_index_type(e)
        return f"(({t}){self.index(e)})" if t else self.index(e)

    def narrow_index_type(self, e) -> str | None:
        """The C type of a shape or index typed narrower than 64 bits (the fuzzer's CPU32
        reference lowers them as WebGPU does, to weak int32), else None: ``tk_idx`` and the
        shape variables are wider, and C would compute ``int(x) * A.shape[0]`` in 64 bits
        where the kernel's types wrap at 32 (fuzzer seed 88700350)."""
        d = e.ty.dtype
        return self.ctype(e.ty) if d.is_int and d.bits < 64 else None

    def offset(self, a: N.ArrayInfo, idx: list) -> str:
        parts = [f"(tk_idx)({self.expr(i)})" for i in idx]
        if not parts:
            return "0"
        if a.contiguous:
            off = parts[0]
            for k in range(1, len(parts)):
                off = f"({off}) * {self.shape(a, k)} + {parts[k]}"
            return off
        return " + ".join(f"{p} * {self.stride(a, k)}" for k, p in enumerate(parts))

    def element(self, a: N.ArrayInfo, idx: list) -> str:
        return f"{self.array_ptr(a)}[{self.offset(a, idx)}]"

    def load_ref(self, e: N.Load) -> str:
        """The C lvalue a load reads (a renderer may serve some loads from a copy)."""
        return self.element(e.array, e.index)

    def e_Load(self, e):
        ref = self.load_ref(e)
        conv = self.load_conv.get(e.array.dtype.name)
        val = f"{conv}({ref})" if conv else (f"(bool)({ref})" if e.array.dtype.kind == "b" else ref)
        chk = self.bounds_check(e.array, e.index, e.loc)
        return f"({chk} ? {val} : ({self.ctype(e.ty)})0)" if chk else val

    def wrap_narrow(self, t: Ty, text: str) -> str:
        d = t.dtype
        if d.is_int and d.bits < 32:
            return f"(({self.ctype(t)})({text}))"
        return f"({text})"

    def e_BinOp(self, e):
        a, b, op, d = self.expr(e.a), self.expr(e.b), e.op, e.ty.dtype
        if op in ("//", "%"):
            kind = "floordiv" if op == "//" else "mod"
            if d.kind == "b":
                a, b, d = f"(int8_t)({a})", f"(int8_t)({b})", DType("int8", "i", 8)
                return f"((bool)tk_{kind}_i8({a}, {b}))"
            return f"tk_{kind}_{self.fsuffix(d)}({a}, {b})"
        if op == "**":
            if d.is_float:
                return f"{self.math_name('pow', d)}({a}, {b})"
            sfx = {8: "32", 16: "32", 32: "32", 64: "64"}[d.bits]
            sfx = ("u" if d.kind == "u" else "i") + sfx
            return self.wrap_narrow(e.ty, f"tk_ipow_{sfx}({a}, {b})")
        if op in ("<<", ">>"):
            return self.shift(e, a, b)
        if op == "-" and d.is_float and isinstance(e.a, N.Const) and e.a.value == 0 and \
                math.copysign(1.0, e.a.value) > 0:
            return f"tk_zsub_{self.fsuffix(d)}({b})"               # +0.0 - x (see portable_helpers)
        if d.is_float and op == "-" and not isinstance(e.b, N.Const) and gcc_never_minus_zero(e.b):
            return f"tk_fsub_{self.fsuffix(d)}({a}, {b})"          # a - b, b out of GCC's view
        if d.is_float and op == "+":                              # a + -x is a - x (IEEE), as GCC folds it
            for keep, neg in ((a, e.b), (b, e.a)):
                while isinstance(neg, N.Cast) and neg.a.ty.dtype.is_float and not neg.ty.dtype.is_storage_only:
                    neg = neg.a                                   # (T)-x is -(T)x (the call converts x)
                if isinstance(neg, N.Unary) and neg.op == "-" and gcc_never_minus_zero(neg.a):
                    return f"tk_fsub_{self.fsuffix(d)}({keep}, {self.expr(neg.a)})"
        if op in ("&", "|", "^", "+", "*") and d.kind == "b":     # NumPy: bool + bool is logical or
            return f"((bool)(({a}) {op} ({b})))"
        return self.wrap_narrow(e.ty, f"{a} {C_BINOPS[op]} {b}")

    def shift(self, e, a, b) -> str:
        d = e.ty.dtype
        ct = self.ctype(e.ty)
        if e.op == "<<":
            return self.wrap_narrow(e.ty, f"(({b}) >= 0 && ({b}) < {d.bits}) ? ({ct})(({ct})({a}) << ({b})) : ({ct})0")
        neg = f"(({a}) < 0 ? ({ct})-1 : ({ct})0)" if d.kind == "i" else f"({ct})0"
        return self.wrap_narrow(e.ty, f"(({b}) >= 0 && ({b}) < {d.bits}) ? ({ct})(({a}) >> ({b})) : {neg}")

    def e_Unary(self, e):
        a = self.expr(e.a)
        if e.op == "not":
            return f"(!{a})"
        # the operand in parentheses: a negative constant after '-' would read as '--'
        return self.wrap_narrow(e.ty, f"{e.op}({a})")

    def e_Compare(self, e):
        return f"({self.expr(e.a)} {e.op} {self.expr(e.b)})"

    def e_Select(self, e):
        return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"

    def e_Cast(self, e):
        src, dst = e.a.ty.dtype, e.ty.dtype
        a = self.expr(e.a)
        if dst.kind == "b":
            return f"(({a}) != 0)"
        if dst.is_storage_only:  # an explicit cast rounds to the narrow type (once)
            return f"{self.load_conv[dst.name]}({self.narrow_bits(dst, src, a)})"
        return f"(({self.ctype(e.ty)})({a}))"

    def narrow_bits(self, dst: DType, src: DType, a: str) -> str:
        """The bits of the storage-only ``dst`` (float16, bfloat16, fp8) nearest the value
        ``a`` of type ``src``: rounded once (float64 to float16 directly)."""
        if dst.name == "float16" and src.name == "float64":
            return f"tk_f64_to_f16((double)({a}))"
        return f"{self.store_conv[dst.name]}((float)({a}))"

    MATH_F32 = {"abs": "fabsf", "fabs": "fabsf", "rint": "rintf"}

    def math_name(self, fn: str, d: DType) -> str:
        cd = self.compute_dtype(d)
        return fn + "f" if cd.bits == 32 else fn

    def e_Call(self, e):
        fn, args = e.fn, [self.expr(a) for a in e.args]
        d = e.ty.dtype
        if fn == "uniform":
            return f"({args[0]})"
        if fn.startswith("rand_"):
            return f"tk_{fn}({', '.join(args)})"
        if fn in ("isnan", "isinf", "isfinite"):
            return f"((bool){fn}({args[0]}))"
        if fn in ("min", "max"):
            return f"tk_{fn}_{self.fsuffix(d)}({args[0]}, {args[1]})"
        if fn == "abs":
            if d.is_float:
                return f"{self.math_name('fabs', d)}({args[0]})"
            return f"tk_abs_{self.fsuffix(d)}({args[0]})"
        if fn == "dot4_i8":
            return f"{self.dot4_i8_fn}({', '.join(args)})"
        if fn == "bitcast":
            return self.bitcast(e.args[0].ty.dtype, d, args[0])
        one = self.const(1.0, Ty(self.compute_dtype(d)))
        if fn == "rsqrt":
            return f"({one} / {self.math_name('sqrt', d)}({args[0]}))"
        if fn == "sigmoid":
            return f"({one} / ({one} + {self.math_name('exp', d)}(-({args[0]}))))"
        return f"{self.math_name(fn, d)}({', '.join(args)})"

    dot4_i8_fn = "tk_dot4_i8"     # tk.dot4_i8: the prelude's portable function

    def bitcast(self, src: DType, dst: DType, a: str) -> str:
        """``tk.bitcast``: the bits of ``a`` (of ``src``) as ``dst`` (the same size), through the
        prelude's bit casts (a union, or ``as_type`` on Metal)."""
        ubits = f"uint{src.bits}_t"
        if src.is_storage_only:      # rounded to its type first, as a store does
            bits = f"{self.store_conv[src.name]}((float)({a}))"
        elif src.name in ("float32", "float64"):
            bits = f"tk_f{src.bits}_bits({a})"
        else:
            bits = f"(({ubits})({a}))"
        if dst.is_storage_only:
            return f"{self.load_conv[dst.name]}(({ubits})({bits}))"
        if dst.name in ("float32", "float64"):
            return f"tk_bits_f{dst.bits}({bits})"
        return f"(({self.ctype(Ty(dst))})({bits}))"

    def e_Atomic(self, e):
        return self.atomic(e)

    def bounds_check(self, a: N.ArrayInfo, idx: list, loc: N.Loc) -> str | None:
        """Debug mode: a call that reports an out-of-bounds index (and returns 0), or None."""
        if not self.k.debug:
            return None
        if N.debug_name(a) not in self.array_ids:
            self.array_ids.append(N.debug_name(a))
        ix = [f"(int64_t)({self.expr(i)})" for i in idx]
        ns = [f"(int64_t){self.shape(a, k)}" for k in range(len(idx))]
        parts, nd = oob_slots(ix, ns, "0", "1", lambda i, n: f"({i} >= 0 && {i} < {n})",
                              lambda c, x, y: f"({c} ? {x} : {y})")
        return (f"tk_oob({self.oob_prefix}{N.site_id(self.k, loc)}, {self.array_ids.index(N.debug_name(a))}, {nd}, "
                f"{', '.join(parts)})")

    oob_prefix = ""     # extra leading argument of tk_oob (an error buffer on devices)

    def zero_step_check(self, s: N.For) -> str | None:
        """Debug mode: a call that reports the run-time zero step of the range loop ``s`` (through
        tk_oob with array id -1, which the launch raises as a ValueError naming the line), or None."""
        if not self.k.debug:
            return None
        return f"tk_oob({self.oob_prefix}{N.site_id(self.k, s.loc)}, -1, 1, 0, 0, 0, 1, 0, 1)"

    def collective_parts(self, s: N.Collective) -> tuple:
        """(identity, combine expression of ``acc`` and ``x``) of a group reduction or scan."""
        sfx = self.fsuffix(s.ty.dtype)
        all_ones = "1" if s.ty.dtype.kind == "b" else f"(~({self.ctype(s.ty)})0)"
        ident = {"add": "0", "mul": "1", "or": "0", "and": all_ones,
                 "min": f"tk_ident_max_{sfx}", "max": f"tk_ident_min_{sfx}"}[s.op]
        comb = {"add": "acc + x", "mul": "acc * x", "and": "acc & x", "or": "acc | x",
                "min": f"tk_min_{sfx}(acc, x)", "max": f"tk_max_{sfx}(acc, x)"}[s.op]
        if s.ty.dtype.kind == "b" and s.op in ("and", "or"):
            comb = "acc && x" if s.op == "and" else "acc || x"
        return ident, comb

    def atomic(self, e: N.Atomic) -> str:
        raise NotImplementedError

    # --- statements ----------------------------------------------------------------------------

    def stmts(self, ss) -> None:
        for s in ss:
            self.stmt(s)

    def stmt(self, s) -> None:
        if s.loc is not None and not isinstance(s, (N.FuncBlock,)):
            self.at(s.loc)
        getattr(self, "s_" + type(s).__name__)(s)

    def s_Assign(self, s):
        self.w(f"{self.var(s.var)} = {self.expr(s.value)};")

    def stored_value(self, a: N.ArrayInfo, value: N.Expr) -> str:
        """``value`` converted to ``a``'s storage type."""
        conv = self.store_conv.get(a.dtype.name)
        if conv and isinstance(value, N.Cast) and value.ty.dtype == a.dtype and a.dtype.is_storage_only:
            # the value was rounded to the array's type (the frontend's store cast): store
            # those bits, not their float32 value converted again (the same bits: the
            # storage's conversion of its own values is exact; a second one cost as much)
            return self.narrow_bits(a.dtype, value.a.ty.dtype, self.expr(value.a))
        v = self.expr(value)
        if conv:
            v = f"{conv}({v})"
        elif a.dtype.kind == "b":
            v = f"(uint8_t)({v})"
        return v

    def s_Store(self, s):
        a = s.array
        v = self.stored_value(a, s.value)
        stmt = f"{self.element(a, s.index)} = {v};"
        chk = self.bounds_check(a, s.index, s.loc)
        self.w(f"if ({chk}) {stmt}" if chk else stmt)

    def s_ExprStmt(self, s):
        self.w(f"(void)({self.expr(s.expr)});")

    def s_If(self, s):
        self.w(f"if ({self.expr(s.cond)}) {{")
        self.block(s.body)
        if s.orelse:
            self.w("} else {")
            self.block(s.orelse)
        self.w("}")

    def block(self, body) -> None:
        self.depth += 1
        self.last_line = None
        self.stmts(body)
        self.depth -= 1

    def loop_started(self, s, trips: str):
        """Hook: a ``range`` loop of ``trips`` (C) iterations starts; what it returns is given to
        :meth:`loop_iteration` at the top of every iteration (the CPU's prefetch steps)."""
        return None

    def loop_iteration(self, state) -> None:
        """Hook: the top of an iteration of a ``range`` loop (see :meth:`loop_started`)."""

    def s_For(self, s):
        """``range`` loops run a trip count computed once in uint64, so a counter that would
        step past the end of its type never wraps around (``range(0, 127, 2)`` on int8)."""
        t = self.k.locals.get(s.var)
        ct = self.ctype(t) if t is not None else "int64_t"
        # (fresh names must not collide with the geometry names tk_n<d>, tk_s<d>, tk_p<d>, ...)
        k, n, start, step = self.fresh("k"), self.fresh("trips"), self.fresh("start"), self.fresh("step")
        stop = self.fresh("stop")
        self.w(f"{{ const {ct} {start} = {self.expr(s.start)}; const {ct} {stop} = {self.expr(s.stop)}; "
               f"const {ct} {step} = {self.expr(s.step)};")
        up = f"({stop} > {start} ? ((uint64_t){stop} - (uint64_t){start} - 1u) / (uint64_t){step} + 1u : 0u)"
        down = (f"({start} > {stop} ? ((uint64_t){start} - (uint64_t){stop} - 1u) / "
                f"((uint64_t)0 - (uint64_t){step}) + 1u : 0u)")
        if isinstance(s.step, N.Const):
            trips = up if s.step.value > 0 else down
        else:           # a run-time step of zero runs no iteration (and never divides by zero)
            trips = f"({step} > 0 ? {up} : {step} < 0 ? {down} : 0u)"
            zero = self.zero_step_check(s)
            if zero:
                self.w(f"  if ({step} == 0) (void){zero};")
        self.w(f"  const uint64_t {n} = {trips};")
        hook = self.loop_started(s, n)
        self.w(f"  for (uint64_t {k} = 0; {k} < {n}; ++{k}) {{")
        self.depth += 1
        self.loop_iteration(hook)
        self.w(f"{self.var(s.var)} = ({ct})((uint64_t){start} + {k} * (uint64_t){step});")
        self.depth -= 1
        self.block(s.body)
        self.w("}}")

    def s_While(self, s):
        self.w(f"while ({self.expr(s.cond)}) {{")
        self.block(s.body)
        self.w("}")

    def s_Break(self, s):
        self.w("break;")

    def s_Continue(self, s):
        self.w("continue;")

    def s_FuncBlock(self, s):
        self.w("{")
        self.block(s.body)
        self.w(f"}} {mangle(s.label)}: ;")

    def s_FuncExit(self, s):
        self.w(f"goto {mangle(s.label)};")

    def s_Philox(self, s):
        t = self.fresh("ph")
        self.w(f"{{ tk_u32x4 {t} = tk_philox4x32({', '.join(self.expr(a) for a in s.args)});")
        self.w("  " + " ".join(f"{self.var(o)} = {t}.{c};" for o, c in zip(s.outs, "xyzw")) + " }")

    def s_Print(self, s):
        fmt, args, temps = [], [], []
        for p in s.parts:
            if isinstance(p, str):
                fmt.append(p.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("\n", "\\n"))
                continue
            f, a = self.print_value(p)
            if p.ty.dtype.is_float:     # a NaN prints "nan" whatever its sign, as Python's %g does
                t = self.fresh("pr")
                temps.append(f"{self.print_formats['f'][1]} {t} = {a};")
                a = f"({t} != {t} ? fabs({t}) : {t})"
            fmt.append(f)
            args.append(a)
        if temps:
            self.w("{ " + " ".join(temps))
        self.print_call(" ".join(fmt), args)
        if temps:
            self.w("}")

    print_formats = {"f": ("%g", "double"), "u": ("%llu", "unsigned long long"), "i": ("%lld", "long long")}

    def print_value(self, p) -> tuple:
        """printf conversion and argument for a value."""
        kind = "f" if p.ty.dtype.is_float else "u" if p.ty.dtype.kind == "u" else "i"
        fmt, cast = self.print_formats[kind]
        return fmt, f"({cast})({self.expr(p)})"

    def print_call(self, fmt: str, args: list) -> None:
        self.w(f'printf("{fmt}\\n"{"".join(", " + a for a in args)});')

    def s_Barrier(self, s):
        raise NotImplementedError

    def s_AllocArray(self, s):
        a = s.array
        size = 1
        for n in a.shape:
            size *= n
        self.w(f"{self.stype(a.dtype)} {self.array_ptr(a)}[{size}];")
