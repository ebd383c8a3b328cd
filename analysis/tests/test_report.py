"""Tests of dtbench-analyze report: a self-contained HTML page, rendered in headless Chromium."""

import base64
import re

import numpy as np
import pytest

import browser
import dtbench_analysis
from dtbench_analysis.commands import report_cmd
from conftest import KILLED_COMPLETED
from dtbench_analysis.cli import main


@pytest.fixture
def campaign(write, tmp_path):
    """A results folder: strong scaling 1 -> 2 -> 4 ranks, a repeat, a killed run, evaluations."""
    folder = tmp_path / "campaign"
    folder.mkdir()
    paths = []
    for nranks, ms, seed in ((1, 40.0, 1), (1, 42.0, 2), (2, 21.0, 1), (4, 11.0, 1)):
        total = np.full((nranks, 12), ms / 1e3)
        total[:, :2] = 1.0
        p = write(nranks=nranks, nnodes=max(1, nranks // 2), slow_rank=None,
                  overrides={"total": total}, config={"seed": seed})
        paths.append(p)
    paths.append(write(killed=True, completed=KILLED_COMPLETED, unrecorded=(1,), tag="killed"))
    for i, p in enumerate(paths):
        (folder / f"run{i}.h5").write_bytes(open(p, "rb").read())
    return folder


def build(capsys, campaign, tmp_path, *extra):
    out = tmp_path / "report.html"
    assert main(["report", str(campaign), "-o", str(out), *extra]) == 0
    msg = capsys.readouterr().out
    return out, msg


def test_report_is_self_contained(capsys, campaign, tmp_path):
    out, msg = build(capsys, campaign, tmp_path)
    page = out.read_text()
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert msg == f"wrote {out}: 5 runs, 1 incomplete, {len(srcs)} figures, " \
                  f"{out.stat().st_size // 1024} KiB\n"
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    for s in srcs:
        assert base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    ids = re.findall(r'<img id="([^"]+)"', page)
    assert {"fig-phases", "fig-scaling", "fig-heatmap-1", "fig-gantt",
            "fig-strategies-1"} <= set(ids)
    for section, _ in report_cmd.SECTIONS:
        assert f'<section id="{section}">' in page
    # sections with nothing to show say why instead of drawing empty axes
    assert "No pipeline runs" in page and "No samples" in page
    assert page.count('class="badge">INCOMPLETE') >= 2        # runs table and its summary
    assert "run did not finish (killed?); ranks 0,2-3 stopped after 8/12 iterations" in page
    assert "warm-up excluded: the first 2 iterations of every run" in page
    assert "<td class=l>strong</td><td class=l>global batch 64</td>" in page
    assert "Mann-Whitney" in page


def test_report_renders_in_chromium(capsys, campaign, tmp_path, chromium):
    out, _ = build(capsys, campaign, tmp_path)
    seen = browser.render(str(out), str(tmp_path))
    assert seen["errors"] == [] and seen["console"] == []
    assert seen["title"] == "dtbench report"
    images = {i["id"]: i for i in seen["images"]}
    assert len(images) == out.read_text().count("<img ")
    assert all(i["width"] > 300 and i["height"] > 150 for i in images.values())
    from dtbench_analysis.plotting import plt
    shot = plt.imread(seen["screenshot"])
    assert shot.shape[1] == 1280 and shot[..., :3].std() > 0.05      # not a blank page


@pytest.mark.long  # (test_report_renders_in_chromium paints a campaign in the quick suite)
def test_mixed_campaign_renders_in_chromium(capsys, write, tmp_path, chromium):
    """A folder of runs of different strategies, rank counts and launchers (test_report_like's
    mixed_folder): the page renders with every figure, the ranks view is the 2-rank sync run's,
    the launcher comparison is made, and no negative staleness appears."""
    from test_report_like import mixed_folder
    folder, _ = mixed_folder(write, tmp_path)
    out, msg = build(capsys, folder, tmp_path)
    assert msg.startswith(f"wrote {out}: 5 runs, ")
    page = out.read_text()
    seen = browser.render(str(out), str(tmp_path))
    assert seen["errors"] == [] and seen["console"] == []
    images = {i["id"]: i for i in seen["images"]}
    assert len(images) == page.count("<img ") and {"fig-phases", "fig-gantt",
                                                     "fig-strategies-1"} <= set(images)
    assert all(i["width"] > 300 and i["height"] > 150 for i in images.values())
    ranks = page.split('<section id="ranks">', 1)[1].split("</section>", 1)[0]
    assert "Timeline: iterations 2-6 of sync2.h5" in ranks and "slowest: rank 1" in ranks
    comparisons = page.split('<section id="comparisons">', 1)[1].split("</section>", 1)[0]
    assert "<td class=l>launcher=mpirun</td>" in comparisons
    assert "<td class=l>launcher=srun</td>" in comparisons
    assert "negative values left out" in page and "staleness: median -" not in page


def test_unrelated_runs_are_not_compared(capsys, write, tmp_path):
    """Five runs of five models (as a folder of unrelated runs looks): no comparison at all,
    where the old report compared LeNet with ResNet-50."""
    folder = tmp_path / "unrelated"
    folder.mkdir()
    for i, model in enumerate(("lenet", "fcn5", "resnet50", "alexnet", "vgg16")):
        p = write(nranks=1 + i % 2, slow_rank=None, config={"model": model})
        (folder / f"{model}.h5").write_bytes(open(p, "rb").read())
    out = tmp_path / "unrelated.html"
    assert main(["report", str(folder), "-o", str(out)]) == 0
    capsys.readouterr()
    page = out.read_text()
    section = page.split('<section id="comparisons">', 1)[1].split("</section>", 1)[0]
    assert "No comparison: no two runs differ in exactly one factor" in section
    assert "median ratio" not in page and "table-comparisons" not in page
    res = dtbench_analysis.load(folder)
    assert res.comparisons.empty and res.comparison_groups == []


def test_comparisons_stay_inside_a_model(write, tmp_path):
    """sync vs async of one model is a comparison; the same exchanges of another model are a
    second one; nothing crosses models; a run differing in two factors joins neither."""
    runs = {}
    for model in ("lenet", "fcn5"):
        for exchange in ("sync", "async"):
            runs[model, exchange] = write(exchange=exchange, config={"model": model})
    runs["lenet", "odd"] = write(exchange="ssp", config={"model": "lenet", "lr": 0.5})
    res = dtbench_analysis.load(list(runs.values()))
    groups = res.comparison_groups
    assert [(g["factor"], g["common"]["model"]) for g in groups] == [("exchange", "lenet"),
                                                                       ("exchange", "fcn5")]
    for g in groups:
        assert {r.path for r in g["runs"]} == {runs[g["common"]["model"], "sync"],
                                               runs[g["common"]["model"], "async"]}
        assert [x["label"] for x in g["result"]["groups"]] == ["exchange=sync",
                                                               "exchange=async"]
    table = res.comparisons
    assert table.groupby("comparison")["model"].unique().map(len).tolist() == [1, 1]
    assert table["factor"].tolist() == ["exchange"] * 4


@pytest.mark.long  # a slower case: the long checks (CI)
def test_precision_and_calibration_shown_when_present(capsys, write, tmp_path):
    """Fields newer writers add: precision/grad_dtype in the configuration appear in the runs
    table and labels; a calibration record gives the exchange efficiency."""
    import h5py
    a = write(config={"precision": "bf16", "grad_dtype": "fp32"})
    b = write()
    total = 0.002                                     # 2 ms of transfer per iteration
    with h5py.File(a, "a") as f:
        f["iterations/exchange"][...] = np.where(np.isfinite(f["iterations/exchange"][()]),
                                                 total, np.nan)
        g = f.create_group("calibration")
        g["bucket_bytes"] = np.array([1e3, 1e5, 1e7])
        g["allreduce_time_s"] = np.array([1e-5, 5e-4, 5e-2])
        sent = float(np.nanmedian(f["iterations/bytes_sent"][()]))
    res = dtbench_analysis.load(a, b)
    rt = res.runs_table.set_index("file")
    name_a, name_b = a.split("/")[-1], b.split("/")[-1]
    assert rt.loc[name_a, "precision"] == "bf16" and rt.loc[name_a, "grad_dtype"] == "fp32"
    assert np.isnan(rt.loc[name_b, "exchange efficiency"])
    expected = np.interp(sent, [1e3, 1e5, 1e7], [1e-5, 5e-4, 5e-2]) / total
    assert rt.loc[name_a, "exchange efficiency"] == pytest.approx(expected)
    assert "bf16" in res.phases["run"].iloc[0]
    out = tmp_path / "p.html"
    assert main(["report", a, b, "-o", str(out)]) == 0
    capsys.readouterr()
    page = out.read_text()
    assert "<th>precision</th>" in page and "<td class=l>bf16</td>" in page
    assert f"{expected:.1%}" in page
    # or as root attributes: the library's seconds per exchange of the run's buckets
    with h5py.File(b, "a") as f:
        f.attrs["calibration_iters"] = np.int32(5)
        f.attrs["calibration_exchange_s"] = 0.0015
        median = float(np.nanmedian(f["iterations/exchange"][:, 2:]))
    rt = dtbench_analysis.load(b).runs_table
    assert rt["exchange efficiency"].iloc[0] == pytest.approx(0.0015 / median)


@pytest.mark.long  # the probe's own check: Chromium again, in the long checks
def test_probe_detects_a_broken_figure(capsys, campaign, tmp_path, chromium):
    """The rendering check can fail: a corrupted embedded PNG is reported as broken."""
    out, _ = build(capsys, campaign, tmp_path)
    page = out.read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(re.sub(r'(id="fig-scaling"[^>]*src="data:image/png;base64,)[^"]{40}',
                             r"\1" + "A" * 40, page, count=1))
    seen = browser.render(str(broken), str(tmp_path))
    images = {i["id"]: i for i in seen["images"]}
    assert images["fig-scaling"]["width"] == 0 and seen["errors"] == ["IMG"]


def test_report_refuses_and_bad_input(capsys, campaign, tmp_path):
    out = tmp_path / "r.html"
    out.write_text("keep")
    assert main(["report", str(campaign), "-o", str(out)]) == 2
    assert "exists (add --overwrite" in capsys.readouterr().err and out.read_text() == "keep"
    (campaign / "junk.h5").write_text("not hdf5")
    new = tmp_path / "new.html"
    assert main(["report", str(campaign), "-o", str(new)]) == 2
    out_, err = capsys.readouterr()
    assert err.strip().endswith("junk.h5: not an HDF5 file") and not new.exists()
    assert main(["report", str(campaign), "-o", str(tmp_path / "r.pdf")]) == 2
    assert "accepted: a file name ending in .html or .htm" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["summary"], ["scaling"], ["stragglers"], ["timeline"],
                                  ["compare"], ["figure", "phases"]])
