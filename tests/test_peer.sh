# test_peer.sh - a rank SIGKILLed mid-run under plain mpirun on this machine (--peer-timeout):
#   1. the survivors find it gone (same host: its pid no longer exists) and exit within
#      --peer-timeout + a few seconds; the file is closed marked stop_reason=peer_lost naming the
#      rank and host, the survivors' /ranks/status 2 and the dead rank's 0, every completed block
#      readable; dtbench-analyze opens it.
#   2. a rank frozen (SIGSTOP: its process lives, its heartbeats stop) is lost after
#      --peer-timeout of silence: the same marks, its host (the survivors' own) not a failed node.
#   2b. 8 ranks, rank 4 frozen, mpirun told not to end the job on a non-zero exit: rank 0, which
#      does not watch rank 4, ends too, told by its neighbours that the run is over.
#   3. --peer-timeout 0 turns the watchdog off: the same kill leaves the file unmarked.
#   3b. --peer-timeout below 1 s refused; heartbeats that never arrive (UDP blocked; a test hook mutes rank 1): the run is refused
#      (exit 2, one line naming --peer-timeout and the way out), no file left.
#   4. `dtbench --finalize` refuses bad arguments (exit 2, one line) and leaves a file the run
#      closed itself as it is; a second finalizer (another survivor's) keeps every rank the first
#      one found lost, a lost node's ranks included, and names each failed node once (n1 beside
#      n10).
# The emulated-node cases (a silent node, a rank gone on another node, srun) are in
# tests/test_slurm_peer.sh.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

# running PID : the process exists and is not a zombie waiting for its parent.
running() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }

# start NAME TIMEOUT : a long 3-rank run in the background (pid in $job), until every rank has
# written 10 iterations.
start() {
    rm -f "$1.h5"
    spawn timeout -k 5 120 "$MPIRUN" -np 3 "$DTBENCH" --model lenet --dataset synthetic --batch 6 \
        --iters 1000000 --warmup 0 --flush-every 5 --peer-timeout "$2" --output "$1.h5" \
        >"$1.log" 2>&1
    job=$SPAWNED
    wait_completed "$1.h5" 10 120 || { kill -9 $job; cat "$1.log"; fail "$1: no 10 iterations in time"; }
}

# kill_rank NAME RANK : SIGKILL one rank; waits for mpirun; sets $took (s) and $rc.
kill_rank() {
    local pid t0
    pid=$(pids_of "$1.h5" "$2")
    t0=$(date +%s.%N)
    kill -9 "$pid"
    set +e
    wait "$job"
    rc=$?
    set -e
    took=$(seconds_since "$t0")
}

# ---- 1. a rank killed: the survivors mark the file ---------------------------------------------
start lost 6
kill_rank lost 1
[ "$rc" != 0 ] || fail "mpirun exited 0 after a rank was killed"
grep -q "rank 1 on $(hostname) is gone" lost.log || fail "no survivor reported rank 1 gone: $(cat lost.log)"
pycheck run marks lost.h5 --attr finished=1 --attr stop_reason=peer_lost \
    --detail-starts "rank 1 on $(hostname) ended" --attr lost_ranks=1 --attr failed_nodes= \
    --has end_time --ranks status=2,0,2 --ranks "completed>=10" --intact
analyze summary lost.h5 >summary.txt || fail "dtbench-analyze cannot read the marked file: $(cat summary.txt)"
grep -q "stop_reason=peer_lost: rank 1 on $(hostname)" summary.txt ||
    fail "dtbench-analyze summary does not name the lost rank: $(head -3 summary.txt)"
# mpirun itself tears the job down ~3 s after a rank dies (odls sigkill timeout): the survivors
# must have marked the file before; mpirun's own exit bounds the time.
below "$took" 11 ||
    fail "the job took $took s to end after the kill (--peer-timeout 6: expected under 11 s)"
pass "a rank SIGKILLed: file closed as peer_lost, mpirun exited $rc after $took s"

