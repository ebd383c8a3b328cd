"""``predict`` on real ZeRO runs across emulated nodes (as test_predict_vcluster.py: one network
namespace per node, links limited to 200 Mbit/s with tc tbf): LeNet (1.7 MB of gradients, one
bucket), one rank per node, sync on 1 and 2 nodes (buckets of 25 and 0.05 MiB), zero1 on 2 nodes
(both bucket sizes) and 4 nodes, zero3 on 2 and 4 nodes. The fit (sync's allreduces and the
2-node ZeRO runs' reduce-scatters and all-gathers, one set of alpha-beta parameters) predicts
each collective kind of the zero1 and zero3 runs held out at 4 nodes (predict/shard.py: Open
MPI tuned's rules; the 1.7 MB bucket's reduce-scatter is the linear reduce + scatter on 2 ranks,
recursive halving on 4). Skipped without root, namespaces or a built dtbench.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from dtbench_analysis import cli
from test_predict_vcluster import RATE, _skip_reason, emulated_runs

pytestmark = pytest.mark.long

#: |relative error| allowed on a held-out collective kind and on the iteration. Measured on
#: this 2-core machine under the other jobs' load, four sets of runs: zero1's iteration -3.9,
#: +7.9, -3.7, -12.3 %, all-gather -35, -33, -33, -34 % and reduce-scatter -6, +12, -1, -22 %;
#: zero3's iteration -6.6, -11.9, -10.2, -9.5 %, all-gather -14, -25, -23, -12 % and
#: reduce-scatter -44, -43, -43, -47 %. Each
#: kind is biased low (its max over ranks holds the skew between the ranks' arrivals, which the
#: alpha-beta terms fitted on 2 nodes do not grow), hence a looser bound on the kinds than on
#: the iteration (the bound of predict's own refusal, --max-error 25 %)
KIND_BOUND = 0.6
ITERATION_BOUND = 0.25

RUNS = ("n1:1:1:25 n2:2:1:25 n2s:2:1:0.05 z1a:2:1:25:--exchange+zero1 "
        "z1s:2:1:0.05:--exchange+zero1 z1b:4:1:25:--exchange+zero1 "
        "z3a:2:1:25:--exchange+zero3 z3b:4:1:25:--exchange+zero3")


def _measure(tmp_path, attempt):
    _, files = emulated_runs(tmp_path, attempt, RUNS, 400)
    assert len(files) == 8
    cores = len(os.sched_getaffinity(0))
    cli.main(["predict", *files, "--nodes", "8,16", "--strategies", "zero1,zero3",
              "--shared-cores", str(cores), "--json", "--force"])


def _misses(result):
    checks = {c["strategy"]: c for c in result["validation"]}
    misses = []
    for name in ("zero1", "zero3"):
        c = checks.get(name)
        if c is None or c["nodes"] != 4:
            misses.append(f"{name}: not held out at 4 nodes")
            continue
        errors = c.get("collective_errors") or {}
        print(f"emulated nodes at {RATE}: {name} held out at 4 nodes: " + ", ".join(
            f"{k} {100 * e:+.1f}%" for k, e in errors.items())
            + f"; iteration {100 * c['error']:+.1f}%", file=sys.stderr)
        if sorted(errors) != ["allgather", "reduce_scatter"]:
            misses.append(f"{name}: collectives checked {sorted(errors)}")
        misses += [f"{name} {k}: {100 * e:+.1f}%" for k, e in errors.items()
                   if abs(e) >= KIND_BOUND]
        if abs(c["error"]) >= ITERATION_BOUND:
            misses.append(f"{name} iteration: {100 * c['error']:+.1f}%")
    return misses


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_zero_collectives_held_out_at_four_nodes(tmp_path, capsys):
    # a miss is measured once more from new runs (a burst of load); a second fails
    report = []
    for attempt in (1, 2):
        _measure(tmp_path, attempt)
        out = capsys.readouterr()
        misses = _misses(json.loads(out.out))
        report.append(capsys.readouterr().err)
        if not misses:
            break
    print("".join(report), file=sys.stderr, end="")
    assert not misses, misses
    preds = json.loads(out.out)["predictions"]
    assert all(p["prediction"] is not None for p in preds)
