# test_slurm_records.sh - no completed iteration is lost to a dead node or a frozen rank, and the
# result file and the job's state file agree on failed nodes, on the throw-away cluster
# (tests/vcluster.sh: 4 emulated nodes, Slurm, slurm/dtbench.sbatch), at --flush-every 200 so
# that a whole block of every rank is in memory only when it happens:
#   1. srun, 2 nodes x 2 ranks: every process of the second node (its slurmd, the ranks and their
#      witnesses) is killed while its network stack still answers ("port unreachable"): the
#      survivors close the file as peer_lost with failed_nodes=NODE and the state file says
#      node_failed=NODE, nothing else (the file said failed_nodes='' while the template found the
#      node down). Every rank keeps its iterations up to the one in flight: the dead node's from
#      their keeper on the first node, the survivors' from their own memory (before: only what
#      was flushed, a multiple of 200).
#   2. mpirun, 2 nodes x 1 rank: rank 1 frozen (SIGSTOP): the file is closed after --peer-timeout
#      with rank 1 lost on a live node (its witness answers): failed_nodes='' and no node_failed
#      in the state file (before: the node was taken for dead in both); kept counts as in 1.
# Both: /ranks/iterations_done (completed) equals /ranks/completed (kept); every kept row whole;
# the kill lands in the middle of a block, after the last flush seen (F), so every rank must keep
# more than F iterations.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/vcluster.sh"
vc_require slurmctld slurmd munged mungekey sbatch
PEER_TIMEOUT=5
export DTBENCH DTBENCH_PEER_GRACE=3 OMPI_MCA_odls_base_sigkill_timeout=5

vc_nodes_up 4
VC_CPUS=2 vc_slurm_up

# submit NAME LAUNCHER TASKS_PER_NODE : a long LeNet run on 2 nodes through the batch template
submit() {
    mkdir -p "$WORK/$1"
    DTBENCH_LAUNCHER=$2 vc_cli sbatch -N 2 --ntasks-per-node="$3" -t 10 -o "$WORK/$1/slurm.out" \
        "$TESTS_SRCDIR/../slurm/dtbench.sbatch" --model lenet --dataset synthetic --batch 8 \
        --iters 1000000 --warmup 0 --flush-every 200 --peer-timeout $PEER_TIMEOUT \
        --sample-hz 0 --output "$WORK/$1/r.h5" >/dev/null
}
submit node srun 2
submit frozen mpirun 1

