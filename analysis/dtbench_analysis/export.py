"""The ``export`` command: one tidy table of every run's per-iteration phase times.

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

from . import configs, inputs, outputs
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


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("export", help="tidy table (run, rank, iteration, phase, seconds) "
                              "as CSV or Parquet",
                              description="Export per-iteration phase times of every run as one "
                                          "tidy table for pandas users.")
    inputs.add_inputs(p)
    p.add_argument("--format", choices=sorted(FORMATS), default="csv",
                   help="csv (pandas) or parquet (pyarrow) [csv]")
    p.add_argument("-o", "--output", metavar="OUT", required=True,
                   help="file to write (.csv or .csv.gz; .parquet or .pq)")
    p.add_argument("--include-warmup", action="store_true",
                   help="also export warm-up iterations (flagged in the warmup column)")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    paths, _ = inputs.expand(args.inputs)
    err = outputs.check_output(args.output, "--output", FORMATS[args.format], args.overwrite,
                               paths)
    if err:
        report_error(err + ("" if "accepted" not in err else f" for --format {args.format}"))
        return 2
    runs, status = inputs.load_all(args.inputs, report_error)
    if status:
        return status
    table = tidy(runs, args.include_warmup)
    if args.format == "csv":
        def write(tmp):
            table.to_csv(tmp, index=False,
                         compression="gzip" if args.output.endswith(".gz") else None)
    else:
        def write(tmp):
            table.to_parquet(tmp, engine="pyarrow", index=False)
    outputs.write_atomically(args.output, write)
    incomplete = sum(not r.is_complete for r in runs)
    note = f" ({incomplete} incomplete: run_complete=False)" if incomplete else ""
    warm = "warm-up included (warmup=True)" if args.include_warmup else "warm-up excluded"
    print(f"wrote {args.output}: {len(table)} rows from {len(runs)} runs{note}; {warm}")
    return 0
