"""Command line entry point ``dtbench-analyze COMMAND ...``.

Each command lives in its own module of commands/ exposing ``add_parser(subparsers)``, which
registers a sub-parser whose ``func(args, report_error) -> int`` does the work (options, text
output, figures); what it computes comes from the library (summary.py, scaling.py, ...).
Unreadable input files and bad option values are reported as one line on stderr
(``dtbench-analyze: FILE: why`` or ``dtbench-analyze COMMAND: argument --opt: why``) and give
exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import __version__
from .commands import (compare_cmd, export_cmd, figure, predict_cmd, report_cmd, scaling_cmd,
                       stragglers_cmd, summary_cmd, timeline_cmd)

PROG = "dtbench-analyze"
COMMANDS = (summary_cmd, scaling_cmd, stragglers_cmd, timeline_cmd, compare_cmd, export_cmd,
            report_cmd, figure, predict_cmd)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (no usage dump), status 2.
    Sub-parsers inherit the class (argparse creates them with ``type(parent)``)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description="Analyse dtbench HDF5 result files.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def report_error(message: str) -> None:
    """One line on stderr, prefixed with the program name."""
    print(f"{PROG}: {' '.join(message.split())}", file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args, report_error)
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
