"""Runs the real ``dtbench`` (small jobs) to make result files for the analysis tests.

The program is ``$DTBENCH`` or ``src/dtbench`` at the repository root; ``mpirun`` comes from the
PATH (``$MPIRUN`` overrides). Open MPI runs as on the project's test machines: allowed as root,
oversubscribed, yielding when idle, with a private session folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from typing import List, Optional

import h5py
import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def dtbench_path() -> Optional[str]:
    path = os.environ.get("DTBENCH") or os.path.join(REPO, "src", "dtbench")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def skip_reason() -> Optional[str]:
    """Why the real-program tests cannot run here, or None."""
    if dtbench_path() is None:
        if os.environ.get("DTBENCH"):
            return f"DTBENCH={os.environ['DTBENCH']} is not an executable file"
        return (f"dtbench is not built: no executable {os.path.join(REPO, 'src', 'dtbench')} "
                f"and DTBENCH is not set (run scripts/setup.sh)")
    if shutil.which(os.environ.get("MPIRUN", "mpirun")) is None:
        return "mpirun not found on the PATH (Debian package openmpi-bin)"
    return None


def environment(workdir: str) -> dict:
    env = dict(os.environ)
    session = os.path.join(workdir, "ompi")
    os.makedirs(session, exist_ok=True)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_mpi_yield_when_idle": "1",
                "HDF5_USE_FILE_LOCKING": "FALSE", "OMPI_MCA_orte_tmpdir_base": session,
                "OMPI_MCA_btl_vader_backing_directory": session})
    return env


def command(np_: int, args: List[str]) -> List[str]:
    return [os.environ.get("MPIRUN", "mpirun"), "-np", str(np_), dtbench_path()] + args


def run(workdir: str, np_: int, output: str, *args: str, timeout: int = 180) -> str:
    """One complete run; returns the output path. Raises with dtbench's output on failure."""
    out = os.path.join(workdir, output)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    proc = subprocess.run(command(np_, ["--model", "lenet", "--dataset", "synthetic",
                                        "--output", out, *args]),
                          capture_output=True, text=True, timeout=timeout,
                          env=environment(workdir))
    if proc.returncode != 0:
        raise RuntimeError(f"dtbench failed ({proc.returncode}): {proc.stdout[-1500:]}"
                           f"{proc.stderr[-1500:]}")
    return out


def killed(workdir: str, np_: int, output: str, min_completed: int, *args: str,
           deadline_s: float = 120.0) -> str:
    """Start a long run, wait until every rank has written ``min_completed`` iterations, then
    SIGKILL every rank at once (no chance to close the file). Returns the output path."""
    out = os.path.join(workdir, output)
    job = subprocess.Popen(command(np_, ["--model", "lenet", "--dataset", "synthetic",
                                         "--iters", "100000", "--output", out, *args]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=environment(workdir), start_new_session=True)
    try:
        pids = None
        stop = time.time() + deadline_s
        while time.time() < stop:
            try:
                with h5py.File(out, "r", locking=False) as f:
                    if (f["ranks/completed"][:] >= min_completed).all():
                        pids = [int(p) for p in f["ranks/pid"][:]]
                        break
            except (OSError, KeyError):
                pass
            time.sleep(0.1)
        if pids is None:
            raise RuntimeError(f"dtbench did not complete {min_completed} iterations in time")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        job.wait(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
    return out


def completed(path: str) -> np.ndarray:
    """/ranks/completed read directly with h5py (the truth the analysis must report)."""
    with h5py.File(path, "r", locking=False) as f:
        return f["ranks/completed"][:]
