#!/usr/bin/env bash
# precision_cpu.sh - --precision bf16 against fp32 on the CPU, and against PyTorch's CPU autocast
# bf16 on the same machine, in the same run (bench/README.md "bf16 on the CPU"). For each model,
# ROUNDS rounds of four runs, alternating: dtbench fp32, dtbench bf16, PyTorch fp32 and PyTorch
# autocast(bfloat16) (bench/torch_peer.py --precision bf16: forward and loss under autocast, fp32
# master weights, as dtbench's bf16). One rank, one thread, synthetic data; each run's median step
# (dtbench: the summary's median iteration; the peer: median_s); per configuration the median over
# the rounds. Printed: seconds per step and
#   bf16/fp32   dtbench's bf16 speed-up over its fp32 (>= 1: bf16 pays)
#   vs torch    PyTorch autocast bf16's step / dtbench bf16's (>= 1: dtbench is as fast or faster)
#   torch gain  PyTorch's own bf16 speed-up over its fp32
# Then bench/gemm_bf16 (the GEMM engines alone against sgemm). Meant for a quiet machine.
#   bench/precision_cpu.sh [ROUNDS] [MODELS...]     (default: 3 fcn5 alexnet resnet50)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
if [ $# -gt 0 ]; then models=("$@"); else models=(fcn5 alexnet resnet50); fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
torch_py=/usr/bin/python3
"$torch_py" -c 'import torch' 2>/dev/null || torch_py=
json_py=python3
[ -x .venv/bin/python ] && json_py=.venv/bin/python
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! src/dtbench --precision bf16 --dry-run >/dev/null 2>"$out/err"; then
    echo "bf16 not available here: $(cat "$out/err")"
    exit 77
fi
iters_of() { case $1 in lenet) echo 200 ;; fcn5 | fcn8) echo 10 ;; *) echo 5 ;; esac; }
batch_of() { case $1 in alexnet | vgg16 | resnet50 | googlenet) echo 16 ;; *) echo 64 ;; esac; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR ? v[int((NR + 1) / 2)] : "nan")}'; }

dtbench_run() { # model precision: appends the median seconds per step to $out/model.dt.precision
    src/dtbench --model "$1" --dataset synthetic --batch "$(batch_of "$1")" \
        --iters "$(iters_of "$1")" --warmup 2 --threads 1 --sample-hz 0 --calibrate-iters 0 \
        --precision "$2" --output "$out/run.h5" --overwrite >"$out/log" 2>&1 ||
        { cat "$out/log"; exit 1; }
    sed -n 's/.*median iteration \([0-9.]*\) ms.*/\1/p' "$out/log" | awk '{print $1 / 1000}' \
        >>"$out/$1.dt.$2"
    [ "$2" = fp32 ] || grep -o -m1 'GEMM engine [^,]*' "$out/log" >"$out/engine" || true
}
torch_run() { # model precision
    [ -n "$torch_py" ] || return 0
    "$torch_py" bench/torch_peer.py --model "$1" --batch "$(batch_of "$1")" \
        --iters "$(iters_of "$1")" --warmup 2 --threads 1 --precision "$2" --no-times \
        2>"$out/tlog" | "$json_py" -c 'import json, sys; print(json.load(sys.stdin)["median_s"])' \
        >>"$out/$1.pt.$2" || { cat "$out/tlog"; exit 1; }
}

[ -n "$torch_py" ] || echo "no PyTorch (/usr/bin/python3 -c 'import torch' fails): its columns are nan"
printf "%-9s %5s %6s %9s %9s %9s %9s %9s %9s %10s\n" model batch rounds dt_fp32 dt_bf16 pt_fp32 \
    pt_bf16 bf16/fp32 "vs torch" "torch gain"
for m in "${models[@]}"; do
    for r in $(seq "$rounds"); do
        for p in fp32 bf16; do
            dtbench_run "$m" "$p"
            torch_run "$m" "$p"
        done
    done
    f=$(median <"$out/$m.dt.fp32") b=$(median <"$out/$m.dt.bf16")
    tf=$(cat "$out/$m.pt.fp32" 2>/dev/null | median) tb=$(cat "$out/$m.pt.bf16" 2>/dev/null | median)
    awk -v m="$m" -v n="$(batch_of "$m")" -v r="$rounds" -v f="$f" -v b="$b" -v tf="$tf" -v tb="$tb" \
        'BEGIN {printf "%-9s %5d %6d %9.3f %9.3f %9.3f %9.3f %9.2f %9.2f %10.2f\n",
                m, n, r, f, b, tf, tb, f / b, tb / b, tf / tb}'
done
echo "seconds per step (median over rounds); dtbench's engine: $(sed 's/^ *//' "$out/engine" 2>/dev/null)"
echo
bench/gemm_bf16 "$rounds"
