# test_grow.sh - result files that grow with the run (docs/hdf5-layout.md): a run of
# 1,000,000 iterations stopped after ~45 leaves a few MB, valid and marked stopped, every completed
# iteration readable; a run SIGKILLed after extensions (and at random times, extensions every
# block) keeps every flushed block readable by h5py, check_h5.py and dtbench-analyze, also when
# killed inside an extension's flush at its worst (check_grow_eoa.py); every
# strategy still writes a valid file: lock-step ones (sync, ssp, gpipe, 1f1b, hybrid) chunked and
# extended in steps to the extent their completed iterations need, async and mixed allocated whole.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

# wait_done FILE N : until every worker of FILE has completed N iterations (bounded), polled
# often: the signal that follows must land soon after.
wait_done() {
    wait_h5 "$1" "$2" --poll 0.02
}

# 1. --iters 1000000 on 2 ranks, SIGTERM to every rank after >= 45 iterations (as scancel does).
#    The whole allocation would be 23 quantities x 2 ranks x 1e6 x 8 bytes = 368 MB.
spawn timeout -k 30 300 "$MPIRUN" -np 2 "$DTBENCH" --model lenet --dataset synthetic --batch 4 \
    --iters 1000000 --warmup 2 --flush-every 5 --output long.h5 >long.log 2>&1
job=$SPAWNED
wait_done long.h5 45 || { kill -9 $job; fail "run did not write 45 iterations: $(cat long.log)"; }
kill -TERM $(pids_of long.h5)
set +e; wait $job; rc=$?; set -e
[ "$rc" = 0 ] || fail "stopped run: exit $rc: $(cat long.log)"
size=$(stat -c %s long.h5)
pycheck grow stopped long.h5 "$size" --ranks 2 --iters 1000002 --min-completed 45
analyze summary long.h5 >summary.txt || fail "dtbench-analyze on the stopped file: $(cat summary.txt)"
grep -q "stopped" summary.txt || fail "summary does not report the stop: $(cat summary.txt)"
pass "--iters 1000000 stopped early: a few MB, valid, marked stopped, analysed"

# 2. SIGKILL of the whole job after at least two extensions (a step of 20 iterations; 50000
#    iterations are 2500 chunks, under the 4096 that would take a longer step).
DTBENCH_TEST_GROW_STEP=20 spawn timeout -k 30 300 "$MPIRUN" -np 2 "$DTBENCH" --model lenet \
    --dataset synthetic --batch 4 --iters 50000 --warmup 2 --flush-every 10 --output k.h5 \
    >k.log 2>&1
job=$SPAWNED
wait_done k.h5 60 || { kill -9 $job; fail "run did not write 60 iterations: $(cat k.log)"; }
kill -9 $(pids_of k.h5)
set +e; wait $job; set -e
h5check killed k.h5 --min-completed 60
pycheck grow index k.h5 --ranks 2 --step 20
analyze summary k.h5 >summary.txt || fail "dtbench-analyze on the killed file: $(cat summary.txt)"
grep -q "INCOMPLETE" summary.txt || fail "summary does not report the kill: $(cat summary.txt)"
pass "SIGKILL after extensions: every flushed block readable, reported incomplete; one index node for its 2501 chunks"
# a step that would cut a dataset into more than 4096 chunks grows: 100000 / 4096 -> 25
DTBENCH_TEST_GROW_STEP=5 run_np 2 --model lenet --dataset synthetic --batch 4 --iters 100000 \
    --duration 0.5 --warmup 0 --flush-every 5 --sample-hz 0 --output cap.h5 >cap.log 2>&1 ||
    fail "capped step: $(cat cap.log)"
pycheck grow step cap.h5 --ranks 2 --step 25 || fail "the step is not capped"
pass "100000 iterations in steps of 5: steps of 25 (4000 chunks)"

