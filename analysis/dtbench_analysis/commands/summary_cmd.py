"""``dtbench-analyze summary FILES``: each run's summary.summarize as text (or JSON), and where
the time goes (``--plot``)."""

from __future__ import annotations

from typing import List, Optional

from .. import inputs, jsonout
from ..runfile import PHASES
from ..summary import (OVERHEAD_OF_ITERATION, WAIT_FLOOR_S, WAIT_SHARE, ExchangeEfficiency,
                       LayerProfile, Loading, MemoryPerRank, Summary, summarize)
from ..units import num
from . import common

#: per-rank table rows printed in the text output; the JSON output has every rank
MAX_RANK_ROWS = 16
#: layers printed under "top layers" (--profile-layers); the JSON output has every layer
MAX_LAYER_ROWS = 5


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


def format_text(s: Summary) -> str:
    """The human-readable summary."""
    f, it = s.factors, s.iterations
    lines: List[str] = [f"== {s.file}"]
    if s.incomplete:
        lines.append(f"INCOMPLETE: {s.incomplete}")
        lines.append("  (statistics below use only the iterations each rank completed)")
    lines.append("  " + "  ".join(f"{k}={f[k]}" for k in ("model", "dataset", "exchange",
                                                          "device", "tag")))
    lines.append(f"  nranks={f['nranks']}  nnodes={f['nnodes']}  batch_global={f['batch_global']}"
                 f"  batch_per_rank={f['batch_per_rank']}")
    prec = s.precision
    lines.append(f"  precision={prec.get('precision', 'fp32')} (compute)  "
                 f"grad_dtype={prec.get('grad_dtype', 'fp32')} (gradients on the wire)")
    lo, hi = it.measured_per_rank_min, it.measured_per_rank_max
    got = f"{lo}" if lo == hi else f"{lo}-{hi}"
    lines.append(f"  iterations measured: {got} per rank (configured {it.configured}); "
                 f"the first {it.warmup_excluded} warm-up iterations are excluded "
                 f"from all statistics")
    lines.append("")
    n = s.phases_ms["total"]["n"]
    lines.append(f"  {'phase (ms)':<12}{'median':>10}{'p5':>10}{'p95':>10}{'mean':>10}"
                 f"   over {n} rank-iterations")
    for phase in PHASES:
        row = s.phases_ms[phase]
        lines.append(f"  {phase:<12}" + "".join(f"{num(row[k]):>10}"
                                                for k in ("median", "p5", "p95", "mean")))
    lines += _per_rank_lines(s)
    lines.append("")
    tp = s.throughput
    tokens = "" if "tokens_per_s" not in tp else f" ({num(tp.tokens_per_s, '.1f')} tokens/s)"
    if tp.get("basis") == "wall" and tp.critical_path_median_ms is not None:
        lines.append(f"  throughput: {num(tp.samples_per_s, '.1f')} samples/s{tokens} = "
                     f"batch_global / median wall time per iteration {num(tp.wall_median_ms)} ms "
                     f"(the host's time outside total: the median critical path of total, "
                     f"{num(tp.critical_path_median_ms)} ms, is over 2% shorter; "
                     f"{tp.iterations} iterations measured by every rank)")
    elif tp.critical_path_median_ms is not None or tp.samples_per_s is None:
        lines.append(f"  throughput: {num(tp.samples_per_s, '.1f')} samples/s{tokens} = "
                     f"batch_global / median critical path {num(tp.critical_path_median_ms)} ms "
                     f"(critical path = max over ranks of total per iteration; "
                     f"{tp.iterations} iterations measured by every rank)")
    else:
        lines.append(f"  throughput: {num(tp.samples_per_s, '.1f')} samples/s{tokens} = "
                     f"{tp.method} (exchange={f['exchange']}: ranks do not advance in "
                     f"lockstep)")
    lines += _work_lines(tp)
    sh = s.exchange_share
    pct = lambda v: num(None if v is None else v * 100, '.1f')  # noqa: E731
    parts = ("" if sh.get("transfer") is None else
             f"; transfer {pct(sh['transfer'])}%, arrival wait {pct(sh['wait'])}%")
    lines.append(f"  exchange share: {pct(sh['median'])}% (median over iterations of "
                 f"sum-over-ranks exchange / sum-over-ranks total{parts})")
    eff = s.exchange_efficiency
    if eff:
        lines += _efficiency_lines(eff)
    over = s.oversubscribed
    if over:
        lines.append(f"  WARNING: oversubscribed: up to {over['host_ranks_max']} ranks on a host "
                     f"of {over['host_cores']} cores; ranks shared cores, so each rank's phases "
                     f"(the exchange above all) include other ranks' compute: read the iteration, "
                     f"not the exchange share")
    slow = s.slowest_rank
    if slow:
        pct = "" if slow.ratio is None else f" ({(slow.ratio - 1) * 100:+.1f}%)"
        lines.append(f"  slowest rank: {slow.rank} on {slow.host}, median total "
                     f"{num(slow.median_total_ms)} ms vs {num(slow.median_of_ranks_ms)} ms"
                     f" median of all ranks' medians{pct}")
    else:
        lines.append("  slowest rank: n/a (no measured iterations)")
    wire = s.precision.get("grad_dtype", "fp32")
    lines.append(f"  exchange payload: {_bytes(s.bytes_sent_median)} per rank per iteration "
                 f"(median bytes_sent; gradients in {wire} on the wire)")
    if s.collectives:
        c = s.collectives
        where = "forward and backward" if f["exchange"] == "zero3" else "exchange"
        across = "" if "allreduce_ms" not in c else \
            f", allreduce across nodes {num(c.allreduce_ms)} ms ({_bytes(c.allreduce_bytes)})"
        lines.append(f"  collectives: reduce-scatter {num(c.reduce_scatter_ms)} ms "
                     f"({_bytes(c.reduce_scatter_bytes)}), all-gather {num(c.allgather_ms)} ms "
                     f"({_bytes(c.allgather_bytes)}){across} per rank per iteration (medians; "
                     f"inside {where})")
    if s.memory:
        lines += _memory_lines(s.memory)
    if s.loading:
        lines.append(_loading_line(s.loading))
    ev = s.final_eval
    if ev:
        loss = "" if ev["loss"] is None else f", loss {ev['loss']:.4g}"
        lines.append(f"  final evaluation: accuracy {ev['accuracy']:.4f} after iteration "
                     f"{ev['iteration']}{loss}")
    else:
        lines.append("  final evaluation: none recorded")
    en = s.energy
    if en:
        part = "" if en["ranks_sampled"] == en["nranks"] else \
            f" ({en['ranks_sampled']} of {en['nranks']} ranks sampled)"
        cover = "" if en["min_coverage"] >= 0.999 else \
            f"; samples cover only {en['min_coverage']:.0%} of a rank's measured time, " \
            f"extrapolated at its mean power"
        lines.append(f"  energy: {num(en['joules_per_sample'], '.4g')} J per sample = "
                     f"{num(en['energy_j'], '.4g')} J over {en['samples']} samples in the "
                     f"measured iterations{part}{cover}")
    if s.layers:
        lines += _layer_lines(s.layers)
    rec = s.recorder
    lines.append(f"  recorder cost: median record {num(rec.record_median_ms, '.4f')} ms, "
                 f"mean {num(rec.record_mean_ms, '.4f')} ms per iteration (not in total); "
                 f"timer overhead {_duration(rec.timer_overhead_s)} per timestamp")
    return "\n".join(lines)


