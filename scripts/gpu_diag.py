#!/usr/bin/env python3
"""GPU diagnosis of the first CUDA fuzzer mismatches (H200, seeds 97001365 ... 97300038).

Run from the repository root on a machine with an NVIDIA GPU:

    PYTHONPATH=src python3 scripts/gpu_diag.py                  # CUDA against the interpreter
    PYTHONPATH=src python3 scripts/gpu_diag.py --backend CPU    # dry run without a GPU (all REJECTED)

Each probe is a small kernel isolating one suspected cause, run on the backend and on the
interpreter; one line per hypothesis:

    H1 atomic_add f32 subnormal flush: CUDA x, INTERP y -> CONFIRMED/REJECTED

CONFIRMED: the backend gave the value the hypothesis predicts (and the interpreter did not);
REJECTED: the backend agreed with the interpreter; OTHER: neither. Probes marked "[raw]" run
the kernel with this branch's CUDA workarounds textually undone (the plain C the code generator
emitted before), so the root cause is still visible after the fix; the same probe without
"[raw]" checks the fix. Then each fuzzer reproducer (embedded below) is re-run and its verdict
printed twice: bit for bit, and as the fuzzer now compares CUDA (forgiving exactly the flushes
of float32 atomic add/sub, testing/fuzz/run.py ftz_f32_atomics). Every probe is guarded: the script never stops on an error, and it skips what is left
after --budget seconds (default 50).
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import re
import tempfile
import time
import traceback
import zlib

import numpy as np

T0 = time.time()
BUDGET = [50.0]          # seconds; --budget

PROBES = r'''
import math
import numpy as np
import tinykernels as tk


@tk.kernel
def p_atomic_add(A, old, v):
    i = tk.index()
    old[i] = tk.atomic_add(A, i, v[i])


@tk.kernel
def p_atomic_sub(A, old, v):
    i = tk.index()
    old[i] = tk.atomic_sub(A, i, v[i])


@tk.kernel
def p_atomic_add_local(A, old, v):
    i = tk.index()
    l = tk.index(tk.Local, tk.Linear)
    sm = tk.localmem(tk.float32, (tk.groupsize()[0],))
    sm[l] = A[i]
    tk.synchronize()
    old[i] = tk.atomic_add(sm, l, v[i])
    tk.synchronize()
    A[i] = sm[l]


@tk.kernel
def p_atomic_cas_loops(A, old, v):
    i = tk.index()
    old[i, 0] = tk.atomic_min(A, (i, 0), v[i])
    old[i, 1] = tk.atomic_max(A, (i, 1), v[i])
    old[i, 2] = tk.atomic_exchange(A, (i, 2), v[i])
    old[i, 3] = tk.atomic_cas(A, (i, 3), A[i, 3], v[i])


@tk.kernel
def p_negzero_select(A, c):
    i = tk.index()
    A[i] -= (-0.0 if c[i] else 1.0)


@tk.kernel
def p_negzero_store(A, c):
    i = tk.index()
    A[i] = (-0.0 if c[i] else -1.0)


@tk.kernel
def p_nan_guard(out, x):
    i = tk.index()
    v = x[i] + tk.float64(-1.0)
    out[i] = tk.int32(tk.clamp(v, -1073741824.0, 1073741824.0) if v == v else 0.0)


@tk.kernel
def p_nan_guard_atomic(acc, x):
    i = tk.index()
    v = x[i] + tk.float64(-1.0)
    tk.atomic_min(acc, 0, tk.int32(tk.clamp(v, -1073741824.0, 1073741824.0) if v == v else 0.0))


@tk.kernel
def p_raw_convert(o32, o64, ou32, o16, x):
    i = tk.index()
    o32[i] = tk.int32(x[i])
    o64[i] = tk.int64(x[i])
    ou32[i] = tk.uint32(x[i])
    o16[i] = tk.int16(x[i])


@tk.kernel
def p_neg_i16(out, x):
    i = tk.index()
    out[i] = tk.int32(-x[i])


@tk.kernel
def p_abs_i16(out, x):
    i = tk.index()
    out[i] = tk.int32(abs(x[i]))


@tk.kernel
def p_local_atomics(o, x2):
    li = tk.index()
    ll = tk.index(tk.Local, tk.Linear)
    la = tk.localmem(tk.int32, (tk.groupsize()[0],))
    if ll == 0:
        for q in range(tk.groupsize()[0]):
            la[q] = tk.int32(q * 5 - 7)
    tk.synchronize()
    o[li, 0] = tk.atomic_xor(la, ll, tk.uint8(1))
    o[li, 1] = tk.atomic_max(la, ll, (-x2[li % len(x2)]))
    o[li, 2] = tk.atomic_cas(la, ll, la[ll], 0)
    tk.synchronize()
    o[li, 3] = la[li % tk.groupsize()[0]]


@tk.kernel
def p_sinh_fp8(o):
    i = tk.index()
    o[i] = math.sinh(tk.float8_e4m3fn(-7))
'''

# this branch's CUDA workarounds, textually undone for the "[raw]" probes: (pattern, replacement)
RAW_SUBS = [
    (r"(TK_INLINE int32_t tk_neg_i16\(int16_t x\) \{ return )[^;]*;", r"\1(int16_t)-x;"),
    (r"(TK_INLINE int32_t tk_abs16_i16\(int16_t x\) \{ return )[^;]*;", r"\1tk_abs_i16(x);"),
    (r"(TK_INLINE (u?int(?:32|64)_t) tk_f2[iu](?:32|64)_f(?:32|64)\((?:float|double) x\) \{ ).*",
     r"\1return (\2)x; }"),
    (r"(TK_INLINE (?:float|double) tk_selz_f(?:32|64)\(bool c, \w+ a, \w+ b\) \{ ).*", r"\1return c ? a : b; }"),
]

F32 = np.float32
SUB = float(np.frombuffer(np.uint32(0x00400000).tobytes(), np.float32)[0])       # 2**-127
SUB2 = float(np.frombuffer(np.uint32(0x00200000).tobytes(), np.float32)[0])      # 2**-128 (the seeds' value)
TINY = float(np.finfo(np.float32).tiny)                                            # 2**-126


def f32(*v):
    return np.array(v, np.float32)


def bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def show(a) -> str:
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return "[" + ", ".join(repr(float(x)) for x in a.ravel()) + "]"
    return str(a.ravel().tolist())


class Runner:
    def __init__(self, backend_spec: str, raw: bool = False):
        import tinykernels as tk
        self.tk = tk
        self.spec = backend_spec
        self.b = tk.backend(backend_spec)
        self.ref = tk.backend("INTERP")
        self.raw = raw

    def run(self, backend, k, args, ndrange, wg=None, static_wg=None, outs=()):
        tk = self.tk
        dev = []
        for a in args:
            if isinstance(a, np.ndarray) and not getattr(backend, "is_host", True):
                a = tk.asarray(np.ascontiguousarray(a), backend=backend)
            elif isinstance(a, np.ndarray):
                a = a.copy()
            dev.append(a)
        inst = k(backend, static_wg) if static_wg is not None else k(backend)
        with np.errstate(all="ignore"):
            ev = inst(*dev, ndrange=ndrange, workgroupsize=wg)
            if ev is not None:
                ev.wait()
            tk.synchronize(backend)
        res = []
        for j in outs:
            a = dev[j]
            res.append(a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a))
        return res


@contextlib.contextmanager
def raw_cuda():
    """The CUDA renderer with this branch's workaround helpers replaced by plain C casts/negations."""
    from tinykernels.codegen import cuda as C
    orig = C.CUDARenderer.render

    def render(self):
        s = orig(self)
        for pat, rep in RAW_SUBS:
            s = re.sub(pat, rep, s)
        return s
    C.CUDARenderer.render = render
    try:
        yield
    finally:
        C.CUDARenderer.render = orig