# 3. SIGKILL at random times with an extension at every block (a step of one block): the file is
#    always readable with its completed blocks, whatever the extension was doing. Readers take
#    the completed columns: a kill inside an extension's flush can leave the newest chunks past
#    the end of allocation the superblock records (HDF5 writes it last; part 4), and no
#    completed iteration lies there (CI met this under ASan; here 1 in ~50 kills under load).
#    The quick suite kills 1 run, the long checks 6.
kills="1"
long_part "5 more kills at random times" && kills="1 2 3 4 5 6"
for i in $kills; do
    d=$("$PYTHON" -c "import random; random.seed($i); print(round(random.uniform(0, 1.0), 3))")
    rm -f r.h5 .r.h5.*.partial
    DTBENCH_TEST_GROW_STEP=5 spawn timeout -k 5 120 "$MPIRUN" -np 2 "$DTBENCH" --model lenet \
        --dataset synthetic --batch 4 --iters 1500 --warmup 0 --flush-every 5 --output r.h5 \
        >r.log 2>&1
    pid=$SPAWNED
    wait_done r.h5 5 || { kill -9 $pid; fail "run did not write its first block: $(cat r.log)"; }
    sleep "$d" # after the first block: the kill lands among the extensions that follow
    kill_spawned "$pid"
    wait "$pid" 2>/dev/null || true
    pycheck grow killed r.h5 || fail "killed after $d s: r.h5 is not readable"
    analyze summary r.h5 >summary.txt || fail "killed after $d s: dtbench-analyze: $(cat summary.txt)"
done
pass "kills at random times during per-block extensions: completed blocks always readable"

# 4. Killed inside any extension's flush, at its worst (every piece of metadata written but the
#    superblock and its end of allocation): a run killed after 80 extensions, read once per
#    extension with the superblock's end put back to before it, still reads every iteration
#    before it. Each dataset's chunk index is one B-tree node that never splits (HDF5's default
#    node of 64 chunks split after 65 extensions, allocating the node that then indexed the
#    older chunks past that end: everything before was unreadable).
rm -f e.h5
DTBENCH_TEST_GROW_STEP=5 spawn timeout -k 5 300 "$MPIRUN" -np 2 "$DTBENCH" --model lenet \
    --dataset synthetic --batch 4 --iters 2000 --warmup 0 --flush-every 5 --output e.h5 >e.log 2>&1
pid=$SPAWNED
wait_done e.h5 400 || { kill -9 $pid; fail "run did not write 400 iterations: $(cat e.log)"; }
# not pids_of: it retries a read that lands inside a flush, which would move the kill away from
# the extensions; the job's session is known without reading the file
kill_spawned "$pid"
wait "$pid" 2>/dev/null || true
"$PYTHON" "$TESTS_SRCDIR/check_grow_eoa.py" e.h5 || fail "a kill inside an extension loses iterations"
pass "killed inside any of its 80+ extensions, at the worst moment: every completed iteration reads"
# dtbench --finalize (a survivor's finalizer) marks such a file: it opens, its completed
# iterations read as before (its marks may take the space of the newest chunks, which hold none:
# moving the end of allocation past them instead needs room a full disk does not have).
"$PYTHON" "$TESTS_SRCDIR/check_grow_eoa.py" e.h5 --cut-last cut.h5
"$DTBENCH" --finalize cut.h5 --lost 1:5:silent >/dev/null 2>&1 || fail "--finalize on the cut file"
pycheck grow finalized cut.h5 e.h5 || fail "--finalize on a file killed inside an extension"
analyze summary cut.h5 >summary.txt || fail "dtbench-analyze on the finalized cut file: $(cat summary.txt)"
pass "dtbench --finalize on a file killed inside an extension: marked, every completed iteration"

# 5. Every strategy: lock-step ones stopped by --duration (the extent is the completed
#    iterations rounded up to a step), the others run to the end allocated whole.
S="--model lenet --dataset synthetic --batch 8 --warmup 1 --flush-every 10 --sample-hz 0"
long="--iters 100000 --duration 1.5"
strategy() { # NAME NP STEP ARGS...
    local name=$1 np=$2 step=$3
    shift 3
    DTBENCH_TEST_GROW_STEP=30 run_np "$np" $S "$@" --output "$name.h5" >"$name.log" 2>&1 ||
        fail "$name: $(cat "$name.log")"
    pycheck grow extent "$name.h5" "$step" || fail "$name: wrong extent" # STEP 0: allocated whole
}
#    The quick suite: one of each kind (lock-step, pipeline, allocated whole); the long checks all.
strategy sync 2 30 $long
strategy gpipe 2 30 $long --parallel model --schedule gpipe
strategy sync-done 2 30 --iters 95 # completed: the extent is every iteration
h5check finished sync-done.h5 --ranks 2 --iters 96
strategy async 3 0 --iters 60 --exchange async --ps-ranks 1
if long_part "ssp, 1f1b, hybrid and mixed files' extents"; then
    strategy ssp 2 30 $long --exchange ssp --staleness 2
    strategy 1f1b 2 30 $long --parallel model --schedule 1f1b
    strategy hybrid 4 30 $long --parallel hybrid --stages 2
    strategy mixed 2 0 --iters 60 --exchange mixed
fi
pass "every strategy: valid file of the expected extent"
