"""Running and checking a case: :func:`load_kernel` writes a generated module to a
content-addressed file and loads its kernel, :func:`run_case` launches it on one backend,
:func:`nvrtc_compile_case`, :func:`hipclang_compile_case` and :func:`metal_stub_compile_case`
are the compile-only ``NVRTC``, ``HIPCLANG`` and ``METAL-STUB`` targets, and :func:`check_case` runs the
reference and every backend and compares their outputs (:func:`compare_arrays`: bit for bit, or
within an ulp tolerance where marked) into a list of :class:`Mismatch`.
"""
from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager, nullcontext

import numpy as np

from ... import dtypes as D
from .basics import Mismatch, _backend, _err_text, load_kernel  # noqa: F401  (re-exported)
from .case import Case
from .fastmath import FM_TAG, fm_tolerance
from .types import NARROW_X


def _is_nvrtc(spec) -> bool:
    return isinstance(spec, str) and spec.upper().startswith("NVRTC")


def _is_hipclang(spec) -> bool:
    return isinstance(spec, str) and spec.upper().startswith("HIPCLANG")


def _is_metal_stub(spec) -> bool:
    return isinstance(spec, str) and spec.upper() == "METAL-STUB"


def is_compile_only(spec) -> bool:
    """Whether ``spec`` names a compile-only target (NVRTC, HIPCLANG, METAL-STUB): no values to compare."""
    return _is_nvrtc(spec) or _is_hipclang(spec) or _is_metal_stub(spec)


def compile_only_case(case: Case, spec: str) -> None:
    """Run the compile-only target ``spec`` on ``case``."""
    if _is_metal_stub(spec):
        metal_stub_compile_case(case, spec)       # "refused" (what Metal lacks, by design) is no finding
        return None
    return nvrtc_compile_case(case, spec) if _is_nvrtc(spec) else hipclang_compile_case(case, spec)


def _hip_archs(spec: str) -> list:
    from ...runtime.hipclang import ARCHS
    return [a for a in spec.split(":", 1)[1].split("+") if a] if ":" in spec else list(ARCHS)


def _hip_source(case: Case, arch: str) -> str:
    """``case``'s kernel rendered as HIP C++ for ``arch`` (its wavefront size)."""
    from ...runtime.rocm import ROCmTarget
    k = getattr(case, "kernel", None) or load_kernel(case.source, case.kname)
    args, _ = make_args(case, None)
    t = ROCmTarget(arch)
    inst = k(t, case.static_wg) if case.static_wg is not None else k(t)
    return inst.source(*args, ndrange=case.ndrange, workgroupsize=case.workgroupsize)


def hipclang_compile_case(case: Case, spec: str = "HIPCLANG") -> None:
    """The compile-only target ``HIPCLANG`` / ``HIPCLANG:gfx90a+gfx1100``: render ``case`` as HIP
    C++ for each AMD architecture (its wavefront size) and compile it device-only with the
    system's clang (:mod:`tinykernels.runtime.hipclang`; gfx90a and gfx1100 by default). Needs no
    GPU; the values are checked only where an AMD GPU runs the ``ROCm`` backend."""
    from ...runtime import hipclang
    for arch in _hip_archs(spec):
        hipclang.compile_hip_clang(_hip_source(case, arch), arch, case.kname)
    return None


def hipclang_compile_batch(cases, spec: str = "HIPCLANG") -> list:
    """:func:`hipclang_compile_case` on many cases at once, with one clang run per architecture
    for all of them (:func:`~tinykernels.runtime.hipclang.compile_hip_clang_batch`; a rejected
    batch is bisected down to the kernels clang rejects alone). Per case, in order: None, or
    the exception :func:`hipclang_compile_case` raises for it (the first of: rendering for the
    first architecture, compiling for it, rendering for the next, ...)."""
    from ...runtime import hipclang
    out: list = [None] * len(cases)
    for arch in _hip_archs(spec):
        todo, srcs = [], []
        for i, case in enumerate(cases):
            if out[i] is None:
                try:
                    srcs.append(_hip_source(case, arch))
                    todo.append(i)
                except Exception as e:  # noqa: BLE001 - reported for this case, as check_case would
                    out[i] = e
        errs = hipclang.compile_hip_clang_batch(srcs, arch, [cases[i].kname for i in todo])
        for i, e in zip(todo, errs):
            out[i] = e
    return out


