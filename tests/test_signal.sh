# test_signal.sh - a graceful stop: SIGTERM to every rank (what scancel and Slurm's time limit do)
# or SIGUSR1 to ONE rank makes every rank stop after the same iteration, write what it has and
# close the file, marked stop_reason=signal and status 2 on every rank. SIGPIPE ends no rank. (SIGTERM to mpirun also
# works, but mpirun SIGKILLs the ranks odls_base_sigkill_timeout later, so on a loaded machine the
# outcome would be Open MPI's timing, not dtbench's: see docs/reliability.md,
# "Stopping a run early".)
. "$(dirname "$0")/lib.sh"

# start_run FILE [NP [ARGS]] : a long run in the background; waits until 2 blocks are written.
start_run() {
    local out=$1 np=${2:-2}
    shift $(($# < 2 ? $# : 2))
    # timeout (not a shell function) is the background job (spawn runs it in place), so $job's
    # SIGTERM reaches mpirun.
    spawn timeout -k 30 300 "$MPIRUN" -np "$np" "$DTBENCH" --model lenet --dataset synthetic --batch 12 \
        --iters 1000000 --warmup 2 --flush-every 5 --output "$out" "$@" >"$out.log" 2>&1
    job=$SPAWNED
    wait_completed "$out" 10 120 || { kill -9 $job; fail "run did not start writing"; }
}

# check_stopped FILE : stopped by the signal after the same iteration (>= 10) on every rank, one
# final model, the file closed within 10 s of the signal (catches a hang; the figure is printed).
check_stopped() {
    h5check stopped "$1" --reason signal --lockstep --min-completed 10 --same-params --max-latency 10
}

# term_ranks FILE : SIGTERM to every rank of the run writing FILE, as scancel does.
term_ranks() {
    kill -TERM $(pids_of "$1")
}

# 1. SIGTERM to every rank; before it, SIGPIPE to every rank, which must not end them: the kernel
#    sends it to a rank whose write meets a peer's closed socket (Open MPI's TCP link to a rank that
#    was just killed), and the rank must live on until its watchdog has marked the file
#    (test_slurm_peer.sh part 1 lost the file that way, 1 run in 4).
start_run "$WORK/term.h5"
pids=$(pids_of "$WORK/term.h5")
kill -PIPE $pids
sleep 0.5
for p in $pids; do kill -0 "$p" 2>/dev/null || fail "a rank ended on SIGPIPE: $(tail -3 "$WORK/term.h5.log")"; done
wait_completed "$WORK/term.h5" 20 60 || fail "the ranks did not go on after SIGPIPE"
t0=$(date +%s.%N)
term_ranks "$WORK/term.h5"
set +e; wait $job; set -e
elapsed=$(echo "$(date +%s.%N) - $t0" | bc)
check_stopped "$WORK/term.h5"
grep -q "stopped early (signal)" "$WORK/term.h5.log" || fail "rank 0 did not report the early stop"
# Generous bound (a loaded CI machine): it catches a hang, the figure itself is printed.
[ "$(echo "$elapsed < 10" | bc)" = 1 ] || fail "took $elapsed s from SIGTERM to exit"
pass "SIGPIPE then SIGTERM to every rank: SIGPIPE ignored, every rank stopped; mpirun exited after $elapsed s"

# 2. SIGUSR1 to rank 1 only: the stop vote reaches rank 0 too.
start_run "$WORK/usr1.h5"
pid1=$(pids_of "$WORK/usr1.h5" 1)
kill -USR1 "$pid1"
set +e; wait $job; rc=$?; set -e
[ "$rc" = 0 ] || fail "run stopped by SIGUSR1 exited $rc"
check_stopped "$WORK/usr1.h5"
pass "SIGUSR1 to one rank: all ranks stopped after the same iteration, exit 0"

# 3. Every other strategy, 4 ranks: SIGTERM to every rank ends the run without a hang, each rank
#    closes the file as stopped early, and all end with one model (servers and rings drained).
specs="async:--ps-ranks 1 --staleness 3" # the quick suite; ssp and mixed with --long
long_part "SIGTERM to ssp and mixed" &&
    specs="ssp:--staleness 2|$specs|mixed:--ranks-per-node 2"
IFS='|' read -ra specs <<<"$specs"
for spec in "${specs[@]}"; do
    x=${spec%%:*}
    start_run "$WORK/$x.h5" 4 --exchange $x ${spec#*:}
    term_ranks "$WORK/$x.h5"
    set +e; wait $job; set -e
    h5check stopped "$WORK/$x.h5" --reason signal --same-params
done
