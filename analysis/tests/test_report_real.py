"""The report, its figures and tables on a folder of real dtbench runs (fixture ``report_runs``:
scaling, repeats, a pipeline, four exchange strategies with evaluations, CPU samples), looked at
in headless Chromium at two widths. Skipped, with the reason, when dtbench is not built."""

import base64
import io
import re

import numpy as np
import pytest

import browser
import dtbench_analysis
from dtbench_analysis.cli import main
from dtbench_analysis.plotting import plt

#: a long check (the report on a folder of real runs), run by scripts/test.sh --long (what CI runs): the quick
#: suite checks the same command on files written by the tests
pytestmark = pytest.mark.long

#: every section that must show figures for this folder, and the figures it must have
EXPECTED = {"time": ["fig-phases"], "scaling": ["fig-scaling"],
            "ranks": ["fig-heatmap-1", "fig-heatmap-2", "fig-heatmap-3", "fig-gantt"],
            "strategies": ["fig-strategies-1"], "pipelines": ["fig-layouts", "fig-pipelines"],
            "resources": ["fig-resources"]}
WIDTHS = (1280, 760)
#: the part of the run folder each figure command draws (the whole folder works too, slower)
FIGURE_INPUT = {"phases": "scale", "scaling": "scale", "heatmap": "scale/r4.h5",
                "gantt": "scale/r4.h5", "strategies": "strategies", "pipelines": "pipe",
                "layouts": "pipe", "samples": "strategies/sync.h5", "memory": "strategies"}


@pytest.fixture(scope="module")
def page(report_runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["report", report_runs, "-o", str(out)]) == 0
    return out


def _images(text):
    return dict(re.findall(r'<img id="([^"]+)"[^>]*src="data:image/png;base64,([^"]+)"', text))


def test_every_figure_present_and_not_empty(page):
    text = page.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text
    images = _images(text)
    for section, ids in EXPECTED.items():
        body = text.split(f'<section id="{section}">', 1)[1].split("</section>", 1)[0]
        assert re.findall(r'<img id="([^"]+)"', body) == ids, section
        assert "<table" in body.split('class="figs"', 1)[1], f"{section}: no table after figures"
    for ident, data in images.items():
        pixels = plt.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 500, ident
        ink = (np.abs(pixels[..., :3] - 1.0) > 0.1).any(axis=2).mean()
        assert ink > 0.03, f"{ident}: {ink:.1%} of its pixels differ from white"


def test_sections_say_what_the_runs_did(report_runs, page):
    """The tables behind the figures hold what the files hold."""
    res = dtbench_analysis.load(report_runs)
    assert len(res.runs) == 11
    kinds = {(k, tuple(sorted(p["ranks"]))) for k, p in res.scaling.groupby("kind")}
    assert ("strong", (1, 2, 4)) in kinds and ("weak", (1, 2)) in kinds
    r2 = res.scaling[(res.scaling["kind"] == "strong") & (res.scaling["ranks"] == 2)]
    assert r2["repeats"].tolist() == [2]
    pipe = res.pipelines
    assert sorted(pipe["microbatches"].unique()) == [2, 4] and set(pipe["stage"]) == {0, 1}
    assert (pipe[["compute", "send", "recv", "idle"]] >= 0).all().all()
    assert (pipe["compute"] > 0).all()
    strat = res.strategies[res.strategies["dataset"] == "fashion-mnist"].set_index("exchange")
    assert sorted(strat.index) == ["async", "mixed", "ssp", "sync"]
    assert (strat["evaluations"] >= 1).all() and (strat["target"] == 0.5).all()
    reached = strat.dropna(subset=["s to target"])
    assert (reached["best accuracy"] >= 0.5).all()
    assert set(res.samples["source"]) == {"procfs"}
    assert (res.samples["memory max MiB"] > 1).all()
    ph = res.phases.set_index("file")
    parts = ph[list(dtbench_analysis.tables.BREAKDOWN)].sum(axis=1)
    assert np.allclose(parts, ph["total mean"], rtol=1e-6)
    # comparisons only inside a model and data set, along one factor
    cmp = res.comparisons
    assert set(cmp.groupby("comparison")["model"].nunique()) == {1}
    assert set(cmp.groupby("comparison")["dataset"].nunique()) == {1}
    assert {"exchange", "ranks", "microbatches", "batch"} <= set(cmp["factor"])
    # the four strategies at two workers each (async adds a server, mixed a node layout)
    ex = cmp[cmp["factor"] == "exchange"]
    assert [c.split()[0] for c in ex["configuration"]] == ["exchange=sync", "exchange=ssp",
                                                          "exchange=async", "exchange=mixed"]
    assert ex["ratio to baseline"].iloc[0] == 1.0 and ex["p"].iloc[1:].between(0, 1).all()
    text = page.read_text()
    assert text.count("lenet on fashion-mnist") >= 1


