"""gpu_bench.py - dtbench against PyTorch on one GPU, side by side in one run, rounds alternated.

The core of bench/gpu_bench.sh (which finds the programs and the interpreters, and says how to
read the output: bench/README.md "The GPU benchmark"). Run by an interpreter with h5py; PyTorch
runs in its own (--torch-python), in ONE process for the whole run (bench/torch_rounds.py).

A cell is one model at one batch in one precision, of one kind:
  vs        dtbench against bench/torch_peer.py;
  graphs    dtbench against itself with --graphs off (what replaying the step gains);
  prefetch  dtbench against itself with --prefetch off (what the prefetched upload gains).
Each cell runs ROUNDS rounds (default 2); a round runs both sides once, in alternated order (A B,
B A, ...): dtbench a fresh process, PyTorch a fresh network in its process, each WARMUP + ITERS
steps. By default each cell's steps are sized from its step time on the last GPU run (STEP_MS):
about MEASURE_S seconds of measured steps on the slower side (10 to 200 steps) after a warm-up of
at least 3 steps (dtbench captures its graphs in steps 1 and 2); --iters/--warmup set them for
every cell. Without --models, --configs or --all the cells are the headline ones (HEADLINE); the
cells run in order while the --budget lasts: a cell starts only when its estimated cost
(estimate(), scaled by what the cells so far took against their estimates) fits in what is
left. Results: OUT/table.txt (also printed; bench/gpu_bench_table.py says what it holds),
cells.csv, runs.csv, plan.txt, raw/<cell>/ (every result file, JSON and log).
"""
import argparse
import csv
import json
import math
import os
import select
import shlex
import subprocess
import sys
import time

import gpu_bench_table as tab

# config: (dtbench arguments, torch_peer arguments); bench/gpu_bench_table.py's PRECISION_NOTE
# says what each compares
CONFIGS = {
    "fp32": (["--precision", "fp32"], ["--precision", "fp32", "--cudnn-benchmark"]),
    "tf32": (["--precision", "tf32"], ["--precision", "default"]),
    "bf16": (["--precision", "bf16"],
             ["--precision", "bf16", "--cudnn-benchmark", "--channels-last"]),
    "fp16": (["--precision", "fp16"],
             ["--precision", "fp16", "--cudnn-benchmark", "--channels-last"]),
}
ABLATION = {"graphs": ["--graphs", "off"], "prefetch": ["--prefetch", "off"]}

# The default cells, in the order of what they tell: the headline ResNet-50 in 16 bits, the
# launch-bound models where graphs must win, the other conv nets in 16 bits (where the last run
# found dtbench behind), ResNet-50 in strict fp32 last (the dearest cell: 10 steps of 0.28 s).
HEADLINE = [("resnet50", 256, "bf16", "vs"), ("lenet", 64, "fp32", "vs"),
            ("lstm32", 64, "fp32", "vs"), ("fcn5", 64, "fp32", "vs"),
            ("googlenet", 128, "bf16", "vs"), ("vgg16", 64, "bf16", "vs"),
            ("alexnet", 128, "bf16", "vs"), ("resnet50", 256, "fp32", "vs")]
# --all: the headline cells, what graphs and prefetching gain, GPT-2 in bf16 (TRANSFORMER_CELLS),
# then the whole zoo in each precision
ABLATIONS = [("lenet", 64, "fp32", "graphs"), ("lstm32", 64, "fp32", "graphs"),
             ("resnet50", 256, "bf16", "prefetch"), ("resnet50", 256, "bf16", "graphs")]
ZOO = [("lenet", 64), ("lstm32", 64), ("fcn5", 64), ("resnet50", 256), ("resnet50", 64),
       ("alexnet", 128), ("vgg16", 64), ("googlenet", 128)]
