"""The figure of ``dtbench-analyze scaling --plot``: throughput, speedup, efficiency and exchange
share against the scale, one line per series of scaling.find_series (the report's two-panel
scaling figure is plot/time.py's ``scaling``)."""

from __future__ import annotations

import numpy as np

from .. import grouping
from ..scaling import ScalingResult


def panels(result: ScalingResult, unit: str):
    """Four panels against p: throughput, speedup and efficiency (with the ideal) and exchange
    share. Incomplete points are drawn hollow."""
    from ..plotting import legend_below, plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax_tp, ax_s, ax_e, ax_x = axes.ravel()
    names = grouping.differing_labels([s.factors for s in result.series])
    for i, s in enumerate(result.series, 1):
        pts = s.points
        p = np.array([q.p for q in pts], dtype=float)
        label = f"{i}: {s.kind}, {s.fixed}" + (f", {names[i - 1]}" if names[i - 1] else "")
        color = f"C{(i - 1) % 10}"
        hollow = [bool(q.incomplete) for q in pts]

        def plot(ax, values, _p=p, _c=color, _l=label, _h=hollow):
            v = np.array([np.nan if x is None else x for x in values], dtype=float)
            ax.plot(_p, v, "-", color=_c, label=_l)
            ax.scatter(_p, v, color=[("none" if h else _c) for h in _h], edgecolors=_c, zorder=3)
        plot(ax_tp, [q.throughput for q in pts])
        base = s.base
        if base.throughput:
            ax_tp.plot(p, base.throughput * p / base.p, ":", color=color, alpha=0.7)
        plot(ax_s, [q.speedup for q in pts])
        plot(ax_e, [q.efficiency for q in pts])
        plot(ax_x, [None if q.exchange_share is None else 100 * q.exchange_share
                    for q in pts])
    allp = sorted({q.p for s in result.series for q in s.points})
    if allp:
        lo = min(s.base.p for s in result.series)
        ax_s.plot(allp, [x / lo for x in allp], "k--", label="ideal (from smallest base)")
    ax_e.axhline(1.0, color="k", ls="--", label="ideal")
    ax_tp.set(title="throughput (dotted: ideal from the base case)", ylabel="samples/s")
    ax_s.set(title="speedup", ylabel="S = X_p / X_base")
    ax_e.set(title="parallel efficiency", ylabel="E = S * p_base / p", ylim=(0, None))
    ax_x.set(title="exchange share", ylabel="% of iteration time", ylim=(0, None))
    for ax in axes.ravel():
        ax.set_xlabel(unit)
        ax.grid(alpha=0.3)
        if allp:
            ax.set_xticks(allp)
    fig.suptitle("dtbench scaling (hollow markers: includes incomplete runs)")
    fig.tight_layout()
    legend_below(fig, [ax_tp, ax_s, ax_e], ncol=3, fontsize=8)
    return fig
