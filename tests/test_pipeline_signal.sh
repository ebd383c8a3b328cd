# test_pipeline_signal.sh - a graceful stop along a pipeline: SIGTERM to the first stage of one
# replica of a 2-replica x 2-stage hybrid run, or SIGUSR1 to the middle stage of a 3-stage
# pipeline, makes every rank stop after the same iteration and close the file, marked
# stop_reason=signal. The vote travels in the pipeline's message headers (forward to the last
# stage, back to the first) and then with the replicas' exchange. (SIGTERM to mpirun, which
# forwards it to every rank, is tests/test_signal.sh's case; the signal goes to one rank here so
# that the vote has to travel, and so that mpirun's SIGKILL one second after forwarding SIGTERM
# cannot cut a close slowed down by a loaded machine.)
. "$(dirname "$0")/lib.sh"

# start_run FILE NP ARGS... : a long run in the background; waits until 2 blocks are in the file.
start_run() {
    local out=$1 np=$2
    shift 2
    spawn timeout -k 30 300 "$MPIRUN" -np "$np" "$DTBENCH" --model lenet --dataset synthetic --batch 8 \
        --iters 1000000 --warmup 2 --flush-every 5 --output "$out" "$@" >"$out.log" 2>&1
    job=$SPAWNED
    wait_completed "$out" 10 120 || { kill -9 $job; fail "run did not start writing"; }
}

# check_stopped FILE : stopped by the signal after the same iteration (>= 10) on every rank
check_stopped() {
    h5check stopped "$1" --reason signal --lockstep --min-completed 10
}

# 1. SIGTERM to rank 0 (stage 0 of replica 0) of a 2 x 2 hybrid run.
start_run "$WORK/term.h5" 4 --parallel hybrid --stages 2 --microbatches 2
pid0=$(pids_of "$WORK/term.h5" 0)
kill -TERM "$pid0"
set +e; wait $job; rc=$?; set -e
[ "$rc" = 0 ] || fail "run stopped by SIGTERM to one rank exited $rc"
check_stopped "$WORK/term.h5"
grep -q "stopped early (signal)" "$WORK/term.h5.log" || fail "rank 0 did not report the early stop"
pass "SIGTERM to one stage: every stage of every replica stopped after the same iteration"

# 2. SIGUSR1 to the middle stage (rank 1) of a 3-stage pipeline only.
start_run "$WORK/usr1.h5" 3 --parallel model --microbatches 2
pid1=$(pids_of "$WORK/usr1.h5" 1)
kill -USR1 "$pid1"
set +e; wait $job; rc=$?; set -e
[ "$rc" = 0 ] || fail "run stopped by SIGUSR1 exited $rc"
check_stopped "$WORK/usr1.h5"
pass "SIGUSR1 to a middle stage: the vote reached both ends, all ranks stopped, exit 0"
