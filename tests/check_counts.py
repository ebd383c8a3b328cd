"""check_counts.py - the rules of a device step, checked on the counting fake device's report.

Usage: check_counts.py REPORT --iters N [--graphs CAPTURES | --eager] [--launches L] [--pipeline]
                       [--no-prefetch] [--h5 FILE]

REPORT is what dtbench wrote with DTBENCH_COUNT_DEVICE=REPORT (src/run/count_device.c: one line per
iteration and process, `count pid=P iter=I key=value ...`). For every process and every iteration
0 .. N-1:
  - no allocation or free between the iteration's start and the end of its update (allocs 0);
  - no host synchronisation before the end of backward (step_syncs 0; not with --pipeline,
    whose stages synchronise every micro-batch step);
  - one 16-bit weight cast (casts 1: weights_ready once per step, never per call);
  - prefetch (unless --no-prefetch): every iteration but the last queues the next batch's
    uploads, all while its own kernels are queued (overlapped == prefetches), unless the loader
    had not made that batch by then: then the next iteration queues them first thing, not
    overlapped (iteration 0 always does: its batch is the first); the last queues none beyond
    the run; at most 2 fences (--pipeline: the stages synchronise before the next batch is
    queued: no overlap required); none queued between the backward and exchange marks while the
    device had nothing left to compute (idle_gap 0: a device that keeps up with the host, an
    eager launch-bound step, would sit idle while the host queues it, and that idle time is
    recorded as exchange). Which batches were late is the run's file's word (--h5:
    /iterations/load_wait > 0 on the process's rank, found by its pid in /ranks); without it,
    none but the first;
  - graphs: --graphs C: C captures in all, in iterations 1 and 2 only (one per input slot and
    part), every iteration from 3 on replays --replays parts (default 2: then with at most
    --launches launches, default 4: the replays, SGD's one update, ...; AdamW's update is one
    launch per run of the same weight decay), and every iteration runs the same kernels as the
    eager iteration 0; --eager: no capture, no replay, launches == kernels.
Exit status 0 when every rule holds, 1 with one line per breach.
"""
import argparse
import collections
import sys


def parse(path):
    runs = collections.defaultdict(dict)
    with open(path) as f:
        for line in f:
            if not line.startswith("count "):
                continue
            kv = dict(tok.split("=", 1) for tok in line.split()[1:])
            runs[kv.pop("pid")][int(kv.pop("iter"))] = {k: int(v) for k, v in kv.items()}
    return runs


def late_batches(path):
    """{pid: [late per iteration]} from a result file's /iterations/load_wait and /ranks/pid."""
    import h5py  # only here: the report alone needs no h5py
    with h5py.File(path, "r") as f:
        wait = f["iterations/load_wait"][:]
        pids = f["ranks/pid"][:]
        ranks = f["ranks/rank"][:]
    return {int(pid): [bool(w > 0) for w in wait[int(r)]] for pid, r in zip(pids, ranks)}


