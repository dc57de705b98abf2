"""Side-effect hazards for the generator (``Options.hazards``, off by default): the constructs the
fuzz15/bugs15/audit15a bugs came from (``uniform-side-effects``, ``ifexp-side-effects``,
``chain-side-effects``, Python ints >= 2**63 as arguments, nested tuple returns), weighted up.

* *effect functions*: ``@tk.func``s that take an integer accumulator array and ``tk.atomic_add``
  a constant to one of its elements (and ``tk.print`` with ``--print``), sometimes under an ``if``,
  sometimes returning a nested tuple ``(a, b), c``. The accumulator counts how often each function
  ran, so a call evaluated where Python would not (the branch of ``a if c else b`` not taken, the
  right operand of a short-circuited ``and``/``or``, a later comparator of a chain that already
  failed, a ``tk.uniform`` argument in every item rather than the evaluating one) is a difference
  the comparison sees. They are kept apart from ``Gen.funcs``, so ``while`` conditions (whose
  generation is another session's) never call them;
* *hazard statements*: a local assigned such an expression (and stored), a nested tuple
  destructured, and in grouped kernels ``tk.uniform`` of effect calls;
* *big ints*: Python int arguments next to the int64 bounds (run-time Python ints, which wrap)
  and in [2**63, 2**64) (weak uint64: docs/language.md), the latter only in comparisons and a few
  integer operations.

Drawn only when ``opts.hazards`` > 0, so every other seed keeps its kernel. Not in
``unsafe_indices`` kernels (a function has no validity guard) and not in the WebGPU profile's
64-bit values.
"""
from __future__ import annotations

from .case import ArgSpec, Arr, Ex, Var, _Retry
from .types import CMPS, FP8, INTS, STRONG, is_float, promote

NEAR_INT64 = [2**63 - 1, 2**63 - 2, -2**63, -2**63 + 1, 2**62 + 3, -2**62, 2**32 + 1, -2**31 - 1]
NEAR_UINT64 = [2**63, 2**63 + 1, 2**64 - 1, 2**64 - 2, 2**63 + 2**62, 2**64 - 2**32]
BIG_OPS = ["//", "%", ">>", "&", "|", "^", "+", "-", "*"]


