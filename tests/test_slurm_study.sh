# test_slurm_study.sh - the scaling study of docs/scaling-study.md, end to end, on a real Slurm
# of 16 emulated nodes (tests/vcluster.sh) whose links are shaped to STUDY_RATE (200 Mbit/s) each
# way, checked against the result files (tests/check_study.py):
#   1. jobs/examples/scaling-study.toml (LeNet, 1-16 nodes, strong and weak, sync over mpi and
#      hier, ssp, async, mixed, two repeats): dtbench-campaign plan, submit, status --wait and
#      collect; every run completes.
#   2. dtbench-analyze scaling, stragglers, compare and report over the collected folder: every
#      series spans the 5 node counts; times, throughput, speedup and exchange share per point,
#      the report's scaling figure and table, compare's pooled repeats and the stragglers' busy
#      times are those of the files.
#   3. predict, fitted on the sync and hier runs of 1-4 nodes (--shared-cores: the emulated nodes
#      share this machine's cores), predicts the 8- and 16-node runs: iteration -40%/+60%,
#      collectives alone 40%, transfer 50% (why: check_study.py and docs/scaling-study.md).
#   4. every process of one node killed during a 16-node sync run and during a 16-node async run
#      (one parameter server per node): the survivors close the file within seconds,
#      failed_nodes names exactly that node, every rank keeps every iteration it completed,
#      `dtbench-campaign status` says "node failed", and no process is left on any node.
#   5. the report rendered in headless Chromium at 1280 px: the study's figures on the first
#      screen, the per-run sections folded, every figure drawn once unfolded; the screenshots
#      kept when STUDY_KEEP names a folder (also for the runs, the report and the logs).
# STUDY_RUNS=DIR takes the collected runs of an earlier study instead of running part 1.
# Not in make check (it takes STUDY minutes): scripts/test.sh --study runs it, and CI does.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/vcluster.sh"
vc_require slurmctld slurmd munged mungekey sbatch tc
command -v chromium >/dev/null || { echo "SKIP: chromium is not installed (scripts/setup.sh installs it)"; exit 77; }
JOBS_DIR=$(cd "$TESTS_SRCDIR/../jobs" && pwd)
export PYTHONPATH="$JOBS_DIR${PYTHONPATH:+:$PYTHONPATH}" DTBENCH
SPEC=$JOBS_DIR/examples/scaling-study.toml
STUDY_RATE=${STUDY_RATE:-200mbit}
KEEP=${STUDY_KEEP:-}
t_begin=$(date +%s)

# campaign ARGS... : dtbench-campaign on the login node ctl; status --wait may take a while.
campaign() { VC_TIMEOUT=1800 vc_cli "$PYTHON" -m dtbench_campaign "$@"; }
keep() { [ -z "$KEEP" ] || { mkdir -p "$KEEP" && cp -r "$@" "$KEEP/"; }; }
since() { echo $(($(date +%s) - $1)); }

vc_nodes_up 16
VC_RATE=$STUDY_RATE vc_shape
VC_CPUS=2 vc_slurm_up
echo "16 nodes, links of $STUDY_RATE each way, Slurm up in $(since "$t_begin") s"

# ---- 1. the campaign ----------------------------------------------------------------------------
t=$(date +%s)
RES=$WORK/results
C=$WORK/collected
t_campaign=0
if [ -n "${STUDY_RUNS:-}" ]; then
    C=$STUDY_RUNS
    echo "note: the runs of $C (STUDY_RUNS), no campaign"