def compile_only_batch(cases, spec) -> list | None:
    """The outcomes of the compile-only target ``spec`` on ``cases`` (None or the exception, per
    case) where the target checks many kernels faster together (``HIPCLANG``); else None."""
    if _is_hipclang(spec):
        return hipclang_compile_batch(cases, spec)
    return None


def _narrow_f64(a):
    """float64 -> float32: what a caller passes on a backend without float64 (Metal)."""
    with np.errstate(over="ignore"):
        if isinstance(a, np.ndarray) and a.dtype == np.float64:
            return a.astype(np.float32)
        if isinstance(a, np.float64):
            return np.float32(a)
    return a


def metal_stub_compile_case(case: Case, spec: str = "METAL-STUB") -> str | None:
    """The compile-only target ``METAL-STUB``: render ``case`` as Metal Shading Language (float64
    arguments narrowed to float32, as a Metal caller would pass them) and check it with
    ``clang++ -fsyntax-only`` against the project's stub ``metal_stdlib``
    (:mod:`tinykernels.testing.metal_check`). A kernel that uses what Metal lacks (float64 in
    the kernel itself, 64-bit atomics) is refused with a CompileError by design: that
    is no finding, and the function returns ``"refused"``; else None. No values are checked."""
    from ...errors import CompileError
    from ...runtime.metal import MetalTarget
    from ..metal_check import check_msl
    args, _ = make_args(case, None)
    args = [_narrow_f64(a) for a in args]
    t = MetalTarget()
    out = None
    for source in (case.source, re.sub(r"\bfloat64\b", "float32", case.source)):
        k = load_kernel(source, case.kname) if out else getattr(case, "kernel", None) or load_kernel(source, case.kname)
        inst = k(t, case.static_wg) if case.static_wg is not None else k(t)
        try:
            with np.errstate(all="ignore"):
                src = inst.source(*args, ndrange=case.ndrange, workgroupsize=case.workgroupsize)
            break
        except CompileError as e:
            if "Metal has no" not in str(e) and "not available on Metal" not in str(e):
                raise
            if out:
                return "refused"
            out = "twin"
    check_msl(src, case.kname)
    return out


def nvrtc_compile_case(case: Case, spec: str = "NVRTC") -> None:
    """The compile-only target ``NVRTC`` / ``NVRTC:sm_80+sm_90``: render ``case`` as CUDA C++ and
    compile it with NVRTC for those architectures (sm_90 by default). Needs no GPU, so CI and
    machines without one still check the CUDA code generator on every generated kernel; the
    values are checked only where a GPU runs the ``CUDA`` backend."""
    from ...runtime.cuda import CUDATarget, compile_cuda
    archs = [a for a in spec.split(":", 1)[1].split("+") if a] if ":" in spec else ["sm_90"]
    k = getattr(case, "kernel", None) or load_kernel(case.source, case.kname)
    args, _ = make_args(case, None)
    t = CUDATarget()
    inst = k(t, case.static_wg) if case.static_wg is not None else k(t)
    src = inst.source(*args, ndrange=case.ndrange, workgroupsize=case.workgroupsize)
    for arch in archs:
        compile_cuda(src, arch, case.kname, cache=False)
    return None


def _constexpr_value(v):
    if isinstance(v, str) and v in D.BY_NAME:
        return D.PUBLIC[v]
    return v


