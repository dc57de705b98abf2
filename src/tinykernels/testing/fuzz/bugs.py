"""The bugs the differential fuzzer found: :data:`KNOWN_BUGS` (open; the generator avoids each
one's construct unless ``Options.exclude`` lets it through, and tests/test_fuzz.py holds a strict
xfail for it) and :data:`FIXED_BUGS` (fixed or worked around, with the fix; the generator
produces their constructs and each keeps a regression test).
"""
from __future__ import annotations

#: Bugs the fuzzer found (id -> description). The generator avoids the construct of every id in
#: ``Options.exclude`` (all of them by default) so that long runs keep finding *new* problems;
#: tests/test_fuzz.py holds a strict-xfail regression test for each.
KNOWN_BUGS: dict = {
}

#: Bugs the fuzzer found that are fixed (id -> (what it was, the fix)); each keeps a regression
#: test in tests/test_fuzz.py (marked ``# fixed: <id>``) and the generator produces its construct.
FIXED_BUGS = {
    'gen-func-param-constant': ("the generator: a @tk.func's scalar parameter counted as a run-time value, but "
                                "one that a call passes a constant folds to it in the body (docs/language.md, "
                                "since 2026-11-25), so an effect function's `E[i, 0] = int(p)` into a uint16 "
                                "array, called with tk.int64(7067838905617760850), was a Python int out of "
                                "bounds: a CompileError on the interpreter and every backend (fuzzer seed "
                                "90001520, --edges 1 --hazards 1 --calls 1 --bytes 1, a ref-error)",
        "fixed: Gen.maybe_const counts a function's scalar parameters as possibly compile-time, so such a "
        "store is an explicit cast, which wraps (testing/fuzz/gen.py)"),
    'c-weak-int32-shape-index': ("CPU32 (the WebGPU profile's reference): A.shape[k] and tk.index() values, weak "
                                 "int32 there as on WebGPU, were rendered as the C backend's int64 variables, so "
                                 "int(x) * (-8 * A.shape[0]) was computed in 64 bits where WebGPU wraps at 32 "
                                 "(fuzzer seed 88700350, --edges 1: -1.01e11 against WebGPU's 1.61e9)",
        "fixed: the C-like renderers cast a shape or index typed narrower than 64 bits to its type "
        "(codegen/clike.py); kernels of the other backends, typed int64 there, render as before"),
    'wgsl-fma-rounds-twice': ("WebGPU on lavapipe: tk.fma was the WGSL fma builtin, which rounds a * b before "
                              "adding c: fma(1 + 2^-12, 1 + 2^-12, -(1 + 2^-11)) gave 0, CPU and the interpreter "
                              "2^-24 (audit18a, porting Numba's test_fma; the fuzzer's operands rarely cancel to "
                              "the product's last bits). A first emulation was withdrawn because flash_decode at "
                              "head_dim 512 then returned 1e35 and NaN: the emulated fma is too large a loop body "
                              "for NIR to unroll the q.k product's 16 lanes, so its 64-key work items passed "
                              "lavapipe's 65535 loop back edges and left their output unwritten",
        "fixed: tk_fma emulates one rounding (codegen/wgsl.py: Boldo-Melquiond on operands scaled by their "
        "bits, the product's error from the integer product, subnormal results rounded once from the sign "
        "of the residual, no frexp/ldexp); flash_decode's WebGPU chunks keep LOOP_BUDGET // (2 * head_dim "
        "+ 40) keys (llm/attention.py), whatever the driver unrolls"),
    'interp-int-pow-negative-type': ("INTERP: an integer to a negative integer power (0 by the documented rule) took "
                                     "the type of `a * 0 + b * 0`, so a bool base made int64 where the kernel types "
                                     "int16 (NumPy's bool * weak int is int64): a later power did not wrap, CPU "
                                     "-28159, INTERP 8.2e17 (seed 17180765, found by gridstride17's fuzz slice)",
        "fixed: the fallback for NumPy's refusal returns 0 of the operands' promoted type "
        "(runtime/interp/ops.py op_pow: np.result_type(a, b))"),
    'jax-bool-times-float': ("JAX backend / raise_kernel: `b * x` with a bool `b` and a float `x` gave +0.0 for "
                             "False * -1.0 (NumPy -0.0) and 0.0 for False * inf and False * nan (NumPy nan): XLA's "
                             "simplifier rewrites convert(pred) * x to select(pred, x, 0) (audit17b's operator grid, "
                             "tests/test_operator_grid.py, bool x float32)",
        "fixed: a traced bool becomes a float through the bits of 1.0 (codegen/jaxraise.py _bool_to_float: "
        "bitcast_convert_type(uint(b) * bits(1.0))), which the simplifier does not see through"),
    'jax-scalar-constants': ("JAX backend: float scalar arguments were baked into the trace as constants, so "
                             "(1) a launch with s = -0.0 reused the trace of an earlier s = 0.0 (the cache key "
                             "compared values, -0.0 == 0.0): x / s gave +inf for -inf; (2) XLA folded a division by "
                             "the constant into a multiplication by its reciprocal: int16 7 // 1e-40 gave 7e40, "
                             "NumPy 7.000000000000001e40 (audit17b's operator grid, weak Python float arguments)",
        "fixed: float scalars are arguments of the jitted function (runtime/jaxrt.py), keyed by dtype; the other "
        "scalars' keys tell -0.0 from 0.0 (runtime/launchplan.value_key)"),
    'jax-constant-divisor': ("JAX backend / raise_kernel: a division by a constant (a literal, an int scalar "
                             "argument) was XLA's multiplication by the reciprocal, not correctly rounded: "
                             "float64 1.8e308 // 7 an ulp off, float32 3.4e38 // 100 too (audit17b's operator grid)",
        "fixed: float `//` and `%` hide their operands from the simplifier as `/` did (codegen/jaxraise.py "
        "binop: constants and 0-d divisors through lax.optimization_barrier), so XLA divides"),
    'jax-sinh-cosh': ("JAX backend / raise_kernel: math.sinh / math.cosh were XLA's, far off for large arguments: "
                      "cosh(710.0) 300 ulp, sinh(88.0) float32 12 ulp, sinh(10.0) float32 5 ulp (the fuzzer's "
                      "bound is 4; audit17b's operator grid)",
        "fixed: above 2 in magnitude (h / 2) * h -+ (1/2) / (h * h) with h = exp(|x| / 2) "
        "(codegen/jaxraise.py _sinh_cosh), within the 4 ulp of the grid's values"),
    'wgsl-pow-signed-zero': ("WebGPU: math.pow / ** of a negative base and an odd integer exponent whose result "
                             "underflows gave +0.0 (pow(-3.4e38, -3.0), pow(-1e-45, 3.0); NumPy and C99 -0.0): "
                             "the prelude's powf (msun) returned `sn * 0.0`, which the driver folds to +0.0 "
                             "(audit17b's operator grid)",
        "fixed: the zero is built from the sign bit (codegen/wgsl.py tk_signed_zero)"),
    'wgsl-int-float-compare': ("WebGPU (and Metal, any backend without float64): an int32 or uint32 compared with a "
                               "float32 was compared in float32, where NumPy compares in float64: int32 "
                               "2147483646 < float32(2**31) was False, 2147483647 == float32(2**31) True "
                               "(audit17b's operator grid)",
        "fixed: the frontend compares exactly (frontend/lower.py int_float_compare: the float32 order of "
        "float(i) and f where they differ, else i against int(f), or 'below' where f is one past the type's "
        "maximum)"),
    'weak-u64-compare-bool': ("every backend: a comparison of a Python int argument in [2**63, 2**64) (a weak "
                              "uint64) with another Python scalar gave a NumPy bool, not a Python bool, so "
                              "`True - (s7 == i)` was a CompileError ('-' is not defined for bools) only when s7 "
                              ">= 2**63 (fuzzer seed 70000488, --hazards, fuzz17: the exact mixed-sign comparison "
                              "of audit15a typed its result strong)",
        "fixed: mixed_compare gives the comparison's own result type, weak when both operands are Python "
        "scalars (frontend/lower.py)"),
    'pocl-barrier-one-branch': ("OpenCL on PoCL 3.1: in a partial group, a uniform if/else whose one branch held a "
                                "barrier followed by a store and whose other branch held none lost the stores after "
                                "the barrier (the output kept its old values; `if s > 100: o[li, 0] = 5.0 else: "
                                "tk.synchronize(); o[li, 1] = 3.0` with ndrange 3, workgroup 4); fuzzer seed "
                                "70000427 (--hazards --print --rng, fuzz17): a tk.uniform in the else of `if gl:`. "
                                "pocl-barrier-if-mask's fence barriers around the if did not prevent it, nor did a "
                                "barrier at the start or the end of both branches",
        "worked around: the OpenCL renderer writes an if/else that holds a barrier as two ifs on the "
        "condition's value (uniform, computed once), fenced by TK_POCL_BARRIER (codegen/opencl.py split_if)"),
    'gcc-abs-min-nonnegative': ("CPU with GCC 12 (-O2 and up, also under -fwrapv): abs of the minimum int32/int64 "
                                "(which wraps: abs(INT64_MIN) == INT64_MIN) of a loop-invariant value came out "
                                "non-negative where it was divided: `abs(s12) // 7` with the Python int argument "
                                "s12 = -2**63 gave +1.3e18, the interpreter -1.3e18 (fuzzer seed 90000794, --edges "
                                "--hazards --calls --bytes, fuzz20). GCC took tk_abs's `a < 0 ? (T)(0u - (U)a) : a` "
                                "for its ABS_EXPR and its value range as non-negative",
        "worked around: tk_abs is written with a sign mask, m = 0u - (a < 0), ((U)a ^ m) - m, which GCC does not "
        "take for ABS_EXPR (codegen/clike.py portable_helpers, shared by every C-like backend)"),
    'pocl-uniform-loop-item-code': ("OpenCL on PoCL 3.1: in a partial group of a workgroup one item wide in OpenCL's "
                                    "x (static workgroup (4, 1) on ndrange (2, 8): reqd_work_group_size(1, 4, 1)), an "
                                    "atomic guarded by `if (tk_active)` after a group-level (uniform) `while` whose "
                                    "body held per-item code ran once more per group: an effect function's "
                                    "accumulator counted 8 calls too many (fuzzer seed 90000533, --edges --hazards "
                                    "--calls --bytes, fuzz20: `while w < n8: ... ta44 = -2` with n8 = 0, then "
                                    "f36(...) with its atomic_add, then a barrier); the CPU and the interpreter agreed",
        "worked around: the OpenCL renderer fences a group-level loop that holds per-item code with "
        "TK_POCL_BARRIERs (codegen/opencl.py), as it fences loops holding a barrier; since fuzz22 every "
        "group-level loop of a grouped kernel (pocl-loop-barrier-partial-group)"),
    'pocl-loop-barrier-partial-group': ("OpenCL on PoCL 3.1: in a kernel that holds a barrier PoCL puts barriers of its "
                                        "own at the start and end of each innermost loop with a uniform trip count "
                                        "(its implicit-loop-barriers pass); in a partial group of a workgroup one "
                                        "item wide in OpenCL's x (reqd_work_group_size(1, 4, 1)) an `if (tk_active)` "
                                        "atomic between an explicit barrier and such a loop without per-item code ran "
                                        "once more per group: an effect function's accumulator got 19 for 17 "
                                        "(fuzzer seed 90002214, --edges --hazards --calls --bytes, fuzz22); the same "
                                        "PoCL pass as pocl-uniform-loop-item-code, whose workaround fenced only loops "
                                        "holding per-item code",
        "worked around: the OpenCL renderer fences every group-level loop of a grouped kernel with "
        "TK_POCL_BARRIERs (codegen/opencl.py fenced / group_level), so no per-item code lies between PoCL's "
        "loop barriers and ours; an `if` holding such a loop is fenced and an if/else split like one holding a "
        "barrier (holds_barrier), since a fence in one branch only lost the stores after the if/else in a "
        "partial group (pocl-barrier-one-branch; seed 91000360, --grouped 1.0 --calls 1, with the first "
        "version of this workaround)"),
    'pocl-loop-item-block-lost-store': ("OpenCL on PoCL 3.1: in a group-level loop holding a barrier, a per-item "
                                        "block (`if (tk_active)`) after the loop's break lost its stores for the "
                                        "active items of a partial group: o75[80, 2] kept its 0.5 where the "
                                        "interpreter stored 1.0 (ndrange 81, workgroup 8; fuzzer seed 94000222, "
                                        "fuzz22's mixed profile, a tk.uniform while holding a per-item while). Cut "
                                        "down by hand to `while (1) { barrier; if (wr >= 3) break; wr++; "
                                        "if (tk_active) { if (v != 0) io[p] = 5; v = 0; o[p] = 43; } }`, valid "
                                        "OpenCL C; a barrier after the block (or v volatile) stores",
        "worked around: under TK_POCL every per-item block inside a group-level loop of a grouped kernel is "
        "followed by a TK_POCL_BARRIER (codegen/opencl.py s_ItemLoop); an `if` holding such a block in a "
        "group-level loop is fenced and split like one holding a barrier (holds_barrier)"),
    'pocl-loop-two-exits-abort': ("OpenCL on PoCL 3.1: the compiler aborted the process (ParallelRegion::Verify: "
                                  "\"Incoming edges to non-entry block!\") on a group-level loop with two exits "
                                  "between the same two barriers: a tk.uniform while condition's break and a "
                                  "group-level `if s5 & 1: break`, then per-item code and a barrier (fuzzer seed "
                                  "91000615, --grouped 1.0 --calls 1, fuzz22; cut down by hand to a dozen lines of "
                                  "valid OpenCL C; a barrier before the second break compiles)",
        "worked around: under TK_POCL a group-level `if` holding a break, continue or return is fenced with "
        "TK_POCL_BARRIERs and split like one holding a barrier (codegen/opencl.py holds_barrier, "
        "_holds_group_exit), so every exit lies between barriers of its own"),
    'wgsl-const-nan-minus-itself': ("WebGPU on lavapipe: the sum or difference of two float constants whose value "
                                    "is NaN (inf - inf, NaN + -NaN: `tk.float8_e4m3fn(70000) + -math.inf`, e4m3fn "
                                    "having no inf) came out 0: the renderer wrote `tk_x(tk_nan()) + (-tk_nan())`, "
                                    "tk_x of the opaque constant collapses in NIR and e + -e folds to 0. A chained "
                                    "comparison `f(e) == <that> < f(e)` then ran its second call: an effect "
                                    "function's counter 75 for 44 (fuzzer seed 90100752, WebGPU profile with "
                                    "--edges --hazards --calls --bytes, fuzz22)",
        "fixed: a constant left operand of a float + or - is tk_y-marked like every other left operand "
        "(codegen/wgsl.py e_BinOp), which NIR cannot merge with the right one"),
    'pocl-undef-local-loop-barrier': ("OpenCL on PoCL 3.1: PoCL aborted the process ('Could not find a dominating "
                                      "alternative variable.', its work-item loop pass) compiling a grouped kernel "
                                      "whose group-level loop assigned a local in per-item code (`if (tk_active)`, "
                                      "so undefined for inactive items) that was read after the loop: `t = ll; "
                                      "for j in range(tk.uint32(0), n): t = C` (fuzzer seed 90001921, --edges "
                                      "--hazards --calls --bytes, fuzz21). The undefined value reaches the phi of a "
                                      "loop into which PoCL's implicit-loop-barriers pass has put barriers; "
                                      "initialising the local (or the one it copies) compiles. A `volatile` local "
                                      "(fuzz21's first try, withdrawn) made seed 91000400 store 4 for 1",
        "worked around: every kernel-scope local of a grouped OpenCL kernel is declared `= 0` under TK_POCL "
        "(codegen/opencl.py local_init, the TK_POCL_ZERO macro); the 0 is never read (definite assignment)"),
    'uniform-func-exit': ("uniformity analysis (every backend): `while tk.uniform(f(x[i]) > 0):` around a barrier, "
                          "or `u = tk.uniform(f(...))` then `if u: break` in a loop with a barrier, was a "
                          "CompileError ('this while condition / break depends on the work item') when `f` returned "
                          "early under a per-item condition: the early return, which only leaves the function "
                          "inlined inside the loop (in the evaluating item's guard), counted as a jump out of the "
                          "loop's iteration, so every local the loop assigned was taken as per-item (found with the "
                          "--calls generator's uniform while loops, fuzz17)",
        "fixed: uniform_vars asks _has_divergent_jump(inner_exits=False) about loops and inlined functions (a "
        "function calling one that returns early had every later local taken as per-item too): the exits of "
        "functions inlined inside the body do not count (every item reaches the function's end; what the function assigns "
        "after its exit is judged by its own FuncBlock) (passes/uniformity.py)"),
    'array-bind-flow': ("frontend (every backend): a name bound to an array (a tk.private/tk.localmem array, an "
                        "argument), a dtype or a Python object inside an if/else branch or a loop body was a "
                        "compile-time binding that ignored control flow: a tk.private made in a branch and read "
                        "after it gave C that did not compile ('a__pm1' undeclared) where Python raises "
                        "UnboundLocalError (fuzzer seed 71000041, --calls, fuzz17), and an argument rebound in a "
                        "branch (`a = x; if c: a = y; o[i] = a[i]`) silently read the array bound last on every "
                        "path on the CPU; an array rebound in a loop body was the first one in every iteration",
        "fixed: the lowering merges the bindings of an if's branches (the else branch starts from those before "
        "the if) and of a loop's body with those before it; a name the paths bind to different compile-time "
        "values becomes a FlowBound, whose read is a located CompileError naming it, and one rebound in a loop "
        "body is a CompileError (frontend/lower.py flow_merge, loop_body)"),
    'ad-adjoint-size': ("autodiff (--grad, CPU): no result in 120 s for fuzzer seeds 48100035, 48100047, "
                        "48100048 (ad16): statements of nested pow/atan2/products whose adjoint grew quadratically "
                        "in the statement's length, each partial re-rendering the primal operands below it (the "
                        "zero-adjoint guards nested a select per level around every term, and a nested min/max "
                        "wrote each operand's chain rule twice, doubling per level); seed 48100035's reproducer "
                        "gave no result in 300 s",
        "fixed: every primal value a partial needs is a named local of the replay, computed once with the float "
        "operations below it (passes/primal_values.py, both modes), one zero-adjoint flag per guarded operation "
        "(_Reverse.guarded/conjoin), min/max's chain rule written once per operand (_Reverse.bp_minmax): "
        "linear growth; seed 48100035 runs in 77 s on the loaded machine, its statement's adjoint 21.8 -> 10.7 KB"),
    'wgsl-repeated-operand': ("WebGPU: no result in 200 s for fuzzer seed 46400086 (WebGPU profile, fuzz15): "
                              "`np.uint32(tk.clamp(x // y, 0.0, 256.0))` with the operand once more in an "
                              "`if X == X` - not a run-time hang but lavapipe (LLVM) compiling the shader for "
                              "minutes: the WGSL renderer repeated an operand's text wherever it used it twice "
                              "(min/max as select(a, b, b < a), clamp as min(max()), float -> u32 as select(u32(a), "
                              "bitcast<u32>(i32(a)), a < 0)), so the text of `x // y` appeared 12 times per clamp and "
                              "conversion, 39 times in the kernel, each an inlined tk_floordiv_f32 with tk_fmod's "
                              "four loops (12 copies alone took 22 s to compile)",
        "fixed: the WGSL renderer binds an operand it uses more than once to a `let` unless it is a name or "
        "literal (codegen/wgsl.py Renderer.once, used by min/max/clamp and the float -> u32 conversion), so each "
        "subexpression is computed and compiled once; the seed runs in 1.6 s (wgpu15)"),
    'wgsl-trig-range': ("WebGPU: math.sin/cos/tan of a float32 beyond about 2**25 in magnitude were wrong on "
                        "lavapipe (WGSL's builtins, whose range reduction is exact to about 3.3e7: sin(1e8) off "
                        "by 7e-4, sin/cos/tan(1e9), (1e10), (1e30) gave +-1; tan(1e10) was -1.0 against -0.558, "
                        "fuzzer seed 46400006, WebGPU profile, fuzz15); the C, OpenCL and CUDA backends reduce "
                        "exactly",
        "fixed: the WGSL prelude's tk_sin/tk_cos/tk_tan call the builtins directly below |x| = 8192 and beyond "
        "reduce exactly first (tk_rem_pio2: Payne-Hanek in u32 arithmetic with 224 bits of 2/pi, the fraction "
        "times pi/2 in three float pieces), so the builtins see |r| <= pi/4 and pick the quadrant "
        "(codegen/wgsl.py, wgpu15); the WebGPU profile takes sin/cos/tan of any argument again (it wrapped them "
        "in math.fmod(x, 3.0))"),
    'wgsl-trig-zeros': ("WebGPU: sin/cos/tan next to a zero of sin or cos (x near k pi/2, |x| < 8192) lost "
                        "their relative accuracy: `math.cos(3 * math.pi / 2)` 6 ulp off on lavapipe (the "
                        "fuzzer's limit is 4), the floats next to k pi/2 up to 688 ulp (sin, cos) and 985 "
                        "(tan): below 8192 the prelude called the builtins, whose reduction keeps about 32 "
                        "bits of pi/2",
        "fixed: the exact reduction (tk_rem_pio2) runs from |x| = 25/32 on, the builtins only see "
        "|r| <= pi/4 (codegen/wgsl.py _TRIG_REDUCE_FROM, bugs16); tests/test_webgpu.py checks the floats "
        "around every k pi/2 below 8300"),
    'wgsl-int-local-zero': ("WebGPU (lavapipe's NIR): an integer or bool local holding a constant (`v = 0`, "
                            "`v = ~True`), converted to float where it meets a float (`x *= v`), was propagated "
                            "through the conversion and `x * 0.0` folded to 0.0 (NaN, inf and negative x; fuzzer "
                            "seeds 46400370 `got 0.0 want nan` and 46400384 `got 0.0 want -0.0`, found after "
                            "wgsl-const-tree-zero's fix, which covered float expressions only)",
        "fixed: the WGSL renderer makes every int -> float conversion opaque (`tk_x(f32(i))`, one OR; "
        "codegen/wgsl.py cast_str)"),
    'wgsl-xor-mark-cancels': ("WebGPU (lavapipe's NIR): the left operand of a float - is marked tk_y (bits XOR the "
                              "opaque zero tk_z); where that operand folds to the opaque zero itself "
                              "(`~True - tk.float8_e4m3fn(0.0) / 1`: select(bitcast<f32>(tk_z), 1.0, false)), "
                              "tk_z ^ tk_z cancelled to a literal +0.0 and NIR folded 0.0 - e to -e: -0.0 where "
                              "NumPy gives +0.0 (fuzzer seed 88701127, found by fma19)",
        "fixed: tk_y XORs tk_z << 1, which no operand built from tk_z cancels (codegen/wgsl.py)"),
    'wgsl-const-tree-zero': ("WebGPU (naga + lavapipe's NIR): a float computed from constants only, not a literal "
                             "(`np.float16(True ** tk.int32(-820547046))`, an integer power with a negative exponent, "
                             "is 0; `tk.float32(tk.int32(1) ** -8)` in a local), was folded to a constant 0.0 by "
                             "the drivers, and NIR then folded `x * 0.0` to 0.0 (NaN, inf and negative x) and "
                             "`x + 0.0` to x (-0.0), as for the literal zeros wgsl-zero-const-fold made opaque "
                             "(fuzzer seeds 44001178 and 44001270, `got 0.0 want nan` / `want -0.0`)",
        "fixed: the WGSL renderer makes every float expression built from constants only opaque where it is "
        "made (`tk_x(...)` around the largest such subtree; codegen/wgsl.py expr, _const_tree), so the value "
        "stays opaque in a local too; a literal keeps the existing rule (zeros opaque)"),
    'uniform-side-effects': ("a side effect inside tk.uniform's argument (a @tk.func that calls tk.print, stores "
                             "or updates atomically) ran once per work item on the CPU, OpenCL and WebGPU (8 lines "
                             "for 8 items in groups of 4) and once per group on the interpreter, which evaluates "
                             "the argument in the group's first running work item as language.md says (fuzzer "
                             "seed 44000644, tk.print in functions, wgpu11): the inlined function's statements "
                             "were emitted as ordinary item-level statements before the uniform",
        "fixed: the frontend guards the statements a tk.uniform argument emits with `if local index == "
        "tk.uniform(local index)`, so only the evaluating item (the first running one, on every backend) runs "
        "them and the uniform reads its result (frontend/intrinsics.py _in_evaluating_item); an argument that "
        "reaches a barrier, or a collective / tk.uniform under a function's control flow or beside side effects, "
        "is a CompileError since bugs16 (it was left unguarded; a collective or tk.uniform without side effects "
        "runs in every item)"),
    'ifexp-side-effects': ("a conditional expression `a if c else b` (and the right operand of `and`/`or`) ran the "
                           "statements of both sides on the compiled backends: a @tk.func's stores, prints or "
                           "guarded loads in the side not chosen happened anyway (fuzzer seed 44000733, --print)",
        "fixed: the frontend lowers a side that emits statements apart and makes the expression an if "
        "statement into a temporary (frontend/lower.py e_IfExp, e_BoolOp)"),
    'chain-side-effects': ("a chained comparison `a < b < c` evaluated `c` even where `a < b` is False on the "
                           "compiled backends: a @tk.func's stores, atomics or prints in `c` ran anyway (the "
                           "interpreter short-circuits, as Python does; found by audit15a, the class of "
                           "ifexp-side-effects)",
        "fixed: the frontend lowers each later comparator apart and runs its statements under an if on the "
        "chain so far, the middle operand read once before them (frontend/lower.py e_Compare)"),
    'wgsl-narrow-self-cast': ("WebGPU: a cast to float16/bfloat16/fp8 of a value already of that type "
                              "(tk.float16(h * 3.0) with float16 h, A.dtype(...), an annotated local) did not "
                              "round: the WGSL renderer took it for a no-op, but the narrow-typed value is an "
                              "unrounded f32 (found by audit15a; 0.3303 * 3 is a float16 tie)",
        "fixed: cast_str converts through the narrow type whenever the target is storage-only, even from "
        "the same type (codegen/wgsl.py)"),
    'gcc-slp-permute': ("CPU: GCC 12.2 -O3 -march=native on an AVX-512 CPU compiled some constant permutations "
                        "of eight doubles (e.g. {1, 1, 7, 6, 5, 5, 6, 7}: 128-bit lanes from source lanes 0, 2|3, 2, 3) "
                        "to an in-lane vpermilpd: wrong lanes. The vectorizers make them from reads of a small array "
                        "at permuted constant indices: a barrier kernel's unrolled item loop `b[l] = a[(l + 1) % 8] * "
                        "a[l]; b[l] += sin(a[7 - l])` over local memory (found by audit16a as a wrong gradient) and "
                        "flat kernels' loops over tk.private arrays (slpfuzz16, scripts/slp_perm_fuzz.py)",
        "worked around: the compiler probes (runtime/compiler.py _NATIVE_PROBES permute-v8df, slp-permute) run "
        "those shapes at the first use and, where they come out wrong, kernels that compute with doubles and "
        "access an array at an index that may not follow the vector lanes' order (passes/permuted_access.py, "
        "feature 'permuted-doubles'; f64narrow17: stencils and other unit-stride kernels keep 512-bit vectors) "
        "are compiled with -mprefer-vector-width=256 (no eight-double vectors; -fno-tree-slp-vectorize does not "
        "fix the flat shape, loop-aware SLP makes the same permutation)"),
    # found by the autodiff mode (--grad, gradgen.py); regression tests in tests/test_fuzz_grad.py
    'ad-unused-scalar-partial': ("reverse mode: a differentiated float scalar that nothing differentiable "
                                 "flows into (unused, or only compared) got garbage as its gradient on the "
                                 "interpreter and the device backends (3.0, 5e-324: the partial-sums scratch "
                                 "array, np.empty / tk.empty, was never written; seed 45000003)",
                                 "the reverse pass gives every differentiated scalar an accumulator, so every "
                                 "item (strip, group) writes its partial, 0 where nothing flows "
                                 "(passes/autodiff.py _Reverse.build)"),
    'ad-private-in-block': ("reverse mode: a tk.private array declared inside an `if` or a loop body: the "
                            "reverse sweep read it outside that block, and the C compiler rejected the "
                            "adjoint ('a__pm1' undeclared; seed 45000005)",
                            "the adjoint declares the primal private/local arrays at its top "
                            "(passes/autodiff.py _Reverse.fwd)"),
    'ad-dead-value-nan': ("reverse mode: a local no output depends on (dead, only compared, only cast to an "
                          "integer, a discarded @tk.func result, a loop's unread accumulator) still got an adjoint: "
                          "its zero adjoint times its infinite partial (exp(1000 * x) at x = 1) made the input's "
                          "gradient NaN on INTERP, CPU and CL, forward mode and finite differences finite "
                          "(seed 45000047)",
                          "an activity analysis: only values that depend on a differentiated input and that a "
                          "store/atomic into a shadowed array depends on get adjoint code "
                          "(passes/activity.py useful_values, passes/autodiff.py _Reverse)"),
    'ad-zero-adjoint-inf-partial': ("reverse mode: a live local whose adjoint is exactly 0 on the path taken "
                                    "(the unchosen operand of a select/min/max/if written as its own "
                                    "statement) multiplied that 0 by its infinite partial: NaN",
                                    "the reverse sweep skips an assignment's chain rule where its adjoint is "
                                    "exactly 0, unless the value is linear (sums, selects) "
                                    "(passes/autodiff.py _Reverse.bp_nonzero)"),
    'ad-saturated-inf-partial': ("reverse and forward mode: an operand that overflows to inf inside an "
                                 "expression whose consumer saturates (tanh(pow(a, b)), tanh' = 0): reverse mode "
                                 "multiplied the zero adjoint by pow's infinite partial, forward mode the infinite "
                                 "tangent by tanh's zero partial: NaN on INTERP and CPU where finite differences "
                                 "are finite (seed 45100061)",
                                 "every operation's chain rule contributes nothing where its adjoint is exactly 0 "
                                 "(passes/autodiff.py _Reverse.bp, guarded); a tangent times a partial is 0 "
                                 "where either is exactly 0 (_Tangent.times)"),
    'ad-atan2-hypot-inf-partial': ("reverse and forward mode: atan2's partials (x / h) / h and hypot's p / h "
                                   "(h = hypot) are inf / inf where an argument is infinite (an overflowed "
                                   "pow(a, v) + 1.0 as atan2's x): NaN gradients on INTERP and CPU where finite "
                                   "differences are finite (gradgen seed 85000131: reverse NaN, finite difference "
                                   "258; jax.vjp/jvp of the raised kernel NaN there too)",
                                   "their limits: both atan2 partials are 0 where h is infinite (they are at most "
                                   "1 / h), hypot's is sign(p) where p alone is infinite; NaN stays at "
                                   "hypot(inf, inf) (passes/autodiff.py bp_call, _unless_inf, _hypot_partial)"),
    'ad-saturated-tanh-partial': ("reverse and forward mode: tanh' was 1 - tanh(x)**2 and sigmoid' s (1 - s), "
                                  "which cancel where the function saturates (relative error eps / (1 - |tanh|)); "
                                  "where tanh rounds to 1 on one backend and to 1 - 1 ulp on another (x = 19) the "
                                  "gradients were 0 and 2e-16 where it is 1.25e-16 (fuzz seed 89000520, --grad "
                                  "--grad-local 0.3, CL against INTERP: y1's gradient 0.0 against 2.6e-13, every "
                                  "item saturated)",
                                  "tanh' = 4 t / (1 + t)**2 with t = exp(-2 |x|), sigmoid' = t / (1 + t)**2 with t = "
                                  "exp(-|x|): accurate to a few ulps everywhere, 0 only at +-inf "
                                  "(passes/autodiff.py unary_partial)"),
    'pocl-log1p-tiny': ("OpenCL on PoCL 3.1: log1p of tiny arguments, float and double: +0.0 for +-the smallest "
                        "subnormal (log1p(x) is x there), 5.6e-45 for 4.2e-45, an ulp off near the smallest normal",
                        "under TK_POCL, tk_log1p returns x below 2**-25 (float) / 2**-54 (double), where log1p(x) "
                        "rounds to x; above, PoCL's log1p is within an ulp of NumPy's in every binade "
                        "(codegen/opencl.py _pocl_workarounds; tests/test_opencl.py)"),
    'pocl-printf-double': ("OpenCL on PoCL 3.1: tk.print of a float64 or Python float printed it rounded to float32: "
                           "1e-40 as 9.99995e-41, 1e300 as inf, 1e-310 as 0 (fuzzer seed 49910003, --hazards --print, "
                           "fuzz16: `tk.print('P38', li, 1e-40)`); PoCL's printf reads a double passed for %g as a "
                           "float",
                           "the OpenCL renderer formats a double with TK_PRINT_G, `\"%lg\"` under TK_POCL (C99: the l "
                           "does nothing for g, and PoCL then reads the double), `\"%g\"` elsewhere "
                           "(codegen/opencl.py _PRINT_G)"),
    'pocl-const-pow-one-nan': ("OpenCL on PoCL 3.1: pow of folded constant NaNs: pow(1, NaN) dropped every store of "
                               "the kernel (`math.pow(tk.float8_e5m2(1.0), f(...))` with f returning math.nan, "
                               "seed 20000789 of the 2000-kernel OpenCL run), pow(NaN, NaN) gave 0, and "
                               "`math.pow(tk.float8_e4m3fn(math.inf), ...)` (NaN: e4m3fn has no inf) hung PoCL "
                               "(seed 20000096)",
                               "under TK_POCL, tk_pow answers pow(1, y) and pow(x, 0) with 1 and a NaN operand "
                               "with NaN without calling pow (codegen/opencl.py)"),
    'pocl-const-rint-int64': ("OpenCL on PoCL 3.1: rint() of a value LLVM folds to a constant of at least 2**23 "
                              "(float) / 2**52 (double) broke the kernel, whatever used the result: "
                              "`round(tk.clamp(1e10, 4.6e18, 4.6e18))` dropped its stores (seeds 2277 and 2874 of "
                              "the 3000-kernel OpenCL run), `round(tk.clamp(1e300, ...))` beside a float "
                              "atomic_min hung (seed 700034 with --no-narrow; seed 1642 of that run, clamp(inf, ...), "
                              "too), `rint(3e9f) > 0` dropped stores",
        "worked around for every form in the OpenCL code: under TK_POCL, tk_rint returns values that are "
        "integral by magnitude (|x| >= 2**23 / 2**52) unchanged and calls rint only below, so the driver "
        "never folds rint of such a constant (codegen/opencl.py _pocl_workarounds)"),
    'pocl-round-narrow-const': ("OpenCL on PoCL 3.1: `round(tk.bfloat16(1e10))` (a bf16 cast of a constant, "
                                "converted at run time) hit the same PoCL bug as pocl-round-const-int64: the kernel "
                                "was partly dropped (garbage in the outputs)",
        "worked around: with ml_dtypes installed the frontend folds bf16/fp8 casts of constants (rounded as the "
        "generated code rounds: float32 first), so round() of them folds too; the interpreter treats those casts "
        "as constants (frontend/intrinsics.py fold_cast, interp_transform.py static)"),
    'pocl-round-const-int64': ("OpenCL on PoCL 3.1: `round(tk.float32(1e10))` (a constant, rendered as "
                               "(long)rint(1e10f)) made PoCL drop the whole kernel: nothing was written",
        "worked around: round() of a constant folds in the frontend (frontend/intrinsics.py _round), so the "
        "driver never sees the constant conversion; the interpreter treats round(constant) as a constant too"),
    'pocl-barrier-if-mask': ("OpenCL on PoCL 3.1: in a uniform `if` that holds a barrier, work items masked off "
                             "(beyond the ndrange in a partial group) ran an atomic guarded by `if (tk_active)` "
                             "(even by `if (tk_p0 < tk_n0)`): acc -512 instead of -62 for 31 items in a group of 256",
        "worked around: under TK_POCL a barrier before and after every group-level if/for/while that holds a "
        "barrier (codegen/opencl.py holds_barrier)"),
    'cl-const-nan-round': ("OpenCL on PoCL 3.1: floor, ceil and trunc of a compile-time NaN folded to 0.0 "
                           "(`math.trunc(math.nan)`, `math.floor(tk.float8_e4m3fn(65504.0))`)",
        "worked around: floor, ceil, trunc, rint and round join the NaN-passing wrappers under TK_POCL "
        "(codegen/opencl.py _NAN_FOLDED)"),
    'func-exit-barrier-loop': ("a @tk.func with an early return under a per-item condition, called in a loop that "
                               "holds tk.synchronize(), crashed the compiler (AttributeError in "
                               "passes/uniformity.py: the check counted the return as a divergent loop exit but "
                               "its error path looked only for break/continue)",
        "fixed: an early return counts only when its function holds a barrier (it skips the rest of that "
        "function, not the loop), and then the error names the return (passes/uniformity.py)"),
    'gcc-zero-minus-int': ("`0.0 - float(i)` with i == 0 gave -0.0 on the CPU: GCC 12 folds `0.0 - (double)i` to "
                           "`-(double)i` at every optimisation level (a GCC bug: the fold is wrong for +0.0)",
        "worked around: the C-like renderers emit `+0.0 - x` as tk_zsub (x == 0 ? 0 : -x), which GCC keeps "
        "(codegen/clike.py); -frounding-math would also do, but stops GCC vectorizing sqrt and division"),
    'gcc-folded-zero-minus': ("CPU (GCC 12): `(io[i] != io[i]) - tk.float32(io[i])` stored -0.0 for io[i] == 0 "
                              "(NumPy +0.0; fuzzer seed 88301372, --fastmath 0.3 --rng 1 --print 1, fuzz19): GCC "
                              "folds `x != x` to 0 and then, within the same C expression, `0.0 - (float)u` to "
                              "`-(float)u`, gcc-zero-minus-int's fold with a zero only GCC sees. Its folder takes "
                              "a conversion from an integer, fabs or a ?: of constants for never -0.0, and "
                              "`0.0 + -e` is `0.0 - e` to it",
        "worked around: the C-like renderers write a float `a - e` and `a + -e` (also `-e + a`) with such an `e` "
        "as tk_fsub(a, e), an inline function whose body GCC folds only after `e` is a plain SSA value "
        "(codegen/clike.py gcc_never_minus_zero)"),
    'fma-narrow-zero': ("tk.fma on fp8/float16 values whose exact result is 0 returned a float32 on the "
                        "interpreter, so a Python float meeting it later was not rounded to the narrow type "
                        "(`math.atan2(tk.fma(0.0, 3.0, tk.float8_e4m3fn(1e-10)), 1e300)`: 0.0 vs NaN)",
        "fixed: the interpreter's fma returns the promoted narrow type on every path (interp_ops.fma)"),
    'narrow-const-pow': ("`np.float16(-math.inf) ** 0.5`: the compiler neither folded a narrow-float constant "
                         "base nor took the constant-exponent fast path (pow: inf), the interpreter took it "
                         "(sqrt: NaN)",
        "fixed: a constant exponent takes the fast path when the base is a narrow-float constant "
        "(frontend/lower.py binop)"),
    'const-float-floordiv': ("`(False // -3.75) ** 0.5`: the compiler did not fold `//` and `%` of Python floats, so "
                             "the power had a run-time base and took the sqrt fast path (-0.0), while the "
                             "interpreter folded the whole constant expression as Python does (0.0)",
        "fixed: the compiler folds Python-float `//` and `%` too (frontend/intrinsics.py fold_binop), as the "
        "interpreter does"),
    'pocl-collective-loop': ("OpenCL on PoCL 3.1 (LLVM 15): a tk.group_reduce / tk.group_scan inside a for or while loop followed by any statement after the loop aborts the Python process at the first launch (pocl::ParallelRegion::Verify(): Assertion `Incoming edges to non-entry block!`): `for w in range(2): o[i, 1] = tk.group_reduce(s, 'add')` then `o[i, 0] = 7`",
        'worked around: for PoCL the OpenCL code has a barrier right after every loop that holds a barrier, collective or tk.uniform (codegen/opencl.py loop_exit_barrier); the loop is uniform, so every item reaches it'),
    'const-base-pow': ("`tk.float32(-0.0) ** 0.5` (constant base and exponent) is folded by the compiler with "
                       "NumPy's fast path (sqrt: -0.0) but used pow() on the interpreter (0.0)",
        "fixed: the interpreter's fold of a NumPy-typed `**` takes the constant-exponent fast paths (interp_ops.fold)"),
    'fma-inf-addend': ("tk.fma(a, b, c) with finite a, b whose product overflows float64 and an infinite c "
                       "gave NaN on the interpreter (inf + -inf) where fma's exact product plus -inf is -inf "
                       "(CPU): `tk.fma(s, s, -3.75 / 0)` with s = -1.8e308",
        'fixed: the interpreter returns c for a finite product plus an infinite or NaN c (interp_ops.fma)'),
    'weak-bool': ('comparisons of two Python scalars, `not`, `and`, `or`, `bool()` and Python bool values are Python bools (weak) on the interpreter but strong np.bool_ in the compiler (and a weak bool + weak bool is logical or there): `(i < 3) + (i < 5)` is 2 on INTERP, 1 on CPU, and `(i < 3) * 2 + x_int8` is int8 on INTERP but int64 on CPU',
        'fixed: comparisons of two weak operands (and math.isnan & co. of a Python float) give a weak bool in the compiler too, and Python bools compute as ints there (True + True == 2); `not`, `and`, `or`, `bool()` and chained comparisons give a strong bool on both (frontend/lower.py compare, interp_transform.py)'),
    'weak-int-fold': ('the compiler folds constant Python-int expressions exactly (arbitrary precision) where the language (and the interpreter) wraps every weak int operation to int64: `(2**62 * 4) // 8` is 2**61 on CPU, 0 on INTERP; `1 << 2**62` makes the compiler raise a bare MemoryError',
        "fixed: the interpreter evaluates what the compiler folds (literals, module-level numbers, constexprs and operators on them: interp_transform static) with Python's exact integer arithmetic (interp_ops.fold), so `(2**62 * 4) // 8` is 2**61 on both; run-time weak ints wrap in int64 on both"),
    'pow-fastpath': ("`x ** 2`, `x ** -1` and `x ** 0.5` on floats are x*x, 1/x and sqrt(x) in the compiler (NumPy's array fast paths, as language.md says) but C pow() on the interpreter (NumPy scalar power): about 1 in 2000 results differ in the last bit (`io[i] **= -1` with io = -0.2335961... gives -4.280892020642491 vs ...492), and x ** 0.5 differs for -0.0 (-0.0 vs 0.0) and -inf (nan vs inf)",
        "fixed: the interpreter takes NumPy's scalar-exponent fast paths (x*x, 1/x, sqrt) exactly where the compiler does, for a compile-time constant exponent (interp_transform static, interp_ops.op_powc); a run-time exponent is pow() on both, as NumPy's array ** array"),
    'f16-scalar-arg': ('a np.float16 scalar kernel argument computes as a NumPy float16 on the interpreter (rounded after every operation) instead of in float32 rounded on store: `o_f64[i] = x_u8[i] - h` with h = np.float16(-59.4) gives 77.375 on INTERP, 77.40625 on CPU',
        'fixed: the interpreter turns float16/bfloat16/fp8 scalar arguments into float32-computing narrow values (interpreter._scalar)'),
    'fp8-minmax-identity': ("tk.group_reduce / tk.group_scan with op 'min' or 'max' on float8_e4m3fn give NaN on the interpreter: the identity (+-inf) is not representable in e4m3fn (no infinities) and becomes NaN, which then wins every comparison; CPU and CL are right",
        "fixed: the interpreter's min/max identity of a narrow float is +-inf in float32 (interp_ops._identity)"),
    'ndrange-in-for': ("the C renderer names a for loop's trip count `tk_n<k>` (CLikeRenderer.s_For: self.fresh('n')), which shadows the ndrange extent `tk_n2`: `tk.ndrange()[2]` inside the first for loop of a kernel reads the loop's trip count (CPU and CL); in 3-D kernels with barriers / local memory a for loop run at group level also checks the per-item mask `tk_p2 < tk_n2` and computes the linear index with it, so items are skipped or get the wrong tk.index()",
        'fixed: loop trip counts get their own names (codegen/clike.py s_For)'),
    'tuple-swap': ("tuple assignment assigns element by element in the compiler: `a, b = b, a` makes both equal to the old b (frontend/lower.py s_Assign/assign_target read the right-hand side's variables after the first target was already stored); the interpreter swaps",
        'fixed: tuple assignment evaluates the whole right-hand side first (frontend/lower.py)'),
    'narrow-self-cast': ('an explicit cast to float16 / bfloat16 / fp8 of a value that already has that type (an unrounded float32 intermediate such as x_f16 * y_f16) is dropped by the compiler (frontend/lower.py Lowerer.cast returns e when e.ty == t), so `tk.float16(x * x)` and `v: tk.float16 = x * x` do not round (CPU and CL); the interpreter rounds, as language.md says',
        'fixed: an explicit narrow cast of a narrow intermediate rounds (frontend/lower.py cast)'),
    'fma-overflow': ("tk.fma on float64 / Python floats whose exact result overflows raises OverflowError ('integer division result too large for a float') on the interpreter (interp_ops.fma converts the exact Fraction with float()); CPU gives inf",
        "fixed: the interpreter's exact fma rounds an overflowing result to +-inf (interp_ops._to_float)"),
    'pow-neg-inf': ("pow(-inf, y) for y > 0 not an integer (math.pow, ** with a run-time exponent, float16/bf16 "
                    "operands) gave NaN on the interpreter, +inf on the C backends (NumPy's scalar power differs "
                    "from C99 there: `math.pow(C // -0.0, x)`, fuzz seed 34003700)",
        "fixed: the interpreter's pow and ** answer pow(-inf, y) as C99 Annex F and math.pow do "
        "(interp/ops.py _neg_inf_pow)"),
    'pow-neg-zero': ("math.pow(-0.0, 0.5) (a run-time exponent; float16/bf16 operands too) gave -0.0 on the "
                     "interpreter, +0.0 on the C backends: NumPy's scalar power takes sqrt(-0) = -0 for y = 0.5 "
                     "where C99 says pow(-0, y) = +0 for y > 0 not an odd integer (audit6's edge-value sweep)",
        "fixed: the interpreter's pow and ** answer pow(-0, y) as C99 Annex F and math.pow do "
        "(interp/ops.py _neg_inf_pow)"),
    'fma-f32-max': ("tk.fma on float32 whose exact result lies just beyond FLT_MAX (e.g. fma(-FLT_MAX, -1, 0.75)) raises OverflowError ('cannot convert Infinity to integer ratio') on the interpreter: interp_ops._round_f32 took the exact value of its neighbour inf (fuzz seed 33004734)",
        "fixed: _round_f32 measures the distance to inf as to 2**128, so a result rounds to FLT_MAX or inf as IEEE 754 says (interp_ops._f32_value)"),
    'func-return-grouped': ("in a kernel with barriers or local memory (the group-by-group code shape), a `return` before the end of a @tk.func becomes a `goto` out of the per-item loop: only the group's first work item gets the function's results, the others read uninitialised values (CPU; nondeterministic output)",
        "fixed: a @tk.func's early return stays inside the per-item loop (passes/groups.py)"),
    'cl-const-nan': ('OpenCL on PoCL 3.1: operations the driver folds at compile time go wrong when a constant is NaN or infinite: exp, expm1, sinh, tanh and tk.sigmoid of a constant NaN (`math.tanh(tk.float32(math.nan))`) give 0.0, `tk.float8_e4m3fn(7) // 1e10` (7 // NaN) gives 0.0, `v = tk.float8_e5m2(1e10); v // (v / v)` gives -0.0 instead of NaN; the same operations on values loaded at run time are right',
        'worked around: for PoCL the OpenCL code passes NaN through exp/expm1/exp2/exp10/sinh/cosh/tanh and float // and % before the driver can fold them (codegen/opencl.py _nan_guards, prelude floatdiv under TK_POCL)'),
    'const-weak-mutation': ('a tk.constexpr Python int used once with a strong int64 operand (`tk.int64(5) + C`) becomes a strong int64 for the rest of the kernel: frontend/lower.py Lowerer.cast changes the type of the shared N.Const in place (`e.ty = t`), so `(x_int8 + C) * 100` no longer wraps in int8 (CPU and CL give 400 where NumPy and INTERP give -112)',
        'fixed: Lowerer.cast returns a new constant instead of retyping a shared one'),
    'uniform-after-return': ("tk.uniform(v) after an item-level `return` in a grouped kernel: the interpreter "
                             "evaluates it in the group's first work item still running, CPU, OpenCL, CUDA and "
                             "WebGPU in work item 0 even when that item had returned (its stale `v`): "
                             "`if lid == 0: return` then `u = tk.uniform(x[i])` gives x[1] on INTERP, x[0] on "
                             "CPU/CL (fuzzer seed 5200247 with Options(grouped=1.0))",
        "fixed: in kernels with item-level returns the first running work item (in the ndrange, not returned) "
        "evaluates tk.uniform on every backend (codegen/c.py uniform_first_live, codegen/gpu.py and wgsl.py "
        "s_Assign); language.md says so"),
    'fp8-int-operand': ('fp8 (float8_e4m3fn / float8_e5m2) combined with an int8/uint8 value: the compiler rounds the integer operand to the fp8 type (the promoted type), the interpreter converts it to float32 exactly: `x_fp8 + y_int8` with y = 17 gives 17 vs 18',
        'fixed: the interpreter converts an int8/uint8 operand to the promoted fp8 type, as NumPy and the compiler do (interp_ops._nbin)'),
    'signed-nan-const': ('a folded constant NaN lost its sign in C, OpenCL, CUDA, HIP, Metal and WGSL: '
                         '`math.copysign(tk.float8_e4m3fn(2.0), -math.inf)` (-inf rounds to float8_e4m3fn as '
                         '-NaN, the type has no infinity) rendered copysignf(2, NAN) and gave +2 against the '
                         "interpreter's -2 (fuzzer seed 37304320, audit8's run)",
        'fixed: the renderers keep the sign bit of a constant NaN (-NAN; (-tk_nan()) in WGSL)'),
    'wgsl-zero-const-fold': ("WebGPU on lavapipe: a float multiplied by a constant 0.0 gave 0.0 where it is "
                             "NaN or infinite (`tk.float8_e4m3fn(1000) * tk.float8_e4m3fn(-0.0)`, NaN * -0.0, "
                             "and `tk.float16(1e6) * tk.float16(-0.0)`, inf * -0.0): the operand went through "
                             "the opaque tk_x but the literal `-0.0f` did not, and Mesa's NIR folds "
                             "`x * 0.0` to 0.0 (and `x + 0.0` to x, wrong for -0.0) (fuzzer seed 44001016, "
                             "the first WebGPU profile run)",
        "fixed: WGSL renders a float constant 0.0 / -0.0 as bitcast<f32>(tk_z) / bitcast<f32>(0x80000000u | tk_z), "
        "opaque like tk_nan() (codegen/wgsl.py const)"),
    'wgsl-sub-self-fold': ("WebGPU on lavapipe: `e - e` and `e + -e` of a compound float expression (or of two "
                           "variables holding the same expression) gave 0.0 where e is inf or NaN: the renderer's "
                           "guard tk_x(tk_x(e)) - tk_x(e) collapses (NIR: (a | z) | z is a | z), CSE merges equal "
                           "values, and NIR folds fsub(a, a) and fadd(a, -a) to 0 "
                           "(`x //= (v * -inf) - (v * -inf)` gave inf for NaN; fuzzer seed 44002001)",
        "fixed: the left operand of every float + and - goes through tk_y (XOR with the zero tk_z), which NIR "
        "cannot merge with the right operand (codegen/wgsl.py e_BinOp)"),
    'wgsl-const-wrap-shift': ("WebGPU: an int8/int16 operation on constants whose result leaves the type "
                              "(`tk.int8(127) << tk.int8(3)`, `(-1) >> (127 << min(tk.int8(3), True))`) failed "
                              "to compile: the sign extension `(x << 24u) >> 24u` was a constant expression "
                              "for naga, which rejects a << that overflows i32 (fuzzer seed 44001044)",
        "fixed: the sign extension ORs tk_z into the value first, so naga does not evaluate it (codegen/wgsl.py wrap)"),
    'wgsl-const-div-zero': ("WebGPU on lavapipe: `x /= C` with a constexpr `C = False` gave NaN where x / 0 is "
                            "+-inf: the bool's cast rendered `select(0.0f, 1.0f, false)`, a constant naga folds "
                            "to 0.0, and NIR folded the division by the constant 0.0 to NaN (fuzzer seed 44001113)",
        "fixed: every float divisor goes through tk_x, and the bool-to-float cast uses the opaque 0.0 "
        "(codegen/wgsl.py e_BinOp, cast)"),
    'wgsl-const-shift-amount': ("WebGPU: a shift by a run-time-looking but constant amount of 32 or more failed "
                                "to compile (`RHS of shift operation is greater than or equal to 32`): the guard "
                                "is a select(), which evaluates both sides, and naga rejects the constant shift in "
                                "the side not taken (fuzzer seeds 44001157, 44001185)",
        "fixed: the shift amount ORs tk_z, so naga does not evaluate it (codegen/wgsl.py shift)"),
    'wgsl-packed-helper-lib': ("WebGPU: a kernel with a bfloat16 / float16 / fp8 array that it never loads or "
                               "stores through a conversion elsewhere failed to compile (`no definition in scope "
                               "for identifier: tk_bf16_to_f32`): the packed-array helpers tk_ld_/tk_st_ call the "
                               "conversion functions but did not request their library (fuzzer seeds 44001000, "
                               "44001018)",
        "fixed: packed_helpers adds the conversion library of the array's dtype (codegen/wgsl.py)"),
    'c-f32-const-overflow': ("C renderers (CPU, OpenCL, CUDA, HIP, Metal): a float32 constant whose float64 "
                             "value is finite but beyond float32's range (a weak Python float 1e300 computed in "
                             "float32, as on backends whose Python floats are float32) was rendered `inff`, "
                             "which no C compiler knows: the infinity test ran before the rounding to float32 "
                             "(found by the WebGPU profile's CPU32 reference, seeds 44001005 and 44001012)",
        "fixed: clike.const rounds to float32 first, then renders +-INFINITY (codegen/clike.py)"),
    'group-loop-item-condition': ("OpenCL/WebGPU/Metal/CUDA (grouped kernels): a loop whose condition reads a "
                                  "local demoted to per-item (plan_groups removes locals assigned at item level "
                                  "from the uniform set) stayed group-level when it also assigned a local that "
                                  "had looked uniform only through it: every item ran the loop, the items past "
                                  "the ndrange with their increments masked off, so they never left it (fuzzer "
                                  "seed 84000159, --edges 3 --calls 1: OpenCL hung)",
        "fixed: plan_groups recomputes the uniform locals (data and control dependence) after each demotion "
        "(passes/groups.py)"),
    'divergent-for-var-uniform': ("every backend: a `for` variable was counted uniform after a break under a "
                                  "per-item condition, where the items leave the loop with different values, so "
                                  "a barrier under `if j > 1` compiled (a divergent barrier); found with "
                                  "group-loop-item-condition",
        "fixed: a for loop's variable is uniform only if its body has no divergent jump (passes/uniformity.py); "
        "such a barrier is the CompileError for non-uniform control flow"),
    'for-var-retyped': ("every backend: a `for` variable whose type (the promotion of everything assigned to "
                        "it) is not its range()'s, e.g. `j` of `for j in range(n - 1)` with a uint8 `n` reused "
                        "by `for j in range(m)` with a Python int `m`, counted the loop in the variable's type: "
                        "`m = -2` ran 254 iterations, `m = 300` 44 (range()'s bounds cast to uint8; found "
                        "writing fuzz18's trip-count statements, `--edges`)",
        "fixed: such a loop counts in range()'s own type in a hidden counter and assigns the variable each "
        "value converted (frontend/lower.py s_For); the trip count is Python's on every backend"),
    'wgsl-const-shl-overflow': ("WebGPU: a 32-bit `<<` by a constant amount of a value naga can evaluate at "
                                "compile time (`abs(np.int32(2147483647)) << 1`) failed to compile (`<< operation "
                                "overflowed`), where the language wraps (fuzzer seed 82000391, WebGPU profile, "
                                "fuzz18; the 8/16-bit types already went through the opaque tk_z in wrap)",
        "fixed: the value ORs tk_z before a constant left shift of an i32/u32 (codegen/wgsl.py shift)"),
    'weak-uint64-literal-left': ("every backend: a Python int literal (or a folded constant, a constexpr, a "
                                 "local of one) in [2**63, 2**64) was a weak int64 on the compiled backends "
                                 "(`v = 2**64 - 1` then `max(v, 63)` gave 63, `63 % v` 0) and unsigned on the "
                                 "interpreter; with a Python int argument s >= 2**63, `s % 63` computed in uint64 "
                                 "but `63 % s` in int64: dtypes.promote gave two weak ints the left one's type "
                                 "(found minimising fuzzer seed 90000533, fuzz20; fixed by lang21)",
        "fixed: a Python int's run-time type follows its value (ir Const: weak uint64 in [2**63, 2**64)), two weak "
        "ints compute in uint64 when either is one (dtypes.promote), the interpreter carries weak uint64 results "
        "(interp ops.U64); the fuzzer's big-int statements put literals and arguments on either side"),
    'wgsl-round-int-float-fold': ("WebGPU on lavapipe: `round(x)` (an int) stored into a float array gave -0.0 "
                                  "for x in (-0.5, -0.0] where the int 0 converts to +0.0: NIR folded "
                                  "`f32(i32(round(x)))` to `round(x)` (fuzzer seed 82000361, WebGPU profile, fuzz18)",
        "fixed: an int converted to f32 ORs tk_z first, so NIR cannot see the round trip (codegen/wgsl.py cast)"),
    'cpu-unsafe-flat-padded-items': ("CPU: an @tk.kernel(unsafe_indices=True) kernel without a barrier, local "
                                     "memory or a collective (the flat code shape) ran only the ndrange's items, "
                                     "not the items past it in a partial last group, which the interpreter and "
                                     "the GPU backends run (SPEC section 3): an atomic_add by every item counted 5 "
                                     "of 8. The adjoints and tangents, which the interpreter runs on the CPU, lost "
                                     "the padded items' terms (wrong gradients on the interpreter too) or, in "
                                     "2-D, wrote the tape past its end (an IndexError; fuzzer seeds 95000007, "
                                     "95000018, 95000021 with --grad --grad-unsafe, gradfz22)",
        "fixed: the CPU renders unsafe_indices kernels in the grouped code shape (runtime/cpu.py _render), "
        "and their adjoints sum scalar partials per group, not per thread (passes/adjoint_gather.py "
        "speed_up); gradcheck compares each backend's primal results too (grad-primal)"),
    'gcc-vectorizer-ice': ("CPU with GCC 12.2: the compiler crashed (internal compiler error in "
                           "vect_get_vec_defs_for_operand, tree-vect-stmts.cc:1509) on the grouped adjoint of a "
                           "2-D unsafe_indices kernel with local memory, a group_reduce and a private array "
                           "(fuzzer seed 95000006, --grad --grad-unsafe 1 --grad-local 0.5; a CompileError "
                           "about generated code, gradfz22)",
        "worked around: a compile whose GCC crash is in the loop vectorizer is run once more with "
        "-fno-tree-vectorize (runtime/compiler.py compile_library); other errors are reported as before"),
    'gcc-ldist-read-after-zero': ("CPU with GCC 12.2: a wrong gradient through a group_reduce (fuzzer seed "
                                  "90500158, --grad --grad-local 0.3, adx23: x0's gradient -0.79 where the "
                                  "interpreter and PoCL gave -0.92, and forward and reverse mode disagreed). "
                                  "The grouped adjoint's item loop zeroes the adjoints it keeps per item, reads "
                                  "each output's seed and consumes it (dy[i] = 0); at -O3 GCC's loop distribution "
                                  "turned the zeroing into a memset, split the rest into loops and ran the one "
                                  "reading dy[i] after the one zeroing it, so the seed of y1 = group_reduce(...) "
                                  "was lost (runtime/compiler.py LDIST_PROBE, 30 lines of C)",
        "worked around: GCC compiles kernels with -fno-tree-loop-distribute-patterns (runtime/compiler.py "
        "GCC_LDIST_FLAGS): the loop is not distributed and the zeroing stays a store in the loop"),
    'cpu-func-exit-in-item-loop': ("CPU: an early `return` under a uniform condition in an inlined @tk.func that "
                                   "holds a barrier (its FuncBlock split at group level) stayed in a per-item loop; "
                                   "its `goto` to the function's end left that loop after the group's first work "
                                   "item, so the others skipped what the return assigns (a function's return value "
                                   "kept the previous trip's value in a loop: `out` differed from the interpreter, "
                                   "nondeterministically). Found writing kernels for fuzz23's brief item 0b "
                                   "(FuncExit at group level under PoCL: OpenCL had it right)",
        "fixed: passes/groups.py puts a statement that holds a return out of a function with barriers at "
        "group level (_exits_to, _sync_funcs), as it does a break out of a group-level loop; uniformity "
        "already requires such returns to be uniform"),
    'pocl-unsafe-uniform-item-loops': ("OpenCL on PoCL 3.1: the grouped adjoint of an unsafe_indices kernel (tk_in "
                                       "the constant true, so every `if (tk_active)` block folded away) with a "
                                       "per-item loop nested in another and a barrier (the group sum of a scalar's "
                                       "partials) miscounted the loops: items advanced their tape index as far as "
                                       "another item of the group did, popped past their start and read a trip "
                                       "count of 2**35 (an endless CAS loop, or a crash). gradfz22's timeout, "
                                       "fuzzer seed 95000058 (--grad --grad-unsafe 0.5 --grad-local 0.3); "
                                       "-cl-opt-disable, a volatile read of the loop bound or a per-item tk_in "
                                       "compute right, a uniform opaque tk_in does not",
        "worked around: under TK_POCL an unsafe_indices kernel's tk_in is TK_POCL_TRUE(tk_p0), the always-true "
        "per-item test tk_p0 >= 0 (codegen/opencl.py OpenCLRenderer.unsafe_in)"),
    'cuda-f32-atomic-ftz': ("CUDA (H200, the first run on a GPU): float32 atomic add/sub flush subnormal operands and "
                            "results to zero of their sign (PTX atom.add.f32; tinykernels emits atomicAdd, sub as "
                            "atomicAdd(-v)): a cell holding 2**-128 plus 0.0 gave 0.0 (seeds 97003314, 97200722), "
                            "2**-128 - 49283 * 2**-128 gave -1.4482972e-34 where the interpreter has -1.4482678e-34 "
                            "(seed 97300038: the cell flushed, not a rounding). Float min/max/cas/exchange (CAS "
                            "loops and atom.exch.b32) and float64 atomics do not flush",
        "kept and documented (docs/cuda.md, docs/language.md): a CAS loop would slow every float32 atomic. "
        "The fuzzer compares CUDA's outputs, where they differ, with the interpreter run under the flushing "
        "model (runtime/interp/memory.py FTZ_F32_ATOMICS, testing/fuzz/run.py ftz_f32_atomics), which gives "
        "the H200's values bit for bit for all three seeds"),
    'cuda-fptosi-guard': ("CUDA: `tk.int32(tk.clamp(v, lo, hi) if v == v else 0.0)` with v a NaN: NVVM dropped the "
                          "`v == v` test, because the C cast (int32_t)v it guards is undefined for a NaN (LLVM's "
                          "fptosi is poison there), and the H200 converted the NaN to a nonzero value, so "
                          "atomic_min(acc_u32, ..) left 19 where the interpreter stores 0 (seed 97001945; the "
                          "PTX has no setp.nan). CUDA's __double2int_rz is the same fptosi to NVVM",
        "fixed: CUDA converts a float to an integer through tk_f2{i,u}{32,64}_f{32,64} (codegen/cuda.py "
        "_conversions): PTX cvt.rzi in inline assembly, which NVVM cannot reason about, and a NaN test: a NaN "
        "is 0, a value out of range saturates; 8/16-bit types through int32, wrapping as on the CPU"),
    'ptxas-neg-s16': ("CUDA with NVRTC 13.0 (ptxas): `-x` of an int16 widened afterwards (stored to an int32 "
                      "array, an atomic_max operand, compared) gave 32768 for x = -32768: ptxas 13.0 compiles "
                      "`neg.s16; cvt.s32.s16` to a 32-bit negation of the sign-extended value and drops the "
                      "second sign extension (NVRTC 13.5 is right). seed 97001581: a local atomic_max with "
                      "-x2[i] stored 32768, and the atomic_cas after it returned it",
        "worked around: CUDA renders int16 negation (-x, 0 - x, x * -1) as tk_neg_i16(x), `x == INT16_MIN ? "
        "x : -x` computed as an int, which NVVM cannot turn into neg.s16, and abs of an int16 as tk_abs16_i16 "
        "(abs.s16 has the same bug; codegen/cuda.py). What NVVM itself rewrites into a negation (`~x + 1`) "
        "still meets it with NVRTC 13.0. PARTLY: on the H200 seed 97001581 agrees with the workaround, but "
        "scripts/gpu_diag.py's isolated probes (H11, H11b, H11c: tk.int32(-x), abs(x)) still gave 32768 with it"),
    'ptxas-selp-negzero': ("CUDA (ptxas 13.0 and 13.5): a float select between the constants -0.0 and 1.0, "
                           "`selp.f32 d, 0f80000000, 0f3F800000, p` in correct PTX, becomes FSET.BF (1.0 or +0.0) "
                           "and one between -0.0 and -1.0 becomes I2F of 0/-1: the -0.0 loses its sign. seed "
                           "97001365: `io[i, 1] += -(tk.float8_e5m2(-0.0) if v else tk.float8_e5m2(1.0))` left "
                           "-0.0 where the interpreter has -0.0 - -0.0 = +0.0",
        "worked around: CUDA renders a float select of two constants, one of them a zero, as tk_selz, which "
        "selects the bits with selp.b32/b64 in inline PTX (NVVM folds any C spelling back into selp.f32) "
        "(codegen/cuda.py). PARTLY: on the H200 seed 97001365 agrees with the workaround, but "
        "scripts/gpu_diag.py's isolated probe H8 still kept the -0.0 with it"),
    'repro-np-float64-scalar': ("the reproducer writer: a non-finite np.float64 scalar argument was written as "
                                "float('np.float64(-inf)') (np.float64 is a float, and NumPy 2's repr names the "
                                "type), so seed 97001365's reproducer raised ValueError before running",
        "fixed: NumPy scalars are encoded as their bytes and dtype first (testing/fuzz/reproducer.py)"),
}