def verdict(got, want, predicted) -> str:
    if predicted is not None and bits_equal(got, predicted) and not bits_equal(want, predicted):
        return "CONFIRMED"
    if bits_equal(got, want):
        return "REJECTED"
    return "OTHER"


def probe(R, ns, hid, title, kname, args, ndrange, outs, predicted=None, wg=None, static_wg=None,
          pick=None, raw=False, control=False):
    """Run kernel ``kname`` on the backend and the interpreter; print one line."""
    label = f"{hid} {title}" + (" [raw]" if raw else "")
    if time.time() - T0 > BUDGET[0]:
        print(f"{label}: SKIPPED (time budget)", flush=True)
        return
    try:
        k = ns[kname]
        ctx = raw_cuda() if raw else contextlib.nullcontext()
        with ctx:
            got = R.run(R.b, k, [np.copy(a) if isinstance(a, np.ndarray) else a for a in args], ndrange, wg,
                        static_wg, outs)
        want = R.run(R.ref, k, [np.copy(a) if isinstance(a, np.ndarray) else a for a in args], ndrange, wg,
                     static_wg, outs)
        if pick is not None:
            got, want = pick(got), pick(want)
        else:
            got, want = got[0], want[0]
        pred = predicted(want) if callable(predicted) else predicted
        if control:        # a control: the hypothesis is that the backend is exact here
            v = "CONFIRMED (exact)" if bits_equal(got, want) else "REJECTED (differs)"
        elif pred is None:
            v = "INFO"
        else:
            v = verdict(got, want, pred)
        extra = f" (predicted {show(pred)})" if pred is not None and not control else ""
        print(f"{label}: {R.spec} {show(got)}, INTERP {show(want)}{extra} -> {v}", flush=True)
    except Exception as e:  # noqa: BLE001 - a probe never stops the script
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        print(f"{label}: ERROR {msg}", flush=True)
        if os.environ.get("GPU_DIAG_TRACE"):
            traceback.print_exc()


def hypotheses(R, ns):
    n1 = 1
    # --- float32 atomics: PTX atom.add.f32 flushes subnormal inputs and results to zero ------------
    probe(R, ns, "H1", "atomic_add f32 subnormal flush (cell 2**-127 + 0.0)", "p_atomic_add",
          [f32(SUB), f32(0), f32(0.0)], n1, [0], predicted=f32(0.0))
    probe(R, ns, "H1b", "atomic_add f32 subnormal input flush, seed 97200722 (cell 2**-128 + 0.0)", "p_atomic_add",
          [f32(SUB2), f32(0), f32(0.0)], n1, [0], predicted=f32(0.0))
    probe(R, ns, "H2", "atomic_add f32 subnormal RESULT flush (2**-126 - 2**-127)", "p_atomic_add",
          [f32(TINY), f32(0), f32(-SUB)], n1, [0], predicted=f32(0.0))
    probe(R, ns, "H3", "atomic_sub f32 flushes a subnormal cell, seed 97300038 (2**-128 - 49283*2**-128)",
          "p_atomic_sub", [f32(SUB2), f32(0), f32(np.float32(49283) * np.float32(SUB2))], n1, [0],
          predicted=lambda w: f32(-(np.float32(49283) * np.float32(SUB2))))
    probe(R, ns, "H3b", "atomic_sub f32 of -0.0 on a subnormal cell, seed 97003314 (2**-128 - -0.0)",
          "p_atomic_sub", [f32(SUB2), f32(0), f32(-0.0)], n1, [0], predicted=f32(0.0))
    probe(R, ns, "H4", "atomic_add f32 returns the OLD value unflushed (old of a 2**-127 cell)", "p_atomic_add",
          [f32(SUB), f32(7), f32(1.0)], n1, [1], predicted=f32(0.0))
    probe(R, ns, "H5", "atomic_add f32 on local memory flushes too (2**-127 + 0.0)", "p_atomic_add_local",
          [f32(SUB, SUB, 1, 2), f32(0, 0, 0, 0), f32(0, -0.0, 0, 0)], 4, [0], wg=4, static_wg=4,
          predicted=f32(0.0, 0.0, 1, 2))
    probe(R, ns, "H6", "atomic_add f64 keeps subnormals (control: 5e-324 + 0.0)", "p_atomic_add",
          [np.array([5e-324]), np.array([0.0]), np.array([0.0])], n1, [0], control=True)
    probe(R, ns, "H7", "f32 atomic_min/max/exchange/cas keep subnormals (control: CAS loops)", "p_atomic_cas_loops",
          [np.array([[SUB, -SUB, SUB, SUB]], np.float32), np.zeros((1, 4), np.float32), f32(SUB2)], n1, [0, 1],
          pick=lambda r: np.concatenate([r[0].ravel(), r[1].ravel()]), control=True)
    # --- seed 97001365: ptxas folds selp.f32 of -0.0 and +-1.0 into FSET.BF / I2F, losing -0.0's sign --
    for raw in (True, False):
        probe(R, ns, "H8", "ptxas selp(-0.0, 1.0) -> FSET.BF gives +0.0, seed 97001365 (-0.0 - (-0.0 if c else 1.0))",
              "p_negzero_select", [f32(-0.0, -0.0, 5.0), f32(np.nan, 2.0, 0.0)], 3, [0], raw=raw,
              predicted=f32(-0.0, -0.0, 4.0))
        probe(R, ns, "H8b", "ptxas selp(-0.0, -1.0) -> I2F gives +0.0 (A = -0.0 if c else -1.0)",
              "p_negzero_store", [f32(7, 7), f32(1.0, 0.0)], 2, [0], raw=raw, predicted=f32(0.0, -1.0))
    # --- seed 97001945: NVVM drops a NaN guard in front of a float->int conversion (UB in C) --------
    for raw in (True, False):
        probe(R, ns, "H9", "NaN guard `int32(clamp(v) if v == v else 0.0)` removed, seed 97001945",
              "p_nan_guard", [np.zeros(2, np.int32), np.array([np.nan, 5.0])], 2, [0], raw=raw,
              predicted=lambda w: np.array([np.iinfo(np.int32).min, 4], np.int32))
        probe(R, ns, "H9b", "the same guard under atomic_min on uint32 (acc 19 -> 0)", "p_nan_guard_atomic",
              [np.array([19], np.uint32), np.array([np.nan])], 1, [0], raw=raw,
              predicted=lambda w: np.array([19], np.uint32))
    for raw in (True, False):
        probe(R, ns, "H10", "int32/int64/uint32/int16 of [nan, inf, -inf, 3e9, -1.0] ([raw]: what the hardware gives)",
              "p_raw_convert", [np.zeros(5, np.int32), np.zeros(5, np.int64), np.zeros(5, np.uint32),
                                np.zeros(5, np.int16), np.array([np.nan, np.inf, -np.inf, 3e9, -1.0])], 5,
              [0, 1, 2, 3], raw=raw, pick=lambda r: np.concatenate([x.astype(np.int64).ravel() for x in r]))
    # --- seed 97001581: ptxas 13.0 drops the sign extension after neg.s16 -------------------------------
    for raw in (True, False):
        probe(R, ns, "H11", "int16 negation widened: -(-32768) gives 32768 (ptxas neg.s16), seed 97001581",
              "p_neg_i16", [np.zeros(3, np.int32), np.array([-32768, 5, -7], np.int16)], 3, [0], raw=raw,
              predicted=np.array([32768, -5, 7], np.int32))
        probe(R, ns, "H11c", "int16 abs widened: abs(-32768) gives 32768 (ptxas abs.s16)",
              "p_abs_i16", [np.zeros(3, np.int32), np.array([-32768, 5, -7], np.int16)], 3, [0], raw=raw,
              predicted=np.array([32768, 5, 7], np.int32))
        probe(R, ns, "H11b", "local atomic_xor/max/cas with -x2[i] (int16), seed 97001581 row 6", "p_local_atomics",
              [np.zeros((8, 4), np.int32), np.array([17, 4, -1, 20, 32767, -3, -32768], np.int16)], 8, [0],
              static_wg=7, raw=raw, pick=lambda r: r[0][6],
              predicted=lambda w: np.array([23, 22, 32768, 0], np.int32))
    probe(R, ns, "H12", "math.sinh(float8_e4m3fn(-7)) into float16 (control)", "p_sinh_fp8",
          [np.zeros(2, np.float16)], 2, [0], control=True)


