#!/bin/bash
# exchange_vs_mpi.sh - dtbench's recorded gradient exchange against plain MPI on the same buckets
# and ranks, side by side in one run.
#
#   bench/exchange_vs_mpi.sh            # LeNet and FCN-5, 2 and 4 ranks, transports mpi and hier
#   ROUNDS=5 MODELS=lenet NPS=2 TRANSPORTS=mpi OVERLAP=1 bench/exchange_vs_mpi.sh
#
# Per configuration and round (rounds alternate dtbench and its peers, so that load from other
# work on the machine hits both alike): dtbench --exchange sync (synthetic data,
# --calibrate-iters 5), then bench/exchange_alone.c twice (plain MPI, no dtbench code):
#   alone  MPI_Allreduce of the same buckets (cut from the end as dtbench cuts them), back to
#          back after a barrier: the library's collective alone;
#   peer   "iterations" shaped as dtbench's: dtbench's CPU work per iteration (data + forward +
#          backward + update, measured on ONE rank with the same per-rank batch, where nothing
#          preempts it) spent as CPU time, the gradient written, a one-int allreduce (the stop
#          vote: arrival wait), then MPI_Allreduce of the buckets (transfer).
# Printed per configuration, medians over the rounds (each round's value a median over ranks x
# measured iterations, as dtbench's summary pools them), ms:
#   exch, wait, xfer   dtbench's `exchange`, `exchange_wait` and exchange - exchange_wait
#   p_exch, p_xfer     the same quantities of the peer
#   calib              dtbench's own calibration (calibration_exchange_s)
#   alone              the library's collective back to back
#   ratio   exch / p_exch (mpi), xfer / calib (hier): dtbench against plain MPI in the same shape
#   xratio  xfer / p_xfer (mpi), xfer / calib (hier): the transfer alone
#   lratio  xfer / alone: the transfer against the collective back to back; above 1 on an
#           oversubscribed machine, where p_xfer / alone shows what the machine, not dtbench,
#           costs (printed as pratio)
#   iter, p_iter       dtbench's iteration (`total`) and the peer's (compute + vote + buckets)
#   iratio  iter / p_iter: with more ranks than cores (4 ranks here) a rank's recorded exchange
#           also holds its core-mate's compute, in a share that depends on how the scheduler
#           interleaves them (dtbench's compute is preempted less than the peer's spin, so its
#           exchange holds more); the iteration does not depend on that split: iratio <= 1.10
#           says dtbench's exchange costs what plain MPI costs in the same iteration
#   noise   (max - min) / median of ratio over the rounds
# OVERLAP=1: every configuration without and with --overlap, alternating in each round (rows
# ov 0 and ov 1; with overlap `exch` is the exposed exchange, `exchange_hidden` is apart).
# The target: ratio <= 1.10 for mpi. Needs mpirun; run as root it adds the flags.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DTBENCH=${DTBENCH:-$here/../src/dtbench}
PYTHON=${PYTHON:-$here/../.venv/bin/python}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-200}
MODELS=${MODELS:-"lenet fcn5"}
NPS=${NPS:-"2 4"}
TRANSPORTS=${TRANSPORTS:-"mpi hier"}
OVERLAP=${OVERLAP:-0}
BUCKET_MB=${BUCKET_MB:-25}
CALIBRATE=${CALIBRATE:-5} # 0: an older dtbench without --calibrate-iters (calib prints nan)
calib_flag="--calibrate-iters $CALIBRATE"
[ "$CALIBRATE" = 0 ] && calib_flag=""
ovs=0
[ "$OVERLAP" = 1 ] && ovs="0 1"
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
WORK=$(mktemp -d)
export OMPI_MCA_btl_vader_backing_directory=$WORK OMPI_MCA_orte_tmpdir_base=$WORK
trap 'rm -rf "$WORK"' EXIT
mpicc -O2 -o "$WORK/alone" "$here/exchange_alone.c"

iters_for() { case $1 in fcn5) echo $((ITERS < 6 ? ITERS : 6)) ;; *) echo "$ITERS" ;; esac; }

# h5 FILE: prints "exch_ms wait_ms xfer_ms calib_ms nparams compute_ms total_ms" (pooled medians)
h5() {
    "$PYTHON" "$here/bench_read.py" exchange-vs-mpi "$1"
}

med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