else
    campaign plan "$SPEC" --results "$RES" >"$WORK/plan.log"
    nruns=$(sed -n 's/^campaign scaling-study: \([0-9]*\) runs.*/\1/p' "$WORK/plan.log")
    [ "${nruns:-0}" -gt 80 ] || { cat "$WORK/plan.log"; fail "plan: no study of 80 runs or more"; }
    campaign submit "$SPEC" --results "$RES" --no-check | tail -1 # plan checked it
    campaign status "$SPEC" --results "$RES" --wait --interval 2 >"$WORK/status.log" 2>"$WORK/wait.log" ||
        { tail "$WORK/wait.log"; fail "status --wait failed"; }
    campaign status "$SPEC" --results "$RES" --json >"$WORK/status.json"
    # A launch that died before dtbench wrote anything (Open MPI's TCP start-up on these emulated
    # nodes, under load: one of 94 runs in a CI-like run beside a build): its logs shown, then
    # resubmitted once with --retry, as a user would. At most 2 such runs: a defect of dtbench
    # fails again, or fails many.
    failed=$(pycheck slurm unfinished "$WORK/status.json")
    if [ -n "$failed" ]; then
        echo "note: retrying runs that did not complete: $(echo $failed)"
        [ "$(wc -w <<<"$failed")" -le 2 ] || { cat "$WORK/status.log"; fail "more than 2 runs failed"; }
        for r in $failed; do tail -n 20 "$RES"/scaling-study/runs/"$r".a1.out 2>/dev/null || true; done
        campaign submit "$SPEC" --results "$RES" --no-check --retry | tail -1
        campaign status "$SPEC" --results "$RES" --wait --interval 2 >"$WORK/status.log" \
            2>"$WORK/wait.log" || { tail "$WORK/wait.log"; fail "status --wait failed"; }
        campaign status "$SPEC" --results "$RES" --json >"$WORK/status.json"
    fi
    keep "$WORK/status.log"
    pycheck study campaign "$WORK/status.json" "$nruns" || { cat "$WORK/status.log"; fail "not every run of the study completed"; }
    campaign collect "$SPEC" --results "$RES" --to "$C" | tail -1
    [ "$(ls "$C"/*.h5 | wc -l)" = "$nruns" ] || fail "collect did not gather $nruns files"
    t_campaign=$(since "$t")
    pass "the study's $nruns runs completed in $t_campaign s and were collected"
fi

