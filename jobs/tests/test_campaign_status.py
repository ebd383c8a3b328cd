"""Run states from Slurm's view and the run's own files, and `collect` choosing one attempt per
run with an index: synthetic result files (h5py) and .state records with known answers."""

import csv
import os
import socket

import pytest

from campaign_helpers import BASIC, result_file, state_file, write_spec
from dtbench_campaign import collect, plan, status
from dtbench_campaign.spec import load

DONE = {"finished": 1, "stop_reason": "completed", "completed": 12, "iters_total": 12}
SIGNALLED = {"finished": 1, "stop_reason": "signal", "completed": 5, "iters_total": 12}
KILLED = {"finished": 0, "stop_reason": "", "completed": 5, "iters_total": 12}
# closed by the survivors' finalizer after a node died (src/survival/finalize.c)
NODE_LOST = {"finished": 1, "stop_reason": "peer_lost", "completed": 5, "iters_total": 12,
             "failed_nodes": "n2", "lost_ranks": "2,3", "stop_detail": "rank 3 on n2 silent for 4.1 s"}


@pytest.mark.parametrize("res,st,sched,state,detail", [
    (None, {}, "PENDING", "pending", "pending"),
    (KILLED, {"start": "1"}, "COMPLETING", "completing", "Slurm is ending the job; 5 iterations"),
    ({**DONE, "stop_reason": "duration", "completed": 7}, {}, "", "completed",
     "--duration reached after 7 iterations"),
    ({**SIGNALLED, "completed": 0}, {"stop_request": "time_limit"}, "", "stopped early",
     "time limit before training (0 iterations); file closed"),
    (KILLED, {"start": "1"}, "RUNNING", "running", "5 iterations written"),
    (DONE, {"exit_code": "0"}, "", "completed", ""),
    (DONE, {}, "COMPLETED", "completed", ""),
    (SIGNALLED, {"stop_request": "time_limit", "stop_seconds": "0.2"}, "", "stopped early",
     "time limit; file closed, launcher exited 0.2 s after the signal"),
    (SIGNALLED, {}, "TIMEOUT", "stopped early", "time limit; file closed"),
    (SIGNALLED, {"stop_request": "cancelled"}, "COMPLETED", "stopped early", "cancelled; file closed"),
    (SIGNALLED, {}, "CANCELLED by 0", "stopped early", "cancelled; file closed"),
    (SIGNALLED, {}, "", "stopped early", "signal; file closed"),
    (KILLED, {"exit_code": "137"}, "TIMEOUT", "timed out", "killed at the time limit; 5 iterations kept"),
    (KILLED, {"exit_code": "137"}, "CANCELLED", "cancelled", "killed; 5 iterations kept"),
    (KILLED, {"exit_code": "137"}, "", "failed", "killed or crashed (exit 137); 5 iterations kept"),
    (KILLED, {"start": "1"}, "", "unknown", "file not closed, 5 iterations kept"),
    ({"finished": 1, "stop_reason": "error", "completed": 3, "iters_total": 12}, {}, "FAILED",
     "failed", "dtbench stopped with stop_reason=error"),
    (None, {"exit_code": "2"}, "", "failed", "exit 2, no result file"),
    # dtbench stopped in its set-up: exit 0, nothing recorded, no file
    (None, {"exit_code": "0", "stop_request": "cancelled"}, "COMPLETED", "stopped early",
     "cancelled during set-up: nothing was recorded, no result file"),
    (None, {"exit_code": "0", "stop_request": "time_limit"}, "", "stopped early",
     "time limit during set-up"),
    (None, {}, "FAILED", "failed", "Slurm state FAILED, no result file"),
    (None, {}, "TIMEOUT", "timed out", "no result file"),
    (None, {}, "", "unknown", "no result file and Slurm does not know the job"),
    ({"error": "OSError: truncated"}, {}, "", "failed", "result file unreadable"),
    # a dead node: from the file, from the state file alone, whatever Slurm says or forgot
    (NODE_LOST, {"exit_code": "75"}, "", "node failed",
     "node failed: n2, 5 iterations kept (rank 3 on n2 silent for 4.1 s)"),
    (NODE_LOST, {}, "COMPLETING", "node failed", "node failed: n2, 5 iterations kept"),
    (NODE_LOST, {}, "FAILED", "node failed", "node failed: n2, 5 iterations kept"),
    (KILLED, {"node_failed": "n2", "exit_code": "1"}, "", "node failed",
     "node failed: n2, 5 iterations kept (file not closed)"),
    (None, {"node_failed": "n2"}, "", "node failed", "node failed: n2, no result file"),
    ({**NODE_LOST, "failed_nodes": "", "lost_ranks": "1"}, {}, "", "peer lost",
     "rank 1 lost (its process ended), 5 iterations kept"),
])
def test_resolve(res, st, sched, state, detail):
    got = status.resolve(res, st, sched)
    assert got[0] == state and got[1].startswith(detail), got


