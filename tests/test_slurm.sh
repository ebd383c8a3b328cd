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
#   3. `dtbench-campaign local` runs the campaign's mpirun runs with plain mpirun across the two
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
failed=$("$PYTHON" -c 'import json,sys; print(" ".join(r["run"] for r in json.load(open(sys.argv[1])) if r["state"] != "completed"))' "$WORK/status0.json")
if [ -n "$failed" ]; then
    echo "note: retrying runs that did not complete: $failed"
    for r in $failed; do tail -n 20 "$WORK"/results/smoke/runs/"$r".a1.out 2>/dev/null || true; done
    tail -n 20 "$WORK"/results/smoke/slurm/*.out || true
    campaign submit --retry "$WORK/smoke.toml"
    wait_jobs 240
fi
rx1_n1=$(vc_rx_bytes n1) rx1_n2=$(vc_rx_bytes n2)
campaign status "$WORK/smoke.toml" | tee "$WORK/status.log"
campaign status "$WORK/smoke.toml" --json >"$WORK/status.json"
"$PYTHON" - "$WORK/status.json" "$nruns" "$((rx1_n1 - rx0_n1))" "$((rx1_n2 - rx0_n2))" <<'PY'
import json, sys, h5py, numpy as np
rows = json.load(open(sys.argv[1]))
nruns, rx = int(sys.argv[2]), (int(sys.argv[3]), int(sys.argv[4]))
avx512 = " avx512f " in open("/proc/cpuinfo").read().replace("\n", " ")
assert len(rows) == nruns, rows
need = 0
for r in rows:
    assert r["state"] == "completed", r
    with h5py.File(r["file"], "r") as f:
        a = f.attrs
        assert a["finished"] == 1 and a["stop_reason"] == "completed", dict(a)
        hosts = [h.decode() for h in f["ranks/host"][:]]
        assert a["nnodes"] == 2 and a["nranks"] == 4, (a["nnodes"], a["nranks"])
        assert sorted(hosts) == ["n1", "n1", "n2", "n2"], hosts
        assert sorted(f["ranks/node"][:]) == [0, 0, 1, 1], f["ranks/node"][:]
        assert a["slurm_nodelist"] == "n[1-2]", a["slurm_nodelist"]
        state = dict(l.strip().split("=", 1) for l in open(r["file"][:-3] + ".state") if "=" in l)
        assert a["slurm_job_id"] and a["slurm_job_id"] == state["job_id"], (a["slurm_job_id"], state)
        # first attempts went in job arrays; a --retry resubmits a single run as its own job
        assert "sbatch" in a["submit_line"], a["submit_line"]
        assert "--array=" in a["submit_line"] or ".a1." not in r["file"], a["submit_line"]
        launcher = "srun" if "_srun" in r["run"] else "mpirun"
        assert f"DTBENCH_LAUNCHER={launcher}" in a["submit_line"], a["submit_line"]
        assert a["launcher"] == launcher, (r["run"], a["launcher"])
        assert (f["ranks/completed"][:] == a["iters_total"]).all()
        # every rank loads OpenBLAS with a core that fits the CPU, whatever the launcher
        # (kernels/cpu_blas.c: nothing exported): on an AVX-512 host never the generic kernels
        for kc in f["ranks/kernel_choices"][:]:
            core = kc.decode().splitlines()[1].split(": ")[1]
            assert not avx512 or core.lower() not in ("prescott", "nehalem", "core2"), (launcher, kc)
        # Bytes a node must receive per iteration: the other node's half of the sum, at least
        # the whole gradient once (any allreduce across a 2-way cut moves >= N values each way).
        if a["exchange"] == "sync":
            need += int(a["iters_total"]) * int(a["param_count"]) * 4
for node, got in zip(("n1", "n2"), rx):
    assert got >= need, f"{node}: its veth received {got} bytes, the exchange needs >= {need}"
print(f"ok: {nruns} runs completed on n1+n2 with 2 ranks each; veths received "
      f"{rx[0]/1e6:.1f} / {rx[1]/1e6:.1f} MB >= {need/1e6:.1f} MB of sync gradients")
PY
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
# wait_iterations NAME N : until every rank has written N iterations.
wait_iterations() {
    wait_h5 "$WORK/results/$1/runs" "$2" --all-ranks --poll 0.3 ||
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
"$PYTHON" - "$WORK" <<'PY'
import json, os, sys, h5py, numpy as np
work = sys.argv[1]
expect = {"limit": "time limit", "scancel": "cancelled", "cancel": "cancelled",
          "early": "cancelled"}
least = {"scancel": 10, "cancel": 10}  # signalled after 10 iterations; the others may stop at 0
for name, reason in expect.items():
    (r,) = json.load(open(os.path.join(work, name + ".json")))
    assert r["state"] == "stopped early" and r["detail"].startswith(reason), (name, r)
    if not r["file"]:  # stopped during set-up (a stop in start-up may be): nothing recorded
        assert name in ("early", "limit") and "during set-up" in r["detail"], (name, r)
        print(f"ok: {name}: stopped early ({r['detail']})")
        continue
    with h5py.File(r["file"], "r") as f:
        a = f.attrs
        assert a["finished"] == 1 and a["stop_reason"] == "signal", (name, dict(a))
        assert (f["ranks/status"][:] == 2).all(), (name, f["ranks/status"][:])
        done = f["ranks/completed"][:]
        assert len(set(done)) == 1 and least.get(name, 0) <= done[0] < a["iters_total"], (name, done)
        total = f["iterations/total"][:]
        assert not np.isnan(total[:, :done[0]]).any() and np.isnan(total[:, done[0]:]).all(), name
    state = dict(l.strip().split("=", 1) for l in open(r["file"][:-3] + ".state") if "=" in l)
    secs = float(state["stop_seconds"])
    # a stop during start-up waits for the ranks to start (at most ~1 min here under load)
    limit = 2.0 if done[0] > 0 else 60.0
    assert secs < limit, f"{name}: {secs} s from the signal to the closed file (limit {limit} s)"
    print(f"ok: {name}: stopped early ({r['detail']}) after {done[0]} iterations, "
          f"signal -> file closed and launcher exited in {secs:.2f} s")
PY
pass "time limit, scancel and dtbench-campaign cancel (also during start-up) leave closed files marked stopped early"

# ---- 3. local: plain mpirun across the emulated nodes -------------------------------------------
printf 'n1 slots=2\nn2 slots=2\n' >"$WORK/hosts"
export OMPI_MCA_plm_rsh_agent="$VC/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1
rx0_n2=$(vc_rx_bytes n2)
vc_on n1 "$PYTHON" -m dtbench_campaign local "$WORK/smoke.toml" --results "$WORK/results/local" \
    --hostfile "$WORK/hosts" --only '*mpirun*' | tee "$WORK/local.log"
rx1_n2=$(vc_rx_bytes n2)
campaign status "$WORK/smoke.toml" --results "$WORK/results/local" --only '*mpirun*' --json >"$WORK/local.json"
"$PYTHON" - "$WORK/local.json" "$((rx1_n2 - rx0_n2))" <<'PY'
import json, sys, h5py
rows, rx = json.load(open(sys.argv[1])), int(sys.argv[2])
assert rows and all(r["state"] == "completed" and r["job"] == "local" for r in rows), rows
need = 0
for r in rows:
    with h5py.File(r["file"], "r") as f:
        a = f.attrs
        hosts = sorted(h.decode() for h in f["ranks/host"][:])
        assert hosts == ["n1", "n1", "n2", "n2"] and a["nnodes"] == 2, hosts
        assert a["submit_line"].startswith("mpirun -np 4 --host n1:2,n2:2"), a["submit_line"]
        assert a["launcher"] == "mpirun", a["launcher"]
        assert a["slurm_job_id"] == "", a["slurm_job_id"]
        if a["exchange"] == "sync":
            need += int(a["iters_total"]) * int(a["param_count"]) * 4
assert rx >= need, f"n2's veth received {rx} bytes, the exchange needs >= {need}"
print(f"ok: local: {len(rows)} runs on n1+n2 without Slurm; n2 received {rx/1e6:.1f} MB")
PY
pass "dtbench-campaign local ran the campaign across the emulated nodes"
echo "test_slurm: $(($(date +%s) - t_start)) s after the cluster was up"
