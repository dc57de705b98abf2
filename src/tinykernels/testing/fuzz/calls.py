"""Calls and integer edges for the generator (``Options.calls``, off by default; fuzz17): what the
hazards (hazards.py) left out.

* *wrapper functions*: ``@tk.func``s that take the effect functions' arrays as parameters and
  call effect functions (hazards.py) in their own statements, inside ``x if c else y``,
  ``and``/``or`` and chained comparisons, so effects run from functions, not just from the kernel;
  the kernel calls the wrappers like any effect function (also in ``tk.uniform``);
* effect calls as the argument of ``tk.group_reduce``/``tk.group_scan`` (every item's call runs
  once) and as the condition of a uniform ``while`` loop (``tk.uniform(f(x))``, once per test);
* functions with default parameters (weak Python values), called with keyword arguments or without
  the defaulted ones; tuple-returning calls indexed in ``if`` conditions;
* uniform ``while`` loops with a barrier phase and, between, a per-item ``while`` with ``break`` and
  ``continue``;
* 2-D ``tk.private`` arrays of small integers (int8/uint8/int16/uint16), read and updated in place;
* expressions over int8/uint8/int16/uint16/float16/bool only (NEP 50 promotion among them);
* ``//`` and ``%`` by run-time divisors in [-2, 1] (zero, -1: docs/language.md's semantics) and
  ``<<``/``>>`` by run-time amounts up to twice the promoted width.

Drawn only when ``opts.calls`` > 0, so every other seed keeps its kernel.
"""
from __future__ import annotations

import numpy as np

from .case import Arr, Ex, Var, _Retry
from .types import INTS, is_int, np_dtype, promote

SMALL = ("int8", "uint8", "int16", "uint16")
SMALL_MIX = SMALL + ("float16", "bool")
DEFAULTS = {"pyint": ["0", "1", "3", "-2", "7"], "pyfloat": ["0.5", "-1.25", "2.0"], "lbool": ["True", "False"]}


