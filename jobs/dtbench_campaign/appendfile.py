"""The campaign's append-only files, ``submissions.jsonl`` and each attempt's ``.state`` record:
written one whole line at a time, read so that a line cut by an interrupted writer (a submit
killed while appending, a full disk, a job killed while noting its end) costs that line only.

A cut line is skipped with a one-line warning on stderr (once per file and line), and a line
appended after it starts on a line of its own. What can still be read from a cut
submissions line (the job id and the tasks written out whole) is kept, so that a run whose
job was submitted is not submitted again.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

_said = set()


def warn(message: str) -> None:
    """``dtbench-campaign: warning: MESSAGE`` on stderr, once per message and command (status
    --wait reads the files again and again)."""
    if message not in _said:
        _said.add(message)
        print(f"dtbench-campaign: warning: {message}", file=sys.stderr, flush=True)


def new_command() -> None:
    """Forget the warnings said: a new command says them again."""
    _said.clear()


def append_line(path: str, text: str) -> None:
    """Append ``text`` and a newline in one write; after a cut last line, on a new line."""
    data = text.rstrip("\n").encode("utf-8") + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        if end:
            with open(path, "rb") as f:
                f.seek(end - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        os.write(fd, data)
    finally:
        os.close(fd)


def read_lines(path: str) -> Tuple[List[str], Optional[str]]:
    """(whole lines, the cut last line or None); a missing or unreadable file has no lines.
    Bytes that are not UTF-8 are replaced (U+FFFD), never an error."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return [], None
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    cut = lines.pop()                      # after the last newline: "" unless cut
    return lines, (cut if cut.strip() else None)


def read_state(path: str) -> Dict[str, str]:
    """key=value lines of a .state record; a later line wins, a cut last line is skipped."""
    lines, cut = read_lines(path)
    if cut is not None:
        warn(f"{path}: last line cut ({cut[:40]!r}, no newline): ignored")
    out: Dict[str, str] = {}
    for line in lines:
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


_JOB = re.compile(r'"job_id"\s*:\s*"([^"]*)"')
_ARRAY = re.compile(r'"array"\s*:\s*(true|false)')
_TASK = re.compile(r'\{\s*"index"\s*:\s*\d+\s*,\s*"run"\s*:\s*"(?:[^"\\]|\\.)*"\s*,'
                   r'\s*"attempt"\s*:\s*\d+\s*\}')


def _tasks(value: Any) -> List[Dict[str, Any]]:
    """The well-formed task entries of a submission record (index, run, attempt)."""
    out = []
    for t in value if isinstance(value, list) else []:
        if isinstance(t, dict) and isinstance(t.get("run"), str):
            try:
                out.append({"index": int(t.get("index", 0)), "run": t["run"],
                            "attempt": int(t["attempt"])})
            except (KeyError, TypeError, ValueError):
                continue
    return out


def _salvage(line: str) -> Optional[Dict[str, Any]]:
    """What a cut submissions line still says: its job id and the tasks written out whole."""
    job = _JOB.search(line)
    tasks = [json.loads(m.group(0)) for m in _TASK.finditer(line)]
    if not job or not tasks:
        return None
    array = _ARRAY.search(line)
    return {"job_id": job.group(1), "array": bool(array and array.group(1) == "true"),
            "tasks": tasks, "cut": True}


def read_jsonl(path: str) -> List[Dict[str, Any]]:
    """The submission records of ``path`` (one JSON object per line); lines that are not one
    (cut by an interrupted submit, or damaged) are skipped with a warning, keeping what a cut
    line still says (``_salvage``)."""
    lines, cut = read_lines(path)
    numbered = list(enumerate(lines, 1)) + ([(len(lines) + 1, cut)] if cut is not None else [])
    out = []
    for n, line in numbered:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        if isinstance(rec, dict):
            rec["tasks"] = _tasks(rec.get("tasks"))
            out.append(rec)
            continue
        kept = _salvage(line)
        what = "cut (an interrupted submit?)" if n > len(lines) else "not a JSON object"
        if kept:
            runs = ", ".join(t["run"] for t in kept["tasks"])
            warn(f"{path}:{n}: line {what}: kept job {kept['job_id']} with {runs}; the line may "
                 f"have named more runs of that job (squeue -j {kept['job_id']} shows them)")
            out.append(kept)
        else:
            warn(f"{path}:{n}: line {what}: skipped")
    return out
