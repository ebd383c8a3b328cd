#!/usr/bin/env bash
# gpu_bench.sh - the GPU benchmark users can trust: dtbench against PyTorch on ONE GPU, side by
# side in one run, rounds alternated, in the precisions users train with. Run from the build tree
# (or set DTBENCH):
#   bench/gpu_bench.sh [--out DIR] [--budget S] [--all] [--models "M[:B] ..."] [--configs "C ..."]
#                      [--rounds N] [--iters N] [--warmup N] [--plan] [--device cpu]
#   bench/gpu_bench.sh --table DIR      # DIR's table again, from its runs (no GPU needed)
# Precisions (bench/gpu_bench_table.py): fp32 (strict on both sides), tf32 (dtbench tf32 against
# PyTorch's defaults), bf16 and fp16 (autocast + channels_last + cudnn.benchmark against dtbench
# --precision bf16/fp16); both sides take their batch through a prefetched upload from
# page-locked memory (dtbench --prefetch, torch_peer.py --data pinned). By default the headline
# cells: ResNet-50 b256 bf16, LeNet, LSTM-32 and FCN-5 (b64, fp32), GoogLeNet b128, VGG16 b64 and
# AlexNet b128 in bf16, ResNet-50 b256 fp32: 2 rounds each, each cell's steps sized from its step
# time (about 2 s measured per side and round), about 130 s on an H200; --all (or --models,
# --configs) every model of the zoo in every precision and what graphs and prefetching gain
# (dtbench with each off), about 9 minutes; --models gpt2 the transformer's cell alone: GPT-2 124M
# at 8 x 1024 tokens in bf16 against PyTorch's autocast with flash attention (scaled_dot_product_
# attention) and fused AdamW, about 30 s, its tokens/s under the table (it is in --all too, after
# the ablations; not a headline cell). Cells run in order as far as --budget seconds
# (default 300) allow. Prints the table last, with each cell that misses a target and by how much
# (ratio below 1.0 against PyTorch, an exchange above 1% of the total on one rank, phases that
# add up to more than the total); DIR (default bench/results/<date>-<gpu>/gpu-bench) gets
# table.txt, cells.csv, runs.csv, plan.txt, machine.txt and raw/ (every result file, JSON and
# log). --plan prints the cells and their estimated cost and stops. --device cpu: a rehearsal on
# the CPU with PyTorch's CPU build (small models, 2 rounds of 5 steps): proves the script,
# measures nothing. With 2 GPUs or more and budget left: NCCL's allreduce bus bandwidth at the
# models' gradient sizes (bench/nccl_busbw) and dtbench's own NCCL exchange (nccl_*.txt).
# Interpreters: TORCH_PYTHON (default: the first of python3, /usr/bin/python3 with torch),
# H5_PYTHON (the first of python3, .venv/bin/python, /usr/bin/python3 with h5py, numpy and
# pandas, else with h5py and numpy: the NCCL lines read with dtbench_analysis, which needs pandas;
# without it nccl_exchange.txt says so in one line).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DTBENCH=${DTBENCH:-src/dtbench}
BUSBW=${BUSBW:-bench/nccl_busbw}
PROBE=${PROBE:-tests/cuda_probe}
OUT=""
BUDGET=300
DEVICE=cuda
PLAN=0
TABLE=""
pass=()
while (($#)); do
    case $1 in
    --out) OUT=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --plan) PLAN=1; shift ;;
    --table) TABLE=$2; shift 2 ;;
    --all) pass+=(--all); shift ;;
    --models | --configs | --rounds | --iters | --warmup) pass+=("$1" "$2"); shift 2 ;;
    -h | --help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "gpu_bench: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "gpu_bench: error: $*" >&2; exit 2; }
START=$(date +%s)
case $DEVICE in cuda | cpu) ;; *) die "--device: '$DEVICE' is not accepted: expected cuda or cpu" ;; esac
has() { # has MODULES PYTHON: PYTHON finds MODULES (without importing them: torch takes seconds)
    # shellcheck disable=SC2086 # MODULES: one word each
    command -v "$2" >/dev/null &&
        "$2" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in sys.argv[1:]))" $1 2>/dev/null
}
first_with() { # first_with MODULES PYTHON...: the first interpreter that has MODULES
    local p
    for p in "${@:2}"; do
        if has "$1" "$p"; then
            command -v "$p"
            return 0
        fi
    done
    return 1
}
h5_candidates=(python3 .venv/bin/python /usr/bin/python3)
H5_PYTHON=${H5_PYTHON:-$(first_with "h5py numpy pandas" "${h5_candidates[@]}" ||
    first_with "h5py numpy" "${h5_candidates[@]}")} ||
    die "no Python imports h5py and numpy (set H5_PYTHON)"