bucket=$(awk -v m="$BUCKET_MB" 'BEGIN {printf "%d", m * 1048576 / 4}')
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
printf "%-6s %-3s %-5s %-2s %8s %8s %8s %8s %8s %8s %8s %6s %6s %6s %6s %8s %8s %6s %5s\n" model np tport ov \
    exch wait xfer p_exch p_xfer calib alone ratio xratio lratio pratio iter p_iter iratio noise
for model in $MODELS; do
    # dtbench's CPU work per iteration: one rank, the same per-rank batch, nothing to preempt it
    rm -f "$WORK/one.h5"
    mpirun -np 1 "$DTBENCH" --model "$model" --dataset synthetic --iters "$(iters_for "$model")" \
        --warmup 1 --batch 8 --sample-hz 0 --output "$WORK/one.h5" >/dev/null
    read -r _ _ _ _ _ busy _ < <(h5 "$WORK/one.h5")
    echo "  $model: compute on one rank $busy ms" >&2
    for np in $NPS; do
        for tp in $TRANSPORTS; do
            declare -A V=()
            for r in $(seq "$ROUNDS"); do
                for ov in $ovs; do
                    extra=""
                    [ "$tp" = hier ] && extra="--ranks-per-node $((np / 2 > 0 ? np / 2 : 1))"
                    [ "$ov" = 1 ] && extra="$extra --overlap"
                    rm -f "$WORK/r.h5"
                    mpirun -np "$np" "$DTBENCH" --model "$model" --dataset synthetic --exchange sync \
                        --transport "$tp" $extra --iters "$(iters_for "$model")" --warmup 1 \
                        --bucket-mb "$BUCKET_MB" --batch $((8 * np)) $calib_flag \
                        --sample-hz 0 --output "$WORK/r.h5" >/dev/null
                    read -r e w x c n comp it < <(h5 "$WORK/r.h5")
                    reps=15
                    [ "$model" = fcn5 ] && reps=5
                    a=$(mpirun -np "$np" "$WORK/alone" "$n" "$bucket" $reps | awk '{print $2}')
                    read -r pe pw px pit < <(mpirun -np "$np" "$WORK/alone" "$n" "$bucket" \
                        "$(iters_for "$model")" "$busy" | awk '{print $2, $4, $6, $8}')
                    pr=$pe pxr=$px
                    [ "$tp" = hier ] && pr=$c pxr=$c
                    V[$ov.e]+="$e " V[$ov.w]+="$w " V[$ov.x]+="$x " V[$ov.pe]+="$pe " V[$ov.px]+="$px "
                    V[$ov.c]+="$c " V[$ov.a]+="$a " V[$ov.r]+="$(div "$e" "$pr") "
                    V[$ov.xr]+="$(div "$x" "$pxr") " V[$ov.lr]+="$(div "$x" "$a") "
                    V[$ov.pr]+="$(div "$px" "$a") "
                    V[$ov.it]+="$it " V[$ov.pit]+="$pit " V[$ov.ir]+="$(div "$it" "$pit") "
                    echo "  round $r ($(cut -d' ' -f1 /proc/loadavg) load): $model np $np $tp ov $ov:" \
                        "exch $e wait $w xfer $x calib $c alone $a iter $it peer exch $pe wait $pw" \
                        "xfer $px iter $pit (compute $comp ms, peer's $busy)" >&2
                done
            done
            for ov in $ovs; do
                mr=$(echo "${V[$ov.r]}" | med)
                noise=$(echo "${V[$ov.r]}" | tr ' ' '\n' | grep . | sort -g |
                    awk -v m="$mr" 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f", (hi - lo) / m}')
                printf "%-6s %-3s %-5s %-2s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %6.3f %6.3f %6.3f %6.3f %8.3f %8.3f %6.3f %5s\n" \
                    "$model" "$np" "$tp" "$ov" "$(echo "${V[$ov.e]}" | med)" "$(echo "${V[$ov.w]}" | med)" \
                    "$(echo "${V[$ov.x]}" | med)" "$(echo "${V[$ov.pe]}" | med)" \
                    "$(echo "${V[$ov.px]}" | med)" "$(echo "${V[$ov.c]}" | med)" \
                    "$(echo "${V[$ov.a]}" | med)" "$mr" "$(echo "${V[$ov.xr]}" | med)" \
                    "$(echo "${V[$ov.lr]}" | med)" "$(echo "${V[$ov.pr]}" | med)" \
                    "$(echo "${V[$ov.it]}" | med)" "$(echo "${V[$ov.pit]}" | med)" \
                    "$(echo "${V[$ov.ir]}" | med)" "$noise"
            done
            unset V
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
