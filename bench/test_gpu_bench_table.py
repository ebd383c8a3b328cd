"""test_gpu_bench_table.py - bench/gpu_bench_table.py's table on results folders made here (no
GPU, no PyTorch): result files of dtbench written by h5py in the layout of docs/hdf5-layout.md
and PyTorch's JSON, with the figures and phases chosen so that each target is met or missed by
a known amount; the language models' tokens/s. Run by bench/test_gpu_bench_table.sh; prints "ok"
lines, exits 1 on a failure.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_bench_table as tab  # noqa: E402

PH = ("data", "forward", "backward", "exchange", "update")
failures = 0


def check(what, cond, detail=""):
    global failures
    print(("ok: " if cond else "FAIL: ") + what + ("" if cond else f": {detail}"))
    failures += not cond


def dtbench_file(path, warmup, totals, share, extra=None, completed=None, nranks=1):
    """One rank's /iterations: each iteration's phases share its total as 5/25/40% for data,
    forward and backward, SHARE for the exchange, 1% for the update (so they add up to less);
    EXTRA {iteration: relative excess} makes that iteration's phases add up to total * (1 + x);
    columns beyond COMPLETED hold phases far above their totals (a reader must not see them)."""
    totals = np.asarray(totals, dtype=float)
    n = len(totals) if completed is None else completed
    cols = {"data": .05 * totals, "forward": .25 * totals, "backward": .4 * totals,
            "exchange": np.asarray(share, dtype=float) * totals, "update": .01 * totals}
    for i, x in (extra or {}).items():  # the backward phase takes what is asked
        rest = sum(cols[k][i] for k in PH if k != "backward")
        cols["backward"][i] = totals[i] * (1 + x) - rest
    for k in PH:
        cols[k][n:] = 10 * totals[n:]
    with h5py.File(path, "w") as f:
        f.attrs.update(dict(schema_version=1, warmup=warmup, nranks=nranks, graphs="forward",
                            prefetch="on"))
        f.create_dataset("ranks/completed", data=np.array([n] * nranks, dtype=np.int64))
        for k in PH + ("total",):
            v = totals if k == "total" else cols[k]
            f.create_dataset(f"iterations/{k}", data=np.tile(v, (nranks, 1)))


def torch_file(path, median_ms, iters=4):
    with open(path, "w") as f:
        json.dump({"median_s": median_ms / 1e3, "p5_s": median_ms / 1e3, "p95_s": median_ms / 1e3,
                   "iters": iters, "data": "pinned"}, f)


def make_folder(d, cells, old_columns=False):
    """cells: {name: [(round, side, program, writer or error string)]}: writes raw/ and
    runs.csv (the first version's columns with OLD_COLUMNS)."""
    rows = []
    for name, runs in cells.items():
        os.makedirs(os.path.join(d, "raw", name), exist_ok=True)
        for rnd, side, program, what in runs:
            ext = ".json" if program == "torch" else ".h5"
            off = "-off" if side == "B" and program == "dtbench" else ""
            rel = f"raw/{name}/r{rnd}-{program}{off}{ext}"
            error = what if isinstance(what, str) else ""
            if not error:
                what(os.path.join(d, rel))
            rows.append({"cell": name, "round": rnd, "side": side, "program": program,
                         "error": error, "file": rel, "command": "x", "wall_s": "1.0"})
    keys = (["cell", "round", "side", "error", "file", "command", "wall_s"] if old_columns
            else ["cell", "round", "side", "program", "error", "file", "command", "wall_s"])
    with open(os.path.join(d, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def dt(totals_ms, share=0.005, warmup=2, **kw):
    return lambda p: dtbench_file(p, warmup, np.array(totals_ms) / 1e3, share, **kw)


def pt(ms):
    return lambda p: torch_file(p, ms)


def table_of(d):
    text = tab.table_from(d)
    with open(os.path.join(d, "cells.csv")) as f:
        cells = {(r["model"], r["config"], r["kind"]): r for r in csv.DictReader(f)}
    return text, cells


def first_folder(d):
    # LeNet: dtbench 1 ms a step (2 warm-up iterations at 5 ms, with 20% exchange: not
    # measured), PyTorch 2 ms: ratio 2, exchange 0.5%, phases within the total: no miss.
    # Beyond the 6 completed iterations, 2 columns of garbage.
    warm = [5, 5]
    lenet = [(0, "A", "dtbench", dt(warm + [1, 1, 1, 1, 9, 9],
                                    share=[.2, .2, .004, .005, .005, .006, 0, 0], completed=6)),
             (0, "B", "torch", pt(2.0)), (1, "B", "torch", pt(2.0)),
             (1, "A", "dtbench", dt(warm + [1, 1, 1, 1], share=[.2, .2, .004, .005, .005, .006]))]
    # ResNet-50 b256 bf16: 80 ms against 56 ms: 0.70x, 30% short.
    r50 = [(0, "A", "dtbench", dt(warm + [80] * 4)), (0, "B", "torch", pt(56.0)),
           (1, "B", "torch", pt(56.0)), (1, "A", "dtbench", dt(warm + [80] * 4))]
    # GoogLeNet: faster than PyTorch, but 20% of its total in the exchange.
    gnet = [(0, "A", "dtbench", dt(warm + [30] * 4, share=.2)), (0, "B", "torch", pt(36.0)),
            (1, "B", "torch", pt(36.0)), (1, "A", "dtbench", dt(warm + [30] * 4, share=.2))]
    # LSTM-32 against itself with graphs off: 0.9x is no miss (no target against itself);
    # on side B a warm-up iteration 1e-6 over its total (a miss: warm-up iterations count),
    # a measured one 5e-10 over (within 1e-9).
    lstm = [(0, "A", "dtbench", dt(warm + [3] * 4)),
            (0, "B", "dtbench", dt(warm + [2.7] * 4, extra={1: 1e-6, 4: 5e-10})),
            (1, "B", "dtbench", dt(warm + [2.7] * 4)), (1, "A", "dtbench", dt(warm + [3] * 4))]
    # VGG16: PyTorch's second round failed; AlexNet: a file of 2 ranks.
    vgg = [(0, "A", "dtbench", dt(warm + [20] * 4)), (0, "B", "torch", pt(21.0)),
           (1, "B", "torch", "exit 1: CUDA out of memory")]
    alex = [(0, "A", "dtbench", dt(warm + [20] * 4, nranks=2))]
    make_folder(d, {"lenet-b64-fp32": lenet, "resnet50-b256-bf16": r50,
                    "googlenet-b128-bf16": gnet, "lstm32-b64-fp32-graphs-off": lstm,
                    "vgg16-b64-tf32": vgg, "alexnet-b128-fp32": alex})


def check_first(d):
    text, cells = table_of(d)
    lines = text.splitlines()
    le = cells[("lenet", "fp32", "vs")]
    check("lenet: ratio 2 (dtbench 64000 samples/s, PyTorch 32000)",
          abs(float(le["ratio"]) - 2) < 1e-9 and abs(float(le["a_sps"]) - 64000) < 1e-6, le)
    check("lenet: exchange share 0.5% (warm-up's 20% and the uncompleted columns not read)",
          abs(float(le["exch_pct"]) - 0.5) < 1e-9, le["exch_pct"])
    check("lenet: phases within the total, the 12 completed iterations read",
          le["phase_over"] == "0" and le["phase_iters"] == "12", le)
    check("lenet: verdict ok, steps 2x4+2", le["verdict"] == "ok" and le["steps"] == "2x4+2", le)
    check("no MISS line for lenet", not any("MISS lenet" in ln for ln in lines), text)
    r50 = cells[("resnet50", "bf16", "vs")]
    check("resnet50 bf16: 0.70x, a miss", abs(float(r50["ratio"]) - 0.7) < 1e-9
          and r50["verdict"] == "MISS", r50)
    check("resnet50: the miss says 30% short of 1.0x",
          any(ln.startswith("  MISS resnet50 b256 bf16: 0.70x PyTorch, 30% short of 1.0x")
              for ln in lines), text)
    gn = cells[("googlenet", "bf16", "vs")]
    check("googlenet: ratio 1.2 but exchange 20%: a miss by 19 points",
          abs(float(gn["exch_pct"]) - 20) < 1e-9 and gn["verdict"] == "MISS"
          and any("MISS googlenet b128 bf16: exchange 20.00% of the total on one rank (median), "
                  "19.00 points over 1%" in ln for ln in lines), (gn, text))
    check("googlenet: no ratio miss", not any("googlenet" in ln and "PyTorch," in ln
                                              for ln in lines), text)
    ls = cells[("lstm32", "fp32", "graphs")]
    check("lstm32 graphs off: 0.90, no ratio target against itself",
          abs(float(ls["ratio"]) - 0.9) < 1e-9 and "short" not in ls["misses"], ls)
    check("lstm32: 1 iteration (warm-up) over its total by 1e-6 (5e-10 is within 1e-9)",
          ls["phase_over"] == "1" and ls["phase_iters"] == "24"
          and abs(float(ls["phase_worst"]) - 1e-6) < 1e-12, ls)
    check("lstm32: the miss line says so", any(
        "MISS lstm32 b64 fp32 (graphs off): phases exceed the total in 1 of 24 iterations, by "
        "up to 1e-06 of the total" in ln for ln in lines), text)
    check("vgg16 tf32: the failed round is named, no row", ("vgg16", "tf32", "vs") not in cells
          and any(ln.startswith("failed: vgg16-b64-tf32 round 1 side B: exit 1: CUDA out")
                  for ln in lines), text)
    check("alexnet: a file of 2 ranks is refused", any(
        ln.startswith("failed: alexnet-b128-fp32") and "2 ranks, not one" in ln
        for ln in lines), text)
    check("the count of cells that miss", any("3 of 4 cells miss:" in ln for ln in lines), text)
    check("columns: samples/s of both, ratio, precision, exch%, phases", all(
        h in lines[0].split() for h in ("dtbench/s", "other/s", "ratio", "prec", "exch%",
                                         "phases")), lines[0])
    check("the precisions are explained", any(ln.startswith("precision: fp32 = strict fp32")
                                              and "bf16 + channels_last + cudnn.benchmark" in ln
                                              for ln in lines), text)
    with open(os.path.join(d, "table.txt")) as f:
        check("table.txt is the printed table", f.read() == text + "\n")


def check_old_and_bad(d):
    # runs.csv of the first version (no program column); 'default' is tf32's old name
    old = os.path.join(d, "old")
    warm = [5, 5]
    make_folder(old, {"resnet50-b64-default": [
        (0, "A", "dtbench", dt(warm + [10] * 4)), (0, "B", "torch", pt(5.0)),
        (1, "B", "torch", pt(5.0)), (1, "A", "dtbench", dt(warm + [10] * 4))]},
        old_columns=True)
    text, cells = table_of(old)
    check("first-version runs.csv: read, 'default' shown as tf32",
          ("resnet50", "tf32", "vs") in cells and "0.50x PyTorch, 50% short" in text, text)
    script = os.path.join(HERE, "gpu_bench_table.py")
    for args, what in (([os.path.join(d, "none")], "a folder without runs.csv"), ([], "no folder")):
        p = subprocess.run([sys.executable, script] + args, capture_output=True, text=True)
        check(f"{what}: exit 1-2, one line, no traceback", p.returncode in (1, 2)
              and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr,
              p.stderr)


def check_tokens(d):
    # GPT-2 b8 in bf16 (1024 tokens a sample): dtbench 100 ms, PyTorch 40 ms a step: 81920 and
    # 204800 tokens/s, 0.40x; nanogpt-char (a model's name with a hyphen) b2 at 256 tokens: 1 s
    # against 2 s, 512 and 256 tokens/s; LeNet has no tokens/s
    tok = os.path.join(d, "tokens")
    warm = [5, 5]

    def cell(a_ms, b_ms):
        return [(0, "A", "dtbench", dt(warm + [a_ms] * 4)), (0, "B", "torch", pt(b_ms)),
                (1, "B", "torch", pt(b_ms)), (1, "A", "dtbench", dt(warm + [a_ms] * 4))]
    make_folder(tok, {"gpt2-b8-bf16": cell(100, 40), "nanogpt-char-b2-fp32": cell(1000, 2000),
                      "lenet-b64-fp32": cell(1, 2)})
    text, cells = table_of(tok)
    lines = text.splitlines()
    check("a model's name with a hyphen: parsed", tab.parse_cell("nanogpt-char-b2-fp32-graphs-off")
          == ("nanogpt-char", 2, "fp32", "graphs"), tab.parse_cell("nanogpt-char-b2-fp32"))
    g = cells[("gpt2", "bf16", "vs")]
    check("gpt2: 81920 against 204800 tokens/s, 0.40x", abs(float(g["a_tps"]) - 81920) < 1e-6
          and abs(float(g["b_tps"]) - 204800) < 1e-6 and abs(float(g["ratio"]) - 0.4) < 1e-9, g)
    check("gpt2: its tokens/s line", "tokens/s: gpt2 b8 bf16: dtbench 81920, PyTorch 204800 "
          "(1024 tokens a sample)" in lines, text)
    n = cells[("nanogpt-char", "fp32", "vs")]
    check("nanogpt-char: 512 against 256 tokens/s", abs(float(n["a_tps"]) - 512) < 1e-6
          and abs(float(n["b_tps"]) - 256) < 1e-6 and n["verdict"] == "ok", n)
    check("lenet: no tokens/s", cells[("lenet", "fp32", "vs")]["a_tps"] == ""
          and not any(ln.startswith("tokens/s: lenet") for ln in lines), text)


def main():
    with tempfile.TemporaryDirectory() as d:
        first_folder(d)
        check_first(d)
        check_old_and_bad(d)
        check_tokens(d)
    print("ok" if not failures else f"{failures} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
