"""docs/jax.md and docs/torch.md: their examples run as written (their asserts check values)."""
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_doc(tmp_path, name: str) -> dict:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / name).read_text(), re.S)
    script = tmp_path / name.replace(".md", "_doc.py")       # kernels need a real file for their source
    script.write_text("\n".join(blocks))
    return runpy.run_path(str(script))


def test_jax_doc_runs(tmp_path):
    jax = pytest.importorskip("jax")
    if not hasattr(jax, "ffi"):
        pytest.skip("jax.ffi needs jax >= 0.4.31")
    import numpy as np
    ns = _run_doc(tmp_path, "jax.md")
    np.testing.assert_allclose(ns["dy"], 2.0 * np.ones(1000))


def test_torch_doc_runs(tmp_path):
    pytest.importorskip("torch")
    import tinykernels.torch as tktorch
    for name in ("mylib::saxpy", "mylib::swiglu"):        # a name is registered once per process
        if name in tktorch._LIBS:
            pytest.skip(f"{name} is already registered in this process")
    ns = _run_doc(tmp_path, "torch.md")
    assert ns["lin"].weight.grad is not None
