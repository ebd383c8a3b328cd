"""Property: whatever a valid HDF5 file holds, every command answers with output and warning
lines, or one line naming the file (exit 2): never a traceback or a numpy RuntimeWarning
(errors here, pyproject.toml). hypothesis edits a synthetic run (tests/synthetic.py): root
attributes set to odd values or deleted, datasets replaced by values, shapes and types a
writer could leave, groups removed. Derandomized: CI sees the same examples every time."""

import atexit
import contextlib
import io
import os
import shutil
import tempfile

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import synthetic
from dtbench_analysis import RunFileError, load_run
from dtbench_analysis.cli import main

ROOT_ATTRS = ("config_json", "nranks", "nnodes", "warmup", "iters", "iters_total",
              "batch_global", "batch_per_rank", "exchange", "model", "finished", "stop_reason",
              "target_accuracy", "calibration_exchange_s", "calibration_iters",
              "calibration_busbw_factor", "oversubscribed", "parallel", "stages",
              "microbatches", "nworkers", "timer_overhead_s", "precision", "grad_dtype",
              "launcher", "submit_line", "start_time")
DATASETS = ("iterations/total", "iterations/exchange", "iterations/start", "iterations/loss",
            "iterations/bytes_sent", "ranks/completed", "ranks/status", "ranks/host",
            "ranks/node", "ranks/role", "eval/accuracy", "eval/iteration", "samples/power_w",
            "ranks/samples_written", "iterations/exchange_wait", "iterations/staleness",
            "ranks/iterations_done", "profile/forward", "profile/backward", "profile/layer",
            "iterations/profile_cost", "ranks/memory_params", "ranks/memory_peak_resident")
GROUPS = ("config", "eval", "samples", "iterations", "ranks", "profile")

scalars = st.one_of(
    st.integers(-3, 40), st.integers(-2 ** 62, 2 ** 62),
    st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e300, 2.5]),
    st.sampled_from(["", "[]", "null", "{}", '{"exchange": [1]}', "sync", "async", "mixed",
                     "srun", "data", "model", "x" * 300, "1", "nan"]),
    st.sampled_from([b"\xff\xfe", b"mpirun", np.bool_(True)]))
fills = st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -1.0, 1e12, 3.0, 2 ** 40])
shapes = st.sampled_from(["same", "1d", "short", "wide", "empty", "strings", "ints"])

edits = st.one_of(
    st.tuples(st.just("attr"), st.sampled_from(ROOT_ATTRS), scalars),
    st.tuples(st.just("attr array"), st.sampled_from(ROOT_ATTRS), st.integers(0, 3)),
    st.tuples(st.just("delete attr"), st.sampled_from(ROOT_ATTRS), st.none()),
    st.tuples(st.just("dataset"), st.sampled_from(DATASETS), st.tuples(shapes, fills)),
    st.tuples(st.just("cells"), st.sampled_from(DATASETS), st.tuples(st.integers(0, 47), fills)),
    st.tuples(st.just("delete group"), st.sampled_from(GROUPS + DATASETS), st.none()),
    st.tuples(st.just("count"), st.sampled_from(("ranks/completed", "ranks/status",
                                                  "ranks/role", "ranks/node", "ranks/rank")),
              st.tuples(st.integers(0, 3), st.integers(-5, 40))))

COMMANDS = (["summary"], ["summary", "--json"], ["stragglers", "--json"], ["scaling"],
            ["compare"], ["export", "-o", "{tmp}/t.csv"], ["predict", "--nodes", "4"],
            ["timeline", "-o", "{tmp}/t.png"])
#: FUZZ_REPORT=1 adds the report and the figures (slow: for a search, not for every run)
if os.environ.get("FUZZ_REPORT"):
    COMMANDS += (["report", "-o", "{tmp}/r.html"],
                 ["figure", "heatmap", "{file}", "-o", "{tmp}/h.png"],
                 ["figure", "phases", "{file}", "-o", "{tmp}/p.png"],
                 ["summary", "--plot", "{tmp}/s.png"])


