"""tokens/s and MFU (dtbench_analysis.work) in summary, compare, scaling and the report's runs
table: on made files with known attributes and iteration times, on files without them (older
dtbench: no columns, no traceback), and on a real lstm32 run whose attributes are checked against
the program's own --dry-run and its per-layer roofline."""

import json
import re
import subprocess

import h5py
import numpy as np
import pytest

import realruns
import synthetic as syn
from dtbench_analysis import load_run, tables, work
from dtbench_analysis.cli import main
from dtbench_analysis.compare import compare
from dtbench_analysis.scaling import find_series
from dtbench_analysis.summary import summarize

approx = pytest.approx

SEQ = 32                  # tokens per sample of the made language model
FLOPS = 2.0e9             # its training FLOPs per sample
PEAK = 1.0e12             # one device's peak FLOP/s
LM = {"tokens_per_sample": np.int32(SEQ), "train_flops_per_sample": np.float64(FLOPS),
      "peak_flops": np.float64(PEAK), "peak_flops_source": "made: 1 TFLOP/s"}


def run_main(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# ---- made files ----------------------------------------------------------------------------------

def test_summary_tokens_and_mfu(write):
    """The default made run: 4 ranks, rank 2's iterations take 80 ms, so 64 samples / 0.080 s =
    800 samples/s: 800 x 32 = 25600 tokens/s, MFU = 2e9 x 800 / (1e12 x 4 ranks) = 0.4."""
    tp = summarize(load_run(write(attrs=LM)))["throughput"]
    assert tp["samples_per_s"] == approx(800)
    assert tp["tokens_per_sample"] == SEQ and tp["tokens_per_s"] == approx(25600)
    assert tp["devices"] == 4 and tp["peak_flops"] == PEAK
    assert tp["mfu"] == approx(FLOPS * 800 / (PEAK * 4)) and tp["mfu"] == approx(0.4)


def test_summary_text_and_json(capsys, write):
    path = write(attrs=LM)
    status, out, err = run_main(capsys, "summary", path)
    assert status == 0 and err == ""
    assert "800.0 samples/s (25600.0 tokens/s)" in out
    assert "MFU: 40.00%" in out and "made: 1 TFLOP/s" in out
    status, out, _ = run_main(capsys, "summary", "--json", path)
    tp = json.loads(out)["throughput"]
    assert status == 0 and tp["tokens_per_s"] == approx(25600) and tp["mfu"] == approx(0.4)


def test_mfu_counts_only_ranks_that_compute(write):
    """An async run with a parameter server (nworkers 3 of 4 ranks): each worker's 40 ms
    iteration of 16 samples, so 3 x 400 = 1200 samples/s over 3 computing devices."""
    total = np.full((4, 12), syn.TOTAL_MS / 1e3)
    total[3, :] = np.nan            # the server records no iteration
    path = write(exchange="async", slow_rank=None, overrides={"total": total},
                 completed=[12, 12, 12, 0], attrs={**LM, "nworkers": np.int32(3)})
    run = load_run(path)
    tp = summarize(run)["throughput"]
    assert tp["samples_per_s"] == approx(1200)
    assert tp["devices"] == 3
    assert tp["mfu"] == approx(FLOPS * 1200 / (PEAK * 3))
    assert tp["tokens_per_s"] == approx(1200 * SEQ)


def test_model_without_tokens_has_mfu_only(write):
    tp = summarize(load_run(write(attrs={**LM, "tokens_per_sample": np.int32(0)})))["throughput"]
    assert "tokens_per_s" not in tp and "tokens_per_sample" not in tp
    assert tp["mfu"] == approx(0.4)


@pytest.mark.parametrize("attrs", [
    {},                                                           # an older dtbench
    {"tokens_per_sample": "many", "train_flops_per_sample": "x",  # damaged: wrong types
     "peak_flops": "fast"},
    {"tokens_per_sample": np.int32(0), "train_flops_per_sample": np.float64(FLOPS),
     "peak_flops": np.float64(np.nan)},                          # a peak that is unknown
])
def test_files_without_the_figures_have_no_columns(capsys, write, attrs):
    path = write(attrs=attrs)
    tp = summarize(load_run(path))["throughput"]
    assert not any(k in tp for k in ("tokens_per_s", "mfu", "peak_flops"))
    for command in (["summary"], ["compare"], ["scaling"]):
        status, out, _ = run_main(capsys, *command, path, write(attrs=attrs, tag="other"))
        assert status == 0 and "tokens/s" not in out and "MFU" not in out, command
    status, out, _ = run_main(capsys, "summary", "--json", path)
    assert status == 0 and "mfu" not in json.loads(out)["throughput"]
    assert "tokens/s" not in tables.runs_table([load_run(path)])
    assert "MFU" not in tables.runs_table([load_run(path)])


def test_compare_groups(capsys, write):
    """Two configurations, each two repeats whose peaks were measured apart (the median peak is
    used): the rates follow the throughput's median and its interval."""
    a = [write(tag="a", attrs={**LM, "peak_flops": np.float64(p)}) for p in (0.8e12, 1.2e12)]
    b = [write(tag="b", slow_rank=None, attrs=LM) for _ in range(2)]
    result = compare([load_run(p) for p in a + b])
    ga, gb = result["groups"]
    assert ga["throughput"]["median"] == approx(800) and gb["throughput"]["median"] == approx(1600)
    for g in (ga, gb):
        tp = g["throughput"]
        for k in ("median", "lo", "hi"):
            assert g["tokens_per_s"][k] == approx(tp[k] * SEQ)
            assert g["mfu"][k] == approx(FLOPS * tp[k] / (PEAK * 4))
    status, out, _ = run_main(capsys, "compare", *a, *b)
    assert status == 0 and "25600.0 tokens/s" in out and "MFU 40.00%" in out
    assert "51200.0 tokens/s" in out and "MFU 80.00%" in out


def test_scaling_points(capsys, write):
    """Strong scaling of a global batch of 64 from 1 rank (40 ms) to 2 (20 ms): 1600 then 3200
    samples/s; MFU per device stays 2e9 x 1600 / 1e12 = 3.2 (a made peak far too low: the
    formula, not the plausibility, is tested)."""
    paths = []
    for nranks, ms in ((1, 40.0), (2, 20.0)):
        total = np.full((nranks, 12), ms / 1e3)
        total[:, :2] = 1.0
        paths.append(write(nranks=nranks, nnodes=1, slow_rank=None, overrides={"total": total},
                           attrs=LM))
    s = find_series([load_run(p) for p in paths])["series"][0]
    p1, p2 = s["points"]
    assert p1["tokens_per_s"] == approx(1600 * SEQ) and p2["tokens_per_s"] == approx(3200 * SEQ)
    assert p1["mfu"] == approx(FLOPS * 1600 / PEAK)
    assert p2["mfu"] == approx(FLOPS * 3200 / (PEAK * 2))
    status, out, _ = run_main(capsys, "scaling", *paths)
    assert status == 0 and "tokens/s" in out and "MFU" in out
    assert "102400.0" in out and "320.00%" in out


def test_report_runs_table(write):
    lm, old = load_run(write(attrs=LM)), load_run(write(tag="old"))
    t = tables.runs_table([lm, old])
    assert t["tokens/s"].tolist()[0] == approx(25600) and np.isnan(t["tokens/s"].tolist()[1])
    assert t["MFU"].tolist()[0] == approx(0.4)


def test_work_functions_guard_their_terms(write):
    run = load_run(write(attrs=LM))
    assert work.tokens_per_s(run, None) is None and work.mfu(run, None) is None
    assert work.mfu(run, 800.0, peak=2 * PEAK) == approx(0.2)


# ---- a real run ----------------------------------------------------------------------------------

def _dtbench(workdir, np_, *args):
    proc = subprocess.run(realruns.command(np_, list(args)), capture_output=True, text=True,
                          timeout=300, env=realruns.environment(workdir))
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    return proc.stdout


@pytest.fixture(scope="module")
def lstm32(tmp_path_factory):
    """lstm32 on synthetic data, 1 rank, 2 iterations: its file and what --dry-run printed."""
    reason = realruns.skip_reason()
    if reason:
        pytest.skip(reason)
    work_dir = str(tmp_path_factory.mktemp("lstm32"))
    model = ["--model", "lstm32", "--dataset", "synthetic"]
    dry = _dtbench(work_dir, 1, *model, "--dry-run")
    out = f"{work_dir}/lstm32.h5"
    _dtbench(work_dir, 1, *model, "--iters", "2", "--warmup", "0", "--output", out)
    return out, dry


def test_real_lstm32_attributes(lstm32):
    path, dry = lstm32
    # --dry-run: "input [c,h,w]" (a sequence of w tokens), the layer table's FLOPs/sample column,
    # its total and the training FLOPs per sample
    seq = int(re.search(r"input \[\d+,\d+,(\d+)\]", dry).group(1))
    rows = re.findall(r"^\s+\d+\s+\S+\s+\S+\s+\[[\d,]+\]\s+\d+\s+(\d+)", dry, re.M)
    forward = float(re.search(r"forward FLOPs per sample: (\d+)", dry).group(1))
    train = float(re.search(r"training FLOPs per sample: (\d+)", dry).group(1))
    assert len(rows) >= 3 and sum(float(x) for x in rows) == approx(forward, rel=1e-12)
    with h5py.File(path, "r") as f:
        a = dict(f.attrs)
    assert int(a["tokens_per_sample"]) == seq == 32
    assert float(a["train_flops_per_sample"]) == approx(train, rel=1e-12)
    # forward + backward: at least the forward twice (every product's weight gradient), at most
    # three times (and its input gradient)
    assert 2 * forward < float(a["train_flops_per_sample"]) <= 3 * forward
    assert np.isfinite(a["peak_flops"]) and a["peak_flops"] > 1e8
    assert str(a["peak_flops_source"]).startswith("measured at start")
    tp = summarize(load_run(path))["throughput"]
    assert tp["tokens_per_s"] == approx(tp["samples_per_s"] * seq)
    assert tp["mfu"] == approx(train * tp["samples_per_s"] / float(a["peak_flops"]))


def test_real_lstm32_flops_match_its_roofline(tmp_path):
    """An independent count: --profile-layers' roofline sums each layer's FLOPs of one forward
    and one backward call as it runs (fused groups, the batch: src/model/model_roofline.c);
    over the layers, per sample, that is train_flops_per_sample. Its peak is the one recorded."""
    reason = realruns.skip_reason()
    if reason:
        pytest.skip(reason)
    out = str(tmp_path / "profiled.h5")
    _dtbench(str(tmp_path), 1, "--model", "lstm32", "--dataset", "synthetic", "--iters", "2",
             "--warmup", "0", "--profile-layers", "1", "--output", out)
    with h5py.File(out, "r") as f:
        a, prof = dict(f.attrs), f["profile"]
        counted = np.nansum(prof["forward_flop"][0] + prof["backward_flop"][0])
        assert float(a["train_flops_per_sample"]) == approx(counted / a["batch_per_rank"],
                                                            rel=1e-9)
        assert float(a["peak_flops"]) == prof["peak_flops"][0]
