# test_reliability_disk.sh - full disks and write errors, on a small tmpfs mounted for
# the test: a results file that cannot fit is refused before any work (exit 2, one line naming the
# option, the file and the room, no file left); a disk filled by someone else during the run does
# not touch the run (its space was reserved at creation; it hung in H5Fflush before); a write error
# on one rank (injected: DTBENCH_TEST_WRITE_ERROR) stops every rank within seconds with one line
# naming the file and errno, the file closed with stop_reason=write_error and every block written
# before intact, or no file at all when it came before the first block; a model that cannot be
# saved on a full disk is one line and exit 1, no model file left.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
mount_tmpfs 1m
S="--dataset synthetic --batch 4 --warmup 0 --sample-hz 0"

# 1. Far too small: 100000 iterations x 23 quantities x 2 ranks x 8 bytes = 37 MB on 1 MB.
expect_bad 2 "--iters: the results file disk/r.h5 needs about [0-9]*\.[0-9] MB, and its file system has 1.0 MB free" $S --iters 100000 --output disk/r.h5
[ -z "$(ls -A disk)" ] || fail "refused run left $(ls -A disk)"

# 2. Room for the datasets but not for the metadata that follows them (24500 iterations need
#    8.2 MB of the 8.4 MB): the ranks hung forever in H5Fflush (MPI_Barrier / MPI_Bcast). Now
#    refused before anything is created.
umount disk && mount -t tmpfs -o size=8m dtbench-test disk
RUN_TIMEOUT=60 expect_bad 2 "--iters: the results file disk/r.h5 needs about [0-9]*\.[0-9] MB, and its file system has 8.4 MB free" $S --iters 24500 --flush-every 10 --output disk/r.h5
[ -z "$(ls -A disk)" ] || fail "refused run left $(ls -A disk)"

# 3. The disk filled by another process while the run writes: the run completes, file intact.
spawn timeout -k 10 120 "$MPIRUN" -np 2 "$DTBENCH" $S --iters 400 --flush-every 10 --output disk/r.h5 >run.log 2>&1
job=$SPAWNED
wait_completed disk/r.h5 10 60 || { kill -9 $job; fail "run did not start writing"; }
dd if=/dev/zero of=disk/fill bs=64k 2>/dev/null || true # until the disk is full
[ "$(df --output=avail disk | tail -1)" -lt 64 ] || fail "the disk did not fill: $(df disk)"
set +e; wait $job; rc=$?; set -e
[ "$rc" = 0 ] || fail "run on a disk filled under it: exit $rc: $(cat run.log)"
pycheck run marks disk/r.h5 --attr finished=1 --attr stop_reason=completed --ranks completed=400 --whole
pass "disk filled during the run: the run completed, file intact (space reserved at creation)"
rm -f disk/fill disk/r.h5

# 4. A write error on rank 1 at its 4th block (EIO): every rank stops within seconds.
t0=$(date +%s.%N)
set +e
DTBENCH_TEST_WRITE_ERROR=1:3:5 timeout -k 10 120 "$MPIRUN" -np 2 "$DTBENCH" $S --iters 5000 \
    --flush-every 10 --output disk/r.h5 >run.log 2>err.log
rc=$?
set -e
elapsed=$(echo "$(date +%s.%N) - $t0" | bc)
[ "$rc" = 1 ] || fail "write error: exit $rc, expected 1: $(cat err.log)"
grep -q "^dtbench: error: rank 1: writing disk/r.h5 (/iterations/.*) failed: .*(errno 5: Input/output error); stopping the run" err.log ||
    fail "no one-line reason naming the file and errno: $(cat err.log)"
[ "$(echo "$elapsed < 20" | bc)" = 1 ] || fail "took $elapsed s to stop"
pycheck run write-error disk/r.h5 --rank 1 --kept 30 --errno 5
pass "write error: every rank stopped after $elapsed s, exit 1"
rm -f disk/r.h5

# 5. A write error before the first block (ENOSPC on every rank's first block): no file left.
set +e
DTBENCH_TEST_WRITE_ERROR=all:0:28 timeout -k 10 120 "$MPIRUN" -np 2 "$DTBENCH" $S --iters 5000 \
    --flush-every 10 --output disk/r.h5 >run.log 2>err.log
rc=$?
set -e
[ "$rc" = 1 ] || fail "first-block write error: exit $rc: $(cat err.log)"
grep -q "errno 28: No space left on device" err.log || fail "no errno: $(cat err.log)"
[ -z "$(ls -A disk)" ] || fail "a run failing before its first block left $(ls -A disk)"
pass "write error before the first block: exit 1, no file left"

# 6. --save-model onto a full disk: exit 0, "cannot write --save-model", a truncated model left.
#    Now: exit 1, one line naming the option, the file and errno, and no model file at all (it is
#    written under a hidden name, made durable, and renamed only when whole).
dd if=/dev/zero of=disk/fill bs=64k 2>/dev/null || true
set +e
run_np 2 $S --model lenet --iters 2 --output r.h5 --save-model disk/m.bin >run.log 2>err.log
rc=$?
set -e
[ "$rc" = 1 ] || fail "--save-model on a full disk: exit $rc, expected 1: $(cat err.log)"
[ "$(grep -c '^dtbench' err.log)" = 1 ] &&
    grep -q "^dtbench: error: rank 0: --save-model disk/m.bin was not saved: No space left on device (errno 28); no model file left" err.log ||
    fail "not one line naming --save-model and errno 28: $(cat err.log)"
[ "$(ls -A disk)" = fill ] || fail "a model that could not be saved left $(ls -A disk)"
pycheck run marks r.h5 --attr stop_reason=completed ||
    fail "the results of a run whose model could not be saved are not complete"
rm -f disk/fill r.h5
pass "--save-model on a full disk: exit 1, one line, no model file left, the results complete"
