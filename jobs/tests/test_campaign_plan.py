"""Planning and submitting without Slurm: the sweep, run names, exclusions, weak scaling, job
arrays per node count, the exact sbatch commands, task files, attempts that never reuse a file,
and `submit` against fake sbatch/squeue/scontrol programs."""

import json
import os
import shlex

import pytest

from campaign_helpers import BASIC, fake_dtbench, fake_program, result_file, state_file, write_spec
from dtbench_campaign import cli, plan
from dtbench_campaign.spec import SpecError, load


def _spec(tmp_path, text=BASIC):
    return load(write_spec(tmp_path, text), cwd=str(tmp_path))


def test_sweep_order_and_names(tmp_path):
    runs = plan.expand(_spec(tmp_path))
    assert [r.id for r in runs] == ["n1x2_exchange-sync", "n1x2_exchange-mixed",
                                    "n2x2_exchange-sync", "n2x2_exchange-mixed"]
    r = runs[3]
    assert (r.nodes, r.tasks_per_node, r.ranks) == (2, 2, 4)
    assert r.dtbench_args() == ["--model", "lenet", "--exchange", "mixed", "--batch", "64", "--iters", "10"]
    assert r.factors["exchange"] == "mixed" and r.factors["nodes"] == 2


def test_repeats_launchers_gpus_in_names(tmp_path):
    text = BASIC.replace('name = "t"', 'name = "t"\nrepeats = 2\nlauncher = ["srun", "mpirun"]') \
                .replace("tasks_per_node = 2", "tasks_per_node = 2\ngpus_per_node = 4")
    ids = [r.id for r in plan.expand(_spec(tmp_path, text))]
    assert len(ids) == 2 * 2 * 2 * 2 and len(set(ids)) == len(ids)
    assert ids[0] == "n1x2_g4_srun_exchange-sync_r0" and ids[1] == "n1x2_g4_srun_exchange-sync_r1"


def test_exclude_and_unused_exclude(tmp_path):
    text = BASIC + '\n[[exclude]]\nnodes = 1\nexchange = "mixed"\n'
    assert [r.id for r in plan.expand(_spec(tmp_path, text))] == [
        "n1x2_exchange-sync", "n2x2_exchange-sync", "n2x2_exchange-mixed"]
    text = BASIC + '\n[[exclude]]\nnodes = 4\n'
    with pytest.raises(SpecError, match=r"exclude\[0\]: \{'nodes': 4\} matches no run"):
        plan.expand(_spec(tmp_path, text))


def test_batch_per_rank_scales_the_global_batch(tmp_path):
    text = BASIC.replace("batch = 64", "batch_per_rank = 32")
    runs = plan.expand(_spec(tmp_path, text))
    assert {r.id: r.options["batch"] for r in runs}["n2x2_exchange-sync"] == 128
    assert "batch_per_rank" not in runs[0].options
    plan.check_runs(runs)


def test_batch_must_divide_across_ranks(tmp_path):
    runs = plan.expand(_spec(tmp_path, BASIC.replace("batch = 64", "batch = 6").replace("[1, 2]", "[2, 1]")))
    with pytest.raises(SpecError, match=r"options.batch: 6 is not accepted for run n2x2_exchange-sync \(4 ranks\)"):
        plan.check_runs(runs)


def test_colliding_names_are_refused(tmp_path):
    text = BASIC.replace('["sync", "mixed"]', '["a b", "a-b"]')
    with pytest.raises(SpecError, match="get the same name"):
        plan.expand(_spec(tmp_path, text))


def _jobs(spec, max_array=1001):
    runs = plan.expand(spec)
    return plan.group_jobs(spec, runs, {r.id: 1 for r in runs}, max_array)


def test_one_array_per_node_count(tmp_path):
    jobs = _jobs(_spec(tmp_path))
    assert [(j.runs[0].nodes, len(j.runs), j.array) for j in jobs] == [(1, 2, True), (2, 2, True)]


