"""Thin wrappers around Slurm's client commands (sbatch, squeue, sacct, scontrol, scancel).

Queries never fail the caller: when a command is missing or refuses (no Slurm here, accounting
disabled, a job too old to be remembered) they return what they could learn, possibly nothing,
and the status falls back on the result files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Dict, Iterable, List, Optional, Tuple

TIMEOUT = 60


class SlurmError(Exception):
    """A Slurm command that had to work did not (sbatch refused a job, ...)."""


def available() -> bool:
    return shutil.which("sbatch") is not None and shutil.which("squeue") is not None


def _run(cmd: List[str], env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=full,
                          stdin=subprocess.DEVNULL)


def sbatch(cmd: List[str], env: Dict[str, str]) -> str:
    """Submits; returns the job id (``sbatch --parsable`` prints ``ID`` or ``ID;CLUSTER``)."""
    try:
        p = _run(cmd, env)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SlurmError(f"sbatch: {e}") from None
    if p.returncode != 0:
        raise SlurmError(f"sbatch refused the job: {p.stderr.strip() or p.stdout.strip()}")
    job = p.stdout.strip().split(";")[0]
    if not job.isdigit():
        raise SlurmError(f"sbatch printed no job id: {p.stdout.strip()!r}")
    return job


def max_array_size() -> int:
    """Slurm's MaxArraySize (array indices must be below it); 0 = no arrays; 1001 if unknown."""
    try:
        p = _run(["scontrol", "show", "config"])
    except (OSError, subprocess.TimeoutExpired):
        return 1001
    for line in p.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize":
            try:
                return int(value.strip())
            except ValueError:
                break
    return 1001


def _parse_rows(text: str) -> Dict[str, Tuple[str, str]]:
    rows = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            state = parts[1].split()[0] if parts[1] else ""  # "CANCELLED by 0" -> CANCELLED
            rows[parts[0]] = (state, parts[2] if len(parts) > 2 else "")
    return rows


def queue_states(job_ids: Iterable[str]) -> Dict[str, Tuple[str, str]]:
    """squeue's view (also of jobs that ended less than MinJobAge ago): 'ID' or 'ID_TASK' ->
    (STATE, REASON), e.g. ('RUNNING', 'None'), ('TIMEOUT', 'TimeLimit'), ('CANCELLED', ...)."""
    ids = sorted(set(job_ids))
    if not ids or shutil.which("squeue") is None:
        return {}
    out: Dict[str, Tuple[str, str]] = {}
    # One query for all; when squeue refuses it (a job it no longer knows), one per job.
    for chunk in ([ids] + [[i] for i in ids]):
        try:
            p = _run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(chunk), "-o", "%i|%T|%r"])
        except (OSError, subprocess.TimeoutExpired):
            return out
        if p.returncode == 0:
            out.update(_parse_rows(p.stdout))
            if len(chunk) > 1:
                return out
    return out


def acct_states(job_ids: Iterable[str]) -> Dict[str, Tuple[str, str]]:
    """sacct's view: 'ID' or 'ID_TASK' -> (STATE, EXITCODE); empty without accounting."""
    ids = sorted(set(job_ids))
    if not ids or shutil.which("sacct") is None:
        return {}
    try:
        p = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State,ExitCode"])
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return _parse_rows(p.stdout) if p.returncode == 0 else {}


def scancel(job: str, batch_signal: Optional[str] = None) -> Optional[str]:
    """Cancels a job (or sends BATCH_SIGNAL to its batch shell only); None or the error text."""
    cmd = ["scancel"] + (["--batch", f"--signal={batch_signal}"] if batch_signal else []) + [job]
    try:
        p = _run(cmd)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if p.returncode == 0 else (p.stderr.strip() or f"exit {p.returncode}")
