"""The ``summary`` command: one run's factors, phase times, throughput and health at a glance.

``summarize(run)`` builds a JSON-ready dict (times in ms); ``format_text`` renders the same dict for
people, so the text and ``--json`` outputs always agree. Besides the pooled phase statistics it
gives per-rank statistics (median and p95 of total, median busy and exchange time per rank) and,
when the run sampled power (/samples), energy per sample (energy.py).
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from . import configs, energy, inputs, jsonout, metrics, outputs
from .runfile import PHASES, STATUS_NAMES, Run

MS = 1e3

DEFINITIONS = {
    "phases": "over all ranks x measured iterations (warm-up and unwritten iterations excluded); "
              "percentiles by linear interpolation",
    "throughput": "batch_global / median over iterations of the critical path "
                  "(critical path = max over ranks of total, iterations measured by every rank)",
    "exchange_share": "median over iterations of (sum over ranks of exchange) / "
                      "(sum over ranks of total), iterations measured by every rank; exchange "
                      "= arrival wait (exchange_wait: blocked until the last rank ends "
                      "backward) + transfer (the rest); transfer and wait: the same median "
                      "for each part alone",
    "slowest_rank": "rank with the highest median total, vs the median of the per-rank medians",
    "per_rank": "per rank, over its measured iterations: median and p95 of total, median of busy "
                "(total minus exchange_wait when recorded, else minus exchange) and of exchange",
    "exchange_efficiency": "calibration_exchange_s (the transport's collectives timed alone on the "
                           "run's buckets before training) / median recorded transfer "
                           "(exchange - exchange_wait: the arrival wait is load imbalance, not "
                           "the library's work); below 0.9 the transfer costs more than the "
                           "library's collectives. "
                           "busbw: median bytes_sent / median (exchange - exchange_wait) x "
                           "calibration_busbw_factor (nccl-tests' bus bandwidth); bytes are "
                           "those on the wire (half of fp32's with --grad-dtype bf16/fp16)",
    "oversubscribed": "dtbench found more ranks x threads (--threads, plus a --progress thread) on "
                      "a host than it has online cores (root attribute oversubscribed); "
                      "host_ranks_max and host_cores as recorded",
    "energy": "integral of sampled power over each rank's measured iterations (trapezoid rule), "
              "summed over ranks, / samples those ranks processed (batch_per_rank each)",
}

#: per-rank columns of metrics.per_rank_table in seconds (reported in ms, suffix _ms)
TIME_COLUMNS = ("total_median", "total_p95", "busy_median", "exchange_median", "wait_median")
#: per-rank table rows printed in the text output; the JSON output has every rank
MAX_RANK_ROWS = 16


def _ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else seconds * MS


EFFICIENCY_WARN = 0.9


def _exchange_efficiency(run: Run, exchange_ms: Optional[float]) -> Optional[Dict[str, object]]:
    # efficiency: library / median transfer (exchange - exchange_wait), as calibration.py and
    # the busbw below; the arrival wait is not the library's work (docs/exchange.md)
    """The calibration stored by dtbench (issue 12) against the recorded exchange; None when the
    run holds no calibration (older files, --calibrate-iters 0, one rank)."""
    lib = run.attrs.get("calibration_exchange_s")
    if lib is None or not np.isfinite(lib) or int(run.attrs.get("calibration_iters", 0)) <= 0:
        return None
    d = run.measured("exchange")
    if run.has("exchange_wait"):  # older files hold no wait: all of the exchange is transfer
        d = d - run.measured("exchange_wait")
    d = d[np.isfinite(d)]
    sent = run.measured("bytes_sent")
    sent = sent[np.isfinite(sent)]
    xfer = float(np.median(d)) if d.size else None
    factor = float(run.attrs.get("calibration_busbw_factor", float("nan")))
    busbw = (float(np.median(sent)) / xfer * factor
             if xfer and xfer > 0 and sent.size and np.isfinite(factor) else None)
    eff = lib / xfer if xfer else None
    return {"library_ms": lib * MS, "recorded_ms": exchange_ms,
            "transfer_ms": None if xfer is None else xfer * MS, "efficiency": eff,
            "warn": eff is not None and eff < EFFICIENCY_WARN,
            "calibration_busbw": run.attrs.get("calibration_busbw"), "recorded_busbw": busbw}


def _oversubscribed(run: Run) -> Optional[Dict[str, int]]:
    """dtbench's record that ranks x threads outnumbered a host's cores (root attributes
    oversubscribed, host_ranks_max, host_cores); None when not, or in older files."""
    if not int(run.attrs.get("oversubscribed", 0)):
        return None
    return {"host_ranks_max": int(run.attrs.get("host_ranks_max", 0)),
            "host_cores": int(run.attrs.get("host_cores", 0))}


def summarize(run: Run) -> Dict[str, object]:
    """Everything ``summary`` reports, as a JSON-serialisable dict (times in ms)."""
    measured = run.ranks["measured"].to_numpy()
    phases = {p: {k: (v if k == "n" or v is None else v * MS)
                  for k, v in metrics.distribution(run.measured(p)).items()} for p in PHASES}
    tp = metrics.throughput(run)
    share = metrics.exchange_share(run)
    slow = metrics.slowest_rank(run)
    record = metrics.distribution(run.measured("record"))
    table = metrics.per_rank_table(run)
    for key, values in energy.sampler_per_rank(run).items():
        table[key] = values
    per_rank = []
    for row in table.to_dict("records"):
        entry = {"rank": int(row["rank"]), "host": str(row["host"]), "node": int(row["node"]),
                 "measured": int(row["measured"])}
        for k, v in row.items():
            if k in entry:
                continue
            v = None if v is None or not np.isfinite(v) else float(v)
            if k in TIME_COLUMNS:
                entry[k + "_ms"] = None if v is None else v * MS
            else:
                entry[k] = v
        per_rank.append(entry)
    sent = metrics.distribution(run.measured("bytes_sent"))
    return {
        "file": run.path,
        "complete": run.is_complete,
        "incomplete": run.completeness_note(),
        "finished": run.finished,
        "stop_reason": run.stop_reason,
        "start_time": run.attrs.get("start_time"),
        "end_time": run.attrs.get("end_time"),
        "factors": run.factors,
        "precision": configs.precision(run),
        "iterations": {
            "configured": run.iters,
            "warmup_excluded": run.warmup,
            "iters_total": run.iters_total,
            "measured_per_rank_min": int(measured.min()) if measured.size else 0,
            "measured_per_rank_max": int(measured.max()) if measured.size else 0,
            "measured_by_all_ranks": int(run.measured_by_all.sum()),
        },
        "ranks": [{"rank": int(r), "host": str(h), "completed": int(c), "measured": int(m),
                   "status": int(s), "status_name": STATUS_NAMES.get(int(s), "unknown")}
                  for r, h, c, m, s in zip(run.ranks["rank"], run.ranks["host"],
                                           run.ranks["completed"], measured, run.ranks["status"])],
        "phases_ms": phases,
        "throughput": {"samples_per_s": tp["samples_per_s"],
                       "critical_path_median_ms": _ms(tp["critical_path_median_s"]),
                       "iterations": tp["iterations"], "method": tp["method"]},
        "exchange_share": share,
        "exchange_efficiency": _exchange_efficiency(run, phases["exchange"]["median"]),
        "oversubscribed": _oversubscribed(run),
        "slowest_rank": None if slow is None else {
            "rank": slow["rank"], "host": slow["host"],
            "median_total_ms": _ms(slow["median_total_s"]),
            "median_of_ranks_ms": _ms(slow["median_of_ranks_s"]), "ratio": slow["ratio"]},
        "bytes_sent_median": sent["median"],
        "per_rank": per_rank,
        "energy": energy.energy_summary(run),
        "final_eval": metrics.final_eval(run),
        "recorder": {"record_median_ms": _ms(record["median"]),
                     "record_mean_ms": _ms(record["mean"]),
                     "timer_overhead_s": run.attrs.get("timer_overhead_s")},
        "definitions": DEFINITIONS,
    }


def _num(value: Optional[float], fmt: str = ".3f") -> str:
    return "n/a" if value is None or not np.isfinite(value) else format(value, fmt)


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e3), ("us", 1e6)):
        if abs(seconds) >= 1.0 / scale:
            return f"{seconds * scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _bytes(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def format_text(s: Dict[str, object]) -> str:
    """Render a ``summarize`` dict as the human-readable summary."""
    f, it = s["factors"], s["iterations"]
    lines: List[str] = [f"== {s['file']}"]
    if s["incomplete"]:
        lines.append(f"INCOMPLETE: {s['incomplete']}")
        lines.append("  (statistics below use only the iterations each rank completed)")
    lines.append("  " + "  ".join(f"{k}={f[k]}" for k in ("model", "dataset", "exchange",
                                                          "device", "tag")))
    lines.append(f"  nranks={f['nranks']}  nnodes={f['nnodes']}  batch_global={f['batch_global']}"
                 f"  batch_per_rank={f['batch_per_rank']}")
    prec = s.get("precision") or {}
    lines.append(f"  precision={prec.get('precision', 'fp32')} (compute)  "
                 f"grad_dtype={prec.get('grad_dtype', 'fp32')} (gradients on the wire)")
    lo, hi = it["measured_per_rank_min"], it["measured_per_rank_max"]
    got = f"{lo}" if lo == hi else f"{lo}-{hi}"
    lines.append(f"  iterations measured: {got} per rank (configured {it['configured']}); "
                 f"the first {it['warmup_excluded']} warm-up iterations are excluded "
                 f"from all statistics")
    lines.append("")
    n = s["phases_ms"]["total"]["n"]
    lines.append(f"  {'phase (ms)':<12}{'median':>10}{'p5':>10}{'p95':>10}{'mean':>10}"
                 f"   over {n} rank-iterations")
    for phase in PHASES:
        row = s["phases_ms"][phase]
        lines.append(f"  {phase:<12}" + "".join(f"{_num(row[k]):>10}"
                                                for k in ("median", "p5", "p95", "mean")))
    lines += _per_rank_lines(s)
    lines.append("")
    tp = s["throughput"]
    if tp["critical_path_median_ms"] is not None or tp["samples_per_s"] is None:
        lines.append(f"  throughput: {_num(tp['samples_per_s'], '.1f')} samples/s = batch_global"
                     f" / median critical path {_num(tp['critical_path_median_ms'])} ms "
                     f"(critical path = max over ranks of total per iteration; "
                     f"{tp['iterations']} iterations measured by every rank)")
    else:
        lines.append(f"  throughput: {_num(tp['samples_per_s'], '.1f')} samples/s = "
                     f"{tp['method']} (exchange={f['exchange']}: ranks do not advance in "
                     f"lockstep)")
    sh = s["exchange_share"]
    pct = lambda v: _num(None if v is None else v * 100, '.1f')  # noqa: E731
    parts = ("" if sh.get("transfer") is None else
             f"; transfer {pct(sh['transfer'])}%, arrival wait {pct(sh['wait'])}%")
    lines.append(f"  exchange share: {pct(sh['median'])}% (median over iterations of "
                 f"sum-over-ranks exchange / sum-over-ranks total{parts})")
    eff = s.get("exchange_efficiency")
    if eff:
        bw = "" if eff["recorded_busbw"] is None else (
            f"; busbw {eff['recorded_busbw'] / 1e9:.3g} GB/s recorded vs "
            f"{(eff['calibration_busbw'] or 0) / 1e9:.3g} GB/s alone")
        lines.append(f"  exchange efficiency: {_num(eff['efficiency'], '.2f')} (library alone "
                     f"{_num(eff['library_ms'])} ms / recorded {_num(eff['transfer_ms'])} ms median "
                     f"transfer; median exchange with the wait {_num(eff['recorded_ms'])} ms{bw})")
        if eff["warn"]:
            lines.append(f"  WARNING: exchange efficiency below {EFFICIENCY_WARN}: the recorded "
                         f"transfer costs more than the library's collectives alone; the "
                         f"transfer share overstates communication")
    over = s.get("oversubscribed")
    if over:
        lines.append(f"  WARNING: oversubscribed: up to {over['host_ranks_max']} ranks on a host "
                     f"of {over['host_cores']} cores; ranks shared cores, so each rank's phases "
                     f"(the exchange above all) include other ranks' compute: read the iteration, "
                     f"not the exchange share")
    slow = s["slowest_rank"]
    if slow:
        pct = "" if slow["ratio"] is None else f" ({(slow['ratio'] - 1) * 100:+.1f}%)"
        lines.append(f"  slowest rank: {slow['rank']} on {slow['host']}, median total "
                     f"{_num(slow['median_total_ms'])} ms vs {_num(slow['median_of_ranks_ms'])} ms"
                     f" median of all ranks' medians{pct}")
    else:
        lines.append("  slowest rank: n/a (no measured iterations)")
    wire = (s.get("precision") or {}).get("grad_dtype", "fp32")
    lines.append(f"  exchange payload: {_bytes(s['bytes_sent_median'])} per rank per iteration "
                 f"(median bytes_sent; gradients in {wire} on the wire)")
    ev = s["final_eval"]
    if ev:
        loss = "" if ev["loss"] is None else f", loss {ev['loss']:.4g}"
        lines.append(f"  final evaluation: accuracy {ev['accuracy']:.4f} after iteration "
                     f"{ev['iteration']}{loss}")
    else:
        lines.append("  final evaluation: none recorded")
    en = s["energy"]
    if en:
        part = "" if en["ranks_sampled"] == en["nranks"] else \
            f" ({en['ranks_sampled']} of {en['nranks']} ranks sampled)"
        cover = "" if en["min_coverage"] >= 0.999 else \
            f"; samples cover only {en['min_coverage']:.0%} of a rank's measured time, " \
            f"extrapolated at its mean power"
        lines.append(f"  energy: {_num(en['joules_per_sample'], '.4g')} J per sample = "
                     f"{_num(en['energy_j'], '.4g')} J over {en['samples']} samples in the "
                     f"measured iterations{part}{cover}")
    rec = s["recorder"]
    lines.append(f"  recorder cost: median record {_num(rec['record_median_ms'], '.4f')} ms, "
                 f"mean {_num(rec['record_mean_ms'], '.4f')} ms per iteration (not in total); "
                 f"timer overhead {_duration(rec['timer_overhead_s'])} per timestamp")
    return "\n".join(lines)


def _per_rank_lines(s: Dict[str, object]) -> List[str]:
    """The per-rank table (at most MAX_RANK_ROWS rows: the slowest first when cut)."""
    rows = s["per_rank"]
    if len(rows) < 2:
        return []
    extra = [k for k in ("wait_median_ms", "staleness_median", "power_median_w",
                         "memory_max_mib", "utilization_median") if k in rows[0]]
    heads = {"wait_median_ms": "wait ms", "staleness_median": "stale",
             "power_median_w": "power W", "memory_max_mib": "mem MiB",
             "utilization_median": "util"}
    shown = rows
    note = ""
    if len(rows) > MAX_RANK_ROWS:
        shown = sorted(rows, key=lambda r: -(r["total_median_ms"] or 0))[:MAX_RANK_ROWS]
        note = f"  ... {len(rows) - MAX_RANK_ROWS} more ranks (the slowest shown; --json: all)"
    out = ["", f"  per rank (ms, over each rank's measured iterations; busy = total minus "
               f"{'exchange_wait' if 'wait_median_ms' in rows[0] else 'exchange'}):",
           f"  {'rank':>5} {'node':>5} {'host':<14}{'iters':>6}{'total med':>11}{'total p95':>11}"
           f"{'busy med':>10}{'exch med':>10}" + "".join(f"{heads[k]:>10}" for k in extra)]
    for r in shown:
        out.append(f"  {r['rank']:>5} {r['node']:>5} {r['host'][:13]:<14}{r['measured']:>6}"
                   f"{_num(r['total_median_ms']):>11}{_num(r['total_p95_ms']):>11}"
                   f"{_num(r['busy_median_ms']):>10}{_num(r['exchange_median_ms']):>10}" +
                   "".join(f"{_num(r[k], '.1f'):>10}" for k in extra))
    if note:
        out.append(note)
    return out


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("summary", help="factors, phase times, throughput of each run",
                              description="Summarise dtbench result files.")
    inputs.add_inputs(p)
    p.add_argument("--json", action="store_true",
                   help="print a JSON object (an array of them for several files)")
    p.add_argument("--plot", metavar="OUT.png|OUT.svg",
                   help="write where the time goes (stacked phases per run) to this file")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    """Summarise each file; report_error(msg) is called for each unreadable one. Returns the
    exit status: 0, or 2 when any file could not be read (the others are still summarised)."""
    if args.plot and not plot_allowed(args, report_error):
        return 2
    runs, status = inputs.load_all(args.inputs, report_error)
    results = [summarize(r) for r in runs]
    several = len(inputs.expand(args.inputs)[0]) > 1
    if args.json:
        if results or several:
            payload = results if several else results[0]
            print(jsonout.dumps(payload))
    elif results:
        print("\n\n".join(format_text(r) for r in results))
    if args.plot and runs:
        from . import figures, tables
        from .plotting import save
        save(figures.breakdown(tables.phases(runs, summaries=results)), args.plot)
        if not args.json:
            print(f"wrote {args.plot}")
    return status


def plot_allowed(args, report_error) -> bool:
    """Check ``--plot`` before any work (suffix, folder, no overwrite, not an input)."""
    from .plotting import FIGURE_SUFFIXES
    err = outputs.check_output(args.plot, "--plot", FIGURE_SUFFIXES, args.overwrite,
                               inputs.expand(args.inputs)[0])
    if err:
        report_error(err)
    return err is None
