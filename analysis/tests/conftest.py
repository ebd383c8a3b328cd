"""Fixtures: synthetic result files written per docs/hdf5-layout.md (see synthetic.py)."""

import itertools

import pytest

import synthetic

KILLED_COMPLETED = [8, 4, 8, 8]     # of iters_total 12 (warm-up 2, flush_every 4)


@pytest.fixture
def write(tmp_path):
    """write(**kwargs) -> path of a new synthetic file in tmp_path (see synthetic.write_run)."""
    counter = itertools.count()

    def _write(**kwargs):
        return synthetic.write_run(tmp_path / f"run{next(counter)}.h5", **kwargs)
    return _write


@pytest.fixture
def complete_file(write):
    """4 ranks, warm-up 2, 10 measured iterations, rank 2 slow, finished cleanly."""
    return write()


@pytest.fixture
def killed_file(write):
    """Same run killed: completed 8,4,8,8 of 12; rank 1 has an unrecorded block of garbage."""
    return write(killed=True, completed=KILLED_COMPLETED, unrecorded=(1,))
