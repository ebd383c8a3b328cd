"""Figures about training and resources: strategies (loss and test accuracy against time and
iterations, time to the target accuracy marked), pipelines (per-stage compute/send/receive/idle
and the bubble fraction against micro-batches) and the sampler (power, memory, utilisation over
time, energy per sample). Each returns a matplotlib figure.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .. import configs, grouping, metrics, tables
from ..runfile import Run
from .time import empty_axes

#: line styles telling apart runs of one strategy that differ in something else
LINE_STYLES = ("-", "--", ":", "-.")
PIPE_COLORS = {"compute": "#4c72b0", "send": "#dd8452", "recv": "#55a868", "idle": "#c44e52"}


def strategies(runs: Sequence[Run], target: Optional[float] = None, names=None):
    """2 x 2: loss and test accuracy against wall time (s since start) and against iterations;
    colour = exchange strategy, line style = the rest of the configuration where it differs
    (ranks, launcher, transport, precision, ...), and each label names the file and every
    configuration key in which the runs differ (grouping.line_labels); the target accuracy
    dotted and each run's first evaluation reaching it starred."""
    from ..plotting import legend_below, plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col")
    (ax_lt, ax_li), (ax_at, ax_ai) = axes
    if not runs:
        for ax in axes.ravel():
            empty_axes(ax, "no runs")
        return fig
    strategies_seen = list(OrderedDict.fromkeys(r.exchange for r in runs))
    goals = set()
    any_eval = False
    texts = grouping.line_labels(runs)
    rest = [configs.key_of(r, grouping.FACTORS["exchange"][:5] + grouping.UNLABELLED)
            for r in runs]
    rest_seen = list(OrderedDict.fromkeys(rest))
    for run, own in zip(runs, rest):
        color = f"C{strategies_seen.index(run.exchange) % 10}"
        style = LINE_STYLES[rest_seen.index(own) % len(LINE_STYLES)]
        name = f"{tables.run_name(run, names)}: {texts[run.path]}" + \
            ("" if run.is_complete else " *")
        pr = tables.progress(run)
        ax_lt.plot(pr["time_s"], pr["loss"], color=color, ls=style, lw=1.1, label=name)
        ax_li.plot(pr["iteration"], pr["loss"], color=color, ls=style, lw=1.1)
        ev = run.eval[np.isfinite(run.eval["accuracy"].to_numpy(dtype=float))]
        if not ev.empty:
            any_eval = True
            ax_at.plot(ev["time"], ev["accuracy"], "o", ls=style, color=color, ms=3)
            ax_ai.plot(ev["iteration"], ev["accuracy"], "o", ls=style, color=color, ms=3)
        goal = target if target is not None else run.target_accuracy
        tt = metrics.time_to_target(run, goal)
        if goal is not None:
            goals.add(goal)
        if tt and tt["reached"]:
            ax_at.plot([tt["time_s"]], [goal], "*", color=color, ms=13, mec="k")
            ax_ai.plot([tt["iteration"]], [goal], "*", color=color, ms=13, mec="k")
            ax_at.annotate(f"{tt['time_s']:.2f} s", (tt["time_s"], goal), fontsize=7,
                           xytext=(4, -12), textcoords="offset points", color=color)
    losses = np.concatenate([tables.progress(r)["loss"].to_numpy() for r in runs])
    losses = losses[np.isfinite(losses) & (losses > 0)]
    if losses.size and losses.max() > 20 * np.median(losses):     # a diverging run
        for ax in (ax_lt, ax_li):
            ax.set_yscale("log")
    for goal in goals:
        for ax in (ax_at, ax_ai):
            ax.axhline(goal, color="k", ls=":", lw=1)
    if not any_eval:
        for ax in (ax_at, ax_ai):
            ax.text(0.5, 0.5, "no evaluations recorded\n(dtbench --eval-every N with a data "
                    "set that has a test split)", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8)
    first = runs[0]
    fig.suptitle(f"{first.attrs.get('model')} on {first.attrs.get('dataset')}: "
                 f"{', '.join(strategies_seen)}" + (f"; target accuracy {min(goals):g} (star: "
                                                    "first reached)" if goals else ""),
                 fontsize=10, x=0.01, ha="left")
    ax_lt.set(ylabel="training loss (mean over ranks)", title="against wall time")
    ax_li.set(title="against iterations")
    ax_at.set(ylabel="test accuracy", xlabel="s since start (aligned clock)")
    ax_ai.set(xlabel="iterations completed (warm-up included)")
    for ax in axes.ravel():
        ax.grid(alpha=0.3)
    fig.tight_layout()
    legend_below(fig, [ax_lt], ncol=2)
    return fig


