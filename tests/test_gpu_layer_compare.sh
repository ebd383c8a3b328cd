#!/usr/bin/env bash
# test_gpu_layer_compare.sh - every model of the zoo, one training step on the CPU backend against
# the CUDA backend, layer by layer (tests/layer_compare.c). Skipped (77) without the CUDA backend
# or without a GPU.
#   1. strict fp32, native inputs, each layer on the CPU's inputs (--local): every forward output,
#      the loss, every parameter and input gradient within ||a-b|| / ||a|| <= 1e-5 (forward) and
#      1e-4 (gradients): the CPU backend against float64 (cpu64) stays below 1e-6 on every model;
#   2. ResNet-50 (batch 8), strict fp32, the whole step (--chained): after one SGD step the GPU's
#      parameters may be no farther from the CPU's than 4 times the CPU's own distance from cpu64
#      on the same batch, plus 1e-6. ResNet-50 amplifies rounding through ReLU switches and batch
#      norm: the CPU against cpu64 alone differs by 4.9e-3 there (docs/gpu.md), so a fixed 1e-4
#      cannot hold for it and this bound replaces it (the other models: 1e-4 in one_step of
#      scripts/gpu_session.sh);
#   3. tf32, bf16, fp16 on the CI inputs of tests/test_layer_compare.sh, --local, within the
#      layer tool's tolerances for those precisions (forward / gradients): tf32 5e-3 / 1e-2,
#      bf16 3e-2 / 5e-2, fp16 1e-2 / 2e-2 (16-bit inputs of each product: u = 2^-8 for bf16,
#      2^-11 for fp16 and tf32; fp16 gradients through a loss scale of 1024); bf16 and fp16 in
#      both activation formats: NHWC 16-bit (--act-layout auto) and NCHW fp32 (nchw);
#   4. NHWC bf16 and fp16, one whole step (--chained) of LeNet, ResNet-8 and a GoogLeNet against
#      the CPU's fp32, each tensor within max(the chained tolerance, 4 x its drift on the CPU's
#      16-bit storage model) (tests/check_chained.py).
# Max pooling is compared by its windows' maxima and its gradient per tie group (tests/pool_ties.h):
# where 16-bit storage rounds a window's two largest inputs to one value the GPU routes the
# gradient to the first of them, the CPU to the larger (AlexNet's pool1 and pool2 in bf16 differed
# by 0.064 and 0.088 of their norm position by position; tests/test_layer_compare.sh reproduces
# it on the CPU).
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"

LC=${LAYER_COMPARE:-$(dirname "$DTBENCH")/../tests/layer_compare}
[ -x "$LC" ] || fail "no $LC (make check builds it)"
T=$(nproc 2>/dev/null || echo 4)

# run NAME ARGS...: the comparison, its output in $WORK/NAME.txt; fails the test on a failure
run() {
    local name=$1
    shift
    "$LC" --threads "$T" --quiet "$@" >"$WORK/$name.txt" 2>&1 || {
        cat "$WORK/$name.txt"
        fail "$name: layer_compare $*"
    }
}
# param_diff FILE: the parameters' largest difference after one step, as the tool printed it
param_diff() {
    sed -n 's/^parameters after one SGD step.*max abs difference //p' "$1"
}

native=("resnet50 --batch 8" "lenet --batch 16" "googlenet --batch 4" "vgg16 --batch 2"
    "alexnet --batch 8" "fcn5 --batch 8" "fcn8 --batch 8" "resnet8 --input 3,32,32 --batch 16"
    "lstm32 --batch 8" "lstm64 --batch 8" "nanogpt-char --input 1,1,64 --batch 4"
    "gpt2 --input 1,1,64 --batch 2")
for spec in "${native[@]}"; do
    m=${spec%% *}
    # shellcheck disable=SC2086 # spec holds options
    run "$m-local" --model $spec --a cpu --b cuda
    pass "$m fp32 --local: $(tail -1 "$WORK/$m-local.txt")"
done