def _memory_lines(m: MemoryPerRank) -> List[str]:
    """The plan's memory per rank, the measured peak where the file has it, and what the
    report's memory figure draws: memory per rank against the median time per iteration."""
    plan = "the plan's: not in this file" if all(
        x is None for x in (m.params_mib, m.grads_mib, m.optimizer_mib)) else (
        f"parameters {num(m.params_mib, '.1f')} MiB, gradients {num(m.grads_mib, '.1f')} MiB, "
        f"optimizer state {num(m.optimizer_mib, '.1f')} MiB, {num(m.total_mib, '.1f')} MiB in "
        f"all (the plan's; the largest rank)")
    if "peak_resident_max_mib" in m:
        peak = (f"measured peak resident {num(m.peak_resident_max_mib, '.1f')} MiB (the largest "
                f"rank; ranks {num(m.peak_resident_min_mib, '.1f')}-"
                f"{num(m.peak_resident_max_mib, '.1f')} MiB)")
    else:
        peak = "measured peak: not in this file (an older dtbench)"
    return [f"  memory per rank: {plan}; {peak}",
            f"  memory against time: {num(m.shown_mib, '.1f')} MiB per rank ({m.basis or 'n/a'}) "
            f"at {num(m.time_per_iteration_ms)} ms per iteration (median)"]