def test_page_in_chromium_at_two_widths(page, tmp_path, chromium):
    widths = {}
    for width in WIDTHS:
        blank, inks, lay = browser.blank_sections(str(page), str(tmp_path), width)
        assert lay["width"] == width and lay["errors"] == []
        decoded = {i["id"]: i for i in lay["images"]}
        for ids in EXPECTED.values():
            for ident in ids:
                assert decoded[ident]["width"] > 300 and decoded[ident]["height"] > 150, ident
        assert [b for b in blank if b in EXPECTED] == [], (width, inks)
        widths[width] = {s["id"]: s["figs"]["width"] for s in lay["sections"] if s["figs"]}
    # figures shrink with the window instead of overflowing it
    assert all(widths[760][k] < widths[1280][k] <= 1280 for k in widths[760])


def test_blank_section_is_detected(page, tmp_path, chromium):
    """The screenshot check can fail: the pipelines section's figures (the layouts' and the
    pipelines') replaced by white images of the same sizes make that section (and only it)
    blank."""
    text = page.read_text()
    images = _images(text)
    for ident in EXPECTED["pipelines"]:
        shape = plt.imread(io.BytesIO(base64.b64decode(images[ident])), format="png").shape
        white = io.BytesIO()
        plt.imsave(white, np.ones(shape[:2] + (3,)), format="png")
        text = text.replace(images[ident], base64.b64encode(white.getvalue()).decode())
    blanked = tmp_path / "blanked.html"
    blanked.write_text(text)
    blank, inks, _ = browser.blank_sections(str(blanked), str(tmp_path), WIDTHS[0])
    assert [b for b in blank if b in EXPECTED] == ["pipelines"], inks


def test_plot_on_each_command(report_runs, tmp_path, capsys):
    """--plot on every command that draws, PNG and SVG alternately (each decoded)."""
    commands = [
        ["summary", f"{report_runs}/scale"],
        ["scaling", f"{report_runs}/scale"],
        ["stragglers", f"{report_runs}/scale/r4.h5"],
        ["timeline", f"{report_runs}/scale/r4.h5"],
        ["compare", f"{report_runs}/strategies"],
    ] + [["figure", name, f"{report_runs}/{FIGURE_INPUT[name]}"]
         for name in dtbench_analysis.api.FIGURES]
    for i, argv in enumerate(commands):
        suffix = ("png", "svg")[i % 2]
        out = tmp_path / f"{i}-{argv[0]}-{argv[1] if argv[0] == 'figure' else ''}.{suffix}"
        assert main(argv + ["--plot", str(out)]) == 0, argv
        data = out.read_bytes()
        if suffix == "png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n", argv
            pixels = plt.imread(str(out))
            assert pixels.shape[1] > 500 and pixels[..., :3].std() > 0.05, argv
        else:
            assert data.lstrip().startswith(b"<?xml") and b"<svg" in data[:2000], argv
            assert data.count(b"<path") > 20, argv
    capsys.readouterr()
