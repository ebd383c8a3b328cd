"""The report's tables as pandas DataFrames (one function per question), for the HTML report, the
figures (plot/) and notebooks (``dtbench_analysis.load``).

Times are in milliseconds. Conventions (runfile.py, metrics.py): only measured iterations
(completed, warm-up excluded). Phase breakdowns use the *mean* over ranks x measured iterations,
so the stacked phases add up to the mean iteration (medians of parts do not add up); the median
time per iteration (critical path for lockstep runs) is given beside them.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from . import (calibration, configs, energy, grouping, layout, memory, metrics, scaling, summary,
               work)
from .runfile import Run

MS = 1e3
#: the stacked phases of "where the time goes", in the order the trainer runs them
BREAKDOWN = ("data", "forward", "backward", "exchange wait", "exchange transfer", "update",
             "other")
#: precision fields every table shows (configs.precision: fp32 where a file does not record them)
PRECISION_KEYS = ("precision", "grad_dtype")
PIPE_FIELDS = ("pipe_compute", "pipe_send", "pipe_recv", "pipe_idle")


def run_name(run: Run, names: Optional[Dict[str, str]] = None) -> str:
    return (names or {}).get(run.path) or os.path.basename(run.path)


def _mean(values: np.ndarray) -> float:
    v = values[np.isfinite(values)]
    return float(v.mean()) if v.size else float("nan")


def _median(values: np.ndarray) -> float:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else float("nan")


def precision(run: Run) -> Dict[str, str]:
    """``precision`` (compute) and ``grad_dtype`` (gradients on the wire) of the run."""
    return configs.precision(run)


def precision_text(run: Run) -> str:
    """``bf16/grad fp16`` style label part; empty for the fp32/fp32 default."""
    p = precision(run)
    if p["precision"] == "fp32" and p["grad_dtype"] == "fp32":
        return ""
    return f"{p['precision']}/grad {p['grad_dtype']}"


def label(run: Run, names: Optional[Dict[str, str]] = None) -> str:
    """Short label: file, model, exchange, ranks (and precision when recorded)."""
    extra = precision_text(run)
    par = str(run.attrs.get("parallel") or "data")
    sched = run.config.get("schedule")
    tp = f" tp={run.attrs.get('tp')}" if par == "tensor" else ""
    shape = f"{run.nranks}r" if par == "data" else \
        f"{run.nranks}r {par}{tp} K={run.attrs.get('stages')} " \
        f"M={run.attrs.get('microbatches')}" + (f" {sched}" if sched else "")
    text = f"{run_name(run, names)}: {run.attrs.get('model')} {run.exchange} {shape}"
    return text + (f" {extra}" if extra else "") + ("" if run.is_complete else " *")


def runs_table(runs: Sequence[Run], names=None, summaries=None) -> pd.DataFrame:
    """One row per run: its factors, completeness and headline numbers."""
    rows = []
    for i, run in enumerate(runs):
        tp = metrics.throughput(run)
        times = metrics.iteration_times(run)
        s = summaries[i] if summaries else None
        row = {"file": run_name(run, names), "complete": run.is_complete,
               "note": run.completeness_note() or "",
               "model": run.attrs.get("model"), "dataset": run.attrs.get("dataset"),
               "exchange": run.exchange, "transport": run.attrs.get("transport"),
               "parallel": run.attrs.get("parallel") or "data",
               "ranks": run.nranks, "nodes": run.nnodes, "batch": run.batch_global,
               "device": run.attrs.get("device")}
        row.update(precision(run))
        row.update({"measured iters": int(run.ranks["measured"].max()),
                    "time/iter ms": _median(times) * MS,
                    "samples/s": tp["samples_per_s"],
                    "tokens/s": work.tokens_per_s(run, tp["samples_per_s"]),
                    "MFU": work.mfu(run, tp["samples_per_s"]),
                    "exchange share": metrics.exchange_share(run)["median"],
                    "exchange efficiency": calibration.efficiency(run, s)})
        mem = memory.memory_per_rank(run)  # the stages side by side: memory against time
        row["memory/rank MiB"] = _f(mem.total_mib if mem else None)
        row["peak resident MiB"] = _f(mem.get("peak_resident_max_mib") if mem else None)
        rows.append(row)
    table = pd.DataFrame(rows)
    # tokens/s, MFU and memory only where some file records what they need (work.py)
    return table.drop(columns=[c for c in ("tokens/s", "MFU", "memory/rank MiB",
                                           "peak resident MiB")
                               if c in table and table[c].isna().all()])


def phases(runs: Sequence[Run], names=None, summaries=None) -> pd.DataFrame:
    """Where the time goes: per run the mean ms of each BREAKDOWN phase per rank-iteration,
    the hidden exchange (overlapped with backward, not part of the iteration), the mean and
    median iteration, the exchange share and, where the file has it, the exchange efficiency."""
    rows = []
    for i, run in enumerate(runs):
        m = {p: run.measured(p) for p in ("data", "forward", "backward", "exchange", "update",
                                          "total")}
        wait = run.measured("exchange_wait") if run.has("exchange_wait") else \
            np.zeros_like(m["exchange"])
        row = {"run": label(run, names), "file": run.path, **precision(run),
               "data": _mean(m["data"]) * MS, "forward": _mean(m["forward"]) * MS,
               "backward": _mean(m["backward"]) * MS,
               "exchange wait": _mean(wait) * MS,
               "exchange transfer": _mean(m["exchange"] - wait) * MS,
               "update": _mean(m["update"]) * MS}
        parts = sum(row[p] for p in BREAKDOWN[:-1])
        row["total mean"] = _mean(m["total"]) * MS
        row["other"] = max(0.0, row["total mean"] - parts) if np.isfinite(parts) else np.nan
        row["exchange hidden"] = _mean(run.measured("exchange_hidden")) * MS \
            if run.has("exchange_hidden") else 0.0
        row["time/iter median"] = _median(metrics.iteration_times(run)) * MS
        row["exchange share"] = metrics.exchange_share(run)["median"]
        row["exchange efficiency"] = calibration.efficiency(
            run, summaries[i] if summaries else None)
        rows.append(row)
    cols = ["run", "file", *PRECISION_KEYS, *BREAKDOWN, "exchange hidden", "total mean", "time/iter median",
            "exchange share", "exchange efficiency"]
    return pd.DataFrame(rows, columns=cols)


def scaling_points(runs: Sequence[Run], ignore: Sequence[str] = (),
                   result: Optional[Dict[str, object]] = None) -> pd.DataFrame:
    """One row per point of every scaling series (scaling.find_series): series number, kind,
    the strategy/transport it belongs to, scale, time with its CI, speedup and efficiency
    with intervals propagated from the time's CI (base case taken at its median)."""
    result = result or scaling.find_series(runs, "ranks", ignore)
    rows = []
    # a line names its strategy and transport and every other factor in which the series
    # differ (launcher, precision, ...): two series never read alike
    extra = grouping.differing_labels([s["factors"] for s in result["series"]],
                                      skip=("exchange", "transport", "model", "ps-ranks"))
    for i, s in enumerate(result["series"], 1):
        f = s["factors"]
        servers = f"ps-ranks={f['ps-ranks']}" if "ps-ranks" in f else ""
        line = " ".join(x for x in (f.get("exchange"), f.get("transport"), servers,
                                    extra[i - 1]) if x) or "-"
        prec = {"precision": f.get("precision", "fp32"), "grad_dtype": f.get("grad-dtype", "fp32")}
        base = s["base"]
        for q in s["points"]:
            row = {"series": i, "kind": s["kind"], "fixed": s["fixed"], "line": line,
                   "model": f.get("model"), **prec, "ranks": q["ranks"], "nodes": q["nodes"],
                   "batch": q["batch_global"], "repeats": q["repeats"],
                   "time/iter ms": _f(q["time_median_s"]) * MS,
                   "time lo": _f(q["time_lo_s"]) * MS, "time hi": _f(q["time_hi_s"]) * MS,
                   "samples/s": _f(q["throughput"]), "speedup": _f(q["speedup"]),
                   "ideal": q["ideal_speedup"], "efficiency": _f(q["efficiency"]),
                   "exchange share": _f(q["exchange_share"])}
            scale = base["p"] / q["p"]
            for side, t in (("hi", q["throughput_hi"]), ("lo", q["throughput_lo"])):
                sp = t / base["throughput"] if t and base["throughput"] else np.nan
                row[f"speedup {side}"] = sp
                row[f"efficiency {side}"] = sp * scale
            rows.append(row)
    return pd.DataFrame(rows)