def check(it, n, c, a, base_kernels, late):
    """The breaches of iteration `it` (counts c) of an n-iteration run; late[i]: batch i was
    not made by the time iteration i - 1 could queue its upload."""
    bad = []
    if c["allocs"]:
        bad.append(f"{c['allocs']} allocations or frees inside the iteration")
    if not a.pipeline and c["step_syncs"]:
        bad.append(f"{c['step_syncs']} host synchronisations before the end of backward")
    if c["casts"] != 1:
        bad.append(f"{c['casts']} weight casts (weights_ready), expected 1 per step")
    if not a.no_prefetch:
        own = it == 0 or late[it]  # this iteration queued its own batch's uploads
        ahead = it < n - 1 and not late[it + 1]  # and the next one's, during the step
        batches = own + ahead
        if batches == 0 and c["prefetches"]:
            bad.append(f"{c['prefetches']} uploads queued, none expected (the last iteration, or "
                       "the next batch was late)")
        if batches and (not c["prefetches"] or c["prefetches"] % batches):
            bad.append(f"{c['prefetches']} uploads for {batches} batch(es)")
        if ahead and not a.pipeline and batches and c["prefetches"] % batches == 0:
            per = c["prefetches"] // batches
            if c["overlapped"] != per:
                bad.append(f"{per - c['overlapped']} of the next batch's {per} uploads queued "
                           "while no kernel was queued (no overlap)")
        if c["fences"] > 2:
            bad.append(f"{c['fences']} prefetch fences")
        if c["idle_gap"]:
            bad.append(f"{c['idle_gap']} uploads queued between the backward and exchange marks "
                       "with nothing left to compute (the device idles there, as exchange)")
    if a.eager and (c["captures"] or c["replays"] or c["launches"] != c["kernels"]):
        bad.append("graphs used although they are off")
    if a.graphs is not None:
        if c["captures"] and it not in (1, 2):
            bad.append(f"{c['captures']} graph captures outside iterations 1 and 2")
        if it >= 3 and c["replays"] != a.replays:
            bad.append(f"{c['replays']} replays, expected {a.replays}")
        if it >= 3 and a.replays == 2 and c["launches"] > a.launches:
            bad.append(f"{c['launches']} launches, expected at most {a.launches} (2 replays, "
                       "the update, ...)")
        if c["kernels"] != base_kernels:
            bad.append(f"{c['kernels']} kernels, the eager iteration 0 ran {base_kernels}")
    return bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("report")
    p.add_argument("--iters", type=int, required=True)
    p.add_argument("--graphs", type=int, help="captures expected in all")
    p.add_argument("--replays", type=int, default=2,
                   help="graph launches per step from iteration 3 on (1: forward only)")
    p.add_argument("--launches", type=int, default=4,
                   help="most launches per step from iteration 3 on, with 2 replays")
    p.add_argument("--eager", action="store_true")
    p.add_argument("--pipeline", action="store_true")
    p.add_argument("--no-prefetch", action="store_true")
    p.add_argument("--h5", help="the run's result file: which batches the loader made late")
    a = p.parse_args()
    try:
        runs = parse(a.report)
    except (OSError, ValueError) as e:
        print(f"FAIL: {a.report}: {e}")
        return 1
    if not runs:
        print(f"FAIL: {a.report}: no count lines")
        return 1
    lates = None
    if a.h5:
        try:
            lates = late_batches(a.h5)
        except (OSError, KeyError, ValueError) as e:
            print(f"FAIL: {a.h5}: {e}")
            return 1
    errors = []
    for pid, iters in sorted(runs.items()):
        missing = [i for i in range(a.iters) if i not in iters]
        if missing:
            errors.append(f"pid {pid}: iterations {missing} missing")
            continue
        base = iters[0]["kernels"]
        late = lates.get(int(pid), [False] * a.iters) if lates is not None else [False] * a.iters
        if len(late) < a.iters:
            errors.append(f"pid {pid}: not in {a.h5} (or fewer iterations there)")
            continue
        for it in range(a.iters):
            errors += [f"pid {pid} iteration {it}: {b}"
                       for b in check(it, a.iters, iters[it], a, base, late)]
        if lates is not None:
            print(f"pid {pid}: batches made late by the loader: "
                  f"{[i for i in range(1, a.iters) if late[i]]}")
        if a.graphs is not None:
            captured = sum(iters[i]["captures"] for i in range(a.iters))
            if captured != a.graphs:
                errors.append(f"pid {pid}: {captured} graphs captured, expected {a.graphs}")
        steady = iters[a.iters - 1]
        print(f"pid {pid}: {a.iters} iterations; last: {steady['kernels']} kernels in "
              f"{steady['launches']} launches, {steady['syncs']} declared host waits, "
              f"{steady['casts']} cast, {steady['replays']} replays")
    for e in errors:
        print(f"FAIL: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
