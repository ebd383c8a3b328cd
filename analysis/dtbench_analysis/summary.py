"""One run at a glance (``dtbench-analyze summary``, the report's details): its factors, phase
times, throughput and health.

``summarize(run)`` returns a Summary (times in ms; commands/summary_cmd.py prints it, ``--json`` dumps
it). Besides the pooled phase statistics it gives per-rank statistics (median and p95 of total,
median busy and exchange time per rank) and, when the run sampled power (/samples), energy per
sample (energy.py).
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from . import configs, energy, memory, metrics, roofline, work
from .memory import MemoryPerRank, memory_per_rank
from .records import Record, absent, record
from .runfile import PHASES, STATUS_NAMES, Run
from .units import MS, to_ms

DEFINITIONS = {
    "phases": "over all ranks x measured iterations (warm-up and unwritten iterations excluded); "
              "percentiles by linear interpolation",
    "throughput": "batch_global / median over iterations of the critical path "
                  "(critical path = max over ranks of total, iterations measured by every rank); "
                  "in files that record wall (the iteration's host time), of the max over ranks "
                  "of wall instead where its median is over 2% above the critical path's "
                  "(basis: wall)",
    "exchange_share": "median over iterations of (sum over ranks of exchange) / "
                      "(sum over ranks of total), iterations measured by every rank; exchange "
                      "= arrival wait (exchange_wait: blocked until the last rank ends "
                      "backward) + transfer (the rest); transfer and wait: the same median "
                      "for each part alone",
    **work.DEFINITIONS,
    "slowest_rank": "rank with the highest median total, vs the median of the per-rank medians",
    "per_rank": "per rank, over its measured iterations: median and p95 of total, median of busy "
                "(total minus exchange_wait when recorded, else minus exchange) and of exchange; "
                "model-parallel runs: its place (replica r, stage s, tensor rank t) and the "
                "medians of compute (forward + backward less tp_comm and pipe_send, pipe_recv, "
                "pipe_idle), tp_comm (tensor) and pipe_idle (bubble)",
    "exchange_efficiency": "calibration_exchange_s (the transport's collectives timed alone on the "
                           "run's buckets before training, as calibration_method says) / median "
                           "recorded transfer (exchange - exchange_wait: the arrival wait is load "
                           "imbalance, not the library's work); overhead = the transfer minus the "
                           "library's time: what the exchange costs beyond the collectives, "
                           "warned about only when it is 2% of the median iteration or more and "
                           "the transfer lies above the slowest of the calibration's repetitions "
                           "(calibration_exchange_hi_s; files without it: the 2% alone). "
                           "busbw: median bytes_sent / median (exchange - exchange_wait) x "
                           "calibration_busbw_factor (nccl-tests' bus bandwidth); bytes are "
                           "those on the wire (half of fp32's with --grad-dtype bf16/fp16)",
    "memory": memory.DEFINITION,
    "collectives": "--exchange zero1, zero2: medians over the measured rank-iterations of the "
                   "reduce-scatters completed after backward and of the all-gathers (both "
                   "inside exchange; zero3: all of them, inside forward and backward), and of their payloads (bytes_reduce_scatter, "
                   "bytes_allgather); with --transport hier also the shards' allreduce across "
                   "the nodes (exchange_allreduce, bytes_allreduce)",
    "oversubscribed": "dtbench found more ranks x threads (--threads, plus a --progress thread) on "
                      "a host than it has online cores (root attribute oversubscribed); "
                      "host_ranks_max and host_cores as recorded",
    "energy": "integral of sampled power over each rank's measured iterations (trapezoid rule), "
              "summed over ranks, / samples those ranks processed (batch_per_rank each)",
    "layers": "--profile-layers (/profile): per layer, the mean over ranks and profiled "
              "iterations of its forward, its backward and their sum (cells where the rank "
              "timed the layer); share = the layer's sum / the sum over layers; sorted, the "
              "slowest first; profile_cost: the median over ranks and profiled iterations of "
              "the marks' own host time (/iterations/profile_cost), included in the layers' times",
    "roofline": "--profile-layers in newer files (/profile/*_flop, *_bytes, peak_*): per layer, "
                "the FLOPs and the least bytes of one forward and one backward call (mean over "
                "the ranks holding it) / its total time: GFLOP/s and GB/s, and their shares of "
                "the device's peak compute (at the run's precision) and memory bandwidth (the "
                "median over ranks; a table of known GPUs or measured at start, as "
                "peaks.*_method says); bound: memory where the layer's FLOPs per byte are below "
                "the ridge point (peak FLOP/s / peak B/s), else compute. A bandwidth share above "
                "1: the layer's tensors stayed in cache",
}

#: per-rank columns of metrics.per_rank_table in seconds (reported in ms, suffix _ms)
TIME_COLUMNS = ("total_median", "total_p95", "busy_median", "exchange_median", "wait_median",
                "tensor_median", "bubble_median", "compute_median")
#: the exchange's overhead over the library (transfer - calibration) is material, and warned
#: about, from this share of the median iteration on, and only where the transfer also lies
#: outside the calibration's own spread: less changes no conclusion drawn from the run, and a
#: transfer within the spread of the library's own repetitions is the library's time
OVERHEAD_OF_ITERATION = 0.02


@record
class IterationCounts(Record):
    configured: int
    warmup_excluded: int
    iters_total: int
    measured_per_rank_min: int
    measured_per_rank_max: int
    measured_by_all_ranks: int


@record
class RankState(Record):
    rank: int
    host: str
    completed: int
    measured: int
    status: int
    status_name: str


@record
class Throughput(Record):
    samples_per_s: Optional[float]
    critical_path_median_ms: Optional[float]    # None for runs not in lockstep
    iterations: int
    method: str
    # files that record wall: the median wall time per iteration (lockstep runs), and whether
    # samples_per_s comes from it ("wall": over 2% above the critical path) or from total
    wall_median_ms: Optional[float] = absent()
    basis: str = absent()
    # work.py, in files that record what they need (absent otherwise): a language model's
    # tokens/s, and the model FLOPs utilisation with its terms
    tokens_per_sample: int = absent()
    tokens_per_s: Optional[float] = absent()
    train_flops_per_sample: float = absent()
    peak_flops: float = absent()
    peak_flops_source: str = absent()
    devices: int = absent()
    mfu: Optional[float] = absent()


@record
class ExchangeEfficiency(Record):
    """The library's collectives alone (the calibration) against the recorded transfer."""
    library_ms: float
    recorded_ms: Optional[float]                # median exchange, the wait included
    transfer_ms: Optional[float]                # median exchange - exchange_wait
    efficiency: Optional[float]                 # library_ms / transfer_ms
    warn: bool                                  # the overhead is material (see DEFINITIONS)
    calibration_busbw: Optional[float]
    recorded_busbw: Optional[float]
    overhead_ms: Optional[float] = None         # transfer_ms - library_ms
    overhead_of_iteration: Optional[float] = None   # overhead / median iteration
    overhead_of_exchange: Optional[float] = None    # overhead / median exchange
    method: Optional[str] = None                # calibration_method, None in older files
    library_lo_ms: Optional[float] = None       # the calibration's fastest repetition
    library_hi_ms: Optional[float] = None       # and its slowest (None in older files)
    outside_spread: Optional[bool] = None       # transfer_ms > library_hi_ms (None: no spread)


