# test_slurm.sh - dtbench under a real Slurm with 2 emulated nodes (tests/vcluster.sh), driven by
# dtbench-campaign and slurm/dtbench.sbatch:
#   1. a small campaign (LeNet, 2 nodes x 2 ranks, srun and mpirun launchers, two bucket sizes,
#      exchange sync, and mixed once this dtbench has it) is submitted as job arrays and waited
#      for; every file names 2 hosts with 2 ranks each, records the job, node list and submit
#      line, and the nodes' veths carried at least the gradient volume; a second submit
#      changes nothing; collect gathers the files and an index.
#   2. a job that reaches its time-limit warning (mpirun launcher), one cancelled with scancel
#      (srun launcher) and one stopped with `dtbench-campaign cancel` (mpirun launcher) leave
#      closed files with every completed iteration, marked stopped early; status says so; the
#      time from signal to closed file is printed and must be under 2 s.
#   3. (the long checks) `dtbench-campaign local` runs the campaign's mpirun runs with plain mpirun across the two
#      emulated nodes (no Slurm).
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/vcluster.sh"
vc_require slurmctld slurmd munged mungekey sbatch
JOBS_DIR=$(cd "$TESTS_SRCDIR/../jobs" && pwd)
export PYTHONPATH="$JOBS_DIR${PYTHONPATH:+:$PYTHONPATH}" DTBENCH

# campaign ARGS... : dtbench-campaign on the login node ctl (where the Slurm commands reach
# slurmctld).
campaign() { vc_cli "$PYTHON" -m dtbench_campaign "$@"; }

