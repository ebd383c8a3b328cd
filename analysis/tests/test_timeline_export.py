"""Tests of dtbench-analyze timeline (Gantt chart) and export (tidy CSV/Parquet table)."""

import os
import shutil

import numpy as np
import pandas as pd
import pytest

from conftest import KILLED_COMPLETED
from dtbench_analysis import load_run
from dtbench_analysis.cli import main
from dtbench_analysis.export import tidy
from dtbench_analysis.plotting import plt
from dtbench_analysis.plot.timeline_fig import draw
from dtbench_analysis.timeline import parse_window, window_for


def status_of(argv):
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


# ---- timeline ------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [("2:7", (2, 7)), ("3", (3, 4)), ("4:", (4, None)),
                                           (":6", (None, 6)), (None, (None, None))])
def test_parse_window(text, expected):
    assert parse_window(text) == expected


@pytest.mark.parametrize("text", ["", ":", "7:3", "5:5", "a:b", "-1:3", "1:2:3"])
def test_parse_window_rejects(text):
    with pytest.raises(ValueError):
        parse_window(text)


def test_window_default_and_clipping(complete_file):
    run = load_run(complete_file)
    assert window_for(run, None, None) == (2, 7)           # first 5 measured iterations
    assert window_for(run, 10, 50) == (10, 12)


def test_draws_only_completed_cells(killed_file):
    run = load_run(killed_file)
    fig, ax = plt.subplots()
    try:
        assert draw(ax, run, 0, 12) == sum(KILLED_COMPLETED)
        assert draw(ax, run, 2, 6) == 3 * 4 + 2          # rank 1 completed only 0..3
    finally:
        plt.close(fig)


def test_timeline_command(capsys, complete_file, killed_file, tmp_path):
    out_png = tmp_path / "t.png"
    assert main(["timeline", complete_file, killed_file, "--iters", "1:6", "-o",
                 str(out_png)]) == 0
    out = capsys.readouterr().out
    assert f"timeline: {complete_file}: iterations 1-5 (1 warm-up), 4 ranks" in out
    assert "INCOMPLETE: run did not finish (killed?)" in out
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_timeline_errors_leave_no_file(capsys, complete_file, tmp_path):
    out_png = tmp_path / "t.png"
    for argv, words in [(["--iters", "9:3"], "--iters 9:3: accepted: A:B"),
                        (["--iters", "40:50"], "--iters 40:50: outside the runs' iterations "
                                               "(0..11)")]:
        assert main(["timeline", complete_file, *argv, "-o", str(out_png)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and words in err
        assert not out_png.exists()
    assert status_of(["timeline", complete_file]) == 2            # -o is required
    assert "the following arguments are required: -o/--output" in capsys.readouterr().err
    (tmp_path / "t.pdf").write_text("x")
    assert main(["timeline", complete_file, "-o", str(tmp_path / "t.pdf")]) == 2
    assert "accepted: a file name ending in .png or .svg" in capsys.readouterr().err
    assert (tmp_path / "t.pdf").read_text() == "x"
    assert main(["timeline", complete_file, "-o", complete_file, "--overwrite"]) == 2
    assert "is one of the input files" in capsys.readouterr().err


# ---- export --------------------------------------------------------------------------------
def test_tidy_table(complete_file, killed_file):
    table = tidy([load_run(complete_file), load_run(killed_file)])
    assert list(table.columns) == ["run", "rank", "node", "iteration", "warmup", "phase",
                                   "seconds", "run_complete", "precision", "grad_dtype"]
    assert table["grad_dtype"].eq("fp32").all()            # files without the option: fp32
    per_run = table.groupby("run", observed=True).size()
    assert per_run[complete_file] == 4 * 10 * 6              # ranks x measured x phases
    assert per_run[killed_file] == (6 + 2 + 6 + 6) * 6       # completed minus warm-up
    assert not table["warmup"].any()
    assert table[table["run"] == killed_file]["run_complete"].eq(False).all()
    assert table[table["run"] == complete_file]["run_complete"].all()
    slow = table[(table["run"] == complete_file) & (table["phase"] == "total")]
    assert slow.groupby("rank")["seconds"].median().tolist() == pytest.approx(
        [0.04, 0.04, 0.08, 0.04])
    assert sorted(table["node"].unique()) == [0, 1]


def test_tidy_warmup_and_optional_phases(write):
    wait = np.full((4, 12), 0.002)
    table = tidy([load_run(write(overrides={"exchange_wait": wait}))], include_warmup=True)
    assert table["warmup"].sum() == 4 * 2 * 7
    assert set(table["phase"].astype(str)) == {"data", "forward", "backward", "exchange",
                                               "update", "total", "exchange_wait"}


@pytest.mark.parametrize("fmt,name", [("csv", "t.csv"), ("csv", "t.csv.gz"),
                                      ("parquet", "t.parquet")])
def test_export_round_trip(capsys, complete_file, killed_file, tmp_path, fmt, name):
    out = tmp_path / name
    assert main(["export", complete_file, killed_file, "--format", fmt, "-o", str(out)]) == 0
    msg = capsys.readouterr().out
    assert msg == (f"wrote {out}: 360 rows from 2 runs (1 incomplete: run_complete=False); "
                   f"warm-up excluded\n")                  # 240 + 120 rows
    back = pd.read_parquet(out) if fmt == "parquet" else pd.read_csv(out)
    assert len(back) == 360 and back["seconds"].notna().all()
    assert set(back["phase"].astype(str)) == {"data", "forward", "backward", "exchange",
                                              "update", "total"}
    assert (~back["run_complete"]).sum() == 120
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []   # no temp files


def test_export_directory_input(capsys, write, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    write()
    for name in ("a.h5", "b.h5"):
        shutil.copy(write(), folder / name)
    out = tmp_path / "all.csv"
    assert main(["export", str(folder), "-o", str(out)]) == 0
    assert "from 2 runs" in capsys.readouterr().out
    assert pd.read_csv(out)["run"].nunique() == 2


def test_export_refuses(capsys, complete_file, tmp_path):
    out = tmp_path / "t.csv"
    out.write_text("keep\n")
    assert main(["export", complete_file, "-o", str(out)]) == 2
    assert "exists (add --overwrite to replace it)" in capsys.readouterr().err
    assert out.read_text() == "keep\n"
    assert main(["export", complete_file, "--format", "parquet", "-o", str(tmp_path / "x.csv")]) \
        == 2
    assert "accepted: a file name ending in .parquet or .pq for --format parquet" in \
        capsys.readouterr().err
    assert status_of(["export", complete_file, "--format", "xlsx", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "argument --format: invalid choice: 'xlsx'" in err
    assert main(["export", complete_file, "-o", str(tmp_path / "nodir" / "t.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_export_bad_input_writes_nothing(capsys, complete_file, tmp_path):
    out = tmp_path / "t.csv"
    assert main(["export", complete_file, str(tmp_path / "absent.h5"), "-o", str(out)]) == 2
    assert "absent.h5: no such file" in capsys.readouterr().err
    assert not out.exists()
