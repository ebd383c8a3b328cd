"""Checks of the scaling study (tests/test_slurm_study.sh) against the result files themselves:
every figure here is recomputed from the HDF5 datasets with numpy, never taken from the output
of the command under test.

    check_study.py campaign STATUS.json RUNS             every run completed, RUNS of them
    check_study.py analyses FOLDER SCALING.json COMPARE.json STRAGGLERS.json REPORT.html
    check_study.py predict FOLDER                        fitted on 1-4 nodes, checked at 8 and 16
    check_study.py fault FILE STATE NODE KILLED_AT CLOSED_AT   a node killed during a run
    check_study.py page REPORT.html OUTDIR               the report in headless Chromium

Exit status 1, with every problem on a line of its own, when a check fails.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import re
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "analysis"))
sys.path.insert(0, os.path.join(HERE, "..", "analysis", "tests"))

NODES = [1, 2, 4, 8, 16]
#: (exchange, transport) of the study's strategies: sync over mpi and hier, ssp, async, mixed
STRATEGIES = [("sync", "mpi"), ("sync", "hier"), ("ssp", "mpi"), ("async", "mpi"),
              ("mixed", "mpi")]
#: Bounds of the prediction fitted on 1-4 nodes, at 8 and 16 nodes. The collectives alone (the runs'
#: calibration: the transport's collectives on the run's buckets after a barrier, nothing else
#: running) are what the shaped links make predictable: two repeats of one 16-node hier
#: configuration calibrated 213 and 262 ms; and the fit stands on the 1-4-node calibrations, as
#: noisy. A 2-node sync run (2 ranks, 2 cores) moves its bytes at the link's rate when nothing else
#: wants the cores (transfer 67-85 ms for 1.7 MB) and at about half of it otherwise (98-135 ms), as
#: every run of more ranks than cores does: predict's beta_inter_shared (per byte across nodes once
#: the ranks outnumber --shared-cores) takes that apart. Without it, two of three studies (with such
#: quiet 2-node runs) predicted the sync collectives at 8 and 16 nodes 14-26% and the transfer
#: 26-34% low; with it 0 to +14% and -9% to +1% (the third, without quiet 2-node runs, fitted it
#: near 0: sync within -14% to +9% either way). Left: hier at 16 nodes (32 ranks) grows faster than
#: the 1-4-node runs show (its transfer 18-33% and collectives 14-17% below the prediction in all
#: three studies; growth terms fitted on 1-4 nodes came out at 0 or overshot by 49-191%): 40%. In
#: training the transfer shares the 2 cores with the ranks' compute and the kernel's TCP work (up to
#: 27% above the run's own calibration at 16 x 2 ranks; -37% seen): 50%. The iteration adds the
#: compute of up to 32 ranks on 2 cores, predicted with --shared-cores as if all computed at once,
#: and their waits: an upper bound, so a prediction may not fall below the measurement by more than
#: 40% (the hier communication it stands on, 90% of its iteration, may be a third low at 16 nodes:
#: -30.7% seen), and may lie above it by up to ITERATION_OVER: how much less the time-sliced ranks
#: take than all at once is what 2 shared cores make unpredictable (seen: +15% to +49% at 16 nodes,
#: from run to run of the same study).
ITERATION_BOUND, COLLECTIVES_BOUND, TRANSFER_BOUND = 0.40, 0.40, 0.50
ITERATION_OVER = 0.60
#: each prediction's relative error may lie this far below and above the measurement
BOUNDS = {"iteration": (ITERATION_BOUND, ITERATION_OVER),
          "collectives": (COLLECTIVES_BOUND, COLLECTIVES_BOUND),
          "transfer": (TRANSFER_BOUND, TRANSFER_BOUND)}


def bounds_text(what: str) -> str:
    under, over = BOUNDS[what]
    return f"{100 * under:.0f}%" if under == over else f"-{100 * under:.0f}/+{100 * over:.0f}%"
#: docs/hdf5-layout.md (wall): a non-lockstep rank's throughput comes from its median wall time
#: per iteration where that is more than 2% above its median total (host time outside total)
WALL_MARGIN = 0.02
REL = 1e-9
PROBLEMS: list = []


def problem(text: str) -> None:
    PROBLEMS.append(text)
    print(f"wrong: {text}")


def done() -> int:
    return 1 if PROBLEMS else 0


def ok(since: int, text: str) -> None:
    """Says what a check found, once it found nothing wrong (PROBLEMS beyond ``since``)."""
    if len(PROBLEMS) == since:
        print(f"ok: {text}")


# ---- one run, from its file ----------------------------------------------------------------------
class File:
    """What the checks need of one result file, read with h5py alone."""

    def __init__(self, path: str):
        self.path = path
        with h5py.File(path, "r") as f:
            a = f.attrs
            self.cfg = json.loads(a["config_json"])
            self.nodes, self.ranks = int(a["nnodes"]), int(a["nranks"])
            self.warmup = int(a["warmup"])
            self.batch, self.per_rank = int(a["batch_global"]), int(a["batch_per_rank"])
            self.exchange = str(self.cfg["exchange"])
            self.transport = str(self.cfg.get("transport", "mpi"))
            self.bucket = float(self.cfg.get("bucket-mb", 25))
            self.servers = int(self.cfg.get("ps-ranks", 0)) if self.exchange == "async" else 0
            done = f["ranks/completed"][:]
            self.hosts = [h.decode() for h in f["ranks/host"][:]]
            role = f["ranks/role"][:] if "role" in f["ranks"] else np.zeros(self.ranks)
            self.trains = role != 1
            it = f["iterations"]
            self.total = it["total"][:].astype(float)
            self.exchange_s = it["exchange"][:].astype(float)
            self.wait = it["exchange_wait"][:].astype(float) if "exchange_wait" in it \
                else np.zeros_like(self.total)
            self.busy_field = "exchange_wait" if "exchange_wait" in it else "exchange"
            #: the iteration's host time (total and the host's time outside it), where recorded
            self.wall = it["wall"][:].astype(float) if "wall" in it else None
            self.finished = int(a["finished"]) == 1 and a["stop_reason"] == "completed"
            cal = float(a.get("calibration_exchange_s", np.nan))
            self.calibration = cal if int(a.get("calibration_iters", 0)) > 0 else np.nan
            self.completed = done
            self.iters_total = int(a["iters_total"])
        cols = np.arange(self.total.shape[1])
        self.valid = (cols[None, :] < self.completed[:, None]) & (cols[None, :] >= self.warmup)

    @property
    def strategy(self):
        return (self.exchange, self.transport)

    @property
    def lockstep(self) -> bool:
        return self.exchange in ("sync", "ssp")

    def all_ranks(self) -> np.ndarray:
        """Iterations every training rank measured."""
        return self.valid[self.trains].all(axis=0)

    def iteration_times(self) -> np.ndarray:
        """Lockstep: the critical path (max over ranks of total) of the iterations every rank
        measured; otherwise every training rank's own measured totals."""
        if self.lockstep:
            cols = self.all_ranks()
            return self.total[self.trains][:, cols].max(axis=0)
        return self.total[self.trains][self.valid[self.trains]]

    def shares(self) -> np.ndarray:
        """Per iteration measured by every rank: sum of exchange / sum of total over ranks."""
        cols = self.all_ranks()
        e = self.exchange_s[self.trains][:, cols].sum(axis=0)
        t = self.total[self.trains][:, cols].sum(axis=0)
        return e / t

    def throughput(self) -> float:
        if self.lockstep:
            return self.batch / float(np.median(self.iteration_times()))
        per = []
        for r in np.flatnonzero(self.trains):
            t = float(np.median(self.total[r][self.valid[r]]))
            if self.wall is not None:  # a rank's wall time where over 2% above its total
                w = float(np.median(self.wall[r][self.valid[r]]))
                t = w if w > (1 + WALL_MARGIN) * t else t
            per.append(t)
        return float(sum(self.per_rank / x for x in per))

    def transfer(self) -> np.ndarray:
        """Per iteration measured by every rank: the max over ranks of exchange - wait."""
        cols = self.all_ranks()
        return (self.exchange_s - self.wait)[self.trains][:, cols].max(axis=0)


