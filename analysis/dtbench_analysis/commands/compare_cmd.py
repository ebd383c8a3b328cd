"""``dtbench-analyze compare FILES``: compare.compare as text (or JSON); ``--plot`` draws training
loss and test accuracy against wall time and iterations, the target accuracy and when each run
first reached it (the report's strategies figure, plot/training.py)."""

from __future__ import annotations

import os
from typing import Sequence

from .. import configs, conventions, grouping, jsonout, metrics, stats, work
from ..compare import Comparison, compare
from ..runfile import Run
from ..units import ms, num
from . import common


def staleness_text(st) -> str:
    """The staleness distribution in words; negative values (older mixed files) left out."""
    if not st:
        return "not recorded"
    neg = st.get("negative") or 0
    note = f"; {neg} negative values left out (an older mixed exchange recorded a step " \
           "difference there, not a staleness)" if neg else ""
    if not st["n"]:
        return "n/a" + note
    counts = ", ".join(f"{k}: {v}" for k, v in list(st["counts"].items())[:12])
    return f"median {st['median']:g}, p95 {st['p95']:g}, max {st['max']:g} (counts {counts})" \
        + note


def _work_text(g) -> str:
    """tokens/s and MFU beside the throughput (work.py), where the files record them."""
    parts = []
    for key, name, fmt in (("tokens_per_s", "tokens/s", ".1f"), ("mfu", "MFU", ".2%")):
        if key in g:
            v = g[key]
            ci = "" if v["lo"] is None or v["hi"] is None else \
                f" [{format(v['lo'], fmt)}, {format(v['hi'], fmt)}]"
            parts.append(f"{num(v['median'], fmt)} {name}{ci}" if key != "mfu" else
                         f"{name} {num(v['median'], fmt)}{ci}")
    return "; " + "; ".join(parts) if parts else ""


def format_text(result: Comparison, runs: Sequence[Run]) -> str:
    groups = result.groups
    conf = result.confidence
    lines = [f"compare: {conventions.plural(len(runs), 'run')} in "
             f"{conventions.plural(len(groups), 'configuration')} "
             f"(repeats of a configuration pooled)",
             "  common configuration: " + configs.describe(result.common),
             *([f"  WARNING: these configurations differ in {' and '.join(result.unlike)}: "
                "their times measure different work (dtbench-analyze report compares runs "
                "only along one factor)"] if result.unlike else []),
             f"  time per iteration: lockstep runs (sync, ssp): "
             f"{metrics.ITERATION_TIME_METHOD[True]}; async/mixed: "
             f"{metrics.ITERATION_TIME_METHOD[False]}",
             f"  {conventions.warmup_statement(runs)}; median [{conf:.0%} CI, order statistics],"
             f" p95 over the pooled iterations"]
    lines += [f"  {name}: {work.DEFINITIONS[key]}" for key, name in
              (("tokens_per_s", "tokens/s"), ("mfu", "MFU")) if any(key in g for g in groups)]
    if any("memory_plan_mib" in g for g in groups):
        lines.append("  memory per rank (the groups differ in the exchange's sharding): planned "
                     "= /ranks/memory_params + memory_grads + memory_optimizer, the largest rank "
                     "of any repeat; measured peak resident = /ranks/memory_peak_resident "
                     "(ru_maxrss), the median over the repeats of the largest rank; n/a: not "
                     "in the files")
    for i, g in enumerate(groups, 1):
        mark = conventions.INCOMPLETE_MARK if g.incomplete else ""
        t, tp = g.time_s, g.throughput
        base = " (baseline)" if g.test is None else ""
        lines += ["", f"[{i}] {g.label}{mark}{base}",
                  f"    runs: {conventions.repeats_statement(g.repeats)}, {g.iterations} "
                  f"iterations; " + ", ".join(os.path.basename(f) for f in g.files)]
        if g.repeats > 1:
            lines.append("    median time per iteration of each repeat (ms): " +
                         ", ".join(ms(x) for x in g.repeat_medians_s))
        lines.append(f"    time per iteration: median {ms(t['median'])} ms "
                     f"[{ms(t['lo'])}, {ms(t['hi'])}], p95 {ms(t['p95'])} ms")
        if "memory_plan_mib" in g:
            lines.append(f"    memory per rank: {num(g.memory_plan_mib, '.1f')} MiB planned, "
                         f"{num(g.memory_peak_mib, '.1f')} MiB measured peak resident, at "
                         f"{ms(t['median'])} ms per iteration")
        ci = "" if tp["lo"] is None else f" [{tp['lo']:.1f}, {tp['hi']:.1f}]"
        tpm = "n/a" if tp["median"] is None else f"{tp['median']:.1f}"
        lines.append(f"    throughput: {tpm} samples/s{ci}" + _work_text(g))
        share = g.exchange_share
        lines.append("    exchange share: " + ("n/a" if share is None else f"{share:.1%}"))
        prec, sent = g.precision, g.bytes_sent_median
        lines.append(f"    precision: {prec['precision']} compute, gradients in "
                     f"{prec['grad_dtype']} on the wire; exchange median "
                     f"{ms(g.exchange_median_s)} ms, "
                     + ("payload n/a" if sent is None else f"payload {sent:.0f} B")
                     + " per rank per iteration (median bytes_sent)")
        lines.append("    staleness: " + staleness_text(g.staleness))
        tt = g.target
        if tt:
            goal = tt["runs"][0]["target"]
            if tt["reached"]:
                lines.append(f"    target accuracy {goal:g}: reached in {tt['reached']} of "
                             f"{tt['of']} runs; median {tt['iterations_median']:g} iterations "
                             f"(warm-up included), {tt['time_median_s']:.3f} s since start")
            elif not any(x["evaluations"] for x in tt["runs"]):
                lines.append(f"    target accuracy {goal:g}: no evaluations recorded "
                             f"(dtbench --eval-every N with a data set that has a test split)")
            else:
                best = max((x["best_accuracy"] or 0.0) for x in tt["runs"])
                lines.append(f"    target accuracy {goal:g}: not reached in {tt['of']} runs "
                             f"(best accuracy {best:.4f})")
        else:
            lines.append("    target accuracy: none set (--target A)")
        test = g.test
        if test and test["p"] is not None:
            verdict = "significant" if test["significant"] else "not significant"
            lines.append(f"    vs baseline: median ratio {test['median_ratio']:.3f}, Mann-Whitney"
                         f" U p = {test['p']:.3g} ({verdict} at alpha "
                         f"{result.alpha_per_test:.3g}); P(slower than baseline) "
                         f"{test['p_b_greater']:.2f}")
        elif test:
            lines.append("    vs baseline: n/a (no measured iterations)")
    lines += conventions.incomplete_section(runs, "groups")
    if len(groups) > 2:
        lines.append(f"  Bonferroni: alpha {result.alpha:g} / {len(groups) - 1} tests")
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="configurations side by side: medians with CIs, Mann-Whitney U",
        description="Compare configurations (repeats pooled): time per iteration, throughput, "
                    "exchange share, staleness, time to accuracy, significance vs a baseline.")
    common.add_inputs(p)
    p.add_argument("--baseline", type=int, default=1, metavar="N",
                   help="the N-th configuration (in input order) is the baseline [1]")
    p.add_argument("--alpha", type=float, default=stats.DEFAULT_ALPHA,
                   help="significance level, split over the tests (Bonferroni) [0.05]")
    p.add_argument("--confidence", type=float, default=stats.DEFAULT_CONFIDENCE,
                   help="confidence level of the intervals [0.95]")
    p.add_argument("--target", type=float, metavar="ACC",
                   help="target test accuracy (0..1); default: the runs' target_accuracy")
    common.add_ignore(p)
    common.add_plot(p, "loss and accuracy against time and iterations of every run")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def check_options(args, report_error) -> bool:
    return (common.confidence_ok(args.confidence, report_error)
            and common.check(0.0 < args.alpha < 1.0, f"--alpha {args.alpha}: accepted: a level "
                             f"in (0, 1), e.g. 0.05", report_error)
            and common.target_ok(args.target, report_error)
            and common.check(args.baseline >= 1, f"--baseline {args.baseline}: accepted: 1 .. "
                             f"number of configurations", report_error))


