"""The report of a scaling study: it opens with the study's small multiples (per series, time
per iteration split into compute and exchange, speedup and efficiency) and folds the per-run
sections; a folder without series keeps the report's structure."""

import re

import numpy as np
import pytest

import browser
from dtbench_analysis import load_run
from dtbench_analysis.cli import main
from dtbench_analysis.commands import report_cmd
from dtbench_analysis.plot import study_fig
from dtbench_analysis.scaling import find_series

NODES = (1, 2, 4, 8)
PER_NODE = 2
#: exchange -> (compute ms on one node, exchange ms per doubling of the nodes)
STRATEGIES = {"sync": (40.0, 3.0), "ssp": (44.0, 1.5)}
WEAK_PER_RANK = 24          # global 48..384: never the strong series' 64


def study_run(write, exchange, nodes, batch_global, compute_ms, exchange_ms):
    ranks = PER_NODE * nodes
    total = np.full((ranks, 12), (compute_ms + exchange_ms) / 1e3)
    exch = np.full((ranks, 12), exchange_ms / 1e3)
    total[:, :2] = exch[:, :2] = 1.0
    return write(nranks=ranks, nnodes=nodes, slow_rank=None, batch_global=batch_global,
                 exchange=exchange, overrides={"total": total, "exchange": exch})


@pytest.fixture
def study(write, tmp_path):
    """16 runs: sync and ssp, strong (global batch 64) and weak (24 per rank), on 1-8 nodes of
    2 ranks; compute shrinks with the ranks (strong) or stays (weak), the exchange grows with
    the nodes, each point with its own share."""
    folder = tmp_path / "study"
    folder.mkdir()
    for exchange, (compute, step) in STRATEGIES.items():
        for i, n in enumerate(NODES):
            for kind, batch, c in (("strong", 64, compute / n),
                                   ("weak", WEAK_PER_RANK * PER_NODE * n, compute)):
                p = study_run(write, exchange, n, batch, c, step * (i + 1) + (kind == "weak"))
                (folder / f"{exchange}-{kind}-{n:02d}.h5").write_bytes(open(p, "rb").read())
    return folder


def report(folder, tmp_path, capsys, name="report.html"):
    out = tmp_path / name
    assert main(["report", str(folder), "-o", str(out)]) == 0
    capsys.readouterr()
    return out, out.read_text()


def section_ids(page):
    return re.findall(r'<section id="([^"]+)">', page)


def test_study_figures_hold_the_scaling_metrics_of_the_files(study):
    """Every series of find_series (on the files) has its panels; the bars are the median time
    per iteration split by the exchange share, the lines its speedup and efficiency."""
    import dtbench_analysis
    res = dtbench_analysis.load(study)
    result = find_series([load_run(str(p)) for p in sorted(study.glob("*.h5"))], "nodes")
    assert len(result.series) == 4
    pts = res.scaling
    assert report_cmd.figures.scaling_unit(pts) == "nodes"
    time_fig = study_fig.time_panels(pts, "nodes")
    speed_fig = study_fig.speedup_panels(pts, "nodes")
    panels = {ax.get_gid(): ax for ax in time_fig.axes if ax.get_gid()}
    lines = {ax.get_gid(): ax for ax in speed_fig.axes if ax.get_gid()}
    assert len(panels) == len(result.series) and len(lines) == 2 * len(result.series)
    numbers = {}
    for s in result.series:
        # the report numbers the series as tables.scaling_points does (the same find_series)
        match = pts[(pts["kind"] == s.kind) & (pts["fixed"] == s.fixed) &
                    (pts["line"].str.split().str[0] == s.factors["exchange"])]
        sid = int(match["series"].iloc[0])
        numbers[sid] = s
        ax = panels[f"series {sid}"]
        bars = {c.get_label(): c for c in ax.containers if c.get_label() in ("compute",
                                                                               "exchange")}
        compute = np.array([b.get_height() for b in bars["compute"]])
        exchange = np.array([b.get_height() for b in bars["exchange"]])
        bottoms = np.array([b.get_y() for b in bars["exchange"]])
        time = np.array([q.time_median_s for q in s.points]) * 1e3
        share = np.array([q.exchange_share for q in s.points])
        assert exchange == pytest.approx(time * share, rel=1e-9)
        assert compute == pytest.approx(time * (1 - share), rel=1e-9)
        assert bottoms == pytest.approx(compute, rel=1e-9)
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in NODES]
        assert [int(b.get_x() + b.get_width() / 2 + 0.5) for b in bars["compute"]] == \
            [NODES.index(q.p) for q in s.points]
        assert s.kind in ax.get_title() and s.fixed in ax.get_title()
        for what in ("speedup", "efficiency"):
            line, = [ln for ln in lines[f"{what} {sid}"].get_lines() if ln.get_label() == what]
            assert np.asarray(line.get_ydata(), float) == \
                pytest.approx([getattr(q, what) for q in s.points], rel=1e-9)
    # strong beside weak: each row of panels reads strategy A strong, A weak, B strong, B weak
    order = [ax.get_gid() for ax in sorted(panels.values(),
                                            key=lambda a: (-a.get_position().y0,
                                                           a.get_position().x0))]
    kinds = [numbers[int(g.split()[1])].kind for g in order]
    exchanges = [numbers[int(g.split()[1])].factors["exchange"] for g in order]
    assert kinds == ["strong", "weak", "strong", "weak"]
    assert exchanges[0] == exchanges[1] and exchanges[2] == exchanges[3] != exchanges[0]


