"""Tests of dtbench-analyze compare: pooling, confidence intervals, significance, staleness,
time to accuracy and the loss/accuracy figure."""

import json

import numpy as np
import pytest

from conftest import KILLED_COMPLETED
from dtbench_analysis import load_run
from dtbench_analysis.cli import main
from dtbench_analysis.compare import compare

approx = pytest.approx


def timed(write, totals_ms, nranks=2, **kw):
    """A lockstep run whose iterations take ``totals_ms`` (one value per measured iteration,
    the same on every rank); warm-up iterations take 1 s."""
    totals_ms = np.asarray(totals_ms, dtype=float)
    total = np.ones((nranks, totals_ms.size + 2))
    total[:, 2:] = totals_ms / 1e3
    return write(nranks=nranks, nnodes=1, slow_rank=None, iters=totals_ms.size,
                 overrides={"total": total}, **kw)


def draws(seed, n=60, scale=1.0):
    return 40.0 * scale * np.random.default_rng(seed).lognormal(0.0, 0.1, n)


def test_identical_distributions_not_significant(write):
    x = draws(1)
    result = compare([load_run(timed(write, x, tag="A")), load_run(timed(write, x, tag="B"))])
    a, b = result["groups"]
    assert (a["label"], b["label"]) == ("tag=A", "tag=B")
    assert a["test"] is None
    assert b["test"]["p"] == approx(1.0) and b["test"]["significant"] is False


def test_same_distribution_different_draws_not_significant(write):
    result = compare([load_run(timed(write, draws(1), tag="A")),
                      load_run(timed(write, draws(2), tag="B"))])
    assert result["groups"][1]["test"]["significant"] is False


def test_clearly_different_significant(write):
    result = compare([load_run(timed(write, draws(1), tag="A")),
                      load_run(timed(write, draws(2, scale=1.5), tag="B"))])
    test = result["groups"][1]["test"]
    assert test["significant"] is True and test["p"] < 1e-10
    assert test["median_ratio"] == approx(1.5, rel=0.1) and test["p_b_greater"] > 0.95


def test_repeats_pooled_with_ci(write):
    """Two repeats (different seeds) of one configuration: 1..10 ms and 11..20 ms pool to
    1..20 ms: median 10.5, 95 % order-statistic interval [6, 15] (n = 20), p95 19.05."""
    r1 = timed(write, np.arange(1, 11), config={"seed": 1})
    r2 = timed(write, np.arange(11, 21), config={"seed": 2})
    other = timed(write, np.arange(1, 11) + 100, tag="slow")
    result = compare([load_run(r1), load_run(r2), load_run(other)])
    g = result["groups"][0]
    assert g["repeats"] == 2 and g["files"] == [r1, r2] and g["iterations"] == 20
    t = g["time_s"]
    assert (t["median"], t["lo"], t["hi"]) == (approx(0.0105), approx(0.006), approx(0.015))
    assert t["p95"] == approx(0.01905)
    assert g["repeat_medians_s"] == [approx(0.0055), approx(0.0155)]
    assert g["throughput"]["median"] == approx(64 / 0.0105)
    assert g["throughput"]["lo"] == approx(64 / 0.015) and g["throughput"]["hi"] == approx(64 / 0.006)
    assert result["groups"][1]["repeats"] == 1
    assert result["alpha_per_test"] == approx(0.05)


def test_bonferroni_and_baseline(write):
    paths = [timed(write, draws(i), tag=t) for i, t in enumerate("ABC")]
    result = compare([load_run(p) for p in paths], baseline=2)
    assert result["alpha_per_test"] == approx(0.025)
    assert [g["test"] is None for g in result["groups"]] == [False, True, False]