def test_arrays_split_at_max_array_size_or_off(tmp_path):
    text = BASIC.replace('["sync", "mixed"]', '["sync", "mixed", "async"]')
    text = text.replace('name = "t"', 'name = "t"\nrepeats = 2')
    spec = _spec(tmp_path, text)
    assert [len(j.runs) for j in _jobs(spec, max_array=4)] == [4, 2, 4, 2]
    assert all(not j.array for j in _jobs(spec, max_array=0)) and len(_jobs(spec, 0)) == 12
    spec.array = False
    assert len(_jobs(spec)) == 12


def test_sbatch_command_of_an_array(tmp_path):
    text = BASIC.replace("[resources]", '[resources]\npartition = "gpu"\naccount = "p1"\ntime = "1-00:00"\n'
                                        'signal_before = 300\nsbatch_args = ["--exclusive"]\n'
                                        "gpus_per_node = 4")
    spec = _spec(tmp_path, text)
    job = _jobs(spec)[1]
    cmd = plan.sbatch_command(spec, job, "/t/dtbench.sbatch", "/bin/dtbench", "/f.tasks", "afterany:7")
    assert cmd[:2] == ["sbatch", "--parsable"]
    for arg in ("--job-name=t-n2x2g4", "--nodes=2", "--ntasks-per-node=2", "--gpus-per-node=4",
                "--time=1-00:00", "--signal=B:USR1@300", "--partition=gpu", "--account=p1",
                "--dependency=afterany:7", "--exclusive", "--array=0-1", "--no-requeue"):
        assert arg in cmd, arg
    assert f"--output={spec.output}/slurm/%x-%A_%a.out" in cmd
    assert cmd[-3:] == ["/t/dtbench.sbatch", "--task-file", "/f.tasks"]
    lines = plan.task_lines(spec, job)
    assert len(lines) == 2
    words = shlex.split(lines[1])
    assert words[:6] == ["--model", "lenet", "--exchange", "mixed", "--batch", "64"]
    assert words[-2:] == ["--output", f"{spec.output}/runs/n2x2_g4_exchange-mixed.a1.h5"]


def test_sbatch_command_of_a_single_run(tmp_path):
    spec = _spec(tmp_path)
    spec.array = False
    job = _jobs(spec)[0]
    cmd = plan.sbatch_command(spec, job, "/t/dtbench.sbatch", "/bin/dtbench", None)
    assert "--gpus-per-node=0" not in " ".join(cmd) and not any(a.startswith("--array") for a in cmd)
    assert cmd[cmd.index("/t/dtbench.sbatch") + 1:] == job.runs[0].dtbench_args() + [
        "--output", f"{spec.output}/runs/n1x2_exchange-sync.a1.h5"]
    env = plan.job_env(spec, job, "/bin/dtbench")
    assert plan.submit_line(env, cmd).startswith(
        "DTBENCH=/bin/dtbench DTBENCH_LAUNCHER=srun DTBENCH_LOG=auto sbatch ")


def test_attempts_come_from_files_and_log(tmp_path):
    spec = _spec(tmp_path)
    assert plan.next_attempt(plan.known_attempts(spec), "n1x2_exchange-sync") == 1
    result_file(plan.result_base(spec, "n1x2_exchange-sync", 1) + ".h5", True, "completed", 12, 12)
    plan.append_log(spec, {"job_id": "9", "array": False,
                           "tasks": [{"index": 0, "run": "n2x2_exchange-sync", "attempt": 3}]})
    known = plan.known_attempts(spec)
    assert plan.next_attempt(known, "n1x2_exchange-sync") == 2
    assert plan.next_attempt(known, "n2x2_exchange-sync") == 4


