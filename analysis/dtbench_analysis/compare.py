"""Configurations side by side (``dtbench-analyze compare``, the report's Comparisons), with
confidence intervals and tests.

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
``compare`` returns a Comparison of ConfigGroups (seconds).
"""

from __future__ import annotations

from dataclasses import field
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import configs, memory, metrics, stats, work
from .records import Record, absent, internal, record
from .runfile import Run


@record
class ConfigGroup(Record):
    """The pooled repeats of one configuration; ``test`` is None for the baseline."""
    files: List[str]
    repeats: int
    incomplete: List[str]
    exchange: str
    lockstep: bool
    iterations: int
    time_s: Dict[str, Optional[float]]            # median, lo, hi (CI), p95
    repeat_medians_s: List[Optional[float]]
    throughput: Dict[str, object]                 # median, lo, hi, method
    exchange_share: Optional[float]
    precision: Dict[str, str]
    bytes_sent_median: Optional[float]
    exchange_median_s: Optional[float]
    staleness: Optional[Dict[str, object]]
    target: Optional[Dict[str, object]]
    label: str = ""
    differing: Dict[str, str] = field(default_factory=dict)
    test: Optional[Dict[str, object]] = None
    # work.group_rates at the throughput's median and bounds, where the files record them
    tokens_per_s: Dict[str, Optional[float]] = absent()
    mfu: Dict[str, Optional[float]] = absent()
    # where the groups differ in the exchange among sync and zero1-3 (memory.SHARDING) and a
    # file records memory per rank: the plan's (the largest rank of any repeat) and the measured
    # peak resident (the median over the repeats of each one's largest rank), MiB
    memory_plan_mib: Optional[float] = absent()
    memory_peak_mib: Optional[float] = absent()
    times: np.ndarray = internal()


@record
class Comparison(Record):
    common: Dict[str, str]          # the configuration every group shares
    unlike: List[str]               # model/dataset when they differ (different work)
    groups: List[ConfigGroup]
    baseline: int
    alpha: float
    alpha_per_test: float
    confidence: float
    target: Optional[float]


def _median_of(runs: List[Run], field: str) -> Optional[float]:
    values = [r.measured(field).ravel() for r in runs if r.has(field)]
    v = np.concatenate(values) if values else np.array([])
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else None


def _targets(runs: List[Run], target: Optional[float]) -> Optional[Dict[str, object]]:
    """Iterations and time to the target accuracy per repeat, and their medians."""
    targets = []
    for r in runs:
        goal = target if target is not None else r.target_accuracy
        tt = metrics.time_to_target(r, goal)
        if tt is not None:
            targets.append(dict(tt, file=r.path))
    if not targets:
        return None
    reached = [x for x in targets if x["reached"]]
    return {"runs": targets, "reached": len(reached), "of": len(targets),
            "iterations_median": float(np.median([x["iteration"] for x in reached]))
            if reached else None,
            "time_median_s": float(np.median([x["time_s"] for x in reached]))
            if reached else None}


def _group_stats(runs: List[Run], confidence: float, target: Optional[float]) -> ConfigGroup:
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
    medians = [metrics.iteration_times(r) for r in runs]
    group = ConfigGroup(
        files=[r.path for r in runs], repeats=len(runs),
        incomplete=[r.path for r in runs if not r.is_complete],
        exchange=first.exchange, lockstep=first.lockstep, iterations=int(times.size),
        time_s={"median": t["median"], "lo": t["lo"], "hi": t["hi"],
                "p95": float(np.percentile(times, 95)) if times.size else None},
        repeat_medians_s=[float(np.median(m)) if m.size else None for m in medians],
        throughput=tp,
        exchange_share=float(np.median(shares)) if shares.size else None,
        # precision (compute, gradients on the wire) and what the exchange moved and took, so
        # an fp32 and a bf16 gradient exchange read side by side
        precision=configs.precision(first),
        bytes_sent_median=_median_of(runs, "bytes_sent"),
        exchange_median_s=_median_of(runs, "exchange"),
        staleness=metrics.staleness_distribution(np.concatenate(stale)) if stale else None,
        target=_targets(runs, target), times=times)
    for key, values in work.group_rates(runs, tp).items():
        setattr(group, key, values)
    return group


def _memory(groups: List[ConfigGroup], members: List[List[Run]]) -> None:
    """Memory per rank beside the time of every group, where the groups differ in the exchange
    among memory.SHARDING (sync, zero1-3) and some file records memory; else nothing."""
    if len({g.exchange for g in groups} & set(memory.SHARDING)) < 2:
        return
    found = [[m for m in map(memory.memory_per_rank, runs) if m is not None] for runs in members]
    if not any(found):
        return
    for g, mems in zip(groups, found):
        plan = [m.total_mib for m in mems if m.total_mib is not None]
        peak = [m.peak_resident_max_mib for m in mems
                if m.get("peak_resident_max_mib") is not None]
        g.memory_plan_mib = max(plan) if plan else None
        g.memory_peak_mib = float(np.median(peak)) if peak else None


def compare(runs: Sequence[Run], ignore: Sequence[str] = (), baseline: int = 1,
            alpha: float = stats.DEFAULT_ALPHA, confidence: float = stats.DEFAULT_CONFIDENCE,
            target: Optional[float] = None) -> Comparison:
    """Group, summarise and test: ``groups`` in input order, each with ``label`` and ``test``
    against the baseline (the baseline's ``test`` is None)."""
    groups = configs.group_runs(runs, ignore)
    common, differing = configs.split_common(list(groups))
    out_groups = []
    for i, members in enumerate(groups.values()):
        g = _group_stats(members, confidence, target)
        g.label = configs.label(differing[i], fallback=f"group {i + 1}")
        g.differing = differing[i]
        out_groups.append(g)
    base_index = baseline - 1
    level = alpha / max(1, len(out_groups) - 1)
    for i, g in enumerate(out_groups):
        g.test = None if i == base_index else \
            stats.compare_samples(out_groups[base_index].times, g.times, level)
    _memory(out_groups, list(groups.values()))
    unlike = [k for k in ("model", "dataset") if any(k in d for d in differing)]
    return Comparison(common, unlike, out_groups, baseline, alpha, level, confidence, target)
