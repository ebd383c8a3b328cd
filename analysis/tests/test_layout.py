"""Tensor, pipeline and 3D layouts in the analysis: each rank's place, its iteration split into
compute, tensor-group allreduces, bubble and data-parallel exchange (summary), stragglers
compared with the ranks of their stage, the timeline's labels and the report's layouts figure.
Synthetic files (synthetic.py) of 8 ranks; one real 3D run."""

import numpy as np
import pytest

import realruns
import synthetic as syn
from dtbench_analysis import layout, load_run, tables
from dtbench_analysis.commands.report_cmd import build
from dtbench_analysis.commands.stragglers_cmd import format_text as stragglers_text
from dtbench_analysis.commands.summary_cmd import format_text
from dtbench_analysis.plot.layout_fig import layouts as layouts_figure
from dtbench_analysis.plot.timeline_fig import figure as timeline_figure
from dtbench_analysis.stragglers import analyse
from dtbench_analysis.summary import summarize

approx = pytest.approx
SHAPE = (8, 12)                     # 8 ranks, 2 warm-up + 10 measured iterations


def full(ms):
    return np.full(SHAPE, ms / 1e3)


def three_d(write, overrides=None, **kw):
    """tp 2 x 2 stages x 2 replicas: rank = (replica x 2 + stage) x 2 + tensor rank."""
    attrs = {"parallel": "tensor", "tp": np.int32(2), "stages": np.int32(2),
             "replicas": np.int32(2), "microbatches": np.int32(2)}
    attrs.update(kw.pop("attrs", {}))
    return write(nranks=8, slow_rank=None, attrs=attrs, overrides=overrides, **kw)


def planted_parts():
    """forward 10 + backward 20 ms, of which tp_comm 4, pipe_idle 6, pipe_send 1, pipe_recv 2:
    compute 17 ms; exchange 5; total 40 (data 2, update 2, gap 1: other 5)."""
    return {"tp_comm": full(4), "pipe_idle": full(6), "pipe_send": full(1),
            "pipe_recv": full(2), "pipe_compute": full(21)}


def test_places_follow_dtbench_numbering(write):
    run = load_run(three_d(write, planted_parts()))
    assert layout.layout(run).name() == "tp2 x pp2 x dp2"
    c = layout.coords(run)
    # rank 5 = (1 x 2 + 0) x 2 + 1, rank 6 = (1 x 2 + 1) x 2 + 0
    assert c.loc[5, ["replica", "stage", "tensor"]].tolist() == [1, 0, 1]
    assert c.loc[6, ["replica", "stage", "tensor"]].tolist() == [1, 1, 0]
    assert layout.labels(run)[5] == "rank 5 (r1 s0 t1)"
    plain = load_run(write(nranks=8))
    assert layout.labels(plain)[5] == "rank 5" and layout.layout(plain).name() == "dp8"
    pipe = load_run(write(nranks=8, attrs={"parallel": "hybrid", "stages": np.int32(2)}))
    assert layout.places(pipe)[5] == "r2 s1" and layout.layout(pipe).name() == "pp2 x dp4"


def test_split_of_an_iteration(write):
    run = load_run(three_d(write, planted_parts()))
    parts = layout.split_per_iteration(run)
    want = {"compute": 17, "tensor": 4, "bubble": 6, "pipe_transfer": 3, "exchange": 5,
            "other": 5}
    assert {k: v * 1e3 for k, v in parts.items()} == approx(want)
    assert sum(parts.values()) * 1e3 == approx(syn.TOTAL_MS)


def test_summary_per_rank_side_by_side(write):
    over = planted_parts()
    over["tp_comm"][3, 2:] = 0.009        # rank 3 waits 5 ms longer for its group
    s = summarize(load_run(three_d(write, over)))
    r3 = s["per_rank"][3]
    assert r3["place"] == "r0 s1 t1"
    assert r3["tensor_median_ms"] == approx(9) and r3["compute_median_ms"] == approx(12)
    assert s["per_rank"][0]["compute_median_ms"] == approx(17)
    assert r3["bubble_median_ms"] == approx(6) and r3["exchange_median_ms"] == approx(5)
    text = format_text(s)
    head = next(line for line in text.splitlines() if line.split()[:2] == ["rank", "place"])
    assert head.split()[-4:] == ["compute", "tensor", "bubble", "exchange"]
    row = next(line for line in text.splitlines() if "r0 s1 t1" in line)
    assert row.split()[-4:] == ["12.000", "9.000", "6.000", "5.000"]
    # a data-parallel run keeps its table, without places
    plain = summarize(load_run(write(nranks=8)))
    assert "place" not in plain["per_rank"][0] and "compute_median_ms" not in plain["per_rank"][0]


