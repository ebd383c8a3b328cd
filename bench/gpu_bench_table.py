"""gpu_bench_table.py - the table of bench/gpu_bench.sh: what each run's result file says, each
cell's figures and the targets it misses, and how much by.

Used by bench/gpu_bench.py while it runs, and alone on a results folder it wrote:
    python3 bench/gpu_bench_table.py DIR        # table.txt and cells.csv again, from runs.csv
(the runs are read again from their files under DIR/raw). Needs h5py and numpy.

A cell is one model at one batch in one precision, dtbench (side A) against PyTorch or against
itself with a feature off (side B), in rounds. Its figures: each side's samples/s (batch over the
median of its rounds' median steps), the ratio A/B, the spread of the round medians, and two
checks of what dtbench records on its ONE rank, over every dtbench run of the cell:
  exch%   the median over the measured iterations of exchange / total: a rank alone exchanges
          nothing, so the exchange phase must be about 0 (target: at most 1%);
  phases  whether any completed iteration's data + forward + backward + exchange + update exceed
          its total by more than 1e-9 of it (warm-up iterations included): phases are parts of
          the iteration, so they cannot add up to more.
A cell against PyTorch misses its target when the ratio is below 1.0. The language models'
cells add tokens/s: samples/s times the tokens of a sample (TOKENS: the model's context, at which
bench/gpu_bench.py runs them), a line each under the table.
"""
import csv
import json
import math
import os
import re
import statistics
import sys

PHASES = ("data", "forward", "backward", "exchange", "update")
RATIO_TARGET = 1.0
EXCHANGE_MAX_PCT = 1.0
PHASES_REL_TOL = 1e-9
NOISY_PCT = 10.0
# What each precision compares (the PyTorch side's settings are bench/torch_peer.py's).
PRECISION_NOTE = ("precision: fp32 = strict fp32 on both sides (TF32 off); tf32 = dtbench "
                  "--precision tf32 against PyTorch's defaults (TF32 convolutions, fp32 matmuls, "
                  "cudnn.benchmark off); bf16 = dtbench --precision bf16 against autocast bf16 + "
                  "channels_last + cudnn.benchmark; fp16 = the same in fp16 with GradScaler")
# Tokens of one sample of the language models, as their cells run them (--seq-len on both sides)
TOKENS = {"lstm32": 32, "lstm64": 64, "nanogpt-char": 256, "gpt2": 1024, "gpt2-medium": 1024}
CELL_RE = re.compile(r"^(?P<model>[a-z0-9]+(?:-[a-z]+)*)-b(?P<batch>\d+)-(?P<config>[a-z0-9]+)"
                     r"(?:-(?P<kind>graphs|prefetch)-off)?$")
RUN_KEYS = ("cell", "model", "batch", "config", "kind", "round", "side", "program", "error",
            "median_ms", "p5_ms", "p95_ms", "data_ms", "exch_pct", "phase_over", "phase_worst",
            "iters_read", "wall_s", "graphs", "prefetch", "file", "command")
CELL_KEYS = ("model", "batch", "config", "kind", "a_sps", "b_sps", "a_tps", "b_tps", "ratio",
             "a_ms", "b_ms",
             "a_spread", "b_spread", "a_data_ms", "exch_pct", "phase_over", "phase_iters",
             "phase_worst", "graphs", "steps", "verdict", "misses")


def cell_name(cell):
    model, batch, config, kind = cell
    return f"{model}-b{batch}-{config}" + ("" if kind == "vs" else f"-{kind}-off")


def parse_cell(name):
    """(model, batch, config, kind) from a cell's name; 'default' is the old name of tf32."""
    m = CELL_RE.match(name)
    if not m:
        raise ValueError(f"not a cell name: {name}")
    config = "tf32" if m["config"] == "default" else m["config"]
    return m["model"], int(m["batch"]), config, m["kind"] or "vs"