def load_folder(folder: str):
    files = []
    for root, _, names in os.walk(folder):
        files += [File(os.path.join(root, n)) for n in sorted(names) if n.endswith(".h5")]
    return files


def study_runs(files):
    """The runs of the scaling series: the 25 MiB buckets (the others feed predict)."""
    return [f for f in files if f.bucket == 25]


def points(files):
    """{(exchange, transport, kind, nodes): [files]}: the strong (global batch 64) and weak
    (batch per training rank fixed) points of every strategy; a run in both belongs to both."""
    out = {}
    for f in study_runs(files):
        workers = f.ranks - f.servers
        weak_b = 16 if f.ranks == f.nodes or f.exchange == "async" else 8
        if f.batch == 64:
            out.setdefault(f.strategy + ("strong", f.nodes), []).append(f)
        if f.batch == weak_b * workers:
            out.setdefault(f.strategy + ("weak", f.nodes), []).append(f)
    return out


def pooled_time(files) -> float:
    return float(np.median(np.concatenate([f.iteration_times() for f in files])))


def pooled_share(files) -> float:
    return float(np.median(np.concatenate([f.shares() for f in files])))


def pooled_throughput(files) -> float:
    if files[0].lockstep:
        return files[0].batch / pooled_time(files)
    return float(np.median([f.throughput() for f in files]))


