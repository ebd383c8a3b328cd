"""``dtbench-analyze predict`` on synthetic runs with known parameters.

The files follow docs/hdf5-layout.md (written by tests/synthetic.py) and are generated from a
known model: compute c(b) = C0 + C1*b per rank with lognormal iteration noise and fixed rank
factors, the sync exchange = waiting for the slowest rank + a binomial-tree allreduce per bucket
(Open MPI's in-place MPI_Iallreduce) with alpha-beta inside and across nodes, with 3 % noise.
The fit must recover the parameters within the tolerances below and predict a held-out scale.
"""

from __future__ import annotations

import json
import os
import re
import sys

import numpy as np
import pytest

from dtbench_analysis import cli, predict
from dtbench_analysis.predict.coll import SHARED, tuned_allreduce
from dtbench_analysis.predict.fit import collective_terms, exchange_terms, fit_comm, observe
from dtbench_analysis.runfile import load_run

sys.path.insert(0, os.path.dirname(__file__))
import synthetic  # noqa: E402

TRUE = {"alpha_intra": 20e-6, "beta_intra": 0.5e-9, "alpha_inter": 80e-6, "beta_inter": 10e-9,
        "beta_inter_rndv": 20e-9, "beta_inter_shared": 0.0}
C0, C1 = 1e-3, 0.5e-3            # s, s per sample
PARAMS = 2_500_000               # 10 MB of float gradients
NOISE = 0.03                     # lognormal sd of iteration and transfer factors
# Tolerances (relative): the fit sees medians of 40 iterations with 3 % noise.
TOL_BETA, TOL_ALPHA, TOL_COMPUTE, TOL_HELDOUT = 0.05, 0.15, 0.05, 0.08


def make_run(path, nnodes, per_node, batch, bucket_mb=25.0, iters=40, seed=0, slow_p=0.0,
             inflate=1.0, exchange="sync", calibrate=False, surcharge=0.0):
    """A sync run generated from TRUE, C0, C1. ``slow_p``: each rank-iteration is a hiccup
    (compute x 3) with this probability. ``inflate`` multiplies the transfer (a model that no
    longer holds). ``calibrate``: root attributes of the collectives timed alone (the exchange
    calibration), the model's transfer time exactly. ``surcharge``: seconds per byte across nodes
    added where the ranks outnumber 2 shared cores (beta_inter_shared)."""
    rng = np.random.default_rng(seed)
    nranks, warmup = nnodes * per_node, 2
    total_iters = warmup + iters
    shape = (nranks, total_iters)
    rank_f = np.exp(rng.normal(0, 0.02, (nranks, 1)))
    c = (C0 + C1 * batch) * rank_f * np.exp(rng.normal(0, NOISE, shape))
    c = np.where(rng.random(shape) < slow_p, 3 * c, c)
    # no --overlap in the file: dtbench's sync ran blocking MPI_Allreduce (tuned's rules)
    terms = exchange_terms("sync", "tuned", nnodes, per_node, 4.0 * PARAMS, bucket_mb * 2 ** 20,
                           cores=2)
    t_x = terms @ np.array(list(TRUE.values())) + surcharge * terms[SHARED]
    transfer = inflate * t_x * np.exp(rng.normal(0, NOISE, total_iters))
    wait = c.max(axis=0, keepdims=True) - c if nranks > 1 else np.zeros(shape)
    exch = (wait + transfer[None, :]) if nranks > 1 else np.zeros(shape)
    ov = {"data": 0.05 * c, "forward": 0.3 * c, "backward": 0.6 * c, "update": 0.05 * c,
          "exchange": exch, "exchange_wait": wait, "total": c + exch,
          "bytes_sent": np.full(shape, 4.0 * PARAMS if nranks > 1 else 0.0)}
    ov["start"] = np.cumsum(ov["total"], axis=1) - ov["total"]
    return synthetic.write_run(
        str(path), nranks=nranks, nnodes=nnodes, warmup=warmup, iters=iters, slow_rank=None,
        overrides=ov, batch_global=batch * nranks, exchange=exchange, flush_every=iters + warmup,
        config={"bucket-mb": bucket_mb, "batch": batch * nranks},
        attrs={"param_count": np.int64(PARAMS), "mpi_library": "Open MPI 4.1.4",
               "batch_per_rank": np.int32(batch), "transport": "mpi",
               **({"calibration_iters": np.int32(5), "calibration_exchange_s": float(t_x)}
                  if calibrate and nranks > 1 else {})})


