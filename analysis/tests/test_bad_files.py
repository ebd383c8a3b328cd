"""Files a user can produce that are valid HDF5 but odd: each command answers with one line
naming the file and what is wrong (exit 2), or a warning line and the rest of its output, never
a traceback or numpy's RuntimeWarnings (pytest turns those into errors here)."""

import json

import h5py
import numpy as np
import pytest

import synthetic
from dtbench_analysis import load_run
from dtbench_analysis.cli import main

#: every command on one file, with the options it needs (the figures: FIGURES)
COMMANDS = (["summary"], ["summary", "--json"], ["stragglers"], ["scaling"], ["compare"],
            ["export", "-o", "{tmp}/t.csv"])
FIGURES = COMMANDS + (["timeline", "-o", "{tmp}/t.png"],)


def edit(path, change):
    with h5py.File(path, "a") as f:
        change(f)
    return path


def run_all(capsys, tmp_path, path, commands=COMMANDS):
    """(status, stdout, stderr) of each command, with --overwrite for the file outputs."""
    out = []
    for argv in commands:
        argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
        extra = ["--overwrite"] if any(a.startswith("-o") for a in argv) else []
        status = main([argv[0], path] + argv[1:] + extra)
        o, e = capsys.readouterr()
        out.append((argv, status, o, e))
    return out


@pytest.mark.parametrize("text,shape", [("[1, 2]", "a JSON list"), ("null", "a JSON null"),
                                        ('"sync"', "a JSON str"), ("{", "not valid JSON")])
def test_configuration_of_another_shape(capsys, tmp_path, write, text, shape):
    path = edit(write(tag="odd"), lambda f: f.attrs.__setitem__("config_json", text))
    for argv, status, out, err in run_all(capsys, tmp_path, path,
                                          FIGURES if text == "null" else COMMANDS):
        assert status == 0 and out, argv
        assert err.splitlines()[0] == (f"dtbench-analyze: warning: {path}: attribute config_json"
                                       f" is {shape}" + err.splitlines()[0].split(shape)[1])
        assert "the configuration is read from /config" in err and len(err.splitlines()) == 1
    run = load_run(path)
    assert run.config["tag"] == "odd"          # from /config, as rank 0 printed it


def test_total_holding_inf(capsys, tmp_path, write):
    def infinite(f):
        total = f["iterations/total"][()]
        total[1, 5], total[0, 3] = np.inf, -np.inf
        f["iterations/total"][...] = total
    path = edit(write(slow_rank=None), infinite)
    for argv, status, out, err in run_all(capsys, tmp_path, path, FIGURES):
        assert status == 0, argv
        assert err == f"dtbench-analyze: warning: {path}: /iterations/total holds 2 infinite " \
                      f"values: read as not measured\n", argv
    run = load_run(path)
    assert not run.valid[1, 5] and not run.valid[0, 3] and run.valid.sum() == 4 * 12 - 2
    assert np.nanmax(run.measured("total")) == pytest.approx(0.040)
    # those two iterations are not measured by every rank: the critical path leaves them out
    assert run.measured_by_all.sum() == 10 - 2


