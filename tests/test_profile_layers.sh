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

# rates FILE: the summary's roofline columns against the file's amounts, times and peaks
rates() {
    analyze summary --json "$1" >"$WORK/summary.json" || fail "dtbench-analyze summary $1"
    analyze summary "$1" >"$WORK/summary.txt" || fail "dtbench-analyze summary $1 (text)"
    grep -q "GFLOP/s.*GB/s.*%FLOP.*%BW.*bound" "$WORK/summary.txt" &&
        grep -q "roofline: peak compute" "$WORK/summary.txt" ||
        fail "$1: no roofline columns in the summary: $(cat "$WORK/summary.txt")"
    pycheck profile rates "$1" "$WORK/summary.json"
}

common="--dataset synthetic --iters 6 --warmup 2 --profile-layers 3"
"$DTBENCH" --model lenet --dataset synthetic --dry-run >"$WORK/lenet.txt"
run_np 1 --model lenet $common --batch 32 --output "$WORK/lenet.h5" >/dev/null
pycheck profile layers "$WORK/lenet.h5" "$WORK/lenet.txt" --ranks 1
pass "lenet: a row per layer, adding up to the phases"
pycheck profile roofline "$WORK/lenet.h5" "$WORK/lenet.txt" ||
    fail "lenet: the roofline's amounts or peaks"
rates "$WORK/lenet.h5" || fail "lenet: the summary's roofline columns"
pass "lenet: each layer's FLOPs and bytes as its shapes say; rates and shares of measured peaks"

"$DTBENCH" --model resnet8 --dataset synthetic --dry-run >"$WORK/resnet8.txt"
run_np 2 --model resnet8 $common --batch 16 --output "$WORK/resnet8.h5" >/dev/null
pycheck profile layers "$WORK/resnet8.h5" "$WORK/resnet8.txt" --ranks 2
pass "resnet8 on 2 ranks: every layer timed on each rank"
pycheck profile roofline "$WORK/resnet8.h5" "$WORK/resnet8.txt" ||
    fail "resnet8: the roofline's amounts"
pass "resnet8: batch norms run with their ReLU (and residual add) hold the group's amounts"

run_np 2 --model lenet $common --batch 32 --parallel model --output "$WORK/pipe.h5" >/dev/null
pycheck profile layers "$WORK/pipe.h5" "$WORK/lenet.txt" --ranks 2
pass "lenet as 2 pipeline stages: each rank its own layers, together all"
pycheck profile roofline "$WORK/pipe.h5" "$WORK/lenet.txt" ||
    fail "lenet as 2 stages: the roofline's amounts"
pass "lenet as 2 stages: each rank the amounts of its own layers"

cd "$WORK" # expect_bad's files
expect_bad 1 "--profile-layers: 5 is not accepted with --iters 3" --model lenet --dataset synthetic \
    --iters 3 --profile-layers 5 --output bad.h5
expect_bad 2 "--profile-layers: not accepted with --microbatches 2" --model lenet \
    --dataset synthetic --iters 3 --profile-layers 1 --parallel model --microbatches 2 --output bad.h5