if [ -n "$TABLE" ]; then
    exec "$H5_PYTHON" "$HERE/gpu_bench_table.py" "$TABLE"
fi
if [ "$PLAN" = 1 ]; then
    exec "$H5_PYTHON" "$HERE/gpu_bench.py" --plan-only --device "$DEVICE" --budget "$BUDGET" "${pass[@]}"
fi
[ -x "$DTBENCH" ] || die "no $DTBENCH (run from the build tree, or set DTBENCH)"
DTBENCH=$(cd "$(dirname "$DTBENCH")" && pwd)/$(basename "$DTBENCH")
help=$("$DTBENCH" --help) # whole, then grep: no SIGPIPE under pipefail
grep -q -- '--graphs' <<<"$help" || die "$DTBENCH has no --graphs (an older dtbench)"
TORCH_PYTHON=${TORCH_PYTHON:-$(first_with torch python3 /usr/bin/python3)} ||
    die "no Python imports torch (set TORCH_PYTHON)"
NGPUS=0
if [ "$DEVICE" = cuda ]; then
    grep -q -- '--device {cpu,cuda' <<<"$help" || die "$DTBENCH was built without the CUDA backend"
    [ -x "$PROBE" ] || die "no $PROBE (make check builds it)"
    NGPUS=$("$PROBE") || die "no GPU visible"
    pass+=(--mpirun "$(command -v mpirun >/dev/null && echo "mpirun -np 1 --bind-to none" || true)")
fi
if [ -z "$OUT" ] && [ "$DEVICE" = cpu ]; then # a rehearsal's output is no result
    OUT=$PWD/gpu-bench-rehearsal-$(date +%Y%m%d-%H%M%S)
elif [ -z "$OUT" ]; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
        sed -n '1{s/.*\(H100\|H200\|A100\|B200\|L40S\|V100\).*/\1/;s/ /-/g;p}' | tr 'A-Z' 'a-z')
    OUT=$HERE/results/$(date +%F)-${gpu:-gpu}/gpu-bench
fi
[ ! -e "$OUT/table.txt" ] || die "$OUT has a table.txt already: name another --out"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
{ # (PyTorch's versions: gpu_bench.py adds them once its PyTorch process has started)
    echo "host $(hostname), $(date -u +%FT%TZ), device $DEVICE, $NGPUS GPU(s)"
    echo "dtbench: $("$DTBENCH" --version 2>&1 | sed -n 1p)"
    nvidia-smi -L 2>/dev/null || true
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv 2>/dev/null || true
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"
left=$((BUDGET - ($(date +%s) - START)))
"$H5_PYTHON" "$HERE/gpu_bench.py" --out "$OUT" --dtbench "$DTBENCH" --torch-python "$TORCH_PYTHON" \
    --device "$DEVICE" --budget "$left" "${pass[@]}"

# NCCL, with 2 GPUs or more and a minute left
left=$((BUDGET - ($(date +%s) - START)))
if [ "$NGPUS" -ge 2 ] && [ "$left" -ge 60 ] && [ -x "$BUSBW" ]; then
    echo "== NCCL allreduce at the gradient sizes ($NGPUS ranks, one per GPU)"
    # each model's gradient: its parameter count as dtbench itself prints it
    sizes=()
    for m in lenet googlenet lstm32 resnet50 alexnet fcn5 fcn8 vgg16 nanogpt-char gpt2 gpt2-medium; do
        n=$("$DTBENCH" --model "$m" --dry-run 2>/dev/null |
            sed -n 's/.*total parameters: \([0-9]*\).*/\1/p') || true
        [ -z "$n" ] || sizes+=("$m=$n")
    done
    timeout $((left / 2)) mpirun -np "$NGPUS" "$BUSBW" --json --iters 20 "${sizes[@]}" \
        >"$OUT/nccl_busbw.txt" 2>&1 ||
        echo "nccl_busbw failed or timed out (see $OUT/nccl_busbw.txt)"
    for m in lenet fcn5; do
        f="$OUT/raw/nccl-$m.h5"
        timeout $((left / 4)) mpirun -np "$NGPUS" "$DTBENCH" --model $m --dataset synthetic \
            --batch $((64 * NGPUS)) --iters 50 --warmup 10 --device cuda --transport nccl --overlap \
            --output "$f" --overwrite >"$f.log" 2>&1 || echo "dtbench $m nccl failed (see $f.log)"
    done
    "$H5_PYTHON" "$HERE/bench_read.py" nccl-exchange "$OUT"/raw/nccl-*.h5 \
        >"$OUT/nccl_exchange.txt" 2>&1 || true
    cat "$OUT/nccl_exchange.txt"
    cat "$OUT/table.txt" # last again, after NCCL's figures
fi
echo "== results in $OUT"