def pipeline(pipe: pd.DataFrame):
    """Left: per run and stage, mean ms per iteration of compute, send, receive and idle
    (bubble). Right: bubble fraction (idle / their sum, mean over stages) against micro-batches,
    one line per number of stages, with the GPipe ideal (K-1)/(M+K-1)."""
    from ..plotting import legend_below, plt
    fig, (ax_b, ax_f) = plt.subplots(1, 2, figsize=(11, 1.8 + 0.3 * max(4, len(pipe))),
                                     gridspec_kw={"width_ratios": [3, 2]})
    if pipe.empty:
        for ax in (ax_b, ax_f):
            empty_axes(ax, "no pipeline runs (--parallel model/hybrid)")
        return fig
    labels = [f"{r} | stage {s}" for r, s in zip(pipe["run"], pipe["stage"])]
    y = np.arange(len(pipe))
    left = np.zeros(len(pipe))
    for part, color in PIPE_COLORS.items():
        w = pipe[part].fillna(0).to_numpy(dtype=float)
        ax_b.barh(y, w, left=left, color=color, label=part + (" (bubble)" if part == "idle"
                                                              else ""), height=0.7)
        left += w
    ax_b.set_yticks(y)
    ax_b.set_yticklabels(labels, fontsize=7)
    ax_b.invert_yaxis()
    ax_b.set(xlabel="ms per iteration (mean over the stage's ranks)",
             title="per stage: compute, send, receive, idle")
    per_run = pipe.groupby(["file", "stages", "microbatches"], as_index=False)[
        "bubble fraction"].mean()
    for i, (k, pts) in enumerate(per_run.groupby("stages")):
        pts = pts.groupby("microbatches", as_index=False)["bubble fraction"].median()
        ax_f.plot(pts["microbatches"], pts["bubble fraction"], "o-", color=f"C{i}",
                  label=f"measured, K={k}")
        m = np.linspace(1, max(2, pts["microbatches"].max()) * 1.2, 50)
        ax_f.plot(m, (k - 1) / (m + k - 1), ":", color=f"C{i}", label=f"ideal (K-1)/(M+K-1)")
    ax_f.set(xlabel="micro-batches M", ylabel="idle / (compute+send+recv+idle)",
             title="bubble fraction", ylim=(0, 1))
    ax_f.grid(alpha=0.3)
    fig.tight_layout()
    legend_below(fig, [ax_b, ax_f], ncol=4)
    return fig


def _sample_panels(runs: Sequence[Run]) -> List[Tuple[str, str]]:
    panels = []
    for name, title in (("power_w", "power, W"), ("memory_mib", "memory, MiB"),
                        ("utilization", "utilisation, %")):
        if any(name in r.samples and np.isfinite(r.samples[name]).any() for r in runs):
            panels.append((name, title))
    return panels


def samples(runs: Sequence[Run], names=None):
    """Sampled power, memory and utilisation against time (aligned clock), one line per rank
    of every sampled run; energy per sample in the legend when power was sampled."""
    from .. import energy
    from ..plotting import legend_below, plt
    runs = [r for r in runs if r.samples]
    panels = _sample_panels(runs)
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(11, 3.8), squeeze=False)
    axes = axes[0]
    if not panels:
        empty_axes(axes[0], "no samples (dtbench --sample-hz N)")
        return fig
    for i, run in enumerate(runs):
        e = energy.energy_summary(run)
        for row in range(run.nranks):
            t = run.samples.get("time")[row]
            name = f"{tables.label(run, names)} r{int(run.ranks['rank'].iloc[row])}"
            if row == 0 and e and e["joules_per_sample"]:
                name += f" ({e['joules_per_sample']:.3g} J/sample)"
            for ax, (field, _) in zip(axes, panels):
                v = run.samples[field][row] if field in run.samples else None
                if v is None:
                    continue
                ok = np.isfinite(t) & np.isfinite(v)
                if ok.any():
                    ax.plot(t[ok], v[ok], color=f"C{i % 10}", lw=1,
                            ls=("-", "--", ":", "-.")[row % 4], label=name)
    for ax, (field, title) in zip(axes, panels):
        ax.set(title=title, xlabel="s since start (aligned clock)")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    legend_below(fig, axes[:1], ncol=3)
    return fig


def sampled_runs(runs: Sequence[Run]) -> List[Run]:
    return [r for r in runs if r.samples and _sample_panels([r])]
