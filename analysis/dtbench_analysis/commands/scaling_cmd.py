"""``dtbench-analyze scaling FILES``: the strong and weak scaling series of scaling.find_series
as text (or JSON), and their figure (plot/scaling_fig.py)."""

from __future__ import annotations

from typing import Sequence

from .. import configs, conventions, jsonout, metrics, stats, work
from ..runfile import Run
from ..scaling import UNITS, ScalingResult, find_series
from ..units import num
from . import common


#: (key, heading, width, format) of the columns work.py adds where the files allow them
WORK_COLUMNS = (("tokens_per_s", "tokens/s", 11, ".1f"), ("mfu", "MFU", 7, ".2%"))


def _work_columns(points) -> list:
    """The WORK_COLUMNS some point has (the others are left out)."""
    return [c for c in WORK_COLUMNS if any(c[0] in q for q in points)]


def _work_cells(q, columns) -> str:
    return "".join(f" {num(q.get(key), fmt):>{width}}" for key, _, width, fmt in columns)


def format_text(result: ScalingResult, runs: Sequence[Run], unit: str,
                confidence: float) -> str:
    lockstep = all(r.lockstep for r in runs)
    lines = [f"scaling: {conventions.plural(len(runs), 'run')}, {len(result.series)} series "
             f"(scale p = {unit})",
             f"  time per iteration: median over iterations of the "
             f"{metrics.ITERATION_TIME_METHOD[True] if lockstep else 'per-iteration time'}; "
             f"{conventions.warmup_statement(runs)}; repeats at one scale pooled; "
             f"[{confidence:.0%} CI of the median, order statistics]",
             "  speedup S = throughput / base throughput; efficiency E = S * p_base / p "
             "(strong: T1*p1/(Tp*p), weak: T1/Tp); ideal S = p/p_base, E = 1"]
    if not lockstep:
        lines.append("  async/mixed runs: " + metrics.ITERATION_TIME_METHOD[False] +
                     "; throughput = " + "sum over ranks of batch_per_rank / median total")
    points = [q for s in result.series for q in s.points] + list(result.unmatched)
    columns = _work_columns(points)
    lines += [f"  {heading}: {work.DEFINITIONS[key]}" for key, heading, _, _ in columns]
    for i, s in enumerate(result.series, 1):
        base = s.base
        lines += ["", f"== series {i}: {s.kind} scaling, {s.fixed} fixed",
                  "   configuration: " + configs.describe(s.factors),
                  f"   base case: {base.ranks} rank{'s' if base.ranks != 1 else ''} on "
                  f"{base.nodes} node{'s' if base.nodes != 1 else ''}: "
                  f"{num(base.time_median_s, scale=1e3)} ms per iteration, "
                  f"{num(base.throughput, '.1f')} samples/s "
                  f"({', '.join(b.split('/')[-1] for b in base.files)})",
                  f"   {'ranks':>5} {'nodes':>5} {'batch':>6} {'b/rank':>6} {'runs':>4} "
                  f"{'iters':>6}  {'time/iter ms [CI]':<28}{'samples/s':>10} {'speedup':>8} "
                  f"{'ideal':>6} {'effic.':>7} {'exch.':>6}" +
                  "".join(f" {heading:>{width}}" for _, heading, width, _ in columns)]
        for q in s.points:
            ci = f"{num(q.time_median_s, scale=1e3)} [{num(q.time_lo_s, scale=1e3)}, " \
                 f"{num(q.time_hi_s, scale=1e3)}]"
            mark = conventions.INCOMPLETE_MARK if q.incomplete else ""
            share = "n/a" if q.exchange_share is None else f"{q.exchange_share:.1%}"
            lines.append(f"   {q.ranks:>5} {q.nodes:>5} {q.batch_global:>6} "
                         f"{q.batch_per_rank:>6} {q.repeats:>4} {q.iterations:>6}  "
                         f"{ci:<28}{num(q.throughput, '.1f'):>10} "
                         f"{num(q.speedup, '.2f'):>8} {num(q.ideal_speedup, '.2f'):>6} "
                         f"{num(q.efficiency, '.2f'):>7} {share:>6}"
                         f"{_work_cells(q, columns)}{mark}")
    if result.unmatched:
        lines += ["", "not in any series (no run at another scale with the same global batch "
                  "or the same per-rank batch):"]
        for q in result.unmatched:
            mark = conventions.INCOMPLETE_MARK if q.incomplete else ""
            lines.append(f"   {q.ranks} ranks, {q.nodes} nodes, batch {q.batch_global}:"
                         f" {num(q.time_median_s, scale=1e3)} ms per iteration, "
                         f"{num(q.throughput, '.1f')} samples/s{_work_text(q)}, "
                         f"{q.repeats} run(s){mark}  "
                         + configs.describe(q.factors))
    lines += conventions.incomplete_section(runs, "rows")
    return "\n".join(lines)


def _work_text(q) -> str:
    return "".join(f", {num(q.get(key), fmt)} {heading}" for key, heading, _, fmt in
                   _work_columns([q]))


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "scaling", help="throughput, speedup and efficiency across rank/node counts",
        description="Group runs into strong and weak scaling series and report throughput, "
                    "speedup and parallel efficiency against the base case.")
    common.add_inputs(p)
    p.add_argument("--unit", choices=UNITS, default="ranks",
                   help="scale p counted in ranks or nodes [ranks]")
    common.add_plot(p, "throughput, speedup, efficiency and exchange share against the scale")
    common.add_ignore(p)
    p.add_argument("--confidence", type=float, default=stats.DEFAULT_CONFIDENCE,
                   help="confidence level of the intervals [0.95]")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    if not common.confidence_ok(args.confidence, report_error) or \
            not common.plot_ok(args, report_error):
        return 2
    runs, status = common.load(args, report_error)
    if status:
        return status
    result = find_series(runs, args.unit, args.ignore, args.confidence)
    if args.plot and not result.series:
        report_error(f"--plot {args.plot}: nothing to plot: no scaling series (runs at two "
                     f"or more scales with the same global or per-rank batch)")
        return 2
    if args.json:
        print(jsonout.dumps(result))
    else:
        print(format_text(result, runs, args.unit, args.confidence))
    if args.plot:
        from ..plot.scaling_fig import panels
        from ..plotting import save
        save(panels(result, args.unit), args.plot)
        print(f"wrote {args.plot}")
    return 0
