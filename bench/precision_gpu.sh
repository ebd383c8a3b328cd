#!/usr/bin/env bash
# precision_gpu.sh - --precision on ONE GPU: training samples/s of dtbench --device cuda
# in fp32, tf32, bf16 and fp16 against PyTorch on the same GPU in the same mode
# (bench/torch_peer.py --precision: TF32 flags, torch.autocast, GradScaler for fp16), rounds
# alternating dtbench / PyTorch and the four modes, median per cell. Prints per model and mode:
# dtbench samples/s, PyTorch samples/s, dtbench/PyTorch, and each side's speed-up over its fp32.
#   bench/precision_gpu.sh [ROUNDS] [MODEL:BATCH...]     (default: 3 lenet:64 resnet50:64 fcn5:64)
# Run from the build tree; TORCH_PYTHON picks the interpreter with torch (default python3).
# STATUS: ran once, on one H100 on 2026-11-26 (ResNet-50 at batch 64, 1 round;
# bench/results/2026-11-26-h100/precision_gpu.txt, figures in bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
if [ $# -gt 0 ]; then cases=("$@"); else cases=(lenet:64 resnet50:64 fcn5:64); fi
PY=${TORCH_PYTHON:-python3}
tests/cuda_probe >/dev/null || { echo "no GPU visible (tests/cuda_probe)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
iters_of() { case $1 in lenet) echo 200 ;; *) echo 30 ;; esac; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
modes=(fp32 tf32 bf16 fp16)
for c in "${cases[@]}"; do
    m=${c%%:*} b=${c##*:} n=$(iters_of "${c%%:*}")
    for r in $(seq "$rounds"); do
        for p in "${modes[@]}"; do
            src/dtbench --device cuda --model "$m" --dataset synthetic --batch "$b" --iters "$n" \
                --warmup 5 --sample-hz 0 --calibrate-iters 0 --precision "$p" \
                --output "$out/run.h5" --overwrite |
                sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' >>"$out/$m.$p.dt"
            "$PY" bench/torch_peer.py --device cuda --model "$m" --batch "$b" --iters "$n" \
                --warmup 5 --precision "$p" |
                "$PY" -c "import json,sys; d=json.load(sys.stdin); print($b / d['median_s'])" \
                    >>"$out/$m.$p.pt"
        done
    done
done
printf "%-10s %-5s %14s %14s %9s %12s %12s\n" model mode "dtbench smp/s" "PyTorch smp/s" \
    "dt/torch" "dt vs fp32" "torch vs fp32"
for c in "${cases[@]}"; do
    m=${c%%:*}
    f_dt=$(median <"$out/$m.fp32.dt") f_pt=$(median <"$out/$m.fp32.pt")
    for p in "${modes[@]}"; do
        d=$(median <"$out/$m.$p.dt") t=$(median <"$out/$m.$p.pt")
        awk -v m="$m" -v p="$p" -v d="$d" -v t="$t" -v fd="$f_dt" -v ft="$f_pt" \
            'BEGIN {printf "%-10s %-5s %14.1f %14.1f %9.2f %12.2f %12.2f\n", m, p, d, t, d / t, d / fd, t / ft}'
    done
done
