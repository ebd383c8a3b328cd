"""Tests of dtbench-analyze stragglers on files with planted stragglers."""

import json

import numpy as np
import pytest

import synthetic as syn
from conftest import KILLED_COMPLETED
from dtbench_analysis import load_run
from dtbench_analysis.cli import main
from dtbench_analysis.stragglers import analyse

approx = pytest.approx
SHAPE = (4, 12)


def lockstep_straggler(write, rank=3, extra_ms=30.0, **kw):
    """As in a real synchronous run: ``rank`` computes extra_ms longer in backward, the other
    ranks wait as long inside the exchange, so every rank's total is the same."""
    back = np.full(SHAPE, syn.PHASE_MS["backward"] / 1e3)
    exch = np.full(SHAPE, syn.PHASE_MS["exchange"] / 1e3)
    back[rank] += extra_ms / 1e3
    exch[np.arange(4) != rank] += extra_ms / 1e3
    total = np.full(SHAPE, (syn.TOTAL_MS + extra_ms) / 1e3)
    total[:, :2] = 5.0                                      # warm-up, excluded
    return write(slow_rank=None, overrides={"backward": back, "exchange": exch, "total": total},
                 **kw)


def test_planted_straggler_found(write):
    a = analyse(load_run(lockstep_straggler(write)))
    top = a["ranks"][0]
    assert top["rank"] == 3 and top["node"] == 1
    assert top["slowest_count"] == 10 and top["slowest_share"] == 1.0
    assert top["median_excess_s"] == approx(0.030)
    assert top["total_excess_s"] == approx(0.300)
    # the three others idle 30 ms each per iteration until rank 3 catches up
    assert top["wait_caused_s"] == approx(10 * 3 * 0.030)
    assert [r["slowest_count"] for r in a["ranks"][1:]] == [0, 0, 0]
    assert a["nodes"][0]["node"] == 1 and a["nodes"][0]["slowest_count"] == 10
    assert a["imbalance"]["total"]["median"] == approx(1.0)
    assert a["imbalance"]["backward"]["median"] == approx(50 / 27.5)


@pytest.mark.parametrize("rank", [0, 2])
def test_straggler_position_does_not_matter(write, rank):
    assert analyse(load_run(lockstep_straggler(write, rank=rank)))["ranks"][0]["rank"] == rank


def test_recorded_wait_is_used(write):
    """With exchange_wait recorded, busy = total - wait and the waiting caused is the others'
    recorded wait."""
    wait = np.zeros(SHAPE)
    wait[[0, 1, 2], :] = 0.025                     # rank 3 is waited for
    back = np.full(SHAPE, 0.020)
    back[3] = 0.045
    total = np.full(SHAPE, 0.070)
    path = write(slow_rank=None, overrides={"backward": back, "total": total,
                                            "exchange_wait": wait})
    a = analyse(load_run(path))
    assert a["busy_definition"] == "total - exchange_wait"
    top = a["ranks"][0]
    assert top["rank"] == 3 and top["median_excess_s"] == approx(0.025)
    assert top["wait_caused_s"] == approx(10 * 3 * 0.025)


def test_no_straggler(write):
    a = analyse(load_run(write(slow_rank=None)))
    assert all(r["slowest_count"] == 0 for r in a["ranks"])
    assert a["iterations_with_slowest"] == 0


def test_killed_run_uses_completed_iterations(write):
    a = analyse(load_run(write(killed=True, completed=KILLED_COMPLETED, unrecorded=(1,))))
    assert a["iterations"] == 2 and not a["complete"]
    assert a["incomplete"].startswith("run did not finish (killed?)")
    # default synthetic slow rank 2 (backward 60 ms): slowest in both iterations measured by all
    assert a["ranks"][0]["rank"] == 2 and a["ranks"][0]["slowest_count"] == 2


def test_injected_delay_reported(write):
    delay = np.zeros(SHAPE)
    delay[3, 2:] = 0.030
    a = analyse(load_run(lockstep_straggler(write)))
    assert a["injected_delay_s"] is None
    b = analyse(load_run(write(slow_rank=3, overrides={"straggler_delay": delay})))
    assert b["injected_delay_s"] == {3: approx(0.300)}


def test_single_rank(capsys, write):
    path = write(nranks=1, nnodes=1, slow_rank=None)
    assert main(["stragglers", path]) == 0
    assert "1 rank: no other rank to be slower than" in capsys.readouterr().out


def test_text_and_json(capsys, write):
    path = lockstep_straggler(write)
    assert main(["stragglers", path]) == 0
    out = capsys.readouterr().out
    assert "slowest: rank 3 (node 1, node1) in 10 of 10 iterations (100%), by 30.000 ms " \
           "(median); the others waited 0.900 s for it" in out
    assert "busy = total - exchange" in out and "warm-up excluded" in out
    table = [line.split() for line in out.splitlines()]
    first_rank_row = next(r for r in table if r[:1] == ["3"] and "10/10" in r)
    assert first_rank_row[1] == "1"
    assert main(["stragglers", path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ranks"][0]["rank"] == 3


def test_incomplete_marked_in_text(capsys, killed_file):
    assert main(["stragglers", killed_file]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("INCOMPLETE: run did not finish (killed?); ranks 0,2-3 stopped "
                               "after 8/12 iterations, rank 1 after 4/12")


def test_bad_top(capsys, complete_file):
    assert main(["stragglers", complete_file, "--top", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("dtbench-analyze: --top 0: accepted:")