@record
class Loading(Record):
    """Where the batches were made (/iterations/load, load_wait; loader_threads): by the loader's
    threads during the previous step (prefetch), or inside data on the driver's thread."""
    prefetch: bool
    threads: int                    # the loader's threads (0 without prefetch)
    load_median_ms: Optional[float]    # making a batch, median over measured rank-iterations
    waited: int                     # measured rank-iterations that waited for their batch
    measured: int
    wait_median_ms: Optional[float]    # median wait of those that waited


@record
class SlowestRank(Record):
    rank: int
    host: str
    median_total_ms: float
    median_of_ranks_ms: float
    ratio: Optional[float]


@record
class Recorder(Record):
    record_median_ms: Optional[float]
    record_mean_ms: Optional[float]
    timer_overhead_s: Optional[float]


@record
class LayerTime(Record):
    layer: str
    kind: str
    forward_ms: Optional[float]     # mean over ranks and profiled iterations
    backward_ms: Optional[float]
    total_ms: Optional[float]       # mean of forward + backward
    share: Optional[float]          # total_ms / the sum of every layer's total_ms
    roofline: Optional[roofline.LayerRates] = absent()   # files with a roofline


@record
class LayerProfile(Record):
    """The /profile of a run (--profile-layers): every layer, the slowest first."""
    iterations: int                 # profiled iterations (N)
    first_iteration: Optional[int]
    profile_cost_ms: Optional[float]    # median host time of the marks per profiled iteration
    layers: List[LayerTime]
    peaks: Optional[roofline.Peaks] = None      # the roofline's; None: a file without one


