"""``dtbench-analyze report DIR -o report.html``: one self-contained HTML page about a folder
of runs, figures first.

Sections, each with its figures first and its table second: where the time goes (stacked phases
per run, exchange share and efficiency), scaling (speedup and efficiency with intervals per
series), ranks x iterations (heat maps and a Gantt chart of a window), strategies (loss and
accuracy against time and iterations, time to target), pipelines and layouts (where the runs
hold two layouts, one model-parallel, plot/layout_fig.py: each run's time per iteration split
into compute, tensor-group allreduces, bubble, pipeline transfer and data-parallel exchange;
per-stage compute, send, receive, idle; bubble fraction against micro-batches), power and
memory (sampler), comparisons
(only between runs that differ in one factor: grouping.py), then the runs and the text summaries.
A folder with scaling series opens with the study (plot/study_fig.py: per series, time per
iteration split into compute and exchange, then speedup and efficiency, as small multiples);
runs recording their memory per rank under two exchange strategies or more, a sharded one
(zero1-3) among them, get "Memory and time" (plot/memory_fig.py: one point per run, memory per
rank against time per iteration) after where the time goes;
with more than FOLD_RUNS runs the scaling table follows and every per-run section is folded
into one closed ``<details>`` element.
Figures are PNG images embedded as base64 ``data:`` URIs, the style sheet is inline, there are
no scripts: the page needs no other file and no network. Written atomically. The same tables
are DataFrames from ``dtbench_analysis.load`` (api.py).
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .. import configs, conventions, grouping, outputs, stragglers, tables, timeline
from ..api import Results
from ..plot import time as figures
from ..plot import layout_fig, training
from ..runfile import Run
from . import common
from . import compare_cmd as compare_text
from . import stragglers_cmd as stragglers_text
from . import summary_cmd as summary_text

CSS = """
body { font-family: sans-serif; margin: 1em auto; max-width: 1200px; padding: 0 1em;
       color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.6em; }
