# test_killed_run.sh - a run killed with SIGKILL after some blocks leaves a file that h5py and
# dtbench-analyze open, holding every completed block, marked incomplete.
. "$(dirname "$0")/lib.sh"

out="$WORK/killed.h5"
spawn timeout -k 5 300 "$MPIRUN" -np 2 "$DTBENCH" --model lenet --dataset synthetic --batch 8 \
    --iters 100000 --warmup 2 --flush-every 10 --output "$out" >"$WORK/log.txt" 2>&1
job=$SPAWNED

# Wait (bounded) until both ranks have written at least 3 blocks.
wait_completed "$out" 30 120 || { kill -9 $job; fail "run did not write 3 blocks in time"; }

# SIGKILL every rank at once (no chance to close the file), then let mpirun notice.
pids=$(pids_of "$out")
kill -9 $pids
set +e
wait $job
rc=$?
set -e
[ "$rc" != 0 ] || fail "mpirun exited 0 after its ranks were killed"

h5check killed "$out" --min-completed 30
summary=$(analyze summary "$out")
echo "$summary"
grep -q "INCOMPLETE" <<<"$summary" || fail "dtbench-analyze does not report the killed run as incomplete"
pass "killed run: file readable, completed blocks intact, reported incomplete"

# Kills at random times, the first 50 ms included: the whole job (mpirun and its
# ranks) SIGKILLed at once, as a node failure would. Afterwards the results' name holds either
# nothing (the file is built under a hidden partial name, renamed once it describes itself) or a
# file h5py opens whose /ranks/completed blocks are all written; and a new run on the same name
# is never blocked by what the killed one left.
# A delay is counted from the start of mpirun, or (file+D) from the moment the file appears (the
# ranks are then creating it: the window where a kill left an unreadable file).
# The quick suite: 4 of these and 1 random; the long checks all of them and 4 random.
delays="0.01 file+0 file+0.005 file+0.02" kills="1"
long_part "6 more fixed delays, 3 more at random" &&
    delays="0 0.01 0.05 file+0 file+0.002 file+0.005 file+0.01 file+0.02 file+0.03 file+0.05" kills="1 2 3 4"
for i in $kills; do delays="$delays $("$PYTHON" -c "import random; random.seed($i); print(round(random.uniform(0.05, 2.5), 3))")"; done
cd "$WORK"
for d in $delays; do
    rm -f k.h5 .k.h5.*.partial
    spawn timeout -k 5 120 "$MPIRUN" -np 2 "$DTBENCH" --model lenet --dataset synthetic --batch 4 \
        --iters 100000 --warmup 0 --flush-every 5 --output k.h5 >k.log 2>&1
    pid=$SPAWNED
    case $d in
    file+*)
        for _ in $(seq 1 2000); do
            [ -e k.h5 ] || compgen -G ".k.h5.*.partial" >/dev/null && break
            sleep 0.005
        done
        sleep "${d#file+}"
        ;;
    *) sleep "$d" ;;
    esac
    kill_spawned "$pid" # the whole job frozen, then killed at once
    wait "$pid" 2>/dev/null || true
    sleep 0.2 # let the killed ranks' file descriptors close
    state=absent
    if [ -e k.h5 ]; then
        pycheck run marks k.h5 --ranks "completed>=0" --intact ||
            fail "killed after $d s: k.h5 is not a readable results file"
        state=readable
        rm -f k.h5
    fi
    # What is left (at most the hidden partial file) does not block the next run on this name.
    run_np 2 --model lenet --dataset synthetic --batch 4 --iters 2 --warmup 0 --output k.h5 \
        >next.log 2>&1 || fail "after a kill at $d s the next run failed: $(cat next.log)"
    echo "ok: killed after $d s: results name $state; the next run on it succeeded"
done
pass "kills at random times (first 50 ms included): never a half-made results file"
