"""The analysis commands on files written by the real dtbench (fixture ``real_runs``: 1 and 2
ranks, a few iterations, and a run SIGKILLed mid-way). Skipped, with the reason, when dtbench is
not built."""

import json
import re
import shutil

import h5py
import numpy as np
import pandas as pd
import pytest

import browser
import realruns
from dtbench_analysis import load_run
from dtbench_analysis.cli import main


def run_json(capsys, *argv):
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_summary_of_real_runs(capsys, real_runs):
    s = run_json(capsys, "summary", real_runs["r2"])
    assert s["complete"] and s["factors"]["nranks"] == 2 and s["factors"]["model"] == "lenet"
    assert s["iterations"]["measured_by_all_ranks"] == 8
    assert s["phases_ms"]["total"]["n"] == 16
    assert [r["rank"] for r in s["per_rank"]] == [0, 1]
    assert all(r["total_median_ms"] > 0 for r in s["per_rank"])
    assert s["energy"] is None          # the CPU build samples no power


def _with_calibration(source, dest, library_s, slowest_s):
    shutil.copy(source, dest)
    with h5py.File(dest, "a") as f:
        f.attrs["calibration_exchange_s"] = library_s
        f.attrs["calibration_exchange_hi_s"] = slowest_s
    return str(dest)


def test_calibration_warning_of_real_run(capsys, real_runs, tmp_path):
    """The summary's overhead (median transfer - calibration) on a file of the real dtbench,
    recomputed here from its datasets, and the calibration's spread as the file records it;
    then the same file with the calibration set just under 2% of the iteration below the
    transfer (no warning though the efficiency is below 1), just over it with the slowest
    repetition below the transfer (warned), and just over it with the slowest repetition
    above the transfer (within the library's own spread: no warning)."""
    with h5py.File(real_runs["r2"], "r") as f:
        first, last = int(f.attrs["warmup"]), int(f.attrs["iters_total"])
        it = {n: f["iterations"][n][:, first:last] for n in ("total", "exchange", "exchange_wait")}
        method, library = f.attrs["calibration_method"], float(f.attrs["calibration_exchange_s"])
        lo, hi = (float(f.attrs[f"calibration_exchange_{k}_s"]) for k in ("lo", "hi"))
    assert 0 < lo <= library <= hi, (lo, library, hi)
    transfer = float(np.median(it["exchange"] - it["exchange_wait"]))
    iteration = float(np.median(it["total"].max(axis=0)))
    exchange = float(np.median(it["exchange"]))
    eff = run_json(capsys, "summary", real_runs["r2"])["exchange_efficiency"]
    assert eff["method"] == (method.decode() if isinstance(method, bytes) else method) != ""
    assert eff["overhead_ms"] == pytest.approx((transfer - library) * 1e3)
    assert eff["overhead_of_iteration"] == pytest.approx((transfer - library) / iteration)
    assert eff["overhead_of_exchange"] == pytest.approx((transfer - library) / exchange)
    assert (eff["library_lo_ms"], eff["library_hi_ms"]) == (pytest.approx(lo * 1e3),
                                                            pytest.approx(hi * 1e3))

    step = 0.02 * iteration
    assert transfer > 1.5 * step, "the run's transfer is too small to be warned about"
    quiet = _with_calibration(real_runs["r2"], tmp_path / "quiet.h5", transfer - 0.5 * step,
                              transfer - 0.5 * step)
    eff = run_json(capsys, "summary", quiet)["exchange_efficiency"]
    assert eff["efficiency"] < 1 and not eff["warn"]
    assert main(["summary", quiet]) == 0
    assert "more than the library's collectives alone" not in capsys.readouterr().out
    loud = _with_calibration(real_runs["r2"], tmp_path / "loud.h5", transfer - 1.5 * step,
                             transfer - 1.4 * step)
    assert run_json(capsys, "summary", loud)["exchange_efficiency"]["warn"]
    assert main(["summary", loud]) == 0
    warning = [x for x in capsys.readouterr().out.splitlines() if "WARNING" in x]
    assert len(warning) == 1 and "more than the library's collectives alone" in warning[0]
    spread = _with_calibration(real_runs["r2"], tmp_path / "spread.h5", transfer - 1.5 * step,
                               transfer * 1.01)
    assert not run_json(capsys, "summary", spread)["exchange_efficiency"]["warn"]


