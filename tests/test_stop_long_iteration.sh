# test_stop_long_iteration.sh - a stop during a long iteration ends the run after that iteration,
# not after the next one: LeNet whose rank 0 holds its first iteration back for two minutes
# (--straggler 0:+120000: the injected delay sleeps inside backward, after the step read the stop
# vote, where a large model's seconds of forward and backward on a CPU would be), SIGTERM to every
# rank once rank 0 sleeps in that first iteration: the file is closed, stop_reason=signal, every
# rank kept exactly that one iteration. The driver read the vote only before the step, so such a
# signal ended the run after a second iteration (2 kept: this test fails there), which for a model
# whose iteration takes seconds doubled the time a stop takes. On 2 ranks (the stop travels with
# the exchange) and on one (no one to vote with). No timing is asserted.
# On 2 ranks, while rank 0 sleeps: each rank's node witness (--peer-timeout, on by default) holds a
# small fraction of its rank's resident memory. It used to be forked from the rank after the model
# was built, sharing every page copy-on-write, so that the first iteration's writes copied each
# page of the parameters, gradients and momentum (FCN-5 on 2 ranks: a first iteration of 7.5 s
# against 2.2 s, and a stop during it took as long), and it then kept the originals (resident
# about as much as its rank: this part fails there).
. "$(dirname "$0")/lib.sh"
cd "$WORK"

# sleeping PID : the process's main thread sleeps in nanosleep (the straggler's delay)
sleeping() {
    local w
    w=$(cat "/proc/$1/wchan" 2>/dev/null) || return 1
    [[ $w == *nanosleep* ]]
}

# rss PID : resident memory, kB
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# small_witnesses TAG RANK_PIDS : every dtbench process with TAG in its environment that is not a
# rank (a witness) holds under a quarter of the smallest rank's resident memory; at least one
small_witnesses() {
    local tag=$1 ranks=$2 least=0 n=0 p
    for p in $ranks; do
        [ "$least" = 0 ] || [ "$(rss "$p")" -lt "$least" ] && least=$(rss "$p")
    done
    for p in $(pgrep -x dtbench); do
        grep -qz "^DTBENCH_TEST_TAG=$tag\$" "/proc/$p/environ" 2>/dev/null || continue
        grep -qw "$p" <<<"$ranks" && continue
        n=$((n + 1))
        echo "witness $p: $(rss "$p") kB resident, the smallest rank $least kB"
        [ $(($(rss "$p") * 4)) -lt "$least" ] ||
            fail "the witness $p holds $(rss "$p") kB resident, its rank $least kB (its pages)"
    done
    [ "$n" -gt 0 ] || fail "no node witness found"
}

# stop_in_first NAME NP : the run, SIGTERM to its ranks during its first iteration, the checks
stop_in_first() {
    local name=$1 np=$2 args=(--model lenet --dataset synthetic --batch 4 --iters 1000 --warmup 0
        --straggler 0:+120000 --sample-hz 0 --output "$1.h5")
    rm -f "$name.h5"
    export DTBENCH_TEST_TAG=$name-$$ # finds the witnesses
    if [ "$np" = 1 ]; then
        spawn timeout -k 5 240 "$DTBENCH" "${args[@]}" >"$name.log" 2>&1
    else
        spawn timeout -k 5 240 "$MPIRUN" -np "$np" "$DTBENCH" "${args[@]}" >"$name.log" 2>&1
    fi
    unset DTBENCH_TEST_TAG
    local job=$SPAWNED
    wait_h5 "$name.h5" 0 --timeout 120 || { cat "$name.log"; fail "$name: no ranks recorded"; }
    local pids rank0 _
    pids=$(pids_of "$name.h5")
    rank0=$(pids_of "$name.h5" 0)
    for _ in $(seq 600); do
        sleeping "$rank0" && break
        sleep 0.1
    done
    sleeping "$rank0" || fail "$name: rank 0 never slept in its first iteration"
    [ "$np" = 1 ] || small_witnesses "$name-$$" "$pids"
    kill -TERM $pids
    wait $job || true
    h5check stopped "$name.h5" --reason signal --lockstep --min-completed 1 --max-completed 1 ||
        { cat "$name.log"; fail "$name: not stopped after the first iteration (above)"; }
    pass "$name: a stop during the first iteration kept that iteration alone"
}

stop_in_first two 2
stop_in_first one 1