# the whole step where a fixed tolerance cannot hold (the other models: gpu_session.sh's one-step
# runs, 1e-4); lines beyond the per-layer tolerances are expected here, the bound is below
m=resnet50
for b in cpu64 cuda; do
    "$LC" --threads "$T" --quiet --chained --model resnet50 --batch 8 --a cpu --b $b >"$WORK/$m-$b.txt" 2>&1 || true
    echo "  $m chained, cpu against $b: $(grep -m1 '^first difference' "$WORK/$m-$b.txt" || echo 'every tensor within')"
done
ref=$(param_diff "$WORK/$m-cpu64.txt") gpu=$(param_diff "$WORK/$m-cuda.txt")
if [ -z "$ref" ] || [ -z "$gpu" ]; then
    cat "$WORK/$m-cpu64.txt" "$WORK/$m-cuda.txt"
    fail "$m --chained did not finish"
fi
awk -v g="$gpu" -v r="$ref" 'BEGIN {exit !(g <= 4 * r + 1e-6)}' ||
    fail "$m: one step on the GPU moved the parameters $gpu from the CPU's, over 4 x $ref (the CPU's own distance from float64) + 1e-6"
pass "$m fp32 --chained: parameters after one step $gpu from the CPU's; the CPU is $ref from float64"

small=("lenet" "fcn5 --input 512,1,1 --classes 100" "alexnet --input 3,32,32"
    "vgg16 --input 3,32,32 --batch 1" "googlenet --input 3,64,64" "resnet50 --input 3,64,64"
    "lstm32" "nanogpt-char --input 1,1,32")
for p in tf32 bf16 bf16:nchw fp16 fp16:nchw; do
    for spec in "${small[@]}"; do
        m=${spec%% *}
        # shellcheck disable=SC2086
        run "$m-$p" --model $spec --batch 2 --a cpu --b "cuda:$p"
        pass "$m $p --local ($(sed -n 's/.*B = [^(]*(\([^)]*\)).*/\1/p' "$WORK/$m-$p.txt")): $(tail -1 "$WORK/$m-$p.txt")"
    done
done

# 4. one whole step (--chained) in NHWC bf16/fp16 against the CPU's fp32: LeNet, ResNet-8 and a
#    GoogLeNet on 64x64 inputs; the format must be the one asked for. How far a whole 16-bit step
#    drifts from fp32 depends on the network's depth, so each tensor is held to max(the layer
#    tool's chained tolerance: 5e-2 forward, 2.5e-1 gradients, 4 x the same tensor's drift on
#    the CPU's own 16-bit storage model, layer_compare's fake:PREC, run here on the same step)
#    (tests/check_chained.py): the fake's GoogLeNet drifts 0.37 at its first weight gradient
for p in bf16 fp16; do
    for spec in "lenet --batch 16" "resnet8 --input 3,32,32 --batch 16" "googlenet --input 3,64,64 --batch 4"; do
        m=${spec%% *}
        # shellcheck disable=SC2086
        "$LC" --threads "$T" --chained --model $spec --a cpu --b "fake:$p" \
            >"$WORK/$m-$p-fake.txt" 2>&1 || true
        # shellcheck disable=SC2086
        "$LC" --threads "$T" --chained --model $spec --a cpu --b "cuda:$p:nhwc" \
            >"$WORK/$m-$p-chained.txt" 2>&1 || true
        grep -q "B = cuda:$p:nhwc (NHWC $p)" "$WORK/$m-$p-chained.txt" ||
            fail "$m: cuda:$p:nhwc did not store NHWC $p: $(head -1 "$WORK/$m-$p-chained.txt")"
        "$PYTHON" "$TESTS_SRCDIR/check_chained.py" "$WORK/$m-$p-chained.txt" \
            "$WORK/$m-$p-fake.txt" >"$WORK/$m-$p-check.txt" || {
            cat "$WORK/$m-$p-check.txt"
            fail "$m $p NHWC --chained: beyond its bounds (above)"
        }
        pass "$m $p NHWC --chained: $(tail -1 "$WORK/$m-$p-check.txt")"
    done
done
