"""Turning a command's FILES|DIR arguments into loaded runs.

Every command accepts one file, several files, or directories: a directory stands for every
``*.h5`` file under it (recursively, sorted by path). A path that is missing, a directory with no
``*.h5`` file, or a file that is not a readable dtbench result file is reported as one line naming
it (``report_error``); the caller then exits with status 2.
"""

from __future__ import annotations

import os
from typing import Callable, List, Optional, Sequence, Tuple

from .runfile import Run, RunFileError, load_run

def expand(items: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(paths, errors): files kept as given, directories replaced by their ``*.h5`` files.
    Errors are one-line messages naming the path. A file named twice is kept once."""
    paths: List[str] = []
    errors: List[str] = []
    for item in items:
        item = os.fspath(item)
        if os.path.isdir(item):
            found = sorted(os.path.join(root, name)
                           for root, _, names in os.walk(item)
                           for name in names if name.endswith(".h5"))
            if not found:
                errors.append(f"{item}: directory holds no *.h5 result file")
            paths.extend(found)
        else:
            paths.append(item)       # missing / unreadable files are reported by load_run
    seen = set()
    unique = []
    for p in paths:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique, errors


def load_all(items: Sequence[str], report_error: Callable[[str], None],
             fields: Optional[Sequence[str]] = None) -> Tuple[List[Run], int]:
    """Load every run named by ``items``. Returns (runs that loaded, status): status is 2 when
    any path could not be read (each reported as one line), else 0."""
    paths, errors = expand(items)
    for message in errors:
        report_error(message)
    status = 2 if errors else 0
    runs: List[Run] = []
    for path in paths:
        try:
            runs.append(load_run(path, fields=fields))
        except RunFileError as e:
            report_error(str(e))
            status = 2
    return runs, status