def _work_lines(tp) -> List[str]:
    """tokens/s's definition and the MFU with its terms, where the file records them."""
    lines = []
    if "tokens_per_s" in tp:
        lines.append(f"  tokens/s = samples/s x {tp.tokens_per_sample} tokens per sample (the "
                     f"sequence length)")
    if "mfu" in tp:
        lines.append(f"  MFU: {num(tp.mfu, '.2%')} = {tp.train_flops_per_sample / 1e9:.4g} GFLOP "
                     f"per sample (forward + backward) x samples/s / ({tp.peak_flops / 1e9:.4g} "
                     f"GFLOP/s peak x {tp.devices} device(s) that compute)")
        lines.append(f"    peak: {tp.peak_flops_source or 'source not recorded'}")
    return lines


def _loading_line(ld: Loading) -> str:
    """Where the batches were made, and whether the loader kept up with the step."""
    if not ld.prefetch:
        return (f"  data loading: on the driver's thread, inside data: "
                f"{num(ld.load_median_ms, '.3f')} ms per batch (median)")
    kept = ("it kept up: no step waited for its batch" if ld.waited == 0 else
            f"the step waited for its batch in {ld.waited} of {ld.measured} rank-iterations "
            f"(median {num(ld.wait_median_ms, '.3f')} ms, inside data): the loader limited "
            f"the step there")
    kept += (f" (a wait counts above {WAIT_FLOOR_S * 1e6:.0f} us and {WAIT_SHARE:.0%} of its "
             f"iteration)")
    return (f"  data loading: {ld.threads} loader thread(s) made each batch in "
            f"{num(ld.load_median_ms, '.3f')} ms (median) during the previous step; {kept}")


def _layer_lines(prof: LayerProfile) -> List[str]:
    """The slowest layers of a --profile-layers run (at most MAX_LAYER_ROWS), with their roofline
    columns where the file has them."""
    shown = prof.layers[:MAX_LAYER_ROWS]
    start = "" if prof.first_iteration is None else f" from iteration {prof.first_iteration}"
    peaks = prof.peaks
    lines = [f"  top layers ({len(shown)} of {len(prof.layers)}; mean over ranks and the "
             f"{prof.iterations} profiled iterations{start}; the timer marks cost "
             f"{num(prof.profile_cost_ms, '.4f')} ms per profiled iteration, included):",
             f"    {'layer':<16}{'kind':<12}{'forward ms':>11}{'backward ms':>12}"
             f"{'total ms':>10}{'share':>8}" +
             ("" if peaks is None else
              f"{'GFLOP/s':>10}{'GB/s':>9}{'%FLOP':>7}{'%BW':>7}{'bound':>9}")]
    for x in shown:
        row = (f"    {x.layer[:15]:<16}{x.kind[:11]:<12}{num(x.forward_ms):>11}"
               f"{num(x.backward_ms):>12}{num(x.total_ms):>10}{num(x.share, '.1%'):>8}")
        r = x.get("roofline")
        if r is not None:
            row += (f"{num(r.gflops, '.4g'):>10}{num(r.gbps, '.4g'):>9}"
                    f"{num(r.compute_share, '.1%'):>7}{num(r.bandwidth_share, '.1%'):>7}"
                    f"{r.bound or 'n/a':>9}")
        lines.append(row)
    if peaks is None:
        lines.append("    roofline: not in this file (written by a dtbench that recorded no "
                     "bytes, FLOPs or peaks in /profile)")
        return lines
    ridge = num(peaks.ridge_flop_per_byte, '.3g')
    lines += [f"    roofline: peak compute {num(peaks.compute_gflops, '.4g')} GFLOP/s "
              f"({peaks.compute_method})",
              f"    peak bandwidth {num(peaks.bandwidth_gbps, '.4g')} GB/s "
              f"({peaks.bandwidth_method}); ridge point {ridge} FLOP/B: below it a layer is "
              f"bound by memory"]
    return lines


