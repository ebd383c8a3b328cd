"""Files that grow with the run (docs/hdf5-layout.md): /iterations of a run stopped
early holds ``extent`` < ``iters_total`` columns (chunked, max shape iters_total). The reader loads
them like the same run allocated whole: the same statistics, the same completeness, and every
command runs; an extent beyond iters_total is refused."""

import h5py
import numpy as np
import pytest

from dtbench_analysis import RunFileError, load_run
from dtbench_analysis import metrics
from dtbench_analysis.cli import main

STOPPED = [8, 8, 8, 8]  # of iters_total 22 (warm-up 2, 20 measured, blocks of 4)


def shrink(path, extent, iters_total):
    """Rewrites every /iterations dataset as a growing file leaves it: the first `extent`
    columns, chunked by blocks, max shape (nranks, iters_total)."""
    with h5py.File(path, "r+") as f:
        g = f["iterations"]
        for name in list(g):
            data, attrs = g[name][:, :extent], dict(g[name].attrs)
            del g[name]
            ds = g.create_dataset(name, data=data, chunks=(data.shape[0], 4),
                                  maxshape=(data.shape[0], iters_total))
            ds.attrs.update(attrs)
    return path


@pytest.fixture
def pair(write):
    """The same stopped run twice: allocated whole, and grown to an extent of 12 columns."""
    kw = dict(iters=20, completed=STOPPED, stop_reason="signal", status=[2] * 4)
    return write(**kw), shrink(write(**kw), 12, 22)


def test_short_extent_reads_like_whole(pair):
    whole, grown = load_run(pair[0]), load_run(pair[1])
    assert grown.iters_total == whole.iters_total == 22
    assert grown.extent == 12 and whole.extent == 22
    assert grown.iterations["total"].shape == (4, 12)
    assert list(grown.completed) == STOPPED
    assert grown.completeness_note() == whole.completeness_note()
    assert "8/22" in grown.completeness_note()
    assert int(grown.measured_mask.sum()) == int(whole.measured_mask.sum()) == 4 * 6
    np.testing.assert_allclose(grown.measured("total")[:, :12], whole.measured("total")[:, :12])
    a, b = metrics.throughput(grown), metrics.throughput(whole)
    assert a["samples_per_s"] == pytest.approx(b["samples_per_s"])


def test_every_command_runs_on_a_grown_file(pair, capsys, tmp_path):
    grown = pair[1]
    for argv in (["summary"], ["stragglers"], ["compare"], ["timeline", "-o",
                 str(tmp_path / "t.png")], ["export", "-o", str(tmp_path / "t.csv")],
                 ["report", "-o", str(tmp_path / "r.html")]):
        assert main([argv[0], grown, pair[0]] + argv[1:]) == 0, argv
    out = capsys.readouterr().out
    assert "8/22" in out


def test_completed_beyond_the_extent_is_clipped(write):
    # a reader racing a live run can see completed before the new extent: never read past it
    path = shrink(write(iters=20, killed=True, completed=[12, 12, 12, 12]), 8, 22)
    run = load_run(path)
    assert run.extent == 8 and run.valid.sum() == 4 * 8


def test_extent_beyond_iters_total_is_refused(write):
    path = write(iters=20)
    with h5py.File(path, "r+") as f:
        f.attrs["iters_total"] = np.int64(10)
        f.attrs["iters"] = np.int64(8)
    with pytest.raises(RunFileError, match="more than iters_total 10"):
        load_run(path)


def _superblock_eoa(raw):
    """(offset, value) of the end-of-allocation address of a version 0 or 1 superblock."""
    where = {0: 40, 1: 44}[raw[8]]
    return where, int.from_bytes(raw[where:where + 8], "little")


def test_chunks_past_the_recorded_end_are_not_read(write):
    # A run killed inside an extension's flush: HDF5 writes the superblock (its end of
    # allocation) after the chunk index, which can then name chunks past that end; HDF5 refuses
    # to read them ("addr overflow"). No completed iteration lies there: the reader takes the
    # completed columns only and reads the run as before the extension.
    path = shrink(write(iters=20, killed=True, completed=STOPPED), 8, 22)
    before = load_run(path)
    with h5py.File(path, "r+") as f:  # the extension: chunks of columns 8-11, allocated last
        for ds in f["iterations"].values():
            ds.resize((ds.shape[0], 12))
            ds[:, 8:] = np.nan
    with h5py.File(path, "r") as f:
        sets = list(f["iterations"].values())
        new = min(ds.id.get_chunk_info(i).byte_offset for ds in sets
                  for i in range(ds.id.get_num_chunks())
                  if ds.id.get_chunk_info(i).chunk_offset[1] == 8)
    raw = bytearray(open(path, "rb").read())
    where, eoa = _superblock_eoa(raw)
    assert eoa == len(raw) > new
    raw[where:where + 8] = new.to_bytes(8, "little")
    open(path, "wb").write(raw)
    with h5py.File(path, "r") as f, pytest.raises(OSError, match="addr overflow"):
        f["iterations/total"][:]  # what a reader of the whole dataset meets
    after = load_run(path)
    assert after.extent == 12
    np.testing.assert_array_equal(after.measured("total")[:, :8], before.measured("total"))
    assert main(["summary", path]) == 0


def test_a_kill_between_two_extensions_reads_as_far_as_each_goes(write, capsys):
    # The writer extends its datasets one after another: a kill between two leaves the ones it
    # had not reached narrower than the rest. Every completed iteration is in all of them.
    path = shrink(write(iters=20, killed=True, completed=STOPPED), 12, 22)
    with h5py.File(path, "r+") as f:
        for name in ("backward", "wall"):
            if name in f["iterations"]:
                f["iterations"][name].resize((4, 8))
    run = load_run(path)
    assert run.extent == 12 and list(run.completed) == STOPPED
    assert int(run.measured_mask.sum()) == 4 * 6
    assert any("/iterations/backward holds 8 iterations" in w for w in run.warnings)
    assert main(["summary", path]) == 0
    assert "8/22" in capsys.readouterr().out


def test_a_dataset_of_other_ranks_is_refused(write):
    path = shrink(write(iters=20, killed=True, completed=STOPPED), 12, 22)
    with h5py.File(path, "r+") as f:
        g = f["iterations"]
        del g["backward"]
        g.create_dataset("backward", data=np.zeros((3, 8)), maxshape=(None, 22))
    with pytest.raises(RunFileError, match=r"/iterations/backward has shape \(3, 8\)"):
        load_run(path)
