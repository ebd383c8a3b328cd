#!/usr/bin/env bash
# gpu_kernels.sh - dtbench's memory-bound kernels against PyTorch's on one GPU, in the same run:
# batch norm forward and backward (plain, + ReLU, + residual add + ReLU), max pooling and LRN
# forward and backward, bf16 channels_last, on the shapes of ResNet-50 at batch 256 and GoogLeNet
# at batch 128 (bench/gpu_kernels.c lists them). Rounds alternate dtbench (bench/gpu_kernels:
# through the CUDA backend's table, as the model calls it) and PyTorch (bench/torch_kernels.py);
# per case the fastest round of each side. Prints per case dtbench's time, GB/s over the bytes
# its kernels move by design, the share of the GPU's peak bandwidth (marked below 60%), PyTorch's
# time and the ratio PyTorch / dtbench. Run from the build tree on a GPU machine:
#   bench/gpu_kernels.sh [--rounds 2] [--iters 20] [--warmup 5] [--only SUBSTRING]
#                        [--peak-gbs G] [--torch-python PY] [--out DIR]
# About 1 GB of GPU memory per case at most (ResNet-50's 411 MB tensors); a minute or two.
# --peak-gbs: the bandwidth the shares are of (default: the memory clock and bus width the
# device reports; the H200's data sheet says 4800). --out keeps the raw files there.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${GPU_KERNELS:-bench/gpu_kernels}
ROUNDS=2 ITERS=20 WARMUP=5 ONLY="" PEAK="" OUT="" TORCH_PY=""
while (($#)); do
    case $1 in
        --rounds) ROUNDS=$2; shift 2 ;;
        --iters) ITERS=$2; shift 2 ;;
        --warmup) WARMUP=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --peak-gbs) PEAK=$2; shift 2 ;;
        --torch-python) TORCH_PY=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "gpu_kernels: unknown option $1" >&2; exit 2 ;;
    esac
done
die() { echo "gpu_kernels: error: $*" >&2; exit 2; }
[ -x "$BIN" ] || die "no $BIN (run from the build tree after make check TESTS=, or set GPU_KERNELS)"
if [ -z "$TORCH_PY" ]; then
    for p in python3 /usr/bin/python3 python; do
        if "$p" -c 'import torch' 2>/dev/null; then TORCH_PY=$p; break; fi
    done
fi
[ -n "$TORCH_PY" ] || die "no Python that imports torch (give --torch-python)"
if [ -n "$OUT" ]; then
    [ -e "$OUT" ] && die "$OUT exists: name another --out"
    mkdir -p "$OUT"
else
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi
only=()
[ -z "$ONLY" ] || only=(--only "$ONLY")
"$BIN" --list >"$OUT/cases.jsonl"
dt=() th=()
for r in $(seq 1 "$ROUNDS"); do
    "$BIN" --iters "$ITERS" --warmup "$WARMUP" "${only[@]}" >"$OUT/dtbench-$r.txt"
    "$TORCH_PY" "$HERE/torch_kernels.py" time "$OUT/cases.jsonl" --iters "$ITERS" \
        --warmup "$WARMUP" "${only[@]}" >"$OUT/torch-$r.txt"
    dt+=("$OUT/dtbench-$r.txt") th+=("$OUT/torch-$r.txt")
done
head -1 "$OUT/dtbench-1.txt"
peak=()
[ -z "$PEAK" ] || peak=(--peak-gbs "$PEAK")
"$TORCH_PY" "$HERE/torch_kernels.py" table "$OUT/cases.jsonl" "${dt[@]}" --torch "${th[@]}" \
    "${peak[@]}"
