# lib.sh - shared set-up for dtbench's shell tests (sourced). Runs Open MPI as on a cluster node
# on this small machine: as root, oversubscribed, yielding when idle (otherwise oversubscribed
# ranks busy-poll), with a private session folder per test, removed on exit. pipefail: in
# `run_np ... | tail -1` a failing dtbench fails the test (without it, only tail's status counts).
# So a pipeline must not end early on purpose: write `grep -q PATTERN <<<"$out"`, not
# `echo "$out" | grep -q PATTERN`, whose writer can die of SIGPIPE once grep has matched.
set -euo pipefail

: "${DTBENCH:=$(pwd)/bin/dtbench}" # the front door, as make check and users run it
: "${MPIRUN:=mpirun}"
: "${TESTS_SRCDIR:=$(cd "$(dirname "$0")" && pwd)}"
: "${PYTHON:=python3}"
ANALYSIS_DIR=$(cd "$TESTS_SRCDIR/../analysis" && pwd)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
# mpirun forwards SIGTERM to the ranks, then SIGKILLs them after this many seconds (1 by default in
# Open MPI 4): a loaded 2-core machine needs more for the ranks to finish and close the file.
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-3}
export HDF5_USE_FILE_LOCKING=FALSE
# Fashion-MNIST as shipped by Debian's dataset-fashion-mnist.
FMNIST_DIR=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtbench-test.XXXXXX")
export OMPI_MCA_orte_tmpdir_base="$WORK/ompi" OMPI_MCA_btl_vader_backing_directory="$WORK/ompi"
mkdir -p "$WORK/ompi"

# spawn CMD... : starts CMD in the background in a session of its own (setsid), its pid in
# SPAWNED. end_spawned kills every process of every such session (SIGKILL): a launcher, its
# daemons and ranks, whatever state they are in. The EXIT trap runs it, so that a test that
# fails (or is killed by make's timeout, SIGTERM) never leaves anything running.
SPAWNED_ALL=()
spawn() {
    setsid "$@" &
    SPAWNED=$!
    SPAWNED_ALL+=("$SPAWNED")
}
# kill_spawned PID : every process of PID's session (a spawned job: its launcher, timeout,
# daemons, ranks) frozen with SIGSTOP, then SIGKILLed, as a node failure ends them: none runs on,
# whatever has been started so far (a launcher's children are in its session from their fork).
# A process forked while one pass lists the session is caught by the next: three STOP passes,
# then KILL passes until only zombies are left (1 s at most).
kill_spawned() {
    local i
    kill -STOP "$1" 2>/dev/null || true # if it had not become a session yet (nothing forked)
    for i in 1 2 3; do pkill -STOP -s "$1" 2>/dev/null || true; done
    kill -KILL "$1" 2>/dev/null || true
    for i in $(seq 1 50); do
        pkill -KILL -s "$1" 2>/dev/null || break
        [ -n "$(ps -o stat= -s "$1" | grep -v '^Z')" ] || break
        sleep 0.02
    done
}
end_spawned() {
    local s
    for s in "${SPAWNED_ALL[@]}"; do kill_spawned "$s"; done
}
trap 'end_spawned; rm -rf "$WORK"' EXIT
trap 'exit 143' TERM

# run_np N ARGS... : dtbench on N ranks, with a time limit so that no test can hang.
run_np() {
    local n=$1
    shift
    timeout -k 5 "${RUN_TIMEOUT:-300}" "$MPIRUN" -np "$n" "$DTBENCH" "$@"
}

# run_refused NRANKS ARGS... : run_np for a run that is to be refused (exit 2). Every rank then
# ends by itself (usage_check_all), and mpirun's wait before it SIGKILLs the other ranks of a job
# in which one exited non-zero is pure delay: twice odls_base_sigkill_timeout (above), 6 s a run.
run_refused() {
    OMPI_MCA_odls_base_sigkill_timeout=0 run_np "$@"
}

# py ARGS... : $PYTHON with one BLAS thread, for the Python helpers below: NumPy's OpenBLAS
# otherwise starts a thread per core at import, a tenth of a second of CPU in each of the
# hundreds of short checks a suite starts (the checks multiply small arrays, if at all).
py() {
    OPENBLAS_NUM_THREADS=1 "$PYTHON" "$@"
}

