# test_slurm_peer.sh - a node killed mid-run on the throw-away cluster (tests/vcluster.sh, 2
# emulated nodes, 4 in part 2), with dtbench's --peer-timeout watchdog:
#   1. plain mpirun across n1 and n2, one rank each; the rank on n2 is SIGKILLed (its node lives
#      on): the survivor on n1 hears "port unreachable" where n2's heartbeats came from, closes
#      the file marked peer_lost naming rank 1 on n2, within --peer-timeout + a few seconds.
#   2. two campaign runs under Slurm, 2 nodes x 1 rank each, one launched by srun, one by mpirun
#      (4 emulated nodes): the second node of each dies silently (its link goes down, then every
#      process in it is killed, slurmd included). The survivor finds it silent for
#      --peer-timeout, closes the file as peer_lost, exits 75; the batch template stops the
#      launcher if it still waits for the dead node; node_failed=NODE is in the state file; the
#      batch script ends within --peer-timeout + DTBENCH_PEER_GRACE + a few seconds;
#      `dtbench-campaign status` says "node failed: NODE, N iterations kept" while Slurm still
#      has the job, and so does the status read from the result and state files alone.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/vcluster.sh"
vc_require slurmctld slurmd munged mungekey sbatch
JOBS_DIR=$(cd "$TESTS_SRCDIR/../jobs" && pwd)
export PYTHONPATH="$JOBS_DIR${PYTHONPATH:+:$PYTHONPATH}" DTBENCH
PEER_TIMEOUT=5

# wait_written FILE N : until every rank of FILE has written N iterations.
wait_written() {
    wait_completed "$1" "$2" 150 || fail "$1: no $2 iterations written in time"
}

# check_marked FILE RANK HOST KIND NODES : closed as peer_lost naming RANK on HOST, failed_nodes
# NODES, every written block readable; the status of RANK and of every rank on NODES 0 (lost), the
# others' 2.
check_marked() {
    local r=0 h status=()
    for h in $(hosts_of "$1"); do
        if [ "$r" = "$2" ] || [[ -n $5 && ",$5," == *",$h,"* ]]; then status+=(0); else status+=(2); fi
        r=$((r + 1))
    done
    pycheck run marks "$1" --attr finished=1 --attr stop_reason=peer_lost \
        --detail-starts "rank $2 on $3 $4" --attr failed_nodes="$5" \
        --ranks status="$(IFS=,; echo "${status[*]}")" --intact
}

# running PID : the process exists and is not a zombie waiting for its parent.
running() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }

vc_nodes_up 4

if long_part "plain mpirun across two emulated nodes, the rank on n2 killed"; then
    # ---- 1. plain mpirun: the rank on n2 is killed, n2 lives on ------------------------------------
    printf 'n1 slots=1\nn2 slots=1\n' >"$WORK/hosts"
    export OMPI_MCA_plm_rsh_agent="$VC/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1
    out=$WORK/gone.h5
    vc_on n1 "$MPIRUN" -np 2 --hostfile "$WORK/hosts" "$DTBENCH" --model lenet --dataset synthetic \
        --batch 4 --iters 1000000 --warmup 0 --flush-every 5 --peer-timeout $PEER_TIMEOUT \
        --output "$out" >"$WORK/gone.log" 2>&1 &
    job=$!
    wait_written "$out" 10
    pids=$(pids_of "$out")
    set -- $pids
    t0=$(date +%s.%N)
    kill -9 "$2"
    # the survivor (all "nodes" share this machine's process ids) ends first; mpirun after it
    for _ in $(seq 200); do running "$1" || break; sleep 0.1; done
    took=$(seconds_since "$t0")
    set +e
    wait $job
    rc=$?
    set -e
    grep '^dtbench' "$WORK/gone.log" || true
    ! running "$1" || fail "the survivor still runs $took s after the kill"
    [ "$rc" != 0 ] || fail "mpirun exited 0 after a rank was killed"
    check_marked "$out" 1 n2 ended ""
    below "$took" $((PEER_TIMEOUT + 5)) ||
        fail "the survivor ended $took s after the kill (--peer-timeout $PEER_TIMEOUT)"
    pass "mpirun, rank on n2 killed: the survivor on n1 marked the file and ended $took s after the kill; mpirun exited $rc $(seconds_since "$t0") s after it"
    unset OMPI_MCA_plm_rsh_agent OMPI_MCA_plm_rsh_no_tree_spawn
