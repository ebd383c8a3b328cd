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
#   5. docs/hdf5-layout.md documents /profile and profile_cost.
. "$(dirname "$0")/lib.sh"

DOC="$TESTS_SRCDIR/../docs/hdf5-layout.md"
grep -q '^| `/profile/forward`' "$DOC" || fail "docs/hdf5-layout.md does not document /profile"
grep -q 'profile_cost' "$DOC" || fail "docs/hdf5-layout.md does not document profile_cost"

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

common="--dataset synthetic --iters 6 --warmup 2 --profile-layers 3"
"$DTBENCH" --model lenet --dataset synthetic --dry-run >"$WORK/lenet.txt"
run_np 1 --model lenet $common --batch 32 --output "$WORK/lenet.h5" >/dev/null
check "$WORK/lenet.h5" "$WORK/lenet.txt" 1
pass "lenet: a row per layer, adding up to the phases"

"$DTBENCH" --model resnet8 --dataset synthetic --dry-run >"$WORK/resnet8.txt"
run_np 2 --model resnet8 $common --batch 16 --output "$WORK/resnet8.h5" >/dev/null
check "$WORK/resnet8.h5" "$WORK/resnet8.txt" 2
pass "resnet8 on 2 ranks: every layer timed on each rank"

run_np 2 --model lenet $common --batch 32 --parallel model --output "$WORK/pipe.h5" >/dev/null
check "$WORK/pipe.h5" "$WORK/lenet.txt" 2
pass "lenet as 2 pipeline stages: each rank its own layers, together all"

cd "$WORK" # expect_bad's files
expect_bad 1 "--profile-layers: 5 is not accepted with --iters 3" --model lenet --dataset synthetic \
    --iters 3 --profile-layers 5 --output bad.h5
expect_bad 2 "--profile-layers: not accepted with --microbatches 2" --model lenet \
    --dataset synthetic --iters 3 --profile-layers 1 --parallel model --microbatches 2 --output bad.h5