# h5check CHECK FILE... [OPTIONS] : tests/check_h5.py, assertions on results files.
h5check() {
    py "$TESTS_SRCDIR/check_h5.py" "$@"
}

# pycheck NAME CHECK ARGS... : tests/check_NAME.py CHECK ARGS...; one line, status 1 on a failure.
pycheck() {
    py "$TESTS_SRCDIR/check_$1.py" "${@:2}"
}

# make_data WHAT ARGS... : tests/make_data.py (IDX files, a Fashion-MNIST subset, zeros).
make_data() {
    py "$TESTS_SRCDIR/make_data.py" "$@"
}

# same_loss TOLERANCE REFERENCE.h5 OTHER.h5... : every stage of each OTHER records the loss of the
# one-process run REFERENCE at every iteration, within TOLERANCE (hybrid runs: the mean over the
# replicas, each of which records the mean over its share of the batch).
same_loss() {
    local tol=$1 ref=$2
    shift 2
    h5check same-loss "$@" --ref "$ref" --tol "$tol"
}

analyze() {
    PYTHONPATH="$ANALYSIS_DIR${PYTHONPATH:+:$PYTHONPATH}" py -m dtbench_analysis "$@"
}

# find_torch_python: sets TORCH_PYTHON (if unset) to the first of "$PYTHON" and /usr/bin/python3
# that imports torch and numpy (Debian's python3-torch, installed by scripts/setup.sh); status 1 if
# none does.
find_torch_python() {
    local p
    if [ -z "${TORCH_PYTHON:-}" ]; then
        for p in "$PYTHON" /usr/bin/python3; do
            if "$p" -c "import torch, numpy" 2>/dev/null; then
                TORCH_PYTHON=$p
                break
            fi
        done
    fi
    [ -n "${TORCH_PYTHON:-}" ]
}

# fmnist_subset DIR N : the first N training and test images of Fashion-MNIST ($FMNIST_DIR) as
# uncompressed IDX files in DIR, their headers' counts set to N.
fmnist_subset() {
    make_data fmnist-subset "$FMNIST_DIR" "$1" "$2"
}

# fmnist_small [TEST_IMAGES] : prints $WORK/fmnist after putting there Fashion-MNIST's training
# files (links: the batches are those of the full set, bit for bit) and its first TEST_IMAGES test
# images (default 256; fmnist_subset). Each evaluation then reads those instead of all 10000
# (~2 s of CPU per rank here): for runs that compare parameters or losses (they evaluate once, at
# the end) or need an accuracy, not its last digit. Equality within float tolerance needs no ReLU
# input or pooling tie within rounding of a flip, which depends on the training data: LeNet with 4
# micro-batches crosses one when trained on the first 256 images instead.
fmnist_small() {
    fmnist_subset "$WORK/fmnist" "${1:-256}"
    rm -f "$WORK"/fmnist/train-*
    ln -s "$FMNIST_DIR"/train-images-idx3-ubyte.gz "$FMNIST_DIR"/train-labels-idx1-ubyte.gz "$WORK/fmnist/"
    echo "$WORK/fmnist"
}

# wait_h5 PATH N [--timeout S] [--poll S] [--all-ranks] : waits until every worker rank has N
# iterations in the results file PATH (or any *.h5 in the folder PATH) while the run writes it;
# N = 0: until every rank's pid is recorded. Status 1 after S seconds (120). tests/wait_h5.py.
wait_h5() {
    "$PYTHON" "$TESTS_SRCDIR/wait_h5.py" "$@"
}

# ranks_of NAME FILE [RANK] : /ranks/NAME of a (running) results file, every rank's or RANK's;
# a read in the middle of a flush is retried (tests/ranks_of.py).
ranks_of() {
    "$PYTHON" "$TESTS_SRCDIR/ranks_of.py" "$@"
}

# pids_of FILE [RANK], hosts_of FILE [RANK] : the pids, the host names of the ranks or of RANK.
pids_of() { ranks_of pid "$@"; }
hosts_of() { ranks_of host "$@"; }

