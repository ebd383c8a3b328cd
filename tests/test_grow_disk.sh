# test_grow_disk.sh - a growing results file meets a full disk, on a small tmpfs mounted for the
# test: the whole file is still checked before the
# start (a run that cannot fit is refused, exit 2 naming --iters, no file left); a disk filled by
# another process during the run makes the next extension's reservation fail, which stops every
# rank within seconds through the write-error path (exit 1, one line with the file and errno 28),
# the file closed with stop_reason=write_error and every iteration before the extent intact; an
# extension that fails inside HDF5 all the same ends the same way (out of band: the other ranks
# wait inside HDF5).
. "$(dirname "$0")/lib.sh"
cd "$WORK"
mount_tmpfs 32m
S="--model lenet --dataset synthetic --batch 4 --warmup 0 --sample-hz 0 --flush-every 10"

# 1. Growing or not, a run whose every iteration cannot fit is refused before any work:
#    200000 iterations x (bytes per iteration of every rank, counted in a small run's file) is
#    more than the 32 MB, and the refusal's estimate agrees with that count within 15%.
run_np 2 $S --iters 20 --output small.h5 >/dev/null
per_iter=$(pycheck grow bytes-per-iteration small.h5) || fail "$per_iter"
expect_bad 2 "--iters: the results file disk/r.h5 needs about [0-9.]* MB, and its file system has 3[0-9].[0-9] MB free" $S --iters 200000 --output disk/r.h5
[ -z "$(ls -A disk)" ] || fail "refused run left $(ls -A disk)"
said=$(sed -n 's/.*needs about \([0-9.]*\) MB.*/\1/p' err.txt)
awk -v s="$said" -v p="$per_iter" 'BEGIN { e = 200000 * p / 1e6; exit !(s > 32 && s > 0.85 * e && s < 1.15 * e) }' ||
    fail "the refusal says $said MB; 200000 iterations of $per_iter bytes each are $(awk -v p="$per_iter" 'BEGIN { print 200000 * p / 1e6 }') MB"
pass "a growing file that cannot reach its full size is refused before the start"

# 2. N iterations fit (20 MB: N from the bytes an iteration takes, counted above, a multiple of
#    2000); steps of 2000 iterations (about 1 MB). Once the run has written
#    its first blocks, another process fills the disk: what was reserved at creation is written,
#    the first extension that needs more is refused. The creation reserves the first extent plus
#    4 MB for metadata (about 10000 iterations more: 2 minutes on an idle 2-core machine, over 5
#    with the suite's other ranks sharing its cores); this run keeps 1 MB instead
#    (DTBENCH_TEST_META_BYTES), so the refusal comes within the first few thousand iterations.
N=$(awk -v p="$per_iter" 'BEGIN { print int(20e6 / p / 2000) * 2000 }')
DTBENCH_TEST_META_BYTES=1048576 DTBENCH_TEST_GROW_STEP=2000 spawn timeout -k 10 600 "$MPIRUN" \
    -np 2 "$DTBENCH" $S --iters "$N" \
    --output disk/r.h5 >run.log 2>err.log
job=$SPAWNED
wait_completed disk/r.h5 10 60 || { kill -9 $job; fail "run did not start writing: $(cat err.log)"; }
dd if=/dev/zero of=disk/fill bs=64k 2>/dev/null || true # until the disk is full
[ "$(df --output=avail disk | tail -1)" -lt 64 ] || fail "the disk did not fill: $(df disk)"
set +e; wait $job; rc=$?; set -e
[ "$rc" = 1 ] || fail "extension on a full disk: exit $rc, expected 1: $(cat err.log)"
lines=$(grep -c "^dtbench: error: rank 0: extending disk/r.h5 (/iterations) to iteration [0-9]* failed: --iters: no room for the next .* MB of the results file .*disk/r.h5: No space left on device (errno 28); stopping the run" err.log || true)
[ "$lines" = 1 ] || fail "not one line naming the file and errno: $(cat err.log)"
# every rank completed up to the extent, which is short of the run; closed within seconds of the
# refusal (stop_latency_s: from the refusal to the file's last write)
pycheck run marks disk/r.h5 --attr finished=1 --attr stop_reason=write_error \
    --detail-has "errno 28" --detail-has disk/r.h5 --to-extent --ranks "completed<$N" --whole \
    --max-latency 5
pass "a step that cannot be reserved stops the run through the write-error path"

# 3. The reservation said yes, but the disk had no room when the extension came (a file system
#    whose reservations do not hold; DTBENCH_TEST_NO_RESERVE=1 makes this one such): rank 0 failed
#    inside H5Dset_extent ("file write failed", a short MPI-IO write without errno) and died
#    through MPI_Abort, the survivor closed the file as peer_lost with no errno. Now the file is
#    closed as write_error naming H5Dset_extent and errno 28, every iteration up to the extent
#    kept on every rank, exit 1, within seconds.
rm -f disk/fill disk/r.h5
DTBENCH_TEST_NO_RESERVE=1 DTBENCH_TEST_GROW_STEP=200 timeout -k 10 300 "$MPIRUN" -np 2 \
    "$DTBENCH" $S --iters "$N" --output disk/r.h5 >run.log 2>err.log &
job=$!
wait_completed disk/r.h5 10 60 || { kill -9 $job; fail "run did not start writing: $(cat err.log)"; }
dd if=/dev/zero of=disk/fill bs=64k 2>/dev/null || true # until the disk is full,
truncate -s -64K disk/fill                              # then less room than a step (74 KB)
t0=$(date +%s.%N)
set +e; wait $job; rc=$?; set -e
took=$(seconds_since "$t0")
[ "$rc" = 1 ] || fail "an extension failing inside HDF5: exit $rc, expected 1: $(cat err.log)"
[ "$(grep -c "^dtbench: error: rank [01]: extending disk/r.h5 (/iterations) to iteration [0-9]* failed: H5Dset_extent: .*(errno 28: No space left on device); stopping the run" err.log)" = 1 ] ||
    fail "not one line naming the file, H5Dset_extent and errno 28: $(cat err.log)"
pycheck run marks disk/r.h5 --attr finished=1 --attr stop_reason=write_error \
    --detail-has "errno 28" --detail-has H5Dset_extent --to-extent \
    --ranks iterations_done=@completed --whole --ranks status=2
below "$took" 20 || fail "the run ended $took s after the disk filled"
pass "an extension failing inside H5Dset_extent: write_error with errno 28, exit 1, $took s after the disk filled"