def close(a, b, what, rel=REL) -> None:
    if a is None or b is None or not np.isclose(a, b, rtol=rel, atol=0):
        problem(f"{what}: {a!r} against {b!r} from the files")


# ---- campaign ------------------------------------------------------------------------------------
def cmd_campaign(status_json: str, runs: str) -> int:
    rows = json.load(open(status_json))
    if len(rows) != int(runs):
        problem(f"status lists {len(rows)} runs, the spec plans {runs}")
    for r in rows:
        if r["state"] != "completed" or r["iterations"] != r["iters_total"]:
            problem(f"{r['run']}: {r['state']} {r['detail']} ({r['iterations']}/{r['iters_total']})")
    print(f"ok: {len(rows)} runs, states {sorted({r['state'] for r in rows})}")
    return done()


# ---- scaling, compare, stragglers, report --------------------------------------------------------
def check_files(files) -> None:
    for f in files:
        if not f.finished or (f.completed[f.trains] != f.iters_total).any():
            problem(f"{f.path}: not complete ({f.completed})")
        if f.nodes not in NODES or len(set(f.hosts)) != f.nodes:
            problem(f"{f.path}: {f.nodes} nodes, hosts {sorted(set(f.hosts))}")


def check_scaling(files, scaling: dict) -> None:
    """Every series (5 strategies x strong/weak) spans the 5 node counts and holds, point by
    point, the files' time per iteration, throughput, speedup and exchange share."""
    n0 = len(PROBLEMS)
    pts = points(files)
    seen = set()
    for s in scaling["series"]:
        f = s["factors"]
        key = (f.get("exchange"), f.get("transport"), s["kind"])
        if key in seen:
            problem(f"two series for {key}")
        seen.add(key)
        nodes = [q["nodes"] for q in s["points"]]
        if nodes != NODES:
            problem(f"series {key}: node counts {nodes}, not {NODES}")
        base = pts.get(key + (s["points"][0]["nodes"],))
        for q in s["points"]:
            mine = pts.get(key + (q["nodes"],))
            if not mine:
                problem(f"series {key}: no run of the study at {q['nodes']} nodes")
                continue
            what = f"{key} {q['nodes']} nodes"
            if sorted(q["files"]) != sorted(x.path for x in mine):
                problem(f"{what}: files {sorted(q['files'])}, not {sorted(x.path for x in mine)}")
            close(q["repeats"], len(mine), f"{what} repeats", 0)
            close(q["time_median_s"], pooled_time(mine), f"{what} time per iteration")
            close(q["throughput"], pooled_throughput(mine), f"{what} throughput")
            close(q["exchange_share"], pooled_share(mine), f"{what} exchange share")
            close(q["speedup"], pooled_throughput(mine) / pooled_throughput(base),
                  f"{what} speedup")
    want = {s + (k,) for s in STRATEGIES for k in ("strong", "weak")}
    if seen != want:
        problem(f"series {sorted(seen)}, expected {sorted(want)}")
    ok(n0, f"scaling: {len(seen)} series of {len(NODES)} node counts, each point as the files")