fi

# ---- 2. Slurm: a node of each job dies (srun on n1+n2, mpirun on n3+n4) ---------------------------
VC_CPUS=1 vc_slurm_up # one task per node: the two jobs get two nodes each
export DTBENCH_PEER_GRACE=3
campaign() { vc_cli "$PYTHON" -m dtbench_campaign "$@"; }
for launcher in srun mpirun; do
    cat >"$WORK/$launcher.toml" <<EOF
[campaign]
name = "$launcher"
output = "$WORK/results/$launcher"
launcher = "$launcher"
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
    campaign submit "$WORK/$launcher.toml" >/dev/null
done
# result_of LAUNCHER : the result file of that campaign's run, once it exists
result_of() {
    local f=""
    for _ in $(seq 300); do f=$(ls "$WORK"/results/"$1"/runs/*.a1.h5 2>/dev/null || true); [ -n "$f" ] && break; sleep 0.5; done
    [ -n "$f" ] || fail "$1: the run wrote no result file"
    echo "$f"
}
f_srun=$(result_of srun) f_mpirun=$(result_of mpirun)
wait_written "$f_srun" 10
wait_written "$f_mpirun" 10
# Rank 1 of each job runs on the job's second node (the first holds the batch script): kill it.
dead=""
for f in "$f_srun" "$f_mpirun"; do
    dead="$dead $(hosts_of "$f" 1)"
done
# shellcheck disable=SC2086
set -- $dead
[ "$1" != "$2" ] && [ "$1" != n1 ] || fail "unexpected placement: rank 1 on $1 (srun job) and $2 (mpirun job)"
t0=$(date +%s.%N)
for node in "$@"; do ip -n "$(vc_ns "$node")" link set fe0 down; done # silent: no heartbeat, no ICMP
for node in "$@"; do for p in $(ip netns pids "$(vc_ns "$node")"); do kill -KILL "$p" 2>/dev/null || true; done; done
for _ in $(seq 120); do
    grep -q '^end=' "${f_srun%.h5}.state" && grep -q '^end=' "${f_mpirun%.h5}.state" && break
    sleep 0.5
done
limit=$((PEER_TIMEOUT + DTBENCH_PEER_GRACE + 15))
for launcher in srun mpirun; do
    f=$(result_of $launcher) node=$1
    shift
    state=${f%.h5}.state
    echo "--- $launcher: $state"
    cat "$state"
    grep -q '^end=' "$state" || fail "$launcher: the batch script did not end within 60 s of $node's death"
    grep -q "^node_failed=$node\$" "$state" || fail "$launcher: the state file does not say node_failed=$node"
    secs=$(seconds_to_end "$state" "$t0")
    below "$secs" "$limit" ||
        fail "$launcher: the batch script ended $secs s after $node died (limit $limit s)"
    check_marked "$f" 1 "$node" silent "$node"
    campaign status "$WORK/$launcher.toml" | tee "$WORK/status.txt"
    grep -q "node failed  .*node failed: $node, [1-9][0-9]* iterations kept" "$WORK/status.txt" ||
        fail "$launcher: status does not say node failed: $node with the iterations kept"
    # Slurm forgotten: the same answer from the files alone.
    pycheck slurm node-failed "$f" "$node"
    pass "$launcher: node $node died: file closed as peer_lost, node_failed=$node recorded, batch script ended $secs s after the death"
done
