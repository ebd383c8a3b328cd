"""`dtbench-campaign collect`: one folder with one result file per run and an index, ready for
`dtbench-analyze scaling DIR` (and pandas: index.csv).

Per run the newest completed attempt is taken, else the newest attempt that ended with a readable
file (stopped early, timed out, ...: the analysis reads them up to what was completed and says
so). Files are hard links (copies across file systems) named RUN.aK.h5, so a name never changes
its content; files that an earlier collect put there and that are no longer chosen (a retry
completed) are removed from the folder, never from runs/.
"""

from __future__ import annotations

import csv
import os
import shutil
from typing import Dict, List, Tuple

from . import plan
from .appendfile import warn
from .spec import Spec
from .status import RunStatus

INDEX = "index.csv"
USABLE = ("completed", "stopped early", "timed out", "cancelled", "failed", "unknown")


def choose(statuses: List[RunStatus], completed_only: bool) -> Dict[str, RunStatus]:
    """run -> the attempt to collect (statuses: every attempt of every run)."""
    chosen: Dict[str, RunStatus] = {}
    for s in sorted(statuses, key=lambda s: s.attempt):
        if not s.file or s.iterations is None or s.state not in USABLE:
            continue
        if completed_only and s.state != "completed":
            continue
        best = chosen.get(s.run)
        if best is None or s.state == "completed" or best.state != "completed":
            chosen[s.run] = s
    return chosen


def _place(src: str, dst: str) -> None:
    if os.path.exists(dst):
        if os.path.samefile(src, dst) or os.path.getsize(src) == os.path.getsize(dst):
            return
        os.unlink(dst)  # an earlier copy of a file that was still being written
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def collect(spec: Spec, runs: List[plan.Run], statuses: List[RunStatus], dest: str,
            completed_only: bool = False) -> Tuple[int, str, List[str]]:
    """Returns (files in the folder, index path, runs left out with the reason)."""
    os.makedirs(dest, exist_ok=True)
    chosen = choose(statuses, completed_only)
    index = os.path.join(dest, INDEX)
    previous = set()
    try:
        with open(index, newline="", encoding="utf-8") as f:
            previous = {row.get("file") or "" for row in csv.DictReader(f)}
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        warn(f"{index}: unreadable ({e}): written anew; files an earlier collect put in "
             f"{dest} stay")
    option_keys = list(dict.fromkeys(k for r in runs for k in r.options))
    sweep = ["sweep"] if any(r.sweep for r in runs) else []
    fields = ["file", "run"] + sweep + ["attempt", "state", "detail", "iterations", "iters_total",
                                        "nodes", "tasks_per_node", "ranks", "gpus_per_node",
                                        "launcher", "repeat", "job"] + option_keys
    rows, left_out = [], []
    latest = {}
    for s in statuses:
        if s.attempt >= latest.get(s.run, (0, None))[0]:
            latest[s.run] = (s.attempt, s)
    for r in runs:
        s = chosen.get(r.id)
        if s is None:
            st = latest.get(r.id, (0, None))[1]
            left_out.append(f"{r.id}: {st.state if st else 'not submitted'}")
            continue
        name = os.path.basename(s.file)
        _place(s.file, os.path.join(dest, name))
        row = {"file": name, "run": r.id, "attempt": s.attempt, "state": s.state,
               "detail": s.detail, "iterations": s.iterations, "iters_total": s.iters_total,
               "nodes": r.nodes, "tasks_per_node": r.tasks_per_node, "ranks": r.ranks,
               "gpus_per_node": r.gpus_per_node, "launcher": r.launcher, "repeat": r.repeat,
               "job": s.job}
        if sweep:
            row["sweep"] = r.sweep
        row.update({k: r.options.get(k, "") for k in option_keys})
        rows.append(row)
    for stale in previous - {row["file"] for row in rows}:
        if os.path.basename(stale) == stale and stale.endswith(".h5"):
            try:
                os.unlink(os.path.join(dest, stale))
            except FileNotFoundError:
                pass
    tmp = index + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, index)
    return len(rows), index, left_out
