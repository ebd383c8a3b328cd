"""The ``timeline`` command: a per-rank Gantt chart of the phases of a window of iterations.

Each rank is one row; each iteration's phases are drawn back to back from the iteration's
``start`` on the aligned clock (rank 0's clock, corrected per rank by the measured offset) in the
order the trainer runs them: data, forward, backward, exchange, update. Any remainder of ``total``
is left blank. When the file records ``exchange_wait``, the waiting part of the exchange is
hatched. Warm-up iterations are drawn faded and labelled. With several files, one panel per run.

``--iters a:b`` selects iterations a..b-1, counted as in the file (0-based, warm-up included).
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Sequence, Tuple

import numpy as np

from . import inputs, outputs
from .conventions import INCOMPLETE_MARK
from .runfile import Run

ORDER = ("data", "forward", "backward", "exchange", "update")
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


def draw(ax, run: Run, lo: int, hi: int) -> int:
    """Draw rank rows for iterations lo..hi-1 on ``ax``; returns how many cells were drawn."""
    colors = {p: f"C{i}" for i, p in enumerate(ORDER)}
    start = run.iterations["start"]
    wait = run.iterations.get("exchange_wait")
    drawn = 0
    labels = run.ranks["rank"].to_numpy()
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
    ax.set_yticklabels([f"rank {r}" for r in labels])
    ax.set_ylim(run.nranks - 0.5, -0.9)
    ax.set_xlabel("aligned clock: s since rank 0's start")
    ax.grid(axis="x", alpha=0.3)
    return drawn


def figure(runs: Sequence[Run], windows: Sequence[Tuple[int, int]]):
    from matplotlib.patches import Patch

    from .plotting import plt
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


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("timeline", help="per-rank Gantt chart of a window of iterations",
                              description="Draw each rank's phases over a window of iterations "
                                          "on the aligned clock.")
    inputs.add_inputs(p)
    p.add_argument("--iters", metavar="A:B",
                   help="iterations A..B-1 as counted in the file (0-based, warm-up included); "
                        f"default: the first {DEFAULT_WINDOW} measured ones")
    p.add_argument("-o", "--output", metavar="OUT.png|OUT.svg",
                   help="figure file to write (PNG or SVG by its ending)")
    p.add_argument("--plot", dest="output", metavar="OUT.png|OUT.svg", help="same as -o")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    try:
        a, b = parse_window(args.iters)
    except ValueError:
        report_error(f"--iters {args.iters}: accepted: A:B with integers 0 <= A < B "
                     f"(also A:, :B or A)")
        return 2
    if not args.output:
        report_error("the following arguments are required: -o/--output (or --plot)")
        return 2
    paths, _ = inputs.expand(args.inputs)
    from .plotting import FIGURE_SUFFIXES
    err = outputs.check_output(args.output, "--output", FIGURE_SUFFIXES, args.overwrite, paths)
    if err:
        report_error(err)
        return 2
    runs, status = inputs.load_all(args.inputs, report_error)
    if status:
        return status
    windows = [window_for(r, a, b) for r in runs]
    if all(lo >= hi for lo, hi in windows):
        longest = max(r.extent for r in runs)
        report_error(f"--iters {args.iters}: outside the runs' iterations (0..{longest - 1})")
        return 2
    lines: List[str] = []
    for run, (lo, hi) in zip(runs, windows):
        cells = run.valid[:, lo:hi] if hi > lo else np.zeros((run.nranks, 0), bool)
        t0 = run.iterations["start"][:, lo:hi][cells]
        t1 = (run.iterations["start"] + run.iterations["total"])[:, lo:hi][cells]
        span = f"{np.nanmin(t0):.4f}-{np.nanmax(t1):.4f} s" if t0.size else "nothing completed"
        mark = "" if run.is_complete else f"  INCOMPLETE: {run.completeness_note()}"
        warm = f" ({min(hi, run.warmup) - lo} warm-up)" if lo < run.warmup else ""
        lines.append(f"timeline: {run.path}: iterations {lo}-{hi - 1}{warm}, {run.nranks} ranks,"
                     f" aligned clock {span}{mark}")
    from .plotting import save
    save(figure(runs, windows), args.output)
    print("\n".join(lines))
    print(f"wrote {args.output}")
    return 0
