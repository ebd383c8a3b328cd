"""Tests of the reader (dtbench_analysis.runfile)."""

import hashlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import synthetic as syn
from conftest import KILLED_COMPLETED
from dtbench_analysis import ITERATION_FIELDS, RunFileError, SchemaError, load_run


def test_attributes_config_and_ranks(complete_file):
    run = load_run(complete_file)
    assert run.schema_version == 1
    assert (run.nranks, run.nnodes, run.warmup, run.iters, run.iters_total) == (4, 2, 2, 10, 12)
    assert run.factors["model"] == "mlp"          # fixed-length string attribute decoded
    assert run.factors["batch_global"] == syn.BATCH_GLOBAL
    assert isinstance(run.attrs["nranks"], int)
    assert run.attrs["timer_overhead_s"] == pytest.approx(syn.TIMER_OVERHEAD_S)
    assert run.config["lr"] == 0.1 and run.config["flush_every"] == 4
    assert run.config_attrs["model"] == "mlp"
    assert list(run.ranks["rank"]) == [0, 1, 2, 3]
    assert list(run.ranks["host"]) == ["node0", "node0", "node1", "node1"]
    assert list(run.ranks["measured"]) == [10] * 4
    assert set(run.iterations) == set(ITERATION_FIELDS)
    assert run.units["bytes_sent"] == "bytes" and run.descriptions["total"] == "synthetic total"
    assert list(run.eval["accuracy"]) == [0.5, 0.7, 0.9]    # the unwritten NaN slot is dropped


def test_complete_run_is_complete(complete_file):
    run = load_run(complete_file)
    assert run.finished and run.is_complete and run.stop_reason == "completed"
    assert run.completeness_note() is None
    assert run.incomplete_ranks().empty
    assert run.valid.all()


def test_measured_excludes_warmup(complete_file):
    run = load_run(complete_file)
    total = run.measured("total")
    assert total.shape == (4, 12)
    assert np.isnan(total[:, :2]).all()
    assert np.allclose(total[[0, 1, 3], 2:], syn.TOTAL_MS / 1e3)
    assert np.allclose(total[2, 2:], syn.SLOW_TOTAL_MS / 1e3)
    # the raw per-iteration data keeps the warm-up
    assert np.allclose(run.iterations["forward"][:, :2], syn.WARMUP_PHASE_MS / 1e3)


def test_killed_run_completeness(killed_file):
    run = load_run(killed_file)
    assert not run.finished and not run.is_complete
    assert run.stop_reason is None and "end_time" not in run.attrs
    assert list(run.completed) == KILLED_COMPLETED
    assert list(run.status) == [0, 0, 0, 0]
    assert list(run.ranks["measured"]) == [6, 2, 6, 6]
    assert list(run.incomplete_ranks()["rank"]) == [0, 1, 2, 3]
    assert run.completeness_note() == ("run did not finish (killed?); ranks 0,2-3 stopped after "
                                       "8/12 iterations, rank 1 after 4/12")


def test_killed_run_ignores_unrecorded_block(killed_file):
    run = load_run(killed_file)
    assert run.valid.sum() == sum(KILLED_COMPLETED)
    assert list(run.valid[1]) == [True] * 4 + [False] * 8
    # rank 1 iterations 4..7 hold garbage (10 s) in the file; the reader must hide them
    assert np.isnan(run.iterations["total"][1, 4:]).all()
    assert np.isnan(run.measured("total")[1, 4:]).all()
    assert list(run.measured_by_all.nonzero()[0]) == [2, 3]


def test_note_matches_brief_example(write):
    path = write(nranks=2, nnodes=1, warmup=20, iters=480, flush_every=20, killed=True,
                 completed=[120, 100], slow_rank=None)
    assert load_run(path).completeness_note() == (
        "run did not finish (killed?); rank 0 stopped after 120/500 iterations, "
        "rank 1 after 100/500")


def test_note_signal_and_error(write):
    run = load_run(write(completed=[8] * 4, status=[2] * 4, stop_reason="signal"))
    assert run.finished and not run.is_complete
    assert run.completeness_note() == (
        "run stopped early by a signal (stop_reason=signal); ranks 0-3 stopped after 8/12 "
        "iterations (status 2: stopped early)")
    run = load_run(write(status=[1, 1, 3, 1], stop_reason="error"))
    assert not run.is_complete
    assert list(run.incomplete_ranks()["rank"]) == [2]
    assert "rank 2 stopped after 12/12 iterations (status 3: error)" in run.completeness_note()


