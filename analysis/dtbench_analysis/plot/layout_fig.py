"""Layouts compared (the report's "Layouts" figure, ``dtbench-analyze figure layouts``): one
horizontal bar per run, the time per iteration of its mean rank split into compute, the tensor
group's allreduces, the pipeline's bubble and transfer, the data-parallel exchange and the rest
(tables.layouts, layout.split), runs of one rank count side by side.
"""

from __future__ import annotations

import pandas as pd

from .. import layout
from .time import empty_axes

COLORS = {"compute": "#4c72b0", "tensor": "#dd8452", "bubble": "#c44e52",
          "pipe_transfer": "#8172b3", "exchange": "#55a868", "other": "#bbbbbb"}


def layouts(frame: pd.DataFrame):
    """Stacked bars of tables.layouts(runs): ms per iteration per part, one bar per run, sorted
    by rank count and then by the parts' total; each bar labelled with its layout and run."""
    from ..plotting import legend_below, plt
    rows = frame.sort_values(["nranks", "total"], kind="stable").reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.45 * max(len(rows), 1)))
    if rows.empty:
        empty_axes(ax, "no runs")
        return fig
    left = [0.0] * len(rows)
    for part in layout.PARTS:
        widths = rows[part].fillna(0.0).clip(lower=0.0).tolist()
        ax.barh(range(len(rows)), widths, left=left, color=COLORS[part],
                label=layout.PART_NAMES[part])
        left = [a + b for a, b in zip(left, widths)]
    for y, total in enumerate(rows["total"]):
        ax.text(left[y], y, f" {total:.1f} ms", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{lay}: {run}" for lay, run in zip(rows["layout"], rows["run"])],
                       fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left) * 1.15 if max(left) > 0 else 1)
    ax.set(xlabel="ms per iteration (mean over ranks, median over measured iterations)",
           title="Layouts (tp: tensor group, pp: pipeline stages, dp: replicas)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    legend_below(fig, [ax], ncol=3, fontsize=8)
    return fig