# after_flush FILE [NAME LAUNCHER TASKS_PER_NODE] : waits until every rank has flushed 400
# iterations, then half a block more (200 x the median iteration so far). A job that ended before
# its first block with a rank crashed (seen once: Open MPI's shared-memory set-up on an emulated
# node found no backing file, then a call through a null pointer, no dtbench frame) is said and
# submitted once more with submit's arguments; a second such end fails.
after_flush() {
    local dir=${1%/*} state=${1%.h5}.state
    for _ in $(seq 300); do { [ -e "$1" ] || grep -qs '^end=' "$state"; } && break; sleep 0.5; done
    if ! wait_h5 "$1" 400 --timeout 240 --ended "$state"; then
        if [ $# -gt 1 ] && grep -qs '^end=' "$state" && grep -q 'Process received signal' "$dir/slurm.out" &&
            ! wait_h5 "$1" 200 --timeout 0; then
            echo "note: $2's job ended before its first block with a rank crashed; submitted again once:"
            cat "$dir/slurm.out"
            rm -rf "$dir"
            submit "$2" "$3" "$4"
            after_flush "$1"
            return
        fi
        cat "$dir/slurm.out"
        fail "$1: no 400 iterations in time"
    fi
    "$PYTHON" - "$1" <<'PY'
import sys, time, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    n = int(f["ranks/completed"][:].min())
    t = np.nanmedian(f["iterations/total"][:, :n])
time.sleep(min(max(100 * t, 0.3), 20))
PY
}

# kill_now FILE SIGNAL PID... : STOP then SIGNAL every PID at once (SIGNAL STOP: only STOP),
# reading /ranks/completed just before: prints its minimum F (a flush after the read would make
# F+1 reachable without the fix: it lands within milliseconds of a 200-iteration block).
kill_now() {
    "$PYTHON" - "$@" <<'PY'
import os, signal, sys, h5py
path, sig, pids = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]
with h5py.File(path, "r") as f:
    flushed = int(f["ranks/completed"][:].min())
for p in pids:
    os.kill(p, signal.SIGSTOP)
if sig != "STOP":
    for p in pids:
        os.kill(p, getattr(signal, "SIG" + sig))
print(flushed)
PY
}

# after STATE T0 : seconds from T0 to the state file's end= line
after() { awk -F= -v t0="$2" '$1 == "end" { printf "%.1f", $2 - t0 }' "$1"; }

# check FILE F LOST NODES [DETAIL] : closed as peer_lost, LOST (comma-separated) lost, failed_nodes
# NODES, stop_detail matching DETAIL; every rank's kept count above F and within one iteration of
# every other, equal to its completed count, its rows whole.
check() {
    "$PYTHON" - "$@" <<'PY' || fail "$1 is not as it should be"
import re, sys, h5py, numpy as np
path, flushed, lost, nodes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
wrong = []  # every check, so that one failure does not hide another
with h5py.File(path, "r") as f:
    a = f.attrs
    assert a["finished"] == 1 and a["stop_reason"] == "peer_lost", dict(a)
    print(f"{path}: {a['stop_detail']}")
    if len(sys.argv) > 5 and not re.match(sys.argv[5], a["stop_detail"]):
        wrong.append(f"stop_detail does not match {sys.argv[5]!r}")
    if (a["lost_ranks"], a["failed_nodes"]) != (lost, nodes):
        wrong.append(f"lost_ranks={a['lost_ranks']!r} failed_nodes={a['failed_nodes']!r}, "
                     f"expected {lost!r} and {nodes!r}")
    kept = f["ranks/completed"][:]
    done = f["ranks/iterations_done"][:] if "ranks/iterations_done" in f else None
    total = f["iterations/total"][:]
    print(f"last flush seen {flushed}; kept {list(map(int, kept))}, completed "
          f"{None if done is None else list(map(int, done))}")
    if not (kept > flushed).all():
        wrong.append(f"iterations after the last flush seen ({flushed}) lost: kept {kept}")
    if kept.max() - kept.min() > 1:
        wrong.append(f"lock-step ranks kept counts more than one iteration apart: {kept}")
    if done is None or (done != kept).any():
        wrong.append(f"/ranks/iterations_done {done} is not /ranks/completed {kept}")
    for r, n in enumerate(kept):
        if np.isnan(total[r, :n]).any():
            wrong.append(f"rank {r}: NaN among its {n} kept iterations")
for w in wrong:
    print("wrong:", w)
sys.exit(1 if wrong else 0)
PY
}

# ---- 1. a node's processes all killed, its network stack answering -----------------------------
f=$WORK/node/r.h5
after_flush "$f" node srun 2
node=$("$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r')['ranks/host'][3].decode())" "$f")
[ "$node" != "$("$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r')['ranks/host'][0].decode())" "$f")" ] ||
    fail "ranks 0 and 3 on one node"
t0=$(date +%s.%N)
# shellcheck disable=SC2046
flushed=$(kill_now "$f" KILL $(ip netns pids "$(vc_ns "$node")"))
state=$WORK/node/r.state
for _ in $(seq 120); do grep -q '^end=' "$state" && break; sleep 0.5; done
cat "$state"
grep -q '^end=' "$state" || fail "the batch script did not end within 60 s of $node's death"
check "$f" "$flushed" 2,3 "$node"
# every line the survivors' finalizers and the template appended names the node (later ones win)
[ "$(grep '^node_failed=' "$state" | sort -u)" = "node_failed=$node" ] ||
    fail "the state file says '$(grep '^node_failed=' "$state")', the file failed_nodes=$node"
pass "srun, every process of $node killed: file and state file say $node failed; every rank kept its iterations up to the one in flight; the batch script ended $(after "$state" "$t0") s after the kill"

# ---- 2. a rank frozen --------------------------------------------------------------------------
f=$WORK/frozen/r.h5
after_flush "$f" frozen mpirun 1
pid=$("$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r')['ranks/pid'][1])" "$f")
host=$("$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r')['ranks/host'][1].decode())" "$f")
t0=$(date +%s.%N)
flushed=$(kill_now "$f" STOP "$pid")
state=$WORK/frozen/r.state
for _ in $(seq 120); do grep -q '^end=' "$state" && break; sleep 0.5; done
kill -KILL "$pid" 2>/dev/null || true
cat "$state"
grep -q '^end=' "$state" || fail "the batch script did not end within 60 s of the freeze"
check "$f" "$flushed" 1 "" "rank 1 on $host silent for [0-9.]* s \\(its node answers\\)"
! grep -q '^node_failed=' "$state" || fail "the state file says $(grep '^node_failed=' "$state") for a frozen rank on a live $host"
pass "mpirun, rank 1 on $host frozen: no failed node in the file or the state file; every rank kept its iterations up to the one in flight; the batch script ended $(after "$state" "$t0") s after the freeze"
