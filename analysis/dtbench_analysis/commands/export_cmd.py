"""``dtbench-analyze export FILES --format csv|parquet -o OUT``: export.tidy written atomically."""

from __future__ import annotations

from .. import outputs
from ..export import FORMATS, tidy
from . import common


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("export", help="tidy table (run, rank, iteration, phase, seconds) "
                              "as CSV or Parquet",
                              description="Export per-iteration phase times of every run as one "
                                          "tidy table for pandas users.")
    common.add_inputs(p)
    p.add_argument("--format", choices=sorted(FORMATS), default="csv",
                   help="csv (pandas) or parquet (pyarrow) [csv]")
    p.add_argument("-o", "--output", metavar="OUT", required=True,
                   help="file to write (.csv or .csv.gz; .parquet or .pq)")
    p.add_argument("--include-warmup", action="store_true",
                   help="also export warm-up iterations (flagged in the warmup column)")
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    def report(err):
        report_error(err + ("" if "accepted" not in err else f" for --format {args.format}"))
    if not common.output_ok(args, args.output, "--output", report, FORMATS[args.format]):
        return 2
    runs, status = common.load(args, report_error)
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
