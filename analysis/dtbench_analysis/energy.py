"""Power, memory and utilisation from the optional sampler (/samples), and energy per sample.

Energy of a rank = the integral (trapezoid rule, ``scipy.integrate.trapezoid``) of its sampled
``power_w`` over the time span of its measured iterations (from the start of its first measured
iteration to the end of its last, on the aligned clock), with the power at the span's ends
interpolated between samples. Where the samples cover only part of the span, the energy is the
mean sampled power times the span, and the covered fraction is reported. Energy per sample =
energy summed over the sampled ranks / samples those ranks processed in their measured
iterations (batch_per_rank each).
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from .runfile import Run


def _span(run: Run, row: int):
    """(t0, t1) of rank ``row``'s measured iterations on the aligned clock, or None."""
    start, total = run.measured("start")[row], run.measured("total")[row]
    ok = np.isfinite(start) & np.isfinite(total)
    if not ok.any():
        return None
    return float(start[ok].min()), float((start[ok] + total[ok]).max())


def rank_energy(run: Run, row: int) -> Optional[Dict[str, float]]:
    """Energy (J), mean power (W) and coverage of rank ``row`` over its measured span; None when
    the rank has no power samples or no measured iteration."""
    if "power_w" not in run.samples or "time" not in run.samples:
        return None
    t, p = run.samples["time"][row], run.samples["power_w"][row]
    ok = np.isfinite(t) & np.isfinite(p)
    t, p = t[ok], p[ok]
    span = _span(run, row)
    if t.size < 2 or span is None:
        return None
    order = np.argsort(t, kind="stable")
    t, p = t[order], p[order]
    t0, t1 = span
    lo, hi = max(t0, t[0]), min(t1, t[-1])
    if hi <= lo or t1 <= t0:
        return None
    inside = (t > lo) & (t < hi)
    tt = np.concatenate(([lo], t[inside], [hi]))
    pp = np.concatenate(([np.interp(lo, t, p)], p[inside], [np.interp(hi, t, p)]))
    from scipy.integrate import trapezoid
    covered_energy = float(trapezoid(pp, tt))
    mean_power = covered_energy / (hi - lo)
    return {"energy_j": mean_power * (t1 - t0), "mean_power_w": mean_power,
            "coverage": (hi - lo) / (t1 - t0), "span_s": t1 - t0}


def energy_summary(run: Run) -> Optional[Dict[str, object]]:
    """Energy per sample over the ranks with power samples, with per-rank details; None when the
    run has no power samples."""
    per_rank: List[Dict[str, object]] = []
    batch = run.batch_per_rank
    for row in range(run.nranks):
        e = rank_energy(run, row)
        if e is None:
            continue
        e.update({"rank": int(run.ranks["rank"].iloc[row]),
                  "samples": int(run.ranks["measured"].iloc[row]) * batch})
        per_rank.append(e)
    if not per_rank:
        return None
    energy = sum(e["energy_j"] for e in per_rank)
    samples = sum(e["samples"] for e in per_rank)
    return {"energy_j": energy, "samples": samples,
            "joules_per_sample": energy / samples if samples else None,
            "ranks_sampled": len(per_rank), "nranks": run.nranks,
            "min_coverage": min(e["coverage"] for e in per_rank), "per_rank": per_rank}


def sampler_per_rank(run: Run) -> Dict[str, np.ndarray]:
    """Per rank (row order): median power (W), peak memory (MiB), median utilisation, each
    present only when sampled; NaN for a rank without samples."""
    out = {}
    for name, how, key in (("power_w", "median", "power_median_w"),
                           ("memory_mib", "max", "memory_max_mib"),
                           ("utilization", "median", "utilization_median")):
        if name in run.samples:
            out[key] = getattr(pd.DataFrame(run.samples[name].T), how)(skipna=True).to_numpy()
    return out