def _f(x) -> float:
    return float("nan") if x is None else float(x)


def rank_iteration(run: Run, field: str = "total") -> pd.DataFrame:
    """ms of ``field`` per rank (rows, MPI rank) and iteration (columns), warm-up included,
    NaN where not written (parameter servers, killed ranks). ``field`` "busy" and "wait" are
    metrics.busy and the exchange wait (or the whole exchange when the wait is not recorded)."""
    if field == "wait":
        values = run.iterations["exchange_wait" if run.has("exchange_wait") else "exchange"]
    elif field == "busy":
        values = run.iterations["total"] - run.iterations[
            "exchange_wait" if run.has("exchange_wait") else "exchange"]
    else:
        values = run.iterations[field]
    return pd.DataFrame(values * MS, index=pd.Index(run.ranks["rank"].to_numpy(), name="rank"),
                        columns=pd.RangeIndex(run.extent, name="iteration"))


def per_rank(run: Run) -> pd.DataFrame:
    """One row per rank (metrics.per_rank_table) with times in ms: median and p95 of total,
    median busy, exchange and wait (when recorded) over the rank's measured iterations."""
    frame = metrics.per_rank_table(run)
    for col in list(frame.columns):
        if col.endswith("_median") or col.endswith("_p95"):
            if col != "staleness_median":
                frame[col] = frame[col] * MS
                frame = frame.rename(columns={col: col.replace("_", " ") + " ms"})
    return frame