def measured_set(tmp_path, top_nodes=8, inflate_top=1.0):
    """1x1 (b 8, 16), 1x2, 2x2 and 4x2 (buckets of 25 and 0.05 MiB), top_nodes x 2 (held out).
    Across nodes the 10 MB buckets send rendezvous-size messages, the 0.05 MiB ones eager ones
    (Open MPI's Rabenseifner, 13 and 6.5 kB across), whose latency the two small-bucket scales
    separate from their bandwidth."""
    spec = [(1, 1, 8, 25.0), (1, 1, 16, 25.0), (1, 2, 8, 25.0), (1, 2, 8, 0.05),
            (2, 2, 8, 25.0), (2, 2, 8, 0.05), (4, 2, 8, 25.0), (4, 2, 8, 0.05),
            (top_nodes, 2, 8, 25.0)]
    out = []
    for i, (n, l, b, mb) in enumerate(spec):
        path = tmp_path / f"r{n}x{l}_b{b}_m{mb}.h5"
        make_run(path, n, l, b, mb, seed=i, inflate=inflate_top if n == top_nodes else 1.0)
        out.append(str(path))
    return out


def test_terms_of_the_algorithms():
    # p = 8 on 2 nodes of 4: ring crosses nodes every step; tree (libnbc): reduce 2 intra + 1
    # inter rounds; broadcast: node 0's 4 ranks each send to node 1 at once (4 link-times),
    # rank 0 to ranks 1, 2 then rank 1 to 3 inside (3); rabenseifner (Open MPI: distance 1
    # first): halves of s/2 and s/4 inside the node, s/8 across, each way and back.
    s = 1000.0
    assert collective_terms("ring", 2, 4, s).tolist() == [0, 0, 14, 2 * 7 / 8 * s, 0, 0]
    assert collective_terms("tree", 2, 4, s).tolist() == [4, 5 * s, 2, 5 * s, 0, 0]
    # 4 nodes of 1: reduce 2 rounds, broadcast 0 -> {1, 2} at once (2), then 1 -> 3 (1)
    assert collective_terms("tree", 4, 1, s).tolist() == [0, 0, 4, 5 * s, 0, 0]
    assert collective_terms("tree", 4, 1, s, pipelined=True).tolist() == [0, 0, 4, 2 * s, 0, 0]
    assert collective_terms("rabenseifner", 2, 4, s).tolist() == [4, 1.5 * s, 2, 0.25 * s, 0, 0]
    # 3 ranks: the third hands its whole vector over and gets the result back, then 1 exchange
    assert collective_terms("recursive_doubling", 3, 1, s).tolist() == [0, 0, 3, 3 * s, 0, 0]
    assert not collective_terms("tree", 1, 1, s).any()
    # messages across nodes above the 64 KiB eager limit count in beta_inter_rndv
    big = 1e6
    assert collective_terms("tree", 4, 1, big).tolist() == [0, 0, 4, 0, 5 * big, 0]
    assert collective_terms("ring", 4, 1, big).tolist() == [0, 0, 6, 0, 1.5 * big, 0]
    assert collective_terms("ring", 32, 1, big)[3] == pytest.approx(2 * 31 / 32 * big)


def test_tuned_rules_of_open_mpi_4_1():
    # ompi_coll_tuned_allreduce_intra_dec_fixed, commutative table (v4.1.4), spot checks
    assert tuned_allreduce(2, 1724320) == "rabenseifner"     # >= 256 KiB below 4 ranks
    assert tuned_allreduce(2, 52428) == "ring"               # 16 KiB..64 KiB: ring
    assert tuned_allreduce(2, 100000) == "ring"              # segmented ring, segment size 0
    assert tuned_allreduce(2, 1000) == "recursive_doubling"
    assert tuned_allreduce(4, 1000) == "recursive_doubling"  # 4..7 ranks below 8 KiB
    assert tuned_allreduce(4, 8192) == "rabenseifner"
    assert tuned_allreduce(40, 100) == "ring"               # segmented ring below 128 B
    assert tuned_allreduce(64, 100) == "recursive_doubling"
    assert tuned_allreduce(100, 200000) == "recursive_doubling"
    assert tuned_allreduce(2048, 1000) == "tree"             # nonoverlapping: reduce + bcast
    assert tuned_allreduce(8192, 20000) == "recursive_doubling"
    # blocking buckets run one after the other: two halves cost the sum of their allreduces
    half = exchange_terms("sync", "tuned", 2, 1, 2e6, 1e6)
    assert half.tolist() == (2 * collective_terms("rabenseifner", 2, 1, 1e6)).tolist()


