"""check_zero.py - assertions on result files of the sharded exchanges (--exchange zero1, zero2,
zero3; tests/test_zero.sh). Exit 0 when the check holds, 1 with one line.

  records ZERO SYNC [--stage 1|2|3]
      ZERO (a zero1 or zero2 run on P > 1 ranks, sharded over all of them, or over the L ranks
      of each node with --transport hier) and SYNC (the same run with sync):
      - per rank and iteration, the all-gathers' payload is the N parameters in fp32, and at
        most L - 1 floats more (the padding of the one bucket that L does not divide); the
        reduce-scatters' is the same count in the gradients' wire type (--grad-dtype); with
        hier on several nodes, the allreduce across the nodes carries the rank's shard (the
        parameters whose optimizer state it holds) in the wire type; bytes_sent is their sum;
      - the collectives' times are finite, above 0, and together within the exchange phase;
        zero2 hid some of its reduce-scatters behind backward (exchange_hidden above 0 on every
        rank, where L > 1), zero1 none of them;
      - per rank the parameters and the gradients are N floats each; the optimizer's state
        (1 float per parameter with SGD, 2 with AdamW) adds up over a node's ranks (all ranks
        without hier) to the model's, and no rank holds more than one parameter's state more
        than another; SYNC holds the whole state on every rank and records no reduce-scatter,
        all-gather or shard allreduce;
      - every rank ends with the same parameters (/ranks/param_hash).
      zero3 (the parameters gathered before each layer's forward and backward) differs:
      - the all-gathers' payload, after the first iteration (which starts with every parameter
        held), is more than the N parameters (each bucket gathered for forward, and again for
        backward but the last ones, still held) and at most 3 N (a tied head's table gathered
        once more), plus the padding; the reduce-scatters' is N floats as above;
      - the collectives run inside forward and backward: their times lie within forward,
        backward and exchange together;
      - --param-prefetch on (the default) with two buckets or more: the first iteration (which
        records the order of the groups) hides nothing, every later one hides some all-gather
        time on every rank (exchange_hidden above 0: the next group's gather was issued ahead,
        in flight while a layer computed); off: nothing is hidden (every gather blocks);
      - per rank the gradients held (the plan) are the rank's shard plus the largest bucket
        (--bucket-mb rounded down to a multiple of L, at most N), the parameters the same and,
        with prefetch, the second largest bucket (the group gathered ahead): below N.

  evals ZERO SYNC
      both ran the same evaluations (/eval), with the same accuracies and losses within 1e-4.

  peak LESS MORE
      the measured peak resident memory (/ranks/memory_peak_resident) of each rank of LESS (a
      zero3 run) is below that of the same rank of MORE (the same run with a stage that holds
      the whole parameters and gradients): the pages zero3 releases are really given back.
"""
import numpy as np

from checkutil import command, expect, h5, main, parser, text

WIRE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def load(path):
    with h5(path) as f:
        it = {k: f["iterations/" + k][:] for k in
              ("exchange", "forward", "backward", "exchange_hidden", "exchange_reduce_scatter", "exchange_allgather",
               "bytes_reduce_scatter", "bytes_allgather", "bytes_sent", "exchange_allreduce",
               "bytes_allreduce")}
        mem = {k: f["ranks/memory_" + k][:] for k in ("params", "grads", "optimizer")}
        mem["hash"] = f["ranks/param_hash"][:]
        attrs = {"exchange": text(f.attrs["exchange"]), "nranks": int(f.attrs["nranks"]),
                 "N": int(f.attrs["param_count"]), "grad_dtype": text(f.attrs["grad_dtype"]),
                 "nnodes": int(f.attrs["nnodes"]),
                 "bucket_mb": float(text(f["config"].attrs["bucket-mb"])),
                 "hier": text(f["config"].attrs["transport"]) == "hier",
                 "prefetch": text(f["config"].attrs.get("param-prefetch", "off")) == "on",
                 "optimizer": text(f["config"].attrs["optimizer"])}
    return it, mem, attrs


