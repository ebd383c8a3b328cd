"""The ``scaling`` command: throughput, speedup and parallel efficiency across rank/node counts.

Runs are grouped into series: same configuration apart from the scale (ranks, nodes) and the
batch (configs.SCALE_KEYS). Inside a group, the runs sharing one global batch form a *strong*
scaling series and the runs sharing one per-rank batch (with a growing global batch) form a
*weak* one; a run can belong to both. Repeats at one scale are pooled.

With p the scale (ranks, or nodes with ``--unit nodes``) and p1 the smallest scale of the series
(the base case): time per iteration T = median of the pooled per-iteration times
(metrics.iteration_times), throughput X = batch_global / T (lockstep runs; for async/mixed runs
the median over repeats of metrics.throughput), speedup S = X_p / X_1 and efficiency
E = S * p1 / p. For strong scaling that is S = T1/Tp and E = T1*p1/(Tp*p); for weak scaling
S = (p/p1) * T1/Tp (scaled speedup) and E = T1/Tp. The ideal is S = p/p1, E = 1.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import configs, conventions, inputs, jsonout, metrics, outputs, stats
from .runfile import Run

UNITS = ("ranks", "nodes")


def _point(runs: List[Run], unit: str, confidence: float) -> Dict[str, object]:
    """Statistics of the runs at one scale (repeats pooled)."""
    first = runs[0]
    times = np.concatenate([metrics.iteration_times(r) for r in runs])
    t = stats.median_ci(times, confidence)
    p95 = float(np.percentile(times, 95)) if times.size else None
    if first.lockstep:
        tp = first.batch_global / t["median"] if t["median"] else None
        tp_lo = first.batch_global / t["hi"] if t["hi"] else None
        tp_hi = first.batch_global / t["lo"] if t["lo"] else None
    else:
        rates = [metrics.throughput(r)["samples_per_s"] for r in runs]
        rates = [x for x in rates if x]
        tp = float(np.median(rates)) if rates else None
        tp_lo = tp_hi = None
    shares = np.concatenate([metrics.exchange_share_per_iteration(r) for r in runs])
    return {
        "ranks": first.nranks, "nodes": first.nnodes,
        "p": first.nranks if unit == "ranks" else first.nnodes,
        "batch_global": first.batch_global,
        "batch_per_rank": int(first.attrs.get("batch_per_rank") or
                              first.batch_global // max(1, first.nranks)),
        "files": [r.path for r in runs],
        "repeats": len(runs),
        "incomplete": [r.path for r in runs if not r.is_complete],
        "iterations": int(times.size),
        "time_median_s": t["median"], "time_lo_s": t["lo"], "time_hi_s": t["hi"],
        "time_p95_s": p95,
        "throughput": tp, "throughput_lo": tp_lo, "throughput_hi": tp_hi,
        "exchange_share": float(np.median(shares)) if shares.size else None,
    }


def _finish_series(kind: str, fixed: str, points: List[Dict[str, object]],
                   factors: Dict[str, str]) -> Dict[str, object]:
    points = sorted(points, key=lambda q: (q["p"], q["ranks"], q["nodes"]))
    base = points[0]
    for q in points:
        q["ideal_speedup"] = q["p"] / base["p"]
        if q["throughput"] and base["throughput"]:
            q["speedup"] = q["throughput"] / base["throughput"]
            q["efficiency"] = q["speedup"] * base["p"] / q["p"]
        else:
            q["speedup"] = q["efficiency"] = None
    return {"kind": kind, "fixed": fixed, "factors": factors, "base": base, "points": points}


def find_series(runs: Sequence[Run], unit: str = "ranks", ignore: Sequence[str] = (),
                confidence: float = stats.DEFAULT_CONFIDENCE) -> Dict[str, object]:
    """{"series": [...], "unmatched": [...]}: strong and weak series (each with its base case
    and points), and the scales that belong to no series."""
    groups = configs.group_runs(runs, tuple(ignore) + configs.SCALE_KEYS)
    series, unmatched = [], []
    for key, group in groups.items():
        by_scale: "OrderedDict[tuple, List[Run]]" = OrderedDict()
        for r in group:
            by_scale.setdefault((r.nranks, r.nnodes, r.batch_global), []).append(r)
        points = {k: _point(v, unit, confidence) for k, v in by_scale.items()}
        used = set()
        factors = dict(key)
        for kind, field, fixed in (("strong", "batch_global", "global batch"),
                                   ("weak", "batch_per_rank", "per-rank batch")):
            values = OrderedDict.fromkeys(q[field] for q in points.values())
            for value in values:
                members = [k for k, q in points.items() if q[field] == value]
                scales = {(points[k]["ranks"], points[k]["nodes"]) for k in members}
                batches = {points[k]["batch_global"] for k in members}
                if len(scales) < 2 or (kind == "weak" and len(batches) < 2):
                    continue
                used.update(members)
                series.append(_finish_series(kind, f"{fixed} {value}",
                                             [dict(points[k]) for k in members], factors))
        for k, q in points.items():
            if k not in used:
                unmatched.append(dict(q, factors=factors))
    return {"series": series, "unmatched": unmatched}


# ---- text ----------------------------------------------------------------------------------
def _f(value, fmt=".3f", scale=1.0) -> str:
    return "n/a" if value is None or not np.isfinite(value) else format(value * scale, fmt)


def format_text(result: Dict[str, object], runs: Sequence[Run], unit: str,
                confidence: float) -> str:
    lockstep = all(r.lockstep for r in runs)
    lines = [f"scaling: {conventions.plural(len(runs), 'run')}, {len(result['series'])} series "
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
    for i, s in enumerate(result["series"], 1):
        base = s["base"]
        lines += ["", f"== series {i}: {s['kind']} scaling, {s['fixed']} fixed",
                  "   configuration: " + configs.describe(s["factors"]),
                  f"   base case: {base['ranks']} rank{'s' if base['ranks'] != 1 else ''} on "
                  f"{base['nodes']} node{'s' if base['nodes'] != 1 else ''}: "
                  f"{_f(base['time_median_s'], scale=1e3)} ms per iteration, "
                  f"{_f(base['throughput'], '.1f')} samples/s "
                  f"({', '.join(b.split('/')[-1] for b in base['files'])})",
                  f"   {'ranks':>5} {'nodes':>5} {'batch':>6} {'b/rank':>6} {'runs':>4} "
                  f"{'iters':>6}  {'time/iter ms [CI]':<28}{'samples/s':>10} {'speedup':>8} "
                  f"{'ideal':>6} {'effic.':>7} {'exch.':>6}"]
        for q in s["points"]:
            ci = f"{_f(q['time_median_s'], scale=1e3)} [{_f(q['time_lo_s'], scale=1e3)}, " \
                 f"{_f(q['time_hi_s'], scale=1e3)}]"
            mark = conventions.INCOMPLETE_MARK if q["incomplete"] else ""
            share = "n/a" if q["exchange_share"] is None else f"{q['exchange_share']:.1%}"
            lines.append(f"   {q['ranks']:>5} {q['nodes']:>5} {q['batch_global']:>6} "
                         f"{q['batch_per_rank']:>6} {q['repeats']:>4} {q['iterations']:>6}  "
                         f"{ci:<28}{_f(q['throughput'], '.1f'):>10} "
                         f"{_f(q['speedup'], '.2f'):>8} {_f(q['ideal_speedup'], '.2f'):>6} "
                         f"{_f(q['efficiency'], '.2f'):>7} {share:>6}{mark}")
    if result["unmatched"]:
        lines += ["", "not in any series (no run at another scale with the same global batch "
                  "or the same per-rank batch):"]
        for q in result["unmatched"]:
            mark = conventions.INCOMPLETE_MARK if q["incomplete"] else ""
            lines.append(f"   {q['ranks']} ranks, {q['nodes']} nodes, batch {q['batch_global']}:"
                         f" {_f(q['time_median_s'], scale=1e3)} ms per iteration, "
                         f"{_f(q['throughput'], '.1f')} samples/s, {q['repeats']} run(s){mark}  "
                         + configs.describe(q["factors"]))
    notes = conventions.incomplete_lines(runs)
    if notes:
        lines += ["", "rows marked * include incomplete runs (their completed iterations are "
                  "used):"] + ["  " + n for n in notes]
    return "\n".join(lines)


# ---- figure --------------------------------------------------------------------------------
def figure(result: Dict[str, object], unit: str):
    """Four panels against p: throughput, speedup and efficiency (with the ideal) and exchange
    share. Incomplete points are drawn hollow."""
    from .plotting import plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax_tp, ax_s, ax_e, ax_x = axes.ravel()
    for i, s in enumerate(result["series"], 1):
        pts = s["points"]
        p = np.array([q["p"] for q in pts], dtype=float)
        label = f"{i}: {s['kind']}, {s['fixed']}"
        color = f"C{(i - 1) % 10}"
        hollow = [bool(q["incomplete"]) for q in pts]

        def plot(ax, values, _p=p, _c=color, _l=label, _h=hollow):
            v = np.array([np.nan if x is None else x for x in values], dtype=float)
            ax.plot(_p, v, "-", color=_c, label=_l)
            ax.scatter(_p, v, color=[("none" if h else _c) for h in _h], edgecolors=_c, zorder=3)
        plot(ax_tp, [q["throughput"] for q in pts])
        base = s["base"]
        if base["throughput"]:
            ax_tp.plot(p, base["throughput"] * p / base["p"], ":", color=color, alpha=0.7)
        plot(ax_s, [q["speedup"] for q in pts])
        plot(ax_e, [q["efficiency"] for q in pts])
        plot(ax_x, [None if q["exchange_share"] is None else 100 * q["exchange_share"]
                    for q in pts])
    allp = sorted({q["p"] for s in result["series"] for q in s["points"]})
    if allp:
        lo = min(s["base"]["p"] for s in result["series"])
        ax_s.plot(allp, [x / lo for x in allp], "k--", label="ideal (from smallest base)")
    ax_e.axhline(1.0, color="k", ls="--", label="ideal")
    ax_tp.set(title="throughput (dotted: ideal from the base case)", ylabel="samples/s")
    ax_s.set(title="speedup", ylabel="S = X_p / X_base")
    ax_e.set(title="parallel efficiency", ylabel="E = S * p_base / p", ylim=(0, None))
    ax_x.set(title="exchange share", ylabel="% of iteration time", ylim=(0, None))
    for ax in axes.ravel():
        ax.set_xlabel(unit)
        ax.grid(alpha=0.3)
        if allp:
            ax.set_xticks(allp)
    ax_tp.legend(fontsize=8)
    ax_e.legend(fontsize=8)
    fig.suptitle("dtbench scaling (hollow markers: includes incomplete runs)")
    fig.tight_layout()
    return fig


# ---- command -------------------------------------------------------------------------------
def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "scaling", help="throughput, speedup and efficiency across rank/node counts",
        description="Group runs into strong and weak scaling series and report throughput, "
                    "speedup and parallel efficiency against the base case.")
    inputs.add_inputs(p)
    p.add_argument("--unit", choices=UNITS, default="ranks",
                   help="scale p counted in ranks or nodes [ranks]")
    p.add_argument("--plot", metavar="OUT.png|OUT.svg",
                   help="write the figure to this file (PNG or SVG by its ending)")
    p.add_argument("--ignore", metavar="KEY", action="append", default=[],
                   help="configuration key to ignore when grouping (repeatable), e.g. tag")
    p.add_argument("--confidence", type=float, default=stats.DEFAULT_CONFIDENCE,
                   help="confidence level of the intervals [0.95]")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def check_confidence(value: float, report_error) -> bool:
    if not 0.5 <= value < 1.0:
        report_error(f"--confidence {value}: accepted: a level in [0.5, 1), e.g. 0.95")
        return False
    return True


def run_command(args, report_error) -> int:
    if not check_confidence(args.confidence, report_error):
        return 2
    if args.plot:
        paths, _ = inputs.expand(args.inputs)
        from .plotting import FIGURE_SUFFIXES
        err = outputs.check_output(args.plot, "--plot", FIGURE_SUFFIXES, args.overwrite, paths)
        if err:
            report_error(err)
            return 2
    runs, status = inputs.load_all(args.inputs, report_error)
    if status:
        return status
    result = find_series(runs, args.unit, args.ignore, args.confidence)
    if args.plot and not result["series"]:
        report_error(f"--plot {args.plot}: nothing to plot: no scaling series (runs at two "
                     f"or more scales with the same global or per-rank batch)")
        return 2
    if args.json:
        print(jsonout.dumps(result))
    else:
        print(format_text(result, runs, args.unit, args.confidence))
    if args.plot:
        from .plotting import save
        save(figure(result, args.unit), args.plot)
        print(f"wrote {args.plot}")
    return 0