# ---- 2. the analyses -----------------------------------------------------------------------------
t=$(date +%s)
analyze scaling "$C" --unit nodes >"$WORK/scaling.txt"
analyze scaling "$C" --unit nodes --json >"$WORK/scaling.json"
analyze compare "$C" --json >"$WORK/compare.json"
analyze stragglers "$C"/*_n16x1_exchange-s*.h5 --json >"$WORK/stragglers.json"
analyze report "$C" -o "$WORK/report.html" >/dev/null
keep "$WORK/scaling.txt" "$WORK/report.html"
[ -n "${STUDY_RUNS:-}" ] || keep "$C"
pycheck study analyses "$C" "$WORK/scaling.json" "$WORK/compare.json" "$WORK/stragglers.json" \
    "$WORK/report.html" || fail "an analysis of the study is not what its files hold"
pass "scaling, compare, stragglers and report: as the files ($(since "$t") s)"

# ---- 3. predict ---------------------------------------------------------------------------------
pycheck study predict "$C" | tee "$WORK/predict.txt" || fail "predict from 1-4 nodes missed 8 or 16 nodes"
keep "$WORK/predict.txt"
pass "predict, fitted on 1-4 nodes: 8 and 16 nodes within the bounds"

# ---- 4. a node killed at 16 nodes ----------------------------------------------------------------
export DTBENCH_PEER_GRACE=3
# wait_nodes WHAT ALSO T0 SECONDS : until every node holds no process but its slurmd (and ALSO,
# a process name, if given), at most SECONDS; says how long after T0 (the kill) that held.
wait_nodes() {
    local left="" n pid comm
    for _ in $(seq $(($4 * 2))); do
        left=$(for n in $VC_NODES; do for pid in $(ip netns pids "$(vc_ns "$n")"); do
            comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
            [ -z "$comm" ] || [ "$comm" = slurmd ] || [ "$comm" = "$2" ] || echo "$n:$pid:$comm"
        done; done | tr '\n' ' ')
        [ -z "$left" ] && break
        sleep 0.5
    done
    [ -z "$left" ] || fail "$1: processes left on the nodes: $left"
    echo "$1: no process left on any node but slurmd${2:+ and $2} $(seconds_since "$3") s after the kill"
}
# fault NAME NODE TASKS OPTIONS : a long 16-node run of the campaign NAME; every process of NODE
# killed (its slurmd too) once every rank has written 20 iterations and 10 more went by; the
# file, the state file, status and the nodes checked; NODE's slurmd started again.
fault() {
    local name=$1 node=$2 tasks=$3 options=$4 f state t0 closed pid
    cat >"$WORK/$name.toml" <<EOF
[campaign]
name = "$name"
output = "$WORK/results/$name"
[resources]
nodes = 16
tasks_per_node = $tasks
time = "10"
signal_before = 60
[options]
model = "lenet"
dataset = "synthetic"
iters = 2000
warmup = 0
flush-every = 20
peer-timeout = 5
$options
EOF
    campaign submit "$WORK/$name.toml" >/dev/null
    for _ in $(seq 300); do f=$(ls "$WORK"/results/"$name"/runs/*.a1.h5 2>/dev/null || true); [ -n "$f" ] && break; sleep 0.5; done
    [ -n "$f" ] || fail "$name: the run wrote no result file"
    state=${f%.h5}.state
    wait_h5 "$f" 20 --timeout 240 --ended "$state" || fail "$name: no 20 iterations written in time"
    sleep 3
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046
    for pid in $(ip netns pids "$(vc_ns "$node")"); do kill -STOP "$pid" 2>/dev/null || true; done
    for pid in $(ip netns pids "$(vc_ns "$node")"); do kill -KILL "$pid" 2>/dev/null || true; done
    closed=""
    for _ in $(seq 600); do
        if pycheck run marks "$f" --attr finished=1 >/dev/null 2>&1; then
            closed=$(date +%s.%N)
            break
        fi
        sleep 0.1
    done
    [ -n "$closed" ] || fail "$name: the file was not closed within 60 s of $node's death"
    for _ in $(seq 240); do grep -q '^end=' "$state" && break; sleep 0.5; done
    grep -q '^end=' "$state" || fail "$name: the batch script did not end within 2 min of $node's death"
    pycheck study fault "$f" "$state" "$node" "$t0" "$closed" || fail "$name: the file is not as it should be"
    campaign status "$WORK/$name.toml" | tee "$WORK/$name.status"
    grep -q "node failed  .*node failed: $node, [1-9][0-9]* iterations kept" "$WORK/$name.status" ||
        fail "$name: status does not say node failed: $node"
    # nothing of the run on any node: the survivors, their witnesses (they linger up to
    # --peer-timeout + 5 s), finalizers and the launcher all gone. Slurm's own step daemons on
    # the nodes next to the dead one in the step's tree wait for it (the job shows COMPLETING),
    # and end about a minute after it is back (measured: 65 s after the kill).
    wait_nodes "$name" slurmstepd "$t0" 60
    keep "$WORK/$name.status"
    # the node comes back (ReturnToService=2: idle once its slurmd registers)
    VC_TIMEOUT=20 vc_on "$node" slurmd -f "$SLURM_CONF" -N "$node"
    wait_nodes "$name (with $node back)" "" "$t0" 150
    for _ in $(seq 100); do [ "$(vc_cli sinfo -h -t idle -o %D)" = 16 ] && break; sleep 0.3; done
    [ "$(vc_cli sinfo -h -t idle -o %D)" = 16 ] || { vc_cli sinfo; fail "$node did not come back"; }
}
fault fault-sync n9 1 'batch = 64'
pass "sync, 16 nodes, n9 killed: file closed, n9 named, every completed iteration kept, status says so, nothing left"
fault fault-async n12 2 $'exchange = "async"\nps_ranks_per_node = 1\nbatch_per_rank = 4'
pass "async, 16 nodes x 2, n12 (two parameter servers) killed: the same"

# ---- 5. the page ---------------------------------------------------------------------------------
pycheck study page "$WORK/report.html" "$WORK/page" || fail "the report does not render"
keep "$WORK/page/report-1280.png" "$WORK/page/report-first-screen.png"
pass "the report in headless Chromium: the study first, every figure drawn"
echo "test_slurm_study: $(since "$t_begin") s in all, the campaign $t_campaign s"
