"""check_slurm.py - runs under Slurm and dtbench-campaign on the throw-away cluster
(tests/vcluster.sh): `dtbench-campaign status --json` rows, their result files and the batch
template's state files (slurm/dtbench.sbatch), for test_slurm.sh, test_slurm_peer.sh and
test_slurm_records.sh. Exit 0 when the check holds, 1 with one line.

  campaign STATUS --runs N --received NODE=BYTES... [--avx512]
                        N runs completed under Slurm on n1 and n2, 2 ranks each, their job,
                        submit line and launcher recorded; each node's veth carried at least
                        the sync runs' gradients
  stopped STATUS --reason R [--least N] [--setup-stop]
                        the one run stopped early for R, its file closed with every completed
                        iteration within 2 s of the signal
  local STATUS --received NODE=BYTES...
                        `dtbench-campaign local` runs on n1 and n2 without Slurm
  unfinished STATUS     not a check: the runs whose newest attempt did not complete, one a line
  node-failed FILE NODE the campaign's status read from FILE and its state file alone (Slurm
                        forgotten) says NODE failed
  stop-ranks FILE SIGNAL PID...
                        not a check: prints the fewest iterations any rank of FILE has, then stops
                        every PID at once, for `kept`
  kept FILE --flushed F --lost L --nodes N [--detail RE]
                        closed as peer_lost, L lost, N failed; every rank kept more than F
                        iterations, within one of the others, as many as it completed
"""
import json
import os
import re
import signal
import sys

import numpy as np

from checkutil import command, die, expect, h5, main, parser

JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jobs")


def rows_of(path):
    """The rows of `dtbench-campaign status --json`."""
    with open(path) as f:
        return json.load(f)


def state_of(result):
    """The key=value lines of a result file's state file (a later line wins)."""
    with open(result[:-3] + ".state") as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


def ended(path, at):
    """How the file says its run ended."""
    return (f"{path}: finished={at.get('finished')} stop_reason={at.get('stop_reason')!r} "
            f"stop_detail={at.get('stop_detail')!r}")


def gradient_bytes(at):
    """The bytes a node receives in a sync run at the least: the other node's half of the sum,
    the whole gradient once an iteration (any allreduce across a 2-way cut moves >= N values each
    way); nothing is asked of other exchanges."""
    if at["exchange"] != "sync":
        return 0
    return int(at["iters_total"]) * int(at["param_count"]) * 4


def received(a, need):
    """Every --received NODE=BYTES at least need; says what they were."""
    got = []
    for spec in a.received:
        node, _, n = spec.partition("=")
        expect(int(n) >= need,
               f"{node}: its veth received {n} bytes, the exchange needs >= {need}")
        got.append(f"{node} {int(n) / 1e6:.1f}")
    return f"veths received {' / '.join(got)} MB >= {need / 1e6:.1f} MB of sync gradients"


def campaign(a):
    """N rows, every run completed: its file finished as completed by every rank; 2 nodes, 4
    ranks, hosts n1 n1 n2 n2 (nodes 0 0 1 1), slurm_nodelist n[1-2], slurm_job_id the state
    file's job_id; a submit line with sbatch, --array= for a first attempt (.a1.), the launcher
    the run's name says (_srun: srun, else mpirun) as DTBENCH_LAUNCHER= and in the launcher
    attribute. --avx512 (the CPU has AVX-512): every rank's BLAS core none of prescott, nehalem,
    core2. Each --received at least 4 bytes a parameter an iteration of the sync runs."""
    rows = rows_of(a.status)
    expect(len(rows) == a.runs, f"{a.status}: {len(rows)} runs, expected {a.runs}: {rows}")
    need = 0
    for r in rows:
        expect(r["state"] == "completed", f"{r['run']}: {r}")
        with h5(r["file"]) as f:
            at = f.attrs
            expect(at["finished"] == 1 and at["stop_reason"] == "completed", ended(r["file"], at))
            hosts = [h.decode() for h in f["ranks/host"][:]]
            expect(at["nnodes"] == 2 and at["nranks"] == 4,
                   f"{r['file']}: nnodes {at['nnodes']}, nranks {at['nranks']}")
            expect(sorted(hosts) == ["n1", "n1", "n2", "n2"], f"{r['file']}: hosts {hosts}")
            nodes = sorted(int(n) for n in f["ranks/node"][:])
            expect(nodes == [0, 0, 1, 1], f"{r['file']}: /ranks/node {nodes}")
            expect(at["slurm_nodelist"] == "n[1-2]",
                   f"{r['file']}: slurm_nodelist {at['slurm_nodelist']}")
            state = state_of(r["file"])
            expect(at["slurm_job_id"] and at["slurm_job_id"] == state["job_id"],
                   f"{r['file']}: slurm_job_id {at['slurm_job_id']!r}, state file {state}")
            # first attempts went in job arrays; a --retry resubmits a single run as its own job
            line = at["submit_line"]
            expect("sbatch" in line, f"{r['file']}: submit_line {line!r}")
            expect("--array=" in line or ".a1." not in r["file"],
                   f"{r['file']}: a first attempt not in an array: {line!r}")
            launcher = "srun" if "_srun" in r["run"] else "mpirun"
            expect(f"DTBENCH_LAUNCHER={launcher}" in line,
                   f"{r['file']}: submit_line {line!r} without DTBENCH_LAUNCHER={launcher}")
            expect(at["launcher"] == launcher, f"{r['run']}: launcher {at['launcher']}")
            expect((f["ranks/completed"][:] == at["iters_total"]).all(),
                   f"{r['file']}: completed {f['ranks/completed'][:]} of {at['iters_total']}")
            # every rank loads OpenBLAS with a core that fits the CPU, whatever the launcher
            # (kernels/cpu/cpu_blas.c: nothing exported): on an AVX-512 host never the
            # generic kernels
            for kc in f["ranks/kernel_choices"][:]:
                core = kc.decode().splitlines()[1].split(": ")[1]
                expect(not a.avx512 or core.lower() not in ("prescott", "nehalem", "core2"),
                       f"{r['file']}: {launcher}: a generic core on an AVX-512 CPU: "
                       f"{kc.decode()!r}")
            need += gradient_bytes(at)
    print(f"ok: {a.runs} runs completed on n1+n2 with 2 ranks each; {received(a, need)}")


