"""The figures a scaling study's report opens with: small multiples, one panel per series of
scaling.find_series (the rows of tables.scaling_points), each strategy's strong series beside
its weak one.

``time_panels``: the median time per iteration against the scale, stacked into exchange (the
time times the median exchange share, as ``dtbench-analyze scaling`` prints them) and compute
(the rest: data, forward, backward, update), with the time's confidence interval.
``speedup_panels``: per series, speedup (with the ideal) above efficiency (with 1), every panel
on the same axes as its neighbours so the strategies read against each other.

Scales are placed evenly in the order of the union of every series' scales (a study's node
counts are powers of two: even places are a log axis) and labelled with their value.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from .time import empty_axes

COMPUTE_COLOR, EXCHANGE_COLOR = "#4c72b0", "#dd8452"
#: strategies (pairs of columns: strong, weak) side by side in one row of panels
PAIRS_PER_ROW = 2
PANEL_W, PANEL_H = 2.9, 2.0


def strategy_of(row) -> str:
    """The strategy a series belongs to: its model (when shown), exchange, transport and every
    other factor in which the series differ (tables.scaling_points' ``line``)."""
    return f"{row['model']} {row['line']}" if row.get("model") else str(row["line"])


def grid(points: pd.DataFrame) -> List[Tuple[str, Optional[int], Optional[int]]]:
    """The panels' pairs, in order: (strategy, strong series or None, weak series or None); a
    strategy with several strong (or weak) series, e.g. two global batches, takes one pair per
    series, the i-th strong beside the i-th weak."""
    first = points.sort_values("series").drop_duplicates("series")
    order: Dict[str, Dict[str, List[int]]] = {}
    for _, row in first.iterrows():
        kinds = order.setdefault(strategy_of(row), {"strong": [], "weak": []})
        kinds[row["kind"]].append(int(row["series"]))
    pairs = []
    for name, kinds in order.items():
        strong, weak = kinds["strong"], kinds["weak"]
        for i in range(max(len(strong), len(weak))):
            pairs.append((name, strong[i] if i < len(strong) else None,
                          weak[i] if i < len(weak) else None))
    return pairs


def _slots(points: pd.DataFrame):
    """[(strategy, kind, series or None)] in panel order and the figure's (rows, columns)."""
    pairs = grid(points)
    per_row = min(PAIRS_PER_ROW, len(pairs)) or 1
    slots = [(name, kind, sid) for name, strong, weak in pairs
             for kind, sid in (("strong", strong), ("weak", weak))]
    rows = -(-len(pairs) // per_row)
    return slots, rows, 2 * per_row


def _x(points: pd.DataFrame, unit: str):
    scales = sorted(points[unit].unique())
    return scales, {s: i for i, s in enumerate(scales)}


def _title(ax, name: str, kind: str, sid: Optional[int], pts: Optional[pd.DataFrame]) -> None:
    if sid is None:
        ax.set_title(f"{name}\n{kind}: no series", fontsize=8)
        return
    ax.set_title(f"{sid}: {name}\n{kind}, {pts.iloc[0]['fixed']}", fontsize=8)


def _scale_axis(ax, scales, unit: str, label: bool) -> None:
    ax.set_xticks(range(len(scales)))
    ax.set_xticklabels([f"{s:g}" for s in scales], fontsize=7)
    ax.set_xlim(-0.6, len(scales) - 0.4)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", alpha=0.3)
    if label:
        ax.set_xlabel(unit, fontsize=8)


def _blank(ax, name: str, kind: str) -> None:
    empty_axes(ax, f"no {kind} series")
    _title(ax, name, kind, None, None)


def time_panels(points: pd.DataFrame, unit: str):
    """One panel per series: stacked bars of compute and exchange ms per iteration against
    ``unit`` ("nodes" or "ranks"), the 95 % CI of the time as an error bar. Each drawn panel
    has ``ax.get_gid()`` = "series N"; its bar containers are labelled "compute" and
    "exchange" (one bar per scale, in the order of the series' points)."""
    from ..plotting import legend_below, plt
    slots, rows, cols = _slots(points)
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL_W * cols, 0.6 + PANEL_H * rows),
                             sharey=True, squeeze=False)
    scales, place = _x(points, unit)
    for ax, (name, kind, sid) in zip(axes.ravel(), slots):
        if sid is None:
            _blank(ax, name, kind)
            continue
        pts = points[points["series"] == sid].sort_values(unit)
        x = np.array([place[s] for s in pts[unit]], dtype=float)
        total = pts["time/iter ms"].to_numpy(dtype=float)
        share = np.nan_to_num(pts["exchange share"].to_numpy(dtype=float), nan=0.0)
        exchange = total * share
        ax.bar(x, total - exchange, width=0.7, color=COMPUTE_COLOR, label="compute")
        ax.bar(x, exchange, bottom=total - exchange, width=0.7, color=EXCHANGE_COLOR,
               label="exchange")
        lo = np.nan_to_num(total - pts["time lo"].to_numpy(dtype=float), nan=0.0)
        hi = np.nan_to_num(pts["time hi"].to_numpy(dtype=float) - total, nan=0.0)
        ax.errorbar(x, total, yerr=np.clip(np.vstack([lo, hi]), 0, None), fmt="none",
                    ecolor="k", capsize=2, lw=0.8, label="95% CI of the time")
        ax.set_gid(f"series {sid}")
        _title(ax, name, kind, sid, pts)
    for i, ax in enumerate(axes.ravel()):
        if i >= len(slots):
            ax.set_visible(False)
            continue
        _scale_axis(ax, scales, unit, i + cols >= len(slots))
        if i % cols == 0:
            ax.set_ylabel("ms per iteration", fontsize=8)
    fig.suptitle("Time per iteration (median) against " + unit + ": compute and exchange",
                 fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    legend_below(fig, [ax for ax in axes.ravel() if ax.get_gid()], ncol=3, fontsize=8)
    return fig


def speedup_panels(points: pd.DataFrame, unit: str):
    """Per series, speedup against ``unit`` (the ideal dotted) above efficiency (1 dotted), in
    the panel order of ``time_panels``. Each drawn axes has ``ax.get_gid()`` = "speedup N" or
    "efficiency N"; the series' values are its line labelled "speedup" or "efficiency"."""
    from ..plotting import legend_below, plt
    slots, rows, cols = _slots(points)
    fig, axes = plt.subplots(2 * rows, cols, figsize=(PANEL_W * cols, 0.6 + 3.0 * rows),
                             squeeze=False, gridspec_kw={"height_ratios": [1.15, 1] * rows})
    scales, place = _x(points, unit)
    top = max(1.2, float(np.nanmax(points["efficiency"].to_numpy(dtype=float), initial=0)) * 1.1)
    smax = max(float(np.nanmax(points["ideal"].to_numpy(dtype=float), initial=1)),
               float(np.nanmax(points["speedup"].to_numpy(dtype=float), initial=1))) * 1.1
    for i, (name, kind, sid) in enumerate(slots):
        ax_s, ax_e = axes[2 * (i // cols), i % cols], axes[2 * (i // cols) + 1, i % cols]
        if sid is None:
            _blank(ax_s, name, kind)
            ax_e.set_visible(False)
            continue
        pts = points[points["series"] == sid].sort_values(unit)
        x = np.array([place[s] for s in pts[unit]], dtype=float)
        ax_s.plot(x, pts["ideal"].to_numpy(dtype=float), "k:", lw=1, label="ideal")
        ax_s.plot(x, pts["speedup"].to_numpy(dtype=float), "o-", color="C0", ms=3,
                  label="speedup")
        ax_e.axhline(1.0, color="k", ls=":", lw=1)
        ax_e.plot(x, pts["efficiency"].to_numpy(dtype=float), "o-", color="C2", ms=3,
                  label="efficiency")
        ax_s.set_gid(f"speedup {sid}")
        ax_e.set_gid(f"efficiency {sid}")
        _title(ax_s, name, kind, sid, pts)
        ax_s.set_ylim(0, smax)
        ax_e.set_ylim(0, top)
        for ax, last in ((ax_s, False), (ax_e, i + cols >= len(slots))):
            _scale_axis(ax, scales, unit, last)
        if i % cols == 0:
            ax_s.set_ylabel("speedup S", fontsize=8)
            ax_e.set_ylabel("efficiency E", fontsize=8)
    for j in range(len(slots), rows * cols):
        axes[2 * (j // cols), j % cols].set_visible(False)
        axes[2 * (j // cols) + 1, j % cols].set_visible(False)
    fig.suptitle("Speedup (throughput / base case) and efficiency E = S p_base / p against "
                 + unit, fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    legend_below(fig, [ax for ax in axes.ravel() if ax.get_gid()], ncol=3, fontsize=8)
    return fig
