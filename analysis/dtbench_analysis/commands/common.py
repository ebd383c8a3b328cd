"""What every command shares: the FILES|DIR argument, ``--overwrite``, the checks of an output
path and of level options made before any work, and loading the inputs (each unreadable one
reported as one line; the caller then exits with status 2)."""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

from .. import inputs, outputs, timeline
from ..runfile import Run

INPUT_HELP = "result files (.h5) and/or directories (every *.h5 file under them)"
#: file name endings accepted by every --plot option (the format follows the ending)
FIGURE_SUFFIXES = (".png", ".svg")

Report = Callable[[str], None]


def add_inputs(parser, nargs: str = "+", metavar: str = "FILE|DIR") -> None:
    """The positional FILES|DIR argument, with the same help text in every command."""
    parser.add_argument("inputs", nargs=nargs, metavar=metavar, help=INPUT_HELP)


def add_plot(parser, what: str) -> None:
    """``--plot OUT.png|OUT.svg``: write ``what`` (a figure) to that file."""
    parser.add_argument("--plot", metavar="OUT.png|OUT.svg",
                        help=f"write {what} to this file (PNG or SVG by its ending)")


def add_ignore(parser) -> None:
    parser.add_argument("--ignore", metavar="KEY", action="append", default=[],
                        help="configuration key to ignore when grouping runs (repeatable), "
                             "e.g. tag")


def add_overwrite(parser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="replace output files that already exist")


def output_ok(args, path: str, option: str, report_error: Report,
              suffixes: Sequence[str] = FIGURE_SUFFIXES) -> bool:
    """Whether ``path`` may be written (outputs.check_output against the inputs and
    ``--overwrite``); else one line naming the option."""
    err = outputs.check_output(path, option, suffixes, args.overwrite,
                               inputs.expand(args.inputs)[0])
    if err:
        report_error(err)
    return err is None


def plot_ok(args, report_error: Report) -> bool:
    """``--plot`` checked before any work: absent, or a path that may be written."""
    return not args.plot or output_ok(args, args.plot, "--plot", report_error)


def check(ok: bool, message: str, report_error: Report) -> bool:
    """``ok``; when False, ``message`` (naming the option and what it accepts) is reported."""
    if not ok:
        report_error(message)
    return ok


def confidence_ok(value: float, report_error: Report) -> bool:
    return check(0.5 <= value < 1.0, f"--confidence {value}: accepted: a level in [0.5, 1), "
                 f"e.g. 0.95", report_error)


def target_ok(value: Optional[float], report_error: Report) -> bool:
    return check(value is None or 0.0 < value <= 1.0, f"--target {value}: accepted: an accuracy "
                 f"in (0, 1], e.g. 0.8", report_error)


def window(text: Optional[str], option: str, report_error: Report,
           accepted: str = "A:B with integers 0 <= A < B") -> Tuple[bool, tuple]:
    """(ok, (a, b)) of an A:B iteration window option (timeline.parse_window)."""
    try:
        return True, timeline.parse_window(text)
    except ValueError:
        report_error(f"{option} {text}: accepted: {accepted}")
        return False, (None, None)


def load(args, report_error: Report, fields: Optional[Sequence[str]] = None) \
        -> Tuple[List[Run], int]:
    """The runs named by ``args.inputs`` and the status (2 when any could not be read); what
    the reader read around (Run.warnings) is said as one warning line each."""
    runs, status = inputs.load_all(args.inputs, report_error, fields)
    for run in runs:
        for warning in run.warnings:
            report_error(f"warning: {run.path}: {warning}")
    return runs, status
