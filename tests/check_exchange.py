"""check_exchange.py - assertions on result files of the exchange strategies and transports.
Exit 0 when the check holds, 1 with one line.

  invariants FILE      every worker completed its iterations; async: the servers applied exactly
                       the pushes the workers counted, staleness within its bound; mixed: what
                       each leader sent, the next received, staleness as documented (see
                       mixed_staleness); one final model
  mixed-lag FILE SLOW  mixed with rank SLOW's node slower: the other nodes blend its older
                       parameters (staleness > 0), it blends theirs, further on (less stale)
  straggler FILE MS    rank 1 slept MS after backward: rank 0's wait holds it, its hidden
                       exchange does not

sync and ssp write their staleness, versions and counts as constants, so nothing here checks
those: test_exchange.sh compares their parameters with one process's (applied once, S late).
  throughput SYNC OTHER...   each OTHER delivers more samples/s than SYNC

The wire type and the transports (test_grad_dtype.sh, test_transport.sh):
  rounding --ref R --init I --fp32 F PARAMS...
                       each PARAMS (a bf16 or fp16 exchange, by its name) is within its type's
                       rounding of the one-process parameters R, and F (fp32) far closer
  halves FP32 BF16 [--calibrated] [--every]
                       bytes_sent (and the calibration's bucket) halve from an fp32 to a bf16 run
  busbw FILE --factor F       the calibration's bus bandwidth as nccl-tests define it
  overlap FILE --transport T --ranks P --iters N --bucket-bytes B
                       overlapped buckets: exchange time hidden before the end of backward; the
                       calibration stored
  alone FILE           one rank: nothing hidden, nothing calibrated
  host FILE --ranks R  this host's cores and the ranks sharing them recorded
  progress FILE --ranks R     --progress thread recorded; oversubscribed where R ranks of 2
                       threads exceed this host's cores
"""
import json
import os

import numpy as np

from checkutil import command, die, expect, h5, main, parser, text


def workers(f):
    return f["ranks/role"][:] == 0


def invariants(args):
    """Every worker completed iters_total, every rank status 1; async: staleness within
    (2S + 1)(W - 1), pushes once per iteration, each server applied them all; mixed: on the
    leaders' ring each received what the previous sent, staleness as mixed_staleness says; one
    final model on every rank."""
    path = args.file
    with h5(path) as f:
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


def mixed_lag(a):
    """Rank `slow`'s node is the slow one: every other node runs ahead of it, so they blend its
    older parameters (some staleness > 0) while it blends parameters from further on (0 where the
    sender is ahead): its mean staleness stays below the others'."""
    path, slow = a.file, a.slow
    with h5(path) as f:
        st, nodes = f["iterations/staleness"][:], f["ranks/node"][:]
        mine = nodes == nodes[int(slow)]
        fast, lagging = st[~mine], st[mine]
        if fast.max() <= 0 or lagging.mean() >= fast.mean():
            die(f"{path}: staleness on the fast nodes (mean {fast.mean():.2f}, max {fast.max():g}) "
                f"vs the slow node (mean {lagging.mean():.2f}): the slow node's parameters should "
                f"be the stale ones")
        print(f"ok: {path}: the fast nodes blend the slow node's older parameters (staleness mean "
              f"{fast.mean():.2f}, max {fast.max():g}); the slow node's mean {lagging.mean():.2f}")


def straggler(a):
    """Rank 1 slept `ms` after its backward (--straggler 1:+MS): rank 0 waits that long in the
    exchange, and the part of its exchange that ran before the end of ITS backward cannot exceed
    its backward time (it did while the stop vote ran before the end-of-backward mark)."""
    path, ms = a.file, a.ms
    d = float(ms) / 1e3
    with h5(path) as f:
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
        # (a wait counted as hidden adds the straggler's d to it; the backward of a few ms here
        # can take 0.1-0.17 s under a test suite's load, hiding as much exchange honestly)
        if (hidden[0] > own + 0.005).any() or np.median(hidden[0]) > 0.75 * d:
            die(f"{path}: rank 0 hid {hidden[0].tolist()} s of exchange behind a backward of "
                f"{own.tolist()} s: the wait counted as hidden")
        print(f"ok: {path}: rank 0 waited {w0 * 1e3:.0f} ms for a {ms} ms straggler; hidden "
              f"{np.median(hidden[0]) * 1e3:.2f} ms <= its backward {np.median(own) * 1e3:.2f} ms")


def samples_per_second(path):
    """Aggregate training rate: the sum over workers of each one's samples per second (its local
    batch over its median iteration time, measured iterations). For sync every worker's time is
    the slowest one's, so this is the global batch over the iteration time; asynchronous workers
    each progress at their own pace, which is the point of them."""
    with h5(path) as f:
        w, warm = workers(f), int(f.attrs["warmup"])
        total = f["iterations/total"][:][w][:, warm:]
        per_worker = int(f.attrs["batch_global"]) // int(f.attrs["nworkers"])
        return float(np.sum(per_worker / np.median(total, axis=1)))


