"""gpu_bench.py - dtbench against PyTorch on one GPU, side by side in one run, rounds alternated.

The core of bench/gpu_bench.sh (which finds the programs and the interpreters, and says how to
read the output: bench/README.md "The GPU benchmark"). Run by an interpreter with h5py; PyTorch
runs in its own (--torch-python).

A cell is one model at one batch in one configuration, of one kind:
  vs        dtbench against bench/torch_peer.py;
  graphs    dtbench against itself with --graphs off (what replaying the step gains);
  prefetch  dtbench against itself with --prefetch off (what the prefetched upload gains).
Each cell runs ROUNDS rounds; a round runs both sides once, in alternated order (A B, B A, ...),
each a fresh process of WARMUP + ITERS steps. A side's figure is the median over its rounds of
each round's median step; its spread, (max - min) / median of those round medians. The cells run
in the order of what they tell (PLAN) while the --budget lasts: a cell starts only when its
estimated cost (first H100 run's step times, scaled by what the runs so far took against their
estimates) fits in what is left. Results: OUT/table.txt (also printed), cells.csv, runs.csv,
plan.txt, raw/<cell>/ (every result file, JSON and log).
"""
import argparse
import csv
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time

# config: (dtbench arguments, torch_peer arguments, what is compared)
CONFIGS = {
    "fp32": (["--precision", "fp32"], ["--precision", "fp32", "--cudnn-benchmark"],
             "strict fp32 on both sides (no TF32); PyTorch with cudnn.benchmark, as dtbench "
             "times its convolution algorithms (--conv-algo find)"),
    "default": (["--precision", "tf32"], ["--precision", "default"],
                "PyTorch's defaults (TF32 convolutions, fp32 matmuls, cudnn.benchmark off) "
                "against dtbench --precision tf32 (TF32 convolutions and GEMMs)"),
    "bf16": (["--precision", "bf16"],
             ["--precision", "bf16", "--cudnn-benchmark", "--channels-last"],
             "autocast bf16 + channels_last + cudnn.benchmark against dtbench --precision bf16"),
    "fp16": (["--precision", "fp16"],
             ["--precision", "fp16", "--cudnn-benchmark", "--channels-last"],
             "autocast fp16 + GradScaler + channels_last + cudnn.benchmark against dtbench "
             "--precision fp16"),
}
ABLATION = {"graphs": ["--graphs", "off"], "prefetch": ["--prefetch", "off"]}

# The order of what the cells tell (GPU): the launch-bound models where graphs must win, the
# headline 16-bit ResNet-50, what each feature gains, then the rest of the zoo and precisions.
FIRST = [("lenet", 64, "fp32", "vs"), ("lstm32", 64, "fp32", "vs"), ("fcn5", 64, "fp32", "vs"),
         ("lenet", 64, "fp32", "graphs"), ("lstm32", 64, "fp32", "graphs"),
         ("resnet50", 256, "bf16", "vs"), ("resnet50", 64, "fp32", "vs"),
         ("resnet50", 64, "fp32", "prefetch"), ("resnet50", 256, "fp32", "vs"),
         ("resnet50", 64, "bf16", "vs"), ("resnet50", 64, "default", "vs"),
         ("resnet50", 64, "fp16", "vs"), ("alexnet", 128, "fp32", "vs"),
         ("vgg16", 64, "fp32", "vs"), ("googlenet", 128, "fp32", "vs")]
ZOO = [("lenet", 64), ("lstm32", 64), ("fcn5", 64), ("resnet50", 64), ("resnet50", 256),
       ("alexnet", 128), ("vgg16", 64), ("googlenet", 128)]
# The CPU rehearsal (--device cpu): small, to prove the script, not to measure.
REHEARSAL = [("lenet", 8, "fp32", "vs"), ("lenet", 8, "bf16", "vs"), ("lstm32", 4, "fp32", "vs"),
             ("lenet", 8, "fp32", "graphs")]

# Step times, ms (dtbench, PyTorch), from the first H100 run (bench/results/2026-11-26-h100):
# fp32 per model and batch, other configurations where it measured them (ResNet-50 b256's
# PyTorch fp32 figure a guess); and seconds of start-up per process (CUDA, cuDNN's algorithm
# search). Estimates for the budget only.
STEP_MS = {"lenet:64": (0.5, 1.2), "fcn5:64": (3.1, 3.7), "lstm32:64": (3.7, 4.9),
           "alexnet:128": (32, 27), "vgg16:64": (202, 122), "googlenet:128": (80, 74),
           "resnet50:64": (124, 87), "resnet50:256": (473, 330),
           "resnet50:64:default": (80, 44), "resnet50:64:bf16": (84, 47),
           "resnet50:64:fp16": (87, 37), "resnet50:256:default": (318, 150),
           "resnet50:256:bf16": (466, 66), "lenet:8": (20, 15), "lstm32:4": (60, 40)}
