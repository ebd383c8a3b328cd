"""check_counts.py - the rules of a device step, checked on the counting fake device's report.

Usage: check_counts.py REPORT --iters N [--graphs CAPTURES | --eager] [--pipeline] [--no-prefetch]

REPORT is what dtbench wrote with DTBENCH_COUNT_DEVICE=REPORT (src/count_device.c: one line per
iteration and process, `count pid=P iter=I key=value ...`). For every process and every iteration
0 .. N-1:
  - no allocation or free between the iteration's start and the end of its update (allocs 0);
  - no host synchronisation before the end of backward (step_syncs 0; not with --pipeline,
    whose stages synchronise every micro-batch step);
  - one 16-bit weight cast (casts 1: weights_ready once per step, never per call);
  - prefetch (unless --no-prefetch): every iteration but the last queues the next batch's
    uploads, all while its own kernels are queued (overlapped == prefetches; iteration 0 also
    loads its own batch first, not overlapped), the last queues none; at most 2 fences;
    (--pipeline: the stages synchronise before the next batch is queued: no overlap required);
  - graphs: --graphs C: C captures in all, in iterations 1 and 2 only (one per input slot and
    part), every iteration from 3 on replays --replays parts (default 2: then with at most 4
    launches), and every iteration runs the same kernels as the eager iteration 0; --eager: no
    capture, no replay, launches == kernels.
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


def check(it, n, c, a, base_kernels):
    """The breaches of iteration `it` (counts c) of an n-iteration run."""
    bad = []
    if c["allocs"]:
        bad.append(f"{c['allocs']} allocations or frees inside the iteration")
    if not a.pipeline and c["step_syncs"]:
        bad.append(f"{c['step_syncs']} host synchronisations before the end of backward")
    if c["casts"] != 1:
        bad.append(f"{c['casts']} weight casts (weights_ready), expected 1 per step")
    if not a.no_prefetch:
        last = it == n - 1
        if last and c["prefetches"]:
            bad.append("the last iteration queued a batch beyond the run")
        if not last and not c["prefetches"]:
            bad.append("the next batch was not prefetched")
        if not a.pipeline and not last:
            own = 0 if it else c["prefetches"] // 2  # iteration 0 loads its own batch first
            if c["overlapped"] != c["prefetches"] - own:
                bad.append(f"{c['prefetches'] - own - c['overlapped']} prefetched uploads queued "
                           "while no kernel was queued (no overlap)")
        if c["fences"] > 2:
            bad.append(f"{c['fences']} prefetch fences")
    if a.eager and (c["captures"] or c["replays"] or c["launches"] != c["kernels"]):
        bad.append("graphs used although they are off")
    if a.graphs is not None:
        if c["captures"] and it not in (1, 2):
            bad.append(f"{c['captures']} graph captures outside iterations 1 and 2")
        if it >= 3 and c["replays"] != a.replays:
            bad.append(f"{c['replays']} replays, expected {a.replays}")
        if it >= 3 and a.replays == 2 and c["launches"] > 4:
            bad.append(f"{c['launches']} launches, expected at most 4 (2 replays, SGD, ...)")
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
    p.add_argument("--eager", action="store_true")
    p.add_argument("--pipeline", action="store_true")
    p.add_argument("--no-prefetch", action="store_true")
    a = p.parse_args()
    try:
        runs = parse(a.report)
    except (OSError, ValueError) as e:
        print(f"FAIL: {a.report}: {e}")
        return 1
    if not runs:
        print(f"FAIL: {a.report}: no count lines")
        return 1
    errors = []
    for pid, iters in sorted(runs.items()):
        missing = [i for i in range(a.iters) if i not in iters]
        if missing:
            errors.append(f"pid {pid}: iterations {missing} missing")
            continue
        base = iters[0]["kernels"]
        for it in range(a.iters):
            errors += [f"pid {pid} iteration {it}: {b}" for b in check(it, a.iters, iters[it], a,
                                                                       base)]
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
