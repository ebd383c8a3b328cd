"""Memory per rank against time per iteration (--exchange sync beside zero1, zero2, zero3):
summary's plan and measured peak beside the time, compare's memory columns where the groups differ
in the exchange's sharding, and the report's "Memory and time" figure, whose points are the
files' own values; files without the memory datasets (older dtbench) or with bad ones still
work."""

import json
import re

import h5py
import numpy as np
import pytest

import dtbench_analysis
from dtbench_analysis import load_run, tables
from dtbench_analysis.cli import main
from dtbench_analysis.commands import report_cmd
from dtbench_analysis.plot import memory_fig

SHAPE = (4, 12)
MIB = 2.0 ** 20
#: exchange -> (total ms per iteration of every rank, plan's optimizer bytes per rank,
#: measured peak resident bytes per rank): sharding saves memory, costs time
STAGES = {"sync": (40.0, 8e6, [61e6, 64e6, 60e6, 62e6]),
          "zero1": (44.0, 2e6, [52e6, 55e6, 51e6, 53e6]),
          "zero3": (52.0, 2e6, [41e6, 43e6, 40e6, 44e6])}


def stage_run(write, exchange, total_ms, optimizer, peak=None, plan=True, **kw):
    """A run of ``exchange`` with every rank's iteration ``total_ms`` long, its plan (params
    and grads 4 MB, zero3 a quarter and a bucket) and, when given, its measured peak."""
    over = {"total": np.full(SHAPE, total_ms / 1e3)}
    if exchange != "sync":
        over.update({"exchange_reduce_scatter": np.full(SHAPE, 0.003),
                     "exchange_allgather": np.full(SHAPE, 0.002),
                     "bytes_reduce_scatter": np.full(SHAPE, 4e6),
                     "bytes_allgather": np.full(SHAPE, 4e6)})
    held = 1.5e6 if exchange == "zero3" else 4e6
    memory = {}
    if plan:
        memory.update(params=[held] * 4, grads=[held] * 4, optimizer=[optimizer] * 4)
    if peak is not None:
        memory["peak_resident"] = peak
    return write(exchange=exchange, slow_rank=None, overrides=over, memory=memory, **kw)


@pytest.fixture
def stages(write, tmp_path):
    """A folder: sync, zero1 and zero3 runs recording plan and peak, and a zero1 run of an
    older dtbench recording the plan alone."""
    folder = tmp_path / "stages"
    folder.mkdir()
    for exchange, (total, optimizer, peak) in STAGES.items():
        path = stage_run(write, exchange, total, optimizer, peak)
        (folder / f"{exchange}.h5").write_bytes(open(path, "rb").read())
    older = stage_run(write, "zero1", 46.0, 2e6, None, tag="older")
    (folder / "zero1-older.h5").write_bytes(open(older, "rb").read())
    return folder


def from_file(path):
    """What the figure must show for ``path``, read with h5py alone: the median over measured
    iterations of the largest total (ms) and the largest rank's peak resident, else its plan
    (MiB), and the plan."""
    with h5py.File(path, "r") as f:
        warmup = int(f.attrs["warmup"])
        total = f["iterations/total"][:, warmup:]
        time_ms = float(np.median(total.max(axis=0))) * 1e3
        plan = max(sum(f[f"ranks/memory_{k}"][:] for k in ("params", "grads", "optimizer")))
        peak = f["ranks/memory_peak_resident"][:] if "memory_peak_resident" in f["ranks"] \
            else None
    return time_ms, (plan if peak is None else peak.max()) / MIB, plan / MIB, peak


