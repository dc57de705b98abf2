"""The README's examples run as written and are correct; docs/debugging.md's check-mode report
of the unguarded group sum is what check mode really says."""
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


def test_every_readme_example_runs_as_written(tmp_path):
    """All the README's Python blocks, in order, as one script (each builds on the ones before):
    autodiff, llm, JAX/PyTorch and the distributed grid included, so none is a fragment with
    undefined names (f, W, y0, step and T2 were)."""
    import importlib.util
    missing = [m for m in ("jax", "torch", "mpi4py") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the README's examples need {', '.join(missing)}")
    blocks = _blocks(ROOT / "README.md")
    assert len(blocks) >= 6
    ns = _run_blocks(tmp_path, blocks, "readme_all")     # the blocks' own asserts check values
    np.testing.assert_allclose(ns["dx"], 0.7)
    assert ns["o"].shape == (1, 4, 32, 64) and ns["grid"].local_shape == (66, 66, 66)
    ns["grid"].free()


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


@pytest.mark.parametrize("doc,needs", [("autodiff.md", None), ("distributed.md", "mpi4py")])
def test_guide_examples_run_as_written(tmp_path, doc, needs):
    """docs/autodiff.md's and docs/distributed.md's examples as one script each (they used
    undefined x, y, dy, backend; T_global, steps, step, diffusion)."""
    import importlib.util
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"needs {needs}")
    ns = _run_blocks(tmp_path, _blocks(ROOT / "docs" / doc), doc.replace(".md", "_doc"))
    if doc == "autodiff.md":
        x = ns["x"]
        left, right = np.r_[0.0, x[:-1]], np.r_[x[1:], 0.0]        # d/dw of sum(w sin(x) (left + right))
        np.testing.assert_allclose(ns["dw"], np.sum(np.sin(x) * (left + right)), rtol=1e-12)
    else:
        assert ns["G"].shape == ns["grid"].global_shape
        ns["grid"].free()
