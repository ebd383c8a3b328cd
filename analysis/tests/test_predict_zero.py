"""``dtbench-analyze predict`` on ZeRO runs (``--exchange zero1|zero2|zero3``): the cost terms of
Open MPI's reduce-scatter and all-gather (predict/shard.py), and synthetic files whose
collectives follow known alpha-beta parameters (test_predict.py's TRUE): the fit on sync runs
and small ZeRO runs must predict each collective kind of ZeRO runs held out at 8 and 16 nodes.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from dtbench_analysis import cli
from dtbench_analysis.predict.shard import (allgather_terms, reduce_scatter_terms,
                                            tuned_allgather, tuned_reduce_scatter_block,
                                            zero_terms)

sys.path.insert(0, os.path.dirname(__file__))
import synthetic  # noqa: E402
from test_predict import C0, C1, NOISE, PARAMS, TRUE, make_run  # noqa: E402

GRAD = 4.0 * PARAMS
BUCKET_MB = 1.0
#: relative error allowed on a held-out collective: the synthetic runs have 3 % noise
TOL_KIND = 0.08


def test_tuned_rules_of_open_mpi_4_1():
    # ompi_coll_tuned_reduce_scatter_block_intra_dec_fixed / allgather_intra_dec_fixed (4.1)
    assert tuned_reduce_scatter_block(2, 200000) == "linear"       # >= 128 KiB below 4 ranks
    assert tuned_reduce_scatter_block(2, 5000) == "recursive_halving"
    assert tuned_reduce_scatter_block(4, 100000) == "recursive_halving"
    assert tuned_reduce_scatter_block(8, 1e6) == "linear"
    assert tuned_reduce_scatter_block(16, 8e6) == "butterfly"
    assert tuned_allgather(2, 1e6) == "two_proc"
    assert tuned_allgather(16, 1e6) == "recursive_doubling"
    assert tuned_allgather(40, 1e6) == "ring"
    assert tuned_allgather(40, 2000) == "neighbor"


def test_terms_of_reduce_scatter_and_allgather():
    s = 8000.0
    # 2 nodes of 2, recursive halving: distance 2 (across) with s/2, then distance 1 with s/4
    assert reduce_scatter_terms("recursive_halving", 2, 2, s).tolist() == [1, s / 4, 1, s / 2, 0, 0]
    # the butterfly goes the other way: distance 1 first
    assert reduce_scatter_terms("butterfly", 2, 2, s).tolist() == [1, s / 2, 1, s / 4, 0, 0]
    # linear on 2 ranks (2 nodes): the whole bucket to rank 0, then rank 0 sends back half
    assert reduce_scatter_terms("linear", 2, 1, s).tolist() == [0, 0, 2, 1.5 * s, 0, 0]
    # all-gather by recursive doubling, 2 nodes of 2: one block inside, two blocks across
    assert allgather_terms("recursive_doubling", 2, 2, s).tolist() == [1, s / 4, 1, s / 2, 0, 0]
    # 3 ranks: Open MPI's recursive doubling needs a power of two and runs Bruck's instead
    assert allgather_terms("recursive_doubling", 3, 1, 3000.0).tolist() == \
        allgather_terms("bruck", 3, 1, 3000.0).tolist() == [0, 0, 2, 2000.0, 0, 0]
    assert allgather_terms("ring", 4, 1, s).tolist() == [0, 0, 3, 0.75 * s, 0, 0]
    # hier: inside the node only; the shards' allreduce across nodes carries L times a shard
    inside = zero_terms("allgather", True, "tuned", 4, 2, 2 * s, s)
    assert inside[2:].tolist() == [0, 0, 0, 0] and inside[1] == 2 * s / 2
    across = zero_terms("allreduce", True, "ring", 4, 2, s, s)
    assert across[:2].tolist() == [0, 0] and across[3] == pytest.approx(2 * 2 * 3 / 4 * s / 2)
    assert not zero_terms("allreduce", False, "tuned", 4, 2, s, s).any()


def make_zero_run(path, exchange, nnodes, per_node=1, batch=8, iters=40, seed=0):
    """A ZeRO run generated from TRUE: each kind's time its zero_terms with TRUE's parameters
    (3 % noise), inside the exchange (zero1, zero2) or inside forward and backward (zero3)."""
    rng = np.random.default_rng(seed)
    nranks, warmup = nnodes * per_node, 2
    shape = (nranks, warmup + iters)
    c = (C0 + C1 * batch) * np.exp(rng.normal(0, NOISE, shape))
    passes = 2.0 if exchange == "zero3" else 1.0
    true = np.array(list(TRUE.values()))
    ov = {"data": 0.05 * c, "forward": 0.3 * c, "backward": 0.6 * c, "update": 0.0 * c}
    wait = c.max(axis=0, keepdims=True) - c
    exch = wait.copy()
    inside = np.zeros(shape)
    for kind, scale in (("reduce_scatter", 1.0), ("allgather", passes)):
        t = zero_terms(kind, False, "tuned", nnodes, per_node, GRAD, BUCKET_MB * 2 ** 20, scale)
        secs = (t @ true) * np.exp(rng.normal(0, NOISE, shape[1]))[None, :] * np.ones(shape)
        if exchange == "zero2" and kind == "reduce_scatter":
            secs = secs / 10          # mostly hidden behind backward
        ov[f"exchange_{kind}"] = secs
        ov[f"bytes_{kind}"] = np.full(shape, GRAD * scale)
        if exchange == "zero3":
            inside += secs
        else:
            exch += secs
    ov["exchange_allreduce"] = np.zeros(shape)
    ov.update({"exchange": exch, "exchange_wait": wait, "total": c + exch + inside,
               "bytes_sent": np.full(shape, GRAD * (1 + passes))})
    ov["start"] = np.cumsum(ov["total"], axis=1) - ov["total"]
    return synthetic.write_run(
        str(path), nranks=nranks, nnodes=nnodes, warmup=warmup, iters=iters, slow_rank=None,
        overrides=ov, batch_global=batch * nranks, exchange=exchange,
        flush_every=iters + warmup, config={"bucket-mb": BUCKET_MB, "batch": batch * nranks},
        attrs={"param_count": np.int64(PARAMS), "mpi_library": "Open MPI 4.1.4",
               "batch_per_rank": np.int32(batch), "transport": "mpi"})


def test_zero_collectives_predicted_at_8_and_16_nodes(tmp_path, capsys):
    files = []
    for i, (n, l, mb) in enumerate([(1, 1, 25.0), (1, 2, 25.0), (1, 2, 0.05), (2, 1, 25.0),
                                    (2, 1, 0.05), (4, 1, 25.0), (4, 1, 0.05)]):
        files.append(make_run(tmp_path / f"s{n}x{l}_{mb}.h5", n, l, 8, mb, seed=i))
    for i, (exchange, n) in enumerate([("zero1", 2), ("zero1", 4), ("zero1", 8),
                                       ("zero3", 2), ("zero3", 4), ("zero3", 16)]):
        files.append(make_zero_run(tmp_path / f"{exchange}_{n}.h5", exchange, n, seed=10 + i))
    status = cli.main(["predict", *files, "--nodes", "32", "--strategies", "sync,zero1,zero3",
                       "--json"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0
    checks = {v["strategy"]: v for v in result["validation"]}
    assert checks["zero1"]["nodes"] == 8 and checks["zero3"]["nodes"] == 16
    for name in ("zero1", "zero3"):
        errors = checks[name]["collective_errors"]
        assert sorted(errors) == ["allgather", "reduce_scatter"], errors
        for kind, e in errors.items():
            assert abs(e) < TOL_KIND, (name, kind, e)
        assert abs(checks[name]["error"]) < TOL_KIND, checks[name]
    preds = {p["strategy"]: p["prediction"] for p in result["predictions"]}
    # zero3 gathers the parameters twice: at 32 nodes its collectives cost more than zero1's
    assert preds["zero3"]["comm_model_s"] > preds["zero1"]["comm_model_s"]


def test_zero_strategy_accepted_and_bad_one_refused(tmp_path, capsys):
    path = make_zero_run(tmp_path / "z.h5", "zero2", 2)
    assert cli.main(["predict", path, "--nodes", "4", "--strategies", "zero4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "zero3" in err[0]
    assert cli.main(["predict", path, "--nodes", "4", "--strategies", "zero2", "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)["predictions"][0]["prediction"]
    assert pred is not None and pred["comm_model_s"] > 0
