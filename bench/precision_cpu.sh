#!/usr/bin/env bash
# precision_cpu.sh - --precision bf16 against fp32 on the CPU, in the same run (bench/README.md):
# for each model, ROUNDS alternating runs (fp32, bf16, fp32, bf16, ...) of one rank, one thread,
# each run's median iteration from its summary line; per precision the median over the rounds,
# and the ratio bf16/fp32 of samples/s. Then bench/gemm_bf16 (the GEMM alone against sgemm).
# Meant for a quiet machine; on a busy one only the ratio of alternating rounds means anything.
#   bench/precision_cpu.sh [ROUNDS] [MODELS...]       (default: 5 lenet fcn5 alexnet)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
if [ $# -gt 0 ]; then models=("$@"); else models=(lenet fcn5 alexnet); fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! src/dtbench --precision bf16 --dry-run >/dev/null 2>"$out/err"; then
    echo "bf16 not available here: $(cat "$out/err")"
    exit 77
fi
iters_of() { case $1 in lenet) echo 200 ;; fcn5) echo 20 ;; *) echo 10 ;; esac; }
batch_of() { case $1 in alexnet | vgg16 | resnet50 | googlenet) echo 16 ;; *) echo 64 ;; esac; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf "%-10s %6s %14s %14s %8s\n" model rounds "fp32 samples/s" "bf16 samples/s" ratio
for m in "${models[@]}"; do
    for r in $(seq "$rounds"); do
        for p in fp32 bf16; do
            src/dtbench --model "$m" --dataset synthetic --batch "$(batch_of "$m")" \
                --iters "$(iters_of "$m")" --warmup 3 --threads 1 --sample-hz 0 \
                --calibrate-iters 0 --precision "$p" --output "$out/run.h5" --overwrite |
                sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' >>"$out/$m.$p"
        done
    done
    f=$(median <"$out/$m.fp32") b=$(median <"$out/$m.bf16")
    printf "%-10s %6d %14.1f %14.1f %8.2f\n" "$m" "$rounds" "$f" "$b" "$(awk -v b="$b" -v f="$f" 'BEGIN {print b / f}')"
done
echo
bench/gemm_bf16 "$rounds"
