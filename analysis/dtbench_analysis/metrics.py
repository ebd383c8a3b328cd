"""Derived quantities of one run, shared by the analysis commands.

All of them use measured cells only (completed, non-warm-up: ``Run.measured``). Quantities that
combine ranks within an iteration (critical path, exchange share) use only the iterations that
every rank measured (``Run.measured_by_all``), so a rank that stopped early cannot bias them.
Runs whose ranks do not advance in lockstep (``async``, ``mixed`` exchange: ``Run.lockstep`` is
False) have no per-iteration critical path: their time per iteration is every rank's own
``total`` and their throughput the sum of the ranks' own rates.
Percentiles are numpy/pandas' default (linear interpolation). Times are in seconds here.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
import pandas as pd

from . import layout
from .runfile import PHASES, Run


def distribution(values: np.ndarray, percentiles: Sequence[float] = (5, 95)) -> Dict[str, object]:
    """n, median, p<q> for each percentile, mean of the finite values (None when there are none)."""
    s = pd.Series(np.asarray(values, dtype=np.float64).ravel()).dropna()
    out: Dict[str, object] = {"n": int(s.size), "median": None}
    out.update({f"p{q:g}": None for q in percentiles})
    out["mean"] = None
    if s.size:
        out["median"] = float(s.median())
        for q in percentiles:
            out[f"p{q:g}"] = float(s.quantile(q / 100.0))
        out["mean"] = float(s.mean())
    return out


def phase_table(run: Run, phases: Sequence[str] = PHASES) -> pd.DataFrame:
    """One row per phase: n, median, p5, p95, mean over all ranks and measured iterations (s)."""
    return pd.DataFrame({p: distribution(run.measured(p)) for p in phases}).T


def per_rank_median(run: Run, name: str) -> pd.Series:
    """Median of ``name`` over each rank's measured iterations, indexed by MPI rank (NaN for a
    rank with no measured iteration)."""
    table = pd.DataFrame(run.measured(name).T, columns=run.ranks["rank"].to_numpy())
    return table.median(axis=0, skipna=True)


def critical_path(run: Run) -> np.ndarray:
    """Per iteration measured by every rank: the max over ranks of ``total`` (s)."""
    return run.measured("total")[:, run.measured_by_all].max(axis=0)


def iteration_times(run: Run) -> np.ndarray:
    """The run's time-per-iteration sample (s): the critical path of each iteration measured by
    every rank (lockstep runs), else every rank's measured ``total`` pooled."""
    if run.lockstep:
        return critical_path(run)
    total = run.measured("total")
    return total[np.isfinite(total)]


ITERATION_TIME_METHOD = {
    True: "critical path: max over ranks of total, per iteration measured by every rank",
    False: "each rank's own total, pooled over ranks (ranks do not advance in lockstep)",
}


#: How far the median wall time per iteration (``wall``: ``total`` and the host's time outside
#: it) may exceed the median ``total`` before the throughput is computed from it instead.
WALL_MARGIN = 0.02


def throughput(run: Run) -> Dict[str, object]:
    """Samples/s. Lockstep runs: batch_global / median over iterations of the critical path.
    Others: sum over ranks of batch_per_rank / median of the rank's own total (ranks without a
    measured iteration, e.g. parameter servers, contribute nothing). Files that record ``wall``
    (the iteration's host time: ``total`` and what the host does outside it, e.g. its wake-up
    and the record: a sizeable share of sub-millisecond steps) use its median instead of
    ``total``'s where it is more than WALL_MARGIN above it (lockstep: the max over ranks per
    iteration; others: per rank); ``basis`` says which ("total" or "wall"), ``wall_median_s``
    the median wall time per iteration (lockstep runs; None without ``wall``)."""
    if run.lockstep:
        path = critical_path(run)
        median = float(np.median(path)) if path.size else None
        out = {
            "samples_per_s": run.batch_global / median if median else None,
            "critical_path_median_s": median,
            "iterations": int(path.size),
            "method": "batch_global / median critical path",
            "basis": "total", "wall_median_s": None,
        }
        if run.has("wall"):
            wall = run.measured("wall")[:, run.measured_by_all].max(axis=0)
            wall = wall[np.isfinite(wall)]
            out["wall_median_s"] = wmed = float(np.median(wall)) if wall.size else None
            if median and wmed and wmed > (1 + WALL_MARGIN) * median:
                out.update(samples_per_s=run.batch_global / wmed, basis="wall",
                           method="batch_global / median wall time per iteration (max over "
                                  f"ranks; over {WALL_MARGIN:.0%} above the critical path of "
                                  "total: host time outside total)")
        return out
    medians = per_rank_median(run, "total").dropna()
    basis, method = "total", "sum over ranks of batch_per_rank / median total of the rank"
    if run.has("wall") and not medians.empty:
        walls = per_rank_median(run, "wall").reindex(medians.index)
        over = walls > (1 + WALL_MARGIN) * medians
        if over.any():
            medians = medians.where(~over, walls)
            basis = "wall"
            method = ("sum over ranks of batch_per_rank / median time of the rank: its wall "
                      f"time per iteration where over {WALL_MARGIN:.0%} above its total "
                      "(host time outside total), else its total")
    per_rank = run.batch_per_rank
    rate = float((per_rank / medians[medians > 0]).sum()) if not medians.empty else None
    return {
        "samples_per_s": rate or None,
        "critical_path_median_s": None,
        "iterations": int(np.isfinite(run.measured("total")).sum()),
        "method": method, "basis": basis, "wall_median_s": None,
    }