def test_exchange_share_and_staleness(write):
    stale = np.zeros((4, 12))
    stale[:, 2:] = np.tile([0, 1, 1, 2, 0, 1, 1, 1, 2, 3], (4, 1))
    stale[:, :2] = 9                                           # warm-up: excluded
    result = compare([load_run(write(overrides={"staleness": stale}))])
    g = result["groups"][0]
    assert g["exchange_share"] == approx(0.1)
    assert g["staleness"]["counts"] == {0: 8, 1: 20, 2: 8, 3: 4}
    assert g["staleness"]["max"] == 3 and g["staleness"]["median"] == 1


def test_time_to_target(write):
    evals = [(4, 0.5, 1.0), (8, 0.82, 0.6), (12, 0.9, 0.4)]
    a = write(evals=evals, attrs={"target_accuracy": 0.8}, tag="A")
    b = write(evals=evals[:1], attrs={"target_accuracy": 0.8}, tag="B")
    result = compare([load_run(a), load_run(b)])
    ta, tb = result["groups"][0]["target"], result["groups"][1]["target"]
    assert ta["reached"] == 1 and ta["iterations_median"] == 8
    assert ta["time_median_s"] == approx(8 * 0.04)
    assert tb["reached"] == 0 and tb["runs"][0]["best_accuracy"] == 0.5
    # --target overrides the attribute
    result = compare([load_run(a)], target=0.85)
    assert result["groups"][0]["target"]["iterations_median"] == 12
    assert compare([load_run(write(evals=evals))])["groups"][0]["target"] is None


def test_async_runs_use_each_ranks_time(write):
    """Ranks not in lockstep: rank 2 at 80 ms does not slow the others; time per iteration is
    each rank's own total, throughput the sum of per-rank rates (16 / 0.04 * 3 + 16 / 0.08)."""
    g = compare([load_run(write(exchange="async"))])["groups"][0]
    assert not g["lockstep"] and g["iterations"] == 40
    assert g["time_s"]["median"] == approx(0.040)
    assert g["throughput"]["median"] == approx(3 * 16 / 0.040 + 16 / 0.080)
    sync = compare([load_run(write())])["groups"][0]
    assert sync["time_s"]["median"] == approx(0.080) and sync["iterations"] == 10


def test_text_marks_incomplete(capsys, write, killed_file):
    complete = write(tag="full")
    assert main(["compare", complete, killed_file]) == 0
    out = capsys.readouterr().out
    assert "compare: 2 runs in 2 configurations" in out
    assert "[1] tag=full (baseline)" in out and "[2] tag=test*" in out
    assert "runs: 1 run (no repeats), 2 iterations; " in out       # measured by all before kill
    assert "* INCOMPLETE " in out and "stopped after 8/12" in out
    assert "warm-up excluded: the first 2 iterations of every run" in out
    assert "vs baseline: median ratio 1.000, Mann-Whitney U p = " in out


