"""``dtbench-analyze stragglers FILES``: stragglers.analyse as text (or JSON), the one-sentence
verdict the report shows, and the ranks x iterations heat maps (``--plot``)."""

from __future__ import annotations

from .. import configs, conventions, jsonout
from ..runfile import Run
from ..stragglers import StragglerAnalysis, analyse
from ..units import ms, num
from . import common


def format_text(a: StragglerAnalysis, run: Run, top: int = 10) -> str:
    lines = [f"== {a.file}"]
    if a.incomplete:
        lines += [f"INCOMPLETE: {a.incomplete}",
                  "  (only the iterations the ranks completed are used)"]
    lines.append("  configuration: " + configs.describe(configs.configuration(run)))
    if run.nranks < 2:
        lines.append("  1 rank: no other rank to be slower than")
        return "\n".join(lines)
    if not a.iterations:
        lines.append("  no iteration measured by every rank: nothing to attribute")
        return "\n".join(lines)
    scope = "measured by every rank" if run.lockstep else "measured by any rank (ranks not " \
        "in lockstep: iteration i of each rank)"
    lines.append(f"  {a.iterations} iterations {scope}; {conventions.warmup_statement([run])};"
                 f" busy = {a.busy_definition}; slowest = largest busy time, when above the "
                 f"iteration's median over ranks; excess = its busy minus that median")
    if a.wait_source:
        lines.append(f"  waiting caused = {a.wait_source}")
    grouped = "layout" in a
    if grouped:
        lines.append(f"  layout {a.layout} (place: replica r, stage s, tensor rank t): each rank "
                     f"compared with its peers, {a.peers}; the median above is theirs"
                     + (" and the waiting caused is theirs" if a.wait_source and
                        not a.wait_source.startswith("recorded") else ""))
    lines.append("")
    place = f"{'place':<10}" if grouped else ""
    lines.append(f"  {'rank':>5} {place}{'node':>5} {'host':<14}{'slowest':>12} "
                 f"{'median excess ms':>17} {'total excess s':>15} {'wait caused s':>14} "
                 f"{'median busy ms':>15}")
    for r in a.ranks[:top]:
        where = f"{r.place:<10}" if grouped else ""
        lines.append(f"  {r.rank:>5} {where}{r.node:>5} {r.host[:13]:<14}"
                     f"{r.slowest_count:>6}/{a.iterations:<5}"
                     f" {ms(r.median_excess_s):>17} {num(r.total_excess_s):>15}"
                     f" {num(r.wait_caused_s):>14} {ms(r.busy_median_s):>15}")
    if len(a.ranks) > top:
        lines.append(f"  ... {len(a.ranks) - top} more ranks (--top N, or --json)")
    if run.nnodes > 1:
        lines.append("")
        lines.append(f"  {'node':>5} {'hosts':<20}{'slowest':>12} {'total excess s':>15} "
                     f"{'wait caused s':>14} {'median busy ms':>15}")
        for n in a.nodes[:top]:
            lines.append(f"  {n.node:>5} {n.hosts[:19]:<20}"
                         f"{n.slowest_count:>6}/{a.iterations:<5}"
                         f" {num(n.total_excess_s):>15} {num(n.wait_caused_s):>14}"
                         f" {ms(n.busy_median_s):>15}")
    if grouped and a.stages:
        lines.append("")
        lines.append("  per stage, median busy ms of its ranks (the pipeline's balance, not a "
                     "straggler): " + ", ".join(f"stage {st['stage']} {ms(st['busy_median_s'])}"
                                                for st in a.stages))
    lines.append("")
    lines.append("  load imbalance (max / mean over ranks, per iteration):  median    p95")
    for name, v in a.imbalance.items():
        lines.append(f"    {name:<10}{v['median']:>42.3f}{v['p95']:>7.3f}")
    if a.injected_delay_s is not None:
        inj = ", ".join(f"rank {r}: {d:.3f} s" for r, d in a.injected_delay_s.items())
        lines.append(f"  injected straggler delay (recorded): {inj or 'none'}")
    lines.append("")
    lines.append("  " + verdict(a))
    return "\n".join(lines)


def verdict(a: StragglerAnalysis) -> str:
    """One sentence naming the worst rank (or saying there is none)."""
    if not a.ranks or a.ranks[0].slowest_count == 0:
        return "no rank was slower than the median of its iteration"
    r = a.ranks[0]
    caused = "" if r.wait_caused_s is None else \
        f"; the others waited {r.wait_caused_s:.3f} s for it"
    where = f"{r.place}, " if "place" in r else ""
    return (f"slowest: rank {r.rank} ({where}node {r.node}, {r.host}) in {r.slowest_count} "
            f"of {a.iterations} iterations ({r.slowest_share:.0%}), by "
            f"{r.median_excess_s * 1e3:.3f} ms (median){caused}")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("stragglers", help="ranks and nodes ranked by how much they were "
                              "the slowest; load imbalance per phase",
                              description="Find the ranks and nodes that hold the others up.")
    common.add_inputs(p)
    p.add_argument("--top", type=int, default=10, help="ranks and nodes listed per run [10]")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    common.add_plot(p, "ranks x iterations heat maps (iteration time, exchange wait) of the run "
                       "with the most ranks")
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    if args.top < 1:
        report_error(f"--top {args.top}: accepted: a positive number of ranks")
        return 2
    if not common.plot_ok(args, report_error):
        return 2
    runs, status = common.load(args, report_error)
    if status:
        return status
    results = [analyse(r) for r in runs]
    if args.json:
        print(jsonout.dumps(results[0] if len(results) == 1 else results))
    else:
        print("\n\n".join(format_text(a, r, args.top) for a, r in zip(results, runs)))
    if args.plot:
        from ..plot import time as figures
        from ..plotting import save
        run = figures.pick_rank_run(runs)
        if run is None:
            report_error(f"--plot {args.plot}: nothing to plot: no run has a completed "
                         f"iteration")
            return 2
        save(figures.heatmaps(run), args.plot)
        if not args.json:
            print(f"wrote {args.plot} (heat maps of {run.path})")
    return 0

