#!/usr/bin/env bash
# test_layer_compare.sh - the layer-by-layer comparison (tests/layer_compare.c) on the CPU:
#   1. every model of the zoo, one training step on the CPU backend against "cpu64" (the same
#      backend with float64 convolutions and fully connected layers: other arithmetic, no
#      Winograd, no fp32 GEMM), each layer on the same inputs (--local): every forward output,
#      the loss, every parameter and input gradient within 1e-5 / 1e-4 (||a-b|| / ||a||); inputs
#      small enough for seconds per model;
#   2. the comparison finds a defect: with a wrong gradient injected into one layer of the second
#      configuration (--inject-grad), it fails and names that layer first, in --local and in
#      --chained mode (where every layer below it differs too);
#   3. 16-bit activations on the CPU (B = fake:bf16 and fake:fp16, tests/act_fake.c: NHWC 16-bit
#      storage around the CPU's kernels, max pooling's first-maximum rule on the rounded values as
#      on a GPU): rounding makes ties in max pooling windows and B routes their gradient to
#      another position than A. Position by position (--pool-positions) AlexNet's pool2 and pool1
#      then differ by 0.0879 and 0.0635 of their norm, over bf16's 0.05 (the numbers an H200 gave
#      for cpu against cuda:bf16); by the windows' maxima and tie groups (tests/pool_ties.h) the
#      models with max pooling pass, every moved maximum a tie.
# The GPU variant (cpu against cuda, every precision) is tests/test_gpu_layer_compare.sh.
. "$(dirname "$0")/lib.sh"

LC=${LAYER_COMPARE:-$(dirname "$DTBENCH")/../tests/layer_compare}
[ -x "$LC" ] || fail "no $LC (make check builds it)"

# model and its CI input: batch 2 (ResNet-50 at 64x64: batch norm over at least 8 values, a
# well-posed normalisation; FCN at 512 features and 100 classes)
specs=("lenet" "fcn5 --input 512,1,1 --classes 100" "fcn8 --input 512,1,1 --classes 100"
    "alexnet --input 3,32,32" "vgg16 --input 3,32,32 --batch 1" "googlenet --input 3,64,64"
    "resnet50 --input 3,64,64" "resnet8 --input 3,32,32" "lstm32" "lstm64"
    "nanogpt-char --input 1,1,32")
for spec in "${specs[@]}"; do
    m=${spec%% *}
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # spec holds options
    "$LC" --model $spec --batch 2 --a cpu --b cpu64 --quiet >"$WORK/$m.txt" 2>&1 || {
        cat "$WORK/$m.txt"
        fail "$m: cpu against cpu64, layer by layer"
    }
    pass "$m: $(tail -1 "$WORK/$m.txt") ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s)"
done

# inject NAME LAYER MODE...: the comparison must fail and name LAYER's params first
inject() {
    local name=$1 layer=$2
    shift 2
    set +e
    "$LC" --model lenet --batch 2 --a cpu --b cpu64 --inject-grad "$layer" "$@" >"$WORK/inj.txt" 2>&1
    local rc=$?
    set -e
    [ "$rc" = 1 ] || { cat "$WORK/inj.txt"; fail "$name: exit status $rc with a wrong gradient in $layer"; }
    local first
    first=$(grep -m1 '^first difference beyond tolerance' "$WORK/inj.txt") ||
        fail "$name: no layer named: $(cat "$WORK/inj.txt")"
    grep -q "layer [0-9]* $layer (.*), output .*, params\$" <<<"$first" || fail "$name: named the wrong layer: $first"
    pass "$name: a wrong gradient in $layer is found: $first"
}
inject "local" conv2
inject "chained" ip1 --chained

# 3. ties that 16-bit storage makes in max pooling
for p in bf16 fp16; do
    for spec in "lenet" "alexnet --input 3,32,32" "googlenet --input 3,64,64"; do
        m=${spec%% *}
        # shellcheck disable=SC2086 # spec holds options
        "$LC" --model $spec --batch 2 --a cpu --b "fake:$p" >"$WORK/$m-$p.txt" 2>&1 || {
            cat "$WORK/$m-$p.txt"
            fail "$m: cpu against fake:$p, max pooling by tie groups"
        }
        moves=$(sed -n 's/.*windows whose first maximum moved: \([0-9]*\), \([0-9]*\) of them ties.*/\1 \2/p' "$WORK/$m-$p.txt")
        [ -n "$moves" ] || fail "$m $p: no max pooling compared by tie groups"
        awk '$1 != $2 {exit 1}' <<<"$moves" || fail "$m $p: a moved maximum that is no tie: $moves"
        pass "$m fake:$p: $(tail -1 "$WORK/$m-$p.txt"); maxima moved by rounding, all ties: $(awk '{s += $1} END {print s}' <<<"$moves")"
    done
done
set +e
"$LC" --model alexnet --input 3,32,32 --batch 2 --a cpu --b fake:bf16 --quiet --pool-positions >"$WORK/pos.txt" 2>&1
rc=$?
set -e
first='^first difference beyond tolerance: layer 6 pool2 (maxpool), output \[32,8,8\], input 0$'
if [ "$rc" != 1 ] || ! grep -q "$first" "$WORK/pos.txt"; then
    cat "$WORK/pos.txt"
    fail "alexnet fake:bf16 --pool-positions: expected pool2's input gradient beyond tolerance (exit $rc)"
fi
pass "alexnet fake:bf16, position by position: $(grep -c BEYOND "$WORK/pos.txt") max pooling gradients beyond tolerance, first pool2 ($(sed -n 's/^6 pool2.*norm rel *\([^ ]*\).*/\1/p' "$WORK/pos.txt"))"
