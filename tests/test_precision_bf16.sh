#!/usr/bin/env bash
# test_precision_bf16.sh - --precision bf16 on the CPU (docs/gpu.md "Precision"): the mode is in
# the printed configuration, the file's root attributes and config_json, and backend_info names
# the bf16 GEMM that ran; LeNet trained on Fashion-MNIST in bf16 reaches the fp32 run's test
# accuracy within 1 point (same seed, same data order; the runs differ only in the rounding of the
# GEMM and convolution inputs to bf16); --threads 2 gives the --threads 1 result bit for bit on
# dtbench's own engine, within 1e-4 on oneDNN's. The accuracy runs are a long check (long_part).
# Skips (exit 77, saying why) where dtbench refuses bf16: a CPU without AVX512-BF16 and an
# OpenBLAS without cblas_sbgemm (scripts/test.sh accepts that skip only when /proc/cpuinfo has no
# avx512_bf16).
. "$(dirname "$0")/lib.sh"
cd "$WORK"

if ! "$DTBENCH" --precision bf16 --dry-run >dry.txt 2>dry.err; then
    echo "SKIP: this machine cannot run bf16: $(cat dry.err)"
    exit 77
fi

# --threads 2: dtbench's own engine (avx512bf16) splits C's columns over 2 threads and sums every
# element in the same order, so the parameters are bit for bit those of --threads 1. oneDNN's
# (the default where it runs) splits reductions (the convolutions' weight gradients) over its
# threads: there --threads 2 must train to parameters within 1e-4 of --threads 1 (3 steps).
own=
grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && own=avx512bf16
for e in $own default; do
    for t in 1 2; do
        DTBENCH_BF16_ENGINE=$([ "$e" = default ] || echo "$e") run_np 1 --model lenet \
            --dataset synthetic --batch 64 --iters 3 --warmup 0 --sample-hz 0 --precision bf16 \
            --threads $t --output "$e$t.h5" --save-model "$e$t.params" >/dev/null
    done
    pycheck precision threads "${e}1.h5" "${e}2.h5" "${e}1.params" "${e}2.params" ||
        fail "--threads 2 changed the bf16 result"
done

run_np 2 --model lenet --dataset synthetic --batch 16 --iters 3 --warmup 0 --sample-hz 0 \
    --precision bf16 --output short.h5 >short.log
grep -Eq '^  precision +bf16$' short.log || fail "the printed configuration lacks precision bf16"
pycheck precision recorded short.h5

# The accuracy over one epoch is a long check (two runs of ~1 min on an idle core, ~40 s of CPU):
# the quick suite's bf16 arithmetic is checked against PyTorch's by test_precision_torch.sh.
long_part "bf16 LeNet trained for an epoch against fp32's accuracy" || exit 0
[ -e "$FMNIST_DIR/train-images-idx3-ubyte.gz" ] || fail "no Fashion-MNIST in $FMNIST_DIR"
# One epoch at batch 64 on one rank.
args=(--model lenet --dataset fashion-mnist --data-dir "$FMNIST_DIR" --batch 64 --iters 900
    --warmup 0 --sample-hz 0 --calibrate-iters 0 --flush-every 100)
run_np 1 "${args[@]}" --precision fp32 --output fp32.h5 >fp32.log
run_np 1 "${args[@]}" --precision bf16 --output bf16.h5 >bf16.log
pycheck precision accuracy fp32.h5 bf16.h5 --points 1 # LeNet Fashion-MNIST, 900 iterations
pass "bf16 LeNet within 1 point of fp32"
