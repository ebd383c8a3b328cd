#!/bin/bash
# test_early_signal.sh - a stop asked for during start-up is kept, never fatal (issue 15):
#   1. SIGUSR1 to every rank as soon as its handler is installed (/proc/PID/status SigCgt: at
#      dtbench's first instruction, before MPI_Init; the signal lands in MPI_Init, well before
#      the file is open): the run ends without an iteration, exit 0, and either no file at all
#      ("stopped during set-up": nothing was created) or the file closed and valid, marked
#      stop_reason=signal with 0 iterations on every rank (also with a parameter server);
#   2. SIGUSR1 to the batch template (slurm/dtbench.sbatch, launcher mpirun, no Slurm needed)
#      10 ms, 100 ms and 500 ms after it started: the template keeps it from its first command
#      and leaves a stop file that every rank looks for, so the run always ends stopped early
#      with a closed file, whatever the launcher was doing when the signal came.
. "$(dirname "$0")/lib.sh"
SBATCH=$TESTS_SRCDIR/../slurm/dtbench.sbatch
RUN=(--model lenet --dataset synthetic --batch 12 --iters 1000000 --warmup 2)

# check FILE MAX_ITERS : closed, stopped by a signal, the same count on every worker <= MAX_ITERS;
# or no file, no hidden partial file, and FILE.log saying the set-up was stopped.
check() {
    if [ ! -e "$1" ]; then
        grep -q "stopped during set-up (signal): nothing was recorded" "$1.log" || {
            cat "$1.log"; fail "$1: no file, and the run does not say it was stopped during set-up"; }
        [ -z "$(ls -A "$(dirname "$1")" | grep -F ".$(basename "$1").")" ] || fail "$1: a hidden file was left"
        echo "ok: $1: stopped during set-up, no file"
        return
    fi
    h5check stopped "$1" --reason signal --lockstep --max-completed "$2"
}

# caught PID : the process is dtbench and catches SIGUSR1 (bit 10 of SigCgt)
caught() {
    [ "$(cat /proc/$1/comm 2>/dev/null)" = dtbench ] || return 1
    local m
    m=$(sed -n 's/^SigCgt:\t*//p' /proc/$1/status 2>/dev/null) || return 1
    [ -n "$m" ] && (( (16#$m >> 9) & 1 ))
}

# 1. Straight to the ranks, as early as they can be found.
for spec in "sync:2:" "async:3:--exchange async --ps-ranks 1"; do
    x=${spec%%:*} rest=${spec#*:} np=${rest%%:*} extra=${rest#*:}
    out=$WORK/direct-$x.h5
    # shellcheck disable=SC2086 # extra options split at spaces
    timeout -k 5 120 "$MPIRUN" -np "$np" "$DTBENCH" "${RUN[@]}" $extra --output "$out" \
        >"$out.log" 2>&1 &
    job=$!
    pids=""
    for _ in $(seq 2000); do # up to ~20 s for mpirun to start the ranks
        pids=$(pgrep -f -- "--output $out" | grep -vx "$job" || true)
        pids=$(for p in $pids; do caught $p && echo $p; done || true)
        [ "$(echo $pids | wc -w)" = "$np" ] && break
        sleep 0.01
    done
    [ -n "$pids" ] || fail "$x: the ranks never appeared"
    kill -USR1 $pids
    set +e; wait $job; rc=$?; set -e
    [ "$rc" = 0 ] || { cat "$out.log"; fail "$x: SIGUSR1 during start-up: exit $rc"; }
    grep -qE "stopped (before training|during set-up) \(signal\)" "$out.log" || {
        cat "$out.log"; fail "$x: rank 0 did not say it stopped before training"; }
    check "$out" 0
    pass "$x: SIGUSR1 to every rank during start-up: 0 iterations, exit 0, file closed"
done

# 2. Through the batch template, 10, 100 and 500 ms after it started.
for delay in 0.01 0.1 0.5; do
    out=$WORK/tpl-$delay.h5
    DTBENCH=$DTBENCH DTBENCH_LAUNCHER=mpirun DTBENCH_LAUNCH_ARGS="-np 2" \
        bash "$SBATCH" "${RUN[@]}" --output "$out" >"$out.log" 2>&1 &
    job=$! # the batch shell itself: the signal goes to it, as Slurm's B: does
    sleep "$delay"
    kill -USR1 $job
    (sleep 120; kill -9 $job) 2>/dev/null & # no hang: a lost signal fails the test
    watchdog=$!
    set +e; wait $job; rc=$?; set -e
    kill $watchdog 2>/dev/null || true
    [ "$rc" = 0 ] || { cat "$out.log"; fail "template, SIGUSR1 after $delay s: exit $rc"; }
    # Stopped early, not at --iters 1000000: the stop file is polled every 0.25 s and a LeNet
    # iteration of batch 12 takes ~1.5 ms on a quiet machine, so a signal that lands just after
    # start-up can let ~150 iterations run (131 seen in CI); 2000 is still nothing like a lost one.
    check "$out" 2000
    grep -q "^stop_request=time_limit" "${out%.h5}.state" || fail "state file: no stop_request"
    [ ! -e "${out%.h5}.stop" ] || fail "the stop file was left behind"
    pass "template, SIGUSR1 $delay s after start: stopped early, exit 0, file closed"
done
