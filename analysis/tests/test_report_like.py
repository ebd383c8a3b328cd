"""The report compares like with like: which run the ranks x iterations view and the straggler
verdict use, legends that never cover data, heat maps that do not colour timer noise, lines that
differ by every factor that differs, the launcher in a run's configuration, one grouping for the
report and ``compare``, and no negative staleness shown."""

import shutil

import h5py
import numpy as np
import pytest

import dtbench_analysis
from dtbench_analysis import configs, grouping, load_run, tables
from dtbench_analysis.cli import main
from dtbench_analysis.commands import compare_cmd
from dtbench_analysis.compare import compare


def mixed_folder(write, tmp_path):
    """A campaign as issue reports show it: sync on 1 and 2 ranks (rank 1 slow), async on 2
    ranks (one worker and a parameter server whose row is empty, named to sort first), mixed on
    2 ranks whose older writer recorded negative staleness, and the 2-rank sync again under
    srun. Returns (folder, {name: path in the folder})."""
    folder = tmp_path / "campaign"
    folder.mkdir()
    paths = {}

    def put(name, launcher="mpirun", role=None, **kw):
        src = write(nnodes=1, **kw)
        with h5py.File(src, "a") as f:
            f.attrs["launcher"] = launcher
            if role is not None:
                f["ranks/role"] = np.array(role, dtype=np.int32)
                f.attrs["nworkers"] = np.int32(sum(1 for x in role if x == 0))
        paths[name] = str(folder / f"{name}.h5")
        shutil.copy(src, paths[name])

    slow = np.full((2, 12), 0.040)
    slow[1] = 0.080
    slow[:, :2] = 5.0
    put("a_async", exchange="async", nranks=2, slow_rank=None, completed=[12, 0],
        role=[0, 1])
    put("sync1", nranks=1, slow_rank=None)
    put("sync2", nranks=2, slow_rank=1, overrides={"backward": slow - 0.020})
    put("sync2_srun", launcher="srun", nranks=2, slow_rank=1,
        overrides={"backward": slow - 0.020})
    put("mixed", exchange="mixed", nranks=2, slow_rank=None,
        overrides={"staleness": np.tile([-8.0, -6, -4, -2] * 3, (2, 1))})
    return folder, paths


