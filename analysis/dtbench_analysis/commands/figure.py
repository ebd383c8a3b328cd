"""The ``figure`` command: any figure of the report, alone, as PNG or SVG.

``dtbench-analyze figure NAME FILES|DIR -o OUT.svg`` draws one of api.FIGURES (phases, scaling,
heatmap, gantt, strategies, pipelines, layouts, samples, memory) from the same tables as the
report and ``dtbench_analysis.load``. ``--run FILE`` picks the run of heatmap/gantt (default: the one with
the most ranks), ``--iters A:B`` the window of gantt.
"""

from __future__ import annotations

from .. import api
from . import common


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("figure", help="one of the report's figures as PNG or SVG",
                              description="Draw one figure of the report from the runs.")
    p.add_argument("name", choices=api.FIGURES, metavar="NAME",
                   help="one of: " + ", ".join(api.FIGURES))
    common.add_inputs(p)
    p.add_argument("-o", "--output", "--plot", metavar="OUT.png|OUT.svg", required=True,
                   help="file to write (PNG or SVG by its ending)")
    p.add_argument("--run", metavar="FILE", help="heatmap, gantt: the run to draw")
    p.add_argument("--iters", metavar="A:B", help="gantt: iterations A..B-1")
    p.add_argument("--target", type=float, metavar="ACC",
                   help="strategies: target test accuracy (default: the runs' own)")
    common.add_ignore(p)
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    ok, window = common.window(args.iters, "--iters", report_error)
    if not ok or not common.target_ok(args.target, report_error):
        return 2
    if not common.output_ok(args, args.output, "--output", report_error):
        return 2
    runs, status = common.load(args, report_error)
    if status:
        return status
    res = api.Results(runs, args.ignore, args.target)
    try:
        fig = res.figure(args.name, run=args.run, window=window)
    except KeyError:
        report_error(f"--run {args.run}: accepted: one of the input files")
        return 2
    except ValueError as e:
        report_error(f"figure {args.name}: {e}")
        return 2
    from ..plotting import save
    save(fig, args.output)
    print(f"wrote {args.output}")
    return 0
