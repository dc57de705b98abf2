"""Every ```python block of README.md, docs/*.md and the SPEC runs as written, and prints
what the docs show where they show output.

The conventions (HTML comments, invisible on GitHub, on the lines just above a fence):

* The blocks of one document run in order in one namespace: a block continues the ones
  before it (the README's autodiff example uses its saxpy), as a reader runs them.
* ``<!-- test: skip (reason) -->`` above a ```python block: not run (a GPU, MPI ranks, an
  interactive prompt); the reason is required.
* ``<!-- test: needs pkg ... -->``: the block needs these importable modules; where one is
  missing, the document's blocks run up to that one and the test skips. Top-level imports
  of optional packages (``import jax``, ``tinykernels.torch``, ``tinykernels.distributed``
  -> mpi4py) count without a marker.
* ``<!-- test: setup`` ... ``-->``: hidden Python run before the block, in the same file, for
  a fragment that uses names the prose defines (``A``, ``my_kernel``).
* ``<!-- test: replace OLD => NEW -->``: the block runs with OLD replaced by NEW (a smaller
  count, so the suite stays fast; the call is the same).
* ``<!-- test: env NAME=VALUE ... -->``: environment variables while the block runs.
* ``<!-- test: output -->`` above the fenced block that follows a ```python block: every
  line of it must appear in what the Python block printed (``/home/me/NAME.py`` stands for
  the block's file).

The SPEC is read-only here, so its markers are kept in ``SPEC_MARKERS`` below.
"""
from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = Path(os.environ.get("TK_SPEC", ROOT.parent.parent / "shared" / "SPEC.md"))
if not SPEC.exists():
    SPEC = Path("/work/shared/SPEC.md")

# modules that a top-level import needs, for imports that are not the module itself
IMPLIED = {"tinykernels.jax": "jax", "tinykernels.torch": "torch", "tinykernels.distributed": "mpi4py"}
BUILTIN = {"numpy", "tinykernels", "math", "os", "sys", "re", "time", "functools", "itertools"}

MARKER = re.compile(r"<!--\s*test:\s*(\w+)(.*?)-->", re.S)


@dataclass
class Block:
    """One ```python block and what its markers say."""
    doc: str
    line: int                          # the fence's line in the document, 1-based
    code: str
    skip: str | None = None
    needs: set = field(default_factory=set)
    setup: str = ""
    env: dict = field(default_factory=dict)
    replace: list = field(default_factory=list)
    output: str | None = None

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _apply(block: Block, kind: str, arg: str) -> None:
    """Record one marker on ``block``."""
    if kind == "skip":
        reason = arg.strip().strip("()").strip()
        assert reason, f"{block.where}: `test: skip` needs a reason"
        block.skip = reason
    elif kind == "needs":
        block.needs |= set(arg.split())
    elif kind == "setup":
        block.setup += arg.strip("\n") + "\n"
    elif kind == "env":
        block.env.update(kv.split("=", 1) for kv in arg.split())
    elif kind == "replace":
        old, new = arg.strip().split(" => ")
        block.replace.append((old, new))
    else:
        raise AssertionError(f"{block.where}: unknown marker `test: {kind}`")


def parse_blocks(text: str, doc: str) -> list[Block]:
    """The document's ```python blocks with their markers (see the module docstring)."""
    lines = text.split("\n")
    blocks, pending, k = [], "", 0
    while k < len(lines):
        ln = lines[k]
        if not ln.startswith("```"):
            pending += ln + "\n"
            k += 1
            continue
        end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith("```"))
        body = "\n".join(lines[k + 1:end]) + "\n"
        markers = MARKER.findall(pending)
        if ln.strip() == "```python":
            b = Block(doc, k + 1, body)
            for kind, arg in markers:
                _apply(b, kind, arg)
            blocks.append(b)
        elif any(kind == "output" for kind, _ in markers):
            assert blocks, f"{doc}:{k + 1}: `test: output` with no Python block before it"
            blocks[-1].output = body
        pending, k = "", end + 1
    return blocks


def _imports_needed(code: str) -> set:
    """Optional packages the block imports at top level."""
    need = set()
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return need                     # fails when run, with its place
    for node in tree.body:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        for name in names:
            top = name.split(".")[0]
            implied = next((m for p, m in IMPLIED.items() if name == p or name.startswith(p + ".")), None)
            if implied:
                need.add(implied)
            elif top not in BUILTIN and top not in sys.stdlib_module_names:
                need.add(top)
    return need


# The SPEC's blocks, keyed by their first line: markers the read-only SPEC cannot carry.
SPEC_MARKERS = {
    "backend = tk.get_backend(A)": [("setup", "import numpy as np\n"
                                     "A, B = np.zeros(1000, np.float32), np.ones(1000, np.float32)")],
    "tk.autodiff(tk.Reverse, fn,": [("setup", "import numpy as np\n"
                                     "@tk.kernel\ndef scale(A, s):\n    i = tk.index()\n    A[i] = s * A[i] * A[i]\n"
                                     "def fn(A, backend, s):\n    scale(backend)(A, s, ndrange=A.shape)\n"
                                     "A, dA, s = np.ones(8), np.ones(8), 3.0")],
    "from tinykernels import llm": [("skip", "an API listing (`llm.add(a, b) / sub / mul / div`), not a program")],
    "import tinykernels.jax as tkjax": [("setup", "import jax.numpy as jnp\n"
                                         "@tk.kernel\ndef saxpy(y, x: tk.Const, a):\n    i = tk.index()\n"
                                         "    y[i] = a * x[i] + y[i]\n"
                                         "y0, x = jnp.zeros(100, jnp.float32), jnp.ones(100, jnp.float32)")],
    "from tinykernels.distributed import GlobalGrid": [("skip", "an API listing (`grid.dims, grid.coords, ...`), "
                                                               "not a program")],
}


