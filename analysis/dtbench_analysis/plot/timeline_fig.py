"""Per-rank Gantt chart of the phases of a window of iterations (``dtbench-analyze timeline``,
the report's timeline).

Each rank is one row; each iteration's phases are drawn back to back from the iteration's
``start`` on the aligned clock (rank 0's clock, corrected per rank by the measured offset) in the
order the trainer runs them: data, forward, backward, exchange, update. Any remainder of ``total``
is left blank. When the file records ``exchange_wait``, the waiting part of the exchange is
hatched. In a model-parallel run each rank is labelled with its place (layout.labels: replica,
stage, tensor rank). Warm-up iterations are drawn faded and labelled. With several runs, one
panel per run.
"""

from __future__ import annotations

import os
from typing import Sequence, Tuple

import numpy as np

from ..conventions import INCOMPLETE_MARK
from .. import layout
from ..runfile import Run

ORDER = ("data", "forward", "backward", "exchange", "update")


def draw(ax, run: Run, lo: int, hi: int) -> int:
    """Draw rank rows for iterations lo..hi-1 on ``ax``; returns how many cells were drawn."""
    colors = {p: f"C{i}" for i, p in enumerate(ORDER)}
    start = run.iterations["start"]
    wait = run.iterations.get("exchange_wait")
    drawn = 0
    labels = layout.labels(run)
    for row in range(run.nranks):
        y = row
        for it in range(lo, hi):
            t = start[row, it]
            if not (run.valid[row, it] and np.isfinite(t)):
                continue
            drawn += 1
            alpha = 0.45 if it < run.warmup else 1.0
            x = t
            for phase in ORDER:
                w = run.iterations[phase][row, it]
                if not np.isfinite(w) or w <= 0:
                    continue
                ax.broken_barh([(x, w)], (y - 0.4, 0.8), facecolors=colors[phase], alpha=alpha,
                               linewidth=0)
                if phase == "exchange" and wait is not None and np.isfinite(wait[row, it]):
                    ww = min(max(wait[row, it], 0.0), w)
                    ax.broken_barh([(x, ww)], (y - 0.4, 0.8), facecolors="none",
                                   edgecolor="k", hatch="///", linewidth=0)
                x += w
            if row == 0:
                tag = f"{it}" + (" (warm-up)" if it < run.warmup else "")
                ax.text(t, -0.55, tag, fontsize=7, va="bottom")
    ax.set_yticks(range(run.nranks))
    ax.set_yticklabels(labels)
    ax.set_ylim(run.nranks - 0.5, -0.9)
    ax.set_xlabel("aligned clock: s since rank 0's start")
    ax.grid(axis="x", alpha=0.3)
    return drawn


def figure(runs: Sequence[Run], windows: Sequence[Tuple[int, int]]):
    from matplotlib.patches import Patch

    from ..plotting import plt
    heights = [max(1.5, 0.35 * r.nranks + 1.0) for r in runs]
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, sum(heights) + 0.8),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, run, (lo, hi) in zip(axes[:, 0], runs, windows):
        n = draw(ax, run, lo, hi)
        title = f"{os.path.basename(run.path)}: iterations {lo}-{hi - 1}, {run.exchange}, " \
                f"{run.nranks} ranks on {run.nnodes} node{'s' if run.nnodes != 1 else ''}"
        if not run.is_complete:
            title += f"  [INCOMPLETE{INCOMPLETE_MARK}]"
        if n == 0:
            ax.text(0.5, 0.5, "no completed iteration in this window", ha="center",
                    transform=ax.transAxes)
        ax.set_title(title, fontsize=9, loc="left")
    handles = [Patch(color=f"C{i}", label=p) for i, p in enumerate(ORDER)]
    if any("exchange_wait" in r.iterations for r in runs):
        handles.append(Patch(facecolor="white", edgecolor="k", hatch="///",
                             label="waiting for other ranks"))
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / (sum(heights) + 0.8)))
    return fig
