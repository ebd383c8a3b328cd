#!/bin/bash
# grow_cost.sh - what a results file that grows with the run costs: the time of one
# extension step, and the recorder's per-iteration overhead of a growing file against the same
# run with /iterations allocated whole, side by side in one run.
#
#   bench/grow_cost.sh                       # 2 ranks, LeNet, 25000 iterations, 3 rounds
#   ROUNDS=5 NP=4 ITERS=40000 STEP=2000 bench/grow_cost.sh
#
# Per round, alternating (so that load from other work on the machine hits both alike): the run
# allocated whole (DTBENCH_TEST_GROW_STEP=0, as async and mixed runs are), then the growing run
# (the real step, 2 MiB of /iterations or 256 iterations, unless STEP= sets one in iterations).
# Printed per round and as medians over the rounds:
#   ext_ms     median duration of an extension step (/iterations attribute extension_s_median:
#              reserve, broadcast, H5Dset_extent of every dataset, H5Fflush), rank 0
#   ext_rec_ms median `record` of the iterations that follow an extension (what the rank saw)
#   rec_us     mean recorder cost per iteration (`record`, all ranks, measured iterations):
#              whole, growing, and their ratio (growing / whole); grow_other: the growing
#              run's mean over the iterations that follow no extension (block writes into chunks)
#   iter_ms    median iteration time (`total`) of each, for scale
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DTBENCH=${DTBENCH:-$here/../src/dtbench}
PYTHON=${PYTHON:-$here/../.venv/bin/python}
ROUNDS=${ROUNDS:-3}
NP=${NP:-2}
ITERS=${ITERS:-25000}
STEP=${STEP:-}
MODEL=${MODEL:-lenet}
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1 HDF5_USE_FILE_LOCKING=FALSE
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/grow_cost.XXXXXX")
export OMPI_MCA_btl_vader_backing_directory=$WORK OMPI_MCA_orte_tmpdir_base=$WORK
trap 'rm -rf "$WORK"' EXIT
run() { # OUT STEP
    DTBENCH_TEST_GROW_STEP=$2 mpirun -np "$NP" "$DTBENCH" --model "$MODEL" --dataset synthetic \
        --batch 4 --iters "$ITERS" --warmup 10 --sample-hz 0 --output "$1" >"$1.log" 2>&1 ||
        { cat "$1.log"; exit 1; }
}
for r in $(seq 1 "$ROUNDS"); do
    run "$WORK/whole$r.h5" 0
    run "$WORK/grow$r.h5" "$STEP"
done
"$PYTHON" "$here/bench_read.py" grow-cost "$WORK" "$ROUNDS"
