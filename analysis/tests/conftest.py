"""Fixtures: synthetic result files written per docs/hdf5-layout.md (see synthetic.py), files of
the real dtbench (realruns.py, skipped when it is not built) and headless Chromium (browser.py)."""

import itertools
import os
import shutil

import pytest

import browser
import realruns
import synthetic

KILLED_COMPLETED = [8, 4, 8, 8]     # of iters_total 12 (warm-up 2, flush_every 4)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "long: a long check, deselected by scripts/test.sh unless --long (what CI runs)")


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


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory):
    """Result files of the real dtbench (LeNet, synthetic data; seconds in all):
    r1 (1 rank, batch 16), r2 (2 ranks, batch 16: strong scaling of r1), r2w (2 ranks, batch 32:
    weak scaling of r1), all 8 measured iterations after 2 warm-up, and killed (2 ranks, flush
    every 5 iterations, SIGKILLed once each rank wrote 12). Skipped when dtbench is not built."""
    reason = realruns.skip_reason()
    if reason:
        pytest.skip(reason)
    work = str(tmp_path_factory.mktemp("real"))
    results = os.path.join(work, "results")
    os.makedirs(results)
    common = ["--iters", "8", "--warmup", "2"]
    runs = {
        "r1": realruns.run(results, 1, "r1.h5", "--batch", "16", *common),
        "r2": realruns.run(results, 2, "r2.h5", "--batch", "16", *common),
        "r2w": realruns.run(results, 2, "r2w.h5", "--batch", "32", *common),
        "killed": realruns.killed(results, 2, "killed.h5", 12, "--batch", "8", "--warmup", "2",
                                  "--flush-every", "5"),
    }
    shutil.rmtree(os.path.join(results, "ompi"), ignore_errors=True)
    runs["dir"] = results
    return runs


@pytest.fixture(scope="session")
def chromium():
    """Path of headless Chromium; skips the test when it is not installed."""
    path = browser.chromium()
    if path is None:
        pytest.skip("chromium is not installed (Debian package chromium; scripts/setup.sh "
                    "installs it)")
    return path


FMNIST_DIR = os.environ.get("FMNIST_DIR", "/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory):
    """A folder of real dtbench runs with something for every section of the report (about
    40 s on a busy 2-core machine): LeNet on synthetic data, batch 16, 8 iterations after 2
    warm-up, on 1, 2 (twice: repeats), 4 ranks (strong scaling) and on 2 ranks with batch 32
    (weak); a 2-stage pipeline with 2 and 4 micro-batches; sync, ssp, async (a parameter
    server) and mixed runs of LeNet on Fashion-MNIST evaluated every 8 iterations with a
    target accuracy of 0.5. Every run samples CPU use and RSS (dtbench's default 10 Hz; the
    Fashion-MNIST runs last long enough for several samples). ``DTBENCH_REPORT_RUNS=DIR``
    reuses a folder an earlier session made (for working on the report)."""
    if os.environ.get("DTBENCH_REPORT_RUNS"):
        return os.environ["DTBENCH_REPORT_RUNS"]
    reason = realruns.skip_reason()
    if reason:
        pytest.skip(reason)
    if not os.path.exists(os.path.join(FMNIST_DIR, "t10k-images-idx3-ubyte.gz")):
        pytest.skip(f"Fashion-MNIST not found in {FMNIST_DIR} (Debian package "
                    f"dataset-fashion-mnist; or set FMNIST_DIR)")
    work = str(tmp_path_factory.mktemp("report"))
    out = os.path.join(work, "results")
    os.makedirs(out)
    short = ["--dataset", "synthetic", "--iters", "8", "--warmup", "2", "--batch", "16"]
    realruns.run(out, 1, "scale/r1.h5", *short)
    realruns.run(out, 2, "scale/r2a.h5", *short, "--seed", "1")
    realruns.run(out, 2, "scale/r2b.h5", *short, "--seed", "2")
    realruns.run(out, 4, "scale/r4.h5", *short)
    realruns.run(out, 2, "scale/r2w.h5", *short[:-1], "32")
    for mb in (2, 4):
        realruns.run(out, 2, f"pipe/m{mb}.h5", *short, "--parallel", "model", "--stages", "2",
                     "--microbatches", str(mb))
    fm = ["--dataset", "fashion-mnist", "--data-dir", FMNIST_DIR, "--batch", "32", "--iters",
          "24", "--warmup", "2", "--eval-every", "8", "--target-acc", "0.5", "--lr", "0.03"]
    realruns.run(out, 2, "strategies/sync.h5", *fm)
    realruns.run(out, 2, "strategies/ssp.h5", *fm, "--exchange", "ssp", "--staleness", "1")
    realruns.run(out, 3, "strategies/async.h5", *fm, "--exchange", "async", "--ps-ranks", "1")
    realruns.run(out, 2, "strategies/mixed.h5", *fm, "--exchange", "mixed",
                 "--ranks-per-node", "1")
    shutil.rmtree(os.path.join(out, "ompi"), ignore_errors=True)
    return out
