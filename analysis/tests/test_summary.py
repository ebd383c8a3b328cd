"""Tests of the numbers reported by summary (dtbench_analysis.metrics / summary)."""

import warnings

import numpy as np
import pytest

import synthetic as syn
from dtbench_analysis import load_run, metrics
from dtbench_analysis.commands.summary_cmd import format_text
from dtbench_analysis.summary import summarize

approx = pytest.approx


def test_phase_table_complete(complete_file):
    s = summarize(load_run(complete_file))
    ph = s["phases_ms"]
    # 3 ranks at 40 ms, rank 2 at 80 ms, 10 measured iterations each; warm-up (4001 ms) excluded
    assert ph["total"] == {"n": 40, "median": approx(40), "p5": approx(40), "p95": approx(80),
                           "mean": approx(50)}
    assert ph["backward"]["median"] == approx(20) and ph["backward"]["mean"] == approx(30)
    assert ph["backward"]["p95"] == approx(60)
    for phase in ("data", "forward", "exchange", "update"):
        ms = syn.PHASE_MS[phase]
        assert ph[phase] == {"n": 40, "median": approx(ms), "p5": approx(ms),
                             "p95": approx(ms), "mean": approx(ms)}


def test_percentiles_interpolate(write):
    """Distinct values: data of rank r, measured iteration k (0-based) is 10 r + k + 1 ms, so the
    40 pooled measured values are 1..40 ms."""
    data = np.full((4, 12), 5.0)                                    # warm-up: 5 s, excluded
    data[:, 2:] = (10 * np.arange(4)[:, None] + np.arange(1, 11)[None, :]) / 1e3
    ph = summarize(load_run(write(overrides={"data": data})))["phases_ms"]["data"]
    # linear interpolation at positions q * 39 of the sorted values 1..40
    assert ph["median"] == approx(20.5) and ph["mean"] == approx(20.5)
    assert ph["p5"] == approx(1 + 0.05 * 39) and ph["p95"] == approx(1 + 0.95 * 39)


def test_throughput_uses_critical_path(complete_file):
    tp = summarize(load_run(complete_file))["throughput"]
    assert tp["critical_path_median_ms"] == approx(80)
    assert tp["samples_per_s"] == approx(syn.BATCH_GLOBAL / 0.080)    # 800
    assert tp["iterations"] == 10


def test_throughput_rotating_straggler(write):
    """Each iteration a different rank is slow: every rank's median is 40 ms, but every
    iteration's critical path is 80 ms, so the throughput is 64 / 0.080."""
    total = np.full((4, 12), syn.TOTAL_MS / 1e3)
    for i in range(12):
        total[i % 4, i] = syn.SLOW_TOTAL_MS / 1e3
    run = load_run(write(slow_rank=None, overrides={"total": total}))
    assert metrics.throughput(run)["samples_per_s"] == approx(800)
    assert metrics.per_rank_median(run, "total").tolist() == approx([0.040] * 4)


def test_throughput_from_wall_where_host_time_outside_total(write):
    """Files that record wall (the iteration's host time, total included): where its median is
    over 2% above the critical path of total, samples/s come from it (the host's time outside
    total, a sizeable share of sub-millisecond steps, is part of the rate); within 2% from
    total as before. Lockstep: the max over ranks per iteration; others: per rank."""
    total = np.full((4, 12), 0.040)
    wall = np.full((4, 12), 0.050)
    wall[1] = 0.048                                   # the max over ranks is rank 0's 50 ms
    s = summarize(load_run(write(slow_rank=None, overrides={"total": total, "wall": wall})))
    tp = s["throughput"]
    assert tp["basis"] == "wall" and tp["wall_median_ms"] == approx(50)
    assert tp["samples_per_s"] == approx(syn.BATCH_GLOBAL / 0.050)
    assert tp["critical_path_median_ms"] == approx(40)
    assert "median wall time per iteration 50.000 ms" in format_text(s)
    near = load_run(write(slow_rank=None, overrides={"total": total, "wall": total * 1.019}))
    tp = metrics.throughput(near)
    assert tp["basis"] == "total" and tp["samples_per_s"] == approx(syn.BATCH_GLOBAL / 0.040)
    assert tp["wall_median_s"] == approx(0.040 * 1.019)
    # not in lockstep: each rank's own median, wall only where that rank's is over 2% above
    wall = np.full((4, 12), 0.0404)
    wall[3] = 0.080
    tp = metrics.throughput(load_run(write(slow_rank=None, exchange="async",
                                           overrides={"total": total, "wall": wall})))
    per_rank = syn.BATCH_GLOBAL / 4
    assert tp["basis"] == "wall"
    assert tp["samples_per_s"] == approx(3 * per_rank / 0.040 + per_rank / 0.080)
    # files without wall: total alone, no basis said
    tp = summarize(load_run(write()))["throughput"]
    assert "basis" not in tp and "wall_median_ms" not in tp


