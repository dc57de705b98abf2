"""The kernel scaffold shared by SIMT languages (OpenCL C, CUDA, HIP, Metal).

A work item is a hardware thread; the ndrange's last dimension maps to the hardware's
first (x) dimension so that ``A[i, j]`` with ``j`` fastest is coalesced. Items past the
ndrange are masked: in kernels without barriers they return at once; in kernels with
barriers they keep running the group-level statements (barriers, uniform control flow)
and skip the pieces between barriers (the same split as the CPU's, see
:mod:`tinykernels.passes.groups`, with ``if (tk_active)`` in place of item loops).

Subclasses give tables of strings: qualifiers, index functions, the barrier, atomics.
"""
from __future__ import annotations

from ..ir import nodes as N
from ..passes.groups import GroupPlan, ItemLoop
from .clike import CLikeRenderer, mangle

_SIGNED = {"int32": "uint32_t", "int64": "uint64_t"}


class GPURenderer(CLikeRenderer):
    kernel_qualifier = "__kernel void"
    global_space = "__global "
    local_space = "__local "
    barrier_stmt = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
    local_id = "get_local_id({d})"
    group_id = "get_group_id({d})"
    index_type = "long"

    def __init__(self, kernel: N.Kernel, plan: GroupPlan | None, ranges: int):
        super().__init__(kernel)
        self.plan = plan
        self.ranges = ranges
        self.item_label = None
        self.scratch: dict = {}        # collective scratch arrays: C type -> name

    # --- signed arithmetic wraps: done in unsigned (no -fwrapv on GPU compilers) ----------

    def e_BinOp(self, e):
        u = _SIGNED.get(e.ty.dtype.name)
        if u and e.op in ("+", "-", "*"):
            t = self.ctype(e.ty)
            return f"(({t})(({u})({self.expr(e.a)}) {e.op} ({u})({self.expr(e.b)})))"
        return super().e_BinOp(e)

    def e_Unary(self, e):
        u = _SIGNED.get(e.ty.dtype.name)
        if u and e.op == "-":
            return f"(({self.ctype(e.ty)})(({u})0 - ({u})({self.expr(e.a)})))"
        return super().e_Unary(e)

    # --- geometry -------------------------------------------------------------------------

    def hw(self, d: int) -> int:
        return self.k.ndim - 1 - d

    def geometry(self) -> None:
        k, wg = self.k, self.k.workgroup
        for d in range(k.ndim):
            self.w(f"const long tk_l{d} = (long){self.local_id.format(d=self.hw(d))};")
            self.w(f"const long tk_gr{d} = (long){self.group_id.format(d=self.hw(d))};")
            self.w(f"const long tk_p{d} = tk_gr{d} * {wg[d]} + tk_l{d};")
            self.w(f"const long tk_ng{d} = (tk_n{d} + {wg[d] - 1}) / {wg[d]};")
            if self.ranges == 2:
                self.w(f"const long tk_g{d} = tk_s{d} + tk_p{d} * tk_st{d};")
            elif self.ranges == 1:
                self.w(f"const long tk_g{d} = tk_s{d} + tk_p{d};")
            else:
                self.w(f"const long tk_g{d} = tk_p{d};")
        self.linear_ids("long")

    def builtin_geometry(self, tid: str, gid: str, ngroups: str, wide: str) -> None:
        """Geometry from the language's id vectors (CUDA/HIP ``threadIdx``/``blockIdx``/``gridDim``,
        Metal's attribute parameters): ``tk_idx`` ids, ``wide`` for the ndrange offsets."""
        wg = self.k.workgroup
        for d in range(self.k.ndim):
            ax = "xyz"[self.hw(d)]
            self.w(f"const tk_idx tk_l{d} = (tk_idx){tid}.{ax}, tk_gr{d} = (tk_idx){gid}.{ax};")
            self.w(f"const tk_idx tk_p{d} = tk_gr{d} * {wg[d]} + tk_l{d}, tk_ng{d} = (tk_idx){ngroups}.{ax};")
            if self.ranges == 2:
                self.w(f"const {wide} tk_g{d} = tk_s{d} + ({wide})tk_p{d} * tk_st{d};")
            elif self.ranges == 1:
                self.w(f"const {wide} tk_g{d} = tk_s{d} + ({wide})tk_p{d};")
            else:
                self.w(f"const tk_idx tk_g{d} = tk_p{d};")
        self.linear_ids("tk_idx")
        self.w("(void)tk_gl; (void)tk_ll; (void)tk_grl; (void)tk_in;")

    def linear_ids(self, ctype: str) -> None:
        """The linear global, local and group ids, and whether the item is inside the ndrange."""
        k, wg = self.k, self.k.workgroup
        lin, ll, grl = "tk_p0", "tk_l0", "tk_gr0"
        for d in range(1, k.ndim):
            lin = f"({lin}) * tk_n{d} + tk_p{d}"
            ll = f"({ll}) * {wg[d]} + tk_l{d}"
            grl = f"({grl}) * tk_ng{d} + tk_gr{d}"
        self.w(f"const {ctype} tk_gl = {lin}, tk_ll = {ll}, tk_grl = {grl};")
        inr = " && ".join(f"tk_p{d} < tk_n{d}" for d in range(k.ndim))
        self.w(f"const bool tk_in = {self.unsafe_in() if k.unsafe_indices else inr};")

    def unsafe_in(self) -> str:
        """``tk_in`` of an unsafe_indices kernel: every item of the padded grid runs."""
        return "true"

    # --- parameters -----------------------------------------------------------------------

    def params(self) -> list:
        """The kernel's parameter declarations (the runtime passes arguments in this order)."""
        out = []
        for d in range(self.k.ndim):
            out += [f"long tk_s{d}", f"long tk_n{d}", f"long tk_st{d}"]
        for p in self.k.params:
            if p[0] == "array":
                a = p[1]
                name = f"a_{mangle(a.name)}"
                const = "const " if a.const else ""
                restrict = " restrict" if a.const else ""
                out.append(f"{self.global_space}{const}{self.stype(a.dtype)} *{restrict} {name}")
                out += [f"long {name}_sh{d}" for d in range(a.ndim)]
                out += [f"long {name}_st{d}" for d in range(a.ndim)]
            elif p[0] == "scalar":
                out.append(f"{self.param_type(p[2])} {self.arg(p[1])}_in")
        if self.k.debug:
            out.append(f"{self.global_space}long *tk_err")
        return out

    def param_type(self, ty) -> str:
        return "uchar" if ty.dtype.kind == "b" else self.ctype(ty)

    def scalar_unpack(self) -> None:
        for p in self.k.params:
            if p[0] == "scalar":
                self.w(f"const {self.ctype(p[2])} {self.arg(p[1])} = ({self.ctype(p[2])}){self.arg(p[1])}_in;")

    # --- statements ---------------------------------------------------------------------------

    def s_Return(self, s):
        if self.plan is None or self.item_label is None:
            self.w("return;")
        else:
            self.w(f"tk_active = false; goto {self.item_label}_end;")

    def s_Barrier(self, s):
        self.w(self.barrier_stmt)

    def s_Assign(self, s):
        v = s.value
        if self.plan is not None and isinstance(v, N.Call) and v.fn == "uniform":
            # tk.uniform: the group's first (running) work item evaluates, local memory broadcasts
            t = self.ctype(self.k.locals[s.var])
            scr = self.scratch.setdefault(t, f"tk_scr{len(self.scratch)}")
            if self.plan.needs_done:       # after a return: the first item still running
                wg = _prod(self.k.workgroup)
                self.w("tk_act[tk_ll] = tk_active;")
                self.w(self.barrier_stmt)
                self.w(f"{{ int tk_f = 0; while (tk_f < {wg} && !tk_act[tk_f]) ++tk_f;")
                self.w(f"  if (tk_ll == tk_f) {scr}[0] = {self.expr(v.args[0])}; }}")
            else:
                self.w(f"if (tk_ll == 0) {scr}[0] = {self.expr(v.args[0])};")
            self.w(self.barrier_stmt)
            self.w(f"{self.var(s.var)} = {scr}[0];")
            self.w(self.barrier_stmt)
            return
        super().s_Assign(s)

    def s_AllocArray(self, s):
        pass  # local and private arrays are declared at kernel scope (OpenCL requires it for local)

    def s_ItemLoop(self, s: ItemLoop):
        self.w("if (tk_active) {")
        saved = self.item_label
        self.item_label = s.label
        self.block(s.body)
        self.item_label = saved
        self.w(f"}} {s.label}_end: ;")

    def s_Collective(self, s: N.Collective):
        t = self.ctype(s.ty)
        scr = self.scratch.setdefault(t, f"tk_scr{len(self.scratch)}")
        wg = _prod(self.k.workgroup)
        ident, comb = self.collective_parts(s)
        step = {"reduce": "acc = " + comb + ";", "scan": f"acc = {comb}; {scr}[k] = acc;",
                "exscan": f"{scr}[k] = acc; acc = {comb};"}[s.kind]
        self.w(f"{scr}[tk_ll] = {self.var(s.src)}; tk_act[tk_ll] = tk_active;")
        self.w(self.barrier_stmt)
        self.w(f"if (tk_ll == 0) {{ {t} acc = ({t}){ident};")
        self.w(f"    for (int k = 0; k < {wg}; ++k) {{ if (!tk_act[k]) continue; {t} x = {scr}[k]; {step} }}")
        self.w(f"    {scr}[{wg}] = acc; }}")
        self.w(self.barrier_stmt)
        self.w(f"{self.var(s.dst)} = {scr}[{wg if s.kind == 'reduce' else 'tk_ll'}];")
        self.w(self.barrier_stmt)

    # --- whole kernel ---------------------------------------------------------------------------

    def body(self) -> list:
        """The kernel function's lines (after the prelude)."""
        k = self.k
        self.lines = []
        self.depth = 0
        attrs = self.workgroup_attribute()
        self.w(f"{self.kernel_qualifier}{attrs} tk_kernel({', '.join(self.params())}) {{")
        self.depth = 1
        self.geometry()
        self.scalar_unpack()
        for s in N.walk_stmts(k.body):
            if isinstance(s, N.AllocArray):
                a = s.array
                space = self.local_space if a.space == "local" else ""
                self.w(f"{space}{self.stype(a.dtype)} {self.array_ptr(a)}[{_prod(a.shape)}];")
        scratch_at = len(self.lines)
        init = self.local_init()
        for v in sorted(k.locals):
            self.w(f"{self.ctype(k.locals[v])} {self.var(v)}{init};")
        self.last_line = None
        if self.plan is None:
            self.w("if (!tk_in) return;")
            self.stmts(k.body)
        else:
            self.w("bool tk_active = tk_in;")
            self.stmts(self.plan.body)
        self.depth = 0
        self.w("}")
        wg = _prod(k.workgroup)
        decls = [f"    {self.local_space}{t} {name}[{wg + 1}];" for t, name in self.scratch.items()]
        if self.scratch:
            decls.append(f"    {self.local_space}bool tk_act[{wg}];")
        self.lines[scratch_at:scratch_at] = decls
        return self.lines

    def workgroup_attribute(self) -> str:
        return ""

    def local_init(self) -> str:
        """What follows each kernel-scope local's declaration (an initializer, or nothing)."""
        return ""


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p