def make_args(case: Case, backend) -> tuple:
    """Fresh arguments for one launch: (launch args, {name: host array or device array})."""
    import tinykernels as tk
    args, arrays = [], {}
    for s in case.args:
        if s.kind == "array":
            a = np.array(s.value, copy=True)
            if s.view:
                a = a[..., ::s.view]
            if not getattr(backend, "is_host", True):
                a = tk.asarray(np.ascontiguousarray(a), backend=backend)
            arrays[s.name] = a
            args.append(a)
        elif s.kind == "constexpr":
            args.append(_constexpr_value(s.value))
        else:
            args.append(s.value)
    return args, arrays


PRINTED = "<printed>"        # run_case's key of the lines a case with tk.print printed


@contextmanager
def captured_stdout(sink: list):
    """Append to ``sink`` what the block writes to standard output: Python's ``sys.stdout`` (the
    interpreter's ``tk.print``) and file descriptor 1 (a compiled kernel's ``printf``)."""
    import ctypes
    import io
    import sys
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved, old, buf = os.dup(1), sys.stdout, io.StringIO()
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 1)
        sys.stdout = buf
        try:
            yield
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            sys.stdout = old
            f.seek(0)
            sink.append(buf.getvalue() + f.read().decode(errors="replace"))


def printed_lines(text: str) -> list:
    """The printed lines in sorted order (the groups of a compiled launch run concurrently), a
    NaN's sign dropped (C prints ``-nan``; NaNs are equal whatever their sign and payload)."""
    return sorted(re.sub(r"-nan\b", "nan", ln) for ln in text.splitlines())


def run_case(case: Case, backend, kernel=None) -> dict:
    """Launch ``case`` on ``backend`` (an object or a DEV string); the output arrays (host copies),
    and under :data:`PRINTED` the sorted printed lines of a case that prints."""
    import tinykernels as tk
    b = _backend(backend)
    k = kernel if kernel is not None else getattr(case, "kernel", None) or load_kernel(case.source, case.kname)
    args, arrays = make_args(case, b)
    inst = k(b, case.static_wg) if case.static_wg is not None else k(b)
    printed: list = []
    with np.errstate(all="ignore"), (captured_stdout(printed) if "print" in case.features else nullcontext()):
        ev = inst(*args, ndrange=case.ndrange, workgroupsize=case.workgroupsize)
        if ev is not None:
            ev.wait()
        tk.synchronize(b)
    out = {PRINTED: printed_lines(printed[0])} if printed else {}
    check_gaps(case, arrays)
    for s in case.args:
        if s.kind == "array" and s.role in ("out", "io", "own", "acc"):
            a = arrays[s.name]
            out[s.name] = a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.ascontiguousarray(a)
    return out


def check_gaps(case: Case, arrays: dict) -> None:
    """Raise when a launch wrote between the elements of a strided (``view``) output on the host:
    the elements the view skips must keep their initial bytes."""
    for s in case.args:
        a = arrays.get(s.name)
        if s.kind != "array" or not s.view or s.role == "in" or not isinstance(a, np.ndarray) or a.base is None:
            continue
        base = a.base if a.base.shape == np.shape(s.value) else None
        if base is None:
            continue
        gaps = np.ones(base.shape, bool)
        gaps[..., ::s.view] = False
        if base[gaps].tobytes() != np.asarray(s.value)[gaps].tobytes():
            raise AssertionError(f"the launch wrote between the elements of the strided output '{s.name}' "
                                 f"(a [..., ::{s.view}] view)")


def _ordered(a: np.ndarray) -> np.ndarray:
    """Float bits mapped to integers that are ordered like the values (+0 and -0 both to 0)."""
    nb = a.dtype.itemsize * 8
    u = a.view({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[nb]).astype(np.uint64)
    sign = (u >> np.uint64(nb - 1)) & np.uint64(1)
    mag = (u & np.uint64((1 << (nb - 1)) - 1)).astype(object)
    return np.where(sign.astype(bool), -mag, mag)


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a.astype(np.float64))


