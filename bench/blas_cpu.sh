#!/usr/bin/env bash
# blas_cpu.sh - the OpenBLAS kernels of dtbench's CPU runs and what they are worth (bench/README.md
# "OpenBLAS kernels"). Per model, ROUNDS alternating runs of one rank, one thread:
#   installed  dtbench with nothing exported (it chooses OpenBLAS's core itself,
#              kernels/cpu/cpu_blas.c)
#   exported   dtbench with OPENBLAS_CORETYPE=<the core installed chose> exported
#   own        dtbench with OPENBLAS_CORETYPE=<OpenBLAS's own detection> exported: what every run
#              measured before dtbench chose the core (Prescott on CPUs newer than the OpenBLAS)
#   pytorch    bench/torch_peer.py, fp32, as installed (Debian's torch calls the same OpenBLAS
#              for its GEMMs, with OpenBLAS's own detection, and oneDNN for its convolutions)
# and prints each one's median seconds per step (median over the rounds of each run's median) and
# the ratios to installed. Meant for a quiet machine.
#   bench/blas_cpu.sh [ROUNDS] [MODELS...]     (default: 3 fcn5 resnet50; from the build tree)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
if [ $# -gt 0 ]; then models=("$@"); else models=(fcn5 resnet50); fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
unset OPENBLAS_CORETYPE
torch_py=/usr/bin/python3
"$torch_py" -c 'import torch' 2>/dev/null || torch_py=
h5_py=python3
[ -x .venv/bin/python ] && h5_py=.venv/bin/python
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# OpenBLAS's own choice on this CPU: its core when loaded with nothing exported
own=$("$h5_py" -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0")
l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())')
batch_of() { case $1 in alexnet | vgg16 | resnet50 | googlenet) echo 16 ;; *) echo 64 ;; esac; }
iters_of() { case $1 in fcn5 | fcn8) echo 10 ;; lenet) echo 100 ;; *) echo 5 ;; esac; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# dtbench on one rank; appends its median seconds per step to $out/$1; $2: OPENBLAS_CORETYPE or ""
dtbench_run() {
    local file=$1 core=$2 m=$3
    env ${core:+OPENBLAS_CORETYPE=$core} mpirun -np 1 --bind-to none ${core:+-x OPENBLAS_CORETYPE} \
        src/dtbench --model "$m" --dataset synthetic --batch "$(batch_of "$m")" \
        --iters "$(iters_of "$m")" --warmup 2 --threads 1 --sample-hz 0 --calibrate-iters 0 \
        --output "$out/$file.h5" --overwrite >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
    sed -n 's/.*median iteration \([0-9.]*\) ms.*/\1/p' "$out/log" | awk '{print $1 / 1000}' \
        >>"$out/$file"
}
core_of() { # the 'blas core' line of a dtbench file
    "$h5_py" bench/bench_read.py kernel-choices --line 1 "$1"
}

echo "OpenBLAS's own detection on this CPU: $own"
printf "%-9s %5s %6s %10s %10s %10s %10s %9s %9s %9s\n" model batch rounds installed exported \
    own pytorch exp/inst own/inst pt/inst
for m in "${models[@]}"; do
    rm -f "$out/$m".*
    for r in $(seq "$rounds"); do
        dtbench_run "$m.installed" "" "$m"
        chosen=$(core_of "$out/$m.installed.h5")
        core=${chosen#blas core: }
        core=${core%%:*}
        dtbench_run "$m.exported" "$core" "$m"
        dtbench_run "$m.own" "$own" "$m"
        if [ -n "$torch_py" ]; then
            "$torch_py" bench/torch_peer.py --model "$m" --batch "$(batch_of "$m")" \
                --iters "$(iters_of "$m")" --warmup 2 --threads 1 --no-times 2>/dev/null |
                "$h5_py" -c 'import json, sys; print(json.load(sys.stdin)["median_s"])' \
                    >>"$out/$m.pytorch"
        fi
    done
    i=$(median <"$out/$m.installed") e=$(median <"$out/$m.exported") o=$(median <"$out/$m.own")
    p=$( [ -s "$out/$m.pytorch" ] && median <"$out/$m.pytorch" || echo nan)
    awk -v m="$m" -v b="$(batch_of "$m")" -v r="$rounds" -v i="$i" -v e="$e" -v o="$o" -v p="$p" \
        'BEGIN {printf "%-9s %5d %6d %10.3f %10.3f %10.3f %10.3f %9.2f %9.2f %9.2f\n",
                m, b, r, i, e, o, p, e / i, o / i, p / i}'
    echo "  dtbench installed: $chosen"
done
echo "seconds per step (median); ratios > 1: slower than installed"