# The transformers (--all, or --models gpt2): GPT-2 124M at its context, 8 x 1024 tokens a step, in
# bf16 against PyTorch's autocast with scaled_dot_product_attention (flash attention) and fused
# AdamW; both sides AdamW with weight decay 0.1 (TRANSFORMER_ARGS). Not a headline cell: the
# one-call session (scripts/gpu_session.sh) has no room for it; its own step there is
# gpu-bench-gpt2 (--only).
TRANSFORMER_CELLS = [("gpt2", 8, "bf16", "vs")]
TRANSFORMERS = ("nanogpt-char", "gpt2", "gpt2-medium")
TRANSFORMER_ARGS = ["--optimizer", "adamw", "--weight-decay", "0.1"]
# The CPU rehearsal (--device cpu): small, to prove the script, not to measure; --models
# nanogpt-char rehearses a transformer's cell (REHEARSAL_GPT, about a minute on 2 cores).
REHEARSAL = [("lenet", 8, "fp32", "vs"), ("lenet", 8, "bf16", "vs"), ("lstm32", 4, "fp32", "vs"),
             ("lenet", 8, "fp32", "graphs")]
REHEARSAL_GPT = [("nanogpt-char", 1, "fp32", "vs")]

# Step times, ms (dtbench, PyTorch): the H200 run of 2026-11-28 where it measured them (LeNet,
# LSTM-32, FCN-5, AlexNet in fp32; ResNet-50 b256 in fp32, tf32 and bf16; VGG16 and GoogLeNet in
# bf16), the H100 run of 2026-11-26 for the rest; a model's fp32 figure stands in for a precision
# not measured. Per process or request (s): dtbench's start-up (mpirun, CUDA, building the model,
# timing cuDNN's algorithms: 1.1 s for LeNet, 2.5-2.7 s for AlexNet and FCN-5, 2 s for a
# ResNet-50 b64 run of 8 steps on the H200), PyTorch's model, data pool and cudnn.benchmark, and
# the PyTorch process's own start (once). Estimates for the plan and the budget only.
STEP_MS = {"lenet:64": (0.274, 1.92), "lstm32:64": (3.10, 6.12), "fcn5:64": (1.79, 2.73),
           "alexnet:128": (23.7, 15.7), "vgg16:64": (202, 122), "vgg16:64:bf16": (20.5, 21.1),
           "googlenet:128": (80, 74), "googlenet:128:bf16": (37.9, 24.8),
           "resnet50:64": (124, 87), "resnet50:64:bf16": (84, 47), "resnet50:64:fp16": (87, 37),
           "resnet50:64:tf32": (80, 44), "resnet50:256": (275, 281),
           "resnet50:256:tf32": (91, 117), "resnet50:256:bf16": (82.8, 55.7),
           "lenet:8": (20, 15), "lstm32:4": (60, 40), "nanogpt-char:1": (1000, 1000),
           # not measured on a GPU yet: PyTorch at ~250 TFLOP/s on its ~7 TFLOP a step, dtbench
           # (no fused attention) guessed at 3x its time
           "gpt2:8:bf16": (120, 35)}
DT_START_S = {"fcn5": 2.8, "fcn8": 3.0, "alexnet": 2.6, "vgg16": 3.0, "googlenet": 2.0,
              "resnet50": 3.0, "gpt2": 4.0}
PT_BUILD_S = {"lenet": 0.3, "lstm32": 0.5, "fcn5": 1.5, "alexnet": 1.5, "vgg16": 2.5,
              "googlenet": 2.0, "resnet50": 2.5, "gpt2": 3.0}
PT_PROCESS_S = 12.0
CPU_START_S = (1.5, 1.0)  # the rehearsal: dtbench, a PyTorch request
MEASURE_S = 1.5
MIN_ROUNDS, MIN_ITERS, MIN_WARMUP = 2, 10, 3


def plan_cells(a):
    if a.device == "cpu":
        cells = REHEARSAL + (REHEARSAL_GPT if a.models else [])
    elif not (a.all or a.models or a.configs):
        cells = list(HEADLINE)
    else:
        cells = HEADLINE + ABLATIONS + TRANSFORMER_CELLS
        cells += [(m, b, c, "vs") for c in CONFIGS for m, b in ZOO
                  if (m, b, c, "vs") not in cells]
    models = set(a.models.split()) if a.models else None
    configs = {"tf32" if c == "default" else c for c in a.configs.split()} if a.configs else None
    return [c for c in cells if (not models or f"{c[0]}:{c[1]}" in models or c[0] in models)
            and (not configs or c[2] in configs)]


def step_ms(cell):
    model, batch, config, _ = cell
    return STEP_MS.get(f"{model}:{batch}:{config}", STEP_MS.get(f"{model}:{batch}", (300, 300)))


