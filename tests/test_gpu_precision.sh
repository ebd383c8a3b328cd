#!/usr/bin/env bash
# test_gpu_precision.sh - --precision on the GPU (docs/gpu.md "Precision"). Skipped (77) without
# the CUDA backend or without a GPU. Written without a GPU: not run yet.
#   1. LeNet on Fashion-MNIST, 900 iterations, same seed, in fp32, tf32, bf16 and fp16: each
#      within 1 point of fp32's test accuracy; fp32's must be > 0.80.
#   2. /ranks/kernel_choices' first line names each precision's cuBLAS/cuDNN mode, and fp32's
#      convolutions use FMA-only algorithms while tf32/bf16/fp16 may use TENSOR_OP ones.
#   3. fp16: /iterations/loss_scale starts at 65536 and only halves (skipped steps) or doubles,
#      step_skipped is 0/1 and agrees with a halving of the next iteration's scale; bf16/tf32/fp32
#      record scale 1 and no skipped step.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"
cd "$WORK"

args=(--device cuda --model lenet --dataset fashion-mnist --data-dir "$FMNIST_DIR" --batch 64
    --iters 900 --warmup 1 --sample-hz 0 --calibrate-iters 0 --flush-every 100)
for p in fp32 tf32 bf16 fp16; do
    run_np 1 "${args[@]}" --precision "$p" --output "$p.h5" >"$p.log"
done
pycheck gpu precisions fp32.h5 tf32.h5 bf16.h5 fp16.h5
pass "LeNet on the GPU in tf32/bf16/fp16 within 1 point of fp32; modes recorded; fp16 scaler"