def test_study_report_leads_with_the_study_and_folds_the_runs(study, tmp_path, capsys):
    out, page = report(study, tmp_path, capsys)
    ids = section_ids(page)
    assert ids[:2] == ["study", "scaling"]
    assert sorted(ids) == sorted(["study"] + [s for s, _ in report_cmd.SECTIONS])
    first_img = re.search(r'<img id="([^"]+)"', page).group(1)
    assert first_img == "fig-study-time"
    head, fold = page.split('<details class="per-run"', 1)
    assert "fig-study-speedup" in head and "table-scaling" in head
    assert re.match(r'[^>]*>', fold).group(0) == ' id="per-run">'       # closed: no "open"
    folded = fold.rsplit("</details>", 1)[0]
    assert section_ids(folded) == [s for s, _ in report_cmd.SECTIONS if s != "scaling"]
    assert "<summary>Per-run detail: 16 runs (where the time goes, " in fold
    nav = re.search(r"<nav>(.*?)</nav>", page).group(1)
    assert re.findall(r'href="#([^"]+)"', nav) == ids


@pytest.mark.long  # (the folded study's sections are checked in the quick suite)
def test_small_study_keeps_its_sections_open(study, tmp_path, capsys):
    """12 runs or fewer: the study leads, nothing is folded, the sections keep their order."""
    for p in sorted(study.glob("ssp-*.h5")):
        p.unlink()
    _, page = report(study, tmp_path, capsys)
    assert "<details class=\"per-run\"" not in page
    assert section_ids(page) == ["study"] + [s for s, _ in report_cmd.SECTIONS]


@pytest.mark.long  # a slower case: the long checks (CI)
def test_folder_without_series_is_unchanged(write, tmp_path, capsys):
    """Many runs, no two at another scale of one configuration: no study, nothing folded, the
    sections as they were."""
    folder = tmp_path / "tags"
    folder.mkdir()
    for i in range(report_cmd.FOLD_RUNS + 2):
        p = write(nranks=2, nnodes=1, slow_rank=None, tag=f"t{i}")
        (folder / f"t{i:02d}.h5").write_bytes(open(p, "rb").read())
    _, page = report(folder, tmp_path, capsys)
    assert section_ids(page) == [s for s, _ in report_cmd.SECTIONS]
    assert "fig-study" not in page and "<details class=\"per-run\"" not in page
    assert re.search(r'<img id="([^"]+)"', page).group(1) == "fig-phases"


@pytest.mark.long  # Chromium: the quick suite paints one report (test_report.py)
def test_first_screen_shows_the_study(study, tmp_path, capsys, chromium):
    """In headless Chromium at 1280 x 900: the study figure starts on the first screen and
    fills it with ink; the folded sections take no room; every image decodes."""
    out, page = report(study, tmp_path, capsys)
    lay = browser.layout(str(out), str(tmp_path), 1280)
    assert lay["errors"] == [] and all(i["width"] > 0 for i in lay["images"])
    boxes = {s["id"]: s for s in lay["sections"]}
    assert lay["sections"][0]["id"] == "study"
    figs = boxes["study"]["figs"]
    assert figs["top"] < 300 and figs["height"] > 600
    assert [s["id"] for s in lay["sections"] if s["folded"]] == \
        [s for s, _ in report_cmd.SECTIONS if s != "scaling"]
    scaling = boxes["scaling"]["box"]
    assert lay["height"] < scaling["top"] + scaling["height"] + 200     # the fold takes a line
    from matplotlib.image import imread
    shot = imread(browser.screenshot(str(out), str(tmp_path), 1280, 900))
    visible = dict(figs, height=900 - figs["top"])
    assert browser.ink(shot, visible) > 0.08
    # the figure on the first screen is the study's: its image is the one at the top
    assert lay["images"][0]["id"] == "fig-study-time"
