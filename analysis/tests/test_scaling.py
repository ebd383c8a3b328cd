"""Tests of dtbench-analyze scaling on synthetic files with known speed-ups."""

import numpy as np
import pytest

from conftest import KILLED_COMPLETED
from dtbench_analysis import load_run
from dtbench_analysis.cli import main
from dtbench_analysis.scaling import find_series

approx = pytest.approx


def scaled(write, nranks, total_ms, batch_global=64, nnodes=None, **kw):
    """A run on ``nranks`` ranks whose every measured iteration takes ``total_ms`` on every rank
    (warm-up iterations take 1 s, so including them would show)."""
    total = np.full((nranks, 12), total_ms / 1e3)
    total[:, :2] = 1.0
    return write(nranks=nranks, nnodes=nnodes or max(1, nranks // 2), slow_rank=None,
                 batch_global=batch_global, overrides={"total": total}, **kw)


def test_strong_scaling_2x_is_efficiency_1(write):
    runs = [load_run(scaled(write, 1, 40.0, nnodes=1)), load_run(scaled(write, 2, 20.0)),
            load_run(scaled(write, 4, 12.5))]
    result = find_series(runs)
    assert len(result["series"]) == 1 and not result["unmatched"]
    s = result["series"][0]
    assert s["kind"] == "strong" and s["fixed"] == "global batch 64"
    assert s["base"]["ranks"] == 1 and s["base"]["time_median_s"] == approx(0.040)
    assert s["base"]["throughput"] == approx(64 / 0.040)
    p2, p4 = s["points"][1], s["points"][2]
    assert p2["speedup"] == approx(2.0) and p2["efficiency"] == approx(1.0)
    assert p2["ideal_speedup"] == 2.0 and p2["throughput"] == approx(3200)
    assert p4["speedup"] == approx(3.2) and p4["efficiency"] == approx(0.8)
    assert p2["exchange_share"] == approx(5.0 / 20.0)        # default exchange 5 ms


def test_weak_scaling_detected_from_per_rank_batch(write):
    """Per-rank batch 32 on 1, 2, 4 ranks; the same time per iteration is perfect weak
    scaling: efficiency T1/Tp = 1, scaled speedup p."""
    runs = [load_run(scaled(write, 1, 40.0, batch_global=32, nnodes=1)),
            load_run(scaled(write, 2, 40.0, batch_global=64)),
            load_run(scaled(write, 4, 50.0, batch_global=128))]
    result = find_series(runs)
    assert [s["kind"] for s in result["series"]] == ["weak"]
    s = result["series"][0]
    assert s["fixed"] == "per-rank batch 32"
    assert [q["batch_global"] for q in s["points"]] == [32, 64, 128]
    assert s["points"][1]["speedup"] == approx(2.0) and s["points"][1]["efficiency"] == approx(1)
    assert s["points"][2]["efficiency"] == approx(40.0 / 50.0)
    assert s["points"][2]["speedup"] == approx(4 * 40.0 / 50.0)


def test_strong_and_weak_share_the_base(write):
    runs = [load_run(scaled(write, 1, 40.0, batch_global=64, nnodes=1)),
            load_run(scaled(write, 2, 20.0, batch_global=64)),
            load_run(scaled(write, 2, 40.0, batch_global=128))]
    kinds = {s["kind"]: s for s in find_series(runs)["series"]}
    assert set(kinds) == {"strong", "weak"}
    assert kinds["strong"]["base"]["files"] == kinds["weak"]["base"]["files"] == [runs[0].path]
    assert kinds["weak"]["points"][1]["efficiency"] == approx(1.0)


def test_nodes_unit(write):
    runs = [load_run(scaled(write, 2, 40.0, nnodes=1)), load_run(scaled(write, 4, 20.0,
                                                                        nnodes=2))]
    s = find_series(runs, unit="nodes")["series"][0]
    assert [q["p"] for q in s["points"]] == [1, 2]
    assert s["points"][1]["efficiency"] == approx(1.0)


def test_repeats_pooled_and_other_configs_apart(write):
    paths = [scaled(write, 1, 40.0, nnodes=1, config={"seed": 1}),
             scaled(write, 1, 44.0, nnodes=1, config={"seed": 2}),
             scaled(write, 2, 20.0),
             scaled(write, 2, 20.0, tag="other")]     # another configuration, alone
    result = find_series([load_run(p) for p in paths])
    s = result["series"][0]
    assert s["base"]["repeats"] == 2 and s["base"]["iterations"] == 20
    assert s["base"]["time_median_s"] == approx(0.042)   # pooled 40 and 44 ms
    assert [q["files"] for q in result["unmatched"]] == [[paths[3]]]
    ignored = find_series([load_run(p) for p in paths], ignore=["tag"])
    assert not ignored["unmatched"] and ignored["series"][0]["points"][1]["repeats"] == 2


def test_incomplete_run_marked(write):
    killed = write(killed=True, completed=KILLED_COMPLETED, unrecorded=(1,))
    full = scaled(write, 1, 80.0, nnodes=1)
    result = find_series([load_run(full), load_run(killed)])
    point = result["series"][0]["points"][1]
    assert point["incomplete"] == [killed]
    assert point["iterations"] == 2         # iterations measured by every rank before the kill
    assert point["time_median_s"] == approx(0.080)


def test_text_and_plot(capsys, write, tmp_path):
    a, b = scaled(write, 1, 40.0, nnodes=1), scaled(write, 2, 20.0)
    killed = write(killed=True, completed=KILLED_COMPLETED, nranks=4)
    out_png = tmp_path / "scaling.png"
    assert main(["scaling", a, b, killed, "--plot", str(out_png)]) == 0
    out = capsys.readouterr().out
    assert "series 1: strong scaling, global batch 64 fixed" in out
    assert "base case: 1 rank on 1 node: 40.000 ms per iteration, 1600.0 samples/s" in out
    row = next(line.split() for line in out.splitlines() if line.split()[:2] == ["2", "1"])
    assert row[-4:-1] == ["2.00", "2.00", "1.00"]            # speedup, ideal, efficiency
    row4 = next(line for line in out.splitlines() if line.split()[:2] == ["4", "2"])
    assert row4.endswith("*")
    assert "* INCOMPLETE" in out and "warm-up excluded: the first 2 iterations" in out
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_refuses_to_overwrite(capsys, write, tmp_path):
    a, b = scaled(write, 1, 40.0, nnodes=1), scaled(write, 2, 20.0)
    out_png = tmp_path / "s.png"
    out_png.write_bytes(b"keep")
    assert main(["scaling", a, b, "--plot", str(out_png)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "exists (add --overwrite" in captured.err
    assert out_png.read_bytes() == b"keep"
    assert main(["scaling", a, b, "--plot", str(out_png), "--overwrite"]) == 0
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_nothing_to_plot(capsys, write, tmp_path):
    out_png = tmp_path / "s.png"
    assert main(["scaling", scaled(write, 2, 20.0), "--plot", str(out_png)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no scaling series" in err and len(err.splitlines()) == 1
    assert not out_png.exists()


def test_servers_that_grow_with_the_nodes_make_one_series(write):
    """async with one parameter server per node (ps-ranks = nodes, 2 ranks per node) on 1, 2
    and 4 nodes: one strong series, its servers named; runs differing in ps-ranks alone at one
    scale are no series, each its own point (they used to be split into one group per ps-ranks
    value, and the growing servers never formed a series)."""
    runs = [load_run(scaled(write, 2 * n, 40.0 / n, nnodes=n, exchange="async",
                            config={"ps-ranks": n})) for n in (1, 2, 4)]
    result = find_series(runs, "nodes")
    (s,) = result["series"]
    assert s["kind"] == "strong" and [q["nodes"] for q in s["points"]] == [1, 2, 4]
    assert s["factors"]["ps-ranks"] == "1..4" and not result["unmatched"]
    sweep = [load_run(scaled(write, 8, 10.0, nnodes=4, exchange="async", config={"ps-ranks": k}))
             for k in (1, 2)]
    result = find_series(sweep)
    assert not result["series"]
    assert sorted(q["factors"]["ps-ranks"] for q in result["unmatched"]) == ["1", "2"]
    # beside the base at 1 node both form their own series, neither pooled with the other
    base = load_run(scaled(write, 2, 40.0, nnodes=1, exchange="async", config={"ps-ranks": 1}))
    result = find_series([base] + sweep)
    assert [s["factors"]["ps-ranks"] for s in result["series"]] == ["1"]
    assert [q["factors"]["ps-ranks"] for q in result["unmatched"]] == ["2"]


def test_report_scaling_against_nodes(write):
    """Series that span several node counts at one number of ranks per node are drawn against
    nodes, in powers of two from 8x on, with the exchange share in a third panel."""
    from dtbench_analysis.api import Results
    from dtbench_analysis.plot import time as figures
    from dtbench_analysis.plotting import plt
    runs = [load_run(scaled(write, 2 * n, 160.0 / n, nnodes=n)) for n in (1, 2, 4, 8, 16)]
    pts = Results(runs).scaling
    assert figures.scaling_unit(pts) == "nodes"
    fig = figures.scaling(pts)
    for ax in fig.axes[:3]:
        assert ax.get_xlabel() == "nodes" and ax.get_xscale() == "log"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8", "16"]
    (share,) = [ln for ln in fig.axes[2].get_lines() if ln.get_label() != "ideal"]
    assert list(share.get_xdata()) == [1, 2, 4, 8, 16]
    assert np.allclose(share.get_ydata(), [100 * 5.0 / (160.0 / n) for n in (1, 2, 4, 8, 16)])
    plt.close(fig)
    one_node = [load_run(scaled(write, r, 40.0 / r, nnodes=1)) for r in (1, 2, 4)]
    assert figures.scaling_unit(Results(one_node).scaling) == "ranks"