def read_dtbench(path):
    """A dtbench result file of ONE rank: its measured steps, and the phases' checks.
    Read with h5py and numpy alone, not dtbench_analysis: the table is made on the GPU machine
    by the Python bench/gpu_bench.sh picks, where the pack guarantees only h5py (its wheel) and
    numpy, and the package needs pandas; the cells are Run.measured's (rank 0's columns
    warmup .. completed-1, NaN dropped), the phases' check also over the warm-up."""
    import h5py
    import numpy as np
    with h5py.File(path, "r") as f:
        if int(f.attrs["nranks"]) != 1:
            raise ValueError(f"{int(f.attrs['nranks'])} ranks, not one")
        it = f["iterations"]
        w = int(f.attrs["warmup"])
        n = int(f["ranks/completed"][0]) if "ranks/completed" in f else it["total"].shape[1]
        col = {k: it[k][0, :n].astype(float) for k in PHASES + ("total",)}
        note = {k: str(f.attrs.get(k, "")) for k in ("graphs", "graphs_reason", "prefetch")}
    ok = ~np.isnan(col["total"])
    total = col["total"][ok]
    measured = col["total"][w:][ok[w:]]
    if not len(measured):
        raise ValueError("no measured iteration")
    parts = sum(np.nan_to_num(col[k][ok]) for k in PHASES)
    excess = (parts - total) / total  # every completed iteration, warm-up included
    share = (col["exchange"][w:][ok[w:]] / measured)
    return {"median": float(np.median(measured)), "p5": float(np.percentile(measured, 5)),
            "p95": float(np.percentile(measured, 95)),
            "data": float(np.nanmedian(col["data"][w:][ok[w:]])), "steps": int(len(measured)),
            "exch_shares": [float(x) for x in share],
            "phase_over": int((excess > PHASES_REL_TOL).sum()),
            "phase_worst": float(excess.max()) if len(excess) else 0.0,
            "iters_read": int(len(total)), "warmup": w, **note}


def read_torch(path):
    with open(path) as f:
        j = json.load(f)
    return {"median": j["median_s"], "p5": j["p5_s"], "p95": j["p95_s"], "data": math.nan,
            "steps": j["iters"], "graphs": "", "graphs_reason": "", "prefetch": j.get("data", "")}


def read_run(out_dir, rec):
    """Fills a run record (program, file) with what its result file says, or its error."""
    path = os.path.join(out_dir, rec["file"])
    try:
        rec.update(read_torch(path) if rec["program"] == "torch" else read_dtbench(path))
    except (OSError, ValueError, KeyError) as e:
        rec["error"] = f"unreadable result: {e}"[:200]
    return rec


def run_row(r):
    """runs.csv's row of a run record."""
    def ms(k):
        return f"{r.get(k, math.nan) * 1e3:.4f}"
    shares = r.get("exch_shares")
    model, batch, config, kind = r["cell_t"]
    return [cell_name(r["cell_t"]), model, batch, config, kind, r["round"], r["side"],
            r["program"], r["error"], ms("median"), ms("p5"), ms("p95"), ms("data"),
            f"{statistics.median(shares) * 100:.4f}" if shares else "",
            r.get("phase_over", ""), f"{r['phase_worst']:.3g}" if "phase_worst" in r else "",
            r.get("iters_read", ""), f"{r['wall']:.1f}", r.get("graphs", ""),
            r.get("prefetch", ""), r["file"], r["cmd"]]


def _side(runs, side):
    ok = [r for r in runs if r["side"] == side and not r["error"]]
    med = statistics.median(r["median"] for r in ok)
    data = [r["data"] for r in ok]
    return ok, {"ms": med * 1e3, "spread": (max(r["median"] for r in ok)
                                            - min(r["median"] for r in ok)) / med * 100,
                "data_ms": statistics.median(data) * 1e3 if data else math.nan}