def check_figure(folder: str, files) -> None:
    """The report's scaling figure draws, per series, the node counts on x and the files'
    speedup, efficiency and exchange share (in %) on y."""
    n0 = len(PROBLEMS)
    import dtbench_analysis
    from dtbench_analysis.plotting import plt
    res = dtbench_analysis.load(folder)
    fig = res.figure("scaling")
    pts = points(files)
    ax_s, ax_e, ax_x = fig.axes[:3]
    for ax in (ax_s, ax_e, ax_x):
        if ax.get_xlabel() != "nodes":
            problem(f"scaling figure: x axis {ax.get_xlabel()!r}, not nodes")
        ticks = [float(t) for t in ax.get_xticks()]
        if ticks != [float(n) for n in NODES]:
            problem(f"scaling figure: x ticks {ticks}")
    lines = [ln for ln in ax_x.get_lines() if ":" in ln.get_label()]
    if len(lines) != 10:
        problem(f"scaling figure: {len(lines)} exchange-share lines, not 10")
    for ln in lines:
        label = ln.get_label()
        kind = "strong" if ": strong," in label else "weak"
        line = label.split(": ")[0].split(" ", 1)[1]     # "lenet sync hier" -> "sync hier"
        exchange, transport = (line.split() + ["mpi"])[:2]
        base = pts[(exchange, transport, kind, 1)]
        xs = [int(x) for x in ln.get_xdata()]
        ys = np.asarray(ln.get_ydata(), dtype=float)
        if xs != NODES:
            problem(f"scaling figure, {label}: x {xs}")
            continue
        want = [100 * pooled_share(pts[(exchange, transport, kind, n)]) for n in NODES]
        if not np.allclose(ys, want, rtol=1e-9):
            problem(f"scaling figure, {label}: exchange share {ys} against {want}")
        # the speedup panel's series are error bars: their data line is the container's first
        speed = [c.lines[0] for c in ax_s.containers if c.get_label() == label]
        want = [pooled_throughput(pts[(exchange, transport, kind, n)]) / pooled_throughput(base)
                for n in NODES]
        if len(speed) != 1 or not np.allclose(np.asarray(speed[0].get_ydata(), float), want,
                                              rtol=1e-9):
            problem(f"scaling figure, {label}: speedup "
                    f"{[list(x.get_ydata()) for x in speed]} against {want}")
    plt.close(fig)
    ok(n0, f"the report's scaling figure: 10 series against nodes {NODES}, speedup and "
          f"exchange share as the files")