def test_exchange_share(complete_file):
    share = summarize(load_run(complete_file))["exchange_share"]
    # per iteration: 4 * 5 ms / (3 * 40 + 80) ms = 0.1 (a mean of per-rank ratios would be 0.109)
    assert share == {"median": approx(0.1), "iterations": 10, "transfer": None, "wait": None}


def test_exchange_wait_transfer_and_efficiency(write):
    """With exchange_wait recorded, the share splits into transfer and wait, and the efficiency
    compares the calibration with the transfer alone (the wait is not the library's work).
    Every rank: exchange 5 ms, of which wait 3 ms on ranks 0-1 and 1 ms on ranks 2-3 (median
    transfer over the 40 cells: 3 ms); the calibration says 2.4 ms alone."""
    wait = np.full((4, 12), 0.003)
    wait[2:, :] = 0.001
    run = load_run(write(overrides={"exchange_wait": wait},
                         attrs={"calibration_iters": np.int32(5),
                                "calibration_exchange_s": 0.0024,
                                "calibration_busbw_factor": 1.5}))
    s = summarize(run)
    # per iteration: sum over ranks of total = 3 * 40 + 80 = 200 ms
    assert s["exchange_share"]["median"] == approx(20 / 200)
    assert s["exchange_share"]["wait"] == approx(8 / 200)
    assert s["exchange_share"]["transfer"] == approx(12 / 200)
    eff = s["exchange_efficiency"]
    assert eff["transfer_ms"] == approx(3.0) and eff["recorded_ms"] == approx(5.0)
    # 0.6 ms over the library is 0.75% of the 80 ms iteration: said, not warned about
    assert eff["efficiency"] == approx(2.4 / 3.0) and not eff["warn"]
    assert eff["recorded_busbw"] == approx(syn.BYTES_SENT / 0.003 * 1.5)
    text = format_text(s)
    assert "transfer 6.0%, arrival wait 4.0%" in text and "efficiency: 0.80" in text


def _calibrated(write, exchange_ms, wait_ms, library_ms, **attrs):
    """Every rank: exchange ``exchange_ms`` of which ``wait_ms`` waiting; the calibration says
    ``library_ms`` alone. The iteration's critical path is the slow rank's 80 ms + the change
    of the exchange from the default 5 ms."""
    over = {"exchange": np.full((4, 12), exchange_ms / 1e3),
            "exchange_wait": np.full((4, 12), wait_ms / 1e3)}
    total = syn.default_iterations(4, 2, 12, 4)["total"] + (exchange_ms - 5.0) / 1e3
    over["total"] = total
    return summarize(load_run(write(overrides=over, attrs={
        "calibration_iters": np.int32(5), "calibration_exchange_s": library_ms / 1e3, **attrs})))


