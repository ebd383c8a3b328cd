# test_grow_disk.sh - a growing results file meets a full disk (issue 15 with issue 16's
# guarantees), on a small tmpfs mounted for the test: the whole file is still checked before the
# start (a run that cannot fit is refused, exit 2 naming --iters, no file left); a disk filled by
# another process during the run makes the next extension's reservation fail, which stops every
# rank within seconds through the write-error path (exit 1, one line with the file and errno 28),
# the file closed with stop_reason=write_error and every iteration before the extent intact.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
mount_tmpfs 32m
S="--model lenet --dataset synthetic --batch 4 --warmup 0 --sample-hz 0 --flush-every 10"

# 1. Growing or not, a run whose every iteration cannot fit is refused before any work:
#    200000 iterations x 23 quantities x 2 ranks x 8 bytes = 74 MB on 32 MB.
expect_bad 2 "--iters: the results file disk/r.h5 needs about [67][0-9].[0-9] MB, and its file system has 3[0-9].[0-9] MB free" $S --iters 200000 --output disk/r.h5
[ -z "$(ls -A disk)" ] || fail "refused run left $(ls -A disk)"
pass "a growing file that cannot reach its full size is refused before the start"

# 2. 60000 iterations fit (20 MB); steps of 2000 iterations (0.7 MB). Once the run has written
#    its first blocks, another process fills the disk: the extensions still covered by what was
#    reserved at creation go on, the first that needs more is refused.
DTBENCH_TEST_GROW_STEP=2000 spawn timeout -k 10 300 "$MPIRUN" -np 2 "$DTBENCH" $S --iters 60000 \
    --output disk/r.h5 >run.log 2>err.log
job=$SPAWNED
wait_completed disk/r.h5 10 60 || { kill -9 $job; fail "run did not start writing: $(cat err.log)"; }
dd if=/dev/zero of=disk/fill bs=64k 2>/dev/null || true # until the disk is full
[ "$(df --output=avail disk | tail -1)" -lt 64 ] || fail "the disk did not fill: $(df disk)"
set +e; wait $job; rc=$?; set -e
[ "$rc" = 1 ] || fail "extension on a full disk: exit $rc, expected 1: $(cat err.log)"
lines=$(grep -c "^dtbench: error: rank 0: extending disk/r.h5 (/iterations) to iteration [0-9]* failed: --iters: no room for the next .* MB of the results file .*disk/r.h5: No space left on device (errno 28); stopping the run" err.log || true)
[ "$lines" = 1 ] || fail "not one line naming the file and errno: $(cat err.log)"
"$PYTHON" - disk/r.h5 <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["finished"] == 1 and f.attrs["stop_reason"] == "write_error", dict(f.attrs)
    assert "errno 28" in f.attrs["stop_detail"] and "disk/r.h5" in f.attrs["stop_detail"]
    done = f["ranks/completed"][:]
    total = f["iterations/total"]
    extent = total.shape[1]
    assert extent < 60000 and (done == extent).all(), (done, total.shape)  # up to the extent
    assert not np.isnan(total[:]).any()
    latency = f.attrs["stop_latency_s"]  # from the refusal to the file's last write
    assert 0 < latency < 5, latency
    print(f"ok: refused at iteration {extent}: every rank completed {int(done[0])}, file closed "
          f"{latency:.3f} s after the refusal")
PY
pass "a step that cannot be reserved stops the run through the write-error path"