START_S = {"cuda": (5.0, 8.0), "cpu": (1.5, 4.0)}
SEARCH_S = {"resnet50": 10, "googlenet": 10, "vgg16": 4, "alexnet": 3, "lenet": 1}
TARGET = {"lenet": 1.5, "fcn5": 1.5, "lstm32": 1.5}  # else 1.0 (issue: targets on one H100)


def plan_cells(a):
    if a.device == "cpu":
        cells = list(REHEARSAL)
    else:
        cells = list(FIRST)
        for config in CONFIGS:
            for model, batch in ZOO:
                if (model, batch, config, "vs") not in cells:
                    cells.append((model, batch, config, "vs"))
    models = set(a.models.split()) if a.models else None
    configs = set(a.configs.split()) if a.configs else None
    return [c for c in cells if (not models or f"{c[0]}:{c[1]}" in models or c[0] in models)
            and (not configs or c[2] in configs)]


def estimate(a, cell, scale):
    """Seconds a cell should take: rounds x both sides' start-up and steps."""
    model, batch, config, kind = cell
    dt_ms, pt_ms = STEP_MS.get(f"{model}:{batch}:{config}",
                               STEP_MS.get(f"{model}:{batch}", (300.0, 300.0)))
    s_dt, s_pt = START_S[a.device]
    search = SEARCH_S.get(model, 0) if a.device == "cuda" else 0
    steps = a.warmup + a.iters
    side_a = s_dt + search + steps * dt_ms / 1e3
    side_b = side_a if kind != "vs" else s_pt + search + steps * pt_ms / 1e3
    return a.rounds * (side_a + side_b) * scale


def cell_name(cell):
    model, batch, config, kind = cell
    return f"{model}-b{batch}-{config}" + ("" if kind == "vs" else f"-{kind}-off")


def dtbench_cmd(a, cell, side, rnd, out):
    model, batch, config, kind = cell
    cmd = shlex.split(a.mpirun) + [a.dtbench] if a.mpirun else [a.dtbench]
    cmd += ["--model", model, "--dataset", "synthetic", "--batch", str(batch),
            "--warmup", str(a.warmup), "--iters", str(a.iters), "--device", a.device,
            "--sample-hz", "0", "--calibrate-iters", "0", "--seed", str(rnd + 1),
            "--output", out, "--overwrite"] + CONFIGS[config][0]
    if side == "B" and kind != "vs":
        cmd += ABLATION[kind]
    return cmd + a.fallback


def torch_cmd(a, cell, rnd):
    model, batch, config, _ = cell
    cmd = [a.torch_python, os.path.join(a.here, "torch_peer.py"), "--model", model,
           "--batch", str(batch), "--iters", str(a.iters), "--warmup", str(a.warmup),
           "--device", a.device, "--seed", str(rnd + 1)] + CONFIGS[config][1]
    if a.device == "cuda":
        cmd += ["--data", "pinned"]
    return cmd


def read_dtbench(path):
    """Median step and data phase (s) of a result file's measured iterations, and what ran."""
    import h5py
    import numpy as np
    with h5py.File(path, "r") as f:
        it = f["iterations"]
        w = int(f.attrs["warmup"])
        total, data = it["total"][0, w:], it["data"][0, w:]
        total, data = total[~np.isnan(total)], data[~np.isnan(data)]
        if not len(total):
            raise ValueError("no measured iteration")
        note = {k: str(f.attrs.get(k, "")) for k in ("graphs", "graphs_reason", "prefetch")}
        return {"median": float(np.median(total)), "p5": float(np.percentile(total, 5)),
                "p95": float(np.percentile(total, 95)), "data": float(np.median(data)),
                "steps": int(len(total)), **note}


def read_torch(path):
    with open(path) as f:
        j = json.load(f)
    return {"median": j["median_s"], "p5": j["p5_s"], "p95": j["p95_s"], "data": float("nan"),
            "steps": j["iters"], "graphs": "", "graphs_reason": "", "prefetch": j.get("data", "")}


