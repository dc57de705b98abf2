"""Standalone reproducer scripts: :func:`write_reproducer` writes a case (the kernel module, its
arguments encoded exactly, its launch) as a script that imports :func:`_arr`, :func:`_scalar`
and :func:`reproduce` from this package and exits 1 while the backends disagree with the
reference; :func:`case_from_namespace` turns such a script's namespace back into a Case.
"""
from __future__ import annotations

import math
import os
import textwrap

import numpy as np

from ... import dtypes as D
from .case import ArgSpec, Case
from .run import check_case
from .types import np_dtype


def _encode_array(a: np.ndarray) -> str:
    name = D.from_any(a.dtype).name
    return f"_arr({name!r}, {tuple(a.shape)!r}, {a.tobytes().hex()!r})"


def _encode_scalar(v) -> str:
    # NumPy scalars first: np.float64 is a float, and its repr (NumPy 2: 'np.float64(-inf)') is
    # no argument of float() (seed 97001365's reproducer raised ValueError); the bytes keep the type
    if isinstance(v, np.generic):
        return f"_scalar({np.dtype(type(v)).name!r}, {np.array(v).tobytes().hex()!r})"
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        return f"float.fromhex({v.hex()!r})" if math.isfinite(v) else f"float({repr(v)!r})"
    return repr(v)


def _arr(name, shape, hexdata):
    """Decode an array written by :func:`write_reproducer`."""
    return np.frombuffer(bytes.fromhex(hexdata), dtype=np_dtype(name)).reshape(shape).copy()


def _scalar(name, hexdata):
    return np.frombuffer(bytes.fromhex(hexdata), dtype=np.dtype(name))[0]


def case_args_code(case: Case) -> str:
    lines = ["ARGS = ["]
    for s in case.args:
        if s.kind == "array":
            val = _encode_array(np.asarray(s.value))
        elif s.kind == "scalar":
            val = _encode_scalar(s.value)
        else:
            val = repr(s.value)
        lines.append(f"    ({s.name!r}, {s.kind!r}, {val}, {s.role!r}, {s.const!r}, {s.tol!r}, {s.view!r}),")
    lines.append("]")
    return "\n".join(lines)


def write_reproducer(case: Case, path: str, mismatches=(), backends=("CPU",), reference="INTERP") -> str:
    """A standalone script: the kernel module, its arguments, and a main that runs it on the
    backends and the reference and exits 1 while they disagree."""
    doc = "\n".join(str(m) for m in mismatches) or "(no mismatch recorded)"
    text = (f'"""tinykernels fuzz reproducer: seed {case.seed}.\n\n{textwrap.indent(doc, "    ")}\n\n'
            f'Run it with tinykernels importable (exit status 1 while the backends disagree):\n'
            f'    PYTHONPATH=src python3 {os.path.basename(path)}\n"""\n')
    text += case.source.rstrip("\n") + "\n\n\n"
    text += "# --- arguments and launch (generated) ---------------------------------------------\n"
    text += "from tinykernels.testing.fuzz import _arr, _scalar, reproduce  # noqa: E402\n\n"
    text += case_args_code(case) + "\n"
    text += f"NDRANGE = {case.ndrange!r}\nWORKGROUPSIZE = {case.workgroupsize!r}\nSTATIC_WG = {case.static_wg!r}\n"
    if case.mag_kname:
        text += f"MAG_KERNEL = {case.mag_kname!r}\n"
    if getattr(case, "mode", ""):
        text += f"MODE = {case.mode!r}\n"       # an autodiff case: checked by gradcheck.py
    if "print" in case.features:
        text += "PRINTS = True\n"           # its printed lines are compared too
    text += f"SEED = {case.seed!r}\nBACKENDS = {list(backends)!r}\nREFERENCE = {reference!r}\n\n"
    text += f'if __name__ == "__main__":\n    raise SystemExit(reproduce(globals(), {case.kname!r}))\n'
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def case_from_namespace(ns: dict, kname: str) -> Case:
    """The Case of a reproducer module (its ARGS / NDRANGE / ... and its own kernel)."""
    args = [ArgSpec(n, k, v, role, const, list(tol), view) for n, k, v, role, const, tol, view in ns["ARGS"]]
    c = Case(ns.get("SEED", 0), "", kname, args, ns["NDRANGE"], ns["WORKGROUPSIZE"], ns["STATIC_WG"])
    c.kernel = ns[kname]
    c.mode = ns.get("MODE", "")
    if ns.get("PRINTS"):
        c.features.add("print")
    if ns.get("MAG_KERNEL"):
        c.mag_kname = ns["MAG_KERNEL"]
        c.mag_kernel = ns[c.mag_kname]
    return c


def reproduce(ns: dict, kname: str, backends=None, reference=None, verbose: bool = True) -> int:
    """Run a reproducer's case; print each disagreement; 1 if any, else 0."""
    c = case_from_namespace(ns, kname)
    ms = check_case(c, backends or ns.get("BACKENDS", ["CPU"]), reference or ns.get("REFERENCE", "INTERP"))
    for m in ms:
        if verbose:
            print(m)
    if verbose and not ms:
        print("all backends agree with the reference")
    return 1 if ms else 0