def stopped(a):
    """The one row stopped early, its detail starting with R. Without a file (--setup-stop only:
    a stop in start-up may come before anything is recorded) the detail says "during set-up".
    Otherwise the file finished as signal, every rank's status 2, all stopped after the same
    iteration, at least N (default 0) and short of iters_total, every completed iteration written
    and nothing beyond; the state file's stop_seconds under 2 s (60 s after no iteration: a stop
    in start-up waits for the ranks to start)."""
    rows = rows_of(a.status)
    expect(len(rows) == 1, f"{a.status}: {len(rows)} runs, expected 1: {rows}")
    (r,) = rows
    expect(r["state"] == "stopped early" and r["detail"].startswith(a.reason),
           f"{a.status}: not stopped early for {a.reason!r}: {r}")
    if not r["file"]:
        expect(a.setup_stop and "during set-up" in r["detail"],
               f"{a.status}: no file, not stopped during set-up: {r}")
        print(f"ok: {a.status}: stopped early ({r['detail']})")
        return
    with h5(r["file"]) as f:
        at = f.attrs
        expect(at["finished"] == 1 and at["stop_reason"] == "signal", ended(r["file"], at))
        expect((f["ranks/status"][:] == 2).all(), f"{r['file']}: status {f['ranks/status'][:]}")
        done = f["ranks/completed"][:]
        expect(len(set(done)) == 1 and a.least <= done[0] < at["iters_total"],
               f"{r['file']}: completed {done}, expected at least {a.least}, all alike")
        total = f["iterations/total"][:]
        expect(not np.isnan(total[:, :done[0]]).any() and np.isnan(total[:, done[0]:]).all(),
               f"{r['file']}: the completed iterations are not those written")
    secs = float(state_of(r["file"])["stop_seconds"])
    limit = 2.0 if done[0] > 0 else 60.0
    expect(secs < limit, f"{a.status}: {secs} s from the signal to the closed file "
                         f"(limit {limit} s)")
    print(f"ok: {a.status}: stopped early ({r['detail']}) after {done[0]} iterations, "
          f"signal -> file closed and launcher exited in {secs:.2f} s")


def local(a):
    """Some rows, every run completed with job "local": 2 nodes, hosts n1 n1 n2 n2, a submit line
    starting "mpirun -np 4 --host n1:2,n2:2", launcher mpirun, no slurm_job_id. Each --received
    at least 4 bytes a parameter an iteration of the sync runs."""
    rows = rows_of(a.status)
    expect(rows and all(r["state"] == "completed" and r["job"] == "local" for r in rows),
           f"{a.status}: not every run completed locally: {rows}")
    need = 0
    for r in rows:
        with h5(r["file"]) as f:
            at = f.attrs
            hosts = sorted(h.decode() for h in f["ranks/host"][:])
            expect(hosts == ["n1", "n1", "n2", "n2"] and at["nnodes"] == 2,
                   f"{r['file']}: hosts {hosts}, nnodes {at['nnodes']}")
            expect(at["submit_line"].startswith("mpirun -np 4 --host n1:2,n2:2"),
                   f"{r['file']}: submit_line {at['submit_line']!r}")
            expect(at["launcher"] == "mpirun", f"{r['file']}: launcher {at['launcher']}")
            expect(at["slurm_job_id"] == "", f"{r['file']}: slurm_job_id {at['slurm_job_id']!r}")
            need += gradient_bytes(at)
    print(f"ok: local: {len(rows)} runs on n1+n2 without Slurm; {received(a, need)}")


