"""The state of every run of a campaign, from Slurm (squeue, sacct) when it still knows the job,
and from the run's own files otherwise: the HDF5 result file (finished, stop_reason, iterations
completed) and the .state record the batch template or `local` wrote (signal, exit code).

States: not submitted, pending, running, completed, stopped early (the file is closed and holds
every completed iteration; the reason says time limit, cancelled or signal), node failed (a node
died: the survivors closed the file with stop_reason=peer_lost, or the batch template recorded
node_failed=NODE; told from the files alone, also once Slurm has forgotten the job), peer lost (a
rank's process ended on a live node, same marks), timed out (killed at the time limit before the
file was closed), cancelled (before it wrote anything), failed, unknown.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")  # read files that jobs are writing

from . import appendfile, plan, slurm  # noqa: E402
from .spec import Spec  # noqa: E402

STATES = ("not submitted", "pending", "running", "completing", "completed", "stopped early",
          "node failed", "peer lost", "timed out", "cancelled", "failed", "unknown")
ENDED_OK = ("completed",)
UNDER_WAY = ("pending", "running", "completing")
RETRY = ("stopped early", "node failed", "peer lost", "timed out", "cancelled", "failed", "unknown")
QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
          "SUSPENDED", "STOPPED"}
ACTIVE = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING"}


@dataclass
class RunStatus:
    run: str
    attempt: int
    job: str  # Slurm job id (ID or ID_TASK), "local", or ""
    state: str
    detail: str
    iterations: Optional[int]  # iterations kept in the file (every worker: parameter
    # servers, /ranks/role 1, run none), warm-up included
    iters_total: Optional[int]
    file: str  # the result file ("" when none)
    # iterations completed, kept or not (/ranks/iterations_done; None in older files)
    iterations_completed: Optional[int] = None

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def read_state_file(path: str) -> Dict[str, str]:
    """key=value lines; a later line wins (appendfile.read_state: a cut last line is skipped)."""
    return appendfile.read_state(path)


def read_result(path: str) -> Optional[Dict[str, Any]]:
    """What status needs from a result file: None without one, {'error': ...} if unreadable."""
    if not os.path.exists(path):
        return None
    try:
        import h5py
        with h5py.File(path, "r") as f:
            a = f.attrs
            done = _workers(f, "ranks/completed")
            done = [] if done is None else done
            return {
                "finished": int(a["finished"]) if "finished" in a else 0,
                "stop_reason": str(a["stop_reason"]) if "stop_reason" in a else "",
                "iters_total": int(a["iters_total"]) if "iters_total" in a else None,
                "completed": int(min(done)) if len(done) else 0,
                # iterations completed, kept or not (newer files; docs/hdf5-layout.md)
                "done": _workers_min(f, "ranks/iterations_done"),
                # stop_reason=peer_lost (src/survival/finalize.c): what was lost
                "failed_nodes": str(a["failed_nodes"]) if "failed_nodes" in a else "",
                "lost_ranks": str(a["lost_ranks"]) if "lost_ranks" in a else "",
                "stop_detail": str(a["stop_detail"]) if "stop_detail" in a else "",
            }
    except Exception as e:  # a file being created, or truncated by a crash
        return {"error": f"{type(e).__name__}: {e}"}


def _workers(f, name: str):
    """The entries of a per-rank dataset for the ranks that train (parameter servers,
    /ranks/role 1, run no iterations), or None when the file has no such dataset."""
    if name not in f:
        return None
    values = f[name][:]
    if "ranks/role" in f and f["ranks/role"].shape == values.shape:
        values = values[f["ranks/role"][:] != 1]
    return values


def _workers_min(f, name: str) -> Optional[int]:
    values = _workers(f, name)
    return int(min(values)) if values is not None and len(values) else None


def kept_text(res: Dict[str, Any]) -> str:
    """'N iterations kept', and 'of M completed' where the file says how many were completed."""
    done = res.get("done")
    return f"{res['completed']} iterations kept" + ("" if done is None else f" of {done} completed")


def _reason_text(stop_request: str, sched: str) -> str:
    if stop_request == "time_limit" or sched == "TIMEOUT":
        return "time limit"
    if stop_request == "cancelled" or sched.startswith("CANCELLED"):
        return "cancelled"
    return "signal"


def _lost(res: Optional[Dict[str, Any]], st: Dict[str, str], sched: str) -> Optional[tuple]:
    """A dead node or rank, from the result file (stop_reason=peer_lost) or the .state record
    (node_failed=, peer_lost=, written by dtbench's finalizer or the batch template): (state,
    detail), or None."""
    ok = res is not None and "error" not in res
    marked = ok and res["finished"] and res["stop_reason"] == "peer_lost"
    nodes = (res.get("failed_nodes", "") if marked else "") or st.get("node_failed", "")
    if not (marked or nodes or st.get("peer_lost")):
        return None
    if ok:
        kept = kept_text(res) + ("" if marked else " (file not closed)")
    else:
        kept = "no result file" if res is None else "result file unreadable"
    if nodes:
        state, detail = "node failed", f"node failed: {nodes}, {kept}"
    else:
        ranks = (res.get("lost_ranks", "") if marked else "") or st.get("lost_ranks", "?")
        state, detail = "peer lost", f"rank {ranks} lost (its process ended), {kept}"
    why = (res.get("stop_detail", "") if marked else "") or st.get("peer_lost", "")
    if why:
        detail += f" ({why})"
    if sched in ACTIVE:
        detail += f"; Slurm still shows the job {sched}"
    return state, detail


def resolve(res: Optional[Dict[str, Any]], st: Dict[str, str], sched: str) -> tuple:
    """(state, detail) of one attempt from its result file, its .state record and Slurm's state
    ('' when Slurm does not know the job)."""
    if sched in QUEUED:
        return "pending", sched.lower()
    lost = _lost(res, st, sched)
    if lost:
        return lost
    if sched == "COMPLETING":  # Slurm is ending the job (processes still being killed)
        return "completing", (f"Slurm is ending the job; {res['completed']} iterations written"
                              if res and "completed" in res else "Slurm is ending the job")
    if sched in ACTIVE:
        return "running", (f"{res['completed']} iterations written" if res and "completed" in res
                           else "starting")
    if res is not None and "error" in res:
        return "failed", f"result file unreadable ({res['error'][:80]})"
    if res is not None:
        if res["finished"] and res["stop_reason"] == "completed":
            return "completed", ""
        if res["finished"] and res["stop_reason"] in ("duration", "target"):  # planned ends
            what = "--duration reached" if res["stop_reason"] == "duration" else \
                "--target-acc reached"
            return "completed", f"{what} after {res['completed']} iterations"
        if res["finished"] and res["stop_reason"] == "signal":
            why = _reason_text(st.get("stop_request", ""), sched)
            secs = st.get("stop_seconds")
            after = f", launcher exited {secs} s after the signal" if secs else ""
            before = " before training (0 iterations)" if res.get("completed") == 0 else ""
            return "stopped early", f"{why}{before}; file closed{after}"
        if res["finished"]:
            return "failed", f"dtbench stopped with stop_reason={res['stop_reason'] or '?'}"
        # A file that was never closed: killed.
        if sched == "TIMEOUT" or st.get("stop_request") == "time_limit":
            return "timed out", f"killed at the time limit; {kept_text(res)}"
        if sched.startswith("CANCELLED"):
            return "cancelled", f"killed; {kept_text(res)}"
        if "exit_code" not in st and not sched:
            return "unknown", (f"file not closed, {kept_text(res)}; Slurm does not know the "
                               "job (any more)")
        code = st.get("exit_code", "?")
        return "failed", f"killed or crashed (exit {code}); {kept_text(res)}"
    # No result file.
    if st.get("exit_code") == "0" and st.get("stop_request"):  # dtbench stopped in its set-up
        why = _reason_text(st["stop_request"], sched)
        return "stopped early", f"{why} during set-up: nothing was recorded, no result file"
    if sched == "TIMEOUT":
        return "timed out", "no result file"
    if sched.startswith("CANCELLED"):
        return "cancelled", "before any result was written"
    if sched:
        return "failed", f"Slurm state {sched}, no result file"
    if "exit_code" in st:
        return "failed", f"exit {st['exit_code']}, no result file"
    return "unknown", "no result file and Slurm does not know the job"


def _alive(pid: str) -> bool:
    """Whether the `local` process that wrote a .state file still runs (same machine)."""
    try:
        os.kill(int(pid), 0)
        return True
    except PermissionError:
        return True
    except (OSError, ValueError):
        return False


def job_keys(log: List[Dict[str, Any]]) -> Dict[tuple, str]:
    """(run, attempt) -> Slurm job key ('ID' for single jobs, 'ID_INDEX' for array tasks)."""
    keys = {}
    for rec in log:
        for t in rec.get("tasks", []):
            job = rec.get("job_id", "")
            if rec.get("array"):
                job = f"{job}_{t['index']}"
            keys[(t["run"], int(t["attempt"]))] = job
    return keys


def campaign_status(spec: Spec, runs: List[plan.Run], query_slurm: bool = True,
                    all_attempts: bool = False) -> List[RunStatus]:
    """The newest attempt of every run (every attempt with all_attempts), in the runs' order."""
    log = plan.read_log(spec)
    attempts = plan.known_attempts(spec, log)
    keys = job_keys(log)
    wanted = {r.id: (attempts[r.id] if all_attempts else attempts[r.id][-1:])
              for r in runs if r.id in attempts}
    slurm_jobs = {keys[(rid, a)] for rid, lst in wanted.items() for a in lst
                  if keys.get((rid, a), "local") not in ("local", "")}
    sched: Dict[str, tuple] = {}
    if query_slurm and slurm_jobs:
        sched.update(slurm.acct_states(j.split("_")[0] for j in slurm_jobs))
        sched.update(slurm.queue_states(j.split("_")[0] for j in slurm_jobs))  # newer than sacct
    out = []
    for r in runs:
        if r.id not in wanted:
            out.append(RunStatus(r.id, 0, "", "not submitted", "", None, None, ""))
            continue
        for a in wanted[r.id]:
            out.append(attempt_status(spec, r.id, a, keys.get((r.id, a), ""), sched))
    return out


def attempt_status(spec: Spec, run_id: str, attempt: int, job: str,
                   sched: Dict[str, tuple]) -> RunStatus:
    base = plan.result_base(spec, run_id, attempt)
    res = read_result(base + ".h5")
    st = read_state_file(base + ".state")
    s = sched.get(job, ("", ""))[0] if job and job != "local" else ""
    if job == "local" and "exit_code" not in st and st.get("host") == socket.gethostname():
        if _alive(st.get("pid", "")):
            s = "RUNNING"
        else:
            st["exit_code"] = "? (the local run was killed)"
    state, detail = resolve(res, st, s)
    ok = res is not None and "error" not in res
    if ok and res.get("done") is not None and state not in UNDER_WAY \
            and "iterations kept" not in detail:
        detail = f"{detail}; {kept_text(res)}" if detail else kept_text(res)
    return RunStatus(run_id, attempt, job, state, detail,
                     res.get("completed") if ok else None, res.get("iters_total") if ok else None,
                     base + ".h5" if res is not None else "", res.get("done") if ok else None)