def _like(old, shape, fill):
    """A replacement for dataset ``old`` (shape (n, m) or (n,)) of another make."""
    base = old.shape if old is not None else (4, 12)
    if shape == "strings":
        return np.full(base, b"fast")
    if shape == "ints":
        return np.full(base, int(fill) if np.isfinite(fill) and abs(fill) < 2 ** 62 else -1,
                       dtype=np.int64)
    size = {"same": base, "1d": base[:1], "short": base[:1] + tuple(x // 2 for x in base[1:]),
            "wide": base[:1] + tuple(x * 2 for x in base[1:]), "empty": (0,) * len(base)}[shape]
    return np.full(size, fill, dtype=np.float64)


def _apply(f, edit):
    kind, name, value = edit
    if kind == "attr":
        f.attrs[name] = value
    elif kind == "attr array":
        f.attrs[name] = np.arange(value, dtype=np.float64)
    elif kind == "delete attr" and name in f.attrs:
        del f.attrs[name]
    elif kind == "delete group" and name in f:
        del f[name]
    elif kind == "dataset":
        old = f[name] if name in f else None
        data = _like(old, *value)
        if old is not None:
            del f[name]
        f.create_dataset(name, data=data)
    elif kind == "count" and name in f and f[name].dtype.kind in "iu" and f[name].size:
        data = f[name][()]
        data.flat[value[0] % data.size] = value[1]
        f[name][...] = data
    elif kind == "cells" and name in f and f[name].dtype.kind == "f" and f[name].size:
        data = f[name][()]
        data.flat[value[0] % data.size] = value[1]
        f[name][...] = data


WORK = tempfile.mkdtemp(prefix="dtbench-fuzz-")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)
BASE = synthetic.add_profile(synthetic.write_run(os.path.join(WORK, "base.h5"), samples={
    "time": np.tile(np.linspace(0, 1, 8), (4, 1)), "power_w": np.full((4, 8), 80.0)},
    overrides={"exchange_wait": np.full((4, 12), 0.001), "staleness": np.zeros((4, 12)),
               "profile_cost": np.full((4, 12), 1e-5)},
    memory={"params": [4e6] * 4, "grads": [4e6] * 4, "optimizer": [2e6] * 4,
            "peak_resident": [5e7, 5.2e7, 5.1e7, 5e7]}),
    np.full((4, 3, 2), 1e-3), np.full((4, 3, 2), 2e-3), ["conv1", "fc1"], ["conv", "fc"])


FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 70)), deadline=None,
                derandomize=not os.environ.get("FUZZ_EXAMPLES"), database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _answers(path, argv, case):
    """Run one command on ``path``: output and warning lines, or one line naming it (exit 2)."""
    try:
        load_run(path)
    except RunFileError as e:
        assert str(e).startswith(path + ": ") and "\n" not in str(e)
    argv = [a.replace("{tmp}", WORK).replace("{file}", path) for a in argv]
    if path not in argv:
        argv.insert(1, path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv + (["--overwrite"] if "-o" in argv or "--plot" in argv else []))
    lines = err.getvalue().splitlines()
    assert status in (0, 1, 2), (case, argv, status)
    assert all(x.startswith("dtbench-analyze: ") for x in lines), (case, argv, lines)
    if status == 2:
        assert out.getvalue() == "" and len(lines) >= 1, (case, argv, out.getvalue())


@pytest.mark.long  # scripts/test.sh --long: the quick suite has test_bad_files' odd files
@FUZZ
@given(st.lists(edits, min_size=1, max_size=4), st.sampled_from(COMMANDS))
def test_odd_files_never_raise(edits_, argv):
    path = os.path.join(WORK, "odd.h5")
    shutil.copy(BASE, path)
    with h5py.File(path, "a") as f:
        for e in edits_:
            _apply(f, e)
    _answers(path, argv, edits_)


SIZE = os.path.getsize(BASE)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, SIZE - 1), st.integers(0, 255)), min_size=1,
                max_size=40), st.sampled_from(COMMANDS))
def test_damaged_bytes_never_raise(changes, argv):
    """Bytes changed on disk (a bad copy, a failing disk): h5py may raise anything it raises
    on corrupt metadata; the commands still answer in lines."""
    data = bytearray(open(BASE, "rb").read())
    for at, value in changes:
        data[at] = value
    path = os.path.join(WORK, "damaged.h5")
    with open(path, "wb") as f:
        f.write(bytes(data))
    _answers(path, argv, changes)