def steps_of(a, cell):
    """(warm-up, measured) steps of a cell: about MEASURE_S of the slower side, or as asked."""
    slow = max(step_ms(cell)) / 1e3
    iters = min(200, max(MIN_ITERS, math.ceil(MEASURE_S / slow)))
    warmup = min(20, max(MIN_WARMUP, math.ceil(0.2 / slow)))
    if a.device == "cpu":
        warmup, iters = 1, (2 if cell[0] in TRANSFORMERS else 5)
    return (a.warmup if a.warmup is not None else warmup,
            a.iters if a.iters is not None else iters)


def estimate(a, cell, scale=1.0):
    """Seconds a cell should take: rounds x both sides' start-up and steps."""
    model, batch, config, kind = cell
    dt_ms, pt_ms = step_ms(cell)
    warmup, iters = steps_of(a, cell)
    dt_s, pt_s = ((DT_START_S.get(model, 1.2), PT_BUILD_S.get(model, 1.0)) if a.device == "cuda"
                  else CPU_START_S)
    side_a = dt_s + (warmup + iters) * dt_ms / 1e3
    side_b = side_a if kind != "vs" else pt_s + (warmup + iters) * pt_ms / 1e3
    return a.rounds * (side_a + side_b) * scale


def write_plan(a, cells):
    """plan.txt (also printed): each cell's steps and estimated seconds; the total."""
    lines, spent = [], PT_PROCESS_S if any(c[3] == "vs" for c in cells) else 0.0
    lines.append(f"{'PyTorch process start (once)':45} est {spent:6.0f} s")
    for c in cells:
        est = estimate(a, c)
        spent += est
        warmup, iters = steps_of(a, c)
        fits = "fits" if spent <= a.budget else "beyond the budget"
        steps = f"{a.rounds}x{iters}+{warmup}"
        lines.append(f"{tab.cell_name(c):34} {steps:10} est {est:6.0f} s, {spent:6.0f} s in all "
                     f"({fits})")
    lines.append(f"total: est {spent:.0f} s for {len(cells)} cells ({a.device}); budget "
                 f"{a.budget:.0f} s")
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(os.path.join(a.out, "plan.txt"), "w") as f:
            f.write(text)
    print(text, end="", flush=True)


