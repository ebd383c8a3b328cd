#!/bin/bash
# grad_dtype.sh - the gradient exchange in fp32 against bf16 and fp16 (--grad-dtype), same model,
# ranks and buckets, in one run of this script.
#
#   bench/grad_dtype.sh                       # LeNet and FCN-5, 2 and 4 ranks, transport mpi
#   ROUNDS=5 MODELS=lenet NPS=2 TRANSPORT=hier bench/grad_dtype.sh
#
# Per configuration, ROUNDS rounds; each round runs fp32, bf16 and fp16 one after the other
# (alternating, so that load from other work on the machine hits all alike): dtbench --exchange
# sync on synthetic data. Printed per configuration, medians over the rounds of:
#   xfer    the recorded exchange minus exchange_wait (ms): the transfer, casts included
#   calib   calibration_exchange_s (ms): the transport's collectives alone on the run's buckets
#           (for bf16/fp16 with the casts to and from the wire type)
#   ratio   bf16 / fp32 and fp16 / fp32 of xfer; bytes: bytes_sent bf16 / fp32 (0.5 expected)
# On one shared-memory node the wire is memory and the casts cost as much as the bytes saved;
# the halving pays where the link is slower than the casts (between nodes; NCCL casts on the
# GPU). Needs mpirun; run as root it adds the flags.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DTBENCH=${DTBENCH:-$here/../src/dtbench}
PYTHON=${PYTHON:-$here/../.venv/bin/python}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-20}
MODELS=${MODELS:-"lenet fcn5"}
NPS=${NPS:-"2 4"}
TRANSPORT=${TRANSPORT:-mpi}
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
WORK=$(mktemp -d)
export OMPI_MCA_btl_vader_backing_directory=$WORK OMPI_MCA_orte_tmpdir_base=$WORK
trap 'rm -rf "$WORK"' EXIT

iters_for() { case $1 in fcn5) echo $((ITERS < 6 ? ITERS : 6)) ;; *) echo "$ITERS" ;; esac; }

# h5 FILE: prints "xfer_ms calib_ms bytes_sent"
h5() {
    "$PYTHON" "$here/bench_read.py" grad-dtype "$1"
}

med() { tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf "%-6s %-3s %-5s %9s %9s %9s %9s %9s %9s %7s %7s %6s\n" model np tport xfer32 xfer16b \
    xfer16f calib32 calib16b calib16f bf16/32 fp16/32 bytes
for model in $MODELS; do
    for np in $NPS; do
        extra=""
        [ "$TRANSPORT" = hier ] && extra="--ranks-per-node $((np / 2 > 0 ? np / 2 : 1))"
        declare -A xf=() ca=() by=()
        for r in $(seq "$ROUNDS"); do
            for dt in fp32 bf16 fp16; do
                rm -f "$WORK/r.h5"
                mpirun -np "$np" "$DTBENCH" --model "$model" --dataset synthetic --exchange sync \
                    --transport "$TRANSPORT" $extra --iters "$(iters_for "$model")" --warmup 1 \
                    --batch $((8 * np)) --grad-dtype "$dt" --calibrate-iters 5 --sample-hz 0 \
                    --output "$WORK/r.h5" >/dev/null
                read -r x c b < <(h5 "$WORK/r.h5")
                xf[$dt]="${xf[$dt]:-} $x" ca[$dt]="${ca[$dt]:-} $c" by[$dt]=$b
                echo "  round $r: $model np $np $TRANSPORT $dt: xfer $x ms, calib $c ms," \
                    "bytes_sent $b" >&2
            done
        done
        m32=$(echo ${xf[fp32]} | med) mb=$(echo ${xf[bf16]} | med) mf=$(echo ${xf[fp16]} | med)
        printf "%-6s %-3s %-5s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7.3f %7.3f %6.3f\n" \
            "$model" "$np" "$TRANSPORT" "$m32" "$mb" "$mf" "$(echo ${ca[fp32]} | med)" \
            "$(echo ${ca[bf16]} | med)" "$(echo ${ca[fp16]} | med)" \
            "$(awk -v a="$mb" -v b="$m32" 'BEGIN {print a / b}')" \
            "$(awk -v a="$mf" -v b="$m32" 'BEGIN {print a / b}')" \
            "$(awk -v a="${by[bf16]}" -v b="${by[fp32]}" 'BEGIN {print a / b}')"
        unset xf ca by
    done
done