def run_side(a, cell, side, rnd, raw, left):
    """One process of one side; its figures, or None with the reason in the log."""
    kind = cell[3]
    torch_side = side == "B" and kind == "vs"
    stem = os.path.join(raw, f"r{rnd}-{'torch' if torch_side else 'dtbench'}"
                        + ("-off" if side == "B" and not torch_side else ""))
    out = stem + (".json" if torch_side else ".h5")
    cmd = torch_cmd(a, cell, rnd) if torch_side else dtbench_cmd(a, cell, side, rnd, out)
    t0 = time.time()
    rec = {"cmd": " ".join(cmd), "file": os.path.relpath(out, a.out), "wall": 0.0, "error": ""}
    try:
        with open(stem + ".log", "w") as log:
            if torch_side:
                with open(out, "w") as js:
                    p = subprocess.run(cmd, stdout=js, stderr=log, timeout=max(left, 30))
            else:
                p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=max(left, 30))
        rec["wall"] = time.time() - t0
        if p.returncode:
            with open(stem + ".log") as log:
                lines = [ln.strip() for ln in log if ln.strip()]
            rec["error"] = f"exit {p.returncode}: {lines[-1] if lines else ''}"[:200]
            return rec
        rec.update(read_torch(out) if torch_side else read_dtbench(out))
    except subprocess.TimeoutExpired:
        rec["wall"], rec["error"] = time.time() - t0, "timed out (budget)"
    except (OSError, ValueError, KeyError) as e:
        rec["error"] = f"unreadable result: {e}"[:200]
    return rec


def run_cell(a, cell, rw, start):
    """Every round of a cell (both sides, alternated); stops at the first failed run."""
    raw = os.path.join(a.out, "raw", cell_name(cell))
    os.makedirs(raw, exist_ok=True)
    runs = []
    print(f"== {cell_name(cell)}: {a.rounds} rounds" + (" (" + " ".join(a.fallback) + ")"
                                                      if a.fallback else ""), flush=True)
    for rnd in range(a.rounds):
        for side in ("AB" if rnd % 2 == 0 else "BA"):
            left = a.budget - (time.time() - start)
            r = run_side(a, cell, side, rnd, raw, left + 30)
            r.update(side=side, round=rnd,
                     program="torch" if side == "B" and cell[3] == "vs" else "dtbench")
            runs.append(r)
            rw.writerow([cell_name(cell), rnd, side, r["error"],
                         *(f"{r.get(k, math.nan) * 1e3:.4f}" for k in
                           ("median", "p5", "p95", "data")),
                         f"{r['wall']:.1f}", r.get("graphs", ""), r.get("prefetch", ""),
                         r["file"], r["cmd"]])
            print(f"   round {rnd} {side} ({r['program']}): " + (
                r["error"] or f"{r['median'] * 1e3:.3f} ms/step ({r['wall']:.1f} s)"),
                flush=True)
            if r["error"]:
                return runs
    return runs


def summarise(a, cell, runs):
    model, batch, config, kind = cell
    sides = {}
    for side in "AB":
        ok = [r["median"] for r in runs if r["side"] == side and not r["error"]]
        if len(ok) < a.rounds:
            return None
        med = statistics.median(ok)
        data = [r["data"] for r in runs if r["side"] == side and not r["error"]]
        sides[side] = {"sps": batch / med, "ms": med * 1e3,
                       "spread": (max(ok) - min(ok)) / med * 100,
                       "data_ms": statistics.median(data) * 1e3 if data else float("nan")}
    ratio = sides["A"]["sps"] / sides["B"]["sps"]
    target = TARGET.get(model, 1.0) if kind == "vs" else None
    noisy = max(sides["A"]["spread"], sides["B"]["spread"]) > 10
    verdict = "-" if target is None else ("yes" if ratio >= target else "no")
    if noisy:
        verdict += " (noisy)"
    first_a = next(r for r in runs if r["side"] == "A" and not r["error"])
    return {"model": model, "batch": batch, "config": config, "kind": kind,
            "a_sps": sides["A"]["sps"], "b_sps": sides["B"]["sps"], "ratio": ratio,
            "a_ms": sides["A"]["ms"], "b_ms": sides["B"]["ms"],
            "a_spread": sides["A"]["spread"], "b_spread": sides["B"]["spread"],
            "a_data_ms": sides["A"]["data_ms"], "graphs": first_a.get("graphs", ""),
            "target": "" if target is None else target, "verdict": verdict}


