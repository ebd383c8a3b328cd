"""Files and specs a user can produce never give a traceback: one line naming the file and what
is wrong, exit 2, or a warning and the rest of the output (a cut line of an append-only file);
and what `status` and `submit` say about them (progress while waiting, the whole submit line,
iterations completed and kept)."""

import json
import os
import socket
import subprocess
import threading

import h5py
import numpy as np
import pytest

from campaign_helpers import BASIC, fake_program, result_file, state_file, write_spec
from dtbench_campaign import cli, plan, status
from dtbench_campaign.spec import load


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_2(code, out, err, *words):
    assert code == 2 and out == "", (code, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("dtbench-campaign: "), err
    for w in words:
        assert w in err, err


@pytest.mark.parametrize("data,words", [
    (b"[campaign]\nname = \"t\xff\"\n", ("spec.toml", "not UTF-8 text", "0xff")),
    (bytes(range(256)) * 4, ("spec.toml", "not UTF-8")),
    (b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64, ("spec.toml", "not valid TOML")),
])
def test_a_spec_that_is_not_text(tmp_path, capsys, data, words, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "spec.toml"
    path.write_bytes(data)
    for command in ("plan", "status", "submit"):
        one_line_2(*run_cli(capsys, command, str(path), *(["--no-check"] if command != "status"
                                                            else [])), *words)


@pytest.mark.parametrize("where", ["output", "results", "under a file"])
def test_an_output_folder_that_is_a_file(tmp_path, capsys, where, monkeypatch):
    blocker = tmp_path / "OUT"
    blocker.write_text("a file where the results should go\n")
    spec = write_spec(tmp_path, BASIC)
    extra = []
    if where == "results":
        extra = ["--results", str(blocker)]
        spec = write_spec(tmp_path, BASIC.replace('output = "OUT"', 'output = "elsewhere"'))
    elif where == "under a file":
        spec = write_spec(tmp_path, BASIC.replace('output = "OUT"', 'output = "OUT/sub"'))
    monkeypatch.chdir(tmp_path)
    key = "--results" if where == "results" else "campaign.output"
    for command in ("status", "collect", "plan"):
        more = ["--no-check"] if command == "plan" else []
        one_line_2(*run_cli(capsys, command, spec, *extra, *more), key, "accepted: a folder")


def test_collect_into_a_file(tmp_path, capsys, monkeypatch):
    spec = write_spec(tmp_path, BASIC)
    (tmp_path / "dest").write_text("x\n")
    monkeypatch.chdir(tmp_path)
    one_line_2(*run_cli(capsys, "collect", spec, "--to", str(tmp_path / "dest")), "--to",
               "is a file")


@pytest.mark.parametrize("repeats", [10 ** 12, 2 ** 63])
def test_huge_repeats(tmp_path, capsys, repeats, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, BASIC.replace('output = "OUT"',
                                              f'output = "OUT"\nrepeats = {repeats}'))
    one_line_2(*run_cli(capsys, "plan", spec, "--no-check"), "campaign.repeats", "100000")


def test_a_sweep_too_large(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, BASIC.replace("nodes = [1, 2]",
                                              f"nodes = {list(range(1, 501))}")
                      .replace('output = "OUT"', 'output = "OUT"\nrepeats = 1000'))
    one_line_2(*run_cli(capsys, "plan", spec, "--no-check"), "1000000 runs", "at most 100000")


def _cut_submission(tmp_path):
    """A campaign whose second submission line was cut after its first task (an interrupted
    submit), and a third line appended after it by a later submit."""
    spec = load(write_spec(tmp_path, BASIC), cwd=str(tmp_path))
    runs = plan.expand(spec)
    plan.append_log(spec, {"job_id": "11", "array": True,
                           "tasks": [{"index": 0, "run": runs[0].id, "attempt": 1}]})
    whole = json.dumps({"job_id": "12", "array": True, "submit_line": "sbatch ...",
                        "tasks": [{"index": 0, "run": runs[1].id, "attempt": 1},
                                  {"index": 1, "run": runs[2].id, "attempt": 1}]})
    with open(plan.log_path(spec), "a") as f:
        f.write(whole[:whole.index(runs[2].id) + 3])
    return spec, runs


def test_a_cut_submissions_line(tmp_path, capsys):
    spec, runs = _cut_submission(tmp_path)
    rows = {r.run: r for r in status.campaign_status(spec, runs, query_slurm=False)}
    err = capsys.readouterr().err
    assert "submissions.jsonl:2: line cut" in err and "kept job 12" in err, err
    assert len(err.splitlines()) == 1
    # the job of the cut line still counts: its whole task is known, the cut one is not
    assert rows[runs[1].id].job == "12_0" and rows[runs[2].id].state == "not submitted"
    # a later record starts on a line of its own and reads back whole
    plan.append_log(spec, {"job_id": "13", "array": False,
                           "tasks": [{"index": 0, "run": runs[3].id, "attempt": 1}]})
    assert [r["job_id"] for r in plan.read_log(spec)] == ["11", "12", "13"]
    with open(plan.log_path(spec)) as f:
        assert json.loads(f.read().splitlines()[-1])["job_id"] == "13"


def test_commands_on_a_cut_submissions_line(tmp_path, capsys, monkeypatch):
    spec, runs = _cut_submission(tmp_path)
    path = spec.path
    monkeypatch.chdir(tmp_path)
    for argv in (["status", path], ["collect", path], ["plan", path, "--no-check"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 0 and out, (argv, err)
        assert "warning: " in err and "Traceback" not in err, err


@pytest.mark.parametrize("garbage", [b"exit_code=1\nend=17", b"exit_code=0\n\xff\xfe\x00en",
                                     b"\xff" * 100])
def test_a_cut_state_file(tmp_path, capsys, garbage, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = load(write_spec(tmp_path, BASIC), cwd=str(tmp_path))
    runs = plan.expand(spec)
    base = plan.result_base(spec, runs[0].id, 1)
    result_file(base + ".h5", True, "signal", 5, 12)
    os.makedirs(os.path.dirname(base), exist_ok=True)
    with open(base + ".state", "wb") as f:
        f.write(b"job_id=12\nstop_request=time_limit\n" + garbage)
    plan.append_log(spec, {"job_id": "12", "array": False,
                           "tasks": [{"index": 0, "run": runs[0].id, "attempt": 1}]})
    code, out, err = run_cli(capsys, "status", spec.path)
    assert code == 0 and "stopped early" in out and "time limit" in out, (out, err)
    assert ".state: last line cut" in err and len(err.splitlines()) == 1, err


def test_an_index_that_is_not_csv(tmp_path, capsys, monkeypatch):
    spec = write_spec(tmp_path, BASIC)
    monkeypatch.chdir(tmp_path)
    os.makedirs(tmp_path / "OUT" / "collected")
    (tmp_path / "OUT" / "collected" / "index.csv").write_bytes(b"\xff\xfe garbage\n")
    code, out, err = run_cli(capsys, "collect", spec)
    assert code == 0 and "index.csv" in err and "written anew" in err, err


def test_a_hostfile_that_is_not_text(tmp_path):
    from dtbench_campaign.spec import SpecError
    from dtbench_campaign import local
    path = tmp_path / "hosts"
    path.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(SpecError, match="is not text"):
        local.read_hostfile(str(path))


def test_export_is_set_by_the_tool(tmp_path):
    from dtbench_campaign.spec import SpecError
    path = write_spec(tmp_path, BASIC.replace("tasks_per_node = 2",
                                              'tasks_per_node = 2\nsbatch_args = ["--export=NONE"]'))
    with pytest.raises(SpecError, match="--export"):
        load(path)


def test_the_submit_line_is_the_whole_submission(tmp_path, monkeypatch):
    """The environment the template reads (DTBENCH_LOG included) and every sbatch option; the
    job gets the environment whatever SBATCH_EXPORT says."""
    calls = tmp_path / "calls.jsonl"
    fake_program(tmp_path, "sbatch", f"""\
        python3 -c 'import json,os,sys; print(json.dumps({{"argv": sys.argv[1:], "line": os.environ["DTBENCH_SUBMIT_LINE"]}}))' "$@" >>{calls}
        echo 100
        """)
    fake_program(tmp_path, "squeue", "exit 0\n")
    fake_program(tmp_path, "scontrol", 'echo "MaxArraySize = 1001"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}/bin{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SBATCH_EXPORT", "NONE")
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, BASIC.replace("[campaign]", '[campaign]\nlauncher = "mpirun"'))
    assert cli.main(["submit", spec, "--no-check", "--only", "n2*"]) == 0
    (call,) = [json.loads(x) for x in calls.read_text().splitlines()]
    assert "--export=ALL" in call["argv"]
    for word in ("DTBENCH_LAUNCHER=mpirun", "DTBENCH_LOG=auto", "--ntasks-per-node=2",
                 "--nodes=2", "--export=ALL", "--array=0-1"):
        assert word in call["line"].split(), word
    (rec,) = plan.read_log(load(spec))
    assert rec["submit_line"] == call["line"]


def test_status_says_iterations_completed_and_kept(tmp_path):
    spec = load(write_spec(tmp_path, BASIC), cwd=str(tmp_path))
    runs = plan.expand(spec)[:2]
    for i, (run, done) in enumerate(zip(runs, (400, None))):
        base = plan.result_base(spec, run.id, 1)
        result_file(base + ".h5", True, "write_error" if done else "completed", 200, 400)
        if done:
            with h5py.File(base + ".h5", "a") as f:
                f["ranks/iterations_done"] = np.array([400, 410], dtype=np.int64)
        state_file(base + ".state", job_id=str(20 + i), exit_code=1)
        plan.append_log(spec, {"job_id": str(20 + i), "array": False,
                               "tasks": [{"index": 0, "run": run.id, "attempt": 1}]})
    first, second = status.campaign_status(spec, runs, query_slurm=False)
    assert "200 iterations kept of 400 completed" in first.detail, first
    assert first.iterations == 200 and first.iterations_completed == 400
    assert "completed" not in second.detail and second.iterations_completed is None, second


def test_status_wait_shows_progress(tmp_path, capsys, monkeypatch):
    spec_path = write_spec(tmp_path, BASIC)
    spec = load(spec_path, cwd=str(tmp_path))
    run = plan.expand(spec)[0]
    proc = subprocess.Popen(["sleep", "2"])
    base = plan.result_base(spec, run.id, 1)
    result_file(base + ".h5", False, "", 7, 12)
    state_file(base + ".state", job_id="local", pid=proc.pid, host=socket.gethostname(),
               start=1)
    plan.append_log(spec, {"job_id": "local", "array": False,
                           "tasks": [{"index": 0, "run": run.id, "attempt": 1}]})
    threading.Thread(target=proc.wait).start()
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "status", "--wait", "--interval", "0.2", spec_path)
    assert code == 0
    assert f"running (iterations: {run.id} 7/12)" in err, err
    assert "waiting" in err and "running" not in out.splitlines()[1], (out, err)