def test_figure_points_are_the_files_values(stages):
    res = dtbench_analysis.load(stages)
    fig = memory_fig.memory_time(res.memory)
    ax = fig.axes[0]
    drawn = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
    assert sorted(g for g in drawn if g.startswith("memory ")) == \
        ["memory sync", "memory zero1", "memory zero3"]
    seen = 0
    for name in ("sync", "zero1", "zero3"):
        line = drawn[f"memory {name}"]
        assert line.get_label() == name
        rows = res.memory[res.memory["exchange"] == name]
        expected = [from_file(f) for f in rows["file"]]
        assert list(line.get_xdata()) == pytest.approx([e[0] for e in expected], rel=1e-12)
        assert list(line.get_ydata()) == pytest.approx([e[1] for e in expected], rel=1e-12)
        seen += len(expected)
        with_peak = [e for e in expected if e[3] is not None]
        if with_peak:       # the plan under each measured point
            assert list(drawn[f"plan {name}"].get_ydata()) == \
                pytest.approx([e[2] for e in with_peak], rel=1e-12)
    assert seen == 4        # one point per run, the older file's (its plan) too
    older = res.memory[res.memory["file"].str.endswith("zero1-older.h5")].iloc[0]
    assert older["basis"] == "plan" and np.isnan(older["peak resident MiB"])
    sync = res.memory[res.memory["exchange"] == "sync"].iloc[0]
    assert sync["peak resident min MiB"] == pytest.approx(60e6 / MIB)
    zero = res.memory[res.memory["exchange"] == "zero1"].iloc[0]
    assert zero["reduce-scatter ms"] == pytest.approx(3.0) and \
        zero["all-gather ms"] == pytest.approx(2.0)


def section_ids(page):
    return re.findall(r'<section id="([^"]+)">', page)


def test_report_section_after_the_time(stages, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(stages), "-o", str(out)]) == 0
    capsys.readouterr()
    page = out.read_text()
    ids = section_ids(page)
    assert ids[ids.index("time") + 1] == "memory"
    section = page.split('<section id="memory">', 1)[1].split("</section>", 1)[0]
    assert 'id="fig-memory"' in section and 'id="table-memory"' in section
    assert "<h2>Memory and time</h2>" in section
    for name in ("sync.h5", "zero1.h5", "zero3.h5", "zero1-older.h5"):
        assert f"<td class=l>{name}</td>" in section
    # the table's memory cells are the files' values (MiB with 3 decimals: below 100)
    assert f"<td>{from_file(stages / 'zero3.h5')[1]:.3f}</td>" in section


@pytest.mark.long  # three reports; the quick suite checks the section where it belongs
def test_no_section_without_memory_of_two_strategies(write, tmp_path, capsys):
    """One strategy with memory, two without (older files), or two with memory but none of them
    sharded (sync and ssp, as a scaling study of the unsharded strategies): no section."""
    one = tmp_path / "one"
    two_old = tmp_path / "old"
    unsharded = tmp_path / "unsharded"
    one.mkdir(), two_old.mkdir(), unsharded.mkdir()
    for exchange in ("sync", "ssp"):
        p = stage_run(write, exchange, 40.0, 8e6, [6e7] * 4, tag=exchange)
        (unsharded / f"{exchange}.h5").write_bytes(open(p, "rb").read())
    for i, (total, peak) in enumerate(((40.0, [6e7] * 4), (41.0, [6.2e7] * 4))):
        p = stage_run(write, "sync", total, 8e6, peak, tag=f"t{i}")
        (one / f"sync{i}.h5").write_bytes(open(p, "rb").read())
    zero = stage_run(write, "zero1", 44.0, 2e6, None, plan=False)   # no memory at all
    (one / "zero1.h5").write_bytes(open(zero, "rb").read())
    for exchange in ("sync", "zero1"):
        p = stage_run(write, exchange, 40.0, 8e6, None, plan=False)
        (two_old / f"{exchange}.h5").write_bytes(open(p, "rb").read())
    for folder in (one, two_old, unsharded):
        out = tmp_path / f"{folder.name}.html"
        assert main(["report", str(folder), "-o", str(out)]) == 0
        page = out.read_text()
        assert "memory" not in section_ids(page) and "fig-memory" not in page
        assert section_ids(page) == [s for s, _ in report_cmd.SECTIONS]
    assert len(dtbench_analysis.load(one).memory) == 2
    assert dtbench_analysis.load(two_old).memory.empty
    assert set(dtbench_analysis.load(unsharded).memory["exchange"]) == {"sync", "ssp"}
    assert "error" not in capsys.readouterr().err


