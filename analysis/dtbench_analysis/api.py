"""The Python API for notebooks: ``dtbench_analysis.load(paths)`` -> :class:`Results`.

    import dtbench_analysis as dta
    res = dta.load("results/")          # files and/or folders, like the command line
    res.phases                          # pandas DataFrame: where the time goes, per run
    res.figure("phases")                # the same figure as the report / --plot

Every table is a DataFrame built by tables.py (times in ms), computed on first use and kept.
Figures are matplotlib figures (plot/time.py, plot/training.py, plot/memory_fig.py); save one with
``dtbench_analysis.plotting.save(fig, "x.svg")`` (PNG or SVG by the name's suffix).
"""

from __future__ import annotations

from functools import cached_property
from typing import Dict, List, Optional, Sequence, Tuple, Union

import pandas as pd

from . import grouping, inputs, scaling, summary, tables
from .runfile import Run, RunFileError, load_run
from .summary import Summary

#: figure names accepted by Results.figure
FIGURES = ("phases", "scaling", "heatmap", "gantt", "strategies", "pipelines", "layouts",
           "samples", "memory")


class Results:
    """A set of runs and the report's tables about them."""

    def __init__(self, runs: Sequence[Run], ignore: Sequence[str] = (),
                 target: Optional[float] = None):
        self.runs: List[Run] = list(runs)
        self.ignore = tuple(ignore)
        self.target = target

    def __repr__(self) -> str:
        return f"<dtbench_analysis.Results: {len(self.runs)} runs>"

    def run(self, which: Union[int, str, Run] = 0) -> Run:
        """A run by position, by file name (or the end of its path), or itself."""
        if isinstance(which, Run):
            return which
        if isinstance(which, int):
            return self.runs[which]
        for r in self.runs:
            if r.path == which or r.path.endswith("/" + which.lstrip("/")):
                return r
        raise KeyError(f"no run {which!r}")

    @cached_property
    def summaries(self) -> List[Summary]:
        return [summary.summarize(r) for r in self.runs]

    @cached_property
    def runs_table(self) -> pd.DataFrame:
        return tables.runs_table(self.runs, summaries=self.summaries)

    @cached_property
    def phases(self) -> pd.DataFrame:
        return tables.phases(self.runs, summaries=self.summaries)

    @cached_property
    def scaling_result(self) -> scaling.ScalingResult:
        return scaling.find_series(self.runs, "ranks", self.ignore)

    @cached_property
    def scaling(self) -> pd.DataFrame:
        return tables.scaling_points(self.runs, self.ignore, self.scaling_result)

    @cached_property
    def comparison_groups(self):
        return tables.comparison_groups(self.runs, self.ignore, self.target)

    @cached_property
    def comparisons(self) -> pd.DataFrame:
        return tables.comparisons(self.runs, groups=self.comparison_groups)

    @cached_property
    def strategies(self) -> pd.DataFrame:
        return tables.strategies(self.runs, target=self.target)

    @cached_property
    def pipelines(self) -> pd.DataFrame:
        return tables.pipeline(self.runs)

    @cached_property
    def layouts(self) -> pd.DataFrame:
        """Per run its layout (tp x pp x dp) and ms per iteration of compute, tensor-group
        allreduces, bubble, pipeline transfer, data-parallel exchange and the rest."""
        return tables.layouts(self.runs)

    @cached_property
    def samples(self) -> pd.DataFrame:
        return tables.samples(self.runs)

    @cached_property
    def memory(self) -> pd.DataFrame:
        """Memory per rank against time per iteration, one row per run that records memory."""
        return tables.memory_time(self.runs)

    def rank_iteration(self, which: Union[int, str, Run] = 0, field: str = "total") \
            -> pd.DataFrame:
        """ms per rank x iteration of ``field`` ("total", "wait", "busy" or any
        /iterations field) for one run."""
        return tables.rank_iteration(self.run(which), field)

    def figure(self, name: str, run: Union[int, str, Run, None] = None,
               window: Tuple[Optional[int], Optional[int]] = (None, None)):
        """One of FIGURES as a matplotlib figure (``run`` picks the run of heatmap/gantt)."""
        from .plot import time as figures
        from .plot import training
        if name == "phases":
            return figures.breakdown(self.phases)
        if name == "scaling":
            return figures.scaling(self.scaling)
        if name in ("heatmap", "gantt"):
            r = self.run(run) if run is not None else figures.pick_rank_run(self.runs)
            if r is None:
                raise ValueError("no run has a completed iteration")
            return figures.heatmaps(r) if name == "heatmap" else figures.gantt(r, window)
        if name == "strategies":
            groups = grouping.strategy_groups(self.runs, self.ignore)
            return training.strategies(groups[0] if groups else self.runs, self.target)
        if name == "pipelines":
            return training.pipeline(self.pipelines)
        if name == "layouts":
            from .plot import layout_fig
            return layout_fig.layouts(self.layouts)
        if name == "samples":
            return training.samples(self.runs)
        if name == "memory":
            from .plot import memory_fig
            return memory_fig.memory_time(self.memory)
        raise ValueError(f"unknown figure {name!r}; accepted: {', '.join(FIGURES)}")


def load(*paths, ignore: Sequence[str] = (), target: Optional[float] = None) -> Results:
    """Load result files and folders (every ``*.h5`` under a folder). Raises RunFileError
    naming the first path that cannot be read."""
    items = [p for group in paths for p in ([group] if isinstance(group, (str, bytes))
                                             or hasattr(group, "__fspath__") else group)]
    found, errors = inputs.expand([str(p) for p in items])
    if errors:
        raise RunFileError(errors[0])
    return Results([load_run(p) for p in found], ignore, target)