def fmt_table(rows, notes, a):
    head = (f"{'model':10} {'batch':>5} {'config':8} {'compared':16} {'dtbench/s':>10} "
            f"{'other/s':>10} {'ratio':>6} {'spread%':>11} {'data ms':>8} {'graphs':16} "
            f"{'target':>6} verdict")
    lines = [head]
    for r in rows:
        other = "pytorch" if r["kind"] == "vs" else f"{r['kind']} off"
        lines.append(f"{r['model']:10} {r['batch']:>5} {r['config']:8} {'dtbench/' + other:16} "
                     f"{r['a_sps']:10.1f} {r['b_sps']:10.1f} {r['ratio']:6.2f} "
                     f"{r['a_spread']:5.1f}/{r['b_spread']:<5.1f} {r['a_data_ms']:8.3f} "
                     f"{r['graphs'] or '-':16} {r['target'] or '-':>6} {r['verdict']}")
    lines += notes
    lines.append(f"ratio: dtbench samples/s over the other side's (> 1: dtbench faster); "
                 f"{a.rounds} rounds x {a.iters} steps after {a.warmup} warm-up steps per side, "
                 "rounds alternated; spread: (max - min) / median of the round medians, dtbench/"
                 "other; data ms: dtbench's median data phase (the wait for its batch)")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--dtbench", required=True)
    p.add_argument("--torch-python", required=True)
    p.add_argument("--mpirun", default="", help="launcher prefix, e.g. 'mpirun -np 1'")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--budget", type=float, default=420)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--models", default="", help="model or model:batch, space-separated")
    p.add_argument("--configs", default="", help="of " + " ".join(CONFIGS))
    p.add_argument("--plan-only", action="store_true")
    a = p.parse_args()
    a.here = os.path.dirname(os.path.abspath(__file__))
    if a.device == "cuda" and (a.rounds < 3 or a.iters < 50 or a.warmup < 10):
        sys.exit("gpu_bench: on a GPU at least 3 rounds of 50 measured steps after 10 warm-up "
                 "steps (--rounds, --iters, --warmup)")
    start = time.time()
    cells = plan_cells(a)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "plan.txt"), "w") as f:
        spent = 0.0
        for c in cells:
            est = estimate(a, c, 1.0)
            spent += est
            fits = "fits" if spent <= a.budget else "beyond the budget"
            f.write(f"{cell_name(c):34} {c[3]:8} est {est:6.0f} s, {spent:6.0f} s in all ({fits})\n")
    print(open(os.path.join(a.out, "plan.txt")).read(), end="", flush=True)
    if a.plan_only:
        return 0
    runs_csv = open(os.path.join(a.out, "runs.csv"), "w", newline="")
    rw = csv.writer(runs_csv)
    rw.writerow(["cell", "round", "side", "error", "median_ms", "p5_ms", "p95_ms", "data_ms",
                 "wall_s", "graphs", "prefetch", "file", "command"])
    rows, notes, est_sum, act_sum = [], [], 0.0, 0.0
    a.fallback = []
    for cell in cells:
        scale = min(3.0, max(0.5, act_sum / est_sum)) if est_sum else 1.0
        left = a.budget - (time.time() - start)
        if estimate(a, cell, scale) > left:
            notes.append(f"not run: {cell_name(cell)} ({cell[3]}): about "
                         f"{estimate(a, cell, scale):.0f} s, {left:.0f} s of the budget left")
            continue
        t_cell = time.time()
        runs = run_cell(a, cell, rw, start)
        failed = next((r for r in runs if r["error"] and r["program"] == "dtbench"), None)
        if (failed and a.device == "cuda" and not a.fallback
                and not failed["error"].startswith(("exit 2", "timed out"))):
            # never run on a GPU before: the cell and every later one again without them
            a.fallback = ["--graphs", "off", "--prefetch", "off"]
            notes.append(f"dtbench failed in {cell_name(cell)} ({failed['error']}): that cell "
                         "and every later one ran with --graphs off --prefetch off")
            runs = run_cell(a, cell, rw, start)
        runs_csv.flush()
        est_sum += estimate(a, cell, 1.0)
        act_sum += time.time() - t_cell
        s = summarise(a, cell, runs)
        if s:
            rows.append(s)
        else:
            err = next(r for r in runs if r["error"])
            notes.append(f"failed: {cell_name(cell)} round {err['round']} side {err['side']}: "
                         f"{err['error']} ({err['file']})")
    runs_csv.close()
    with open(os.path.join(a.out, "cells.csv"), "w", newline="") as f:
        keys = ["model", "batch", "config", "kind", "a_sps", "b_sps", "ratio", "a_ms", "b_ms",
                "a_spread", "b_spread", "a_data_ms", "graphs", "target", "verdict"]
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    notes.append(f"{time.time() - start:.0f} s of a {a.budget:.0f} s budget")
    if a.device == "cpu":
        notes.insert(0, "REHEARSAL on the CPU (--device cpu): proves the script, measures "
                        "nothing")
    text = fmt_table(rows, notes, a)
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
