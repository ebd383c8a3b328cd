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
# iterations, then half a block more (100 x the median iteration so far). A job that ended before
# its first block with a rank crashed (seen once: Open MPI's shared-memory set-up on an emulated
# node found no backing file, then a call through a null pointer, no dtbench frame) is said and
# submitted once more with submit's arguments; a second such end fails.
after_flush() {
    local dir=${1%/*} state=${1%.h5}.state
    for _ in $(seq 300); do { [ -e "$1" ] || grep -qs '^end=' "$state"; } && break; sleep 0.5; done
    if ! wait_h5 "$1" 400 --timeout 240 --ended "$state" --then 100; then
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
}

# ---- 1. a node's processes all killed, its network stack answering -----------------------------
f=$WORK/node/r.h5
after_flush "$f" node srun 2
node=$(hosts_of "$f" 3)
[ "$node" != "$(hosts_of "$f" 0)" ] ||
    fail "ranks 0 and 3 on one node"
t0=$(date +%s.%N)
# shellcheck disable=SC2046
flushed=$(pycheck slurm stop-ranks "$f" KILL $(ip netns pids "$(vc_ns "$node")")) || fail "$flushed"
state=$WORK/node/r.state
for _ in $(seq 120); do grep -q '^end=' "$state" && break; sleep 0.5; done
cat "$state"
grep -q '^end=' "$state" || fail "the batch script did not end within 60 s of $node's death"
pycheck slurm kept "$f" --flushed "$flushed" --lost 2,3 --nodes "$node"
# every line the survivors' finalizers and the template appended names the node (later ones win)
[ "$(grep '^node_failed=' "$state" | sort -u)" = "node_failed=$node" ] ||
    fail "the state file says '$(grep '^node_failed=' "$state")', the file failed_nodes=$node"
pass "srun, every process of $node killed: file and state file say $node failed; every rank kept its iterations up to the one in flight; the batch script ended $(seconds_to_end "$state" "$t0") s after the kill"

# ---- 2. a rank frozen --------------------------------------------------------------------------
f=$WORK/frozen/r.h5
after_flush "$f" frozen mpirun 1
pid=$(pids_of "$f" 1)
host=$(hosts_of "$f" 1)
t0=$(date +%s.%N)
flushed=$(pycheck slurm stop-ranks "$f" STOP "$pid") || fail "$flushed"
state=$WORK/frozen/r.state
for _ in $(seq 120); do grep -q '^end=' "$state" && break; sleep 0.5; done
kill -KILL "$pid" 2>/dev/null || true
cat "$state"
grep -q '^end=' "$state" || fail "the batch script did not end within 60 s of the freeze"
pycheck slurm kept "$f" --flushed "$flushed" --lost 1 --nodes "" \
    --detail "rank 1 on $host silent for [0-9.]* s \\(its node answers\\)"
! grep -q '^node_failed=' "$state" || fail "the state file says $(grep '^node_failed=' "$state") for a frozen rank on a live $host"
pass "mpirun, rank 1 on $host frozen: no failed node in the file or the state file; every rank kept its iterations up to the one in flight; the batch script ended $(seconds_to_end "$state" "$t0") s after the freeze"