class Hazards:
    """Mixed into :class:`gen.Gen` (uses its ``r``, ``fresh``, ``pick``, ``chance``, ``emit``,
    ``expr``, ``cond``, ``declare``, ``store_var``, ``gen_func``, ``func_arg``, ``arrays``)."""

    def hazard_args(self, params: list, specs: list, kscope: dict) -> None:
        """Python int scalars next to the int64 bounds (typed ``pyint``: run-time, they wrap) and,
        once in a while, one in [2**63, 2**64) (``self.big_args``; used by ``big_stmt`` only)."""
        self.big_args = []
        if self.bits32:
            return
        for _ in range(self.r.randint(1, 2)):
            name = self.fresh("s")
            params.append(name)
            specs.append(ArgSpec(name, "scalar", self.pick(NEAR_INT64)))
            kscope[name] = Var(name, "pyint", True, False)
        if self.chance(0.7):
            name = self.fresh("s")
            params.append(name)
            specs.append(ArgSpec(name, "scalar", self.pick(NEAR_UINT64)))
            self.big_args.append(name)
        self.features.add("big-int-arg")

    def hazard_funcs(self) -> None:
        """The accumulator (a kernel argument of role ``acc``, add only) and 1-3 effect functions."""
        t = self.pick([x for x in ("int32", "uint32", "int64", "uint64") if x in self.types])
        n = self.r.randint(1, 4)
        acc = Arr(self.fresh("ea"), t, (n,), "acc", dim_code=(str(n),), own="add")
        self.arrays[acc.name] = acc
        for _ in range(self.r.randint(1, 3)):
            effect = [acc]
            if self.chance(0.4):                 # and a store into a slot of the item's own row
                try:
                    out = self.per_item("out", lambda d: True)
                except _Retry:
                    out = None
                if out is not None:
                    out.tol.append(0)
                    effect.append(Arr(out.name, out.dtype, (), "out", tol=[len(out.tol) - 1]))
            self.scopes = [dict(self.module_scope)]
            rets = [self.any_type()] if self.chance(0.75) else [(self.any_type(), self.any_type()), self.any_type()]
            fn = self.gen_func(effect=effect, rets=rets)
            self.efuncs.append(fn)
            self.efunc_views[fn[0]] = effect[1:]

    def effect_stmts(self, names: list, arrs: list) -> None:
        """In an effect function: the atomic count (and a print, and a store of a value of the
        parameters into the item's slot: the last call's value stays), sometimes under a condition."""
        under = self.chance(0.3)
        if under:
            self.emit(f"if {self.cond(1).code}:")
            self.ind += 1
        self.emit(f"tk.atomic_add({names[0]}, {self.r.randrange(arrs[0].shape[0])}, {self.r.choice([1, 2, 3])})")
        if len(arrs) > 1:
            o = arrs[1]
            t = self.any_type()
            if is_float(t) and not is_float(o.dtype):          # (a float into an integer: C leaves it undefined)
                t = self.pick([x for x in self.types if x in INTS] + ["pyint", "lbool"])
            e = self.expr(t, 1)
            self.emit(f"{names[1]}[tk.index(), {o.tol[0]}] = {self.store_code(o.dtype, e)}")
            self.features.add("effect-store")
        if self.opts.prints > 0 and self.chance(0.5):
            self.s_print({})
        if under:
            self.ind -= 1
        self.features.add("effect-func")

    # --- expressions ----------------------------------------------------------------------------

    def single_efuncs(self) -> list:
        """The effect functions that return one value (not a nested tuple)."""
        return [f for f in self.efuncs if len(f[2]) == 1]

    def effect_call(self, d: int = 2, t: str | None = None) -> Ex:
        """A call of a single-value effect function (of type ``t`` when given)."""
        fs = [f for f in self.single_efuncs() if (t is None or f[2][0] == t) and self.can_call(f)]
        if not fs:
            raise _Retry
        name, params, rets, _ = self.pick(fs)
        return Ex(self.call_code(name, params, d), rets[0])

    def maybe_effect(self, t: str, d: int) -> Ex:
        """An effect call of type ``t`` if there is one (half the time), else an expression."""
        try:
            return self.effect_call(d, t) if self.chance(0.5) else self.expr(t, d)
        except _Retry:
            return self.expr(t, d)

    def effect_cond(self, d: int) -> Ex:
        """A condition that may be an effect call (its truth value)."""
        try:
            return self.effect_call(d) if self.chance(0.5) else self.cond(d)
        except _Retry:
            return self.cond(d)

    def comparable(self, a: str, b: str) -> bool:
        """Whether the generator may compare types ``a`` and ``b`` (as ``Gen.cmp_types``)."""
        if self.bits32 and promote(a, b) == "float64":
            return False
        fp8_int = (a in FP8 and b in ("int8", "uint8")) or (b in FP8 and a in ("int8", "uint8"))
        return not (fp8_int and "fp8-int-operand" in self.excl)

    def hazard_expr(self, d: int = 2) -> Ex:
        """An expression around an effect call whose short-circuiting or branch decides which
        calls run: the call alone, ``x if c else y``, a chained comparison, ``and``/``or``."""
        a = self.effect_call(d)
        k = self.r.random()
        if k < 0.1:
            return a
        if k < 0.2:                   # a call's arguments all run, whatever is chosen
            other = self.maybe_effect(a.ty, d)
            if self.chance(0.5) and a.ty not in ("lbool",):
                return Ex(f"tk.select({self.effect_cond(d).code}, {a.code}, {other.code})", a.ty)
            return Ex(f"{self.pick(['min', 'max'])}({a.code}, {other.code})", a.ty)
        if k < 0.45:
            other = self.maybe_effect(a.ty, d)
            x, y = (a, other) if self.chance(0.5) else (other, a)
            return Ex(f"({x.code} if {self.effect_cond(d).code} else {y.code})", a.ty)
        if k < 0.75:
            es = [a]
            for _ in range(self.r.randint(1, 3)):
                try:
                    e = self.effect_call(d) if self.chance(0.6) else None
                except _Retry:
                    e = None
                if e is None or not self.comparable(es[-1].ty, e.ty):
                    e = self.expr(es[-1].ty, d)
                es.append(e)
            if self.chance(0.5):
                es.reverse()
            code = es[0].code
            for e in es[1:]:
                code += f" {self.pick(CMPS)} {e.code}"
            return Ex(f"({code})", "bool" if any(e.ty in STRONG for e in es) or len(es) > 2 else "lbool")
        parts = [a] + [self.effect_cond(d) for _ in range(self.r.randint(1, 2))]
        self.r.shuffle(parts)
        code = parts[0].code
        for p in parts[1:]:
            code += f" {self.pick(['and', 'or'])} {p.code}"
        return Ex(f"({code})", "bool")

    # --- statements -----------------------------------------------------------------------------

    def hazard_here(self, ctx: dict) -> bool:
        """Whether a hazard statement may go here (the kernel, not a function or unsafe kernel)."""
        return self.in_func is None and not self.unsafe and bool(self.efuncs or self.big_args)

    def s_hazard(self, ctx: dict) -> None:
        k = self.r.random()
        if self.big_args and (k < 0.3 or not self.efuncs):
            return self.big_stmt()
        nested = [f for f in self.efuncs if isinstance(f[2][0], tuple)]
        if nested and k < 0.5:
            return self.nested_stmt(self.pick(nested))
        if k > 0.85:
            return self.hazard_if()
        e = self.hazard_expr(2)
        v = self.fresh("v")
        self.emit(f"{v} = {e.code}")
        self.declare(Var(v, e.ty))
        self.store_var(v, e.ty)
        self.features.add("hazard")

    def hazard_if(self) -> None:
        """``if``/``elif``/``else`` on hazard conditions (a later condition runs only when the
        earlier ones failed), each branch assigning one local, stored after."""
        name, t = self.branch_assign(lambda: self.hazard_expr(1), lambda t: self.maybe_effect(t, 1), 0.6)
        self.store_var(name, t)
        self.features.add("hazard-if")

    def nested_stmt(self, f: tuple) -> None:
        """``(a, b), c = f(...)`` or ``t = f(...)`` and its elements, stored."""
        name, params, rets, _ = f
        call = self.call_code(name, params, 2)
        (t0, t1), t2 = rets
        if self.chance(0.6):
            a, b, c = self.fresh("v"), self.fresh("v"), self.fresh("v")
            self.emit(f"({a}, {b}), {c} = {call}")
            names = [(a, t0), (b, t1), (c, t2)]
        else:
            tv = self.fresh("tu")
            self.emit(f"{tv} = {call}")
            names = [(f"{tv}[0][0]", t0), (f"{tv}[0][1]", t1), (f"{tv}[1]", t2)]
        for n, t in names:
            self.declare(Var(n, t, mutable=False))
            if self.chance(0.7):
                self.store_var(n, t)
        self.features.add("nested-tuple")

    def big_stmt(self) -> None:
        """A weak uint64 argument (in [2**63, 2**64)) compared with, or combined with, a value."""
        b = self.pick(self.big_args)
        if self.chance(0.5):
            t = self.pick([x for x in self.types if x in INTS or x in ("float32", "float64")] + ["pyint", "pyfloat"])
            e = self.expr(t, 2)
            x, y = (b, e.code) if self.chance(0.5) else (e.code, b)
            code, ty = f"({x} {self.pick(CMPS)} {y})", ("bool" if t in STRONG else "lbool")
        else:
            t = self.pick([x for x in self.types if x.startswith("uint")])
            e = self.expr(t, 2) if self.chance(0.5) else Ex(str(self.r.randint(1, 70)), "pyint")
            if e.ty in ("pyint", "uint64") and self.chance(0.3):   # a literal in [2**63, 2**64) is a weak
                # uint64 too (lang21); with a narrower type it is a CompileError, as in NumPy
                b = str(self.pick(NEAR_UINT64))
            x, y = (b, e.code) if self.chance(0.6) else (e.code, b)     # either side (lang21: `63 % s`)
            code, ty = f"tk.uint64({x} {self.pick(BIG_OPS)} {y})", "uint64"
        v = self.fresh("v")
        self.emit(f"{v} = {code}")
        self.declare(Var(v, ty))
        self.store_var(v, ty)
        self.features.add("big-int")
