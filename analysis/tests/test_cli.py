"""Tests of the command line: dtbench-analyze summary, --json, errors, python -m."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from dtbench_analysis.cli import main


def run_main(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_summary_text(capsys, complete_file):
    status, out, err = run_main(capsys, "summary", complete_file)
    assert status == 0 and err == ""
    assert out.startswith(f"== {complete_file}\n")
    assert "INCOMPLETE" not in out
    assert "throughput: 800.0 samples/s" in out


def test_summary_incomplete_line(capsys, killed_file):
    status, out, _ = run_main(capsys, "summary", killed_file)
    assert status == 0
    assert ("INCOMPLETE: run did not finish (killed?); ranks 0,2-3 stopped after 8/12 "
            "iterations, rank 1 after 4/12") in out.splitlines()


def test_summary_json(capsys, killed_file):
    status, out, _ = run_main(capsys, "summary", killed_file, "--json")
    assert status == 0
    s = json.loads(out)                                   # strict JSON: no NaN
    assert s["file"] == killed_file and s["complete"] is False and s["finished"] is False
    assert s["incomplete"].startswith("run did not finish (killed?)")
    assert s["factors"]["nranks"] == 4 and s["factors"]["model"] == "mlp"
    assert s["iterations"]["warmup_excluded"] == 2
    assert s["throughput"]["samples_per_s"] == pytest.approx(800)
    assert s["phases_ms"]["total"]["median"] == pytest.approx(40)
    assert s["slowest_rank"]["rank"] == 2
    assert s["stop_reason"] is None and s["end_time"] is None


def test_summary_json_several_files(capsys, complete_file, killed_file):
    status, out, _ = run_main(capsys, "summary", complete_file, killed_file, "--json")
    assert status == 0
    runs = json.loads(out)
    assert [r["file"] for r in runs] == [complete_file, killed_file]
    assert [r["complete"] for r in runs] == [True, False]


def test_json_null_when_nothing_measured(capsys, write):
    status, out, _ = run_main(capsys, "summary", write(killed=True, completed=[0] * 4), "--json")
    assert status == 0
    s = json.loads(out)
    assert s["throughput"]["samples_per_s"] is None and s["phases_ms"]["data"]["median"] is None


def bad_files(tmp_path, write):
    text = tmp_path / "notes.txt"
    text.write_text("not hdf5\n")
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    return {
        "missing": str(tmp_path / "absent.h5"),
        "not hdf5": str(text),
        "schema 2": write(schema_version=2),
        "no schema": write(drop=["schema_version"]),
        "directory": str(empty),
    }


@pytest.mark.parametrize("kind", ["missing", "not hdf5", "schema 2", "no schema", "directory"])
@pytest.mark.parametrize("as_json", [False, True])
def test_errors_one_line_status_2(capsys, tmp_path, write, kind, as_json):
    path = bad_files(tmp_path, write)[kind]
    status, out, err = run_main(capsys, "summary", path, *(["--json"] if as_json else []))
    assert status == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and err.endswith("\n")
    assert err.startswith(f"dtbench-analyze: {path}: ")


def test_error_messages(capsys, tmp_path, write):
    files = bad_files(tmp_path, write)
    expected = {"missing": "no such file", "not hdf5": "not an HDF5 file",
                "schema 2": "unsupported schema_version 2",
                "no schema": "not a dtbench result file",
                "directory": "directory holds no *.h5 result file"}
    for kind, words in expected.items():
        _, _, err = run_main(capsys, "summary", files[kind])
        assert words in err, kind


def test_good_and_bad_file(capsys, tmp_path, complete_file):
    missing = str(tmp_path / "absent.h5")
    status, out, err = run_main(capsys, "summary", complete_file, missing)
    assert status == 2
    assert f"== {complete_file}" in out
    assert err.splitlines() == [f"dtbench-analyze: {missing}: no such file"]


def test_usage_error_status_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["summary"])
    assert exc.value.code == 2


def test_python_dash_m(complete_file, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dtbench_analysis", "summary", complete_file,
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["throughput"]["samples_per_s"] == pytest.approx(800)
    proc = subprocess.run([sys.executable, "-m", "dtbench_analysis", "summary",
                           str(tmp_path / "absent.h5")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "absent.h5" in proc.stderr


def console_script(name):
    """The console script pip installed beside this interpreter (a virtual environment's bin/,
    which need not be on PATH), else the one on PATH, else None."""
    here = os.path.join(sysconfig.get_path("scripts"), name)
    return here if os.access(here, os.X_OK) else shutil.which(name)


@pytest.mark.skipif(console_script("dtbench-analyze") is None,
                    reason="console script not installed (pip install -e analysis)")
def test_console_script(killed_file):
    proc = subprocess.run([console_script("dtbench-analyze"), "summary", killed_file],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("INCOMPLETE: ") for line in proc.stdout.splitlines())


def test_directory_input(capsys, write, tmp_path):
    """A directory stands for every *.h5 under it, recursively, sorted; a file named twice is
    read once; other files are left alone."""
    top = tmp_path / "results"
    (top / "b").mkdir(parents=True)
    a = shutil.copy(write(), top / "z.h5")
    b = shutil.copy(write(killed=True, completed=[8] * 4), top / "b" / "a.h5")
    (top / "notes.txt").write_text("not a result\n")
    status, out, err = run_main(capsys, "summary", str(top), str(a))
    assert status == 0 and err == ""
    assert [line for line in out.splitlines() if line.startswith("== ")] == \
        [f"== {b}", f"== {a}"]


@pytest.mark.parametrize("command", ["scaling", "stragglers", "compare"])
def test_bad_input_any_command(capsys, tmp_path, complete_file, command):
    missing = str(tmp_path / "absent.h5")
    status, out, err = run_main(capsys, command, complete_file, missing)
    assert status == 2 and out == ""
    assert err == f"dtbench-analyze: {missing}: no such file\n"


def test_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["scaling", "x.h5", "--unit", "cores"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.endswith("\n")
    assert err.startswith("dtbench-analyze scaling: argument --unit: invalid choice: 'cores'")
    assert "ranks" in err and "nodes" in err                       # what is accepted