def _spec(tmp_path):
    return load(write_spec(tmp_path, BASIC), cwd=str(tmp_path))


def _attempt(spec, run, attempt, job, res=None, **st):
    base = plan.result_base(spec, run, attempt)
    if res is not None:
        result_file(base + ".h5", bool(res["finished"]), res["stop_reason"], res["completed"], res["iters_total"])
    if st:
        state_file(base + ".state", **st)
    plan.append_log(spec, {"job_id": job, "array": job != "local",
                           "tasks": [{"index": 0, "run": run, "attempt": attempt}]})


def test_campaign_status_from_files_without_slurm(tmp_path):
    spec = _spec(tmp_path)
    runs = plan.expand(spec)
    _attempt(spec, "n1x2_exchange-sync", 1, "11", DONE, job_id="12", exit_code=0)
    _attempt(spec, "n1x2_exchange-mixed", 1, "11", SIGNALLED, job_id="13", stop_request="time_limit", exit_code=0)
    _attempt(spec, "n2x2_exchange-sync", 1, "local", KILLED, job_id="local", pid=2 ** 22 + 7,
             host=socket.gethostname(), start=1)
    rows = {r.run: r for r in status.campaign_status(spec, runs, query_slurm=False)}
    assert rows["n1x2_exchange-sync"].state == "completed" and rows["n1x2_exchange-sync"].job == "11_0"
    assert rows["n1x2_exchange-sync"].iterations == 12 and rows["n1x2_exchange-sync"].iters_total == 12
    assert rows["n1x2_exchange-mixed"].state == "stopped early"
    assert rows["n1x2_exchange-mixed"].detail.startswith("time limit")
    assert rows["n2x2_exchange-sync"].state == "failed", rows["n2x2_exchange-sync"]  # its process is gone
    assert rows["n2x2_exchange-mixed"].state == "not submitted"


def test_a_running_local_run(tmp_path):
    spec = _spec(tmp_path)
    _attempt(spec, "n1x2_exchange-sync", 1, "local", KILLED, job_id="local", pid=os.getpid(),
             host=socket.gethostname(), start=1)
    (row,) = status.campaign_status(spec, plan.expand(spec)[:1], query_slurm=False)
    assert row.state == "running"


def test_collect_prefers_completed_attempts_and_keeps_the_folder_in_step(tmp_path):
    spec = _spec(tmp_path)
    runs = plan.expand(spec)
    _attempt(spec, "n1x2_exchange-sync", 1, "11", DONE, exit_code=0)
    _attempt(spec, "n1x2_exchange-sync", 2, "12", KILLED, exit_code=137)  # a later failed attempt
    _attempt(spec, "n1x2_exchange-mixed", 1, "11", SIGNALLED, stop_request="time_limit", exit_code=0)
    dest = os.path.join(str(tmp_path), "collected")

    def run_collect(completed_only=False):
        rows = status.campaign_status(spec, runs, query_slurm=False, all_attempts=True)
        return collect.collect(spec, runs, rows, dest, completed_only)

    n, index, left_out = run_collect()
    assert n == 2 and sorted(os.listdir(dest)) == ["index.csv", "n1x2_exchange-mixed.a1.h5",
                                                   "n1x2_exchange-sync.a1.h5"]
    assert left_out == ["n2x2_exchange-sync: not submitted", "n2x2_exchange-mixed: not submitted"]
    with open(index) as f:
        rows = {r["run"]: r for r in csv.DictReader(f)}
    assert rows["n1x2_exchange-sync"]["attempt"] == "1" and rows["n1x2_exchange-sync"]["state"] == "completed"
    assert rows["n1x2_exchange-mixed"]["state"] == "stopped early"
    assert rows["n1x2_exchange-mixed"]["exchange"] == "mixed" and rows["n1x2_exchange-mixed"]["ranks"] == "2"
    assert os.path.samefile(os.path.join(dest, "n1x2_exchange-sync.a1.h5"),
                            plan.result_base(spec, "n1x2_exchange-sync", 1) + ".h5")

    # A retry of the stopped run completes: the folder now holds that attempt instead.
    _attempt(spec, "n1x2_exchange-mixed", 2, "14", DONE, exit_code=0)
    n, index, _ = run_collect()
    assert sorted(os.listdir(dest)) == ["index.csv", "n1x2_exchange-mixed.a2.h5", "n1x2_exchange-sync.a1.h5"]
    assert os.path.exists(plan.result_base(spec, "n1x2_exchange-mixed", 1) + ".h5"), "a result was removed"

    _attempt(spec, "n2x2_exchange-sync", 1, "15", SIGNALLED, stop_request="cancelled", exit_code=0)
    n, _, left_out = run_collect(completed_only=True)
    assert n == 2 and "n2x2_exchange-sync: stopped early" in left_out


