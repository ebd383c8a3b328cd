"""Windows of iterations for the per-rank timeline (``dtbench-analyze timeline``, the report's
Gantt chart; drawn by plot/timeline_fig.py): ``--iters a:b`` selects iterations a..b-1, counted as
in the file (0-based, warm-up included); an open window starts at the first measured iteration
and is DEFAULT_WINDOW long.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

from .runfile import Run

DEFAULT_WINDOW = 5


def parse_window(text: Optional[str]) -> Tuple[Optional[int], Optional[int]]:
    """'a:b', 'a:', ':b' or 'a' -> (a, b) with None for an open end; ValueError if malformed."""
    if text is None:
        return None, None
    m = re.fullmatch(r"\s*(\d*)\s*(?::\s*(\d*)\s*)?", text)
    if not m or (m.group(1) == "" and (m.group(2) or "") == ""):
        raise ValueError(text)
    a = int(m.group(1)) if m.group(1) else None
    if m.group(2) is None:                             # "a": one iteration
        return a, a + 1
    b = int(m.group(2)) if m.group(2) else None
    if a is not None and b is not None and b <= a:
        raise ValueError(text)
    return a, b


def window_for(run: Run, a: Optional[int], b: Optional[int]) -> Tuple[int, int]:
    """Resolve an open window for this run: default start is the first measured iteration,
    default length DEFAULT_WINDOW; clipped to the run's iterations."""
    start = run.warmup if a is None else a
    stop = start + DEFAULT_WINDOW if b is None else b
    return max(0, start), min(run.extent, stop)