def test_plot_refuses_other_formats(capsys, complete_file, tmp_path, argv):
    """--plot takes .png or .svg on every command; anything else is one line, status 2, and
    no file."""
    out = tmp_path / "f.pdf"
    assert main(argv + [complete_file, "--plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "accepted: a file name ending in .png or .svg" in err
    assert not out.exists()


def test_report_window_and_figure_name_checked(capsys, complete_file, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", complete_file, "-o", str(out), "--window", "5:3"]) == 2
    assert "--window 5:3: accepted: A:B" in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit) as e:
        main(["figure", "pie", complete_file, "-o", str(tmp_path / "f.png")])
    assert e.value.code == 2 and "invalid choice: 'pie'" in capsys.readouterr().err
    assert main(["report", complete_file, "-o", str(out), "--window", "3:6"]) == 0
    assert "Timeline: iterations 3-5 of" in out.read_text()


def test_power_samples_give_energy_per_sample(capsys, write, tmp_path):
    """A GPU-like run sampling 100 W: the power panel is drawn and the table's energy per
    sample is the power times the measured span over the samples processed."""
    from dtbench_analysis import energy
    t = np.tile(np.arange(240) * 0.05, (4, 1))
    path = write(samples={"time": t, "power_w": np.full((4, 240), 100.0),
                          "memory_mib": np.tile(np.arange(240.0), (4, 1)),
                          "utilization": np.full((4, 240), 50.0)})
    res = dtbench_analysis.load(path)
    table = res.samples
    assert len(table) == 4 and (table["power median W"] == 100.0).all()
    run = res.runs[0]
    spans = [energy.rank_energy(run, r)["span_s"] for r in range(4)]
    samples = int(run.ranks["measured"].sum()) * int(run.attrs["batch_per_rank"])
    assert table["J per sample (run)"].iloc[0] == pytest.approx(100.0 * sum(spans) / samples)
    from dtbench_analysis.plot import training as figures_training
    fig = figures_training.samples(res.runs)
    assert [ax.get_title() for ax in fig.axes] == ["power, W", "memory, MiB",
                                                   "utilisation, %"]
    assert "J/sample" in fig.axes[0].get_legend_handles_labels()[1][0]