def progress(run: Run) -> pd.DataFrame:
    """Training progress per iteration: iteration, end time (s, aligned clock, max over ranks),
    loss (mean over ranks)."""
    end = pd.DataFrame(run.iterations["start"] + run.iterations["total"]).max().to_numpy()
    loss = pd.DataFrame(run.iterations["loss"]).mean().to_numpy()
    frame = pd.DataFrame({"iteration": np.arange(run.extent) + 1, "time_s": end,
                          "loss": loss})
    return frame[np.isfinite(end) & np.isfinite(loss)].reset_index(drop=True)


def strategies(runs: Sequence[Run], names=None, target: Optional[float] = None) -> pd.DataFrame:
    """Per run: model, data set, exchange, final loss, evaluations, best accuracy, and the
    iterations and time (s since start) to the target accuracy."""
    rows = []
    for run in runs:
        goal = target if target is not None else run.target_accuracy
        tt = metrics.time_to_target(run, goal)
        pr = progress(run)
        ev = run.eval[np.isfinite(run.eval["accuracy"].to_numpy(dtype=float))]
        rows.append({"run": label(run, names), "model": run.attrs.get("model"),
                     "dataset": run.attrs.get("dataset"), "exchange": run.exchange,
                     "ranks": run.nranks,
                     "final loss": float(pr["loss"].iloc[-5:].mean()) if len(pr) else np.nan,
                     "evaluations": int(len(ev)),
                     "best accuracy": float(ev["accuracy"].max()) if len(ev) else np.nan,
                     "target": goal if goal is not None else np.nan,
                     "iters to target": tt["iteration"] if tt and tt["reached"] else np.nan,
                     "s to target": tt["time_s"] if tt and tt["reached"] else np.nan})
    return pd.DataFrame(rows)


def is_pipeline(run: Run) -> bool:
    return int(run.attrs.get("stages") or 1) > 1 and all(run.has(f) for f in PIPE_FIELDS)