class TorchSide:
    """The PyTorch process (bench/torch_rounds.py): started once, restarted after a failure."""

    def __init__(self, a):
        self.a, self.p, self.hello = a, None, {}

    def start(self):
        self.p = subprocess.Popen([self.a.torch_python, os.path.join(self.a.here,
                                                                     "torch_rounds.py")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(os.path.join(self.a.out, "torch_rounds.log"), "a"),
                                  text=True, bufsize=1)
        self.hello = self.read(120)
        if not self.hello.get("ready"):
            raise RuntimeError(f"PyTorch did not start ({self.hello.get('error', '')}; see "
                               "torch_rounds.log)")
        return self.hello

    def read(self, timeout):
        """The process's next JSON line (lines that are not JSON are skipped); on a timeout or
        its end, an error, and the process is stopped."""
        deadline = time.time() + max(timeout, 1)
        while True:
            ready, _, _ = select.select([self.p.stdout], [], [], max(deadline - time.time(), 0))
            line = self.p.stdout.readline() if ready else ""
            if not line:
                self.stop()
                return {"rc": 1, "error": "PyTorch ended" if ready else "timed out (budget)"}
            try:
                return json.loads(line)
            except ValueError:
                continue

    def run(self, argv, out, log, timeout):
        if self.p is None or self.p.poll() is not None:
            self.start()
        self.p.stdin.write(json.dumps({"argv": argv, "out": out, "log": log}) + "\n")
        self.p.stdin.flush()
        return self.read(timeout)

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.p = None


def model_args(model):
    """Both sides' arguments of a transformer: its sequence (the context) and AdamW."""
    if model not in TRANSFORMERS:
        return []
    return ["--seq-len", str(tab.TOKENS[model])] + TRANSFORMER_ARGS


def dtbench_cmd(a, cell, side, rnd, out, warmup, iters):
    model, batch, config, kind = cell
    cmd = shlex.split(a.mpirun) + [a.dtbench] if a.mpirun else [a.dtbench]
    cmd += ["--model", model, "--dataset", "synthetic", "--batch", str(batch),
            "--warmup", str(warmup), "--iters", str(iters), "--device", a.device,
            "--sample-hz", "0", "--calibrate-iters", "0", "--seed", str(rnd + 1),
            "--output", out, "--overwrite"] + CONFIGS[config][0] + model_args(model)
    if side == "B" and kind != "vs":
        cmd += ABLATION[kind]
    return cmd + a.fallback


def torch_argv(a, cell, rnd, warmup, iters):
    model, batch, config, _ = cell
    argv = ["--model", model, "--batch", str(batch), "--iters", str(iters), "--warmup",
            str(warmup), "--device", a.device, "--seed", str(rnd + 1)] + CONFIGS[config][1]
    argv += model_args(model)
    return argv + (["--data", "pinned"] if a.device == "cuda" else [])


def run_side(a, torch_side, cell, side, rnd, raw, left):
    """One run of one side; its record (figures, or the reason in 'error')."""
    is_torch = side == "B" and cell[3] == "vs"
    stem = os.path.join(raw, f"r{rnd}-{'torch' if is_torch else 'dtbench'}"
                        + ("-off" if side == "B" and not is_torch else ""))
    out = stem + (".json" if is_torch else ".h5")
    warmup, iters = steps_of(a, cell)
    rec = {"cell_t": cell, "round": rnd, "side": side, "program": "torch" if is_torch
           else "dtbench", "file": os.path.relpath(out, a.out), "error": ""}
    t0 = time.time()
    if is_torch:
        argv = torch_argv(a, cell, rnd, warmup, iters)
        rec["cmd"] = "torch_peer.py " + " ".join(argv)
        r = torch_side.run(argv, out, stem + ".log", left)
        rec["error"] = r.get("error", "") if r.get("rc") else ""
    else:
        cmd = dtbench_cmd(a, cell, side, rnd, out, warmup, iters)
        rec["cmd"] = " ".join(cmd)
        try:
            with open(stem + ".log", "w") as log:
                p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=left)
            if p.returncode:
                with open(stem + ".log") as log:
                    lines = [ln.strip() for ln in log if ln.strip()]
                rec["error"] = f"exit {p.returncode}: {lines[-1] if lines else ''}"[:200]
        except subprocess.TimeoutExpired:
            rec["error"] = "timed out (budget)"
    rec["wall"] = time.time() - t0
    return rec if rec["error"] else tab.read_run(a.out, rec)


def run_cell(a, torch_side, cell, emit, start):
    """Every round of a cell (both sides, alternated); stops at the first failed run."""
    raw = os.path.join(a.out, "raw", tab.cell_name(cell))
    os.makedirs(raw, exist_ok=True)
    runs = []
    warmup, iters = steps_of(a, cell)
    print(f"== {tab.cell_name(cell)}: {a.rounds} rounds of {warmup} + {iters} steps"
          + (" (" + " ".join(a.fallback) + ")" if a.fallback else ""), flush=True)
    for rnd in range(a.rounds):
        for side in ("AB" if rnd % 2 == 0 else "BA"):
            left = a.budget - (time.time() - start) + 30
            r = run_side(a, torch_side, cell, side, rnd, raw, left)
            runs.append(r)
            emit(tab.run_row(r))
            print(f"   round {rnd} {side} ({r['program']}): " + (
                r["error"] or f"{r['median'] * 1e3:.3f} ms/step ({r['wall']:.1f} s)"),
                flush=True)
            if r["error"]:
                return runs
    return runs


