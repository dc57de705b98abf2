"""Byte-run statements for the generator (``Options.bytes``, off by default): ``tk.load_i8``,
``tk.lookup_u4``, ``tk.load_halves``, ``tk.dot_i8`` and ``tk.dot_u4i8`` (docs/language.md) on
int8/uint8 input arrays of random bytes, into ``tk.private`` arrays whose elements the kernel
then stores. Every run stays inside its row (its start index is taken modulo the room left), so
the kernels are defined; the results are exact (float32 conversions, fma of exact int32 lanes),
so every backend must agree with the interpreter bit for bit (NaN payloads of ``load_halves``
included, SPEC/docs: "bit for bit")."""
from __future__ import annotations

import math

import numpy as np

from .case import ArgSpec, Arr, Ex, Var, _Retry
from .types import INTS

KINDS = ("load_i8", "lookup_u4", "load_halves", "dot_i8", "dot_u4i8")


class ByteRuns:
    """Mixed into :class:`gen.Gen` (uses its ``r``, ``nprng``, ``fresh``, ``pick``, ``chance``,
    ``emit``, ``expr``, ``index_expr``, ``declare``, ``store_var``, ``arrays``)."""

    def byte_args(self, params: list, specs: list) -> None:
        """The kernel's byte arrays (one or two, int8 or uint8, 1-D or rows), a float32 table
        and an int32 lane-start array; registered in ``self.byte_arrs`` (drawn only when
        ``opts.bytes`` > 0, so other seeds keep their kernels)."""
        r = self.r
        self.byte_arrs: list = []
        self.byte_table = self.byte_start = None
        for _ in range(r.choice([1, 1, 2])):
            name = self.fresh("qb")
            t = self.pick(["int8", "uint8"])
            width = r.randint(34, 100)
            shape = (width,) if self.chance(0.6) else (r.randint(1, 3), width)
            data = self.nprng.integers(0, 256, size=math.prod(shape), dtype=np.uint8).view(t).reshape(shape)
            params.append(f"{name}: tk.Const" if self.chance(0.7) else name)
            specs.append(ArgSpec(name, "array", data, "in", True))
            self.byte_arrs.append(Arr(name, t, shape, "bytes"))
        self.byte_table = self.fresh("tb")
        n = r.randint(16, 20)
        params.append(f"{self.byte_table}: tk.Const")
        specs.append(ArgSpec(self.byte_table, "array", self.byte_floats(n), "in", True))
        self.byte_start = self.fresh("cs")
        n = r.randint(16, 24)
        params.append(self.byte_start)
        specs.append(ArgSpec(self.byte_start, "array",
                             self.nprng.integers(-2 ** 20, 2 ** 20, size=n, dtype=np.int32), "in", True))

    def bytes_here(self, ctx: dict) -> bool:
        """Whether a byte run may go here: the kernel's top level (its private arrays stay in
        scope for the statements after it), with byte arrays."""
        return bool(getattr(self, "byte_arrs", None)) and self.in_func is None and \
            (ctx.get("top") or ctx.get("bytes_ok")) and not ctx.get("depth")

    def byte_floats(self, n: int) -> np.ndarray:
        """float32 table entries: mostly small integers and halves, some specials."""
        vals = self.nprng.integers(-16, 16, size=n).astype(np.float32) * np.float32(0.5)
        for i in range(n):
            if self.chance(0.1):
                vals[i] = self.pick([np.inf, -np.inf, np.nan, -0.0, 1e-45, 3.4e38, 1.1754944e-38])
        return vals

    def run_at(self, a: Arr, need: int) -> str:
        """The index of a run of ``need`` elements of ``a`` that stays inside its row."""
        col = self.index_expr(str(a.shape[-1] - need + 1))
        if len(a.shape) == 1:
            return col
        return f"({self.index_expr(str(a.shape[0]))}, {col})"

    def byte_scale(self) -> str:
        t = self.pick(["float32", "pyfloat", "pyint"] + [x for x in self.types if x.startswith(("float", "bfloat"))])
        return self.expr(t, 2).code

    def byte_out(self, n: int, t: str = "float32", init: bool = False) -> str:
        """A fresh private array of ``n`` elements of ``t`` (initialised when ``init``: a float
        ``dot`` accumulates into it)."""
        name = self.fresh("pq")
        self.emit(f"{name} = tk.private(tk.{t}, ({n},))")
        if init:
            m = self.fresh("m")
            self.emit(f"for {m} in range({n}):")
            self.ind += 1
            self.emit(f"{name}[{m}] = tk.float32({self.expr(self.pick(['float32', 'pyint', 'pyfloat']), 2).code})")
            self.ind -= 1
        return name

    def x_dot4(self, t, d, uni):
        """``tk.dot4_i8(a, b, acc)`` (int32, wraps) of int32/uint32 words, or any integer cast
        to int32 (an explicit cast wraps)."""
        def word():
            src = self.pick(["int32", "uint32", "cast"])
            if src == "cast":
                return f"tk.int32({self.expr(self.pick([x for x in self.types if x in INTS]), d - 1, uni).code})"
            return self.expr(src, d - 1, uni).code
        args = [word() for _ in range(3)]
        self.features.add("bytes-dot4_i8")
        return Ex(f"tk.dot4_i8({', '.join(args)})", "int32", uni)

    def s_bytes(self, ctx):
        """One byte-run call, then a few of its results stored (and the array left readable)."""
        if not self.bytes_here(ctx):
            raise _Retry
        r = self.r
        kind = self.pick(KINDS)
        self.features.add("bytes-" + kind)
        a = self.pick(self.byte_arrs)
        width = a.shape[-1]
        kw, fl = "", True
        if kind in ("load_i8", "lookup_u4"):
            n = r.randint(1, min(24, width))
            nout = n if kind == "load_i8" else 2 * n
            out = self.byte_out(nout)
            if self.chance(0.6):
                kw = f", scale={self.byte_scale()}"
            table = f"{self.byte_table}, " if kind == "lookup_u4" else ""
            self.emit(f"tk.{kind}({out}, {table}{a.name}, {self.run_at(a, n)}, {n}{kw})")
        elif kind == "load_halves":
            stride = self.pick([2, 2, 3, 4, 18, 34])
            n = max(1, min(r.randint(1, 12), (width - 2) // stride + 1))
            nout = n
            out = self.byte_out(n)
            kw = "" if stride == 2 and self.chance(0.5) else f", stride={stride}"
            self.emit(f"tk.load_halves({out}, {a.name}, {self.run_at(a, stride * (n - 1) + 2)}, {n}{kw})")
        else:
            b = self.pick(self.byte_arrs)       # (both runs must fit: seed 47000086 took n from a alone)
            n = 32 if kind == "dot_u4i8" or min(width, b.shape[-1]) < 64 or self.chance(0.6) else 64
            nout = n // 4
            fl = self.chance(0.5)
            out = self.byte_out(nout, "float32" if fl else "int32", fl)
            ia = self.run_at(a, 16 if kind == "dot_u4i8" else n)
            ib = self.run_at(b, n)
            if fl:
                kw += f", scale={self.byte_scale()}"
            if kind == "dot_u4i8" and self.chance(0.7):
                kw += f", zero={r.randint(0, 15)}"
            if self.chance(0.3):
                kw += f", start=({self.byte_start}, {self.index_expr(f'(len({self.byte_start}) - {nout - 1})')})"
            self.emit(f"tk.{kind}({out}, {a.name}, {ia}, {b.name}, {ib}, {n}{kw})")
        t = "int32" if kind.startswith("dot") and not fl else "float32"
        self.arrays[out] = Arr(out, t, (nout,), "private", dim_code=(str(nout),))
        for k in r.sample(range(nout), min(nout, r.randint(1, 3))):
            v = self.declare(Var(self.fresh("v"), t, mutable=False))
            self.emit(f"{v.name} = {out}[{k}]")
            self.store_var(v.name, t)
