"""The ``stragglers`` command: which ranks and nodes hold the others up, and what it costs.

A rank's *busy* time in an iteration is the time it did not spend waiting for other ranks:
``total - exchange_wait`` when the file records the wait, else ``total - exchange`` (in a
synchronous exchange the fast ranks wait inside it for the slowest, so the slowest rank is the one
with the most time outside the exchange, not the one with the longest ``total``). Per iteration
(measured by every rank; by any rank for async/mixed runs):
- the slowest rank is the one with the largest busy time, when it exceeds the iteration's median
  over ranks (so iterations where all ranks are equal name no one); its *excess* is its busy time
  minus that median;
- the waiting it caused is the sum over the other ranks of ``exchange_wait`` when recorded, else
  (lockstep runs) the sum over ranks of (slowest busy - rank's busy), the time they idled until
  the slowest caught up;
- load imbalance of a phase = max over ranks / mean over ranks; its median and p95 over iterations.
Ranks and nodes are ranked by how often they were the slowest, then by their total excess.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import pandas as pd

from . import configs, conventions, inputs, jsonout, metrics, outputs
from .runfile import PHASES, Run


def analyse(run: Run) -> Dict[str, object]:
    """Everything the command reports for one run, as a JSON-ready dict (seconds)."""
    cols = metrics.iteration_columns(run)
    b = metrics.busy(run)[:, cols]
    n_iter = int(cols.sum())
    out: Dict[str, object] = {
        "file": run.path, "complete": run.is_complete, "incomplete": run.completeness_note(),
        "nranks": run.nranks, "nnodes": run.nnodes, "iterations": n_iter,
        "busy_definition": ("total - exchange_wait" if run.has("exchange_wait")
                            else "total - exchange"),
        "wait_source": ("recorded exchange_wait of the other ranks" if run.has("exchange_wait")
                        else "sum over ranks of (slowest busy - busy), estimated"
                        if run.lockstep else None),
    }
    ranks = run.ranks[["rank", "host", "node"]].reset_index(drop=True).copy()
    if n_iter == 0 or run.nranks < 2:
        out.update({"ranks": [], "nodes": [], "imbalance": {}, "injected_delay_s": None})
        return out

    with np.errstate(all="ignore"):
        filled = np.where(np.isfinite(b), b, -np.inf)
        slowest = filled.argmax(axis=0)
        top = filled.max(axis=0)
        median = np.nanmedian(b, axis=0)
        excess = top - median
        has_slowest = np.isfinite(top) & (excess > 0)
        if run.has("exchange_wait"):
            wait = run.measured("exchange_wait")[:, cols]
            wait_caused = np.nansum(wait, axis=0) - \
                np.where(has_slowest, wait[slowest, np.arange(b.shape[1])], 0.0)
        elif run.lockstep:
            wait_caused = np.nansum(top[None, :] - b, axis=0)
        else:
            wait_caused = np.full(b.shape[1], np.nan)
    busy_median = pd.DataFrame(b.T).median().to_numpy()

    rows: List[Dict[str, object]] = []
    for pos in range(run.nranks):
        mine = has_slowest & (slowest == pos)
        rows.append({
            "rank": int(ranks["rank"][pos]), "host": str(ranks["host"][pos]),
            "node": int(ranks["node"][pos]),
            "slowest_count": int(mine.sum()),
            "slowest_share": float(mine.sum() / n_iter),
            "median_excess_s": float(np.median(excess[mine])) if mine.any() else 0.0,
            "total_excess_s": float(excess[mine].sum()),
            "wait_caused_s": float(np.nansum(wait_caused[mine])) if run.lockstep or
            run.has("exchange_wait") else None,
            "busy_median_s": float(busy_median[pos]),
        })
    table = pd.DataFrame(rows)
    table = table.sort_values(["slowest_count", "total_excess_s", "rank"],
                              ascending=[False, False, True])
    out["ranks"] = table.to_dict("records")

    node_rows = []
    for node, part in pd.DataFrame(rows).groupby("node", sort=True):
        node_rows.append({
            "node": int(node), "hosts": ",".join(sorted(set(part["host"]))),
            "ranks": [int(x) for x in part["rank"]],
            "slowest_count": int(part["slowest_count"].sum()),
            "slowest_share": float(part["slowest_count"].sum() / n_iter),
            "total_excess_s": float(part["total_excess_s"].sum()),
            "wait_caused_s": None if part["wait_caused_s"].isna().any()
            else float(part["wait_caused_s"].sum()),
            "busy_median_s": float(part["busy_median_s"].median()),
        })
    out["nodes"] = sorted(node_rows, key=lambda r: (-r["slowest_count"], -r["total_excess_s"],
                                                    r["node"]))
    out["iterations_with_slowest"] = int(has_slowest.sum())
    out["wait_caused_total_s"] = float(np.nansum(wait_caused)) \
        if np.isfinite(wait_caused).any() else None
    out["imbalance"] = imbalance(run, cols)
    if run.has("straggler_delay"):
        delay = pd.DataFrame(run.measured("straggler_delay").T).sum().to_numpy()
        out["injected_delay_s"] = {int(r): float(d) for r, d in zip(ranks["rank"], delay)
                                   if d > 0}
    else:
        out["injected_delay_s"] = None
    return out


def imbalance(run: Run, cols: np.ndarray) -> Dict[str, Dict[str, float]]:
    """Per phase (and busy): median and p95 over iterations of max over ranks / mean over ranks."""
    out = {}
    fields = {p: run.measured(p) for p in PHASES}
    fields["busy"] = metrics.busy(run)
    for name, values in fields.items():
        v = values[:, cols]
        with np.errstate(all="ignore"):
            ratio = np.nanmax(v, axis=0) / np.nanmean(v, axis=0)
        ratio = ratio[np.isfinite(ratio)]
        if ratio.size:
            out[name] = {"median": float(np.median(ratio)),
                         "p95": float(np.percentile(ratio, 95))}
    return out


def _ms(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x * 1e3:.3f}"


def _s(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"


def format_text(a: Dict[str, object], run: Run, top: int = 10) -> str:
    lines = [f"== {a['file']}"]
    if a["incomplete"]:
        lines += [f"INCOMPLETE: {a['incomplete']}",
                  "  (only the iterations the ranks completed are used)"]
    lines.append("  configuration: " + configs.describe(configs.configuration(run)))
    if run.nranks < 2:
        lines.append("  1 rank: no other rank to be slower than")
        return "\n".join(lines)
    if not a["iterations"]:
        lines.append("  no iteration measured by every rank: nothing to attribute")
        return "\n".join(lines)
    scope = "measured by every rank" if run.lockstep else "measured by any rank (ranks not " \
        "in lockstep: iteration i of each rank)"
    lines.append(f"  {a['iterations']} iterations {scope}; {conventions.warmup_statement([run])};"
                 f" busy = {a['busy_definition']}; slowest = largest busy time, when above the "
                 f"iteration's median over ranks; excess = its busy minus that median")
    if a["wait_source"]:
        lines.append(f"  waiting caused = {a['wait_source']}")
    lines.append("")
    lines.append(f"  {'rank':>5} {'node':>5} {'host':<14}{'slowest':>12} {'median excess ms':>17}"
                 f" {'total excess s':>15} {'wait caused s':>14} {'median busy ms':>15}")
    for r in a["ranks"][:top]:
        lines.append(f"  {r['rank']:>5} {r['node']:>5} {r['host'][:13]:<14}"
                     f"{r['slowest_count']:>6}/{a['iterations']:<5}"
                     f" {_ms(r['median_excess_s']):>17} {_s(r['total_excess_s']):>15}"
                     f" {_s(r['wait_caused_s']):>14} {_ms(r['busy_median_s']):>15}")
    if len(a["ranks"]) > top:
        lines.append(f"  ... {len(a['ranks']) - top} more ranks (--top N, or --json)")
    if run.nnodes > 1:
        lines.append("")
        lines.append(f"  {'node':>5} {'hosts':<20}{'slowest':>12} {'total excess s':>15} "
                     f"{'wait caused s':>14} {'median busy ms':>15}")
        for n in a["nodes"][:top]:
            lines.append(f"  {n['node']:>5} {n['hosts'][:19]:<20}"
                         f"{n['slowest_count']:>6}/{a['iterations']:<5}"
                         f" {_s(n['total_excess_s']):>15} {_s(n['wait_caused_s']):>14}"
                         f" {_ms(n['busy_median_s']):>15}")
    lines.append("")
    lines.append("  load imbalance (max / mean over ranks, per iteration):  median    p95")
    for name, v in a["imbalance"].items():
        lines.append(f"    {name:<10}{v['median']:>42.3f}{v['p95']:>7.3f}")
    if a["injected_delay_s"] is not None:
        inj = ", ".join(f"rank {r}: {d:.3f} s" for r, d in a["injected_delay_s"].items())
        lines.append(f"  injected straggler delay (recorded): {inj or 'none'}")
    lines.append("")
    lines.append("  " + verdict(a))
    return "\n".join(lines)


def verdict(a: Dict[str, object]) -> str:
    """One sentence naming the worst rank (or saying there is none)."""
    if not a["ranks"] or a["ranks"][0]["slowest_count"] == 0:
        return "no rank was slower than the median of its iteration"
    r = a["ranks"][0]
    caused = "" if r["wait_caused_s"] is None else \
        f"; the others waited {r['wait_caused_s']:.3f} s for it"
    return (f"slowest: rank {r['rank']} (node {r['node']}, {r['host']}) in {r['slowest_count']} "
            f"of {a['iterations']} iterations ({r['slowest_share']:.0%}), by "
            f"{r['median_excess_s'] * 1e3:.3f} ms (median){caused}")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("stragglers", help="ranks and nodes ranked by how much they were "
                              "the slowest; load imbalance per phase",
                              description="Find the ranks and nodes that hold the others up.")
    inputs.add_inputs(p)
    p.add_argument("--top", type=int, default=10, help="ranks and nodes listed per run [10]")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--plot", metavar="OUT.png|OUT.svg",
                   help="write ranks x iterations heat maps (iteration time, exchange wait) of "
                        "the run with the most ranks to this file")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    if args.top < 1:
        report_error(f"--top {args.top}: accepted: a positive number of ranks")
        return 2
    from .summary import plot_allowed
    if args.plot and not plot_allowed(args, report_error):
        return 2
    runs, status = inputs.load_all(args.inputs, report_error)
    if status:
        return status
    results = [analyse(r) for r in runs]
    if args.json:
        print(jsonout.dumps(results[0] if len(results) == 1 else results))
    else:
        print("\n\n".join(format_text(a, r, args.top) for a, r in zip(results, runs)))
    if args.plot:
        from . import figures
        from .plotting import save
        run = figures.pick_rank_run(runs)
        if run is None:
            report_error(f"--plot {args.plot}: nothing to plot: no run has a completed "
                         f"iteration")
            return 2
        save(figures.heatmaps(run), args.plot)
        if not args.json:
            print(f"wrote {args.plot} (heat maps of {run.path})")
    return 0

