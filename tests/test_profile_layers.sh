#!/usr/bin/env bash
# test_profile_layers.sh - --profile-layers N on the CPU (the clock; CUDA events on a GPU, the same
# code path through the backend's timer):
#   1. LeNet on 1 rank, ResNet-8 (batch norm, residual add, global pooling) on 2 ranks: /profile
#      holds one column per layer, named and typed as --dry-run lists them, N rows per rank from
#      the first measured iteration; every time finite and >= 0; per iteration the layers' forward
#      times add up to the forward phase (less the loss: 70-100%), likewise backward;
#   2. LeNet as a 2-stage pipeline (--parallel model): each rank times its own layers, NaN for the
#      others, and together they cover every layer;
#   3. the cost: /iterations/profile_cost (host time of the marks) is > 0 in exactly the profiled
#      iterations, 0 elsewhere, and its share of those iterations is printed;
#   4. refusals (exit 2, one line): more profiled than measured iterations, several micro-batches;
#   5. docs/hdf5-layout.md documents /profile and profile_cost, and the roofline's data sets;
#   6. the roofline: each layer's FLOPs and least bytes per call against formulas written here from
#      --dry-run's shapes (LeNet: a convolution on the data, which writes no input gradient, one
#      that does, pooling, fully connected, ReLU; a pipeline stage's first layer, whose input
#      gradient goes to the stage before; ResNet-8's batch norms run with their ReLU, and their
#      residual add, as one row); the peaks measured at start (positive, said how); the summary's
#      GFLOP/s and GB/s are those amounts over the layers' times, its shares those over the peaks.
. "$(dirname "$0")/lib.sh"

DOC="$TESTS_SRCDIR/../docs/hdf5-layout.md"
grep -q '^| `/profile/forward`' "$DOC" || fail "docs/hdf5-layout.md does not document /profile"
grep -q 'profile_cost' "$DOC" || fail "docs/hdf5-layout.md does not document profile_cost"
for set in forward_bytes backward_bytes forward_flop backward_flop peak_bandwidth peak_flops \
    peak_bandwidth_method peak_flops_method; do
    grep -q "^| \`/profile/$set\`" "$DOC" ||
        fail "docs/hdf5-layout.md does not document /profile/$set"
done

check() { # check FILE DRYRUN-TABLE RANKS: the layout and the sums
    "$PYTHON" - "$@" <<'PY'
import sys, h5py, numpy as np
path, table, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [l.split() for l in open(table) if l.strip()[:1].isdigit()]
names = [r[1] for r in rows]
kinds = [r[2] for r in rows]
with h5py.File(path, "r") as f:
    p, it = f["profile"], f["iterations"]
    first, n = int(p.attrs["first_iteration"]), int(p.attrs["iterations"])
    assert first == it.attrs["warmup"], (first, it.attrs["warmup"])
    assert [x.decode() for x in p["layer"][:]] == names, (list(p["layer"][:]), names)
    assert [x.decode() for x in p["kind"][:]] == kinds
    fw, bw = p["forward"][:], p["backward"][:]
    assert fw.shape == bw.shape == (ranks, n, len(names)), fw.shape
    cost = it["profile_cost"][:]
    for r in range(ranks):
        held = np.isfinite(fw[r, 0])
        assert held.any() and (np.isfinite(fw[r][:, held]).all() and np.isfinite(bw[r][:, held]).all())
        assert (fw[r][:, held] >= 0).all() and (bw[r][:, held] >= 0).all()
        assert (np.isnan(fw[r][:, ~held]).all() and np.isnan(bw[r][:, ~held]).all())
        c = cost[r]
        assert (c[first:first + n] > 0).all() and (c[:first] == 0).all() and (c[first + n:] == 0).all(), c
        share = c[first:first + n].sum() / it["total"][r, first:first + n].sum()
        for name, t, phase in (("forward", fw[r], it["forward"][r]), ("backward", bw[r], it["backward"][r])):
            s = np.nansum(t, axis=1) / phase[first:first + n]
            if ranks == 1 or held.all():  # a pipeline stage's phases also hold messages
                assert ((s >= 0.7) & (s <= 1.0 + 1e-6)).all(), (name, s)
        print(f"ok: rank {r}: {held.sum()} layers timed in {n} iterations; forward sums "
              f"{np.nansum(fw[r], axis=1) / it['forward'][r, first:first + n]} of the phase; "
              f"the marks cost {100 * share:.3f}% of those iterations")
    if ranks > 1:
        assert np.isfinite(fw[:, 0, :]).any(axis=0).all(), "a layer no rank timed"
PY
}