def test_note_duration(write):
    run = load_run(write(completed=[8] * 4, status=[2] * 4, stop_reason="duration"))
    assert run.completeness_note().startswith(
        "run stopped at its --duration (stop_reason=duration); ranks 0-3 stopped after 8/12")


def test_to_frame(killed_file):
    run = load_run(killed_file)
    frame = run.to_frame()
    assert list(frame.columns[:4]) == ["rank", "iteration", "warmup", "valid"]
    assert set(ITERATION_FIELDS) <= set(frame.columns)
    assert len(frame) == sum(KILLED_COMPLETED)
    assert frame["valid"].all() and frame["total"].notna().all()
    assert frame.groupby("rank").size().tolist() == KILLED_COMPLETED
    assert frame["warmup"].sum() == 4 * 2
    measured = run.to_frame(fields=["total"], include_warmup=False)
    assert list(measured.columns) == ["rank", "iteration", "warmup", "valid", "total"]
    assert len(measured) == 20 and not measured["warmup"].any()
    assert (measured["iteration"] >= 2).all()
    row = measured[(measured["rank"] == 2) & (measured["iteration"] == 3)]
    assert row["total"].item() == pytest.approx(syn.SLOW_TOTAL_MS / 1e3)
    everything = run.to_frame(valid_only=False)
    assert len(everything) == 4 * 12


def test_load_subset_of_fields(complete_file):
    run = load_run(complete_file, fields=["total", "exchange"])
    assert set(run.iterations) == {"total", "exchange"}
    with pytest.raises(KeyError, match="forward"):
        run.measured("forward")


def test_opens_read_only(complete_file):
    before = hashlib.sha256(open(complete_file, "rb").read()).hexdigest()
    load_run(complete_file)
    assert hashlib.sha256(open(complete_file, "rb").read()).hexdigest() == before


def test_readable_while_a_writer_holds_the_file(killed_file):
    """A run still in progress keeps the file open for writing in another process."""
    code = textwrap.dedent(f"""
        import sys, time, h5py
        f = h5py.File({killed_file!r}, "r+")
        print("open", flush=True)
        sys.stdin.read()
    """)
    writer = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
        run = load_run(killed_file)
        assert list(run.completed) == KILLED_COMPLETED
    finally:
        writer.communicate("", timeout=30)


@pytest.mark.parametrize("version", [2, 0])
def test_wrong_schema_version(write, version):
    path = write(schema_version=version)
    with pytest.raises(SchemaError, match=f"unsupported schema_version {version}"):
        load_run(path)


def test_not_a_dtbench_file(write):
    path = write(drop=["schema_version"])
    with pytest.raises(SchemaError, match="no schema_version"):
        load_run(path)


def test_missing_dataset(write):
    path = write(drop=["iterations/total"])
    with pytest.raises(RunFileError, match="missing /iterations/total"):
        load_run(path)


def test_missing_and_non_hdf5_files(tmp_path):
    with pytest.raises(RunFileError, match="no such file"):
        load_run(tmp_path / "absent.h5")
    text = tmp_path / "notes.h5"
    text.write_text("hello\n")
    with pytest.raises(RunFileError, match="not an HDF5 file"):
        load_run(text)


def test_killed_while_closing(write):
    """Statuses written but the run died before the `finished` attribute: still incomplete."""
    run = load_run(write(killed=True, completed=[12] * 4, status=[1] * 4))
    assert not run.finished and not run.is_complete
    assert run.incomplete_ranks().empty
    assert run.completeness_note() == ("run did not finish (killed?); every rank completed "
                                       "12/12 iterations")


def test_parameter_servers_are_not_incomplete_ranks(tmp_path):
    """An async run's parameter servers (/ranks/role 1) have no iterations: a finished run with
    every worker complete is complete, and a worker that fell short is still reported."""
    import h5py
    from dtbench_analysis.runfile import load_run

    path = tmp_path / "ps.h5"
    syn.write_run(path, nranks=3, nnodes=1, iters=6, warmup=1, slow_rank=None)
    with h5py.File(path, "a") as f:
        f["ranks"].create_dataset("role", data=np.array([0, 0, 1], dtype=np.int32))
        f["ranks/completed"][2] = 0
        f.attrs["exchange"] = "async"
    run = load_run(str(path))
    assert run.is_complete and run.completeness_note() is None
    assert list(run.trains) == [True, True, False]
    with h5py.File(path, "a") as f:
        f["ranks/completed"][1] = 3
    run = load_run(str(path))
    assert not run.is_complete and list(run.incomplete_ranks()["rank"]) == [1]
