"""Shared wording of how numbers were obtained (Hoefler & Belli's rules for reporting parallel
benchmarks): warm-up excluded and stated, medians and percentiles, how ranks were combined, the
number of repetitions, all factors shown, and incomplete runs marked.

Every command prints these statements with its numbers; the HTML report repeats them.
"""

from __future__ import annotations

import os
from typing import List, Sequence

from .runfile import Run

#: Marker appended to a run or a row that includes an incomplete run.
INCOMPLETE_MARK = "*"


def warmup_statement(runs: Sequence[Run]) -> str:
    """'warm-up excluded: the first 2 iterations of every run' (or the values per run)."""
    values = sorted({r.warmup for r in runs})
    if not values:
        return "warm-up excluded: no runs"
    if len(values) == 1:
        n = values[0]
        return (f"warm-up excluded: the first {n} iteration{'s' if n != 1 else ''} of every run"
                if n else "warm-up: none configured (--warmup 0); every iteration is measured")
    return "warm-up excluded: the first " + "/".join(map(str, values)) + \
        " iterations (differs between runs)"


def name(run: Run) -> str:
    """The run's file name, with INCOMPLETE_MARK when the run is incomplete."""
    base = os.path.basename(run.path)
    return base + (INCOMPLETE_MARK if not run.is_complete else "")


def incomplete_lines(runs: Sequence[Run]) -> List[str]:
    """'* INCOMPLETE run.h5: why' for each incomplete run (empty when all are complete)."""
    return [f"{INCOMPLETE_MARK} INCOMPLETE {os.path.basename(r.path)}: {r.completeness_note()}"
            for r in runs if not r.is_complete]


def incomplete_section(runs: Sequence[Run], marked: str) -> List[str]:
    """The closing lines of a table whose ``marked`` ("rows", "groups") include incomplete runs:
    a blank line, what the mark means, and ``incomplete_lines``; empty when all are complete."""
    notes = incomplete_lines(runs)
    if not notes:
        return []
    return ["", f"{marked} marked {INCOMPLETE_MARK} include incomplete runs (their completed "
                f"iterations are used):"] + ["  " + n for n in notes]


def plural(n: int, word: str) -> str:
    """'1 run', '3 runs'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def repeats_statement(n: int) -> str:
    return f"{n} repeat{'s' if n != 1 else ''} pooled" if n > 1 else "1 run (no repeats)"