def summarise(cell, runs, rounds):
    """A cell's figures and checks from its runs; None when a side has fewer than ROUNDS."""
    model, batch, config, kind = cell
    sides = {}
    for side in "AB":
        if len([r for r in runs if r["side"] == side and not r["error"]]) < rounds:
            return None
        sides[side] = _side(runs, side)
    a, b = sides["A"][1], sides["B"][1]
    dt_runs = [r for s in "AB" for r in sides[s][0] if r["program"] == "dtbench"]
    exch = max(statistics.median(x for r in dt_runs if r["side"] == s for x in r["exch_shares"])
               for s in "AB" if any(r["side"] == s for r in dt_runs)) * 100
    row = {"model": model, "batch": batch, "config": config, "kind": kind,
           "a_sps": batch / a["ms"] * 1e3, "b_sps": batch / b["ms"] * 1e3,
           "a_ms": a["ms"], "b_ms": b["ms"], "a_spread": a["spread"], "b_spread": b["spread"],
           "a_data_ms": a["data_ms"], "exch_pct": exch,
           "phase_over": sum(r["phase_over"] for r in dt_runs),
           "phase_iters": sum(r["iters_read"] for r in dt_runs),
           "phase_worst": max(r["phase_worst"] for r in dt_runs),
           "graphs": sides["A"][0][0].get("graphs", ""),
           "steps": f"{rounds}x{dt_runs[0]['steps']}+{dt_runs[0]['warmup']}"}
    row["ratio"] = row["a_sps"] / row["b_sps"]
    tokens = TOKENS.get(model)  # tokens/s of the language models; "" for the others
    row["a_tps"], row["b_tps"] = ((row["a_sps"] * tokens, row["b_sps"] * tokens) if tokens
                                  else ("", ""))
    row["misses"] = misses(row)
    row["verdict"] = ("MISS" if row["misses"] else "ok" if kind == "vs" else "-") + (
        " (noisy)" if max(a["spread"], b["spread"]) > NOISY_PCT else "")
    return row


def misses(row):
    """Each target the cell misses, and how much by, in words."""
    out = []
    if row["kind"] == "vs" and row["ratio"] < RATIO_TARGET:
        out.append(f"{row['ratio']:.2f}x PyTorch, {(1 - row['ratio'] / RATIO_TARGET) * 100:.0f}% "
                   f"short of {RATIO_TARGET:.1f}x (dtbench {row['a_sps']:.1f} samples/s, "
                   f"PyTorch {row['b_sps']:.1f}; dtbench needs "
                   f"{RATIO_TARGET / row['ratio']:.2f}x its speed)")
    if row["exch_pct"] > EXCHANGE_MAX_PCT:
        out.append(f"exchange {row['exch_pct']:.2f}% of the total on one rank (median), "
                   f"{row['exch_pct'] - EXCHANGE_MAX_PCT:.2f} points over {EXCHANGE_MAX_PCT:g}%")
    if row["phase_over"]:
        out.append(f"phases exceed the total in {row['phase_over']} of {row['phase_iters']} "
                   f"iterations, by up to {row['phase_worst']:.2g} of the total (allowed "
                   f"{PHASES_REL_TOL:g})")
    return out


