#!/usr/bin/env bash
# Checks and benchmarks on a machine with an NVIDIA GPU, in one call (a lent GPU is short of
# time: few, full calls). Run from the repository root:
#
#   bash scripts/gpu_check.sh info tests conformance fuzz:2000 bench
#
# Stages (any order, each under its own time limit, each logging to <logs>/<stage>.log; the logs
# directory is packed into $OUT/gpu-logs.tgz at the end when $OUT is set, else it is ./gpu-logs):
#   info          GPU, driver, CUDA, Python packages, tk.backends()
#   tests         the project's CUDA tests (tests/test_cuda.py, test_cuda_gpu.py and other GPU-aware files)
#   suite         every project test whose id names CUDA (-k CUDA: the files parametrized over every
#                 backend get a CUDA parameter where a GPU is usable, tests/backend_params.py)
#   conformance   ../shared/conformance (or $TK_CONFORMANCE_DIR, or ./shared/conformance) on CUDA
#   fuzz:N[:S]    the differential fuzzer, N kernels from seed S, CUDA against the interpreter
#   bench         benchmarks/bench_gpu.py (copy/triad/diffusion, launch overhead, hidden communication)
#   llm           benchmarks/bench_llm_gpu.py (tinykernels.llm against PyTorch CUDA)
#   items         benchmarks/bench_cuda_items.py (TK_CUDA_ITEMS against copy/triad T_eff)
#   pytest:ARGS   any pytest arguments (':' separates them), e.g. pytest:tests/test_cuda.py:-k:gpu
# STAGE@SECONDS sets a stage's time limit (e.g. conformance@240), to fit the call's own limit.
# Uses the python3 on PATH (with numpy; cuda-bindings and nvidia-cuda-nvrtc for CUDA) and
# this checkout's src/ (no install needed). Prints a one-line summary per stage at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR="${OUT:+/tmp/gpu-logs}"
OUTDIR="${OUTDIR:-$PWD/gpu-logs}"
mkdir -p "$OUTDIR"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export TK_CACHE_DIR="${TK_CACHE_DIR:-/tmp/tk-cache-gpu}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false     # JAX takes 75% of the GPU at start otherwise
JOBS="${JOBS:-8}"
for d in "${TK_CONFORMANCE_DIR:-}" ../shared/conformance shared/conformance; do
    [ -n "$d" ] && [ -d "$d" ] && { CONF="$(cd "$d" && pwd)"; break; }
done
export TK_CONFORMANCE_DIR="${CONF:-}"
SUMMARY=()

stage() {   # stage NAME LIMIT_S CMD...: run CMD under a time limit (LIMIT overrides it), log, record the outcome
    local name=$1 limit=${LIMIT:-$2}; shift 2
    local t0=$SECONDS
    echo "=== $name: $*" | tee -a "$OUTDIR/$name.log"
    timeout --kill-after=10 "$limit" "$@" >>"$OUTDIR/$name.log" 2>&1
    local rc=$?
    SUMMARY+=("$name rc=$rc $((SECONDS - t0))s: $(tail -n 1 "$OUTDIR/$name.log" | cut -c1-160)")
}

for s in "$@"; do
    LIMIT=""
    if [[ "$s" == *@* ]]; then LIMIT=${s##*@}; s=${s%@*}; fi
    case "$s" in
    info)
        stage info 120 bash -c 'nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv;
            python3 -V; gcc --version | head -1; nvcc --version | tail -2;
            python3 -m pip list 2>/dev/null | grep -iE "^(numpy|cuda-bindings|cuda-core|nvidia-cuda-nvrtc|cupy|torch|jax|jaxlib|jax-cuda|pytest|pytest-xdist|ml.dtypes|hypothesis) ";
            python3 -c "import tinykernels as tk, json; print(json.dumps(tk.backends(), indent=1)); from tinykernels.runtime import cuda; print(cuda.CUDA.available())"' ;;
    tests)
        stage tests 420 python3 -m pytest -v -p no:cacheprovider -n "$JOBS" --dist loadfile -rfE --timeout 300 \
            --junitxml="$OUTDIR/tests.xml" tests/test_cuda.py tests/test_cuda_gpu.py tests/test_llm_nvrtc.py \
            tests/test_launch_geometry.py ;;
    suite)
        stage suite 540 python3 -m pytest -v -p no:cacheprovider -n "$JOBS" --dist loadfile -rfE --timeout 300 \
            --junitxml="$OUTDIR/suite.xml" -k "CUDA" tests ;;
    conformance)
        stage conformance 420 env TK_TEST_BACKENDS=CUDA python3 -m pytest -q -p no:cacheprovider -n "$JOBS" -rfE \
            --timeout 300 --junitxml="$OUTDIR/conformance.xml" "$CONF" ;;
    fuzz:*)      # fuzz:N[:SEED[:EXTRA FLAGS, comma separated]], e.g. fuzz:500:98000000:--grad
        IFS=: read -r _ n seed extra <<<"$s"
        stage "fuzz${seed:-}" 540 python3 scripts/fuzz.py --count "$n" --seed "${seed:-97000000}" --backends CUDA \
            --jobs "$JOBS" --timeout 120 --out "$OUTDIR/fuzz-repro-${seed:-0}" --progress 30 ${extra//,/ } ;;
    bench)
        stage bench 540 python3 benchmarks/bench_gpu.py --json "$OUTDIR/bench_gpu.json" ;;
    bench-quick)
        stage bench 300 python3 benchmarks/bench_gpu.py --quick --json "$OUTDIR/bench_gpu.json" ;;
    llm|llm:*)   # llm[:EXTRA ARGS, comma separated], e.g. llm:--budget,150
        extra=""; [[ "$s" == llm:* ]] && extra=${s#llm:}
        stage llm 540 python3 benchmarks/bench_llm_gpu.py --json "$OUTDIR/bench_llm_gpu.json" ${extra//,/ } ;;
    items)       # work items per thread (TK_CUDA_ITEMS) against copy/triad T_eff
        stage items 240 python3 benchmarks/bench_cuda_items.py ;;
    diag:*)      # diag:SCRIPT: a diagnosis script of the checkout
        stage diag 120 python3 "${s#diag:}" ;;
    llm-quick)
        stage llm 300 python3 benchmarks/bench_llm_gpu.py --quick --json "$OUTDIR/bench_llm_gpu.json" ;;
    pytest:*)
        IFS=: read -r -a args <<<"${s#pytest:}"
        stage pytest 420 python3 -m pytest -q -p no:cacheprovider -rfE "${args[@]}" ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
    esac
done
echo
printf '%s\n' "${SUMMARY[@]}" | tee "$OUTDIR/summary.txt"
if [ -n "${OUT:-}" ]; then
    tar -czf "$OUT/gpu-logs.tgz" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")"
    cp "$OUTDIR/summary.txt" "$OUT/" 2>/dev/null
fi
