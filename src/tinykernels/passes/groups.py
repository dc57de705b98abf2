"""Splitting a kernel at its barriers, for backends that run a group's work items in a loop.

The result keeps group-level statements (barriers, collectives, ``localmem``, uniform
assignments, and the uniform if/for/while that contain them) and wraps every maximal run
of other statements in an :class:`ItemLoop` that runs them for each work item. Locals live
across item loops are stored per work item; uniform locals are one value per group.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import nodes as N
from .uniformity import defs, uniform_vars


@dataclass
class ItemLoop(N.Stmt):
    """Run ``body`` once for every (unmasked) work item of the group."""
    body: list
    label: str
    in_loop: bool = False          # inside a group-level loop (runs more than once)


@dataclass
class GroupPlan:
    body: list                     # group-level statements with ItemLoops
    group_vars: set                # one value per group
    item_vars: set                 # stored per work item (arrays of the group size)
    loop_vars: dict = field(default_factory=dict)   # ItemLoop label -> locals declared inside it
    item_private: set = field(default_factory=set)  # private arrays stored per work item
    needs_done: bool = False       # an item-level return exists
    lanes: set = field(default_factory=set)      # ItemLoop labels rendered with work items as lanes
    remat: dict = field(default_factory=dict)    # local -> its one defining expression (item geometry only)
    unstored: set = field(default_factory=set)   # remat locals never read at group level: no storage


def _syncs(s) -> bool:
    return any(isinstance(x, (N.Barrier, N.Collective)) or
               (isinstance(x, N.AllocArray) and x.array.space == "local") for x in N.walk_stmts([s]))


def _jumps_out(s) -> bool:
    """A break/continue in ``s`` that leaves the loop enclosing ``s``."""
    if isinstance(s, (N.Break, N.Continue)):
        return True
    if isinstance(s, (N.For, N.While)):
        return False
    return any(_jumps_out(x) for x in list(getattr(s, "body", [])) + list(getattr(s, "orelse", [])))


def _exits_to(s, exits: frozenset) -> bool:
    """A ``return`` in ``s`` (a FuncExit) out of one of the inlined functions ``exits``."""
    return bool(exits) and any(isinstance(x, N.FuncExit) and x.label in exits for x in N.walk_stmts([s]))


def _sync_funcs(stmts) -> frozenset:
    """The labels of the inlined functions in ``stmts`` that hold a barrier or collective: they
    are split at group level, so an early return out of one jumps across item loops and must be
    taken by the whole group, at group level (like a break out of a group-level loop). Inside an
    item loop, ``goto`` to the function's end left the item loop after its first work item: the
    other items skipped what the return assigns (found by hand-written kernels in fuzz23, bug
    cpu-func-exit-in-item-loop)."""
    return frozenset(x.label for x in N.walk_stmts(stmts) if isinstance(x, N.FuncBlock) and _syncs(x))


def _group_level(s, gvars: set, in_loop: bool = False, exits: frozenset = frozenset()) -> bool:
    if isinstance(s, (N.Barrier, N.Collective)):
        return True
    if in_loop and _jumps_out(s):
        return True
    if _exits_to(s, exits):
        return True
    if isinstance(s, N.AllocArray):
        return s.array.space == "local"
    if isinstance(s, N.Assign):
        return s.var in gvars
    if isinstance(s, N.Philox):
        return False
    if isinstance(s, N.FuncBlock) and not _syncs(s):
        return False    # its early exits jump within one work item's code: keep it in the item loop
    if isinstance(s, (N.If, N.For, N.While, N.FuncBlock)):
        if _syncs(s):
            return True
        subs = list(s.body) + list(getattr(s, "orelse", []))
        inner = in_loop and not isinstance(s, (N.For, N.While))
        return any(_group_level(x, gvars, inner, exits) for x in subs)
    return False


def _group_assigned(stmts, gvars, out: set, in_loop: bool, exits: frozenset = frozenset()) -> None:
    """Collect locals assigned in an item-level position (they cannot be group values)."""
    for s in stmts:
        if not _group_level(s, gvars, in_loop, exits):
            for x in N.walk_stmts([s]):
                out.update(defs(x))
            continue
        if isinstance(s, (N.If, N.For, N.While, N.FuncBlock)):
            inner = in_loop or isinstance(s, (N.For, N.While))
            _group_assigned(s.body, gvars, out, inner, exits)
            _group_assigned(getattr(s, "orelse", []), gvars, out, inner, exits)


def _item_counters(stmts, gvars: set, types: dict, made: list, in_loop: bool = False,
                   exits: frozenset = frozenset()) -> list:
    """Group-level ``for`` loops whose variable is stored per work item (the name has item-level
    definitions elsewhere, e.g. an earlier loop reusing it) count with a hidden group counter
    and assign the variable in every work item at the top of the body. Otherwise the counter
    would be written once per group (for the group's first item) but read per item."""
    out = []
    for s in stmts:
        if not _group_level(s, gvars, in_loop, exits):
            out.append(s)
            continue
        if isinstance(s, N.If):
            s = N.If(s.loc, s.cond, _item_counters(s.body, gvars, types, made, in_loop, exits),
                     _item_counters(s.orelse, gvars, types, made, in_loop, exits))
        elif isinstance(s, N.While):
            s = N.While(s.loc, s.cond, _item_counters(s.body, gvars, types, made, True, exits))
        elif isinstance(s, N.FuncBlock):
            s = N.FuncBlock(s.loc, s.label, _item_counters(s.body, gvars, types, made, in_loop, exits))
        elif isinstance(s, N.For):
            body = _item_counters(s.body, gvars, types, made, True, exits)
            var = s.var
            if var not in gvars:
                var = f"_tk_ctr{len(made)}_{s.var}"
                made.append((var, types[s.var]))
                gvars.add(var)
                body = [N.Assign(s.loc, s.var, N.Var(types[s.var], s.loc, var))] + body
            s = N.For(s.loc, var, s.start, s.stop, s.step, body)
        out.append(s)
    return out


def own_jumps(body) -> bool:
    """A break/continue in ``body`` that belongs to the loop whose body it is."""
    for s in body:
        if isinstance(s, (N.Break, N.Continue)):
            return True
        if isinstance(s, (N.If, N.FuncBlock)) and (own_jumps(s.body) or own_jumps(getattr(s, "orelse", []))):
            return True
    return False


def lane_loop(s) -> bool:
    """A ``for`` that the lanes shape runs as a group-level loop around the item loops: no
    break/continue of its own, and a body that never assigns its variable."""
    return (isinstance(s, N.For) and not own_jumps(s.body)
            and not any(s.var in defs(x) for x in N.walk_stmts(s.body)))


def has_lane_loop(stmts) -> bool:
    """Whether rendering ``stmts`` in the lanes shape moves some loop outside the item loop."""
    for s in stmts:
        if lane_loop(s):
            return True
        if isinstance(s, N.If) and (has_lane_loop(s.body) or has_lane_loop(s.orelse)):
            return True
    return False


def lanes_eligible(body) -> bool:
    """The lanes shape (work items as the innermost loop of each piece, loops hoisted outside
    them) is chosen for an item loop that has a loop to hoist and nothing whose meaning
    depends on running one work item's statements back to back: no return (done flags),
    no print (output order), no inlined function with early exits (labels)."""
    for x in N.walk_stmts(body):
        if isinstance(x, (N.Return, N.Print, N.FuncBlock, N.FuncExit)):
            return False
    return has_lane_loop(body)


_PURE = (N.Const, N.Arg, N.Shape, N.Index, N.BinOp, N.Unary, N.Compare, N.Select, N.Cast)


def rematerializable(k: N.Kernel) -> dict:
    """Locals assigned exactly once from an expression of the work item's geometry, constants,
    arguments and shapes (``lid = tk.index(tk.Local, tk.Linear)``): item loops recompute them
    instead of reading a per-item array, so the compiler sees ``lid`` as the loop counter
    (contiguous, vectorizable accesses). Definite assignment guarantees every use follows
    the one assignment, and its value is the same wherever it is recomputed."""
    count: dict = {}
    value: dict = {}
    for s in N.walk_stmts(k.body):
        for v in defs(s):
            count[v] = count.get(v, 0) + 1
            if isinstance(s, N.Assign):
                value[v] = s.value
    return {v: e for v, e in value.items() if count[v] == 1
            and all(isinstance(x, _PURE) and not (isinstance(x, N.Call)) for x in N.walk_expr(e))}


def plan_groups(k: N.Kernel, uniform: set) -> GroupPlan:
    """Split ``k`` at its barriers. May add hidden loop counters to ``k.locals``."""
    gvars = set(uniform)
    exits = _sync_funcs(k.body)
    while True:
        item_assigned: set = set()
        _group_assigned(k.body, gvars, item_assigned, False, exits)
        if not (item_assigned & gvars):
            break
        # what is computed from the demoted locals, or assigned under control flow that tests
        # them, is per work item too (a loop made group-level by such an assignment would run
        # with a per-item condition in every item: inactive items never left it)
        gvars = uniform_vars(k.body, gvars - item_assigned)
    made: list = []
    kbody = _item_counters(k.body, gvars, k.locals, made, False, exits)
    for name, ty in made:
        k.locals.setdefault(name, ty)
    counter = [0]
    needs_done = [False]

    def split(stmts, in_loop):
        out, run = [], []

        def flush():
            if run:
                counter[0] += 1
                out.append(ItemLoop(run[0].loc, list(run), f"tk_item{counter[0]}", in_loop))
                run.clear()
        for s in stmts:
            if _group_level(s, gvars, in_loop, exits):
                flush()
                if isinstance(s, N.If):
                    s = N.If(s.loc, s.cond, split(s.body, in_loop), split(s.orelse, in_loop))
                elif isinstance(s, N.For):
                    s = N.For(s.loc, s.var, s.start, s.stop, s.step, split(s.body, True))
                elif isinstance(s, N.While):
                    s = N.While(s.loc, s.cond, split(s.body, True))
                elif isinstance(s, N.FuncBlock):
                    s = N.FuncBlock(s.loc, s.label, split(s.body, in_loop))
                out.append(s)
            else:
                if any(isinstance(x, N.Return) for x in N.walk_stmts([s])):
                    needs_done[0] = True
                run.append(s)
        flush()
        return out

    body = split(kbody, False)
    # which item loops reference each local; group-level expressions count as "many"
    refs: dict = {}
    private_refs: dict = {}

    def note_expr(e, where):
        for x in N.walk_expr(e):
            if isinstance(x, N.Var):
                refs.setdefault(x.name, set()).add(where)
            elif isinstance(x, (N.Load, N.Atomic)) and x.array.space == "private":
                private_refs.setdefault(x.array.name, set()).add(where)

    def note_stmt(s, where):
        for v in defs(s):
            refs.setdefault(v, set()).add(where)
        if isinstance(s, N.Collective):
            refs.setdefault(s.src, set()).add(where)
        if isinstance(s, (N.Store,)) and s.array.space == "private":
            private_refs.setdefault(s.array.name, set()).add(where)
        if isinstance(s, N.AllocArray) and s.array.space == "private":
            private_refs.setdefault(s.array.name, set()).add(where)
        for e in N.stmt_exprs(s):
            note_expr(e, where)

    loops = {}

    def scan(stmts):
        for s in stmts:
            if isinstance(s, ItemLoop):
                loops[s.label] = s
                for x in N.walk_stmts(s.body):
                    note_stmt(x, s.label)
            else:
                note_stmt(s, "<group>")
                scan(getattr(s, "body", []) if not isinstance(s, ItemLoop) else [])
                scan(getattr(s, "orelse", []))
    scan(body)

    item_vars, loop_vars = set(), {lbl: set() for lbl in loops}
    for v, where in refs.items():
        if v in gvars:
            continue
        if len(where) == 1 and "<group>" not in where and not loops[next(iter(where))].in_loop:
            loop_vars[next(iter(where))].add(v)
        else:
            item_vars.add(v)
    item_private = {a for a, where in private_refs.items()
                    if len(where) > 1 or "<group>" in where or any(loops[w].in_loop for w in where if w in loops)}
    # the lanes shape: every local of such an item loop is stored per work item (its pieces
    # are separate loops over the items), and so is every private array it allocates
    lanes = {lbl for lbl, lp in loops.items() if lanes_eligible(lp.body)}
    for lbl in lanes:
        item_vars |= loop_vars[lbl]
        loop_vars[lbl] = set()
        for x in N.walk_stmts(loops[lbl].body):
            if isinstance(x, N.AllocArray) and x.array.space == "private":
                item_private.add(x.array.name)
    remat = {v: e for v, e in rematerializable(k).items() if v not in gvars}
    # recomputed locals that group-level code never reads need no storage at all
    unstored = {v for v in remat if "<group>" not in refs.get(v, ())}
    item_vars -= unstored
    for lbl in loop_vars:
        loop_vars[lbl] -= unstored
    return GroupPlan(body, gvars & set(refs) | (gvars & set(k.locals)), item_vars, loop_vars,
                     item_private, needs_done[0], lanes, remat, unstored)