# wait_jobs SECONDS : until squeue shows no job of ours (polling, not sbatch --wait).
wait_jobs() {
    local deadline=$(($(date +%s) + $1))
    while [ -n "$(vc_cli squeue -h -o %i)" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || { vc_cli squeue; tail -20 "$VC"/log/*.log; fail "jobs still queued after $1 s"; }
        sleep 0.5
    done
}

# Exchange strategies: sync and mixed (REQUIRE_MIXED=0 turns a dtbench without mixed into a note).
REQUIRE_MIXED=${REQUIRE_MIXED:-1}
exchanges='"sync"'
if grep -q -- '--exchange {.*mixed' <<<"$("$DTBENCH" --help)"; then
    exchanges='"sync", "mixed"'
elif [ "$REQUIRE_MIXED" = 1 ]; then
    fail "this dtbench has no --exchange mixed (REQUIRE_MIXED=1)"
else
    echo "note: this dtbench has no --exchange mixed yet: the campaign covers sync only"
fi

vc_nodes_up 2
VC_CPUS=4 vc_slurm_up # 4 CPUs claimed per node: the three stop tests run side by side
t_start=$(date +%s)

# ---- 1. the campaign --------------------------------------------------------------------------
cat >"$WORK/smoke.toml" <<EOF
[campaign]
name = "smoke"
output = "$WORK/results/smoke"
launcher = ["srun", "mpirun"]

[resources]
nodes = 2
tasks_per_node = 2
time = "00:05:00"

[options]
model = "lenet"
dataset = "synthetic"
exchange = [$exchanges]
bucket-mb = [25, 0.5]
batch_per_rank = 8
iters = 20
warmup = 2
flush-every = 5
EOF
nruns=$(( $(echo "$exchanges" | tr ',' '\n' | wc -l) * 2 * 2 ))
rx0_n1=$(vc_rx_bytes n1) rx0_n2=$(vc_rx_bytes n2)
campaign submit "$WORK/smoke.toml" | tee "$WORK/submit.log"
njobs=$(grep -c '^submitted job' "$WORK/submit.log")
[ "$njobs" = 2 ] || fail "expected one job array per launcher (2), got $njobs"
grep -q "array=0-" "$WORK/results/smoke/submissions.jsonl" || fail "no job array was submitted"
wait_jobs 240
# A launch that failed before dtbench wrote anything (seen once in many full-suite runs, an srun
# array task under load): show its logs, then resubmit it once with --retry, as a user would.
# A dtbench defect fails again and the checks below catch it.
campaign status "$WORK/smoke.toml" --json >"$WORK/status0.json"
failed=$(pycheck slurm unfinished "$WORK/status0.json")
if [ -n "$failed" ]; then
    echo "note: retrying runs that did not complete: $(echo $failed)"
    for r in $failed; do tail -n 20 "$WORK"/results/smoke/runs/"$r".a1.out 2>/dev/null || true; done
    tail -n 20 "$WORK"/results/smoke/slurm/*.out || true
    campaign submit --retry "$WORK/smoke.toml"
    wait_jobs 240
fi
rx1_n1=$(vc_rx_bytes n1) rx1_n2=$(vc_rx_bytes n2)
campaign status "$WORK/smoke.toml" | tee "$WORK/status.log"
campaign status "$WORK/smoke.toml" --json >"$WORK/status.json"
avx512=() # an AVX-512 CPU: no generic BLAS kernels, whatever the launcher
grep -qw avx512f /proc/cpuinfo 2>/dev/null && avx512=(--avx512)
pycheck slurm campaign "$WORK/status.json" --runs "$nruns" --received n1=$((rx1_n1 - rx0_n1)) \
    --received n2=$((rx1_n2 - rx0_n2)) ${avx512[@]+"${avx512[@]}"}
pass "campaign submitted as $njobs job arrays and completed ($(($(date +%s) - t_start)) s)"

# Submitting again never starts a run twice nor touches a result.
sums=$(md5sum "$WORK"/results/smoke/runs/*.h5)
grep -q "nothing to submit" <<<"$(campaign submit "$WORK/smoke.toml")" || fail "second submit did not say nothing to submit"
[ "$(vc_cli squeue -h | wc -l)" = 0 ] || fail "second submit queued jobs"
[ "$sums" = "$(md5sum "$WORK"/results/smoke/runs/*.h5)" ] || fail "second submit changed result files"
pass "submitting again changes nothing"

campaign collect "$WORK/smoke.toml" --to "$WORK/collected"
[ "$(ls "$WORK"/collected/*.h5 | wc -l)" = "$nruns" ] || fail "collect did not gather $nruns files"
[ "$(tail -n +2 "$WORK/collected/index.csv" | wc -l)" = "$nruns" ] || fail "index.csv has no row per run"
sed -n 1p "$WORK/collected/index.csv" | grep "nodes,tasks_per_node,ranks" >/dev/null || fail "index.csv lacks the scaling columns"
pass "collect: $nruns files and index.csv"

# ---- 2. time limit and cancellation ------------------------------------------------------------
# stop_spec NAME LAUNCHER TIME SIGNAL_BEFORE : a long single run on 2 nodes x 1 rank.
stop_spec() {
    cat >"$WORK/$1.toml" <<EOF
[campaign]
name = "$1"
output = "$WORK/results/$1"
launcher = "$2"
[resources]
nodes = 2
tasks_per_node = 1
time = "$3"
signal_before = $4
[options]
model = "lenet"
dataset = "synthetic"
batch = 8
iters = 1000000
warmup = 2
flush-every = 5
EOF
}
# file_of NAME : the result file of the campaign's only run.
file_of() { ls "$WORK"/results/"$1"/runs/*.a1.h5 2>/dev/null; }
# wait_iterations NAME N : until every rank has written N iterations (the four jobs share two
# nodes: one may wait in the queue for the time-limit job's minute, and start under load).
wait_iterations() {
    wait_h5 "$WORK/results/$1/runs" "$2" --all-ranks --poll 0.3 --timeout 300 ||
        fail "$1: the run did not write $2 iterations in time"
}
# Time limit 1 min, warning 50 s before: Slurm checks limits about every 30 s, so the warning
# comes 0 to 40 s after the start (under load, before the first iteration: a stop during
# start-up must still end the run cleanly: a file closed with 0 iterations, or, stopped during
# set-up, none and a status that says so).
stop_spec limit mpirun 1 50
stop_spec scancel srun 10 60
stop_spec cancel mpirun 10 60
stop_spec early srun 10 60
for s in limit scancel cancel early; do campaign submit "$WORK/$s.toml" 2>/dev/null >/dev/null; done
# early: dtbench-campaign cancel as soon as Slurm says the job runs (the stop lands in start-up).
for _ in $(seq 600); do
    [ "$(vc_cli squeue -h -n early-n2x1 -o %T)" = RUNNING ] && break
    sleep 0.1
done
grep -q "asked to stop" <<<"$(campaign cancel "$WORK/early.toml")" || fail "early: cancel did not ask the running job to stop"
wait_iterations scancel 10
wait_iterations cancel 10
job=$(vc_cli squeue -h -n scancel-n2x1 -o %i)
[ -n "$job" ] || fail "the scancel job is not in the queue"
vc_cli scancel "$job"
grep -q "asked to stop" <<<"$(campaign cancel "$WORK/cancel.toml")" || fail "dtbench-campaign cancel did not ask the running job to stop"
wait_jobs 150
for s in limit scancel cancel early; do
    campaign status "$WORK/$s.toml" --json >"$WORK/$s.json"
    campaign status "$WORK/$s.toml" | sed -n 2p
done
# signalled after 10 iterations: scancel, cancel; the others may stop at 0, or during set-up
pycheck slurm stopped "$WORK/limit.json" --reason "time limit" --setup-stop
pycheck slurm stopped "$WORK/scancel.json" --reason cancelled --least 10
pycheck slurm stopped "$WORK/cancel.json" --reason cancelled --least 10
pycheck slurm stopped "$WORK/early.json" --reason cancelled --setup-stop
pass "time limit, scancel and dtbench-campaign cancel (also during start-up) leave closed files marked stopped early"

# ---- 3. local: plain mpirun across the emulated nodes -------------------------------------------
if long_part "dtbench-campaign local across the emulated nodes"; then
    printf 'n1 slots=2\nn2 slots=2\n' >"$WORK/hosts"
    export OMPI_MCA_plm_rsh_agent="$VC/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1
    rx0_n2=$(vc_rx_bytes n2)
    vc_on n1 "$PYTHON" -m dtbench_campaign local "$WORK/smoke.toml" --results "$WORK/results/local" \
        --hostfile "$WORK/hosts" --only '*mpirun*' | tee "$WORK/local.log"
    rx1_n2=$(vc_rx_bytes n2)
    campaign status "$WORK/smoke.toml" --results "$WORK/results/local" --only '*mpirun*' --json >"$WORK/local.json"
    pycheck slurm local "$WORK/local.json" --received n2=$((rx1_n2 - rx0_n2))
    pass "dtbench-campaign local ran the campaign across the emulated nodes"
fi
echo "test_slurm: $(($(date +%s) - t_start)) s after the cluster was up"
