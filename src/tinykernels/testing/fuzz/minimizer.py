"""Minimising a disagreement: :func:`minimize` deletes statements, unwraps if/for/while blocks and
replaces expressions by their operands on the kernel module's Python AST while the same kind of
disagreement (``Mismatch.signature``) remains, checking each candidate in a subprocess where a
crash or a hang could take the caller down.
"""
from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
import tempfile
import time

from .case import Case
from .reproducer import case_from_namespace, write_reproducer
from .run import _backend, _is_compile_only, check_case

_PROTECTED_AUG = ("w", "wr")


def _is_counter(node) -> bool:
    """``wN += 1``: the increment that bounds a generated while loop (never removed)."""
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        n = node.target.id
        return n.rstrip("0123456789") in _PROTECTED_AUG and n[-1:].isdigit()
    return False


def _stmt_lists(tree):
    """Every statement list of the module below module level (function bodies and nested blocks),
    in a stable order, as (owner node, field name)."""
    out = []
    for node in ast.walk(tree):
        for fld in ("body", "orelse"):
            lst = getattr(node, fld, None)
            if isinstance(lst, list) and lst and isinstance(lst[0], ast.stmt) and not isinstance(node, ast.Module):
                out.append((node, fld))
    return out


def _variants_delete(tree):
    """Sources with one statement removed (module-level functions and globals too)."""
    n_module = len(tree.body)
    for k in range(n_module):
        node = tree.body[k]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.FunctionDef) and node is tree.body[-1]:
            continue                                       # the kernel itself
        yield ("module", k)
    lists = _stmt_lists(tree)
    for li_, (owner, fld) in enumerate(lists):
        for k in range(len(getattr(owner, fld))):
            yield ("stmt", li_, fld, k)


def _apply_delete(src, site):
    tree = ast.parse(src)
    if site[0] == "module":
        del tree.body[site[1]]
        return ast.unparse(tree)
    lists = _stmt_lists(tree)
    _, li_, fld, k = site
    if li_ >= len(lists):
        return None
    owner, f = lists[li_]
    lst = getattr(owner, f)
    if k >= len(lst):
        return None
    st = lst[k]
    if _is_counter(st) or (isinstance(st, ast.Assign) and ast.unparse(st).startswith("li = ")):
        return None
    del lst[k]
    if not lst:
        if f == "orelse":
            setattr(owner, f, [])
        else:
            lst.append(ast.Pass())
    return ast.unparse(tree)


def _apply_unwrap(src, site):
    """Replace the compound statement at ``site`` by its body (or its else branch)."""
    tree = ast.parse(src)
    lists = _stmt_lists(tree)
    _, li_, fld, k, which = site
    if li_ >= len(lists):
        return None
    owner, f = lists[li_]
    lst = getattr(owner, f)
    if k >= len(lst):
        return None
    st = lst[k]
    if not isinstance(st, (ast.If, ast.For, ast.While)):
        return None
    repl = st.body if which == "body" else st.orelse
    if not repl:
        return None
    if isinstance(st, ast.While):
        repl = [s for s in repl if not _is_counter(s)]
    lst[k:k + 1] = repl or [ast.Pass()]
    return ast.unparse(tree)


def _expr_sites(tree):
    """Expression nodes that may be replaced by one of their operands (not in loop headers and
    while conditions, whose simplification could make a loop unbounded)."""
    banned = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.While):
            banned.update(id(n) for n in ast.walk(node.test))
        elif isinstance(node, ast.For):
            banned.update(id(n) for n in ast.walk(node.iter))
    out = []
    for node in ast.walk(tree):
        if id(node) in banned:
            continue
        if isinstance(node, (ast.BinOp, ast.BoolOp, ast.IfExp, ast.UnaryOp, ast.Compare, ast.Call)):
            out.append(node)
    return out


def _children(node):
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Compare):
        return [node.left] + list(node.comparators)
    if isinstance(node, ast.Call):
        return [a for a in node.args if not isinstance(a, ast.Constant) or not isinstance(a.value, str)]
    return []


def _apply_expr(src, k, c):
    tree = ast.parse(src)
    sites = _expr_sites(tree)
    if k >= len(sites):
        return None
    node = sites[k]
    ch = _children(node)
    if c >= len(ch):
        return None
    repl = ch[c]
    for parent in ast.walk(tree):
        for fld, val in ast.iter_fields(parent):
            if val is node:
                setattr(parent, fld, repl)
                return ast.unparse(tree)
            if isinstance(val, list):
                for i, x in enumerate(val):
                    if x is node:
                        val[i] = repl
                        return ast.unparse(tree)
    return None