def test_every_total_inf(capsys, tmp_path, write):
    path = edit(write(), lambda f: f["iterations/total"].__setitem__(Ellipsis, np.inf))
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status == 0 and "warning" in err, argv
    assert main(["summary", path, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["throughput"]["samples_per_s"] is None and s["phases_ms"]["total"]["n"] == 0


@pytest.mark.parametrize("kind", ["nothing recorded", "one rank recorded nothing",
                                  "async, nothing recorded", "killed in warm-up"])
def test_runs_with_nothing_measured(capsys, tmp_path, write, kind):
    path = {"nothing recorded": lambda: write(killed=True, completed=[0] * 4),
            "one rank recorded nothing": lambda: write(nranks=2, nnodes=1, slow_rank=None,
                                                       killed=True, completed=[12, 0]),
            "async, nothing recorded": lambda: write(exchange="async", killed=True,
                                                     completed=[0] * 4),
            "killed in warm-up": lambda: write(killed=True, completed=[1, 1, 2, 1])}[kind]()
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status == 0 and err == "", (argv, err)
    assert main(["predict", path, "--nodes", "4"]) == 2
    out, err = capsys.readouterr()
    if kind == "one rank recorded nothing":   # a lockstep run: no iteration measured by all
        assert err.startswith("dtbench-analyze: predict: ")
    assert out == "" and len(err.splitlines()) == 1, err
    assert err == f"dtbench-analyze: predict: {path}: no measured iteration: nothing to fit " \
                  f"(no run left to fit)\n"


@pytest.mark.parametrize("key,value,words", [
    ("iters_total", "many", "root attribute iters_total is 'many', expected an integer >= 0 "
                            "and < 2^31"),
    ("nranks", 0, "root attribute nranks is 0, expected an integer >= 1 and < 2^31"),
    ("warmup", -3, "root attribute warmup is -3, expected an integer >= 0 and < 2^31"),
    ("batch_global", 2.5, "root attribute batch_global is 2.5, expected an integer >= 0 and "
                          "< 2^31"),
    ("nnodes", 1e300, "root attribute nnodes is 1e+300, expected an integer >= 1 and < 2^31"),
])
def test_root_attributes_that_are_not_counts(capsys, tmp_path, write, key, value, words):
    path = edit(write(), lambda f: f.attrs.__setitem__(key, value))
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status == 2 and out == "", argv
        assert err == f"dtbench-analyze: {path}: {words}\n", argv


def test_datasets_of_other_types(capsys, tmp_path, write):
    def strings(f):
        del f["iterations/forward"]
        f["iterations/forward"] = np.full((4, 12), b"fast")
    path = edit(write(), strings)
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status == 2 and out == "", argv
        assert err == f"dtbench-analyze: {path}: /iterations/forward holds |S4 values, " \
                      f"expected numbers\n"


def test_evaluations_of_another_shape(capsys, tmp_path, write):
    def square(f):
        del f["eval/accuracy"]
        f["eval/accuracy"] = np.zeros((2, 2))
    path = edit(write(), square)
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status == 0 and out, argv
        assert err.startswith(f"dtbench-analyze: warning: {path}: /eval holds datasets of "
                              f"shapes") and "evaluations ignored" in err
    assert load_run(path).eval.empty


def test_layer_profile_of_another_shape(capsys, tmp_path, write):
    path = synthetic.add_profile(write(), np.zeros((4, 3, 2)), np.zeros((4, 3, 5)), ["a", "b"],
                                 ["fc", "fc"])
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status == 0 and out, argv
        assert err.startswith(f"dtbench-analyze: warning: {path}: /profile holds ") and \
            err.endswith(": layer profile ignored\n") and len(err.splitlines()) == 1, err
    assert load_run(path).profile == {}


def test_roofline_of_another_shape(capsys, tmp_path, write):
    """A roofline that does not fit the profile (amounts per rank of 2 layers, 3 named): one
    warning line, the times still summarised, without the roofline."""
    path = synthetic.add_profile(write(), np.full((4, 3, 3), 1e-3), np.full((4, 3, 3), 1e-3),
                                 ["a", "b", "c"], ["fc", "fc", "fc"])
    synthetic.add_roofline(path, {n: np.ones((4, 2)) for n in (
        "forward_flop", "backward_flop", "forward_bytes", "backward_bytes")},
        np.ones(4), np.ones(4))
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status == 0 and out, argv
        assert err.startswith(f"dtbench-analyze: warning: {path}: /profile's roofline holds ") \
            and err.endswith(": roofline ignored\n") and len(err.splitlines()) == 1, err
    prof = load_run(path).profile
    assert sorted(prof) == ["backward", "first_iteration", "forward", "kind", "layer"]


def _damage(path, how):
    data = bytearray(open(path, "rb").read())
    if how == "empty":
        data = bytearray()
    elif how == "cut in half":
        data = data[:len(data) // 2]
    else:                        # every 997th byte from 2000 on random: metadata and data hit
        rng = np.random.default_rng(int(how.split()[-1]))
        for i in range(2000, len(data), 997):
            data[i] = int(rng.integers(256))
    open(path, "wb").write(bytes(data))
    return path


@pytest.mark.parametrize("how", ["empty", "cut in half"] + [f"bytes {i}" for i in range(4)])
def test_damaged_files(capsys, tmp_path, write, how):
    """A copy cut short or bytes changed on disk (h5py raises RuntimeError on corrupt metadata):
    one line naming the file, exit 2, or, where only numbers were hit, the usual output."""
    path = _damage(write(), how)
    for argv, status, out, err in run_all(capsys, tmp_path, path):
        assert status in (0, 2), (argv, status)
        assert all(x.startswith("dtbench-analyze: ") for x in err.splitlines()), err
        if status == 2:
            assert out == "" and err.startswith(f"dtbench-analyze: {path}: ") and \
                len(err.splitlines()) == 1, (argv, err)


def test_report_and_predict_on_a_folder_of_odd_files(capsys, tmp_path, write):
    """The whole folder at once: every file reported or warned about, one report."""
    folder = tmp_path / "odd"
    folder.mkdir()
    good = [write(nranks=n, nnodes=1, slow_rank=None, tag="g") for n in (1, 2, 4)]
    odd = [edit(write(tag="o1"), lambda f: f.attrs.__setitem__("config_json", "null")),
           edit(write(tag="o2"), lambda f: f["iterations/total"].__setitem__((0, 4), np.inf)),
           write(killed=True, completed=[1, 0, 0, 1], tag="o3")]
    for i, p in enumerate(good + odd):
        (folder / f"r{i}.h5").write_bytes(open(p, "rb").read())
    assert main(["report", str(folder), "-o", str(tmp_path / "r.html")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"wrote {tmp_path / 'r.html'}: 6 runs") and len(err.splitlines()) == 2
    assert main(["predict", str(folder), "--nodes", "8", "--force"]) in (0, 1)
    out, err = capsys.readouterr()
    assert f"left out: {folder / 'r5.h5'}: no measured iteration" in out
