#!/usr/bin/env bash
# gpu_bench.sh - the GPU benchmark users can trust: dtbench against PyTorch on ONE GPU, side by
# side in one run, rounds alternated, in the configurations users train with. Run from the build
# tree (or set DTBENCH):
#   bench/gpu_bench.sh [--out DIR] [--budget S] [--models "M[:B] ..."] [--configs "C ..."]
#                      [--rounds N] [--iters N] [--warmup N] [--plan] [--device cpu]
# Configurations (bench/gpu_bench.py): fp32 (strict on both sides), default (PyTorch's defaults
# against dtbench tf32), bf16 and fp16 (autocast + channels_last + cudnn.benchmark against dtbench
# --precision bf16/fp16); both sides take their batch through a prefetched upload from
# page-locked memory (dtbench --prefetch, torch_peer.py --data pinned). Every model of the zoo at
# a batch users run (LeNet, FCN-5, LSTM-32 64; AlexNet, GoogLeNet 128; ResNet-50 64 and 256;
# VGG16 64), and what graphs and prefetching gain (dtbench with each off), in the order of what
# they tell, as far as --budget seconds (default 420) allow: at least 3 rounds of 50 measured
# steps after 10 warm-up steps each. Prints the table last; DIR (default
# bench/results/<date>-<gpu>/gpu-bench) gets table.txt, cells.csv, runs.csv, plan.txt,
# machine.txt and raw/ (every result file, JSON and log). --plan prints the cells and their
# estimated cost and stops. --device cpu: a rehearsal on the CPU with PyTorch's CPU build (small
# models, 3 rounds of 5 steps): proves the script, measures nothing.
# With 2 GPUs or more and budget left: NCCL's allreduce bus bandwidth at the models' gradient
# sizes (bench/nccl_busbw) and dtbench's own NCCL exchange (nccl_*.txt).
# Interpreters: TORCH_PYTHON (default: the first of python3, /usr/bin/python3 importing torch),
# H5_PYTHON (the first of python3, .venv/bin/python, /usr/bin/python3 importing h5py and numpy).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DTBENCH=${DTBENCH:-src/dtbench}
BUSBW=${BUSBW:-bench/nccl_busbw}
PROBE=${PROBE:-tests/cuda_probe}
OUT=""
BUDGET=420
DEVICE=cuda
PLAN=0
pass=()
while (($#)); do
    case $1 in
    --out) OUT=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --plan) PLAN=1; shift ;;
    --models | --configs | --rounds | --iters | --warmup) pass+=("$1" "$2"); shift 2 ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu_bench: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "gpu_bench: error: $*" >&2; exit 2; }
START=$(date +%s)
case $DEVICE in cuda | cpu) ;; *) die "--device: '$DEVICE' is not accepted: expected cuda or cpu" ;; esac
[ -x "$DTBENCH" ] || die "no $DTBENCH (run from the build tree, or set DTBENCH)"
DTBENCH=$(cd "$(dirname "$DTBENCH")" && pwd)/$(basename "$DTBENCH")
help=$("$DTBENCH" --help) # whole, then grep: no SIGPIPE under pipefail
grep -q -- '--graphs' <<<"$help" || die "$DTBENCH has no --graphs (an older dtbench)"
first_with() { # first_with MODULES PYTHON...: the first interpreter importing MODULES
    local mods=$1 p
    shift
    for p in "$@"; do
        if command -v "$p" >/dev/null && "$p" -c "import $mods" 2>/dev/null; then
            command -v "$p"
            return 0
        fi
    done
    return 1
}
TORCH_PYTHON=${TORCH_PYTHON:-$(first_with torch python3 /usr/bin/python3)} ||
    die "no Python imports torch (set TORCH_PYTHON)"
H5_PYTHON=${H5_PYTHON:-$(first_with "h5py, numpy" python3 .venv/bin/python /usr/bin/python3)} ||
    die "no Python imports h5py and numpy (set H5_PYTHON)"
