"""Writing output files (figures, tables, reports) safely.

Rules every command follows:
- the output path is checked before any work: its folder must exist, its name must end in an
  accepted suffix, it must not be one of the input files, and an existing file is never replaced
  unless ``--overwrite`` was given;
- the content is written to a temporary file in the same folder and renamed into place, so a
  failure (or an interrupt) never leaves a half-written output.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable, Iterable, Optional, Sequence


def check_output(path: str, option: str, suffixes: Sequence[str], overwrite: bool,
                 inputs: Iterable[str] = ()) -> Optional[str]:
    """None when ``path`` may be written, else a one-line message naming the option and file."""
    if not path:
        return f"{option}: empty file name"
    real = os.path.realpath(path)
    for item in inputs:
        if os.path.realpath(item) == real:
            return f"{option} {path}: is one of the input files"
    lower = path.lower()
    if suffixes and not any(lower.endswith(s) for s in suffixes):
        return f"{option} {path}: accepted: a file name ending in {' or '.join(suffixes)}"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"{option} {path}: folder {folder} does not exist"
    if os.path.isdir(path):
        return f"{option} {path}: is a directory, expected a file name"
    if os.path.exists(path) and not overwrite:
        return f"{option} {path}: exists (add --overwrite to replace it)"
    return None


def write_atomically(path: str, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it to ``path``.
    On any exception the temporary file is removed and the exception propagates."""
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=os.path.splitext(base)[1], dir=folder)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_bytes(path: str, data: bytes) -> None:
    def _write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
    write_atomically(path, _write)


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