def throughput(a):
    """Each OTHER's aggregate samples per second (samples_per_second) exceeds SYNC's."""
    sync_path, others = a.sync, a.others
    base = samples_per_second(sync_path)
    for p in others:
        t = samples_per_second(p)
        print(f"{p}: {t:.0f} samples/s vs sync {base:.0f} (ratio {t / base:.2f})")
        if t <= base:
            die(f"{p} is not faster than sync with a straggler")
    print("ok: async and mixed deliver more samples/s than sync with a straggler")


def params(path):
    """A --save-model file's parameters (after its 64-byte header) in float64."""
    return np.fromfile(path, dtype="<f4", offset=64).astype(np.float64)


def rounding(a):
    """Each iteration the averaged gradient differs from fp32's by the roundings of the inputs, the
    partial sums and the result: a few u of |g0| + |g1| per parameter (u = 2^-8 bf16, 2^-11 fp16,
    told by the file's name); over 4 momentum steps that is at most some u of the movement
    max|R - I|. Each PARAMS lies between u/4 (the rounding must show) and 16u (room for the
    halves' gradients of opposite signs, |g0| + |g1| >> |g0 + g1|) of the movement from R; the
    fp32 exchange F within 1e-5 of it (~1e-7 measured)."""
    ref, init = params(a.ref), params(a.init)
    move = np.abs(ref - init).max()  # how far the training moved the parameters
    d32 = np.abs(params(a.fp32) - ref).max()
    for path in a.params:
        u = 2.0 ** -11 if "fp16" in os.path.basename(path) else 2.0 ** -8
        d = np.abs(params(path) - ref).max()
        print(f"{path}: max |p - p_1process| = {d:.3g} = {d / move / u:.2f} u of the movement "
              f"{move:.3g} (fp32 over 2 ranks: {d32:.3g})")
        expect(d32 < 1e-5 * move, f"the fp32 exchange moved the parameters by {d32:.3g}: "
                                  f"more than 1e-5 of the movement {move:.3g}")
        expect(u / 4 * move <= d <= 16 * u * move,
               f"{path}: {d:.3g} from one process: not within u/4 .. 16u of the movement "
               f"{move:.3g} (u = {u:g})")


def halves(a):
    """FP32 and BF16 record their --grad-dtype; some rank and iteration of FP32 sent bytes
    (--every: every rank in every iteration), and BF16 sent exactly half wherever FP32 sent any,
    nothing where it sent none; --calibrated: the calibration's bucket halves too."""
    got = {}
    for dt, path in (("fp32", a.fp32), ("bf16", a.bf16)):
        with h5(path) as f:
            expect(text(f.attrs["grad_dtype"]) == dt, f"{path}: grad_dtype {f.attrs['grad_dtype']}")
            cal = f.attrs["calibration_bucket_bytes"] if a.calibrated else None
            got[dt] = (f["iterations/bytes_sent"][:], cal)
    s32, s16 = got["fp32"][0], got["bf16"][0]
    sent = (s32 > 0).all() if a.every else (s32 > 0).any()
    expect(sent, f"{a.fp32}: {'not every rank and iteration' if a.every else 'nothing'} sent "
                 f"bytes: {s32}")
    ratio = s16[s32 > 0] / s32[s32 > 0]
    expect(np.all(ratio == 0.5), f"{a.bf16}: bytes_sent bf16/fp32 {ratio}")
    expect(np.all(s16[s32 == 0] == 0), f"{a.bf16}: bytes sent where fp32 sent none")
    line = f"ok: {a.bf16}: bytes_sent bf16/fp32 = 0.5 on every exchanging rank and iteration"
    if a.calibrated:
        expect(got["bf16"][1] * 2 == got["fp32"][1],
               f"calibration bucket {got['fp32'][1]} -> {got['bf16'][1]} bytes: not halved")
        line += f"; calibration bucket {got['fp32'][1]:.0f} -> {got['bf16'][1]:.0f} bytes"
    print(line)


def busbw(a):
    """nccl-tests' bus bandwidth: bytes = the gradient (4 x param_count), busbw = bytes /
    calibrated seconds x F, F stored within 1e-12 (allreduce over P: 2(P-1)/P; hier: the node's
    reduce-scatter and all-gather, (L-1)/L each, plus the allreduce of a 1/L shard across N
    nodes, 2(N-1)/N / L); busbw within 1e-9 of that; every bytes_sent the gradient."""
    with h5(a.file) as f:
        at, n = f.attrs, int(f.attrs["param_count"])
        expect(abs(at["calibration_busbw_factor"] - a.factor) < 1e-12,
               f"{a.file}: busbw factor {at['calibration_busbw_factor']}, expected {a.factor}")
        want = 4 * n / at["calibration_exchange_s"] * a.factor
        expect(abs(at["calibration_busbw"] - want) <= 1e-9 * want,
               f"{a.file}: busbw {at['calibration_busbw']}, expected {want}")
        sent = f["iterations/bytes_sent"][:]
        expect((sent == 4 * n).all(), f"{a.file}: bytes_sent {np.unique(sent)}, not {4 * n}")
        print(f"ok: {a.file}: busbw {at['calibration_busbw']:.4g} B/s = gradient / calibrated "
              f"time x {a.factor:g}")