def test_top_layers_of_real_run(capsys, tmp_path):
    """--profile-layers 3 on 2 ranks: the summary's layers are the file's names and the mean of
    its forward + backward per layer (docs/hdf5-layout.md's formula), the slowest first."""
    if realruns.skip_reason():
        pytest.skip(realruns.skip_reason())
    path = realruns.run(str(tmp_path), 2, "p.h5", "--batch", "16", "--iters", "4", "--warmup",
                        "1", "--profile-layers", "3")
    with h5py.File(path, "r") as f:
        names = [x.decode() for x in f["profile/layer"][()]]
        mean = np.nanmean(f["profile/forward"][()] + f["profile/backward"][()], axis=(0, 1))
    prof = run_json(capsys, "summary", path)["layers"]
    assert prof["iterations"] == 3 and prof["first_iteration"] == 1
    order = np.argsort(-mean, kind="stable")
    assert [x["layer"] for x in prof["layers"]] == [names[j] for j in order]
    assert [x["total_ms"] for x in prof["layers"]] == pytest.approx(list(mean[order] * 1e3))
    assert main(["summary", path]) == 0
    out = capsys.readouterr().out
    assert f"top layers (5 of {len(names)};" in out and names[order[0]] in out


def test_killed_run_reported_with_its_counts(capsys, real_runs, tmp_path):
    path = real_runs["killed"]
    done = realruns.completed(path)
    assert (done >= 12).all() and (done % 5 == 0).all()      # whole blocks of flush_every 5
    run = load_run(path)
    assert not run.is_complete and list(run.completed) == list(done)
    s = run_json(capsys, "summary", path)
    assert s["incomplete"].startswith("run did not finish (killed?)")
    for rank, n in enumerate(done):
        assert f"{n}/100002" in s["incomplete"]
        assert s["per_rank"][rank]["measured"] == n - 2        # warm-up 2 excluded
    assert s["iterations"]["measured_by_all_ranks"] == min(done) - 2
    assert main(["summary", path]) == 0
    assert re.search(r"^INCOMPLETE: run did not finish", capsys.readouterr().out, re.M)

    table_path = str(tmp_path / "killed.csv")
    assert main(["export", path, "-o", table_path]) == 0
    capsys.readouterr()
    table = pd.read_csv(table_path)
    phases = set(table["phase"].astype(str))    # the six phases and the optional timings present
    assert {"data", "forward", "backward", "exchange", "update", "total"} <= phases
    assert len(table) == sum(n - 2 for n in done) * len(phases) and not table["run_complete"].any()
    assert table.groupby("rank")["iteration"].max().tolist() == [n - 1 for n in done]


def test_scaling_of_real_runs(capsys, real_runs):
    result = run_json(capsys, "scaling", real_runs["dir"])
    kinds = {s["kind"]: s for s in result["series"]}
    assert set(kinds) == {"strong", "weak"}
    assert kinds["strong"]["base"]["files"] == [real_runs["r1"]]
    assert [q["ranks"] for q in kinds["strong"]["points"]] == [1, 2]
    assert kinds["weak"]["points"][1]["files"] == [real_runs["r2w"]]
    for s in result["series"]:
        q = s["points"][1]
        assert q["speedup"] == pytest.approx(q["throughput"] / s["base"]["throughput"])
        assert q["efficiency"] == pytest.approx(q["speedup"] / 2)
    # the killed run (batch 8, flush every 5) has no partner scale: listed, marked incomplete
    assert [q["incomplete"] for q in result["unmatched"]] == [[real_runs["killed"]]]
    assert main(["scaling", real_runs["dir"]]) == 0
    assert "* INCOMPLETE killed.h5" in capsys.readouterr().out


def test_stragglers_and_timeline_of_real_run(capsys, real_runs, tmp_path):
    a = run_json(capsys, "stragglers", real_runs["r2"])
    assert a["iterations"] == 8 and {r["rank"] for r in a["ranks"]} == {0, 1}
    assert sum(r["slowest_count"] for r in a["ranks"]) <= 8
    assert set(a["imbalance"]) >= {"total", "exchange", "busy"}
    out = tmp_path / "t.png"
    assert main(["timeline", real_runs["killed"], "--iters", "0:12", "-o", str(out)]) == 0
    assert "INCOMPLETE" in capsys.readouterr().out and out.stat().st_size > 1000


def test_compare_real_runs(capsys, real_runs, tmp_path):
    c = run_json(capsys, "compare", real_runs["r1"], real_runs["r2"])
    labels = [g["label"] for g in c["groups"]]
    assert labels == ["nranks=1", "nranks=2"]           # the only factor that differs
    test = c["groups"][1]["test"]
    assert 0.0 <= test["p"] <= 1.0 and test["n_a"] == 8 and test["n_b"] == 8


@pytest.mark.long  # scripts/test.sh --long; test_report renders the same sections quickly
def test_report_of_real_runs_renders(capsys, real_runs, tmp_path, chromium):
    out = tmp_path / "report.html"
    assert main(["report", real_runs["dir"], "-o", str(out)]) == 0
    n = out.read_text().count("<img ")
    assert f"4 runs, 1 incomplete, {n} figures" in capsys.readouterr().out
    seen = browser.render(str(out), str(tmp_path))
    assert seen["errors"] == [] and seen["console"] == []
    shown = {i["id"] for i in seen["images"] if i["width"] > 0}
    assert len(shown) == n and {"fig-phases", "fig-scaling", "fig-gantt"} <= shown