@record
class Collectives(Record):
    """A sharded exchange's collectives per iteration (--exchange zero1, zero2): medians over the
    measured rank-iterations of the time after backward and the payload of each."""
    reduce_scatter_ms: Optional[float]
    allgather_ms: Optional[float]
    reduce_scatter_bytes: Optional[float]
    allgather_bytes: Optional[float]
    # --transport hier (sharded inside a node): the shards' allreduce across the nodes
    allreduce_ms: Optional[float] = absent()
    allreduce_bytes: Optional[float] = absent()


@record
class Summary(Record):
    """Everything ``summary`` reports about one run (times in ms)."""
    file: str
    complete: bool
    incomplete: Optional[str]
    finished: bool
    stop_reason: Optional[str]
    start_time: Optional[str]
    end_time: Optional[str]
    factors: Dict[str, object]
    precision: Dict[str, str]
    iterations: IterationCounts
    ranks: List[RankState]
    phases_ms: Dict[str, Dict[str, object]]      # phase -> n, median, p5, p95, mean
    throughput: Throughput
    exchange_share: Dict[str, object]
    exchange_efficiency: Optional[ExchangeEfficiency]
    oversubscribed: Optional[Dict[str, int]]
    slowest_rank: Optional[SlowestRank]
    bytes_sent_median: Optional[float]
    per_rank: List[Dict[str, object]]            # one entry per rank, columns as recorded
    energy: Optional[Dict[str, object]]
    final_eval: Optional[Dict[str, object]]
    recorder: Recorder
    definitions: Dict[str, str]
    layers: Optional[LayerProfile] = None       # with --profile-layers
    loading: Optional[Loading] = None           # files that record load and load_wait
    memory: Optional[MemoryPerRank] = None      # files that record /ranks/memory_* (memory.py)
    collectives: Optional[Collectives] = None   # sharded exchanges (zero1, zero2)


def collectives(run: Run) -> Optional[Collectives]:
    """The reduce-scatters' and all-gathers' medians; None where the file records none (other
    exchanges record zeros, older files nothing)."""
    keys = ("exchange_reduce_scatter", "exchange_allgather", "bytes_reduce_scatter",
            "bytes_allgather")
    if not all(run.has(k) for k in keys):
        return None
    med = {k: metrics.distribution(run.measured(k))["median"] for k in keys}
    across = {k: metrics.distribution(run.measured(k))["median"] if run.has(k) else None
              for k in ("exchange_allreduce", "bytes_allreduce")}
    if not med["bytes_allgather"] and not across["bytes_allreduce"]:
        return None
    out = Collectives(to_ms(med["exchange_reduce_scatter"]), to_ms(med["exchange_allgather"]),
                      med["bytes_reduce_scatter"], med["bytes_allgather"])
    if across["bytes_allreduce"]:
        out.allreduce_ms = to_ms(across["exchange_allreduce"])
        out.allreduce_bytes = across["bytes_allreduce"]
    return out


def exchange_efficiency(run: Run, exchange_ms: Optional[float]) -> Optional[ExchangeEfficiency]:
    """The calibration stored by dtbench against the recorded exchange; None when the run holds
    no calibration (older files, --calibrate-iters 0, one rank). Efficiency: library / median
    transfer (exchange - exchange_wait), as calibration.py and the busbw below; the arrival wait
    is not the library's work (docs/exchange.md). The overhead, transfer - library, is warned
    about only where it is material (OVERHEAD_OF_ITERATION) and the transfer lies above the
    calibration's slowest repetition."""
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
    times = metrics.iteration_times(run)
    iteration_ms = float(np.median(times)) * MS if times.size else None
    overhead = None if xfer is None else (xfer - lib) * MS
    of_iteration = overhead / iteration_ms if overhead is not None and iteration_ms else None
    of_exchange = overhead / exchange_ms if overhead is not None and exchange_ms else None
    lo, hi = (_attr_ms(run, f"calibration_exchange_{k}_s") for k in ("lo", "hi"))
    outside = None if hi is None or xfer is None else xfer * MS > hi
    material = of_iteration is not None and of_iteration >= OVERHEAD_OF_ITERATION \
        and outside is not False
    return ExchangeEfficiency(lib * MS, exchange_ms, to_ms(xfer), eff, material,
                              run.attrs.get("calibration_busbw"), busbw, overhead,
                              of_iteration, of_exchange, run.attrs.get("calibration_method"),
                              lo, hi, outside)


