#!/usr/bin/env python3
"""Check the CPU backend's float32 exp and tanh (``tk_exp_f32``, ``tk_tanh_f32``, codegen/c.py)
against the correctly rounded result for every float32 input (or every ``--stride``-th bit
pattern).

    PYTHONPATH=src python3 scripts/check_exp_f32.py            # exp, all 2^32 inputs, FMA if the CPU has it
    PYTHONPATH=src python3 scripts/check_exp_f32.py --no-fma   # the code path of targets without FMA
    PYTHONPATH=src python3 scripts/check_exp_f32.py --function tanh

A C harness compiled with the C compiler (``CC``, else ``cc``) runs the function from the
generated translation unit's text on every input and compares it with f(x) rounded to float32,
taking f(x) from the C library's double ``exp`` or ``tanh`` (their errors, a few 2^-53
relative at most, cannot move a result across a float32 rounding boundary unless f(x) is
within 2^-40 of a midpoint between two float32 values); those few inputs are decided again
with mpmath at 40 digits. Prints the number of inputs, of results that are not the correctly
rounded float32 and the largest error in ulps of the result; exits 1 on any incorrectly
rounded result.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from tinykernels.codegen.c import _EXP_F32  # noqa: E402
from tinykernels.codegen.prelude import prelude  # noqa: E402

_HARNESS = r"""
#include <stdio.h>
#include <string.h>
#include <math.h>
%(prelude)s
%(exp)s
int main(int argc, char **argv) {
    uint64_t stride = argc > 1 ? strtoull(argv[1], 0, 10) : 1;
    long n = 0, wrong = 0; double maxerr = 0; float worst = 0;
    for (uint64_t v = 0; v < 0x100000000ull; v += stride) {
        float x = tk_bits_f32((uint32_t)v), y = tk_%(fn)s_f32(x);
        ++n;
        if (isnan(x)) { if (!isnan(y)) { ++wrong; printf("bad %%a %%a\n", x, y); } continue; }
        double d = %(fn)s((double)x);
        float rf = (float)d;
        if (isinf(rf) || rf == 0.0f) {
            if (y != rf || signbit(y) != signbit(rf)) { ++wrong; printf("bad %%a %%a\n", x, y); }
            continue;
        }
        /* the float32 spacing at rf on the side of d (subnormal-aware) */
        double ulp = d >= (double)rf ? (double)nextafterf(rf, INFINITY) - rf : rf - (double)nextafterf(rf, 0.0f);
        double e = fabs((double)y - d) / ulp, frac = fabs((double)rf - d) / ulp;
        if (e > maxerr) { maxerr = e; worst = x; }
        if (frac > 0.5 - 0x1p-40 * (d / ulp)) printf("near %%a %%a\n", x, y);   /* mpmath decides */
        else if (y != rf) { ++wrong; printf("bad %%a %%a\n", x, y); }
    }
    printf("summary %%ld %%ld %%.9f %%a\n", n, wrong, maxerr, worst);
    return 0;
}
"""


def _correct(x: float, fn: str):
    """The float32 nearest to fn(x) (mpmath, 40 digits)."""
    import mpmath
    import numpy as np
    with mpmath.workdps(40):
        t = getattr(mpmath, fn)(mpmath.mpf(x))
        f = np.float32(float(t))
        cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
        return float(min(cands, key=lambda c: abs(mpmath.mpf(float(c)) - t)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stride", type=int, default=1, help="check every N-th float32 bit pattern")
    p.add_argument("--function", choices=("exp", "tanh"), default="exp")
    p.add_argument("--no-fma", action="store_true", help="compile without FMA (-mno-fma on x86)")
    a = p.parse_args(argv)
    cc = os.environ.get("CC", "cc").split()
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "h.c"), os.path.join(d, "h")
        with open(src, "w") as f:
            f.write("#include <stdint.h>\n#include <stdlib.h>\n" + _HARNESS % {"prelude": prelude(["base"]), "exp": _EXP_F32, "fn": a.function})
        flags = ["-O2", "-march=native", "-ffp-contract=off", "-fno-math-errno"] + (["-mno-fma"] if a.no_fma else [])
        subprocess.run(cc + flags + ["-o", exe, src, "-lm"], check=True)
        out = subprocess.run([exe, str(a.stride)], check=True, capture_output=True, text=True).stdout
    wrong, near = 0, 0
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "near":
            near += 1
            x, y = (float.fromhex(v) for v in rest)
            if _correct(x, a.function) != y:
                wrong += 1
                print(f"not correctly rounded: {a.function}({x!r}) gave {y!r}, want {_correct(x, a.function)!r}")
        elif kind == "bad":
            wrong += 1
            print(f"not correctly rounded: {a.function}({float.fromhex(rest[0])!r}) gave {float.fromhex(rest[1])!r}")
        else:
            n, bad, maxerr, worst = rest
            total = int(n)
    print(f"{a.function}: {total} inputs ({'no FMA' if a.no_fma else 'FMA where the CPU has it'}): {wrong} not correctly "
          f"rounded, {near} decided by mpmath; largest error {float(maxerr):.6f} ulp "
          f"(at x = {float.fromhex(worst)!r})")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