def overlap(a):
    """Overlapped buckets over transport T: /iterations/exchange_hidden (P, N), finite, >= 0, in
    seconds, somewhere > 0; the calibration (default --calibrate-iters 5: the transport alone on
    the run's buckets) took 1 to 5 iterations, 0 to 10 s (catches a hang; 1 s was exceeded on a
    loaded 2-core machine), buckets of B bytes, measured as a training iteration's exchange
    starts (comm/calibrate.c) and saying so."""
    with h5(a.file) as f:
        at = f.attrs
        expect(text(at["transport"]) == a.transport, f"{a.file}: transport {at['transport']}")
        h = f["iterations/exchange_hidden"][:]
        expect(h.shape == (a.ranks, a.iters) and np.isfinite(h).all() and (h >= 0).all(),
               f"{a.file}: exchange_hidden {h}")
        expect((h > 0).any(), "overlapped buckets, yet no exchange time before the end of backward")
        expect(f["iterations/exchange_hidden"].attrs["units"] == "s", "exchange_hidden units")
        expect(1 <= at["calibration_iters"] <= 5, f"calibration_iters {at['calibration_iters']}")
        expect(0 < at["calibration_exchange_s"] < 10,
               f"calibration_exchange_s {at['calibration_exchange_s']}")
        expect(at["calibration_bucket_bytes"] == a.bucket_bytes,
               f"calibration_bucket_bytes {at['calibration_bucket_bytes']}, not {a.bucket_bytes}")
        method = text(at["calibration_method"])
        expect(method.startswith("after-backward:"), f"calibration_method {method}")
    print(f"ok: {a.file}: exchange_hidden > 0 with overlapped buckets; calibration stored")


def alone(a):
    """One rank: exchange_hidden 0 everywhere (nothing to hide), calibration_iters 0 and
    calibration_method none (nothing to calibrate)."""
    with h5(a.file) as f:
        expect((f["iterations/exchange_hidden"][:] == 0).all(), "1 rank: nothing to hide")
        expect(f.attrs["calibration_iters"] == 0, "1 rank: nothing to calibrate")
        method = text(f.attrs["calibration_method"])
        expect(method == "none", f"1 rank: calibration_method {method}")
    print(f"ok: {a.file}: exchange_hidden 0 without exchange, nothing calibrated")


def host(a):
    """host_cores is this host's CPU count, host_ranks_max R, oversubscribed 1 exactly when R
    exceeds the cores (one thread per rank)."""
    cores = os.cpu_count()
    with h5(a.file) as f:
        at = f.attrs
        expect(at["host_cores"] == cores and at["host_ranks_max"] == a.ranks,
               f"{a.file}: host_cores {at['host_cores']} (here {cores}), host_ranks_max "
               f"{at['host_ranks_max']} (expected {a.ranks})")
        expect(at["oversubscribed"] == int(a.ranks > cores),
               f"{a.file}: oversubscribed {at['oversubscribed']}, {a.ranks} ranks on {cores} cores")
    print(f"ok: {a.file}: {a.ranks} ranks on {cores} cores recorded")


def progress(a):
    """config_json's progress is thread; where R ranks x (1 compute + 1 progress thread) exceed
    this host's cores, the file says oversubscribed."""
    with h5(a.file) as f:
        cfg = text(f.attrs["config_json"])
        expect(json.loads(cfg)["progress"] == "thread", f"{a.file}: {cfg}")
        if 2 * a.ranks > os.cpu_count():
            expect(f.attrs["oversubscribed"] == 1, f"{a.file}: not oversubscribed: "
                                                   f"{dict(f.attrs)}")
    print(f"ok: {a.file}: --progress thread recorded")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    need = {"required": True}
    command(sub, invariants, ("file",))
    command(sub, mixed_lag, ("file",), ("slow", {"type": int}))
    command(sub, straggler, ("file",), ("ms",))
    command(sub, throughput, ("sync",), ("others", {"nargs": "+"}))
    command(sub, rounding, ("params", {"nargs": "+"}), ("--ref", need), ("--init", need),
            ("--fp32", need))
    command(sub, halves, ("fp32",), ("bf16",), ("--calibrated", {"action": "store_true"}),
            ("--every", {"action": "store_true"}))
    command(sub, busbw, ("file",), ("--factor", {"type": float, **need}))
    command(sub, overlap, ("file",), ("--transport", need), ("--ranks", {"type": int, **need}),
            ("--iters", {"type": int, **need}), ("--bucket-bytes", {"type": int, **need}))
    command(sub, alone, ("file",))
    command(sub, host, ("file",), ("--ranks", {"type": int, **need}))
    command(sub, progress, ("file",), ("--ranks", {"type": int, **need}))
    main(ap)
