"""Loop, call and wraparound edges for the generator (``Options.edges``, off by default; fuzz18):
constructs the general grammar (gen.py) never produced.

* *trip arguments*: kernel scalars (a Python int or an int16/int32/int64/uint8/uint32 NumPy
  scalar) that are mostly 0, 1 or a small negative, used directly as loop bounds: ``range(n)``,
  ``range(k, n)``, ``range(n, k)``, ``range(k, n, -1)``, ``range(n - 1)`` (for a uint8 ``n`` of 0
  that wraps to 255 iterations) and ``while w < n``; a local updated in the body is stored after
  the loop, so a zero-trip loop must leave its value from before the loop. Sometimes the loop
  variable is an earlier integer local's name of another type (FIXED_BUGS ``for-var-retyped``). (gen.py's loop bounds
  were always ``expr % k`` or literals: an argument of 0 straight in ``range`` never appeared.)
* *private arrays through nested functions*: a ``@tk.func`` that writes a ``tk.private`` array
  passed to it and calls a second one that reads it, the reader also called on an input array of
  the same dtype (one function specialised for a private and a global array). gen.py's
  functions take input arrays only.
* *small-int wraparound with weak scalars*: int8/uint8/int16/uint16 values combined with Python
  ints near the type's bounds (NEP 50: the result keeps the small type and wraps), chained and in
  augmented assignments.

Drawn only when ``opts.edges`` > 0, so every other seed keeps its kernel.
"""
from __future__ import annotations

import numpy as np

from .case import ArgSpec, Arr, Ex, Var, _Retry
from .types import INTS, int_range, np_dtype

TRIP_TYPES = ("pyint", "pyint", "int32", "int16", "int64", "uint8", "uint32")
TRIP_VALUES = (0, 0, 0, 1, 2, 3, -1, -2)
SMALL_INTS = ("int8", "uint8", "int16", "uint16")
PFUNC_TYPES = INTS + ("float16", "float32", "float64")