def test_efficiency_warning_only_when_the_overhead_is_material(write):
    """Transfer 1 ms against 0.6 ms alone (efficiency 0.6): 0.4 ms is 0.5% of the 80 ms
    iteration, too little to change a conclusion: a plain line, no warning (the quickstart's
    false alarm). 2 ms over in a 20 ms exchange is 2.1% of a 95 ms iteration: warned when the
    transfer lies above the calibration's slowest repetition, or when the file has no spread;
    not when the repetitions themselves reached the recorded transfer."""
    quiet = _calibrated(write, 5.0, 4.0, 0.6)
    eff = quiet["exchange_efficiency"]
    assert eff["efficiency"] == approx(0.6) and eff["overhead_ms"] == approx(0.4)
    assert eff["overhead_of_iteration"] == approx(0.4 / 80) and not eff["warn"]
    assert eff["overhead_of_exchange"] == approx(0.4 / 5)
    text = format_text(quiet)
    assert "WARNING" not in text
    assert ("  beyond the library's collectives: 0.400 ms per iteration (0.5% of the iteration, "
            "8% of the exchange; under 2% of the iteration: no cause to look for)"
            in text.splitlines())
    loud = _calibrated(write, 20.0, 0.0, 18.0, calibration_exchange_lo_s=0.0175,
                       calibration_exchange_hi_s=0.0195)
    eff = loud["exchange_efficiency"]
    assert eff["efficiency"] == approx(0.9) and eff["warn"] and eff["outside_spread"]
    assert eff["overhead_of_iteration"] == approx(2.0 / 95)
    assert (eff["library_lo_ms"], eff["library_hi_ms"]) == (approx(17.5), approx(19.5))
    warning = [x for x in format_text(loud).splitlines() if "WARNING" in x]
    assert warning == ["  WARNING: the exchange took 2.000 ms per iteration more than the "
                       "library's collectives alone (2.1% of the iteration, 10% of the "
                       "exchange): that much of the exchange is dtbench's own work or its "
                       "conditions, not the library's"]
    assert "its repetitions 17.500-19.500 ms" in format_text(loud)
    spread = _calibrated(write, 20.0, 0.0, 18.0, calibration_exchange_lo_s=0.0175,
                         calibration_exchange_hi_s=0.0205)
    eff = spread["exchange_efficiency"]
    assert not eff["warn"] and eff["outside_spread"] is False
    assert "WARNING" not in format_text(spread)
    assert "within the spread of the calibration's repetitions: no cause to look for" in \
        format_text(spread)
    old = _calibrated(write, 20.0, 0.0, 18.0)  # no spread recorded: the 2% alone
    assert old["exchange_efficiency"]["warn"] and old["exchange_efficiency"]["outside_spread"] is None


def test_calibration_method_shown(write):
    method = "after-backward: 64 MiB streamed, gradient written before each repetition"
    s = _calibrated(write, 5.0, 0.0, 4.9, calibration_method=method)
    assert s["exchange_efficiency"]["method"] == method
    assert f"  calibration: {method}" in format_text(s).splitlines()
    old = _calibrated(write, 5.0, 0.0, 4.9)
    assert old["exchange_efficiency"]["method"] is None
    assert "calibration: not described in this file" in format_text(old)


def test_oversubscribed_warning(write, complete_file):
    """dtbench's record that ranks shared cores becomes a warning; files without it (older, or
    a core per rank) get none."""
    s = summarize(load_run(write(attrs={"oversubscribed": np.int32(1),
                                        "host_ranks_max": np.int32(4),
                                        "host_cores": np.int32(2)})))
    assert s["oversubscribed"] == {"host_ranks_max": 4, "host_cores": 2}
    assert "WARNING: oversubscribed: up to 4 ranks on a host of 2 cores" in format_text(s)
    plain = summarize(load_run(complete_file))
    assert plain["oversubscribed"] is None and "WARNING: oversubscribed" not in format_text(plain)
    s = summarize(load_run(write(attrs={"oversubscribed": np.int32(0)})))
    assert s["oversubscribed"] is None


def test_slowest_rank(complete_file):
    slow = summarize(load_run(complete_file))["slowest_rank"]
    assert slow == {"rank": 2, "host": "node1", "median_total_ms": approx(80),
                    "median_of_ranks_ms": approx(40), "ratio": approx(2.0)}


def test_slowest_rank_other_position(write):
    total = np.full((4, 12), syn.TOTAL_MS / 1e3)
    total[0, :] = 0.050
    total[3, 5:] = 0.100       # rank 3 slow in 7 of 10 measured iterations
    slow = metrics.slowest_rank(load_run(write(slow_rank=None, overrides={"total": total})))
    assert slow["rank"] == 3 and slow["median_total_s"] == approx(0.100)
    assert slow["median_of_ranks_s"] == approx(0.045)   # medians 50, 40, 40, 100 ms


