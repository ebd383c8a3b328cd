"""The ``report`` command: one self-contained HTML page about a set of runs.

Sections: the runs (factors, completeness, headline numbers), each run's summary, scaling,
stragglers and the comparison of configurations, plus how every number was obtained. Figures are
PNG images embedded as base64 ``data:`` URIs and the style sheet is inline, so the page needs no
other file and no network; it has no scripts. Written atomically.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from typing import List, Sequence

from . import compare, configs, conventions, inputs, outputs, scaling, stragglers, summary
from .runfile import Run

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
tr.incomplete td { background: #fff3e0; }
.badge { background: #e65100; color: white; border-radius: 3px; padding: 0 0.4em;
         font-size: 0.8em; }
pre { background: #f8f8f8; padding: 0.6em; white-space: pre-wrap; font-size: 0.8em; }
img { max-width: 100%; border: 1px solid #eee; }
.note { color: #555; font-size: 0.9em; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _img(fig, ident: str, alt: str) -> str:
    from .plotting import data_uri, png_bytes
    return f'<p><img id="{_e(ident)}" class="figure" alt="{_e(alt)}" ' \
           f'src="{data_uri(png_bytes(fig))}"></p>'


BADGE = '<span class="badge">INCOMPLETE</span>'


def display_names(runs: Sequence[Run]) -> dict:
    """path -> the path relative to the folder common to all runs (unambiguous and short)."""
    if not runs:
        return {}
    folders = [os.path.dirname(os.path.abspath(r.path)) for r in runs]
    common = os.path.commonpath(folders)
    return {r.path: os.path.relpath(os.path.abspath(r.path), common) for r in runs}


def _heading(run: Run, names) -> str:
    return f"<h3>{_e(names[run.path])}{'' if run.is_complete else ' ' + BADGE}</h3>"


def _runs_table(runs: Sequence[Run], sums, names) -> str:
    head = ["file", "status", "model", "dataset", "exchange", "ranks", "nodes", "batch",
            "measured iters/rank", "median iteration ms", "samples/s", "exchange share"]
    rows = ["<table id=\"runs-table\"><tr>" +
            "".join(f'<th class="{"l" if i < 5 else ""}">{_e(h)}</th>'
                    for i, h in enumerate(head)) + "</tr>"]
    for run, s in zip(runs, sums):
        f, it = s["factors"], s["iterations"]
        lo, hi = it["measured_per_rank_min"], it["measured_per_rank_max"]
        status = "complete" if run.is_complete else f"{BADGE} {_e(run.completeness_note())}"
        cp = s["throughput"]["critical_path_median_ms"]
        med = cp if cp is not None else s["phases_ms"]["total"]["median"]
        tp = s["throughput"]["samples_per_s"]
        share = s["exchange_share"]["median"]
        cells = [f'<td class="l">{_e(names[run.path])}</td>',
                 f'<td class="l">{status}</td>'] + \
            [f'<td class="l">{_e(f[k])}</td>' for k in ("model", "dataset", "exchange")] + \
            [f"<td>{_e(v)}</td>" for v in (f["nranks"], f["nnodes"], f["batch_global"],
                                           lo if lo == hi else f"{lo}-{hi}",
                                           "n/a" if med is None else f"{med:.3f}",
                                           "n/a" if tp is None else f"{tp:.1f}",
                                           "n/a" if share is None else f"{share:.1%}")]
        cls = "" if run.is_complete else ' class="incomplete"'
        rows.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    return "\n".join(rows) + "</table>"


def build(runs: Sequence[Run], sources: Sequence[str], ignore: Sequence[str] = (),
          target=None, title: str = "dtbench report") -> str:
    """The whole HTML page as a string."""
    sums = [summary.summarize(r) for r in runs]
    names = display_names(runs)
    parts: List[str] = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">{len(runs)} runs from {_e(", ".join(sources))}; generated '
        f'{_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}.</p>',
        '<p class="note">How the numbers were obtained: '
        f"{_e(conventions.warmup_statement(runs))}; unwritten iterations of killed runs "
        "excluded (such runs are marked INCOMPLETE everywhere); medians and percentiles "
        "(linear interpolation) rather than means; across ranks, the critical path (max over "
        "ranks) per iteration for lockstep exchanges and each rank's own time otherwise; "
        "repeats of a configuration pooled, their count shown; confidence intervals of "
        "medians from order statistics; differences tested with Mann-Whitney U.</p>",
        '<p><a href="#runs">runs</a> · <a href="#summaries">summaries</a> · '
        '<a href="#scaling">scaling</a> · <a href="#stragglers">stragglers</a> · '
        '<a href="#comparison">comparison</a></p>',
        '<section id="runs"><h2>Runs</h2>', _runs_table(runs, sums, names)]
    incomplete = conventions.incomplete_lines(runs)
    if incomplete:
        parts.append("<p>" + "<br>".join(_e(x) for x in incomplete) + "</p>")
    parts.append("</section>")

    parts.append('<section id="summaries"><h2>Summaries</h2>')
    for run, s in zip(runs, sums):
        parts.append(_heading(run, names) + f"<pre>{_e(summary.format_text(s))}</pre>")
    parts.append("</section>")

    parts.append('<section id="scaling"><h2>Scaling</h2>')
    result = scaling.find_series(runs, "ranks", ignore)
    parts.append(f"<pre>{_e(scaling.format_text(result, runs, 'ranks', 0.95))}</pre>")
    if result["series"]:
        parts.append(_img(scaling.figure(result, "ranks"), "fig-scaling", "scaling figure"))
    else:
        parts.append('<p class="note">No scaling series: no two scales share a global or '
                     'per-rank batch in one configuration.</p>')
    parts.append("</section>")

    parts.append('<section id="stragglers"><h2>Stragglers</h2>')
    multi = [r for r in runs if r.nranks > 1]
    if not multi:
        parts.append('<p class="note">Every run has a single rank.</p>')
    for run in multi:
        a = stragglers.analyse(run)
        parts.append(_heading(run, names) + f"<p>{_e(stragglers.verdict(a))}</p>"
                     f"<pre>{_e(stragglers.format_text(a, run, top=8))}</pre>")
    parts.append("</section>")

    parts.append('<section id="comparison"><h2>Comparison</h2>')
    cmp = compare.compare(runs, ignore, target=target)
    if len(cmp["groups"]) < 2:
        parts.append('<p class="note">One configuration only: nothing to compare; its '
                     'statistics and training progress follow.</p>')
    parts.append(f"<pre>{_e(compare.format_text(cmp, runs))}</pre>")
    parts.append(_img(compare.figure(runs, cmp), "fig-progress",
                      "training loss and test accuracy against time"))
    parts.append("</section>")
    parts.append("<p class=\"note\">Configuration keys: " +
                 _e(", ".join(sorted({k for r in runs for k in configs.configuration(r)}))) +
                 "</p></body></html>")
    return "\n".join(parts) + "\n"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="self-contained HTML report (summary, scaling, "
                              "stragglers, comparison)",
                              description="Write one self-contained HTML page about the runs.")
    inputs.add_inputs(p)
    p.add_argument("-o", "--output", metavar="OUT.html", required=True,
                   help="HTML file to write")
    p.add_argument("--title", default="dtbench report", help="page title")
    p.add_argument("--target", type=float, metavar="ACC",
                   help="target test accuracy (0..1); default: the runs' target_accuracy")
    p.add_argument("--ignore", metavar="KEY", action="append", default=[],
                   help="configuration key to ignore when grouping (repeatable)")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    if args.target is not None and not 0.0 < args.target <= 1.0:
        report_error(f"--target {args.target}: accepted: an accuracy in (0, 1], e.g. 0.8")
        return 2
    paths, _ = inputs.expand(args.inputs)
    err = outputs.check_output(args.output, "--output", (".html", ".htm"), args.overwrite,
                               paths)
    if err:
        report_error(err)
        return 2
    runs, status = inputs.load_all(args.inputs, report_error)
    if status:
        return status
    page = build(runs, args.inputs, args.ignore, args.target, args.title)
    outputs.write_text(args.output, page)
    n_incomplete = sum(not r.is_complete for r in runs)
    print(f"wrote {args.output}: {len(runs)} runs"
          + (f", {n_incomplete} incomplete" if n_incomplete else "")
          + f", {page.count('<img ')} figures, {len(page) // 1024} KiB")
    return 0