def records(a):
    """See the module's description."""
    it, mem, at = load(a.zero)
    sit, smem, sat = load(a.sync)
    P, N = at["nranks"], at["N"]
    nodes = at["nnodes"] if at["hier"] else 1  # the replicas of each shard
    L = P // nodes                              # the ranks a bucket is sharded over
    expect(P > 1, f"{a.zero}: {P} rank(s): nothing is exchanged")
    expect(at["exchange"] == f"zero{a.stage}", f"{a.zero}: exchange {at['exchange']}")
    expect(sat["exchange"] == "sync" and sat["N"] == N and sat["nranks"] == P,
           f"{a.sync}: not the same run with sync")
    expect(np.isfinite(it["exchange"]).all(), f"{a.zero}: unwritten iterations")
    expect(len(set(mem["hash"])) == 1, f"{a.zero}: the ranks end with other parameters")
    k = 2 if at["optimizer"] == "adamw" else 1
    wire = WIRE_BYTES[at["grad_dtype"]]
    ag, rs, ar = it["bytes_allgather"], it["bytes_reduce_scatter"], it["bytes_allreduce"]
    lo, hi = (4 * N, 4 * (N + L - 1)) if L > 1 else (0, 0)
    if a.stage == 3:
        later = ag[:, 1:]
        expect(((later > lo) & (later <= 3 * hi)).all() if L > 1 else (ag == 0).all(),
               f"{a.zero}: all-gathers' payload {np.unique(later)} bytes after the first "
               f"iteration, expected above {lo} and at most {3 * hi} (N = {N}, L = {L})")
        expect(((rs >= lo / 4 * wire) & (rs <= hi / 4 * wire)).all(),
               f"{a.zero}: reduce-scatters' payload {np.unique(rs)}, expected {lo // 4} to "
               f"{hi // 4} floats in {at['grad_dtype']}")
    else:
        expect(((ag >= lo) & (ag <= hi)).all(),
               f"{a.zero}: all-gathers' payload {np.unique(ag)} bytes, expected {lo} to {hi} "
               f"(N = {N} parameters in fp32, sharded over {L} ranks)")
        expect((rs == ag / 4 * wire).all(),
               f"{a.zero}: reduce-scatters' payload {np.unique(rs)}, expected the all-gathers' "
               f"floats in {at['grad_dtype']}")
    shard = mem["optimizer"] / (4 * k)  # the parameters this rank updates
    want = shard[:, None] * wire if nodes > 1 else np.zeros_like(ar)
    expect((ar == want).all(), f"{a.zero}: shards' allreduce payload {np.unique(ar)}, "
                               f"expected {np.unique(want)}")
    expect((it["bytes_sent"] == rs + ar + ag).all(), f"{a.zero}: bytes_sent is not their sum")
    trs, tag = it["exchange_reduce_scatter"], it["exchange_allgather"]
    tar, ex = it["exchange_allreduce"], it["exchange"]
    for name, t, on in (("reduce-scatter", trs, L > 1), ("all-gather", tag, L > 1),
                        ("allreduce", tar, nodes > 1)):
        expect(((t > 0) if on else (t == 0)).all(),
               f"{a.zero}: {name} {t.min()} to {t.max()} s: expected {'> 0' if on else '0'}")
    phases = ex + (it["forward"] + it["backward"] if a.stage == 3 else 0)
    expect((trs + tag + tar <= phases * (1 + 1e-9) + 1e-9).all(),
           f"{a.zero}: the collectives exceed the phases they run in")
    hidden = it["exchange_hidden"]
    bucket = max(int(at["bucket_mb"] * 1048576.0 / 4) // L * L, L)
    nb = -(-N // bucket)
    if a.stage == 3 and at["prefetch"] and L > 1 and nb > 1:
        expect((hidden[:, 0] == 0).all() and (hidden[:, 1:] > 0).all(),
               f"{a.zero}: prefetched all-gathers hidden {hidden.round(4).tolist()} s: expected "
               f"none in the first iteration, some in every later one on every rank")
    elif a.stage == 3:
        expect((hidden == 0).all(), f"{a.zero}: zero3 hid exchange work: {hidden.max()}")
    elif a.stage == 2 and L > 1:
        expect((hidden.max(axis=1) > 0).all(),
               f"{a.zero}: a rank hid no reduce-scatter behind backward: {hidden.max(axis=1)}")
    elif a.stage == 1:
        expect((hidden == 0).all(), f"{a.zero}: zero1 hid exchange work: {hidden.max()}")

    opt = mem["optimizer"]
    held = held_p = 4 * N
    if a.stage == 3 and L > 1:
        held = opt / k + 4 * min(N, bucket)
        sizes = sorted([bucket] * (nb - 1) + [N - (nb - 1) * bucket])
        held_p = held + (4 * sizes[-2] if at["prefetch"] and nb > 1 else 0)
        expect((held_p < 4 * N).all(), f"{a.zero}: zero3 holds {held_p} bytes, not below {4 * N}")
    for name, m, want in (("params", mem["params"], held_p), ("grads", mem["grads"], held)):
        expect((m == want).all(), f"{a.zero}: memory_{name} {m}, expected {want}")
    expect(opt.sum() == nodes * k * 4 * N,
           f"{a.zero}: the ranks' optimizer state adds up to {opt.sum():.0f} bytes, expected "
           f"{nodes * k * 4 * N} ({nodes} x {k} x {N} floats)")
    expect(opt.max() - opt.min() <= k * 4,
           f"{a.zero}: shards' state {opt.min():.0f} to {opt.max():.0f} bytes: not balanced "
           f"within one parameter")
    expect((smem["optimizer"] == k * 4 * N).all(),
           f"{a.sync}: memory_optimizer {smem['optimizer']}, expected {k * 4 * N} on every rank")
    for key in ("exchange_reduce_scatter", "exchange_allgather", "bytes_reduce_scatter",
                "bytes_allgather", "exchange_allreduce", "bytes_allreduce"):
        expect((sit[key] == 0).all(), f"{a.sync}: sync records {key}")
    print(f"ok: {a.zero}: per iteration {rs[0, -1]:.0f} B reduce-scattered, {ag[0, -1]:.0f} B "
          f"all-gathered (N = {N}); optimizer state per rank {opt.min() / 2**20:.2f}-"
          f"{opt.max() / 2**20:.2f} MiB of sync's {smem['optimizer'][0] / 2**20:.2f} MiB")


def evals(a):
    """See the module's description."""
    got = []
    for path in (a.zero, a.sync):
        with h5(path) as f:
            got.append({k: f["eval/" + k][:] for k in ("iteration", "accuracy", "loss")})
    z, s = got
    expect(len(z["iteration"]) > 0 and (z["iteration"] == s["iteration"]).all(),
           f"{a.zero}: evaluations after iterations {z['iteration']}, sync's {s['iteration']}")
    for k in ("accuracy", "loss"):
        expect(np.isfinite(z[k]).all() and (abs(z[k] - s[k]) <= 1e-4).all(),
               f"{a.zero}: {k} {z[k]}, sync's {s[k]}")
    print(f"ok: {a.zero}: {len(z['iteration'])} evaluations, accuracy {z['accuracy'][-1]:.4f} "
          f"as sync's")


def peak(a):
    """See the module's description."""
    got = []
    for path in (a.less, a.more):
        with h5(path) as f:
            got.append(f["ranks/memory_peak_resident"][:] / 2**20)
    less, more = got
    expect(np.isfinite(less).all() and np.isfinite(more).all(),
           f"{a.less}, {a.more}: peak resident memory not measured: {less}, {more}")
    expect(less.shape == more.shape and (less < more).all(),
           f"{a.less}: peak resident {less.round(1)} MiB, not below {a.more}'s {more.round(1)}")
    print(f"ok: {a.less}: peak resident {less.min():.1f}-{less.max():.1f} MiB per rank, "
          f"{a.more}: {more.min():.1f}-{more.max():.1f} MiB (each rank at least "
          f"{(more - less).min():.1f} MiB less)")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, records, ("zero",), ("sync",), ("--stage", {"type": int, "default": 1}))
    command(sub, evals, ("zero",), ("sync",))
    command(sub, peak, ("less",), ("more",))
    main(ap)
