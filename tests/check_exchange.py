"""check_exchange.py - assertions on result files of the exchange strategies.

  check_exchange.py invariants FILE      staleness within its bound, monotonic versions,
                                         every push applied exactly once, one final model
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
        st, ver = it["staleness"][:][w], it["version"][:][w]
        S, W = int(a["staleness_bound"]), int(a["nworkers"])
        bound = {"sync": 0, "ssp": S, "async": (2 * S + 1) * (W - 1)}.get(x)
        if bound is not None and np.nanmax(st) > bound:
            die(f"{path}: staleness {np.nanmax(st)} exceeds the bound {bound}")
        if (np.diff(ver, axis=1) < 0).any():
            die(f"{path}: parameter versions decrease")
        pushed, applied = f["ranks/updates_pushed"][:], f["ranks/updates_applied"][:]
        if x == "async":
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
        else:
            if (applied != a["iters_total"]).any():
                die(f"{path}: applied {applied}")
        if len(set(f["ranks/param_hash"][:])) != 1:
            die(f"{path}: ranks end with different models {f['ranks/param_hash'][:]}")
        print(f"ok: {path}: {x} on {a['nranks']} ranks, max staleness {np.nanmax(st):g} "
              f"(bound {bound}), versions monotonic, pushes {pushed.tolist()} applied "
              f"{applied.tolist()}, one final model")


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
    else:
        throughput(sys.argv[2], sys.argv[3:])
