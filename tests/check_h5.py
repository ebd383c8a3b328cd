"""check_h5.py - assertions on dtbench result files, for the shell tests.

Usage: check_h5.py CHECK FILE... [options]; the check runs on each FILE; exit status 0 when it
holds for all, 1 with a message otherwise. Checks follow docs/hdf5-layout.md:
  finished   a cleanly finished run (--ranks, --iters): complete, its phases adding up to no
             more than each total, and on one rank an exchange of at most 1% of the total
             (beyond one iteration in ten, at least one: a preempted host thread)
  phases     a finished run of any shape: its phases add up to no more than each total, and on one
             rank the exchange is at most 1% of the total (as finished); prints each phase's share
  killed     a run killed mid-way: readable, unfinished, every recorded block intact
  accuracy   the final test accuracy >= --min-accuracy
  pipeline   a finished --parallel model/hybrid run (--stages)
  same-loss  every stage records the loss of the one-process run --ref at every iteration, within
             --tol (hybrid runs: the mean over the replicas)
  stopped    a run stopped early: finished, stop_reason --reason, every rank's status 2, every
             completed iteration written, fewer than iters_total; --lockstep: every worker
             stopped after the same iteration and nothing is written beyond it; --min-completed,
             --max-completed bound the count; --same-params: one final model on every rank;
             --max-latency: the stop took under that many seconds (stop_latency_s)
"""
import argparse
import json

import numpy as np

from checkutil import die, h5

PHASES = ["data", "forward", "backward", "exchange", "update", "total"]
ROOT_ATTRS = ["schema_version", "dtbench_version", "git_commit", "command_line", "config_json",
              "mpi_library", "hdf5_version", "backend_info", "start_time", "slurm_job_id",
              "nranks", "nnodes", "iters", "warmup", "iters_total", "batch_global",
              "batch_per_rank", "model", "dataset", "exchange", "device", "param_count",
              "flush_every", "timer_overhead_s", "clock_sync_rounds", "tokens_per_sample",
              "train_flops_per_sample", "peak_flops", "peak_flops_source"]