def test_folded_study_keeps_the_section_before_the_fold():
    order, folded = report_cmd.page_order(report_cmd.FOLD_RUNS + 1, True, True)
    ids = [i for i, _ in order]
    assert ids[:3] == ["study", "scaling", "memory"] and folded == "time"
    assert report_cmd.page_order(3, False, False)[0] == list(report_cmd.SECTIONS)


def test_summary_memory_beside_the_time(stages, capsys):
    path = str(stages / "zero1.h5")
    assert main(["summary", path, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    time_ms, shown, plan, peak = from_file(path)
    m = s["memory"]
    assert m["total_mib"] == pytest.approx(plan)
    assert m["peak_resident_max_mib"] == pytest.approx(peak.max() / MIB)
    assert m["peak_resident_min_mib"] == pytest.approx(peak.min() / MIB)
    assert m["time_per_iteration_ms"] == pytest.approx(time_ms)
    assert m["time_per_iteration_ms"] == pytest.approx(s["throughput"]["critical_path_median_ms"])
    assert s["collectives"]["reduce_scatter_ms"] == pytest.approx(3.0)
    assert main(["summary", path]) == 0
    out = capsys.readouterr().out
    assert (f"measured peak resident {peak.max() / MIB:.1f} MiB (the largest rank; ranks "
            f"{peak.min() / MIB:.1f}-{peak.max() / MIB:.1f} MiB)") in out
    assert (f"memory against time: {shown:.1f} MiB per rank (measured peak) at "
            f"{time_ms:.3f} ms per iteration (median)") in out
    assert "collectives: reduce-scatter 3.000 ms" in out


def test_summary_of_older_files(stages, write, capsys):
    """The plan alone (a dtbench before the peak), the peak alone, nothing at all."""
    older = str(stages / "zero1-older.h5")
    assert main(["summary", older, "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    assert "peak_resident_max_mib" not in m and m["total_mib"] == pytest.approx(from_file(older)[2])
    assert main(["summary", older]) == 0
    out = capsys.readouterr().out
    assert "measured peak: not in this file" in out and "(plan) at 46.000 ms" in out
    peak_only = stage_run(write, "zero2", 45.0, 2e6, [3e7, 3.2e7, 3.1e7, 3e7], plan=False)
    assert main(["summary", peak_only, "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    assert m["total_mib"] is None and m["peak_resident_max_mib"] == pytest.approx(3.2e7 / MIB)
    assert main(["summary", peak_only]) == 0
    assert "the plan's: not in this file" in capsys.readouterr().out
    bare = stage_run(write, "sync", 40.0, 8e6, None, plan=False)
    assert main(["summary", bare, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"] is None
    assert main(["summary", bare]) == 0
    assert "memory per rank" not in capsys.readouterr().out


def test_compare_memory_where_the_sharding_differs(stages, write, capsys):
    files = [str(stages / f"{x}.h5") for x in STAGES]
    assert main(["compare", *files, "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert [g["exchange"] for g in groups] == list(STAGES)
    for g, path in zip(groups, files):
        time_ms, _, plan, peak = from_file(path)
        assert g["memory_plan_mib"] == pytest.approx(plan)
        assert g["memory_peak_mib"] == pytest.approx(peak.max() / MIB)
        assert g["time_s"]["median"] * 1e3 == pytest.approx(time_ms)
    assert main(["compare", *files]) == 0
    out = capsys.readouterr().out
    _, _, plan, peak = from_file(files[2])
    assert (f"memory per rank: {plan:.1f} MiB planned, {peak.max() / MIB:.1f} MiB measured "
            f"peak resident, at 52.000 ms per iteration") in out
    table = tables.comparisons([load_run(f) for f in files])
    cols = list(table.columns)
    assert cols.index("memory/rank MiB") == cols.index("hi") + 1
    assert list(table["peak resident MiB"]) == pytest.approx(
        [from_file(f)[3].max() / MIB for f in files])
    runs = tables.runs_table([load_run(f) for f in files])
    assert list(runs["peak resident MiB"]) == pytest.approx(
        [from_file(f)[3].max() / MIB for f in files])


def test_compare_without_sharding_shows_no_memory(write, capsys):
    """Two sync runs differing in the batch record memory, but the sharding does not differ."""
    a = stage_run(write, "sync", 40.0, 8e6, [6e7] * 4)
    b = stage_run(write, "sync", 60.0, 8e6, [7e7] * 4, batch_global=128)
    assert main(["compare", a, b, "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert len(groups) == 2 and all("memory_plan_mib" not in g for g in groups)
    assert main(["compare", a, b]) == 0
    assert "memory per rank" not in capsys.readouterr().out
    assert "memory/rank MiB" not in tables.comparisons([load_run(a), load_run(b)]).columns


@pytest.mark.parametrize("bad", ["strings"] + [pytest.param(b, marks=pytest.mark.long)
                                              for b in ("shape", "negative", "group")])
def test_bad_memory_fields_are_one_line(write, tmp_path, capsys, bad):
    """A memory dataset that is not bytes per rank: one warning line, the rest of the run
    analysed, the report without it; never a traceback."""
    folder = tmp_path / bad
    folder.mkdir()
    good = stage_run(write, "sync", 40.0, 8e6, [6e7] * 4)
    path = stage_run(write, "zero1", 44.0, 2e6, None)
    with h5py.File(path, "a") as f:
        if bad == "strings":
            f["ranks/memory_peak_resident"] = np.array([b"big"] * 4, dtype="S8")
        elif bad == "shape":
            f["ranks/memory_peak_resident"] = np.ones((2, 2))
        elif bad == "negative":
            f["ranks/memory_peak_resident"] = np.array([-1.0, 3e7, np.inf, 3.1e7])
        else:
            f.create_group("ranks/memory_peak_resident")
    for p in (good, path):
        (folder / p.split("/")[-1]).write_bytes(open(p, "rb").read())
    assert main(["summary", path, "--json"]) == 0
    captured = capsys.readouterr()
    warnings = [x for x in captured.err.splitlines() if "memory_peak_resident" in x]
    assert len(warnings) == 1 and warnings[0].startswith("dtbench-analyze: warning: ")
    assert "Traceback" not in captured.err
    m = json.loads(captured.out)["memory"]
    if bad == "negative":   # the two values that are bytes remain
        assert m["peak_resident_max_mib"] == pytest.approx(3.1e7 / MIB)
        assert m["peak_resident_min_mib"] == pytest.approx(3e7 / MIB)
    else:                   # the plan alone, as in an older file
        assert "peak_resident_max_mib" not in m and m["total_mib"] is not None
    out = tmp_path / f"{bad}.html"
    assert main(["report", str(folder), "-o", str(out)]) == 0
    assert "fig-memory" in out.read_text()      # sync's peak, zero1's peak or plan
    capsys.readouterr()


def test_figure_command_draws_it(stages, tmp_path, capsys):
    out = tmp_path / "m.svg"
    assert main(["figure", "memory", str(stages), "-o", str(out)]) == 0
    capsys.readouterr()
    data = out.read_bytes()
    assert b"<svg" in data[:2000] and data.count(b"<path") > 20
    # no run records memory: the axes say so instead of drawing nothing
    fig = memory_fig.memory_time(tables.memory_time([]))
    assert "no run records its memory per rank" in [t.get_text() for t in fig.axes[0].texts]
