"""check_profile.py - --profile-layers' /profile and the roofline (docs/hdf5-layout.md), against
the layer table of `dtbench --dry-run` (tests/test_profile_layers.sh). Exit 0 when the check
holds, 1 with one line.

  layers FILE TABLE --ranks P  a column per layer of TABLE, N rows per rank from the first
                               measured iteration; each rank's layers' times adding up to its
                               phases; profile_cost only in the profiled iterations
  roofline FILE TABLE          each layer's FLOPs and least bytes per call as formulas from
                               TABLE's shapes say (fp32: 4 bytes a value); the peaks measured
  rates FILE SUMMARY_JSON      `dtbench-analyze summary --json`'s GFLOP/s, GB/s, shares of the
                               peaks and bound: the file's amounts over its times and peaks
"""
import json
import re

import numpy as np

from checkutil import command, die, expect, h5, main, parser, text


def layers(a):
    """/profile's first_iteration is the warmup, its layer and kind columns TABLE's rows;
    forward and backward of shape (P, N, layers). On each rank the layers it times (finite in
    the first row) are finite and >= 0 in every row, the others NaN; profile_cost > 0 in the N
    profiled iterations and 0 in every other; on one rank, or a rank timing every layer, the
    layers' times of each iteration add up to 70-100% of its forward (backward) phase. With
    P > 1 every layer is timed by some rank."""
    with open(a.table) as t:
        rows = [l.split() for l in t if l.strip()[:1].isdigit()]
    names, kinds = [r[1] for r in rows], [r[2] for r in rows]
    with h5(a.file) as f:
        p, it = f["profile"], f["iterations"]
        first, n = int(p.attrs["first_iteration"]), int(p.attrs["iterations"])
        expect(first == it.attrs["warmup"], f"{a.file}: first_iteration {first}, warmup "
                                            f"{it.attrs['warmup']}")
        expect([text(x) for x in p["layer"][:]] == names,
               f"{a.file}: layers {list(p['layer'][:])}, the table's {names}")
        expect([text(x) for x in p["kind"][:]] == kinds, f"{a.file}: kinds {list(p['kind'][:])}")
        fw, bw = p["forward"][:], p["backward"][:]
        expect(fw.shape == bw.shape == (a.ranks, n, len(names)),
               f"{a.file}: /profile/forward {fw.shape}, backward {bw.shape}")
        cost = it["profile_cost"][:]
        for r in range(a.ranks):
            held = np.isfinite(fw[r, 0])
            expect(held.any() and np.isfinite(fw[r][:, held]).all()
                   and np.isfinite(bw[r][:, held]).all(), f"rank {r}: a timed layer not finite")
            expect((fw[r][:, held] >= 0).all() and (bw[r][:, held] >= 0).all(),
                   f"rank {r}: a negative time")
            expect(np.isnan(fw[r][:, ~held]).all() and np.isnan(bw[r][:, ~held]).all(),
                   f"rank {r}: a layer timed in some rows only")
            c = cost[r]
            expect((c[first:first + n] > 0).all() and (c[:first] == 0).all()
                   and (c[first + n:] == 0).all(), f"rank {r}: profile_cost {c}")
            share = c[first:first + n].sum() / it["total"][r, first:first + n].sum()
            for name, t, phase in (("forward", fw[r], it["forward"][r]),
                                   ("backward", bw[r], it["backward"][r])):
                s = np.nansum(t, axis=1) / phase[first:first + n]
                if a.ranks == 1 or held.all():  # a pipeline stage's phases also hold messages
                    expect(((s >= 0.7) & (s <= 1.0 + 1e-6)).all(),
                           f"rank {r}: the layers' {name} times are {s} of the phase")
            print(f"ok: rank {r}: {held.sum()} layers timed in {n} iterations; forward sums "
                  f"{np.nansum(fw[r], axis=1) / it['forward'][r, first:first + n]} of the phase; "
                  f"the marks cost {100 * share:.3f}% of those iterations")
        if a.ranks > 1:
            expect(np.isfinite(fw[:, 0, :]).any(axis=0).all(), "a layer no rank timed")


