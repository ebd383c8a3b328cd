"""wait_h5.py - waits until a running dtbench's results file shows progress, for the shell tests
that signal, kill or starve a run once it is under way.

Usage: wait_h5.py PATH N [--timeout S] [--poll S] [--all-ranks] [--ended STATE] [--then K]
  PATH  a results file, or a folder: any *.h5 in it will do (campaign runs name their own files)
  N     iterations every worker rank (/ranks/role 0; --all-ranks: every rank) must have completed
        (/ranks/completed, read while the run writes it); N = 0: every rank has started (its pid
        is in /ranks/pid)
  STATE the batch template's state file (slurm/dtbench.sbatch): give up as soon as it has its
        end= line (the job is over: no more progress will come)
  K     once N holds, wait on for about K more iterations: K times the median iteration of the
        file so far (its ranks' completed ones), 0.3 to 20 s
Exit status 0 once it holds (and K iterations went by), 1 after --timeout seconds (default 120)
or once the job ended. Files not yet readable (being created, or written at that moment) are
retried at the next poll (--poll, default 0.1 s).
"""
import argparse
import glob
import os
import sys
import time

os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")  # the run holds the file open
import h5py  # noqa: E402 (after the environment it reads)
import numpy as np  # noqa: E402


def progressed(path, n, all_ranks):
    try:
        with h5py.File(path, "r") as f:
            r = f["ranks"]
            if n == 0:
                return bool(len(r["pid"]) and (r["pid"][:] > 0).all())
            done = r["completed"][:]
            if not all_ranks:
                done = done[r["role"][:] == 0]
            return bool(len(done) and (done >= n).all())
    except (OSError, KeyError):
        return False


def median_iteration(path):
    """The median /iterations/total of the ranks that completed iterations (a parameter server
    completes none), over as many first iterations as the fewest of them completed; None while
    the file cannot be read or no rank has completed one."""
    try:
        with h5py.File(path, "r") as f:
            done = f["ranks/completed"][:]
            if not (done > 0).any():
                return None
            n = int(done[done > 0].min())
            return float(np.nanmedian(f["iterations/total"][done > 0, :n]))
    except (OSError, KeyError):
        return None


def ended(state):
    try:
        with open(state) as f:
            return any(line.startswith("end=") for line in f)
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("n", type=int)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--poll", type=float, default=0.1)
    ap.add_argument("--all-ranks", action="store_true")
    ap.add_argument("--ended")
    ap.add_argument("--then", type=int, default=0)
    a = ap.parse_args()
    deadline = time.time() + a.timeout
    while True:  # looks at least once (--timeout 0: is it so now?)
        paths = glob.glob(os.path.join(a.path, "*.h5")) if os.path.isdir(a.path) else [a.path]
        done = next((p for p in paths if progressed(p, a.n, a.all_ranks)), None)
        if done and not a.then:
            return 0
        if done:
            median = median_iteration(done)  # None: being written at that moment (next poll)
            if median is not None:
                time.sleep(min(max(a.then * median, 0.3), 20))
                return 0
        if (a.ended and ended(a.ended)) or time.time() >= deadline:
            return 1
        time.sleep(a.poll)


if __name__ == "__main__":
    sys.exit(main())
