"""`dtbench-campaign local`: the same campaign with plain mpirun on this machine (or on the hosts
of an Open MPI hostfile), one run after the other, without Slurm.

Each run is an attempt like a Slurm job: its own result, output and .state files, a line in
submissions.jsonl (job "local"), and the same time limit: SIGUSR1 `signal_before` seconds before
it (dtbench stops after the current iteration and closes its file), SIGTERM at it, SIGKILL 30 s
later. Ctrl-C or SIGTERM to the tool stops the current run the same way and skips the rest.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
from typing import Callable, Dict, List, Optional

from . import appendfile, plan
from .spec import Spec, SpecError

KILL_WAIT = 30
PEER_GRACE = 10  # s mpirun gets to end by itself after a lost peer (as the batch template)


def _peer_lost(state: str) -> bool:
    return any(line.startswith("peer_lost=") for line in appendfile.read_lines(state)[0])


def read_hostfile(path: str) -> List[str]:
    """Host names of an Open MPI hostfile (first word of each line, # comments)."""
    try:
        with open(path, encoding="utf-8") as f:
            hosts = [line.split("#")[0].split()[0] for line in f if line.split("#")[0].strip()]
    except OSError as e:
        raise SpecError(f"--hostfile: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(f"--hostfile: {path} is not text; accepted: lines 'HOST slots=N'") \
            from None
    if not hosts:
        raise SpecError(f"--hostfile: {path} lists no host; accepted: lines 'HOST slots=N'")
    return hosts


def mpirun_command(spec: Spec, run: plan.Run, dtbench: str, output: str,
                   hosts: Optional[List[str]], extra: List[str]) -> List[str]:
    cmd = ["mpirun", "-np", str(run.ranks)]
    args = run.dtbench_args()
    if hosts:
        if run.nodes > len(hosts):
            raise SpecError(f"--hostfile: run {run.id} needs {run.nodes} hosts, the hostfile lists "
                            f"{len(hosts)} ({', '.join(hosts)}); accepted: at most {len(hosts)} "
                            "nodes (or --only to leave runs out)")
        cmd += ["--host", ",".join(f"{h}:{run.tasks_per_node}" for h in hosts[:run.nodes]),
                "--map-by", f"ppr:{run.tasks_per_node}:node"]
    elif run.nodes > 1 and "ranks-per-node" not in run.options:
        # One machine standing in for several nodes: dtbench groups the ranks as Slurm would.
        args += ["--ranks-per-node", str(run.tasks_per_node)]
    # dtbench's finalizer records a lost peer in the .state file (DTBENCH_STATE_FILE, run_one)
    return (cmd + ["-x", "DTBENCH_STATE_FILE"] + spec.mpirun_args + extra + [dtbench] + args
            + ["--output", output])


class _Stop:
    """Ctrl-C / SIGTERM to the tool: remembered, acted on by the polling loop."""

    def __init__(self) -> None:
        self.signal = 0

    def __call__(self, signum, frame) -> None:
        self.signal = signum


def _note(path: str, **kv) -> None:
    appendfile.append_line(path, "\n".join(f"{k}={v}" for k, v in kv.items()))


def run_one(spec: Spec, run: plan.Run, attempt: int, cmd: List[str], stop: _Stop,
            say: Callable[[str], None], time_limit: bool = True) -> Dict[str, str]:
    base = plan.result_base(spec, run.id, attempt)
    os.makedirs(os.path.dirname(base), exist_ok=True)
    state = base + ".state"
    env = dict(os.environ)
    env["DTBENCH_SUBMIT_LINE"] = shlex.join(cmd)
    env["DTBENCH_STATE_FILE"] = os.path.abspath(state)
    if os.geteuid() == 0:  # Open MPI refuses root unless told
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    plan.append_log(spec, {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "job_id": "local",
                           "array": False, "submit_line": shlex.join(cmd),
                           "tasks": [{"index": 0, "run": run.id, "attempt": attempt}]})
    _note(state, job_id="local", pid=os.getpid(), host=socket.gethostname(), launcher="mpirun",
          start=f"{time.time():.6f}")
    say(f"{run.id} (attempt {attempt}): {shlex.join(cmd)}")
    with open(base + ".out", "ab") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                             stdin=subprocess.DEVNULL)
    t0 = time.monotonic()
    warn_at = spec.time_seconds - spec.signal_before if time_limit else None
    kill_at = None
    signal_time = None
    lost_at = None
    while p.poll() is None:
        now = time.monotonic()
        # A lost peer (dtbench --peer-timeout): the survivors closed the file and exit 75; mpirun
        # may still wait for a node that no longer answers.
        if lost_at is None and _peer_lost(state):
            lost_at = now
        if lost_at is not None and kill_at is None and now - lost_at >= PEER_GRACE:
            say(f"{run.id}: a peer was lost and mpirun still runs {PEER_GRACE} s later: stopping it")
            p.send_signal(signal.SIGTERM)
            kill_at = now + 5
        request = None
        if stop.signal and signal_time is None:
            request = ("TERM" if stop.signal == signal.SIGTERM else "INT", "cancelled")
        elif warn_at is not None and signal_time is None and now - t0 >= warn_at:
            request = ("USR1", "time_limit")
        if request:
            signal_time = time.time()
            _note(state, signal=request[0], signal_time=f"{signal_time:.6f}",
                  stop_request=request[1])
            say(f"{run.id}: SIG{request[0]} ({request[1]}): asking dtbench to stop after the "
                "current iteration")
            p.send_signal(signal.SIGUSR1)  # mpirun passes SIGUSR1 on to every rank
        if time_limit and kill_at is None and now - t0 >= spec.time_seconds:
            p.send_signal(signal.SIGTERM)
            kill_at = now + KILL_WAIT
        if kill_at is not None and now >= kill_at:
            p.kill()
        time.sleep(0.05)
    end = time.time()
    _note(state, exit_code=p.returncode, end=f"{end:.6f}")
    if signal_time is not None:
        _note(state, stop_seconds=f"{end - signal_time:.3f}")
    return {"exit_code": str(p.returncode)}