class Table:
    """The dry run's layers: per sample their output size, out channels, parameters, FLOPs, and
    the rows they read."""

    def __init__(self, path):
        with open(path) as t:
            doc = t.read()
        self.c, self.h, self.w = map(int, re.search(r"input \[(\d+),(\d+),(\d+)\]", doc).groups())
        self.rows = []
        for l in doc.splitlines():
            f = l.split()
            if not f or not f[0].isdigit():
                continue
            oc, oh, ow = map(int, re.match(r"\[(\d+),(\d+),(\d+)\]", f[3]).groups())
            self.rows.append(dict(name=f[1], kind=f[2], out=oc * oh * ow, oc=oc,
                                  params=int(f[4]), flops=float(f[5]),
                                  inputs=f[7].split(",") if len(f) > 7 else None))
        self.names = [r["name"] for r in self.rows]
        self.size = {r["name"]: r["out"] for r in self.rows}

    def srcs(self, j):
        """The rows row j reads (None: the data)."""
        return self.rows[j]["inputs"] or ([self.names[j - 1]] if j else [None])

    def ins(self, j):
        """The inputs' per-sample sizes, and whether each is a layer's (not the data)."""
        s = self.srcs(j)
        return [self.size[x] if x else self.c * self.h * self.w for x in s], \
            [x is not None for x in s]

    def unfused(self, j, b, dx_to):
        """Row j alone: forward FLOPs, backward FLOPs, forward bytes, backward bytes (b samples);
        dx_to: whether its input gradient is written (not for the data)."""
        r = self.rows[j]
        i, o, P, F, kind = sum(self.ins(j)[0]), r["out"], r["params"], r["flops"], r["kind"]
        if kind in ("conv", "fc"):
            weights = F * r["oc"] / (2 * o)  # F = 2 x weights x output pixels; the rest is bias
            return (b * F, b * F * (2 if dx_to else 1), 4 * (b * (i + o) + P),
                    4 * (b * (o + i + (i if dx_to else 0)) + P + (weights if dx_to else 0)))
        if kind == "maxpool":
            return b * F, b * o, 4 * b * (i + o), 4 * b * (o + i)
        if kind == "gavgpool":
            return b * i, b * i, 4 * b * (i + o), 4 * b * (o + i)
        if kind == "relu":
            return b * i, b * i, 4 * b * (i + o), 4 * b * 3 * o
        if kind == "batchnorm":  # gamma and beta: P = 2c; forward: x read twice (statistics)
            return b * 5 * i, b * 8 * i, 4 * (b * (2 * i + o) + P), \
                4 * (b * (o + i + i) + P + P // 2)
        if kind == "add":
            return b * o, 0.0, 4 * b * (i + o), 4 * b * (o + i)
        die(f"no formula for a layer of kind {kind}")

    def want(self, j, b, fw):
        """Row j's four amounts as the shapes say; fw: one rank's /profile/forward. A batch
        norm whose reader (a ReLU, or a residual add fusing its first batch norm with its ReLU,
        src/model/model_fuse.c) was timed 0 ran with it: the group's FLOPs, and its bytes without
        the tensors handed inside it."""
        rows, names = self.rows, self.names
        want = np.array(self.unfused(j, b, all(self.ins(j)[1])))
        k = next((k for k in range(len(rows)) if names[j] in self.srcs(k)), j)  # its reader
        add = rows[k]["kind"] == "add"
        first_bn = add and min(names.index(s) for s in self.srcs(k)
                               if rows[names.index(s)]["kind"] == "batchnorm") == j
        if rows[j]["kind"] == "batchnorm" and (fw[:, k] == 0).all() and (first_bn or not add):
            o, P = rows[j]["out"], rows[j]["params"]
            want[0] += b * o * (2 if add else 1)
            want[1] += b * o
            want[2] = 4 * (b * ((4 if add else 3) * o) + P)  # x twice, (z,) y
            want[3] = 4 * (b * (o + o + o + (o if add else 0) + o) + P + P // 2)
        return want


def roofline(a):
    """On each rank: forward_flop, backward_flop, forward_bytes, backward_bytes NaN for the
    layers it does not time, finite for those it does; a layer timed 0 (fused into another row)
    holds 0; every other its amounts as Table.want computes them from TABLE's shapes and the
    file's batch_per_rank, within rtol 1e-12 (a stage's first layer writes its input gradient
    for the stage before). peak_bandwidth within 1e8-1e13 B/s, peak_flops within 1e8-1e15, both
    "measured at start: ..."."""
    tab = Table(a.table)
    with h5(a.file) as f:
        p = f["profile"]
        batch = int(f.attrs["batch_per_rank"])
        got = np.stack([p[n][:] for n in ("forward_flop", "backward_flop", "forward_bytes",
                                          "backward_bytes")])  # [4, ranks, layers]
        fw, bw = p["forward"][:], p["backward"][:]
        for r in range(got.shape[1]):
            held = np.isfinite(fw[r, 0])
            expect(np.isnan(got[:, r, ~held]).all() and np.isfinite(got[:, r, held]).all(),
                   f"rank {r}: amounts {got[:, r]} for its timed layers {held}")
            first = int(np.argmax(held))
            for j in np.flatnonzero(held):
                if (fw[r, :, j] == 0).all() and (bw[r, :, j] == 0).all():  # fused into another
                    expect((got[:, r, j] == 0).all(), f"rank {r}: {tab.names[j]} fused, yet "
                                                      f"amounts {got[:, r, j]}")
                    continue
                want = tab.want(j, batch, fw[r])
                expect(np.allclose(got[:, r, j], want, rtol=1e-12),
                       f"rank {r}: {tab.names[j]} amounts {got[:, r, j]}, expected {want}")
                if j == first and j > 0:
                    print(f"ok: rank {r}: {tab.names[j]} writes its input gradient for the "
                          f"stage before")
            print(f"ok: rank {r}: {held.sum()} layers' FLOPs and bytes as the shapes say "
                  f"(batch {batch})")
            bwp, flp = p["peak_bandwidth"][r], p["peak_flops"][r]
            how = [text(p[n][r]) for n in ("peak_bandwidth_method", "peak_flops_method")]
            expect(1e8 < bwp < 1e13 and 1e8 < flp < 1e15, f"rank {r}: peaks {bwp}, {flp}")
            expect(all(x.startswith("measured at start: ") for x in how), f"rank {r}: {how}")
            print(f"ok: rank {r}: peaks {bwp / 1e9:.3g} GB/s ({how[0]}), {flp / 1e9:.4g} "
                  f"GFLOP/s ({how[1]})")


def rates(a):
    """For each layer of the summary: its time t (forward + backward, mean over ranks and rows),
    FLOPs and bytes (mean over ranks); t not > 0: no rates; else GFLOP/s, GB/s, and their shares
    of the median peaks are the amounts over t (and over the peaks) within rtol 1e-9, the shares
    within (0, 2] and (0, 100] (a cache-resident layer may beat the memory), bound memory where
    FLOPs/bytes is under the peaks' ratio, else compute. At least 5 layers shown."""
    with open(a.summary) as s:
        summary = json.load(s)["layers"]
    with h5(a.file) as f:
        p = f["profile"]
        names = [text(x) for x in p["layer"][:]]
        t = np.nanmean(p["forward"][:] + p["backward"][:], axis=(0, 1))
        flop = np.nanmean(p["forward_flop"][:] + p["backward_flop"][:], axis=0)
        moved = np.nanmean(p["forward_bytes"][:] + p["backward_bytes"][:], axis=0)
        peak_bw, peak_fl = np.median(p["peak_bandwidth"][:]), np.median(p["peak_flops"][:])
    shown = 0
    for x in summary["layers"]:
        j, r = names.index(x["layer"]), x["roofline"]
        if not t[j] > 0:
            expect(r["gflops"] is None and r["gbps"] is None,
                   f"{x['layer']}: not timed, yet rates {r}")
            continue
        expect(np.isclose(r["gflops"] * 1e9, flop[j] / t[j], rtol=1e-9),
               f"{x['layer']}: GFLOP/s {r['gflops']}, expected {flop[j] / t[j] / 1e9}")
        expect(np.isclose(r["gbps"] * 1e9, moved[j] / t[j], rtol=1e-9),
               f"{x['layer']}: GB/s {r['gbps']}, expected {moved[j] / t[j] / 1e9}")
        expect(np.isclose(r["compute_share"], flop[j] / t[j] / peak_fl, rtol=1e-9),
               f"{x['layer']}: compute share {r['compute_share']}, expected "
               f"{flop[j] / t[j] / peak_fl}")
        expect(np.isclose(r["bandwidth_share"], moved[j] / t[j] / peak_bw, rtol=1e-9),
               f"{x['layer']}: bandwidth share {r['bandwidth_share']}, expected "
               f"{moved[j] / t[j] / peak_bw}")
        # positive and finite; no upper bound: the peaks are measured at start and the layers
        # later, and on a loaded machine either may take a larger share of the cores
        expect(0 < r["compute_share"] < np.inf and 0 < r["bandwidth_share"] < np.inf,
               f"{x['layer']}: shares out of range: {r}")
        expect(r["bound"] == ("memory" if flop[j] / moved[j] < peak_fl / peak_bw else "compute"),
               f"{x['layer']}: bound {r['bound']}, FLOP/byte {flop[j] / moved[j]}, the peaks' "
               f"{peak_fl / peak_bw}")
        shown += 1
    expect(shown >= 5, f"{shown} layers with rates: {summary}")
    print(f"ok: {shown} layers' GFLOP/s and GB/s are their amounts over their times; shares of "
          f"{peak_fl / 1e9:.4g} GFLOP/s and {peak_bw / 1e9:.3g} GB/s")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, layers, ("file",), ("table",), ("--ranks", {"type": int, "required": True}))
    command(sub, roofline, ("file",), ("table",))
    command(sub, rates, ("file",), ("summary",))
    main(ap)
