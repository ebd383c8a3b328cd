"""check_tensor.py - what a --parallel tensor run records (docs/hdf5-layout.md's tp_comm and
tp_bytes, docs/model-parallelism.md), for test_tensor.sh. Exit 0 when the check holds, 1 with one
line.

  records FILE --tp N --blocks B --width C
                  a finished run of groups of N ranks (on each of its stages) of a transformer
                  of B blocks of width C: every rank spent time in its group's allreduces, within
                  forward + backward; each iteration's payload, summed over a replica's stages,
                  is 4 allreduces per block (2 in forward, 2 in backward) of the replica's
                  batch x tokens x C floats; the ranks of a group record one loss; the replicas
                  of a stage's group rank hold one set of parameters, the ranks of a group
                  different ones (their slices)
  none FILE       a run without a tensor group records tp_comm and tp_bytes as 0
  same-eval REF FILE --tol T
                  FILE's evaluations (accuracy and loss, each recorded once per evaluation
                  whatever the group) are REF's within T
"""
import numpy as np

from checkutil import command, die, expect, h5, main, parser


def records(a):
    """See the module's help: records FILE --tp N --blocks B --width C."""
    f = h5(a.file)
    it, n = f["iterations"], a.tp
    p, iters = int(f.attrs["nranks"]), int(f.attrs["iters_total"])
    k = int(f.attrs["stages"])
    expect(int(f.attrs["tp"]) == n, f"root attribute tp {f.attrs['tp']}, expected {n}")
    expect(p % (n * k) == 0, f"{p} ranks are not groups of {n} x {k} stage(s)")
    comm, sent = it["tp_comm"][:], it["tp_bytes"][:]
    expect(comm.shape == (p, iters), f"tp_comm of shape {comm.shape}, expected {(p, iters)}")
    expect((comm > 0).all(), f"a rank recorded no tensor-group time: {comm.min(axis=1)}")
    phases = it["forward"][:] + it["backward"][:]
    expect((comm <= phases * 1.02 + 1e-4).all(),
           f"tp_comm exceeds forward + backward: {comm.max()} > {phases.max()}")
    # rank = (replica x stages + stage) x tp + group rank: a replica's stages hold every block once
    batch, tokens = int(f.attrs["batch_per_rank"]), int(f.attrs["tokens_per_sample"])
    want = 4.0 * a.blocks * batch * tokens * a.width * 4
    by_stage = sent.reshape(p // (n * k), k, n, iters)
    expect((by_stage.sum(axis=1) == want).all(),
           f"tp_bytes summed over the stages {sorted(set(by_stage.sum(axis=1).ravel()))}, "
           f"expected {want:.0f}")
    # four allreduces per block and micro-batch, each of [micro-batch, tokens, C] floats (what
    # predict costs one by one)
    micro = max(1, int(f.attrs.get("microbatches", 1)))
    calls = it["tp_calls"][:].reshape(p // (n * k), k, n, iters).sum(axis=1)
    expect((calls == 4 * a.blocks * micro).all(),
           f"tp_calls summed over the stages {sorted(set(calls.ravel()))}, expected "
           f"{4 * a.blocks * micro} (4 per block and micro-batch)")
    if p > n * k:  # the replicas exchange the rank's slice: less than the whole model's gradient
        xs = it["bytes_sent"][:]
        expect(((xs > 0) & (xs < 4 * int(f.attrs["param_count"]))).all(),
               f"the replicas' exchange sent {sorted(set(xs.ravel()))} bytes")
    loss = it["loss"][:]
    for g in range(p // n):
        ranks = list(range(g * n, g * n + n))
        expect((loss[ranks] == loss[ranks[0]]).all(), f"group {g}: its ranks record other losses")
    hashes = f["ranks/param_hash"][:]
    for q in range(n * k):
        expect(len(set(hashes[q::n * k])) == 1, f"stage and group rank {q}: replicas hold other "
               f"parameters")
    for g in range(k):
        expect(len(set(hashes[g * n:(g + 1) * n])) == n,
               "ranks of a group hold the same parameters, not slices")
    print(f"ok: {a.file}: {p // (n * k)} replica(s) of {k} stage(s) of groups of {n}; tensor "
          f"allreduces {by_stage.sum(axis=1)[0, 0, 0]:.0f} bytes per replica and median "
          f"{1e3 * np.median(comm):.2f} ms per rank-iteration "
          f"({100 * comm.sum() / it['total'][:].sum():.1f}% of the total)")


def none(a):
    """A run without a tensor group records no tensor-group time or bytes."""
    f = h5(a.file)
    it = f["iterations"]
    if any((it[k][:] != 0).any() for k in ("tp_comm", "tp_bytes", "tp_calls")):
        die(f"{a.file}: tp_comm, tp_bytes or tp_calls recorded without a tensor group")
    print(f"ok: {a.file}: no tensor-group records")


def same_eval(a):
    """FILE's evaluations equal REF's within --tol: a group's ranks evaluate the same samples,
    which count once, so the accuracy and loss are one process's."""
    ref, f = h5(a.ref)["eval"], h5(a.file)["eval"]
    for name in ("accuracy", "loss"):
        x, y = ref[name][:], f[name][:]
        expect(x.shape == y.shape and x.size > 0 and not np.isnan(y).any(),
               f"{a.file}: /eval/{name} {y}, expected the shape of {a.ref}'s {x}")
        expect(np.abs(x - y).max() <= a.tol, f"{a.file}: /eval/{name} {y}, {a.ref}: {x}")
    print(f"ok: {a.file}: evaluations as {a.ref}'s (accuracy {f['accuracy'][-1]:.4f}, "
          f"loss {f['loss'][-1]:.4f})")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, records, ("file",), ("--tp", {"type": int, "required": True}),
            ("--blocks", {"type": int, "required": True}),
            ("--width", {"type": int, "required": True}))
    command(sub, none, ("file",))
    command(sub, same_eval, ("ref",), ("file",), ("--tol", {"type": float, "required": True}))
    main(ap)
