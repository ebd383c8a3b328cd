"""check_zero.py - assertions on result files of the sharded exchanges (--exchange zero1, zero2;
tests/test_zero.sh). Exit 0 when the check holds, 1 with one line.

  records ZERO SYNC [--stage 1|2]
      ZERO (a zero1 or zero2 run on P > 1 ranks) and SYNC (the same run with sync):
      - per rank and iteration, the all-gathers' payload is the N parameters in fp32, and at
        most P - 1 floats more (the padding of the one bucket that P does not divide); the
        reduce-scatters' is the same count in the gradients' wire type (--grad-dtype);
        bytes_sent is their sum;
      - the two collectives' times are finite, above 0, and together within the exchange phase;
        zero2 hid some of its reduce-scatters behind backward (exchange_hidden above 0 on every
        rank), zero1 none of them;
      - per rank the parameters and the gradients are N floats each; the optimizer's state
        (1 float per parameter with SGD, 2 with AdamW) adds up over the ranks to the model's,
        and no rank holds more than one parameter's state more than another; SYNC holds the
        whole state on every rank and records no reduce-scatter or all-gather.
"""
import numpy as np

from checkutil import command, expect, h5, main, parser, text

WIRE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def load(path):
    with h5(path) as f:
        it = {k: f["iterations/" + k][:] for k in
              ("exchange", "exchange_hidden", "exchange_reduce_scatter", "exchange_allgather",
               "bytes_reduce_scatter", "bytes_allgather", "bytes_sent")}
        mem = {k: f["ranks/memory_" + k][:] for k in ("params", "grads", "optimizer")}
        attrs = {"exchange": text(f.attrs["exchange"]), "nranks": int(f.attrs["nranks"]),
                 "N": int(f.attrs["param_count"]), "grad_dtype": text(f.attrs["grad_dtype"]),
                 "optimizer": text(f["config"].attrs["optimizer"])}
    return it, mem, attrs


def records(a):
    """See the module's description."""
    it, mem, at = load(a.zero)
    sit, smem, sat = load(a.sync)
    P, N = at["nranks"], at["N"]
    expect(P > 1, f"{a.zero}: {P} rank(s): nothing is exchanged")
    expect(at["exchange"] == f"zero{a.stage}", f"{a.zero}: exchange {at['exchange']}")
    expect(sat["exchange"] == "sync" and sat["N"] == N and sat["nranks"] == P,
           f"{a.sync}: not the same run with sync")
    expect(np.isfinite(it["exchange"]).all(), f"{a.zero}: unwritten iterations")
    ag, rs = it["bytes_allgather"], it["bytes_reduce_scatter"]
    expect(((ag >= 4 * N) & (ag <= 4 * (N + P - 1))).all(),
           f"{a.zero}: all-gathers' payload {np.unique(ag)} bytes, expected {4 * N} to "
           f"{4 * (N + P - 1)} (N = {N} parameters in fp32)")
    wire = WIRE_BYTES[at["grad_dtype"]]
    expect((rs == ag / 4 * wire).all(),
           f"{a.zero}: reduce-scatters' payload {np.unique(rs)}, expected the all-gathers' "
           f"floats in {at['grad_dtype']}")
    expect((it["bytes_sent"] == rs + ag).all(), f"{a.zero}: bytes_sent is not their sum")
    trs, tag, ex = it["exchange_reduce_scatter"], it["exchange_allgather"], it["exchange"]
    expect(((trs > 0) & (tag > 0)).all(),
           f"{a.zero}: reduce-scatter {trs.min()} s, all-gather {tag.min()} s: not both timed")
    expect((trs + tag <= ex * (1 + 1e-9) + 1e-9).all(),
           f"{a.zero}: reduce-scatter + all-gather exceed the exchange phase")
    hidden = it["exchange_hidden"]
    if a.stage == 2:
        expect((hidden.max(axis=1) > 0).all(),
               f"{a.zero}: a rank hid no reduce-scatter behind backward: {hidden.max(axis=1)}")
    else:
        expect((hidden == 0).all(), f"{a.zero}: zero1 hid exchange work: {hidden.max()}")

    k = 2 if at["optimizer"] == "adamw" else 1
    for name, m in (("params", mem["params"]), ("grads", mem["grads"])):
        expect((m == 4 * N).all(), f"{a.zero}: memory_{name} {m}, expected {4 * N}")
    opt = mem["optimizer"]
    expect(opt.sum() == k * 4 * N,
           f"{a.zero}: the ranks' optimizer state adds up to {opt.sum():.0f} bytes, expected "
           f"{k * 4 * N} ({k} x {N} floats)")
    expect(opt.max() - opt.min() <= k * 4,
           f"{a.zero}: shards' state {opt.min():.0f} to {opt.max():.0f} bytes: not balanced "
           f"within one parameter")
    expect((smem["optimizer"] == k * 4 * N).all(),
           f"{a.sync}: memory_optimizer {smem['optimizer']}, expected {k * 4 * N} on every rank")
    for key in ("exchange_reduce_scatter", "exchange_allgather", "bytes_reduce_scatter",
                "bytes_allgather"):
        expect((sit[key] == 0).all(), f"{a.sync}: sync records {key}")
    print(f"ok: {a.zero}: per iteration {rs[0, 0]:.0f} B reduce-scattered, {ag[0, 0]:.0f} B "
          f"all-gathered (N = {N}); optimizer state per rank {opt.min() / 2**20:.2f}-"
          f"{opt.max() / 2**20:.2f} MiB of sync's {smem['optimizer'][0] / 2**20:.2f} MiB")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, records, ("zero",), ("sync",), ("--stage", {"type": int, "default": 1}))
    main(ap)