def table_rows(page: str, ident: str):
    text = open(page, encoding="utf-8").read()
    m = re.search(rf'<table[^>]*id="{ident}"[^>]*>(.*?)</table>', text, re.S)
    if not m:
        problem(f"{page}: no table {ident}")
        return [], []
    head = [html.unescape(re.sub("<[^>]+>", "", c)).strip()
            for c in re.findall(r"<th[^>]*>(.*?)</th>", m.group(1), re.S)]
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(1), re.S):
        cells = [html.unescape(re.sub("<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        if cells:
            rows.append(dict(zip(head, cells)))
    return head, rows


def check_report_table(page: str, files) -> None:
    """The report's scaling table: per strategy, kind and node count, the exchange share and
    the time per iteration of the files (as printed, to the table's precision)."""
    n0 = len(PROBLEMS)
    pts = points(files)
    head, rows = table_rows(page, "table-scaling")
    found = 0
    for r in rows:
        line = r.get("line", "").split()
        key = (line[0], (line[1:] or ["mpi"])[0], r.get("kind"), int(r.get("nodes", 0)))
        if key not in pts:
            problem(f"report scaling table: a row {key} without runs")
            continue
        found += 1
        for col, want in (("exchange share", pooled_share(pts[key])),
                          ("time/iter ms", 1e3 * pooled_time(pts[key]))):
            # as the report prints it: shares in % to 0.1, ms to 0.001 (0.1 from 100 ms on)
            step = 1e-3 if col.endswith("share") else (1e-3 if abs(want) < 100 else 0.1)
            got = float(r[col].rstrip("%")) / (100 if r[col].endswith("%") else 1)
            if abs(got - want) > 1.01 * step:
                problem(f"report scaling table {key} {col}: {r[col]} against {want:.6g}")
    if found != 10 * len(NODES):
        problem(f"report scaling table: {found} rows of the study, not {10 * len(NODES)}")
    ok(n0, f"the report's scaling table: {found} rows, exchange share and time per iteration "
          f"as the files")


def check_compare(files, comparison: dict) -> None:
    """compare pools the repeats of each configuration: the median time per iteration of every
    group of the exchange comparisons is the files' pooled median."""
    n0 = len(PROBLEMS)
    by_file = {f.path: f for f in files}
    n = 0
    for c in comparison["comparisons"]:
        for g in c["result"]["groups"]:
            mine = [by_file[p] for p in g["files"]]
            close(g["repeats"], len(mine), f"compare {g['label']} repeats", 0)
            close(g["time_s"]["median"], pooled_time(mine), f"compare {g['label']} median")
            n += 1
    factors = {c["factor"] for c in comparison["comparisons"]}
    if "exchange" not in factors:
        problem(f"compare: no comparison of the exchange strategies ({sorted(factors)})")
    ok(n0, f"compare: {len(comparison['comparisons'])} comparisons, {n} groups pooled as the "
          f"files")


def check_stragglers(files, result: dict) -> None:
    """stragglers on the 16-node runs: every rank's median busy time (total minus the wait) and
    the imbalance of total (max / mean over ranks, median over iterations) as the files."""
    n0 = len(PROBLEMS)
    by_file = {f.path: f for f in files}
    runs = result if isinstance(result, list) else [result]
    n = 0
    for r in runs:
        f = by_file.get(r["file"])
        if f is None or not f.lockstep:
            continue
        cols = f.all_ranks()
        busy = (f.total - (f.wait if f.busy_field == "exchange_wait" else f.exchange_s))[:, cols]
        for row in r["ranks"]:
            close(row["busy_median_s"], float(np.median(busy[row["rank"]])),
                  f"stragglers {f.path} rank {row['rank']} busy")
        t = f.total[:, cols]
        close(r["imbalance"]["total"]["median"], float(np.median(t.max(axis=0) / t.mean(axis=0))),
              f"stragglers {f.path} imbalance of total")
        n += 1
    if not n:
        problem("stragglers: no lockstep 16-node run analysed")
    ok(n0, f"stragglers: {n} runs, every rank's busy time and the imbalance as the files")


def cmd_analyses(folder, scaling_json, compare_json, stragglers_json, page) -> int:
    files = load_folder(folder)
    check_files(files)
    check_scaling(files, json.load(open(scaling_json)))
    check_figure(folder, files)
    check_report_table(page, files)
    check_compare(files, json.load(open(compare_json)))
    check_stragglers(files, json.load(open(stragglers_json)))
    return done()


# ---- predict -------------------------------------------------------------------------------------
def cmd_predict(folder: str) -> int:
    """predict fitted on the sync and hier runs of 1, 2 and 4 nodes (both bucket sizes) predicts
    the 8- and 16-node runs of each (strategy, kind); errors of the iteration time, of the
    collectives alone (the runs' calibration) and of the transfer in training against the files,
    each within its BOUNDS."""
    from dtbench_analysis.cli import main
    files = load_folder(folder)
    fit = [f.path for f in files if f.exchange == "sync" and f.nodes <= 4]
    pts = points(files)
    cases = (("sync", "mpi", "strong", 1, ["--batch-global", "64"]),
             ("sync", "mpi", "weak", 1, ["--batch-per-rank", "16"]),
             ("sync", "hier", "strong", 2, ["--batch-global", "64"]),
             ("sync", "hier", "weak", 2, ["--batch-per-rank", "8"]))
    worst: dict = {}
    for exchange, transport, kind, per, batch in cases:
        strategy = "hier" if transport == "hier" else "sync"
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = main(["predict", *fit, "--nodes", "8,16", "--strategies", strategy,
                       "--ranks-per-node", str(per), *batch, "--shared-cores",
                       str(os.cpu_count() or 2), "--force", "--json"])
        if rc != 0:
            problem(f"predict {strategy} {kind}: exit {rc}")
            continue
        result = json.loads(out.getvalue())
        for p in result["predictions"]:
            mine = pts.get((exchange, transport, kind, p["nodes"]))
            pred = p["prediction"]
            if not mine or pred is None:
                problem(f"predict {strategy} {kind} {p['nodes']} nodes: {p.get('why')}")
                continue
            measured = {"iteration": pooled_time(mine),
                         "collectives": float(np.median([f.calibration for f in mine])),
                         "transfer": float(np.median(np.concatenate([f.transfer()
                                                                     for f in mine])))}
            # the blocking collectives of sync and hier are what the calibration times, so the
            # communication model's time stands for both the transfer and the collectives alone
            predicted = {"iteration": pred["iteration_s"]["value"],
                         "collectives": pred["comm_model_s"], "transfer": pred["comm_model_s"]}
            parts = []
            for what, (under, over) in BOUNDS.items():
                err = predicted[what] / measured[what] - 1
                worst[what] = max(worst.get(what, 0.0), abs(err))
                parts.append(f"{what} {1e3 * measured[what]:.1f} ms, predicted "
                             f"{1e3 * predicted[what]:.1f} ({100 * err:+.1f}%)")
                if not -under <= err <= over:
                    problem(f"predict {strategy} {kind} {p['nodes']} nodes: {what} error "
                            f"{100 * err:+.1f}% beyond {bounds_text(what)}")
            print(f"predict {strategy:4s} {kind:6s} {p['nodes']:2d} nodes: " + "; ".join(parts)
                  + f"; compute {1e3 * pred['compute_model_s']:.1f} ms")
    print("predict: worst |error| at 8 and 16 nodes: " + ", ".join(
        f"{what} {100 * worst.get(what, 0):.1f}% (bound {bounds_text(what)})" for what in BOUNDS))
    return done()


# ---- a node killed -------------------------------------------------------------------------------
def cmd_fault(path: str, state: str, node: str, killed_at: str, closed_at: str) -> int:
    """The survivors closed the file as peer_lost naming exactly NODE; every rank kept every
    iteration it completed; prints the seconds to detect (the lost ranks' silence when the
    watchdog named them) and to close the file after the kill."""
    with h5py.File(path, "r") as f:
        a = f.attrs
        hosts = [h.decode() for h in f["ranks/host"][:]]
        kept = f["ranks/completed"][:]
        completed = f["ranks/iterations_done"][:] if "iterations_done" in f["ranks"] else None
        total = f["iterations/total"][:]
        if not (a["finished"] == 1 and a["stop_reason"] == "peer_lost"):
            problem(f"{path}: finished={a['finished']} stop_reason={a['stop_reason']}")
        if a["failed_nodes"] != node:
            problem(f"{path}: failed_nodes={a['failed_nodes']!r}, not {node!r}")
        lost = sorted(int(x) for x in str(a["lost_ranks"]).split(",") if x)
        if lost != [r for r, h in enumerate(hosts) if h == node]:
            problem(f"{path}: lost_ranks {lost}, the ranks on {node} are "
                    f"{[r for r, h in enumerate(hosts) if h == node]}")
        if completed is None or (completed != kept).any():
            problem(f"{path}: /ranks/completed {kept} is not /ranks/iterations_done {completed}")
        for r, n in enumerate(kept):
            if np.isnan(total[r, :n]).any():
                problem(f"{path}: rank {r}: NaN among its {n} kept iterations")
        detail = str(a["stop_detail"])
    m = re.search(r"(?:silent|down|gone)[^0-9]*([0-9.]+) s", detail)
    detect = float(m.group(1)) if m else float("nan")
    close_s = float(closed_at) - float(killed_at)
    lines = dict(ln.strip().split("=", 1) for ln in open(state) if "=" in ln)
    end = float(lines.get("end", "nan")) - float(killed_at)
    print(f"{path}: {detail}")
    print(f"kept {sorted(set(int(x) for x in kept))} iterations per rank (= completed); "
          f"detected {detect:.1f} s, file closed {close_s:.1f} s and the batch script ended "
          f"{end:.1f} s after the kill")
    if not close_s < 10:
        problem(f"{path}: the file was closed {close_s:.1f} s after the kill (limit 10 s)")
    return done()


# ---- the page ------------------------------------------------------------------------------------
#: the first screen of the report (CSS px): the study's figure must start on it
FIRST_SCREEN = (1280, 900)


def check_first_screen(page: str, outdir: str) -> None:
    """The study leads: the first section is the study, its time figure starts and shows ink on
    the first screen, every per-run section (all but the study and the scaling table) is
    folded; the first screen is kept as report-first-screen.png."""
    import shutil
    import browser
    from matplotlib.image import imread
    n0 = len(PROBLEMS)
    width, height = FIRST_SCREEN
    lay = browser.layout(page, outdir, width)
    sections = [s["id"] for s in lay["sections"]]
    folded = [s["id"] for s in lay["sections"] if s["folded"]]
    if sections[:2] != ["study", "scaling"]:
        problem(f"report: the page opens with {sections[:2]}, not the study and its table")
    if folded != sections[2:] or not folded:
        problem(f"report: folded sections {folded}, not the per-run ones {sections[2:]}")
    if lay["images"] and lay["images"][0]["id"] != "fig-study-time":
        problem(f"report: the first figure is {lay['images'][0]['id']}, not the study's")
    figs = lay["sections"][0]["figs"] if lay["sections"] else None
    if not figs or figs["top"] > height / 2:
        problem(f"report: the study's figures do not start on the first screen ({figs})")
        return
    shot = browser.screenshot(page, outdir, width, height)
    seen = browser.ink(imread(shot), dict(figs, height=height - figs["top"]))
    if seen < 0.05:
        problem(f"report: the study's figure on the first screen has {seen:.1%} ink")
    shutil.copy(shot, os.path.join(outdir, "report-first-screen.png"))
    ok(n0, f"report: the study first ({seen:.0%} ink on the first screen), {len(folded)} "
           f"per-run sections folded")


def cmd_page(page: str, outdir: str) -> int:
    """The report in headless Chromium: every image decodes, the study's figure is on the first
    screen and the per-run sections are folded, no section's figures are blank at 1280 px once
    unfolded, and the screenshots are kept in OUTDIR (to be looked at)."""
    import shutil
    import browser
    os.makedirs(outdir, exist_ok=True)
    seen = browser.render(page, outdir)
    broken = [i["id"] for i in seen["images"] if not i["width"]]
    if broken or seen["errors"]:
        problem(f"report: broken images {broken}, errors {seen['errors']}")
    check_first_screen(page, outdir)
    # Unfolded, through the last figures (the tables below them, ~60000 px for 94 runs, would
    # take Chromium minutes to paint): every section with figures has ink; the sections below
    # are tables, each laid out with some height.
    opened = browser.unfolded(page, outdir)
    blank, inks, lay = browser.blank_sections(opened, outdir, 1280, through_figures=True)
    if blank:
        problem(f"report: sections without ink at 1280 px: {blank} ({inks})")
    below = [s["id"] for s in lay["sections"] if s["id"] not in inks]
    empty = [s["id"] for s in lay["sections"] if s["id"] in below and s["box"]["height"] < 20]
    if empty:
        problem(f"report: sections laid out empty: {empty}")
    shutil.copy(os.path.join(outdir, "shot1280.png"), os.path.join(outdir, "report-1280.png"))
    print(f"ok: report: {len(seen['images'])} images, sections {sorted(inks)} with ink, "
          f"{below} below them laid out; screenshot {os.path.join(outdir, 'report-1280.png')} "
          f"(unfolded, through the figures, of {lay['height']} px)")
    return done()


def main(argv) -> int:
    commands = {"campaign": cmd_campaign, "analyses": cmd_analyses,
                "predict": cmd_predict, "fault": cmd_fault, "page": cmd_page}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 2
    return commands[argv[0]](*argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
