"""Memory per rank against time per iteration (the report's "Memory and time"): one point per
run, from the rows of tables.memory_time, so the exchange strategies (sync beside the sharded
zero1, zero2, zero3) read as what each costs in time and saves in memory.

x: the median time per iteration (ms); y: the memory per rank (MiB): the measured peak resident
of the largest rank where the file records it (filled marker), else the plan's parameters,
gradients and optimizer state (hollow marker); where a run records both, its plan is a bar
(``_``) below the point, joined to it. Colour (and marker) per strategy, one legend entry each;
runs of several models take the model into the label and a marker per model.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import pandas as pd

from .time import empty_axes

STRATEGY_COLORS = {"sync": "C0", "zero1": "C1", "zero2": "C2", "zero3": "C3"}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STRATEGY_MARKERS = {"sync": "o", "zero1": "s", "zero2": "^", "zero3": "D"}
#: runs named beside their point up to this many (beyond it the table names them)
MAX_NAMED = 12


def _groups(points: pd.DataFrame) -> Dict[str, pd.DataFrame]:
    """label -> the rows drawn under it: the strategy, with the model where models differ."""
    several = points["model"].nunique(dropna=False) > 1
    keys = [f"{m} {x}" if several else str(x) for m, x in zip(points["model"], points["exchange"])]
    return {k: points[[x == k for x in keys]] for k in dict.fromkeys(keys)}


def _style(rows: pd.DataFrame, models: List[str], several: bool, i: int):
    exchange = str(rows["exchange"].iloc[0])
    color = STRATEGY_COLORS.get(exchange, f"C{4 + i % 6}")
    if several:
        marker = MARKERS[models.index(rows["model"].iloc[0]) % len(MARKERS)]
    else:
        marker = STRATEGY_MARKERS.get(exchange, MARKERS[4 + i % 4])
    return color, marker


def _top(values: pd.Series) -> float:
    """An axis' upper limit: 15% above the largest finite value (1 when there is none)."""
    v = values.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    return float(v.max()) * 1.15 if v.size and v.max() > 0 else 1.0


def memory_time(points: pd.DataFrame):
    """The figure. Each label's points are one line without a line (``ax.get_lines()``) with
    gid ``memory <label>``, x and y in the rows' order; the plans drawn below measured points
    have gid ``plan <label>``."""
    from ..plotting import legend_below, plt
    fig, ax = plt.subplots(figsize=(8, 5))
    if points.empty:
        empty_axes(ax, "no run records its memory per rank")
        return fig
    models = list(dict.fromkeys(points["model"]))
    several = len(models) > 1
    hollow = False
    for i, (name, rows) in enumerate(_groups(points).items()):
        color, marker = _style(rows, models, several, i)
        x = rows["time/iter ms"].to_numpy(dtype=float)
        y = rows["memory/rank MiB"].to_numpy(dtype=float)
        measured = (rows["basis"] == "measured peak").to_numpy()
        line, = ax.plot(x, y, ls="none", marker=marker, ms=8, color=color, mec=color,
                        label=name)
        line.set_gid(f"memory {name}")
        plan_only = ~measured
        if plan_only.any():    # hollow: a white face over the points that show the plan
            ax.plot(x[plan_only], y[plan_only], ls="none", marker=marker, ms=5, color="white",
                    mec="none")
            hollow = True
        plan = rows["plan MiB"].to_numpy(dtype=float)
        both = measured & np.isfinite(plan)
        if both.any():
            ax.vlines(x[both], plan[both], y[both], color=color, lw=0.7, alpha=0.6)
            bar, = ax.plot(x[both], plan[both], ls="none", marker="_", ms=12, mew=1.5,
                           color=color)
            bar.set_gid(f"plan {name}")
        if len(points) <= MAX_NAMED:
            for xi, yi, run in zip(x, y, rows["run"]):
                ax.annotate(str(run), (xi, yi), xytext=(6, 4), textcoords="offset points",
                            fontsize=7, color=color)
    if (points["basis"] == "measured peak").any() and points["plan MiB"].notna().any():
        ax.plot([], [], ls="none", marker="_", ms=12, mew=1.5, color="0.4",
                label="the plan: parameters + gradients + optimizer state")
    if hollow:
        ax.plot([], [], ls="none", marker="o", ms=8, mfc="white", color="0.4",
                label="hollow: the plan (no measured peak in the file)")
    ax.set_xlim(0, _top(points["time/iter ms"]))
    ax.set_ylim(0, _top(points["memory/rank MiB"]))
    ax.set_xlabel("time per iteration, median (ms)")
    ax.set_ylabel("memory per rank, largest rank (MiB)")
    ax.set_title("Memory per rank against time per iteration: measured peak resident "
                 "(ru_maxrss), else the plan", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    legend_below(fig, [ax], ncol=3, fontsize=8)
    return fig