def unfinished(a):
    """Prints the runs of STATUS whose newest attempt did not complete, one name a line."""
    for r in rows_of(a.status):
        if r["state"] != "completed":
            print(r["run"])


def node_failed(a):
    """dtbench_campaign.status resolves FILE and its state file, without Slurm, to the state
    "node failed" with a detail starting "node failed: NODE, "."""
    sys.path.insert(0, JOBS)
    from dtbench_campaign import status

    base = a.file[:-3]
    state, detail = status.resolve(status.read_result(base + ".h5"),
                                   status.read_state_file(base + ".state"), "")
    expect(state == "node failed" and detail.startswith(f"node failed: {a.node}, "),
           f"{a.file}: status without Slurm {state!r}: {detail!r}")
    print(f"ok: without Slurm: {state}: {detail}")


def stop_ranks(a):
    """Reads the fewest iterations any rank of FILE has written (/ranks/completed), then SIGSTOPs
    every PID and, unless SIGNAL is STOP, sends each SIGNAL; prints that count (the last flush
    seen: one after the read lands within milliseconds of a block)."""
    with h5(a.file) as f:
        flushed = int(f["ranks/completed"][:].min())
    for p in a.pids:
        os.kill(p, signal.SIGSTOP)
    if a.signal != "STOP":
        for p in a.pids:
            os.kill(p, getattr(signal, "SIG" + a.signal))
    print(flushed)


def kept(a):
    """Finished as peer_lost; then every problem of these, in one line: stop_detail matching RE
    (given), lost_ranks L and failed_nodes N, every rank's /ranks/completed (kept) above F and
    within one of every other, /ranks/iterations_done (completed) present and equal to it, no NaN
    among each rank's kept iterations."""
    wrong = []  # every check, so that one failure does not hide another
    with h5(a.file) as f:
        at = f.attrs
        expect(at["finished"] == 1 and at["stop_reason"] == "peer_lost", ended(a.file, at))
        detail = at["stop_detail"]
        if a.detail is not None and not re.match(a.detail, detail):
            wrong.append(f"stop_detail {detail!r} does not match {a.detail!r}")
        if (at["lost_ranks"], at["failed_nodes"]) != (a.lost, a.nodes):
            wrong.append(f"lost_ranks={at['lost_ranks']!r} failed_nodes={at['failed_nodes']!r}, "
                         f"expected {a.lost!r} and {a.nodes!r}")
        kept = f["ranks/completed"][:]
        done = f["ranks/iterations_done"][:] if "ranks/iterations_done" in f else None
        total = f["iterations/total"][:]
    if not (kept > a.flushed).all():
        wrong.append(f"iterations after the last flush seen ({a.flushed}) lost: kept {kept}")
    if kept.max() - kept.min() > 1:
        wrong.append(f"lock-step ranks kept counts more than one iteration apart: {kept}")
    if done is None or (done != kept).any():
        wrong.append(f"/ranks/iterations_done {done} is not /ranks/completed {kept}")
    for r, n in enumerate(kept):
        if np.isnan(total[r, :n]).any():
            wrong.append(f"rank {r}: NaN among its {n} kept iterations")
    if wrong:
        die(f"{a.file}: " + "; ".join(wrong))
    print(f"ok: {a.file}: {detail}; last flush seen {a.flushed}; kept and completed "
          f"{list(map(int, kept))}")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    need = {"required": True}
    got = ("--received", {"action": "append", "default": [], "metavar": "NODE=BYTES",
                          "help": "the bytes NODE's veth received during the runs"})
    command(sub, campaign, ("status",), ("--runs", {"type": int, **need}), got,
            ("--avx512", {"action": "store_true", "help": "the CPU has AVX-512"}))
    command(sub, stopped, ("status",), ("--reason", need),
            ("--least", {"type": int, "default": 0}),
            ("--setup-stop", {"action": "store_true", "help": "may have stopped during set-up"}))
    command(sub, local, ("status",), got)
    command(sub, unfinished, ("status",))
    command(sub, node_failed, ("file",), ("node",))
    command(sub, stop_ranks, ("file",), ("signal",), ("pids", {"type": int, "nargs": "+"}))
    command(sub, kept, ("file",), ("--flushed", {"type": int, **need}), ("--lost", need),
            ("--nodes", need), ("--detail", {"metavar": "RE"}))
    main(ap)