def doc_blocks(path: Path) -> list[Block]:
    """``path``'s blocks; the SPEC's with ``SPEC_MARKERS`` applied."""
    blocks = parse_blocks(path.read_text(), path.name)
    if path == SPEC:
        for b in blocks:
            for kind, arg in SPEC_MARKERS.get(next((k for k in SPEC_MARKERS if b.code.startswith(k)), None), []):
                _apply(b, kind, arg)
    for b in blocks:
        b.needs |= _imports_needed(b.setup + b.code) if not b.skip else set()
    return blocks


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), SPEC]
DOCS = [d for d in DOCS if d.exists() and doc_blocks(d)]


def run_doc(path: Path, tmp_path: Path) -> tuple:
    """Run ``path``'s blocks in one namespace (each from its own file, kernels need one);
    check shown output. Stops before the first block that needs a module not installed (the
    later ones may use its names). Returns the namespace and the missing modules."""
    blocks = doc_blocks(path)
    ns: dict = {"__name__": "__main__"}
    for b in blocks:
        if b.skip:
            continue
        missing = sorted(m for m in b.needs if importlib.util.find_spec(m) is None)
        if missing:
            return ns, missing
        code = b.code
        for old, new in b.replace:
            assert old in code, f"{b.where}: `test: replace` text {old!r} is not in the block"
            code = code.replace(old, new)
        src = tmp_path / f"{path.stem.replace('-', '_')}_{b.line}.py"
        src.write_text(b.setup + code)
        out = io.StringIO()
        saved = {k: os.environ.get(k) for k in b.env}
        os.environ.update(b.env)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(src.read_text(), str(src), "exec"), ns)
        except Exception as e:
            raise AssertionError(f"{b.where}: the block raised {type(e).__name__}: {e}") from e
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        if b.output is not None:
            got = re.sub(re.escape(str(tmp_path)) + r"/\w+\.py", "/home/me/FILE.py", out.getvalue())
            want = re.sub(r"/home/me/\w+\.py", "/home/me/FILE.py", b.output)
            missing = [ln for ln in want.splitlines() if ln.strip() and ln.strip() not in got]
            assert not missing, f"{b.where}: printed\n{got}\nwithout the shown lines\n" + "\n".join(missing)
    return ns, []


def test_markers_parse():
    """The conventions above, on a small document."""
    doc = ("<!-- test: setup\nn = 2\n-->\n```python\nprint(n * 21)\n```\n\n<!-- test: output -->\n"
           "```text\n42\n```\n<!-- test: skip (needs a GPU) -->\n```python\nimport cupy\n```\n"
           "<!-- test: replace range(1000) => range(3) -->\n```python\nimport jax\nfor i in range(1000): pass\n```\n")
    a, b, c = parse_blocks(doc, "x.md")
    assert (a.setup, a.code, a.output, a.line) == ("n = 2\n", "print(n * 21)\n", "42\n", 4)
    assert b.skip == "needs a GPU" and not b.needs
    assert c.replace == [("range(1000)", "range(3)")] and _imports_needed(c.code) == {"jax"}
    with pytest.raises(AssertionError, match="needs a reason"):
        parse_blocks("<!-- test: skip -->\n```python\npass\n```\n", "y.md")


def _check_readme(ns):
    np.testing.assert_allclose(ns["dx"], 0.7)
    assert ns["o"].shape == (1, 4, 32, 64) and ns["grid"].local_shape == (66, 66, 66)


def _check_autodiff(ns):
    x = ns["x"]
    left, right = np.r_[0.0, x[:-1]], np.r_[x[1:], 0.0]        # d/dw of sum(w sin(x) (left + right))
    np.testing.assert_allclose(ns["dw"], np.sum(np.sin(x) * (left + right)), rtol=1e-12)


def _check_distributed(ns):
    assert ns["G"].shape == ns["grid"].global_shape


# Values the blocks compute that their own asserts do not check.
CHECKS = {
    "README.md": _check_readme,
    "autodiff.md": _check_autodiff,
    "distributed.md": _check_distributed,
    "jax.md": lambda ns: np.testing.assert_allclose(ns["dy"], 2.0 * np.ones(1000)),
    "torch.md": lambda ns: ns["lin"].weight.grad is not None or pytest.fail("no gradient reached lin"),
}


@pytest.mark.parametrize("path", DOCS, ids=[d.name for d in DOCS])
def test_doc_examples_run(path, tmp_path, monkeypatch):
    if path.name == "torch.md" and importlib.util.find_spec("torch"):
        import tinykernels.torch as tktorch
        if any(n in tktorch._LIBS for n in ("mylib::saxpy", "mylib::swiglu")):
            pytest.skip("torch.md's operators are already registered in this process")
    monkeypatch.chdir(tmp_path)                 # examples that write files write them here
    monkeypatch.delenv("DEV", raising=False)
    ns, missing = run_doc(path, tmp_path)
    try:
        if missing:
            pytest.skip(f"{path.name}: the blocks from the first that needs {', '.join(missing)} on were not run")
        CHECKS.get(path.name, lambda ns: None)(ns)
    finally:
        if "grid" in ns and hasattr(ns["grid"], "free"):
            ns["grid"].free()
