"""Figure of ``dtbench-analyze predict``: measured points, the fitted model (solid over the
measured scales, dashed beyond), and the predictions with their 90 % intervals, per strategy
(time per iteration and parallel efficiency against nodes, log scale). ``figure(result)`` takes
``predict.build``'s dict and returns a matplotlib figure; ``save`` writes it as PNG or SVG,
atomically (plotting.save).
"""

from __future__ import annotations

from typing import Dict

from .. import plotting
from ..plotting import plt

COLORS = {"sync": "C0", "hier": "C1", "ssp": "C2", "async": "C3", "mixed": "C4"}


def figure(result: Dict):
    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(11, 4.2))
    by = {}
    for p in result["predictions"]:
        if p["prediction"] is not None:
            by.setdefault(p["strategy"], []).append(p)
    for strategy, rows in by.items():
        c = COLORS.get(strategy, "k")
        rows.sort(key=lambda r: r["nodes"])
        n = [r["nodes"] for r in rows]
        it = [r["prediction"]["iteration_s"] for r in rows]
        ax_t.errorbar(n, [1e3 * x["value"] for x in it],
                      yerr=[[1e3 * (x["value"] - x["lo"]) for x in it],
                            [1e3 * (x["hi"] - x["value"]) for x in it]],
                      fmt="s", ms=4, color=c, capsize=3, label=f"{strategy} predicted (90% PI)")
        curve = sorted((q["nodes"], q["iteration_s"]) for q in result.get("curve", [])
                       if q["strategy"] == strategy)
        if curve:
            top = max(r["nodes"] for r in result["runs"])
            inside = [q for q in curve if q[0] <= top]
            beyond = [q for q in curve if q[0] >= top] or curve[-1:]
            if inside:
                ax_t.plot(*zip(*[(a, 1e3 * b) for a, b in inside]), "-", color=c, lw=1.2,
                          label=f"{strategy} model (measured range)")
            ax_t.plot(*zip(*[(a, 1e3 * b) for a, b in beyond]), "--", color=c, lw=1,
                      label=f"{strategy} model (extrapolated)")
        eff = [r.get("efficiency") for r in rows]
        if all(e is not None for e in eff):
            ax_e.plot(n, eff, "--o", color=c, ms=3, label=f"{strategy} predicted")
    for v in result["validation"]:
        if v["predicted"] is None:
            continue
        c = COLORS.get(v["strategy"], "k")
        pi = v["predicted"]["iteration_s"]
        ax_t.errorbar([v["nodes"]], [1e3 * pi["value"]],
                      yerr=[[1e3 * (pi["value"] - pi["lo"])], [1e3 * (pi["hi"] - pi["value"])]],
                      fmt="x", color=c, capsize=3,
                      label=f"{v['strategy']} held-out prediction ({100 * v['error']:+.0f}%)")
    for strategy in sorted({r["strategy"] for r in result["runs"]}):
        pts = [r for r in result["runs"] if r["strategy"] == strategy and r["iteration_s"]]
        ax_t.scatter([r["nodes"] for r in pts], [1e3 * r["iteration_s"] for r in pts],
                     color=COLORS.get(strategy, "k"), zorder=3, label=f"{strategy} measured")
    ax_t.set(xscale="log", yscale="log", xlabel="nodes", ylabel="time per iteration, ms",
             title="time per iteration: measured, model, predictions")
    ax_e.set(xscale="log", xlabel="nodes", ylabel="E = S * p_base / p", ylim=(0, None),
             title="parallel efficiency (predicted)")
    ax_e.axhline(1.0, color="k", ls=":", lw=1)
    effs = [p["efficiency"] for p in result["predictions"] if p.get("efficiency")]
    if effs and max(effs) / min(effs) > 30:   # orders of magnitude apart: a log axis shows them
        ax_e.set(yscale="log", ylim=(min(effs) / 2, 2.0))
    for ax in (ax_t, ax_e):
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(f"dtbench predict (allreduce model: {result['reference']['algorithm']})")
    fig.tight_layout()
    plotting.legend_below(fig, [ax_t, ax_e], ncol=3, fontsize=6)
    return fig


def save(result: Dict, path: str) -> None:
    """Write the figure to ``path`` (.png or .svg) atomically."""
    plotting.save(figure(result), path)
