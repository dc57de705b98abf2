"""The README's group sum is correct (also in check mode, partial last group included);
docs/debugging.md's check-mode report of the unguarded group sum is what check mode really
says. That every documented example runs: tests/test_docs_examples.py."""
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

import tinykernels as tk

ROOT = Path(__file__).resolve().parents[1]


def _blocks(path: Path) -> list:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def _run_blocks(tmp_path, blocks, name) -> dict:
    """The blocks as one script (kernels need a real file for their source), run; its globals."""
    script = tmp_path / f"{name}.py"
    script.write_text("\n".join(blocks))
    return runpy.run_path(str(script))


def test_readme_saxpy_and_group_sum_run_as_written(tmp_path):
    blocks = _blocks(ROOT / "README.md")
    first = next(k for k, b in enumerate(blocks) if "def saxpy" in b)
    gs = next(k for k, b in enumerate(blocks) if "def group_sum" in b)
    ns = _run_blocks(tmp_path, [blocks[first], blocks[gs]], "readme")    # its own assert checks the sum
    x, out = ns["x"], ns["out"]
    assert x.size % 256 != 0 and out.shape == (-(-x.size // 256),)
    want = np.add.reduceat(x.astype(np.float64), np.arange(0, x.size, 256))
    np.testing.assert_allclose(out, want, rtol=1e-5)
    # the same kernel is clean in check mode, partial last group included
    small = np.random.default_rng(0).random(1000).astype(np.float32)
    o = np.zeros(4, np.float32)
    ns["group_sum"](tk.Interpreter(check=True), 256)(o, small, 256, ndrange=small.size)
    np.testing.assert_allclose(o, np.add.reduceat(small.astype(np.float64), [0, 256, 512, 768]), rtol=1e-5)


def test_debugging_doc_shows_the_real_check_mode_report_of_the_unguarded_group_sum(tmp_path):
    doc = (ROOT / "docs" / "debugging.md").read_text()
    block = next(b for b in _blocks(ROOT / "docs" / "debugging.md") if "def group_sum" in b)
    ns = _run_blocks(tmp_path, ["import numpy as np\nimport tinykernels as tk\n", block], "group_sum")
    x = np.ones(1000, np.float32)
    out = np.zeros(4, np.float32)
    with pytest.raises(Exception) as info:
        ns["group_sum"](tk.Interpreter(check=True), 256)(out, x, 256, ndrange=x.size)
    assert type(info.value).__name__ == "UninitializedReadError"
    msg = str(info.value).replace(str(tmp_path / "group_sum.py"), "/home/me/group_sum.py")
    assert f"UninitializedReadError: {msg}" in doc