def _crash_text(stderr: str) -> str:
    """The line of a crashed run's stderr that names the failure (an assertion, a signal)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Assertion" in ln or "Error" in ln or "error" in ln or "fault" in ln:
            return re.sub(r"\d+", "N", ln.strip())[:200]
    return re.sub(r"\d+", "N", lines[-1].strip())[:200] if lines else ""


def _isolated_signatures(case: Case, backend, reference, timeout: float) -> list:
    """The mismatch signatures of ``case`` checked in a fresh Python process (a crash or a hang of
    the driver cannot take the caller down): [("crash", text)] / [("timeout", "")] when it dies."""
    import json
    import subprocess
    bname = backend if isinstance(backend, str) else getattr(backend, "dev", "CPU")
    with tempfile.TemporaryDirectory() as d:
        path = write_reproducer(case, os.path.join(d, "cand.py"), (), [bname], reference)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        code = ("import sys; from tinykernels.testing.fuzz import _print_signatures; "
                "_print_signatures(sys.argv[1], sys.argv[2], sys.argv[3])")
        try:
            r = subprocess.run([sys.executable, "-c", code, path, bname, reference], capture_output=True,
                               text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [("timeout", "")]
    if r.returncode != 0:
        return [("crash", _crash_text(r.stderr))]
    return [tuple(json.loads(ln[4:])) for ln in r.stdout.splitlines() if ln.startswith("SIG\t")]


def _print_signatures(path: str, backend: str, reference: str) -> None:
    import json
    ns = {"__name__": "tk_fuzz_candidate", "__file__": path}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    kname = next(n for n, v in ns.items() if type(v).__name__ == "Kernel")
    import warnings
    warnings.simplefilter("ignore")
    for m in check_case(case_from_namespace(ns, kname), [backend], reference):
        print("SIG\t" + json.dumps(list(m.signature())), flush=True)


def minimize(case: Case, backend="CPU", reference="INTERP", signature=None, budget_s: float = 60.0,
             log=None, isolate=None) -> Case:
    """A smaller case (statements deleted, blocks unwrapped, expressions replaced by operands) that
    still shows the same kind of disagreement (``Mismatch.signature``). ``isolate`` (default: for
    crashes, hangs and device backends) checks each candidate in a subprocess."""
    t0 = time.time()
    if signature is None:
        ms = check_case(case, [backend], reference)
        if not ms:
            return case
        signature = ms[0].signature()
    if signature[0] != "ref-error" and reference in ("INTERP", "interp"):
        # candidates must stay free of races and uninitialised reads: check mode rejects them
        reference = "INTERP:CHECK"
    if isolate is None:
        isolate = signature[0] in ("crash", "timeout") or (
            not _is_compile_only(backend) and not getattr(_backend(backend), "is_host", True))

    def interesting_isolated(src):
        """Crashes, hangs and device backends: check the candidate in a subprocess."""
        c = dataclasses.replace(case, source=src + "\n")
        return signature in _isolated_signatures(c, backend, reference, 60.0)

    def interesting(src):
        if src is None or time.time() - t0 > budget_s:
            return False
        if isolate:
            return interesting_isolated(src)
        c = dataclasses.replace(case, source=src + "\n")
        for _ in range(2):        # twice: a flaky disagreement (uninitialised memory) must not lead astray
            try:
                ms = check_case(c, [backend], reference)
            except Exception:  # noqa: BLE001
                return False
            if not any(m.signature() == signature for m in ms):
                return False
        return True

    src = case.source
    tries = 0
    changed = True
    while changed and time.time() - t0 < budget_s:
        changed = False
        # 1. delete statements
        tree = ast.parse(src)
        sites = list(_variants_delete(tree))
        i = 0
        while i < len(sites) and time.time() - t0 < budget_s:
            cand = _apply_delete(src, sites[i])
            tries += 1
            if cand is not None and cand != src and interesting(cand):
                src = cand
                changed = True
                sites = list(_variants_delete(ast.parse(src)))
                continue
            i += 1
        # 2. unwrap if/for/while
        tree = ast.parse(src)
        lists = _stmt_lists(tree)
        sites = [("stmt", li_, fld, k, w) for li_, (o, fld) in enumerate(lists)
                 for k in range(len(getattr(o, fld))) for w in ("body", "orelse")]
        for site in sites:
            if time.time() - t0 > budget_s:
                break
            cand = _apply_unwrap(src, site)
            if cand is not None and interesting(cand):
                src = cand
                changed = True
                break
        # 3. replace expressions by their operands
        k = 0
        while time.time() - t0 < budget_s:
            sites = _expr_sites(ast.parse(src))
            if k >= len(sites):
                break
            done = False
            for c in range(len(_children(sites[k]))):
                cand = _apply_expr(src, k, c)
                tries += 1
                if cand is not None and cand != src and interesting(cand):
                    src = cand
                    changed = done = True
                    break
            if not done:
                k += 1
    if log:
        log(f"minimised seed {case.seed} in {time.time() - t0:.1f}s ({tries} candidates)")
    return dataclasses.replace(case, source=src + "\n")
