"""Figures about time: where it goes (stacked phases per run), scaling (speedup and efficiency
with intervals, as in the report), and ranks x iterations (heat maps, Gantt). Each function takes
the DataFrames of tables.py (or runs) and returns a matplotlib figure; plotting.save /
plotting.png_bytes write it. Training, pipeline and sampler figures are in training.py.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .. import grouping, tables, timeline
from ..runfile import Run
from . import timeline_fig as gantt_chart

PHASE_COLORS = {"data": "#8c8c8c", "forward": "#4c72b0", "backward": "#55a868",
                "exchange wait": "#c44e52", "exchange transfer": "#dd8452",
                "update": "#8172b3", "other": "#dadada"}


def empty_axes(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10)
    ax.set_xticks([]), ax.set_yticks([])


def breakdown(ph: pd.DataFrame):
    """Stacked horizontal bars: mean ms of each phase per rank-iteration, one bar per run, the
    hidden (overlapped) exchange hatched after the bar, exchange share and efficiency as text."""
    from ..plotting import legend_below, plt
    n = max(1, len(ph))
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.42 * n))
    if ph.empty:
        empty_axes(ax, "no runs")
        return fig
    y = np.arange(len(ph))
    left = np.zeros(len(ph))
    for phase in tables.BREAKDOWN:
        w = ph[phase].fillna(0.0).to_numpy(dtype=float)
        ax.barh(y, w, left=left, color=PHASE_COLORS[phase], label=phase, height=0.7)
        left += w
    hidden = ph["exchange hidden"].fillna(0.0).to_numpy(dtype=float)
    if (hidden > 0).any():
        ax.barh(y, hidden, left=left, color="none", edgecolor="#dd8452", hatch="///",
                height=0.7, label="exchange hidden (overlapped, not in the iteration)")
    for i, row in enumerate(ph.itertuples(index=False)):
        share = row[ph.columns.get_loc("exchange share")]
        eff = row[ph.columns.get_loc("exchange efficiency")]
        text = "exch. " + ("n/a" if share is None or not np.isfinite(share) else f"{share:.0%}")
        if eff is not None and np.isfinite(eff) and eff > 0:
            # the transfer's time over the library's alone: 1.0x is as fast as the library,
            # 2.5x took two and a half times as long (the efficiency, library / transfer, as a
            # percentage read as better than perfect above 100%)
            text += f", transfer {1 / eff:.2g}x library alone"
        ax.text(left[i] + hidden[i], i, "  " + text, va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels(ph["run"], fontsize=8)
    ax.set_ylim(len(ph) - 0.5, -0.5)  # the first run on top, no empty rows around the bars
    ax.set_xlim(0, float(np.nanmax(left + hidden)) * 1.35 or 1.0)
    ax.set_xlabel("ms per iteration and rank (mean over ranks x measured iterations)")
    ax.set_title("Where the time goes", loc="left")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    legend_below(fig, [ax], ncol=4)
    return fig


def scaling_unit(points: pd.DataFrame) -> str:
    """``nodes`` when the series span several node counts, each at one number of ranks per
    node (a study across nodes: the node counts are what the reader chose), else ``ranks``."""
    if points.empty or points["nodes"].nunique() < 2:
        return "ranks"
    per_node = points["ranks"] / points["nodes"]
    same = per_node.groupby(points["series"]).nunique()
    return "nodes" if (same == 1).all() else "ranks"


def scaling(points: pd.DataFrame):
    """Speedup, efficiency and exchange share against nodes (a study across nodes) or ranks,
    one line per series (strong/weak, strategy and transport), error bars from the time's
    confidence interval, the ideal dotted; the scale axis in powers of two when it spans 8x."""
    from ..plotting import legend_below, plt
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
    ax_s, ax_e, ax_x = axes
    if points.empty:
        for ax in axes:
            empty_axes(ax, "no scaling series: no two scales share\na configuration and a batch")
        return fig
    unit = scaling_unit(points)
    for i, (series, pts) in enumerate(points.groupby("series", sort=True)):
        pts = pts.sort_values(unit)
        first = pts.iloc[0]
        style = "-" if first["kind"] == "strong" else "--"
        name = f"{first['model']} {first['line']}: {first['kind']}, {first['fixed']}"
        color = f"C{i % 10}"
        for ax, col in ((ax_s, "speedup"), (ax_e, "efficiency")):
            v = pts[col].to_numpy(dtype=float)
            lo = v - pts[f"{col} lo"].to_numpy(dtype=float)
            hi = pts[f"{col} hi"].to_numpy(dtype=float) - v
            err = np.vstack([np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=0.0)])
            ax.errorbar(pts[unit], v, yerr=np.clip(err, 0, None), fmt=style + "o",
                        color=color, capsize=3, label=name, ms=4)
        ax_x.plot(pts[unit], 100 * pts["exchange share"].to_numpy(dtype=float), style + "o",
                  color=color, ms=4, label=name)
    scales = np.array(sorted(points[unit].unique()), dtype=float)
    ax_s.plot(scales, scales / scales[0], "k:", label="ideal")
    ax_e.axhline(1.0, color="k", ls=":", label="ideal")
    ax_s.set(title="speedup (throughput / base case)", xlabel=unit, ylabel="S")
    ax_e.set(title="parallel efficiency", xlabel=unit, ylabel="E = S p_base / p",
             ylim=(0, max(1.2, float(np.nanmax(points["efficiency hi"].fillna(0))) * 1.1)))
    ax_x.set(title="exchange share of the iteration", xlabel=unit, ylabel="% (median)",
             ylim=(0, 100))
    for ax in axes:
        if scales[-1] >= 8 * scales[0]:
            ax.set_xscale("log", base=2)
        ax.set_xticks(scales)
        ax.set_xticklabels([f"{x:g}" for x in scales])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    legend_below(fig, list(axes), ncol=2)
    return fig


#: heat map cells under this many ms are timer noise and drawn as 0
NOISE_MS = 1e-3
#: a heat map's colour scale spans at least this share of the median iteration time, so a few
#: microseconds of jitter in a wait that is really nothing do not fill the whole scale
SPAN_SHARE = 0.01


def colour_scale(ms: np.ndarray, warmup: int, span_floor: float = NOISE_MS):
    """(masked cells with values under NOISE_MS set to 0, vmax): vmax is the 98th percentile of
    the measured cells (one huge warm-up or evaluation iteration must not flatten the rest;
    brighter cells saturate), never below ``span_floor`` ms (at least NOISE_MS)."""
    data = np.ma.masked_invalid(ms)
    data = np.ma.where(np.abs(data) < NOISE_MS, 0.0, data)
    measured = data[:, warmup:].compressed()
    vmax = float(np.percentile(measured, 98)) if measured.size else 0.0
    return data, max(vmax, span_floor, NOISE_MS)


#: what the heat maps' colours mean, said once under the run's name (each panel's own title
#: names only its quantity: two long titles side by side ran into each other)
HEATMAP_NOTE = ("colours saturate at the 98th percentile of the measured cells; cells under 1 µs "
                "drawn as 0; grey: not recorded")


def heatmaps(run: Run, title: Optional[str] = None):
    """Ranks x iterations: iteration time and exchange wait (pipelines: idle time) in ms,
    warm-up marked, NaN grey; on several nodes a line where the node changes."""
    from ..plotting import plt
    if tables.is_pipeline(run):
        second = ("pipe_idle", "pipeline idle (bubble)")
    else:
        second = ("wait", "exchange wait" if run.has("exchange_wait") else
                  "exchange (wait not recorded)")
    fields = (("total", "iteration time"), second)
    total = tables.rank_iteration(run, "total").to_numpy()[:, run.warmup:]
    total = total[np.isfinite(total)]
    span_floor = max(NOISE_MS, SPAN_SHARE * float(np.median(total)) if total.size else 0.0)
    height = 2.0 + 0.3 * run.nranks
    fig, axes = plt.subplots(1, 2, figsize=(11, height))
    nodes = run.ranks["node"].to_numpy() if "node" in run.ranks else np.zeros(run.nranks)
    for ax, (field, name) in zip(axes, fields):
        frame = tables.rank_iteration(run, field)
        data, vmax = colour_scale(frame.to_numpy(), run.warmup, span_floor)
        cmap = plt.get_cmap("viridis").with_extremes(bad="#cccccc")
        im = ax.imshow(data, aspect="auto", interpolation="nearest", cmap=cmap,
                       vmin=0, vmax=vmax)
        if run.warmup:
            ax.axvline(run.warmup - 0.5, color="w", lw=1.5, ls="--")
        for r in np.flatnonzero(np.diff(nodes) != 0):
            ax.axhline(r + 0.5, color="w", lw=0.8)
        ax.set_yticks(range(run.nranks))
        ax.set_yticklabels([str(r) for r in frame.index], fontsize=8 if run.nranks <= 16 else 7)
        ax.set(xlabel="iteration (left of the dashed line: warm-up)",
               ylabel="rank" + (" (lines between nodes)" if len(set(nodes)) > 1 else ""))
        ax.set_title(f"{name}, ms", fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.04)
    fig.suptitle(f"{title or tables.label(run)}\n{HEATMAP_NOTE}", fontsize=9, x=0.01,
                 ha="left", va="top", y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.36 / height))
    return fig


def gantt(run: Run, window: Tuple[Optional[int], Optional[int]] = (None, None)):
    """Per-rank timeline of a window of iterations (plot/timeline_fig.py)."""
    lo, hi = timeline.window_for(run, *window)
    return gantt_chart.figure([run], [(lo, hi)])


def pick_rank_run(runs: Sequence[Run]) -> Optional[Run]:
    """The run whose ranks x iterations view says most (grouping.rank_view_order)."""
    order = grouping.rank_view_order(runs)
    return order[0] if order else None