def _attr_ms(run: Run, name: str) -> Optional[float]:
    """A root attribute in seconds as ms; None when absent or not a finite number."""
    try:
        return _finite_ms(float(run.attrs.get(name, float("nan"))))
    except (TypeError, ValueError):
        return None


def _finite_ms(seconds: float) -> Optional[float]:
    return float(seconds) * MS if np.isfinite(seconds) else None


def _mean(values: np.ndarray) -> np.ndarray:
    """Mean over the first two axes of the finite cells; NaN where there is none."""
    finite = np.isfinite(values)
    count = finite.sum(axis=(0, 1))
    total = np.where(finite, values, 0.0).sum(axis=(0, 1))
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def layer_profile(run: Run) -> Optional[LayerProfile]:
    """Per-layer forward and backward times of a run made with --profile-layers, the slowest
    layer first (layers timed by no rank last); None without /profile."""
    prof = run.profile
    if not prof:
        return None
    forward, backward = _mean(prof["forward"]), _mean(prof["backward"])
    total = _mean(prof["forward"] + prof["backward"])
    known = total[np.isfinite(total)]
    whole = float(known.sum()) if known.size else 0.0
    order = sorted(range(total.size), key=lambda j: (not np.isfinite(total[j]), -total[j]
                                                     if np.isfinite(total[j]) else 0.0))
    peaks = roofline.peaks(prof)
    layers = [LayerTime(str(prof["layer"][j]), str(prof["kind"][j]), _finite_ms(forward[j]),
                        _finite_ms(backward[j]), _finite_ms(total[j]),
                        float(total[j] / whole) if whole > 0 and np.isfinite(total[j]) else None)
              for j in order]
    if peaks is not None:
        for j, x in zip(order, layers):
            x.roofline = roofline.layer_rates(prof, j, float(total[j]), peaks)
    n = int(prof["forward"].shape[1])
    first = int(prof["first_iteration"]) if "first_iteration" in prof else None
    cost = None
    if run.has("profile_cost") and first is not None:
        cells = run.iterations["profile_cost"][:, first:first + n]
        cells = cells[np.isfinite(cells)]
        cost = to_ms(float(np.median(cells))) if cells.size else None
    return LayerProfile(n, first, cost, layers, peaks)


# A prefetched step that found its batch not yet made records the wait, at least 1 ns (so that a
# wait is never 0); one that waited less than this, or less than WAIT_SHARE of its iteration, lost
# nothing that matters (a loader finishing while the step was asked for it): not counted.
WAIT_FLOOR_S = 20e-6
WAIT_SHARE = 0.01


def loading(run: Run) -> Optional[Loading]:
    """Where the measured iterations' batches were made and whether the step waited for them
    (more than WAIT_FLOOR_S and WAIT_SHARE of the iteration's total); None in files without
    /iterations/load."""
    if not (run.has("load") and run.has("load_wait")):
        return None
    load, wait = run.measured("load"), run.measured("load_wait")
    total = run.measured("total") if run.has("total") else np.zeros_like(wait)
    counted = np.isfinite(wait) & (wait > np.maximum(WAIT_FLOOR_S, WAIT_SHARE * np.nan_to_num(total)))
    load, wait = load[np.isfinite(load)], wait[np.isfinite(wait)]
    prefetch = str(run.attrs.get("prefetch", "off")) == "on"
    waits = run.measured("load_wait")[counted] if prefetch else wait
    return Loading(prefetch, int(run.attrs.get("loader_threads", 0)),
                   to_ms(float(np.median(load))) if load.size else None, int(waits.size),
                   int(wait.size), to_ms(float(np.median(waits))) if waits.size else None)


