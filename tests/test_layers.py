"""The package's layers import only downwards (docs/architecture.md, "Layers").

Every import statement of every module counts, at module level and inside functions (a
function-level import defers loading; it does not remove the dependency), read with ``ast``
so that nothing is imported to check it.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "src" / "tinykernels"

# Bottom to top. A module's layer is that of the longest prefix of its name listed here.
LAYER_OF = {
    "tinykernels.errors": "core", "tinykernels.dtypes": "core", "tinykernels.lang": "core",
    "tinykernels.random": "core", "tinykernels.tracebacks": "core",
    "tinykernels.globalreads": "core",
    "tinykernels.argcheck": "core",
    "tinykernels.ir": "ir",
    "tinykernels.passes": "passes",
    "tinykernels.frontend": "frontend",
    "tinykernels.codegen": "codegen",
    "tinykernels.runtime": "runtime",
    "tinykernels.kernel": "api", "tinykernels.array": "api", "tinykernels.backends": "api",
    "tinykernels.autodiff": "api", "tinykernels._autodiff_kernels": "api", "tinykernels.interop": "api",
    "tinykernels": "apps",     # the package itself, __main__, cli, demo, jax, torch, llm, distributed, testing
}

# What each layer may import (besides itself): the rule that keeps the layers one-directional.
# The compiler (ir, passes, frontend, codegen) never sees a runtime or the API; the runtimes
# build on the compiler but never import the API; the API reaches down to everything.
MAY_IMPORT = {
    "core": set(),
    "ir": {"core"},
    "passes": {"core", "ir"},
    "frontend": {"core", "ir", "passes"},
    "codegen": {"core", "ir", "passes"},
    "runtime": {"core", "ir", "passes", "frontend", "codegen"},
    "api": {"core", "ir", "passes", "frontend", "codegen", "runtime"},
    "apps": {"core", "ir", "passes", "frontend", "codegen", "runtime", "api"},
}

# (importer, imported) edges that break the rule on purpose, each with its reason. Keep it short.
ALLOWED = {
    # autodiff's own helper kernels are written like user kernels (``import tinykernels as tk``,
    # ``@tk.kernel``, ``tk.index()``): the frontend resolves ``tk.*`` through the package.
    # The module is imported on first use only, when the package is complete.
    ("tinykernels._autodiff_kernels", "tinykernels"): "kernels written in the public language",
}


def module_name(path: pathlib.Path, root: pathlib.Path = PKG) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        found = LAYER_OF.get(".".join(parts[:n]))
        if found is not None:
            return found
    raise KeyError(module)


def imported_modules(path: pathlib.Path, known: set, root: pathlib.Path = PKG) -> list:
    """(module, line) for every tinykernels module ``path`` imports, anywhere in it."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from pkg import sub``: the submodule when it is one, else the package
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            if t == "tinykernels" or t.startswith("tinykernels."):
                while t not in known and "." in t:
                    t = t.rpartition(".")[0]
                out.append((t, node.lineno))
    return out


def layer_violations(root: pathlib.Path = PKG) -> list:
    """'file:line: importer (layer) imports module (layer)' for each forbidden import."""
    files = sorted(root.rglob("*.py"))
    known = {module_name(f, root) for f in files}
    bad = []
    for f in files:
        me = module_name(f, root)
        for target, line in imported_modules(f, known, root):
            a, b = layer(me), layer(target)
            if a != b and b not in MAY_IMPORT[a] and (me, target) not in ALLOWED:
                bad.append(f"{f.relative_to(root.parent)}:{line}: {me} ({a}) imports {target} ({b})")
    return bad


def test_every_module_has_a_layer():
    for f in PKG.rglob("*.py"):
        layer(module_name(f))


def test_layers_import_only_downwards():
    bad = layer_violations()
    assert not bad, "imports against the layering (docs/architecture.md):\n" + "\n".join(bad)


def test_allow_list_has_no_stale_entries():
    files = sorted(PKG.rglob("*.py"))
    known = {module_name(f) for f in files}
    edges = {(module_name(f), t) for f in files for t, _ in imported_modules(f, known)}
    assert set(ALLOWED) <= edges, set(ALLOWED) - edges


@pytest.mark.parametrize("statement", ["from ..kernel import Func", "from ..backends import synchronize",
                                       "import tinykernels.runtime.cuda"])
def test_a_function_level_upward_import_is_caught(tmp_path, statement):
    """The check sees imports inside functions too (the frontend once imported kernel.py lazily)."""
    pkg = tmp_path / "tinykernels"
    for d in ("frontend", "runtime"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "kernel.py").write_text("")
    (pkg / "backends.py").write_text("")
    (pkg / "runtime" / "cuda.py").write_text("")
    (pkg / "frontend" / "lower.py").write_text(f"def f():\n    {statement}\n")
    bad = layer_violations(pkg)
    assert len(bad) == 1 and "tinykernels.frontend.lower (frontend) imports" in bad[0], bad


def import_cycles(root: pathlib.Path = PKG) -> list:
    """The groups of modules that import each other in a cycle (every import counts)."""
    files = sorted(root.rglob("*.py"))
    known = {module_name(f, root) for f in files}
    graph = {module_name(f, root): {t for t, _ in imported_modules(f, known, root)} - {module_name(f, root)}
             for f in files}
    reach = {m: set() for m in graph}      # transitive closure (the package has ~150 modules)
    for m in graph:
        todo = list(graph[m])
        while todo:
            n = todo.pop()
            if n not in reach[m]:
                reach[m].add(n)
                todo.extend(graph.get(n, ()))
    groups = {frozenset([m] + [n for n in reach[m] if m in reach[n]]) for m in graph if m in reach[m]}
    return sorted(sorted(g) for g in groups)


def test_no_import_cycles():
    """Within a layer too: no two modules import each other, directly or through others."""
    cycles = import_cycles()
    assert not cycles, cycles