# roofline FILE DRYRUN-TABLE: each layer's amounts against formulas from the table's shapes
# (fp32 on the CPU: 4 bytes a value), and the peaks
roofline() {
    "$PYTHON" - "$@" <<'PY'
import math, re, sys, h5py, numpy as np
path, table = sys.argv[1], sys.argv[2]
text = open(table).read()
c, h, w = map(int, re.search(r"input \[(\d+),(\d+),(\d+)\]", text).groups())
rows = []  # name, kind, values out per sample, out channels, parameters, FLOPs per sample, inputs
for l in text.splitlines():
    f = l.split()
    if not f or not f[0].isdigit():
        continue
    oc, oh, ow = map(int, re.match(r"\[(\d+),(\d+),(\d+)\]", f[3]).groups())
    rows.append(dict(name=f[1], kind=f[2], out=oc * oh * ow, oc=oc, params=int(f[4]),
                     flops=float(f[5]), inputs=f[7].split(",") if len(f) > 7 else None))
names = [r["name"] for r in rows]
size = {r["name"]: r["out"] for r in rows}
def srcs(j):  # the rows it reads (None: the data)
    return rows[j]["inputs"] or ([names[j - 1]] if j else [None])
def ins(j):  # the inputs' per-sample sizes, and whether each is a layer's (not the data)
    return [size[s] if s else c * h * w for s in srcs(j)], [s is not None for s in srcs(j)]
def unfused(j, b, dx_to):
    """One row alone: forward FLOPs, backward FLOPs, forward bytes, backward bytes (b samples);
    dx_to: whether its input gradient is written (not for the data)."""
    r = rows[j]
    i, o, P, F, kind = sum(ins(j)[0]), r["out"], r["params"], r["flops"], r["kind"]
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
    if kind == "batchnorm":  # gamma and beta: P = 2c
        return b * 5 * i, b * 8 * i, 4 * (b * (i + o) + P), 4 * (b * (o + i + i) + P + P // 2)
    if kind == "add":
        return b * o, 0.0, 4 * b * (i + o), 4 * b * (o + i)
    raise AssertionError(kind)
with h5py.File(path, "r") as f:
    p = f["profile"]
    batch = int(f.attrs["batch_per_rank"])
    got = np.stack([p[n][:] for n in ("forward_flop", "backward_flop", "forward_bytes",
                                      "backward_bytes")])  # [4, ranks, layers]
    fw, bw = p["forward"][:], p["backward"][:]
    ranks = got.shape[1]
    for r in range(ranks):
        held = np.isfinite(fw[r, 0])
        assert np.isnan(got[:, r, ~held]).all() and np.isfinite(got[:, r, held]).all(), got[:, r]
        first = int(np.argmax(held))
        for j in np.flatnonzero(held):
            if (fw[r, :, j] == 0).all() and (bw[r, :, j] == 0).all():  # fused into another row
                assert (got[:, r, j] == 0).all(), (names[j], got[:, r, j])
                continue
            dx_to = all(ins(j)[1])
            want = np.array(unfused(j, batch, dx_to))
            k = next((k for k in range(len(rows)) if names[j] in srcs(k)), j)  # its reader
            add = rows[k]["kind"] == "add"
            # an add of two batch norms fuses with the first (src/model/model_fuse.c)
            first_bn = add and min(names.index(s) for s in srcs(k)
                                   if rows[names.index(s)]["kind"] == "batchnorm") == j
            if rows[j]["kind"] == "batchnorm" and (fw[r, :, k] == 0).all() and \
                    (first_bn or not add):
                # run with the ReLU reading it (or the residual add and its ReLU): the group's
                # FLOPs; its bytes without the tensors handed inside it
                o, P = rows[j]["out"], rows[j]["params"]
                want[0] += batch * o * (2 if add else 1)
                want[1] += batch * o
                want[2] = 4 * (batch * ((3 if add else 2) * o) + P)
                want[3] = 4 * (batch * (o + o + o + (o if add else 0) + o) + P + P // 2)
            assert np.allclose(got[:, r, j], want, rtol=1e-12), (names[j], got[:, r, j], want)
            if j == first and j > 0:
                print(f"ok: rank {r}: {names[j]} writes its input gradient for the stage before")
        print(f"ok: rank {r}: {held.sum()} layers' FLOPs and bytes as the shapes say "
              f"(batch {batch})")
        bwp, flp = p["peak_bandwidth"][r], p["peak_flops"][r]
        how = [p[n][r].decode() for n in ("peak_bandwidth_method", "peak_flops_method")]
        assert 1e8 < bwp < 1e13 and 1e8 < flp < 1e15, (bwp, flp)
        assert all(x.startswith("measured at start: ") for x in how), how
        print(f"ok: rank {r}: peaks {bwp / 1e9:.3g} GB/s ({how[0]}), {flp / 1e9:.4g} GFLOP/s "
              f"({how[1]})")
PY
}

# rates FILE: the summary's roofline columns against the file's amounts, times and peaks
rates() {
    analyze summary --json "$1" >"$WORK/summary.json" || fail "dtbench-analyze summary $1"
    analyze summary "$1" >"$WORK/summary.txt" || fail "dtbench-analyze summary $1 (text)"
    grep -q "GFLOP/s.*GB/s.*%FLOP.*%BW.*bound" "$WORK/summary.txt" &&
        grep -q "roofline: peak compute" "$WORK/summary.txt" ||
        fail "$1: no roofline columns in the summary: $(cat "$WORK/summary.txt")"
    "$PYTHON" - "$1" "$WORK/summary.json" <<'PY'
import json, sys, h5py, numpy as np
path, summary = sys.argv[1], json.load(open(sys.argv[2]))["layers"]
with h5py.File(path, "r") as f:
    p = f["profile"]
    names = [x.decode() for x in p["layer"][:]]
    t = np.nanmean(p["forward"][:] + p["backward"][:], axis=(0, 1))
    flop = np.nanmean(p["forward_flop"][:] + p["backward_flop"][:], axis=0)
    moved = np.nanmean(p["forward_bytes"][:] + p["backward_bytes"][:], axis=0)
    peak_bw, peak_fl = np.median(p["peak_bandwidth"][:]), np.median(p["peak_flops"][:])
shown = 0
for x in summary["layers"]:
    j, r = names.index(x["layer"]), x["roofline"]
    if not t[j] > 0:
        assert r["gflops"] is None and r["gbps"] is None, x
        continue
    assert np.isclose(r["gflops"] * 1e9, flop[j] / t[j], rtol=1e-9), (x, flop[j] / t[j])
    assert np.isclose(r["gbps"] * 1e9, moved[j] / t[j], rtol=1e-9), (x, moved[j] / t[j])
    assert np.isclose(r["compute_share"], flop[j] / t[j] / peak_fl, rtol=1e-9), x
    assert np.isclose(r["bandwidth_share"], moved[j] / t[j] / peak_bw, rtol=1e-9), x
    # a cache-resident layer may beat the memory's bandwidth, not the measured product by much
    assert 0 < r["compute_share"] <= 2 and 0 < r["bandwidth_share"] <= 100, x
    assert r["bound"] == ("memory" if flop[j] / moved[j] < peak_fl / peak_bw else "compute"), x
    shown += 1
assert shown >= 5, summary
print(f"ok: {shown} layers' GFLOP/s and GB/s are their amounts over their times; shares of "
      f"{peak_fl / 1e9:.4g} GFLOP/s and {peak_bw / 1e9:.3g} GB/s")
PY
}

common="--dataset synthetic --iters 6 --warmup 2 --profile-layers 3"
"$DTBENCH" --model lenet --dataset synthetic --dry-run >"$WORK/lenet.txt"
run_np 1 --model lenet $common --batch 32 --output "$WORK/lenet.h5" >/dev/null
check "$WORK/lenet.h5" "$WORK/lenet.txt" 1
pass "lenet: a row per layer, adding up to the phases"
roofline "$WORK/lenet.h5" "$WORK/lenet.txt" || fail "lenet: the roofline's amounts or peaks"
rates "$WORK/lenet.h5" || fail "lenet: the summary's roofline columns"
pass "lenet: each layer's FLOPs and bytes as its shapes say; rates and shares of measured peaks"

"$DTBENCH" --model resnet8 --dataset synthetic --dry-run >"$WORK/resnet8.txt"
run_np 2 --model resnet8 $common --batch 16 --output "$WORK/resnet8.h5" >/dev/null
check "$WORK/resnet8.h5" "$WORK/resnet8.txt" 2
pass "resnet8 on 2 ranks: every layer timed on each rank"
roofline "$WORK/resnet8.h5" "$WORK/resnet8.txt" || fail "resnet8: the roofline's amounts"
pass "resnet8: batch norms run with their ReLU (and residual add) hold the group's amounts"

run_np 2 --model lenet $common --batch 32 --parallel model --output "$WORK/pipe.h5" >/dev/null
check "$WORK/pipe.h5" "$WORK/lenet.txt" 2
pass "lenet as 2 pipeline stages: each rank its own layers, together all"
roofline "$WORK/pipe.h5" "$WORK/lenet.txt" || fail "lenet as 2 stages: the roofline's amounts"
pass "lenet as 2 stages: each rank the amounts of its own layers"

cd "$WORK" # expect_bad's files
expect_bad 1 "--profile-layers: 5 is not accepted with --iters 3" --model lenet --dataset synthetic \
    --iters 3 --profile-layers 5 --output bad.h5
expect_bad 2 "--profile-layers: not accepted with --microbatches 2" --model lenet \
    --dataset synthetic --iters 3 --profile-layers 1 --parallel model --microbatches 2 --output bad.h5
