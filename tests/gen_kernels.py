"""Helpers of the table-driven tests (test_types, test_operator_grid): kernels from generated
source, and NumPy's reference results."""
import hashlib
import math
import os
import tempfile

import numpy as np

import tinykernels as tk


def make_kernel(gen_dir: str, name: str, params, body, **kw):
    """A kernel ``name(params)`` whose body is ``i = tk.index()`` then the lines ``body``, written
    to a content-addressed file under ``gen_dir`` (the frontend reads the source back, and the
    disk cache stays warm across runs)."""
    src = f"def {name}({', '.join(params)}):\n    i = tk.index()\n" + "".join(f"    {ln}\n" for ln in body)
    path = os.path.join(gen_dir, f"{name}_{hashlib.sha1(src.encode()).hexdigest()[:16]}.py")
    if not os.path.exists(path):
        os.makedirs(gen_dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=gen_dir, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(src)
        os.replace(tmp, path)
    ns = {"tk": tk, "math": math, "np": np}
    exec(compile(src, path, "exec"), ns)
    return tk.kernel(ns[name], **kw)


def np_eval(fn):
    """NumPy's result, or None when NumPy rejects the operation (TypeError / OverflowError / ValueError)."""
    with np.errstate(all="ignore"):
        try:
            return np.asarray(fn())
        except (TypeError, OverflowError, ValueError):
            return None
