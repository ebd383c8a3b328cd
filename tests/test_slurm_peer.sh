# test_slurm_peer.sh - a node killed mid-run on the throw-away cluster (tests/vcluster.sh, 2
# emulated nodes), with dtbench's --peer-timeout watchdog:
#   1. plain mpirun across n1 and n2, one rank each; the rank on n2 is SIGKILLed (its node lives
#      on): the survivor on n1 hears "port unreachable" where n2's heartbeats came from, closes
#      the file marked peer_lost naming rank 1 on n2, within --peer-timeout + a few seconds.
#   2. a campaign run under Slurm (srun, 2 nodes x 1 rank): node n2 dies silently (its link goes
#      down, then every process in it is killed, slurmd included). The survivor on n1 finds it
#      silent for --peer-timeout, closes the file as peer_lost, exits 75; the batch template
#      stops srun (which waits for the dead node) and records node_failed=n2; the batch script
#      ends within --peer-timeout + DTBENCH_PEER_GRACE + a few seconds; `dtbench-campaign status`
#      says "node failed: n2, N iterations kept" while Slurm still has the job and from the
#      files alone (--no-slurm view: the state and result files).
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/vcluster.sh"
vc_require slurmctld slurmd munged mungekey sbatch
JOBS_DIR=$(cd "$TESTS_SRCDIR/../jobs" && pwd)
export PYTHONPATH="$JOBS_DIR${PYTHONPATH:+:$PYTHONPATH}" DTBENCH
PEER_TIMEOUT=5

# wait_written FILE N : until every rank of FILE has written N iterations.
wait_written() {
    "$PYTHON" - "$1" "$2" <<'PY' || fail "$1: no $2 iterations written in time"
import os, sys, time, h5py
deadline = time.time() + 150
while time.time() < deadline:
    try:
        with h5py.File(sys.argv[1], "r") as f:
            if (f["ranks/completed"][:] >= int(sys.argv[2])).all():
                sys.exit(0)
    except (OSError, KeyError):
        pass
    time.sleep(0.3)
sys.exit(1)
PY
}

# check_marked FILE RANK HOST KIND NODES : closed as peer_lost naming RANK on HOST, every written
# block readable, the lost rank's status 0 and the others' 2.
check_marked() {
    "$PYTHON" - "$@" <<'PY' || fail "$1 is not marked as it should be"
import sys, h5py, numpy as np
path, rank, host, kind, nodes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
with h5py.File(path, "r") as f:
    a = f.attrs
    assert a["finished"] == 1 and a["stop_reason"] == "peer_lost", dict(a)
    assert a["stop_detail"].startswith(f"rank {rank} on {host} {kind}"), a["stop_detail"]
    assert a["failed_nodes"] == nodes, a["failed_nodes"]
    hosts = [h.decode() for h in f["ranks/host"][:]]
    status = f["ranks/status"][:]
    for r, h in enumerate(hosts):
        lost = r == rank or (nodes and h in nodes.split(","))
        assert status[r] == (0 if lost else 2), (r, h, status)
    done, total = f["ranks/completed"][:], f["iterations/total"][:]
    for r, n in enumerate(done):
        assert not np.isnan(total[r, :n]).any(), (r, n)
    print(f"ok: {path}: {a['stop_detail']}; completed {[int(x) for x in done]}")
PY
}

# running PID : the process exists and is not a zombie waiting for its parent.
running() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
# since T0 : seconds from T0 (date +%s.%N) to now, one decimal.
since() { "$PYTHON" -c "import sys,time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$1"; }

vc_nodes_up 2

# ---- 1. plain mpirun: the rank on n2 is killed, n2 lives on ------------------------------------
printf 'n1 slots=1\nn2 slots=1\n' >"$WORK/hosts"
export OMPI_MCA_plm_rsh_agent="$VC/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1
out=$WORK/gone.h5
vc_on n1 "$MPIRUN" -np 2 --hostfile "$WORK/hosts" "$DTBENCH" --model lenet --dataset synthetic \
    --batch 4 --iters 1000000 --warmup 0 --flush-every 5 --peer-timeout $PEER_TIMEOUT \
    --output "$out" >"$WORK/gone.log" 2>&1 &