def test_final_eval_and_recorder(complete_file):
    s = summarize(load_run(complete_file))
    assert s["final_eval"] == {"accuracy": 0.9, "iteration": 12, "loss": 0.5}
    # record: 0.1 ms, 5 ms on block writes (3 of the 10 measured iterations): median 0.1 ms
    assert s["recorder"]["record_median_ms"] == approx(syn.RECORD_MS)
    assert s["recorder"]["record_mean_ms"] == approx((7 * syn.RECORD_MS + 3 * syn.RECORD_FLUSH_MS)
                                                     / 10)
    assert s["recorder"]["timer_overhead_s"] == approx(syn.TIMER_OVERHEAD_S)
    assert s["bytes_sent_median"] == approx(syn.BYTES_SENT)


def test_no_eval(write):
    s = summarize(load_run(write(evals=[])))
    assert s["final_eval"] is None
    assert "final evaluation: none recorded" in format_text(s)


def test_killed_run_statistics(killed_file):
    s = summarize(load_run(killed_file))
    assert not s["complete"] and s["incomplete"].startswith("run did not finish (killed?)")
    it = s["iterations"]
    assert (it["measured_per_rank_min"], it["measured_per_rank_max"]) == (2, 6)
    assert it["measured_by_all_ranks"] == 2
    # 20 measured cells: 6 of rank 2 at 80 ms, 14 at 40 ms; rank 1's garbage block ignored
    total = s["phases_ms"]["total"]
    assert total["n"] == 20 and total["median"] == approx(40)
    assert total["mean"] == approx((6 * 80 + 14 * 40) / 20)
    assert total["p95"] == approx(80)
    assert s["throughput"]["samples_per_s"] == approx(800)
    assert s["throughput"]["iterations"] == 2
    assert s["exchange_share"]["median"] == approx(0.1)
    assert s["slowest_rank"]["rank"] == 2
    assert s["final_eval"]["iteration"] == 6          # only the evaluation before the kill
    assert [r["completed"] for r in s["ranks"]] == [8, 4, 8, 8]
    assert [r["status"] for r in s["ranks"]] == [0, 0, 0, 0]