class Calls:
    """Mixed into :class:`gen.Gen` (uses its ``r``, ``fresh``, ``pick``, ``chance``, ``emit``,
    ``expr``, ``declare``, ``store_var``, ``gen_func``, ``hazard_expr``, ``efuncs``)."""

    # --- functions ------------------------------------------------------------------------------

    def wrapper_funcs(self) -> None:
        """1-2 functions taking the accumulator and the effect functions' output arrays, whose
        statements call effect functions (``s_wcall``); added to ``efuncs`` for the kernel."""
        if not self.efuncs:
            return
        arrs: dict = {}
        for f in self.efuncs:
            for kind, name in f[1]:
                if kind == "effect" and name not in arrs:
                    arrs[name] = self.arrays[name]
        effect = [next(a for a in arrs.values() if a.role == "acc")]
        outs = [f_arr for f in self.efuncs for f_arr in self.effect_views(f)]
        seen = {effect[0].name}
        for o in outs:
            if o.name not in seen:
                seen.add(o.name)
                effect.append(o)
        for _ in range(self.r.randint(1, 2)):
            self.scopes = [dict(self.module_scope)]
            rets = [self.any_type()] if self.chance(0.7) else [self.any_type(), self.any_type()]
            self.wrapping = True
            try:
                fn = self.gen_func(effect=effect, rets=rets)
            finally:
                self.wrapping = False
            self.efuncs.append(fn)
            self.features.add("effect-wrapper")

    def effect_views(self, f: tuple) -> list:
        """The output-slot views (``Arr`` with its slot in ``tol``) an effect function stores into."""
        return list(self.efunc_views.get(f[0], ()))

    def s_wcall(self, ctx) -> None:
        """In a wrapper function: a local assigned an expression around effect calls."""
        e = self.hazard_expr(2)
        v = self.fresh("v")
        self.emit(f"{v} = {e.code}")
        self.declare(Var(v, e.ty))
        self.features.add("effect-in-func")

    def can_call(self, f: tuple) -> bool:
        """Whether every array parameter of ``f`` has an argument here."""
        return all(k != "array" or any(a.role == "in" and a.dtype == ty[0] and len(a.shape) == ty[1]
                                       for a in self.arrays.values()) for k, ty in f[1])

    def default_params(self, params: list, pnames: list) -> dict:
        """Defaults for some trailing scalar parameters (index -> literal code), made weak (a Python
        int, float or bool: the default's type) before the body is generated."""
        out = {}
        for k in range(len(params) - 1, -1, -1):
            kind, ty = params[k]
            if kind != "scalar" or not self.chance(0.6):
                break
            if ty not in DEFAULTS:
                ty = self.pick(list(DEFAULTS))
                params[k] = ("scalar", ty)
            out[k] = self.pick(DEFAULTS[ty])
        return out

    def call_code(self, name: str, params: list, d: int) -> str:
        """The arguments of a call of ``name``: positional, with ``opts.calls`` sometimes by keyword
        and without the defaulted ones."""
        if self.opts.calls <= 0:
            return f"{name}({', '.join(self.func_arg(p, d) for p in params)})"
        pn, dflt = self.func_pnames.get(name), self.func_defaults.get(name, {})
        parts, kw = [], False
        for k, p in enumerate(params):
            if k in dflt and self.chance(0.5):
                kw = True                    # a skipped parameter: the later ones go by keyword
                self.features.add("default-arg")
                continue
            a = self.func_arg(p, d)
            if pn is not None and (kw or self.chance(0.2)):
                kw = True
                parts.append(f"{pn[k]}={a}")
                self.features.add("keyword-arg")
            else:
                parts.append(a)
        return f"{name}({', '.join(parts)})"

    def s_tuplecond(self, ctx) -> None:
        """``if f(...)[k]:`` / ``elif not g(...)[k]:`` on tuple-returning calls, each branch
        assigning a local (stored after)."""
        fs = [f for f in self.callable_funcs() if self.can_call(f)] + \
             [f for f in self.efuncs if len(f[2]) > 1 and not isinstance(f[2][0], tuple) and self.can_call(f)]
        if not fs:
            raise _Retry

        def cond() -> Ex:
            name, params, rets, _ = self.pick(fs)
            k = self.r.randrange(len(rets))
            return Ex(f"{self.pick(['', 'not '])}{self.call_code(name, params, 1)}[{k}]", "bool")
        name, t = self.branch_assign(cond, lambda t: self.expr(t, 1), 0.5)
        if self.in_func is None:
            self.store_var(name, t)
        self.features.add("tuple-cond")

    # --- collectives and uniform loops ------------------------------------------------------------

    def collective_type(self, t: str) -> str:
        """Often the (integer or bool) return type of an effect function instead of ``t``."""
        ts = [f[2][0] for f in self.single_efuncs() if (is_int(f[2][0]) or f[2][0] in ("bool", "lbool"))
              and self.can_call(f)]
        return self.pick(ts) if ts and self.chance(0.6) else t

    def collective_arg(self, t: str, v: str) -> str:
        """An effect call of type ``t`` (an integer or bool) as a collective's argument, else ``v``."""
        if not (is_int(t) or t in ("bool", "lbool")) or not self.chance(0.8):
            return v
        fs = [f for f in self.single_efuncs() if f[2][0] == t and self.can_call(f)]
        if not fs:
            return v
        name, params, _, _ = self.pick(fs)
        self.features.add("collective-effect")
        return self.call_code(name, params, 1)

    def uniform_while(self, depth: int) -> None:
        """A uniform ``while`` (its condition maybe ``tk.uniform`` of an effect call), a per-item
        ``while`` with ``break``/``continue`` inside, then a barrier phase, uniform jumps around."""
        w = self.fresh("wr")
        self.emit(f"{w} = 0")
        b = self.small_bound(uni=True, hi=3)
        head = f"{w} < {b.code}"
        fs = [f for f in self.single_efuncs() if self.can_call(f)]
        if fs and self.chance(0.6):
            name, params, _, _ = self.pick(fs)
            head += f" and tk.uniform(bool({self.call_code(name, params, 1)}))"
            self.features.add("uniform-while-effect")
        self.emit(f"while {head}:")
        self.scopes.append({w: Var(w, "pyint", uni=True, mutable=False)})
        self.ind += 1
        self.emit(f"{w} += 1")
        saved, self.in_loop_phase = self.in_loop_phase, True
        self.uniform_jump()
        self.s_while({"loops": 1, "depth": 1})
        self.phase(depth + 1)
        self.uniform_jump()
        self.in_loop_phase = saved
        self.ind -= 1
        self.retire(self.scopes.pop())
        self.features.add("uniform-while-nested")

    # --- small integers, division, shifts ---------------------------------------------------------

    def calls_stmts(self, ctx) -> list:
        """The statement kinds this option adds (and their weights) at this point."""
        w = self.opts.calls
        opts = [("smallmix", w), ("intedge", w), ("tuplecond", w * 0.5)]
        if ctx.get("top"):                   # (as s_private: arrays are not scoped to blocks)
            opts.append(("private2", w * 0.5))
        if self.in_func is not None and self.wrapping:
            opts.append(("wcall", 4 * w))
        return opts

    def s_private2(self, ctx) -> None:
        """A 2-D private array of a small integer type, filled, updated in place, read later."""
        t = self.pick([x for x in SMALL if x in self.types])
        n, m = self.r.randint(1, 3), self.r.randint(1, 4)
        a = Arr(self.fresh("pv"), t, (n, m), "private", dim_code=(str(n), str(m)), readable=False)
        i, j = self.fresh("m"), self.fresh("m")
        self.emit(f"{a.name} = tk.private({self.dtype_spelling(t)}, ({n}, {m}))")
        self.emit(f"for {i} in range({n}):")
        self.emit(f"    for {j} in range({m}):")
        self.scopes.append({i: Var(i, "pyint", mutable=False), j: Var(j, "pyint", mutable=False)})
        self.ind += 2
        self.emit(f"{a.name}[{i}, {j}] = {self.castto(t, self.expr(self.pick(list(SMALL) + ['pyint']), 2))}")
        self.ind -= 2
        self.scopes.pop()
        a.readable = True
        self.arrays[a.name] = a
        idx = ", ".join(self.index_expr(c) for c in a.dim_code)
        op = self.pick(['+=', '-=', '*=', '^=', '//=', '>>='])
        rhs = self.expr(self.pick([x for x in SMALL if x in self.types]), 1)
        val = f"tk.{t}(int({rhs.code}) % 20)" if op == ">>=" else self.castto(t, rhs)   # (no negative shifts)
        self.emit(f"{a.name}[{idx}] {op} {val}")
        self.features.add("private-2d")

    def s_smallmix(self, ctx) -> None:
        """A local of int8/uint8/int16/uint16/float16/bool operands only (NEP 50 promotion)."""
        saved = self.types
        self.types = [t for t in saved if t in SMALL_MIX]
        try:
            t = self.pick(self.types + ["pyint", "lbool"])
            e = self.expr(t, 3)
        finally:
            self.types = saved
        v = self.fresh("v")
        self.emit(f"{v} = {e.code}")
        self.declare(Var(v, t))
        if self.in_func is None:
            self.store_var(v, t)
        self.features.add("small-mix")

    def runtime_int(self, t: str) -> str:
        """A run-time value of integer type ``t`` (a load when there is one; never a constant)."""
        arrs = [a for a in self.loadable(t) if a.role in ("in", "private")]
        if arrs and self.chance(0.7):
            return self.load(self.pick(arrs)).code
        return f"{self.castto(t, self.expr(t, 2))} + {self.castto(t, Ex(self.item_lin(), 'pyint'))}" \
            if t != "pyint" else f"({self.expr('pyint', 2).code} + {self.item_lin()})"

    def s_intedge(self, ctx) -> None:
        """``a // d``, ``a % d`` with a run-time ``d`` in [-2, 1] (wrapped for unsigned types), or
        ``a << s``, ``a >> s`` with a run-time ``s`` up to twice the promoted width."""
        ints = [x for x in self.types if x in INTS] + ["pyint"]
        ta, tb = self.pick(ints), self.pick(ints)
        if "pyint" in (ta, tb):           # (a Python int meets a typed integer only where it fits)
            ta = tb = "pyint"
        pt = promote(ta, tb)
        if not is_int(pt) or (pt != "pyint" and pt not in self.types):     # (uint32 with int32: int64)
            raise _Retry
        a = self.runtime_int(ta)
        k = f"({self.item_lin()} + {self.expr('pyint', 1).code})"
        conv = "int" if tb == "pyint" else f"tk.{tb}"
        if self.chance(0.5):
            op = self.pick(["//", "%"])
            d = f"{conv}({k} % 4 - 2)"
            self.features.add("div-edge")
        else:
            op = self.pick(["<<", ">>"])
            width = (32 if self.bits32 else 64) if pt == "pyint" else np.dtype(np_dtype(pt)).itemsize * 8
            hi = 2 * width + 4 if tb == "pyint" else min(2 * width + 4, int(np.iinfo(np_dtype(tb)).max) + 1)
            d = f"{conv}({k} % {hi})"
            self.features.add("shift-edge")
        v = self.fresh("v")
        self.emit(f"{v} = ({a}) {op} {d}")
        self.declare(Var(v, pt))
        if self.in_func is None:
            self.store_var(v, pt)
