#!/bin/bash
# overlap_dtbench.sh - dtbench's own --overlap with polling against its progress thread,
# each against no overlap, in one run, rounds alternating the modes so that load from other work
# hits all of them alike:
#
#   bench/overlap_dtbench.sh                              # fcn5 and lenet, 2 ranks, 3 rounds
#   ROUNDS=5 MODELS=fcn5 NP=2 bench/overlap_dtbench.sh
#   SSP=1 bench/overlap_dtbench.sh                         # also ssp --staleness 1, poll vs thread
#
# Modes (synthetic data, --batch 8 per rank, sync with --calibrate-iters 0):
#   none    no --overlap: backward, then the buckets with blocking MPI_Allreduce
#   poll    --overlap --progress poll: MPI_Iallreduce per ready bucket, tested between layers
#   thread  --overlap --progress thread: a progress thread runs each ready bucket's blocking
#           MPI_Allreduce while backward computes (MPI_THREAD_MULTIPLE)
# Per model and mode, medians over rounds of each round's pooled median (ranks x measured
# iterations) of /iterations: backward, exchange (the exposed exchange), exchange_hidden, total
# (the iteration); and exposed / exposed(none), total / total(none). The issue's overlap target:
# exposed(poll or thread) <= exposed(none); the better mode is the one with the lower total.
# Buckets: BUCKET_MB (default 25 MiB: FCN-5's 472 MB are 19 buckets) for fcn5, LENET_BUCKET_MB
# (default 0.25: LeNet's 1.7 MB are 7 buckets; at 25 MiB it has one, ready only when backward
# ends) for lenet.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DTBENCH=${DTBENCH:-$here/../src/dtbench}
PYTHON=${PYTHON:-$here/../.venv/bin/python}
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-"fcn5 lenet"}
NP=${NP:-2}
BUCKET_MB=${BUCKET_MB:-25}
LENET_BUCKET_MB=${LENET_BUCKET_MB:-0.25}
SSP=${SSP:-0}
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
WORK=$(mktemp -d)
export OMPI_MCA_btl_vader_backing_directory=$WORK OMPI_MCA_orte_tmpdir_base=$WORK
trap 'rm -rf "$WORK"' EXIT

# h5 FILE: "backward exposed hidden total" (ms, pooled medians over ranks x measured iterations)
h5() {
    "$PYTHON" "$here/bench_read.py" overlap "$1"
}
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

modes="none poll thread"
[ "$SSP" = 1 ] && modes="$modes ssp-poll ssp-thread"
flags_of() {
    case $1 in
    none) echo "--exchange sync --calibrate-iters 0" ;;
    poll) echo "--exchange sync --calibrate-iters 0 --overlap --progress poll" ;;
    thread) echo "--exchange sync --calibrate-iters 0 --overlap --progress thread" ;;
    ssp-poll) echo "--exchange ssp --staleness 1 --progress poll" ;;
    ssp-thread) echo "--exchange ssp --staleness 1 --progress thread" ;;
    esac
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores), $NP ranks"
printf "%-6s %-10s %10s %10s %10s %10s %8s %8s\n" model mode backward exposed hidden total \
    exp/none tot/none
for model in $MODELS; do
    iters=60 bucket=$LENET_BUCKET_MB
    [ "$model" = fcn5 ] && iters=8 bucket=$BUCKET_MB
    declare -A V=()
    for r in $(seq "$ROUNDS"); do
        for mode in $modes; do
            rm -f "$WORK/r.h5"
            # shellcheck disable=SC2046
            mpirun -np "$NP" "$DTBENCH" --model "$model" --dataset synthetic $(flags_of "$mode") \
                --iters $iters --warmup 2 --bucket-mb "$bucket" --batch $((8 * NP)) \
                --sample-hz 0 --output "$WORK/r.h5" >/dev/null
            read -r b e h t < <(h5 "$WORK/r.h5")
            V[$mode.b]+="$b " V[$mode.e]+="$e " V[$mode.h]+="$h " V[$mode.t]+="$t "
            echo "  round $r ($(cut -d' ' -f1 /proc/loadavg) load) $model $mode: backward $b" \
                "exposed $e hidden $h total $t" >&2
        done
    done
    e0=$(echo "${V[none.e]}" | med) t0=$(echo "${V[none.t]}" | med)
    for mode in $modes; do
        e=$(echo "${V[$mode.e]}" | med) t=$(echo "${V[$mode.t]}" | med)
        printf "%-6s %-10s %10.3f %10.3f %10.3f %10.3f %8.3f %8.3f\n" "$model" "$mode" \
            "$(echo "${V[$mode.b]}" | med)" "$e" "$(echo "${V[$mode.h]}" | med)" "$t" \
            "$(awk -v a="$e" -v b="$e0" 'BEGIN {printf "%.3f", a / b}')" \
            "$(awk -v a="$t" -v b="$t0" 'BEGIN {printf "%.3f", a / b}')"
    done
    echo "  (buckets of $bucket MiB)"
    unset V
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