def run_command(args, report_error) -> int:
    if not check_options(args, report_error) or not common.plot_ok(args, report_error):
        return 2
    runs, status = common.load(args, report_error)
    if status:
        return status
    factors = grouping.differing_factors(runs, args.ignore)
    if len(factors) > 1:
        return _by_factor(args, runs, factors, report_error)
    ngroups = len(configs.group_runs(runs, args.ignore))
    if args.baseline > ngroups:
        report_error(f"--baseline {args.baseline}: accepted: 1 .. {ngroups} (the number of "
                     f"configurations among the runs)")
        return 2
    result = compare(runs, args.ignore, args.baseline, args.alpha, args.confidence, args.target)
    if args.json:
        print(jsonout.dumps(result))
    else:
        print(format_text(result, runs))
    return _plot(args, runs)


def _by_factor(args, runs: Sequence[Run], factors, report_error) -> int:
    """Runs that differ in several factors: the report's comparisons (grouping.comparisons),
    each along one factor with everything else equal, and the runs that fit none."""
    if args.baseline != 1:
        report_error(f"--baseline {args.baseline}: accepted: 1 when the runs differ in more "
                     f"than one factor ({', '.join(factors)}): each comparison's baseline is "
                     f"its first configuration")
        return 2
    comps = grouping.comparisons(runs, args.ignore)
    results = [compare(c["runs"], args.ignore, 1, args.alpha, args.confidence, args.target)
               for c in comps]
    used = {r.path for c in comps for r in c["runs"]}
    left = [r.path for r in runs if r.path not in used]
    if args.json:
        print(jsonout.dumps({"differing_factors": factors, "comparisons": [
            {"factor": c["factor"], "common": c["common"], "result": res}
            for c, res in zip(comps, results)], "not_compared": left}))
        return _plot(args, runs)
    lines = [f"compare: the runs differ in {' and '.join(factors)}; compared only along one "
             f"factor with everything else equal (as in dtbench-analyze report): "
             f"{conventions.plural(len(comps), 'comparison')}"]
    for i, (c, res) in enumerate(zip(comps, results), 1):
        lines += ["", f"=== comparison {i}: {c['factor']} ({c['common'].get('model')} on "
                      f"{c['common'].get('dataset')})", format_text(res, c["runs"])]
    if left:
        lines += ["", "not compared (each differs from every other run in more than one "
                      "factor): " + ", ".join(os.path.basename(p) for p in left)]
    print("\n".join(lines))
    return _plot(args, runs)


def _plot(args, runs: Sequence[Run]) -> int:
    if args.plot:
        from ..plot.training import strategies
        from ..plotting import save
        save(strategies(runs, args.target), args.plot)
        print(f"wrote {args.plot}")
    return 0
