# test_killed_run.sh - a run killed with SIGKILL after some blocks leaves a file that h5py and
# dtbench-analyze open, holding every completed block, marked incomplete.
. "$(dirname "$0")/lib.sh"

out="$WORK/killed.h5"
run_np 2 --model lenet --dataset synthetic --batch 8 --iters 100000 --warmup 2 --flush-every 10 \
    --output "$out" >"$WORK/log.txt" 2>&1 &
job=$!

# Wait (bounded) until both ranks have written at least 3 blocks.
"$PYTHON" - "$out" <<'PY' || { kill -9 $job; fail "run did not write 3 blocks in time"; }
import sys, time, h5py
deadline = time.time() + 120
while time.time() < deadline:
    try:
        with h5py.File(sys.argv[1], "r") as f:
            if (f["ranks/completed"][:] >= 30).all():
                sys.exit(0)
    except (OSError, KeyError):
        pass
    time.sleep(0.2)
sys.exit(1)
PY

# SIGKILL every rank at once (no chance to close the file), then let mpirun notice.
pids=$("$PYTHON" -c "import h5py,sys; print(' '.join(str(p) for p in h5py.File(sys.argv[1],'r')['ranks/pid'][:]))" "$out")
kill -9 $pids
set +e
wait $job
rc=$?
set -e
[ "$rc" != 0 ] || fail "mpirun exited 0 after its ranks were killed"

h5check killed "$out" --min-completed 30
summary=$(analyze summary "$out")
echo "$summary"
echo "$summary" | grep -q "INCOMPLETE" || fail "dtbench-analyze does not report the killed run as incomplete"
pass "killed run: file readable, completed blocks intact, reported incomplete"