def test_parameter_servers_do_not_count_in_iterations(tmp_path):
    """An async run: the server rank completes no iteration; status and index.csv give the
    workers' count (the minimum over every rank was 0)."""
    spec = _spec(tmp_path)
    runs = plan.expand(spec)[:1]
    base = plan.result_base(spec, runs[0].id, 1)
    result_file(base + ".h5", True, "completed", 12, 12, nranks=3, servers=1)
    state_file(base + ".state", job_id="21", exit_code=0)
    plan.append_log(spec, {"job_id": "21", "array": True,
                           "tasks": [{"index": 0, "run": runs[0].id, "attempt": 1}]})
    (row,) = status.campaign_status(spec, runs, query_slurm=False)
    assert row.state == "completed" and row.iterations == 12, row
    _, index_path, _ = collect.collect(spec, runs, status.campaign_status(spec, runs, query_slurm=False),
                                       os.path.join(str(tmp_path), "col"))
    with open(index_path) as f:
        index = list(csv.DictReader(f))
    assert index[0]["iterations"] == "12", index


def test_status_wait_returns_once_nothing_is_under_way(tmp_path, capsys):
    """--wait polls until the local run's process has ended, then prints the final table."""
    import subprocess
    from dtbench_campaign import cli
    spec_path = write_spec(tmp_path, BASIC)
    spec = load(spec_path, cwd=str(tmp_path))
    runs = plan.expand(spec)
    proc = subprocess.Popen(["sleep", "1.5"])
    _attempt(spec, runs[0].id, 1, "local", KILLED, job_id="local", pid=proc.pid,
             host=socket.gethostname(), start=1)
    (row,) = status.campaign_status(spec, runs[:1], query_slurm=False)
    assert row.state == "running"
    import threading
    threading.Thread(target=proc.wait).start()  # reaps it, so its pid goes away
    os.chdir(str(tmp_path))
    assert cli.main(["status", "--wait", "--interval", "0.2", spec_path]) == 0
    out = capsys.readouterr().out
    assert proc.returncode is not None
    line = [x for x in out.splitlines() if x.startswith(runs[0].id + " ")][0]
    assert "running" not in line and "failed" in line, out


def test_progress_line_counts_states_and_iterations():
    """--wait's line: the count of each state, and per run under way the iterations kept of
    the total, with the completed ones where the file says more were completed than kept."""
    from dtbench_campaign import cli
    rows = [status.RunStatus("a", 1, "7", "running", "", 40, 100, "a.h5", 60),
            status.RunStatus("b", 1, "7", "running", "", 20, 100, "b.h5", None),
            status.RunStatus("c", 1, "8", "pending", "", None, None, "", None),
            status.RunStatus("d", 1, "6", "completed", "", 100, 100, "d.h5", 100)]
    line = cli.progress_line(rows, 12.4)
    assert line == ("waiting 12 s: 1 pending, 2 running, 1 completed (iterations: "
                    "a 40/100 (60 completed), b 20/100)"), line