def iteration_columns(run: Run) -> np.ndarray:
    """Iterations used by cross-rank ratios: measured by every rank (lockstep), else by any."""
    return run.measured_by_all if run.lockstep else run.measured_mask.any(axis=0)


def exchange_share(run: Run) -> Dict[str, object]:
    """Median over iterations measured by every rank (any rank, for non-lockstep runs) of
    sum over ranks of ``exchange`` / sum over ranks of ``total``. The recorded ``exchange`` is
    the whole phase between backward and update: the arrival wait (``exchange_wait``, time
    blocked until the last rank has finished backward) and the transfer (the rest). Where the
    file records the wait, ``transfer`` and ``wait`` are the same median for each part alone
    (None otherwise)."""
    ratio = exchange_share_per_iteration(run)
    out = {"median": float(np.median(ratio)) if ratio.size else None,
           "iterations": int(ratio.size), "transfer": None, "wait": None}
    if run.has("exchange_wait"):
        for key, part in (("transfer", "transfer"), ("wait", "exchange_wait")):
            r = exchange_share_per_iteration(run, part)
            out[key] = float(np.median(r)) if r.size else None
    return out


def exchange_share_per_iteration(run: Run, part: str = "exchange") -> np.ndarray:
    """Per iteration (see ``exchange_share``): sum over ranks of exchange / of total. part:
    "exchange_wait" or "transfer" (exchange - exchange_wait) for one part of the phase."""
    cols = iteration_columns(run)
    if part == "transfer":
        x = run.measured("exchange") - run.measured("exchange_wait")
    else:
        x = run.measured(part)
    exch = np.nansum(x[:, cols], axis=0)
    total = np.nansum(run.measured("total")[:, cols], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = exch / total
    return ratio[np.isfinite(ratio)]


def waiting(run: Run) -> np.ndarray:
    """(nranks, iters_total) s each rank spent waiting for others in an iteration: the recorded
    ``exchange_wait`` when the file has it, else the whole ``exchange`` (an upper bound)."""
    return run.measured("exchange_wait" if run.has("exchange_wait") else "exchange")


def busy(run: Run) -> np.ndarray:
    """(nranks, iters_total) s of each iteration not spent waiting for other ranks:
    ``total - exchange_wait`` when recorded, else ``total - exchange`` (compute, data, update)."""
    return run.measured("total") - waiting(run)


def per_rank_table(run: Run) -> pd.DataFrame:
    """One row per rank: rank, host, node, measured, and the median (and p95 of total) of its
    measured iterations, in seconds: total, busy (total minus waiting), exchange, and the
    optional ``exchange_wait``/``staleness`` when recorded, and the tensor group's allreduces
    (``tp_comm``) and the pipeline bubble (``pipe_idle``) when not all 0; in a model-parallel run
    (layout.py) also its place (``place``: replica, stage, tensor rank) and the median of its
    compute (``compute_median``: forward and backward less those and the pipeline transfer)."""
    cols = {
        "total_median": run.measured("total"),
        "busy_median": busy(run),
        "exchange_median": run.measured("exchange"),
    }
    if run.has("exchange_wait"):
        cols["wait_median"] = run.measured("exchange_wait")
    if run.has("staleness"):
        cols["staleness_median"] = staleness(run)
    # model parallelism's own communication beside the exchange, where the run has it: a tensor
    # group's allreduces (--parallel tensor) and a pipeline stage's bubble, and the compute left
    # of forward and backward without them (layout.split), side by side
    model_parallel = layout.layout(run).model_parallel
    parts = layout.split(run) if model_parallel else {}
    for name, field in (("tensor_median", "tp_comm"), ("bubble_median", "pipe_idle")):
        if run.has(field) and np.nan_to_num(run.measured(field)).any():
            cols[name] = run.measured(field)
    if model_parallel:
        cols = {"total_median": cols.pop("total_median"),
                "compute_median": np.where(run.measured_mask, parts["compute"], np.nan),
                **cols}
    out = run.ranks[["rank", "host", "node", "measured"]].copy().reset_index(drop=True)
    if model_parallel:
        out["place"] = layout.places(run)
    with np.errstate(all="ignore"):
        for name, values in cols.items():
            out[name] = pd.DataFrame(values.T).median(axis=0, skipna=True).to_numpy()
        out["total_p95"] = pd.DataFrame(run.measured("total").T).quantile(0.95).to_numpy()
    return out


def staleness(run: Run) -> np.ndarray:
    """(nranks, iters_total) measured staleness, NaN where not measured and where negative: a
    staleness counts versions the parameters trail by, so it is never below 0; the mixed
    exchange of older writers recorded its local-minus-global step counter there (-8, -6, ...),
    which is not a staleness (staleness_distribution counts such values apart)."""
    v = run.measured("staleness").astype(np.float64, copy=True)
    v[v < 0] = np.nan
    return v


def staleness_distribution(values) -> Optional[Dict[str, object]]:
    """Staleness values (NaN ignored): n, median, p95, max and the count of each value;
    ``negative``: how many values were below 0 and left out (see ``staleness``)."""
    v = pd.Series(np.asarray(values, dtype=np.float64).ravel()).dropna()
    negative = int((v < 0).sum())
    v = v[v >= 0]
    if v.empty:
        return {"n": 0, "median": None, "p95": None, "max": None, "counts": {},
                "negative": negative} if negative else None
    counts = v.round().astype(np.int64).value_counts().sort_index()
    return {"n": int(v.size), "median": float(v.median()), "p95": float(v.quantile(0.95)),
            "max": float(v.max()), "counts": {int(k): int(c) for k, c in counts.items()},
            "negative": negative}


def time_to_target(run: Run, target: Optional[float]) -> Optional[Dict[str, object]]:
    """The first evaluation whose accuracy reaches ``target``: iterations completed then (warm-up
    included, as recorded in /eval) and aligned time since the run's start (s). None when no
    target is known; ``reached`` False when no evaluation reached it."""
    if target is None:
        return None
    ev = run.eval[np.isfinite(run.eval["accuracy"].to_numpy(dtype=np.float64))]
    hit = ev[ev["accuracy"].to_numpy(dtype=np.float64) >= target]
    if hit.empty:
        best = float(ev["accuracy"].max()) if not ev.empty else None
        return {"target": target, "reached": False, "iteration": None, "time_s": None,
                "best_accuracy": best, "evaluations": int(len(ev))}
    first = hit.iloc[0]
    return {"target": target, "reached": True, "iteration": int(first["iteration"]),
            "time_s": float(first["time"]), "best_accuracy": float(ev["accuracy"].max()),
            "evaluations": int(len(ev))}


def slowest_rank(run: Run) -> Optional[Dict[str, object]]:
    """The rank with the highest median ``total``, its median and the median of the per-rank
    medians (s), and their ratio. None when no rank has a measured iteration."""
    medians = per_rank_median(run, "total").dropna()
    if medians.empty:
        return None
    rank = int(medians.idxmax())
    row = run.ranks[run.ranks["rank"] == rank].iloc[0]
    typical = float(medians.median())
    worst = float(medians.loc[rank])
    return {"rank": rank, "host": str(row["host"]), "median_total_s": worst,
            "median_of_ranks_s": typical, "ratio": worst / typical if typical else None}


def final_eval(run: Run) -> Optional[Dict[str, object]]:
    """The last written evaluation with a finite accuracy, or None."""
    rows = run.eval[np.isfinite(run.eval["accuracy"].to_numpy(dtype=np.float64))]
    if rows.empty:
        return None
    last = rows.iloc[-1]
    loss = float(last["loss"])
    return {"accuracy": float(last["accuracy"]), "iteration": int(last["iteration"]),
            "loss": loss if np.isfinite(loss) else None}
