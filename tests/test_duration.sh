#!/bin/bash
# test_duration.sh - --duration SECONDS: a run meant to last until a wall time (a large --iters)
# stops after the same iteration on every rank once that time has passed on the common clock,
# exit 0, the file closed and marked stop_reason=duration, with every completed iteration.
# Also with a parameter server (workers stop on their own votes, the server with them).
. "$(dirname "$0")/lib.sh"
cd "$WORK" # expect_bad writes out.txt and err.txt here

for spec in "sync:2:" "async:3:--exchange async --ps-ranks 1"; do
    x=${spec%%:*} rest=${spec#*:} np=${rest%%:*} extra=${rest#*:}
    out=$WORK/$x.h5
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # extra options split at spaces
    run_np "$np" --model lenet --dataset synthetic --batch 12 --iters 1000000 --duration 2 \
        $extra --output "$out" >"$out.log" 2>&1 || { cat "$out.log"; fail "$x: exit $?"; }
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    grep -q "stopped early (duration)" "$out.log" || { cat "$out.log"; fail "$x: no early stop line"; }
    # sync is lock-step: the same iteration everywhere
    pycheck run duration "$out" $([ "$x" = sync ] && echo --lockstep)
    [ "$(echo "$wall < 60" | bc)" = 1 ] || fail "$x: took $wall s"
    pass "$x: --duration 2 stopped the run (wall $wall s including start-up)"
done
expect_bad 1 "^dtbench: error: --duration" --model lenet --duration -1 --output "$WORK/bad.h5"
[ ! -e "$WORK/bad.h5" ] || fail "a refused --duration left a file"
pass "--duration -1 refused with exit 2"