def run_cells(a, cells, emit, start):
    """Runs the cells that fit; (table rows, notes)."""
    rows, notes, est_sum, act_sum = [], [], 0.0, 0.0
    torch_side = TorchSide(a)
    if any(c[3] == "vs" for c in cells):
        hello = torch_side.start()
        with open(os.path.join(a.out, "machine.txt"), "a") as f:
            f.write(f"torch: {hello['torch']} cuda {hello['cuda']} cudnn {hello['cudnn']} "
                    f"gpu {hello['gpu']} ({hello['python']}; one process, "
                    f"{time.time() - start:.0f} s to start)\n")
        if a.device == "cuda" and not hello["cuda_available"]:
            raise RuntimeError(f"{a.torch_python}'s torch sees no GPU")
    for cell in cells:
        scale = min(3.0, max(0.5, act_sum / est_sum)) if est_sum else 1.0
        left = a.budget - (time.time() - start)
        if estimate(a, cell, scale) > left:
            notes.append(f"not run: {tab.cell_name(cell)} ({cell[3]}): about "
                         f"{estimate(a, cell, scale):.0f} s, {left:.0f} s of the budget left")
            continue
        t_cell = time.time()
        runs = run_cell(a, torch_side, cell, emit, start)
        failed = next((r for r in runs if r["error"] and r["program"] == "dtbench"), None)
        if (failed and a.device == "cuda" and not a.fallback
                and not failed["error"].startswith(("exit 2", "timed out"))):
            # the cell and every later one again without them, so the comparison goes on
            a.fallback = ["--graphs", "off", "--prefetch", "off"]
            notes.append(f"dtbench failed in {tab.cell_name(cell)} ({failed['error']}): that "
                         "cell and every later one ran with --graphs off --prefetch off")
            runs = run_cell(a, torch_side, cell, emit, start)
        est_sum += estimate(a, cell)
        act_sum += time.time() - t_cell
        s = tab.summarise(cell, runs, a.rounds)
        if s:
            rows.append(s)
        else:
            err = next(r for r in runs if r["error"])
            notes.append(f"failed: {tab.cell_name(cell)} round {err['round']} side "
                         f"{err['side']}: {err['error']} ({err['file']})")
    torch_side.stop()
    return rows, notes


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="")
    p.add_argument("--dtbench", default="")
    p.add_argument("--torch-python", default="")
    p.add_argument("--mpirun", default="", help="launcher prefix, e.g. 'mpirun -np 1'")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--budget", type=float, default=300)
    p.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    p.add_argument("--iters", type=int, default=None, help="measured steps of every cell")
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps of every cell")
    p.add_argument("--models", default="", help="model or model:batch, space-separated")
    p.add_argument("--configs", default="", help="of " + " ".join(CONFIGS))
    p.add_argument("--all", action="store_true", help="every cell, not the headline ones")
    p.add_argument("--plan-only", action="store_true")
    a = p.parse_args()
    a.here = os.path.dirname(os.path.abspath(__file__))
    if a.device == "cuda" and (a.rounds < MIN_ROUNDS
                               or (a.iters is not None and a.iters < MIN_ITERS)
                               or (a.warmup is not None and a.warmup < MIN_WARMUP)):
        p.error(f"on a GPU at least {MIN_ROUNDS} rounds of {MIN_ITERS} measured steps after "
                f"{MIN_WARMUP} warm-up steps (--rounds, --iters, --warmup)")
    if a.configs and not {c for c in a.configs.split()} <= set(CONFIGS) | {"default"}:
        p.error(f"--configs: '{a.configs}' is not accepted: expected some of "
                + " ".join(CONFIGS))
    if not a.plan_only and not (a.out and a.dtbench and a.torch_python):
        p.error("--out, --dtbench and --torch-python are needed (or --plan-only)")
    return a


def main():
    a = parse_args()
    start = time.time()
    cells = plan_cells(a)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    write_plan(a, cells)
    if a.plan_only:
        return 0
    a.fallback = []
    with open(os.path.join(a.out, "runs.csv"), "w", newline="") as f:
        rw = csv.writer(f, lineterminator="\n")
        rw.writerow(tab.RUN_KEYS)

        def emit(row):  # each run as it ends: a stopped benchmark keeps what it measured
            rw.writerow(row)
            f.flush()
        try:
            rows, notes = run_cells(a, cells, emit, start)
        except RuntimeError as e:
            print(f"gpu_bench: error: {e}", file=sys.stderr)
            return 2
    tab.write_cells(a.out, rows)
    if a.device == "cpu":
        notes.insert(0, "REHEARSAL on the CPU (--device cpu): proves the script, measures "
                        "nothing")
    text = tab.fmt_table(rows, notes, [f"{time.time() - start:.0f} s of a {a.budget:.0f} s "
                                       "budget"])
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
