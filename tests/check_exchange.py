"""check_exchange.py - assertions on result files of the exchange strategies.

  check_exchange.py invariants FILE      every worker completed its iterations; async: the
                                         servers applied exactly the pushes the workers counted,
                                         staleness within its bound; mixed: what each leader
                                         sent, the next received, staleness as documented (see
                                         mixed_staleness); one final model
  check_exchange.py mixed_lag FILE SLOW  mixed with rank SLOW's node slower: the other nodes
                                         blend its older parameters (staleness > 0), it blends
                                         theirs, further on (less stale)
  check_exchange.py straggler FILE MS    rank 1 slept MS after backward: rank 0's wait holds it,
                                         its hidden exchange does not

sync and ssp write their staleness, versions and counts as constants, so nothing here checks
those: test_exchange.sh compares their parameters with one process's (applied once, S late).
  check_exchange.py throughput SYNC OTHER...   each OTHER delivers more samples/s than SYNC
"""
import sys

import h5py
import numpy as np


def die(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def workers(f):
    return f["ranks/role"][:] == 0


def invariants(path):
    with h5py.File(path, "r") as f:
        x, a = f.attrs["exchange"], f.attrs
        if a.get("finished") != 1 or (f["ranks/status"][:] != 1).any():
            die(f"{path}: not finished cleanly: status {f['ranks/status'][:]}")
        w = workers(f)
        done = f["ranks/completed"][:]
        if (done[w] != a["iters_total"]).any():
            die(f"{path}: workers completed {done[w]} of {a['iters_total']}")
        it = f["iterations"]
        st = it["staleness"][:][w]
        S, W = int(a["staleness_bound"]), int(a["nworkers"])
        bound = None
        pushed, applied = f["ranks/updates_pushed"][:], f["ranks/updates_applied"][:]
        if x == "async":
            # measured by the servers (the versions a worker's gradient was computed on and
            # applied to), bounded by the clock rule the workers enforce
            bound = (2 * S + 1) * (W - 1)
            if np.nanmax(st) > bound:
                die(f"{path}: staleness {np.nanmax(st)} exceeds the bound {bound}")
            servers = ~w
            # every worker pushed once per iteration, and each server applied every push once
            if (pushed[w] != done[w]).any() or (applied[servers] != pushed[w].sum()).any():
                die(f"{path}: pushed {pushed} applied {applied}")
        elif x == "mixed":
            # leaders on a ring: what one sent, the next one received (blended or drained)
            nodes = f["ranks/node"][:]
            leaders = np.where(f["ranks/local_rank"][:] == 0)[0]
            order = leaders[np.argsort(nodes[leaders])]
            if len(order) > 1:
                for i, r in enumerate(order):
                    nxt = order[(i + 1) % len(order)]
                    if pushed[r] != applied[nxt]:
                        die(f"{path}: leader {r} sent {pushed[r]}, leader {nxt} received {applied[nxt]}")
                mixed_staleness(f, path, order)
        if len(set(f["ranks/param_hash"][:])) != 1:
            die(f"{path}: ranks end with different models {f['ranks/param_hash'][:]}")
        print(f"ok: {path}: {x} on {a['nranks']} ranks, every iteration completed, pushes "
              f"{pushed.tolist()} applied {applied.tolist()}, one final model")


def mixed_staleness(f, path, order):
    """mixed's staleness (docs/exchange.md): how many iterations the parameters a node blended in
    trail its own, 0 when their sender was as far or further on, or where nothing was blended. So
    it is never negative; 0 off the ring's iterations (every --sync-period P); a multiple of P
    (the leaders send and blend at the same phase); the same on every rank of a node; and
    possible: the message blended at iteration i with staleness k > 0 was sent at the previous
    leader's iteration i - k, which cannot have started after iteration i ended here."""
    st = f["iterations/staleness"][:]
    P = max(1, int(f.attrs["sync_period"]))
    ring = (np.arange(st.shape[1]) + 1) % P == 0
    if (st < 0).any():
        die(f"{path}: negative staleness {sorted(set(st[st < 0].tolist()))}")
    if (st[:, ~ring] != 0).any() or (np.mod(st, P) != 0).any():
        die(f"{path}: staleness off the ring's iterations or not a multiple of P={P}")
    nodes = f["ranks/node"][:]
    for node in set(nodes.tolist()):
        if (st[nodes == node] != st[nodes == node][0]).any():
            die(f"{path}: the ranks of node {node} record different staleness")
    start, total = f["iterations/start"][:], f["iterations/total"][:]
    for i, r in enumerate(order):
        q = order[i - 1]  # the previous leader, whose parameters r blends
        for it in np.nonzero(st[r] > 0)[0]:
            sent = it - int(st[r, it])
            if start[q, sent] > start[r, it] + total[r, it] + 0.005:
                die(f"{path}: rank {r} at iteration {it} blended parameters of rank {q}'s "
                    f"iteration {sent}, which started {start[q, sent] - start[r, it]:.3f} s later")
    print(f"ok: {path}: mixed staleness >= 0, multiples of {P} at the ring's iterations, one per "
          f"node, consistent with the timeline (max {st.max():g})")


def mixed_lag(path, slow):
    """Rank `slow`'s node is the slow one: every other node runs ahead of it, so they blend its
    older parameters (some staleness > 0) while it blends parameters from further on (0 where the
    sender is ahead): its mean staleness stays below the others'."""
    with h5py.File(path, "r") as f:
        st, nodes = f["iterations/staleness"][:], f["ranks/node"][:]
        mine = nodes == nodes[int(slow)]
        fast, lagging = st[~mine], st[mine]
        if fast.max() <= 0 or lagging.mean() >= fast.mean():
            die(f"{path}: staleness on the fast nodes (mean {fast.mean():.2f}, max {fast.max():g}) "
                f"vs the slow node (mean {lagging.mean():.2f}): the slow node's parameters should "
                f"be the stale ones")
        print(f"ok: {path}: the fast nodes blend the slow node's older parameters (staleness mean "
              f"{fast.mean():.2f}, max {fast.max():g}); the slow node's mean {lagging.mean():.2f}")


def straggler(path, ms):
    """Rank 1 slept `ms` after its backward (--straggler 1:+MS): rank 0 waits that long in the
    exchange, and the part of its exchange that ran before the end of ITS backward cannot exceed
    its backward time (it did while the stop vote ran before the end-of-backward mark)."""
    d = float(ms) / 1e3
    with h5py.File(path, "r") as f:
        warm = int(f.attrs["warmup"])
        it = f["iterations"]
        wait, hidden = it["exchange_wait"][:, warm:], it["exchange_hidden"][:, warm:]
        bwd, delay = it["backward"][:, warm:], it["straggler_delay"][:, warm:]
        if not (np.abs(delay[1] - d) < 1e-3).all() or (delay[0] != 0).any():
            die(f"{path}: injected delays {delay.tolist()}, expected {d} on rank 1 only")
        w0 = np.median(wait[0])
        if not 0.8 * d <= w0 <= d + 0.25:
            die(f"{path}: rank 0 waited {w0:.3f} s for a straggler {d:.3f} s late")
        if np.median(wait[1]) > 0.25 * d:
            die(f"{path}: the straggler itself waited {np.median(wait[1]):.3f} s")
        own = bwd[0] - delay[0]
        if (hidden[0] > own + 0.005).any() or np.median(hidden[0]) > 0.25 * d:
            die(f"{path}: rank 0 hid {hidden[0].tolist()} s of exchange behind a backward of "
                f"{own.tolist()} s: the wait counted as hidden")
        print(f"ok: {path}: rank 0 waited {w0 * 1e3:.0f} ms for a {ms} ms straggler; hidden "
              f"{np.median(hidden[0]) * 1e3:.2f} ms <= its backward {np.median(own) * 1e3:.2f} ms")


def samples_per_second(path):
    """Aggregate training rate: the sum over workers of each one's samples per second (its local
    batch over its median iteration time, measured iterations). For sync every worker's time is
    the slowest one's, so this is the global batch over the iteration time; asynchronous workers
    each progress at their own pace, which is the point of them."""
    with h5py.File(path, "r") as f:
        w, warm = workers(f), int(f.attrs["warmup"])
        total = f["iterations/total"][:][w][:, warm:]
        per_worker = int(f.attrs["batch_global"]) // int(f.attrs["nworkers"])
        return float(np.sum(per_worker / np.median(total, axis=1)))


def throughput(sync_path, others):
    base = samples_per_second(sync_path)
    for p in others:
        t = samples_per_second(p)
        print(f"{p}: {t:.0f} samples/s vs sync {base:.0f} (ratio {t / base:.2f})")
        if t <= base:
            die(f"{p} is not faster than sync with a straggler")
    print("ok: async and mixed deliver more samples/s than sync with a straggler")


if __name__ == "__main__":
    if sys.argv[1] == "invariants":
        invariants(sys.argv[2])
    elif sys.argv[1] == "straggler":
        straggler(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "mixed_lag":
        mixed_lag(sys.argv[2], sys.argv[3])
    else:
        throughput(sys.argv[2], sys.argv[3:])