class Edges:
    """Mixed into :class:`gen.Gen` (uses its ``r``, ``fresh``, ``pick``, ``chance``, ``emit``,
    ``expr``, ``declare``, ``store_var``, ``castto``, ``runtime_int``, ``block``, ``stmt``)."""

    # --- arguments and functions (made before the kernel body) ------------------------------------

    def edge_args(self, params: list, specs: list, kscope: dict) -> None:
        """1-2 trip-count scalars (``self.trips``), mostly 0 or a small negative."""
        self.trips = []
        for _ in range(self.r.randint(1, 2)):
            ty = self.pick([t for t in TRIP_TYPES if t == "pyint" or t in self.types])
            vals = [v for v in TRIP_VALUES if v >= 0 or not ty.startswith("uint")]
            v = self.pick(vals)
            name = self.fresh("n")
            params.append(name)
            specs.append(ArgSpec(name, "scalar", v if ty == "pyint" else np.dtype(np_dtype(ty)).type(v)))
            var = Var(name, ty, True, False)
            kscope[name] = var
            self.trips.append(var)
        self.features.add("trip-arg")

    def edge_funcs(self) -> None:
        """A reader ``fr(P, q)`` and a writer ``fw(P, q, s)`` that updates ``P`` and calls ``fr``
        (``self.pfuncs``: (writer, reader, dtype)); ``P`` is a private array at the call."""
        t = self.pick([x for x in PFUNC_TYPES if x in self.types])
        fr, fw = self.fresh("fr"), self.fresh("fw")
        conv = f"tk.{t}"
        reader = (f"@tk.func\ndef {fr}(P, q):\n    k = q % len(P)\n"
                  f"    return P[k] + P[(k + 1) % len(P)]\n")
        writer = (f"@tk.func\ndef {fw}(P, q, s):\n    k = s % len(P)\n"
                  f"    P[k] = {conv}(q) + P[(k + 1) % len(P)]\n"
                  f"    v = {fr}(P, q + s)\n"
                  f"    P[(k + 2) % len(P)] = v\n"
                  f"    return v\n")
        self.edge_fns += [(fr, [], [t], reader), (fw, [], [t], writer)]   # (called by s_pcall only)
        self.pfuncs = (fw, fr, t)
        self.features.add("private-func")

    # --- statements ---------------------------------------------------------------------------------

    def edges_stmts(self, ctx) -> list:
        """The statement kinds this option adds (and their weights) at this point."""
        if self.in_func is not None:
            return []
        w = self.opts.edges
        opts = [("wrap", w)]
        if self.trips:
            opts.append(("trip", 2 * w))
        if ctx.get("top") and self.pfuncs:
            opts.append(("pcall", w))
        return opts

    def trip_header(self, n: Var) -> tuple:
        """(``for`` header code or None for a ``while``, the loop variable's type)."""
        t = n.ty
        c = (lambda k: str(k)) if t == "pyint" else (lambda k: f"tk.{t}({k})")
        forms = ["n", "kn", "nk", "down", "while"]
        if not t.startswith("uint") or (t == "uint8" and self.chance(0.3)):
            forms.append("minus")
        f = self.pick(forms)
        if f == "n":
            return f"range({n.name})", t
        if f == "kn":
            return f"range({c(self.r.randint(0, 2))}, {n.name})", t
        if f == "nk":
            return f"range({n.name}, {c(self.r.randint(0, 3))})", t
        if f == "down" and not t.startswith("uint"):
            return f"range({c(self.r.randint(0, 3))}, {n.name}, {c(-1)})", t
        if f == "minus":
            self.features.add("trip-wrap" if t.startswith("uint") else "trip-minus")
            return f"range({n.name} - 1)", t
        return None, "pyint"

    def reused_counter(self, n: Var, hdr: str) -> str | None:
        """Sometimes, for ``range(n)`` / ``range(k, n)`` of a Python int ``n``, the name of an
        earlier per-item integer local of another type (its type stays the compiler's type of the
        name, so the loop must still run Python's trip count: FIXED_BUGS ``for-var-retyped``).
        The body does not read it: the interpreter types the name by its last value."""
        if n.ty != "pyint" or not (hdr == f"range({n.name})" or hdr.endswith(f", {n.name})")) \
                or hdr.count(",") > 1 or not self.chance(0.4):
            return None
        live = {v.name for v in self.visible()}
        cands = sorted(k for k, v in self.retired.items() if k.isidentifier() and k not in live and not v.uni
                       and (v.ty in INTS or v.ty == "pyint"))
        if not cands:
            return None
        self.features.add("trip-reused-name")
        return self.pick(cands)

    def s_trip(self, ctx) -> None:
        """A local, a loop whose trip count is an argument (mostly 0) updating it, the local stored."""
        if not self.for_allowed():
            raise _Retry
        n = self.pick(self.trips)
        t = self.any_type()
        a = self.fresh("ta")
        self.emit(f"{a} = {self.expr(t, 1).code}")
        self.declare(Var(a, t))
        hdr, vt = self.trip_header(n)
        sub = dict(ctx, loops=ctx.get("loops", 0) + 1, in_loop=True, depth=ctx.get("depth", 0) + 1, top=False)
        if hdr is None:
            w = self.fresh("w")
            self.emit(f"{w} = 0")
            self.declare(Var(w, "pyint", mutable=False))
            self.emit(f"while {w} < {n.name}:")
            pre = [f"{w} += 1"]
            declare = ()
        else:
            reused = self.reused_counter(n, hdr)
            j = reused or self.fresh("j")
            self.emit(f"for {j} in {hdr}:")
            pre = []
            declare = () if reused else (Var(j, vt, mutable=False),)

        def body() -> None:
            for line in pre:
                self.emit(line)
            self.emit(f"{a} = {self.expr(t, 2).code}")
            for _ in range(self.r.randint(0, 2)):
                if self.stmts_left > 0:
                    self.stmt(sub)
        self.for_depth += 1
        try:
            self.block(0, sub, declare=declare, body=body)
        finally:
            self.for_depth -= 1
        self.store_var(a, t)
        self.features.add("trip-loop")

    def s_pcall(self, ctx) -> None:
        """A private array filled, passed to the writer function, then readable by the kernel; the
        reader also called on an input array of the same dtype when there is one."""
        fw, fr, t = self.pfuncs
        a = self.new_private(t, self.r.randint(1, 5))
        v = self.fresh("v")
        self.emit(f"{v} = {fw}({a.name}, {self.expr('pyint', 1).code}, {self.expr('pyint', 1).code})")
        self.declare(Var(v, t))
        self.store_var(v, t)
        ins = [x for x in self.arrays.values() if x.role == "in" and x.dtype == t and len(x.shape) == 1]
        if ins:
            u = self.fresh("v")
            self.emit(f"{u} = {fr}({self.pick(ins).name}, {self.expr('pyint', 1).code})")
            self.declare(Var(u, t))
            self.store_var(u, t)
        k = self.fresh("v")                  # the private array after the call, read by the kernel
        self.emit(f"{k} = {a.name}[{self.index_expr(a.dim_code[0])}]")
        self.declare(Var(k, t))
        self.store_var(k, t)
        self.features.add("private-func-call")

    def s_wrap(self, ctx) -> None:
        """A small integer combined with Python ints near its bounds (NEP 50: the result keeps the
        small type and wraps), maybe chained, maybe updated again by an augmented assignment."""
        ts = [x for x in SMALL_INTS if x in self.types]
        if not ts:
            raise _Retry
        t = self.pick(ts)
        lo, hi = int_range(t)

        def k() -> str:
            v = self.pick([hi, hi - 1, lo, lo + 1, hi // 2 + 1, 2, 3] + ([-1] if lo < 0 else []))
            return f"({v})" if v < 0 else str(v)
        ops = ["+", "-", "*"]
        code = f"({self.runtime_int(t)}) {self.pick(ops)} {k()}"
        if self.chance(0.5):
            code = f"{k()} {self.pick(ops)} ({code})"
        if self.chance(0.4):
            code = f"({code}) {self.pick(ops)} {k()}"
        v = self.fresh("v")
        self.emit(f"{v} = {code}")
        self.declare(Var(v, t))
        if self.chance(0.5):
            self.emit(f"{v} {self.pick(ops)}= {k()}")
        self.store_var(v, t)
        self.features.add("small-wrap")