def test_json(capsys, write):
    a, b = timed(write, draws(1), tag="A"), timed(write, draws(2, scale=2.0), tag="B")
    assert main(["compare", a, b, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["groups"][1]["test"]["significant"] is True
    assert data["groups"][0]["label"] == "tag=A"


def test_plot(capsys, write, killed_file, tmp_path):
    out_png = tmp_path / "progress.png"
    assert main(["compare", write(tag="x"), killed_file, "--plot", str(out_png),
                 "--target", "0.8"]) == 0
    assert f"wrote {out_png}" in capsys.readouterr().out
    assert out_png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("option,value,words", [
    ("--alpha", "1.5", "--alpha 1.5: accepted: a level in (0, 1)"),
    ("--confidence", "0.2", "--confidence 0.2: accepted"),
    ("--target", "80", "--target 80.0: accepted: an accuracy in (0, 1]"),
    ("--baseline", "3", "--baseline 3: accepted: 1 .. 1"),
    ("--alpha", "abc", "argument --alpha: invalid float value: 'abc'"),
])
def test_bad_options(capsys, complete_file, tmp_path, option, value, words):
    out_png = tmp_path / "never.png"
    assert _status(["compare", complete_file, option, value, "--plot", str(out_png)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and words in err
    assert not out_png.exists()


def _status(argv):
    try:
        return main(argv)
    except SystemExit as e:         # argparse usage errors
        return e.code


def test_killed_counts(write):
    g = compare([load_run(write(killed=True, completed=KILLED_COMPLETED))])["groups"][0]
    assert g["incomplete"] and g["iterations"] == 2


def test_compare_warns_across_models(capsys, write):
    """Comparing runs of two models is allowed when asked for, but said to measure different
    work."""
    a, b = write(config={"model": "lenet"}), write(config={"model": "resnet50"})
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert "WARNING: these configurations differ in model: their times measure different " \
           "work" in out
    assert main(["compare", a, write(config={"model": "lenet", "lr": 0.5})]) == 0
    assert "WARNING" not in capsys.readouterr().out


def test_grad_dtype_side_by_side(capsys, write):
    """fp32 and bf16 gradient exchanges (--grad-dtype) are separate configurations, labelled by
    the wire type, in input order (--baseline picks the reference); each group shows its
    precision, exchange time and payload read from its own file (bf16's bytes_sent written as
    half of fp32's here, the halving dtbench's tests check on real runs), and a file from before
    the options (no precision recorded) pools with an explicit fp32 one."""
    def sent(value):
        return {"bytes_sent": np.full((4, 12), value)}
    b16 = write(config={"grad-dtype": "bf16"}, overrides=sent(500.0))
    old = write(overrides=sent(1000.0))
    f32 = write(config={"grad-dtype": "fp32", "precision": "fp32"}, overrides=sent(1000.0))
    runs = [load_run(p) for p in (b16, old, f32)]
    res = compare(runs)
    labels = [g["label"] for g in res["groups"]]
    assert labels == ["grad-dtype=bf16", "grad-dtype=fp32"], labels
    assert res["groups"][1]["repeats"] == 2          # the old file and the fp32 one pooled
    assert [g["precision"]["grad_dtype"] for g in res["groups"]] == ["bf16", "fp32"]
    assert [g["bytes_sent_median"] for g in res["groups"]] == [500.0, 1000.0]
    assert res["common"]["precision"] == "fp32"
    assert main(["compare", b16, old, f32]) == 0
    out = capsys.readouterr().out
    assert "gradients in bf16 on the wire" in out and "payload 500 B" in out
    assert "gradients in fp32 on the wire" in out and "payload 1000 B" in out


def test_precision_comparison_on_wire_type_alone(write):
    """report's comparisons: runs that differ only in --grad-dtype form a 'precision' comparison
    with the fp32 run as its baseline."""
    from dtbench_analysis import grouping
    b16 = load_run(write(config={"grad-dtype": "bf16"}))
    f32 = load_run(write(config={"grad-dtype": "fp32"}))
    comps = grouping.comparisons([b16, f32])
    prec = [c for c in comps if c["factor"] == "precision"]
    assert len(prec) == 1, comps
    assert prec[0]["runs"] == [f32, b16]
    assert [v["grad-dtype"] for v in prec[0]["values"]] == ["fp32", "bf16"]



def test_param_prefetch_goes_with_the_exchange(write):
    """report's comparisons: --param-prefetch (zero3's option; every file records it) varies with
    the strategy: sync beside zero3 without prefetch is one 'exchange' comparison, and the
    option alone is not a factor."""
    from dtbench_analysis import grouping
    sync = load_run(write(config={"exchange": "sync", "param-prefetch": "on"}))
    off = load_run(write(config={"exchange": "zero3", "param-prefetch": "off"}))
    on = load_run(write(config={"exchange": "zero3", "param-prefetch": "on"}))
    comps = grouping.comparisons([off, sync])
    ex = [c for c in comps if c["factor"] == "exchange"]
    assert len(ex) == 1 and ex[0]["runs"] == [sync, off], comps
    assert grouping.comparisons([on, off]) == []