h3 { font-size: 1em; margin: 1em 0 0.3em; }
nav a { margin-right: 0.8em; }
.figs img { max-width: 100%; height: auto; display: block; margin: 0.4em 0;
            border: 1px solid #eee; }
.tablewrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.45em; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
tr.incomplete td { background: #fff3e0; }
.badge { background: #e65100; color: white; border-radius: 3px; padding: 0 0.4em;
         font-size: 0.8em; }
pre { background: #f8f8f8; padding: 0.6em; white-space: pre-wrap; font-size: 0.75em; }
.note { color: #555; font-size: 0.9em; }
details.per-run > summary { font-size: 1.2em; font-weight: bold; margin-top: 1.6em;
                            cursor: pointer; }
"""

BADGE = '<span class="badge">INCOMPLETE</span>'
#: sections of the page, in order: (id, heading)
SECTIONS = (("time", "Where the time goes"), ("scaling", "Scaling"),
            ("ranks", "Ranks x iterations"), ("strategies", "Strategies"),
            ("pipelines", "Pipelines and layouts"), ("resources", "Power and memory"),
            ("comparisons", "Comparisons"), ("runs", "Runs"), ("details", "Details"))
#: the section a folder with scaling series opens with
STUDY = ("study", "Scaling study")
#: after "Where the time goes" where the runs that record memory per rank hold two exchange
#: strategies or more, one of them sharded (zero1-3, beside sync or each other): memory per rank
#: against time per iteration
MEMORY = ("memory", "Memory and time")
#: a study of more runs than this folds its per-run sections (a small report stays as it is)
FOLD_RUNS = 12
MAX_HEATMAPS = 3
MAX_STRATEGY_FIGURES = 3


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _img(fig, ident: str, alt: str) -> str:
    from ..plotting import data_uri, png_bytes
    return f'<img id="{_e(ident)}" class="figure" alt="{_e(alt)}" ' \
           f'src="{data_uri(png_bytes(fig))}">'


def display_names(runs: Sequence[Run]) -> dict:
    """path -> the path relative to the folder common to all runs (unambiguous and short)."""
    if not runs:
        return {}
    folders = [os.path.dirname(os.path.abspath(r.path)) for r in runs]
    common = os.path.commonpath(folders)
    return {r.path: os.path.relpath(os.path.abspath(r.path), common) for r in runs}


def _cell(value, column: str) -> Tuple[str, bool]:
    """(text, left-aligned) for one table cell."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "n/a", False
    if isinstance(value, (bool, np.bool_)):
        return ("yes" if value else "no"), True
    if isinstance(value, (float, np.floating)):
        if (any(w in column for w in ("share", "efficiency", "fraction", "bubble")) and
                "ms" not in column) or column == "MFU":
            return f"{value:.1%}", False
        if column == "p":
            return f"{value:.3g}", False
        return (f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"), False
    if isinstance(value, (int, np.integer)):
        return str(int(value)), False
    return str(value), True


def html_table(frame: pd.DataFrame, ident: str, drop: Sequence[str] = ("file",),
               incomplete: Optional[Sequence[bool]] = None) -> str:
    """A DataFrame as an HTML table (numbers right-aligned, NaN as n/a, shares in %)."""
    frame = frame.drop(columns=[c for c in drop if c in frame.columns])
    head = "".join(f"<th>{_e(c)}</th>" for c in frame.columns)
    rows = [f'<div class="tablewrap"><table id="{_e(ident)}"><tr>{head}</tr>']
    for i, rec in enumerate(frame.itertuples(index=False)):
        cells = []
        for col, v in zip(frame.columns, rec):
            text, left = _cell(v, str(col))
            cells.append(f'<td{" class=l" if left else ""}>{_e(text)}</td>')
        cls = ' class="incomplete"' if incomplete is not None and incomplete[i] else ""
        rows.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    return "\n".join(rows) + "</table></div>"


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


def _section_time(res: Results, names) -> List[str]:
    ph = res.phases.assign(run=[t.replace(r.path, names[r.path]) for t, r in
                                zip(res.phases["run"], res.runs)])
    return ['<div class="figs">', _img(figures.breakdown(ph), "fig-phases",
                                       "stacked phases per run"), "</div>",
            _note("Mean ms per rank and measured iteration of each phase (means add up to the "
                  "mean iteration; the median time per iteration is in the table). Exchange "
                  "wait: waiting for other ranks (recorded by newer exchanges; else all of the "
                  "exchange counts as transfer). Hidden exchange: overlapped with backward, "
                  "not part of the iteration. \"transfer Nx library alone\": the measured "
                  "transfer (the exchange without its wait) over the library's own collectives "
                  "on the same buckets (the calibration, where the file has one); 1x is as "
                  "fast as the library."),
            html_table(ph, "table-phases")]


def _section_scaling(res: Results) -> List[str]:
    pts = res.scaling
    if pts.empty:
        return [_note("No scaling series: no two scales (ranks) share a configuration and a "
                      "global or per-rank batch.")]
    unit = figures.scaling_unit(pts)
    return ['<div class="figs">', _img(figures.scaling(pts), "fig-scaling",
                                       f"speedup, efficiency and exchange share against {unit}"),
            "</div>",
            _note("One line per series (solid: strong scaling, global batch fixed; dashed: "
                  "weak scaling, per-rank batch fixed); error bars from the 95% confidence "
                  "interval of the median time per iteration (repeats pooled; fewer than 6 "
                  "iterations give none); dotted: ideal. Exchange share: the median over "
                  f"iterations of the exchange's share of the ranks' time. Against {unit}"
                  + (" (every series keeps its ranks per node)." if unit == "nodes" else ".")),
            html_table(pts, "table-scaling")]


def _section_study(res: Results) -> List[str]:
    from ..plot import study_fig
    pts = res.scaling
    unit = figures.scaling_unit(pts)
    return ['<div class="figs">',
            _img(study_fig.time_panels(pts, unit), "fig-study-time",
                 f"time per iteration, compute and exchange, against {unit}, per series"),
            _img(study_fig.speedup_panels(pts, unit), "fig-study-speedup",
                 f"speedup and efficiency against {unit}, per series"), "</div>",
            _note(f"One panel per scaling series (numbered as in the Scaling table), each "
                  f"strategy's strong series (global batch fixed) beside its weak one (per-rank "
                  f"batch fixed); every panel on the same axes. Time: the median time per "
                  f"iteration (repeats pooled; bar: 95% confidence interval), split by the "
                  f"median exchange share into exchange and compute (everything else: data, "
                  f"forward, backward, update), as dtbench-analyze scaling prints them. "
                  f"Speedup: throughput over the series' base case (dotted: ideal); "
                  f"efficiency E = S p_base / p (dotted: 1). Against {unit}.")]


def _section_memory(res: Results, names) -> List[str]:
    from ..plot import memory_fig
    pts = res.memory.assign(run=[names.get(f, f) for f in res.memory["file"]])
    return ['<div class="figs">',
            _img(memory_fig.memory_time(pts), "fig-memory",
                 "memory per rank against time per iteration, one point per run"), "</div>",
            _note("One point per run: the median time per iteration (critical path for "
                  "lockstep runs, as everywhere in this report) against the memory per rank "
                  "of the largest rank: the measured peak resident memory "
                  "(/ranks/memory_peak_resident, ru_maxrss: libraries, MPI's buffers and "
                  "activations included) where the file records it, else the plan's "
                  "parameters, gradients and optimizer state (/ranks/memory_*; hollow "
                  "marker), whose bar sits below a measured point. Colour: the exchange "
                  "strategy; marker: the strategy, or the model where the runs hold several "
                  "(zero1/zero2 shard the optimizer's state, zero3 the "
                  "parameters and gradients too). Collectives: medians per rank and "
                  "iteration (zero1, zero2 inside the exchange; zero3 inside forward and "
                  "backward)."),
            html_table(pts.dropna(axis=1, how="all"), "table-memory")]


def _section_ranks(res: Results, names, window) -> List[str]:
    candidates = grouping.rank_view_order(res.runs)[:MAX_HEATMAPS]
    if not candidates:
        return [_note("No run has a completed iteration.")]
    parts = ['<div class="figs">']
    for i, run in enumerate(candidates):
        title = f"{names[run.path]}: {run.attrs.get('model')} {run.exchange}, " \
                f"{run.nranks} ranks" + ("" if run.is_complete else " [INCOMPLETE]")
        parts.append(_img(figures.heatmaps(run, title), f"fig-heatmap-{i + 1}",
                          f"ranks x iterations heat map of {names[run.path]}"))
    chosen = candidates[0]
    lo, hi = timeline.window_for(chosen, *window)
    parts.append(_img(figures.gantt(chosen, window), "fig-gantt",
                      f"per-rank timeline of {names[chosen.path]}"))
    parts.append("</div>")
    parts.append(_note(f"Heat maps: ms per rank (rows) and iteration (columns), warm-up left of "
                       f"the dashed line, grey: not written. Timeline: iterations {lo}-{hi - 1} "
                       f"of {names[chosen.path]} (report --window A:B)."))
    if chosen.nranks > 1:
        verdict = stragglers_text.verdict(stragglers.analyse(chosen))
        parts.append(_note(f"{names[chosen.path]}: {verdict}"))
    parts.append(_note(f"Per rank, {names[chosen.path]} (ms over each rank's measured iterations;"
                       " busy = total minus the exchange wait, or minus the exchange when the "
                       "wait is not recorded):"))
    parts.append(html_table(tables.per_rank(chosen), "table-ranks"))
    return parts


def _section_strategies(res: Results, names) -> List[str]:
    groups = grouping.strategy_groups(res.runs, res.ignore)[:MAX_STRATEGY_FIGURES]
    if not groups:
        return [_note("No runs of one model and data set with several exchange strategies "
                      "or with evaluations.")]
    parts = ['<div class="figs">']
    for i, g in enumerate(groups, 1):
        parts.append(_img(training.strategies(g, res.target, names),
                          f"fig-strategies-{i}", "loss and accuracy against time and iterations"))
    parts.append("</div>")
    members = {r.path for g in groups for r in g}
    table = res.strategies[[r.path in members for r in res.runs]].copy()
    table["run"] = [t.replace(r.path, names[r.path]) for t, r in
                    zip(table["run"], [r for r in res.runs if r.path in members])]
    parts.append(_note("Each figure: runs of one model, data set and batch, differing in the "
                       "exchange strategy (and ranks). Loss: mean over ranks per iteration; "
                       "time: s since rank 0's start on the aligned clock (evaluations "
                       "included); star: first evaluation reaching the target."))
    parts.append(html_table(table, "table-strategies"))
    return parts


def _layouts(res: Results, names) -> List[str]:
    """The layouts figure and table where the runs hold two layouts, one model-parallel."""
    lay = res.layouts
    if lay.empty or not tables.compares_layouts(lay):
        return []
    lay = lay.assign(run=[names.get(f, f) for f in lay["file"]])
    return ['<div class="figs">', _img(layout_fig.layouts(lay), "fig-layouts",
                                       "time per iteration of each layout, split"), "</div>",
            _note("Per run, ms per iteration of its mean rank (median over measured "
                  "iterations): compute (forward and backward less the parts that follow), "
                  "tensor (tp_comm: the tensor group's allreduces), bubble (pipe_idle), "
                  "pipe_transfer (pipe_send + pipe_recv), exchange (data-parallel, among the "
                  "replicas) and other (data, update, recording)."),
            html_table(lay, "table-layouts")]


def _section_pipelines(res: Results, names) -> List[str]:
    pipe = res.pipelines
    if pipe.empty:
        return _layouts(res, names) + [
            _note("No pipeline runs (dtbench --parallel model, hybrid, or tensor with --stages).")]
    pipe = pipe.assign(run=[names.get(f, f) for f in pipe["file"]])
    return _layouts(res, names) + [
            '<div class="figs">', _img(training.pipeline(pipe), "fig-pipelines",
                                       "pipeline stages and bubble fraction"), "</div>",
            _note("From the pipe_* fields: compute (forward, loss, backward of the stage's "
                  "rows), send, receive (transfer after the sender started) and idle (waiting "
                  "before the sender started: the bubble), mean ms per iteration."),
            html_table(pipe, "table-pipelines")]


def _section_resources(res: Results, names) -> List[str]:
    sampled = training.sampled_runs(res.runs)
    if not sampled:
        return [_note("No samples (dtbench --sample-hz N).")]
    def count(run):
        return int(np.isfinite(run.samples["time"]).sum()) if "time" in run.samples else 0
    shown = sorted(sampled, key=lambda r: (-count(r), names[r.path]))[:4]
    table = res.samples.assign(run=[names.get(f, f) for f in res.samples["file"]])
    return ['<div class="figs">', _img(training.samples(shown, names),
                                       "fig-resources", "power, memory and utilisation"),
            "</div>",
            _note(f"Sampled runs shown: {', '.join(names[r.path] for r in shown)}"
                  f"{' (of ' + str(len(sampled)) + ')' if len(sampled) > len(shown) else ''}."
                  " CPU runs (procfs): memory is the process's resident set, utilisation its "
                  "CPU time in % of one core; GPU runs (NVML): board power, memory in use, "
                  "utilisation. Energy per sample needs power samples."),
            html_table(table, "table-resources")]


def _section_comparisons(res: Results, runs) -> List[str]:
    groups = res.comparison_groups
    if not groups:
        return [_note("No comparison: no two runs differ in exactly one factor (exchange, "
                      "transport, ranks, batch, precision, micro-batches, schedule, launcher) "
                      "with everything else, model and data set included, equal.")]
    parts = [_note("Runs are compared only inside a configuration, along one factor; the "
                   "first configuration of each comparison is its baseline (Mann-Whitney U "
                   "of the per-iteration times, Bonferroni within the comparison)."),
             html_table(res.comparisons, "table-comparisons")]
    for i, c in enumerate(groups, 1):
        parts.append(f"<details><summary>comparison {i}: {_e(c['factor'])} "
                     f"({_e(c['common'].get('model'))} on {_e(c['common'].get('dataset'))})"
                     f"</summary><pre>{_e(compare_text.format_text(c['result'], c['runs']))}</pre>"
                     "</details>")
    return parts


def build(runs: Sequence[Run], sources: Sequence[str], ignore: Sequence[str] = (),
          target=None, title: str = "dtbench report",
          window: Tuple[Optional[int], Optional[int]] = (None, None)) -> str:
    """The whole HTML page as a string."""
    res = Results(runs, ignore, target)
    names = display_names(runs)
    body = {
        "time": lambda: _section_time(res, names),
        "scaling": lambda: _section_scaling(res),
        "ranks": lambda: _section_ranks(res, names, window),
        "strategies": lambda: _section_strategies(res, names),
        "pipelines": lambda: _section_pipelines(res, names),
        "resources": lambda: _section_resources(res, names),
        "comparisons": lambda: _section_comparisons(res, runs),
        "runs": lambda: _section_runs(res, names),
        "details": lambda: _section_details(res, names),
        "study": lambda: _section_study(res),
        "memory": lambda: _section_memory(res, names),
    }
    strategies = set(res.memory["exchange"])
    order, folded = page_order(len(runs), not res.scaling.empty,
                               len(strategies) >= 2 and any(x.startswith("zero") for x in strategies))
    rest = order[[i for i, _ in order].index(folded):] if folded else []
    parts: List[str] = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">{len(runs)} runs from {_e(", ".join(sources))}; generated '
        f'{_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}. '
        f"{_e(conventions.warmup_statement(runs))}; iterations killed runs never wrote are "
        "excluded and such runs are marked INCOMPLETE (*) everywhere.</p>",
        "<nav>" + "".join(f'<a href="#{i}">{_e(h)}</a>' for i, h in order) + "</nav>"]
    for ident, heading in order:
        if ident == folded:
            parts.append(f'<details class="per-run" id="per-run"><summary>Per-run detail: '
                         f'{len(runs)} runs ({_e(", ".join(h.lower() for _, h in rest))})'
                         f'</summary>')
        parts.append(f'<section id="{ident}"><h2>{_e(heading)}</h2>')
        parts += body[ident]()
        parts.append("</section>")
    if folded:
        parts.append("</details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def page_order(nruns: int, series: bool, memory: bool = False) \
        -> Tuple[List[Tuple[str, str]], Optional[str]]:
    """The sections in page order and the first one folded (None: nothing folded). Without
    scaling series, SECTIONS; with them the study first; beyond FOLD_RUNS runs the scaling
    table follows it and the per-run sections after that are folded. ``memory``: MEMORY after
    "Where the time goes", or, folded, before the folded sections (it is about every run)."""
    sections = list(SECTIONS)
    if memory:
        sections.insert([i for i, _ in sections].index("time") + 1, MEMORY)
    if not series:
        return sections, None
    if nruns <= FOLD_RUNS:
        return [STUDY, *sections], None
    scaling = [x for x in SECTIONS if x[0] == "scaling"]
    rest = [x for x in SECTIONS if x[0] != "scaling"]
    return [STUDY, *scaling, *([MEMORY] if memory else []), *rest], rest[0][0]


def _section_runs(res: Results, names) -> List[str]:
    table = res.runs_table.assign(file=[names[r.path] for r in res.runs])
    parts = [html_table(table, "runs-table", drop=(),
                        incomplete=[not r.is_complete for r in res.runs])]
    incomplete = conventions.incomplete_lines(res.runs)
    if incomplete:
        parts.append("<p>" + BADGE + " " + "<br>".join(_e(x) for x in incomplete) + "</p>")
    return parts


def _section_details(res: Results, names) -> List[str]:
    parts = [_note("How the numbers were obtained: medians and percentiles (linear "
                   "interpolation); across ranks, the critical path (max over ranks) per "
                   "iteration for lockstep exchanges (sync, ssp) and each rank's own time "
                   "otherwise; repeats of a configuration pooled; confidence intervals of "
                   "medians from order statistics; differences tested with Mann-Whitney U.")]
    for run, s in zip(res.runs, res.summaries):
        badge = "" if run.is_complete else " " + BADGE
        parts.append(f"<details><summary>{_e(names[run.path])}{badge}</summary>"
                     f"<pre>{_e(summary_text.format_text(s))}</pre></details>")
    parts.append(_note("Configuration keys: " + ", ".join(
        sorted({k for r in res.runs for k in configs.configuration(r)}))))
    return parts


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="self-contained HTML report with figures",
                              description="Write one self-contained HTML page about the runs.")
    common.add_inputs(p)
    p.add_argument("-o", "--output", metavar="OUT.html", required=True,
                   help="HTML file to write")
    p.add_argument("--title", default="dtbench report", help="page title")
    p.add_argument("--target", type=float, metavar="ACC",
                   help="target test accuracy (0..1); default: the runs' target_accuracy")
    p.add_argument("--window", metavar="A:B",
                   help="iterations A..B-1 of the per-rank timeline [the first 5 measured]")
    common.add_ignore(p)
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    if not common.target_ok(args.target, report_error):
        return 2
    ok, window = common.window(args.window, "--window", report_error,
                               "A:B with 0 <= A < B (iterations A..B-1), A: or :B")
    if not ok:
        return 2
    if not common.output_ok(args, args.output, "--output", report_error, (".html", ".htm")):
        return 2
    runs, status = common.load(args, report_error)
    if status:
        return status
    page = build(runs, args.inputs, args.ignore, args.target, args.title, window)
    outputs.write_text(args.output, page)
    n_incomplete = sum(not r.is_complete for r in runs)
    print(f"wrote {args.output}: {len(runs)} runs"
          + (f", {n_incomplete} incomplete" if n_incomplete else "")
          + f", {page.count('<img ')} figures, {len(page) // 1024} KiB")
    return 0