def load_probes():
    from tinykernels.testing.fuzz.basics import load_kernel
    load_kernel(PROBES, "p_atomic_add")
    from tinykernels.testing.fuzz import basics
    import hashlib
    key = hashlib.sha1(PROBES.encode()).hexdigest()[:20]
    return basics._MODULES[key]


def reproducers(R, budget: float, only=None):
    from tinykernels.testing.fuzz import reproduce
    files = json.loads(zlib.decompress(base64.b64decode("".join(REPRO_BLOB.split()))))
    d = tempfile.mkdtemp(prefix="gpu_diag_repro_")
    for name in sorted(files):
        if only and not any(s in name for s in only):
            continue
        if time.time() - T0 > budget:
            print(f"R {name}: SKIPPED (time budget)", flush=True)
            continue
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(files[name])
        try:
            ns = {"__name__": "gpu_diag_repro", "__file__": path}
            exec(compile(files[name], path, "exec"), ns)
            kname = re.search(r"reproduce\(globals\(\), '([^']+)'\)", files[name]).group(1)
            from tinykernels.testing.fuzz import run as fuzz_run
            for label, model in (("bit for bit", ()), ("with the flushing-atomics model", None)):
                saved = fuzz_run.FTZ_ATOMIC_BACKENDS
                if model is not None:
                    fuzz_run.FTZ_ATOMIC_BACKENDS = model
                buf = io.StringIO()
                try:
                    with contextlib.redirect_stdout(buf):
                        rc = reproduce(ns, kname, backends=[R.spec], reference="INTERP")
                finally:
                    fuzz_run.FTZ_ATOMIC_BACKENDS = saved
                lines = [ln for ln in buf.getvalue().splitlines() if ln.strip() and not ln.startswith("P")]
                what = "; ".join(lines)[:600]
                print(f"R {name} ({label}): {'STILL DIFFERS' if rc else 'AGREES'}: {what}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"R {name}: ERROR {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}", flush=True)


def environment(R):
    import tinykernels as tk
    print(f"tinykernels {getattr(tk, '__version__', '?')} from {os.path.dirname(tk.__file__)}; backend {R.spec}: {R.b!r}")
    try:
        from cuda.bindings import nvrtc
        v = nvrtc.nvrtcVersion()
        print(f"NVRTC {v[1]}.{v[2]}")
        from cuda.bindings import driver
        print(f"driver CUDA version {driver.cuDriverGetVersion()[1]}")
    except Exception as e:  # noqa: BLE001
        print(f"(no NVRTC/driver version: {type(e).__name__})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="CUDA", help="the backend under test (default CUDA; CPU for a dry run)")
    ap.add_argument("--budget", type=float, default=50.0, help="seconds after which the rest is skipped")
    ap.add_argument("--no-repro", action="store_true", help="skip the embedded reproducers")
    ap.add_argument("--repro", nargs="*", help="only the reproducers whose file name contains one of these")
    a = ap.parse_args(argv)
    BUDGET[0] = a.budget
    try:
        R = Runner(a.backend)
        environment(R)
    except Exception as e:  # noqa: BLE001
        print(f"backend {a.backend} unavailable: {type(e).__name__}: {e}")
        return 0
    try:
        ns = load_probes()
        hypotheses(R, ns)
    except Exception as e:  # noqa: BLE001
        print(f"probes: ERROR {type(e).__name__}: {e}")
    if not a.no_repro:
        try:
            reproducers(R, a.budget, a.repro)
        except Exception as e:  # noqa: BLE001
            print(f"reproducers: ERROR {type(e).__name__}: {e}")
    print(f"done in {time.time() - T0:.1f} s")
    return 0


# the six fuzzer reproducers of the H200 run (seed97001365.py with its s7 scalar re-encoded: the
# reproducer writer wrote np.float64(-inf) as float('np.float64(-inf)'), which does not parse)
REPRO_BLOB = """
eNrdfQtzHDeS5l+p8YataouU8X54Lcf5NFrtxG54HB5vbNzJtgJAATLXVJNDUhI955vffplAoQpV1WzSvpnw7vaMxe4qFB6JzATw
5aP+zwfXMQ5WE0K5kk8uf/rg0+6Db/P/bs72P/0Yr/bx/LpLb//yl+4qXl5dDG9DvPq0w6e66bFv99/uO/gsrnbP/u33X3zauasr
91P36OyC8kfdcJZSvLru+puL8450b88vd5276Xp50tHdp93ri5vulDwh3Xu3v+ngyz92PSV33MNGv367785uuvdnNz90bX/P3lxe
XN04fx67Pt5Ciesbd/P2uqPd+x/O4OLND7HzLvwY98M1dOravb6KcfdpGcVX/+ubf/7jl1998c0/P72+Ct3lTzc/XOx5tyIUNF8I
tS+NdW/czQ/Tj/3bN5c/de66219O19oOwp2bH3EEL2j3tDtlTyR8ZfCVEmslpYpprRUW+Hb/P25+fJLe7sO3+yGmLtn+kpLa13cU
nxflx3uKNZDxRx4oXvqsY2PpWugxtDNfOUtdn84v3E0PDfmLi/NXPd3tuo8/7tiuebA2d/q0O9vf9P3+cizMcll4Fi5T1XOmld7t
dvOT8Ryb6L+5ehu777t/cufXcQdf3rjbPv846do/u3Wjl+76elXZ1Dbwwd3Fr+LN26s9tHyKFOs+7PDPTNMyF4WqP8pgaLKyv+Wf
4lCeXeyvb066C0ZPumt10rkQKDApcjFc0Pkb/HvBgTtvRfvINRR7ZvKVgFfi7eVV7eL5GcxPJtQQb/uRQljny/Ozk458132Yb4dz
9+Yyk+uke3O278/jHvq1O+nKpRcMvvZQFxAi0xQYKuJzr68u3l5en/0l9ruX5Ls6A++oKK36PMkwQ+SJHO/BVXdz8eYsvHLD0NdB
wuwCgeGP6U8tTCVQDi4jF2IFnPV5/suEm17vus8/7+ov4Bwsz3n3uOtPqdq13SjDu47nMdzUqV93DIbWsGHn9gPO9luoXAlgtba6
jz+e+DhdXHX/QRX0vbty+9exf2Zavhgb70ujMxN+8gkoGKahrzRyQlqmxQmu0wIs34OgApcjv43Tlkoli1YMUPodtSO9C4c2db5j
pMNenI7EA1IKZZg1TNlMxVEAuo+h0K142cMw4DuMBWl6K55c/+AuI8ztd9gXaGgHPUcOQRad5oPAZ3cyC+QpzknTC2DqOrCnWWs9
ceHi+gfoFpCpFozLoc2Mcv3WV0aZyTn28ACXVEbSjZI4wiW1b3TqW3pzAZzpr/u+FZQ16+c2zaso3vC07xnM0g5IULTa2IdJNXUf
VTqPjb5nG705a7eRU04rF4JMUGZ3hTPxyc+KOiykgDkcy0FzrIxSttqXrbXvO8aRJzbim9XyWBcQsxmjfMNgVURO3OVCB291T592
h29gv3Ed/eyuAnADCWXwe6bv3AtsMl9qdQRfcNc7Burwlj8Zbn66jN2mjVP+RMuJ7nJD90LGxfTit0puCeQG7doSVG4IqlAKQarv
0nqlFMoq8tWsXa7VblUCdQb+/Wz881k3l3nP7Ga1hUufdWLRPbvqHiwZa+m7cfu+kRsaT+laFfEqFVBZUR8LouZ5A6KhnluLRJ7Z
LBBl6fuH7vT0FLZlr9++ifub60zYcwf7ix+6/nXcxyt3E4cdFnr459t9urp40+5wntzEa/j5+kneOo47oFewGTzpXl0Hd+7gy7Sh
7Lp/6PYXf3afds8FYdjJL75+8Segz8tChP7RLX900j3Ke0n4gvX0j/IAlYDfPcM9IhRIzSfCf6T5AHeTR1jobP+oLqUvvzvpvrzY
x91JbQgU0NGWKGwIcP19RIegNaUB//XBJx1I0GogSjDQDzxpT4WLQkeqnRFwf1j+brsWiU90MDJ6Sb2hkUBlzMcgSUhUi8EZn5ZD
08lRIwYfhQtSR7+ujyejldAshugjjZRHsigQiGw+g+SL54kgxDo7fbzd9m9BWiaI9UZoQyIN0SW1rC+Z5W9uBfHeD4Me7ACUG+D7
euryVF28vXk07Q5f9gKnuEgJ3iab2btWOHmFvx5NnNY/yoobb5H84KOm0k0deXG7gweg3RM8rWAdhacEshWxpvxlJOS/wAt5oAbu
5wah0qZN2DTO/990IB+VDrdfV7gFJ3KqYFYGl5I3LnrHrY4OmvZwRXBvCE1JApt4akYBuFj1ZUtHfZiOsyA8WswvGefrGF1xQ3WU
rDggWilriM4s45EXm4+BpoYIfOM9DyxJbsLIsT6FIcCHD7UcfjT+M0gQJiEODH4r/5w8kPa5q0JwA5MsAneOU04k8Wqc8iXv0k1L
t2LbUNk45BZUYTI2jtvDEDlxOCD8TlCeLfynR82myjXmRYITasrPmYcovGt5j8jw+0XmWS44HXfgB7vzie++3X/5+6+/+PLFczzt
wsL473/8+l9efP3Hf/vqT3/433it5yewUv3pmy+++cOzV//+Aq7go3Dl+fPfw496BP92/z+/ePYvz7/8fV4nHiHY8Ajq/vr5Pz3/
+vmXz7CmR3/48pvnX3/1CBcUWBxfvdq7N/HVK9waffvBq1dv3Nn+1atvPxiX6yt3Bgvnn36CMbx5fnt200/LU//6/MLDSHqkQz0p
PsL19IOTbgZQpKG/BkDBx7YAClxdAigXTK3wEzrjJ7D9lw1Goq3WzArLqNGyACZwWVOrmZKKyQc0Ju8Ga6AxPjaW94mlAcZ+M0Cm
EP5vBMhs8BZK+0sK/PwF5TPqIvJBD7ev/V+bo950OFXjnn7cWYLmhckQ1ChFJSgIqy3Bs9tYwuBRoT6qP63HpHxWHFGTsgl+XP4u
4Y28iTy7PtunEcbJxzg8GeYb+4Rn6r5vzi94nJma1ruxJ8sz1GneM+KhLR8gsYp85q5H53qIOkwzAzSzJ90lm5EqRttjcX243GJ5
x44HoXKoyEeNFYgzU7OccLuCA40nEzoeTHpoEu+sGio3sTs4WGjqCA7EiBr6CyEy6sNgFBfvmd6COnCFkvWlJXx0yxbIkEJACf55
ZtePIWh0SxeFocVrgQ/Io+jR+Xl7Eb786wUo8HwO/9ezfXRXY7nX63Iv8LS5LfeeifWpZiR8PtCOxzABxxyyOOaI9TGHyfmYM2Fa
0+zi4tmf4vFrBoRWZxY805x0DcpYIY38eD7fT9VNDbQHvlMNReAopbkGyWPiCSLJza9d5ZPmgfHYvLiUWScftytGIWeMou8RfyEn
MzwAooy40iRfU98yxHSCNcGzzIwdyFex2fJlbqyV0antDKSeTuPm2NjvstSMW7N+I8jkCbDQAlQFJlwdQUF5/LB9EgY/oUHQMOK1
/dQlrrJymNGOoiUqwsMzBtWDiICmaIR62ZHzIR/Dl+hSEbc+93B3MmEJRc9d//lq5hQY7ji63RGoCkUYZOdD3JSs4KlrcRiGOn/D
SenXOYrTm/imnwZ6cgCsOWnmByXy6UI6EJx8w+kMTm6x2hWGje2/hEe+GzGKmeVm4Pb6JziyX13scx3HrubKzs9HQRxna2JXPU3y
4aff8ayceUapTvvHDe1pPBVkRmR5XhS5bNU8rXVzXBFzT2boCKo4pYZqxakkXMOxUBmrC5S4IdF3v3iIzyg5ThfH9WqSq4L5dXP8
Z25+yRxD8y/hke+qYkamxCo+7iTIvj7ad5AcbheSc3tx1WOVwOtF/b+tSGvVWmrWWvnxqSZBFjWhnM819ae37GU/Lzs4OdkgwXbf
rTUiG+sWZK6bLuoO7rqpO5MApg03F03/GmQy43a0aNSZZ/kOobgliFv7wGsf6FFJEcjVpf2zI+xWe5VHBg/Vp3nl5oxMw9P78vgE
3aLiy7r8lo6oPcjuMcaGDUezYAo+CpWQn7YLEgpho+zzJg2YpUf5/BiltGFS3J4sGfQ/RGMhIcXSMy1Pz2zV3lAxn1ZXbMUyxrlm
hCsjhdbSEFOgbbUxEAo97nzLoyMftkt07X5dofN6OAHOZVO3WpFXV5o1Mq+HSOvvcbhoVSwb5s/zz7on/OvUn+1IlqbKMgazxa3p
E7IqVlkjM1yPQnJ+1goHsjEozIqStwz+YSONdRB33cbx330Tt2OnShQ4/+5icFOJFs+vu4r12DcGQVw8kceBZffDPInAabC3Ek8U
pcooQo1gmhsTH1Nz0h28XPBpXEbKatJM4qGVucflBPYXs1jfYTFqp0KUHdm1Blm41tMR6PLssFFrtDKsWRjaOM1Tdy1Q7bTnpjW5
ysxlLQclcTcxmULHBWgtIG135bT/ChdFi6x3bvmkNtp6lvWMNnWk0u+QoAJHm7dOVYt83t3D9Qd6tja1X8eDxvX/smYEULJb0C3r
J8TcTLUijGh7BtgQ3uTj7wp3G9i2isStHCzxPINzuRwt5Q7Af+QQzMzsUTyUTTCzHGFmQcJdcPIWyARWOFp9Ha0OVLDoY0VLsaHB
CCpFiCF5qV25X3BtnUgYNOM+w67BVLDz/f7oaLcIob4PU6Rk/chY9uhjdxqKRoxZZ6KicWOwxWiCWD1Lhg9asEKDgjxrIDYnXqhU
yjEoJ+ApxiriXCbFjZg/4q1OmmRGY4dBQ4cM1igfGY0mUm9bZJvWyTwKz96ygwxbQOIyGEqLxQY7T/NfmMYBJ9I8BP89YjIZkX66
QODJvXAwQpWHJ6F0GzhPYR3BeunD4BkZoAkvwsCjlHQwRPBgkKp+oGjoIgIGI6ilzjLlHQ6MBgvU5NFYjwC80dRDeZGtcIYEEErJ
8B78Flge1iFQe4GC8uNKuWgGBwpRZspxwS0+S4PDdvSIuMNz3AWGs4ZzGcQgvcH7SnGN/ToE87eWHVx7N2xt11wt7qHmCqA/pVze
JwP0qAzACdZk8vNiPlGOOkc9DEqhZE8KwMCHGJ/NKdEUMwwIAYsJyCnQzEnh41N0TjtZLHioQGjQMI1FaNxovqEmMMpL+cEoSZwY
RYanVvEAlRlxRcGkFNXgXSzCykchnGyIiWmviRKm1FMtoD6pRJnh3CVLGJWSWDP4QRcLKAgtSd7xSPlgoIhwPDnv4OOj5IELFji0
FqHupAyVDK0u2cIlqBoiB+Ef20PGKvSLWsbZgipo7XcdRzBOMFf7xxO1ksDvcEg22Z02uDyBT3B9/AGOYY/ILWwKLh/fL4zX4rB8
T+ad9AB5lsdMVbjjK8Z3UGy8TBKjFjhFKbRP5aXTjZOH0w4clSy1MNO2ls9LbRqfdUbaIpuF5wZYY4diA8t21Wr3gv8Ysz4wYVDv
HVp2D1lZFxYo6P1ua4MaLU6NDUovDVDS0N/SAIUQ9dYAZcWv8uDFx7YGKLi6tAnhhkXfbRVq3HSpHZ10fzOLUKHE38lFNzPXEfMB
HezKjfSZPgT4Z4KidQExxbMLKtCVFBF/OA09U+snLhicuC6oOWoNeA2y+Nqukf7MPPmE9cxdwYb6zO13rdskWaBWI3qmpOR8d9It
r6B/Jl16VtIMDG5hwbYM+3R24uxaJ9B3aElHBP0FuvCcZB/Hs7+AmKKX69JFuTWEbdySMzpZfMcmN0M4SZ4yKrSAFV+YAw7JMJuT
zyWeonpOu4/uJ11GclY9wOmrBy90S8XD4rqPckRGKpShn5AREKoWjt0CGqd6A50VXpmg8dWZeQJs2PqsjAAbNIeHydJo33b4E+SB
GUijZgaieuzaActAPbjPznN8tmDaDIjwl/1rMwEifJdhMSB5QcXg7jPd3p1sgeTTyeiTT/O6zgkcwY001nIhs1fyz93kg0yW3qVs
BnWK2XHBn/nEvYeJbIo8ftrYEtF2UeE/trBibbmqluMNzU77HoePsEmRmZYIH3cLL/uPkBQZgpwIgUNRMzlZcS9vwKi2L63lqzJW
fzpZftECNmJrS5DtjuKt2+j61oTY3Om9Wfwz+x40CgjWa1swwgwNzEbypcf+Xf6bL9jaQx21xKgy+yy7n3yCSgKbQCd9iTBSayOc
KNPnCe4aDii27fuNg3c9mTG5u+6tzYXvmGkt+uRO79G+4TZggVuROQj2shP/iN131QKLjqbyoKPpfysfz+qF1KviDwUnBzgwagF7
QNiDEdhjwzkhwk4QTuuEc4oHCthpU9hXBp1EgH2jzL84YRHKCQ/nRAGlHewmNZxtWPabwr0miDNR8BsOCHBCd/AvHHOISx7awp2t
Q8dEoii/Z9/+TK9PePyXnfD4/Q6Kh6CdtxOOVR0DRydEQnlzcH8QdETVcQdIUj31uEgaTjf16GbcAGdxPnmHsmCjkgUnic3RqB7p
glPaMzh6qaCICOjEBnMwHjVhmBTOmolzyb2JkcMRczzSqQSnPDJ7+o0gGVniOjpx6oyh3HFbnpdCUMe5bo+ceJ6rGFg+oE0ehwF4
xDjLyxEYjo5sxLxAj8IhEriQDFaq0Rm2HnWxEDr/Yn3OW+C2cjQU4/3qGxqb8uX5EWeCo3KLQwk4ag+M5iMsk5TrgatSz4wzjT6o
5EFYHC79d/s4wvqymGKXqEDqBA/H5iCVgpM+1xyowAcHU61hmkQGSXzwcDgWFgaqJTVSMh1lAuIzl2LyFicZODcIECVB0VnYD54m
FeJDHDNvDyO3xSu7KIeFj3Tx/Fx86NKVtEUT6oQf/cyC38gmb8/J7EgfZ6FZfazUhlIiBgPzyThf422KMWM0HaIKgwMRWA6Kp+Mf
vSmyHjOI2PIjoTETBBzRvbaJrDxw190jjoOYShmTpiCrJMloKU2Ds9ImY0Hrrh6AQ39w1EQERr0BKUogm8q5xIQjQ3JpWE3beprW
/VnV7yJHEYkiBAFCxIWPRkvHNKeeSC9IXFUXB8MtjXQAZqXMrjlnzSYbetLjbJUkdAOoMyTPtKahmgnumo8Z+Tj0CWQzxS6ltff8
ov7VeDe/PTk+wav+JJ+ONugIdUw5QUEvcDUU3+T2+dX8OpMC5cATxAyRE/0g88kztV5lyb0o1oH9Be5JDwknzf+bv9HVtbkUacot
yy/LzbWQBw0QjmHHQLe5w6GsAVlSaJGGyrUoOXnxx2swS3kmAqK5Tljl4gDbqYTrLTwPnKlyXVge50EWTsbnpHOGVgWJdSI0nkp9
Bd1LuB+TEzdbBPMMrMzSI0rHpdQZsePzesWHaHIbY5/vIcoStMOgcPkg3G7rO27Fb+o7jvDQBrqDnav4FdBdfmwD3eHVlTv3ey7u
Ru7QUZeM0N0UYM+eWG7QZqI1gdmjNp5y+49dz35JYf7gwr8VUjgS/m+JFNIayX/QM9r0l+gXPUfwFwiucQ5soy1Purt+sd0ShWMn
iIKdjK7pB8JJP8ODeYtcdB93L4pj9+SemSNb88G3QGkfjW7nxYtmOlmz3cLDuikzQyQ5RjbjTrPf9qkoqQI4yz5LC0ig+34JEeyW
6B/CWzDINexWiCdn4gEFcjk4MetDDg7vcoqE0e+pwJrTQX30NJ+Dhkfck4+da/xc7/B6V/0lZgW4RCeYS2pn1/fiJ14xrbVrUZwc
Fd+x4gT+dgQLJt+T2f/mbxgFXJGhXxAK3KAayHEldrlv2XJ2W85ssFvyE5BiZpU5qLiBbfhyNrJ/3YvsXtNjnMDHGyfwfp5N4LEF
Qvh5eVxAn16wxaxtQHsNFV4EQRGPR/9PPGTL4oK/xPKva9qH7M4PihWxp6OgfEXw3k4xHYojaMUQ/Rsp83ORtG1ahn3xwpKjC7M4
acDz8VmY4/zwtHDOvApN73Z3JyzwGWor/otDEaCsK77viitbwdw/ysQ76EFVK8jlYIpGLP0QP+b8Cgc4rYUYq6ZpgfkJbdRbtFHX
4PtJg036TSM+PBNiTDggM9+vE48s8Ui9wiMPTkYb/05z1WLUdaU9vVvGsE8pCMbkAcjOp7MI8N1a4WXGrUg1VH+tNzaHEsI+xx0w
tTtaYAJER5ezy5+uz17ve2ToNvw8e9S3EPF0rVEm07VFtPkolJsYh793g1jw797GCv6eiWxnj9dieygqcMOQawOUWM3nIjNAEzum
iKZwQFVaSwwiU4y0tqV3nI5Owe1q/D0mKphdxfnCkoSunUXLTZakWYO3VqSRYLUjC/dRjMOauRYbkQciOVA9HjJXlQUGVUxBzdv4
liw1n032vN89PZAXaNQw7ZBhK1AegC+ljqpUP906bZ72p9i5kd4HfSF9DlmYNcvGAXPjHDk/lYOCJplfxDGtYnuKbjrMCCXA6C5z
zO8WftF4PNs4Muf4hn7Jm7APXGaKyY6jzaKKpF+o3jtG+47DLuddjkLAnU+t9FSI3UnXH44nLGlUatjhMvnPYj7GI81NDk1Ae9rC
kovGTczZs7BiN7vAvCUoc48bwZOu2ougF21+rV29jw21PDD7weKe4OW9JuHvqo2xSsp/5VwbOORjOKbJYGscjqNAKchAJeamsNTb
uIEp16jT+nkrBimSI9bFYJMSm+dXaQEs91EHQrmg0hMm0gonM0IS6UwaLNNesQ1qF++pf43CGTtwPXjJRBCBJbpB6TyRNgnlnIGi
yXugwkAl04ENUsVE9Gr8+lj7o8dTC9KtUNANfVb3B+O1UZSYpBXh0KPhOGrs/GBkEAZ6bKilKoYVahcTc9ZIl5x1HhFqbpN1YmDR
Jub5mv4b+qzvr0fMVyAkLKHUG6XcELk1XiVDgtKJJq6iiBr2/c5rYBdlExdMrOlVnbknkNY5GwLFsLNAB0KcJxzOOskNKg2UD/eh
luQeY8KGpCsGo/y4sWFTvzyG0hqytgsc9Yb7z///A0ZJzo5rpWqSXIHbkgzKGmGYsUE4rRNRSgjM3uOoTCrb/oCXcVslhmEjl+sP
HaL2oC1c4J4DwwWhaDABzTfMMJ4YcI9lXLvgFCdqY4XayL0/br/ZGKlgG+hBen2EDX/gIKkyDoONMCA/eKM36Lqn1DhBAoxRCMbW
9EnsHr2zRv9X1qK1sSB7arY/FahJS7Sz6CqMmZFMHKSkXCUYgIrr8ms9s5aDpRwBecVxa8xGblf0d5opM0jmjQiERb1uf21dWuup
tdxlT9c79QCGTxy7z9N6fAPMmPbUSBJZEMCpqyfW6zAsOnSQOjg0OqGuZMppGr1Co7tQdqN3zD3WpuE4PTbr1uq+jpJzYymu4rBe
sgeZqPMp+4i0iznw4cgWYq3y11N7NDPTfY7UnJlfG4pSLDijzZoaNJxbMubUktYPGA/x/+0cvhCbS9j3svvz+Nyd/Gg0OpnqWVJW
aEcG9JYIQTnkInTFRx8G9P8ApQpLdvktTPnOg4CRDaH6Q/ABozxwtIKIRG0OXgkR1mX4LRgNvmifQEt0R3a7N3wwmYdD5GPEho5Y
Bu/BXxDvkOddKA7Pc9gZZt9y6JOQuT3ObS4K6l4I7LgPUsIyAf0bFD4vojVw6iZCw77V4XVsRwmGZrIAGsuq3C8d0d9I2AHWDqxQ
R+hD8E7zZLkMA/qTcOc8F9pxrWDLhN6AgnsPfRtALqB/6POCtEPXiaCRBkZLqE8YHI/UA03obgHbSC9gtfEYfITZ4bhDmgYigS7A
MCRA54KXFuvUIWguxgiagFE0IIIBliicA4ORK3CMUpluhhuXuLljs/DgYKHRjProIcFBaIs66lxUV3LYm8FmvsR3WHTLapxi0P4I
4xrjRMp1CntCb8O4aAVS41vGRGy+Og/JQUYShZiceRrnHzoFcwkCu3fQtiVuBJ1zapxI3exJ4EoBihXYGKZNqOqEVNOSGWkY7EXT
nLhs2f/an3bziMFhnMdonA/RaGYUDHJ0JkqwaPrEbY13qfEnpV9jP8fx5v4NTlshZHGmKs5LaOKd4mkq/cZ+tHTAfqQwgHj4gRsf
GJmD4IBrdAByAt9IBrIOOgD4q/ZL+IWzE9AXRD6a6P2DNP/KF26j2OiThVK/fKyOcNzCaCzNQ+zFSiysxWgf/E2txRrTry2sxTCP
mrFfbC0eH1tZi8vVtbWY8aNxHv+ZTboTdf5u6cBkf4lO+Jd0MjAiwn227+fctQeTT5XvJ13rsV2z+5w0MKte/JostNWGShHcnTNh
kFVKnZKDehVl0CTxmXG67Fj89OkM5045v+myyhkMW6GAm0zrTVqXu21tnjnJVgEye7Rf/xh/Qr+Oa4uZtfgmsxZdJmbHXNNeHcm2
ZUo4zTMq1lWFYsOrsTZ7jEH5s5ft02cXtCT+4vflbreTy3ZJ1dMvkN7W3b81a7cPnjbmgwLQ9k1MSPe4awxN1UDoSiZxGFxOSmwm
KxndWslo9xmOcWHkomsjV6nwGRWHAh/g5gTzM3HAloCxSRPM37eO7NC7+deu+6RbpOia4Gx0C6CbXC65dcyDDvzQOsFXuypC7dj4
WLhJkbX0LXjcpmPP2dWvTcZixz9tl/iTlURtXB1WOHgm3Wdor8jT8TmmHuFoe6ZbU9Fkbn1bLQNYPfRiCorhi5gYxKxnYsyTn3F9
eOxnkJYWBGfLBETVcpEFrO13rQLVFn4/Waus8n6GnFdw7/aLnC105Z2xSIeWn7lxJZvYMjBltPfyNjU9sksjCqs0XpdXiOM/+irn
STg/O5RsCDtf00+RVcLv0zlnSzGSjZ4d/R7fYlHUTUlw2Bhi0Ug9Z2+rXgZtKqy+Ndwauds1Sd8nz5cDOYl6zBGDkjeliCmZVfq/
wtByfn82ZQrCMCEoDYzUll7mypv5uyg75Lp1Ncj6UE+2kTdC+fNCHnZtG82rHUr6nomctHU1WVxdJ82jk4PJwUwwoxPAsjhcuyNt
TONYhPnedttBLoktJj48v3gNCw0b08ctbFpTPrMxA3zti4J9sMgDbS30puWCC94kagK5mrUO+hXgTDRvOJkycz7DnJxLrZLz6SEv
/jzy4knXL3Itnt7xQhSfTa2Y/IWV+LHRA+btwsVgFVGWRX1KN2p3aLtjG5t0Dvfrry30qVHbd3Sg9U1DU+7Un2U823EzYqlrrmqS
8zJNCvup8R8zGkObhP4oqwtWalJjLfxK8qo0KvtiLf7ogMl8eaHdeBnUkgSVOr6Wo4jTzAYfNjyxa9ep0rtDeVWXY6xbgMY94xJq
q+4fJ10OFf3d045uN3Pty2KwkydzxjFccJvlpccbZ3+J2MGzVUJIuUpIBBslmE562OunGH3fZdtspgW08Bg3Ict3FkwbnE8+GZea
Rjh+7toMsLUDqs1I2eesZh+OFf+3C2srkBorMGCEo3pGS/mAsWrZcztwEZwQuuZNYFxnX/4hOqGkVhkFG/Mm5BiJVKyCkSubrVf5
GTPlCE+D1vfngwGNdmfCiGKBqQjvvVBP1mr3ZZfhbsDgrkFLrn10w/0JLezxhBb6/oQWz0qC/YclLL87p8o0iJqqKRzHo+/BdA+m
2ViFZWFWYjwgPvLG0xg8dSkFF4MUCTPVICiTgSDOkw6O+uQpN97qKK1UPgQaGB8GpphUOroI96ijzDmNpmlBOHBWMNwMlIogBOVB
SAzuCgxxOB78IASLwnjGMoAWgiR88Ekq7nQM1FsH11MQXEf4Q4B/o1DQB6hURGjbJMaDpIjGcgnljTMcUVOHsXw+CAZdFB6eEMJL
H6PFAAbJfFSCe41Yee6ZjhiKFpxHpxBNtGBCaxVYIAKYaAjecs6hZrgaYAxonmOBSaCWgL0FZgzKbSe0VgkN34EuIXIQNj7Az0HZ
AX8bRw0PweGADJVQl9FIQ4lhfVxBG0MKXkuEvUyICiglgeoK+u+DsQGdtSIi0YHy5IKPPIUIsyQHgsFxmKkIeukxRjEFqBwkf0Ba
AaWDIoYnIXnEsDpEuLGfTCaHOYgMcclAT4VClFjEEqQH48joL1AGyjqYC5gX6aKVQCWguwbeCBxpBv9aTQWTJFiYAQu8klMqCcGh
0wOWYCIMbGCHkeEpzREt/9+ICxzNj+fhMlNys0B0WtrR59RAbZwkIRVKrWIWaBv/acfrgczxn8UeGUibd6vWw1bxmGiZ+3X5uBav
BimprQx3eQLrAMIARB5zABVgvo6hYLBOMu4Yn3IXUUGJ46W8H18uggMKKQk7vl3FrTDxBOWA/6h29W0vpRwNgVWMuGK99TkHJR1F
55wSmNsme8sYcFO/GfuNuZwCg0WI1ZxKhwnXREZem4XOflAiN/GA93DYzEVcWwo6IzrPlVRRjvaMdaTmeg0QvzQTV7jWR7IHMpo7
45PIEczMAnUURm8OAqeNJKC+Solp65Hj4KrPPlBqyIFh3JJsWYcNQEKbsvEyoa0dNOSAz8WBZJ+UBPODEX+KgLaD52DEBttDewHu
DpKjGp9zg7NopZJKKLTROskpPke1DORhr0Lix0JucSUqr0AJTAPPWdBvoEDoxl6+NoivDdDrcEhgYR0iOimB7hq0XxvI1wbvjePQ
OnzWG1CmEdcxNTjpeXRhEEQ6y4D1w8YNRwqkOJxAmaWgw0FktI04ezk7RNiEo64N/JI7J6w0XIIGhdUghXuikFdW6jAMwMoChFF5
ZjBEVg248ePRZtulgjVNMx0GK7UXgt3nKLax9q/nwwqp6AD1SjbAoXvjkLKan43Dxap+wyKsI7AsBoE7UR7X4aFeD0wOaNqQjiez
cdhYhy/b4+1vypt7+u/vd5Q6EDx6LA8jysL4KiYj8q4P+jg47bDvNUhSWTFg31AoUUi0cbD6J12DN2Fbr7FvWT4S7h51gm1Jtorj
tUwHrNuOTiZi3Na74iQUq/MJiLfChjw6Y5gSHMpLOkjsl3AJHQDzMSMHhWIdqrSLdcAqpPOqyLjAOqwyCfZFIadyg3pAJHVeFJwo
QZ2pOP1kvo5jvwnJY8/XWPY+LA5/Hl/GJHKgKOw1i0NMBEU2BqrmsRuXY9azo1LNrAq/nVLujrli7fGF3vcKMHrv+eDP/rDzSc5E
wmEHTnLiVG7k4FSK3ILyS4FTB7syUBODHgRwgvQy2ijT4GFFSp4J5WjUkaHdmDlpZLAa5M0xxqgCkYARg87hKhKDeXqhOsEUpTaC
Jo8UKCsdrMhGeW8suirAnhd2olIxDbsNHhx6Q6qcvRK2hQJ2fRKWImOGAWq3A/TECO8dhZWHJwlbB9jHwokQtvLMQrWWMRLQhRbO
AcAEIMMqWZBT0JI+4JLBHINtiqXEUMqYd8p4zWEvrTzoaq9wRwk8AqqTJM81rDKOgc4VA4dd+qDFAPuwGIBaKlLuYedsBszViUS0
MPSoQbkJKixoZDYMQAYJZOE2eiZ54kENKmDyF0a1BfJoBQeApCMoQu7hhCHgVjASfoN+Tui2Kkk0kt+/yiFQcXRLNy10BNY5433E
TTJngi83rXWTWfZsdFTM1R5OoecODhwW94CwBElb0oyCCkhcgsiMeSzr5nauD/dYnMgIzNLszaIRdOlPAHVJZUHrsvm5sikGlhxA
66ZIAmwQQbAw2Yrzbum0KqakJQJdFyUc/+B8YqbNct2zrjfh895xHO+CDqbxhxiT5Y5Plz2txj3suCd90OvZ3jP+wNlqRofeICBD
hjKfWqc3kXfm+NI4zF46j8LV1/rh38SNsV62Rwr0aqizW7Ogtl4YlWoD7JgHZEVYzWGRBSGDPWCEAxfn2kTYbOvRFcqUWUOusQld
Orh1yWnvvJio3aRdRq6hHrPfltQ0mJW19bqoRyM8eVSvFa7lkHjhMjwRLF6Wh/2E8yzFZLrQehqT4A71dYZmpkfNCnuPN8cyXh9m
5UC0vjgUqv/V13/48hsE0FBgG1+MYtj/DX0xst165YuBOoCbX+yLMT628sUoV9e+GMIcidyffTFO6RMhDEM6MQZ8piw6YYjx5W/l
ptIGFCwoEwt8CDd/Gw+NiWZ/y6D7xggwht9jtk608ZyKw24crL/EePnnmHbzOZXLcHy1yYiJr+rGV+opWKIbf432MubG5EtfDJ1f
E2faOLJFYsiSK7G8FhxKL98U/vnnT7ulrfj79jdd27UPvtM9jy8nBCt3YahzONOuZiycXyi127xa+644xtHn4wU7SF9G+0t0rniO
rgHPmah0WfUO75Kmd0xse7cIva+m/2yAwlnEUD5S0vmVtqh8iu3hOPJ9UvJexvJGqqk/ZXxjCbqw8pMm2DNzyNNFzcs+oAHxHQaN
Pl5YNOpr62p4dzb2AUNms2KOqcce16DvQwRUQEBMJoB+xpeYduM5Rp0/51P61WKObsLB54jDJgq+ZBidX032+ee5L5OtizYv7To1
u92ueXkQkzJbzjg+9YKt3hOI1vzRUnZwbvkIEda55fTOuS2m5tHgDpoKt4JEr4y1ffu6tyk3wxjnPZrj9fhi9nYu8fco70/zFCBN
68RmmuLEcrp8kdXC1KhnV56N68pqwtsg13Xu3E1M+NsaLV5fDVQfxSnaZt5deIzNj4/xs3f4WwUXheqjQ9+q24XDFHpaXQhMK4wW
1gtKi8fU7cITCleg0ZtKH889jHnpX+fw1wdmH77gerakA4kr+VFfNubq6lRxkhMDfDQnk1hY59sY5jH6tr4sCsf9suYJaC3WixwU
k+FWoc164gVbXvI3+8LUPJ9zWoufF2lSau+qIw0sKMh95AmQp8wC8htQe7ciQ3ageVffy1XMq+/q+7Pert+nNNnu3+dXWS18vrDX
OU0o3FqlCYUrq3SruR3QovhlfqFfVha1g6LJbgsdX7hbvRNitt/nPMDTm6sOpTo5nXOdCNVINbCxZJotX51YyTzlQYAVkUy5SJp3
EWa1Nvdsmr3yNiokB9wHWk4pjmn7BsdbnbkD71ce0DkDNTqa6MYp5yP4+RL4vC1VXlYEYzkFwanvgLqVkwm+eAS01WQXv0n/Hnzr
TxNWL+yBsHoUycbf7lYWl4u2WVBXWG7yvHt8wHni4+V71to3KRbGb1aJ8bLMXClzzgHk6SmtSJmT+r4l5CS2Yp8pnL3yF841zbmW
/8sa91Ggj4DkxS68QVT1g+KQtiYRdXcCO0qrQW2bqu4Br5lZGdUPvPDtvrAOcfxcjtkm2Pxy9+XbQeo5HQMUrQuWBb9AFRANsZj3
NwVdUY167q7n8uSE89KnYAYH525Z6yvnYL94y4hfmRTRZAirpfMcDsTZIj6ndB0wUNGipa1NXTvjCH4YEM6qKV5p+7YSMo1zQj3G
BIzVdCkw/jJiOYchzMyrOt4F2oP98HACTXzxkns0YWptuPU+WuODYsuUsC3OsUx5q6e/NhgdE6/RL6y++mjETfAVSD7jJiP+sIyq
SQnja+34theaDVEzToH4SE3dywa0j1fc4P5QI1gV7/WGmJhKRA51e5rQVq+881SqkET0DMEV9AFI8J9HPFIP2sP3gaFfAnRQ+sAS
xmH5oAOcaIElfBCECj6EBFcC2uPRth4MQng6Csby24JyPmkMcyNBPnhQlB4BlutogObaacqSIw4dIIiljqQIKgjTKiSgJFXJJUzJ
iHE5Ev1+igkhwbgNNTQi5IdGx0BiwmyslpbQL6VdHKjj+VUtSQD7ipQ4kC5J4nU0+cZDR3N77GVqRR9V480DDLK3R18yUyy9aA/I
6aUxWs9bXV6yBbMBMghiOkyJJI8bNhFUeZCyUqD/rKqgnp9eQeQGClRFc7oh3AZbodMWLMsRkd4oCULLXRGCKjyDscFDvcBfUQ5+
EkYpfQSujQq4lwghYxDB0irUwrfKRVSoeYJizSb/dWtTQ+G3lhhHfTQ2Wm8FW/ertgNSBAVAuUjp5NT+3I8pVKwBJVGZBuM4Hd0c
QAkTa9ngByGNcVJaH6hNUrlSDyfQPjQVxtCx/EonAxSrSnkEWYUApRSWr4RKBlQz95EaGZmr/QIlatDMUeYLQ/GkZFTJ+f1sh0Fc
tDEyUOPc1vpVZBRfDXUHyMnu9GzYLpzqPj+HYz4FfHQn2WSo5q2HWeM/Y1bJTNQy+YSXGAgubV1x606k2rQxttbAylrrreI7tecf
IM7r9yt14gD2C1ujfP1IrtYCFP6GiG8+ORfE9//+PyzPXxY=
"""

if __name__ == "__main__":
    raise SystemExit(main())
