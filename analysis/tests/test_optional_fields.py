"""Files carrying the optional content newer dtbench versions write (staleness, waits, injected
delays, power samples, target accuracy, async exchange with a parameter-server rank that records
no iterations): every command uses it when present and none trips over it."""

import json

import h5py
import numpy as np
import pytest

from dtbench_analysis import load_run, tables
from dtbench_analysis.cli import main

SHAPE = (4, 12)


@pytest.fixture
def async_file(write):
    """4 ranks, exchange async: rank 0 a parameter server (NaN iterations), ranks 1-3 workers;
    rank 3 gets an injected delay of 40 ms per iteration."""
    nan_row = np.full(12, np.nan)
    over = {}
    for name, value in (("staleness", 1.0), ("version", 0.0), ("bytes_recv", 4e6),
                        ("exchange_wait", 0.001), ("straggler_delay", 0.0),
                        ("exchange_hidden", 0.0)):
        over[name] = np.full(SHAPE, value)
    over["version"] = np.tile(np.arange(12, dtype=float), (4, 1))
    over["staleness"][2, 2:] = 3
    over["straggler_delay"][3, :] = 0.040
    total = np.full(SHAPE, 0.040)
    total[3] = 0.080
    over["total"] = total
    for name in list(over) + ["data", "forward", "backward", "exchange", "update", "loss",
                              "start"]:
        if name in over:
            over[name][0] = nan_row
    t = np.tile(np.arange(300) * 0.1, (4, 1))
    samples = {"time": t, "power_w": np.full((4, 300), 50.0),
               "memory_mib": np.full((4, 300), 1000.0), "utilization": np.full((4, 300), 0.9)}
    return write(exchange="async", slow_rank=None, overrides=over, samples=samples,
                 attrs={"target_accuracy": 0.6, "parallel": "data", "stages": np.int32(1)})


def test_every_command_runs(capsys, async_file, complete_file, tmp_path):
    for argv in (["summary"], ["stragglers"], ["scaling"], ["compare"],
                 ["timeline", "-o", str(tmp_path / "t.png")],
                 ["export", "-o", str(tmp_path / "t.parquet"), "--format", "parquet"],
                 ["report", "-o", str(tmp_path / "r.html")]):
        assert main([argv[0], async_file, complete_file] + argv[1:]) == 0, argv
    capsys.readouterr()


def test_async_summary_and_stragglers(capsys, async_file):
    assert main(["summary", async_file, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    # workers 1, 2 at 40 ms and 3 at 80 ms, 16 samples each: 400 + 400 + 200 samples/s
    assert s["throughput"]["samples_per_s"] == pytest.approx(1000.0)
    assert s["throughput"]["method"].startswith("sum over ranks")
    rows = {r["rank"]: r for r in s["per_rank"]}
    assert rows[0]["total_median_ms"] is None and rows[2]["staleness_median"] == 3
    assert rows[1]["wait_median_ms"] == pytest.approx(1.0)
    assert rows[1]["busy_median_ms"] == pytest.approx(39.0)      # total - exchange_wait
    assert rows[1]["power_median_w"] == 50.0
    assert s["energy"]["ranks_sampled"] == 3                      # the server has no span
    assert main(["stragglers", async_file, "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert a["ranks"][0]["rank"] == 3 and a["ranks"][0]["slowest_count"] == 10
    assert a["injected_delay_s"] == {"3": pytest.approx(0.4)}
    assert a["busy_definition"] == "total - exchange_wait"


def test_async_compare(capsys, async_file):
    assert main(["compare", async_file]) == 0
    out = capsys.readouterr().out
    assert "staleness: median 1, p95 3, max 3 (counts 1: 20, 3: 10)" in out
    assert ("target accuracy 0.6: reached in 1 of 1 runs; median 11 iterations (warm-up "
            "included), 0.440 s since start") in out       # evaluations at 6 (0.5), 11 (0.7)
    assert "parallel=data" in out and "stages=1" in out
    assert "throughput: 1000.0 samples/s" in out


def test_configuration_includes_new_factors(async_file):
    from dtbench_analysis.configs import configuration
    c = configuration(load_run(async_file))
    assert c["exchange"] == "async" and c["parallel"] == "data" and c["stages"] == "1"
    assert c["target_accuracy"] == "0.6" and "seed" not in c and "iters" not in c


@pytest.mark.long  # a slower case: the long checks (CI)
def test_run_killed_during_warmup_everywhere(capsys, write, complete_file, tmp_path):
    """Nothing measured: every command still answers (n/a), without numpy warnings."""
    early = write(killed=True, completed=[1, 2, 0, 1], tag="early")
    for argv in (["summary"], ["stragglers"], ["scaling"], ["compare"],
                 ["timeline", "--iters", "0:3", "-o", str(tmp_path / "t.png")],
                 ["export", "-o", str(tmp_path / "t.csv")],
                 ["report", "-o", str(tmp_path / "r.html")]):
        assert main([argv[0], complete_file, early] + argv[1:]) == 0, argv
    out = capsys.readouterr().out
    assert "rank 2 after 0/12" in out


def test_sharded_exchange_summary(capsys, write):
    """A zero2 run (sharded exchange) records its collectives per iteration and its memory per
    rank: summary reports their medians and the largest rank's memory, compare's runs table the
    memory per rank beside the time; a sync run without those collectives reports none."""
    over = {"exchange_reduce_scatter": np.full(SHAPE, 0.003),
            "exchange_allgather": np.full(SHAPE, 0.002),
            "bytes_reduce_scatter": np.full(SHAPE, 4e6), "bytes_allgather": np.full(SHAPE, 4e6)}
    zero = write(exchange="zero2", overrides=over)
    sync = write(exchange="sync", overrides={k: np.zeros(SHAPE) for k in over})
    for path, optimizer in ((zero, [2e6, 2e6, 2e6, 2e6 + 8]), (sync, [8e6] * 4)):
        with h5py.File(path, "a") as f:
            f["ranks/memory_params"] = np.full(4, 4e6)
            f["ranks/memory_grads"] = np.full(4, 4e6)
            f["ranks/memory_optimizer"] = np.array(optimizer)
    assert main(["summary", zero, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["collectives"]["reduce_scatter_ms"] == pytest.approx(3.0)
    assert s["collectives"]["allgather_bytes"] == pytest.approx(4e6)
    assert s["memory"]["optimizer_mib"] == pytest.approx((2e6 + 8) / 2**20)
    assert s["memory"]["total_mib"] == pytest.approx((10e6 + 8) / 2**20)
    assert main(["summary", sync, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["collectives"] is None and s["memory"]["optimizer_mib"] == pytest.approx(8e6 / 2**20)
    assert main(["summary", zero]) == 0
    out = capsys.readouterr().out
    assert "collectives: reduce-scatter 3" in out and "memory per rank:" in out
    table = tables.runs_table([load_run(zero), load_run(sync)])
    assert list(table["memory/rank MiB"]) == pytest.approx([(10e6 + 8) / 2**20, 16e6 / 2**20])
    assert load_run(zero).lockstep