def _efficiency_lines(eff: ExchangeEfficiency) -> List[str]:
    """The exchange against the library's collectives alone, how they were timed, and the
    overhead: a warning where it matters (summary.OVERHEAD_OF_ITERATION, outside the
    calibration's spread), else a plain line."""
    bw = "" if eff.recorded_busbw is None else (
        f"; busbw {eff.recorded_busbw / 1e9:.3g} GB/s recorded vs "
        f"{(eff.calibration_busbw or 0) / 1e9:.3g} GB/s alone")
    spread = "" if eff.library_hi_ms is None else (
        f", its repetitions {num(eff.library_lo_ms)}-{num(eff.library_hi_ms)} ms")
    lines = [f"  exchange efficiency: {num(eff.efficiency, '.2f')} (library alone "
             f"{num(eff.library_ms)} ms{spread} / recorded {num(eff.transfer_ms)} ms median "
             f"transfer; median exchange with the wait {num(eff.recorded_ms)} ms{bw})",
             "  calibration: " + (eff.method or "not described in this file (an older dtbench: "
                                  "the collectives timed back to back on warm buffers)")]
    shares = (f"{num(eff.overhead_of_iteration, '.1%')} of the iteration, "
              f"{num(eff.overhead_of_exchange, '.0%')} of the exchange")
    if eff.warn:
        lines.append(f"  WARNING: the exchange took {num(eff.overhead_ms)} ms per iteration more "
                     f"than the library's collectives alone ({shares}): that much of the "
                     f"exchange is dtbench's own work or its conditions, not the library's")
    elif eff.overhead_ms is not None and eff.overhead_ms > 0:
        why = ("within the spread of the calibration's repetitions"
               if eff.outside_spread is False else
               f"under {OVERHEAD_OF_ITERATION:.0%} of the iteration")
        lines.append(f"  beyond the library's collectives: {num(eff.overhead_ms)} ms per "
                     f"iteration ({shares}; {why}: no cause to look for)")
    return lines


def _per_rank_lines(s: Summary) -> List[str]:
    """The per-rank table (at most MAX_RANK_ROWS rows: the slowest first when cut)."""
    rows = s.per_rank
    if len(rows) < 2:
        return []
    if "compute_median_ms" in rows[0]:
        return _model_parallel_lines(rows)
    extra = [k for k in ("wait_median_ms", "tensor_median_ms", "bubble_median_ms",
                         "staleness_median", "power_median_w", "memory_max_mib",
                         "utilization_median") if k in rows[0]]
    heads = {"wait_median_ms": "wait ms", "tensor_median_ms": "tensor ms",
             "bubble_median_ms": "bubble ms", "staleness_median": "stale",
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
                   f"{num(r['total_median_ms']):>11}{num(r['total_p95_ms']):>11}"
                   f"{num(r['busy_median_ms']):>10}{num(r['exchange_median_ms']):>10}" +
                   "".join(f"{num(r[k], '.1f'):>10}" for k in extra))
    if note:
        out.append(note)
    return out


def _model_parallel_lines(rows) -> List[str]:
    """A model-parallel run's per-rank table: its place and where its iteration goes, side by
    side (all ranks: the place matters more than the order)."""
    heads = [("compute_median_ms", "compute"), ("tensor_median_ms", "tensor"),
             ("bubble_median_ms", "bubble"), ("exchange_median_ms", "exchange")]
    heads = [(k, h) for k, h in heads if k in rows[0]]
    out = ["", "  per rank, median ms over its measured iterations (place: replica r, stage s, "
               "tensor rank t; compute = forward + backward less the tensor group's allreduces "
               "and the pipeline's transfer and bubble; exchange: among the replicas):",
           f"  {'rank':>5} {'place':<10}{'node':>5} {'host':<14}{'iters':>6}{'total':>10}" +
           "".join(f"{h:>10}" for _, h in heads)]
    for r in rows[:MAX_RANK_ROWS]:
        out.append(f"  {r['rank']:>5} {r['place']:<10}{r['node']:>5} {r['host'][:13]:<14}"
                   f"{r['measured']:>6}{num(r['total_median_ms']):>10}" +
                   "".join(f"{num(r[k]):>10}" for k, _ in heads))
    if len(rows) > MAX_RANK_ROWS:
        out.append(f"  ... {len(rows) - MAX_RANK_ROWS} more ranks (--json: all)")
    return out


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("summary", help="factors, phase times, throughput of each run",
                              description="Summarise dtbench result files.")
    common.add_inputs(p)
    p.add_argument("--json", action="store_true",
                   help="print a JSON object (an array of them for several files)")
    common.add_plot(p, "where the time goes (stacked phases per run)")
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    """Summarise each file; report_error(msg) is called for each unreadable one. Returns the
    exit status: 0, or 2 when any file could not be read (the others are still summarised)."""
    if not common.plot_ok(args, report_error):
        return 2
    runs, status = common.load(args, report_error)
    results = [summarize(r) for r in runs]
    several = len(inputs.expand(args.inputs)[0]) > 1
    if args.json:
        if results or several:
            payload = results if several else results[0]
            print(jsonout.dumps(payload))
    elif results:
        print("\n\n".join(format_text(r) for r in results))
    if args.plot and runs:
        from .. import tables
        from ..plot import time as figures
        from ..plotting import save
        save(figures.breakdown(tables.phases(runs, summaries=results)), args.plot)
        if not args.json:
            print(f"wrote {args.plot}")
    return status