NGPUS=0
if [ "$DEVICE" = cuda ]; then
    grep -q -- '--device {cpu,cuda' <<<"$help" || die "$DTBENCH was built without the CUDA backend"
    [ -x "$PROBE" ] || die "no $PROBE (make check builds it)"
    NGPUS=$("$PROBE") || die "no GPU visible"
    "$TORCH_PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" ||
        die "$TORCH_PYTHON's torch sees no GPU"
    pass+=(--mpirun "$(command -v mpirun >/dev/null && echo "mpirun -np 1 --bind-to none" || true)")
else # the rehearsal: small and quick
    pass=(--rounds 3 --iters 5 --warmup 1 "${pass[@]}")
fi
if [ -z "$OUT" ] && [ "$DEVICE" = cpu ]; then # a rehearsal's output is no result
    OUT=$PWD/gpu-bench-rehearsal-$(date +%Y%m%d-%H%M%S)
elif [ -z "$OUT" ]; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
        sed -n '1{s/.*\(H100\|H200\|A100\|B200\|L40S\|V100\).*/\1/;s/ /-/g;p}' | tr 'A-Z' 'a-z')
    OUT=$HERE/results/$(date +%F)-${gpu:-gpu}/gpu-bench
fi
[ "$PLAN" = 1 ] || [ ! -e "$OUT/table.txt" ] || die "$OUT has a table.txt already: name another --out"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
{
    echo "host $(hostname), $(date -u +%FT%TZ), device $DEVICE, $NGPUS GPU(s)"
    echo "dtbench: $("$DTBENCH" --version 2>&1 | sed -n 1p)"
    echo "torch: $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1)"
    nvidia-smi -L 2>/dev/null || true
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv 2>/dev/null || true
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"
planonly=()
[ "$PLAN" = 1 ] && planonly=(--plan-only)
left=$((BUDGET - ($(date +%s) - START)))
"$H5_PYTHON" "$HERE/gpu_bench.py" --out "$OUT" --dtbench "$DTBENCH" --torch-python "$TORCH_PYTHON" \
    --device "$DEVICE" --budget "$left" "${planonly[@]}" "${pass[@]}"
[ "$PLAN" = 1 ] && exit 0

# NCCL, with 2 GPUs or more and a minute left
left=$((BUDGET - ($(date +%s) - START)))
if [ "$NGPUS" -ge 2 ] && [ "$left" -ge 60 ] && [ -x "$BUSBW" ]; then
    echo "== NCCL allreduce at the gradient sizes ($NGPUS ranks, one per GPU)"
    timeout $((left / 2)) mpirun -np "$NGPUS" "$BUSBW" --json --iters 20 >"$OUT/nccl_busbw.txt" 2>&1 ||
        echo "nccl_busbw failed or timed out (see $OUT/nccl_busbw.txt)"
    for m in lenet fcn5; do
        f="$OUT/raw/nccl-$m.h5"
        timeout $((left / 4)) mpirun -np "$NGPUS" "$DTBENCH" --model $m --dataset synthetic \
            --batch $((64 * NGPUS)) --iters 50 --warmup 10 --device cuda --transport nccl --overlap \
            --output "$f" --overwrite >"$f.log" 2>&1 || echo "dtbench $m nccl failed (see $f.log)"
    done
    "$H5_PYTHON" - "$OUT"/raw/nccl-*.h5 <<'PY' >"$OUT/nccl_exchange.txt" 2>&1 || true
import sys, h5py, numpy as np
for fn in sys.argv[1:]:
    with h5py.File(fn, "r") as f:
        w, p = int(f.attrs["warmup"]), int(f.attrs["nranks"])
        it = f["iterations"]
        ex, tot = np.median(it["exchange"][:, w:]), np.median(it["total"][:, w:])
        bus = 4.0 * f.attrs["param_count"] / ex * 2 * (p - 1) / p / 1e9 if ex > 0 else float("nan")
        print(f"{fn.split('/')[-1]}: {p} GPUs, total {tot*1e3:.2f} ms, exposed exchange "
              f"{ex*1e3:.2f} ms (effective busbw {bus:.1f} GB/s)")
PY
    cat "$OUT/nccl_exchange.txt"
fi
echo "== results in $OUT"
cat "$OUT/table.txt"