job=$!
wait_written "$out" 10
pids=$("$PYTHON" -c "import h5py,sys; print(*h5py.File(sys.argv[1],'r')['ranks/pid'][:])" "$out")
set -- $pids
t0=$(date +%s.%N)
kill -9 "$2"
# the survivor (all "nodes" share this machine's process ids) ends first; mpirun after it
for _ in $(seq 200); do running "$1" || break; sleep 0.1; done
took=$(since "$t0")
set +e
wait $job
rc=$?
set -e
grep '^dtbench' "$WORK/gone.log" || true
! running "$1" || fail "the survivor still runs $took s after the kill"
[ "$rc" != 0 ] || fail "mpirun exited 0 after a rank was killed"
check_marked "$out" 1 n2 ended ""
"$PYTHON" -c "import sys; sys.exit(float(sys.argv[1]) >= $PEER_TIMEOUT + 5)" "$took" ||
    fail "the survivor ended $took s after the kill (--peer-timeout $PEER_TIMEOUT)"
pass "mpirun, rank on n2 killed: the survivor on n1 marked the file and ended $took s after the kill; mpirun exited $rc $(since "$t0") s after it"
unset OMPI_MCA_plm_rsh_agent OMPI_MCA_plm_rsh_no_tree_spawn

# ---- 2. Slurm, srun: node n2 dies -----------------------------------------------------------------
VC_CPUS=2 vc_slurm_up
export DTBENCH_PEER_GRACE=3
cat >"$WORK/dead.toml" <<EOF
[campaign]
name = "dead"
output = "$WORK/results/dead"
launcher = "srun"
[resources]
nodes = 2
tasks_per_node = 1
time = "10"
signal_before = 60
[options]
model = "lenet"
dataset = "synthetic"
batch = 8
iters = 1000000
warmup = 0
flush-every = 5
peer-timeout = $PEER_TIMEOUT
EOF
campaign() { vc_cli "$PYTHON" -m dtbench_campaign "$@"; }
campaign submit "$WORK/dead.toml" >/dev/null
for _ in $(seq 300); do f=$(ls "$WORK"/results/dead/runs/*.a1.h5 2>/dev/null || true); [ -n "$f" ] && break; sleep 0.5; done
[ -n "$f" ] || fail "the run wrote no result file"
state=${f%.h5}.state
wait_written "$f" 10
node=$("$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r')['ranks/host'][1].decode())" "$f")
[ "$node" = n2 ] || fail "rank 1 runs on $node, expected n2"
t0=$(date +%s.%N)
ip -n "$(vc_ns n2)" link set fe0 down # silent from now on: no heartbeat, no ICMP
for p in $(ip netns pids "$(vc_ns n2)"); do kill -KILL "$p" 2>/dev/null || true; done
for _ in $(seq 120); do grep -q '^end=' "$state" && break; sleep 0.5; done
took=$(since "$t0")
cat "$state"
grep -q '^end=' "$state" || fail "the batch script did not end within 60 s of the node's death"
grep -q '^node_failed=n2$' "$state" || fail "the state file does not say node_failed=n2"
check_marked "$f" 1 n2 silent n2
limit=$((PEER_TIMEOUT + DTBENCH_PEER_GRACE + 12))
"$PYTHON" -c "import sys; sys.exit(float(sys.argv[1]) >= $limit)" "$took" ||
    fail "the batch script ended $took s after the node died (limit $limit s)"
campaign status "$WORK/dead.toml" | tee "$WORK/status.txt"
grep -q "node failed  .*node failed: n2, [1-9][0-9]* iterations kept" "$WORK/status.txt" ||
    fail "status does not say node failed: n2 with the iterations kept"
# Slurm forgotten: the same answer from the files alone.
"$PYTHON" - "$f" <<'PY' || fail "status from the files alone is not 'node failed: n2'"
import sys
from dtbench_campaign import status
base = sys.argv[1][:-3]
state, detail = status.resolve(status.read_result(base + ".h5"), status.read_state_file(base + ".state"), "")
assert state == "node failed" and detail.startswith("node failed: n2, "), (state, detail)
print(f"ok: without Slurm: {state}: {detail}")
PY
pass "srun, node n2 died: file closed as peer_lost, node_failed=n2 recorded, batch script ended $took s after the death"