# ---- 2. a rank frozen: silent for --peer-timeout ----------------------------------------------
start frozen 4
set -- $(pids_of frozen.h5)
pid=$3
t0=$(date +%s.%N)
kill -STOP "$pid"
for _ in $(seq 300); do running "$1" || running "$2" || break; sleep 0.1; done # the survivors
took=$(seconds_since "$t0")
set +e
wait "$job"
rc=$?
set -e
kill -KILL "$pid" 2>/dev/null || true
[ "$rc" != 0 ] || fail "mpirun exited 0 after a rank was frozen"
grep -q "rank 2 on $(hostname) silent for [4-9]" frozen.log || fail "no survivor reported rank 2 silent: $(cat frozen.log)"
pycheck run marks frozen.h5 --attr finished=1 --attr stop_reason=peer_lost \
    --detail-starts "rank 2 on $(hostname) silent for " --attr lost_ranks=2 --attr failed_nodes= \
    --ranks status=2,2,0
below "$took" $((4 + 6)) ||
    fail "the survivors ended $took s after the freeze (--peer-timeout 4)"
pass "a rank frozen: lost after --peer-timeout 4 of silence, file marked, survivors ended after $took s"

# ---- 2b. ranks that do not watch the lost one leave too ---------------------------------------
# 8 ranks: rank 0 watches ranks 1-3 and 5-7, not rank 4, which is frozen. mpirun is told not to
# end the job when a rank exits non-zero (as srun without --kill-on-bad-exit): rank 0 must learn
# from its neighbours that the run is over.
if long_part "8 ranks, one frozen; --peer-timeout 0"; then
    rm -f over.h5
    spawn timeout -k 5 120 "$MPIRUN" -np 8 --mca orte_abort_on_non_zero_status 0 "$DTBENCH" --model lenet \
        --dataset synthetic --batch 8 --iters 1000000 --warmup 0 --flush-every 5 --peer-timeout 4 \
        --output over.h5 >over.log 2>&1
    job=$SPAWNED
    wait_h5 over.h5 5 --all-ranks --poll 0.2 || { kill -9 $job; cat over.log; fail "over: no 5 iterations in time"; }
    set -- $(pids_of over.h5)
    t0=$(date +%s.%N)
    kill -STOP "$5"
    for _ in $(seq 300); do
        left=0
        for p in "$1" "$2" "$3" "$4" "$6" "$7" "$8"; do running "$p" && left=$((left + 1)); done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    took=$(seconds_since "$t0")
    kill -KILL "$5" 2>/dev/null || true
    # mpirun (the child of timeout), told not to end the job, may wait on: end it, then timeout
    for p in $(ps -o pid= --ppid "$job" 2>/dev/null) "$job"; do kill -KILL "$p" 2>/dev/null || true; done
    wait "$job" 2>/dev/null || true
    [ "$left" = 0 ] || fail "$left survivors still run $took s after rank 4 froze: $(grep '^dtbench' over.log)"
    grep -q "rank 0 on .*: rank [1-7] on .* says the run is over" over.log ||
        fail "rank 0 did not end on its neighbours' word: $(grep '^dtbench' over.log)"
    pycheck run marks over.h5 --attr stop_reason=peer_lost --attr lost_ranks=4 \
        --ranks status=2,2,2,2,0,2,2,2 || fail "over.h5 is not marked"
    below "$took" $((4 + 8)) ||
        fail "the survivors ended $took s after the freeze (--peer-timeout 4)"
    pass "8 ranks, rank 4 frozen, mpirun not ending the job: every survivor ended after $took s (rank 0 on its neighbours' word)"

    # ---- 3. --peer-timeout 0: off -------------------------------------------------------------------
    start off 0
    kill_rank off 1
    pycheck run marks off.h5 --lacks stop_reason --lacks finished || fail "--peer-timeout 0 still marked the file"
    ! grep -q "is gone\|silent for" off.log || fail "--peer-timeout 0 still watched: $(cat off.log)"
    pass "--peer-timeout 0: no watchdog, the killed run's file is left unmarked"
