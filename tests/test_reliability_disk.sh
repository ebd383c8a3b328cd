# test_reliability_disk.sh - full disks and write errors (issue 16), on a small tmpfs mounted for
# the test: a results file that cannot fit is refused before any work (exit 2, one line naming the
# option, the file and the room, no file left); a disk filled by someone else during the run does
# not touch the run (its space was reserved at creation; it hung in H5Fflush before); a write error
# on one rank (injected: DTBENCH_TEST_WRITE_ERROR) stops every rank within seconds with one line
# naming the file and errno, the file closed with stop_reason=write_error and every block written
# before intact, or no file at all when it came before the first block.
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
"$PYTHON" - disk/r.h5 <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["finished"] == 1 and f.attrs["stop_reason"] == "completed", dict(f.attrs)
    assert (f["ranks/completed"][:] == 400).all()
    assert not np.isnan(f["iterations/total"][:]).any()
PY
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
"$PYTHON" - disk/r.h5 <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["finished"] == 1 and f.attrs["stop_reason"] == "write_error", dict(f.attrs)
    assert "errno 5" in f.attrs["stop_detail"] and "disk/r.h5" in f.attrs["stop_detail"]
    done = f["ranks/completed"][:]
    assert done[1] == 30 and done[0] >= 30 and done[0] < 5000, done
    total = f["iterations/total"][:]
    for r, d in enumerate(done):
        assert not np.isnan(total[r, :d]).any(), (r, d)
    latency = f.attrs["stop_latency_s"]  # from the error to the file's last write
    assert 0 < latency < 5, latency  # "within seconds"; the figure is printed
    print(f"ok: write error on rank 1: file closed {latency:.3f} s after it, completed "
          f"{[int(d) for d in done]}, blocks before intact")
PY
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
