"""Derived quantities of one run, shared by the analysis commands.

All of them use measured cells only (completed, non-warm-up: ``Run.measured``). Quantities that
combine ranks within an iteration (critical path, exchange share) use only the iterations that
every rank measured (``Run.measured_by_all``), so a rank that stopped early cannot bias them.
Percentiles are numpy/pandas' default (linear interpolation). Times are in seconds here.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
import pandas as pd

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


def throughput(run: Run) -> Dict[str, object]:
    """Samples/s = batch_global / median over iterations of the critical path."""
    path = critical_path(run)
    median = float(np.median(path)) if path.size else None
    return {
        "samples_per_s": run.batch_global / median if median else None,
        "critical_path_median_s": median,
        "iterations": int(path.size),
    }


def exchange_share(run: Run) -> Dict[str, object]:
    """Median over iterations measured by every rank of
    sum over ranks of ``exchange`` / sum over ranks of ``total``."""
    cols = run.measured_by_all
    ratio = run.measured("exchange")[:, cols].sum(axis=0) / run.measured("total")[:, cols].sum(axis=0)
    return {"median": float(np.median(ratio)) if ratio.size else None,
            "iterations": int(ratio.size)}


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