def test_straggler_compared_with_its_stage(write):
    """Stage 1's ranks compute 30 ms more than stage 0's (the pipeline's imbalance, nobody's
    fault); rank 4 (replica 1, stage 0, tensor 0) computes 10 ms more than the rest of stage 0,
    and its tensor peer rank 5 waits those 10 ms inside its allreduces. Rank 4 is the straggler,
    not a rank of stage 1, and not rank 5."""
    c = np.arange(8)
    stage = (c // 2) % 2
    back = np.where(stage[:, None] == 1, 0.050, 0.020) * np.ones(SHAPE)
    tp = full(2)
    back[4] += 0.010
    back[5] += 0.010
    tp[5] += 0.010
    total = 0.002 + 0.010 + back + 0.005 + 0.002 + 0.001
    total[:, :2] = 5.0
    path = three_d(write, {"backward": back, "tp_comm": tp, "total": total})
    run = load_run(path)
    a = analyse(run)
    top = a["ranks"][0]
    assert top["rank"] == 4 and top["place"] == "r1 s0 t0"
    assert top["slowest_count"] == 10 and top["median_excess_s"] == approx(0.010)
    # its three peers of stage 0 wait 10 ms each per iteration
    assert top["wait_caused_s"] == approx(10 * 3 * 0.010)
    assert all(r["slowest_count"] == 0 for r in a["ranks"][1:])
    assert a["layout"] == "tp2 x pp2 x dp2" and "tp_comm" in a["busy_definition"]
    st = {x["stage"]: x["busy_median_s"] for x in a["stages"]}
    assert st[1] - st[0] == approx(0.030)
    text = stragglers_text(a, run)
    assert "slowest: rank 4 (r1 s0 t0, node" in text and "stage 1" in text


def test_timeline_labels_ranks_by_place(write):
    run = load_run(three_d(write, planted_parts()))
    fig = timeline_figure([run], [(2, 4)])
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks[5] == "rank 5 (r1 s0 t1)" and ticks[0] == "rank 0 (r0 s0 t0)"


def layout_runs(write):
    """dp8, tp2 x dp4, pp2 x dp4, tp2 x pp2 x dp2 with the parts each would show."""
    dp = write(nranks=8, slow_rank=None)
    tp = write(nranks=8, slow_rank=None, overrides={"tp_comm": full(4)},
               attrs={"parallel": "tensor", "tp": np.int32(2), "stages": np.int32(1)})
    pp = write(nranks=8, slow_rank=None, overrides={**planted_parts(), "tp_comm": full(0)},
               attrs={"parallel": "hybrid", "stages": np.int32(2)})
    td = three_d(write, planted_parts())
    return [load_run(p) for p in (dp, tp, pp, td)]


def test_layouts_table_and_figure(write):
    runs = layout_runs(write)
    frame = tables.layouts(runs)
    assert frame["layout"].tolist() == ["dp8", "tp2 x dp4", "pp2 x dp4", "tp2 x pp2 x dp2"]
    assert frame["compute"].tolist() == approx([30, 26, 21, 17])
    assert frame["tensor"].tolist() == approx([0, 4, 0, 4])
    assert frame["bubble"].tolist() == approx([0, 0, 6, 6])
    assert frame["total"].tolist() == approx([40] * 4)
    assert tables.compares_layouts(frame) and not tables.compares_layouts(frame.iloc[:1])
    fig = layouts_figure(frame)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # the bars, part after part (layout.PARTS), one per run in the figure's order: the tensor
    # part of the tp2 x dp4 bar starts where its compute ends
    row = labels.index(next(x for x in labels if x.startswith("tp2 x dp4: ")))
    tensor = ax.patches[len(runs) * layout.PARTS.index("tensor") + row]
    assert tensor.get_width() == approx(4) and tensor.get_x() == approx(26)


def test_report_shows_layouts_only_where_they_differ(write):
    runs = layout_runs(write)
    page = build(runs, ["synthetic"])
    assert 'id="fig-layouts"' in page and 'id="table-layouts"' in page
    one = build(runs[:1], ["synthetic"])
    assert 'id="fig-layouts"' not in one


@pytest.mark.long
def test_real_3d_run(tmp_path):
    """LeNet on 8 ranks, tensor groups of 2 x 2 stages x 2 replicas. Stage 0 holds the
    convolutions, which are not split (no tensor allreduce), stage 1 the classifier's ip1/ip2
    pair (allreduces every iteration): the split shows each stage's tensor time where it is,
    and the commands name the places."""
    if realruns.skip_reason():
        pytest.skip(realruns.skip_reason())
    path = realruns.run(str(tmp_path), 8, "lenet-3d.h5", "--batch", "16", "--iters", "3",
                        "--warmup", "1", "--parallel", "tensor", "--tp", "2", "--stages", "2",
                        "--microbatches", "2", timeout=600)
    run = load_run(path)
    assert layout.layout(run).name() == "tp2 x pp2 x dp2"
    parts = layout.split(run)
    measured = run.measured_mask
    stage = layout.coords(run)["stage"].to_numpy()
    assert (parts["tensor"][stage == 1][measured[stage == 1]] > 0).all()
    assert (parts["tensor"][stage == 0][measured[stage == 0]] == 0).all()
    assert (parts["compute"][measured] > 0).all()
    s = summarize(run)
    assert [r["place"] for r in s["per_rank"]][5] == "r1 s0 t1"
    a = analyse(run)
    assert a["layout"] == "tp2 x pp2 x dp2" and len(a["stages"]) == 2