# ---- submit with fake Slurm commands --------------------------------------------------------------
@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    calls = os.path.join(str(tmp_path), "sbatch-calls.jsonl")
    fake_program(tmp_path, "sbatch", f"""\
        n=$(($(cat {calls} 2>/dev/null | wc -l) + 100))
        python3 -c 'import json,os,sys; print(json.dumps({{"argv": sys.argv[1:], "submit_line": os.environ.get("DTBENCH_SUBMIT_LINE"), "log": os.environ.get("DTBENCH_LOG"), "launcher": os.environ.get("DTBENCH_LAUNCHER")}}))' "$@" >>{calls}
        echo "$n"
        """)
    fake_program(tmp_path, "squeue", "exit 0\n")
    fake_program(tmp_path, "scontrol", 'echo "MaxArraySize            = 1001"\n')
    monkeypatch.setenv("PATH", os.path.join(str(tmp_path), "bin") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("DTBENCH", fake_dtbench(tmp_path))
    monkeypatch.chdir(tmp_path)

    def read():
        with open(calls) as f:
            return [json.loads(line) for line in f]
    return read


@pytest.mark.long  # a slower case: the long checks (CI)
def test_submit_arrays_then_nothing_then_retry(tmp_path, fake_slurm, capsys):
    spec_path = write_spec(tmp_path, BASIC)
    assert cli.main(["submit", spec_path]) == 0
    calls = fake_slurm()
    assert len(calls) == 2 and all("--array=0-1" in c["argv"] for c in calls)
    assert calls[0]["log"] == "auto" and calls[0]["launcher"] == "srun"
    assert calls[0]["submit_line"].startswith("DTBENCH=")
    assert calls[0]["submit_line"].endswith(" sbatch " + shlex.join(calls[0]["argv"]))
    task_file = calls[1]["argv"][-1]
    with open(task_file) as f:
        assert [shlex.split(x)[-1].rsplit("/", 1)[1] for x in f.read().splitlines()] == [
            "n2x2_exchange-sync.a1.h5", "n2x2_exchange-mixed.a1.h5"]
    spec = load(spec_path)
    log = plan.read_log(spec)
    assert [r["job_id"] for r in log] == ["100", "101"] and log[1]["tasks"][1]["run"] == "n2x2_exchange-mixed"

    capsys.readouterr()
    assert cli.main(["submit", spec_path]) == 0
    assert "nothing to submit" in capsys.readouterr().out and len(fake_slurm()) == 2

    # Attempt 1 of one run completed, of another stopped early at its time limit: --retry
    # resubmits only the second, into attempt 2, leaving attempt 1's files alone.
    done = plan.result_base(spec, "n1x2_exchange-sync", 1)
    cut = plan.result_base(spec, "n1x2_exchange-mixed", 1)
    result_file(done + ".h5", True, "completed", 12, 12)
    result_file(cut + ".h5", True, "signal", 5, 12)
    state_file(cut + ".state", job_id="1", start="1", stop_request="time_limit", exit_code=0)
    before = open(cut + ".h5", "rb").read()
    assert cli.main(["submit", spec_path, "--retry", "--only", "n1x2*"]) == 0
    calls = fake_slurm()
    assert len(calls) == 3
    argv = calls[2]["argv"]
    assert "--array=0-0" not in argv and not any(a.startswith("--array") for a in argv)
    assert argv[-1] == plan.result_base(spec, "n1x2_exchange-mixed", 2) + ".h5"
    assert open(cut + ".h5", "rb").read() == before


def test_submit_chain_and_after(tmp_path, fake_slurm):
    spec_path = write_spec(tmp_path, BASIC.replace("tasks_per_node = 2", "tasks_per_node = 2\nchain = true"))
    assert cli.main(["submit", spec_path, "--after", "42"]) == 0
    deps = [[a for a in c["argv"] if a.startswith("--dependency")] for c in fake_slurm()]
    assert deps == [["--dependency=afterany:42"], ["--dependency=afterany:100"]]


def test_plan_prints_every_run_with_its_command(tmp_path, fake_slurm, capsys):
    spec_path = write_spec(tmp_path, BASIC)
    assert cli.main(["plan", spec_path]) == 0
    out = capsys.readouterr().out
    assert out.count("sbatch --parsable") == 2 and "--array=0-1" in out
    for rid in ("n1x2_exchange-sync", "n1x2_exchange-mixed", "n2x2_exchange-sync", "n2x2_exchange-mixed"):
        assert f"{rid}: srun --mpi=pmix" in out
    assert not os.path.exists(os.path.join(str(tmp_path), "OUT")), "plan wrote files"
    assert cli.main(["plan", spec_path, "--local"]) == 0
    out = capsys.readouterr().out
    assert "n2x2_exchange-mixed: mpirun -np 4 " in out and "--ranks-per-node 2" in out


def test_local_hostfile_too_small_is_refused_before_running(tmp_path, fake_slurm, capsys):
    spec_path = write_spec(tmp_path, BASIC)
    hosts = write_spec(tmp_path, "a slots=2\n", "hosts")
    assert cli.main(["local", spec_path, "--hostfile", hosts]) == 2
    err = capsys.readouterr().err
    assert "--hostfile: run n2x2_exchange-sync needs 2 hosts, the hostfile lists 1 (a)" in err
    assert not os.path.exists(os.path.join(str(tmp_path), "OUT", "runs"))


def test_friction_warnings(tmp_path):
    from dtbench_campaign import cli
    from dtbench_campaign.spec import load
    short = load(write_spec(tmp_path, BASIC.replace("tasks_per_node = 2",
                                                    'tasks_per_node = 2\n    time = "1"')),
                 cwd=str(tmp_path))
    (w,) = cli.friction_warnings(short, {}, 1000)
    assert "resources.time '1' (60 s) is not well above signal_before (120 s)" in w
    ok = load(write_spec(tmp_path, BASIC.replace("tasks_per_node = 2",
                                                 'tasks_per_node = 2\n    time = "00:10:00"')
                         .replace('name = "t"', 'name = "t"\n    launcher = "mpirun"')),
              cwd=str(tmp_path))
    assert cli.friction_warnings(ok, {}, 1000) == []
    (w,) = cli.friction_warnings(ok, {}, 0)
    assert "OMPI_ALLOW_RUN_AS_ROOT=1" in w
    assert cli.friction_warnings(ok, {"OMPI_ALLOW_RUN_AS_ROOT": "1",
                                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}, 0) == []


def test_batch_divides_across_workers_not_servers(tmp_path):
    spec = _spec(tmp_path, BASIC.replace('exchange = ["sync", "mixed"]',
                                         'exchange = "async"\n    ps-ranks = 1').replace(
                                             "batch = 64", "batch = 9"))
    runs = plan.expand(spec)  # 2 ranks: 1 worker; 4 ranks: 3 workers; 9 splits over both
    plan.check_runs(runs)
    spec = _spec(tmp_path, BASIC.replace('exchange = ["sync", "mixed"]',
                                         'exchange = "async"\n    ps-ranks = 1').replace(
                                             "batch = 64", "batch = 8"))
    with pytest.raises(SpecError) as e:
        plan.check_runs(plan.expand(spec))
    assert "options.batch: 8 is not accepted for run n2x2 (3 workers: 4 ranks minus ps-ranks)" in str(e.value)


SWEEPS = """\
    [campaign]
    name = "s"
    output = "OUT"
    repeats = 2

    [resources]
    nodes = [1, 2, 4]
    tasks_per_node = 1
    array_limit = 1

    [options]
    model = "lenet"
    iters = 10

    [[sweep]]
    name = "strong"
    options = { exchange = ["sync", "ssp"], batch = 64 }

    [[sweep]]
    name = "weak-async"
    tasks_per_node = 2
    nodes = [1, 2]
    options = { exchange = "async", ps_ranks_per_node = 1, batch_per_rank = 16 }

    [[exclude]]
    sweep = "strong"
    exchange = "ssp"
    nodes = 4
    """


def test_sweeps_union_with_their_own_resources_and_options(tmp_path):
    """Each [[sweep]] is a product of its own: its name starts its runs' names, its resources
    replace [resources], its options join [options]; an exclusion may name the sweep."""
    runs = plan.expand(_spec(tmp_path, SWEEPS))
    ids = [r.id for r in runs]
    assert len(ids) == len(set(ids)) == (3 * 2 - 1) * 2 + 2 * 2
    assert ids[:4] == ["strong_n1x1_exchange-sync_r0", "strong_n1x1_exchange-sync_r1",
                       "strong_n1x1_exchange-ssp_r0", "strong_n1x1_exchange-ssp_r1"]
    assert "strong_n4x1_exchange-ssp_r0" not in ids and "strong_n4x1_exchange-sync_r0" in ids
    a = {r.id: r for r in runs}["weak-async_n2x2_r1"]
    assert (a.sweep, a.nodes, a.tasks_per_node) == ("weak-async", 2, 2)
    # one server per node (2 of 4 ranks) and 16 samples per worker (the 2 ranks that train)
    assert a.dtbench_args() == ["--model", "lenet", "--iters", "10", "--exchange", "async",
                                "--ps-ranks", "2", "--batch", "32"]
    plan.check_runs(runs)
    s = {r.id: r for r in runs}["strong_n4x1_exchange-sync_r0"]
    assert s.dtbench_args()[-4:] == ["--exchange", "sync", "--batch", "64"] and s.sweep == "strong"


def test_batch_per_rank_counts_the_ranks_that_train(tmp_path):
    """async: the parameter servers (--ps-ranks, 1 when not given) train nothing, so the
    per-rank batch multiplies the workers: 4 ranks with 1 server and 8 per rank make 24."""
    text = BASIC.replace('exchange = ["sync", "mixed"]', 'exchange = ["sync", "async"]').replace(
        "batch = 64", "batch_per_rank = 8")
    runs = {r.id: r.options["batch"] for r in plan.expand(_spec(tmp_path, text))}
    assert runs == {"n1x2_exchange-sync": 16, "n1x2_exchange-async": 8,
                    "n2x2_exchange-sync": 32, "n2x2_exchange-async": 24}


def test_array_limit_runs_one_task_at_a_time(tmp_path):
    spec = _spec(tmp_path, SWEEPS)
    job = _jobs(spec)[0]
    cmd = plan.sbatch_command(spec, job, "/t/dtbench.sbatch", "/bin/dtbench", "/f.tasks")
    assert f"--array=0-{len(job.runs) - 1}%1" in cmd
    spec.array_limit = 0
    assert f"--array=0-{len(job.runs) - 1}" in plan.sbatch_command(spec, job, "/t", "/d", "/f")


def test_collect_index_names_the_sweep(tmp_path):
    from dtbench_campaign import collect, status
    spec = _spec(tmp_path, SWEEPS)
    runs = [r for r in plan.expand(spec) if r.id.startswith("weak-async_n1x2")]
    for r in runs:
        result_file(plan.result_base(spec, r.id, 1) + ".h5", True, "completed", 10, 10, 2, 1)
    rows = status.campaign_status(spec, runs, all_attempts=True)
    n, index, _ = collect.collect(spec, runs, rows, str(tmp_path / "c"), False)
    lines = open(index).read().splitlines()
    assert n == 2 and lines[0].startswith("file,run,sweep,attempt,")
    assert lines[1].split(",")[2] == "weak-async"


EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def test_transformer_scaling_example_is_the_study_its_header_describes(tmp_path):
    """jobs/examples/transformer-scaling.toml (every example also plans against the real dtbench
    in test_campaign_spec.py): nanogpt-char at 64 tokens, each strategy at 1-16 nodes strong
    (global batch 32) and weak (a fixed batch per training rank, met by the strong run at 8
    nodes), two repeats, the 2-node small-bucket runs, and the run and array counts its header's
    plan line gives."""
    path = os.path.join(EXAMPLES, "transformer-scaling.toml")
    spec = load(path, cwd=str(tmp_path))
    runs = plan.expand(spec)
    header = [line for line in open(path) if line.startswith("#   dtbench-campaign plan ")]
    assert len(header) == 1 and header[0].split("#")[2].strip() == \
        f"{len(runs)} runs in {len(_jobs(spec))} job arrays" == "94 runs in 10 job arrays"
    for r in runs:
        assert {k: r.options[k] for k in ("model", "dataset", "seq-len", "iters", "warmup")} == \
            {"model": "nanogpt-char", "dataset": "synthetic", "seq-len": 64, "iters": 6, "warmup": 2}
    series: dict = {}
    for r in runs:
        if r.sweep.startswith("small-buckets"):
            assert (r.nodes, r.options["bucket-mb"], r.options["batch"]) == (2, 1, 32)
            continue
        strategy = r.options.get("transport") or r.options.get("exchange")
        assert r.tasks_per_node == (1 if strategy in ("sync", "ssp") else 2), r.id
        servers = r.options.get("ps-ranks", 0)
        assert servers == (r.nodes if strategy == "async" else 0), r.id
        kind = r.sweep.split("-")[0]
        series.setdefault((strategy, kind), {}).setdefault(r.nodes, []).append(
            (r.options["batch"], r.options["batch"] // (r.ranks - servers), r.repeat))
    assert sorted(series) == sorted((s, k) for s in ("sync", "ssp", "hier", "mixed", "async")
                                    for k in ("strong", "weak"))
    for (strategy, kind), by_nodes in series.items():
        assert all(sorted(x[2] for x in v) == [0, 1] for v in by_nodes.values()), (strategy, kind)
        if kind == "strong":
            assert sorted(by_nodes) == [1, 2, 4, 8, 16]
            assert {x[0] for v in by_nodes.values() for x in v} == {32}
        else:
            assert sorted(by_nodes) == [1, 2, 4, 16]
            # one batch per training rank, the strong run's at 8 nodes (which stands in for it)
            per_rank = {x[1] for v in by_nodes.values() for x in v}
            assert per_rank == {series[strategy, "strong"][8][0][1]}, (strategy, per_rank)
    assert {r.options["batch"] for r in runs if r.nodes == 16 and r.sweep.startswith("weak")} == {64}
    assert len(runs) == 2 * (5 * 5 + 5 * 4 + 2)


def test_layouts_example_holds_the_ranks_and_varies_the_layout(tmp_path):
    """jobs/examples/layouts.toml: nanogpt-char on 2 nodes x 4 ranks in every run, the global
    batch fixed, two repeats of each layout (dp8, tp2 x dp4, pp2 x dp4, tp2 x pp2 x dp2), a
    tensor group never across a node, and the run and array counts its header's plan line gives."""
    path = os.path.join(EXAMPLES, "layouts.toml")
    spec = load(path, cwd=str(tmp_path))
    runs = plan.expand(spec)
    header = [line for line in open(path) if line.startswith("#   dtbench-campaign plan ")]
    assert len(header) == 1 and header[0].split("#")[2].strip() == \
        f"{len(runs)} runs in {len(_jobs(spec))} job array" == "8 runs in 1 job array"
    layouts = {}
    for r in runs:
        assert (r.nodes, r.tasks_per_node, r.ranks) == (2, 4, 8), r.id
        assert {k: r.options[k] for k in ("model", "seq-len", "batch")} == \
            {"model": "nanogpt-char", "seq-len": 64, "batch": 32}
        tp, k = r.options.get("tp", 1), r.options.get("stages", 1)
        assert r.tasks_per_node % tp == 0, r.id
        layouts.setdefault((tp, k, r.ranks // (tp * k)), []).append(r.repeat)
    assert {x: sorted(v) for x, v in layouts.items()} == \
        {(1, 1, 8): [0, 1], (2, 1, 4): [0, 1], (1, 2, 4): [0, 1], (2, 2, 2): [0, 1]}
