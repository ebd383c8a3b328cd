"""``predict`` on real dtbench runs across emulated nodes (tests/vcluster.sh: one network
namespace per node, the nodes' links limited with tc tbf, traffic only on the namespaces' private
10.77.0.0/24 addresses), so the communication terms are measured over a real network path.

LeNet (431k parameters, 1.7 MB of gradients) on synthetic data, batch 8 per rank, each node's
link limited to RATE (200 Mbit/s = 25 MB/s): sync with one rank per node on 1 node, 2 nodes
(buckets of 25, 0.05 and 0.02 MiB: the two small ones send eager messages in different numbers,
so alpha and beta separate) and 4 nodes; sync with --transport hier
and two ranks per node (inside the node and across it) on 1, 2 (both bucket sizes) and 4 nodes.
The model is fitted on 1 and 2 nodes and predicts 4 nodes, for each transport; the held-out
error of the median iteration time must stay under HELDOUT_BOUND (predict --shared-cores: the
nodes share this machine's cores). Without --overlap dtbench
exchanges with blocking MPI_Allreduce, i.e. Open MPI tuned's rules: Rabenseifner for the 1.7 MB
bucket (messages of 0.86 and 0.43 MB across, rendezvous), ring for the 0.05 MiB ones (26 kB,
eager); over these TCP links the rendezvous messages move at about half the link rate, which
the model's beta_inter_rndv takes. At this rate the
exchange dominates (~140 ms on 2 nodes against ~5 ms of compute), so the busy 2-core machine's
compute noise hardly matters. Skipped without root, namespaces or a built dtbench.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import realruns
from dtbench_analysis import cli

#: a long check (predict on runs across emulated nodes), run by scripts/test.sh --long (what CI runs): the quick
#: suite checks the same command on files written by the tests
pytestmark = pytest.mark.long

RATE = "200mbit"
RATE_BYTES = 25e6
HELDOUT_BOUND = 0.25
REPO = realruns.REPO


def _skip_reason():
    why = realruns.skip_reason()
    if why:
        return why
    if os.geteuid() != 0:
        return "needs root for network namespaces (tests/vcluster.sh)"
    for tool in ("ip", "nsenter", "unshare", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup.sh installs it)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"network namespaces unavailable: {probe.stderr.strip()}"
    return None


SCRIPT = os.path.join(os.path.dirname(__file__), "vcluster_runs.sh")
#: NAME:NODES:RANKS_PER_NODE:BUCKET_MB[:ARGS, + for spaces] (vcluster_runs.sh)
RUNS = ("n1:1:1:25 n2:2:1:25 n2s:2:1:0.05 n2t:2:1:0.02 n4:4:1:25 h1:1:2:25:--transport+hier "
        "h2:2:2:25:--transport+hier h2s:2:2:0.05:--transport+hier h4:4:2:25:--transport+hier")


def emulated_runs(tmp_path, attempt: int, runs: str, timeout: int):
    """Runs ``runs`` (vcluster_runs.sh's RUNS) on the emulated nodes into a fresh folder: the
    folder and its files."""
    out = tmp_path / f"runs{attempt}"
    out.mkdir()
    env = realruns.environment(str(tmp_path))
    env.update({"TESTS_SRCDIR": os.path.join(REPO, "tests"), "DTBENCH": realruns.dtbench_path(),
                "MPIRUN": os.environ.get("MPIRUN", "mpirun"), "OUT": str(out), "RATE": RATE,
                "ITERS": "16", "RUNS": runs})
    proc = subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, sorted(str(p) for p in out.glob("*.h5"))


def _measure_and_predict(tmp_path, attempt):
    """Runs the emulated cluster's nine runs into a fresh folder and predicts from them: the
    predict command's exit status and the files."""
    out, files = emulated_runs(tmp_path, attempt, RUNS, 240)
    if os.environ.get("DTBENCH_PREDICT_KEEP"):  # keep the runs (e.g. for analysis/README.md's example)
        shutil.copytree(out, os.environ["DTBENCH_PREDICT_KEEP"], dirs_exist_ok=True)
    assert len(files) == 9
    # the emulated nodes share this machine's cores: at 4 nodes of 2 ranks, 8 ranks compute on
    # them at once (without --shared-cores hier's compute was predicted 14-18% low quietly, and
    # 26% low twice running under CI's load)
    cores = len(os.sched_getaffinity(0))
    return cli.main(["predict", *files, "--nodes", "8,64,1024", "--strategies", "sync,hier",
                     "--shared-cores", str(cores), "--json"]), files


def _misses(result):
    """What of the measured cluster's prediction misses its bound: one line each."""
    misses = []
    checks = {c["strategy"]: c for c in result["validation"]}
    if sorted(checks) != ["hier", "sync"]:
        return [f"validated strategies {sorted(checks)}, not hier and sync"]
    mpi = result["comm"]["mpi"]["params"]
    for name, c in checks.items():
        print(f"emulated nodes at {RATE}: {name} held out at 4 nodes: measured "
              f"{1e3 * c['measured_s']:.1f} ms, predicted "
              f"{1e3 * c['predicted']['iteration_s']['value']:.1f} ms, error "
              f"{100 * c['error']:+.1f}% (transfer {100 * c['transfer_error']:+.1f}%, "
              f"collectives alone {100 * (c.get('calibration_error') or 0):+.1f}%)", file=sys.stderr)
        if c["nodes"] != 4 or c["fitted_on"] != 8:
            misses.append(f"{name}: held out {c['nodes']} nodes, fitted on {c['fitted_on']}")
        if abs(c["error"]) >= HELDOUT_BOUND:
            misses.append(f"{name}: held-out error {100 * c['error']:+.1f}%")
    # a fit may leave a link's cost at 0 (a burst of load in the runs): an infinite rate, a miss
    eager, rndv = (1.0 / b if b > 0 else float("inf")
                   for b in (mpi["beta_inter"], mpi["beta_inter_rndv"]))
    print(f"mpi transport: beta_inter {mpi['beta_inter']:.3g} s/B "
          f"({1e-6 * eager:.1f} MB/s), beta_inter_rndv "
          f"{1e-6 * rndv:.1f} MB/s, alpha_inter {mpi['alpha_inter']:.3g} s",
          file=sys.stderr)
    # the fitted link of the flat allreduce's eager messages is the tbf rate (the ring of the
    # 0.05 MiB buckets moves each bucket once per link each way); TCP/IP framing and the token
    # bucket's bursts give or take 35 %; rendezvous messages are no faster than the link
    if not 0.65 * RATE_BYTES < eager < 1.35 * RATE_BYTES:
        misses.append(f"eager link {1e-6 * eager:.1f} MB/s, not "
                      f"{1e-6 * RATE_BYTES:.0f} MB/s +-35% ({mpi})")
    if not rndv < 1.35 * RATE_BYTES:
        misses.append(f"rendezvous link {1e-6 * rndv:.1f} MB/s, faster than the link ({mpi})")
    return misses


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_held_out_four_nodes_two_transports(tmp_path, capsys):
    # Eight ranks on two cores, beside another pytest worker, time a shared machine: alpha and
    # beta across nodes come from two runs whose times differ by a few ms of message costs, so a
    # burst of load during one of them moves them far. A miss of any bound (predict's held-out
    # refusal, exit 1, or the fitted link) is measured once more from new runs; a second fails.
    report = []  # what each attempt printed (the next one's capture would swallow it)
    for attempt in (1, 2):
        status, _ = _measure_and_predict(tmp_path, attempt)
        out = capsys.readouterr()
        misses = ([f"predict refused (exit {status}): {out.err.strip()}"] if status != 0
                  else _misses(json.loads(out.out)))
        if misses:
            print(f"measurement {attempt} missed: " + "; ".join(misses), file=sys.stderr)
        report.append(capsys.readouterr().err)
        if not misses:
            break
    print("".join(report), file=sys.stderr, end="")
    assert not misses, misses
    result = json.loads(out.out)
    for strategy in ("sync", "hier"):
        preds = [p for p in result["predictions"] if p["strategy"] == strategy]
        assert [p["nodes"] for p in preds] == [8, 64, 1024]
        assert all(p["prediction"]["comm_fit"] == ("mpi" if strategy == "sync" else "hier")
                   for p in preds)
        times = [p["prediction"]["iteration_s"]["value"] for p in preds]
        assert times == sorted(times)