def fmt_table(rows, notes, footer):
    head = (f"{'model':12} {'batch':>5} {'prec':5} {'compared':18} {'dtbench/s':>10} "
            f"{'other/s':>10} {'ratio':>6} {'spread%':>11} {'data ms':>8} {'exch%':>6} "
            f"{'phases':>7} {'graphs':16} {'steps':9} verdict")
    lines = [head]
    for r in rows:
        other = "pytorch" if r["kind"] == "vs" else f"{r['kind']} off"
        phases = "ok" if not r["phase_over"] else f"{r['phase_over']} over"
        lines.append(f"{r['model']:12} {r['batch']:>5} {r['config']:5} {'dtbench/' + other:18} "
                     f"{r['a_sps']:10.1f} {r['b_sps']:10.1f} {r['ratio']:6.2f} "
                     f"{r['a_spread']:5.1f}/{r['b_spread']:<5.1f} {r['a_data_ms']:8.3f} "
                     f"{r['exch_pct']:6.2f} {phases:>7} {r['graphs'] or '-':16} "
                     f"{r['steps'] or '-':9} {r['verdict']}")
    for r in rows:
        if r["a_tps"] != "":
            other = "PyTorch" if r["kind"] == "vs" else f"{r['kind']} off"
            lines.append(f"tokens/s: {r['model']} b{r['batch']} {r['config']}"
                         + ("" if r["kind"] == "vs" else f" ({r['kind']} off)")
                         + f": dtbench {r['a_tps']:.0f}, {other} {r['b_tps']:.0f} "
                         f"({TOKENS[r['model']]} tokens a sample)")
    missed = [r for r in rows if r["misses"]]
    lines.append(f"targets: ratio >= {RATIO_TARGET:.1f} against PyTorch; exchange <= "
                 f"{EXCHANGE_MAX_PCT:g}% of the total on one rank; phases <= total. "
                 + (f"{len(missed)} of {len(rows)} cells miss:" if missed else
                    f"every one of the {len(rows)} cells meets them"))
    for r in missed:
        for m in r["misses"]:
            lines.append(f"  MISS {r['model']} b{r['batch']} {r['config']}"
                         + ("" if r["kind"] == "vs" else f" ({r['kind']} off)") + f": {m}")
    lines += notes
    lines.append(PRECISION_NOTE)
    lines.append("ratio: dtbench samples/s over the other side's (> 1: dtbench faster); rounds "
                 "alternated (A B, B A, ...); steps: rounds x measured steps + warm-up steps per "
                 "side; spread: (max - min) / median of the round medians, dtbench/other; data "
                 "ms: dtbench's median data phase; exch%: dtbench's median exchange share of the "
                 "total; phases: iterations whose phases add up to more than their total")
    lines += footer
    return "\n".join(lines)


def write_cells(out_dir, rows):
    with open(os.path.join(out_dir, "cells.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CELL_KEYS)
        w.writeheader()
        for r in rows:
            w.writerow({**r, "misses": "; ".join(r["misses"])})


def runs_from_csv(out_dir):
    """The run records of DIR/runs.csv, each read again from its file; runs.csv files of the
    first version (cell, round, side, error, ..., file, command) are read too."""
    recs = []
    with open(os.path.join(out_dir, "runs.csv"), newline="") as f:
        for row in csv.DictReader(f):
            cell = parse_cell(row["cell"])
            program = row.get("program") or ("torch" if row["side"] == "B" and cell[3] == "vs"
                                             else "dtbench")
            rec = {"cell_t": cell, "round": int(row["round"]), "side": row["side"],
                   "program": program, "error": row["error"], "file": row["file"],
                   "cmd": row.get("command", ""), "wall": float(row.get("wall_s") or 0)}
            recs.append(rec if rec["error"] else read_run(out_dir, rec))
    return recs


def table_from(out_dir):
    """table.txt and cells.csv of a results folder again, from its runs; the table's text."""
    recs = runs_from_csv(out_dir)
    cells = list(dict.fromkeys(r["cell_t"] for r in recs))
    rounds = max((r["round"] for r in recs), default=0) + 1
    rows, notes = [], []
    for cell in cells:
        runs = [r for r in recs if r["cell_t"] == cell]
        s = summarise(cell, runs, rounds)
        if s:
            rows.append(s)
        else:
            err = next((r for r in runs if r["error"]), runs[0])
            notes.append(f"failed: {cell_name(cell)} round {err['round']} side {err['side']}: "
                         f"{err['error'] or 'fewer rounds than the others'} ({err['file']})")
    text = fmt_table(rows, notes, [f"(table made again from {out_dir}/runs.csv)"])
    with open(os.path.join(out_dir, "table.txt"), "w") as f:
        f.write(text + "\n")
    write_cells(out_dir, rows)
    return text


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: gpu_bench_table.py DIR (a results folder of bench/gpu_bench.sh)",
              file=sys.stderr)
        return 2
    try:
        print(table_from(argv[1]))
    except (OSError, ValueError, KeyError, csv.Error) as e:
        print(f"gpu_bench_table: {argv[1]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