def compare_arrays(name: str, got: np.ndarray, want: np.ndarray, tol: list, mag: np.ndarray | None = None) -> list:
    """[(index, got, want)] of the elements that differ (``tol``: allowed ulps per last-axis slot,
    or ``("fm", k)`` for a fastmath slot, checked with :func:`.fastmath.fm_tolerance` against
    the magnitudes ``mag``)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return [((), f"{got.dtype}{got.shape}", f"{want.dtype}{want.shape}")]
    if got.dtype.kind in "biu" or got.dtype == np.bool_:
        bad = got.view(np.uint8).reshape(got.shape + (-1,)) != want.view(np.uint8).reshape(want.shape + (-1,))
        bad = bad.any(axis=-1)
    else:
        gb = got.view(np.uint8).reshape(got.shape + (-1,))
        wb = want.view(np.uint8).reshape(want.shape + (-1,))
        same_bits = (gb == wb).all(axis=-1)
        nan_both = _isnan(got) & _isnan(want)
        bad = ~(same_bits | nan_both)
        if bad.any() and any(tol) and got.ndim == 2:
            for j, tj in enumerate(tol[:got.shape[-1]]):
                if not tj or not bad[:, j].any():
                    continue
                g, w = got[:, j], want[:, j]
                if isinstance(tj, (tuple, list)) and tj[0] == FM_TAG:
                    if mag is not None:          # no magnitudes: compared bit for bit
                        bad[:, j] &= ~fm_tolerance(g, w, mag[:, j], tj[1])
                    continue
                if isinstance(tj, (tuple, list)):
                    tj, cdt = tj
                    g, w = g.astype(cdt), w.astype(cdt)
                dist = np.abs(_ordered(g) - _ordered(w))
                either_nan = _isnan(g) | _isnan(w)
                bad[:, j] &= either_nan | (dist > tj)
    idx = np.argwhere(bad)
    out = []
    for i in idx[:5]:
        i = tuple(int(x) for x in i)
        out.append((i, _fmt(got[i]), _fmt(want[i])))
    return out


def compare_printed(got: list, want: list) -> list:
    """[(line number, got, want)] of the first printed lines that differ (both sorted)."""
    if got == want:
        return []
    n = max(len(got), len(want))
    diff = [i for i in range(n) if i >= len(got) or i >= len(want) or got[i] != want[i]]
    return [((i,), got[i] if i < len(got) else "<none>", want[i] if i < len(want) else "<none>") for i in diff[:5]]


def _fmt(v) -> str:
    if isinstance(v, (np.floating,)) or (hasattr(v, "dtype") and v.dtype.kind == "V"):
        return repr(float(v))
    if getattr(v, "dtype", None) is not None and v.dtype.name in NARROW_X:
        return repr(float(v))
    return repr(v.item() if hasattr(v, "item") else v)


def _check_errors():
    from ...runtime.interp import KernelCheckError
    return KernelCheckError


def _ulps(t) -> int:
    """The ulp count of a slot tolerance (a fastmath slot's bound is relative: reported as 0)."""
    if isinstance(t, (tuple, list)):
        return 0 if t[0] == FM_TAG else t[0]
    return t


def reference_magnitudes(case: Case, reference) -> dict:
    """Fastmath cases: the outputs of the case's magnitude kernel on the reference (the sums of
    absolute values of the terms, see :mod:`.fastmath`); ``{}`` for other cases."""
    if not getattr(case, "mag_kname", ""):
        return {}
    ns_kernel = getattr(case, "mag_kernel", None) or load_kernel(case.source, case.mag_kname)
    return run_case(case, reference, ns_kernel)


#: backends whose float32 atomic add/sub flush subnormal operands and results to zero (PTX
#: ``atom.add.f32``; docs/cuda.md): a value mismatch there is no finding when the backend agrees
#: bit for bit with the reference run under that model (:func:`ftz_f32_atomics`)
FTZ_ATOMIC_BACKENDS = ("CUDA",)


def flushes_f32_atomics(bname: str) -> bool:
    return bname.split(":", 1)[0].upper() in FTZ_ATOMIC_BACKENDS


@contextmanager
def ftz_f32_atomics():
    """The interpreter's float32 atomic add/sub flush subnormals inside the block (the model of
    :data:`FTZ_ATOMIC_BACKENDS`)."""
    from ...runtime.interp import memory
    saved, memory.FTZ_F32_ATOMICS = memory.FTZ_F32_ATOMICS, True
    try:
        yield
    finally:
        memory.FTZ_F32_ATOMICS = saved


def check_case(case: Case, backends=("CPU",), reference="INTERP", compiled=None) -> list:
    """Run ``case`` on the reference and every backend; the list of Mismatch (empty: all agree).
    ``compiled``: {compile-only target: None or exception}, outcomes already computed for this
    case (by :func:`compile_only_batch`), used instead of compiling it again. An autodiff case
    (``case.mode == "grad"``) is checked by :func:`.gradcheck.check_grad_case` instead, a narrow
    one (``"grad-narrow"``) by :func:`.gradcheck.check_grad_narrow_case`."""
    if getattr(case, "mode", "") == "grad":
        from .gradcheck import check_grad_case      # a lazy import: gradcheck imports this module
        return check_grad_case(case, backends, reference)
    if getattr(case, "mode", "") == "grad-narrow":
        from .gradcheck import check_grad_narrow_case
        return check_grad_narrow_case(case, backends, reference)
    out = []
    want_ftz = None                 # the reference under the flushing-atomics model, when needed
    try:
        want = run_case(case, reference)
        mags = reference_magnitudes(case, reference)
        ref_err = None
    except Exception as e:  # noqa: BLE001 - every failure is a finding
        want, mags, ref_err = None, {}, e
    for b in backends:
        bname = b if isinstance(b, str) else getattr(b, "name", repr(b))
        if ref_err is not None and isinstance(ref_err, (IndexError, _check_errors())):
            # the kernel itself is broken (out of bounds, a race): running it compiled is undefined
            out.append(Mismatch(case.seed, bname, "ref-error", detail=_err_text(ref_err)))
            continue
        try:
            if compiled is not None and bname in compiled:
                got = None
                if compiled[bname] is not None:
                    raise compiled[bname]
            else:
                got = compile_only_case(case, bname) if is_compile_only(bname) else run_case(case, b)
            err = None
        except Exception as e:  # noqa: BLE001
            got, err = None, e
        if ref_err is not None:
            out.append(Mismatch(case.seed, bname, "ref-error", detail=_err_text(ref_err) +
                                (f" (and {bname}: {_err_text(err)})" if err else "")))
            continue
        if err is not None:
            out.append(Mismatch(case.seed, bname, "error", detail=_err_text(err)))
            continue
        if got is None:                  # a compile-only target
            continue
        found = compare_outputs(case, got, want, mags, bname)
        if found and flushes_f32_atomics(bname) and _is_interp(reference):
            if want_ftz is None:
                try:
                    with ftz_f32_atomics():
                        want_ftz = run_case(case, reference)
                except Exception:  # noqa: BLE001 - then the plain reference's mismatches stand
                    want_ftz = {}
            if want_ftz and not compare_outputs(case, got, want_ftz, mags, bname):
                found = []             # only the flushes of float32 atomic add/sub differ
        out += found
    return out


def _is_interp(reference) -> bool:
    return (reference if isinstance(reference, str) else getattr(reference, "name", "")).upper().startswith("INTERP")


def compare_outputs(case: Case, got: dict, want: dict, mags: dict, bname: str) -> list:
    """The value Mismatches of one backend's outputs ``got`` against the reference's ``want``."""
    out = []
    tols = {s.name: s.tol for s in case.args if s.kind == "array"}
    for name in want:
        if name == PRINTED:
            where = compare_printed(got[name], want[name])
            if where:
                out.append(Mismatch(case.seed, bname, "value", name, where))
            continue
        where = compare_arrays(name, got[name], want[name], tols.get(name) or [0], mags.get(name))
        if where:
            out.append(Mismatch(case.seed, bname, "value", name, where,
                                tol=max(_ulps(t) for t in tols.get(name) or [0])))
    return out