def pipeline(runs: Sequence[Run], names=None) -> pd.DataFrame:
    """Per pipeline run and stage: mean ms of compute, send, receive and idle (bubble) per
    iteration over the stage's ranks, and the bubble fraction idle / (their sum); with the
    GPipe ideal (K-1)/(M+K-1) for K stages and M micro-batches."""
    rows = []
    for run in runs:
        if not is_pipeline(run):
            continue
        k = int(run.attrs.get("stages") or 1)
        mb = int(run.attrs.get("microbatches") or 1)
        stage_of = layout.coords(run)["stage"].to_numpy()
        for stage in range(k):
            sel = stage_of == stage
            row = {"run": label(run, names), "file": run.path, **precision(run), "stages": k,
                   "microbatches": mb, "stage": stage}
            for fld in PIPE_FIELDS:
                row[fld.replace("pipe_", "")] = _mean(run.measured(fld)[sel]) * MS
            busy = sum(row[x] for x in ("compute", "send", "recv", "idle"))
            row["bubble fraction"] = row["idle"] / busy if busy > 0 else np.nan
            row["ideal bubble"] = (k - 1) / (mb + k - 1)
            rows.append(row)
    return pd.DataFrame(rows, columns=["run", "file", "stages", "microbatches", "stage",
                                       "compute", "send", "recv", "idle", "bubble fraction",
                                       "ideal bubble"])


def layouts(runs: Sequence[Run], names=None) -> pd.DataFrame:
    """Per run: its layout (tp x pp x dp, layout.py) and the ms per iteration of each part of
    layout.split (median over measured iterations of the mean over ranks; they add up to the
    mean rank's iteration, ``total``)."""
    rows = []
    for run in runs:
        lay = layout.layout(run)
        parts = layout.split_per_iteration(run)
        row = {"run": label(run, names), "file": run.path, "model": run.attrs.get("model"),
               "nranks": run.nranks, "layout": lay.name(), "tp": lay.tp, "stages": lay.stages,
               "replicas": lay.replicas,
               "microbatches": int(run.attrs.get("microbatches") or 1)}
        row.update({p: parts[p] * MS for p in layout.PARTS})
        row["total"] = sum(row[p] for p in layout.PARTS)
        rows.append(row)
    return pd.DataFrame(rows, columns=["run", "file", "model", "nranks", "layout", "tp",
                                       "stages", "replicas", "microbatches", *layout.PARTS,
                                       "total"])


def compares_layouts(frame: pd.DataFrame) -> bool:
    """Whether ``layouts(runs)`` holds two layouts or more, one of them model-parallel."""
    return frame["layout"].nunique() >= 2 and bool(((frame["tp"] > 1) |
                                                     (frame["stages"] > 1)).any())


def samples(runs: Sequence[Run], names=None) -> pd.DataFrame:
    """Per sampled run and rank: source, median power (W), peak memory (MiB), median
    utilisation (%), and energy per sample (J) when power was sampled."""
    rows = []
    for run in runs:
        if not run.samples:
            continue
        per = energy.sampler_per_rank(run)
        e = energy.energy_summary(run)
        source = run.ranks["sample_source"] if "sample_source" in run.ranks else None
        for row in range(run.nranks):
            n = int(np.isfinite(run.samples.get("time", np.full((run.nranks, 0), np.nan))[row])
                    .sum())
            if n == 0:
                continue
            rows.append({"run": label(run, names), "file": run.path,
                         "rank": int(run.ranks["rank"].iloc[row]),
                         "source": None if source is None else str(source.iloc[row]),
                         "samples": n,
                         "power median W": per.get("power_median_w", [np.nan] * run.nranks)[row],
                         "memory max MiB": per.get("memory_max_mib", [np.nan] * run.nranks)[row],
                         "utilization median %": per.get("utilization_median",
                                                         [np.nan] * run.nranks)[row],
                         "J per sample (run)": e["joules_per_sample"] if e else np.nan})
    return pd.DataFrame(rows)


#: the columns of memory_time, in order
MEMORY_COLUMNS = ("run", "file", "model", "exchange", "ranks", "time/iter ms", "exchange ms",
                  "reduce-scatter ms", "all-gather ms", "allreduce ms", "plan MiB",
                  "peak resident MiB", "peak resident min MiB", "memory/rank MiB", "basis")


