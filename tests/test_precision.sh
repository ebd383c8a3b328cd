#!/usr/bin/env bash
# test_precision.sh - --precision without bf16 hardware (docs/gpu.md "Precision"): --help shows
# it with its default; tf32, fp16 and a bf16 without any bf16 GEMM are refused on the CPU (exit 2,
# one line, no file); fp16's dynamic loss scaling in the real training loop on 2 ranks. fp16 runs
# only on GPUs, so the scaler's path is driven here with fp32 arithmetic (DTBENCH_TEST_LOSS_SCALING=1)
# and overflows are injected on rank 0 only (DTBENCH_TEST_OVERFLOW=3,4: an inf in one gradient
# before the exchange). Checked: the default run's root attribute precision=fp32, and
#   - scaling by 65536 and unscaling is exact (a power of two): final parameters bit for bit those
#     of the plain run (/ranks/param_hash), loss_scale 65536 and no step skipped;
#   - an overflow on rank 0 reaches every rank through the average: both ranks skip steps 3 and 4,
#     the scale halves at each (65536, 32768, then 16384), losses before the overflow equal the
#     plain run's and differ after it, and the final parameters differ.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

help=$("$DTBENCH" --help)
grep -q '\[fp32\]' <<<"$(grep -A1 -- '--precision {fp32,tf32,bf16,fp16}' <<<"$help")" ||
    fail "--help does not show --precision {fp32,tf32,bf16,fp16} with its default [fp32]"
pass "--help shows --precision with its default"

expect_bad 0 "--precision: 'fp64' is not accepted: expected one of fp32,tf32,bf16,fp16" \
    --precision fp64 --output bad.h5
expect_bad 0 "--precision: 'tf32' is not accepted with --device cpu: tf32 is a GPU tensor-core mode" \
    --precision tf32 --output bad.h5
expect_bad 2 "--precision: 'fp16' is not accepted with --device cpu: fp16 is a GPU tensor-core mode" \
    --precision fp16 --output bad.h5
DTBENCH_BF16_ENGINE=none expect_bad 0 \
    "--precision: 'bf16' is not accepted with --device cpu: .*; expected fp32" \
    --precision bf16 --output bad.h5

common=(--model lenet --dataset synthetic --batch 16 --iters 8 --warmup 0 --sample-hz 0
    --calibrate-iters 0)
run_np 2 "${common[@]}" --output plain.h5 >plain.log
DTBENCH_TEST_LOSS_SCALING=1 run_np 2 "${common[@]}" --output scaled.h5 >scaled.log
DTBENCH_TEST_LOSS_SCALING=1 DTBENCH_TEST_OVERFLOW=3,4 run_np 2 "${common[@]}" \
    --output overflow.h5 >overflow.log
pycheck precision loss-scaling plain.h5 scaled.h5 overflow.h5
pass "fp16 loss scaling in the training loop (GradScaler's rules)"