def test_fit_recovers_known_parameters(tmp_path):
    runs = [load_run(p) for p in measured_set(tmp_path)]
    obs = [observe(r) for r in runs]
    comm = fit_comm(obs, "auto")
    got = dict(zip(TRUE, comm.params))
    print({k: (got[k], TRUE[k]) for k in TRUE})
    assert comm.algorithm == "auto (tuned)"
    for k in ("beta_intra", "beta_inter", "beta_inter_rndv"):
        assert got[k] == pytest.approx(TRUE[k], rel=TOL_BETA), k
    for k in ("alpha_intra", "alpha_inter"):
        assert got[k] == pytest.approx(TRUE[k], rel=TOL_ALPHA), k
    result = predict.build(runs, [16, 1024], ["sync"])
    c = result["compute"]["mlp/synthetic/cpu"]
    assert c["c1_s_per_sample"] == pytest.approx(C1, rel=TOL_COMPUTE)
    assert c["c0_s"] == pytest.approx(C0, rel=4 * TOL_COMPUTE)


def test_held_out_scale_predicted(tmp_path, capsys):
    files = measured_set(tmp_path)
    assert cli.main(["predict", *files, "--nodes", "16,64,1024", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (check,) = result["validation"]
    assert check["nodes"] == 8 and check["fitted_on"] == 8
    assert abs(check["error"]) < TOL_HELDOUT, check
    # the true model at 16 nodes: the median of the max of 32 rank compute times + the transfer
    rows = {(p["strategy"], p["nodes"]): p for p in result["predictions"]}
    sync16 = rows[("sync", 16)]["prediction"]["iteration_s"]
    rng = np.random.default_rng(5)
    c = (C0 + C1 * 8) * np.exp(rng.normal(0, 0.02, (1, 32))) * np.exp(
        rng.normal(0, NOISE, (4000, 32)))
    t_x = exchange_terms("sync", "tuned", 16, 2, 4.0 * PARAMS, 25 * 2 ** 20) @ np.array(
        list(TRUE.values()))
    truth = float(np.median(c.max(axis=1))) + t_x
    assert sync16["value"] == pytest.approx(truth, rel=0.05)
    assert sync16["lo"] <= truth <= sync16["hi"]
    # more nodes: a longer tree, so a lower efficiency; mixed stays inside the node
    assert rows[("sync", 1024)]["efficiency"] < rows[("sync", 16)]["efficiency"]
    assert rows[("mixed", 1024)]["efficiency"] > rows[("sync", 1024)]["efficiency"]


def test_refuses_when_held_out_error_is_large(tmp_path, capsys):
    files = measured_set(tmp_path, inflate_top=2.0)
    assert cli.main(["predict", *files, "--nodes", "64"]) == 1
    cap = capsys.readouterr()
    assert "refusing to extrapolate" in cap.err and len(cap.err.strip().splitlines()) == 1
    assert not re.search(r"^ +sync +64 ", cap.out, re.M), cap.out  # no prediction row
    assert cli.main(["predict", *files, "--nodes", "64", "--force", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["worst_error"] > 0.25
    it = result["predictions"][0]["prediction"]["iteration_s"]
    assert it["hi"] / it["value"] > 1 + result["worst_error"] - 1e-9


def test_simulation_shows_stragglers(tmp_path, capsys):
    p = 0.01
    files = []
    for i, (n, l, mb) in enumerate([(1, 1, 25.0), (1, 2, 25.0), (2, 2, 25.0), (2, 2, 0.5),
                                    (4, 2, 25.0)]):
        path = tmp_path / f"s{i}.h5"
        make_run(path, n, l, 8, mb, iters=200, seed=10 + i, slow_p=p)
        files.append(str(path))
    result = predict.build([load_run(f) for f in files], [8, 512], ["sync", "async", "mixed"],
                           draws=16)
    rows = {(r["strategy"], r["nodes"]): r["prediction"] for r in result["predictions"]}
    want = 1 - (1 - p) ** 16
    assert rows[("sync", 8)]["p_iteration_has_slow_rank"] == pytest.approx(want, abs=0.05)
    assert rows[("sync", 512)]["p_iteration_has_slow_rank"] > 0.99
    assert rows[("sync", 512)]["straggler_slowdown"] > 2.5
    assert rows[("mixed", 512)]["straggler_slowdown"] < 1.3
    assert rows[("async", 512)]["straggler_slowdown"] == 1.0
    assert cli.main(["predict", *files, "--nodes", "8,512", "--simulate"]) == 0
    assert "P(some rank slow in an iteration)" in capsys.readouterr().out


@pytest.mark.long  # a slower case: the long checks (CI)
def test_plot_png_and_svg(tmp_path, capsys):
    files = measured_set(tmp_path)
    for name in ("p.png", "p.svg"):
        out = tmp_path / name
        assert cli.main(["predict", *files, "--nodes", "16,32", "--plot", str(out)]) == 0
        data = out.read_bytes()
        assert data.startswith(b"\x89PNG") if name.endswith("png") else b"<svg" in data[:2000]


@pytest.mark.parametrize("args,pattern", [
    (["--nodes", "0,4"], "--nodes 0,4: accepted"),
    (["--nodes", "x"], "--nodes x: accepted"),
    (["--nodes", "4", "--strategies", "sync,foo"], "--strategies sync,foo: accepted"),
    (["--nodes", "4", "--max-error", "0"], "--max-error 0.0: accepted"),
    (["--nodes", "4", "--ranks-per-node", "0"], "--ranks-per-node 0: accepted"),
    (["--nodes", "4", "--plot", "x.pdf"], "--plot x.pdf: accepted"),
    (["--nodes", "4", "--algorithm", "star"], "argument --algorithm"),
])
def test_bad_options(tmp_path, capsys, args, pattern):
    (f,) = [str(make_run(tmp_path / "a.h5", 1, 1, 8))]
    os.chdir(tmp_path)
    with pytest.raises(SystemExit) if "--algorithm" in args else _nothing():
        status = cli.main(["predict", f, *args])
        assert status == 2
    err = capsys.readouterr().err
    assert pattern in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.pdf").exists()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_one_scale_is_not_validated(tmp_path, capsys):
    f = make_run(tmp_path / "a.h5", 1, 2, 8)
    assert cli.main(["predict", f, "--nodes", "2,4"]) == 0
    out = capsys.readouterr().out
    assert "NOT validated" in out
    assert "inter-node terms unknown" in out


def _fits(beta_inter, compute_s, iter_factors=(1.0,)):
    from dtbench_analysis.predict.fit import CommFit, ComputeFit
    params = np.array([0.0, 1e-10, 0.0, beta_inter, beta_inter, 0.0])
    comm = CommFit("tree", params, np.zeros((6, 6)), {k: True for k in TRUE}, [], 4, 0.0)
    comp = ComputeFit(("m", "d", "cpu"), 0.0, compute_s / 8, (0, 0), [8], np.ones(1),
                      np.array(iter_factors, dtype=float), 0.0)
    return comm, comp


@pytest.mark.parametrize("beta,expect", [
    # the allreduce (5 link-times of 1 MB on 4 nodes) is shorter than compute (20 ms):
    # ssp hides it, sync pays it
    (1e-9, {"sync": 0.020 + 0.005, "ssp": 0.020}),
    # the allreduce (50 ms) is longer than compute: ssp runs at the pace of the network
    (1e-8, {"sync": 0.020 + 0.050, "ssp": 0.050}),
])
def test_replay_of_the_strategies(beta, expect):
    from dtbench_analysis.predict.sim import Scenario, simulate
    comm, comp = _fits(beta, 0.020)
    rng = np.random.default_rng(0)
    for strategy, want in expect.items():
        s = Scenario(strategy, 4, 1, 8, 1e6, 25 * 2 ** 20, "tree", staleness=2)
        got = simulate(s, comm, comp, np.ones(1), rng, draws=2, iters=40)["iteration_s"][0]
        assert got == pytest.approx(want, rel=0.02), strategy


def test_replay_async_and_mixed():
    from dtbench_analysis.predict.sim import Scenario, simulate
    comm, comp = _fits(1e-8, 0.020)
    rng = np.random.default_rng(0)
    # async, 1 server, 3 workers: each worker 20 ms + push and pull of 1 MB (20 ms); the server
    # link carries 3 x 2 MB = 60 ms per round, which bounds every worker's iteration
    s = Scenario("async", 4, 1, 8, 1e6, 25 * 2 ** 20, "tree", ps_ranks=1)
    assert simulate(s, comm, comp, np.ones(1), rng, draws=2)["iteration_s"][0] == \
        pytest.approx(0.060, rel=0.02)
    # mixed with one rank per node: nothing to wait for, compute only, at any scale
    s = Scenario("mixed", 512, 1, 8, 1e6, 25 * 2 ** 20, "tree", sync_period=2)
    assert simulate(s, comm, comp, np.ones(1), rng, draws=2)["iteration_s"][0] == \
        pytest.approx(0.020, rel=0.01)


def test_ssp_runs_fit_through_their_calibration(tmp_path):
    # ssp's exchange time is what the allreduce of S iterations ago still blocked, not the
    # transfer: only the calibration (the collectives alone) tells the link
    spec = [(1, 2, 25.0), (1, 2, 0.05), (2, 2, 25.0), (2, 2, 0.05), (4, 2, 25.0)]
    for calibrate in (False, True):
        files = [make_run(tmp_path / f"c{calibrate}{i}.h5", n, l, 8, mb, seed=i,
                          exchange="ssp", calibrate=calibrate)
                 for i, (n, l, mb) in enumerate(spec)]
        comm = fit_comm([observe(load_run(f)) for f in files], "auto")
        if not calibrate:
            assert comm.rows == 0 and not comm.level_known("inter")
            continue
        assert comm.rows == len(spec)
        assert comm.params[3] == pytest.approx(TRUE["beta_inter"], rel=0.01)
        assert comm.params[1] == pytest.approx(TRUE["beta_intra"], rel=0.01)


def test_what_the_runs_cannot_separate_is_said(tmp_path, capsys):
    # one 2-node run of 2 ranks each: one equation for the time split between the node's memory
    # and its link; beta_inter takes it all, beta_intra is not determined and mixed (which only
    # exchanges inside the node) is not predicted
    f = make_run(tmp_path / "a.h5", 2, 2, 8)
    comm = fit_comm([observe(load_run(f))], "auto")
    assert comm.rows == 1 and comm.level_known("inter") and not comm.level_known("intra")
    assert any("beta_intra not separable" in n for n in comm.notes)
    assert cli.main(["predict", f, "--nodes", "8", "--strategies", "sync,mixed"]) == 0
    out = capsys.readouterr().out
    assert "intra-node terms unknown" in out and "NOT validated" in out


def test_strong_scaling_splits_the_global_batch(tmp_path):
    runs = [load_run(p) for p in measured_set(tmp_path)]
    result = predict.build(runs, [16, 64], ["sync", "mixed"], batch_global=4096, draws=8)
    assert [p["batch_per_rank"] for p in result["predictions"]] == [128, 32, 128, 32]
    assert result["base"]["ranks"] == 1 and result["base"]["batch_per_rank"] == 4096
    # compute shrinks with the batch share: at 64 nodes mixed spends less per iteration
    mixed = [p["prediction"]["iteration_s"]["value"] for p in result["predictions"]
             if p["strategy"] == "mixed"]
    assert mixed[1] < mixed[0]


def test_pipelines_are_left_out(tmp_path, capsys):
    files = measured_set(tmp_path)
    pipe = synthetic.write_run(str(tmp_path / "pipe.h5"), attrs={"parallel": "hybrid"})
    assert cli.main(["predict", *files, pipe, "--nodes", "16", "--strategies", "sync"]) == 0
    out = capsys.readouterr().out
    assert f"left out: {pipe}: parallel=hybrid" in out
    assert cli.main(["predict", pipe, "--nodes", "16"]) == 2
    err = capsys.readouterr().err
    assert "data parallelism only" in err and len(err.strip().splitlines()) == 1


def test_surcharge_beyond_the_shared_cores(tmp_path):
    # nodes emulated on 2 cores: once the ranks outnumber them, every byte across nodes costs
    # SURCHARGE more. Fitted with --shared-cores 2 on 1-4 nodes (2 ranks alone on the cores, 4
    # not) it is found, and the 16-node exchange predicted; without, it is predicted low.
    surcharge = 15e-9
    files = [make_run(tmp_path / f"s{n}_{mb}.h5", n, 1, 8, mb, seed=n, surcharge=surcharge)
             for n, mb in ((1, 25.0), (2, 25.0), (2, 0.05), (4, 25.0), (4, 0.05))]
    runs = [load_run(f) for f in files]
    comm = fit_comm([observe(r, 2) for r in runs], "auto")
    assert comm.params[SHARED] == pytest.approx(surcharge, rel=0.25)
    terms = exchange_terms("sync", "tuned", 16, 1, 4.0 * PARAMS, 25 * 2 ** 20, cores=2)
    truth = terms @ np.array(list(TRUE.values())) + surcharge * terms[SHARED]
    shared = predict.build(runs, [16], ["sync"], shared_cores=2, draws=8, per_node=1)
    assert shared["predictions"][0]["prediction"]["comm_model_s"] == pytest.approx(truth, rel=0.08)
    alone = predict.build(runs, [16], ["sync"], draws=8, per_node=1)
    assert alone["predictions"][0]["prediction"]["comm_model_s"] < 0.85 * truth
    assert not any(c["params"]["beta_inter_shared"] for c in alone["comm"].values())
