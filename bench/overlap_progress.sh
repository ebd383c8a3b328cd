#!/bin/bash
# overlap_progress.sh - polling between layers against a progress thread (--overlap),
# in plain MPI (bench/overlap_progress.c), with each model's layer sizes and dtbench's own
# backward time, 2 ranks by default:
#
#   bench/overlap_progress.sh                      # lenet and fcn5, 2 ranks, 3 rounds
#   ROUNDS=5 MODELS=fcn5 NP=2 BUCKET_MB=25 bench/overlap_progress.sh
#
# Per model: one short dtbench run gives the median backward time (data-parallel, --batch 8 per
# rank as bench/exchange_vs_mpi.sh); then per round overlap_progress under MPI_THREAD_MULTIPLE
# (none, poll, thread) and under plain MPI_Init (none, poll: what the thread level itself costs),
# alternating. Prints per model and mode the medians over rounds of backward, exposed exchange
# and their sum (ms), and exposed / exposed without overlap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DTBENCH=${DTBENCH:-$here/../src/dtbench}
PYTHON=${PYTHON:-$here/../.venv/bin/python}
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-"lenet fcn5"}
NP=${NP:-2}
BUCKET_MB=${BUCKET_MB:-25}
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
WORK=$(mktemp -d)
export OMPI_MCA_btl_vader_backing_directory=$WORK OMPI_MCA_orte_tmpdir_base=$WORK
trap 'rm -rf "$WORK"' EXIT
mpicc -O2 -o "$WORK/ovp" "$here/overlap_progress.c" -lpthread

layers_of() { # parameters per layer, first layer first
    case $1 in
    lenet) echo 520,25050,400500,5010 ;;
    fcn5) echo 54790144,4196352,4196352,54814848 ;;
    esac
}
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
bucket=$(awk -v m="$BUCKET_MB" 'BEGIN {printf "%d", m * 1048576 / 4}')
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores), $NP ranks, buckets of $BUCKET_MB MiB"
printf "%-6s %-14s %9s %9s %9s %8s\n" model mode bwd exposed total vs_none
for model in $MODELS; do
    iters=20
    [ "$model" = fcn5 ] && iters=4
    mpirun -np "$NP" "$DTBENCH" --model "$model" --dataset synthetic --batch $((8 * NP)) \
        --iters $iters --warmup 1 --calibrate-iters 0 --sample-hz 0 --output "$WORK/b.h5" >/dev/null
    bwd=$("$PYTHON" "$here/bench_read.py" median-ms "$WORK/b.h5" backward)
    rm -f "$WORK/b.h5"
    reps=15
    [ "$model" = fcn5 ] && reps=3
    declare -A V=()
    for r in $(seq "$ROUNDS"); do
        for level in multiple single; do
            arg=""
            [ $level = single ] && arg=single
            out=$(mpirun -np "$NP" "$WORK/ovp" "$(layers_of "$model")" "$bwd" "$bucket" $reps $arg || true)
            echo "  round $r ($(cut -d' ' -f1 /proc/loadavg) load) $model $level: $(echo "$out" | tr '\n' ';')" >&2
            while read -r mode _ b _ e _ t; do
                k="$mode/$level"
                V[$k.b]+="$b " V[$k.e]+="$e " V[$k.t]+="$t "
            done < <(echo "$out" | grep -E '^(none|poll|thread) +bwd')
        done
    done
    for k in none/single poll/single none/multiple poll/multiple thread/multiple; do
        [ -n "${V[$k.e]:-}" ] || continue
        base=$(echo "${V[none/${k#*/}.e]}" | med)
        e=$(echo "${V[$k.e]}" | med)
        printf "%-6s %-14s %9.3f %9.3f %9.3f %8.3f\n" "$model" "$k" "$(echo "${V[$k.b]}" | med)" \
            "$e" "$(echo "${V[$k.t]}" | med)" "$(awk -v a="$e" -v b="$base" 'BEGIN {print a / b}')"
    done
    unset V
    echo "  (dtbench's backward: $bwd ms)"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
