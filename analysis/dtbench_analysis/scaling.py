"""Scaling series (``dtbench-analyze scaling``, the report's Scaling): throughput, speedup and
parallel efficiency across rank/node counts.

Runs are grouped into series: same configuration apart from the scale (ranks, nodes) and the
batch (configs.SCALE_KEYS), and the parameter servers of ``--exchange async`` (``ps-ranks``),
which a study may grow with the job (one per node) as it grows the batch. Inside a group, the
runs sharing one global batch form a *strong* scaling series and the runs sharing one per-rank
batch (with a growing global batch) form a *weak* one; a run can belong to both. Where two
points of a series would share a scale (runs differing in ps-ranks alone), the series is formed
per ps-ranks value instead. Repeats at one scale are pooled.

With p the scale (ranks, or nodes with ``--unit nodes``) and p1 the smallest scale of the series
(the base case): time per iteration T = median of the pooled per-iteration times
(metrics.iteration_times), throughput X = batch_global / T (lockstep runs; for async/mixed runs
the median over repeats of metrics.throughput), speedup S = X_p / X_1 and efficiency
E = S * p1 / p. For strong scaling that is S = T1/Tp and E = T1*p1/(Tp*p); for weak scaling
S = (p/p1) * T1/Tp (scaled speedup) and E = T1/Tp. The ideal is S = p/p1, E = 1.
``find_series`` returns a ScalingResult of Series of ScalingPoints (times in seconds).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import configs, metrics, stats, work
from .records import Record, absent, record
from .runfile import Run

UNITS = ("ranks", "nodes")
#: configuration keys that may vary along a series besides configs.SCALE_KEYS
SERIES_SCALE_KEYS = ("ps-ranks",)


@record
class ScalingPoint(Record):
    """The runs at one scale (repeats pooled). ``ideal_speedup``, ``speedup`` and ``efficiency``
    exist inside a series; ``factors`` for a point outside any series."""
    ranks: int
    nodes: int
    p: int
    batch_global: int
    batch_per_rank: int
    files: List[str]
    repeats: int
    incomplete: List[str]
    iterations: int
    time_median_s: Optional[float]
    time_lo_s: Optional[float]
    time_hi_s: Optional[float]
    time_p95_s: Optional[float]
    throughput: Optional[float]
    throughput_lo: Optional[float]
    throughput_hi: Optional[float]
    exchange_share: Optional[float]
    ideal_speedup: float = absent()
    speedup: Optional[float] = absent()
    efficiency: Optional[float] = absent()
    factors: Dict[str, str] = absent()
    # work.group_rates at the throughput, where the files record what they need
    tokens_per_s: Optional[float] = absent()
    mfu: Optional[float] = absent()


@record
class Series(Record):
    kind: str                      # strong or weak
    fixed: str                     # "global batch 64", "per-rank batch 16"
    factors: Dict[str, str]        # the configuration the points share
    base: ScalingPoint             # the smallest scale (points[0])
    points: List[ScalingPoint]


@record
class ScalingResult(Record):
    series: List[Series]
    unmatched: List[ScalingPoint]  # scales that belong to no series


def _point(runs: List[Run], unit: str, confidence: float) -> ScalingPoint:
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
    point = ScalingPoint(
        ranks=first.nranks, nodes=first.nnodes,
        p=first.nranks if unit == "ranks" else first.nnodes,
        batch_global=first.batch_global, batch_per_rank=first.batch_per_rank,
        files=[r.path for r in runs], repeats=len(runs),
        incomplete=[r.path for r in runs if not r.is_complete],
        iterations=int(times.size),
        time_median_s=t["median"], time_lo_s=t["lo"], time_hi_s=t["hi"], time_p95_s=p95,
        throughput=tp, throughput_lo=tp_lo, throughput_hi=tp_hi,
        exchange_share=float(np.median(shares)) if shares.size else None)
    for key, values in work.group_rates(runs, {"median": tp}, ("median",)).items():
        setattr(point, key, values["median"])
    return point


def _finish_series(kind: str, fixed: str, points: List[ScalingPoint],
                   factors: Dict[str, str]) -> Series:
    points = sorted(points, key=lambda q: (q.p, q.ranks, q.nodes))
    base = points[0]
    for q in points:
        q.ideal_speedup = q.p / base.p
        if q.throughput and base.throughput:
            q.speedup = q.throughput / base.throughput
            q.efficiency = q.speedup * base.p / q.p
        else:
            q.speedup = q.efficiency = None
    return Series(kind, fixed, factors, base, points)


def _ps_ranks(run: Run) -> int:
    try:
        return int(run.config.get("ps-ranks", run.attrs.get("ps_ranks", 0)) or 0)
    except (TypeError, ValueError):
        return 0


def _series_members(points: Dict[tuple, ScalingPoint], members: List[tuple]) -> List[List[tuple]]:
    """The members of one batch value as series: one, or one per ps-ranks value where two
    members share a scale."""
    scales = [(points[k].ranks, points[k].nodes) for k in members]
    if len(set(scales)) == len(scales):
        return [members]
    by_ps: "OrderedDict[int, List[tuple]]" = OrderedDict()
    for k in members:
        by_ps.setdefault(k[3], []).append(k)
    return list(by_ps.values())


def find_series(runs: Sequence[Run], unit: str = "ranks", ignore: Sequence[str] = (),
                confidence: float = stats.DEFAULT_CONFIDENCE) -> ScalingResult:
    """Strong and weak series (each with its base case and points), and the scales that
    belong to no series."""
    groups = configs.group_runs(runs, tuple(ignore) + configs.SCALE_KEYS + SERIES_SCALE_KEYS)
    series, unmatched = [], []
    for key, group in groups.items():
        by_scale: "OrderedDict[tuple, List[Run]]" = OrderedDict()
        for r in group:
            by_scale.setdefault((r.nranks, r.nnodes, r.batch_global, _ps_ranks(r)), []).append(r)
        points = {k: _point(v, unit, confidence) for k, v in by_scale.items()}
        used = set()
        factors = dict(key)
        for kind, field, fixed in (("strong", "batch_global", "global batch"),
                                   ("weak", "batch_per_rank", "per-rank batch")):
            values = OrderedDict.fromkeys(getattr(q, field) for q in points.values())
            for value in values:
                everyone = [k for k, q in points.items() if getattr(q, field) == value]
                for members in _series_members(points, everyone):
                    scales = {(points[k].ranks, points[k].nodes) for k in members}
                    batches = {points[k].batch_global for k in members}
                    if len(scales) < 2 or (kind == "weak" and len(batches) < 2):
                        continue
                    used.update(members)
                    series.append(_finish_series(kind, f"{fixed} {value}",
                                                 [replace(points[k]) for k in members],
                                                 _with_servers(factors, members)))
        for k, q in points.items():
            if k not in used:
                unmatched.append(replace(q, factors=_with_servers(factors, [k])))
    return ScalingResult(series, unmatched)


def _with_servers(factors: Dict[str, str], members: List[tuple]) -> Dict[str, str]:
    """The factors with the parameter servers of the members (async: ps-ranks, e.g. 1, or
    1..16 where they grow with the scale)."""
    servers = sorted({k[3] for k in members if k[3]})
    if not servers or factors.get("exchange") != "async":
        return dict(factors)
    text = str(servers[0]) if len(servers) == 1 else f"{servers[0]}..{servers[-1]}"
    return {**factors, "ps-ranks": text}
