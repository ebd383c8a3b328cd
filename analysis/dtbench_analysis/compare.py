"""The ``compare`` command: configurations side by side, with confidence intervals and tests.

Runs are grouped by configuration (configs.py); repeats of one configuration are pooled. For each
group: time per iteration (metrics.iteration_times: the critical path per iteration for lockstep
runs, each rank's own iteration for async/mixed) as median with an order-statistic confidence
interval and p95; throughput; exchange share; the staleness distribution (when recorded);
iterations and time to the target accuracy (``--target``, else the runs' ``target_accuracy``
attribute), per repeat and as medians. Every group is tested against the baseline (the first
group, or ``--baseline N``) with a two-sided Mann-Whitney U test of the pooled per-iteration
times; with k groups the level is alpha / (k - 1) (Bonferroni). Per-iteration times of one run
are not independent draws (they share a machine state), so the repeats' own medians are listed
too: a difference smaller than their spread deserves more repeats rather than trust.

``--plot OUT.png|OUT.svg`` draws training loss and test accuracy against wall time and against
iterations, the target accuracy and when each run first reached it (the report's strategies
figure, figures_training.strategies).
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from . import configs, conventions, inputs, jsonout, metrics, outputs, stats
from .runfile import Run


def _median_of(runs: List[Run], field: str) -> Optional[float]:
    values = [r.measured(field).ravel() for r in runs if r.has(field)]
    v = np.concatenate(values) if values else np.array([])
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else None


def _exchange_payload(runs: List[Run]) -> Dict[str, object]:
    """Precision (compute, gradients on the wire) and what the exchange moved and took: the
    medians over the pooled ranks x measured iterations of ``bytes_sent`` and ``exchange``, so an
    fp32 and a bf16 gradient exchange read side by side."""
    return {"precision": configs.precision(runs[0]),
            "bytes_sent_median": _median_of(runs, "bytes_sent"),
            "exchange_median_s": _median_of(runs, "exchange")}


def _group_stats(runs: List[Run], confidence: float,
                 target: Optional[float]) -> Dict[str, object]:
    times = np.concatenate([metrics.iteration_times(r) for r in runs])
    t = stats.median_ci(times, confidence)
    first = runs[0]
    if first.lockstep:
        tp = {"median": first.batch_global / t["median"] if t["median"] else None,
              "lo": first.batch_global / t["hi"] if t["hi"] else None,
              "hi": first.batch_global / t["lo"] if t["lo"] else None,
              "method": "batch_global / median time per iteration"}
    else:
        rates = [x for x in (metrics.throughput(r)["samples_per_s"] for r in runs) if x]
        tp = {"median": float(np.median(rates)) if rates else None, "lo": None, "hi": None,
              "method": "median over repeats of the sum over ranks of batch_per_rank / "
                        "median total"}
    shares = np.concatenate([metrics.exchange_share_per_iteration(r) for r in runs])
    stale = [r.measured("staleness").ravel() for r in runs if r.has("staleness")]
    targets = []
    for r in runs:
        goal = target if target is not None else r.target_accuracy
        tt = metrics.time_to_target(r, goal)
        if tt is not None:
            targets.append(dict(tt, file=r.path))
    reached = [x for x in targets if x["reached"]]
    return {
        "files": [r.path for r in runs],
        "repeats": len(runs),
        "incomplete": [r.path for r in runs if not r.is_complete],
        "exchange": first.exchange,
        "lockstep": first.lockstep,
        "iterations": int(times.size),
        "time_s": {"median": t["median"], "lo": t["lo"], "hi": t["hi"],
                   "p95": float(np.percentile(times, 95)) if times.size else None},
        "repeat_medians_s": [float(np.median(metrics.iteration_times(r)))
                             if metrics.iteration_times(r).size else None for r in runs],
        "throughput": tp,
        "exchange_share": float(np.median(shares)) if shares.size else None,
        **_exchange_payload(runs),
        "staleness": metrics.staleness_distribution(np.concatenate(stale)) if stale else None,
        "target": {
            "runs": targets,
            "reached": len(reached), "of": len(targets),
            "iterations_median": float(np.median([x["iteration"] for x in reached]))
            if reached else None,
            "time_median_s": float(np.median([x["time_s"] for x in reached]))
            if reached else None,
        } if targets else None,
        "_times": times,
    }


def compare(runs: Sequence[Run], ignore: Sequence[str] = (), baseline: int = 1,
            alpha: float = stats.DEFAULT_ALPHA, confidence: float = stats.DEFAULT_CONFIDENCE,
            target: Optional[float] = None) -> Dict[str, object]:
    """Group, summarise and test. Returns a JSON-ready dict (``groups`` in input order, each
    with ``label`` and ``test`` against the baseline; the baseline's ``test`` is None)."""
    groups = configs.group_runs(runs, ignore)
    keys = list(groups)
    common, differing = configs.split_common(keys)
    out_groups = []
    for i, (key, members) in enumerate(groups.items()):
        g = _group_stats(members, confidence, target)
        g["label"] = configs.label(differing[i], fallback=f"group {i + 1}")
        g["differing"] = differing[i]
        out_groups.append(g)
    base_index = baseline - 1
    k = len(out_groups)
    level = alpha / max(1, k - 1)
    base = out_groups[base_index] if k else None
    for i, g in enumerate(out_groups):
        g["test"] = None if i == base_index else \
            stats.compare_samples(base["_times"], g["_times"], level)
    for g in out_groups:
        del g["_times"]
    unlike = [k for k in ("model", "dataset") if any(k in d for d in differing)]
    return {"common": common, "unlike": unlike, "groups": out_groups, "baseline": baseline, "alpha": alpha,
            "alpha_per_test": level, "confidence": confidence, "target": target}


def _ms(x) -> str:
    return "n/a" if x is None else f"{x * 1e3:.3f}"


def format_text(result: Dict[str, object], runs: Sequence[Run]) -> str:
    groups = result["groups"]
    conf = result["confidence"]
    lines = [f"compare: {conventions.plural(len(runs), 'run')} in "
             f"{conventions.plural(len(groups), 'configuration')} "
             f"(repeats of a configuration pooled)",
             "  common configuration: " + configs.describe(result["common"]),
             *([f"  WARNING: these configurations differ in {' and '.join(result['unlike'])}: "
                "their times measure different work (dtbench-analyze report compares runs "
                "only along one factor)"] if result.get("unlike") else []),
             f"  time per iteration: lockstep runs (sync, ssp): "
             f"{metrics.ITERATION_TIME_METHOD[True]}; async/mixed: "
             f"{metrics.ITERATION_TIME_METHOD[False]}",
             f"  {conventions.warmup_statement(runs)}; median [{conf:.0%} CI, order statistics],"
             f" p95 over the pooled iterations"]
    for i, g in enumerate(groups, 1):
        mark = conventions.INCOMPLETE_MARK if g["incomplete"] else ""
        t, tp = g["time_s"], g["throughput"]
        base = " (baseline)" if g["test"] is None else ""
        lines += ["", f"[{i}] {g['label']}{mark}{base}",
                  f"    runs: {conventions.repeats_statement(g['repeats'])}, {g['iterations']} "
                  f"iterations; " + ", ".join(os.path.basename(f) for f in g["files"])]
        if g["repeats"] > 1:
            lines.append("    median time per iteration of each repeat (ms): " +
                         ", ".join(_ms(x) for x in g["repeat_medians_s"]))
        lines.append(f"    time per iteration: median {_ms(t['median'])} ms "
                     f"[{_ms(t['lo'])}, {_ms(t['hi'])}], p95 {_ms(t['p95'])} ms")
        ci = "" if tp["lo"] is None else f" [{tp['lo']:.1f}, {tp['hi']:.1f}]"
        tpm = "n/a" if tp["median"] is None else f"{tp['median']:.1f}"
        lines.append(f"    throughput: {tpm} samples/s{ci}")
        share = g["exchange_share"]
        lines.append("    exchange share: " + ("n/a" if share is None else f"{share:.1%}"))
        prec, sent = g["precision"], g["bytes_sent_median"]
        lines.append(f"    precision: {prec['precision']} compute, gradients in "
                     f"{prec['grad_dtype']} on the wire; exchange median "
                     f"{_ms(g['exchange_median_s'])} ms, "
                     + ("payload n/a" if sent is None else f"payload {sent:.0f} B")
                     + " per rank per iteration (median bytes_sent)")
        st = g["staleness"]
        if st:
            counts = ", ".join(f"{k}: {v}" for k, v in list(st["counts"].items())[:12])
            lines.append(f"    staleness: median {st['median']:g}, p95 {st['p95']:g}, max "
                         f"{st['max']:g} (counts {counts})")
        else:
            lines.append("    staleness: not recorded")
        tt = g["target"]
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
        test = g["test"]
        if test and test["p"] is not None:
            verdict = "significant" if test["significant"] else "not significant"
            lines.append(f"    vs baseline: median ratio {test['median_ratio']:.3f}, Mann-Whitney"
                         f" U p = {test['p']:.3g} ({verdict} at alpha "
                         f"{result['alpha_per_test']:.3g}); P(slower than baseline) "
                         f"{test['p_b_greater']:.2f}")
        elif test:
            lines.append("    vs baseline: n/a (no measured iterations)")
    notes = conventions.incomplete_lines(runs)
    if notes:
        lines += ["", "groups marked * include incomplete runs (their completed iterations "
                  "are used):"] + ["  " + n for n in notes]
    if len(groups) > 2:
        lines.append(f"  Bonferroni: alpha {result['alpha']:g} / {len(groups) - 1} tests")
    return "\n".join(lines)


def figure(runs: Sequence[Run], result: Dict[str, object]):
    """Training loss (mean over ranks) and test accuracy against time, every run on one figure;
    colour = configuration, line style = repeat."""
    from .plotting import INCOMPLETE_NOTE, plt
    fig, (ax_l, ax_a) = plt.subplots(1, 2, figsize=(12, 4.5))
    color_of = {}
    for i, g in enumerate(result["groups"]):
        for j, f in enumerate(g["files"]):
            color_of[f] = (f"C{i % 10}", ("-", "--", ":", "-.")[j % 4], g["label"])
    any_eval = False
    for run in runs:
        color, style, label = color_of[run.path]
        name = f"{label}: {os.path.basename(run.path)}"
        if not run.is_complete:
            name += INCOMPLETE_NOTE
        end = pd.DataFrame(run.iterations["start"] + run.iterations["total"]).max().to_numpy()
        loss = pd.DataFrame(run.iterations["loss"]).mean().to_numpy()
        ok = np.isfinite(end) & np.isfinite(loss)
        ax_l.plot(end[ok], loss[ok], style, color=color, label=name, lw=1.2)
        ev = run.eval[np.isfinite(run.eval["accuracy"].to_numpy(dtype=float))]
        if not ev.empty:
            any_eval = True
            ax_a.plot(ev["time"], ev["accuracy"], style, color=color, marker="o", ms=3,
                      label=name)
    goals = {g["target"]["runs"][0]["target"] for g in result["groups"] if g["target"]}
    for goal in goals:
        ax_a.axhline(goal, color="k", ls=":", lw=1, label=f"target {goal:g}")
    if not any_eval:
        ax_a.text(0.5, 0.5, "no evaluations recorded\n(dtbench --eval-every N)",
                  ha="center", va="center", transform=ax_a.transAxes)
    ax_l.set(title="training loss (mean over ranks; warm-up included)",
             xlabel="s since start (aligned clock)", ylabel="loss")
    ax_a.set(title="test accuracy", xlabel="s since start (aligned clock)", ylabel="accuracy")
    for ax in (ax_l, ax_a):
        ax.grid(alpha=0.3)
    ax_l.legend(fontsize=7)
    if any_eval:
        ax_a.legend(fontsize=7)
    fig.tight_layout()
    return fig


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="configurations side by side: medians with CIs, Mann-Whitney U",
        description="Compare configurations (repeats pooled): time per iteration, throughput, "
                    "exchange share, staleness, time to accuracy, significance vs a baseline.")
    inputs.add_inputs(p)
    p.add_argument("--baseline", type=int, default=1, metavar="N",
                   help="the N-th configuration (in input order) is the baseline [1]")
    p.add_argument("--alpha", type=float, default=stats.DEFAULT_ALPHA,
                   help="significance level, split over the tests (Bonferroni) [0.05]")
    p.add_argument("--confidence", type=float, default=stats.DEFAULT_CONFIDENCE,
                   help="confidence level of the intervals [0.95]")
    p.add_argument("--target", type=float, metavar="ACC",
                   help="target test accuracy (0..1); default: the runs' target_accuracy")
    p.add_argument("--ignore", metavar="KEY", action="append", default=[],
                   help="configuration key to ignore when grouping repeats (repeatable)")
    p.add_argument("--plot", metavar="OUT.png|OUT.svg",
                   help="write loss and accuracy against time and iterations of every run to "
                        "this file (PNG or SVG by its ending)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def check_options(args, report_error) -> bool:
    if not 0.5 <= args.confidence < 1.0:
        report_error(f"--confidence {args.confidence}: accepted: a level in [0.5, 1), e.g. 0.95")
        return False
    if not 0.0 < args.alpha < 1.0:
        report_error(f"--alpha {args.alpha}: accepted: a level in (0, 1), e.g. 0.05")
        return False
    if args.target is not None and not 0.0 < args.target <= 1.0:
        report_error(f"--target {args.target}: accepted: an accuracy in (0, 1], e.g. 0.8")
        return False
    if args.baseline < 1:
        report_error(f"--baseline {args.baseline}: accepted: 1 .. number of configurations")
        return False
    return True


def run_command(args, report_error) -> int:
    if not check_options(args, report_error):
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
    if args.plot:
        from .figures_training import strategies
        from .plotting import save
        save(strategies(runs, args.target), args.plot)
        print(f"wrote {args.plot}")
    return 0