def memory_time(runs: Sequence[Run], names=None) -> pd.DataFrame:
    """Memory per rank against time per iteration (memory.py), one row per run that records a
    memory per rank: the median time per iteration and exchange (ms), the sharded exchange's
    collectives (summary.collectives: medians per rank-iteration, NaN where the run has none),
    the plan's memory per rank (the largest rank), the measured peak resident (the largest and
    the smallest rank) and ``memory/rank MiB``, the one the report's figure draws (``basis``:
    the measured peak where recorded, else the plan)."""
    rows = []
    for run in runs:
        mem = memory.memory_per_rank(run)
        if mem is None or mem.shown_mib is None:
            continue
        coll = summary.collectives(run)
        rows.append({"run": run_name(run, names), "file": run.path,
                     "model": run.attrs.get("model"), "exchange": run.exchange,
                     "ranks": run.nranks, "time/iter ms": _f(mem.time_per_iteration_ms),
                     "exchange ms": _median(run.measured("exchange")) * MS,
                     "reduce-scatter ms": _f(coll.reduce_scatter_ms if coll else None),
                     "all-gather ms": _f(coll.allgather_ms if coll else None),
                     "allreduce ms": _f(coll.get("allreduce_ms") if coll else None),
                     "plan MiB": _f(mem.total_mib),
                     "peak resident MiB": _f(mem.get("peak_resident_max_mib")),
                     "peak resident min MiB": _f(mem.get("peak_resident_min_mib")),
                     "memory/rank MiB": mem.shown_mib, "basis": mem.basis})
    return pd.DataFrame(rows, columns=list(MEMORY_COLUMNS))


def comparison_groups(runs: Sequence[Run], ignore: Sequence[str] = (),
                      target: Optional[float] = None) -> List[Dict[str, object]]:
    """grouping.comparisons with compare.compare's statistics inside each."""
    from . import compare
    out = []
    for c in grouping.comparisons(runs, ignore):
        c = dict(c)
        c["result"] = compare.compare(c["runs"], ignore, target=target)
        out.append(c)
    return out


def comparisons(runs: Sequence[Run], ignore: Sequence[str] = (), target=None,
                groups=None) -> pd.DataFrame:
    """One row per configuration inside each comparison: factor, label, time per iteration
    (median, CI), the memory per rank where the groups differ in the exchange's sharding
    (compare._memory: the plan's and the measured peak; columns absent elsewhere), throughput,
    exchange share, ratio to the comparison's baseline and the Mann-Whitney p value."""
    rows = []
    for i, c in enumerate(groups if groups is not None else
                          comparison_groups(runs, ignore, target), 1):
        common = c["common"]
        for g in c["result"]["groups"]:
            t, test = g["time_s"], g["test"]
            rows.append({"comparison": i, "factor": c["factor"],
                         "model": common.get("model"), "dataset": common.get("dataset"),
                         "configuration": g["label"], "repeats": g["repeats"],
                         "time/iter ms": _f(t["median"]) * MS, "lo": _f(t["lo"]) * MS,
                         "hi": _f(t["hi"]) * MS,
                         # where the comparison's groups differ in the exchange's sharding
                         "memory/rank MiB": _f(g.get("memory_plan_mib")),
                         "peak resident MiB": _f(g.get("memory_peak_mib")),
                         "samples/s": _f(g["throughput"]["median"]),
                         "exchange share": _f(g["exchange_share"]),
                         "ratio to baseline": 1.0 if test is None else
                         _f(test.get("median_ratio")),
                         "p": np.nan if test is None else _f(test.get("p")),
                         "significant": None if test is None else test.get("significant")})
    table = pd.DataFrame(rows)
    return table.drop(columns=[c for c in ("memory/rank MiB", "peak resident MiB")
                               if c in table and table[c].isna().all()])


__all__ = ["runs_table", "phases", "scaling_points", "rank_iteration", "progress",
           "strategies", "pipeline", "samples", "comparisons", "comparison_groups", "label",
           "precision", "per_rank", "memory_time"]