def throughput(run: Run, tp: Dict[str, object]) -> Throughput:
    """metrics.throughput as a Throughput, with tokens/s and MFU where the file allows them
    (work.py)."""
    rate = tp["samples_per_s"]
    out = Throughput(rate, to_ms(tp["critical_path_median_s"]), tp["iterations"], tp["method"])
    if run.has("wall"):
        out.wall_median_ms, out.basis = to_ms(tp["wall_median_s"]), tp["basis"]
    tokens = work.tokens_per_sample(run)
    if tokens:
        out.tokens_per_sample, out.tokens_per_s = tokens, work.tokens_per_s(run, rate)
    flops, peak = work.train_flops_per_sample(run), work.peak_flops(run)
    if flops and peak:
        out.train_flops_per_sample, out.peak_flops = flops, peak
        out.peak_flops_source = str(run.attrs.get("peak_flops_source", ""))
        out.devices, out.mfu = work.devices(run), work.mfu(run, rate)
    return out


def oversubscribed(run: Run) -> Optional[Dict[str, int]]:
    """dtbench's record that ranks x threads outnumbered a host's cores (root attributes
    oversubscribed, host_ranks_max, host_cores); None when not, or in older files."""
    if not int(run.attrs.get("oversubscribed", 0)):
        return None
    return {"host_ranks_max": int(run.attrs.get("host_ranks_max", 0)),
            "host_cores": int(run.attrs.get("host_cores", 0))}


def summarize(run: Run) -> Summary:
    """Everything ``summary`` reports (times in ms)."""
    measured = run.ranks["measured"].to_numpy()
    phases = {p: {k: (v if k == "n" or v is None else v * MS)
                  for k, v in metrics.distribution(run.measured(p)).items()} for p in PHASES}
    tp = metrics.throughput(run)
    slow = metrics.slowest_rank(run)
    record = metrics.distribution(run.measured("record"))
    return Summary(
        file=run.path, complete=run.is_complete, incomplete=run.completeness_note(),
        finished=run.finished, stop_reason=run.stop_reason,
        start_time=run.attrs.get("start_time"), end_time=run.attrs.get("end_time"),
        factors=run.factors, precision=configs.precision(run),
        iterations=IterationCounts(
            run.iters, run.warmup, run.iters_total,
            int(measured.min()) if measured.size else 0,
            int(measured.max()) if measured.size else 0, int(run.measured_by_all.sum())),
        ranks=[RankState(int(r), str(h), int(c), int(m), int(s),
                         STATUS_NAMES.get(int(s), "unknown"))
               for r, h, c, m, s in zip(run.ranks["rank"], run.ranks["host"],
                                        run.ranks["completed"], measured, run.ranks["status"])],
        phases_ms=phases,
        throughput=throughput(run, tp),
        exchange_share=metrics.exchange_share(run),
        exchange_efficiency=exchange_efficiency(run, phases["exchange"]["median"]),
        oversubscribed=oversubscribed(run),
        slowest_rank=None if slow is None else SlowestRank(
            slow["rank"], slow["host"], to_ms(slow["median_total_s"]),
            to_ms(slow["median_of_ranks_s"]), slow["ratio"]),
        bytes_sent_median=metrics.distribution(run.measured("bytes_sent"))["median"],
        per_rank=_per_rank(run),
        energy=energy.energy_summary(run),
        final_eval=metrics.final_eval(run),
        recorder=Recorder(to_ms(record["median"]), to_ms(record["mean"]),
                          run.attrs.get("timer_overhead_s")),
        definitions=DEFINITIONS,
        layers=layer_profile(run),
        loading=loading(run),
        memory=memory_per_rank(run),
        collectives=collectives(run))


def _per_rank(run: Run) -> List[Dict[str, object]]:
    """metrics.per_rank_table and the sampler's per-rank figures, one dict per rank (ms)."""
    table = metrics.per_rank_table(run)
    for key, values in energy.sampler_per_rank(run).items():
        table[key] = values
    out = []
    for row in table.to_dict("records"):
        entry = {"rank": int(row["rank"]), "host": str(row["host"]), "node": int(row["node"]),
                 "measured": int(row["measured"])}
        for k, v in row.items():
            if k in entry:
                continue
            if k == "place":
                entry[k] = str(v)
                continue
            v = None if v is None or not np.isfinite(v) else float(v)
            if k in TIME_COLUMNS:
                entry[k + "_ms"] = None if v is None else v * MS
            else:
                entry[k] = v
        out.append(entry)
    return out
