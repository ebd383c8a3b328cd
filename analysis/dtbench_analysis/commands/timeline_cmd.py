"""``dtbench-analyze timeline FILES --iters A:B -o t.png``: the per-rank Gantt chart of a window
of iterations (plot/timeline_fig.py draws it), and one line per run saying what the window holds."""

from __future__ import annotations

from typing import List

import numpy as np

from ..timeline import DEFAULT_WINDOW, window_for
from . import common


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("timeline", help="per-rank Gantt chart of a window of iterations",
                              description="Draw each rank's phases over a window of iterations "
                                          "on the aligned clock.")
    common.add_inputs(p)
    p.add_argument("--iters", metavar="A:B",
                   help="iterations A..B-1 as counted in the file (0-based, warm-up included); "
                        f"default: the first {DEFAULT_WINDOW} measured ones")
    p.add_argument("-o", "--output", metavar="OUT.png|OUT.svg",
                   help="figure file to write (PNG or SVG by its ending)")
    p.add_argument("--plot", dest="output", metavar="OUT.png|OUT.svg", help="same as -o")
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    ok, (a, b) = common.window(args.iters, "--iters", report_error,
                               "A:B with integers 0 <= A < B (also A:, :B or A)")
    if not ok:
        return 2
    if not args.output:
        report_error("the following arguments are required: -o/--output (or --plot)")
        return 2
    if not common.output_ok(args, args.output, "--output", report_error):
        return 2
    runs, status = common.load(args, report_error)
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
    from ..plot.timeline_fig import figure
    from ..plotting import save
    save(figure(runs, windows), args.output)
    print("\n".join(lines))
    print(f"wrote {args.output}")
    return 0