@pytest.mark.long  # a slower case: the long checks (CI)
def test_rank_view_uses_most_workers_of_a_lockstep_run(capsys, write, tmp_path):
    """Old report: the first file of the most ranks by name, the async run with one worker
    and an empty parameter-server row ("no rank was slower")."""
    folder, paths = mixed_folder(write, tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", str(folder), "-o", str(out)]) == 0
    capsys.readouterr()
    section = out.read_text().split('<section id="ranks">', 1)[1].split("</section>", 1)[0]
    assert "Timeline: iterations 2-6 of sync2.h5" in section
    assert "sync2.h5: slowest: rank 1" in section
    assert "no rank was slower" not in section
    runs = [load_run(p) for p in sorted(paths.values())]
    assert grouping.rank_view_order(runs)[0].path == paths["sync2"]


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def data_boxes(fig, renderer):
    """Window extents of everything that shows data: bars and patches, lines' points,
    collections (scatter, error bars), images and texts inside every axes."""
    from matplotlib.transforms import Bbox
    boxes = []
    for ax in fig.axes:
        for patch in ax.patches:
            boxes.append(patch.get_window_extent(renderer))
        for line in ax.lines:
            xy = line.get_transform().transform(line.get_xydata())
            xy = xy[np.isfinite(xy).all(axis=1)]
            boxes += [Bbox.from_extents(x - 2, y - 2, x + 2, y + 2) for x, y in xy]
        for text in ax.texts:
            if text.get_text().strip():
                boxes.append(text.get_window_extent(renderer))
        for im in ax.images:
            boxes.append(im.get_window_extent(renderer))
        for coll in ax.collections:
            boxes.append(coll.get_window_extent(renderer))
    return [b for b in boxes if b.width > 0 or b.height > 0]


def figures_with_legends(runs):
    from dtbench_analysis.plot import scaling_fig as scaling_plot
    from dtbench_analysis.plot import time as figures
    from dtbench_analysis.plot import training
    from dtbench_analysis.scaling import find_series
    from dtbench_analysis.api import Results
    res = Results(runs)
    samples = [r for r in runs if r.samples]
    return {"phases": figures.breakdown(res.phases), "scaling": figures.scaling(res.scaling),
            "strategies": training.strategies(runs), "samples": training.samples(samples),
            "scaling --plot": scaling_plot.panels(find_series(runs, "ranks"), "ranks")}


def test_legends_never_cover_data(write, tmp_path):
    """Every legend of the report's figures (and of scaling --plot) is drawn clear of every
    bar, point, text and image: the old phases legend sat on the last bar (lower right)."""
    runs = []
    for nranks in (1, 2, 4):
        t = np.full((nranks, 12), 0.040 / nranks)
        t[:, :2] = 1.0
        runs.append(load_run(write(nranks=nranks, nnodes=1, slow_rank=None,
                                   overrides={"total": t})))
    runs.append(load_run(write(exchange="async", nranks=2, nnodes=1, slow_rank=None)))
    tt = np.tile(np.arange(40) * 0.05, (4, 1))
    runs.append(load_run(write(samples={"time": tt, "power_w": np.full((4, 40), 90.0),
                                        "memory_mib": np.full((4, 40), 100.0)})))
    for name, fig in figures_with_legends(runs).items():
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert legends, name
        boxes = data_boxes(fig, renderer)
        for leg in legends:
            lb = leg.get_window_extent(renderer)
            hit = [b for b in boxes if _overlaps(lb, b)]
            assert not hit, (name, lb, hit[:3])
        from dtbench_analysis.plotting import plt
        plt.close(fig)


def test_heat_map_colours_hide_timer_noise(write):
    """An exchange wait of 0-0.9 us (timer noise) is drawn as nothing, not stretched over the
    whole colour scale as the old 98th-percentile scale did."""
    from dtbench_analysis.plot import time as figures
    from dtbench_analysis.plotting import plt
    wait = np.random.default_rng(1).uniform(0.0, 0.9e-6, (4, 12))
    run = load_run(write(overrides={"exchange_wait": wait}))
    fig = figures.heatmaps(run)
    total_im, wait_im = [ax.images[0] for ax in fig.axes if ax.images]
    shown = wait_im.norm(wait_im.get_array())
    assert float(np.ma.max(shown)) < 0.05
    # the iteration time keeps its full scale (the floor is 1 % of the median iteration)
    assert float(np.ma.max(total_im.norm(total_im.get_array()))) >= 1.0
    plt.close(fig)
    # a small wait above the noise keeps its own contrast
    wait = np.tile(np.linspace(0.0, 2e-3, 12), (4, 1))
    fig = figures.heatmaps(load_run(write(overrides={"exchange_wait": wait})))
    _, wait_im = [ax.images[0] for ax in fig.axes if ax.images]
    assert float(np.ma.max(wait_im.norm(wait_im.get_array()))) >= 1.0
    plt.close(fig)


def test_lines_differ_by_every_factor(write, tmp_path):
    """Strategies: sync on 1 and 2 ranks and under srun, async: each line's label names ranks
    and launcher where they differ, and no two configurations share colour and line style
    (the old figure coloured by exchange only: 1 and 2 ranks looked identical)."""
    from dtbench_analysis.plot import training
    from dtbench_analysis.plotting import plt
    folder, paths = mixed_folder(write, tmp_path)
    runs = [load_run(paths[n]) for n in ("sync1", "sync2", "sync2_srun", "a_async")]
    fig = training.strategies(runs)
    lines = fig.axes[0].get_lines()
    labels = [line.get_label().split(": ", 1)[1] for line in lines]
    assert len(set(labels)) == 4, labels
    assert "launcher=srun" in labels[2] and "launcher=mpirun" in labels[1]
    assert "nranks=1" in labels[0] and "nranks=2" in labels[1]
    styles = {(line.get_color(), line.get_linestyle()) for line in lines}
    assert len(styles) == 4, styles
    plt.close(fig)


def test_launcher_is_part_of_the_configuration(write, tmp_path):
    """mpirun and srun runs are not pooled as repeats; files without the attribute keep
    their old configuration; the series of a scaling figure name the launcher."""
    folder, paths = mixed_folder(write, tmp_path)
    a, b = load_run(paths["sync2"]), load_run(paths["sync2_srun"])
    assert configs.configuration(a)["launcher"] == "mpirun"
    assert configs.key_of(a) != configs.key_of(b)
    assert "launcher" not in configs.configuration(load_run(write()))
    res = compare([a, b])
    assert [g["label"] for g in res["groups"]] == ["launcher=mpirun", "launcher=srun"]
    assert [c["factor"] for c in grouping.comparisons([a, b])] == ["launcher"]
    c = tmp_path / "c"
    c.mkdir()
    for n, launcher in (("x1", "srun"), ("x2", "srun")):
        p = write(nranks=int(n[1]), nnodes=1, slow_rank=None)
        with h5py.File(p, "a") as f:
            f.attrs["launcher"] = launcher
        shutil.copy(p, c / f"{n}.h5")
    runs = [load_run(paths["sync1"]), a] + [load_run(str(c / f"{n}.h5")) for n in ("x1", "x2")]
    lines = sorted(set(tables.scaling_points(runs)["line"]))
    assert lines == ["sync launcher=mpirun", "sync launcher=srun"], lines


def test_compare_and_report_use_one_grouping(capsys, write, tmp_path):
    """On a folder whose runs differ in exchange, ranks and launcher, compare makes the
    report's one-factor comparisons (it used to test every configuration against the first,
    mixed against async included) and names the runs that fit none."""
    folder, paths = mixed_folder(write, tmp_path)
    res = dtbench_analysis.load(folder)
    expected = [(c["factor"], sorted(r.path for r in c["runs"]))
                for c in res.comparison_groups]
    assert ("launcher", sorted([paths["sync2"], paths["sync2_srun"]])) in expected
    assert main(["compare", str(folder), "--json"]) == 0
    import json
    got = json.loads(capsys.readouterr().out)
    assert [(c["factor"], sorted(f for g in c["result"]["groups"] for f in g["files"]))
            for c in got["comparisons"]] == expected
    assert main(["compare", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.count("=== comparison ") == len(expected)
    assert not any(paths["mixed"] in files and paths["a_async"] in files
                   for _, files in expected)
    assert main(["compare", str(folder), "--baseline", "2"]) == 2
    assert "--baseline 2: accepted: 1 when the runs differ" in capsys.readouterr().err


def test_negative_staleness_is_never_shown(capsys, write):
    """An older mixed file recorded -8, -6, -4, -2 as staleness: compare and the per-rank
    table leave them out and say so."""
    stale = np.tile([-8.0, -6, -4, -2, 0, 1] * 2, (2, 1))
    path = write(exchange="mixed", nranks=2, nnodes=1, slow_rank=None,
                 overrides={"staleness": stale})
    run = load_run(path)
    g = compare([run])["groups"][0]
    assert min(g["staleness"]["counts"]) >= 0 and g["staleness"]["negative"] == 12
    text = compare_cmd.staleness_text(g["staleness"])
    assert "12 negative values left out" in text and "-" not in text.split(";")[0]
    per_rank = tables.per_rank(run)["staleness_median"]
    assert (per_rank.dropna() >= 0).all()
    only_negative = write(exchange="mixed", nranks=2, nnodes=1, slow_rank=None,
                          overrides={"staleness": np.full((2, 12), -4.0)})
    st = compare([load_run(only_negative)])["groups"][0]["staleness"]
    assert compare_cmd.staleness_text(st).startswith("n/a; 20 negative values left out")
    assert tables.per_rank(load_run(only_negative))["staleness_median"].isna().all()



def test_heat_map_titles_apart_at_16_nodes(write):
    """16 nodes x 2 ranks: the two panels' titles, the run's name and the note on the colours
    never overlap one another (the two long titles ran into each other), every rank is
    labelled, and a line separates each node from the next."""
    from dtbench_analysis.plot import time as figures
    from dtbench_analysis.plotting import plt
    run = load_run(write(nranks=32, nnodes=16, slow_rank=None,
                         overrides={"exchange_wait": np.full((32, 12), 0.001)}))
    fig = figures.heatmaps(run, "n16x2.h5: lenet sync, 32 ranks")
    nodes = run.ranks["node"].to_numpy()
    between = {r + 0.5 for r in range(31) if nodes[r] != nodes[r + 1]}
    assert len(between) == 15
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.images]
    boxes = [ax.title.get_window_extent(renderer) for ax in panels]
    boxes.append(fig._suptitle.get_window_extent(renderer))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not _overlaps(a, b), (a, b)
    for ax in panels:
        assert not _overlaps(ax.title.get_window_extent(renderer), ax.get_window_extent(renderer))
        assert len(ax.get_yticklabels()) == 32
        horizontal = {float(ln.get_ydata()[0]) for ln in ax.lines
                      if len(set(ln.get_ydata())) == 1}
        assert horizontal == between, horizontal
    assert [ax.get_title() for ax in panels] == ["iteration time, ms", "exchange wait, ms"]
    assert figures.HEATMAP_NOTE in fig._suptitle.get_text()
    plt.close(fig)


def test_phases_say_how_the_transfer_compares_with_the_library(write):
    """The phases figure gives the transfer as a multiple of the library's time alone: a
    transfer 2.5 times the calibration reads "transfer 2.5x library alone" (it read "eff. 40%
    of library", and 250% where the library was the slower one, as if better than perfect)."""
    from dtbench_analysis.api import Results
    from dtbench_analysis.plot import time as figures
    from dtbench_analysis.plotting import plt
    wait = np.zeros((4, 12))
    run = load_run(write(overrides={"exchange": np.full((4, 12), 0.005), "exchange_wait": wait},
                         attrs={"calibration_iters": np.int32(5),
                                "calibration_exchange_s": 0.002}))
    fig = figures.breakdown(Results([run]).phases)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("transfer 2.5x library alone" in t for t in texts), texts
    assert not any("eff." in t for t in texts), texts
    plt.close(fig)