# wait_completed FILE N [SECONDS] : wait_h5 FILE N --timeout SECONDS (default 120).
wait_completed() {
    wait_h5 "$1" "$2" --timeout "${3:-120}"
}

fail() {
    echo "FAIL: $*"
    exit 1
}

# seconds_since T0 : the seconds since T0 (a `date +%s.%N`), to one decimal.
seconds_since() {
    awk -v t0="$1" -v now="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", now - t0 }'
}

# seconds_to_end STATE T0 : the seconds from T0 to the end= line of a batch job's state file
# (slurm/dtbench.sbatch), to one decimal.
seconds_to_end() {
    awk -F= -v t0="$2" '$1 == "end" { printf "%.1f\n", $2 - t0 }' "$1"
}

# below X LIMIT : status 0 when the number X is below LIMIT.
below() {
    awk -v x="$1" -v limit="$2" 'BEGIN { exit !(x < limit) }'
}

pass() {
    echo "ok: $*"
}

# long_part WHAT : status 0 under the long checks (DTBENCH_TEST_LONG=1: scripts/test.sh --long,
# what CI runs), where a test also runs WHAT, its slower variations (more ranks, more strategies,
# runs to a target accuracy); otherwise prints that the quick suite leaves WHAT to them, status 1.
long_part() {
    [ "${DTBENCH_TEST_LONG:-0}" = 1 ] && return 0
    echo "left to the long checks (scripts/test.sh --long): $1"
    return 1
}

# expect_bad NRANKS PATTERN ARGS... : dtbench must exit 2 with one error line matching PATTERN
# (NRANKS 0: without mpirun), print nothing else on stderr, and leave no bad.h5 in the current
# folder.
expect_bad() {
    local n=$1 pattern=$2
    shift 2
    set +e
    local args=() a # --np4 anywhere: run on 4 ranks
    for a in "$@"; do if [ "$a" = --np4 ]; then n=4; else args+=("$a"); fi; done
    set -- "${args[@]}"
    if [ "$n" = 0 ]; then "$DTBENCH" "$@" >out.txt 2>err.txt; else run_refused "$n" "$@" >out.txt 2>err.txt; fi
    local rc=$?
    set -e
    [ "$rc" = 2 ] || fail "'$*' on $n ranks: exit status $rc, expected 2 ($(cat err.txt))"
    local lines
    lines=$(grep -c '^dtbench' err.txt || true)
    [ "$lines" = 1 ] || fail "'$*': $lines dtbench lines on stderr, expected 1: $(cat err.txt)"
    grep -q -- "$pattern" <<<"$(grep '^dtbench' err.txt)" || fail "'$*': error does not match '$pattern': $(cat err.txt)"
    if [ "$n" = 0 ]; then
        [ "$(wc -l <err.txt)" = 1 ] || fail "'$*': stderr is not one line: $(cat err.txt)"
    fi
    [ ! -e bad.h5 ] || fail "'$*' left bad.h5 behind"
    pass "$* -> $(grep '^dtbench' err.txt)"
}

# run_check SECONDS NRANKS PROGRAM ARGS...: a check program (exchange_avg, grad_dtype_check) on
# NRANKS ranks within SECONDS; prints its last line, or its whole output and fails the test.
run_check() {
    local secs=$1 n=$2 prog=$3
    shift 3
    timeout -k 5 "$secs" "$MPIRUN" -np "$n" "$prog" "$@" >"$WORK/check.out" 2>&1 || {
        cat "$WORK/check.out"
        fail "$(basename "$prog") $* on $n ranks"
    }
    tail -1 "$WORK/check.out"
}

# mount_tmpfs SIZE: a tmpfs of SIZE (e.g. 32m) on $WORK/disk, unmounted at exit; exit 77 (skip,
# saying why) where mounting is not allowed (needs root in a mount namespace).
mount_tmpfs() {
    mkdir -p "$WORK/disk"
    mount -t tmpfs -o size="$1" dtbench-test "$WORK/disk" 2>"$WORK/mount.err" || {
        echo "SKIP: cannot mount a tmpfs here (needs root in a mount namespace): $(cat "$WORK/mount.err")"
        exit 77
    }
    trap 'end_spawned; umount "$WORK/disk" 2>/dev/null; rm -rf "$WORK"' EXIT
}