fi

# ---- 3b. heartbeats that never arrive (a firewall on UDP): refused, nothing left ---------------
expect_bad 0 "--peer-timeout: 0.5 is not accepted: expected 0 (off) or at least 1 second" \
    --model lenet --dataset synthetic --peer-timeout 0.5 --output bad.h5
DTBENCH_TEST_MUTE_HEARTBEAT=1 expect_bad 3 "--peer-timeout: rank 0 on .* heard no UDP heartbeat from rank 1 on .*--peer-timeout 0 runs without" \
    --model lenet --dataset synthetic --batch 6 --iters 5 --peer-timeout 2 --output bad.h5

# ---- 4. the finalizer by hand ---------------------------------------------------------------------
set +e
"$DTBENCH" --finalize lost.h5 --lost nonsense >out.txt 2>err.txt
rc=$?
set -e
[ "$rc" = 2 ] && [ "$(wc -l <err.txt)" = 1 ] && grep -q "^dtbench: --finalize: --lost: .nonsense. is not accepted" err.txt ||
    fail "--finalize with a bad --lost: exit $rc, $(cat err.txt)"
run_np 2 --model lenet --dataset synthetic --batch 4 --iters 3 --warmup 0 --output done.h5 >/dev/null
sum=$(md5sum <done.h5)
set +e
"$DTBENCH" --finalize done.h5 --lost 1:12:silent 2>err.txt
rc=$?
set -e
[ "$rc" = 3 ] || fail "--finalize of a closed file: exit $rc, expected 3 ($(cat err.txt))"
[ "$sum" = "$(md5sum <done.h5)" ] || fail "--finalize changed a file the run had closed"
pass "--finalize: bad arguments refused (exit 2); a file the run closed is left as it is (exit 3)"

# A file in the newest format (superblock version 3) still open for writing by a process that then
# dies: its "open for write" mark is cleared as h5clear would, the file marked.
"$PYTHON" "$TESTS_SRCDIR/make_h5.py" ranks v3.h5 a b --latest --hold 3 &
writer=$!
for _ in $(seq 100); do [ -e v3.h5.open ] && break; sleep 0.1; done
"$DTBENCH" --finalize v3.h5 --lost 1:5:silent 2>err.txt || fail "--finalize of a version-3 file held open: $(cat err.txt)"
wait $writer
pycheck run marks v3.h5 --superblock 3 --attr stop_reason=peer_lost --ranks status=2,0 ||
    fail "the version-3 file is not marked"
pass "--finalize: a version-3 superblock file still open for writing elsewhere is marked too"

# Two survivors' finalizers in turn, 6 ranks on n10 (0, 1), n1 (2, 3) and n7 (4, 5): the first
# finds rank 0 lost with its node, so rank 1 too; the second sees rank 0 again and rank 2's node.
# Rank 1, named by no finalizer, stays lost (CI once saw the second drop such a rank), and n1 is
# a node of its own, not a part of "n10".
"$PYTHON" "$TESTS_SRCDIR/make_h5.py" ranks two.h5 n10 n10 n1 n1 n7 n7
"$DTBENCH" --finalize two.h5 --lost 0:5:silent 2>err.txt || fail "first finalizer: $(cat err.txt)"
"$DTBENCH" --finalize two.h5 --lost 0:6:silent --lost 2:6:down 2>err.txt || fail "second finalizer: $(cat err.txt)"
pycheck run marks two.h5 --attr lost_ranks=0,1,2,3 --attr failed_nodes=n10,n1 \
    --ranks status=0,0,0,0,2,2 || fail "two finalizers in turn: not every lost rank and node kept"
pass "--finalize twice: the second keeps the first one's lost ranks (a node's included), n1 and n10 apart"
