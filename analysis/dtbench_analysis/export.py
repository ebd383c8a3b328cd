"""One tidy table (``dtbench-analyze export``) of every run's per-iteration phase times.

One row per (run, rank, iteration, phase), columns:
``run`` (file path as given), ``rank``, ``node``, ``iteration`` (0-based, as in the file),
``warmup`` (bool), ``phase``, ``seconds``, ``run_complete`` (False for rows of incomplete runs),
``precision`` and ``grad_dtype`` (the run's compute precision and gradient wire type; fp32 for
files that predate the options), so fp32 and bf16 runs can be grouped apart.
Phases: data, forward, backward, exchange, update, total, and the optional timings
exchange_wait, straggler_delay and exchange_hidden where a file records them. Only completed
iterations are exported; warm-up iterations only with ``--include-warmup`` (flagged). Written as
CSV (pandas) or Parquet (pyarrow), atomically.
"""

from __future__ import annotations

from typing import List, Sequence

import pandas as pd

from . import configs
from .runfile import PHASES, Run

FORMATS = {"csv": (".csv", ".csv.gz"), "parquet": (".parquet", ".pq")}
OPTIONAL_TIMINGS = ("exchange_wait", "straggler_delay", "exchange_hidden")
COLUMNS = ["run", "rank", "node", "iteration", "warmup", "phase", "seconds", "run_complete",
           "precision", "grad_dtype"]


def tidy(runs: Sequence[Run], include_warmup: bool = False) -> pd.DataFrame:
    """The long table of all runs (see the module docstring)."""
    frames: List[pd.DataFrame] = []
    for run in runs:
        phases = list(PHASES) + [p for p in OPTIONAL_TIMINGS if run.has(p)]
        wide = run.to_frame(fields=phases, include_warmup=include_warmup)
        nodes = dict(zip(run.ranks["rank"], run.ranks["node"]))
        long = wide.melt(id_vars=["rank", "iteration", "warmup"], value_vars=phases,
                         var_name="phase", value_name="seconds").dropna(subset=["seconds"])
        long.insert(0, "run", run.path)
        long.insert(2, "node", long["rank"].map(nodes))
        long["run_complete"] = run.is_complete
        for key, value in configs.precision(run).items():
            long[key] = value
        frames.append(long[COLUMNS])
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    table = table.astype({"rank": "int32", "node": "int32", "iteration": "int64",
                          "warmup": "bool", "seconds": "float64", "run_complete": "bool"})
    table["phase"] = pd.Categorical(table["phase"],
                                    categories=list(PHASES) + list(OPTIONAL_TIMINGS))
    return table.sort_values(["run", "rank", "iteration", "phase"], kind="stable") \
        .reset_index(drop=True)