def test_killed_during_warmup(write):
    """Nothing measured yet: no crash, no numpy warnings, values are None."""
    path = write(killed=True, completed=[1, 2, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize(load_run(path))
        text = format_text(s)
    assert s["phases_ms"]["total"] == {"n": 0, "median": None, "p5": None, "p95": None,
                                       "mean": None}
    assert s["throughput"]["samples_per_s"] is None
    assert s["exchange_share"]["median"] is None and s["slowest_rank"] is None
    assert "rank 2 after 0/12" in s["incomplete"]
    assert "throughput: n/a" in text


def test_text_output(complete_file):
    text = format_text(summarize(load_run(complete_file)))
    lines = text.splitlines()
    assert not any(line.startswith("INCOMPLETE") for line in lines)
    assert "model=mlp  dataset=synthetic  exchange=sync  device=cpu  tag=test" in text
    assert "nranks=4  nnodes=2  batch_global=64" in text
    assert "iterations measured: 10 per rank (configured 10); the first 2 warm-up iterations " \
           "are excluded from all statistics" in text
    row = next(line for line in lines if line.split()[:1] == ["total"])
    assert row.split() == ["total", "40.000", "40.000", "80.000", "50.000"]
    assert "throughput: 800.0 samples/s" in text and "max over ranks of total" in text
    assert "exchange share: 10.0%" in text
    assert "slowest rank: 2 on node1, median total 80.000 ms vs 40.000 ms" in text
    assert "(+100.0%)" in text
    assert "accuracy 0.9000 after iteration 12" in text
    assert "median record 0.1000 ms" in text and "timer overhead 25 ns" in text


def test_text_output_incomplete(killed_file):
    lines = format_text(summarize(load_run(killed_file))).splitlines()
    assert lines[1] == ("INCOMPLETE: run did not finish (killed?); ranks 0,2-3 stopped after "
                        "8/12 iterations, rank 1 after 4/12")
    assert any("iterations measured: 2-6 per rank (configured 10)" in line for line in lines)


# ---- per-rank statistics and energy ----------------------------------------------------
def sampled(write, power=None, written=None, **kw):
    """The default run with a sampler: 240 samples per rank every 50 ms from t = 0 (the measured
    iterations span 10.002 .. 10.402 s, rank 2 .. 10.802 s), 100 W unless ``power`` is given."""
    t = np.tile(np.arange(240) * 0.05, (4, 1))
    p = np.full((4, 240), 100.0) if power is None else power(t)
    mem = np.tile(np.arange(240, dtype=float), (4, 1))
    util = np.full((4, 240), 0.5)
    return write(samples={"time": t, "power_w": p, "memory_mib": mem, "utilization": util},
                 samples_written=written, **kw)


def test_per_rank_statistics(complete_file):
    s = summarize(load_run(complete_file))
    rows = {r["rank"]: r for r in s["per_rank"]}
    assert rows[2]["total_median_ms"] == approx(80) and rows[0]["total_median_ms"] == approx(40)
    assert rows[2]["busy_median_ms"] == approx(75)          # total - exchange (5 ms)
    assert rows[1]["exchange_median_ms"] == approx(5) and rows[3]["total_p95_ms"] == approx(40)
    assert rows[2]["node"] == 1 and rows[2]["measured"] == 10
    text = format_text(s)
    assert "per rank (ms, over each rank's measured iterations; busy = total minus exchange)" \
        in text
    row = next(line.split() for line in text.splitlines() if line.split()[:3] == ["2", "1",
                                                                                   "node1"])
    assert row[3:8] == ["10", "80.000", "80.000", "75.000", "5.000"]
    assert s["energy"] is None and "energy:" not in text


def test_per_rank_killed(killed_file):
    rows = summarize(load_run(killed_file))["per_rank"]
    assert [r["measured"] for r in rows] == [6, 2, 6, 6]
    assert rows[1]["total_median_ms"] == approx(40)          # garbage block ignored


def test_energy_per_sample(write):
    s = summarize(load_run(sampled(write)))
    e = s["energy"]
    # 100 W over 0.4 s (ranks 0, 1, 3) and 0.8 s (rank 2) = 200 J; 4 x 10 x 16 samples
    assert e["energy_j"] == approx(200.0) and e["samples"] == 640
    assert e["joules_per_sample"] == approx(200.0 / 640) and e["ranks_sampled"] == 4
    assert e["min_coverage"] == approx(1.0)
    rows = {r["rank"]: r for r in s["per_rank"]}
    assert rows[0]["power_median_w"] == 100.0 and rows[0]["memory_max_mib"] == 239.0
    assert rows[0]["utilization_median"] == 0.5
    text = format_text(s)
    assert "energy: 0.3125 J per sample = 200 J over 640 samples in the measured iterations" \
        in text
    assert "power W" in text and "mem MiB" in text


def test_energy_integrates_varying_power(write):
    """Linear power 50 + 10 t W: the trapezoid rule is exact; rank 0 over [10.002, 10.402] s."""
    run = load_run(sampled(write, power=lambda t: 50.0 + 10.0 * t))
    from dtbench_analysis.energy import rank_energy
    a, b = 10.002, 10.402
    assert rank_energy(run, 0)["energy_j"] == approx(50 * (b - a) + 5 * (b * b - a * a))


def test_energy_partial_and_missing_samples(write):
    """Rank 0's samples stop at 10.2 s (half its span); rank 1 has none in its span."""
    e = summarize(load_run(sampled(write, written=[205, 150, 240, 240])))["energy"]
    assert e["ranks_sampled"] == 3 and e["nranks"] == 4
    assert e["min_coverage"] == approx((10.2 - 10.002) / 0.4)
    assert e["energy_j"] == approx(40 + 80 + 40)             # mean power x span
    assert e["samples"] == 3 * 160
    text = format_text(summarize(load_run(sampled(write, written=[205, 150, 240, 240]))))
    assert "(3 of 4 ranks sampled)" in text and "samples cover only 50%" in text


def test_precision_line(capsys, write):
    """summary names the compute precision and the gradients' wire type; fp32 for a file that
    records neither (written before the options)."""
    from dtbench_analysis.cli import main
    new = write(config={"grad-dtype": "bf16", "precision": "bf16"})
    old = write()
    assert main(["summary", new, old]) == 0
    out = capsys.readouterr().out
    assert "precision=bf16 (compute)  grad_dtype=bf16 (gradients on the wire)" in out
    assert "precision=fp32 (compute)  grad_dtype=fp32 (gradients on the wire)" in out


LAYERS = ("conv1", "pool1", "conv2", "fc1", "relu", "fc2")
KINDS = ("conv", "maxpool", "conv", "fc", "relu", "fc")


def test_top_layers(write):
    """/profile (--profile-layers): per layer the mean over ranks and profiled iterations of the
    cells a rank timed; fc1 is timed by rank 0 only (a pipeline stage), relu by none (last)."""
    fwd = np.zeros((4, 3, 6))
    fwd[:, :, 0], fwd[:, :, 1], fwd[:, :, 2], fwd[:, :, 5] = 1e-3, 0.5e-3, 3e-3, 0.2e-3
    fwd[:, 2, 2] = 6e-3                      # one slow iteration: conv2's mean is 4 ms
    fwd[:, :, 3], fwd[0, :, 3] = np.nan, 2e-3
    fwd[:, :, 4] = np.nan
    bwd = 2 * fwd
    path = syn.add_profile(write(overrides={"profile_cost": np.full((4, 12), 1e-5)}), fwd, bwd,
                           LAYERS, KINDS)
    prof = summarize(load_run(path))["layers"]
    assert prof["iterations"] == 3 and prof["first_iteration"] == 2
    assert prof["profile_cost_ms"] == approx(0.01)
    assert [x["layer"] for x in prof["layers"]] == ["conv2", "fc1", "conv1", "pool1", "fc2",
                                                    "relu"]
    whole = 12 + 6 + 3 + 1.5 + 0.6
    conv2, fc1 = prof["layers"][0], prof["layers"][1]
    assert (conv2["forward_ms"], conv2["backward_ms"], conv2["total_ms"]) == \
        (approx(4), approx(8), approx(12))
    assert conv2["share"] == approx(12 / whole) and fc1["total_ms"] == approx(6)
    assert prof["layers"][-1] == {"layer": "relu", "kind": "relu", "forward_ms": None,
                                  "backward_ms": None, "total_ms": None, "share": None}
    text = format_text(summarize(load_run(path))).splitlines()
    at = text.index(next(x for x in text if x.startswith("  top layers")))
    assert text[at].startswith("  top layers (5 of 6; mean over ranks and the 3 profiled "
                               "iterations from iteration 2; the timer marks cost 0.0100 ms")
    assert text[at + 2].split() == ["conv2", "conv", "4.000", "8.000", "12.000", "51.9%"]
    assert text[at + 6].split()[0] == "fc2" and "relu" not in " ".join(text[at + 1:at + 7])


def _profiled(write):
    """test_top_layers' profile: conv2 12 ms, fc1 6 ms (rank 0 only), conv1 3, pool1 1.5, fc2 0.6,
    relu timed by no rank."""
    fwd = np.zeros((4, 3, 6))
    fwd[:, :, 0], fwd[:, :, 1], fwd[:, :, 2], fwd[:, :, 5] = 1e-3, 0.5e-3, 3e-3, 0.2e-3
    fwd[:, 2, 2] = 6e-3
    fwd[:, :, 3], fwd[0, :, 3] = np.nan, 2e-3
    fwd[:, :, 4] = np.nan
    return syn.add_profile(write(), fwd, 2 * fwd, LAYERS, KINDS)


def test_roofline_columns(write):
    """Newer files: per layer the FLOPs and least bytes of one forward and one backward call (mean
    over the ranks holding it) over its mean time, their shares of the peaks (median over ranks),
    and the bound (FLOPs per byte against the ridge point, here 1e12 / 100e9 = 10 FLOP/B)."""
    amounts = {n: np.full((4, 6), np.nan) for n in (
        "forward_flop", "backward_flop", "forward_bytes", "backward_bytes")}
    for j, (flop, moved) in enumerate(((1e6, 1e6), (1e6, 60e6), (2e9, 10e6), (3e9, 1e6),
                                       (1e3, 1e3), (1e5, 1e6))):
        amounts["forward_flop"][:, j], amounts["backward_flop"][:, j] = flop, flop / 2
        amounts["forward_bytes"][:, j], amounts["backward_bytes"][:, j] = moved, moved / 2
    amounts["forward_flop"][1:, 3] = np.nan       # fc1: held by rank 0 only
    amounts["forward_flop"][0, 2] = 0             # conv2: rank 0 has another count
    path = syn.add_roofline(_profiled(write), amounts, np.array([100e9, 100e9, 100e9, 300e9]),
                            np.full(4, 1e12), ("measured: a triad", "measured: a product"))
    prof = summarize(load_run(path))["layers"]
    assert prof["peaks"] == {"bandwidth_gbps": approx(100), "compute_gflops": approx(1000),
                             "ridge_flop_per_byte": approx(10),
                             "bandwidth_method": "measured: a triad",
                             "compute_method": "measured: a product"}
    by = {x["layer"]: x for x in prof["layers"]}
    conv2 = by["conv2"]["roofline"]  # 12 ms; ranks 1-3: 3e9 FLOP, rank 0 1e9: mean 2.5e9
    assert conv2["gflop"] == approx(2.5) and conv2["gbytes"] == approx(0.015)
    assert conv2["gflops"] == approx(2.5 / 0.012) and conv2["gbps"] == approx(0.015 / 0.012)
    assert conv2["compute_share"] == approx(2.5 / 0.012 / 1000)
    assert conv2["bandwidth_share"] == approx(0.015 / 0.012 / 100)
    assert conv2["intensity"] == approx(2.5e9 / 15e6) and conv2["bound"] == "compute"
    pool1 = by["pool1"]["roofline"]  # 1.5 ms, 90 MB: 60 GB/s
    assert pool1["gbps"] == approx(60) and pool1["bandwidth_share"] == approx(0.6)
    assert pool1["bound"] == "memory"
    fc1 = by["fc1"]["roofline"]  # 6 ms on rank 0: its own amounts
    assert fc1["gflops"] == approx(4.5 / 0.006)
    relu = by["relu"]["roofline"]  # never timed: no rates, its amounts and bound still known
    assert relu["gflops"] is None and relu["gbps"] is None and relu["compute_share"] is None
    assert relu["bound"] == "memory"
    text = format_text(summarize(load_run(path))).splitlines()
    at = text.index(next(x for x in text if x.startswith("  top layers")))
    assert text[at + 1].split()[-5:] == ["GFLOP/s", "GB/s", "%FLOP", "%BW", "bound"]
    assert text[at + 2].split() == ["conv2", "conv", "4.000", "8.000", "12.000", "51.9%",
                                    "208.3", "1.25", "20.8%", "1.2%", "compute"]
    pool = next(x for x in text[at + 2:at + 7] if x.split()[0] == "pool1").split()
    assert pool[-5:] == ["1", "60", "0.1%", "60.0%", "memory"]
    assert text[at + 7] == "    roofline: peak compute 1000 GFLOP/s (measured: a product)"
    assert text[at + 8].startswith("    peak bandwidth 100 GB/s (measured: a triad); ridge "
                                   "point 10 FLOP/B")
    assert "not in this file" not in "\n".join(text)


def test_a_profile_without_roofline(write):
    """An older file: the old columns, and one line saying the roofline is not there."""
    s = summarize(load_run(_profiled(write)))
    assert s["layers"]["peaks"] is None
    assert all("roofline" not in x for x in s["layers"]["layers"])
    text = format_text(s).splitlines()
    at = text.index(next(x for x in text if x.startswith("  top layers")))
    assert text[at + 1].split() == ["layer", "kind", "forward", "ms", "backward", "ms", "total",
                                    "ms", "share"]
    assert text[at + 2].split() == ["conv2", "conv", "4.000", "8.000", "12.000", "51.9%"]
    notes = [x for x in text if "roofline" in x]
    assert notes == ["    roofline: not in this file (written by a dtbench that recorded no "
                     "bytes, FLOPs or peaks in /profile)"] and text[at + 7] == notes[0]


def test_no_top_layers_without_a_profile(complete_file):
    s = summarize(load_run(complete_file))
    assert s["layers"] is None and "top layers" not in format_text(s)


def test_loading_prefetched(write):
    """With prefetch: the loader's median time making a batch, and the measured rank-iterations
    that waited for theirs (warm-up excluded: its waits do not count)."""
    load = np.full((4, 12), 0.030)
    wait = np.zeros((4, 12))
    wait[:, :2] = 0.5                    # warm-up: excluded
    wait[1, 5], wait[2, 7] = 0.004, 0.006
    path = write(overrides={"load": load, "load_wait": wait},
                 attrs={"prefetch": "on", "loader_threads": np.int32(3)})
    s = summarize(load_run(path))
    ld = s["loading"]
    assert ld["prefetch"] and ld["threads"] == 3
    assert ld["load_median_ms"] == approx(30) and ld["measured"] == 40
    assert ld["waited"] == 2 and ld["wait_median_ms"] == approx(5)
    assert "the step waited for its batch in 2 of 40 rank-iterations" in format_text(s)


def test_loading_counts_waits_that_matter(write):
    """A prefetched step that waited 1 ns (the floor a wait is recorded at: the loader finished as
    the step asked) or less than 1% of its iteration did not wait for its loader; one that waited
    more did. The threshold is stated in the line."""
    wait = np.zeros((4, 12))
    wait[:, 2:] = 1e-9                   # every step "waited" at the floor
    wait[0, 4] = 15e-6                   # under 20 us
    wait[1, 6] = 0.0009                  # 0.9 ms of a 100 ms iteration: under 1%
    wait[2, 8] = 0.003                   # 3% of it: counted
    path = write(overrides={"load": np.full((4, 12), 0.030), "load_wait": wait,
                            "total": np.full((4, 12), 0.100)},
                 attrs={"prefetch": "on", "loader_threads": np.int32(1)})
    s = summarize(load_run(path))
    assert s["loading"]["waited"] == 1 and s["loading"]["wait_median_ms"] == approx(3)
    assert "waited for its batch in 1 of 40 rank-iterations" in format_text(s)
    assert "a wait counts above 20 us and 1% of its iteration" in format_text(s)


def test_loading_kept_up_and_unprefetched(write):
    kept = summarize(load_run(write(overrides={"load": np.full((4, 12), 0.01),
                                               "load_wait": np.zeros((4, 12))},
                                    attrs={"prefetch": "on", "loader_threads": np.int32(2)})))
    assert kept["loading"]["waited"] == 0
    assert "it kept up: no step waited for its batch" in format_text(kept)
    plain = summarize(load_run(write(overrides={"load": np.full((4, 12), 0.002),
                                                "load_wait": np.full((4, 12), 0.002)},
                                     attrs={"prefetch": "off", "loader_threads": np.int32(0)})))
    assert "on the driver's thread, inside data: 2.000 ms per batch" in format_text(plain)
    old = summarize(load_run(write()))   # a file without /iterations/load
    assert old["loading"] is None and "data loading" not in format_text(old)


def test_per_rank_tensor_and_bubble(write):
    """A run whose ranks spent time in a tensor group's allreduces (tp_comm) and in a pipeline's
    bubble (pipe_idle) shows each rank's medians beside its exchange; a run without them shows
    neither column."""
    tp = np.zeros((4, 12))
    tp[0, 2:], tp[1, 2:] = 0.010, 0.030
    idle = np.full((4, 12), 0.002)
    s = summarize(load_run(write(overrides={"tp_comm": tp, "pipe_idle": idle})))
    rows = s["per_rank"]
    assert rows[0]["tensor_median_ms"] == approx(10) and rows[1]["tensor_median_ms"] == approx(30)
    assert rows[2]["tensor_median_ms"] == approx(0) and rows[0]["bubble_median_ms"] == approx(2)
    assert "tensor ms" in format_text(s) and "bubble ms" in format_text(s)
    plain = summarize(load_run(write(overrides={"tp_comm": np.zeros((4, 12)),
                                                "pipe_idle": np.zeros((4, 12))})))
    assert "tensor_median_ms" not in plain["per_rank"][0]
    assert "tensor ms" not in format_text(plain)