def check_phases(f, p):
    """Every iteration's phases add up to no more than its total, which its wall time (where
    recorded) holds; alone (p == 1) there is nothing
    to exchange, so the exchange is at most 1% of the measured iterations' total."""
    it = f["iterations"]
    parts = sum(it[k][:] for k in PHASES[:-1])
    over = parts - it["total"][:] * (1 + 1e-9) - 1e-9
    if (over > 0).any():
        r, i = np.unravel_index(np.argmax(over), over.shape)
        die(f"phases add up to more than the total: rank {r} iteration {i} by "
            f"{parts[r, i] - it['total'][r, i]:.3g} s ({int((over > 0).sum())} iterations)")
    if "wall" in it:  # the iteration's host time holds its total (a device's clock: 0.1%)
        short = it["total"][:] * (1 - 1e-3) - 1e-6 - it["wall"][:]
        if (short > 0).any():
            r, i = np.unravel_index(np.argmax(short), short.shape)
            die(f"wall shorter than total: rank {r} iteration {i}, {it['wall'][r, i]:.6f} s "
                f"against {it['total'][r, i]:.6f} s ({int((short > 0).sum())} iterations)")
    if p == 1:
        w = int(f.attrs["warmup"])
        ex, tot = it["exchange"][0, w:], it["total"][0, w:]
        # A cause that puts other time into the exchange does so in (nearly) every iteration; a
        # host thread preempted inside the phase once (a loaded machine, a CPU-timed run) is
        # what happened there, and is allowed in one iteration in ten (at least one).
        high = ex > 0.01 * tot
        if tot.size and ex.sum() > 0.01 * tot.sum() and high.sum() > max(1, tot.size // 10):
            die(f"one rank, nothing sent, yet the exchange is {100 * ex.sum() / tot.sum():.2f}% "
                f"of the measured iterations' total (at most 1%; over 1% in {int(high.sum())} "
                f"of {tot.size} iterations; largest {1e3 * ex.max():.3f} ms)")


def check_phases_only(f, a):
    """phases: check_phases on a finished file of any shape, with the shares it found."""
    if f.attrs.get("finished") != 1:
        die("not a finished run")
    p, w, it = int(f.attrs["nranks"]), int(f.attrs["warmup"]), f["iterations"]
    check_phases(f, p)
    tot = it["total"][:, w:].sum()
    share = {k: 100 * it[k][:, w:].sum() / tot for k in PHASES[:-1]}
    print(f"ok: {a.file}: phases within the total; " +
          ", ".join(f"{k} {v:.2f}%" for k, v in share.items()))


def check_finished(f, a):
    """A cleanly finished run: every row written, no NaN, every piece of metadata present."""
    for name in ROOT_ATTRS + ["end_time", "finished", "stop_reason"]:
        if name not in f.attrs:
            die(f"root attribute {name} missing")
    if f.attrs["schema_version"] != 1 or f.attrs["finished"] != 1:
        die("schema_version / finished")
    if f.attrs["stop_reason"] != "completed":
        die(f"stop_reason {f.attrs['stop_reason']}")
    cfg = json.loads(f.attrs["config_json"])
    for key in ["model", "batch", "iters", "lr", "exchange", "output"]:
        if key not in cfg or f["config"].attrs[key] != cfg[key]:
            die(f"config {key} missing or different in /config")
    p, n = int(f.attrs["nranks"]), int(f.attrs["iters_total"])
    if n != f.attrs["iters"] + f.attrs["warmup"]:
        die("iters_total != iters + warmup")
    if a.ranks is not None and p != a.ranks:
        die(f"nranks {p}, expected {a.ranks}")
    if a.iters is not None and n != a.iters:
        die(f"iters_total {n}, expected {a.iters}")
    for name in PHASES + ["start", "loss", "bytes_sent", "record"]:
        d = f["iterations"][name]
        if d.shape != (p, n):
            die(f"/iterations/{name} shape {d.shape}, expected {(p, n)}")
        if np.isnan(d[:]).any():
            die(f"/iterations/{name} has missing values")
        if "units" not in d.attrs or "description" not in d.attrs:
            die(f"/iterations/{name} lacks units/description")
    it = f["iterations"]
    if (it["total"][:] <= 0).any():
        die("non-positive iteration time")
    check_phases(f, p)
    start = it["start"][:]
    if (np.diff(start, axis=1) <= 0).any():
        die("iteration start times do not increase")
    # The aligned clock: rank r's iteration i starts close to rank 0's (sync exchange).
    if p > 1 and f.attrs["exchange"] == "sync":
        spread = np.max(np.abs(start - start[0]), axis=0)
        if np.median(spread) > np.median(it["total"][:]):
            die(f"aligned start times differ by {np.median(spread)} s between ranks")
    r = f["ranks"]
    if not (r["completed"][:] == n).all() or not (r["status"][:] == 1).all():
        die(f"completed {r['completed'][:]} status {r['status'][:]}")
    if sorted(r["rank"][:]) != list(range(p)) or (r["pid"][:] <= 0).any():
        die("rank table")
    if not all(h for h in r["host"][:]):
        die("empty host name")
    for name in ["clock_offset_start", "clock_offset_end", "clock_rtt"]:
        if not np.isfinite(r[name][:]).all():
            die(f"/ranks/{name} not finite")
    if r["clock_offset_start"][0] != 0:
        die("rank 0's clock offset is not 0")
    # (a tensor group's ranks hold slices: check_tensor.py compares its replicas)
    one_model = cfg.get("parallel") != "tensor"
    if p > 1 and f.attrs["exchange"] == "sync" and one_model and len(set(r["param_hash"][:])) != 1:
        die(f"ranks hold different parameters: {r['param_hash'][:]}")
    if p > 1 and one_model and not (it["bytes_sent"][:] == 4 * f.attrs["param_count"]).all():
        die("bytes_sent is not the gradient size")
    print(f"ok: {a.file}: {p} ranks x {n} iterations, complete, metadata present")


def check_killed(f, a):
    """A run killed mid-way: readable, marked unfinished, every recorded block intact."""
    if "finished" in f.attrs or "end_time" in f.attrs:
        die("killed run is marked finished")
    n = int(f.attrs["iters_total"])
    done = f["ranks/completed"][:]
    every = int(f.attrs["flush_every"])
    if (done < a.min_completed).any() or (done >= n).any():
        die(f"completed {done}: expected >= {a.min_completed} and < {n}")
    if (done % every).any():
        die(f"completed {done} is not a whole number of {every}-iteration blocks")
    if (f["ranks/status"][:] != 0).any():
        die("status of a killed rank is not 0")
    for name in PHASES + ["loss", "start"]:
        shape = f["iterations"][name].shape
        # a file that grows with the run holds fewer columns than iters_total (never more, and
        # never fewer than a rank completed); one killed inside an extension may name chunks
        # past its recorded end beyond the completed columns: only those up to completed are read
        if len(shape) != 2 or shape[0] != len(done) or shape[1] > n or (done > shape[1]).any():
            die(f"/iterations/{name} shape {shape}: completed {done}, iters_total {n}")
        d = f["iterations"][name][:, :int(done.max())]
        for rank, k in enumerate(done):
            if np.isnan(d[rank, :k]).any():
                die(f"/iterations/{name} rank {rank}: missing values before {k}")
    print(f"ok: {a.file}: killed run readable, completed {list(done)} of {n}")


def check_accuracy(f, a):
    acc = f["eval/accuracy"][:]
    if np.isnan(acc).any():
        die(f"evaluations missing: {acc}")
    if acc[-1] < a.min_accuracy:
        die(f"final test accuracy {acc[-1]:.4f} < {a.min_accuracy}")
    print(f"ok: {a.file}: test accuracy {acc[-1]:.4f} >= {a.min_accuracy} "
          f"after {int(f['eval/iteration'][-1])} iterations")


def check_pipeline(f, a):
    """A finished --parallel model/hybrid run: the layout attributes, every field written, each
    stage's time accounted for, the same loss on every stage of a replica and the same parameters
    on every replica of a stage."""
    for name in ["parallel", "stages", "replicas", "microbatches", "stage_first_layers"]:
        if name not in f.attrs:
            die(f"root attribute {name} missing")
    if f.attrs["finished"] != 1 or f.attrs["stop_reason"] != "completed":
        die("run not finished")
    k, r, p = int(f.attrs["stages"]), int(f.attrs["replicas"]), int(f.attrs["nranks"])
    if a.stages is not None and k != a.stages:
        die(f"stages {k}, expected {a.stages}")
    if k * r != p:
        die(f"{k} stages x {r} replicas != {p} ranks")
    first = [int(v) for v in str(f.attrs["stage_first_layers"]).split(",")]
    if len(first) != k or first[0] != 0 or sorted(first) != first:
        die(f"stage_first_layers {first}")
    it = f["iterations"]
    n = int(f.attrs["iters_total"])
    pipe = ["pipe_compute", "pipe_send", "pipe_recv", "pipe_idle", "pipe_bytes"]
    for name in PHASES + ["start", "loss", "bytes_sent", "record"] + pipe:
        d = it[name][:]
        if d.shape != (p, n) or np.isnan(d).any():
            die(f"/iterations/{name}: shape {d.shape} or missing values")
        if name != "start" and name != "loss" and (d < 0).any():
            die(f"/iterations/{name} negative")
    if (it["pipe_compute"][:] <= 0).any():
        die("a stage computed nothing")
    # compute, send, receive and idle time lie within the forward and backward phases
    parts = sum(it[x][:] for x in pipe[:4])
    phases = it["forward"][:] + it["backward"][:]
    if (parts > phases * 1.02 + 1e-4).any():
        die(f"pipeline times exceed the forward+backward phases: {parts.max()} > {phases.max()}")
    loss, bytes_ = it["loss"][:], it["pipe_bytes"][:]
    for rep in range(r):
        ranks = list(range(rep * k, rep * k + k))
        if not np.allclose(loss[ranks], loss[ranks[0]], rtol=1e-6, atol=0):
            die(f"replica {rep}: stages record different losses")
        # stage s sends activations forward unless last, gradients backward unless first
        for s, rank in enumerate(ranks):
            if (k > 1) != (bytes_[rank] > 0).all():
                die(f"rank {rank} (stage {s}): pipe_bytes {bytes_[rank][:3]}")
    hashes = f["ranks/param_hash"][:]
    for s in range(k):
        if len(set(hashes[s::k])) != 1:
            die(f"stage {s}: replicas hold different parameters")
    if (f["ranks/completed"][:] != n).any() or (f["ranks/status"][:] != 1).any():
        die("not every rank completed")
    print(f"ok: {a.file}: {k} stages x {r} replicas, {int(f.attrs['microbatches'])} micro-batches, "
          f"stages start at layers {first}; median per stage: compute "
          f"{np.round(np.median(it['pipe_compute'][:], axis=1)[:k] * 1e3, 2)} ms, idle "
          f"{np.round(np.median(it['pipe_idle'][:], axis=1)[:k] * 1e3, 2)} ms")


def check_same_loss(f, a):
    if a.ref is None:
        die("same-loss needs --ref")
    with h5(a.ref) as r:
        ref = r["iterations/loss"][0]
    loss, k, r = f["iterations/loss"][:], int(f.attrs["stages"]), int(f.attrs["replicas"])
    diff = float(np.max(np.abs(loss.reshape(r, k, -1).mean(axis=0) - ref)))  # replicas averaged
    if not diff <= a.tol:
        die(f"{a.file}: loss differs from {a.ref} by {diff:.3g} (tolerance {a.tol:g})")
    print(f"ok: {a.file}: the loss of every iteration on every stage matches ({diff:.2g})")


def check_stopped(f, a):
    at = f.attrs
    if at.get("finished") != 1 or at.get("stop_reason") != a.reason:
        die(f"{a.file}: not finished with stop_reason {a.reason}: finished "
            f"{at.get('finished')}, stop_reason {at.get('stop_reason')}, {at.get('stop_detail')}")
    if (f["ranks/status"][:] != 2).any():
        die(f"{a.file}: status {f['ranks/status'][:]}, expected 2 (stopped) on every rank")
    workers = f["ranks/role"][:] == 0
    done, n = f["ranks/completed"][:], int(at["iters_total"])
    lo, hi = a.min_completed, n - 1 if a.max_completed is None else a.max_completed
    if not ((done[workers] >= lo) & (done[workers] <= hi) & (done[workers] < n)).all():
        die(f"{a.file}: completed {done.tolist()}: expected {lo} to {hi}, fewer than {n}")
    total = f["iterations/total"][:]
    for r, k in enumerate(done):
        if np.isnan(total[r, :k]).any():
            die(f"{a.file}: rank {r}: iterations missing before {k}")
    if a.lockstep:
        if len(set(done[workers])) != 1:
            die(f"{a.file}: workers stopped after different iterations: {done.tolist()}")
        if not np.isnan(total[:, done[workers][0]:]).all():
            die(f"{a.file}: iterations written beyond the stop")
    if a.same_params and len(set(f["ranks/param_hash"][:])) != 1:
        die(f"{a.file}: ranks hold different final models: {f['ranks/param_hash'][:]}")
    line = f"ok: {a.file}: stopped ({a.reason}) after {done.tolist()} iterations, closed"
    if a.max_latency is not None:
        latency = float(at["stop_latency_s"])
        if not 0 < latency < a.max_latency:
            die(f"{a.file}: closed {latency:.3f} s after the stop (limit {a.max_latency} s)")
        line += f" {latency:.3f} s after the stop"
    print(line)


def main():
    ap = argparse.ArgumentParser()
    checks = {"finished": check_finished, "phases": check_phases_only, "killed": check_killed,
              "accuracy": check_accuracy, "pipeline": check_pipeline,
              "same-loss": check_same_loss, "stopped": check_stopped}
    ap.add_argument("check", choices=list(checks))
    ap.add_argument("files", nargs="+", metavar="file")
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--iters", type=int, help="expected iters_total")
    ap.add_argument("--min-completed", type=int, default=None,
                    help="killed: 1 by default; stopped: 0 by default")
    ap.add_argument("--max-completed", type=int)
    ap.add_argument("--reason", default="signal", help="stopped: the stop_reason")
    ap.add_argument("--lockstep", action="store_true")
    ap.add_argument("--same-params", action="store_true")
    ap.add_argument("--max-latency", type=float)
    ap.add_argument("--min-accuracy", type=float, default=0.8)
    ap.add_argument("--stages", type=int)
    ap.add_argument("--ref", help="same-loss: the one-process run")
    ap.add_argument("--tol", type=float, default=1e-5, help="same-loss: largest difference")
    a = ap.parse_args()
    if a.min_completed is None:
        a.min_completed = 1 if a.check == "killed" else 0
    for a.file in a.files:
        with h5(a.file) as f:
            try:
                checks[a.check](f, a)
            except (OSError, KeyError, ValueError, IndexError) as e:  # lacks what the check reads
                die(f"{a.check} {a.file}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
