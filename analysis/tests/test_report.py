"""Tests of dtbench-analyze report: a self-contained HTML page, rendered in headless Chromium."""

import base64
import re

import numpy as np
import pytest

import browser
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
    assert msg == f"wrote {out}: 5 runs, 1 incomplete, 2 figures, " \
                  f"{out.stat().st_size // 1024} KiB\n"
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page and "http://" not in page and "https://" not in page
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(srcs) == 2 and all(s.startswith("data:image/png;base64,") for s in srcs)
    for s in srcs:
        assert base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for section in ("runs", "summaries", "scaling", "stragglers", "comparison"):
        assert f'<section id="{section}">' in page
    assert page.count('class="badge">INCOMPLETE') >= 2        # runs table and its summary
    assert "run did not finish (killed?); ranks 0,2-3 stopped after 8/12 iterations" in page
    assert "warm-up excluded: the first 2 iterations of every run" in page
    assert "strong scaling, global batch 64 fixed" in page
    assert "Mann-Whitney" in page


def test_report_renders_in_chromium(capsys, campaign, tmp_path, chromium):
    out, _ = build(capsys, campaign, tmp_path)
    seen = browser.render(str(out), str(tmp_path))
    assert seen["errors"] == [] and seen["console"] == []
    assert seen["title"] == "dtbench report"
    images = {i["id"]: i for i in seen["images"]}
    assert set(images) == {"fig-scaling", "fig-progress"}
    assert all(i["width"] > 300 and i["height"] > 200 for i in images.values())
    from dtbench_analysis.plotting import plt
    shot = plt.imread(seen["screenshot"])
    assert shot.shape[1] == 1280 and shot[..., :3].std() > 0.05      # not a blank page


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
