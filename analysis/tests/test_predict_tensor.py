"""``dtbench-analyze predict`` on the tensor group's allreduces (``--parallel tensor``,
predict/tensor.py): their terms, and a synthetic tensor run whose ``tp_comm`` follows
test_predict.py's known parameters, checked against the model fitted on sync runs.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from dtbench_analysis import cli
from dtbench_analysis.predict.coll import collective_terms
from dtbench_analysis.predict.tensor import tensor_terms

sys.path.insert(0, os.path.dirname(__file__))
import synthetic  # noqa: E402
from test_predict import NOISE, TRUE, make_run  # noqa: E402

#: the synthetic tp_comm has 3 % noise; the intra-node parameters are fitted within 5-15 %
TOL = 0.1


def test_terms_of_the_group():
    s = 1e6
    # a group of 4 inside a node: 3 allreduces of Open MPI tuned's choice (Rabenseifner)
    assert tensor_terms(4, 4, 3, s).tolist() == \
        (3 * collective_terms("rabenseifner", 1, 4, s)).tolist()
    # a group of 4 across 2 nodes of 2 (--tp-across-nodes): half its steps cross the link
    across = tensor_terms(4, 2, 1, s)
    assert across[2] > 0 and across[0] > 0
    assert not tensor_terms(1, 4, 3, s).any()


def make_tensor_run(path, batch, tp=2, calls=3, per_sample=40960.0, iters=30, seed=0):
    """A run of one tensor group of ``tp`` ranks on one node: ``calls`` allreduces of
    batch x per_sample bytes per iteration, their time from TRUE."""
    rng = np.random.default_rng(seed)
    shape = (tp, 2 + iters)
    t = tensor_terms(tp, tp, calls, batch * per_sample) @ np.array(list(TRUE.values()))
    comm = t * np.exp(rng.normal(0, NOISE, shape))
    c = np.full(shape, 5e-3)
    ov = {"forward": c + comm / 2, "backward": c + comm / 2, "exchange": np.zeros(shape),
          "update": 0 * c, "data": 0 * c, "tp_comm": comm,
          "tp_bytes": np.full(shape, calls * batch * per_sample),
          "tp_calls": np.full(shape, float(calls))}
    ov["total"] = ov["forward"] + ov["backward"]
    ov["start"] = np.cumsum(ov["total"], axis=1) - ov["total"]
    return synthetic.write_run(
        str(path), nranks=tp, nnodes=1, warmup=2, iters=iters, slow_rank=None, overrides=ov,
        batch_global=batch, flush_every=iters + 2, config={"batch": batch},
        attrs={"parallel": "tensor", "tp": np.int32(tp), "replicas": np.int32(1),
               "mpi_library": "Open MPI 4.1.4"})


def test_tensor_group_time_checked_against_the_fit(tmp_path, capsys):
    files = [make_run(tmp_path / f"s{l}_{mb}.h5", 1, l, 8, mb, seed=i)
             for i, (l, mb) in enumerate([(1, 25.0), (2, 25.0), (2, 0.05), (4, 25.0)])]
    files += [make_tensor_run(tmp_path / f"tp_b{b}.h5", b, seed=b) for b in (16, 64)]
    assert cli.main(["predict", *files, "--nodes", "2", "--strategies", "sync",
                     "--json"]) in (0, 1)
    result = json.loads(capsys.readouterr().out)
    rows = result["tensor"]
    assert sorted(r["batch"] for r in rows) == [16, 64]
    for r in rows:
        assert r["calls"] == 3 and r["bytes_per_call"] == pytest.approx(r["batch"] * 40960.0)
        assert abs(r["error"]) < TOL, r
    # the runs stay out of the iteration fit, said so
    assert len(result["left_out"]) == 2
