#!/bin/bash
# records_cost.sh - what keeping every completed iteration through a lost peer costs
# (--peer-timeout, src/survival/watchdog_records.h): each recorded iteration is copied into the watchdog's
# store and sent to its keeper on another rank (one UDP datagram of up to 7 records). The same run
# with the watchdog off (--peer-timeout 0: no heartbeats, no copies) and on (the default, 10 s),
# alternating per round so that load from other work on the machine hits both alike.
#
#   bench/records_cost.sh                   # 2 ranks, LeNet, 3000 iterations, 3 rounds
#   ROUNDS=5 NP=4 ITERS=5000 bench/records_cost.sh
#
# Printed per round and as medians over the rounds:
#   rec_us   mean recorder cost per iteration (`record`: buffering, the copy and the datagram,
#            and the block writes), all ranks, measured iterations: off, on, and on - off
#   iter_ms  median iteration time (`total`), off and on, and their ratio (on / off)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DTBENCH=${DTBENCH:-$here/../src/dtbench}
PYTHON=${PYTHON:-$here/../.venv/bin/python}
ROUNDS=${ROUNDS:-3}
NP=${NP:-2}
ITERS=${ITERS:-3000}
MODEL=${MODEL:-lenet}
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1 HDF5_USE_FILE_LOCKING=FALSE
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/records_cost.XXXXXX")
export OMPI_MCA_btl_vader_backing_directory=$WORK OMPI_MCA_orte_tmpdir_base=$WORK
trap 'rm -rf "$WORK"' EXIT
run() { # OUT PEER_TIMEOUT
    mpirun -np "$NP" "$DTBENCH" --model "$MODEL" --dataset synthetic --batch 4 --iters "$ITERS" \
        --warmup 10 --sample-hz 0 --peer-timeout "$2" --output "$1" >"$1.log" 2>&1 ||
        { cat "$1.log"; exit 1; }
}
for r in $(seq 1 "$ROUNDS"); do
    run "$WORK/off$r.h5" 0
    run "$WORK/on$r.h5" 10
done
"$PYTHON" "$here/bench_read.py" records-cost "$WORK" "$ROUNDS"
